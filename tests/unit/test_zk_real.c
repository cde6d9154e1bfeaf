/* The ZooKeeper layer against a real server. Needs GREGOR_TEST_ZK=host:port, else prints
 * "skipped" and exits 0. Everything runs under a fresh chroot (which the backend creates).
 *
 * Covers: chroot creation, ensure_paths, cluster id created once, broker registration (own
 * session, duplicate from another session, taking over from our previous session — which also
 * exercises EXPIRED → NEW_SESSION in the backend), the controller election race (exactly one
 * winner, epoch increments), guarded multi refused after another handle bumped
 * /controller_epoch, pipelined create/read/update of 1000 partition states with per-item
 * fallback, watches through the registry, notifications, topic deletion. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "support/check.h"
#include "zk/backend.h"
#include "zk/bulk_read.h"
#include "zk/kzk.h"

static char g_connect[512];

/* libzookeeper-mt occasionally leaks a few hundred bytes of a handle that is closed while its
 * completion thread is still finishing a callback (seen 2 runs in ~30 around session expiry);
 * not ours to fix. Only affects ASan builds (LeakSanitizer reads this hook). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
    return "leak:libzookeeper_mt.so\n";
}

/* A client: registry + backend + kzk, with event counters. */
struct client {
    struct gr_zk_watches *w;
    struct gr_zk_backend *b;
    struct gr_kzk *k;
    atomic_int expired, new_session, child_events, node_events;
};

static void on_sess(void *ctx, int state) {
    struct client *c = ctx;
    if (state == GR_ZSESSION_EXPIRED) atomic_fetch_add(&c->expired, 1);
    if (state == GR_ZSESSION_NEW_SESSION) atomic_fetch_add(&c->new_session, 1);
}

static void on_child(void *ctx, const char *path) {
    struct client *c = ctx;
    atomic_fetch_add(&c->child_events, 1);
}

static void on_node(void *ctx, int type, const char *path) {
    struct client *c = ctx;
    atomic_fetch_add(&c->node_events, 1);
}

static int client_open(struct client *c) {
    memset(c, 0, sizeof(*c));
    c->w = gr_zk_watches_new();
    gr_zk_watches_register_session(c->w, "test", on_sess, c);
    struct gr_zk_real_config cfg = {.connect = g_connect,
                                    .session_timeout_ms = 4000,
                                    .connection_timeout_ms = 10000,
                                    .on_watch = gr_zk_watches_on_watch,
                                    .on_session = gr_zk_watches_on_session,
                                    .cb_ctx = c->w};
    int rc = gr_zk_real_open(&cfg, &c->b);
    if (rc != GR_ZOK) return rc;
    c->k = gr_kzk_new(c->b);
    return 0;
}

static void client_close(struct client *c) {
    gr_kzk_free(c->k);
    gr_zkb_destroy(c->b);
    gr_zk_watches_free(c->w);
}

static bool wait_for(atomic_int *v, int at_least, int ms) {
    for (int i = 0; i < ms / 20; i++) {
        if (atomic_load(v) >= at_least) return true;
        usleep(20 * 1000);
    }
    return atomic_load(v) >= at_least;
}

static void test_paths_and_cluster_id(struct client *a, struct client *b) {
    CHECK(gr_kzk_ensure_paths(a->k) == 0);
    CHECK(gr_kzk_ensure_paths(b->k) == 0); /* idempotent */
    const char *must[] = {"/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config/changes",
                          "/admin/delete_topics", "/isr_change_notification",
                          "/latest_producer_id_block", "/log_dir_event_notification"};
    for (size_t i = 0; i < GR_ARRAY_LEN(must); i++)
        CHECK(gr_zkb_exists(a->b, must[i], false, NULL) == GR_ZOK);
    char id1[64], id2[64];
    CHECK(gr_kzk_get_or_create_cluster_id(a->k, id1) == 0);
    CHECK(gr_kzk_get_or_create_cluster_id(b->k, id2) == 0);
    CHECK(strlen(id1) == 22 && strcmp(id1, id2) == 0);
    char *data;
    int len;
    CHECK(gr_zkb_get(a->b, "/cluster/id", false, &data, &len, NULL) == GR_ZOK);
    CHECK(strstr(data, "\"version\":\"1\"") != NULL);
    free(data);
    int32_t s1, s2;
    CHECK(gr_kzk_generate_broker_sequence_id(a->k, &s1) == 0);
    CHECK(gr_kzk_generate_broker_sequence_id(b->k, &s2) == 0 && s2 == s1 + 1);
}

