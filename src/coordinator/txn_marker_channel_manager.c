/* Kafka's TransactionMarkerChannelManager (+ its TransactionMarkerRequestCompletionHandler): writes
 * the markers of Prepare* transactions to the leaders of their partitions, then Complete*.
 *
 * The bookkeeping (queues, batching, outcomes) is txn_marker_queue.{h,c}; this file adds the
 * threads, the metadata-cache lookups, the WriteTxnMarkers calls over the one Kafka client and the
 * coordinator's checks. Threads:
 *  - the manager thread routes markers without a destination (those of a load, and those whose
 *    leader was unknown: re-resolved from the metadata cache with a growing delay) to the queue
 *    of their leader, and retries the Complete* writes that failed (Kafka's
 *    txnLogAppendRetryQueue); the markers of a Prepare* write are routed by the thread that
 *    completes the write (txn_markers_route_new), one wake-up less on the commit's path;
 *  - one sender thread per destination broker (created the first time a marker goes there) sends
 *    everything due in its queue, markers of many transactions, as one WriteTxnMarkers request,
 *    one request in flight per broker (Kafka: max.in.flight 1 on its marker NetworkClient). The
 *    brokers are served in parallel, so an unreachable or stuck leader delays only the markers
 *    it leads. A partition that fails is re-routed alone (its current leader, a growing delay);
 *    the transaction's other partitions complete.
 *
 * Locking: cm->mu guards cm (and cm->mk); it is a leaf under tc->mu (txn_internal.h rule 1): code
 * holding tc->mu may take it, never the reverse. Metadata-cache lookups, network calls and storage
 * writes run with neither held. A marker is checked against the coordinator (the partition of
 * __transaction_state still led here at the transaction's coordinator epoch) before it is sent and
 * when it is answered; a marker of an emigrated partition is dropped, as Kafka does.
 *
 * Timeouts: the leader of a data partition waits request.timeout.ms for the marker's replication
 * (handle_txn.c); this client waits that plus GR_TXN_MARKER_TIMEOUT_MARGIN_MS, so it never gives up
 * (and resends the marker) while the leader's first attempt is still pending. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "coordinator/txn_internal.h"
#include "coordinator/txn_marker_queue.h"
#include "net/kafka_client.h"
#include "protocol/arena.h"
#include "protocol/messages.h"

#define MAX_MARKERS_PER_REQUEST 1000
#define GR_TXN_MARKER_TIMEOUT_MARGIN_MS 5000
#define APPEND_RETRY_MIN_MS 100
#define APPEND_RETRY_MAX_MS 1000

struct txn_marker_sender { /* one per destination broker */
    struct txn_marker_channel_manager *cm;
    int32_t broker_id;
    struct gr_txn_marker_queue *q; /* in cm->mk */
    pthread_t th;
    pthread_cond_t cond; /* with cm->mu: markers queued, or stopping */
    struct gr_kafka_client *kc;
    bool failing; /* the last call failed (one log line per outage) */
};

struct txn_marker_channel_manager {
    struct gr_txn_coordinator *tc;
    pthread_mutex_t mu;
    pthread_cond_t cond; /* the manager thread: markers to route, appends to retry, stopping */
    pthread_t th;
    bool stopping, started;
    struct gr_txn_markers mk;
    struct txn_marker_sender **senders;
    int n_senders;
    int32_t request_timeout_ms, connect_timeout_ms;
};

static void *sender_thread(void *arg);

static int timed_wait(pthread_cond_t *c, pthread_mutex_t *mu, int64_t now, int64_t due) {
    if (due == INT64_MAX) return pthread_cond_wait(c, mu);
    struct timespec ts = gr_timespec_after_ms(CLOCK_REALTIME, due > now ? due - now : 0);
    return pthread_cond_timedwait(c, mu, &ts);
}

/* The sender of broker_id, created (with its thread) when missing. cm->mu held. NULL once
 * stopping or when the thread cannot be created (the markers then wait in the queue). */
