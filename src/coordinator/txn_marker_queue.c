/* Queues, batching and answer classification of the transaction markers: see txn_marker_queue.h. */
#include "coordinator/txn_marker_queue.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/util.h"
#include "protocol/codec.h"
#include "protocol/messages.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000

static unsigned bucket_of(const char *id) {
    unsigned h = 5381;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++) h = h * 33 + *p;
    return h % GR_TXN_MARKERS_BUCKETS;
}

static void queue_init(struct gr_txn_marker_queue *q, int32_t broker_id) {
    q->broker_id = broker_id;
    q->head = NULL;
    q->tail = &q->head;
    q->n = 0;
}

void gr_txn_markers_init(struct gr_txn_markers *mk) {
    memset(mk, 0, sizeof *mk);
    queue_init(&mk->unknown, GR_TXN_UNKNOWN_BROKER);
    mk->append_retry_tail = &mk->append_retry;
}

void gr_txn_pending_unref(struct gr_txn_pending *txn) {
    if (!txn || --txn->refs > 0) return;
    free(txn->id);
    free(txn);
}

static void marker_free(struct gr_txn_marker *m) {
    gr_txn_pending_unref(m->txn);
    free(m->topic);
    free(m);
}

static void queue_clear(struct gr_txn_marker_queue *q) {
    while (q->head) {
        struct gr_txn_marker *m = q->head;
        q->head = m->next;
        marker_free(m);
    }
    q->tail = &q->head;
    q->n = 0;
}

static void unlist(struct gr_txn_markers *mk, struct gr_txn_pending *txn) {
    if (!txn->listed) return;
    for (struct gr_txn_pending **pp = &mk->txns[bucket_of(txn->id)]; *pp; pp = &(*pp)->next)
        if (*pp == txn) {
            *pp = txn->next;
            txn->next = NULL;
            txn->listed = false;
            mk->n_txns--;
            return;
        }
}

void gr_txn_markers_release(struct gr_txn_markers *mk) {
    queue_clear(&mk->unknown);
    for (int i = 0; i < mk->n_queues; i++) {
        queue_clear(mk->queues[i]);
        free(mk->queues[i]);
    }
    free(mk->queues);
    for (int b = 0; b < GR_TXN_MARKERS_BUCKETS; b++)
        while (mk->txns[b]) {
            struct gr_txn_pending *t = mk->txns[b];
            unlist(mk, t);
            gr_txn_pending_unref(t);
        }
    while (mk->append_retry) {
        struct gr_txn_pending *t = mk->append_retry;
        mk->append_retry = t->next;
        gr_txn_pending_unref(t);
    }
    gr_txn_markers_init(mk);
}

struct gr_txn_pending *gr_txn_markers_find(struct gr_txn_markers *mk, const char *id) {
    for (struct gr_txn_pending *t = mk->txns[bucket_of(id)]; t; t = t->next)
        if (strcmp(t->id, id) == 0) return t;
    return NULL;
}

void gr_txn_markers_cancel(struct gr_txn_markers *mk, struct gr_txn_pending *txn) {
    txn->cancelled = true;
    if (txn->listed) {
        unlist(mk, txn);
        gr_txn_pending_unref(txn); /* the table's reference */
    }
}

struct gr_txn_pending *gr_txn_markers_add_txn(struct gr_txn_markers *mk, const char *id, int64_t pid, int16_t epoch,
                                              bool commit, int32_t log_part, int32_t coord_epoch) {
    struct gr_txn_pending *old = gr_txn_markers_find(mk, id);
    if (old) gr_txn_markers_cancel(mk, old);
    struct gr_txn_pending *t = gr_calloc(1, sizeof *t);
    t->id = gr_strdup(id);
    t->pid = pid;
    t->epoch = epoch;
    t->commit = commit;
    t->log_part = log_part;
    t->coord_epoch = coord_epoch;
    t->refs = 1;
    t->listed = true;
    t->backoff_ms = BACKOFF_MIN_MS;
    unsigned b = bucket_of(id);
    t->next = mk->txns[b];
    mk->txns[b] = t;
    mk->n_txns++;
    return t;
}

