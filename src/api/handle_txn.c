/* Transaction APIs (Kafka 2.7 KafkaApis.handle{InitProducerId (transactional), AddPartitionsToTxn,
 * AddOffsetsToTxn, EndTxn, WriteTxnMarkers, TxnOffsetCommit}) over coordinator/txn_coordinator.h.
 *
 * WriteTxnMarkers appends one control batch (Kafka's marker layout: transactional + control,
 * baseSequence -1, key = version 0 + type 0 ABORT / 1 COMMIT, value = version 0 + coordinator
 * epoch) per partition with acks=-1 and the coordinator-origin checks. A COMMIT marker on a
 * __consumer_offsets partition makes the producer's pending transactional offsets of the groups
 * on that partition visible (written as ordinary offset commits at that moment); an ABORT drops
 * them. Pending offsets live in memory on the group's coordinator (Gregor simplification: Kafka
 * writes them to the log as transactional records before the marker; a coordinator failover
 * between TxnOffsetCommit and the marker loses them here, and the transaction's offsets are
 * then not committed -- the consumer re-processes, the output stays exactly-once only if the
 * application aborts; see docs/TRANSACTIONS.md).
 *
 * AddPartitionsToTxn requests whose header ClientId is GR_TXN_VERIFY_CLIENT_ID are KIP-890
 * verification requests between brokers (Kafka 3.6 uses AddPartitionsToTxn v4 VerifyOnly, which
 * the 2.7 protocol lacks): nothing is added; the answer says per partition whether it is part
 * of the producer's ongoing transaction (NONE) or not (INVALID_TXN_STATE). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api/handlers.h"
#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "coordinator/group_coordinator.h"
#include "coordinator/group_offsets.h"
#include "coordinator/txn_coordinator.h"
#include "coordinator/txn_log.h"
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
    resp->ResultsCount = GR_MAX(r->TopicsCount, 0);
    resp->Results = gr_api_alloc(req, (size_t)(resp->ResultsCount + 1) * sizeof *resp->Results);
    int k = 0;
    for (int t = 0; t < resp->ResultsCount; t++) {
        struct AddPartitionsToTxnResponse_AddPartitionsToTxnTopicResult *tr = &resp->Results[t];
        tr->Name = r->Topics[t].Name;
        tr->ResultsCount = GR_MAX(r->Topics[t].PartitionsCount, 0);
        tr->Results = gr_api_alloc(req, (size_t)(tr->ResultsCount + 1) * sizeof *tr->Results);
        for (int i = 0; i < tr->ResultsCount; i++, k++) {
            tr->Results[i].PartitionIndex = r->Topics[t].Partitions[i];
            tr->Results[i].ErrorCode = c->pre && c->pre[k] >= 0 ? c->pre[k] : error;
        }
    }
    gr_api_respond(req, resp);
}

void gr_handle_add_partitions_to_txn(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                     void *body) {
    const struct AddPartitionsToTxnRequest *r = body;
    struct add_ctx *c = gr_api_alloc(req, sizeof *c);
    c->req = req;
    c->r = r;
    int n = 0;
    for (int t = 0; t < r->TopicsCount; t++) n += GR_MAX(r->Topics[t].PartitionsCount, 0);
    const char **topics = gr_api_alloc(req, (size_t)(n + 1) * sizeof *topics);
    int32_t *parts = gr_api_alloc(req, (size_t)(n + 1) * sizeof *parts);
    c->pre = gr_api_alloc(req, (size_t)(n + 1) * sizeof *c->pre);
    int k = 0;
    bool bad = false;
    for (int t = 0; t < r->TopicsCount; t++)
        for (int i = 0; i < r->Topics[t].PartitionsCount; i++, k++) {
            topics[k] = r->Topics[t].Name ? r->Topics[t].Name : "";
            parts[k] = r->Topics[t].Partitions[i];
            struct gr_mdc_partition mp;
            c->pre[k] = -1;
            if (!gr_mdc_get_partition(b->metadata, topics[k], parts[k], &mp)) {
                c->pre[k] = GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
                bad = true;
            } else {
                gr_mdc_partition_release(&mp);
            }
        }
    struct gr_txn_coordinator *tc = b->txn_coordinator;
    if (!r->TransactionalId || !tc) {
        add_done(c, tc ? GR_KERR_INVALID_REQUEST : GR_KERR_NOT_COORDINATOR, -1, -1);
        return;
    }
    if (hdr->ClientId && strcmp(hdr->ClientId, GR_TXN_VERIFY_CLIENT_ID) == 0) { /* KIP-890 verify */
        for (int i = 0; i < n; i++)
            c->pre[i] = gr_txn_verify_id(tc, r->TransactionalId, r->ProducerId, r->ProducerEpoch, topics[i], parts[i]);
        add_done(c, GR_KERR_NONE, -1, -1);
        return;
    }
    if (bad) { /* Kafka: the unknown ones fail, the others OPERATION_NOT_ATTEMPTED */
        for (int i = 0; i < n; i++)
            if (c->pre[i] < 0) c->pre[i] = GR_KERR_OPERATION_NOT_ATTEMPTED;
        add_done(c, GR_KERR_NONE, -1, -1);
        return;
    }
    c->pre = NULL;
    gr_txn_add_partitions(tc, r->TransactionalId, r->ProducerId, r->ProducerEpoch, topics, parts, n, add_done, c);
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
    gr_txn_end(b->txn_coordinator, r->TransactionalId, r->ProducerId, r->ProducerEpoch, r->Committed, simple_done, req);
}

