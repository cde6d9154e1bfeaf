/* Producer state of one partition (Kafka 2.7's ProducerStateManager): for every producer id that
 * wrote an idempotent batch (producerId >= 0), its epoch and the metadata of its last 5 data
 * batches, so that the leader can
 *   - acknowledge a retried batch with its original offsets instead of appending it again,
 *   - reject a batch whose epoch is stale (INVALID_PRODUCER_EPOCH, 47) or whose sequence leaves a
 *     gap (OUT_OF_ORDER_SEQUENCE_NUMBER, 45).
 * Followers build the same state from the batches they replicate (no checks), so a new leader
 * deduplicates retries of batches its predecessor acknowledged.
 *
 * Persistence: snapshot files `<20-digit offset>.snapshot` in the partition directory, Kafka's
 * layout (byte table at the top of producer_state.c and in docs/STORAGE.md) with one entry per
 * cached batch, so a restart keeps all 5. The name is the map end offset: the state covers every
 * batch below it.
 *
 * Ownership and threading: a gr_pstate belongs to one gr_plog, which calls every function under
 * its mutex; nothing here locks. gr_pstate_append objects are the caller's (stack or heap) and
 * must be released with gr_pstate_append_release.
 *
 * Offsets are int64; Kafka error codes travel as int16_t (GR_KERR_*); other returns are 0 or
 * -errno. */
#ifndef GR_STORAGE_PRODUCER_STATE_H
#define GR_STORAGE_PRODUCER_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GR_PSTATE_BATCHES_TO_RETAIN 5
#define GR_PSTATE_SNAPSHOT_SUFFIX ".snapshot"
#define GR_PSTATE_SNAPSHOT_VERSION 1
#define GR_PSTATE_SNAPSHOT_ENTRY_SIZE 46
/* Kafka 2.7's transactional.id.expiration.ms default (7 days). */
#define GR_PSTATE_DEFAULT_EXPIRATION_MS 604800000LL
/* Kafka's hard-coded producer.id.expiration.check.interval.ms (10 minutes). */
#define GR_PSTATE_EXPIRATION_CHECK_INTERVAL_MS 600000LL

/* Who is appending (Kafka's AppendOrigin). */
enum gr_pstate_origin {
    GR_PSTATE_CLIENT,      /* leader append of a Produce request: every check */
    GR_PSTATE_REPLICATION, /* follower append or log replay: state is updated, nothing rejected */
    GR_PSTATE_COORDINATOR, /* leader append of a transaction marker (WriteTxnMarkers): epoch and
                              coordinator-epoch checks only */
};

/* Control record types (Kafka's ControlRecordType; key = i16 version 0 + i16 type). */
#define GR_CONTROL_ABORT 0
#define GR_CONTROL_COMMIT 1

struct gr_pstate;

/* A transaction that a marker ended on this partition (Kafka's CompletedTxn). */
struct gr_pstate_completed_txn {
    int64_t producer_id;
    int64_t first_offset; /* first offset of the transaction (the marker's own if none was open) */
    int64_t last_offset;  /* the marker's offset */
    bool aborted;
    /* Set by gr_pstate_commit before the listener runs: the smallest first offset of the other
     * transactions open when this marker was appended (-1 none), for the .txnindex entry's
     * last_stable_offset (Kafka's ProducerStateManager.lastStableOffset(completedTxn)). */
    int64_t first_open_offset;
};

/* Called by gr_pstate_commit for every transaction a committed append ended, after the state
 * was updated (so the ended transaction is no longer open). Runs under the owner's lock. */
typedef void (*gr_pstate_txn_listener)(void *ctx, const struct gr_pstate_completed_txn *t);
void gr_pstate_set_txn_listener(struct gr_pstate *ps, gr_pstate_txn_listener fn, void *ctx);

/* KIP-890 part 1 (Kafka 3.6; stricter than 2.7). Process-wide switch, off by default (unit tests
 * that append transactional batches directly); gregord turns it on from
 * transaction.partition.verification.enable. When on, a transactional data batch (CLIENT or
 * COORDINATOR origin: Produce, and the transactional offsets TxnOffsetCommit writes) of a
 * producer with no open transaction on this partition is INVALID_TXN_STATE unless a confirmed
 * verification guard for (producer, epoch) is there. The broker starts a guard before it asks
 * the transaction coordinator and confirms it with the coordinator's yes; the first
 * transactional batch consumes it, a marker of the producer clears it (so the answer of a
 * verification that raced with the end of the transaction is worthless: Kafka's
 * VerificationGuard). */
void gr_pstate_set_verification_enabled(bool on);
bool gr_pstate_verification_enabled(void);
/* Does a transactional batch of (producer_id, epoch) need coordinator verification first
 * (verification on, and no open transaction of that producer at that epoch here)? */
