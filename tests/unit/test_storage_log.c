/* Partition log: append/read, rolls, index look-ups, recovery (torn tail, garbage, bad CRC),
 * retention, truncation, leader-epoch cache, timestamps, reopen. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "storage/batch.h"
#include "storage/log.h"
#include "support/check.h"

static char g_root[64];

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}
static void rm_rf(const char *p) { nftw(p, rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

static char *pdir(const char *name) {
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", g_root, name);
    return buf;
}

/* A client batch of n records with values of vsize bytes, timestamps ts, ts+1, ... */
static uint8_t *mk(int n, int vsize, int64_t ts, size_t *len) {
    struct gr_batch_rec recs[256];
    static char val[2100000];
    memset(val, 'x', sizeof val);
    for (int i = 0; i < n; i++)
        recs[i] = (struct gr_batch_rec){"k", 1, val, vsize, NULL, 0, ts + i};
    return gr_batch_build(recs, n, NULL, len);
}

static int64_t append(struct gr_plog *log, int n, int vsize, int64_t ts, int32_t epoch) {
    size_t len;
    uint8_t *b = mk(n, vsize, ts, &len);
    struct gr_append_info info;
    int rc = gr_plog_append_as_leader(log, b, len, epoch, &info);
    free(b);
    CHECK(rc == 0 && info.error == GR_KERR_NONE);
    CHECK(info.last_offset - info.first_offset + 1 == n);
    return info.first_offset;
}

/* Reads everything from `from` and checks batches are valid and offsets contiguous. Returns the
 * next offset after the data read. */
static int64_t read_all(struct gr_plog *log, int64_t from) {
    int64_t off = from;
    for (;;) {
        struct gr_plog_read_result r;
        CHECK(gr_plog_read(log, off, 1 << 20, -1, true, &r) == 0);
        CHECK(r.error == GR_KERR_NONE);
        if (r.len == 0) break;
        struct gr_batch_summary s;
        CHECK(gr_batch_validate_all(r.data, r.len, 0, &s) == GR_BATCH_OK);
        CHECK(s.offsets_contiguous);
        CHECK(s.first_offset <= off && s.last_offset >= off);
        CHECK(r.next_offset == s.last_offset + 1);
        off = s.last_offset + 1;
        free(r.data);
    }
    return off;
}

static struct gr_plog *open_log(const char *name, int32_t seg_bytes, int64_t rp) {
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    if (seg_bytes) cfg.segment_bytes = seg_bytes;
    cfg.index_interval_bytes = 256;
    struct gr_plog *log = NULL;
    int rc = gr_plog_open_dir(pdir(name), &cfg, rp, &log);
    CHECK(rc == 0 && log);
    return log;
}