/* ---- pending transactional offsets (TxnOffsetCommit) ---- */

struct pending_off {
    struct pending_off *next;
    int64_t pid;
    char *group, *topic, *metadata;
    int32_t partition, leader_epoch, offsets_part;
    int64_t offset;
};
static pthread_mutex_t pend_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pending_off *pend_head;

static void commit_cb(void *ctx, struct gr_gc_commit_part *parts, int n) {
    (void)ctx;
    for (int i = 0; i < n; i++) {
        if (parts[i].error != GR_KERR_NONE)
            gr_warn(LOGGER, "transactional offset of %s-%d not stored: %s", parts[i].topic, parts[i].partition,
                    gr_kerr_name(parts[i].error));
        free((char *)parts[i].topic);
        free((char *)parts[i].metadata);
    }
    free(parts);
}

/* Marker for (pid) on __consumer_offsets-p: apply (commit) or drop (abort) its pending offsets. */
static void complete_txn_offsets(struct gr_broker *b, int64_t pid, int32_t p, bool commit) {
    pthread_mutex_lock(&pend_mu);
    struct pending_off *mine = NULL;
    for (struct pending_off **pp = &pend_head; *pp;) {
        struct pending_off *o = *pp;
        if (o->pid == pid && o->offsets_part == p) {
            *pp = o->next;
            o->next = mine;
            mine = o;
        } else {
            pp = &o->next;
        }
    }
    pthread_mutex_unlock(&pend_mu);
    while (mine) {
        struct pending_off *o = mine;
        mine = o->next;
        if (commit && b->group_coordinator) {
            struct gr_gc_commit_part *cp = gr_calloc(1, sizeof *cp);
            cp->topic = o->topic;
            cp->partition = o->partition;
            cp->offset = o->offset;
            cp->leader_epoch = o->leader_epoch;
            cp->metadata = o->metadata;
            cp->commit_timestamp = gr_wall_ms();
            cp->expire_timestamp = -1;
            o->topic = o->metadata = NULL; /* owned by cp now */
            gr_gc_commit_offsets(b->group_coordinator, o->group, "", NULL, GR_GC_GENERATION_TXN, cp, 1, commit_cb, NULL);
        }
        free(o->group);
        free(o->topic);
        free(o->metadata);
        free(o);
    }
}

void gr_handle_txn_offset_commit(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                 void *body) {
    (void)hdr;
    const struct TxnOffsetCommitRequest *r = body;
    struct TxnOffsetCommitResponse *resp = gr_api_new_response(req);
    int16_t e = GR_KERR_NONE;
    if (!b->group_coordinator || !r->GroupId) e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    else e = gr_gc_coordinator_status(b->group_coordinator, r->GroupId);
    if (e == GR_KERR_COORDINATOR_LOAD_IN_PROGRESS && req->hdr.RequestApiVersion < 2)
        e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    int32_t op = e == GR_KERR_NONE ? gr_gc_partition_for(b->group_coordinator, r->GroupId) : -1;
    resp->TopicsCount = GR_MAX(r->TopicsCount, 0);
    resp->Topics = gr_api_alloc(req, (size_t)(resp->TopicsCount + 1) * sizeof *resp->Topics);
    for (int t = 0; t < resp->TopicsCount; t++) {
        const struct TxnOffsetCommitRequest_TxnOffsetCommitRequestTopic *rt = &r->Topics[t];
        struct TxnOffsetCommitResponse_TxnOffsetCommitResponseTopic *tt = &resp->Topics[t];
        tt->Name = rt->Name;
        tt->PartitionsCount = GR_MAX(rt->PartitionsCount, 0);
        tt->Partitions = gr_api_alloc(req, (size_t)(tt->PartitionsCount + 1) * sizeof *tt->Partitions);
        for (int i = 0; i < tt->PartitionsCount; i++) {
            const struct TxnOffsetCommitRequest_TxnOffsetCommitRequestPartition *rp = &rt->Partitions[i];
            tt->Partitions[i].PartitionIndex = rp->PartitionIndex;
            tt->Partitions[i].ErrorCode = e;
            if (e != GR_KERR_NONE) continue;
            struct pending_off *o = gr_calloc(1, sizeof *o);
            o->pid = r->ProducerId;
            o->group = gr_strdup(r->GroupId);
            o->topic = gr_strdup(rt->Name ? rt->Name : "");
            o->metadata = gr_strdup(rp->CommittedMetadata ? rp->CommittedMetadata : "");
            o->partition = rp->PartitionIndex;
            o->leader_epoch = rp->CommittedLeaderEpoch;
            o->offset = rp->CommittedOffset;
            o->offsets_part = op;
            pthread_mutex_lock(&pend_mu);
            /* a later commit of the same partition in the same transaction replaces the earlier */
            for (struct pending_off **pp = &pend_head; *pp; pp = &(*pp)->next)
                if ((*pp)->pid == o->pid && (*pp)->partition == o->partition && strcmp((*pp)->group, o->group) == 0 &&
                    strcmp((*pp)->topic, o->topic) == 0) {
                    struct pending_off *d = *pp;
                    *pp = d->next;
                    free(d->group); free(d->topic); free(d->metadata); free(d);
                    break;
                }
            o->next = pend_head;
            pend_head = o;
            pthread_mutex_unlock(&pend_mu);
        }
    }
    gr_api_respond(req, resp);
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
    gr_rm_produce(b->replica_manager, -1, 30000, c->parts, n, wtm_done, c);
}
