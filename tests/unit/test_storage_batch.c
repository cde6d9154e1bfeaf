/* RecordBatch v2: builder layout, validation errors, in-place rewrites, iteration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/kerr.h"
#include "storage/batch.h"
#include "support/check.h"

static uint8_t *build_n(int n, int64_t ts0, size_t *len) {
    struct gr_batch_rec recs[64];
    char keys[64][16], vals[64][32];
    struct gr_batch_rec_header hdr = {"h", 1, "hv", 2};
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof keys[i], "key%d", i);
        snprintf(vals[i], sizeof vals[i], "value-%d", i);
        recs[i] = (struct gr_batch_rec){keys[i], (int32_t)strlen(keys[i]), vals[i], (int32_t)strlen(vals[i]),
                                        (i % 2) ? &hdr : NULL, (i % 2) ? 1 : 0, ts0 + i * 10};
    }
    return gr_batch_build(recs, n, NULL, len);
}

static void test_layout(void) {
    struct gr_batch_rec r = {"k", 1, "v", 1, NULL, 0, 1000};
    size_t len;
    uint8_t *b = gr_batch_build(&r, 1, NULL, &len);
    CHECK(len == 70);
    static const uint8_t records[] = {0x10, 0x00, 0x00, 0x00, 0x02, 'k', 0x02, 'v', 0x00};
    CHECK(memcmp(b + 61, records, sizeof records) == 0);
    CHECK(b[8] == 0 && b[9] == 0 && b[10] == 0 && b[11] == 58); /* batchLength */
    CHECK(b[16] == 2);
    struct gr_batch_info bi;
    CHECK(gr_batch_validate_one(b, len, GR_BATCH_V_CLIENT, &bi) == GR_BATCH_OK);
    CHECK(bi.RecordCount == 1 && bi.LastOffsetDelta == 0 && bi.BaseTimestamp == 1000 && bi.MaxTimestamp == 1000);
    CHECK(bi.ProducerId == -1 && bi.ProducerEpoch == -1 && bi.BaseSequence == -1 && bi.PartitionLeaderEpoch == -1);
    uint32_t crc = gr_crc32c(0, b + 21, len - 21);
    CHECK(bi.Crc == crc);
    free(b);
}

