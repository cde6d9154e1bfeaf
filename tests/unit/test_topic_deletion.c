/* Topic deletion manager (Kafka 2.7's TopicDeletionManager) and the controller side of controlled
 * shutdown, over an in-memory ZooKeeper backend and a recording sender (the fixture is the one of
 * test_state_machines.c).
 *
 * Covered: a full deletion (Offline -> NonExistent partitions, UpdateMetadata leader -2,
 * StopReplica delete=false then delete=true with epoch -2, responses -> DeletionSuccessful,
 * completion deletes the three znodes and the context entry); a replica on a dead broker makes the
 * topic ineligible and the deletion resumes when the broker starts up; a StopReplica error fails
 * the replica (ineligible) and an explicit resume retries it; a whole-request error; a replica
 * that goes offline during deletion; delete.topic.enable=false and unknown topics (znodes
 * removed); failover init (ineligible when a replica is offline); the controller moving during
 * completion (nothing deleted); gauges and OfflinePartitionsCount; controlled shutdown (stale
 * epoch, unknown broker, leaders moved with the ControlledShutdown election, followers stopped
 * and removed from the ISR, RF=1 partitions remaining). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/metrics.h"
#include "common/util.h"
#include "controller/context.h"
#include "controller/controlled_shutdown.h"
#include "controller/event_manager.h"
#include "controller/flows.h"
#include "controller/partition_sm.h"
#include "controller/replica_sm.h"
#include "controller/request_batch.h"
#include "controller/response.h"
#include "controller/sender.h"
#include "controller/states.h"
#include "controller/topic_deletion.h"
#include "zk/kzk.h"

static int failures;
#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            failures++;                                                           \
        }                                                                         \
    } while (0)

/* ======================= a tiny in-memory ZooKeeper ======================= */

struct fnode {
    char *path;
    char *data;
    int len;
    struct gr_zstat st;
};

struct fz {
    struct gr_zk_backend base;
    struct fnode *v;
    int n, cap;
    int64_t zxid;
    int seq;
    char *bump_before_multi; /* fault: bump this node's version before the next multi */
};

static struct fz *FZ(struct gr_zk_backend *b) { return (struct fz *)b; }

static int find(struct fz *z, const char *path) {
    for (int i = 0; i < z->n; i++)
        if (strcmp(z->v[i].path, path) == 0) return i;
    return -1;
}

static bool has_children(struct fz *z, const char *path) {
    size_t l = strlen(path);
    for (int i = 0; i < z->n; i++)
        if (strncmp(z->v[i].path, path, l) == 0 && z->v[i].path[l] == '/') return true;
    return false;
}

static int fz_create_raw(struct fz *z, const char *path, const void *data, int len, int flags, char **created) {
    char buf[512];
    if (flags & GR_ZSEQUENCE) {
        snprintf(buf, sizeof buf, "%s%010d", path, z->seq++);
        path = buf;
    }
    if (find(z, path) >= 0) return GR_ZNODEEXISTS;
    char parent[512];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = 0;
        if (find(z, parent) < 0) return GR_ZNONODE;
    }
    if (z->n == z->cap) {
        z->cap = z->cap ? z->cap * 2 : 64;
        z->v = gr_realloc(z->v, (size_t)z->cap * sizeof *z->v);
    }
    struct fnode *nd = &z->v[z->n++];
    memset(nd, 0, sizeof *nd);
    nd->path = gr_strdup(path);
    nd->len = data ? len : 0;
    nd->data = gr_malloc((size_t)nd->len + 1);
    if (nd->len) memcpy(nd->data, data, (size_t)nd->len);
    nd->data[nd->len] = 0;
    nd->st.czxid = nd->st.mzxid = ++z->zxid;
    if (created) *created = gr_strdup(path);
    return GR_ZOK;
}

static int fz_delete_raw(struct fz *z, const char *path, int version) {
    int i = find(z, path);
    if (i < 0) return GR_ZNONODE;
    if (version != -1 && version != z->v[i].st.version) return GR_ZBADVERSION;
    if (has_children(z, path)) return GR_ZNOTEMPTY;
    free(z->v[i].path);
    free(z->v[i].data);
    z->v[i] = z->v[--z->n];
    return GR_ZOK;
}

static int fz_set_raw(struct fz *z, const char *path, const void *data, int len, int version, struct gr_zstat *st) {
    int i = find(z, path);
    if (i < 0) return GR_ZNONODE;
    if (version != -1 && version != z->v[i].st.version) return GR_ZBADVERSION;
    free(z->v[i].data);
    z->v[i].len = data ? len : 0;
    z->v[i].data = gr_malloc((size_t)z->v[i].len + 1);
    if (z->v[i].len) memcpy(z->v[i].data, data, (size_t)z->v[i].len);
    z->v[i].data[z->v[i].len] = 0;
    z->v[i].st.version++;
    z->v[i].st.mzxid = ++z->zxid;
    if (st) *st = z->v[i].st;
    return GR_ZOK;
}

