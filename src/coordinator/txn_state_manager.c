/* Kafka's TransactionStateManager: the table of transactional ids, writes to
 * __transaction_state, loading and unloading its partitions, timeouts and expiry. Locking:
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
#include "coordinator/coord_records.h"
#include "coordinator/producer_id_manager.h"
#include "coordinator/txn_internal.h"
#include "net/kafka_client.h"
#include "protocol/messages.h"
#include "replication/replica_manager.h"
#include "storage/batch.h"

static unsigned txn_bucket(const char *id) {
    unsigned h = 5381;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++) h = h * 33 + *p;
    return h % NB;
}

struct txn_meta *txn_find_locked(struct gr_txn_coordinator *tc, const char *id) {
    for (struct txn_meta *m = tc->buckets[txn_bucket(id)]; m; m = m->next)
        if (strcmp(m->id, id) == 0) return m;
    return NULL;
}

void txn_parts_free(struct gr_txn_tp *p, int n) {
    for (int i = 0; i < n; i++) free(p[i].topic);
    free(p);
}

struct gr_txn_tp *txn_parts_dup(const struct gr_txn_tp *p, int n) {
    struct gr_txn_tp *c = gr_calloc((size_t)n + 1, sizeof *c);
    for (int i = 0; i < n; i++) {
        c[i].topic = gr_strdup(p[i].topic);
        c[i].partition = p[i].partition;
    }
    return c;
}

void txn_meta_free(struct txn_meta *m) {
    txn_parts_free(m->parts, m->n_parts);
    free(m->id);
    free(m);
}

struct txn_meta *txn_meta_new_locked(struct gr_txn_coordinator *tc, const char *id, int32_t log_part) {
    struct txn_meta *m = gr_calloc(1, sizeof *m);
    m->id = gr_strdup(id);
    m->log_part = log_part;
    m->pid = -1;
    m->epoch = -1;
    m->last_epoch = -1;
    m->last_pid = -1;
    m->state = GR_TXN_EMPTY;
    unsigned h = txn_bucket(id);
    m->next = tc->buckets[h];
    tc->buckets[h] = m;
    return m;
}

void txn_meta_remove_locked(struct gr_txn_coordinator *tc, struct txn_meta *m) {
    for (struct txn_meta **pp = &tc->buckets[txn_bucket(m->id)]; *pp; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            txn_meta_free(m);
            return;
        }
}

bool txn_has_part(const struct txn_meta *m, const char *topic, int32_t p) {
    for (int i = 0; i < m->n_parts; i++)
        if (m->parts[i].partition == p && strcmp(m->parts[i].topic, topic) == 0) return true;
    return false;
}


/* NONE if this broker coordinates part p now (and its epoch), else the error. */
int16_t txn_part_status_locked(struct gr_txn_coordinator *tc, int32_t p, int32_t *epoch) {
    if (tc->stopping || p < 0 || p >= tc->nparts) return GR_KERR_NOT_COORDINATOR;
    if (tc->parts[p].state == P_LOADING) return GR_KERR_COORDINATOR_LOAD_IN_PROGRESS;
    if (tc->parts[p].state != P_OWNED) return GR_KERR_NOT_COORDINATOR;
    if (epoch) *epoch = tc->parts[p].epoch;
    return GR_KERR_NONE;
}

/* ---- writes to __transaction_state ---- */



