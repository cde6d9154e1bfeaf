/* Private to the group coordinator module: shared by group_coordinator.c (Kafka's
 * GroupCoordinator: the APIs, the rebalance state machine, timers, lifecycle),
 * group_metadata.c (Kafka's GroupMetadata / MemberMetadata: one group's members, protocols,
 * leader and committed offsets in memory, and the queue of answers to waiting callbacks) and
 * group_metadata_manager.c (Kafka's GroupMetadataManager: the table of groups, writing records
 * to __consumer_offsets, unloading) and group_metadata_loader.c (its loadGroupsAndOffsets on its
 * single-thread scheduler: which partitions are loading or owned, and the loader thread).
 * Nothing outside src/coordinator/ includes this header; the public contract is
 * group_coordinator.h.
 *
 * Ownership and locking (numbered so the code can cite them):
 *  1. gc->mu guards everything reachable from gc->groups and gc->parts (every struct group,
 *     struct member, struct pending, struct offset_entry), the load queue and the flags of
 *     struct gr_group_coordinator. Functions named *_locked, and every gc_* function that takes a
 *     struct group or struct member of gc->groups, need it held.
 *  2. Storage calls (leader_info, append, read) and user callbacks never run under gc->mu.
 *     Completions decided under the lock are queued on a struct dq and run by gc_dq_flush
 *     after the unlock; writes decided under the lock are queued on a struct wq and issued by
 *     gc_wq_flush after the unlock.
 *  3. Asynchronous storage completions refer to their group by id (looked up again), never by
 *     pointer: the group may have been unloaded or deleted meanwhile.
 *  4. Only one thread at a time runs gr_gc_poll_partitions (the background thread, or the test),
 *     and only one runs loads (the loader thread; without background threads the thread calling
 *     gr_gc_poll_partitions), so two loads never run at once, and loads of one partition run in
 *     the order they were scheduled.
 *  5. A load builds its groups in a private struct gc_table that only the loader touches (no
 *     lock); they join gc->groups under gc->mu in one step when the partition becomes owned, so
 *     no request ever sees a partly loaded group. A load is current while its partition is
 *     PART_LOADING with the load's load_id; anything else (an unload, a new leader epoch, the
 *     shutdown) bumps or clears it and the load discards what it read.
 * The group table owns its groups (gc_remove_group_locked frees one); a group owns its members,
 * pending member ids and offsets; every string and byte buffer in them is malloc'd and owned. */
#ifndef GR_COORDINATOR_GROUP_INTERNAL_H
#define GR_COORDINATOR_GROUP_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/util.h"
#include "coordinator/group_coordinator.h"
#include "protocol/arena.h"

#define LOGGER "kafka.coordinator.group.GroupCoordinator"

#define NBUCKETS 1024

enum gstate { ST_EMPTY, ST_PREPARING, ST_COMPLETING, ST_STABLE, ST_DEAD };

/* A __consumer_offsets partition: not led (or not yet scheduled), loading (Kafka's
 * loadingPartitions), owned (ownedPartitions). */
enum { PART_NONE, PART_LOADING, PART_OWNED };

struct proto {
    char *name;
    uint8_t *meta;
    int32_t len;
};

struct member {
    struct member *next;
    char *id, *instance_id, *client_id, *client_host, *protocol_type;
    int32_t session_timeout, rebalance_timeout;
    int n_protocols;
    struct proto *protocols;
    uint8_t *assignment;
    int32_t assignment_len;
    bool is_new, is_leaving;
    gr_gc_join_cb join_cb; /* awaiting join iff set */
    void *join_ctx;
    gr_gc_sync_cb sync_cb; /* awaiting sync iff set */
    void *sync_ctx;
    int64_t hb_deadline; /* 0 = no heartbeat expectation scheduled */
};

struct pending {
    struct pending *next;
    char *id;
    int64_t deadline;
};

struct offset_entry {
    char *topic;
    int32_t partition;
    int64_t offset;
    int32_t leader_epoch;
    char *metadata;
    int64_t commit_ts, expire_ts;
    /* base offset of the batch that stored it in __consumer_offsets, -1 unknown: decides between
     * a committed transactional offset and an ordinary one (Kafka's
     * CommitRecordMetadataAndOffset.olderThan: the later record wins) */
    int64_t append_offset;
};

struct group {
    struct group *next; /* hash chain */
    char *id;
    int32_t partition;
    enum gstate state;
    int64_t state_ts; /* wall ms of the last transition */
    int32_t generation;
    char *protocol_type, *protocol_name, *leader_id;
    struct member *members; /* insertion order */
    int n_members, n_awaiting_join;
    struct pending *pending;
    /* the delayed join of PreparingRebalance */
    bool join_armed, join_initial, new_member_added;
    int64_t join_deadline;
    int32_t join_delay, join_remaining;
    /* committed offsets: dense array (any order) and its hash index by (topic, partition)
     * (group_metadata.c; index_cap a power of two, 0 until the first offset) */
    struct offset_entry *offsets;
    int n_offsets, cap_offsets;
    int32_t *offset_index;
    uint32_t index_cap;
    int inflight;        /* storage writes in flight */
    int64_t created_ms;  /* mono */
};

