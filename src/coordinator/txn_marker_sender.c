/* Kafka's TransactionMarkerChannelManager: one thread sends the markers of Prepare*
 * transactions to the partition leaders (WriteTxnMarkers) and writes Complete*. Locking:
 * txn_internal.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin/topic_admin.h"
#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "coordinator/producer_id_manager.h"
#include "coordinator/txn_internal.h"
#include "net/kafka_client.h"
#include "protocol/messages.h"
#include "replication/replica_manager.h"
#include "storage/batch.h"

void txn_enqueue_job_locked(struct gr_txn_coordinator *tc, const struct txn_meta *m, int32_t coord_epoch) {
    struct txn_job *j = gr_calloc(1, sizeof *j);
    j->id = gr_strdup(m->id);
    j->pid = m->pid;
    j->epoch = m->epoch;
    j->commit = m->state == GR_TXN_PREPARE_COMMIT;
    j->log_part = m->log_part;
    j->coord_epoch = coord_epoch;
    j->n = m->n_parts;
    j->parts = txn_parts_dup(m->parts, m->n_parts);
    *tc->jobs_tail = j;
    tc->jobs_tail = &j->next;
    pthread_cond_broadcast(&tc->cond);
}

/* ---- markers (Kafka's TransactionMarkerChannelManager, one blocking sender thread) ---- */

static bool txn_job_still_valid(struct gr_txn_coordinator *tc, const struct txn_job *j) {
    pthread_mutex_lock(&tc->mu);
    int32_t ep = -1;
    bool ok = txn_part_status_locked(tc, j->log_part, &ep) == GR_KERR_NONE && ep == j->coord_epoch;
    pthread_mutex_unlock(&tc->mu);
    return ok;
}

/* Sends the markers of the parts led by `leader` (done[i] set for each written or dropped). */
static void txn_send_to_leader(struct gr_txn_coordinator *tc, struct gr_kafka_client *kc, const struct txn_job *j,
                           int32_t leader, const int32_t *leaders, bool *done) {
    struct gr_broker *b = tc->b;
    char host[256];
    int32_t port;
    const struct gr_listener *l = b->cfg ? gr_config_inter_broker_listener(b->cfg) : NULL;
    if (!gr_mdc_get_endpoint(b->metadata, leader, l ? l->name : "PLAINTEXT", host, sizeof host, &port)) return;
    gr_kafka_client_set_target(kc, leader, host, port);
    struct gr_arena a;
    gr_arena_init(&a);
    struct WriteTxnMarkersRequest *req = gr_proto_new(&a, &gr_desc_WriteTxnMarkersRequest);
    struct WriteTxnMarkersRequest_WritableTxnMarker *mk = gr_arena_alloc(&a, sizeof *mk);
    req->MarkersCount = 1;
    req->Markers = mk;
    mk->ProducerId = j->pid;
    mk->ProducerEpoch = j->epoch;
    mk->TransactionResult = j->commit;
    mk->CoordinatorEpoch = j->coord_epoch;
    mk->Topics = gr_arena_alloc(&a, (size_t)(j->n + 1) * sizeof *mk->Topics);
    mk->TopicsCount = 0;
    for (int i = 0; i < j->n; i++) { /* one topic entry per partition: simple, and valid */
        if (done[i] || leaders[i] != leader) continue;
        struct WriteTxnMarkersRequest_WritableTxnMarkerTopic *t = &mk->Topics[mk->TopicsCount++];
        t->Name = j->parts[i].topic;
        t->PartitionIndexesCount = 1;
        t->PartitionIndexes = gr_arena_alloc(&a, sizeof(int32_t));
        t->PartitionIndexes[0] = j->parts[i].partition;
    }
    void *body = NULL;
    uint8_t *frame = NULL;
    int rc = gr_kafka_client_call(kc, GR_API_WRITE_TXN_MARKERS, 0, req, 10000, &a, &body, &frame);
    if (rc == 0) {
        const struct WriteTxnMarkersResponse *resp = body;
        for (int m = 0; m < resp->MarkersCount; m++)
            for (int t = 0; t < resp->Markers[m].TopicsCount; t++) {
                const struct WriteTxnMarkersResponse_WritableTxnMarkerTopicResult *tr = &resp->Markers[m].Topics[t];
                for (int p = 0; p < tr->PartitionsCount; p++) {
                    int16_t e = tr->Partitions[p].ErrorCode;
                    for (int i = 0; i < j->n; i++) {
                        if (done[i] || strcmp(j->parts[i].topic, tr->Name) != 0 ||
                            j->parts[i].partition != tr->Partitions[p].PartitionIndex)
                            continue;
                        bool gone = e == GR_KERR_UNKNOWN_TOPIC_OR_PARTITION &&
                                    !gr_mdc_contains_topic(b->metadata, j->parts[i].topic);
                        if (e == GR_KERR_NONE || gone || e == GR_KERR_INVALID_PRODUCER_EPOCH ||
                            e == GR_KERR_TRANSACTION_COORDINATOR_FENCED) {
                            if (e != GR_KERR_NONE)
                                gr_warn(LOGGER, "dropping marker of %s for %s-%d: %s", j->id, j->parts[i].topic,
                                        j->parts[i].partition, gr_kerr_name(e));
                            done[i] = true;
                        }
                    }
                }
            }
    }
    free(frame);
    gr_arena_free(&a);
}