static int f_create(struct gr_zk_backend *b, const char *path, const void *data, int len, int flags, char **created) {
    return fz_create_raw(FZ(b), path, data, len, flags, created);
}
static int f_delete(struct gr_zk_backend *b, const char *path, int version) { return fz_delete_raw(FZ(b), path, version); }
static int f_get(struct gr_zk_backend *b, const char *path, bool watch, char **data, int *len, struct gr_zstat *st) {
    (void)watch;
    struct fz *z = FZ(b);
    int i = find(z, path);
    if (i < 0) return GR_ZNONODE;
    if (data) {
        *data = gr_malloc((size_t)z->v[i].len + 1);
        memcpy(*data, z->v[i].data, (size_t)z->v[i].len + 1);
    }
    if (len) *len = z->v[i].len;
    if (st) *st = z->v[i].st;
    return GR_ZOK;
}
static int f_set(struct gr_zk_backend *b, const char *path, const void *data, int len, int version, struct gr_zstat *st) {
    return fz_set_raw(FZ(b), path, data, len, version, st);
}
static int f_exists(struct gr_zk_backend *b, const char *path, bool watch, struct gr_zstat *st) {
    (void)watch;
    struct fz *z = FZ(b);
    int i = find(z, path);
    if (i < 0) return GR_ZNONODE;
    if (st) *st = z->v[i].st;
    return GR_ZOK;
}
static int f_children(struct gr_zk_backend *b, const char *path, bool watch, struct gr_zstrings *out) {
    (void)watch;
    struct fz *z = FZ(b);
    memset(out, 0, sizeof *out);
    if (find(z, path) < 0) return GR_ZNONODE;
    size_t l = strlen(path);
    out->names = gr_malloc((size_t)(z->n + 1) * sizeof(char *));
    for (int i = 0; i < z->n; i++) {
        const char *p = z->v[i].path;
        if (strncmp(p, path, l) == 0 && p[l] == '/' && !strchr(p + l + 1, '/'))
            out->names[out->count++] = gr_strdup(p + l + 1);
        else if (l == 1 && p[0] == '/' && p[1] && !strchr(p + 1, '/')) /* children of "/" */
            out->names[out->count++] = gr_strdup(p + 1);
    }
    return GR_ZOK;
}

static void snapshot(struct fz *z, struct fnode **v, int *n) {
    *n = z->n;
    *v = gr_malloc((size_t)(z->n + 1) * sizeof **v);
    for (int i = 0; i < z->n; i++) {
        (*v)[i] = z->v[i];
        (*v)[i].path = gr_strdup(z->v[i].path);
        (*v)[i].data = gr_malloc((size_t)z->v[i].len + 1);
        memcpy((*v)[i].data, z->v[i].data, (size_t)z->v[i].len + 1);
    }
}

static void drop_nodes(struct fnode *v, int n) {
    for (int i = 0; i < n; i++) {
        free(v[i].path);
        free(v[i].data);
    }
    free(v);
}

static int f_multi(struct gr_zk_backend *b, const struct gr_zop *ops, int n, struct gr_zop_result *res) {
    struct fz *z = FZ(b);
    if (z->bump_before_multi) {
        int i = find(z, z->bump_before_multi);
        if (i >= 0) z->v[i].st.version++;
        free(z->bump_before_multi);
        z->bump_before_multi = NULL;
    }
    memset(res, 0, (size_t)n * sizeof *res);
    struct fnode *saved;
    int saved_n, saved_seq = z->seq;
    snapshot(z, &saved, &saved_n);
    int fail = -1, rc = GR_ZOK;
    for (int i = 0; i < n && fail < 0; i++) {
        const struct gr_zop *op = &ops[i];
        switch (op->type) {
        case GR_ZOP_CREATE: rc = fz_create_raw(z, op->path, op->data, op->len, op->flags, &res[i].created_path); break;
        case GR_ZOP_DELETE: rc = fz_delete_raw(z, op->path, op->version); break;
        case GR_ZOP_SET: rc = fz_set_raw(z, op->path, op->data, op->len, op->version, &res[i].stat); break;
        case GR_ZOP_CHECK: {
            int k = find(z, op->path);
            rc = k < 0 ? GR_ZNONODE : (op->version != -1 && op->version != z->v[k].st.version) ? GR_ZBADVERSION : GR_ZOK;
            break;
        }
        default: rc = GR_ZUNIMPLEMENTED;
        }
        res[i].rc = rc;
        if (rc != GR_ZOK) fail = i;
    }
    if (fail < 0) {
        drop_nodes(saved, saved_n);
        return GR_ZOK;
    }
    drop_nodes(z->v, z->n);
    z->v = saved;
    z->n = saved_n;
    z->cap = saved_n + 1;
    z->seq = saved_seq;
    for (int i = 0; i < n; i++) {
        free(res[i].created_path);
        res[i].created_path = NULL;
        res[i].rc = i < fail ? GR_ZOK : i == fail ? rc : GR_ZRUNTIMEINCONSISTENCY;
    }
    return rc;
}
static int f_get_many(struct gr_zk_backend *b, const char *const *paths, int n, bool watch, struct gr_zget_result *r) {
    for (int i = 0; i < n; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].rc = f_get(b, paths[i], watch, &r[i].data, &r[i].len, &r[i].stat);
    }
    return GR_ZOK;
}
static int f_children_many(struct gr_zk_backend *b, const char *const *paths, int n, bool watch,
                           struct gr_zchildren_result *r) {
    for (int i = 0; i < n; i++) r[i].rc = f_children(b, paths[i], watch, &r[i].children);
    return GR_ZOK;
}
static int f_session(struct gr_zk_backend *b, struct gr_zsession *out) {
    (void)b;
    memset(out, 0, sizeof *out);
    out->id = 1;
    return GR_ZOK;
}
static int f_close_session(struct gr_zk_backend *b, const struct gr_zsession *s) { (void)b, (void)s; return GR_ZOK; }
static int f_wait_connected(struct gr_zk_backend *b, int t) { (void)b, (void)t; return GR_ZOK; }
static void f_destroy(struct gr_zk_backend *b) {
    struct fz *z = FZ(b);
    drop_nodes(z->v, z->n);
    free(z->bump_before_multi);
    free(z);
}
static const struct gr_zk_backend_ops fz_ops = {f_create, f_delete, f_get, f_set, f_exists, f_children, f_multi,
                                                f_get_many, f_children_many, f_session, f_close_session,
                                                f_wait_connected, f_destroy};

