/* compression.type on leader appends (storage/recompression.h): every codec pair round trips
 * (the stored batch has the target codec bits, a valid CRC, the same header fields and the same
 * record bytes), a batch already in the target codec is kept, mixed request data converts batch
 * by batch, "producer" does nothing; a batch whose offsetDeltas are not 0..n-1 is rebuilt with
 * fresh ones in every codec pair; corrupt compressed data, malformed decompressed records and
 * a decompression bomb are refused with Kafka's codes. Through the log: a compression.type=gzip
 * log stores gzip batches from an uncompressed producer and still acknowledges an idempotent
 * retry as a duplicate with its original offsets. */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/be.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "storage/batch.h"
#include "storage/compression.h"
#include "storage/log.h"
#include "storage/recompression.h"
#include "support/check.h"

/* An uncompressed batch of 5 records (keys, values, a null value, headers), producer 7 epoch 3
 * sequence 10, transactional. */
static uint8_t *plain_batch(size_t *len) {
    static const struct gr_batch_rec_header hs[2] = {{"h1", 2, "v", 1}, {"h2", 2, NULL, -1}};
    struct gr_batch_rec recs[5];
    static char keys[5][8], vals[5][64];
    for (int i = 0; i < 5; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        snprintf(vals[i], sizeof vals[i], "value %d value %d value %d", i, i, i);
        recs[i] = (struct gr_batch_rec){
            keys[i], (int32_t)strlen(keys[i]), i == 3 ? NULL : vals[i], i == 3 ? -1 : (int32_t)strlen(vals[i]), hs,
            i % 3,   1700000000000 + i * 7};
    }
    struct gr_batch_build_opts o = GR_BATCH_BUILD_OPTS_INIT;
    o.producer_id = 7;
    o.producer_epoch = 3;
    o.base_sequence = 10;
    o.attributes = GR_BATCH_ATTR_TRANSACTIONAL;
    return gr_batch_build(recs, 5, &o, len);
}

/* The batch b (uncompressed, len bytes) with its records section replaced by `recs` (rlen bytes,
 * e.g. compressed) and codec bits `codec`; CRC recomputed. */
static uint8_t *with_records(const uint8_t *b, const uint8_t *recs, size_t rlen, int codec, size_t *len) {
    uint8_t *o = gr_malloc(GR_BATCH_HEADER_SIZE + rlen);
    memcpy(o, b, GR_BATCH_HEADER_SIZE);
    memcpy(o + GR_BATCH_HEADER_SIZE, recs, rlen);
    *len = GR_BATCH_HEADER_SIZE + rlen;
    gr_put_be32(o + GR_BATCH_OFF_LENGTH, (uint32_t)(*len - 12));
    gr_put_be16(o + GR_BATCH_OFF_ATTRIBUTES, (uint16_t)((gr_be16(b + GR_BATCH_OFF_ATTRIBUTES) & ~7) | codec));
    gr_batch_update_crc(o, *len);
    return o;
}

static uint8_t *in_codec(const uint8_t *plain, size_t plen, int codec, size_t *len) {
    if (codec == GR_CODEC_NONE) {
        *len = plen;
        uint8_t *o = gr_malloc(plen);
        memcpy(o, plain, plen);
        return o;
    }
    uint8_t *z;
    size_t zl;
    CHECK(gr_compress(codec, plain + GR_BATCH_HEADER_SIZE, plen - GR_BATCH_HEADER_SIZE, &z, &zl) == 0);
    uint8_t *o = with_records(plain, z, zl, codec, len);
    free(z);
    return o;
}

/* Header fields other than batchLength, CRC and the codec bits are equal; the records
 * decompress to the plain batch's record bytes. */
