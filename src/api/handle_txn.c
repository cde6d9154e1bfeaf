/* Transaction APIs (Kafka 2.7 / 3.9 KafkaApis.handle{InitProducerId (transactional), AddPartitionsToTxn,
 * AddOffsetsToTxn, EndTxn, WriteTxnMarkers, TxnOffsetCommit}) over coordinator/txn_coordinator.h.
 *
 * WriteTxnMarkers appends one control batch (Kafka's marker layout: transactional + control,
 * baseSequence -1, key = version 0 + type 0 ABORT / 1 COMMIT, value = version 0 + coordinator
 * epoch) per partition with acks=-1 and the coordinator-origin checks. A COMMIT marker on a
 * __consumer_offsets partition makes the producer's pending transactional offsets of the groups
 * on that partition visible (also written as ordinary offset commits at that moment); an ABORT
 * drops them. TxnOffsetCommit writes the offsets first, as Kafka, as a transactional batch of the
 * producer to the group's __consumer_offsets partition (acks=-1), so a group coordinator that
 * loads the partition later rebuilds the pending offsets and applies them at the marker
 * (group_metadata_manager.c, coordinator/txn_offsets.h). With KIP-890 verification on (Kafka
 * 3.7), the write waits until the transaction coordinator confirmed that the group's
 * __consumer_offsets partition is part of the producer's transaction (AddOffsetsToTxn): a commit
 * for a partition not added, or after the transaction ended, is refused (INVALID_TXN_STATE).
 *
 * AddPartitionsToTxn v0-3 requests whose header ClientId is GR_TXN_VERIFY_CLIENT_ID are KIP-890
 * verification requests between Gregor brokers (add_partitions_to_txn_manager.c): nothing is
 * added; the answer says per partition whether it is part of the producer's ongoing transaction
 * (NONE) or not (INVALID_TXN_STATE). AddPartitionsToTxn v4-v5 is Kafka 3.9's batched broker form
 * (several transactions, VerifyOnly, TRANSACTION_ABORTABLE for a partition not in the
 * transaction): add_partitions_v4. The other APIs' 3.9 versions (InitProducerId v5,
 * AddOffsetsToTxn v4, EndTxn v4, TxnOffsetCommit v4, WriteTxnMarkers v1) differ only in what the
 * client understands: TxnOffsetCommit v4 gets TRANSACTION_ABORTABLE where v3 gets
 * INVALID_TXN_STATE (KIP-890 refusal). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "admin/topic_names.h"
#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/add_partitions_to_txn_manager.h"
#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "coordinator/group_coordinator.h"
#include "coordinator/group_offsets.h"
#include "coordinator/txn_coordinator.h"
#include "coordinator/txn_log.h"
#include "coordinator/txn_offsets.h"
#include "protocol/wire.h"
#include "replication/replica_internal.h"
#include "storage/batch.h"
#include "storage/producer_state.h"

#define LOGGER "kafka.server.KafkaApis"

/* v<4 InitProducerId / v<2 Add*,EndTxn know INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED */
static int16_t fenced_for(int16_t e, bool old) {
    return e == GR_KERR_PRODUCER_FENCED && old ? GR_KERR_INVALID_PRODUCER_EPOCH : e;
}

/* ---- InitProducerId with a transactional id ---- */

static void init_done(void *ctx, int16_t error, int64_t pid, int16_t epoch) {
    struct gr_api_req *req = ctx;
    struct InitProducerIdResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = fenced_for(error, req->hdr.RequestApiVersion < 4);
    resp->ProducerId = error == GR_KERR_NONE ? pid : -1;
    resp->ProducerEpoch = error == GR_KERR_NONE ? epoch : -1;
    gr_api_respond(req, resp);
}

void gr_txn_handle_init_producer_id(struct gr_broker *b, struct gr_api_req *req, const struct InitProducerIdRequest *r) {
    if (!b->txn_coordinator) {
        init_done(req, GR_KERR_COORDINATOR_NOT_AVAILABLE, -1, -1);
        return;
    }
    gr_txn_init_producer_id(b->txn_coordinator, r->TransactionalId, r->TransactionTimeoutMs, r->ProducerId,
                            r->ProducerEpoch, init_done, req);
}

/* ---- AddPartitionsToTxn ---- */

struct add_ctx {
    struct gr_api_req *req;
    const struct AddPartitionsToTxnRequest *r;
    int16_t *pre; /* per flattened partition: pre-set error (or -1 = use the result) */
};

