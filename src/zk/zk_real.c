/* The real ZooKeeper backend over libzookeeper-mt (see backend.h for the contract).
 *
 * Handle lifetime:
 *  - r->zh is the current handle; calls hold r->hlock for reading while they use it, so a handle
 *    is only closed (write lock) when no call is inside it.
 *  - libzookeeper's global watcher runs on the handle's completion thread. It never takes
 *    r->hlock (zookeeper_close joins that thread while we hold the write lock); it only takes
 *    r->mu briefly. Each handle gets its own watcher context with a generation number, so late
 *    events from an old handle are dropped.
 *  - On ZOO_EXPIRED_SESSION_STATE the watcher wakes the reconnect thread, which: delivers
 *    EXPIRED (may block), detaches and closes the dead handle, then creates new handles until
 *    one connects, installs it and delivers NEW_SESSION.
 *  - get/get_children (single and many) use the async API with a countdown so many requests are
 *    in flight at once (at most GR_ZK_MAX_INFLIGHT); completions copy the data they are lent.
 *  - multi never calls zoo_multi on a handle that is dead or may be about to die (see
 *    multi_ready): libzookeeper-mt's zoo_amulti (3.8.0, and upstream as of this writing) frees
 *    memory twice when the handle is in an unrecoverable state (EXPIRED/AUTH_FAILED):
 *    Request_path_init frees the chroot-prefixed path of the first op and returns ZINVALIDSTATE,
 *    then zoo_amulti frees that path again (and later ops free a stale pointer). The dead handle
 *    stays installed while EXPIRED is being delivered, so without this the controller thread hit
 *    that double free in the chaos tests. The other calls check the state themselves and return
 *    ZINVALIDSTATE cleanly.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "zk/backend.h"
#include "zk/bulk_read.h"

#define LOGGER "zookeeper"
#define GR_ZK_MAX_INFLIGHT 4096

/* ---- shared helpers of backend.h ---- */

const char *gr_zrc_name(int rc) {
    switch (rc) {
    case GR_ZOK: return "OK";
    case GR_ZSYSTEMERROR: return "SYSTEMERROR";
    case GR_ZRUNTIMEINCONSISTENCY: return "RUNTIMEINCONSISTENCY";
    case GR_ZDATAINCONSISTENCY: return "DATAINCONSISTENCY";
    case GR_ZCONNECTIONLOSS: return "CONNECTIONLOSS";
    case GR_ZMARSHALLINGERROR: return "MARSHALLINGERROR";
    case GR_ZUNIMPLEMENTED: return "UNIMPLEMENTED";
    case GR_ZOPERATIONTIMEOUT: return "OPERATIONTIMEOUT";
    case GR_ZBADARGUMENTS: return "BADARGUMENTS";
    case GR_ZINVALIDSTATE: return "INVALIDSTATE";
    case GR_ZAPIERROR: return "APIERROR";
    case GR_ZNONODE: return "NONODE";
    case GR_ZNOAUTH: return "NOAUTH";
    case GR_ZBADVERSION: return "BADVERSION";
    case GR_ZNOCHILDRENFOREPHEMERALS: return "NOCHILDRENFOREPHEMERALS";
    case GR_ZNODEEXISTS: return "NODEEXISTS";
    case GR_ZNOTEMPTY: return "NOTEMPTY";
    case GR_ZSESSIONEXPIRED: return "SESSIONEXPIRED";
    case GR_ZINVALIDCALLBACK: return "INVALIDCALLBACK";
    case GR_ZINVALIDACL: return "INVALIDACL";
    case GR_ZAUTHFAILED: return "AUTHFAILED";
    case GR_ZCLOSING: return "CLOSING";
    case GR_ZNOTHING: return "NOTHING";
    case GR_ZSESSIONMOVED: return "SESSIONMOVED";
    default: return "UNKNOWN";
    }
}

void gr_zstrings_free(struct gr_zstrings *s) {
    if (!s) return;
    for (int i = 0; i < s->count; i++) free(s->names[i]);
    free(s->names);
    s->names = NULL;
    s->count = 0;
}

void gr_zop_results_release(struct gr_zop_result *r, int n) {
    for (int i = 0; r && i < n; i++) {
        free(r[i].created_path);
        r[i].created_path = NULL;
    }
}

void gr_zget_results_release(struct gr_zget_result *r, int n) {
    for (int i = 0; r && i < n; i++) {
        free(r[i].data);
        r[i].data = NULL;
    }
}

void gr_zchildren_results_release(struct gr_zchildren_result *r, int n) {
    for (int i = 0; r && i < n; i++) gr_zstrings_free(&r[i].children);
}

struct gr_zop gr_zop_create(const char *path, const void *data, int len, int flags) {
    return (struct gr_zop){.type = GR_ZOP_CREATE, .path = path, .data = data, .len = len, .flags = flags};
}
struct gr_zop gr_zop_delete(const char *path, int version) {
    return (struct gr_zop){.type = GR_ZOP_DELETE, .path = path, .version = version};
}
struct gr_zop gr_zop_set(const char *path, const void *data, int len, int version) {
    return (struct gr_zop){.type = GR_ZOP_SET, .path = path, .data = data, .len = len, .version = version};
}
struct gr_zop gr_zop_check(const char *path, int version) {
    return (struct gr_zop){.type = GR_ZOP_CHECK, .path = path, .version = version};
}

/* ---- the real backend ---- */

struct real;

/* Per-handle watcher context. Freed after its handle is closed. */
struct hctx {
    struct real *r;
    uint64_t gen;
    bool first_connect_seen;
};

struct real {
    struct gr_zk_backend base;
    char *connect;
    int conn_timeout_ms;

    pthread_rwlock_t hlock;     /* protects zh against close while in use */
    zhandle_t *zh;              /* NULL while expired/reconnecting/closed */
    struct hctx *hctx;

    pthread_mutex_t mu;         /* protects the fields below */
    pthread_cond_t cv;
    uint64_t gen;               /* generation of the current handle */
    bool connected;
    bool expired;               /* the current session expired; reconnect thread pending */
    bool closing;
    pthread_t reconnect_thread;
    bool thread_started;

