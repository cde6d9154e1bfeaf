/* Kafka's AclAuthorizer: see authorizer.h. */
#include "security/authorizer.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "zk/acl_znodes.h"
#include "zk/backend.h"
#include "zk/kzk.h"

#define LOGGER "kafka.security.authorizer.AclAuthorizer"
#define AUDIT "kafka.authorizer.logger"
#define MAX_UPDATE_RETRIES 10
#define RECHECK_MS 1000
#define CHANGE_EXPIRATION_MS (15 * 60 * 1000) /* ZkNodeChangeNotificationListener's default */
#define RELOAD_BACKOFF_MIN_MS 100             /* a failed reload is retried after this, doubling ... */
#define RELOAD_BACKOFF_MAX_MS 5000            /* ... up to this */

/* One cached resource pattern and its ACLs (VersionedAcls). */
struct res {
    int8_t type, pattern;
    char *name;
    struct gr_acl_entry *e;
    int n;
    int32_t zk_version;
};

/* One change path's listener state. */
struct change_store {
    const char *path;
    int extended;
    long long last_seq; /* highest processed, -1 none */
};

struct gr_authorizer {
    char **super_users;
    int n_super;
    bool allow_if_no_acl;

    pthread_rwlock_t cache_lock; /* guards res/n_res */
    struct res **res;
    int n_res, cap_res;

    pthread_mutex_t update_mu;   /* Kafka's `lock`: admin updates and notification processing */
    struct gr_kzk *kzk;
    struct gr_zk_watches *watches;
    struct change_store stores[2];

    /* Resources whose reload after a change notification failed (ZooKeeper unreachable, an
     * unparsable znode): retried with back-off until one succeeds, so a change is never lost
     * (listener thread only). */
    struct res *pending;
    int n_pending, cap_pending;
    int64_t retry_at_ms;
    int retry_backoff_ms;

    pthread_t thread;
    bool has_thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool dirty, stop;
};

/* ---- configuration ---- */

static char *trim_dup(const char *s, size_t n) {
    while (n && isspace((unsigned char)*s)) s++, n--;
    while (n && isspace((unsigned char)s[n - 1])) n--;
    return gr_strndup(s, n);
}

struct gr_authorizer *gr_authorizer_new(const struct gr_authorizer_config *cfg) {
    struct gr_authorizer *a = gr_calloc(1, sizeof *a);
    a->allow_if_no_acl = cfg && cfg->allow_everyone_if_no_acl_found;
    for (const char *s = cfg ? cfg->super_users : NULL; s && *s;) {
        const char *semi = strchr(s, ';');
        size_t len = semi ? (size_t)(semi - s) : strlen(s);
        char *p = trim_dup(s, len);
        if (*p) {
            a->super_users = gr_realloc(a->super_users, (size_t)(a->n_super + 1) * sizeof(char *));
            a->super_users[a->n_super++] = p;
        } else {
            free(p);
        }
        s = semi ? semi + 1 : NULL;
    }
    pthread_rwlock_init(&a->cache_lock, NULL);
    pthread_mutex_init(&a->update_mu, NULL);
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    a->stores[0] = (struct change_store){GR_ACL_CHANGES_LITERAL, 0, -1};
    a->stores[1] = (struct change_store){GR_ACL_CHANGES_EXTENDED, 1, -1};
    return a;
}

bool gr_authorizer_is_super_user(const struct gr_authorizer *a, const char *principal) {
    for (int i = 0; i < a->n_super; i++)
        if (strcmp(a->super_users[i], principal) == 0) return true;
    return false;
}

/* ---- cache (callers hold cache_lock) ---- */

static struct res *find_res(struct gr_authorizer *a, int type, int pattern, const char *name) {
    for (int i = 0; i < a->n_res; i++) {
        struct res *r = a->res[i];
        if (r->type == type && r->pattern == pattern && strcmp(r->name, name) == 0) return r;
    }
    return NULL;
}

static void res_free(struct res *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) gr_acl_entry_release(&r->e[i]);
    free(r->e);
    free(r->name);
    free(r);
}

