/* The controller's front door: the requests a broker's request handlers (src/api/handle_*.c)
 * hand to the controller. Each submit function turns its arguments into the matching controller
 * event (event_manager.h) and queues it; the controller's event thread processes it and calls
 * the completion callback with the answer. Request handlers use only this header (plus
 * controller.h's read-only accessors); none of them builds an event or includes
 * event_manager.h (scripts/check-layering.sh keeps the controller from including broker code in
 * the other direction).
 *
 * Completion contract, the same for every function here:
 *  1. `done(opaque, ...)` is called exactly once.
 *  2. It runs on the controller's event thread when the event is processed; or with
 *     NOT_CONTROLLER on the thread that preempts the event (a controller change drains the queue),
 *     that frees it unprocessed (the controller shut down), or -- when `c` is NULL -- on the
 *     submitting thread before the submit function returns. So the callback must not take locks
 *     its submitter holds while submitting.
 *  3. Every pointer it receives (results, strings, id arrays) is valid only during the call.
 *  4. Inputs are copied at submission, except AlterPartition's request, which is borrowed until done is
 *     called (the handler keeps the request frame alive until it answers).
 *
 * Not here: topic deletion. As in Kafka 2.7, DeleteTopics does not talk to the controller; it
 * creates /admin/delete_topics/<topic> (zk/kzk.h) and the controller's watch on that path queues
 * a TopicDeletion event (topic_deletion.h). Topic creation likewise goes through
 * /brokers/topics (admin/topic_admin.h).
 *
 * Threading: the submit functions may be called from any thread. */
#ifndef GR_CONTROLLER_REQUESTS_H
#define GR_CONTROLLER_REQUESTS_H

#include <stdbool.h>
#include <stdint.h>

#include "protocol/messages.h"
#include "controller/feature_versioning.h"
#include "zk/kzk.h"

struct gr_controller;

/* ElectLeaders' ElectionType. */
#define GR_ELECTION_PREFERRED 0
#define GR_ELECTION_UNCLEAN 1

/* A per-partition answer (ElectLeaders, AlterPartitionReassignments). */
struct gr_ctrl_tp_result {
    const char *topic;
    int32_t partition;
    int16_t error;
    const char *message; /* may be NULL */
    int32_t leader;      /* ElectLeaders with error NONE: the elected leader; else -1 */
};

/* ---- AlterPartition (key 56): processAlterPartition ---- */

typedef void (*gr_ctrl_alter_partition_done_fn)(void *opaque, const struct AlterPartitionResponse *resp);
/* request (of AlterPartition `version`, 0-3) is borrowed until done is called. The response
 * carries a top-level NOT_CONTROLLER when this broker is not (or no longer) the active controller. */
void gr_ctrl_submit_alter_partition(struct gr_controller *c, int16_t version, const struct AlterPartitionRequest *request,
                                    gr_ctrl_alter_partition_done_fn done, void *opaque);

/* ---- ControlledShutdown (key 7): doControlledShutdown ---- */

/* error: NONE, NOT_CONTROLLER, STALE_BROKER_EPOCH or BROKER_NOT_AVAILABLE (controlled_shutdown.h);
 * remaining: with NONE, the partitions the broker still leads. */
typedef void (*gr_ctrl_controlled_shutdown_done_fn)(void *opaque, int16_t error, const struct gr_kzk_tp *remaining,
                                                    int n_remaining);
/* broker_epoch -1 = not checked (ControlledShutdown v0-1). */
void gr_ctrl_submit_controlled_shutdown(struct gr_controller *c, int32_t broker_id, int64_t broker_epoch,
                                        gr_ctrl_controlled_shutdown_done_fn done, void *opaque);

/* ---- ElectLeaders (key 43): ReplicaLeaderElection ---- */

/* top_error: NOT_CONTROLLER when the controller could not even list the partitions (only with
 * "every partition"); else NONE and one result per partition: for a list, in the order given;
 * for "every partition", every partition the controller knows (ELECTION_NOT_NEEDED included). */
typedef void (*gr_ctrl_elect_done_fn)(void *opaque, int16_t top_error, const struct gr_ctrl_tp_result *results,
                                      int n);
/* type: GR_ELECTION_PREFERRED or GR_ELECTION_UNCLEAN (anything else answers INVALID_REQUEST per
 * partition). n < 0 = every partition (tps ignored). */
void gr_ctrl_submit_elect_leaders(struct gr_controller *c, int8_t type, const struct gr_kzk_tp *tps, int n,
                                  gr_ctrl_elect_done_fn done, void *opaque);

/* ---- AlterPartitionReassignments (key 45): ApiPartitionReassignment ---- */

struct gr_ctrl_reassignment {
    const char *topic;
    int32_t partition;
    const int32_t *replicas; /* target replicas */
    int n_replicas;          /* < 0: cancel the partition's reassignment (Replicas null) */
};
/* top_error != NONE (NOT_CONTROLLER): the whole request failed and results is empty; else one
 * result per item, in the order given. */
typedef void (*gr_ctrl_reassign_done_fn)(void *opaque, int16_t top_error, const struct gr_ctrl_tp_result *results,
                                         int n);
void gr_ctrl_submit_alter_reassignments(struct gr_controller *c, const struct gr_ctrl_reassignment *items, int n,
                                        gr_ctrl_reassign_done_fn done, void *opaque);

/* ---- ListPartitionReassignments (key 46) ---- */

struct gr_ctrl_reassignment_listing {
    const char *topic;
    int32_t partition;
    const int32_t *replicas, *adding, *removing;
    int n_replicas, n_adding, n_removing;
};
/* listings: the reassigning partitions among those asked for, sorted by topic then partition. */
typedef void (*gr_ctrl_list_reassignments_done_fn)(void *opaque, int16_t top_error,
                                                   const struct gr_ctrl_reassignment_listing *listings, int n);
/* n < 0 = every partition (tps ignored). */
void gr_ctrl_submit_list_reassignments(struct gr_controller *c, const struct gr_kzk_tp *tps, int n,
                                       gr_ctrl_list_reassignments_done_fn done, void *opaque);

/* ---- UpdateFeatures (key 57): processFeatureUpdates ---- */

/* top_error NOT_CONTROLLER (no results) or NONE with one result per update, in order. */
typedef void (*gr_ctrl_update_features_done_fn)(void *opaque, int16_t top_error,
                                                const struct gr_ctrl_feature_result *results, int n);
void gr_ctrl_submit_update_features(struct gr_controller *c, const struct gr_ctrl_feature_update *updates, int n,
                                    bool validate_only,
                                    gr_ctrl_update_features_done_fn done, void *opaque);

/* ---- dynamic config changes (DynamicConfigManager -> controller, as Kafka 2.7's
 * TopicConfigHandler and DynamicLogConfig do) ---- */

/* A topic's unclean.leader.election.enable became true: when this broker is the active
 * controller, queue TopicUncleanLeaderElectionEnable(topic) (online partition state changes for
 * its offline partitions; the election reads /config/topics/T). No completion. */
void gr_ctrl_topic_unclean_leader_election_enabled(struct gr_controller *c, const char *topic);
/* The broker-level unclean.leader.election.enable in effect (dynamic per-broker > dynamic default
 * > server.properties) is now `enable`: the controller uses it as the topics' default from now on
 * and, when true and active, queues UncleanLeaderElectionEnable (Kafka's
 * enableDefaultUncleanLeaderElection). No completion. */
void gr_ctrl_set_default_unclean_leader_election(struct gr_controller *c, bool enable);

#endif
