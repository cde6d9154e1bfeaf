/* ListOffsets (api key 2), versions 0-5. Leader only (ReplicaId -2, Kafka's debugging id, may ask
 * a follower). Timestamp -2: log start offset; -1: the high watermark for consumers (which is
 * also the last stable offset: no transactions) or the log end offset for replicas; otherwise
 * the first offset whose record timestamp is >= Timestamp, hidden from consumers if it is not
 * below the high watermark. v0 answers OldStyleOffsets with that single offset. KIP-320:
 * CurrentLeaderEpoch (v4+) is checked like Fetch's. A leader whose high watermark lags the start
 * offset of its epoch answers clients OFFSET_NOT_AVAILABLE (Kafka 2.7's fetchOffsetForTimestamp). Needs Topic DESCRIBE, else
 * TOPIC_AUTHORIZATION_FAILED (api/authorize.h). */
#include <string.h>

#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "replication/replica_internal.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"

static void one(struct gr_replica_manager *rm, int16_t ver, const struct ListOffsetsRequest *r, const char *topic,
                const struct ListOffsetsRequest_ListOffsetsPartition *lp,
                struct ListOffsetsResponse_ListOffsetsPartitionResponse *pr) {
    pr->PartitionIndex = lp->PartitionIndex;
    pr->ErrorCode = GR_KERR_NONE;
    pr->Timestamp = -1;
    pr->Offset = -1;
    pr->LeaderEpoch = -1;
    pr->OldStyleOffsetsCount = 0;
    pr->OldStyleOffsets = NULL;
    struct gr_rm_partition *p = rm ? gr_rm_get_partition(rm, topic, lp->PartitionIndex) : NULL;
    if (!p) {
        pr->ErrorCode = rm ? gr_rm_not_hosted_error(rm, topic, lp->PartitionIndex) : GR_KERR_NOT_LEADER_OR_FOLLOWER;
        return;
    }
    pthread_mutex_lock(&p->lock);
    int16_t err = gr_rm_check_epoch_locked(p, ver >= 4 ? lp->CurrentLeaderEpoch : -1, r->ReplicaId != -2);
    int64_t hw = atomic_load(&p->lml->hw);
    int32_t epoch = p->st.leader_epoch;
    /* Kafka 2.7 (KIP-392 era): a new leader whose HW still lags the start of its epoch answers
     * clients (v1+, ReplicaId -1) OFFSET_NOT_AVAILABLE for "latest" and for a timestamp lookup
     * that finds nothing below the HW. */
    bool hw_lagging = ver >= 1 && r->ReplicaId == -1 && p->st.leader_epoch_start_offset > hw;
    pthread_mutex_unlock(&p->lock);
    if (err != GR_KERR_NONE) {
        pr->ErrorCode = err;
        gr_rm_partition_unref(p);
        return;
    }
    struct gr_plog *log = p->lml->log;
    bool consumer = r->ReplicaId < 0;
    if (consumer && ver >= 2 && r->IsolationLevel == 1) hw = gr_plog_last_stable_offset(log, hw); /* read_committed */
    int64_t off = -1, ts = -1;
    if (lp->Timestamp == GR_LIST_OFFSETS_EARLIEST) {
        off = gr_plog_start_offset(log);
    } else if (lp->Timestamp == GR_LIST_OFFSETS_LATEST) {
        off = consumer ? hw : gr_plog_end_offset(log);
        pr->LeaderEpoch = epoch;
        if (hw_lagging) pr->ErrorCode = GR_KERR_OFFSET_NOT_AVAILABLE, off = -1;
    } else {
        if (gr_plog_offset_for_timestamp(log, lp->Timestamp, &off, &ts) < 0) {
            pr->ErrorCode = GR_KERR_KAFKA_STORAGE_ERROR;
        } else if ((off < 0 || off >= hw) && hw_lagging) {
            pr->ErrorCode = GR_KERR_OFFSET_NOT_AVAILABLE;
            off = -1;
            ts = -1;
        } else if (off >= 0 && consumer && off >= hw) {
            off = -1;
            ts = -1;
        }
    }
    pr->Offset = off;
    pr->Timestamp = ts;
    if (ver == 0 && pr->ErrorCode == GR_KERR_NONE) {
        if (off >= 0 && lp->MaxNumOffsets > 0) {
            pr->OldStyleOffsetsCount = 1;
            pr->OldStyleOffsets = &pr->Offset;
        }
    }
    gr_rm_partition_unref(p);
}

void gr_handle_list_offsets(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr, void *body) {
    const struct ListOffsetsRequest *r = body;
    struct ListOffsetsResponse *resp = gr_api_new_response(req);
    resp->ThrottleTimeMs = 0;
    resp->TopicsCount = r->TopicsCount > 0 ? r->TopicsCount : 0;
    resp->Topics = gr_api_alloc(req, (size_t)(resp->TopicsCount + 1) * sizeof *resp->Topics);
    for (int t = 0; t < resp->TopicsCount; t++) {
        const struct ListOffsetsRequest_ListOffsetsTopic *lt = &r->Topics[t];
        struct ListOffsetsResponse_ListOffsetsTopicResponse *tr = &resp->Topics[t];
        tr->Name = lt->Name;
        tr->PartitionsCount = lt->PartitionsCount > 0 ? lt->PartitionsCount : 0;
        tr->Partitions = gr_api_alloc(req, (size_t)(tr->PartitionsCount + 1) * sizeof *tr->Partitions);
        bool ok = gr_api_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, lt->Name);
        for (int i = 0; i < tr->PartitionsCount; i++)
            if (!ok)
                tr->Partitions[i] = (struct ListOffsetsResponse_ListOffsetsPartitionResponse){
                    .PartitionIndex = lt->Partitions[i].PartitionIndex, .ErrorCode = GR_KERR_TOPIC_AUTHORIZATION_FAILED,
                    .Timestamp = -1, .Offset = -1, .LeaderEpoch = -1};
            else
                one(b->replica_manager, hdr->RequestApiVersion, r, lt->Name ? lt->Name : "", &lt->Partitions[i],
                &tr->Partitions[i]);
    }
    gr_api_respond(req, resp);
}
