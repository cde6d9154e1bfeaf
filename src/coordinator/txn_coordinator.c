/* The transaction coordinator: see txn_coordinator.h. Locking: tc->mu guards metas and parts;
 * storage appends and user callbacks are always called without it. Asynchronous completions
 * look their transaction up again by id. */
#include "coordinator/txn_coordinator.h"

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
#include "coordinator/txn_log.h"
#include "net/kafka_client.h"
#include "protocol/messages.h"
#include "replication/replica_manager.h"
#include "storage/batch.h"

#define LOGGER "kafka.coordinator.transaction.TransactionCoordinator"
#define NB 256
#define EPOCH_EXHAUSTED 32766

struct meta {
    struct meta *next;
    char *id;
    int32_t log_part;
    int64_t pid;
    int16_t epoch;
    int32_t timeout_ms;
    int state;
    bool pending;
    int n_parts, cap_parts;
    struct gr_txn_tp *parts;
    int64_t start_ts, update_ts;
};

enum { P_NONE, P_LOADING, P_OWNED };
struct tpart {
    int state;
    int32_t epoch;
};

struct job { /* markers to send, then the Complete* write */
    struct job *next;
    char *id;
    int64_t pid;
    int16_t epoch;
    bool commit;
    int32_t log_part, coord_epoch;
    int n;
    struct gr_txn_tp *parts;
};

struct gr_txn_coordinator {
    struct gr_txn_config cfg;
    struct gr_broker *b;
    struct gr_replica_manager *rm;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    pthread_t bg, mk;
    bool stopping, started;
    struct meta *buckets[NB];
    struct tpart *parts;
    int32_t nparts;
    struct job *jobs, **jobs_tail;
    int64_t next_abort_check, next_expire_check;
};

static unsigned bucket(const char *id) {
    unsigned h = 5381;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++) h = h * 33 + *p;
    return h % NB;
}

static struct meta *find_locked(struct gr_txn_coordinator *tc, const char *id) {
    for (struct meta *m = tc->buckets[bucket(id)]; m; m = m->next)
        if (strcmp(m->id, id) == 0) return m;
    return NULL;
}

static void parts_free(struct gr_txn_tp *p, int n) {
    for (int i = 0; i < n; i++) free(p[i].topic);
    free(p);
}

static struct gr_txn_tp *parts_dup(const struct gr_txn_tp *p, int n) {
    struct gr_txn_tp *c = gr_calloc((size_t)n + 1, sizeof *c);
    for (int i = 0; i < n; i++) {
        c[i].topic = gr_strdup(p[i].topic);
        c[i].partition = p[i].partition;
    }
    return c;
}

static void meta_free(struct meta *m) {
    parts_free(m->parts, m->n_parts);
    free(m->id);
    free(m);
}

static struct meta *meta_new_locked(struct gr_txn_coordinator *tc, const char *id, int32_t log_part) {
    struct meta *m = gr_calloc(1, sizeof *m);
    m->id = gr_strdup(id);
    m->log_part = log_part;
    m->pid = -1;
    m->epoch = -1;
    m->state = GR_TXN_EMPTY;
    unsigned h = bucket(id);
    m->next = tc->buckets[h];
    tc->buckets[h] = m;
    return m;
}

static void meta_remove_locked(struct gr_txn_coordinator *tc, struct meta *m) {
    for (struct meta **pp = &tc->buckets[bucket(m->id)]; *pp; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            meta_free(m);
            return;
        }
}

static bool has_part(const struct meta *m, const char *topic, int32_t p) {
    for (int i = 0; i < m->n_parts; i++)
        if (m->parts[i].partition == p && strcmp(m->parts[i].topic, topic) == 0) return true;
    return false;
}

int32_t gr_txn_partition_of(struct gr_txn_coordinator *tc, const char *id) {
    int32_t n = gr_mdc_num_partitions(tc->b->metadata, GR_TXN_TOPIC);
    return gr_txn_partition_for(id, n > 0 ? n : tc->cfg.num_partitions);
}

/* NONE if this broker coordinates part p now (and its epoch), else the error. */
static int16_t part_status_locked(struct gr_txn_coordinator *tc, int32_t p, int32_t *epoch) {
    if (tc->stopping || p < 0 || p >= tc->nparts) return GR_KERR_NOT_COORDINATOR;
    if (tc->parts[p].state == P_LOADING) return GR_KERR_COORDINATOR_LOAD_IN_PROGRESS;
    if (tc->parts[p].state != P_OWNED) return GR_KERR_NOT_COORDINATOR;
    if (epoch) *epoch = tc->parts[p].epoch;
    return GR_KERR_NONE;
}

