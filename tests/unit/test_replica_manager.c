/* Two brokers in one process, each with a replica manager and a real network server, talking the
 * Kafka protocol to each other over loopback: produce (acks 1 and all), consume, follower
 * replication and the high watermark, min.insync.replicas, ISR shrink/expand through AlterPartition
 * (answered by a fake controller handler registered here), and the KIP-101 truncation scenario. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/apis.h"
#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "replication/partitions.h"
#include "replication/replica_internal.h" /* a follower's log, read directly */
#include "replication/replica_manager.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "net/client.h"
#include "net/server.h"
#include "protocol/codec.h"
#include "storage/batch.h"
#include "support/check.h"

#define TOPIC "t1"
#define NB 2

struct node {
    struct gr_config cfg;
    struct gr_broker *b;
    struct gr_replica_manager *rm;
    struct gr_net_server *srv;
    int port;
    char dir[256];
};
static struct node g_nodes[NB];
static atomic_int g_alter_partition_calls;
static atomic_int g_alter_partition_version = -1;  /* of the last AlterPartition seen */
static atomic_int g_alter_partition_bad_epochs;     /* v3 members whose epoch is not as expected */
static atomic_int g_zkv = 10;

/* Fake controller: accept every AlterPartition as proposed, bump the zkVersion. */
static void fake_alter_partition(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                 void *body) {
    struct AlterPartitionRequest *r = body;
    atomic_fetch_add(&g_alter_partition_calls, 1);
    int16_t ver = hdr->RequestApiVersion;
    atomic_store(&g_alter_partition_version, ver);
    struct AlterPartitionResponse *resp = gr_api_new_response(req);
    resp->TopicsCount = r->TopicsCount;
    resp->Topics = gr_api_alloc(req, (size_t)(r->TopicsCount + 1) * sizeof *resp->Topics);
    for (int t = 0; t < r->TopicsCount; t++) {
        resp->Topics[t].TopicName = r->Topics[t].TopicName;
        memcpy(resp->Topics[t].TopicId, r->Topics[t].TopicId, 16);
        resp->Topics[t].PartitionsCount = r->Topics[t].PartitionsCount;
        resp->Topics[t].Partitions =
            gr_api_alloc(req, (size_t)(r->Topics[t].PartitionsCount + 1) * sizeof *resp->Topics[t].Partitions);
        for (int i = 0; i < r->Topics[t].PartitionsCount; i++) {
            struct AlterPartitionRequest_PartitionData *pd = &r->Topics[t].Partitions[i];
            struct AlterPartitionResponse_PartitionData *out = &resp->Topics[t].Partitions[i];
            out->PartitionIndex = pd->PartitionIndex;
            out->ErrorCode = 0;
            out->LeaderId = r->BrokerId;
            out->LeaderEpoch = pd->LeaderEpoch;
            if (ver >= 3) { /* NewIsrWithEpochs: the leader's own epoch for itself, -1 for the others */
                out->IsrCount = pd->NewIsrWithEpochsCount;
                out->Isr = gr_api_alloc(req, (size_t)(pd->NewIsrWithEpochsCount + 1) * sizeof(int32_t));
                for (int k = 0; k < pd->NewIsrWithEpochsCount; k++) {
                    out->Isr[k] = pd->NewIsrWithEpochs[k].BrokerId;
                    int64_t want = pd->NewIsrWithEpochs[k].BrokerId == r->BrokerId ? r->BrokerEpoch : -1;
                    if (pd->NewIsrWithEpochs[k].BrokerEpoch != want)
                        atomic_fetch_add(&g_alter_partition_bad_epochs, 1);
                }
            } else {
                out->IsrCount = pd->NewIsrCount;
                out->Isr = pd->NewIsr;
            }
            out->PartitionEpoch = atomic_fetch_add(&g_zkv, 1) + 1;
        }
    }
    gr_api_respond(req, resp);
}

