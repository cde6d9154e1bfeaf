/* The log validator (storage/log_validator.h) and the conversions that read records through it:
 *  - client batches of every codec validate record by record; a payload that does not
 *    decompress is CORRUPT_MESSAGE, one cut short too, malformed inner records / a wrong record
 *    count / bytes after the records are INVALID_RECORD, a client's offset deltas other than
 *    0..n-1 ask for a rebuild (a stored batch's are INVALID_RECORD), a bomb past the
 *    bound is MESSAGE_TOO_LARGE; compacted topics need keys and CreateTime is bounded, with the
 *    failing records' indexes (Kafka's record errors);
 *  - the record stream reads records whole or skipping, in place or compressed;
 *  - Produce v0-v2 message sets with snappy (xerial and raw) and lz4 wrappers up-convert, a
 *    magic 0 lz4 wrapper with the broken header checksum too (KAFKA-3160), magic 1 not;
 *  - snappy/lz4 v2 batches down-convert for old fetches; zstd stops the conversion. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/be.h"
#include "common/kerr.h"
#include "common/util.h"
#include "storage/batch.h"
#include "storage/compression.h"
#include "storage/legacy_records.h"
#include "storage/log_validator.h"
#include "support/check.h"

static const char *const CODECS[] = {"none", "gzip", "snappy", "lz4", "zstd"};

/* Replaces the records section of the uncompressed batch *b (*len) by `recs` (rlen bytes,
 * already in codec) and sets the codec bits and the CRC. */
static void set_records(uint8_t **b, size_t *len, const uint8_t *recs, size_t rlen, int codec) {
    *b = gr_realloc(*b, GR_BATCH_HEADER_SIZE + rlen);
    memcpy(*b + GR_BATCH_HEADER_SIZE, recs, rlen);
    *len = GR_BATCH_HEADER_SIZE + rlen;
    gr_put_be32(*b + GR_BATCH_OFF_LENGTH, (uint32_t)(*len - GR_BATCH_LOG_OVERHEAD));
    gr_put_be16(*b + GR_BATCH_OFF_ATTRIBUTES,
                (uint16_t)((gr_be16(*b + GR_BATCH_OFF_ATTRIBUTES) & ~GR_BATCH_ATTR_COMPRESSION_MASK) | codec));
    gr_batch_update_crc(*b, *len);
}

/* Compresses the records of the uncompressed batch *b in place (codec 0: nothing). */
static void compress_batch(uint8_t **b, size_t *len, int codec) {
    if (codec == GR_CODEC_NONE) return;
    uint8_t *z;
    size_t zl;
    CHECK(gr_compress(codec, *b + GR_BATCH_HEADER_SIZE, *len - GR_BATCH_HEADER_SIZE, &z, &zl) == 0);
    set_records(b, len, z, zl, codec);
    free(z);
}

/* n records k<i> = v<i> with timestamps ts0 + i; key NULL for i in null_keys (bitmask). */
static uint8_t *build(int n, int64_t ts0, unsigned null_keys, int codec, size_t *len) {
    struct gr_batch_rec recs[32];
    static char keys[32][8], vals[32][8];
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], 8, "k%d", i);
        snprintf(vals[i], 8, "v%d", i);
        bool nk = (null_keys >> i) & 1;
        recs[i] = (struct gr_batch_rec){nk ? NULL : keys[i], nk ? -1 : (int32_t)strlen(keys[i]), vals[i],
                                        (int32_t)strlen(vals[i]), NULL, 0, ts0 + i};
    }
    uint8_t *b = gr_batch_build(recs, n, NULL, len);
    compress_batch(&b, len, codec);
    return b;
}

static int16_t validate(const uint8_t *b, size_t len, const struct gr_validator_config *cfg,
                        struct gr_validator_result *res) {
    struct gr_batch_info bi;
    int err = gr_batch_validate_one(b, len, GR_BATCH_V_CLIENT | GR_BATCH_V_NO_RECORDS, &bi);
    if (err != GR_BATCH_OK) return gr_batch_err_kerr(err);
    return gr_log_validate_batch(b, &bi, cfg, res);
}

