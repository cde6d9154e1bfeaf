/* Old message formats (storage/legacy_records.h): magic 0 and 1 message sets up-converted to
 * one v2 batch (keys, values, null fields, timestamps), the errors Kafka gives (CRC, truncation,
 * mixed magic, compression), and v2 batches down-converted to magic 0/1 with absolute offsets,
 * timestamps, LogAppendTime, control batches skipped and compressed batches stopping the
 * conversion; byte layout checked against a hand-built message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "storage/batch.h"
#include "storage/legacy_records.h"
#include "support/check.h"


static size_t put_msg(uint8_t *p, int64_t offset, int magic, int attr, int64_t ts, const char *key, const char *val) {
    uint8_t body[256];
    size_t n = 0;
    body[n++] = (uint8_t)magic;
    body[n++] = (uint8_t)attr;
    if (magic == 1)
        for (int i = 7; i >= 0; i--) body[n++] = (uint8_t)((uint64_t)ts >> (8 * i));
    const char *f[2] = {key, val};
    for (int k = 0; k < 2; k++) {
        int32_t l = f[k] ? (int32_t)strlen(f[k]) : -1;
        for (int i = 3; i >= 0; i--) body[n++] = (uint8_t)((uint32_t)l >> (8 * i));
        if (l > 0) memcpy(body + n, f[k], (size_t)l), n += (size_t)l;
    }
    uint32_t crc = gr_crc32_ieee(body, n);
    size_t at = 0;
    for (int i = 7; i >= 0; i--) p[at++] = (uint8_t)((uint64_t)offset >> (8 * i));
    uint32_t size = (uint32_t)(n + 4);
    for (int i = 3; i >= 0; i--) p[at++] = (uint8_t)(size >> (8 * i));
    for (int i = 3; i >= 0; i--) p[at++] = (uint8_t)(crc >> (8 * i));
    memcpy(p + at, body, n);
    return at + n;
}

static void test_crc32(void) {
    CHECK(gr_crc32_ieee((const uint8_t *)"123456789", 9) == 0xCBF43926u);
}

static void test_up_convert(void) {
    uint8_t set[1024];
    size_t n = 0;
    n += put_msg(set + n, 0, 1, 0, 1000, "k0", "v0");
    n += put_msg(set + n, 1, 1, 0, 1001, NULL, "v1");
    n += put_msg(set + n, 2, 1, 0, 1002, "k2", NULL);
    CHECK(gr_records_magic(set, n) == 1);
    uint8_t *b;
    size_t bl;
    CHECK_KERR(gr_legacy_to_v2(set, n, &b, &bl, NULL), GR_KERR_NONE);
    struct gr_batch_rec_iter it;
    CHECK(gr_batch_rec_iter_init(&it, b, bl) == GR_BATCH_OK);
    CHECK(it.info.Magic == 2 && it.info.RecordCount == 3 && it.info.ProducerId == -1);
    struct gr_batch_rec_view r;
    int i = 0;
    while (gr_batch_rec_iter_next(&it, &r) == 1) {
        CHECK(r.OffsetDelta == i && r.Timestamp == 1000 + i);
        if (i == 0) CHECK(r.KeyLength == 2 && memcmp(r.Key, "k0", 2) == 0 && memcmp(r.Value, "v0", 2) == 0);
        if (i == 1) CHECK(r.KeyLength == -1 && r.ValueLength == 2);
        if (i == 2) CHECK(r.ValueLength == -1);
        i++;
    }
    CHECK(i == 3);
    free(b);
    /* magic 0: no timestamps */
    n = put_msg(set, 0, 0, 0, 0, "a", "b");
    CHECK_KERR(gr_legacy_to_v2(set, n, &b, &bl, NULL), GR_KERR_NONE);
    CHECK(gr_batch_rec_iter_init(&it, b, bl) == GR_BATCH_OK && gr_batch_rec_iter_next(&it, &r) == 1);
    CHECK(r.Timestamp == -1);
    free(b);
    /* errors */
    n = put_msg(set, 0, 1, 0, 5, "k", "v");
    set[n - 1] ^= 1;
    CHECK_KERR(gr_legacy_to_v2(set, n, &b, &bl, NULL), GR_KERR_CORRUPT_MESSAGE); /* CRC */
    n = put_msg(set, 0, 1, 0, 5, "k", "v");
    CHECK_KERR(gr_legacy_to_v2(set, n - 1, &b, &bl, NULL), GR_KERR_CORRUPT_MESSAGE); /* truncated */
    size_t m = put_msg(set, 0, 1, 0, 5, "k", "v");
    m += put_msg(set + m, 1, 0, 0, 0, "k", "v");
    CHECK_KERR(gr_legacy_to_v2(set, m, &b, &bl, NULL), GR_KERR_CORRUPT_MESSAGE); /* mixed magic */
    n = put_msg(set, 0, 1, 4 /* zstd: needs magic 2 */, 5, NULL, "zz");
    CHECK_KERR(gr_legacy_to_v2(set, n, &b, &bl, NULL), GR_KERR_UNSUPPORTED_COMPRESSION_TYPE);
    for (int codec = 1; codec <= 3; codec++) { /* gzip, snappy, lz4: not a stream of the codec */
        n = put_msg(set, 0, 1, codec, 5, NULL, "zz");
        CHECK_KERR(gr_legacy_to_v2(set, n, &b, &bl, NULL), GR_KERR_CORRUPT_MESSAGE);
    }
    CHECK_KERR(gr_legacy_to_v2(set, 0, &b, &bl, NULL), GR_KERR_CORRUPT_MESSAGE); /* empty */
}

