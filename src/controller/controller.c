/* The controller: election, resignation, session expiry, failover and the znode-change events.
 * See controller.h. Functions named like Kafka's (elect, maybe_resign, ...) do what Kafka 2.7's
 * KafkaController methods of the same name do; the flows they start live in the modules of
 * controller.h's list.
 *
 * Return convention inside this file: 0, GR_ECONTROLLER_MOVED (the event ends in maybe_resign),
 * or another error (logged by process()). */
#include "controller/controller.h"
#include "controller/feature_versioning.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "common/config.h"
#include "common/kerr.h"
#include "controller/channel_manager.h"
#include "controller/clock.h"
#include "controller/event_manager.h"
#include "controller/flows.h"
#include "controller/leader_balance.h"
#include "controller/reassignment.h"
#include "controller/partition_sm.h"
#include "controller/replica_sm.h"
#include "controller/topic_ids.h"
#include "common/metadata_version.h"
#include "controller/requests.h"
#include "controller/request_batch.h"
#include "controller/response.h"
#include "controller/sender.h"
#include "controller/controlled_shutdown.h"
#include "controller/offline_dirs.h"
#include "controller/topic_deletion.h"

#define LOGGER "kafka.controller.KafkaController"
#define SESSION_HANDLER_NAME "controller"

#define CONTROLLER_PATH "/controller"
#define BROKER_IDS_PATH "/brokers/ids"
#define TOPICS_PATH "/brokers/topics"
#define DELETE_TOPICS_PATH "/admin/delete_topics"
#define REASSIGN_PATH "/admin/reassign_partitions"
#define PREFERRED_PATH "/admin/preferred_replica_election"
#define ISR_CHANGE_PATH "/isr_change_notification"
#define LOG_DIR_EVENT_PATH "/log_dir_event_notification"

/* Reads of many znodes are split into pipelined batches of this many. States: one bulk read
 * (bulk_read.c: its own session) up to 100k partitions -- each batch pays a session, a sync and
 * a drained pipeline, and its decoding waits for its last reply (in batches of 20k the 100k load
 * read ~25 % slower than the raw pipelined read, bench/README.md session 6); the cap bounds the
 * answers held at once (~200 B each). */
#define TOPIC_BATCH 2000
#define STATE_BATCH 100000
/* Kafka schedules the first auto-rebalance check 5 s after failover. */
#define AUTO_REBALANCE_FIRST_DELAY_MS 5000

enum {
    G_ACTIVE,
    G_OFFLINE,
    G_IMBALANCE,
    G_TOPICS,
    G_PARTITIONS,
    G_TOPICS_TO_DELETE,
    G_REPLICAS_TO_DELETE,
    G_TOPICS_INELIGIBLE,
    G_REPLICAS_INELIGIBLE,
    G_COUNT
};
static const char *const gauge_names[G_COUNT] = {
    "ActiveControllerCount",     "OfflinePartitionsCount",        "PreferredReplicaImbalanceCount",
    "GlobalTopicCount",          "GlobalPartitionCount",          "TopicsToDeleteCount",
    "ReplicasToDeleteCount",     "TopicsIneligibleToDeleteCount", "ReplicasIneligibleToDeleteCount",
};

struct gr_controller {
    struct gr_controller_config cfg;
    struct gr_kzk_broker broker_info; /* owned copy */
    struct gr_kzk *kzk;
    struct gr_zk_watches *watches;
    const struct gr_ctrl_sender_ops *sender;
    void *sender_ctx;

    struct gr_ctrl_events *em;
    struct gr_ctrl_context ctx; /* event thread only */
    /* The standby context (cfg.standby_enable; event thread only): topics, assignments and
     * partition states as last read (never this broker's own term's). Never acted on: a failover
     * uses a state from it only after proving it current (load_partition_states). */
    struct gr_ctrl_context standby;
    int32_t standby_term;   /* the epoch of the stamping controller the last refresh saw in office,
                             * -1 = none or unknown (docs/ARCHITECTURE.md "Warm standby
                             * controller": whose writes the stamps prove) */
    int32_t standby_isr_cv; /* the cversion of /isr_change_notification the last refresh saw, -1 =
                             * unknown: a broker that writes its ISR itself (Kafka before AlterIsr)
                             * stamps nothing, but announces every write there */
    uint64_t standby_timer; /* the next StandbyRefresh (0 = none) */
    int64_t standby_gen;    /* generation of the armed StandbyRefresh (its event carries it in
                             * broker_epoch); a tick of another generation is stale: ignored */
    bool standby_ready;     /* a refresh has filled the standby since this broker started or its
                             * last failover moved the standby into the context (a failover from
                             * it starts warm) */
    uint64_t candidacy_timer; /* the deferred Reelect of defer_candidacy (0 = none) */
    int64_t candidacy_gen;    /* generation of the armed deferred Reelect (its event carries it in
                               * broker_epoch, > 0; a watch's Reelect has -1): a deferred Reelect of
                               * another generation was superseded or cancelled: ignored */
    struct gr_ctrl_sm sm;       /* state machines, batch and flows over ctx (event thread only) */

    _Atomic int32_t active_id;
    _Atomic int64_t broker_epoch;
    _Atomic int32_t epoch; /* mirror of ctx.epoch for other threads */

    /* This incarnation won /controller in elect() (for the epoch whose /controller_epoch zkVersion
     * is ctx.epoch_zk_version) and has not resigned since (event thread): a /controller naming
     * this broker counts as "active" only then, and only while that election is still the last
     * one (see note_controller). */
    bool term;
    uint64_t auto_rebalance_timer; /* 0 = none */
    /* TopicChange pacing (process_topic_change): the deferred TopicChange's timer (0 = none) and
     * when the last TopicChange was processed. */
    uint64_t topic_change_timer;
    int64_t topic_change_last_ms;
    bool topic_change_ran;
    /* Generation of the armed auto-rebalance timer; its event carries it (in broker_epoch). A tick
     * whose generation is not the current one belongs to an earlier term or chain: ignored. */
    int64_t auto_rebalance_gen;
    /* The full-scan gauges (OfflinePartitionsCount, PreferredReplicaImbalanceCount) as last
     * computed, at context generation metrics_gen (ctx.gen); metrics_valid false: recompute. */
    int64_t offline_count, imbalance_count;
    uint64_t metrics_gen;
    bool metrics_valid;
    int metrics_skipped; /* rescans put off while events were queued (update_metrics) */
    bool started, shut_down;

    struct gr_gauge *gauges[G_COUNT];
    struct gr_topic_deletion *td; /* topic deletion manager (topic_deletion.h) */
    struct gr_ctrl_flow_hooks td_hooks; /* the deletion manager's flow hooks, chained by ours */
    struct gr_offline_dirs *od;   /* replicas on offline log dirs (offline_dirs.h) */
    _Atomic int dyn_unclean_default; /* -1 = none; else the broker's dynamic default (requests.h) */
    /* Heap trims after large events (maybe_trim): gr_ctrl_ctx_work() at the last trim, when it
     * ended, and until when answers are trimmed too (gr_mono_ms; 0 = not). */
    uint64_t trim_work;
    int64_t trim_last_ms, trim_answers_until_ms;
};

/* ---- logging ---- */

static void ctrl_log(struct gr_controller *c, enum gr_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void ctrl_log(struct gr_controller *c, enum gr_log_level lvl, const char *fmt, ...) {
    char msg[3072];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (atomic_load(&c->active_id) == c->cfg.broker_id)
        gr_log(lvl, LOGGER, "[Controller id=%d epoch=%d] %s", c->cfg.broker_id, c->ctx.epoch, msg);
    else
        gr_log(lvl, LOGGER, "[Controller id=%d] %s", c->cfg.broker_id, msg);
}
#define CINFO(c, ...) ctrl_log(c, GR_LOG_INFO, __VA_ARGS__)
#define CWARN(c, ...) ctrl_log(c, GR_LOG_WARN, __VA_ARGS__)
#define CERROR(c, ...) ctrl_log(c, GR_LOG_ERROR, __VA_ARGS__)
#define CDEBUG(c, ...) ctrl_log(c, GR_LOG_DEBUG, __VA_ARGS__)

/* "1,2,3" of an int array, truncated with "..." if long. */
static char *fmt_ids(char *buf, size_t len, const int32_t *ids, int n) {
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        int w = snprintf(buf + off, len - off, "%s%d", i ? "," : "", ids[i]);
        if (w < 0 || (size_t)w >= len - off) {
            if (len > 4) strcpy(buf + len - 4, "...");
            break;
        }
        off += (size_t)w;
    }
    return buf;
}

static char *fmt_names(char *buf, size_t len, const char *const *names, size_t n) {
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(buf + off, len - off, "%s%s", i ? "," : "", names[i]);
        if (w < 0 || (size_t)w >= len - off) {
            if (len > 4) strcpy(buf + len - 4, "...");
            break;
        }
        off += (size_t)w;
    }
    return buf;
}

static bool is_active(struct gr_controller *c) { return atomic_load(&c->active_id) == c->cfg.broker_id; }
static void schedule_standby_refresh(struct gr_controller *c, int64_t delay_ms);
/* The first standby refresh after a resignation waits this long: past the next controller's
 * context load and first requests (1.4 s at 100k partitions on the 2-core bench machine), soon
 * enough that the broker's standby is back for a failover that follows. */
#define STANDBY_AFTER_RESIGN_MS 5000
static int64_t standby_refresh_ms(const struct gr_controller *c);
/* A broker without a standby context that finds /controller gone lets the brokers that have one
 * run first for this long (defer_candidacy). */
#define CANDIDACY_DEFER_MS 500
static void cancel_candidacy(struct gr_controller *c);

static void put_event(struct gr_controller *c, enum gr_ctrl_event_type type) {
    gr_ctrl_events_put(c->em, gr_ctrl_event_new(type));
}

/* ======================================================================================
 * ZooKeeper handlers: run on the ZooKeeper callback threads; they only enqueue.
 * ====================================================================================== */

static void on_controller_node(void *arg, int type, const char *path) {
    (void)path;
    struct gr_controller *c = arg;
    put_event(c, type == GR_ZWATCH_DELETED ? GR_EV_REELECT : GR_EV_CONTROLLER_CHANGE);
}

static void on_broker_ids_child(void *arg, const char *path) {
    (void)path;
    put_event(arg, GR_EV_BROKER_CHANGE);
}

static void on_topics_child(void *arg, const char *path) {
    (void)path;
    put_event(arg, GR_EV_TOPIC_CHANGE);
}

static void on_delete_topics_child(void *arg, const char *path) {
    (void)path;
    put_event(arg, GR_EV_TOPIC_DELETION);
}

static void on_isr_change_child(void *arg, const char *path) {
    (void)path;
    put_event(arg, GR_EV_ISR_CHANGE_NOTIFICATION);
}

static void on_log_dir_child(void *arg, const char *path) {
    (void)path;
    put_event(arg, GR_EV_LOG_DIR_EVENT_NOTIFICATION);
}

static void on_reassign_node(void *arg, int type, const char *path) {
    (void)path;
    if (type == GR_ZWATCH_CREATED) put_event(arg, GR_EV_ZK_PARTITION_REASSIGNMENT);
}

static void on_preferred_node(void *arg, int type, const char *path) {
    (void)path;
    /* payload NULL = ZooKeeper-triggered election of the partitions listed in the znode */
    if (type == GR_ZWATCH_CREATED) put_event(arg, GR_EV_REPLICA_LEADER_ELECTION);
}

/* /brokers/ids/N data changes (BrokerModificationsHandler: data changes only). */
static void on_broker_node(void *arg, int type, const char *path) {
    struct gr_controller *c = arg;
    if (type != GR_ZWATCH_CHANGED) return;
    const char *slash = strrchr(path, '/');
    if (!slash) return;
    char *end;
    long id = strtol(slash + 1, &end, 10);
    if (*end || end == slash + 1) return;
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_BROKER_MODIFICATIONS);
    ev->broker_id = (int32_t)id;
    gr_ctrl_events_put(c->em, ev);
}

/* /brokers/topics/T data changes (PartitionModificationsHandler). */
static void on_topic_node(void *arg, int type, const char *path) {
    struct gr_controller *c = arg;
    if (type != GR_ZWATCH_CHANGED) return;
    const char *slash = strrchr(path, '/');
    if (!slash || !slash[1]) return;
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_PARTITION_MODIFICATIONS);
    ev->topic = gr_strdup(slash + 1);
    gr_ctrl_events_put(c->em, ev);
}

