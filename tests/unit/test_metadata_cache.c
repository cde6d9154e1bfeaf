/* Metadata cache: UpdateMetadata at v0, v4 (ungrouped) and v6 (grouped), listener endpoints,
 * rack, controller id, partial updates, deletion with leader -2, readiness, and a reader thread
 * that must never observe a half-applied update. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/metadata_cache.h"
#include "common/log.h"
#include "support/check.h"

typedef struct UpdateMetadataRequest_UpdateMetadataPartitionState ps_t;
typedef struct UpdateMetadataRequest_UpdateMetadataTopicState ts_t;
typedef struct UpdateMetadataRequest_UpdateMetadataBroker br_t;
typedef struct UpdateMetadataRequest_UpdateMetadataEndpoint ep_t;

static int32_t R123[] = { 1, 2, 3 };
static int32_t R23[] = { 2, 3 };

static void test_v6(void)
{
    struct gr_mdc *c = gr_mdc_new(1);
    ep_t ep1[2] = { { 9092, "h1", "PLAINTEXT", 0 }, { 9093, "h1i", "INTERNAL", 0 } };
    ep_t ep2[1] = { { 9094, "h2", "PLAINTEXT", 0 } };
    br_t brokers[2] = { { .Id = 2, .EndpointsCount = 1, .Endpoints = ep2, .Rack = NULL },
                        { .Id = 1, .EndpointsCount = 2, .Endpoints = ep1, .Rack = "r1" } };
    ps_t parts[2] = {
        { .PartitionIndex = 1, .ControllerEpoch = 3, .Leader = 2, .LeaderEpoch = 4, .IsrCount = 2,
          .Isr = R23, .ZkVersion = 7, .ReplicasCount = 3, .Replicas = R123,
          .OfflineReplicasCount = 0 },
        { .PartitionIndex = 0, .ControllerEpoch = 3, .Leader = 1, .LeaderEpoch = 0, .IsrCount = 3,
          .Isr = R123, .ZkVersion = 0, .ReplicasCount = 3, .Replicas = R123,
          .OfflineReplicasCount = 0 },
    };
    ts_t topics[1] = { { .TopicName = "t1", .PartitionStatesCount = 2, .PartitionStates = parts } };
    struct UpdateMetadataRequest req = { .ControllerId = 2, .ControllerEpoch = 3, .BrokerEpoch = -1,
                                         .TopicStatesCount = 1, .TopicStates = topics,
                                         .LiveBrokersCount = 2, .LiveBrokers = brokers };
    gr_mdc_update(c, 6, &req, NULL);

    CHECK(gr_mdc_controller_id(c) == 2);
    CHECK(gr_mdc_contains_topic(c, "t1"));
    CHECK(!gr_mdc_contains_topic(c, "t2"));
    CHECK(gr_mdc_num_partitions(c, "t1") == 2);
    CHECK(gr_mdc_topic_ready(c, "t1", 2));
    CHECK(!gr_mdc_topic_ready(c, "t1", 3));

    gr_mdc_rdlock(c);
    CHECK(gr_mdc_num_brokers(c) == 2);
    CHECK(gr_mdc_broker_at(c, 0)->id == 1); /* sorted */
    const struct gr_mdc_broker *b1 = gr_mdc_broker(c, 1);
    CHECK(b1 && b1->rack && strcmp(b1->rack, "r1") == 0);
    const struct gr_mdc_endpoint *e = gr_mdc_broker_endpoint(b1, "INTERNAL");
    CHECK(e && e->port == 9093 && strcmp(e->host, "h1i") == 0);
    CHECK(gr_mdc_broker_endpoint(gr_mdc_broker(c, 2), "INTERNAL") == NULL);
    const struct gr_mdc_topic *t = gr_mdc_topic(c, "t1");
    CHECK(t && t->n_partitions == 2 && t->partitions[0].partition == 0);
    const struct gr_mdc_partition *p1 = gr_mdc_partition(t, 1);
    CHECK(p1 && p1->leader == 2 && p1->leader_epoch == 4 && p1->n_isr == 2 && p1->zk_version == 7);
    gr_mdc_unlock(c);

    char host[64];
    int32_t port = 0;
    CHECK(gr_mdc_get_endpoint(c, 2, "PLAINTEXT", host, sizeof(host), &port) &&
          port == 9094 && strcmp(host, "h2") == 0);

    /* A brokers-only update keeps the partitions but replaces the brokers. */
    struct UpdateMetadataRequest req2 = { .ControllerId = -1, .ControllerEpoch = 4,
                                          .BrokerEpoch = -1, .TopicStatesCount = 0,
                                          .LiveBrokersCount = 1, .LiveBrokers = &brokers[0] };
    gr_mdc_update(c, 6, &req2, NULL);
    CHECK(gr_mdc_controller_id(c) == -1);
    CHECK(gr_mdc_num_partitions(c, "t1") == 2);
    struct gr_broker_meta *m;
    int n;
    gr_mdc_alive_brokers(c, &m, &n);
    CHECK(n == 1 && m[0].id == 2 && m[0].rack == NULL);
    gr_broker_metas_free(m, n);

    /* Deletion: leader -2 removes partitions; a topic without partitions disappears. */
    ps_t del[2] = { { .PartitionIndex = 0, .Leader = -2 }, { .PartitionIndex = 1, .Leader = -2 } };
    ts_t dt = { .TopicName = "t1", .PartitionStatesCount = 1, .PartitionStates = del };
    struct UpdateMetadataRequest req3 = { .ControllerId = 2, .ControllerEpoch = 4, .BrokerEpoch = -1,
                                          .TopicStatesCount = 1, .TopicStates = &dt,
                                          .LiveBrokersCount = 2, .LiveBrokers = brokers };
    int nd = -1;
    gr_mdc_update(c, 6, &req3, &nd);
    CHECK(nd == 1 && gr_mdc_num_partitions(c, "t1") == 1);
    dt.PartitionStates = &del[1];
    gr_mdc_update(c, 6, &req3, &nd);
    CHECK(nd == 1 && !gr_mdc_contains_topic(c, "t1"));
    gr_mdc_free(c);
}

