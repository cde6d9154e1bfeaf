/* The transaction coordinator's APIs and lifecycle: see txn_coordinator.h; shared state in
 * txn_internal.h, the id table and storage in txn_state_manager.c, markers in
 * txn_marker_channel_manager.c. */
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

int32_t gr_txn_partition_of(struct gr_txn_coordinator *tc, const char *id) {
    int32_t n = gr_mdc_num_partitions(tc->b->metadata, GR_TXN_TOPIC);
    return gr_txn_partition_for(id, n > 0 ? n : tc->cfg.num_partitions);
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
        int16_t err = txn_part_status_locked(tc, p, &ep);
        struct txn_meta *m = err == GR_KERR_NONE ? txn_find_locked(tc, id) : NULL;
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
        if (!m) m = txn_meta_new_locked(tc, id, p);
        if (m->pending || m->state == GR_TXN_PREPARE_COMMIT || m->state == GR_TXN_PREPARE_ABORT) {
            pthread_mutex_unlock(&tc->mu);
            cb(ctx, GR_KERR_CONCURRENT_TRANSACTIONS, -1, -1);
            return;
        }
        if (exp_pid >= 0 && m->pid >= 0 && exp_pid == m->pid && exp_epoch != m->epoch &&
            exp_epoch == m->last_epoch && m->state == GR_TXN_EMPTY) {
            /* a retry of the bump whose answer was lost: the current pid/epoch (Kafka 2.7) */
            int64_t pid = m->pid;
            int16_t epoch = m->epoch;
            pthread_mutex_unlock(&tc->mu);
            cb(ctx, GR_KERR_NONE, pid, epoch);
            return;
        }
        if (exp_pid >= 0 && m->pid >= 0 && exp_pid != m->pid && exp_pid == m->last_pid &&
            exp_epoch >= EPOCH_EXHAUSTED && exp_epoch == m->last_epoch && m->state == GR_TXN_EMPTY) {
            /* a retry of the producer-id rotation whose answer was lost: the new pid (Kafka 2.7
             * isValidProducerId accepts lastProducerId with an exhausted epoch) */
            int64_t pid = m->pid;
            int16_t epoch = m->epoch;
            pthread_mutex_unlock(&tc->mu);
            cb(ctx, GR_KERR_NONE, pid, epoch);
            return;
        }
        if (exp_pid >= 0 && m->pid >= 0 && (exp_pid != m->pid || exp_epoch != m->epoch)) {
            pthread_mutex_unlock(&tc->mu);
            cb(ctx, GR_KERR_PRODUCER_FENCED, -1, -1);
            return;
        }
        struct gr_txn_record r = txn_target_of(m);
        struct txn_write *w;
        if (m->state == GR_TXN_ONGOING) {
            /* fence the current producer: bump the epoch and abort; the client retries */
            r.producer_epoch = (int16_t)(m->epoch + 1);
            r.state = GR_TXN_PREPARE_ABORT;
            w = txn_write_prepare_locked(tc, m, ep, &r, cb, ctx);
            w->ok_error = GR_KERR_CONCURRENT_TRANSACTIONS;
        } else {
            if (need_pid) {
                r.producer_id = new_pid;
                r.producer_epoch = 0;
            } else {
                r.producer_epoch = (int16_t)(m->epoch + 1);
            }
            int16_t before = m->epoch;
            r.timeout_ms = timeout_ms;
            r.state = GR_TXN_EMPTY;
            r.n_parts = 0;
            r.start_ts = -1;
            w = txn_write_prepare_locked(tc, m, ep, &r, cb, ctx);
            /* Kafka's prepareProducerIdRotation keeps the exhausted epoch when the producer asked
             * with its pid/epoch (so its retry is recognised), prepareIncrementProducerEpoch the
             * epoch before the bump */
            w->last_epoch = need_pid ? (exp_pid >= 0 && m->pid >= 0 ? before : -1) : before;
            w->last_pid = m->pid;
        }
        pthread_mutex_unlock(&tc->mu);
        txn_write_issue(w);
        return;
    }
}