static int16_t txn_map_append_error(int16_t e) {
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


void txn_apply_record(struct txn_meta *m, const struct gr_txn_record *r) {
    m->pid = r->producer_id;
    m->epoch = r->producer_epoch;
    m->timeout_ms = r->timeout_ms;
    m->state = r->state;
    txn_parts_free(m->parts, m->n_parts);
    m->parts = txn_parts_dup(r->parts, r->n_parts);
    m->n_parts = m->cap_parts = r->n_parts;
    m->update_ts = r->update_ts;
    m->start_ts = r->start_ts;
}

static void txn_write_done(void *ctx, int16_t error, int64_t base, int64_t lso) {
    (void)base;
    (void)lso;
    struct txn_write *w = ctx;
    struct gr_txn_coordinator *tc = w->tc;
    int16_t err = txn_map_append_error(error);
    pthread_mutex_lock(&tc->mu);
    struct txn_meta *m = txn_find_locked(tc, w->rec.transactional_id);
    int32_t ep = -1;
    int16_t st = txn_part_status_locked(tc, w->log_part, &ep);
    if (err == GR_KERR_NONE && (st != GR_KERR_NONE || ep != w->coord_epoch)) err = GR_KERR_NOT_COORDINATOR;
    bool route = false;
    if (m && m->pending_write != w) {
        m = NULL; /* an entry loaded again since this write was issued: not ours to change */
        if (err == GR_KERR_NONE) err = GR_KERR_NOT_COORDINATOR;
    }
    if (m) {
        m->pending = false;
        m->pending_write = NULL;
        if (err == GR_KERR_NONE) {
            gr_debug(LOGGER, "transactional id %s: %s -> %s (producer %" PRId64 " epoch %d)", m->id,
                     gr_txn_state_name(m->state), gr_txn_state_name(w->rec.state), w->rec.producer_id,
                     w->rec.producer_epoch);
            txn_apply_record(m, &w->rec);
            m->last_epoch = w->last_epoch;
            m->last_pid = w->last_pid;
            if (w->markers) txn_markers_add_locked(tc, m, w->coord_epoch, true);
            route = w->markers;
        }
    }
    pthread_mutex_unlock(&tc->mu);
    if (route) txn_markers_route_new(tc); /* before the answer: the markers leave first */
    if (w->cb) w->cb(w->ctx, err == GR_KERR_NONE ? w->ok_error : err, w->rec.producer_id, w->rec.producer_epoch);
    txn_parked_retry(tc, w->rec.transactional_id); /* an AddPartitionsToTxn waiting for this write */
    gr_txn_record_free(&w->rec);
    free(w->batch);
    free(w);
}

/* Prepares the write of m's target state rec (copied); m->pending set. Call under mu; issue
 * with write_issue after unlocking. */
struct txn_write *txn_write_prepare_locked(struct gr_txn_coordinator *tc, struct txn_meta *m, int32_t coord_epoch,
                                          const struct gr_txn_record *rec, gr_txn_cb cb, void *ctx) {
    struct txn_write *w = gr_calloc(1, sizeof *w);
    w->tc = tc;
    w->last_epoch = m->last_epoch; /* unchanged unless an InitProducerId bump sets it */
    w->last_pid = m->last_pid;
    w->rec = *rec;
    w->rec.transactional_id = gr_strdup(m->id);
    w->rec.parts = txn_parts_dup(rec->parts, rec->n_parts);
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
    m->pending_write = w;
    return w;
}

void txn_write_issue(struct txn_write *w) {
    gr_rm_append(w->tc->rm, GR_TXN_TOPIC, w->log_part, w->batch, w->len, -1, 30000, txn_write_done, w);
}

struct gr_txn_record txn_target_of(const struct txn_meta *m) {
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

/* ---- loading, timeouts, expiry (background thread) ---- */

/* Applies the records of one __transaction_state batch to the private list *loaded (the last
 * record of an id wins, a tombstone deletes it). Compressed or not: a compression.type other than
 * "producer" on __transaction_state stores our own writes compressed, and Kafka's loader
 * decompresses them. A batch that cannot be read is skipped with a warning. */
static void txn_load_batch(struct gr_txn_coordinator *tc, int32_t p, const struct gr_batch_info *bi, const uint8_t *bp,
                           struct txn_meta **loaded) {
    struct gr_coord_records cr;
    struct gr_batch_rec_view rec;
    if (gr_coord_records_init(&cr, bp, bi) != 0) {
        gr_warn(LOGGER,
                "[TransactionCoordinator id=%d] skipping an unreadable batch (codec %d) at offset %" PRId64 " of %s-%d",
                tc->b->broker_id, gr_batch_info_compression(bi), bi->BaseOffset, GR_TXN_TOPIC, p);
        gr_coord_records_release(&cr);
        return;
    }
    while (gr_batch_rec_iter_next(&cr.it, &rec) == 1) {
        struct gr_txn_record r;
        if (gr_txn_log_decode(rec.Key, rec.Key ? (size_t)rec.KeyLength : 0, rec.Value,
                              rec.Value ? (size_t)rec.ValueLength : 0, &r) != 0)
            continue;
        struct txn_meta **pp = loaded;
        while (*pp && strcmp((*pp)->id, r.transactional_id) != 0) pp = &(*pp)->next;
        if (r.tombstone) {
            if (*pp) {
                struct txn_meta *d = *pp;
                *pp = d->next;
                txn_meta_free(d);
            }
        } else {
            if (!*pp) {
                *pp = gr_calloc(1, sizeof **pp);
                (*pp)->id = gr_strdup(r.transactional_id);
                (*pp)->log_part = p;
                (*pp)->last_epoch = -1;
            }
            txn_apply_record(*pp, &r);
        }
        gr_txn_record_free(&r);
    }
    gr_coord_records_release(&cr);
}

static void txn_load_partition(struct gr_txn_coordinator *tc, int32_t p, int32_t epoch) {
    int64_t off = 0;
    struct txn_meta *loaded = NULL; /* private list, merged at the end */
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
            while (loaded) { struct txn_meta *n = loaded->next; txn_meta_free(loaded); loaded = n; }
            return;
        }
        if (!res.len) { free(res.data); break; }
        struct gr_batch_iter it;
        struct gr_batch_info bi;
        const uint8_t *bp;
        gr_batch_iter_init(&it, res.data, res.len);
        while (gr_batch_iter_next(&it, &bi, &bp) == 1) {
            if (!(bi.Attributes & GR_BATCH_ATTR_CONTROL)) txn_load_batch(tc, p, &bi, bp, &loaded);
            off = gr_batch_info_last_offset(&bi) + 1;
        }
        free(res.data);
        if (off >= res.log_end_offset) break;
    }
    pthread_mutex_lock(&tc->mu);
    if (tc->parts[p].state == P_LOADING && tc->parts[p].epoch == epoch) {
        int n = 0;
        while (loaded) {
            struct txn_meta *m = loaded;
            loaded = m->next;
            struct txn_meta *old = txn_find_locked(tc, m->id);
            if (old) txn_meta_remove_locked(tc, old);
            unsigned h = txn_bucket(m->id);
            m->next = tc->buckets[h];
            tc->buckets[h] = m;
            if (m->state == GR_TXN_PREPARE_COMMIT || m->state == GR_TXN_PREPARE_ABORT) txn_markers_add_locked(tc, m, epoch, false);
            n++;
        }
        tc->parts[p].state = P_OWNED;
        gr_info(LOGGER, "[TransactionCoordinator id=%d] loaded %d transactional id(s) of %s-%d (coordinator epoch %d)",
                tc->b->broker_id, n, GR_TXN_TOPIC, p, epoch);
    }
    pthread_mutex_unlock(&tc->mu);
    while (loaded) { struct txn_meta *n = loaded->next; txn_meta_free(loaded); loaded = n; }
}

