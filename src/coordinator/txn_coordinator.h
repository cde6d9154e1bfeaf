/* The transaction coordinator (Kafka 2.7's TransactionCoordinator + TransactionStateManager +
 * TransactionMarkerChannelManager, condensed): the transactional ids whose __transaction_state
 * partition (gr_txn_partition_for) this broker leads.
 *
 * State machine (txn_log.h): Empty -> Ongoing (AddPartitions/AddOffsets) -> PrepareCommit /
 * PrepareAbort (EndTxn, timeout, fencing) -> CompleteCommit / CompleteAbort (markers written) ->
 * Empty/Ongoing again; Dead on expiry. Every transition is first written to the partition
 * (acks=-1) and applied when the write succeeds; one pending transition per id at a time (else
 * CONCURRENT_TRANSACTIONS). After a Prepare* write, the marker channel manager sends WriteTxnMarkers
 * to the leaders of every partition of the transaction (queues per leader, many transactions per
 * request, each partition retried on its own until written or the coordinator loses the
 * partition), then writes Complete* (retried while it fails). A broker that becomes leader of a
 * __transaction_state partition loads it (background thread, COORDINATOR_LOAD_IN_PROGRESS
 * meanwhile) and resumes the markers of Prepare* transactions. __transaction_state itself is
 * created on first use by admin/internal_topics.h.
 *
 * Threading: every gr_txn_* call may come from any thread; one mutex guards the state; storage
 * calls and callbacks run without it. A callback runs exactly once, possibly before the call
 * returns, on the calling or a storage-completion thread. */
#ifndef GR_COORDINATOR_TXN_COORDINATOR_H
#define GR_COORDINATOR_TXN_COORDINATOR_H

#include <stdbool.h>
#include <stdint.h>

/* ClientId of broker-to-broker KIP-890 verification requests (AddPartitionsToTxn, verify only). */
#define GR_TXN_VERIFY_CLIENT_ID "gregor-txn-verify"

struct gr_broker;
struct gr_replica_manager;
struct gr_txn_coordinator;
struct gr_txn_tp;

struct gr_txn_config {
    int32_t num_partitions;            /* transaction.state.log.num.partitions (50) */
    int32_t max_timeout_ms;            /* transaction.max.timeout.ms (900000) */
    int64_t id_expiration_ms;          /* transactional.id.expiration.ms */
    int32_t abort_interval_ms;         /* transaction.abort.timed.out.transaction.cleanup.interval.ms */
    int32_t remove_expired_interval_ms; /* transaction.remove.expired.transaction.cleanup.interval.ms */
};

/* Starts the coordinator over b's replica manager (sets b->txn_coordinator). 0 or -errno. */
int gr_txn_coordinator_start(struct gr_broker *b, struct gr_replica_manager *rm, const struct gr_txn_config *cfg);
void gr_txn_coordinator_shutdown(struct gr_txn_coordinator *tc);
void gr_txn_coordinator_free(struct gr_txn_coordinator *tc);

int32_t gr_txn_partition_of(struct gr_txn_coordinator *tc, const char *transactional_id);

/* Results: error (GR_KERR_*), and for InitProducerId the producer id / epoch. */
typedef void (*gr_txn_cb)(void *ctx, int16_t error, int64_t producer_id, int16_t epoch);

void gr_txn_init_producer_id(struct gr_txn_coordinator *tc, const char *id, int32_t timeout_ms,
                             int64_t expected_pid, int16_t expected_epoch, gr_txn_cb cb, void *ctx);
/* topics[i]/partitions[i], n entries; per-partition errors are the returned error for all. */
void gr_txn_add_partitions(struct gr_txn_coordinator *tc, const char *id, int64_t pid, int16_t epoch,
                           const char *const *topics, const int32_t *partitions, int n, gr_txn_cb cb, void *ctx);
void gr_txn_end(struct gr_txn_coordinator *tc, const char *id, int64_t pid, int16_t epoch, bool commit,
                gr_txn_cb cb, void *ctx);
/* KIP-890 part 1 (Kafka 3.6 handleVerifyPartitionsInTransaction): is topic-partition part of the
 * Ongoing transaction of id with (pid, epoch)? NONE; INVALID_PRODUCER_ID_MAPPING (no such id or
 * another pid); PRODUCER_FENCED (another epoch); CONCURRENT_TRANSACTIONS (PrepareCommit or
 * PrepareAbort); INVALID_TXN_STATE otherwise; or a coordinator error (NOT_COORDINATOR when this
 * broker does not coordinate id, COORDINATOR_LOAD_IN_PROGRESS). Any thread; never blocks on I/O. */
int16_t gr_txn_verify_id(struct gr_txn_coordinator *tc, const char *id, int64_t pid, int16_t epoch,
                         const char *topic, int32_t partition);

/* ---- KIP-664 views (txn_describe.c; Kafka 3.9 handleDescribeTransactions/handleListTransactions).
 * Any thread; they copy under the coordinator's mutex and never block on I/O. ---- */

/* One transactional id's state. state is a static name ("Ongoing", Kafka's TransactionState
 * names); parts are malloc'd copies (release with gr_txn_description_release). */
struct gr_txn_description {
    const char *state;
    int32_t timeout_ms;
    int64_t start_ts; /* wall ms, -1 */
    int64_t producer_id;
    int16_t producer_epoch;
    int n_parts;
    struct gr_txn_tp *parts;
};
/* NONE; COORDINATOR_NOT_AVAILABLE (tc NULL or stopping); INVALID_REQUEST (empty id);
 * NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS (its partition); TRANSACTIONAL_ID_NOT_FOUND
 * (unknown, or Dead). In Prepare* the partitions are all those of the transaction (Kafka drops
 * each as its marker is written). */
int16_t gr_txn_describe(struct gr_txn_coordinator *tc, const char *id, struct gr_txn_description *out);
void gr_txn_description_release(struct gr_txn_description *d);

/* ListTransactions filters: producer ids (none = all), states (filter_states: only those whose
 * bit 1 << GR_TXN_* is in state_mask), duration_ms >= 0: only transactions started more than
 * that long ago. */
struct gr_txn_list_filter {
    const int64_t *producer_ids;
    int n_producer_ids;
    bool filter_states;
    unsigned state_mask;
    int64_t duration_ms;
};
struct gr_txn_listing {
    char *transactional_id; /* malloc'd */
    int64_t producer_id;
    const char *state;      /* static */
};
/* Every id of the partitions this broker coordinates that passes f (Dead ones never), as a
 * malloc'd array (free with gr_txn_listings_free). NONE; COORDINATOR_NOT_AVAILABLE;
 * COORDINATOR_LOAD_IN_PROGRESS while any partition is loading (nothing listed). */
int16_t gr_txn_list(struct gr_txn_coordinator *tc, const struct gr_txn_list_filter *f, struct gr_txn_listing **out,
                    int *n);
void gr_txn_listings_free(struct gr_txn_listing *l, int n);

#endif
