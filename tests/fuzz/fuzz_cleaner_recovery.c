/* libFuzzer: recovery of an interrupted cleaning pass. A valid log of a few segments is written,
 * then the input decides which leftovers a crash could leave: a <base>.log.swap (arbitrary bytes,
 * or a valid batch run with its CRCs fixed), a .log.cleaned, old segments renamed .log.deleted.
 * Opening the log must not crash; what remains must read as valid batches with rising offsets,
 * no *.swap / *.cleaned / *.deleted file may survive, and the log must accept an append. */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
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
    fuzz_scratch_init("gr-fuzzclean");
    if (size < 2) return 0;
    uint8_t opts = data[0], where = data[1];
    data += 2;
    size -= 2;
    char dir[128], path[256];
    snprintf(dir, sizeof dir, "%s/t-0", g_root);
    fuzz_rm_tree(dir);
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    cfg.segment_bytes = 400;
    cfg.index_interval_bytes = 64;
    struct gr_plog *log = NULL;
    if (gr_plog_open_dir(dir, &cfg, 0, &log) != 0) abort();
    for (int i = 0; i < 12; i++) {
        struct gr_batch_rec rec = {"k", 1, "some-value-some-value", 21, NULL, 0, 1000 + i};
        size_t len;
        uint8_t *b = gr_batch_build(&rec, 1, NULL, &len);
        struct gr_append_info info;
        if (gr_plog_append_as_leader(log, b, len, 0, &info) != 0 || info.error) abort();
        free(b);
    }
    gr_plog_flush(log);
    int64_t end = gr_plog_end_offset(log);
    gr_plog_close(log);
    int64_t base = where % (end + 1);
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    if (opts & 1) { /* make the swap's batches pass header/CRC checks */
        struct gr_batch_iter it;
        struct gr_batch_info bi;
        const uint8_t *b;
        gr_batch_iter_init(&it, copy, size);
        while (gr_batch_iter_next(&it, &bi, &b)) gr_batch_update_crc(copy + (b - copy), bi.size);
    }
    if (opts & 2) {
        snprintf(path, sizeof path, "%s/%020" PRId64 ".log.swap", dir, base);
        fuzz_write_file(path, copy, size);
    }
    if (opts & 4) {
        snprintf(path, sizeof path, "%s/%020" PRId64 ".log.cleaned", dir, base);
        fuzz_write_file(path, copy, size);
    }
    if (opts & 8) { /* the first old segment already renamed */
        char from[256];
        snprintf(from, sizeof from, "%s/%020d.log", dir, 0);
        snprintf(path, sizeof path, "%s/%020d.log.deleted", dir, 0);
        if (opts & 2) rename(from, path);
    }
    free(copy);
    int rc = gr_plog_open_dir(dir, &cfg, (opts & 16) ? end : 0, &log);
    if (rc != 0) return 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        if (strstr(de->d_name, ".swap") || strstr(de->d_name, ".cleaned") || strstr(de->d_name, ".deleted")) abort();
    if (d) closedir(d);
    int64_t off = gr_plog_start_offset(log), e2 = gr_plog_end_offset(log);
    for (int guard = 0; guard < 10000 && off < e2; guard++) {
        struct gr_plog_read_result r;
        if (gr_plog_read(log, off, 1 << 16, -1, true, &r) != 0) break;
        if (r.error != GR_KERR_NONE) abort();
        if (r.len == 0) break;
        if (gr_batch_validate_all(r.data, r.len, 0, NULL) != GR_BATCH_OK && !(opts & 16)) abort();
        if (r.next_offset <= off) abort();
        off = r.next_offset;
        free(r.data);
    }
    struct gr_batch_rec rec = {"k", 1, "v", 1, NULL, 0, 1};
    size_t len;
    uint8_t *b = gr_batch_build(&rec, 1, NULL, &len);
    struct gr_append_info info;
    if (gr_plog_append_as_leader(log, b, len, 0, &info) != 0 || info.error != 0) abort();
    free(b);
    gr_plog_close(log);
    return 0;
}