static const struct gr_validator_config PLAIN = {.client = true,
                                                 .max_diff_ms = INT64_MAX,
                                                 .now_ms = 1000000,
                                                 .max_inflated = GR_VALIDATOR_MAX_INFLATED};

static void test_valid_every_codec(void) {
    for (int codec = 0; codec <= 4; codec++) {
        size_t len;
        uint8_t *b = build(20, 1000, 0, codec, &len);
        struct gr_validator_result res;
        CHECKF(validate(b, len, &PLAIN, &res) == GR_KERR_NONE && res.records == 20 && res.max_timestamp == 1019,
               "%s: %s", CODECS[codec], res.message ? res.message : "-");
        /* the stream reads the same records whole and skipping */
        struct gr_batch_info bi;
        gr_batch_parse_header(b, len, &bi);
        struct gr_record_stream rs;
        struct gr_batch_rec_view r;
        CHECK(gr_record_stream_open(&rs, b, &bi, GR_VALIDATOR_MAX_INFLATED, 0) == GR_BATCH_OK);
        int n = 0;
        while (gr_record_stream_next(&rs, &r, n % 2 ? GR_RECORD_SKIP_DATA : GR_RECORD_WHOLE) == 1) {
            CHECK(r.OffsetDelta == n && r.ValueLength == (n < 10 ? 2 : 3));
            if (n % 2 == 0) CHECK(rs.raw && r.Value && memcmp(r.Value, "v", 1) == 0);
            else CHECK(!rs.raw && !r.Value);
            n++;
        }
        CHECKF(n == 20 && rs.err == GR_BATCH_OK, "%s: %d records, err %d", CODECS[codec], n, rs.err);
        gr_record_stream_close(&rs);
        free(b);
    }
}

/* Garbage where the compressed records should be, and streams cut short. */
static void test_undecodable(void) {
    uint8_t junk[300];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(i * 37 + 11);
    for (int codec = 1; codec <= 4; codec++) {
        size_t len;
        uint8_t *b = build(3, 1000, 0, GR_CODEC_NONE, &len);
        set_records(&b, &len, junk, sizeof junk, codec);
        struct gr_validator_result res;
        CHECKF(validate(b, len, &PLAIN, &res) == GR_KERR_CORRUPT_MESSAGE, "%s garbage: %d", CODECS[codec], res.error);
        free(b);
        /* a valid stream cut short */
        b = build(20, 1000, 0, codec, &len);
        size_t cut = len - 6;
        uint8_t *recs = gr_malloc(cut - GR_BATCH_HEADER_SIZE);
        memcpy(recs, b + GR_BATCH_HEADER_SIZE, cut - GR_BATCH_HEADER_SIZE);
        set_records(&b, &len, recs, cut - GR_BATCH_HEADER_SIZE, codec);
        free(recs);
        int16_t e = validate(b, len, &PLAIN, &res);
        CHECKF(e == GR_KERR_CORRUPT_MESSAGE || e == GR_KERR_INVALID_RECORD, "%s cut short: %d", CODECS[codec], e);
        free(b);
    }
}

