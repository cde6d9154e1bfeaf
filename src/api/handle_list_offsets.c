/* ListOffsets (api key 2), versions 0-9 (v6 flexible). Leader only (ReplicaId -2, Kafka's
 * debugging id, may ask a follower). Timestamp -2 (EARLIEST): log start offset; -1 (LATEST): the
 * high watermark for consumers (the last stable offset for read_committed) or the log end offset
 * for replicas; -3 (MAX_TIMESTAMP, v7+, KIP-734): the offset and timestamp of the record with the
 * largest timestamp (compressed batches decompressed; storage/log.h); -4 (EARLIEST_LOCAL, v8+,
 * KIP-405): without tiered storage the log start offset, as EARLIEST; -5 (LATEST_TIERED, v9+,
 * KIP-1005): what a 3.9 broker without tiered storage answers, offset -1, timestamp -1, leader
 * epoch -1, no error; otherwise the first offset whose record timestamp is >= Timestamp. As
 * Kafka 3.9's handleListOffsetRequestV1AndAbove, a negative Timestamp other than these, or one
 * older than the version that introduced it, is UNSUPPORTED_VERSION (v1+), and a partition named
 * twice INVALID_REQUEST (v1+, every entry of it). Everything but
 * EARLIEST/EARLIEST_LOCAL/LATEST is hidden from consumers if it is not below the high watermark
 * (LSO for read_committed). v0 answers OldStyleOffsets with that single offset. LeaderEpoch (v4+):
 * the leader's epoch for LATEST, else the epoch of the answered offset in the log's epoch cache
 * (Kafka takes the batch's partitionLeaderEpoch; the cache records the same epochs). KIP-320:
 * CurrentLeaderEpoch (v4+) is checked like Fetch's. A leader whose high watermark lags the start
 * offset of its epoch answers clients OFFSET_NOT_AVAILABLE for LATEST and for a look-up whose
 * answer is not below the high watermark (Kafka's fetchOffsetForTimestamp). Needs Topic DESCRIBE,
 * else TOPIC_AUTHORIZATION_FAILED (api/authorize.h). */
#include <stdlib.h>
#include <string.h>

#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "replication/replica_internal.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"

/* The version that introduced each negative Timestamp (Kafka 3.9's timestampMinSupportedVersion);
 * -1 for values that are not one. */
static int16_t timestamp_min_version(int64_t ts) {
    switch (ts) {
    case GR_LIST_OFFSETS_EARLIEST:
    case GR_LIST_OFFSETS_LATEST: return 1;
    case GR_LIST_OFFSETS_MAX_TIMESTAMP: return 7;
    case GR_LIST_OFFSETS_EARLIEST_LOCAL: return 8;
    case GR_LIST_OFFSETS_LATEST_TIERED: return 9;
    default: return -1;
    }
}

/* The epoch of offset in the log's epoch cache (Kafka's epochForOffset), -1 if none. */
static int32_t epoch_for_offset(struct gr_plog *log, int64_t offset) {
    int32_t epochs[64];
    int64_t starts[64];
    int n = gr_plog_epoch_entries(log, epochs, starts, 64);
    if (n > 64) { /* rare: a long history; look at all of it */
        int32_t *e = gr_malloc((size_t)n * sizeof *e);
        int64_t *st = gr_malloc((size_t)n * sizeof *st);
        int m = GR_MIN(gr_plog_epoch_entries(log, e, st, n), n);
        int32_t r = -1;
        for (int i = 0; i < m && st[i] <= offset; i++) r = e[i];
        free(e);
        free(st);
        return r;
    }
    int32_t r = -1;
    for (int i = 0; i < n && starts[i] <= offset; i++) r = epochs[i];
    return r;
}

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
    if (lp->Timestamp == GR_LIST_OFFSETS_EARLIEST || (ver >= 1 && lp->Timestamp == GR_LIST_OFFSETS_EARLIEST_LOCAL)) {
        off = gr_plog_start_offset(log);
        pr->LeaderEpoch = epoch_for_offset(log, off);
    } else if (lp->Timestamp == GR_LIST_OFFSETS_LATEST) {
        off = consumer ? hw : gr_plog_end_offset(log);
        pr->LeaderEpoch = epoch;
        if (hw_lagging) pr->ErrorCode = GR_KERR_OFFSET_NOT_AVAILABLE, off = -1;
    } else if (ver >= 1 && lp->Timestamp == GR_LIST_OFFSETS_LATEST_TIERED) {
        /* no tiered storage: nothing tiered (Kafka 3.9: offset -1, epoch -1) */
    } else {
        /* v0 (no KIP-734): a negative timestamp other than -1/-2 is a plain look-up from 0 */
        int64_t want = ver == 0 && lp->Timestamp < GR_LIST_OFFSETS_EARLIEST ? 0 : lp->Timestamp;
        if (gr_plog_offset_for_timestamp(log, want, &off, &ts) < 0) {
            pr->ErrorCode = GR_KERR_KAFKA_STORAGE_ERROR;
            off = ts = -1;
        } else if ((off < 0 || off >= hw) && hw_lagging) {
            pr->ErrorCode = GR_KERR_OFFSET_NOT_AVAILABLE;
            off = -1;
            ts = -1;
        } else if (off >= 0 && consumer && off >= hw) {
            off = -1;
            ts = -1;
        }
        if (off >= 0) pr->LeaderEpoch = epoch_for_offset(log, off);
    }
    if (ver < 4) pr->LeaderEpoch = -1;
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