static struct txn_marker_sender *sender_of_locked(struct txn_marker_channel_manager *cm, int32_t broker_id) {
    for (int i = 0; i < cm->n_senders; i++)
        if (cm->senders[i]->broker_id == broker_id) return cm->senders[i];
    if (cm->stopping) return NULL;
    struct txn_marker_sender *s = gr_calloc(1, sizeof *s);
    s->cm = cm;
    s->broker_id = broker_id;
    s->q = gr_txn_markers_queue(&cm->mk, broker_id, true);
    pthread_cond_init(&s->cond, NULL);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "[TxnMarkerSender-%d-%d]", cm->tc->b->broker_id, broker_id);
    struct gr_kafka_client_config kcfg = {.client_id = "gregor-txn-markers",
                                          .logger = LOGGER,
                                          .log_prefix = prefix,
                                          .connect_timeout_ms = cm->connect_timeout_ms,
                                          .request_timeout_ms = cm->request_timeout_ms};
    s->kc = gr_kafka_client_new(&kcfg);
    if (pthread_create(&s->th, NULL, sender_thread, s) != 0) {
        gr_error(LOGGER, "cannot start the marker sender for broker %d", broker_id);
        gr_kafka_client_free(s->kc);
        pthread_cond_destroy(&s->cond);
        free(s);
        return NULL;
    }
    cm->senders = gr_realloc(cm->senders, (size_t)(cm->n_senders + 1) * sizeof *cm->senders);
    cm->senders[cm->n_senders++] = s;
    return s;
}

/* ---- routing ---- */

enum { DEST_UNKNOWN = -1, DEST_GONE = -2 };

/* The broker to send the marker of topic-partition to: its leader when known and reachable on
 * the inter-broker listener, DEST_UNKNOWN otherwise, DEST_GONE for a deleted topic (Kafka skips
 * such partitions: the topic is likely deleted already). No lock held. */
static int32_t resolve_dest(struct gr_txn_coordinator *tc, const char *topic, int32_t partition) {
    struct gr_broker *b = tc->b;
    struct gr_mdc_partition part;
    if (!gr_mdc_get_partition(b->metadata, topic, partition, &part))
        return gr_mdc_contains_topic(b->metadata, topic) ? DEST_UNKNOWN : DEST_GONE;
    int32_t leader = part.leader;
    gr_mdc_partition_release(&part);
    if (leader < 0) return DEST_UNKNOWN;
    const struct gr_listener *l = b->cfg ? gr_config_inter_broker_listener(b->cfg) : NULL;
    char host[256];
    int32_t port;
    if (!gr_mdc_get_endpoint(b->metadata, leader, l ? l->name : "PLAINTEXT", host, sizeof host, &port))
        return DEST_UNKNOWN;
    return leader;
}

static void complete_txn(struct txn_marker_channel_manager *cm, struct gr_txn_pending *txn);

/* Queues each marker of list (taken before, no lock held) for its current leader (Kafka's
 * addTxnMarkersToBrokerQueue). retrying: the marker just failed, so it waits its backoff even
 * when its leader is known; a marker without a known leader, or whose broker has no sender
 * (its thread could not be started), always waits its backoff (gr_txn_marker_route_at). */
static void route(struct txn_marker_channel_manager *cm, struct gr_txn_marker *list, bool retrying) {
    int n = 0;
    for (struct gr_txn_marker *m = list; m; m = m->next) n++;
    if (!n) return;
    int32_t *dest = gr_calloc((size_t)n, sizeof *dest);
    int i = 0;
    for (struct gr_txn_marker *m = list; m; m = m->next) dest[i++] = resolve_dest(cm->tc, m->topic, m->partition);
    struct gr_txn_pending *done = NULL;
    int64_t now = gr_mono_ms();
    pthread_mutex_lock(&cm->mu);
    i = 0;
    for (struct gr_txn_marker *m = list, *next; m; m = next, i++) {
        next = m->next;
        if (dest[i] == DEST_GONE) {
            gr_info(LOGGER, "no marker for %s-%d of %s: the topic is deleted", m->topic, m->partition, m->txn->id);
            struct gr_txn_pending *t = gr_txn_markers_written(&cm->mk, m);
            if (t) {
                t->next = done;
                done = t;
            }
            continue;
        }
        struct txn_marker_sender *s = dest[i] >= 0 ? sender_of_locked(cm, dest[i]) : NULL;
        gr_txn_markers_put(&cm->mk, s ? s->q : &cm->mk.unknown, m, gr_txn_marker_route_at(m, now, retrying, s != NULL));
        if (s) pthread_cond_signal(&s->cond);
    }
    if (cm->mk.unknown.n) pthread_cond_signal(&cm->cond);
    pthread_mutex_unlock(&cm->mu);
    free(dest);
    while (done) {
        struct gr_txn_pending *t = done;
        done = t->next;
        complete_txn(cm, t);
    }
}

