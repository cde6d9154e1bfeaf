/* Fetch (api key 1), versions 4-11 (the v2 record format needs v4+; librdkafka uses up to 11,
 * kafka-python v4). Served by the leader only (no KIP-392 follower fetching):
 *   - consumers (ReplicaId -1) read below the high watermark; followers (ReplicaId >= 0) read up
 *     to the log end offset and their FetchOffset updates the leader's view of them (HW, ISR);
 *   - KIP-320: CurrentLeaderEpoch (v9+) older than ours -> FENCED_LEADER_EPOCH, newer ->
 *     UNKNOWN_LEADER_EPOCH;
 *   - MaxBytes bounds the response, PartitionMaxBytes each partition; the first partition that
 *     has data returns at least one whole batch (Kafka's minOneMessage);
 *   - LastStableOffset = high watermark (no transactions); no aborted transactions;
 *   - sessions (KIP-227): every fetch is answered sessionless (SessionId 0), full;
 *   - authorization (api/authorize.h): followers need Cluster CLUSTER_ACTION, consumers Topic
 *     READ; denied partitions get TOPIC_AUTHORIZATION_FAILED.
 * Long poll: if fewer than MinBytes are available and MaxWaitMs > 0, the request waits in the
 * fetch purgatory until a watched partition has new data (an append, for consumers an HW move),
 * an error appears (leadership change), or MaxWaitMs passes; then it is read again and answered.
 * A follower's partition this broker does not host (yet) is not such an error: a new
 * partition's first follower fetch usually arrives before our own LeaderAndIsr, and answering
 * at once made the follower back off (issue 14); it waits like "no data" and gets
 * UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER when the request is answered.
 * (Availability is judged per partition — "something new past FetchOffset" — rather than by
 * exact byte counts, which is the same for the MinBytes=1 that clients and followers use.) */
#include <stdlib.h>
#include <string.h>

#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker_topic_stats.h"
#include "broker/broker.h"
#include "replication/log_dir_failure.h"
#include "replication/purgatory.h"
#include "replication/replica_internal.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"

struct fetch_ctx {
    struct gr_delayed_op op; /* first member */
    struct gr_replica_manager *rm;
    struct gr_api_req *req;
    const struct FetchRequest *r;
    int16_t version;
    int n;
    bool *denied; /* per request topic: TOPIC_AUTHORIZATION_FAILED (authorize.h) */
    /* read results that must be freed after the response is encoded */
    uint8_t **bufs;
    int nbufs;
};

static void free_bufs(struct fetch_ctx *c) {
    for (int i = 0; i < c->nbufs; i++) free(c->bufs[i]);
    c->nbufs = 0;
}

/* Reads every partition into a fresh response. update_followers: record follower progress (the
 * first read of a request only). Returns the response; *bytes and *errors summarise it. */
