/* Watch dispatch: maps ZooKeeper watch events to registered handlers (Kafka's
 * ZNodeChangeHandler / ZNodeChildChangeHandler / StateChangeHandler registries).
 *
 * Locking:
 *  - w->mu protects the tables; it is never held while a handler runs.
 *  - Node/child events are dispatched with w->dispatch held, so unregister can wait for a
 *    running handler to finish (it takes and drops w->dispatch) — unless the unregistering
 *    thread IS the dispatcher (a handler unregistering itself), which is detected.
 *  - Session handlers are dispatched WITHOUT w->dispatch: the EXPIRED callback may block until
 *    the controller has processed Expire, and the controller unregisters node handlers while
 *    doing so. Consequently unregistering a session handler does not wait for a running call.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "zk/kzk.h"

struct entry {
    char *key;
    void *fn;
    void *ctx;
    struct entry *next;
};

struct table {
    struct entry **buckets;
    size_t nbuckets;
    size_t count;
};

struct gr_zk_watches {
    pthread_mutex_t mu;
    pthread_mutex_t dispatch;
    pthread_t dispatcher;
    bool dispatching;
    struct table nodes;
    struct table children;
    struct table sessions;
};

static void table_init(struct table *t) {
    t->nbuckets = 64;
    t->buckets = gr_calloc(t->nbuckets, sizeof(*t->buckets));
    t->count = 0;
}

static void table_clear(struct table *t) {
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct entry *e = t->buckets[i];
        while (e) {
            struct entry *n = e->next;
            free(e->key);
            free(e);
            e = n;
        }
        t->buckets[i] = NULL;
    }
    t->count = 0;
}

static void table_grow(struct table *t) {
    size_t nb = t->nbuckets * 2;
    struct entry **b = gr_calloc(nb, sizeof(*b));
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct entry *e = t->buckets[i];
        while (e) {
            struct entry *n = e->next;
            size_t j = gr_str_hash(e->key) & (nb - 1);
            e->next = b[j];
            b[j] = e;
            e = n;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = nb;
}

static struct entry *table_find(struct table *t, const char *key) {
    for (struct entry *e = t->buckets[gr_str_hash(key) & (t->nbuckets - 1)]; e; e = e->next)
        if (strcmp(e->key, key) == 0) return e;
    return NULL;
}

static void table_put(struct table *t, const char *key, void *fn, void *ctx) {
    struct entry *e = table_find(t, key);
    if (!e) {
        if (t->count + 1 > t->nbuckets) table_grow(t);
        e = gr_calloc(1, sizeof(*e));
        e->key = gr_strdup(key);
        size_t j = gr_str_hash(key) & (t->nbuckets - 1);
        e->next = t->buckets[j];
        t->buckets[j] = e;
        t->count++;
    }
    e->fn = fn;
    e->ctx = ctx;
}

static bool table_del(struct table *t, const char *key) {
    struct entry **pp = &t->buckets[gr_str_hash(key) & (t->nbuckets - 1)];
    for (; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->key, key) == 0) {
            struct entry *e = *pp;
            *pp = e->next;
            free(e->key);
            free(e);
            t->count--;
            return true;
        }
    }
    return false;
}

struct gr_zk_watches *gr_zk_watches_new(void) {
    struct gr_zk_watches *w = gr_calloc(1, sizeof(*w));
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->dispatch, NULL);
    table_init(&w->nodes);
    table_init(&w->children);
    table_init(&w->sessions);
    return w;
}

void gr_zk_watches_free(struct gr_zk_watches *w) {
    if (!w) return;
    table_clear(&w->nodes);
    table_clear(&w->children);
    table_clear(&w->sessions);
    free(w->nodes.buckets);
    free(w->children.buckets);
    free(w->sessions.buckets);
    pthread_mutex_destroy(&w->mu);
    pthread_mutex_destroy(&w->dispatch);
    free(w);
}

/* Waits until no node/child handler is running (unless we are that handler). */
static void wait_dispatch(struct gr_zk_watches *w) {
    pthread_mutex_lock(&w->mu);
    bool self = w->dispatching && pthread_equal(w->dispatcher, pthread_self());
    pthread_mutex_unlock(&w->mu);
    if (self) return;
    pthread_mutex_lock(&w->dispatch);
    pthread_mutex_unlock(&w->dispatch);
}

