/* Internal to src/storage: a segment's time index (<base>.timeindex), Kafka's format.
 *
 * On disk: a flat array of 12-byte big-endian entries, no header:
 *   timestamp i64 | relativeOffset u32 (offset - segment base)
 * Timestamps rise strictly (an entry is added only when its timestamp exceeds the last one's,
 * Kafka's TimeIndex.maybeAppend); relative offsets never fall. An entry (T, O) says: no record
 * before offset O... precisely, the largest timestamp among the segment's records up to offset O
 * is T.
 *
 * Like the offset index (segment.c) the whole index lives in memory; the file holds the prefix
 * e[0..n_file). Not locked: the owning segment's log mutex protects it. Pure data structure, no
 * I/O (segment.c reads and writes the file). */
#ifndef GR_STORAGE_TIME_INDEX_H
#define GR_STORAGE_TIME_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GR_TIME_INDEX_ENTRY_SIZE 12

struct gr_time_entry {
    int64_t ts;
    uint32_t rel;
};

struct gr_time_index {
    struct gr_time_entry *e;
    size_t n, cap;
    size_t n_file;  /* e[0..n_file) are in the file */
    bool unsynced;  /* the file was written since its last fsync */
};

void gr_time_index_free(struct gr_time_index *t);
/* Adds (ts, rel) when ts > the last entry's timestamp (and ts >= 0); returns true if added.
 * rel below the last entry's is refused (false), as Kafka refuses it. */
bool gr_time_index_maybe_append(struct gr_time_index *t, int64_t ts, uint32_t rel);
/* Drops entries with rel >= rel_limit (Kafka's truncateTo(offset)). */
void gr_time_index_truncate(struct gr_time_index *t, uint32_t rel_limit);
/* Index of the greatest entry with ts <= target, or -1 when none (then start at the segment's
 * first batch). */
long gr_time_index_lookup(const struct gr_time_index *t, int64_t target);
/* Encodes e[from..n) into out ((n - from) * 12 bytes). */
void gr_time_index_encode(const struct gr_time_index *t, size_t from, uint8_t *out);
/* Replaces the contents with the file bytes buf[0..len). Valid: len a multiple of 12, timestamps
 * >= 0 and strictly rising, relative offsets non-decreasing and <= max_rel. Returns 0, or -1
 * (the index is then empty and must be rebuilt). n_file = n. */
int gr_time_index_decode(struct gr_time_index *t, const uint8_t *buf, size_t len, int64_t max_rel);

#endif
