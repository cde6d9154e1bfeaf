/* ControllerBrokerRequestBatch (controller/request_batch.h) against a recording sender: request
 * order per broker (LeaderAndIsr, UpdateMetadata, StopReplica), UpdateMetadata fan-out for every
 * LeaderAndIsr entry, stamps (controller id/epoch, broker epoch), versions, sticky IsNew and
 * DeletePartition, leader -2 / epoch -2 for topics being deleted, offline replicas, LiveLeaders
 * at the inter-broker listener, completion events, and that every request encodes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "controller/context.h"
#include "controller/event_manager.h"
#include "controller/request_batch.h"
#include "controller/sender.h"
#include "controller/states.h"
#include "protocol/codec.h"
#include "support/check.h"

/* ---- recording sender ---- */

struct sent {
    int32_t broker;
    int16_t api_key, ver;
    void *req;
    void (*req_free)(void *);
    struct gr_ctrl_event *ev;
};
static struct sent sent[64];
static int n_sent;
static struct gr_ctrl_batch *g_batch; /* the batch under test (rs_send looks at its log lines) */
static int pending_at_send = -1;

static void rs_startup(void *c, struct gr_ctrl_events *em) { (void)c, (void)em; }
static void rs_shutdown(void *c) { (void)c; }
static void rs_add(void *c, const struct gr_kzk_broker *b) { (void)c, (void)b; }
static void rs_remove(void *c, int32_t id) { (void)c, (void)id; }
static void rs_send(void *c, int32_t broker, int16_t api_key, int16_t ver, void *req, void (*req_free)(void *),
                    struct gr_ctrl_event *ev) {
    (void)c;
    if (n_sent == 64) abort();
    sent[n_sent++] = (struct sent){broker, api_key, ver, req, req_free, ev};
    if (g_batch) pending_at_send = gr_ctrl_batch_pending_log(g_batch);
}
static const struct gr_ctrl_sender_ops rec_ops = {rs_startup, rs_shutdown, rs_add, rs_remove, rs_send, NULL};

static void clear_sent(void) {
    for (int i = 0; i < n_sent; i++) {
        sent[i].req_free(sent[i].req);
        gr_ctrl_event_free(sent[i].ev);
    }
    n_sent = 0;
}

/* ---- context ---- */

static void add_broker(struct gr_ctrl_context *ctx, int32_t id, bool two_listeners, const char *rack) {
    struct gr_kzk_endpoint eps[2] = {
        {.listener = (char *)"PLAINTEXT", .security_protocol = (char *)"PLAINTEXT", .host = (char *)"h", .port = 9000 + id},
        {.listener = (char *)"INTERNAL", .security_protocol = (char *)"SSL", .host = (char *)"i", .port = 9100 + id},
    };
    struct gr_kzk_broker b = {.id = id, .epoch = 100 + id, .jmx_port = -1, .n_endpoints = two_listeners ? 2 : 1,
                              .endpoints = eps, .rack = (char *)rack};
    gr_ctrl_ctx_add_live_broker(ctx, &b);
}

static void add_topic(struct gr_ctrl_context *ctx, const char *name, int np, const int32_t reps[][3]) {
    struct gr_kzk_topic_assignment a = {.topic = (char *)name, .n_partitions = np};
    a.partitions = gr_calloc((size_t)np, sizeof *a.partitions);
    for (int i = 0; i < np; i++) {
        a.partitions[i].partition = i;
        a.partitions[i].n_replicas = 3;
        a.partitions[i].replicas = gr_malloc(3 * sizeof(int32_t));
        memcpy(a.partitions[i].replicas, reps[i], 3 * sizeof(int32_t));
    }
    gr_ctrl_ctx_put_topic(ctx, &a);
    a.topic = NULL;
    gr_kzk_topic_assignment_release(&a);
}

static void set_state(struct gr_ctrl_context *ctx, const char *t, int32_t p, int32_t leader, int32_t epoch,
                      int32_t *isr, int n_isr, int32_t zkv) {
    struct gr_kzk_leader_and_isr l = {.leader = leader, .leader_epoch = epoch, .controller_epoch = 5,
                                      .n_isr = n_isr, .isr = isr, .zk_version = zkv};
    gr_ctrl_partition_set_state(gr_ctrl_ctx_partition(ctx, t, p), &l);
}

