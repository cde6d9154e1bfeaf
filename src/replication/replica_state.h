/* Replication state of one partition as the local broker sees it: assignment, ISR (committed
 * and proposed), leader epoch, and, on the leader, what it knows of every follower. Pure logic
 * with no I/O and no locks, so that the high-watermark and ISR rules can be unit-tested
 * (tests/unit/test_replica_state.c); the replica manager calls it under the partition's lock.
 *
 * Rules (Kafka 2.7's Partition/Replica with AlterIsr, now AlterPartition v0-v3, KIP-497):
 * - Follower progress: a follower fetching at offset F while the leader's log end offset is L
 *   is "caught up at time t" if F >= L; if F >= the leader LEO seen at its previous fetch, it was
 *   caught up at the previous fetch's time. last_caught_up_ms only moves forward.
 * - ISR state is Committed(isr), PendingExpand(isr, +r) or PendingShrink(isr, -set). While a
 *   change is pending no other change is proposed. The "maximal ISR" is isr + r while an
 *   expansion is pending, else isr: the HW and acks=all use it (more restrictive is safe).
 * - High watermark candidate = min LEO over the leader and every remote replica that is in the
 *   maximal ISR or was caught up within replica.lag.time.max.ms. The HW never goes backwards
 *   (the caller applies max(old, candidate)).
 * - Expand: a follower not in the ISR whose LEO >= HW and >= the leader epoch's start offset.
 * - Shrink: an ISR follower whose LEO != the leader LEO and which has not been caught up for
 *   more than replica.lag.time.max.ms.
 * - AlterPartition answer (Kafka 3.9's handleAlterPartitionError): INELIGIBLE_REPLICA and
 *   OPERATION_NOT_ATTEMPTED (not applied, our epoch is right: KIP-841/903) drop the proposal (if
 *   it is still the pending one) and return to the committed ISR, from which a later fetch may propose again; errors
 *   UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION and
 *   INVALID_REQUEST give up (stay pending until the next LeaderAndIsr); other errors
 *   retry the same proposal; success with the same leader epoch and a zkVersion not older than
 *   ours commits the returned ISR and zkVersion.
 *
 * Memory (issue 14: a broker hosts up to ~100k of these): the id arrays hold `cap` entries and
 * the remote states `rcap`; up to GR_RS_INLINE ids and GR_RS_INLINE_REMOTES remotes (RF <= 4)
 * they live inside the struct, beyond that (at most GR_RS_MAX_REPLICAS) in one heap block
 * (cap == rcap) that gr_rs_destroy frees. The array pointers may point into the struct itself: a state is
 * initialised in place by gr_rs_init and never copied by value. */
#ifndef GR_BROKER_REPLICA_STATE_H
#define GR_BROKER_REPLICA_STATE_H

#include <stdbool.h>
#include <stdint.h>

#define GR_RS_MAX_REPLICAS 32 /* largest assignment / ISR accepted (-E2BIG beyond) */
#define GR_RS_INLINE 4        /* id arrays held inside the struct up to this many entries, */
#define GR_RS_INLINE_REMOTES (GR_RS_INLINE - 1) /* remote states up to this many (RF <= 4) */

enum gr_isr_state { GR_ISR_COMMITTED = 0, GR_ISR_PENDING_EXPAND, GR_ISR_PENDING_SHRINK };

/* What the leader knows of one remote replica. */
struct gr_rs_remote {
    int32_t id;
    int64_t leo;                   /* -1 until the follower fetched in this leader epoch */
    int64_t log_start_offset;      /* -1 unknown */
    int64_t last_caught_up_ms;
    int64_t last_fetch_leader_leo; /* leader LEO at the follower's previous fetch */
    int64_t last_fetch_ms;
};

struct gr_replica_state {
    int32_t local_id;
    int32_t leader_id;       /* -1 none */
    int32_t leader_epoch;    /* -1 before the first LeaderAndIsr */
    int32_t zk_version;
    int32_t controller_epoch;
    enum gr_isr_state isr_state;
    int nreplicas, nisr, nproposed, nremotes;
    int cap, rcap;           /* entries in each id array / in remotes */
    int64_t leader_epoch_start_offset; /* leader: LEO when it became leader; -1 on followers */
    int32_t elected_epoch;   /* leader: the leader epoch at which it became leader (a later LeaderAndIsr
                              * that keeps it leader, e.g. an ISR change, does not move it: Kafka's
                              * makeLeader isNewLeader); -1 on followers */
    int32_t *replicas;
    int32_t *isr;            /* committed ISR */
    int32_t *proposed;       /* the ISR sent in AlterPartition while pending */
    struct gr_rs_remote *remotes;
    void *heap;              /* the arrays when cap > GR_RS_INLINE, else NULL */
    struct {
        struct gr_rs_remote remotes[GR_RS_INLINE_REMOTES];
        int32_t ids[3 * GR_RS_INLINE];
    } inl;
};

