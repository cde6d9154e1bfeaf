/* libFuzzer: RecordBatch validation, iteration and record parsing on arbitrary bytes; client
 * batches that validate are also converted to compression.type targets (storage/recompression.h):
 * the result, when accepted, must validate as client batches with the same record count. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "storage/batch.h"
#include "storage/recompression.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(uint8_t *buf, size_t size) {
    struct gr_batch_summary s;
    int err_client = gr_batch_validate_all(buf, size, GR_BATCH_V_CLIENT, &s);
    int err = gr_batch_validate_all(buf, size, 0, &s);
    if (err_client == GR_BATCH_OK) {
        static const int targets[] = {0, 3, 4}; /* uncompressed, lz4, zstd: the fast codecs */
        for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
            uint8_t *out;
            size_t olen;
            struct gr_batch_summary cs;
            if (gr_recompress_batches(buf, size, targets[i], &out, &olen) != 0 || !out) continue;
            if (gr_batch_validate_all(out, olen, GR_BATCH_V_CLIENT, &cs) != GR_BATCH_OK || cs.records != s.records ||
                cs.batches != s.batches)
                abort();
            free(out);
        }
    }
    (void)gr_batch_err_kerr(err);
    (void)gr_batch_strerror(err);
    if (err == GR_BATCH_OK) {
        /* Every batch must iterate, and uncompressed ones must yield exactly recordCount records. */
        struct gr_batch_iter it;
        struct gr_batch_info bi;
        const uint8_t *b;
        int64_t total = 0;
        gr_batch_iter_init(&it, buf, size);
        while (gr_batch_iter_next(&it, &bi, &b)) {
            total += bi.RecordCount;
            if (gr_batch_info_compression(&bi) != 0) continue;
            struct gr_batch_rec_iter ri;
            struct gr_batch_rec_view rv;
            if (gr_batch_rec_iter_init(&ri, b, bi.size) != GR_BATCH_OK) abort();
            int32_t n = 0;
            while (gr_batch_rec_iter_next(&ri, &rv)) {
                size_t pos = 0;
                struct gr_batch_rec_header_view hv;
                int32_t h = 0;
                int hr;
                while ((hr = gr_batch_rec_header_next(&rv, &pos, &hv)) == 1) h++;
                if (hr < 0 || h != rv.HeaderCount) abort();
                n++;
            }
            if (ri.err != GR_BATCH_OK || n != bi.RecordCount) abort();
        }
        if (it.err != GR_BATCH_OK || it.pos != size || total != s.records) abort();
    } else {
        /* Iteration of invalid input must still terminate safely. */
        struct gr_batch_iter it;
        struct gr_batch_info bi;
        const uint8_t *b;
        gr_batch_iter_init(&it, buf, size);
        while (gr_batch_iter_next(&it, &bi, &b)) {
            struct gr_batch_rec_iter ri;
            struct gr_batch_rec_view rv;
            if (gr_batch_rec_iter_init(&ri, b, bi.size) == GR_BATCH_OK)
                while (gr_batch_rec_iter_next(&ri, &rv)) {
                }
        }
        (void)gr_batch_count_records(buf, size);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* Copy so ASan catches reads past the end of the input. */
    uint8_t *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    check(buf, size);
    /* Again with every batch's CRC fixed up, so record parsing sees mutated records. */
    struct gr_batch_iter it;
    struct gr_batch_info bi;
    const uint8_t *b;
    gr_batch_iter_init(&it, buf, size);
    while (gr_batch_iter_next(&it, &bi, &b)) gr_batch_update_crc(buf + (b - buf), bi.size);
    check(buf, size);
    free(buf);
    return 0;
}