static void test_append_read(void) {
    struct gr_plog *log = open_log("basic-0", 0, 0);
    CHECK(gr_plog_end_offset(log) == 0 && gr_plog_start_offset(log) == 0);
    CHECK(append(log, 3, 10, 1000, 5) == 0);
    CHECK(append(log, 2, 10, 2000, 5) == 3);
    CHECK(gr_plog_end_offset(log) == 5);

    struct gr_plog_read_result r;
    CHECK(gr_plog_read(log, 0, 1 << 20, -1, true, &r) == 0 && r.error == 0);
    CHECK(r.first_offset == 0 && r.next_offset == 5 && r.log_end_offset == 5);
    CHECK(gr_batch_count_records(r.data, r.len) == 5);
    CHECK(gr_batch_partition_leader_epoch(r.data) == 5);
    free(r.data);
    /* offset inside the first batch: starts at that batch */
    CHECK(gr_plog_read(log, 1, 1 << 20, -1, true, &r) == 0 && r.first_offset == 0);
    free(r.data);
    CHECK(gr_plog_read(log, 3, 1 << 20, -1, true, &r) == 0 && r.first_offset == 3 && r.next_offset == 5);
    free(r.data);
    /* max_offset (high watermark) excludes the second batch */
    CHECK(gr_plog_read(log, 0, 1 << 20, 3, true, &r) == 0 && r.next_offset == 3);
    free(r.data);
    CHECK(gr_plog_read(log, 3, 1 << 20, 3, true, &r) == 0 && r.len == 0 && r.error == 0);
    /* max_bytes smaller than the first batch: min_one decides */
    CHECK(gr_plog_read(log, 0, 10, -1, true, &r) == 0 && r.len > 10 && r.next_offset == 3);
    free(r.data);
    CHECK(gr_plog_read(log, 0, 10, -1, false, &r) == 0 && r.len == 0);
    /* end and out of range */
    CHECK(gr_plog_read(log, 5, 1 << 20, -1, true, &r) == 0 && r.len == 0 && r.error == 0);
    CHECK(gr_plog_read(log, 6, 1 << 20, -1, true, &r) == 0 && r.error == GR_KERR_OFFSET_OUT_OF_RANGE);
    CHECK(gr_plog_read(log, -1, 1 << 20, -1, true, &r) == 0 && r.error == GR_KERR_OFFSET_OUT_OF_RANGE);

    /* Produce errors */
    size_t len;
    uint8_t *b = mk(2, 10, 1, &len);
    struct gr_append_info info;
    b[30] ^= 1;
    CHECK(gr_plog_append_as_leader(log, b, len, 5, &info) == 0 && info.error == GR_KERR_CORRUPT_MESSAGE);
    b[30] ^= 1;
    b[16] = 1;
    CHECK(gr_plog_append_as_leader(log, b, len, 5, &info) == 0 &&
          info.error == GR_KERR_UNSUPPORTED_FOR_MESSAGE_FORMAT);
    b[16] = 2;
    CHECK(gr_plog_append_as_leader(log, b, len - 1, 5, &info) == 0 && info.error == GR_KERR_CORRUPT_MESSAGE);
    free(b);
    b = mk(1, 2000000, 1, &len);
    CHECK(gr_plog_append_as_leader(log, b, len, 5, &info) == 0 && info.error == GR_KERR_MESSAGE_TOO_LARGE);
    free(b);
    CHECK(gr_plog_end_offset(log) == 5);
    gr_plog_close(log);
}