/* Well-compressed bytes that are not records as the header says. */
static void test_malformed_records(void) {
    for (int codec = 0; codec <= 4; codec++) {
        size_t len;
        struct gr_validator_result res;
        /* one record fewer than recordCount says */
        uint8_t *b = build(5, 1000, 0, GR_CODEC_NONE, &len);
        gr_put_be32(b + GR_BATCH_OFF_RECORD_COUNT, 6);
        gr_put_be32(b + GR_BATCH_OFF_LAST_OFFSET_DELTA, 5);
        compress_batch(&b, &len, codec);
        gr_batch_update_crc(b, len);
        CHECKF(validate(b, len, &PLAIN, &res) == GR_KERR_INVALID_RECORD, "%s: short count %d", CODECS[codec],
               res.error);
        free(b);
        /* bytes after the last record */
        b = build(5, 1000, 0, GR_CODEC_NONE, &len);
        gr_put_be32(b + GR_BATCH_OFF_RECORD_COUNT, 4);
        gr_put_be32(b + GR_BATCH_OFF_LAST_OFFSET_DELTA, 3);
        compress_batch(&b, &len, codec);
        gr_batch_update_crc(b, len);
        CHECKF(validate(b, len, &PLAIN, &res) == GR_KERR_INVALID_RECORD, "%s: trailing %d", CODECS[codec], res.error);
        free(b);
        /* a record whose length varint says more than it holds */
        b = build(5, 1000, 0, GR_CODEC_NONE, &len);
        b[GR_BATCH_HEADER_SIZE] = (uint8_t)(b[GR_BATCH_HEADER_SIZE] + 2);
        compress_batch(&b, &len, codec);
        gr_batch_update_crc(b, len);
        CHECKF(validate(b, len, &PLAIN, &res) == GR_KERR_INVALID_RECORD, "%s: record length %d", CODECS[codec],
               res.error);
        free(b);
        /* offset deltas that are not 0..n-1 (the second record's delta byte: len, attr, ts, off) */
        b = build(2, 1000, 0, GR_CODEC_NONE, &len);
        size_t r1 = GR_BATCH_HEADER_SIZE + 1 + (size_t)(b[GR_BATCH_HEADER_SIZE] >> 1);
        b[r1 + 3] = 2 * 7; /* zigzag 7 */
        compress_batch(&b, &len, codec);
        gr_batch_update_crc(b, len);
        CHECKF(validate(b, len, &PLAIN, &res) == GR_KERR_NONE && res.rebuild, "%s: offset delta %d", CODECS[codec],
               res.error);
        struct gr_validator_config stored = PLAIN; /* not a client's: deltas must rise within the batch */
        stored.client = false;
        CHECKF(validate(b, len, &stored, &res) == GR_KERR_INVALID_RECORD, "%s: stored offset delta %d",
               CODECS[codec], res.error);
        free(b);
        b = build(2, 1000, 0, GR_CODEC_NONE, &len);
        compress_batch(&b, &len, codec);
        gr_batch_update_crc(b, len);
        CHECKF(validate(b, len, &PLAIN, &res) == GR_KERR_NONE && !res.rebuild, "%s: 0..n-1 rebuilt", CODECS[codec]);
        free(b);
    }
}

/* A decompression bomb: more than the bound of zeros (one value of 65 MiB). */
static void test_bomb(void) {
    size_t big = GR_VALIDATOR_MAX_INFLATED + 4096;
    uint8_t *val = calloc(1, big);
    struct gr_batch_rec rec = {"k", 1, val, (int32_t)big, NULL, 0, 1000};
    size_t len;
    uint8_t *b = gr_batch_build(&rec, 1, NULL, &len);
    free(val);
    for (int codec = 1; codec <= 4; codec++) {
        uint8_t *c = gr_malloc(len);
        memcpy(c, b, len);
        size_t cl = len;
        compress_batch(&c, &cl, codec);
        struct gr_validator_result res;
        CHECKF(validate(c, cl, &PLAIN, &res) == GR_KERR_MESSAGE_TOO_LARGE, "%s: %d", CODECS[codec], res.error);
        /* the cleaner's whole-record read of it fails the same way, without holding it */
        struct gr_batch_info bi;
        gr_batch_parse_header(c, cl, &bi);
        struct gr_record_stream rs;
        struct gr_batch_rec_view r;
        gr_record_stream_open(&rs, c, &bi, GR_VALIDATOR_MAX_INFLATED, 0);
        CHECK(gr_record_stream_next(&rs, &r, GR_RECORD_WHOLE) == 0 && rs.err == GR_BATCH_EINFLATE);
        gr_record_stream_close(&rs);
        free(c);
    }
    free(b);
}