/* Session state (StateChangeHandler): runs on the backend's reconnect thread for EXPIRED and
 * NEW_SESSION, which may block. */
static void on_session(void *arg, int state) {
    struct gr_controller *c = arg;
    if (state == GR_ZSESSION_EXPIRED) {
        /* beforeInitializingSession: pre-empt the queue and wait until Expire ran, so every
         * pending event is dealt with before the new session exists. */
        struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_EXPIRE);
        if (c->cfg.no_thread) {
            gr_ctrl_events_clear_and_put(c->em, ev, false);
        } else {
            gr_ctrl_events_clear_and_put(c->em, ev, true);
            gr_ctrl_events_wait(c->em, ev);
            gr_ctrl_event_free(ev);
        }
    } else if (state == GR_ZSESSION_NEW_SESSION) {
        put_event(c, GR_EV_REGISTER_BROKER_AND_REELECT);
    }
}

static char *broker_path(char *buf, size_t len, int32_t id) {
    snprintf(buf, len, BROKER_IDS_PATH "/%d", id);
    return buf;
}

static char *topic_path(char *buf, size_t len, const char *topic) {
    snprintf(buf, len, TOPICS_PATH "/%s", topic);
    return buf;
}

/* ======================================================================================
 * Metrics
 * ====================================================================================== */

static int64_t state_gauge(void *arg) {
    struct gr_controller *c = arg;
    return gr_ctrl_events_state(c->em);
}

static void register_metrics(struct gr_controller *c) {
    if (!c->cfg.metrics) return;
    char n[256];
    for (int i = 0; i < G_COUNT; i++)
        c->gauges[i] =
            gr_metrics_gauge(c->cfg.metrics, gr_metrics_name(n, sizeof n, "kafka.controller", "KafkaController", gauge_names[i]));
    gr_metrics_gauge_fn(c->cfg.metrics, gr_metrics_name(n, sizeof n, "kafka.controller", "KafkaController", "ControllerState"),
                        state_gauge, c);
    /* Marked by the election code; registered now so increase() sees the first election. */
    gr_metrics_meter(c->cfg.metrics, gr_metrics_name(n, sizeof n, "kafka.controller", "ControllerStats",
                                                     "UncleanLeaderElectionsPerSec"));
}

static void unregister_metrics(struct gr_controller *c) {
    if (!c->cfg.metrics) return;
    char n[256];
    for (int i = 0; i < G_COUNT; i++) {
        gr_metrics_remove(c->cfg.metrics, gr_metrics_name(n, sizeof n, "kafka.controller", "KafkaController", gauge_names[i]));
        c->gauges[i] = NULL;
    }
    gr_metrics_remove(c->cfg.metrics, gr_metrics_name(n, sizeof n, "kafka.controller", "KafkaController", "ControllerState"));
}

static void set_gauge(struct gr_controller *c, int g, int64_t v) {
    if (c->gauges[g]) gr_gauge_set(c->gauges[g], v);
}

/* Kafka's updateMetrics, after every event. */
/* Kafka updates the gauges after every event. The two that need a scan of every partition are
 * recomputed only when the context changed since (ctx.gen): most events -- the answers to control
 * requests above all -- change nothing, and their cost must not grow with the partition count. */
static void update_metrics(struct gr_controller *c) {
    bool active = is_active(c);
    /* While more events wait, a changed context is rescanned at most every 256th event: a burst
     * (1000 TopicChange events creating 100k partitions) must not cost a full scan per event. */
    bool stale = c->metrics_gen != c->ctx.gen;
    if (stale && c->metrics_valid && c->metrics_skipped < 256 && c->em && gr_ctrl_events_size(c->em) > 0) {
        c->metrics_skipped++;
        stale = false;
    }
    if (active && (!c->metrics_valid || stale)) {
        c->offline_count = gr_td_offline_partition_count(c->td);
        c->imbalance_count = gr_leader_balance_imbalance_count(&c->ctx);
        c->metrics_gen = c->ctx.gen;
        c->metrics_valid = true;
        c->metrics_skipped = 0;
    } else if (!active) {
        c->metrics_valid = false;
    }
    set_gauge(c, G_ACTIVE, active ? 1 : 0);
    set_gauge(c, G_TOPICS, active ? (int64_t)gr_ctrl_ctx_topic_count(&c->ctx) : 0);
    set_gauge(c, G_PARTITIONS, active ? gr_ctrl_ctx_partition_count(&c->ctx) : 0);
    set_gauge(c, G_OFFLINE, active ? c->offline_count : 0);
    struct gr_td_counts tdc = {0};
    if (active) gr_td_counts(c->td, &tdc);
    set_gauge(c, G_TOPICS_TO_DELETE, tdc.topics_to_delete);
    set_gauge(c, G_IMBALANCE, active ? c->imbalance_count : 0);
    set_gauge(c, G_REPLICAS_TO_DELETE, tdc.replicas_to_delete);
    set_gauge(c, G_TOPICS_INELIGIBLE, tdc.topics_ineligible);
    set_gauge(c, G_REPLICAS_INELIGIBLE, tdc.replicas_ineligible);
}

static void zero_gauges(struct gr_controller *c) {
    for (int i = 0; i < G_COUNT; i++)
        if (i != G_ACTIVE) set_gauge(c, i, 0);
}

/* ======================================================================================
 * Resignation, election
 * ====================================================================================== */

static void cancel_topic_change_timer(struct gr_controller *c) {
    if (c->topic_change_timer) {
        gr_clock_cancel(c->cfg.clock, c->topic_change_timer);
        c->topic_change_timer = 0;
    }
    c->topic_change_ran = false;
}

static void cancel_timers(struct gr_controller *c) {
    c->auto_rebalance_gen++; /* a tick already fired is stale now */
    if (c->auto_rebalance_timer) {
        gr_clock_cancel(c->cfg.clock, c->auto_rebalance_timer);
        c->auto_rebalance_timer = 0;
    }
}

/* Kafka's onControllerResignation: drop every controller watch, stop timers and the channels,
 * zero the gauges, forget the context. Safe to call when not (or never) active. */
static void on_controller_resignation(struct gr_controller *c) {
    CDEBUG(c, "Resigning");
    gr_zk_watches_unregister_child(c->watches, ISR_CHANGE_PATH);
    gr_zk_watches_unregister_node(c->watches, REASSIGN_PATH);
    gr_zk_watches_unregister_node(c->watches, PREFERRED_PATH);
    gr_zk_watches_unregister_child(c->watches, LOG_DIR_EVENT_PATH);
    char p[512];
    for (int i = 0; i < c->ctx.n_brokers; i++)
        gr_zk_watches_unregister_node(c->watches, broker_path(p, sizeof p, c->ctx.brokers[i].id));

    cancel_timers(c);
    cancel_topic_change_timer(c);
    zero_gauges(c);

    /* Kafka's partitionStateMachine.shutdown() and replicaStateMachine.shutdown() have no
     * counterpart: the states live in the context, which is reset below. */
    gr_zk_watches_unregister_child(c->watches, TOPICS_PATH);
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(&c->ctx, &cur)))
        gr_zk_watches_unregister_node(c->watches, topic_path(p, sizeof p, t->name));
    gr_zk_watches_unregister_child(c->watches, DELETE_TOPICS_PATH);
    gr_zk_watches_unregister_child(c->watches, BROKER_IDS_PATH);

    c->sender->shutdown(c->sender_ctx);
    gr_ctrl_batch_clear(c->sm.batch);
    gr_ctrl_ctx_reset(&c->ctx);
    /* The term's context does not become the standby: its cached states are not always a copy of
     * a znode version (the controller re-stamps its own controller epoch on states it did not
     * need to rewrite, as Kafka does; the simulation's W1 caught it). The standby is rebuilt from
     * ZooKeeper reads alone, STANDBY_AFTER_RESIGN_MS from now (or one period, if shorter): the
     * next controller's failover runs right now, and a refresh of an empty standby (every topic
     * and every state read, at 100k partitions 1000 topics decoded and 100000 states read over
     * ~10 s) competed with it for ZooKeeper and the CPU (bench/README.md, issue 28 session 13).
     * A later refresh is no less sound; until it has run, a failover of this broker is cold. */
    schedule_standby_refresh(c, GR_MIN(STANDBY_AFTER_RESIGN_MS, standby_refresh_ms(c)));
    /* standby_ready is not cleared here: a term's failover cleared it when it moved the standby
     * into the context (on_controller_failover), and nothing refills it during a term; a broker
     * resigning without having moved it (an Expire of a broker that was not the controller, a
     * failover that failed before the move) still holds it, and defers no candidacy for it */
    c->term = false;
    c->metrics_valid = false;
    CINFO(c, "Resigned");
}

/* Records a reading of /controller as the active id. One naming this broker counts only when this
 * incarnation won it (c->term) and no election has been won since (/controller_epoch still at the
 * zkVersion our election wrote); otherwise -- a guarded delete in trigger_controller_move failed
 * with a ZooKeeper error, or a hand edit, possibly of a later controller's znode back to this
 * broker before this broker saw it move -- Kafka would report itself active (with an empty
 * context, or with the context of a term whose guarded writes all fail) and never resign: every
 * ControllerMovedException runs maybeResign, which rereads the same /controller. Sets *stale in
 * that case (the caller resigns if it was active and reclaims: reclaim_controller). Returns 0 or
 * the error of the /controller_epoch read (nothing recorded then). */
static int note_controller(struct gr_controller *c, int32_t id, bool *stale) {
    *stale = false;
    if (id == c->cfg.broker_id && c->term) {
        int32_t epoch = -1, zkv = -1;
        int rc = gr_kzk_get_controller_epoch(c->kzk, false, &epoch, &zkv);
        if (rc != 0 && rc != GR_KZK_ENONODE) return rc;
        if (rc != 0 || zkv != c->ctx.epoch_zk_version) {
            CWARN(c, "/controller names this broker, but the election of epoch %d is no longer the last one "
                     "(/controller_epoch is at epoch %d, zkVersion %d, not %d)",
                  c->ctx.epoch, rc ? -1 : epoch, rc ? -1 : zkv, c->ctx.epoch_zk_version);
            *stale = true;
        }
    } else if (id == c->cfg.broker_id) {
        *stale = true;
    }
    atomic_store(&c->active_id, *stale ? -1 : id);
    return 0;
}

static int elect_once(struct gr_controller *c, bool may_reclaim);

/* /controller names this broker without a failover for the last election: resign a term that is
 * over, delete /controller (only while it still names us; not a guarded write, as this broker
 * holds no current epoch) and elect again, so whoever wins runs failover with a new epoch. */
static int reclaim_controller(struct gr_controller *c) {
    CWARN(c, "/controller names this broker, but this broker has not run failover for it: deleting it and electing "
             "again");
    if (c->term) on_controller_resignation(c);
    int rc = gr_kzk_delete_controller_if_named(c->kzk, c->cfg.broker_id);
    if (rc != 0) return rc;
    return elect_once(c, false);
}

/* Kafka's maybeResign: re-arm the /controller watch, reread the active id, resign if we lost it. */
static int maybe_resign(struct gr_controller *c) {
    bool was_active = is_active(c);
    gr_zk_watches_register_node(c->watches, CONTROLLER_PATH, on_controller_node, c);
    int32_t id = -1;
    int rc = gr_kzk_get_controller_id(c->kzk, true, &id);
    if (rc != 0) return rc;
    bool stale;
    rc = note_controller(c, id, &stale);
    if (rc != 0) return rc;
    if (was_active && !is_active(c)) {
        if (!stale) CINFO(c, "Controller moved to broker %d; resigning", id);
        on_controller_resignation(c);
    }
    return stale ? reclaim_controller(c) : 0;
}

