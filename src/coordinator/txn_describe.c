/* KIP-664's read-only views of the transaction coordinator (Kafka 3.9's
 * TransactionCoordinator.handleDescribeTransactions / handleListTransactions and
 * TransactionStateManager.listTransactionStates): see txn_coordinator.h. Reads the id table
 * under tc->mu (txn_internal.h rule 1) and copies what it answers; never blocks on I/O. */
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/util.h"
#include "coordinator/txn_internal.h"

int16_t gr_txn_describe(struct gr_txn_coordinator *tc, const char *id, struct gr_txn_description *out) {
    memset(out, 0, sizeof *out);
    out->producer_id = -1;
    out->producer_epoch = -1;
    out->start_ts = -1;
    if (!tc) return GR_KERR_COORDINATOR_NOT_AVAILABLE;
    if (!id || !*id) return GR_KERR_INVALID_REQUEST;
    pthread_mutex_lock(&tc->mu);
    int16_t err = tc->stopping ? GR_KERR_COORDINATOR_NOT_AVAILABLE
                               : txn_part_status_locked(tc, gr_txn_partition_of(tc, id), NULL);
    struct txn_meta *m = err == GR_KERR_NONE ? txn_find_locked(tc, id) : NULL;
    if (err == GR_KERR_NONE && (!m || m->state == GR_TXN_DEAD)) err = GR_KERR_TRANSACTIONAL_ID_NOT_FOUND;
    if (err == GR_KERR_NONE) {
        out->state = gr_txn_state_name(m->state);
        out->timeout_ms = m->timeout_ms;
        out->start_ts = m->start_ts;
        out->producer_id = m->pid;
        out->producer_epoch = m->epoch;
        out->n_parts = m->n_parts;
        out->parts = m->n_parts > 0 ? txn_parts_dup(m->parts, m->n_parts) : NULL;
    }
    pthread_mutex_unlock(&tc->mu);
    return err;
}

void gr_txn_description_release(struct gr_txn_description *d) {
    if (d->parts) txn_parts_free(d->parts, d->n_parts);
    d->parts = NULL;
    d->n_parts = 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* pids: f's producer ids sorted (Kafka's set; a request may carry millions) */
static bool include(const struct txn_meta *m, const struct gr_txn_list_filter *f, const int64_t *pids, int64_t now) {
    if (m->state == GR_TXN_DEAD) return false; /* being expired (Kafka filters it too) */
    if (f->n_producer_ids > 0 && !bsearch(&m->pid, pids, (size_t)f->n_producer_ids, sizeof *pids, cmp_i64))
        return false;
    if (f->filter_states && !(f->state_mask & (1u << m->state))) return false;
    if (f->duration_ms >= 0 && now - m->start_ts <= f->duration_ms) return false;
    return true;
}

int16_t gr_txn_list(struct gr_txn_coordinator *tc, const struct gr_txn_list_filter *f, struct gr_txn_listing **out,
                    int *n) {
    *out = NULL;
    *n = 0;
    if (!tc) return GR_KERR_COORDINATOR_NOT_AVAILABLE;
    int16_t err = GR_KERR_NONE;
    int cap = 0;
    int64_t now = gr_wall_ms();
    int64_t *pids = NULL;
    if (f->n_producer_ids > 0) {
        pids = gr_malloc((size_t)f->n_producer_ids * sizeof *pids);
        memcpy(pids, f->producer_ids, (size_t)f->n_producer_ids * sizeof *pids);
        qsort(pids, (size_t)f->n_producer_ids, sizeof *pids, cmp_i64);
    }
    pthread_mutex_lock(&tc->mu);
    if (tc->stopping) err = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    for (int32_t p = 0; err == GR_KERR_NONE && p < tc->nparts; p++)
        if (tc->parts[p].state == P_LOADING) err = GR_KERR_COORDINATOR_LOAD_IN_PROGRESS;
    for (int b = 0; err == GR_KERR_NONE && b < NB; b++) {
        for (struct txn_meta *m = tc->buckets[b]; m; m = m->next) {
            if (m->log_part < 0 || m->log_part >= tc->nparts || tc->parts[m->log_part].state != P_OWNED) continue;
            if (!include(m, f, pids, now)) continue;
            if (*n == cap) {
                cap = cap ? cap * 2 : 16;
                *out = gr_realloc(*out, (size_t)cap * sizeof **out);
            }
            (*out)[(*n)++] = (struct gr_txn_listing){
                .transactional_id = gr_strdup(m->id), .producer_id = m->pid, .state = gr_txn_state_name(m->state)};
        }
    }
    pthread_mutex_unlock(&tc->mu);
    free(pids);
    return err;
}

void gr_txn_listings_free(struct gr_txn_listing *l, int n) {
    for (int i = 0; i < n; i++) free(l[i].transactional_id);
    free(l);
}