static void txn_unload_locked(struct gr_txn_coordinator *tc, int32_t p) {
    txn_markers_remove_log_part_locked(tc, p);
    for (int b = 0; b < NB; b++)
        for (struct txn_meta **pp = &tc->buckets[b]; *pp;) {
            if ((*pp)->log_part == p) {
                struct txn_meta *d = *pp;
                *pp = d->next;
                txn_meta_free(d);
            } else {
                pp = &(*pp)->next;
            }
        }
    tc->parts[p].state = P_NONE;
}

static void txn_poll_partitions(struct gr_txn_coordinator *tc) {
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
        struct txn_tpart *tp = &tc->parts[p];
        bool load = false;
        /* the coordinator epoch is the leader epoch at which this broker became leader (Kafka
         * 2.7 calls onElection only for a new leader): a LeaderAndIsr that keeps it leader at a
         * higher epoch (the controller shrinking the ISR of a dead follower, a reassignment)
         * changes nothing here -- reloading answered COORDINATOR_LOAD_IN_PROGRESS for the whole
         * partition (librdkafka then waits 500 ms) and dropped its queued markers */
        if (leader && (tp->state == P_NONE || tp->epoch != info.elected_epoch)) {
            if (tp->state != P_NONE) txn_unload_locked(tc, p);
            tp->state = P_LOADING;
            tp->epoch = info.elected_epoch;
            load = true;
        } else if (!leader && tp->state != P_NONE) {
            gr_info(LOGGER, "[TransactionCoordinator id=%d] unloading %s-%d", tc->b->broker_id, GR_TXN_TOPIC, p);
            txn_unload_locked(tc, p);
        }
        pthread_mutex_unlock(&tc->mu);
        if (load) txn_load_partition(tc, p, info.elected_epoch);
    }
}

