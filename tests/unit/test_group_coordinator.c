/* Group coordinator: Java hash placement, __consumer_offsets record formats, the membership state
 * machine (MEMBER_ID_REQUIRED, leader election and protocol selection, initial rebalance delay,
 * SyncGroup, heartbeats and session expiry, LeaveGroup, error codes), offsets, DeleteGroups, OffsetDelete, and
 * failover (a second coordinator loads the groups and offsets from the same log). Runs over an
 * in-memory storage with a virtual clock and no background thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "coordinator/group_coordinator.h"
#include "coordinator/group_offsets.h"
#include "coordinator/txn_offsets.h"
#include "common/kerr.h"
#include "common/util.h"
#include "storage/batch.h"
#include "support/check.h"

/* ---- virtual clock ---- */
static int64_t g_now = 1000000;
static int64_t vclock(void) { return g_now; }

/* ---- in-memory storage: NP partitions, a log each ---- */
#define NP 4
struct fake {
    bool leader[NP];
    int32_t epoch[NP];
    int32_t term[NP];  /* leader term: bumped where this broker lost and regained leadership */
    uint8_t *log[NP];
    size_t len[NP];
    int64_t end[NP];
    int16_t fail; /* next append's error */
    int appends;
    void (*on_read)(struct fake *f, int32_t p); /* once, after a read of p (then cleared) */
    struct gr_group_coordinator *gc;
    bool hold; /* appends go to the log, their completion waits for f_release (then cleared) */
    void (*held_done)(void *, int16_t, int64_t);
    void *held_ctx;
    int64_t held_base;
    int max_batches;   /* > 0: a read returns at most this many batches */
    int16_t read_fail; /* next read's error */
    int reads;         /* reads so far (any thread) */
};

/* Appends a batch to the log of p as the replica manager would (WriteTxnMarkers, another writer). */
static void f_put(struct fake *f, int32_t p, uint8_t *batch, size_t len) {
    gr_batch_set_base_offset(batch, f->end[p]);
    f->end[p] += gr_batch_record_count(batch);
    f->log[p] = gr_realloc(f->log[p], f->len[p] + len);
    memcpy(f->log[p] + f->len[p], batch, len);
    f->len[p] += len;
}

static bool f_leader_info(void *ctx, int32_t p, int32_t *epoch, int32_t *term, int64_t *start, int64_t *end) {
    struct fake *f = ctx;
    if (p < 0 || p >= NP || !f->leader[p]) return false;
    if (epoch) *epoch = f->epoch[p];
    if (term) *term = f->term[p];
    if (start) *start = 0;
    if (end) *end = f->end[p];
    return true;
}

static void f_append(void *ctx, int32_t p, uint8_t *batch, size_t len, int16_t acks, int32_t timeout_ms,
                     void (*done)(void *, int16_t, int64_t), void *done_ctx) {
    (void)acks;
    (void)timeout_ms;
    struct fake *f = ctx;
    f->appends++;
    if (f->fail) {
        int16_t e = f->fail;
        f->fail = 0;
        done(done_ctx, e, -1);
        return;
    }
    int64_t base = f->end[p];
    f_put(f, p, batch, len);
    if (f->hold) { /* one held completion at a time */
        f->hold = false;
        f->held_done = done;
        f->held_ctx = done_ctx;
        f->held_base = base;
        return;
    }
    done(done_ctx, GR_KERR_NONE, base);
}

/* Runs the held append completion (f->hold). */
static void f_release(struct fake *f) {
    void (*done)(void *, int16_t, int64_t) = f->held_done;
    f->held_done = NULL;
    if (done) done(f->held_ctx, GR_KERR_NONE, f->held_base);
}

static int16_t f_read(void *ctx, int32_t p, int64_t offset, int32_t max_bytes, struct gr_plog_read_result *res) {
    (void)max_bytes;
    struct fake *f = ctx;
    memset(res, 0, sizeof *res);
    res->next_offset = offset;
    __atomic_add_fetch(&f->reads, 1, __ATOMIC_SEQ_CST);
    if (f->read_fail) {
        int16_t e = f->read_fail;
        f->read_fail = 0;
        return e;
    }
    /* the batches from the first one at or after offset to the log end (or max_batches of them) */
    struct gr_batch_iter it;
    struct gr_batch_info info;
    const uint8_t *batch;
    gr_batch_iter_init(&it, f->log[p], f->len[p]);
    size_t from = 0, to = 0;
    int n = 0;
    while (gr_batch_iter_next(&it, &info, &batch) == 1) {
        if (info.BaseOffset < offset) continue;
        if (n == 0) {
            from = (size_t)(batch - f->log[p]);
            res->first_offset = info.BaseOffset;
        }
        to = (size_t)(batch - f->log[p]) + info.size;
        res->next_offset = info.BaseOffset + gr_batch_record_count(batch);
        if (++n == f->max_batches) break;
    }
    if (n > 0) {
        res->data = gr_malloc(to - from);
        memcpy(res->data, f->log[p] + from, to - from);
        res->len = to - from;
    }
    res->log_end_offset = f->end[p];
    void (*hook)(struct fake *, int32_t) = f->on_read;
    f->on_read = NULL;
    if (hook) hook(f, p);
    return GR_KERR_NONE;
}

static int32_t f_nparts(void *ctx) {
    (void)ctx;
    return NP;
}

static struct gr_group_coordinator *new_gc(struct fake *f, int32_t initial_delay) {
    struct gr_gc_config c;
    gr_gc_config_defaults(&c);
    c.broker_id = 1;
    c.initial_rebalance_delay_ms = initial_delay;
    c.storage = (struct gr_gc_storage){.ctx = f, .leader_info = f_leader_info, .append = f_append, .read = f_read,
                                       .num_partitions = f_nparts};
    c.mono_ms = vclock;
    c.wall_ms = vclock;
    c.background_thread = false;
    struct gr_group_coordinator *gc = gr_gc_new(&c);
    gr_gc_poll_partitions(gc);
    return gc;
}

/* ---- callback capture ---- */
struct join_out {
    int called;
    int16_t error;
    int32_t gen;
    char member_id[160], leader[160], proto[32];
    int n_members;
};
static void on_join(void *ctx, const struct gr_gc_join_result *r) {
    struct join_out *o = ctx;
    o->called++;
    o->error = r->error;
    o->gen = r->generation_id;
    snprintf(o->member_id, sizeof o->member_id, "%s", r->member_id ? r->member_id : "");
    snprintf(o->leader, sizeof o->leader, "%s", r->leader_id ? r->leader_id : "");
    snprintf(o->proto, sizeof o->proto, "%s", r->protocol_name ? r->protocol_name : "(null)");
    o->n_members = r->n_members;
}

struct sync_out {
    int called;
    int16_t error;
    char assignment[64];
};
static void on_sync(void *ctx, const struct gr_gc_sync_result *r) {
    struct sync_out *o = ctx;
    o->called++;
    o->error = r->error;
    snprintf(o->assignment, sizeof o->assignment, "%.*s", r->assignment ? (int)r->assignment_len : 0,
             r->assignment ? (const char *)r->assignment : "");
}

struct commit_out {
    int called;
    int16_t errors[8];
};
static void on_commit(void *ctx, struct gr_gc_commit_part *parts, int n) {
    struct commit_out *o = ctx;
    o->called++;
    for (int i = 0; i < n && i < 8; i++) o->errors[i] = parts[i].error;
}

static const struct gr_gc_protocol RANGE_RR[] = {{"range", (const uint8_t *)"R", 1}, {"roundrobin", (const uint8_t *)"O", 1}};
static const struct gr_gc_protocol RR_ONLY[] = {{"roundrobin", (const uint8_t *)"o", 1}};

static void join(struct gr_group_coordinator *gc, const char *group, const char *member, bool v4,
                 const struct gr_gc_protocol *protos, int n, struct join_out *out) {
    memset(out, 0, sizeof *out);
    struct gr_gc_join_req rq = {.group_id = group, .member_id = member, .client_id = "cli", .client_host = "/127.0.0.1",
                                .protocol_type = "consumer", .session_timeout_ms = 10000,
                                .rebalance_timeout_ms = 20000, .require_known_member_id = v4, .n_protocols = n,
                                .protocols = protos};
    gr_gc_join_group(gc, &rq, on_join, out);
}

static void sync_(struct gr_group_coordinator *gc, const char *group, const char *member, int32_t gen,
                  const struct gr_gc_assignment *as, int n, struct sync_out *out) {
    memset(out, 0, sizeof *out);
    struct gr_gc_sync_req rq = {.group_id = group, .member_id = member, .generation_id = gen, .n_assignments = n,
                                .assignments = as};
    gr_gc_sync_group(gc, &rq, on_sync, out);
}

/* A group id whose partition is p (of NP). */
static const char *group_in(int32_t p, char *buf, size_t len) {
    for (int i = 0;; i++) {
        snprintf(buf, len, "g%d", i);
        if (gr_group_partition_for(buf, NP) == p) return buf;
    }
}

/* ---- tests ---- */

static void test_hash(void) {
    CHECK(gr_java_string_hash("") == 0);
    CHECK(gr_java_string_hash("a") == 97);
    CHECK(gr_java_string_hash("abc") == 96354);
    CHECK(gr_java_string_hash("Hello World") == -862545276);
    CHECK(gr_java_string_hash("\xc3\xa9") == 233);                /* U+00E9 */
    CHECK(gr_java_string_hash("\xf0\x9f\x98\x80") == 1772899);   /* U+1F600: a surrogate pair */
    CHECK(gr_java_string_hash("\xff") == 0xFFFD);                 /* malformed -> U+FFFD */
    CHECK(gr_group_partition_for("Hello World", 50) == 22);
    CHECK(gr_group_partition_for("a", 50) == 47);
}