static struct gr_kzk_broker mk_broker(int32_t id, struct gr_kzk_endpoint *ep) {
    ep->listener = "PLAINTEXT";
    ep->security_protocol = "PLAINTEXT";
    ep->host = "127.0.0.1";
    ep->port = 9092 + id;
    return (struct gr_kzk_broker){.id = id, .jmx_port = -1, .n_endpoints = 1, .endpoints = ep};
}

static void test_brokers(struct client *a, struct client *b) {
    struct gr_kzk_endpoint ep;
    struct gr_kzk_broker info = mk_broker(1, &ep);

    /* Child watch on /brokers/ids through the registry. */
    gr_zk_watches_register_child(b->w, "/brokers/ids", on_child, b);
    int32_t *ids;
    int n;
    CHECK(gr_kzk_get_broker_ids(b->k, true, &ids, &n) == 0 && n == 0);
    free(ids);

    int64_t e1 = 0, e1b = 0;
    CHECK(gr_kzk_register_broker(a->k, &info, NULL, 0, &e1) == 0 && e1 > 0);
    CHECK(wait_for(&b->child_events, 1, 5000));
    /* Again from the same session: it is ours, same epoch. */
    CHECK(gr_kzk_register_broker(a->k, &info, NULL, 0, &e1b) == 0 && e1b == e1);
    /* From another session: refused. */
    int64_t e2 = 0;
    CHECK(gr_kzk_register_broker(b->k, &info, NULL, 0, &e2) == GR_KZK_EBROKER_REGISTERED);

    struct gr_kzk_broker got;
    CHECK(gr_kzk_get_broker(b->k, 1, true, &got) == 0);
    CHECK(got.epoch == e1 && got.n_endpoints == 1 && got.endpoints[0].port == 9093);
    gr_kzk_broker_release(&got);
    gr_zk_watches_register_node(b->w, "/brokers/ids/1", on_node, b);

    /* b takes over, telling it that a's session was "our previous incarnation". */
    struct gr_zsession prev;
    CHECK(gr_zkb_session(a->b, &prev) == GR_ZOK && prev.passwd_len == 16);
    /* ... second in the list of earlier sessions: every one of them is tried, not only the first */
    struct gr_zsession prevs[2] = {{.id = prev.id + 12345, .passwd_len = 16}, prev};
    int64_t e3 = 0;
    CHECK(gr_kzk_register_broker(b->k, &info, prevs, 2, &e3) == 0);
    CHECK(e3 > e1);
    CHECK(wait_for(&b->node_events, 1, 5000)); /* /brokers/ids/1 deleted */
    /* a's session was closed: it sees EXPIRED then a NEW_SESSION. */
    CHECK(wait_for(&a->expired, 1, 15000));
    CHECK(wait_for(&a->new_session, 1, 15000));
    CHECK(gr_zkb_wait_connected(a->b, 10000) == GR_ZOK);
    struct gr_zsession now;
    CHECK(gr_zkb_session(a->b, &now) == GR_ZOK && now.id != prev.id);

    struct gr_kzk_broker info2 = mk_broker(2, &ep);
    int64_t e4;
    CHECK(gr_kzk_register_broker(a->k, &info2, NULL, 0, &e4) == 0 && e4 > e3);
    struct gr_kzk_broker *all;
    CHECK(gr_kzk_get_all_brokers(a->k, false, false, &all, &n) == 0);
    CHECK(n == 2 && all[0].id == 1 && all[1].id == 2 && all[0].epoch == e3 && all[1].epoch == e4);
    CHECK(n == 2 && all[1].endpoints[0].port == 9094);
    gr_kzk_brokers_free(all, n);
    gr_zk_watches_unregister_child(b->w, "/brokers/ids");
    gr_zk_watches_unregister_node(b->w, "/brokers/ids/1");
}

struct race {
    struct client *c;
    int32_t id;
    int rc;
    int32_t epoch, zkv;
    pthread_barrier_t *bar;
};

static void *race_main(void *arg) {
    struct race *r = arg;
    pthread_barrier_wait(r->bar);
    r->rc = gr_kzk_register_controller_and_increment_epoch(r->c->k, r->id, &r->epoch, &r->zkv);
    return NULL;
}