/* ---- Complete* (Kafka's writeTxnCompletion / tryAppendToLog) ---- */

struct complete_ctx {
    struct txn_marker_channel_manager *cm;
    struct gr_txn_pending *txn;
};

static void retry_append(struct txn_marker_channel_manager *cm, struct gr_txn_pending *txn) {
    pthread_mutex_lock(&cm->mu);
    if (cm->stopping || txn->cancelled) {
        pthread_mutex_unlock(&cm->mu);
        gr_txn_pending_unref(txn);
        return;
    }
    int32_t b = txn->backoff_ms < APPEND_RETRY_MIN_MS ? APPEND_RETRY_MIN_MS : txn->backoff_ms;
    txn->backoff_ms = GR_MIN(b * 2, APPEND_RETRY_MAX_MS);
    gr_txn_markers_retry_append(&cm->mk, txn, gr_mono_ms() + b);
    pthread_cond_signal(&cm->cond);
    pthread_mutex_unlock(&cm->mu);
}

static void complete_done(void *ctx, int16_t error, int64_t pid, int16_t epoch) {
    (void)pid;
    (void)epoch;
    struct complete_ctx *c = ctx;
    struct gr_txn_pending *txn = c->txn;
    struct txn_marker_channel_manager *cm = c->cm;
    free(c);
    switch (error) {
    case GR_KERR_NONE:
        gr_debug(LOGGER, "completed the transaction of %s (producer %" PRId64 " epoch %d)", txn->id, txn->pid,
                 txn->epoch);
        gr_txn_pending_unref(txn);
        return;
    case GR_KERR_NOT_COORDINATOR:
    case GR_KERR_COORDINATOR_LOAD_IN_PROGRESS: /* the loader resumes it */
        gr_info(LOGGER, "no longer the coordinator of %s (%s): not writing its completion", txn->id,
                gr_kerr_name(error));
        gr_txn_pending_unref(txn);
        return;
    default: /* COORDINATOR_NOT_AVAILABLE (not enough replicas, timeout, ...) or unexpected: retry */
        gr_info(LOGGER, "cannot write the completion of %s (%s): retrying", txn->id, gr_kerr_name(error));
        retry_append(cm, txn);
    }
}

/* Every marker of txn is written: write Complete* if this broker still coordinates it at the
 * transaction's coordinator epoch and the id is still in that Prepare*. Takes over the caller's
 * reference on txn. No lock held. */
static void complete_txn(struct txn_marker_channel_manager *cm, struct gr_txn_pending *txn) {
    struct gr_txn_coordinator *tc = cm->tc;
    struct txn_write *w = NULL;
    bool later = false;
    pthread_mutex_lock(&tc->mu);
    int32_t ep = -1;
    int16_t st = txn_part_status_locked(tc, txn->log_part, &ep);
    struct txn_meta *m = st == GR_KERR_NONE ? txn_find_locked(tc, txn->id) : NULL;
    int want = txn->commit ? GR_TXN_PREPARE_COMMIT : GR_TXN_PREPARE_ABORT;
    if (st != GR_KERR_NONE || ep != txn->coord_epoch) {
        gr_info(LOGGER, "no longer the coordinator of %s at epoch %d (%s): not writing its completion", txn->id,
                txn->coord_epoch, st != GR_KERR_NONE ? gr_kerr_name(st) : "new epoch");
    } else if (!m || m->pid != txn->pid || m->epoch != txn->epoch || m->state != want) {
        gr_info(LOGGER, "the transaction of %s changed while its markers were written: not writing its completion",
                txn->id);
    } else if (m->pending) {
        later = true;
    } else {
        struct complete_ctx *c = gr_calloc(1, sizeof *c);
        c->cm = cm;
        c->txn = txn;
        /* the producer's next transaction already waits: its Ongoing replaces Complete* */
        w = txn_parked_fold_locked(tc, m, ep, complete_done, c);
        if (!w) {
            struct gr_txn_record r = txn_target_of(m);
            r.state = txn->commit ? GR_TXN_COMPLETE_COMMIT : GR_TXN_COMPLETE_ABORT;
            r.n_parts = 0;
            w = txn_write_prepare_locked(tc, m, ep, &r, complete_done, c);
        }
    }
    pthread_mutex_unlock(&tc->mu);
    if (w)
        txn_write_issue(w);
    else if (later)
        retry_append(cm, txn);
    else
        gr_txn_pending_unref(txn);
}