void gr_txn_markers_put(struct gr_txn_markers *mk, struct gr_txn_marker_queue *q, struct gr_txn_marker *m,
                        int64_t not_before) {
    (void)mk;
    m->next = NULL;
    m->not_before = not_before;
    *q->tail = m;
    q->tail = &m->next;
    q->n++;
}

void gr_txn_markers_add_marker(struct gr_txn_markers *mk, struct gr_txn_pending *txn, const char *topic,
                               int32_t partition) {
    struct gr_txn_marker *m = gr_calloc(1, sizeof *m);
    m->txn = txn;
    txn->refs++;
    txn->left++;
    m->topic = gr_strdup(topic);
    m->partition = partition;
    m->backoff_ms = BACKOFF_MIN_MS;
    gr_txn_markers_put(mk, &mk->unknown, m, 0);
}

struct gr_txn_marker_queue *gr_txn_markers_queue(struct gr_txn_markers *mk, int32_t broker_id, bool create) {
    if (broker_id < 0) return &mk->unknown;
    for (int i = 0; i < mk->n_queues; i++)
        if (mk->queues[i]->broker_id == broker_id) return mk->queues[i];
    if (!create) return NULL;
    mk->queues = gr_realloc(mk->queues, (size_t)(mk->n_queues + 1) * sizeof *mk->queues);
    struct gr_txn_marker_queue *q = gr_calloc(1, sizeof *q);
    queue_init(q, broker_id);
    mk->queues[mk->n_queues++] = q;
    return q;
}

struct gr_txn_marker *gr_txn_markers_take(struct gr_txn_markers *mk, struct gr_txn_marker_queue *q, int64_t now,
                                          int max, int64_t *next_due) {
    (void)mk;
    struct gr_txn_marker *out = NULL, **out_tail = &out;
    int64_t due = INT64_MAX;
    int taken = 0;
    q->tail = &q->head;
    for (struct gr_txn_marker *m = q->head, *next; m; m = next) {
        next = m->next;
        if (m->txn->cancelled) {
            q->n--;
            marker_free(m);
        } else if (m->not_before <= now && taken < max) {
            q->n--;
            taken++;
            m->next = NULL;
            *out_tail = m;
            out_tail = &m->next;
        } else {
            if (m->not_before < due) due = m->not_before;
            *q->tail = m;
            q->tail = &m->next;
        }
    }
    *q->tail = NULL;
    if (next_due) *next_due = due;
    return out;
}

int32_t gr_txn_marker_next_backoff(struct gr_txn_marker *m) {
    int32_t b = m->backoff_ms > 0 ? m->backoff_ms : BACKOFF_MIN_MS;
    m->backoff_ms = GR_MIN(b * 2, BACKOFF_MAX_MS);
    return b;
}

int64_t gr_txn_marker_route_at(struct gr_txn_marker *m, int64_t now, bool retrying, bool to_sender) {
    return retrying || !to_sender ? now + gr_txn_marker_next_backoff(m) : now;
}

struct gr_txn_pending *gr_txn_markers_written(struct gr_txn_markers *mk, struct gr_txn_marker *m) {
    struct gr_txn_pending *t = m->txn, *done = NULL;
    if (t->left > 0) t->left--;
    if (t->left == 0 && !t->cancelled && t->listed) {
        unlist(mk, t); /* the table's reference passes to the caller */
        done = t;
    }
    marker_free(m);
    return done;
}

struct gr_txn_pending *gr_txn_markers_take_if_done(struct gr_txn_markers *mk, struct gr_txn_pending *txn) {
    if (txn->left > 0 || txn->cancelled || !txn->listed) return NULL;
    unlist(mk, txn);
    return txn;
}

void gr_txn_markers_drop(struct gr_txn_markers *mk, struct gr_txn_marker *m) {
    (void)mk;
    marker_free(m);
}