/* ---- writes to __transaction_state ---- */

struct write {
    struct gr_txn_coordinator *tc;
    struct gr_txn_record rec; /* the target state */
    int32_t log_part, coord_epoch;
    uint8_t *batch;
    size_t len;
    /* what to do after */
    gr_txn_cb cb;
    void *ctx;
    int16_t ok_error; /* error to answer on success (CONCURRENT_TRANSACTIONS for a fence) */
    bool markers;     /* enqueue markers on success (Prepare*) */
};

static int16_t map_append_error(int16_t e) {
    switch (e) {
    case GR_KERR_NONE: return e;
    case GR_KERR_UNKNOWN_TOPIC_OR_PARTITION:
    case GR_KERR_NOT_ENOUGH_REPLICAS:
    case GR_KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case GR_KERR_REQUEST_TIMED_OUT: return GR_KERR_COORDINATOR_NOT_AVAILABLE;
    case GR_KERR_NOT_LEADER_OR_FOLLOWER:
    case GR_KERR_KAFKA_STORAGE_ERROR: return GR_KERR_NOT_COORDINATOR;
    default: return GR_KERR_UNKNOWN_SERVER_ERROR;
    }
}

static void enqueue_job_locked(struct gr_txn_coordinator *tc, const struct meta *m, int32_t coord_epoch) {
    struct job *j = gr_calloc(1, sizeof *j);
    j->id = gr_strdup(m->id);
    j->pid = m->pid;
    j->epoch = m->epoch;
    j->commit = m->state == GR_TXN_PREPARE_COMMIT;
    j->log_part = m->log_part;
    j->coord_epoch = coord_epoch;
    j->n = m->n_parts;
    j->parts = parts_dup(m->parts, m->n_parts);
    *tc->jobs_tail = j;
    tc->jobs_tail = &j->next;
    pthread_cond_broadcast(&tc->cond);
}

static void apply_record(struct meta *m, const struct gr_txn_record *r) {
    m->pid = r->producer_id;
    m->epoch = r->producer_epoch;
    m->timeout_ms = r->timeout_ms;
    m->state = r->state;
    parts_free(m->parts, m->n_parts);
    m->parts = parts_dup(r->parts, r->n_parts);
    m->n_parts = m->cap_parts = r->n_parts;
    m->update_ts = r->update_ts;
    m->start_ts = r->start_ts;
}

static void write_done(void *ctx, int16_t error, int64_t base, int64_t lso) {
    (void)base;
    (void)lso;
    struct write *w = ctx;
    struct gr_txn_coordinator *tc = w->tc;
    int16_t err = map_append_error(error);
    pthread_mutex_lock(&tc->mu);
    struct meta *m = find_locked(tc, w->rec.transactional_id);
    int32_t ep = -1;
    int16_t st = part_status_locked(tc, w->log_part, &ep);
    if (err == GR_KERR_NONE && (st != GR_KERR_NONE || ep != w->coord_epoch)) err = GR_KERR_NOT_COORDINATOR;
    if (m) {
        m->pending = false;
        if (err == GR_KERR_NONE) {
            gr_debug(LOGGER, "transactional id %s: %s -> %s (producer %" PRId64 " epoch %d)", m->id,
                     gr_txn_state_name(m->state), gr_txn_state_name(w->rec.state), w->rec.producer_id,
                     w->rec.producer_epoch);
            apply_record(m, &w->rec);
            if (w->markers) enqueue_job_locked(tc, m, w->coord_epoch);
        }
    }
    pthread_mutex_unlock(&tc->mu);
    if (w->cb) w->cb(w->ctx, err == GR_KERR_NONE ? w->ok_error : err, w->rec.producer_id, w->rec.producer_epoch);
    gr_txn_record_free(&w->rec);
    free(w->batch);
    free(w);
}

/* Prepares the write of m's target state rec (copied); m->pending set. Call under mu; issue
 * with write_issue after unlocking. */