/* ---- the sender of one broker ---- */

/* Is txn still this coordinator's, at its coordinator epoch? tc->mu held. */
static bool txn_current_locked(struct gr_txn_coordinator *tc, const struct gr_txn_pending *txn) {
    int32_t ep = -1;
    return txn_part_status_locked(tc, txn->log_part, &ep) == GR_KERR_NONE && ep == txn->coord_epoch;
}

/* Drops (cancelling their transactions) the markers of list whose transaction this broker no
 * longer coordinates at its epoch; returns the rest. No lock held. */
static struct gr_txn_marker *drop_emigrated(struct txn_marker_channel_manager *cm, struct gr_txn_marker *list) {
    int n = 0;
    for (struct gr_txn_marker *m = list; m; m = m->next) n++;
    bool *ok = gr_calloc((size_t)n + 1, sizeof *ok);
    pthread_mutex_lock(&cm->tc->mu);
    int i = 0;
    for (struct gr_txn_marker *m = list; m; m = m->next) ok[i++] = txn_current_locked(cm->tc, m->txn);
    pthread_mutex_unlock(&cm->tc->mu);
    struct gr_txn_marker *keep = NULL, **tail = &keep;
    pthread_mutex_lock(&cm->mu);
    i = 0;
    for (struct gr_txn_marker *m = list, *next; m; m = next, i++) {
        next = m->next;
        if (ok[i] && !m->txn->cancelled) {
            m->next = NULL;
            *tail = m;
            tail = &m->next;
        } else {
            if (!m->txn->cancelled)
                gr_info(LOGGER, "no longer the coordinator of %s at epoch %d: dropping its markers", m->txn->id,
                        m->txn->coord_epoch);
            gr_txn_markers_cancel(&cm->mk, m->txn);
            gr_txn_markers_drop(&cm->mk, m);
        }
    }
    pthread_mutex_unlock(&cm->mu);
    free(ok);
    return keep;
}

/* Sends list (taken from s's queue) as one WriteTxnMarkers request and settles every marker:
 * written, re-routed, or dropped with its transaction. No lock held. */
static void send_round(struct txn_marker_sender *s, struct gr_txn_marker *list) {
    struct txn_marker_channel_manager *cm = s->cm;
    struct gr_broker *b = cm->tc->b;
    list = drop_emigrated(cm, list);
    /* markers whose leader moved while they waited here (e.g. behind a call to a stopped broker)
     * go to their new leader instead */
    struct gr_txn_marker *moved = NULL, **mtail = &moved, **pp = &list;
    while (*pp) {
        struct gr_txn_marker *m = *pp;
        if (resolve_dest(cm->tc, m->topic, m->partition) == s->broker_id) {
            pp = &m->next;
            continue;
        }
        *pp = m->next;
        m->next = NULL;
        *mtail = m;
        mtail = &m->next;
    }
    route(cm, moved, false);
    if (!list) return;
    struct gr_arena a;
    gr_arena_init(&a);
    struct WriteTxnMarkersRequest *req = gr_txn_markers_build_request(list, &a);
    char host[256];
    int32_t port;
    const struct gr_listener *l = b->cfg ? gr_config_inter_broker_listener(b->cfg) : NULL;
    void *body = NULL;
    uint8_t *frame = NULL;
    int rc = -EHOSTUNREACH;
    if (gr_mdc_get_endpoint(b->metadata, s->broker_id, l ? l->name : "PLAINTEXT", host, sizeof host, &port)) {
        gr_kafka_client_set_target(s->kc, s->broker_id, host, port);
        rc = gr_kafka_client_call(s->kc, GR_API_WRITE_TXN_MARKERS, 0, req, cm->request_timeout_ms, &a, &body, &frame);
    }
    if (rc != 0) { /* Kafka: a disconnected request's markers are re-enqueued (leaders re-resolved) */
        if (!s->failing)
            gr_info(LOGGER, "cannot send transaction markers to broker %d (%d): retrying", s->broker_id, rc);
        s->failing = true;
        free(frame);
        gr_arena_free(&a);
        list = drop_emigrated(cm, list); /* the coordinator may have moved meanwhile */
        route(cm, list, true);
        return;
    }
    if (s->failing) gr_info(LOGGER, "sending transaction markers to broker %d again", s->broker_id);
    s->failing = false;
    const struct WriteTxnMarkersResponse *resp = body;
    list = drop_emigrated(cm, list);
    struct gr_txn_marker *retry = NULL, **rtail = &retry;
    struct gr_txn_pending *done = NULL;
    pthread_mutex_lock(&cm->mu);
    for (struct gr_txn_marker *m = list, *next; m; m = next) {
        next = m->next;
        int16_t e = gr_txn_markers_response_error(resp, m);
        switch (gr_txn_marker_outcome_of(e)) {
        case GR_TXN_MARKER_WRITTEN: {
            struct gr_txn_pending *t = gr_txn_markers_written(&cm->mk, m);
            if (t) {
                t->next = done;
                done = t;
            }
            break;
        }
        case GR_TXN_MARKER_CANCEL:
            if (!m->txn->cancelled)
                gr_info(LOGGER, "the marker of %s for %s-%d failed for good (%s): no more markers of this transaction",
                        m->txn->id, m->topic, m->partition, gr_kerr_name(e));
            gr_txn_markers_cancel(&cm->mk, m->txn);
            gr_txn_markers_drop(&cm->mk, m);
            break;
        case GR_TXN_MARKER_RETRY:
            gr_debug(LOGGER, "the marker of %s for %s-%d failed (%s): retrying", m->txn->id, m->topic, m->partition,
                     gr_kerr_name(e));
            m->next = NULL;
            *rtail = m;
            rtail = &m->next;
            break;
        }
    }
    pthread_mutex_unlock(&cm->mu);
    free(frame);
    gr_arena_free(&a);
    route(cm, retry, true);
    while (done) {
        struct gr_txn_pending *t = done;
        done = t->next;
        complete_txn(cm, t);
    }
}

