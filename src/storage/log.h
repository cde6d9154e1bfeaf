/* The partition log: one `struct gr_plog` per partition directory `<log.dir>/<topic>-<partition>/`.
 *
 * Layout (Kafka's; see docs/STORAGE.md for byte tables):
 *   00000000000000000000.log    segment: RecordBatch v2 batches back to back, as received
 *                               (offsets and partitionLeaderEpoch assigned by the leader)
 *   00000000000000000000.index  sparse offset index: (relativeOffset u32, position u32) BE
 *   leader-epoch-checkpoint     "0\n<N>\n" then "<epoch> <startOffset>\n" lines
 *   00000000000000000000.timeindex  sparse time index: (timestamp i64, relativeOffset u32) BE
 *   partition.metadata          the topic id (KIP-516; storage/partition_metadata.h)
 * Segment files are named by their base offset (%020lld).
 *
 * Lifetime and threading rules:
 *  1. gr_plog_open_dir() returns a log the caller owns; gr_plog_close() or gr_plog_delete() ends it.
 *  2. Every other function may be called from any thread at any time between those two; each
 *     takes the log's one mutex (appends, truncations and retention are serialised per log;
 *     different logs never contend). gr_plog_read holds it only to locate the data and reads
 *     the bytes after releasing it; the cleaner (log_cleaner.h) holds it only to capture
 *     segments and to swap cleaned ones in.
 *  3. gr_plog_close()/gr_plog_delete() must not race with any other call on the same log (the
 *     caller stops using the log first, e.g. after removing it from its partition map).
 *  4. Results are copies: gr_plog_read() returns malloc'd bytes the caller frees; nothing points
 *     into the log after a call returns.
 *
 * Open files: bounded independently of the number of logs. The active (last) segment's .log
 * descriptor lives in a process-wide LRU cache (storage/fd_cache.h, bound set with
 * gr_storage_set_max_open_files) and is reopened transparently after an eviction. Older
 * segments are opened on demand for one read and closed again. No .index descriptor is held:
 * every segment's sparse index is kept in memory (8 bytes per index_interval_bytes of data,
 * i.e. ~0.2% of the log size at the default 4096) and written to the .index file at flush,
 * roll, truncation and close. No threads are created.
 *
 * Return conventions: functions return 0 or a negative errno / GR_E* code (I/O problems); the
 * Kafka error to send to a client travels separately as int16_t (GR_KERR_*). */
#ifndef GR_STORAGE_LOG_H
#define GR_STORAGE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/uuid.h"
#include "storage/log_validator.h"

struct gr_plog;
struct gr_pstate_entry;

/* Per-log (topic) configuration, Kafka names in comments. */
struct gr_plog_config {
    int32_t segment_bytes;        /* segment.bytes          default 1 GiB */
    int64_t roll_ms;              /* segment.ms             default 7 days */
    int64_t roll_jitter_ms;       /* segment.jitter.ms      default 0: each new segment rolls
                                     up to this much (random, < segment.ms) earlier */
    int32_t index_interval_bytes; /* index.interval.bytes   default 4096 */
    int32_t max_message_bytes;    /* max.message.bytes      default 1048588 (per batch) */
    int64_t flush_messages;       /* flush.messages         default INT64_MAX (never) */
    int64_t flush_ms;             /* flush.ms               default INT64_MAX (never) */
    int64_t producer_id_expiration_ms; /* broker transactional.id.expiration.ms, default 7 days:
                                          idle producers' state is dropped (Kafka 2.7) */
    int32_t index_max_bytes;      /* segment.index.bytes    default 10 MiB: a segment whose
                                     .index or .timeindex would outgrow it rolls */
    /* cleanup.policy: "delete" (default), "compact", "compact,delete" */
    bool cleanup_delete;          /* retention by time/size applies */
    bool cleanup_compact;         /* the log cleaner compacts this log */
    double min_cleanable_dirty_ratio; /* min.cleanable.dirty.ratio  default 0.5 */
    int64_t delete_retention_ms;  /* delete.retention.ms    default 1 day (tombstones) */
    int64_t min_compaction_lag_ms; /* min.compaction.lag.ms default 0 */
    int64_t max_compaction_lag_ms; /* max.compaction.lag.ms default INT64_MAX */
    int64_t file_delete_delay_ms; /* file.delete.delay.ms   default 60000 */
    bool log_append_time;         /* message.timestamp.type: false CreateTime (default), true
                                     LogAppendTime (the leader stamps batches) */
    int64_t timestamp_difference_max_ms; /* message.timestamp.difference.max.ms, default
                                            INT64_MAX; CreateTime only (INVALID_TIMESTAMP) */
    int compression_type;         /* compression.type: GR_COMPRESSION_PRODUCER (-1, default: keep
                                     the producer's codec) or the codec id 0-4 leader appends of
                                     client batches are stored in (storage/recompression.h) */
    bool downconversion_enable;   /* message.downconversion.enable, default true: false refuses
                                     Fetch v0-v3 consumers (UNSUPPORTED_VERSION, api/handle_fetch.c) */
};