static void check_same(const uint8_t *got, size_t glen, const uint8_t *plain, size_t plen, int codec) {
    struct gr_batch_info g, p;
    CHECK(gr_batch_validate_one(got, glen, GR_BATCH_V_CLIENT, &g) == GR_BATCH_OK);
    CHECK(gr_batch_validate_one(plain, plen, GR_BATCH_V_CLIENT, &p) == GR_BATCH_OK);
    CHECK(g.size == glen);
    CHECKF(gr_batch_info_compression(&g) == codec, "codec %d want %d", gr_batch_info_compression(&g), codec);
    CHECK((g.Attributes & ~7) == (p.Attributes & ~7));
    CHECK(g.BaseOffset == p.BaseOffset && g.PartitionLeaderEpoch == p.PartitionLeaderEpoch);
    CHECK(g.LastOffsetDelta == p.LastOffsetDelta && g.RecordCount == p.RecordCount);
    CHECK(g.BaseTimestamp == p.BaseTimestamp && g.MaxTimestamp == p.MaxTimestamp);
    CHECK(g.ProducerId == p.ProducerId && g.ProducerEpoch == p.ProducerEpoch && g.BaseSequence == p.BaseSequence);
    const uint8_t *recs = got + GR_BATCH_HEADER_SIZE;
    size_t rlen = glen - GR_BATCH_HEADER_SIZE;
    uint8_t *inflated = NULL;
    if (codec != GR_CODEC_NONE) {
        CHECK(gr_decompress(codec, recs, rlen, 1 << 20, &inflated, &rlen) == 0);
        recs = inflated;
    }
    CHECK(inflated || codec == GR_CODEC_NONE);
    CHECK(rlen == plen - GR_BATCH_HEADER_SIZE && memcmp(recs, plain + GR_BATCH_HEADER_SIZE, rlen) == 0);
    free(inflated);
}

static void test_parse(void) {
    CHECK(gr_compression_type_parse("producer") == GR_COMPRESSION_PRODUCER);
    CHECK(gr_compression_type_parse("uncompressed") == GR_CODEC_NONE);
    CHECK(gr_compression_type_parse("gzip") == GR_CODEC_GZIP);
    CHECK(gr_compression_type_parse("snappy") == GR_CODEC_SNAPPY);
    CHECK(gr_compression_type_parse("lz4") == GR_CODEC_LZ4);
    CHECK(gr_compression_type_parse("zstd") == GR_CODEC_ZSTD);
    CHECK(gr_compression_type_parse("none") < 0 && gr_compression_type_parse("none") != GR_COMPRESSION_PRODUCER);
    CHECK(gr_compression_type_parse("GZIP") < 0 && gr_compression_type_parse(NULL) < 0);
    struct gr_plog_config c;
    gr_plog_config_defaults(&c);
    CHECK(c.compression_type == GR_COMPRESSION_PRODUCER);
    CHECK(gr_plog_parse_compression_type("lz4", &c) == 0 && c.compression_type == GR_CODEC_LZ4);
    CHECK(gr_plog_parse_compression_type("brotli", &c) < 0 && c.compression_type == GR_CODEC_LZ4);
}

static void test_all_pairs(void) {
    size_t plen;
    uint8_t *plain = plain_batch(&plen);
    for (int src = 0; src <= GR_CODEC_ZSTD; src++)
        for (int dst = 0; dst <= GR_CODEC_ZSTD; dst++) {
            size_t slen;
            uint8_t *in = in_codec(plain, plen, src, &slen);
            uint8_t *out = (uint8_t *)1;
            size_t olen = 1;
            CHECK_KERR(gr_recompress_batches(in, slen, dst, &out, &olen), GR_KERR_NONE);
            if (src == dst) {
                CHECKF(out == NULL && olen == 0, "src %d: same codec must be kept as is", src);
            } else {
                CHECKF(out != NULL, "%d -> %d", src, dst);
                if (out) {
                    struct gr_batch_summary sum;
                    CHECK(gr_batch_validate_all(out, olen, GR_BATCH_V_CLIENT, &sum) == GR_BATCH_OK);
                    CHECK(sum.batches == 1 && sum.records == 5);
                    check_same(out, olen, plain, plen, dst);
                }
            }
            /* producer: nothing */
            uint8_t *o2 = (uint8_t *)1;
            CHECK_KERR(gr_recompress_batches(in, slen, GR_COMPRESSION_PRODUCER, &o2, &olen), GR_KERR_NONE);
            CHECK(o2 == NULL);
            free(out);
            free(in);
        }
    free(plain);
}

/* Several batches of different codecs in one request's data: each converted, a batch already in
 * the target codec copied byte for byte. */
