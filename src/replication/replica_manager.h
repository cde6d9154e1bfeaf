/* The replica manager (Kafka's ReplicaManager + Partition): the partitions this broker hosts as
 * leader or follower, their logs (through the log manager), high watermarks and ISR, the
 * produce/fetch purgatories, the replica fetchers and the AlterPartition sender.
 *
 * Start-up and wiring (called by the broker start-up code):
 *   gr_replica_manager_new(b, &rm)   opens the log manager over log.dirs (meta.properties
 *                                    checked against b->broker_id / b->cluster_id), starts the
 *                                    purgatories, fetcher manager, AlterPartition sender and the ISR
 *                                    expiration thread, installs b->hooks and sets
 *                                    b->replica_manager (which the Produce, Fetch,
 *                                    ListOffsets and OffsetForLeaderEpoch handlers of the
 *                                    table in api/apis.c use).
 *   gr_replica_manager_shutdown(rm)  stops fetchers and threads, expires delayed requests,
 *                                    flushes logs and writes checkpoints. Call after the network
 *                                    server stopped; then gr_replica_manager_free.
 *
 * Partitions become hosted only through LeaderAndIsr (hook apply_leader_and_isr: the request's
 * partitions in chunks of 512, each chunk taking the fetchers', AlterPartition queue's, map's and
 * purgatories' locks once; become_leader/become_follower are that batch for one partition);
 * StopReplica (hook stop_replicas, likewise) stops and optionally deletes them.
 *
 * Locking (outermost first): the broker's partition-registry state-change lock (held by the
 * hook callers) -> a fetcher thread's lock -> a partition's lock -> the log's own lock. The
 * purgatories are only ever entered with no partition lock held. */
#ifndef GR_BROKER_REPLICA_MANAGER_H
#define GR_BROKER_REPLICA_MANAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/apis.h"
#include "storage/log.h"

struct gr_broker;
struct gr_replica_manager;
struct gr_rm_partition;
struct gr_lm_log;

/* See above. Returns 0, or GR_EMETA_BROKER_ID / GR_EMETA_CLUSTER_ID (log dir of another broker or
 * cluster: refuse to start), or -errno / GR_E*. b->cfg must be set. Start-up thread. */
int gr_replica_manager_new(struct gr_broker *b, struct gr_replica_manager **out);
/* The broker has begun to shut down (before its controlled shutdown): LeaderAndIsr still moves
 * partitions between leader and follower (a former leader must stop answering as one), but
 * starts no fetcher (gr_fetcher_stop_adding). Any thread; NULL is ignored. */
void gr_replica_manager_begin_shutdown(struct gr_replica_manager *rm);
void gr_replica_manager_shutdown(struct gr_replica_manager *rm);
void gr_replica_manager_free(struct gr_replica_manager *rm);

/* ---- for other broker modules (group coordinator, tools) ---- */

/* Completion of gr_rm_append: error is a Kafka code; base_offset the first offset appended.
 * Called exactly once, on any thread (possibly before gr_rm_append returns). */
typedef void (*gr_rm_append_cb)(void *ctx, int16_t error, int64_t base_offset, int64_t log_start_offset);

/* Appends batches (modified in place: offsets/epochs assigned; the caller keeps the buffer alive
 * until the callback) to topic-partition as leader. acks: 0/1 complete after the local append,
 * -1 when the ISR has it (the high watermark passed it) or after timeout_ms with
 * REQUEST_TIMED_OUT. Any thread. */
void gr_rm_append(struct gr_replica_manager *rm, const char *topic, int32_t partition, uint8_t *batches,
                  size_t len, int16_t acks, int32_t timeout_ms, gr_rm_append_cb cb, void *ctx);

/* Reads from a local leader replica: below the high watermark when committed_only, else up to
 * the log end. res is as in gr_plog_read (caller frees res->data). Returns a Kafka error. */
int16_t gr_rm_read(struct gr_replica_manager *rm, const char *topic, int32_t partition, int64_t offset,
                   int32_t max_bytes, bool committed_only, struct gr_plog_read_result *res);

/* Offsets of a hosted partition; false if it is not hosted here. leader_epoch -1 and is_leader
 * false on followers. Any thread. */
struct gr_rm_partition_info {
    bool is_leader;
    int32_t leader;
    int32_t leader_epoch;
    /* Leader: the leader epoch at which this broker became the leader from non-leader (Kafka's
     * makeLeader returning true; gr_replica_state): the same across a new leader epoch that keeps
     * it leader (an ISR change by the controller), later after a lost and regained leadership (a
     * new leader always takes a new epoch). -1 when not the leader. The group and transaction
     * coordinators load a partition once per elected epoch. */
    int32_t elected_epoch;
    int64_t log_start_offset;
    int64_t high_watermark;
    int64_t log_end_offset;
    int nisr;
    int32_t isr[32];
};
bool gr_rm_partition_info(struct gr_replica_manager *rm, const char *topic, int32_t partition,
                          struct gr_rm_partition_info *out);

