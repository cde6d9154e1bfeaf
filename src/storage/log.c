/* The partition log: segments, recovery, appends, reads, truncation, retention, epochs.
 * Locking: every exported function except open/close/delete holds log->mu throughout. */
#include "storage/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "storage/batch.h"
#include "common/be.h"
#include "storage/compression.h"
#include "storage/epoch_cache.h"
#include "storage/producer_state.h"
#include "storage/recompression.h"
#include "storage/txn_index.h"
#include "storage/log_cleaner.h"
#include "storage/log_internal.h"
#include "storage/partition_metadata.h"
#include "storage/log_validator.h"
#include "storage/segment.h"

#define LOGGER "storage.log"

void gr_plog_config_defaults(struct gr_plog_config *cfg) {
    cfg->segment_bytes = 1 << 30;
    cfg->roll_ms = 7LL * 24 * 3600 * 1000;
    cfg->roll_jitter_ms = 0;
    cfg->index_interval_bytes = 4096;
    cfg->max_message_bytes = 1048588;
    cfg->flush_messages = INT64_MAX;
    cfg->flush_ms = INT64_MAX;
    cfg->producer_id_expiration_ms = GR_PSTATE_DEFAULT_EXPIRATION_MS;
    cfg->index_max_bytes = 10 << 20;
    cfg->cleanup_delete = true;
    cfg->cleanup_compact = false;
    cfg->min_cleanable_dirty_ratio = 0.5;
    cfg->delete_retention_ms = 86400000;
    cfg->min_compaction_lag_ms = 0;
    cfg->max_compaction_lag_ms = INT64_MAX;
    cfg->file_delete_delay_ms = 60000;
    cfg->log_append_time = false;
    cfg->timestamp_difference_max_ms = INT64_MAX;
    cfg->compression_type = GR_COMPRESSION_PRODUCER;
    cfg->downconversion_enable = true;
}

int gr_plog_parse_cleanup_policy(const char *v, struct gr_plog_config *cfg) {
    bool del = false, compact = false;
    const char *p = v;
    while (*p) {
        size_t n = strcspn(p, ",");
        const char *q = p;
        size_t m = n;
        while (m && *q == ' ') q++, m--;
        while (m && q[m - 1] == ' ') m--;
        if (m == 6 && strncmp(q, "delete", 6) == 0) del = true;
        else if (m == 7 && strncmp(q, "compact", 7) == 0) compact = true;
        else return -EINVAL;
        p += n;
        if (*p == ',') p++;
    }
    if (!del && !compact) return -EINVAL;
    cfg->cleanup_delete = del;
    cfg->cleanup_compact = compact;
    return 0;
}

int gr_plog_parse_timestamp_type(const char *v, struct gr_plog_config *cfg) {
    if (strcmp(v, "CreateTime") == 0) cfg->log_append_time = false;
    else if (strcmp(v, "LogAppendTime") == 0) cfg->log_append_time = true;
    else return -EINVAL;
    return 0;
}

int gr_plog_parse_compression_type(const char *v, struct gr_plog_config *cfg) {
    int t = gr_compression_type_parse(v);
    if (t != GR_COMPRESSION_PRODUCER && t < 0) return -EINVAL;
    cfg->compression_type = t;
    return 0;
}

static int check_config(const struct gr_plog_config *cfg) {
    if (cfg->segment_bytes < GR_BATCH_HEADER_SIZE || cfg->roll_ms <= 0 || cfg->roll_jitter_ms < 0 || cfg->index_interval_bytes < 0 ||
        cfg->max_message_bytes < 0 || cfg->flush_messages <= 0 || cfg->flush_ms < 0 ||
        cfg->producer_id_expiration_ms <= 0 || cfg->index_max_bytes < 12 ||
        !(cfg->min_cleanable_dirty_ratio >= 0 && cfg->min_cleanable_dirty_ratio <= 1) || cfg->delete_retention_ms < 0 ||
        cfg->min_compaction_lag_ms < 0 || cfg->max_compaction_lag_ms < 1 || cfg->file_delete_delay_ms < 0 ||
        cfg->timestamp_difference_max_ms < 0 || cfg->compression_type < GR_COMPRESSION_PRODUCER ||
        cfg->compression_type > GR_CODEC_ZSTD)
        return GR_ECONFIG;
    return 0;
}

static struct gr_segment *active(struct gr_plog *log) { return log->segs[log->n_segs - 1]; }
static int64_t leo(struct gr_plog *log) { return active(log)->next_offset; }

static void segs_push(struct gr_plog *log, struct gr_segment *seg) {
    if (log->n_segs == log->cap_segs) {
        log->cap_segs = log->cap_segs ? log->cap_segs * 2 : 2;
        log->segs = gr_realloc(log->segs, log->cap_segs * sizeof *log->segs);
    }
    log->segs[log->n_segs++] = seg;
}

static int fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* Deletes segments [from, n) (files and memory). */
static void drop_segments_from(struct gr_plog *log, size_t from) {
    if (log->n_segs > from) log->seg_gen++;
    while (log->n_segs > from) {
        struct gr_segment *seg = log->segs[--log->n_segs];
        gr_segment_delete_files(seg);
        gr_segment_free(seg);
    }
}

/* ---- open ---- */

static void close_log(struct gr_plog *log, bool persist);

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Parses "<20 digits><suffix>"; returns the base offset or -1. */
static int64_t parse_seg_name(const char *name, const char *suffix) {
    size_t n = strlen(name), sl = strlen(suffix);
    if (n != 20 + sl || strcmp(name + 20, suffix) != 0) return -1;
    int64_t v = 0;
    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9') return -1;
        if (v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (name[i] - '0');
    }
    return v <= GR_BATCH_MAX_OFFSET ? v : -1;
}

static void epoch_cb(void *arg, const struct gr_batch_info *bi) {
    struct gr_plog *log = arg;
    gr_epoch_cache_assign(&log->ec, bi->PartitionLeaderEpoch, bi->BaseOffset);
}

static bool ends_with(const char *s, size_t len, const char *suf) {
    size_t n = strlen(suf);
    return len >= n && memcmp(s + len - n, suf, n) == 0;
}

/* What one pass over a partition directory found. */
struct dir_scan {
    int64_t *bases; /* segment base offsets (sorted), malloc'd */
    size_t n;
    bool swaps;      /* *.swap / *.cleaned left by an interrupted cleaning */
    bool epoch_ckpt; /* leader-epoch-checkpoint */
    bool snapshots;  /* producer-state snapshots */
    bool txn_index;  /* *.txnindex */
};

static void push_i64(int64_t **v, size_t *n, size_t *cap, int64_t x) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 4;
        *v = gr_realloc(*v, *cap * sizeof **v);
    }
    (*v)[(*n)++] = x;
}

static void unlink_stale(const char *dir, const char *name) {
    char *p = gr_asprintf("%s/%s", dir, name);
    gr_info(LOGGER, "deleting stale file '%s'", p);
    unlink(p);
    free(p);
}

/* Lists dir once: segment base offsets (sorted) and which other files exist; removes stale
 * temporary files and index files whose .log is missing. */
static int scan_dir(const char *dir, struct dir_scan *ds) {
    memset(ds, 0, sizeof *ds);
    DIR *d = opendir(dir);
    if (!d) return -errno;
    size_t cap = 0, ni = 0, capi = 0;
    int64_t *idx = NULL; /* bases of .index / .timeindex files */
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        size_t len = strlen(nm);
        int64_t b = parse_seg_name(nm, ".log");
        if (b >= 0) {
            push_i64(&ds->bases, &ds->n, &cap, b);
            continue;
        }
        if ((b = parse_seg_name(nm, ".index")) >= 0 || (b = parse_seg_name(nm, ".timeindex")) >= 0) {
            push_i64(&idx, &ni, &capi, b);
            continue;
        }
        if (ends_with(nm, len, ".tmp") || ends_with(nm, len, ".deleted")) unlink_stale(dir, nm);
        else if (ends_with(nm, len, ".swap") || ends_with(nm, len, ".cleaned")) ds->swaps = true;
        else if (ends_with(nm, len, GR_PSTATE_SNAPSHOT_SUFFIX)) ds->snapshots = true;
        else if (ends_with(nm, len, GR_TXN_INDEX_SUFFIX)) ds->txn_index = true;
        else if (strcmp(nm, GR_LEADER_EPOCH_CHECKPOINT) == 0) ds->epoch_ckpt = true;
    }
    closedir(d);
    if (ds->n > 1) qsort(ds->bases, ds->n, sizeof *ds->bases, cmp_i64);
    for (size_t i = 0; i < ni; i++) {
        if (ds->n && bsearch(&idx[i], ds->bases, ds->n, sizeof *ds->bases, cmp_i64)) continue;
        char name[48];
        snprintf(name, sizeof name, "%020" PRId64 ".index", idx[i]);
        char *p = gr_asprintf("%s/%s", dir, name);
        bool exists = access(p, F_OK) == 0;
        free(p);
        if (exists) unlink_stale(dir, name);
        snprintf(name, sizeof name, "%020" PRId64 ".timeindex", idx[i]);
        p = gr_asprintf("%s/%s", dir, name);
        exists = access(p, F_OK) == 0;
        free(p);
        if (exists) unlink_stale(dir, name);
    }
    free(idx);
    return 0;
}

