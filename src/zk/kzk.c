/* Kafka's znodes as typed calls over a gr_zk_backend (Kafka 2.7 KafkaZkClient).
 *
 * Retries: a call that fails with CONNECTIONLOSS / OPERATIONTIMEOUT waits for the backend to
 * reconnect and is re-issued (Kafka's retryRequestsUntilConnected). The wait has no limit while
 * the session may still be alive: as Kafka's ZooKeeperClient.waitUntilConnected, it ends only
 * when the connection is back, the session expired or the backend closes -- giving up earlier
 * would drop a controller event whose watch is then never re-armed, while the session (renewed
 * by the returning ensemble) brings no Expire to re-initialise anything. gr_kzk_stop_waiting
 * (shutdown) makes calls fail at once instead. Re-issues after a successful reconnect are
 * bounded (KZK_MAX_ATTEMPTS: a call that keeps timing out on a live connection). A re-issued
 * write may find its own earlier effect
 * (NODEEXISTS / BADVERSION): callers that care (broker and controller registration) check for
 * that, as Kafka does.
 *
 * Guarded writes: every controller write is one multi {check(/controller_epoch, zkVersion),
 * op...}. A failing check → GR_ECONTROLLER_MOVED. Bulk writes are split into multis of at most
 * k->batch ops, up to k->depth of them in flight at once (the backend's multi_many) when the items
 * do not depend on each other; a batch that fails on an item is rerun without it (see
 * guarded_items). Once a multi reports the epoch check failed nothing more is sent; the multis
 * already in flight carry their own check, which fails as well (ZooKeeper applies one session's
 * requests in order and the epoch's zkVersion only grows).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "zk/kzk.h"

#define LOGGER "KafkaZkClient"
#define KZK_MAX_ATTEMPTS 10
#define KZK_WAIT_SLICE_MS 500

struct gr_kzk {
    struct gr_zk_backend *b;
    int batch;
    int depth;            /* guarded multis in flight at once (independent items) */
    atomic_bool stopping; /* gr_kzk_stop_waiting */
    bool async;           /* gr_kzk_set_async: jobs run on their own thread */
    bool no_stamps;       /* gr_kzk_set_state_stamps(false) */
    gr_kzk_stamp_id_fn stamp_id;  /* gr_kzk_set_stamp_id_lookup: the id a stamp carries */
    void *stamp_id_arg;
    struct gr_kzk_job *after_next_write; /* gr_kzk_job_start_after_next_write */
};

static const char *const PERSISTENT_PATHS[] = {
    "/brokers/ids",          "/brokers/topics",          "/brokers/seqid",
    "/config/topics",        "/config/clients",          "/config/users",
    "/config/brokers",       "/config/changes",          "/admin/delete_topics",
    "/isr_change_notification", "/latest_producer_id_block", "/log_dir_event_notification",
};

const char *gr_kzk_strerror(int rc) {
    switch (rc) {
    case GR_KZK_ENONODE: return "znode does not exist";
    case GR_KZK_EEXISTS: return "znode already exists";
    case GR_KZK_EBADVERSION: return "znode version mismatch";
    case GR_KZK_ENOTEMPTY: return "znode has children";
    case GR_KZK_EBROKER_REGISTERED: return "broker id is already registered by another session";
    default: return gr_strerror(rc);
    }
}

int gr_kzk_from_zrc(int zrc) {
    switch (zrc) {
    case GR_ZOK: return 0;
    case GR_ZNONODE: return GR_KZK_ENONODE;
    case GR_ZNODEEXISTS: return GR_KZK_EEXISTS;
    case GR_ZBADVERSION: return GR_KZK_EBADVERSION;
    case GR_ZNOTEMPTY: return GR_KZK_ENOTEMPTY;
    default: return GR_EZK;
    }
}

struct gr_kzk *gr_kzk_new(struct gr_zk_backend *b) {
    struct gr_kzk *k = gr_calloc(1, sizeof(*k));
    k->b = b;
    k->batch = 1000;
    k->depth = 8;
    return k;
}

void gr_kzk_free(struct gr_kzk *k) {
    free(k);
}

struct gr_zk_backend *gr_kzk_backend(struct gr_kzk *k) {
    return k->b;
}

void gr_kzk_set_async(struct gr_kzk *k, bool async) {
    k->async = async;
}

void gr_kzk_set_state_stamps(struct gr_kzk *k, bool on) {
    k->no_stamps = !on;
}

void gr_kzk_set_stamp_id_lookup(struct gr_kzk *k, gr_kzk_stamp_id_fn fn, void *arg) {
    k->stamp_id = fn;
    k->stamp_id_arg = arg;
}

void gr_kzk_set_batch_size(struct gr_kzk *k, int ops) {
    k->batch = ops < 2 ? 2 : ops;
}

void gr_kzk_set_pipeline_depth(struct gr_kzk *k, int multis) {
    k->depth = multis < 1 ? 1 : multis;
}

void gr_kzk_stop_waiting(struct gr_kzk *k) {
    if (k) atomic_store(&k->stopping, true);
}

/* ---- retry plumbing ---- */

static bool retryable(int zrc) {
    return zrc == GR_ZCONNECTIONLOSS || zrc == GR_ZOPERATIONTIMEOUT;
}

/* After a retryable failure: waits for the connection, as long as the session may live and we
 * are not shutting down (in slices, so that gr_kzk_stop_waiting is noticed). True = try again. */
static bool wait_retry(struct gr_kzk *k, int *attempt) {
    if (++*attempt >= KZK_MAX_ATTEMPTS) return false;
    int session = k->b->session_timeout_ms > 0 ? k->b->session_timeout_ms : 6000;
    int slice = session < KZK_WAIT_SLICE_MS ? session : KZK_WAIT_SLICE_MS;
    int64_t waited = 0, next_log = session;
    for (;;) {
        bool stopping = atomic_load(&k->stopping);
        int rc = gr_zkb_wait_connected(k->b, stopping ? 0 : slice);
        if (rc == GR_ZOK) return true;
        if (rc != GR_ZOPERATIONTIMEOUT || stopping) return false; /* expired, closing, shutdown */
        waited += slice;
        if (waited >= next_log) {
            gr_warn(LOGGER, "ZooKeeper unreachable for %" PRId64 " ms; the call waits for the connection",
                    waited);
            next_log *= 2;
        }
    }
}

#define RETRY(k, rc, expr)                                                                         \
    do {                                                                                           \
        int attempt_ = 0;                                                                          \
        do {                                                                                       \
            (rc) = (expr);                                                                         \
        } while (retryable(rc) && wait_retry((k), &attempt_));                                     \
    } while (0)

/* Logs an unexpected ZooKeeper code and maps it. */
static int zfail(const char *what, const char *path, int zrc) {
    int rc = gr_kzk_from_zrc(zrc);
    if (rc == GR_EZK) gr_error(LOGGER, "%s %s failed: %s", what, path, gr_zrc_name(zrc));
    return rc;
}

static int z_get(struct gr_kzk *k, const char *path, bool watch, char **data, int *len,
                 struct gr_zstat *st) {
    int rc;
    RETRY(k, rc, gr_zkb_get(k->b, path, watch, data, len, st));
    return rc;
}

static int z_create(struct gr_kzk *k, const char *path, const void *data, int len, int flags,
                    char **created) {
    int rc;
    RETRY(k, rc, gr_zkb_create(k->b, path, data, len, flags, created));
    return rc;
}

static int z_set(struct gr_kzk *k, const char *path, const void *data, int len, int version,
                 struct gr_zstat *st) {
    int rc;
    RETRY(k, rc, gr_zkb_set(k->b, path, data, len, version, st));
    return rc;
}

static int z_children(struct gr_kzk *k, const char *path, bool watch, struct gr_zstrings *out) {
    int rc;
    memset(out, 0, sizeof(*out));
    RETRY(k, rc, gr_zkb_get_children(k->b, path, watch, out));
    return rc;
}

static int z_multi(struct gr_kzk *k, const struct gr_zop *ops, int n, struct gr_zop_result *res) {
    int rc;
    RETRY(k, rc, gr_zkb_multi(k->b, ops, n, res));
    return rc;
}

/* get_many with per-item retry of retryable failures. */
static int z_get_many(struct gr_kzk *k, const char *const *paths, int n, bool watch,
                      struct gr_zget_result *res) {
    int rc = gr_zkb_get_many(k->b, paths, n, watch, res);
    int attempt = 0;
    for (;;) {
        int nretry = 0;
        for (int i = 0; i < n; i++)
            if (retryable(res[i].rc)) nretry++;
        if (nretry == 0) return GR_ZOK;
        if (!wait_retry(k, &attempt)) return rc != GR_ZOK ? rc : GR_ZCONNECTIONLOSS;
        const char **rp = gr_malloc((size_t)nretry * sizeof(char *));
        int *idx = gr_malloc((size_t)nretry * sizeof(int));
        struct gr_zget_result *rr = gr_calloc((size_t)nretry, sizeof(*rr));
        int j = 0;
        for (int i = 0; i < n; i++)
            if (retryable(res[i].rc)) {
                rp[j] = paths[i];
                idx[j++] = i;
            }
        rc = gr_zkb_get_many(k->b, rp, nretry, watch, rr);
        for (j = 0; j < nretry; j++) res[idx[j]] = rr[j]; /* moves data ownership */
        free(rr);
        free(idx);
        free(rp);
    }
}

/* Creates every missing component of `path` (persistent, null data); NODEEXISTS is fine. */
static int mkpath(struct gr_kzk *k, const char *path) {
    int rc = z_create(k, path, NULL, 0, 0, NULL);
    if (rc == GR_ZOK || rc == GR_ZNODEEXISTS) return GR_ZOK;
    if (rc != GR_ZNONODE) return rc;
    char *parent = gr_strdup(path);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = 0;
        rc = mkpath(k, parent);
    } else {
        rc = GR_ZNONODE;
    }
    free(parent);
    if (rc != GR_ZOK) return rc;
    rc = z_create(k, path, NULL, 0, 0, NULL);
    return rc == GR_ZNODEEXISTS ? GR_ZOK : rc;
}

int gr_kzk_ensure_paths(struct gr_kzk *k) {
    for (size_t i = 0; i < GR_ARRAY_LEN(PERSISTENT_PATHS); i++) {
        int rc = mkpath(k, PERSISTENT_PATHS[i]);
        if (rc != GR_ZOK) return zfail("create", PERSISTENT_PATHS[i], rc);
    }
    return 0;
}

/* ---- guarded multis ---- */

/* A job's stamps, taken when it is made (on the owner thread: the lookup reads the controller's
 * state), so that a job running on its own thread never calls the lookup. */
struct gr_kzk_stamp_snap {
    int n;
    char **paths; /* /brokers/topics/T/partitions */
    char **ids;   /* T's id, NULL: none */
};

/* The topic's stamp path of a partition state path (/brokers/topics/T/partitions/P/state ->
 * /brokers/topics/T/partitions, malloc'd), or NULL for any other path. */
static char *state_stamp_path(const char *path) {
    static const char pre[] = "/brokers/topics/";
    if (strncmp(path, pre, sizeof pre - 1) != 0) return NULL;
    const char *t = path + sizeof pre - 1, *slash = strchr(t, '/');
    if (!slash || slash == t || strncmp(slash, "/partitions/", 12) != 0) return NULL;
    const char *p = slash + 12, *e = p;
    while (*e >= '0' && *e <= '9') e++;
    if (e == p || strcmp(e, "/state") != 0) return NULL;
    return gr_strndup(path, (size_t)(slash + 11 - path));
}

