/* Old message formats (magic 0/1) <-> RecordBatch v2: see legacy_records.h. */
#include "storage/legacy_records.h"

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

/* gzip (or zlib) stream -> malloc'd bytes; NULL if not built with zlib, corrupt, or too big. */
static uint8_t *gunzip(const uint8_t *in, size_t len, size_t *out_len) {
#ifdef GR_HAVE_ZLIB
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK) return NULL;
    size_t cap = len * 4 + 64, n = 0;
    uint8_t *out = gr_malloc(cap);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    int rc = Z_OK;
    while (rc == Z_OK) {
        if (n == cap) {
            if (cap >= MAX_INFLATED) break;
            cap = cap * 2 > MAX_INFLATED ? MAX_INFLATED : cap * 2;
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
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    *out_len = n;
    return out;
#else
    (void)in, (void)len, (void)out_len;
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
    uint8_t *inner = w->value_len > 0 ? gunzip(w->value, (size_t)w->value_len, &il) : NULL;
    if (!inner) return GR_KERR_CORRUPT_MESSAGE;
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

int16_t gr_legacy_to_v2(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    struct up u = {.magic = -1};
    int16_t err = GR_KERR_NONE;
    for (size_t pos = 0; pos < len && err == GR_KERR_NONE;) {
        struct legacy_msg m;
        if ((err = parse_one(in, len, &pos, &m)) != GR_KERR_NONE) break;
        int codec = m.attributes & LEGACY_ATTR_COMPRESSION;
        if (codec == 0)
            err = add_msg(&u, &m, m.timestamp);
#ifdef GR_HAVE_ZLIB
        else if (codec == CODEC_GZIP)
            err = u.magic >= 0 && m.magic != u.magic ? GR_KERR_CORRUPT_MESSAGE : add_wrapper(&u, &m);
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

static uint32_t be_len(const uint8_t *batch) { return rd32(batch + 8); }

/* A gzip v2 batch as an uncompressed one (header copied, BatchLength and compression bits
 * fixed; the CRC is not recomputed: the record iterator does not check it). NULL for other
 * codecs, without zlib, or when the records do not inflate. */
static uint8_t *inflate_batch(const uint8_t *batch, const struct gr_batch_info *bi) {
    if (gr_batch_info_compression(bi) != CODEC_GZIP || bi->size < GR_BATCH_HEADER_SIZE) return NULL;
    size_t rl;
    uint8_t *recs = gunzip(batch + GR_BATCH_HEADER_SIZE, bi->size - GR_BATCH_HEADER_SIZE, &rl);
    if (!recs) return NULL;
    uint8_t *plain = gr_malloc(GR_BATCH_HEADER_SIZE + rl);
    memcpy(plain, batch, GR_BATCH_HEADER_SIZE);
    memcpy(plain + GR_BATCH_HEADER_SIZE, recs, rl);
    free(recs);
    wr32(plain + 8, (uint32_t)(GR_BATCH_HEADER_SIZE - 12 + rl));
    plain[22] = (uint8_t)(plain[22] & ~GR_BATCH_ATTR_COMPRESSION_MASK); /* attributes low byte */
    return plain;
}

/* Walks the convertible batches: fn(ctx, batch info, record) per record; returns false where
 * a compressed batch stops the walk. */
static bool walk(const uint8_t *in, size_t len, void (*fn)(void *, const struct gr_batch_info *,
                                                           const struct gr_batch_rec_view *), void *ctx) {
    for (size_t pos = 0; pos < len;) {
        struct gr_batch_info bi;
        if (gr_batch_parse_header(in + pos, len - pos, &bi) != GR_BATCH_OK) break; /* partial tail */
        if (!(bi.Attributes & GR_BATCH_ATTR_CONTROL)) {
            const uint8_t *batch = in + pos;
            uint8_t *plain = NULL;
            if (gr_batch_info_compression(&bi) != 0) {
                plain = inflate_batch(batch, &bi);
                if (!plain) return false;
                batch = plain;
            }
            struct gr_batch_rec_iter it;
            size_t blen = plain ? (size_t)be_len(plain) + 12 : bi.size;
            if (gr_batch_rec_iter_init(&it, batch, blen) == GR_BATCH_OK) {
                struct gr_batch_rec_view r;
                while (gr_batch_rec_iter_next(&it, &r) == 1) fn(ctx, &bi, &r);
            }
            free(plain);
        }
        pos += bi.size;
    }
    return true;
}

struct down {
    int magic;
    size_t size;
    uint8_t *out, *p;
};

static void count(void *ctx, const struct gr_batch_info *bi, const struct gr_batch_rec_view *r) {
    (void)bi;
    struct down *d = ctx;
    d->size += entry_size(d->magic, r->KeyLength, r->ValueLength);
}

static void emit(void *ctx, const struct gr_batch_info *bi, const struct gr_batch_rec_view *r) {
    struct down *d = ctx;
    uint8_t *p = d->p;
    size_t size = entry_size(d->magic, r->KeyLength, r->ValueLength) - 12;
    p = wr64(p, (uint64_t)r->Offset);
    p = wr32(p, (uint32_t)size);
    uint8_t *crc_at = p;
    p += 4;
    *p++ = (uint8_t)d->magic;
    bool log_append = (bi->Attributes & GR_BATCH_ATTR_LOG_APPEND_TIME) != 0;
    *p++ = (uint8_t)(d->magic == 1 && log_append ? LEGACY_ATTR_LOG_APPEND_TIME : 0);
    if (d->magic == 1) p = wr64(p, (uint64_t)(log_append ? bi->MaxTimestamp : r->Timestamp));
    p = put_bytes(p, r->Key, r->KeyLength);
    p = put_bytes(p, r->Value, r->ValueLength);
    wr32(crc_at, gr_crc32_ieee(crc_at + 4, (size_t)(p - crc_at - 4)));
    d->p = p;
}

uint8_t *gr_v2_to_legacy(const uint8_t *in, size_t len, int magic, size_t *out_len, bool *stopped_at_compressed) {
    struct down d = {.magic = magic};
    *stopped_at_compressed = !walk(in, len, count, &d);
    *out_len = 0;
    if (d.size == 0) return NULL;
    d.out = d.p = gr_malloc(d.size);
    walk(in, len, emit, &d);
    *out_len = (size_t)(d.p - d.out);
    return d.out;
}
