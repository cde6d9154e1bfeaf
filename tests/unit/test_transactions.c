/* Transactions below the coordinator's wire: the coordinator state machine (Kafka's
 * validPreviousStates), __transaction_state record codec and partitioning, the .txnindex file
 * (Kafka's 34-byte entries, collect rule, truncation, reload), the last stable offset and the
 * aborted-transaction list of a partition log fed with transactional batches and markers,
 * producer-state snapshots carrying open transactions, and the KIP-890 verification guard. */
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/kerr.h"
#include "common/util.h"
#include "coordinator/txn_log.h"
#include "storage/batch.h"
#include "common/be.h"
#include "storage/log.h"
#include "storage/producer_state.h"
#include "storage/txn_index.h"
#include "support/check.h"

int test_failures;
static char g_root[64];

/* fdatasync interposed: counts the syncs of .txnindex files (Kafka's LogSegment.flush flushes the
 * segment's txnIndex with it). */
static int g_txnindex_syncs;
int fdatasync(int fd) {
    char link[64], path[512];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n > 0) {
        path[n] = 0;
        if (n > 9 && strcmp(path + n - 9, ".txnindex") == 0) g_txnindex_syncs++;
    }
    return (int)syscall(SYS_fdatasync, fd);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void test_state_machine(void) {
    CHECK(gr_txn_transition_valid(GR_TXN_EMPTY, GR_TXN_ONGOING));
    CHECK(gr_txn_transition_valid(GR_TXN_ONGOING, GR_TXN_PREPARE_COMMIT));
    CHECK(gr_txn_transition_valid(GR_TXN_ONGOING, GR_TXN_PREPARE_ABORT));
    CHECK(gr_txn_transition_valid(GR_TXN_PREPARE_COMMIT, GR_TXN_COMPLETE_COMMIT));
    CHECK(gr_txn_transition_valid(GR_TXN_PREPARE_ABORT, GR_TXN_COMPLETE_ABORT));
    CHECK(gr_txn_transition_valid(GR_TXN_COMPLETE_COMMIT, GR_TXN_ONGOING));
    CHECK(gr_txn_transition_valid(GR_TXN_COMPLETE_ABORT, GR_TXN_EMPTY));
    CHECK(gr_txn_transition_valid(GR_TXN_EMPTY, GR_TXN_DEAD));
    CHECK(gr_txn_transition_valid(GR_TXN_PREPARE_EPOCH_FENCE, GR_TXN_PREPARE_ABORT));
    CHECK(!gr_txn_transition_valid(GR_TXN_EMPTY, GR_TXN_PREPARE_COMMIT));
    CHECK(!gr_txn_transition_valid(GR_TXN_PREPARE_COMMIT, GR_TXN_COMPLETE_ABORT));
    CHECK(!gr_txn_transition_valid(GR_TXN_PREPARE_ABORT, GR_TXN_ONGOING));
    CHECK(!gr_txn_transition_valid(GR_TXN_ONGOING, GR_TXN_DEAD));
    CHECK(!gr_txn_transition_valid(GR_TXN_ONGOING, GR_TXN_EMPTY));
    CHECK(strcmp(gr_txn_state_name(GR_TXN_PREPARE_COMMIT), "PrepareCommit") == 0);
}

