/* Batch codecs (see compression.h). */
#include "storage/compression.h"

#include <errno.h>
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