/* Kafka's triggerControllerMove: resign and delete /controller (guarded by our epoch). */
static int trigger_controller_move(struct gr_controller *c) {
    int32_t id = -1;
    int rc = gr_kzk_get_controller_id(c->kzk, false, &id);
    if (rc != 0) return rc;
    bool stale;
    rc = note_controller(c, id, &stale);
    if (rc != 0) return rc;
    if (stale) return reclaim_controller(c);
    if (!is_active(c)) {
        CWARN(c, "Controller has already moved when trying to trigger controller movement");
        return 0;
    }
    int32_t expected = c->ctx.epoch_zk_version;
    atomic_store(&c->active_id, -1);
    on_controller_resignation(c);
    rc = gr_kzk_delete_controller_guarded(c->kzk, expected);
    if (rc == GR_ECONTROLLER_MOVED) {
        CWARN(c, "Controller has already moved when trying to trigger controller movement");
        return 0;
    }
    return rc;
}

static int on_controller_failover(struct gr_controller *c);

/* Kafka's elect. */
static int elect(struct gr_controller *c) { return elect_once(c, true); }

static int elect_once(struct gr_controller *c, bool may_reclaim) {
    int32_t id = -1;
    int rc = gr_kzk_get_controller_id(c->kzk, false, &id);
    if (rc != 0) return rc;
    bool stale;
    rc = note_controller(c, id, &stale);
    if (rc != 0) return rc;
    if (stale) return may_reclaim ? reclaim_controller(c) : 0;
    if (id != -1) {
        CDEBUG(c, "Broker %d has been elected as the controller, so stopping the election process.", id);
        return 0;
    }
    int32_t epoch = 0, zkv = 0;
    rc = gr_kzk_register_controller_and_increment_epoch(c->kzk, c->cfg.broker_id, &epoch, &zkv);
    if (rc == 0) {
        c->ctx.epoch = epoch;
        c->ctx.epoch_zk_version = zkv;
        atomic_store(&c->epoch, epoch);
        c->term = true;
        atomic_store(&c->active_id, c->cfg.broker_id);
        CINFO(c, "%d successfully elected as the controller. Epoch incremented to %d and epoch zk version is now %d",
              c->cfg.broker_id, epoch, zkv);
        rc = on_controller_failover(c);
        if (rc == 0) return 0;
    }
    if (rc == GR_ECONTROLLER_MOVED) {
        int rc2 = maybe_resign(c);
        int32_t now = atomic_load(&c->active_id);
        if (now != -1)
            CINFO(c, "Broker %d was elected as controller instead of broker %d", now, c->cfg.broker_id);
        else
            CWARN(c, "A controller has been elected but just resigned, this will result in another round of election");
        return rc2;
    }
    CERROR(c, "Error while electing or becoming controller on broker %d. Trigger controller movement immediately: %s",
           c->cfg.broker_id, gr_kzk_strerror(rc));
    return trigger_controller_move(c);
}

/* ======================================================================================
 * Failover: watches and the context load
 * ====================================================================================== */

/* Reads notification children (arming the child watch) and deletes them all, guarded. */
static int delete_log_dir_notifications(struct gr_controller *c) {
    struct gr_zstrings names = {0};
    int rc = gr_kzk_get_log_dir_event_notifications(c->kzk, true, &names);
    if (rc == 0 && names.count > 0)
        rc = gr_kzk_delete_log_dir_event_notifications_guarded(c->kzk, c->ctx.epoch_zk_version,
                                                               (const char *const *)names.names, names.count);
    gr_zstrings_free(&names);
    return rc;
}

static int delete_isr_notifications(struct gr_controller *c) {
    struct gr_zstrings names = {0};
    int rc = gr_kzk_get_isr_change_notifications(c->kzk, true, &names);
    if (rc == 0 && names.count > 0)
        rc = gr_kzk_delete_isr_change_notifications_guarded(c->kzk, c->ctx.epoch_zk_version,
                                                            (const char *const *)names.names, names.count);
    gr_zstrings_free(&names);
    return rc;
}

/* Registers the data-change handler of each topic and reads their assignments (arming the
 * watches) into the context, in pipelined batches. Topics that vanished are skipped; corrupt
 * ones are logged and skipped. A topic ctx already holds whose znode has the czxid and version
 * it holds (the standby context's, read with them) is kept as it is, not decoded again
 * (gr_kzk_get_topic_assignments_since; the same reads and watches). */
static int load_topics(struct gr_controller *c, struct gr_ctrl_context *ctx, const char *const *names, int n, bool watch) {
    char p[512];
    for (int i = 0; i < n && watch; i++)
        gr_zk_watches_register_node(c->watches, topic_path(p, sizeof p, names[i]), on_topic_node, c);
    int64_t *known_czxid = gr_malloc(sizeof *known_czxid * (size_t)GR_MAX(1, GR_MIN(TOPIC_BATCH, n)));
    int32_t *known_version = gr_malloc(sizeof *known_version * (size_t)GR_MAX(1, GR_MIN(TOPIC_BATCH, n)));
    for (int off = 0; off < n; off += TOPIC_BATCH) {
        int m = GR_MIN(TOPIC_BATCH, n - off);
        for (int i = 0; i < m; i++) {
            const struct gr_ctrl_topic *had = gr_ctrl_ctx_topic(ctx, names[off + i]);
            known_czxid[i] = had ? had->czxid : 0;
            known_version[i] = had ? had->zk_version : -1;
        }
        struct gr_kzk_topic_assignment *a = gr_calloc((size_t)m, sizeof *a);
        int rc = gr_kzk_get_topic_assignments_since(c->kzk, names + off, m, watch, known_czxid, known_version, a);
        if (rc != 0) { /* items may hold their names even when the batch failed */
            for (int i = 0; i < m; i++) gr_kzk_topic_assignment_release(&a[i]);
            free(a);
            free(known_czxid);
            free(known_version);
            return rc;
        }
        for (int i = 0; i < m; i++) {
            if (a[i].rc == 0 && a[i].unchanged) { /* ctx holds exactly this znode's assignment */
                gr_kzk_topic_assignment_release(&a[i]);
                continue;
            }
            struct gr_ctrl_topic *had = gr_ctrl_ctx_topic(ctx, names[off + i]);
            /* what ctx knew of an earlier incarnation of the topic (the standby context), of a
             * topic gone or unreadable now, or of a topic whose znode was written since (an
             * assignment change) must not survive: a cold load would not have it */
            if (had && (a[i].rc != 0 || had->czxid != a[i].czxid || had->zk_version != a[i].zk_version))
                gr_ctrl_ctx_remove_topic(ctx, names[off + i]);
            if (a[i].rc == 0) {
                if (!a[i].topic) a[i].topic = gr_strdup(names[off + i]);
                gr_ctrl_ctx_put_topic(ctx, &a[i]);
            } else if (a[i].rc != GR_KZK_ENONODE) {
                CERROR(c, "Cannot read the assignment of topic %s: %s", names[off + i], gr_kzk_strerror(a[i].rc));
            }
            gr_kzk_topic_assignment_release(&a[i]);
        }
        free(a);
    }
    free(known_czxid);
    free(known_version);
    return 0;
}

static int cmp_cstr(const void *a, const void *b);

/* The failover's stamp read (docs/ARCHITECTURE.md "Warm standby controller", step 2), made
 * while the topic znodes are read: started after the election (the proof needs only that), on
 * its own thread and through kzk (thread-safe; 1000+ stamps go through the bulk-read session, a
 * second connection), so the two reads overlap instead of following each other. Only the topics
 * whose stamp can still prove something (states_stamp != 0) are read. The thread owns nothing of
 * the context: names are copies, sorted; stamp[i] is names[i]'s (0: not read, absent or failed),
 * rc gr_kzk_get_state_stamps's. With cfg.no_thread (tests, the simulation) it is read inline at
 * the start, before the topic znodes -- the other end of the overlap the thread allows. */
struct stamp_read {
    struct gr_kzk *kzk;
    char **names;
    int n;
    int64_t *stamp;
    int rc;
    bool threaded;
    pthread_t th;
};

static void *stamp_read_run(void *arg) {
    struct stamp_read *r = arg;
    r->rc = gr_kzk_get_state_stamps(r->kzk, (const char *const *)r->names, r->n, r->stamp);
    return NULL;
}

static void stamp_read_start(struct gr_controller *c, struct gr_ctrl_context *ctx, struct stamp_read *r) {
    memset(r, 0, sizeof *r);
    r->kzk = c->kzk;
    size_t nt = 0;
    const char **all = gr_ctrl_ctx_sorted_topics(ctx, &nt);
    r->names = gr_malloc(sizeof *r->names * (nt ? nt : 1));
    r->stamp = gr_calloc(nt ? nt : 1, sizeof *r->stamp);
    for (size_t i = 0; i < nt; i++) {
        const struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, all[i]);
        if (t && t->states_stamp != 0) r->names[r->n++] = gr_strdup(all[i]);
    }
    free(all);
    if (r->n == 0) return;
    if (!c->cfg.no_thread && pthread_create(&r->th, NULL, stamp_read_run, r) == 0) r->threaded = true;
    else stamp_read_run(r);
}

/* Waits for the read; its rc. */
static int stamp_read_finish(struct stamp_read *r) {
    if (r->threaded) pthread_join(r->th, NULL);
    r->threaded = false;
    return r->rc;
}

/* The stamp read for name, 0 when it was not read. */
static int64_t stamp_read_lookup(const struct stamp_read *r, const char *name) {
    char **hit = r->n ? bsearch(&name, r->names, (size_t)r->n, sizeof *r->names, cmp_cstr) : NULL;
    return hit ? r->stamp[hit - r->names] : 0;
}

static void stamp_read_free(struct stamp_read *r) {
    stamp_read_finish(r);
    for (int i = 0; i < r->n; i++) free(r->names[i]);
    free(r->names);
    free(r->stamp);
    memset(r, 0, sizeof *r);
}

/* Reads the leader/ISR of every partition in ctx, in pipelined batches of STATE_BATCH (Kafka's
 * updateLeaderAndIsrCache). Sets *loaded to the number of states found.
 *
 * warm (the standby path, docs/ARCHITECTURE.md "Warm standby controller"): first reads every
 * topic's stamp (gr_kzk_get_state_stamps: the mzxid of /brokers/topics/T/partitions, which every
 * state write of T changes in its own transaction); a topic whose stamp equals the one it holds
 * (read before its states were) keeps its states, and the absence of the others, without a read --
 * except topics queued for deletion (/admin/delete_topics, read here), always read. Every other
 * topic is read as in a cold load and takes the stamp just read (0 after a failed read); a
 * partition found without a state znode forgets what it held. pre (the failover's): the stamps
 * were read already (struct stamp_read, finished); a topic it did not read keeps nothing. */
