/* Old message formats (magic 0/1) <-> RecordBatch v2: see legacy_records.h. */
#include "storage/legacy_records.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/util.h"
#include "storage/batch.h"

#ifdef GR_HAVE_ZLIB
#include <zlib.h>
#endif

#define LEGACY_ATTR_COMPRESSION 0x07
#define LEGACY_ATTR_LOG_APPEND_TIME 0x08
#define CODEC_GZIP 1
#define MAX_INFLATED (64u << 20) /* a decompression bomb stops here */

/* gzip (or zlib) stream -> malloc'd bytes; NULL if not built with zlib, corrupt, or more than
 * max bytes (then *too_big is set). */
static uint8_t *gunzip(const uint8_t *in, size_t len, size_t max, size_t *out_len, bool *too_big) {
    *too_big = false;
#ifdef GR_HAVE_ZLIB
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK) return NULL;
    size_t cap = GR_MIN(len * 4 + 64, max + 1), n = 0;
    uint8_t *out = gr_malloc(cap);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    int rc = Z_OK;
    while (rc == Z_OK) {
        if (n == cap) {
            if (cap > max) { /* one byte more than max inflated: too big */
                *too_big = true;
                break;
            }
            cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            out = gr_realloc(out, cap);
        }
        z.next_out = out + n;
        z.avail_out = (uInt)(cap - n);
        rc = inflate(&z, Z_NO_FLUSH);
        n = cap - z.avail_out;
        if (rc == Z_BUF_ERROR && z.avail_out > 0) break; /* truncated input */
        if (rc == Z_BUF_ERROR) rc = Z_OK;               /* needs more room */
    }
    inflateEnd(&z);
    if (rc == Z_STREAM_END && n > max) *too_big = true;
    if (rc != Z_STREAM_END || *too_big) {
        free(out);
        return NULL;
    }
    *out_len = n;
    return out;
#else
    (void)in, (void)len, (void)max, (void)out_len;
    return NULL;
#endif
}

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) << 32 | rd32(p + 4); }
static uint8_t *wr32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
    return p + 4;
}
static uint8_t *wr64(uint8_t *p, uint64_t v) { return wr32(wr32(p, (uint32_t)(v >> 32)), (uint32_t)v); }

uint32_t gr_crc32_ieee(const uint8_t *p, size_t len) {
    static uint32_t table[256];
    static _Atomic int ready;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < len; i++) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

int gr_records_magic(const uint8_t *p, size_t len) { return len > 16 ? (int8_t)p[16] : -1; }

/* One parsed legacy message. */
struct legacy_msg {
    int64_t offset;
    int8_t magic, attributes;
    int64_t timestamp;
    int32_t key_len, value_len; /* -1: null */
    const uint8_t *key, *value;
};

/* Parses the entry at in[*pos]; returns NONE and advances, or a Kafka error. */
static int16_t parse_one(const uint8_t *in, size_t len, size_t *pos, struct legacy_msg *m) {
    size_t at = *pos;
    if (len - at < 12) return GR_KERR_CORRUPT_MESSAGE;
    m->offset = (int64_t)rd64(in + at);
    int32_t size = (int32_t)rd32(in + at + 8);
    if (size < 14 || (size_t)size > len - at - 12) return GR_KERR_CORRUPT_MESSAGE;
    const uint8_t *p = in + at + 12, *end = p + size;
    uint32_t crc = rd32(p);
    if (gr_crc32_ieee(p + 4, (size_t)size - 4) != crc) return GR_KERR_CORRUPT_MESSAGE;
    m->magic = (int8_t)p[4];
    m->attributes = (int8_t)p[5];
    p += 6;
    if (m->magic != 0 && m->magic != 1) return GR_KERR_CORRUPT_MESSAGE;
    m->timestamp = -1;
    if (m->magic == 1) {
        if (end - p < 8) return GR_KERR_CORRUPT_MESSAGE;
        m->timestamp = (int64_t)rd64(p);
        p += 8;
    }
    for (int f = 0; f < 2; f++) {
        if (end - p < 4) return GR_KERR_CORRUPT_MESSAGE;
        int32_t l = (int32_t)rd32(p);
        p += 4;
        if (l < -1 || (l > 0 && end - p < l)) return GR_KERR_CORRUPT_MESSAGE;
        if (f == 0) m->key_len = l, m->key = l >= 0 ? p : NULL;
        else m->value_len = l, m->value = l >= 0 ? p : NULL;
        if (l > 0) p += l;
    }
    if (p != end) return GR_KERR_CORRUPT_MESSAGE;
    *pos = at + 12 + (size_t)size;
    return GR_KERR_NONE;
}

