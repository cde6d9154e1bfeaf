/* Log directory failure on the broker: see log_dir_failure.h. */
#include "replication/log_dir_failure.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "broker/broker.h"
#include "storage/log_manager.h"
#include "replication/replica_internal.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "zk/kzk.h"

#define LOGGER "kafka.server.LogDirFailureChannel"
#define POLL_MS 500

struct gr_ldf {
    struct gr_broker *b;
    const struct gr_config *cfg;
    struct gr_kzk *kzk;
    int n_dirs;
    atomic_int offline[GR_MAX_LOG_DIRS];   /* 1 once failed */
    atomic_int notified[GR_MAX_LOG_DIRS];  /* 1 once the notification was written */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    struct gr_ldf *next; /* registry */
};

/* Process-wide registry broker -> module (one broker per process in production). */
static pthread_rwlock_t reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct gr_ldf *reg_head;

struct gr_ldf *gr_ldf_of(struct gr_broker *b) {
    if (!b) return NULL;
    pthread_rwlock_rdlock(&reg_lock);
    struct gr_ldf *l = reg_head;
    while (l && l->b != b) l = l->next;
    pthread_rwlock_unlock(&reg_lock);
    return l;
}

bool gr_ldf_is_dir_error(int err) {
    switch (-err) {
    case EIO:
    case ENOSPC:
    case EROFS:
    case EDQUOT:
    case ENXIO:
    case EFBIG:
    case ENOTDIR:
    case ENODEV: return true;
    default: return false;
    }
}

bool gr_ldf_dir_offline(struct gr_ldf *l, int dir_idx) {
    return l && dir_idx >= 0 && dir_idx < l->n_dirs && atomic_load(&l->offline[dir_idx]);
}

int gr_ldf_offline_count(struct gr_ldf *l) {
    int n = 0;
    for (int i = 0; l && i < l->n_dirs; i++) n += atomic_load(&l->offline[i]) ? 1 : 0;
    return n;
}

int16_t gr_ldf_check(struct gr_broker *b, int dir_idx) {
    return gr_ldf_dir_offline(gr_ldf_of(b), dir_idx) ? GR_KERR_KAFKA_STORAGE_ERROR : GR_KERR_NONE;
}

int16_t gr_ldf_check_partition(struct gr_broker *b, const char *topic, int32_t partition) {
    struct gr_ldf *l = gr_ldf_of(b);
    if (!l || gr_ldf_offline_count(l) == 0 || !b->replica_manager || !topic) return GR_KERR_NONE;
    struct gr_replica_manager *rm = b->replica_manager;
    struct gr_lm_log *lml = gr_plog_manager_acquire(rm->lm, topic, partition);
    if (!lml) return GR_KERR_NONE;
    bool off = gr_ldf_dir_offline(l, lml->dir_idx);
    gr_plog_manager_release(rm->lm, lml);
    return off ? GR_KERR_KAFKA_STORAGE_ERROR : GR_KERR_NONE;
}

static void mark_offline(struct gr_ldf *l, int dir_idx, int err, const char *what) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&l->offline[dir_idx], &expected, 1)) return;
    gr_error(LOGGER, "Error while %s in dir %s: %s; the log dir goes offline", what ? what : "accessing a log",
             l->cfg->log_dirs[dir_idx], gr_strerror(err));
    pthread_mutex_lock(&l->mu);
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

bool gr_ldf_report(struct gr_broker *b, int dir_idx, int err, const char *what) {
    struct gr_ldf *l = gr_ldf_of(b);
    if (!l || dir_idx < 0 || dir_idx >= l->n_dirs) return false;
    if (gr_ldf_is_dir_error(err)) mark_offline(l, dir_idx, err, what);
    return atomic_load(&l->offline[dir_idx]) != 0;
}

/* Thread: the test trigger, then notifications for newly offline dirs; halts when all failed. */
static void *ldf_main(void *arg) {
    struct gr_ldf *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        pthread_mutex_unlock(&l->mu);
        for (int i = 0; i < l->n_dirs; i++) {
            if (atomic_load(&l->offline[i])) continue;
            char *p = gr_asprintf("%s/%s", l->cfg->log_dirs[i], GR_LDF_INJECT_FILE);
            if (access(p, F_OK) == 0) mark_offline(l, i, -EIO, "checking the test trigger " GR_LDF_INJECT_FILE);
            free(p);
        }
        for (int i = 0; i < l->n_dirs; i++) {
            if (!atomic_load(&l->offline[i]) || atomic_load(&l->notified[i])) continue;
            /* Kafka halts first when nothing is left (the other brokers see the registration go) */
            if (gr_ldf_offline_count(l) == l->n_dirs) {
                gr_error(LOGGER, "Shutdown broker because all log dirs in %s%s have failed", l->cfg->log_dirs[0],
                         l->n_dirs > 1 ? ",..." : "");
                fflush(NULL);
                _exit(1);
            }
            int rc = l->kzk ? gr_kzk_create_log_dir_event_notification(l->kzk, l->b->broker_id) : 0;
            if (rc == 0) {
                atomic_store(&l->notified[i], 1);
                gr_info(LOGGER, "Partitions in %s are offline; log dir event notification written for broker %d",
                        l->cfg->log_dirs[i], l->b->broker_id);
            } else {
                gr_warn(LOGGER, "Cannot write the log dir event notification: %s (retrying)", gr_kzk_strerror(rc));
            }
        }
        pthread_mutex_lock(&l->mu);
        if (l->stop) break;
        struct timespec ts = gr_timespec_after_ms(CLOCK_REALTIME, POLL_MS);
        pthread_cond_timedwait(&l->cv, &l->mu, &ts);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

struct gr_ldf *gr_ldf_start(struct gr_broker *b, const struct gr_config *cfg, struct gr_kzk *kzk) {
    struct gr_ldf *l = gr_calloc(1, sizeof *l);
    l->b = b;
    l->cfg = cfg;
    l->kzk = kzk;
    l->n_dirs = cfg->num_log_dirs < GR_MAX_LOG_DIRS ? cfg->num_log_dirs : GR_MAX_LOG_DIRS;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    if (pthread_create(&l->thread, NULL, ldf_main, l) != 0) {
        gr_error(LOGGER, "cannot start the log dir failure thread");
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
        free(l);
        return NULL;
    }
    pthread_rwlock_wrlock(&reg_lock);
    l->next = reg_head;
    reg_head = l;
    pthread_rwlock_unlock(&reg_lock);
    return l;
}

void gr_ldf_stop(struct gr_ldf *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    /* Callers that looked the module up must be done with it: stop runs in the broker's
     * shut-down after the network server and the replica manager stopped. */
    pthread_rwlock_wrlock(&reg_lock);
    struct gr_ldf **pp = &reg_head;
    while (*pp && *pp != l) pp = &(*pp)->next;
    if (*pp == l) *pp = l->next;
    pthread_rwlock_unlock(&reg_lock);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
