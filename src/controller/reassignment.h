/* Partition reassignment (KIP-455; Kafka 2.7's KafkaController.onPartitionReassignment and its
 * helpers), driven by /admin/reassign_partitions and the AlterPartitionReassignments /
 * ListPartitionReassignments APIs.
 *
 * Terms (reference §6): RS = the partition's replicas, ORS = original (RS - adding), TRS = target
 * (RS - removing), AR = adding, RR = removing. reassignTo(T): RS = distinct(T ++ ORS),
 * AR = RS - ORS, RR = RS - T. A partition is "being reassigned" when AR or RR is non-empty; that
 * state lives in the controller context (struct gr_ctrl_partition adding/removing), so it is
 * reloaded from /brokers/topics/T on failover and needs no separate set.
 *
 * Phases of gr_reassign_on_partition_reassignment:
 *   U  write RS/AR/RR to ZooKeeper (whole topic znode, guarded), then to memory; replicas of an
 *      earlier reassignment that are no longer in RS are removed from the ISR (leader epoch + 1,
 *      always) and stopped (StopReplica delete=true with that epoch).
 *   A  (TRS not a subset of the ISR in ZooKeeper) leader epoch + 1 (conditional guarded write),
 *      LeaderAndIsr to ORS and to AR (IsNew); AR -> NewReplica.
 *   B  (TRS subset of the ISR) AR -> OnlineReplica; RS = TRS in memory; Reassign election if the
 *      leader is not in TRS or is dead, else epoch + 1 and LeaderAndIsr to TRS; RR leave the ISR
 *      (epoch + 1, LeaderAndIsr to TRS) and get StopReplica(delete=true); RS = TRS written to
 *      ZooKeeper; the entry leaves /admin/reassign_partitions (deleted when empty, then
 *      re-armed); UpdateMetadata for the partition to every broker.
 * Batches: Kafka runs these phases one partition at a time (one topic znode write per partition
 * and phase, a state read and write and a request batch per step). Here every flow hands all the
 * partitions of its event to one batch (the API request's items, the znode's entries, the
 * partitions an ISR change completes, those resumed at failover or broker start-up), and each step
 * runs for all of them before the next: one /brokers/topics/T write per topic (many topics per
 * guarded multi), the state reads pipelined, the epoch bumps as conditional writes in guarded
 * multis (BADVERSION rereads those), one LeaderAndIsr/StopReplica batch per step, one state
 * machine call per transition, one /admin/reassign_partitions update. Per partition the
 * order of the steps is Kafka's. A partition listed twice in one batch makes the batch run one
 * partition at a time (the later entry sees the earlier one's outcome).
 *
 * Divergence from Kafka, on purpose: RR (and replicas dropped by a superseding reassignment) are
 * taken out of the ISR and stopped by this module directly instead of through
 * OfflineReplica -> ReplicaDeletionStarted -> ... -> NonExistentReplica: the leader epoch is bumped
 * even when they are not in the ISR, so their StopReplica(delete=true) is not fenced by the
 * broker (Kafka's path leaves such replicas behind), and the two StopReplicas (delete=false, then
 * delete=true) are one (delete=true). The replica state machine keeps states only for assigned
 * replicas, which these no longer are.
 *
 * Refused on purpose (INVALID_REPLICA_ASSIGNMENT), unlike Kafka: a reassignment or cancellation
 * whose new replica set holds no member of the cached ISR (only replicas being added were in sync).
 * Kafka 2.7 would write it, stop and delete the in-sync replicas and leave the partition leaderless.
 *
 * Topics queued for deletion: their reassignments are frozen -- new ones are refused
 * (UNKNOWN_TOPIC_OR_PARTITION), running ones are neither resumed nor completed (broker start-up,
 * failover, ISR changes skip them); the deletion removes their replicas (topic_deletion.h).
 *
 * ISR changes complete reassignments (IBP >= 2.7-IV2: no per-partition state watches):
 * gr_reassign_maybe_complete is called after AlterPartition and ISR-change notifications.
 *
 * Threading: everything except the pure helpers runs on the controller's event thread. Return
 * values: 0, GR_ECONTROLLER_MOVED (the event must end in maybeResign), or a ZooKeeper error. */
#ifndef GR_CONTROLLER_REASSIGNMENT_H
#define GR_CONTROLLER_REASSIGNMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/states.h"
#include "zk/kzk.h"

struct gr_ctrl_events;
struct gr_ctrl_event;

/* ---- pure arithmetic (any thread) ---- */

/* A replica assignment (Kafka's ReplicaAssignment). Arrays owned (malloc); release with
 * gr_replica_assignment_release. */
struct gr_replica_assignment {
    GR_REPLICA_ASSIGNMENT_FIELDS /* zk/kzk.h */
};
void gr_replica_assignment_release(struct gr_replica_assignment *a);
/* Deep copy of arrays (n may be 0, pointers may be NULL). */
void gr_replica_assignment_set(struct gr_replica_assignment *a, const int32_t *replicas, int n_replicas,
                               const int32_t *adding, int n_adding, const int32_t *removing, int n_removing);