/* ======================= recording sender ======================= */

struct sent {
    int32_t broker;
    int16_t api_key;
    void *req;
    void (*req_free)(void *);
    struct gr_ctrl_event *ev;
};
#define MAXSENT 256
static struct sent sent[MAXSENT];
static int n_sent;
static char chan_log[512];

static void rs_startup(void *c, struct gr_ctrl_events *em) { (void)c, (void)em; }
static void rs_shutdown(void *c) { (void)c; }
static void rs_add(void *c, const struct gr_kzk_broker *b) {
    (void)c;
    snprintf(chan_log + strlen(chan_log), sizeof chan_log - strlen(chan_log), "+%d", b->id);
}
static void rs_remove(void *c, int32_t id) {
    (void)c;
    snprintf(chan_log + strlen(chan_log), sizeof chan_log - strlen(chan_log), "-%d", id);
}
static void rs_send(void *c, int32_t broker, int16_t api_key, int16_t ver, void *req, void (*req_free)(void *),
                    struct gr_ctrl_event *ev) {
    (void)c, (void)ver;
    if (n_sent == MAXSENT) abort();
    sent[n_sent++] = (struct sent){broker, api_key, req, req_free, ev};
}
static const struct gr_ctrl_sender_ops rec_ops = {rs_startup, rs_shutdown, rs_add, rs_remove, rs_send};

static void clear_sent(void) {
    for (int i = 0; i < n_sent; i++) {
        sent[i].req_free(sent[i].req);
        gr_ctrl_event_free(sent[i].ev);
    }
    n_sent = 0;
    chan_log[0] = 0;
}

static int count_sent(int16_t api_key, int32_t broker) {
    int c = 0;
    for (int i = 0; i < n_sent; i++)
        if (sent[i].api_key == api_key && (broker < 0 || sent[i].broker == broker)) c++;
    return c;
}

/* The LeaderAndIsr partition state for t-p sent to broker, or NULL. */
static const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *sent_lai(int32_t broker, const char *t, int32_t p) {
    for (int i = 0; i < n_sent; i++) {
        if (sent[i].api_key != GR_API_LEADER_AND_ISR || sent[i].broker != broker) continue;
        const struct LeaderAndIsrRequest *r = sent[i].req;
        for (int k = 0; k < r->TopicStatesCount; k++) {
            if (strcmp(r->TopicStates[k].TopicName, t) != 0) continue;
            for (int j = 0; j < r->TopicStates[k].PartitionStatesCount; j++)
                if (r->TopicStates[k].PartitionStates[j].PartitionIndex == p) return &r->TopicStates[k].PartitionStates[j];
        }
    }
    return NULL;
}

/* ======================= fixture ======================= */

static struct fz *zk;
static struct gr_kzk *kzk;
static struct gr_ctrl_context ctx;
static struct gr_ctrl_sm sm;
static struct gr_metrics *metrics;

static struct gr_kzk_broker mkbroker(int32_t id, int64_t epoch) {
    static struct gr_kzk_endpoint eps[8];
    eps[id] = (struct gr_kzk_endpoint){.listener = (char *)"PLAINTEXT", .security_protocol = (char *)"PLAINTEXT",
                                       .host = (char *)"localhost", .port = 9090 + id};
    return (struct gr_kzk_broker){.id = id, .epoch = epoch, .jmx_port = -1, .n_endpoints = 1, .endpoints = &eps[id]};
}

static void add_live(int32_t id, int64_t epoch) {
    struct gr_kzk_broker b = mkbroker(id, epoch);
    gr_ctrl_ctx_add_live_broker(&ctx, &b);
}