    /* zookeeper.set.acl (see acl_for) and the digest identity added to every handle */
    char *digest_auth;          /* "user:password" or NULL */
    bool secure_acls;

    /* Kafka's ZooKeeper client metrics (backend.h); NULL without a registry */
    struct gr_histogram *latency;
    struct gr_meter *sync_connects, *disconnects, *expires, *auth_failures;
};

/* One request's time from send to answer, in ms (ZooKeeperRequestLatencyMs). */
static void zk_latency(struct real *r, int64_t from_us) {
    if (r && r->latency) gr_histogram_update(r->latency, (double)(gr_mono_us() - from_us) / 1000.0);
}

static void zk_mark(struct gr_meter *m) {
    if (m) gr_meter_mark(m, 1);
}

/* ---- zookeeper.set.acl: Kafka's ZkData.defaultAcls ----
 * Secure: CREATOR_ALL (the digest identity this handle authenticated with) plus world READ,
 * except under Kafka's sensitive roots (/config/users, /config/brokers,
 * /delegation_token/tokens), which get no world READ. Otherwise OPEN_ACL_UNSAFE. */
static struct ACL secure_entries[2];
static struct ACL_vector secure_acl = {2, secure_entries};
static struct ACL_vector secure_sensitive_acl = {1, secure_entries};

static pthread_once_t secure_once = PTHREAD_ONCE_INIT;
static void secure_init(void) {
    secure_entries[0] = (struct ACL){ZOO_PERM_ALL, ZOO_AUTH_IDS};
    secure_entries[1] = (struct ACL){ZOO_PERM_READ, ZOO_ANYONE_ID_UNSAFE};
}

static struct ACL_vector *acl_for(const struct real *r, const char *path) {
    if (!r->secure_acls) return &ZOO_OPEN_ACL_UNSAFE;
    static const char *const sensitive[] = {"/config/users", "/config/brokers", "/delegation_token/tokens"};
    pthread_once(&secure_once, secure_init);
    for (size_t i = 0; i < sizeof sensitive / sizeof sensitive[0]; i++)
        if (strncmp(path, sensitive[i], strlen(sensitive[i])) == 0) return &secure_sensitive_acl;
    return &secure_acl;
}

struct auth_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int rc;
};

static void auth_done(int rc, const void *data) {
    struct auth_wait *w = (struct auth_wait *)data;
    pthread_mutex_lock(&w->mu);
    w->rc = rc;
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Adds the digest identity to a connected handle and waits for the server's answer (the client
 * re-sends it by itself after a reconnect within the session). */
static int add_digest_auth(struct real *r, zhandle_t *zh, int timeout_ms) {
    if (!r->digest_auth) return GR_ZOK;
    struct auth_wait w = {.rc = GR_ZOPERATIONTIMEOUT};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    int rc = zoo_add_auth(zh, "digest", r->digest_auth, (int)strlen(r->digest_auth), auth_done, &w);
    if (rc == ZOK) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += timeout_ms / 1000 + 1;
        pthread_mutex_lock(&w.mu);
        while (!w.done && pthread_cond_timedwait(&w.cv, &w.mu, &dl) != ETIMEDOUT) {
        }
        rc = w.done ? w.rc : GR_ZOPERATIONTIMEOUT;
        pthread_mutex_unlock(&w.mu);
    }
    if (rc != ZOK) {
        gr_error(LOGGER, "ZooKeeper digest authentication failed: %s", gr_zrc_name(rc));
        /* the callback may still run: w must outlive it, so leak it on timeout */
        if (!w.done) return rc;
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return rc;
}

static void stat_from(struct gr_zstat *out, const struct Stat *s) {
    if (!out || !s) return;
    out->czxid = s->czxid;
    out->mzxid = s->mzxid;
    out->ctime = s->ctime;
    out->mtime = s->mtime;
    out->version = s->version;
    out->cversion = s->cversion;
    out->aversion = s->aversion;
    out->ephemeralOwner = s->ephemeralOwner;
    out->dataLength = s->dataLength;
    out->numChildren = s->numChildren;
    out->pzxid = s->pzxid;
}

static int zflags(int flags) {
    int f = ZOO_PERSISTENT;
    if ((flags & GR_ZEPHEMERAL) && (flags & GR_ZSEQUENCE)) f = ZOO_EPHEMERAL_SEQUENTIAL;
    else if (flags & GR_ZEPHEMERAL) f = ZOO_EPHEMERAL;
    else if (flags & GR_ZSEQUENCE) f = ZOO_PERSISTENT_SEQUENTIAL;
    return f;
}

static void deliver_session(struct real *r, int state) {
    if (r->base.on_session) r->base.on_session(r->base.cb_ctx, state);
}

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    struct hctx *h = ctx;
    struct real *r = h->r;
    pthread_mutex_lock(&r->mu);
    bool current = h->gen == r->gen && !r->closing;
    int deliver = 0;
    if (current && type == ZOO_SESSION_EVENT) {
        if (state == ZOO_CONNECTED_STATE) {
            zk_mark(r->sync_connects);
            r->connected = true;
            if (h->first_connect_seen) deliver = GR_ZSESSION_CONNECTED;
            h->first_connect_seen = true;
        } else if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE) {
            if (r->connected) {
                deliver = GR_ZSESSION_DISCONNECTED;
                zk_mark(r->disconnects);
            }
            r->connected = false;
        } else if (state == ZOO_EXPIRED_SESSION_STATE) {
            zk_mark(r->expires);
            r->connected = false;
            if (h->first_connect_seen) r->expired = true; /* reconnect thread takes over */
        } else if (state == ZOO_AUTH_FAILED_STATE) {
            zk_mark(r->auth_failures);
            deliver = GR_ZSESSION_AUTH_FAILED;
        }
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    if (!current) return;
    if (type == ZOO_SESSION_EVENT) {
        if (deliver) deliver_session(r, deliver);
        return;
    }
    int t = 0;
    if (type == ZOO_CREATED_EVENT) t = GR_ZWATCH_CREATED;
    else if (type == ZOO_DELETED_EVENT) t = GR_ZWATCH_DELETED;
    else if (type == ZOO_CHANGED_EVENT) t = GR_ZWATCH_CHANGED;
    else if (type == ZOO_CHILD_EVENT) t = GR_ZWATCH_CHILD;
    if (t && path && r->base.on_watch) r->base.on_watch(r->base.cb_ctx, t, path);
}

