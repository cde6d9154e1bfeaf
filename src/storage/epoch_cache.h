/* Internal to src/storage: the leader-epoch cache of one partition log (Kafka's
 * LeaderEpochFileCache), persisted in <partition dir>/leader-epoch-checkpoint (format in
 * checkpoint.h). Not locked: the owning gr_log's mutex protects it. */
#ifndef GR_STORAGE_EPOCH_CACHE_H
#define GR_STORAGE_EPOCH_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define GR_LEADER_EPOCH_CHECKPOINT "leader-epoch-checkpoint"

struct gr_epoch_entry {
    int32_t epoch;
    int64_t start_offset;
};

struct gr_epoch_cache {
    const char *dir; /* borrowed (the owning log's directory); the file is dir/GR_LEADER_EPOCH_CHECKPOINT */
    struct gr_epoch_entry *e;
    size_t n, cap;
};

/* Loads dir/leader-epoch-checkpoint (missing file = empty cache; malformed = warning + empty
 * cache, rewritten). dir is borrowed: it must outlive the cache. Returns 0 or -errno. */
int gr_epoch_cache_load(struct gr_epoch_cache *ec, const char *dir);
/* An empty cache for dir without reading it (a log directory just created). dir borrowed. */
void gr_epoch_cache_init(struct gr_epoch_cache *ec, const char *dir);
void gr_epoch_cache_release(struct gr_epoch_cache *ec);
/* Kafka's assign(): no-op when epoch equals the latest and start_offset is not lower; else
 * removes trailing entries with epoch >= epoch or start >= start_offset, appends, persists.
 * Negative epochs/offsets are ignored. Returns 0 or -errno (persist failure). */
int gr_epoch_cache_assign(struct gr_epoch_cache *ec, int32_t epoch, int64_t start_offset);
/* Removes entries with start_offset >= end_offset (persists if changed). */
int gr_epoch_cache_truncate_from_end(struct gr_epoch_cache *ec, int64_t end_offset);
/* Removes entries with start_offset <= start_offset, keeping the last of them re-based at
 * start_offset (persists if changed). */
int gr_epoch_cache_truncate_from_start(struct gr_epoch_cache *ec, int64_t start_offset);
int gr_epoch_cache_clear(struct gr_epoch_cache *ec);
/* Kafka's endOffsetFor() (see gr_plog_end_offset_for_epoch in log.h). */
void gr_epoch_cache_end_offset_for(const struct gr_epoch_cache *ec, int32_t epoch, int64_t log_end_offset,
                                   int64_t *end_offset, int32_t *epoch_out);
/* Writes the checkpoint file atomically. */
int gr_epoch_cache_persist(const struct gr_epoch_cache *ec);

#endif
