/* A raw ZooKeeper backend: a vtable of SYNCHRONOUS calls.
 *
 * Two implementations plug in here: the real one over libzookeeper-mt (zk_real.c, constructor
 * below) and the deterministic in-memory model used by tests/sim. Everything above this layer
 * (kzk.c, the controller) talks only to this vtable, so both behave identically to it.
 *
 * Rules every implementation follows (the simulation must too):
 *  1. Calls are synchronous and run on the caller's thread. The real backend may be called from
 *     several threads at once. NEVER call the backend from inside an on_watch/on_session callback
 *     (the real client would deadlock: the callback runs on its completion thread).
 *  2. Return codes are `enum gr_zrc` (ZooKeeper's own numbers). They are a separate domain from
 *     errno / GR_E* codes: kzk.c translates them.
 *  3. multi is atomic. Its per-op results follow ZooKeeper: on failure, ops before the failing one
 *     report GR_ZOK (rolled back), the failing op its error, ops after it
 *     GR_ZRUNTIMEINCONSISTENCY; the call returns the failing op's code. On success it returns
 *     GR_ZOK and every op GR_ZOK.
 *  4. Watches are one-shot, set by the `watch` argument of get/exists/get_children (and the *_many
 *     variants) and delivered once through on_watch. get/get_children on a missing node set no
 *     watch; exists on a missing node sets one (fires CREATED). A session's watches die with it.
 *  5. Session events: CONNECTED (connected, or reconnected within the session), DISCONNECTED
 *     (connection lost; the session may still live), EXPIRED (the old session is dead: its
 *     ephemerals and watches are gone), then NEW_SESSION once a fresh session is established.
 *     The owner re-registers ephemerals and re-arms watches on NEW_SESSION.
 *     EXPIRED and NEW_SESSION are delivered from the real backend's own reconnect thread, which
 *     holds no locks: the EXPIRED callback MAY block until the owner has processed it (Kafka's
 *     Expire event runs before the new session is created). Between EXPIRED and NEW_SESSION every
 *     call fails fast with GR_ZSESSIONEXPIRED. Other callbacks (watches, CONNECTED,
 *     DISCONNECTED) run on libzookeeper's completion thread and must only copy and enqueue.
 *  6. multi_many pipelines several multis: each is atomic on its own (rule 3), and ZooKeeper
 *     applies one session's requests in the order they were sent, so multi i is applied (or
 *     refused) before multi i+1. After a connection loss every multi not yet answered reports
 *     CONNECTIONLOSS (it may or may not have been applied), like a single multi. The in-memory
 *     backends run them one after another on the caller's thread.
 *  7. Strings/data returned are heap allocations owned by the caller (free()); data buffers are
 *     always NUL-terminated one byte past `len` so JSON parsers may treat them as C strings
 *     (a znode with null data reads as len 0). Input pointers are borrowed for the call only.
 */
#ifndef GR_ZK_BACKEND_H
#define GR_ZK_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ZooKeeper result codes, numerically identical to libzookeeper's ZOO_ERRORS. */
enum gr_zrc {
    GR_ZOK = 0,
    GR_ZSYSTEMERROR = -1,
    GR_ZRUNTIMEINCONSISTENCY = -2, /* also: "op after the failing one" in a multi */
    GR_ZDATAINCONSISTENCY = -3,
    GR_ZCONNECTIONLOSS = -4,       /* the request may or may not have been applied */
    GR_ZMARSHALLINGERROR = -5,
    GR_ZUNIMPLEMENTED = -6,
    GR_ZOPERATIONTIMEOUT = -7,
    GR_ZBADARGUMENTS = -8,
    GR_ZINVALIDSTATE = -9,         /* handle not usable (closed, or expired) */
    GR_ZAPIERROR = -100,
    GR_ZNONODE = -101,
    GR_ZNOAUTH = -102,
    GR_ZBADVERSION = -103,
    GR_ZNOCHILDRENFOREPHEMERALS = -108,
    GR_ZNODEEXISTS = -110,
    GR_ZNOTEMPTY = -111,
    GR_ZSESSIONEXPIRED = -112,
    GR_ZINVALIDCALLBACK = -113,
    GR_ZINVALIDACL = -114,
    GR_ZAUTHFAILED = -115,
    GR_ZCLOSING = -116,            /* the backend is being closed */
    GR_ZNOTHING = -117,
    GR_ZSESSIONMOVED = -118,
};

