/* Broker request dispatch end to end over a real network server and client: ApiVersions
 * (incl. the KIP-511 v0 fallback for an unsupported version), Metadata from the cache,
 * UpdateMetadata / LeaderAndIsr / StopReplica fencing, replication hooks, CreateTopics on a
 * non-controller, the API table (ApiVersions advertises exactly it, within the codec's ranges),
 * the controller front door answering NOT_CONTROLLER without a controller, unknown APIs and APIs
 * needing an absent replica manager closing the connection. No ZooKeeper is involved. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/apis.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "replication/partitions.h"
#include "admin/topic_admin.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "net/client.h"
#include "net/server.h"
#include "protocol/codec.h"
#include "support/check.h"

static int32_t corr = 100;
static struct gr_broker *b_under_test;
static struct gr_metrics *swapped_metrics; /* test_metadata's registry, freed after the server */

/* Sends body as api_key/ver, returns the decoded response (in a) or NULL. */
static void *call(struct gr_net_client *cli, int16_t key, int16_t ver, const void *body,
                  struct gr_arena *a)
{
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    int32_t c = corr++;
    if (gr_proto_encode_request(key, ver, c, "test", body, &w) != 0) {
        gr_wbuf_free(&w);
        return NULL;
    }
    uint8_t *resp = NULL;
    size_t len = 0;
    int rc = gr_net_client_send_recv(cli, w.p, w.len, &resp, &len, 5000);
    gr_wbuf_free(&w);
    if (rc != 0)
        return NULL;
    /* Keep the frame alive as long as the arena: copy it into the arena. */
    uint8_t *copy = gr_arena_alloc(a, len);
    memcpy(copy, resp, len);
    free(resp);
    int32_t rc_corr;
    void *out = NULL;
    if (gr_proto_decode_response(key, ver, copy, len, a, &rc_corr, &out) != 0)
        return NULL;
    return rc_corr == c ? out : NULL;
}

static int leaders_made, followers_made, stopped;
static int16_t hook_leader(void *ctx, struct gr_broker *b, const struct gr_partition_state *st)
{
    leaders_made++;
    return GR_KERR_NONE;
}
static int16_t hook_follower(void *ctx, struct gr_broker *b, const struct gr_partition_state *st)
{
    followers_made++;
    return GR_KERR_NONE;
}
static int16_t hook_stop(void *ctx, struct gr_broker *b, const char *t, int32_t p, bool del)
{
    stopped++;
    return GR_KERR_NONE;
}

static int32_t R12[] = { 1, 2 };
static int32_t R23[] = { 2, 3 };

static void update_metadata(struct gr_net_client *cli, int32_t ctrl_epoch, int16_t want)
{
    struct gr_arena a;
    gr_arena_init(&a);
    struct UpdateMetadataRequest_UpdateMetadataEndpoint ep[2] = {
        { 9092, "host1", "PLAINTEXT", 0 }, { 9192, "host1-int", "INTERNAL", 0 } };
    struct UpdateMetadataRequest_UpdateMetadataEndpoint ep2[1] = { { 9093, "host2", "INTERNAL", 0 } };
    struct UpdateMetadataRequest_UpdateMetadataBroker brokers[2] = {
        { .Id = 1, .EndpointsCount = 2, .Endpoints = ep, .Rack = "r1" },
        { .Id = 2, .EndpointsCount = 1, .Endpoints = ep2, .Rack = NULL } };
    struct UpdateMetadataRequest_UpdateMetadataPartitionState ps[2] = {
        { .PartitionIndex = 0, .ControllerEpoch = ctrl_epoch, .Leader = 1, .LeaderEpoch = 3,
          .IsrCount = 2, .Isr = R12, .ZkVersion = 1, .ReplicasCount = 2, .Replicas = R12,
          .OfflineReplicasCount = 0 },
        { .PartitionIndex = 1, .ControllerEpoch = ctrl_epoch, .Leader = 2, .LeaderEpoch = 0,
          .IsrCount = 2, .Isr = R23, .ZkVersion = 0, .ReplicasCount = 2, .Replicas = R23,
          .OfflineReplicasCount = 0 } };
    struct UpdateMetadataRequest_UpdateMetadataTopicState ts = {
        .TopicName = "orders", .PartitionStatesCount = 2, .PartitionStates = ps };
    struct UpdateMetadataRequest rq = { .ControllerId = 1, .ControllerEpoch = ctrl_epoch,
                                        .BrokerEpoch = -1, .UngroupedPartitionStatesCount = 0,
                                        .TopicStatesCount = 1, .TopicStates = &ts,
                                        .LiveBrokersCount = 2, .LiveBrokers = brokers };
    struct UpdateMetadataResponse *r = call(cli, GR_API_UPDATE_METADATA, 6, &rq, &a);
    CHECK(r && r->ErrorCode == want);
    gr_arena_free(&a);
}

