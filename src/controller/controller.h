/* The controller (Kafka 2.7's KafkaController, ZooKeeper mode): election through /controller,
 * resignation, session expiry handling, and -- when elected -- onControllerFailover: watches on
 * the cluster's znodes and a full load of brokers, topics, assignments and partition states into
 * the context.
 *
 * Every broker runs one controller object; at most one in the cluster is active. All controller
 * state lives in struct gr_controller and is touched only on its event thread (event_manager.h);
 * ZooKeeper watch/session callbacks only enqueue events.
 *
 * Dependencies are interfaces given at creation, so a simulation can supply its own:
 *   - kzk + watches: the ZooKeeper layer (zk/kzk.h) over any gr_zk_backend, and the watch
 *     registry that backend delivers into;
 *   - clock: time and timers (clock.h);
 *   - sender: requests to brokers (sender.h);
 *   - metrics: the registry the gauges and timers go into.
 *
 * Fencing: every ZooKeeper write the controller makes is a guarded multi (check of
 * /controller_epoch's zkVersion); GR_ECONTROLLER_MOVED from any step makes the event end in
 * maybeResign, as Kafka's ControllerMovedException does.
 *
 * The work is split over modules named after Kafka's: the partition and replica state machines
 * (partition_sm.h, replica_sm.h, states.h), the request batch and the channel manager
 * (request_batch.h, channel_manager.h), onBrokerStartup / onBrokerFailure /
 * onNewPartitionCreation and AlterPartition (flows.h), log-dir failures (offline_dirs.h), topic deletion
 * (topic_deletion.h), reassignment (reassignment.h), preferred and auto leader election
 * (leader_balance.h), controlled shutdown (controlled_shutdown.h). Request handlers reach the
 * controller only through its front door (requests.h).
 *
 * Not implemented: feature versioning (/feature, UpdateFeatures); see docs/ARCHITECTURE.md.
 *
 * Metrics (kafka.controller:type=KafkaController,name=...): ActiveControllerCount,
 * ControllerState, GlobalTopicCount, GlobalPartitionCount, OfflinePartitionsCount,
 * PreferredReplicaImbalanceCount, TopicsToDeleteCount, ReplicasToDeleteCount,
 * TopicsIneligibleToDeleteCount, ReplicasIneligibleToDeleteCount; plus the event manager's. */
#ifndef GR_CONTROLLER_CONTROLLER_H
#define GR_CONTROLLER_CONTROLLER_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/context.h"
#include "zk/kzk.h"

struct gr_clock;
struct gr_ctrl_events;
struct gr_metrics;
struct gr_config;
struct gr_ctrl_sender_ops;

/* How a failover's context was loaded (on_context_loaded below; the "ready as controller" log
 * line). A cold load has warm false and states_confirmed 0. */
struct gr_ctrl_load_report {
    bool warm;                 /* started from the standby context */
    int64_t standby_states;    /* partition states the standby offered */
    int64_t states_confirmed;  /* of those, kept: their topic's stamp was unchanged */
    int64_t states_read;       /* partition states read from ZooKeeper (found or not) */
};

struct gr_controller_config {
    int32_t broker_id;
    /* The broker's own registration (copied): re-created on every new ZooKeeper session. */
    const struct gr_kzk_broker *broker_info;
    int64_t broker_epoch;              /* from the initial registration */

    struct gr_kzk *kzk;                /* borrowed; outlives the controller */
    struct gr_zk_watches *watches;     /* borrowed; the backend's callback registry */
    struct gr_clock *clock;            /* borrowed */
    const struct gr_ctrl_sender_ops *sender; /* NULL = gr_ctrl_sender_null */
    void *sender_ctx;
    struct gr_metrics *metrics;        /* borrowed; may be NULL */
    const struct gr_config *broker_config; /* borrowed; may be NULL (simulation, Kafka's defaults):
                                            * inter.broker.listener.name, unclean.leader.election
                                            * .enable, leader.imbalance.per.broker.percentage */

    bool auto_leader_rebalance_enable;
    int64_t leader_imbalance_check_interval_ms;
    bool delete_topic_enable;

    /* Warm standby (gregor.controller.standby.enable / .refresh.ms; docs/ARCHITECTURE.md "Warm
     * standby controller"): while inactive, keep a standby context (topics, assignments, partition
     * states with their zkVersions), refreshed every standby_refresh_ms, and at failover start
     * from it after proving each partition state current. Off: every failover loads cold. */
    bool standby_enable;
    int64_t standby_refresh_ms;
    /* Called on the event thread right after a failover loaded its context (warm or cold), before
     * anything acts on it; for the simulation's W1 check. May be NULL. */
    void (*on_context_loaded)(void *arg, struct gr_ctrl_context *ctx, const struct gr_ctrl_load_report *r);
    void *context_hook_arg;

    /* Fresh topic ids for topics without one (topic_ids.h); NULL fn: random (gr_uuid_random). */
    void (*topic_id_fn)(void *arg, struct gr_uuid *out);
    void *topic_id_arg;

    /* Simulation mode: no event thread; the owner drives gr_ctrl_events_process_one() and the
     * session-expiry callback does not block. */
    bool no_thread;

    /* Called on the event thread when a new ZooKeeper session was established, before the
     * broker re-registers (the server persists the session id there). If it returns true,
     * *prev holds the previous session, which register_broker may close. May be NULL. */
    bool (*on_new_session)(void *arg, struct gr_zsession *prev);
    void *hook_arg;
};

struct gr_controller;

/* Creates a controller (not started). The config is copied (borrowed pointers stay borrowed).
 * Any thread. */
struct gr_controller *gr_controller_new(const struct gr_controller_config *cfg);

/* Registers the ZooKeeper session handler, enqueues Startup and starts the event thread (unless
 * no_thread). Returns 0 or -errno. Owner thread. */
int gr_controller_startup(struct gr_controller *c);

/* Stops the controller: unregisters its session and /controller handlers, closes the event
 * manager (queued events are preempted), resigns if active and deletes /controller with a
 * guarded delete so another broker takes over at once. Idempotent. Owner thread, not the event
 * thread. */
void gr_controller_shutdown(struct gr_controller *c);

/* Shuts down if needed and frees. Call after the ZooKeeper backend is destroyed (so no session
 * callback can still be running into this controller). NULL is ignored. */
void gr_controller_free(struct gr_controller *c);

/* Any thread (atomic reads). */
bool gr_controller_is_active(struct gr_controller *c);
int32_t gr_controller_active_id(struct gr_controller *c);
int64_t gr_controller_broker_epoch(struct gr_controller *c);
/* The controller epoch this broker holds (when active) or last held; 0 before any. */
int32_t gr_controller_epoch(struct gr_controller *c);

/* The event manager (event_manager.h), e.g. to drive it in a simulation. Request handlers use the
 * front door (requests.h) instead. */
struct gr_ctrl_events *gr_controller_events(struct gr_controller *c);
/* The context: event thread (or simulation driver) only. */
struct gr_ctrl_context *gr_controller_context(struct gr_controller *c);

/* The real clock (clock.h) for a controller: its timers put their events on the controller's
 * event manager. Free with gr_clock_free after the controller. Start-up thread. */
struct gr_clock *gr_controller_real_clock_new(void);

#endif