/* Creates /brokers/topics/<name> and puts the assignment into the context. */
static void create_topic(const char *name, int np, const int32_t *reps, int rf) {
    struct gr_kzk_topic_assignment a = {.topic = (char *)name, .n_partitions = np};
    a.partitions = gr_calloc((size_t)np, sizeof *a.partitions);
    for (int i = 0; i < np; i++) {
        a.partitions[i].partition = i;
        a.partitions[i].n_replicas = rf;
        a.partitions[i].replicas = gr_malloc((size_t)rf * sizeof(int32_t));
        memcpy(a.partitions[i].replicas, reps + i * rf, (size_t)rf * sizeof(int32_t));
    }
    CHECK(gr_kzk_create_topic(kzk, name, &a, NULL) == 0);
    gr_ctrl_ctx_put_topic(&ctx, &a);
    a.topic = NULL;
    gr_kzk_topic_assignment_release(&a);
}

static int read_state(const char *t, int32_t p, struct gr_kzk_leader_and_isr *out) __attribute__((unused));
static int read_state(const char *t, int32_t p, struct gr_kzk_leader_and_isr *out) {
    struct gr_kzk_tp tp = {(char *)t, p};
    struct gr_kzk_state_result r;
    memset(&r, 0, sizeof r);
    int rc = gr_kzk_get_partition_states(kzk, &tp, 1, &r);
    *out = r.lai;
    return rc ? rc : r.rc;
}

static bool isr_is(const struct gr_kzk_leader_and_isr *l, const int32_t *want, int n) {
    if (l->n_isr != n) return false;
    for (int i = 0; i < n; i++)
        if (l->isr[i] != want[i]) return false;
    return true;
}

static void setup(void) {
    zk = gr_calloc(1, sizeof *zk);
    zk->base.ops = &fz_ops;
    zk->base.session_timeout_ms = 6000;
    kzk = gr_kzk_new(&zk->base);
    CHECK(fz_create_raw(zk, "/brokers", NULL, 0, 0, NULL) == 0);
    CHECK(gr_kzk_ensure_paths(kzk) == 0);
    CHECK(fz_create_raw(zk, "/controller_epoch", "0", 1, 0, NULL) == 0);
    for (int i = 1; i <= 2; i++) CHECK(fz_set_raw(zk, "/controller_epoch", "2", 1, -1, NULL) == 0);
    gr_ctrl_ctx_init(&ctx);
    ctx.epoch = 2;
    ctx.epoch_zk_version = 2;
    metrics = gr_metrics_new();
    memset(&sm, 0, sizeof sm);
    sm.controller_id = 1;
    sm.ctx = &ctx;
    sm.kzk = kzk;
    sm.sender = &rec_ops;
    sm.metrics = metrics;
    gr_ctrl_sm_init(&sm);
    add_live(1, 101);
    add_live(2, 102);
    add_live(3, 103);
}

static void teardown(void) {
    clear_sent();
    gr_ctrl_sm_release(&sm);
    gr_ctrl_ctx_release(&ctx);
    gr_kzk_free(kzk);
    f_destroy(&zk->base);
    gr_metrics_free(metrics);
}

/* ======================= tests ======================= */

static void noop_free(void *p) { (void)p; }

/* Does a StopReplica to broker carry t-p with delete flag `del` (and, if epoch != 0, that epoch)? */
static bool sent_stop(int32_t broker, const char *t, int32_t p, bool del, int32_t epoch) {
    for (int i = 0; i < n_sent; i++) {
        if (sent[i].api_key != GR_API_STOP_REPLICA || sent[i].broker != broker || !sent[i].req) continue;
        const struct StopReplicaRequest *r = sent[i].req;
        for (int k = 0; k < r->TopicStatesCount; k++) {
            if (strcmp(r->TopicStates[k].TopicName, t) != 0) continue;
            for (int j = 0; j < r->TopicStates[k].PartitionStatesCount; j++) {
                const struct StopReplicaRequest_StopReplicaPartitionState *ps = &r->TopicStates[k].PartitionStates[j];
                if (ps->PartitionIndex == p && ps->DeletePartition == del && (epoch == 0 || ps->LeaderEpoch == epoch))
                    return true;
            }
        }
    }
    return false;
}

/* The UpdateMetadata leader sent to broker for t-p (the last one), or 99 if none. */
static int32_t sent_um_leader(int32_t broker, const char *t, int32_t p) {
    int32_t leader = 99;
    for (int i = 0; i < n_sent; i++) {
        if (sent[i].api_key != GR_API_UPDATE_METADATA || sent[i].broker != broker) continue;
        const struct UpdateMetadataRequest *r = sent[i].req;
        for (int k = 0; k < r->TopicStatesCount; k++) {
            if (strcmp(r->TopicStates[k].TopicName, t) != 0) continue;
            for (int j = 0; j < r->TopicStates[k].PartitionStatesCount; j++)
                if (r->TopicStates[k].PartitionStates[j].PartitionIndex == p)
                    leader = r->TopicStates[k].PartitionStates[j].Leader;
        }
    }
    return leader;
}

/* Answers every StopReplica(delete=true) sent to broker: partition errors from err_of(p) (or
 * a top-level error with no partitions when top != NONE). Returns the number answered. */
