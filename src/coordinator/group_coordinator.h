/* The group coordinator (Kafka 2.7's GroupCoordinator + GroupMetadataManager): consumer group
 * membership and committed offsets for the groups whose __consumer_offsets partition this
 * broker leads.
 *
 * Groups follow Kafka's state machine:
 *
 *   Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
 *   CompletingRebalance --leader's SyncGroup stored--> Stable
 *   Stable / CompletingRebalance --join, leave, member expiry--> PreparingRebalance
 *   PreparingRebalance --nobody rejoined--> Empty;  Empty --DeleteGroups / cleanup--> Dead
 *
 * with Kafka's rules for member ids (client_id + "-" + UUID; MEMBER_ID_REQUIRED from JoinGroup
 * v4 on), protocol selection by vote, leader election, group.initial.rebalance.delay.ms for a
 * group rebalancing out of Empty, session timeouts (members that miss heartbeats are removed),
 * the 5 minute join timeout of new members, and the error codes of every API.
 *
 * Persistence: committed offsets and the group metadata (generation, protocol, leader, members
 * with their subscriptions and assignments) are written as records to the group's
 * __consumer_offsets partition (formats in group_offsets.h) with acks=-1; OffsetCommit and the
 * leader's SyncGroup answer after the write. When this broker becomes leader of an offsets
 * partition its background thread reads the partition's log and rebuilds the groups (members of
 * a Stable group keep their generation, so they carry on heartbeating after a coordinator
 * failover); while that runs the groups answer COORDINATOR_LOAD_IN_PROGRESS. Leadership is
 * learnt by polling the storage every 100 ms (and at once when a request for a partition led
 * here but not yet loaded arrives); a request is accepted only while the storage confirms this
 * broker still leads the partition in the leader term that was loaded (a new leader epoch of the
 * same leadership keeps the groups, as Kafka's onElection is called only for a new leader), so
 * stale state is never served.
 *
 * Static membership (KIP-345, group.instance.id): group_static_members.c and the join path here.
 * Offset retention (KIP-211) and the removal of Empty groups without offsets:
 * group_offset_expiry.c, run by gr_gc_tick every offsets.retention.check.interval.ms.
 *
 * Simplifications (see docs/GROUPS.md): OffsetCommit /
 * OffsetFetch v0 use the log like v1 (Kafka 2.7 keeps v0 offsets in ZooKeeper); no
 * transactional offsets.
 *
 * Implementation: group_coordinator.c (APIs, rebalance, timers, lifecycle), group_metadata.c
 * (groups and members in memory), group_metadata_manager.c (group table, writes, loading);
 * their shared structs and numbered locking rules are in group_internal.h.
 *
 * Threading: every gr_gc_* call may come from any thread. Two background threads: the
 * coordinator's (timers, leadership polling) and the loader (one partition load at a time). One
 * mutex guards all group state;
 * storage calls and completion callbacks always run without it. A callback (join, sync,
 * commit) is called exactly once, possibly before the call that registered it returns, from
 * the calling thread, the background thread, or a storage completion thread. Result memory
 * handed to a callback is valid only during the callback. */
#ifndef GR_BROKER_GROUP_COORDINATOR_H
#define GR_BROKER_GROUP_COORDINATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/arena.h"
#include "storage/log.h"

struct gr_broker;
struct gr_replica_manager;
struct gr_group_coordinator;

/* Where the __consumer_offsets partitions live. All callbacks are called WITHOUT the
 * coordinator's lock and may be called concurrently. */
struct gr_gc_storage {
    void *ctx;
    /* Is this broker the leader of offsets partition p? If so, its leader epoch, its leader term
     * and log start/end offsets. The term is the leader epoch at which this broker became the
     * leader from non-leader (Kafka 2.7's makeLeader returning true, the only case that calls
     * onElection; the replica manager's elected epoch): a new leader epoch that keeps this broker
     * leader (the controller shrinking the ISR) keeps it, and a leadership lost and regained gives
     * a later one (every new leader takes a new epoch). The groups of p are loaded once per term.
     * Any out pointer may be NULL. */
    bool (*leader_info)(void *ctx, int32_t p, int32_t *leader_epoch, int32_t *leader_term, int64_t *log_start,
                        int64_t *log_end);
    /* Appends batch (borrowed until done is called) to partition p with acks (-1 or 1) and a
     * timeout; done(done_ctx, Kafka error, the batch's base offset or -1) exactly once, on any
     * thread, possibly at once. */
    void (*append)(void *ctx, int32_t p, uint8_t *batch, size_t len, int16_t acks, int32_t timeout_ms,
                   void (*done)(void *done_ctx, int16_t error, int64_t base_offset), void *done_ctx);
    /* Reads whole batches from offset up to the log end (res as gr_plog_read; caller frees
     * res->data). Returns a Kafka error. */
    int16_t (*read)(void *ctx, int32_t p, int64_t offset, int32_t max_bytes, struct gr_plog_read_result *res);
    /* Partition count of __consumer_offsets if the topic exists (0 if unknown). Optional. */
    int32_t (*num_partitions)(void *ctx);
    /* Called by gr_gc_free to release ctx. Optional. */
    void (*release)(void *ctx);
};