static void test_api_versions(struct gr_net_client *cli)
{
    struct gr_arena a;
    gr_arena_init(&a);
    struct ApiVersionsRequest rq = { "librdkafka", "2.0.2" };
    struct ApiVersionsResponse *r = call(cli, GR_API_API_VERSIONS, 3, &rq, &a);
    CHECK(r && r->ErrorCode == 0);
    bool md = false, av = false, produce = false, alter_partition = false, join = false;
    for (int i = 0; r && i < r->ApiKeysCount; i++) {
        if (r->ApiKeys[i].ApiKey == GR_API_METADATA)
            md = r->ApiKeys[i].MinVersion == 0 && r->ApiKeys[i].MaxVersion == 12;
        if (r->ApiKeys[i].ApiKey == GR_API_API_VERSIONS)
            av = r->ApiKeys[i].MaxVersion == 4;
        /* The whole table, whatever subsystems this bare broker runs. */
        if (r->ApiKeys[i].ApiKey == GR_API_PRODUCE)
            produce = r->ApiKeys[i].MinVersion == 0 && r->ApiKeys[i].MaxVersion == 11;
        if (r->ApiKeys[i].ApiKey == GR_API_ALTER_PARTITION)
            alter_partition = r->ApiKeys[i].MaxVersion == 3;
        if (r->ApiKeys[i].ApiKey == GR_API_JOIN_GROUP)
            join = r->ApiKeys[i].MaxVersion == 9;
    }
    CHECK(md && av && produce && alter_partition && join);
    /* Exactly the table: every advertised key is in it with its range, and every table entry is
     * advertised once, in key order. */
    int in_table = 0, prev = -1;
    for (int k = 0; k < 128; k++)
        in_table += gr_apis_entry((int16_t)k) != NULL;
    CHECK(r && r->ApiKeysCount == in_table);
    for (int i = 0; r && i < r->ApiKeysCount; i++) {
        const struct gr_api_entry *e = gr_apis_entry(r->ApiKeys[i].ApiKey);
        CHECK(e && e->min_ver == r->ApiKeys[i].MinVersion && e->max_ver == r->ApiKeys[i].MaxVersion);
        CHECK(r->ApiKeys[i].ApiKey > prev);
        prev = r->ApiKeys[i].ApiKey;
    }
    /* No entry claims versions the codec cannot decode. */
    for (int k = 0; k < 128; k++) {
        const struct gr_api_entry *e = gr_apis_entry((int16_t)k);
        const struct gr_api_desc *d = gr_proto_api((int16_t)k);
        if (e)
            CHECK(d && e->min_ver >= d->min_version && e->max_ver <= d->max_version && e->min_ver <= e->max_ver);
    }
    r = call(cli, GR_API_API_VERSIONS, 0, &rq, &a);
    CHECK(r && r->ErrorCode == 0 && r->ApiKeysCount >= 7);
    /* Invalid v3 software name -> INVALID_REQUEST. */
    struct ApiVersionsRequest bad = { "-bad-", "1" };
    r = call(cli, GR_API_API_VERSIONS, 3, &bad, &a);
    CHECK(r && r->ErrorCode == GR_KERR_INVALID_REQUEST);

    /* ApiVersions v7 (beyond what we know): hand-made v2 header, answered as v0. */
    uint8_t frame[] = { 0, 0, 0, 13, 0, 18, 0, 7, 0, 0, 0, 77, 0, 1, 'x', 0, 0 };
    uint8_t *resp = NULL;
    size_t len = 0;
    CHECK(gr_net_client_send_recv(cli, frame, sizeof(frame), &resp, &len, 5000) == 0);
    if (resp) {
        int32_t c;
        void *out = NULL;
        CHECK(gr_proto_decode_response(GR_API_API_VERSIONS, 0, resp, len, &a, &c, &out) == 0);
        r = out;
        CHECK(c == 77 && r && r->ErrorCode == GR_KERR_UNSUPPORTED_VERSION && r->ApiKeysCount >= 7);
        free(resp);
    }
    /* ApiVersions v4 (Kafka 3.9's top, served): a well-formed body is answered at v4. */
    struct gr_wbuf w4;
    gr_wbuf_init(&w4);
    CHECK(gr_proto_encode_request(GR_API_API_VERSIONS, 4, 79, "x", &rq, &w4) == 0);
    resp = NULL;
    CHECK(gr_net_client_send_recv(cli, w4.p, w4.len, &resp, &len, 5000) == 0);
    gr_wbuf_free(&w4);
    if (resp) {
        int32_t c;
        void *out = NULL;
        CHECK(gr_proto_decode_response(GR_API_API_VERSIONS, 4, resp, len, &a, &c, &out) == 0);
        r = out;
        CHECK(c == 79 && r && r->ErrorCode == 0 && r->ApiKeysCount >= 7);
        free(resp);
    }
    gr_arena_free(&a);
}