static struct write *write_prepare_locked(struct gr_txn_coordinator *tc, struct meta *m, int32_t coord_epoch,
                                          const struct gr_txn_record *rec, gr_txn_cb cb, void *ctx) {
    struct write *w = gr_calloc(1, sizeof *w);
    w->tc = tc;
    w->rec = *rec;
    w->rec.transactional_id = gr_strdup(m->id);
    w->rec.parts = parts_dup(rec->parts, rec->n_parts);
    w->log_part = m->log_part;
    w->coord_epoch = coord_epoch;
    w->cb = cb;
    w->ctx = ctx;
    w->markers = rec->state == GR_TXN_PREPARE_COMMIT || rec->state == GR_TXN_PREPARE_ABORT;
    size_t kl, vl;
    uint8_t *k = gr_txn_log_key(m->id, &kl);
    uint8_t *v = gr_txn_log_value(&w->rec, &vl);
    struct gr_batch_rec r = {k, (int32_t)kl, v, (int32_t)vl, NULL, 0, gr_wall_ms()};
    w->batch = gr_batch_build(&r, 1, NULL, &w->len);
    free(k);
    free(v);
    m->pending = true;
    return w;
}

static void write_issue(struct write *w) {
    gr_rm_append(w->tc->rm, GR_TXN_TOPIC, w->log_part, w->batch, w->len, -1, 30000, write_done, w);
}

static struct gr_txn_record target_of(const struct meta *m) {
    struct gr_txn_record r = {0};
    r.producer_id = m->pid;
    r.producer_epoch = m->epoch;
    r.timeout_ms = m->timeout_ms;
    r.state = (int8_t)m->state;
    r.n_parts = m->n_parts;
    r.parts = m->parts;
    r.update_ts = gr_wall_ms();
    r.start_ts = m->start_ts;
    return r;
}

/* ---- InitProducerId ---- */

void gr_txn_init_producer_id(struct gr_txn_coordinator *tc, const char *id, int32_t timeout_ms, int64_t exp_pid,
                             int16_t exp_epoch, gr_txn_cb cb, void *ctx) {
    if (timeout_ms <= 0 || timeout_ms > tc->cfg.max_timeout_ms) {
        cb(ctx, GR_KERR_INVALID_TRANSACTION_TIMEOUT, -1, -1);
        return;
    }
    int32_t p = gr_txn_partition_of(tc, id), ep = -1;
    int64_t new_pid = -1;
    for (int attempt = 0; attempt < 2; attempt++) {
        pthread_mutex_lock(&tc->mu);
        int16_t err = part_status_locked(tc, p, &ep);
        struct meta *m = err == GR_KERR_NONE ? find_locked(tc, id) : NULL;
        if (err != GR_KERR_NONE) {
            pthread_mutex_unlock(&tc->mu);
            cb(ctx, err, -1, -1);
            return;
        }
        bool need_pid = !m || m->pid < 0 || m->epoch >= EPOCH_EXHAUSTED;
        if (need_pid && new_pid < 0) { /* claim outside the lock (ZooKeeper), then retry */
            pthread_mutex_unlock(&tc->mu);
            if (!tc->b->producer_id_manager || gr_pidm_generate(tc->b->producer_id_manager, &new_pid) != 0) {
                cb(ctx, GR_KERR_COORDINATOR_NOT_AVAILABLE, -1, -1);
                return;
            }
            continue;
        }
        if (!m) m = meta_new_locked(tc, id, p);
        if (m->pending || m->state == GR_TXN_PREPARE_COMMIT || m->state == GR_TXN_PREPARE_ABORT) {
            pthread_mutex_unlock(&tc->mu);
            cb(ctx, GR_KERR_CONCURRENT_TRANSACTIONS, -1, -1);
            return;
        }
        if (exp_pid >= 0 && m->pid >= 0 && (exp_pid != m->pid || exp_epoch != m->epoch)) {
            pthread_mutex_unlock(&tc->mu);
            cb(ctx, GR_KERR_PRODUCER_FENCED, -1, -1);
            return;
        }
        struct gr_txn_record r = target_of(m);
        struct write *w;
        if (m->state == GR_TXN_ONGOING) {
            /* fence the current producer: bump the epoch and abort; the client retries */
            r.producer_epoch = (int16_t)(m->epoch + 1);
            r.state = GR_TXN_PREPARE_ABORT;
            w = write_prepare_locked(tc, m, ep, &r, cb, ctx);
            w->ok_error = GR_KERR_CONCURRENT_TRANSACTIONS;
        } else {
            if (need_pid) {
                r.producer_id = new_pid;
                r.producer_epoch = 0;
            } else {
                r.producer_epoch = (int16_t)(m->epoch + 1);
            }
            r.timeout_ms = timeout_ms;
            r.state = GR_TXN_EMPTY;
            r.n_parts = 0;
            r.start_ts = -1;
            w = write_prepare_locked(tc, m, ep, &r, cb, ctx);
        }
        pthread_mutex_unlock(&tc->mu);
        write_issue(w);
        return;
    }
}

