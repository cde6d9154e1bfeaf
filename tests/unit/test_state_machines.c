/* Partition and replica state machines, elections through ZooKeeper, the controller flows and
 * AlterIsr, run over a tiny in-memory ZooKeeper backend (backend.h) and a recording sender.
 *
 * Covered: transition validity tables; New -> Online (state znodes, LeaderAndIsr IsNew);
 * broker failure (offline election, removal from the ISR, an ISR of one never empties); broker
 * start-up and bounce (channel add/remove, UpdateMetadata, replicas online); unclean election
 * from the topic config and the meter; BADVERSION retry; a state written by a newer controller;
 * the controller moving (GR_ECONTROLLER_MOVED, nothing sent); invalid transitions refused;
 * AlterIsr validation codes and the write; ISR change notifications. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/metrics.h"
#include "common/util.h"
#include "controller/context.h"
#include "controller/event_manager.h"
#include "controller/flows.h"
#include "controller/partition_sm.h"
#include "controller/replica_sm.h"
#include "controller/request_batch.h"
#include "controller/sender.h"
#include "controller/states.h"
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

static void test_transition_tables(void) {
    /* partition: rows = target, bit i = previous state i allowed */
    static const unsigned want_p[GR_PS_COUNT] = {
        [GR_PS_NONEXISTENT] = 1u << GR_PS_OFFLINE,
        [GR_PS_NEW] = 1u << GR_PS_NONEXISTENT,
        [GR_PS_ONLINE] = (1u << GR_PS_NEW) | (1u << GR_PS_ONLINE) | (1u << GR_PS_OFFLINE),
        [GR_PS_OFFLINE] = (1u << GR_PS_NEW) | (1u << GR_PS_ONLINE) | (1u << GR_PS_OFFLINE),
    };
    for (int to = 0; to < GR_PS_COUNT; to++)
        for (int from = 0; from < GR_PS_COUNT; from++)
            CHECK(gr_partition_transition_valid(from, to) == ((want_p[to] >> from) & 1u));
    unsigned oo = (1u << GR_RS_NEW) | (1u << GR_RS_ONLINE) | (1u << GR_RS_OFFLINE) | (1u << GR_RS_DELETION_INELIGIBLE);
    static unsigned want_r[GR_RS_COUNT];
    want_r[GR_RS_NONEXISTENT] = 1u << GR_RS_DELETION_SUCCESSFUL;
    want_r[GR_RS_NEW] = 1u << GR_RS_NONEXISTENT;
    want_r[GR_RS_ONLINE] = oo;
    want_r[GR_RS_OFFLINE] = oo;
    want_r[GR_RS_DELETION_STARTED] = 1u << GR_RS_OFFLINE;
    want_r[GR_RS_DELETION_SUCCESSFUL] = 1u << GR_RS_DELETION_STARTED;
    want_r[GR_RS_DELETION_INELIGIBLE] = (1u << GR_RS_OFFLINE) | (1u << GR_RS_DELETION_STARTED);
    for (int to = 0; to < GR_RS_COUNT; to++)
        for (int from = 0; from < GR_RS_COUNT; from++)
            CHECK(gr_replica_transition_valid(from, to) == ((want_r[to] >> from) & 1u));
    CHECK(!gr_partition_transition_valid(-1, GR_PS_NEW) && !gr_replica_transition_valid(0, 99));
    CHECK(strcmp(gr_partition_state_name(GR_PS_ONLINE), "OnlinePartition") == 0);
    CHECK(strcmp(gr_replica_state_name(GR_RS_DELETION_INELIGIBLE), "ReplicaDeletionIneligible") == 0);
}