/* Parses a cleanup.policy value into cfg (cleanup_delete/cleanup_compact). 0 or -EINVAL. */
int gr_plog_parse_cleanup_policy(const char *v, struct gr_plog_config *cfg);
/* Parses a message.timestamp.type value ("CreateTime"/"LogAppendTime"). 0 or -EINVAL. */
int gr_plog_parse_timestamp_type(const char *v, struct gr_plog_config *cfg);
/* Parses a compression.type value ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
 * into cfg->compression_type. 0 or -EINVAL. */
int gr_plog_parse_compression_type(const char *v, struct gr_plog_config *cfg);

/* Fills Kafka's defaults. */
void gr_plog_config_defaults(struct gr_plog_config *cfg);

/* Opens the partition directory `dir` and recovers it; when `dir` does not exist, a new empty log
 * whose directory is made by its first write (gr_plog_has_dir; see log.c's open_new).
 * Segments whose data may lie at or above `recovery_point` (the offset up to which the log
 * is known to have been fsynced, from recovery-point-offset-checkpoint; pass 0 when unknown
 * to recover everything) are scanned batch by batch: headers, CRC-32C, record structure and
 * offset monotonicity are checked. At the first invalid byte the segment is truncated there
 * (a warning logs how many bytes were dropped), later segments are deleted, the offset index
 * of recovered segments is rebuilt, and leader epochs seen in batches are re-assigned to the
 * epoch cache. Older segments only get their index sanity-checked (rebuilt if bad).
 * cfg is copied. On success *out is a new log owned by the caller.
 * Returns 0, -errno (I/O), or GR_ECONFIG (bad cfg). Named _dir because common/log.h already
 * exports gr_log_open(). */
int gr_plog_open_dir(const char *dir, const struct gr_plog_config *cfg, int64_t recovery_point,
                    struct gr_plog **out);

/* Does the log's directory exist yet? (false: a new log nothing was written to) */
bool gr_plog_has_dir(struct gr_plog *log);

/* Writes index entries not yet in the .index files, closes fds and frees the log. Does NOT
 * fsync: call gr_plog_flush() first for a clean shutdown (then gr_plog_recovery_point() equals
 * gr_plog_end_offset()). */
void gr_plog_close(struct gr_plog *log);

/* Closes the log and removes its directory and everything in it. Returns 0 or -errno (the log
 * is freed either way). */
int gr_plog_delete(struct gr_plog *log);

/* Room left in a log's directory path for gr_plog_rename_for_delete's suffix. */
#define GR_PLOG_DELETE_SUFFIX_LEN 40 /* ".<32 hex digits>-delete" (longer than "-stray") */

