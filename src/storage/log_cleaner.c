/* Log compaction of one partition log (Kafka 2.7's Cleaner; the manager that picks logs and runs
 * the threads, Kafka's LogCleanerManager and CleanerThread, is in log_manager.c). Rules and formats: docs/STORAGE.md "Log compaction".
 *
 * One pass over [firstDirty, firstUncleanable):
 *  0. firstUncleanable never passes the first unstable offset (an undecided transaction);
 *  1. offset map: for every keyed record in the dirty range, key hash -> latest offset (bounded
 *     by the dedupe buffer; the pass ends early at the batch that would overfill it); aborted
 *     data (per the .txnindex entries of the range) never enters it;
 *  2. delete horizon (KIP-534): a pass keeping tombstones, or a discardable marker, of a batch
 *     without the delete-horizon bit rewrites it with the bit and now + delete.retention.ms as
 *     base timestamp; a pass at or past that horizon drops them;
 *  3. the segments below the map's end (never the active one) are grouped (sum of sizes <=
 *     segment.bytes) and each group is rewritten into <base>.log.cleaned: a record is kept if it
 *     lies beyond the map, or is keyed, not superseded (offset >= map[key]) and either has a value
 *     or its batch's delete horizon has not passed (tombstones live delete.retention.ms);
 *     a batch holding an active producer's last batch keeps its header even when emptied;
 *     aborted data is dropped; a marker goes once no batch of its transaction was seen in the
 *     pass and its delete horizon passed ("transactions" below); the kept ABORT
 *     markers' entries form the cleaned segment's .txnindex; compressed batches are decompressed and
 *     recompressed with their codec; kept records keep their bytes, batches keep their base
 *     offset, last offset delta, producer fields and epoch;
 *  4. swap (crash-safe, Kafka's order): fsync .cleaned (and <base>.txnindex.cleaned), rename
 *     the .txnindex one then the log .swap, rename the old segments' .log to .log.deleted (their
 *     indexes and later segments' .txnindex unlinked), rename the .txnindex.swap then the .swap
 *     to their final names, unlink the .deleted files; the new segment gets the last source's
 *     mtime and rebuilt indexes.
 *     gr_plog_complete_swaps() finishes or discards a pass interrupted by a crash at open.
 * Locking: the segments are captured (own descriptors) under the log's mutex; the map is built
 * and each group rewritten without it; the mutex is taken again only to swap a group in, after
 * checking that no segment was cut or replaced meanwhile (log->seg_gen; else the pass is
 * abandoned and retried later), as Kafka takes the log's lock only for replaceSegments. Retention
 * deletes segments from the start without cancelling the pass: a group that lost a segment is
 * skipped, the later ones are swapped in (Kafka's replaceSegments filters deleted segments). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "storage/batch.h"
#include "common/be.h"
#include "storage/compression.h"
#include "storage/log_cleaner.h"
#include "storage/log_internal.h"
#include "storage/log_validator.h"
#include "storage/producer_state.h"
#include "storage/recompression.h"
#include "storage/segment.h"
#include "storage/txn_index.h"

#define LOGGER "kafka.log.LogCleaner"
#define MAX_BATCH (64 << 20)

/* ---- offset map (Kafka's SkimpyOffsetMap: 16-byte key hash + 8-byte offset per slot) ---- */

#define SLOT_SIZE 24

void gr_offset_map_init(struct gr_offset_map *m, int64_t memory_bytes, double load_factor) {
    memset(m, 0, sizeof *m);
    m->nslots = (size_t)GR_MAX(memory_bytes / SLOT_SIZE, 16);
    m->max_entries = (size_t)((double)m->nslots * load_factor);
    /* load factor 1.0 (accepted, as Kafka's config has no range) would fill every slot, and a
     * probe for a key not in a full map would never end (Kafka's put refuses the last slot) */
    if (m->max_entries > m->nslots - 1) m->max_entries = m->nslots - 1;
    if (m->max_entries < 1) m->max_entries = 1;
    m->slots = gr_calloc(m->nslots, SLOT_SIZE);
    m->latest_offset = -1;
}

void gr_offset_map_free(struct gr_offset_map *m) {
    free(m->slots);
    m->slots = NULL;
}

/* Two independent 64-bit FNV-1a style hashes with final mixing: 16 bytes, never all zero
 * (all zero marks an empty slot). */
static void key_hash(const uint8_t *k, size_t n, uint8_t out[16]) {
    uint64_t a = 1469598103934665603ULL, b = 0x9e3779b97f4a7c15ULL ^ n;
    for (size_t i = 0; i < n; i++) {
        a = (a ^ k[i]) * 1099511628211ULL;
        b = (b ^ k[i]) * 0xff51afd7ed558ccdULL;
        b ^= b >> 29;
    }
    a ^= a >> 33;
    a *= 0xc4ceb9fe1a85ec53ULL;
    a ^= a >> 33;
    b ^= b >> 31;
    b *= 0x94d049bb133111ebULL;
    b ^= b >> 32;
    if (a == 0 && b == 0) a = 1;
    gr_put_be64(out, a);
    gr_put_be64(out + 8, b);
}

static uint8_t *probe(const struct gr_offset_map *m, const uint8_t h[16]) {
    static const uint8_t zero[16];
    size_t i = (size_t)(gr_be64(h) % m->nslots);
    for (;;) {
        uint8_t *s = m->slots + i * SLOT_SIZE;
        if (memcmp(s, h, 16) == 0 || memcmp(s, zero, 16) == 0) return s;
        i = (i + 1) % m->nslots;
    }
}

bool gr_offset_map_put(struct gr_offset_map *m, const uint8_t *key, size_t klen, int64_t offset) {
    uint8_t h[16];
    key_hash(key, klen, h);
    uint8_t *s = probe(m, h);
    static const uint8_t zero[16];
    if (memcmp(s, zero, 16) == 0) {
        if (m->entries >= m->max_entries) return false;
        memcpy(s, h, 16);
        m->entries++;
    }
    gr_put_be64(s + 16, (uint64_t)offset);
    if (offset > m->latest_offset) m->latest_offset = offset;
    return true;
}

int64_t gr_offset_map_get(const struct gr_offset_map *m, const uint8_t *key, size_t klen) {
    uint8_t h[16];
    key_hash(key, klen, h);
    const uint8_t *s = probe(m, h);
    static const uint8_t zero[16];
    return memcmp(s, zero, 16) == 0 ? -1 : (int64_t)gr_be64(s + 16);
}

/* A buffer that went past the pass's I/O buffer size for one large batch goes back to that size
 * (Kafka's Cleaner.restoreBuffers): memory stays bounded by the I/O buffers, not by the group. */
static void restore_buffer(uint8_t **buf, size_t *cap, size_t bound) {
    if (*cap > bound) {
        free(*buf);
        *buf = NULL;
        *cap = 0;
    }
}

/* ---- batch access ---- */

/* Logs a batch the cleaner cannot use (Kafka's CorruptRecordException in the cleaner): the pass
 * is abandoned and the log marked uncleanable by the log manager; the data stays as it is. */
static void report_corrupt(const char *path, int64_t pos, int64_t offset, const char *why) {
    gr_error(LOGGER,
             "corrupt batch in segment '%s' at position %" PRId64 " (offset %" PRId64 "): %s; the cleaning "
             "pass is abandoned and the log left as it is",
             path, pos, offset, why);
}