static void test_new_partitions_and_broker_failure(void) {
    setup();
    int32_t reps[] = {1, 2, 3, 2, 3, 1};
    create_topic("t", 2, reps, 3);
    struct gr_kzk_tp tps[] = {{(char *)"t", 0}, {(char *)"t", 1}};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, tps, 2) == 0);
    struct gr_ctrl_partition *p0 = gr_ctrl_ctx_partition(&ctx, "t", 0), *p1 = gr_ctrl_ctx_partition(&ctx, "t", 1);
    CHECK(p0->state == GR_PS_ONLINE && p1->state == GR_PS_ONLINE);
    CHECK(p0->lai.leader == 1 && p0->lai.leader_epoch == 0 && p0->lai.controller_epoch == 2 && p0->lai.n_isr == 3);
    CHECK(p1->lai.leader == 2);
    for (int r = 1; r <= 3; r++) CHECK(gr_ctrl_replica_state_get(p0, r) == GR_RS_ONLINE);
    struct gr_kzk_leader_and_isr l;
    CHECK(read_state("t", 0, &l) == 0 && l.leader == 1 && l.leader_epoch == 0 && l.controller_epoch == 2 && l.zk_version == 0);
    gr_kzk_leader_and_isr_release(&l);
    const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *s = sent_lai(3, "t", 0);
    CHECK(s && s->IsNew && s->Leader == 1);
    CHECK(count_sent(GR_API_UPDATE_METADATA, 3) >= 1);
    clear_sent();

    /* broker 1 dies: t-0 elects 2 (ISR minus 1), t-1 drops 1 from its ISR */
    gr_ctrl_ctx_remove_live_broker(&ctx, 1);
    int32_t dead[] = {1};
    CHECK(gr_ctrl_on_broker_failure(&sm, dead, 1) == 0);
    int32_t w23[] = {2, 3};
    CHECK(p0->state == GR_PS_ONLINE && p0->lai.leader == 2 && p0->lai.leader_epoch == 1 && isr_is(&p0->lai, w23, 2));
    CHECK(p1->lai.leader == 2 && p1->lai.leader_epoch == 1 && isr_is(&p1->lai, w23, 2));
    CHECK(gr_ctrl_replica_state_get(p0, 1) == GR_RS_OFFLINE && gr_ctrl_replica_state_get(p1, 1) == GR_RS_OFFLINE);
    CHECK(read_state("t", 0, &l) == 0 && l.leader == 2 && l.leader_epoch == 1 && isr_is(&l, w23, 2) &&
          l.zk_version == p0->lai.zk_version);
    gr_kzk_leader_and_isr_release(&l);
    CHECK(count_sent(GR_API_LEADER_AND_ISR, 1) == 0 && count_sent(GR_API_STOP_REPLICA, 1) == 0);
    s = sent_lai(3, "t", 0);
    CHECK(s && s->Leader == 2 && !s->IsNew);
    clear_sent();

    /* broker 1 comes back (new registration), then bounces (higher epoch) */
    struct gr_kzk_broker cur[3] = {mkbroker(1, 201), mkbroker(2, 102), mkbroker(3, 103)};
    CHECK(gr_ctrl_process_broker_change(&sm, cur, 3) == 0);
    CHECK(strcmp(chan_log, "+1") == 0);
    CHECK(gr_ctrl_ctx_broker(&ctx, 1) && gr_ctrl_ctx_broker(&ctx, 1)->epoch == 201);
    CHECK(gr_ctrl_replica_state_get(p0, 1) == GR_RS_ONLINE);
    CHECK(sent_lai(1, "t", 0) && sent_lai(1, "t", 1));
    CHECK(count_sent(GR_API_UPDATE_METADATA, 1) >= 1 && count_sent(GR_API_UPDATE_METADATA, 2) >= 1);
    clear_sent();
    cur[0].epoch = 301;
    CHECK(gr_ctrl_process_broker_change(&sm, cur, 3) == 0);
    CHECK(strcmp(chan_log, "-1+1") == 0);
    CHECK(gr_ctrl_ctx_broker(&ctx, 1)->epoch == 301 && gr_ctrl_replica_state_get(p0, 1) == GR_RS_ONLINE);
    clear_sent();
    /* broker 3 deregisters */
    CHECK(gr_ctrl_process_broker_change(&sm, cur, 2) == 0);
    CHECK(strcmp(chan_log, "-3") == 0 && !gr_ctrl_ctx_broker(&ctx, 3));
    CHECK(gr_ctrl_replica_state_get(p0, 3) == GR_RS_OFFLINE);
    teardown();
}

