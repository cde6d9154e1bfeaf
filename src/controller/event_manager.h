/* The controller event manager (Kafka's ControllerEventManager): one FIFO queue of controller
 * events and one thread that processes them one at a time. Every read or write of controller
 * state happens while processing an event, so controller code needs no locks.
 *
 * Producers (any thread: ZooKeeper watcher/completion callbacks, request handlers, timers) only
 * build an event and put it here; they never touch controller state.
 *
 * Two ways to drive it:
 *  - gr_ctrl_events_start(): the "controller-event-thread" loops, blocking on the queue;
 *  - gr_ctrl_events_process_one(): processes the head of the queue on the caller's thread, so a
 *    deterministic simulation can run the controller step by step without any thread.
 * Never mix the two on one manager.
 *
 * Event ownership: gr_ctrl_event_new() returns an event owned by the caller; put/clear_and_put
 * take ownership; the manager frees it (and its payload, through payload_free) after it was
 * processed or preempted -- unless a caller waits for it (gr_ctrl_events_wait), in which case
 * the waiter frees it with gr_ctrl_event_free after the wait returns.
 *
 * Metrics (in the registry given at creation; names as Kafka):
 *   kafka.controller:type=ControllerEventManager,name=EventQueueSize      gauge
 *   kafka.controller:type=ControllerEventManager,name=EventQueueTimeMs    histogram (cleared after
 *                                                                         300 s without events)
 *   kafka.controller:type=ControllerStats,name=<State>RateAndTimeMs       timer per state, except
 *       Idle and UpdateMetadataResponseReceived; BrokerChange is LeaderElectionRateAndTimeMs and
 *       AlterPartitionReassignment is PartitionReassignmentRateAndTimeMs. */
#ifndef GR_CONTROLLER_EVENT_MANAGER_H
#define GR_CONTROLLER_EVENT_MANAGER_H

#include <stdbool.h>
#include <stdint.h>

struct gr_metrics;
struct gr_clock;

/* Kafka's ControllerState; the value is what the ControllerState gauge reports. */
enum gr_ctrl_state {
    GR_CS_IDLE = 0,
    GR_CS_CONTROLLER_CHANGE = 1,
    GR_CS_BROKER_CHANGE = 2,
    GR_CS_TOPIC_CHANGE = 3,
    GR_CS_TOPIC_DELETION = 4,
    GR_CS_ALTER_PARTITION_REASSIGNMENT = 5,
    GR_CS_AUTO_LEADER_BALANCE = 6,
    GR_CS_MANUAL_LEADER_BALANCE = 7,
    GR_CS_CONTROLLED_SHUTDOWN = 8,
    GR_CS_ISR_CHANGE = 9,
    GR_CS_LEADER_AND_ISR_RESPONSE_RECEIVED = 10,
    GR_CS_LOG_DIR_CHANGE = 11,
    GR_CS_CONTROLLER_SHUTDOWN = 12,
    GR_CS_UNCLEAN_LEADER_ELECTION_ENABLE = 13,
    GR_CS_TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE = 14,
    GR_CS_LIST_PARTITION_REASSIGNMENT = 15,
    GR_CS_UPDATE_METADATA_RESPONSE_RECEIVED = 16,
    GR_CS_UPDATE_FEATURES = 17,
    GR_CS_COUNT
};

/* Kafka's ControllerEvent classes (2.7). The state each maps to is gr_ctrl_event_state(). */
enum gr_ctrl_event_type {
    GR_EV_STARTUP,
    GR_EV_CONTROLLER_CHANGE,
    GR_EV_REELECT,
    GR_EV_REGISTER_BROKER_AND_REELECT,
    GR_EV_EXPIRE,
    GR_EV_SHUTDOWN_EVENT_THREAD,
    GR_EV_BROKER_CHANGE,
    GR_EV_BROKER_MODIFICATIONS,       /* broker_id */
    GR_EV_TOPIC_CHANGE,
    GR_EV_PARTITION_MODIFICATIONS,    /* topic */
    GR_EV_TOPIC_DELETION,
    GR_EV_TOPIC_DELETION_STOP_REPLICA_RESPONSE, /* broker_id, payload */
    GR_EV_ZK_PARTITION_REASSIGNMENT,
    GR_EV_API_PARTITION_REASSIGNMENT, /* payload (+ preempt hook answers NOT_CONTROLLER) */
    GR_EV_PARTITION_REASSIGNMENT_ISR_CHANGE, /* topic, partition */
    GR_EV_LIST_PARTITION_REASSIGNMENTS,
    GR_EV_ISR_CHANGE_NOTIFICATION,
    GR_EV_ALTER_PARTITION_RECEIVED,         /* broker_id, payload */
    GR_EV_LOG_DIR_EVENT_NOTIFICATION,
    GR_EV_LEADER_AND_ISR_RESPONSE,    /* broker_id, payload */
    GR_EV_UPDATE_METADATA_RESPONSE,   /* broker_id, payload */
    GR_EV_CONTROLLED_SHUTDOWN,        /* broker_id, broker_epoch, payload (+ preempt hook) */
    GR_EV_AUTO_PREFERRED_REPLICA_LEADER_ELECTION,
    GR_EV_REPLICA_LEADER_ELECTION,    /* payload */
    GR_EV_UNCLEAN_LEADER_ELECTION_ENABLE,
    GR_EV_TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE, /* topic */
    GR_EV_UPDATE_FEATURES,            /* payload */
    GR_EV_STANDBY_REFRESH,            /* Gregor's: an inactive controller refreshes its standby
                                       * context (controller.c; no Kafka counterpart) */
    GR_EV_MOCK,                       /* tests: mock_fn(event) is called instead of the processor */
    GR_EV_COUNT
};