/* Reads the batch at pos of an open segment file (path for messages) into *buf (grown as
 * needed) and checks its header and CRC-32C (records are checked where they are decoded).
 * 1 read, 0 end, GR_ECORRUPT (logged) or -errno. */
static int read_batch(int fd, const char *path, int64_t pos, int64_t size, uint8_t **buf, size_t *cap,
                      struct gr_batch_info *bi) {
    if (pos >= size) return 0;
    uint8_t hdr[GR_BATCH_HEADER_SIZE];
    ssize_t n = pread(fd, hdr, sizeof hdr, pos);
    if (n < 0) return -errno;
    int err = gr_batch_peek_header(hdr, (size_t)n, (size_t)(size - pos), bi);
    if (err != GR_BATCH_OK || bi->size > MAX_BATCH) {
        report_corrupt(path, pos, (size_t)n >= 8 ? (int64_t)gr_be64(hdr) : -1,
                       err != GR_BATCH_OK ? gr_batch_strerror(err) : "batch larger than 64 MiB");
        return GR_ECORRUPT;
    }
    if (bi->size > *cap) {
        *cap = bi->size;
        *buf = gr_realloc(*buf, *cap);
    }
    size_t got = 0;
    while (got < bi->size) {
        n = pread(fd, *buf + got, bi->size - got, pos + (int64_t)got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        if (n == 0) {
            report_corrupt(path, pos, bi->BaseOffset, "the file ends inside the batch");
            return GR_ECORRUPT;
        }
        got += (size_t)n;
    }
    struct gr_batch_info vi;
    err = gr_batch_validate_one(*buf, bi->size, GR_BATCH_V_NO_RECORDS, &vi);
    if (err != GR_BATCH_OK) {
        report_corrupt(path, pos, bi->BaseOffset, gr_batch_strerror(err));
        return GR_ECORRUPT;
    }
    return 1;
}

/* Calls fn for every record of the batch with the record's raw bytes [rs, re), read through the
 * log validator's record stream (storage/log_validator.h: the one reader of a batch's records,
 * compressed or not; memory is one record). Returns 0, fn's error, -E2BIG (the records inflate
 * past MAX_BATCH), -ENOMEM, or GR_ECORRUPT (they do not read). */
typedef int (*rec_fn)(void *arg, const struct gr_batch_rec_view *rv, const uint8_t *rs, const uint8_t *re);

static int for_each_record(const uint8_t *b, const struct gr_batch_info *bi, rec_fn fn, void *arg) {
    struct gr_record_stream st;
    struct gr_batch_rec_view rv;
    int rc = 0;
    gr_record_stream_open(&st, b, bi, MAX_BATCH, 0);
    while (rc == 0 && gr_record_stream_next(&st, &rv, GR_RECORD_WHOLE) == 1) rc = fn(arg, &rv, st.raw, st.raw + st.raw_len);
    if (rc == 0 && st.err != GR_BATCH_OK)
        rc = st.err == GR_BATCH_EINFLATE ? -E2BIG : st.err == GR_BATCH_ENOMEM ? -ENOMEM : GR_ECORRUPT;
    gr_record_stream_close(&st);
    return rc;
}

/* A for_each_record error that says nothing about the batch's integrity: its records inflate
 * beyond MAX_BATCH (a batch written before produce checked the bound) or memory ran out. The
 * batch's CRC was checked. */
static bool too_big_to_inflate(int rc) { return rc == -E2BIG || rc == -ENOMEM; }

/* ---- I/O throttle (Kafka's Throttler: sleep when the rate since the last check is above) ---- */

struct throttle {
    double rate; /* bytes/s; <= 0 or huge: off */
    int64_t start_ms;
    int64_t bytes;
    const atomic_bool *abort; /* gr_cleaner_params.abort (may be NULL) */
};

static bool aborted(const struct throttle *t) {
    return t->abort && atomic_load(t->abort);
}

/* Counts bytes read or written, sleeping while above the rate (in slices, so that an abort is
 * seen within 50 ms). Returns -ECANCELED once the pass is aborted, else 0. */
static int throttle_add(struct throttle *t, int64_t bytes) {
    if (aborted(t)) return -ECANCELED;
    if (t->rate <= 0 || t->rate >= 1e300) return 0;
    t->bytes += bytes;
    int64_t now = gr_mono_ms();
    int64_t elapsed = now - t->start_ms;
    if (elapsed < 100 && t->bytes < (int64_t)(t->rate / 10)) return 0;
    double want_ms = (double)t->bytes * 1000.0 / t->rate;
    int64_t until = now + (want_ms > (double)elapsed ? (int64_t)(want_ms - (double)elapsed) : 0);
    for (int64_t left = until - now; left > 0 && !aborted(t); left = until - gr_mono_ms()) {
        int64_t ms = GR_MIN(left, (int64_t)50);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    t->start_ms = gr_mono_ms();
    t->bytes = 0;
    return aborted(t) ? -ECANCELED : 0;
}

/* ---- cleanable range ---- */

static int64_t file_mtime_ms(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    return (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
}

void gr_plog_cleanable(struct gr_plog *log, int64_t checkpoint, int64_t now_ms, struct gr_cleanable *c) {
    pthread_mutex_lock(&log->mu);
    memset(c, 0, sizeof *c);
    struct gr_segment *act = log->segs[log->n_segs - 1];
    int64_t start = log->log_start_offset, end = act->next_offset;
    c->first_dirty = checkpoint < start || checkpoint > end ? start : checkpoint;
    c->checkpoint_reset = c->first_dirty != checkpoint;
    int64_t fu = act->base_offset;
    /* never past the first unstable offset: an undecided transaction (or one whose marker is
     * not yet replicated) is not cleaned, rounded down to its segment's base */
    int64_t unstable = gr_pstate_first_ongoing_offset(log->ps);
    for (int i = 0; i < log->n_unrepl; i++)
        if (unstable < 0 || log->unrepl[i].first < unstable) unstable = log->unrepl[i].first;
    if (unstable >= 0)
        for (size_t i = 0; i + 1 < log->n_segs; i++)
            if (log->segs[i]->next_offset > unstable) {
                fu = GR_MIN(fu, log->segs[i]->base_offset);
                break;
            }
    int64_t lag = log->cfg.min_compaction_lag_ms;
    for (size_t i = 0; i + 1 < log->n_segs; i++) {
        struct gr_segment *s = log->segs[i];
        if (s->next_offset <= c->first_dirty) continue;
        if (lag > 0 && s->max_timestamp > now_ms - lag) {
            fu = GR_MIN(fu, s->base_offset);
            break;
        }
    }
    c->first_uncleanable = GR_MAX(fu, c->first_dirty);
    for (size_t i = 0; i + 1 < log->n_segs; i++) {
        struct gr_segment *s = log->segs[i];
        if (s->next_offset <= c->first_dirty) c->clean_bytes += s->size;
        else if (s->base_offset < c->first_uncleanable) {
            c->cleanable_bytes += s->size;
            /* max.compaction.lag.ms: a dirty segment whose first batch is too old must go */
            if (log->cfg.max_compaction_lag_ms != INT64_MAX && s->first_batch_ts >= 0 &&
                s->first_batch_ts < now_ms - log->cfg.max_compaction_lag_ms)
                c->must_clean = true;
        }
    }
    int64_t tot = c->clean_bytes + c->cleanable_bytes;
    c->dirty_ratio = tot > 0 ? (double)c->cleanable_bytes / (double)tot : 0;
    c->min_ratio = log->cfg.min_cleanable_dirty_ratio;
    c->compact = log->cfg.cleanup_compact;
    c->must_clean = c->must_clean && c->cleanable_bytes > 0;
    gr_plog_unlock(log);
}

/* ---- transactions (Kafka's CleanedTransactionMetadata) ----
 * The aborted transactions of the range (from .txnindex) are consumed in first-offset order as
 * the batches are read: a transactional batch of a producer with a started aborted transaction
 * is aborted data (discardable); any other transactional batch belongs to a committed (or, below
 * the LSO, never ongoing) transaction. An ABORT marker is discardable only if no batch of its
 * transaction was seen in this pass (else it is kept and its entry copied to the cleaned
 * .txnindex); a COMMIT marker likewise; an empty control batch always. */

struct ab_open {
    struct gr_aborted_txn t;
    bool seen; /* a batch of it was read in this pass */
};

struct txn_meta {
    struct gr_aborted_txn *ab; /* sorted by first_offset */
    int nab, next;
    struct ab_open *open;
    int nopen, capopen;
    int64_t *committed; /* producers whose (non-aborted) transactional batches were seen */
    int ncommitted, capcommitted;
    struct gr_aborted_txn *kept; /* entries for the cleaned segment's .txnindex */
    int nkept, capkept;
};

static int cmp_first(const void *a, const void *b) {
    const struct gr_aborted_txn *x = a, *y = b;
    return x->first_offset < y->first_offset ? -1 : x->first_offset > y->first_offset;
}

static void txn_meta_init(struct txn_meta *t, struct gr_plog *log, int64_t from, int64_t to) {
    memset(t, 0, sizeof *t);
    pthread_mutex_lock(&log->mu);
    t->nab = gr_txn_index_range(log->ti, from, to, &t->ab);
    gr_plog_unlock(log);
    if (t->nab > 1) qsort(t->ab, (size_t)t->nab, sizeof *t->ab, cmp_first);
}

static void txn_meta_free(struct txn_meta *t) {
    free(t->ab);
    free(t->open);
    free(t->committed);
    free(t->kept);
}

static struct ab_open *find_open(struct txn_meta *t, int64_t pid) {
    for (int i = 0; i < t->nopen; i++)
        if (t->open[i].t.producer_id == pid) return &t->open[i];
    return NULL;
}

static void consume_upto(struct txn_meta *t, int64_t offset) {
    while (t->next < t->nab && t->ab[t->next].first_offset <= offset) {
        const struct gr_aborted_txn *a = &t->ab[t->next++];
        if (find_open(t, a->producer_id)) continue;
        if (t->nopen == t->capopen) {
            t->capopen = t->capopen ? t->capopen * 2 : 8;
            t->open = gr_realloc(t->open, (size_t)t->capopen * sizeof *t->open);
        }
        t->open[t->nopen++] = (struct ab_open){*a, false};
    }
}

static bool committed_remove(struct txn_meta *t, int64_t pid) {
    for (int i = 0; i < t->ncommitted; i++)
        if (t->committed[i] == pid) {
            t->committed[i] = t->committed[--t->ncommitted];
            return true;
        }
    return false;
}

/* A data batch was read: true if it is aborted data. */
static bool txn_on_batch(struct txn_meta *t, const struct gr_batch_info *bi) {
    consume_upto(t, gr_batch_info_last_offset(bi));
    if (!(bi->Attributes & GR_BATCH_ATTR_TRANSACTIONAL)) return false;
    struct ab_open *o = find_open(t, bi->ProducerId);
    if (o) {
        o->seen = true;
        return true;
    }
    for (int i = 0; i < t->ncommitted; i++)
        if (t->committed[i] == bi->ProducerId) return false;
    if (t->ncommitted == t->capcommitted) {
        t->capcommitted = t->capcommitted ? t->capcommitted * 2 : 8;
        t->committed = gr_realloc(t->committed, (size_t)t->capcommitted * sizeof *t->committed);
    }
    t->committed[t->ncommitted++] = bi->ProducerId;
    return false;
}

static int ctrl_type_rec(void *arg, const struct gr_batch_rec_view *rv, const uint8_t *rs, const uint8_t *re) {
    (void)rs, (void)re;
    int *type = arg;
    if (*type == -1) *type = rv->Key && rv->KeyLength >= 4 ? (int)gr_be16((const uint8_t *)rv->Key + 2) : -2;
    return 0;
}

/* A control batch was read: true if it may be discarded (subject to the delete horizon). */
static bool txn_on_control(struct txn_meta *t, const uint8_t *b, const struct gr_batch_info *bi) {
    consume_upto(t, gr_batch_info_last_offset(bi));
    int type = -1;
    if (bi->RecordCount <= 0 || for_each_record(b, bi, ctrl_type_rec, &type) != 0 || type == -1) return true;
    if (type == 0) { /* ABORT */
        struct ab_open *o = find_open(t, bi->ProducerId);
        if (!o) return true;
        struct ab_open a = *o;
        *o = t->open[--t->nopen];
        if (!a.seen) return true;
        if (t->nkept == t->capkept) {
            t->capkept = t->capkept ? t->capkept * 2 : 8;
            t->kept = gr_realloc(t->kept, (size_t)t->capkept * sizeof *t->kept);
        }
        t->kept[t->nkept++] = a.t;
        return false;
    }
    if (type == 1) return !committed_remove(t, bi->ProducerId); /* COMMIT */
    return false;
}

/* ---- the pass ---- */

struct map_ctx {
    struct gr_offset_map *m;
    int64_t from, to;
};

static int map_rec(void *arg, const struct gr_batch_rec_view *rv, const uint8_t *rs, const uint8_t *re) {
    (void)rs, (void)re;
    struct map_ctx *c = arg;
    if (rv->Offset < c->from || rv->Offset >= c->to || !rv->Key) return 0;
    return gr_offset_map_put(c->m, rv->Key, (size_t)rv->KeyLength, rv->Offset) ? 0 : -ENOSPC;
}

/* A source segment captured under the lock; read without it through its own descriptor. */
struct src_seg {
    struct gr_segment *seg; /* identity only: dereferenced under the lock */
    int64_t base, size, next, mtime;
    int fd;
    char *path;
};

/* Fills the map over [from, to); returns the end offset reached (<= to). No lock held. */
static int build_map(struct src_seg *src, size_t nsrc, int64_t from, int64_t to, struct gr_offset_map *m,
                     struct txn_meta *tm, struct throttle *th, size_t io_buf, int64_t *end_out,
                     struct gr_clean_stats *st) {
    *end_out = from;
    int rc = 0;
    uint8_t *buf = NULL;
    size_t cap = 0;
    for (size_t i = 0; rc == 0 && i < nsrc; i++) {
        struct src_seg *s = &src[i];
        if (s->next <= from) continue;
        if (s->base >= to) break;
        int64_t pos = 0;
        struct gr_batch_info bi;
        int r;
        while ((r = read_batch(s->fd, s->path, pos, s->size, &buf, &cap, &bi)) == 1) {
            int64_t bpos = pos;
            pos += (int64_t)bi.size;
            if ((r = throttle_add(th, (int64_t)bi.size)) < 0) break;
            st->bytes_read += (int64_t)bi.size;
            int64_t last = gr_batch_info_last_offset(&bi);
            if (last < from) continue;
            if (bi.BaseOffset >= to) break;
            if (bi.Attributes & GR_BATCH_ATTR_CONTROL) {
                txn_on_control(tm, buf, &bi);
            } else if (!txn_on_batch(tm, &bi)) { /* aborted data never enters the map */
                if (m->entries + (size_t)GR_MAX(bi.RecordCount, 0) > m->max_entries && m->entries > 0) {
                    r = 2; /* full: stop before this batch */
                    break;
                }
                struct map_ctx mc = {m, from, to};
                int frc = for_each_record(buf, &bi, map_rec, &mc);
                if (frc == -ENOSPC) {
                    r = 2;
                    break;
                }
                if (too_big_to_inflate(frc)) {
                    /* valid (CRC-checked) but inflating beyond the cleaner's bound: its keys stay
                     * out of the map and the batch is kept whole (clean_batch) */
                    gr_warn(LOGGER, "batch at offset %" PRId64 " of '%s' cannot be inflated here (%s): kept as it is",
                            bi.BaseOffset, s->path, gr_strerror(frc));
                } else if (frc) { /* Kafka: CorruptRecordException ends the pass */
                    report_corrupt(s->path, bpos, bi.BaseOffset, "its records cannot be decoded");
                    r = GR_ECORRUPT;
                    break;
                }
            }
            *end_out = GR_MIN(last + 1, to);
            if (last >= from && last < to && last > m->latest_offset) m->latest_offset = last;
            restore_buffer(&buf, &cap, io_buf);
        }
        if (r < 0) rc = r;
        if (r == 2) break;
        if (r == 0 && s->next <= to) *end_out = GR_MAX(*end_out, GR_MIN(s->next, to));
    }
    free(buf);
    return rc;
}

struct filter_ctx {
    const struct gr_offset_map *m;
    bool retain_deletes;
    uint8_t *out;
    size_t len, cap;
    int32_t kept, tombstones_kept;
    int64_t max_ts;
    int64_t records;
};

static int filter_rec(void *arg, const struct gr_batch_rec_view *rv, const uint8_t *rs, const uint8_t *re) {
    struct filter_ctx *c = arg;
    c->records++;
    bool keep;
    if (rv->Offset > c->m->latest_offset) keep = true;
    else if (!rv->Key) keep = false;
    else keep = rv->Offset >= gr_offset_map_get(c->m, rv->Key, (size_t)rv->KeyLength) &&
                (rv->Value != NULL || c->retain_deletes);
    if (!keep) return 0;
    size_t n = (size_t)(re - rs);
    if (c->len + n > c->cap) {
        c->cap = (c->len + n) * 2;
        c->out = gr_realloc(c->out, c->cap);
    }
    memcpy(c->out + c->len, rs, n);
    c->len += n;
    c->kept++;
    if (!rv->Value) c->tombstones_kept++;
    if (rv->Timestamp > c->max_ts) c->max_ts = rv->Timestamp;
    return 0;
}

/* True when the batch is an active producer's last data batch (Kafka keeps it so that the
 * producer state can be rebuilt from the log). */
static bool is_producer_last_batch(struct gr_plog *log, const struct gr_batch_info *bi) {
    if (bi->ProducerId < 0) return false;
    struct gr_pstate_entry e;
    pthread_mutex_lock(&log->mu);
    bool found = gr_pstate_lookup(log->ps, bi->ProducerId, &e);
    gr_plog_unlock(log);
    if (!found) return false;
    if (e.n > 0) return e.batches[e.n - 1].last_offset == gr_batch_info_last_offset(bi);
    /* no data batch of the current epoch: the marker carrying that epoch (fencing) */
    return (bi->Attributes & GR_BATCH_ATTR_CONTROL) && bi->ProducerEpoch == e.epoch;
}

/* Zigzag LEB128 (the record format's varint/varlong). */
static int get_varlong(const uint8_t **p, const uint8_t *end, int64_t *out) {
    uint64_t u = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*p >= end) return -1;
        uint8_t c = *(*p)++;
        u |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
            return 0;
        }
    }
    return -1;
}

