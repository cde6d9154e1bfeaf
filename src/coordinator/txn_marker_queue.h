/* The bookkeeping of Kafka's TransactionMarkerChannelManager without its threads or network
 * (those are in txn_marker_channel_manager.c): the transactions whose markers are being written
 * (Kafka's PendingCompleteTxn, with the count of markers left), one queue of markers per
 * destination broker plus one for partitions whose leader is unknown (Kafka's TxnMarkerQueue),
 * the Complete* writes to retry (Kafka's txnLogAppendRetryQueue), the batching of the queued
 * markers of many transactions into one WriteTxnMarkers request, and the classification of its
 * per-partition answers (Kafka's TransactionMarkerRequestCompletionHandler).
 *
 * Unit of work: one marker = one partition of one transaction. A partition that fails is queued
 * again on its own (with a growing delay, not_before); the transaction's other partitions are not
 * resent. The transaction is complete when every one of its markers was written (left == 0).
 *
 * Locking: a struct gr_txn_markers and everything reachable from it is guarded by one mutex of
 * its owner (txn_marker_channel_manager.c: cm->mu); every function here needs it held, except
 * gr_txn_markers_build_request and gr_txn_markers_response_error, which read only markers the
 * caller took out of the queues (and their transaction's immutable fields).
 *
 * Ownership and lifetime:
 *  1. The table owns its transactions; a marker holds a reference on its transaction (refs), and
 *     so do the table and the append-retry list while they list it. A transaction is freed when
 *     its last reference goes (gr_txn_pending_unref).
 *  2. A marker belongs to exactly one place at a time: a queue, or the list the caller took out
 *     of a queue (then the caller must give it back with gr_txn_markers_put, or end it with
 *     gr_txn_markers_written / gr_txn_markers_drop).
 *  3. Cancelling a transaction (coordinator moved, producer fenced) removes it from the table;
 *     its markers still queued are dropped when next taken, the ones in flight when answered. */
#ifndef GR_COORDINATOR_TXN_MARKER_QUEUE_H
#define GR_COORDINATOR_TXN_MARKER_QUEUE_H

#include <stdbool.h>
#include <stdint.h>

#include "protocol/arena.h"

struct WriteTxnMarkersRequest;
struct WriteTxnMarkersResponse;

#define GR_TXN_MARKERS_BUCKETS 256
#define GR_TXN_UNKNOWN_BROKER (-1)

struct gr_txn_pending {
    struct gr_txn_pending *next; /* in a table bucket or in the append-retry list */
    char *id;
    int64_t pid;
    int16_t epoch;
    bool commit;
    int32_t log_part;    /* partition of __transaction_state */
    int32_t coord_epoch; /* its leader epoch when the Prepare* was written or loaded */
    int left;            /* markers not written yet */
    int refs;
    bool cancelled;
    bool listed;         /* in the table */
    int64_t retry_at;    /* append-retry list: not before (monotonic ms) */
    int32_t backoff_ms;  /* append-retry list: the next delay */
};

struct gr_txn_marker {
    struct gr_txn_marker *next;
    struct gr_txn_pending *txn; /* a reference */
    char *topic;
    int32_t partition;
    int64_t not_before; /* monotonic ms; 0 = now */
    int32_t backoff_ms; /* the delay of its next retry */
    int32_t rm, rt, ri; /* where gr_txn_markers_build_request put it (Markers/Topics/Partitions) */
};

struct gr_txn_marker_queue {
    int32_t broker_id; /* GR_TXN_UNKNOWN_BROKER: partitions without a known leader */
    struct gr_txn_marker *head, **tail;
    int n;
};

struct gr_txn_markers {
    struct gr_txn_pending *txns[GR_TXN_MARKERS_BUCKETS];
    int n_txns;
    struct gr_txn_marker_queue unknown;
    struct gr_txn_marker_queue **queues; /* one per destination broker, created on first use */
    int n_queues;
    struct gr_txn_pending *append_retry, **append_retry_tail;
};

void gr_txn_markers_init(struct gr_txn_markers *mk);
/* Frees every queued marker, listed transaction and retry; the struct can be init'ed again. */
void gr_txn_markers_release(struct gr_txn_markers *mk);

/* A new transaction whose markers are to be written (Kafka's addTxnMarkersToSend). An earlier one
 * of the same id still listed is cancelled (rule 3). The table holds the returned pointer. */
struct gr_txn_pending *gr_txn_markers_add_txn(struct gr_txn_markers *mk, const char *id, int64_t pid, int16_t epoch,
                                              bool commit, int32_t log_part, int32_t coord_epoch);
/* A new marker of txn for topic-partition, queued for routing (the unknown-broker queue, due
 * now); txn->left + 1. */
void gr_txn_markers_add_marker(struct gr_txn_markers *mk, struct gr_txn_pending *txn, const char *topic,
                               int32_t partition);