/* Kafka's per-record checks: keys in compacted topics, CreateTime limits, LogAppendTime. */
static void test_record_errors(void) {
    for (int codec = 0; codec <= 4; codec++) {
        size_t len;
        struct gr_validator_result res;
        struct gr_validator_config cfg = PLAIN;
        cfg.compacted = true;
        uint8_t *b = build(6, 1000, (1u << 1) | (1u << 4), codec, &len);
        CHECKF(validate(b, len, &cfg, &res) == GR_KERR_INVALID_RECORD && res.record_error_count == 2 &&
                   res.kept == 2 && res.record_errors[0].BatchIndex == 1 && res.record_errors[1].BatchIndex == 4,
               "%s: keys %d, %d errors", CODECS[codec], res.error, res.record_error_count);
        free(b);
        /* CreateTime limit 1500 ms: 5 s early and late fail, -1 (no timestamp) passes */
        cfg = PLAIN;
        cfg.max_diff_ms = 1500;
        struct gr_batch_rec recs[3] = {{"a", 1, "x", 1, NULL, 0, cfg.now_ms - 5000},
                                       {"b", 1, "y", 1, NULL, 0, -1},
                                       {"c", 1, "z", 1, NULL, 0, cfg.now_ms + 5000}};
        b = gr_batch_build(recs, 3, NULL, &len);
        compress_batch(&b, &len, codec);
        CHECKF(validate(b, len, &cfg, &res) == GR_KERR_INVALID_TIMESTAMP && res.record_error_count == 2 &&
                   res.record_errors[0].BatchIndex == 0 && res.record_errors[1].BatchIndex == 2,
               "%s: timestamps %d", CODECS[codec], res.error);
        cfg.log_append_time = true; /* the limit is for CreateTime only */
        CHECK(validate(b, len, &cfg, &res) == GR_KERR_NONE);
        free(b);
        /* a producer's LogAppendTime batch */
        b = build(2, 1000, 0, GR_CODEC_NONE, &len);
        gr_put_be16(b + GR_BATCH_OFF_ATTRIBUTES, GR_BATCH_ATTR_LOG_APPEND_TIME);
        gr_batch_update_crc(b, len);
        compress_batch(&b, &len, codec);
        CHECK(validate(b, len, &PLAIN, &res) == GR_KERR_INVALID_TIMESTAMP && res.record_error_count == 2);
        free(b);
    }
}

/* ---- legacy message sets ---- */

/* One legacy entry: offset, magic, attributes, timestamp, key (NULL: null), value bytes. */
static size_t put_entry(uint8_t *p, int64_t offset, int magic, int attr, int64_t ts, const char *key,
                        const uint8_t *val, int32_t vlen) {
    uint8_t *body = p + 16;
    size_t n = 0;
    body[n++] = (uint8_t)magic;
    body[n++] = (uint8_t)attr;
    if (magic == 1) gr_put_be64(body + n, (uint64_t)ts), n += 8;
    int32_t kl = key ? (int32_t)strlen(key) : -1;
    gr_put_be32(body + n, (uint32_t)kl), n += 4;
    if (kl > 0) memcpy(body + n, key, (size_t)kl), n += (size_t)kl;
    gr_put_be32(body + n, (uint32_t)vlen), n += 4;
    if (vlen > 0) memcpy(body + n, val, (size_t)vlen), n += (size_t)vlen;
    gr_put_be64(p, (uint64_t)offset);
    gr_put_be32(p + 8, (uint32_t)(n + 4));
    gr_put_be32(p + 12, gr_crc32_ieee(body, n));
    return 16 + n;
}

/* A message set of one wrapper (codec) holding 3 inner messages; lz4_break_hc spoils the lz4
 * frame header checksum as Kafka's magic 0 writers did. */