/* A stamp's setData, its path and data in one malloc'd block (owned[] frees it): the data is
 * {"topic_id":"<id>"} when the lookup knows the topic's id, else empty. */
struct stamp {
    int len;
    char *data; /* inside the block, after the path */
    char path[];
};

static struct stamp *stamp_new(const char *path, const char *id) {
    size_t pl = strlen(path), dl;
    char *data = gr_kzk_topic_stamp_encode(id, &dl);
    struct stamp *st = gr_malloc(sizeof *st + pl + 1 + dl + 1);
    memcpy(st->path, path, pl + 1);
    st->data = st->path + pl + 1;
    memcpy(st->data, data, dl + 1);
    st->len = (int)dl;
    free(data);
    return st;
}

/* The stamp of stamp path sp (/brokers/topics/T/partitions): from snap (a job's, taken on the
 * owner thread) when given, else from the lookup (the caller is the owner thread). */
static struct stamp *stamp_for(const struct gr_kzk *k, const struct gr_kzk_stamp_snap *snap, const char *sp) {
    if (snap) {
        for (int i = 0; i < snap->n; i++)
            if (strcmp(snap->paths[i], sp) == 0) return stamp_new(sp, snap->ids[i]);
        return stamp_new(sp, NULL);
    }
    const char *id = NULL;
    if (k->stamp_id) {
        static const char pre[] = "/brokers/topics/";
        char *topic = gr_strndup(sp + sizeof pre - 1, strlen(sp) - (sizeof pre - 1) - strlen("/partitions"));
        id = k->stamp_id(k->stamp_id_arg, topic);
        free(topic);
    }
    return stamp_new(sp, id);
}

/* Appends to ops[0..n) the standby proof's stamps (gr_kzk_get_state_stamps): one setData (any
 * version) of /brokers/topics/T/partitions per topic T of which ops create, set or delete a
 * state znode, after every item (a stamp never fails first: a state op under a missing znode fails
 * before it) -- except a topic whose partitions znode ops delete themselves. Its data is the
 * topic's id (stamp_for). The stamps go to *owned (the caller frees them). Returns the new op
 * count. */
static int append_state_stamps(const struct gr_kzk *k, const struct gr_kzk_stamp_snap *snap, struct gr_zop *ops, int n,
                               struct stamp **owned, int *n_owned) {
    if (k->no_stamps) return n;
    int m = n;
    for (int i = 0; i < n; i++) {
        char *sp = state_stamp_path(ops[i].path);
        if (!sp) continue;
        bool dup = false;
        for (int j = m - 1; j >= n && !dup; j--) dup = strcmp(ops[j].path, sp) == 0;
        for (int j = 0; j < n && !dup; j++) dup = ops[j].type == GR_ZOP_DELETE && strcmp(ops[j].path, sp) == 0;
        if (dup) {
            free(sp);
            continue;
        }
        struct stamp *st = stamp_for(k, snap, sp);
        free(sp);
        owned[(*n_owned)++] = st;
        ops[m++] = gr_zop_set(st->path, st->data, st->len, GR_ZANY_VERSION);
    }
    return m;
}

int gr_kzk_guarded_multi(struct gr_kzk *k, int32_t epoch_zk_version, const struct gr_zop *ops,
                         int n, struct gr_zop_result *results) {
    struct gr_zop *all = gr_malloc((size_t)(2 * n + 1) * sizeof(*all));
    struct gr_zop_result *res = gr_calloc((size_t)(2 * n + 1), sizeof(*res));
    struct stamp **stamps = gr_malloc((size_t)(n > 0 ? n : 1) * sizeof(*stamps));
    int n_stamps = 0;
    all[0] = gr_zop_check("/controller_epoch", epoch_zk_version);
    if (n > 0) memcpy(all + 1, ops, (size_t)n * sizeof(*ops));
    int n_all = 1 + append_state_stamps(k, NULL, all + 1, n, stamps, &n_stamps);
    int zrc = z_multi(k, all, n_all, res);
    for (int i = 0; i < n_stamps; i++) free(stamps[i]);
    free(stamps);
    int rc = 0;
    if (zrc != GR_ZOK) {
        if (res[0].rc == GR_ZBADVERSION || res[0].rc == GR_ZNONODE) {
            rc = GR_ECONTROLLER_MOVED;
        } else {
            rc = gr_kzk_from_zrc(zrc);
            if (rc == GR_EZK)
                gr_error(LOGGER, "guarded multi of %d ops failed: %s", n, gr_zrc_name(zrc));
        }
    }
    if (results) {
        for (int i = 0; i < n; i++) {
            results[i] = res[i + 1];
            results[i].rc = rc == GR_ECONTROLLER_MOVED ? GR_ECONTROLLER_MOVED
                                                       : gr_kzk_from_zrc(res[i + 1].rc);
            res[i + 1].created_path = NULL;
        }
    }
    gr_zop_results_release(res, n_all);
    free(res);
    free(all);
    return rc;
}

/* A settled item: its kzk code (ok_code counts as success) and, when res, its op result. */
static void settle_item(int i, struct gr_zop_result *r, int irc, int *item_rc, struct gr_zop_result *res,
                        int ok_code) {
    if (irc == ok_code && ok_code != 0) irc = 0;
    if (item_rc) item_rc[i] = irc;
    if (res) {
        res[i] = *r;
        res[i].rc = irc;
    } else {
        free(r->created_path);
    }
    r->created_path = NULL;
}

/* Failed multis per batch before the rest of it goes item by item. */
#define MULTI_RETRIES 4

/* A batch of pending items (indices into the caller's ops) for guarded_items. */
struct gbatch {
    int *idx;
    int m;
    int failures;
    bool lost; /* its last try lost the connection: it may have been applied */
};

static struct gbatch *gbatch_new(const int *idx, int m, int failures) {
    struct gbatch *g = gr_malloc(sizeof(*g));
    g->idx = gr_malloc((size_t)(m > 0 ? m : 1) * sizeof(int));
    memcpy(g->idx, idx, (size_t)m * sizeof(int));
    g->m = m;
    g->failures = failures;
    g->lost = false;
    return g;
}

static void gbatch_free(struct gbatch *g) {
    if (!g) return;
    free(g->idx);
    free(g);
}

/* Whether op's effect is what ZooKeeper holds (r: a get of op->path): a create holding exactly
 * its data at version 0, a set holding its data at the expected version + 1, a delete whose node
 * is gone. The rule of landed_already, for any op. */
static bool op_landed(const struct gr_zop *op, const struct gr_zget_result *r) {
    if (op->type == GR_ZOP_DELETE) return r->rc == GR_ZNONODE;
    if (r->rc != GR_ZOK || (op->type != GR_ZOP_CREATE && op->type != GR_ZOP_SET)) return false;
    int want = op->type == GR_ZOP_CREATE ? 0 : op->version + 1;
    int len = op->data ? op->len : 0;
    return (op->type == GR_ZOP_CREATE || op->version != GR_ZANY_VERSION) && r->stat.version == want &&
           r->len == len && (len == 0 || memcmp(r->data, op->data, (size_t)len) == 0);
}

/* A batch rerun after a lost connection failed on an item: reads every item once (pipelined)
 * and settles those whose effect ZooKeeper already holds as done (their result: the stat read,
 * the path for a create). The others stay in g. Returns how many were settled. */
static int settle_landed(struct gr_kzk *k, const struct gr_zop *ops, struct gbatch *g, int *item_rc,
                         struct gr_zop_result *res, int ok_code) {
    int m0 = g->m;
    const char **paths = gr_malloc((size_t)m0 * sizeof(char *));
    for (int i = 0; i < m0; i++) paths[i] = ops[g->idx[i]].path;
    struct gr_zget_result *rd = gr_calloc((size_t)m0, sizeof(*rd));
    z_get_many(k, paths, m0, false, rd);
    int kept = 0, settled = 0;
    for (int i = 0; i < m0; i++) {
        const struct gr_zop *op = &ops[g->idx[i]];
        if (!op_landed(op, &rd[i])) {
            g->idx[kept++] = g->idx[i];
            continue;
        }
        struct gr_zop_result one;
        memset(&one, 0, sizeof(one));
        one.stat = rd[i].stat;
        if (op->type == GR_ZOP_CREATE && res) one.created_path = gr_strdup(op->path);
        settle_item(g->idx[i], &one, 0, item_rc, res, ok_code);
        settled++;
    }
    if (settled)
        gr_info(LOGGER, "%d of %d writes of a guarded multi retried after a connection loss had already been applied",
                settled, m0);
    g->m = kept;
    gr_zget_results_release(rd, m0);
    free(rd);
    free(paths);
    return settled;
}

/* Outcome of one guarded multi of guarded_items: settles what it can and appends to *next the
 * batches still to run. Returns 0, GR_ECONTROLLER_MOVED, GR_EZK, or 1 (a retryable failure:
 * the batch is in *next unchanged). Frees g unless it is requeued. */
static int gbatch_settle(struct gr_kzk *k, const struct gr_zop *ops, struct gbatch *g, struct gr_zmulti *mm,
                         int *item_rc, struct gr_zop_result *res, int ok_code, struct gbatch **next, int *nn) {
    struct gr_zop_result *r = mm->results; /* [0] is the epoch check */
    int zrc = mm->rc;
    if (zrc == GR_ZOK) {
        for (int i = 0; i < g->m; i++) settle_item(g->idx[i], &r[i + 1], 0, item_rc, res, ok_code);
        gr_zop_results_release(&r[g->m + 1], mm->n - g->m - 1); /* the stamps' */
        gbatch_free(g);
        return 0;
    }
    gr_zop_results_release(r, mm->n);
    if (r[0].rc == GR_ZBADVERSION || r[0].rc == GR_ZNONODE) {
        gbatch_free(g);
        return GR_ECONTROLLER_MOVED;
    }
    if (retryable(zrc)) {
        g->lost = true;
        next[(*nn)++] = g;
        return 1;
    }
    if (gr_kzk_from_zrc(zrc) == GR_EZK) {
        gr_error(LOGGER, "guarded multi of %d ops failed: %s", g->m, gr_zrc_name(zrc));
        gbatch_free(g);
        return GR_EZK;
    }
    /* A rerun after a lost connection that fails on an item (NODEEXISTS / BADVERSION): most
     * likely the lost try was applied. Settle what ZooKeeper holds as ours and rerun the rest. */
    if (g->lost) {
        g->lost = false;
        if (settle_landed(k, ops, g, item_rc, res, ok_code) > 0) {
            if (g->m == 0) gbatch_free(g);
            else next[(*nn)++] = g;
            return 0;
        }
    }
    /* One item failed (ZooKeeper rolled the multi back): settle it, rerun the rest. */
    int f = 0;
    while (f < g->m && r[f + 1].rc == GR_ZOK) f++;
    if (f < g->m) {
        struct gr_zop_result one = r[f + 1];
        one.created_path = NULL;
        settle_item(g->idx[f], &one, gr_kzk_from_zrc(r[f + 1].rc), item_rc, res, ok_code);
        memmove(&g->idx[f], &g->idx[f + 1], (size_t)(g->m - f - 1) * sizeof(int));
        g->m--;
        g->failures++;
    } else if (g->m == 1) { /* alone and no failing op reported: the multi's code is its own */
        settle_item(g->idx[0], &r[1], gr_kzk_from_zrc(zrc), item_rc, res, ok_code);
        g->m = 0;
    } else {
        g->failures = MULTI_RETRIES; /* no failing op reported: item by item */
    }
    if (g->m == 0) {
        gbatch_free(g);
    } else if (g->failures >= MULTI_RETRIES && g->m > 1) {
        for (int i = 0; i < g->m; i++) next[(*nn)++] = gbatch_new(&g->idx[i], 1, MULTI_RETRIES);
        gbatch_free(g);
    } else {
        next[(*nn)++] = g;
    }
    return 0;
}