static void test_roll_and_index(void) {
    struct gr_plog *log = open_log("roll-0", 4096, 0);
    /* 300 batches of 1..4 records, ~100-400 bytes each */
    int64_t expect = 0;
    for (int i = 0; i < 300; i++) {
        int n = 1 + i % 4;
        CHECK(append(log, n, 60, 10000 + expect, 1) == expect);
        expect += n;
    }
    CHECK(gr_plog_end_offset(log) == expect);
    CHECK(gr_plog_segment_count(log) > 10);
    /* Every offset finds the batch that contains it. */
    for (int64_t o = 0; o < expect; o++) {
        struct gr_plog_read_result r;
        CHECK(gr_plog_read(log, o, 1, -1, true, &r) == 0 && r.error == 0 && r.len > 0);
        if (r.len) {
            struct gr_batch_info bi;
            CHECK(gr_batch_validate_one(r.data, r.len, 0, &bi) == GR_BATCH_OK);
            CHECK(bi.BaseOffset <= o && gr_batch_info_last_offset(&bi) >= o);
            CHECK(bi.size == r.len);
        }
        free(r.data);
    }
    CHECK(read_all(log, 0) == expect);
    /* Index files exist and are multiples of 8 bytes. */
    struct stat st;
    char p[512];
    snprintf(p, sizeof p, "%s/%020d.index", pdir("roll-0"), 0);
    CHECK(stat(p, &st) == 0 && st.st_size % 8 == 0 && st.st_size > 0);
    /* Reopen (clean: flush + recovery point) keeps everything, and the indexes still work. */
    CHECK(gr_plog_flush(log) == 0);
    int64_t rp = gr_plog_recovery_point(log);
    CHECK(rp == expect);
    int segs = gr_plog_segment_count(log);
    gr_plog_close(log);
    log = open_log("roll-0", 4096, rp);
    CHECK(gr_plog_end_offset(log) == expect && gr_plog_segment_count(log) == segs);
    for (int64_t o = 0; o < expect; o += 7) {
        struct gr_plog_read_result r;
        CHECK(gr_plog_read(log, o, 1, -1, true, &r) == 0 && r.len > 0);
        if (r.len) CHECK(gr_batch_base_offset(r.data) <= o && gr_batch_last_offset(r.data) >= o);
        free(r.data);
    }
    /* Reopen with recovery point 0: full recovery gives the same log. */
    gr_plog_close(log);
    log = open_log("roll-0", 4096, 0);
    CHECK(gr_plog_end_offset(log) == expect && gr_plog_segment_count(log) == segs);
    CHECK(read_all(log, 0) == expect);
    /* Corrupt index file of an old segment: rebuilt on open. */
    gr_plog_close(log);
    int fd = open(p, O_WRONLY);
    CHECK(fd >= 0 && pwrite(fd, "\xff\xff\xff\xff\0\0\0\0garbage!", 16, 0) == 16);
    close(fd);
    log = open_log("roll-0", 4096, rp);
    CHECK(gr_plog_end_offset(log) == expect);
    CHECK(read_all(log, 0) == expect);
    /* Timestamps: ts = 10000 + offset for every record. */
    int64_t off, ts;
    CHECK(gr_plog_offset_for_timestamp(log, 10000 + 123, &off, &ts) == 0 && off == 123 && ts == 10123);
    CHECK(gr_plog_offset_for_timestamp(log, 0, &off, &ts) == 0 && off == 0 && ts == 10000);
    CHECK(gr_plog_offset_for_timestamp(log, 10000 + expect, &off, &ts) == 0 && off == -1 && ts == -1);
    CHECK(gr_plog_offset_for_timestamp(log, GR_LIST_OFFSETS_LATEST, &off, &ts) == 0 && off == expect);
    CHECK(gr_plog_offset_for_timestamp(log, GR_LIST_OFFSETS_EARLIEST, &off, &ts) == 0 && off == 0);
    gr_plog_close(log);
}

/* One batch of n records with these timestamps (values of 60 bytes). */
static int64_t append_ts(struct gr_plog *log, const int64_t *ts, int n) {
    struct gr_batch_rec recs[16];
    static const char val[60] = {0};
    for (int i = 0; i < n; i++) recs[i] = (struct gr_batch_rec){"k", 1, val, sizeof val, NULL, 0, ts[i]};
    size_t len;
    uint8_t *b = gr_batch_build(recs, n, NULL, &len);
    struct gr_append_info info;
    CHECK(gr_plog_append_as_leader(log, b, len, 1, &info) == 0 && info.error == GR_KERR_NONE);
    free(b);
    return info.first_offset;
}

/* ListOffsets MAX_TIMESTAMP (KIP-734): the record holding the log's largest timestamp, found in
 * the first segment holding it (not the active one), in the middle of its batch; the same after
 * a full recovery; nothing in an empty log. */
static void test_max_timestamp(void) {
    struct gr_plog *log = open_log("maxts-0", 4096, 0);
    int64_t off, ts;
    CHECK(gr_plog_offset_for_timestamp(log, GR_LIST_OFFSETS_MAX_TIMESTAMP, &off, &ts) == 0 && off == -1 && ts == -1);
    int64_t at = -1;
    for (int i = 0; i < 120; i++) {
        int64_t t[3] = {1000 + i, 2000 + i, 1500 + i};
        if (i == 5) t[1] = 900000;             /* the maximum, middle of its batch */
        if (i == 90) t[2] = 900000;            /* the same maximum again, in a later segment */
        int64_t first = append_ts(log, t, 3);
        if (i == 5) at = first + 1;
    }
    CHECK(gr_plog_segment_count(log) > 3);
    CHECK(gr_plog_offset_for_timestamp(log, GR_LIST_OFFSETS_MAX_TIMESTAMP, &off, &ts) == 0 && off == at &&
          ts == 900000);
    gr_plog_close(log);
    log = open_log("maxts-0", 4096, 0); /* full recovery rebuilds the segments' max timestamps */
    CHECK(gr_plog_offset_for_timestamp(log, GR_LIST_OFFSETS_MAX_TIMESTAMP, &off, &ts) == 0 && off == at &&
          ts == 900000);
    gr_plog_close(log);
}

