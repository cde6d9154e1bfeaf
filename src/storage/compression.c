/* Batch codecs (see compression.h). */
#include "storage/compression.h"

#include <errno.h>
#include <stdbool.h>
#include <lz4frame.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "common/util.h"
#include "common/be.h"

/* Growable output buffer bounded by max. */
struct obuf {
    uint8_t *p;
    size_t len, cap, max;
};

static int obuf_reserve(struct obuf *o, size_t extra) {
    if (o->len + extra <= o->cap) return 0;
    if (o->len + extra > o->max) return -E2BIG;
    size_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + extra) cap *= 2;
    if (cap > o->max) cap = o->max;
    o->p = gr_realloc(o->p, cap);
    o->cap = cap;
    return 0;
}

static int gzip_decompress(const uint8_t *in, size_t len, struct obuf *o) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK) return -EINVAL;
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    int rc = 0, zr = Z_OK;
    while (zr != Z_STREAM_END) {
        if ((rc = obuf_reserve(o, len * 2 + 1024)) != 0) break;
        z.next_out = o->p + o->len;
        z.avail_out = (uInt)(o->cap - o->len);
        zr = inflate(&z, Z_NO_FLUSH);
        o->len = o->cap - z.avail_out;
        if (zr == Z_STREAM_END) break;
        if (zr != Z_OK && zr != Z_BUF_ERROR) { rc = -EINVAL; break; }
        if (zr == Z_BUF_ERROR && z.avail_in == 0) { rc = -EINVAL; break; }
    }
    inflateEnd(&z);
    return rc;
}

static int gzip_compress(const uint8_t *in, size_t len, struct obuf *o) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return -EINVAL;
    size_t bound = deflateBound(&z, (uLong)len) + 32;
    obuf_reserve(o, bound);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    z.next_out = o->p;
    z.avail_out = (uInt)o->cap;
    int zr = deflate(&z, Z_FINISH);
    o->len = o->cap - z.avail_out;
    deflateEnd(&z);
    return zr == Z_STREAM_END ? 0 : -EINVAL;
}

/* xerial snappy-java framing: magic, version 1, compatible version 1, then blocks of
 * (i32 BE compressed length, raw snappy block). */
static const uint8_t XERIAL_MAGIC[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};

static int snappy_block(const uint8_t *in, size_t len, struct obuf *o) {
    size_t n;
    if (snappy_uncompressed_length((const char *)in, len, &n) != SNAPPY_OK) return -EINVAL;
    int rc = obuf_reserve(o, n ? n : 1); /* never a NULL o->p below, even for an empty block */
    if (rc) return rc;
    size_t got = n;
    if (snappy_uncompress((const char *)in, len, (char *)o->p + o->len, &got) != SNAPPY_OK) return -EINVAL;
    o->len += got;
    return 0;
}

static int snappy_decompress(const uint8_t *in, size_t len, struct obuf *o) {
    if (len < 16 || memcmp(in, XERIAL_MAGIC, 8) != 0) return snappy_block(in, len, o);
    size_t pos = 16;
    while (pos < len) {
        if (len - pos < 4) return -EINVAL;
        uint32_t n = gr_be32(in + pos);
        pos += 4;
        if (n > len - pos) return -EINVAL;
        int rc = snappy_block(in + pos, n, o);
        if (rc) return rc;
        pos += n;
    }
    return 0;
}

static int snappy_compress_x(const uint8_t *in, size_t len, struct obuf *o) {
    const size_t block = 32 * 1024; /* snappy-java's default block size */
    obuf_reserve(o, 16);
    memcpy(o->p, XERIAL_MAGIC, 8);
    gr_put_be32(o->p + 8, 1);
    gr_put_be32(o->p + 12, 1);
    o->len = 16;
    for (size_t pos = 0; pos < len; pos += block) {
        size_t n = len - pos < block ? len - pos : block;
        size_t max = snappy_max_compressed_length(n);
        obuf_reserve(o, 4 + max);
        size_t out = max;
        if (snappy_compress((const char *)in + pos, n, (char *)o->p + o->len + 4, &out) != SNAPPY_OK) return -EINVAL;
        gr_put_be32(o->p + o->len, (uint32_t)out);
        o->len += 4 + out;
    }
    return 0;
}

static int lz4_decompress(const uint8_t *in, size_t len, struct obuf *o) {
    LZ4F_dctx *d;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION))) return -EINVAL;
    size_t pos = 0;
    int rc = 0;
    size_t hint = 1;
    while (pos < len && hint != 0) {
        if ((rc = obuf_reserve(o, len * 2 + 65536)) != 0) break;
        size_t dst = o->cap - o->len, src = len - pos;
        hint = LZ4F_decompress(d, o->p + o->len, &dst, in + pos, &src, NULL);
        if (LZ4F_isError(hint)) { rc = -EINVAL; break; }
        o->len += dst;
        pos += src;
        if (src == 0 && dst == 0) { rc = -EINVAL; break; }
    }
    if (rc == 0 && hint != 0) rc = -EINVAL; /* truncated frame */
    LZ4F_freeDecompressionContext(d);
    return rc;
}