/* Runs n single-op items as guarded multis of up to k->batch-1 ops. item_rc[i] gets the item's
 * kzk code; ok_code is a code to treat as success (e.g. EEXISTS for parents). res (optional)
 * receives each op's result. Returns 0, GR_ECONTROLLER_MOVED or GR_EZK.
 *
 * Independent items (`ordered` false) go up to k->depth multis at a time through the backend's
 * multi_many; ordered items (a subtree deleted deepest first) one multi at a time, each batch
 * finished (including its reruns) before the next starts.
 *
 * When an item fails, ZooKeeper rolls the whole multi back and reports the ops before the failing
 * one as OK, the failing one with its code and the later ones as RUNTIMEINCONSISTENCY: the failing
 * item is settled with its code and the others are rerun as one multi. After MULTI_RETRIES failed
 * multis in one batch the rest goes one item per multi (which made a single stale conditional
 * write cost ~1000 round trips when it was the first reaction). A connection loss reruns the
 * multis it left unanswered once the connection is back (Kafka's retryRequestsUntilConnected).
 * The first multi that finds the epoch check failed ends the call: nothing more is sent. */
static int guarded_items(struct gr_kzk *k, int32_t ezv, const struct gr_zop *ops, int n,
                         int *item_rc, struct gr_zop_result *res, int ok_code, bool ordered,
                         const struct gr_kzk_stamp_snap *snap) {
    if (n <= 0) return 0;
    int per = k->batch - 1;
    if (per < 1) per = 1;
    if (per > n) per = n; /* the buffers below are sized for what this call can use */
    int depth = ordered ? 1 : k->depth;
    if (depth > n) depth = n;
    /* The queue: batches in order; a round runs the first `depth`, then puts what is left of
     * them (reruns, retries) back at the front. Items split into singles: at most n batches. */
    int cap = n + 1;
    struct gbatch **q = gr_calloc((size_t)cap, sizeof(*q));
    struct gbatch **next = gr_calloc((size_t)cap, sizeof(*next));
    int qn = 0;
    int *tmp_idx = gr_malloc((size_t)per * sizeof(int));
    for (int start = 0; start < n; start += per) {
        int m = GR_MIN(per, n - start);
        for (int i = 0; i < m; i++) tmp_idx[i] = start + i;
        q[qn++] = gbatch_new(tmp_idx, m, 0);
    }
    free(tmp_idx);
    struct gr_zmulti *mm = gr_calloc((size_t)depth, sizeof(*mm));
    struct gr_zop **mops = gr_calloc((size_t)depth, sizeof(*mops));
    for (int j = 0; j < depth; j++) {
        mops[j] = gr_malloc((size_t)(2 * per + 1) * sizeof(struct gr_zop)); /* check, items, stamps */
        mm[j].results = gr_calloc((size_t)(2 * per + 1), sizeof(struct gr_zop_result));
        mm[j].ops = mops[j];
    }
    struct stamp **stamps = gr_malloc((size_t)(depth * per) * sizeof(*stamps));
    int out = 0, attempt = 0;
    while (qn > 0 && out == 0) {
        int w = GR_MIN(depth, qn), n_stamps = 0;
        for (int j = 0; j < w; j++) {
            mops[j][0] = gr_zop_check("/controller_epoch", ezv);
            for (int i = 0; i < q[j]->m; i++) mops[j][i + 1] = ops[q[j]->idx[i]];
            mm[j].n = 1 + append_state_stamps(k, snap, mops[j] + 1, q[j]->m, stamps, &n_stamps);
        }
        gr_zkb_multi_many(k->b, mm, w);
        for (int i = 0; i < n_stamps; i++) free(stamps[i]);
        int nn = 0;
        bool lost = false, progress = false;
        for (int j = 0; j < w; j++) {
            struct gbatch *g = q[j];
            q[j] = NULL;
            if (out) { /* after a fatal answer: release, keep nothing */
                gr_zop_results_release(mm[j].results, mm[j].n);
                gbatch_free(g);
                continue;
            }
            int rc = gbatch_settle(k, ops, g, &mm[j], item_rc, res, ok_code, next, &nn);
            if (rc == 1) lost = true;
            else progress = true;
            if (rc < 0) out = rc;
        }
        if (out) break;
        for (int j = w; j < qn; j++) next[nn++] = q[j];
        struct gbatch **t = q;
        q = next;
        next = t;
        qn = nn;
        if (progress) attempt = 0;
        if (lost && !wait_retry(k, &attempt)) {
            gr_error(LOGGER, "guarded multis failed: ZooKeeper unreachable, session expired or closing");
            out = GR_EZK;
        }
    }
    free(stamps);
    for (int j = 0; j < qn; j++) gbatch_free(q[j]);
    for (int j = 0; j < depth; j++) {
        free(mops[j]);
        free(mm[j].results);
    }
    free(mops);
    free(mm);
    free(next);
    free(q);
    return out;
}

/* ---- cluster id, seqid ---- */

int gr_kzk_get_or_create_cluster_id(struct gr_kzk *k, char out[64]) {
    for (int attempt = 0; attempt < 3; attempt++) {
        char *data = NULL;
        int len = 0;
        int rc = z_get(k, "/cluster/id", false, &data, &len, NULL);
        if (rc == GR_ZOK) {
            int d = gr_kzk_cluster_id_decode(data, (size_t)len, out);
            if (d) gr_error(LOGGER, "cannot parse /cluster/id: %.200s", data);
            free(data);
            return d;
        }
        if (rc != GR_ZNONODE) return zfail("get", "/cluster/id", rc);
        char id[23];
        gr_kzk_cluster_id_generate(id);
        size_t n;
        char *json = gr_kzk_cluster_id_encode(id, &n);
        rc = mkpath(k, "/cluster");
        if (rc == GR_ZOK) rc = z_create(k, "/cluster/id", json, (int)n, 0, NULL);
        free(json);
        if (rc == GR_ZOK) {
            snprintf(out, 64, "%s", id);
            gr_info(LOGGER, "Created cluster id %s", id);
            return 0;
        }
        if (rc != GR_ZNODEEXISTS) return zfail("create", "/cluster/id", rc);
    }
    return GR_EZK;
}

int gr_kzk_generate_broker_sequence_id(struct gr_kzk *k, int32_t *seq) {
    struct gr_zstat st;
    int rc = z_set(k, "/brokers/seqid", "", 0, GR_ZANY_VERSION, &st);
    if (rc == GR_ZNONODE) {
        rc = mkpath(k, "/brokers/seqid");
        if (rc == GR_ZOK) rc = z_set(k, "/brokers/seqid", "", 0, GR_ZANY_VERSION, &st);
    }
    if (rc != GR_ZOK) return zfail("set", "/brokers/seqid", rc);
    *seq = st.version;
    return 0;
}

/* ---- brokers ---- */

int gr_kzk_register_broker(struct gr_kzk *k, const struct gr_kzk_broker *info,
                           const struct gr_zsession *prevs, int nprev, int64_t *broker_epoch) {
    char path[64];
    snprintf(path, sizeof path, "/brokers/ids/%d", info->id);
    size_t len;
    char *json = gr_kzk_broker_encode(info, &len);
    int out = GR_EZK;
    uint64_t closed = 0; /* bit i: prevs[i] closed already */
    if (nprev > 64) nprev = 64;
    for (int attempt = 0; attempt < 5; attempt++) {
        struct gr_zop ops[2] = {gr_zop_create(path, NULL, 0, GR_ZEPHEMERAL),
                                gr_zop_set(path, json, (int)len, 0)};
        struct gr_zop_result res[2];
        int rc = z_multi(k, ops, 2, res);
        if (rc == GR_ZOK) {
            *broker_epoch = res[1].stat.czxid;
            gr_zop_results_release(res, 2);
            gr_info(LOGGER, "Registered broker %d at path %s, czxid (broker epoch): %" PRId64,
                    info->id, path, *broker_epoch);
            out = 0;
            break;
        }
        gr_zop_results_release(res, 2);
        if (rc != GR_ZNODEEXISTS) {
            out = zfail("register broker", path, rc);
            break;
        }
        struct gr_zstat st;
        rc = z_get(k, path, false, NULL, NULL, &st);
        if (rc == GR_ZNONODE) continue; /* went away meanwhile: create again */
        if (rc != GR_ZOK) {
            out = zfail("get", path, rc);
            break;
        }
        struct gr_zsession me;
        if (gr_zkb_session(k->b, &me) == GR_ZOK && me.id == st.ephemeralOwner) {
            /* Our own create went through before a connection loss. */
            *broker_epoch = st.czxid;
            gr_info(LOGGER, "Broker %d already registered by this session at %s, czxid %" PRId64,
                    info->id, path, st.czxid);
            out = 0;
            break;
        }
        int holder = -1;
        for (int i = 0; i < nprev && holder < 0; i++)
            if (prevs[i].id != 0 && prevs[i].id == st.ephemeralOwner && !(closed & (1ull << i))) holder = i;
        if (holder >= 0) {
            const struct gr_zsession *prev = &prevs[holder];
            gr_info(LOGGER, "%s is held by our previous session 0x%" PRIx64 "; closing it",
                    path, (uint64_t)prev->id);
            int c = gr_zkb_close_session(k->b, prev);
            closed |= 1ull << holder;
            if (c != GR_ZOK && c != GR_ZSESSIONEXPIRED)
                gr_warn(LOGGER, "closing previous session failed (%s); deleting %s",
                        gr_zrc_name(c), path);
            /* Closing the session removes its ephemerals; delete in case it did not. */
            int d;
            RETRY(k, d, gr_zkb_delete(k->b, path, st.version));
            if (d != GR_ZOK && d != GR_ZNONODE && d != GR_ZBADVERSION) {
                out = zfail("delete", path, d);
                break;
            }
            continue;
        }
        gr_error(LOGGER, "Error while creating ephemeral at %s, node already exists and owner "
                 "'0x%" PRIx64 "' does not match current session '0x%" PRIx64 "'",
                 path, (uint64_t)st.ephemeralOwner, (uint64_t)me.id);
        out = GR_KZK_EBROKER_REGISTERED;
        break;
    }
    free(json);
    return out;
}

