/* __transaction_state record schemas (Kafka 2.7's TransactionLog), big-endian:
 *   key   = i16 version 0 | transactional_id STRING (i16 length + UTF-8)
 *   value = i16 version 0 | producer_id i64 | producer_epoch i16 | transaction_timeout_ms i32 |
 *           transaction_status i8 | transaction_partitions nullable ARRAY (i32 count, -1 = null)
 *           of [topic STRING, partition_ids ARRAY of i32] | transaction_last_update_timestamp i64 |
 *           transaction_start_timestamp i64
 *   a null value is a tombstone (the transactional id expired).
 * Pure functions; any thread. */
#ifndef GR_COORDINATOR_TXN_LOG_H
#define GR_COORDINATOR_TXN_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GR_TXN_TOPIC "__transaction_state"
#define GR_TXN_DEFAULT_PARTITIONS 50

/* Kafka's TransactionState bytes. */
enum gr_txn_state {
    GR_TXN_EMPTY = 0,
    GR_TXN_ONGOING = 1,
    GR_TXN_PREPARE_COMMIT = 2,
    GR_TXN_PREPARE_ABORT = 3,
    GR_TXN_COMPLETE_COMMIT = 4,
    GR_TXN_COMPLETE_ABORT = 5,
    GR_TXN_DEAD = 6,
    GR_TXN_PREPARE_EPOCH_FENCE = 7, /* memory only */
};
const char *gr_txn_state_name(int state);
/* Kafka's TransactionMetadata.validPreviousStates: may a transaction in `from` move to `to`? */
bool gr_txn_transition_valid(int from, int to);

struct gr_txn_tp {
    char *topic;
    int32_t partition;
};

struct gr_txn_record {
    char *transactional_id;
    bool tombstone;
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t timeout_ms;
    int8_t state;
    int n_parts;
    struct gr_txn_tp *parts;
    int64_t update_ts, start_ts;
};

/* Encoders return malloc'd bytes (caller frees). */
uint8_t *gr_txn_log_key(const char *transactional_id, size_t *len);
uint8_t *gr_txn_log_value(const struct gr_txn_record *r, size_t *len);
/* Decodes key and value (value NULL = tombstone) into r (strings/arrays malloc'd; free with
 * gr_txn_record_free). Returns 0 or -EINVAL. */
int gr_txn_log_decode(const uint8_t *key, size_t klen, const uint8_t *value, size_t vlen, struct gr_txn_record *r);
void gr_txn_record_free(struct gr_txn_record *r);

/* abs(Java String.hashCode(id)) % n (abs(INT_MIN) = 0), the hash over the id's UTF-16 code units
 * (gr_java_string_hash), so non-ASCII ids land where Kafka puts them. */
int32_t gr_txn_partition_for(const char *transactional_id, int32_t n);

#endif
