/* Log manager: partition logs under log.dirs, checkpoints, one background thread (see
 * log_manager.h). */
#include "storage/log_manager.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "storage/checkpoint.h"
#include "storage/log_cleaner.h"
#include "storage/log_config.h"
#include "storage/producer_state.h"
#include "storage/fd_cache.h"

#define LOGGER "kafka.log.LogManager"
#define NBUCKETS0 4096 /* initial map size; doubles past 2 logs per bucket */

struct lm_dir {
    char *path;
    int nlogs;
    struct gr_offset_checkpoint_entry *rp; /* recovery points read at start-up */
    size_t nrp;
    struct gr_offset_checkpoint_entry *hw; /* high watermarks read at start-up */
    size_t nhw;
    struct gr_offset_checkpoint_entry *ls; /* log start offsets read at start-up */
    size_t nls;
    struct gr_offset_checkpoint_entry *cl; /* cleaner checkpoints read at start-up */
    size_t ncl;
    atomic_bool offline; /* the I/O error handler said the dir went offline: no more work here */
};

#define MAX_CLEANER_THREADS 64

/* A topic name shared by the entries of that topic created one after another (a LeaderAndIsr
 * names a topic's partitions together): one copy per topic instead of one per partition (memory
 * per partition, issue 14). Entries hold a reference each; the manager one on `last_name`. */
struct lm_name {
    atomic_int refs;
    char s[];
};

static struct lm_name *lm_name_of(const char *topic) {
    return (struct lm_name *)(void *)((char *)topic - offsetof(struct lm_name, s));
}

static void name_unref(const char *topic) {
    if (topic && atomic_fetch_sub(&lm_name_of(topic)->refs, 1) == 1) free(lm_name_of(topic));
}

struct gr_plog_manager {
    const struct gr_config *cfg;
    int32_t broker_id;
    int ndirs;
    struct lm_dir dirs[GR_MAX_LOG_DIRS];
    pthread_mutex_t lock;          /* map, dirs[].nlogs */
    pthread_mutex_t ckpt_lock;     /* serialises checkpoint writers */
    struct gr_lm_log **buckets;
    size_t nbuckets;
    int count;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t tlock;
    pthread_cond_t tcond;
    bool stopping;
    pthread_t cleaners[MAX_CLEANER_THREADS];
    int ncleaners;
    pthread_mutex_t name_lock; /* last_name */
    char *last_name;           /* lm_name string of the last entry made (a reference) */
    /* The checkpoint files may still name logs that are gone (deleted since the last full
     * write, or left over from before a restart): a log created at such a path must not take
     * their values after a crash, so its creation first rewrites them (write_checkpoints). */
    atomic_bool ckpt_stale;
    atomic_bool cleaner_ckpt_due; /* a truncation lowered a cleaner checkpoint: write the file */
    pthread_mutex_t io_lock; /* io_error, io_error_ctx */
    gr_plog_manager_io_error_fn io_error;
    void *io_error_ctx;
    /* start-up only (the opening thread): the settings of the topics with a log on disk, read
     * before any log is loaded (Kafka's topicConfigs in LogManager.apply); sorted by name */
    char **boot_topics;
    struct gr_lm_topic_config *boot_cfg;
    int nboot;
};

/* Which checkpoint files write_checkpoints writes. */
enum { CK_RECOVERY = 1, CK_HW = 2, CK_LOG_START = 4, CK_CLEANER = 8, CK_ALL = 15 };
static int write_checkpoints(struct gr_plog_manager *lm, int which);

/* A reference to topic's shared name (see struct lm_name). */
static char *name_ref(struct gr_plog_manager *lm, const char *topic) {
    pthread_mutex_lock(&lm->name_lock);
    char *name = lm->last_name;
    if (!name || strcmp(name, topic) != 0) {
        size_t len = strlen(topic);
        struct lm_name *n = gr_malloc(sizeof *n + len + 1);
        atomic_init(&n->refs, 1); /* the manager's */
        memcpy(n->s, topic, len + 1);
        name_unref(lm->last_name);
        lm->last_name = name = n->s;
    }
    atomic_fetch_add(&lm_name_of(name)->refs, 1);
    pthread_mutex_unlock(&lm->name_lock);
    return name;
}

