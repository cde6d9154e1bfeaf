/* The controller flows built on the state machines (Kafka 2.7's KafkaController):
 * new partitions, broker start-up / failure (incl. bounced brokers), failover steps 6-7,
 * ISR change notifications, AlterPartition, and the response events of control requests.
 *
 * All functions run on the controller's event thread over a struct gr_ctrl_sm. They return 0, or
 * GR_ECONTROLLER_MOVED when a guarded ZooKeeper write found /controller_epoch changed: the caller
 * (the event handler in controller.c) must then maybeResign. Steps that the flows do not own
 * (watches, reassignment, topic deletion) are reported through sm->hooks. */
#ifndef GR_CONTROLLER_FLOWS_H
#define GR_CONTROLLER_FLOWS_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/states.h"
#include "protocol/arena.h"
#include "protocol/messages.h"

struct gr_ctrl_event;

/* sendUpdateMetadataRequest(brokers, partitions): one batch. */
void gr_ctrl_send_update_metadata(struct gr_ctrl_sm *sm, const int32_t *brokers, int n_brokers,
                                  const struct gr_kzk_tp *tps, int n_tps);
/* ... to every registered broker (liveOrShuttingDownBrokerIds). */
void gr_ctrl_send_update_metadata_all(struct gr_ctrl_sm *sm, const struct gr_kzk_tp *tps, int n_tps);

/* onNewPartitionCreation: New -> NewReplica -> Online -> OnlineReplica. The partitions must be in
 * the context already (assignment loaded). */
int gr_ctrl_on_new_partition_creation(struct gr_ctrl_sm *sm, const struct gr_kzk_tp *tps, int n);

/* onBrokerStartup(newBrokers), brokers already in the context: UpdateMetadata (brokers only) to
 * the other brokers, full (partitions with leaders) to the new ones; their replicas -> Online;
 * triggerOnlinePartitionStateChange; hooks.brokers_started. */
int gr_ctrl_on_broker_startup(struct gr_ctrl_sm *sm, const int32_t *ids, int n);

/* onBrokerFailure(deadBrokers), brokers already removed from the context: drop them from the
 * shutting-down set; onReplicasBecomeOffline(their replicas); hooks.brokers_failed. */
int gr_ctrl_on_broker_failure(struct gr_ctrl_sm *sm, const int32_t *ids, int n);

/* onReplicasBecomeOffline, for a broker failure and for replicas on a failed log dir
 * (offline_dirs.c) alike: partitions of these replicas whose leader is not online -> Offline;
 * trigger online; replicas (topics not queued for deletion) -> Offline; the others to
 * hooks.replicas_offline_for_deletion; UpdateMetadata (brokers only) to all (Kafka: only if no
 * leader was lost). */
int gr_ctrl_on_replicas_become_offline(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *r, int n);

/* processBrokerChange after /brokers/ids was reread: cur[0..n) are the registered brokers with
 * their epochs. Computes new, dead and bounced (same id, higher epoch) brokers, updates the
 * sender's channels and the context, then runs startup (new), failure + startup (bounced),
 * failure (dead). Logs the sets like Kafka. */
int gr_ctrl_process_broker_change(struct gr_ctrl_sm *sm, const struct gr_kzk_broker *cur, int n);

/* onControllerFailover steps 6-7, after the context is loaded and the sender has every broker:
 * UpdateMetadata (brokers only) to all; the replica states (online replicas Online, the others
 * DeletionIneligible); the partition state machine's startup (the elections of the partitions
 * whose leader is offline, with their LeaderAndIsr/UpdateMetadata); the LeaderAndIsr of every
 * online replica (the states as they are now, elected ones included); then the offline replicas
 * -> Offline (their ISR shrinks).
 * Unlike Kafka 2.7 -- ZkReplicaStateMachine.startup sends the online replicas' LeaderAndIsr and
 * takes the offline replicas to Offline before the partition state machine starts -- the
 * elections come first: the order of onReplicasBecomeOffline, i.e. what Kafka's controller does
 * when it sees a broker die (BrokerChange). Kafka's order writes every partition of a dead broker
 * twice (the ISR shrink with leader -1, then the election), elects only after every ISR shrink is
 * written, and puts the full LeaderAndIsr/UpdateMetadata of every partition ahead of the
 * elections' on each broker's connection: at 100k partitions with the old controller's broker
 * dead, 133k writes and two full requests per broker before the last partition has a leader,
 * instead of 33k writes. The elections shrink the ISR to its live replicas themselves; Offline
 * then writes only the partitions whose ISR still holds an offline replica. Every write is the
 * same guarded conditional write; every online replica still gets its LeaderAndIsr (brokers may
 * have missed the previous controller's requests), and the end state is the one a BrokerChange
 * gives. */
int gr_ctrl_failover_start_state_machines(struct gr_ctrl_sm *sm);

/* processIsrChangeNotification: reads /isr_change_notification (re-arming the child watch),
 * reloads those partitions' states from ZooKeeper into the context, sends UpdateMetadata for them
 * to all brokers, deletes the processed notifications (guarded). */
int gr_ctrl_process_isr_change_notification(struct gr_ctrl_sm *sm);

