/* The partition state machine (Kafka 2.7's ZkPartitionStateMachine) and the leader-election
 * driver.
 *
 * Transitions (states.h has the valid previous states):
 *   NonExistent -> New      : cache only (assignment already in the context).
 *   New -> Online           : leader = first live replica, ISR = live replicas, leader epoch 0;
 *                             state znodes created in guarded multis (kzk batches them); then
 *                             LeaderAndIsr(IsNew) to the ISR (+ UpdateMetadata to all).
 *   Online/Offline -> Online: leader election with the given strategy (election.h): reread the
 *                             state znodes (missing, or written by a higher controller epoch ->
 *                             failure), leader epoch + 1, conditional guarded update; BADVERSION ->
 *                             reread and retry; LeaderAndIsr to the strategy's recipients.
 *   * -> Offline, Offline -> NonExistent: cache only.
 * Invalid transitions are refused and logged (ERROR, state.change.logger). Successful ones are
 * logged at INFO with the controller epoch.
 *
 * Every call wraps its work in one request batch (begin ... send). Return values: 0 (individual
 * failures are logged and reported through rcs[]), or GR_ECONTROLLER_MOVED when a guarded write
 * found the controller epoch changed: nothing is sent, the caller must resign.
 * Event thread only. */
#ifndef GR_CONTROLLER_PARTITION_SM_H
#define GR_CONTROLLER_PARTITION_SM_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/election.h"
#include "controller/states.h"

/* Per-partition outcome in rcs[]: 0 (transition done) or this. */
#define GR_PSM_EFAILED (-1201)

struct gr_psm_strategy {
    enum gr_election_strategy kind;
    bool allow_unclean; /* Offline only: elect out-of-sync replicas without looking at configs */
};

/* handleStateChanges(partitions, target, strategy). strategy is required (non-NULL) when target
 * is Online and some partition is Online/Offline. rcs (may be NULL) gets n outcomes. */
int gr_psm_handle_state_changes(struct gr_ctrl_sm *sm, const struct gr_kzk_tp *tps, int n, int target,
                                const struct gr_psm_strategy *strategy, int *rcs);

/* triggerOnlinePartitionStateChange: every New/Offline partition (topics queued for deletion
 * excluded) -> Online with the Offline strategy, allowUnclean = false. topic != NULL limits it
 * to that topic. */
int gr_psm_trigger_online(struct gr_ctrl_sm *sm, const char *topic);

/* startup(): initial state of every partition (no leadership info -> New; leader online ->
 * Online; else Offline), then gr_psm_trigger_online. */
int gr_psm_startup(struct gr_ctrl_sm *sm);

/* Whether unclean election is enabled for topic: /config/topics/T's
 * unclean.leader.election.enable, else sm->unclean_default. Returns 0 or a kzk error. */
int gr_psm_topic_unclean_enabled(struct gr_ctrl_sm *sm, const char *topic, bool *enabled);

/* The partitions in one of the given states (bit set of 1 << state), optionally of one topic,
 * appended to out (topic pointers borrowed from the context). */
void gr_psm_partitions_in_states(struct gr_ctrl_sm *sm, unsigned state_mask, const char *topic,
                                 struct gr_ctrl_tp_list *out);

#endif