static void test_isr_never_empty_and_unclean(void) {
    setup();
    /* topic "solo" on broker 3 only; topic "u" on [1,2] created while 2 is down */
    int32_t solo[] = {3};
    create_topic("solo", 1, solo, 1);
    gr_ctrl_ctx_remove_live_broker(&ctx, 2);
    int32_t u[] = {1, 2}, cl[] = {1, 2};
    create_topic("u", 1, u, 2);
    create_topic("clean", 1, cl, 2);
    struct gr_kzk_config cfg = {0};
    gr_kzk_config_set(&cfg, "unclean.leader.election.enable", "true");
    CHECK(gr_kzk_set_entity_config(kzk, "topics", "u", &cfg) == 0);
    gr_kzk_config_release(&cfg);
    struct gr_kzk_tp tps[] = {{(char *)"solo", 0}, {(char *)"u", 0}, {(char *)"clean", 0}};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, tps, 3) == 0);
    struct gr_ctrl_partition *ps = gr_ctrl_ctx_partition(&ctx, "solo", 0), *pu = gr_ctrl_ctx_partition(&ctx, "u", 0),
                             *pc = gr_ctrl_ctx_partition(&ctx, "clean", 0);
    int32_t w1[] = {1}, w2[] = {2}, w3[] = {3};
    CHECK(pu->lai.leader == 1 && isr_is(&pu->lai, w1, 1));
    /* 2 comes back: its replicas go online, the ISR stays [1] */
    add_live(2, 202);
    int32_t back[] = {2};
    CHECK(gr_ctrl_on_broker_startup(&sm, back, 1) == 0);
    CHECK(isr_is(&pu->lai, w1, 1) && gr_ctrl_replica_state_get(pu, 2) == GR_RS_ONLINE);
    clear_sent();

    /* 3 dies: solo has no replica left; its ISR keeps [3], leader -1 */
    gr_ctrl_ctx_remove_live_broker(&ctx, 3);
    int32_t d3[] = {3};
    CHECK(gr_ctrl_on_broker_failure(&sm, d3, 1) == 0);
    CHECK(ps->state == GR_PS_OFFLINE && ps->lai.leader == -1 && isr_is(&ps->lai, w3, 1));
    struct gr_kzk_leader_and_isr l;
    CHECK(read_state("solo", 0, &l) == 0 && l.leader == -1 && isr_is(&l, w3, 1) && l.leader_epoch == 1);
    gr_kzk_leader_and_isr_release(&l);
    CHECK(gr_ctrl_ctx_offline_partition_count(&ctx) == 1);
    clear_sent();

    /* 1 dies: "u" allows unclean election -> 2 with ISR [2]; "clean" stays offline */
    gr_ctrl_ctx_remove_live_broker(&ctx, 1);
    int32_t d1[] = {1};
    CHECK(gr_ctrl_on_broker_failure(&sm, d1, 1) == 0);
    CHECK(pu->state == GR_PS_ONLINE && pu->lai.leader == 2 && isr_is(&pu->lai, w2, 1));
    CHECK(pc->state == GR_PS_OFFLINE && pc->lai.leader == -1 && isr_is(&pc->lai, w1, 1));
    CHECK(sm.unclean_elections && gr_meter_count(sm.unclean_elections) == 1);
    /* an explicit unclean election (admin) elects 2 for "clean" as well */
    struct gr_psm_strategy unclean = {.kind = GR_ELECT_OFFLINE, .allow_unclean = true};
    int rcs[1];
    struct gr_kzk_tp tc = {(char *)"clean", 0};
    CHECK(gr_psm_handle_state_changes(&sm, &tc, 1, GR_PS_ONLINE, &unclean, rcs) == 0 && rcs[0] == 0);
    CHECK(pc->lai.leader == 2 && gr_meter_count(sm.unclean_elections) == 2);
    teardown();
}

