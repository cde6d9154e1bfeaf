/* Produce (api key 0), versions 0-11 (v9 flexible; v10 KIP-951: a partition answered
 * NOT_LEADER_OR_FOLLOWER names its current leader, and NodeEndpoints that leader's endpoint, see
 * set_current_leader; v11 KIP-890 part 2: TRANSACTION_ABORTABLE, see produce_verification_error).
 * Records are RecordBatch v2 (magic 2); v0-v2 requests may
 * carry the old MessageSets (magic 0/1), converted to one v2 batch before the append
 * (storage/legacy_records.h); v3+ with magic 0/1 get INVALID_RECORD as Kafka; a bad CRC
 * CORRUPT_MESSAGE, a batch above max.message.bytes MESSAGE_TOO_LARGE. The log stores the batches
 * in the topic's compression.type (storage/recompression.h, in the leader append of storage/log.c).
 * acks 0/1 answer after
 * the local append; acks -1 waits in the produce purgatory (replica_manager.c). acks 0 never
 * answers; if any partition failed the connection is closed, as Kafka does, so the producer
 * notices. Idempotent batches (producerId >= 0) are checked against the partition's producer
 * state (storage/log.h): a retry of a cached batch is answered NONE with its original base offset
 * (and, as Kafka 2.7, its maxTimestamp as LogAppendTimeMs) without being appended -- with acks -1
 * it still waits until the high watermark passes it; OUT_OF_ORDER_SEQUENCE_NUMBER,
 * INVALID_PRODUCER_EPOCH or INVALID_TXN_STATE otherwise.
 * KIP-890 part 1 (Kafka 3.6; transaction.partition.verification.enable): a transactional batch
 * of a producer with no open transaction on the partition is appended only after the
 * transaction coordinator confirmed that the partition is part of the producer's ongoing
 * transaction (broker/add_partitions_to_txn_manager.h: in place when this broker coordinates,
 * else asynchronously over that coordinator's kept connection; the I/O thread returns at once
 * and the request's connection stays muted until the append); otherwise TRANSACTION_ABORTABLE (v11+) or
 * INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH for a fenced producer, and NOT_ENOUGH_REPLICAS
 * (retriable) for what a retry may pass, as 3.9 answers. A guard in the partition's producer state is set before the
 * coordinator is asked and a marker clears it, so an answer that raced with EndTxn is void. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/authorize.h"
#include "api/current_leader.h"
#include "api/handlers.h"
#include "broker/add_partitions_to_txn_manager.h"
#include "broker/broker_topic_stats.h"
#include "broker/broker.h"
#include "broker/quota_manager.h"
#include "net/server.h"
#include "storage/legacy_records.h"
#include "storage/log_validator.h"
#include "replication/replica_internal.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "broker/metadata_cache.h"
#include "common/config.h"
#include "storage/batch.h"
#include "storage/log.h"
#include "storage/producer_state.h"
#include "storage/recompression.h"

#define LOGGER "kafka.server.KafkaApis"

struct produce_ctx {
    struct gr_api_req *req;
    const struct ProduceRequest *r;
    int16_t acks;
    int n;
    struct gr_rm_produce_part *parts;
    struct gr_broker *b;
    struct produce_verification *verification; /* KIP-890: the parts waiting for their coordinator */
    int16_t version;
};

/* BrokerTopicMetrics, per partition as Kafka's appendToLocalLog marks them: a partition whose
 * local append succeeded counts its bytes and messages even when replication later failed
 * (NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT come from the delayed produce); of the
 * refused ones, FailedProduceRequestsPerSec leaves out the errors Kafka answers without marking
 * it (unknown partition, not leader, too large, corrupt, storage error, bad timestamp). */
