/* Partition and replica states of the controller's two state machines (Kafka 2.7's
 * PartitionState / ReplicaState), their valid previous states, and the "state machine
 * environment" shared by the request batch, the state machines, elections and the controller
 * flows (struct gr_ctrl_sm).
 *
 * Where the states live: struct gr_ctrl_partition.state holds the partition state and
 * .replica_states[i] the state of replicas[i] (context.h). Both start at 0 = NonExistent, which is
 * how Kafka's putPartitionStateIfNotExists(NonExistent) reads here.
 *
 * Valid transitions (target [allowed previous states]):
 *   partition: New [NonExistent]; Online [New, Online, Offline]; Offline [New, Online, Offline];
 *              NonExistent [Offline]
 *   replica:   New [NonExistent]; Online [New, Online, Offline, DeletionIneligible];
 *              Offline [New, Online, Offline, DeletionIneligible]; DeletionStarted [Offline];
 *              DeletionSuccessful [DeletionStarted]; DeletionIneligible [Offline, DeletionStarted];
 *              NonExistent [DeletionSuccessful]
 *
 * Threading: everything here runs on the controller's event thread (or the simulation driver). */
#ifndef GR_CONTROLLER_STATES_H
#define GR_CONTROLLER_STATES_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/context.h"
#include "zk/kzk.h"

enum gr_ctrl_partition_state {
    GR_PS_NONEXISTENT = 0,
    GR_PS_NEW = 1,
    GR_PS_ONLINE = 2,
    GR_PS_OFFLINE = 3,
    GR_PS_COUNT
};

enum gr_ctrl_replica_state {
    GR_RS_NONEXISTENT = 0,
    GR_RS_NEW = 1,
    GR_RS_ONLINE = 2,
    GR_RS_OFFLINE = 3,
    GR_RS_DELETION_STARTED = 4,
    GR_RS_DELETION_SUCCESSFUL = 5,
    GR_RS_DELETION_INELIGIBLE = 6,
    GR_RS_COUNT
};

/* Kafka's names: "NewPartition", "OnlinePartition", ..., "NewReplica", "ReplicaDeletionStarted". */
const char *gr_partition_state_name(int st);
const char *gr_replica_state_name(int st);
/* Is `from` a valid previous state for target `to`? (table above) */
bool gr_partition_transition_valid(int from, int to);
bool gr_replica_transition_valid(int from, int to);
/* "NewPartition,OnlinePartition" — the valid previous states of `to`, for log lines. */
const char *gr_partition_valid_previous(int to);
const char *gr_replica_valid_previous(int to);

/* The state machines' logger (Kafka's state-change.log). */
#define GR_STATE_CHANGE_LOGGER "state.change.logger"

/* Sentinels of LeaderAndIsr (kafka.api.LeaderAndIsr). */
#define GR_LEADER_NONE (-1)          /* NoLeader */
#define GR_LEADER_DURING_DELETE (-2) /* LeaderDuringDelete: UpdateMetadata for deleted topics */
#define GR_EPOCH_NONE (-1)           /* NoEpoch */
#define GR_EPOCH_DURING_DELETE (-2)  /* EpochDuringDelete: StopReplica for deleted topics */

struct gr_ctrl_sender_ops;
struct gr_ctrl_batch;
struct gr_ctrl_replica;

/* Work the flows (flows.h) leave to the controller: watches, reassignment and topic deletion.
 * Any function may be NULL. Called on the event thread; each returns 0, GR_ECONTROLLER_MOVED (the
 * flow stops and returns it) or another error (logged by the caller's event, the flow goes on). */
struct gr_ctrl_flow_hooks {
    void *arg;
    /* after onBrokerStartup's own steps, in Kafka's order: resume reassignments targeting these
     * brokers, resume deletion of their topics, register BrokerModifications watches */
    int (*brokers_started)(void *arg, const int32_t *ids, int n);
    /* after onBrokerFailure: unregister their BrokerModifications watches */
    int (*brokers_failed)(void *arg, const int32_t *ids, int n);
    /* onReplicasBecomeOffline: replicas of topics queued for deletion (failReplicaDeletion) */
    int (*replicas_offline_for_deletion)(void *arg, const struct gr_ctrl_replica *r, int n);
};
struct gr_metrics;
struct gr_meter;

/* Everything the state machines and flows need, borrowed from the controller that owns them.
 * Build it with gr_ctrl_sm_init (request_batch.h, which owns the batch) after the fields are set;
 * release with gr_ctrl_sm_release. */