static void add_done(void *ctx, int16_t error, int64_t pid, int16_t epoch) {
    (void)pid;
    (void)epoch;
    struct add_ctx *c = ctx;
    struct gr_api_req *req = c->req;
    const struct AddPartitionsToTxnRequest *r = c->r;
    error = fenced_for(error, req->hdr.RequestApiVersion < 2);
    struct AddPartitionsToTxnResponse *resp = gr_api_new_response(req);
    resp->ResultsByTopicV3AndBelowCount = GR_MAX(r->V3AndBelowTopicsCount, 0);
    resp->ResultsByTopicV3AndBelow = gr_api_alloc(req, (size_t)(resp->ResultsByTopicV3AndBelowCount + 1) * sizeof *resp->ResultsByTopicV3AndBelow);
    int k = 0;
    for (int t = 0; t < resp->ResultsByTopicV3AndBelowCount; t++) {
        struct AddPartitionsToTxnResponse_AddPartitionsToTxnTopicResult *tr = &resp->ResultsByTopicV3AndBelow[t];
        tr->Name = r->V3AndBelowTopics[t].Name;
        tr->ResultsByPartitionCount = GR_MAX(r->V3AndBelowTopics[t].PartitionsCount, 0);
        tr->ResultsByPartition = gr_api_alloc(req, (size_t)(tr->ResultsByPartitionCount + 1) * sizeof *tr->ResultsByPartition);
        for (int i = 0; i < tr->ResultsByPartitionCount; i++, k++) {
            tr->ResultsByPartition[i].PartitionIndex = r->V3AndBelowTopics[t].Partitions[i];
            tr->ResultsByPartition[i].PartitionErrorCode = c->pre && c->pre[k] >= 0 ? c->pre[k] : error;
        }
    }
    gr_api_respond(req, resp);
}

/* ---- AddPartitionsToTxn v4+ (KIP-890: a broker's batch of transactions) ---- */

struct add4_ctx;
struct add4_txn {
    struct add4_ctx *c;
    int n;               /* partitions, flattened in request order */
    const char **topics; /* n */
    int32_t *parts;      /* n */
    int16_t *errs;       /* n: the answer per partition */
};
struct add4_ctx {
    struct gr_api_req *req;
    const struct AddPartitionsToTxnRequest *r;
    struct add4_txn *txns;
    _Atomic int pending; /* transactions not answered yet, + 1 while the handler runs */
};

static void add4_respond(struct add4_ctx *c, int16_t top) {
    struct gr_api_req *req = c->req;
    const struct AddPartitionsToTxnRequest *r = c->r;
    struct AddPartitionsToTxnResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = top;
    int nt = top == GR_KERR_NONE ? GR_MAX(r->TransactionsCount, 0) : 0;
    resp->ResultsByTransactionCount = nt;
    resp->ResultsByTransaction = gr_api_alloc(req, (size_t)(nt + 1) * sizeof *resp->ResultsByTransaction);
    for (int x = 0; x < nt; x++) {
        const struct AddPartitionsToTxnRequest_AddPartitionsToTxnTransaction *rx = &r->Transactions[x];
        struct AddPartitionsToTxnResponse_AddPartitionsToTxnResult *ox = &resp->ResultsByTransaction[x];
        ox->TransactionalId = rx->TransactionalId;
        ox->TopicResultsCount = GR_MAX(rx->TopicsCount, 0);
        ox->TopicResults = gr_api_alloc(req, (size_t)(ox->TopicResultsCount + 1) * sizeof *ox->TopicResults);
        int k = 0;
        for (int t = 0; t < ox->TopicResultsCount; t++) {
            struct AddPartitionsToTxnResponse_AddPartitionsToTxnTopicResult *tr = &ox->TopicResults[t];
            tr->Name = rx->Topics[t].Name;
            tr->ResultsByPartitionCount = GR_MAX(rx->Topics[t].PartitionsCount, 0);
            tr->ResultsByPartition = gr_api_alloc(req, (size_t)(tr->ResultsByPartitionCount + 1) * sizeof *tr->ResultsByPartition);
            for (int i = 0; i < tr->ResultsByPartitionCount; i++, k++) {
                tr->ResultsByPartition[i].PartitionIndex = rx->Topics[t].Partitions[i];
                tr->ResultsByPartition[i].PartitionErrorCode = c->txns[x].errs[k];
            }
        }
    }
    gr_api_respond(req, resp);
}

static void add4_release(struct add4_ctx *c) {
    if (atomic_fetch_sub(&c->pending, 1) == 1) add4_respond(c, GR_KERR_NONE);
}

static void add4_added(void *ctx, int16_t error, int64_t pid, int16_t epoch) {
    (void)pid;
    (void)epoch;
    struct add4_txn *tx = ctx;
    for (int i = 0; i < tx->n; i++) tx->errs[i] = error;
    add4_release(tx->c);
}