/* Loads or recovers every segment; see gr_plog_open_dir. */
static int load_segments(struct gr_plog *log, int64_t recovery_point, const int64_t *bases, size_t n) {
    int rc = 0;
    for (size_t i = 0; i < n; i++) segs_push(log, gr_segment_new(log->dir, bases[i]));
    int32_t interval = log->cfg.index_interval_bytes;
    for (size_t i = 0; i < log->n_segs; i++) {
        struct gr_segment *seg = log->segs[i];
        int64_t prev_next = i ? log->segs[i - 1]->next_offset : seg->base_offset;
        bool last = i + 1 == log->n_segs;
        bool recover = last ? false : log->segs[i + 1]->base_offset > recovery_point;
        if (!recover) {
            rc = gr_segment_load(seg, interval);
            if (rc == GR_ECORRUPT || (rc == 0 && last && seg->next_offset > recovery_point)) recover = true;
            else if (rc) return rc;
        }
        if (!recover) continue;
        int64_t cut = 0;
        /* The batches are the truth for epochs from here on: drop cached entries at or above
         * this segment and let recovery re-assign them. */
        gr_epoch_cache_truncate_from_end(&log->ec, GR_MAX(prev_next, seg->base_offset));
        rc = gr_segment_recover(seg, prev_next, interval, epoch_cb, log, &cut);
        if (rc) return rc;
        rc = gr_segment_fsync(seg);
        if (rc) return rc;
        if (cut > 0 && !last) {
            gr_warn(LOGGER, "deleting %zu segment(s) of '%s' after the corrupt segment %020" PRId64,
                    log->n_segs - i - 1, log->dir, seg->base_offset);
            drop_segments_from(log, i + 1);
        }
    }
    return 0;
}

/* ---- producer state ---- */

static size_t seg_for_offset(struct gr_plog *log, int64_t offset);

/* Feeds the batches in [map end, to) into the producer state (Replication origin, as Kafka's
 * loadProducersFromLog), then sets the map end offset to `to`. */
static int replay_producer_state(struct gr_plog *log, int64_t to) {
    int64_t from = GR_MAX(gr_pstate_map_end_offset(log->ps), log->log_start_offset);
    int rc = 0;
    for (size_t i = seg_for_offset(log, from); rc == 0 && i < log->n_segs && from < to; i++) {
        struct gr_segment *seg = log->segs[i];
        int64_t pos;
        rc = gr_segment_find(seg, from, &pos);
        while (rc == 0 && pos < seg->size) {
            uint8_t *data = NULL;
            size_t len = 0;
            int64_t first, next;
            rc = gr_segment_read(seg, pos, 4 << 20, -1, true, &data, &len, &first, &next);
            if (rc || len == 0) {
                free(data);
                break;
            }
            /* whole batches only; skip those entirely below `from`, stop at `to` */
            struct gr_batch_iter it;
            struct gr_batch_info bi;
            const uint8_t *bp;
            size_t a = 0, b = 0;
            gr_batch_iter_init(&it, data, len);
            while (gr_batch_iter_next(&it, &bi, &bp) == 1) {
                size_t at = (size_t)(bp - data);
                if (gr_batch_info_last_offset(&bi) < from) a = at + bi.size;
                else if (bi.BaseOffset < to) b = at + bi.size;
            }
            if (b > a) gr_pstate_load_batches(log->ps, data + a, b - a, gr_pstate_map_end_offset(log->ps));
            pos += (int64_t)len;
            free(data);
            if (next >= to) break;
        }
    }
    gr_pstate_set_map_end_offset(log->ps, to);
    return rc;
}

/* Kafka's Log.rebuildProducerState(lastOffset): drop snapshots outside (log start, last_offset],
 * reload the newest one when the state does not end at last_offset, replay the log up to it,
 * then snapshot. Skips the replay when there were no producers and nothing to undo. */
static int rebuild_producer_state(struct gr_plog *log, int64_t last_offset) {
    struct gr_pstate *ps = log->ps;
    bool empty_before = gr_pstate_producer_count(ps) == 0 && gr_pstate_map_end_offset(ps) >= last_offset;
    gr_pstate_delete_snapshots_out_of_range(ps, log->log_start_offset, last_offset);
    if (last_offset != gr_pstate_map_end_offset(ps))
        gr_pstate_load_latest_snapshot(ps, log->log_start_offset, gr_wall_ms());
    else
        gr_pstate_truncate_head(ps, log->log_start_offset);
    int rc = 0;
    if (last_offset > gr_pstate_map_end_offset(ps) && !empty_before) {
        gr_info(LOGGER, "loading producer state of '%s' from offset %" PRId64 " to %" PRId64, log->dir,
                GR_MAX(gr_pstate_map_end_offset(ps), log->log_start_offset), last_offset);
        rc = replay_producer_state(log, last_offset);
    }
    gr_pstate_set_map_end_offset(ps, last_offset);
    gr_pstate_take_snapshot(ps);
    return rc;
}

static void maybe_expire_producers(struct gr_plog *log) {
    int64_t now = gr_mono_ms();
    if (now - log->last_expiry_check_ms < GR_PSTATE_EXPIRATION_CHECK_INTERVAL_MS) return;
    log->last_expiry_check_ms = now;
    gr_pstate_remove_expired(log->ps, gr_wall_ms());
}

bool gr_plog_producer_state(struct gr_plog *log, int64_t producer_id, struct gr_pstate_entry *out) {
    pthread_mutex_lock(&log->mu);
    bool found = gr_pstate_lookup(log->ps, producer_id, out);
    gr_plog_unlock(log);
    return found;
}

int gr_plog_producer_count(struct gr_plog *log) {
    pthread_mutex_lock(&log->mu);
    int n = gr_pstate_producer_count(log->ps);
    gr_plog_unlock(log);
    return n;
}

int gr_plog_active_producers(struct gr_plog *log, struct gr_pstate_entry **out, int *n) {
    *out = NULL;
    *n = 0;
    for (;;) {
        int want = gr_plog_producer_count(log);
        if (want == 0) return 0;
        struct gr_pstate_entry *v = malloc((size_t)want * sizeof *v);
        if (!v) return -ENOMEM;
        pthread_mutex_lock(&log->mu);
        int have = gr_pstate_producer_count(log->ps);
        int got = have <= want ? gr_pstate_list(log->ps, v, want) : -1;
        gr_plog_unlock(log);
        if (got >= 0) {
            *out = v;
            *n = got;
            if (got == 0) {
                free(v);
                *out = NULL;
            }
            return 0;
        }
        free(v); /* grew meanwhile: again */
    }
}

int gr_plog_remove_expired_producers(struct gr_plog *log, int64_t now_ms) {
    pthread_mutex_lock(&log->mu);
    int n = gr_pstate_remove_expired(log->ps, now_ms);
    gr_plog_unlock(log);
    return n;
}

static void on_txn_completed(void *ctx, const struct gr_pstate_completed_txn *t);
static void load_topic_id(struct gr_plog *log);

/* A new log: its directory does not exist, so there is no checkpoint, segment, snapshot or
 * transaction index to read, and nothing is created yet. The directory is made by the first write
 * of any file into it (ensure_dir_locked: the first append, or a truncation that starts the log at
 * another offset); the first segment's .log by the first append (O_CREAT through the fd cache), the
 * .index/.timeindex by the first flush, roll or close after it. Kafka makes the directory and the
 * three files at once; a directory costs an inode, and ext4's inode allocator slows down markedly
 * after mass deletions (issue 14), while a partition that never receives data needs none. A log
 * without a directory is still a log: listed, checkpointed (offsets 0), reported by DescribeLogDirs
 * and deletable; after a restart it is not loaded (nothing on disk) and the LeaderAndIsr that
 * assigns the partition again creates it the same way. A directory without a .log opens as an
 * empty log at offset 0. Nothing is fsynced (dir_unsynced: the first flush or roll does it). */
static int open_new(struct gr_plog *log) {
    log->no_dir = true;
    gr_epoch_cache_init(&log->ec, log->dir);
    struct gr_segment *seg = gr_segment_new(log->dir, 0);
    segs_push(log, seg);
    gr_segment_activate_new(seg);
    log->dir_unsynced = true;
    log->ps = gr_pstate_new(log->dir, log->cfg.producer_id_expiration_ms);
    gr_pstate_assume_no_snapshots(log->ps);
    log->ti = gr_txn_index_new(log->dir);
    return 0;
}