/* Checks common to AddPartitions / EndTxn; NONE or the error. */
static int16_t check_producer_locked(struct gr_txn_coordinator *tc, const char *id, int64_t pid, int16_t epoch,
                                     struct txn_meta **out, int32_t *ep) {
    int16_t err = txn_part_status_locked(tc, gr_txn_partition_of(tc, id), ep);
    if (err != GR_KERR_NONE) return err;
    struct txn_meta *m = txn_find_locked(tc, id);
    if (!m || m->pid != pid) return GR_KERR_INVALID_PRODUCER_ID_MAPPING;
    if (m->epoch != epoch) return GR_KERR_PRODUCER_FENCED;
    if (m->pending) return GR_KERR_CONCURRENT_TRANSACTIONS;
    *out = m;
    return GR_KERR_NONE;
}

/* ---- AddPartitionsToTxn (and AddOffsetsToTxn) ---- */

struct txn_parked {
    struct txn_parked *next;
    char *id;
    int64_t pid;
    int16_t epoch;
    int n;
    char **topics;
    int32_t *parts;
    gr_txn_cb cb;
    void *ctx;
    int64_t deadline; /* gr_mono_ms */
};

static void parked_free(struct txn_parked *w) {
    for (int i = 0; i < w->n; i++) free(w->topics[i]);
    free(w->topics);
    free(w->parts);
    free(w->id);
    free(w);
}

static void add_partitions(struct gr_txn_coordinator *tc, const char *id, int64_t pid, int16_t epoch,
                           const char *const *topics, const int32_t *partitions, int n, gr_txn_cb cb, void *ctx,
                           int64_t deadline);

void gr_txn_add_partitions(struct gr_txn_coordinator *tc, const char *id, int64_t pid, int16_t epoch,
                           const char *const *topics, const int32_t *partitions, int n, gr_txn_cb cb, void *ctx) {
    add_partitions(tc, id, pid, epoch, topics, partitions, n, cb, ctx, 0);
}

/* Takes the parked requests matching (id, or due at now, or all) off the list. */
static struct txn_parked *take_parked(struct gr_txn_coordinator *tc, const char *id, int64_t now, bool all) {
    struct txn_parked *out = NULL, **tail = &out;
    pthread_mutex_lock(&tc->mu);
    for (struct txn_parked **pp = &tc->parked; *pp;) {
        struct txn_parked *w = *pp;
        if (all || (id ? strcmp(w->id, id) == 0 : w->deadline <= now)) {
            *pp = w->next;
            w->next = NULL;
            *tail = w;
            tail = &w->next;
        } else {
            pp = &w->next;
        }
    }
    pthread_mutex_unlock(&tc->mu);
    return out;
}

static void rerun(struct gr_txn_coordinator *tc, struct txn_parked *list, bool shutdown) {
    while (list) {
        struct txn_parked *w = list;
        list = w->next;
        if (shutdown)
            w->cb(w->ctx, GR_KERR_NOT_COORDINATOR, w->pid, w->epoch);
        else
            add_partitions(tc, w->id, w->pid, w->epoch, (const char *const *)w->topics, w->parts, w->n, w->cb, w->ctx,
                           w->deadline);
        parked_free(w);
    }
}

void txn_parked_retry(struct gr_txn_coordinator *tc, const char *id) {
    rerun(tc, take_parked(tc, id, 0, false), false);
}

void txn_parked_expire(struct gr_txn_coordinator *tc, int64_t now_ms, bool all) {
    rerun(tc, take_parked(tc, NULL, now_ms, all), all);
}

/* Prepares the write of m's Ongoing state with topics/partitions added (to its current partitions
 * when keep, else as a new transaction started now). Under mu. */
static struct txn_write *ongoing_write_locked(struct gr_txn_coordinator *tc, struct txn_meta *m, int32_t ep,
                                              const char *const *topics, const int32_t *partitions, int n, bool keep,
                                              gr_txn_cb cb, void *ctx) {
    struct gr_txn_record r = txn_target_of(m);
    int old = keep ? m->n_parts : 0;
    struct gr_txn_tp *np = gr_calloc((size_t)(old + n) + 1, sizeof *np);
    int k = 0;
    for (int i = 0; i < old; i++) np[k++] = m->parts[i];
    for (int i = 0; i < n; i++) {
        bool dup = false;
        for (int j = 0; j < k && !dup; j++) dup = np[j].partition == partitions[i] && strcmp(np[j].topic, topics[i]) == 0;
        if (!dup) np[k++] = (struct gr_txn_tp){(char *)topics[i], partitions[i]};
    }
    if (!keep) r.start_ts = gr_wall_ms();
    r.parts = np;
    r.n_parts = k;
    r.state = GR_TXN_ONGOING;
    struct txn_write *w = txn_write_prepare_locked(tc, m, ep, &r, cb, ctx);
    free(np);
    return w;
}