static void test_mixed(void) {
    size_t plen;
    uint8_t *plain = plain_batch(&plen);
    size_t l0, l1, l2;
    uint8_t *b0 = in_codec(plain, plen, GR_CODEC_SNAPPY, &l0), *b1 = in_codec(plain, plen, GR_CODEC_ZSTD, &l1),
            *b2 = in_codec(plain, plen, GR_CODEC_NONE, &l2);
    uint8_t *all = gr_malloc(l0 + l1 + l2);
    memcpy(all, b0, l0);
    memcpy(all + l0, b1, l1);
    memcpy(all + l0 + l1, b2, l2);
    uint8_t *out;
    size_t olen;
    CHECK_KERR(gr_recompress_batches(all, l0 + l1 + l2, GR_CODEC_ZSTD, &out, &olen), GR_KERR_NONE);
    CHECK(out != NULL);
    if (out) {
        struct gr_batch_summary sum;
        CHECK(gr_batch_validate_all(out, olen, GR_BATCH_V_CLIENT, &sum) == GR_BATCH_OK && sum.batches == 3);
        struct gr_batch_iter it;
        struct gr_batch_info bi;
        const uint8_t *b;
        gr_batch_iter_init(&it, out, olen);
        int i = 0;
        while (gr_batch_iter_next(&it, &bi, &b) == 1) {
            check_same(b, bi.size, plain, plen, GR_CODEC_ZSTD);
            if (i == 1) CHECK(bi.size == l1 && memcmp(b, b1, l1) == 0); /* kept as is */
            i++;
        }
        CHECK(i == 3);
    }
    free(out);
    free(all);
    free(b0);
    free(b1);
    free(b2);
    free(plain);
}

static void test_corrupt(void) {
    size_t plen;
    uint8_t *plain = plain_batch(&plen);
    uint8_t *out = (uint8_t *)1;
    size_t olen, len;
    /* compressed bytes that do not decompress (valid CRC over them) */
    static const uint8_t junk[] = "this is not a gzip, snappy, lz4 or zstd stream at all........";
    for (int codec = GR_CODEC_GZIP; codec <= GR_CODEC_ZSTD; codec++) {
        uint8_t *b = with_records(plain, junk, sizeof junk, codec, &len);
        CHECKF(gr_recompress_batches(b, len, codec == GR_CODEC_GZIP ? GR_CODEC_NONE : GR_CODEC_GZIP, &out, &olen) ==
                   GR_KERR_CORRUPT_MESSAGE,
               "codec %d", codec);
        CHECK(out == NULL);
        free(b);
    }
    /* decompresses, but to bytes that are not records */
    uint8_t *z;
    size_t zl;
    CHECK(gr_compress(GR_CODEC_GZIP, junk, sizeof junk, &z, &zl) == 0);
    uint8_t *b = with_records(plain, z, zl, GR_CODEC_GZIP, &len);
    free(z);
    int16_t e = gr_recompress_batches(b, len, GR_CODEC_LZ4, &out, &olen);
    CHECKF(e == GR_KERR_INVALID_RECORD || e == GR_KERR_CORRUPT_MESSAGE, "got %d", e);
    CHECK(out == NULL);
    free(b);
    /* the records of a 4-record batch under a header saying 5 */
    CHECK(gr_compress(GR_CODEC_ZSTD, plain + GR_BATCH_HEADER_SIZE, plen - GR_BATCH_HEADER_SIZE, &z, &zl) == 0);
    b = with_records(plain, z, zl, GR_CODEC_ZSTD, &len);
    free(z);
    gr_put_be32(b + GR_BATCH_OFF_RECORD_COUNT, 6);
    gr_put_be32(b + GR_BATCH_OFF_LAST_OFFSET_DELTA, 5);
    gr_batch_update_crc(b, len);
    e = gr_recompress_batches(b, len, GR_CODEC_NONE, &out, &olen);
    CHECKF(e == GR_KERR_INVALID_RECORD || e == GR_KERR_CORRUPT_MESSAGE, "got %d", e);
    CHECK(out == NULL);
    free(b);
    /* a decompression bomb: more than GR_RECOMPRESSION_MAX_INFLATED bytes of zeros */
    size_t big = GR_RECOMPRESSION_MAX_INFLATED + 4096;
    uint8_t *zeros = calloc(1, big);
    CHECK(gr_compress(GR_CODEC_ZSTD, zeros, big, &z, &zl) == 0);
    free(zeros);
    b = with_records(plain, z, zl, GR_CODEC_ZSTD, &len);
    free(z);
    CHECK_KERR(gr_recompress_batches(b, len, GR_CODEC_GZIP, &out, &olen), GR_KERR_CORRUPT_MESSAGE);
    CHECK(out == NULL);
    free(b);
    /* truncated request data */
    CHECK_KERR(gr_recompress_batches(plain, plen - 1, GR_CODEC_GZIP, &out, &olen), GR_KERR_CORRUPT_MESSAGE);
    CHECK(out == NULL);
    free(plain);
}