/* Re-encodes the records in[0, len) (raw, uncompressed) with their timestampDelta moved from
 * old_base to new_base, so that every record keeps its timestamp (Kafka's MemoryRecordsBuilder
 * with a delete horizon as base timestamp). Everything else of a record is copied as it is.
 * 0, or GR_ECORRUPT. */
static int rebase_records(const uint8_t *in, size_t len, int64_t old_base, int64_t new_base, uint8_t **out,
                          size_t *olen) {
    /* a record is >= 7 bytes and grows by at most 11 (9 of delta, 2 of length): < 3x */
    uint8_t *o = gr_malloc(3 * len + 32);
    size_t n = 0;
    const uint8_t *p = in, *end = in + len;
    while (p < end) {
        int64_t rlen, delta;
        if (get_varlong(&p, end, &rlen) < 0 || rlen < 2 || rlen > end - p) goto bad;
        const uint8_t *body = p, *bend = p + rlen, *q = body + 1; /* attributes i8 */
        if (get_varlong(&q, bend, &delta) < 0) goto bad;
        /* the record's timestamp and its new delta in two's complement, as every reader adds
         * base and delta (batch.c; Java's long arithmetic): extreme timestamps and horizons
         * wrap there and back instead of overflowing a signed sum */
        uint64_t ts = (uint64_t)old_base + (uint64_t)delta;
        uint8_t nb[10];
        size_t dn = gr_batch_put_varlong(nb, (int64_t)(ts - (uint64_t)new_base));
        int64_t newlen = 1 + (int64_t)dn + (bend - q);
        n += gr_batch_put_varlong(o + n, newlen);
        o[n++] = body[0];
        memcpy(o + n, nb, dn);
        n += dn;
        memcpy(o + n, q, (size_t)(bend - q));
        n += (size_t)(bend - q);
        p = bend;
    }
    *out = o;
    *olen = n;
    return 0;
bad:
    free(o);
    return GR_ECORRUPT;
}