static void produce_metrics(struct gr_bts *reg, const struct gr_rm_produce_part *parts, int n) {
    for (int i = 0; i < n && reg; i++) {
        const struct gr_rm_produce_part *pp = &parts[i];
        gr_bts_mark(reg, pp->topic, GR_BTS_TOTAL_PRODUCE, 1);
        switch (pp->error) {
        case GR_KERR_NONE:
        case GR_KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
        case GR_KERR_REQUEST_TIMED_OUT: break;
        case GR_KERR_UNKNOWN_TOPIC_OR_PARTITION:
        case GR_KERR_NOT_LEADER_OR_FOLLOWER:
        case GR_KERR_MESSAGE_TOO_LARGE:
        case GR_KERR_RECORD_LIST_TOO_LARGE:
        case GR_KERR_CORRUPT_MESSAGE:
        case GR_KERR_KAFKA_STORAGE_ERROR:
        case GR_KERR_INVALID_TIMESTAMP: continue;
        default: gr_bts_mark(reg, pp->topic, GR_BTS_FAILED_PRODUCE, 1); continue;
        }
        gr_bts_mark(reg, pp->topic, GR_BTS_BYTES_IN, (int64_t)pp->records_len);
        gr_bts_mark(reg, pp->topic, GR_BTS_MESSAGES_IN, gr_bts_record_count(pp->records, pp->records_len));
    }
}

static void produce_done(void *ctx, struct gr_rm_produce_part *parts, int n);
static bool start_verification(struct produce_ctx *c);

/* Every part is appended and the produce waits for replication: the connection's next Produce
 * may be read and appended meanwhile (gr_net_request_release; responses stay in order). */
static void produce_appended(void *ctx) {
    struct produce_ctx *c = ctx;
    if (c->req->net) gr_net_request_release(c->req->net);
}

/* ---- KIP-890 verification ---- */

/* The producer of a transactional data batch at the head of records (false if none). */
static bool txn_batch(const struct gr_rm_produce_part *pp, int64_t *pid, int16_t *epoch) {
    struct gr_batch_info bi;
    if (pp->error != GR_KERR_NONE || gr_batch_parse_header(pp->records, pp->records_len, &bi) != GR_BATCH_OK) return false;
    if (!(bi.Attributes & GR_BATCH_ATTR_TRANSACTIONAL) || (bi.Attributes & GR_BATCH_ATTR_CONTROL) || bi.ProducerId < 0)
        return false;
    *pid = bi.ProducerId;
    *epoch = bi.ProducerEpoch;
    return true;
}

/* Kafka 3.9's mapping of a coordinator's verification answer to a Produce error
 * (AddPartitionsToTxnManager, ReplicaManager): a fenced producer gets INVALID_PRODUCER_EPOCH (as
 * 2.7's epoch check); a partition outside the transaction -- 3.9's coordinator answers
 * TRANSACTION_ABORTABLE, Gregor's (coordinator/txn_coordinator.c) the 3.6 INVALID_TXN_STATE, both
 * taken as that -- TRANSACTION_ABORTABLE to Produce v11+ (KIP-890 part 2's new error, which such
 * a producer handles by aborting) and INVALID_TXN_STATE to older ones; an unknown producer id
 * INVALID_TXN_STATE; anything that may pass on a retry (CONCURRENT_TRANSACTIONS, a coordinator
 * moving or loading, a failed request) the retriable NOT_ENOUGH_REPLICAS. */
static int16_t produce_verification_error(int16_t e, int16_t version) {
    if (e == GR_KERR_PRODUCER_FENCED || e == GR_KERR_INVALID_PRODUCER_EPOCH) return GR_KERR_INVALID_PRODUCER_EPOCH;
    if (e == GR_KERR_INVALID_TXN_STATE || e == GR_KERR_TRANSACTION_ABORTABLE)
        return version >= 11 ? GR_KERR_TRANSACTION_ABORTABLE : GR_KERR_INVALID_TXN_STATE;
    if (e == GR_KERR_INVALID_PRODUCER_ID_MAPPING) return GR_KERR_INVALID_TXN_STATE;
    return GR_KERR_NOT_ENOUGH_REPLICAS;
}

/* The verification of one Produce: the parts that need it, their guards' tokens. */
struct produce_verification {
    int n;          /* parts asked about */
    int *idx;       /* their indexes in c->parts */
    uint64_t *token;
    int64_t pid;
};

