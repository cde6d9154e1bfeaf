/* Concurrent appends, reads, flushes and truncations on one log must stay consistent
 * (run under ASan/TSan builds too). Short: a few thousand operations. */
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/kerr.h"
#include "common/log.h"
#include "storage/batch.h"
#include "storage/log.h"
#include "support/check.h"

static struct gr_plog *g_log;
static volatile int g_stop;

static void *writer(void *arg) {
    (void)arg;
    struct gr_batch_rec r[3] = {{"a", 1, "v1", 2, NULL, 0, 1}, {"b", 1, "v2", 2, NULL, 0, 2}, {NULL, -1, "v3", 2, NULL, 0, 3}};
    for (int i = 0; i < 1500; i++) {
        size_t len;
        uint8_t *b = gr_batch_build(r, 1 + i % 3, NULL, &len);
        struct gr_append_info info;
        CHECK(gr_plog_append_as_leader(g_log, b, len, 1, &info) == 0 && info.error == 0);
        free(b);
    }
    return NULL;
}

static void *reader(void *arg) {
    (void)arg;
    int64_t off = 0;
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        struct gr_plog_read_result res;
        CHECK(gr_plog_read(g_log, off, 4096, -1, true, &res) == 0);
        if (res.error == GR_KERR_OFFSET_OUT_OF_RANGE) {
            off = res.log_start_offset;
            continue;
        }
        if (res.len) {
            struct gr_batch_summary s;
            CHECK(gr_batch_validate_all(res.data, res.len, 0, &s) == GR_BATCH_OK && s.offsets_contiguous);
            off = res.next_offset;
            free(res.data);
        }
        gr_plog_flush_if_due(g_log);
    }
    return NULL;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int main(void) {
    gr_log_set_level(GR_LOG_WARN);
    char root[] = "/tmp/gr-thr-XXXXXX";
    if (!mkdtemp(root)) return 1;
    char dir[256];
    snprintf(dir, sizeof dir, "%s/t-0", root);
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    cfg.segment_bytes = 8192;
    cfg.flush_ms = 5;
    CHECK(gr_plog_open_dir(dir, &cfg, 0, &g_log) == 0);
    pthread_t w[2], r[2];
    for (int i = 0; i < 2; i++) pthread_create(&w[i], NULL, writer, NULL);
    for (int i = 0; i < 2; i++) pthread_create(&r[i], NULL, reader, NULL);
    for (int i = 0; i < 20; i++) gr_plog_apply_retention(g_log, gr_plog_end_offset(g_log), -1, 64 * 1024, 0);
    for (int i = 0; i < 2; i++) pthread_join(w[i], NULL);
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++) pthread_join(r[i], NULL);
    /* 2 writers x 1500 batches x (1+2+3)/3 records avg = 6000 records */
    CHECK(gr_plog_end_offset(g_log) == 6000);
    CHECK(gr_plog_truncate_to(g_log, 5000) == 0);
    CHECK(gr_plog_end_offset(g_log) <= 5000);
    CHECK(gr_plog_flush(g_log) == 0);
    gr_plog_close(g_log);
    nftw(root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    if (test_failures) fprintf(stderr, "test_storage_threads: %d failures\n", test_failures);
    else printf("test_storage_threads: ok\n");
    return test_failures ? 1 : 0;
}