static size_t hash_tp(const struct gr_plog_manager *lm, const char *topic, int32_t partition) {
    uint64_t h = 1469598103934665603ULL;
    for (const char *s = topic; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    h = (h ^ (uint32_t)partition) * 1099511628211ULL;
    return (size_t)((h ^ (h >> 29)) & (lm->nbuckets - 1));
}

/* server.properties' log settings (the layers below the dynamic ones), through the one
 * resolution of storage/log_config.h. */
static void static_log_config(const struct gr_config *cfg, struct gr_log_config *out) {
    struct gr_cfg_layers layers = {.static_cfg = cfg};
    gr_log_config_resolve(&layers, out);
}

void gr_plog_manager_default_config(const struct gr_plog_manager *lm, struct gr_plog_config *out) {
    struct gr_log_config r;
    static_log_config(lm->cfg, &r);
    *out = r.lc;
}

/* ---- entries ---- */

static struct gr_lm_log *find_locked(struct gr_plog_manager *lm, const char *topic, int32_t partition) {
    for (struct gr_lm_log *l = lm->buckets[hash_tp(lm, topic, partition)]; l; l = l->next)
        if (l->partition == partition && strcmp(l->topic, topic) == 0) return l;
    return NULL;
}

/* Doubles the map (lock held). */
static void grow_locked(struct gr_plog_manager *lm) {
    size_t old_n = lm->nbuckets;
    struct gr_lm_log **old = lm->buckets;
    lm->nbuckets = old_n * 2;
    lm->buckets = gr_calloc(lm->nbuckets, sizeof *lm->buckets);
    for (size_t b = 0; b < old_n; b++)
        for (struct gr_lm_log *l = old[b], *next; l; l = next) {
            next = l->next;
            size_t nb = hash_tp(lm, l->topic, l->partition);
            l->next = lm->buckets[nb];
            lm->buckets[nb] = l;
        }
    free(old);
}

static void insert_locked(struct gr_plog_manager *lm, struct gr_lm_log *l) {
    if ((size_t)lm->count >= 2 * lm->nbuckets) grow_locked(lm);
    size_t b = hash_tp(lm, l->topic, l->partition);
    l->next = lm->buckets[b];
    lm->buckets[b] = l;
    lm->count++;
    lm->dirs[l->dir_idx].nlogs++;
}

static void unlink_locked(struct gr_plog_manager *lm, struct gr_lm_log *l) {
    struct gr_lm_log **pp = &lm->buckets[hash_tp(lm, l->topic, l->partition)];
    while (*pp && *pp != l) pp = &(*pp)->next;
    if (*pp) {
        *pp = l->next;
        lm->count--;
        lm->dirs[l->dir_idx].nlogs--;
    }
    l->removed = true;
    l->next = NULL;
}

static void lower_to(_Atomic int64_t *v, int64_t to) {
    int64_t cur = atomic_load(v);
    while (cur > to && !atomic_compare_exchange_weak(v, &cur, to)) {
    }
}

/* The log's truncation hook (gr_plog_set_truncation_hook, under the log's mutex): Kafka's
 * LogCleanerManager.maybeTruncateCheckpoint from LogManager.truncateTo / truncateFullyAndStartAt.
 * A follower that truncates and grows back must not count the new records below its old
 * checkpoint as cleaned (old values would survive, tombstones go early). Data below new_end is
 * unchanged, so the checkpoint is lowered to new_end (Kafka: to the new active segment's base,
 * a coarser bound); a pass running meanwhile stores at most cleaner_floor when it ends. */
static void log_truncated(void *ctx, int64_t new_end) {
    struct gr_lm_log *l = ctx;
    lower_to(&l->cleaner_floor, new_end);
    int64_t before = atomic_load(&l->cleaner_checkpoint);
    lower_to(&l->cleaner_checkpoint, new_end);
    if (before > new_end) atomic_store(&l->mgr->cleaner_ckpt_due, true);
}

static struct gr_lm_log *entry_new(struct gr_plog_manager *lm, const char *topic, int32_t partition,
                                   struct gr_plog *log, int dir_idx, int64_t hw, const struct gr_config *cfg) {
    struct gr_lm_log *l = gr_calloc(1, sizeof *l);
    l->topic = name_ref(lm, topic);
    l->partition = partition;
    l->log = log;
    l->dir_idx = dir_idx;
    int64_t start = gr_plog_start_offset(log), end = gr_plog_end_offset(log);
    if (hw < start) hw = start;
    if (hw > end) hw = end;
    atomic_init(&l->hw, hw);
    struct gr_log_config r;
    static_log_config(cfg, &r);
    atomic_init(&l->retention_ms, r.retention_ms);
    atomic_init(&l->retention_bytes, r.retention_bytes);
    atomic_init(&l->cleaner_checkpoint, 0);
    atomic_init(&l->cleaner_floor, INT64_MAX);
    l->mgr = lm;
    gr_plog_set_truncation_hook(log, log_truncated, l);
    atomic_init(&l->cleaning, false);
    atomic_init(&l->abort_cleaning, false);
    atomic_init(&l->uncleanable, false);
    atomic_init(&l->clean_retry_ms, 0);
    atomic_init(&l->refs, 1); /* the map's reference */
    return l;
}

static void entry_destroy(struct gr_lm_log *l) {
    if (l->delete_on_release) {
        int rc = gr_plog_delete(l->log);
        if (rc < 0)
            gr_warn(LOGGER, "cannot delete the log of %s-%d: %s", l->topic, l->partition, gr_strerror(rc));
        else
            gr_info(LOGGER, "Deleted log for partition %s-%d", l->topic, l->partition);
    } else {
        gr_plog_flush(l->log);
        gr_plog_close(l->log);
    }
    name_unref(l->topic);
    free(l);
}

void gr_plog_manager_release(struct gr_plog_manager *lm, struct gr_lm_log *l) {
    (void)lm;
    if (l && atomic_fetch_sub(&l->refs, 1) == 1) entry_destroy(l);
}

struct gr_lm_log *gr_plog_manager_acquire(struct gr_plog_manager *lm, const char *topic, int32_t partition) {
    pthread_mutex_lock(&lm->lock);
    struct gr_lm_log *l = find_locked(lm, topic, partition);
    if (l) atomic_fetch_add(&l->refs, 1);
    pthread_mutex_unlock(&lm->lock);
    return l;
}

static char *partition_dir(const char *dir, const char *topic, int32_t partition) {
    return gr_asprintf("%s/%s-%d", dir, topic, partition);
}

int gr_plog_manager_get_or_create(struct gr_plog_manager *lm, const char *topic, int32_t partition,
                                 const struct gr_plog_config *cfg, struct gr_lm_log **out) {
    *out = NULL;
    pthread_mutex_lock(&lm->lock);
    struct gr_lm_log *l = find_locked(lm, topic, partition);
    if (l) {
        atomic_fetch_add(&l->refs, 1);
        pthread_mutex_unlock(&lm->lock);
        *out = l;
        return 0;
    }
    /* Creating under the lock keeps two creators of one partition from racing; creation of an
     * empty log is quick. */
    int best = 0;
    for (int i = 1; i < lm->ndirs; i++)
        if (lm->dirs[i].nlogs < lm->dirs[best].nlogs) best = i;
    struct gr_plog_config dflt;
    if (!cfg) {
        gr_plog_manager_default_config(lm, &dflt);
        cfg = &dflt;
    }
    char *path = partition_dir(lm->dirs[best].path, topic, partition);
    struct gr_plog *log = NULL;
    int rc = gr_plog_open_dir(path, cfg, 0, &log);
    if (rc < 0) {
        pthread_mutex_unlock(&lm->lock);
        gr_error(LOGGER, "cannot create log '%s': %s", path, gr_strerror(rc));
        free(path);
        return rc;
    }
    gr_info(LOGGER, "Created log for partition %s-%d in %s", topic, partition, path);
    free(path);
    l = entry_new(lm, topic, partition, log, best, 0, lm->cfg);
    insert_locked(lm, l);
    atomic_fetch_add(&l->refs, 1);
    pthread_mutex_unlock(&lm->lock);
    /* Kafka's asyncDelete checkpoints at once: a partition deleted and created again (or deleted
     * before a restart) must not come back after a crash with the old log's recovery point, high
     * watermark, log start offset or cleaner offset (a log start offset taken from the old log
     * would hide the new log's first records). Done once before the first creation that may meet
     * such an entry, not per deletion (deleting n partitions would write the files n times). */
    if (atomic_load(&lm->ckpt_stale)) write_checkpoints(lm, CK_ALL);
    *out = l;
    return 0;
}

/* Aborts the cleaner's pass on l and keeps cleaners off it: the cleaning claim is taken for good
 * once a running pass has ended (within ~50 ms). Before l's directory is renamed. */
static void keep_cleaner_off(struct gr_lm_log *l) {
    atomic_store(&l->abort_cleaning, true);
    bool idle = false;
    while (!atomic_compare_exchange_strong(&l->cleaning, &idle, true)) {
        idle = false;
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int gr_plog_manager_remove(struct gr_plog_manager *lm, const char *topic, int32_t partition, bool delete_dir) {
    pthread_mutex_lock(&lm->lock);
    struct gr_lm_log *l = find_locked(lm, topic, partition);
    if (!l) {
        pthread_mutex_unlock(&lm->lock);
        return -ENOENT;
    }
    unlink_locked(lm, l);
    l->delete_on_release = delete_dir;
    pthread_mutex_unlock(&lm->lock);
    if (delete_dir) atomic_store(&lm->ckpt_stale, true); /* after the unlink: see write_checkpoints */
    if (delete_dir) {
        /* Kafka's LogManager.asyncDelete: keep the cleaner off the log, then rename the directory
         * at once, so that a partition of the same name created before the last reference goes (a
         * retention sweep, a metrics scrape, a fetch still holding it) gets a new directory, never
         * this one. */
        keep_cleaner_off(l);
        int rc = gr_plog_rename_for_delete(l->log);
        if (rc < 0)
            gr_warn(LOGGER, "%s-%d: deleting its directory in place when the log is released: %s", l->topic,
                    l->partition, gr_strerror(rc));
    }
    gr_plog_manager_release(lm, l); /* the map's reference */
    return 0;
}

/* Test hook: GREGOR_TEST_STRAY_CRASH=moved kills the process right after a stray log's directory
 * was renamed aside (before the manager lets go of it and before the new log exists). */
static void stray_crash_point(const char *step) {
    const char *e = getenv("GREGOR_TEST_STRAY_CRASH");
    if (e && strcmp(e, step) == 0) {
        gr_warn(LOGGER, "GREGOR_TEST_STRAY_CRASH=%s: killing the process", step);
        raise(SIGKILL);
    }
}

int gr_plog_manager_move_aside(struct gr_plog_manager *lm, const char *topic, int32_t partition, char *path_out,
                               size_t cap) {
    struct gr_lm_log *l = gr_plog_manager_acquire(lm, topic, partition);
    if (!l) return -ENOENT;
    /* as gr_plog_manager_remove: the cleaner leaves the log before its path changes */
    keep_cleaner_off(l);
    int rc = gr_plog_rename_stray(l->log, path_out, cap);
    if (rc < 0) { /* the log stays where and as it was; the dir failed (Kafka: IOException -> offline) */
        char what[300];
        snprintf(what, sizeof what, "moving the stray log of %s-%d aside", topic, partition);
        gr_plog_manager_report_io_error(lm, l->dir_idx, rc, what);
        atomic_store(&l->cleaning, false);
        atomic_store(&l->abort_cleaning, false);
        gr_plog_manager_release(lm, l);
        return rc;
    }
    stray_crash_point("moved");
    pthread_mutex_lock(&lm->lock);
    bool mine = !l->removed;
    if (mine) unlink_locked(lm, l);
    pthread_mutex_unlock(&lm->lock);
    /* a new log of the name must not take this one's checkpointed offsets after a crash (as a
     * deletion: see gr_plog_manager_get_or_create) */
    atomic_store(&lm->ckpt_stale, true);
    if (mine) gr_plog_manager_release(lm, l); /* the map's reference: flushed and closed when the last goes */
    gr_plog_manager_release(lm, l);
    return 0;
}

static bool is_stray_name(const char *name);

int gr_plog_manager_count_stray(struct gr_plog_manager *lm, int dir_idx) {
    DIR *dh = opendir(lm->dirs[dir_idx].path);
    if (!dh) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(dh)) != NULL)
        if (de->d_name[0] != '.' && is_stray_name(de->d_name)) n++;
    closedir(dh);
    return n;
}

static int rm_cb(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb;
    (void)type;
    (void)ftw;
    return remove(path) < 0 ? -1 : 0;
}

static int rm_rf(const char *path) { return nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS) < 0 ? -errno : 0; }