/* Kafka 3.9 handleAddPartitionsToTxnRequest for v4+: Cluster CLUSTER_ACTION for the whole
 * request (denied: the top-level ErrorCode, no results); a transaction without an id fails the
 * request with INVALID_REQUEST; per transaction, unknown partitions fail it
 * (UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED; no Topic ACLs: the caller
 * is a broker); then VerifyOnly answers per partition as handleVerifyPartitionsInTransaction
 * (NONE when in the Ongoing transaction, TRANSACTION_ABORTABLE when not, or the transaction's
 * error for every partition), else the partitions are added as a client's v3 request adds them. */
static void add_partitions_v4(struct gr_broker *b, struct gr_api_req *req, const struct AddPartitionsToTxnRequest *r) {
    struct add4_ctx *c = gr_api_alloc(req, sizeof *c);
    c->req = req;
    c->r = r;
    int nt = GR_MAX(r->TransactionsCount, 0);
    c->txns = gr_api_alloc(req, (size_t)(nt + 1) * sizeof *c->txns);
    if (!gr_api_authorized_cluster(req, GR_ACL_OP_CLUSTER_ACTION)) {
        add4_respond(c, GR_KERR_CLUSTER_AUTHORIZATION_FAILED);
        return;
    }
    for (int x = 0; x < nt; x++)
        if (!r->Transactions[x].TransactionalId) {
            add4_respond(c, GR_KERR_INVALID_REQUEST);
            return;
        }
    struct gr_txn_coordinator *tc = b->txn_coordinator;
    atomic_init(&c->pending, nt + 1);
    for (int x = 0; x < nt; x++) {
        const struct AddPartitionsToTxnRequest_AddPartitionsToTxnTransaction *rx = &r->Transactions[x];
        struct add4_txn *tx = &c->txns[x];
        tx->c = c;
        for (int t = 0; t < rx->TopicsCount; t++) tx->n += GR_MAX(rx->Topics[t].PartitionsCount, 0);
        tx->topics = gr_api_alloc(req, (size_t)(tx->n + 1) * sizeof *tx->topics);
        tx->parts = gr_api_alloc(req, (size_t)(tx->n + 1) * sizeof *tx->parts);
        tx->errs = gr_api_alloc(req, (size_t)(tx->n + 1) * sizeof *tx->errs);
        int k = 0;
        bool bad = false;
        for (int t = 0; t < rx->TopicsCount; t++)
            for (int i = 0; i < rx->Topics[t].PartitionsCount; i++, k++) {
                tx->topics[k] = rx->Topics[t].Name ? rx->Topics[t].Name : "";
                tx->parts[k] = rx->Topics[t].Partitions[i];
                struct gr_mdc_partition mp;
                tx->errs[k] = GR_KERR_NONE;
                if (!gr_mdc_get_partition(b->metadata, tx->topics[k], tx->parts[k], &mp)) {
                    tx->errs[k] = GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
                    bad = true;
                } else {
                    gr_mdc_partition_release(&mp);
                }
            }
        if (bad) {
            for (int i = 0; i < tx->n; i++)
                if (tx->errs[i] == GR_KERR_NONE) tx->errs[i] = GR_KERR_OPERATION_NOT_ATTEMPTED;
            add4_release(c);
        } else if (!tc) {
            add4_added(tx, GR_KERR_NOT_COORDINATOR, -1, -1);
        } else if (rx->VerifyOnly) {
            for (int i = 0; i < tx->n; i++) {
                int16_t e = gr_txn_verify_id(tc, rx->TransactionalId, rx->ProducerId, rx->ProducerEpoch,
                                             tx->topics[i], tx->parts[i]);
                tx->errs[i] = e == GR_KERR_INVALID_TXN_STATE ? GR_KERR_TRANSACTION_ABORTABLE : e;
            }
            add4_release(c);
        } else {
            gr_txn_add_partitions(tc, rx->TransactionalId, rx->ProducerId, rx->ProducerEpoch, tx->topics, tx->parts,
                                  tx->n, add4_added, tx);
        }
    }
    add4_release(c);
}