static void test_txn_log_codec(void) {
    /* Java: "my-txn".hashCode() = 1059447998 (computed with Java's 31*h + c) */
    int32_t h = 0;
    for (const char *p = "my-txn"; *p; p++) h = (int32_t)((uint32_t)h * 31u + (unsigned char)*p);
    CHECK(gr_txn_partition_for("my-txn", 50) == (h < 0 ? -h : h) % 50);
    CHECK(gr_txn_partition_for("", 50) == 0);
    /* non-ASCII: Java hashes UTF-16 code units ("tx-\u00e9\u20ac\U0001F600".hashCode() = -929946833,
     * partition 33 of 50; the bytes of its UTF-8 form would give 46) */
    CHECK(gr_txn_partition_for("tx-\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 50) == 33);
    struct gr_txn_tp parts[] = {{"a", 0}, {"b", 3}, {"a", 2}};
    struct gr_txn_record r = {.producer_id = 4242, .producer_epoch = 7, .timeout_ms = 60000,
                              .state = GR_TXN_ONGOING, .n_parts = 3, .parts = parts, .update_ts = 11, .start_ts = 10};
    size_t kl, vl;
    uint8_t *k = gr_txn_log_key("tx-1", &kl);
    uint8_t *v = gr_txn_log_value(&r, &vl);
    CHECK(kl == 2 + 2 + 4 && gr_be16(k) == 0 && gr_be16(k + 2) == 4 && memcmp(k + 4, "tx-1", 4) == 0);
    /* version, pid, epoch, timeout, status, 2 topics: a [0,2], b [3], timestamps */
    CHECK(vl == 2 + 8 + 2 + 4 + 1 + 4 + (2 + 1 + 4 + 8) + (2 + 1 + 4 + 4) + 8 + 8);
    CHECK(v[16] == GR_TXN_ONGOING && gr_be32(v + 17) == 2);
    struct gr_txn_record d;
    CHECK(gr_txn_log_decode(k, kl, v, vl, &d) == 0);
    CHECK(strcmp(d.transactional_id, "tx-1") == 0 && d.producer_id == 4242 && d.producer_epoch == 7);
    CHECK(d.timeout_ms == 60000 && d.state == GR_TXN_ONGOING && d.n_parts == 3 && d.start_ts == 10 && d.update_ts == 11);
    CHECK(strcmp(d.parts[0].topic, "a") == 0 && d.parts[1].partition == 2 && strcmp(d.parts[2].topic, "b") == 0);
    gr_txn_record_free(&d);
    for (size_t cut = 0; cut < vl; cut++) CHECK(gr_txn_log_decode(k, kl, v, cut, &d) != 0);
    CHECK(gr_txn_log_decode(k, kl, NULL, 0, &d) == 0 && d.tombstone);
    gr_txn_record_free(&d);
    free(v);
    r.state = GR_TXN_EMPTY; /* partitions written as null */
    v = gr_txn_log_value(&r, &vl);
    CHECK((int32_t)gr_be32(v + 17) == -1);
    CHECK(gr_txn_log_decode(k, kl, v, vl, &d) == 0 && d.n_parts == 0);
    gr_txn_record_free(&d);
    free(v);
    free(k);
}

static void test_txn_index(void) {
    char dir[128];
    snprintf(dir, sizeof dir, "%s/idx-0", g_root);
    mkdir(dir, 0755);
    struct gr_txn_index *ti = gr_txn_index_open(dir);
    struct gr_aborted_txn a = {1, 0, 5, 6, -1}, b = {2, 3, 9, 10, -1}, c = {1, 20, 25, 26, -1};
    CHECK(gr_txn_index_append(ti, 0, &a) == 0);
    CHECK(gr_txn_index_append(ti, 0, &b) == 0);
    CHECK(gr_txn_index_append(ti, 12, &c) == 0);
    CHECK(gr_txn_index_append(ti, 12, &b) == 0 && gr_txn_index_count(ti) == 3); /* replay: ignored */
    char path[256];
    snprintf(path, sizeof path, "%s/00000000000000000000.txnindex", dir);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 2 * GR_TXN_INDEX_ENTRY_SIZE);
    uint8_t buf[GR_TXN_INDEX_ENTRY_SIZE];
    int fd = open(path, O_RDONLY);
    CHECK(read(fd, buf, sizeof buf) == (ssize_t)sizeof buf);
    close(fd);
    CHECK(gr_be16(buf) == 0 && gr_be64(buf + 2) == 1 && gr_be64(buf + 10) == 0 && gr_be64(buf + 18) == 5 &&
          gr_be64(buf + 26) == 6);
    struct gr_aborted_txn out[4];
    int total;
    /* every entry overlapping [fetch offset, upper bound): a and b, although a's stored LSO (6),
     * inconsistent with b open from 3, would end Kafka's scan at a */
    CHECK(gr_txn_index_collect(ti, 0, 4, out, 4, &total) == 2 && total == 2);
    CHECK(gr_txn_index_collect(ti, 0, 7, out, 4, &total) == 2 && total == 2);
    CHECK(gr_txn_index_collect(ti, 6, 30, out, 4, &total) == 2 && out[0].producer_id == 2 && out[1].first_offset == 20);
    CHECK(gr_txn_index_collect(ti, 0, 1, out, 4, &total) == 1 && out[0].producer_id == 1);
    CHECK(gr_txn_index_collect(ti, 26, 40, out, 4, &total) == 0);
    gr_txn_index_free(ti);
    ti = gr_txn_index_open(dir); /* reload */
    CHECK(gr_txn_index_count(ti) == 3);
    CHECK(gr_txn_index_truncate(ti, 9) == 0 && gr_txn_index_count(ti) == 1);
    CHECK(stat(path, &st) == 0 && st.st_size == GR_TXN_INDEX_ENTRY_SIZE);
    gr_txn_index_drop_segments_below(ti, 12);
    CHECK(gr_txn_index_count(ti) == 0 && stat(path, &st) != 0);
    gr_txn_index_free(ti);
    CHECK(gr_txn_index_decode(buf, 10, &a) != 0);
    buf[1] = 1;
    CHECK(gr_txn_index_decode(buf, sizeof buf, &a) != 0);
}

static int64_t g_ts = 1700000000000LL;

struct blob {
    uint8_t *p;
    size_t len;
};

static struct blob data_batch(int64_t pid, int16_t epoch, int32_t seq, int n, bool txn) {
    struct gr_batch_rec recs[8];
    for (int i = 0; i < n; i++) recs[i] = (struct gr_batch_rec){NULL, -1, "v", 1, NULL, 0, g_ts};
    struct gr_batch_build_opts o = GR_BATCH_BUILD_OPTS_INIT;
    o.attributes = txn ? GR_BATCH_ATTR_TRANSACTIONAL : 0;
    o.producer_id = pid;
    o.producer_epoch = epoch;
    o.base_sequence = seq;
    struct blob b;
    b.p = gr_batch_build(recs, n, &o, &b.len);
    return b;
}

static struct blob marker(int64_t pid, int16_t epoch, bool commit, int32_t coord_epoch) {
    uint8_t k[4] = {0, 0, 0, commit ? 1 : 0}, v[6] = {0, 0, 0, 0, 0, 0};
    gr_put_be32(v + 2, (uint32_t)coord_epoch);
    struct gr_batch_rec r = {k, 4, v, 6, NULL, 0, g_ts};
    struct gr_batch_build_opts o = GR_BATCH_BUILD_OPTS_INIT;
    o.attributes = GR_BATCH_ATTR_TRANSACTIONAL | GR_BATCH_ATTR_CONTROL;
    o.producer_id = pid;
    o.producer_epoch = epoch;
    struct blob b;
    b.p = gr_batch_build(&r, 1, &o, &b.len);
    return b;
}

static int16_t append(struct gr_plog *log, struct blob b, bool coord) {
    struct gr_append_info info;
    CHECK(gr_plog_append_origin(log, b.p, b.len, 0, coord, &info) == 0);
    free(b.p);
    return info.error;
}

static void test_lso_and_aborted(void) {
    char dir[128];
    snprintf(dir, sizeof dir, "%s/t-0", g_root);
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    struct gr_plog *log;
    CHECK(gr_plog_open_dir(dir, &cfg, 0, &log) == 0);
    CHECK_KERR(append(log, data_batch(-1, -1, -1, 2, false), false), GR_KERR_NONE); /* 0-1 */
    CHECK_KERR(append(log, data_batch(7, 0, 0, 3, true), false), GR_KERR_NONE);   /* 2-4 pid 7 */
    CHECK_KERR(append(log, data_batch(8, 0, 0, 1, true), false), GR_KERR_NONE);   /* 5 pid 8 */
    CHECK(gr_plog_last_stable_offset(log, 6) == 2);
    CHECK(gr_plog_last_stable_offset(log, 1) == 1); /* below the HW bound */
    /* a client may not send markers; a non-transactional batch during a txn is refused */
    CHECK_KERR(append(log, marker(7, 0, false, 0), false), GR_KERR_INVALID_RECORD);
    CHECK_KERR(append(log, data_batch(7, 0, 3, 1, false), false), GR_KERR_INVALID_TXN_STATE);
    CHECK_KERR(append(log, marker(7, 0, false, 3), true), GR_KERR_NONE);       /* 6: ABORT pid 7 */
    CHECK(gr_plog_last_stable_offset(log, 6) == 2);  /* the marker is not below the HW yet */
    CHECK(gr_plog_last_stable_offset(log, 7) == 5);  /* pid 8 still open */
    CHECK_KERR(append(log, marker(7, 0, true, 2), true), GR_KERR_TRANSACTION_COORDINATOR_FENCED);
    CHECK_KERR(append(log, marker(8, 0, true, 3), true), GR_KERR_NONE);        /* 7: COMMIT pid 8 */
    CHECK(gr_plog_last_stable_offset(log, 8) == 8);
    struct gr_aborted_txn *ab = NULL;
    int n = gr_plog_collect_aborted(log, 0, 8, &ab);
    CHECK(n == 1 && ab[0].producer_id == 7 && ab[0].first_offset == 2 && ab[0].last_offset == 6 &&
          ab[0].last_stable_offset == 5);
    free(ab);
    /* producer state snapshot carries an open transaction; .txnindex survives a restart */
    CHECK_KERR(append(log, data_batch(9, 0, 0, 1, true), false), GR_KERR_NONE); /* 8 pid 9 */
    gr_plog_flush(log);
    gr_plog_close(log);
    CHECK(gr_plog_open_dir(dir, &cfg, 9, &log) == 0);
    struct gr_pstate_entry e;
    CHECK(gr_plog_producer_state(log, 9, &e) && e.txn_first_offset == 8);
    CHECK(gr_plog_last_stable_offset(log, 9) == 8);
    n = gr_plog_collect_aborted(log, 0, 9, &ab);
    CHECK(n == 1 && ab[0].last_offset == 6);
    free(ab);
    /* truncation below the marker drops the index entry and reopens the transaction */
    CHECK(gr_plog_truncate_to(log, 6) == 0);
    n = gr_plog_collect_aborted(log, 0, 6, &ab);
    CHECK(n == 0);
    free(ab);
    CHECK(gr_plog_last_stable_offset(log, 6) == 2);
    gr_plog_close(log);
}

static off_t file_size(const char *dir, const char *name) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat st;
    return stat(p, &st) == 0 ? st.st_size : -1;
}