bool gr_pstate_needs_verification(const struct gr_pstate *ps, int64_t producer_id, int16_t epoch);
/* Kafka's maybeStartTransactionVerification: 0 if no verification is needed, else the token of
 * the producer's guard (a new unconfirmed one, or the one of a verification of the same epoch
 * already under way; a guard of another epoch is replaced). */
uint64_t gr_pstate_start_verification(struct gr_pstate *ps, int64_t producer_id, int16_t epoch, int64_t now_ms);
/* The coordinator answered the verification of token: confirms the guard (verified) or drops it.
 * Nothing happens if the guard was cleared or replaced meanwhile (the append then refuses). */
void gr_pstate_end_verification(struct gr_pstate *ps, int64_t producer_id, uint64_t token, bool verified);
int gr_pstate_verification_count(const struct gr_pstate *ps);
/* Smallest first offset of an open transaction, -1 if none (for the LSO). O(1): open
 * transactions are kept in a min-heap by first offset (Kafka's ongoingTxns), updated in
 * O(log n) when an append opens or a marker ends one. */
int64_t gr_pstate_first_ongoing_offset(const struct gr_pstate *ps);
int gr_pstate_ongoing_count(const struct gr_pstate *ps);
/* Tests: do the heap and the producers agree (every open transaction in it, the minimum right)? */
bool gr_pstate_check_ongoing(const struct gr_pstate *ps);
/* Parses a control batch's first record: *type (GR_CONTROL_*) and *coordinator_epoch (-1 if the
 * value is absent). Returns 0 or -EINVAL. */
int gr_pstate_parse_marker(const uint8_t *batch, size_t len, int16_t *type, int32_t *coordinator_epoch);

/* Metadata of one appended data batch (Kafka's BatchMetadata). */
struct gr_pstate_batch {
    int32_t last_seq;
    int64_t last_offset;
    int32_t offset_delta; /* last_offset - first offset */
    int64_t timestamp;    /* the batch's maxTimestamp */
};
int32_t gr_pstate_batch_first_seq(const struct gr_pstate_batch *b);
static inline int64_t gr_pstate_batch_first_offset(const struct gr_pstate_batch *b) {
    return b->last_offset - b->offset_delta;
}

/* One producer (Kafka's ProducerStateEntry). batches[0..n) oldest first. */
struct gr_pstate_entry {
    int64_t producer_id;
    int16_t epoch;              /* -1: no state (any sequence accepted) */
    int32_t coordinator_epoch;  /* -1 */
    int64_t last_timestamp;     /* -1 */
    int64_t txn_first_offset;   /* -1: no open transaction */
    int32_t heap_idx;           /* private to producer_state.c: position among the open
                                 * transactions (-1 none); meaningless in copies */
    int n;
    struct gr_pstate_batch batches[GR_PSTATE_BATCHES_TO_RETAIN];
};

struct gr_pstate;

/* A new empty state for the partition directory `dir` (borrowed: it must outlive the state); expiration_ms is
 * transactional.id.expiration.ms. map end offset = snapshot offset = 0. */
struct gr_pstate *gr_pstate_new(const char *dir, int64_t expiration_ms);
/* The caller knows dir holds no snapshot file (it just listed or created it): snapshot scans
 * return "none" without reading the directory until this state writes one. */
void gr_pstate_assume_no_snapshots(struct gr_pstate *ps);
void gr_pstate_free(struct gr_pstate *ps);
void gr_pstate_set_expiration_ms(struct gr_pstate *ps, int64_t expiration_ms);

/* ---- appends ---- */

/* The pending updates of one append (Kafka's ProducerAppendInfo, for every pid in the append). */
struct gr_pstate_append {
    int n, cap;
    struct gr_pstate_entry *next; /* updated copies */
    int16_t *orig_epoch;          /* epoch of the stored entry before this append (-1 none) */
    int n_done, cap_done;
    struct gr_pstate_completed_txn *done; /* transactions ended by markers in this append */
    int n_consumed, cap_consumed;
    int64_t *consumed;            /* pids whose verification guard this append uses */
};
void gr_pstate_append_init(struct gr_pstate_append *app);
void gr_pstate_append_release(struct gr_pstate_append *app);

