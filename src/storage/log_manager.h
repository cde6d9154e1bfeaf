/* The log manager (Kafka's LogManager): every partition log under log.dirs, the checkpoint files
 * at each log dir root, and ONE background thread for periodic work (no per-partition thread):
 *
 *   task                                  period (config)                             default
 *   flush logs whose flush.ms elapsed     log.flush.scheduler.interval.ms            never
 *   delete segments past retention        log.retention.check.interval.ms            5 min
 *   write recovery-point-offset-checkpoint log.flush.offset.checkpoint.interval.ms   60 s
 *   write replication-offset-checkpoint   replica.high.watermark.checkpoint.interval.ms 5 s
 *   write log-start-offset-checkpoint     log.flush.start.offset.checkpoint.interval.ms 60 s
 *
 * plus log.cleaner.threads cleaner threads (log.cleaner.enable): each picks the compacted log
 * (cleanup.policy compact) with the highest dirty ratio above min.cleanable.dirty.ratio (or past
 * max.compaction.lag.ms), cleans it (storage/log_cleaner.h) and writes cleaner-offset-checkpoint;
 * with nothing to clean it sleeps log.cleaner.backoff.ms.
 *
 * Start-up (gr_plog_manager_open): for each log dir, creates it if missing, checks
 * meta.properties against broker.id / cluster.id (a mismatch refuses to start: GR_EMETA_*),
 * reads both checkpoints, removes "*-delete" directories left by a deletion that was
 * interrupted, leaves "*-stray" directories alone (gr_plog_manager_move_aside: kept, never
 * opened, served or removed; Kafka 3.9 loads them into a pool it never serves, Gregor does not
 * even open them, so nothing -- recovery included -- ever writes into them), and opens
 * (recovering from the checkpointed recovery point) every "<topic>-<partition>" directory. The high watermark of each log starts at its
 * replication-offset-checkpoint value clamped to [log start, log end].
 *
 * Handles: each partition log is a refcounted struct gr_lm_log. Acquire returns a reference the
 * caller releases; gr_plog_manager_remove takes the log out of the map at once, and the log is
 * closed (or its directory deleted) when the last reference goes, so a handler still reading it
 * is never left with a dangling pointer (storage/log.h rule 3).
 *
 * Threading: every function may be called from any thread. The high watermark stored here is
 * the one written to replication-offset-checkpoint; the replica manager owns its semantics. */
#ifndef GR_BROKER_LOG_MANAGER_H
#define GR_BROKER_LOG_MANAGER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "storage/log.h"

struct gr_config;
struct gr_plog_manager;

/* One partition log. Fields are read-only for users except through the functions below. */
struct gr_lm_log {
    char *topic;              /* shared with the manager's other entries of the topic: read-only */
    int32_t partition;
    struct gr_plog *log;
    int dir_idx;              /* index in log.dirs */
    _Atomic int64_t hw;       /* high watermark (checkpointed) */
    _Atomic int64_t retention_ms;    /* topic retention.ms (or the broker default) */
    _Atomic int64_t retention_bytes; /* topic retention.bytes (or the broker default) */
    _Atomic int64_t cleaner_checkpoint; /* first dirty offset (cleaner-offset-checkpoint), 0 = none */
    atomic_bool cleaning;               /* claimed by a cleaner thread (for good by a deletion) */
    atomic_bool abort_cleaning;         /* set by a deletion: a pass on this log ends early */
    atomic_bool uncleanable;            /* a pass failed (KIP-346): never picked again until the
                                         * log is deleted or the broker restarts */
    _Atomic int64_t clean_retry_ms;     /* wall ms before which the cleaner leaves it alone (a
                                         * pass failed with an errno that is no dir failure) */
    /* private */
    struct gr_plog_manager *mgr;
    _Atomic int64_t cleaner_floor; /* lowest truncation end since the running pass started */
    atomic_int refs;
    bool removed;             /* out of the map */
    bool delete_on_release;   /* remove the directory when the last reference goes */
    struct gr_lm_log *next;   /* hash chain */
};