/* Loads an existing directory (see gr_plog_open_dir). */
static int open_existing(struct gr_plog *log, int64_t recovery_point) {
    struct dir_scan ds;
    int rc = scan_dir(log->dir, &ds);
    if (rc == 0 && ds.swaps) {
        /* a cleaning pass interrupted by a crash: finish its swap or drop its .cleaned output */
        if (gr_plog_complete_swaps(log->dir) > 0) recovery_point = 0; /* swapped segments: recover them */
        free(ds.bases);
        rc = scan_dir(log->dir, &ds);
    }
    if (rc) {
        gr_error(LOGGER, "cannot list log directory '%s': %s", log->dir, gr_strerror(rc));
        return rc;
    }
    if (ds.epoch_ckpt) rc = gr_epoch_cache_load(&log->ec, log->dir);
    else gr_epoch_cache_init(&log->ec, log->dir);
    if (rc == 0) rc = load_segments(log, recovery_point < 0 ? 0 : recovery_point, ds.bases, ds.n);
    free(ds.bases);
    if (rc == 0 && log->n_segs == 0) { /* no segment (a new log never written): as open_new */
        struct gr_segment *seg = gr_segment_new(log->dir, 0);
        segs_push(log, seg);
        gr_segment_activate_new(seg);
        log->dir_unsynced = true;
    }
    if (rc) return rc;
    /* just loaded, so its .log exists: opened through the fd cache by the first operation that
     * needs it (a start-up with 100k logs opens none) */
    gr_segment_set_active(active(log));
    log->ps = gr_pstate_new(log->dir, log->cfg.producer_id_expiration_ms);
    if (!ds.snapshots) gr_pstate_assume_no_snapshots(log->ps);
    log->ti = ds.txn_index ? gr_txn_index_open(log->dir) : gr_txn_index_new(log->dir);
    /* Kafka's recoverSegment rebuilds the .txnindex of every recovered segment. Here entries whose
     * marker lies at or beyond the log end (a torn tail cut off, data that never reached the
     * disk while the index file did) go; those below it are kept from the files (fsynced with
     * their segment), and the producer-state replay of gr_plog_open_dir re-creates any entry
     * missing above the newest snapshot. A replay cannot rebuild entries of cleaned segments
     * exactly (the cleaner dropped the aborted data that gave their first offsets), so the
     * in-range entries are not rebuilt from the batches (docs/STORAGE.md). */
    if (ds.txn_index) gr_txn_index_truncate(log->ti, leo(log));
    return 0;
}

int gr_plog_open_dir(const char *dir, const struct gr_plog_config *cfg, int64_t recovery_point, struct gr_plog **out) {
    *out = NULL;
    int rc = check_config(cfg);
    if (rc) return rc;
    struct stat st;
    bool fresh = stat(dir, &st) < 0;
    if (fresh ? errno != ENOENT : !S_ISDIR(st.st_mode)) {
        rc = fresh ? -errno : -ENOTDIR;
        gr_error(LOGGER, "cannot open log directory '%s': %s", dir, gr_strerror(rc));
        return rc;
    }
    struct gr_plog *log = gr_calloc(1, sizeof *log);
    pthread_mutex_init(&log->mu, NULL);
    size_t dlen = strlen(dir);
    log->dir = gr_malloc(dlen + GR_PLOG_DELETE_SUFFIX_LEN + 1); /* room for gr_plog_rename_for_delete */
    memcpy(log->dir, dir, dlen + 1);
    log->cfg = *cfg;
    log->last_flush_ms = gr_mono_ms();
    rc = fresh ? open_new(log) : open_existing(log, recovery_point);
    if (rc) {
        gr_error(LOGGER, "cannot open log '%s': %s", dir, gr_strerror(rc));
        close_log(log, false);
        return rc;
    }
    log->log_start_offset = log->segs[0]->base_offset;
    log->recovery_point = leo(log);
    gr_pstate_set_txn_listener(log->ps, on_txn_completed, log);
    log->last_expiry_check_ms = gr_mono_ms();
    if (!fresh) {
        load_topic_id(log);
        gr_epoch_cache_truncate_from_end(&log->ec, leo(log));
        gr_epoch_cache_truncate_from_start(&log->ec, log->log_start_offset);
        rc = rebuild_producer_state(log, leo(log));
        if (rc) {
            gr_error(LOGGER, "cannot load the producer state of '%s': %s", dir, gr_strerror(rc));
            close_log(log, false);
            return rc;
        }
    }
    atomic_init(&log->pub_leo, leo(log));
    atomic_init(&log->pub_log_start, log->log_start_offset);
    if (fresh) gr_debug(LOGGER, "created log '%s'", dir);
    else
        gr_info(LOGGER, "loaded log '%s': %zu segment(s), log start offset %" PRId64 ", log end offset %" PRId64,
                dir, log->n_segs, log->log_start_offset, leo(log));
    *out = log;
    return 0;
}

/* Makes a new log's directory (open_new) before the first file is written into it, with its
 * partition.metadata first when the log has a topic id. 0 or -errno. */
static int ensure_dir_locked(struct gr_plog *log) {
    if (!log->no_dir) return 0;
    if (mkdir(log->dir, 0755) < 0 && errno != EEXIST) {
        int rc = -errno;
        gr_error(LOGGER, "cannot create log directory '%s': %s", log->dir, gr_strerror(rc));
        return rc;
    }
    if (log->has_topic_id && log->topic_id_unwritten) {
        int rc = gr_partition_metadata_write(log->dir, &log->topic_id);
        if (rc < 0) {
            gr_error(LOGGER, "cannot write '%s/" GR_PARTITION_METADATA_FILE "': %s", log->dir, gr_strerror(rc));
            return rc; /* the directory stays (no_dir): the next write tries again */
        }
        log->topic_id_unwritten = false;
    }
    log->no_dir = false;
    return 0;
}

int gr_plog_topic_id(struct gr_plog *log, struct gr_uuid *out) {
    pthread_mutex_lock(&log->mu);
    int rc = log->topic_id_bad ? GR_ECORRUPT : log->has_topic_id ? 1 : 0;
    if (rc == 1) *out = log->topic_id;
    gr_plog_unlock(log);
    return rc;
}

int gr_plog_assign_topic_id(struct gr_plog *log, const struct gr_uuid *id) {
    int rc = 0;
    pthread_mutex_lock(&log->mu);
    if (log->topic_id_bad) {
        rc = GR_ECORRUPT;
    } else if (log->has_topic_id) {
        rc = gr_uuid_equal(&log->topic_id, id) ? 0 : -EEXIST;
    } else if (log->no_dir) {
        log->topic_id = *id;
        log->has_topic_id = log->topic_id_unwritten = true;
    } else if ((rc = gr_partition_metadata_write(log->dir, id)) == 0) {
        log->topic_id = *id;
        log->has_topic_id = true;
    } else {
        gr_error(LOGGER, "cannot write '%s/" GR_PARTITION_METADATA_FILE "': %s", log->dir, gr_strerror(rc));
    }
    gr_plog_unlock(log);
    return rc;
}

/* An existing directory's partition.metadata (Kafka's UnifiedLog.initializeTopicId). */
static void load_topic_id(struct gr_plog *log) {
    int rc = gr_partition_metadata_read(log->dir, &log->topic_id);
    if (rc == 0) {
        log->has_topic_id = true;
    } else if (rc != -ENOENT) {
        log->topic_id_bad = true;
        gr_error(LOGGER, "cannot read '%s/" GR_PARTITION_METADATA_FILE "': %s; the log is not served until it is "
                         "fixed or removed", log->dir, gr_strerror(rc));
    }
}

bool gr_plog_has_dir(struct gr_plog *log) {
    pthread_mutex_lock(&log->mu);
    bool has = !log->no_dir;
    gr_plog_unlock(log);
    return has;
}

/* Frees the log; `persist`: first write index entries not yet in the .index files. */
static void close_log(struct gr_plog *log, bool persist) {
    if (!log) return;
    /* Kafka's Log.close: a producer snapshot at the log end offset, so that the next start
     * need not scan the log. */
    if (persist && log->ps && log->n_segs && gr_pstate_map_end_offset(log->ps) == leo(log))
        gr_pstate_take_snapshot(log->ps);
    gr_pstate_free(log->ps);
    gr_txn_index_free(log->ti);
    free(log->unrepl);
    for (size_t i = 0; i < log->n_segs; i++) {
        if (persist) {
            gr_segment_seal_time_index(log->segs[i]); /* Kafka's LogSegment.close */
            gr_segment_persist_index(log->segs[i]);
        }
        gr_segment_free(log->segs[i]);
    }
    free(log->segs);
    gr_epoch_cache_release(&log->ec);
    pthread_mutex_destroy(&log->mu);
    free(log->dir);
    free(log);
}

void gr_plog_close(struct gr_plog *log) { close_log(log, true); }

static int remove_tree(const char *path) {
    DIR *d = opendir(path);
    if (!d) return errno == ENOENT ? 0 : -errno;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        char *p = gr_asprintf("%s/%s", path, de->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) rc = remove_tree(p);
        else if (unlink(p) < 0 && rc == 0) rc = -errno;
        free(p);
    }
    closedir(d);
    if (rmdir(path) < 0 && rc == 0) rc = -errno;
    return rc;
}

