/* Time index (.timeindex): the entry rules and byte format, the final entry at roll and close,
 * rebuilds (missing, garbage, Kafka's zero-filled tail), ListOffsets by timestamp across segments
 * and after reopening, retention by each segment's largest timestamp, the index-full roll. */
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
#include "common/be.h"
#include "storage/log.h"
#include "storage/time_index.h"
#include "support/check.h"

static char g_root[64];

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static char *pdir(const char *name) {
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", g_root, name);
    return buf;
}

static char *tpath(const char *name, int64_t base) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%020" PRId64 ".timeindex", pdir(name), base);
    return p;
}

/* Appends one batch of n records with the given timestamps; returns its first offset. */
static int64_t append_ts(struct gr_plog *log, int n, const int64_t *ts) {
    struct gr_batch_rec recs[64];
    static char val[200];
    memset(val, 'v', sizeof val);
    for (int i = 0; i < n; i++) recs[i] = (struct gr_batch_rec){"k", 1, val, 100, NULL, 0, ts[i]};
    size_t len;
    uint8_t *b = gr_batch_build(recs, n, NULL, &len);
    struct gr_append_info info;
    CHECK(gr_plog_append_as_leader(log, b, len, 0, &info) == 0 && info.error == 0);
    free(b);
    return info.first_offset;
}

static struct gr_plog *open_log(const char *name, int64_t rp, int32_t index_max) {
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    cfg.segment_bytes = 2048;
    cfg.index_interval_bytes = 300;
    if (index_max) cfg.index_max_bytes = index_max;
    struct gr_plog *log = NULL;
    CHECK(gr_plog_open_dir(pdir(name), &cfg, rp, &log) == 0 && log);
    return log;
}

/* Reads a .timeindex file; returns the entry count (-1 missing), entries in ts/rel. */
static int read_tidx(const char *path, int64_t *ts, uint32_t *rel, int max) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    uint8_t e[12];
    int n = 0;
    while (fread(e, 1, 12, f) == 12) {
        if (n < max) {
            ts[n] = (int64_t)gr_be64(e);
            rel[n] = gr_be32(e + 8);
        }
        n++;
    }
    fclose(f);
    return n;
}

static void test_structure(void) {
    struct gr_time_index t = {0};
    CHECK(!gr_time_index_maybe_append(&t, -1, 0)); /* no timestamp: never indexed */
    CHECK(gr_time_index_maybe_append(&t, 100, 3));
    CHECK(!gr_time_index_maybe_append(&t, 100, 5)); /* not strictly later */
    CHECK(!gr_time_index_maybe_append(&t, 90, 6));
    CHECK(!gr_time_index_maybe_append(&t, 200, 2)); /* offset going back */
    CHECK(gr_time_index_maybe_append(&t, 200, 7));
    CHECK(gr_time_index_maybe_append(&t, 300, 7));
    CHECK(t.n == 3);
    CHECK(gr_time_index_lookup(&t, 50) == -1 && gr_time_index_lookup(&t, 100) == 0);
    CHECK(gr_time_index_lookup(&t, 299) == 1 && gr_time_index_lookup(&t, 1000) == 2);
    uint8_t buf[36];
    gr_time_index_encode(&t, 0, buf);
    /* Kafka's layout: i64 timestamp then i32 relative offset, big-endian */
    static const uint8_t first[12] = {0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 3};
    CHECK(memcmp(buf, first, 12) == 0);
    struct gr_time_index u = {0};
    CHECK(gr_time_index_decode(&u, buf, 36, 7) == 0 && u.n == 3 && u.n_file == 3 && u.e[2].ts == 300);
    CHECK(gr_time_index_decode(&u, buf, 36, 6) == -1 && u.n == 0); /* offset past the end */
    CHECK(gr_time_index_decode(&u, buf, 35, 7) == -1);
    uint8_t zero[24] = {0};
    CHECK(gr_time_index_decode(&u, zero, 24, 7) == -1); /* Kafka's preallocated zero tail */
    CHECK(gr_time_index_decode(&u, buf, 0, 7) == 0 && u.n == 0);
    gr_time_index_truncate(&t, 7);
    CHECK(t.n == 1);
    gr_time_index_free(&t);
    gr_time_index_free(&u);
}