static char *seg_path(const char *name, int64_t base) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%020" PRId64 ".log", pdir(name), base);
    return p;
}

static void test_recovery(void) {
    /* torn last batch */
    struct gr_plog *log = open_log("torn-0", 0, 0);
    for (int i = 0; i < 10; i++) append(log, 3, 50, 1, 0);
    gr_plog_close(log);
    struct stat st;
    CHECK(stat(seg_path("torn-0", 0), &st) == 0);
    CHECK(truncate(seg_path("torn-0", 0), st.st_size - 20) == 0);
    log = open_log("torn-0", 0, 0);
    CHECK(gr_plog_end_offset(log) == 27);
    CHECK(read_all(log, 0) == 27);
    CHECK(append(log, 1, 5, 1, 0) == 27); /* appends continue at the new end */
    gr_plog_close(log);

    /* garbage tail */
    log = open_log("garbage-0", 0, 0);
    for (int i = 0; i < 10; i++) append(log, 2, 30, 1, 0);
    gr_plog_close(log);
    int fd = open(seg_path("garbage-0", 0), O_WRONLY | O_APPEND);
    uint8_t junk[777];
    srand(42);
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)rand();
    CHECK(write(fd, junk, sizeof junk) == (ssize_t)sizeof junk);
    close(fd);
    log = open_log("garbage-0", 0, 0);
    CHECK(gr_plog_end_offset(log) == 20);
    CHECK(read_all(log, 0) == 20);
    gr_plog_close(log);
    CHECK(stat(seg_path("garbage-0", 0), &st) == 0);
    off_t good = st.st_size;

    /* CRC corruption in the last batch: it goes. */
    fd = open(seg_path("garbage-0", 0), O_RDWR);
    uint8_t byte;
    CHECK(pread(fd, &byte, 1, good - 5) == 1);
    byte ^= 0x40;
    CHECK(pwrite(fd, &byte, 1, good - 5) == 1);
    close(fd);
    log = open_log("garbage-0", 0, 0);
    CHECK(gr_plog_end_offset(log) == 18);
    CHECK(read_all(log, 0) == 18);
    gr_plog_close(log);

    /* Corruption in an older segment (below no recovery point): later segments are dropped. */
    log = open_log("multi-0", 1024, 0);
    for (int i = 0; i < 40; i++) append(log, 2, 60, 1, 0);
    int segs = gr_plog_segment_count(log);
    CHECK(segs > 4);
    gr_plog_close(log);
    /* segment 2's base: read the directory listing via reopen later; corrupt segment 0's last byte */
    CHECK(stat(seg_path("multi-0", 0), &st) == 0);
    fd = open(seg_path("multi-0", 0), O_RDWR);
    CHECK(pread(fd, &byte, 1, st.st_size - 1) == 1);
    byte ^= 1;
    CHECK(pwrite(fd, &byte, 1, st.st_size - 1) == 1);
    close(fd);
    log = open_log("multi-0", 1024, 0);
    CHECK(gr_plog_segment_count(log) == 1);
    int64_t end = gr_plog_end_offset(log);
    CHECK(end > 0 && end < 80);
    CHECK(read_all(log, 0) == end);
    gr_plog_close(log);
}