static void append_parts(struct produce_ctx *c) {
    gr_rm_produce_ordered(c->b->replica_manager, c->r->Acks, c->r->TimeoutMs, c->parts, c->n, produce_done,
                          produce_appended, c);
}

/* The coordinator answered (any thread): confirm or drop each guard, then append. */
static void produce_verified(void *ctx, const int16_t *errors, int n) {
    struct produce_ctx *c = ctx;
    struct produce_verification *v = c->verification;
    for (int i = 0; i < n; i++) {
        struct gr_rm_produce_part *pp = &c->parts[v->idx[i]];
        struct gr_rm_partition *p = gr_rm_get_partition(c->b->replica_manager, pp->topic, pp->partition);
        if (p) {
            gr_plog_txn_end_verification(p->lml->log, v->pid, v->token[i], errors[i] == GR_KERR_NONE);
            gr_rm_partition_unref(p);
        }
        if (errors[i] != GR_KERR_NONE) {
            gr_info(LOGGER, "rejecting transactional produce of producer %lld to %s-%d: %s (KIP-890 verification)",
                    (long long)v->pid, pp->topic, pp->partition, gr_kerr_name(errors[i]));
            pp->error = produce_verification_error(errors[i], c->version);
        }
    }
    append_parts(c);
}

/* Starts the verification of the request's transactional parts that open a transaction here
 * (Kafka 3.6 maybeStartTransactionVerificationForPartitions): the guard is set before the
 * coordinator is asked, so a marker written meanwhile voids the answer. True if the request now
 * waits for the answer (produce_verified appends it); false: append it now. */
static bool start_verification(struct produce_ctx *c) {
    struct gr_broker *b = c->b;
    struct gr_replica_manager *rm = b->replica_manager;
    struct produce_verification *v = NULL;
    const char **topics = NULL;
    int32_t *partitions = NULL;
    int16_t epoch0 = 0;
    for (int i = 0; i < c->n; i++) {
        struct gr_rm_produce_part *pp = &c->parts[i];
        int64_t pid;
        int16_t epoch;
        if (!txn_batch(pp, &pid, &epoch)) continue;
        struct gr_rm_partition *p = gr_rm_get_partition(rm, pp->topic, pp->partition);
        if (!p) continue; /* the append reports the error */
        if (!c->r->TransactionalId || (v && (pid != v->pid || epoch != epoch0))) {
            /* no transactional id, or batches of several producers in one request: nothing to verify against */
            if (gr_plog_txn_needs_verification(p->lml->log, pid, epoch)) pp->error = GR_KERR_INVALID_TXN_STATE;
            gr_rm_partition_unref(p);
            continue;
        }
        uint64_t token = gr_plog_txn_start_verification(p->lml->log, pid, epoch);
        gr_rm_partition_unref(p);
        if (!token) continue; /* its transaction is open here */
        if (!v) {
            v = gr_api_alloc(c->req, sizeof *v);
            v->idx = gr_api_alloc(c->req, (size_t)c->n * sizeof *v->idx);
            v->token = gr_api_alloc(c->req, (size_t)c->n * sizeof *v->token);
            topics = gr_api_alloc(c->req, (size_t)c->n * sizeof *topics);
            partitions = gr_api_alloc(c->req, (size_t)c->n * sizeof *partitions);
            v->n = 0;
            v->pid = pid;
            epoch0 = epoch;
        }
        v->idx[v->n] = i;
        v->token[v->n] = token;
        topics[v->n] = pp->topic;
        partitions[v->n] = pp->partition;
        v->n++;
    }
    if (!v) return false;
    c->verification = v;
    gr_aptm_verify(b->add_partitions_to_txn_manager, b, c->r->TransactionalId, v->pid, epoch0, topics, partitions,
                   v->n, produce_verified, c);
    return true;
}

/* Produce v8+ RecordErrors and ErrorMessage from the log validator's result (copied into the
 * request's arena; at most GR_VALIDATOR_MAX_RECORD_ERRORS records are listed). */
