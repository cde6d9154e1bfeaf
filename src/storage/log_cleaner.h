/* Log compaction (Kafka 2.7's LogCleaner / Cleaner / SkimpyOffsetMap), internal to src/storage.
 * The log manager (log_manager.c) runs log.cleaner.threads threads that pick the dirtiest
 * compacted log (gr_plog_cleanable) and clean it (gr_plog_clean); formats and rules in
 * docs/STORAGE.md "Log compaction". Thread-safety: gr_plog_* take the log's mutex; the offset
 * map belongs to one thread. */
#ifndef GR_STORAGE_LOG_CLEANER_H
#define GR_STORAGE_LOG_CLEANER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gr_plog;

/* Open-addressing map of 24-byte slots: 16-byte key hash, 8-byte offset. */
struct gr_offset_map {
    uint8_t *slots;
    size_t nslots, entries, max_entries; /* max_entries = nslots x load factor */
    int64_t latest_offset;               /* largest offset put, -1 when empty */
};
void gr_offset_map_init(struct gr_offset_map *m, int64_t memory_bytes, double load_factor);
void gr_offset_map_free(struct gr_offset_map *m);
/* Records key -> offset; false when a new key would exceed max_entries (nothing stored). */
bool gr_offset_map_put(struct gr_offset_map *m, const uint8_t *key, size_t klen, int64_t offset);
/* The offset stored for key, or -1. */
int64_t gr_offset_map_get(const struct gr_offset_map *m, const uint8_t *key, size_t klen);

/* What the cleaner manager needs to choose a log (Kafka's LogToClean / cleanableOffsets). */
struct gr_cleanable {
    bool compact;             /* cleanup.policy includes compact */
    int64_t first_dirty;      /* the checkpoint, reset to the log start if out of range */
    bool checkpoint_reset;
    int64_t first_uncleanable;/* active segment base, or the first segment within min.compaction.lag.ms */
    int64_t clean_bytes, cleanable_bytes;
    double dirty_ratio, min_ratio;
    bool must_clean;          /* max.compaction.lag.ms exceeded by a dirty segment */
};
void gr_plog_cleanable(struct gr_plog *log, int64_t checkpoint, int64_t now_ms, struct gr_cleanable *out);

struct gr_cleaner_params {
    int64_t dedupe_buffer_bytes;     /* log.cleaner.dedupe.buffer.size / threads */
    double load_factor;              /* log.cleaner.io.buffer.load.factor */
    double io_max_bytes_per_second;  /* log.cleaner.io.max.bytes.per.second */
    int64_t now_ms;                  /* wall clock */
    const atomic_bool *abort;        /* NULL, or set by another thread to end the pass early
                                      * (Kafka's abortCleaning): gr_plog_clean then returns
                                      * -ECANCELED within ~50 ms, having swapped nothing since */
};
struct gr_clean_stats {
    int64_t first_dirty, end_offset; /* end_offset: the new cleaner checkpoint */
    int64_t bytes_read, bytes_before, bytes_after;
    int64_t records_read, records_kept;
    int segments_cleaned;
};
/* One cleaning pass. Returns 0 (st->end_offset is the next checkpoint), -ECANCELED (aborted),
 * GR_ECORRUPT (a batch read failed its header/CRC check or its records could not be decoded:
 * nothing of that group was swapped, the error is logged with the segment and offset; Kafka's
 * CorruptRecordException, the caller marks the log uncleanable) or -errno (an I/O error: the
 * caller reports it to the log dir failure flow). Groups swapped before the error stay cleaned. */
int gr_plog_clean(struct gr_plog *log, int64_t first_dirty_checkpoint, const struct gr_cleaner_params *p,
                  struct gr_clean_stats *st);

/* At open: deletes *.cleaned files and completes every <base>.log.swap (replacing the .log
 * segments whose base lies in the swap's offset range). Returns the number of swaps completed or
 * -errno. */
int gr_plog_complete_swaps(const char *dir);

#endif
