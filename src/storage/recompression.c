/* Leader-side recompression to the topic's compression.type: see recompression.h. */
#include "storage/recompression.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/be.h"
#include "common/kerr.h"
#include "common/util.h"
#include "storage/batch.h"
#include "storage/compression.h"

int gr_compression_type_parse(const char *v) {
    static const char *const names[] = {"uncompressed", "gzip", "snappy", "lz4", "zstd"};
    if (!v) return -EINVAL;
    if (strcmp(v, "producer") == 0) return GR_COMPRESSION_PRODUCER;
    for (int i = 0; i < (int)GR_ARRAY_LEN(names); i++)
        if (strcmp(v, names[i]) == 0) return i; /* index == codec id */
    return -EINVAL;
}

/* Growable output. */
struct out {
    uint8_t *p;
    size_t len, cap;
};

static uint8_t *out_reserve(struct out *o, size_t n) {
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->len + n) cap *= 2;
        o->p = gr_realloc(o->p, cap);
        o->cap = cap;
    }
    return o->p + o->len;
}

int gr_batch_inflate(const uint8_t *b, const struct gr_batch_info *bi, size_t max_inflated, uint8_t **out,
                     size_t *out_len) {
    uint8_t *recs = NULL;
    size_t rlen = 0;
    int rc = gr_decompress(gr_batch_info_compression(bi), b + GR_BATCH_HEADER_SIZE, bi->size - GR_BATCH_HEADER_SIZE,
                           max_inflated, &recs, &rlen);
    if (rc) return rc;
    uint8_t *v = gr_malloc(GR_BATCH_HEADER_SIZE + rlen);
    memcpy(v, b, GR_BATCH_HEADER_SIZE);
    memcpy(v + GR_BATCH_HEADER_SIZE, recs, rlen);
    free(recs);
    gr_put_be32(v + GR_BATCH_OFF_LENGTH, (uint32_t)(GR_BATCH_HEADER_SIZE + rlen - GR_BATCH_LOG_OVERHEAD));
    gr_put_be16(v + GR_BATCH_OFF_ATTRIBUTES, (uint16_t)((uint16_t)bi->Attributes & ~GR_BATCH_ATTR_COMPRESSION_MASK));
    *out = v;
    *out_len = GR_BATCH_HEADER_SIZE + rlen;
    return 0;
}

/* Appends the uncompressed batch plain (valid, CRC included) in codec target: as is for
 * uncompressed, else its header with the codec bits, BatchLength and CRC rewritten followed by
 * the compressed records. NONE or a Kafka error. */
static int16_t append_in_codec(struct out *o, const uint8_t *plain, size_t plain_len, int target) {
    if (target == GR_CODEC_NONE) {
        memcpy(out_reserve(o, plain_len), plain, plain_len);
        o->len += plain_len;
        return GR_KERR_NONE;
    }
    uint8_t *z = NULL;
    size_t zlen = 0;
    if (gr_compress(target, plain + GR_BATCH_HEADER_SIZE, plain_len - GR_BATCH_HEADER_SIZE, &z, &zlen) != 0)
        return GR_KERR_CORRUPT_MESSAGE;
    if (zlen > (size_t)INT32_MAX - GR_BATCH_HEADER_SIZE) {
        free(z);
        return GR_KERR_MESSAGE_TOO_LARGE;
    }
    size_t zb_len = GR_BATCH_HEADER_SIZE + zlen;
    uint8_t *zb = out_reserve(o, zb_len);
    memcpy(zb, plain, GR_BATCH_HEADER_SIZE);
    memcpy(zb + GR_BATCH_HEADER_SIZE, z, zlen);
    free(z);
    gr_put_be32(zb + GR_BATCH_OFF_LENGTH, (uint32_t)(zb_len - GR_BATCH_LOG_OVERHEAD));
    gr_put_be16(zb + GR_BATCH_OFF_ATTRIBUTES, (uint16_t)(gr_be16(plain + GR_BATCH_OFF_ATTRIBUTES) | (uint16_t)target));
    gr_batch_update_crc(zb, zb_len);
    o->len += zb_len;
    return GR_KERR_NONE;
}

/* Zig-zag varint at *p (at most maxbytes bytes, before end): its value, *p advanced. False if
 * malformed. */
static bool rd_zz(const uint8_t **p, const uint8_t *end, int maxbytes, int64_t *v) {
    uint64_t u = 0;
    for (int i = 0; i < maxbytes && *p + i < end; i++) {
        u |= (uint64_t)((*p)[i] & 0x7f) << (7 * i);
        if (!((*p)[i] & 0x80)) {
            *v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
            *p += i + 1;
            return true;
        }
    }
    return false;
}

/* Appends the records section recs[0..len) (count records) with offsetDelta i for the i-th
 * record; every other byte of each record is copied. False if a record is malformed or bytes
 * remain after the last one. */