static int load_partition_states(struct gr_controller *c, struct gr_ctrl_context *ctx, bool warm, int64_t *loaded,
                                 struct gr_ctrl_load_report *rep, const struct stamp_read *pre) {
    size_t nt = gr_ctrl_ctx_topic_count(ctx), cur = 0, k = 0;
    struct gr_ctrl_topic **tops = gr_malloc(sizeof *tops * (nt ? nt : 1)), *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur)) && k < nt) tops[k++] = t;
    nt = k;
    bool *proven = gr_calloc(nt ? nt : 1, sizeof *proven);
    int64_t total = 0;
    int rc = 0;
    if (warm && nt > 0) {
        struct gr_zstrings deleting = {0};
        rc = gr_kzk_get_topic_deletions(c->kzk, false, &deleting);
        if (rc == 0) qsort(deleting.names, (size_t)deleting.count, sizeof *deleting.names, cmp_cstr);
        const char **names = gr_malloc(sizeof *names * nt);
        int64_t *stamp = gr_malloc(sizeof *stamp * nt);
        for (size_t i = 0; i < nt; i++) names[i] = tops[i]->name;
        if (rc == 0 && pre) {
            rc = pre->rc;
            for (size_t i = 0; i < nt; i++) stamp[i] = stamp_read_lookup(pre, names[i]);
        } else if (rc == 0) {
            rc = gr_kzk_get_state_stamps(c->kzk, names, (int)nt, stamp);
        }
        int64_t offered = 0, kept = 0;
        for (size_t i = 0; i < nt && rc == 0; i++) {
            t = tops[i];
            int64_t held = 0;
            for (int j = 0; j < t->n_partitions; j++) held += t->partitions[j].has_state;
            if (deleting.count &&
                bsearch(&t->name, deleting.names, (size_t)deleting.count, sizeof *deleting.names, cmp_cstr)) {
                t->states_stamp = 0;
                continue;
            }
            offered += held;
            proven[i] = stamp[i] != 0 && t->states_stamp == stamp[i];
            if (proven[i]) kept += held;
            t->states_stamp = stamp[i]; /* read before the states read below */
        }
        total = kept;
        if (rep) {
            rep->standby_states = offered;
            rep->states_confirmed = kept;
        }
        free(stamp);
        free(names);
        gr_zstrings_free(&deleting);
    } else {
        for (size_t i = 0; i < nt; i++) tops[i]->states_stamp = 0;
    }
    /* every partition of the topics not proven, with its partition and topic in the context;
     * topic names are borrowed from the context, which does not change while we read */
    size_t cap = 1024, n = 0;
    struct gr_kzk_tp *tps = gr_malloc(sizeof *tps * cap);
    struct gr_ctrl_partition **parts = gr_malloc(sizeof *parts * cap);
    struct gr_ctrl_topic **owner = gr_malloc(sizeof *owner * cap);
    for (size_t i = 0; i < nt && rc == 0; i++) {
        if (proven[i]) continue;
        t = tops[i];
        for (int j = 0; j < t->n_partitions; j++) {
            if (n == cap) {
                cap *= 2;
                tps = gr_realloc(tps, sizeof *tps * cap);
                parts = gr_realloc(parts, sizeof *parts * cap);
                owner = gr_realloc(owner, sizeof *owner * cap);
            }
            tps[n].topic = t->name;
            tps[n].partition = t->partitions[j].partition;
            parts[n] = &t->partitions[j];
            owner[n++] = t;
        }
    }
    if (rep) rep->states_read = (int64_t)n;
    struct gr_kzk_state_result *res = gr_malloc(sizeof *res * GR_MAX((size_t)1, GR_MIN((size_t)STATE_BATCH, n)));
    for (size_t off = 0; off < n && rc == 0; off += STATE_BATCH) {
        int m = (int)GR_MIN((size_t)STATE_BATCH, n - off);
        memset(res, 0, sizeof *res * (size_t)m);
        rc = gr_kzk_get_partition_states(c->kzk, tps + off, m, res);
        for (int j = 0; j < m; j++) {
            const struct gr_kzk_tp *tp = &tps[off + (size_t)j];
            if (rc == 0 && res[j].rc == 0) {
                gr_ctrl_partition_take_state(parts[off + (size_t)j], &res[j].lai);
                total++;
            } else if (rc == 0) {
                if (res[j].rc != GR_KZK_ENONODE) {
                    CERROR(c, "Cannot read the state of partition %s-%d: %s", tp->topic, tp->partition,
                           gr_kzk_strerror(res[j].rc));
                    owner[off + (size_t)j]->states_stamp = 0; /* its absence is not known */
                }
                gr_ctrl_partition_clear_state(parts[off + (size_t)j]); /* as a cold load has it */
            }
            gr_kzk_leader_and_isr_release(&res[j].lai);
        }
    }
    if (rc != 0)
        for (size_t i = 0; i < nt; i++) tops[i]->states_stamp = 0;
    free(res);
    free(owner);
    free(parts);
    free(tps);
    free(proven);
    free(tops);
    if (loaded) *loaded = total;
    return rc;
}

/* Rereads /brokers/topics into ctx: topics no longer listed are removed, every listed topic's
 * assignment is read again (load_topics). With watch, arms the child watch and each topic's data
 * watch, as Kafka's initializeControllerContext does. */
static int sync_topics(struct gr_controller *c, struct gr_ctrl_context *ctx, bool watch) {
    struct gr_zstrings topics = {0};
    int rc = gr_kzk_get_topics(c->kzk, watch, &topics);
    if (rc != 0) return rc;
    if (gr_ctrl_ctx_topic_count(ctx) > 0) {
        qsort(topics.names, (size_t)topics.count, sizeof *topics.names, cmp_cstr);
        size_t nt = 0;
        const char **names = gr_ctrl_ctx_sorted_topics(ctx, &nt);
        char **gone = gr_malloc(sizeof *gone * (nt ? nt : 1));
        size_t ng = 0;
        for (size_t i = 0; i < nt; i++)
            if (!topics.count ||
                !bsearch(&names[i], topics.names, (size_t)topics.count, sizeof *topics.names, cmp_cstr))
                gone[ng++] = gr_strdup(names[i]);
        free(names);
        for (size_t i = 0; i < ng; i++) {
            gr_ctrl_ctx_remove_topic(ctx, gone[i]);
            free(gone[i]);
        }
        free(gone);
    }
    rc = load_topics(c, ctx, (const char *const *)topics.names, topics.count, watch);
    gr_zstrings_free(&topics);
    return rc;
}

/* ---- the standby context ---- */

static void schedule_standby_refresh(struct gr_controller *c, int64_t delay_ms) {
    if (!c->cfg.standby_enable || c->shut_down) return;
    if (c->standby_timer) gr_clock_cancel(c->cfg.clock, c->standby_timer);
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_STANDBY_REFRESH);
    ev->broker_epoch = ++c->standby_gen;
    c->standby_timer = gr_clock_schedule(c->cfg.clock, delay_ms, c->em, ev);
}

static int64_t standby_refresh_ms(const struct gr_controller *c) {
    return c->cfg.standby_refresh_ms > 0 ? c->cfg.standby_refresh_ms : 30000;
}

/* Forgets every topic's stamp: its states are read again by the next load (the stamps proved
 * nothing about a writer that does not stamp). */
static void forget_stamps(struct gr_ctrl_context *ctx) {
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur))) t->states_stamp = 0;
}

/* StandbyRefresh: while inactive, bring the standby context up to date by the same reads a
 * failover makes (without watches), keeping the states of topics whose stamp did not move.
 * Nothing here is ever acted on; it only makes the next failover's proof cheaper. First it notes
 * the controller in office: a stamp read under an earlier refresh stays a proof only if every
 * controller since stamps -- each refresh saw one that does, at most one election after the one
 * the previous refresh saw (a controller in between, unseen, may be of an earlier version). */
static int process_standby_refresh(struct gr_controller *c, const struct gr_ctrl_event *ev) {
    if (ev->broker_epoch != c->standby_gen) return 0; /* a tick fired before a later (re)schedule */
    c->standby_timer = 0;
    if (!c->cfg.standby_enable || c->term || c->shut_down) return 0;
    int64_t t0 = gr_clock_now_ms(c->cfg.clock), loaded = 0;
    struct gr_ctrl_load_report r = {0};
    int32_t term = -1, isr_cv = -1;
    int rc = gr_kzk_get_stamping_term(c->kzk, &term);
    if (rc == 0) rc = gr_kzk_get_isr_change_cversion(c->kzk, &isr_cv);
    if (rc == 0) {
        /* a controller took office since the last refresh: it is most likely still in its
         * failover, writing the states of every partition a dead broker held, which moves the
         * stamps of nearly every topic; reading them all now would compete with it for ZooKeeper
         * and the CPU (at 100k: every state, 5-8 s of reads, bench/README.md). This refresh only
         * notes the term and the cversion (what the proof rests on, the same rules), and the
         * reads wait one period: a refresh that comes later is no less sound. */
        bool defer = term >= 0 && c->standby_term >= 0 && term != c->standby_term;
        if (term < 0 || c->standby_term < 0 || (term != c->standby_term && term != c->standby_term + 1) ||
            isr_cv < 0 || isr_cv != c->standby_isr_cv)
            forget_stamps(&c->standby);
        c->standby_term = term;
        c->standby_isr_cv = isr_cv;
        if (defer) {
            CINFO(c, "Standby refresh: controller epoch %d took office since the last refresh; reading again in %lld ms",
                  term, (long long)standby_refresh_ms(c));
            schedule_standby_refresh(c, standby_refresh_ms(c));
            return 0;
        }
        rc = sync_topics(c, &c->standby, false);
    }
    if (rc == 0) rc = load_partition_states(c, &c->standby, true, &loaded, &r, NULL);
    if (rc == 0) c->standby_ready = true;
    if (rc == 0)
        CINFO(c, "Standby context refreshed: %zu topics, %lld partitions, %lld states kept by their topic's stamp, %lld read in %lld ms",
               gr_ctrl_ctx_topic_count(&c->standby), (long long)gr_ctrl_ctx_partition_count(&c->standby),
               (long long)r.states_confirmed, (long long)r.states_read, (long long)(gr_clock_now_ms(c->cfg.clock) - t0));
    schedule_standby_refresh(c, standby_refresh_ms(c));
    return rc;
}

/* registerBrokerModificationsHandler: the handler first, then the exists-watch on /brokers/ids/N
 * (a notification that arrives before the handler is registered reaches nothing, and watches are
 * one-shot: the change would be lost). */
static int watch_brokers(struct gr_controller *c, const int32_t *ids, int n) {
    char p[512];
    for (int i = 0; i < n; i++) gr_zk_watches_register_node(c->watches, broker_path(p, sizeof p, ids[i]), on_broker_node, c);
    for (int i = 0; i < n; i++) {
        bool exists;
        int rc = gr_kzk_watch_exists(c->kzk, broker_path(p, sizeof p, ids[i]), &exists);
        if (rc != 0) return rc;
    }
    return 0;
}

/* processTopicIds (topic_ids.h) for names[0..n), or every topic of the context when names is NULL.
 * At failover (names NULL) every error is passed on: the failover fails and the controller moves
 * (Kafka's triggerControllerMove), because a topic left without an id there may be one whose
 * znode lost its id while its stamp keeps it -- and the failover's first state write would stamp
 * it empty, erasing the last copy (every replica's log then moved aside at the next failover).
 * At TopicChange only a controller move is: the new topics' stamps hold no id (a topic's
 * /partitions znode dies with it), so one whose id could not be written keeps working without one
 * -- its partitions are still created and led, brokers get ZERO_UUID for it -- and gets its id at
 * the next failover or TopicChange (Kafka retries until it succeeds). */
static int assign_topic_ids(struct gr_controller *c, const char *const *names, int n) {
    struct gr_ctrl_topic_id_source src = {c->cfg.topic_id_fn, c->cfg.topic_id_arg};
    struct gr_ibp_features ibp; /* Kafka's usesTopicId: inter.broker.protocol.version 2.8-IV0+ */
    gr_ibp_features(c->cfg.broker_config ? c->cfg.broker_config->inter_broker_protocol_version : NULL, &ibp);
    if (!ibp.topic_ids) return 0;
    int rc;
    if (names) {
        rc = gr_ctrl_assign_topic_ids(c->kzk, &c->ctx, &src, names, n);
    } else {
        size_t nt = 0;
        const char **all = gr_ctrl_ctx_sorted_topics(&c->ctx, &nt);
        rc = gr_ctrl_assign_topic_ids(c->kzk, &c->ctx, &src, all, (int)nt);
        free(all);
    }
    return rc == GR_ECONTROLLER_MOVED || !names ? rc : 0;
}

static int load_context(struct gr_controller *c, int64_t *states_loaded, struct gr_ctrl_load_report *rep,
                        struct stamp_read *stamps);

/* Kafka's initializeControllerContext. */
static int initialize_context(struct gr_controller *c, int64_t *states_loaded, struct gr_ctrl_load_report *rep) {
    /* warm: start from the standby's topics and states (first: the move replaces the context's
     * content); the topics and assignments are read again below all the same, and its states are
     * kept only where proven current */
    rep->warm = c->cfg.standby_enable && gr_ctrl_ctx_topic_count(&c->standby) > 0;
    if (rep->warm) gr_ctrl_ctx_move_topics(&c->ctx, &c->standby);
    /* the stamps prove the writes of the controllers the refreshes saw; ours is the next term
     * only if nobody unseen held office since the last refresh */
    if (rep->warm && (c->standby_term < 0 || c->ctx.epoch != c->standby_term + 1)) {
        CINFO(c, "The standby context's stamps prove nothing: its last refresh saw %s%d in office, this is epoch %d; "
                 "every partition state is read",
              c->standby_term < 0 ? "no stamping controller, epoch " : "epoch ", c->standby_term, c->ctx.epoch);
        forget_stamps(&c->ctx);
    } else if (rep->warm) {
        /* nor do they prove anything of a broker's own ISR write (no stamp, no new epoch), which
         * it announces in /isr_change_notification: read here, after the failover deleted what
         * was pending (a later announcement reaches the watch armed before, and is processed) */
        int32_t isr_cv = -1;
        int crc = gr_kzk_get_isr_change_cversion(c->kzk, &isr_cv);
        if (crc != 0) return crc;
        if (isr_cv < 0 || isr_cv != c->standby_isr_cv) {
            CINFO(c, "The standby context's stamps prove nothing: brokers announced ISR changes of their own since its "
                     "last refresh; every partition state is read");
            forget_stamps(&c->ctx);
        }
    }
    c->standby_term = -1;
    c->standby_isr_cv = -1;
    /* step 2's stamps, read while the brokers and topics are (struct stamp_read) */
    struct stamp_read stamps;
    stamp_read_start(c, &c->ctx, &stamps);
    int rc = load_context(c, states_loaded, rep, &stamps);
    stamp_read_free(&stamps);
    return rc;
}