static void set_record_errors(struct gr_api_req *req, struct ProduceResponse_PartitionProduceResponse *pr,
                              const struct gr_validator_result *v) {
    pr->ErrorMessage = (char *)v->message;
    if (v->kept <= 0) return;
    pr->RecordErrors = gr_api_alloc(req, (size_t)v->kept * sizeof *pr->RecordErrors);
    if (!pr->RecordErrors) return;
    for (int i = 0; i < v->kept; i++) {
        pr->RecordErrors[i].BatchIndex = v->record_errors[i].BatchIndex;
        pr->RecordErrors[i].BatchIndexErrorMessage = (char *)v->record_errors[i].BatchIndexErrorMessage;
    }
    pr->RecordErrorsCount = v->kept;
}

/* KIP-951 (Produce v10+, api/current_leader.h): a partition answered NOT_LEADER_OR_FOLLOWER
 * carries the leader this broker knows, and the response's NodeEndpoints lists that leader's
 * endpoint once. */
static void set_current_leader(struct gr_api_req *req, struct ProduceResponse *resp,
                               struct ProduceResponse_PartitionProduceResponse *pr, const char *topic) {
    int32_t leader, epoch;
    gr_api_current_leader(req, topic, pr->Index, &leader, &epoch);
    pr->CurrentLeader.LeaderId = leader;
    pr->CurrentLeader.LeaderEpoch = epoch;
    if (leader < 0) return;
    for (int i = 0; i < resp->NodeEndpointsCount; i++)
        if (resp->NodeEndpoints[i].NodeId == leader) return;
    struct gr_api_leader_endpoint e;
    if (!gr_api_leader_endpoint(req, leader, &e)) return;
    struct ProduceResponse_NodeEndpoint *ne = &resp->NodeEndpoints[resp->NodeEndpointsCount++];
    ne->NodeId = leader;
    ne->Host = e.host;
    ne->Port = e.port;
    ne->Rack = e.rack;
}

static void produce_done(void *ctx, struct gr_rm_produce_part *parts, int n) {
    struct produce_ctx *c = ctx;
    struct gr_api_req *req = c->req;
    produce_metrics(req->broker ? req->broker->topic_stats : NULL, parts, n);
    /* producer_byte_rate: the request's size, recorded when it completes (KafkaApis) */
    int32_t throttle_ms = gr_quota_throttle(req->broker, req, GR_QUOTA_PRODUCE, (double)req->net->len);
    if (c->acks == 0) {
        for (int i = 0; i < n; i++) { /* no response: nothing reports record errors */
            free(parts[i].validation);
            parts[i].validation = NULL;
        }
        for (int i = 0; i < n; i++) {
            if (parts[i].error != GR_KERR_NONE) {
                char reason[160];
                snprintf(reason, sizeof reason, "acks=0 produce to %s-%d failed with %s", parts[i].topic,
                         parts[i].partition, gr_kerr_name(parts[i].error));
                gr_api_close(req, reason);
                return;
            }
        }
        gr_api_respond_none(req);
        return;
    }
    const struct ProduceRequest *r = c->r;
    struct ProduceResponse *resp = gr_api_new_response(req);
    resp->ThrottleTimeMs = throttle_ms;
    resp->ResponsesCount = r->TopicDataCount > 0 ? r->TopicDataCount : 0;
    resp->Responses = gr_api_alloc(req, (size_t)(resp->ResponsesCount + 1) * sizeof *resp->Responses);
    resp->NodeEndpointsCount = 0;
    resp->NodeEndpoints = gr_api_alloc(req, (size_t)(n + 1) * sizeof *resp->NodeEndpoints);
    int k = 0;
    for (int t = 0; t < resp->ResponsesCount; t++) {
        const struct ProduceRequest_TopicProduceData *td = &r->TopicData[t];
        struct ProduceResponse_TopicProduceResponse *tr = &resp->Responses[t];
        tr->Name = td->Name;
        tr->PartitionResponsesCount = td->PartitionDataCount > 0 ? td->PartitionDataCount : 0;
        tr->PartitionResponses = gr_api_alloc(req, (size_t)(tr->PartitionResponsesCount + 1) * sizeof *tr->PartitionResponses);
        for (int i = 0; i < tr->PartitionResponsesCount; i++, k++) {
            struct ProduceResponse_PartitionProduceResponse *pr = &tr->PartitionResponses[i];
            struct gr_rm_produce_part *pp = &parts[k];
            pr->Index = pp->partition;
            pr->ErrorCode = pp->error;
            pr->BaseOffset = pp->error == GR_KERR_NONE ? pp->base_offset : -1;
            pr->LogAppendTimeMs = pp->error == GR_KERR_NONE ? pp->log_append_time : -1;
            pr->LogStartOffset = pp->error == GR_KERR_NONE ? pp->log_start_offset : -1;
            pr->RecordErrorsCount = 0;
            pr->RecordErrors = NULL;
            pr->ErrorMessage = NULL;
            pr->CurrentLeader.LeaderId = pr->CurrentLeader.LeaderEpoch = -1;
            if (pp->error == GR_KERR_NOT_LEADER_OR_FOLLOWER && c->version >= 10) set_current_leader(req, resp, pr, pp->topic);
            if (pp->validation) { /* Kafka's RecordValidationException: which records, and why */
                set_record_errors(req, pr, pp->validation);
                free(pp->validation);
                pp->validation = NULL;
            }
        }
    }
    (void)n;
    gr_api_respond(req, resp);
}

