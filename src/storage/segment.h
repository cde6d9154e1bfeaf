/* Internal to src/storage: one log segment (<base>.log + <base>.index + <base>.timeindex). Not locked: the owning
 * gr_log's mutex protects it.
 *
 * Descriptors: no segment owns a descriptor. The active segment's .log descriptor lives in the
 * process-wide cache (fd_cache.h) and may be closed between calls; each operation pins it (and
 * reopens the file if it was evicted). Other segments open their .log for one operation. The
 * .index file is opened only to write it (see "Index persistence" in segment.c). */
#ifndef GR_STORAGE_SEGMENT_H
#define GR_STORAGE_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/batch.h"
#include "storage/fd_cache.h"
#include "storage/time_index.h"

/* One offset index entry (on disk: relativeOffset u32 BE, position u32 BE). */
struct gr_index_entry {
    uint32_t rel;
    uint32_t pos;
};

struct gr_segment {
    int64_t base_offset;
    int64_t next_offset; /* lastOffset + 1 of the last batch; base_offset when empty */
    int64_t size;        /* bytes of valid data */
    const char *dir;     /* the log's directory (borrowed: a log outlives its segments); file
                            paths are made when needed (GR_SEG_LOG_PATH, gr_segment_sibling_path) */
    bool active;                 /* the log's last segment: .log descriptor cached in `slot` */
    struct gr_fd_slot slot;
    struct gr_index_entry *idx;  /* the whole index, always in memory */
    size_t n_idx, cap_idx;
    size_t n_idx_file;           /* idx[0..n_idx_file) are written to the .index file */
    bool idx_unsynced;           /* the .index file was written since its last fsync */
    bool idx_stale, tidx_stale;  /* the file's content is unknown (not read at load): the next
                                    write rewrites it whole */
    int64_t bytes_since_index;
    struct gr_time_index ti;   /* the whole .timeindex, always in memory (written with .index) */
    int64_t max_timestamp;     /* largest batch maxTimestamp, -1 if none (Kafka's maxTimestampSoFar) */
    int64_t offset_of_max_ts;  /* lastOffset of the batch holding it, -1 if none */
    int64_t first_batch_ts;    /* maxTimestamp of the first batch (-1 none), for segment.ms */
    int64_t created_ms;        /* wall clock when created (file mtime when loaded) */
};

/* Callback for each valid batch found by recovery (e.g. to assign leader epochs). */
typedef void (*gr_segment_batch_cb)(void *arg, const struct gr_batch_info *bi);

#define GR_SEG_PATH_MAX 4096
/* Writes "<dir>/<base offset, 20 digits><ext>" (ext ".log", ".index", ".timeindex") into
 * buf[GR_SEG_PATH_MAX]. */
void gr_segment_sibling_path(const struct gr_segment *seg, const char *ext, char *buf);
/* The segment's .log path, written into buf[GR_SEG_PATH_MAX]; returns buf. */
const char *gr_segment_log_path(const struct gr_segment *seg, char *buf);
/* The .log path in a buffer living until the end of the enclosing block. */
#define GR_SEG_LOG_PATH(seg) gr_segment_log_path((seg), (char[GR_SEG_PATH_MAX]){0})

/* Allocates a segment object for `base` in `dir` (no I/O; dir is borrowed, see above). */
struct gr_segment *gr_segment_new(const char *dir, int64_t base);
/* Deactivates and frees memory (files stay; index entries not yet written are NOT written:
 * call gr_segment_persist_index first when the files are kept). */
void gr_segment_free(struct gr_segment *seg);
/* Makes a segment with no files yet the active one, without I/O: the .log is created (O_CREAT)
 * by the first operation that needs its descriptor (an append, an fsync), the index files by
 * the first index write after data arrived. Reads of an empty segment never open it. */
void gr_segment_activate_new(struct gr_segment *seg);
/* Makes a loaded segment the active one without opening it (the cache opens it on first use). */
void gr_segment_set_active(struct gr_segment *seg);
/* Creates (truncating) the segment's files and activates it. 0 or -errno. */
int gr_segment_create(struct gr_segment *seg);
/* Makes an existing segment the active one: its .log descriptor goes through the fd cache
 * (opened once now to check it, O_CREAT). 0 or -errno. */
int gr_segment_activate(struct gr_segment *seg);
/* Closes the cached descriptor (if any); the segment is no longer active. */
void gr_segment_deactivate(struct gr_segment *seg);
/* Unlinks the files (.log, .index and a Kafka .timeindex if present) and deactivates. */
int gr_segment_delete_files(struct gr_segment *seg);
/* Writes index entries not yet in the .index / .timeindex files (no fsync). 0 or -errno. */
int gr_segment_persist_index(struct gr_segment *seg);
/* Kafka's onBecomeInactiveSegment / close: adds the final time-index entry (max timestamp, its
 * offset) when it is newer than the last one. In memory; written by the next persist/fsync. */