struct gr_gc_config {
    int32_t broker_id;
    int32_t num_partitions;             /* offsets.topic.num.partitions (used until the topic
                                         * exists; then its real partition count) */
    int32_t initial_rebalance_delay_ms; /* group.initial.rebalance.delay.ms */
    int32_t min_session_timeout_ms;     /* group.min.session.timeout.ms */
    int32_t max_session_timeout_ms;     /* group.max.session.timeout.ms */
    int32_t group_max_size;             /* group.max.size */
    int32_t offset_commit_timeout_ms;   /* offsets.commit.timeout.ms */
    int32_t max_metadata_size;          /* offset.metadata.max.bytes */
    int64_t offsets_retention_ms;       /* offsets.retention.minutes, in ms */
    int64_t offsets_retention_check_interval_ms; /* offsets.retention.check.interval.ms */
    struct gr_gc_storage storage;
    /* Clocks; NULL = gr_mono_ms / gr_wall_ms. */
    int64_t (*mono_ms)(void);
    int64_t (*wall_ms)(void);
    /* false (tests): no background threads (timers, loader); call gr_gc_tick and
     * gr_gc_poll_partitions, which then loads on the caller's thread. */
    bool background_thread;
};

/* Kafka's defaults for everything but storage, broker_id and the clocks. */
void gr_gc_config_defaults(struct gr_gc_config *c);

/* Creates a coordinator (and starts its background thread when asked). Borrowed: the storage
 * context. Returns NULL only if the thread cannot start. */
struct gr_group_coordinator *gr_gc_new(const struct gr_gc_config *cfg);
/* Stops accepting requests (COORDINATOR_NOT_AVAILABLE from now on), answers waiting JoinGroup /
 * SyncGroup requests NOT_COORDINATOR, joins the thread. Storage completions may still arrive
 * afterwards; free only when the storage can call no more (after its own shutdown). */
void gr_gc_shutdown(struct gr_group_coordinator *gc);
void gr_gc_free(struct gr_group_coordinator *gc);

/* ---- broker wiring (server.c) ---- */

/* Creates the coordinator from b->cfg over the replica manager's __consumer_offsets
 * partitions, starts it and sets b->group_coordinator (which the group API handlers of the
 * table in api/apis.c use).
 * Start-up thread, after the replica manager and before the network starts. Returns 0 or
 * -ENOMEM / GR_E*. */
int gr_group_coordinator_start(struct gr_broker *b, struct gr_replica_manager *rm);
/* gr_gc_shutdown of b's coordinator (NULL ignored): after the network stopped, before the
 * replica manager shuts down. */
void gr_group_coordinator_shutdown(struct gr_group_coordinator *gc);
/* Frees it (NULL ignored): after the replica manager shut down. */
void gr_group_coordinator_free(struct gr_group_coordinator *gc);

/* ---- queries ---- */

/* Kafka's GroupMetadataManager gauges: the groups held (of the offsets partitions this broker
 * leads and has loaded), by state, and their committed offsets. Any thread (takes the
 * coordinator's lock). */
struct gr_gc_counts {
    int64_t groups, preparing_rebalance, completing_rebalance, stable, dead, empty, offsets;
};
void gr_gc_counts(struct gr_group_coordinator *gc, struct gr_gc_counts *out);

/* The offsets partition of group_id. */
int32_t gr_gc_partition_for(struct gr_group_coordinator *gc, const char *group_id);
/* NONE if this broker coordinates group_id right now, else the error a request would get
 * (COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR). */
int16_t gr_gc_coordinator_status(struct gr_group_coordinator *gc, const char *group_id);

/* ---- JoinGroup ---- */

struct gr_gc_protocol {
    const char *name;
    const uint8_t *metadata;
    int32_t metadata_len;
};

struct gr_gc_join_req {
    const char *group_id;
    const char *member_id; /* "" = unknown */
    const char *group_instance_id; /* NULL = none */
    const char *client_id;
    const char *client_host;
    const char *protocol_type;
    int32_t session_timeout_ms;
    int32_t rebalance_timeout_ms;
    bool require_known_member_id; /* JoinGroup v4+ without group_instance_id */
    bool support_skip_assignment; /* JoinGroup v9+ (KIP-814): see gr_gc_join_result */
    int n_protocols;
    const struct gr_gc_protocol *protocols;
};