/* ts(offset) = 1000 + 10 * offset, except a late record at offset 50 with ts 500. */
static int64_t ts_of(int64_t o) { return o == 50 ? 500 : 1000 + 10 * o; }

static int64_t fill(struct gr_plog *log, int batches) {
    int64_t o = gr_plog_end_offset(log);
    for (int b = 0; b < batches; b++) {
        int64_t ts[3];
        for (int i = 0; i < 3; i++) ts[i] = ts_of(o + i);
        CHECK(append_ts(log, 3, ts) == o);
        o += 3;
    }
    return o;
}

/* Brute force: the first offset >= start whose ts >= t, or -1. */
static int64_t expect_for(int64_t t, int64_t start, int64_t end) {
    for (int64_t o = start; o < end; o++)
        if (ts_of(o) >= t) return o;
    return -1;
}

static void check_lookups(struct gr_plog *log, int64_t end) {
    int64_t start = gr_plog_start_offset(log);
    for (int64_t t = 400; t < 1000 + 10 * end + 20; t += 7) {
        int64_t off, ts;
        CHECK(gr_plog_offset_for_timestamp(log, t, &off, &ts) == 0);
        int64_t want = expect_for(t, start, end);
        CHECKF(off == want, "t=%" PRId64 " got %" PRId64 " want %" PRId64, t, off, want);
        if (want >= 0) CHECK(ts == ts_of(want));
    }
}

static void test_log_index(void) {
    struct gr_plog *log = open_log("ti-0", 0, 0);
    int64_t end = fill(log, 60);
    int segs = gr_plog_segment_count(log);
    CHECK(segs >= 5);
    check_lookups(log, end);
    /* Every rolled segment's .timeindex ends with (its largest timestamp, that batch's last
     * offset): the final entry Kafka adds when a segment becomes inactive. */
    int64_t base = 0;
    int checked = 0;
    for (int64_t o = 0; o < end; o += 3) {
        struct stat st;
        char lp[512];
        snprintf(lp, sizeof lp, "%s/%020" PRId64 ".log", pdir("ti-0"), o);
        if (stat(lp, &st) != 0 || o == 0) continue;
        int64_t ts[256];
        uint32_t rel[256];
        int n = read_tidx(tpath("ti-0", base), ts, rel, 256);
        CHECK(n >= 1);
        if (n >= 1) {
            int64_t mx = -1, mo = -1;
            for (int64_t x = base; x < o; x++)
                if (ts_of(x) > mx) mx = ts_of(x), mo = x;
            /* batch granularity: the offset is the last offset of the batch holding the max */
            CHECK(ts[n - 1] == mx && base + rel[n - 1] == (mo / 3) * 3 + 2);
            for (int i = 1; i < n; i++) CHECK(ts[i] > ts[i - 1] && rel[i] >= rel[i - 1]);
        }
        base = o;
        checked++;
    }
    CHECK(checked == segs - 1);
    /* Clean close + reopen at the recovery point: answers unchanged. */
    CHECK(gr_plog_flush(log) == 0);
    int64_t rp = gr_plog_recovery_point(log);
    gr_plog_close(log);
    log = open_log("ti-0", rp, 0);
    check_lookups(log, end);
    /* The active segment got its final entry at close too. */
    gr_plog_close(log);
    int64_t ts[256];
    uint32_t rel[256];
    CHECK(read_tidx(tpath("ti-0", base), ts, rel, 256) >= 1);
    /* Missing and garbage time indexes are rebuilt. */
    unlink(tpath("ti-0", 0));
    int fd = open(tpath("ti-0", base), O_WRONLY | O_TRUNC);
    CHECK(fd >= 0 && write(fd, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 24) == 24);
    close(fd);
    log = open_log("ti-0", rp, 0);
    check_lookups(log, end);
    gr_plog_close(log);
    CHECK(read_tidx(tpath("ti-0", 0), ts, rel, 256) >= 1);
    /* Unclean shutdown (recovery point 0): everything recovered, same answers. */
    log = open_log("ti-0", 0, 0);
    check_lookups(log, end);
    /* Truncation drops entries past the new end. */
    CHECK(gr_plog_truncate_to(log, end - 10) == 0);
    end = gr_plog_end_offset(log);
    check_lookups(log, end);
    end = fill(log, 5);
    check_lookups(log, end);
    gr_plog_close(log);
}

