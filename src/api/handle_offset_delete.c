/* OffsetDelete (api key 47), version 0 (KIP-496), as Kafka 2.7's KafkaApis.handleOffsetDeleteRequest:
 * partitions of topics the metadata cache does not know (or beyond their partition count) get
 * UNKNOWN_TOPIC_OR_PARTITION; the rest go to the group coordinator (gr_gc_delete_offsets). A
 * group-level error answers with that error and no topics. Authorization as Kafka: Group DELETE
 * (else GROUP_AUTHORIZATION_FAILED), then Topic READ per topic (else TOPIC_AUTHORIZATION_FAILED). */
#include <stdbool.h>
#include <stdlib.h>

#include "api/apis.h"
#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "common/kerr.h"
#include "common/util.h"
#include "coordinator/group_coordinator.h"

void gr_handle_offset_delete(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr, void *body) {
    (void)hdr;
    const struct OffsetDeleteRequest *r = body;
    struct OffsetDeleteResponse *resp = gr_api_new_response(req);
    resp->ThrottleTimeMs = 0;
    if (!gr_api_authorized(req, GR_ACL_OP_DELETE, GR_ACL_RES_GROUP, r->GroupId ? r->GroupId : "")) {
        resp->ErrorCode = GR_KERR_GROUP_AUTHORIZATION_FAILED;
        resp->TopicsCount = 0;
        resp->Topics = NULL;
        gr_api_respond(req, resp);
        return;
    }
    int nt = GR_MAX(r->TopicsCount, 0), n = 0;
    for (int t = 0; t < nt; t++) n += GR_MAX(r->Topics[t].PartitionsCount, 0);
    struct gr_gc_offset_delete_part *parts = gr_api_alloc(req, (size_t)(n + 1) * sizeof *parts);
    int k = 0;
    for (int t = 0; t < nt; t++) {
        const struct OffsetDeleteRequest_OffsetDeleteRequestTopic *rt = &r->Topics[t];
        int np = rt->Name && b->metadata ? gr_mdc_num_partitions(b->metadata, rt->Name) : 0;
        bool readable = gr_api_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, rt->Name ? rt->Name : "");
        for (int i = 0; i < GR_MAX(rt->PartitionsCount, 0); i++, k++) {
            int32_t p = rt->Partitions[i].PartitionIndex;
            parts[k] = (struct gr_gc_offset_delete_part){.topic = rt->Name ? rt->Name : "", .partition = p};
            parts[k].error = !readable                ? GR_KERR_TOPIC_AUTHORIZATION_FAILED
                             : p >= 0 && p < np ? GR_KERR_NONE
                                                : GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
        }
    }
    struct gr_group_coordinator *gc = b->group_coordinator;
    resp->ErrorCode = gc ? gr_gc_delete_offsets(gc, r->GroupId, parts, n) : GR_KERR_COORDINATOR_NOT_AVAILABLE;
    if (resp->ErrorCode != GR_KERR_NONE) {
        resp->TopicsCount = 0;
        resp->Topics = NULL;
        gr_api_respond(req, resp);
        return;
    }
    resp->TopicsCount = nt;
    resp->Topics = gr_api_alloc(req, (size_t)(nt + 1) * sizeof *resp->Topics);
    k = 0;
    for (int t = 0; t < nt; t++) {
        const struct OffsetDeleteRequest_OffsetDeleteRequestTopic *rt = &r->Topics[t];
        struct OffsetDeleteResponse_OffsetDeleteResponseTopic *ot = &resp->Topics[t];
        ot->Name = rt->Name ? rt->Name : "";
        ot->PartitionsCount = GR_MAX(rt->PartitionsCount, 0);
        ot->Partitions = gr_api_alloc(req, (size_t)(ot->PartitionsCount + 1) * sizeof *ot->Partitions);
        for (int i = 0; i < ot->PartitionsCount; i++, k++) {
            ot->Partitions[i].PartitionIndex = parts[k].partition;
            ot->Partitions[i].ErrorCode = parts[k].error;
        }
    }
    gr_api_respond(req, resp);
}