int gr_kzk_update_broker(struct gr_kzk *k, const struct gr_kzk_broker *info) {
    char path[64];
    snprintf(path, sizeof path, "/brokers/ids/%d", info->id);
    size_t len;
    char *json = gr_kzk_broker_encode(info, &len);
    int rc = z_set(k, path, json, (int)len, GR_ZANY_VERSION, NULL);
    free(json);
    return rc == GR_ZOK ? 0 : zfail("set", path, rc);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int gr_kzk_get_broker_ids(struct gr_kzk *k, bool watch, int32_t **ids, int *n) {
    struct gr_zstrings ch;
    *ids = NULL;
    *n = 0;
    int rc = z_children(k, "/brokers/ids", watch, &ch);
    if (rc == GR_ZNONODE) return 0;
    if (rc != GR_ZOK) return zfail("get children", "/brokers/ids", rc);
    int32_t *v = gr_malloc((size_t)(ch.count ? ch.count : 1) * sizeof(int32_t));
    int m = 0;
    for (int i = 0; i < ch.count; i++)
        if (gr_kzk_parse_nonneg_i32(ch.names[i], &v[m]) == 0) m++;
    gr_zstrings_free(&ch);
    qsort(v, (size_t)m, sizeof(int32_t), cmp_i32);
    *ids = v;
    *n = m;
    return 0;
}

int gr_kzk_get_broker(struct gr_kzk *k, int32_t id, bool watch, struct gr_kzk_broker *out) {
    char path[64];
    snprintf(path, sizeof path, "/brokers/ids/%d", id);
    memset(out, 0, sizeof(*out));
    out->id = id;
    out->epoch = -1;
    char *data = NULL;
    int len = 0;
    struct gr_zstat st;
    int rc = z_get(k, path, watch, &data, &len, &st);
    if (rc != GR_ZOK) return zfail("get", path, rc);
    rc = gr_kzk_broker_decode(id, data, (size_t)len, out);
    if (rc) gr_error(LOGGER, "cannot parse %s: %.200s", path, data);
    else out->epoch = st.czxid;
    free(data);
    return rc;
}

void gr_kzk_brokers_free(struct gr_kzk_broker *b, int n) {
    for (int i = 0; b && i < n; i++) gr_kzk_broker_release(&b[i]);
    free(b);
}

int gr_kzk_get_all_brokers(struct gr_kzk *k, bool watch_ids, bool watch_each,
                           struct gr_kzk_broker **out, int *n) {
    int32_t *ids;
    int cnt;
    *out = NULL;
    *n = 0;
    int rc = gr_kzk_get_broker_ids(k, watch_ids, &ids, &cnt);
    if (rc) return rc;
    char **paths = gr_calloc((size_t)(cnt ? cnt : 1), sizeof(char *));
    for (int i = 0; i < cnt; i++) paths[i] = gr_asprintf("/brokers/ids/%d", ids[i]);
    struct gr_zget_result *res = gr_calloc((size_t)(cnt ? cnt : 1), sizeof(*res));
    int zrc = cnt ? z_get_many(k, (const char *const *)paths, cnt, watch_each, res) : GR_ZOK;
    struct gr_kzk_broker *b = gr_calloc((size_t)(cnt ? cnt : 1), sizeof(*b));
    int m = 0;
    for (int i = 0; i < cnt; i++) {
        if (res[i].rc == GR_ZNONODE) continue;
        if (res[i].rc != GR_ZOK) {
            if (zrc == GR_ZOK) zrc = res[i].rc;
            continue;
        }
        if (gr_kzk_broker_decode(ids[i], res[i].data, (size_t)res[i].len, &b[m])) {
            gr_error(LOGGER, "cannot parse %s: %.200s", paths[i], res[i].data);
            continue;
        }
        b[m++].epoch = res[i].stat.czxid;
    }
    gr_zget_results_release(res, cnt);
    free(res);
    for (int i = 0; i < cnt; i++) free(paths[i]);
    free(paths);
    free(ids);
    if (zrc != GR_ZOK) {
        gr_kzk_brokers_free(b, m);
        return zfail("get", "/brokers/ids/*", zrc);
    }
    *out = b;
    *n = m;
    return 0;
}

/* ---- controller ---- */

int gr_kzk_get_controller_id(struct gr_kzk *k, bool watch, int32_t *broker_id) {
    *broker_id = -1;
    char *data = NULL;
    int len = 0;
    int rc;
    if (watch) {
        /* exists-watch semantics (fires on creation too), then read. */
        RETRY(k, rc, gr_zkb_exists(k->b, "/controller", true, NULL));
        if (rc == GR_ZNONODE) return 0;
        if (rc != GR_ZOK) return zfail("exists", "/controller", rc);
    }
    rc = z_get(k, "/controller", false, &data, &len, NULL);
    if (rc == GR_ZNONODE) return 0;
    if (rc != GR_ZOK) return zfail("get", "/controller", rc);
    rc = gr_kzk_controller_decode(data, (size_t)len, broker_id);
    if (rc) gr_error(LOGGER, "cannot parse /controller: %.200s", data);
    free(data);
    return rc;
}

int gr_kzk_delete_controller_if_named(struct gr_kzk *k, int32_t broker_id) {
    /* /controller_epoch first: every election moves it in the multi that creates /controller, so
     * the delete below, conditional on it too, cannot remove a claim won after this read -- one
     * created at the same version 0 once the znode read below went (our session expired, a
     * lagging server answered the read). Absent or unreadable: the version alone. */
    int32_t epoch = -1, epoch_version = -1;
    int rc = gr_kzk_get_controller_epoch(k, false, &epoch, &epoch_version);
    if (rc != 0 && rc != GR_KZK_ENONODE && rc != GR_ECORRUPT) return rc;
    bool guard = rc == 0;
    char *data = NULL;
    int len = 0;
    struct gr_zstat st;
    rc = z_get(k, "/controller", false, &data, &len, &st);
    if (rc == GR_ZNONODE) return 0;
    if (rc != GR_ZOK) return zfail("get", "/controller", rc);
    int32_t id = -1;
    bool ours = gr_kzk_controller_decode(data, (size_t)len, &id) == 0 && id == broker_id;
    free(data);
    if (!ours) return 0;
    /* a retry after a connection loss that finds it gone (NONODE) or replaced (BADVERSION) is
     * fine; so is an election since the epoch read (the guard's check fails: CONTROLLER_MOVED) */
    if (guard) {
        struct gr_zop op = gr_zop_delete("/controller", st.version);
        rc = gr_kzk_guarded_multi(k, epoch_version, &op, 1, NULL);
        return rc == GR_ECONTROLLER_MOVED || rc == GR_KZK_ENONODE || rc == GR_KZK_EBADVERSION ? 0 : rc;
    }
    RETRY(k, rc, gr_zkb_delete(k->b, "/controller", st.version));
    if (rc == GR_ZNONODE || rc == GR_ZBADVERSION) return 0;
    return rc == GR_ZOK ? 0 : zfail("delete", "/controller", rc);
}

int gr_kzk_get_controller_epoch(struct gr_kzk *k, bool watch, int32_t *epoch,
                                int32_t *zk_version) {
    char *data = NULL;
    int len = 0;
    struct gr_zstat st;
    int rc = z_get(k, "/controller_epoch", watch, &data, &len, &st);
    if (rc != GR_ZOK) return zfail("get", "/controller_epoch", rc);
    rc = gr_kzk_controller_epoch_decode(data, (size_t)len, epoch);
    if (rc) gr_error(LOGGER, "cannot parse /controller_epoch: %.40s", data);
    else if (zk_version) *zk_version = st.version;
    free(data);
    return rc;
}

/* checkControllerAndEpoch: our own multi may have succeeded before a connection loss. */
static int check_controller_and_epoch(struct gr_kzk *k, int32_t broker_id, int32_t new_epoch,
                                      int32_t *epoch_zk_version) {
    int32_t cur;
    int rc = gr_kzk_get_controller_id(k, false, &cur);
    if (rc) return rc == GR_ECORRUPT ? GR_ECONTROLLER_MOVED : rc;
    if (cur != broker_id) return GR_ECONTROLLER_MOVED;
    int32_t e, v;
    rc = gr_kzk_get_controller_epoch(k, false, &e, &v);
    if (rc) return rc == GR_KZK_ENONODE ? GR_EZK : rc;
    if (e != new_epoch) return GR_ECONTROLLER_MOVED;
    *epoch_zk_version = v;
    return 0;
}

int gr_kzk_register_controller_and_increment_epoch(struct gr_kzk *k, int32_t broker_id,
                                                   int32_t *new_epoch, int32_t *epoch_zk_version) {
    int32_t cur = 0, ver = 0;
    int rc = gr_kzk_get_controller_epoch(k, false, &cur, &ver);
    if (rc == GR_KZK_ENONODE) {
        int zrc = z_create(k, "/controller_epoch", "0", 1, 0, NULL);
        if (zrc == GR_ZOK) {
            gr_info(LOGGER, "Successfully created /controller_epoch with initial epoch 0");
            cur = 0;
            ver = 0;
            rc = 0;
        } else if (zrc == GR_ZNODEEXISTS) {
            rc = gr_kzk_get_controller_epoch(k, false, &cur, &ver);
            if (rc == GR_KZK_ENONODE) rc = GR_EZK;
        } else {
            rc = zfail("create", "/controller_epoch", zrc);
        }
    }
    if (rc) return rc == GR_ECORRUPT ? GR_EZK : rc;

    int32_t next = cur + 1;
    size_t clen, elen;
    char *cjson = gr_kzk_controller_encode(broker_id, gr_wall_ms(), !k->no_stamps, &clen);
    char *ejson = gr_kzk_controller_epoch_encode(next, &elen);
    struct gr_zop ops[2] = {gr_zop_create("/controller", cjson, (int)clen, GR_ZEPHEMERAL),
                            gr_zop_set("/controller_epoch", ejson, (int)elen, ver)};
    struct gr_zop_result res[2];
    int zrc = z_multi(k, ops, 2, res);
    free(cjson);
    free(ejson);
    if (zrc == GR_ZOK) {
        *new_epoch = next;
        *epoch_zk_version = res[1].stat.version;
        rc = 0;
    } else if (zrc == GR_ZNODEEXISTS || zrc == GR_ZBADVERSION) {
        rc = check_controller_and_epoch(k, broker_id, next, epoch_zk_version);
        if (rc == 0) *new_epoch = next;
    } else {
        rc = zfail("register controller multi", "/controller", zrc);
    }
    gr_zop_results_release(res, 2);
    return rc;
}

int gr_kzk_delete_controller_guarded(struct gr_kzk *k, int32_t epoch_zk_version) {
    struct gr_zop op = gr_zop_delete("/controller", GR_ZANY_VERSION);
    int rc = gr_kzk_guarded_multi(k, epoch_zk_version, &op, 1, NULL);
    return rc == GR_KZK_ENONODE ? 0 : rc;
}

/* ---- topics ---- */

int gr_kzk_get_topics(struct gr_kzk *k, bool watch, struct gr_zstrings *out) {
    int rc = z_children(k, "/brokers/topics", watch, out);
    if (rc == GR_ZNONODE) return 0;
    return rc == GR_ZOK ? 0 : zfail("get children", "/brokers/topics", rc);
}

static char *topic_path(const char *topic) {
    return gr_asprintf("/brokers/topics/%s", topic);
}

int gr_kzk_get_topic_assignments(struct gr_kzk *k, const char *const *topics, int n, bool watch,
                                 struct gr_kzk_topic_assignment *out) {
    return gr_kzk_get_topic_assignments_since(k, topics, n, watch, NULL, NULL, out);
}

int gr_kzk_get_topic_assignments_since(struct gr_kzk *k, const char *const *topics, int n, bool watch,
                                       const int64_t *known_czxid, const int32_t *known_version,
                                       struct gr_kzk_topic_assignment *out) {
    memset(out, 0, sizeof(*out) * (size_t)(n > 0 ? n : 0));
    if (n <= 0) return 0;
    char **paths = gr_malloc((size_t)n * sizeof(char *));
    for (int i = 0; i < n; i++) paths[i] = topic_path(topics[i]);
    struct gr_zget_result *res = gr_calloc((size_t)n, sizeof(*res));
    int zrc = z_get_many(k, (const char *const *)paths, n, watch, res);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        struct gr_kzk_topic_assignment *a = &out[i];
        if (res[i].rc == GR_ZOK && known_czxid && known_version && known_czxid[i] != 0 &&
            res[i].stat.czxid == known_czxid[i] && res[i].stat.version == known_version[i]) {
            a->zk_version = res[i].stat.version;
            a->czxid = res[i].stat.czxid;
            a->unchanged = true;
            a->rc = 0;
        } else if (res[i].rc == GR_ZOK) {
            if (gr_kzk_topic_assignment_decode(res[i].data, (size_t)res[i].len, a)) {
                gr_error(LOGGER, "cannot parse %s: %.200s", paths[i], res[i].data);
                a->rc = GR_ECORRUPT;
            } else {
                a->zk_version = res[i].stat.version;
                a->czxid = res[i].stat.czxid;
                a->rc = 0;
            }
        } else {
            a->rc = gr_kzk_from_zrc(res[i].rc);
            if (a->rc == GR_EZK) bad++;
        }
        a->topic = gr_strdup(topics[i]);
        free(paths[i]);
    }
    gr_zget_results_release(res, n);
    free(res);
    free(paths);
    if (bad == n && zrc != GR_ZOK) return zfail("get", "/brokers/topics/*", zrc);
    return 0;
}

