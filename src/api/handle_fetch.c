/* Fetch (api key 1), versions 0-17 (v0-v3 get the records down-converted to magic 0/1 message
 * sets; librdkafka uses up to 11, kafka-python v4; v12 is flexible, KIP-595: a fetcher's
 * LastFetchedEpoch is checked against our epochs and a divergence answered as DivergingEpoch, see
 * diverging_epoch below; the request's ClusterId is KRaft's and ignored, as a 3.9 ZooKeeper
 * broker does, and SnapshotId is never set (KRaft's metadata log only)).
 * Topic ids (v13+, KIP-516; Kafka 3.9's KafkaApis.handleFetchRequest): Topics and
 * ForgottenTopicsData name topic ids, resolved through the metadata cache before the session sees
 * the request (resolve_ids); a partition of an id the cache does not know is answered
 * UNKNOWN_TOPIC_ID (per partition, the rest is served), and one whose hosted log holds another id
 * (the name was deleted and re-created while a session kept the old id) INCONSISTENT_TOPIC_ID,
 * never the other topic's records; the response names topics by TopicId. A session is by id or
 * by name for its life (replication/fetch_session.h). v14 has no wire change (KIP-405); v15 moves
 * ReplicaId into the tagged ReplicaState (its ReplicaEpoch is KRaft's broker epoch, ignored as a
 * 3.9 ZooKeeper broker does); v16 (KIP-951): a partition answered NOT_LEADER_OR_FOLLOWER or
 * FENCED_LEADER_EPOCH carries CurrentLeader and the response NodeEndpoints (api/current_leader.h);
 * v17's ReplicaDirectoryId is KRaft's (JBOD directory assignment) and ignored.
 * Served by the leader, and for consumers of v11+ by followers too (KIP-392:
 * the leader names a PreferredReadReplica when replica.selector.class is set, see
 * replication/replica_selector.h):
 *   - consumers (ReplicaId -1) read below the high watermark; followers (ReplicaId >= 0) read up
 *     to the log end offset and their FetchOffset updates the leader's view of them (HW, ISR);
 *     a ReplicaId that is not one of the partition's assigned replicas gets empty records and
 *     no error, and its position is not recorded (Kafka 2.7's updateFollowerFetchState);
 *   - KIP-320: CurrentLeaderEpoch (v9+) older than ours -> FENCED_LEADER_EPOCH, newer ->
 *     UNKNOWN_LEADER_EPOCH;
 *   - MaxBytes bounds the response, PartitionMaxBytes each partition; the first partition that
 *     has data returns at least one whole batch (Kafka's minOneMessage);
 *   - IsolationLevel 1 (read_committed, consumers): reads stop at the last stable offset and the
 *     response lists the aborted transactions of the returned range (storage/txn_index.h);
 *     LastStableOffset is always the LSO;
 *   - sessions (KIP-227, replication/fetch_session.h): the request is widened to the session's
 *     partitions before reading and the answer narrowed to what changed before sending;
 *   - authorization (api/authorize.h): followers need Cluster CLUSTER_ACTION, consumers Topic
 *     READ; denied partitions get TOPIC_AUTHORIZATION_FAILED, and a denied follower's session
 *     neither closes that replica's sessions nor is privileged (gr_fsc_replica_authorized).
 * Long poll: if fewer than MinBytes are available and MaxWaitMs > 0, the request waits in the
 * fetch purgatory until a watched partition has new data (an append, for consumers an HW move),
 * an error appears (leadership change), or MaxWaitMs passes; then it is read again and answered.
 * A follower's partition this broker does not host (yet) is not such an error: a new
 * partition's first follower fetch usually arrives before our own LeaderAndIsr, and answering
 * at once made the follower back off (issue 14); it waits like "no data" and gets
 * UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER when the request is answered.
 * (Availability is judged per partition — "something new past FetchOffset" — rather than by
 * exact byte counts, which is the same for the MinBytes=1 that clients and followers use.)
 * Zero copy: when the connection allows it (apis.h gr_api_req_can_sendfile), the final read
 * takes file regions (storage gr_plog_read_slice: batch headers only) and the response sends
 * them with sendfile; otherwise the bytes are copied (gr_plog_read). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/authorize.h"
#include "api/current_leader.h"
#include "api/handlers.h"
#include "broker/broker_topic_stats.h"
#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "common/config.h"
#include "broker/quota_manager.h"
#include "replication/log_dir_failure.h"
#include "replication/purgatory.h"
#include "replication/replica_internal.h"
#include "replication/replica_selector.h"
#include "replication/fetch_session.h"
#include "storage/compression.h"
#include "storage/legacy_records.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "common/uuid.h"
#include "storage/txn_index.h"

struct fetch_ctx {
    struct gr_delayed_op op; /* first member */
    struct gr_replica_manager *rm;
    struct gr_api_req *req;
    const struct FetchRequest *r;
    int16_t version;
    int n;
    bool *denied; /* per request topic: TOPIC_AUTHORIZATION_FAILED (authorize.h) */
    struct gr_fsc_ctx session; /* KIP-227 */
    /* read results that must be freed after the response is encoded */
    uint8_t **bufs;
    int nbufs;
    int64_t throttled_bytes; /* of leader-throttled replicas in the last read (replication quota) */
    /* zero-copy reads: file regions (fds owned until handed to the response) */
    bool zero_copy;
    struct gr_api_region *regions;
    int nregions;
    /* The hosted partition of each requested partition (flat index k in request order), looked up
     * once and kept (a reference each) while the fetch waits: a follower's parked fetch is read
     * again at every wake-up and at expiry, and a lookup per partition each time was ~20 % of a
     * broker's CPU while 30k partitions were being created (issue 14). A kept one that was
     * stopped since (StopReplica: online false, e.g. deleted and maybe created again) is looked
     * up again. NULL: not looked up yet or not hosted. */
    struct gr_rm_partition **parts;
};