static struct FetchResponse *do_read(struct fetch_ctx *c, bool update_followers, int64_t *bytes, bool *errors) {
    struct gr_api_req *req = c->req;
    const struct FetchRequest *r = c->r;
    struct gr_replica_manager *rm = c->rm;
    bool follower = r->ReplicaId >= 0;
    struct FetchResponse *resp = gr_api_new_response(req);
    resp->ThrottleTimeMs = 0;
    resp->ErrorCode = GR_KERR_NONE;
    resp->SessionId = 0;
    resp->ResponsesCount = r->TopicsCount > 0 ? r->TopicsCount : 0;
    resp->Responses = gr_api_alloc(req, (size_t)(resp->ResponsesCount + 1) * sizeof *resp->Responses);
    int64_t remaining = c->version >= 3 ? r->MaxBytes : INT32_MAX;
    if (remaining <= 0) remaining = 1; /* still return one batch (minOneMessage) */
    bool min_one = true;
    *bytes = 0;
    *errors = false;
    for (int t = 0; t < resp->ResponsesCount; t++) {
        const struct FetchRequest_FetchTopic *ft = &r->Topics[t];
        struct FetchResponse_FetchableTopicResponse *tr = &resp->Responses[t];
        tr->Topic = ft->Topic;
        tr->PartitionResponsesCount = ft->PartitionsCount > 0 ? ft->PartitionsCount : 0;
        tr->PartitionResponses = gr_api_alloc(req, (size_t)(tr->PartitionResponsesCount + 1) * sizeof *tr->PartitionResponses);
        for (int i = 0; i < tr->PartitionResponsesCount; i++) {
            const struct FetchRequest_FetchPartition *fp = &ft->Partitions[i];
            struct FetchResponse_FetchablePartitionResponse *pr = &tr->PartitionResponses[i];
            pr->Partition = fp->Partition;
            pr->ErrorCode = GR_KERR_NONE;
            pr->HighWatermark = -1;
            pr->LastStableOffset = -1;
            pr->LogStartOffset = -1;
            pr->DivergingEpoch.Epoch = -1;
            pr->DivergingEpoch.EndOffset = -1;
            pr->CurrentLeader.LeaderId = -1;
            pr->CurrentLeader.LeaderEpoch = -1;
            pr->AbortedTransactionsCount = -1;
            pr->AbortedTransactions = NULL;
            pr->PreferredReadReplica = -1;
            pr->RecordSet.p = NULL;
            pr->RecordSet.len = 0;
            if (c->denied[t]) {
                pr->ErrorCode = GR_KERR_TOPIC_AUTHORIZATION_FAILED;
                *errors = true;
                continue;
            }
            struct gr_rm_partition *p = rm ? gr_rm_get_partition(rm, ft->Topic, fp->Partition) : NULL;
            if (!p) {
                pr->ErrorCode = rm ? gr_rm_not_hosted_error(rm, ft->Topic, fp->Partition)
                                   : GR_KERR_NOT_LEADER_OR_FOLLOWER;
                /* A follower usually asks for a new partition before our own LeaderAndIsr made
                 * us its leader: let its first read wait for that (see fetch_try) instead of
                 * answering at once with an error it would back off on. */
                if (!(follower && update_followers && r->MaxWaitMs > 0)) *errors = true;
                continue;
            }
            pthread_mutex_lock(&p->lock);
            int16_t err = gr_rm_check_epoch_locked(p, c->version >= 9 ? fp->CurrentLeaderEpoch : -1, true);
            int64_t hw = atomic_load(&p->lml->hw);
            pthread_mutex_unlock(&p->lock);
            if (err == GR_KERR_NONE) err = gr_ldf_check(req->broker, p->lml->dir_idx); /* offline log dir */
            if (err != GR_KERR_NONE) {
                pr->ErrorCode = err;
                *errors = true;
                gr_rm_partition_unref(p);
                continue;
            }
            struct gr_plog *log = p->lml->log;
            int64_t start = gr_plog_start_offset(log), leo = gr_plog_end_offset(log);
            int64_t limit = GR_MIN((int64_t)fp->PartitionMaxBytes, remaining);
            struct gr_plog_read_result res;
            memset(&res, 0, sizeof res);
            res.log_start_offset = start;
            res.log_end_offset = leo;
            if (fp->FetchOffset < start || fp->FetchOffset > leo) {
                res.error = GR_KERR_OFFSET_OUT_OF_RANGE;
            } else if ((!follower && fp->FetchOffset >= hw) || fp->FetchOffset == leo || limit <= 0) {
                /* nothing to read */
            } else {
                int rc = gr_plog_read(log, fp->FetchOffset, (int32_t)GR_MIN(limit, (int64_t)INT32_MAX),
                                     follower ? -1 : hw, min_one, &res);
                if (rc < 0) res.error = GR_KERR_KAFKA_STORAGE_ERROR;
                if (rc < 0) gr_ldf_report(req->broker, p->lml->dir_idx, rc, "reading a log");
            }
            if (res.error != GR_KERR_NONE) {
                pr->ErrorCode = res.error;
                *errors = true;
            } else if (follower && update_followers) {
                gr_rm_update_follower(rm, p, r->ReplicaId, fp->FetchOffset, fp->LogStartOffset, res.log_end_offset);
                hw = atomic_load(&p->lml->hw);
            }
            pr->HighWatermark = hw;
            pr->LastStableOffset = hw;
            pr->LogStartOffset = res.log_start_offset;
            if (res.len > 0) {
                pr->RecordSet.p = res.data;
                pr->RecordSet.len = (int32_t)res.len;
                c->bufs[c->nbufs++] = res.data;
                remaining -= (int64_t)res.len;
                *bytes += (int64_t)res.len;
                min_one = false;
            } else {
                free(res.data);
            }
            gr_rm_partition_unref(p);
        }
    }
    return resp;
}