static void test_down_convert(void) {
    struct gr_batch_rec recs[] = {{.key = "k", .key_len = 1, .value = "v0", .value_len = 2, .timestamp = 7000},
                                  {.key = NULL, .key_len = -1, .value = "v1", .value_len = 2, .timestamp = 7001}};
    struct gr_batch_build_opts o = GR_BATCH_BUILD_OPTS_INIT;
    o.base_offset = 40;
    size_t l1, l2, l3;
    uint8_t *b1 = gr_batch_build(recs, 2, &o, &l1);
    o.base_offset = 42;
    o.attributes = GR_BATCH_ATTR_CONTROL | GR_BATCH_ATTR_TRANSACTIONAL;
    uint8_t *b2 = gr_batch_build(recs, 1, &o, &l2); /* a control batch: skipped */
    o.base_offset = 43;
    o.attributes = 0;
    uint8_t *b3 = gr_batch_build(recs + 1, 1, &o, &l3);
    uint8_t *all = malloc(l1 + l2 + l3);
    memcpy(all, b1, l1);
    memcpy(all + l1, b2, l2);
    memcpy(all + l1 + l2, b3, l3);
    size_t len;
    bool compressed;
    uint8_t *leg;
    CHECK(gr_v2_to_legacy(all, l1 + l2 + l3, 1, -1, SIZE_MAX, SIZE_MAX, &leg, &len, &compressed) == 0);
    CHECK(leg && !compressed);
    uint8_t want[256];
    size_t wl = put_msg(want, 40, 1, 0, 7000, "k", "v0");
    wl += put_msg(want + wl, 41, 1, 0, 7001, NULL, "v1");
    wl += put_msg(want + wl, 43, 1, 0, 7001, NULL, "v1");
    CHECK(len == wl && memcmp(leg, want, wl) == 0);
    free(leg);
    gr_v2_to_legacy(all, l1 + l2 + l3 - 1, 0, -1, SIZE_MAX, SIZE_MAX, &leg, &len,
                    &compressed); /* a partial last batch */
    wl = put_msg(want, 40, 0, 0, 0, "k", "v0");
    wl += put_msg(want + wl, 41, 0, 0, 0, NULL, "v1");
    CHECK(len == wl && memcmp(leg, want, wl) == 0);
    free(leg);
    /* LogAppendTime batches carry the batch's max timestamp and the attribute bit */
    o.base_offset = 0;
    o.attributes = GR_BATCH_ATTR_LOG_APPEND_TIME;
    uint8_t *b4 = gr_batch_build(recs, 1, &o, &l1);
    gr_v2_to_legacy(b4, l1, 1, -1, SIZE_MAX, SIZE_MAX, &leg, &len, &compressed);
    CHECK(leg && leg[17] == 0x08);
    free(leg);
    /* a compressed batch stops the conversion */
    b4[21 + 1] |= 1; /* attributes low byte: gzip */
    gr_v2_to_legacy(b4, l1, 1, -1, SIZE_MAX, SIZE_MAX, &leg, &len, &compressed);
    CHECK(!leg && len == 0 && compressed);
    free(b1);
    free(b2);
    free(b3);
    free(b4);
    free(all);
}

