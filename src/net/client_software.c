/* Connections per client software (KIP-511); see client_software.h. */
#include "net/client_software.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

struct gr_client_sw {
    struct gr_client_sw *next;
    char *listener, *name, *version;
    int64_t count;
};

struct gr_client_sw_table {
    pthread_mutex_t mu;
    struct gr_client_sw *head;
};

/* The slot of a closed connection. */
static struct gr_client_sw closed_marker;
#define CLOSED (&closed_marker)

struct gr_client_sw_table *gr_client_sw_new(void) {
    struct gr_client_sw_table *t = gr_calloc(1, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    return t;
}

static void entry_free(struct gr_client_sw *e) {
    free(e->listener);
    free(e->name);
    free(e->version);
    free(e);
}

void gr_client_sw_free(struct gr_client_sw_table *t) {
    if (!t) return;
    while (t->head) {
        struct gr_client_sw *e = t->head;
        t->head = e->next;
        entry_free(e);
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* Drops one connection from e (mu held); the entry goes with its last one. */
static void release_locked(struct gr_client_sw_table *t, struct gr_client_sw *e) {
    if (!e || e == CLOSED || --e->count > 0) return;
    for (struct gr_client_sw **p = &t->head; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            entry_free(e);
            return;
        }
}

/* The entry (listener, name, version) with one more connection, made if the listener has room
 * (mu held); NULL when full. */
static struct gr_client_sw *take_locked(struct gr_client_sw_table *t, const char *listener, const char *name,
                                        const char *version) {
    int n = 0;
    for (struct gr_client_sw *e = t->head; e; e = e->next) {
        if (strcmp(e->listener, listener) != 0) continue;
        if (strcmp(e->name, name) == 0 && strcmp(e->version, version) == 0) {
            e->count++;
            return e;
        }
        n++;
    }
    if (n >= GR_CLIENT_SW_MAX_ENTRIES) return NULL;
    struct gr_client_sw *e = gr_calloc(1, sizeof *e);
    e->listener = gr_strdup(listener);
    e->name = gr_strdup(name);
    e->version = gr_strdup(version);
    e->count = 1;
    e->next = t->head;
    t->head = e;
    return e;
}

void gr_client_sw_open(struct gr_client_sw_table *t, struct gr_client_sw **slot, const char *listener) {
    pthread_mutex_lock(&t->mu);
    *slot = take_locked(t, listener, "unknown", "unknown");
    pthread_mutex_unlock(&t->mu);
}

void gr_client_sw_set(struct gr_client_sw_table *t, struct gr_client_sw **slot, const char *listener,
                      const char *name, const char *version) {
    pthread_mutex_lock(&t->mu);
    if (*slot != CLOSED) {
        release_locked(t, *slot);
        *slot = take_locked(t, listener, name && *name ? name : "unknown", version && *version ? version : "unknown");
    }
    pthread_mutex_unlock(&t->mu);
}

void gr_client_sw_close(struct gr_client_sw_table *t, struct gr_client_sw **slot) {
    pthread_mutex_lock(&t->mu);
    release_locked(t, *slot);
    *slot = CLOSED;
    pthread_mutex_unlock(&t->mu);
}

void gr_client_sw_foreach(struct gr_client_sw_table *t, gr_client_sw_fn fn, void *ctx) {
    pthread_mutex_lock(&t->mu);
    for (struct gr_client_sw *e = t->head; e; e = e->next) fn(ctx, e->listener, e->name, e->version, e->count);
    pthread_mutex_unlock(&t->mu);
}