static void abs_deadline(struct timespec *ts, int ms) { *ts = gr_timespec_after_ms(CLOCK_REALTIME, ms); }

/* Creates a handle for r (generation bumped) and waits up to timeout_ms for CONNECTED.
 * Returns GR_ZOK with *out set, or an error (the handle is closed). */
static int new_handle(struct real *r, int timeout_ms, zhandle_t **out, struct hctx **hout) {
    struct hctx *h = gr_calloc(1, sizeof(*h));
    h->r = r;
    pthread_mutex_lock(&r->mu);
    h->gen = ++r->gen;
    r->connected = false;
    r->expired = false;
    pthread_mutex_unlock(&r->mu);
    zhandle_t *zh = zookeeper_init(r->connect, watcher, r->base.session_timeout_ms, NULL, h, 0);
    if (!zh) {
        int e = errno;
        gr_error(LOGGER, "cannot create ZooKeeper handle for '%s': %s", r->connect, strerror(e));
        free(h);
        return GR_ZSYSTEMERROR;
    }
    /* The C client re-resolves its server list on every I/O loop turn by default (getaddrinfo
     * showed up at 8% of a broker busy creating partitions); once a minute is plenty. */
    zoo_set_servers_resolution_delay(zh, 60000);
    struct timespec dl;
    abs_deadline(&dl, timeout_ms);
    pthread_mutex_lock(&r->mu);
    int rc = 0;
    while (!r->connected && !r->closing && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&r->cv, &r->mu, &dl);
    bool ok = r->connected && !r->closing;
    bool closing = r->closing;
    pthread_mutex_unlock(&r->mu);
    if (!ok) {
        zookeeper_close(zh);
        free(h);
        return closing ? GR_ZCLOSING : GR_ZOPERATIONTIMEOUT;
    }
    int arc = add_digest_auth(r, zh, timeout_ms);
    if (arc != GR_ZOK) {
        zookeeper_close(zh);
        free(h);
        return arc == ZAUTHFAILED ? GR_ZAUTHFAILED : arc;
    }
    *out = zh;
    *hout = h;
    return GR_ZOK;
}

static void *reconnect_main(void *arg) {
    struct real *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (!r->expired && !r->closing) pthread_cond_wait(&r->cv, &r->mu);
        bool closing = r->closing;
        pthread_mutex_unlock(&r->mu);
        if (closing) break;

        gr_warn(LOGGER, "ZooKeeper session expired; creating a new session");
        deliver_session(r, GR_ZSESSION_EXPIRED);
        pthread_rwlock_wrlock(&r->hlock);
        zhandle_t *old = r->zh;
        struct hctx *oldh = r->hctx;
        r->zh = NULL;
        r->hctx = NULL;
        pthread_rwlock_unlock(&r->hlock);
        if (old) zookeeper_close(old);
        free(oldh);

        for (;;) {
            zhandle_t *zh = NULL;
            struct hctx *h = NULL;
            int rc = new_handle(r, r->conn_timeout_ms, &zh, &h);
            if (rc == GR_ZOK) {
                pthread_rwlock_wrlock(&r->hlock);
                r->zh = zh;
                r->hctx = h;
                pthread_rwlock_unlock(&r->hlock);
                const clientid_t *cid = zoo_client_id(zh);
                gr_info(LOGGER, "new ZooKeeper session established, session id 0x%llx",
                        (unsigned long long)cid->client_id);
                deliver_session(r, GR_ZSESSION_NEW_SESSION);
                break;
            }
            if (rc == GR_ZCLOSING) break;
            gr_warn(LOGGER, "reconnecting to ZooKeeper at '%s' failed (%s); retrying", r->connect,
                    gr_zrc_name(rc));
            usleep(200 * 1000);
        }
    }
    return NULL;
}

/* Takes the current handle for one call; returns NULL with *rc set when there is none. */
static zhandle_t *acquire(struct real *r, int *rc) {
    pthread_rwlock_rdlock(&r->hlock);
    if (!r->zh) {
        pthread_mutex_lock(&r->mu);
        *rc = r->closing ? GR_ZCLOSING : GR_ZSESSIONEXPIRED;
        pthread_mutex_unlock(&r->mu);
        pthread_rwlock_unlock(&r->hlock);
        return NULL;
    }
    return r->zh;
}

static void release(struct real *r) {
    pthread_rwlock_unlock(&r->hlock);
}

/* Whether zoo_multi may be called on zh (acquired: caller holds r->hlock for reading). A handle
 * whose state is unrecoverable makes zoo_amulti double-free (see the top of this file), so that
 * answers GR_ZSESSIONEXPIRED (GR_ZAUTHFAILED) without calling it, as acquire does once the
 * reconnect thread has detached the handle. The state only turns unrecoverable during a
 * reconnect handshake, so while the handle is (re)connecting we wait, at most timeout_ms, for it
 * to settle instead of racing the handshake: GR_ZOK once connected, GR_ZCONNECTIONLOSS after the
 * timeout (retryable, as zoo_multi's own answer would have been), GR_ZCLOSING when closing.
 * Every state change is followed by a session event (the watcher broadcasts r->cv); we also
 * re-check every 20 ms. What remains: a handle seen CONNECTED here would have to lose its
 * connection, reconnect and be told "expired" in the few microseconds before zoo_amulti checks
 * the state itself. */