void gr_handle_add_partitions_to_txn(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                     void *body) {
    const struct AddPartitionsToTxnRequest *r = body;
    if (hdr->RequestApiVersion >= 4) {
        add_partitions_v4(b, req, r);
        return;
    }
    struct add_ctx *c = gr_api_alloc(req, sizeof *c);
    c->req = req;
    c->r = r;
    int n = 0;
    for (int t = 0; t < r->V3AndBelowTopicsCount; t++) n += GR_MAX(r->V3AndBelowTopics[t].PartitionsCount, 0);
    const char **topics = gr_api_alloc(req, (size_t)(n + 1) * sizeof *topics);
    int32_t *parts = gr_api_alloc(req, (size_t)(n + 1) * sizeof *parts);
    c->pre = gr_api_alloc(req, (size_t)(n + 1) * sizeof *c->pre);
    int k = 0;
    for (int t = 0; t < r->V3AndBelowTopicsCount; t++)
        for (int i = 0; i < r->V3AndBelowTopics[t].PartitionsCount; i++, k++) {
            topics[k] = r->V3AndBelowTopics[t].Name ? r->V3AndBelowTopics[t].Name : "";
            parts[k] = r->V3AndBelowTopics[t].Partitions[i];
            c->pre[k] = -1;
        }
    struct gr_txn_coordinator *tc = b->txn_coordinator;
    if (!r->V3AndBelowTransactionalId || !tc) {
        add_done(c, tc ? GR_KERR_INVALID_REQUEST : GR_KERR_NOT_COORDINATOR, -1, -1);
        return;
    }
    bool verify = hdr->ClientId && strcmp(hdr->ClientId, GR_TXN_VERIFY_CLIENT_ID) == 0;
    /* Kafka 2.7: TransactionalId WRITE, then Topic WRITE per topic (internal topics never), and
     * only for an authorized topic whether the partition exists (so a denied client learns
     * nothing about existence); a broker's KIP-890 verification needs Cluster CLUSTER_ACTION
     * instead. */
    if (verify ? !gr_api_authorized_cluster(req, GR_ACL_OP_CLUSTER_ACTION)
               : !gr_api_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TRANSACTIONAL_ID, r->V3AndBelowTransactionalId)) {
        for (int i = 0; i < n; i++) c->pre[i] = GR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        add_done(c, GR_KERR_NONE, -1, -1);
        return;
    }
    if (verify) { /* KIP-890 verify */
        for (int i = 0; i < n; i++)
            c->pre[i] = gr_txn_verify_id(tc, r->V3AndBelowTransactionalId, r->V3AndBelowProducerId, r->V3AndBelowProducerEpoch, topics[i], parts[i]);
        add_done(c, GR_KERR_NONE, -1, -1);
        return;
    }
    bool bad = false;
    for (int i = 0; i < n; i++) {
        struct gr_mdc_partition mp;
        if (gr_topic_is_internal(topics[i]) || !gr_api_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TOPIC, topics[i])) {
            c->pre[i] = GR_KERR_TOPIC_AUTHORIZATION_FAILED;
            bad = true;
        } else if (!gr_mdc_get_partition(b->metadata, topics[i], parts[i], &mp)) {
            c->pre[i] = GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
            bad = true;
        } else {
            gr_mdc_partition_release(&mp);
        }
    }
    if (bad) { /* Kafka: the unknown ones fail, the others OPERATION_NOT_ATTEMPTED */
        for (int i = 0; i < n; i++)
            if (c->pre[i] < 0) c->pre[i] = GR_KERR_OPERATION_NOT_ATTEMPTED;
        add_done(c, GR_KERR_NONE, -1, -1);
        return;
    }
    c->pre = NULL;
    gr_txn_add_partitions(tc, r->V3AndBelowTransactionalId, r->V3AndBelowProducerId, r->V3AndBelowProducerEpoch, topics, parts, n, add_done, c);
}

/* ---- AddOffsetsToTxn ---- */

static void simple_done(void *ctx, int16_t error, int64_t pid, int16_t epoch) {
    (void)pid;
    (void)epoch;
    struct gr_api_req *req = ctx;
    /* AddOffsetsToTxnResponse and EndTxnResponse share the layout (ThrottleTimeMs, ErrorCode) */
    struct EndTxnResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = fenced_for(error, req->hdr.RequestApiVersion < 2);
    gr_api_respond(req, resp);
}

void gr_handle_add_offsets_to_txn(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                  void *body) {
    (void)hdr;
    const struct AddOffsetsToTxnRequest *r = body;
    if (!b->txn_coordinator || !b->group_coordinator || !r->TransactionalId || !r->GroupId) {
        simple_done(req, b->txn_coordinator ? GR_KERR_INVALID_REQUEST : GR_KERR_NOT_COORDINATOR, -1, -1);
        return;
    }
    if (!gr_api_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TRANSACTIONAL_ID, r->TransactionalId)) {
        simple_done(req, GR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1);
        return;
    }
    if (!gr_api_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_GROUP, r->GroupId)) {
        simple_done(req, GR_KERR_GROUP_AUTHORIZATION_FAILED, -1, -1);
        return;
    }
    const char *topic = GR_OFFSETS_TOPIC;
    int32_t p = gr_gc_partition_for(b->group_coordinator, r->GroupId);
    gr_txn_add_partitions(b->txn_coordinator, r->TransactionalId, r->ProducerId, r->ProducerEpoch, &topic, &p, 1,
                          simple_done, req);
}