struct gr_gc_join_member {
    const char *member_id;
    const char *group_instance_id;
    const uint8_t *metadata;
    int32_t metadata_len;
};

struct gr_gc_join_result {
    int16_t error;
    int32_t generation_id;     /* -1 on errors */
    const char *protocol_type; /* NULL when none */
    const char *protocol_name; /* NULL when none */
    const char *leader_id;     /* "" when none */
    const char *member_id;
    int n_members; /* the leader's copy of every member's metadata; 0 for followers */
    const struct gr_gc_join_member *members;
    /* KIP-814: the static leader rejoined a Stable group without changing its protocols, and
     * asked with support_skip_assignment: it gets the members and its own id as leader, and
     * must not run the assignor (the group keeps its assignment). Always false without it:
     * the old leader id is answered instead, as before JoinGroup v9. */
    bool skip_assignment;
};
typedef void (*gr_gc_join_cb)(void *ctx, const struct gr_gc_join_result *r);

/* JoinGroup: rq is borrowed for the call (copied). */
void gr_gc_join_group(struct gr_group_coordinator *gc, const struct gr_gc_join_req *rq, gr_gc_join_cb cb, void *ctx);

/* ---- SyncGroup ---- */

struct gr_gc_assignment {
    const char *member_id;
    const uint8_t *data;
    int32_t len;
};
struct gr_gc_sync_req {
    const char *group_id;
    const char *member_id;
    const char *group_instance_id;
    const char *protocol_type; /* NULL = not checked (SyncGroup < v5) */
    const char *protocol_name;
    int32_t generation_id;
    int n_assignments;
    const struct gr_gc_assignment *assignments;
};
struct gr_gc_sync_result {
    int16_t error;
    const char *protocol_type; /* NULL on errors */
    const char *protocol_name;
    const uint8_t *assignment;
    int32_t assignment_len;
};
typedef void (*gr_gc_sync_cb)(void *ctx, const struct gr_gc_sync_result *r);
void gr_gc_sync_group(struct gr_group_coordinator *gc, const struct gr_gc_sync_req *rq, gr_gc_sync_cb cb, void *ctx);

/* ---- Heartbeat, LeaveGroup ---- */

int16_t gr_gc_heartbeat(struct gr_group_coordinator *gc, const char *group_id, const char *member_id,
                        const char *group_instance_id, int32_t generation_id);

struct gr_gc_leave_member {
    const char *member_id;
    const char *group_instance_id;
    int16_t error; /* out */
};
/* Returns the top-level error; per-member errors in members[i].error. */
int16_t gr_gc_leave_group(struct gr_group_coordinator *gc, const char *group_id, struct gr_gc_leave_member *members,
                          int n);

/* ---- offsets ---- */

struct gr_gc_commit_part {
    const char *topic;
    int32_t partition;
    int64_t offset;
    int32_t leader_epoch;     /* -1 none */
    const char *metadata;     /* NULL = "" */
    int64_t commit_timestamp; /* wall ms */
    int64_t expire_timestamp; /* -1 none */
    int16_t error;            /* in: NONE, or an error decided by the caller (part skipped);
                                 out: the result */
};
typedef void (*gr_gc_commit_cb)(void *ctx, struct gr_gc_commit_part *parts, int n);
/* Is an offset's metadata longer than offset.metadata.max.bytes (bytes; Kafka counts UTF-16
 * units, the same for ASCII)? Such a partition gets OFFSET_METADATA_TOO_LARGE and is not written
 * (OffsetCommit and TxnOffsetCommit, as Kafka 2.7's storeOffsets). NULL is never too large. */
bool gr_gc_metadata_too_large(struct gr_group_coordinator *gc, const char *metadata);

/* TxnOffsetCommit's group checks (Kafka 2.7 doTxnCommitOffsets): the coordinator status, then,
 * when a generation >= 0, a member id or an instance id is given, UNKNOWN_MEMBER_ID /
 * FENCED_INSTANCE_ID / ILLEGAL_GENERATION against the group (a Dead group:
 * COORDINATOR_NOT_AVAILABLE). NONE if the commit may be written. */
int16_t gr_gc_validate_txn_commit(struct gr_group_coordinator *gc, const char *group_id, const char *member_id,
                                  const char *group_instance_id, int32_t generation_id);
/* generation_id of transactional offsets applied at their COMMIT marker: no membership check. */
#define GR_GC_GENERATION_TXN INT32_MIN
/* A WriteTxnMarkers marker of producer_id was written to __consumer_offsets-offsets_partition:
 * takes the producer's pending offsets there (txn_offsets.h); COMMIT puts them in the offsets
 * cache at once, in the same critical section (so OffsetFetch never answers the previous offsets
 * in between), then rewrites them as ordinary offset records in the background (a failed rewrite
 * loses nothing: the marker already committed them). ABORT drops them. */