static void test_metadata(struct gr_net_client *cli, struct gr_net_client *cli_int)
{
    update_metadata(cli, 5, GR_KERR_NONE);
    struct gr_arena a;
    gr_arena_init(&a);
    /* v1 null topics = all, PLAINTEXT listener: broker 2 has no PLAINTEXT endpoint. */
    struct MetadataRequest rq = { .TopicsCount = -1, .AllowAutoTopicCreation = true };
    struct MetadataResponse *r = call(cli, GR_API_METADATA, 1, &rq, &a);
    CHECK(r && r->BrokersCount == 1 && r->Brokers[0].NodeId == 1 &&
          strcmp(r->Brokers[0].Host, "host1") == 0 && r->Brokers[0].Port == 9092);
    CHECK(r && r->ControllerId == 1 && r->TopicsCount == 1);
    if (r && r->TopicsCount == 1) {
        struct MetadataResponse_MetadataResponseTopic *t = &r->Topics[0];
        CHECK(strcmp(t->Name, "orders") == 0 && t->ErrorCode == 0 && t->PartitionsCount == 2);
        CHECK(t->Partitions[0].LeaderId == 1 && t->Partitions[0].ErrorCode == 0);
        /* leader 2 is live but has no PLAINTEXT listener: LEADER_NOT_AVAILABLE below v6 */
        CHECK(t->Partitions[1].LeaderId == -1 &&
              t->Partitions[1].ErrorCode == GR_KERR_LEADER_NOT_AVAILABLE);
    }
    /* ErrorsPerSec counts every ErrorCode of the answer (per topic and per partition) at the
     * version: one more answer adds NONE twice (the topic, partition 0) and
     * LEADER_NOT_AVAILABLE once (partition 1). */
    struct gr_metrics *reg = gr_metrics_new();
    b_under_test->metrics = reg;
    r = call(cli, GR_API_METADATA, 1, &rq, &a);
    const char *mn = "kafka.network:type=RequestMetrics,name=ErrorsPerSec,request=Metadata,error=NONE";
    const char *ml = "kafka.network:type=RequestMetrics,name=ErrorsPerSec,request=Metadata,error=LEADER_NOT_AVAILABLE";
    CHECK(r && gr_meter_count(gr_metrics_meter(reg, mn)) == 2 &&
          gr_meter_count(gr_metrics_meter(reg, ml)) == 1);
    r = call(cli, GR_API_METADATA, 1, &rq, &a);
    CHECK(r && gr_meter_count(gr_metrics_meter(reg, mn)) == 4 &&
          gr_meter_count(gr_metrics_meter(reg, ml)) == 2);
    b_under_test->metrics = NULL;
    /* freed only once the server is: the network thread records the response's send metrics
     * (ResponseQueueTimeMs, ResponseSendTimeMs, TotalTimeMs) in it after the client may have
     * read the whole response (net/server.h: the registry must outlive the server) */
    swapped_metrics = reg;
    /* v7 on the INTERNAL listener: both brokers, leader epochs, cluster id. */
    r = call(cli_int, GR_API_METADATA, 7, &rq, &a);
    CHECK(r && r->BrokersCount == 2 && r->ClusterId && strcmp(r->ClusterId, "cid") == 0);
    CHECK(r && r->TopicsCount == 1 && r->Topics[0].Partitions[1].LeaderId == 2 &&
          r->Topics[0].Partitions[1].LeaderEpoch == 0 && r->Topics[0].Partitions[0].LeaderEpoch == 3);
    /* v6 on PLAINTEXT: LISTENER_NOT_FOUND for the partition led by broker 2. */
    r = call(cli, GR_API_METADATA, 6, &rq, &a);
    CHECK(r && r->TopicsCount == 1 &&
          r->Topics[0].Partitions[1].ErrorCode == GR_KERR_LISTENER_NOT_FOUND);
    /* v0 with an empty list = all topics; replicas without a PLAINTEXT endpoint filtered. */
    struct MetadataRequest rq0 = { .TopicsCount = 0 };
    r = call(cli, GR_API_METADATA, 0, &rq0, &a);
    CHECK(r && r->TopicsCount == 1 && r->Topics[0].Partitions[0].ReplicaNodesCount == 1 &&
          r->Topics[0].Partitions[0].ErrorCode == GR_KERR_REPLICA_NOT_AVAILABLE);
    /* v9 (flexible) */
    r = call(cli_int, GR_API_METADATA, 9, &rq, &a);
    CHECK(r && r->BrokersCount == 2 && r->TopicsCount == 1 && r->Topics[0].PartitionsCount == 2);
    /* v1 empty list = no topics. */
    r = call(cli, GR_API_METADATA, 1, &rq0, &a);
    CHECK(r && r->TopicsCount == 0 && r->BrokersCount == 1);
    /* Unknown topic, auto-creation disabled in the config (v4, allow=true). */
    struct MetadataRequest_MetadataRequestTopic names[3] = { { .Name = "nope" }, { .Name = "orders" },
                                                             { .Name = "nope" } };
    struct MetadataRequest rq4 = { .TopicsCount = 3, .Topics = names, .AllowAutoTopicCreation = true };
    r = call(cli, GR_API_METADATA, 4, &rq4, &a);
    CHECK(r && r->TopicsCount == 2);
    for (int i = 0; r && i < r->TopicsCount; i++) {
        if (strcmp(r->Topics[i].Name, "nope") == 0)
            CHECK(r->Topics[i].ErrorCode == GR_KERR_UNKNOWN_TOPIC_OR_PARTITION);
        else
            CHECK(r->Topics[i].ErrorCode == 0);
    }
    /* Stale controller epoch: NOT_CONTROLLER, cache untouched. */
    update_metadata(cli, 4, GR_KERR_NOT_CONTROLLER);
    gr_arena_free(&a);
}

static struct LeaderAndIsrResponse *lai(struct gr_net_client *cli, struct gr_arena *a,
                                        int32_t ctrl_epoch, int64_t broker_epoch,
                                        int32_t leader_epoch, int32_t *replicas, int nrep)
{
    struct LeaderAndIsrRequest_LeaderAndIsrPartitionState ps = {
        .PartitionIndex = 0, .ControllerEpoch = ctrl_epoch, .Leader = replicas[0],
        .LeaderEpoch = leader_epoch, .IsrCount = nrep, .Isr = replicas, .PartitionEpoch = 0,
        .ReplicasCount = nrep, .Replicas = replicas, .IsNew = true };
    struct LeaderAndIsrRequest_LeaderAndIsrTopicState ts = {
        .TopicName = "orders", .PartitionStatesCount = 1, .PartitionStates = &ps };
    struct LeaderAndIsrRequest rq = { .ControllerId = 1, .ControllerEpoch = ctrl_epoch,
                                      .BrokerEpoch = broker_epoch, .TopicStatesCount = 1,
                                      .TopicStates = &ts, .LiveLeadersCount = 0 };
    return call(cli, GR_API_LEADER_AND_ISR, 4, &rq, a);
}