/* initialize_context's reads after the standby's move (stamps: started). */
static int load_context(struct gr_controller *c, int64_t *states_loaded, struct gr_ctrl_load_report *rep,
                        struct stamp_read *stamps) {
    struct gr_kzk_broker *brokers = NULL;
    int nb = 0;
    int rc = gr_kzk_get_all_brokers(c->kzk, true, false, &brokers, &nb);
    if (rc != 0) return rc;
    gr_ctrl_ctx_set_live_brokers(&c->ctx, brokers, nb);
    gr_kzk_brokers_free(brokers, nb);
    char buf[2048];
    CINFO(c, "Initialized broker epochs cache: %s", gr_ctrl_ctx_format_brokers(&c->ctx, buf, sizeof buf));

    int64_t t0 = gr_clock_now_ms(c->cfg.clock);
    rc = sync_topics(c, &c->ctx, true);
    if (rc != 0) return rc;
    rc = assign_topic_ids(c, NULL, 0); /* processTopicIds: every topic of the context */
    if (rc != 0) return rc;
    int64_t t1 = gr_clock_now_ms(c->cfg.clock);
    CINFO(c, "Loaded the replica assignments of %zu topics (%lld partitions) in %lld ms", gr_ctrl_ctx_topic_count(&c->ctx),
          (long long)gr_ctrl_ctx_partition_count(&c->ctx), (long long)(t1 - t0));

    c->ctx.n_shutting_down = 0;
    int32_t *live = gr_malloc((size_t)(c->ctx.n_brokers ? c->ctx.n_brokers : 1) * sizeof *live);
    for (int i = 0; i < c->ctx.n_brokers; i++) live[i] = c->ctx.brokers[i].id;
    rc = watch_brokers(c, live, c->ctx.n_brokers);
    free(live);
    if (rc != 0) return rc;
    stamp_read_finish(stamps);
    rc = load_partition_states(c, &c->ctx, rep->warm, states_loaded, rep, stamps);
    if (rc != 0) return rc;
    if (rep->warm)
        CINFO(c, "Loaded %lld partition states in %lld ms from the standby context: %lld of its %lld states proven current "
                 "by their topic's stamp, %lld read",
              (long long)*states_loaded, (long long)(gr_clock_now_ms(c->cfg.clock) - t1), (long long)rep->states_confirmed,
              (long long)rep->standby_states, (long long)rep->states_read);
    else
        CINFO(c, "Loaded %lld partition states in %lld ms", (long long)*states_loaded,
              (long long)(gr_clock_now_ms(c->cfg.clock) - t1));

    c->sender->startup(c->sender_ctx, c->em);
    for (int i = 0; i < c->ctx.n_brokers; i++) c->sender->add_broker(c->sender_ctx, &c->ctx.brokers[i].info);

    int32_t ids[256];
    int n = GR_MIN(c->ctx.n_brokers, 256);
    for (int i = 0; i < n; i++) ids[i] = c->ctx.brokers[i].id;
    CINFO(c, "Currently active brokers in the cluster: %s", fmt_ids(buf, sizeof buf, ids, n));
    CINFO(c, "Currently shutting brokers in the cluster: ");
    size_t nt;
    const char **names = gr_ctrl_ctx_sorted_topics(&c->ctx, &nt);
    CINFO(c, "Current list of topics in the cluster: %s", fmt_names(buf, sizeof buf, names, nt));
    free(names);
    return 0;
}

static void schedule_auto_rebalance(struct gr_controller *c, int64_t delay_ms) {
    cancel_timers(c);
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_AUTO_PREFERRED_REPLICA_LEADER_ELECTION);
    ev->broker_epoch = ++c->auto_rebalance_gen;
    c->auto_rebalance_timer = gr_clock_schedule(c->cfg.clock, delay_ms, c->em, ev);
}

/* Kafka's onControllerFailover (first part: watches and the context). */
static int on_controller_failover(struct gr_controller *c) {
    int64_t t0 = gr_clock_now_ms(c->cfg.clock);
    int rc;
    CINFO(c, "Setting up feature versioning");
    if ((rc = gr_ctrl_feature_versioning_setup(c->kzk, true)) != 0) return rc; /* maybeSetupFeatureVersioning */
    CINFO(c, "Registering handlers");
    gr_zk_watches_register_child(c->watches, BROKER_IDS_PATH, on_broker_ids_child, c);
    gr_zk_watches_register_child(c->watches, TOPICS_PATH, on_topics_child, c);
    gr_zk_watches_register_child(c->watches, DELETE_TOPICS_PATH, on_delete_topics_child, c);
    gr_zk_watches_register_child(c->watches, LOG_DIR_EVENT_PATH, on_log_dir_child, c);
    gr_zk_watches_register_child(c->watches, ISR_CHANGE_PATH, on_isr_change_child, c);
    gr_zk_watches_register_node(c->watches, PREFERRED_PATH, on_preferred_node, c);
    gr_zk_watches_register_node(c->watches, REASSIGN_PATH, on_reassign_node, c);
    bool exists = false;
    if ((rc = gr_kzk_watch_exists(c->kzk, PREFERRED_PATH, &exists)) != 0) return rc;
    if ((rc = gr_kzk_watch_exists(c->kzk, REASSIGN_PATH, &exists)) != 0) return rc;

    CINFO(c, "Deleting log dir event notifications");
    if ((rc = delete_log_dir_notifications(c)) != 0) return rc;
    CINFO(c, "Deleting isr change notifications");
    if ((rc = delete_isr_notifications(c)) != 0) return rc;
    CINFO(c, "Initializing controller context");
    int64_t states = 0;
    struct gr_ctrl_load_report rep = {0};
    c->standby_gen++; /* a tick already fired is stale now */
    if (c->standby_timer) {
        gr_clock_cancel(c->cfg.clock, c->standby_timer);
        c->standby_timer = 0;
    }
    c->standby_ready = false; /* moved into the context (initialize_context) */
    if ((rc = initialize_context(c, &states, &rep)) != 0) return rc;
    if (c->cfg.on_context_loaded) c->cfg.on_context_loaded(c->cfg.context_hook_arg, &c->ctx, &rep);
    CINFO(c, "Fetching topic deletions in progress");
    if ((rc = gr_td_init(c->td)) != 0) return rc; /* fetchTopicDeletionsInProgress + topicDeletionManager.init */
    /* UpdateMetadata (brokers only) to all, then the replica and partition state machines */
    if ((rc = gr_ctrl_failover_start_state_machines(&c->sm)) != 0) return rc;

    CINFO(c, "Ready to serve as the new controller with epoch %d", c->ctx.epoch);
    CINFO(c, "ready as controller, epoch %d: %d live brokers, %zu topics, %lld partitions (%lld states), load time %lld ms%s",
          c->ctx.epoch, c->ctx.n_brokers, gr_ctrl_ctx_topic_count(&c->ctx), (long long)gr_ctrl_ctx_partition_count(&c->ctx),
          (long long)states, (long long)(gr_clock_now_ms(c->cfg.clock) - t0), rep.warm ? " (warm start)" : "");

    /* initializePartitionReassignments (before tryTopicDeletion); pending preferred replica
     * elections (after) */
    if ((rc = gr_reassign_failover(&c->sm, c->em)) != 0) return rc;
    if ((rc = gr_td_try(c->td)) != 0) return rc;
    if ((rc = gr_leader_balance_failover(&c->sm, c->em)) != 0) return rc;
    CINFO(c, "Starting the controller scheduler");
    if (c->cfg.auto_leader_rebalance_enable) schedule_auto_rebalance(c, AUTO_REBALANCE_FIRST_DELAY_MS);
    return 0;
}

/* ======================================================================================
 * Event processing
 * ====================================================================================== */

static int process_startup(struct gr_controller *c) {
    gr_zk_watches_register_node(c->watches, CONTROLLER_PATH, on_controller_node, c);
    bool exists;
    int rc = gr_kzk_watch_exists(c->kzk, CONTROLLER_PATH, &exists);
    if (rc != 0) return rc;
    rc = elect(c);
    if (!c->term) schedule_standby_refresh(c, 0); /* the first standby load, right away */
    return rc;
}

/* ControllerChange: Kafka only runs maybeResign here. If /controller was rewritten and then deleted
 * before our watch was re-armed, the deletion is never seen and nobody elects (found by the
 * simulation, seeds 31/421/432); so when the reread finds no controller, elect now. elect() does
 * nothing if someone else has won meanwhile. */
static int process_controller_change(struct gr_controller *c) {
    int rc = maybe_resign(c);
    if (rc != 0) return rc;
    if (atomic_load(&c->active_id) == -1) return elect(c);
    return 0;
}

/* Whether this broker should let others run for controller first: the standby context is on but
 * empty (this broker resigned less than a refresh ago, or has not finished its first refresh), so
 * its failover would be cold -- at 100k partitions 3-4 s before its first request where a warm
 * broker takes ~0.2 s -- and another broker is registered that may have one. */
static bool should_defer_candidacy(struct gr_controller *c) {
    if (!c->cfg.standby_enable || c->standby_ready || c->term || c->shut_down) return false;
    if (atomic_load(&c->active_id) != -1) return false; /* elect() would do nothing */
    int32_t *ids = NULL;
    int n = 0;
    if (gr_kzk_get_broker_ids(c->kzk, false, &ids, &n) != 0) n = 0;
    bool others = false;
    for (int i = 0; i < n && !others; i++) others = ids[i] != c->cfg.broker_id;
    free(ids);
    return others;
}

/* Runs for controller CANDIDACY_DEFER_MS from now (a Reelect carrying candidacy_gen), unless a
 * broker has won by then (elect() then does nothing). The election is still the first create of
 * /controller that succeeds; only this broker's attempt comes later. If every broker defers,
 * they all run after the delay. */
static int defer_candidacy(struct gr_controller *c) {
    CINFO(c, "No controller, and this broker's standby context is empty (its failover would be cold): letting a "
             "broker with one take over first; running for controller in %d ms if none has",
          CANDIDACY_DEFER_MS);
    cancel_candidacy(c);
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_REELECT);
    ev->broker_epoch = c->candidacy_gen;
    c->candidacy_timer = gr_clock_schedule(c->cfg.clock, CANDIDACY_DEFER_MS, c->em, ev);
    return 0;
}

/* Drops the deferred candidacy, also one whose timer has fired and whose Reelect is queued (its
 * generation is stale now): a later deferral replaces it, an Expire pre-empts it as it pre-empts
 * every pending event (the new session's RegisterBrokerAndReelect runs for controller, after
 * registering the broker), a shutdown ends it. */
static void cancel_candidacy(struct gr_controller *c) {
    c->candidacy_gen++;
    if (c->candidacy_timer) {
        gr_clock_cancel(c->cfg.clock, c->candidacy_timer);
        c->candidacy_timer = 0;
    }
}

/* Reelect (/controller deleted, or a new session): Kafka's maybeResign then elect -- except that
 * a broker whose failover would be cold defers its candidacy (defer_candidacy). */
static int process_reelect(struct gr_controller *c, const struct gr_ctrl_event *ev) {
    bool deferred = ev && ev->broker_epoch > 0;
    if (deferred) {
        /* superseded (a later deferral's timer is armed) or cancelled (Expire, shutdown): a stale
         * one must not run for controller now -- before the broker re-registered in its new
         * session, or ahead of the later deferral -- nor clear the later timer's id */
        if (ev->broker_epoch != c->candidacy_gen) return 0;
        c->candidacy_timer = 0;
    }
    int rc = maybe_resign(c);
    if (rc != 0) return rc;
    if (!deferred && should_defer_candidacy(c)) return defer_candidacy(c);
    return elect(c);
}