struct part {
    int state;
    int32_t epoch;    /* the leader epoch loading or owned (the latest seen; for the logs) */
    int32_t term;     /* the leader term loading or owned (gr_gc_storage.leader_info): a new term
                       * unloads and reloads, a new epoch of the same term does not */
    uint64_t load_id; /* bumped when a load is scheduled or cancelled (rule 5) */
    bool queued;      /* on the load queue */
    int64_t retry_at; /* mono ms: after a failed read, no new load before */
    /* a transaction marker was written to the partition while it was loading: the loader reads
     * to the new log end before it takes ownership (gr_gc_complete_txn_offsets) */
    bool marker_during_load;
};

/* Groups hashed by id: gc->groups (rule 1) or a load's private table (rule 5). */
struct gc_table {
    struct group *buckets[NBUCKETS];
    int n_groups;
};

struct load_job {
    struct load_job *next;
    int32_t partition;
    int64_t queued_ms; /* mono, for the "spent in the scheduler" log */
};

struct gr_group_coordinator {
    struct gr_gc_config cfg;
    pthread_mutex_t mu;
    pthread_cond_t cond; /* wakes the coordinator thread (timers, polling) */
    pthread_t thread;
    bool thread_started, stopping, kick;
    bool active;
    struct gc_table groups;
    struct part *parts;
    int32_t n_parts_cap;
    int64_t next_cleanup;
    /* the loader (group_metadata_loader.c): a FIFO of partitions to load, each at most once */
    pthread_cond_t load_cond; /* wakes the loader thread (a job, the shutdown, the test gate) */
    pthread_t loader;
    bool loader_started, loading_inline;
    struct load_job *load_head, **load_tail;
};

/* ---- completion queue (rule 2) ---- */

enum { D_JOIN, D_SYNC };
struct done {
    struct done *next;
    int kind;
    gr_gc_join_cb join_cb;
    gr_gc_sync_cb sync_cb;
    void *ctx;
    struct gr_gc_join_result jr;
    struct gr_gc_sync_result sr;
    struct gr_arena a;
};
struct dq {
    struct done *head, **tail;
};

/* A pending write, issued after the unlock (rule 2). */
struct write {
    struct write *next;
    int32_t partition;
    uint8_t *batch;
    size_t len;
    int16_t acks;
    void (*done)(void *, int16_t, int64_t);
    void *ctx;
};
struct wq {
    struct write *head;
};

/* ---- small helpers ---- */

static inline const uint8_t *arena_bytes(struct gr_arena *a, const uint8_t *p, int32_t len) {
    if (!p || len <= 0) return NULL;
    uint8_t *c = gr_arena_alloc(a, (size_t)len);
    memcpy(c, p, (size_t)len);
    return c;
}

static inline int64_t now_ms(struct gr_group_coordinator *gc) {
    return gc->cfg.mono_ms ? gc->cfg.mono_ms() : gr_mono_ms();
}
static inline int64_t wall_ms(struct gr_group_coordinator *gc) {
    return gc->cfg.wall_ms ? gc->cfg.wall_ms() : gr_wall_ms();
}

static inline char *dupz(const char *s) { return s ? gr_strdup(s) : NULL; }
static inline bool streq(const char *a, const char *b) {
    if (!a || !b) return a == b;
    return strcmp(a, b) == 0;
}

/* ---- group_metadata.c: groups, members, offsets, queued answers ---- */

void gc_dq_init(struct dq *q);
void gc_dq_flush(struct dq *q);
void gc_member_set_protocols(struct member *m, const struct gr_gc_protocol *p, int n);
void gc_member_set_assignment(struct member *m, const uint8_t *p, int32_t len);
bool gc_member_protocol(const struct member *m, const char *name, const uint8_t **meta, int32_t *len);
bool gc_member_matches(const struct member *m, const struct gr_gc_protocol *p, int n);
struct member *gc_group_member(struct group *g, const char *id);
bool gc_group_is_pending(struct group *g, const char *id);
bool gc_group_remove_pending(struct group *g, const char *id);
void gc_group_transition(struct gr_group_coordinator *gc, struct group *g, enum gstate to);
void gc_group_clear_members(struct group *g);
void gc_group_free(struct group *g);
struct offset_entry *gc_find_offset(struct group *g, const char *topic, int32_t partition);
void gc_put_offset(struct group *g, const char *topic, int32_t partition, int64_t offset, int32_t epoch,
                   const char *metadata, int64_t commit_ts, int64_t expire_ts, int64_t append_offset);