/* Builds a batch from b's header and the raw records recs[0, rlen) (kept of them): compressed with
 * b's codec, recordCount and CRC recomputed, maxTimestamp set to max_ts (CreateTime, kept > 0); with
 * horizon >= 0 the records are rebased on it and the delete-horizon bit is set (KIP-534). */
static int build_batch(const uint8_t *b, const struct gr_batch_info *bi, const uint8_t *recs, size_t rlen,
                       int32_t kept, int64_t max_ts, int64_t horizon, uint8_t **built, size_t *outn) {
    uint8_t *rebased = NULL;
    if (horizon >= 0 && rlen > 0) {
        size_t nl;
        if (rebase_records(recs, rlen, bi->BaseTimestamp, horizon, &rebased, &nl) != 0) return GR_ECORRUPT;
        recs = rebased;
        rlen = nl;
    }
    int codec = gr_batch_info_compression(bi);
    uint8_t *payload = (uint8_t *)recs;
    size_t plen = rlen;
    if (codec != 0 && kept > 0 && gr_compress(codec, recs, rlen, &payload, &plen) != 0) {
        payload = (uint8_t *)recs; /* cannot recompress: write uncompressed */
        codec = 0;
    }
    if (kept == 0) codec = 0;
    size_t n = GR_BATCH_HEADER_SIZE + plen;
    uint8_t *o = gr_malloc(n);
    memcpy(o, b, GR_BATCH_HEADER_SIZE);
    if (plen) memcpy(o + GR_BATCH_HEADER_SIZE, payload, plen);
    if (payload != recs) free(payload);
    free(rebased);
    uint16_t attrs = (uint16_t)((bi->Attributes & ~GR_BATCH_ATTR_COMPRESSION_MASK) | codec);
    if (horizon >= 0) {
        attrs |= GR_BATCH_ATTR_DELETE_HORIZON;
        gr_put_be64(o + GR_BATCH_OFF_BASE_TIMESTAMP, (uint64_t)horizon);
    }
    gr_put_be32(o + 8, (uint32_t)(n - 12));
    gr_put_be16(o + GR_BATCH_OFF_ATTRIBUTES, attrs);
    if (!(bi->Attributes & GR_BATCH_ATTR_LOG_APPEND_TIME) && kept > 0 && max_ts != INT64_MIN)
        gr_put_be64(o + GR_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)max_ts);
    gr_put_be32(o + GR_BATCH_OFF_RECORD_COUNT, (uint32_t)kept);
    gr_batch_update_crc(o, n);
    *built = o;
    *outn = n;
    return 0;
}