static void update_metadata_all(void) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct UpdateMetadataRequest *um = gr_proto_new(&a, &gr_desc_UpdateMetadataRequest);
    um->ControllerId = 1;
    um->ControllerEpoch = 1;
    um->LiveBrokersCount = NB;
    um->LiveBrokers = gr_arena_alloc(&a, NB * sizeof *um->LiveBrokers);
    for (int i = 0; i < NB; i++) {
        struct UpdateMetadataRequest_UpdateMetadataBroker *lb = &um->LiveBrokers[i];
        lb->Id = i + 1;
        lb->EndpointsCount = 1;
        lb->Endpoints = gr_arena_alloc(&a, sizeof *lb->Endpoints);
        lb->Endpoints[0].Port = g_nodes[i].port;
        lb->Endpoints[0].Host = "127.0.0.1";
        lb->Endpoints[0].Listener = "PLAINTEXT";
        lb->Endpoints[0].SecurityProtocol = 0;
    }
    um->TopicStatesCount = 1;
    um->TopicStates = gr_arena_alloc(&a, sizeof *um->TopicStates);
    um->TopicStates[0].TopicName = TOPIC;
    memset(um->TopicStates[0].TopicId, 0x42, 16); /* the logs' id (LeaderAndIsr below): fetches go by id */
    um->TopicStates[0].PartitionStatesCount = 1;
    um->TopicStates[0].PartitionStates = gr_arena_alloc(&a, sizeof *um->TopicStates[0].PartitionStates);
    struct UpdateMetadataRequest_UpdateMetadataPartitionState *ps = &um->TopicStates[0].PartitionStates[0];
    static int32_t reps[2] = {1, 2};
    ps->PartitionIndex = 0;
    ps->Leader = 1;
    ps->LeaderEpoch = 0;
    ps->IsrCount = 2;
    ps->Isr = reps;
    ps->ReplicasCount = 2;
    ps->Replicas = reps;
    ps->OfflineReplicasCount = 0;
    for (int i = 0; i < NB; i++) gr_mdc_update(g_nodes[i].b->metadata, 8, um, NULL);
    gr_arena_free(&a);
}

static void node_start(int i) {
    struct node *n = &g_nodes[i];
    gr_config_defaults(&n->cfg);
    n->cfg.broker_id = i + 1;
    snprintf(n->dir, sizeof n->dir, "/tmp/gr-test-rm-%d-%d", (int)getpid(), i + 1);
    free(n->cfg.log_dirs[0]);
    n->cfg.log_dirs[0] = gr_strdup(n->dir);
    n->cfg.num_log_dirs = 1;
    n->cfg.replica_lag_time_max_ms = 600;
    n->cfg.replica_fetch_wait_max_ms = 100;
    n->cfg.replica_fetch_backoff_ms = 100;
    char err[256];
    CHECK(gr_config_set(&n->cfg, "min.insync.replicas", "2", err, sizeof err) == 0);
    n->cfg.num_advertised_listeners = 1;
    snprintf(n->cfg.advertised_listeners[0].name, sizeof n->cfg.advertised_listeners[0].name, "PLAINTEXT");
    n->b = gr_broker_new(&n->cfg, i + 1);
    CHECK(gr_replica_manager_new(n->b, &n->rm) == 0);
    struct gr_net_listener l = {"PLAINTEXT", "127.0.0.1", 0};
    struct gr_net_config nc;
    gr_net_config_init(&nc);
    nc.listeners = &l;
    nc.num_listeners = 1;
    nc.num_io_threads = 4;
    CHECK(gr_net_server_new(&nc, gr_apis_dispatch, n->b, &n->srv) == 0);
    CHECK(gr_net_server_start(n->srv) == 0);
    n->port = gr_net_server_port(n->srv, 0);
    n->b->net = n->srv;
}

static void node_stop(int i) {
    struct node *n = &g_nodes[i];
    gr_net_server_stop(n->srv);
    gr_replica_manager_free(n->rm);
    gr_net_server_free(n->srv);
    gr_broker_free(n->b);
    gr_config_release(&n->cfg);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", n->dir);
    if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
}

