/* libFuzzer target: the old message-set parser and converters of src/storage/legacy_records.c.
 * On arbitrary bytes gr_legacy_to_v2 returns NONE or an error, never crashes; when it accepts,
 * the v2 batch it built validates and down-converts back to a message set of the same number of
 * messages, which up-converts again to the same batch (but for the offsets the log assigns).
 * gr_v2_to_legacy on arbitrary bytes never crashes either. Inputs starting with an odd byte are
 * first given correct CRCs (entry by entry, as far as the sizes allow) so that the fuzzer gets
 * past the checksum to the message layout. */
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

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A copy of in[1..) whose entries carry correct CRCs. */
static uint8_t *fix_crcs(const uint8_t *in, size_t len) {
    uint8_t *c = malloc(len ? len : 1);
    memcpy(c, in, len);
    for (size_t pos = 0; len - pos >= 16;) {
        uint32_t sz = be32(c + pos + 8);
        if (sz < 4 || sz > len - pos - 12) break;
        uint32_t crc = gr_crc32_ieee(c + pos + 16, sz - 4);
        c[pos + 12] = (uint8_t)(crc >> 24), c[pos + 13] = (uint8_t)(crc >> 16);
        c[pos + 14] = (uint8_t)(crc >> 8), c[pos + 15] = (uint8_t)crc;
        pos += 12 + sz;
    }
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *fixed = NULL;
    if (size > 0 && (data[0] & 1)) {
        fixed = fix_crcs(data + 1, size - 1);
        data = fixed;
        size--;
    }
    uint8_t *v2;
    size_t v2_len;
    int16_t e = gr_legacy_to_v2(data, size, &v2, &v2_len, NULL);
    if (e == GR_KERR_NONE) {
        struct gr_batch_info bi;
        check(gr_batch_parse_header(v2, v2_len, &bi) == GR_BATCH_OK && bi.size == v2_len);
        bool compressed;
        for (int magic = 0; magic <= 1; magic++) {
            size_t leg_len;
            uint8_t *leg;
            check(gr_v2_to_legacy(v2, v2_len, magic, -1, SIZE_MAX, SIZE_MAX, &leg, &leg_len, &compressed) == 0);
            check(leg && !compressed);
            uint8_t *again;
            size_t again_len;
            check(gr_legacy_to_v2(leg, leg_len, &again, &again_len, NULL) == GR_KERR_NONE);
            struct gr_batch_info b2;
            check(gr_batch_parse_header(again, again_len, &b2) == GR_BATCH_OK && b2.RecordCount == bi.RecordCount);
            free(again);
            free(leg);
        }
        free(v2);
    }
    size_t out_len;
    bool compressed;
    uint8_t *out;
    /* a budget from the first byte: conversion stops early at any of them */
    size_t max = size > 0 ? (size_t)data[0] * 4 : SIZE_MAX;
    if (gr_v2_to_legacy(data, size, 1, -1, max, size > 1 && (data[1] & 1) ? SIZE_MAX : max, &out, &out_len,
                        &compressed) == 0)
        check(out_len <= max || (out_len > 0 && out != NULL));
    free(out);
    free(fixed);
    return 0;
}
