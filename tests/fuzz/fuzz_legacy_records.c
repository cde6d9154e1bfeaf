/* libFuzzer target: the old message-set parser and converters of src/storage/legacy_records.c.
 * On arbitrary bytes gr_legacy_to_v2 returns NONE or an error, never crashes; when it accepts,
 * the v2 batch it built validates and down-converts back to a message set of the same number of
 * messages, which up-converts again to the same batch (but for the offsets the log assigns).
 * gr_v2_to_legacy on arbitrary bytes never crashes either. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "storage/batch.h"
#include "storage/legacy_records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond) {
    if (!cond) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *v2;
    size_t v2_len;
    int16_t e = gr_legacy_to_v2(data, size, &v2, &v2_len);
    if (e == GR_KERR_NONE) {
        struct gr_batch_info bi;
        check(gr_batch_parse_header(v2, v2_len, &bi) == GR_BATCH_OK && bi.size == v2_len);
        bool compressed;
        for (int magic = 0; magic <= 1; magic++) {
            size_t leg_len;
            uint8_t *leg = gr_v2_to_legacy(v2, v2_len, magic, &leg_len, &compressed);
            check(leg && !compressed);
            uint8_t *again;
            size_t again_len;
            check(gr_legacy_to_v2(leg, leg_len, &again, &again_len) == GR_KERR_NONE);
            struct gr_batch_info b2;
            check(gr_batch_parse_header(again, again_len, &b2) == GR_BATCH_OK && b2.RecordCount == bi.RecordCount);
            free(again);
            free(leg);
        }
        free(v2);
    }
    size_t out_len;
    bool compressed;
    free(gr_v2_to_legacy(data, size, 1, &out_len, &compressed));
    return 0;
}