static int16_t make(int node, bool leader, int32_t leader_id, int32_t epoch, const int32_t *isr, int nisr) {
    static int32_t reps[2] = {1, 2};
    struct gr_partition_state st = {0};
    st.topic = TOPIC;
    st.partition = 0;
    st.leader = leader_id;
    st.leader_epoch = epoch;
    st.controller_epoch = 1;
    st.zk_version = atomic_load(&g_zkv);
    st.isr = (int32_t *)isr;
    st.n_isr = nisr;
    st.replicas = reps;
    st.n_replicas = 2;
    memset(st.topic_id.b, 0x42, sizeof st.topic_id.b); /* the logs get an id: AlterPartition goes by id */
    struct gr_broker *b = g_nodes[node].b;
    int16_t e = leader ? b->hooks.become_leader(b->hooks.ctx, b, &st) : b->hooks.become_follower(b->hooks.ctx, b, &st);
    b->hooks.leader_and_isr_done(b->hooks.ctx, b);
    return e;
}

/* One request/response over a fresh connection; *resp lives in a. */
static int call(int node, int16_t api, int16_t ver, const void *body, struct gr_arena *a, void **resp, uint8_t **frame) {
    struct gr_net_client *c = NULL;
    int rc = gr_net_client_connect("127.0.0.1", g_nodes[node].port, 2000, &c);
    if (rc < 0) return rc;
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    gr_proto_encode_request(api, ver, 7, "test", body, &w);
    size_t len = 0;
    rc = gr_net_client_send_recv(c, w.p, w.len, frame, &len, 10000);
    gr_wbuf_free(&w);
    gr_net_client_close(c);
    if (rc < 0) return rc;
    int32_t corr;
    return gr_proto_decode_response(api, ver, *frame, len, a, &corr, resp);
}

static int16_t produce(int node, int16_t acks, const char *value, int64_t *base) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct gr_batch_rec rec = {"k", 1, value, (int32_t)strlen(value), NULL, 0, 1700000000000LL};
    size_t blen;
    uint8_t *batch = gr_batch_build(&rec, 1, NULL, &blen);
    struct ProduceRequest *r = gr_proto_new(&a, &gr_desc_ProduceRequest);
    r->Acks = acks;
    r->TimeoutMs = 1500;
    r->TopicDataCount = 1;
    r->TopicData = gr_arena_alloc(&a, sizeof *r->TopicData);
    r->TopicData[0].Name = TOPIC;
    r->TopicData[0].PartitionDataCount = 1;
    r->TopicData[0].PartitionData = gr_arena_alloc(&a, sizeof *r->TopicData[0].PartitionData);
    r->TopicData[0].PartitionData[0].Index = 0;
    r->TopicData[0].PartitionData[0].Records.p = batch;
    r->TopicData[0].PartitionData[0].Records.len = (int32_t)blen;
    void *resp = NULL;
    uint8_t *frame = NULL;
    int16_t err = -100;
    if (call(node, GR_API_PRODUCE, 7, r, &a, &resp, &frame) == 0) {
        struct ProduceResponse *pr = resp;
        err = pr->Responses[0].PartitionResponses[0].ErrorCode;
        if (base) *base = pr->Responses[0].PartitionResponses[0].BaseOffset;
    }
    free(frame);
    free(batch);
    gr_arena_free(&a);
    return err;
}

/* Consumer fetch; returns error, *hw, and the number of records at or after offset. */
static int16_t g_fetch_version = 11;