int gr_plog_manager_delete_orphan(struct gr_plog_manager *lm, const char *topic, int32_t partition) {
    int rc = -ENOENT;
    for (int i = 0; i < lm->ndirs; i++) {
        char *path = partition_dir(lm->dirs[i].path, topic, partition);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            rc = rm_rf(path);
            if (rc == 0) gr_info(LOGGER, "Deleted leftover log directory %s", path);
        }
        free(path);
    }
    return rc;
}

int gr_plog_manager_count(struct gr_plog_manager *lm) {
    pthread_mutex_lock(&lm->lock);
    int n = lm->count;
    pthread_mutex_unlock(&lm->lock);
    return n;
}

/* Snapshot of all entries with a reference each; caller releases each and frees the array. */
static struct gr_lm_log **snapshot(struct gr_plog_manager *lm, int *n) {
    pthread_mutex_lock(&lm->lock);
    struct gr_lm_log **arr = gr_malloc((size_t)(lm->count + 1) * sizeof *arr);
    int k = 0;
    for (size_t b = 0; b < lm->nbuckets; b++)
        for (struct gr_lm_log *l = lm->buckets[b]; l; l = l->next) {
            atomic_fetch_add(&l->refs, 1);
            arr[k++] = l;
        }
    pthread_mutex_unlock(&lm->lock);
    *n = k;
    return arr;
}

void gr_plog_manager_foreach(struct gr_plog_manager *lm, void (*fn)(void *ctx, struct gr_lm_log *l), void *ctx) {
    int n;
    struct gr_lm_log **arr = snapshot(lm, &n);
    for (int i = 0; i < n; i++) {
        fn(ctx, arr[i]);
        gr_plog_manager_release(lm, arr[i]);
    }
    free(arr);
}

/* ---- I/O errors (Kafka's LogDirFailureChannel) ---- */

void gr_plog_manager_set_io_error_handler(struct gr_plog_manager *lm, gr_plog_manager_io_error_fn fn, void *ctx) {
    pthread_mutex_lock(&lm->io_lock);
    lm->io_error = fn;
    lm->io_error_ctx = ctx;
    pthread_mutex_unlock(&lm->io_lock);
}