/* The total a Produce v0-v2 request may inflate its gzip message sets to (Gregor-only; Kafka has
 * no such bound): entries past it get MESSAGE_TOO_LARGE. Each entry is at most 64 MiB. */
#define LEGACY_MAX_REQUEST_INFLATED ((size_t)256 << 20)

/* Is the entry a magic 0/1 message set? */
static bool is_legacy(const struct gr_rm_produce_part *pp) {
    int magic = gr_records_magic(pp->records, pp->records_len);
    return magic == 0 || magic == 1;
}

/* Would the append of this partition fail before its records are read: not hosted here, or not
 * its leader? NONE or the error the append would give. */
static int16_t leader_error(struct gr_replica_manager *rm, const struct gr_rm_produce_part *pp) {
    struct gr_rm_partition *p = gr_rm_get_partition(rm, pp->topic, pp->partition);
    if (!p) return gr_rm_not_hosted_error(rm, pp->topic, pp->partition);
    pthread_mutex_lock(&p->lock);
    int16_t err = gr_rm_check_epoch_locked(p, -1, true);
    pthread_mutex_unlock(&p->lock);
    gr_rm_partition_unref(p);
    return err;
}

/* Kafka's LogValidator up-conversion of one magic 0/1 message set (Produce v0-v2) into one v2
 * batch, stored in the source codec as Kafka does (a gzip wrapper's messages become a gzip batch,
 * so max.message.bytes counts about what the client sent), copied into the request's arena
 * (pp->records then points at it). The inflated forms are freed before returning, so a request
 * holds one entry's conversion at a time. *inflated adds the uncompressed batch's size. */
static int16_t convert_legacy(struct gr_api_req *req, struct gr_rm_produce_part *pp, size_t *inflated) {
    uint8_t *out;
    size_t len;
    int codec = 0;
    int64_t t0 = gr_mono_us();
    int16_t e = gr_legacy_to_v2(pp->records, pp->records_len, &out, &len, &codec);
    req->conversion_us += gr_mono_us() - t0;
    if (e != GR_KERR_NONE) return e;
    *inflated += len;
    req->temporary_memory_bytes += (int64_t)len; /* Kafka's RecordConversionStats.temporaryMemoryBytes */
    /* ProduceMessageConversionsPerSec: the records converted (Kafka's numRecordsConverted) */
    gr_bts_mark(req->broker ? req->broker->topic_stats : NULL, pp->topic, GR_BTS_PRODUCE_CONVERSIONS,
                gr_bts_record_count(out, len));
    if (codec != 0) {
        uint8_t *packed = NULL;
        size_t plen = 0;
        e = gr_recompress_batches(out, len, codec, &packed, &plen);
        if (e == GR_KERR_NONE && packed) {
            free(out);
            out = packed, len = plen;
        }
        if (e != GR_KERR_NONE) {
            free(out);
            return e;
        }
    }
    pp->records = gr_api_alloc(req, len);
    if (pp->records) memcpy(pp->records, out, len);
    pp->records_len = pp->records ? len : 0;
    free(out);
    return pp->records ? GR_KERR_NONE : GR_KERR_UNKNOWN_SERVER_ERROR;
}