static int collect_rec(void *arg, const struct gr_batch_rec_view *rv, const uint8_t *rs, const uint8_t *re) {
    (void)rv;
    struct filter_ctx *c = arg;
    size_t n = (size_t)(re - rs);
    if (c->len + n > c->cap) {
        c->cap = (c->len + n) * 2;
        c->out = gr_realloc(c->out, c->cap);
    }
    memcpy(c->out + c->len, rs, n);
    c->len += n;
    c->kept++;
    return 0;
}

/* Appends the filtered form of batch b to *o. Tombstones and transaction markers are removed on
 * time as Kafka 3.1 does (KIP-534, LogCleaner.cleanInto / MemoryRecords.filterTo): the first
 * pass that keeps a tombstone, or a marker whose transaction has no data left, rewrites its
 * batch with the delete-horizon attribute bit and now + delete.retention.ms as base timestamp;
 * a later pass drops the tombstones / the marker once that horizon has passed. */
static int clean_batch(struct gr_plog *log, const uint8_t *b, const struct gr_batch_info *bi,
                       const struct gr_offset_map *m, int64_t now_ms, int64_t delete_retention_ms,
                       struct txn_meta *tm, uint8_t **o, size_t *olen, size_t *ocap, struct gr_clean_stats *st) {
    const uint8_t *outb = NULL;
    size_t outn = 0;
    uint8_t *built = NULL;
    bool has_horizon = (bi->Attributes & GR_BATCH_ATTR_DELETE_HORIZON) != 0;
    int64_t horizon = has_horizon ? bi->BaseTimestamp : -1;
    int64_t new_horizon = delete_retention_ms > INT64_MAX - now_ms ? INT64_MAX : now_ms + delete_retention_ms;
    if (bi->Attributes & GR_BATCH_ATTR_CONTROL) {
        /* a marker whose transaction's data is gone gets a horizon, and goes once it passed; a
         * producer's last batch stays (kept whole: Kafka keeps its header only) */
        bool can_discard = txn_on_control(tm, b, bi);
        if (is_producer_last_batch(log, bi) || !can_discard || (has_horizon && now_ms < horizon)) {
            outb = b;
            outn = bi->size;
        } else if (!has_horizon) {
            struct filter_ctx fc = {.m = m, .retain_deletes = true};
            int rc = for_each_record(b, bi, collect_rec, &fc);
            if (rc == 0) rc = build_batch(b, bi, fc.out, fc.len, fc.kept, INT64_MIN, new_horizon, &built, &outn);
            free(fc.out);
            if (rc) return GR_ECORRUPT;
            outb = built;
        } /* else: past its horizon, the marker goes */
    } else {
        struct filter_ctx fc = {.m = m, .retain_deletes = !has_horizon || now_ms < horizon, .max_ts = -1};
        int rc = 0;
        bool aborted = txn_on_batch(tm, bi);
        if (aborted) /* aborted data: every record goes */
            fc.records = GR_MAX(bi->RecordCount, 0);
        else
            rc = for_each_record(b, bi, filter_rec, &fc);
        if (too_big_to_inflate(rc)) { /* valid but beyond the cleaner's bound: kept whole */
            free(fc.out);
            fc.out = NULL;
            fc.len = 0;
            fc.tombstones_kept = 0;
            fc.kept = fc.records = GR_MAX(bi->RecordCount, 0);
        } else if (rc) { /* the caller abandons the pass (Kafka's CorruptRecordException) */
            free(fc.out);
            return GR_ECORRUPT;
        }
        st->records_read += fc.records;
        st->records_kept += fc.kept;
        bool set_horizon = fc.tombstones_kept > 0 && !has_horizon;
        if (!aborted && fc.kept == bi->RecordCount && !set_horizon) {
            outb = b;
            outn = bi->size;
        } else if (fc.kept > 0 || is_producer_last_batch(log, bi)) {
            rc = build_batch(b, bi, fc.out, fc.len, fc.kept, fc.max_ts, set_horizon ? new_horizon : -1, &built,
                             &outn);
            if (rc) {
                free(fc.out);
                return GR_ECORRUPT;
            }
            outb = built;
        }
        free(fc.out);
    }
    if (outn) {
        if (*olen + outn > *ocap) {
            *ocap = (*olen + outn) * 2;
            *o = gr_realloc(*o, *ocap);
        }
        memcpy(*o + *olen, outb, outn);
        *olen += outn;
    }
    free(built);
    return 0;
}

static int write_fd(int fd, const uint8_t *buf, size_t len) {
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, buf + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -errno;
        done += (size_t)w;
    }
    return 0;
}

static int write_all(const char *path, const uint8_t *buf, size_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    int rc = write_fd(fd, buf, len);
    if (rc == 0 && fsync(fd) < 0) rc = -errno;
    close(fd);
    return rc;
}

/* Test hook: GREGOR_TEST_CLEANER_CRASH=cleaned|swap|deleted kills the process at that step. */
static void crash_point(const char *step) {
    const char *e = getenv("GREGOR_TEST_CLEANER_CRASH");
    if (e && strcmp(e, step) == 0) {
        gr_warn(LOGGER, "GREGOR_TEST_CLEANER_CRASH=%s: killing the process", step);
        raise(SIGKILL);
    }
}

static void set_mtime(const char *path, int64_t ms) {
    struct timespec ts[2] = {{ms / 1000, (ms % 1000) * 1000000L}, {ms / 1000, (ms % 1000) * 1000000L}};
    utimensat(AT_FDCWD, path, ts, 0);
}

/* Writes the cleaned form of src[0..n) to <base>.log.cleaned (fsynced, mtime of the last
 * source) without the log's lock, streaming as Kafka's Cleaner.cleanInto: batches are read one by
 * one into the read buffer and their cleaned forms gathered in the write buffer, which is written
 * out whenever it holds io_buf bytes; both grow for a single larger batch only. */