/* The .txnindex is made durable with its segment: a flush (and a roll) fdatasyncs it. */
static void test_txn_index_flushed_with_segment(void) {
    char dir[128];
    snprintf(dir, sizeof dir, "%s/sync-0", g_root);
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    struct gr_plog *log;
    CHECK(gr_plog_open_dir(dir, &cfg, 0, &log) == 0);
    CHECK_KERR(append(log, data_batch(5, 0, 0, 2, true), false), GR_KERR_NONE); /* 0-1 */
    CHECK_KERR(append(log, marker(5, 0, false, 0), true), GR_KERR_NONE);        /* 2 ABORT */
    CHECK(file_size(dir, "00000000000000000000.txnindex") == GR_TXN_INDEX_ENTRY_SIZE);
    int before = g_txnindex_syncs;
    CHECK(gr_plog_flush(log) == 0);
    CHECK(g_txnindex_syncs == before + 1);
    CHECK(gr_plog_flush(log) == 0 && g_txnindex_syncs == before + 1); /* nothing new */
    gr_plog_close(log);
}

/* A torn tail cut by recovery takes the aborted transactions indexed beyond it: the reopened log
 * lists none past its end, and a marker written again at those offsets is indexed (Kafka's
 * recoverSegment rebuilds the txnIndex of recovered segments). */