static void test_control(struct gr_net_client *cli, struct gr_broker *b)
{
    struct gr_arena a;
    gr_arena_init(&a);
    int32_t r12[] = { 1, 2 }, r21[] = { 2, 1 }, r23[] = { 2, 3 };
    /* Known controller epoch is 5 (from UpdateMetadata). */
    struct LeaderAndIsrResponse *r = lai(cli, &a, 4, -1, 0, r12, 2);
    CHECK(r && r->ErrorCode == GR_KERR_STALE_CONTROLLER_EPOCH && r->PartitionErrorsCount == 1 &&
          r->PartitionErrors[0].ErrorCode == GR_KERR_STALE_CONTROLLER_EPOCH);
    /* Broker epoch 42 is ours; 41 is stale, -1 accepted. */
    r = lai(cli, &a, 5, 41, 0, r12, 2);
    CHECK(r && r->ErrorCode == GR_KERR_STALE_BROKER_EPOCH &&
          r->PartitionErrors[0].ErrorCode == GR_KERR_STALE_BROKER_EPOCH);
    r = lai(cli, &a, 5, 42, 0, r12, 2);
    CHECK(r && r->ErrorCode == 0 && r->PartitionErrorsCount == 1 &&
          r->PartitionErrors[0].ErrorCode == 0 && strcmp(r->PartitionErrors[0].TopicName, "orders") == 0);
    CHECK(leaders_made == 1 && followers_made == 0);
    struct gr_partition_state st;
    CHECK(gr_partitions_get(b->partitions, "orders", 0, &st) && st.leader == 1 &&
          st.leader_epoch == 0 && st.n_replicas == 2 && st.is_new);
    gr_partition_state_release(&st);
    /* Same leader epoch again: per-partition STALE_CONTROLLER_EPOCH. */
    r = lai(cli, &a, 6, -1, 0, r21, 2);
    CHECK(r && r->ErrorCode == 0 && r->PartitionErrors[0].ErrorCode == GR_KERR_STALE_CONTROLLER_EPOCH);
    /* Newer epoch, this broker not a replica: UNKNOWN_TOPIC_OR_PARTITION. */
    r = lai(cli, &a, 6, -1, 1, r23, 2);
    CHECK(r && r->PartitionErrors[0].ErrorCode == GR_KERR_UNKNOWN_TOPIC_OR_PARTITION);
    /* Newer epoch, broker 2 leads: follower. Epoch 6 is now the highest seen. */
    r = lai(cli, &a, 6, -1, 2, r21, 2);
    CHECK(r && r->PartitionErrors[0].ErrorCode == 0 && followers_made == 1);
    update_metadata(cli, 5, GR_KERR_NOT_CONTROLLER);

    /* StopReplica v3. */
    struct StopReplicaRequest_StopReplicaPartitionState sps = { 0, 1, false };
    struct StopReplicaRequest_StopReplicaTopicState sts = { "orders", 1, &sps };
    struct StopReplicaRequest srq = { .ControllerId = 1, .ControllerEpoch = 5, .BrokerEpoch = -1,
                                      .TopicStatesCount = 1, .TopicStates = &sts };
    struct StopReplicaResponse *s = call(cli, GR_API_STOP_REPLICA, 3, &srq, &a);
    CHECK(s && s->ErrorCode == GR_KERR_STALE_CONTROLLER_EPOCH && s->PartitionErrorsCount == 0);
    srq.ControllerEpoch = 6;
    srq.BrokerEpoch = 7;
    s = call(cli, GR_API_STOP_REPLICA, 3, &srq, &a);
    CHECK(s && s->ErrorCode == GR_KERR_STALE_BROKER_EPOCH);
    srq.BrokerEpoch = 42;
    s = call(cli, GR_API_STOP_REPLICA, 3, &srq, &a); /* epoch 1 <= hosted 2 */
    CHECK(s && s->ErrorCode == 0 && s->PartitionErrorsCount == 1 &&
          s->PartitionErrors[0].ErrorCode == GR_KERR_FENCED_LEADER_EPOCH && stopped == 0);
    sps.LeaderEpoch = -2;
    sps.DeletePartition = true;
    s = call(cli, GR_API_STOP_REPLICA, 3, &srq, &a);
    CHECK(s && s->PartitionErrors[0].ErrorCode == 0 && stopped == 1);
    CHECK(!gr_partitions_get(b->partitions, "orders", 0, &st));
    /* v1 (no leader epochs): not hosted -> stopped anyway. */
    int32_t pidx[] = { 9 };
    struct StopReplicaRequest_StopReplicaTopicV1 t1 = { "other", 1, pidx };
    struct StopReplicaRequest srq1 = { .ControllerId = 1, .ControllerEpoch = 6, .BrokerEpoch = -1,
                                       .DeletePartitions = true, .TopicsCount = 1, .Topics = &t1 };
    s = call(cli, GR_API_STOP_REPLICA, 1, &srq1, &a);
    CHECK(s && s->ErrorCode == 0 && s->PartitionErrorsCount == 1 && stopped == 2);
    gr_arena_free(&a);
}

/* Batch hooks: what the handlers hand over in one call. */
static int batch_calls, batch_n, batch_leaders, stop_batch_calls, stop_batch_n;
static void hook_batch(void *ctx, struct gr_broker *b, struct gr_lai_change *v, int n)
{
    batch_calls++;
    batch_n = n;
    for (int i = 0; i < n; i++) {
        batch_leaders += v[i].leader;
        v[i].error = v[i].st->partition == 2 ? GR_KERR_KAFKA_STORAGE_ERROR : GR_KERR_NONE;
    }
}
static void hook_stop_batch(void *ctx, struct gr_broker *b, struct gr_stop_change *v, int n)
{
    stop_batch_calls++;
    stop_batch_n = n;
    for (int i = 0; i < n; i++)
        v[i].error = GR_KERR_NONE;
}

/* A LeaderAndIsr reaches the replica manager as one batch of the partitions that passed the
 * checks (per-partition errors mapped back); one naming a partition twice goes partition by
 * partition; StopReplica likewise. */