int gr_plog_delete(struct gr_plog *log) {
    char *dir = gr_strdup(log->dir);
    close_log(log, false);
    int rc = remove_tree(dir);
    if (rc) gr_error(LOGGER, "cannot delete log directory '%s': %s", dir, gr_strerror(rc));
    else gr_info(LOGGER, "deleted log directory '%s'", dir);
    free(dir);
    return rc;
}

/* 2*nbytes hex digits into out. getrandom(2) needs no file descriptor: a broker out of them
 * (EMFILE) must still rename a deleted log away from its path. Should it fail, the clock, the
 * process id and a counter make a name no other deletion in this process uses. */
static void random_hex(char *out, size_t nbytes) {
    static _Atomic uint64_t counter;
    uint8_t b[32];
    if (nbytes > sizeof b) nbytes = sizeof b;
    size_t got = 0;
    while (got < nbytes) {
        ssize_t n = getrandom(b + got, nbytes - got, GRND_NONBLOCK);
        if (n <= 0 && !(n < 0 && errno == EINTR)) break;
        if (n > 0) got += (size_t)n;
    }
    if (got < nbytes) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t v[4] = {(uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec, (uint64_t)getpid(), atomic_fetch_add(&counter, 1)};
        for (size_t i = 0; i < nbytes; i++) b[i] = (uint8_t)(v[(i / 8) % 4] >> (8 * (i % 8)));
    }
    for (size_t i = 0; i < nbytes; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

/* Renames the log's directory to `to` (same parent) and takes it as the log's path; the parent is
 * fsynced. Log mutex held. 0 or -errno (the log keeps its old path). */
static int rename_dir_locked(struct gr_plog *log, const char *to, const char *why) {
    if (!log->no_dir && rename(log->dir, to) < 0) {
        int rc = -errno;
        gr_error(LOGGER, "cannot rename log directory '%s' to '%s': %s", log->dir, to, gr_strerror(rc));
        return rc;
    }
    if (!log->no_dir) {
        char *parent = gr_strdup(log->dir);
        char *slash = strrchr(parent, '/');
        if (slash) slash[slash == parent ? 1 : 0] = 0; /* "/x" -> "/" */
        gr_plog_fsync_dir(slash ? parent : ".");
        free(parent);
        gr_info(LOGGER, "renamed log directory '%s' to '%s' %s", log->dir, to, why);
    }
    memcpy(log->dir, to, strlen(to) + 1); /* in place: segments, snapshots, epochs borrow it */
    return 0;
}

int gr_plog_rename_for_delete(struct gr_plog *log) {
    char hex[33];
    random_hex(hex, 16);
    int rc = 0;
    pthread_mutex_lock(&log->mu);
    if (log->renamed_for_delete) {
        gr_plog_unlock(log);
        return 0;
    }
    char *to = gr_asprintf("%s.%s-delete", log->dir, hex);
    rc = rename_dir_locked(log, to, "for deletion");
    if (rc == 0) log->renamed_for_delete = true;
    free(to);
    gr_plog_unlock(log);
    return rc;
}

int gr_plog_rename_stray(struct gr_plog *log, char *path_out, size_t cap) {
    char hex[33];
    random_hex(hex, 16);
    pthread_mutex_lock(&log->mu);
    if (log->renamed_for_delete) { /* already away from its partition's path */
        if (path_out && cap) snprintf(path_out, cap, "%s", log->dir);
        gr_plog_unlock(log);
        return 0;
    }
    /* Kafka's logDirNameWithSuffixCappedLength: "<topic>-<partition>.<uniqueId>-stray", the
     * topic cut so that the name stays within 255 bytes */
    const char *slash = strrchr(log->dir, '/');
    const char *name = slash ? slash + 1 : log->dir;
    const char *dash = strrchr(name, '-');
    size_t tlen = dash ? (size_t)(dash - name) : strlen(name);
    char *suffix = gr_asprintf("%s.%s" GR_PLOG_STRAY_SUFFIX, dash ? dash : "-0", hex);
    size_t slen = strlen(suffix);
    size_t keep = slen >= 255 ? 0 : GR_MIN(tlen, 255 - slen);
    char *to = gr_asprintf("%.*s%.*s%s", (int)(name - log->dir), log->dir, (int)keep, name, suffix);
    free(suffix);
    int rc = rename_dir_locked(log, to, "aside (stray: another topic id)");
    if (rc == 0) log->renamed_for_delete = true;
    if (rc == 0 && path_out && cap) snprintf(path_out, cap, "%s", to);
    free(to);
    gr_plog_unlock(log);
    return rc;
}

void gr_plog_get_config(struct gr_plog *log, struct gr_plog_config *out) {
    pthread_mutex_lock(&log->mu);
    *out = log->cfg;
    gr_plog_unlock(log);
}

int gr_plog_set_config(struct gr_plog *log, const struct gr_plog_config *cfg) {
    int rc = check_config(cfg);
    if (rc) return rc;
    pthread_mutex_lock(&log->mu);
    log->cfg = *cfg;
    gr_pstate_set_expiration_ms(log->ps, cfg->producer_id_expiration_ms);
    gr_plog_unlock(log);
    return 0;
}

void gr_plog_set_truncation_hook(struct gr_plog *log, gr_plog_truncated_fn fn, void *ctx) {
    pthread_mutex_lock(&log->mu);
    log->on_truncated = fn;
    log->on_truncated_ctx = ctx;
    gr_plog_unlock(log);
}

/* ---- flush ---- */

/* The directory entries of a log created empty, before anything written to it is called
 * durable. */
static int sync_dir_if_new(struct gr_plog *log) {
    if (!log->dir_unsynced) return 0;
    int rc = fsync_dir(log->dir);
    if (rc == 0) log->dir_unsynced = false;
    return rc;
}

static int flush_locked(struct gr_plog *log) {
    /* Kafka's flush(offset) with offset <= recoveryPoint: everything below the recovery point
     * was made durable by the flush or roll that advanced it (the indexes are caches rebuilt
     * from the .log), and an empty new log holds nothing to make durable. */
    if (log->recovery_point >= leo(log)) return 0;
    int rc = gr_segment_fsync(active(log));
    if (rc == 0) rc = gr_txn_index_flush(log->ti); /* Kafka's LogSegment.flush: txnIndex.flush() */
    if (rc == 0) rc = sync_dir_if_new(log);
    if (rc) return rc;
    log->recovery_point = leo(log);
    log->unflushed_messages = 0;
    log->last_flush_ms = gr_mono_ms();
    return 0;
}

int gr_plog_flush(struct gr_plog *log) {
    pthread_mutex_lock(&log->mu);
    int rc = flush_locked(log);
    gr_plog_unlock(log);
    return rc;
}

static bool flush_due(struct gr_plog *log) {
    if (log->recovery_point >= leo(log)) return false;
    if (log->unflushed_messages >= log->cfg.flush_messages) return true;
    return log->cfg.flush_ms != INT64_MAX && gr_mono_ms() - log->last_flush_ms >= log->cfg.flush_ms;
}

int gr_plog_flush_if_due(struct gr_plog *log) {
    pthread_mutex_lock(&log->mu);
    int rc = flush_due(log) ? flush_locked(log) : 0;
    gr_plog_unlock(log);
    return rc;
}

/* ---- append ---- */

/* Rolls to a new empty active segment at the log end offset. The old active segment is fsynced
 * first, so everything below the new base is durable: the recovery point moves there. */
static int roll(struct gr_plog *log) {
    struct gr_segment *old = active(log);
    if (old->size == 0) return 0;
    gr_segment_seal_time_index(old); /* Kafka's onBecomeInactiveSegment: final time entry */
    int rc = gr_segment_fsync(old);
    if (rc == 0) rc = gr_txn_index_flush(log->ti); /* the old segment's .txnindex, as its .log */
    if (rc == 0) rc = sync_dir_if_new(log);
    if (rc) return rc;
    /* Producer snapshot named by the new segment's base (Kafka's roll), taken only when the state
     * covers exactly the data below it: a roll in the middle of an append comes before that
     * append's state is committed, and then replay from an older snapshot covers it. */
    if (gr_pstate_map_end_offset(log->ps) == old->next_offset) gr_pstate_take_snapshot(log->ps);
    struct gr_segment *seg = gr_segment_new(log->dir, old->next_offset);
    rc = gr_segment_create(seg);
    if (rc) {
        gr_segment_delete_files(seg);
        gr_segment_free(seg);
        return rc;
    }
    gr_segment_deactivate(old);
    segs_push(log, seg);
    /* The new segment is in place either way; a failed directory fsync is an I/O error of the
     * log (Kafka's roll through maybeHandleIOException) and keeps the recovery point. */
    rc = fsync_dir(log->dir);
    if (rc) return rc;
    log->recovery_point = seg->base_offset;
    /* Kafka's deleteSnapshotsAfterRecoveryPointCheckpoint: keep the snapshots of the last two
     * segments (the recovery point is now the new active segment's base). */
    gr_pstate_delete_snapshots_before(log->ps, old->base_offset);
    gr_info(LOGGER, "rolled new log segment at offset %" PRId64 " in '%s'", seg->base_offset, log->dir);
    return 0;
}

/* segment.jitter.ms (Kafka's LogConfig.randomSegmentJitter: a draw in [0, min(jitter, segment.ms))
 * per segment, so that partitions created together do not all roll at once). The draw is a hash
 * of the directory and the segment's base offset: fixed for the segment's life, spread over
 * partitions, and no state to keep. */
static int64_t roll_jitter(const struct gr_plog *log, const struct gr_segment *a) {
    if (log->cfg.roll_jitter_ms <= 0) return 0;
    uint64_t h = 1469598103934665603ULL;
    for (const char *c = log->dir; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ULL;
    h = (h ^ (uint64_t)a->base_offset) * 1099511628211ULL;
    h ^= h >> 29;
    return (int64_t)(h % (uint64_t)GR_MIN(log->cfg.roll_jitter_ms, log->cfg.roll_ms));
}

static bool time_to_roll(struct gr_plog *log, int64_t incoming_max_ts) {
    struct gr_segment *a = active(log);
    if (a->size == 0) return false;
    int64_t waited = a->first_batch_ts >= 0 && incoming_max_ts >= 0 ? incoming_max_ts - a->first_batch_ts
                                                                    : gr_wall_ms() - a->created_ms;
    return waited > log->cfg.roll_ms - roll_jitter(log, a);
}

/* Writes validated batches with assigned offsets, rolling segments as needed. */
static int write_batches(struct gr_plog *log, const uint8_t *buf, size_t len, int64_t incoming_max_ts) {
    int drc = ensure_dir_locked(log); /* a new log's directory: made by its first write */
    if (drc) return drc;
    size_t off = 0;
    bool time_checked = false;
    while (off < len) {
        struct gr_segment *a = active(log);
        if (!time_checked) {
            time_checked = true;
            if (time_to_roll(log, incoming_max_ts)) {
                int rc = roll(log);
                if (rc) return rc;
                continue;
            }
        }
        size_t g = 0;
        while (off + g < len) {
            struct gr_batch_info bi;
            if (gr_batch_parse_header(buf + off + g, len - off - g, &bi) != GR_BATCH_OK) return GR_ECORRUPT;
            bool fits = a->size + (int64_t)(g + bi.size) <= log->cfg.segment_bytes &&
                        gr_batch_info_last_offset(&bi) - a->base_offset <= INT32_MAX &&
                        !gr_segment_index_full(a, log->cfg.index_max_bytes);
            if (!fits && !(g == 0 && a->size == 0)) break;
            g += bi.size;
        }
        if (g == 0) {
            int rc = roll(log);
            if (rc) return rc;
            continue;
        }
        int rc = gr_segment_append(a, buf + off, g, log->cfg.index_interval_bytes);
        if (rc) return rc;
        off += g;
    }
    return 0;
}

static void append_info_init(struct gr_append_info *info) {
    memset(info, 0, sizeof *info);
    info->first_offset = info->last_offset = -1;
    info->max_timestamp = info->offset_of_max_timestamp = -1;
    info->log_append_time = -1;
}

/* message.timestamp.type=LogAppendTime: every batch gets attribute bit 3 and maxTimestamp = now
 * (both inside the CRC, which is recomputed), as Kafka's setMaxTimestamp(LOG_APPEND_TIME, now). */
static void stamp_log_append_time(uint8_t *buf, size_t len, int64_t now) {
    struct gr_batch_iter it;
    struct gr_batch_info bi;
    const uint8_t *p;
    gr_batch_iter_init(&it, buf, len);
    while (gr_batch_iter_next(&it, &bi, &p) == 1) {
        uint8_t *b = (uint8_t *)p;
        gr_put_be16(b + GR_BATCH_OFF_ATTRIBUTES, (uint16_t)(bi.Attributes | GR_BATCH_ATTR_LOG_APPEND_TIME));
        gr_put_be64(b + GR_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)now);
        gr_batch_update_crc(b, bi.size);
    }
}

/* Counts the appended records and flushes when flush.messages / flush.ms say so. A failed flush
 * fails the append (Kafka's Log.append calls flush(), whose IOException becomes a
 * KafkaStorageException): the records are in the log but must not be acknowledged. */
static int after_append(struct gr_plog *log, int64_t records) {
    log->unflushed_messages += records;
    if (!flush_due(log)) return 0;
    int rc = flush_locked(log);
    if (rc) gr_error(LOGGER, "flush of '%s' failed: %s", log->dir, gr_strerror(rc));
    return rc;
}

int gr_plog_append_as_leader(struct gr_plog *log, uint8_t *batches, size_t len, int32_t leader_epoch,
                            struct gr_append_info *info) {
    return gr_plog_append_origin(log, batches, len, leader_epoch, false, info);
}

/* Does a batch of batches[0..len) exceed max_message_bytes (headers only)? */
static bool has_batch_over(const uint8_t *batches, size_t len, int32_t max_message_bytes) {
    struct gr_batch_iter it;
    struct gr_batch_info bi;
    const uint8_t *p;
    gr_batch_iter_init(&it, batches, len);
    while (gr_batch_iter_next(&it, &bi, &p))
        if (bi.size > (size_t)max_message_bytes) return true;
    return false;
}

int gr_plog_append_origin(struct gr_plog *log, uint8_t *batches, size_t len, int32_t leader_epoch, bool coordinator,
                          struct gr_append_info *info) {
    append_info_init(info);
    uint8_t *converted = NULL; /* batches in the topic's codec, when they were converted */
    pthread_mutex_lock(&log->mu);
    info->log_start_offset = log->log_start_offset;
    /* Size limit first (as Kafka), from headers only. */
    if (has_batch_over(batches, len, log->cfg.max_message_bytes)) {
        info->error = GR_KERR_MESSAGE_TOO_LARGE;
        goto out;
    }
    struct gr_batch_info bi;
    struct gr_batch_summary sum;
    /* Headers and CRCs (Kafka's analyzeAndValidateRecords); the records come next. */
    int err = gr_batch_validate_all(batches, len, (coordinator ? 0 : GR_BATCH_V_CLIENT) | GR_BATCH_V_NO_RECORDS, &sum);
    if (err != GR_BATCH_OK) {
        gr_debug(LOGGER, "rejecting produce to '%s': %s at byte %zu", log->dir, gr_batch_strerror(err), sum.bad_pos);
        info->error = gr_batch_err_kerr(err);
        goto out;
    }
    /* One v2 batch per partition and request (Kafka 2.7 LogValidator, every origin: "more than
     * one batch" is INVALID_RECORD); legacy message sets arrive here as one converted batch. The
     * producer state's duplicate check answers for a whole append and relies on this. */
    if (sum.batches > 1) {
        gr_debug(LOGGER, "rejecting produce to '%s': %d record batches for one partition", log->dir, sum.batches);
        info->error = GR_KERR_INVALID_RECORD;
        goto out;
    }
    /* Every record, compressed or not (storage/log_validator.h, Kafka's LogValidator): it reads,
     * its offset delta is its index, a compacted topic's has a key, its CreateTime is within
     * message.timestamp.difference.max.ms. Nothing is stored otherwise. */
    int64_t now = gr_wall_ms();
    gr_batch_parse_header(batches, len, &bi);
    struct gr_validator_config vc = {.client = !coordinator,
                                     .compacted = log->cfg.cleanup_compact,
                                     .log_append_time = log->cfg.log_append_time,
                                     .max_diff_ms = log->cfg.timestamp_difference_max_ms,
                                     .now_ms = now,
                                     .max_inflated = GR_VALIDATOR_MAX_INFLATED};
    if (gr_log_validate_batch(batches, &bi, &vc, &info->validation) != GR_KERR_NONE) {
        gr_debug(LOGGER, "rejecting produce to '%s': %s", log->dir, info->validation.message);
        info->error = info->validation.error;
        goto out;
    }
    /* CreateTime: the batch's maxTimestamp is its records' largest (Kafka's setMaxTimestamp, in
     * place), so the time index never follows a header's word over its records. */
    if (!log->cfg.log_append_time && bi.RecordCount > 0 && bi.MaxTimestamp != info->validation.max_timestamp) {
        gr_put_be64(batches + GR_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)info->validation.max_timestamp);
        gr_batch_update_crc(batches, bi.size);
        sum.max_timestamp = info->validation.max_timestamp;
    }
    /* compression.type and inner offsets (Kafka's LogValidator, inPlaceAssignment = false):
     * a client batch is stored rebuilt when its codec is not the topic's or its offsetDeltas
     * are not 0..n-1; the rebuilt copy replaces `batches` from here on and is freed below. As
     * Kafka, a batch that grew past max.message.bytes is MESSAGE_TOO_LARGE. */
    int codec = gr_batch_info_compression(&bi);
    int target = log->cfg.compression_type == GR_COMPRESSION_PRODUCER ? codec : log->cfg.compression_type;
    if (!coordinator && (target != codec || info->validation.rebuild)) {
        size_t clen = 0;
        info->error = gr_batch_rebuild(batches, &bi, target, &converted, &clen);
        if (info->error != GR_KERR_NONE) {
            gr_debug(LOGGER, "rejecting produce to '%s': batch does not rebuild in codec %d", log->dir, target);
            goto out;
        }
        batches = converted;
        len = clen;
        if (has_batch_over(batches, len, log->cfg.max_message_bytes)) {
            info->error = GR_KERR_MESSAGE_TOO_LARGE;
            goto out;
        }
    }
    if (len > (size_t)log->cfg.segment_bytes) {
        info->error = GR_KERR_RECORD_LIST_TOO_LARGE;
        goto out;
    }
    int64_t next = leo(log);
    info->first_offset = next;
    for (size_t pos = 0; pos < len; pos += bi.size) {
        gr_batch_parse_header(batches + pos, len - pos, &bi);
        gr_batch_set_base_offset(batches + pos, next);
        gr_batch_set_partition_leader_epoch(batches + pos, leader_epoch);
        next += (int64_t)bi.LastOffsetDelta + 1;
        if (bi.MaxTimestamp > info->max_timestamp) {
            info->max_timestamp = bi.MaxTimestamp;
            info->offset_of_max_timestamp = next - 1;
        }
    }
    int64_t incoming_max_ts = sum.max_timestamp;
    if (log->cfg.log_append_time) {
        stamp_log_append_time(batches, len, now);
        info->max_timestamp = incoming_max_ts = now;
        info->offset_of_max_timestamp = next - 1;
        info->log_append_time = now;
    }
    /* Producer state (Kafka's analyzeAndValidateProducerState), after offsets are assigned. */
    maybe_expire_producers(log);
    struct gr_pstate_append app;
    struct gr_pstate_batch dup;
    bool is_dup = false;
    gr_pstate_append_init(&app);
    info->error = gr_pstate_prepare(log->ps, batches, len, coordinator ? GR_PSTATE_COORDINATOR : GR_PSTATE_CLIENT,
                                    &app, coordinator ? NULL : &dup, &is_dup);
    if (info->error != GR_KERR_NONE || is_dup) {
        gr_pstate_append_release(&app);
        if (is_dup) { /* a retry of an appended batch: its original offsets, nothing written */
            gr_debug(LOGGER, "duplicate batch for '%s' acknowledged at offsets %" PRId64 "..%" PRId64, log->dir,
                     gr_pstate_batch_first_offset(&dup), dup.last_offset);
            info->first_offset = gr_pstate_batch_first_offset(&dup);
            info->last_offset = dup.last_offset;
            info->max_timestamp = dup.timestamp;
            info->offset_of_max_timestamp = dup.last_offset;
            info->log_append_time = dup.timestamp; /* Kafka answers a duplicate with it */
            gr_plog_unlock(log);
            free(converted);
            return 0;
        }
        goto out;
    }
    int rc = write_batches(log, batches, len, incoming_max_ts);
    if (rc) {
        gr_pstate_append_release(&app);
        info->error = GR_KERR_KAFKA_STORAGE_ERROR;
        info->first_offset = info->last_offset = -1;
        gr_plog_unlock(log);
        free(converted);
        return rc;
    }
    gr_pstate_commit(log->ps, &app, next);
    gr_pstate_append_release(&app);
    info->last_offset = next - 1;
    info->record_count = sum.records;
    info->batch_count = sum.batches;
    gr_epoch_cache_assign(&log->ec, leader_epoch, info->first_offset);
    rc = after_append(log, sum.records);
    if (rc) {
        info->error = GR_KERR_KAFKA_STORAGE_ERROR;
        info->first_offset = info->last_offset = -1;
        gr_plog_unlock(log);
        free(converted);
        return rc;
    }
out:
    if (info->error != GR_KERR_NONE) info->first_offset = info->last_offset = -1;
    gr_plog_unlock(log);
    free(converted);
    return 0;
}

int gr_plog_append_as_follower(struct gr_plog *log, const uint8_t *batches, size_t len, struct gr_append_info *info) {
    struct gr_append_info local;
    if (!info) info = &local;
    append_info_init(info);
    pthread_mutex_lock(&log->mu);
    info->log_start_offset = log->log_start_offset;
    struct gr_batch_summary sum;
    int rc = 0;
    /* As Kafka's appendAsFollower: batch headers, offsets and the CRC, not every record (the
     * leader parsed them when it took them from the client). */
    int err = gr_batch_validate_all(batches, len, GR_BATCH_V_NO_RECORDS, &sum);
    if (err != GR_BATCH_OK) {
        gr_warn(LOGGER, "follower append to '%s' rejected: %s at byte %zu", log->dir, gr_batch_strerror(err),
                sum.bad_pos);
        info->error = gr_batch_err_kerr(err);
        rc = GR_ECORRUPT;
        goto out;
    }
    /* Kafka's appendAsFollower: offsets must rise and start at or after the log end offset; gaps
     * are fine (a compacted leader log has them). */
    bool monotonic = true;
    {
        struct gr_batch_iter mit;
        struct gr_batch_info mbi;
        const uint8_t *mp;
        int64_t prev = leo(log) - 1;
        gr_batch_iter_init(&mit, batches, len);
        while (gr_batch_iter_next(&mit, &mbi, &mp) == 1) {
            if (mbi.BaseOffset <= prev) monotonic = false;
            prev = gr_batch_info_last_offset(&mbi);
        }
    }
    if (!monotonic) {
        gr_warn(LOGGER, "follower append to '%s' rejected: offsets %" PRId64 "..%" PRId64 " do not rise from the "
                "log end offset %" PRId64, log->dir, sum.first_offset, sum.last_offset, leo(log));
        info->error = GR_KERR_OFFSET_OUT_OF_RANGE;
        rc = -ERANGE;
        goto out;
    }
    rc = write_batches(log, batches, len, sum.max_timestamp);
    /* Epochs of whatever got written (all of it unless an I/O error struck midway). */
    int64_t end = leo(log);
    struct gr_batch_iter it;
    struct gr_batch_info bi;
    const uint8_t *p;
    gr_batch_iter_init(&it, batches, len);
    size_t written = 0;
    while (gr_batch_iter_next(&it, &bi, &p) && bi.BaseOffset < end) {
        gr_epoch_cache_assign(&log->ec, bi.PartitionLeaderEpoch, bi.BaseOffset);
        written = (size_t)(p - batches) + bi.size;
    }
    /* Followers build the leader's producer state from what they replicate (no checks). */
    maybe_expire_producers(log);
    gr_pstate_load_batches(log->ps, batches, written, end);
    if (rc) {
        info->error = GR_KERR_KAFKA_STORAGE_ERROR;
        goto out;
    }
    info->first_offset = sum.first_offset;
    info->last_offset = sum.last_offset;
    info->max_timestamp = sum.max_timestamp;
    info->offset_of_max_timestamp = sum.offset_of_max_timestamp;
    info->record_count = sum.records;
    info->batch_count = sum.batches;
    rc = after_append(log, sum.records);
    if (rc) info->error = GR_KERR_KAFKA_STORAGE_ERROR;
out:
    gr_plog_unlock(log);
    return rc;
}

/* ---- read ---- */

/* Index of the last segment with base_offset <= offset (0 if none). */
static size_t seg_for_offset(struct gr_plog *log, int64_t offset) {
    size_t lo = 0, hi = log->n_segs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (log->segs[mid]->base_offset <= offset) lo = mid + 1;
        else hi = mid;
    }
    return lo ? lo - 1 : 0;
}