void gr_authorizer_cache_put(struct gr_authorizer *a, int type, int pattern, const char *name,
                             const struct gr_acl_entry *e, int n, int32_t zk_version) {
    struct res *nr = NULL;
    if (n > 0) {
        nr = gr_calloc(1, sizeof *nr);
        nr->type = (int8_t)type;
        nr->pattern = (int8_t)pattern;
        nr->name = gr_strdup(name);
        nr->e = gr_calloc((size_t)n, sizeof *nr->e);
        for (int i = 0; i < n; i++) gr_acl_entry_copy(&nr->e[i], &e[i]);
        nr->n = n;
        nr->zk_version = zk_version;
    }
    pthread_rwlock_wrlock(&a->cache_lock);
    int idx = -1;
    for (int i = 0; i < a->n_res && idx < 0; i++)
        if (a->res[i]->type == type && a->res[i]->pattern == pattern && strcmp(a->res[i]->name, name) == 0) idx = i;
    struct res *old = idx >= 0 ? a->res[idx] : NULL;
    if (nr && idx >= 0) {
        a->res[idx] = nr;
    } else if (nr) {
        if (a->n_res == a->cap_res) {
            a->cap_res = a->cap_res ? 2 * a->cap_res : 16;
            a->res = gr_realloc(a->res, (size_t)a->cap_res * sizeof *a->res);
        }
        a->res[a->n_res++] = nr;
    } else if (idx >= 0) {
        a->res[idx] = a->res[--a->n_res];
    }
    pthread_rwlock_unlock(&a->cache_lock);
    res_free(old);
}

/* ---- decision ---- */

void gr_acl_host_normalize(const char *addr, char *out, size_t n) {
    struct in6_addr a6;
    if (inet_pton(AF_INET6, addr, &a6) != 1) {
        snprintf(out, n, "%s", addr);
        return;
    }
    const uint8_t *b = a6.s6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) {
        snprintf(out, n, "%u.%u.%u.%u", b[12], b[13], b[14], b[15]);
        return;
    }
    snprintf(out, n, "%x:%x:%x:%x:%x:%x:%x:%x", b[0] << 8 | b[1], b[2] << 8 | b[3], b[4] << 8 | b[5], b[6] << 8 | b[7],
             b[8] << 8 | b[9], b[10] << 8 | b[11], b[12] << 8 | b[13], b[14] << 8 | b[15]);
}

static bool entry_matches(const struct gr_acl_entry *e, int perm, int op, const char *principal, const char *host) {
    return e->perm == perm && (strcmp(e->principal, principal) == 0 || strcmp(e->principal, GR_ACL_WILDCARD_PRINCIPAL) == 0) &&
           (e->op == op || e->op == GR_ACL_OP_ALL) && (strcmp(e->host, host) == 0 || strcmp(e->host, GR_ACL_WILDCARD) == 0);
}

static bool res_applies(const struct res *r, int type, const char *name) {
    if (r->type != type) return false;
    if (r->pattern == GR_ACL_PAT_LITERAL) return strcmp(r->name, name) == 0 || strcmp(r->name, GR_ACL_WILDCARD) == 0;
    return r->pattern == GR_ACL_PAT_PREFIXED && strncmp(name, r->name, strlen(r->name)) == 0;
}

/* Does an ACL of the applicable resources match? *any is set when any ACL applies at all. */
static bool match_any(struct gr_authorizer *a, int type, const char *name, int perm, const int *ops, int n_ops,
                      const char *principal, const char *host, bool *any) {
    for (int i = 0; i < a->n_res; i++) {
        const struct res *r = a->res[i];
        if (!res_applies(r, type, name)) continue;
        *any = true;
        for (int j = 0; j < r->n; j++)
            for (int k = 0; k < n_ops; k++)
                if (entry_matches(&r->e[j], perm, ops[k], principal, host)) return true;
    }
    return false;
}