bool gr_replica_assignment_reassigning(const struct gr_replica_assignment *a);
/* ORS = replicas - adding, TRS = replicas - removing: malloc'd arrays, *n set. */
int32_t *gr_replica_assignment_origin(const struct gr_replica_assignment *a, int *n);
int32_t *gr_replica_assignment_target(const struct gr_replica_assignment *a, int *n);
/* reassignTo: out = (distinct(target ++ ORS), AR = RS - ORS, RR = RS - target). out must not
 * alias cur; it is overwritten (not released). */
void gr_replica_assignment_reassign_to(const struct gr_replica_assignment *cur, const int32_t *target, int n_target,
                                       struct gr_replica_assignment *out);
bool gr_replica_assignment_equal(const struct gr_replica_assignment *a, const struct gr_replica_assignment *b);

/* validateReplicas: target non-empty, no duplicates, no negative ids, and every replica the
 * reassignment would add (reassignTo(target).adding) is in live[0..n_live). Returns NONE or
 * INVALID_REPLICA_ASSIGNMENT with a message written to msg (may be NULL). */
int16_t gr_reassign_validate(const struct gr_replica_assignment *cur, const int32_t *target, int n_target,
                             const int32_t *live, int n_live, char *msg, size_t msg_len);

/* ---- queries (event thread) ---- */

/* Is any partition of topic being reassigned? */
bool gr_reassign_topic_reassigning(struct gr_ctrl_context *ctx, const char *topic);
/* Number of partitions being reassigned. */
int64_t gr_reassign_count(struct gr_ctrl_context *ctx);

/* ---- controller flows (event thread) ---- */

/* onPartitionReassignment(tp, reassignment): phases U, then A or B (see above); a batch of one.
 * Returns 0, GR_ECONTROLLER_MOVED or the ZooKeeper error that stopped the partition. */
int gr_reassign_on_partition_reassignment(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, const char *topic,
                                          int32_t partition, const struct gr_replica_assignment *ra);

/* processZkPartitionReassignment: re-arms the exists-watch on /admin/reassign_partitions and, if
 * the znode exists, starts every entry (UNKNOWN_TOPIC_OR_PARTITION entries are dropped from the
 * znode). A znode that does not parse is logged and deleted. resumed (may be NULL) gets the
 * partitions that were started (topic pointers borrowed from the context). */
int gr_reassign_process_zk(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, struct gr_ctrl_tp_list *resumed);

/* initializePartitionReassignments (failover, after the state machines started): the znode's
 * entries first, then every other partition the context marks as being reassigned. */
int gr_reassign_failover(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em);

/* onBrokerStartup's maybeResumeReassignments: reassignments whose TRS contains a new broker. */
int gr_reassign_on_brokers_started(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, const int32_t *ids, int n);

/* maybeCompleteReassignment for every reassigning partition whose cached ISR already holds TRS
 * (called after AlterPartition / ISR change notifications; cheap when nothing is reassigning). */
int gr_reassign_maybe_complete(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em);

/* ---- API events (built by requests.c, the front door) ---- */

/* The payload of ApiPartitionReassignment (GR_EV_API_PARTITION_REASSIGNMENT). The producer fills
 * items (owned by the payload: topic strings and replica arrays are freed with it) and respond;
 * the controller fills err/msg per item and calls respond exactly once (payload_free answers
 * NOT_CONTROLLER if nobody did). */
struct gr_reassign_item {
    char *topic;
    int32_t partition;
    bool cancel;         /* Replicas null: revert to ORS */
    int n_replicas;
    int32_t *replicas;
    int16_t err;         /* result */
    char *msg;           /* result, may be NULL */
};
struct gr_reassign_api_payload {
    int n;
    struct gr_reassign_item *items;
    /* top_err != NONE: whole request failed (NOT_CONTROLLER), items' results unset */
    void (*respond)(void *arg, int16_t top_err, const struct gr_reassign_api_payload *pl);
    void *arg;
    bool responded;
};
struct gr_reassign_api_payload *gr_reassign_api_payload_new(int n);
void gr_reassign_api_payload_free(void *payload);
/* preempt hook for the event: answers NOT_CONTROLLER. */
void gr_reassign_api_preempt(struct gr_ctrl_event *ev);
/* processApiPartitionReassignment. active = this broker is the controller. */
int gr_reassign_process_api(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, struct gr_ctrl_event *ev, bool active);

/* The payload of ListPartitionReassignments. Request: all (partitions == NULL) or the listed
 * partitions. Result: the reassigning ones among them. */
struct gr_reassign_listing {
    char *topic;
    int32_t partition;
    struct gr_replica_assignment a;
};
struct gr_reassign_list_payload {
    bool all;
    int n_req;
    struct gr_kzk_tp *req;     /* owned (topics too) */
    int n_out;
    struct gr_reassign_listing *out; /* owned, filled by the controller, sorted by topic, partition */
    void (*respond)(void *arg, int16_t top_err, const struct gr_reassign_list_payload *pl);
    void *arg;
    bool responded;
};
struct gr_reassign_list_payload *gr_reassign_list_payload_new(void);
void gr_reassign_list_payload_free(void *payload);
void gr_reassign_list_preempt(struct gr_ctrl_event *ev);
int gr_reassign_process_list(struct gr_ctrl_sm *sm, struct gr_ctrl_event *ev, bool active);

#endif