static void test_retention(void) {
    struct gr_plog *log = open_log("ret-0", 1024, 0);
    int64_t now = 1000000;
    /* batch timestamps: old ones first */
    for (int i = 0; i < 40; i++) append(log, 2, 60, now - 100000 + i * 2000, 0);
    int segs = gr_plog_segment_count(log);
    CHECK(segs > 5);
    int64_t total = gr_plog_size_bytes(log);
    /* nothing expired with a long retention */
    CHECK(gr_plog_apply_retention(log, gr_plog_end_offset(log), 1000000, -1, now) == 0);
    /* time: everything older than 50 s goes (but never the active segment) */
    int del = gr_plog_apply_retention(log, gr_plog_end_offset(log), 50000, -1, now);
    CHECK(del > 0 && del < segs);
    int64_t lso = gr_plog_start_offset(log);
    CHECK(lso > 0);
    struct gr_plog_read_result r;
    CHECK(gr_plog_read(log, lso - 1, 100, -1, true, &r) == 0 && r.error == GR_KERR_OFFSET_OUT_OF_RANGE);
    CHECK(read_all(log, lso) == 80);
    /* remaining segments' newest timestamps are within 50 s */
    int64_t off, ts;
    CHECK(gr_plog_offset_for_timestamp(log, 0, &off, &ts) == 0 && off >= lso);
    /* size: keep at most ~2 KiB */
    del = gr_plog_apply_retention(log, gr_plog_end_offset(log), -1, 1500, now);
    CHECK(del > 0);
    CHECK(gr_plog_size_bytes(log) >= 1500 || gr_plog_segment_count(log) == 1);
    CHECK(gr_plog_size_bytes(log) < total);
    /* Kafka's deletableSegments: nothing that is not wholly below the high watermark goes */
    int segs_now = gr_plog_segment_count(log);
    CHECK(gr_plog_apply_retention(log, gr_plog_start_offset(log), 0, -1, now + 10000000) == 0);
    CHECK(gr_plog_apply_retention(log, 79, 0, 0, now + 10000000) == segs_now - 1); /* all but the active */
    CHECK(gr_plog_segment_count(log) == 1 && gr_plog_end_offset(log) == 80);
    /* everything expired and replicated: the active segment too, after a roll to an empty one */
    CHECK(gr_plog_apply_retention(log, 80, 0, -1, now + 10000000) == 1);
    CHECK(gr_plog_segment_count(log) == 1 && gr_plog_size_bytes(log) == 0);
    CHECK(gr_plog_start_offset(log) == 80 && gr_plog_end_offset(log) == 80);
    CHECK(gr_plog_apply_retention(log, 80, 0, 0, now + 20000000) == 0); /* an empty active segment stays */
    int64_t lso2 = gr_plog_start_offset(log);
    CHECK(read_all(log, lso2) == 80);
    append(log, 2, 60, now, 0); /* the log goes on at 80 */
    CHECK(gr_plog_end_offset(log) == 82 && read_all(log, 80) == 82);
    gr_plog_close(log);
    /* reopen: log start is the first segment */
    log = open_log("ret-0", 1024, 0);
    CHECK(gr_plog_start_offset(log) == lso2 && gr_plog_end_offset(log) == 82);
    gr_plog_close(log);
}

