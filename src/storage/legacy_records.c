/* Old message formats (magic 0/1) <-> RecordBatch v2: see legacy_records.h. */
#include "storage/legacy_records.h"

#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/util.h"
#include "storage/batch.h"

#define LEGACY_ATTR_COMPRESSION 0x07
#define LEGACY_ATTR_LOG_APPEND_TIME 0x08

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

int16_t gr_legacy_to_v2(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    int cap = 16, n = 0;
    struct gr_batch_rec *recs = gr_calloc((size_t)cap, sizeof *recs);
    int16_t err = GR_KERR_NONE;
    int magic = -1;
    for (size_t pos = 0; pos < len && err == GR_KERR_NONE;) {
        struct legacy_msg m;
        if ((err = parse_one(in, len, &pos, &m)) != GR_KERR_NONE) break;
        if (magic >= 0 && m.magic != magic) err = GR_KERR_CORRUPT_MESSAGE; /* mixed magic */
        else if (m.attributes & LEGACY_ATTR_COMPRESSION) err = GR_KERR_UNSUPPORTED_COMPRESSION_TYPE;
        if (err != GR_KERR_NONE) break;
        magic = m.magic;
        if (n == cap) recs = gr_realloc(recs, (size_t)(cap *= 2) * sizeof *recs);
        recs[n++] = (struct gr_batch_rec){.key = m.key, .key_len = m.key_len, .value = m.value,
                                          .value_len = m.value_len, .timestamp = m.timestamp};
    }
    if (err == GR_KERR_NONE && n == 0) err = GR_KERR_CORRUPT_MESSAGE;
    if (err == GR_KERR_NONE) *out = gr_batch_build(recs, n, NULL, out_len);
    free(recs);
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

/* Walks the convertible batches: fn(ctx, batch info, record) per record; returns false where
 * a compressed batch stops the walk. */
static bool walk(const uint8_t *in, size_t len, void (*fn)(void *, const struct gr_batch_info *,
                                                           const struct gr_batch_rec_view *), void *ctx) {
    for (size_t pos = 0; pos < len;) {
        struct gr_batch_info bi;
        if (gr_batch_parse_header(in + pos, len - pos, &bi) != GR_BATCH_OK) break; /* partial tail */
        if (!(bi.Attributes & GR_BATCH_ATTR_CONTROL)) {
            if (gr_batch_info_compression(&bi) != 0) return false;
            struct gr_batch_rec_iter it;
            if (gr_batch_rec_iter_init(&it, in + pos, bi.size) == GR_BATCH_OK) {
                struct gr_batch_rec_view r;
                while (gr_batch_rec_iter_next(&it, &r) == 1) fn(ctx, &bi, &r);
            }
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