struct gr_ctrl_sm {
    int32_t controller_id;
    struct gr_ctrl_context *ctx;            /* borrowed */
    struct gr_kzk *kzk;                     /* borrowed */
    const struct gr_ctrl_sender_ops *sender;/* borrowed */
    void *sender_ctx;
    struct gr_metrics *metrics;             /* borrowed; may be NULL */
    /* inter.broker.listener.name: the listener whose endpoint goes into LeaderAndIsr's
     * LiveLeaders. NULL = each broker's first endpoint. Borrowed. */
    const char *inter_broker_listener;
    /* The broker's unclean.leader.election.enable (used when a topic does not override it). */
    bool unclean_default;
    struct gr_ctrl_flow_hooks hooks;        /* copied by value; all NULL = none */
    /* the control request versions inter.broker.protocol.version allows (common/metadata_version.h);
     * 0 = the latest (request_batch.h rule 6) */
    int16_t leader_and_isr_version, update_metadata_version, stop_replica_version;

    /* owned, set up by gr_ctrl_sm_init */
    struct gr_ctrl_batch *batch;
    struct gr_meter *unclean_elections;     /* ControllerStats UncleanLeaderElectionsPerSec */
};

/* ---- context helpers (read-only over ctx) ---- */

/* liveOrShuttingDownBrokerIds contains id (registered in /brokers/ids). */
bool gr_ctrl_broker_registered(const struct gr_ctrl_context *ctx, int32_t id);
bool gr_ctrl_broker_shutting_down(const struct gr_ctrl_context *ctx, int32_t id);
/* Kafka's isReplicaOnline(broker, partition): registered, (include_shutting_down or not shutting
 * down), and the replica of p is not on an offline log dir. p may be NULL (broker-level check). */
bool gr_ctrl_replica_online(const struct gr_ctrl_context *ctx, const struct gr_ctrl_partition *p, int32_t broker,
                            bool include_shutting_down);
/* Is broker's replica of p on an offline log dir (context.h offline_dirs)? */
bool gr_ctrl_replica_on_offline_dir(const struct gr_ctrl_partition *p, int32_t broker);
/* Marks or clears it. Returns true if that changed anything. */
bool gr_ctrl_replica_set_offline_dir(struct gr_ctrl_partition *p, int32_t broker, bool offline);
/* Forgets the offline dirs of brokers ids[0..n) in every partition (onBrokerStartup). */
void gr_ctrl_clear_offline_dirs(struct gr_ctrl_context *ctx, const int32_t *ids, int n);
/* Is the topic in /admin/delete_topics (isTopicQueuedUpForDeletion)? */
bool gr_ctrl_topic_queued_for_deletion(const struct gr_ctrl_context *ctx, const char *topic);
/* Index of replica in p->replicas or -1. */
int gr_ctrl_replica_index(const struct gr_ctrl_partition *p, int32_t replica);
/* The replica state of `replica` of p (allocating replica_states on first use); NonExistent for
 * a replica that is not in the assignment. */
int gr_ctrl_replica_state_get(struct gr_ctrl_partition *p, int32_t replica);
/* Sets it (no-op for a replica not in the assignment). */
void gr_ctrl_replica_state_set(struct gr_ctrl_partition *p, int32_t replica, int st);

/* A replica of a partition, as the replica state machine addresses it. topic is borrowed. */
struct gr_ctrl_replica {
    const char *topic;
    int32_t partition;
    int32_t replica;
};

/* Appends to a growable array of tps/replicas (topic pointers are borrowed). */
struct gr_ctrl_tp_list {
    int n, cap;
    struct gr_kzk_tp *v;
};
struct gr_ctrl_replica_list {
    int n, cap;
    struct gr_ctrl_replica *v;
};
void gr_ctrl_tp_list_add(struct gr_ctrl_tp_list *l, const char *topic, int32_t partition);
void gr_ctrl_tp_list_free(struct gr_ctrl_tp_list *l);
void gr_ctrl_replica_list_add(struct gr_ctrl_replica_list *l, const char *topic, int32_t partition,
                              int32_t replica);
void gr_ctrl_replica_list_free(struct gr_ctrl_replica_list *l);

/* Formats ints as "1,2,3" into buf (truncating) and returns buf. */
char *gr_ctrl_fmt_ids(char *buf, size_t len, const int32_t *ids, int n);

#endif