static void test_retry_fencing_invalid(void) {
    setup();
    int32_t reps[] = {1, 2, 3};
    create_topic("r", 1, reps, 3);
    struct gr_kzk_tp tp = {(char *)"r", 0};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, &tp, 1) == 0);
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(&ctx, "r", 0);
    clear_sent();

    /* a concurrent writer bumps the version right before our write: BADVERSION, reread, retry */
    zk->bump_before_multi = gr_strdup("/brokers/topics/r/partitions/0/state");
    struct gr_psm_strategy cs = {.kind = GR_ELECT_CONTROLLED_SHUTDOWN};
    ctx.shutting_down = gr_malloc(sizeof(int32_t));
    ctx.shutting_down[0] = 1;
    ctx.n_shutting_down = 1;
    int rcs[1] = {-7};
    CHECK(gr_psm_handle_state_changes(&sm, &tp, 1, GR_PS_ONLINE, &cs, rcs) == 0 && rcs[0] == 0);
    int32_t w23[] = {2, 3};
    CHECK(p->lai.leader == 2 && p->lai.leader_epoch == 1 && isr_is(&p->lai, w23, 2) && p->lai.zk_version == 2);
    CHECK(sent_lai(1, "r", 0) != NULL); /* shutting-down replicas still get LeaderAndIsr */
    clear_sent();
    ctx.n_shutting_down = 0;

    /* preferred election back to 1 is impossible (1 not in ISR): failure, nothing changes */
    struct gr_psm_strategy pref = {.kind = GR_ELECT_PREFERRED};
    CHECK(gr_psm_handle_state_changes(&sm, &tp, 1, GR_PS_ONLINE, &pref, rcs) == 0 && rcs[0] == GR_PSM_EFAILED);
    CHECK(p->lai.leader == 2 && p->lai.leader_epoch == 1 && n_sent == 0);

    /* invalid transitions are refused */
    CHECK(gr_psm_handle_state_changes(&sm, &tp, 1, GR_PS_NEW, NULL, rcs) == 0 && rcs[0] == GR_PSM_EFAILED);
    CHECK(p->state == GR_PS_ONLINE);
    struct gr_ctrl_replica rep = {"r", 0, 3};
    CHECK(gr_rsm_handle_state_changes(&sm, &rep, 1, GR_RS_DELETION_SUCCESSFUL) == 0);
    CHECK(gr_ctrl_replica_state_get(p, 3) == GR_RS_ONLINE);
    CHECK(gr_psm_handle_state_changes(&sm, &tp, 1, GR_PS_NONEXISTENT, NULL, rcs) == 0 && rcs[0] == GR_PSM_EFAILED);

    /* a state written by a newer controller aborts the election */
    struct gr_kzk_leader_and_isr l;
    CHECK(read_state("r", 0, &l) == 0);
    l.controller_epoch = 9;
    CHECK(gr_kzk_update_partition_state_conditional(kzk, "r", 0, &l, &l.zk_version) == 0);
    gr_kzk_leader_and_isr_release(&l);
    struct gr_psm_strategy off = {.kind = GR_ELECT_OFFLINE};
    CHECK(gr_psm_handle_state_changes(&sm, &tp, 1, GR_PS_ONLINE, &off, rcs) == 0 && rcs[0] == GR_PSM_EFAILED);
    CHECK(p->lai.leader_epoch == 1);

    /* the controller moved: /controller_epoch changed -> GR_ECONTROLLER_MOVED, nothing sent */
    CHECK(read_state("r", 0, &l) == 0);
    l.controller_epoch = 2;
    CHECK(gr_kzk_update_partition_state_conditional(kzk, "r", 0, &l, &l.zk_version) == 0);
    gr_kzk_leader_and_isr_release(&l);
    CHECK(fz_set_raw(zk, "/controller_epoch", "3", 1, -1, NULL) == 0);
    clear_sent();
    gr_ctrl_ctx_remove_live_broker(&ctx, 2);
    int32_t d2[] = {2};
    CHECK(gr_ctrl_on_broker_failure(&sm, d2, 1) == GR_ECONTROLLER_MOVED);
    CHECK(n_sent == 0 && gr_ctrl_batch_empty(sm.batch));
    teardown();
}

static struct AlterIsrResponse last_resp;
static int n_resp;
static int32_t last_isr_version;
static void capture(void *arg, const struct AlterIsrResponse *r) {
    (void)arg;
    last_resp = *r;
    last_isr_version = r->TopicsCount > 0 && r->Topics[0].PartitionsCount > 0 ? r->Topics[0].Partitions[0].CurrentIsrVersion : -99;
    n_resp++;
}