static void test_txn_index_after_torn_tail(void) {
    char dir[128];
    snprintf(dir, sizeof dir, "%s/torn-0", g_root);
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    struct gr_plog *log;
    CHECK(gr_plog_open_dir(dir, &cfg, 0, &log) == 0);
    CHECK_KERR(append(log, data_batch(7, 0, 0, 2, true), false), GR_KERR_NONE); /* 0-1 pid 7 */
    CHECK(gr_plog_flush(log) == 0);
    off_t good = file_size(dir, "00000000000000000000.log");
    CHECK_KERR(append(log, data_batch(9, 0, 0, 4, true), false), GR_KERR_NONE); /* 2-5 pid 9 */
    CHECK_KERR(append(log, marker(9, 0, false, 0), true), GR_KERR_NONE);        /* 6 ABORT pid 9 */
    CHECK_KERR(append(log, marker(7, 0, false, 0), true), GR_KERR_NONE);        /* 7 ABORT pid 7 */
    struct gr_aborted_txn *ab = NULL;
    CHECK(gr_plog_collect_aborted(log, 0, 8, &ab) == 2);
    free(ab);
    gr_plog_close(log);
    /* crash: the .txnindex reached the disk, the log data after offset 1 only partly */
    char p[256];
    snprintf(p, sizeof p, "%s/00000000000000000000.log", dir);
    CHECK(truncate(p, good + 20) == 0);
    CHECK(gr_plog_open_dir(dir, &cfg, 0, &log) == 0);
    CHECK(gr_plog_end_offset(log) == 2);
    ab = NULL;
    CHECK(gr_plog_collect_aborted(log, 0, 100, &ab) == 0); /* nothing beyond the log end */
    free(ab);
    CHECK(file_size(dir, "00000000000000000000.txnindex") <= 0);
    /* pid 7's transaction is open again; its ABORT now lands at offset 2 and is indexed */
    CHECK(gr_plog_last_stable_offset(log, 2) == 0);
    CHECK_KERR(append(log, marker(7, 0, false, 0), true), GR_KERR_NONE); /* 2 ABORT pid 7 */
    ab = NULL;
    CHECK(gr_plog_collect_aborted(log, 0, 3, &ab) == 1 && ab[0].producer_id == 7 && ab[0].first_offset == 0 &&
          ab[0].last_offset == 2);
    free(ab);
    gr_plog_close(log);
    CHECK(gr_plog_open_dir(dir, &cfg, 3, &log) == 0); /* and the file holds it */
    ab = NULL;
    CHECK(gr_plog_collect_aborted(log, 0, 3, &ab) == 1 && ab[0].last_offset == 2);
    free(ab);
    CHECK(file_size(dir, "00000000000000000000.txnindex") == GR_TXN_INDEX_ENTRY_SIZE);
    gr_plog_close(log);
}

