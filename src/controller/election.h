/* Partition leader election strategies (Kafka 2.7's PartitionLeaderElectionAlgorithms and
 * Election.scala): pure functions, no ZooKeeper and no sending. The driver that rereads the state
 * znodes, bumps the leader epoch and writes conditionally is gr_psm_elect_leaders in
 * partition_sm.h.
 *
 * | strategy           | leader                                                   | new ISR                         | LeaderAndIsr to               |
 * |--------------------|----------------------------------------------------------|---------------------------------|-------------------------------|
 * | Offline(unclean)   | first assigned replica live and in the ISR; else, if     | clean: ISR minus offline;       | live assigned replicas        |
 * |                    | unclean is allowed, first live assigned replica          | unclean: [leader]               |                               |
 * | Reassign           | first target replica (RS - removing) live and in the ISR | unchanged                       | all target replicas           |
 * | Preferred          | assignment[0] if live and in the ISR                     | unchanged                       | the assignment                |
 * | ControlledShutdown | first assigned replica in the ISR, live (shutting-down   | ISR minus shutting-down brokers | live and shutting-down        |
 * |                    | counts as live) and not shutting down                    |                                 | assigned replicas             |
 *
 * "Live" = registered, not shutting down, not on an offline log dir (gr_ctrl_replica_online). A
 * successful election's new state has leader_epoch + 1 and keeps the input zk_version (the expected version of the
 * conditional write); controller_epoch is left for the driver to set.
 * Threading: pure; callers are on the event thread because they read the context. */
#ifndef GR_CONTROLLER_ELECTION_H
#define GR_CONTROLLER_ELECTION_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/context.h"
#include "zk/kzk.h"

enum gr_election_strategy {
    GR_ELECT_OFFLINE = 0,
    GR_ELECT_REASSIGN = 1,
    GR_ELECT_PREFERRED = 2,
    GR_ELECT_CONTROLLED_SHUTDOWN = 3,
};
/* "OfflinePartitionLeaderElectionStrategy" etc. */
const char *gr_election_strategy_name(enum gr_election_strategy s);

/* ---- the algorithms over plain id lists: return the leader or -1 ---- */

/* *unclean_used (may be NULL) is set when the leader came from the unclean branch. */
int32_t gr_elect_offline_leader(const int32_t *assignment, int n_assignment, const int32_t *isr, int n_isr,
                                const int32_t *live, int n_live, bool unclean_enabled, bool *unclean_used);
int32_t gr_elect_reassign_leader(const int32_t *reassignment, int n_reassignment, const int32_t *isr, int n_isr,
                                 const int32_t *live, int n_live);
int32_t gr_elect_preferred_leader(const int32_t *assignment, int n_assignment, const int32_t *isr, int n_isr,
                                  const int32_t *live, int n_live);
int32_t gr_elect_controlled_shutdown_leader(const int32_t *assignment, int n_assignment, const int32_t *isr,
                                            int n_isr, const int32_t *live, int n_live,
                                            const int32_t *shutting_down, int n_shutting_down);

/* ---- Election.scala: one partition against the context ---- */

struct gr_election_result {
    bool elected;            /* false: no eligible leader */
    bool unclean;            /* Offline strategy chose an out-of-sync leader */
    struct gr_kzk_leader_and_isr lai; /* when elected: new leader/ISR (owned isr) */
    int n_recipients;
    int32_t *recipients;     /* who gets LeaderAndIsr (owned; set even when not elected) */
};
void gr_election_result_release(struct gr_election_result *r);

/* Elects a leader for partition p (its assignment in the context) whose current state is cur
 * (as just reread from ZooKeeper). unclean_enabled matters for GR_ELECT_OFFLINE only. */
void gr_elect_partition(struct gr_ctrl_context *ctx, const struct gr_ctrl_partition *p,
                        const struct gr_kzk_leader_and_isr *cur, enum gr_election_strategy strategy,
                        bool unclean_enabled, struct gr_election_result *out);

/* True if any ISR member of cur is a live replica of p (decides whether the topic's unclean config
 * must be consulted). */
bool gr_elect_has_live_isr(struct gr_ctrl_context *ctx, const struct gr_ctrl_partition *p,
                           const struct gr_kzk_leader_and_isr *cur);

#endif