/* ---- AlterPartition (reference §7) ---- */

/* Broker-level check: STALE_BROKER_EPOCH when the broker is unknown or broker_epoch differs from
 * the cached one, else NONE. */
int16_t gr_alter_partition_check_broker(struct gr_ctrl_context *ctx, int32_t broker_id, int64_t broker_epoch);

/* One partition's proposal, whatever the request version. */
struct gr_alter_partition_proposal {
    int16_t version;               /* of the AlterPartition request (0-3) */
    int32_t broker_id;             /* the sender: the proposed leader */
    int32_t leader_epoch;
    const int32_t *isr;            /* NewIsr, or the ids of NewIsrWithEpochs (v3) */
    const int64_t *isr_epochs;     /* v3: each member's broker epoch (-1 unknown); NULL below v3 */
    int n_isr;
    int8_t leader_recovery_state;  /* v1+ (KIP-704); 0 = RECOVERED */
    int32_t partition_epoch;       /* the zkVersion the leader knows */
};

/* Partition-level check of one proposal (Kafka 3.9's KafkaController.tryProcessAlterPartition, in
 * its order; p may be NULL = unknown partition):
 *   UNKNOWN_TOPIC_OR_PARTITION  no leadership info
 *   NOT_CONTROLLER              the leader knows a newer leader epoch or zkVersion than we do
 *   FENCED_LEADER_EPOCH         leader_epoch < the current leader epoch
 *   NONE with *already = true   (broker_id, leader_epoch, ISR ids, RECOVERED) equal the current
 *                               state: answer the current state, no write
 *   INVALID_UPDATE_VERSION      partition_epoch older than the cached zkVersion
 *   INVALID_REQUEST             leader_recovery_state is not RECOVERED (Gregor has no RECOVERING
 *                               state; Kafka refuses RECOVERED -> RECOVERING the same way); or (not
 *                               checked by Kafka) a member is not an assigned replica or is named twice
 *   INELIGIBLE_REPLICA (v2+) / OPERATION_NOT_ATTEMPTED (v0-1)
 *                               a member is not a live broker or is shutting down (KIP-841), or
 *                               (v3, KIP-903) its broker epoch is neither -1 nor its registration's
 *   NONE with *already = false  write it. */
int16_t gr_alter_partition_check_partition(struct gr_ctrl_context *ctx, const struct gr_ctrl_partition *p,
                                           const struct gr_alter_partition_proposal *pr, bool *already);

/* processAlterPartition for an active controller: fills resp (initialised by the caller, arrays
 * allocated in a) for a request of `version`: topics by name (v0-1) or by id (v2+; an unknown id
 * answers UNKNOWN_TOPIC_ID for each of its partitions, the response names topics as asked).
 * Accepted ISRs are written with the same leader epoch and leader = broker_id through guarded
 * conditional updates (BADVERSION -> INVALID_UPDATE_VERSION), cached, answered with the new
 * zkVersion; UpdateMetadata for every requested partition of a known topic goes to all brokers.
 * Returns 0, or GR_ECONTROLLER_MOVED (resp carries NOT_CONTROLLER). */
int gr_ctrl_process_alter_partition(struct gr_ctrl_sm *sm, int16_t version, int32_t broker_id, int64_t broker_epoch,
                                    const struct AlterPartitionRequest *req, struct gr_arena *a, struct AlterPartitionResponse *resp);

/* The payload of an AlterPartitionReceived event (GR_EV_ALTER_PARTITION_RECEIVED, broker_id and broker_epoch
 * set on the event). respond is called exactly once with the response: by
 * gr_ctrl_alter_partition_complete on the event thread, or by the payload's free function (NOT_CONTROLLER)
 * if the event is dropped or preempted. */
struct gr_ctrl_alter_partition_payload {
    const struct AlterPartitionRequest *request; /* borrowed until respond is called */
    int16_t version;                             /* the request's (0-3) */
    void (*respond)(void *arg, const struct AlterPartitionResponse *resp);
    void *arg;
    bool responded;
};
/* payload_free for the event (answers NOT_CONTROLLER if nobody answered). */
void gr_ctrl_alter_partition_payload_free(void *payload);
/* Answers with a top-level error (e.g. NOT_CONTROLLER when not active). */
void gr_ctrl_alter_partition_fail(struct gr_ctrl_alter_partition_payload *pl, int16_t error);
/* Event handler body: processes the request (active controller assumed) and answers.
 * Returns what gr_ctrl_process_alter_partition returned. */
int gr_ctrl_alter_partition_complete(struct gr_ctrl_sm *sm, struct gr_ctrl_event *ev);

/* ---- responses of control requests (payload = struct gr_ctrl_response, response.h) ---- */

/* LeaderAndIsrResponseReceived / UpdateMetadataResponseReceived: log errors (state.change.logger).
 * (KAFKA_STORAGE_ERROR answers are tracked by offline_dirs.h.) */
void gr_ctrl_process_leader_and_isr_response(struct gr_ctrl_sm *sm, struct gr_ctrl_event *ev);
void gr_ctrl_process_update_metadata_response(struct gr_ctrl_sm *sm, struct gr_ctrl_event *ev);

#endif
