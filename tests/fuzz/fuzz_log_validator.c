/* libFuzzer: the log validator (storage/log_validator.h) on hostile batches of every codec.
 *
 * Input: byte 0 picks the codec (bits 0-2, 0-4), whether the rest is compressed here first
 * (bit 3: so the fuzzer reaches record parsing inside every codec) or used as the compressed
 * bytes as they are (garbage streams), and the validator's options (bits 4-7); bytes 1-4 are
 * recordCount; the rest is the records section. A v2 batch header is built around it with a
 * correct CRC. Checks, besides never crashing or leaking:
 *  - an accepted batch reads again whole, record for record, with the same offsets, and skipping;
 *  - its errors map to the Kafka codes log_validator.h lists;
 *  - down-conversion of it never crashes and, when it converts, yields messages that up-convert;
 *  - legacy up-conversion of the raw input never crashes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/be.h"
#include "common/kerr.h"
#include "storage/batch.h"
#include "storage/compression.h"
#include "storage/legacy_records.h"
#include "storage/log_validator.h"
#include "storage/recompression.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* small enough that bombs are found quickly, large enough for real batches */
#define FUZZ_MAX_INFLATED ((size_t)1 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 5) return 0;
    int codec = data[0] & 7;
    if (codec > 4) codec = 4;
    bool compress_here = (data[0] & 8) != 0;
    int32_t count = (int32_t)gr_be32(data + 1);
    const uint8_t *recs = data + 5;
    size_t rlen = size - 5;
    uint8_t *z = NULL;
    size_t zl = 0;
    if (codec != 0 && compress_here) {
        if (gr_compress(codec, recs, rlen, &z, &zl) != 0) return 0;
        recs = z, rlen = zl;
    }
    size_t blen = GR_BATCH_HEADER_SIZE + rlen;
    uint8_t *b = malloc(blen);
    memset(b, 0, GR_BATCH_HEADER_SIZE);
    gr_put_be32(b + GR_BATCH_OFF_LENGTH, (uint32_t)(blen - GR_BATCH_LOG_OVERHEAD));
    gr_put_be32(b + GR_BATCH_OFF_LEADER_EPOCH, (uint32_t)-1);
    b[GR_BATCH_OFF_MAGIC] = 2;
    gr_put_be16(b + GR_BATCH_OFF_ATTRIBUTES, (uint16_t)(codec | ((data[0] & 0x10) ? GR_BATCH_ATTR_LOG_APPEND_TIME : 0)));
    gr_put_be32(b + GR_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)(count > 0 ? count - 1 : 0));
    gr_put_be64(b + GR_BATCH_OFF_BASE_TIMESTAMP, 1000);
    gr_put_be64(b + GR_BATCH_OFF_MAX_TIMESTAMP, 1000);
    gr_put_be64(b + GR_BATCH_OFF_PRODUCER_ID, (uint64_t)-1);
    gr_put_be16(b + GR_BATCH_OFF_PRODUCER_EPOCH, (uint16_t)-1);
    gr_put_be32(b + GR_BATCH_OFF_BASE_SEQUENCE, (uint32_t)-1);
    gr_put_be32(b + GR_BATCH_OFF_RECORD_COUNT, (uint32_t)count);
    memcpy(b + GR_BATCH_HEADER_SIZE, recs, rlen);
    gr_batch_update_crc(b, blen);
    free(z);

    struct gr_batch_info bi;
    if (gr_batch_validate_one(b, blen, GR_BATCH_V_CLIENT | GR_BATCH_V_NO_RECORDS, &bi) == GR_BATCH_OK) {
        struct gr_validator_config cfg = {.client = true,
                                          .compacted = (data[0] & 0x20) != 0,
                                          .log_append_time = (data[0] & 0x40) != 0,
                                          .max_diff_ms = (data[0] & 0x80) ? 100000 : INT64_MAX,
                                          .now_ms = 1000,
                                          .max_inflated = FUZZ_MAX_INFLATED};
        struct gr_validator_result res;
        int16_t e = gr_log_validate_batch(b, &bi, &cfg, &res);
        if (e != GR_KERR_NONE && e != GR_KERR_CORRUPT_MESSAGE && e != GR_KERR_INVALID_RECORD &&
            e != GR_KERR_INVALID_TIMESTAMP && e != GR_KERR_MESSAGE_TOO_LARGE && e != GR_KERR_UNKNOWN_SERVER_ERROR)
            abort();
        if (res.kept > GR_VALIDATOR_MAX_RECORD_ERRORS || res.kept > res.record_error_count) abort();
        bool structural_ok = e == GR_KERR_NONE || res.record_error_count > 0;
        if (structural_ok) {
            /* the same records again, whole and skipping alternately */
            struct gr_record_stream rs;
            struct gr_batch_rec_view r;
            int32_t n = 0;
            gr_record_stream_open(&rs, b, &bi, FUZZ_MAX_INFLATED, 0);
            while (gr_record_stream_next(&rs, &r, n % 3 ? GR_RECORD_WHOLE : GR_RECORD_SKIP_DATA) == 1) {
                if (!res.rebuild && r.OffsetDelta != n) abort();
                if (n % 3 && (!rs.raw || (r.KeyLength > 0 && !r.Key))) abort();
                n++;
            }
            /* a whole read may need a record bigger than the skipping read did: EINFLATE only */
            if ((rs.err != GR_BATCH_OK && rs.err != GR_BATCH_EINFLATE) || (rs.err == GR_BATCH_OK && n != bi.RecordCount))
                abort();
            gr_record_stream_close(&rs);
            /* inner offsets other than 0..n-1: the rebuilt batch is a valid client batch */
            if (res.rebuild) {
                uint8_t *rb = NULL;
                size_t rbl = 0;
                struct gr_batch_info ri;
                if (gr_batch_rebuild(b, &bi, GR_CODEC_NONE, &rb, &rbl) == GR_KERR_NONE &&
                    (gr_batch_validate_one(rb, rbl, GR_BATCH_V_CLIENT, &ri) != GR_BATCH_OK || ri.size != rbl))
                    abort();
                free(rb);
            }
            /* down-conversion, bounded, from the middle */
            uint8_t *leg;
            size_t ll;
            bool stopped;
            if (gr_v2_to_legacy(b, blen, 1, bi.RecordCount / 2, 1 << 16, 1 << 16, &leg, &ll, &stopped) == 0 && leg) {
                uint8_t *v2;
                size_t v2l;
                if (gr_legacy_to_v2(leg, ll, &v2, &v2l, NULL) != GR_KERR_NONE) abort();
                free(v2);
                free(leg);
            }
        }
    }
    free(b);
    /* the raw input as a legacy message set (snappy/lz4/gzip wrappers included) */
    uint8_t *v2;
    size_t v2l;
    if (gr_legacy_to_v2(data, size, &v2, &v2l, NULL) == GR_KERR_NONE) free(v2);
    return 0;
}
