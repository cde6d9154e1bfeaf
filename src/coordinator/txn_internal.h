/* Private to the transaction coordinator: shared by txn_coordinator.c (the APIs: Kafka's
 * TransactionCoordinator; lifecycle), txn_state_manager.c (Kafka's TransactionStateManager: the
 * table of transactional ids, writes to __transaction_state, loading/unloading partitions,
 * timeouts and expiry on the background thread) and txn_marker_channel_manager.c (Kafka's
 * TransactionMarkerChannelManager: per-broker marker queues and senders, the Complete* writes and
 * their retries; its bookkeeping in txn_marker_queue.h). Nothing outside src/coordinator/txn_*.c
 * includes it; the public contract is txn_coordinator.h.
 *
 * Locking (numbered so the code can cite them):
 *  1. tc->mu guards the id table (buckets), parts[] and stopping; functions named *_locked need it
 *     held. The marker channel manager's own mutex (cm->mu) is a leaf under it: txn_markers_*_locked
 *     take it with tc->mu held; nothing holding cm->mu takes tc->mu.
 *  2. Storage appends (txn_write_issue), metadata-cache lookups, network calls and user callbacks
 *     never run under tc->mu.
 *  3. Asynchronous completions (txn_write_done, marker answers, Complete* writes) look their id up
 *     again by name and check the partition's coordinator epoch: the id may have been unloaded
 *     meanwhile.
 * The table owns its struct txn_meta entries (strings and partition arrays malloc'd); the marker
 * channel manager owns its copies (txn_marker_queue.h). */
#ifndef GR_COORDINATOR_TXN_INTERNAL_H
#define GR_COORDINATOR_TXN_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "coordinator/txn_coordinator.h"
#include "coordinator/txn_log.h"

#define LOGGER "kafka.coordinator.transaction.TransactionCoordinator"
#define NB 256
#define EPOCH_EXHAUSTED 32766

struct gr_broker;
struct gr_replica_manager;

struct txn_meta {
    struct txn_meta *next;
    char *id;
    int32_t log_part;
    int64_t pid;
    int16_t epoch;
    int32_t timeout_ms;
    int state;
    bool pending;
    /* the write that set pending: only its completion clears it (a write issued before the
     * partition was unloaded completes after the reload made a new entry for the id) */
    const struct txn_write *pending_write;
    int n_parts, cap_parts;
    struct gr_txn_tp *parts;
    int64_t start_ts, update_ts;
    int16_t last_epoch; /* epoch before the last InitProducerId bump, -1 (memory only, as Kafka) */
    int64_t last_pid;   /* producer id before the last transition (the old one after a rotation), -1;
                         * memory only, as Kafka's lastProducerId */
};

enum { P_NONE, P_LOADING, P_OWNED };
struct txn_tpart {
    int state;
    int32_t epoch;
};

struct txn_marker_channel_manager; /* txn_marker_channel_manager.c */

struct gr_txn_coordinator {
    struct gr_txn_config cfg;
    struct gr_broker *b;
    struct gr_replica_manager *rm;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    pthread_t bg;
    bool stopping, started;
    struct txn_meta *buckets[NB];
    struct txn_tpart *parts;
    int32_t nparts;
    struct txn_marker_channel_manager *cm;
    int64_t next_abort_check, next_expire_check;
    struct txn_parked *parked; /* AddPartitionsToTxn waiting for the previous transaction (txn_coordinator.c) */
};

struct txn_write {
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
    int16_t last_epoch; /* >= 0: the meta's last_epoch on success (an InitProducerId bump) */
    int64_t last_pid;   /* the meta's last_pid on success */
};

/* ---- txn_coordinator.c ---- */
/* An AddPartitionsToTxn / AddOffsetsToTxn that met the producer's previous transaction still
 * completing (Prepare*, or a write of the id under way) waits, instead of answering
 * CONCURRENT_TRANSACTIONS at once, until a write of that id completes (txn_parked_retry, from
 * txn_write_done) or GR_TXN_PARK_MAX_MS passed (txn_parked_expire, from the background thread's
 * timers): then it runs again and answers what it meets. Kafka answers at once and the client
 * retries after its back-off (librdkafka 20 ms, Java retry.backoff.ms 100 ms), which was most of
 * a short transaction's time. Each parked request owns copies of its strings; the client's
 * connection waits for the answer, so the list is bounded by the connections. */