/* Checks common to AddPartitions / EndTxn; NONE or the error. */
static int16_t check_producer_locked(struct gr_txn_coordinator *tc, const char *id, int64_t pid, int16_t epoch,
                                     struct meta **out, int32_t *ep) {
    int16_t err = part_status_locked(tc, gr_txn_partition_of(tc, id), ep);
    if (err != GR_KERR_NONE) return err;
    struct meta *m = find_locked(tc, id);
    if (!m || m->pid != pid) return GR_KERR_INVALID_PRODUCER_ID_MAPPING;
    if (m->epoch != epoch) return GR_KERR_PRODUCER_FENCED;
    if (m->pending) return GR_KERR_CONCURRENT_TRANSACTIONS;
    *out = m;
    return GR_KERR_NONE;
}

void gr_txn_add_partitions(struct gr_txn_coordinator *tc, const char *id, int64_t pid, int16_t epoch,
                           const char *const *topics, const int32_t *partitions, int n, gr_txn_cb cb, void *ctx) {
    pthread_mutex_lock(&tc->mu);
    struct meta *m = NULL;
    int32_t ep = -1;
    int16_t err = check_producer_locked(tc, id, pid, epoch, &m, &ep);
    if (err == GR_KERR_NONE && (m->state == GR_TXN_PREPARE_COMMIT || m->state == GR_TXN_PREPARE_ABORT))
        err = GR_KERR_CONCURRENT_TRANSACTIONS;
    if (err != GR_KERR_NONE) {
        pthread_mutex_unlock(&tc->mu);
        cb(ctx, err, pid, epoch);
        return;
    }
    bool all = m->state == GR_TXN_ONGOING;
    for (int i = 0; i < n && all; i++) all = has_part(m, topics[i], partitions[i]);
    if (all) {
        pthread_mutex_unlock(&tc->mu);
        cb(ctx, GR_KERR_NONE, pid, epoch);
        return;
    }
    struct gr_txn_record r = target_of(m);
    struct gr_txn_tp *np = gr_calloc((size_t)(m->n_parts + n) + 1, sizeof *np);
    int k = 0;
    for (int i = 0; i < m->n_parts; i++) np[k++] = m->parts[i];
    for (int i = 0; i < n; i++) {
        bool dup = has_part(m, topics[i], partitions[i]);
        for (int j = m->n_parts; j < k && !dup; j++)
            dup = np[j].partition == partitions[i] && strcmp(np[j].topic, topics[i]) == 0;
        if (!dup) np[k++] = (struct gr_txn_tp){(char *)topics[i], partitions[i]};
    }
    if (m->state != GR_TXN_ONGOING) {
        r.n_parts = 0;
        k -= m->n_parts;
        memmove(np, np + m->n_parts, (size_t)k * sizeof *np);
        r.start_ts = gr_wall_ms();
    }
    r.parts = np;
    r.n_parts = k;
    r.state = GR_TXN_ONGOING;
    struct write *w = write_prepare_locked(tc, m, ep, &r, cb, ctx);
    free(np);
    pthread_mutex_unlock(&tc->mu);
    write_issue(w);
}

void gr_txn_end(struct gr_txn_coordinator *tc, const char *id, int64_t pid, int16_t epoch, bool commit, gr_txn_cb cb,
                void *ctx) {
    pthread_mutex_lock(&tc->mu);
    struct meta *m = NULL;
    int32_t ep = -1;
    int16_t err = check_producer_locked(tc, id, pid, epoch, &m, &ep);
    if (err == GR_KERR_NONE) {
        switch (m->state) {
        case GR_TXN_ONGOING: break;
        case GR_TXN_COMPLETE_COMMIT: err = commit ? GR_KERR_NONE : GR_KERR_INVALID_TXN_STATE; goto answer;
        case GR_TXN_COMPLETE_ABORT: err = commit ? GR_KERR_INVALID_TXN_STATE : GR_KERR_NONE; goto answer;
        case GR_TXN_PREPARE_COMMIT: err = commit ? GR_KERR_CONCURRENT_TRANSACTIONS : GR_KERR_INVALID_TXN_STATE; goto answer;
        case GR_TXN_PREPARE_ABORT: err = commit ? GR_KERR_INVALID_TXN_STATE : GR_KERR_CONCURRENT_TRANSACTIONS; goto answer;
        default: err = GR_KERR_INVALID_TXN_STATE; goto answer;
        }
        struct gr_txn_record r = target_of(m);
        r.state = commit ? GR_TXN_PREPARE_COMMIT : GR_TXN_PREPARE_ABORT;
        struct write *w = write_prepare_locked(tc, m, ep, &r, cb, ctx);
        pthread_mutex_unlock(&tc->mu);
        write_issue(w);
        return;
    }
answer:
    pthread_mutex_unlock(&tc->mu);
    cb(ctx, err, pid, epoch);
}

