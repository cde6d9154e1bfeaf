/* DeleteRecords (api key 21), versions 0-2 (flexible 2+). Leader only: each partition's log start
 * offset moves to the requested offset (-1 = the high watermark); offsets below 0 or above the
 * HW give OFFSET_OUT_OF_RANGE, a topic without cleanup.policy delete POLICY_VIOLATION, an internal
 * topic INVALID_TOPIC_EXCEPTION (Kafka allows those only to its own admin client id). The answer
 * waits until the low watermark (smallest log start of the leader and its in-sync followers)
 * reaches the offset, REQUEST_TIMED_OUT after TimeoutMs (replication/delete_records.c). */
#include <string.h>

#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "common/kerr.h"
#include "common/util.h"
#include "replication/replica_internal.h"

struct dr_ctx {
    struct gr_api_req *req;
    const struct DeleteRecordsRequest *r;
    struct gr_rm_delete_records_part *parts;
};

static void dr_done(void *ctx, struct gr_rm_delete_records_part *parts, int n) {
    struct dr_ctx *c = ctx;
    const struct DeleteRecordsRequest *r = c->r;
    struct DeleteRecordsResponse *resp = gr_api_new_response(c->req);
    resp->ThrottleTimeMs = 0;
    resp->TopicsCount = r->TopicsCount > 0 ? r->TopicsCount : 0;
    resp->Topics = gr_api_alloc(c->req, (size_t)(resp->TopicsCount + 1) * sizeof *resp->Topics);
    int k = 0;
    for (int t = 0; t < resp->TopicsCount; t++) {
        const struct DeleteRecordsRequest_DeleteRecordsTopic *rt = &r->Topics[t];
        struct DeleteRecordsResponse_DeleteRecordsTopicResult *tr = &resp->Topics[t];
        tr->Name = rt->Name;
        tr->PartitionsCount = rt->PartitionsCount > 0 ? rt->PartitionsCount : 0;
        tr->Partitions = gr_api_alloc(c->req, (size_t)(tr->PartitionsCount + 1) * sizeof *tr->Partitions);
        for (int i = 0; i < tr->PartitionsCount && k < n; i++, k++) {
            tr->Partitions[i].PartitionIndex = parts[k].partition;
            tr->Partitions[i].ErrorCode = parts[k].error;
            tr->Partitions[i].LowWatermark = parts[k].error == GR_KERR_NONE ? parts[k].low_watermark : -1;
        }
    }
    gr_api_respond(c->req, resp);
}

void gr_handle_delete_records(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                              void *body) {
    (void)hdr;
    const struct DeleteRecordsRequest *r = body;
    struct dr_ctx *c = gr_api_alloc(req, sizeof *c);
    c->req = req;
    c->r = r;
    int n = 0;
    for (int t = 0; t < r->TopicsCount; t++) n += r->Topics[t].PartitionsCount > 0 ? r->Topics[t].PartitionsCount : 0;
    c->parts = gr_api_alloc(req, (size_t)(n + 1) * sizeof *c->parts);
    int k = 0;
    for (int t = 0; t < r->TopicsCount; t++) {
        const struct DeleteRecordsRequest_DeleteRecordsTopic *rt = &r->Topics[t];
        const char *topic = rt->Name ? rt->Name : "";
        bool internal = strcmp(topic, "__consumer_offsets") == 0 || strcmp(topic, "__transaction_state") == 0;
        bool allowed = gr_api_authorized(req, GR_ACL_OP_DELETE, GR_ACL_RES_TOPIC, topic); /* Kafka 2.7: Topic DELETE */
        for (int i = 0; i < rt->PartitionsCount; i++, k++) {
            struct gr_rm_delete_records_part *dp = &c->parts[k];
            dp->topic = topic;
            dp->partition = rt->Partitions[i].PartitionIndex;
            dp->offset = rt->Partitions[i].Offset;
            dp->error = !allowed ? GR_KERR_TOPIC_AUTHORIZATION_FAILED
                        : internal ? GR_KERR_INVALID_TOPIC_EXCEPTION
                                   : GR_KERR_NONE;
        }
    }
    gr_rm_delete_records(b->replica_manager, r->TimeoutMs, c->parts, n, dr_done, c);
}
