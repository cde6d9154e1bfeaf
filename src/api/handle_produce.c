/* Produce (api key 0), versions 0-8. Records are RecordBatch v2 (magic 2); v0-v2 requests may
 * carry the old MessageSets (magic 0/1), converted to one v2 batch before the append
 * (storage/legacy_records.h); v3+ with magic 0/1 get INVALID_RECORD as Kafka; a bad CRC
 * CORRUPT_MESSAGE, a batch above max.message.bytes MESSAGE_TOO_LARGE. acks 0/1 answer after
 * the local append; acks -1 waits in the produce purgatory (replica_manager.c). acks 0 never
 * answers; if any partition failed the connection is closed, as Kafka does, so the producer
 * notices. Idempotent batches (producerId >= 0) are checked against the partition's producer
 * state (storage/log.h): a retry of a cached batch is answered NONE with its original base offset
 * (and, as Kafka 2.7, its maxTimestamp as LogAppendTimeMs) without being appended -- with acks -1
 * it still waits until the high watermark passes it; OUT_OF_ORDER_SEQUENCE_NUMBER,
 * INVALID_PRODUCER_EPOCH or INVALID_TXN_STATE otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker_topic_stats.h"
#include "broker/broker.h"
#include "storage/legacy_records.h"
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

/* BrokerTopicMetrics, per partition as Kafka's appendToLocalLog marks them. */
static void produce_metrics(struct gr_metrics *reg, const struct gr_rm_produce_part *parts, int n) {
    for (int i = 0; i < n && reg; i++) {
        const struct gr_rm_produce_part *pp = &parts[i];
        gr_bts_mark(reg, pp->topic, "TotalProduceRequestsPerSec", 1);
        if (pp->error != GR_KERR_NONE) {
            gr_bts_mark(reg, pp->topic, "FailedProduceRequestsPerSec", 1);
            continue;
        }
        gr_bts_mark(reg, pp->topic, "BytesInPerSec", (int64_t)pp->records_len);
        gr_bts_mark(reg, pp->topic, "MessagesInPerSec", gr_bts_record_count(pp->records, pp->records_len));
    }
}

static void produce_done(void *ctx, struct gr_rm_produce_part *parts, int n) {
    struct produce_ctx *c = ctx;
    struct gr_api_req *req = c->req;
    produce_metrics(req->broker ? req->broker->metrics : NULL, parts, n);
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
    resp->ThrottleTimeMs = 0;
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
            pr->LogAppendTimeMs = pp->error == GR_KERR_NONE ? pp->log_append_time : -1;
            pr->LogStartOffset = pp->error == GR_KERR_NONE ? pp->log_start_offset : -1;
            pr->RecordErrorsCount = 0;
            pr->RecordErrors = NULL;
            pr->ErrorMessage = NULL;
        }
    }
    (void)n;
    gr_api_respond(req, resp);
}

/* Magic 0/1 message sets (Kafka's LogValidator up-conversion): v0-v2 are converted to a v2 batch
 * in the request's arena (pp->records then points at it), v3+ refused. NONE or the error. */
static int16_t convert_legacy(struct gr_api_req *req, int16_t version, struct gr_rm_produce_part *pp) {
    int magic = gr_records_magic(pp->records, pp->records_len);
    if (magic != 0 && magic != 1) return GR_KERR_NONE;
    if (version >= 3) return GR_KERR_INVALID_RECORD;
    uint8_t *out;
    size_t len;
    int16_t e = gr_legacy_to_v2(pp->records, pp->records_len, &out, &len);
    if (e != GR_KERR_NONE) return e;
    pp->records = gr_api_alloc(req, len);
    memcpy(pp->records, out, len);
    pp->records_len = len;
    free(out);
    return GR_KERR_NONE;
}

/* Kafka's request-level checks: transactional records need TransactionalId WRITE, idempotent
 * ones (a batch with a producer id) Cluster IDEMPOTENT_WRITE. NONE or the error every partition
 * gets. */
static int16_t produce_auth_error(struct gr_api_req *req, const struct ProduceRequest *r) {
    if (!gr_api_authorizer_enabled(req)) return GR_KERR_NONE;
    bool idempotent = false, transactional = false;
    for (int t = 0; t < r->TopicsCount; t++)
        for (int i = 0; i < r->Topics[t].PartitionsCount; i++) {
            const uint8_t *p = r->Topics[t].Partitions[i].Records.p;
            int64_t len = r->Topics[t].Partitions[i].Records.len;
            /* RecordBatch v2: batchLength @8, magic @16, attributes @21, producerId @43 */
            for (int64_t off = 0; p && off + 61 <= len;) {
                int32_t blen = (int32_t)((uint32_t)p[off + 8] << 24 | (uint32_t)p[off + 9] << 16 |
                                         (uint32_t)p[off + 10] << 8 | p[off + 11]);
                if (p[off + 16] != 2 || blen < 49) break;
                int64_t pid = 0;
                for (int k = 0; k < 8; k++) pid = (int64_t)((uint64_t)pid << 8 | p[off + 43 + k]);
                if (pid >= 0) idempotent = true;
                if (p[off + 22] & 0x10) transactional = true;
                off += 12 + (int64_t)blen;
            }
        }
    if (transactional && !gr_api_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TRANSACTIONAL_ID,
                                            r->TransactionalId ? r->TransactionalId : ""))
        return GR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    if (!transactional && idempotent && !gr_api_authorized_cluster(req, GR_ACL_OP_IDEMPOTENT_WRITE))
        return GR_KERR_CLUSTER_AUTHORIZATION_FAILED;
    return GR_KERR_NONE;
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
    int16_t auth_err = produce_auth_error(req, r);
    int k = 0;
    for (int t = 0; t < r->TopicsCount; t++) {
        const struct ProduceRequest_TopicProduceData *td = &r->Topics[t];
        bool can_write = auth_err == GR_KERR_NONE && gr_api_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TOPIC, td->Name);
        for (int i = 0; i < td->PartitionsCount; i++, k++) {
            const struct ProduceRequest_PartitionProduceData *pd = &td->Partitions[i];
            struct gr_rm_produce_part *pp = &c->parts[k];
            pp->topic = td->Name ? td->Name : (char *)"";
            pp->partition = pd->PartitionIndex;
            pp->records = (uint8_t *)pd->Records.p; /* points into the request frame, which we own */
            pp->records_len = pd->Records.len > 0 ? (size_t)pd->Records.len : 0;
            pp->base_offset = -1;
            pp->log_start_offset = -1;
            pp->log_append_time = -1;
            if (!acks_ok)
                pp->error = GR_KERR_INVALID_REQUIRED_ACKS;
            else if (auth_err != GR_KERR_NONE)
                pp->error = auth_err;
            else if (!can_write)
                pp->error = GR_KERR_TOPIC_AUTHORIZATION_FAILED;
            else if (!rm)
                pp->error = GR_KERR_NOT_LEADER_OR_FOLLOWER;
            else if (strcmp(pp->topic, "__consumer_offsets") == 0 || strcmp(pp->topic, "__transaction_state") == 0)
                pp->error = GR_KERR_INVALID_TOPIC_EXCEPTION; /* internal topics: brokers only */
            else if (pd->Records.len <= 0)
                pp->error = GR_KERR_CORRUPT_MESSAGE;
            else
                pp->error = convert_legacy(req, hdr->RequestApiVersion, pp);
        }
    }
    if (!rm || !acks_ok) {
        produce_done(c, c->parts, n);
        return;
    }
    gr_rm_produce(rm, r->Acks, r->TimeoutMs, c->parts, n, produce_done, c);
}