/* Name of a gr_zrc, e.g. "NONODE"; never NULL. */
const char *gr_zrc_name(int rc);

/* Stat of a znode (ZooKeeper's struct Stat). */
struct gr_zstat {
    int64_t czxid;          /* zxid that created the node (Kafka's broker epoch) */
    int64_t mzxid;
    int64_t ctime;
    int64_t mtime;
    int32_t version;        /* data version (Kafka's zkVersion) */
    int32_t cversion;
    int32_t aversion;
    int64_t ephemeralOwner; /* session id of the owner, 0 when persistent */
    int32_t dataLength;
    int32_t numChildren;
    int64_t pzxid;
};

/* Create flags (ZooKeeper's values). */
enum { GR_ZEPHEMERAL = 1, GR_ZSEQUENCE = 2 };

/* Any version (for delete/set/check). */
#define GR_ZANY_VERSION (-1)

/* Watch event types (ZooKeeper's values). */
enum gr_zwatch_type {
    GR_ZWATCH_CREATED = 1,
    GR_ZWATCH_DELETED = 2,
    GR_ZWATCH_CHANGED = 3,
    GR_ZWATCH_CHILD = 4,
};

/* Session states delivered to on_session. */
enum gr_zsession_state {
    GR_ZSESSION_CONNECTED = 1,
    GR_ZSESSION_DISCONNECTED = 2,
    GR_ZSESSION_EXPIRED = 3,
    GR_ZSESSION_NEW_SESSION = 4,
    GR_ZSESSION_AUTH_FAILED = 5,
};

/* A session's identity: id and its password (ZooKeeper's clientid_t). */
struct gr_zsession {
    int64_t id;
    int passwd_len;             /* 16 on a real server */
    unsigned char passwd[16];
};

/* A list of names (children). Free with gr_zstrings_free. */
struct gr_zstrings {
    int count;
    char **names;               /* each malloc'd */
};
void gr_zstrings_free(struct gr_zstrings *s);

/* One multi op. Pointers are borrowed for the duration of the call. */
enum gr_zop_type { GR_ZOP_CREATE = 1, GR_ZOP_DELETE = 2, GR_ZOP_SET = 5, GR_ZOP_CHECK = 13 };
struct gr_zop {
    int type;                   /* enum gr_zop_type */
    const char *path;
    const void *data;           /* CREATE, SET; NULL = null data */
    int len;                    /* length of data */
    int flags;                  /* CREATE: GR_ZEPHEMERAL | GR_ZSEQUENCE */
    int version;                /* DELETE, SET, CHECK: expected version or GR_ZANY_VERSION */
};
/* Result of one op. created_path is malloc'd (CREATE success only; caller frees);
 * stat is filled for SET success. */
struct gr_zop_result {
    int rc;
    char *created_path;
    struct gr_zstat stat;
};
/* Frees created_path of n results (and NULLs it). */
void gr_zop_results_release(struct gr_zop_result *r, int n);

/* Convenience constructors for gr_zop. */
struct gr_zop gr_zop_create(const char *path, const void *data, int len, int flags);
struct gr_zop gr_zop_delete(const char *path, int version);
struct gr_zop gr_zop_set(const char *path, const void *data, int len, int version);
struct gr_zop gr_zop_check(const char *path, int version);

/* One multi of a multi_many call: ops[n] in, results[n] out (zeroed and filled by the callee),
 * rc = what multi would have returned for it. */
struct gr_zmulti {
    const struct gr_zop *ops;
    int n;
    struct gr_zop_result *results;
    int rc;
};

/* Result of one read in get_many. data is malloc'd (NUL-terminated past len), caller frees;
 * NULL when rc != GR_ZOK. */
struct gr_zget_result {
    int rc;
    char *data;
    int len;
    struct gr_zstat stat;
};
void gr_zget_results_release(struct gr_zget_result *r, int n);

/* Result of one get_children in get_children_many. */
struct gr_zchildren_result {
    int rc;
    struct gr_zstrings children;
};
void gr_zchildren_results_release(struct gr_zchildren_result *r, int n);

/* Callbacks (see rule 4/5 above). `path` is borrowed for the call. */
typedef void (*gr_zk_watch_fn)(void *ctx, int type, const char *path);
typedef void (*gr_zk_session_fn)(void *ctx, int state);

struct gr_zk_backend;