static void *sender_thread(void *arg) {
    struct txn_marker_sender *s = arg;
    struct txn_marker_channel_manager *cm = s->cm;
    pthread_mutex_lock(&cm->mu);
    while (!cm->stopping) {
        int64_t now = gr_mono_ms(), due;
        struct gr_txn_marker *list = gr_txn_markers_take(&cm->mk, s->q, now, MAX_MARKERS_PER_REQUEST, &due);
        if (!list) {
            timed_wait(&s->cond, &cm->mu, now, due);
            continue;
        }
        pthread_mutex_unlock(&cm->mu);
        send_round(s, list);
        pthread_mutex_lock(&cm->mu);
    }
    pthread_mutex_unlock(&cm->mu);
    return NULL;
}

/* ---- the manager thread ---- */

static void *manager_thread(void *arg) {
    struct txn_marker_channel_manager *cm = arg;
    pthread_mutex_lock(&cm->mu);
    while (!cm->stopping) {
        int64_t now = gr_mono_ms(), due_markers, due_appends;
        struct gr_txn_marker *list = gr_txn_markers_take(&cm->mk, &cm->mk.unknown, now, INT32_MAX, &due_markers);
        struct gr_txn_pending *appends = gr_txn_markers_take_appends(&cm->mk, now, &due_appends);
        if (!list && !appends) {
            timed_wait(&cm->cond, &cm->mu, now, GR_MIN(due_markers, due_appends));
            continue;
        }
        pthread_mutex_unlock(&cm->mu);
        route(cm, list, false);
        while (appends) {
            struct gr_txn_pending *t = appends;
            appends = t->next;
            gr_debug(LOGGER, "retrying the completion of %s", t->id);
            complete_txn(cm, t);
        }
        pthread_mutex_lock(&cm->mu);
    }
    pthread_mutex_unlock(&cm->mu);
    return NULL;
}

/* ---- the coordinator's side (txn_internal.h) ---- */