static void test_truncate_and_epochs(void) {
    struct gr_plog *log = open_log("epoch-0", 1024, 0);
    int64_t eo;
    int32_t ep;
    CHECK(gr_plog_end_offset_for_epoch(log, 0, &eo, &ep) == 0 && eo == -1 && ep == -1);
    for (int i = 0; i < 10; i++) append(log, 2, 40, 1, 1); /* epoch 1: 0..19 */
    for (int i = 0; i < 10; i++) append(log, 2, 40, 1, 3); /* epoch 3: 20..39 */
    for (int i = 0; i < 5; i++) append(log, 2, 40, 1, 4);  /* epoch 4: 40..49 */
    int32_t epochs[8];
    int64_t starts[8];
    CHECK(gr_plog_epoch_entries(log, epochs, starts, 8) == 3);
    CHECK(epochs[0] == 1 && starts[0] == 0 && epochs[1] == 3 && starts[1] == 20 && epochs[2] == 4 && starts[2] == 40);
    CHECK(gr_plog_latest_epoch(log) == 4);
    /* OffsetsForLeaderEpoch */
    CHECK(gr_plog_end_offset_for_epoch(log, 4, &eo, &ep) == 0 && eo == 50 && ep == 4);
    CHECK(gr_plog_end_offset_for_epoch(log, 3, &eo, &ep) == 0 && eo == 40 && ep == 3);
    CHECK(gr_plog_end_offset_for_epoch(log, 2, &eo, &ep) == 0 && eo == 20 && ep == 1);
    CHECK(gr_plog_end_offset_for_epoch(log, 1, &eo, &ep) == 0 && eo == 20 && ep == 1);
    CHECK(gr_plog_end_offset_for_epoch(log, 0, &eo, &ep) == 0 && eo == 0 && ep == 0);
    CHECK(gr_plog_end_offset_for_epoch(log, 5, &eo, &ep) == 0 && eo == -1 && ep == -1);
    CHECK(gr_plog_end_offset_for_epoch(log, -1, &eo, &ep) == 0 && eo == -1 && ep == -1);

    /* checkpoint file format */
    char p[512], buf[256];
    snprintf(p, sizeof p, "%s/leader-epoch-checkpoint", pdir("epoch-0"));
    FILE *f = fopen(p, "r");
    CHECK(f != NULL);
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
    CHECK(strcmp(buf, "0\n3\n1 0\n3 20\n4 40\n") == 0);

    /* Truncate into epoch 3, mid-batch (offset 31 is inside batch 30..31): LEO = 30. */
    CHECK(gr_plog_truncate_to(log, 31) == 0);
    CHECK(gr_plog_end_offset(log) == 30);
    CHECK(gr_plog_epoch_entries(log, epochs, starts, 8) == 2);
    CHECK(gr_plog_end_offset_for_epoch(log, 3, &eo, &ep) == 0 && eo == 30 && ep == 3);
    CHECK(read_all(log, 0) == 30);
    CHECK(append(log, 2, 40, 1, 6) == 30);
    CHECK(gr_plog_end_offset_for_epoch(log, 3, &eo, &ep) == 0 && eo == 30 && ep == 3);
    CHECK(gr_plog_end_offset_for_epoch(log, 5, &eo, &ep) == 0 && eo == 30 && ep == 3);
    /* truncate to a batch boundary in an earlier segment, segments after it go */
    int segs = gr_plog_segment_count(log);
    CHECK(gr_plog_truncate_to(log, 10) == 0);
    CHECK(gr_plog_end_offset(log) == 10 && gr_plog_segment_count(log) < segs);
    CHECK(gr_plog_epoch_entries(log, epochs, starts, 8) == 1 && epochs[0] == 1);
    CHECK(read_all(log, 0) == 10);
    CHECK(append(log, 1, 40, 1, 7) == 10);
    /* reopen preserves epochs and offsets */
    gr_plog_close(log);
    log = open_log("epoch-0", 1024, 0);
    CHECK(gr_plog_end_offset(log) == 11);
    CHECK(gr_plog_epoch_entries(log, epochs, starts, 8) == 2 && epochs[1] == 7 && starts[1] == 10);

    /* Follower appends: batches from a "leader" with epochs 7 and 9. */
    size_t l1, l2;
    uint8_t *b1 = mk(3, 10, 5, &l1), *b2 = mk(2, 10, 6, &l2);
    gr_batch_set_base_offset(b1, 11);
    gr_batch_set_partition_leader_epoch(b1, 7);
    gr_batch_set_base_offset(b2, 14);
    gr_batch_set_partition_leader_epoch(b2, 9);
    uint8_t *both = malloc(l1 + l2);
    memcpy(both, b1, l1);
    memcpy(both + l1, b2, l2);
    struct gr_append_info info;
    /* starts at 12: the batches overlap (12..14, then 14..15); gaps alone are allowed (compaction) */
    gr_batch_set_base_offset(both, 12);
    CHECK(gr_plog_append_as_follower(log, both, l1 + l2, &info) == -ERANGE);
    gr_batch_set_base_offset(both, 11);
    CHECK(gr_plog_append_as_follower(log, both, l1 + l2, &info) == 0 && info.error == 0);
    CHECK(info.first_offset == 11 && info.last_offset == 15);
    CHECK(gr_plog_end_offset(log) == 16);
    CHECK(gr_plog_latest_epoch(log) == 9);
    CHECK(gr_plog_end_offset_for_epoch(log, 7, &eo, &ep) == 0 && eo == 14 && ep == 7);
    both[l1 + 40] ^= 1;
    gr_batch_set_base_offset(both, 16);
    gr_batch_set_base_offset(both + l1, 19);
    CHECK(gr_plog_append_as_follower(log, both, l1 + l2, &info) == GR_ECORRUPT);
    CHECK(gr_plog_end_offset(log) == 16);
    free(b1);
    free(b2);
    free(both);

    /* Truncate fully and start elsewhere. */
    CHECK(gr_plog_truncate_fully_and_start_at(log, 1000) == 0);
    CHECK(gr_plog_start_offset(log) == 1000 && gr_plog_end_offset(log) == 1000 && gr_plog_segment_count(log) == 1);
    CHECK(gr_plog_latest_epoch(log) == -1);
    struct gr_plog_read_result r;
    CHECK(gr_plog_read(log, 5, 100, -1, true, &r) == 0 && r.error == GR_KERR_OFFSET_OUT_OF_RANGE);
    CHECK(append(log, 2, 10, 1, 11) == 1000);
    gr_plog_close(log);
    log = open_log("epoch-0", 1024, 0);
    CHECK(gr_plog_start_offset(log) == 1000 && gr_plog_end_offset(log) == 1002);
    CHECK(gr_plog_latest_epoch(log) == 11);
    /* truncate_to below the first segment = truncate fully */
    CHECK(gr_plog_truncate_to(log, 500) == 0);
    CHECK(gr_plog_start_offset(log) == 500 && gr_plog_end_offset(log) == 500);
    CHECK(gr_plog_delete(log) == 0);
    struct stat st;
    CHECK(stat(pdir("epoch-0"), &st) < 0 && errno == ENOENT);
}