struct gr_zk_backend_ops {
    /* Creates `path`. With GR_ZSEQUENCE the server appends a 10-digit counter; *created_path
     * (if created_path != NULL) receives the actual path, malloc'd. */
    int (*create)(struct gr_zk_backend *b, const char *path, const void *data, int len, int flags,
                  char **created_path);
    int (*delete_node)(struct gr_zk_backend *b, const char *path, int version);
    /* Reads data (+stat if stat != NULL). *data malloc'd, NUL-terminated past *len. */
    int (*get)(struct gr_zk_backend *b, const char *path, bool watch, char **data, int *len,
               struct gr_zstat *stat);
    int (*set)(struct gr_zk_backend *b, const char *path, const void *data, int len, int version,
               struct gr_zstat *stat);
    /* GR_ZOK if it exists, GR_ZNONODE if not (a watch is set in both cases when asked). */
    int (*exists)(struct gr_zk_backend *b, const char *path, bool watch, struct gr_zstat *stat);
    /* Children names (not full paths), unsorted. */
    int (*get_children)(struct gr_zk_backend *b, const char *path, bool watch,
                        struct gr_zstrings *out);
    /* Atomic multi; results[n] must be provided (zeroed by the callee). See rule 3. */
    int (*multi)(struct gr_zk_backend *b, const struct gr_zop *ops, int n,
                 struct gr_zop_result *results);
    /* n gets at once (the real backend pipelines them). Returns GR_ZOK if every request was
     * issued; per-path outcomes are in results[i].rc. */
    int (*get_many)(struct gr_zk_backend *b, const char *const *paths, int n, bool watch,
                    struct gr_zget_result *results);
    /* n get_children at once, like get_many. */
    int (*get_children_many)(struct gr_zk_backend *b, const char *const *paths, int n, bool watch,
                             struct gr_zchildren_result *results);
    /* The current session's id and password. GR_ZINVALIDSTATE when not connected. */
    int (*session)(struct gr_zk_backend *b, struct gr_zsession *out);
    /* Attaches to ANOTHER session (id+password) and closes it, which expires it at once and
     * deletes its ephemerals. GR_ZSESSIONEXPIRED if it is already dead (counts as success for
     * callers). Used at start-up to kill our own previous incarnation's session. */
    int (*close_session)(struct gr_zk_backend *b, const struct gr_zsession *s);
    /* Blocks until connected (GR_ZOK), timeout_ms elapsed (GR_ZOPERATIONTIMEOUT), the session
     * expired (GR_ZSESSIONEXPIRED), or the backend is closing (GR_ZCLOSING). */
    int (*wait_connected)(struct gr_zk_backend *b, int timeout_ms);
    /* Closes the session (ephemerals go at once) and frees the backend. No callbacks are
     * delivered after it returns. Must not be called from a callback. */
    void (*destroy)(struct gr_zk_backend *b);
    /* Pipelined multis (rule 6): issues m[0..n) in order, the real backend with several in
     * flight at once, and returns when every one has its answer in m[i].rc / m[i].results.
     * Returns GR_ZOK (per-multi outcomes in m[i].rc). May be NULL: gr_zkb_multi_many then runs
     * them one after another through multi. */
    int (*multi_many)(struct gr_zk_backend *b, struct gr_zmulti *m, int n);
};

/* Base of every backend; implementations embed it first. The callbacks are fixed at
 * construction. */
struct gr_zk_backend {
    const struct gr_zk_backend_ops *ops;
    gr_zk_watch_fn on_watch;
    gr_zk_session_fn on_session;
    void *cb_ctx;
    int session_timeout_ms;     /* negotiated/configured; kzk uses it to bound retries */
};

/* ---- The real backend (zk_real.c) ---- */

struct gr_zk_real_config {
    const char *connect;            /* "h1:p1,h2:p2[/chroot]" (zookeeper.connect) */
    int session_timeout_ms;         /* zookeeper.session.timeout.ms (Kafka default 18000) */
    int connection_timeout_ms;      /* zookeeper.connection.timeout.ms (default = session) */
    gr_zk_watch_fn on_watch;        /* may be NULL */
    gr_zk_session_fn on_session;    /* may be NULL */
    void *cb_ctx;
    /* zookeeper.set.acl: znodes created through this backend get Kafka's secure ACLs (creator
     * ALL + world READ; no world READ under /config/users, /config/brokers,
     * /delegation_token/tokens). Needs digest_auth. */
    bool secure_acls;
    const char *digest_auth;        /* "user:password" added with the digest scheme, or NULL */
    /* may be NULL; else, as Kafka's ZooKeeperClient / SessionExpireListener register them:
     * kafka.server:type=ZooKeeperClientMetrics,name=ZooKeeperRequestLatencyMs (a histogram of
     * each request's time to its answer) and kafka.server:type=SessionExpireListener meters
     * ZooKeeper{SyncConnects,Disconnects,Expires,AuthFailures}PerSec marked on session events.
     * Must outlive the backend. */
    struct gr_metrics *metrics;
};

