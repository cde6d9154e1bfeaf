/* Log directory failure on the broker (Kafka 2.7's LogDirFailureChannel +
 * ReplicaManager.handleLogDirFailure + KafkaZkClient.propagateLogDirEvent).
 *
 * When an I/O error (EIO, ENOSPC, EROFS, EDQUOT, ENXIO, EFBIG, ENOTDIR, ENODEV) hits a log on
 * append (including its roll and a flush due by flush.messages/flush.ms) or read, the replica
 * manager reports it here with the index of the log's dir in log.dirs; the log manager's
 * background work (periodic flush, retention, checkpoint files, the cleaner) reports through
 * gr_plog_manager_set_io_error_handler, wired to gr_ldf_report by the replica manager. The dir
 * goes offline for the life of the process:
 *   - every partition whose log lives there answers KAFKA_STORAGE_ERROR (produce, fetch,
 *     follower appends, and LeaderAndIsr -- which is how the controller learns which replicas
 *     are gone: gr_ldf_check below);
 *   - a notification {"version":1,"broker":N,"event":1} is written to
 *     /log_dir_event_notification/log_dir_event_<seq> (by this module's thread, never by the
 *     reporting thread, which may hold partition or log locks);
 *   - when every log dir is offline the broker halts (exit code 1), as Kafka does.
 * The controller then probes the broker's replicas with LeaderAndIsr (LogDirEventNotification),
 * marks those answering KAFKA_STORAGE_ERROR offline and moves their leadership
 * (controller/offline_dirs.h).
 *
 * Test hook (a simulation, documented as such): a file named GR_LDF_INJECT_FILE at the root of a
 * log dir makes the module report that dir as failed with EIO within ~0.5 s, exactly as a real
 * I/O error on one of its logs would. Root can write into chmod'ed dirs and tests cannot mount a
 * small file system, so this is how the integration test triggers the failure path; the rest
 * (offline marking, errors, notification, controller reaction) is the production path.
 *
 * One instance per broker, found through the broker pointer (gr_ldf_of). Threading: report and
 * the queries may be called from any thread with any locks held (lock-free atomics); start/stop
 * on the owner thread. */
#ifndef GR_BROKER_LOG_DIR_FAILURE_H
#define GR_BROKER_LOG_DIR_FAILURE_H

#include <stdbool.h>
#include <stdint.h>

#define GR_LDF_INJECT_FILE "gregor-inject-io-error"

struct gr_broker;
struct gr_config;
struct gr_kzk;
struct gr_ldf;

/* Starts the module for broker b (cfg->log_dirs, kzk borrowed; must outlive it). NULL if the
 * thread cannot start (logged). */
struct gr_ldf *gr_ldf_start(struct gr_broker *b, const struct gr_config *cfg, struct gr_kzk *kzk);
/* Stops the thread and frees; gr_ldf_of(b) returns NULL afterwards. NULL ignored. */
void gr_ldf_stop(struct gr_ldf *l);
/* The module of broker b, or NULL (not started: nothing is ever offline). */
struct gr_ldf *gr_ldf_of(struct gr_broker *b);

/* Is the error (negative errno) one that takes a log dir offline? */
bool gr_ldf_is_dir_error(int err);
/* Reports an I/O error (negative errno) on a log in dir_idx; what names the operation for the
 * log ("append to t-0"). Errors that are not dir errors are ignored. Returns true if the dir is
 * (now) offline. b or its module may be missing (then false). */
bool gr_ldf_report(struct gr_broker *b, int dir_idx, int err, const char *what);
/* KAFKA_STORAGE_ERROR if dir_idx of broker b is offline, else NONE. */
int16_t gr_ldf_check(struct gr_broker *b, int dir_idx);
bool gr_ldf_dir_offline(struct gr_ldf *l, int dir_idx);
/* KAFKA_STORAGE_ERROR if broker b hosts a log of topic-partition on an offline dir (looked up in
 * the replica manager's log manager), else NONE. Cheap when no dir is offline. Any thread; takes
 * only the log manager's own lock. */
int16_t gr_ldf_check_partition(struct gr_broker *b, const char *topic, int32_t partition);
int gr_ldf_offline_count(struct gr_ldf *l);

#endif
