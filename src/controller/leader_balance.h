/* Preferred and unclean replica leader elections (Kafka 2.7's KafkaController.onReplicaElection,
 * processReplicaLeaderElection, checkAndTriggerAutoLeaderRebalance): the ElectLeaders API, the
 * /admin/preferred_replica_election znode ({"version":1,"partitions":[{"topic":t,"partition":p}]})
 * and the periodic auto leader rebalance; plus the PreferredReplicaImbalanceCount gauge.
 *
 * Election types: PREFERRED (0) uses the Preferred strategy (assignment[0] if live and in the ISR);
 * UNCLEAN (1) uses the Offline strategy, with unclean election allowed only when an admin client
 * asked for it.
 *
 * Per-partition answers of ReplicaLeaderElection:
 *   UNKNOWN_TOPIC_OR_PARTITION      not in the controller's context
 *   INVALID_TOPIC_EXCEPTION         the topic is queued for deletion
 *   ELECTION_NOT_NEEDED             PREFERRED: the preferred replica leads already;
 *                                   UNCLEAN: the partition has a live leader
 *   PREFERRED_LEADER_NOT_AVAILABLE  PREFERRED election failed (no eligible leader, stale state...),
 *                                   or the partition has no leadership info yet (NewPartition)
 *   ELIGIBLE_LEADERS_NOT_AVAILABLE  UNCLEAN election failed
 *   NONE (leader set)               elected
 * ZooKeeper-triggered elections delete the znode afterwards and queue another
 * ReplicaLeaderElection (payload NULL) that re-arms its exists-watch.
 *
 * Threading: controller event thread. Returns 0, GR_ECONTROLLER_MOVED or a ZooKeeper error. */
#ifndef GR_CONTROLLER_LEADER_BALANCE_H
#define GR_CONTROLLER_LEADER_BALANCE_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/requests.h" /* GR_ELECTION_PREFERRED / GR_ELECTION_UNCLEAN */
#include "controller/states.h"

struct gr_ctrl_events;
struct gr_ctrl_event;

enum gr_election_trigger { GR_TRIGGER_AUTO, GR_TRIGGER_ZK, GR_TRIGGER_ADMIN };

/* The payload of an ElectLeaders-triggered ReplicaLeaderElection (built by requests.c) (GR_EV_REPLICA_LEADER_ELECTION
 * with a payload; payload NULL = triggered by /admin/preferred_replica_election). The producer
 * fills type, all or items[].topic/partition (owned), respond and arg. The controller fills
 * err/msg/leader of every item (with `all`, it first fills items with every partition it knows)
 * and calls respond exactly once; payload_free answers NOT_CONTROLLER per item if nobody did. */
struct gr_elect_item {
    char *topic;
    int32_t partition;
    int16_t err;
    char *msg;        /* may be NULL */
    int32_t leader;   /* when err == NONE */
};
struct gr_elect_payload {
    int8_t type;      /* GR_ELECTION_PREFERRED / GR_ELECTION_UNCLEAN */
    bool all;         /* TopicPartitions null: every partition */
    int n;
    struct gr_elect_item *items;
    /* top_err: NOT_CONTROLLER when the controller could not even list the partitions */
    void (*respond)(void *arg, int16_t top_err, const struct gr_elect_payload *pl);
    void *arg;
    bool responded;
};
struct gr_elect_payload *gr_elect_payload_new(int n);
void gr_elect_payload_free(void *payload);
void gr_elect_preempt(struct gr_ctrl_event *ev);

/* processReplicaLeaderElection for ev (ZooKeeper- or admin-triggered). active = this broker is
 * the controller. */
int gr_leader_balance_process_election(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, struct gr_ctrl_event *ev,
                                       bool active);

/* onReplicaElection: elects tps with the type's strategy; rcs (may be NULL) gets 0 or
 * GR_PSM_EFAILED per partition. Non-admin triggers log failures; ZooKeeper triggers then delete
 * the znode and re-arm it. */
int gr_leader_balance_elect(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, const struct gr_kzk_tp *tps, int n,
                            int type, enum gr_election_trigger trigger, int *rcs);

/* Failover: pending elections from /admin/preferred_replica_election (already done or deleted
 * topics skipped), then the znode is deleted and re-armed. */
int gr_leader_balance_failover(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em);

/* checkAndTriggerAutoLeaderRebalance with leader.imbalance.per.broker.percentage = percent. */
int gr_leader_balance_auto(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, int percent);

/* PreferredReplicaImbalanceCount: partitions with leadership info, not queued for deletion,
 * whose leader is not assignment[0] (a reassignment adding the preferred replica counts only
 * while that replica is outside the ISR). */
int64_t gr_leader_balance_imbalance_count(struct gr_ctrl_context *ctx);

#endif