static void test_old_versions(void)
{
    struct gr_mdc *c = gr_mdc_new(1);
    br_t b0 = { .Id = 5, .V0Host = "old", .V0Port = 1234 };
    ps_t p = { .TopicName = "x", .PartitionIndex = 0, .Leader = 5, .LeaderEpoch = 1,
               .IsrCount = 1, .Isr = &b0.Id, .ReplicasCount = 1, .Replicas = &b0.Id };
    struct UpdateMetadataRequest req = { .ControllerId = 5, .ControllerEpoch = 1,
                                         .UngroupedPartitionStatesCount = 1,
                                         .UngroupedPartitionStates = &p, .LiveBrokersCount = 1,
                                         .LiveBrokers = &b0 };
    gr_mdc_update(c, 0, &req, NULL);
    char host[64];
    int32_t port;
    CHECK(gr_mdc_get_endpoint(c, 5, "PLAINTEXT", host, sizeof(host), &port) &&
          port == 1234 && strcmp(host, "old") == 0);
    CHECK(gr_mdc_topic_ready(c, "x", 1));

    /* v1/v2 endpoints have no listener name: the security protocol's name stands in. */
    ep_t ep = { .Port = 9999, .Host = "ssl", .Listener = NULL, .SecurityProtocol = 1 };
    br_t b1 = { .Id = 6, .EndpointsCount = 1, .Endpoints = &ep, .Rack = "rk" };
    struct UpdateMetadataRequest r2 = { .ControllerId = 6, .ControllerEpoch = 2,
                                        .LiveBrokersCount = 1, .LiveBrokers = &b1 };
    gr_mdc_update(c, 1, &r2, NULL);
    CHECK(gr_mdc_get_endpoint(c, 6, "SSL", host, sizeof(host), &port) && port == 9999);
    struct gr_broker_meta *m;
    int n;
    gr_mdc_alive_brokers(c, &m, &n);
    CHECK(n == 1 && m[0].rack == NULL); /* rack only from v2 */
    gr_broker_metas_free(m, n);

    /* v4: offline replicas kept. */
    int32_t off[] = { 3 };
    ps_t p4 = { .TopicName = "y", .PartitionIndex = 2, .Leader = -1, .LeaderEpoch = 0,
                .ReplicasCount = 3, .Replicas = R123, .OfflineReplicasCount = 1,
                .OfflineReplicas = off };
    struct UpdateMetadataRequest r4 = { .ControllerId = 6, .ControllerEpoch = 2,
                                        .UngroupedPartitionStatesCount = 1,
                                        .UngroupedPartitionStates = &p4 };
    gr_mdc_update(c, 4, &r4, NULL);
    struct gr_mdc_partition cp;
    CHECK(gr_mdc_get_partition(c, "y", 2, &cp) && cp.n_offline == 1 &&
          cp.offline[0] == 3 && cp.leader == -1);
    gr_mdc_partition_release(&cp);
    CHECK(!gr_mdc_topic_ready(c, "y", 3)); /* no leader, and p0/p1 missing */
    CHECK(gr_mdc_num_partitions(c, "x") == 1); /* still there */
    gr_mdc_free(c);
}

/* The writer alternates two complete states: (A) topic "a" 8 partitions all led by 1, brokers
 * {1}; (B) topic "a" 8 partitions led by 2, brokers {1,2}. A reader must always see one of them
 * whole. */
