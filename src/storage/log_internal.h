/* Internal to src/storage: the partition log's struct, shared by log.c and log_cleaner.c (the
 * cleaner rewrites segments under the same mutex). Everything here is protected by `mu`. */
#ifndef GR_STORAGE_LOG_INTERNAL_H
#define GR_STORAGE_LOG_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/epoch_cache.h"
#include "storage/log.h"

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
    uint64_t seg_gen; /* bumped whenever existing segments are removed, cut or replaced (not by
                         a roll): the cleaner works unlocked and checks it before its swap */
    /* transactions (log.c's log_txn section) */
    struct gr_txn_index *ti;        /* aborted transactions (.txnindex) */
    struct gr_txn_range { int64_t first, last; } *unrepl; /* completed, marker not yet below the HW */
    int n_unrepl, cap_unrepl;
    bool dir_unsynced; /* created here and the directory not fsynced yet: done by the first
                        * flush or roll (a new empty log costs no fsync, as in Kafka) */
};

/* Index of the last segment with base_offset <= offset (0 if none). */
size_t gr_plog_seg_for_offset_locked(struct gr_plog *log, int64_t offset);
/* fsyncs a directory. 0 or -errno. */
int gr_plog_fsync_dir(const char *dir);

#endif