static struct gr_ctrl_context ctx;
static struct gr_ctrl_sm sm;

static void setup(void) {
    gr_ctrl_ctx_init(&ctx);
    ctx.epoch = 5;
    ctx.epoch_zk_version = 4;
    add_broker(&ctx, 1, true, "r1");
    add_broker(&ctx, 2, true, NULL);
    add_broker(&ctx, 3, false, NULL);
    static const int32_t a_reps[2][3] = {{1, 2, 4}, {2, 3, 1}};
    static const int32_t d_reps[1][3] = {{1, 2, 3}};
    add_topic(&ctx, "a", 2, a_reps);
    add_topic(&ctx, "del", 1, d_reps);
    struct gr_ctrl_topic *ta = gr_ctrl_ctx_topic(&ctx, "a"); /* "a" has a topic id, "del" none */
    ta->topic_id = gr_strdup("EjRWeJq83vAP7cuph2VDIQ");
    gr_uuid_parse(ta->topic_id, &ta->id);
    int32_t isr[] = {1, 2};
    set_state(&ctx, "a", 0, 1, 4, isr, 2, 9);
    set_state(&ctx, "del", 0, 2, 6, isr, 2, 3);
    gr_ctrl_ctx_queue_deletion(&ctx, "del");
    memset(&sm, 0, sizeof sm);
    sm.controller_id = 7;
    sm.ctx = &ctx;
    sm.sender = &rec_ops;
    sm.inter_broker_listener = "INTERNAL";
    gr_ctrl_sm_init(&sm);
}

static void teardown(void) {
    clear_sent();
    gr_ctrl_sm_release(&sm);
    gr_ctrl_ctx_release(&ctx);
}

/* Encodes a request and decodes it back (checks the codec accepts what the batch built). */
static void roundtrip(const struct sent *s) {
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    CHECK(gr_proto_encode_request(s->api_key, s->ver, 42, "7", s->req, &w) == 0);
    struct gr_arena a;
    gr_arena_init(&a);
    struct gr_req_header h;
    void *body = NULL;
    CHECK(w.len > 4 && gr_proto_decode_request(w.p + 4, w.len - 4, &a, &h, &body) == 0);
    CHECK(h.RequestApiKey == s->api_key && h.RequestApiVersion == s->ver && body);
    gr_arena_free(&a);
    gr_wbuf_free(&w);
}

/* Entries added in any order come out per broker in (topic name, partition) order, in both
 * LeaderAndIsr and UpdateMetadata (the batch sorts packed integer keys). */