static void test_formats(void) {
    struct gr_wbuf w;
    struct gr_arena a;
    gr_wbuf_init(&w);
    gr_arena_init(&a);
    gr_go_encode_offset_key(&w, "grp", "topic", 7);
    struct gr_go_key k;
    CHECK(gr_go_decode_key(w.p, w.len, &a, &k) == 0);
    CHECK(k.kind == GR_GO_KEY_OFFSET && k.version == 1 && strcmp(k.group, "grp") == 0 &&
          strcmp(k.topic, "topic") == 0 && k.partition == 7);
    /* byte layout: version 1, "grp", "topic", 7 */
    static const uint8_t want[] = {0, 1, 0, 3, 'g', 'r', 'p', 0, 5, 't', 'o', 'p', 'i', 'c', 0, 0, 0, 7};
    CHECK(w.len == sizeof want && memcmp(w.p, want, sizeof want) == 0);
    CHECK(gr_go_decode_key(w.p, w.len - 1, &a, &k) == GR_ECORRUPT);

    gr_wbuf_reset(&w);
    gr_go_encode_group_key(&w, "grp");
    CHECK(gr_go_decode_key(w.p, w.len, &a, &k) == 0 && k.kind == GR_GO_KEY_GROUP && strcmp(k.group, "grp") == 0);

    gr_wbuf_reset(&w);
    struct gr_go_offset_value v = {.offset = 42, .leader_epoch = 3, .metadata = "md", .commit_timestamp = 99,
                                   .expire_timestamp = -1};
    gr_go_encode_offset_value(&w, &v);
    struct gr_go_offset_value d;
    CHECK(gr_go_decode_offset_value(w.p, w.len, &a, &d) == 0);
    CHECK(d.version == 3 && d.offset == 42 && d.leader_epoch == 3 && strcmp(d.metadata, "md") == 0 &&
          d.commit_timestamp == 99 && d.expire_timestamp == -1);
    CHECK(w.len == 2 + 8 + 4 + 4 + 8);
    gr_wbuf_reset(&w);
    v.expire_timestamp = 1234;
    gr_go_encode_offset_value(&w, &v);
    CHECK(gr_go_decode_offset_value(w.p, w.len, &a, &d) == 0);
    CHECK(d.version == 1 && d.leader_epoch == -1 && d.expire_timestamp == 1234);
    CHECK(gr_go_decode_offset_value(w.p, 5, &a, &d) == GR_ECORRUPT);

    gr_wbuf_reset(&w);
    struct gr_go_member m[2] = {
        {.member_id = "m1", .client_id = "c", .client_host = "/h", .rebalance_timeout = 5, .session_timeout = 6,
         .subscription = (const uint8_t *)"sub", .subscription_len = 3, .assignment = (const uint8_t *)"as",
         .assignment_len = 2},
        {.member_id = "m2", .group_instance_id = "inst", .client_id = "c", .client_host = "/h"},
    };
    struct gr_go_group_value gv = {.protocol_type = "consumer", .generation = 4, .protocol = "range", .leader = "m1",
                                   .current_state_timestamp = 77, .n_members = 2, .members = m};
    gr_go_encode_group_value(&w, &gv);
    struct gr_go_group_value gd;
    CHECK(gr_go_decode_group_value(w.p, w.len, &a, &gd) == 0);
    CHECK(gd.version == 3 && gd.generation == 4 && strcmp(gd.protocol, "range") == 0 && strcmp(gd.leader, "m1") == 0 &&
          gd.current_state_timestamp == 77 && gd.n_members == 2);
    CHECK(gd.members[0].subscription_len == 3 && memcmp(gd.members[0].subscription, "sub", 3) == 0);
    CHECK(gd.members[0].rebalance_timeout == 5 && gd.members[0].session_timeout == 6);
    CHECK(gd.members[1].group_instance_id && strcmp(gd.members[1].group_instance_id, "inst") == 0);
    CHECK(gd.members[1].assignment_len == 0);
    for (size_t cut = 0; cut < w.len; cut++) CHECK(gr_go_decode_group_value(w.p, cut, &a, &gd) == GR_ECORRUPT);
    /* absurd member count */
    uint8_t bad[] = {0, 3, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff};
    CHECK(gr_go_decode_group_value(bad, sizeof bad, &a, &gd) == GR_ECORRUPT);
    gr_wbuf_free(&w);
    gr_arena_free(&a);
}

static void test_coordinator_status(void) {
    struct fake f = {0};
    f.leader[0] = true;
    struct gr_group_coordinator *gc = new_gc(&f, 0);
    char g0[16], g1[16];
    group_in(0, g0, sizeof g0);
    group_in(1, g1, sizeof g1);
    CHECK_KERR(gr_gc_coordinator_status(gc, g0), GR_KERR_NONE);
    CHECK_KERR(gr_gc_coordinator_status(gc, g1), GR_KERR_NOT_COORDINATOR);
    /* led now but not loaded yet */
    f.leader[1] = true;
    CHECK_KERR(gr_gc_coordinator_status(gc, g1), GR_KERR_COORDINATOR_LOAD_IN_PROGRESS);
    CHECK_KERR(gr_gc_heartbeat(gc, g1, "x", NULL, 1), GR_KERR_NONE); /* Kafka answers blindly while loading */
    struct sync_out so;
    sync_(gc, g1, "x", 1, NULL, 0, &so);
    CHECK(so.called == 1);
    CHECK_KERR(so.error, GR_KERR_REBALANCE_IN_PROGRESS);
    gr_gc_poll_partitions(gc);
    CHECK_KERR(gr_gc_coordinator_status(gc, g1), GR_KERR_NONE);
    /* a new leader epoch of the same leadership (the controller shrank the ISR) keeps the groups */
    f.epoch[1] = 5;
    CHECK_KERR(gr_gc_coordinator_status(gc, g1), GR_KERR_NONE);
    gr_gc_poll_partitions(gc);
    CHECK_KERR(gr_gc_coordinator_status(gc, g1), GR_KERR_NONE);
    /* leadership lost and regained (a new leader term) means reload */
    f.epoch[1] = 7;
    f.term[1]++;
    CHECK_KERR(gr_gc_coordinator_status(gc, g1), GR_KERR_COORDINATOR_LOAD_IN_PROGRESS);
    gr_gc_poll_partitions(gc);
    CHECK_KERR(gr_gc_coordinator_status(gc, g1), GR_KERR_NONE);
    struct join_out jo;
    join(gc, "", "", true, RANGE_RR, 2, &jo);
    CHECK_KERR(jo.error, GR_KERR_INVALID_GROUP_ID);
    gr_gc_shutdown(gc);
    CHECK_KERR(gr_gc_coordinator_status(gc, g0), GR_KERR_COORDINATOR_NOT_AVAILABLE);
    gr_gc_free(gc);
}

