/* Per-logger levels (Kafka's Log4jController, KIP-412): see log_controller.h. */
#include "common/log_controller.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define PTR_SLOTS 4096 /* power of two; > GR_LOG_MAX_LOGGERS x the pointers one name may have */

struct logger {
    char name[256];
    _Atomic int level; /* enum gr_log_level, -1: root's */
    char level_name[8];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* guards adding loggers and level names */
static struct logger loggers[GR_LOG_MAX_LOGGERS];
static _Atomic int nloggers;
static _Atomic int lowest = -1; /* lowest level set on any logger */
static char root_name[8];       /* the name root was set to ("" = never set: INFO/DEBUG as configured) */
/* name pointer -> logger index + 1 (0: empty); keys published after values */
static _Atomic(const char *) ptr_key[PTR_SLOTS];
static _Atomic int ptr_val[PTR_SLOTS];

static const char *const kafka_levels[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"};
static const int level_of[] = {GR_LOG_DEBUG, GR_LOG_DEBUG, GR_LOG_INFO, GR_LOG_WARN, GR_LOG_ERROR, GR_LOG_ERROR};

static int level_index(const char *s) {
    for (int i = 0; s && i < 6; i++)
        if (strcmp(s, kafka_levels[i]) == 0) return i;
    return -1;
}

bool gr_log_valid_level(const char *level) { return level_index(level) >= 0; }

/* Index of the logger called name, or -1 (mu held or loggers only read). */
static int find_name(const char *name) {
    int n = atomic_load(&nloggers);
    for (int i = 0; i < n; i++)
        if (strcmp(loggers[i].name, name) == 0) return i;
    return -1;
}

static size_t slot_of(const char *p) { return (size_t)(((uintptr_t)p >> 3) * 0x9E3779B97F4A7C15ull) & (PTR_SLOTS - 1); }

int gr_log_logger_level(const char *logger) {
    size_t s = slot_of(logger);
    for (size_t k = 0; k < PTR_SLOTS; k++) {
        size_t i = (s + k) & (PTR_SLOTS - 1);
        const char *key = atomic_load_explicit(&ptr_key[i], memory_order_acquire);
        if (key == logger) return atomic_load_explicit(&loggers[atomic_load(&ptr_val[i]) - 1].level, memory_order_relaxed);
        if (!key) break;
    }
    /* first time this pointer logs: find or add the name, remember the pointer */
    pthread_mutex_lock(&mu);
    int idx = find_name(logger);
    if (idx < 0 && atomic_load(&nloggers) < GR_LOG_MAX_LOGGERS && strlen(logger) < sizeof loggers[0].name &&
        strcmp(logger, GR_LOG_ROOT_LOGGER) != 0) {
        idx = atomic_load(&nloggers);
        snprintf(loggers[idx].name, sizeof loggers[idx].name, "%s", logger);
        atomic_store(&loggers[idx].level, -1);
        atomic_store(&nloggers, idx + 1);
    }
    if (idx >= 0)
        for (size_t k = 0; k < PTR_SLOTS; k++) {
            size_t i = (s + k) & (PTR_SLOTS - 1);
            const char *key = atomic_load(&ptr_key[i]);
            if (key == logger) break;
            if (!key) {
                atomic_store(&ptr_val[i], idx + 1);
                atomic_store_explicit(&ptr_key[i], logger, memory_order_release);
                break;
            }
        }
    int lvl = idx >= 0 ? atomic_load(&loggers[idx].level) : -1;
    pthread_mutex_unlock(&mu);
    return lvl;
}

int gr_log_lowest_override(void) { return atomic_load(&lowest); }

static void recompute_lowest(void) { /* mu held */
    int low = -1, n = atomic_load(&nloggers);
    for (int i = 0; i < n; i++) {
        int l = atomic_load(&loggers[i].level);
        if (l >= 0 && (low < 0 || l < low)) low = l;
    }
    atomic_store(&lowest, low);
}

static const char *root_level_name(void) {
    static const char *const names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    int l = (int)gr_log_level();
    /* the name root was set to while it still is the level in force (TRACE/FATAL map onto it) */
    if (root_name[0] && level_of[level_index(root_name)] == l) return root_name;
    /* a level above ERROR (gr_log_set_level(GR_LOG_ERROR + 1): tests, fuzz targets and the
     * simulation silence the log so) prints nothing, as FATAL does here (log.h) */
    if (l > GR_LOG_ERROR) return "FATAL";
    return names[l < GR_LOG_DEBUG ? GR_LOG_DEBUG : l];
}

int gr_log_loggers(struct gr_log_logger_info *out, int max) {
    pthread_mutex_lock(&mu);
    int n = atomic_load(&nloggers), k = 0;
    char root[8];
    snprintf(root, sizeof root, "%s", root_level_name());
    if (k < max) {
        snprintf(out[k].name, sizeof out[k].name, "%s", GR_LOG_ROOT_LOGGER);
        snprintf(out[k].level, sizeof out[k].level, "%s", root);
    }
    k++;
    for (int i = 0; i < n; i++, k++)
        if (k < max) {
            snprintf(out[k].name, sizeof out[k].name, "%s", loggers[i].name);
            snprintf(out[k].level, sizeof out[k].level, "%s",
                     atomic_load(&loggers[i].level) >= 0 ? loggers[i].level_name : root);
        }
    pthread_mutex_unlock(&mu);
    return k;
}

bool gr_log_logger_exists(const char *name) {
    if (name && strcmp(name, GR_LOG_ROOT_LOGGER) == 0) return true;
    pthread_mutex_lock(&mu);
    bool ok = name && find_name(name) >= 0;
    pthread_mutex_unlock(&mu);
    return ok;
}

int gr_log_set_logger_level(const char *name, const char *level) {
    int li = level_index(level);
    if (li < 0 || !name) return -1;
    pthread_mutex_lock(&mu);
    int rc = 0;
    if (strcmp(name, GR_LOG_ROOT_LOGGER) == 0) {
        snprintf(root_name, sizeof root_name, "%s", kafka_levels[li]);
        gr_log_set_level((enum gr_log_level)level_of[li]);
    } else {
        int i = find_name(name);
        if (i < 0) {
            rc = -1;
        } else {
            snprintf(loggers[i].level_name, sizeof loggers[i].level_name, "%s", kafka_levels[li]);
            atomic_store(&loggers[i].level, level_of[li]);
            recompute_lowest();
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

int gr_log_unset_logger_level(const char *name) {
    if (!name || strcmp(name, GR_LOG_ROOT_LOGGER) == 0) return -1;
    pthread_mutex_lock(&mu);
    int i = find_name(name);
    if (i >= 0) {
        atomic_store(&loggers[i].level, -1);
        recompute_lowest();
    }
    pthread_mutex_unlock(&mu);
    return i >= 0 ? 0 : -1;
}