static size_t wrapper_set(uint8_t *set, int magic, int codec, bool lz4_break_hc, bool raw_snappy) {
    uint8_t inner[512];
    size_t il = 0;
    for (int i = 0; i < 3; i++) {
        char k[4] = {'k', (char)('0' + i), 0}, v[4] = {'v', (char)('0' + i), 0};
        il += put_entry(inner + il, i, magic, 0, 500 + i, k, (const uint8_t *)v, 2);
    }
    uint8_t *z;
    size_t zl;
    CHECK(gr_compress(codec, inner, il, &z, &zl) == 0);
    if (codec == GR_CODEC_LZ4 && lz4_break_hc) z[6] ^= 0x5a; /* FLG BD HC: HC at 6 */
    if (codec == GR_CODEC_SNAPPY && raw_snappy) { /* one raw block: strip xerial's framing */
        memmove(z, z + 20, zl - 20);
        zl -= 20;
    }
    size_t n = put_entry(set, 2, magic, codec, 502, NULL, z, (int32_t)zl);
    free(z);
    return n;
}

static void check_upconverted(const uint8_t *b, size_t bl, int magic) {
    struct gr_batch_rec_iter it;
    struct gr_batch_rec_view r;
    CHECK(gr_batch_rec_iter_init(&it, b, bl) == GR_BATCH_OK && it.info.RecordCount == 3);
    for (int i = 0; i < 3; i++) {
        CHECK(gr_batch_rec_iter_next(&it, &r) == 1 && r.KeyLength == 2 && r.Key[1] == '0' + i && r.Value[1] == '0' + i);
        CHECK(r.Timestamp == (magic == 1 ? 500 + i : -1));
    }
}

static void test_legacy_up_convert_codecs(void) {
    uint8_t set[2048];
    for (int magic = 0; magic <= 1; magic++)
        for (int codec = 1; codec <= 3; codec++)
            for (int raw = 0; raw <= (codec == GR_CODEC_SNAPPY); raw++) {
                size_t n = wrapper_set(set, magic, codec, false, raw);
                uint8_t *b;
                size_t bl;
                int src = -1;
                int16_t e = gr_legacy_to_v2(set, n, &b, &bl, &src);
                CHECKF(e == GR_KERR_NONE && src == codec, "magic %d %s%s: %d", magic, CODECS[codec],
                       raw ? " raw" : "", e);
                if (e == GR_KERR_NONE) {
                    check_upconverted(b, bl, magic);
                    free(b);
                }
            }
    /* lz4 with the broken header checksum: Kafka ignores it for magic 0 only */
    size_t n = wrapper_set(set, 0, GR_CODEC_LZ4, true, false);
    uint8_t *b;
    size_t bl;
    CHECK_KERR(gr_legacy_to_v2(set, n, &b, &bl, NULL), GR_KERR_NONE);
    check_upconverted(b, bl, 0);
    free(b);
    n = wrapper_set(set, 1, GR_CODEC_LZ4, true, false);
    CHECK_KERR(gr_legacy_to_v2(set, n, &b, &bl, NULL), GR_KERR_CORRUPT_MESSAGE);
    /* inner messages that do not parse */
    n = wrapper_set(set, 1, GR_CODEC_SNAPPY, false, false);
    set[n - 1] ^= 0xff; /* inside the compressed value: its CRC was over the old bytes */
    gr_put_be32(set + 12, gr_crc32_ieee(set + 16, n - 16));
    CHECK(gr_legacy_to_v2(set, n, &b, &bl, NULL) != GR_KERR_NONE);
}