static int multi_ready(struct real *r, zhandle_t *zh, int timeout_ms) {
    struct timespec dl;
    abs_deadline(&dl, timeout_ms);
    int rc;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        int st = zoo_state(zh);
        if (r->closing) { rc = GR_ZCLOSING; break; }
        if (st == ZOO_CONNECTED_STATE || st == ZOO_READONLY_STATE) { rc = GR_ZOK; break; }
        if (st == ZOO_AUTH_FAILED_STATE) { rc = GR_ZAUTHFAILED; break; }
        if (st < 0) { rc = GR_ZSESSIONEXPIRED; break; }
        struct timespec now, slice;
        clock_gettime(CLOCK_REALTIME, &now);
        if (now.tv_sec > dl.tv_sec || (now.tv_sec == dl.tv_sec && now.tv_nsec >= dl.tv_nsec)) {
            rc = GR_ZCONNECTIONLOSS;
            break;
        }
        abs_deadline(&slice, 20);
        if (slice.tv_sec > dl.tv_sec || (slice.tv_sec == dl.tv_sec && slice.tv_nsec > dl.tv_nsec))
            slice = dl;
        pthread_cond_timedwait(&r->cv, &r->mu, &slice);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* ---- async batches (get_many / get_children_many) ---- */

/* The submitting thread and the completion thread share `inflight`. The submitter fills the
 * window up to GR_ZK_MAX_INFLIGHT, then sleeps until it has drained to `wake_at` (half the window
 * while submitting, 0 at the end); completions signal only when that threshold is reached. Waking
 * the submitter on every completion made three threads (submitter, libzookeeper's I/O and
 * completion threads) ping-pong once per request, which on a busy machine cost more than the
 * reads (100k partition states: most of the controller's samples were in the scheduler). */
struct batch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int inflight;
    int wake_at;  /* -1: nobody waiting */
    int stop_rc;  /* multi_many: the first "did not run" answer, 0 while none */
    struct real *r;   /* for the latency histogram; NULL: not recorded */
    int64_t start_us; /* when the requests were sent (the first of them) */
};

#define GR_ZK_REFILL_AT (GR_ZK_MAX_INFLIGHT / 2)

struct slot {
    struct batch *b;
    struct gr_zget_result *get;
    struct gr_zchildren_result *ch;
};

static void batch_done(struct batch *b) {
    if (b->r) zk_latency(b->r, b->start_us);
    pthread_mutex_lock(&b->mu);
    b->inflight--;
    if (b->wake_at >= 0 && b->inflight <= b->wake_at) pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

/* Waits until at most `level` requests are in flight. */
static void batch_wait(struct batch *b, int level) {
    pthread_mutex_lock(&b->mu);
    b->wake_at = level;
    while (b->inflight > level) pthread_cond_wait(&b->cv, &b->mu);
    b->wake_at = -1;
    pthread_mutex_unlock(&b->mu);
}

static void data_cb(int rc, const char *value, int value_len, const struct Stat *stat,
                    const void *data) {
    struct slot *s = (struct slot *)data;
    struct gr_zget_result *g = s->get;
    g->rc = rc;
    if (rc == ZOK) {
        int n = value && value_len > 0 ? value_len : 0;
        g->data = gr_malloc((size_t)n + 1);
        if (n) memcpy(g->data, value, (size_t)n);
        g->data[n] = 0;
        g->len = n;
        stat_from(&g->stat, stat);
    }
    batch_done(s->b);
}

static void strings_cb(int rc, const struct String_vector *sv, const void *data) {
    struct slot *s = (struct slot *)data;
    struct gr_zchildren_result *c = s->ch;
    c->rc = rc;
    if (rc == ZOK && sv) {
        c->children.count = sv->count;
        c->children.names = gr_calloc((size_t)(sv->count > 0 ? sv->count : 1), sizeof(char *));
        for (int i = 0; i < sv->count; i++) c->children.names[i] = gr_strdup(sv->data[i]);
    }
    batch_done(s->b);
}

static int run_many(struct real *r, const char *const *paths, int n, bool watch,
                    struct gr_zget_result *gets, struct gr_zchildren_result *chs) {
    if (gets) memset(gets, 0, sizeof(*gets) * (size_t)(n > 0 ? n : 0));
    if (chs) memset(chs, 0, sizeof(*chs) * (size_t)(n > 0 ? n : 0));
    if (n <= 0) return GR_ZOK;
    int rc;
    zhandle_t *zh = acquire(r, &rc);
    if (!zh) {
        for (int i = 0; i < n; i++) {
            if (gets) gets[i].rc = rc;
            else chs[i].rc = rc;
        }
        return rc;
    }
    struct batch b = {.inflight = 0, .wake_at = -1, .r = r, .start_us = gr_mono_us()};
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    struct slot *slots = gr_calloc((size_t)n, sizeof(*slots));
    int room = 0; /* requests we may still submit without looking at `inflight` */
    for (int i = 0; i < n; i++) {
        if (room == 0) {
            pthread_mutex_lock(&b.mu);
            if (b.inflight > GR_ZK_REFILL_AT) { /* refill in chunks of at least half a window */
                pthread_mutex_unlock(&b.mu);
                batch_wait(&b, GR_ZK_REFILL_AT);
                pthread_mutex_lock(&b.mu);
            }
            room = GR_MIN(GR_ZK_MAX_INFLIGHT - b.inflight, n - i);
            b.inflight += room;
            pthread_mutex_unlock(&b.mu);
        }
        room--;
        slots[i].b = &b;
        int zrc;
        if (gets) {
            slots[i].get = &gets[i];
            zrc = zoo_aget(zh, paths[i], watch, data_cb, &slots[i]);
            if (zrc != ZOK) gets[i].rc = zrc;
        } else {
            slots[i].ch = &chs[i];
            zrc = zoo_aget_children(zh, paths[i], watch, strings_cb, &slots[i]);
            if (zrc != ZOK) chs[i].rc = zrc;
        }
        if (zrc != ZOK) batch_done(&b);
    }
    batch_wait(&b, 0);
    release(r);
    free(slots);
    pthread_mutex_destroy(&b.mu);
    pthread_cond_destroy(&b.cv);
    return GR_ZOK;
}

/* ---- vtable ---- */

static int r_create(struct gr_zk_backend *be, const char *path, const void *data, int len,
                    int flags, char **created_path) {
    struct real *r = (struct real *)be;
    int rc;
    zhandle_t *zh = acquire(r, &rc);
    if (!zh) return rc;
    size_t cap = strlen(path) + 32;
    char *buf = gr_malloc(cap);
    int64_t t0 = gr_mono_us();
    rc = zoo_create(zh, path, data, data ? len : -1, acl_for(r, path), zflags(flags), buf, (int)cap);
    zk_latency(r, t0);
    release(r);
    if (rc == ZOK && created_path) *created_path = buf;
    else free(buf);
    return rc;
}

static int r_delete(struct gr_zk_backend *be, const char *path, int version) {
    struct real *r = (struct real *)be;
    int rc;
    zhandle_t *zh = acquire(r, &rc);
    if (!zh) return rc;
    int64_t t0 = gr_mono_us();
    rc = zoo_delete(zh, path, version);
    zk_latency(r, t0);
    release(r);
    return rc;
}

static int r_get(struct gr_zk_backend *be, const char *path, bool watch, char **data, int *len,
                 struct gr_zstat *stat) {
    struct gr_zget_result g;
    const char *paths[1] = {path};
    int rc = run_many((struct real *)be, paths, 1, watch, &g, NULL);
    if (rc == GR_ZOK) rc = g.rc;
    if (rc == GR_ZOK) {
        if (data) *data = g.data;
        else free(g.data);
        if (len) *len = g.len;
        if (stat) *stat = g.stat;
    } else {
        free(g.data);
        if (data) *data = NULL;
        if (len) *len = 0;
    }
    return rc;
}

static int r_set(struct gr_zk_backend *be, const char *path, const void *data, int len,
                 int version, struct gr_zstat *stat) {
    struct real *r = (struct real *)be;
    int rc;
    zhandle_t *zh = acquire(r, &rc);
    if (!zh) return rc;
    struct Stat st;
    int64_t t0 = gr_mono_us();
    rc = zoo_set2(zh, path, data, data ? len : -1, version, &st);
    zk_latency(r, t0);
    release(r);
    if (rc == ZOK) stat_from(stat, &st);
    return rc;
}

static int r_exists(struct gr_zk_backend *be, const char *path, bool watch, struct gr_zstat *stat) {
    struct real *r = (struct real *)be;
    int rc;
    zhandle_t *zh = acquire(r, &rc);
    if (!zh) return rc;
    struct Stat st;
    int64_t t0 = gr_mono_us();
    rc = zoo_exists(zh, path, watch, &st);
    zk_latency(r, t0);
    release(r);
    if (rc == ZOK) stat_from(stat, &st);
    return rc;
}

static int r_get_children(struct gr_zk_backend *be, const char *path, bool watch,
                          struct gr_zstrings *out) {
    struct gr_zchildren_result c;
    const char *paths[1] = {path};
    int rc = run_many((struct real *)be, paths, 1, watch, NULL, &c);
    if (rc == GR_ZOK) rc = c.rc;
    if (rc == GR_ZOK) {
        *out = c.children;
    } else {
        gr_zstrings_free(&c.children);
        memset(out, 0, sizeof(*out));
    }
    return rc;
}

/* Reads of at least this many znodes without watches go through the bulk reader (bulk_read.h)
 * unless GREGOR_ZK_BULK_READ=0. */
#define GR_ZK_BULK_MIN 1000

static bool bulk_enabled(void) {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("GREGOR_ZK_BULK_READ");
        on = !(e && strcmp(e, "0") == 0);
    }
    return on;
}

