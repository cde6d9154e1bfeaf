/* Config change notifications for the controller: see config_change_listener.h. */
#include "controller/config_change_listener.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "controller/controller.h"
#include "controller/requests.h"
#include "zk/backend.h"
#include "zk/kzk.h"

#define LOGGER "kafka.common.ZkNodeChangeNotificationListener"
#define CHANGES_PATH "/config/changes"
#define PREFIX "config_change_"
/* Re-read periodically too, in case a watch was lost across a session change. */
#define RECHECK_MS 5000
/* After a pass that could not read or apply a notification: retried after RETRY_MIN_MS,
 * doubling up to RECHECK_MS, until a pass completes. */
#define RETRY_MIN_MS 100
/* Kafka's changeExpirationMs: processed notifications older than this are deleted. */
#define CHANGE_EXPIRATION_MS (15 * 60 * 1000)

struct gr_config_change_listener {
    struct gr_kzk *kzk;
    struct gr_zk_watches *watches;
    struct gr_controller *controller;
    pthread_t thread;
    bool has_thread; /* false: driven by gr_config_change_listener_process (simulation) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool dirty, stop;
    long long last_seq; /* highest processed sequence number, -1 = none */
    int64_t last_purge_ms; /* gr_mono_ms() of the last purge of old notifications */
    gr_config_change_fn hook; /* NULL: the controller-only reaction below */
    void *hook_ctx;
};