/* A reference to the k-th requested partition (see fetch_ctx.parts), or NULL if not hosted. */
static struct gr_rm_partition *part_ref(struct fetch_ctx *c, int k, const char *topic, int32_t partition) {
    struct gr_rm_partition *p = c->parts && k < c->n ? c->parts[k] : NULL;
    if (p) {
        if (atomic_load(&p->online)) {
            atomic_fetch_add(&p->refs, 1);
            return p;
        }
        c->parts[k] = NULL;
        gr_rm_partition_unref(p);
    }
    p = c->rm && topic ? gr_rm_get_partition(c->rm, topic, partition) : NULL;
    if (p && c->parts && k < c->n) {
        atomic_fetch_add(&p->refs, 1); /* the context's */
        c->parts[k] = p;
    }
    return p;
}

static void drop_parts(struct fetch_ctx *c) {
    for (int k = 0; c->parts && k < c->n; k++) gr_rm_partition_unref(c->parts[k]);
    free(c->parts);
    c->parts = NULL;
}

static void free_bufs(struct fetch_ctx *c) {
    for (int i = 0; i < c->nbufs; i++) free(c->bufs[i]);
    c->nbufs = 0;
    for (int i = 0; i < c->nregions; i++)
        if (c->regions[i].fd >= 0) close(c->regions[i].fd);
    c->nregions = 0;
}

/* A process-unique 16-byte marker for a file region in an encoded response. */
static void new_marker(uint8_t m[16]) {
    static _Atomic uint64_t counter;
    static uint64_t salt;
    if (!salt) salt = (uint64_t)gr_wall_ms() * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid() ^ 0x5a17c0de5a17c0deULL;
    uint64_t n = atomic_fetch_add(&counter, 1) + 1;
    for (int i = 0; i < 8; i++) {
        m[i] = (uint8_t)(salt >> (8 * i));
        m[8 + i] = (uint8_t)((n * 0xff51afd7ed558ccdULL) >> (8 * i));
    }
}

/* Kafka's fetchOnlyFromLeader: followers, and consumers without client metadata (before v11).
 * Consumers of v11+ may read from a follower, up to the high watermark it knows (KIP-392). */
static bool leader_only(const struct fetch_ctx *c) {
    return c->r->ReplicaId >= 0 || c->version < 11;
}

/* KIP-392 on the leader: if the replica selector prefers another replica for this consumer,
 * answers the partition with PreferredReadReplica and the offsets only (Kafka skips the read). */
static bool preferred_replica(struct fetch_ctx *c, struct gr_rm_partition *p, const struct FetchRequest_FetchPartition *fp,
                              struct FetchResponse_PartitionData *pr, int64_t hw) {
    if (c->r->ReplicaId >= 0 || c->version < 11) return false;
    int32_t id = gr_rm_preferred_read_replica(c->rm, p, c->r->RackId, c->req->listener, fp->FetchOffset);
    if (id < 0) return false;
    pr->PreferredReadReplica = id;
    pr->HighWatermark = hw;
    pr->LastStableOffset = hw;
    pr->LogStartOffset = gr_plog_start_offset(p->lml->log);
    gr_debug("kafka.server.ReplicaManager", "Replica selected %d for %s-%d (client rack %s)", id, p->topic,
             p->partition, c->r->RackId);
    return true;
}

/* The response's byte budget (Kafka's fetchMaxBytes): the request's MaxBytes (v3+; none before)
 * and the broker's fetch.max.bytes, whichever is smaller. */
static int64_t response_max_bytes(const struct fetch_ctx *c) {
    int64_t cap = c->req->broker && c->req->broker->cfg ? c->req->broker->cfg->fetch_max_bytes : INT32_MAX;
    return c->version >= 3 ? GR_MIN((int64_t)c->r->MaxBytes, cap) : cap;
}

/* Reads every partition into a fresh response. update_followers: record follower progress (the
 * first read of a request only). Returns the response; *bytes and *errors summarise it. */
/* compression.type=zstd: Kafka 2.7 answers Fetch v0-v9 of such a topic UNSUPPORTED_COMPRESSION_TYPE
 * (zstd needs Fetch v10, KIP-110), whatever its data. */
static bool zstd_topic(struct gr_plog *log) {
    struct gr_plog_config lc;
    gr_plog_get_config(log, &lc);
    return lc.compression_type == GR_CODEC_ZSTD;
}

/* Fetch v12+ with LastFetchedEpoch (Kafka 3.9's Partition.readRecords): where the fetcher's log
 * diverges from ours. The end offset of its last fetched epoch here is looked up
 * (gr_rm_last_offset_for_epoch); unknown -> OFFSET_OUT_OF_RANGE, and so is a FetchOffset below our
 * log start whatever the epochs; if we know only an older epoch than the fetcher's, or that epoch
 * ends here before FetchOffset, the answer is that (epoch, end offset) as DivergingEpoch with no
 * records (*diverging), and a follower's position is not recorded. Returns NONE or the error. */
static int16_t diverging_epoch(struct gr_rm_partition *p, const struct FetchRequest_FetchPartition *fp, int64_t start,
                               struct FetchResponse_PartitionData *pr, bool *diverging) {
    int32_t epoch;
    int64_t end;
    gr_rm_last_offset_for_epoch(p, fp->LastFetchedEpoch, &epoch, &end);
    if (epoch < 0 || end < 0 || fp->FetchOffset < start) return GR_KERR_OFFSET_OUT_OF_RANGE;
    if (epoch < fp->LastFetchedEpoch || end < fp->FetchOffset) {
        pr->DivergingEpoch.Epoch = epoch;
        pr->DivergingEpoch.EndOffset = end;
        *diverging = true;
    }
    return GR_KERR_NONE;
}