static void test_validate_errors(void) {
    size_t len;
    uint8_t *b = build_n(5, 5000, &len);
    struct gr_batch_info bi;
    CHECK(gr_batch_validate_one(b, len, GR_BATCH_V_CLIENT, &bi) == GR_BATCH_OK);
    CHECK(bi.RecordCount == 5 && bi.LastOffsetDelta == 4 && bi.MaxTimestamp == 5040);

    /* Rewriting baseOffset / partitionLeaderEpoch keeps the CRC valid. */
    gr_batch_set_base_offset(b, 1234567);
    gr_batch_set_partition_leader_epoch(b, 42);
    CHECK(gr_batch_validate_one(b, len, 0, &bi) == GR_BATCH_OK);
    CHECK(bi.BaseOffset == 1234567 && bi.PartitionLeaderEpoch == 42);
    CHECK(gr_batch_last_offset(b) == 1234571);
    CHECK(gr_batch_record_count(b) == 5);

    /* Records iterate with the right contents. */
    struct gr_batch_rec_iter it;
    struct gr_batch_rec_view rv;
    CHECK(gr_batch_rec_iter_init(&it, b, len) == GR_BATCH_OK);
    int n = 0;
    while (gr_batch_rec_iter_next(&it, &rv)) {
        char k[16];
        snprintf(k, sizeof k, "key%d", n);
        CHECK(rv.KeyLength == (int32_t)strlen(k) && memcmp(rv.Key, k, strlen(k)) == 0);
        CHECK(rv.Offset == 1234567 + n && rv.Timestamp == 5000 + n * 10);
        CHECK(rv.HeaderCount == (n % 2));
        if (rv.HeaderCount) {
            size_t pos = 0;
            struct gr_batch_rec_header_view hv;
            CHECK(gr_batch_rec_header_next(&rv, &pos, &hv) == 1);
            CHECK(hv.KeyLength == 1 && hv.Key[0] == 'h' && hv.ValueLength == 2 && memcmp(hv.Value, "hv", 2) == 0);
            CHECK(gr_batch_rec_header_next(&rv, &pos, &hv) == 0);
        }
        n++;
    }
    CHECK(n == 5 && it.err == GR_BATCH_OK);

    /* Truncation anywhere is ETRUNCATED. */
    for (size_t cut = 0; cut < len; cut++) CHECK(gr_batch_validate_one(b, cut, 0, &bi) == GR_BATCH_ETRUNCATED);

    /* A flipped bit in the CRC-covered area is a CRC error; in baseOffset it is not. */
    for (size_t pos = 21; pos < len; pos += 7) {
        b[pos] ^= 0x10;
        CHECK(gr_batch_validate_one(b, len, 0, &bi) == GR_BATCH_ECRC);
        b[pos] ^= 0x10;
    }
    /* Old and unknown magic. */
    b[16] = 1;
    CHECK(gr_batch_validate_one(b, len, 0, &bi) == GR_BATCH_EOLDMAGIC);
    CHECK(gr_batch_err_kerr(GR_BATCH_EOLDMAGIC) == GR_KERR_UNSUPPORTED_FOR_MESSAGE_FORMAT);
    b[16] = 0;
    CHECK(gr_batch_validate_one(b, len, 0, &bi) == GR_BATCH_EOLDMAGIC);
    b[16] = 3;
    CHECK(gr_batch_validate_one(b, len, 0, &bi) == GR_BATCH_EMAGIC);
    CHECK(gr_batch_err_kerr(GR_BATCH_EMAGIC) == GR_KERR_CORRUPT_MESSAGE);
    b[16] = 2;
    /* Too small batchLength. */
    uint8_t save = b[11];
    b[8] = b[9] = b[10] = 0;
    b[11] = 10;
    CHECK(gr_batch_validate_one(b, len, 0, &bi) == GR_BATCH_ELENGTH);
    b[11] = save;
    CHECK(gr_batch_validate_one(b, len, 0, &bi) == GR_BATCH_OK);

    /* lastOffsetDelta inconsistent with recordCount (CRC fixed up). */
    b[26] = 7;
    gr_batch_update_crc(b, len);
    CHECK(gr_batch_validate_one(b, len, GR_BATCH_V_CLIENT, &bi) == GR_BATCH_ECOUNT);
    CHECK(gr_batch_err_kerr(GR_BATCH_ECOUNT) == GR_KERR_INVALID_RECORD);
    b[26] = 4;
    /* recordCount larger than the records present. */
    b[60] = 6;
    b[26] = 5;
    gr_batch_update_crc(b, len);
    CHECK(gr_batch_validate_one(b, len, GR_BATCH_V_CLIENT, &bi) == GR_BATCH_ERECORDS);
    CHECK(gr_batch_validate_one(b, len, GR_BATCH_V_CLIENT | GR_BATCH_V_NO_RECORDS, &bi) == GR_BATCH_OK);
    b[60] = 5;
    b[26] = 4;
    /* A record length varint that lies. */
    b[61] += 2;
    gr_batch_update_crc(b, len);
    CHECK(gr_batch_validate_one(b, len, 0, &bi) == GR_BATCH_ERECORDS);
    b[61] -= 2;
    gr_batch_update_crc(b, len);
    CHECK(gr_batch_validate_one(b, len, GR_BATCH_V_CLIENT, &bi) == GR_BATCH_OK);
    /* Negative recordCount. */
    b[57] = 0xff;
    gr_batch_update_crc(b, len);
    CHECK(gr_batch_validate_one(b, len, 0, &bi) == GR_BATCH_ECOUNT);
    b[57] = 0;
    gr_batch_update_crc(b, len);

    /* Compressed batches are not record-parsed: garbage records with a good CRC pass. */
    b[22] = 1; /* gzip */
    memset(b + 61, 0xAB, len - 61);
    gr_batch_update_crc(b, len);
    CHECK(gr_batch_validate_one(b, len, GR_BATCH_V_CLIENT, &bi) == GR_BATCH_OK);
    CHECK(gr_batch_info_compression(&bi) == 1);
    CHECK(gr_batch_rec_iter_init(&it, b, len) == GR_BATCH_ERECORDS);
    /* Control batch from a client. */
    b[22] = GR_BATCH_ATTR_CONTROL;
    gr_batch_update_crc(b, len);
    CHECK(gr_batch_validate_one(b, len, GR_BATCH_V_CLIENT | GR_BATCH_V_NO_RECORDS, &bi) == GR_BATCH_ECONTROL);
    free(b);
}

