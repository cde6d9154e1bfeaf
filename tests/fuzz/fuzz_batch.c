/* libFuzzer: RecordBatch validation, iteration and record parsing on arbitrary bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "storage/batch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(uint8_t *buf, size_t size) {
    struct gr_batch_summary s;
    int err_client = gr_batch_validate_all(buf, size, GR_BATCH_V_CLIENT, &s);
    int err = gr_batch_validate_all(buf, size, 0, &s);
    (void)err_client;
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