/* Checks the batches buf[0..len) (whole, validated batches with their final baseOffsets) in
 * order and stages their state updates in app (which must be freshly initialised).
 * CLIENT origin: if a batch duplicates one of its producer's cached batches (same epoch, same
 * first and last sequence), returns NONE with *dup filled and *is_dup = true: nothing must be
 * appended and the client gets dup's offsets (INVALID_RECORD instead when buf holds other
 * batches too: acknowledging them unwritten would lose them). Otherwise the checks of Kafka 2.7's
 * ProducerAppendInfo: stale epoch -> INVALID_PRODUCER_EPOCH; new epoch with a sequence other than
 * 0 (and a known previous epoch) or a sequence that does not continue the last one (wrapping after
 * INT32_MAX) -> OUT_OF_ORDER_SEQUENCE_NUMBER, unless the producer has no state; a
 * non-transactional batch while a transaction is open -> INVALID_TXN_STATE. REPLICATION origin
 * never fails. Returns a GR_KERR_* code; nothing in ps changes. */
int16_t gr_pstate_prepare(struct gr_pstate *ps, const uint8_t *buf, size_t len, enum gr_pstate_origin origin,
                          struct gr_pstate_append *app, struct gr_pstate_batch *dup, bool *is_dup);
/* Applies staged updates (after the batches were written) and sets the map end offset to
 * map_end (the log end offset after the append). */
void gr_pstate_commit(struct gr_pstate *ps, struct gr_pstate_append *app, int64_t map_end);
/* REPLICATION-origin prepare + commit of batches already in the log (replay / follower). */
void gr_pstate_load_batches(struct gr_pstate *ps, const uint8_t *buf, size_t len, int64_t map_end);

/* ---- queries ---- */
int64_t gr_pstate_map_end_offset(const struct gr_pstate *ps);
void gr_pstate_set_map_end_offset(struct gr_pstate *ps, int64_t offset);
int gr_pstate_producer_count(const struct gr_pstate *ps);
/* Copy of the entry of producer_id; false if none. */
bool gr_pstate_lookup(const struct gr_pstate *ps, int64_t producer_id, struct gr_pstate_entry *out);
/* Copies of every producer's state (Kafka's ProducerStateManager.activeProducers), at most max,
 * in no particular order; returns how many were copied. */
int gr_pstate_list(const struct gr_pstate *ps, struct gr_pstate_entry *out, int max);

/* ---- expiry ---- */
/* Drops producers with no open transaction whose last_timestamp is expiration_ms or more before
 * now_ms (Kafka's removeExpiredProducers), and verification guards started that long ago.
 * Returns how many producers went. The log runs it on appends and the log manager every
 * GR_PSTATE_EXPIRATION_CHECK_INTERVAL_MS (Kafka's PeriodicProducerExpirationCheck). */
int gr_pstate_remove_expired(struct gr_pstate *ps, int64_t now_ms);

/* ---- snapshots ---- */
/* Writes `<map end>.snapshot` if the map end offset is beyond the last snapshot's. 0 or -errno. */
int gr_pstate_take_snapshot(struct gr_pstate *ps);
/* Clears the state and loads the newest readable snapshot (bad version / CRC / size: the file
 * is deleted and the next older one tried), dropping expired producers (now_ms). Sets map end =
 * snapshot offset, or log_start when none is left. Returns the map end offset. Callers delete
 * out-of-range snapshots first (gr_pstate_delete_snapshots_out_of_range). */
int64_t gr_pstate_load_latest_snapshot(struct gr_pstate *ps, int64_t log_start, int64_t now_ms);
/* Offsets of the newest / oldest snapshot file, -1 if none. */
int64_t gr_pstate_latest_snapshot_offset(const struct gr_pstate *ps);
int64_t gr_pstate_oldest_snapshot_offset(const struct gr_pstate *ps);
/* Deletes snapshot files whose offset is < offset. */
void gr_pstate_delete_snapshots_before(struct gr_pstate *ps, int64_t offset);
/* Deletes snapshot files whose offset is > log_end or <= log_start (Kafka's truncateAndReload
 * first step). */
void gr_pstate_delete_snapshots_out_of_range(struct gr_pstate *ps, int64_t log_start, int64_t log_end);

/* Log start moved forward (retention): deletes snapshots below it, raises the map end offset to
 * it. In-memory producers are kept (Kafka's truncateHead). */
void gr_pstate_truncate_head(struct gr_pstate *ps, int64_t log_start);
/* Clears everything, deletes every snapshot, map end = offset (truncateFullyAndStartAt). */
void gr_pstate_truncate_fully(struct gr_pstate *ps, int64_t offset);

/* Pure snapshot codec (exposed for tests and tools). encode returns a malloc'd buffer;
 * decode returns 0 or GR_ECORRUPT and a malloc'd array of *n entries (*out, caller frees). */
uint8_t *gr_pstate_snapshot_encode(const struct gr_pstate_entry *entries, int n, size_t *len);
int gr_pstate_snapshot_decode(const uint8_t *buf, size_t len, struct gr_pstate_entry **out, int *n);

#endif