static int lz4_compress(const uint8_t *in, size_t len, struct obuf *o) {
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    prefs.frameInfo.blockSizeID = LZ4F_max64KB; /* as Kafka's KafkaLZ4BlockOutputStream */
    size_t bound = LZ4F_compressFrameBound(len, &prefs);
    obuf_reserve(o, bound);
    size_t n = LZ4F_compressFrame(o->p, o->cap, in, len, &prefs);
    if (LZ4F_isError(n)) return -EINVAL;
    o->len = n;
    return 0;
}

static int zstd_decompress(const uint8_t *in, size_t len, struct obuf *o) {
    ZSTD_DStream *d = ZSTD_createDStream();
    if (!d) return -ENOMEM;
    ZSTD_initDStream(d);
    ZSTD_inBuffer ib = {in, len, 0};
    int rc = 0;
    size_t r = 1;
    while (r != 0) {
        if ((rc = obuf_reserve(o, len * 3 + 65536)) != 0) break;
        ZSTD_outBuffer ob = {o->p + o->len, o->cap - o->len, 0};
        r = ZSTD_decompressStream(d, &ob, &ib);
        if (ZSTD_isError(r)) { rc = -EINVAL; break; }
        o->len += ob.pos;
        if (r != 0 && ib.pos == ib.size && ob.pos < ob.size) { rc = -EINVAL; break; }
    }
    ZSTD_freeDStream(d);
    return rc;
}

static int zstd_compress(const uint8_t *in, size_t len, struct obuf *o) {
    obuf_reserve(o, ZSTD_compressBound(len));
    size_t n = ZSTD_compress(o->p, o->cap, in, len, 3);
    if (ZSTD_isError(n)) return -EINVAL;
    o->len = n;
    return 0;
}

int gr_decompress(int codec, const uint8_t *in, size_t len, size_t max_out, uint8_t **out, size_t *out_len) {
    struct obuf o = {NULL, 0, 0, max_out};
    int rc;
    switch (codec) {
    case GR_CODEC_GZIP: rc = gzip_decompress(in, len, &o); break;
    case GR_CODEC_SNAPPY: rc = snappy_decompress(in, len, &o); break;
    case GR_CODEC_LZ4: rc = lz4_decompress(in, len, &o); break;
    case GR_CODEC_ZSTD: rc = zstd_decompress(in, len, &o); break;
    default: rc = -EINVAL;
    }
    if (rc) {
        free(o.p);
        return rc;
    }
    *out = o.p ? o.p : gr_malloc(1);
    *out_len = o.len;
    return 0;
}

int gr_compress(int codec, const uint8_t *in, size_t len, uint8_t **out, size_t *out_len) {
    struct obuf o = {NULL, 0, 0, SIZE_MAX};
    int rc;
    switch (codec) {
    case GR_CODEC_GZIP: rc = gzip_compress(in, len, &o); break;
    case GR_CODEC_SNAPPY: rc = snappy_compress_x(in, len, &o); break;
    case GR_CODEC_LZ4: rc = lz4_compress(in, len, &o); break;
    case GR_CODEC_ZSTD: rc = zstd_compress(in, len, &o); break;
    default: rc = -EINVAL;
    }
    if (rc) {
        free(o.p);
        return rc;
    }
    *out = o.p;
    *out_len = o.len;
    return 0;
}

/* ---- streaming decompression (see compression.h) ---- */

/* XXH32 (xxHash, 32-bit), for the LZ4 frame descriptor checksum that Kafka's magic 0 writers
 * got wrong (KAFKA-3160); liblz4 does not export its copy. */
static uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }
static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint32_t xxh32(const uint8_t *p, size_t len, uint32_t seed) {
    static const uint32_t P1 = 2654435761u, P2 = 2246822519u, P3 = 3266489917u, P4 = 668265263u, P5 = 374761393u;
    const uint8_t *end = p + len;
    uint32_t h;
    if (len >= 16) {
        uint32_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
        for (; end - p >= 16; p += 16) {
            v1 = rotl32(v1 + le32(p) * P2, 13) * P1;
            v2 = rotl32(v2 + le32(p + 4) * P2, 13) * P1;
            v3 = rotl32(v3 + le32(p + 8) * P2, 13) * P1;
            v4 = rotl32(v4 + le32(p + 12) * P2, 13) * P1;
        }
        h = rotl32(v1, 1) + rotl32(v2, 7) + rotl32(v3, 12) + rotl32(v4, 18);
    } else {
        h = seed + P5;
    }
    h += (uint32_t)len;
    for (; end - p >= 4; p += 4) h = rotl32(h + le32(p) * P3, 17) * P4;
    for (; p < end; p++) h = rotl32(h + *p * P5, 11) * P1;
    h ^= h >> 15;
    h *= P2;
    h ^= h >> 13;
    h *= P3;
    h ^= h >> 16;
    return h;
}