static int answer_stop(struct gr_topic_deletion *td, int32_t broker, int16_t (*err_of)(int32_t p), int16_t top) {
    int answered = 0;
    for (int i = 0; i < n_sent; i++) {
        if (sent[i].api_key != GR_API_STOP_REPLICA || sent[i].broker != broker || !sent[i].ev) continue;
        struct gr_ctrl_event *ev = sent[i].ev;
        const struct StopReplicaRequest *rq = sent[i].req;
        struct gr_ctrl_response *r = gr_ctrl_response_new();
        r->api_key = GR_API_STOP_REPLICA;
        r->api_version = 3;
        r->broker_id = broker;
        r->request = sent[i].req;
        r->request_free = sent[i].req_free;
        sent[i].req = NULL;
        sent[i].req_free = noop_free;
        sent[i].ev = NULL;
        struct StopReplicaResponse *b = gr_arena_alloc(&r->arena, sizeof *b);
        b->ErrorCode = top;
        int n = 0;
        for (int k = 0; k < rq->TopicStatesCount; k++) n += rq->TopicStates[k].PartitionStatesCount;
        b->PartitionErrors = gr_arena_alloc(&r->arena, sizeof *b->PartitionErrors * (size_t)(n ? n : 1));
        b->PartitionErrorsCount = 0;
        if (top == GR_KERR_NONE)
            for (int k = 0; k < rq->TopicStatesCount; k++)
                for (int j = 0; j < rq->TopicStates[k].PartitionStatesCount; j++) {
                    struct StopReplicaResponse_StopReplicaPartitionError *pe = &b->PartitionErrors[b->PartitionErrorsCount++];
                    pe->TopicName = rq->TopicStates[k].TopicName;
                    pe->PartitionIndex = rq->TopicStates[k].PartitionStates[j].PartitionIndex;
                    pe->ErrorCode = err_of ? err_of(pe->PartitionIndex) : GR_KERR_NONE;
                }
        r->body = b;
        ev->payload = r;
        ev->payload_free = gr_ctrl_response_free;
        CHECK(gr_td_process_stop_replica_response(td, ev) == 0);
        gr_ctrl_event_free(ev);
        answered++;
    }
    return answered;
}

static bool znode(const char *path) {
    return find(zk, path) >= 0;
}

static void request_deletion(const char *t) {
    char p[256];
    snprintf(p, sizeof p, "/admin/delete_topics/%s", t);
    CHECK(fz_create_raw(zk, p, NULL, 0, 0, NULL) == 0);
}

/* t: 2 partitions on [1,2,3] / [2,3,1], online */
static void make_t(void) {
    int32_t reps[] = {1, 2, 3, 2, 3, 1};
    create_topic("t", 2, reps, 3);
    struct gr_kzk_tp tps[] = {{(char *)"t", 0}, {(char *)"t", 1}};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, tps, 2) == 0);
    struct gr_kzk_config cfg = {0};
    gr_kzk_config_set(&cfg, "retention.ms", "1000");
    CHECK(gr_kzk_set_entity_config(kzk, "topics", "t", &cfg) == 0);
    gr_kzk_config_release(&cfg);
    clear_sent();
}

static void test_full_deletion(void) {
    setup();
    struct gr_topic_deletion *td = gr_td_new(&sm, NULL, true);
    sm.hooks = gr_td_flow_hooks(td);
    make_t();
    CHECK(gr_td_init(td) == 0);
    request_deletion("t");
    CHECK(gr_td_process_topic_deletion(td) == 0);
    CHECK(gr_ctrl_topic_queued_for_deletion(&ctx, "t") && gr_td_deletion_started(td, "t"));
    struct gr_ctrl_partition *p0 = gr_ctrl_ctx_partition(&ctx, "t", 0);
    CHECK(p0->state == GR_PS_NONEXISTENT);
    for (int b = 1; b <= 3; b++) {
        CHECK(sent_um_leader(b, "t", 0) == GR_LEADER_DURING_DELETE && sent_um_leader(b, "t", 1) == GR_LEADER_DURING_DELETE);
        CHECK(sent_stop(b, "t", 0, false, 0) && sent_stop(b, "t", 1, false, 0));
        CHECK(sent_stop(b, "t", 0, true, GR_EPOCH_DURING_DELETE) && sent_stop(b, "t", 1, true, GR_EPOCH_DURING_DELETE));
        CHECK(gr_ctrl_replica_state_get(p0, b) == GR_RS_DELETION_STARTED);
    }
    CHECK(count_sent(GR_API_LEADER_AND_ISR, -1) == 0); /* no LeaderAndIsr for a topic being deleted */
    struct gr_td_counts c;
    gr_td_counts(td, &c);
    CHECK(c.topics_to_delete == 1 && c.replicas_to_delete == 6 && c.topics_ineligible == 0 && c.replicas_ineligible == 0);
    CHECK(answer_stop(td, 1, NULL, GR_KERR_NONE) == 1);
    CHECK(gr_ctrl_replica_state_get(p0, 1) == GR_RS_DELETION_SUCCESSFUL);
    gr_td_counts(td, &c);
    CHECK(c.replicas_to_delete == 4);
    CHECK(answer_stop(td, 2, NULL, GR_KERR_NONE) == 1);
    CHECK(gr_ctrl_ctx_topic(&ctx, "t") && znode("/brokers/topics/t"));
    CHECK(answer_stop(td, 3, NULL, GR_KERR_NONE) == 1);
    /* complete */
    CHECK(!gr_ctrl_ctx_topic(&ctx, "t"));
    CHECK(!znode("/brokers/topics/t") && !znode("/brokers/topics/t/partitions/0/state"));
    CHECK(!znode("/config/topics/t") && !znode("/admin/delete_topics/t"));
    CHECK(!gr_ctrl_topic_queued_for_deletion(&ctx, "t") && !gr_td_deletion_started(td, "t"));
    gr_td_counts(td, &c);
    CHECK(c.topics_to_delete == 0 && c.replicas_to_delete == 0);
    gr_td_free(td);
    teardown();
}