/* Is there anything new for this fetch (or an error to report)? */
static bool fetch_try(struct gr_delayed_op *op) {
    struct fetch_ctx *c = (struct fetch_ctx *)op;
    const struct FetchRequest *r = c->r;
    bool follower = r->ReplicaId >= 0;
    /* Woken by one partition's check: only that one can have become ready (purgatory.h). The
     * op's keys follow the request's partitions in order. */
    uint64_t only = op->nkeys == c->n ? op->woken_key : 0;
    int k = 0;
    for (int t = 0; t < r->TopicsCount; t++) {
        const struct FetchRequest_FetchTopic *ft = &r->Topics[t];
        if (c->denied[t]) return true;
        for (int i = 0; i < ft->PartitionsCount; i++) {
            if (only && op->keys[k++] != only) continue;
            const struct FetchRequest_FetchPartition *fp = &ft->Partitions[i];
            struct gr_rm_partition *p = gr_rm_get_partition(c->rm, ft->Topic, fp->Partition);
            if (!p && follower) continue; /* not hosted yet: answered (with the error) at expiry */
            if (!p) return true;
            pthread_mutex_lock(&p->lock);
            int16_t err = gr_rm_check_epoch_locked(p, c->version >= 9 ? fp->CurrentLeaderEpoch : -1, true);
            int64_t hw = atomic_load(&p->lml->hw);
            pthread_mutex_unlock(&p->lock);
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
static void fetch_metrics(struct fetch_ctx *c, const struct FetchResponse *resp) {
    struct gr_metrics *reg = c->req->broker ? c->req->broker->metrics : NULL;
    bool follower = c->r->ReplicaId >= 0;
    /* Marks are summed over runs of entries naming the same topic (followers send one entry
     * per partition, often thousands): one registry lookup per run, not per partition. */
    int64_t total = 0, failed = 0, out = 0, repl = 0;
    for (int t = 0; reg && t < resp->ResponsesCount; t++) {
        const struct FetchResponse_FetchableTopicResponse *tr = &resp->Responses[t];
        for (int i = 0; i < tr->PartitionResponsesCount; i++) {
            const struct FetchResponse_FetchablePartitionResponse *pr = &tr->PartitionResponses[i];
            total++;
            if (pr->ErrorCode != GR_KERR_NONE) failed++;
            if (pr->RecordSet.len > 0) *(follower ? &repl : &out) += pr->RecordSet.len;
        }
        const char *next = t + 1 < resp->ResponsesCount ? resp->Responses[t + 1].Topic : NULL;
        if (next && tr->Topic && strcmp(next, tr->Topic) == 0) continue;
        if (total) gr_bts_mark(reg, tr->Topic, "TotalFetchRequestsPerSec", total);
        if (failed) gr_bts_mark(reg, tr->Topic, "FailedFetchRequestsPerSec", failed);
        if (out) gr_bts_mark(reg, tr->Topic, "BytesOutPerSec", out);
        total = failed = out = 0;
    }
    if (repl) gr_bts_mark(reg, NULL, "ReplicationBytesOutPerSec", repl);
}

static void fetch_respond(struct fetch_ctx *c) {
    int64_t bytes;
    bool errors;
    struct FetchResponse *resp = do_read(c, false, &bytes, &errors);
    fetch_metrics(c, resp);
    gr_api_respond(c->req, resp);
    free_bufs(c);
}

static void fetch_complete(struct gr_delayed_op *op, bool expired) {
    (void)expired;
    fetch_respond((struct fetch_ctx *)op);
}

static void fetch_destroy(struct gr_delayed_op *op) {
    struct fetch_ctx *c = (struct fetch_ctx *)op;
    free(c->bufs);
    free(c->denied);
    free(c);
}

static const struct gr_delayed_op_vt FETCH_VT = {fetch_try, fetch_complete, fetch_destroy};

void gr_handle_fetch(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr, void *body) {
    const struct FetchRequest *r = body;
    struct fetch_ctx *c = gr_calloc(1, sizeof *c);
    c->rm = b->replica_manager;
    c->req = req;
    c->r = r;
    c->version = hdr->RequestApiVersion;
    int n = 0;
    for (int t = 0; t < r->TopicsCount; t++) n += r->Topics[t].PartitionsCount > 0 ? r->Topics[t].PartitionsCount : 0;
    c->n = n;
    c->bufs = gr_calloc((size_t)n + 1, sizeof *c->bufs);
    /* Kafka: followers need Cluster CLUSTER_ACTION, consumers Topic READ (api/authorize.h). */
    int nt = r->TopicsCount > 0 ? r->TopicsCount : 0;
    c->denied = gr_calloc((size_t)nt + 1, sizeof *c->denied);
    bool cluster_ok = r->ReplicaId < 0 || gr_api_authorized_cluster(req, GR_ACL_OP_CLUSTER_ACTION);
    for (int t = 0; t < nt; t++)
        c->denied[t] = !cluster_ok ||
                       (r->ReplicaId < 0 && !gr_api_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, r->Topics[t].Topic));

    int64_t bytes;
    bool errors;
    struct FetchResponse *resp = do_read(c, true, &bytes, &errors);
    if (!c->rm || r->MaxWaitMs <= 0 || bytes >= (int64_t)GR_MAX(r->MinBytes, 1) || errors || n == 0) {
        fetch_metrics(c, resp);
        gr_api_respond(req, resp);
        free_bufs(c);
        free(c->bufs);
        free(c->denied);
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