static int16_t fetch(int node, int64_t offset, int32_t cur_epoch, int64_t *hw, int *nrecs, char *last_value) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct FetchRequest *r = gr_proto_new(&a, &gr_desc_FetchRequest);
    r->ReplicaId = -1;
    r->MaxWaitMs = 0;
    r->MinBytes = 1;
    r->TopicsCount = 1;
    r->Topics = gr_arena_alloc(&a, sizeof *r->Topics);
    r->Topics[0].Topic = TOPIC;
    r->Topics[0].PartitionsCount = 1;
    r->Topics[0].Partitions = gr_arena_alloc(&a, sizeof *r->Topics[0].Partitions);
    r->Topics[0].Partitions[0].Partition = 0;
    r->Topics[0].Partitions[0].CurrentLeaderEpoch = cur_epoch;
    r->Topics[0].Partitions[0].FetchOffset = offset;
    r->Topics[0].Partitions[0].PartitionMaxBytes = 1 << 20;
    r->RackId = "";
    void *resp = NULL;
    uint8_t *frame = NULL;
    int16_t err = -100;
    *nrecs = 0;
    if (call(node, GR_API_FETCH, g_fetch_version, r, &a, &resp, &frame) == 0) {
        struct FetchResponse *fr = resp;
        struct FetchResponse_PartitionData *pr = &fr->Responses[0].Partitions[0];
        err = pr->ErrorCode;
        *hw = pr->HighWatermark;
        struct gr_batch_iter it;
        struct gr_batch_info bi;
        const uint8_t *bp;
        gr_batch_iter_init(&it, pr->Records.p, pr->Records.len > 0 ? (size_t)pr->Records.len : 0);
        while (gr_batch_iter_next(&it, &bi, &bp) == 1) {
            struct gr_batch_rec_iter ri;
            struct gr_batch_rec_view rv;
            if (gr_batch_rec_iter_init(&ri, bp, bi.size) != 0) continue;
            while (gr_batch_rec_iter_next(&ri, &rv) == 1) {
                if (rv.Offset < offset) continue;
                (*nrecs)++;
                if (last_value) {
                    memcpy(last_value, rv.Value, (size_t)rv.ValueLength);
                    last_value[rv.ValueLength] = 0;
                }
            }
        }
    }
    free(frame);
    gr_arena_free(&a);
    return err;
}

static int16_t list_offset(int node, int64_t ts, int64_t *off) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct ListOffsetsRequest *r = gr_proto_new(&a, &gr_desc_ListOffsetsRequest);
    r->ReplicaId = -1;
    r->TopicsCount = 1;
    r->Topics = gr_arena_alloc(&a, sizeof *r->Topics);
    r->Topics[0].Name = TOPIC;
    r->Topics[0].PartitionsCount = 1;
    r->Topics[0].Partitions = gr_arena_alloc(&a, sizeof *r->Topics[0].Partitions);
    r->Topics[0].Partitions[0].Timestamp = ts;
    r->Topics[0].Partitions[0].CurrentLeaderEpoch = -1;
    void *resp = NULL;
    uint8_t *frame = NULL;
    int16_t err = -100;
    if (call(node, GR_API_LIST_OFFSETS, 5, r, &a, &resp, &frame) == 0) {
        struct ListOffsetsResponse *lr = resp;
        err = lr->Topics[0].Partitions[0].ErrorCode;
        *off = lr->Topics[0].Partitions[0].Offset;
    }
    free(frame);
    gr_arena_free(&a);
    return err;
}

static bool wait_until(bool (*pred)(void *), void *arg, int ms) {
    for (int i = 0; i < ms / 10; i++) {
        if (pred(arg)) return true;
        usleep(10000);
    }
    return pred(arg);
}

struct leo_want {
    int node;
    int64_t leo;
};
static bool leo_is(void *arg) {
    struct leo_want *w = arg;
    struct gr_rm_partition_info pi;
    return gr_rm_partition_info(g_nodes[w->node].rm, TOPIC, 0, &pi) && pi.log_end_offset == w->leo;
}
static bool isr_size_is(void *arg) {
    struct gr_rm_partition_info pi;
    return gr_rm_partition_info(g_nodes[0].rm, TOPIC, 0, &pi) && pi.nisr == *(int *)arg;
}