static void test_dead_replica_then_startup(void) {
    setup();
    struct gr_topic_deletion *td = gr_td_new(&sm, NULL, true);
    sm.hooks = gr_td_flow_hooks(td);
    make_t();
    CHECK(gr_td_init(td) == 0);
    gr_ctrl_ctx_remove_live_broker(&ctx, 3);
    int32_t dead[] = {3};
    CHECK(gr_ctrl_on_broker_failure(&sm, dead, 1) == 0);
    clear_sent();
    request_deletion("t");
    CHECK(gr_td_process_topic_deletion(td) == 0);
    struct gr_ctrl_partition *p0 = gr_ctrl_ctx_partition(&ctx, "t", 0);
    CHECK(gr_td_topic_ineligible(td, "t"));
    CHECK(gr_ctrl_replica_state_get(p0, 3) == GR_RS_DELETION_INELIGIBLE);
    CHECK(!sent_stop(3, "t", 0, true, 0) && sent_stop(1, "t", 0, true, GR_EPOCH_DURING_DELETE));
    struct gr_td_counts c;
    gr_td_counts(td, &c);
    CHECK(c.topics_ineligible == 1 && c.replicas_ineligible == 2);
    CHECK(answer_stop(td, 1, NULL, GR_KERR_NONE) == 1 && answer_stop(td, 2, NULL, GR_KERR_NONE) == 1);
    CHECK(gr_ctrl_ctx_topic(&ctx, "t") && znode("/admin/delete_topics/t"));
    /* Kafka's retry moved the dead replicas back to Offline; the topic stays halted */
    CHECK(gr_ctrl_replica_state_get(p0, 3) == GR_RS_OFFLINE && gr_td_topic_ineligible(td, "t"));
    clear_sent();
    /* broker 3 returns: deletion resumes for it only */
    add_live(3, 303);
    CHECK(gr_ctrl_on_broker_startup(&sm, dead, 1) == 0);
    CHECK(!gr_td_topic_ineligible(td, "t"));
    CHECK(sent_stop(3, "t", 0, true, GR_EPOCH_DURING_DELETE) && sent_stop(3, "t", 1, true, GR_EPOCH_DURING_DELETE));
    CHECK(!sent_stop(1, "t", 0, true, 0));
    CHECK(answer_stop(td, 3, NULL, GR_KERR_NONE) == 1);
    CHECK(!gr_ctrl_ctx_topic(&ctx, "t") && !znode("/brokers/topics/t") && !znode("/admin/delete_topics/t"));
    gr_td_free(td);
    teardown();
}

static int16_t storage_error_on_0(int32_t p) { return p == 0 ? GR_KERR_KAFKA_STORAGE_ERROR : GR_KERR_NONE; }

static void test_errors_and_offline_during_deletion(void) {
    setup();
    struct gr_topic_deletion *td = gr_td_new(&sm, NULL, true);
    sm.hooks = gr_td_flow_hooks(td);
    make_t();
    CHECK(gr_td_init(td) == 0);
    request_deletion("t");
    CHECK(gr_td_process_topic_deletion(td) == 0);
    struct gr_ctrl_partition *p0 = gr_ctrl_ctx_partition(&ctx, "t", 0), *p1 = gr_ctrl_ctx_partition(&ctx, "t", 1);
    CHECK(answer_stop(td, 1, storage_error_on_0, GR_KERR_NONE) == 1);
    CHECK(gr_ctrl_replica_state_get(p0, 1) == GR_RS_DELETION_INELIGIBLE);
    CHECK(gr_ctrl_replica_state_get(p1, 1) == GR_RS_DELETION_SUCCESSFUL);
    CHECK(gr_td_topic_ineligible(td, "t"));
    /* a whole-request error from broker 2 fails both of its replicas */
    CHECK(answer_stop(td, 2, NULL, GR_KERR_STALE_BROKER_EPOCH) == 1);
    CHECK(gr_ctrl_replica_state_get(p0, 2) == GR_RS_DELETION_INELIGIBLE && gr_ctrl_replica_state_get(p1, 2) == GR_RS_DELETION_INELIGIBLE);
    /* broker 3 dies while its replicas are DeletionStarted: they fail too; with nothing Started
     * any more, Kafka's retry moves every Ineligible replica back to Offline (topic still halted) */
    gr_ctrl_ctx_remove_live_broker(&ctx, 3);
    int32_t dead[] = {3};
    CHECK(gr_ctrl_on_broker_failure(&sm, dead, 1) == 0);
    CHECK(gr_ctrl_replica_state_get(p0, 3) == GR_RS_OFFLINE && gr_ctrl_replica_state_get(p0, 2) == GR_RS_OFFLINE);
    CHECK(gr_ctrl_replica_state_get(p1, 1) == GR_RS_DELETION_SUCCESSFUL && gr_td_topic_ineligible(td, "t"));
    add_live(3, 333);
    clear_sent();
    /* resumeDeletionForTopics (what broker start-up or a finished reassignment does) retries */
    const char *topics[] = {"t"};
    CHECK(gr_td_resume_for_topics(td, topics, 1) == 0);
    CHECK(sent_stop(1, "t", 0, true, 0) && !sent_stop(1, "t", 1, true, 0));
    CHECK(sent_stop(2, "t", 0, true, 0) && sent_stop(2, "t", 1, true, 0) && sent_stop(3, "t", 1, true, 0));
    for (int b = 1; b <= 3; b++) CHECK(answer_stop(td, b, NULL, GR_KERR_NONE) == 1);
    CHECK(!gr_ctrl_ctx_topic(&ctx, "t") && !znode("/brokers/topics/t"));
    gr_td_free(td);
    teardown();
}