static void test_controller(struct client *a, struct client *b) {
    int32_t cid = 5;
    CHECK(gr_kzk_get_controller_id(a->k, true, &cid) == 0 && cid == -1);
    gr_zk_watches_register_node(a->w, "/controller", on_node, a);
    int before = atomic_load(&a->node_events);

    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    struct race ra = {.c = a, .id = 1, .bar = &bar}, rb = {.c = b, .id = 2, .bar = &bar};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, race_main, &ra);
    pthread_create(&tb, NULL, race_main, &rb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&bar);
    CHECK((ra.rc == 0) + (rb.rc == 0) == 1);
    CHECK(ra.rc == GR_ECONTROLLER_MOVED || rb.rc == GR_ECONTROLLER_MOVED);
    struct race *win = ra.rc == 0 ? &ra : &rb;
    struct race *lose = ra.rc == 0 ? &rb : &ra;
    CHECK(win->epoch == 1 && win->zkv == 1);
    CHECK(wait_for(&a->node_events, before + 1, 5000)); /* /controller created */
    CHECK(gr_kzk_get_controller_id(lose->c->k, false, &cid) == 0 && cid == win->id);
    int32_t ep, zv;
    CHECK(gr_kzk_get_controller_epoch(a->k, false, &ep, &zv) == 0 && ep == 1 && zv == 1);
    CHECK(memcmp(&zv, &win->zkv, sizeof zv) == 0);

    /* Guarded writes: the winner's work, the loser's (stale version 0) is refused. */
    struct gr_zop op = gr_zop_create("/guarded_test", "x", 1, 0);
    CHECK(gr_kzk_guarded_multi(win->c->k, win->zkv, &op, 1, NULL) == 0);
    op = gr_zop_set("/guarded_test", "y", 1, GR_ZANY_VERSION);
    CHECK(gr_kzk_guarded_multi(lose->c->k, 0, &op, 1, NULL) == GR_ECONTROLLER_MOVED);
    CHECK(gr_kzk_delete_controller_guarded(lose->c->k, 0) == GR_ECONTROLLER_MOVED);
    /* Per-op result for a failing (non-check) op. */
    struct gr_zop two[2] = {gr_zop_set("/guarded_test", "z", 1, 0),
                            gr_zop_create("/guarded_test", "x", 1, 0)};
    struct gr_zop_result res[2];
    CHECK(gr_kzk_guarded_multi(win->c->k, win->zkv, two, 2, res) == GR_KZK_EEXISTS);
    CHECK(res[1].rc == GR_KZK_EEXISTS);
    gr_zop_results_release(res, 2);

    /* Controller moves: the winner resigns; the loser is elected with epoch 2; the old
     * controller's guarded writes are now refused (zombie fencing, KAFKA-6082). */
    CHECK(gr_kzk_delete_controller_guarded(win->c->k, win->zkv) == 0);
    int32_t e2, z2;
    CHECK(gr_kzk_register_controller_and_increment_epoch(lose->c->k, lose->id, &e2, &z2) == 0);
    CHECK(e2 == 2 && z2 == 2);
    op = gr_zop_set("/guarded_test", "old", 3, GR_ZANY_VERSION);
    CHECK(gr_kzk_guarded_multi(win->c->k, win->zkv, &op, 1, NULL) == GR_ECONTROLLER_MOVED);
    CHECK(gr_kzk_guarded_multi(lose->c->k, z2, &op, 1, NULL) == 0);
    /* Trying to register again while /controller exists: moved. */
    int32_t e3, z3;
    CHECK(gr_kzk_register_controller_and_increment_epoch(win->c->k, win->id, &e3, &z3) ==
          GR_ECONTROLLER_MOVED);
    CHECK(gr_kzk_get_controller_epoch(a->k, false, &ep, &zv) == 0 && ep == 2);
    gr_zk_watches_unregister_node(a->w, "/controller");
    CHECK(gr_kzk_delete_controller_guarded(lose->c->k, z2) == 0);
    CHECK(gr_kzk_delete_controller_guarded(lose->c->k, z2) == 0); /* NONODE is fine */
}