bool gr_plog_manager_report_io_error(struct gr_plog_manager *lm, int dir_idx, int err, const char *what) {
    if (dir_idx < 0 || dir_idx >= lm->ndirs) return false;
    pthread_mutex_lock(&lm->io_lock);
    gr_plog_manager_io_error_fn fn = lm->io_error;
    void *ctx = lm->io_error_ctx;
    pthread_mutex_unlock(&lm->io_lock);
    bool off = fn && fn(ctx, dir_idx, err, what);
    if (off && !atomic_exchange(&lm->dirs[dir_idx].offline, true))
        gr_error(LOGGER, "Log dir %s is offline: no more flushes, retention, checkpoints or cleaning there",
                 lm->dirs[dir_idx].path);
    return off;
}

static bool dir_offline(struct gr_plog_manager *lm, int dir_idx) {
    return dir_idx >= 0 && dir_idx < lm->ndirs && atomic_load(&lm->dirs[dir_idx].offline);
}

/* Reports rc < 0 of an operation on log l ("flushing" -> "flushing t-0"). */
static void log_io_error(struct gr_plog_manager *lm, struct gr_lm_log *l, int rc, const char *op) {
    char what[256];
    snprintf(what, sizeof what, "%s %s-%d", op, l->topic, l->partition);
    gr_error(LOGGER, "Error while %s: %s", what, gr_strerror(rc));
    gr_plog_manager_report_io_error(lm, l->dir_idx, rc, what);
}

/* ---- checkpoints ---- */

static const char *const ck_names[4] = {GR_RECOVERY_POINT_CHECKPOINT, GR_REPLICATION_CHECKPOINT,
                                        GR_LOG_START_OFFSET_CHECKPOINT, GR_CLEANER_OFFSET_CHECKPOINT};

static void (*ckpt_test_hook)(void *);
static void *ckpt_test_hook_arg;

void gr_plog_manager_set_checkpoint_test_hook(void (*fn)(void *arg), void *arg) {
    ckpt_test_hook = fn;
    ckpt_test_hook_arg = arg;
}

static int write_checkpoints(struct gr_plog_manager *lm, int which) {
    /* Cleared before the snapshot: a log unlinked after it sets the flag again after this. */
    bool was_stale = which == CK_ALL && atomic_exchange(&lm->ckpt_stale, false);
    int n;
    struct gr_lm_log **arr = snapshot(lm, &n);
    if (ckpt_test_hook) ckpt_test_hook(ckpt_test_hook_arg);
    int first_err = 0;
    pthread_mutex_lock(&lm->ckpt_lock);
    /* A log unlinked since the snapshot (deleted or moved aside) is left out: this writer may
     * come after the one that the next creation of its name ran (gr_plog_manager_get_or_create),
     * and its entry would give the new log the old one's offsets after a crash. Checked under
     * ckpt_lock: an unlink after the check is followed by that creation's write, after ours. */
    bool *gone = gr_calloc((size_t)(n + 1), sizeof *gone);
    pthread_mutex_lock(&lm->lock);
    for (int i = 0; i < n; i++) gone[i] = arr[i]->removed;
    pthread_mutex_unlock(&lm->lock);
    struct gr_offset_checkpoint_entry *e = gr_malloc((size_t)(n + 1) * sizeof *e);
    int failed_dir[GR_MAX_LOG_DIRS], failed_err[GR_MAX_LOG_DIRS], nfailed = 0;
    for (int d = 0; d < lm->ndirs; d++) {
        if (dir_offline(lm, d)) continue; /* Kafka drops an offline dir's checkpoints */
        for (int pass = 0; pass < 4; pass++) {
            if (!(which & (1 << pass))) continue;
            size_t k = 0;
            for (int i = 0; i < n; i++) {
                if (arr[i]->dir_idx != d || gone[i]) continue;
                e[k].topic = arr[i]->topic;
                e[k].partition = arr[i]->partition;
                e[k].offset = pass == 0   ? gr_plog_recovery_point(arr[i]->log)
                              : pass == 1 ? atomic_load(&arr[i]->hw)
                              : pass == 2 ? gr_plog_log_start_checkpoint_value(arr[i]->log)
                                          : atomic_load(&arr[i]->cleaner_checkpoint);
                /* log start: only logs whose start is inside a segment; cleaner: cleaned logs */
                if (e[k].offset > 0 || (e[k].offset == 0 && pass < 2)) k++;
            }
            char *path = gr_asprintf("%s/%s", lm->dirs[d].path, ck_names[pass]);
            int rc = gr_offset_checkpoint_write(path, e, k);
            if (rc < 0 && first_err == 0) first_err = rc;
            if (rc < 0 && (nfailed == 0 || failed_dir[nfailed - 1] != d)) {
                gr_error(LOGGER, "Error while writing %s: %s", path, gr_strerror(rc));
                failed_dir[nfailed] = d;
                failed_err[nfailed++] = rc;
            }
            free(path);
        }
    }
    free(e);
    free(gone);
    pthread_mutex_unlock(&lm->ckpt_lock);
    if (first_err && was_stale) atomic_store(&lm->ckpt_stale, true);
    for (int f = 0; f < nfailed; f++) /* outside ckpt_lock: the handler may take other locks */
        gr_plog_manager_report_io_error(lm, failed_dir[f], failed_err[f], "writing a checkpoint file");
    for (int i = 0; i < n; i++) gr_plog_manager_release(lm, arr[i]);
    free(arr);
    return first_err;
}

int gr_plog_manager_checkpoint(struct gr_plog_manager *lm) { return write_checkpoints(lm, CK_ALL); }

/* ---- background thread ---- */

/* Kafka's flushDirtyLogs: a failed flush takes the dir offline (Log.flush through
 * maybeHandleIOException). */
static void task_flush(void *ctx, struct gr_lm_log *l) {
    struct gr_plog_manager *lm = ctx;
    if (dir_offline(lm, l->dir_idx)) return;
    int rc = gr_plog_flush_if_due(l->log);
    if (rc < 0) log_io_error(lm, l, rc, "flushing");
}

struct retention_ctx {
    struct gr_plog_manager *lm;
    int64_t now;
};

static void task_retention(void *ctx, struct gr_lm_log *l) {
    struct retention_ctx *rc_ = ctx;
    int64_t now = rc_->now;
    if (dir_offline(rc_->lm, l->dir_idx)) return;
    int rc = gr_plog_apply_retention(l->log, atomic_load(&l->hw), atomic_load(&l->retention_ms),
                                     atomic_load(&l->retention_bytes), now);
    if (rc > 0) {
        gr_info(LOGGER, "Deleted %d segment(s) of %s-%d by retention; log start offset is now %lld", rc,
                l->topic, l->partition, (long long)gr_plog_start_offset(l->log));
        /* The HW can never be below the log start offset. */
        int64_t start = gr_plog_start_offset(l->log), hw = atomic_load(&l->hw);
        while (hw < start && !atomic_compare_exchange_weak(&l->hw, &hw, start)) {
        }
    } else if (rc < 0) {
        log_io_error(rc_->lm, l, rc, "deleting segments by retention of");
    }
}

