/* The controller's cache of cluster metadata (Kafka's ControllerContext): controller epoch and
 * its zkVersion, live brokers with their epochs, shutting-down brokers, topics with their replica
 * assignments, and every partition's leader/ISR as last read from or written to ZooKeeper.
 *
 * Owned by one struct gr_controller and touched only on its event thread (no locks). It is
 * filled in onControllerFailover and emptied by gr_ctrl_ctx_reset on resignation. A controller
 * may own a second one, its standby context (controller.c, gr_ctrl_ctx_move_topics): same rules.
 *
 * Layout: topics live in an open-addressing hash table keyed by name (100k partitions over a
 * few thousand topics is the design point); each topic holds its partitions in an array sorted
 * by partition id. Brokers are an array sorted by id.
 *
 * The state machines keep their states here too (states.h): struct gr_ctrl_partition has `state`
 * (partition state machine) and `replica_states` (replica state machine, parallel to replicas[]);
 * both start at 0 (NonExistent).
 *
 * Memory: a partition is one struct in its topic's array plus a slot in its topic's pool (its
 * replicas, ISR and replica states): no allocation of its own while its arrays fit the slot
 * (test_controller_context checks the size and the allocation count). */
#ifndef GR_CONTROLLER_CONTEXT_H
#define GR_CONTROLLER_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/uuid.h"
#include "zk/kzk.h"

/* A live (registered) broker: its znode data and epoch (czxid). */
struct gr_ctrl_broker {
    int32_t id;
    int64_t epoch;
    struct gr_kzk_broker info; /* owned deep copy (info.epoch == epoch) */
};

/* One partition. Memory (issue 14: ~100k of these on the controller's broker): the small arrays
 * -- replicas, lai.isr and replica_states -- normally live in the partition's slot of its topic's
 * pool (one block per topic, see gr_ctrl_topic.pool), not in allocations of their own. Readers use
 * the pointers as before; only context.c (and gr_ctrl_partition_set_assignment /
 * gr_ctrl_partition_replica_states for writers elsewhere) stores into them: an array that no
 * longer fits its slot (a reassignment adding replicas) moves to the heap, and back when it fits
 * again. A pointer equal to its slot address is not freed; any other non-NULL one is owned. */
struct gr_ctrl_partition {
    int32_t partition;
    /* Assignment, from /brokers/topics/T (the fields of GR_REPLICA_ASSIGNMENT_FIELDS, zk/kzk.h,
     * without its padding). replicas: slot or owned; adding / removing: owned or NULL. */
    int n_replicas;
    int n_adding;
    int n_removing;
    int32_t *replicas;
    int32_t *adding;
    int32_t *removing;
    /* Leader/ISR from …/partitions/P/state; has_state false until read or created. lai.isr: slot,
     * owned, or NULL when n_isr is 0. */
    struct gr_kzk_leader_and_isr lai;
    /* ctx->event_gen when this controller last wrote lai to ZooKeeper (or confirmed it there):
     * gr_ctrl_partition_fresh. */
    uint64_t fresh_gen;
    /* Replica state machine: enum gr_ctrl_replica_state per replica, parallel to replicas[]; NULL
     * (all NonExistent) until the first state is set (gr_ctrl_partition_replica_states). */
    uint8_t *replica_states;
    /* Brokers whose replica of this partition is on an offline log dir (Kafka's
     * replicasOnOfflineDirs, kept per partition): learned from KAFKA_STORAGE_ERROR in LeaderAndIsr
     * responses (offline_dirs.h), forgotten when the broker answers NONE or starts up again. */
    int32_t *offline_dirs;
    int n_offline_dirs;
    uint8_t state;     /* partition state machine: enum gr_ctrl_partition_state (states.h) */
    bool has_state;
    uint8_t slot_cap;  /* ids the slot holds for each of replicas and isr (states: as many bytes) */
    /* The slot in the topic's pool: replicas[slot_cap], isr[slot_cap], states (slot_cap bytes,
     * padded to 4); NULL when there is none (slot_cap 0). */
    int32_t *slot;
};

struct gr_ctrl_topic {
    char *name;
    char *topic_id;             /* NULL unless the znode is v3 (KIP-516; its text, as written) */
    struct gr_uuid id;          /* topic_id parsed; zero when topic_id is NULL (topic_ids.h) */
    int32_t zk_version;         /* of /brokers/topics/T */
    int64_t czxid;              /* of /brokers/topics/T: which incarnation of the topic */
    int64_t states_stamp;       /* the standby's proof (controller.c load_partition_states): the
                                 * mzxid of /brokers/topics/T/partitions read before the states
                                 * held were; 0 = unknown (read them) */
    int n_partitions;
    struct gr_ctrl_partition *partitions; /* sorted by partition id */
    bool queued_for_deletion;   /* its name is in ctx->topics_to_be_deleted (the index of it) */
    bool recreated;             /* /brokers/topics/T was found created again behind the
                                 * controller's back (another czxid; topic_ids.h): its stamps
                                 * carry no id (gr_ctrl_topic_stamp_id) */
    int32_t *pool;              /* every partition's slot, one block (made by put_topic and
                                 * add_partitions) */
};