/* Kafka's LogManager.asyncDelete: renames the log's directory to
 * "<dir>.<32 random hex digits>-delete" at once (the parent directory fsynced), so that a
 * partition of the same name can be created at the old path while this log is still referenced;
 * the log keeps working from the new path (every path the log and its segments, producer state,
 * epoch cache and transaction index make is built from it) until gr_plog_delete removes it.
 * A log without a directory yet just takes the new path. The path is rewritten in place under
 * the log's mutex, so the caller must first stop every user that reads the path without it
 * (the cleaner: gr_cleaner_params.abort). Returns 0 or -errno (the log keeps its old path). */
int gr_plog_rename_for_delete(struct gr_plog *log);

/* Kafka 3.7+'s stray logs (LogManager.asyncDelete(isStray = true), UnifiedLog.logStrayDirName):
 * renames the log's directory to "<topic>-<partition>.<32 random hex digits>-stray" (the topic
 * cut so that the name stays within 255 bytes), with the same rules as gr_plog_rename_for_delete.
 * A stray directory is kept: the log manager never opens, serves or removes it (an operator
 * restores or removes it by hand: docs/STORAGE.md). The new path goes into path_out (cap bytes;
 * may be NULL). Returns 0 or -errno (the log keeps its old path). */
#define GR_PLOG_STRAY_SUFFIX "-stray"
int gr_plog_rename_stray(struct gr_plog *log, char *path_out, size_t cap);

/* Topic id (KIP-516, Kafka's UnifiedLog.topicId / assignTopicId). An existing directory's
 * partition.metadata is read when the log is opened.
 * gr_plog_topic_id: 1 and *out when the log has an id, 0 when it has none (created before ids,
 * or not assigned yet), GR_ECORRUPT when its partition.metadata could not be read (the log must
 * not be served under any id: the caller answers KAFKA_STORAGE_ERROR, as Kafka fails the log).
 * gr_plog_assign_topic_id: a log without an id adopts id: partition.metadata is written and
 * fsynced now when the directory exists, else by the first write that makes the directory,
 * before any other file goes into it. 0 (also when the log already has this id), -EEXIST
 * when it has another one (Kafka's InconsistentTopicIdException), GR_ECORRUPT as above, or
 * -errno of the write (nothing changed). */
int gr_plog_topic_id(struct gr_plog *log, struct gr_uuid *out);
int gr_plog_assign_topic_id(struct gr_plog *log, const struct gr_uuid *id);

/* Copies the current configuration into *out. */
void gr_plog_get_config(struct gr_plog *log, struct gr_plog_config *out);

/* Replaces the configuration (e.g. after AlterConfigs). cfg is copied. */
int gr_plog_set_config(struct gr_plog *log, const struct gr_plog_config *cfg);

/* Truncation hook: fn(ctx, new_end) runs after every truncation that removed data
 * (gr_plog_truncate_to below the log end, gr_plog_truncate_fully_and_start_at) with the new log
 * end offset, under the log's mutex: it must only record (atomics), never call into the log. One
 * per log (NULL fn: none); set before the log is shared. The log manager lowers the cleaner
 * checkpoint with it (Kafka's LogCleanerManager.maybeTruncateCheckpoint). */
typedef void (*gr_plog_truncated_fn)(void *ctx, int64_t new_end);
void gr_plog_set_truncation_hook(struct gr_plog *log, gr_plog_truncated_fn fn, void *ctx);

/* Result of an append. */
struct gr_append_info {
    int16_t error;             /* Kafka error for the Produce response (GR_KERR_NONE on success) */
    int64_t first_offset;      /* offset of the first record appended (-1 on error) */
    int64_t last_offset;       /* offset of the last record appended (-1 on error) */
    int64_t max_timestamp;     /* largest batch maxTimestamp (-1 if none) */
    int64_t offset_of_max_timestamp;
    int64_t record_count;      /* records appended */
    int32_t batch_count;
    int64_t log_append_time;   /* -1 (CreateTime), except for a duplicate idempotent batch: its
                                  cached maxTimestamp, as Kafka 2.7 answers (Log.append) */
    int64_t log_start_offset;  /* after the append */
    struct gr_validator_result validation; /* leader appends: the record-level result (its
                                              record errors for Produce v8+), when error came
                                              from the log validator */
};