static void test_join_sync_heartbeat(void) {
    struct fake f = {0};
    for (int i = 0; i < NP; i++) f.leader[i] = true;
    struct gr_group_coordinator *gc = new_gc(&f, 0);
    const char *G = "grp";
    struct join_out j1, j2;

    /* v4: MEMBER_ID_REQUIRED, then join with the id */
    join(gc, G, "", true, RANGE_RR, 2, &j1);
    CHECK(j1.called == 1);
    CHECK_KERR(j1.error, GR_KERR_MEMBER_ID_REQUIRED);
    CHECK(strncmp(j1.member_id, "cli-", 4) == 0 && strlen(j1.member_id) == 4 + 36);
    char m1[160];
    snprintf(m1, sizeof m1, "%s", j1.member_id);
    join(gc, G, m1, true, RANGE_RR, 2, &j1);
    CHECK(j1.called == 0); /* waits for the (0 ms) initial delay */
    gr_gc_tick(gc);
    CHECK(j1.called == 1);
    CHECK_KERR(j1.error, GR_KERR_NONE);
    CHECK(j1.gen == 1 && strcmp(j1.leader, m1) == 0 && j1.n_members == 1 && strcmp(j1.proto, "range") == 0);

    /* unknown member id and bad session timeout */
    struct join_out je;
    join(gc, G, "nobody", false, RANGE_RR, 2, &je);
    CHECK_KERR(je.error, GR_KERR_UNKNOWN_MEMBER_ID);
    struct gr_gc_join_req bad = {.group_id = G, .member_id = "", .protocol_type = "consumer",
                                 .session_timeout_ms = 10, .rebalance_timeout_ms = 10, .n_protocols = 2,
                                 .protocols = RANGE_RR};
    memset(&je, 0, sizeof je);
    gr_gc_join_group(gc, &bad, on_join, &je);
    CHECK_KERR(je.error, GR_KERR_INVALID_SESSION_TIMEOUT);

    /* sync -> Stable */
    struct sync_out s1;
    struct gr_gc_assignment as1[] = {{m1, (const uint8_t *)"all", 3}};
    sync_(gc, G, m1, 2, as1, 1, &s1);
    CHECK_KERR(s1.error, GR_KERR_ILLEGAL_GENERATION);
    sync_(gc, G, m1, 1, as1, 1, &s1);
    CHECK(s1.called == 1 && strcmp(s1.assignment, "all") == 0);
    CHECK_KERR(s1.error, GR_KERR_NONE);
    CHECK_KERR(gr_gc_heartbeat(gc, G, m1, NULL, 1), GR_KERR_NONE);
    CHECK_KERR(gr_gc_heartbeat(gc, G, m1, NULL, 0), GR_KERR_ILLEGAL_GENERATION);
    CHECK_KERR(gr_gc_heartbeat(gc, G, "zz", NULL, 1), GR_KERR_UNKNOWN_MEMBER_ID);
    CHECK_KERR(gr_gc_heartbeat(gc, "nogroup", "zz", NULL, 1), GR_KERR_UNKNOWN_MEMBER_ID);

    /* an inconsistent protocol is refused */
    struct gr_gc_protocol other[] = {{"sticky", NULL, 0}};
    join(gc, G, "", false, other, 1, &je);
    CHECK_KERR(je.error, GR_KERR_INCONSISTENT_GROUP_PROTOCOL);

    /* second member (v3: no MEMBER_ID_REQUIRED) supports only roundrobin -> rebalance */
    join(gc, G, "", false, RR_ONLY, 1, &j2);
    CHECK(j2.called == 0);
    CHECK_KERR(gr_gc_heartbeat(gc, G, m1, NULL, 1), GR_KERR_REBALANCE_IN_PROGRESS);
    struct gr_arena a;
    gr_arena_init(&a);
    struct gr_gc_group_summary sum;
    CHECK_KERR(gr_gc_describe_group(gc, G, &a, &sum), GR_KERR_NONE);
    CHECK(strcmp(sum.state, "PreparingRebalance") == 0 && sum.n_members == 2 && strcmp(sum.protocol, "") == 0);
    /* m1 rejoins: everyone joined -> CompletingRebalance, roundrobin is the only common protocol */
    join(gc, G, m1, true, RANGE_RR, 2, &j1);
    CHECK(j1.called == 1 && j2.called == 1);
    CHECK(j1.gen == 2 && j2.gen == 2);
    CHECK(strcmp(j1.proto, "roundrobin") == 0);
    CHECK(strcmp(j1.leader, m1) == 0 && strcmp(j2.leader, m1) == 0);
    CHECK(j1.n_members == 2 && j2.n_members == 0);
    char m2[160];
    snprintf(m2, sizeof m2, "%s", j2.member_id);

    /* follower syncs first (waits), then the leader's sync is stored and propagated */
    struct sync_out s2;
    sync_(gc, G, m2, 2, NULL, 0, &s2);
    CHECK(s2.called == 0);
    int before = f.appends;
    struct gr_gc_assignment as2[] = {{m1, (const uint8_t *)"p0", 2}, {m2, (const uint8_t *)"p1", 2}};
    sync_(gc, G, m1, 2, as2, 2, &s1);
    CHECK(f.appends == before + 1);
    CHECK(s1.called == 1 && s2.called == 1);
    CHECK(strcmp(s1.assignment, "p0") == 0 && strcmp(s2.assignment, "p1") == 0);
    CHECK_KERR(gr_gc_describe_group(gc, G, &a, &sum), GR_KERR_NONE);
    CHECK(strcmp(sum.state, "Stable") == 0 && strcmp(sum.protocol, "roundrobin") == 0 && sum.n_members == 2);
    CHECK(sum.members[1].assignment_len == 2 && strcmp(sum.members[0].client_host, "/127.0.0.1") == 0);

    /* a follower rejoining with the same metadata in Stable just gets the current generation */
    join(gc, G, m2, false, RR_ONLY, 1, &j2);
    CHECK(j2.called == 1 && j2.gen == 2 && j2.n_members == 0);

    /* session expiry: only m1 heartbeats; m2 is removed after 10 s -> rebalance */
    g_now += 6000;
    CHECK_KERR(gr_gc_heartbeat(gc, G, m1, NULL, 2), GR_KERR_NONE);
    g_now += 6000;
    gr_gc_tick(gc);
    CHECK_KERR(gr_gc_heartbeat(gc, G, m2, NULL, 2), GR_KERR_UNKNOWN_MEMBER_ID);
    CHECK_KERR(gr_gc_heartbeat(gc, G, m1, NULL, 2), GR_KERR_REBALANCE_IN_PROGRESS);
    join(gc, G, m1, true, RANGE_RR, 2, &j1);
    CHECK(j1.called == 1 && j1.gen == 3 && j1.n_members == 1 && strcmp(j1.proto, "range") == 0);
    sync_(gc, G, m1, 3, as1, 1, &s1);
    CHECK_KERR(s1.error, GR_KERR_NONE);

    /* commit with the member's generation, then fetch */
    struct gr_gc_commit_part parts[2] = {
        {.topic = "t", .partition = 0, .offset = 10, .leader_epoch = -1, .metadata = "x", .expire_timestamp = -1},
        {.topic = "t", .partition = 1, .offset = 11, .leader_epoch = 2, .expire_timestamp = -1,
         .error = GR_KERR_UNKNOWN_TOPIC_OR_PARTITION}};
    struct commit_out co = {0};
    gr_gc_commit_offsets(gc, G, m1, NULL, 2, parts, 2, on_commit, &co);
    CHECK(co.called == 1);
    CHECK_KERR(co.errors[0], GR_KERR_ILLEGAL_GENERATION);
    parts[0].error = GR_KERR_NONE;
    memset(&co, 0, sizeof co);
    gr_gc_commit_offsets(gc, G, m1, NULL, 3, parts, 2, on_commit, &co);
    CHECK(co.called == 1);
    CHECK_KERR(co.errors[0], GR_KERR_NONE);
    CHECK_KERR(co.errors[1], GR_KERR_UNKNOWN_TOPIC_OR_PARTITION);
    struct gr_gc_fetch_part fp[2] = {{.topic = "t", .partition = 0}, {.topic = "t", .partition = 1}};
    struct gr_gc_fetch_part *fpp = fp;
    int fn = 2;
    CHECK_KERR(gr_gc_fetch_offsets(gc, G, false, false, &fpp, &fn, &a), GR_KERR_NONE);
    CHECK(fp[0].offset == 10 && strcmp(fp[0].metadata, "x") == 0 && fp[1].offset == -1);

    /* a storage failure maps to Kafka's commit errors */
    f.fail = GR_KERR_NOT_LEADER_OR_FOLLOWER;
    parts[0].error = GR_KERR_NONE;
    parts[0].offset = 12;
    memset(&co, 0, sizeof co);
    gr_gc_commit_offsets(gc, G, m1, NULL, 3, parts, 1, on_commit, &co);
    CHECK_KERR(co.errors[0], GR_KERR_NOT_COORDINATOR);
    fn = 1;
    CHECK_KERR(gr_gc_fetch_offsets(gc, G, false, false, &fpp, &fn, &a), GR_KERR_NONE);
    CHECK(fp[0].offset == 10);

    /* leave -> Empty (stored), DeleteGroups */
    const char *ids[] = {G, "missing"};
    int16_t errs[2];
    gr_gc_delete_groups(gc, ids, 2, errs);
    CHECK_KERR(errs[0], GR_KERR_NON_EMPTY_GROUP);
    CHECK_KERR(errs[1], GR_KERR_GROUP_ID_NOT_FOUND);
    struct gr_gc_leave_member lm[2] = {{.member_id = m1}, {.member_id = "ghost"}};
    CHECK_KERR(gr_gc_leave_group(gc, G, lm, 2), GR_KERR_NONE);
    CHECK_KERR(lm[0].error, GR_KERR_NONE);
    CHECK_KERR(lm[1].error, GR_KERR_UNKNOWN_MEMBER_ID);
    CHECK_KERR(gr_gc_describe_group(gc, G, &a, &sum), GR_KERR_NONE);
    CHECK(strcmp(sum.state, "Empty") == 0 && sum.n_members == 0);
    struct gr_gc_listed_group *lg;
    int nl;
    CHECK_KERR(gr_gc_list_groups(gc, NULL, 0, &a, &lg, &nl), GR_KERR_NONE);
    CHECK(nl == 1 && strcmp(lg[0].group_id, G) == 0 && strcmp(lg[0].state, "Empty") == 0);
    const char *st[] = {"Stable"};
    CHECK_KERR(gr_gc_list_groups(gc, st, 1, &a, &lg, &nl), GR_KERR_NONE);
    CHECK(nl == 0);
    gr_gc_delete_groups(gc, ids, 1, errs);
    CHECK_KERR(errs[0], GR_KERR_NONE);
    CHECK_KERR(gr_gc_describe_group(gc, G, &a, &sum), GR_KERR_NONE);
    CHECK(strcmp(sum.state, "Dead") == 0);

    /* the tombstones win on reload: nothing of G comes back */
    struct gr_group_coordinator *gc2 = new_gc(&f, 0);
    CHECK_KERR(gr_gc_describe_group(gc2, G, &a, &sum), GR_KERR_NONE);
    CHECK(strcmp(sum.state, "Dead") == 0);
    fn = 1;
    CHECK_KERR(gr_gc_fetch_offsets(gc2, G, false, false, &fpp, &fn, &a), GR_KERR_NONE);
    CHECK(fp[0].offset == -1);
    gr_gc_free(gc2);
    gr_arena_free(&a);
    gr_gc_free(gc);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

static void test_initial_delay_and_rebalance_timeout(void) {
    struct fake f = {0};
    for (int i = 0; i < NP; i++) f.leader[i] = true;
    struct gr_group_coordinator *gc = new_gc(&f, 3000);
    const char *G = "delayed";
    struct join_out j1, j2;
    join(gc, G, "", false, RANGE_RR, 2, &j1);
    g_now += 1000;
    join(gc, G, "", false, RANGE_RR, 2, &j2); /* new member during the delay: extended */
    g_now += 2000;
    gr_gc_tick(gc);
    CHECK(j1.called == 0 && j2.called == 0);
    g_now += 2999;
    gr_gc_tick(gc);
    CHECK(j1.called == 0);
    g_now += 1;
    gr_gc_tick(gc);
    CHECK(j1.called == 1 && j2.called == 1 && j1.gen == 1);
    CHECK(strcmp(j1.leader, j1.member_id) == 0 && j1.n_members == 2);
    char m1[160], m2[160];
    snprintf(m1, sizeof m1, "%s", j1.member_id);
    snprintf(m2, sizeof m2, "%s", j2.member_id);
    struct sync_out s1, s2;
    sync_(gc, G, m2, 1, NULL, 0, &s2);
    sync_(gc, G, m1, 1, NULL, 0, &s1);
    CHECK(s1.called && s2.called && s1.error == 0 && s2.error == 0);

    /* m2 rejoins (new metadata); m1 keeps heartbeating but never rejoins: removed after the
     * rebalance timeout (20 s) */
    join(gc, G, m2, false, RR_ONLY, 1, &j2);
    CHECK(j2.called == 0);
    for (int i = 0; i < 19; i++) {
        g_now += 1000;
        CHECK_KERR(gr_gc_heartbeat(gc, G, m1, NULL, 1), GR_KERR_REBALANCE_IN_PROGRESS);
        gr_gc_tick(gc);
    }
    CHECK(j2.called == 0);
    g_now += 1000;
    gr_gc_tick(gc);
    CHECK(j2.called == 1 && j2.gen == 2 && strcmp(j2.leader, m2) == 0 && j2.n_members == 1);
    CHECK_KERR(gr_gc_heartbeat(gc, G, m1, NULL, 1), GR_KERR_UNKNOWN_MEMBER_ID);

    /* pending member (MEMBER_ID_REQUIRED) that never comes back blocks the join until its
     * session timeout */
    struct sync_out s;
    sync_(gc, G, m2, 2, NULL, 0, &s);
    struct join_out jp;
    join(gc, G, "", true, RANGE_RR, 2, &jp);
    CHECK_KERR(jp.error, GR_KERR_MEMBER_ID_REQUIRED);
    join(gc, G, m2, false, RANGE_RR, 2, &j2); /* changed metadata -> rebalance */
    CHECK(j2.called == 0);
    g_now += 10000;
    gr_gc_tick(gc);
    CHECK(j2.called == 1 && j2.gen == 3);
    gr_gc_free(gc);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

static void test_failover_loads_group(void) {
    struct fake f = {0};
    for (int i = 0; i < NP; i++) f.leader[i] = true;
    struct gr_group_coordinator *a = new_gc(&f, 0);
    const char *G = "moving";
    struct join_out j1;
    join(a, G, "", false, RANGE_RR, 2, &j1);
    gr_gc_tick(a);
    CHECK(j1.called == 1 && j1.gen == 1);
    char m1[160];
    snprintf(m1, sizeof m1, "%s", j1.member_id);
    struct sync_out s1;
    struct gr_gc_assignment as1[] = {{m1, (const uint8_t *)"mine", 4}};
    sync_(a, G, m1, 1, as1, 1, &s1);
    CHECK(s1.error == 0);
    struct gr_gc_commit_part part = {.topic = "t", .partition = 3, .offset = 77, .leader_epoch = 1,
                                     .metadata = "meta", .expire_timestamp = -1};
    struct commit_out co = {0};
    gr_gc_commit_offsets(a, G, m1, NULL, 1, &part, 1, on_commit, &co);
    CHECK(co.called == 1 && co.errors[0] == 0);
    /* a simple (generation -1) commit by a non-member group */
    struct gr_gc_commit_part p2 = {.topic = "u", .partition = 0, .offset = 5, .leader_epoch = -1,
                                   .expire_timestamp = 555};
    memset(&co, 0, sizeof co);
    gr_gc_commit_offsets(a, "simple", "", NULL, -1, &p2, 1, on_commit, &co);
    CHECK(co.called == 1 && co.errors[0] == 0);

    /* "a" loses leadership of G's partition; "b" (another broker) becomes leader at epoch 1 */
    int32_t p = gr_gc_partition_for(a, G);
    f.epoch[p] = 1;
    f.term[p]++;
    struct join_out jx;
    join(a, G, m1, false, RANGE_RR, 2, &jx);
    CHECK_KERR(jx.error, GR_KERR_COORDINATOR_LOAD_IN_PROGRESS);
    struct gr_group_coordinator *b = new_gc(&f, 0);
    f.leader[p] = true;
    CHECK_KERR(gr_gc_heartbeat(b, G, m1, NULL, 1), GR_KERR_NONE);
    struct sync_out sb;
    sync_(b, G, m1, 1, NULL, 0, &sb);
    CHECK(sb.called == 1 && sb.error == 0 && strcmp(sb.assignment, "mine") == 0);
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct gr_gc_fetch_part *all = NULL;
    int n = 0;
    CHECK_KERR(gr_gc_fetch_offsets(b, G, true, false, &all, &n, &ar), GR_KERR_NONE);
    CHECK(n == 1 && all[0].offset == 77 && all[0].leader_epoch == 1 && strcmp(all[0].metadata, "meta") == 0);
    CHECK_KERR(gr_gc_fetch_offsets(b, "simple", true, false, &all, &n, &ar), GR_KERR_NONE);
    CHECK(n == 1 && all[0].offset == 5);
    struct gr_gc_group_summary sum;
    CHECK_KERR(gr_gc_describe_group(b, G, &ar, &sum), GR_KERR_NONE);
    CHECK(strcmp(sum.state, "Stable") == 0 && sum.n_members == 1 && strcmp(sum.protocol, "range") == 0);

    /* when leadership goes away, the old coordinator unloads and answers waiting joins */
    struct join_out jw;
    join(b, G, "", false, RANGE_RR, 2, &jw); /* a new member: waits for m1 to rejoin */
    CHECK(jw.called == 0);
    f.leader[p] = false;
    gr_gc_poll_partitions(b);
    CHECK(jw.called == 1);
    CHECK_KERR(jw.error, GR_KERR_NOT_COORDINATOR);
    CHECK_KERR(gr_gc_heartbeat(b, G, m1, NULL, 1), GR_KERR_NOT_COORDINATOR);
    gr_arena_free(&ar);
    gr_gc_free(a);
    gr_gc_free(b);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

/* OffsetDelete (KIP-496): subscribed topics refused while the group has members, others removed
 * with tombstones (a coordinator loading the log does not see them again), unknown groups. */
static void test_offset_delete(void) {
    struct fake f = {0};
    for (int i = 0; i < NP; i++) f.leader[i] = true;
    struct gr_group_coordinator *a = new_gc(&f, 0);
    /* ConsumerProtocolSubscription v0: topics ["t"], null user data */
    static const uint8_t sub[] = {0, 0, 0, 0, 0, 1, 0, 1, 't', 0xff, 0xff, 0xff, 0xff};
    const struct gr_gc_protocol protos[] = {{"range", sub, sizeof sub}};
    const char *G = "od";
    struct join_out j;
    join(a, G, "", false, protos, 1, &j);
    gr_gc_tick(a);
    CHECK(j.called == 1 && j.gen == 1);
    char m[160];
    snprintf(m, sizeof m, "%s", j.member_id);
    struct sync_out s;
    struct gr_gc_assignment as[] = {{m, (const uint8_t *)"x", 1}};
    sync_(a, G, m, 1, as, 1, &s);
    CHECK(s.error == 0);
    struct gr_gc_commit_part parts[] = {{.topic = "t", .partition = 0, .offset = 10, .leader_epoch = -1,
                                         .expire_timestamp = -1},
                                        {.topic = "u", .partition = 0, .offset = 20, .leader_epoch = -1,
                                         .expire_timestamp = -1}};
    struct commit_out co = {0};
    gr_gc_commit_offsets(a, G, m, NULL, 1, parts, 2, on_commit, &co);
    CHECK(co.called == 1 && co.errors[0] == 0 && co.errors[1] == 0);

    struct gr_gc_offset_delete_part del[] = {{"t", 0, GR_KERR_NONE},
                                             {"u", 0, GR_KERR_NONE},
                                             {"u", 9, GR_KERR_NONE},
                                             {"gone", 0, GR_KERR_UNKNOWN_TOPIC_OR_PARTITION}};
    CHECK_KERR(gr_gc_delete_offsets(a, G, del, 4), GR_KERR_NONE);
    CHECK_KERR(del[0].error, GR_KERR_GROUP_SUBSCRIBED_TO_TOPIC);
    CHECK_KERR(del[1].error, GR_KERR_NONE);
    CHECK_KERR(del[2].error, GR_KERR_NONE); /* nothing committed: still NONE, as Kafka */
    CHECK_KERR(del[3].error, GR_KERR_UNKNOWN_TOPIC_OR_PARTITION); /* the caller's error is kept */
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct gr_gc_fetch_part *all = NULL;
    int n = 0;
    CHECK_KERR(gr_gc_fetch_offsets(a, G, true, false, &all, &n, &ar), GR_KERR_NONE);
    CHECK(n == 1 && strcmp(all[0].topic, "t") == 0 && all[0].offset == 10);

    struct gr_gc_offset_delete_part one[] = {{"t", 0, GR_KERR_NONE}};
    CHECK_KERR(gr_gc_delete_offsets(a, "no-such-group", one, 1), GR_KERR_GROUP_ID_NOT_FOUND);
    CHECK_KERR(gr_gc_delete_offsets(a, NULL, one, 1), GR_KERR_INVALID_GROUP_ID);

    /* the member leaves: the group is Empty and every partition can go */
    struct gr_gc_leave_member lm = {.member_id = m};
    CHECK_KERR(gr_gc_leave_group(a, G, &lm, 1), GR_KERR_NONE);
    CHECK_KERR(gr_gc_delete_offsets(a, G, one, 1), GR_KERR_NONE);
    CHECK_KERR(one[0].error, GR_KERR_NONE);
    CHECK_KERR(gr_gc_fetch_offsets(a, G, true, false, &all, &n, &ar), GR_KERR_NONE);
    CHECK(n == 0);

    /* another coordinator loading the log sees the tombstones */
    int32_t p = gr_gc_partition_for(a, G);
    f.epoch[p] = 1;
    f.term[p]++;
    struct gr_group_coordinator *b = new_gc(&f, 0);
    CHECK_KERR(gr_gc_fetch_offsets(b, G, true, false, &all, &n, &ar), GR_KERR_NONE);
    CHECK(n == 0);
    gr_arena_free(&ar);
    gr_gc_free(a);
    gr_gc_free(b);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

static void join_static(struct gr_group_coordinator *gc, const char *group, const char *member, const char *instance,
                        struct join_out *out) {
    memset(out, 0, sizeof *out);
    struct gr_gc_join_req rq = {.group_id = group, .member_id = member, .group_instance_id = instance,
                                .client_id = "cli", .client_host = "/127.0.0.1", .protocol_type = "consumer",
                                .session_timeout_ms = 10000, .rebalance_timeout_ms = 20000, .n_protocols = 2,
                                .protocols = RANGE_RR};
    gr_gc_join_group(gc, &rq, on_join, out);
}

/* KIP-345: a static member rejoining with an unknown member id takes over its member without a
 * rebalance; its old id is fenced everywhere; the instance id is persisted and loaded back;
 * LeaveGroup by instance id. */
static void test_static_membership(void) {
    struct fake f = {0};
    for (int i = 0; i < NP; i++) f.leader[i] = true;
    struct gr_group_coordinator *a = new_gc(&f, 0);
    const char *G = "static";
    struct join_out j1, j2;
    join_static(a, G, "", "inst-1", &j1);
    join_static(a, G, "", "inst-2", &j2);
    gr_gc_tick(a); /* the initial delay re-arms once for the second member */
    gr_gc_tick(a);
    CHECK(j1.called == 1 && j1.gen == 1 && j2.called == 1);
    CHECK(strncmp(j1.member_id, "inst-1-", 7) == 0);
    char m1[160], m2[160];
    snprintf(m1, sizeof m1, "%s", j1.member_id);
    snprintf(m2, sizeof m2, "%s", j2.member_id);
    CHECK(strcmp(j1.leader, m1) == 0);
    struct gr_gc_assignment as[] = {{m1, (const uint8_t *)"one", 3}, {m2, (const uint8_t *)"two", 3}};
    struct sync_out s1, s2;
    sync_(a, G, m1, 1, as, 2, &s1);
    sync_(a, G, m2, 1, NULL, 0, &s2);
    CHECK(s1.error == 0 && s2.error == 0 && strcmp(s2.assignment, "two") == 0);

    /* the leader restarts: same generation, no rebalance, answered with the old leader id */
    int appends = f.appends;
    struct join_out r1;
    join_static(a, G, "", "inst-1", &r1);
    CHECK(r1.called == 1);
    CHECK_KERR(r1.error, GR_KERR_NONE);
    CHECK(r1.gen == 1 && strcmp(r1.member_id, m1) != 0 && strcmp(r1.leader, m1) == 0 && r1.n_members == 0);
    CHECK(f.appends == appends + 1); /* the group was persisted with the new member id */
    char n1[160];
    snprintf(n1, sizeof n1, "%s", r1.member_id);
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct gr_gc_group_summary sum;
    CHECK_KERR(gr_gc_describe_group(a, G, &ar, &sum), GR_KERR_NONE);
    CHECK(strcmp(sum.state, "Stable") == 0 && sum.n_members == 2);
    CHECK(strcmp(sum.members[0].member_id, n1) == 0 && strcmp(sum.members[0].group_instance_id, "inst-1") == 0);
    /* the new id works, keeps the assignment; the old one is fenced */
    CHECK_KERR(gr_gc_heartbeat(a, G, n1, "inst-1", 1), GR_KERR_NONE);
    CHECK_KERR(gr_gc_heartbeat(a, G, m1, "inst-1", 1), GR_KERR_FENCED_INSTANCE_ID);
    CHECK_KERR(gr_gc_heartbeat(a, G, m2, "inst-2", 1), GR_KERR_NONE);
    struct sync_out s3;
    sync_(a, G, n1, 1, NULL, 0, &s3);
    CHECK(s3.error == 0 && strcmp(s3.assignment, "one") == 0);
    struct gr_gc_sync_req srq = {.group_id = G, .member_id = m1, .group_instance_id = "inst-1", .generation_id = 1};
    memset(&s3, 0, sizeof s3);
    gr_gc_sync_group(a, &srq, on_sync, &s3);
    CHECK_KERR(s3.error, GR_KERR_FENCED_INSTANCE_ID);
    struct gr_gc_commit_part part = {.topic = "t", .partition = 0, .offset = 1, .leader_epoch = -1,
                                     .expire_timestamp = -1};
    struct commit_out co = {0};
    gr_gc_commit_offsets(a, G, m1, "inst-1", 1, &part, 1, on_commit, &co);
    CHECK_KERR(co.errors[0], GR_KERR_FENCED_INSTANCE_ID);
    struct join_out jf;
    join_static(a, G, m1, "inst-1", &jf);
    CHECK_KERR(jf.error, GR_KERR_FENCED_INSTANCE_ID);
    join_static(a, G, n1, "inst-9", &jf);
    CHECK_KERR(jf.error, GR_KERR_UNKNOWN_MEMBER_ID);
    struct gr_gc_leave_member bad = {.member_id = m1, .group_instance_id = "inst-1"};
    CHECK_KERR(gr_gc_leave_group(a, G, &bad, 1), GR_KERR_NONE);
    CHECK_KERR(bad.error, GR_KERR_FENCED_INSTANCE_ID);

    /* a takeover whose write fails is reverted: the old member id stays valid */
    f.fail = GR_KERR_NOT_LEADER_OR_FOLLOWER;
    struct join_out r2;
    join_static(a, G, "", "inst-2", &r2);
    CHECK(r2.called == 1);
    CHECK_KERR(r2.error, GR_KERR_NOT_COORDINATOR);
    CHECK_KERR(gr_gc_heartbeat(a, G, m2, "inst-2", 1), GR_KERR_NONE);

    /* failover: the instance ids come back from the log */
    int32_t p = gr_gc_partition_for(a, G);
    f.epoch[p] = 1;
    f.term[p]++;
    struct gr_group_coordinator *b = new_gc(&f, 0);
    CHECK_KERR(gr_gc_describe_group(b, G, &ar, &sum), GR_KERR_NONE);
    CHECK(sum.n_members == 2 && strcmp(sum.members[0].member_id, n1) == 0 &&
          strcmp(sum.members[0].group_instance_id, "inst-1") == 0);
    CHECK_KERR(gr_gc_heartbeat(b, G, m1, "inst-1", 1), GR_KERR_FENCED_INSTANCE_ID);

    /* batch leave by instance id only: both go, the group is Empty */
    struct gr_gc_leave_member lm[] = {{.member_id = "", .group_instance_id = "inst-1"},
                                      {.member_id = "", .group_instance_id = "inst-2"},
                                      {.member_id = "", .group_instance_id = "inst-3"}};
    CHECK_KERR(gr_gc_leave_group(b, G, lm, 3), GR_KERR_NONE);
    CHECK_KERR(lm[0].error, GR_KERR_NONE);
    CHECK_KERR(lm[1].error, GR_KERR_NONE);
    CHECK_KERR(lm[2].error, GR_KERR_UNKNOWN_MEMBER_ID);
    gr_gc_tick(b);
    CHECK_KERR(gr_gc_describe_group(b, G, &ar, &sum), GR_KERR_NONE);
    CHECK(sum.n_members == 0 && strcmp(sum.state, "Empty") == 0);
    gr_arena_free(&ar);
    gr_gc_free(a);
    gr_gc_free(b);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

/* KIP-345 as Kafka 2.7's onCompleteJoin: a rebalance that a static member does not rejoin (its
 * instance is restarting) completes without it but keeps it -- member id, place in the leader's
 * member list, assignment; only dynamic members that failed to rejoin are removed. The restarted
 * instance then rejoins a Stable group without a second rebalance. Before, it was removed with
 * the dynamic ones and its return started a new rebalance. */
static void test_static_member_kept_through_rebalance(void) {
    struct fake f = {0};
    for (int i = 0; i < NP; i++) f.leader[i] = true;
    struct gr_group_coordinator *gc = new_gc(&f, 0);
    const char *G = "static-away";
    struct join_out ja, jb, jc, jd;
    struct gr_gc_join_req rq = {.group_id = G,
                                .member_id = "",
                                .group_instance_id = "inst-a",
                                .client_id = "cli",
                                .client_host = "/127.0.0.1",
                                .protocol_type = "consumer",
                                .session_timeout_ms = 60000,
                                .rebalance_timeout_ms = 20000,
                                .n_protocols = 2,
                                .protocols = RANGE_RR};
    memset(&ja, 0, sizeof ja);
    gr_gc_join_group(gc, &rq, on_join, &ja);
    rq.group_instance_id = "inst-b";
    memset(&jb, 0, sizeof jb);
    gr_gc_join_group(gc, &rq, on_join, &jb);
    gr_gc_tick(gc);
    gr_gc_tick(gc);
    CHECK(ja.called == 1 && jb.called == 1 && ja.gen == 1);
    char ma[160], mb[160];
    snprintf(ma, sizeof ma, "%s", ja.member_id);
    snprintf(mb, sizeof mb, "%s", jb.member_id);
    struct gr_gc_assignment as1[] = {{ma, (const uint8_t *)"a1", 2}, {mb, (const uint8_t *)"b1", 2}};
    struct sync_out sa, sb;
    sync_(gc, G, ma, 1, as1, 2, &sa);
    sync_(gc, G, mb, 1, NULL, 0, &sb);
    CHECK(sa.error == 0 && sb.error == 0);

    /* inst-a goes away without LeaveGroup; a dynamic member joins; inst-b rejoins */
    join(gc, G, "", false, RANGE_RR, 2, &jc);
    rq.group_instance_id = "inst-b";
    rq.member_id = mb;
    memset(&jb, 0, sizeof jb);
    gr_gc_join_group(gc, &rq, on_join, &jb);
    for (int i = 0; i < 19; i++) {
        g_now += 1000;
        gr_gc_tick(gc);
    }
    CHECK(jb.called == 0 && jc.called == 0);
    g_now += 1000;
    gr_gc_tick(gc); /* the rebalance timeout (20 s) completes the join without inst-a */
    CHECK(jb.called == 1 && jc.called == 1 && jb.gen == 2 && jc.gen == 2);
    CHECK(strcmp(jb.leader, mb) == 0 && jb.n_members == 3); /* inst-a is still listed for the leader */
    char mc[160];
    snprintf(mc, sizeof mc, "%s", jc.member_id);
    struct gr_gc_assignment as2[] = {
        {ma, (const uint8_t *)"a2", 2}, {mb, (const uint8_t *)"b2", 2}, {mc, (const uint8_t *)"c2", 2}};
    sync_(gc, G, mb, 2, as2, 3, &sb);
    struct sync_out sc;
    sync_(gc, G, mc, 2, NULL, 0, &sc);
    CHECK(sb.error == 0 && sc.error == 0 && strcmp(sc.assignment, "c2") == 0);
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct gr_gc_group_summary sum;
    CHECK_KERR(gr_gc_describe_group(gc, G, &ar, &sum), GR_KERR_NONE);
    CHECK(strcmp(sum.state, "Stable") == 0 && sum.n_members == 3);

    /* inst-a is back (unknown member id): no rebalance, same generation, its assignment */
    rq.group_instance_id = "inst-a";
    rq.member_id = "";
    memset(&jd, 0, sizeof jd);
    gr_gc_join_group(gc, &rq, on_join, &jd);
    CHECK(jd.called == 1);
    CHECK_KERR(jd.error, GR_KERR_NONE);
    CHECK(jd.gen == 2 && strncmp(jd.member_id, "inst-a-", 7) == 0);
    struct sync_out sd;
    sync_(gc, G, jd.member_id, 2, NULL, 0, &sd);
    CHECK(sd.error == 0 && strcmp(sd.assignment, "a2") == 0);
    CHECK_KERR(gr_gc_describe_group(gc, G, &ar, &sum), GR_KERR_NONE);
    CHECK(strcmp(sum.state, "Stable") == 0 && sum.n_members == 3);
    CHECK_KERR(gr_gc_heartbeat(gc, G, mb, "inst-b", 2), GR_KERR_NONE);
    CHECK_KERR(gr_gc_heartbeat(gc, G, mc, NULL, 2), GR_KERR_NONE);

    /* a static member that stays away is removed by its session timeout (60 s), which rebalances */
    for (int i = 0; i < 59; i++) {
        g_now += 1000;
        CHECK_KERR(gr_gc_heartbeat(gc, G, mb, "inst-b", 2), GR_KERR_NONE);
        CHECK_KERR(gr_gc_heartbeat(gc, G, mc, NULL, 2), GR_KERR_NONE);
        gr_gc_tick(gc);
    }
    g_now += 1001;
    gr_gc_tick(gc);
    CHECK_KERR(gr_gc_describe_group(gc, G, &ar, &sum), GR_KERR_NONE);
    CHECK(strcmp(sum.state, "PreparingRebalance") == 0 && sum.n_members == 2);
    gr_arena_free(&ar);
    gr_gc_free(gc);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

/* KIP-211 offset retention: an Empty consumer group's offsets expire retention after it became
 * Empty (then the group is Dead); simple groups' offsets at commit + retention or at their
 * explicit expire timestamp; tombstones reach the log. */
static void test_offset_expiry(void) {
    const int64_t RET = 10080LL * 60000, CHECKI = 600000;
    struct fake f = {0};
    for (int i = 0; i < NP; i++) f.leader[i] = true;
    struct gr_group_coordinator *a = new_gc(&f, 0);
    const char *G = "expiring";
    struct join_out j;
    join(a, G, "", false, RANGE_RR, 2, &j);
    gr_gc_tick(a);
    char m[160];
    snprintf(m, sizeof m, "%s", j.member_id);
    struct gr_gc_assignment as[] = {{m, (const uint8_t *)"x", 1}};
    struct sync_out s;
    sync_(a, G, m, 1, as, 1, &s);
    CHECK(s.error == 0);
    struct gr_gc_commit_part part = {.topic = "t", .partition = 0, .offset = 5, .leader_epoch = -1,
                                     .commit_timestamp = g_now, .expire_timestamp = -1};
    struct commit_out co = {0};
    gr_gc_commit_offsets(a, G, m, NULL, 1, &part, 1, on_commit, &co);
    CHECK(co.errors[0] == 0);
    /* simple groups: one by retention, one by its explicit expire timestamp */
    struct gr_gc_commit_part sp = {.topic = "u", .partition = 0, .offset = 7, .leader_epoch = -1,
                                   .commit_timestamp = g_now, .expire_timestamp = -1};
    gr_gc_commit_offsets(a, "simple-ret", "", NULL, -1, &sp, 1, on_commit, &co);
    struct gr_gc_commit_part ep = {.topic = "u", .partition = 1, .offset = 8, .leader_epoch = -1,
                                   .commit_timestamp = g_now, .expire_timestamp = g_now + 1000};
    gr_gc_commit_offsets(a, "simple-exp", "", NULL, -1, &ep, 1, on_commit, &co);

    /* the member stays a day (a Stable group's subscribed offsets never expire), then leaves */
    g_now += 24LL * 3600000;
    CHECK_KERR(gr_gc_heartbeat(a, G, m, NULL, 1), GR_KERR_NONE);
    gr_gc_tick(a);
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct gr_gc_fetch_part *all = NULL;
    int n = 0;
    CHECK_KERR(gr_gc_fetch_offsets(a, "simple-exp", true, false, &all, &n, &ar), GR_KERR_NONE);
    CHECK(n == 0); /* its expire timestamp passed */
    CHECK_KERR(gr_gc_fetch_offsets(a, "simple-ret", true, false, &all, &n, &ar), GR_KERR_NONE);
    CHECK(n == 1);
    struct gr_gc_leave_member lm = {.member_id = m};
    CHECK_KERR(gr_gc_leave_group(a, G, &lm, 1), GR_KERR_NONE);
    int64_t empty_since = g_now;

    /* commit + retention: the simple group's offset expires and the group goes */
    g_now += RET - 24LL * 3600000 + CHECKI;
    gr_gc_tick(a);
    CHECK_KERR(gr_gc_fetch_offsets(a, "simple-ret", true, false, &all, &n, &ar), GR_KERR_NONE);
    CHECK(n == 0);
    CHECK_KERR(gr_gc_fetch_offsets(a, G, true, false, &all, &n, &ar), GR_KERR_NONE);
    CHECK(n == 1); /* Empty for less than the retention */
    g_now = empty_since + RET + CHECKI;
    gr_gc_tick(a);
    CHECK_KERR(gr_gc_fetch_offsets(a, G, true, false, &all, &n, &ar), GR_KERR_NONE);
    CHECK(n == 0);
    struct gr_gc_group_summary sum;
    CHECK_KERR(gr_gc_describe_group(a, G, &ar, &sum), GR_KERR_NONE);
    CHECK(strcmp(sum.state, "Dead") == 0);

    /* the tombstones are in the log: a new coordinator loads nothing */
    int32_t p = gr_gc_partition_for(a, G);
    f.epoch[p] = 1;
    f.term[p]++;
    struct gr_group_coordinator *b = new_gc(&f, 0);
    CHECK_KERR(gr_gc_fetch_offsets(b, G, true, false, &all, &n, &ar), GR_KERR_NONE);
    CHECK(n == 0);
    CHECK_KERR(gr_gc_describe_group(b, G, &ar, &sum), GR_KERR_NONE);
    CHECK(strcmp(sum.state, "Dead") == 0);
    gr_arena_free(&ar);
    gr_gc_free(a);
    gr_gc_free(b);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

/* KIP-447: transactional offsets are pending (require_stable: UNSTABLE_OFFSET_COMMIT) until
 * their COMMIT marker, then committed at once, as Kafka 2.7's completePendingTxnOffsetCommit:
 * never the previous offset in between, and not lost when the background rewrite as ordinary
 * offset records fails (the marker committed them). ABORT drops them. */
static void test_txn_offsets_at_marker(void) {
    struct fake f = {0};
    for (int i = 0; i < NP; i++) f.leader[i] = true;
    struct gr_group_coordinator *gc = new_gc(&f, 0);
    const char *G = "txn-group";
    int32_t p = gr_gc_partition_for(gc, G);
    struct gr_gc_commit_part part = {.topic = "t", .partition = 0, .offset = 5, .leader_epoch = -1,
                                     .commit_timestamp = g_now, .expire_timestamp = -1};
    struct commit_out co = {0};
    gr_gc_commit_offsets(gc, G, "", NULL, -1, &part, 1, on_commit, &co);
    CHECK_KERR(co.errors[0], GR_KERR_NONE);
    gr_txn_offsets_add(77, p, G, "t", 0, 42, -1, "m", 100);
    gr_txn_offsets_add(78, p, G, "t", 1, 9, -1, "", 101);
    struct gr_arena a;
    gr_arena_init(&a);
    struct gr_gc_fetch_part fp[2] = {{.topic = "t", .partition = 0}, {.topic = "t", .partition = 1}};
    struct gr_gc_fetch_part *fpp = fp;
    int fn = 2;
    CHECK_KERR(gr_gc_fetch_offsets(gc, G, false, true, &fpp, &fn, &a), GR_KERR_NONE);
    CHECK_KERR(fp[0].error, GR_KERR_UNSTABLE_OFFSET_COMMIT);
    CHECK_KERR(fp[1].error, GR_KERR_UNSTABLE_OFFSET_COMMIT);
    /* COMMIT marker of 77 whose ordinary rewrite fails: still committed */
    f.fail = GR_KERR_REQUEST_TIMED_OUT;
    gr_gc_complete_txn_offsets(gc, 77, p, true);
    CHECK(f.fail == 0); /* the rewrite was attempted */
    memset(fp, 0, sizeof fp);
    fp[0].topic = fp[1].topic = "t";
    fp[1].partition = 1;
    fn = 2;
    CHECK_KERR(gr_gc_fetch_offsets(gc, G, false, true, &fpp, &fn, &a), GR_KERR_NONE);
    CHECK_KERR(fp[0].error, GR_KERR_NONE);
    CHECK(fp[0].offset == 42 && strcmp(fp[0].metadata, "m") == 0);
    CHECK_KERR(fp[1].error, GR_KERR_UNSTABLE_OFFSET_COMMIT);
    /* ABORT marker of 78: dropped, the partition is stable again without an offset */
    gr_gc_complete_txn_offsets(gc, 78, p, false);
    memset(fp, 0, sizeof fp);
    fp[0].topic = fp[1].topic = "t";
    fp[1].partition = 1;
    fn = 2;
    CHECK_KERR(gr_gc_fetch_offsets(gc, G, false, true, &fpp, &fn, &a), GR_KERR_NONE);
    CHECK(fp[0].offset == 42);
    CHECK_KERR(fp[1].error, GR_KERR_NONE);
    CHECK(fp[1].offset == -1);
    CHECK(gr_txn_offsets_count() == 0);
    gr_arena_free(&a);
    gr_gc_free(gc);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

/* A transactional offset commit of producer pid for group/topic-0 at offset off, as
 * TxnOffsetCommit writes it. */
static uint8_t *txn_offset_batch(int64_t pid, const char *group, const char *topic, int64_t off, size_t *len) {
    struct gr_wbuf k, v;
    gr_wbuf_init(&k);
    gr_wbuf_init(&v);
    gr_go_encode_offset_key(&k, group, topic, 0);
    struct gr_go_offset_value ov = {.offset = off, .leader_epoch = -1, .metadata = "", .commit_timestamp = g_now,
                                    .expire_timestamp = -1};
    gr_go_encode_offset_value(&v, &ov);
    struct gr_batch_rec r = {k.p, (int32_t)k.len, v.p, (int32_t)v.len, NULL, 0, g_now};
    struct gr_batch_build_opts o = GR_BATCH_BUILD_OPTS_INIT;
    o.attributes = GR_BATCH_ATTR_TRANSACTIONAL;
    o.producer_id = pid;
    o.producer_epoch = 0;
    o.base_sequence = 0;
    uint8_t *b = gr_batch_build(&r, 1, &o, len);
    gr_wbuf_free(&k);
    gr_wbuf_free(&v);
    return b;
}

static uint8_t *commit_marker(int64_t pid, size_t *len) {
    uint8_t k[4] = {0, 0, 0, 1}, v[6] = {0, 0, 0, 0, 0, 0};
    struct gr_batch_rec r = {k, 4, v, 6, NULL, 0, g_now};
    struct gr_batch_build_opts o = GR_BATCH_BUILD_OPTS_INIT;
    o.attributes = GR_BATCH_ATTR_TRANSACTIONAL | GR_BATCH_ATTR_CONTROL;
    o.producer_id = pid;
    o.producer_epoch = 0;
    return gr_batch_build(&r, 1, &o, len);
}

/* WriteTxnMarkers while the partition loads: the COMMIT marker is appended, then its completion
 * runs (as handle_txn.c does) before the loader is done. */
static void marker_during_load(struct fake *f, int32_t p) {
    size_t len;
    uint8_t *m = commit_marker(91, &len);
    f_put(f, p, m, len);
    free(m);
    gr_gc_complete_txn_offsets(f->gc, 91, p, true);
}

/* Issue 24 item 4: a COMMIT marker whose completion comes while its __consumer_offsets partition
 * loads is applied by the loader, which reads to the log end as it moves (Kafka 2.7 runs the
 * completion after the load and its loader re-reads logEndOffset). Before, the completion failed
 * with COORDINATOR_LOAD_IN_PROGRESS and dropped the pending offsets, and the loader stopped at the
 * log end seen when it began: the committed offset was lost. */
static void test_txn_marker_during_load(void) {
    struct fake f = {0};
    const char *G = "txn-load-group";
    struct gr_group_coordinator *gc = new_gc(&f, 0); /* leads nothing yet */
    int32_t p = gr_gc_partition_for(gc, G);
    size_t len;
    uint8_t *b = txn_offset_batch(91, G, "t", 42, &len);
    f_put(&f, p, b, len);
    free(b);
    f.gc = gc;
    f.on_read = marker_during_load;
    f.leader[p] = true;
    gr_gc_poll_partitions(gc);
    CHECK(f.on_read == NULL); /* the marker came during the load */
    CHECK(f.end[p] == 2);
    struct gr_arena a;
    gr_arena_init(&a);
    struct gr_gc_fetch_part fp[1] = {{.topic = "t", .partition = 0}};
    struct gr_gc_fetch_part *fpp = fp;
    int fn = 1;
    CHECK_KERR(gr_gc_fetch_offsets(gc, G, false, true, &fpp, &fn, &a), GR_KERR_NONE);
    CHECK_KERR(fp[0].error, GR_KERR_NONE);
    CHECK(fp[0].offset == 42);
    CHECK(gr_txn_offsets_count() == 0);
    gr_arena_free(&a);
    gr_gc_free(gc);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

static int64_t fetch_one(struct gr_group_coordinator *gc, const char *group, const char *topic, int32_t partition) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct gr_gc_fetch_part fp[1] = {{.topic = topic, .partition = partition}};
    struct gr_gc_fetch_part *fpp = fp;
    int fn = 1;
    CHECK_KERR(gr_gc_fetch_offsets(gc, group, false, false, &fpp, &fn, &a), GR_KERR_NONE);
    int64_t off = fp[0].offset;
    gr_arena_free(&a);
    return off;
}

/* Issue 24 item 4: an ordinary OffsetCommit stored after a transactional one wins over it when the
 * transaction commits (Kafka 2.7 completePendingTxnOffsetCommit / the loader compare the records'
 * log positions), live and after a reload; the stale transactional offset is not rewritten.
 * Before, the marker applied the transactional offset over the newer commit. */
static void test_txn_offset_older_than_ordinary_commit(void) {
    struct fake f = {0};
    for (int i = 0; i < NP; i++) f.leader[i] = true;
    struct gr_group_coordinator *gc = new_gc(&f, 0);
    const char *G = "txn-order-group";
    int32_t p = gr_gc_partition_for(gc, G);
    size_t len;
    int64_t at = f.end[p];
    uint8_t *b = txn_offset_batch(95, G, "t", 7, &len); /* TxnOffsetCommit of producer 95: offset 7 */
    f_put(&f, p, b, len);
    free(b);
    gr_txn_offsets_add(95, p, G, "t", 0, 7, -1, "", at);
    struct gr_gc_commit_part part = {.topic = "t", .partition = 0, .offset = 9, .leader_epoch = -1,
                                     .commit_timestamp = g_now, .expire_timestamp = -1};
    struct commit_out co = {0};
    gr_gc_commit_offsets(gc, G, "", NULL, -1, &part, 1, on_commit, &co); /* then an ordinary commit: 9 */
    CHECK_KERR(co.errors[0], GR_KERR_NONE);
    uint8_t *m = commit_marker(95, &len);
    f_put(&f, p, m, len);
    free(m);
    int appends = f.appends;
    gr_gc_complete_txn_offsets(gc, 95, p, true);
    CHECK(fetch_one(gc, G, "t", 0) == 9);
    CHECK(f.appends == appends); /* the stale offset is not rewritten */
    CHECK(gr_txn_offsets_count() == 0);
    gr_gc_free(gc);
    struct gr_group_coordinator *again = new_gc(&f, 0); /* a new coordinator loads the same log */
    CHECK(fetch_one(again, G, "t", 0) == 9);
    CHECK(gr_txn_offsets_count() == 0);
    gr_gc_free(again);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

/* Kafka 2.7 GroupMetadata.onOffsetCommitAppend: an OffsetCommit whose append completes after a
 * later record already set the offset (another commit, or a transactional offset committed by
 * its marker) does not replace it: the later record wins, as it does when the log is loaded.
 * Before, the late completion put the older offset back into the cache (a stale committed offset
 * served until the partition was reloaded). */
static void test_late_commit_completion_does_not_regress(void) {
    struct fake f = {0};
    for (int i = 0; i < NP; i++) f.leader[i] = true;
    struct gr_group_coordinator *gc = new_gc(&f, 0);
    const char *G = "late-commit-group";
    int32_t p = gr_gc_partition_for(gc, G);
    /* ordinary commit of 5, appended first, its completion late */
    struct gr_gc_commit_part c1 = {.topic = "t", .partition = 0, .offset = 5, .leader_epoch = -1,
                                   .commit_timestamp = g_now, .expire_timestamp = -1};
    struct commit_out o1 = {0};
    f.hold = true;
    gr_gc_commit_offsets(gc, G, "", NULL, -1, &c1, 1, on_commit, &o1);
    CHECK(f.held_done != NULL);
    /* a second commit of 8, appended after it, completes at once */
    struct gr_gc_commit_part c2 = {.topic = "t", .partition = 0, .offset = 8, .leader_epoch = -1,
                                   .commit_timestamp = g_now, .expire_timestamp = -1};
    struct commit_out o2 = {0};
    gr_gc_commit_offsets(gc, G, "", NULL, -1, &c2, 1, on_commit, &o2);
    CHECK_KERR(o2.errors[0], GR_KERR_NONE);
    CHECK(fetch_one(gc, G, "t", 0) == 8);
    f_release(&f);
    CHECK_KERR(o1.errors[0], GR_KERR_NONE);
    CHECK(fetch_one(gc, G, "t", 0) == 8); /* as a reload of the log gives */
    /* the same against a transactional offset: ordinary commit of 11 appended, its completion
     * late; then TxnOffsetCommit of 20 and its COMMIT marker */
    struct gr_gc_commit_part c3 = {.topic = "t", .partition = 0, .offset = 11, .leader_epoch = -1,
                                   .commit_timestamp = g_now, .expire_timestamp = -1};
    struct commit_out o3 = {0};
    f.hold = true;
    gr_gc_commit_offsets(gc, G, "", NULL, -1, &c3, 1, on_commit, &o3);
    size_t len;
    int64_t at = f.end[p];
    uint8_t *b = txn_offset_batch(97, G, "t", 20, &len);
    f_put(&f, p, b, len);
    free(b);
    gr_txn_offsets_add(97, p, G, "t", 0, 20, -1, "", at);
    uint8_t *m = commit_marker(97, &len);
    f_put(&f, p, m, len);
    free(m);
    gr_gc_complete_txn_offsets(gc, 97, p, true);
    CHECK(fetch_one(gc, G, "t", 0) == 20);
    f_release(&f);
    CHECK_KERR(o3.errors[0], GR_KERR_NONE);
    CHECK(fetch_one(gc, G, "t", 0) == 20);
    gr_gc_free(gc);
    struct gr_group_coordinator *again = new_gc(&f, 0);
    CHECK(fetch_one(again, G, "t", 0) == 20);
    gr_gc_free(again);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

/* ---- issue 24 item 12: loading in the background (group_metadata_loader.c) ---- */

/* n ordinary offset commits of group, topic partition i at offset off + i, one batch each, in the
 * log of p (as OffsetCommit writes them). */
static void put_offsets(struct fake *f, int32_t p, const char *group, const char *topic, int n, int64_t off) {
    for (int i = 0; i < n; i++) {
        struct gr_wbuf k, v;
        gr_wbuf_init(&k);
        gr_wbuf_init(&v);
        gr_go_encode_offset_key(&k, group, topic, i);
        struct gr_go_offset_value ov = {.offset = off + i, .leader_epoch = -1, .metadata = "m",
                                        .commit_timestamp = g_now, .expire_timestamp = -1};
        gr_go_encode_offset_value(&v, &ov);
        struct gr_batch_rec r = {k.p, (int32_t)k.len, v.p, (int32_t)v.len, NULL, 0, g_now};
        size_t len;
        uint8_t *b = gr_batch_build(&r, 1, NULL, &len);
        f_put(f, p, b, len);
        free(b);
        gr_wbuf_free(&k);
        gr_wbuf_free(&v);
    }
}

/* Thousands of offsets of one group: each found by (topic, partition), removed ones gone, the
 * others kept after removals moved entries around, and all of them after a reload (the lookups
 * are a hash index over the offsets array now; they were linear scans). */
static void test_offsets_many_partitions(void) {
    struct fake f = {0};
    for (int i = 0; i < NP; i++) f.leader[i] = true;
    struct gr_group_coordinator *gc = new_gc(&f, 0);
    const char *G = "many-offsets";
    enum { N = 6000 };
    struct gr_gc_commit_part *parts = gr_calloc(N, sizeof *parts);
    for (int i = 0; i < N; i++)
        parts[i] = (struct gr_gc_commit_part){.topic = i % 2 ? "a" : "b", .partition = i / 2, .offset = i,
                                              .leader_epoch = -1, .commit_timestamp = g_now, .expire_timestamp = -1};
    struct commit_out co = {0};
    gr_gc_commit_offsets(gc, G, "", NULL, -1, parts, N, on_commit, &co);
    CHECK(co.called == 1);
    CHECK_KERR(co.errors[0], GR_KERR_NONE);
    struct gr_gc_offset_delete_part *dp = gr_calloc(N, sizeof *dp);
    int nd = 0;
    for (int i = 0; i < N; i += 3) dp[nd++] = (struct gr_gc_offset_delete_part){parts[i].topic, parts[i].partition, GR_KERR_NONE};
    CHECK_KERR(gr_gc_delete_offsets(gc, G, dp, nd), GR_KERR_NONE);
    int bad = 0;
    for (int i = 0; i < N; i++)
        if (fetch_one(gc, G, parts[i].topic, parts[i].partition) != (i % 3 ? i : -1)) bad++;
    CHECK(bad == 0);
    CHECK(fetch_one(gc, G, "a", N) == -1);
    CHECK(fetch_one(gc, G, "c", 0) == -1);
    struct gr_gc_counts cnt;
    gr_gc_counts(gc, &cnt);
    CHECK(cnt.offsets == N - nd);
    /* a second coordinator loads the same log: the same offsets */
    struct gr_group_coordinator *gc2 = new_gc(&f, 0);
    bad = 0;
    for (int i = 0; i < N; i++)
        if (fetch_one(gc2, G, parts[i].topic, parts[i].partition) != (i % 3 ? i : -1)) bad++;
    CHECK(bad == 0);
    struct gr_arena a;
    gr_arena_init(&a);
    struct gr_gc_fetch_part *all = NULL;
    int n_all = 0;
    CHECK_KERR(gr_gc_fetch_offsets(gc2, G, true, false, &all, &n_all, &a), GR_KERR_NONE);
    CHECK(n_all == N - nd);
    gr_arena_free(&a);
    gr_gc_free(gc2);
    gr_gc_free(gc);
    free(dp);
    free(parts);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

/* pending transactional offsets left by earlier tests (the table is process-wide) */
static int txn_base;

/* The log of p for the load tests: 3 offsets of group G (one batch each) and a TxnOffsetCommit of
 * producer 77 still waiting for its marker. */
static void put_load_log(struct fake *f, int32_t p, const char *G) {
    gr_txn_offsets_drop_partition(p); /* an earlier test's, on the same partition */
    txn_base = gr_txn_offsets_count();
    put_offsets(f, p, G, "t", 3, 100);
    size_t len;
    uint8_t *b = txn_offset_batch(77, G, "u", 5, &len);
    f_put(f, p, b, len);
    free(b);
}

static void check_loaded(struct gr_group_coordinator *gc, const char *G) {
    CHECK_KERR(gr_gc_coordinator_status(gc, G), GR_KERR_NONE);
    for (int i = 0; i < 3; i++) CHECK(fetch_one(gc, G, "t", i) == 100 + i);
    CHECK(gr_txn_offsets_count() == txn_base + 1); /* the pending one, once */
}

/* on the second read of a load: nothing of it is visible yet, then the partition is lost */
static void lose_leadership_mid_load(struct fake *f, int32_t p) {
    if (f->reads < 2) {
        f->on_read = lose_leadership_mid_load;
        return;
    }
    struct gr_gc_counts cnt;
    gr_gc_counts(f->gc, &cnt);
    CHECK(cnt.groups == 0); /* the first chunk's group is in the load's own table only */
    f->leader[p] = false;
    gr_gc_poll_partitions(f->gc); /* StopReplica / LeaderAndIsr as follower: unload */
}

/* Leadership lost while the partition loads (Kafka's removeGroupsForPartition racing
 * loadGroupsAndOffsets): the load is cancelled and leaves nothing behind, no group, no pending
 * transactional offset; led again later, it loads whole. Before, a partly loaded partition's
 * groups sat in the coordinator's table (and its gauges) while it loaded. */
static void test_unload_during_load(void) {
    struct fake f = {0};
    f.max_batches = 1;
    const char *G = "unload-load-group";
    struct gr_group_coordinator *gc = new_gc(&f, 0);
    f.gc = gc;
    int32_t p = gr_gc_partition_for(gc, G);
    put_load_log(&f, p, G);
    f.leader[p] = true;
    f.on_read = lose_leadership_mid_load;
    gr_gc_poll_partitions(gc);
    CHECK(f.on_read == NULL);
    CHECK_KERR(gr_gc_coordinator_status(gc, G), GR_KERR_NOT_COORDINATOR);
    struct gr_gc_counts cnt;
    gr_gc_counts(gc, &cnt);
    CHECK(cnt.groups == 0);
    CHECK(gr_txn_offsets_count() == txn_base);
    f.leader[p] = true;
    f.epoch[p]++;
    f.term[p]++;
    gr_gc_poll_partitions(gc);
    check_loaded(gc, G);
    gr_gc_free(gc);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

static void new_epoch_mid_load(struct fake *f, int32_t p) {
    if (f->reads < 2) {
        f->on_read = new_epoch_mid_load;
        return;
    }
    f->epoch[p] += 2; /* leadership lost and regained (two LeaderAndIsr) between two polls */
    f->term[p]++;
    gr_gc_poll_partitions(f->gc);
}

/* A second become-leader (a new leader epoch) while the partition loads: the running load is
 * discarded and the partition loaded again at once for the new epoch, the pending transactional
 * offsets rebuilt once. Before, the load gave up at its end and the partition stayed unloaded
 * until a later poll. */
static void test_new_epoch_during_load(void) {
    struct fake f = {0};
    f.max_batches = 1;
    const char *G = "epoch-load-group";
    struct gr_group_coordinator *gc = new_gc(&f, 0);
    f.gc = gc;
    int32_t p = gr_gc_partition_for(gc, G);
    put_load_log(&f, p, G);
    f.leader[p] = true;
    f.on_read = new_epoch_mid_load;
    gr_gc_poll_partitions(gc);
    CHECK(f.on_read == NULL);
    check_loaded(gc, G);
    gr_gc_free(gc);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

/* on the second read of a load: a new leader epoch of the same leadership (an ISR change) */
static void epoch_only_mid_load(struct fake *f, int32_t p) {
    if (f->reads < 2) {
        f->on_read = epoch_only_mid_load;
        return;
    }
    f->epoch[p]++;
    gr_gc_poll_partitions(f->gc);
}

/* Kafka 2.7 calls onElection only when makeLeader made this broker a new leader: a LeaderAndIsr
 * that bumps the leader epoch while this broker stays the leader (the controller shrinking the
 * ISR after a follower died) neither cancels a running load nor unloads and reloads the groups;
 * a leadership lost and regained between two polls (a new leader term) reloads them. Before, a
 * new epoch alone cancelled the load, dropped the groups (a parked JoinGroup answered
 * NOT_COORDINATOR, the member gone) and queued a reload, the groups answering
 * COORDINATOR_LOAD_IN_PROGRESS meanwhile. */
static void test_epoch_bump_keeps_groups(void) {
    struct fake f = {0};
    f.max_batches = 1;
    const char *G = "isr-shrink-group";
    struct gr_group_coordinator *gc = new_gc(&f, 0);
    f.gc = gc;
    int32_t p = gr_gc_partition_for(gc, G);
    put_load_log(&f, p, G);
    f.leader[p] = true;
    f.term[p] = 1;
    f.on_read = epoch_only_mid_load;
    gr_gc_poll_partitions(gc);
    CHECK(f.on_read == NULL);
    CHECK(f.reads == 4); /* the 4 batches of put_load_log, read once: the load was not restarted */
    check_loaded(gc, G);

    /* a member parked in its JoinGroup (the initial delay), then a new epoch of the same term */
    struct join_out j1;
    join(gc, G, "", true, RANGE_RR, 2, &j1);
    char m1[160];
    snprintf(m1, sizeof m1, "%s", j1.member_id);
    join(gc, G, m1, true, RANGE_RR, 2, &j1);
    CHECK(j1.called == 0);
    f.epoch[p]++;
    CHECK_KERR(gr_gc_coordinator_status(gc, G), GR_KERR_NONE); /* before the poll too */
    gr_gc_poll_partitions(gc);
    CHECK_KERR(gr_gc_coordinator_status(gc, G), GR_KERR_NONE);
    CHECK(f.reads == 4); /* no reload */
    CHECK(j1.called == 0);
    gr_gc_tick(gc);
    CHECK(j1.called == 1);
    CHECK_KERR(j1.error, GR_KERR_NONE);
    struct sync_out s1;
    struct gr_gc_assignment as1[] = {{m1, (const uint8_t *)"all", 3}};
    sync_(gc, G, m1, j1.gen, as1, 1, &s1);
    CHECK(s1.called == 1);
    CHECK_KERR(s1.error, GR_KERR_NONE);

    /* lost and regained between two polls: a new term, the cached state is not served; reloaded */
    f.epoch[p] += 2;
    f.term[p]++;
    CHECK_KERR(gr_gc_coordinator_status(gc, G), GR_KERR_COORDINATOR_LOAD_IN_PROGRESS);
    CHECK_KERR(gr_gc_heartbeat(gc, G, m1, NULL, j1.gen), GR_KERR_NONE); /* Kafka answers blindly while loading */
    gr_gc_poll_partitions(gc);
    CHECK(f.reads > 4);
    check_loaded(gc, G);
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct gr_gc_group_summary sum;
    CHECK_KERR(gr_gc_describe_group(gc, G, &ar, &sum), GR_KERR_NONE);
    CHECK(strcmp(sum.state, "Stable") == 0 && sum.n_members == 1 && strcmp(sum.members[0].member_id, m1) == 0);
    gr_arena_free(&ar);
    gr_gc_free(gc);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

/* A read error while loading: the partition answers COORDINATOR_LOAD_IN_PROGRESS and is loaded
 * again a second later (not on every 50 ms poll); Kafka 2.7 would mark it owned with nothing
 * loaded (see group_metadata_loader.c). */
static void test_load_read_error_retried(void) {
    struct fake f = {0};
    const char *G = "read-error-group";
    struct gr_group_coordinator *gc = new_gc(&f, 0);
    int32_t p = gr_gc_partition_for(gc, G);
    put_load_log(&f, p, G);
    f.leader[p] = true;
    f.read_fail = GR_KERR_KAFKA_STORAGE_ERROR;
    gr_gc_poll_partitions(gc);
    CHECK_KERR(gr_gc_coordinator_status(gc, G), GR_KERR_COORDINATOR_LOAD_IN_PROGRESS);
    CHECK(gr_txn_offsets_count() == txn_base);
    int reads = f.reads;
    gr_gc_poll_partitions(gc);
    CHECK(f.reads == reads); /* backing off */
    CHECK_KERR(gr_gc_coordinator_status(gc, G), GR_KERR_COORDINATOR_LOAD_IN_PROGRESS);
    g_now += 1000;
    gr_gc_poll_partitions(gc);
    check_loaded(gc, G);
    gr_gc_free(gc);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

static void shutdown_mid_load(struct fake *f, int32_t p) {
    (void)p;
    if (f->reads < 2) {
        f->on_read = shutdown_mid_load;
        return;
    }
    gr_gc_shutdown(f->gc);
}

/* The broker shuts down while a partition loads: the load stops, nothing stays (run under ASan:
 * no leak). */
static void test_shutdown_during_load(void) {
    struct fake f = {0};
    f.max_batches = 1;
    const char *G = "shutdown-load-group";
    struct gr_group_coordinator *gc = new_gc(&f, 0);
    f.gc = gc;
    int32_t p = gr_gc_partition_for(gc, G);
    put_load_log(&f, p, G);
    f.leader[p] = true;
    f.on_read = shutdown_mid_load;
    gr_gc_poll_partitions(gc);
    CHECK(f.reads == 2); /* stopped after the read that saw the shutdown */
    CHECK_KERR(gr_gc_coordinator_status(gc, G), GR_KERR_COORDINATOR_NOT_AVAILABLE);
    struct gr_gc_counts cnt;
    gr_gc_counts(gc, &cnt);
    CHECK(cnt.groups == 0);
    CHECK(gr_txn_offsets_count() == txn_base);
    gr_gc_free(gc);
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

/* Waits (bounded: a hang guard, not a timing check) until cond(arg). */
static bool wait_until(bool (*cond)(void *), void *arg) {
    for (int i = 0; i < 6000; i++) {
        if (cond(arg)) return true;
        usleep(5000);
    }
    return false;
}
static bool read_once(void *arg) { return __atomic_load_n(&((struct fake *)arg)->reads, __ATOMIC_SEQ_CST) >= 1; }
static bool joined(void *arg) { return __atomic_load_n(&((struct join_out *)arg)->called, __ATOMIC_SEQ_CST) > 0; }
struct hb_probe {
    struct gr_group_coordinator *gc;
    const char *group, *member;
    int32_t gen;
};
static bool member_expired(void *arg) { /* not by heartbeating: that would keep the member */
    struct hb_probe *h = arg;
    struct gr_arena a;
    gr_arena_init(&a);
    struct gr_gc_group_summary sum;
    bool gone = gr_gc_describe_group(h->gc, h->group, &a, &sum) == GR_KERR_NONE && sum.n_members == 0;
    gr_arena_free(&a);
    return gone;
}
static bool status_none(void *arg) {
    struct hb_probe *h = arg;
    return gr_gc_coordinator_status(h->gc, h->group) == GR_KERR_NONE;
}

/* With the background threads: while one partition's load is held (test hook
 * GREGOR_TEST_GROUP_LOAD_PAUSE), only its groups answer COORDINATOR_LOAD_IN_PROGRESS; a group of
 * another partition joins (the initial-delay timer fires), commits, heartbeats and loses its
 * member on session expiry (the heartbeat timer fires); then the broker shuts down in the middle
 * of the load without hanging. Before, the load ran on the coordinator's only thread: no timer
 * fired until it finished, and shutdown waited for it. */
static void test_background_load(void) {
    char pause[] = "/tmp/gr-load-pause-XXXXXX";
    int fd = mkstemp(pause);
    CHECK(fd >= 0);
    close(fd);
    setenv("GREGOR_TEST_GROUP_LOAD_PAUSE", pause, 1);
    struct fake f = {0};
    char ga[16], gb[16];
    group_in(0, ga, sizeof ga);
    group_in(1, gb, sizeof gb);
    put_offsets(&f, 1, gb, "t", 50, 0);
    f.leader[0] = true;
    struct gr_gc_config c;
    gr_gc_config_defaults(&c);
    c.broker_id = 1;
    c.initial_rebalance_delay_ms = 100;
    c.storage = (struct gr_gc_storage){.ctx = &f, .leader_info = f_leader_info, .append = f_append, .read = f_read,
                                       .num_partitions = f_nparts};
    c.mono_ms = vclock;
    c.wall_ms = vclock;
    c.background_thread = true;
    struct gr_group_coordinator *gc = gr_gc_new(&c);
    struct hb_probe ha = {gc, ga, NULL, 1};
    CHECK(wait_until(status_none, &ha)); /* partition 0 (empty log) loaded */
    f.leader[1] = true;                  /* partition 1 becomes led: its load starts and is held */
    CHECK(wait_until(read_once, &f));
    CHECK_KERR(gr_gc_coordinator_status(gc, gb), GR_KERR_COORDINATOR_LOAD_IN_PROGRESS);
    /* group A, on the owned partition: a join from Empty waits for the initial delay (a timer) */
    struct join_out jo;
    join(gc, ga, "", false, RANGE_RR, 2, &jo);
    CHECK(jo.called == 0);
    g_now += 200;
    CHECK(wait_until(joined, &jo));
    CHECK_KERR(jo.error, GR_KERR_NONE);
    struct sync_out so;
    struct gr_gc_assignment as[] = {{jo.member_id, (const uint8_t *)"x", 1}};
    sync_(gc, ga, jo.member_id, jo.gen, as, 1, &so);
    CHECK_KERR(so.error, GR_KERR_NONE);
    CHECK_KERR(gr_gc_heartbeat(gc, ga, jo.member_id, NULL, jo.gen), GR_KERR_NONE);
    struct gr_gc_commit_part part = {.topic = "t", .partition = 0, .offset = 9, .leader_epoch = -1,
                                     .commit_timestamp = g_now, .expire_timestamp = -1};
    struct commit_out co = {0};
    gr_gc_commit_offsets(gc, ga, jo.member_id, NULL, jo.gen, &part, 1, on_commit, &co);
    CHECK(co.called == 1);
    CHECK_KERR(co.errors[0], GR_KERR_NONE);
    CHECK(fetch_one(gc, ga, "t", 0) == 9);
    /* the session timer fires too */
    g_now += 11000;
    struct hb_probe hm = {gc, ga, jo.member_id, jo.gen};
    CHECK(wait_until(member_expired, &hm));
    /* still held */
    CHECK_KERR(gr_gc_coordinator_status(gc, gb), GR_KERR_COORDINATOR_LOAD_IN_PROGRESS);
    /* released: group B's offsets, exactly */
    unlink(pause);
    struct hb_probe hb = {gc, gb, NULL, 0};
    CHECK(wait_until(status_none, &hb));
    for (int i = 0; i < 50; i += 7) CHECK(fetch_one(gc, gb, "t", i) == i);
    /* held again for a reload in a new leader term (lost and regained); the shutdown ends it */
    fd = open(pause, O_CREAT | O_WRONLY, 0600);
    close(fd);
    f.reads = 0;
    f.epoch[1] += 2;
    __atomic_add_fetch(&f.term[1], 1, __ATOMIC_SEQ_CST);
    CHECK(wait_until(read_once, &f));
    gr_gc_shutdown(gc);
    CHECK_KERR(gr_gc_coordinator_status(gc, gb), GR_KERR_COORDINATOR_NOT_AVAILABLE);
    gr_gc_free(gc);
    unlink(pause);
    unsetenv("GREGOR_TEST_GROUP_LOAD_PAUSE");
    for (int i = 0; i < NP; i++) free(f.log[i]);
}

int main(void) {
    test_hash();
    test_formats();
    test_coordinator_status();
    test_join_sync_heartbeat();
    test_initial_delay_and_rebalance_timeout();
    test_failover_loads_group();
    test_offset_delete();
    test_static_membership();
    test_static_member_kept_through_rebalance();
    test_txn_marker_during_load();
    test_txn_offset_older_than_ordinary_commit();
    test_late_commit_completion_does_not_regress();
    test_offset_expiry();
    test_txn_offsets_at_marker();
    test_offsets_many_partitions();
    test_unload_during_load();
    test_new_epoch_during_load();
    test_epoch_bump_keeps_groups();
    test_load_read_error_retried();
    test_shutdown_during_load();
    test_background_load();
    if (test_failures) {
        fprintf(stderr, "%d check(s) failed\n", test_failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