static bool append_renumbered(struct out *o, const uint8_t *recs, size_t len, int32_t count) {
    const uint8_t *p = recs, *end = recs + len;
    for (int32_t i = 0; i < count; i++) {
        int64_t rlen, ts, od;
        if (!rd_zz(&p, end, 5, &rlen) || rlen < 1 || rlen > end - p) return false;
        const uint8_t *body = p, *bend = p + rlen, *q = p + 1; /* attributes i8 */
        if (!rd_zz(&q, bend, 10, &ts)) return false;
        const uint8_t *od_at = q;
        if (!rd_zz(&q, bend, 5, &od)) return false;
        uint8_t delta[5];
        size_t dn = gr_batch_put_varlong(delta, i);
        size_t nlen = (size_t)(od_at - body) + dn + (size_t)(bend - q);
        if (nlen > INT32_MAX) return false;
        uint8_t *w = out_reserve(o, 5 + nlen);
        size_t n = gr_batch_put_varlong(w, (int32_t)nlen);
        memcpy(w + n, body, (size_t)(od_at - body));
        n += (size_t)(od_at - body);
        memcpy(w + n, delta, dn);
        n += dn;
        memcpy(w + n, q, (size_t)(bend - q));
        o->len += n + (size_t)(bend - q);
        p = bend;
    }
    return p == end;
}

int16_t gr_batch_rebuild(const uint8_t *b, const struct gr_batch_info *bi, int target, uint8_t **out,
                         size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    const uint8_t *recs = b + GR_BATCH_HEADER_SIZE;
    size_t rlen = bi->size - GR_BATCH_HEADER_SIZE;
    uint8_t *inflated = NULL;
    if (gr_batch_info_compression(bi) != GR_CODEC_NONE) {
        if (gr_decompress(gr_batch_info_compression(bi), recs, rlen, GR_RECOMPRESSION_MAX_INFLATED, &inflated,
                          &rlen) != 0)
            return GR_KERR_CORRUPT_MESSAGE;
        recs = inflated;
    }
    /* The plain batch: the header (codec bits cleared), then the renumbered records. */
    struct out plain = {0};
    memcpy(out_reserve(&plain, GR_BATCH_HEADER_SIZE), b, GR_BATCH_HEADER_SIZE);
    plain.len = GR_BATCH_HEADER_SIZE;
    bool ok = append_renumbered(&plain, recs, rlen, bi->RecordCount);
    free(inflated);
    int16_t e = GR_KERR_INVALID_RECORD;
    if (ok && plain.len - GR_BATCH_LOG_OVERHEAD <= INT32_MAX) {
        gr_put_be32(plain.p + GR_BATCH_OFF_LENGTH, (uint32_t)(plain.len - GR_BATCH_LOG_OVERHEAD));
        gr_put_be16(plain.p + GR_BATCH_OFF_ATTRIBUTES,
                    (uint16_t)((uint16_t)bi->Attributes & ~GR_BATCH_ATTR_COMPRESSION_MASK));
        gr_batch_update_crc(plain.p, plain.len);
        struct gr_batch_info pi;
        int err = gr_batch_validate_one(plain.p, plain.len, GR_BATCH_V_CLIENT, &pi);
        struct out o = {0};
        e = err != GR_BATCH_OK        ? gr_batch_err_kerr(err)
            : pi.size != plain.len ? GR_KERR_CORRUPT_MESSAGE
                                   : append_in_codec(&o, plain.p, plain.len, target);
        if (e == GR_KERR_NONE) {
            *out = o.p;
            *out_len = o.len;
        } else {
            free(o.p);
        }
    }
    free(plain.p);
    return e;
}

int16_t gr_recompress_batches(const uint8_t *in, size_t len, int target, uint8_t **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    if (target < GR_CODEC_NONE || target > GR_CODEC_ZSTD) return GR_KERR_NONE; /* producer */
    /* Nothing to do when every batch already uses the target codec. */
    struct gr_batch_iter it;
    struct gr_batch_info bi;
    const uint8_t *b;
    bool differs = false;
    gr_batch_iter_init(&it, in, len);
    while (gr_batch_iter_next(&it, &bi, &b) == 1)
        if (gr_batch_info_compression(&bi) != target) differs = true;
    if (it.err != GR_BATCH_OK) return GR_KERR_CORRUPT_MESSAGE;
    if (!differs) return GR_KERR_NONE;
    struct out o = {0};
    gr_batch_iter_init(&it, in, len);
    while (gr_batch_iter_next(&it, &bi, &b) == 1) {
        int16_t e;
        if (gr_batch_info_compression(&bi) == target) {
            memcpy(out_reserve(&o, bi.size), b, bi.size);
            o.len += bi.size;
            e = GR_KERR_NONE;
        } else {
            uint8_t *one = NULL;
            size_t one_len = 0;
            e = gr_batch_rebuild(b, &bi, target, &one, &one_len);
            if (e == GR_KERR_NONE) {
                memcpy(out_reserve(&o, one_len), one, one_len);
                o.len += one_len;
            }
            free(one);
        }
        if (e != GR_KERR_NONE) {
            free(o.p);
            return e;
        }
    }
    *out = o.p;
    *out_len = o.len;
    return GR_KERR_NONE;
}