/* Leader append of a Produce request's records for this partition.
 * `batches` (len bytes, owned by the caller) is modified in place: every batch gets its
 * baseOffset assigned from the log end offset and partitionLeaderEpoch = leader_epoch -- unless
 * the log stores a rebuilt copy (storage/recompression.h gr_batch_rebuild: the config's
 * compression_type differs from the batch's codec, or its offsetDeltas are not 0..n-1;
 * then the copy gets them and `batches` is left as it was after validation). Checks, in order:
 * every batch's size <= max_message_bytes (else MESSAGE_TOO_LARGE), every batch's header and CRC
 * validate as a client batch's (batch.h GR_BATCH_V_CLIENT; failures give CORRUPT_MESSAGE,
 * UNSUPPORTED_FOR_MESSAGE_FORMAT or INVALID_RECORD), exactly one batch (Kafka 2.7's
 * LogValidator: more than one is INVALID_RECORD), its records, compressed or not, pass the log
 * validator (log_validator.h: errors and record errors in info->validation; a CreateTime
 * batch's maxTimestamp is then set to its records' largest), the rebuild if any (errors
 * as recompression.h; a rebuilt batch above max_message_bytes is MESSAGE_TOO_LARGE), the
 * whole set <= segment_bytes (else
 * RECORD_LIST_TOO_LARGE). Nothing is written unless all pass. A new leader_epoch is recorded
 * in the epoch cache at first_offset. The segment rolls first if the set does not fit
 * (segment_bytes), roll_ms has elapsed, or relative offsets would overflow; a roll fsyncs the
 * old segment and advances the recovery point. flush.messages/flush.ms are honoured.
 * Returns 0 when the append was processed (check info->error), or -errno/GR_E* on I/O failure
 * (info->error = KAFKA_STORAGE_ERROR; the log is rolled back to its previous end). */
int gr_plog_append_as_leader(struct gr_plog *log, uint8_t *batches, size_t len, int32_t leader_epoch,
                            struct gr_append_info *info);

/* Follower append of batches fetched from the leader (offsets and epochs already set).
 * The buffer must hold whole batches that validate (batch.h, without GR_BATCH_V_CLIENT: CRC,
 * records, counts) whose offsets rise and start at or after the log end offset (gaps are allowed:
 * a compacted leader log has them, as in Kafka). Epochs are recorded in the cache.
 * Returns 0; GR_ECORRUPT for invalid batches (info->error = CORRUPT_MESSAGE or similar);
 * -ERANGE when the first offset is below the log end offset or offsets do not rise
 * (info->error = OFFSET_OUT_OF_RANGE); -errno on I/O failure. info may be NULL. */
int gr_plog_append_as_follower(struct gr_plog *log, const uint8_t *batches, size_t len, struct gr_append_info *info);

/* Result of a read. */
struct gr_plog_read_result {
    int16_t error;            /* NONE or OFFSET_OUT_OF_RANGE */
    uint8_t *data;            /* malloc'd whole batches (caller frees), NULL when len == 0 */
    size_t len;
    int64_t first_offset;     /* baseOffset of the first batch returned, -1 if none */
    int64_t next_offset;      /* lastOffset + 1 of the last batch returned, `offset` if none */
    int64_t log_start_offset; /* at the time of the read */
    int64_t log_end_offset;
};