/* deadline: when a parked request stops waiting (0: a new request). */
static void add_partitions(struct gr_txn_coordinator *tc, const char *id, int64_t pid, int16_t epoch,
                           const char *const *topics, const int32_t *partitions, int n, gr_txn_cb cb, void *ctx,
                           int64_t deadline) {
    pthread_mutex_lock(&tc->mu);
    struct txn_meta *m = NULL;
    int32_t ep = -1;
    int16_t err = check_producer_locked(tc, id, pid, epoch, &m, &ep);
    if (err == GR_KERR_NONE && (m->state == GR_TXN_PREPARE_COMMIT || m->state == GR_TXN_PREPARE_ABORT))
        err = GR_KERR_CONCURRENT_TRANSACTIONS;
    if (err == GR_KERR_CONCURRENT_TRANSACTIONS && !tc->stopping) { /* wait for the previous transaction */
        int64_t now = gr_mono_ms();
        if (!deadline) deadline = now + GR_TXN_PARK_MAX_MS;
        if (now < deadline) {
            struct txn_parked *w = gr_calloc(1, sizeof *w);
            w->id = gr_strdup(id);
            w->pid = pid;
            w->epoch = epoch;
            w->n = n;
            w->topics = gr_calloc((size_t)n + 1, sizeof *w->topics);
            w->parts = gr_calloc((size_t)n + 1, sizeof *w->parts);
            for (int i = 0; i < n; i++) {
                w->topics[i] = gr_strdup(topics[i]);
                w->parts[i] = partitions[i];
            }
            w->cb = cb;
            w->ctx = ctx;
            w->deadline = deadline;
            struct txn_parked **tail = &tc->parked; /* arrival order */
            while (*tail) tail = &(*tail)->next;
            *tail = w;
            pthread_mutex_unlock(&tc->mu);
            return;
        }
    }
    if (err != GR_KERR_NONE) {
        pthread_mutex_unlock(&tc->mu);
        cb(ctx, err, pid, epoch);
        return;
    }
    bool all = m->state == GR_TXN_ONGOING;
    for (int i = 0; i < n && all; i++) all = txn_has_part(m, topics[i], partitions[i]);
    if (all) {
        pthread_mutex_unlock(&tc->mu);
        cb(ctx, GR_KERR_NONE, pid, epoch);
        return;
    }
    struct txn_write *w = ongoing_write_locked(tc, m, ep, topics, partitions, n, m->state == GR_TXN_ONGOING, cb, ctx);
    pthread_mutex_unlock(&tc->mu);
    txn_write_issue(w);
}

/* ---- the next transaction's Ongoing in place of Complete* ---- */

struct txn_fold {
    struct gr_txn_coordinator *tc;
    struct txn_parked *w; /* the AddPartitionsToTxn the write answers */
    gr_txn_cb done;       /* the Complete* write's owner: told the outcome */
    void *done_ctx;
};

static void fold_done(void *ctx, int16_t error, int64_t pid, int16_t epoch) {
    struct txn_fold *f = ctx;
    struct gr_txn_coordinator *tc = f->tc;
    struct txn_parked *w = f->w;
    gr_txn_cb done = f->done;
    void *done_ctx = f->done_ctx;
    free(f);
    /* first the transaction's owner: on failure it queues the Complete* retry */
    done(done_ctx, error, pid, epoch);
    if (error == GR_KERR_NONE) {
        w->cb(w->ctx, GR_KERR_NONE, pid, epoch);
        parked_free(w);
    } else {
        /* the id is still in Prepare*: the request runs again and waits for the Complete* retry
         * (or answers what it meets: NOT_COORDINATOR, its deadline passed, ...) */
        gr_info(LOGGER, "cannot write the next transaction of %s in place of its completion (%s)", w->id,
                gr_kerr_name(error));
        w->next = NULL;
        rerun(tc, w, false);
    }
}

