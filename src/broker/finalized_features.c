/* The finalized feature cache and its /feature listener: see finalized_features.h. */
#include "broker/finalized_features.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "protocol/arena.h"
#include "zk/kzk.h"

#define LOGGER "kafka.server.FinalizedFeatureCache"
#define FEATURE_PATH "/feature"
/* Re-read now and then too, in case a watch was lost across a session change. */
#define RECHECK_MS 5000

struct gr_finalized_features {
    struct gr_kzk *kzk;
    struct gr_zk_watches *watches;
    pthread_t thread;
    bool has_thread; /* false: made by gr_finalized_features_new, refreshed by its owner */
    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;
    bool dirty, stop;
    int64_t epoch; /* -1: empty */
    int n;
    struct gr_finalized_feature *features; /* owned */
};

static void clear_locked(struct gr_finalized_features *ff) {
    for (int i = 0; i < ff->n; i++) free(ff->features[i].name);
    free(ff->features);
    ff->features = NULL;
    ff->n = 0;
    ff->epoch = -1;
}

static void on_feature_node(void *arg, int type, const char *path) {
    (void)type;
    (void)path;
    struct gr_finalized_features *ff = arg;
    pthread_mutex_lock(&ff->mu);
    ff->dirty = true;
    pthread_cond_signal(&ff->cv);
    pthread_mutex_unlock(&ff->mu);
}

void gr_finalized_features_refresh(struct gr_finalized_features *ff) {
    struct gr_kzk_feature_znode z;
    int32_t version = -1;
    int rc = gr_kzk_get_feature_znode(ff->kzk, true, &z, &version);
    pthread_mutex_lock(&ff->mu);
    if (rc == 0 && z.status == 1) {
        if (version != ff->epoch) {
            clear_locked(ff);
            ff->features = gr_calloc((size_t)z.n_features + 1, sizeof *ff->features);
            for (int i = 0; i < z.n_features; i++) {
                ff->features[i].name = gr_strdup(z.features[i].name);
                ff->features[i].min_version_level = z.features[i].min_version;
                ff->features[i].max_version_level = z.features[i].max_version;
            }
            ff->n = z.n_features;
            ff->epoch = version;
            gr_info(LOGGER, "Updated cache: %d finalized features at epoch %d", z.n_features, version);
        }
    } else if (rc == 0 || rc == GR_KZK_ENONODE || rc == GR_ECORRUPT) {
        if (ff->epoch != -1) gr_info(LOGGER, "Cleared cache: /feature is %s", rc == 0 ? "disabled" : "absent or unreadable");
        clear_locked(ff);
    } else {
        gr_warn(LOGGER, "Cannot read %s: %s; retried later", FEATURE_PATH, gr_kzk_strerror(rc));
    }
    pthread_mutex_unlock(&ff->mu);
    if (rc == 0) gr_kzk_feature_znode_release(&z);
}

static void *listener_main(void *arg) {
    struct gr_finalized_features *ff = arg;
    pthread_mutex_lock(&ff->mu);
    while (!ff->stop) {
        ff->dirty = false;
        pthread_mutex_unlock(&ff->mu);
        gr_finalized_features_refresh(ff);
        pthread_mutex_lock(&ff->mu);
        if (ff->dirty || ff->stop) continue;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += RECHECK_MS / 1000;
        pthread_cond_timedwait(&ff->cv, &ff->mu, &ts);
    }
    pthread_mutex_unlock(&ff->mu);
    return NULL;
}

struct gr_finalized_features *gr_finalized_features_new(struct gr_kzk *kzk, struct gr_zk_watches *watches) {
    struct gr_finalized_features *ff = gr_calloc(1, sizeof *ff);
    ff->kzk = kzk;
    ff->watches = watches;
    ff->epoch = -1;
    ff->dirty = true;
    pthread_mutex_init(&ff->mu, NULL);
    pthread_cond_init(&ff->cv, NULL);
    gr_zk_watches_register_node(watches, FEATURE_PATH, on_feature_node, ff);
    return ff;
}

struct gr_finalized_features *gr_finalized_features_start(struct gr_kzk *kzk, struct gr_zk_watches *watches) {
    struct gr_finalized_features *ff = gr_finalized_features_new(kzk, watches);
    if (pthread_create(&ff->thread, NULL, listener_main, ff) != 0) {
        gr_error(LOGGER, "cannot start the /feature listener thread");
        gr_finalized_features_stop(ff);
        return NULL;
    }
    ff->has_thread = true;
    return ff;
}

void gr_finalized_features_stop(struct gr_finalized_features *ff) {
    if (!ff) return;
    gr_zk_watches_unregister_node(ff->watches, FEATURE_PATH);
    pthread_mutex_lock(&ff->mu);
    ff->stop = true;
    pthread_cond_signal(&ff->cv);
    pthread_mutex_unlock(&ff->mu);
    if (ff->has_thread) pthread_join(ff->thread, NULL);
    clear_locked(ff);
    pthread_mutex_destroy(&ff->mu);
    pthread_cond_destroy(&ff->cv);
    free(ff);
}

void gr_finalized_features_get(struct gr_finalized_features *ff, struct gr_arena *arena, int64_t *epoch, int *n,
                               struct gr_finalized_feature **out) {
    *epoch = -1;
    *n = 0;
    *out = NULL;
    if (!ff) return;
    pthread_mutex_lock(&ff->mu);
    *epoch = ff->epoch;
    *n = ff->n;
    if (ff->n > 0) {
        *out = gr_arena_alloc(arena, sizeof **out * (size_t)ff->n);
        for (int i = 0; i < ff->n; i++) {
            (*out)[i] = ff->features[i];
            (*out)[i].name = gr_arena_strdup(arena, ff->features[i].name);
        }
    }
    pthread_mutex_unlock(&ff->mu);
}