static void test_alter_isr(void) {
    setup();
    int32_t reps[] = {1, 2, 3};
    create_topic("a", 1, reps, 3);
    struct gr_kzk_tp tp = {(char *)"a", 0};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, &tp, 1) == 0);
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(&ctx, "a", 0);
    clear_sent();

    /* validation codes */
    CHECK(gr_alter_isr_check_broker(&ctx, 9, 1) == GR_KERR_STALE_BROKER_EPOCH);
    CHECK(gr_alter_isr_check_broker(&ctx, 1, 100) == GR_KERR_STALE_BROKER_EPOCH);
    CHECK(gr_alter_isr_check_broker(&ctx, 1, 101) == GR_KERR_NONE);
    bool already;
    int32_t isr12[] = {1, 2}, isr123[] = {1, 2, 3};
    CHECK(gr_alter_isr_check_partition(NULL, 1, 0, isr12, 2, 0, &already) == GR_KERR_UNKNOWN_TOPIC_OR_PARTITION);
    CHECK(gr_alter_isr_check_partition(p, 1, -1, isr12, 2, 0, &already) == GR_KERR_FENCED_LEADER_EPOCH);
    CHECK(gr_alter_isr_check_partition(p, 1, 0, isr12, 2, 5, &already) == GR_KERR_INVALID_UPDATE_VERSION);
    CHECK(gr_alter_isr_check_partition(p, 1, 0, isr123, 3, 5, &already) == GR_KERR_NONE && already);
    CHECK(gr_alter_isr_check_partition(p, 1, 0, isr12, 2, 0, &already) == GR_KERR_NONE && !already);

    /* a real shrink through the event path */
    struct AlterIsrRequest_PartitionData pd = {.PartitionIndex = 0, .LeaderEpoch = 0, .NewIsrCount = 2,
                                               .NewIsr = isr12, .CurrentIsrVersion = 0};
    struct AlterIsrRequest_TopicData td = {.Name = (char *)"a", .PartitionsCount = 1, .Partitions = &pd};
    struct AlterIsrRequest req = {.BrokerId = 1, .BrokerEpoch = 101, .TopicsCount = 1, .Topics = &td};
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_ALTER_ISR_RECEIVED);
    ev->broker_id = 1;
    ev->broker_epoch = 101;
    struct gr_ctrl_alter_isr_payload *pl = gr_calloc(1, sizeof *pl);
    pl->request = &req;
    pl->respond = capture;
    ev->payload = pl;
    ev->payload_free = gr_ctrl_alter_isr_payload_free;
    CHECK(gr_ctrl_alter_isr_complete(&sm, ev) == 0);
    CHECK(n_resp == 1 && last_resp.ErrorCode == 0 && last_isr_version == 1);
    gr_ctrl_event_free(ev);
    CHECK(n_resp == 1); /* freeing an answered payload does not answer again */
    CHECK(isr_is(&p->lai, isr12, 2) && p->lai.leader_epoch == 0 && p->lai.zk_version == 1);
    struct gr_kzk_leader_and_isr l;
    CHECK(read_state("a", 0, &l) == 0 && isr_is(&l, isr12, 2) && l.leader_epoch == 0 && l.zk_version == 1);
    gr_kzk_leader_and_isr_release(&l);
    CHECK(count_sent(GR_API_UPDATE_METADATA, -1) == 3);
    clear_sent();

    /* stale version now, then a stale broker epoch, then an unanswered event answers NOT_CONTROLLER */
    struct gr_arena a;
    gr_arena_init(&a);
    struct AlterIsrResponse resp;
    memset(&resp, 0, sizeof resp);
    CHECK(gr_ctrl_process_alter_isr(&sm, 1, 101, &req, &a, &resp) == 0);
    CHECK(resp.ErrorCode == 0 && resp.Topics[0].Partitions[0].ErrorCode == GR_KERR_NONE); /* already applied */
    pd.NewIsr = isr123;
    pd.NewIsrCount = 3;
    CHECK(gr_ctrl_process_alter_isr(&sm, 1, 101, &req, &a, &resp) == 0);
    CHECK(resp.Topics[0].Partitions[0].ErrorCode == GR_KERR_INVALID_UPDATE_VERSION);
    CHECK(gr_ctrl_process_alter_isr(&sm, 1, 99, &req, &a, &resp) == 0 && resp.ErrorCode == GR_KERR_STALE_BROKER_EPOCH);
    pd.CurrentIsrVersion = 1;
    zk->bump_before_multi = gr_strdup("/brokers/topics/a/partitions/0/state");
    CHECK(gr_ctrl_process_alter_isr(&sm, 1, 101, &req, &a, &resp) == 0);
    CHECK(resp.Topics[0].Partitions[0].ErrorCode == GR_KERR_INVALID_UPDATE_VERSION); /* BADVERSION in ZooKeeper */
    gr_arena_free(&a);
    pl = gr_calloc(1, sizeof *pl);
    pl->respond = capture;
    gr_ctrl_alter_isr_payload_free(pl);
    CHECK(n_resp == 2 && last_resp.ErrorCode == GR_KERR_NOT_CONTROLLER);
    teardown();
}