static struct gr_mdc *shared;
static atomic_bool stop;
static atomic_int torn;

static void *reader(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        gr_mdc_rdlock(shared);
        int nb = gr_mdc_num_brokers(shared);
        const struct gr_mdc_topic *t = gr_mdc_topic(shared, "a");
        if (t) {
            int32_t want = nb == 1 ? 1 : 2;
            for (int i = 0; i < t->n_partitions; i++)
                if (t->partitions[i].leader != want)
                    atomic_fetch_add(&torn, 1);
            if (t->n_partitions != 8)
                atomic_fetch_add(&torn, 1);
        }
        gr_mdc_unlock(shared);
    }
    return NULL;
}

static void test_concurrent(void)
{
    shared = gr_mdc_new(1);
    ep_t ep = { 9092, "h", "PLAINTEXT", 0 };
    br_t brokers[2] = { { .Id = 1, .EndpointsCount = 1, .Endpoints = &ep },
                        { .Id = 2, .EndpointsCount = 1, .Endpoints = &ep } };
    ps_t pa[8], pb[8];
    for (int i = 0; i < 8; i++) {
        pa[i] = (ps_t){ .PartitionIndex = i, .Leader = 1, .ReplicasCount = 3, .Replicas = R123 };
        pb[i] = (ps_t){ .PartitionIndex = i, .Leader = 2, .ReplicasCount = 3, .Replicas = R123 };
    }
    ts_t ta = { .TopicName = "a", .PartitionStatesCount = 8, .PartitionStates = pa };
    ts_t tb = { .TopicName = "a", .PartitionStatesCount = 8, .PartitionStates = pb };
    struct UpdateMetadataRequest ra = { .ControllerId = 1, .TopicStatesCount = 1,
                                        .TopicStates = &ta, .LiveBrokersCount = 1,
                                        .LiveBrokers = brokers };
    struct UpdateMetadataRequest rb = { .ControllerId = 1, .TopicStatesCount = 1,
                                        .TopicStates = &tb, .LiveBrokersCount = 2,
                                        .LiveBrokers = brokers };
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, reader, NULL);
    for (int i = 0; i < 2000; i++)
        gr_mdc_update(shared, 6, (i & 1) ? &rb : &ra, NULL);
    atomic_store(&stop, true);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    CHECK(atomic_load(&torn) == 0);
    CHECK(gr_mdc_generation(shared) == 2000);
    gr_mdc_free(shared);
}

/* Memory per replica (issue 14): a topic created by one UpdateMetadata gets an array of exactly
 * its partitions (doubling left up to half unused), and a partition's replicas, ISR and offline
 * replicas share one allocation; later additions and removals keep every partition intact. */
static void test_compact(void)
{
    struct gr_mdc *c = gr_mdc_new(1);
    int32_t off[] = { 3 };
    ps_t parts[10];
    for (int i = 0; i < 10; i++)
        parts[i] = (ps_t){ .PartitionIndex = i, .Leader = 1 + i % 3, .IsrCount = 2, .Isr = R23,
                           .ReplicasCount = 3, .Replicas = R123, .OfflineReplicasCount = i == 4,
                           .OfflineReplicas = off };
    ts_t t10 = { .TopicName = "ten", .PartitionStatesCount = 10, .PartitionStates = parts };
    struct UpdateMetadataRequest req = { .ControllerId = 1, .TopicStatesCount = 1, .TopicStates = &t10 };
    gr_mdc_update(c, 6, &req, NULL);
    gr_mdc_rdlock(c);
    const struct gr_mdc_topic *t = gr_mdc_topic(c, "ten");
    CHECKF(t && t->n_partitions == 10 && t->cap == 10, "cap %d for 10 partitions", t ? t->cap : -1);
    for (int i = 0; t && i < 10; i++) {
        const struct gr_mdc_partition *p = &t->partitions[i];
        CHECK(p->n_replicas == 3 && p->replicas[2] == 3 && p->n_isr == 2 && p->isr == p->replicas + 3 &&
              p->isr[1] == 3);
        CHECK(i == 4 ? p->n_offline == 1 && p->offline == p->replicas + 5 && p->offline[0] == 3
                     : p->n_offline == 0 && p->offline == NULL);
    }
    gr_mdc_unlock(c);
    /* one more partition (v4, ungrouped), then partition 0 deleted */
    ps_t p10 = { .TopicName = "ten", .PartitionIndex = 10, .Leader = 2, .IsrCount = 1, .Isr = R23,
                 .ReplicasCount = 2, .Replicas = R23 };
    struct UpdateMetadataRequest r4 = { .ControllerId = 1, .UngroupedPartitionStatesCount = 1,
                                        .UngroupedPartitionStates = &p10 };
    gr_mdc_update(c, 4, &r4, NULL);
    ps_t del = { .TopicName = "ten", .PartitionIndex = 0, .Leader = GR_LEADER_DURING_DELETE };
    struct UpdateMetadataRequest rd = { .ControllerId = 1, .UngroupedPartitionStatesCount = 1,
                                        .UngroupedPartitionStates = &del };
    gr_mdc_update(c, 4, &rd, NULL);
    struct gr_mdc_partition cp;
    CHECK(gr_mdc_num_partitions(c, "ten") == 10);
    CHECK(gr_mdc_get_partition(c, "ten", 10, &cp) && cp.n_replicas == 2 && cp.n_isr == 1 && cp.isr[0] == 2);
    gr_mdc_partition_release(&cp);
    CHECK(gr_mdc_get_partition(c, "ten", 4, &cp) && cp.n_offline == 1 && cp.offline[0] == 3 && cp.n_isr == 2);
    gr_mdc_partition_release(&cp);
    gr_mdc_free(c);
}