bool gr_authorizer_authorize(struct gr_authorizer *a, const char *principal, const char *host, int op,
                             int resource_type, const char *name, bool log_denied) {
    if (!principal) principal = "User:ANONYMOUS";
    if (!host) host = "";
    bool allowed;
    if (gr_authorizer_is_super_user(a, principal)) {
        allowed = true;
    } else {
        int ops[5] = {op}, n_ops = 1;
        if (op == GR_ACL_OP_DESCRIBE) {
            ops[1] = GR_ACL_OP_READ, ops[2] = GR_ACL_OP_WRITE, ops[3] = GR_ACL_OP_DELETE, ops[4] = GR_ACL_OP_ALTER;
            n_ops = 5;
        } else if (op == GR_ACL_OP_DESCRIBE_CONFIGS) {
            ops[1] = GR_ACL_OP_ALTER_CONFIGS;
            n_ops = 2;
        }
        bool any = false;
        pthread_rwlock_rdlock(&a->cache_lock);
        bool deny = match_any(a, resource_type, name, GR_ACL_PERM_DENY, &op, 1, principal, host, &any);
        allowed = !deny && match_any(a, resource_type, name, GR_ACL_PERM_ALLOW, ops, n_ops, principal, host, &any);
        pthread_rwlock_unlock(&a->cache_lock);
        if (!any) allowed = a->allow_if_no_acl;
    }
    gr_log(allowed || !log_denied ? GR_LOG_DEBUG : GR_LOG_INFO, AUDIT,
           "Principal = %s is %s Operation = %s from host = %s on resource = %s:LITERAL:%s", principal,
           allowed ? "Allowed" : "Denied", gr_acl_op_name(op), host, gr_acl_resource_type_name(resource_type), name);
    return allowed;
}

/* ---- updates (Kafka's updateResourceAcls) ---- */

/* Transforms the current ACLs into the new ones (*out malloc'd, entries owned). Returns whether
 * anything changed. */
typedef bool (*transform_fn)(void *ctx, const struct res *key, const struct gr_acl_entry *cur, int n,
                             struct gr_acl_entry **out, int *n_out);

static void entries_free(struct gr_acl_entry *e, int n) { gr_acl_entries_free(e, n); }

/* Copy of the cached ACLs of a resource, *version -1 when not cached. */
static bool cached_copy(struct gr_authorizer *a, const struct res *key, struct gr_acl_entry **e, int *n,
                        int32_t *version) {
    pthread_rwlock_rdlock(&a->cache_lock);
    struct res *r = find_res(a, key->type, key->pattern, key->name);
    if (r) {
        *e = gr_calloc((size_t)r->n, sizeof **e);
        for (int i = 0; i < r->n; i++) gr_acl_entry_copy(&(*e)[i], &r->e[i]);
        *n = r->n;
        *version = r->zk_version;
    }
    pthread_rwlock_unlock(&a->cache_lock);
    return r != NULL;
}

static int read_zk(struct gr_authorizer *a, const struct res *key, struct gr_acl_entry **e, int *n, int32_t *version) {
    int rc = gr_acl_znodes_read(a->kzk, key->pattern, key->type, key->name, e, n, version);
    if (rc == GR_KZK_ENONODE) {
        *e = NULL, *n = 0, *version = -1;
        return 0;
    }
    return rc;
}