/* Kafka 2.7 completePendingTxnOffsetCommit: does a committed transactional offset stored at
 * append_offset replace g's current offset of topic-partition (none, or one stored earlier)? */
bool gc_txn_offset_is_newer(struct group *g, const char *topic, int32_t partition, int64_t append_offset);
void gc_remove_offset(struct group *g, const char *topic, int32_t partition);
int32_t gc_group_rebalance_timeout(const struct group *g);
bool gc_group_supports(const struct group *g, const char *type, const struct gr_gc_protocol *p, int n);
const char *gc_select_protocol(const struct group *g);
void gc_set_leader(struct group *g, const char *id);
void gc_schedule_hb(struct gr_group_coordinator *gc, struct member *m, int32_t timeout_ms);
void gc_group_add_member(struct group *g, struct member *m);
void gc_group_remove_member(struct group *g, struct member *m);
void gc_push_join_error(struct dq *q, gr_gc_join_cb cb, void *ctx, const char *member_id, int16_t error);
/* Returns the queued result (owned by q) so a caller may set skip_assignment. */
struct gr_gc_join_result *gc_push_join_ok(struct dq *q, gr_gc_join_cb cb, void *ctx, const struct group *g,
                                          const struct member *m, bool with_members);
void gc_push_sync(struct dq *q, gr_gc_sync_cb cb, void *ctx, const struct group *g, const struct member *m,
                  int16_t error);
void gc_invoke_join_error(struct dq *q, struct group *g, struct member *m, const char *member_id, int16_t error);

/* ---- group_static_members.c: group.instance.id (KIP-345) ---- */

/* The member holding instance_id (NULL for none or a NULL id). */
struct member *gc_static_member(struct group *g, const char *instance_id);
/* Kafka's isStaticMemberFenced: instance_id is held by a member other than member_id. */
bool gc_static_fenced(struct group *g, const char *member_id, const char *instance_id, const char *op);
/* Kafka's replaceGroupInstance: m (a static member) takes new_id; its waiting JoinGroup /
 * SyncGroup get FENCED_INSTANCE_ID; leadership follows the member. */
void gc_static_replace(struct group *g, struct member *m, const char *new_id, struct dq *q);

/* ---- group_offset_delete.c, group_offset_expiry.c ---- */

/* Does a member of consumer group g subscribe to topic (every topic while no protocol is chosen)? */
bool gc_group_subscribed_to(const struct group *g, const char *topic);
/* Kafka's cleanupGroupMetadata for one group at wall time now: removes its expired offsets
 * (KIP-211 rules), marks an Empty group without offsets Dead, and queues the tombstones on w.
 * Returns true when the group is Dead and the caller must remove it from the table. */
bool gc_expire_group_offsets_locked(struct gr_group_coordinator *gc, struct group *g, int64_t now, struct wq *w,
                                    int *n_removed);

/* ---- group_metadata_manager.c: the group table, owned partitions, writes, loading ---- */

/* Partition count of __consumer_offsets (asks the storage: never under gc->mu, rule 2). */
int32_t gc_effective_partitions(struct gr_group_coordinator *gc);
void gc_ensure_parts_locked(struct gr_group_coordinator *gc, int32_t n);
struct group *gc_table_find(struct gc_table *t, const char *id);
void gc_table_add(struct gc_table *t, struct group *g);
/* Unlinks and frees g. */
void gc_table_remove(struct gc_table *t, struct group *g);
void gc_table_clear(struct gc_table *t);
/* A new Empty group, in no table. */
struct group *gc_group_new(struct gr_group_coordinator *gc, const char *id, int32_t partition);
struct group *gc_find_group_locked(struct gr_group_coordinator *gc, const char *id);
struct group *gc_create_group_locked(struct gr_group_coordinator *gc, const char *id, int32_t partition);
void gc_remove_group_locked(struct gr_group_coordinator *gc, struct group *g);
int16_t gc_map_store_error(int16_t e, bool offsets);
uint8_t *gc_build_group_batch(struct gr_group_coordinator *gc, const struct group *g, bool tombstone,
                              bool tombstone_offsets, size_t *len);
void gc_wq_add(struct wq *w, int32_t p, uint8_t *batch, size_t len, int16_t acks, void (*done)(void *, int16_t, int64_t),
               void *ctx);
void gc_wq_flush(struct gr_group_coordinator *gc, struct wq *w);
/* Kafka's onGroupUnloaded for every group of partition p (p < 0: all); answers go to q. */
void gc_unload_locked(struct gr_group_coordinator *gc, int32_t p, struct dq *q);

/* ---- group_metadata_loader.c ---- */

/* Starts the loader thread (cfg.background_thread); false if it cannot start. */
bool gc_loader_start(struct gr_group_coordinator *gc);
/* After gc->stopping is set: wakes and joins the loader thread (a running load stops at its next
 * read), frees the queue. */
void gc_loader_stop(struct gr_group_coordinator *gc);

#endif