/* Fetch v13+ (Kafka 3.9's ReplicaManager.readFromLocalLog): does the hosted log belong to the
 * topic id the request (or its session) names? A log without an id (created before ids, not yet
 * given one by a LeaderAndIsr) is taken as consistent, as Kafka's hasConsistentTopicId; an
 * unreadable partition.metadata is not. */
static bool topic_id_consistent(const struct fetch_ctx *c, struct gr_rm_partition *p, const uint8_t id[16]) {
    if (c->version < 13) return true;
    struct gr_uuid have;
    int rc = gr_plog_topic_id(p->lml->log, &have);
    return rc == 0 || (rc == 1 && memcmp(have.b, id, sizeof have.b) == 0);
}

static struct FetchResponse *do_read(struct fetch_ctx *c, bool update_followers, int64_t *bytes, bool *errors) {
    struct gr_api_req *req = c->req;
    const struct FetchRequest *r = c->r;
    struct gr_replica_manager *rm = c->rm;
    bool follower = r->ReplicaId >= 0;
    struct FetchResponse *resp = gr_api_new_response(req);
    resp->ThrottleTimeMs = 0;
    resp->ErrorCode = GR_KERR_NONE;
    resp->SessionId = 0;
    resp->NodeEndpointsCount = 0;
    resp->ResponsesCount = r->TopicsCount > 0 ? r->TopicsCount : 0;
    resp->Responses = gr_api_alloc(req, (size_t)(resp->ResponsesCount + 1) * sizeof *resp->Responses);
    int64_t remaining = response_max_bytes(c);
    if (remaining <= 0) remaining = 1; /* still return one batch (minOneMessage) */
    bool min_one = true;
    *bytes = 0;
    *errors = false;
    c->throttled_bytes = 0;
    int kp = 0; /* flat index of the partition in the request */
    for (int t = 0; t < resp->ResponsesCount; t++) {
        const struct FetchRequest_FetchTopic *ft = &r->Topics[t];
        struct FetchResponse_FetchableTopicResponse *tr = &resp->Responses[t];
        tr->Topic = ft->Topic;
        memcpy(tr->TopicId, ft->TopicId, sizeof tr->TopicId);
        tr->PartitionsCount = ft->PartitionsCount > 0 ? ft->PartitionsCount : 0;
        tr->Partitions = gr_api_alloc(req, (size_t)(tr->PartitionsCount + 1) * sizeof *tr->Partitions);
        for (int i = 0; i < tr->PartitionsCount; i++, kp++) {
            const struct FetchRequest_FetchPartition *fp = &ft->Partitions[i];
            struct FetchResponse_PartitionData *pr = &tr->Partitions[i];
            pr->PartitionIndex = fp->Partition;
            pr->ErrorCode = GR_KERR_NONE;
            pr->HighWatermark = -1;
            pr->LastStableOffset = -1;
            pr->LogStartOffset = -1;
            pr->DivergingEpoch.Epoch = -1;
            pr->DivergingEpoch.EndOffset = -1;
            pr->CurrentLeader.LeaderId = -1;
            pr->CurrentLeader.LeaderEpoch = -1;
            pr->SnapshotId.EndOffset = -1; /* KRaft's: the schema's defaults, so never sent */
            pr->SnapshotId.Epoch = -1;
            pr->AbortedTransactionsCount = -1;
            pr->AbortedTransactions = NULL;
            pr->PreferredReadReplica = -1;
            pr->Records.p = NULL;
            pr->Records.len = 0;
            /* an id the metadata cache does not know (Kafka: checked before a consumer's READ, after
             * a follower's CLUSTER_ACTION) */
            if (c->version >= 13 && !ft->Topic && !(follower && c->denied[t])) {
                pr->ErrorCode = GR_KERR_UNKNOWN_TOPIC_ID;
                *errors = true;
                continue;
            }
            if (c->denied[t]) {
                pr->ErrorCode = GR_KERR_TOPIC_AUTHORIZATION_FAILED;
                *errors = true;
                continue;
            }
            struct gr_rm_partition *p = rm ? part_ref(c, kp, ft->Topic, fp->Partition) : NULL;
            if (!p) {
                pr->ErrorCode = rm ? gr_rm_not_hosted_error(rm, ft->Topic, fp->Partition)
                                   : GR_KERR_NOT_LEADER_OR_FOLLOWER;
                /* A follower usually asks for a new partition before our own LeaderAndIsr made
                 * us its leader: let its first read wait for that (see fetch_try) instead of
                 * answering at once with an error it would back off on. */
                if (!(follower && update_followers && r->MaxWaitMs > 0)) *errors = true;
                continue;
            }
            /* leader.replication.throttled.rate: a throttled replica's follower outside the ISR gets
             * no data while the rate is exceeded (Kafka's shouldLeaderThrottle) */
            bool throttled = follower && gr_quota_replica_throttled(req->broker->quotas, true, ft->Topic, fp->Partition);
            if (!topic_id_consistent(c, p, ft->TopicId)) { /* before the epoch check, as Kafka */
                pr->ErrorCode = GR_KERR_INCONSISTENT_TOPIC_ID;
                *errors = true;
                gr_rm_partition_unref(p);
                continue;
            }
            pthread_mutex_lock(&p->lock);
            int16_t err = gr_rm_check_epoch_locked(p, c->version >= 9 ? fp->CurrentLeaderEpoch : -1,
                                                   leader_only(c));
            int64_t hw = atomic_load(&p->lml->hw);
            bool in_isr = false, assigned = !follower;
            for (int k = 0; throttled && k < p->st.nisr; k++) in_isr |= p->st.isr[k] == r->ReplicaId;
            for (int k = 0; follower && k < p->st.nreplicas; k++) assigned |= p->st.replicas[k] == r->ReplicaId;
            pthread_mutex_unlock(&p->lock);
            bool hold = throttled && !in_isr && gr_quota_replication_exceeded(req->broker->quotas, true);
            /* Kafka's ReplicaManager.updateFollowerFetchState: a fetcher that is not one of the
             * assigned replicas gets empty records (no error) and its position is not recorded. */
            if (err == GR_KERR_NONE && !assigned && update_followers)
                gr_warn("kafka.server.ReplicaManager",
                        "Leader %d failed to record follower %d's position %lld since the replica is not "
                        "recognized to be one of the assigned replicas for partition %s-%d. Empty records will be "
                        "returned for this partition.",
                        req->broker->broker_id, r->ReplicaId, (long long)fp->FetchOffset, ft->Topic, fp->Partition);
            hold |= !assigned;
            if (err == GR_KERR_NONE) err = gr_ldf_check(req->broker, p->lml->dir_idx); /* offline log dir */
            if (err == GR_KERR_NONE && preferred_replica(c, p, fp, pr, hw)) { /* KIP-392: no read */
                gr_rm_partition_unref(p);
                continue;
            }
            if (err != GR_KERR_NONE) {
                pr->ErrorCode = err;
                *errors = true;
                gr_rm_partition_unref(p);
                continue;
            }
            struct gr_plog *log = p->lml->log;
            if (c->version < 10 && zstd_topic(log)) { /* Kafka's maybeConvertFetchedData: no read */
                pr->ErrorCode = GR_KERR_UNSUPPORTED_COMPRESSION_TYPE;
                pr->HighWatermark = pr->LastStableOffset = pr->LogStartOffset = -1;
                *errors = true;
                gr_rm_partition_unref(p);
                continue;
            }
            int64_t start = gr_plog_start_offset(log), leo = gr_plog_end_offset(log);
            int64_t lso = gr_plog_last_stable_offset(log, hw);
            bool committed = !follower && r->IsolationLevel == 1;
            int64_t bound = committed ? lso : hw; /* consumers read below it */
            int64_t limit = GR_MIN((int64_t)fp->PartitionMaxBytes, remaining);
            struct gr_plog_read_result res;
            memset(&res, 0, sizeof res);
            res.log_start_offset = start;
            res.log_end_offset = leo;
            bool diverging = false;
            if (c->version >= 12 && fp->LastFetchedEpoch >= 0)
                res.error = diverging_epoch(p, fp, start, pr, &diverging);
            if (res.error != GR_KERR_NONE || diverging) {
                /* no read: the fetcher truncates first (KIP-595's DivergingEpoch) */
                *errors |= diverging; /* answered at once, never parked */
            } else if (fp->FetchOffset < start || fp->FetchOffset > leo) {
                res.error = GR_KERR_OFFSET_OUT_OF_RANGE;
            } else if ((!follower && fp->FetchOffset >= bound) || fp->FetchOffset == leo || limit <= 0 || hold) {
                /* nothing to read */
            } else if (c->zero_copy && !committed) {
                /* read_committed reads in memory: the aborted-transaction list needs the range read */
                struct gr_plog_slice sl;
                int rc = gr_plog_read_slice(log, fp->FetchOffset, (int32_t)GR_MIN(limit, (int64_t)INT32_MAX),
                                            follower ? -1 : bound, min_one, &sl);
                if (rc < 0) res.error = GR_KERR_KAFKA_STORAGE_ERROR;
                if (rc < 0) gr_ldf_report(req->broker, p->lml->dir_idx, rc, "reading a log");
                if (rc == 0) {
                    res.error = sl.error;
                    res.log_start_offset = sl.log_start_offset;
                    res.log_end_offset = sl.log_end_offset;
                }
                if (rc == 0 && sl.len > 0) {
                    struct gr_api_region *g = &c->regions[c->nregions++];
                    new_marker(g->marker);
                    g->fd = sl.fd;
                    g->off = sl.pos;
                    g->len = sl.len;
                    pr->Records.p = g->marker;
                    pr->Records.len = 16;
                    remaining -= (int64_t)sl.len;
                    *bytes += (int64_t)sl.len;
                    min_one = false;
                }
            } else {
                int rc = gr_plog_read(log, fp->FetchOffset, (int32_t)GR_MIN(limit, (int64_t)INT32_MAX),
                                     follower ? -1 : bound, min_one, &res);
                if (rc < 0) res.error = GR_KERR_KAFKA_STORAGE_ERROR;
                if (rc < 0) gr_ldf_report(req->broker, p->lml->dir_idx, rc, "reading a log");
            }
            if (res.error != GR_KERR_NONE) {
                pr->ErrorCode = res.error;
                *errors = true;
            } else if (follower && update_followers && assigned && !diverging) {
                gr_rm_update_follower(rm, p, r->ReplicaId, fp->FetchOffset, fp->LogStartOffset, res.log_end_offset);
                hw = atomic_load(&p->lml->hw);
            }
            pr->HighWatermark = hw;
            pr->LastStableOffset = lso;
            if (committed) {
                pr->AbortedTransactionsCount = 0;
                if (res.len > 0) {
                    struct gr_aborted_txn *ab = NULL;
                    int na = gr_plog_collect_aborted(log, fp->FetchOffset, res.next_offset, &ab);
                    pr->AbortedTransactions = gr_api_alloc(req, (size_t)(na + 1) * sizeof *pr->AbortedTransactions);
                    for (int a = 0; a < na; a++) {
                        pr->AbortedTransactions[a].ProducerId = ab[a].producer_id;
                        pr->AbortedTransactions[a].FirstOffset = ab[a].first_offset;
                    }
                    pr->AbortedTransactionsCount = na;
                    free(ab);
                }
            }
            pr->LogStartOffset = res.log_start_offset;
            if (res.len > 0) {
                pr->Records.p = res.data;
                pr->Records.len = (int32_t)res.len;
                c->bufs[c->nbufs++] = res.data;
                remaining -= (int64_t)res.len;
                *bytes += (int64_t)res.len;
                if (throttled) c->throttled_bytes += (int64_t)res.len;
                min_one = false;
            } else {
                free(res.data);
            }
            gr_rm_partition_unref(p);
        }
    }
    return resp;
}