/* KIP-516: UpdateMetadata v7+ topic ids, looked up both ways; a re-created topic's new id
 * replaces the old one; a zero id clears; deletion forgets the id. */
static void test_topic_ids(void)
{
    struct gr_mdc *c = gr_mdc_new(1);
    ps_t p0 = { .PartitionIndex = 0, .Leader = 1, .ReplicasCount = 1, .Replicas = R123, .IsrCount = 1, .Isr = R123 };
    ts_t topics[3] = { { .TopicName = "a", .PartitionStatesCount = 1, .PartitionStates = &p0 },
                       { .TopicName = "b", .PartitionStatesCount = 1, .PartitionStates = &p0 },
                       { .TopicName = "c", .PartitionStatesCount = 1, .PartitionStates = &p0 } };
    for (int i = 0; i < 3; i++)
        topics[i].TopicId[15] = (uint8_t)(10 + i), topics[i].TopicId[0] = (uint8_t)(3 - i);
    struct UpdateMetadataRequest req = { .ControllerId = 1, .ControllerEpoch = 1, .BrokerEpoch = -1,
                                         .TopicStatesCount = 3, .TopicStates = topics };
    gr_mdc_update(c, 8, &req, NULL);
    struct gr_uuid id, want = { { 0 } };
    want.b[0] = 2, want.b[15] = 11;
    CHECK(gr_mdc_topic_id(c, "b", &id) && gr_uuid_equal(&id, &want));
    CHECK(!gr_mdc_topic_id(c, "zz", &id));
    char *name = gr_mdc_topic_name_by_id(c, &want);
    CHECK(name && strcmp(name, "b") == 0);
    free(name);
    struct gr_uuid zero = { { 0 } };
    CHECK(gr_mdc_topic_name_by_id(c, &zero) == NULL);
    /* "b" re-created: new id; the old one resolves to nothing */
    topics[1].TopicId[15] = 99;
    req.TopicStatesCount = 1;
    req.TopicStates = &topics[1];
    gr_mdc_update(c, 8, &req, NULL);
    CHECK(gr_mdc_topic_name_by_id(c, &want) == NULL);
    want.b[15] = 99;
    name = gr_mdc_topic_name_by_id(c, &want);
    CHECK(name && strcmp(name, "b") == 0);
    free(name);
    /* v6 carries no id: the topic has none (Kafka's ZkMetadataCache) */
    gr_mdc_update(c, 6, &req, NULL);
    CHECK(!gr_mdc_topic_id(c, "b", &id) && gr_mdc_topic_name_by_id(c, &want) == NULL);
    /* deleting "a" forgets its id; "c" still resolves */
    ps_t d0 = { .PartitionIndex = 0, .Leader = -2 };
    ts_t da = { .TopicName = "a", .PartitionStatesCount = 1, .PartitionStates = &d0 };
    da.TopicId[0] = 3, da.TopicId[15] = 10;
    req.TopicStates = &da;
    gr_mdc_update(c, 8, &req, NULL);
    struct gr_uuid aid = { { 0 } }, cid = { { 0 } };
    aid.b[0] = 3, aid.b[15] = 10, cid.b[0] = 1, cid.b[15] = 12;
    CHECK(gr_mdc_topic_name_by_id(c, &aid) == NULL);
    name = gr_mdc_topic_name_by_id(c, &cid);
    CHECK(name && strcmp(name, "c") == 0);
    free(name);
    gr_mdc_free(c);
}

int main(void)
{
    test_topic_ids();
    gr_log_set_level(GR_LOG_WARN);
    test_compact();
    test_v6();
    test_old_versions();
    test_concurrent();
    if (test_failures) {
        fprintf(stderr, "test_metadata_cache: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_metadata_cache: ok\n");
    return 0;
}