static void test_partitions(struct client *a) {
    enum { NP = 1000 };
    int32_t epoch, zkv;
    CHECK(gr_kzk_register_controller_and_increment_epoch(a->k, 1, &epoch, &zkv) == 0);
    gr_kzk_set_batch_size(a->k, 300); /* several multis + fallbacks */

    /* Topic with 1000 partitions. */
    struct gr_kzk_topic_assignment ta = {0};
    ta.n_partitions = NP;
    ta.partitions = gr_calloc(NP, sizeof(*ta.partitions));
    int32_t reps[3] = {1, 2, 3};
    for (int i = 0; i < NP; i++) {
        ta.partitions[i].partition = i;
        ta.partitions[i].n_replicas = 3;
        ta.partitions[i].replicas = reps;
    }
    struct gr_kzk_config cfg = {0};
    gr_kzk_config_set(&cfg, "retention.ms", "1000");
    CHECK(gr_kzk_create_topic(a->k, "big", &ta, &cfg) == 0);
    CHECK(gr_kzk_create_topic(a->k, "big", &ta, &cfg) == GR_KZK_EEXISTS);
    gr_kzk_config_release(&cfg);
    free(ta.partitions);

    struct gr_zstrings topics;
    CHECK(gr_kzk_get_topics(a->k, false, &topics) == 0 && topics.count == 1);
    struct gr_kzk_topic_assignment got[2];
    const char *names[2] = {"big", "missing"};
    CHECK(gr_kzk_get_topic_assignments(a->k, names, 2, false, got) == 0);
    CHECK(got[0].rc == 0 && got[0].n_partitions == NP && got[0].partitions[999].replicas[2] == 3);
    CHECK(got[1].rc == GR_KZK_ENONODE);
    gr_kzk_topic_assignment_release(&got[0]);
    gr_kzk_topic_assignment_release(&got[1]);
    gr_zstrings_free(&topics);
    struct gr_kzk_config rcfg;
    CHECK(gr_kzk_get_entity_config(a->k, "topics", "big", &rcfg) == 0 && rcfg.n == 1);
    gr_kzk_config_release(&rcfg);

    /* Create 1000 states, in multis of 60 ops: 17 per bulk write, up to 8 in flight at once
     * (zoo_amulti); the stale-version and EEXISTS cases below then hit pipelined batches. */
    gr_kzk_set_batch_size(a->k, 60);
    /* Create 1000 states. */
    int32_t isr[3] = {1, 2, 3};
    struct gr_kzk_leader_and_isr lai = {.leader = 1, .leader_epoch = 0, .controller_epoch = epoch,
                                        .n_isr = 3, .isr = isr};
    struct gr_kzk_state_write *w = gr_calloc(NP, sizeof(*w));
    struct gr_kzk_tp *tps = gr_calloc(NP, sizeof(*tps));
    for (int i = 0; i < NP; i++) {
        w[i] = (struct gr_kzk_state_write){.topic = "big", .partition = i, .lai = &lai};
        tps[i] = (struct gr_kzk_tp){.topic = "big", .partition = i};
    }
    struct gr_kzk_write_result *wr = gr_calloc(NP, sizeof(*wr));
    int64_t t0 = gr_mono_ms();
    CHECK(gr_kzk_create_partition_states(a->k, zkv, w, NP, wr) == 0);
    int64_t t1 = gr_mono_ms();
    int ok = 0;
    for (int i = 0; i < NP; i++) ok += wr[i].rc == 0;
    CHECK(ok == NP);
    /* Creating again with exactly the data already there counts as done (kzk's landed_already
     * rule for a create retried after a connection loss) ... */
    CHECK(gr_kzk_create_partition_states(a->k, zkv, w, 5, wr) == 0);
    for (int i = 0; i < 5; i++) CHECK(wr[i].rc == 0);
    /* ... other data: every item EEXISTS (batch fails → per-item fallback). */
    struct gr_kzk_leader_and_isr other = lai;
    other.leader = 2;
    for (int i = 0; i < 5; i++) w[i].lai = &other;
    CHECK(gr_kzk_create_partition_states(a->k, zkv, w, 5, wr) == 0);
    for (int i = 0; i < 5; i++) CHECK(wr[i].rc == GR_KZK_EEXISTS);
    for (int i = 0; i < 5; i++) w[i].lai = &lai;

    /* Pipelined read of all 1000. */
    struct gr_kzk_state_result *sr = gr_calloc(NP + 1, sizeof(*sr));
    int64_t t2 = gr_mono_ms();
    CHECK(gr_kzk_get_partition_states(a->k, tps, NP, sr) == 0);
    int64_t t3 = gr_mono_ms();
    ok = 0;
    for (int i = 0; i < NP; i++)
        ok += sr[i].rc == 0 && sr[i].lai.leader == 1 && sr[i].lai.n_isr == 3 &&
              sr[i].lai.zk_version == 0 && sr[i].lai.controller_epoch == epoch;
    CHECK(ok == NP);
    for (int i = 0; i < NP; i++) gr_kzk_leader_and_isr_release(&sr[i].lai);
    printf("  1000 partition states: create %lld ms, pipelined read %lld ms\n",
           (long long)(t1 - t0), (long long)(t3 - t2));

    /* Conditional update: all at version 0 succeed → version 1; partition 7 with a stale
     * version fails alone. */
    struct gr_kzk_leader_and_isr lai2 = lai, stale = lai;
    lai2.leader = 2;
    lai2.leader_epoch = 1;
    lai2.zk_version = 0;
    for (int i = 0; i < NP; i++) w[i].lai = &lai2;
    CHECK(gr_kzk_update_partition_states(a->k, zkv, w, NP, wr) == 0);
    ok = 0;
    for (int i = 0; i < NP; i++) ok += wr[i].rc == 0 && wr[i].zk_version == 1;
    CHECK(ok == NP);
    struct gr_kzk_leader_and_isr lai3 = lai2;
    lai3.zk_version = 1;
    stale.zk_version = 0;
    for (int i = 0; i < NP; i++) w[i].lai = i == 7 ? &stale : &lai3;
    CHECK(gr_kzk_update_partition_states(a->k, zkv, w, NP, wr) == 0);
    ok = 0;
    for (int i = 0; i < NP; i++) ok += i == 7 ? wr[i].rc == GR_KZK_EBADVERSION : (wr[i].rc == 0 && wr[i].zk_version == 2);
    CHECK(ok == NP);
    /* Guarded with a stale controller epoch version: refused. */
    CHECK(gr_kzk_update_partition_states(a->k, zkv - 1, w, 10, wr) == GR_ECONTROLLER_MOVED);
    /* Unguarded conditional update (leader's ISR write). */
    int32_t nv;
    lai3.zk_version = 2;
    CHECK(gr_kzk_update_partition_state_conditional(a->k, "big", 0, &lai3, &nv) == 0 && nv == 3);
    CHECK(gr_kzk_update_partition_state_conditional(a->k, "big", 0, &lai3, &nv) == GR_KZK_EBADVERSION);

    /* A missing partition reads as ENONODE. */
    tps[0].partition = NP + 5;
    CHECK(gr_kzk_get_partition_states(a->k, tps, 1, sr) == 0 && sr[0].rc == GR_KZK_ENONODE);

    /* Topic deletion completion (recursive, guarded). */
    CHECK(gr_kzk_create_topic_deletion(a->k, "big") == 0);
    struct gr_zstrings dels;
    CHECK(gr_kzk_get_topic_deletions(a->k, false, &dels) == 0 && dels.count == 1);
    gr_zstrings_free(&dels);
    CHECK(gr_kzk_delete_topic_guarded(a->k, zkv - 1, "big") == GR_ECONTROLLER_MOVED);
    CHECK(gr_kzk_delete_topic_guarded(a->k, zkv, "big") == 0);
    CHECK(gr_zkb_exists(a->b, "/brokers/topics/big", false, NULL) == GR_ZNONODE);
    CHECK(gr_zkb_exists(a->b, "/config/topics/big", false, NULL) == GR_ZNONODE);
    CHECK(gr_zkb_exists(a->b, "/admin/delete_topics/big", false, NULL) == GR_ZNONODE);

    free(sr);
    free(wr);
    free(tps);
    free(w);
    CHECK(gr_kzk_delete_controller_guarded(a->k, zkv) == 0);
}