/* Connects (creating the chroot path first if the connect string has one and it is missing),
 * waiting up to connection_timeout_ms for CONNECTED. On success *out is a backend owned by the
 * caller (free with b->ops->destroy(b), or gr_zkb_destroy). Returns GR_ZOK, or
 * GR_ZOPERATIONTIMEOUT ("Timed out waiting for connection", logged), or another gr_zrc.
 * On expiry it delivers EXPIRED, reconnects with a fresh handle (retrying until it connects or
 * is destroyed) and delivers NEW_SESSION. Any thread. */
int gr_zk_real_open(const struct gr_zk_real_config *cfg, struct gr_zk_backend **out);

/* Attaches to session `s` at `connect` and closes it (expiring it at once, deleting its
 * ephemerals). Returns GR_ZOK, GR_ZSESSIONEXPIRED (already dead), or an error. Waits at most
 * timeout_ms for the connection. Any thread. */
int gr_zk_real_close_session(const char *connect, const struct gr_zsession *s, int timeout_ms);

/* ---- Inline call wrappers ---- */
static inline int gr_zkb_create(struct gr_zk_backend *b, const char *path, const void *data,
                                int len, int flags, char **created_path) {
    return b->ops->create(b, path, data, len, flags, created_path);
}
static inline int gr_zkb_delete(struct gr_zk_backend *b, const char *path, int version) {
    return b->ops->delete_node(b, path, version);
}
static inline int gr_zkb_get(struct gr_zk_backend *b, const char *path, bool watch, char **data,
                             int *len, struct gr_zstat *stat) {
    return b->ops->get(b, path, watch, data, len, stat);
}
static inline int gr_zkb_set(struct gr_zk_backend *b, const char *path, const void *data, int len,
                             int version, struct gr_zstat *stat) {
    return b->ops->set(b, path, data, len, version, stat);
}
static inline int gr_zkb_exists(struct gr_zk_backend *b, const char *path, bool watch,
                                struct gr_zstat *stat) {
    return b->ops->exists(b, path, watch, stat);
}
static inline int gr_zkb_get_children(struct gr_zk_backend *b, const char *path, bool watch,
                                      struct gr_zstrings *out) {
    return b->ops->get_children(b, path, watch, out);
}
static inline int gr_zkb_multi(struct gr_zk_backend *b, const struct gr_zop *ops, int n,
                               struct gr_zop_result *results) {
    return b->ops->multi(b, ops, n, results);
}
static inline int gr_zkb_multi_many(struct gr_zk_backend *b, struct gr_zmulti *m, int n) {
    if (b->ops->multi_many) return b->ops->multi_many(b, m, n);
    for (int i = 0; i < n; i++) m[i].rc = b->ops->multi(b, m[i].ops, m[i].n, m[i].results);
    return GR_ZOK;
}
static inline int gr_zkb_get_many(struct gr_zk_backend *b, const char *const *paths, int n,
                                  bool watch, struct gr_zget_result *results) {
    return b->ops->get_many(b, paths, n, watch, results);
}
static inline int gr_zkb_get_children_many(struct gr_zk_backend *b, const char *const *paths,
                                           int n, bool watch, struct gr_zchildren_result *res) {
    return b->ops->get_children_many(b, paths, n, watch, res);
}
static inline int gr_zkb_session(struct gr_zk_backend *b, struct gr_zsession *out) {
    return b->ops->session(b, out);
}
static inline int gr_zkb_close_session(struct gr_zk_backend *b, const struct gr_zsession *s) {
    return b->ops->close_session(b, s);
}
static inline int gr_zkb_wait_connected(struct gr_zk_backend *b, int timeout_ms) {
    return b->ops->wait_connected(b, timeout_ms);
}
static inline void gr_zkb_destroy(struct gr_zk_backend *b) {
    if (b) b->ops->destroy(b);
}

#endif