/* Initialises st in place for broker local_id (no leader, epoch -1, inline arrays). */
void gr_rs_init(struct gr_replica_state *st, int32_t local_id);
/* Frees what st allocated (arrays beyond GR_RS_INLINE); st must be re-initialised to be used. */
void gr_rs_destroy(struct gr_replica_state *st);

bool gr_rs_is_leader(const struct gr_replica_state *st);
bool gr_rs_in_isr(const struct gr_replica_state *st, int32_t id);
bool gr_rs_in_maximal_isr(const struct gr_replica_state *st, int32_t id);
int gr_rs_maximal_isr_size(const struct gr_replica_state *st);
struct gr_rs_remote *gr_rs_remote(struct gr_replica_state *st, int32_t id);

/* Applies the LeaderAndIsr fields: replicas (remote states of replicas that stay are kept,
 * new ones start unknown), committed ISR (any pending change is dropped), leader, epoch,
 * zkVersion, controller epoch. n > GR_RS_MAX_REPLICAS returns -E2BIG and changes nothing. */
int gr_rs_set_assignment(struct gr_replica_state *st, int32_t leader, int32_t leader_epoch,
                         int32_t zk_version, int32_t controller_epoch, const int32_t *replicas,
                         int nreplicas, const int32_t *isr, int nisr);

/* Becoming leader at local LEO `leo` at time now: remote replicas in the ISR count as caught up
 * now, others never; their LEOs become unknown if this broker was not leader before
 * (was_leader false). Sets leader_epoch_start_offset = leo, and elected_epoch = leader_epoch unless
 * it was leader already. */
void gr_rs_become_leader(struct gr_replica_state *st, int64_t leo, int64_t now_ms, bool was_leader);

/* Records a follower fetch at fetch_offset (its LEO). Returns false for an unknown replica. */
bool gr_rs_update_follower(struct gr_replica_state *st, int32_t id, int64_t fetch_offset,
                           int64_t log_start_offset, int64_t now_ms, int64_t leader_leo);

/* The HW candidate (see the rules); the caller keeps max(old HW, candidate). */
int64_t gr_rs_hw_candidate(const struct gr_replica_state *st, int64_t leader_leo, int64_t now_ms,
                           int64_t lag_max_ms);

/* Should follower id join the ISR now? (no pending change, not in the ISR, caught up to hw). */
bool gr_rs_needs_expand(const struct gr_replica_state *st, int32_t id, int64_t hw);

/* ISR followers that are out of sync; fills out[] (GR_RS_MAX_REPLICAS) and returns the count
 * (0 while a change is pending). */
int gr_rs_out_of_sync(const struct gr_replica_state *st, int64_t leader_leo, int64_t now_ms,
                      int64_t lag_max_ms, int32_t *out);

/* Moves to PendingExpand / PendingShrink and fills the proposed ISR. Returns false (nothing
 * changed) if a change is already pending or the proposal equals the ISR. */
bool gr_rs_propose_expand(struct gr_replica_state *st, int32_t id);
bool gr_rs_propose_shrink(struct gr_replica_state *st, const int32_t *ids, int n);

/* Applies an AlterPartition answer for the proposal that is pending. error is a Kafka error code.
 * With INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED, (leader_epoch, isr, zk_version) are those of
 * the refused proposal: it is dropped only if it is the pending one. Returns 1 if the ISR was committed, 0 if the answer was ignored or we gave up, -1 if the
 * proposal should be sent again. */
int gr_rs_apply_alter_partition(struct gr_replica_state *st, int16_t error, int32_t leader_epoch,
                                const int32_t *isr, int nisr, int32_t zk_version);

/* Formats ids as "1,2,3" into buf (for logs); returns buf. */
char *gr_rs_fmt_ids(char *buf, int len, const int32_t *ids, int n);

#endif