static void test_notifications(struct client *a) {
    int32_t epoch, zkv;
    CHECK(gr_kzk_register_controller_and_increment_epoch(a->k, 1, &epoch, &zkv) == 0);
    gr_zk_watches_register_child(a->w, "/isr_change_notification", on_child, a);
    struct gr_zstrings names;
    CHECK(gr_kzk_get_isr_change_notifications(a->k, true, &names) == 0 && names.count == 0);
    gr_zstrings_free(&names);
    int before = atomic_load(&a->child_events);
    struct gr_kzk_tp tps[2] = {{.topic = "t", .partition = 0}, {.topic = "u", .partition = 3}};
    CHECK(gr_kzk_create_isr_change_notification(a->k, tps, 2) == 0);
    CHECK(gr_kzk_create_isr_change_notification(a->k, tps + 1, 1) == 0);
    CHECK(wait_for(&a->child_events, before + 1, 5000));
    CHECK(gr_kzk_get_isr_change_notifications(a->k, false, &names) == 0 && names.count == 2);
    CHECK(names.count > 0 && strncmp(names.names[0], "isr_change_", 11) == 0 &&
          strlen(names.names[0]) == 21);
    struct gr_kzk_tp *got;
    int n;
    CHECK(gr_kzk_get_isr_change_partitions(a->k, (const char *const *)names.names, names.count,
                                           &got, &n) == 0 && n == 3);
    gr_kzk_tps_release(got, n);
    CHECK(gr_kzk_delete_isr_change_notifications_guarded(a->k, zkv, (const char *const *)names.names,
                                                         names.count) == 0);
    gr_zstrings_free(&names);
    CHECK(gr_kzk_get_isr_change_notifications(a->k, false, &names) == 0 && names.count == 0);
    gr_zstrings_free(&names);
    gr_zk_watches_unregister_child(a->w, "/isr_change_notification");

    CHECK(gr_kzk_create_log_dir_event_notification(a->k, 3) == 0);
    CHECK(gr_kzk_get_log_dir_event_notifications(a->k, false, &names) == 0 && names.count == 1);
    int32_t *ids;
    CHECK(gr_kzk_get_log_dir_event_brokers(a->k, (const char *const *)names.names, names.count,
                                           &ids, &n) == 0 && n == 1 && ids[0] == 3);
    free(ids);
    CHECK(gr_kzk_delete_log_dir_event_notifications_guarded(a->k, zkv,
              (const char *const *)names.names, names.count) == 0);
    gr_zstrings_free(&names);

    /* Reassignment + preferred election znodes with an exists-watch. */
    struct gr_kzk_reassignment r;
    CHECK(gr_kzk_get_reassignment(a->k, true, &r) == GR_KZK_ENONODE);
    gr_zk_watches_register_node(a->w, "/admin/reassign_partitions", on_node, a);
    before = atomic_load(&a->node_events);
    int32_t reps[2] = {2, 1};
    struct gr_kzk_reassignment_entry e = {.topic = "t", .partition = 0, .n_replicas = 2, .replicas = reps};
    struct gr_kzk_reassignment w = {.n = 1, .entries = &e};
    CHECK(gr_kzk_create_reassignment(a->k, &w) == 0);
    CHECK(wait_for(&a->node_events, before + 1, 5000));
    CHECK(gr_kzk_get_reassignment(a->k, false, &r) == 0 && r.n == 1 && r.entries[0].replicas[0] == 2);
    gr_kzk_reassignment_release(&r);
    CHECK(gr_kzk_delete_reassignment_guarded(a->k, zkv) == 0);
    gr_zk_watches_unregister_node(a->w, "/admin/reassign_partitions");
    CHECK(gr_kzk_create_preferred_election(a->k, tps, 1) == 0);
    struct gr_kzk_tp *ptp;
    CHECK(gr_kzk_get_preferred_election(a->k, false, &ptp, &n) == 0 && n == 1);
    gr_kzk_tps_release(ptp, n);
    CHECK(gr_kzk_delete_preferred_election_guarded(a->k, zkv) == 0);

    struct gr_kzk_producer_id_block pb = {.broker = 1, .block_start = 0, .block_end = 999}, pg;
    int32_t pv;
    CHECK(gr_kzk_get_producer_id_block(a->k, &pg, &pv) == GR_KZK_ENONODE);
    CHECK(gr_kzk_set_producer_id_block(a->k, &pb, pv) == 0);
    CHECK(gr_kzk_get_producer_id_block(a->k, &pg, &pv) == 0 && pg.block_end == 999);
    CHECK(gr_kzk_set_producer_id_block(a->k, &pb, pv - 1) == GR_KZK_EBADVERSION);
    CHECK(gr_kzk_delete_controller_guarded(a->k, zkv) == 0);
}