int main(void) {
    gr_log_set_level(GR_LOG_WARN);
    CHECK(gr_apis_set_test_handler(GR_API_ALTER_PARTITION, fake_alter_partition) == 0);
    for (int i = 0; i < NB; i++) node_start(i);
    update_metadata_all();

    int32_t both[2] = {1, 2};
    CHECK(make(0, true, 1, 1, both, 2) == GR_KERR_NONE);
    CHECK(make(1, false, 1, 1, both, 2) == GR_KERR_NONE);
    struct gr_rm_partition_info term1;
    CHECK(gr_rm_partition_info(g_nodes[0].rm, TOPIC, 0, &term1) && term1.is_leader && term1.elected_epoch == 1);

    /* 1. acks=all completes once the follower has it; the consumer sees it below the HW. */
    int64_t base = -1, hw = -1;
    int nrecs = 0;
    char val[64];
    CHECK(produce(0, -1, "v0", &base) == GR_KERR_NONE);
    CHECK(base == 0);
    CHECK(fetch(0, 0, 1, &hw, &nrecs, val) == GR_KERR_NONE);
    CHECK(hw == 1 && nrecs == 1 && strcmp(val, "v0") == 0);
    /* The follower's fetches run in a KIP-227 session: their records go out with sendfile too
     * (before, only sessionless fetches did, and the leader copied every replicated byte). */
    struct gr_net_stats st0, st1;
    gr_net_server_stats(g_nodes[0].srv, &st0);
    for (int i = 1; i < 20; i++) {
        char v[16];
        snprintf(v, sizeof v, "v%d", i);
        CHECK(produce(0, i % 2 ? 1 : -1, v, &base) == GR_KERR_NONE);
        CHECK(base == i);
    }
    struct leo_want w = {1, 20};
    CHECK(wait_until(leo_is, &w, 3000));
    gr_net_server_stats(g_nodes[0].srv, &st1);
    CHECK(st1.bytes_sendfile > st0.bytes_sendfile);
    {
        /* the follower got the bytes right: offset 19 is v19 on broker 2 */
        struct gr_plog_read_result res;
        memset(&res, 0, sizeof res);
        struct gr_rm_partition *p = gr_rm_get_partition(g_nodes[1].rm, TOPIC, 0);
        CHECK(p && gr_plog_read(p->lml->log, 19, 1 << 20, -1, true, &res) == 0);
        gr_rm_partition_unref(p);
        struct gr_batch_rec_iter ri;
        struct gr_batch_rec_view rv;
        bool found = false;
        if (res.len > 0 && gr_batch_rec_iter_init(&ri, res.data, res.len) == 0)
            while (gr_batch_rec_iter_next(&ri, &rv) == 1)
                if (rv.Offset == 19) found = rv.ValueLength == 3 && memcmp(rv.Value, "v19", 3) == 0;
        CHECK(found);
        free(res.data);
    }
    CHECK(fetch(0, 5, -1, &hw, &nrecs, val) == GR_KERR_NONE);
    CHECK(nrecs == 15 && strcmp(val, "v19") == 0);
    /* Errors: follower refuses clients; epoch fencing; out of range. */
    CHECK(produce(1, 1, "x", NULL) == GR_KERR_NOT_LEADER_OR_FOLLOWER);
    g_fetch_version = 10; /* before KIP-392's v11 consumers read from leaders only */
    CHECK(fetch(1, 0, -1, &hw, &nrecs, NULL) == GR_KERR_NOT_LEADER_OR_FOLLOWER);
    g_fetch_version = 11; /* v11: a follower serves consumers up to the high watermark it knows */
    CHECK(fetch(1, 0, -1, &hw, &nrecs, NULL) == GR_KERR_NONE);
    CHECK(fetch(0, 0, 0, &hw, &nrecs, NULL) == GR_KERR_FENCED_LEADER_EPOCH);
    CHECK(fetch(0, 0, 2, &hw, &nrecs, NULL) == GR_KERR_UNKNOWN_LEADER_EPOCH);
    CHECK(fetch(0, 21, -1, &hw, &nrecs, NULL) == GR_KERR_OFFSET_OUT_OF_RANGE);
    int64_t off = -5;
    CHECK(list_offset(0, -2, &off) == GR_KERR_NONE && off == 0);
    CHECK(list_offset(0, -1, &off) == GR_KERR_NONE && off == 20);
    CHECK(list_offset(0, 1700000000000LL, &off) == GR_KERR_NONE && off == 0);

    /* 2. The follower stops fetching: the leader shrinks the ISR through AlterPartition; acks=all with
     *    min.insync.replicas=2 is then refused with NOT_ENOUGH_REPLICAS. */
    g_nodes[1].b->hooks.stop_replica(g_nodes[1].b->hooks.ctx, g_nodes[1].b, TOPIC, 0, false);
    int one = 1, two = 2;
    /* A follower that has everything is never out of sync: make it lag first. */
    CHECK(produce(0, 1, "v20", &base) == GR_KERR_NONE && base == 20);
    CHECK(wait_until(isr_size_is, &one, 5000));
    CHECK(atomic_load(&g_alter_partition_calls) >= 1);
    /* inter.broker.protocol.version 3.9 (the default) and a log with an id: v3, members with epochs */
    CHECKF(atomic_load(&g_alter_partition_version) == 3 && atomic_load(&g_alter_partition_bad_epochs) == 0, "v%d bad %d", atomic_load(&g_alter_partition_version), atomic_load(&g_alter_partition_bad_epochs));
    CHECK(produce(0, -1, "nope", NULL) == GR_KERR_NOT_ENOUGH_REPLICAS);

    /* 3. The follower comes back: it catches up and the leader expands the ISR. */
    CHECK(make(1, false, 1, 1, both, 2) == GR_KERR_NONE);
    CHECK(wait_until(isr_size_is, &two, 5000));
    CHECK(produce(0, -1, "v21", &base) == GR_KERR_NONE && base == 21);
    w.leo = 22;
    CHECK(wait_until(leo_is, &w, 3000));

    /* 4. KIP-101: broker 1 writes v22 that broker 2 never gets; broker 2 becomes leader (epoch 2)
     *    and writes w22 at offset 22; broker 1 follows and must truncate v22 away. */
    g_nodes[1].b->hooks.stop_replica(g_nodes[1].b->hooks.ctx, g_nodes[1].b, TOPIC, 0, false);
    CHECK(produce(0, 1, "v22", &base) == GR_KERR_NONE && base == 22);
    int32_t only2[1] = {2};
    CHECK(make(1, true, 2, 2, only2, 1) == GR_KERR_NONE);
    CHECK(make(0, false, 2, 2, only2, 1) == GR_KERR_NONE);
    CHECK(produce(1, 1, "w22", &base) == GR_KERR_NONE && base == 22);
    CHECK(produce(1, 1, "w23", &base) == GR_KERR_NONE && base == 23);
    w.node = 0;
    w.leo = 24;
    CHECK(wait_until(leo_is, &w, 5000));
    /* Make broker 1 leader again (epoch 3) and read what it holds at 22. */
    CHECK(make(1, false, 1, 3, both, 2) == GR_KERR_NONE);
    CHECK(make(0, true, 1, 3, both, 2) == GR_KERR_NONE);
    CHECK(produce(0, -1, "v24", &base) == GR_KERR_NONE && base == 24);
    CHECK(fetch(0, 22, 3, &hw, &nrecs, val) == GR_KERR_NONE);
    CHECK(hw == 25 && nrecs == 3 && strcmp(val, "v24") == 0);
    CHECK(fetch(0, 22, 3, &hw, &nrecs, NULL) == GR_KERR_NONE);
    {
        /* offset 22 on broker 1 must be w22 now */
        struct gr_plog_read_result res;
        CHECK(gr_rm_read(g_nodes[0].rm, TOPIC, 0, 22, 1 << 20, true, &res) == GR_KERR_NONE);
        struct gr_batch_rec_iter ri;
        struct gr_batch_rec_view rv;
        bool found = false;
        if (res.len > 0 && gr_batch_rec_iter_init(&ri, res.data, res.len) == 0)
            while (gr_batch_rec_iter_next(&ri, &rv) == 1)
                if (rv.Offset == 22) found = rv.ValueLength == 3 && memcmp(rv.Value, "w22", 3) == 0;
        CHECK(found);
        free(res.data);
    }

    /* Elected epochs (the coordinators load a partition once per elected epoch): broker 1 lost
     * leadership in epoch 2 and regained it in epoch 3, elected again; a new epoch that keeps it
     * leader (the controller changing the ISR) keeps the elected epoch. */
    {
        struct gr_rm_partition_info t3, t4;
        CHECK(gr_rm_partition_info(g_nodes[0].rm, TOPIC, 0, &t3) && t3.is_leader && t3.leader_epoch == 3);
        CHECK(t3.elected_epoch == 3);
        int32_t only1[1] = {1};
        CHECK(make(0, true, 1, 4, only1, 1) == GR_KERR_NONE);
        CHECK(gr_rm_partition_info(g_nodes[0].rm, TOPIC, 0, &t4) && t4.is_leader && t4.leader_epoch == 4);
        CHECK(t4.elected_epoch == 3);
    }

    /* 5. StopReplica(delete) removes the log. */
    g_nodes[1].b->hooks.stop_replica(g_nodes[1].b->hooks.ctx, g_nodes[1].b, TOPIC, 0, true);
    struct gr_rm_partition_info pi;
    CHECK(!gr_rm_partition_info(g_nodes[1].rm, TOPIC, 0, &pi));
    char path[400];
    snprintf(path, sizeof path, "%s/%s-0", g_nodes[1].dir, TOPIC);
    CHECK(access(path, F_OK) != 0);

    /* 6. The partition map across growth and removals: 6000
     *    partitions (the map starts with 4096 buckets), two thirds removed, some added back. */
    {
        static int32_t one_rep[1] = {1};
        struct gr_broker *b = g_nodes[0].b;
        enum { NMANY = 6000 };
        for (int i = 0; i < NMANY; i++) {
            struct gr_partition_state st = {.topic = i % 2 ? "many-a" : "many-b", .partition = i, .leader = 1,
                                            .leader_epoch = 1, .controller_epoch = 1, .isr = one_rep, .n_isr = 1,
                                            .replicas = one_rep, .n_replicas = 1};
            CHECK(b->hooks.become_leader(b->hooks.ctx, b, &st) == GR_KERR_NONE);
        }
        b->hooks.leader_and_isr_done(b->hooks.ctx, b);
        for (int i = 0; i < NMANY; i++)
            if (i % 3) b->hooks.stop_replica(b->hooks.ctx, b, i % 2 ? "many-a" : "many-b", i, true);
        for (int i = 0; i < NMANY; i += 7) {
            struct gr_partition_state st = {.topic = i % 2 ? "many-a" : "many-b", .partition = i, .leader = 1,
                                            .leader_epoch = 2, .controller_epoch = 1, .isr = one_rep, .n_isr = 1,
                                            .replicas = one_rep, .n_replicas = 1};
            CHECK(b->hooks.become_leader(b->hooks.ctx, b, &st) == GR_KERR_NONE);
        }
        b->hooks.leader_and_isr_done(b->hooks.ctx, b);
        int right = 0;
        for (int i = 0; i < NMANY; i++) {
            struct gr_rm_partition_info mi;
            bool want = i % 3 == 0 || i % 7 == 0;
            bool has = gr_rm_partition_info(g_nodes[0].rm, i % 2 ? "many-a" : "many-b", i, &mi);
            right += has == want && (!has || mi.leader_epoch == (i % 7 == 0 ? 2 : 1));
            right += !gr_rm_partition_info(g_nodes[0].rm, i % 2 ? "many-b" : "many-a", i, &mi);
        }
        CHECKF(right == 2 * NMANY, "%d of %d lookups right", right, 2 * NMANY);
    }

    for (int i = 0; i < NB; i++) node_stop(i);
    gr_apis_set_test_handler(GR_API_ALTER_PARTITION, NULL);
    if (test_failures) fprintf(stderr, "test_replica_manager: %d failures\n", test_failures);
    else printf("test_replica_manager: ok\n");
    return test_failures ? 1 : 0;
}