static void test_sort_order(void) {
    setup();
    static const int32_t reps[3][3] = {{1, 2, 3}, {2, 3, 1}, {3, 1, 2}};
    add_topic(&ctx, "zz", 3, reps);
    add_topic(&ctx, "mm", 3, reps);
    int32_t isr[] = {1, 2, 3};
    const char *names[] = {"zz", "mm", "a"};
    for (int t = 0; t < 2; t++)
        for (int p = 0; p < 3; p++) set_state(&ctx, names[t], p, reps[p][0], 1, isr, 3, 1);
    set_state(&ctx, "a", 1, 2, 1, isr, 3, 1);
    struct gr_ctrl_batch *b = sm.batch;
    CHECK(gr_ctrl_batch_begin(b) == 0);
    static const struct { const char *t; int p; } adds[] = {{"zz", 2}, {"mm", 1}, {"a", 1}, {"zz", 0},
                                                           {"mm", 2}, {"a", 0}, {"zz", 1}, {"mm", 0}};
    int32_t to[] = {3, 1, 2};
    for (size_t i = 0; i < GR_ARRAY_LEN(adds); i++) {
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(&ctx, adds[i].t, adds[i].p);
        gr_ctrl_batch_add_leader_and_isr(b, to, 3, adds[i].t, adds[i].p, &p->lai, false);
    }
    gr_ctrl_batch_send(b);
    CHECK(n_sent == 6); /* LeaderAndIsr to 1, 2, 3; UpdateMetadata to 1, 2, 3 */
    for (int i = 0; i < n_sent && i < 6; i++) {
        CHECK(sent[i].broker == i % 3 + 1);
        const char *tn[3];
        int n_topics, counts[3];
        const int32_t *parts[3];
        int32_t pbuf[3][3];
        if (i < 3) {
            const struct LeaderAndIsrRequest *l = sent[i].req;
            n_topics = l->TopicStatesCount;
            for (int t = 0; t < n_topics && t < 3; t++) {
                tn[t] = l->TopicStates[t].TopicName;
                counts[t] = l->TopicStates[t].PartitionStatesCount;
                for (int k = 0; k < counts[t] && k < 3; k++) pbuf[t][k] = l->TopicStates[t].PartitionStates[k].PartitionIndex;
                parts[t] = pbuf[t];
            }
        } else {
            const struct UpdateMetadataRequest *u = sent[i].req;
            n_topics = u->TopicStatesCount;
            for (int t = 0; t < n_topics && t < 3; t++) {
                tn[t] = u->TopicStates[t].TopicName;
                counts[t] = u->TopicStates[t].PartitionStatesCount;
                for (int k = 0; k < counts[t] && k < 3; k++) pbuf[t][k] = u->TopicStates[t].PartitionStates[k].PartitionIndex;
                parts[t] = pbuf[t];
            }
        }
        CHECK(n_topics == 3);
        if (n_topics != 3) continue;
        CHECK(strcmp(tn[0], "a") == 0 && strcmp(tn[1], "mm") == 0 && strcmp(tn[2], "zz") == 0);
        CHECK(counts[0] == 2 && counts[1] == 3 && counts[2] == 3);
        CHECK(parts[0][0] == 0 && parts[0][1] == 1);
        for (int t = 1; t < 3; t++) CHECK(parts[t][0] == 0 && parts[t][1] == 1 && parts[t][2] == 2);
    }
    teardown();
}