#ifdef GR_HAVE_ZLIB
#include <zlib.h>

static size_t gzip(const uint8_t *in, size_t len, uint8_t *out, size_t cap) {
    z_stream z;
    memset(&z, 0, sizeof z);
    deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    deflate(&z, Z_FINISH);
    size_t n = cap - z.avail_out;
    deflateEnd(&z);
    return n;
}

/* gzip wrapper messages (librdkafka/Java 0.10 producers with compression.type=gzip) and gzip v2
 * batches read by old consumers. */
static void test_gzip(void) {
    uint8_t inner[512], wrapped[512], set[1024];
    size_t il = put_msg(inner, 0, 1, 0, 500, "a", "x");
    il += put_msg(inner + il, 1, 1, 0, 501, "b", "y");
    size_t wl = gzip(inner, il, wrapped, sizeof wrapped);
    /* put_msg takes C strings: build the wrapper by hand around the binary value */
    uint8_t body[600];
    size_t n = 0;
    body[n++] = 1;
    body[n++] = 1; /* gzip */
    for (int i = 7; i >= 0; i--) body[n++] = (uint8_t)((uint64_t)501 >> (8 * i));
    for (int i = 0; i < 4; i++) body[n++] = 0xff; /* null key */
    for (int i = 3; i >= 0; i--) body[n++] = (uint8_t)((uint32_t)wl >> (8 * i));
    memcpy(body + n, wrapped, wl);
    n += wl;
    size_t s = 0;
    for (int i = 0; i < 7; i++) set[s++] = 0;
    set[s++] = 1; /* offset 1: the last inner one */
    for (int i = 3; i >= 0; i--) set[s++] = (uint8_t)((uint32_t)(n + 4) >> (8 * i));
    uint32_t crc = gr_crc32_ieee(body, n);
    for (int i = 3; i >= 0; i--) set[s++] = (uint8_t)(crc >> (8 * i));
    memcpy(set + s, body, n);
    s += n;
    uint8_t *b;
    size_t bl;
    int codec = -1;
    CHECK_KERR(gr_legacy_to_v2(set, s, &b, &bl, &codec), GR_KERR_NONE);
    CHECK(codec == 1); /* the caller stores the batch gzip'd, as the wrapper was */
    struct gr_batch_rec_iter it;
    struct gr_batch_rec_view r;
    CHECK(gr_batch_rec_iter_init(&it, b, bl) == GR_BATCH_OK && it.info.RecordCount == 2);
    CHECK(gr_batch_rec_iter_next(&it, &r) == 1 && r.Timestamp == 500 && memcmp(r.Key, "a", 1) == 0);
    CHECK(gr_batch_rec_iter_next(&it, &r) == 1 && r.Timestamp == 501 && memcmp(r.Value, "y", 1) == 0);

    /* the same records as a gzip v2 batch, down-converted for a v2 (magic 1) Fetch */
    size_t rl = bl - GR_BATCH_HEADER_SIZE;
    uint8_t *gz = malloc(GR_BATCH_HEADER_SIZE + rl + 64);
    memcpy(gz, b, GR_BATCH_HEADER_SIZE);
    size_t zl = gzip(b + GR_BATCH_HEADER_SIZE, rl, gz + GR_BATCH_HEADER_SIZE, rl + 64);
    uint32_t blen = (uint32_t)(GR_BATCH_HEADER_SIZE - 12 + zl);
    for (int i = 3; i >= 0; i--) gz[8 + 3 - i] = (uint8_t)(blen >> (8 * i));
    gz[22] |= 1;
    gr_batch_update_crc(gz, GR_BATCH_HEADER_SIZE + zl);
    size_t len;
    bool compressed;
    uint8_t *leg;
    CHECK(gr_v2_to_legacy(gz, GR_BATCH_HEADER_SIZE + zl, 1, -1, SIZE_MAX, SIZE_MAX, &leg, &len, &compressed) == 0);
    uint8_t want[256];
    size_t want_len = put_msg(want, 0, 1, 0, 500, "a", "x");
    want_len += put_msg(want + want_len, 1, 1, 0, 501, "b", "y");
    CHECK(leg && !compressed && len == want_len && memcmp(leg, want, len) == 0);
    free(leg);
    free(gz);
    free(b);
}