/* The bulk reader on the server the session is connected to. GR_ZOK or an error (results zeroed). */
static int bulk_get(struct real *r, const char *const *paths, int n, struct gr_zget_result *results) {
    char hostport[300] = "";
    int rc;
    zhandle_t *zh = acquire(r, &rc);
    if (!zh) return rc;
    const char *cur = zoo_get_current_server(zh);
    if (cur) snprintf(hostport, sizeof hostport, "%s", cur);
    release(r);
    if (!hostport[0]) return GR_ZCONNECTIONLOSS;
    const char *slash = strchr(r->connect, '/');
    char *chroot = gr_strdup(slash && slash[1] ? slash : "");
    size_t cl = strlen(chroot);
    if (cl > 1 && chroot[cl - 1] == '/') chroot[cl - 1] = 0;
    struct gr_zk_bulk_target t = {.hostport = hostport, .chroot = chroot, .digest_auth = r->digest_auth,
                                  .timeout_ms = GR_MAX(r->base.session_timeout_ms, 10000)};
    int64_t t0 = gr_mono_ms();
    rc = gr_zk_bulk_get(&t, paths, n, results);
    if (rc == GR_ZOK) {
        gr_info(LOGGER, "read %d znodes through a bulk-read session at %s in %lld ms", n, hostport,
                 (long long)(gr_mono_ms() - t0));
    } else {
        static atomic_bool warned;
        if (!atomic_exchange(&warned, true))
            gr_warn(LOGGER, "bulk read of %d znodes through a second session at %s failed (%s); reading through the "
                    "main session (logged once)", n, hostport, gr_zrc_name(rc));
    }
    free(chroot);
    return rc;
}

static int r_get_many(struct gr_zk_backend *be, const char *const *paths, int n, bool watch,
                      struct gr_zget_result *results) {
    struct real *r = (struct real *)be;
    if (!watch && n >= GR_ZK_BULK_MIN && bulk_enabled() && bulk_get(r, paths, n, results) == GR_ZOK) return GR_ZOK;
    return run_many(r, paths, n, watch, results, NULL);
}

static int r_get_children_many(struct gr_zk_backend *be, const char *const *paths, int n,
                               bool watch, struct gr_zchildren_result *results) {
    return run_many((struct real *)be, paths, n, watch, NULL, results);
}

/* ---- multis (multi, multi_many) ----
 * Each multi is converted for libzookeeper into a struct zmulti that lives until its completion
 * (zoo_amulti keeps pointers to the op array, the results, the Stat of every set and the buffer
 * of every create). multi_many keeps up to GR_ZK_MULTI_WINDOW of them in flight on one handle;
 * ZooKeeper applies a session's requests in order. */

#define GR_ZK_MULTI_WINDOW 8

struct zmulti {
    struct batch *b;
    zoo_op_t *zops;
    zoo_op_result_t *zres;
    struct Stat *stats;
    char **bufs;
    int rc;
    bool sent;
    struct real *r;   /* latency: when it was sent */
    int64_t sent_us;
};