/* ---- EndTxn ---- */

void gr_handle_end_txn(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr, void *body) {
    (void)hdr;
    const struct EndTxnRequest *r = body;
    if (!b->txn_coordinator || !r->TransactionalId) {
        simple_done(req, b->txn_coordinator ? GR_KERR_INVALID_REQUEST : GR_KERR_NOT_COORDINATOR, -1, -1);
        return;
    }
    if (!gr_api_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TRANSACTIONAL_ID, r->TransactionalId)) {
        simple_done(req, GR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1);
        return;
    }
    gr_txn_end(b->txn_coordinator, r->TransactionalId, r->ProducerId, r->ProducerEpoch, r->Committed, simple_done, req);
}

/* ---- TxnOffsetCommit (pending offsets: coordinator/txn_offsets.h) ---- */

/* Marker for (pid) on __consumer_offsets-p: COMMIT makes its pending offsets the groups'
 * committed offsets, ABORT drops them (group_coordinator.h gr_gc_complete_txn_offsets). */
static void complete_txn_offsets(struct gr_broker *b, int64_t pid, int32_t p, bool commit) {
    if (b->group_coordinator)
        gr_gc_complete_txn_offsets(b->group_coordinator, pid, p, commit);
    else
        gr_txn_offsets_free(gr_txn_offsets_take(pid, p));
}

struct toc_ctx {
    struct gr_api_req *req;
    const struct TxnOffsetCommitRequest *r;
    struct gr_rm_produce_part part;
    uint8_t *batch;
    int32_t op;
    int64_t base_offset; /* of the written batch: orders the offsets against ordinary commits */
    bool *too_large; /* per request partition, in request order: metadata over the limit, not written */
    struct gr_broker *b;
    uint64_t token; /* KIP-890 guard on the __consumer_offsets partition (0: none needed) */
};

static void toc_respond(struct toc_ctx *c, int16_t e) {
    struct gr_api_req *req = c->req;
    const struct TxnOffsetCommitRequest *r = c->r;
    struct TxnOffsetCommitResponse *resp = gr_api_new_response(req);
    resp->TopicsCount = GR_MAX(r->TopicsCount, 0);
    resp->Topics = gr_api_alloc(req, (size_t)(resp->TopicsCount + 1) * sizeof *resp->Topics);
    int k = 0;
    for (int t = 0; t < resp->TopicsCount; t++) {
        const struct TxnOffsetCommitRequest_TxnOffsetCommitRequestTopic *rt = &r->Topics[t];
        struct TxnOffsetCommitResponse_TxnOffsetCommitResponseTopic *tt = &resp->Topics[t];
        tt->Name = rt->Name;
        tt->PartitionsCount = GR_MAX(rt->PartitionsCount, 0);
        tt->Partitions = gr_api_alloc(req, (size_t)(tt->PartitionsCount + 1) * sizeof *tt->Partitions);
        for (int i = 0; i < tt->PartitionsCount; i++, k++) {
            tt->Partitions[i].PartitionIndex = rt->Partitions[i].PartitionIndex;
            if (c->too_large && c->too_large[k]) {
                tt->Partitions[i].ErrorCode = GR_KERR_OFFSET_METADATA_TOO_LARGE;
                continue;
            }
            tt->Partitions[i].ErrorCode = e;
            if (e == GR_KERR_NONE)
                gr_txn_offsets_add(r->ProducerId, c->op, r->GroupId, rt->Name ? rt->Name : "",
                                   rt->Partitions[i].PartitionIndex, rt->Partitions[i].CommittedOffset,
                                   rt->Partitions[i].CommittedLeaderEpoch, rt->Partitions[i].CommittedMetadata,
                                   c->base_offset);
        }
    }
    free(c->batch);
    gr_api_respond(req, resp);
}

static void toc_written(void *ctx, struct gr_rm_produce_part *parts, int n) {
    (void)n;
    int16_t e = parts[0].error;
    ((struct toc_ctx *)ctx)->base_offset = parts[0].base_offset;
    /* Kafka's GroupMetadataManager.storeOffsets error mapping */
    if (e == GR_KERR_UNKNOWN_TOPIC_OR_PARTITION || e == GR_KERR_NOT_ENOUGH_REPLICAS ||
        e == GR_KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND || e == GR_KERR_REQUEST_TIMED_OUT)
        e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    else if (e == GR_KERR_NOT_LEADER_OR_FOLLOWER || e == GR_KERR_KAFKA_STORAGE_ERROR)
        e = GR_KERR_NOT_COORDINATOR;
    toc_respond(ctx, e);
}