int gr_plog_read(struct gr_plog *log, int64_t offset, int32_t max_bytes, int64_t max_offset, bool min_one_batch,
                struct gr_plog_read_result *res) {
    memset(res, 0, sizeof *res);
    res->first_offset = -1;
    res->next_offset = offset;
    pthread_mutex_lock(&log->mu);
    res->log_start_offset = log->log_start_offset;
    res->log_end_offset = leo(log);
    int rc = 0;
    if (offset < log->log_start_offset || offset > leo(log)) {
        res->error = GR_KERR_OFFSET_OUT_OF_RANGE;
        goto out;
    }
    /* Under the lock: locate the batch (index + header walk) and take a descriptor of its
     * segment; the bulk read happens after the lock is released (Kafka reads FileRecords slices
     * without the log's lock too). A segment deleted meanwhile stays readable through the
     * descriptor; a truncation meanwhile only shortens what is read. */
    int fd = -1;
    int64_t pos = 0, size = 0;
    char *path = NULL;
    for (size_t i = seg_for_offset(log, offset); i < log->n_segs; i++) {
        struct gr_segment *seg = log->segs[i];
        rc = gr_segment_find(seg, offset, &pos);
        if (rc) break;
        if (pos >= seg->size) continue; /* nothing at or after offset here */
        fd = gr_segment_dup_fd(seg);
        if (fd < 0) rc = fd;
        size = seg->size;
        path = gr_strdup(GR_SEG_LOG_PATH(seg));
        break;
    }
    gr_plog_unlock(log);
    if (fd >= 0) {
        rc = gr_segment_read_fd(fd, path, size, pos, max_bytes, max_offset, min_one_batch, &res->data, &res->len,
                                &res->first_offset, &res->next_offset);
        close(fd);
    }
    free(path);
    return rc;
out:
    gr_plog_unlock(log);
    return rc;
}