void txn_markers_add_locked(struct gr_txn_coordinator *tc, const struct txn_meta *m, int32_t coord_epoch,
                            bool caller_routes) {
    struct txn_marker_channel_manager *cm = tc->cm;
    pthread_mutex_lock(&cm->mu);
    struct gr_txn_pending *t = gr_txn_markers_add_txn(&cm->mk, m->id, m->pid, m->epoch,
                                                      m->state == GR_TXN_PREPARE_COMMIT, m->log_part, coord_epoch);
    for (int i = 0; i < m->n_parts; i++) gr_txn_markers_add_marker(&cm->mk, t, m->parts[i].topic, m->parts[i].partition);
    bool none = gr_txn_markers_take_if_done(&cm->mk, t);
    if (none) /* no partition: straight to Complete* (manager thread) */
        gr_txn_markers_retry_append(&cm->mk, t, 0);
    if (none || !caller_routes) pthread_cond_signal(&cm->cond);
    pthread_mutex_unlock(&cm->mu);
}

void txn_markers_route_new(struct gr_txn_coordinator *tc) {
    struct txn_marker_channel_manager *cm = tc->cm;
    if (!cm) return;
    int64_t due;
    pthread_mutex_lock(&cm->mu);
    struct gr_txn_marker *list =
        cm->stopping ? NULL : gr_txn_markers_take(&cm->mk, &cm->mk.unknown, gr_mono_ms(), INT32_MAX, &due);
    pthread_mutex_unlock(&cm->mu);
    route(cm, list, false); /* as the manager thread would */
}

void txn_markers_remove_log_part_locked(struct gr_txn_coordinator *tc, int32_t log_part) {
    struct txn_marker_channel_manager *cm = tc->cm;
    if (!cm) return;
    pthread_mutex_lock(&cm->mu);
    int n = gr_txn_markers_remove_log_part(&cm->mk, log_part);
    pthread_mutex_unlock(&cm->mu);
    if (n) gr_info(LOGGER, "dropped %d queued transaction marker(s) of %s-%d", n, GR_TXN_TOPIC, log_part);
}

int txn_markers_start(struct gr_txn_coordinator *tc) {
    struct txn_marker_channel_manager *cm = gr_calloc(1, sizeof *cm);
    cm->tc = tc;
    pthread_mutex_init(&cm->mu, NULL);
    pthread_cond_init(&cm->cond, NULL);
    gr_txn_markers_init(&cm->mk);
    int32_t rt = tc->b->cfg && tc->b->cfg->request_timeout_ms > 0 ? tc->b->cfg->request_timeout_ms : 30000;
    cm->request_timeout_ms = rt > INT32_MAX - GR_TXN_MARKER_TIMEOUT_MARGIN_MS ? INT32_MAX
                                                                              : rt + GR_TXN_MARKER_TIMEOUT_MARGIN_MS;
    cm->connect_timeout_ms = 10000; /* Kafka 2.7: socket.connection.setup.timeout.ms */
    tc->cm = cm;
    if (pthread_create(&cm->th, NULL, manager_thread, cm) != 0) {
        tc->cm = NULL;
        pthread_mutex_destroy(&cm->mu);
        pthread_cond_destroy(&cm->cond);
        free(cm);
        return -EAGAIN;
    }
    cm->started = true;
    return 0;
}

void txn_markers_stop(struct gr_txn_coordinator *tc) {
    struct txn_marker_channel_manager *cm = tc->cm;
    if (!cm || !cm->started) return;
    pthread_mutex_lock(&cm->mu);
    cm->stopping = true;
    pthread_cond_broadcast(&cm->cond);
    for (int i = 0; i < cm->n_senders; i++) pthread_cond_broadcast(&cm->senders[i]->cond);
    int n = cm->n_senders; /* no sender is created once stopping */
    pthread_mutex_unlock(&cm->mu);
    for (int i = 0; i < n; i++) gr_kafka_client_shutdown(cm->senders[i]->kc);
    pthread_join(cm->th, NULL);
    for (int i = 0; i < n; i++) pthread_join(cm->senders[i]->th, NULL);
    cm->started = false;
}

void txn_markers_free(struct gr_txn_coordinator *tc) {
    struct txn_marker_channel_manager *cm = tc->cm;
    if (!cm) return;
    txn_markers_stop(tc);
    for (int i = 0; i < cm->n_senders; i++) {
        gr_kafka_client_free(cm->senders[i]->kc);
        pthread_cond_destroy(&cm->senders[i]->cond);
        free(cm->senders[i]);
    }
    free(cm->senders);
    gr_txn_markers_release(&cm->mk);
    pthread_mutex_destroy(&cm->mu);
    pthread_cond_destroy(&cm->cond);
    free(cm);
    tc->cm = NULL;
}