/* Appends the zig-zag varint of v at w; returns its size. */
static size_t put_zz(uint8_t *w, int64_t v) {
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    size_t n = 0;
    while (u >= 0x80) {
        w[n++] = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    w[n++] = (uint8_t)u;
    return n;
}

/* Kafka's buildRecordsAndAssignOffsets (gr_batch_rebuild): a client batch whose offsetDeltas
 * are not 0..n-1 (repeated, negative, past lastOffsetDelta, of other varint sizes) is rebuilt
 * in every codec pair with deltas 0..n-1 and every other record field and header field kept. */
static void test_rebuild_offsets(void) {
    static const int32_t deltas[5] = {0, 0, 70000, -5, INT32_MAX};
    size_t plen;
    uint8_t *plain = plain_batch(&plen);
    uint8_t recs[512];
    size_t rlen = 0;
    for (int i = 0; i < 5; i++) {
        uint8_t body[64];
        size_t n = 0;
        body[n++] = 0;                      /* attributes */
        n += put_zz(body + n, 1000 * i - 3); /* timestampDelta */
        n += put_zz(body + n, deltas[i]);
        n += put_zz(body + n, 2);
        n += (size_t)sprintf((char *)body + n, "k%d", i);
        n += put_zz(body + n, i == 3 ? -1 : 3);
        if (i != 3) n += (size_t)sprintf((char *)body + n, "v-%d", i);
        n += put_zz(body + n, 0); /* headers */
        rlen += put_zz(recs + rlen, (int64_t)n);
        memcpy(recs + rlen, body, n);
        rlen += n;
    }
    for (int src = 0; src <= GR_CODEC_ZSTD; src++)
        for (int dst = 0; dst <= GR_CODEC_ZSTD; dst++) {
            uint8_t *z = NULL;
            size_t zl = rlen, len;
            if (src != GR_CODEC_NONE) CHECK(gr_compress(src, recs, rlen, &z, &zl) == 0);
            uint8_t *in = with_records(plain, z ? z : recs, zl, src, &len);
            free(z);
            struct gr_batch_info bi;
            CHECK(gr_batch_validate_one(in, len, GR_BATCH_V_CLIENT | GR_BATCH_V_NO_RECORDS, &bi) == GR_BATCH_OK);
            uint8_t *out = NULL, *view = NULL;
            size_t olen = 0, vlen = 0;
            CHECK_KERR(gr_batch_rebuild(in, &bi, dst, &out, &olen), GR_KERR_NONE);
            struct gr_batch_info ob;
            CHECKF(out && gr_batch_validate_one(out, olen, GR_BATCH_V_CLIENT, &ob) == GR_BATCH_OK && ob.size == olen,
                   "%d -> %d", src, dst);
            if (!out) goto next;
            CHECK(gr_batch_info_compression(&ob) == dst && (ob.Attributes & ~7) == (bi.Attributes & ~7));
            CHECK(ob.ProducerId == 7 && ob.ProducerEpoch == 3 && ob.BaseSequence == 10 && ob.RecordCount == 5);
            CHECK(ob.BaseTimestamp == bi.BaseTimestamp && ob.MaxTimestamp == bi.MaxTimestamp);
            if (dst != GR_CODEC_NONE) CHECK(gr_batch_inflate(out, &ob, 1 << 20, &view, &vlen) == 0);
            struct gr_batch_rec_iter it;
            struct gr_batch_rec_view r;
            CHECK(gr_batch_rec_iter_init(&it, view ? view : out, view ? vlen : olen) == GR_BATCH_OK);
            int i = 0;
            while (gr_batch_rec_iter_next(&it, &r) == 1) {
                char k[16];
                snprintf(k, sizeof k, "k%d", i);
                CHECKF(r.OffsetDelta == i, "%d -> %d: record %d delta %d", src, dst, i, r.OffsetDelta);
                CHECK(r.TimestampDelta == 1000 * i - 3 && r.KeyLength == 2 && memcmp(r.Key, k, 2) == 0);
                CHECK(i == 3 ? r.ValueLength == -1 : (r.ValueLength == 3 && memcmp(r.Value, "v-", 2) == 0));
                i++;
            }
            CHECK(i == 5 && it.err == GR_BATCH_OK);
        next:
            free(view);
            free(out);
            free(in);
        }
    free(plain);
}

static char g_root[64];

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* Through gr_plog_append_as_leader: stored gzip, offsets assigned, an idempotent retry is a
 * duplicate answered with the first append's offsets; follower appends keep their codec. */
static void test_log(void) {
    char dir[128];
    snprintf(dir, sizeof dir, "%s/t-0", g_root);
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    CHECK(gr_plog_parse_compression_type("gzip", &cfg) == 0);
    struct gr_plog *log;
    CHECK(gr_plog_open_dir(dir, &cfg, 0, &log) == 0);
    size_t plen;
    uint8_t *plain = plain_batch(&plen);
    gr_put_be16(plain + GR_BATCH_OFF_ATTRIBUTES, 0); /* idempotent, not transactional */
    gr_batch_update_crc(plain, plen);
    for (int round = 0; round < 2; round++) {
        uint8_t *copy = gr_malloc(plen);
        memcpy(copy, plain, plen);
        struct gr_append_info info;
        CHECK(gr_plog_append_as_leader(log, copy, plen, 4, &info) == 0);
        CHECK_KERR(info.error, GR_KERR_NONE);
        CHECKF(info.first_offset == 0 && info.last_offset == 4, "round %d: %lld..%lld", round,
               (long long)info.first_offset, (long long)info.last_offset);
        free(copy);
    }
    CHECK(gr_plog_end_offset(log) == 5);
    struct gr_plog_read_result rr;
    CHECK(gr_plog_read(log, 0, 1 << 20, -1, true, &rr) == 0);
    struct gr_batch_summary sum;
    CHECK(rr.len > 0 && gr_batch_validate_all(rr.data, rr.len, 0, &sum) == GR_BATCH_OK && sum.batches == 1);
    if (rr.len > 0) {
        struct gr_batch_info bi;
        CHECK(gr_batch_parse_header(rr.data, rr.len, &bi) == GR_BATCH_OK);
        CHECK(gr_batch_info_compression(&bi) == GR_CODEC_GZIP && bi.ProducerId == 7 && bi.BaseSequence == 10 &&
              bi.PartitionLeaderEpoch == 4 && bi.RecordCount == 5);
    }
    free(rr.data);
    gr_plog_close(log);
    /* a follower stores the leader's batch as it is (here lz4 into a gzip-configured log) */
    snprintf(dir, sizeof dir, "%s/f-0", g_root);
    CHECK(gr_plog_open_dir(dir, &cfg, 0, &log) == 0);
    size_t llen;
    uint8_t *lz = in_codec(plain, plen, GR_CODEC_LZ4, &llen);
    struct gr_append_info info;
    CHECK(gr_plog_append_as_follower(log, lz, llen, &info) == 0);
    CHECK(gr_plog_read(log, 0, 1 << 20, -1, true, &rr) == 0);
    CHECK(rr.len == llen && memcmp(rr.data, lz, llen) == 0);
    free(rr.data);
    free(lz);
    gr_plog_close(log);
    free(plain);
}

int main(void) {
    gr_log_set_level(GR_LOG_ERROR);
    snprintf(g_root, sizeof g_root, "/tmp/gr-recompress-XXXXXX");
    if (!mkdtemp(g_root)) return 1;
    test_parse();
    test_all_pairs();
    test_mixed();
    test_corrupt();
    test_rebuild_offsets();
    test_log();
    nftw(g_root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    if (test_failures)
        fprintf(stderr, "test_recompression: %d failures\n", test_failures);
    else
        printf("test_recompression: ok\n");
    return test_failures ? 1 : 0;
}