int16_t gr_txn_verify_id(struct gr_txn_coordinator *tc, const char *id, int64_t pid, int16_t epoch, const char *topic,
                         int32_t partition) {
    pthread_mutex_lock(&tc->mu);
    int16_t err = part_status_locked(tc, gr_txn_partition_of(tc, id), NULL);
    struct meta *m = err == GR_KERR_NONE ? find_locked(tc, id) : NULL;
    if (err == GR_KERR_NONE && m && m->pid == pid && epoch < m->epoch)
        err = GR_KERR_PRODUCER_FENCED;
    else if (err == GR_KERR_NONE)
        err = m && m->pid == pid && m->epoch == epoch && m->state == GR_TXN_ONGOING && has_part(m, topic, partition)
                  ? GR_KERR_NONE
                  : GR_KERR_INVALID_TXN_STATE;
    pthread_mutex_unlock(&tc->mu);
    return err;
}

int16_t gr_txn_verify(struct gr_txn_coordinator *tc, int64_t pid, int16_t epoch, const char *topic, int32_t partition) {
    pthread_mutex_lock(&tc->mu);
    int16_t err = GR_KERR_INVALID_TXN_STATE;
    for (int b = 0; b < NB; b++)
        for (struct meta *m = tc->buckets[b]; m; m = m->next)
            if (m->pid == pid && part_status_locked(tc, m->log_part, NULL) == GR_KERR_NONE)
                err = m->epoch == epoch && m->state == GR_TXN_ONGOING && has_part(m, topic, partition)
                          ? GR_KERR_NONE
                          : GR_KERR_INVALID_TXN_STATE;
    pthread_mutex_unlock(&tc->mu);
    return err;
}

/* ---- markers (Kafka's TransactionMarkerChannelManager, one blocking sender thread) ---- */

static bool job_still_valid(struct gr_txn_coordinator *tc, const struct job *j) {
    pthread_mutex_lock(&tc->mu);
    int32_t ep = -1;
    bool ok = part_status_locked(tc, j->log_part, &ep) == GR_KERR_NONE && ep == j->coord_epoch;
    pthread_mutex_unlock(&tc->mu);
    return ok;
}

