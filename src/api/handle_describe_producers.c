/* DescribeProducers (api key 61), version 0 (KIP-664, Kafka 3.0), as Kafka 3.9's
 * KafkaApis.handleDescribeProducersRequest: per topic, an invalid name answers
 * INVALID_TOPIC_EXCEPTION, a topic the principal may not READ
 * TOPIC_AUTHORIZATION_FAILED, a topic the metadata cache does not know UNKNOWN_TOPIC_OR_PARTITION,
 * for each requested partition, with Kafka's message (ApiError); otherwise each partition gets the producer states of its local
 * replica (replication/active_producers.c: leader or follower, as Kafka; NOT_LEADER_OR_FOLLOWER
 * when not hosted here, KAFKA_STORAGE_ERROR after a log directory failure). The response is as
 * large as the request's partitions times their producers: a request naming one busy partition
 * millions of times would make a response thousands of times its size, so past
 * GR_DESCRIBE_PRODUCERS_MAX_ENTRIES partition answers plus producer states the connection is
 * closed instead (Kafka has no such bound; its admin client asks 500 partitions at a time). */
#include <stdio.h>
#include <stdlib.h>

#include "admin/topic_names.h"
#include "api/apis.h"
#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "common/kerr.h"
#include "common/util.h"
#include "replication/replica_manager.h"
#include "storage/producer_state.h"

#define GR_DESCRIBE_PRODUCERS_MAX_ENTRIES (1 << 20)

/* Returns how many producer states it added. */
static int fill_partition(struct gr_broker *b, struct gr_api_req *req, const char *topic,
                          struct DescribeProducersResponse_PartitionResponse *pr, int64_t room) {
    struct gr_pstate_entry *v = NULL;
    int n = 0;
    pr->ErrorCode = gr_rm_active_producers(b->replica_manager, topic, pr->PartitionIndex, &v, &n);
    if (pr->ErrorCode != GR_KERR_NONE) n = 0;
    if (n > room) {
        free(v);
        return n;
    }
    pr->ActiveProducersCount = n;
    pr->ActiveProducers = gr_api_alloc(req, (size_t)(n + 1) * sizeof *pr->ActiveProducers);
    for (int i = 0; i < n; i++) {
        const struct gr_pstate_entry *e = &v[i];
        struct DescribeProducersResponse_ProducerState *s = &pr->ActiveProducers[i];
        s->ProducerId = e->producer_id;
        s->ProducerEpoch = e->epoch;
        s->LastSequence = e->n > 0 ? e->batches[e->n - 1].last_seq : -1;
        s->LastTimestamp = e->last_timestamp;
        s->CoordinatorEpoch = e->coordinator_epoch;
        s->CurrentTxnStartOffset = e->txn_first_offset;
    }
    free(v);
    return n;
}

void gr_handle_describe_producers(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                  void *body) {
    (void)hdr;
    const struct DescribeProducersRequest *r = body;
    struct DescribeProducersResponse *resp = gr_api_new_response(req);
    int nt = GR_MAX(r->TopicsCount, 0);
    resp->ThrottleTimeMs = 0;
    resp->TopicsCount = nt;
    resp->Topics = gr_api_alloc(req, (size_t)(nt + 1) * sizeof *resp->Topics);
    int64_t entries = 0;
    for (int t = 0; t < nt; t++) {
        const struct DescribeProducersRequest_TopicRequest *rt = &r->Topics[t];
        struct DescribeProducersResponse_TopicResponse *ot = &resp->Topics[t];
        const char *name = rt->Name ? rt->Name : "";
        ot->Name = (char *)name;
        char msg[200];
        msg[0] = 0;
        int16_t terr = gr_topic_validate_name(name, msg, sizeof msg);
        if (terr == GR_KERR_NONE && !gr_api_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, name))
            terr = GR_KERR_TOPIC_AUTHORIZATION_FAILED;
        else if (terr == GR_KERR_NONE && (!b->metadata || !gr_mdc_contains_topic(b->metadata, name)))
            terr = GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
        /* Kafka's ApiError(Errors) carries the error's default message */
        if (terr == GR_KERR_TOPIC_AUTHORIZATION_FAILED) snprintf(msg, sizeof msg, "Topic authorization failed.");
        if (terr == GR_KERR_UNKNOWN_TOPIC_OR_PARTITION)
            snprintf(msg, sizeof msg, "This server does not host this topic-partition.");
        int np = GR_MAX(rt->PartitionIndexesCount, 0);
        if ((entries += np) > GR_DESCRIBE_PRODUCERS_MAX_ENTRIES) goto too_large;
        ot->PartitionsCount = np;
        ot->Partitions = gr_api_alloc(req, (size_t)(np + 1) * sizeof *ot->Partitions);
        for (int i = 0; i < np; i++) {
            struct DescribeProducersResponse_PartitionResponse *pr = &ot->Partitions[i];
            pr->PartitionIndex = rt->PartitionIndexes[i];
            pr->ErrorMessage = NULL;
            if (terr != GR_KERR_NONE) {
                pr->ErrorCode = terr;
                if (msg[0]) pr->ErrorMessage = gr_api_strdup(req, msg);
                pr->ActiveProducersCount = 0;
                pr->ActiveProducers = NULL;
                continue;
            }
            entries += fill_partition(b, req, name, pr, GR_DESCRIBE_PRODUCERS_MAX_ENTRIES - entries);
            if (entries > GR_DESCRIBE_PRODUCERS_MAX_ENTRIES) goto too_large;
        }
    }
    gr_api_respond(req, resp);
    return;
too_large:
    gr_api_close(req, "DescribeProducers: the answer would hold over 2^20 partitions and producer states");
}
