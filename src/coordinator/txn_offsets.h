/* Pending transactional offset commits (Kafka's GroupMetadata.pendingTransactionalOffsetCommits):
 * offsets a TxnOffsetCommit wrote to __consumer_offsets as a transactional batch, waiting for
 * their transaction's marker on that partition: COMMIT makes them the group's committed offsets,
 * ABORT drops them. Filled by TxnOffsetCommit (api/handle_txn.c) and by the group coordinator
 * when it loads a partition whose transactions are still open; drained by WriteTxnMarkers and by
 * markers met while loading.
 *
 * One process-wide table with its own mutex (a leaf lock: nothing is called while it is held);
 * any thread. Returned lists are the caller's (gr_txn_offsets_free). */
#ifndef GR_COORDINATOR_TXN_OFFSETS_H
#define GR_COORDINATOR_TXN_OFFSETS_H

#include <stdbool.h>
#include <stdint.h>

struct gr_txn_offset {
    struct gr_txn_offset *next;
    int64_t producer_id;
    int32_t offsets_partition; /* __consumer_offsets partition of the group */
    char *group, *topic, *metadata;
    int32_t partition, leader_epoch;
    int64_t offset;
    int64_t append_offset; /* base offset of its TxnOffsetCommit batch in __consumer_offsets */
};

/* Adds a copy (replacing a pending entry of the same producer, group and topic-partition). */
void gr_txn_offsets_add(int64_t producer_id, int32_t offsets_partition, const char *group, const char *topic,
                        int32_t partition, int64_t offset, int32_t leader_epoch, const char *metadata,
                        int64_t append_offset);
/* Removes and returns the pending entries of producer_id on offsets_partition (oldest first). */
struct gr_txn_offset *gr_txn_offsets_take(int64_t producer_id, int32_t offsets_partition);
void gr_txn_offsets_free(struct gr_txn_offset *list);
/* Does any producer have a pending offset of group for topic-partition? (Kafka's
 * GroupMetadata.hasPendingOffsetCommitsForTopicPartition, its transactional half; OffsetFetch
 * with require_stable.) */
bool gr_txn_offsets_pending_for(const char *group, const char *topic, int32_t partition);
/* Drops every pending entry of offsets_partition (the group coordinator unloaded it; the next
 * owner rebuilds them from the log). */
void gr_txn_offsets_drop_partition(int32_t offsets_partition);
int gr_txn_offsets_count(void);

#endif