static void txn_run_job(struct gr_txn_coordinator *tc, struct gr_kafka_client *kc, struct txn_job *j) {
    bool *done = gr_calloc((size_t)j->n + 1, sizeof *done);
    int32_t *leaders = gr_calloc((size_t)j->n + 1, sizeof *leaders);
    int backoff = 0;
    for (;;) {
        if (!txn_job_still_valid(tc, j)) goto out; /* the new coordinator resumes it */
        int left = 0;
        for (int i = 0; i < j->n; i++) {
            leaders[i] = -1;
            if (done[i]) continue;
            left++;
            struct gr_mdc_partition part;
            if (gr_mdc_get_partition(tc->b->metadata, j->parts[i].topic, j->parts[i].partition, &part)) {
                leaders[i] = part.leader;
                gr_mdc_partition_release(&part);
            } else if (!gr_mdc_contains_topic(tc->b->metadata, j->parts[i].topic)) {
                done[i] = true; /* deleted topic */
                left--;
            }
        }
        if (!left) break;
        for (int i = 0; i < j->n; i++) {
            if (done[i] || leaders[i] < 0) continue;
            bool first = true;
            for (int k = 0; k < i; k++) first = first && !(leaders[k] == leaders[i] && !done[k]);
            if (first) txn_send_to_leader(tc, kc, j, leaders[i], leaders, done);
        }
        bool all = true;
        for (int i = 0; i < j->n; i++) all = all && done[i];
        if (all) break;
        pthread_mutex_lock(&tc->mu);
        bool stop = tc->stopping;
        pthread_mutex_unlock(&tc->mu);
        if (stop) goto out;
        usleep((useconds_t)(backoff < 1000 ? (backoff += 100) : backoff) * 1000);
    }
    /* every marker is written: Complete* */
    pthread_mutex_lock(&tc->mu);
    struct txn_meta *m = txn_find_locked(tc, j->id);
    int32_t ep = -1;
    struct txn_write *w = NULL;
    if (m && !m->pending && m->pid == j->pid && m->epoch == j->epoch &&
        txn_part_status_locked(tc, j->log_part, &ep) == GR_KERR_NONE && ep == j->coord_epoch &&
        (m->state == GR_TXN_PREPARE_COMMIT || m->state == GR_TXN_PREPARE_ABORT)) {
        struct gr_txn_record r = txn_target_of(m);
        r.state = m->state == GR_TXN_PREPARE_COMMIT ? GR_TXN_COMPLETE_COMMIT : GR_TXN_COMPLETE_ABORT;
        r.n_parts = 0;
        w = txn_write_prepare_locked(tc, m, ep, &r, NULL, NULL);
    }
    pthread_mutex_unlock(&tc->mu);
    if (w) txn_write_issue(w);
out:
    free(done);
    free(leaders);
}

void *txn_marker_thread(void *arg) {
    struct gr_txn_coordinator *tc = arg;
    struct gr_kafka_client_config kcfg = {.client_id = "gregor-txn-markers", .logger = LOGGER};
    struct gr_kafka_client *kc = gr_kafka_client_new(&kcfg);
    pthread_mutex_lock(&tc->mu);
    while (!tc->stopping) {
        struct txn_job *j = tc->jobs;
        if (!j) {
            pthread_cond_wait(&tc->cond, &tc->mu);
            continue;
        }
        tc->jobs = j->next;
        if (!tc->jobs) tc->jobs_tail = &tc->jobs;
        pthread_mutex_unlock(&tc->mu);
        txn_run_job(tc, kc, j);
        txn_parts_free(j->parts, j->n);
        free(j->id);
        free(j);
        pthread_mutex_lock(&tc->mu);
    }
    pthread_mutex_unlock(&tc->mu);
    gr_kafka_client_free(kc);
    return NULL;
}