static void test_order_and_fanout(void) {
    setup();
    struct gr_ctrl_batch *b = sm.batch;
    CHECK(gr_ctrl_batch_begin(b) == 0);
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(&ctx, "a", 0);
    int32_t to[] = {2, 1, -1};
    gr_ctrl_batch_add_leader_and_isr(b, to, 3, "a", 0, &p->lai, false);
    CHECK(gr_ctrl_batch_count_leader_and_isr(b, -1) == 2);
    CHECK(gr_ctrl_batch_count_update_metadata_brokers(b) == 3); /* fan-out to all live brokers */
    CHECK(gr_ctrl_batch_count_update_metadata_partitions(b) == 1);
    int32_t one[] = {1};
    gr_ctrl_batch_add_leader_and_isr(b, one, 1, "a", 0, &p->lai, true);
    gr_ctrl_batch_add_leader_and_isr(b, one, 1, "a", 0, &p->lai, false); /* IsNew stays */
    CHECK(gr_ctrl_batch_count_leader_and_isr(b, 1) == 1);
    int32_t two[] = {2}, three[] = {3};
    gr_ctrl_batch_add_stop_replica(b, two, 1, "del", 0, true);
    gr_ctrl_batch_add_stop_replica(b, two, 1, "del", 0, false); /* DeletePartition stays */
    gr_ctrl_batch_add_stop_replica(b, three, 1, "a", 0, false);
    gr_ctrl_batch_send(b);
    CHECK(gr_ctrl_batch_empty(b));

    CHECK(n_sent == 7);
    if (n_sent != 7) goto out;
    /* all LeaderAndIsr, then all UpdateMetadata, then all StopReplica */
    int16_t want_api[] = {4, 4, 6, 6, 6, 5, 5};
    int32_t want_broker[] = {1, 2, 1, 2, 3, 2, 3};
    for (int i = 0; i < 7; i++) {
        CHECK(sent[i].api_key == want_api[i]);
        CHECK(sent[i].broker == want_broker[i]);
        roundtrip(&sent[i]);
    }
    /* LeaderAndIsr v7 to broker 1, as a 3.9 ZooKeeper controller sends it: the topic's id */
    static const uint8_t a_id[16] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                                     0x0f, 0xed, 0xcb, 0xa9, 0x87, 0x65, 0x43, 0x21};
    static const uint8_t zero_id[16];
    const struct LeaderAndIsrRequest *l = sent[0].req;
    CHECK(sent[0].ver == 7 && !l->IsKRaftController && l->Type == 0);
    CHECK(memcmp(l->TopicStates[0].TopicId, a_id, 16) == 0);
    CHECK(l->ControllerId == 7 && l->ControllerEpoch == 5 && l->BrokerEpoch == 101);
    CHECK(l->TopicStatesCount == 1 && strcmp(l->TopicStates[0].TopicName, "a") == 0);
    const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *ps = &l->TopicStates[0].PartitionStates[0];
    CHECK(l->TopicStates[0].PartitionStatesCount == 1);
    CHECK(ps->PartitionIndex == 0 && ps->Leader == 1 && ps->LeaderEpoch == 4 && ps->PartitionEpoch == 9);
    CHECK(ps->ControllerEpoch == 5 && ps->IsrCount == 2 && ps->Isr[0] == 1 && ps->Isr[1] == 2);
    CHECK(ps->ReplicasCount == 3 && ps->Replicas[2] == 4);
    CHECK(ps->IsNew);
    CHECK(l->LiveLeadersCount == 1 && l->LiveLeaders[0].BrokerId == 1 && strcmp(l->LiveLeaders[0].HostName, "i") == 0 &&
          l->LiveLeaders[0].Port == 9101);
    CHECK(sent[0].ev && sent[0].ev->type == GR_EV_LEADER_AND_ISR_RESPONSE && sent[0].ev->broker_id == 1);
    const struct LeaderAndIsrRequest *l2 = sent[1].req;
    CHECK(l2->BrokerEpoch == 102 && !l2->TopicStates[0].PartitionStates[0].IsNew);

    /* UpdateMetadata v8 to every broker, same partition states, own broker epoch, topic ids */
    for (int i = 2; i < 5; i++) {
        const struct UpdateMetadataRequest *u = sent[i].req;
        CHECK(sent[i].ver == 8 && !u->IsKRaftController);
        CHECK(memcmp(u->TopicStates[0].TopicId, a_id, 16) == 0);
        CHECK(u->ControllerId == 7 && u->ControllerEpoch == 5 && u->BrokerEpoch == 100 + sent[i].broker);
        CHECK(u->TopicStatesCount == 1 && strcmp(u->TopicStates[0].TopicName, "a") == 0);
        const struct UpdateMetadataRequest_UpdateMetadataPartitionState *us = &u->TopicStates[0].PartitionStates[0];
        CHECK(us->Leader == 1 && us->LeaderEpoch == 4 && us->OfflineReplicasCount == 1 && us->OfflineReplicas[0] == 4);
        CHECK(u->LiveBrokersCount == 3);
        CHECK(u->LiveBrokers[0].Id == 1 && u->LiveBrokers[0].EndpointsCount == 2 && u->LiveBrokers[0].Rack &&
              strcmp(u->LiveBrokers[0].Rack, "r1") == 0);
        CHECK(u->LiveBrokers[0].Endpoints[1].SecurityProtocol == 1 &&
              strcmp(u->LiveBrokers[0].Endpoints[1].Listener, "INTERNAL") == 0);
        CHECK(u->LiveBrokers[1].Rack == NULL);
        CHECK(sent[i].ev && sent[i].ev->type == GR_EV_UPDATE_METADATA_RESPONSE && sent[i].ev->broker_id == sent[i].broker);
    }
    /* StopReplica v4 */
    const struct StopReplicaRequest *s2 = sent[5].req, *s3 = sent[6].req;
    (void)zero_id;
    CHECK(sent[5].ver == 4 && s2->BrokerEpoch == 102 && s2->ControllerId == 7 && s2->ControllerEpoch == 5);
    CHECK(s2->TopicStatesCount == 1 && strcmp(s2->TopicStates[0].TopicName, "del") == 0);
    CHECK(s2->TopicStates[0].PartitionStates[0].LeaderEpoch == -2 && s2->TopicStates[0].PartitionStates[0].DeletePartition);
    CHECK(sent[5].ev && sent[5].ev->type == GR_EV_TOPIC_DELETION_STOP_REPLICA_RESPONSE && sent[5].ev->broker_id == 2);
    CHECK(s3->TopicStates[0].PartitionStates[0].LeaderEpoch == 4 && !s3->TopicStates[0].PartitionStates[0].DeletePartition);
    CHECK(sent[6].ev == NULL); /* no completion without a deletion */
