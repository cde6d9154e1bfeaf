/* Offset checkpoints, meta.properties, leader-epoch checkpoint parsing. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/util.h"
#include "storage/checkpoint.h"
#include "storage/log.h"
#include "support/check.h"

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void test_offsets(const char *root) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, GR_RECOVERY_POINT_CHECKPOINT);
    struct gr_offset_checkpoint_entry *e;
    size_t n;
    /* missing = empty */
    CHECK(gr_offset_checkpoint_read(path, &e, &n) == 0 && n == 0 && e == NULL);
    struct gr_offset_checkpoint_entry w[3] = {
        {"orders", 0, 42}, {"my-topic.v2", 17, 9000000000LL}, {"__consumer_offsets", 49, 0}};
    CHECK(gr_offset_checkpoint_write(path, w, 3) == 0);
    char *text;
    CHECK(gr_checkpoint_read_file(path, &text, NULL) == 0);
    CHECK(strcmp(text, "0\n3\norders 0 42\nmy-topic.v2 17 9000000000\n__consumer_offsets 49 0\n") == 0);
    free(text);
    CHECK(gr_offset_checkpoint_read(path, &e, &n) == 0 && n == 3);
    for (size_t i = 0; i < n && i < 3; i++)
        CHECK(strcmp(e[i].topic, w[i].topic) == 0 && e[i].partition == w[i].partition && e[i].offset == w[i].offset);
    CHECK(gr_offset_checkpoint_find(e, n, "my-topic.v2", 17, -1) == 9000000000LL);
    CHECK(gr_offset_checkpoint_find(e, n, "my-topic.v2", 16, -1) == -1);
    gr_offset_checkpoint_free(e, n);
    /* no leftover tmp file */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    struct stat st;
    CHECK(stat(tmp, &st) < 0);
    /* empty */
    CHECK(gr_offset_checkpoint_write(path, NULL, 0) == 0);
    CHECK(gr_offset_checkpoint_read(path, &e, &n) == 0 && n == 0);
    gr_offset_checkpoint_free(e, n);
    /* malformed inputs */
    static const char *bad[] = {"1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na x 1\n", "0\n1\na 0 1 2\n",
                                "", "0\n-1\n", "0\n1\na -1 5\n", "0\n1\na 0 1\njunk\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(path, bad[i]);
        CHECK(gr_offset_checkpoint_read(path, &e, &n) == GR_ECORRUPT && e == NULL);
    }
    /* Windows line ends and a trailing blank line are tolerated. */
    write_text(path, "0\r\n1\r\nt 3 7\r\n\n");
    CHECK(gr_offset_checkpoint_read(path, &e, &n) == 0 && n == 1 && e[0].partition == 3 && e[0].offset == 7);
    gr_offset_checkpoint_free(e, n);
}

static void test_meta(const char *root) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/logdir", root);
    mkdir(dir, 0755);
    struct gr_meta_properties mp;
    CHECK(gr_meta_properties_read(dir, &mp) == -ENOENT);
    CHECK(gr_meta_properties_check(dir, 3, "") == 0); /* creates */
    CHECK(gr_meta_properties_read(dir, &mp) == 0 && mp.version == 0 && mp.broker_id == 3 && mp.cluster_id[0] == 0);
    CHECK(gr_meta_properties_check(dir, 3, "abcDEF123") == 0); /* adds cluster.id */
    CHECK(gr_meta_properties_read(dir, &mp) == 0 && strcmp(mp.cluster_id, "abcDEF123") == 0);
    CHECK(gr_meta_properties_check(dir, 3, "abcDEF123") == 0);
    CHECK(gr_meta_properties_check(dir, 3, "") == 0);
    CHECK(gr_meta_properties_check(dir, 4, "abcDEF123") == GR_EMETA_BROKER_ID);
    CHECK(gr_meta_properties_check(dir, 3, "other") == GR_EMETA_CLUSTER_ID);
    /* A Kafka-written file. */
    char path[600];
    snprintf(path, sizeof path, "%s/meta.properties", dir);
    write_text(path, "#\n#Tue Nov 29 22:19:23 UTC 2026\ncluster.id=Zx9_-qq\nversion=0\nbroker.id=1001\n");
    CHECK(gr_meta_properties_read(dir, &mp) == 0 && mp.broker_id == 1001 && strcmp(mp.cluster_id, "Zx9_-qq") == 0);
    write_text(path, "version=1\nbroker.id=1\n");
    CHECK(gr_meta_properties_read(dir, &mp) == GR_ECORRUPT);
    write_text(path, "version=0\nbroker.id=abc\n");
    CHECK(gr_meta_properties_check(dir, 1, "") == GR_ECORRUPT);
}

static void test_epoch_file(const char *root) {
    /* A malformed leader-epoch-checkpoint does not stop the log from opening. */
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/t-0", root);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/leader-epoch-checkpoint", dir);
    write_text(path, "0\n2\n5 10\n3 20\n"); /* epochs not increasing */
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    struct gr_plog *log = NULL;
    CHECK(gr_plog_open_dir(dir, &cfg, 0, &log) == 0);
    if (log) {
        CHECK(gr_plog_latest_epoch(log) == -1);
        gr_plog_close(log);
    }
    write_text(path, "0\n1\n5 0\n");
    CHECK(gr_plog_open_dir(dir, &cfg, 0, &log) == 0);
    if (log) {
        CHECK(gr_plog_latest_epoch(log) == -1); /* truncated: the log is empty (end offset 0) */
        gr_plog_close(log);
    }
}

int main(void) {
    char root[] = "/tmp/gr-ckpt-XXXXXX";
    if (!mkdtemp(root)) return 1;
    gr_log_set_level((enum gr_log_level)(GR_LOG_ERROR + 1)); /* silence the expected error lines */
    test_offsets(root);
    test_meta(root);
    test_epoch_file(root);
    nftw(root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    if (test_failures) fprintf(stderr, "test_storage_checkpoint: %d failures\n", test_failures);
    else printf("test_storage_checkpoint: ok\n");
    return test_failures ? 1 : 0;
}