static void zmulti_prepare(struct real *r, struct zmulti *z, const struct gr_zop *ops, int n) {
    z->zops = gr_calloc((size_t)n, sizeof(*z->zops));
    z->zres = gr_calloc((size_t)n, sizeof(*z->zres));
    z->stats = gr_calloc((size_t)n, sizeof(*z->stats));
    z->bufs = gr_calloc((size_t)n, sizeof(char *));
    for (int i = 0; i < n; i++) {
        const struct gr_zop *o = &ops[i];
        switch (o->type) {
        case GR_ZOP_CREATE: {
            size_t cap = strlen(o->path) + 32;
            z->bufs[i] = gr_malloc(cap);
            zoo_create_op_init(&z->zops[i], o->path, o->data, o->data ? o->len : -1,
                               acl_for(r, o->path), zflags(o->flags), z->bufs[i], (int)cap);
            break;
        }
        case GR_ZOP_DELETE: zoo_delete_op_init(&z->zops[i], o->path, o->version); break;
        case GR_ZOP_SET:
            zoo_set_op_init(&z->zops[i], o->path, o->data, o->data ? o->len : -1, o->version,
                            &z->stats[i]);
            break;
        default: zoo_check_op_init(&z->zops[i], o->path, o->version); break;
        }
    }
}

/* Whether a multi's answer carries per-op results (the server ran it). */
static bool multi_ran(int rc) {
    return rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT && rc != ZINVALIDSTATE &&
           rc != ZSESSIONEXPIRED && rc != ZCLOSING && rc != ZMARSHALLINGERROR;
}

/* Copies a finished multi's outcome into m and frees z's buffers. */
static void zmulti_finish(struct zmulti *z, struct gr_zmulti *m) {
    bool per_op = z->sent && multi_ran(z->rc);
    for (int i = 0; i < m->n; i++) {
        m->results[i].rc = per_op ? z->zres[i].err : z->rc;
        if (per_op && z->rc == ZOK) {
            if (m->ops[i].type == GR_ZOP_CREATE) {
                m->results[i].created_path = z->bufs[i];
                z->bufs[i] = NULL;
            } else if (m->ops[i].type == GR_ZOP_SET) {
                stat_from(&m->results[i].stat, &z->stats[i]);
            }
        }
        free(z->bufs[i]);
    }
    m->rc = z->rc;
    free(z->bufs);
    free(z->stats);
    free(z->zres);
    free(z->zops);
}

/* Completion thread. A multi that came back without running (connection loss, expiry) sets
 * the batch's stop code: the submitter sends nothing more. */
