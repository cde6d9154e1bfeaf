/* The SCRAM credential cache: see credential_cache.h. A chained hash table of users keyed by the
 * znode name, behind one mutex (entries are small and copied out under it). */
#include "security/credential_cache.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "security/sasl_server.h"
#include "zk/kzk.h"

#define NBUCKETS 256

struct user {
    struct user *next;
    char *name; /* znode name (sanitized) */
    bool has256, has512;
    struct gr_scram_cred c256, c512;
};

struct gr_credential_cache {
    pthread_mutex_t mu;
    struct user *buckets[NBUCKETS]; /* guarded by mu */
    int n;                          /* guarded by mu */
};

struct gr_credential_cache *gr_credcache_new(void) {
    struct gr_credential_cache *c = gr_calloc(1, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

static void user_free(struct user *u) {
    free(u->name);
    OPENSSL_cleanse(u, sizeof *u);
    free(u);
}

void gr_credcache_free(struct gr_credential_cache *c) {
    if (!c) return;
    for (int i = 0; i < NBUCKETS; i++)
        for (struct user *u = c->buckets[i], *next; u; u = next) {
            next = u->next;
            user_free(u);
        }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* The link pointing at the user `name` (or at the NULL ending its bucket). Caller holds mu. */
static struct user **find(struct gr_credential_cache *c, const char *name) {
    struct user **pp = &c->buckets[gr_str_hash(name) % NBUCKETS];
    while (*pp && strcmp((*pp)->name, name) != 0) pp = &(*pp)->next;
    return pp;
}

void gr_credcache_remove(struct gr_credential_cache *c, const char *name) {
    pthread_mutex_lock(&c->mu);
    struct user **pp = find(c, name);
    struct user *u = *pp;
    if (u) {
        *pp = u->next;
        c->n--;
    }
    pthread_mutex_unlock(&c->mu);
    if (u) user_free(u);
}

void gr_credcache_update(struct gr_credential_cache *c, const char *name, const struct gr_kzk_config *cfg) {
    struct user *nu = gr_calloc(1, sizeof *nu);
    const char *v256 = cfg ? gr_kzk_config_get(cfg, gr_scram_mech_name(GR_SCRAM_SHA_256)) : NULL;
    const char *v512 = cfg ? gr_kzk_config_get(cfg, gr_scram_mech_name(GR_SCRAM_SHA_512)) : NULL;
    nu->has256 = v256 && gr_scram_cred_parse(GR_SCRAM_SHA_256, v256, &nu->c256) == 0;
    nu->has512 = v512 && gr_scram_cred_parse(GR_SCRAM_SHA_512, v512, &nu->c512) == 0;
    if (!nu->has256 && !nu->has512) {
        user_free(nu);
        gr_credcache_remove(c, name);
        return;
    }
    nu->name = gr_strdup(name);
    pthread_mutex_lock(&c->mu);
    struct user **pp = find(c, name);
    struct user *old = *pp;
    nu->next = old ? old->next : NULL;
    *pp = nu;
    if (!old) c->n++;
    pthread_mutex_unlock(&c->mu);
    if (old) user_free(old);
}

int gr_credcache_get(struct gr_credential_cache *c, enum gr_scram_mech m, const char *user, struct gr_scram_cred *out) {
    if (!c || !user) return -ENOENT;
    char *name = gr_sanitize_user(user);
    int rc = -ENOENT;
    pthread_mutex_lock(&c->mu);
    struct user *u = *find(c, name);
    if (u && m == GR_SCRAM_SHA_256 && u->has256) *out = u->c256, rc = 0;
    if (u && m == GR_SCRAM_SHA_512 && u->has512) *out = u->c512, rc = 0;
    pthread_mutex_unlock(&c->mu);
    free(name);
    return rc;
}

int gr_credcache_size(struct gr_credential_cache *c) {
    pthread_mutex_lock(&c->mu);
    int n = c->n;
    pthread_mutex_unlock(&c->mu);
    return n;
}