struct expire_ctx {
    int64_t now;
    int removed;
};

static void task_expire_producers(void *ctx, struct gr_lm_log *l) {
    struct expire_ctx *e = ctx;
    e->removed += gr_plog_remove_expired_producers(l->log, e->now);
}

int gr_plog_manager_expire_producers(struct gr_plog_manager *lm, int64_t now_ms) {
    struct expire_ctx e = {now_ms, 0};
    gr_plog_manager_foreach(lm, task_expire_producers, &e);
    return e.removed;
}

static int64_t next_due(int64_t last, int64_t interval) {
    if (interval <= 0 || interval >= INT64_MAX / 4) return INT64_MAX;
    return last + interval;
}

static void *lm_thread(void *arg) {
    struct gr_plog_manager *lm = arg;
    pthread_setname_np(pthread_self(), "log-manager");
    const struct gr_config *c = lm->cfg;
    int64_t now = gr_mono_ms();
    int64_t t_flush = now, t_ret = now, t_rp = now, t_hw = now, t_ls = now, t_pid = now;
    pthread_mutex_lock(&lm->tlock);
    while (!lm->stopping) {
        now = gr_mono_ms();
        int64_t due[6] = {next_due(t_flush, c->log_flush_scheduler_interval_ms),
                          next_due(t_ret, c->log_retention_check_interval_ms),
                          next_due(t_rp, c->log_flush_offset_checkpoint_interval_ms),
                          next_due(t_hw, c->replica_high_watermark_checkpoint_interval_ms),
                          next_due(t_ls, c->log_flush_start_offset_checkpoint_interval_ms),
                          next_due(t_pid, GR_PSTATE_EXPIRATION_CHECK_INTERVAL_MS)};
        int64_t first = INT64_MAX;
        for (int i = 0; i < 6; i++) first = GR_MIN(first, due[i]);
        if (first > now && !atomic_load(&lm->cleaner_ckpt_due)) {
            int64_t wait = GR_MIN(first - now, (int64_t)1000);
            struct timespec ts = gr_timespec_after_ms(CLOCK_MONOTONIC, wait);
            pthread_cond_timedwait(&lm->tcond, &lm->tlock, &ts);
            continue;
        }
        pthread_mutex_unlock(&lm->tlock);
        if (due[0] <= now) {
            gr_plog_manager_foreach(lm, task_flush, lm);
            t_flush = now;
        }
        if (due[1] <= now) {
            struct retention_ctx rctx = {lm, gr_wall_ms()};
            gr_plog_manager_foreach(lm, task_retention, &rctx);
            t_ret = now;
        }
        if (due[5] <= now) {
            gr_plog_manager_expire_producers(lm, gr_wall_ms());
            t_pid = now;
        }
        bool rp = due[2] <= now, hw = due[3] <= now, ls = due[4] <= now;
        if (rp || hw || ls) write_checkpoints(lm, (rp ? CK_RECOVERY : 0) | (hw ? CK_HW : 0) | (ls ? CK_LOG_START : 0));
        if (atomic_exchange(&lm->cleaner_ckpt_due, false)) write_checkpoints(lm, CK_CLEANER);
        if (rp) t_rp = now;
        if (hw) t_hw = now;
        if (ls) t_ls = now;
        pthread_mutex_lock(&lm->tlock);
    }
    pthread_mutex_unlock(&lm->tlock);
    return NULL;
}

/* ---- log cleaner threads (Kafka's CleanerThread + LogCleanerManager.grabFilthiestCompactedLog) ---- */

/* Claims the eligible compacted log with the highest dirty ratio (a reference is held), or NULL. */
static struct gr_lm_log *grab_filthiest(struct gr_plog_manager *lm, int64_t now) {
    int n;
    struct gr_lm_log **arr = snapshot(lm, &n);
    struct gr_lm_log *best = NULL;
    double best_ratio = -1;
    for (int i = 0; i < n; i++) {
        struct gr_lm_log *l = arr[i];
        /* KIP-346: a log whose pass failed is left alone, so the others still get cleaned */
        if (atomic_load(&l->cleaning) || atomic_load(&l->uncleanable) || dir_offline(lm, l->dir_idx) ||
            now < atomic_load(&l->clean_retry_ms))
            continue;
        struct gr_cleanable c;
        gr_plog_cleanable(l->log, atomic_load(&l->cleaner_checkpoint), now, &c);
        if (!c.compact || c.cleanable_bytes == 0) continue;
        if (!(c.dirty_ratio > c.min_ratio || c.must_clean)) continue;
        double score = c.must_clean ? 2.0 : c.dirty_ratio;
        if (score > best_ratio) {
            best_ratio = score;
            best = l;
        }
    }
    if (best) {
        bool expected = false;
        if (atomic_compare_exchange_strong(&best->cleaning, &expected, true)) atomic_fetch_add(&best->refs, 1);
        else best = NULL;
    }
    for (int i = 0; i < n; i++) gr_plog_manager_release(lm, arr[i]);
    free(arr);
    return best;
}

