/* Controller event manager: see event_manager.h. */
#include "controller/event_manager.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "controller/clock.h"

#define LOGGER "kafka.controller.ControllerEventManager"
/* Kafka clears EventQueueTimeMs when no event arrived for this long. */
#define EVENT_QUEUE_TIME_TIMEOUT_MS 300000

struct gr_ctrl_events {
    int32_t controller_id;
    struct gr_ctrl_event_processor proc;
    struct gr_clock *clock;
    struct gr_metrics *metrics;

    pthread_mutex_t mu;        /* guards the queue, statuses, closed */
    pthread_cond_t nonempty;   /* signalled on put */
    pthread_cond_t done;       /* broadcast when a waited-for event finishes */
    /* Serialises put against clear_and_put (Kafka's putLock) so nothing slips in between the
     * drain and the new event. Taken before mu. */
    pthread_mutex_t put_lock;
    struct gr_ctrl_event *head, *tail;
    int64_t size;
    bool closed;

    pthread_t thread;
    bool thread_started;
    _Atomic int state;

    struct gr_gauge *queue_size;
    struct gr_histogram *queue_time;
    struct gr_timer *timers[GR_CS_COUNT];
};

static const char *const state_names[GR_CS_COUNT] = {
    "Idle", "ControllerChange", "BrokerChange", "TopicChange", "TopicDeletion",
    "AlterPartitionReassignment", "AutoLeaderBalance", "ManualLeaderBalance", "ControlledShutdown",
    "IsrChange", "LeaderAndIsrResponseReceived", "LogDirChange", "ControllerShutdown",
    "UncleanLeaderElectionEnable", "TopicUncleanLeaderElectionEnable", "ListPartitionReassignment",
    "UpdateMetadataResponseReceived", "UpdateFeatures",
};

static const char *const timer_names[GR_CS_COUNT] = {
    [GR_CS_IDLE] = NULL,
    [GR_CS_CONTROLLER_CHANGE] = "ControllerChangeRateAndTimeMs",
    [GR_CS_BROKER_CHANGE] = "LeaderElectionRateAndTimeMs",
    [GR_CS_TOPIC_CHANGE] = "TopicChangeRateAndTimeMs",
    [GR_CS_TOPIC_DELETION] = "TopicDeletionRateAndTimeMs",
    [GR_CS_ALTER_PARTITION_REASSIGNMENT] = "PartitionReassignmentRateAndTimeMs",
    [GR_CS_AUTO_LEADER_BALANCE] = "AutoLeaderBalanceRateAndTimeMs",
    [GR_CS_MANUAL_LEADER_BALANCE] = "ManualLeaderBalanceRateAndTimeMs",
    [GR_CS_CONTROLLED_SHUTDOWN] = "ControlledShutdownRateAndTimeMs",
    [GR_CS_ISR_CHANGE] = "IsrChangeRateAndTimeMs",
    [GR_CS_LEADER_AND_ISR_RESPONSE_RECEIVED] = "LeaderAndIsrResponseReceivedRateAndTimeMs",
    [GR_CS_LOG_DIR_CHANGE] = "LogDirChangeRateAndTimeMs",
    [GR_CS_CONTROLLER_SHUTDOWN] = "ControllerShutdownRateAndTimeMs",
    [GR_CS_UNCLEAN_LEADER_ELECTION_ENABLE] = "UncleanLeaderElectionEnableRateAndTimeMs",
    [GR_CS_TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE] = "TopicUncleanLeaderElectionEnableRateAndTimeMs",
    [GR_CS_LIST_PARTITION_REASSIGNMENT] = "ListPartitionReassignmentRateAndTimeMs",
    [GR_CS_UPDATE_METADATA_RESPONSE_RECEIVED] = NULL,
    [GR_CS_UPDATE_FEATURES] = "UpdateFeaturesRateAndTimeMs",
};

