/* libFuzzer: write arbitrary bytes as a segment (and optionally an index), open the log and
 * recover it. Must not crash; with recovery point 0 only valid batches may remain, with
 * contiguous, increasing offsets, and the log must accept a new append afterwards.
 * Input byte 0 selects options: bit 0 = also write the last 64 bytes as the .index file,
 * bit 1 = recovery point beyond the end (cheap load path, index sanity checks only),
 * bit 2 = fix up every batch's CRC first (so recovery gets past the CRC into the records). */
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/kerr.h"
#include "common/log.h"
#include "storage/batch.h"
#include "storage/log.h"
#include "fuzz_scratch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_scratch_init("gr-fuzzrec");
    if (size < 1) return 0;
    uint8_t opts = data[0];
    data++;
    size--;
    char dir[128], path[256];
    snprintf(dir, sizeof dir, "%s/t-0", g_root);
    fuzz_rm_tree(dir);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/00000000000000000000.log", dir);
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    if (opts & 4) {
        struct gr_batch_iter it;
        struct gr_batch_info bi;
        const uint8_t *b;
        gr_batch_iter_init(&it, copy, size);
        while (gr_batch_iter_next(&it, &bi, &b)) gr_batch_update_crc(copy + (b - copy), bi.size);
    }
    fuzz_write_file(path, copy, size);
    free(copy);
    if (opts & 1) {
        size_t n = size < 64 ? size : 64;
        snprintf(path, sizeof path, "%s/00000000000000000000.index", dir);
        fuzz_write_file(path, data + size - n, n);
    }
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    cfg.index_interval_bytes = 64;
    struct gr_plog *log = NULL;
    int64_t rp = (opts & 2) ? INT64_MAX / 2 : 0;
    if (gr_plog_open_dir(dir, &cfg, rp, &log) != 0) return 0;
    int64_t end = gr_plog_end_offset(log), off = gr_plog_start_offset(log);
    for (int guard = 0; guard < 100000 && off < end; guard++) {
        struct gr_plog_read_result r;
        if (gr_plog_read(log, off, 1 << 16, -1, true, &r) != 0) break;
        if (r.error != GR_KERR_NONE) abort();
        if (r.len == 0) break;
        struct gr_batch_summary s;
        int err = gr_batch_validate_all(r.data, r.len, 0, &s);
        if (!(opts & 2) && (err != GR_BATCH_OK || s.last_offset < off)) abort();
        if (r.next_offset <= off) abort();
        off = r.next_offset;
        free(r.data);
    }
    if (!(opts & 2)) {
        if (off != end) abort();
        struct gr_batch_rec rec = {"k", 1, "v", 1, NULL, 0, 1};
        size_t len;
        uint8_t *b = gr_batch_build(&rec, 1, NULL, &len);
        struct gr_append_info info;
        if (gr_plog_append_as_leader(log, b, len, 0, &info) != 0 || info.error != 0 || info.first_offset != end)
            abort();
        free(b);
    }
    gr_plog_close(log);
    return 0;
}