struct up {
    struct gr_batch_rec *recs;
    int n, cap, magic;
    uint8_t **bufs; /* inflated wrapper values the records point into */
    int nbufs;
    size_t inflated; /* their total: at most MAX_INFLATED per message set */
};

static int16_t add_msg(struct up *u, const struct legacy_msg *m, int64_t ts) {
    if (u->magic >= 0 && m->magic != u->magic) return GR_KERR_CORRUPT_MESSAGE; /* mixed magic */
    u->magic = m->magic;
    if (u->n == u->cap) u->recs = gr_realloc(u->recs, (size_t)(u->cap = u->cap ? 2 * u->cap : 16) * sizeof *u->recs);
    u->recs[u->n++] = (struct gr_batch_rec){.key = m->key, .key_len = m->key_len, .value = m->value,
                                            .value_len = m->value_len, .timestamp = ts};
    return GR_KERR_NONE;
}

/* A gzip wrapper message: its value is a message set of uncompressed messages (Kafka forbids
 * nesting); a LogAppendTime wrapper gives them its timestamp. */
static int16_t add_wrapper(struct up *u, const struct legacy_msg *w) {
    size_t il;
    bool too_big = false;
    uint8_t *inner = w->value_len > 0 ? gunzip(w->value, (size_t)w->value_len, MAX_INFLATED - u->inflated, &il, &too_big)
                                      : NULL;
    /* one wrapper past the limit is a bomb (corrupt); several together are too large a set */
    if (!inner) return too_big && u->inflated > 0 ? GR_KERR_MESSAGE_TOO_LARGE : GR_KERR_CORRUPT_MESSAGE;
    u->inflated += il;
    u->bufs = gr_realloc(u->bufs, (size_t)(u->nbufs + 1) * sizeof *u->bufs);
    u->bufs[u->nbufs++] = inner;
    bool log_append = w->magic == 1 && (w->attributes & LEGACY_ATTR_LOG_APPEND_TIME);
    int16_t err = GR_KERR_NONE;
    int added = 0;
    for (size_t pos = 0; pos < il && err == GR_KERR_NONE; added++) {
        struct legacy_msg m;
        if ((err = parse_one(inner, il, &pos, &m)) != GR_KERR_NONE) break;
        if (m.magic != w->magic || (m.attributes & LEGACY_ATTR_COMPRESSION)) return GR_KERR_CORRUPT_MESSAGE;
        err = add_msg(u, &m, log_append ? w->timestamp : m.timestamp);
    }
    return err == GR_KERR_NONE && added == 0 ? GR_KERR_CORRUPT_MESSAGE : err;
}

int16_t gr_legacy_to_v2(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len, int *source_codec) {
    *out = NULL;
    *out_len = 0;
    if (source_codec) *source_codec = 0;
    struct up u = {.magic = -1};
    int16_t err = GR_KERR_NONE;
    for (size_t pos = 0; pos < len && err == GR_KERR_NONE;) {
        struct legacy_msg m;
        if ((err = parse_one(in, len, &pos, &m)) != GR_KERR_NONE) break;
        int codec = m.attributes & LEGACY_ATTR_COMPRESSION;
        if (codec == 0)
            err = add_msg(&u, &m, m.timestamp);
#ifdef GR_HAVE_ZLIB
        else if (codec == CODEC_GZIP) {
            err = u.magic >= 0 && m.magic != u.magic ? GR_KERR_CORRUPT_MESSAGE : add_wrapper(&u, &m);
            if (source_codec) *source_codec = CODEC_GZIP;
        }
#endif
        else
            err = GR_KERR_UNSUPPORTED_COMPRESSION_TYPE;
    }
    if (err == GR_KERR_NONE && u.n == 0) err = GR_KERR_CORRUPT_MESSAGE;
    if (err == GR_KERR_NONE) *out = gr_batch_build(u.recs, u.n, NULL, out_len);
    for (int i = 0; i < u.nbufs; i++) free(u.bufs[i]);
    free(u.bufs);
    free(u.recs);
    return err;
}

