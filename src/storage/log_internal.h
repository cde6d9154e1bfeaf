/* Internal to src/storage: the partition log's struct, shared by log.c and log_cleaner.c (the
 * cleaner rewrites segments under the same mutex). Everything here is protected by `mu`, except
 * the published copies pub_leo / pub_log_start: written (release) by gr_plog_unlock, i.e. at the
 * end of every critical section, from the locked fields, and read without the lock by
 * gr_plog_end_offset / gr_plog_start_offset (issue 14: those were a mutex round trip per
 * partition per fetch round). A lock-free reader sees the value as of the last unlock, exactly
 * what a reader taking the lock would have seen had it come just before the current holder;
 * code that acts on the log based on the LEO reads leo() under the lock instead. */
#ifndef GR_STORAGE_LOG_INTERNAL_H
#define GR_STORAGE_LOG_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/epoch_cache.h"
#include "storage/log.h"
#include "storage/segment.h"

struct gr_segment;
struct gr_pstate;

struct gr_txn_index;

struct gr_plog {
    pthread_mutex_t mu;
    char *dir;
    struct gr_plog_config cfg;
    struct gr_segment **segs; /* sorted by base offset; the last one is active */
    size_t n_segs, cap_segs;
    int64_t log_start_offset;
    int64_t recovery_point;
    struct gr_epoch_cache ec;
    int64_t unflushed_messages;
    int64_t last_flush_ms; /* gr_mono_ms() */
    struct gr_pstate *ps;  /* producer state (idempotence); map end offset == LEO between calls */
    int64_t last_expiry_check_ms; /* gr_mono_ms() */
    uint64_t seg_gen; /* bumped whenever existing segments are cut or replaced, or removed other
                         than from the start by retention (not by a roll): the cleaner works
                         unlocked and checks it before its swap */
    /* transactions (log.c's log_txn section) */
    struct gr_txn_index *ti;        /* aborted transactions (.txnindex) */
    struct gr_txn_range { int64_t first, last; } *unrepl; /* completed, marker not yet below the HW */
    int n_unrepl, cap_unrepl;
    bool dir_unsynced; /* created here and the directory not fsynced yet: done by the first
                        * flush or roll (a new empty log costs no fsync, as in Kafka) */
    bool renamed_for_delete; /* gr_plog_rename_for_delete or _stray done: dir holds no more room */
    bool no_dir;       /* a new log whose directory does not exist yet: made by the first write
                        * of any file into it (ensure_dir_locked in log.c) */
    /* topic id (gr_plog_topic_id): has_topic_id; topic_id_unwritten = not yet in a
     * partition.metadata (no directory yet: ensure_dir_locked writes it); topic_id_bad = the
     * file exists but could not be read */
    struct gr_uuid topic_id;
    bool has_topic_id, topic_id_unwritten, topic_id_bad;
    gr_plog_truncated_fn on_truncated; /* gr_plog_set_truncation_hook */
    void *on_truncated_ctx;
    _Atomic int64_t pub_leo;       /* the active segment's next_offset at the last unlock */
    _Atomic int64_t pub_log_start; /* log_start_offset at the last unlock */
};

/* Publishes the log end offset and log start offset (see the top), then unlocks `mu`. Every
 * critical section of the log ends with it. */
static inline void gr_plog_unlock(struct gr_plog *log) {
    if (log->n_segs > 0)
        atomic_store_explicit(&log->pub_leo, log->segs[log->n_segs - 1]->next_offset, memory_order_release);
    atomic_store_explicit(&log->pub_log_start, log->log_start_offset, memory_order_release);
    pthread_mutex_unlock(&log->mu);
}

/* Index of the last segment with base_offset <= offset (0 if none). */
size_t gr_plog_seg_for_offset_locked(struct gr_plog *log, int64_t offset);
/* fsyncs a directory. 0 or -errno. */
int gr_plog_fsync_dir(const char *dir);

#endif