struct gr_ctrl_context {
    int32_t epoch;              /* controller epoch (0 = none yet) */
    int32_t epoch_zk_version;   /* /controller_epoch data version: the fencing token */

    int n_brokers;
    struct gr_ctrl_broker *brokers; /* live brokers, sorted by id */
    int n_shutting_down;
    int32_t *shutting_down;     /* shuttingDownBrokerIds */

    /* topics: open addressing, linear probing; slots hold NULL, a tombstone, or a topic */
    struct gr_ctrl_topic **slots;
    size_t n_slots;             /* power of two */
    size_t n_topics;
    size_t n_used;              /* topics + tombstones */
    int64_t n_partitions;       /* total over all topics */
    int64_t n_reassigning;      /* partitions with adding or removing replicas (kept by the
                                 * topic functions and gr_ctrl_ctx_reassigning_changed) */
    /* Bumped when topics come or go and by every request batch that sends anything: a change of
     * partition states, leaders or assignments always goes out as LeaderAndIsr / UpdateMetadata /
     * StopReplica in the same event. The controller recomputes its full-scan gauges only when it
     * moved. */
    uint64_t gen;
    /* Bumped by the controller before each event (0: no controller, e.g. a unit fixture). A
     * partition state written by this controller in the current event is "fresh": what ZooKeeper
     * accepted moments ago (gr_ctrl_partition_fresh). */
    uint64_t event_gen;

    /* from /admin/delete_topics (names); change it only with gr_ctrl_ctx_queue_deletion /
     * _unqueue_deletion / _clear_deletions, which keep each topic's queued_for_deletion flag (what
     * gr_ctrl_topic_queued_for_deletion reads: one hash lookup, not a scan of the names) */
    struct gr_zstrings topics_to_be_deleted;
};

void gr_ctrl_ctx_init(struct gr_ctrl_context *ctx);
/* Frees everything and returns to the initial state -- except epoch and epoch_zk_version, which
 * are kept. Kafka's resetContext (on resignation) zeroes both; Gregor keeps the term it just left
 * because (1) nothing uses them as a fencing token while inactive: every guarded write is made by
 * an active controller, after elect() overwrote both, and trigger_controller_move / shutdown read
 * the zkVersion before they resign; (2) a stray write with the kept zkVersion would still be
 * fenced, since any later election bumps /controller_epoch's version; (3) log lines written after
 * a resignation name the term just left, and gr_controller_epoch reports it as "last held". */
void gr_ctrl_ctx_reset(struct gr_ctrl_context *ctx);
/* reset + frees the table itself. */
void gr_ctrl_ctx_release(struct gr_ctrl_context *ctx);
/* The standby context (controller.c; docs/ARCHITECTURE.md, "Warm standby controller"): moves
 * src's topics (assignments, partition states with their zkVersions, as last known) into dst,
 * replacing dst's topics; src is left without topics. What only an active controller's term
 * knows does not move: state machine states, replica states, offline log dirs, freshness, the
 * deletion queue (and the topics' queued flags), live and shutting-down brokers (dropped from
 * both). dst keeps its epoch and epoch_zk_version. */
void gr_ctrl_ctx_move_topics(struct gr_ctrl_context *dst, struct gr_ctrl_context *src);
/* Forgets p's leader/ISR (a state znode found gone). */
void gr_ctrl_partition_clear_state(struct gr_ctrl_partition *p);

/* ---- brokers ---- */

/* Replaces the live broker set with copies of brokers[0..n) (epoch from brokers[i].epoch). */
void gr_ctrl_ctx_set_live_brokers(struct gr_ctrl_context *ctx, const struct gr_kzk_broker *brokers, int n);
/* Adds (or replaces) a copy of one broker. */
void gr_ctrl_ctx_add_live_broker(struct gr_ctrl_context *ctx, const struct gr_kzk_broker *b);
/* Removes broker id (no-op if absent). */
void gr_ctrl_ctx_remove_live_broker(struct gr_ctrl_context *ctx, int32_t id);
/* The live broker with that id, or NULL. Pointer valid until the broker set changes. */
struct gr_ctrl_broker *gr_ctrl_ctx_broker(struct gr_ctrl_context *ctx, int32_t id);
bool gr_ctrl_ctx_is_live(struct gr_ctrl_context *ctx, int32_t id);
/* Writes "1:4294967300,2:4294967301" (id:epoch pairs) into buf. */
char *gr_ctrl_ctx_format_brokers(const struct gr_ctrl_context *ctx, char *buf, size_t len);

/* ---- topics and partitions ---- */

/* The topic or NULL. Pointer valid until that topic is removed or replaced. */
struct gr_ctrl_topic *gr_ctrl_ctx_topic(struct gr_ctrl_context *ctx, const char *name);
/* Installs a topic from its assignment, taking ownership of a's arrays (a is left empty; its
 * topic name is copied). Partition states of partitions that existed before are kept; new
 * partitions start without state. Returns the topic. */