static const struct {
    const char *name;
    enum gr_ctrl_state state;
} event_info[GR_EV_COUNT] = {
    [GR_EV_STARTUP] = {"Startup", GR_CS_CONTROLLER_CHANGE},
    [GR_EV_CONTROLLER_CHANGE] = {"ControllerChange", GR_CS_CONTROLLER_CHANGE},
    [GR_EV_REELECT] = {"Reelect", GR_CS_CONTROLLER_CHANGE},
    [GR_EV_REGISTER_BROKER_AND_REELECT] = {"RegisterBrokerAndReelect", GR_CS_CONTROLLER_CHANGE},
    [GR_EV_EXPIRE] = {"Expire", GR_CS_CONTROLLER_CHANGE},
    [GR_EV_SHUTDOWN_EVENT_THREAD] = {"ShutdownEventThread", GR_CS_CONTROLLER_SHUTDOWN},
    [GR_EV_BROKER_CHANGE] = {"BrokerChange", GR_CS_BROKER_CHANGE},
    [GR_EV_BROKER_MODIFICATIONS] = {"BrokerModifications", GR_CS_BROKER_CHANGE},
    [GR_EV_TOPIC_CHANGE] = {"TopicChange", GR_CS_TOPIC_CHANGE},
    [GR_EV_PARTITION_MODIFICATIONS] = {"PartitionModifications", GR_CS_TOPIC_CHANGE},
    [GR_EV_TOPIC_DELETION] = {"TopicDeletion", GR_CS_TOPIC_DELETION},
    [GR_EV_TOPIC_DELETION_STOP_REPLICA_RESPONSE] = {"TopicDeletionStopReplicaResponseReceived",
                                                    GR_CS_TOPIC_DELETION},
    [GR_EV_ZK_PARTITION_REASSIGNMENT] = {"ZkPartitionReassignment", GR_CS_ALTER_PARTITION_REASSIGNMENT},
    [GR_EV_API_PARTITION_REASSIGNMENT] = {"ApiPartitionReassignment", GR_CS_ALTER_PARTITION_REASSIGNMENT},
    [GR_EV_PARTITION_REASSIGNMENT_ISR_CHANGE] = {"PartitionReassignmentIsrChange",
                                                 GR_CS_ALTER_PARTITION_REASSIGNMENT},
    [GR_EV_LIST_PARTITION_REASSIGNMENTS] = {"ListPartitionReassignments", GR_CS_LIST_PARTITION_REASSIGNMENT},
    [GR_EV_ISR_CHANGE_NOTIFICATION] = {"IsrChangeNotification", GR_CS_ISR_CHANGE},
    [GR_EV_ALTER_PARTITION_RECEIVED] = {"AlterPartitionReceived", GR_CS_ISR_CHANGE},
    [GR_EV_LOG_DIR_EVENT_NOTIFICATION] = {"LogDirEventNotification", GR_CS_LOG_DIR_CHANGE},
    [GR_EV_LEADER_AND_ISR_RESPONSE] = {"LeaderAndIsrResponseReceived", GR_CS_LEADER_AND_ISR_RESPONSE_RECEIVED},
    [GR_EV_UPDATE_METADATA_RESPONSE] = {"UpdateMetadataResponseReceived",
                                        GR_CS_UPDATE_METADATA_RESPONSE_RECEIVED},
    [GR_EV_CONTROLLED_SHUTDOWN] = {"ControlledShutdown", GR_CS_CONTROLLED_SHUTDOWN},
    [GR_EV_AUTO_PREFERRED_REPLICA_LEADER_ELECTION] = {"AutoPreferredReplicaLeaderElection",
                                                      GR_CS_AUTO_LEADER_BALANCE},
    [GR_EV_REPLICA_LEADER_ELECTION] = {"ReplicaLeaderElection", GR_CS_MANUAL_LEADER_BALANCE},
    [GR_EV_UNCLEAN_LEADER_ELECTION_ENABLE] = {"UncleanLeaderElectionEnable", GR_CS_UNCLEAN_LEADER_ELECTION_ENABLE},
    [GR_EV_TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE] = {"TopicUncleanLeaderElectionEnable",
                                                    GR_CS_TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE},
    [GR_EV_UPDATE_FEATURES] = {"UpdateFeatures", GR_CS_UPDATE_FEATURES},
    [GR_EV_STANDBY_REFRESH] = {"StandbyRefresh", GR_CS_IDLE},
    [GR_EV_MOCK] = {"MockEvent", GR_CS_CONTROLLER_CHANGE},
};

enum { ST_QUEUED = 0, ST_PROCESSING = 1, ST_PROCESSED = 2, ST_PREEMPTED = 3 };

/* ---- names ---- */

enum gr_ctrl_state gr_ctrl_event_state(enum gr_ctrl_event_type type) {
    return (unsigned)type < GR_EV_COUNT ? event_info[type].state : GR_CS_IDLE;
}