static void multi_cb(int rc, const void *data) {
    struct zmulti *z = (struct zmulti *)data;
    struct batch *b = z->b;
    zk_latency(z->r, z->sent_us);
    pthread_mutex_lock(&b->mu);
    z->rc = rc;
    if (rc != ZOK && !multi_ran(rc) && b->stop_rc == 0) b->stop_rc = rc;
    b->inflight--;
    if (b->wake_at >= 0 && b->inflight <= b->wake_at) pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static int r_multi_many(struct gr_zk_backend *be, struct gr_zmulti *m, int n) {
    struct real *r = (struct real *)be;
    for (int i = 0; i < n; i++) {
        memset(m[i].results, 0, sizeof(*m[i].results) * (size_t)(m[i].n > 0 ? m[i].n : 0));
        m[i].rc = GR_ZOK;
    }
    if (n <= 0) return GR_ZOK;
    struct zmulti *z = gr_calloc((size_t)n, sizeof(*z));
    struct batch b = {.inflight = 0, .wake_at = -1};
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    int rc;
    zhandle_t *zh = acquire(r, &rc);
    /* Once a multi could not be sent, or came back without running (connection loss, expiry),
     * the later ones are not sent: they report the same code, "not applied". */
    int stop_rc = zh ? GR_ZOK : rc;
    for (int i = 0; i < n; i++) {
        z[i].b = &b;
        z[i].rc = stop_rc;
        if (m[i].n <= 0 || stop_rc != GR_ZOK) continue;
        batch_wait(&b, GR_ZK_MULTI_WINDOW - 1);
        pthread_mutex_lock(&b.mu);
        if (b.stop_rc) stop_rc = b.stop_rc;
        pthread_mutex_unlock(&b.mu);
        if (stop_rc == GR_ZOK) stop_rc = multi_ready(r, zh, r->conn_timeout_ms);
        if (stop_rc != GR_ZOK) {
            z[i].rc = stop_rc;
            continue;
        }
        zmulti_prepare(r, &z[i], m[i].ops, m[i].n);
        pthread_mutex_lock(&b.mu);
        b.inflight++;
        pthread_mutex_unlock(&b.mu);
        z[i].sent = true;
        z[i].r = r;
        z[i].sent_us = gr_mono_us();
        int zrc = zoo_amulti(zh, m[i].n, z[i].zops, z[i].zres, multi_cb, &z[i]);
        if (zrc != ZOK) {
            z[i].rc = zrc;
            z[i].sent = false;
            batch_done(&b);
            stop_rc = zrc;
        }
    }
    batch_wait(&b, 0);
    if (zh) release(r);
    for (int i = 0; i < n; i++) {
        if (z[i].zops) {
            zmulti_finish(&z[i], &m[i]);
        } else {
            for (int j = 0; j < m[i].n; j++) m[i].results[j].rc = z[i].rc;
            m[i].rc = z[i].rc;
        }
    }
    free(z);
    pthread_mutex_destroy(&b.mu);
    pthread_cond_destroy(&b.cv);
    return GR_ZOK;
}

static int r_multi(struct gr_zk_backend *be, const struct gr_zop *ops, int n,
                   struct gr_zop_result *results) {
    memset(results, 0, sizeof(*results) * (size_t)(n > 0 ? n : 0));
    if (n <= 0) return GR_ZOK;
    struct gr_zmulti m = {.ops = ops, .n = n, .results = results};
    r_multi_many(be, &m, 1);
    return m.rc;
}

static int r_session(struct gr_zk_backend *be, struct gr_zsession *out) {
    struct real *r = (struct real *)be;
    int rc;
    zhandle_t *zh = acquire(r, &rc);
    if (!zh) return rc;
    const clientid_t *cid = zoo_client_id(zh);
    memset(out, 0, sizeof(*out));
    out->id = cid->client_id;
    out->passwd_len = (int)sizeof(cid->passwd);
    memcpy(out->passwd, cid->passwd, sizeof(cid->passwd));
    release(r);
    return out->id ? GR_ZOK : GR_ZINVALIDSTATE;
}

static int r_close_session(struct gr_zk_backend *be, const struct gr_zsession *s) {
    struct real *r = (struct real *)be;
    return gr_zk_real_close_session(r->connect, s, r->conn_timeout_ms);
}

static int r_wait_connected(struct gr_zk_backend *be, int timeout_ms) {
    struct real *r = (struct real *)be;
    struct timespec dl;
    abs_deadline(&dl, timeout_ms);
    pthread_mutex_lock(&r->mu);
    int trc = 0;
    int rc;
    for (;;) {
        if (r->closing) { rc = GR_ZCLOSING; break; }
        if (r->expired) { rc = GR_ZSESSIONEXPIRED; break; }
        if (r->connected) { rc = GR_ZOK; break; }
        if (trc == ETIMEDOUT) { rc = GR_ZOPERATIONTIMEOUT; break; }
        trc = pthread_cond_timedwait(&r->cv, &r->mu, &dl);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static void r_destroy(struct gr_zk_backend *be) {
    struct real *r = (struct real *)be;
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    r->closing = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (r->thread_started) pthread_join(r->reconnect_thread, NULL);
    pthread_rwlock_wrlock(&r->hlock);
    zhandle_t *zh = r->zh;
    struct hctx *h = r->hctx;
    r->zh = NULL;
    r->hctx = NULL;
    pthread_rwlock_unlock(&r->hlock);
    if (zh) zookeeper_close(zh);
    free(h);
    pthread_rwlock_destroy(&r->hlock);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r->connect);
    free(r->digest_auth);
    free(r);
}

static const struct gr_zk_backend_ops real_ops = {
    .create = r_create,
    .delete_node = r_delete,
    .get = r_get,
    .set = r_set,
    .exists = r_exists,
    .get_children = r_get_children,
    .multi = r_multi,
    .multi_many = r_multi_many,
    .get_many = r_get_many,
    .get_children_many = r_get_children_many,
    .session = r_session,
    .close_session = r_close_session,
    .wait_connected = r_wait_connected,
    .destroy = r_destroy,
};

/* ---- one-off handles (chroot creation, closing another session) ---- */

struct oneoff {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state; /* 0 pending, 1 connected, 2 expired, 3 auth failed */
};

static void oneoff_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    struct oneoff *o = ctx;
    if (type != ZOO_SESSION_EVENT) return;
    pthread_mutex_lock(&o->mu);
    if (state == ZOO_CONNECTED_STATE) o->state = 1;
    else if (state == ZOO_EXPIRED_SESSION_STATE) o->state = 2;
    else if (state == ZOO_AUTH_FAILED_STATE) o->state = 3;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

/* Connects a throw-away handle; returns its final state (see struct oneoff) or 0 on timeout.
 * *zh is set (caller closes it) unless creation failed. */
static int oneoff_connect(const char *connect, const clientid_t *cid, int timeout_ms,
                          struct oneoff *o, zhandle_t **zh) {
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    o->state = 0;
    *zh = zookeeper_init(connect, oneoff_watcher, timeout_ms > 2000 ? timeout_ms : 2000, cid, o, 0);
    if (!*zh) return -1;
    struct timespec dl;
    abs_deadline(&dl, timeout_ms);
    pthread_mutex_lock(&o->mu);
    int rc = 0;
    while (o->state == 0 && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&o->cv, &o->mu, &dl);
    int st = o->state;
    pthread_mutex_unlock(&o->mu);
    return st;
}

static void oneoff_done(struct oneoff *o, zhandle_t *zh) {
    if (zh) zookeeper_close(zh);
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->cv);
}

int gr_zk_real_close_session(const char *connect, const struct gr_zsession *s, int timeout_ms) {
    clientid_t cid;
    memset(&cid, 0, sizeof(cid));
    cid.client_id = s->id;
    memcpy(cid.passwd, s->passwd, (size_t)GR_MIN(s->passwd_len, (int)sizeof(cid.passwd)));
    /* The chroot does not matter for sessions; strip it so a missing chroot cannot bite. */
    char *hosts = gr_strdup(connect);
    char *slash = strchr(hosts, '/');
    if (slash) *slash = 0;
    /* Attach and close; then attach again to confirm it is gone. If the session's owner is
     * still alive it may reconnect between our attach and our close (the close then fails
     * with SESSIONMOVED on the server), so repeat a few times. */
    int rc = GR_ZOPERATIONTIMEOUT;
    bool closed_once = false;
    for (int attempt = 0; attempt < 5; attempt++) {
        struct oneoff o;
        zhandle_t *zh = NULL;
        int st = oneoff_connect(hosts, &cid, timeout_ms, &o, &zh);
        oneoff_done(&o, zh); /* zookeeper_close sends closeSession when connected */
        if (st == 1) {
            closed_once = true;
            continue;
        }
        if (st == 2) rc = closed_once ? GR_ZOK : GR_ZSESSIONEXPIRED;
        else if (st == 3) rc = GR_ZAUTHFAILED;
        else if (st < 0) rc = GR_ZSYSTEMERROR;
        else rc = GR_ZOPERATIONTIMEOUT;
        break;
    }
    free(hosts);
    if (rc == GR_ZOK)
        gr_info(LOGGER, "closed ZooKeeper session 0x%llx", (unsigned long long)s->id);
    else
        gr_warn(LOGGER, "closing ZooKeeper session 0x%llx: %s", (unsigned long long)s->id,
                gr_zrc_name(rc));
    return rc;
}

/* Creates the chroot path (every component) through a chroot-less handle. */
static int ensure_chroot(const char *hosts, const char *chroot, int timeout_ms) {
    struct oneoff o;
    zhandle_t *zh = NULL;
    int st = oneoff_connect(hosts, NULL, timeout_ms, &o, &zh);
    int rc = GR_ZOK;
    if (st != 1) {
        rc = st == 0 ? GR_ZOPERATIONTIMEOUT : GR_ZSYSTEMERROR;
    } else {
        struct Stat stt;
        if (zoo_exists(zh, chroot, 0, &stt) != ZOK) {
            char *p = gr_strdup(chroot);
            for (char *q = p + 1;; q++) {
                if (*q == '/' || *q == 0) {
                    char save = *q;
                    *q = 0;
                    int c = zoo_create(zh, p, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0);
                    *q = save;
                    if (c != ZOK && c != ZNODEEXISTS) {
                        gr_error(LOGGER, "cannot create chroot path '%s': %s", chroot, zerror(c));
                        rc = c;
                        break;
                    }
                    if (save == 0) break;
                }
            }
            if (rc == GR_ZOK) gr_info(LOGGER, "created chroot path '%s'", chroot);
            free(p);
        }
    }
    oneoff_done(&o, zh);
    return rc;
}

/* libzookeeper's own log lines go through our logger (so gr_log_open redirects them too). */
static ssize_t client_log_write(void *cookie, const char *buf, size_t size) {
    size_t n = size;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) n--;
    if (n > 0) gr_warn("zookeeper-client", "%.*s", (int)n, buf);
    return (ssize_t)size;
}