struct gr_ctrl_topic *gr_ctrl_ctx_put_topic(struct gr_ctrl_context *ctx, struct gr_kzk_topic_assignment *a);
/* Adds the partitions of a that t does not have (Kafka's processPartitionModifications:
 * existing partitions keep their assignment and states), taking ownership of those partitions'
 * arrays. Returns how many were added. Pointers into t->partitions, and to the arrays of its
 * partitions (the pool is rebuilt), are invalidated. */
int gr_ctrl_ctx_add_partitions(struct gr_ctrl_context *ctx, struct gr_ctrl_topic *t, struct gr_kzk_topic_assignment *a);
/* A partition's assignment was rewritten in place: it was / is reassigning (n_reassigning). */
void gr_ctrl_ctx_reassigning_changed(struct gr_ctrl_context *ctx, bool was, bool is);
/* topicsToBeDeleted: add (no-op if queued), remove, forget all. */
void gr_ctrl_ctx_queue_deletion(struct gr_ctrl_context *ctx, const char *name);
void gr_ctrl_ctx_unqueue_deletion(struct gr_ctrl_context *ctx, const char *name);
void gr_ctrl_ctx_clear_deletions(struct gr_ctrl_context *ctx);
/* Removes a topic and its partitions. No-op if absent. */
void gr_ctrl_ctx_remove_topic(struct gr_ctrl_context *ctx, const char *name);
/* The partition of a topic (binary search) or NULL. */
struct gr_ctrl_partition *gr_ctrl_topic_partition(struct gr_ctrl_topic *t, int32_t partition);
struct gr_ctrl_partition *gr_ctrl_ctx_partition(struct gr_ctrl_context *ctx, const char *topic, int32_t partition);
/* Stores a leader/ISR (deep copy of lai; lai->isr may be p's own). */
void gr_ctrl_partition_set_state(struct gr_ctrl_partition *p, const struct gr_kzk_leader_and_isr *lai);
/* Stores a leader/ISR, taking its ISR array (freed, or kept when it does not fit the slot; lai
 * is left without one). */
void gr_ctrl_partition_take_state(struct gr_ctrl_partition *p, struct gr_kzk_leader_and_isr *lai);
/* Replaces p's assignment with copies of the arrays (which may be p's own); replica states follow
 * their replica ids (new replicas start NonExistent). Does not touch ctx->n_reassigning. */
void gr_ctrl_partition_set_assignment(struct gr_ctrl_partition *p, const int32_t *replicas, int n_replicas,
                                      const int32_t *adding, int n_adding, const int32_t *removing, int n_removing);
/* p's replica states array (n_replicas entries, all NonExistent when new), made on first use. */
uint8_t *gr_ctrl_partition_replica_states(struct gr_ctrl_partition *p);

/* Marks p's state as written (or confirmed in ZooKeeper) in the current event. */
static inline void gr_ctrl_partition_mark_fresh(const struct gr_ctrl_context *ctx, struct gr_ctrl_partition *p) {
    p->fresh_gen = ctx->event_gen;
}
/* Whether p's state was written or confirmed by this controller in the current event: the
 * state machines may then start from it instead of rereading ZooKeeper (their writes stay
 * conditional on its zkVersion). */
static inline bool gr_ctrl_partition_fresh(const struct gr_ctrl_context *ctx, const struct gr_ctrl_partition *p) {
    return ctx->event_gen != 0 && p->has_state && p->fresh_gen == ctx->event_gen;
}

/* Iteration over topics: `for (size_t i = 0; (t = gr_ctrl_ctx_next_topic(ctx, &i)); )`.
 * Do not add or remove topics while iterating. Order is unspecified. */
struct gr_ctrl_topic *gr_ctrl_ctx_next_topic(struct gr_ctrl_context *ctx, size_t *cursor);
/* All topic names sorted (borrowed pointers into the context), *n set; free() the array. */
const char **gr_ctrl_ctx_sorted_topics(struct gr_ctrl_context *ctx, size_t *n);

/* A process-wide count of controller work on partitions: states stored (set/take_state) and
 * partitions installed (put_topic) or removed, summed over every context. It only grows; the
 * controller trims the malloc heap after events that moved it a lot (controller.c). */
uint64_t gr_ctrl_ctx_work(void);

size_t gr_ctrl_ctx_topic_count(const struct gr_ctrl_context *ctx);
int64_t gr_ctrl_ctx_partition_count(const struct gr_ctrl_context *ctx);
/* Partitions whose leader is -1 or not a live broker, topics being deleted included. (The
 * OfflinePartitionsCount gauge counts OfflinePartition states without topics being deleted, as
 * Kafka does: gr_td_offline_partition_count, topic_deletion.h.) */
int64_t gr_ctrl_ctx_offline_partition_count(struct gr_ctrl_context *ctx);

#endif