static void test_isr_change_notification(void) {
    setup();
    int32_t reps[] = {1, 2, 3};
    create_topic("n", 1, reps, 3);
    struct gr_kzk_tp tp = {(char *)"n", 0};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, &tp, 1) == 0);
    clear_sent();
    /* the leader (pre-AlterIsr) shrinks the ISR itself and notifies */
    struct gr_kzk_leader_and_isr l;
    CHECK(read_state("n", 0, &l) == 0);
    l.n_isr = 1;
    int32_t nv;
    CHECK(gr_kzk_update_partition_state_conditional(kzk, "n", 0, &l, &nv) == 0);
    gr_kzk_leader_and_isr_release(&l);
    CHECK(gr_kzk_create_isr_change_notification(kzk, &tp, 1) == 0);
    CHECK(gr_ctrl_process_isr_change_notification(&sm) == 0);
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(&ctx, "n", 0);
    CHECK(p->lai.n_isr == 1 && p->lai.zk_version == nv);
    CHECK(count_sent(GR_API_UPDATE_METADATA, -1) == 3);
    struct gr_zstrings names = {0};
    CHECK(gr_kzk_get_isr_change_notifications(kzk, false, &names) == 0 && names.count == 0);
    gr_zstrings_free(&names);
    teardown();
}

static void test_failover_startup(void) {
    setup();
    int32_t reps[] = {1, 2, 3, 3, 1, 2};
    create_topic("f", 2, reps, 3);
    /* f-0 has a state with a dead leader (4 not registered, but 2 in ISR); f-1 has none */
    struct gr_kzk_leader_and_isr st = {.leader = 3, .leader_epoch = 5, .controller_epoch = 1, .n_isr = 2,
                                       .isr = (int32_t[]){3, 2}};
    struct gr_kzk_state_write w = {"f", 0, &st};
    struct gr_kzk_write_result wr;
    CHECK(gr_kzk_create_partition_states(kzk, ctx.epoch_zk_version, &w, 1, &wr) == 0 && wr.rc == 0);
    gr_ctrl_partition_set_state(gr_ctrl_ctx_partition(&ctx, "f", 0), &st);
    gr_ctrl_ctx_remove_live_broker(&ctx, 3);
    CHECK(gr_ctrl_failover_start_state_machines(&sm) == 0);
    struct gr_ctrl_partition *p0 = gr_ctrl_ctx_partition(&ctx, "f", 0), *p1 = gr_ctrl_ctx_partition(&ctx, "f", 1);
    int32_t w2[] = {2};
    CHECK(p0->state == GR_PS_ONLINE && p0->lai.leader == 2 && p0->lai.leader_epoch == 7 && isr_is(&p0->lai, w2, 1));
    CHECK(p1->state == GR_PS_ONLINE && p1->lai.leader == 1);
    CHECK(gr_ctrl_replica_state_get(p0, 3) == GR_RS_OFFLINE && gr_ctrl_replica_state_get(p0, 1) == GR_RS_ONLINE);
    /* the first request is the brokers-only UpdateMetadata */
    CHECK(n_sent > 0 && sent[0].api_key == GR_API_UPDATE_METADATA);
    teardown();
}

int main(void) {
    test_transition_tables();
    test_new_partitions_and_broker_failure();
    test_isr_never_empty_and_unclean();
    test_retry_fencing_invalid();
    test_alter_isr();
    test_isr_change_notification();
    test_failover_startup();
    if (failures) {
        fprintf(stderr, "test_state_machines: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_state_machines: ok\n");
    return 0;
}