static void test_retention_by_largest_ts(void) {
    struct gr_plog *log = open_log("ti-ret-0", 0, 0);
    /* Segment k holds batches with ts 100000*k + small; segment 2 also has one late record
     * with a new timestamp, so it must survive while 0, 1 and 3 expire. */
    int64_t now = 10000000;
    int64_t bases[6];
    for (int k = 0; k < 6; k++) {
        bases[k] = gr_plog_end_offset(log);
        for (int b = 0; b < 4; b++) {
            int64_t ts[3] = {100000 * k + b, 100000 * k + b, 100000 * k + b};
            if (k == 2 && b == 3) ts[1] = now - 10;
            append_ts(log, 3, ts);
        }
        /* force a roll: fill the rest of segment.bytes */
        while (gr_plog_segment_count(log) == k + 1) {
            int64_t ts[3] = {100000 * k + 50, 100000 * k + 50, 100000 * k + 50};
            if (k == 5) break;
            append_ts(log, 3, ts);
        }
    }
    CHECK(gr_plog_segment_count(log) >= 6);
    CHECK(gr_plog_flush(log) == 0);
    int64_t rp = gr_plog_recovery_point(log);
    gr_plog_close(log); /* largest timestamps must come back from the .timeindex files */
    log = open_log("ti-ret-0", rp, 0);
    /* retention 1 s: segments 0 and 1 expire; 2 stops the scan (its largest ts is recent),
     * as Kafka's deletion from the oldest stops at the first segment that does not qualify. */
    int del = gr_plog_apply_retention(log, gr_plog_end_offset(log), 1000, -1, now);
    CHECK(del >= 2);
    CHECKF(gr_plog_start_offset(log) > bases[1] && gr_plog_start_offset(log) <= bases[2], "start %" PRId64 " bases %" PRId64 " %" PRId64 " %" PRId64 " del %d", gr_plog_start_offset(log), bases[1], bases[2], bases[3], del);
    gr_plog_close(log);
}

static void test_index_full_rolls(void) {
    /* segment.index.bytes = 48: at most 3 time entries (last slot reserved) */
    struct gr_plog *log = open_log("ti-full-0", 0, 48);
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    cfg.segment_bytes = 1 << 20;
    cfg.index_interval_bytes = 300;
    cfg.index_max_bytes = 48;
    CHECK(gr_plog_set_config(log, &cfg) == 0);
    fill(log, 60);
    CHECK(gr_plog_segment_count(log) > 3);
    int64_t ts[16];
    uint32_t rel[16];
    CHECK(read_tidx(tpath("ti-full-0", 0), ts, rel, 16) <= 4);
    gr_plog_close(log);
}

static int16_t try_append(struct gr_plog *log, int64_t ts, int16_t attrs, struct gr_append_info *info) {
    struct gr_batch_rec rec = {"k", 1, "v", 1, NULL, 0, ts};
    struct gr_batch_build_opts o = GR_BATCH_BUILD_OPTS_INIT;
    o.attributes = attrs;
    size_t len;
    uint8_t *b = gr_batch_build(&rec, 1, &o, &len);
    CHECK(gr_plog_append_as_leader(log, b, len, 0, info) == 0);
    free(b);
    return info->error;
}

