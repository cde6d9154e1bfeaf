/* OffsetForLeaderEpoch (api key 23), versions 0-3 (KIP-101, KIP-279, KIP-320): for each
 * partition the end offset of the requested leader epoch on this leader, i.e. the start offset
 * of the first epoch after it (or the log end offset for the current epoch), and the largest
 * epoch <= the requested one that this log knows.
 *
 * The answer is computed from the log's leader-epoch cache plus, on a leader that has not yet
 * appended in its current epoch, a virtual entry (current epoch, offset at which it became
 * leader) — Kafka writes that entry into the cache at election time; here the log records an
 * epoch only with its first batch, so the leader supplies it. Without it a follower that wrote
 * ahead in an epoch the new leader never saw would not be told where to truncate. */
#include <stdlib.h>
#include <string.h>

#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "replication/replica_internal.h"
#include "common/kerr.h"
#include "common/util.h"

/* Kafka's LeaderEpochFileCache.endOffsetFor over (epochs, starts)[0..n). */
static void end_offset_for(const int32_t *epochs, const int64_t *starts, int n, int32_t requested, int64_t leo,
                           int32_t *epoch_out, int64_t *end_out) {
    *epoch_out = -1;
    *end_out = -1;
    if (requested < 0 || n == 0) return;
    if (requested == epochs[n - 1]) {
        *epoch_out = requested;
        *end_out = leo;
        return;
    }
    int h = 0;
    while (h < n && epochs[h] <= requested) h++;
    if (h == n) return; /* newer than anything we know */
    *end_out = starts[h];
    *epoch_out = h == 0 ? requested : epochs[h - 1];
}

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
    bool leader = gr_rs_is_leader(&p->st);
    int32_t cur_epoch = p->st.leader_epoch;
    int64_t cur_start = p->st.leader_epoch_start_offset;
    pthread_mutex_unlock(&p->lock);
    if (err != GR_KERR_NONE) {
        pr->ErrorCode = err;
        gr_rm_partition_unref(p);
        return;
    }
    struct gr_plog *log = p->lml->log;
    int32_t sepochs[64];
    int64_t sstarts[64];
    int32_t *epochs = sepochs;
    int64_t *starts = sstarts;
    int n = gr_plog_epoch_entries(log, epochs, starts, 63);
    if (n > 63) {
        epochs = gr_malloc((size_t)(n + 1) * sizeof *epochs);
        starts = gr_malloc((size_t)(n + 1) * sizeof *starts);
        int m = gr_plog_epoch_entries(log, epochs, starts, n);
        n = GR_MIN(m, n);
    }
    int64_t leo = gr_plog_end_offset(log);
    if (leader && cur_epoch >= 0 && cur_start >= 0 && (n == 0 || epochs[n - 1] < cur_epoch)) {
        epochs[n] = cur_epoch;
        starts[n] = cur_start;
        n++;
    }
    end_offset_for(epochs, starts, n, q->LeaderEpoch, leo, &pr->LeaderEpoch, &pr->EndOffset);
    if (epochs != sepochs) {
        free(epochs);
        free(starts);
    }
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
