/* The simulation's ZooKeeper model (tests/sim/zkmodel.h) made usable by ONE real, multi-threaded
 * broker in-process (gr_server_set_zk_open): a zk/backend.h backend whose every call takes one
 * mutex and forwards to a zm client, plus a thread that delivers the model's queued watch and
 * session notifications (the simulation's scheduler does that; here nothing else would).
 *
 * Ownership: lzk_new makes the model; lzk_open (the gr_server_zk_open_fn) makes the one client
 * the server then owns and destroys at shutdown; lzk_free (after gr_server_free) stops the
 * delivery thread and frees the model. lzk_put writes znodes directly (fixtures, before startup).
 *
 * Locking: `mu` guards the model and its clients. Callbacks (the broker's gr_zk_watches
 * on_watch/on_session, which only copy and enqueue, backend.h rule 5) run with `mu` held, from
 * the delivery thread or from the start of the client's next call (zm flush-on-call). Sessions
 * never expire (the model's clock is never ticked), so no EXPIRED callback blocks under `mu`.
 *
 * Header-only: each fuzz target is its own program (tests/fuzz/fuzz_*.c); zkmodel.c is added to
 * the targets that include this (CMakeLists.txt). */
#ifndef GR_TESTS_FUZZ_LOCKED_ZKMODEL_H
#define GR_TESTS_FUZZ_LOCKED_ZKMODEL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sim/zkmodel.h"
#include "common/util.h"
#include "zk/backend.h"

struct lzk {
    pthread_mutex_t mu;
    struct zm *zm;
    pthread_t deliverer;
    atomic_bool stop;
};

struct lzk_client {
    struct gr_zk_backend base; /* first */
    struct lzk *z;
    struct gr_zk_backend *in;  /* the zm client's backend */
};

#define LZK_IN(b) (((struct lzk_client *)(b))->in)
#define LZK_LOCKED(b, call)                                                                        \
    do {                                                                                           \
        struct lzk *z_ = ((struct lzk_client *)(b))->z;                                            \
        pthread_mutex_lock(&z_->mu);                                                               \
        int rc_ = (call);                                                                          \
        pthread_mutex_unlock(&z_->mu);                                                             \
        return rc_;                                                                                \
    } while (0)

static int lzk_create(struct gr_zk_backend *b, const char *path, const void *data, int len, int flags, char **cp) {
    LZK_LOCKED(b, LZK_IN(b)->ops->create(LZK_IN(b), path, data, len, flags, cp));
}
static int lzk_delete(struct gr_zk_backend *b, const char *path, int version) {
    LZK_LOCKED(b, LZK_IN(b)->ops->delete_node(LZK_IN(b), path, version));
}
static int lzk_get(struct gr_zk_backend *b, const char *path, bool watch, char **data, int *len, struct gr_zstat *st) {
    LZK_LOCKED(b, LZK_IN(b)->ops->get(LZK_IN(b), path, watch, data, len, st));
}
static int lzk_set(struct gr_zk_backend *b, const char *path, const void *data, int len, int version,
                   struct gr_zstat *st) {
    LZK_LOCKED(b, LZK_IN(b)->ops->set(LZK_IN(b), path, data, len, version, st));
}
static int lzk_exists(struct gr_zk_backend *b, const char *path, bool watch, struct gr_zstat *st) {
    LZK_LOCKED(b, LZK_IN(b)->ops->exists(LZK_IN(b), path, watch, st));
}
static int lzk_get_children(struct gr_zk_backend *b, const char *path, bool watch, struct gr_zstrings *out) {
    LZK_LOCKED(b, LZK_IN(b)->ops->get_children(LZK_IN(b), path, watch, out));
}
static int lzk_multi(struct gr_zk_backend *b, const struct gr_zop *ops, int n, struct gr_zop_result *res) {
    LZK_LOCKED(b, LZK_IN(b)->ops->multi(LZK_IN(b), ops, n, res));
}
static int lzk_multi_many(struct gr_zk_backend *b, struct gr_zmulti *m, int n) {
    LZK_LOCKED(b, gr_zkb_multi_many(LZK_IN(b), m, n));
}
static int lzk_get_many(struct gr_zk_backend *b, const char *const *paths, int n, bool watch,
                        struct gr_zget_result *res) {
    LZK_LOCKED(b, LZK_IN(b)->ops->get_many(LZK_IN(b), paths, n, watch, res));
}
static int lzk_get_children_many(struct gr_zk_backend *b, const char *const *paths, int n, bool watch,
                                 struct gr_zchildren_result *res) {
    LZK_LOCKED(b, LZK_IN(b)->ops->get_children_many(LZK_IN(b), paths, n, watch, res));
}
static int lzk_session(struct gr_zk_backend *b, struct gr_zsession *out) {
    LZK_LOCKED(b, LZK_IN(b)->ops->session(LZK_IN(b), out));
}
static int lzk_close_session(struct gr_zk_backend *b, const struct gr_zsession *s) {
    LZK_LOCKED(b, LZK_IN(b)->ops->close_session(LZK_IN(b), s));
}
static int lzk_wait_connected(struct gr_zk_backend *b, int timeout_ms) {
    LZK_LOCKED(b, LZK_IN(b)->ops->wait_connected(LZK_IN(b), timeout_ms));
}
static void lzk_destroy(struct gr_zk_backend *b) {
    struct lzk_client *c = (struct lzk_client *)b;
    pthread_mutex_lock(&c->z->mu);
    gr_zkb_destroy(c->in);
    pthread_mutex_unlock(&c->z->mu);
    free(c);
}