int gr_plog_manager_clean_once(struct gr_plog_manager *lm) {
    const struct gr_config *c = lm->cfg;
    int64_t now = gr_wall_ms();
    struct gr_lm_log *l = grab_filthiest(lm, now);
    if (!l) return 0;
    int threads = c->log_cleaner_threads > 0 ? c->log_cleaner_threads : 1;
    struct gr_cleaner_params p = {c->log_cleaner_dedupe_buffer_size / threads, c->log_cleaner_io_buffer_load_factor,
                                  c->log_cleaner_io_max_bytes_per_second, now, &l->abort_cleaning,
                                  /* Kafka's LogCleaner: log.cleaner.io.buffer.size is shared by
                                   * the threads, half of each one's for reading */
                                  GR_MAX((int64_t)c->log_cleaner_io_buffer_size / threads / 2, 4096)};
    if (p.dedupe_buffer_bytes > (2LL << 30)) p.dedupe_buffer_bytes = 2LL << 30;
    struct gr_clean_stats st;
    atomic_store(&l->cleaner_floor, INT64_MAX);
    int64_t ck = atomic_load(&l->cleaner_checkpoint);
    int rc = gr_plog_clean(l->log, ck, &p, &st);
    if (rc == 0) {
        /* unless a truncation moved it meanwhile (log_truncated): then it stays lowered */
        int64_t end = GR_MIN(st.end_offset, atomic_load(&l->cleaner_floor));
        atomic_compare_exchange_strong(&l->cleaner_checkpoint, &ck, end);
    } else if (rc == GR_ECORRUPT) {
        /* Kafka's CleanerThread: a CorruptRecordException (anything but an IOException) marks the
         * partition uncleanable (LogCleanerManager.markPartitionUncleanable), so one bad log
         * cannot starve the others. */
        atomic_store(&l->uncleanable, true);
        gr_error(LOGGER, "Unexpected error while cleaning %s-%d: %s. Marking the partition as uncleanable", l->topic,
                 l->partition, gr_strerror(rc));
    } else if (rc != -ECANCELED) {
        /* An I/O error of the dir takes it offline (LogDirFailureChannel). Any other errno
         * (EMFILE, ENFILE, ENOMEM...) says nothing about the log's data: it is not marked
         * uncleanable but left alone for log.cleaner.backoff.ms, the other logs first. */
        if (!gr_plog_manager_report_io_error(lm, l->dir_idx, rc, "cleaning a log")) {
            int64_t backoff = c->log_cleaner_backoff_ms > 0 ? c->log_cleaner_backoff_ms : 15000;
            atomic_store(&l->clean_retry_ms, gr_wall_ms() + backoff);
            gr_error(LOGGER, "Error while cleaning %s-%d: %s; retrying in %" PRId64 " ms", l->topic, l->partition,
                     gr_strerror(rc), backoff);
        }
    }
    atomic_store(&l->cleaning, false);
    gr_plog_manager_release(lm, l);
    if (rc == 0) write_checkpoints(lm, CK_CLEANER);
    return rc < 0 ? rc : 1;
}

static void *cleaner_thread(void *arg) {
    struct gr_plog_manager *lm = arg;
    pthread_setname_np(pthread_self(), "log-cleaner");
    pthread_mutex_lock(&lm->tlock);
    while (!lm->stopping) {
        pthread_mutex_unlock(&lm->tlock);
        int r = gr_plog_manager_clean_once(lm);
        pthread_mutex_lock(&lm->tlock);
        if (r == 1 || lm->stopping) continue;
        int64_t wait = lm->cfg->log_cleaner_backoff_ms;
        struct timespec ts = gr_timespec_after_ms(CLOCK_MONOTONIC, wait);
        pthread_cond_timedwait(&lm->tcond, &lm->tlock, &ts);
    }
    pthread_mutex_unlock(&lm->tlock);
    return NULL;
}

/* ---- start-up ---- */

static bool has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* "<topic>-<partition>.<id>-stray" (a partition directory's name ends in a digit, never so) */
static bool is_stray_name(const char *name) { return has_suffix(name, GR_PLOG_STRAY_SUFFIX); }

static int mkdir_p(const char *path) {
    char *tmp = gr_strdup(path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) < 0 && errno != EEXIST) {
                int rc = -errno;
                free(tmp);
                return rc;
            }
            *p = '/';
        }
    }
    int rc = (mkdir(tmp, 0755) < 0 && errno != EEXIST) ? -errno : 0;
    free(tmp);
    return rc;
}

static void boot_config(struct gr_plog_manager *lm, const char *topic, struct gr_lm_topic_config *out);