int gr_plog_read_slice(struct gr_plog *log, int64_t offset, int32_t max_bytes, int64_t max_offset, bool min_one_batch,
                       struct gr_plog_slice *out) {
    memset(out, 0, sizeof *out);
    out->fd = -1;
    out->first_offset = -1;
    out->next_offset = offset;
    pthread_mutex_lock(&log->mu);
    out->log_start_offset = log->log_start_offset;
    out->log_end_offset = leo(log);
    int rc = 0;
    if (offset < log->log_start_offset || offset > leo(log)) {
        out->error = GR_KERR_OFFSET_OUT_OF_RANGE;
        gr_plog_unlock(log);
        return 0;
    }
    int fd = -1;
    int64_t pos = 0, size = 0;
    char *path = NULL;
    for (size_t i = seg_for_offset(log, offset); i < log->n_segs; i++) {
        struct gr_segment *seg = log->segs[i];
        rc = gr_segment_find(seg, offset, &pos);
        if (rc) break;
        if (pos >= seg->size) continue;
        fd = gr_segment_dup_fd(seg);
        if (fd < 0) rc = fd;
        size = seg->size;
        path = gr_strdup(GR_SEG_LOG_PATH(seg));
        break;
    }
    gr_plog_unlock(log);
    if (fd >= 0) {
        size_t len = 0;
        rc = gr_segment_slice_fd(fd, path, size, pos, max_bytes, max_offset, min_one_batch, &len, &out->first_offset,
                                 &out->next_offset);
        if (rc == 0 && len > 0) {
            out->fd = fd;
            out->pos = pos;
            out->len = len;
        } else {
            close(fd);
        }
    }
    free(path);
    return rc;
}