out:
    teardown();
}

static void test_update_metadata_rules(void) {
    setup();
    struct gr_ctrl_batch *b = sm.batch;
    /* deleting topic: leader -2; partition without leadership: skipped */
    struct gr_kzk_tp tps[] = {{(char *)"del", 0}, {(char *)"a", 1}, {(char *)"nope", 0}};
    int32_t to[] = {3, 9};
    gr_ctrl_batch_begin(b);
    gr_ctrl_batch_add_update_metadata(b, to, 2, tps, 3);
    CHECK(gr_ctrl_batch_count_update_metadata_partitions(b) == 1);
    gr_ctrl_batch_send(b);
    CHECK(n_sent == 1); /* broker 9 is not registered */
    if (n_sent == 1) {
        const struct UpdateMetadataRequest *u = sent[0].req;
        CHECK(sent[0].broker == 3 && u->TopicStatesCount == 1);
        CHECK(u->TopicStates[0].PartitionStates[0].Leader == -2 && u->TopicStates[0].PartitionStates[0].LeaderEpoch == 0);
        roundtrip(&sent[0]);
    }
    clear_sent();
    /* the start-up full update: leaderless partitions excluded; the deleting topic's partition is
     * included (with leader -2, as above) so that a broker which missed its deletion drops it */
    gr_ctrl_batch_begin(b);
    gr_ctrl_batch_add_update_metadata_all(b, to, 1);
    CHECK(gr_ctrl_batch_count_update_metadata_partitions(b) == 2);
    gr_ctrl_batch_clear(b);
    /* brokers only */
    gr_ctrl_batch_add_update_metadata_brokers_only(b);
    CHECK(gr_ctrl_batch_count_update_metadata_brokers(b) == 3 && gr_ctrl_batch_count_update_metadata_partitions(b) == 0);
    gr_ctrl_batch_send(b);
    CHECK(n_sent == 3);
    if (n_sent == 3) {
        const struct UpdateMetadataRequest *u = sent[0].req;
        CHECK(u->TopicStatesCount == 0 && u->LiveBrokersCount == 3);
        roundtrip(&sent[0]);
    }
    clear_sent();
    /* a non-empty batch at begin: error, cleared */
    int32_t one[] = {1};
    gr_ctrl_batch_add_stop_replica(b, one, 1, "a", 0, false);
    CHECK(gr_ctrl_batch_begin(b) == -EBUSY);
    CHECK(gr_ctrl_batch_empty(b));
    /* requests to brokers that left before sending are not sent */
    gr_ctrl_batch_add_leader_and_isr(b, one, 1, "a", 0, &gr_ctrl_ctx_partition(&ctx, "a", 0)->lai, false);
    gr_ctrl_ctx_remove_live_broker(&ctx, 1);
    gr_ctrl_batch_send(b);
    CHECK(n_sent == 2); /* UpdateMetadata to 2 and 3 only */
    for (int i = 0; i < n_sent; i++) CHECK(sent[i].api_key == 6 && sent[i].broker != 1);
    teardown();
}

static char *slurp(const char *path) {
    gr_log_flush(); /* INFO lines of a burst are buffered (common/log.h) */
    FILE *f = fopen(path, "r");
    char *s = gr_calloc(1, 1 << 16);
    if (f) {
        size_t n = fread(s, 1, (1 << 16) - 1, f);
        s[n] = 0;
        fclose(f);
    }
    return s;
}

/* The per-partition state-change lines recorded with a step are written after its requests went
 * to the sender (100k lines held the first LeaderAndIsr back by 0.3 s), unchanged; held lines
 * wait over several sends until released. */