static void client_log_level_init(void) {
    static cookie_io_functions_t fns = {.write = client_log_write};
    FILE *f = fopencookie(NULL, "w", fns);
    if (f) {
        setvbuf(f, NULL, _IOLBF, 0);
        zoo_set_log_stream(f);
    }
    const char *lv = getenv("GREGOR_ZK_LOG_LEVEL");
    ZooLogLevel l = ZOO_LOG_LEVEL_ERROR;
    if (lv && strcmp(lv, "debug") == 0) l = ZOO_LOG_LEVEL_DEBUG;
    else if (lv && strcmp(lv, "info") == 0) l = ZOO_LOG_LEVEL_INFO;
    else if (lv && strcmp(lv, "warn") == 0) l = ZOO_LOG_LEVEL_WARN;
    zoo_set_debug_level(l);
}

/* libzookeeper logs to stderr on its own; keep it quiet unless GREGOR_ZK_LOG_LEVEL says so. */
static void set_client_log_level(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, client_log_level_init);
}

int gr_zk_real_open(const struct gr_zk_real_config *cfg, struct gr_zk_backend **out) {
    *out = NULL;
    set_client_log_level();
    if (!cfg->connect || !*cfg->connect) {
        gr_error(LOGGER, "zookeeper.connect is empty");
        return GR_ZBADARGUMENTS;
    }
    int session_ms = cfg->session_timeout_ms > 0 ? cfg->session_timeout_ms : 18000;
    int conn_ms = cfg->connection_timeout_ms > 0 ? cfg->connection_timeout_ms : session_ms;

    const char *slash = strchr(cfg->connect, '/');
    if (slash && slash[1]) {
        char *hosts = gr_strndup(cfg->connect, (size_t)(slash - cfg->connect));
        char *chroot = gr_strdup(slash);
        size_t cl = strlen(chroot);
        if (cl > 1 && chroot[cl - 1] == '/') chroot[cl - 1] = 0;
        int rc = ensure_chroot(hosts, chroot, conn_ms);
        free(hosts);
        free(chroot);
        if (rc != GR_ZOK) {
            gr_error(LOGGER, "Timed out waiting for connection to ZooKeeper at '%s' (chroot set-up: %s)",
                     cfg->connect, gr_zrc_name(rc));
            return rc;
        }
    }

    struct real *r = gr_calloc(1, sizeof(*r));
    r->base.ops = &real_ops;
    r->base.on_watch = cfg->on_watch;
    r->base.on_session = cfg->on_session;
    r->base.cb_ctx = cfg->cb_ctx;
    r->base.session_timeout_ms = session_ms;
    r->connect = gr_strdup(cfg->connect);
    r->conn_timeout_ms = conn_ms;
    r->digest_auth = cfg->digest_auth ? gr_strdup(cfg->digest_auth) : NULL;
    r->secure_acls = cfg->secure_acls;
    if (cfg->metrics) { /* registered at once (0) so dashboards and increase() see the first event */
        r->latency = gr_metrics_histogram(cfg->metrics, "kafka.server:type=ZooKeeperClientMetrics,name=ZooKeeperRequestLatencyMs");
        r->sync_connects = gr_metrics_meter(cfg->metrics, "kafka.server:type=SessionExpireListener,name=ZooKeeperSyncConnectsPerSec");
        r->disconnects = gr_metrics_meter(cfg->metrics, "kafka.server:type=SessionExpireListener,name=ZooKeeperDisconnectsPerSec");
        r->expires = gr_metrics_meter(cfg->metrics, "kafka.server:type=SessionExpireListener,name=ZooKeeperExpiresPerSec");
        r->auth_failures = gr_metrics_meter(cfg->metrics, "kafka.server:type=SessionExpireListener,name=ZooKeeperAuthFailuresPerSec");
    }
    /* Writer-preferring: the reconnect thread must not starve behind a stream of calls. */
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&r->hlock, &ra);
    pthread_rwlockattr_destroy(&ra);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);

    zhandle_t *zh = NULL;
    struct hctx *h = NULL;
    int rc = new_handle(r, conn_ms, &zh, &h);
    if (rc != GR_ZOK) {
        gr_error(LOGGER, "Timed out waiting for connection to ZooKeeper at '%s' after %d ms",
                 cfg->connect, conn_ms);
        r_destroy(&r->base);
        return rc;
    }
    r->zh = zh;
    r->hctx = h;
    if (pthread_create(&r->reconnect_thread, NULL, reconnect_main, r) != 0) {
        r_destroy(&r->base);
        return GR_ZSYSTEMERROR;
    }
    r->thread_started = true;
    const clientid_t *cid = zoo_client_id(zh);
    gr_info(LOGGER, "connected to ZooKeeper at '%s', session id 0x%llx, session timeout %d ms",
            cfg->connect, (unsigned long long)cid->client_id, session_ms);
    *out = &r->base;
    return GR_ZOK;
}