static int load_dir(struct gr_plog_manager *lm, int d) {
    struct lm_dir *dir = &lm->dirs[d];
    char *p = gr_asprintf("%s/%s", dir->path, GR_RECOVERY_POINT_CHECKPOINT);
    int rc = gr_offset_checkpoint_read(p, &dir->rp, &dir->nrp);
    if (rc < 0) {
        gr_warn(LOGGER, "ignoring unreadable %s (%s): every log in %s will be fully recovered", p,
                gr_strerror(rc), dir->path);
        dir->rp = NULL;
        dir->nrp = 0;
    }
    free(p);
    p = gr_asprintf("%s/%s", dir->path, GR_REPLICATION_CHECKPOINT);
    rc = gr_offset_checkpoint_read(p, &dir->hw, &dir->nhw);
    if (rc < 0) {
        gr_warn(LOGGER, "ignoring unreadable %s (%s): high watermarks start at the log start offsets", p,
                gr_strerror(rc));
        dir->hw = NULL;
        dir->nhw = 0;
    }
    free(p);
    p = gr_asprintf("%s/%s", dir->path, GR_CLEANER_OFFSET_CHECKPOINT);
    if (gr_offset_checkpoint_read(p, &dir->cl, &dir->ncl) < 0) {
        gr_warn(LOGGER, "ignoring unreadable %s: compacted logs will be cleaned from their start", p);
        dir->cl = NULL;
        dir->ncl = 0;
    }
    free(p);
    p = gr_asprintf("%s/%s", dir->path, GR_LOG_START_OFFSET_CHECKPOINT);
    rc = gr_offset_checkpoint_read(p, &dir->ls, &dir->nls);
    if (rc < 0) {
        gr_warn(LOGGER, "ignoring unreadable %s (%s): log start offsets start at the first segments", p,
                gr_strerror(rc));
        dir->ls = NULL;
        dir->nls = 0;
    }
    free(p);

    gr_offset_checkpoint_sort(dir->rp, dir->nrp);
    gr_offset_checkpoint_sort(dir->hw, dir->nhw);
    gr_offset_checkpoint_sort(dir->cl, dir->ncl);
    gr_offset_checkpoint_sort(dir->ls, dir->nls);
    DIR *dh = opendir(dir->path);
    if (!dh) return -errno;
    struct dirent *de;
    int opened = 0;
    rc = 0;
    while ((de = readdir(dh)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char *full = gr_asprintf("%s/%s", dir->path, de->d_name);
        struct stat st;
        bool is_dir = de->d_type == DT_DIR || (de->d_type == DT_UNKNOWN && stat(full, &st) == 0 && S_ISDIR(st.st_mode));
        if (!is_dir) {
            free(full);
            continue;
        }
        if (has_suffix(de->d_name, "-delete")) {
            gr_info(LOGGER, "Removing %s left by an interrupted deletion", full);
            rm_rf(full);
            free(full);
            continue;
        }
        if (is_stray_name(de->d_name)) { /* kept for the operator, never loaded (see the header) */
            gr_warn(LOGGER, "Stray log %s (another topic id than its partition's) is kept and not loaded", full);
            free(full);
            continue;
        }
        char topic[256];
        int32_t part;
        if (has_suffix(de->d_name, "-future") ||
            gr_plog_parse_dir_name(de->d_name, topic, sizeof topic, &part) < 0) {
            gr_warn(LOGGER, "ignoring directory %s: not <topic>-<partition>", full);
            free(full);
            continue;
        }
        pthread_mutex_lock(&lm->lock);
        bool dup = find_locked(lm, topic, part) != NULL;
        pthread_mutex_unlock(&lm->lock);
        if (dup) {
            gr_error(LOGGER, "duplicate log directory for %s-%d: %s (another log dir holds it too)", topic, part,
                     full);
            free(full);
            rc = -EEXIST;
            break;
        }
        int64_t rp = gr_offset_checkpoint_find_sorted(dir->rp, dir->nrp, topic, part, 0);
        int64_t hw = gr_offset_checkpoint_find_sorted(dir->hw, dir->nhw, topic, part, 0);
        struct gr_lm_topic_config tcfg;
        boot_config(lm, topic, &tcfg);
        struct gr_plog *log = NULL;
        int orc = gr_plog_open_dir(full, &tcfg.lc, rp, &log);
        if (orc < 0) {
            gr_error(LOGGER, "cannot open log %s: %s", full, gr_strerror(orc));
            free(full);
            rc = orc;
            break;
        }
        int64_t ls = gr_offset_checkpoint_find_sorted(dir->ls, dir->nls, topic, part, -1);
        int64_t cl = gr_offset_checkpoint_find_sorted(dir->cl, dir->ncl, topic, part, 0);
        if (ls > 0 && gr_plog_maybe_increment_log_start_offset(log, ls) < 0)
            gr_warn(LOGGER, "ignoring log start offset %lld of %s-%d beyond its log end", (long long)ls, topic, part);
        struct gr_lm_log *l = entry_new(lm, topic, part, log, d, hw, lm->cfg);
        atomic_store(&l->retention_ms, tcfg.retention_ms);
        atomic_store(&l->retention_bytes, tcfg.retention_bytes);
        atomic_store(&l->cleaner_checkpoint, cl);
        pthread_mutex_lock(&lm->lock);
        insert_locked(lm, l);
        pthread_mutex_unlock(&lm->lock);
        opened++;
        free(full);
    }
    closedir(dh);
    if (rc == 0) gr_info(LOGGER, "Loaded %d log(s) from %s", opened, dir->path);
    return rc;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Kafka's LogManager.apply: topicConfigs (zkClient.getLogConfigs) are read before loadLogs, so
 * every log is recovered and loaded with its topic's settings, and nothing (retention, cleaning)
 * ever acts on a log with the broker defaults. The names come from a listing of every log dir
 * (the partition directories load_dir will open). */
static int read_boot_configs(struct gr_plog_manager *lm, gr_plog_manager_topic_configs_fn fn, void *ctx) {
    int n = 0, cap = 0;
    char **names = NULL;
    for (int d = 0; d < lm->ndirs; d++) {
        DIR *dh = opendir(lm->dirs[d].path);
        if (!dh) continue; /* load_dir reports it */
        struct dirent *de;
        while ((de = readdir(dh)) != NULL) {
            char topic[256];
            int32_t part;
            if (de->d_name[0] == '.' || has_suffix(de->d_name, "-delete") || has_suffix(de->d_name, "-future") ||
                is_stray_name(de->d_name) ||
                gr_plog_parse_dir_name(de->d_name, topic, sizeof topic, &part) < 0)
                continue; /* files parse as no partition directory, or load_dir skips them */
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                names = gr_realloc(names, (size_t)cap * sizeof *names);
            }
            names[n++] = gr_strdup(topic);
        }
        closedir(dh);
    }
    if (n > 1) qsort(names, (size_t)n, sizeof *names, cmp_name);
    int u = 0;
    for (int i = 0; i < n; i++) {
        if (u > 0 && strcmp(names[u - 1], names[i]) == 0) free(names[i]);
        else names[u++] = names[i];
    }
    lm->boot_topics = names;
    lm->nboot = u;
    lm->boot_cfg = gr_calloc((size_t)GR_MAX(u, 1), sizeof *lm->boot_cfg);
    int rc = u > 0 ? fn(ctx, lm, (const char *const *)names, u, lm->boot_cfg) : 0;
    if (rc == 0 && u > 0) gr_info(LOGGER, "Read the configs of %d topic(s) with logs on disk", u);
    return rc;
}

static void free_boot_configs(struct gr_plog_manager *lm) {
    for (int i = 0; i < lm->nboot; i++) free(lm->boot_topics[i]);
    free(lm->boot_topics);
    free(lm->boot_cfg);
    lm->boot_topics = NULL;
    lm->boot_cfg = NULL;
    lm->nboot = 0;
}

/* The settings a log of `topic` is loaded with: its topic's, read before loading, else
 * server.properties' (no hook, or a directory that appeared meanwhile). */
static void boot_config(struct gr_plog_manager *lm, const char *topic, struct gr_lm_topic_config *out) {
    const char *key = topic;
    char **hit = lm->nboot ? bsearch(&key, lm->boot_topics, (size_t)lm->nboot, sizeof *lm->boot_topics, cmp_name)
                           : NULL;
    if (hit) {
        *out = lm->boot_cfg[hit - lm->boot_topics];
        return;
    }
    struct gr_log_config r;
    static_log_config(lm->cfg, &r);
    out->lc = r.lc;
    out->retention_ms = r.retention_ms;
    out->retention_bytes = r.retention_bytes;
}

int gr_plog_manager_open(const struct gr_config *cfg, int32_t broker_id, const char *cluster_id,
                        struct gr_plog_manager **out) {
    return gr_plog_manager_open_with_configs(cfg, broker_id, cluster_id, NULL, NULL, out);
}

int gr_plog_manager_open_with_configs(const struct gr_config *cfg, int32_t broker_id, const char *cluster_id,
                                      gr_plog_manager_topic_configs_fn fn, void *fn_ctx, struct gr_plog_manager **out) {
    *out = NULL;
    struct gr_plog_manager *lm = gr_calloc(1, sizeof *lm);
    lm->cfg = cfg;
    lm->broker_id = broker_id;
    lm->nbuckets = NBUCKETS0;
    lm->buckets = gr_calloc(lm->nbuckets, sizeof *lm->buckets);
    atomic_init(&lm->ckpt_stale, true); /* the files may name logs deleted before a restart */
    pthread_mutex_init(&lm->lock, NULL);
    pthread_mutex_init(&lm->ckpt_lock, NULL);
    pthread_mutex_init(&lm->name_lock, NULL);
    pthread_mutex_init(&lm->tlock, NULL);
    pthread_mutex_init(&lm->io_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&lm->tcond, &ca);
    pthread_condattr_destroy(&ca);
    /* Process-wide bound on open active-segment files (0 = automatic), before any log opens. */
    gr_storage_set_max_open_files(cfg->gregor_max_open_log_files);
    int rc = 0;
    for (int i = 0; i < cfg->num_log_dirs && i < GR_MAX_LOG_DIRS; i++) {
        lm->dirs[i].path = gr_strdup(cfg->log_dirs[i]);
        lm->ndirs++;
        rc = mkdir_p(cfg->log_dirs[i]);
        if (rc < 0) {
            gr_error(LOGGER, "cannot create log dir '%s': %s", cfg->log_dirs[i], gr_strerror(rc));
            goto fail;
        }
        rc = gr_meta_properties_check(cfg->log_dirs[i], broker_id, cluster_id ? cluster_id : "");
        if (rc < 0) {
            gr_error(LOGGER, "refusing to start: %s/meta.properties does not belong to broker.id=%d cluster.id=%s (%s)",
                     cfg->log_dirs[i], broker_id, cluster_id && *cluster_id ? cluster_id : "(unknown)",
                     rc == GR_EMETA_BROKER_ID    ? "broker.id mismatch"
                     : rc == GR_EMETA_CLUSTER_ID ? "cluster.id mismatch"
                                                 : gr_strerror(rc));
            goto fail;
        }
    }
    if (lm->ndirs == 0) {
        gr_error(LOGGER, "no log.dirs configured");
        rc = GR_ECONFIG;
        goto fail;
    }
    if (fn && (rc = read_boot_configs(lm, fn, fn_ctx)) < 0) {
        gr_error(LOGGER, "cannot read the configs of the topics whose logs are on disk: %s", gr_strerror(rc));
        free_boot_configs(lm);
        goto fail;
    }
    for (int i = 0; i < lm->ndirs; i++) {
        rc = load_dir(lm, i);
        if (rc < 0) break;
    }
    free_boot_configs(lm);
    if (rc < 0) goto fail;
    rc = pthread_create(&lm->thread, NULL, lm_thread, lm);
    if (rc != 0) {
        rc = -rc;
        goto fail;
    }
    lm->thread_started = true;
    if (cfg->log_cleaner_enable)
        for (int i = 0; i < cfg->log_cleaner_threads && i < MAX_CLEANER_THREADS; i++) {
            if (pthread_create(&lm->cleaners[i], NULL, cleaner_thread, lm) != 0) break;
            lm->ncleaners++;
        }
    *out = lm;
    return 0;
fail:
    gr_plog_manager_close(lm);
    return rc;
}

void gr_plog_manager_close(struct gr_plog_manager *lm) {
    if (!lm) return;
    if (lm->thread_started) {
        pthread_mutex_lock(&lm->tlock);
        lm->stopping = true;
        pthread_cond_broadcast(&lm->tcond);
        pthread_mutex_unlock(&lm->tlock);
        pthread_join(lm->thread, NULL);
        for (int i = 0; i < lm->ncleaners; i++) pthread_join(lm->cleaners[i], NULL);
        /* Flush everything so that the recovery points reach the log end offsets. */
        int n;
        struct gr_lm_log **arr = snapshot(lm, &n);
        for (int i = 0; i < n; i++) {
            gr_plog_flush(arr[i]->log);
            gr_plog_manager_release(lm, arr[i]);
        }
        free(arr);
        write_checkpoints(lm, CK_ALL);
    }
    for (size_t b = 0; b < lm->nbuckets; b++) {
        struct gr_lm_log *l = lm->buckets[b];
        while (l) {
            struct gr_lm_log *next = l->next;
            l->removed = true;
            gr_plog_manager_release(lm, l);
            l = next;
        }
        lm->buckets[b] = NULL;
    }
    for (int i = 0; i < lm->ndirs; i++) {
        free(lm->dirs[i].path);
        gr_offset_checkpoint_free(lm->dirs[i].rp, lm->dirs[i].nrp);
        gr_offset_checkpoint_free(lm->dirs[i].hw, lm->dirs[i].nhw);
        gr_offset_checkpoint_free(lm->dirs[i].ls, lm->dirs[i].nls);
        gr_offset_checkpoint_free(lm->dirs[i].cl, lm->dirs[i].ncl);
    }
    pthread_cond_destroy(&lm->tcond);
    pthread_mutex_destroy(&lm->tlock);
    pthread_mutex_destroy(&lm->io_lock);
    pthread_mutex_destroy(&lm->ckpt_lock);
    name_unref(lm->last_name);
    pthread_mutex_destroy(&lm->name_lock);
    pthread_mutex_destroy(&lm->lock);
    free(lm->buckets);
    free(lm);
}

/* ---- metrics ---- */

void gr_plog_manager_metrics_collector(void *arg, struct gr_prom_out *out) {
    struct gr_plog_manager *lm = arg;
    int n;
    struct gr_lm_log **arr = snapshot(lm, &n);
    int64_t now = gr_wall_ms();
    for (int d = 0; d < lm->ndirs; d++) {
        int64_t count = 0, bytes = 0;
        for (int i = 0; i < n; i++) {
            if (arr[i]->dir_idx != d || !atomic_load(&arr[i]->uncleanable)) continue;
            struct gr_cleanable c;
            gr_plog_cleanable(arr[i]->log, atomic_load(&arr[i]->cleaner_checkpoint), now, &c);
            count++;
            bytes += c.cleanable_bytes;
        }
        char name[PATH_MAX + 128];
        snprintf(name, sizeof name,
                 "kafka.log:type=LogCleanerManager,name=uncleanable-partitions-count,logDirectory=%s",
                 lm->dirs[d].path);
        gr_prom_gauge(out, name, (double)count);
        snprintf(name, sizeof name, "kafka.log:type=LogCleanerManager,name=uncleanable-bytes,logDirectory=%s",
                 lm->dirs[d].path);
        gr_prom_gauge(out, name, (double)bytes);
        snprintf(name, sizeof name, "gregor.log:type=LogManager,name=StrayLogs,logDirectory=%s", lm->dirs[d].path);
        gr_prom_gauge(out, name, (double)gr_plog_manager_count_stray(lm, d));
    }
    for (int i = 0; i < n; i++) gr_plog_manager_release(lm, arr[i]);
    free(arr);
}