static bool key_in(const uint64_t *set, int n, uint64_t key) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (set[mid] == key) return true;
        if (set[mid] < key) lo = mid + 1;
        else hi = mid - 1;
    }
    return false;
}

/* Is there anything new for this fetch (or an error to report)? */
static bool fetch_try(struct gr_delayed_op *op) {
    struct fetch_ctx *c = (struct fetch_ctx *)op;
    const struct FetchRequest *r = c->r;
    bool follower = r->ReplicaId >= 0;
    /* Woken by one partition's check: only that one can have become ready (purgatory.h). The
     * op's keys follow the request's partitions in order. */
    uint64_t only = op->nkeys == c->n ? op->woken_key : 0;
    /* Woken by several keys at once (gr_purgatory_check_many): only those, found by a binary
     * search of the sorted set per partition (no partition lookup for the others). */
    const uint64_t *set = op->nkeys == c->n && !only ? op->woken_keys : NULL;
    int nset = set ? op->n_woken : 0;
    int k = 0;
    for (int t = 0; t < r->TopicsCount; t++) {
        const struct FetchRequest_FetchTopic *ft = &r->Topics[t];
        if (c->denied[t] || (c->version >= 13 && !ft->Topic)) return true;
        for (int i = 0; i < ft->PartitionsCount; i++) {
            uint64_t key = op->nkeys == c->n ? op->keys[k] : 0;
            k++;
            if (only && key != only) continue;
            if (nset > 0 && !key_in(set, nset, key)) continue;
            const struct FetchRequest_FetchPartition *fp = &ft->Partitions[i];
            struct gr_rm_partition *p = part_ref(c, k - 1, ft->Topic, fp->Partition);
            if (!p && follower) continue; /* not hosted yet: answered (with the error) at expiry */
            if (!p) return true;
            if (!topic_id_consistent(c, p, ft->TopicId)) {
                gr_rm_partition_unref(p);
                return true;
            }
            pthread_mutex_lock(&p->lock);
            int16_t err = gr_rm_check_epoch_locked(p, c->version >= 9 ? fp->CurrentLeaderEpoch : -1,
                                                   leader_only(c));
            int64_t hw = atomic_load(&p->lml->hw);
            pthread_mutex_unlock(&p->lock);
            if (!follower && r->IsolationLevel == 1) hw = gr_plog_last_stable_offset(p->lml->log, hw);
            int64_t end = follower ? gr_plog_end_offset(p->lml->log) : hw;
            int64_t start = gr_plog_start_offset(p->lml->log);
            gr_rm_partition_unref(p);
            if (err != GR_KERR_NONE || end > fp->FetchOffset || fp->FetchOffset < start) return true;
            if (follower && fp->FetchOffset > end) return true; /* truncated under the follower */
        }
    }
    return false;
}