/* One requested partition, for the duplicate check. */
struct lo_key {
    const char *topic;
    int32_t partition;
    int k; /* flat index in the request */
};

static int cmp_key(const void *x, const void *y) {
    const struct lo_key *a = x, *b = y;
    int c = strcmp(a->topic, b->topic);
    return c ? c : (a->partition > b->partition) - (a->partition < b->partition);
}

/* Kafka's ListOffsetsRequest.duplicatePartitions (v1+): every entry of a partition named more than
 * once, by flat index (in the request's arena; sorting costs O(n log n), bounded by the frame). */
static bool *duplicates(struct gr_api_req *req, const struct ListOffsetsRequest *r, int n) {
    bool *dup = gr_api_alloc(req, (size_t)n + 1);
    struct lo_key *keys = gr_api_alloc(req, ((size_t)n + 1) * sizeof *keys);
    int k = 0;
    for (int t = 0; t < r->TopicsCount; t++)
        for (int i = 0; i < r->Topics[t].PartitionsCount; i++, k++)
            keys[k] = (struct lo_key){r->Topics[t].Name ? r->Topics[t].Name : "", r->Topics[t].Partitions[i].PartitionIndex, k};
    qsort(keys, (size_t)n, sizeof *keys, cmp_key);
    for (int i = 1; i < n; i++)
        if (cmp_key(&keys[i - 1], &keys[i]) == 0) dup[keys[i - 1].k] = dup[keys[i].k] = true;
    return dup;
}

/* The error a partition is answered with before any lookup (Kafka 3.9's order): Topic DESCRIBE
 * denied, then (v1+) named twice, then a negative Timestamp this version does not know. */
static int16_t request_error(int16_t ver, bool authorized, bool dup, int64_t ts) {
    if (!authorized) return GR_KERR_TOPIC_AUTHORIZATION_FAILED;
    if (ver >= 1 && dup) return GR_KERR_INVALID_REQUEST;
    if (ver >= 1 && ts < 0 && (timestamp_min_version(ts) < 0 || ver < timestamp_min_version(ts)))
        return GR_KERR_UNSUPPORTED_VERSION;
    return GR_KERR_NONE;
}

void gr_handle_list_offsets(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr, void *body) {
    const struct ListOffsetsRequest *r = body;
    int16_t ver = hdr->RequestApiVersion;
    struct ListOffsetsResponse *resp = gr_api_new_response(req);
    resp->ThrottleTimeMs = 0;
    resp->TopicsCount = r->TopicsCount > 0 ? r->TopicsCount : 0;
    resp->Topics = gr_api_alloc(req, (size_t)(resp->TopicsCount + 1) * sizeof *resp->Topics);
    int n = 0;
    for (int t = 0; t < resp->TopicsCount; t++) n += r->Topics[t].PartitionsCount > 0 ? r->Topics[t].PartitionsCount : 0;
    bool *dup = duplicates(req, r, n);
    int k = 0;
    for (int t = 0; t < resp->TopicsCount; t++) {
        const struct ListOffsetsRequest_ListOffsetsTopic *lt = &r->Topics[t];
        struct ListOffsetsResponse_ListOffsetsTopicResponse *tr = &resp->Topics[t];
        tr->Name = lt->Name;
        tr->PartitionsCount = lt->PartitionsCount > 0 ? lt->PartitionsCount : 0;
        tr->Partitions = gr_api_alloc(req, (size_t)(tr->PartitionsCount + 1) * sizeof *tr->Partitions);
        bool ok = gr_api_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, lt->Name);
        for (int i = 0; i < tr->PartitionsCount; i++, k++) {
            int16_t e = request_error(ver, ok, dup[k], lt->Partitions[i].Timestamp);
            if (e != GR_KERR_NONE)
                tr->Partitions[i] = (struct ListOffsetsResponse_ListOffsetsPartitionResponse){
                    .PartitionIndex = lt->Partitions[i].PartitionIndex, .ErrorCode = e,
                    .Timestamp = -1, .Offset = -1, .LeaderEpoch = -1};
            else
                one(b->replica_manager, ver, r, lt->Name ? lt->Name : "", &lt->Partitions[i], &tr->Partitions[i]);
        }
    }
    gr_api_respond(req, resp);
}