static void test_control_batches(struct gr_net_client *cli, struct gr_broker *b)
{
    struct gr_arena a;
    gr_arena_init(&a);
    b->hooks.apply_leader_and_isr = hook_batch;
    b->hooks.stop_replicas = hook_stop_batch;
    int32_t r12[] = { 1, 2 }, r21[] = { 2, 1 }, r23[] = { 2, 3 };
    struct LeaderAndIsrRequest_LeaderAndIsrPartitionState ps[4] = {
        { .PartitionIndex = 0, .ControllerEpoch = 6, .Leader = 1, .LeaderEpoch = 0, .IsrCount = 2,
          .Isr = r12, .ReplicasCount = 2, .Replicas = r12, .IsNew = true },
        { .PartitionIndex = 1, .ControllerEpoch = 6, .Leader = 2, .LeaderEpoch = 0, .IsrCount = 2,
          .Isr = r23, .ReplicasCount = 2, .Replicas = r23, .IsNew = true }, /* not ours */
        { .PartitionIndex = 2, .ControllerEpoch = 6, .Leader = 2, .LeaderEpoch = 0, .IsrCount = 2,
          .Isr = r21, .ReplicasCount = 2, .Replicas = r21, .IsNew = true },
        { .PartitionIndex = 3, .ControllerEpoch = 6, .Leader = 1, .LeaderEpoch = 0, .IsrCount = 2,
          .Isr = r12, .ReplicasCount = 2, .Replicas = r12, .IsNew = true } };
    struct LeaderAndIsrRequest_LeaderAndIsrTopicState ts = {
        .TopicName = "batch", .PartitionStatesCount = 4, .PartitionStates = ps };
    struct LeaderAndIsrRequest rq = { .ControllerId = 1, .ControllerEpoch = 6, .BrokerEpoch = -1,
                                      .TopicStatesCount = 1, .TopicStates = &ts };
    int lm = leaders_made, fm = followers_made;
    struct LeaderAndIsrResponse *r = call(cli, GR_API_LEADER_AND_ISR, 4, &rq, &a);
    CHECK(r && r->ErrorCode == 0 && r->PartitionErrorsCount == 4);
    CHECK(batch_calls == 1 && batch_n == 3 && batch_leaders == 2);
    CHECK(leaders_made == lm && followers_made == fm);
    CHECK(r && r->PartitionErrors[0].ErrorCode == 0 &&
          r->PartitionErrors[1].ErrorCode == GR_KERR_UNKNOWN_TOPIC_OR_PARTITION &&
          r->PartitionErrors[2].ErrorCode == GR_KERR_KAFKA_STORAGE_ERROR &&
          r->PartitionErrors[3].ErrorCode == 0);
    /* The same partition twice at rising epochs: applied one by one through the single hooks. */
    ps[0].LeaderEpoch = 1;
    ps[3] = ps[0];
    ps[3].LeaderEpoch = 2;
    ts.PartitionStatesCount = 4;
    ps[1].LeaderEpoch = 0; /* stale now, skipped */
    ps[2].LeaderEpoch = 0;
    r = call(cli, GR_API_LEADER_AND_ISR, 4, &rq, &a);
    CHECK(r && r->ErrorCode == 0 && batch_calls == 1 && leaders_made == lm + 2);
    /* StopReplica: one batch; deleted partitions leave the registry. */
    struct StopReplicaRequest_StopReplicaPartitionState sps[2] = { { 0, -2, true }, { 2, -2, true } };
    struct StopReplicaRequest_StopReplicaTopicState sts = { "batch", 2, sps };
    struct StopReplicaRequest srq = { .ControllerId = 1, .ControllerEpoch = 6, .BrokerEpoch = -1,
                                      .TopicStatesCount = 1, .TopicStates = &sts };
    int st0 = stopped;
    struct StopReplicaResponse *s = call(cli, GR_API_STOP_REPLICA, 3, &srq, &a);
    CHECK(s && s->ErrorCode == 0 && s->PartitionErrorsCount == 2 && stop_batch_calls == 1 &&
          stop_batch_n == 2 && stopped == st0);
    struct gr_partition_state st;
    CHECK(!gr_partitions_get(b->partitions, "batch", 0, &st) && !gr_partitions_get(b->partitions, "batch", 2, &st));
    CHECK(gr_partitions_get(b->partitions, "batch", 3, &st));
    gr_partition_state_release(&st);
    b->hooks.apply_leader_and_isr = NULL;
    b->hooks.stop_replicas = NULL;
    gr_arena_free(&a);
}

/* KIP-516 in LeaderAndIsr v7 (handle_control.c), with fake replica hooks: "tidc" has a log of
 * another id (moved aside first, never deleted), "tidx" an unreadable partition.metadata, the
 * rest no log. */
static const uint8_t ID_A[16] = { 0xa }, ID_B[16] = { 0xb }, ID_C[16] = { 0xc };
static int adopted, stale_deleted;
static int fake_log_topic_id(void *ctx, struct gr_broker *b, const char *topic, int32_t partition, struct gr_uuid *out)
{
    (void)ctx, (void)b, (void)partition;
    if (strcmp(topic, "tidx") == 0)
        return GR_ECORRUPT;
    if (strcmp(topic, "tidc") == 0 && !stale_deleted) {
        memcpy(out->b, ID_C, 16);
        return 1;
    }
    return 0;
}
static int16_t fake_adopt(void *ctx, struct gr_broker *b, const char *topic, int32_t partition, const struct gr_uuid *id)
{
    (void)ctx, (void)b, (void)topic, (void)partition;
    adopted += memcmp(id->b, ID_B, 16) == 0;
    return GR_KERR_NONE;
}
static int stale_deleted_for_good, aside_fails;
static void fake_stops(void *ctx, struct gr_broker *b, struct gr_stop_change *v, int n)
{
    (void)ctx, (void)b;
    for (int i = 0; i < n; i++) {
        v[i].error = GR_KERR_NONE;
        if (!v[i].delete_partition || strcmp(v[i].topic, "tidc") != 0)
            continue;
        if (!v[i].move_aside) {
            stale_deleted_for_good++; /* the old rule: the log deleted */
            stale_deleted++;
        } else if (aside_fails) {
            v[i].error = GR_KERR_KAFKA_STORAGE_ERROR;
        } else {
            stale_deleted++; /* moved aside: gone from its path */
            snprintf(v[i].aside_path, v[i].aside_cap, "/logs/tidc-0.0123-stray");
        }
    }
}

static struct LeaderAndIsrResponse *lai7(struct gr_net_client *cli, struct gr_arena *a, int16_t ver, const char *topic,
                                         const uint8_t id[16], int32_t leader_epoch)
{
    static int32_t r12[] = { 1, 2 };
    struct LeaderAndIsrRequest_LeaderAndIsrPartitionState ps = {
        .PartitionIndex = 0, .ControllerEpoch = 6, .Leader = 1, .LeaderEpoch = leader_epoch, .IsrCount = 2,
        .Isr = r12, .ReplicasCount = 2, .Replicas = r12 };
    struct LeaderAndIsrRequest_LeaderAndIsrTopicState ts = { .TopicName = (char *)topic, .PartitionStatesCount = 1,
                                                             .PartitionStates = &ps };
    memcpy(ts.TopicId, id, 16);
    struct LeaderAndIsrRequest rq = { .ControllerId = 1, .ControllerEpoch = 6, .BrokerEpoch = -1,
                                      .TopicStatesCount = 1, .TopicStates = &ts };
    return call(cli, GR_API_LEADER_AND_ISR, ver, &rq, a);
}