/* A follower builds the same open transactions, LSO and .txnindex from replicated batches. */
static void test_follower_markers(void) {
    char d1[128], d2[128];
    snprintf(d1, sizeof d1, "%s/lead-0", g_root);
    snprintf(d2, sizeof d2, "%s/foll-0", g_root);
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    struct gr_plog *leader, *follower;
    CHECK(gr_plog_open_dir(d1, &cfg, 0, &leader) == 0);
    CHECK(gr_plog_open_dir(d2, &cfg, 0, &follower) == 0);
    CHECK_KERR(append(leader, data_batch(3, 0, 0, 2, true), false), GR_KERR_NONE);  /* 0-1 */
    CHECK_KERR(append(leader, data_batch(4, 0, 0, 1, true), false), GR_KERR_NONE);  /* 2 */
    CHECK_KERR(append(leader, marker(3, 0, false, 0), true), GR_KERR_NONE);         /* 3 ABORT */
    struct gr_plog_read_result res;
    CHECK(gr_plog_read(leader, 0, 1 << 20, -1, true, &res) == 0 && res.len > 0);
    struct gr_append_info info;
    CHECK(gr_plog_append_as_follower(follower, res.data, res.len, &info) == 0);
    free(res.data);
    CHECK(gr_plog_last_stable_offset(follower, 4) == 2); /* pid 4 still open */
    struct gr_aborted_txn *ab = NULL;
    int n = gr_plog_collect_aborted(follower, 0, 4, &ab);
    CHECK(n == 1 && ab[0].producer_id == 3 && ab[0].first_offset == 0 && ab[0].last_offset == 3 &&
          ab[0].last_stable_offset == 2);
    free(ab);
    gr_plog_close(leader);
    gr_plog_close(follower);
}