/* KIP-890 (Kafka 3.7 GroupCoordinator.handleTxnCommitOffsets): the transaction coordinator
 * answered whether the group's __consumer_offsets partition is part of the producer's
 * transaction (AddOffsetsToTxn added it). Errors as 3.7 maps them: PRODUCER_FENCED ->
 * INVALID_PRODUCER_EPOCH; INVALID_TXN_STATE and INVALID_PRODUCER_ID_MAPPING as they are; what a
 * retry may pass (CONCURRENT_TRANSACTIONS, coordinator moving or loading, a failed request) ->
 * COORDINATOR_NOT_AVAILABLE (3.7 gives NETWORK_EXCEPTION for the failed request; Gregor answers
 * the retriable error every TxnOffsetCommit version knows). */
static void toc_verified(void *ctx, const int16_t *errors, int n) {
    (void)n;
    struct toc_ctx *c = ctx;
    int16_t e = errors[0];
    struct gr_rm_partition *p = gr_rm_get_partition(c->b->replica_manager, GR_OFFSETS_TOPIC, c->op);
    if (p) {
        gr_plog_txn_end_verification(p->lml->log, c->r->ProducerId, c->token, e == GR_KERR_NONE);
        gr_rm_partition_unref(p);
    }
    if (e == GR_KERR_NONE) {
        gr_rm_produce(c->b->replica_manager, -1, 5000, &c->part, 1, toc_written, c);
        return;
    }
    gr_info(LOGGER, "rejecting transactional offset commit of producer %lld for group %s: %s (KIP-890 verification)",
            (long long)c->r->ProducerId, c->r->GroupId, gr_kerr_name(e));
    if (e == GR_KERR_PRODUCER_FENCED || e == GR_KERR_INVALID_PRODUCER_EPOCH) e = GR_KERR_INVALID_PRODUCER_EPOCH;
    else if (e == GR_KERR_INVALID_TXN_STATE && c->req->hdr.RequestApiVersion >= 4)
        e = GR_KERR_TRANSACTION_ABORTABLE; /* Kafka 3.9: v4+ clients know it (KIP-890) */
    else if (e != GR_KERR_INVALID_TXN_STATE && e != GR_KERR_INVALID_PRODUCER_ID_MAPPING)
        e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    toc_respond(c, e);
}

/* Any topic the principal may not READ? (Gregor answers the whole request with
 * TOPIC_AUTHORIZATION_FAILED then, where Kafka 2.7 commits the authorized topics and fails the
 * others: a transactional offset commit is all or nothing here.) */
static bool topics_unreadable(struct gr_api_req *req, const struct TxnOffsetCommitRequest *r) {
    for (int t = 0; t < r->TopicsCount; t++)
        if (!gr_api_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, r->Topics[t].Name ? r->Topics[t].Name : ""))
            return true;
    return false;
}