int gr_kzk_create_topic(struct gr_kzk *k, const char *topic,
                        const struct gr_kzk_topic_assignment *a, const struct gr_kzk_config *cfg) {
    char *tp = topic_path(topic);
    struct gr_zstat st;
    int rc;
    RETRY(k, rc, gr_zkb_exists(k->b, tp, false, &st));
    if (rc == GR_ZOK) {
        free(tp);
        return GR_KZK_EEXISTS;
    }
    if (rc != GR_ZNONODE) {
        int r = zfail("exists", tp, rc);
        free(tp);
        return r;
    }
    /* Topic config first (as AdminZkClient), then the assignment that triggers the controller. */
    struct gr_kzk_config empty = {0};
    size_t len;
    char *cjson = gr_kzk_config_encode(cfg ? cfg : &empty, &len);
    char *cpath = gr_asprintf("/config/topics/%s", topic);
    rc = z_create(k, cpath, cjson, (int)len, 0, NULL);
    if (rc == GR_ZNONODE) {
        rc = mkpath(k, "/config/topics");
        if (rc == GR_ZOK) rc = z_create(k, cpath, cjson, (int)len, 0, NULL);
    }
    if (rc == GR_ZNODEEXISTS) rc = z_set(k, cpath, cjson, (int)len, GR_ZANY_VERSION, NULL);
    free(cjson);
    if (rc != GR_ZOK) {
        int r = zfail("create", cpath, rc);
        free(cpath);
        free(tp);
        return r;
    }
    free(cpath);
    char *ajson = gr_kzk_topic_assignment_encode(a, &len);
    rc = z_create(k, tp, ajson, (int)len, 0, NULL);
    if (rc == GR_ZNONODE) {
        rc = mkpath(k, "/brokers/topics");
        if (rc == GR_ZOK) rc = z_create(k, tp, ajson, (int)len, 0, NULL);
    }
    free(ajson);
    int r = rc == GR_ZOK ? 0 : zfail("create", tp, rc);
    free(tp);
    return r;
}

int gr_kzk_set_topic_assignment_guarded(struct gr_kzk *k, int32_t epoch_zk_version,
                                        const char *topic, const struct gr_kzk_topic_assignment *a,
                                        int32_t expected_version) {
    char *tp = topic_path(topic);
    size_t len;
    char *json = gr_kzk_topic_assignment_encode(a, &len);
    struct gr_zop op = gr_zop_set(tp, json, (int)len, expected_version);
    int rc = gr_kzk_guarded_multi(k, epoch_zk_version, &op, 1, NULL);
    free(json);
    free(tp);
    return rc;
}

int gr_kzk_set_topic_assignment(struct gr_kzk *k, const char *topic,
                                const struct gr_kzk_topic_assignment *a, int32_t expected_version) {
    char *tp = topic_path(topic);
    size_t len;
    char *json = gr_kzk_topic_assignment_encode(a, &len);
    int rc = z_set(k, tp, json, (int)len, expected_version, NULL);
    free(json);
    int r = rc == GR_ZOK ? 0 : zfail("set", tp, rc);
    free(tp);
    return r;
}

/* Collects `path` and all its descendants, parents before children, into *out. */
static int collect_tree(struct gr_kzk *k, const char *path, char ***out, int *n, int *cap) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        *out = gr_realloc(*out, (size_t)*cap * sizeof(char *));
    }
    (*out)[(*n)++] = gr_strdup(path);
    /* Breadth-first, one pipelined get_children per level. */
    int level_start = *n - 1, level_end = *n;
    while (level_start < level_end) {
        int cnt = level_end - level_start;
        struct gr_zchildren_result *cr = gr_calloc((size_t)cnt, sizeof(*cr));
        int rc;
        RETRY(k, rc, gr_zkb_get_children_many(k->b, (const char *const *)(*out + level_start), cnt,
                                              false, cr));
        if (rc != GR_ZOK) {
            gr_zchildren_results_release(cr, cnt);
            free(cr);
            return rc;
        }
        for (int i = 0; i < cnt; i++) {
            if (cr[i].rc != GR_ZOK && cr[i].rc != GR_ZNONODE) {
                rc = cr[i].rc;
                continue;
            }
            for (int j = 0; j < cr[i].children.count; j++) {
                if (*n == *cap) {
                    *cap *= 2;
                    *out = gr_realloc(*out, (size_t)*cap * sizeof(char *));
                }
                (*out)[(*n)++] = gr_asprintf("%s/%s", (*out)[level_start + i],
                                             cr[i].children.names[j]);
            }
        }
        gr_zchildren_results_release(cr, cnt);
        free(cr);
        if (rc != GR_ZOK) return rc;
        level_start = level_end;
        level_end = *n;
    }
    return GR_ZOK;
}

/* Guarded delete of a subtree, deepest first; missing nodes are fine. */
static int delete_recursive_guarded(struct gr_kzk *k, int32_t ezv, const char *path) {
    char **nodes = NULL;
    int n = 0, cap = 0;
    int zrc = collect_tree(k, path, &nodes, &n, &cap);
    int rc = 0;
    if (zrc != GR_ZOK) {
        rc = zfail("list", path, zrc);
    } else {
        struct gr_zop *ops = gr_malloc((size_t)n * sizeof(*ops));
        for (int i = 0; i < n; i++) ops[i] = gr_zop_delete(nodes[n - 1 - i], GR_ZANY_VERSION);
        int *irc = gr_calloc((size_t)n, sizeof(int));
        rc = guarded_items(k, ezv, ops, n, irc, NULL, GR_KZK_ENONODE, true, NULL);
        for (int i = 0; rc == 0 && i < n; i++)
            if (irc[i]) {
                gr_error(LOGGER, "delete %s failed: %s", ops[i].path, gr_kzk_strerror(irc[i]));
                rc = irc[i] == GR_KZK_ENOTEMPTY ? GR_EZK : irc[i];
            }
        free(irc);
        free(ops);
    }
    for (int i = 0; i < n; i++) free(nodes[i]);
    free(nodes);
    return rc;
}

static int delete_guarded_nonode_ok(struct gr_kzk *k, int32_t ezv, const char *path) {
    struct gr_zop op = gr_zop_delete(path, GR_ZANY_VERSION);
    int rc = gr_kzk_guarded_multi(k, ezv, &op, 1, NULL);
    return rc == GR_KZK_ENONODE ? 0 : rc;
}

int gr_kzk_delete_topic_guarded(struct gr_kzk *k, int32_t epoch_zk_version, const char *topic) {
    char *tp = topic_path(topic);
    int rc = delete_recursive_guarded(k, epoch_zk_version, tp);
    free(tp);
    if (rc) return rc;
    char *cp = gr_asprintf("/config/topics/%s", topic);
    rc = delete_guarded_nonode_ok(k, epoch_zk_version, cp);
    free(cp);
    if (rc) return rc;
    char *dp = gr_asprintf("/admin/delete_topics/%s", topic);
    rc = delete_guarded_nonode_ok(k, epoch_zk_version, dp);
    free(dp);
    return rc;
}

/* ---- partition states ---- */

static char *state_path(const char *topic, int32_t p) {
    return gr_asprintf("/brokers/topics/%s/partitions/%d/state", topic, p);
}

#define ISR_CHANGE_PARENT "/isr_change_notification"

int gr_kzk_get_stamping_term(struct gr_kzk *k, int32_t *epoch) {
    *epoch = -1;
    const char *paths[] = {"/controller_epoch", "/controller"};
    struct gr_zget_result res[2];
    memset(res, 0, sizeof res);
    (void)z_get_many(k, paths, 2, false, res); /* per-item answers below */
    int rc = 0;
    if (res[0].rc != GR_ZOK && res[0].rc != GR_ZNONODE) rc = zfail("get", "/controller_epoch", res[0].rc);
    else if (res[1].rc != GR_ZOK && res[1].rc != GR_ZNONODE) rc = zfail("get", "/controller", res[1].rc);
    int32_t e = -1;
    /* one election wrote both (the same multi: /controller's czxid is /controller_epoch's mzxid) */
    if (rc == 0 && res[0].rc == GR_ZOK && res[1].rc == GR_ZOK && res[1].stat.czxid == res[0].stat.mzxid &&
        gr_kzk_controller_epoch_decode(res[0].data, (size_t)res[0].len, &e) == 0 &&
        gr_kzk_controller_stamps(res[1].data, (size_t)res[1].len))
        *epoch = e;
    gr_zget_results_release(res, 2);
    return rc;
}

int gr_kzk_get_isr_change_cversion(struct gr_kzk *k, int32_t *cversion) {
    *cversion = -1;
    char *data = NULL;
    int len = 0;
    struct gr_zstat st;
    int zrc = z_get(k, ISR_CHANGE_PARENT, false, &data, &len, &st);
    free(data);
    if (zrc == GR_ZOK) *cversion = st.cversion;
    return zrc == GR_ZOK || zrc == GR_ZNONODE ? 0 : zfail("get", ISR_CHANGE_PARENT, zrc);
}

/* The stamp znodes (/brokers/topics/T/partitions) of topics[0..n), pipelined, no watches, into
 * res[0..n). Returns the number answered (the znode read or absent) and *zrc the batch's code. */
static int get_stamp_znodes(struct gr_kzk *k, const char *const *topics, int n, struct gr_zget_result *res, int *zrc) {
    char **paths = gr_malloc((size_t)n * sizeof(char *));
    for (int i = 0; i < n; i++) paths[i] = gr_asprintf("/brokers/topics/%s/partitions", topics[i]);
    *zrc = z_get_many(k, (const char *const *)paths, n, false, res);
    int answered = 0;
    for (int i = 0; i < n; i++) {
        if (res[i].rc == GR_ZOK || res[i].rc == GR_ZNONODE) answered++;
        free(paths[i]);
    }
    free(paths);
    return answered;
}