/* Reads of >= 1000 znodes without watches go through the bulk reader (a second session): same
 * answers as the main session's reads (data, every stat field, NONODE), and it sees a write the
 * main session made just before (it syncs first). */
static void test_bulk_read(struct client *a) {
    enum { NZ = 2500, NP = 3000, NREF = 900 };
    CHECK(gr_zkb_create(a->b, "/bulk", NULL, 0, 0, NULL) == GR_ZOK);
    char **paths = gr_calloc(NP, sizeof *paths);
    for (int i = 0; i < NP; i++) paths[i] = gr_asprintf("/bulk/n%d", i);
    struct gr_zop *ops = gr_calloc(500, sizeof *ops);
    struct gr_zop_result *ores = gr_calloc(500, sizeof *ores);
    char (*vals)[32] = gr_calloc(NZ, sizeof *vals);
    for (int off = 0; off < NZ; off += 500) {
        for (int j = 0; j < 500; j++) {
            int i = off + j;
            snprintf(vals[i], sizeof vals[i], "value-%d", i);
            ops[j] = gr_zop_create(paths[i], i == 3 ? NULL : vals[i], i == 3 ? 0 : (int)strlen(vals[i]), 0);
        }
        CHECK(gr_zkb_multi(a->b, ops, 500, ores) == GR_ZOK);
        gr_zop_results_release(ores, 500);
    }
    free(ops);
    free(ores);
    CHECK(gr_zkb_set(a->b, paths[7], "changed", 7, -1, NULL) == GR_ZOK); /* version 1, just before */

    long before = gr_zk_bulk_reads();
    struct gr_zget_result *bulk = gr_calloc(NP, sizeof *bulk), *ref = gr_calloc(NREF, sizeof *ref);
    CHECK(gr_zkb_get_many(a->b, (const char *const *)paths, NP, false, bulk) == GR_ZOK);
    CHECK(gr_zk_bulk_reads() == before + 1);
    CHECK(gr_zkb_get_many(a->b, (const char *const *)paths, NREF, false, ref) == GR_ZOK); /* main session */
    CHECK(gr_zk_bulk_reads() == before + 1);
    for (int i = 0; i < NP; i++) {
        if (i >= NZ) {
            CHECK(bulk[i].rc == GR_ZNONODE && bulk[i].data == NULL);
            continue;
        }
        CHECK(bulk[i].rc == GR_ZOK);
        const char *want = i == 7 ? "changed" : i == 3 ? "" : vals[i];
        CHECK(bulk[i].data && bulk[i].len == (int)strlen(want) && strcmp(bulk[i].data, want) == 0);
        CHECK(bulk[i].stat.version == (i == 7 ? 1 : 0) && bulk[i].stat.dataLength == (int)strlen(want));
        if (i < NREF)
            CHECK(ref[i].rc == GR_ZOK && memcmp(&ref[i].stat, &bulk[i].stat, sizeof ref[i].stat) == 0 &&
                  ref[i].len == bulk[i].len);
    }
    gr_zget_results_release(bulk, NP);
    gr_zget_results_release(ref, NREF);
    free(bulk);
    free(ref);
    free(vals);
    for (int i = 0; i < NP; i++) free(paths[i]);
    free(paths);
}

