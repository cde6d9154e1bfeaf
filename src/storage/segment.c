/* Log segments: the .log file of batches and its sparse .index (formats in docs/STORAGE.md).
 *
 * Index rule (same on append and on recovery, as Kafka's LogSegment): before a batch at
 * position P is added, if more than index_interval bytes were added since the last indexed
 * position, an entry (lastOffset(batch) - base, P) is added. A look-up for offset O takes the
 * last entry with relativeOffset <= O - base (or position 0) and walks batch headers forward to
 * the first batch with lastOffset >= O.
 *
 * Index persistence: the index of every segment is kept whole in memory (idx[0..n_idx)); the
 * .index file holds the prefix idx[0..n_idx_file). Appends add entries in memory only, so no
 * .index descriptor is held between calls; the file is brought up to date (open, pwrite the
 * missing tail, close) by gr_segment_fsync (flush and roll, which also fdatasync it),
 * gr_segment_truncate_to and recovery (whole rewrite), and gr_segment_persist_index (clean
 * close). Crash rule: the .index file is a cache derived from the .log, never the truth.
 * After a crash the file may miss the entries of data appended since the last flush; that data
 * lies above the recovery point, so its segment is recovered and the index rebuilt from the
 * batches. When a segment is only loaded (below the recovery point), the header walk from the
 * last file entry to the end of the .log re-applies the index rule, so any entry missing from
 * the file is re-derived in memory (and written at the next persist).
 *
 * Descriptors: see segment.h and fd_cache.h. */
#include "storage/segment.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "common/be.h"
#include "storage/recompression.h"

#define LOGGER "storage.segment"

/* Upper bound of one read's copy (bigger max_bytes just return less, as Kafka may). */
#define GR_SEGMENT_READ_MAX (32 << 20)

/* "<dir>/<base>.log" / ".index" / ".timeindex": made when needed from the log's directory and
 * the base offset (no path string kept per segment: ~100 bytes per partition, issue 14). buf
 * holds GR_SEG_PATH_MAX bytes. */
void gr_segment_sibling_path(const struct gr_segment *seg, const char *ext, char *buf) {
    snprintf(buf, GR_SEG_PATH_MAX, "%s/%020" PRId64 "%s", seg->dir, seg->base_offset, ext);
}

const char *gr_segment_log_path(const struct gr_segment *seg, char *buf) {
    gr_segment_sibling_path(seg, ".log", buf);
    return buf;
}

static const char *sibling(const struct gr_segment *seg, const char *ext, char *buf) {
    gr_segment_sibling_path(seg, ext, buf);
    return buf;
}

/* The path in a compound literal living to the end of the enclosing block. */
#define INDEX_PATH(seg, buf) sibling((seg), ".index", (buf))
#define TIDX_PATH(seg, buf) sibling((seg), ".timeindex", (buf))

/* ---- small I/O helpers ---- */