/* Aborts timed-out transactions (fencing the producer: epoch + 1), tombstones expired ids. */
static void txn_timers(struct gr_txn_coordinator *tc) {
    int64_t now = gr_wall_ms();
    txn_parked_expire(tc, gr_mono_ms(), false);
    struct txn_write **ws = NULL; /* every timed-out and expired id of the pass (Kafka has no cap) */
    int nw = 0, cap = 0;
    pthread_mutex_lock(&tc->mu);
    bool do_abort = now >= tc->next_abort_check, do_expire = now >= tc->next_expire_check;
    if (do_abort) tc->next_abort_check = now + tc->cfg.abort_interval_ms;
    if (do_expire) tc->next_expire_check = now + tc->cfg.remove_expired_interval_ms;
    for (int b = 0; b < NB; b++)
        for (struct txn_meta *m = tc->buckets[b]; m; m = m->next) {
            int32_t ep;
            if (m->pending || txn_part_status_locked(tc, m->log_part, &ep) != GR_KERR_NONE) continue;
            if (nw == cap) {
                cap = cap ? 2 * cap : 64;
                ws = gr_realloc(ws, (size_t)cap * sizeof *ws);
            }
            struct gr_txn_record r = txn_target_of(m);
            if (do_abort && m->state == GR_TXN_ONGOING && m->start_ts + m->timeout_ms < now) {
                gr_info(LOGGER, "aborting transaction of %s (producer %" PRId64 " epoch %d): timed out after %d ms",
                        m->id, m->pid, m->epoch, m->timeout_ms);
                r.producer_epoch = (int16_t)(m->epoch + 1);
                r.state = GR_TXN_PREPARE_ABORT;
                ws[nw++] = txn_write_prepare_locked(tc, m, ep, &r, NULL, NULL);
            } else if (do_expire &&
                       (m->state == GR_TXN_EMPTY || m->state == GR_TXN_COMPLETE_COMMIT ||
                        m->state == GR_TXN_COMPLETE_ABORT) &&
                       m->update_ts <= now - tc->cfg.id_expiration_ms) {
                r.state = GR_TXN_DEAD; /* written as a tombstone below */
                struct txn_write *w = txn_write_prepare_locked(tc, m, ep, &r, NULL, NULL);
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
    for (int i = 0; i < nw; i++) txn_write_issue(ws[i]);
    free(ws);
    /* Dead ids are dropped from memory once their tombstone is written */
    pthread_mutex_lock(&tc->mu);
    for (int b = 0; b < NB; b++)
        for (struct txn_meta *m = tc->buckets[b], *next; m; m = next) {
            next = m->next;
            if (m->state == GR_TXN_DEAD && !m->pending) txn_meta_remove_locked(tc, m);
        }
    pthread_mutex_unlock(&tc->mu);
}

void *txn_bg_thread(void *arg) {
    struct gr_txn_coordinator *tc = arg;
    pthread_mutex_lock(&tc->mu);
    while (!tc->stopping) {
        pthread_mutex_unlock(&tc->mu);
        txn_poll_partitions(tc);
        txn_timers(tc);
        pthread_mutex_lock(&tc->mu);
        struct timespec ts = gr_timespec_after_ms(CLOCK_REALTIME, 100);
        if (!tc->stopping) pthread_cond_timedwait(&tc->cond, &tc->mu, &ts);
    }
    pthread_mutex_unlock(&tc->mu);
    return NULL;
}