static int write_cleaned(struct gr_plog *log, struct src_seg *src, size_t n, const struct gr_offset_map *m,
                         int64_t now_ms, int64_t delete_retention_ms, struct txn_meta *tm, struct throttle *th,
                         size_t io_buf,
                         struct gr_clean_stats *st, const char *cleaned, const char *tcleaned) {
    tm->nkept = 0;
    uint8_t *out = NULL, *buf = NULL;
    size_t olen = 0, ocap = 0, cap = 0;
    int64_t written = 0;
    int fd = open(cleaned, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = fd < 0 ? -errno : 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int64_t pos = 0;
        struct gr_batch_info bi;
        int r;
        while ((r = read_batch(src[i].fd, src[i].path, pos, src[i].size, &buf, &cap, &bi)) == 1) {
            int64_t bpos = pos;
            pos += (int64_t)bi.size;
            if ((r = throttle_add(th, (int64_t)bi.size)) < 0) break;
            st->bytes_read += (int64_t)bi.size;
            if ((r = clean_batch(log, buf, &bi, m, now_ms, delete_retention_ms, tm, &out, &olen, &ocap, st)) < 0) {
                report_corrupt(src[i].path, bpos, bi.BaseOffset, "its records cannot be decoded");
                break;
            }
            restore_buffer(&buf, &cap, io_buf);
            if (olen >= io_buf) {
                /* What the swap would put in place must read back whole: recovery would cut a
                 * segment at the first invalid batch and lose the rest of the group. */
                struct gr_batch_summary vs;
                if (gr_batch_validate_all(out, olen, GR_BATCH_V_NO_RECORDS, &vs) != GR_BATCH_OK) {
                    gr_error(LOGGER, "the cleaned form of '%s' does not validate at byte %zu; the pass is abandoned",
                             src[0].path, (size_t)written + vs.bad_pos);
                    r = GR_ECORRUPT;
                    break;
                }
                if ((r = write_fd(fd, out, olen)) < 0 || (r = throttle_add(th, (int64_t)olen)) < 0) break;
                written += (int64_t)olen;
                olen = 0;
                restore_buffer(&out, &ocap, 2 * io_buf);
            }
        }
        if (r < 0) rc = r;
    }
    free(buf);
    struct gr_batch_summary vs;
    if (rc == 0 && olen > 0 && gr_batch_validate_all(out, olen, GR_BATCH_V_NO_RECORDS, &vs) != GR_BATCH_OK) {
        gr_error(LOGGER, "the cleaned form of '%s' does not validate at byte %zu; the pass is abandoned", src[0].path,
                 (size_t)written + vs.bad_pos);
        rc = GR_ECORRUPT;
    }
    if (rc == 0) rc = write_fd(fd, out, olen);
    if (rc == 0) rc = throttle_add(th, (int64_t)olen);
    if (rc == 0 && fsync(fd) < 0) rc = -errno;
    if (fd >= 0) close(fd);
    free(out);
    if (rc == 0) set_mtime(cleaned, src[n - 1].mtime);
    if (rc == 0) { /* the cleaned segment's .txnindex: the aborted transactions it still holds data of */
        uint8_t *ti = gr_malloc((size_t)GR_MAX(tm->nkept, 1) * GR_TXN_INDEX_ENTRY_SIZE);
        for (int k = 0; k < tm->nkept; k++) gr_txn_index_encode(&tm->kept[k], ti + (size_t)k * GR_TXN_INDEX_ENTRY_SIZE);
        rc = write_all(tcleaned, ti, (size_t)tm->nkept * GR_TXN_INDEX_ENTRY_SIZE);
        free(ti);
    }
    return rc;
}

/* Under the lock: swaps <base>.log.cleaned in for the segments src[0..n) (which must still be
 * consecutive in log->segs). */
static int swap_in(struct gr_plog *log, struct src_seg *src, size_t n, const char *cleaned, const char *tcleaned,
                   const struct txn_meta *tm, struct gr_clean_stats *st) {
    /* retention deletes whole segments from the start only (without bumping seg_gen): a group
     * that lost any of them is skipped (swapping it would bring deleted records back) */
    if (src[0].base < log->segs[0]->base_offset) return -ENOENT;
    size_t first = 0; /* by address and base: a freed segment's address may be reused */
    while (first < log->n_segs && (log->segs[first] != src[0].seg || log->segs[first]->base_offset != src[0].base))
        first++;
    if (first + n >= log->n_segs) return -ESTALE; /* never the active segment */
    for (size_t i = 0; i < n; i++)
        if (log->segs[first + i] != src[i].seg || log->segs[first + i]->base_offset != src[i].base) return -ESTALE;
    int64_t base = src[0].base;
    char *swap = gr_asprintf("%s/%020" PRId64 ".log.swap", log->dir, base);
    char *final = gr_asprintf("%s/%020" PRId64 ".log", log->dir, base);
    char *tswap = gr_asprintf("%s/%020" PRId64 GR_TXN_INDEX_SUFFIX ".swap", log->dir, base);
    char *tfinal = gr_asprintf("%s/%020" PRId64 GR_TXN_INDEX_SUFFIX, log->dir, base);
    int64_t end_base = log->segs[first + n]->base_offset, group_end = src[n - 1].next;
    int rc = 0, io = 0; /* io: the first failed fsync after the renames (reported, nothing undone) */
    crash_point("cleaned");
    /* the .txnindex first: a .txnindex.swap without its .log.swap is dropped at open */
    /* never over an existing .swap, nor its .txnindex.swap: those left by a swap that failed
     * half-way hold a group whose old segments are already gone (they wait for
     * gr_plog_complete_swaps at the next open) */
    bool tswapped = false;
    if (renameat2(AT_FDCWD, tcleaned, AT_FDCWD, tswap, RENAME_NOREPLACE) < 0) rc = -errno;
    else tswapped = true;
    if (rc == -EEXIST)
        gr_error(LOGGER, "'%s' exists (a swap that failed half-way, left for the recovery at the next start): "
                 "not overwritten", tswap);
    if (rc == 0 && renameat2(AT_FDCWD, cleaned, AT_FDCWD, swap, RENAME_NOREPLACE) < 0) {
        rc = -errno;
        if (rc == -EEXIST) {
            gr_error(LOGGER, "'%s' exists (a swap that failed half-way, left for the recovery at the next start): "
                     "not overwritten", swap);
            rc = -EIO; /* Kafka: KafkaStorageException, the dir goes offline */
        }
    } else if (rc == 0 && (rc = gr_plog_fsync_dir(log->dir)) != 0)
        rename(swap, cleaned); /* not durable: back to .cleaned (the caller unlinks it) */
    if (rc == -EEXIST) rc = -EIO; /* Kafka: KafkaStorageException, the dir goes offline */
    if (rc) {
        if (tswapped) rename(tswap, tcleaned);
        goto out;
    }
    crash_point("swap");
    /* old segments out: every .log -> .log.deleted before anything is unlinked. A failed rename
     * undoes the renames done and the swap, so the old segments stay as they were; if the undo
     * fails too, the .swap stays on disk and gr_plog_complete_swaps finishes it at the next open
     * (going on would leave an old .log of the group next to the cleaned one: overlapping
     * segments at the next start). */
    size_t renamed = 0;
    for (; renamed < n; renamed++) {
        struct gr_segment *s = log->segs[first + renamed];
        gr_segment_deactivate(s);
        char *del = gr_asprintf("%s.deleted", GR_SEG_LOG_PATH(s));
        int r = rename(GR_SEG_LOG_PATH(s), del);
        if (r < 0) rc = -errno;
        free(del);
        if (r < 0) break;
        if (renamed == 0) crash_point("deleted");
    }
    if (rc) {
        bool undone = true;
        for (size_t i = 0; i < renamed; i++) {
            char *del = gr_asprintf("%s.deleted", GR_SEG_LOG_PATH(log->segs[first + i]));
            if (rename(del, GR_SEG_LOG_PATH(log->segs[first + i])) < 0) undone = false;
            free(del);
        }
        if (undone && rename(swap, cleaned) == 0) {
            unlink(tswap);
            gr_plog_fsync_dir(log->dir);
            gr_error(LOGGER, "cannot rename a segment of '%s' to .deleted: %s; the swap at %" PRId64 " is undone",
                     log->dir, gr_strerror(rc), base);
        } else {
            gr_error(LOGGER,
                     "cannot rename a segment of '%s' to .deleted: %s; '%s' is left for the recovery at the "
                     "next start",
                     log->dir, gr_strerror(rc), swap);
            rc = -EIO; /* half-swapped: the log's segments no longer match the disk (Kafka's
                        * KafkaStorageException: the dir goes offline whatever the errno) */
        }
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        struct gr_segment *s = log->segs[first + i];
        char path[GR_SEG_PATH_MAX];
        gr_segment_sibling_path(s, ".index", path);
        unlink(path);
        gr_segment_sibling_path(s, ".timeindex", path);
        unlink(path);
        if (i > 0) { /* the first one's is replaced by the .txnindex.swap */
            char *tp = gr_asprintf("%s/%020" PRId64 GR_TXN_INDEX_SUFFIX, log->dir, s->base_offset);
            unlink(tp);
            free(tp);
        }
    }
    io = gr_plog_fsync_dir(log->dir);
    struct stat tst;
    if (stat(tswap, &tst) == 0 && tst.st_size == 0) {
        unlink(tfinal);
        unlink(tswap);
    } else if (rename(tswap, tfinal) < 0) {
        rc = -errno;
    }
    crash_point("txnindex");
    if (rc == 0 && rename(swap, final) < 0) rc = -errno;
    if (rc) {
        /* The .swap (and .txnindex.swap) hold the group now and the old data is in the .deleted
         * files: all stay for gr_plog_complete_swaps at the next open, and so do the segments in
         * memory (no empty segment swapped in, no .deleted unlinked). */
        gr_error(LOGGER, "cannot put '%s' in place: %s; it is left for the recovery at the next start", swap,
                 gr_strerror(rc));
        rc = -EIO; /* half-swapped: as above, the dir goes offline */
        goto out;
    }
    if (io == 0) io = gr_plog_fsync_dir(log->dir);
    for (size_t i = 0; i < n; i++) {
        char *del = gr_asprintf("%s.deleted", GR_SEG_LOG_PATH(log->segs[first + i]));
        unlink(del);
        free(del);
        st->bytes_before += log->segs[first + i]->size;
        gr_segment_free(log->segs[first + i]);
    }
    struct gr_segment *ns = gr_segment_new(log->dir, base);
    int64_t cut = 0;
    rc = gr_segment_recover(ns, base, log->cfg.index_interval_bytes, NULL, NULL, &cut);
    if (rc == 0) gr_segment_seal_time_index(ns);
    if (rc == 0) rc = gr_segment_persist_index(ns);
    set_mtime(final, src[n - 1].mtime);
    ns->created_ms = src[n - 1].mtime;
    st->bytes_after += ns->size;
    log->segs[first] = ns;
    memmove(log->segs + first + 1, log->segs + first + n, (log->n_segs - first - n) * sizeof *log->segs);
    log->n_segs -= n - 1;
    log->seg_gen++;
    st->segments_cleaned += (int)n;
    gr_txn_index_replace_segments(log->ti, base, end_base, group_end, tm->kept, tm->nkept);
    if (rc == 0) rc = io; /* the swap is complete in memory; the caller reports the I/O error */
out:
    free(swap);
    free(final);
    free(tswap);
    free(tfinal);
    return rc;
}