int gr_kzk_get_state_stamps(struct gr_kzk *k, const char *const *topics, int n, int64_t *mzxid) {
    memset(mzxid, 0, sizeof(*mzxid) * (size_t)(n > 0 ? n : 0));
    if (n <= 0) return 0;
    struct gr_zget_result *res = gr_calloc((size_t)n, sizeof(*res));
    int zrc;
    int answered = get_stamp_znodes(k, topics, n, res, &zrc);
    for (int i = 0; i < n; i++)
        if (res[i].rc == GR_ZOK) mzxid[i] = res[i].stat.mzxid;
    gr_zget_results_release(res, n);
    free(res);
    return answered == 0 && zrc != GR_ZOK ? zfail("get", "state stamps", zrc) : 0;
}

int gr_kzk_get_topic_stamps(struct gr_kzk *k, const char *const *topics, int n, struct gr_kzk_topic_stamp *out) {
    memset(out, 0, sizeof(*out) * (size_t)(n > 0 ? n : 0));
    if (n <= 0) return 0;
    struct gr_zget_result *res = gr_calloc((size_t)n, sizeof(*res));
    int zrc;
    int answered = get_stamp_znodes(k, topics, n, res, &zrc);
    for (int i = 0; i < n; i++) {
        if (res[i].rc == GR_ZOK) {
            out[i].rc = gr_kzk_topic_stamp_decode(res[i].data, (size_t)(res[i].data ? res[i].len : 0),
                                                  &out[i].topic_id);
            out[i].zk_version = res[i].stat.version;
            out[i].czxid = res[i].stat.czxid;
        } else {
            out[i].rc = gr_kzk_from_zrc(res[i].rc);
        }
    }
    gr_zget_results_release(res, n);
    free(res);
    return answered == 0 && zrc != GR_ZOK ? zfail("get", "topic stamps", zrc) : 0;
}

int gr_kzk_get_partition_states(struct gr_kzk *k, const struct gr_kzk_tp *tps, int n,
                                struct gr_kzk_state_result *out) {
    memset(out, 0, sizeof(*out) * (size_t)(n > 0 ? n : 0));
    if (n <= 0) return 0;
    char **paths = gr_malloc((size_t)n * sizeof(char *));
    for (int i = 0; i < n; i++) paths[i] = state_path(tps[i].topic, tps[i].partition);
    struct gr_zget_result *res = gr_calloc((size_t)n, sizeof(*res));
    int zrc = z_get_many(k, (const char *const *)paths, n, false, res);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        if (res[i].rc == GR_ZOK) {
            out[i].lai.zk_version = res[i].stat.version;
            if (gr_kzk_partition_state_decode(res[i].data, (size_t)res[i].len, &out[i].lai)) {
                gr_error(LOGGER, "cannot parse %s: %.200s", paths[i], res[i].data);
                out[i].rc = GR_ECORRUPT;
            }
        } else {
            out[i].rc = gr_kzk_from_zrc(res[i].rc);
            if (out[i].rc == GR_EZK) bad++;
        }
        free(paths[i]);
    }
    gr_zget_results_release(res, n);
    free(res);
    free(paths);
    if (bad == n && zrc != GR_ZOK) return zfail("get", "partition states", zrc);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A write retried after a connection loss may find its own first attempt: the request reached
 * ZooKeeper, the connection dropped before the answer, and the retry got NODEEXISTS (a create) or
 * BADVERSION (a conditional set; found by the simulation, seeds 2100/2165 and 64). If the znode now
 * holds exactly our data at version expected + 1 (a create: expected -1), the write is ours (a
 * partition state's JSON carries our controller epoch): count it as done and report its stat.
 * The one rule for every state write (gr_kzk_create_partition_states, _update_partition_states). */
static bool landed_already(struct gr_kzk *k, const char *path, const char *json, int expected,
                           struct gr_zstat *st_out) {
    char *data = NULL;
    int len = 0;
    struct gr_zstat st;
    bool ours = z_get(k, path, false, &data, &len, &st) == GR_ZOK && st.version == expected + 1 &&
                (size_t)len == strlen(json) && memcmp(data, json, (size_t)len) == 0;
    free(data);
    if (ours) *st_out = st;
    return ours;
}

int gr_kzk_create_partition_states(struct gr_kzk *k, int32_t epoch_zk_version,
                                   const struct gr_kzk_state_write *items, int n,
                                   struct gr_kzk_write_result *res) {
    if (n <= 0) return 0;
    /* Phase 1: parents (…/partitions once per topic, then …/partitions/P), existing ones fine. */
    char **parents = gr_malloc((size_t)n * 2 * sizeof(char *));
    int np = 0;
    for (int i = 0; i < n; i++)
        parents[np++] = gr_asprintf("/brokers/topics/%s/partitions", items[i].topic);
    qsort(parents, (size_t)np, sizeof(char *), cmp_str);
    int u = 0;
    for (int i = 0; i < np; i++) {
        if (u > 0 && strcmp(parents[u - 1], parents[i]) == 0) {
            free(parents[i]);
            continue;
        }
        parents[u++] = parents[i];
    }
    np = u;
    int n_topics = np;
    for (int i = 0; i < n; i++)
        parents[np++] = gr_asprintf("/brokers/topics/%s/partitions/%d", items[i].topic,
                                    items[i].partition);
    struct gr_zop *ops = gr_malloc((size_t)(np > n ? np : n) * sizeof(*ops));
    for (int i = 0; i < np; i++) ops[i] = gr_zop_create(parents[i], NULL, 0, 0);
    int *prc = gr_calloc((size_t)np, sizeof(int));
    /* …/partitions first, then …/partitions/P: each level's items are independent (pipelined),
     * the second needs the first. */
    int rc = guarded_items(k, epoch_zk_version, ops, n_topics, prc, NULL, GR_KZK_EEXISTS, false, NULL);
    if (!rc)
        rc = guarded_items(k, epoch_zk_version, ops + n_topics, np - n_topics, prc + n_topics, NULL,
                           GR_KZK_EEXISTS, false, NULL);
    free(prc); /* a failed parent shows up as NONODE on its state below */
    for (int i = 0; i < np; i++) free(parents[i]);
    free(parents);
    if (rc) {
        free(ops);
        return rc;
    }
    /* Phase 2: the state znodes. */
    char **paths = gr_malloc((size_t)n * sizeof(char *));
    char **jsons = gr_malloc((size_t)n * sizeof(char *));
    for (int i = 0; i < n; i++) {
        size_t len;
        paths[i] = state_path(items[i].topic, items[i].partition);
        jsons[i] = gr_kzk_partition_state_encode(items[i].lai, &len);
        ops[i] = gr_zop_create(paths[i], jsons[i], (int)len, 0);
    }
    int *irc = gr_calloc((size_t)n, sizeof(int));
    rc = guarded_items(k, epoch_zk_version, ops, n, irc, NULL, 0, false, NULL);
    for (int i = 0; !rc && i < n; i++) {
        struct gr_zstat st;
        if (irc[i] == GR_KZK_EEXISTS && landed_already(k, paths[i], jsons[i], -1, &st)) {
            gr_info(LOGGER, "%s already holds what this controller wrote (retried create after a connection loss)",
                    paths[i]);
            irc[i] = 0;
        }
    }
    for (int i = 0; i < n; i++) {
        if (res) {
            res[i].rc = rc ? rc : irc[i];
            res[i].zk_version = 0;
        }
        free(paths[i]);
        free(jsons[i]);
    }
    free(irc);
    free(paths);
    free(jsons);
    free(ops);
    return rc;
}

static int update_states(struct gr_kzk *k, int32_t epoch_zk_version, const struct gr_kzk_state_write *items, int n,
                         struct gr_kzk_write_result *res, const struct gr_kzk_stamp_snap *snap) {
    if (n <= 0) return 0;
    struct gr_zop *ops = gr_malloc((size_t)n * sizeof(*ops));
    char **paths = gr_malloc((size_t)n * sizeof(char *));
    char **jsons = gr_malloc((size_t)n * sizeof(char *));
    for (int i = 0; i < n; i++) {
        size_t len;
        paths[i] = state_path(items[i].topic, items[i].partition);
        jsons[i] = gr_kzk_partition_state_encode(items[i].lai, &len);
        ops[i] = gr_zop_set(paths[i], jsons[i], (int)len, items[i].lai->zk_version);
    }
    int *irc = gr_calloc((size_t)n, sizeof(int));
    struct gr_zop_result *zr = gr_calloc((size_t)n, sizeof(*zr));
    int rc = guarded_items(k, epoch_zk_version, ops, n, irc, zr, 0, false, snap);
    for (int i = 0; !rc && i < n; i++)
        if (irc[i] == GR_KZK_EBADVERSION && landed_already(k, paths[i], jsons[i], ops[i].version, &zr[i].stat))
            irc[i] = 0;
    for (int i = 0; i < n; i++) {
        if (res) {
            res[i].rc = rc ? rc : irc[i];
            res[i].zk_version = (!rc && !irc[i]) ? zr[i].stat.version : -1;
        }
        free(paths[i]);
        free(jsons[i]);
    }
    gr_zop_results_release(zr, n);
    free(zr);
    free(irc);
    free(paths);
    free(jsons);
    free(ops);
    return rc;
}

int gr_kzk_update_partition_states(struct gr_kzk *k, int32_t epoch_zk_version,
                                   const struct gr_kzk_state_write *items, int n,
                                   struct gr_kzk_write_result *res) {
    return gr_kzk_update_partition_states_rounds(k, epoch_zk_version, items, n, res, NULL, NULL);
}

int gr_kzk_state_write_round(const struct gr_kzk *k) {
    int per = k->batch - 1 < 1 ? 1 : k->batch - 1;
    return per * (k->depth < 1 ? 1 : k->depth);
}

int gr_kzk_update_partition_states_rounds(struct gr_kzk *k, int32_t epoch_zk_version,
                                          const struct gr_kzk_state_write *items, int n,
                                          struct gr_kzk_write_result *res,
                                          void (*round_done)(void *arg, int first, int count), void *arg) {
    int round = round_done ? gr_kzk_state_write_round(k) : n, rc = 0;
    for (int first = 0; first < n; first += round) {
        int m = GR_MIN(round, n - first);
        rc = update_states(k, epoch_zk_version, items + first, m, res ? res + first : NULL, NULL);
        if (rc) {
            for (int i = first + m; res && i < n; i++) res[i] = (struct gr_kzk_write_result){.rc = rc, .zk_version = -1};
            break;
        }
        if (first + m < n && round_done) round_done(arg, first, m);
    }
    struct gr_kzk_job *next = k->after_next_write;
    if (next && n > 0 && rc == 0) gr_kzk_job_start(next);
    return rc;
}

/* ---- update jobs ---- */

/* The stamps items' topics would get now (on the owner thread). NULL: nothing to look up. */
static struct gr_kzk_stamp_snap *stamp_snap_take(const struct gr_kzk *k, const struct gr_kzk_state_write *items, int n) {
    if (!k->stamp_id || k->no_stamps || n <= 0) return NULL;
    struct gr_kzk_stamp_snap *s = gr_calloc(1, sizeof *s);
    s->paths = gr_calloc((size_t)n, sizeof *s->paths);
    s->ids = gr_calloc((size_t)n, sizeof *s->ids);
    for (int i = 0; i < n; i++) {
        char *path = gr_asprintf("/brokers/topics/%s/partitions", items[i].topic);
        bool seen = false;
        for (int j = 0; j < s->n && !seen; j++) seen = strcmp(s->paths[j], path) == 0;
        if (seen) {
            free(path);
            continue;
        }
        const char *id = k->stamp_id(k->stamp_id_arg, items[i].topic);
        s->paths[s->n] = path;
        s->ids[s->n++] = id ? gr_strdup(id) : NULL;
    }
    return s;
}

static void stamp_snap_free(struct gr_kzk_stamp_snap *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) {
        free(s->paths[i]);
        free(s->ids[i]);
    }
    free(s->paths);
    free(s->ids);
    free(s);
}