static int process_register_broker_and_reelect(struct gr_controller *c) {
    struct gr_zsession prev;
    bool have_prev = false;
    if (c->cfg.on_new_session) have_prev = c->cfg.on_new_session(c->cfg.hook_arg, &prev);
    int64_t epoch = -1;
    int rc = gr_kzk_register_broker(c->kzk, &c->broker_info, &prev, have_prev ? 1 : 0, &epoch);
    if (rc != 0) {
        CERROR(c, "Cannot re-register broker %d in ZooKeeper after a new session: %s", c->cfg.broker_id,
               gr_kzk_strerror(rc));
        return rc;
    }
    atomic_store(&c->broker_epoch, epoch);
    CINFO(c, "Re-registered broker %d at path /brokers/ids/%d, czxid (broker epoch): %lld", c->cfg.broker_id,
          c->cfg.broker_id, (long long)epoch);
    return process_reelect(c, NULL);
}

static int process_expire(struct gr_controller *c) {
    cancel_candidacy(c);
    atomic_store(&c->active_id, -1);
    on_controller_resignation(c);
    return 0;
}

/* Kafka's processBrokerChange: reread /brokers/ids (re-arming the child watch); flows.c computes
 * new, dead and bounced brokers and runs onBrokerStartup / onBrokerFailure, which call back into
 * the hooks below for reassignments, deletions and the BrokerModifications watches. */
static int process_broker_change(struct gr_controller *c) {
    if (!is_active(c)) return 0;
    struct gr_kzk_broker *cur = NULL;
    int ncur = 0;
    int rc = gr_kzk_get_all_brokers(c->kzk, true, false, &cur, &ncur); /* data watches: watch_brokers */
    if (rc != 0) return rc;
    rc = gr_ctrl_process_broker_change(&c->sm, cur, ncur);
    gr_kzk_brokers_free(cur, ncur);
    return rc;
}

/* onBrokerStartup's tail (flow hook), in Kafka's order: reassignments targeting the new brokers
 * resume, then deletions of their topics, then their BrokerModifications watches. */
static int hook_brokers_started(void *arg, const int32_t *ids, int n) {
    struct gr_controller *c = arg;
    int rc = gr_reassign_on_brokers_started(&c->sm, c->em, ids, n);
    if (rc == 0 && c->td_hooks.brokers_started) rc = c->td_hooks.brokers_started(c->td_hooks.arg, ids, n);
    int rc2 = watch_brokers(c, ids, n);
    return rc ? rc : rc2;
}

/* onBrokerFailure's tail: unregister the BrokerModifications watches. */
static int hook_brokers_failed(void *arg, const int32_t *ids, int n) {
    struct gr_controller *c = arg;
    char p[512];
    for (int i = 0; i < n; i++) gr_zk_watches_unregister_node(c->watches, broker_path(p, sizeof p, ids[i]));
    return c->td_hooks.brokers_failed ? c->td_hooks.brokers_failed(c->td_hooks.arg, ids, n) : 0;
}

static int hook_replicas_offline_for_deletion(void *arg, const struct gr_ctrl_replica *r, int n) {
    struct gr_controller *c = arg;
    return c->td_hooks.replicas_offline_for_deletion ? c->td_hooks.replicas_offline_for_deletion(c->td_hooks.arg, r, n)
                                                     : 0;
}

static bool endpoints_equal(const struct gr_kzk_broker *a, const struct gr_kzk_broker *b) {
    if (a->n_endpoints != b->n_endpoints) return false;
    for (int i = 0; i < a->n_endpoints; i++) {
        const struct gr_kzk_endpoint *x = &a->endpoints[i], *y = &b->endpoints[i];
        if (x->port != y->port || strcmp(x->listener ? x->listener : "", y->listener ? y->listener : "") ||
            strcmp(x->host ? x->host : "", y->host ? y->host : "") ||
            strcmp(x->security_protocol ? x->security_protocol : "", y->security_protocol ? y->security_protocol : ""))
            return false;
    }
    if (a->n_features != b->n_features) return false;
    for (int i = 0; i < a->n_features; i++)
        if (strcmp(a->features[i].name, b->features[i].name) || a->features[i].min_version != b->features[i].min_version ||
            a->features[i].max_version != b->features[i].max_version)
            return false;
    return true;
}