const char *gr_ctrl_event_name(enum gr_ctrl_event_type type) {
    return (unsigned)type < GR_EV_COUNT ? event_info[type].name : "UnknownEvent";
}

const char *gr_ctrl_state_name(enum gr_ctrl_state st) {
    return (unsigned)st < GR_CS_COUNT ? state_names[st] : "Unknown";
}

const char *gr_ctrl_state_timer_name(enum gr_ctrl_state st) {
    return (unsigned)st < GR_CS_COUNT ? timer_names[st] : NULL;
}

/* ---- events ---- */

struct gr_ctrl_event *gr_ctrl_event_new(enum gr_ctrl_event_type type) {
    struct gr_ctrl_event *ev = gr_calloc(1, sizeof *ev);
    ev->type = type;
    ev->broker_id = -1;
    ev->broker_epoch = -1;
    ev->partition = -1;
    return ev;
}

void gr_ctrl_event_free(struct gr_ctrl_event *ev) {
    if (!ev) return;
    if (ev->payload && ev->payload_free) ev->payload_free(ev->payload);
    free(ev->topic);
    free(ev);
}

/* ---- manager ---- */

static char *metric_name(char *buf, size_t len, const char *type, const char *name) {
    return gr_metrics_name(buf, len, "kafka.controller", type, name);
}

static int64_t queue_size_gauge(void *arg) { return gr_ctrl_events_size(arg); }

struct gr_ctrl_events *gr_ctrl_events_new(int32_t controller_id, const struct gr_ctrl_event_processor *proc,
                                          struct gr_clock *clock, struct gr_metrics *metrics) {
    struct gr_ctrl_events *em = gr_calloc(1, sizeof *em);
    em->controller_id = controller_id;
    em->proc = *proc;
    em->clock = clock;
    em->metrics = metrics;
    pthread_mutex_init(&em->mu, NULL);
    /* Recursive like Kafka's ReentrantLock: a preempt hook may put events. */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&em->put_lock, &attr);
    pthread_mutexattr_destroy(&attr);
    pthread_cond_init(&em->nonempty, NULL);
    pthread_cond_init(&em->done, NULL);
    atomic_store(&em->state, GR_CS_IDLE);
    if (metrics) {
        char n[256];
        gr_metrics_gauge_fn(metrics, metric_name(n, sizeof n, "ControllerEventManager", "EventQueueSize"),
                            queue_size_gauge, em);
        em->queue_time =
            gr_metrics_histogram(metrics, metric_name(n, sizeof n, "ControllerEventManager", "EventQueueTimeMs"));
        for (int s = 0; s < GR_CS_COUNT; s++) {
            if (!timer_names[s]) continue;
            em->timers[s] = gr_metrics_timer(metrics, metric_name(n, sizeof n, "ControllerStats", timer_names[s]));
        }
    }
    return em;
}

int64_t gr_ctrl_events_size(struct gr_ctrl_events *em) {
    pthread_mutex_lock(&em->mu);
    int64_t n = em->size;
    pthread_mutex_unlock(&em->mu);
    return n;
}

enum gr_ctrl_state gr_ctrl_events_state(struct gr_ctrl_events *em) {
    return (enum gr_ctrl_state)atomic_load(&em->state);
}

bool gr_ctrl_events_on_event_thread(struct gr_ctrl_events *em) {
    return em->thread_started && pthread_equal(pthread_self(), em->thread);
}

/* Marks ev finished: wakes a waiter or frees it. Caller holds em->mu. */
static struct gr_ctrl_event *finish_locked(struct gr_ctrl_events *em, struct gr_ctrl_event *ev, int status) {
    ev->status = status;
    if (ev->waited) {
        pthread_cond_broadcast(&em->done);
        return NULL;
    }
    return ev; /* caller frees outside the lock */
}

static void enqueue_locked(struct gr_ctrl_events *em, struct gr_ctrl_event *ev) {
    ev->next = NULL;
    ev->status = ST_QUEUED;
    if (em->tail) em->tail->next = ev;
    else em->head = ev;
    em->tail = ev;
    em->size++;
    pthread_cond_signal(&em->nonempty);
}