/* Size of one legacy entry of this magic. */
static size_t entry_size(int magic, int32_t klen, int32_t vlen) {
    return 12 + 4 + 2 + (magic == 1 ? 8 : 0) + 8 + (size_t)(klen > 0 ? klen : 0) + (size_t)(vlen > 0 ? vlen : 0);
}

static uint8_t *put_bytes(uint8_t *p, const uint8_t *b, int32_t l) {
    p = wr32(p, (uint32_t)l);
    if (l > 0) memcpy(p, b, (size_t)l), p += l;
    return p;
}

/* Down-conversion state: the growing output and its limits. */
struct down {
    int magic;
    int64_t first_offset;
    size_t max_bytes, first_max; /* see gr_v2_to_legacy */
    uint8_t *out;
    size_t len, cap;
    int nmsgs;
    bool full;    /* a message did not fit: stop */
    bool oom;     /* an allocation failed: stop, return -ENOMEM */
    bool stopped; /* a batch could not be converted (codec, corrupt) */
};

/* Appends one record as a legacy message if it fits the limits (else sets full). */
static void emit(struct down *d, const struct gr_batch_info *bi, const struct gr_batch_rec_view *r) {
    if (r->Offset < d->first_offset) return; /* before the fetch offset (Kafka's RecordsUtil) */
    size_t need = entry_size(d->magic, r->KeyLength, r->ValueLength);
    size_t limit = d->nmsgs == 0 ? d->first_max : d->max_bytes;
    if (need > limit || d->len + need > limit) {
        d->full = true;
        return;
    }
    if (d->len + need > d->cap) {
        size_t cap = d->cap ? d->cap : 4096;
        while (cap < d->len + need) cap *= 2;
        if (cap > limit) cap = limit;
        uint8_t *grown = realloc(d->out, cap);
        if (!grown) {
            d->oom = true;
            return;
        }
        d->out = grown, d->cap = cap;
    }
    uint8_t *p = d->out + d->len;
    p = wr64(p, (uint64_t)r->Offset);
    p = wr32(p, (uint32_t)(need - 12));
    uint8_t *crc_at = p;
    p += 4;
    *p++ = (uint8_t)d->magic;
    bool log_append = (bi->Attributes & GR_BATCH_ATTR_LOG_APPEND_TIME) != 0;
    *p++ = (uint8_t)(d->magic == 1 && log_append ? LEGACY_ATTR_LOG_APPEND_TIME : 0);
    if (d->magic == 1) p = wr64(p, (uint64_t)(log_append ? bi->MaxTimestamp : r->Timestamp));
    p = put_bytes(p, r->Key, r->KeyLength);
    p = put_bytes(p, r->Value, r->ValueLength);
    wr32(crc_at, gr_crc32_ieee(crc_at + 4, (size_t)(p - crc_at - 4)));
    d->len = (size_t)(p - d->out);
    d->nmsgs++;
}

/* Converts the records of one uncompressed batch view; returns true if every record converted. */
static bool emit_batch(struct down *d, const struct gr_batch_info *bi, const uint8_t *batch, size_t blen) {
    struct gr_batch_rec_iter it;
    if (gr_batch_rec_iter_init(&it, batch, blen) != GR_BATCH_OK) return true; /* nothing readable: skip */
    struct gr_batch_rec_view r;
    while (!d->full && !d->oom && gr_batch_rec_iter_next(&it, &r) == 1) emit(d, bi, &r);
    return !d->full && !d->oom && it.err == GR_BATCH_OK && it.index >= it.info.RecordCount;
}

#ifdef GR_HAVE_ZLIB
/* A window over a gzip records section, inflated as the records are read: [start, end) of buf
 * holds inflated bytes not consumed yet, and start >= GR_BATCH_HEADER_SIZE always, so a batch
 * header fits in front of a record (to read it with gr_batch_rec_iter). Memory: one record. */