/* Reads whole batches starting with the batch that contains `offset` (its first bytes may
 * precede `offset`; clients skip them, as in Kafka). Stops before a batch that would make the
 * result exceed max_bytes — except that when min_one_batch is true the first batch is returned
 * whole even if larger (Kafka's minOneMessage, set for the first partition of a Fetch). Never
 * returns a batch whose lastOffset >= max_offset when max_offset >= 0 (pass the high watermark
 * for consumers, -1 for followers). Reads stay within one segment (like Kafka), moving to the
 * next one only when the first holds nothing at or after `offset`.
 * OFFSET_OUT_OF_RANGE when offset < log start offset or offset > log end offset; offset ==
 * log end offset gives an empty result with NONE. Returns 0 or -errno (I/O). */
int gr_plog_read(struct gr_plog *log, int64_t offset, int32_t max_bytes, int64_t max_offset, bool min_one_batch,
                struct gr_plog_read_result *res);

/* Zero-copy read (Fetch over sendfile): the same batches gr_plog_read would return, as a file
 * region: out->fd (a descriptor the caller owns and closes, -1 when len == 0), out->pos and
 * out->len (whole batches). Only batch headers are read. Returns 0 or -errno. */
struct gr_plog_slice {
    int16_t error;
    int fd;
    int64_t pos;
    size_t len;
    int64_t first_offset, next_offset, log_start_offset, log_end_offset;
};
int gr_plog_read_slice(struct gr_plog *log, int64_t offset, int32_t max_bytes, int64_t max_offset, bool min_one_batch,
                       struct gr_plog_slice *out);

/* Removes every batch with offsets >= `offset` (a batch straddling `offset` is removed whole, so
 * the new log end offset may be below `offset`). Later segments are deleted, the index and the
 * epoch cache are truncated, the recovery point is lowered. If offset is below the first
 * segment's base offset this is gr_plog_truncate_fully_and_start_at(offset). No-op if offset >=
 * log end offset. Returns 0 or -errno. */
int gr_plog_truncate_to(struct gr_plog *log, int64_t offset);

/* Deletes all segments and starts an empty log at `offset`: log start = log end = offset,
 * epoch cache cleared. Returns 0 or -errno. */
int gr_plog_truncate_fully_and_start_at(struct gr_plog *log, int64_t offset);

int64_t gr_plog_start_offset(struct gr_plog *log);
/* Kafka's maybeIncrementLogStartOffset (DeleteRecords on the leader, a follower following the
 * leader's log start, the log-start-offset-checkpoint at start-up): raises the log start offset
 * to new_start if higher. It may fall inside a segment: reads below it give OFFSET_OUT_OF_RANGE,
 * ListOffsets EARLIEST answers it, and retention deletes a segment once the next one starts at
 * or below it. The epoch cache and producer state are truncated from the start. The caller
 * checks new_start against the high watermark. Returns 0, or -ERANGE when new_start exceeds the
 * log end offset (nothing changes). */
int gr_plog_maybe_increment_log_start_offset(struct gr_plog *log, int64_t new_start);
/* The value for log-start-offset-checkpoint: the log start offset when it lies above the first
 * segment's base (Kafka checkpoints only those), else -1. */
int64_t gr_plog_log_start_checkpoint_value(struct gr_plog *log);
/* Log end offset and (gr_plog_start_offset) log start offset as of the end of the last critical
 * section that changed them: lock-free (one atomic load), for the per-fetch, per-partition
 * readers. Code that must act on the log at that exact LEO holds the log's lock instead. */
int64_t gr_plog_end_offset(struct gr_plog *log);
/* Offset below which everything has been fsynced (write it to recovery-point-offset-checkpoint). */
int64_t gr_plog_recovery_point(struct gr_plog *log);
/* Total bytes in all segments. */
int64_t gr_plog_size_bytes(struct gr_plog *log);
int gr_plog_segment_count(struct gr_plog *log);
/* The partition directory (owned by the log). */
const char *gr_plog_dir(const struct gr_plog *log);

#define GR_LIST_OFFSETS_LATEST (-1)
#define GR_LIST_OFFSETS_EARLIEST (-2)
#define GR_LIST_OFFSETS_MAX_TIMESTAMP (-3)   /* ListOffsets v7+, KIP-734 */
#define GR_LIST_OFFSETS_EARLIEST_LOCAL (-4)  /* v8+, KIP-405 */
#define GR_LIST_OFFSETS_LATEST_TIERED (-5)   /* v9+, KIP-1005 */