/* A follower (or a replay) that gets, in one append, the ABORT of pid 3 and then the ABORT of pid
 * 4 whose transaction was open at pid 3's marker: pid 3's index entry must not claim that nothing
 * was open below its marker (its last_stable_offset ends gr_txn_index_collect's scan early, as
 * Kafka's), or a fetch whose data ends at pid 3's marker misses pid 4's aborted transaction and
 * a read_committed consumer delivers its records. */
static void test_follower_markers_one_append(void) {
    char d1[128], d2[128];
    snprintf(d1, sizeof d1, "%s/lead-1", g_root);
    snprintf(d2, sizeof d2, "%s/foll-1", g_root);
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    struct gr_plog *leader, *follower;
    CHECK(gr_plog_open_dir(d1, &cfg, 0, &leader) == 0);
    CHECK(gr_plog_open_dir(d2, &cfg, 0, &follower) == 0);
    CHECK_KERR(append(leader, data_batch(4, 0, 0, 1, true), false), GR_KERR_NONE); /* 0 pid 4 */
    CHECK_KERR(append(leader, data_batch(3, 0, 0, 1, true), false), GR_KERR_NONE); /* 1 pid 3 */
    CHECK_KERR(append(leader, marker(3, 0, false, 0), true), GR_KERR_NONE);        /* 2 ABORT pid 3 */
    CHECK_KERR(append(leader, marker(4, 0, false, 0), true), GR_KERR_NONE);        /* 3 ABORT pid 4 */
    struct gr_aborted_txn *ab = NULL;
    CHECK(gr_plog_collect_aborted(leader, 0, 2, &ab) == 2); /* the leader appended one marker at a time */
    free(ab);
    struct gr_plog_read_result res;
    CHECK(gr_plog_read(leader, 0, 1 << 20, -1, true, &res) == 0 && res.len > 0);
    struct gr_append_info info;
    CHECK(gr_plog_append_as_follower(follower, res.data, res.len, &info) == 0);
    free(res.data);
    /* a read_committed fetch from 0 whose data ends before pid 3's marker: both are aborted */
    ab = NULL;
    int n = gr_plog_collect_aborted(follower, 0, 2, &ab);
    CHECK(n == 2);
    bool seen3 = false, seen4 = false;
    for (int i = 0; i < n; i++) {
        if (ab[i].producer_id == 3) seen3 = ab[i].last_stable_offset == 0; /* pid 4 open from 0 */
        if (ab[i].producer_id == 4) seen4 = ab[i].first_offset == 0 && ab[i].last_offset == 3;
    }
    CHECK(seen3 && seen4);
    free(ab);
    /* the same after a restart (the entries come from the .txnindex file) */
    gr_plog_flush(follower);
    gr_plog_close(follower);
    CHECK(gr_plog_open_dir(d2, &cfg, 4, &follower) == 0);
    ab = NULL;
    CHECK(gr_plog_collect_aborted(follower, 0, 2, &ab) == 2);
    free(ab);
    gr_plog_close(leader);
    gr_plog_close(follower);
}

static void verify(struct gr_plog *log, int64_t pid, int16_t epoch) {
    uint64_t token = gr_plog_txn_start_verification(log, pid, epoch);
    CHECK(token != 0);
    gr_plog_txn_end_verification(log, pid, token, true);
}