/* BrokerTopicMetrics for the response being sent: TotalFetchRequestsPerSec and
 * FailedFetchRequestsPerSec per partition, BytesOutPerSec (consumers) or the all-topics
 * ReplicationBytesOutPerSec (followers), as Kafka's handleFetch/readFromLocalLog mark them. */
/* The bytes a partition's records take on the wire: a zero-copy record set is a 16-byte marker
 * standing for a file region. */
static int64_t record_set_bytes(const struct fetch_ctx *c, const struct FetchResponse_PartitionData *pr) {
    const uint8_t *p = pr->Records.p, *lo = (const uint8_t *)c->regions,
                  *hi = (const uint8_t *)(c->regions + c->nregions);
    if (c->nregions > 0 && p >= lo && p < hi) /* the marker lives in its region */
        return (int64_t)c->regions[(size_t)(p - lo) / sizeof *c->regions].len;
    return pr->Records.len;
}

static void fetch_metrics(struct fetch_ctx *c, const struct FetchResponse *resp) {
    struct gr_bts *reg = c->req->broker ? c->req->broker->topic_stats : NULL;
    bool follower = c->r->ReplicaId >= 0;
    /* Marks are summed over runs of entries naming the same topic (followers send one entry
     * per partition, often thousands): one registry lookup per run, not per partition. */
    int64_t total = 0, failed = 0, out = 0, repl = 0;
    for (int t = 0; reg && t < resp->ResponsesCount; t++) {
        const struct FetchResponse_FetchableTopicResponse *tr = &resp->Responses[t];
        for (int i = 0; i < tr->PartitionsCount; i++) {
            const struct FetchResponse_PartitionData *pr = &tr->Partitions[i];
            total++;
            if (pr->ErrorCode != GR_KERR_NONE) failed++;
            int64_t len = record_set_bytes(c, pr);
            if (len > 0) *(follower ? &repl : &out) += len;
        }
        const char *next = t + 1 < resp->ResponsesCount ? resp->Responses[t + 1].Topic : NULL;
        if (next && tr->Topic && strcmp(next, tr->Topic) == 0) continue;
        if (!tr->Topic) { /* an unknown topic id: no topic to count under (Kafka: no bytes out) */
            total = failed = out = 0;
            continue;
        }
        if (total) gr_bts_mark(reg, tr->Topic, GR_BTS_TOTAL_FETCH, total);
        if (failed) gr_bts_mark(reg, tr->Topic, GR_BTS_FAILED_FETCH, failed);
        if (out) gr_bts_mark(reg, tr->Topic, GR_BTS_BYTES_OUT, out);
        total = failed = out = 0;
    }
    if (repl) gr_bts_mark(reg, NULL, GR_BTS_REPLICATION_BYTES_OUT, repl);
}