/* ListOffsets by timestamp. ts == -2: log start offset; ts == -1: log end offset (both with
 * *ts_out = -1). ts == -3 (MAX_TIMESTAMP): the record with the largest timestamp of the log (the
 * first segment holding the largest maxTimestamp, gr_segment_find_max_timestamp), with its
 * timestamp, whatever the log start offset (as Kafka 3.9). Otherwise the first record whose
 * timestamp >= ts: the earliest batch with maxTimestamp >= ts, then its first record with
 * timestamp >= ts (compressed batches are decompressed); the outputs are that record's offset
 * and timestamp. No such record: both -1. Returns 0 or -errno. */
int gr_plog_offset_for_timestamp(struct gr_plog *log, int64_t ts, int64_t *offset_out, int64_t *ts_out);

/* OffsetsForLeaderEpoch (KIP-101/KIP-279), with Kafka 2.7's LeaderEpochFileCache.endOffsetFor:
 *  - epoch == -1 or the cache is empty:             (-1, -1)
 *  - epoch == latest cached epoch:                  (epoch, log end offset)
 *  - epoch > latest cached epoch:                   (-1, -1)
 *  - otherwise, with H the smallest cached epoch > epoch and F the largest cached epoch <= epoch:
 *      F exists:   (F, startOffset(H));   F missing (epoch below the earliest): (epoch, startOffset(H))
 * Outputs: *end_offset, *epoch_out. Returns 0. */
int gr_plog_end_offset_for_epoch(struct gr_plog *log, int32_t epoch, int64_t *end_offset, int32_t *epoch_out);

/* Latest epoch in the cache, or -1 when empty. */
int32_t gr_plog_latest_epoch(struct gr_plog *log);

/* Copies up to max entries of the epoch cache (oldest first) into epochs/start_offsets and
 * returns the number of entries in the cache (may exceed max). */
int gr_plog_epoch_entries(struct gr_plog *log, int32_t *epochs, int64_t *start_offsets, int max);

/* Kafka's Log.deleteOldSegments: deletes whole segments, oldest first, each only if it lies wholly
 * below `hw` (the high watermark: its successor's base, or the log end offset for the active
 * segment, is <= hw) and is not an empty active segment: when cleanup.policy includes delete,
 * those expired by time (now_ms - segment's largest timestamp > retention_ms; the file mtime
 * stands in when no batch has a timestamp), then by size (while the log minus the oldest segment
 * still holds >= retention_bytes); then, whatever the policy, those whose successor starts at or
 * below the log start offset (after DeleteRecords). Negative retention_ms / retention_bytes
 * disable that rule. When every segment goes, a new empty active segment is rolled at the log end
 * offset first. Advances the log start offset to the first remaining segment and truncates the
 * epoch cache from the start. Returns the number of segments deleted (>= 0) or -errno. */
int gr_plog_apply_retention(struct gr_plog *log, int64_t hw, int64_t retention_ms, int64_t retention_bytes,
                            int64_t now_ms);

/* fsyncs the active segment's .log and .index (older segments were fsynced when they were
 * rolled; the .index file is first brought up to date; an evicted .log descriptor is reopened
 * for the fsync) and advances the recovery point to the log end offset. Does nothing when the
 * recovery point already is the log end offset (Kafka's flush(offset <= recoveryPoint): a new
 * empty log, or one flushed since its last append). Writes nothing else (the caller writes
 * recovery-point-offset-checkpoint). Returns 0 or -errno. */
int gr_plog_flush(struct gr_plog *log);

/* Flushes when flush_ms has elapsed since the last flush and there is unflushed data (for a
 * periodic broker task; appends check this too). Returns 0 or -errno. */
