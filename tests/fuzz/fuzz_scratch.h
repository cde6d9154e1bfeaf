/* A scratch directory for fuzz targets that work on files (fuzz_recovery, fuzz_cleaner_recovery,
 * fuzz_time_index): made once per process under /tmp, removed at exit, broker logging silenced.
 * Header-only (each target is its own program; tests/fuzz/fuzz_*.c are the targets). */
#ifndef GR_TESTS_FUZZ_SCRATCH_H
#define GR_TESTS_FUZZ_SCRATCH_H

#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"

static char g_root[64];

static int fuzz_scratch_rm(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* Removes the tree at path (missing is fine). */
static inline void fuzz_rm_tree(const char *path) { nftw(path, fuzz_scratch_rm, 16, FTW_DEPTH | FTW_PHYS); }

static void fuzz_scratch_cleanup(void) {
    if (g_root[0]) fuzz_rm_tree(g_root);
}

/* Makes g_root (/tmp/<prefix>-XXXXXX) on the first call. */
static inline void fuzz_scratch_init(const char *prefix) {
    if (g_root[0]) return;
    snprintf(g_root, sizeof g_root, "/tmp/%s-XXXXXX", prefix);
    if (!mkdtemp(g_root)) abort();
    atexit(fuzz_scratch_cleanup);
    gr_log_set_level((enum gr_log_level)(GR_LOG_ERROR + 1));
}

/* Writes d[0..n) to path (created or truncated); aborts on failure. */
static inline void fuzz_write_file(const char *path, const uint8_t *d, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) abort();
    if (n && write(fd, d, n) != (ssize_t)n) abort();
    close(fd);
}

#endif