/* ---- truncation ---- */

static int truncate_fully_locked(struct gr_plog *log, int64_t offset) {
    int drc = ensure_dir_locked(log); /* the new segment's files go into it */
    if (drc) return drc;
    drop_segments_from(log, 0);
    struct gr_segment *seg = gr_segment_new(log->dir, offset);
    segs_push(log, seg);
    int rc = gr_segment_create(seg);
    int drc2 = fsync_dir(log->dir);
    if (rc == 0) rc = drc2;
    log->log_start_offset = offset;
    log->recovery_point = offset;
    gr_epoch_cache_clear(&log->ec);
    gr_pstate_truncate_fully(log->ps, offset);
    gr_txn_index_clear(log->ti);
    log->n_unrepl = 0;
    if (log->on_truncated) log->on_truncated(log->on_truncated_ctx, offset);
    gr_info(LOGGER, "truncated '%s' fully; log now starts at offset %" PRId64, log->dir, offset);
    return rc;
}

int gr_plog_truncate_fully_and_start_at(struct gr_plog *log, int64_t offset) {
    if (offset < 0) return -EINVAL;
    pthread_mutex_lock(&log->mu);
    int rc = truncate_fully_locked(log, offset);
    gr_plog_unlock(log);
    return rc;
}

int gr_plog_truncate_to(struct gr_plog *log, int64_t offset) {
    if (offset < 0) return -EINVAL;
    pthread_mutex_lock(&log->mu);
    int rc = 0;
    int64_t old_leo = leo(log);
    if (offset >= old_leo) goto out;
    if (offset < log->segs[0]->base_offset) {
        rc = truncate_fully_locked(log, offset);
        goto out;
    }
    log->seg_gen++;
    size_t keep = seg_for_offset(log, offset) + 1;
    bool active_changed = keep < log->n_segs;
    drop_segments_from(log, keep);
    struct gr_segment *a = active(log);
    if (active_changed) rc = gr_segment_activate(a);
    if (rc == 0) rc = gr_segment_truncate_to(a, offset);
    if (log->recovery_point > leo(log)) log->recovery_point = leo(log);
    gr_epoch_cache_truncate_from_end(&log->ec, leo(log));
    gr_txn_index_truncate(log->ti, leo(log));
    while (log->n_unrepl && log->unrepl[log->n_unrepl - 1].last >= leo(log)) log->n_unrepl--;
    /* Kafka's truncateTo -> loadProducerState(targetOffset): snapshot + replay up to the new end. */
    int prc = rebuild_producer_state(log, leo(log));
    if (rc == 0) rc = prc;
    if (log->on_truncated) log->on_truncated(log->on_truncated_ctx, leo(log));
    gr_info(LOGGER, "truncated '%s' to offset %" PRId64 " (log end offset %" PRId64 " -> %" PRId64 ")", log->dir,
            offset, old_leo, leo(log));
out:
    gr_plog_unlock(log);
    return rc;
}

/* ---- offsets ---- */

int64_t gr_plog_start_offset(struct gr_plog *log) {
    return atomic_load_explicit(&log->pub_log_start, memory_order_acquire); /* log_internal.h */
}

int gr_plog_maybe_increment_log_start_offset(struct gr_plog *log, int64_t new_start) {
    pthread_mutex_lock(&log->mu);
    int rc = 0;
    if (new_start > leo(log)) {
        rc = -ERANGE;
    } else if (new_start > log->log_start_offset) {
        gr_info(LOGGER, "incrementing log start offset of '%s' to %" PRId64, log->dir, new_start);
        log->log_start_offset = new_start;
        gr_epoch_cache_truncate_from_start(&log->ec, new_start);
        gr_pstate_truncate_head(log->ps, new_start);
    }
    gr_plog_unlock(log);
    return rc;
}

int64_t gr_plog_log_start_checkpoint_value(struct gr_plog *log) {
    pthread_mutex_lock(&log->mu);
    int64_t v = log->log_start_offset > log->segs[0]->base_offset ? log->log_start_offset : -1;
    gr_plog_unlock(log);
    return v;
}

int64_t gr_plog_end_offset(struct gr_plog *log) {
    return atomic_load_explicit(&log->pub_leo, memory_order_acquire); /* log_internal.h */
}

int64_t gr_plog_recovery_point(struct gr_plog *log) {
    pthread_mutex_lock(&log->mu);
    int64_t v = log->recovery_point;
    gr_plog_unlock(log);
    return v;
}

int64_t gr_plog_size_bytes(struct gr_plog *log) {
    pthread_mutex_lock(&log->mu);
    int64_t v = 0;
    for (size_t i = 0; i < log->n_segs; i++) v += log->segs[i]->size;
    gr_plog_unlock(log);
    return v;
}

int gr_plog_segment_count(struct gr_plog *log) {
    pthread_mutex_lock(&log->mu);
    int v = (int)log->n_segs;
    gr_plog_unlock(log);
    return v;
}

const char *gr_plog_dir(const struct gr_plog *log) { return log->dir; }

int gr_plog_offset_for_timestamp(struct gr_plog *log, int64_t ts, int64_t *offset_out, int64_t *ts_out) {
    *offset_out = -1;
    *ts_out = -1;
    pthread_mutex_lock(&log->mu);
    int rc = 0;
    if (ts == GR_LIST_OFFSETS_EARLIEST) {
        *offset_out = log->log_start_offset;
    } else if (ts == GR_LIST_OFFSETS_LATEST) {
        *offset_out = leo(log);
    } else if (ts == GR_LIST_OFFSETS_MAX_TIMESTAMP) {
        size_t best = 0; /* Kafka's maxBy: the first segment with the largest maxTimestampSoFar */
        for (size_t i = 1; i < log->n_segs; i++)
            if (log->segs[i]->max_timestamp > log->segs[best]->max_timestamp) best = i;
        if (log->n_segs > 0) rc = gr_segment_find_max_timestamp(log->segs[best], offset_out, ts_out);
        if (rc > 0) rc = 0;
        else if (rc < 0) *offset_out = *ts_out = -1;
    } else {
        /* Kafka's fetchOffsetByTimestamp: the first segment whose largest timestamp >= ts
         * (segments are tried in order; a later one can answer when the first holds only
         * records below the log start offset). */
        for (size_t i = seg_for_offset(log, log->log_start_offset); i < log->n_segs; i++) {
            rc = gr_segment_find_timestamp(log->segs[i], ts, log->log_start_offset, offset_out, ts_out);
            if (rc != 0) break;
        }
        if (rc > 0) rc = 0;
        else if (rc < 0) *offset_out = *ts_out = -1;
    }
    gr_plog_unlock(log);
    return rc;
}

/* ---- leader epochs ---- */

int gr_plog_end_offset_for_epoch(struct gr_plog *log, int32_t epoch, int64_t *end_offset, int32_t *epoch_out) {
    pthread_mutex_lock(&log->mu);
    gr_epoch_cache_end_offset_for(&log->ec, epoch, leo(log), end_offset, epoch_out);
    gr_plog_unlock(log);
    return 0;
}

int32_t gr_plog_latest_epoch(struct gr_plog *log) {
    pthread_mutex_lock(&log->mu);
    int32_t e = log->ec.n ? log->ec.e[log->ec.n - 1].epoch : -1;
    gr_plog_unlock(log);
    return e;
}