static void test_down_convert_codecs(void) {
    for (int codec = 1; codec <= 4; codec++) {
        size_t len;
        uint8_t *b = build(20, 1000, 0, codec, &len);
        gr_batch_set_base_offset(b, 100);
        uint8_t *leg;
        size_t ll;
        bool stopped;
        CHECK(gr_v2_to_legacy(b, len, 1, 105, SIZE_MAX, SIZE_MAX, &leg, &ll, &stopped) == 0);
        if (codec == GR_CODEC_ZSTD) {
            CHECK(!leg && ll == 0 && stopped); /* Kafka: UNSUPPORTED_COMPRESSION_TYPE */
        } else {
            /* offsets 105..119, uncompressed magic 1 messages */
            uint8_t *v2;
            size_t v2l;
            CHECKF(leg && !stopped, "%s", CODECS[codec]);
            CHECK_KERR(gr_legacy_to_v2(leg, ll, &v2, &v2l, NULL), GR_KERR_NONE);
            CHECK(gr_batch_record_count(v2) == 15 && (int64_t)gr_be64(leg) == 105);
            free(v2);
            free(leg);
            /* bounded: two messages' room gives two messages (k10=v10, k11=v11) */
            size_t one = 12 + 4 + 2 + 8 + 4 + 3 + 4 + 3;
            CHECK(gr_v2_to_legacy(b, len, 1, 110, 2 * one, 2 * one, &leg, &ll, &stopped) == 0 && ll == 2 * one);
            free(leg);
        }
        free(b);
    }
}

/* A zstd frame whose header asks for a 32 MiB window (what a streaming compressor writes at
 * levels 20-22 or in long mode when it does not know the input size): libzstd's default limit
 * (128 MiB, windowLog 27) accepts it, as Kafka's zstd-jni does, and so must the validator and
 * the cleaner's record stream, whatever little the frame holds. */
static void test_zstd_large_window(void) {
    size_t len;
    uint8_t *b = build(20, 1000, 0, GR_CODEC_NONE, &len);
    size_t rlen = len - GR_BATCH_HEADER_SIZE;
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    CHECK(cc != NULL);
    CHECK(!ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_windowLog, 25)));
    size_t cap = ZSTD_compressBound(rlen) + 64;
    uint8_t *z = gr_malloc(cap);
    ZSTD_outBuffer ob = {z, cap, 0};
    ZSTD_inBuffer ib = {b + GR_BATCH_HEADER_SIZE, rlen, 0};
    /* continue first: the size is unknown when the frame header is written */
    CHECK(!ZSTD_isError(ZSTD_compressStream2(cc, &ob, &ib, ZSTD_e_continue)));
    ZSTD_inBuffer none = {NULL, 0, 0};
    CHECK(ZSTD_compressStream2(cc, &ob, &none, ZSTD_e_end) == 0);
    ZSTD_freeCCtx(cc);
    /* the frame header: no single-segment flag, window descriptor 2^(10 + 15) */
    CHECK(ob.pos > 6 && (z[4] & 0x20) == 0 && z[5] == 15 << 3);
    set_records(&b, &len, z, ob.pos, GR_CODEC_ZSTD);
    free(z);
    struct gr_validator_result res;
    CHECKF(validate(b, len, &PLAIN, &res) == GR_KERR_NONE && res.records == 20, "zstd 32 MiB window: %d %s",
           res.error, res.message ? res.message : "-");
    struct gr_batch_info bi;
    gr_batch_parse_header(b, len, &bi);
    struct gr_record_stream rs;
    struct gr_batch_rec_view r;
    CHECK(gr_record_stream_open(&rs, b, &bi, GR_VALIDATOR_MAX_INFLATED, 0) == GR_BATCH_OK);
    int n = 0;
    while (gr_record_stream_next(&rs, &r, GR_RECORD_WHOLE) == 1) n++;
    CHECKF(n == 20 && rs.err == GR_BATCH_OK, "zstd 32 MiB window, whole: %d records, err %d", n, rs.err);
    gr_record_stream_close(&rs);
    free(b);
}

int main(void) {
    test_valid_every_codec();
    test_undecodable();
    test_malformed_records();
    test_bomb();
    test_record_errors();
    test_legacy_up_convert_codecs();
    test_down_convert_codecs();
    test_zstd_large_window();
    if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures);
    else printf("test_log_validator: ok\n");
    return test_failures != 0;
}