#define GR_TXN_PARK_MAX_MS 1000
struct txn_parked;
void txn_parked_retry(struct gr_txn_coordinator *tc, const char *id);
/* Runs again the parked requests whose time is up at now_ms (all: every one, answered
 * NOT_COORDINATOR: shutdown). Not under mu. */
void txn_parked_expire(struct gr_txn_coordinator *tc, int64_t now_ms, bool all);
/* Every marker of m's Prepare* transaction is written (m not pending) and an AddPartitionsToTxn /
 * AddOffsetsToTxn of the same producer and epoch is parked: takes the first such request and
 * prepares the write of the next transaction's Ongoing state (its partitions) in place of the
 * Complete* record -- one __transaction_state write instead of two on the producer's path; the
 * log then holds Prepare* followed by Ongoing, which a loader reads as "the previous transaction
 * completed" (the last record of an id wins; its markers were all written before). Kafka writes
 * Complete* and then Ongoing. On success the request is answered NONE; on failure the id stays
 * in Prepare* and the request runs again (it waits for the Complete* retry). done (the Complete*
 * owner's callback) gets the write's result first, as a Complete* write's. NULL when no request
 * is parked (write Complete* then). Under mu; issue with txn_write_issue after unlocking. */
struct txn_write *txn_parked_fold_locked(struct gr_txn_coordinator *tc, struct txn_meta *m, int32_t coord_epoch,
                                         gr_txn_cb done, void *done_ctx);

/* ---- txn_state_manager.c ---- */
struct txn_meta *txn_find_locked(struct gr_txn_coordinator *tc, const char *id);
struct txn_meta *txn_meta_new_locked(struct gr_txn_coordinator *tc, const char *id, int32_t log_part);
void txn_meta_remove_locked(struct gr_txn_coordinator *tc, struct txn_meta *m);
void txn_meta_free(struct txn_meta *m);
void txn_parts_free(struct gr_txn_tp *p, int n);
struct gr_txn_tp *txn_parts_dup(const struct gr_txn_tp *p, int n);
bool txn_has_part(const struct txn_meta *m, const char *topic, int32_t p);
/* NONE if this broker coordinates partition p now (*epoch = its coordinator epoch), else the
 * error a request gets. */
int16_t txn_part_status_locked(struct gr_txn_coordinator *tc, int32_t p, int32_t *epoch);
void txn_apply_record(struct txn_meta *m, const struct gr_txn_record *r);
/* The current state of m as a record (borrowing m's partitions). */
struct gr_txn_record txn_target_of(const struct txn_meta *m);
/* Prepares the write of target rec (copied) for m and marks m pending (rule 1); issue it with
 * txn_write_issue after unlocking (rule 2). cb (may be NULL) gets the result. */
struct txn_write *txn_write_prepare_locked(struct gr_txn_coordinator *tc, struct txn_meta *m, int32_t coord_epoch,
                                           const struct gr_txn_record *rec, gr_txn_cb cb, void *ctx);
void txn_write_issue(struct txn_write *w);
void *txn_bg_thread(void *arg);

/* ---- txn_marker_channel_manager.c ---- */
/* Starts the marker channel manager (sets tc->cm). 0 or -errno. */
int txn_markers_start(struct gr_txn_coordinator *tc);
/* Stops its threads (the ones blocked in a call are woken); Complete* writes still in flight may
 * complete later (their results are then dropped). */
void txn_markers_stop(struct gr_txn_coordinator *tc);
/* Stops it if needed and frees it (tc->cm = NULL). */
void txn_markers_free(struct gr_txn_coordinator *tc);
/* Queues the markers of m (in Prepare*, written at coordinator epoch coord_epoch) for sending;
 * Complete* is written once they all are (Kafka's addTxnMarkersToSend). tc->mu held. The
 * manager thread routes them to their leaders' senders, unless caller_routes: then the caller
 * calls txn_markers_route_new once it holds no lock (one thread wake-up less between the
 * Prepare* write and the markers). */
void txn_markers_add_locked(struct gr_txn_coordinator *tc, const struct txn_meta *m, int32_t coord_epoch,
                            bool caller_routes);
/* Routes the markers queued by txn_markers_add_locked (and any other due in the unknown-leader
 * queue) from the calling thread. No lock held. */
void txn_markers_route_new(struct gr_txn_coordinator *tc);
/* __transaction_state partition log_part emigrated (or is reloaded): its queued markers and
 * Complete* retries are dropped. tc->mu held. */
void txn_markers_remove_log_part_locked(struct gr_txn_coordinator *tc, int32_t log_part);

#endif