/* Reads up to len bytes at off; returns bytes read (short only at EOF) or -errno. */
static ssize_t pread_full(int fd, void *buf, size_t len, int64_t off) {
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(off + (int64_t)got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static int pwrite_full(int fd, const void *buf, size_t len, int64_t off) {
    size_t done = 0;
    while (done < len) {
        ssize_t w = pwrite(fd, (const uint8_t *)buf + done, len - done, (off_t)(off + (int64_t)done));
        if (w < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        done += (size_t)w;
    }
    return 0;
}

/* A .log descriptor for one operation: the active segment's cached one (pinned), or a fresh
 * one (O_RDWR when `write`, else O_RDONLY) for another segment. Release with put_fd. */
struct seg_fd {
    int fd;
    bool cached;
};

static int get_fd(struct gr_segment *seg, bool write, struct seg_fd *h) {
    h->cached = seg->active;
    if (seg->active) { /* O_CREAT: a new log's .log is created by its first write */
        h->fd = gr_fd_slot_pin(&seg->slot); /* open: no path to format */
        if (h->fd >= 0) return 0;
        h->fd = gr_fd_slot_acquire(&seg->slot, GR_SEG_LOG_PATH(seg), 1);
        return h->fd < 0 ? h->fd : 0;
    }
    h->fd = gr_storage_open(GR_SEG_LOG_PATH(seg), (write ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0);
    if (h->fd < 0) {
        int rc = -errno;
        gr_error(LOGGER, "cannot open segment '%s': %s", GR_SEG_LOG_PATH(seg), strerror(errno));
        return rc;
    }
    return 0;
}

static void put_fd(struct gr_segment *seg, struct seg_fd *h) {
    if (h->fd < 0) return;
    if (h->cached) gr_fd_slot_release(&seg->slot);
    else close(h->fd);
    h->fd = -1;
}

/* Reads and parses the batch header at pos (the batch must end within seg->size). */
static int header_at(int fd, int64_t pos, int64_t end, struct gr_batch_info *bi) {
    uint8_t hdr[GR_BATCH_HEADER_SIZE];
    ssize_t n = pread_full(fd, hdr, sizeof hdr, pos);
    if (n < 0) return (int)n;
    if (gr_batch_peek_header(hdr, (size_t)n, (size_t)(end - pos), bi) != GR_BATCH_OK) return GR_ECORRUPT;
    return 0;
}

/* ---- lifecycle ---- */

struct gr_segment *gr_segment_new(const char *dir, int64_t base) {
    struct gr_segment *seg = gr_calloc(1, sizeof *seg);
    seg->base_offset = base;
    seg->next_offset = base;
    seg->dir = dir;
    gr_fd_slot_init(&seg->slot);
    seg->max_timestamp = -1;
    seg->offset_of_max_ts = -1;
    seg->first_batch_ts = -1;
    seg->created_ms = gr_wall_ms();
    return seg;
}

void gr_segment_deactivate(struct gr_segment *seg) {
    gr_fd_slot_remove(&seg->slot);
    seg->active = false;
}

void gr_segment_free(struct gr_segment *seg) {
    if (!seg) return;
    gr_segment_deactivate(seg);
    gr_time_index_free(&seg->ti);
    free(seg->idx);
    free(seg);
}

int gr_segment_activate(struct gr_segment *seg) {
    if (seg->active) return 0;
    int fd = gr_fd_slot_acquire(&seg->slot, GR_SEG_LOG_PATH(seg), 1);
    if (fd < 0) return fd;
    gr_fd_slot_release(&seg->slot);
    seg->active = true;
    return 0;
}

void gr_segment_set_active(struct gr_segment *seg) { seg->active = true; }

void gr_segment_activate_new(struct gr_segment *seg) {
    seg->size = 0;
    seg->next_offset = seg->base_offset;
    seg->idx_unsynced = seg->ti.unsynced = true;
    seg->idx_stale = seg->tidx_stale = true; /* index files: written whole with the first data */
    seg->active = true;
}

int gr_segment_create(struct gr_segment *seg) {
    int fd = gr_storage_open(GR_SEG_LOG_PATH(seg), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = -errno;
        gr_error(LOGGER, "cannot create segment '%s': %s", GR_SEG_LOG_PATH(seg), gr_strerror(rc));
        return rc;
    }
    close(fd);
    fd = gr_storage_open(INDEX_PATH(seg, (char[GR_SEG_PATH_MAX]){0}), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = -errno;
        gr_error(LOGGER, "cannot create index '%s': %s", INDEX_PATH(seg, (char[GR_SEG_PATH_MAX]){0}), gr_strerror(rc));
        return rc;
    }
    close(fd);
    fd = gr_storage_open(TIDX_PATH(seg, (char[GR_SEG_PATH_MAX]){0}), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = -errno;
        gr_error(LOGGER, "cannot create time index '%s': %s", TIDX_PATH(seg, (char[GR_SEG_PATH_MAX]){0}), gr_strerror(rc));
        return rc;
    }
    close(fd);
    seg->size = 0;
    seg->next_offset = seg->base_offset;
    seg->n_idx = seg->n_idx_file = 0;
    seg->idx_unsynced = true;
    seg->ti.n = seg->ti.n_file = 0;
    seg->ti.unsynced = true;
    seg->bytes_since_index = 0;
    seg->max_timestamp = -1;
    seg->offset_of_max_ts = -1;
    seg->first_batch_ts = -1;
    seg->created_ms = gr_wall_ms();
    return gr_segment_activate(seg);
}

int gr_segment_delete_files(struct gr_segment *seg) {
    gr_segment_deactivate(seg);
    int rc = 0;
    if (unlink(GR_SEG_LOG_PATH(seg)) < 0 && errno != ENOENT) rc = -errno;
    if (unlink(INDEX_PATH(seg, (char[GR_SEG_PATH_MAX]){0})) < 0 && errno != ENOENT && rc == 0) rc = -errno;
    if (unlink(TIDX_PATH(seg, (char[GR_SEG_PATH_MAX]){0})) < 0 && errno != ENOENT && rc == 0) rc = -errno;
    return rc;
}

/* ---- index ---- */

static void idx_push(struct gr_segment *seg, uint32_t rel, uint32_t pos) {
    if (seg->n_idx == seg->cap_idx) {
        seg->cap_idx = seg->cap_idx ? seg->cap_idx * 2 : 64;
        seg->idx = gr_realloc(seg->idx, seg->cap_idx * sizeof *seg->idx);
    }
    seg->idx[seg->n_idx++] = (struct gr_index_entry){rel, pos};
}

/* Applies the index rule for a batch at pos (Kafka's LogSegment.recover order): the max
 * timestamp so far takes the batch in, then, past index_interval bytes, an offset-index entry
 * and a time-index entry (max timestamp so far, its offset) are added. Returns true if an
 * offset-index entry was added. */
static bool index_batch(struct gr_segment *seg, int64_t pos, const struct gr_batch_info *bi, int32_t interval) {
    bool added = false;
    int64_t last = gr_batch_info_last_offset(bi);
    if (bi->MaxTimestamp > seg->max_timestamp) {
        seg->max_timestamp = bi->MaxTimestamp;
        seg->offset_of_max_ts = last;
    }
    if (seg->bytes_since_index > interval) {
        idx_push(seg, (uint32_t)(last - seg->base_offset), (uint32_t)pos);
        if (seg->offset_of_max_ts >= 0)
            gr_time_index_maybe_append(&seg->ti, seg->max_timestamp, (uint32_t)(seg->offset_of_max_ts - seg->base_offset));
        seg->bytes_since_index = 0;
        added = true;
    }
    seg->bytes_since_index += (int64_t)bi->size;
    return added;
}

static void encode_entries(const struct gr_index_entry *e, size_t n, uint8_t *out) {
    for (size_t i = 0; i < n; i++) {
        gr_put_be32(out + 8 * i, e[i].rel);
        gr_put_be32(out + 8 * i + 4, e[i].pos);
    }
}

/* Writes idx[from..n_idx) at entry `from` of the open .index fd; from == 0 rewrites the file
 * (cutting anything beyond). */
static int index_write_from(struct gr_segment *seg, int fd, size_t from) {
    size_t n = seg->n_idx - from;
    uint8_t *buf = gr_malloc(n ? n * 8 : 1);
    if (n) encode_entries(seg->idx + from, n, buf);
    int rc = pwrite_full(fd, buf, n * 8, (int64_t)from * 8);
    free(buf);
    if (rc == 0 && from == 0 && ftruncate(fd, (off_t)(n * 8)) < 0) rc = -errno;
    if (rc == 0) {
        seg->n_idx_file = seg->n_idx;
        seg->idx_unsynced = true;
        seg->idx_stale = false;
    }
    return rc;
}

/* Same as index_sync below, for the .timeindex file (12-byte entries). */
static int tidx_sync(struct gr_segment *seg, bool whole, bool sync) {
    struct gr_time_index *t = &seg->ti;
    whole = whole || (seg->tidx_stale && seg->size > 0);
    bool write = whole || t->n_file != t->n;
    if (!write && !(sync && t->unsynced)) return 0;
    int fd = gr_storage_open(TIDX_PATH(seg, (char[GR_SEG_PATH_MAX]){0}), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = -errno;
        gr_error(LOGGER, "cannot open time index '%s': %s", TIDX_PATH(seg, (char[GR_SEG_PATH_MAX]){0}), strerror(errno));
        return rc;
    }
    int rc = 0;
    if (write) {
        size_t from = 0;
        struct stat st;
        if (!whole && t->n_file < t->n && fstat(fd, &st) == 0 &&
            st.st_size == (off_t)(t->n_file * GR_TIME_INDEX_ENTRY_SIZE))
            from = t->n_file;
        size_t n = t->n - from;
        uint8_t *buf = gr_malloc(n ? n * GR_TIME_INDEX_ENTRY_SIZE : 1);
        gr_time_index_encode(t, from, buf);
        rc = pwrite_full(fd, buf, n * GR_TIME_INDEX_ENTRY_SIZE, (int64_t)(from * GR_TIME_INDEX_ENTRY_SIZE));
        free(buf);
        if (rc == 0 && from == 0 && ftruncate(fd, (off_t)(t->n * GR_TIME_INDEX_ENTRY_SIZE)) < 0) rc = -errno;
        if (rc == 0) {
            t->n_file = t->n;
            t->unsynced = true;
            seg->tidx_stale = false;
        }
    }
    if (rc == 0 && sync) {
        if (fdatasync(fd) < 0) rc = -errno;
        else t->unsynced = false;
    }
    close(fd);
    if (rc) gr_error(LOGGER, "cannot write time index '%s': %s", TIDX_PATH(seg, (char[GR_SEG_PATH_MAX]){0}), gr_strerror(rc));
    return rc;
}

/* Brings the .index file up to date with memory (only the missing tail is written when the
 * file holds exactly the expected prefix; otherwise it is rewritten) and, with `sync`,
 * fdatasyncs it if it was written since the last sync. Opens and closes the file itself. */
static int index_sync(struct gr_segment *seg, bool whole, bool sync) {
    whole = whole || (seg->idx_stale && seg->size > 0);
    bool write = whole || seg->n_idx_file != seg->n_idx;
    if (!write && !(sync && seg->idx_unsynced)) return tidx_sync(seg, whole, sync);
    int fd = gr_storage_open(INDEX_PATH(seg, (char[GR_SEG_PATH_MAX]){0}), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = -errno;
        gr_error(LOGGER, "cannot open index '%s': %s", INDEX_PATH(seg, (char[GR_SEG_PATH_MAX]){0}), strerror(errno));
        return rc;
    }
    int rc = 0;
    if (write) {
        size_t from = 0;
        struct stat st;
        if (!whole && seg->n_idx_file < seg->n_idx && fstat(fd, &st) == 0 &&
            st.st_size == (off_t)(seg->n_idx_file * 8))
            from = seg->n_idx_file;
        rc = index_write_from(seg, fd, from);
    }
    if (rc == 0 && sync) {
        if (fdatasync(fd) < 0) rc = -errno;
        else seg->idx_unsynced = false;
    }
    close(fd);
    if (rc) gr_error(LOGGER, "cannot write index '%s': %s", INDEX_PATH(seg, (char[GR_SEG_PATH_MAX]){0}), gr_strerror(rc));
    int trc = tidx_sync(seg, whole, sync);
    return rc ? rc : trc;
}

/* Rewrites the whole .index file from memory. */
static int index_write_file(struct gr_segment *seg) { return index_sync(seg, true, false); }

int gr_segment_persist_index(struct gr_segment *seg) { return index_sync(seg, false, false); }

void gr_segment_seal_time_index(struct gr_segment *seg) {
    if (seg->offset_of_max_ts >= 0)
        gr_time_index_maybe_append(&seg->ti, seg->max_timestamp, (uint32_t)(seg->offset_of_max_ts - seg->base_offset));
}

bool gr_segment_index_full(const struct gr_segment *seg, int32_t index_max_bytes) {
    return seg->n_idx >= (size_t)index_max_bytes / 8 || seg->ti.n + 1 >= (size_t)index_max_bytes / GR_TIME_INDEX_ENTRY_SIZE;
}

/* Loads the .timeindex file (relative offsets checked later against the end offset). 0 ok, -1
 * missing or bad. */
static int tidx_load(struct gr_segment *seg) {
    int fd = gr_storage_open(TIDX_PATH(seg, (char[GR_SEG_PATH_MAX]){0}), O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct stat st;
    int ok = fstat(fd, &st) == 0 && st.st_size % GR_TIME_INDEX_ENTRY_SIZE == 0 &&
             st.st_size / GR_TIME_INDEX_ENTRY_SIZE <= seg->size / GR_BATCH_HEADER_SIZE + 2;
    size_t len = ok ? (size_t)st.st_size : 0;
    uint8_t *buf = gr_malloc(len ? len : 1);
    if (ok && len) ok = pread_full(fd, buf, len, 0) == (ssize_t)len;
    close(fd);
    if (ok) ok = gr_time_index_decode(&seg->ti, buf, len, INT32_MAX) == 0;
    free(buf);
    if (!ok) seg->ti.n = seg->ti.n_file = 0;
    seg->ti.unsynced = true;
    return ok ? 0 : -1;
}

/* Loads the .index file and checks it against the segment size. 0 ok, -1 missing or bad. */
static int index_load(struct gr_segment *seg) {
    int fd = gr_storage_open(INDEX_PATH(seg, (char[GR_SEG_PATH_MAX]){0}), O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct stat st;
    int ok = fstat(fd, &st) == 0 && st.st_size % 8 == 0 && st.st_size / 8 <= seg->size / GR_BATCH_HEADER_SIZE + 1;
    uint8_t *buf = NULL;
    size_t n = ok ? (size_t)st.st_size / 8 : 0;
    if (ok && n) {
        buf = gr_malloc(n * 8);
        ok = pread_full(fd, buf, n * 8, 0) == (ssize_t)(n * 8);
    }
    close(fd);
    seg->n_idx = 0;
    for (size_t i = 0; ok && i < n; i++) {
        uint32_t rel = gr_be32(buf + 8 * i), pos = gr_be32(buf + 8 * i + 4);
        if (pos == 0 || (int64_t)pos >= seg->size || (seg->n_idx && (rel <= seg->idx[seg->n_idx - 1].rel ||
                                                                      pos <= seg->idx[seg->n_idx - 1].pos)))
            ok = 0;
        else
            idx_push(seg, rel, pos);
    }
    free(buf);
    if (!ok) seg->n_idx = 0;
    seg->n_idx_file = seg->n_idx;
    seg->idx_unsynced = true; /* not known to be durable: the next flush fsyncs it */
    return ok ? 0 : -1;
}

/* Walks every batch header from position 0, rebuilding the index and max timestamp. */
static int rebuild_by_headers(struct gr_segment *seg, int fd, int32_t interval) {
    seg->n_idx = 0;
    seg->ti.n = 0;
    seg->bytes_since_index = 0;
    seg->max_timestamp = -1;
    seg->offset_of_max_ts = -1;
    seg->first_batch_ts = -1;
    seg->next_offset = seg->base_offset;
    int64_t pos = 0;
    while (pos < seg->size) {
        struct gr_batch_info bi;
        int rc = header_at(fd, pos, seg->size, &bi);
        if (rc) return rc;
        int64_t last = gr_batch_info_last_offset(&bi);
        if (bi.BaseOffset < seg->next_offset || last - seg->base_offset > INT32_MAX || bi.LastOffsetDelta < 0)
            return GR_ECORRUPT;
        index_batch(seg, pos, &bi, interval);
        if (pos == 0) seg->first_batch_ts = bi.MaxTimestamp;
        seg->next_offset = last + 1;
        pos += (int64_t)bi.size;
    }
    return 0;
}

/* ---- recovery and loading ---- */

int gr_segment_recover(struct gr_segment *seg, int64_t min_offset, int32_t interval, gr_segment_batch_cb cb,
                       void *arg, int64_t *truncated_bytes) {
    *truncated_bytes = 0;
    struct seg_fd h;
    int rc = get_fd(seg, true, &h);
    if (rc) return rc;
    int fd = h.fd;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto out;
    }
    int64_t fsize = st.st_size, pos = 0, expected = GR_MAX(min_offset, seg->base_offset);
    seg->created_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
    seg->n_idx = 0;
    seg->ti.n = 0;
    seg->bytes_since_index = 0;
    seg->max_timestamp = -1;
    seg->offset_of_max_ts = -1;
    seg->first_batch_ts = -1;
    seg->next_offset = seg->base_offset;
    const char *why = "end of file";
    uint8_t *buf = NULL;
    size_t cap = 0;
    while (pos < fsize) {
        uint8_t hdr[GR_BATCH_HEADER_SIZE];
        struct gr_batch_info bi;
        ssize_t n = pread_full(fd, hdr, sizeof hdr, pos);
        if (n < 0) {
            rc = (int)n;
            break;
        }
        int err = gr_batch_peek_header(hdr, (size_t)n, (size_t)(fsize - pos), &bi);
        if (err != GR_BATCH_OK) {
            why = gr_batch_strerror(err);
            break;
        }
        if (bi.size > cap) {
            cap = bi.size;
            buf = gr_realloc(buf, cap);
        }
        n = pread_full(fd, buf, bi.size, pos);
        if (n < 0) {
            rc = (int)n;
            break;
        }
        err = gr_batch_validate_one(buf, (size_t)n, 0, &bi);
        if (err != GR_BATCH_OK) {
            why = gr_batch_strerror(err);
            break;
        }
        int64_t last = gr_batch_info_last_offset(&bi);
        if (bi.BaseOffset < expected || last - seg->base_offset > INT32_MAX) {
            why = "offsets out of order";
            break;
        }
        index_batch(seg, pos, &bi, interval);
        if (pos == 0) seg->first_batch_ts = bi.MaxTimestamp;
        seg->next_offset = last + 1;
        expected = last + 1;
        if (cb) cb(arg, &bi);
        pos += (int64_t)bi.size;
    }
    free(buf);
    if (rc) goto out;
    if (pos < fsize) {
        gr_warn(LOGGER, "found invalid bytes at position %" PRId64 " in '%s' (%s): truncating %" PRId64
                " bytes; log end is now offset %" PRId64,
                pos, GR_SEG_LOG_PATH(seg), why, fsize - pos, seg->next_offset);
        if (ftruncate(fd, (off_t)pos) < 0) {
            rc = -errno;
            goto out;
        }
        *truncated_bytes = fsize - pos;
    }
    seg->size = pos;
    rc = index_write_file(seg);
out:
    put_fd(seg, &h);
    return rc;
}

int gr_segment_load(struct gr_segment *seg, int32_t interval) {
    int fd = gr_storage_open(GR_SEG_LOG_PATH(seg), O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        gr_error(LOGGER, "cannot open segment '%s': %s", GR_SEG_LOG_PATH(seg), strerror(errno));
        return -errno;
    }
    int rc = 0;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto out;
    }
    seg->size = st.st_size;
    seg->created_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
    if (seg->size > UINT32_MAX) {
        rc = GR_ECORRUPT;
        goto out;
    }
    if (seg->size == 0) {
        /* Empty: empty indexes, whatever the files hold (a new log has none yet); the first
         * write once the segment holds data rewrites each file whole (idx_stale/tidx_stale). */
        seg->idx_stale = seg->tidx_stale = true;
        seg->n_idx = seg->n_idx_file = 0;
        seg->ti.n = seg->ti.n_file = 0;
        seg->next_offset = seg->base_offset;
        seg->bytes_since_index = 0;
        seg->max_timestamp = seg->offset_of_max_ts = seg->first_batch_ts = -1;
        goto out;
    }
    if (index_load(seg) < 0 || tidx_load(seg) < 0) {
        gr_info(LOGGER, "rebuilding indexes of '%s'", GR_SEG_LOG_PATH(seg));
        rc = rebuild_by_headers(seg, fd, interval);
        if (rc == 0) rc = index_write_file(seg);
        goto out;
    }
    /* Walk headers from the last index entry to find the end offset (and check the tail),
     * re-applying the index rule: entries the file lacks are re-derived (not yet written). */
    int64_t pos = seg->n_idx ? seg->idx[seg->n_idx - 1].pos : 0;
    seg->bytes_since_index = 0;
    seg->next_offset = seg->base_offset;
    seg->first_batch_ts = -1;
    /* The last time-index entry is the max timestamp up to the last offset-index entry's batch
     * (both are added together; roll and close add a final one); the walk covers the rest. */
    seg->max_timestamp = seg->ti.n ? seg->ti.e[seg->ti.n - 1].ts : -1;
    seg->offset_of_max_ts = seg->ti.n ? seg->base_offset + seg->ti.e[seg->ti.n - 1].rel : -1;
    if (seg->size > 0) {
        struct gr_batch_info bi;
        rc = header_at(fd, 0, seg->size, &bi);
        if (rc) goto out;
        seg->first_batch_ts = bi.MaxTimestamp;
    }
    while (pos < seg->size) {
        struct gr_batch_info bi;
        rc = header_at(fd, pos, seg->size, &bi);
        if (rc) goto out;
        int64_t last = gr_batch_info_last_offset(&bi);
        if (bi.LastOffsetDelta < 0 || last < seg->next_offset || last - seg->base_offset > INT32_MAX) {
            rc = GR_ECORRUPT;
            goto out;
        }
        index_batch(seg, pos, &bi, interval);
        seg->next_offset = last + 1;
        pos += (int64_t)bi.size;
    }
    if (seg->ti.n && seg->base_offset + seg->ti.e[seg->ti.n - 1].rel >= seg->next_offset) {
        gr_info(LOGGER, "time index '%s' points past the segment end: rebuilding indexes", TIDX_PATH(seg, (char[GR_SEG_PATH_MAX]){0}));
        rc = rebuild_by_headers(seg, fd, interval);
        if (rc == 0) rc = index_write_file(seg);
    }
out:
    close(fd);
    return rc;
}

/* ---- append, find, read, truncate ---- */

static int64_t index_floor_pos(const struct gr_segment *seg, int64_t offset);

int gr_segment_append(struct gr_segment *seg, const uint8_t *buf, size_t len, int32_t interval) {
    int rc = gr_segment_activate(seg);
    if (rc) return rc;
    struct seg_fd h;
    rc = get_fd(seg, true, &h);
    if (rc) return rc;
    rc = pwrite_full(h.fd, buf, len, seg->size);
    if (rc) {
        gr_error(LOGGER, "cannot append %zu bytes to '%s': %s", len, GR_SEG_LOG_PATH(seg), gr_strerror(rc));
        if (ftruncate(h.fd, (off_t)seg->size) < 0)
            gr_error(LOGGER, "cannot cut back '%s': %s", GR_SEG_LOG_PATH(seg), strerror(errno));
        put_fd(seg, &h);
        return rc;
    }
    put_fd(seg, &h);
    size_t off = 0;
    while (off < len) {
        struct gr_batch_info bi;
        if (gr_batch_parse_header(buf + off, len - off, &bi) != GR_BATCH_OK) break; /* validated by caller */
        index_batch(seg, seg->size + (int64_t)off, &bi, interval);
        if (seg->size == 0 && off == 0) seg->first_batch_ts = bi.MaxTimestamp;
        seg->next_offset = gr_batch_info_last_offset(&bi) + 1;
        off += bi.size;
    }
    seg->size += (int64_t)len;
    return 0;
}

/* Locates the first batch with lastOffset >= offset; *bi gets its header when found. */
static int find_batch(struct gr_segment *seg, int fd, int64_t offset, int64_t *pos_out, struct gr_batch_info *bi,
                      bool *found) {
    *found = false;
    int64_t pos = index_floor_pos(seg, offset);
    while (pos < seg->size) {
        int rc = header_at(fd, pos, seg->size, bi);
        if (rc) return rc;
        if (gr_batch_info_last_offset(bi) >= offset) {
            *found = true;
            break;
        }
        pos += (int64_t)bi->size;
    }
    *pos_out = pos < seg->size ? pos : seg->size;
    return 0;
}

int gr_segment_find(struct gr_segment *seg, int64_t offset, int64_t *pos_out) {
    /* Nothing at or after offset (e.g. a fetch at the log end): answer without touching the
     * file, so idle partitions polled by fetchers cost no descriptor. */
    if (offset >= seg->next_offset) {
        *pos_out = seg->size;
        return 0;
    }
    bool found;
    struct seg_fd h;
    int rc = get_fd(seg, false, &h);
    if (rc) return rc;
    struct gr_batch_info bi;
    rc = find_batch(seg, h.fd, offset, pos_out, &bi, &found);
    put_fd(seg, &h);
    return rc;
}

int gr_segment_read_fd(int fd, const char *path, int64_t seg_size, int64_t pos, int64_t max_bytes,
                       int64_t max_offset, bool min_one, uint8_t **data, size_t *len, int64_t *first, int64_t *next) {
    *data = NULL;
    *len = 0;
    *first = -1;
    if (pos >= seg_size) return 0;
    int rc = 0;
    int64_t avail = seg_size - pos;
    if (max_bytes > GR_SEGMENT_READ_MAX) max_bytes = GR_SEGMENT_READ_MAX;
    int64_t want = GR_MIN(GR_MAX(max_bytes, 0), avail);
    if (want < GR_BATCH_HEADER_SIZE) want = GR_MIN((int64_t)GR_BATCH_HEADER_SIZE, avail);
    uint8_t *buf = gr_malloc((size_t)want);
    ssize_t n = pread_full(fd, buf, (size_t)want, pos);
    if (n < 0) {
        rc = (int)n;
        goto fail;
    }
    /* A read outside the log's lock may race a truncation: a short read just ends the data. */
    if (n < want) avail = n;
    size_t off = 0;
    while (off + GR_BATCH_HEADER_SIZE <= (size_t)n) {
        struct gr_batch_info bi;
        /* The header is in buf, so any error (including a batch running past the end of
         * the file) means the segment is corrupt. */
        if (gr_batch_peek_header(buf + off, (size_t)n - off, (size_t)(avail - (int64_t)off), &bi) != GR_BATCH_OK) {
            rc = GR_ECORRUPT;
            goto fail;
        }
        int64_t last = gr_batch_info_last_offset(&bi);
        if (max_offset >= 0 && last >= max_offset) break;
        bool in_buf = off + bi.size <= (size_t)n && (int64_t)(off + bi.size) <= max_bytes;
        if (!in_buf) {
            if (off != 0 || !min_one || (int64_t)bi.size > avail) break;
            /* The first batch is larger than max_bytes: return it whole (minOneMessage). */
            buf = gr_realloc(buf, bi.size);
            n = pread_full(fd, buf, bi.size, pos);
            if (n < 0) {
                rc = (int)n;
                goto fail;
            }
            if ((size_t)n != bi.size) break;
        }
        if (off == 0) *first = bi.BaseOffset;
        *next = last + 1;
        off += bi.size;
        if (!in_buf) break;
    }
    if (off == 0) {
        free(buf);
        return 0;
    }
    *data = buf;
    *len = off;
    return 0;
fail:
    if (rc == GR_ECORRUPT) gr_error(LOGGER, "corrupt batch header in '%s' near position %" PRId64, path, pos);
    free(buf);
    return rc;
}

int gr_segment_slice_fd(int fd, const char *path, int64_t seg_size, int64_t pos, int64_t max_bytes,
                        int64_t max_offset, bool min_one, size_t *len, int64_t *first, int64_t *next) {
    *len = 0;
    *first = -1;
    if (max_bytes > GR_SEGMENT_READ_MAX) max_bytes = GR_SEGMENT_READ_MAX;
    int64_t off = 0;
    while (pos + off + GR_BATCH_HEADER_SIZE <= seg_size) {
        struct gr_batch_info bi;
        int rc = header_at(fd, pos + off, seg_size, &bi);
        if (rc == GR_ECORRUPT) {
            /* raced with a truncation, or a corrupt segment: stop at what is known good */
            if (off == 0) gr_error(LOGGER, "corrupt batch header in '%s' near position %" PRId64, path, pos);
            break;
        }
        if (rc) return rc;
        int64_t last = gr_batch_info_last_offset(&bi);
        if (max_offset >= 0 && last >= max_offset) break;
        if (off + (int64_t)bi.size > max_bytes && !(off == 0 && min_one)) break;
        if (off == 0) *first = bi.BaseOffset;
        *next = last + 1;
        off += (int64_t)bi.size;
        if (off > max_bytes) break; /* the first batch alone (minOneMessage) */
    }
    *len = (size_t)off;
    return 0;
}

int gr_segment_read(struct gr_segment *seg, int64_t pos, int64_t max_bytes, int64_t max_offset, bool min_one,
                    uint8_t **data, size_t *len, int64_t *first, int64_t *next) {
    *data = NULL;
    *len = 0;
    *first = -1;
    if (pos >= seg->size) return 0;
    struct seg_fd h;
    int rc = get_fd(seg, false, &h);
    if (rc) return rc;
    rc = gr_segment_read_fd(h.fd, GR_SEG_LOG_PATH(seg), seg->size, pos, max_bytes, max_offset, min_one, data, len, first,
                            next);
    put_fd(seg, &h);
    return rc;
}

int gr_segment_dup_fd(struct gr_segment *seg) {
    struct seg_fd h;
    int rc = get_fd(seg, false, &h);
    if (rc) return rc;
    int fd = h.cached ? fcntl(h.fd, F_DUPFD_CLOEXEC, 0) : h.fd;
    if (fd < 0) rc = -errno;
    if (h.cached) put_fd(seg, &h);
    return fd < 0 ? rc : fd;
}

int gr_segment_truncate_to(struct gr_segment *seg, int64_t offset) {
    bool found;
    struct seg_fd h;
    int rc = get_fd(seg, true, &h);
    if (rc) return rc;
    int64_t pos;
    struct gr_batch_info bi;
    rc = find_batch(seg, h.fd, offset, &pos, &bi, &found);
    if (rc == 0 && found && ftruncate(h.fd, (off_t)pos) < 0) rc = -errno;
    put_fd(seg, &h);
    if (rc) {
        gr_error(LOGGER, "cannot truncate '%s': %s", GR_SEG_LOG_PATH(seg), gr_strerror(rc));
        return rc;
    }
    if (!found) return 0;
    seg->size = pos;
    seg->next_offset = pos == 0 ? seg->base_offset : bi.BaseOffset;
    while (seg->n_idx && seg->idx[seg->n_idx - 1].pos >= pos) seg->n_idx--;
    seg->bytes_since_index = seg->size - (seg->n_idx ? seg->idx[seg->n_idx - 1].pos : 0);
    gr_time_index_truncate(&seg->ti, (uint32_t)(seg->next_offset - seg->base_offset));
    /* The max timestamp of what is left: the last time entry, then the batches after the last
     * offset-index entry (the same reasoning as gr_segment_load). */
    seg->max_timestamp = seg->ti.n ? seg->ti.e[seg->ti.n - 1].ts : -1;
    seg->offset_of_max_ts = seg->ti.n ? seg->base_offset + seg->ti.e[seg->ti.n - 1].rel : -1;
    if (pos == 0) seg->first_batch_ts = -1;
    rc = get_fd(seg, false, &h);
    int64_t p = seg->n_idx ? seg->idx[seg->n_idx - 1].pos : 0;
    while (rc == 0 && p < seg->size) {
        rc = header_at(h.fd, p, seg->size, &bi);
        if (rc) break;
        if (bi.MaxTimestamp > seg->max_timestamp) {
            seg->max_timestamp = bi.MaxTimestamp;
            seg->offset_of_max_ts = gr_batch_info_last_offset(&bi);
        }
        p += (int64_t)bi.size;
    }
    put_fd(seg, &h);
    int wrc = index_write_file(seg);
    return rc ? rc : wrc;
}

/* Position of the last offset-index entry with relativeOffset <= offset - base, else 0. */
static int64_t index_floor_pos(const struct gr_segment *seg, int64_t offset) {
    if (offset <= seg->base_offset || !seg->n_idx) return 0;
    int64_t rel = offset - seg->base_offset;
    size_t lo = 0, hi = seg->n_idx;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if ((int64_t)seg->idx[mid].rel <= rel) lo = mid + 1;
        else hi = mid;
    }
    return lo ? seg->idx[lo - 1].pos : 0;
}

/* Within the batch at pos (header bi): the first record with timestamp >= ts and offset >=
 * min_offset (Kafka's LogSegment searchForTimestamp). A compressed batch is decompressed (into
 * at most GR_RECOMPRESSION_MAX_INFLATED bytes); the records of a LogAppendTime batch all carry
 * its maxTimestamp. A batch that cannot be read record by record (corrupt, which validation
 * should have caught) answers with max(baseOffset, min_offset) and its maxTimestamp, with a
 * warning. 1 found, 0 not in this batch, or -errno. */
static int search_batch(const struct gr_segment *seg, int fd, int64_t pos, const struct gr_batch_info *bi, int64_t ts,
                        int64_t min_offset, int64_t *offset_out, int64_t *ts_out) {
    uint8_t *b = gr_malloc(bi->size), *view = NULL;
    ssize_t n = pread_full(fd, b, bi->size, pos);
    if (n < 0) {
        free(b);
        return (int)n;
    }
    const uint8_t *recs = b;
    size_t len = (size_t)n;
    int drc = 0;
    if (n == (ssize_t)bi->size && gr_batch_info_compression(bi) != 0) {
        drc = gr_batch_inflate(b, bi, GR_RECOMPRESSION_MAX_INFLATED, &view, &len);
        recs = view;
    }
    bool log_append_time = (bi->Attributes & GR_BATCH_ATTR_LOG_APPEND_TIME) != 0;
    int found = 0;
    struct gr_batch_rec_iter it;
    struct gr_batch_rec_view rv;
    if (n == (ssize_t)bi->size && drc == 0 && gr_batch_rec_iter_init(&it, recs, len) == GR_BATCH_OK) {
        while (gr_batch_rec_iter_next(&it, &rv)) {
            int64_t rts = log_append_time ? bi->MaxTimestamp : rv.Timestamp;
            if (rts >= ts && rv.Offset >= min_offset) {
                *offset_out = rv.Offset;
                *ts_out = rts;
                found = 1;
                break;
            }
        }
        if (!found && it.err == 0) goto out;
    }
    if (!found) {
        gr_warn(LOGGER,
                "cannot read the records of the batch at %" PRId64 " of '%s' (%s): answering a timestamp "
                "look-up with its first offset",
                pos, GR_SEG_LOG_PATH(seg), drc ? gr_strerror(drc) : "malformed");
        *offset_out = GR_MAX(bi->BaseOffset, min_offset);
        *ts_out = bi->MaxTimestamp;
        found = 1;
    }
out:
    free(view);
    free(b);
    return found;
}

/* The timestamp searches' one walk: from the batch at pos, the first record whose timestamp is
 * >= ts at an offset >= min_offset (search_batch). 1 found, 0 none, or -errno. */
static int find_from(struct gr_segment *seg, int64_t pos, int64_t ts, int64_t min_offset, int64_t *offset_out,
                     int64_t *ts_out) {
    struct seg_fd h;
    int rc = get_fd(seg, false, &h);
    if (rc) return rc;
    int found = 0;
    while (pos < seg->size && !found) {
        struct gr_batch_info bi;
        rc = header_at(h.fd, pos, seg->size, &bi);
        if (rc) break;
        if (bi.MaxTimestamp >= ts && gr_batch_info_last_offset(&bi) >= min_offset) {
            found = search_batch(seg, h.fd, pos, &bi, ts, min_offset, offset_out, ts_out);
            if (found < 0) rc = found;
        }
        pos += (int64_t)bi.size;
    }
    put_fd(seg, &h);
    return rc ? rc : found;
}

int gr_segment_find_timestamp(struct gr_segment *seg, int64_t ts, int64_t min_offset, int64_t *offset_out,
                              int64_t *ts_out) {
    if (seg->max_timestamp < ts || seg->size == 0) return 0;
    long e = gr_time_index_lookup(&seg->ti, ts);
    int64_t from = e >= 0 ? seg->base_offset + seg->ti.e[e].rel : seg->base_offset;
    return find_from(seg, index_floor_pos(seg, GR_MAX(from, min_offset)), ts, min_offset, offset_out, ts_out);
}

/* The segment's largest timestamp is the first record at or above it (no record is above it). */
int gr_segment_find_max_timestamp(struct gr_segment *seg, int64_t *offset_out, int64_t *ts_out) {
    int64_t max = seg->max_timestamp;
    if (max < 0 || seg->size == 0) return 0;
    int64_t pos = seg->offset_of_max_ts >= 0 ? index_floor_pos(seg, seg->offset_of_max_ts) : 0;
    return find_from(seg, pos, max, INT64_MIN, offset_out, ts_out);
}

int gr_segment_fsync(struct gr_segment *seg) {
    struct seg_fd h;
    int rc = get_fd(seg, false, &h);
    if (rc == 0) {
        if (fdatasync(h.fd) < 0) rc = -errno;
        put_fd(seg, &h);
    }
    int irc = index_sync(seg, false, true);
    if (rc == 0) rc = irc;
    if (rc) gr_error(LOGGER, "cannot fsync segment '%s': %s", GR_SEG_LOG_PATH(seg), gr_strerror(rc));
    return rc;
}