uint8_t gr_lz4_header_checksum(const uint8_t *descriptor, size_t len) { return (uint8_t)(xxh32(descriptor, len, 0) >> 8); }

struct gr_inflater {
    int codec;
    const uint8_t *in;
    size_t len, pos;  /* input and how much of it the codec took */
    size_t max_out, produced;
    bool done;        /* the codec's stream ended */
    z_stream z;
    LZ4F_dctx *lz4;
    uint8_t lz4_hdr[19]; /* the frame header with its checksum repaired (GR_INFLATE_LZ4_IGNORE_HC) */
    size_t lz4_hdr_len, lz4_hdr_pos;
    ZSTD_DStream *zstd;
    uint8_t *blk;     /* snappy: the current decompressed block */
    size_t blk_len, blk_pos;
    bool xerial;
};

/* A snappy block's uncompressed size may not exceed this multiple of its compressed size (real
 * snappy expands at most ~22x: a 3-byte copy tag yields 64 bytes), so a declared length cannot
 * make us allocate more than the batch justifies. */
#define SNAPPY_MAX_RATIO 32

/* Repairs the HC byte of an LZ4 frame header (magic 0's broken checksum, which Kafka ignores).
 * Returns 0, or -EINVAL when the header is not there. */
static int lz4_fix_header(struct gr_inflater *z) {
    const uint8_t *in = z->in;
    if (z->len < 7 || le32(in) != 0x184D2204u) return -EINVAL;
    size_t desc = 2 + ((in[4] & 0x08) ? 8 : 0) + ((in[4] & 0x01) ? 4 : 0); /* FLG BD [size] [dictID] */
    if (z->len < 4 + desc + 1) return -EINVAL;
    memcpy(z->lz4_hdr, in, 4 + desc + 1);
    z->lz4_hdr[4 + desc] = gr_lz4_header_checksum(in + 4, desc);
    z->lz4_hdr_len = 4 + desc + 1;
    z->pos = z->lz4_hdr_len; /* the input continues after the header */
    return 0;
}

int gr_inflater_open(struct gr_inflater **out, int codec, const uint8_t *in, size_t len, size_t max_out,
                     unsigned flags) {
    *out = NULL;
    struct gr_inflater *z = calloc(1, sizeof *z);
    if (!z) return -ENOMEM;
    z->codec = codec, z->in = in, z->len = len, z->max_out = max_out;
    int rc = 0;
    switch (codec) {
    case GR_CODEC_GZIP:
        if (inflateInit2(&z->z, 15 + 32) != Z_OK) rc = -ENOMEM;
        z->z.next_in = (Bytef *)in;
        z->z.avail_in = (uInt)(len > UINT32_MAX ? UINT32_MAX : len);
        break;
    case GR_CODEC_SNAPPY:
        z->xerial = len >= 16 && memcmp(in, XERIAL_MAGIC, 8) == 0;
        z->pos = z->xerial ? 16 : 0;
        break;
    case GR_CODEC_LZ4:
        if (LZ4F_isError(LZ4F_createDecompressionContext(&z->lz4, LZ4F_VERSION))) rc = -ENOMEM;
        else if (flags & GR_INFLATE_LZ4_IGNORE_HC) rc = lz4_fix_header(z);
        break;
    case GR_CODEC_ZSTD:
        z->zstd = ZSTD_createDStream();
        if (!z->zstd) rc = -ENOMEM;
        /* the window a frame may ask for: libzstd's default, 128 MiB (windowLog 27), as Kafka's
         * zstd-jni and this broker's own one-shot reader before; streaming compressors at levels
         * 20-22 or in long mode declare 32-128 MiB, and refusing those would refuse valid batches
         * (and stop the cleaner on ones already stored). The window is allocated untouched and
         * filled only as far as the output goes, which max_out bounds. */
        else if (ZSTD_isError(ZSTD_DCtx_setParameter(z->zstd, ZSTD_d_windowLogMax, 27))) rc = -ENOMEM;
        break;
    default: rc = -EINVAL;
    }
    if (rc) {
        gr_inflater_close(z); /* inflateEnd of a stream whose init failed is a no-op */
        return rc;
    }
    *out = z;
    return 0;
}