struct txn_write *txn_parked_fold_locked(struct gr_txn_coordinator *tc, struct txn_meta *m, int32_t coord_epoch,
                                         gr_txn_cb done, void *done_ctx) {
    if (tc->stopping) return NULL;
    struct txn_parked *w = NULL;
    for (struct txn_parked **pp = &tc->parked; *pp; pp = &(*pp)->next)
        if ((*pp)->pid == m->pid && (*pp)->epoch == m->epoch && strcmp((*pp)->id, m->id) == 0) {
            w = *pp;
            *pp = w->next;
            w->next = NULL;
            break;
        }
    if (!w) return NULL;
    struct txn_fold *f = gr_calloc(1, sizeof *f);
    f->tc = tc;
    f->w = w;
    f->done = done;
    f->done_ctx = done_ctx;
    gr_debug(LOGGER, "transactional id %s: the markers of its %s are written; its next transaction's Ongoing is "
             "written in place of the completion", m->id, gr_txn_state_name(m->state));
    return ongoing_write_locked(tc, m, coord_epoch, (const char *const *)w->topics, w->parts, w->n, false, fold_done,
                                f);
}

void gr_txn_end(struct gr_txn_coordinator *tc, const char *id, int64_t pid, int16_t epoch, bool commit, gr_txn_cb cb,
                void *ctx) {
    pthread_mutex_lock(&tc->mu);
    struct txn_meta *m = NULL;
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
        struct gr_txn_record r = txn_target_of(m);
        r.state = commit ? GR_TXN_PREPARE_COMMIT : GR_TXN_PREPARE_ABORT;
        struct txn_write *w = txn_write_prepare_locked(tc, m, ep, &r, cb, ctx);
        pthread_mutex_unlock(&tc->mu);
        txn_write_issue(w);
        return;
    }
answer:
    pthread_mutex_unlock(&tc->mu);
    cb(ctx, err, pid, epoch);
}

int16_t gr_txn_verify_id(struct gr_txn_coordinator *tc, const char *id, int64_t pid, int16_t epoch, const char *topic,
                         int32_t partition) {
    pthread_mutex_lock(&tc->mu);
    int16_t err = txn_part_status_locked(tc, gr_txn_partition_of(tc, id), NULL);
    struct txn_meta *m = err == GR_KERR_NONE ? txn_find_locked(tc, id) : NULL;
    /* Kafka 3.6 handleVerifyPartitionsInTransaction; a pending write is not looked at: the
     * broker's guard, set before it asked, is cleared by the marker that would follow it */
    if (err != GR_KERR_NONE)
        ;
    else if (!m || m->pid != pid)
        err = GR_KERR_INVALID_PRODUCER_ID_MAPPING;
    else if (m->epoch != epoch)
        err = GR_KERR_PRODUCER_FENCED;
    else if (m->state == GR_TXN_PREPARE_COMMIT || m->state == GR_TXN_PREPARE_ABORT)
        err = GR_KERR_CONCURRENT_TRANSACTIONS; /* retriable: the producer learns the outcome next */
    else if (m->state != GR_TXN_ONGOING || !txn_has_part(m, topic, partition))
        err = GR_KERR_INVALID_TXN_STATE;
    pthread_mutex_unlock(&tc->mu);
    return err;
}


/* ---- lifecycle ---- */

int gr_txn_coordinator_start(struct gr_broker *b, struct gr_replica_manager *rm, const struct gr_txn_config *cfg) {
    struct gr_txn_coordinator *tc = gr_calloc(1, sizeof *tc);
    tc->cfg = *cfg;
    tc->b = b;
    tc->rm = rm;
    pthread_mutex_init(&tc->mu, NULL);
    pthread_cond_init(&tc->cond, NULL);
    if (txn_markers_start(tc) != 0) { /* before the loader (bg) can queue markers */
        free(tc);
        return -EAGAIN;
    }
    if (pthread_create(&tc->bg, NULL, txn_bg_thread, tc) != 0) {
        txn_markers_free(tc);
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
    txn_markers_stop(tc);
    txn_parked_expire(tc, 0, true);
    tc->started = false;
}

void gr_txn_coordinator_free(struct gr_txn_coordinator *tc) {
    if (!tc) return;
    gr_txn_coordinator_shutdown(tc);
    for (int b = 0; b < NB; b++)
        while (tc->buckets[b]) {
            struct txn_meta *m = tc->buckets[b];
            tc->buckets[b] = m->next;
            txn_meta_free(m);
        }
    txn_markers_free(tc);
    free(tc->parts);
    pthread_mutex_destroy(&tc->mu);
    pthread_cond_destroy(&tc->cond);
    free(tc);
}