static void test_kip890_guard(void) {
    char dir[128];
    snprintf(dir, sizeof dir, "%s/g-0", g_root);
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    struct gr_plog *log;
    CHECK(gr_plog_open_dir(dir, &cfg, 0, &log) == 0);
    gr_pstate_set_verification_enabled(true);
    CHECK(gr_plog_txn_needs_verification(log, 5, 0));
    CHECK_KERR(append(log, data_batch(5, 0, 0, 1, true), false), GR_KERR_INVALID_TXN_STATE);
    /* started but not yet answered: not enough */
    uint64_t t = gr_plog_txn_start_verification(log, 5, 0);
    CHECK(t != 0 && gr_plog_txn_start_verification(log, 5, 0) == t); /* joins the one under way */
    CHECK_KERR(append(log, data_batch(5, 0, 0, 1, true), false), GR_KERR_INVALID_TXN_STATE);
    gr_plog_txn_end_verification(log, 5, t, true);
    CHECK_KERR(append(log, data_batch(5, 0, 0, 1, true), false), GR_KERR_NONE);
    CHECK(!gr_plog_txn_needs_verification(log, 5, 0)); /* open here now */
    CHECK(gr_plog_txn_start_verification(log, 5, 0) == 0);
    CHECK_KERR(append(log, data_batch(5, 0, 1, 1, true), false), GR_KERR_NONE);
    /* verified, then the transaction ends before the late batch is appended: refused */
    CHECK_KERR(append(log, marker(5, 0, true, 0), true), GR_KERR_NONE);
    verify(log, 5, 0);
    CHECK_KERR(append(log, marker(5, 0, true, 0), true), GR_KERR_NONE);
    CHECK(gr_plog_txn_needs_verification(log, 5, 0));
    CHECK_KERR(append(log, data_batch(5, 0, 2, 1, true), false), GR_KERR_INVALID_TXN_STATE);
    /* the coordinator's answer arrives after a marker cleared the guard (the transaction ended
     * while it was asked): worthless, also when a later verification set a new guard (ABA) */
    t = gr_plog_txn_start_verification(log, 5, 0);
    CHECK_KERR(append(log, marker(5, 0, false, 0), true), GR_KERR_NONE);
    uint64_t t2 = gr_plog_txn_start_verification(log, 5, 0);
    CHECK(t2 != t);
    gr_plog_txn_end_verification(log, 5, t, true);
    CHECK_KERR(append(log, data_batch(5, 0, 2, 1, true), false), GR_KERR_INVALID_TXN_STATE);
    /* a refused verification drops its guard */
    gr_plog_txn_end_verification(log, 5, t2, false);
    CHECK_KERR(append(log, data_batch(5, 0, 2, 1, true), false), GR_KERR_INVALID_TXN_STATE);
    /* a guard of another epoch does not count; non-transactional batches need none */
    verify(log, 5, 1);
    CHECK_KERR(append(log, data_batch(5, 0, 2, 1, true), false), GR_KERR_INVALID_TXN_STATE);
    CHECK_KERR(append(log, data_batch(6, 0, 0, 1, false), false), GR_KERR_NONE);
    /* the coordinator's own transactional offsets (TxnOffsetCommit) need it too */
    CHECK_KERR(append(log, data_batch(7, 0, 0, 1, true), true), GR_KERR_INVALID_TXN_STATE);
    verify(log, 7, 0);
    CHECK_KERR(append(log, data_batch(7, 0, 0, 1, true), true), GR_KERR_NONE);
    gr_pstate_set_verification_enabled(false);
    CHECK_KERR(append(log, data_batch(5, 0, 2, 1, true), false), GR_KERR_NONE); /* Kafka 2.7 */
    gr_plog_close(log);
}

int main(void) {
    snprintf(g_root, sizeof g_root, "/tmp/gr-txn-test-%d", (int)getpid());
    mkdir(g_root, 0755);
    test_state_machine();
    test_txn_log_codec();
    test_txn_index();
    test_lso_and_aborted();
    test_follower_markers();
    test_follower_markers_one_append();
    test_kip890_guard();
    test_txn_index_flushed_with_segment();
    test_txn_index_after_torn_tail();
    nftw(g_root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures);
    return test_failures != 0;
}