int gr_plog_epoch_entries(struct gr_plog *log, int32_t *epochs, int64_t *start_offsets, int max) {
    pthread_mutex_lock(&log->mu);
    int n = (int)log->ec.n;
    for (int i = 0; i < n && i < max; i++) {
        epochs[i] = log->ec.e[i].epoch;
        start_offsets[i] = log->ec.e[i].start_offset;
    }
    gr_plog_unlock(log);
    return n;
}

/* ---- retention ---- */

/* Largest timestamp of a segment, or its file mtime when no batch carries one. */
static int64_t segment_largest_ts(struct gr_segment *seg) {
    if (seg->max_timestamp >= 0) return seg->max_timestamp;
    struct stat st;
    if (stat(GR_SEG_LOG_PATH(seg), &st) == 0) return (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
    return seg->created_ms;
}

/* Kafka's deletableSegments bound: segment i may go only if all of it lies below the high
 * watermark (its successor's base, or the log end offset for the last one) and, if it is the
 * last, it holds data (an empty active segment is never deleted). */
static bool below_hw(struct gr_plog *log, size_t i, int64_t hw) {
    bool last = i + 1 == log->n_segs;
    int64_t upper = last ? leo(log) : log->segs[i + 1]->base_offset;
    return hw >= upper && !(last && log->segs[i]->size == 0);
}

int gr_plog_apply_retention(struct gr_plog *log, int64_t hw, int64_t retention_ms, int64_t retention_bytes,
                            int64_t now_ms) {
    pthread_mutex_lock(&log->mu);
    size_t del = 0; /* segments [0, del) will go */
    if (!log->cfg.cleanup_delete) retention_ms = retention_bytes = -1;
    /* Kafka's deleteOldSegments: by time, then by size, then below the log start offset */
    if (retention_ms >= 0)
        while (del < log->n_segs && below_hw(log, del, hw) &&
               now_ms - segment_largest_ts(log->segs[del]) > retention_ms)
            del++;
    if (retention_bytes >= 0) {
        int64_t total = 0;
        for (size_t i = del; i < log->n_segs; i++) total += log->segs[i]->size;
        int64_t diff = total - retention_bytes;
        while (del < log->n_segs && below_hw(log, del, hw) && diff - log->segs[del]->size >= 0) {
            diff -= log->segs[del]->size;
            del++;
        }
    }
    while (del + 1 < log->n_segs && below_hw(log, del, hw) && log->segs[del + 1]->base_offset <= log->log_start_offset)
        del++;
    if (del == log->n_segs) {
        /* Kafka's deleteSegments: a log keeps at least one segment; roll a new (empty) active one
         * at the log end offset before all the others go */
        int rrc = roll(log);
        if (rrc) {
            gr_error(LOGGER, "cannot roll '%s' to delete its last segment by retention: %s", log->dir,
                     gr_strerror(rrc));
            del--;
        }
    }
    int rc = 0;
    for (size_t i = 0; i < del; i++) {
        struct gr_segment *seg = log->segs[i];
        gr_info(LOGGER, "deleting segment %020" PRId64 " of '%s' (%" PRId64 " bytes) by retention", seg->base_offset,
                log->dir, seg->size);
        int drc = gr_segment_delete_files(seg);
        if (drc && rc == 0) rc = drc;
        gr_segment_free(seg);
    }
    if (del) {
        memmove(log->segs, log->segs + del, (log->n_segs - del) * sizeof *log->segs);
        log->n_segs -= del;
        /* no seg_gen bump: retention removes a prefix only, which a running cleaner pass
         * tolerates (it skips its groups that lost a segment, swaps the others; Kafka's
         * replaceSegments filters the old segments already deleted). Cancelling the pass instead
         * livelocked compact,delete logs whose retention deletes a segment every check. */
        log->log_start_offset = GR_MAX(log->log_start_offset, log->segs[0]->base_offset);
        gr_epoch_cache_truncate_from_start(&log->ec, log->log_start_offset);
        gr_pstate_truncate_head(log->ps, log->log_start_offset);
        gr_txn_index_drop_segments_below(log->ti, log->segs[0]->base_offset);
    }
    gr_plog_unlock(log);
    return rc ? rc : (int)del;
}

/* ---- transactions ---- */

/* Producer-state listener (under log->mu): a marker ended a transaction. */
static void on_txn_completed(void *ctx, const struct gr_pstate_completed_txn *t) {
    struct gr_plog *log = ctx;
    if (!log->n_unrepl || t->last_offset > log->unrepl[log->n_unrepl - 1].last) {
        if (log->n_unrepl == log->cap_unrepl) {
            log->cap_unrepl = log->cap_unrepl ? log->cap_unrepl * 2 : 8;
            log->unrepl = gr_realloc(log->unrepl, (size_t)log->cap_unrepl * sizeof *log->unrepl);
        }
        log->unrepl[log->n_unrepl++] = (struct gr_txn_range){t->first_offset, t->last_offset};
    }
    if (!t->aborted) return;
    int64_t ongoing = t->first_open_offset;
    struct gr_aborted_txn e = {t->producer_id, t->first_offset, t->last_offset,
                               ongoing >= 0 ? ongoing : t->last_offset + 1, -1};
    /* the file of the marker's own segment (Kafka's), also for a marker replayed at open */
    int64_t base = t->last_offset < leo(log) ? log->segs[seg_for_offset(log, t->last_offset)]->base_offset
                                             : active(log)->base_offset;
    gr_txn_index_append(log->ti, base, &e);
}

static void prune_unreplicated_locked(struct gr_plog *log, int64_t hw) {
    int k = 0;
    while (k < log->n_unrepl && log->unrepl[k].last < hw) k++;
    if (k) {
        memmove(log->unrepl, log->unrepl + k, (size_t)(log->n_unrepl - k) * sizeof *log->unrepl);
        log->n_unrepl -= k;
    }
}

void gr_plog_txn_hw_moved(struct gr_plog *log, int64_t hw) {
    pthread_mutex_lock(&log->mu);
    prune_unreplicated_locked(log, hw);
    gr_plog_unlock(log);
}

int64_t gr_plog_last_stable_offset(struct gr_plog *log, int64_t hw) {
    pthread_mutex_lock(&log->mu);
    prune_unreplicated_locked(log, hw);
    int64_t first = gr_pstate_first_ongoing_offset(log->ps);
    for (int i = 0; i < log->n_unrepl; i++)
        if (first < 0 || log->unrepl[i].first < first) first = log->unrepl[i].first;
    if (first >= 0 && first < log->log_start_offset) first = log->log_start_offset;
    gr_plog_unlock(log);
    return first >= 0 && first < hw ? first : hw;
}

int gr_plog_collect_aborted(struct gr_plog *log, int64_t fetch_offset, int64_t upper_bound,
                            struct gr_aborted_txn **out) {
    pthread_mutex_lock(&log->mu);
    int total = 0;
    gr_txn_index_collect(log->ti, fetch_offset, upper_bound, NULL, 0, &total);
    *out = total ? gr_malloc((size_t)total * sizeof **out) : NULL;
    int n = total ? gr_txn_index_collect(log->ti, fetch_offset, upper_bound, *out, total, NULL) : 0;
    gr_plog_unlock(log);
    return n;
}

bool gr_plog_txn_needs_verification(struct gr_plog *log, int64_t producer_id, int16_t epoch) {
    pthread_mutex_lock(&log->mu);
    bool r = gr_pstate_needs_verification(log->ps, producer_id, epoch);
    gr_plog_unlock(log);
    return r;
}

uint64_t gr_plog_txn_start_verification(struct gr_plog *log, int64_t producer_id, int16_t epoch) {
    pthread_mutex_lock(&log->mu);
    uint64_t token = gr_pstate_start_verification(log->ps, producer_id, epoch, gr_wall_ms());
    gr_plog_unlock(log);
    return token;
}

void gr_plog_txn_end_verification(struct gr_plog *log, int64_t producer_id, uint64_t token, bool verified) {
    pthread_mutex_lock(&log->mu);
    gr_pstate_end_verification(log->ps, producer_id, token, verified);
    gr_plog_unlock(log);
}

/* ---- names ---- */

int gr_plog_parse_dir_name(const char *name, char *topic, size_t topic_size, int32_t *partition) {
    const char *dash = strrchr(name, '-');
    if (!dash || dash == name || !dash[1]) return -EINVAL;
    int64_t v = 0;
    for (const char *p = dash + 1; *p; p++) {
        if (*p < '0' || *p > '9') return -EINVAL;
        v = v * 10 + (*p - '0');
        if (v > INT32_MAX) return -EINVAL;
    }
    size_t tl = (size_t)(dash - name);
    if (tl >= topic_size) return -EINVAL;
    memcpy(topic, name, tl);
    topic[tl] = '\0';
    *partition = (int32_t)v;
    return 0;
}

/* ---- helpers shared with log_cleaner.c (log_internal.h) ---- */

size_t gr_plog_seg_for_offset_locked(struct gr_plog *log, int64_t offset) { return seg_for_offset(log, offset); }

int gr_plog_fsync_dir(const char *dir) { return fsync_dir(dir); }