/* Converts the legacy entries of a v0-v2 request, after the request's other checks, one
 * partition at a time and only for partitions this broker leads (Kafka converts in the append,
 * after the same checks). An entry repeating the legacy entry just before it (same partition,
 * same bytes) reuses its conversion. Only that one is compared: a search of every earlier entry
 * was quadratic, and a 10 MB request of 200k tiny entries held an I/O thread for minutes. */
static void convert_legacy_parts(struct gr_api_req *req, struct gr_replica_manager *rm,
                                 struct gr_rm_produce_part *parts, int n, const uint8_t **sources, const size_t *lens) {
    size_t inflated = 0;
    int prev = -1; /* the last legacy entry checked */
    for (int k = 0; k < n; k++) {
        struct gr_rm_produce_part *pp = &parts[k];
        if (!sources[k] || pp->error != GR_KERR_NONE) continue;
        int j = prev;
        prev = k;
        if (j >= 0 && parts[j].error == GR_KERR_NONE && parts[j].partition == pp->partition && lens[j] == lens[k] &&
            strcmp(parts[j].topic, pp->topic) == 0 && memcmp(sources[j], sources[k], lens[k]) == 0) {
            pp->records = parts[j].records;
            pp->records_len = parts[j].records_len;
            continue;
        }
        if ((pp->error = leader_error(rm, pp)) != GR_KERR_NONE) continue;
        if (inflated >= LEGACY_MAX_REQUEST_INFLATED) {
            pp->error = GR_KERR_MESSAGE_TOO_LARGE;
            continue;
        }
        pp->error = convert_legacy(req, pp, &inflated);
    }
}

/* Kafka's request-level checks: transactional records need a transactional id and its
 * TransactionalId WRITE, idempotent ones (a batch with a producer id) Cluster IDEMPOTENT_WRITE. NONE or the error every partition
 * gets. */
static int16_t produce_auth_error(struct gr_api_req *req, const struct ProduceRequest *r) {
    bool idempotent = false, transactional = false;
    for (int t = 0; t < r->TopicDataCount; t++)
        for (int i = 0; i < r->TopicData[t].PartitionDataCount; i++) {
            const uint8_t *p = r->TopicData[t].PartitionData[i].Records.p;
            int64_t len = r->TopicData[t].PartitionData[i].Records.len;
            /* RecordBatch v2: batchLength @8, magic @16, attributes @21, producerId @43 */
            for (int64_t off = 0; p && off + 61 <= len;) {
                int32_t blen = (int32_t)((uint32_t)p[off + 8] << 24 | (uint32_t)p[off + 9] << 16 |
                                         (uint32_t)p[off + 10] << 8 | p[off + 11]);
                if (p[off + 16] != 2 || blen < 49) break;
                int64_t pid = 0;
                for (int k = 0; k < 8; k++) pid = (int64_t)((uint64_t)pid << 8 | p[off + 43 + k]);
                if (pid >= 0) idempotent = true;
                if (p[off + 22] & 0x10) transactional = true;
                off += 12 + (int64_t)blen;
            }
        }
    /* a null transactional id fails too, with or without an authorizer (KafkaApis) */
    if (transactional &&
        (!r->TransactionalId || !gr_api_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TRANSACTIONAL_ID, r->TransactionalId)))
        return GR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    if (!transactional && idempotent && !gr_api_authorized_cluster(req, GR_ACL_OP_IDEMPOTENT_WRITE))
        return GR_KERR_CLUSTER_AUTHORIZATION_FAILED;
    return GR_KERR_NONE;
}