static const struct gr_zk_backend_ops lzk_ops = {
    .create = lzk_create,
    .delete_node = lzk_delete,
    .get = lzk_get,
    .set = lzk_set,
    .exists = lzk_exists,
    .get_children = lzk_get_children,
    .multi = lzk_multi,
    .multi_many = lzk_multi_many,
    .get_many = lzk_get_many,
    .get_children_many = lzk_get_children_many,
    .session = lzk_session,
    .close_session = lzk_close_session,
    .wait_connected = lzk_wait_connected,
    .destroy = lzk_destroy,
};

static void *lzk_deliver_main(void *arg) {
    struct lzk *z = arg;
    while (!atomic_load(&z->stop)) {
        int delivered = 0;
        pthread_mutex_lock(&z->mu);
        struct zm_client *cs[8];
        int n = zm_deliverable(z->zm, cs, 8);
        for (int i = 0; i < n && i < 8; i++)
            while (zm_deliver_one(cs[i])) delivered++;
        pthread_mutex_unlock(&z->mu);
        if (!delivered) usleep(1000);
    }
    return NULL;
}

static inline struct lzk *lzk_new(void) {
    struct lzk *z = gr_calloc(1, sizeof *z);
    pthread_mutex_init(&z->mu, NULL);
    z->zm = zm_new();
    zm_set_time(z->zm, gr_wall_ms());
    if (pthread_create(&z->deliverer, NULL, lzk_deliver_main, z) != 0) abort();
    return z;
}

/* gr_server_zk_open_fn: arg is the struct lzk. */
static inline int lzk_open(void *arg, const struct gr_zk_real_config *zc, struct gr_zk_backend **out) {
    struct lzk *z = arg;
    struct lzk_client *c = gr_calloc(1, sizeof *c);
    c->base.ops = &lzk_ops;
    c->base.on_watch = zc->on_watch;
    c->base.on_session = zc->on_session;
    c->base.cb_ctx = zc->cb_ctx;
    c->base.session_timeout_ms = zc->session_timeout_ms;
    c->z = z;
    pthread_mutex_lock(&z->mu);
    c->in = zm_backend(zm_client_new(z->zm, zc->session_timeout_ms, zc->on_watch, zc->on_session, zc->cb_ctx));
    pthread_mutex_unlock(&z->mu);
    *out = &c->base;
    return GR_ZOK;
}

/* Creates path (and its missing parents, empty) with data; a fixture written before startup. */
static inline void lzk_put(struct lzk *z, const char *path, const char *data) {
    struct gr_zk_backend *b;
    struct gr_zk_real_config zc = {.session_timeout_ms = 6000};
    lzk_open(z, &zc, &b);
    char buf[512];
    for (const char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
        snprintf(buf, sizeof buf, "%.*s", (int)(p - path), path);
        gr_zkb_create(b, buf, NULL, 0, 0, NULL);
    }
    if (gr_zkb_create(b, path, data, (int)strlen(data), 0, NULL) != GR_ZOK) abort();
    gr_zkb_destroy(b);
}

static inline void lzk_free(struct lzk *z) {
    if (!z) return;
    atomic_store(&z->stop, true);
    pthread_join(z->deliverer, NULL);
    zm_free(z->zm);
    pthread_mutex_destroy(&z->mu);
    free(z);
}

#endif