static void on_changes_child(void *arg, const char *path) {
    (void)path;
    struct gr_config_change_listener *l = arg;
    pthread_mutex_lock(&l->mu);
    l->dirty = true;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

static long long seq_of(const char *name) {
    if (strncmp(name, PREFIX, strlen(PREFIX)) != 0) return -1;
    char *end;
    long long v = strtoll(name + strlen(PREFIX), &end, 10);
    return *end ? -1 : v;
}

/* TopicConfigHandler's unclean part for one entity path. */
static bool handle_entity(struct gr_config_change_listener *l, const char *entity) {
    if (l->hook) return l->hook(l->hook_ctx, entity);
    const char *slash = strchr(entity, '/');
    if (!slash || !slash[1]) return true;
    char type[32];
    snprintf(type, sizeof type, "%.*s", (int)(slash - entity), entity);
    const char *name = slash + 1;
    if (strcmp(type, "topics") != 0) {
        if (strcmp(type, "brokers") == 0)
            gr_debug(LOGGER, "Dynamic broker config change for %s ignored by the controller", name);
        return true;
    }
    struct gr_kzk_config cfg = {0};
    int rc = gr_kzk_get_entity_config(l->kzk, "topics", name, &cfg);
    if (rc) { /* not applied: handed again on the next pass, unless it does not parse (it would
               * hold every later notification forever) */
        gr_warn(LOGGER, "Cannot read /config/topics/%s: %s", name, gr_kzk_strerror(rc));
        return rc == GR_ECORRUPT;
    }
    const char *v = gr_kzk_config_get(&cfg, "unclean.leader.election.enable");
    bool enable = v && strcasecmp(v, "true") == 0;
    gr_kzk_config_release(&cfg);
    if (!enable || !gr_controller_is_active(l->controller)) return true;
    gr_info(LOGGER, "unclean.leader.election.enable=true for topic %s: triggering online partition state changes", name);
    gr_ctrl_topic_unclean_leader_election_enabled(l->controller, name);
    return true;
}

/* Kafka's purgeObsoleteNotifications: processed notifications older than 15 minutes are deleted.
 * At most once a minute, and only with a thread (a simulation's ZooKeeper has no clock). */
static void purge_obsolete(struct gr_config_change_listener *l, const struct gr_zstrings *names) {
    int64_t now = gr_mono_ms();
    if (!l->has_thread || now - l->last_purge_ms < 60000) return;
    l->last_purge_ms = now;
    for (int i = 0; i < names->count; i++) {
        long long s = seq_of(names->names[i]);
        if (s < 0 || s > l->last_seq) continue;
        char path[256];
        snprintf(path, sizeof path, CHANGES_PATH "/%s", names->names[i]);
        struct gr_zstat st;
        if (gr_zkb_exists(gr_kzk_backend(l->kzk), path, false, &st) != GR_ZOK || st.ctime <= 0 ||
            gr_wall_ms() - st.ctime <= CHANGE_EXPIRATION_MS)
            continue;
        int rc = gr_zkb_delete(gr_kzk_backend(l->kzk), path, GR_ZANY_VERSION);
        if (rc != GR_ZOK && rc != GR_ZNONODE) gr_debug(LOGGER, "Cannot delete %s: %s", path, gr_zrc_name(rc));
    }
}

/* One pass. false: a notification could not be listed, read or applied (retry later). */
static bool process(struct gr_config_change_listener *l) {
    struct gr_zstrings names = {0};
    bool complete = true;
    int rc = gr_kzk_watch_children(l->kzk, CHANGES_PATH, &names);
    if (rc) {
        if (rc != GR_KZK_ENONODE) gr_warn(LOGGER, "Cannot list %s: %s", CHANGES_PATH, gr_kzk_strerror(rc));
        gr_zstrings_free(&names);
        return rc == GR_KZK_ENONODE;
    }
    /* in sequence order */
    for (;;) {
        long long best = -1;
        int bi = -1;
        for (int i = 0; i < names.count; i++) {
            long long s = seq_of(names.names[i]);
            if (s > l->last_seq && (best < 0 || s < best)) {
                best = s;
                bi = i;
            }
        }
        if (bi < 0) break;
        char path[256];
        snprintf(path, sizeof path, CHANGES_PATH "/%s", names.names[bi]);
        char *data = NULL;
        int len = 0;
        struct gr_zstat st;
        int zrc = gr_zkb_get(gr_kzk_backend(l->kzk), path, false, &data, &len, &st);
        if (zrc == GR_ZOK && data) {
            char *entity = NULL;
            bool done = true;
            if (gr_kzk_config_change_decode(data, (size_t)len, &entity) == 0 && entity) done = handle_entity(l, entity);
            else gr_warn(LOGGER, "Ignoring config change notification %s: cannot parse it", path);
            if (!done) gr_warn(LOGGER, "Config change notification %s (%s) not applied; retried later", path, entity);
            free(entity);
            if (!done) {
                free(data);
                complete = false;
                break;
            }
        } else if (zrc != GR_ZOK && zrc != GR_ZNONODE) {
            gr_warn(LOGGER, "Cannot read %s: %s; retried later", path, gr_zrc_name(zrc));
            free(data);
            complete = false;
            break;
        }
        free(data);
        l->last_seq = best;
    }
    purge_obsolete(l, &names);
    gr_zstrings_free(&names);
    return complete;
}

static void *listener_main(void *arg) {
    struct gr_config_change_listener *l = arg;
    int64_t retry_ms = 0; /* 0: the last pass completed */
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        l->dirty = false;
        pthread_mutex_unlock(&l->mu);
        /* an incomplete pass is retried with bounded back-off; a complete one waits for the
         * watch (or the periodic re-check) */
        if (process(l)) retry_ms = 0;
        else retry_ms = retry_ms ? GR_MIN(retry_ms * 2, RECHECK_MS) : RETRY_MIN_MS;
        int64_t wait_ms = retry_ms ? retry_ms : RECHECK_MS;
        pthread_mutex_lock(&l->mu);
        if (l->dirty || l->stop) continue;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = (int64_t)ts.tv_nsec + (wait_ms % 1000) * 1000000;
        ts.tv_sec += (time_t)(wait_ms / 1000 + ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        pthread_cond_timedwait(&l->cv, &l->mu, &ts);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

struct gr_config_change_listener *gr_config_change_listener_new(struct gr_kzk *kzk, struct gr_zk_watches *watches,
                                                                struct gr_controller *controller) {
    return gr_config_change_listener_new_with(kzk, watches, controller, NULL, NULL);
}

struct gr_config_change_listener *gr_config_change_listener_new_with(struct gr_kzk *kzk,
                                                                     struct gr_zk_watches *watches,
                                                                     struct gr_controller *controller,
                                                                     gr_config_change_fn hook, void *hook_ctx) {
    struct gr_config_change_listener *l = gr_calloc(1, sizeof *l);
    l->hook = hook;
    l->hook_ctx = hook_ctx;
    l->kzk = kzk;
    l->watches = watches;
    l->controller = controller;
    l->last_seq = -1;
    l->dirty = true; /* existing notifications are processed first */
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    gr_zk_watches_register_child(watches, CHANGES_PATH, on_changes_child, l);
    return l;
}

bool gr_config_change_listener_dirty(struct gr_config_change_listener *l) {
    pthread_mutex_lock(&l->mu);
    bool d = l->dirty;
    pthread_mutex_unlock(&l->mu);
    return d;
}

bool gr_config_change_listener_process(struct gr_config_change_listener *l) {
    pthread_mutex_lock(&l->mu);
    l->dirty = false;
    pthread_mutex_unlock(&l->mu);
    return process(l);
}

struct gr_config_change_listener *gr_config_change_listener_start(struct gr_kzk *kzk, struct gr_zk_watches *watches,
                                                                  struct gr_controller *controller) {
    return gr_config_change_listener_start_with(kzk, watches, controller, NULL, NULL);
}

struct gr_config_change_listener *gr_config_change_listener_start_with(struct gr_kzk *kzk,
                                                                       struct gr_zk_watches *watches,
                                                                       struct gr_controller *controller,
                                                                       gr_config_change_fn hook, void *hook_ctx) {
    struct gr_config_change_listener *l = gr_config_change_listener_new_with(kzk, watches, controller, hook, hook_ctx);
    if (pthread_create(&l->thread, NULL, listener_main, l) != 0) {
        gr_error(LOGGER, "cannot start the config change listener thread");
        gr_config_change_listener_stop(l);
        return NULL;
    }
    l->has_thread = true;
    return l;
}

void gr_config_change_listener_stop(struct gr_config_change_listener *l) {
    if (!l) return;
    gr_zk_watches_unregister_child(l->watches, CHANGES_PATH);
    if (l->has_thread) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_signal(&l->cv);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
    }
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