static int process_broker_modification(struct gr_controller *c, int32_t id) {
    if (!is_active(c)) return 0;
    struct gr_kzk_broker nb;
    memset(&nb, 0, sizeof nb);
    int rc = gr_kzk_get_broker(c->kzk, id, true, &nb);
    if (rc == GR_KZK_ENONODE) return 0;
    if (rc != 0) return rc;
    struct gr_ctrl_broker *old = gr_ctrl_ctx_broker(&c->ctx, id);
    if (old && !endpoints_equal(&old->info, &nb)) {
        CINFO(c, "Updated broker metadata for broker %d (%d endpoints)", id, nb.n_endpoints);
        nb.epoch = old->epoch;
        gr_ctrl_ctx_add_live_broker(&c->ctx, &nb);
        gr_ctrl_send_update_metadata_all(&c->sm, NULL, 0); /* onBrokerUpdate */
    }
    gr_kzk_broker_release(&nb);
    return 0;
}

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* A TopicChange put by the pacing timer (its event's partition field). */
#define TOPIC_CHANGE_DEFERRED 1
/* TopicChanges are processed at most once per TOPIC_CHANGE_PACE_MS. Each one handles every topic
 * new by then in one batch (one getChildren, one pipelined read of the new assignments, one set
 * of state writes, one LeaderAndIsr / UpdateMetadata per broker), but topics created one after
 * another (1000 CreateTopics topics written ~13 ms apart) each fired the child watch and made
 * their own batch: ~730 small LeaderAndIsr per broker for 1000 topics (issue 14). A TopicChange
 * arriving within the pace of the previous one is deferred to the end of it (one timer); the
 * child watch is then re-armed by the deferred event's getChildren, which sees every topic
 * created meanwhile. An isolated topic creation is not delayed. */
#define TOPIC_CHANGE_PACE_MS 100

/* Whether this TopicChange waits for the pacing timer (armed here if needed). */
static bool topic_change_deferred(struct gr_controller *c, const struct gr_ctrl_event *ev) {
    if (ev->partition == TOPIC_CHANGE_DEFERRED) {
        c->topic_change_timer = 0; /* this timer fired */
    } else if (c->topic_change_timer) {
        return true; /* the deferred one will see this topic too */
    } else if (c->topic_change_ran) {
        int64_t wait = c->topic_change_last_ms + TOPIC_CHANGE_PACE_MS - gr_clock_now_ms(c->cfg.clock);
        if (wait > 0) {
            struct gr_ctrl_event *d = gr_ctrl_event_new(GR_EV_TOPIC_CHANGE);
            d->partition = TOPIC_CHANGE_DEFERRED;
            c->topic_change_timer = gr_clock_schedule(c->cfg.clock, wait, c->em, d);
            CDEBUG(c, "TopicChange deferred by %lld ms (pacing)", (long long)wait);
            return true;
        }
    }
    c->topic_change_last_ms = gr_clock_now_ms(c->cfg.clock);
    c->topic_change_ran = true;
    return false;
}

/* Kafka's processTopicChange. */
static int process_topic_change(struct gr_controller *c, const struct gr_ctrl_event *ev) {
    if (!is_active(c)) {
        if (ev->partition == TOPIC_CHANGE_DEFERRED) c->topic_change_timer = 0;
        return 0;
    }
    if (topic_change_deferred(c, ev)) return 0;
    struct gr_zstrings topics = {0};
    int rc = gr_kzk_get_topics(c->kzk, true, &topics);
    if (rc != 0) return rc;
    qsort(topics.names, (size_t)topics.count, sizeof(char *), cmp_cstr);

    const char **new_topics = gr_malloc(sizeof(char *) * (size_t)(topics.count + 1));
    int n_new = 0;
    for (int i = 0; i < topics.count; i++)
        if (!gr_ctrl_ctx_topic(&c->ctx, topics.names[i])) new_topics[n_new++] = topics.names[i];
    size_t n_known;
    const char **known = gr_ctrl_ctx_sorted_topics(&c->ctx, &n_known);
    char **deleted = gr_malloc(sizeof(char *) * (n_known + 1));
    size_t n_deleted = 0;
    for (size_t i = 0; i < n_known; i++)
        if (!bsearch(&known[i], topics.names, (size_t)topics.count, sizeof(char *), cmp_cstr))
            deleted[n_deleted++] = gr_strdup(known[i]);
    free(known);

    int64_t before = gr_ctrl_ctx_partition_count(&c->ctx);
    char p[512];
    for (size_t i = 0; i < n_deleted; i++) {
        gr_zk_watches_unregister_node(c->watches, topic_path(p, sizeof p, deleted[i]));
        gr_ctrl_ctx_remove_topic(&c->ctx, deleted[i]);
    }
    int64_t after_removal = gr_ctrl_ctx_partition_count(&c->ctx);
    /* Like Kafka, no partition states are read for new topics: onNewPartitionCreation creates
     * them (a state left over in ZooKeeper makes that creation fail, as in Kafka). */
    rc = load_topics(c, &c->ctx, new_topics, n_new, true);
    if (rc == 0) rc = assign_topic_ids(c, new_topics, n_new); /* processTopicIds of the added topics */
    char b1[1024], b2[1024];
    CINFO(c, "New topics: [%s], deleted topics: [%s], new partition replica assignment [%lld partitions]",
          fmt_names(b1, sizeof b1, new_topics, (size_t)n_new),
          fmt_names(b2, sizeof b2, (const char *const *)deleted, n_deleted),
          (long long)(gr_ctrl_ctx_partition_count(&c->ctx) - after_removal));
    (void)before;
    if (rc == 0 && n_new > 0) {
        struct gr_ctrl_tp_list added = {0};
        for (int i = 0; i < n_new; i++) {
            struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(&c->ctx, new_topics[i]);
            for (int j = 0; t && j < t->n_partitions; j++) gr_ctrl_tp_list_add(&added, t->name, t->partitions[j].partition);
        }
        rc = gr_ctrl_on_new_partition_creation(&c->sm, added.v, added.n);
        gr_ctrl_tp_list_free(&added);
    }
    for (size_t i = 0; i < n_deleted; i++) free(deleted[i]);
    free(deleted);
    free(new_topics);
    gr_zstrings_free(&topics);
    return rc;
}

/* restorePartitionReplicaAssignment: rewrites /brokers/topics/T (guarded) with the assignment the
 * context holds, undoing partitions added while the topic is being deleted. Kafka keeps only the
 * partitions that have a partitions/P znode; this keeps every partition the context knows (a
 * partition whose replicas were never live has no znode, and dropping it would lose it). */
static int restore_topic_assignment(struct gr_controller *c, struct gr_ctrl_topic *t) {
    CINFO(c, "Restoring the partition replica assignment for topic %s", t->name);
    struct gr_kzk_topic_assignment a;
    memset(&a, 0, sizeof a);
    a.topic = t->name;
    a.topic_id = t->topic_id;
    a.n_partitions = t->n_partitions;
    a.partitions = gr_calloc((size_t)(t->n_partitions ? t->n_partitions : 1), sizeof *a.partitions);
    for (int i = 0; i < t->n_partitions; i++) {
        const struct gr_ctrl_partition *p = &t->partitions[i];
        a.partitions[i] = (struct gr_kzk_partition_assignment){
            .partition = p->partition, .n_replicas = p->n_replicas, .replicas = p->replicas,
            .n_adding = p->n_adding, .adding = p->adding, .n_removing = p->n_removing, .removing = p->removing};
    }
    int rc = gr_kzk_set_topic_assignment_guarded(c->kzk, c->ctx.epoch_zk_version, t->name, &a, GR_ZANY_VERSION);
    free(a.partitions); /* arrays borrowed from the context */
    return rc;
}

/* Kafka's processPartitionModifications: partitions added to an existing topic. */
static int process_partition_modifications(struct gr_controller *c, const char *topic) {
    if (!is_active(c) || !topic) return 0;
    struct gr_kzk_topic_assignment a;
    memset(&a, 0, sizeof a);
    int rc = gr_kzk_get_topic_assignments(c->kzk, &topic, 1, true, &a);
    if (rc != 0) {
        gr_kzk_topic_assignment_release(&a);
        return rc;
    }
    if (a.rc != 0) {
        rc = a.rc == GR_KZK_ENONODE ? 0 : a.rc;
        gr_kzk_topic_assignment_release(&a);
        return rc;
    }
    struct gr_ctrl_topic *old = gr_ctrl_ctx_topic(&c->ctx, topic);
    bool adopted = false;
    if (old && !old->topic_id && a.topic_id) { /* given its id by another writer */
        old->topic_id = a.topic_id;
        a.topic_id = NULL;
        gr_uuid_parse(old->topic_id, &old->id);
        adopted = true;
    }
    /* the znode lost the topic's id (a 2.7 tool rewrote it) or holds another one: the known id
     * goes back (topic_ids.h), before a's partitions are taken into the context (which takes
     * them out of a); only a controller move is passed on */
    int32_t restored_version = -1;
    if (old && !adopted) {
        int32_t before = old->zk_version;
        int r = gr_ctrl_restore_topic_id(c->kzk, &c->ctx, old, &a);
        if (r == GR_ECONTROLLER_MOVED) {
            gr_kzk_topic_assignment_release(&a);
            return r;
        }
        if (old->zk_version != before) restored_version = old->zk_version;
    }
    int added = 0;
    for (int i = 0; i < a.n_partitions; i++)
        if (!gr_ctrl_topic_partition(old, a.partitions[i].partition)) added++;
    if (old && gr_ctrl_topic_queued_for_deletion(&c->ctx, topic)) {
        if (added > 0) {
            CWARN(c, "Skipping adding %d partitions for topic %s since it is currently being deleted", added, topic);
            rc = restore_topic_assignment(c, old);
        } else {
            CINFO(c, "Ignoring partition change during topic deletion as no new partitions are added");
        }
    } else if (old && added > 0) {
        int32_t *ids = gr_malloc(sizeof(int32_t) * (size_t)added);
        int k = 0;
        for (int i = 0; i < a.n_partitions; i++)
            if (!gr_ctrl_topic_partition(old, a.partitions[i].partition)) ids[k++] = a.partitions[i].partition;
        CINFO(c, "New partitions to be added: %d partitions of topic %s", added, topic);
        /* only the new partitions: the existing ones keep their assignment and replica states */
        gr_ctrl_ctx_add_partitions(&c->ctx, old, &a);
        struct gr_ctrl_topic *t = old;
        struct gr_ctrl_tp_list tps = {0};
        for (int i = 0; i < k; i++) gr_ctrl_tp_list_add(&tps, t->name, ids[i]);
        rc = gr_ctrl_on_new_partition_creation(&c->sm, tps.v, tps.n);
        gr_ctrl_tp_list_free(&tps);
        free(ids);
    }
    if (restored_version >= 0) old->zk_version = restored_version; /* add_partitions took a's */
    gr_kzk_topic_assignment_release(&a);
    return rc;
}

/* Kafka's processTopicDeletion (topic_deletion.h). */
static int process_topic_deletion(struct gr_controller *c) {
    if (!is_active(c)) return 0;
    return gr_td_process_topic_deletion(c->td);
}

/* ISR change notifications (IBP < 2.7-IV2 leaders): reload those partition states, then delete
 * the notifications. */
static int process_isr_change_notification(struct gr_controller *c) {
    if (!is_active(c)) return 0;
    return gr_ctrl_process_isr_change_notification(&c->sm);
}

static int process_log_dir_event_notification(struct gr_controller *c) {
    if (!is_active(c)) return 0;
    struct gr_zstrings names = {0};
    int rc = gr_kzk_get_log_dir_event_notifications(c->kzk, true, &names);
    if (rc != 0 || names.count == 0) {
        gr_zstrings_free(&names);
        return rc;
    }
    int32_t *ids = NULL;
    int n = 0;
    rc = gr_kzk_get_log_dir_event_brokers(c->kzk, (const char *const *)names.names, names.count, &ids, &n);
    if (rc == 0 && n > 0) {
        char buf[512];
        CINFO(c, "Handling log directory failure for brokers %s", fmt_ids(buf, sizeof buf, ids, n));
        /* onBrokerLogDirFailure: replicas on those brokers -> OnlineReplica (probes with LeaderAndIsr) */
        struct gr_ctrl_replica_list reps = {0};
        gr_rsm_replicas_on_brokers(&c->sm, ids, n, &reps);
        rc = gr_rsm_handle_state_changes(&c->sm, reps.v, reps.n, GR_RS_ONLINE);
        gr_ctrl_replica_list_free(&reps);
    }
    free(ids);
    int rc2 = gr_kzk_delete_log_dir_event_notifications_guarded(c->kzk, c->ctx.epoch_zk_version,
                                                                (const char *const *)names.names, names.count);
    gr_zstrings_free(&names);
    return rc ? rc : rc2;
}

static int process_zk_partition_reassignment(struct gr_controller *c) {
    if (!is_active(c)) return 0;
    return gr_reassign_process_zk(&c->sm, c->em, NULL);
}

static int process_replica_leader_election(struct gr_controller *c, struct gr_ctrl_event *ev) {
    return gr_leader_balance_process_election(&c->sm, c->em, ev, is_active(c));
}

static int process_auto_preferred_election(struct gr_controller *c, const struct gr_ctrl_event *ev) {
    if (ev->broker_epoch != c->auto_rebalance_gen) {
        CDEBUG(c, "Ignoring an auto leader balancing tick of an earlier term");
        return 0; /* the current term's timer (if any) keeps its handle */
    }
    c->auto_rebalance_timer = 0; /* this timer fired */
    if (!is_active(c)) return 0;
    CDEBUG(c, "Checking need to trigger auto leader balancing");
    int rc = gr_leader_balance_auto(&c->sm, c->em,
                                    c->cfg.broker_config ? c->cfg.broker_config->leader_imbalance_per_broker_percentage : 10);
    int64_t interval = c->cfg.leader_imbalance_check_interval_ms > 0 ? c->cfg.leader_imbalance_check_interval_ms : 300000;
    schedule_auto_rebalance(c, interval);
    return rc;
}

/* The processor: one event at a time on the event thread (Kafka's KafkaController.process). */

/* A response to a request of an earlier term of this controller (queued before it resigned and was
 * elected again): its replica states, deletions and log dir answers belong to a context that is
 * gone. Kafka processes them; a StopReplica(delete) answer of the old term then completes the new
 * term's deletion before its own StopReplica arrived (simulation seed 416: a stray replica). */
static bool response_of_earlier_term(struct gr_controller *c, struct gr_ctrl_event *ev) {
    if (ev->type != GR_EV_LEADER_AND_ISR_RESPONSE && ev->type != GR_EV_UPDATE_METADATA_RESPONSE &&
        ev->type != GR_EV_TOPIC_DELETION_STOP_REPLICA_RESPONSE)
        return false;
    const struct gr_ctrl_response *r = ev->payload;
    const struct gr_ctrl_req *sent = r ? r->request : NULL;
    if (!sent) return false;
    int32_t e = sent->api_key == GR_API_LEADER_AND_ISR    ? sent->u.lai.ControllerEpoch
                : sent->api_key == GR_API_UPDATE_METADATA ? sent->u.um.ControllerEpoch
                                                          : sent->u.sr.ControllerEpoch;
    if (e == c->ctx.epoch) return false;
    CINFO(c, "Ignoring %s of broker %d to a request of controller epoch %d", gr_ctrl_event_name(ev->type), ev->broker_id,
          e);
    return true;
}

/* Events after which a partition's ISR (or leader) may have changed, so a reassignment may be
 * complete (TRS within the ISR). Kafka checks only ISR changes reported by leaders (AlterPartition, ISR
 * change notifications); but the controller shrinks ISRs itself when a replica goes offline, and an
 * unclean election sets the ISR to [leader]: a reassignment whose removed replica failed would
 * wait for the next AlterPartition, which may never come. */
static bool may_change_isr(int type) {
    switch (type) {
    case GR_EV_ISR_CHANGE_NOTIFICATION:
    case GR_EV_ALTER_PARTITION_RECEIVED:
    case GR_EV_BROKER_CHANGE:
    case GR_EV_LEADER_AND_ISR_RESPONSE: /* replicas on offline log dirs */
    case GR_EV_CONTROLLED_SHUTDOWN:
    case GR_EV_REPLICA_LEADER_ELECTION:
    case GR_EV_AUTO_PREFERRED_REPLICA_LEADER_ELECTION:
    case GR_EV_UNCLEAN_LEADER_ELECTION_ENABLE:
    case GR_EV_TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE:
        return true;
    default:
        return false;
    }
}

/* Memory (issue 14): an event that reads, writes or sends thousands of partition states (a
 * creation, a failover, a broker's failure, a deletion) allocates megabytes that are freed by
 * its end -- ZooKeeper reads and multis, JSON, the request batch, state-change log lines -- or
 * once the brokers answer (the requests, the decoded answers). glibc keeps that memory resident
 * in its arenas: 2-7 MB at 10k partitions on the controller's broker, which the replica
 * manager's trim rules (replica_manager.c) reach only seconds later or not at all. After an event
 * that did GR_CTRL_TRIM_MIN partitions of work (gr_ctrl_ctx_work) the event thread trims at
 * once; for GR_CTRL_TRIM_ANSWERS_MS after it, also at the end of an answer (LeaderAndIsr,
 * UpdateMetadata, StopReplica response) that leaves the queue empty (a burst of answers is
 * trimmed once, after its last). A trim walks the free lists of every arena (0-6 ms at 10k
 * partitions, ~30 ms at 100k), off every request path, while the queue is idle; it changes no
 * controller state. */
#define GR_CTRL_TRIM_MIN 1000
#define GR_CTRL_TRIM_ANSWERS_MS 3000

static void trim_heap(struct gr_controller *c, const char *why) {
    int64_t t0 = gr_mono_ms();
    long before = gr_rss_kib();
    malloc_trim(0);
    long after = gr_rss_kib();
    int64_t t1 = gr_mono_ms();
    ctrl_log(c, before - after >= 1024 ? GR_LOG_INFO : GR_LOG_DEBUG,
             "Trimmed the heap (%s): RSS %ld -> %ld KiB in %lld ms", why, before, after, (long long)(t1 - t0));
    c->trim_work = gr_ctrl_ctx_work();
    c->trim_last_ms = t1;
}

static void maybe_trim(struct gr_controller *c, struct gr_ctrl_event *ev) {
    bool answer = ev->type == GR_EV_LEADER_AND_ISR_RESPONSE || ev->type == GR_EV_UPDATE_METADATA_RESPONSE ||
                  ev->type == GR_EV_TOPIC_DELETION_STOP_REPLICA_RESPONSE;
    /* An answer owns the request it answers (channel_manager.c): free both now rather than with
     * the event, so that a trim here returns them too (a LeaderAndIsr for 10k partitions and its
     * answer hold ~1 MB). Nothing reads an answer's payload after it was processed. */
    if (answer && ev->payload && ev->payload_free) {
        ev->payload_free(ev->payload);
        ev->payload = NULL;
    }
    if (gr_ctrl_ctx_work() - c->trim_work >= GR_CTRL_TRIM_MIN) {
        trim_heap(c, "after a large event");
        c->trim_answers_until_ms = c->trim_last_ms + GR_CTRL_TRIM_ANSWERS_MS;
        return;
    }
    if (!answer || c->trim_answers_until_ms == 0) return;
    int64_t now = gr_mono_ms();
    if (now >= c->trim_answers_until_ms) c->trim_answers_until_ms = 0;
    else if (c->em && gr_ctrl_events_size(c->em) == 0)
        trim_heap(c, "answers to a large event");
}

static void process(void *arg, struct gr_ctrl_event *ev) {
    struct gr_controller *c = arg;
    const char *name = gr_ctrl_event_name(ev->type);
    if (ev->type == GR_EV_LEADER_AND_ISR_RESPONSE || ev->type == GR_EV_UPDATE_METADATA_RESPONSE ||
        ev->type == GR_EV_AUTO_PREFERRED_REPLICA_LEADER_ELECTION)
        CDEBUG(c, "Processing event %s", name);
    else if (ev->topic)
        CINFO(c, "Processing event %s(%s)", name, ev->topic);
    else if (ev->broker_id >= 0)
        CINFO(c, "Processing event %s(%d)", name, ev->broker_id);
    else
        CINFO(c, "Processing event %s", name);

    int rc = 0;
    c->ctx.event_gen++; /* partition states written before this event are no longer "fresh" */
    if (is_active(c) && response_of_earlier_term(c, ev)) {
        update_metrics(c);
        return;
    }
    switch (ev->type) {
    case GR_EV_STARTUP: rc = process_startup(c); break;
    case GR_EV_CONTROLLER_CHANGE: rc = process_controller_change(c); break;
    case GR_EV_REELECT: rc = process_reelect(c, ev); break;
    case GR_EV_REGISTER_BROKER_AND_REELECT: rc = process_register_broker_and_reelect(c); break;
    case GR_EV_EXPIRE: rc = process_expire(c); break;
    case GR_EV_BROKER_CHANGE: rc = process_broker_change(c); break;
    case GR_EV_BROKER_MODIFICATIONS: rc = process_broker_modification(c, ev->broker_id); break;
    case GR_EV_TOPIC_CHANGE: rc = process_topic_change(c, ev); break;
    case GR_EV_PARTITION_MODIFICATIONS: rc = process_partition_modifications(c, ev->topic); break;
    case GR_EV_TOPIC_DELETION: rc = process_topic_deletion(c); break;
    case GR_EV_ISR_CHANGE_NOTIFICATION: rc = process_isr_change_notification(c); break;
    case GR_EV_API_PARTITION_REASSIGNMENT: rc = gr_reassign_process_api(&c->sm, c->em, ev, is_active(c)); break;
    case GR_EV_LIST_PARTITION_REASSIGNMENTS: rc = gr_reassign_process_list(&c->sm, ev, is_active(c)); break;
    case GR_EV_PARTITION_REASSIGNMENT_ISR_CHANGE:
        if (is_active(c)) rc = gr_reassign_maybe_complete(&c->sm, c->em);
        break;
    case GR_EV_LOG_DIR_EVENT_NOTIFICATION: rc = process_log_dir_event_notification(c); break;
    case GR_EV_ZK_PARTITION_REASSIGNMENT: rc = process_zk_partition_reassignment(c); break;
    case GR_EV_REPLICA_LEADER_ELECTION: rc = process_replica_leader_election(c, ev); break;
    case GR_EV_UPDATE_FEATURES: rc = gr_ctrl_feature_updates_process(c->kzk, ev, is_active(c)); break;
    case GR_EV_AUTO_PREFERRED_REPLICA_LEADER_ELECTION: rc = process_auto_preferred_election(c, ev); break;
    case GR_EV_STANDBY_REFRESH: rc = process_standby_refresh(c, ev); break;
    case GR_EV_SHUTDOWN_EVENT_THREAD:
        CERROR(c, "Received a ShutdownEventThread event. This type of event is supposed to be handle by ControllerEventThread");
        break;
    case GR_EV_ALTER_PARTITION_RECEIVED:
        if (!is_active(c)) gr_ctrl_alter_partition_fail(ev->payload, GR_KERR_NOT_CONTROLLER);
        else rc = gr_ctrl_alter_partition_complete(&c->sm, ev);
        break;
    case GR_EV_LEADER_AND_ISR_RESPONSE:
        gr_ctrl_lai_response_normalize(ev->payload); /* v5+: errors by topic id -> by name */
        if (is_active(c)) gr_ctrl_process_leader_and_isr_response(&c->sm, ev);
        if (is_active(c)) rc = gr_od_process_leader_and_isr_response(c->od, ev); /* KAFKA_STORAGE_ERROR */
        break;
    case GR_EV_TOPIC_DELETION_STOP_REPLICA_RESPONSE:
        if (is_active(c)) rc = gr_td_process_stop_replica_response(c->td, ev);
        break;
    case GR_EV_CONTROLLED_SHUTDOWN:
        if (!is_active(c)) gr_ctrl_cs_fail(ev, GR_KERR_NOT_CONTROLLER);
        else rc = gr_ctrl_cs_complete(&c->sm, ev);
        break;
    case GR_EV_UNCLEAN_LEADER_ELECTION_ENABLE:
        if (atomic_load(&c->dyn_unclean_default) >= 0)
            c->sm.unclean_default = atomic_load(&c->dyn_unclean_default) == 1;
        if (is_active(c) && c->sm.unclean_default) rc = gr_psm_trigger_online(&c->sm, NULL);
        break;
    case GR_EV_TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE:
        if (is_active(c) && ev->topic) rc = gr_psm_trigger_online(&c->sm, ev->topic);
        break;
    case GR_EV_UPDATE_METADATA_RESPONSE:
        if (is_active(c)) gr_ctrl_process_update_metadata_response(&c->sm, ev);
        if (is_active(c)) rc = gr_td_process_update_metadata_response(c->td, ev); /* deletions */
        break;
    default:
        /* UpdateFeatures (no such API here: docs/ARCHITECTURE.md) and Mock (tests) are never
         * put on a controller's queue. */
        CWARN(c, "Event %s is not handled by the controller", name);
        break;
    }
    if (rc == 0 && is_active(c) && may_change_isr(ev->type)) rc = gr_reassign_maybe_complete(&c->sm, c->em);
    if (rc == GR_ECONTROLLER_MOVED) {
        CINFO(c, "Controller moved to another broker when processing %s.", name);
        int rc2 = maybe_resign(c);
        if (rc2 != 0) CERROR(c, "Error while checking the controller after %s: %s", name, gr_kzk_strerror(rc2));
    } else if (rc != 0) {
        CERROR(c, "Error processing event %s: %s", name, gr_kzk_strerror(rc));
    }
    update_metrics(c);
    maybe_trim(c, ev);
}

/* Preemption (Kafka's processor.preempt -> event.preempt): runs on the clear_and_put caller. */
static void preempt(void *arg, struct gr_ctrl_event *ev) {
    (void)arg;
    if (ev->preempt) ev->preempt(ev);
}

/* ======================================================================================
 * Lifecycle
 * ====================================================================================== */

struct gr_controller *gr_controller_new(const struct gr_controller_config *cfg) {
    struct gr_controller *c = gr_calloc(1, sizeof *c);
    c->cfg = *cfg;
    c->cfg.broker_info = NULL;
    if (cfg->broker_info) gr_kzk_broker_copy(&c->broker_info, cfg->broker_info);
    c->broker_info.id = cfg->broker_id;
    c->kzk = cfg->kzk;
    /* the stamps carry topic ids; only this controller's writes call the lookup (gregord frees
     * the kzk before the controller) */
    gr_kzk_set_stamp_id_lookup(c->kzk, gr_ctrl_topic_stamp_id, &c->ctx);
    c->watches = cfg->watches;
    c->sender = cfg->sender ? cfg->sender : &gr_ctrl_sender_null;
    c->sender_ctx = cfg->sender_ctx;
    atomic_store(&c->active_id, -1);
    atomic_store(&c->broker_epoch, cfg->broker_epoch);
    atomic_store(&c->epoch, 0);
    gr_ctrl_ctx_init(&c->ctx);
    gr_ctrl_ctx_init(&c->standby);
    c->standby_term = -1;
    c->standby_isr_cv = -1;
    c->sm.controller_id = cfg->broker_id;
    c->sm.ctx = &c->ctx;
    c->sm.kzk = cfg->kzk;
    c->sm.sender = c->sender;
    c->sm.sender_ctx = c->sender_ctx;
    c->sm.metrics = cfg->metrics;
    c->sm.inter_broker_listener = gr_ctrl_channel_listener_name(cfg->broker_config);
    c->sm.unclean_default = cfg->broker_config ? cfg->broker_config->unclean_leader_election_enable : false;
    struct gr_ibp_features ibp; /* inter.broker.protocol.version (Kafka's defaults without a config) */
    gr_ibp_features(cfg->broker_config ? cfg->broker_config->inter_broker_protocol_version : NULL, &ibp);
    c->sm.leader_and_isr_version = ibp.leader_and_isr_version;
    c->sm.update_metadata_version = ibp.update_metadata_version;
    c->sm.stop_replica_version = ibp.stop_replica_version;
    atomic_init(&c->dyn_unclean_default, -1);
    gr_ctrl_sm_init(&c->sm);
    c->td = gr_td_new(&c->sm, c->watches, cfg->delete_topic_enable);
    c->td_hooks = gr_td_flow_hooks(c->td);
    c->sm.hooks = (struct gr_ctrl_flow_hooks){.arg = c,
                                              .brokers_started = hook_brokers_started,
                                              .brokers_failed = hook_brokers_failed,
                                              .replicas_offline_for_deletion = hook_replicas_offline_for_deletion};
    c->od = gr_od_new(&c->sm, c->td);
    struct gr_ctrl_event_processor proc = {process, preempt, c};
    c->em = gr_ctrl_events_new(cfg->broker_id, &proc, cfg->clock, cfg->metrics);
    register_metrics(c);
    return c;
}

int gr_controller_startup(struct gr_controller *c) {
    if (c->started) return 0;
    c->started = true;
    gr_zk_watches_register_session(c->watches, SESSION_HANDLER_NAME, on_session, c);
    put_event(c, GR_EV_STARTUP);
    if (!c->cfg.no_thread) return gr_ctrl_events_start(c->em);
    return 0;
}

void gr_controller_shutdown(struct gr_controller *c) {
    if (c->shut_down) return;
    c->shut_down = true;
    gr_zk_watches_unregister_session(c->watches, SESSION_HANDLER_NAME);
    gr_zk_watches_unregister_node(c->watches, CONTROLLER_PATH);
    gr_ctrl_events_close(c->em);
    c->standby_gen++; /* a tick already fired is stale now */
    if (c->standby_timer) {
        gr_clock_cancel(c->cfg.clock, c->standby_timer);
        c->standby_timer = 0;
    }
    cancel_candidacy(c);
    bool was_active = is_active(c);
    int32_t zkv = c->ctx.epoch_zk_version;
    atomic_store(&c->active_id, -1);
    on_controller_resignation(c);
    if (was_active) {
        int rc = gr_kzk_delete_controller_guarded(c->kzk, zkv);
        if (rc == 0) CINFO(c, "Deleted /controller on shutdown");
        else if (rc == GR_ECONTROLLER_MOVED) CINFO(c, "Controller already moved on shutdown");
        else CWARN(c, "Cannot delete /controller on shutdown: %s", gr_kzk_strerror(rc));
    }
    update_metrics(c);
}

void gr_controller_free(struct gr_controller *c) {
    if (!c) return;
    gr_controller_shutdown(c);
    unregister_metrics(c);
    gr_ctrl_events_free(c->em);
    gr_ctrl_sm_release(&c->sm);
    gr_td_free(c->td);
    gr_od_free(c->od);
    gr_ctrl_ctx_release(&c->ctx);
    gr_ctrl_ctx_release(&c->standby);
    gr_kzk_broker_release(&c->broker_info);
    free(c);
}

bool gr_controller_is_active(struct gr_controller *c) { return is_active(c); }
int32_t gr_controller_active_id(struct gr_controller *c) { return atomic_load(&c->active_id); }
int64_t gr_controller_broker_epoch(struct gr_controller *c) { return atomic_load(&c->broker_epoch); }
int32_t gr_controller_epoch(struct gr_controller *c) { return atomic_load(&c->epoch); }
struct gr_ctrl_events *gr_controller_events(struct gr_controller *c) { return c->em; }
struct gr_ctrl_context *gr_controller_context(struct gr_controller *c) { return &c->ctx; }

struct gr_clock *gr_controller_real_clock_new(void) { return gr_clock_real_new(gr_ctrl_events_put, gr_ctrl_event_free); }

/* ---- dynamic config changes (requests.h) ---- */

void gr_ctrl_topic_unclean_leader_election_enabled(struct gr_controller *c, const char *topic) {
    if (!c || !topic || !gr_controller_is_active(c)) return;
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE);
    ev->topic = gr_strdup(topic);
    gr_ctrl_events_put(c->em, ev);
}

void gr_ctrl_set_default_unclean_leader_election(struct gr_controller *c, bool enable) {
    if (!c) return;
    int old = atomic_exchange(&c->dyn_unclean_default, enable ? 1 : 0);
    if (old == (enable ? 1 : 0)) return;
    gr_ctrl_events_put(c->em, gr_ctrl_event_new(GR_EV_UNCLEAN_LEADER_ELECTION_ENABLE));
}