static void test_timestamp_rules(void) {
    struct gr_plog *log = open_log("ts-rules-0", 0, 0);
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    cfg.timestamp_difference_max_ms = 60000;
    CHECK(gr_plog_set_config(log, &cfg) == 0);
    struct gr_append_info info;
    int64_t now = gr_wall_ms();
    CHECK_KERR(try_append(log, now - 120000, 0, &info), GR_KERR_INVALID_TIMESTAMP);
    CHECK_KERR(try_append(log, now + 120000, 0, &info), GR_KERR_INVALID_TIMESTAMP);
    CHECK_KERR(try_append(log, now - 1000, 0, &info), GR_KERR_NONE);
    CHECK_KERR(try_append(log, -1, 0, &info), GR_KERR_NONE); /* no timestamp: exempt */
    /* a producer may not claim LogAppendTime */
    CHECK_KERR(try_append(log, now, GR_BATCH_ATTR_LOG_APPEND_TIME, &info), GR_KERR_INVALID_TIMESTAMP);
    CHECK(gr_plog_end_offset(log) == 2);
    /* LogAppendTime: the broker stamps now into maxTimestamp, sets bit 3, recomputes the CRC;
     * the difference check does not apply. */
    cfg.log_append_time = true;
    CHECK(gr_plog_set_config(log, &cfg) == 0);
    int64_t before = gr_wall_ms();
    CHECK_KERR(try_append(log, 5, 0, &info), GR_KERR_NONE);
    int64_t after = gr_wall_ms();
    CHECK(info.log_append_time >= before && info.log_append_time <= after);
    struct gr_plog_read_result r;
    CHECK(gr_plog_read(log, 2, 1 << 20, -1, true, &r) == 0 && r.len > 0);
    struct gr_batch_info bi;
    CHECK(gr_batch_validate_one(r.data, r.len, 0, &bi) == GR_BATCH_OK); /* CRC valid */
    CHECK((bi.Attributes & GR_BATCH_ATTR_LOG_APPEND_TIME) && bi.MaxTimestamp == info.log_append_time);
    free(r.data);
    int64_t off, ts;
    CHECK(gr_plog_offset_for_timestamp(log, before, &off, &ts) == 0 && off == 2 && ts == info.log_append_time);
    gr_plog_close(log);
}

/* Batches compressed by the leader (compression.type lz4, gzip) and a LogAppendTime one: the
 * look-up answers the exact record inside the batch (27d4346 answered the batch's base offset),
 * also past a log start offset inside a batch, and after a reopen. */
static void test_compressed_batches(void) {
    const int codecs[2] = {3, 1};
    for (int c = 0; c < 2; c++) {
        char name[32];
        snprintf(name, sizeof name, "comp%d-0", c);
        struct gr_plog_config cfg;
        gr_plog_config_defaults(&cfg);
        cfg.segment_bytes = 500;
        cfg.index_interval_bytes = 100;
        cfg.compression_type = codecs[c];
        struct gr_plog *log = NULL;
        CHECK(gr_plog_open_dir(pdir(name), &cfg, 0, &log) == 0 && log);
        int64_t ts[50];
        for (int b = 0; b < 10; b++) { /* 10 batches of 50 records, timestamps 2000 + 10 * offset */
            for (int i = 0; i < 50; i++) ts[i] = 2000 + 10 * (b * 50 + i);
            CHECK(append_ts(log, 50, ts) == b * 50);
        }
        CHECK(gr_plog_segment_count(log) > 1);
        for (int round = 0; round < 2; round++) {
            for (int64_t o = 0; o < 500; o += 7) {
                int64_t off, got;
                CHECK(gr_plog_offset_for_timestamp(log, 2000 + 10 * o - 5, &off, &got) == 0);
                CHECKF(off == o && got == 2000 + 10 * o, "codec %d offset %lld: %lld", codecs[c], (long long)o,
                       (long long)off);
                CHECK(gr_plog_offset_for_timestamp(log, 2000 + 10 * o, &off, &got) == 0 && off == o);
            }
            int64_t off, got;
            CHECK(gr_plog_offset_for_timestamp(log, 2000 + 10 * 500, &off, &got) == 0 && off == -1 && got == -1);
            gr_plog_close(log);
            CHECK(gr_plog_open_dir(pdir(name), &cfg, 0, &log) == 0 && log); /* recovered from the files */
        }
        CHECK(gr_plog_maybe_increment_log_start_offset(log, 123) == 0); /* inside batch [100, 150) */
        int64_t off, got;
        CHECK(gr_plog_offset_for_timestamp(log, 0, &off, &got) == 0 && off == 123 && got == 2000 + 10 * 123);
        gr_plog_close(log);
    }
}

int main(void) {
    gr_log_set_level(GR_LOG_WARN);
    snprintf(g_root, sizeof g_root, "/tmp/gr-tidx-XXXXXX");
    if (!mkdtemp(g_root)) return 1;
    test_structure();
    test_log_index();
    test_retention_by_largest_ts();
    test_index_full_rolls();
    test_timestamp_rules();
    test_compressed_batches();
    nftw(g_root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    if (test_failures) fprintf(stderr, "test_storage_time_index: %d failures\n", test_failures);
    else printf("test_storage_time_index: ok\n");
    return test_failures ? 1 : 0;
}