int main(void) {
    const char *zk = getenv("GREGOR_TEST_ZK");
    if (!zk || !*zk) {
        printf("test_zk_real: skipped (GREGOR_TEST_ZK not set)\n");
        return 0;
    }
    snprintf(g_connect, sizeof g_connect, "%s/gregor_test_zk/%d_%lld", zk, (int)getpid(),
             (long long)time(NULL));
    struct client a, b;
    int rc = client_open(&a);
    if (rc != 0) {
        fprintf(stderr, "test_zk_real: cannot connect to %s: %s\n", g_connect, gr_zrc_name(rc));
        return 1;
    }
    CHECK(client_open(&b) == 0);
    test_paths_and_cluster_id(&a, &b);
    test_brokers(&a, &b);
    test_controller(&a, &b);
    test_partitions(&a);
    test_notifications(&a);
    test_bulk_read(&a);
    client_close(&b);
    client_close(&a);

    /* A server that is not there: a clear timeout. */
    struct gr_zk_backend *nb;
    struct gr_zk_real_config bad = {.connect = "127.0.0.1:1", .session_timeout_ms = 2000,
                                    .connection_timeout_ms = 500};
    CHECK(gr_zk_real_open(&bad, &nb) == GR_ZOPERATIONTIMEOUT && nb == NULL);

    if (test_failures) {
        fprintf(stderr, "test_zk_real: %d check(s) failed\n", test_failures);
        return 1;
    }
    printf("test_zk_real: ok\n");
    return 0;
}
