/* Old message formats (magic 0/1) <-> RecordBatch v2: see legacy_records.h. */
#include "storage/legacy_records.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/util.h"
#include "storage/batch.h"
#include "storage/compression.h"
#include "storage/log_validator.h"


#define LEGACY_ATTR_COMPRESSION 0x07
#define LEGACY_ATTR_LOG_APPEND_TIME 0x08
#define MAX_INFLATED (64u << 20) /* a decompression bomb stops here */

/* A wrapper message's value (codec 1 gzip, 2 snappy, 3 lz4) -> malloc'd bytes through the
 * streaming codecs (compression.h); NULL if corrupt, out of memory, or more than max bytes (then
 * *too_big is set). Magic 0 lz4 wrappers carry a broken frame header checksum, which Kafka
 * ignores (KAFKA-3160): so do we. */
static uint8_t *inflate_value(int codec, int magic, const uint8_t *in, size_t len, size_t max, size_t *out_len,
                              bool *too_big) {
    *too_big = false;
    struct gr_inflater *z;
    if (gr_inflater_open(&z, codec, in, len, max, magic == 0 ? GR_INFLATE_LZ4_IGNORE_HC : 0) != 0) return NULL;
    size_t cap = GR_MIN(len * 4 + 64, max + 1), n = 0;
    uint8_t *out = malloc(cap);
    ssize_t got = out ? 1 : -ENOMEM;
    while (got > 0) {
        if (n == cap) {
            size_t grown_cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            uint8_t *grown = grown_cap > cap ? realloc(out, grown_cap) : NULL;
            if (!grown) {
                got = grown_cap > cap ? -ENOMEM : -E2BIG;
                break;
            }
            out = grown, cap = grown_cap;
        }
        got = gr_inflater_read(z, out + n, cap - n);
        if (got > 0) n += (size_t)got;
    }
    gr_inflater_close(z);
    if (got < 0) {
        *too_big = got == -E2BIG;
        free(out);
        return NULL;
    }
    *out_len = n;
    return out;
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

/* A compressed wrapper message: its value is a message set of uncompressed messages (Kafka forbids
 * nesting); a LogAppendTime wrapper gives them its timestamp. */
static int16_t add_wrapper(struct up *u, const struct legacy_msg *w) {
    size_t il;
    bool too_big = false;
    uint8_t *inner = w->value_len > 0 ? inflate_value(w->attributes & LEGACY_ATTR_COMPRESSION, w->magic, w->value,
                                                      (size_t)w->value_len, MAX_INFLATED - u->inflated, &il, &too_big)
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
        if (codec == 0) {
            err = add_msg(&u, &m, m.timestamp);
        } else if (codec <= GR_CODEC_LZ4) { /* zstd needs magic 2 (KIP-110) */
            err = u.magic >= 0 && m.magic != u.magic ? GR_KERR_CORRUPT_MESSAGE : add_wrapper(&u, &m);
            if (source_codec) *source_codec = codec;
        } else {
            err = GR_KERR_UNSUPPORTED_COMPRESSION_TYPE;
        }
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

/* Converts the records of one batch, compressed or not, read through the log validator's record
 * stream (log_validator.h): memory is the output and one record, whatever the batch inflates to.
 * A record is read whole only when its message could fit the room left; records before the
 * fetch offset, and the first that cannot fit, stream past without being kept. Returns whether
 * the walk may go on to the next batch. */
static bool convert_batch(struct down *d, const uint8_t *batch, const struct gr_batch_info *bi) {
    if (gr_batch_info_compression(bi) == GR_CODEC_ZSTD) { /* Kafka: UnsupportedCompressionType */
        d->stopped = true;
        return false;
    }
    struct gr_record_stream rs;
    struct gr_batch_rec_view r;
    gr_record_stream_open(&rs, batch, bi, MAX_INFLATED, 0);
    for (;;) {
        size_t limit = d->nmsgs == 0 ? d->first_max : d->max_bytes;
        size_t room = limit > d->len ? limit - d->len : 0;
        /* a record's message is never larger than the record plus 26 bytes of legacy framing */
        if (gr_record_stream_next(&rs, &r, room > SIZE_MAX - 64 ? SIZE_MAX : room + 64) != 1) break;
        if (r.Offset < d->first_offset) continue; /* before the fetch offset (Kafka's RecordsUtil) */
        if (!rs.raw) { /* too long to fit */
            d->full = true;
            break;
        }
        emit(d, bi, &r);
        if (d->full || d->oom) break;
    }
    int err = rs.err;
    gr_record_stream_close(&rs);
    if (err == GR_BATCH_ENOMEM) d->oom = true;
    if (d->full || d->oom) return false;
    if (err != GR_BATCH_OK) { /* does not read: an error for the client if nothing converted */
        d->stopped = true;
        return false;
    }
    return true;
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
        if (!(bi.Attributes & GR_BATCH_ATTR_CONTROL) && !convert_batch(&d, in + pos, &bi)) break;
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