void gr_inflater_close(struct gr_inflater *z) {
    if (!z) return;
    if (z->codec == GR_CODEC_GZIP) inflateEnd(&z->z);
    if (z->lz4) LZ4F_freeDecompressionContext(z->lz4);
    if (z->zstd) ZSTD_freeDStream(z->zstd);
    free(z->blk);
    free(z);
}

/* The next snappy block into z->blk. 0, 1 at the end of the input, or an error. */
static int snappy_next_block(struct gr_inflater *z) {
    if (z->pos >= z->len) return 1;
    const uint8_t *b = z->in + z->pos;
    size_t n = z->len - z->pos;
    if (z->xerial) {
        if (n < 4) return -EINVAL;
        uint32_t bl = gr_be32(b);
        if (bl > n - 4) return -EINVAL;
        b += 4, n = bl;
    }
    size_t un;
    if (snappy_uncompressed_length((const char *)b, n, &un) != SNAPPY_OK) return -EINVAL;
    if (un > n * SNAPPY_MAX_RATIO + 64) return -EINVAL;
    if (un > z->max_out - z->produced) return -E2BIG;
    free(z->blk);
    z->blk = malloc(un ? un : 1);
    if (!z->blk) return -ENOMEM;
    size_t got = un;
    if (snappy_uncompress((const char *)b, n, (char *)z->blk, &got) != SNAPPY_OK) return -EINVAL;
    z->blk_len = got, z->blk_pos = 0;
    z->pos = (size_t)(b - z->in) + n;
    return 0;
}

ssize_t gr_inflater_read(struct gr_inflater *z, uint8_t *dst, size_t n) {
    if (n == 0 || z->done) return 0;
    if (z->produced >= z->max_out) n = 1; /* one byte more says "too big" */
    else if (n > z->max_out - z->produced) n = z->max_out - z->produced + 1;
    size_t got = 0;
    switch (z->codec) {
    case GR_CODEC_GZIP: {
        z->z.next_out = dst;
        z->z.avail_out = (uInt)(n > UINT32_MAX ? UINT32_MAX : n);
        int zr = inflate(&z->z, Z_NO_FLUSH);
        got = (size_t)(z->z.next_out - dst);
        if (zr == Z_STREAM_END) z->done = true;
        else if (zr != Z_OK && !(zr == Z_BUF_ERROR && z->z.avail_in > 0)) return -EINVAL; /* corrupt or cut short */
        break;
    }
    case GR_CODEC_SNAPPY:
        while (got == 0) {
            if (z->blk_pos == z->blk_len) {
                int rc = snappy_next_block(z);
                if (rc == 1) {
                    z->done = true;
                    break;
                }
                if (rc) return rc;
                continue;
            }
            got = z->blk_len - z->blk_pos < n ? z->blk_len - z->blk_pos : n;
            memcpy(dst, z->blk + z->blk_pos, got);
            z->blk_pos += got;
        }
        break;
    case GR_CODEC_LZ4:
        while (got == 0 && !z->done) {
            const uint8_t *src = z->lz4_hdr_pos < z->lz4_hdr_len ? z->lz4_hdr + z->lz4_hdr_pos : z->in + z->pos;
            size_t src_len = z->lz4_hdr_pos < z->lz4_hdr_len ? z->lz4_hdr_len - z->lz4_hdr_pos : z->len - z->pos;
            if (src_len == 0) return -EINVAL; /* the frame is cut short */
            size_t d = n, s = src_len;
            size_t hint = LZ4F_decompress(z->lz4, dst, &d, src, &s, NULL);
            if (LZ4F_isError(hint)) return -EINVAL;
            if (z->lz4_hdr_pos < z->lz4_hdr_len) z->lz4_hdr_pos += s;
            else z->pos += s;
            got = d;
            if (hint == 0) z->done = true;
            else if (s == 0 && d == 0) return -EINVAL;
        }
        break;
    case GR_CODEC_ZSTD:
        while (got == 0 && !z->done) {
            ZSTD_inBuffer ib = {z->in, z->len, z->pos};
            ZSTD_outBuffer ob = {dst, n, 0};
            size_t r = ZSTD_decompressStream(z->zstd, &ob, &ib);
            if (ZSTD_isError(r)) return -EINVAL;
            got = ob.pos;
            if (r == 0) z->done = true;
            else if (ib.pos == z->pos && ob.pos == 0) return -EINVAL; /* no progress: cut short */
            z->pos = ib.pos;
        }
        break;
    default: return -EINVAL;
    }
    z->produced += got;
    if (z->produced > z->max_out) return -E2BIG;
    return (ssize_t)got;
}