static void test_flush_policy(void) {
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    cfg.flush_messages = 5;
    struct gr_plog *log = NULL;
    CHECK(gr_plog_open_dir(pdir("flush-0"), &cfg, 0, &log) == 0);
    append(log, 2, 10, 1, 0);
    CHECK(gr_plog_recovery_point(log) == 0);
    append(log, 3, 10, 1, 0);
    CHECK(gr_plog_recovery_point(log) == 5);
    append(log, 1, 10, 1, 0);
    CHECK(gr_plog_recovery_point(log) == 5);
    CHECK(gr_plog_flush(log) == 0 && gr_plog_recovery_point(log) == 6);
    gr_plog_close(log);
    char topic[64];
    int32_t part;
    CHECK(gr_plog_parse_dir_name("my-topic-12", topic, sizeof topic, &part) == 0 && part == 12 &&
          strcmp(topic, "my-topic") == 0);
    CHECK(gr_plog_parse_dir_name("nodash", topic, sizeof topic, &part) == -EINVAL);
    CHECK(gr_plog_parse_dir_name("t-x", topic, sizeof topic, &part) == -EINVAL);
}

/* gr_plog_read_slice (the sendfile path) names exactly the bytes gr_plog_read copies. */
static void test_slice_matches_read(void) {
    struct gr_plog *log = open_log("slice-0", 4096, 0);
    int64_t end = 0;
    for (int i = 0; i < 120; i++) end += 0 * append(log, 1 + i % 5, 40 + i % 70, 5000 + i, 1) + (1 + i % 5);
    static const int32_t maxes[] = {1, 61, 200, 1000, 5000, 1 << 20};
    for (int64_t o = 0; o <= end; o += 3)
        for (size_t mi = 0; mi < sizeof maxes / sizeof maxes[0]; mi++)
            for (int mo = 0; mo < 2; mo++) {
                int64_t max_offset = mo ? o + 7 : -1;
                bool min_one = mi % 2 == 0;
                struct gr_plog_read_result r;
                struct gr_plog_slice sl;
                CHECK(gr_plog_read(log, o, maxes[mi], max_offset, min_one, &r) == 0);
                CHECK(gr_plog_read_slice(log, o, maxes[mi], max_offset, min_one, &sl) == 0);
                CHECK(sl.error == r.error && sl.len == r.len && sl.first_offset == r.first_offset &&
                      sl.next_offset == r.next_offset);
                if (sl.len && sl.len == r.len) {
                    uint8_t *b = malloc(sl.len);
                    CHECK(pread(sl.fd, b, sl.len, sl.pos) == (ssize_t)sl.len && memcmp(b, r.data, sl.len) == 0);
                    free(b);
                }
                if (sl.fd >= 0) close(sl.fd);
                CHECK(sl.len > 0 || sl.fd == -1);
                free(r.data);
            }
    gr_plog_close(log);
}