static void backoff(void) {
    struct timespec ts = {0, (100 + rand() % 50) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Caller holds update_mu. Returns 0 or a kzk error. */
static int update_resource(struct gr_authorizer *a, const struct res *key, transform_fn fn, void *ctx) {
    struct gr_acl_entry *cur = NULL, *next = NULL;
    int n = 0, n_next = 0, rc = 0;
    int32_t ver = -1, new_ver = 0;
    if (!cached_copy(a, key, &cur, &n, &ver) && (rc = read_zk(a, key, &cur, &n, &ver)) != 0) return rc;
    bool changed = false, done = false;
    for (int tries = 0; tries <= MAX_UPDATE_RETRIES && !done; tries++) {
        changed = fn(ctx, key, cur, n, &next, &n_next);
        if (n_next == 0 && ver < 0) {
            rc = 0; /* nothing stored, nothing to store */
        } else {
            rc = gr_acl_znodes_write(a->kzk, key->pattern, key->type, key->name, next, n_next, ver, &new_ver);
        }
        if (rc == GR_KZK_EBADVERSION || rc == GR_KZK_EEXISTS || rc == GR_KZK_ENONODE) {
            entries_free(next, n_next);
            entries_free(cur, n);
            next = NULL, cur = NULL, n_next = 0, n = 0;
            backoff();
            if ((rc = read_zk(a, key, &cur, &n, &ver)) != 0) return rc;
            rc = GR_KZK_EBADVERSION;
            continue;
        }
        done = true;
    }
    if (done && rc == 0) {
        gr_authorizer_cache_put(a, key->type, key->pattern, key->name, next, n_next, new_ver);
        if (changed) {
            gr_info(LOGGER, "Updated ACLs for %s:%s:%s (%d ACLs, version %d)", gr_acl_resource_type_name(key->type),
                    gr_acl_pattern_name(key->pattern), key->name, n_next, new_ver);
            int nrc = gr_acl_znodes_notify(a->kzk, key->pattern, key->type, key->name);
            if (nrc) gr_error(LOGGER, "Cannot write the ACL change notification: %s", gr_kzk_strerror(nrc));
        }
    } else if (!done) {
        gr_error(LOGGER, "Failed to update ACLs for %s:%s after %d retries", gr_acl_resource_type_name(key->type),
                 key->name, MAX_UPDATE_RETRIES);
        rc = rc ? rc : GR_EZK;
    }
    entries_free(next, n_next);
    entries_free(cur, n);
    return rc;
}

/* ---- CreateAcls ---- */

struct add_ctx {
    const struct gr_acl_binding *bindings;
    const int *idx;
    int n;
};

static bool add_transform(void *vctx, const struct res *key, const struct gr_acl_entry *cur, int n,
                          struct gr_acl_entry **out, int *n_out) {
    (void)key;
    struct add_ctx *c = vctx;
    struct gr_acl_entry *e = gr_calloc((size_t)(n + c->n) + 1, sizeof *e);
    int m = 0;
    for (int i = 0; i < n; i++) gr_acl_entry_copy(&e[m++], &cur[i]);
    bool changed = false;
    for (int i = 0; i < c->n; i++) {
        const struct gr_acl_entry *add = &c->bindings[c->idx[i]].entry;
        bool dup = false;
        for (int j = 0; j < m && !dup; j++) dup = gr_acl_entry_equal(&e[j], add);
        if (!dup) {
            gr_acl_entry_copy(&e[m++], add);
            changed = true;
        }
    }
    *out = e;
    *n_out = m;
    return changed;
}

void gr_authorizer_create_acls(struct gr_authorizer *a, const struct gr_acl_binding *bindings, int n,
                               int16_t *errors) {
    int *idx = gr_calloc((size_t)n + 1, sizeof *idx);
    bool *done = gr_calloc((size_t)n + 1, sizeof *done);
    pthread_mutex_lock(&a->update_mu);
    for (int i = 0; i < n; i++) {
        if (done[i]) continue;
        /* every binding of the same resource pattern in one update */
        int m = 0;
        for (int j = i; j < n; j++)
            if (!done[j] && bindings[j].resource_type == bindings[i].resource_type &&
                bindings[j].pattern_type == bindings[i].pattern_type && strcmp(bindings[j].name, bindings[i].name) == 0) {
                idx[m++] = j;
                done[j] = true;
            }
        struct res key = {.type = bindings[i].resource_type, .pattern = bindings[i].pattern_type,
                          .name = bindings[i].name};
        struct add_ctx c = {bindings, idx, m};
        int rc = a->kzk ? update_resource(a, &key, add_transform, &c) : GR_EZK;
        for (int j = 0; j < m; j++) errors[idx[j]] = rc ? GR_KERR_UNKNOWN_SERVER_ERROR : GR_KERR_NONE;
    }
    pthread_mutex_unlock(&a->update_mu);
    free(idx);
    free(done);
}

/* ---- DeleteAcls ---- */

struct del_ctx {
    const struct gr_acl_filter *filters;
    int n_filters;
    /* per attempt: removed entries and the filter each counted for */
    struct gr_acl_entry *removed;
    int *removed_filter;
    int n_removed;
};

static bool del_transform(void *vctx, const struct res *key, const struct gr_acl_entry *cur, int n,
                          struct gr_acl_entry **out, int *n_out) {
    struct del_ctx *c = vctx;
    entries_free(c->removed, c->n_removed);
    free(c->removed_filter);
    c->removed = gr_calloc((size_t)n + 1, sizeof *c->removed);
    c->removed_filter = gr_calloc((size_t)n + 1, sizeof *c->removed_filter);
    c->n_removed = 0;
    struct gr_acl_entry *e = gr_calloc((size_t)n + 1, sizeof *e);
    int m = 0;
    for (int i = 0; i < n; i++) {
        int hit = -1;
        for (int f = 0; f < c->n_filters && hit < 0; f++)
            if (gr_acl_filter_matches_pattern(&c->filters[f], key->type, key->pattern, key->name) &&
                gr_acl_filter_matches_entry(&c->filters[f], &cur[i]))
                hit = f;
        if (hit >= 0) {
            gr_acl_entry_copy(&c->removed[c->n_removed], &cur[i]);
            c->removed_filter[c->n_removed++] = hit;
        } else {
            gr_acl_entry_copy(&e[m++], &cur[i]);
        }
    }
    *out = e;
    *n_out = m;
    return c->n_removed > 0;
}

/* Adds (type, pattern, name) to keys unless present. */
static void add_key(struct res **keys, int *n, int *cap, int type, int pattern, const char *name) {
    for (int i = 0; i < *n; i++)
        if ((*keys)[i].type == type && (*keys)[i].pattern == pattern && strcmp((*keys)[i].name, name) == 0) return;
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        *keys = gr_realloc(*keys, (size_t)*cap * sizeof **keys);
    }
    (*keys)[(*n)++] = (struct res){.type = (int8_t)type, .pattern = (int8_t)pattern, .name = gr_strdup(name)};
}

void gr_authorizer_delete_acls(struct gr_authorizer *a, const struct gr_acl_filter *filters, int n,
                               gr_acl_binding_fn fn, void *ctx) {
    pthread_mutex_lock(&a->update_mu);
    struct res *keys = NULL;
    int n_keys = 0, cap = 0;
    pthread_rwlock_rdlock(&a->cache_lock);
    for (int i = 0; i < a->n_res; i++) add_key(&keys, &n_keys, &cap, a->res[i]->type, a->res[i]->pattern, a->res[i]->name);
    pthread_rwlock_unlock(&a->cache_lock);
    /* filters naming exactly one (or two, ANY) resource patterns (matchesAtMostOne) */
    for (int f = 0; f < n; f++) {
        const struct gr_acl_filter *fl = &filters[f];
        if (!fl->name || fl->resource_type == GR_ACL_RES_ANY || fl->pattern_type == GR_ACL_PAT_MATCH) continue;
        if (fl->pattern_type == GR_ACL_PAT_LITERAL || fl->pattern_type == GR_ACL_PAT_ANY)
            add_key(&keys, &n_keys, &cap, fl->resource_type, GR_ACL_PAT_LITERAL, fl->name);
        if (fl->pattern_type == GR_ACL_PAT_PREFIXED || fl->pattern_type == GR_ACL_PAT_ANY)
            add_key(&keys, &n_keys, &cap, fl->resource_type, GR_ACL_PAT_PREFIXED, fl->name);
    }
    for (int k = 0; k < n_keys; k++) {
        bool any = false;
        for (int f = 0; f < n && !any; f++)
            any = gr_acl_filter_matches_pattern(&filters[f], keys[k].type, keys[k].pattern, keys[k].name);
        if (!any || !a->kzk) continue;
        struct del_ctx c = {.filters = filters, .n_filters = n};
        int rc = update_resource(a, &keys[k], del_transform, &c);
        for (int i = 0; i < c.n_removed; i++) {
            struct gr_acl_binding b = {.resource_type = keys[k].type, .pattern_type = keys[k].pattern,
                                       .name = keys[k].name, .entry = c.removed[i]};
            fn(ctx, c.removed_filter[i], &b, rc ? GR_KERR_UNKNOWN_SERVER_ERROR : GR_KERR_NONE);
        }
        entries_free(c.removed, c.n_removed);
        free(c.removed_filter);
    }
    pthread_mutex_unlock(&a->update_mu);
    for (int k = 0; k < n_keys; k++) free(keys[k].name);
    free(keys);
}

void gr_authorizer_acls(struct gr_authorizer *a, const struct gr_acl_filter *filter, gr_acl_binding_fn fn, void *ctx) {
    pthread_rwlock_rdlock(&a->cache_lock);
    for (int i = 0; i < a->n_res; i++) {
        const struct res *r = a->res[i];
        if (!gr_acl_filter_matches_pattern(filter, r->type, r->pattern, r->name)) continue;
        for (int j = 0; j < r->n; j++) {
            if (!gr_acl_filter_matches_entry(filter, &r->e[j])) continue;
            struct gr_acl_binding b = {.resource_type = r->type, .pattern_type = r->pattern, .name = r->name,
                                       .entry = r->e[j]};
            fn(ctx, 0, &b, GR_KERR_NONE);
        }
    }
    pthread_rwlock_unlock(&a->cache_lock);
}

/* ---- ZooKeeper: cache load and change notifications ---- */

/* Reads one resource's ACLs from ZooKeeper into the cache. Caller holds update_mu. Returns 0 or
 * a kzk error (unreachable, unparsable: logged); the cache is then unchanged. */
static int reload_resource(struct gr_authorizer *a, int type, int pattern, const char *name) {
    struct res key = {.type = (int8_t)type, .pattern = (int8_t)pattern, .name = (char *)name};
    struct gr_acl_entry *e = NULL;
    int n = 0;
    int32_t ver = -1;
    int rc = read_zk(a, &key, &e, &n, &ver);
    if (rc == 0) {
        gr_info(LOGGER, "Processing Acl change notification for %s:%s:%s, %d ACLs, zkVersion %d",
                gr_acl_resource_type_name(type), gr_acl_pattern_name(pattern), name, n, ver);
        gr_authorizer_cache_put(a, type, pattern, name, e, n, ver);
    }
    entries_free(e, n);
    return rc;
}

/* ---- failed reloads: retried until they succeed (listener thread only) ---- */

static void pending_remove(struct gr_authorizer *a, int type, int pattern, const char *name) {
    for (int i = 0; i < a->n_pending; i++) {
        struct res *p = &a->pending[i];
        if (p->type != type || p->pattern != pattern || strcmp(p->name, name) != 0) continue;
        free(p->name);
        a->pending[i] = a->pending[--a->n_pending];
        return;
    }
}

static void pending_add(struct gr_authorizer *a, int type, int pattern, const char *name) {
    pending_remove(a, type, pattern, name);
    if (a->n_pending == a->cap_pending) {
        a->cap_pending = a->cap_pending ? 2 * a->cap_pending : 8;
        a->pending = gr_realloc(a->pending, (size_t)a->cap_pending * sizeof *a->pending);
    }
    a->pending[a->n_pending++] =
        (struct res){.type = (int8_t)type, .pattern = (int8_t)pattern, .name = gr_strdup(name)};
    if (!a->retry_backoff_ms) {
        a->retry_backoff_ms = RELOAD_BACKOFF_MIN_MS;
        a->retry_at_ms = gr_mono_ms() + a->retry_backoff_ms;
    }
}

/* Applies a change notification for one resource: a failed reload is kept for a retry (Kafka's
 * ZooKeeper client retries a read until it is connected; Gregor also retries an unparsable
 * znode, since skipping it could keep an ALLOW that was removed). */
static void apply_change(struct gr_authorizer *a, int type, int pattern, const char *name) {
    pthread_mutex_lock(&a->update_mu);
    int rc = reload_resource(a, type, pattern, name);
    pthread_mutex_unlock(&a->update_mu);
    if (rc == 0) {
        pending_remove(a, type, pattern, name);
        return;
    }
    char *path = gr_acl_znode_path(pattern, type, name);
    gr_error(LOGGER,
             "Cannot reload the ACLs of %s after a change notification: %s; the cache keeps the "
             "previous ACLs and the reload is retried",
             path, gr_kzk_strerror(rc));
    free(path);
    pending_add(a, type, pattern, name);
}

/* Retries the failed reloads whose back-off is over. */
static void retry_pending(struct gr_authorizer *a) {
    if (a->n_pending == 0 || gr_mono_ms() < a->retry_at_ms) return;
    int failed = 0;
    for (int i = a->n_pending - 1; i >= 0; i--) {
        struct res *p = &a->pending[i];
        pthread_mutex_lock(&a->update_mu);
        int rc = reload_resource(a, p->type, p->pattern, p->name);
        pthread_mutex_unlock(&a->update_mu);
        if (rc == 0) {
            gr_info(LOGGER, "Reloaded the ACLs of %s:%s:%s (an earlier reload had failed)",
                    gr_acl_resource_type_name(p->type), gr_acl_pattern_name(p->pattern), p->name);
            free(p->name);
            a->pending[i] = a->pending[--a->n_pending];
        } else {
            failed++;
        }
    }
    if (!failed) {
        a->retry_backoff_ms = 0;
        return;
    }
    a->retry_backoff_ms = GR_MIN(2 * a->retry_backoff_ms, RELOAD_BACKOFF_MAX_MS);
    a->retry_at_ms = gr_mono_ms() + a->retry_backoff_ms;
    gr_warn(LOGGER, "%d ACL reload(s) still failing; next retry in %d ms", failed, a->retry_backoff_ms);
}

static int load_cache(struct gr_authorizer *a) {
    static const int pats[] = {GR_ACL_PAT_LITERAL, GR_ACL_PAT_PREFIXED};
    pthread_mutex_lock(&a->update_mu);
    int rc = 0;
    for (size_t p = 0; p < GR_ARRAY_LEN(pats) && !rc; p++)
        for (int t = GR_ACL_RES_TOPIC; t <= GR_ACL_RES_LAST && !rc; t++) {
            char **names = NULL;
            int n = 0;
            rc = gr_acl_znodes_list(a->kzk, pats[p], t, &names, &n);
            for (int i = 0; i < n; i++) {
                if (!rc && (rc = reload_resource(a, t, pats[p], names[i])) != 0) {
                    /* skipping the znode would drop its DENYs (Kafka fails its start-up for JSON of the wrong
                     * shape, and reads bytes that are not JSON as no ACLs: Gregor refuses both) */
                    char *path = gr_acl_znode_path(pats[p], t, names[i]);
                    gr_error(LOGGER, "Cannot load the ACLs of %s: %s", path, gr_kzk_strerror(rc));
                    free(path);
                }
                free(names[i]);
            }
            free(names);
        }
    pthread_mutex_unlock(&a->update_mu);
    return rc;
}

static long long seq_of(const char *name) {
    size_t pl = strlen(GR_ACL_CHANGE_PREFIX);
    if (strncmp(name, GR_ACL_CHANGE_PREFIX, pl) != 0) return -1;
    char *end;
    long long v = strtoll(name + pl, &end, 10);
    return *end ? -1 : v;
}

/* Processes the notifications of one change path newer than last_seq (all when apply is false:
 * only records the highest sequence, for start-up before the cache load). */
static void process_store(struct gr_authorizer *a, struct change_store *s, bool apply) {
    struct gr_zstrings names = {0};
    int rc = gr_kzk_watch_children(a->kzk, s->path, &names);
    if (rc) {
        if (rc != GR_KZK_ENONODE) gr_warn(LOGGER, "Cannot list %s: %s", s->path, gr_kzk_strerror(rc));
        gr_zstrings_free(&names);
        return;
    }
    int64_t now = gr_wall_ms();
    for (;;) {
        long long best = -1;
        int bi = -1;
        for (int i = 0; i < names.count; i++) {
            long long q = seq_of(names.names[i]);
            if (q > s->last_seq && (best < 0 || q < best)) best = q, bi = i;
        }
        if (bi < 0) break;
        char *path = gr_asprintf("%s/%s", s->path, names.names[bi]);
        char *data = NULL;
        int len = 0;
        struct gr_zstat st = {0};
        int zrc = gr_zkb_get(gr_kzk_backend(a->kzk), path, false, &data, &len, &st);
        if (zrc == GR_ZOK && apply) {
            int type, pattern;
            char *name = NULL;
            if (gr_acl_change_decode(data, (size_t)len, s->extended, &type, &pattern, &name) == 0) {
                apply_change(a, type, pattern, name);
            } else {
                gr_warn(LOGGER, "Ignoring ACL change notification %s: cannot parse it", path);
            }
            free(name);
        } else if (zrc != GR_ZOK && zrc != GR_ZNONODE) {
            gr_warn(LOGGER, "Cannot read %s: %s; retried later", path, gr_zrc_name(zrc));
            free(data);
            free(path);
            break;
        }
        /* purge notifications older than 15 minutes (any broker may; races are harmless) */
        if (zrc == GR_ZOK && st.ctime > 0 && now - st.ctime > CHANGE_EXPIRATION_MS)
            (void)gr_zkb_delete(gr_kzk_backend(a->kzk), path, GR_ZANY_VERSION);
        free(data);
        free(path);
        s->last_seq = best;
    }
    gr_zstrings_free(&names);
}

static void on_change_child(void *arg, const char *path) {
    (void)path;
    struct gr_authorizer *a = arg;
    pthread_mutex_lock(&a->mu);
    a->dirty = true;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

static void *listener_main(void *arg) {
    struct gr_authorizer *a = arg;
    pthread_mutex_lock(&a->mu);
    while (!a->stop) {
        a->dirty = false;
        pthread_mutex_unlock(&a->mu);
        for (int i = 0; i < 2; i++) process_store(a, &a->stores[i], true);
        retry_pending(a);
        int64_t wait_ms = RECHECK_MS;
        if (a->n_pending) wait_ms = GR_MAX(1, GR_MIN(wait_ms, a->retry_at_ms - gr_mono_ms()));
        pthread_mutex_lock(&a->mu);
        if (a->dirty || a->stop) continue;
        struct timespec ts = gr_timespec_after_ms(CLOCK_REALTIME, wait_ms);
        pthread_cond_timedwait(&a->cv, &a->mu, &ts);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

int gr_authorizer_start(struct gr_authorizer *a, struct gr_kzk *kzk, struct gr_zk_watches *watches) {
    a->kzk = kzk;
    a->watches = watches;
    int rc = gr_acl_znodes_ensure_paths(kzk);
    if (rc) {
        gr_error(LOGGER, "Cannot create the ACL paths in ZooKeeper: %s", gr_kzk_strerror(rc));
        return rc;
    }
    for (int i = 0; i < 2; i++) {
        if (watches) gr_zk_watches_register_child(watches, a->stores[i].path, on_change_child, a);
        process_store(a, &a->stores[i], false); /* skip what the cache load below covers */
    }
    if ((rc = load_cache(a)) != 0) {
        gr_error(LOGGER, "Cannot load the ACLs from ZooKeeper: %s; the broker does not start without its ACLs",
                 gr_kzk_strerror(rc));
        return rc;
    }
    if (!watches) return 0; /* unit tests: no listener thread */
    if (pthread_create(&a->thread, NULL, listener_main, a) != 0) {
        gr_error(LOGGER, "Cannot start the ACL change listener thread");
        return GR_EZK;
    }
    a->has_thread = true;
    gr_info(LOGGER, "AclAuthorizer started: %d resource patterns with ACLs, %d super users", a->n_res, a->n_super);
    return 0;
}

void gr_authorizer_free(struct gr_authorizer *a) {
    if (!a) return;
    if (a->watches)
        for (int i = 0; i < 2; i++) gr_zk_watches_unregister_child(a->watches, a->stores[i].path);
    if (a->has_thread) {
        pthread_mutex_lock(&a->mu);
        a->stop = true;
        pthread_cond_signal(&a->cv);
        pthread_mutex_unlock(&a->mu);
        pthread_join(a->thread, NULL);
    }
    for (int i = 0; i < a->n_res; i++) res_free(a->res[i]);
    free(a->res);
    for (int i = 0; i < a->n_pending; i++) free(a->pending[i].name);
    free(a->pending);
    for (int i = 0; i < a->n_super; i++) free(a->super_users[i]);
    free(a->super_users);
    pthread_rwlock_destroy(&a->cache_lock);
    pthread_mutex_destroy(&a->update_mu);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a);
}
