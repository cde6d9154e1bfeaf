/* Producer state (idempotence) in the partition log: Kafka 2.7's sequence and epoch rules,
 * duplicates answered with their original offsets, follower state, snapshot files (layout,
 * corruption, reload), rebuild after truncation, expiry. */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "storage/batch.h"
#include "common/be.h"
#include "storage/log.h"
#include "storage/producer_state.h"
#include "support/check.h"

int test_failures;
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

static int64_t g_ts = 1700000000000LL;

/* One idempotent batch of n records. */
static uint8_t *mk(int64_t pid, int16_t epoch, int32_t seq, int n, size_t *len) {
    struct gr_batch_rec recs[64];
    for (int i = 0; i < n; i++) recs[i] = (struct gr_batch_rec){"k", 1, "value", 5, NULL, 0, g_ts + i};
    struct gr_batch_build_opts o = GR_BATCH_BUILD_OPTS_INIT;
    o.producer_id = pid;
    o.producer_epoch = epoch;
    o.base_sequence = seq;
    return gr_batch_build(recs, n, &o, len);
}

/* Leader append; returns the Kafka error, first and last get the offsets answered. */
static int16_t produce(struct gr_plog *log, int64_t pid, int16_t epoch, int32_t seq, int n, int64_t *first,
                       int64_t *last) {
    size_t len;
    uint8_t *b = mk(pid, epoch, seq, n, &len);
    struct gr_append_info info;
    int rc = gr_plog_append_as_leader(log, b, len, 0, &info);
    free(b);
    CHECK(rc == 0);
    if (first) *first = info.first_offset;
    if (last) *last = info.last_offset;
    return info.error;
}

static struct gr_plog *open_log(const char *name, int32_t segment_bytes) {
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    if (segment_bytes) cfg.segment_bytes = segment_bytes;
    struct gr_plog *log = NULL;
    CHECK(gr_plog_open_dir(pdir(name), &cfg, 0, &log) == 0);
    return log;
}

static int count_snapshots(const char *dir, int64_t *newest) {
    DIR *d = opendir(dir);
    int n = 0;
    if (newest) *newest = -1;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l == 29 && strcmp(de->d_name + 20, ".snapshot") == 0) {
            n++;
            int64_t off = strtoll(de->d_name, NULL, 10);
            if (newest && off > *newest) *newest = off;
        }
    }
    if (d) closedir(d);
    return n;
}