/* A gzip bomb (a 16 KB batch of 16 records of 1 MiB zeros) converts only what the limits allow:
 * max_bytes stops before the message that would pass it; the first message passes max_bytes up
 * to first_max; nothing when even the first does not fit. */
static void test_down_convert_limits(void) {
    enum { NREC = 16, VAL = 1 << 20 };
    uint8_t *zeros = calloc(1, VAL);
    struct gr_batch_rec recs[NREC];
    for (int i = 0; i < NREC; i++) recs[i] = (struct gr_batch_rec){.key_len = -1, .value = zeros, .value_len = VAL};
    size_t bl;
    uint8_t *b = gr_batch_build(recs, NREC, NULL, &bl);
    size_t rl = bl - GR_BATCH_HEADER_SIZE;
    uint8_t *gz = malloc(GR_BATCH_HEADER_SIZE + rl / 100 + 4096);
    memcpy(gz, b, GR_BATCH_HEADER_SIZE);
    size_t zl = gzip(b + GR_BATCH_HEADER_SIZE, rl, gz + GR_BATCH_HEADER_SIZE, rl / 100 + 4096);
    uint32_t blen = (uint32_t)(GR_BATCH_HEADER_SIZE - 12 + zl);
    for (int i = 3; i >= 0; i--) gz[8 + 3 - i] = (uint8_t)(blen >> (8 * i));
    gz[22] |= 1;
    gr_batch_update_crc(gz, GR_BATCH_HEADER_SIZE + zl);
    CHECK(zl < 64 * 1024);
    size_t msg = 12 + 4 + 2 + 8 + 8 + VAL, len;
    bool compressed;
    uint8_t *leg;
    /* 2 MiB: one message (two would be 2 MiB + 68 bytes) */
    CHECK(gr_v2_to_legacy(gz, GR_BATCH_HEADER_SIZE + zl, 1, -1, 2u << 20, 2u << 20, &leg, &len, &compressed) == 0);
    CHECK(leg && len == msg && !compressed);
    free(leg);
    CHECK(gr_v2_to_legacy(gz, GR_BATCH_HEADER_SIZE + zl, 1, -1, 3 * msg, 3 * msg, &leg, &len, &compressed) == 0);
    CHECK(leg && len == 3 * msg);
    free(leg);
    /* too small for one message: nothing, unless the first may pass (Kafka's at least one) */
    CHECK(gr_v2_to_legacy(gz, GR_BATCH_HEADER_SIZE + zl, 1, -1, 1000, 1000, &leg, &len, &compressed) == 0);
    CHECK(!leg && len == 0 && !compressed);
    CHECK(gr_v2_to_legacy(gz, GR_BATCH_HEADER_SIZE + zl, 1, -1, 1000, SIZE_MAX, &leg, &len, &compressed) == 0);
    CHECK(leg && len == msg);
    free(leg);
    /* unbounded: all 16 MiB (as the old code always did) */
    CHECK(gr_v2_to_legacy(gz, GR_BATCH_HEADER_SIZE + zl, 0, -1, SIZE_MAX, SIZE_MAX, &leg, &len, &compressed) == 0);
    CHECK(leg && len == NREC * (msg - 8));
    free(leg);
    free(gz);
    free(b);
    free(zeros);
}