/* Sends the markers of the parts led by `leader` (done[i] set for each written or dropped). */
static void send_to_leader(struct gr_txn_coordinator *tc, struct gr_kafka_client *kc, const struct job *j,
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

static void run_job(struct gr_txn_coordinator *tc, struct gr_kafka_client *kc, struct job *j) {
    bool *done = gr_calloc((size_t)j->n + 1, sizeof *done);
    int32_t *leaders = gr_calloc((size_t)j->n + 1, sizeof *leaders);
    int backoff = 0;
    for (;;) {
        if (!job_still_valid(tc, j)) goto out; /* the new coordinator resumes it */
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
            if (first) send_to_leader(tc, kc, j, leaders[i], leaders, done);
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
    struct meta *m = find_locked(tc, j->id);
    int32_t ep = -1;
    struct write *w = NULL;
    if (m && !m->pending && m->pid == j->pid && m->epoch == j->epoch &&
        part_status_locked(tc, j->log_part, &ep) == GR_KERR_NONE && ep == j->coord_epoch &&
        (m->state == GR_TXN_PREPARE_COMMIT || m->state == GR_TXN_PREPARE_ABORT)) {
        struct gr_txn_record r = target_of(m);
        r.state = m->state == GR_TXN_PREPARE_COMMIT ? GR_TXN_COMPLETE_COMMIT : GR_TXN_COMPLETE_ABORT;
        r.n_parts = 0;
        w = write_prepare_locked(tc, m, ep, &r, NULL, NULL);
    }
    pthread_mutex_unlock(&tc->mu);
    if (w) write_issue(w);
out:
    free(done);
    free(leaders);
}

static void *marker_thread(void *arg) {
    struct gr_txn_coordinator *tc = arg;
    struct gr_kafka_client_config kcfg = {.client_id = "gregor-txn-markers", .logger = LOGGER};
    struct gr_kafka_client *kc = gr_kafka_client_new(&kcfg);
    pthread_mutex_lock(&tc->mu);
    while (!tc->stopping) {
        struct job *j = tc->jobs;
        if (!j) {
            pthread_cond_wait(&tc->cond, &tc->mu);
            continue;
        }
        tc->jobs = j->next;
        if (!tc->jobs) tc->jobs_tail = &tc->jobs;
        pthread_mutex_unlock(&tc->mu);
        run_job(tc, kc, j);
        parts_free(j->parts, j->n);
        free(j->id);
        free(j);
        pthread_mutex_lock(&tc->mu);
    }
    pthread_mutex_unlock(&tc->mu);
    gr_kafka_client_free(kc);
    return NULL;
}

/* ---- loading, timeouts, expiry (background thread) ---- */

static void load_partition(struct gr_txn_coordinator *tc, int32_t p, int32_t epoch) {
    int64_t off = 0;
    struct meta *loaded = NULL; /* private list, merged at the end */
    for (;;) {
        struct gr_plog_read_result res;
        int16_t e = gr_rm_read(tc->rm, GR_TXN_TOPIC, p, off, 1 << 20, false, &res);
        if (e == GR_KERR_OFFSET_OUT_OF_RANGE && off < res.log_start_offset) {
            off = res.log_start_offset;
            free(res.data);
            continue;
        }
        if (e != GR_KERR_NONE) {
            free(res.data);
            pthread_mutex_lock(&tc->mu);
            if (tc->parts[p].state == P_LOADING) tc->parts[p].state = P_NONE;
            pthread_mutex_unlock(&tc->mu);
            while (loaded) { struct meta *n = loaded->next; meta_free(loaded); loaded = n; }
            return;
        }
        if (!res.len) { free(res.data); break; }
        struct gr_batch_iter it;
        struct gr_batch_info bi;
        const uint8_t *bp;
        gr_batch_iter_init(&it, res.data, res.len);
        while (gr_batch_iter_next(&it, &bi, &bp) == 1) {
            struct gr_batch_rec_iter ri;
            struct gr_batch_rec_view rec;
            if (!(bi.Attributes & GR_BATCH_ATTR_CONTROL) && gr_batch_rec_iter_init(&ri, bp, bi.size) == GR_BATCH_OK)
                while (gr_batch_rec_iter_next(&ri, &rec) == 1) {
                    struct gr_txn_record r;
                    if (gr_txn_log_decode(rec.Key, rec.Key ? (size_t)rec.KeyLength : 0, rec.Value,
                                          rec.Value ? (size_t)rec.ValueLength : 0, &r) != 0)
                        continue;
                    struct meta **pp = &loaded;
                    while (*pp && strcmp((*pp)->id, r.transactional_id) != 0) pp = &(*pp)->next;
                    if (r.tombstone) {
                        if (*pp) { struct meta *d = *pp; *pp = d->next; meta_free(d); }
                    } else {
                        if (!*pp) {
                            *pp = gr_calloc(1, sizeof **pp);
                            (*pp)->id = gr_strdup(r.transactional_id);
                            (*pp)->log_part = p;
                        }
                        apply_record(*pp, &r);
                    }
                    gr_txn_record_free(&r);
                }
            off = gr_batch_info_last_offset(&bi) + 1;
        }
        free(res.data);
        if (off >= res.log_end_offset) break;
    }
    pthread_mutex_lock(&tc->mu);
    if (tc->parts[p].state == P_LOADING && tc->parts[p].epoch == epoch) {
        int n = 0;
        while (loaded) {
            struct meta *m = loaded;
            loaded = m->next;
            struct meta *old = find_locked(tc, m->id);
            if (old) meta_remove_locked(tc, old);
            unsigned h = bucket(m->id);
            m->next = tc->buckets[h];
            tc->buckets[h] = m;
            if (m->state == GR_TXN_PREPARE_COMMIT || m->state == GR_TXN_PREPARE_ABORT) enqueue_job_locked(tc, m, epoch);
            n++;
        }
        tc->parts[p].state = P_OWNED;
        gr_info(LOGGER, "[TransactionCoordinator id=%d] loaded %d transactional id(s) of %s-%d (coordinator epoch %d)",
                tc->b->broker_id, n, GR_TXN_TOPIC, p, epoch);
    }
    pthread_mutex_unlock(&tc->mu);
    while (loaded) { struct meta *n = loaded->next; meta_free(loaded); loaded = n; }
}

static void unload_locked(struct gr_txn_coordinator *tc, int32_t p) {
    for (int b = 0; b < NB; b++)
        for (struct meta **pp = &tc->buckets[b]; *pp;) {
            if ((*pp)->log_part == p) {
                struct meta *d = *pp;
                *pp = d->next;
                meta_free(d);
            } else {
                pp = &(*pp)->next;
            }
        }
    tc->parts[p].state = P_NONE;
}

static void poll_partitions(struct gr_txn_coordinator *tc) {
    int32_t n = gr_mdc_num_partitions(tc->b->metadata, GR_TXN_TOPIC);
    if (n <= 0) return;
    pthread_mutex_lock(&tc->mu);
    if (n > tc->nparts) {
        tc->parts = gr_realloc(tc->parts, (size_t)n * sizeof *tc->parts);
        memset(tc->parts + tc->nparts, 0, (size_t)(n - tc->nparts) * sizeof *tc->parts);
        tc->nparts = n;
    }
    pthread_mutex_unlock(&tc->mu);
    for (int32_t p = 0; p < n; p++) {
        struct gr_rm_partition_info info;
        bool leader = gr_rm_partition_info(tc->rm, GR_TXN_TOPIC, p, &info) && info.is_leader;
        pthread_mutex_lock(&tc->mu);
        struct tpart *tp = &tc->parts[p];
        bool load = false;
        if (leader && (tp->state == P_NONE || tp->epoch != info.leader_epoch)) {
            if (tp->state != P_NONE) unload_locked(tc, p);
            tp->state = P_LOADING;
            tp->epoch = info.leader_epoch;
            load = true;
        } else if (!leader && tp->state != P_NONE) {
            gr_info(LOGGER, "[TransactionCoordinator id=%d] unloading %s-%d", tc->b->broker_id, GR_TXN_TOPIC, p);
            unload_locked(tc, p);
        }
        pthread_mutex_unlock(&tc->mu);
        if (load) load_partition(tc, p, info.leader_epoch);
    }
}

/* Aborts timed-out transactions (fencing the producer: epoch + 1), tombstones expired ids. */
static void timers(struct gr_txn_coordinator *tc) {
    int64_t now = gr_wall_ms();
    struct write *ws[64];
    int nw = 0;
    pthread_mutex_lock(&tc->mu);
    bool do_abort = now >= tc->next_abort_check, do_expire = now >= tc->next_expire_check;
    if (do_abort) tc->next_abort_check = now + tc->cfg.abort_interval_ms;
    if (do_expire) tc->next_expire_check = now + tc->cfg.remove_expired_interval_ms;
    for (int b = 0; b < NB && nw < 64; b++)
        for (struct meta *m = tc->buckets[b]; m && nw < 64; m = m->next) {
            int32_t ep;
            if (m->pending || part_status_locked(tc, m->log_part, &ep) != GR_KERR_NONE) continue;
            struct gr_txn_record r = target_of(m);
            if (do_abort && m->state == GR_TXN_ONGOING && m->start_ts + m->timeout_ms < now) {
                gr_info(LOGGER, "aborting transaction of %s (producer %" PRId64 " epoch %d): timed out after %d ms",
                        m->id, m->pid, m->epoch, m->timeout_ms);
                r.producer_epoch = (int16_t)(m->epoch + 1);
                r.state = GR_TXN_PREPARE_ABORT;
                ws[nw++] = write_prepare_locked(tc, m, ep, &r, NULL, NULL);
            } else if (do_expire &&
                       (m->state == GR_TXN_EMPTY || m->state == GR_TXN_COMPLETE_COMMIT ||
                        m->state == GR_TXN_COMPLETE_ABORT) &&
                       m->update_ts <= now - tc->cfg.id_expiration_ms) {
                r.state = GR_TXN_DEAD; /* written as a tombstone below */
                struct write *w = write_prepare_locked(tc, m, ep, &r, NULL, NULL);
                free(w->batch);
                size_t kl;
                uint8_t *k = gr_txn_log_key(m->id, &kl);
                struct gr_batch_rec rec = {k, (int32_t)kl, NULL, -1, NULL, 0, now};
                w->batch = gr_batch_build(&rec, 1, NULL, &w->len);
                free(k);
                ws[nw++] = w;
            }
        }
    pthread_mutex_unlock(&tc->mu);
    for (int i = 0; i < nw; i++) write_issue(ws[i]);
    /* Dead ids are dropped from memory once their tombstone is written */
    pthread_mutex_lock(&tc->mu);
    for (int b = 0; b < NB; b++)
        for (struct meta *m = tc->buckets[b], *next; m; m = next) {
            next = m->next;
            if (m->state == GR_TXN_DEAD && !m->pending) meta_remove_locked(tc, m);
        }
    pthread_mutex_unlock(&tc->mu);
}

static void *bg_thread(void *arg) {
    struct gr_txn_coordinator *tc = arg;
    pthread_mutex_lock(&tc->mu);
    while (!tc->stopping) {
        pthread_mutex_unlock(&tc->mu);
        poll_partitions(tc);
        timers(tc);
        pthread_mutex_lock(&tc->mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        if (!tc->stopping) pthread_cond_timedwait(&tc->cond, &tc->mu, &ts);
    }
    pthread_mutex_unlock(&tc->mu);
    return NULL;
}

/* ---- lifecycle ---- */

void gr_txn_ensure_topic(struct gr_broker *b) {
    if (gr_mdc_contains_topic(b->metadata, GR_TXN_TOPIC)) return;
    struct gr_txn_coordinator *tc = b->txn_coordinator;
    int32_t nparts = tc ? tc->cfg.num_partitions : GR_TXN_DEFAULT_PARTITIONS;
    int32_t rf = tc ? tc->cfg.replication_factor : 3;
    struct gr_broker_meta *brokers = NULL;
    int nb = 0;
    gr_mdc_alive_brokers(b->metadata, &brokers, &nb);
    gr_broker_metas_free(brokers, nb);
    if (nb <= 0) return;
    if (nb < rf) rf = nb; /* as for __consumer_offsets: small clusters still work */
    char misr[16];
    snprintf(misr, sizeof misr, "%d", GR_MIN(tc ? tc->cfg.min_isr : 2, rf));
    const char *names[] = {"cleanup.policy", "compression.type", "segment.bytes", "unclean.leader.election.enable",
                           "min.insync.replicas"};
    const char *values[] = {"compact", "uncompressed", "104857600", "false", misr};
    struct gr_topic_spec spec = {.name = GR_TXN_TOPIC, .num_partitions = nparts, .replication_factor = (int16_t)rf,
                                 .n_configs = 5, .config_names = names, .config_values = values};
    struct gr_topic_result res;
    int16_t e = gr_topic_admin_create_topic(b, &spec, false, true, -1, &res);
    if (e == GR_KERR_NONE)
        gr_info(LOGGER, "Created %s with %d partitions and replication factor %d", GR_TXN_TOPIC, nparts, rf);
    else if (e != GR_KERR_TOPIC_ALREADY_EXISTS)
        gr_warn(LOGGER, "Cannot create %s: %s (%s)", GR_TXN_TOPIC, gr_kerr_name(e), res.message);
}

int gr_txn_coordinator_start(struct gr_broker *b, struct gr_replica_manager *rm, const struct gr_txn_config *cfg) {
    struct gr_txn_coordinator *tc = gr_calloc(1, sizeof *tc);
    tc->cfg = *cfg;
    tc->b = b;
    tc->rm = rm;
    tc->jobs_tail = &tc->jobs;
    pthread_mutex_init(&tc->mu, NULL);
    pthread_cond_init(&tc->cond, NULL);
    if (pthread_create(&tc->bg, NULL, bg_thread, tc) != 0) {
        free(tc);
        return -EAGAIN;
    }
    if (pthread_create(&tc->mk, NULL, marker_thread, tc) != 0) {
        pthread_mutex_lock(&tc->mu);
        tc->stopping = true;
        pthread_cond_broadcast(&tc->cond);
        pthread_mutex_unlock(&tc->mu);
        pthread_join(tc->bg, NULL);
        free(tc);
        return -EAGAIN;
    }
    tc->started = true;
    b->txn_coordinator = tc;
    gr_info(LOGGER, "[TransactionCoordinator id=%d] Startup complete.", b->broker_id);
    return 0;
}

void gr_txn_coordinator_shutdown(struct gr_txn_coordinator *tc) {
    if (!tc || !tc->started) return;
    pthread_mutex_lock(&tc->mu);
    tc->stopping = true;
    pthread_cond_broadcast(&tc->cond);
    pthread_mutex_unlock(&tc->mu);
    pthread_join(tc->bg, NULL);
    pthread_join(tc->mk, NULL);
    tc->started = false;
}

void gr_txn_coordinator_free(struct gr_txn_coordinator *tc) {
    if (!tc) return;
    gr_txn_coordinator_shutdown(tc);
    for (int b = 0; b < NB; b++)
        while (tc->buckets[b]) {
            struct meta *m = tc->buckets[b];
            tc->buckets[b] = m->next;
            meta_free(m);
        }
    while (tc->jobs) {
        struct job *j = tc->jobs;
        tc->jobs = j->next;
        parts_free(j->parts, j->n);
        free(j->id);
        free(j);
    }
    free(tc->parts);
    pthread_mutex_destroy(&tc->mu);
    pthread_cond_destroy(&tc->cond);
    free(tc);
}