void gr_zk_watches_on_watch(void *arg, int type, const char *path) {
    struct gr_zk_watches *w = arg;
    pthread_mutex_lock(&w->dispatch);
    pthread_mutex_lock(&w->mu);
    struct table *t = type == GR_ZWATCH_CHILD ? &w->children : &w->nodes;
    struct entry *e = table_find(t, path);
    void *fn = e ? e->fn : NULL;
    void *ctx = e ? e->ctx : NULL;
    w->dispatcher = pthread_self();
    w->dispatching = true;
    pthread_mutex_unlock(&w->mu);
    if (fn) {
        if (type == GR_ZWATCH_CHILD) ((gr_zk_child_handler)fn)(ctx, path);
        else ((gr_zk_node_handler)fn)(ctx, type, path);
    }
    pthread_mutex_lock(&w->mu);
    w->dispatching = false;
    pthread_mutex_unlock(&w->mu);
    pthread_mutex_unlock(&w->dispatch);
}

void gr_zk_watches_on_session(void *arg, int state) {
    struct gr_zk_watches *w = arg;
    /* Snapshot the handlers so none runs under w->mu. */
    pthread_mutex_lock(&w->mu);
    size_t n = w->sessions.count, i = 0;
    struct entry *snap = gr_calloc(n ? n : 1, sizeof(*snap));
    for (size_t b = 0; b < w->sessions.nbuckets; b++)
        for (struct entry *e = w->sessions.buckets[b]; e && i < n; e = e->next) snap[i++] = *e;
    pthread_mutex_unlock(&w->mu);
    for (size_t j = 0; j < i; j++) ((gr_zk_session_handler)snap[j].fn)(snap[j].ctx, state);
    free(snap);
}

void gr_zk_watches_register_node(struct gr_zk_watches *w, const char *path, gr_zk_node_handler fn,
                                 void *ctx) {
    pthread_mutex_lock(&w->mu);
    table_put(&w->nodes, path, (void *)fn, ctx);
    pthread_mutex_unlock(&w->mu);
}

void gr_zk_watches_unregister_node(struct gr_zk_watches *w, const char *path) {
    pthread_mutex_lock(&w->mu);
    table_del(&w->nodes, path);
    pthread_mutex_unlock(&w->mu);
    wait_dispatch(w);
}

void gr_zk_watches_register_child(struct gr_zk_watches *w, const char *path,
                                  gr_zk_child_handler fn, void *ctx) {
    pthread_mutex_lock(&w->mu);
    table_put(&w->children, path, (void *)fn, ctx);
    pthread_mutex_unlock(&w->mu);
}

void gr_zk_watches_unregister_child(struct gr_zk_watches *w, const char *path) {
    pthread_mutex_lock(&w->mu);
    table_del(&w->children, path);
    pthread_mutex_unlock(&w->mu);
    wait_dispatch(w);
}

void gr_zk_watches_register_session(struct gr_zk_watches *w, const char *name,
                                    gr_zk_session_handler fn, void *ctx) {
    pthread_mutex_lock(&w->mu);
    table_put(&w->sessions, name, (void *)fn, ctx);
    pthread_mutex_unlock(&w->mu);
}

void gr_zk_watches_unregister_session(struct gr_zk_watches *w, const char *name) {
    pthread_mutex_lock(&w->mu);
    table_del(&w->sessions, name);
    pthread_mutex_unlock(&w->mu);
}

void gr_zk_watches_clear_nodes(struct gr_zk_watches *w) {
    pthread_mutex_lock(&w->mu);
    table_clear(&w->nodes);
    table_clear(&w->children);
    pthread_mutex_unlock(&w->mu);
    wait_dispatch(w);
}