void gr_handle_txn_offset_commit(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                 void *body) {
    (void)hdr;
    const struct TxnOffsetCommitRequest *r = body;
    struct toc_ctx *c = gr_api_alloc(req, sizeof *c);
    c->req = req;
    c->r = r;
    c->base_offset = -1;
    int16_t e = GR_KERR_NONE;
    /* Kafka 2.7: TransactionalId WRITE, Group READ (every partition gets the error); Topic READ
     * is checked per topic below */
    if (!gr_api_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TRANSACTIONAL_ID, r->TransactionalId ? r->TransactionalId : ""))
        e = GR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    else if (!gr_api_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_GROUP, r->GroupId ? r->GroupId : ""))
        e = GR_KERR_GROUP_AUTHORIZATION_FAILED;
    else if (topics_unreadable(req, r))
        e = GR_KERR_TOPIC_AUTHORIZATION_FAILED;
    else if (!b->group_coordinator || !b->replica_manager || !r->GroupId) e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    else if (req->hdr.RequestApiVersion >= 3)
        e = gr_gc_validate_txn_commit(b->group_coordinator, r->GroupId, r->MemberId, r->GroupInstanceId,
                                      r->GenerationId);
    else
        e = gr_gc_coordinator_status(b->group_coordinator, r->GroupId);
    if (e == GR_KERR_COORDINATOR_LOAD_IN_PROGRESS && req->hdr.RequestApiVersion < 2)
        e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    if (e != GR_KERR_NONE) {
        toc_respond(c, e);
        return;
    }
    c->op = gr_gc_partition_for(b->group_coordinator, r->GroupId);
    /* Kafka writes the offsets as a transactional batch of the producer (coordinator origin) */
    int n = 0;
    for (int t = 0; t < r->TopicsCount; t++) n += GR_MAX(r->Topics[t].PartitionsCount, 0);
    struct gr_batch_rec *recs = gr_calloc((size_t)n + 1, sizeof *recs);
    struct gr_wbuf *bufs = gr_calloc((size_t)(2 * n) + 1, sizeof *bufs);
    c->too_large = gr_api_alloc(req, (size_t)n + 1);
    int k = 0, q = 0; /* q: request partitions, k: records written */
    int64_t now = gr_wall_ms();
    for (int t = 0; t < r->TopicsCount; t++)
        for (int i = 0; i < r->Topics[t].PartitionsCount; i++, q++) {
            const struct TxnOffsetCommitRequest_TxnOffsetCommitRequestPartition *rp = &r->Topics[t].Partitions[i];
            /* Kafka 2.7 storeOffsets: metadata over offset.metadata.max.bytes is not written */
            c->too_large[q] = gr_gc_metadata_too_large(b->group_coordinator, rp->CommittedMetadata);
            if (c->too_large[q]) continue;
            gr_wbuf_init(&bufs[2 * k]);
            gr_wbuf_init(&bufs[2 * k + 1]);
            gr_go_encode_offset_key(&bufs[2 * k], r->GroupId, r->Topics[t].Name ? r->Topics[t].Name : "",
                                    rp->PartitionIndex);
            struct gr_go_offset_value v = {.offset = rp->CommittedOffset, .leader_epoch = rp->CommittedLeaderEpoch,
                                           .metadata = rp->CommittedMetadata ? rp->CommittedMetadata : (char *)"",
                                           .commit_timestamp = now, .expire_timestamp = -1};
            gr_go_encode_offset_value(&bufs[2 * k + 1], &v);
            recs[k] = (struct gr_batch_rec){.key = bufs[2 * k].p, .key_len = (int32_t)bufs[2 * k].len,
                                            .value = bufs[2 * k + 1].p, .value_len = (int32_t)bufs[2 * k + 1].len,
                                            .timestamp = now};
            k++;
        }
    n = k;
    struct gr_batch_build_opts o = GR_BATCH_BUILD_OPTS_INIT;
    o.attributes = GR_BATCH_ATTR_TRANSACTIONAL;
    o.producer_id = r->ProducerId;
    o.producer_epoch = r->ProducerEpoch;
    o.base_sequence = 0;
    size_t len = 0;
    c->batch = n ? gr_batch_build(recs, n, &o, &len) : NULL;
    for (int i = 0; i < 2 * n; i++) gr_wbuf_free(&bufs[i]);
    free(bufs);
    free(recs);
    if (!n) {
        toc_respond(c, GR_KERR_NONE);
        return;
    }
    c->part.topic = (char *)GR_OFFSETS_TOPIC;
    c->part.partition = c->op;
    c->part.records = c->batch;
    c->part.records_len = len;
    c->part.coordinator = true;
    c->b = b;
    struct gr_rm_partition *p =
        gr_pstate_verification_enabled() ? gr_rm_get_partition(b->replica_manager, GR_OFFSETS_TOPIC, c->op) : NULL;
    if (p) { /* else not hosted here: the append answers NOT_COORDINATOR */
        c->token = gr_plog_txn_start_verification(p->lml->log, r->ProducerId, r->ProducerEpoch);
        gr_rm_partition_unref(p);
    }
    if (c->token) {
        const char *topic = GR_OFFSETS_TOPIC;
        gr_aptm_verify(b->add_partitions_to_txn_manager, b, r->TransactionalId, r->ProducerId, r->ProducerEpoch,
                       &topic, &c->op, 1, toc_verified, c);
        return;
    }
    gr_rm_produce(b->replica_manager, -1, 5000, &c->part, 1, toc_written, c);
}

/* ---- WriteTxnMarkers ---- */

struct wtm_ctx {
    struct gr_api_req *req;
    struct gr_broker *b;
    const struct WriteTxnMarkersRequest *r;
    int n;
    struct gr_rm_produce_part *parts;
    uint8_t **bufs;
};