/* The listed transaction of id, or NULL. */
struct gr_txn_pending *gr_txn_markers_find(struct gr_txn_markers *mk, const char *id);
/* Removes txn from the table and marks it cancelled (Kafka's removeMarkersForTxnId). */
void gr_txn_markers_cancel(struct gr_txn_markers *mk, struct gr_txn_pending *txn);
/* Emigration of __transaction_state partition log_part: cancels its transactions, frees their
 * queued markers and forgets their Complete* retries (Kafka's
 * removeMarkersForTxnTopicPartition). Returns the number of markers freed. */
int gr_txn_markers_remove_log_part(struct gr_txn_markers *mk, int32_t log_part);

/* The queue of broker_id (GR_TXN_UNKNOWN_BROKER: the unknown one), created when missing if
 * create, else NULL. */
struct gr_txn_marker_queue *gr_txn_markers_queue(struct gr_txn_markers *mk, int32_t broker_id, bool create);
/* Takes at most max markers of queue q that are due at now (in queue order), freeing those of
 * cancelled transactions on the way. *next_due (may be NULL): the earliest not_before among the
 * markers left in q, INT64_MAX when none. Returns a list linked by next (rule 2). */
struct gr_txn_marker *gr_txn_markers_take(struct gr_txn_markers *mk, struct gr_txn_marker_queue *q, int64_t now,
                                          int max, int64_t *next_due);
/* Queues marker m (taken before) at the tail of q, not before not_before. */
void gr_txn_markers_put(struct gr_txn_markers *mk, struct gr_txn_marker_queue *q, struct gr_txn_marker *m,
                        int64_t not_before);
/* The delay before retrying m, doubled for its next retry (50 ms up to 1 s). */
int32_t gr_txn_marker_next_backoff(struct gr_txn_marker *m);
/* When m, just routed at now, is due: now when it goes to the queue of a running sender
 * (to_sender) as a first attempt; after its backoff when it is retrying or has no sender to go
 * to (unknown leader, or the broker's sender thread could not be started: without the delay the
 * manager thread would re-route it at once, forever). */
int64_t gr_txn_marker_route_at(struct gr_txn_marker *m, int64_t now, bool retrying, bool to_sender);
/* m was written (or needs no marker: its topic is gone): frees it. Returns its transaction when
 * that was its last marker and the transaction is not cancelled: the transaction is then removed
 * from the table and the caller owns the table's reference (write Complete*, then unref). */
struct gr_txn_pending *gr_txn_markers_written(struct gr_txn_markers *mk, struct gr_txn_marker *m);
/* txn itself when none of its markers is left to write (a transaction without partitions), removed
 * from the table (the caller owns the table's reference); else NULL. */
struct gr_txn_pending *gr_txn_markers_take_if_done(struct gr_txn_markers *mk, struct gr_txn_pending *txn);
/* Frees m without counting it written. */
void gr_txn_markers_drop(struct gr_txn_markers *mk, struct gr_txn_marker *m);
void gr_txn_pending_unref(struct gr_txn_pending *txn);

/* The Complete* write of txn (whose reference the caller passes on) is retried at or after
 * retry_at (Kafka's txnLogAppendRetryQueue). Cancelled when its log partition emigrates. */
void gr_txn_markers_retry_append(struct gr_txn_markers *mk, struct gr_txn_pending *txn, int64_t retry_at);
/* Takes the retries due at now (a list linked by next; the caller owns their references).
 * *next_due: the earliest retry_at of those left, INT64_MAX when none. */
struct gr_txn_pending *gr_txn_markers_take_appends(struct gr_txn_markers *mk, int64_t now, int64_t *next_due);

/* One WriteTxnMarkers v0 request for the markers of list (taken from one queue): one entry per
 * transaction, its partitions grouped by topic, in list order of first appearance. Sets each
 * marker's rm/rt/ri. Allocated in a. Returns NULL for an empty list. */
struct WriteTxnMarkersRequest *gr_txn_markers_build_request(struct gr_txn_marker *list, struct gr_arena *a);
/* m's error in resp (which answered the request built for m's list): found at m's rm/rt/ri or,
 * should the responder have reordered, anywhere by producer id, topic and partition. A partition
 * the response lacks answers UNKNOWN_SERVER_ERROR (retried). */
int16_t gr_txn_markers_response_error(const struct WriteTxnMarkersResponse *resp, const struct gr_txn_marker *m);

/* What to do with a marker after its partition's error (Kafka's completion handler). */
enum gr_txn_marker_outcome {
    GR_TXN_MARKER_WRITTEN, /* NONE; also UNSUPPORTED_FOR_MESSAGE_FORMAT / UNSUPPORTED_VERSION */
    GR_TXN_MARKER_RETRY,   /* not leader, not enough replicas, timeout, storage, unknown partition, other */
    GR_TXN_MARKER_CANCEL,  /* INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: stop the transaction */
};
enum gr_txn_marker_outcome gr_txn_marker_outcome_of(int16_t error);

#endif
