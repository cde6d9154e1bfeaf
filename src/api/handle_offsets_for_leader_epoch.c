/* OffsetForLeaderEpoch (api key 23), versions 0-4 (KIP-101, KIP-279, KIP-320; v4 is
 * flexible, nothing else changed): for each
 * partition the end offset of the requested leader epoch on this leader, i.e. the start offset
 * of the first epoch after it (or the log end offset for the current epoch), and the largest
 * epoch <= the requested one that this log knows.
 * The lookup is replication/last_offset_for_epoch.c's (gr_rm_last_offset_for_epoch), shared
 * with Fetch v12's diverging-epoch check. */
#include <stdlib.h>
#include <string.h>

#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "replication/replica_internal.h"
#include "common/kerr.h"
#include "common/util.h"

static void one(struct gr_replica_manager *rm, int16_t ver, int32_t replica_id, const char *topic,
                const struct OffsetForLeaderEpochRequest_OffsetForLeaderPartition *q,
                struct OffsetForLeaderEpochResponse_EpochEndOffset *pr) {
    pr->Partition = q->Partition;
    pr->ErrorCode = GR_KERR_NONE;
    pr->LeaderEpoch = -1;
    pr->EndOffset = -1;
    struct gr_rm_partition *p = rm ? gr_rm_get_partition(rm, topic, q->Partition) : NULL;
    if (!p) {
        pr->ErrorCode = rm ? gr_rm_not_hosted_error(rm, topic, q->Partition) : GR_KERR_NOT_LEADER_OR_FOLLOWER;
        return;
    }
    pthread_mutex_lock(&p->lock);
    int16_t err = gr_rm_check_epoch_locked(p, ver >= 2 ? q->CurrentLeaderEpoch : -1, replica_id != -2);
    pthread_mutex_unlock(&p->lock);
    if (err != GR_KERR_NONE) {
        pr->ErrorCode = err;
        gr_rm_partition_unref(p);
        return;
    }
    gr_rm_last_offset_for_epoch(p, q->LeaderEpoch, &pr->LeaderEpoch, &pr->EndOffset);
    gr_rm_partition_unref(p);
}

void gr_handle_offsets_for_leader_epoch(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                        void *body) {
    const struct OffsetForLeaderEpochRequest *r = body;
    int16_t ver = hdr->RequestApiVersion;
    int32_t replica_id = ver >= 3 ? r->ReplicaId : -1;
    struct OffsetForLeaderEpochResponse *resp = gr_api_new_response(req);
    resp->ThrottleTimeMs = 0;
    resp->TopicsCount = r->TopicsCount > 0 ? r->TopicsCount : 0;
    resp->Topics = gr_api_alloc(req, (size_t)(resp->TopicsCount + 1) * sizeof *resp->Topics);
    /* Kafka (KIP-320): Cluster CLUSTER_ACTION (brokers), else Topic DESCRIBE (consumers). */
    bool cluster = gr_api_authorized_quiet(req, GR_ACL_OP_CLUSTER_ACTION, GR_ACL_RES_CLUSTER, GR_ACL_CLUSTER_NAME);
    for (int t = 0; t < resp->TopicsCount; t++) {
        const struct OffsetForLeaderEpochRequest_OffsetForLeaderTopic *qt = &r->Topics[t];
        struct OffsetForLeaderEpochResponse_OffsetForLeaderTopicResult *tr = &resp->Topics[t];
        tr->Topic = qt->Topic;
        tr->PartitionsCount = qt->PartitionsCount > 0 ? qt->PartitionsCount : 0;
        tr->Partitions = gr_api_alloc(req, (size_t)(tr->PartitionsCount + 1) * sizeof *tr->Partitions);
        bool ok = cluster || gr_api_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, qt->Topic);
        for (int i = 0; i < tr->PartitionsCount; i++)
            if (!ok)
                tr->Partitions[i] = (struct OffsetForLeaderEpochResponse_EpochEndOffset){
                    .Partition = qt->Partitions[i].Partition,
                    .ErrorCode = GR_KERR_TOPIC_AUTHORIZATION_FAILED, .LeaderEpoch = -1, .EndOffset = -1};
            else
                one(b->replica_manager, ver, replica_id, qt->Topic ? qt->Topic : "", &qt->Partitions[i], &tr->Partitions[i]);
    }
    gr_api_respond(req, resp);
}