/* Opens the log manager over cfg->log_dirs (cfg borrowed for the manager's life). cluster_id may
 * be NULL or "" when unknown (it is then not checked, and not written). Starts the background
 * thread. Returns 0 and *out, or GR_EMETA_BROKER_ID / GR_EMETA_CLUSTER_ID (a log dir belongs to
 * another broker/cluster: the broker must refuse to start; the reason is logged at ERROR),
 * GR_ECORRUPT or -errno. */
int gr_plog_manager_open(const struct gr_config *cfg, int32_t broker_id, const char *cluster_id,
                        struct gr_plog_manager **out);

/* A topic's storage settings (its /config/topics override over the broker's configs), as
 * Kafka's LogManager gets them in topicConfigs before it loads any log. */
struct gr_lm_topic_config {
    struct gr_plog_config lc;
    int64_t retention_ms;
    int64_t retention_bytes;
};
/* Fills out[i] for topics[i] (n sorted, distinct names: the topics with a log on disk). Returns 0,
 * or a negative error: the manager does not start (Kafka's LogManager.apply throws when
 * zkClient.getLogConfigs fails). lm is the manager being opened (no log is loaded yet, nothing
 * runs). */
typedef int (*gr_plog_manager_topic_configs_fn)(void *ctx, struct gr_plog_manager *lm, const char *const *topics, int n,
                                                struct gr_lm_topic_config *out);
/* gr_plog_manager_open, with fn giving the settings of every topic whose logs are on disk before
 * any log is loaded (Kafka's LogManager.apply reads topicConfigs before loadLogs): each log is
 * recovered and loaded with its topic's settings (NULL fn: server.properties', as
 * gr_plog_manager_open). Without this a retention pass or a cleaning pass between start-up and
 * the first LeaderAndIsr would apply the broker defaults (cleanup.policy=delete,
 * log.retention.ms) to compacted topics and to topics with retention.ms=-1. */
int gr_plog_manager_open_with_configs(const struct gr_config *cfg, int32_t broker_id, const char *cluster_id,
                                      gr_plog_manager_topic_configs_fn fn, void *fn_ctx, struct gr_plog_manager **out);

/* Stops the background thread, flushes every log, writes the checkpoints of every log dir,
 * and closes the logs that are not referenced any more (references still held are closed when
 * released). NULL is ignored. */
void gr_plog_manager_close(struct gr_plog_manager *lm);

/* The log config derived from the broker config (segment.bytes, segment.ms, ...). */
void gr_plog_manager_default_config(const struct gr_plog_manager *lm, struct gr_plog_config *out);

/* A reference to topic-partition's log, or NULL if there is none. */
struct gr_lm_log *gr_plog_manager_acquire(struct gr_plog_manager *lm, const char *topic, int32_t partition);

/* A reference to topic-partition's log, creating it (in the log dir holding the fewest
 * partitions) with cfg (NULL: the defaults) if missing. Returns 0 and *out, or -errno. */
int gr_plog_manager_get_or_create(struct gr_plog_manager *lm, const char *topic, int32_t partition,
                                 const struct gr_plog_config *cfg, struct gr_lm_log **out);

/* Drops a reference (NULL ignored). */
void gr_plog_manager_release(struct gr_plog_manager *lm, struct gr_lm_log *l);

/* Takes topic-partition out of the manager. delete_dir: its directory is removed once the last
 * reference is released (else the log is flushed and closed then). Returns 0 or -ENOENT. */
int gr_plog_manager_remove(struct gr_plog_manager *lm, const char *topic, int32_t partition, bool delete_dir);

/* Deletes a leftover "<topic>-<partition>" directory that is not open (StopReplica(delete) of a
 * partition the broker no longer hosts). Returns 0, -ENOENT or -errno. */
int gr_plog_manager_delete_orphan(struct gr_plog_manager *lm, const char *topic, int32_t partition);