struct zwin {
    z_stream z;
    uint8_t *buf;
    size_t cap, start, end;
    bool ended; /* the stream is complete */
    int err;    /* 0, -EINVAL (corrupt, or more than MAX_INFLATED) or -ENOMEM */
};

/* Makes at least `need` bytes available (fewer only at the end of the stream, or on error). */
static void zwin_fill(struct zwin *w, size_t need) {
    while (!w->err && !w->ended && w->end - w->start < need) {
        if (w->cap - w->start < need) { /* move the unconsumed bytes down, grow if still short */
            memmove(w->buf + GR_BATCH_HEADER_SIZE, w->buf + w->start, w->end - w->start);
            w->end -= w->start - GR_BATCH_HEADER_SIZE;
            w->start = GR_BATCH_HEADER_SIZE;
            if (w->cap - w->start < need) {
                size_t cap = GR_BATCH_HEADER_SIZE + (need > 65536 ? need : 65536);
                uint8_t *grown = realloc(w->buf, cap);
                if (!grown) {
                    w->err = -ENOMEM;
                    return;
                }
                w->buf = grown, w->cap = cap;
            }
        }
        w->z.next_out = w->buf + w->end;
        w->z.avail_out = (uInt)(w->cap - w->end);
        int rc = inflate(&w->z, Z_NO_FLUSH);
        w->end = w->cap - w->z.avail_out;
        if (rc == Z_STREAM_END)
            w->ended = true;
        else if ((rc != Z_OK && rc != Z_BUF_ERROR) || (rc == Z_BUF_ERROR && w->z.avail_in == 0))
            w->err = -EINVAL; /* corrupt, or cut short */
        if (w->z.total_out > MAX_INFLATED) w->err = -EINVAL;
    }
}

/* Consumes n bytes (discarding them as they are inflated, without growing the window). */
static bool zwin_skip(struct zwin *w, size_t n) {
    while (n > 0) {
        if (w->end == w->start) zwin_fill(w, n < 65536 ? n : 65536);
        size_t k = w->end - w->start < n ? w->end - w->start : n;
        if (k == 0) return false;
        w->start += k, n -= k;
    }
    return true;
}

/* A zig-zag varint at p[0..avail) (Kafka's record fields); returns its length, 0 if malformed. */
static size_t rd_varint(const uint8_t *p, size_t avail, int64_t *v) {
    uint64_t u = 0;
    for (size_t i = 0; i < avail && i < 10; i++) {
        u |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
            return i + 1;
        }
    }
    return 0;
}

/* One record of the window (its length prefix at start): skips it when before the fetch offset or
 * when its message cannot fit (decided from its first bytes where possible, so neither is
 * inflated into memory), else converts it. Returns false when the batch cannot go on. */
static bool zwin_record(struct zwin *w, struct down *d, const uint8_t *batch, const struct gr_batch_info *bi) {
    zwin_fill(w, 5);
    int64_t len;
    size_t vl = rd_varint(w->buf + w->start, w->end - w->start, &len);
    if (vl == 0 || len < 1 || len > (int64_t)MAX_INFLATED) return false;
    size_t total = vl + (size_t)len;
    zwin_fill(w, total < 64 ? total : 64); /* attributes, timestamp and offset deltas, key length */
    const uint8_t *p = w->buf + w->start + vl, *end = w->buf + w->end;
    int64_t ts_delta, off_delta, klen = -1;
    size_t n1 = p + 1 <= end ? rd_varint(p + 1, (size_t)(end - p - 1), &ts_delta) : 0;
    size_t n2 = n1 ? rd_varint(p + 1 + n1, (size_t)(end - p - 1 - n1), &off_delta) : 0;
    if (n2 == 0) return false;
    size_t n3 = rd_varint(p + 1 + n1 + n2, (size_t)(end - p - 1 - n1 - n2), &klen);
    int64_t offset = (int64_t)((uint64_t)bi->BaseOffset + (uint64_t)off_delta);
    size_t limit = d->nmsgs == 0 ? d->first_max : d->max_bytes;
    bool too_big = n3 && klen > 0 && (d->len >= limit || (uint64_t)klen + 26 > limit - d->len); /* >= 26 + key */
    if (offset < d->first_offset) return zwin_skip(w, total);
    if (too_big) {
        d->full = true;
        return false;
    }
    zwin_fill(w, total);
    if (w->end - w->start < total) return false;
    /* a one-record uncompressed batch in front of the record: the header, count 1, length fixed */
    uint8_t *hb = w->buf + w->start - GR_BATCH_HEADER_SIZE;
    memcpy(hb, batch, GR_BATCH_HEADER_SIZE);
    wr32(hb + 8, (uint32_t)(GR_BATCH_HEADER_SIZE - 12 + total));
    hb[22] = (uint8_t)(hb[22] & ~GR_BATCH_ATTR_COMPRESSION_MASK);
    wr32(hb + 57, 1);
    struct gr_batch_rec_iter it;
    struct gr_batch_rec_view r;
    if (gr_batch_rec_iter_init(&it, hb, GR_BATCH_HEADER_SIZE + total) != GR_BATCH_OK ||
        gr_batch_rec_iter_next(&it, &r) != 1)
        return false;
    emit(d, bi, &r);
    w->start += total;
    return !d->full && !d->oom;
}
#endif