static void test_sequence_rules(void) {
    struct gr_plog *log = open_log("seq-0", 0);
    int64_t f, l;
    CHECK(produce(log, 1000, 0, 0, 3, &f, &l) == GR_KERR_NONE && f == 0 && l == 2);
    CHECK(produce(log, 1000, 0, 3, 2, &f, &l) == GR_KERR_NONE && f == 3 && l == 4);
    /* duplicate in the window: original offsets, nothing appended */
    CHECK(produce(log, 1000, 0, 0, 3, &f, &l) == GR_KERR_NONE && f == 0 && l == 2);
    CHECK(produce(log, 1000, 0, 3, 2, &f, &l) == GR_KERR_NONE && f == 3 && l == 4);
    CHECK(gr_plog_end_offset(log) == 5);
    {   /* the duplicate's answer carries the original batch's maxTimestamp as log append time */
        size_t len;
        uint8_t *b = mk(1000, 0, 3, 2, &len);
        struct gr_append_info info;
        CHECK(gr_plog_append_as_leader(log, b, len, 0, &info) == 0 && info.error == GR_KERR_NONE &&
              info.first_offset == 3 && info.log_append_time == g_ts + 1 && info.record_count == 0);
        free(b);
        b = mk(1000, 0, 5, 1, &len); /* a fresh append answers -1 */
        CHECK(gr_plog_append_as_leader(log, b, len, 0, &info) == 0 && info.log_append_time == -1);
        free(b);
        CHECK(gr_plog_truncate_to(log, 5) == 0);
    }
    /* same first seq but a different last seq is not a duplicate: out of order */
    CHECK(produce(log, 1000, 0, 3, 1, NULL, NULL) == GR_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    /* five more batches push seq 0-2 and 3-4 out of the window of 5 */
    for (int i = 0; i < 5; i++) CHECK(produce(log, 1000, 0, 5 + i, 1, &f, NULL) == GR_KERR_NONE && f == 5 + i);
    CHECK(produce(log, 1000, 0, 5, 1, &f, NULL) == GR_KERR_NONE && f == 5); /* oldest in window */
    CHECK(produce(log, 1000, 0, 3, 2, NULL, NULL) == GR_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER); /* out of window */
    CHECK(gr_plog_end_offset(log) == 10);
    /* gap */
    CHECK(produce(log, 1000, 0, 11, 1, NULL, NULL) == GR_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    CHECK(produce(log, 1000, 0, 10, 1, &f, NULL) == GR_KERR_NONE && f == 10);
    /* epoch bump: must start at 0 */
    CHECK(produce(log, 1000, 1, 5, 1, NULL, NULL) == GR_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    CHECK(produce(log, 1000, 1, 0, 1, &f, NULL) == GR_KERR_NONE && f == 11);
    /* stale epoch */
    CHECK(produce(log, 1000, 0, 11, 1, NULL, NULL) == GR_KERR_INVALID_PRODUCER_EPOCH);
    /* the old epoch's batches are no longer duplicates (a new epoch clears them) */
    CHECK(produce(log, 1000, 0, 10, 1, NULL, NULL) == GR_KERR_INVALID_PRODUCER_EPOCH);
    /* no state: any sequence and epoch accepted */
    CHECK(produce(log, 2000, 7, 42, 2, &f, NULL) == GR_KERR_NONE && f == 12);
    CHECK(produce(log, 2000, 7, 44, 1, &f, NULL) == GR_KERR_NONE && f == 14);
    struct gr_pstate_entry e;
    CHECK(gr_plog_producer_state(log, 2000, &e) && e.epoch == 7 && e.n == 2 && e.batches[1].last_seq == 44);
    /* wrap at INT32_MAX */
    CHECK(produce(log, 3000, 0, INT32_MAX - 1, 2, &f, NULL) == GR_KERR_NONE && f == 15);
    CHECK(produce(log, 3000, 0, 0, 1, &f, NULL) == GR_KERR_NONE && f == 17);
    CHECK(produce(log, 3000, 0, 2, 1, NULL, NULL) == GR_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    /* a batch whose sequences wrap inside it: INT32_MAX-1 .. 1 */
    CHECK(produce(log, 4000, 0, INT32_MAX - 1, 4, &f, &l) == GR_KERR_NONE && f == 18 && l == 21);
    CHECK(gr_plog_producer_state(log, 4000, &e) && e.batches[0].last_seq == 1 &&
          gr_pstate_batch_first_seq(&e.batches[0]) == INT32_MAX - 1);
    CHECK(produce(log, 4000, 0, INT32_MAX - 1, 4, &f, &l) == GR_KERR_NONE && f == 18 && l == 21); /* dup */
    CHECK(produce(log, 4000, 0, 2, 1, &f, NULL) == GR_KERR_NONE && f == 22);
    /* producer id with baseSequence < 0: INVALID_RECORD */
    CHECK(produce(log, 5000, 0, -1, 1, NULL, NULL) == GR_KERR_INVALID_RECORD);
    /* non-idempotent batches are untouched by all this */
    CHECK(produce(log, -1, -1, -1, 2, &f, NULL) == GR_KERR_NONE && f == 23);
    CHECK(produce(log, -1, -1, -1, 2, &f, NULL) == GR_KERR_NONE && f == 25);
    CHECK(gr_plog_producer_count(log) == 4);
    /* two batches for one partition in one request: INVALID_RECORD, nothing appended (Kafka 2.7's
     * LogValidator); before, a duplicate among them made the log acknowledge the other unwritten */
    size_t l1, l2;
    uint8_t *b1 = mk(1000, 1, 0, 1, &l1), *b2 = mk(1000, 1, 1, 1, &l2); /* a duplicate, a new batch */
    uint8_t *both = gr_malloc(l1 + l2);
    memcpy(both, b1, l1);
    memcpy(both + l1, b2, l2);
    struct gr_append_info info;
    CHECK(gr_plog_append_as_leader(log, both, l1 + l2, 0, &info) == 0 && info.error == GR_KERR_INVALID_RECORD &&
          info.first_offset == -1);
    CHECK(gr_plog_end_offset(log) == 27);
    CHECK(gr_plog_producer_state(log, 1000, &e) && e.batches[e.n - 1].last_seq == 0);
    CHECK(produce(log, 1000, 1, 0, 1, &f, NULL) == GR_KERR_NONE && f == 11); /* alone, still a duplicate */
    free(b1), free(b2);
    /* the producer state alone (as followers feed it several batches): batches of one producer are
     * checked against each other... */
    struct gr_pstate *ps = gr_pstate_new(pdir("pstate-multi"), 604800000);
    gr_pstate_assume_no_snapshots(ps);
    struct gr_pstate_append app;
    struct gr_pstate_batch dup;
    bool is_dup;
    b1 = mk(1000, 1, 1, 2, &l1), b2 = mk(1000, 1, 5, 1, &l2);
    both = gr_realloc(both, l1 + l2);
    memcpy(both, b1, l1);
    memcpy(both + l1, b2, l2);
    gr_batch_set_base_offset(both + l1, 2);
    gr_pstate_append_init(&app);
    CHECK(gr_pstate_prepare(ps, both, l1 + l2, GR_PSTATE_CLIENT, &app, &dup, &is_dup) == GR_KERR_NONE && !is_dup);
    gr_pstate_append_release(&app); /* a producer with no state: any sequence, for every batch */
    b2 = (free(b2), mk(1000, 1, 3, 1, &l2));
    both = gr_realloc(both, l1 + l2);
    memcpy(both + l1, b2, l2);
    gr_batch_set_base_offset(both + l1, 2);
    gr_pstate_append_init(&app);
    CHECK(gr_pstate_prepare(ps, both, l1 + l2, GR_PSTATE_CLIENT, &app, &dup, &is_dup) == GR_KERR_NONE);
    gr_pstate_commit(ps, &app, 3);
    gr_pstate_append_release(&app);
    b2 = (free(b2), mk(1000, 1, 5, 1, &l2));
    both = gr_realloc(both, l1 + l2);
    memcpy(both + l1, b2, l2);
    gr_batch_set_base_offset(both, 3);
    gr_batch_set_base_offset(both + l1, 5);
    gr_pstate_append_init(&app); /* the last sequence is 3: 5 does not continue it */
    CHECK(gr_pstate_prepare(ps, b2, l2, GR_PSTATE_CLIENT, &app, &dup, &is_dup) == GR_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    gr_pstate_append_release(&app);
    /* ... and a duplicate answers only for an append of its own */
    gr_pstate_append_init(&app);
    CHECK(gr_pstate_prepare(ps, both, l1 + l2, GR_PSTATE_CLIENT, &app, &dup, &is_dup) == GR_KERR_INVALID_RECORD);
    gr_pstate_append_release(&app);
    gr_pstate_append_init(&app);
    CHECK(gr_pstate_prepare(ps, both, l1, GR_PSTATE_CLIENT, &app, &dup, &is_dup) == GR_KERR_NONE && is_dup &&
          dup.last_offset == 1);
    gr_pstate_append_release(&app);
    gr_pstate_free(ps);
    free(b1), free(b2), free(both);
    gr_plog_close(log);
}

/* The follower builds the same state from replicated bytes; as the new leader it deduplicates. */
static void test_follower_state(void) {
    struct gr_plog *leader = open_log("fol-leader", 0), *follower = open_log("fol-follower", 0);
    int64_t f, l;
    for (int i = 0; i < 3; i++) CHECK(produce(leader, 77, 2, i * 2, 2, NULL, NULL) == GR_KERR_NONE);
    CHECK(produce(leader, 77, 2, 5, 1, NULL, NULL) == GR_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    struct gr_plog_read_result rr;
    CHECK(gr_plog_read(leader, 0, 1 << 20, -1, true, &rr) == 0 && rr.len > 0);
    struct gr_append_info info;
    CHECK(gr_plog_append_as_follower(follower, rr.data, rr.len, &info) == 0);
    free(rr.data);
    struct gr_pstate_entry a, b;
    CHECK(gr_plog_producer_state(leader, 77, &a) && gr_plog_producer_state(follower, 77, &b));
    CHECK(a.epoch == b.epoch && a.n == b.n && a.n == 3 && memcmp(a.batches, b.batches, sizeof a.batches) == 0);
    /* the follower becomes leader: the retry of the last acknowledged batch is a duplicate */
    CHECK(produce(follower, 77, 2, 4, 2, &f, &l) == GR_KERR_NONE && f == 4 && l == 5);
    CHECK(gr_plog_end_offset(follower) == 6);
    CHECK(produce(follower, 77, 2, 6, 1, &f, NULL) == GR_KERR_NONE && f == 6);
    /* a follower never rejects, even a stale epoch (only logged) */
    size_t len;
    uint8_t *stale = mk(77, 1, 0, 1, &len);
    gr_batch_set_base_offset(stale, 6);
    CHECK(gr_plog_append_as_follower(leader, stale, len, &info) == 0 && info.error == GR_KERR_NONE);
    free(stale);
    gr_plog_close(leader);
    gr_plog_close(follower);
}

static void test_snapshot_codec(void) {
    struct gr_pstate_entry e[2];
    memset(e, 0, sizeof e);
    e[0] = (struct gr_pstate_entry){.producer_id = 9, .epoch = 3, .coordinator_epoch = -1, .last_timestamp = 123,
                                    .txn_first_offset = -1, .n = 2};
    e[0].batches[0] = (struct gr_pstate_batch){4, 10, 1, 100};
    e[0].batches[1] = (struct gr_pstate_batch){7, 20, 2, 123};
    e[1] = (struct gr_pstate_entry){.producer_id = 11, .epoch = 0, .coordinator_epoch = 5, .last_timestamp = 9,
                                    .txn_first_offset = -1, .n = 0};
    size_t len;
    uint8_t *buf = gr_pstate_snapshot_encode(e, 2, &len);
    CHECK(len == 10 + 3 * 46); /* one entry per cached batch, one for a producer with none */
    CHECK(gr_be16(buf) == 1 && gr_be32(buf + 6) == 3);
    CHECK(gr_be32(buf + 2) == gr_crc32c(0, buf + 6, len - 6));
    const uint8_t *q = buf + 10; /* producer 9's older batch, Kafka's field order */
    CHECK((int64_t)gr_be64(q) == 9 && (int16_t)gr_be16(q + 8) == 3 && (int32_t)gr_be32(q + 10) == 4 &&
          (int64_t)gr_be64(q + 14) == 10 && (int32_t)gr_be32(q + 22) == 1 && (int64_t)gr_be64(q + 26) == 123 &&
          (int32_t)gr_be32(q + 34) == -1 && (int64_t)gr_be64(q + 38) == -1);
    q += 46; /* its newest batch last: the entry Kafka's reader keeps */
    CHECK((int64_t)gr_be64(q) == 9 && (int16_t)gr_be16(q + 8) == 3 && (int32_t)gr_be32(q + 10) == 7 &&
          (int64_t)gr_be64(q + 14) == 20 && (int32_t)gr_be32(q + 22) == 2 && (int64_t)gr_be64(q + 26) == 123 &&
          (int32_t)gr_be32(q + 34) == -1 && (int64_t)gr_be64(q + 38) == -1);
    q += 46; /* no data batch: last_sequence -1, last_offset -1 */
    CHECK((int32_t)gr_be32(q + 10) == -1 && (int64_t)gr_be64(q + 14) == -1 && (int32_t)gr_be32(q + 34) == 5);
    struct gr_pstate_entry *out;
    int n;
    CHECK(gr_pstate_snapshot_decode(buf, len, &out, &n) == 0 && n == 2);
    CHECK(out[0].producer_id == 9 && out[0].epoch == 3 && out[0].n == 2 && out[0].batches[0].last_seq == 4 &&
          out[0].batches[0].last_offset == 10 && gr_pstate_batch_first_seq(&out[0].batches[0]) == 3 &&
          out[0].batches[1].last_seq == 7 && out[0].batches[1].last_offset == 20 &&
          gr_pstate_batch_first_seq(&out[0].batches[1]) == 5 && out[0].last_timestamp == 123);
    CHECK(out[1].n == 0 && out[1].epoch == 0 && out[1].coordinator_epoch == 5);
    free(out);
    /* a Kafka-written file (one entry per producer, its newest batch) loads as one batch */
    struct gr_pstate_entry one = e[0];
    one.batches[0] = one.batches[1];
    one.n = 1;
    size_t klen;
    uint8_t *kbuf = gr_pstate_snapshot_encode(&one, 1, &klen);
    CHECK(klen == 10 + 46 && gr_pstate_snapshot_decode(kbuf, klen, &out, &n) == 0 && n == 1 && out[0].n == 1 &&
          out[0].batches[0].last_seq == 7);
    free(out);
    free(kbuf);
    /* more than 5 entries of one producer keep the newest 5; an epoch change starts over */
    struct gr_pstate_entry six[2];
    for (int k = 0; k < 2; k++) {
        six[k] = (struct gr_pstate_entry){.producer_id = 4, .epoch = (int16_t)k, .coordinator_epoch = -1,
                                          .last_timestamp = 1, .txn_first_offset = -1, .n = 4};
        for (int j = 0; j < 4; j++) six[k].batches[j] = (struct gr_pstate_batch){j, 10 * k + j, 0, 1};
    }
    kbuf = gr_pstate_snapshot_encode(six, 2, &klen); /* 8 entries of producer 4: epochs 0, then 1 */
    CHECK(klen == 10 + 8 * 46 && gr_pstate_snapshot_decode(kbuf, klen, &out, &n) == 0 && n == 1);
    CHECK(out[0].epoch == 1 && out[0].n == 4 && out[0].batches[0].last_offset == 10 && out[0].batches[3].last_offset == 13);
    free(out);
    six[0].epoch = 1; /* same epoch: 8 batches, the newest 5 stay */
    free(kbuf);
    kbuf = gr_pstate_snapshot_encode(six, 2, &klen);
    CHECK(gr_pstate_snapshot_decode(kbuf, klen, &out, &n) == 0 && n == 1 && out[0].n == 5 &&
          out[0].batches[0].last_offset == 3 && out[0].batches[4].last_offset == 13);
    free(out);
    free(kbuf);
    buf[20] ^= 1; /* CRC */
    CHECK(gr_pstate_snapshot_decode(buf, len, &out, &n) == GR_ECORRUPT);
    buf[20] ^= 1;
    buf[1] = 2; /* version */
    CHECK(gr_pstate_snapshot_decode(buf, len, &out, &n) == GR_ECORRUPT);
    buf[1] = 1;
    CHECK(gr_pstate_snapshot_decode(buf, len - 1, &out, &n) == GR_ECORRUPT); /* truncated */
    CHECK(gr_pstate_snapshot_decode(buf, 3, &out, &n) == GR_ECORRUPT);
    free(buf);
}

static void write_file(const char *path, const void *data, size_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, data, len) == (ssize_t)len);
    close(fd);
}

static void test_snapshot_files(void) {
    const char *dir = pdir("snap-0");
    /* small segments: rolls write snapshots named by the new segment base */
    struct gr_plog *log = open_log("snap-0", 400);
    int64_t f;
    for (int i = 0; i < 30; i++) CHECK(produce(log, 500 + i % 3, 0, i / 3, 1, &f, NULL) == GR_KERR_NONE && f == i);
    CHECK(gr_plog_segment_count(log) > 3);
    int64_t newest;
    int nsnap = count_snapshots(dir, &newest);
    CHECK(nsnap >= 1 && nsnap <= 2); /* only the last two segments' snapshots are kept */
    gr_plog_close(log);
    CHECK(count_snapshots(dir, &newest) >= 1 && newest == 30); /* clean close: at the log end offset */
    char path[600];
    snprintf(path, sizeof path, "%s/%020d.snapshot", dir, 30);
    CHECK(access(path, F_OK) == 0);

    /* reopen: the state comes back; the last batch of each producer is a duplicate */
    struct gr_pstate_entry e;
    log = open_log("snap-0", 400);
    CHECK(gr_plog_producer_count(log) == 3);
    CHECK(produce(log, 502, 0, 9, 1, &f, NULL) == GR_KERR_NONE && f == 29);
    CHECK(produce(log, 500, 0, 11, 1, NULL, NULL) == GR_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    CHECK(produce(log, 500, 0, 10, 1, &f, NULL) == GR_KERR_NONE && f == 30);
    /* every cached batch came back, not only the newest (Kafka keeps only that one) */
    CHECK(gr_plog_producer_state(log, 501, &e) && e.n == 5 && e.batches[0].last_seq == 5);
    CHECK(produce(log, 501, 0, 5, 1, &f, NULL) == GR_KERR_NONE && f == 16);
    CHECK(produce(log, 501, 0, 7, 1, &f, NULL) == GR_KERR_NONE && f == 22);
    CHECK(produce(log, 501, 0, 4, 1, NULL, NULL) == GR_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER); /* older than 5 */
    gr_plog_close(log);

    /* corrupt newest snapshot: deleted, an older one (or the log) is used */
    CHECK(count_snapshots(dir, &newest) >= 1 && newest == 31);
    snprintf(path, sizeof path, "%s/%020" PRId64 ".snapshot", dir, newest);
    write_file(path, "garbage!!!!!!!", 14);
    log = open_log("snap-0", 400);
    CHECK(access(path, F_OK) != 0 || count_snapshots(dir, NULL) >= 1);
    CHECK(gr_plog_producer_state(log, 500, &e) && e.batches[e.n - 1].last_seq == 10 &&
          e.batches[e.n - 1].last_offset == 30);
    CHECK(produce(log, 500, 0, 10, 1, &f, NULL) == GR_KERR_NONE && f == 30);
    gr_plog_close(log);

    /* crash without any snapshot: the whole log is replayed */
    DIR *d = opendir(dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strstr(de->d_name, ".snapshot")) {
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            unlink(path);
        }
    closedir(d);
    log = open_log("snap-0", 400);
    CHECK(gr_plog_producer_count(log) == 3);
    CHECK(gr_plog_producer_state(log, 501, &e) && e.epoch == 0 && e.n == 5 && e.batches[4].last_seq == 9);
    CHECK(produce(log, 501, 0, 7, 1, &f, NULL) == GR_KERR_NONE && f == 22); /* dup, from replay */
    CHECK(produce(log, 501, 0, 10, 1, &f, NULL) == GR_KERR_NONE && f == 31);
    gr_plog_close(log);
}

static void test_truncation(void) {
    const char *dir = pdir("trunc-0");
    struct gr_plog *log = open_log("trunc-0", 400);
    int64_t f;
    for (int i = 0; i < 20; i++) CHECK(produce(log, 42, 0, i, 1, &f, NULL) == GR_KERR_NONE && f == i);
    /* leader-epoch truncation to the middle (the follower path): state is rebuilt */
    CHECK(gr_plog_truncate_to(log, 12) == 0 && gr_plog_end_offset(log) == 12);
    struct gr_pstate_entry e;
    CHECK(gr_plog_producer_state(log, 42, &e) && e.batches[e.n - 1].last_seq == 11 &&
          e.batches[e.n - 1].last_offset == 11);
    int64_t newest;
    count_snapshots(dir, &newest);
    CHECK(newest <= 12);
    CHECK(produce(log, 42, 0, 15, 1, NULL, NULL) == GR_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    CHECK(produce(log, 42, 0, 12, 1, &f, NULL) == GR_KERR_NONE && f == 12);
    CHECK(produce(log, 42, 0, 11, 1, &f, NULL) == GR_KERR_NONE && f == 11); /* dup */
    /* truncation into an older segment */
    CHECK(gr_plog_truncate_to(log, 3) == 0 && gr_plog_end_offset(log) == 3);
    CHECK(gr_plog_producer_state(log, 42, &e) && e.batches[e.n - 1].last_seq == 2);
    CHECK(produce(log, 42, 0, 3, 1, &f, NULL) == GR_KERR_NONE && f == 3);
    /* truncate to 0 removes the producer entirely */
    CHECK(gr_plog_truncate_to(log, 0) == 0);
    CHECK(!gr_plog_producer_state(log, 42, NULL));
    CHECK(produce(log, 42, 0, 17, 1, &f, NULL) == GR_KERR_NONE && f == 0); /* no state: accepted */
    /* truncate fully: no state, no snapshot */
    CHECK(gr_plog_truncate_fully_and_start_at(log, 100) == 0);
    CHECK(gr_plog_producer_count(log) == 0 && count_snapshots(dir, NULL) == 0);
    CHECK(produce(log, 42, 0, 99, 1, &f, NULL) == GR_KERR_NONE && f == 100);
    gr_plog_close(log);
}

static void test_expiry(void) {
    struct gr_plog *log = open_log("exp-0", 0);
    CHECK(produce(log, 1, 0, 0, 1, NULL, NULL) == GR_KERR_NONE);
    g_ts += 1000;
    CHECK(produce(log, 2, 0, 0, 1, NULL, NULL) == GR_KERR_NONE);
    int64_t exp = GR_PSTATE_DEFAULT_EXPIRATION_MS;
    CHECK(gr_plog_remove_expired_producers(log, g_ts - 1000 + exp - 1) == 0);
    CHECK(gr_plog_remove_expired_producers(log, g_ts - 1000 + exp) == 1);
    CHECK(!gr_plog_producer_state(log, 1, NULL) && gr_plog_producer_state(log, 2, NULL));
    CHECK(produce(log, 1, 0, 55, 1, NULL, NULL) == GR_KERR_NONE); /* expired = no state */
    gr_plog_close(log);
}

/* ---- ongoing transactions (Kafka's ongoingTxns): the first unstable offset without a scan ---- */

/* A transactional data batch (or a COMMIT/ABORT marker) of pid at base, replayed into ps. */
static void txn_at(struct gr_pstate *ps, int64_t pid, int64_t base, int marker /* -1 data, 0 abort, 1 commit */) {
    uint8_t k[4] = {0, 0, 0, (uint8_t)(marker > 0)}, v[6] = {0, 0, 0, 0, 0, 0};
    struct gr_batch_rec r = marker >= 0 ? (struct gr_batch_rec){k, 4, v, 6, NULL, 0, g_ts}
                                        : (struct gr_batch_rec){"k", 1, "v", 1, NULL, 0, g_ts};
    struct gr_batch_build_opts o = GR_BATCH_BUILD_OPTS_INIT;
    o.base_offset = base;
    o.attributes = (int16_t)(GR_BATCH_ATTR_TRANSACTIONAL | (marker >= 0 ? GR_BATCH_ATTR_CONTROL : 0));
    o.producer_id = pid;
    o.producer_epoch = 0;
    o.base_sequence = marker >= 0 ? -1 : 0;
    size_t len;
    uint8_t *b = gr_batch_build(&r, 1, &o, &len);
    gr_pstate_load_batches(ps, b, len, base + 1);
    free(b);
    CHECK(gr_pstate_check_ongoing(ps));
}

static void test_ongoing_txns(void) {
    mkdir(pdir("ongoing-0"), 0755);
    struct gr_pstate *ps = gr_pstate_new(pdir("ongoing-0"), GR_PSTATE_DEFAULT_EXPIRATION_MS);
    CHECK(gr_pstate_first_ongoing_offset(ps) == -1);
    for (int i = 1; i <= 5; i++) txn_at(ps, i, 10 * i, -1);
    CHECK(gr_pstate_ongoing_count(ps) == 5 && gr_pstate_first_ongoing_offset(ps) == 10);
    txn_at(ps, 1, 60, -1); /* more data of an open transaction: its first offset stays */
    CHECK(gr_pstate_first_ongoing_offset(ps) == 10);
    txn_at(ps, 1, 61, 0); /* abort of the earliest */
    CHECK(gr_pstate_ongoing_count(ps) == 4 && gr_pstate_first_ongoing_offset(ps) == 20);
    txn_at(ps, 3, 62, 1); /* commit of one in the middle */
    CHECK(gr_pstate_ongoing_count(ps) == 3 && gr_pstate_first_ongoing_offset(ps) == 20);
    txn_at(ps, 2, 63, 0);
    CHECK(gr_pstate_first_ongoing_offset(ps) == 40);
    txn_at(ps, 9, 64, 1); /* a marker of a producer without an open transaction */
    CHECK(gr_pstate_ongoing_count(ps) == 2 && gr_pstate_first_ongoing_offset(ps) == 40);
    txn_at(ps, 1, 65, -1); /* producer 1 opens a new transaction, after the others */
    CHECK(gr_pstate_ongoing_count(ps) == 3 && gr_pstate_first_ongoing_offset(ps) == 40);
    /* expiry takes only producers without an open transaction, and old verification guards */
    gr_pstate_set_verification_enabled(true);
    CHECK(gr_pstate_start_verification(ps, 20, 0, g_ts) != 0 && gr_pstate_verification_count(ps) == 1);
    gr_pstate_set_verification_enabled(false);
    CHECK(gr_pstate_remove_expired(ps, g_ts + GR_PSTATE_DEFAULT_EXPIRATION_MS) == 3); /* 2, 3, 9 */
    CHECK(gr_pstate_check_ongoing(ps) && gr_pstate_first_ongoing_offset(ps) == 40);
    CHECK(gr_pstate_producer_count(ps) == 3 && gr_pstate_verification_count(ps) == 0);
    /* a snapshot keeps them; a reload rebuilds the order */
    CHECK(gr_pstate_take_snapshot(ps) == 0);
    struct gr_pstate *again = gr_pstate_new(pdir("ongoing-0"), GR_PSTATE_DEFAULT_EXPIRATION_MS);
    CHECK(gr_pstate_load_latest_snapshot(again, 0, g_ts) == 66);
    CHECK(gr_pstate_check_ongoing(again) && gr_pstate_ongoing_count(again) == 3);
    CHECK(gr_pstate_first_ongoing_offset(again) == 40);
    gr_pstate_truncate_fully(again, 100);
    CHECK(gr_pstate_first_ongoing_offset(again) == -1 && gr_pstate_check_ongoing(again));
    gr_pstate_free(again);
    gr_pstate_free(ps);

    /* random opens, appends, commits, aborts and expiries against a model */
    ps = gr_pstate_new(pdir("ongoing-0"), 1000);
    int64_t first[64];
    for (int i = 0; i < 64; i++) first[i] = -1;
    int64_t off = 0;
    uint32_t rnd = 12345;
    for (int step = 0; step < 20000; step++) {
        rnd = rnd * 1103515245u + 12345u;
        int pid = (int)((rnd >> 8) % 64);
        int op = (int)((rnd >> 20) % 8);
        if (op < 4) {
            txn_at(ps, pid, off, -1);
            if (first[pid] < 0) first[pid] = off;
        } else if (op < 7) {
            txn_at(ps, pid, off, op == 4);
            first[pid] = -1;
        } else if (step % 500 == 0) {
            gr_pstate_remove_expired(ps, INT64_MAX / 2);
            CHECK(gr_pstate_check_ongoing(ps));
        }
        off++;
        int64_t m = -1;
        int open = 0;
        for (int i = 0; i < 64; i++)
            if (first[i] >= 0) {
                open++;
                if (m < 0 || first[i] < m) m = first[i];
            }
        if (gr_pstate_first_ongoing_offset(ps) != m || gr_pstate_ongoing_count(ps) != open) {
            CHECK(!"the open-transaction heap disagrees with the model");
            break;
        }
    }
    gr_pstate_free(ps);
}

int main(void) {
    gr_log_set_level(GR_LOG_WARN);
    g_ts = gr_wall_ms();
    snprintf(g_root, sizeof g_root, "/tmp/gr-pstate-%d", (int)getpid());
    rm_rf(g_root);
    mkdir(g_root, 0755);
    test_sequence_rules();
    test_follower_state();
    test_snapshot_codec();
    test_snapshot_files();
    test_truncation();
    test_expiry();
    test_ongoing_txns();
    rm_rf(g_root);
    if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures);
    else printf("test_producer_state: all passed\n");
    return test_failures != 0;
}