int gr_plog_flush_if_due(struct gr_plog *log);

/* ---- producer state (idempotence; storage/producer_state.h) ----
 * Every log keeps Kafka's ProducerStateManager: leader appends check epochs and sequences of
 * batches with a producerId (a retried batch still cached is acknowledged with its original
 * offsets and not appended: info->first_offset/last_offset are the original ones, record_count 0;
 * INVALID_PRODUCER_EPOCH / OUT_OF_ORDER_SEQUENCE_NUMBER / INVALID_TXN_STATE otherwise), follower
 * appends update it unchecked. `<offset>.snapshot` files are written at roll and close and the
 * state is rebuilt from the newest valid snapshot plus the log at open and after truncation. */

/* Copy of producer_id's state; false if the log has none. */
bool gr_plog_producer_state(struct gr_plog *log, int64_t producer_id, struct gr_pstate_entry *out);
int gr_plog_producer_count(struct gr_plog *log);
/* Copies of every producer's state (DescribeProducers); *out malloc'd (caller frees, NULL when
 * *n is 0). Returns 0 or -ENOMEM. */
int gr_plog_active_producers(struct gr_plog *log, struct gr_pstate_entry **out, int *n);
/* Drops producers idle for producer_id_expiration_ms at now_ms (wall clock); returns how many.
 * The log manager calls it every 10 minutes for every log (Kafka's
 * PeriodicProducerExpirationCheck); appends also do it when 10 minutes passed since the last. */
int gr_plog_remove_expired_producers(struct gr_plog *log, int64_t now_ms);

/* ---- transactions (Kafka 2.7 Log: LSO, aborted transactions; KIP-890 guards) ----
 * Markers (control batches) end a producer's open transaction on the partition; ABORT markers are
 * indexed in `<segment>.txnindex` (storage/txn_index.h). */

/* Appends marker batches from WriteTxnMarkers (coordinator = true: control batches allowed, only
 * epoch / coordinator-epoch checks: INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED);
 * coordinator = false is gr_plog_append_as_leader. */
int gr_plog_append_origin(struct gr_plog *log, uint8_t *batches, size_t len, int32_t leader_epoch, bool coordinator,
                          struct gr_append_info *info);
/* LSO for high watermark hw: the first offset of the earliest open transaction or of the earliest
 * completed one whose marker is not yet below hw, if that is below hw; else hw. */
int64_t gr_plog_last_stable_offset(struct gr_plog *log, int64_t hw);
/* Forgets completed transactions whose marker is below hw (followers call it as their HW moves,
 * leaders prune in gr_plog_last_stable_offset). */
void gr_plog_txn_hw_moved(struct gr_plog *log, int64_t hw);
/* Aborted transactions a read_committed fetch of [fetch_offset, upper_bound) needs (Kafka's
 * collectAbortedTransactions); *out malloc'd (caller frees), count returned. */
struct gr_aborted_txn;
int gr_plog_collect_aborted(struct gr_plog *log, int64_t fetch_offset, int64_t upper_bound,
                            struct gr_aborted_txn **out);
/* KIP-890 (producer_state.h): does a transactional batch of (pid, epoch) need verification;
 * start one (0: not needed, else the guard's token, set before the coordinator is asked); end
 * it with the coordinator's answer. */
bool gr_plog_txn_needs_verification(struct gr_plog *log, int64_t producer_id, int16_t epoch);
uint64_t gr_plog_txn_start_verification(struct gr_plog *log, int64_t producer_id, int16_t epoch);
void gr_plog_txn_end_verification(struct gr_plog *log, int64_t producer_id, uint64_t token, bool verified);

/* Parses a partition directory name "<topic>-<partition>" (the topic may contain '-'; the
 * partition is the part after the last '-'). Copies the topic into topic[0..topic_size).
 * Returns 0 or -EINVAL. */
int gr_plog_parse_dir_name(const char *name, char *topic, size_t topic_size, int32_t *partition);

#endif