static void put_internal(struct gr_ctrl_events *em, struct gr_ctrl_event *ev, bool waited) {
    ev->enqueue_ms = gr_clock_now_ms(em->clock);
    ev->waited = waited;
    pthread_mutex_lock(&em->mu);
    if (em->closed) {
        struct gr_ctrl_event *f = finish_locked(em, ev, ST_PREEMPTED);
        pthread_mutex_unlock(&em->mu);
        gr_ctrl_event_free(f);
        return;
    }
    enqueue_locked(em, ev);
    pthread_mutex_unlock(&em->mu);
}

void gr_ctrl_events_put(struct gr_ctrl_events *em, struct gr_ctrl_event *ev) {
    pthread_mutex_lock(&em->put_lock);
    put_internal(em, ev, false);
    pthread_mutex_unlock(&em->put_lock);
}

void gr_ctrl_events_put_waited(struct gr_ctrl_events *em, struct gr_ctrl_event *ev) {
    pthread_mutex_lock(&em->put_lock);
    put_internal(em, ev, true);
    pthread_mutex_unlock(&em->put_lock);
}

/* Removes every queued event and preempts each on this thread. Caller holds put_lock. */
static void drain_and_preempt(struct gr_ctrl_events *em) {
    pthread_mutex_lock(&em->mu);
    struct gr_ctrl_event *list = em->head;
    em->head = em->tail = NULL;
    em->size = 0;
    pthread_mutex_unlock(&em->mu);
    while (list) {
        struct gr_ctrl_event *ev = list;
        list = ev->next;
        if (em->proc.preempt) em->proc.preempt(em->proc.ctx, ev);
        pthread_mutex_lock(&em->mu);
        struct gr_ctrl_event *f = finish_locked(em, ev, ST_PREEMPTED);
        pthread_mutex_unlock(&em->mu);
        gr_ctrl_event_free(f);
    }
}

void gr_ctrl_events_clear_and_put(struct gr_ctrl_events *em, struct gr_ctrl_event *ev, bool wait) {
    pthread_mutex_lock(&em->put_lock);
    drain_and_preempt(em);
    put_internal(em, ev, wait);
    pthread_mutex_unlock(&em->put_lock);
}

int gr_ctrl_events_wait(struct gr_ctrl_events *em, struct gr_ctrl_event *ev) {
    pthread_mutex_lock(&em->mu);
    /* A closed manager still finishes (or preempts) every event it holds, so this ends. */
    while (ev->status == ST_QUEUED || ev->status == ST_PROCESSING) pthread_cond_wait(&em->done, &em->mu);
    int rc = ev->status == ST_PROCESSED ? 0 : GR_ECLOSED;
    pthread_mutex_unlock(&em->mu);
    return rc;
}

#define SLOW_EVENT_US 100000

/* CPU time of the calling thread, microseconds. */
static int64_t thread_cpu_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Runs one dequeued event through the processor, with the state, queue-time and timer metrics. */
static void run_event(struct gr_ctrl_events *em, struct gr_ctrl_event *ev) {
    if (ev->type == GR_EV_SHUTDOWN_EVENT_THREAD) return; /* handled by the loop */
    enum gr_ctrl_state st = gr_ctrl_event_state(ev->type);
    atomic_store(&em->state, st);
    int64_t start = gr_clock_now_ms(em->clock);
    if (em->queue_time) gr_histogram_update(em->queue_time, (double)(start - ev->enqueue_ms));
    int64_t t0 = gr_mono_us(), c0 = thread_cpu_us();
    if (ev->type == GR_EV_MOCK) {
        if (ev->mock_fn) ev->mock_fn(ev);
    } else {
        em->proc.process(em->proc.ctx, ev);
    }
    int64_t took = gr_mono_us() - t0;
    if (em->timers[st]) gr_timer_update(em->timers[st], (double)took / 1000.0);
    /* Slow events name their cost: wall clock and the event thread's own CPU (the rest is
     * waiting, mostly for ZooKeeper; on a loaded machine also for a CPU). */
    if (took >= SLOW_EVENT_US)
        gr_info(LOGGER, "[ControllerEventThread controllerId=%d] Event %s took %lld ms (event thread CPU %lld ms)",
                em->controller_id, gr_ctrl_event_name(ev->type), (long long)(took / 1000),
                (long long)((thread_cpu_us() - c0) / 1000));
    atomic_store(&em->state, GR_CS_IDLE);
}

/* Pops the head. With `block`, waits for one (clearing the queue-time histogram after a long
 * idle period as Kafka does); returns NULL when closed and empty. Never blocks otherwise. */