static void *job_main(void *arg) {
    struct gr_kzk_job *j = arg;
    int64_t t0 = gr_mono_ms();
    j->rc = update_states(j->k, j->ezv, j->items, j->n, j->res, j->stamps); /* never the trigger: j->k's owner thread's */
    j->took_ms = gr_mono_ms() - t0;
    return NULL;
}

struct gr_kzk_job *gr_kzk_update_partition_states_job(struct gr_kzk *k, int32_t epoch_zk_version,
                                                      const struct gr_kzk_state_write *items, int n) {
    struct gr_kzk_job *j = gr_calloc(1, sizeof *j);
    j->k = k;
    j->ezv = epoch_zk_version;
    j->items = items;
    j->n = n;
    j->res = gr_calloc((size_t)(n > 0 ? n : 1), sizeof *j->res);
    j->stamps = stamp_snap_take(k, items, n);
    return j;
}

void gr_kzk_job_start(struct gr_kzk_job *j) {
    if (!j || j->started) return;
    j->started = true;
    if (j->k->after_next_write == j) j->k->after_next_write = NULL;
    if (j->k->async && j->n > 0 && pthread_create(&j->thread, NULL, job_main, j) == 0) {
        j->threaded = true;
        return;
    }
    job_main(j);
}

void gr_kzk_job_start_after_next_write(struct gr_kzk_job *j) {
    if (!j || j->started) return;
    if (j->k->after_next_write && j->k->after_next_write != j) gr_kzk_job_start(j->k->after_next_write);
    j->k->after_next_write = j;
}

int gr_kzk_job_wait(struct gr_kzk_job *j) {
    gr_kzk_job_start(j);
    if (j->threaded) {
        pthread_join(j->thread, NULL);
        j->threaded = false;
    }
    return j->rc;
}

void gr_kzk_job_free(struct gr_kzk_job *j) {
    if (!j) return;
    if (j->k->after_next_write == j) j->k->after_next_write = NULL;
    if (j->threaded) pthread_join(j->thread, NULL); /* a job never started is dropped unrun */
    stamp_snap_free(j->stamps);
    free(j->res);
    free(j);
}

int gr_kzk_update_partition_state_conditional(struct gr_kzk *k, const char *topic,
                                              int32_t partition,
                                              const struct gr_kzk_leader_and_isr *lai,
                                              int32_t *new_zk_version) {
    char *p = state_path(topic, partition);
    size_t len;
    char *json = gr_kzk_partition_state_encode(lai, &len);
    struct gr_zstat st;
    int rc = z_set(k, p, json, (int)len, lai->zk_version, &st);
    free(json);
    int r = rc == GR_ZOK ? 0 : zfail("set", p, rc);
    if (r == 0 && new_zk_version) *new_zk_version = st.version;
    free(p);
    return r;
}

/* ---- configs ---- */

int gr_kzk_get_entity_config(struct gr_kzk *k, const char *type, const char *name,
                             struct gr_kzk_config *out) {
    memset(out, 0, sizeof(*out));
    char *p = gr_asprintf("/config/%s/%s", type, name);
    char *data = NULL;
    int len = 0;
    int rc = z_get(k, p, false, &data, &len, NULL);
    int r;
    if (rc == GR_ZNONODE) r = 0;
    else if (rc != GR_ZOK) r = zfail("get", p, rc);
    else if (len == 0) r = 0;
    else if ((r = gr_kzk_config_decode(data, (size_t)len, out)) != 0)
        gr_error(LOGGER, "cannot parse %s: %.200s", p, data);
    free(data);
    free(p);
    return r;
}

int gr_kzk_get_entity_configs(struct gr_kzk *k, const char *type, const char *const *names, int n,
                              struct gr_kzk_config *out, int *rcs) {
    if (n <= 0) return 0;
    char **paths = gr_malloc((size_t)n * sizeof(*paths));
    for (int i = 0; i < n; i++) paths[i] = gr_asprintf("/config/%s/%s", type, names[i]);
    struct gr_zget_result *res = gr_calloc((size_t)n, sizeof(*res));
    int rc = z_get_many(k, (const char *const *)paths, n, false, res);
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof(out[i]));
        int r = res[i].rc;
        if (r == GR_ZNONODE || (r == GR_ZOK && res[i].len == 0)) rcs[i] = 0;
        else if (r != GR_ZOK) rcs[i] = zfail("get", paths[i], r);
        else if ((rcs[i] = gr_kzk_config_decode(res[i].data, (size_t)res[i].len, &out[i])) != 0)
            gr_error(LOGGER, "cannot parse %s: %.200s", paths[i], res[i].data);
        free(paths[i]);
    }
    gr_zget_results_release(res, n);
    free(res);
    free(paths);
    return rc == GR_ZOK ? 0 : gr_kzk_from_zrc(rc);
}

int gr_kzk_set_entity_config(struct gr_kzk *k, const char *type, const char *name,
                             const struct gr_kzk_config *cfg) {
    char *p = gr_asprintf("/config/%s/%s", type, name);
    size_t len;
    char *json = gr_kzk_config_encode(cfg, &len);
    int rc = z_set(k, p, json, (int)len, GR_ZANY_VERSION, NULL);
    if (rc == GR_ZNONODE) {
        char *parent = gr_asprintf("/config/%s", type);
        rc = mkpath(k, parent);
        free(parent);
        if (rc == GR_ZOK) rc = z_create(k, p, json, (int)len, 0, NULL);
        if (rc == GR_ZNODEEXISTS) rc = z_set(k, p, json, (int)len, GR_ZANY_VERSION, NULL);
    }
    free(json);
    int r = rc == GR_ZOK ? 0 : zfail("set", p, rc);
    free(p);
    if (r) return r;
    char *entity = gr_asprintf("%s/%s", type, name);
    json = gr_kzk_config_change_encode(entity, &len);
    free(entity);
    rc = z_create(k, "/config/changes/config_change_", json, (int)len, GR_ZSEQUENCE, NULL);
    if (rc == GR_ZNONODE) {
        rc = mkpath(k, "/config/changes");
        if (rc == GR_ZOK)
            rc = z_create(k, "/config/changes/config_change_", json, (int)len, GR_ZSEQUENCE, NULL);
    }
    free(json);
    return rc == GR_ZOK ? 0 : zfail("create", "/config/changes/config_change_", rc);
}

/* ---- generic children / notifications ---- */

static int children_or_empty(struct gr_kzk *k, const char *path, bool watch,
                             struct gr_zstrings *out) {
    int rc = z_children(k, path, watch, out);
    if (rc == GR_ZNONODE) return 0;
    return rc == GR_ZOK ? 0 : zfail("get children", path, rc);
}

/* Guarded delete of parent/name[i] for each name; missing ones fine. */
static int delete_children_guarded(struct gr_kzk *k, int32_t ezv, const char *parent,
                                   const char *const *names, int n) {
    if (n <= 0) return 0;
    char **paths = gr_malloc((size_t)n * sizeof(char *));
    struct gr_zop *ops = gr_malloc((size_t)n * sizeof(*ops));
    for (int i = 0; i < n; i++) {
        paths[i] = gr_asprintf("%s/%s", parent, names[i]);
        ops[i] = gr_zop_delete(paths[i], GR_ZANY_VERSION);
    }
    int *irc = gr_calloc((size_t)n, sizeof(int));
    int rc = guarded_items(k, ezv, ops, n, irc, NULL, GR_KZK_ENONODE, false, NULL);
    for (int i = 0; rc == 0 && i < n; i++)
        if (irc[i]) rc = GR_EZK;
    for (int i = 0; i < n; i++) free(paths[i]);
    free(irc);
    free(paths);
    free(ops);
    return rc;
}

int gr_kzk_get_topic_deletions(struct gr_kzk *k, bool watch, struct gr_zstrings *out) {
    return children_or_empty(k, "/admin/delete_topics", watch, out);
}

int gr_kzk_create_topic_deletion(struct gr_kzk *k, const char *topic) {
    char *p = gr_asprintf("/admin/delete_topics/%s", topic);
    int rc = z_create(k, p, NULL, 0, 0, NULL);
    if (rc == GR_ZNONODE) {
        rc = mkpath(k, "/admin/delete_topics");
        if (rc == GR_ZOK) rc = z_create(k, p, NULL, 0, 0, NULL);
    }
    int r = (rc == GR_ZOK || rc == GR_ZNODEEXISTS) ? 0 : zfail("create", p, rc);
    free(p);
    return r;
}

int gr_kzk_delete_topic_deletions_guarded(struct gr_kzk *k, int32_t epoch_zk_version,
                                          const char *const *topics, int n) {
    return delete_children_guarded(k, epoch_zk_version, "/admin/delete_topics", topics, n);
}

/* Reads a node with an exists-watch (set whether or not it exists). */
static int get_with_exists_watch(struct gr_kzk *k, const char *path, bool watch, char **data,
                                 int *len) {
    *data = NULL;
    *len = 0;
    if (watch) {
        int rc;
        RETRY(k, rc, gr_zkb_exists(k->b, path, true, NULL));
        if (rc != GR_ZOK) return rc;
    }
    return z_get(k, path, false, data, len, NULL);
}

#define REASSIGN_PATH "/admin/reassign_partitions"
#define PREFERRED_PATH "/admin/preferred_replica_election"

int gr_kzk_get_reassignment(struct gr_kzk *k, bool watch, struct gr_kzk_reassignment *out) {
    memset(out, 0, sizeof(*out));
    char *data;
    int len;
    int rc = get_with_exists_watch(k, REASSIGN_PATH, watch, &data, &len);
    if (rc != GR_ZOK) return zfail("get", REASSIGN_PATH, rc);
    rc = gr_kzk_reassignment_decode(data, (size_t)len, out);
    if (rc) gr_error(LOGGER, "cannot parse %s: %.200s", REASSIGN_PATH, data);
    free(data);
    return rc;
}

static int create_admin_node(struct gr_kzk *k, const char *path, const char *json, size_t len) {
    int rc = z_create(k, path, json, (int)len, 0, NULL);
    if (rc == GR_ZNONODE) {
        rc = mkpath(k, "/admin");
        if (rc == GR_ZOK) rc = z_create(k, path, json, (int)len, 0, NULL);
    }
    return rc == GR_ZOK ? 0 : zfail("create", path, rc);
}

int gr_kzk_create_reassignment(struct gr_kzk *k, const struct gr_kzk_reassignment *r) {
    size_t len;
    char *json = gr_kzk_reassignment_encode(r, &len);
    int rc = create_admin_node(k, REASSIGN_PATH, json, len);
    free(json);
    return rc;
}

int gr_kzk_set_reassignment_guarded(struct gr_kzk *k, int32_t epoch_zk_version,
                                    const struct gr_kzk_reassignment *r) {
    size_t len;
    char *json = gr_kzk_reassignment_encode(r, &len);
    struct gr_zop op = gr_zop_set(REASSIGN_PATH, json, (int)len, GR_ZANY_VERSION);
    int rc = gr_kzk_guarded_multi(k, epoch_zk_version, &op, 1, NULL);
    if (rc == GR_KZK_ENONODE) {
        op = gr_zop_create(REASSIGN_PATH, json, (int)len, 0);
        rc = gr_kzk_guarded_multi(k, epoch_zk_version, &op, 1, NULL);
    }
    free(json);
    return rc;
}