static void test_state_change_lines_after_send(void) {
    setup();
    struct gr_ctrl_batch *b = g_batch = sm.batch;
    char path[128];
    snprintf(path, sizeof path, "/tmp/test_request_batch_%d.log", (int)getpid());
    unlink(path);
    CHECK(gr_log_open(path) == 0);
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(&ctx, "a", 0);
    int32_t to[] = {1, 2};
    int32_t isr6[] = {1, 2, 4, 5, 6, 7}; /* longer than the inline copy */
    struct gr_kzk_leader_and_isr big = {.leader = 1, .leader_epoch = 8, .controller_epoch = 5, .n_isr = 6,
                                        .isr = isr6, .zk_version = 11};
    CHECK(gr_ctrl_batch_begin(b) == 0);
    gr_ctrl_batch_add_leader_and_isr(b, to, 2, "a", 0, &p->lai, false);
    gr_ctrl_batch_log_online(b, "a", 0, GR_PS_OFFLINE, &p->lai);
    gr_ctrl_batch_log_isr_removed(b, "a", 1, 4, &big);
    CHECK(gr_ctrl_batch_pending_log(b) == 2);
    gr_ctrl_batch_send(b);
    CHECK(n_sent > 0 && pending_at_send == 2); /* not written while the requests went out */
    CHECK(gr_ctrl_batch_pending_log(b) == 0);
    char *log = slurp(path);
    CHECK(strstr(log, "[Controller id=7 epoch=5] Changed partition a-0 from OfflinePartition to OnlinePartition "
                      "with state LeaderAndIsr(leader=1, leaderEpoch=4, isr=1,2, zkVersion=9) (state.change.logger)"));
    CHECK(strstr(log, "[Controller id=7 epoch=5] Partition a-1 state changed to (Leader:1,ISR:1,2,4,5,6,7,"
                      "LeaderEpoch:8,ControllerEpoch:5) after removing replica 4 from the ISR as part of transition "
                      "to OfflineReplica"));
    free(log);
    clear_sent();
    /* held over two sends, written on release */
    gr_ctrl_batch_hold_log(b, true);
    for (int round = 0; round < 2; round++) {
        CHECK(gr_ctrl_batch_begin(b) == 0);
        gr_ctrl_batch_add_leader_and_isr(b, to, 2, "a", 0, &p->lai, false);
        gr_ctrl_batch_log_online(b, round ? "del" : "a", round, GR_PS_NEW, &p->lai);
        gr_ctrl_batch_send(b);
    }
    CHECK(gr_ctrl_batch_pending_log(b) == 2);
    log = slurp(path);
    CHECK(!strstr(log, "from NewPartition"));
    free(log);
    gr_ctrl_batch_hold_log(b, false);
    CHECK(gr_ctrl_batch_pending_log(b) == 0);
    log = slurp(path);
    CHECK(strstr(log, "Changed partition a-0 from NewPartition"));
    CHECK(strstr(log, "Changed partition del-1 from NewPartition"));
    free(log);
    /* a step that ends without a send (the controller moved) writes them with flush */
    gr_ctrl_batch_log_online(b, "a", 1, GR_PS_OFFLINE, &big);
    gr_ctrl_batch_clear(b);
    CHECK(gr_ctrl_batch_pending_log(b) == 1);
    gr_ctrl_batch_flush_log(b);
    CHECK(gr_ctrl_batch_pending_log(b) == 0);
    /* unwritten lines are dropped with the batch (no leak under ASan) */
    gr_ctrl_batch_log_online(b, "a", 1, GR_PS_OFFLINE, &big);
    gr_log_open("/dev/stderr");
    unlink(path);
    g_batch = NULL;
    teardown();
}


/* Rule 3 with adds interleaved over keys and a context change between them: per (broker,
 * partition) the last add's values go out (LeaderAndIsr: the leader/ISR given to it; UpdateMetadata:
 * the context's state at the last add), IsNew / DeletePartition stay once set, and the counts are
 * of distinct keys. */