void gr_handle_produce(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr, void *body) {
    const struct ProduceRequest *r = body;
    struct gr_replica_manager *rm = b->replica_manager;
    struct produce_ctx *c = gr_api_alloc(req, sizeof *c);
    c->req = req;
    c->r = r;
    c->acks = r->Acks;
    c->version = hdr->RequestApiVersion;
    int n = 0;
    for (int t = 0; t < r->TopicDataCount; t++) n += r->TopicData[t].PartitionDataCount > 0 ? r->TopicData[t].PartitionDataCount : 0;
    c->n = n;
    c->parts = gr_api_alloc(req, (size_t)(n + 1) * sizeof *c->parts);
    bool acks_ok = r->Acks == 0 || r->Acks == 1 || r->Acks == -1;
    int16_t auth_err = produce_auth_error(req, r);
    /* the legacy message sets to convert once every entry is checked (NULL: none) */
    const uint8_t **sources = gr_api_alloc(req, (size_t)(n + 1) * sizeof *sources);
    size_t *lens = gr_api_alloc(req, (size_t)(n + 1) * sizeof *lens);
    int nlegacy = 0;
    int k = 0;
    for (int t = 0; t < r->TopicDataCount; t++) {
        const struct ProduceRequest_TopicProduceData *td = &r->TopicData[t];
        bool can_write = auth_err == GR_KERR_NONE && gr_api_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TOPIC, td->Name);
        for (int i = 0; i < td->PartitionDataCount; i++, k++) {
            const struct ProduceRequest_PartitionProduceData *pd = &td->PartitionData[i];
            struct gr_rm_produce_part *pp = &c->parts[k];
            pp->topic = td->Name ? td->Name : (char *)"";
            pp->partition = pd->Index;
            pp->records = (uint8_t *)pd->Records.p; /* points into the request frame, which we own */
            pp->records_len = pd->Records.len > 0 ? (size_t)pd->Records.len : 0;
            pp->base_offset = -1;
            pp->log_start_offset = -1;
            pp->log_append_time = -1;
            pp->want_record_errors = hdr->RequestApiVersion >= 8 && r->Acks != 0; /* acks=0: no response */
            pp->validation = NULL;
            if (!acks_ok)
                pp->error = GR_KERR_INVALID_REQUIRED_ACKS;
            else if (auth_err != GR_KERR_NONE)
                pp->error = auth_err;
            else if (!can_write)
                pp->error = GR_KERR_TOPIC_AUTHORIZATION_FAILED;
            else if (!rm)
                pp->error = GR_KERR_NOT_LEADER_OR_FOLLOWER;
            else if (strcmp(pp->topic, "__consumer_offsets") == 0 || strcmp(pp->topic, "__transaction_state") == 0)
                pp->error = GR_KERR_INVALID_TOPIC_EXCEPTION; /* internal topics: brokers only */
            else if (pd->Records.len <= 0)
                pp->error = GR_KERR_CORRUPT_MESSAGE;
            else if (is_legacy(pp) && hdr->RequestApiVersion >= 3)
                pp->error = GR_KERR_INVALID_RECORD; /* as Kafka: v3+ carries RecordBatch v2 only */
            else if (is_legacy(pp))
                sources[k] = pp->records, lens[k] = pp->records_len, nlegacy++;
        }
    }
    if (nlegacy > 0 && rm && acks_ok) convert_legacy_parts(req, rm, c->parts, n, sources, lens);
    if (!rm || !acks_ok) {
        produce_done(c, c->parts, n);
        return;
    }
    c->b = b;
    if (gr_pstate_verification_enabled() && start_verification(c)) return;
    gr_rm_produce_ordered(rm, r->Acks, r->TimeoutMs, c->parts, n, produce_done, produce_appended, c);
}