static int16_t lai7_error(struct LeaderAndIsrResponse *r, const uint8_t id[16])
{
    if (!r || r->TopicsCount != 1 || memcmp(r->Topics[0].TopicId, id, 16) != 0 || r->Topics[0].PartitionErrorsCount != 1)
        return -1;
    return r->Topics[0].PartitionErrors[0].ErrorCode;
}

static void test_control_topic_ids(struct gr_net_client *cli, struct gr_broker *b)
{
    struct gr_arena a;
    gr_arena_init(&a);
    b->hooks.log_topic_id = fake_log_topic_id;
    b->hooks.adopt_topic_id = fake_adopt;
    void (*saved_stops)(void *, struct gr_broker *, struct gr_stop_change *, int) = b->hooks.stop_replicas;
    b->hooks.stop_replicas = fake_stops;
    struct gr_partition_state st;
    /* a new partition takes the request's id; the answer is keyed by it (v5+) */
    CHECK(lai7_error(lai7(cli, &a, 7, "tida", ID_A, 0), ID_A) == GR_KERR_NONE);
    CHECK(gr_partitions_get(b->partitions, "tida", 0, &st) && memcmp(st.topic_id.b, ID_A, 16) == 0);
    gr_partition_state_release(&st);
    CHECK(lai7_error(lai7(cli, &a, 7, "tida", ID_A, 0), ID_A) == GR_KERR_STALE_CONTROLLER_EPOCH);
    /* a partition applied without an id takes one at the same leader epoch (the controller upgrading) */
    static const uint8_t none[16];
    CHECK(lai7_error(lai7(cli, &a, 4, "tidb", none, 0), none) == -1); /* v4: flat answer */
    CHECK(lai7_error(lai7(cli, &a, 7, "tidb", ID_B, 0), ID_B) == GR_KERR_NONE && adopted == 1);
    CHECK(gr_partitions_get(b->partitions, "tidb", 0, &st) && memcmp(st.topic_id.b, ID_B, 16) == 0);
    gr_partition_state_release(&st);
    /* a log of another id whose move aside fails: not served, kept where it is, never deleted */
    aside_fails = 1;
    CHECK(lai7_error(lai7(cli, &a, 7, "tidc", ID_A, 0), ID_A) == GR_KERR_KAFKA_STORAGE_ERROR);
    CHECK(!gr_partitions_get(b->partitions, "tidc", 0, &st) && stale_deleted == 0);
    /* a log of another id: moved aside (StopReplica with move_aside, never a plain delete), then
     * the partition is created anew */
    aside_fails = 0;
    CHECK(lai7_error(lai7(cli, &a, 7, "tidc", ID_A, 0), ID_A) == GR_KERR_NONE && stale_deleted == 1);
    CHECK(stale_deleted_for_good == 0);
    CHECK(gr_partitions_get(b->partitions, "tidc", 0, &st) && memcmp(st.topic_id.b, ID_A, 16) == 0);
    gr_partition_state_release(&st);
    /* an unreadable partition.metadata: not served */
    CHECK(lai7_error(lai7(cli, &a, 7, "tidx", ID_A, 0), ID_A) == GR_KERR_KAFKA_STORAGE_ERROR);
    CHECK(!gr_partitions_get(b->partitions, "tidx", 0, &st));
    b->hooks.log_topic_id = NULL;
    b->hooks.adopt_topic_id = NULL;
    b->hooks.stop_replicas = saved_stops;
    gr_arena_free(&a);
}