static int queue_remove_log_part(struct gr_txn_marker_queue *q, int32_t log_part) {
    int n = 0;
    q->tail = &q->head;
    for (struct gr_txn_marker *m = q->head, *next; m; m = next) {
        next = m->next;
        if (m->txn->log_part == log_part || m->txn->cancelled) {
            q->n--;
            marker_free(m);
            n++;
        } else {
            *q->tail = m;
            q->tail = &m->next;
        }
    }
    *q->tail = NULL;
    return n;
}

int gr_txn_markers_remove_log_part(struct gr_txn_markers *mk, int32_t log_part) {
    for (int b = 0; b < GR_TXN_MARKERS_BUCKETS; b++)
        for (struct gr_txn_pending *t = mk->txns[b], *next; t; t = next) {
            next = t->next;
            if (t->log_part == log_part) gr_txn_markers_cancel(mk, t);
        }
    struct gr_txn_pending **pp = &mk->append_retry;
    mk->append_retry_tail = pp;
    while (*pp) {
        struct gr_txn_pending *t = *pp;
        if (t->log_part == log_part) {
            *pp = t->next;
            t->cancelled = true;
            gr_txn_pending_unref(t);
        } else {
            pp = &t->next;
            mk->append_retry_tail = pp;
        }
    }
    int n = queue_remove_log_part(&mk->unknown, log_part);
    for (int i = 0; i < mk->n_queues; i++) n += queue_remove_log_part(mk->queues[i], log_part);
    return n;
}

void gr_txn_markers_retry_append(struct gr_txn_markers *mk, struct gr_txn_pending *txn, int64_t retry_at) {
    txn->next = NULL;
    txn->retry_at = retry_at;
    *mk->append_retry_tail = txn;
    mk->append_retry_tail = &txn->next;
}

struct gr_txn_pending *gr_txn_markers_take_appends(struct gr_txn_markers *mk, int64_t now, int64_t *next_due) {
    struct gr_txn_pending *out = NULL, **out_tail = &out;
    int64_t due = INT64_MAX;
    struct gr_txn_pending **pp = &mk->append_retry;
    mk->append_retry_tail = pp;
    while (*pp) {
        struct gr_txn_pending *t = *pp;
        if (t->retry_at <= now) {
            *pp = t->next;
            t->next = NULL;
            *out_tail = t;
            out_tail = &t->next;
        } else {
            if (t->retry_at < due) due = t->retry_at;
            pp = &t->next;
            mk->append_retry_tail = pp;
        }
    }
    if (next_due) *next_due = due;
    return out;
}

/* ---- the request and its answer ---- */