static void test_disabled_unknown_and_failover(void) {
    setup();
    struct gr_topic_deletion *off = gr_td_new(&sm, NULL, false);
    make_t();
    request_deletion("t");
    request_deletion("nosuch");
    CHECK(gr_td_process_topic_deletion(off) == 0);
    CHECK(!znode("/admin/delete_topics/t") && !znode("/admin/delete_topics/nosuch"));
    CHECK(!gr_ctrl_topic_queued_for_deletion(&ctx, "t") && gr_ctrl_ctx_topic(&ctx, "t") && znode("/brokers/topics/t"));
    CHECK(count_sent(GR_API_STOP_REPLICA, -1) == 0);
    request_deletion("t");
    CHECK(gr_td_init(off) == 0 && !znode("/admin/delete_topics/t")); /* failover: removed too */
    gr_td_free(off);

    /* enabled: an unknown topic's znode is removed; failover with an offline replica */
    struct gr_topic_deletion *td = gr_td_new(&sm, NULL, true);
    sm.hooks = gr_td_flow_hooks(td);
    request_deletion("nosuch");
    CHECK(gr_td_process_topic_deletion(td) == 0 && !znode("/admin/delete_topics/nosuch"));
    request_deletion("t");
    gr_ctrl_ctx_remove_live_broker(&ctx, 2);
    CHECK(gr_td_init(td) == 0);
    CHECK(gr_ctrl_topic_queued_for_deletion(&ctx, "t") && gr_td_topic_ineligible(td, "t"));
    CHECK(gr_td_try(td) == 0);
    CHECK(!gr_td_deletion_started(td, "t")); /* ineligible: nothing started */
    /* the controller moves before completion: guarded deletes fail, nothing is removed */
    add_live(2, 222);
    int32_t back[] = {2};
    CHECK(gr_ctrl_on_broker_startup(&sm, back, 1) == 0);
    CHECK(gr_td_deletion_started(td, "t"));
    CHECK(answer_stop(td, 1, NULL, GR_KERR_NONE) == 1 && answer_stop(td, 2, NULL, GR_KERR_NONE) == 1);
    CHECK(fz_set_raw(zk, "/controller_epoch", "3", 1, -1, NULL) == 0); /* another controller */
    int answered = 0;
    for (int i = 0; i < n_sent; i++) {
        if (sent[i].api_key != GR_API_STOP_REPLICA || sent[i].broker != 3 || !sent[i].ev) continue;
        struct gr_ctrl_event *ev = sent[i].ev;
        struct gr_ctrl_response *r = gr_ctrl_response_new();
        const struct StopReplicaRequest *rq = sent[i].req;
        r->api_key = GR_API_STOP_REPLICA;
        r->request = sent[i].req;
        r->request_free = sent[i].req_free;
        sent[i].req = NULL;
        sent[i].req_free = noop_free;
        sent[i].ev = NULL;
        struct StopReplicaResponse *b = gr_arena_alloc(&r->arena, sizeof *b);
        b->PartitionErrors = gr_arena_alloc(&r->arena, 2 * sizeof *b->PartitionErrors);
        for (int j = 0; j < rq->TopicStates[0].PartitionStatesCount && j < 2; j++) {
            b->PartitionErrors[j].TopicName = rq->TopicStates[0].TopicName;
            b->PartitionErrors[j].PartitionIndex = rq->TopicStates[0].PartitionStates[j].PartitionIndex;
        }
        b->PartitionErrorsCount = rq->TopicStates[0].PartitionStatesCount;
        r->body = b;
        ev->payload = r;
        ev->payload_free = gr_ctrl_response_free;
        CHECK(gr_td_process_stop_replica_response(td, ev) == GR_ECONTROLLER_MOVED);
        gr_ctrl_event_free(ev);
        answered++;
    }
    CHECK(answered == 1);
    CHECK(znode("/brokers/topics/t") && znode("/admin/delete_topics/t") && znode("/config/topics/t"));
    gr_td_free(td);
    teardown();
}