/* A message set of n gzip wrappers, each a magic 1 message of `vlen` zero bytes; *len its size. */
static uint8_t *wrapper_set(int n, size_t vlen, size_t *len) {
    size_t ml = 12 + 4 + 2 + 8 + 8 + vlen;
    uint8_t *inner = calloc(1, ml);
    uint8_t *body = inner + 12 + 4;
    body[0] = 1; /* magic */
    memset(body + 2 + 8, 0xff, 4); /* null key */
    for (int i = 3; i >= 0; i--) body[2 + 8 + 4 + 3 - i] = (uint8_t)((uint32_t)vlen >> (8 * i));
    for (int i = 3; i >= 0; i--) inner[8 + 3 - i] = (uint8_t)((uint32_t)(ml - 12) >> (8 * i));
    uint32_t crc = gr_crc32_ieee(body, ml - 16);
    for (int i = 3; i >= 0; i--) inner[12 + 3 - i] = (uint8_t)(crc >> (8 * i));
    size_t zcap = ml / 200 + 4096;
    uint8_t *wz = malloc(zcap);
    size_t wl = gzip(inner, ml, wz, zcap);
    free(inner);
    size_t one = 12 + 4 + 2 + 8 + 4 + 4 + wl;
    uint8_t *set = calloc((size_t)n, one);
    for (int k = 0; k < n; k++) {
        uint8_t *m = set + (size_t)k * one, *b = m + 16;
        m[7] = (uint8_t)k;
        for (int i = 3; i >= 0; i--) m[8 + 3 - i] = (uint8_t)((uint32_t)(one - 12) >> (8 * i));
        b[0] = 1, b[1] = 1; /* magic 1, gzip */
        memset(b + 10, 0xff, 4);
        for (int i = 3; i >= 0; i--) b[14 + 3 - i] = (uint8_t)((uint32_t)wl >> (8 * i));
        memcpy(b + 18, wz, wl);
        uint32_t c = gr_crc32_ieee(b, 18 + wl);
        for (int i = 3; i >= 0; i--) m[12 + 3 - i] = (uint8_t)(c >> (8 * i));
    }
    free(wz);
    *len = (size_t)n * one;
    return set;
}

/* Up-conversion inflates at most 64 MiB per message set, whatever the number of wrappers: each
 * was bounded alone, and a 2 MB set of 40 wrappers of 40 MiB zeros made the broker hold 1.6 GB
 * of inflated values and build a 1.6 GB batch. */
static void test_up_convert_total_inflation_bounded(void) {
    size_t len;
    uint8_t *b, *set = wrapper_set(2, 30u << 20, &len);
    size_t bl;
    CHECK(len < 128 * 1024);
    CHECK_KERR(gr_legacy_to_v2(set, len, &b, &bl, NULL), GR_KERR_NONE); /* 60 MiB */
    free(b);
    free(set);
    set = wrapper_set(3, 30u << 20, &len);
    CHECK_KERR(gr_legacy_to_v2(set, len, &b, &bl, NULL), GR_KERR_MESSAGE_TOO_LARGE); /* 90 MiB */
    CHECK(b == NULL);
    free(set);
    set = wrapper_set(1, 65u << 20, &len); /* one bomb alone: corrupt, as before */
    CHECK_KERR(gr_legacy_to_v2(set, len, &b, &bl, NULL), GR_KERR_CORRUPT_MESSAGE);
    free(set);
}
#endif

int main(void) {
    test_crc32();
    test_up_convert();
    test_down_convert();
#ifdef GR_HAVE_ZLIB
    test_gzip();
    test_down_convert_limits();
    test_up_convert_total_inflation_bounded();
#endif
    if (test_failures) {
        fprintf(stderr, "%d check(s) failed\n", test_failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