/* consumer_byte_rate: a consumer's response bytes (followers are not client-quota'd). */
static void fetch_throttle(struct fetch_ctx *c, struct FetchResponse *resp, int64_t bytes) {
    if (c->r->ReplicaId >= 0) gr_quota_replication_record(c->req->broker->quotas, true, (double)c->throttled_bytes);
    if (c->r->ReplicaId < 0) resp->ThrottleTimeMs = gr_quota_throttle(c->req->broker, c->req, GR_QUOTA_FETCH, (double)bytes);
}

/* Sends resp (with its file regions, if any) and frees the reads. */
static void send_response(struct fetch_ctx *c, struct FetchResponse *resp) {
    if (c->nregions > 0) {
        gr_api_respond_regions(c->req, resp, c->regions, c->nregions); /* takes the fds */
        c->nregions = 0;
    } else {
        gr_api_respond(c->req, resp);
    }
    free_bufs(c);
}

/* The partition's message.downconversion.enable: its log's config in memory (Kafka's
 * replicaManager.getLogConfig), resolved from the topic's overrides, the dynamic and the static
 * broker configs when the partition is created and again when one of them changes
 * (gr_rm_reload_topic_config). k: the flat index of the partition in the request. No ZooKeeper
 * read on the request's thread. Not hosted (any more): true, the read's answer stands. */
static bool downconversion_enabled(struct fetch_ctx *c, int k, const char *topic, int32_t partition) {
    struct gr_rm_partition *p = c->rm && topic ? part_ref(c, k, topic, partition) : NULL;
    if (!p) return true;
    struct gr_plog_config lc;
    gr_plog_get_config(p->lml->log, &lc);
    gr_rm_partition_unref(p);
    return lc.downconversion_enable;
}

/* Swaps a read buffer of c->bufs for its converted form (the read is freed at once). */
static void replace_buf(struct fetch_ctx *c, const uint8_t *old, uint8_t *repl) {
    for (int i = 0; i < c->nbufs; i++)
        if (c->bufs[i] == old) {
            free(c->bufs[i]);
            c->bufs[i] = repl;
            return;
        }
    free(repl); /* not a read of ours (cannot happen): keep nothing */
}

/* Fetch v0-v3 clients read magic 0 (v0-1) or 1 (v2-3) message sets: Kafka's down-conversion
 * (storage/legacy_records.h). As Kafka 2.7 (KIP-283) the converted bytes, not the stored ones,
 * count against the limits, so a compressed batch that inflates a thousandfold cannot blow a
 * response up (every codec is read record by record through the log validator's stream): each partition converts at most min(PartitionMaxBytes, what the response has left of
 * response_max_bytes); a partition's first message may pass PartitionMaxBytes if the response has
 * room for it, and the response's first message is always sent (Kafka sends at least one
 * converted batch), bounded by the 64 MiB inflation limit. A zstd batch cannot be converted (Kafka's
 * RecordsUtil): the conversion stops before it, and a partition whose first batch it is gets
 * UNSUPPORTED_COMPRESSION_TYPE. A topic with
 * message.downconversion.enable=false answers UNSUPPORTED_VERSION instead (consumers only). */
/* Messages of an uncompressed magic 0/1 message set (offset int64, size int32, message). */
static int64_t legacy_message_count(const uint8_t *p, size_t len) {
    int64_t n = 0;
    for (size_t off = 0; p && off + 12 <= len; n++) {
        uint32_t size = (uint32_t)p[off + 8] << 24 | (uint32_t)p[off + 9] << 16 | (uint32_t)p[off + 10] << 8 | p[off + 11];
        if (size > len - off - 12) break;
        off += 12 + size;
    }
    return n;
}

static void down_convert(struct fetch_ctx *c, struct FetchResponse *resp) {
    if (c->version >= 4) return;
    int64_t room = response_max_bytes(c);
    bool first = true;
    int kp = 0; /* flat index in the request (v0-v3: no session, the response follows the request) */
    for (int t = 0; t < resp->ResponsesCount; t++) {
        for (int i = 0; i < resp->Responses[t].PartitionsCount; i++, kp++) {
            struct FetchResponse_PartitionData *pr = &resp->Responses[t].Partitions[i];
            if (pr->Records.len <= 0) continue;
            uint8_t *src = (uint8_t *)pr->Records.p;
            bool enabled = c->r->ReplicaId >= 0 ||
                           downconversion_enabled(c, kp, resp->Responses[t].Topic, pr->PartitionIndex);
            const struct FetchRequest_FetchPartition *fp =
                t < c->r->TopicsCount && i < c->r->Topics[t].PartitionsCount ? &c->r->Topics[t].Partitions[i] : NULL;
            int64_t part_max = fp ? fp->PartitionMaxBytes : 0;
            size_t max = (size_t)GR_MAX(0, GR_MIN(part_max, room));
            size_t first_max = first ? SIZE_MAX : (size_t)GR_MAX(0, room);
            uint8_t *out = NULL;
            size_t len = 0;
            bool compressed = false;
            int64_t t0 = gr_mono_us();
            int rc = enabled ? gr_v2_to_legacy(src, (size_t)pr->Records.len, c->version <= 1 ? 0 : 1,
                                               fp ? fp->FetchOffset : -1, max, first_max, &out, &len, &compressed)
                             : 0;
            if (enabled) {
                c->req->conversion_us += gr_mono_us() - t0;
                c->req->temporary_memory_bytes += (int64_t)len;
                int64_t converted = legacy_message_count(out, len);
                if (converted > 0)
                    gr_bts_mark(c->req->broker ? c->req->broker->topic_stats : NULL, resp->Responses[t].Topic,
                                GR_BTS_FETCH_CONVERSIONS, converted);
            }
            replace_buf(c, src, out);
            pr->Records.p = out;
            pr->Records.len = (int32_t)len;
            room -= (int64_t)len;
            if (len > 0) first = false;
            if (!enabled) {
                pr->ErrorCode = GR_KERR_UNSUPPORTED_VERSION;
                pr->HighWatermark = pr->LastStableOffset = pr->LogStartOffset = -1;
            } else if (rc < 0) {
                gr_warn("kafka.server.KafkaApis", "Cannot down-convert %s-%d for an old client: out of memory",
                        resp->Responses[t].Topic, pr->PartitionIndex);
                pr->ErrorCode = GR_KERR_UNKNOWN_SERVER_ERROR;
            } else if (!out && compressed) {
                pr->ErrorCode = GR_KERR_UNSUPPORTED_COMPRESSION_TYPE; /* zstd first (or unreadable) */
            }
        }
    }
}

