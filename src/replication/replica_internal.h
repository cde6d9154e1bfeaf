/* Private to the replica manager (replica_manager.c, replica_manager_ops.c, log_dir_failure.c,
 * last_offset_for_epoch.c) and the request handlers that reach into hosted partitions
 * (handle_produce.c, handle_fetch.c, handle_list_offsets.c, handle_offsets_for_leader_epoch.c).
 * Not the fetchers or the AlterPartition sender: they get ops (fetcher.h, alter_partition.h). */
#ifndef GR_BROKER_REPLICA_INTERNAL_H
#define GR_BROKER_REPLICA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "storage/log_manager.h"
#include "replication/alter_partition.h"
#include "replication/fetcher.h"
#include "replication/replica_manager.h"
#include "replication/replica_state.h"

struct gr_purgatory;

/* One hosted partition. Refcounted: the map holds one reference; lookups take one each. */
struct gr_rm_partition {
    /* the map's lookup reads only this first cache line of the entries it passes (issue 14: a
     * follower's fetch looks up every partition it follows, several times per round) */
    uint64_t key;        /* purgatory key */
    struct gr_rm_partition *next; /* map chain (map lock) */
    char *topic;         /* lml->topic (borrowed; lml is held until the last unref) */
    int32_t partition;
    atomic_int refs;
    pthread_mutex_t lock; /* everything below */
    struct gr_replica_state st;
    struct gr_lm_log *lml; /* the log (reference held); never NULL while hosted */
    int32_t min_isr;
    int32_t replication_factor; /* replicas minus those a reassignment is still adding (Kafka's
                                   AssignmentState.replicationFactor), set when it becomes leader */
    atomic_bool online;    /* false once stopped (StopReplica); written under lock, may be read
                              without it (a fetch's kept reference, handle_fetch.c) */
};

#define GR_RM_NBUCKETS_MIN 4096 /* the map doubles past 1 partition per bucket */

struct gr_replica_manager {
    struct gr_broker *b;
    const struct gr_config *cfg;
    int32_t broker_id;
    struct gr_plog_manager *lm;
    struct gr_purgatory *produce_purg;
    struct gr_purgatory *fetch_purg;
    struct gr_fetch_session_cache *fetch_sessions; /* KIP-227 (fetch_session.h) */
    struct gr_fetcher_manager *fetchers;
    struct gr_alter_partition *alter_partition;
    pthread_rwlock_t map_lock;
    struct gr_rm_partition **buckets; /* nbuckets chains, a power of two (map lock) */
    size_t nbuckets;
    int npartitions;
    pthread_t isr_thread;
    bool isr_thread_started;
    pthread_mutex_t tlock;
    pthread_cond_t tcond;
    bool stopping;
    bool shut_down;
    /* gr_mono_ms() after which the ISR thread returns freed heap to the system (malloc_trim),
     * set once LeaderAndIsr requests carried >= GR_RM_TRIM_MIN partitions (trim_parts, since
     * the last time); 0 none (replica_manager.c). */
    _Atomic int64_t trim_after_ms;
    _Atomic int64_t trim_again_ms; /* the follow-up trim once fetchers and sessions settled */
    long trim_rss_pages; /* RSS after the last trim (ISR thread only), 0 before the first check */
    atomic_int trim_parts;
    /* The last topic config read from /config/topics/<topic> (a LeaderAndIsr for thousands of
     * partitions of one topic reads it once). Guarded by the registry's state-change lock, which
     * every hook caller holds. */
    struct {
        char *topic;
        int64_t read_ms;
        struct gr_plog_config lc;
        int32_t min_isr;
        int64_t ret_ms, ret_bytes;
    } tcfg_cache;
    /* Topic configs read ahead for one LeaderAndIsr (hook_apply_lai: one pipelined ZooKeeper
     * read for every topic it creates partitions of, instead of a round trip per topic), sorted
     * by topic; empty outside that call. Same lock as tcfg_cache. */
    struct gr_rm_tcfg {
        char *topic;
        struct gr_plog_config lc;
        int32_t min_isr;
        int64_t ret_ms, ret_bytes;
    } *tcfg_pre;
    int n_tcfg_pre;
};

/* The ops the replica manager gives its fetchers and its AlterPartition sender (ctx = the replica
 * manager), and their settings from rm->cfg (replica_manager_ops.c). */
extern const struct gr_fetcher_ops gr_rm_fetcher_ops;
extern const struct gr_alter_partition_ops gr_rm_alter_partition_ops;
void gr_rm_fetcher_config(const struct gr_replica_manager *rm, struct gr_fetcher_config *out);
void gr_rm_alter_partition_config(const struct gr_replica_manager *rm, struct gr_alter_partition_config *out);

/* The Prometheus collector of the replica manager's gauges (replica_metrics.c); arg = rm.
 * Registered in b->metrics for the manager's running life. */
struct gr_prom_out;
void gr_rm_metrics_collector(void *arg, struct gr_prom_out *o);
/* Kafka's AssignmentState.replicationFactor of a LeaderAndIsr state: its replicas minus the ones a
 * reassignment is still adding (replica_metrics.c). A partition is under-replicated when its
 * leader's ISR is smaller than this, so an adding replica that has not caught up does not count. */