static void test_offline_partition_count(void) {
    setup();
    struct gr_topic_deletion *td = gr_td_new(&sm, NULL, true);
    sm.hooks = gr_td_flow_hooks(td);
    int32_t one[] = {3};
    create_topic("o", 1, one, 1);
    struct gr_kzk_tp tp = {(char *)"o", 0};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, &tp, 1) == 0);
    CHECK(gr_td_offline_partition_count(td) == 0);
    gr_ctrl_ctx_remove_live_broker(&ctx, 3);
    int32_t dead[] = {3};
    CHECK(gr_ctrl_on_broker_failure(&sm, dead, 1) == 0);
    CHECK(gr_td_offline_partition_count(td) == 1);
    /* once its deletion starts the partition no longer counts */
    request_deletion("o");
    CHECK(gr_td_process_topic_deletion(td) == 0);
    CHECK(gr_td_deletion_started(td, "o") && gr_td_offline_partition_count(td) == 0);
    gr_td_free(td);
    teardown();
}

static int cs_calls;
static int16_t cs_err;
static int cs_n;
static void cs_respond(void *arg, int16_t error, const struct gr_kzk_tp *rem, int n) {
    (void)arg, (void)rem;
    cs_calls++;
    cs_err = error;
    cs_n = n;
}

static void test_controlled_shutdown(void) {
    setup();
    /* a: [2,1,3] led by 2; b: [1,2,3] followed by 2; s: [2] (RF 1) led by 2 */
    int32_t a[] = {2, 1, 3}, b[] = {1, 2, 3}, s1[] = {2};
    create_topic("a", 1, a, 3);
    create_topic("b", 1, b, 3);
    create_topic("s", 1, s1, 1);
    struct gr_kzk_tp tps[] = {{(char *)"a", 0}, {(char *)"b", 0}, {(char *)"s", 0}};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, tps, 3) == 0);
    clear_sent();
    struct gr_ctrl_tp_list rem;
    int rc;
    CHECK(gr_ctrl_do_controlled_shutdown(&sm, 2, 101, &rem, &rc) == GR_KERR_STALE_BROKER_EPOCH && rc == 0);
    CHECK(gr_ctrl_do_controlled_shutdown(&sm, 9, -1, &rem, &rc) == GR_KERR_BROKER_NOT_AVAILABLE);
    CHECK(!gr_ctrl_broker_shutting_down(&ctx, 2));
    CHECK(gr_ctrl_do_controlled_shutdown(&sm, 2, 102, &rem, &rc) == GR_KERR_NONE && rc == 0);
    CHECK(gr_ctrl_broker_shutting_down(&ctx, 2));
    struct gr_ctrl_partition *pa = gr_ctrl_ctx_partition(&ctx, "a", 0), *pb = gr_ctrl_ctx_partition(&ctx, "b", 0);
    int32_t w13[] = {1, 3};
    CHECK(pa->lai.leader == 1 && isr_is(&pa->lai, w13, 2) && pa->lai.leader_epoch == 1);
    CHECK(sent_lai(2, "a", 0) && sent_lai(2, "a", 0)->Leader == 1); /* shutting-down replicas are told too */
    CHECK(sent_stop(2, "b", 0, false, 0) && isr_is(&pb->lai, w13, 2) && pb->lai.leader == 1);
    CHECK(gr_ctrl_replica_state_get(pb, 2) == GR_RS_OFFLINE);
    CHECK(rem.n == 1 && strcmp(rem.v[0].topic, "s") == 0);
    gr_ctrl_tp_list_free(&rem);
    /* the event path: answered once; preempted/dropped events answer NOT_CONTROLLER */
    struct gr_ctrl_cs_payload *pl = gr_calloc(1, sizeof *pl);
    pl->respond = cs_respond;
    struct gr_ctrl_event *ev = gr_ctrl_cs_event_new(2, -1, pl);
    CHECK(gr_ctrl_cs_complete(&sm, ev) == 0);
    CHECK(cs_calls == 1 && cs_err == GR_KERR_NONE && cs_n == 1);
    gr_ctrl_event_free(ev);
    CHECK(cs_calls == 1);
    pl = gr_calloc(1, sizeof *pl);
    pl->respond = cs_respond;
    ev = gr_ctrl_cs_event_new(2, -1, pl);
    ev->preempt(ev);
    CHECK(cs_calls == 2 && cs_err == GR_KERR_NOT_CONTROLLER);
    gr_ctrl_event_free(ev);
    pl = gr_calloc(1, sizeof *pl);
    pl->respond = cs_respond;
    gr_ctrl_event_free(gr_ctrl_cs_event_new(2, -1, pl));
    CHECK(cs_calls == 3 && cs_err == GR_KERR_NOT_CONTROLLER);
    teardown();
}

int main(void) {
    test_full_deletion();
    test_dead_replica_then_startup();
    test_errors_and_offline_during_deletion();
    test_disabled_unknown_and_failover();
    test_offline_partition_count();
    test_controlled_shutdown();
    if (failures) {
        fprintf(stderr, "test_topic_deletion: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_topic_deletion: ok\n");
    return 0;
}