void gr_segment_seal_time_index(struct gr_segment *seg);
/* True when the offset index (8-byte entries) or the time index (12-byte entries, last slot
 * reserved) has reached index_max_bytes: the segment must roll (Kafka's shouldRoll). */
bool gr_segment_index_full(const struct gr_segment *seg, int32_t index_max_bytes);

/* Full recovery scan of the .log file: every batch is validated (CRC, records, offsets
 * increasing from min_offset); at the first invalid byte the file is truncated. The index is
 * rebuilt and rewritten. *truncated_bytes gets what was cut. cb (may be NULL) sees each valid
 * batch. Returns 0 or -errno. */
int gr_segment_recover(struct gr_segment *seg, int64_t min_offset, int32_t index_interval, gr_segment_batch_cb cb,
                       void *arg, int64_t *truncated_bytes);
/* Cheap load of a segment below the recovery point: size from the file, index loaded and
 * sanity-checked (rebuilt by a header walk if bad). next_offset is found by walking headers
 * from the last index entry. Returns 0, -errno, or GR_ECORRUPT if the header walk does not end
 * exactly at the end of the file (the caller then runs gr_segment_recover). */
int gr_segment_load(struct gr_segment *seg, int32_t index_interval);

/* Appends validated batches buf[0..len) (offsets already assigned, first >= next_offset) at the
 * end of the active segment and indexes them in memory (the .index file is written at the next
 * fsync, truncation or gr_segment_persist_index). On a write error the file is cut back. */
int gr_segment_append(struct gr_segment *seg, const uint8_t *buf, size_t len, int32_t index_interval);

/* Finds the first batch whose lastOffset >= offset: *pos_out its position (or size when none). */
int gr_segment_find(struct gr_segment *seg, int64_t offset, int64_t *pos_out);

/* Reads whole batches from position pos (see gr_plog_read for the rules). *data is malloc'd
 * (NULL when *len == 0); *first gets the first batch's base offset, *next its last offset + 1. */
int gr_segment_read(struct gr_segment *seg, int64_t pos, int64_t max_bytes, int64_t max_offset, bool min_one,
                    uint8_t **data, size_t *len, int64_t *first, int64_t *next);

/* The same on an open descriptor of the segment's .log whose valid size was seg_size when the
 * position was found: used without the log's lock (a concurrent truncation only shortens the
 * result). path is for messages. */
int gr_segment_read_fd(int fd, const char *path, int64_t seg_size, int64_t pos, int64_t max_bytes,
                       int64_t max_offset, bool min_one, uint8_t **data, size_t *len, int64_t *first, int64_t *next);
/* Like gr_segment_read_fd without reading the data: walks batch headers from pos and returns
 * in *len the bytes of whole batches the same rules would return (for sendfile). */
int gr_segment_slice_fd(int fd, const char *path, int64_t seg_size, int64_t pos, int64_t max_bytes,
                        int64_t max_offset, bool min_one, size_t *len, int64_t *first, int64_t *next);
/* A descriptor of the .log the caller owns and closes (a dup of the cached one for the active
 * segment, a fresh O_RDONLY one otherwise), readable even after the file is unlinked. fd or
 * -errno. */
int gr_segment_dup_fd(struct gr_segment *seg);

/* Cuts the segment at the first batch with lastOffset >= offset (drops index entries beyond). */
int gr_segment_truncate_to(struct gr_segment *seg, int64_t offset);

/* First record with timestamp >= ts and offset >= min_offset in this segment (Kafka's
 * findOffsetByTimestamp): the time index gives the greatest entry <= ts, the offset index its
 * position, then batches are walked; a compressed batch is decompressed to find the record. 1
 * found, 0 not found, <0 error. */
int gr_segment_find_timestamp(struct gr_segment *seg, int64_t ts, int64_t min_offset, int64_t *offset_out,
                              int64_t *ts_out);

/* The record holding this segment's largest timestamp (Kafka 3.9's MAX_TIMESTAMP look-up, KIP-734):
 * the first batch from offset_of_max_ts's indexed position whose maxTimestamp is the segment's,
 * and in it the first record carrying that timestamp (compressed batches decompressed, as
 * gr_segment_find_timestamp). 1 found, 0 none (no timestamped batch), <0 error. */
int gr_segment_find_max_timestamp(struct gr_segment *seg, int64_t *offset_out, int64_t *ts_out);

/* Writes pending index entries, then fdatasyncs .log and .index (opening them if needed; the
 * active segment's .log is reopened through the cache if it was evicted: fsync works on the
 * file, so data written through the closed descriptor is synced too). */
int gr_segment_fsync(struct gr_segment *seg);

#endif