static struct gr_ctrl_event *pop(struct gr_ctrl_events *em, bool block) {
    pthread_mutex_lock(&em->mu);
    bool timed_out_once = false;
    while (!em->head && block && !em->closed) {
        if (em->queue_time && !timed_out_once && gr_histogram_count(em->queue_time) != 0) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += EVENT_QUEUE_TIME_TIMEOUT_MS / 1000;
            if (pthread_cond_timedwait(&em->nonempty, &em->mu, &ts) == ETIMEDOUT && !em->head) {
                gr_histogram_clear(em->queue_time);
                timed_out_once = true;
            }
        } else {
            pthread_cond_wait(&em->nonempty, &em->mu);
        }
    }
    struct gr_ctrl_event *ev = em->head;
    if (ev) {
        em->head = ev->next;
        if (!em->head) em->tail = NULL;
        em->size--;
        ev->next = NULL;
        ev->status = ST_PROCESSING;
    }
    pthread_mutex_unlock(&em->mu);
    return ev;
}

static void complete(struct gr_ctrl_events *em, struct gr_ctrl_event *ev) {
    pthread_mutex_lock(&em->mu);
    struct gr_ctrl_event *f = finish_locked(em, ev, ST_PROCESSED);
    pthread_mutex_unlock(&em->mu);
    gr_ctrl_event_free(f);
}

int gr_ctrl_events_process_one(struct gr_ctrl_events *em) {
    struct gr_ctrl_event *ev = pop(em, false);
    if (!ev) return 0;
    run_event(em, ev);
    complete(em, ev);
    return 1;
}

static void *event_thread(void *arg) {
    struct gr_ctrl_events *em = arg;
    pthread_setname_np(pthread_self(), "ctrl-event");
    for (;;) {
        struct gr_ctrl_event *ev = pop(em, true);
        if (!ev) break;
        bool stop = ev->type == GR_EV_SHUTDOWN_EVENT_THREAD;
        run_event(em, ev);
        complete(em, ev);
        if (stop) break;
    }
    gr_debug(LOGGER, "[ControllerEventThread controllerId=%d] Stopped", em->controller_id);
    return NULL;
}

int gr_ctrl_events_start(struct gr_ctrl_events *em) {
    if (em->thread_started) return 0;
    int rc = pthread_create(&em->thread, NULL, event_thread, em);
    if (rc != 0) return -rc;
    em->thread_started = true;
    gr_debug(LOGGER, "[ControllerEventThread controllerId=%d] Starting", em->controller_id);
    return 0;
}

void gr_ctrl_events_close(struct gr_ctrl_events *em) {
    pthread_mutex_lock(&em->mu);
    bool was_closed = em->closed;
    pthread_mutex_unlock(&em->mu);
    if (was_closed) return;
    /* Like Kafka: clearAndPut(ShutdownEventThread), then wait for the thread. */
    pthread_mutex_lock(&em->put_lock);
    drain_and_preempt(em);
    if (em->thread_started) put_internal(em, gr_ctrl_event_new(GR_EV_SHUTDOWN_EVENT_THREAD), false);
    pthread_mutex_lock(&em->mu);
    em->closed = true;
    pthread_cond_broadcast(&em->nonempty);
    pthread_cond_broadcast(&em->done);
    pthread_mutex_unlock(&em->mu);
    pthread_mutex_unlock(&em->put_lock);
    if (em->thread_started) {
        pthread_join(em->thread, NULL);
        em->thread_started = false;
    }
    /* Anything left (process_one mode, or puts racing the close) is preempted. */
    pthread_mutex_lock(&em->put_lock);
    drain_and_preempt(em);
    pthread_mutex_unlock(&em->put_lock);
    if (em->metrics) {
        char n[256];
        gr_metrics_remove(em->metrics, metric_name(n, sizeof n, "ControllerEventManager", "EventQueueSize"));
        gr_metrics_remove(em->metrics, metric_name(n, sizeof n, "ControllerEventManager", "EventQueueTimeMs"));
        em->queue_time = NULL;
        /* The per-state timers belong to ControllerStats and stay, as in Kafka. */
    }
}

void gr_ctrl_events_free(struct gr_ctrl_events *em) {
    if (!em) return;
    gr_ctrl_events_close(em);
    pthread_mutex_destroy(&em->mu);
    pthread_mutex_destroy(&em->put_lock);
    pthread_cond_destroy(&em->nonempty);
    pthread_cond_destroy(&em->done);
    free(em);
}
