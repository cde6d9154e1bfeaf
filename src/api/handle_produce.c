/* Produce (api key 0), versions 0-8. Records must be RecordBatch v2 (magic 2); the old
 * MessageSet formats get UNSUPPORTED_FOR_MESSAGE_FORMAT from the log's validation, a bad CRC
 * CORRUPT_MESSAGE, a batch above max.message.bytes MESSAGE_TOO_LARGE. acks 0/1 answer after
 * the local append; acks -1 waits in the produce purgatory (replica_manager.c). acks 0 never
 * answers; if any partition failed the connection is closed, as Kafka does, so the producer
 * notices. */
#include <stdio.h>
#include <string.h>

#include "api/handlers.h"
#include "broker/broker.h"
#include "broker/quota_manager.h"
#include "net/server.h"
#include "replication/replica_internal.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"

#define LOGGER "kafka.server.KafkaApis"

struct produce_ctx {
    struct gr_api_req *req;
    const struct ProduceRequest *r;
    int16_t acks;
    int n;
    struct gr_rm_produce_part *parts;
};

static void produce_done(void *ctx, struct gr_rm_produce_part *parts, int n) {
    struct produce_ctx *c = ctx;
    struct gr_api_req *req = c->req;
    /* producer_byte_rate: the request's size, recorded when it completes (KafkaApis) */
    int32_t throttle_ms = gr_quota_throttle(req->broker, req, GR_QUOTA_PRODUCE, (double)req->net->len);
    if (c->acks == 0) {
        for (int i = 0; i < n; i++) {
            if (parts[i].error != GR_KERR_NONE) {
                char reason[160];
                snprintf(reason, sizeof reason, "acks=0 produce to %s-%d failed with %s", parts[i].topic,
                         parts[i].partition, gr_kerr_name(parts[i].error));
                gr_api_close(req, reason);
                return;
            }
        }
        gr_api_respond_none(req);
        return;
    }
    const struct ProduceRequest *r = c->r;
    struct ProduceResponse *resp = gr_api_new_response(req);
    resp->ThrottleTimeMs = throttle_ms;
    resp->ResponsesCount = r->TopicsCount > 0 ? r->TopicsCount : 0;
    resp->Responses = gr_api_alloc(req, (size_t)(resp->ResponsesCount + 1) * sizeof *resp->Responses);
    int k = 0;
    for (int t = 0; t < resp->ResponsesCount; t++) {
        const struct ProduceRequest_TopicProduceData *td = &r->Topics[t];
        struct ProduceResponse_TopicProduceResponse *tr = &resp->Responses[t];
        tr->Name = td->Name;
        tr->PartitionsCount = td->PartitionsCount > 0 ? td->PartitionsCount : 0;
        tr->Partitions = gr_api_alloc(req, (size_t)(tr->PartitionsCount + 1) * sizeof *tr->Partitions);
        for (int i = 0; i < tr->PartitionsCount; i++, k++) {
            struct ProduceResponse_PartitionProduceResponse *pr = &tr->Partitions[i];
            struct gr_rm_produce_part *pp = &parts[k];
            pr->PartitionIndex = pp->partition;
            pr->ErrorCode = pp->error;
            pr->BaseOffset = pp->error == GR_KERR_NONE ? pp->base_offset : -1;
            pr->LogAppendTimeMs = -1;
            pr->LogStartOffset = pp->error == GR_KERR_NONE ? pp->log_start_offset : -1;
            pr->RecordErrorsCount = 0;
            pr->RecordErrors = NULL;
            pr->ErrorMessage = NULL;
        }
    }
    (void)n;
    gr_api_respond(req, resp);
}

void gr_handle_produce(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr, void *body) {
    const struct ProduceRequest *r = body;
    struct gr_replica_manager *rm = b->replica_manager;
    struct produce_ctx *c = gr_api_alloc(req, sizeof *c);
    c->req = req;
    c->r = r;
    c->acks = r->Acks;
    int n = 0;
    for (int t = 0; t < r->TopicsCount; t++) n += r->Topics[t].PartitionsCount > 0 ? r->Topics[t].PartitionsCount : 0;
    c->n = n;
    c->parts = gr_api_alloc(req, (size_t)(n + 1) * sizeof *c->parts);
    bool acks_ok = r->Acks == 0 || r->Acks == 1 || r->Acks == -1;
    int k = 0;
    for (int t = 0; t < r->TopicsCount; t++) {
        const struct ProduceRequest_TopicProduceData *td = &r->Topics[t];
        for (int i = 0; i < td->PartitionsCount; i++, k++) {
            const struct ProduceRequest_PartitionProduceData *pd = &td->Partitions[i];
            struct gr_rm_produce_part *pp = &c->parts[k];
            pp->topic = td->Name ? td->Name : (char *)"";
            pp->partition = pd->PartitionIndex;
            pp->records = (uint8_t *)pd->Records.p; /* points into the request frame, which we own */
            pp->records_len = pd->Records.len > 0 ? (size_t)pd->Records.len : 0;
            pp->base_offset = -1;
            pp->log_start_offset = -1;
            if (!acks_ok)
                pp->error = GR_KERR_INVALID_REQUIRED_ACKS;
            else if (!rm)
                pp->error = GR_KERR_NOT_LEADER_OR_FOLLOWER;
            else if (strcmp(pp->topic, "__consumer_offsets") == 0 || strcmp(pp->topic, "__transaction_state") == 0)
                pp->error = GR_KERR_INVALID_TOPIC_EXCEPTION; /* internal topics: brokers only */
            else if (pd->Records.len <= 0)
                pp->error = GR_KERR_CORRUPT_MESSAGE;
            else
                pp->error = GR_KERR_NONE;
        }
    }
    if (!rm || !acks_ok) {
        produce_done(c, c->parts, n);
        return;
    }
    gr_rm_produce(rm, r->Acks, r->TimeoutMs, c->parts, n, produce_done, c);
}