/* The fetch session's part of the answer (KIP-227): session id, incremental filtering; and the
 * down-conversion for old clients. */
static void session_finish(struct fetch_ctx *c, struct FetchResponse *resp) {
    down_convert(c, resp);
    if (c->rm && c->rm->fetch_sessions)
        gr_fsc_finish(c->rm->fetch_sessions, c->r, &c->session, resp, gr_mono_ms(), &c->req->arena);
}

/* Records may go out as file regions (sendfile) only when the response carries them unchanged:
 * not over TLS (api/apis.h), not for v0-v3 clients (down-converted in memory). Inside a fetch
 * session too (KIP-227; a follower's fetches always are): the session narrows the answer after
 * the read (gr_fsc_finish), but only by dropping partitions that have no records, in order, so
 * every region's marker stays in the response in the order of c->regions (a partition with a
 * region has RecordSet.len 16 > 0, which the session always answers); if one were missing,
 * gr_api_respond_regions would refuse the response and close the connection, never send wrong
 * bytes. */
static bool zero_copy_allowed(const struct fetch_ctx *c) {
    return gr_api_req_can_sendfile(c->req) && c->version >= 4;
}

/* Fetch v16+ (KIP-951, Kafka 3.9's processResponseCallback): a partition answered
 * NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names the leader this broker knows, and
 * NodeEndpoints that leader's endpoint once. */
static void leader_hints(struct fetch_ctx *c, struct FetchResponse *resp) {
    if (c->version < 16) return;
    int n = 0;
    for (int t = 0; t < resp->ResponsesCount; t++)
        for (int i = 0; i < resp->Responses[t].PartitionsCount; i++) {
            int16_t e = resp->Responses[t].Partitions[i].ErrorCode;
            n += e == GR_KERR_NOT_LEADER_OR_FOLLOWER || e == GR_KERR_FENCED_LEADER_EPOCH;
        }
    if (n == 0) return;
    resp->NodeEndpoints = gr_api_alloc(c->req, (size_t)(n + 1) * sizeof *resp->NodeEndpoints);
    resp->NodeEndpointsCount = 0;
    for (int t = 0; t < resp->ResponsesCount; t++) {
        const struct FetchResponse_FetchableTopicResponse *tr = &resp->Responses[t];
        for (int i = 0; i < tr->PartitionsCount; i++) {
            struct FetchResponse_PartitionData *pr = &tr->Partitions[i];
            if (pr->ErrorCode != GR_KERR_NOT_LEADER_OR_FOLLOWER && pr->ErrorCode != GR_KERR_FENCED_LEADER_EPOCH) continue;
            int32_t leader, epoch;
            gr_api_current_leader(c->req, tr->Topic, pr->PartitionIndex, &leader, &epoch);
            pr->CurrentLeader.LeaderId = leader;
            pr->CurrentLeader.LeaderEpoch = epoch;
            bool listed = leader < 0;
            for (int k = 0; !listed && k < resp->NodeEndpointsCount; k++) listed = resp->NodeEndpoints[k].NodeId == leader;
            struct gr_api_leader_endpoint e;
            if (listed || !gr_api_leader_endpoint(c->req, leader, &e)) continue;
            struct FetchResponse_NodeEndpoint *ne = &resp->NodeEndpoints[resp->NodeEndpointsCount++];
            ne->NodeId = leader;
            ne->Host = e.host;
            ne->Port = e.port;
            ne->Rack = e.rack;
        }
    }
}

static void fetch_respond(struct fetch_ctx *c) {
    int64_t bytes;
    bool errors;
    c->zero_copy = zero_copy_allowed(c);
    struct FetchResponse *resp = do_read(c, false, &bytes, &errors);
    leader_hints(c, resp);
    fetch_metrics(c, resp);
    session_finish(c, resp);
    fetch_throttle(c, resp, bytes);
    send_response(c, resp);
}

/* The replica manager is shutting down: it stops the purgatories only after the network server
 * stopped, so no answer could be sent any more. */
static bool rm_stopping(struct gr_replica_manager *rm) {
    pthread_mutex_lock(&rm->tlock);
    bool stopping = rm->stopping;
    pthread_mutex_unlock(&rm->tlock);
    return stopping;
}

static void fetch_complete(struct gr_delayed_op *op, bool expired) {
    struct fetch_ctx *c = (struct fetch_ctx *)op;
    /* Expired by the purgatory's shutdown: drop it unread (Kafka's purgatory shutdown completes
     * nothing either). Reading it would read every partition of a follower's session once more
     * for an answer nobody gets: ~0.1 s per 10k partitions of the broker's shutdown. */
    if (expired && c->rm && rm_stopping(c->rm)) {
        free_bufs(c);
        gr_api_respond_none(c->req);
        return;
    }
    fetch_respond(c);
}