/* Moves topic-partition's log aside as a stray log (Kafka 3.7+'s asyncDelete(isStray = true)):
 * its directory is renamed "<topic>-<partition>.<id>-stray" at once (storage/log.h
 * gr_plog_rename_stray; the new path into path_out, cap bytes, may be NULL), the log leaves the
 * manager and is flushed and closed when its last reference goes; the directory is KEPT (never
 * loaded, served or removed by Gregor). A log of the same name created afterwards starts empty
 * in a new directory. Returns 0, -ENOENT (no such log) or -errno of the rename (nothing changed;
 * reported to the I/O error handler as a failure of the log's dir).
 * Test hook: GREGOR_TEST_STRAY_CRASH=moved kills the process right after the rename. */
int gr_plog_manager_move_aside(struct gr_plog_manager *lm, const char *topic, int32_t partition, char *path_out,
                               size_t cap);

/* Unit tests only: fn(arg) runs in every checkpoint write between its snapshot of the logs and
 * the files' writing (NULL: none). Not thread-safe: set it while no checkpoint is written. */
void gr_plog_manager_set_checkpoint_test_hook(void (*fn)(void *arg), void *arg);

/* Number of "*-stray" directories in log dir dir_idx now (a listing; 0 when it cannot be read).
 * Metric gregor.log:type=LogManager,name=StrayLogs,logDirectory=<dir>. */
int gr_plog_manager_count_stray(struct gr_plog_manager *lm, int dir_idx);

/* Number of open logs. */
int gr_plog_manager_count(struct gr_plog_manager *lm);

/* Calls fn for every open log (with a reference held during the call, no manager lock held). */
void gr_plog_manager_foreach(struct gr_plog_manager *lm, void (*fn)(void *ctx, struct gr_lm_log *l), void *ctx);

/* Kafka 2.7's PeriodicProducerExpirationCheck, run by the manager's thread every
 * GR_PSTATE_EXPIRATION_CHECK_INTERVAL_MS (10 min) and callable now (tests): drops the expired
 * producers (and verification guards) of every log at now_ms (wall clock), idle logs included.
 * Returns how many producers went. */
int gr_plog_manager_expire_producers(struct gr_plog_manager *lm, int64_t now_ms);

/* Runs one cleaner round now (tests): cleans the dirtiest eligible log, if any. Returns 1 when a
 * log was cleaned, 0 when none qualified, or -errno. */
int gr_plog_manager_clean_once(struct gr_plog_manager *lm);

/* Writes the checkpoint files of every log dir now (also done periodically). Returns 0 or the
 * first error (also reported to the I/O error handler). */
int gr_plog_manager_checkpoint(struct gr_plog_manager *lm);

/* Kafka's LogDirFailureChannel.maybeAddOfflineLogDir seen from the log manager: fn is called
 * with the dir's index in log.dirs, the negative errno and what failed ("flushing t-0") whenever
 * a write, fsync or rename of the manager's own work fails: the periodic flush, retention,
 * checkpoint files, the cleaner. It returns true when the dir is now offline; the manager then
 * stops its background work (flush, retention, checkpoints, cleaning) in that dir, as Kafka
 * removes the dir's logs. fn runs on the failing thread with no manager lock held and must not
 * block. Set once, right after gr_plog_manager_open; NULL fn: errors are only logged. */
typedef bool (*gr_plog_manager_io_error_fn)(void *ctx, int dir_idx, int err, const char *what);
void gr_plog_manager_set_io_error_handler(struct gr_plog_manager *lm, gr_plog_manager_io_error_fn fn, void *ctx);
/* Routes an I/O error of log l (e.g. from an append) the same way; returns fn's answer. */
bool gr_plog_manager_report_io_error(struct gr_plog_manager *lm, int dir_idx, int err, const char *what);

/* Metrics collector (common/metrics.h gr_metrics_collector_fn; arg = the manager): Kafka's
 * kafka.log:type=LogCleanerManager,name=uncleanable-partitions-count and uncleanable-bytes, one
 * series per log dir (tag logDirectory). */
struct gr_prom_out;
void gr_plog_manager_metrics_collector(void *lm, struct gr_prom_out *out);

#endif