/* Kafka's appendAsFollower checks batch headers, offsets and the CRC, not each record; the leader
 * path parses every record. A batch whose record framing is broken but whose CRC is right: the
 * leader refuses it (INVALID_RECORD), a follower takes it. */
static void test_follower_checks_crc_not_records(void) {
    size_t len;
    uint8_t *b = mk(2, 10, 5, &len);
    b[GR_BATCH_HEADER_SIZE] = 0x7e; /* first record's length varint: 63, past the batch */
    gr_batch_update_crc(b, len);
    struct gr_plog *log = open_log("follower-records-0", 0, 0);
    struct gr_append_info info;
    CHECK(gr_plog_append_as_leader(log, b, len, 1, &info) == 0 && info.error == GR_KERR_INVALID_RECORD);
    gr_batch_set_base_offset(b, 0);
    CHECK(gr_plog_append_as_follower(log, b, len, &info) == 0 && info.error == GR_KERR_NONE);
    CHECK(gr_plog_end_offset(log) == 2);
    b[30] ^= 1; /* inside the CRC: refused by both */
    gr_batch_set_base_offset(b, 2);
    CHECK(gr_plog_append_as_follower(log, b, len, &info) == GR_ECORRUPT);
    gr_plog_close(log);
    free(b);
}

/* issue 27: segment.jitter.ms moves each segment's time roll up to that much earlier (Kafka's
 * randomSegmentJitter, < min(jitter, segment.ms)); without it a segment rolls only past segment.ms. */
static void test_segment_jitter(void) {
    int rolled[2] = {0, 0};
    for (int j = 0; j < 2; j++) {
        for (int i = 0; i < 20; i++) {
            char name[64];
            snprintf(name, sizeof name, "jit%d-%d", j, i);
            struct gr_plog_config cfg;
            gr_plog_config_defaults(&cfg);
            cfg.roll_ms = 10000;
            cfg.roll_jitter_ms = j ? 10000 : 0;
            struct gr_plog *log = NULL;
            CHECK(gr_plog_open_dir(pdir(name), &cfg, 0, &log) == 0);
            append(log, 1, 10, 1000000, 0);
            append(log, 1, 10, 1000000 + 10000, 0); /* waited == segment.ms: no roll without jitter */
            if (gr_plog_segment_count(log) == 2) rolled[j]++;
            gr_plog_close(log);
        }
    }
    CHECK(rolled[0] == 0);
    CHECK(rolled[1] >= 15); /* a draw of 0 (p = 1e-4 each) does not roll */
}

int main(void) {
    gr_log_set_level(GR_LOG_WARN);
    snprintf(g_root, sizeof g_root, "/tmp/gr-storage-XXXXXX");
    if (!mkdtemp(g_root)) {
        perror("mkdtemp");
        return 1;
    }
    test_append_read();
    test_roll_and_index();
    test_max_timestamp();
    test_recovery();
    test_retention();
    test_truncate_and_epochs();
    test_flush_policy();
    test_slice_matches_read();
    test_follower_checks_crc_not_records();
    test_segment_jitter();
    rm_rf(g_root);
    if (test_failures) fprintf(stderr, "test_storage_log: %d failures\n", test_failures);
    else printf("test_storage_log: ok\n");
    return test_failures ? 1 : 0;
}