static void test_create_topics_not_controller(struct gr_net_client *cli, struct gr_broker *b)
{
    struct gr_arena a;
    gr_arena_init(&a);
    /* The cache says broker 1 (us) is the controller. Broker 1 has a rack and broker 2 none:
     * Kafka's CreateTopics fails the assignment (AdminOperationException -> UNKNOWN_SERVER_ERROR). */
    CHECK(gr_broker_is_controller(b));
    struct CreateTopicsRequest_CreatableTopic mt = { .Name = "mixed", .NumPartitions = 2,
                                                     .ReplicationFactor = 1 };
    struct CreateTopicsRequest mrq = { .TopicsCount = 1, .Topics = &mt, .TimeoutMs = 1000,
                                       .ValidateOnly = true };
    struct CreateTopicsResponse *mr = call(cli, GR_API_CREATE_TOPICS, 5, &mrq, &a);
    CHECK(mr && mr->Topics[0].ErrorCode == GR_KERR_UNKNOWN_SERVER_ERROR);
    /* Same brokers without racks (v1 UpdateMetadata carries none): validation passes and v5
     * reports the resolved shape. */
    struct UpdateMetadataRequest_UpdateMetadataEndpoint ep1 = { 9092, "host1", NULL, 0 };
    struct UpdateMetadataRequest_UpdateMetadataBroker nb[2] = {
        { .Id = 1, .EndpointsCount = 1, .Endpoints = &ep1 },
        { .Id = 2, .EndpointsCount = 1, .Endpoints = &ep1 } };
    struct UpdateMetadataRequest um1 = { .ControllerId = 1, .ControllerEpoch = 6,
                                         .BrokerEpoch = -1, .LiveBrokersCount = 2,
                                         .LiveBrokers = nb };
    gr_mdc_update(b->metadata, 1, &um1, NULL);
    struct CreateTopicsRequest_CreatableTopic vt = { .Name = "valid.only", .NumPartitions = -1,
                                                     .ReplicationFactor = 2, .AssignmentsCount = 0,
                                                     .ConfigsCount = 0 };
    struct CreateTopicsRequest vrq = { .TopicsCount = 1, .Topics = &vt, .TimeoutMs = 1000,
                                       .ValidateOnly = true };
    struct CreateTopicsResponse *vr = call(cli, GR_API_CREATE_TOPICS, 5, &vrq, &a);
    CHECK(vr && vr->TopicsCount == 1 && vr->Topics[0].ErrorCode == 0 &&
          vr->Topics[0].NumPartitions == 1 && vr->Topics[0].ReplicationFactor == 2);
    vt.ReplicationFactor = 3; /* two live brokers */
    vr = call(cli, GR_API_CREATE_TOPICS, 5, &vrq, &a);
    CHECK(vr && vr->Topics[0].ErrorCode == GR_KERR_INVALID_REPLICATION_FACTOR);
    vt.Name = "orders";
    vr = call(cli, GR_API_CREATE_TOPICS, 5, &vrq, &a);
    CHECK(vr && vr->Topics[0].ErrorCode == GR_KERR_TOPIC_ALREADY_EXISTS);
    vt.Name = "bad name";
    vr = call(cli, GR_API_CREATE_TOPICS, 1, &vrq, &a);
    CHECK(vr && vr->Topics[0].ErrorCode == GR_KERR_INVALID_TOPIC_EXCEPTION &&
          vr->Topics[0].ErrorMessage != NULL);

    /* Another broker becomes controller: NOT_CONTROLLER. */
    struct UpdateMetadataRequest um = { .ControllerId = 2, .ControllerEpoch = 7, .BrokerEpoch = -1,
                                        .LiveBrokersCount = 0 };
    gr_mdc_update(b->metadata, 6, &um, NULL);
    CHECK(!gr_broker_is_controller(b));
    struct CreateTopicsRequest_CreatableTopic t = { .Name = "x", .NumPartitions = 1,
                                                    .ReplicationFactor = 1, .AssignmentsCount = 0,
                                                    .ConfigsCount = 0 };
    struct CreateTopicsRequest rq = { .TopicsCount = 1, .Topics = &t, .TimeoutMs = 1000 };
    struct CreateTopicsResponse *r = call(cli, GR_API_CREATE_TOPICS, 4, &rq, &a);
    CHECK(r && r->TopicsCount == 1 && r->Topics[0].ErrorCode == GR_KERR_NOT_CONTROLLER);
    gr_arena_free(&a);
}

static atomic_int waits_done, waits_ready;
static void on_wait(void *ctx, int n, const bool *ready)
{
    for (int i = 0; i < n; i++)
        if (ready[i])
            atomic_fetch_add(&waits_ready, 1);
    atomic_fetch_add(&waits_done, 1);
}

/* Delayed topic operations: completed by a metadata update, or by their timeout. */
static void test_delayed_create(struct gr_broker *b)
{
    const char *names[1] = { "newt" };
    int32_t np[1] = { 2 };
    gr_topic_admin_wait(b->admin, 1, names, np, 10000, on_wait, NULL);
    const char *names2[1] = { "never" };
    gr_topic_admin_wait(b->admin, 1, names2, np, 200, on_wait, NULL);
    CHECK(atomic_load(&waits_done) == 0);
    struct UpdateMetadataRequest_UpdateMetadataPartitionState ps[2] = {
        { .PartitionIndex = 0, .Leader = 1, .ReplicasCount = 2, .Replicas = R12 },
        { .PartitionIndex = 1, .Leader = -1, .ReplicasCount = 2, .Replicas = R12 } };
    struct UpdateMetadataRequest_UpdateMetadataTopicState ts = {
        .TopicName = "newt", .PartitionStatesCount = 2, .PartitionStates = ps };
    struct UpdateMetadataRequest um = { .ControllerId = 2, .ControllerEpoch = 7, .BrokerEpoch = -1,
                                        .TopicStatesCount = 1, .TopicStates = &ts };
    gr_mdc_update(b->metadata, 6, &um, NULL); /* partition 1 still leaderless */
    usleep(100 * 1000);
    CHECK(atomic_load(&waits_done) == 0);
    ps[1].Leader = 2;
    gr_mdc_update(b->metadata, 6, &um, NULL);
    int64_t end = gr_mono_ms() + 3000;
    while (atomic_load(&waits_done) < 2 && gr_mono_ms() < end)
        usleep(10 * 1000);
    CHECK(atomic_load(&waits_done) == 2 && atomic_load(&waits_ready) == 1);
    /* timeout 0: completes at once */
    gr_topic_admin_wait(b->admin, 1, names2, np, 0, on_wait, NULL);
    CHECK(atomic_load(&waits_done) == 3 && atomic_load(&waits_ready) == 1);
}

static void test_unknown_api_closes(int port)
{
    struct gr_net_client *c = NULL;
    CHECK(gr_net_client_connect("127.0.0.1", port, 2000, &c) == 0);
    if (!c)
        return;
    /* Produce needs the replica manager, which this bare broker lacks: the connection must be
     * closed. */
    uint8_t frame[] = { 0, 0, 0, 10, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0 };
    uint8_t *resp = NULL;
    size_t len;
    CHECK(gr_net_client_send_recv(c, frame, sizeof(frame), &resp, &len, 3000) == GR_ECLOSED);
    free(resp);
    gr_net_client_close(c);
    /* ApiVersions v4 is served, so a v4 body it cannot decode (here none at all) closes the
     * connection, as Kafka (only a version it does not serve gets the v0 UNSUPPORTED_VERSION
     * answer whatever the body). */
    c = NULL;
    CHECK(gr_net_client_connect("127.0.0.1", port, 2000, &c) == 0);
    if (!c)
        return;
    uint8_t frame4[] = { 0, 0, 0, 12, 0, 18, 0, 4, 0, 0, 0, 78, 0, 1, 'x', 0 };
    resp = NULL;
    CHECK(gr_net_client_send_recv(c, frame4, sizeof(frame4), &resp, &len, 3000) == GR_ECLOSED);
    free(resp);
    gr_net_client_close(c);
    /* DeleteRecords (key 21) is not in the table: closed too. */
    c = NULL;
    CHECK(gr_net_client_connect("127.0.0.1", port, 2000, &c) == 0);
    if (!c)
        return;
    uint8_t frame21[] = { 0, 0, 0, 10, 0, 21, 0, 0, 0, 0, 0, 1, 0, 0 };
    resp = NULL;
    CHECK(gr_net_client_send_recv(c, frame21, sizeof(frame21), &resp, &len, 3000) == GR_ECLOSED);
    free(resp);
    gr_net_client_close(c);
}