static void test_later_add_wins(void) {
    setup();
    struct gr_ctrl_batch *b = sm.batch;
    CHECK(gr_ctrl_batch_begin(b) == 0);
    struct gr_ctrl_partition *p0 = gr_ctrl_ctx_partition(&ctx, "a", 0);
    int32_t isr1[] = {1}, isr12[] = {1, 2}, isr2[] = {2};
    struct gr_kzk_leader_and_isr l1 = {.leader = 1, .leader_epoch = 7, .controller_epoch = 5, .n_isr = 1, .isr = isr1,
                                       .zk_version = 11};
    struct gr_kzk_leader_and_isr l2 = {.leader = 2, .leader_epoch = 8, .controller_epoch = 5, .n_isr = 1, .isr = isr2,
                                       .zk_version = 12};
    int32_t b1[] = {1}, b12[] = {1, 2}, b2[] = {2};
    set_state(&ctx, "a", 1, 2, 3, isr12, 2, 4);
    gr_ctrl_batch_add_leader_and_isr(b, b12, 2, "a", 0, &l1, true);      /* a-0 to 1 (new), 2 */
    gr_ctrl_batch_add_leader_and_isr(b, b1, 1, "a", 1, &p0->lai, false); /* a-1 to 1 */
    gr_ctrl_batch_add_stop_replica(b, b2, 1, "a", 1, true);
    gr_ctrl_batch_add_leader_and_isr(b, b1, 1, "a", 0, &l2, false);      /* a-0 to 1 again: l2, still new */
    set_state(&ctx, "a", 0, 2, 9, isr2, 1, 13);                          /* UpdateMetadata follows the context */
    gr_ctrl_batch_add_leader_and_isr(b, b2, 1, "a", 1, &l1, false);      /* a-1 to 2 */
    gr_ctrl_batch_add_update_metadata(b, NULL, 0, &(struct gr_kzk_tp){(char *)"a", 0}, 1);
    gr_ctrl_batch_add_stop_replica(b, b2, 1, "a", 1, false);
    CHECK(gr_ctrl_batch_count_leader_and_isr(b, -1) == 4);
    CHECK(gr_ctrl_batch_count_leader_and_isr(b, 1) == 2 && gr_ctrl_batch_count_leader_and_isr(b, 2) == 2);
    CHECK(gr_ctrl_batch_count_update_metadata_partitions(b) == 2);
    CHECK(gr_ctrl_batch_count_stop_replica(b, 2) == 1);
    gr_ctrl_batch_send(b);
    CHECK(n_sent == 6); /* LeaderAndIsr 1, 2; UpdateMetadata 1, 2, 3; StopReplica 2 */
    if (n_sent != 6) goto out;
    const struct LeaderAndIsrRequest *l = sent[0].req;
    CHECK(sent[0].broker == 1 && l->TopicStatesCount == 1 && l->TopicStates[0].PartitionStatesCount == 2);
    const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *a0 = &l->TopicStates[0].PartitionStates[0];
    CHECK(a0->PartitionIndex == 0 && a0->Leader == 2 && a0->LeaderEpoch == 8 && a0->PartitionEpoch == 12 && a0->IsNew);
    CHECK(l->TopicStates[0].PartitionStates[1].PartitionIndex == 1 && l->TopicStates[0].PartitionStates[1].Leader == 1);
    l = sent[1].req;
    CHECK(sent[1].broker == 2 && l->TopicStates[0].PartitionStatesCount == 2);
    a0 = &l->TopicStates[0].PartitionStates[0];
    CHECK(a0->Leader == 1 && a0->PartitionEpoch == 11 && a0->IsNew); /* only one add for (2, a-0) */
    CHECK(l->TopicStates[0].PartitionStates[1].Leader == 1 && l->TopicStates[0].PartitionStates[1].PartitionEpoch == 11 &&
          !l->TopicStates[0].PartitionStates[1].IsNew);
    const struct UpdateMetadataRequest *u = sent[2].req;
    CHECK(u->TopicStatesCount == 1 && u->TopicStates[0].PartitionStatesCount == 2);
    CHECK(u->TopicStates[0].PartitionStates[0].Leader == 2 && u->TopicStates[0].PartitionStates[0].LeaderEpoch == 9 &&
          u->TopicStates[0].PartitionStates[0].ZkVersion == 13);
    const struct StopReplicaRequest *sr = sent[5].req;
    CHECK(sent[5].api_key == 5 && sr->TopicStates[0].PartitionStatesCount == 1 &&
          sr->TopicStates[0].PartitionStates[0].DeletePartition);
    for (int i = 0; i < n_sent; i++) roundtrip(&sent[i]);
out:
    teardown();
}

int main(void) {
    test_order_and_fanout();
    test_state_change_lines_after_send();
    test_sort_order();
    test_update_metadata_rules();
    test_later_add_wins();
    if (test_failures) {
        fprintf(stderr, "test_request_batch: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_request_batch: ok\n");
    return 0;
}