/* A gzip batch, inflated record by record (memory: one record and the output), as far as the
 * limits let messages in. Returns whether the walk may go on to the next batch. */
static bool emit_gzip_batch(struct down *d, const uint8_t *batch, const struct gr_batch_info *bi) {
#ifdef GR_HAVE_ZLIB
    if (gr_batch_info_compression(bi) != CODEC_GZIP || bi->size < GR_BATCH_HEADER_SIZE) {
        d->stopped = true;
        return false;
    }
    struct zwin w;
    memset(&w, 0, sizeof w);
    if (inflateInit2(&w.z, 15 + 32) != Z_OK) {
        d->oom = true;
        return false;
    }
    w.z.next_in = (Bytef *)(batch + GR_BATCH_HEADER_SIZE);
    w.z.avail_in = (uInt)(bi->size - GR_BATCH_HEADER_SIZE);
    w.start = w.end = w.cap = GR_BATCH_HEADER_SIZE;
    w.buf = malloc(w.cap);
    if (!w.buf) w.err = -ENOMEM;
    int32_t i = 0;
    for (; i < bi->RecordCount && !w.err; i++)
        if (!zwin_record(&w, d, batch, bi)) break;
    inflateEnd(&w.z);
    free(w.buf);
    if (w.err == -ENOMEM) d->oom = true;
    if (d->full || d->oom) return false;
    if (w.err) { /* corrupt or too large: an error for the client if nothing converted */
        d->stopped = true;
        return false;
    }
    return true; /* every record, or malformed records skipped as in an uncompressed batch */
#else
    (void)batch, (void)bi;
    d->stopped = true;
    return false;
#endif
}

int gr_v2_to_legacy(const uint8_t *in, size_t len, int magic, int64_t first_offset, size_t max_bytes, size_t first_max,
                    uint8_t **out, size_t *out_len, bool *stopped_at_compressed) {
    struct down d = {.magic = magic,
                     .first_offset = first_offset,
                     .max_bytes = max_bytes,
                     .first_max = first_max > max_bytes ? first_max : max_bytes};
    for (size_t pos = 0; pos < len && !d.full && !d.oom;) {
        struct gr_batch_info bi;
        if (gr_batch_parse_header(in + pos, len - pos, &bi) != GR_BATCH_OK) break; /* partial tail */
        if (!(bi.Attributes & GR_BATCH_ATTR_CONTROL)) {
            if (gr_batch_info_compression(&bi) == 0)
                emit_batch(&d, &bi, in + pos, bi.size);
            else if (!emit_gzip_batch(&d, in + pos, &bi))
                break;
        }
        pos += bi.size;
    }
    *stopped_at_compressed = d.stopped;
    if (d.oom || d.len == 0) {
        free(d.out);
        d.out = NULL;
        d.len = 0;
    }
    *out = d.out;
    *out_len = d.len;
    return d.oom ? -ENOMEM : 0;
}