/* DescribeProducers (replication/active_producers.c): copies of the producer states of a hosted
 * replica (leader or follower, as Kafka); *out malloc'd (caller frees; NULL when *n is 0).
 * Returns NONE, NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION (not hosted),
 * KAFKA_STORAGE_ERROR (its log directory failed). Any thread. */
struct gr_pstate_entry;
int16_t gr_rm_active_producers(struct gr_replica_manager *rm, const char *topic, int32_t partition,
                               struct gr_pstate_entry **out, int *n);

/* ---- internal to the replication module (replica_manager_ops.c, which adapts them for the
 * fetchers and the AlterPartition sender, and handle_*.c) ---- */

/* A reference to a hosted partition, or NULL. */
struct gr_rm_partition *gr_rm_get_partition(struct gr_replica_manager *rm, const char *topic, int32_t partition);
void gr_rm_partition_unref(struct gr_rm_partition *p);

/* Sets glibc's malloc policy for a broker process (one arena per core, see replica_manager.c).
 * Call first thing in main, before any thread starts. */
void gr_rm_malloc_policy(void);

/* Kafka error when topic-partition is not hosted: NOT_LEADER_OR_FOLLOWER if the metadata cache
 * knows it, else UNKNOWN_TOPIC_OR_PARTITION. */
int16_t gr_rm_not_hosted_error(struct gr_replica_manager *rm, const char *topic, int32_t partition);

/* Follower side, called (through gr_rm_fetcher_ops) by a fetcher thread for a partition it
 * fetches at leader_epoch. */
/* Appends fetched batches (skipping whole batches below the LEO), moves the follower HW to
 * min(leader_hw, LEO) and raises the log start offset to the leader's (when <= that HW; after
 * DeleteRecords). Returns 0, -ESTALE (the partition's epoch/leader changed: drop the data),
 * -ERANGE (data does not start at our LEO: truncate again), GR_ECORRUPT or -errno. */
int gr_rm_follower_append(struct gr_replica_manager *rm, struct gr_rm_partition *p, int32_t leader_epoch,
                          const uint8_t *records, size_t len, int64_t leader_hw, int64_t leader_log_start);
/* Local latest epoch and the end offset of `epoch` in the local log (Kafka's endOffsetFor). */
int32_t gr_rm_latest_epoch(struct gr_rm_partition *p);
int64_t gr_rm_log_end_offset(struct gr_rm_partition *p);
int64_t gr_rm_log_start_offset(struct gr_rm_partition *p);
void gr_rm_end_offset_for_epoch(struct gr_rm_partition *p, int32_t epoch, int64_t *end_offset, int32_t *epoch_out);
/* Truncates the follower log to offset (never below... the caller decides); fully = start the
 * log afresh at offset. Lowers the HW to the new LEO if needed. Returns 0, -ESTALE or -errno. */
int gr_rm_follower_truncate(struct gr_replica_manager *rm, struct gr_rm_partition *p, int32_t leader_epoch,
                            int64_t offset, bool fully);
int64_t gr_rm_high_watermark(struct gr_rm_partition *p);

/* AlterPartition answer for one partition (through gr_rm_alter_partition_ops). Returns -1 when the item should be sent
 * again, else 0. */
int gr_rm_alter_partition_result(struct gr_replica_manager *rm, const char *topic, int32_t partition, int16_t error,
                                 int32_t leader_epoch, const int32_t *isr, int nisr, int32_t zk_version);

struct gr_broker *gr_rm_broker(struct gr_replica_manager *rm);
/* Re-reads the effective config of `topic` (NULL = every hosted topic) and applies it to its
 * hosted partitions at once: segment/roll/index/flush/max.message.bytes (gr_plog_set_config),
 * retention.ms/bytes and min.insync.replicas. A topic whose /config/topics read fails keeps the
 * settings in force. Returns 0, or the first failed read's error (kzk.h): the caller must retry
 * the change (the DynamicConfigManager hands it back to the /config/changes listener). The
 * DynamicConfigManager's thread; takes the registry's state-change lock briefly, so never call
 * it with that lock held. */
int gr_rm_reload_topic_config(struct gr_replica_manager *rm, const char *topic);

/* What DescribeLogDirs and the metrics report of one partition log this broker holds. */
struct gr_rm_log_info {
    int dir_idx; /* index in log.dirs */
    const char *topic;
    int32_t partition;
    int64_t size, log_start_offset, log_end_offset, high_watermark, segments;
};
/* Calls fn for every open log (no replica-manager or partition lock held; the log manager
 * holds a reference during the call). Any thread. */
void gr_rm_foreach_log(struct gr_replica_manager *rm, void (*fn)(void *ctx, const struct gr_rm_log_info *li),
                       void *ctx);

#endif