static void wtm_done(void *ctx, struct gr_rm_produce_part *parts, int n) {
    struct wtm_ctx *c = ctx;
    struct gr_api_req *req = c->req;
    const struct WriteTxnMarkersRequest *r = c->r;
    struct WriteTxnMarkersResponse *resp = gr_api_new_response(req);
    resp->MarkersCount = GR_MAX(r->MarkersCount, 0);
    resp->Markers = gr_api_alloc(req, (size_t)(resp->MarkersCount + 1) * sizeof *resp->Markers);
    int k = 0;
    for (int m = 0; m < resp->MarkersCount; m++) {
        const struct WriteTxnMarkersRequest_WritableTxnMarker *mk = &r->Markers[m];
        struct WriteTxnMarkersResponse_WritableTxnMarkerResult *mr = &resp->Markers[m];
        mr->ProducerId = mk->ProducerId;
        mr->TopicsCount = GR_MAX(mk->TopicsCount, 0);
        mr->Topics = gr_api_alloc(req, (size_t)(mr->TopicsCount + 1) * sizeof *mr->Topics);
        for (int t = 0; t < mr->TopicsCount; t++) {
            mr->Topics[t].Name = mk->Topics[t].Name;
            mr->Topics[t].PartitionsCount = GR_MAX(mk->Topics[t].PartitionIndexesCount, 0);
            mr->Topics[t].Partitions =
                gr_api_alloc(req, (size_t)(mr->Topics[t].PartitionsCount + 1) * sizeof *mr->Topics[t].Partitions);
            for (int i = 0; i < mr->Topics[t].PartitionsCount; i++, k++) {
                mr->Topics[t].Partitions[i].PartitionIndex = parts[k].partition;
                mr->Topics[t].Partitions[i].ErrorCode = parts[k].error;
                if (parts[k].error == GR_KERR_NONE && strcmp(parts[k].topic, GR_OFFSETS_TOPIC) == 0)
                    complete_txn_offsets(c->b, mk->ProducerId, parts[k].partition, mk->TransactionResult);
            }
        }
    }
    for (int i = 0; i < n; i++) free(c->bufs[i]);
    gr_api_respond(req, resp);
}

static uint8_t *marker_batch(int64_t pid, int16_t epoch, bool commit, int32_t coord_epoch, size_t *len) {
    uint8_t key[4], val[6];
    key[0] = 0; key[1] = 0; key[2] = 0; key[3] = commit ? GR_CONTROL_COMMIT : GR_CONTROL_ABORT;
    val[0] = 0; val[1] = 0;
    val[2] = (uint8_t)((uint32_t)coord_epoch >> 24); val[3] = (uint8_t)((uint32_t)coord_epoch >> 16);
    val[4] = (uint8_t)((uint32_t)coord_epoch >> 8); val[5] = (uint8_t)coord_epoch;
    struct gr_batch_rec rec = {key, 4, val, 6, NULL, 0, gr_wall_ms()};
    struct gr_batch_build_opts o = GR_BATCH_BUILD_OPTS_INIT;
    o.attributes = GR_BATCH_ATTR_TRANSACTIONAL | GR_BATCH_ATTR_CONTROL;
    o.producer_id = pid;
    o.producer_epoch = epoch;
    o.base_sequence = -1;
    return gr_batch_build(&rec, 1, &o, len);
}

void gr_handle_write_txn_markers(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                 void *body) {
    (void)hdr;
    const struct WriteTxnMarkersRequest *r = body;
    struct wtm_ctx *c = gr_api_alloc(req, sizeof *c);
    c->req = req;
    c->b = b;
    c->r = r;
    int n = 0;
    for (int m = 0; m < r->MarkersCount; m++)
        for (int t = 0; t < r->Markers[m].TopicsCount; t++) n += GR_MAX(r->Markers[m].Topics[t].PartitionIndexesCount, 0);
    c->n = n;
    c->parts = gr_api_alloc(req, (size_t)(n + 1) * sizeof *c->parts);
    c->bufs = gr_api_alloc(req, (size_t)(n + 1) * sizeof *c->bufs);
    int k = 0;
    for (int m = 0; m < r->MarkersCount; m++) {
        const struct WriteTxnMarkersRequest_WritableTxnMarker *mk = &r->Markers[m];
        for (int t = 0; t < mk->TopicsCount; t++)
            for (int i = 0; i < mk->Topics[t].PartitionIndexesCount; i++, k++) {
                struct gr_rm_produce_part *pp = &c->parts[k];
                pp->topic = mk->Topics[t].Name ? mk->Topics[t].Name : (char *)"";
                pp->partition = mk->Topics[t].PartitionIndexes[i];
                c->bufs[k] = marker_batch(mk->ProducerId, mk->ProducerEpoch, mk->TransactionResult,
                                          mk->CoordinatorEpoch, &pp->records_len);
                pp->records = c->bufs[k];
                pp->coordinator = true;
                pp->error = GR_KERR_NONE;
            }
    }
    if (!gr_api_authorized_cluster(req, GR_ACL_OP_CLUSTER_ACTION)) { /* Kafka 2.7: every partition 31 */
        for (int i = 0; i < n; i++) c->parts[i].error = GR_KERR_CLUSTER_AUTHORIZATION_FAILED;
        wtm_done(c, c->parts, n);
        return;
    }
    /* request.timeout.ms, as Kafka; the coordinator's client waits longer (txn_marker_channel_manager.c) */
    gr_rm_produce(b->replica_manager, -1, b->cfg && b->cfg->request_timeout_ms > 0 ? b->cfg->request_timeout_ms : 30000,
                  c->parts, n, wtm_done, c);
}