int gr_kzk_delete_reassignment_guarded(struct gr_kzk *k, int32_t epoch_zk_version) {
    return delete_guarded_nonode_ok(k, epoch_zk_version, REASSIGN_PATH);
}

int gr_kzk_get_preferred_election(struct gr_kzk *k, bool watch, struct gr_kzk_tp **tps, int *n) {
    *tps = NULL;
    *n = 0;
    char *data;
    int len;
    int rc = get_with_exists_watch(k, PREFERRED_PATH, watch, &data, &len);
    if (rc != GR_ZOK) return zfail("get", PREFERRED_PATH, rc);
    rc = gr_kzk_tp_list_decode(data, (size_t)len, tps, n);
    if (rc) gr_error(LOGGER, "cannot parse %s: %.200s", PREFERRED_PATH, data);
    free(data);
    return rc;
}

int gr_kzk_create_preferred_election(struct gr_kzk *k, const struct gr_kzk_tp *tps, int n) {
    size_t len;
    char *json = gr_kzk_tp_list_encode(tps, n, &len);
    int rc = create_admin_node(k, PREFERRED_PATH, json, len);
    free(json);
    return rc;
}

int gr_kzk_delete_preferred_election_guarded(struct gr_kzk *k, int32_t epoch_zk_version) {
    return delete_guarded_nonode_ok(k, epoch_zk_version, PREFERRED_PATH);
}

#define ISR_PARENT "/isr_change_notification"
#define LOGDIR_PARENT "/log_dir_event_notification"

static int create_sequential(struct gr_kzk *k, const char *parent, const char *prefix,
                             const char *json, size_t len) {
    char *p = gr_asprintf("%s/%s", parent, prefix);
    int rc = z_create(k, p, json, (int)len, GR_ZSEQUENCE, NULL);
    if (rc == GR_ZNONODE) {
        rc = mkpath(k, parent);
        if (rc == GR_ZOK) rc = z_create(k, p, json, (int)len, GR_ZSEQUENCE, NULL);
    }
    int r = rc == GR_ZOK ? 0 : zfail("create", p, rc);
    free(p);
    return r;
}

int gr_kzk_create_isr_change_notification(struct gr_kzk *k, const struct gr_kzk_tp *tps, int n) {
    size_t len;
    char *json = gr_kzk_tp_list_encode(tps, n, &len);
    int rc = create_sequential(k, ISR_PARENT, "isr_change_", json, len);
    free(json);
    return rc;
}

int gr_kzk_get_isr_change_notifications(struct gr_kzk *k, bool watch, struct gr_zstrings *out) {
    return children_or_empty(k, ISR_PARENT, watch, out);
}

/* Pipelined read of parent/names[i]; calls fn for each readable one. */
static int read_children_data(struct gr_kzk *k, const char *parent, const char *const *names,
                              int n, void (*fn)(void *ctx, const char *path, const char *data,
                                                int len),
                              void *ctx) {
    if (n <= 0) return 0;
    char **paths = gr_malloc((size_t)n * sizeof(char *));
    for (int i = 0; i < n; i++) paths[i] = gr_asprintf("%s/%s", parent, names[i]);
    struct gr_zget_result *res = gr_calloc((size_t)n, sizeof(*res));
    int zrc = z_get_many(k, (const char *const *)paths, n, false, res);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        if (res[i].rc == GR_ZOK) fn(ctx, paths[i], res[i].data, res[i].len);
        else if (res[i].rc != GR_ZNONODE) bad++;
        free(paths[i]);
    }
    gr_zget_results_release(res, n);
    free(res);
    free(paths);
    if (bad && zrc != GR_ZOK) return zfail("get", parent, zrc);
    return bad ? GR_EZK : 0;
}

struct tp_acc {
    struct gr_kzk_tp *tps;
    int n, cap;
};

static void acc_isr(void *ctx, const char *path, const char *data, int len) {
    struct tp_acc *a = ctx;
    struct gr_kzk_tp *t;
    int m;
    if (gr_kzk_tp_list_decode(data, (size_t)len, &t, &m)) {
        gr_error(LOGGER, "cannot parse %s: %.200s", path, data);
        return;
    }
    if (a->n + m > a->cap) {
        a->cap = (a->n + m) * 2;
        a->tps = gr_realloc(a->tps, (size_t)a->cap * sizeof(*a->tps));
    }
    memcpy(a->tps + a->n, t, (size_t)m * sizeof(*t));
    a->n += m;
    free(t);
}

int gr_kzk_get_isr_change_partitions(struct gr_kzk *k, const char *const *names, int n,
                                     struct gr_kzk_tp **tps, int *n_tps) {
    struct tp_acc a = {0};
    int rc = read_children_data(k, ISR_PARENT, names, n, acc_isr, &a);
    if (rc) {
        gr_kzk_tps_release(a.tps, a.n);
        *tps = NULL;
        *n_tps = 0;
        return rc;
    }
    *tps = a.tps;
    *n_tps = a.n;
    return 0;
}

int gr_kzk_delete_isr_change_notifications_guarded(struct gr_kzk *k, int32_t epoch_zk_version,
                                                   const char *const *names, int n) {
    return delete_children_guarded(k, epoch_zk_version, ISR_PARENT, names, n);
}

int gr_kzk_create_log_dir_event_notification(struct gr_kzk *k, int32_t broker_id) {
    size_t len;
    char *json = gr_kzk_log_dir_event_encode(broker_id, 1, &len);
    int rc = create_sequential(k, LOGDIR_PARENT, "log_dir_event_", json, len);
    free(json);
    return rc;
}

int gr_kzk_get_log_dir_event_notifications(struct gr_kzk *k, bool watch, struct gr_zstrings *out) {
    return children_or_empty(k, LOGDIR_PARENT, watch, out);
}

struct id_acc {
    int32_t *ids;
    int n, cap;
};

static void acc_logdir(void *ctx, const char *path, const char *data, int len) {
    struct id_acc *a = ctx;
    int32_t b, e;
    if (gr_kzk_log_dir_event_decode(data, (size_t)len, &b, &e)) {
        gr_error(LOGGER, "cannot parse %s: %.200s", path, data);
        return;
    }
    if (e != 1) return;
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 8;
        a->ids = gr_realloc(a->ids, (size_t)a->cap * sizeof(int32_t));
    }
    a->ids[a->n++] = b;
}

int gr_kzk_get_log_dir_event_brokers(struct gr_kzk *k, const char *const *names, int n,
                                     int32_t **ids, int *n_ids) {
    struct id_acc a = {0};
    int rc = read_children_data(k, LOGDIR_PARENT, names, n, acc_logdir, &a);
    if (rc) {
        free(a.ids);
        *ids = NULL;
        *n_ids = 0;
        return rc;
    }
    *ids = a.ids;
    *n_ids = a.n;
    return 0;
}

int gr_kzk_delete_log_dir_event_notifications_guarded(struct gr_kzk *k, int32_t epoch_zk_version,
                                                      const char *const *names, int n) {
    return delete_children_guarded(k, epoch_zk_version, LOGDIR_PARENT, names, n);
}

/* ---- producer id block, feature ---- */

#define PID_PATH "/latest_producer_id_block"

int gr_kzk_get_producer_id_block(struct gr_kzk *k, struct gr_kzk_producer_id_block *out,
                                 int32_t *zk_version) {
    char *data = NULL;
    int len = 0;
    struct gr_zstat st;
    int rc = z_get(k, PID_PATH, false, &data, &len, &st);
    if (rc != GR_ZOK) return zfail("get", PID_PATH, rc);
    if (zk_version) *zk_version = st.version;
    if (len == 0) {
        free(data);
        return GR_KZK_ENONODE;
    }
    rc = gr_kzk_producer_id_block_decode(data, (size_t)len, out);
    if (rc) gr_error(LOGGER, "cannot parse %s: %.200s", PID_PATH, data);
    free(data);
    return rc;
}

int gr_kzk_set_producer_id_block(struct gr_kzk *k, const struct gr_kzk_producer_id_block *blk,
                                 int32_t expected_version) {
    size_t len;
    char *json = gr_kzk_producer_id_block_encode(blk, &len);
    int rc = z_set(k, PID_PATH, json, (int)len, expected_version, NULL);
    if (rc == GR_ZNONODE) rc = z_create(k, PID_PATH, json, (int)len, 0, NULL);
    free(json);
    return rc == GR_ZOK ? 0 : zfail("set", PID_PATH, rc);
}

int gr_kzk_get_feature_znode(struct gr_kzk *k, bool watch, struct gr_kzk_feature_znode *out,
                             int32_t *zk_version) {
    memset(out, 0, sizeof(*out));
    char *data = NULL;
    int len = 0;
    struct gr_zstat st;
    int rc;
    if (watch) {
        RETRY(k, rc, gr_zkb_exists(k->b, "/feature", true, NULL));
        if (rc != GR_ZOK) return zfail("exists", "/feature", rc);
    }
    rc = z_get(k, "/feature", false, &data, &len, &st);
    if (rc != GR_ZOK) return zfail("get", "/feature", rc);
    if (zk_version) *zk_version = st.version;
    rc = gr_kzk_feature_znode_decode(data, (size_t)len, out);
    if (rc) gr_error(LOGGER, "cannot parse /feature: %.200s", data);
    free(data);
    return rc;
}

int gr_kzk_set_feature_znode(struct gr_kzk *k, const struct gr_kzk_feature_znode *f) {
    size_t len;
    char *json = gr_kzk_feature_znode_encode(f, &len);
    int rc = z_set(k, "/feature", json, (int)len, GR_ZANY_VERSION, NULL);
    if (rc == GR_ZNONODE) {
        rc = z_create(k, "/feature", json, (int)len, 0, NULL);
        if (rc == GR_ZNODEEXISTS) rc = z_set(k, "/feature", json, (int)len, GR_ZANY_VERSION, NULL);
    }
    free(json);
    return rc == GR_ZOK ? 0 : zfail("set", "/feature", rc);
}

/* ---- generic watches ---- */

int gr_kzk_watch_exists(struct gr_kzk *k, const char *path, bool *exists) {
    int rc;
    RETRY(k, rc, gr_zkb_exists(k->b, path, true, NULL));
    if (rc == GR_ZOK || rc == GR_ZNONODE) {
        *exists = rc == GR_ZOK;
        return 0;
    }
    return zfail("exists", path, rc);
}

int gr_kzk_watch_children(struct gr_kzk *k, const char *path, struct gr_zstrings *out) {
    int rc = z_children(k, path, true, out);
    return rc == GR_ZOK ? 0 : zfail("get children", path, rc);
}

/* ---- /latest_producer_id_block: create if absent (producer id manager) ---- */

int gr_kzk_ensure_producer_id_block(struct gr_kzk *k) {
    int rc = z_create(k, PID_PATH, NULL, 0, 0, NULL);
    return rc == GR_ZOK || rc == GR_ZNODEEXISTS ? 0 : zfail("create", PID_PATH, rc);
}

int gr_kzk_get_entity_names(struct gr_kzk *k, const char *type, struct gr_zstrings *out) {
    char *path = gr_asprintf("/config/%s", type);
    int rc = z_children(k, path, false, out);
    if (rc == GR_ZNONODE) {
        memset(out, 0, sizeof *out);
        rc = GR_ZOK;
    }
    int ret = rc == GR_ZOK ? 0 : zfail("get children", path, rc);
    free(path);
    return ret;
}