static void fetch_destroy(struct gr_delayed_op *op) {
    struct fetch_ctx *c = (struct fetch_ctx *)op;
    drop_parts(c);
    free(c->bufs);
    free(c->denied);
    free(c->regions);
    free(c);
}

static const struct gr_delayed_op_vt FETCH_VT = {fetch_try, fetch_complete, fetch_destroy};

/* The metadata cache's name of a topic id, malloc'd, or NULL (gr_fsc_resolve_fn). */
static char *topic_name_by_id(void *arg, const uint8_t id[16]) {
    struct gr_broker *b = arg;
    struct gr_uuid u;
    memcpy(u.b, id, sizeof u.b);
    return b && b->metadata && !gr_uuid_is_zero(&u) ? gr_mdc_topic_name_by_id(b->metadata, &u) : NULL;
}

/* The request as the rest of the handler reads it, in place: v15+'s ReplicaState.ReplicaId is the
 * ReplicaId; v13+'s topic ids get their names (Kafka's FetchRequest.fetchData(topicNames) and
 * forgottenTopics(topicNames)), NULL for an id the metadata cache does not know. Consecutive
 * entries of one id (a follower sends one per partition) are looked up once. */
static void resolve_ids(struct gr_broker *b, struct gr_api_req *req, struct FetchRequest *r, int16_t version) {
    if (version >= 15) r->ReplicaId = r->ReplicaState.ReplicaId;
    if (version < 13) return;
    const uint8_t *last = NULL;
    char *last_name = NULL;
    int nt = GR_MAX(r->TopicsCount, 0), nf = GR_MAX(r->ForgottenTopicsDataCount, 0);
    for (int t = 0; t < nt + nf; t++) {
        bool forgotten = t >= nt;
        int k = forgotten ? t - nt : t;
        const uint8_t *id = forgotten ? r->ForgottenTopicsData[k].TopicId : r->Topics[k].TopicId;
        char **name = forgotten ? &r->ForgottenTopicsData[k].Topic : &r->Topics[k].Topic;
        if (!last || memcmp(last, id, 16) != 0) {
            char *n = topic_name_by_id(b, id);
            last_name = n ? gr_api_strdup(req, n) : NULL;
            free(n);
            last = id;
        }
        *name = last_name;
    }
}

void gr_handle_fetch(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr, void *body) {
    struct fetch_ctx *c = gr_calloc(1, sizeof *c);
    c->rm = b->replica_manager;
    c->req = req;
    c->version = hdr->RequestApiVersion;
    resolve_ids(b, req, body, c->version);
    const struct FetchRequest *r = c->r = body;
    if (c->rm && c->rm->fetch_sessions) {
        r = c->r = gr_fsc_begin(c->rm->fetch_sessions, r, c->version, gr_mono_ms(), &req->arena, &c->session,
                                topic_name_by_id, b);
        if (!r) { /* unknown session or wrong epoch: a top-level error, no data */
            struct FetchResponse *resp = gr_api_new_response(req);
            session_finish(c, resp);
            gr_api_respond(req, resp);
            free(c);
            return;
        }
    }
    int n = 0;
    for (int t = 0; t < r->TopicsCount; t++) n += r->Topics[t].PartitionsCount > 0 ? r->Topics[t].PartitionsCount : 0;
    c->n = n;
    c->bufs = gr_calloc((size_t)n + 1, sizeof *c->bufs);
    /* Kafka: followers need Cluster CLUSTER_ACTION, consumers Topic READ (api/authorize.h). */
    int nt = r->TopicsCount > 0 ? r->TopicsCount : 0;
    c->denied = gr_calloc((size_t)nt + 1, sizeof *c->denied);
    bool cluster_ok = r->ReplicaId < 0 || gr_api_authorized_cluster(req, GR_ACL_OP_CLUSTER_ACTION);
    gr_fsc_replica_authorized(&c->session, cluster_ok); /* before any session is touched (finish) */
    for (int t = 0; t < nt; t++)
        c->denied[t] = !cluster_ok || (r->ReplicaId < 0 && r->Topics[t].Topic && /* NULL: UNKNOWN_TOPIC_ID first */
                                       !gr_api_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, r->Topics[t].Topic));
    c->regions = gr_calloc((size_t)n + 1, sizeof *c->regions);
    c->parts = gr_calloc((size_t)n + 1, sizeof *c->parts);
    c->zero_copy = zero_copy_allowed(c);

    int64_t bytes;
    bool errors;
    struct FetchResponse *resp = do_read(c, true, &bytes, &errors);
    leader_hints(c, resp);
    if (!c->rm || r->MaxWaitMs <= 0 || bytes >= (int64_t)GR_MAX(r->MinBytes, 1) || errors || n == 0) {
        fetch_metrics(c, resp);
        session_finish(c, resp);
        fetch_throttle(c, resp, bytes);
        send_response(c, resp);
        drop_parts(c);
        free(c->bufs);
        free(c->denied);
        free(c->regions);
        free(c);
        return;
    }
    /* Wait: forget this read (the op reads again when it completes). */
    free_bufs(c);
    gr_delayed_op_init(&c->op, &FETCH_VT, r->MaxWaitMs);
    uint64_t small[16], *keys = n <= 16 ? small : gr_malloc((size_t)n * sizeof *keys);
    int k = 0;
    for (int t = 0; t < r->TopicsCount; t++)
        for (int i = 0; i < r->Topics[t].PartitionsCount; i++)
            keys[k++] = gr_rm_key(r->Topics[t].Topic ? r->Topics[t].Topic : "", r->Topics[t].Partitions[i].Partition);
    gr_purgatory_submit(c->rm->fetch_purg, &c->op, keys, k);
    if (keys != small) free(keys);
}
