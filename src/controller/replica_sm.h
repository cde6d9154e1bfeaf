/* The replica state machine (Kafka 2.7's ZkReplicaStateMachine).
 *
 * Transitions (states.h has the valid previous states):
 *   -> New                : LeaderAndIsr(IsNew) to the replica if the partition has a leader;
 *                           refused when the replica is that leader.
 *   -> Online             : from New nothing is sent; otherwise LeaderAndIsr to the replica if the
 *                           partition has leadership info.
 *   -> Offline            : StopReplica(delete=false) to the replica; remove it from the ISR in
 *                           ZooKeeper (leader -> -1 if it led; an ISR of one is left as is, so the
 *                           ISR never empties; leader epoch + 1; conditional guarded update, BADVERSION
 *                           -> reread and retry); LeaderAndIsr to the remaining assigned replicas
 *                           unless the topic is queued for deletion. Partitions without
 *                           leadership info only get UpdateMetadata to all brokers.
 *                           Unlike Kafka (one write per broker), all of a partition's replicas
 *                           going offline in one call are removed in ONE write (the leader and ISR
 *                           Kafka's last write would leave; leader epoch + 1 once), and the state
 *                           starts from the context when its cached ISR holds one of them (the
 *                           write is conditional: BADVERSION rereads).
 *   -> DeletionStarted    : StopReplica(delete=true).
 *   -> DeletionIneligible, DeletionSuccessful: cache only.
 *   -> NonExistent        : the replica is removed from the partition's assignment (and state).
 * Replicas are processed grouped by broker id (Offline: grouped by partition for the writes).
 * One request batch per call.
 *
 * Returns 0 or GR_ECONTROLLER_MOVED (nothing sent; the caller resigns). Event thread only. */
#ifndef GR_CONTROLLER_REPLICA_SM_H
#define GR_CONTROLLER_REPLICA_SM_H

#include "controller/states.h"

int gr_rsm_handle_state_changes(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *replicas, int n, int target);

/* The controlled shutdown's -> Offline of the replicas the leaving broker follows, in two steps so
 * that their ISR-shrink writes overlap the election's requests: gr_rsm_prepare_offline (before
 * the election) checks the transitions and prepares the first round of ISR shrinks from the
 * context exactly as gr_rsm_handle_state_changes(..., GR_RS_OFFLINE) would, and has kzk start
 * writing them once the next state write (the election's) is done
 * (gr_kzk_job_start_after_next_write); nothing goes to the request batch. gr_rsm_finish_offline
 * then does everything else of that call (StopReplica, the results of the first round, later
 * rounds, LeaderAndIsr, send), waiting for the writes first; once every ISR shrink is written
 * (none refused for the controller epoch) and before the LeaderAndIsr/UpdateMetadata for them
 * are built, it calls written(arg) if not NULL (the controlled shutdown answers there). It frees
 * pr and returns 0 or GR_ECONTROLLER_MOVED. gr_rsm_prepared_free drops a prepared call (a write not yet started is
 * not made). The written states are the same guarded conditional writes, made in the same ZooKeeper
 * session after the election's. Event thread only. */
struct gr_rsm_prepared;
struct gr_rsm_prepared *gr_rsm_prepare_offline(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *replicas, int n);
int gr_rsm_finish_offline(struct gr_ctrl_sm *sm, struct gr_rsm_prepared *pr, void (*written)(void *), void *arg);
void gr_rsm_prepared_free(struct gr_rsm_prepared *pr);

/* startup() in the steps gr_ctrl_failover_start_state_machines interleaves with the partition
 * state machine's (flows.h): gr_rsm_startup_init sets the online replicas Online and the others
 * DeletionIneligible, appending those to offline (owned by the caller, who triggers their
 * -> Offline); gr_rsm_startup_online then sends the LeaderAndIsr of the replicas Online (each
 * partition with a state, as the context holds it then). */
void gr_rsm_startup_init(struct gr_ctrl_sm *sm, struct gr_ctrl_replica_list *offline);
int gr_rsm_startup_online(struct gr_ctrl_sm *sm);

/* Every replica hosted by one of brokers[] (replicasOnBrokers), appended to out. */
void gr_rsm_replicas_on_brokers(struct gr_ctrl_sm *sm, const int32_t *brokers, int n, struct gr_ctrl_replica_list *out);
/* Every replica of the given partitions (replicasForPartition). */
void gr_rsm_replicas_for_partitions(struct gr_ctrl_sm *sm, const struct gr_kzk_tp *tps, int n,
                                    struct gr_ctrl_replica_list *out);

#endif