struct WriteTxnMarkersRequest *gr_txn_markers_build_request(struct gr_txn_marker *list, struct gr_arena *a) {
    int n = 0;
    for (struct gr_txn_marker *m = list; m; m = m->next) n++;
    if (!n) return NULL;
    struct gr_txn_marker **v = gr_arena_alloc(a, (size_t)n * sizeof *v);
    struct gr_txn_pending **txns = gr_arena_alloc(a, (size_t)n * sizeof *txns);
    int *ti = gr_arena_alloc(a, (size_t)n * sizeof *ti), *per_txn = gr_arena_alloc(a, (size_t)n * sizeof *per_txn);
    int nt = 0, i = 0;
    for (struct gr_txn_marker *m = list; m; m = m->next, i++) {
        v[i] = m;
        int j = nt - 1; /* markers of one transaction are usually adjacent */
        if (j < 0 || txns[j] != m->txn)
            for (j = 0; j < nt && txns[j] != m->txn; j++) {}
        if (j == nt) {
            txns[nt] = m->txn;
            per_txn[nt++] = 0;
        }
        ti[i] = j;
        per_txn[j]++;
    }
    struct WriteTxnMarkersRequest *req = gr_proto_new(a, &gr_desc_WriteTxnMarkersRequest);
    req->MarkersCount = nt;
    req->Markers = gr_arena_alloc(a, (size_t)nt * sizeof *req->Markers);
    int *topic_of = gr_arena_alloc(a, (size_t)n * sizeof *topic_of);
    for (int j = 0; j < nt; j++) {
        struct WriteTxnMarkersRequest_WritableTxnMarker *mk = &req->Markers[j];
        memset(mk, 0, sizeof *mk);
        mk->ProducerId = txns[j]->pid;
        mk->ProducerEpoch = txns[j]->epoch;
        mk->TransactionResult = txns[j]->commit;
        mk->CoordinatorEpoch = txns[j]->coord_epoch;
        mk->Topics = gr_arena_alloc(a, (size_t)per_txn[j] * sizeof *mk->Topics);
        mk->TopicsCount = 0;
        /* first pass: the topics and how many partitions each */
        for (i = 0; i < n; i++) {
            if (ti[i] != j) continue;
            int t = 0;
            while (t < mk->TopicsCount && strcmp(mk->Topics[t].Name, v[i]->topic) != 0) t++;
            if (t == mk->TopicsCount) {
                mk->Topics[t].Name = v[i]->topic;
                mk->Topics[t].PartitionIndexesCount = 0;
                mk->TopicsCount++;
            }
            mk->Topics[t].PartitionIndexesCount++;
            topic_of[i] = t;
        }
        for (int t = 0; t < mk->TopicsCount; t++) {
            mk->Topics[t].PartitionIndexes =
                gr_arena_alloc(a, (size_t)mk->Topics[t].PartitionIndexesCount * sizeof(int32_t));
            mk->Topics[t].PartitionIndexesCount = 0;
        }
        for (i = 0; i < n; i++) {
            if (ti[i] != j) continue;
            struct WriteTxnMarkersRequest_WritableTxnMarkerTopic *t = &mk->Topics[topic_of[i]];
            v[i]->rm = j;
            v[i]->rt = topic_of[i];
            v[i]->ri = t->PartitionIndexesCount;
            t->PartitionIndexes[t->PartitionIndexesCount++] = v[i]->partition;
        }
    }
    return req;
}

int16_t gr_txn_markers_response_error(const struct WriteTxnMarkersResponse *resp, const struct gr_txn_marker *m) {
    if (!resp) return GR_KERR_UNKNOWN_SERVER_ERROR;
    if (m->rm >= 0 && m->rm < resp->MarkersCount) {
        const struct WriteTxnMarkersResponse_WritableTxnMarkerResult *r = &resp->Markers[m->rm];
        if (r->ProducerId == m->txn->pid && m->rt >= 0 && m->rt < r->TopicsCount && r->Topics[m->rt].Name &&
            strcmp(r->Topics[m->rt].Name, m->topic) == 0 && m->ri >= 0 && m->ri < r->Topics[m->rt].PartitionsCount &&
            r->Topics[m->rt].Partitions[m->ri].PartitionIndex == m->partition)
            return r->Topics[m->rt].Partitions[m->ri].ErrorCode;
    }
    for (int i = 0; i < resp->MarkersCount; i++) {
        const struct WriteTxnMarkersResponse_WritableTxnMarkerResult *r = &resp->Markers[i];
        if (r->ProducerId != m->txn->pid) continue;
        for (int t = 0; t < r->TopicsCount; t++) {
            if (!r->Topics[t].Name || strcmp(r->Topics[t].Name, m->topic) != 0) continue;
            for (int p = 0; p < r->Topics[t].PartitionsCount; p++)
                if (r->Topics[t].Partitions[p].PartitionIndex == m->partition) return r->Topics[t].Partitions[p].ErrorCode;
        }
    }
    return GR_KERR_UNKNOWN_SERVER_ERROR;
}

enum gr_txn_marker_outcome gr_txn_marker_outcome_of(int16_t error) {
    switch (error) {
    case GR_KERR_NONE:
    case GR_KERR_UNSUPPORTED_FOR_MESSAGE_FORMAT:
    case GR_KERR_UNSUPPORTED_VERSION: return GR_TXN_MARKER_WRITTEN;
    case GR_KERR_INVALID_PRODUCER_EPOCH:
    case GR_KERR_TRANSACTION_COORDINATOR_FENCED: return GR_TXN_MARKER_CANCEL;
    default: return GR_TXN_MARKER_RETRY;
    }
}