struct gr_partition_state;
int32_t gr_rm_replication_factor(const struct gr_partition_state *st);

/* The purgatory key of topic-partition. */
uint64_t gr_rm_key(const char *topic, int32_t partition);

/* Leader check used by every client-facing path, with p->lock held: NONE, or
 * NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for current_leader_epoch
 * (-1 = not checked, KIP-320). require_leader false accepts a follower replica too. */
int16_t gr_rm_check_epoch_locked(struct gr_rm_partition *p, int32_t current_leader_epoch, bool require_leader);

/* Kafka's Partition.lastOffsetForLeaderEpoch (last_offset_for_epoch.c), with NO partition lock
 * held; the caller has checked the fetcher's CurrentLeaderEpoch. *end_out is the end offset of
 * epoch `requested` here (the start offset of the first later epoch, or the log end offset for the
 * latest), *epoch_out the largest epoch <= requested that this log knows; both -1 when requested
 * is -1, newer than every epoch here, or the cache is empty. A leader that has not appended in its
 * current epoch yet counts that epoch as starting where it became leader (Kafka writes that entry
 * at election; Gregor's log records an epoch with its first batch), so a follower that wrote
 * ahead in an epoch the new leader never saw is still told where to truncate. Used by
 * OffsetForLeaderEpoch and by Fetch v12+ (LastFetchedEpoch, the DivergingEpoch answer). */
void gr_rm_last_offset_for_epoch(struct gr_rm_partition *p, int32_t requested, int32_t *epoch_out, int64_t *end_out);

/* Called with NO partition lock held after something a waiting request may care about changed. */
void gr_rm_wake(struct gr_replica_manager *rm, struct gr_rm_partition *p, bool hw_moved);

/* Leader: records a follower fetch (offset = follower LEO) and moves HW/ISR as needed. Takes and
 * releases p->lock; wakes waiters itself. */
void gr_rm_update_follower(struct gr_replica_manager *rm, struct gr_rm_partition *p, int32_t follower_id,
                           int64_t fetch_offset, int64_t follower_log_start, int64_t leader_leo);

/* One partition of a leader append (Produce). The caller owns the array and the records and
 * keeps them alive until done() runs. error may be pre-set (then the partition is skipped). */
struct gr_validator_result;
struct gr_rm_produce_part {
    char *topic;
    int32_t partition;
    uint8_t *records;       /* modified in place by the append */
    size_t records_len;
    int16_t error;          /* out */
    int64_t base_offset;    /* out, -1 on error */
    int64_t log_start_offset; /* out */
    int64_t log_append_time;  /* out: -1, or (Kafka's quirk) the original batch's maxTimestamp when
                               * the append was a duplicate of a cached idempotent batch */
    int64_t required_offset;  /* private: offset the HW must reach, -1 when not waiting */
    bool coordinator;         /* in: a transaction marker from WriteTxnMarkers (coordinator-origin append) */
    bool want_record_errors;  /* in: keep the log validator's record errors (Produce v8+) */
    struct gr_validator_result *validation; /* out: NULL, or (want_record_errors and the log
                                             * validator refused records) a malloc'd copy of its
                                             * result that the caller frees */
};
typedef void (*gr_rm_produce_done_fn)(void *ctx, struct gr_rm_produce_part *parts, int n);

/* One partition of a DeleteRecords request (delete_records.c). */
struct gr_rm_delete_records_part {
    const char *topic;
    int32_t partition;
    int64_t offset;        /* in: the new log start offset, -1 = the high watermark */
    int64_t low_watermark; /* out */
    int16_t error;         /* in: a pre-set error skips the partition; out: the result */
    bool waiting;          /* private */
};
typedef void (*gr_rm_delete_records_done_fn)(void *ctx, struct gr_rm_delete_records_part *parts, int n);
/* Raises each leader partition's log start offset (OFFSET_OUT_OF_RANGE below 0 or above the HW,
 * POLICY_VIOLATION without cleanup.policy delete) and calls done once every partition's low
 * watermark reached its offset, or at timeout_ms with REQUEST_TIMED_OUT for those still short.
 * parts must live until done runs. */
void gr_rm_delete_records(struct gr_replica_manager *rm, int32_t timeout_ms, struct gr_rm_delete_records_part *parts,
                          int n, gr_rm_delete_records_done_fn done, void *ctx);

/* Appends every part as leader; with acks -1 waits in the produce purgatory until the HW passes
 * each appended offset (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the maximal ISR fell below
 * min.insync.replicas, REQUEST_TIMED_OUT after timeout_ms). done runs exactly once, on any
 * thread, possibly before this returns. */
void gr_rm_produce(struct gr_replica_manager *rm, int16_t acks, int32_t timeout_ms, struct gr_rm_produce_part *parts,
                   int n, gr_rm_produce_done_fn done, void *ctx);
/* gr_rm_produce that also calls appended(ctx) once every part is appended and an acks -1
 * produce is about to wait (not called otherwise): the point from which the Produce no longer
 * needs its connection's order (gr_net_request_release). */
void gr_rm_produce_ordered(struct gr_replica_manager *rm, int16_t acks, int32_t timeout_ms,
                           struct gr_rm_produce_part *parts, int n, gr_rm_produce_done_fn done,
                           void (*appended)(void *ctx), void *ctx);

#endif