static void test_multi(void) {
    size_t l1, l2, l3;
    uint8_t *a = build_n(3, 100, &l1), *b = build_n(1, 200, &l2), *c = build_n(7, 50, &l3);
    size_t len = l1 + l2 + l3;
    uint8_t *buf = malloc(len + 5);
    memcpy(buf, a, l1);
    memcpy(buf + l1, b, l2);
    memcpy(buf + l1 + l2, c, l3);
    struct gr_batch_summary s;
    CHECK(gr_batch_validate_all(buf, len, GR_BATCH_V_CLIENT, &s) == GR_BATCH_OK);
    CHECK(s.batches == 3 && s.records == 11 && s.max_timestamp == 200 && s.max_batch_size == l3);
    CHECK(!s.offsets_contiguous); /* all three start at 0 */
    CHECK(gr_batch_count_records(buf, len) == 11);
    /* Assign offsets like a leader would: now contiguous. */
    gr_batch_set_base_offset(buf, 10);
    gr_batch_set_base_offset(buf + l1, 13);
    gr_batch_set_base_offset(buf + l1 + l2, 14);
    CHECK(gr_batch_validate_all(buf, len, 0, &s) == GR_BATCH_OK);
    CHECK(s.offsets_contiguous && s.first_offset == 10 && s.last_offset == 20 && s.offset_of_max_timestamp == 13);
    /* Trailing partial batch. */
    memcpy(buf + len, "\0\0\0\0\0", 5);
    CHECK(gr_batch_validate_all(buf, len + 5, 0, &s) == GR_BATCH_ETRUNCATED && s.bad_pos == len);
    CHECK(gr_batch_validate_all(buf, 0, 0, &s) == GR_BATCH_ETRUNCATED);
    /* Corrupt the middle batch. */
    buf[l1 + 30] ^= 1;
    CHECK(gr_batch_validate_all(buf, len, 0, &s) == GR_BATCH_ECRC && s.bad_pos == l1 && s.batches == 1);
    /* Iteration ignores CRC but stops at a partial tail. */
    struct gr_batch_iter it;
    struct gr_batch_info bi;
    const uint8_t *p;
    int n = 0;
    gr_batch_iter_init(&it, buf, len + 3);
    while (gr_batch_iter_next(&it, &bi, &p)) n++;
    CHECK(n == 3 && it.err == GR_BATCH_ETRUNCATED && it.pos == len);
    free(a);
    free(b);
    free(c);
    free(buf);
}

static void test_null_and_empty(void) {
    struct gr_batch_rec r = {NULL, -1, NULL, -1, NULL, 0, 7};
    size_t len;
    uint8_t *b = gr_batch_build(&r, 1, NULL, &len);
    struct gr_batch_rec_iter it;
    struct gr_batch_rec_view rv;
    CHECK(gr_batch_validate_one(b, len, GR_BATCH_V_CLIENT, NULL) == GR_BATCH_OK);
    CHECK(gr_batch_rec_iter_init(&it, b, len) == GR_BATCH_OK);
    CHECK(gr_batch_rec_iter_next(&it, &rv) == 1 && rv.Key == NULL && rv.KeyLength == -1 && rv.Value == NULL);
    free(b);
    b = gr_batch_build(NULL, 0, NULL, &len);
    CHECK(len == 61);
    CHECK(gr_batch_validate_one(b, len, 0, NULL) == GR_BATCH_OK);
    CHECK(gr_batch_validate_one(b, len, GR_BATCH_V_CLIENT, NULL) == GR_BATCH_ECOUNT);
    free(b);
}

int main(void) {
    test_layout();
    test_validate_errors();
    test_multi();
    test_null_and_empty();
    if (test_failures) fprintf(stderr, "test_storage_batch: %d failures\n", test_failures);
    else printf("test_storage_batch: ok\n");
    return test_failures ? 1 : 0;
}