int gr_plog_clean(struct gr_plog *log, int64_t first_dirty_ckpt, const struct gr_cleaner_params *p,
                  struct gr_clean_stats *st) {
    memset(st, 0, sizeof *st);
    struct gr_cleanable c;
    gr_plog_cleanable(log, first_dirty_ckpt, p->now_ms, &c);
    st->first_dirty = c.first_dirty;
    st->end_offset = c.first_dirty;
    if (c.first_uncleanable <= c.first_dirty) return 0;
    /* capture the non-active segments below firstUncleanable, each with its own descriptor */
    pthread_mutex_lock(&log->mu);
    uint64_t gen = log->seg_gen;
    size_t nsrc = 0;
    struct src_seg *src = gr_calloc(log->n_segs, sizeof *src);
    int64_t delete_retention_ms = log->cfg.delete_retention_ms;
    int rc = 0;
    for (size_t i = 0; i + 1 < log->n_segs && log->segs[i]->base_offset < c.first_uncleanable; i++) {
        struct gr_segment *sg = log->segs[i];
        struct src_seg *s = &src[nsrc];
        s->fd = open(GR_SEG_LOG_PATH(sg), O_RDONLY | O_CLOEXEC);
        if (s->fd < 0) {
            rc = -errno;
            break;
        }
        s->seg = sg;
        s->base = sg->base_offset;
        s->size = sg->size;
        s->next = sg->next_offset;
        s->mtime = file_mtime_ms(GR_SEG_LOG_PATH(sg));
        s->path = gr_strdup(GR_SEG_LOG_PATH(sg));
        nsrc++;
    }
    int32_t seg_bytes = log->cfg.segment_bytes;
    gr_plog_unlock(log);
    struct throttle th = {p->io_max_bytes_per_second, gr_mono_ms(), 0, p->abort};
    size_t io_buf = p->io_buffer_bytes > 0 ? (size_t)p->io_buffer_bytes : 256 << 10;
    struct gr_offset_map m;
    gr_offset_map_init(&m, p->dedupe_buffer_bytes, p->load_factor);
    int64_t end = c.first_dirty;
    struct txn_meta tm;
    txn_meta_init(&tm, log, c.first_dirty, c.first_uncleanable);
    if (rc == 0) rc = build_map(src, nsrc, c.first_dirty, c.first_uncleanable, &m, &tm, &th, io_buf, &end, st);
    txn_meta_free(&tm);
    if (m.latest_offset < 0) m.latest_offset = c.first_dirty - 1;
    /* one transaction state for all groups of the pass (Kafka's CleanedTransactionMetadata) */
    txn_meta_init(&tm, log, nsrc ? src[0].base : end, end);
    /* groups of source segments below `end`, each rewritten unlocked and swapped in locked */
    size_t i = 0;
    while (rc == 0 && end > c.first_dirty && i < nsrc && src[i].base < end) {
        size_t n = 1;
        int64_t sz = src[i].size;
        while (i + n < nsrc && src[i + n].base < end && sz + src[i + n].size <= seg_bytes &&
               src[i + n].next - 1 - src[i].base <= INT32_MAX) {
            sz += src[i + n].size;
            n++;
        }
        char *cleaned = gr_asprintf("%s/%020" PRId64 ".log.cleaned", log->dir, src[i].base);
        char *tcleaned = gr_asprintf("%s/%020" PRId64 GR_TXN_INDEX_SUFFIX ".cleaned", log->dir, src[i].base);
        rc = write_cleaned(log, src + i, n, &m, p->now_ms, delete_retention_ms, &tm, &th, io_buf, st, cleaned,
                           tcleaned);
        if (rc == 0) {
            pthread_mutex_lock(&log->mu);
            if (log->seg_gen != gen) rc = -ESTALE; /* truncated, retention or deleted meanwhile */
            else rc = swap_in(log, src + i, n, cleaned, tcleaned, &tm, st);
            gen = log->seg_gen;
            gr_plog_unlock(log);
        }
        if (rc == -ENOENT) { /* retention deleted (part of) the group meanwhile: the next one */
            gr_info(LOGGER, "cleaning '%s': segments from offset %" PRId64 " deleted by retention meanwhile, skipped",
                    log->dir, src[i].base);
            unlink(cleaned);
            unlink(tcleaned);
            rc = 0;
        }
        if (rc) {
            unlink(cleaned);
            unlink(tcleaned);
            if (rc != -ESTALE && rc != -ECANCELED)
                gr_error(LOGGER, "cleaning '%s' from offset %" PRId64 " failed: %s", log->dir, src[i].base,
                         gr_strerror(rc));
        }
        free(cleaned);
        free(tcleaned);
        i += n;
    }
    txn_meta_free(&tm);
    for (size_t k = 0; k < nsrc; k++) {
        close(src[k].fd);
        free(src[k].path);
    }
    free(src);
    gr_offset_map_free(&m);
    if (rc == GR_ECORRUPT) {
        /* A segment cut or replaced under the pass (a follower's truncation: Kafka aborts the
         * cleaning first) reads short or shifted: not corruption, and not a reason to mark a
         * healthy log uncleanable. */
        pthread_mutex_lock(&log->mu);
        if (log->seg_gen != gen) rc = -ESTALE;
        gr_plog_unlock(log);
    }
    if (rc == -ECANCELED) { /* aborted (the log is being deleted): nothing swapped since */
        gr_info(LOGGER, "cleaning of '%s' aborted", log->dir);
        st->end_offset = c.first_dirty;
        return rc;
    }
    if (rc == -ESTALE) { /* the log changed under the pass: nothing wrong, try again later */
        gr_info(LOGGER, "cleaning of '%s' abandoned: its segments changed meanwhile", log->dir);
        st->end_offset = c.first_dirty;
        return 0;
    }
    st->end_offset = end;
    if (rc == 0 && st->segments_cleaned)
        gr_info(LOGGER, "cleaned '%s': offsets [%" PRId64 ", %" PRId64 "), %d segment(s), %" PRId64 " -> %" PRId64
                " bytes, %" PRId64 " of %" PRId64 " records kept",
                log->dir, c.first_dirty, end, st->segments_cleaned, st->bytes_before, st->bytes_after,
                st->records_kept, st->records_read);
    return rc;
}