struct gr_ctrl_event;
typedef void (*gr_ctrl_event_fn)(struct gr_ctrl_event *ev);

/* One queued event: a tagged struct. Fields other than the internal ones are set by the producer
 * before put and read by the processor; they are owned by the event. */
struct gr_ctrl_event {
    enum gr_ctrl_event_type type;
    int64_t enqueue_ms;   /* set by put from the manager's clock */
    int32_t broker_id;    /* BrokerModifications, responses, ControlledShutdown, AlterPartition */
    int64_t broker_epoch; /* ControlledShutdown, AlterPartition */
    int32_t partition;    /* PartitionReassignmentIsrChange */
    char *topic;          /* owned; freed with the event */
    void *payload;        /* type-specific; freed by payload_free (if set) with the event */
    void (*payload_free)(void *payload);
    /* Called instead of processing when clear_and_put drains the event (on the thread calling
     * clear_and_put); e.g. answers a waiting request with NOT_CONTROLLER. May be NULL. */
    gr_ctrl_event_fn preempt;
    gr_ctrl_event_fn mock_fn; /* GR_EV_MOCK only */
    void *mock_arg;

    /* internal to the manager */
    struct gr_ctrl_event *next;
    bool waited;          /* someone will call gr_ctrl_events_wait: do not free */
    int status;           /* 0 queued, 1 processing, 2 processed, 3 preempted */
};

/* The processor: the controller. process() runs on the event thread (or the caller of
 * process_one); preempt() runs on the thread calling clear_and_put. */
struct gr_ctrl_event_processor {
    void (*process)(void *ctx, struct gr_ctrl_event *ev);
    void (*preempt)(void *ctx, struct gr_ctrl_event *ev);
    void *ctx;
};

struct gr_ctrl_events;

/* Allocates a zeroed event of `type`. Any thread. */
struct gr_ctrl_event *gr_ctrl_event_new(enum gr_ctrl_event_type type);
/* Frees the event, its topic and payload. NULL is ignored. */
void gr_ctrl_event_free(struct gr_ctrl_event *ev);
/* Kafka's ControllerState for an event type. */
enum gr_ctrl_state gr_ctrl_event_state(enum gr_ctrl_event_type type);
/* "Startup", "BrokerChange", ... (Kafka's class names). */
const char *gr_ctrl_event_name(enum gr_ctrl_event_type type);
/* "Idle", "ControllerChange", ... */
const char *gr_ctrl_state_name(enum gr_ctrl_state st);
/* "LeaderElectionRateAndTimeMs" etc., or NULL for states without a timer. */
const char *gr_ctrl_state_timer_name(enum gr_ctrl_state st);

/* Creates a manager (no thread yet). clock, metrics (may be NULL) and the processor are borrowed
 * and must outlive it. controller_id only labels log lines. Any thread. */
struct gr_ctrl_events *gr_ctrl_events_new(int32_t controller_id, const struct gr_ctrl_event_processor *proc,
                                          struct gr_clock *clock, struct gr_metrics *metrics);

/* Starts the event thread. Returns 0 or -errno. Owner thread. */
int gr_ctrl_events_start(struct gr_ctrl_events *em);

/* Appends ev to the queue (takes ownership). After close the event is freed unprocessed.
 * Any thread. */
void gr_ctrl_events_put(struct gr_ctrl_events *em, struct gr_ctrl_event *ev);

/* Drains the queue -- each drained event is preempted (processor preempt, then freed) on this
 * thread -- and appends ev. If `wait` is true the event is marked as waited-for: the caller must
 * then call gr_ctrl_events_wait(em, ev) and free it. Any thread. */
void gr_ctrl_events_clear_and_put(struct gr_ctrl_events *em, struct gr_ctrl_event *ev, bool wait);

/* Like put, but the caller keeps a reference and must call gr_ctrl_events_wait then free. */
void gr_ctrl_events_put_waited(struct gr_ctrl_events *em, struct gr_ctrl_event *ev);

/* Blocks until ev (put with wait) has been processed or preempted or the manager was closed.
 * Returns 0 when processed, GR_ECLOSED otherwise. Must not be called on the event thread. */
int gr_ctrl_events_wait(struct gr_ctrl_events *em, struct gr_ctrl_event *ev);

/* Processes the event at the head of the queue on the caller's thread (for simulations and
 * tests; never together with the event thread). Returns 1 if an event was processed, 0 if the
 * queue was empty. */
int gr_ctrl_events_process_one(struct gr_ctrl_events *em);

/* Number of queued events. Any thread. */
int64_t gr_ctrl_events_size(struct gr_ctrl_events *em);

/* The state of the event being processed (GR_CS_IDLE between events). Any thread. */
enum gr_ctrl_state gr_ctrl_events_state(struct gr_ctrl_events *em);

/* True if the calling thread is the event thread. */
bool gr_ctrl_events_on_event_thread(struct gr_ctrl_events *em);

/* Stops the thread: queued events are preempted, a running event finishes, the thread is joined.
 * Later puts free their event. Removes the manager's metrics. Idempotent. Owner thread. */
void gr_ctrl_events_close(struct gr_ctrl_events *em);

/* Closes (if needed) and frees. NULL is ignored. */
void gr_ctrl_events_free(struct gr_ctrl_events *em);

#endif