void gr_gc_complete_txn_offsets(struct gr_group_coordinator *gc, int64_t producer_id, int32_t offsets_partition,
                                bool commit);
/* OffsetCommit. parts (caller's memory) must stay valid until cb. generation_id < 0 with an
 * unknown or Empty group = a "simple" commit by a client not using group management. */
void gr_gc_commit_offsets(struct gr_group_coordinator *gc, const char *group_id, const char *member_id,
                          const char *group_instance_id, int32_t generation_id, struct gr_gc_commit_part *parts,
                          int n, gr_gc_commit_cb cb, void *ctx);

struct gr_gc_fetch_part {
    const char *topic;
    int32_t partition;
    int64_t offset;       /* -1 when none committed */
    int32_t leader_epoch; /* -1 when none */
    const char *metadata; /* "" when none; in the arena */
    int16_t error;
};
/* OffsetFetch of the listed partitions (n >= 0; topic/partition filled by the caller), or,
 * with all = true, of every committed partition (*parts / *n allocated in a). require_stable
 * (OffsetFetch v7, KIP-447): a partition with transactional offsets of the group still waiting
 * for their marker (txn_offsets.h) answers UNSTABLE_OFFSET_COMMIT and offset -1, as Kafka 2.7's
 * getOffsets. Returns the group-level error (then no part is filled). */
int16_t gr_gc_fetch_offsets(struct gr_group_coordinator *gc, const char *group_id, bool all, bool require_stable,
                            struct gr_gc_fetch_part **parts, int *n, struct gr_arena *a);

/* ---- DescribeGroups, ListGroups, DeleteGroups ---- */

struct gr_gc_member_summary {
    const char *member_id, *group_instance_id, *client_id, *client_host;
    const uint8_t *metadata;
    int32_t metadata_len;
    const uint8_t *assignment;
    int32_t assignment_len;
};
struct gr_gc_group_summary {
    const char *state;         /* "Empty", "PreparingRebalance", "CompletingRebalance", "Stable",
                                  "Dead", "" on errors */
    const char *protocol_type; /* "" when none */
    const char *protocol;      /* "" unless Stable */
    int n_members;
    struct gr_gc_member_summary *members;
};
/* Fills out (strings and arrays in a); returns the group's error. */
int16_t gr_gc_describe_group(struct gr_group_coordinator *gc, const char *group_id, struct gr_arena *a,
                             struct gr_gc_group_summary *out);

struct gr_gc_listed_group {
    const char *group_id, *protocol_type, *state;
};
/* Groups of the partitions this broker coordinates, filtered by state names when n_states > 0.
 * Returns NONE, COORDINATOR_LOAD_IN_PROGRESS (a partition is loading; groups still listed) or
 * COORDINATOR_NOT_AVAILABLE. */
int16_t gr_gc_list_groups(struct gr_group_coordinator *gc, const char *const *states, int n_states,
                          struct gr_arena *a, struct gr_gc_listed_group **out, int *n);

/* DeleteGroups: errors[i] for ids[i] (NONE, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...). Deleted
 * groups' offsets and metadata get tombstones in the log. */
void gr_gc_delete_groups(struct gr_group_coordinator *gc, const char *const *ids, int n, int16_t *errors);

/* OffsetDelete (group_offset_delete.c): parts[i].error is in/out as for commits (a part with an
 * error set by the caller, e.g. UNKNOWN_TOPIC_OR_PARTITION, is skipped); out NONE or
 * GROUP_SUBSCRIBED_TO_TOPIC. Returns the group-level error (then the parts are untouched):
 * NONE, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, INVALID_GROUP_ID or a coordinator error. */
struct gr_gc_offset_delete_part {
    const char *topic;
    int32_t partition;
    int16_t error;
};
int16_t gr_gc_delete_offsets(struct gr_group_coordinator *gc, const char *group_id,
                             struct gr_gc_offset_delete_part *parts, int n);

/* ---- background work (called by the thread; tests call them directly) ---- */

/* Runs due timers: member session expiry, pending-member expiry, delayed joins, cleanup. */
void gr_gc_tick(struct gr_group_coordinator *gc);
/* Checks leadership of every offsets partition: unloads lost ones (cancelling their load if one
 * runs) and queues newly led ones for the loader thread (group_metadata_loader.c). Without
 * background threads it runs the queued loads itself before returning. */
void gr_gc_poll_partitions(struct gr_group_coordinator *gc);

#endif