/* ---- recovery of an interrupted swap (called at open, before the segments are listed) ---- */

static int64_t parse_base(const char *name, const char *suffix) {
    size_t n = strlen(name), sl = strlen(suffix);
    if (n != 20 + sl || strcmp(name + 20, suffix) != 0) return -1;
    int64_t v = 0;
    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9') return -1;
        v = v * 10 + (name[i] - '0');
    }
    return v;
}

/* The end offset of the valid batches of a file (headers only); the file is cut at the first
 * invalid header. */
static int64_t swap_end_offset(const char *path, int64_t base) {
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return base;
    struct stat st;
    int64_t size = fstat(fd, &st) == 0 ? st.st_size : 0, pos = 0, next = base;
    while (pos < size) {
        uint8_t hdr[GR_BATCH_HEADER_SIZE];
        struct gr_batch_info bi;
        ssize_t n = pread(fd, hdr, sizeof hdr, pos);
        if (n <= 0 || gr_batch_peek_header(hdr, (size_t)n, (size_t)(size - pos), &bi) != GR_BATCH_OK) break;
        next = gr_batch_info_last_offset(&bi) + 1;
        pos += (int64_t)bi.size;
    }
    if (pos < size && ftruncate(fd, pos) < 0) gr_warn(LOGGER, "cannot cut '%s'", path);
    close(fd);
    return next;
}

/* A .txnindex.swap with no .log.swap of its base: the pass died between the two renames (the
 * old segments are intact) -- dropped. */
static void drop_orphan_txn_swaps(const char *dir, const int64_t *swaps, int ns) {
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        int64_t b = parse_base(de->d_name, GR_TXN_INDEX_SUFFIX ".swap");
        if (b < 0) continue;
        bool ours = false;
        for (int i = 0; i < ns; i++) ours = ours || swaps[i] == b;
        if (ours) continue;
        char *p = gr_asprintf("%s/%s", dir, de->d_name);
        unlink(p);
        free(p);
    }
    if (d) closedir(d);
}

/* Puts the cleaned .txnindex of the swap at base in place (an empty one removes the file); if
 * there is no .txnindex.swap, it is already in place. */
static void finish_txn_swap(const char *dir, int64_t base) {
    char *sp = gr_asprintf("%s/%020" PRId64 GR_TXN_INDEX_SUFFIX ".swap", dir, base);
    char *fp = gr_asprintf("%s/%020" PRId64 GR_TXN_INDEX_SUFFIX, dir, base);
    struct stat st;
    if (stat(sp, &st) == 0) {
        if (st.st_size == 0) {
            unlink(fp);
            unlink(sp);
        } else {
            rename(sp, fp);
        }
    }
    free(sp);
    free(fp);
}

int gr_plog_complete_swaps(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -errno;
    int64_t swaps[64];
    int ns = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len > 8 && strcmp(de->d_name + len - 8, ".cleaned") == 0) {
            char *p = gr_asprintf("%s/%s", dir, de->d_name);
            gr_info(LOGGER, "deleting '%s' left by an interrupted cleaning", p);
            unlink(p);
            free(p);
        }
        int64_t b = parse_base(de->d_name, ".log.swap");
        if (b >= 0 && ns < 64) swaps[ns++] = b;
    }
    closedir(d);
    drop_orphan_txn_swaps(dir, swaps, ns);
    for (int s = 0; s < ns; s++) {
        char *sp = gr_asprintf("%s/%020" PRId64 ".log.swap", dir, swaps[s]);
        int64_t end = swap_end_offset(sp, swaps[s]);
        /* the old segments the swap replaces: every .log with base in [swap base, swap end) */
        d = opendir(dir);
        while (d && (de = readdir(d)) != NULL) {
            int64_t tb = parse_base(de->d_name, GR_TXN_INDEX_SUFFIX);
            if (tb > swaps[s] && tb < end) { /* a merged segment's .txnindex */
                char *p = gr_asprintf("%s/%s", dir, de->d_name);
                unlink(p);
                free(p);
            }
            int64_t b = parse_base(de->d_name, ".log");
            if (b < 0 || b < swaps[s] || (b >= end && b != swaps[s])) continue;
            char *p = gr_asprintf("%s/%020" PRId64, dir, b);
            char *lp = gr_asprintf("%s.log", p), *ip = gr_asprintf("%s.index", p), *tp = gr_asprintf("%s.timeindex", p);
            unlink(lp);
            unlink(ip);
            unlink(tp);
            free(lp), free(ip), free(tp), free(p);
        }
        if (d) closedir(d);
        char *fp = gr_asprintf("%s/%020" PRId64 ".log", dir, swaps[s]);
        char *ip = gr_asprintf("%s/%020" PRId64 ".index", dir, swaps[s]);
        char *tp = gr_asprintf("%s/%020" PRId64 ".timeindex", dir, swaps[s]);
        unlink(ip); /* rebuilt from the swapped-in data */
        unlink(tp);
        finish_txn_swap(dir, swaps[s]);
        if (rename(sp, fp) == 0)
            gr_info(LOGGER, "completed the interrupted swap of '%s' (offsets %" PRId64 "..%" PRId64 ")", fp, swaps[s],
                    end);
        free(sp), free(fp), free(ip), free(tp);
    }
    if (ns) gr_plog_fsync_dir(dir);
    return ns;
}