/* The requests to the controller go through controller/requests.h; without a controller (this
 * bare broker) every one of them answers NOT_CONTROLLER instead of hanging or closing. */
static void test_controller_front_door(struct gr_net_client *cli)
{
    struct gr_arena a;
    gr_arena_init(&a);
    int32_t pids[1] = { 0 };
    struct ElectLeadersRequest_TopicPartitions etp = { "orders", 1, pids };
    struct ElectLeadersRequest el = { .ElectionType = 0, .TopicPartitionsCount = 1,
                                      .TopicPartitions = &etp, .TimeoutMs = 1000 };
    struct ElectLeadersResponse *er = call(cli, GR_API_ELECT_LEADERS, 2, &el, &a);
    CHECK(er && er->ErrorCode == 0 && er->ReplicaElectionResultsCount == 1 &&
          strcmp(er->ReplicaElectionResults[0].Topic, "orders") == 0 &&
          er->ReplicaElectionResults[0].PartitionResultCount == 1 &&
          er->ReplicaElectionResults[0].PartitionResult[0].ErrorCode == GR_KERR_NOT_CONTROLLER);
    el.TopicPartitionsCount = -1; /* every partition: a top-level error */
    el.TopicPartitions = NULL;
    er = call(cli, GR_API_ELECT_LEADERS, 2, &el, &a);
    CHECK(er && er->ErrorCode == GR_KERR_NOT_CONTROLLER && er->ReplicaElectionResultsCount == 0);

    struct AlterPartitionRequest ai = { .BrokerId = 2, .BrokerEpoch = 5, .TopicsCount = 0, .Topics = NULL };
    struct AlterPartitionResponse *ar = call(cli, GR_API_ALTER_PARTITION, 0, &ai, &a);
    CHECK(ar && ar->ErrorCode == GR_KERR_NOT_CONTROLLER);

    struct ControlledShutdownRequest cs = { .BrokerId = 2, .BrokerEpoch = 5 };
    struct ControlledShutdownResponse *cr = call(cli, GR_API_CONTROLLED_SHUTDOWN, 3, &cs, &a);
    CHECK(cr && cr->ErrorCode == GR_KERR_NOT_CONTROLLER && cr->RemainingPartitionsCount == 0);

    struct ListPartitionReassignmentsRequest lr = { .TimeoutMs = 1000, .TopicsCount = -1, .Topics = NULL };
    struct ListPartitionReassignmentsResponse *lres = call(cli, GR_API_LIST_PARTITION_REASSIGNMENTS, 0, &lr, &a);
    CHECK(lres && lres->ErrorCode == GR_KERR_NOT_CONTROLLER);

    struct AlterPartitionReassignmentsRequest_ReassignablePartition rp = { 0, 1, pids };
    struct AlterPartitionReassignmentsRequest_ReassignableTopic rt = { "orders", 1, &rp };
    struct AlterPartitionReassignmentsRequest apr = { .TimeoutMs = 1000, .TopicsCount = 1, .Topics = &rt };
    struct AlterPartitionReassignmentsResponse *pres = call(cli, GR_API_ALTER_PARTITION_REASSIGNMENTS, 0, &apr, &a);
    CHECK(pres && pres->ErrorCode == GR_KERR_NOT_CONTROLLER && pres->ResponsesCount == 0);
    gr_arena_free(&a);
}

int main(void)
{
    gr_log_set_level(GR_LOG_ERROR);
    struct gr_config cfg;
    gr_config_defaults(&cfg);
    cfg.auto_create_topics_enable = false;
    struct gr_broker *b = gr_broker_new(&cfg, 1);
    b_under_test = b;
    snprintf(b->cluster_id, sizeof(b->cluster_id), "cid");
    atomic_store(&b->broker_epoch, 42);
    b->hooks.become_leader = hook_leader;
    b->hooks.become_follower = hook_follower;
    b->hooks.stop_replica = hook_stop;

    struct gr_net_listener ls[2] = { { "PLAINTEXT", "127.0.0.1", 0 }, { "INTERNAL", "127.0.0.1", 0 } };
    struct gr_net_config nc;
    gr_net_config_init(&nc);
    nc.listeners = ls;
    nc.num_listeners = 2;
    nc.num_io_threads = 2;
    struct gr_net_server *srv = NULL;
    CHECK(gr_net_server_new(&nc, gr_apis_dispatch, b, &srv) == 0);
    CHECK(srv && gr_net_server_start(srv) == 0);
    int port = gr_net_server_port(srv, 0), port_int = gr_net_server_port(srv, 1);
    struct gr_net_client *cli = NULL, *cli_int = NULL;
    CHECK(gr_net_client_connect("127.0.0.1", port, 2000, &cli) == 0);
    CHECK(gr_net_client_connect("127.0.0.1", port_int, 2000, &cli_int) == 0);
    if (cli && cli_int) {
        test_api_versions(cli);
        test_metadata(cli, cli_int);
        test_control(cli, b);
        test_control_batches(cli, b);
        test_control_topic_ids(cli, b);
        test_create_topics_not_controller(cli, b);
        test_delayed_create(b);
        test_controller_front_door(cli);
        test_unknown_api_closes(port);
    }
    gr_net_client_close(cli);
    gr_net_client_close(cli_int);
    gr_net_server_stop(srv);
    gr_net_server_free(srv);
    gr_metrics_free(swapped_metrics);
    gr_broker_free(b);
    gr_config_release(&cfg);
    if (test_failures) {
        fprintf(stderr, "test_broker_apis: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_broker_apis: ok\n");
    return 0;
}
