/* Log compaction: offset map, codecs, the cleaner's decisions (latest value per key, tombstones
 * kept until the delete horizon, records beyond the map kept, keyless records dropped, active
 * segment untouched, an active producer's last batch kept), compressed batches, the dirty ratio
 * and compaction lags, crash safety (the process killed at each swap step, then the log
 * reopened), and transactions (aborted data dropped, markers dropped past the delete horizon once
 * their data is gone, an ongoing transaction untouched, .txnindex consistent after swaps). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "storage/batch.h"
#include "storage/checkpoint.h"
#include "common/be.h"
#include "storage/compression.h"
#include "storage/log.h"
#include "storage/log_cleaner.h"
#include "storage/log_manager.h"
#include "storage/txn_index.h"
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

static struct gr_plog *open_log(const char *name, int64_t rp) {
    struct gr_plog_config cfg;
    gr_plog_config_defaults(&cfg);
    cfg.segment_bytes = 1500;
    cfg.index_interval_bytes = 200;
    cfg.cleanup_compact = true;
    cfg.cleanup_delete = false;
    struct gr_plog *log = NULL;
    CHECK(gr_plog_open_dir(pdir(name), &cfg, rp, &log) == 0 && log);
    return log;
}

/* One batch: n records key "k<key+i>" (key < 0: no key), value "v<val>" (val < 0: tombstone);
 * codec compresses the records. */
static void put(struct gr_plog *log, int key, int n, int val, int codec, int64_t pid) {
    struct gr_batch_rec recs[16];
    char keys[16][16], vals[16][16];
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], 16, "k%d", key + i);
        snprintf(vals[i], 16, "v%d", val);
        recs[i] = (struct gr_batch_rec){key < 0 ? NULL : keys[i], key < 0 ? -1 : (int32_t)strlen(keys[i]),
                                        val < 0 ? NULL : vals[i], val < 0 ? -1 : (int32_t)strlen(vals[i]), NULL, 0,
                                        1000 + val};
    }
    struct gr_batch_build_opts o = GR_BATCH_BUILD_OPTS_INIT;
    static int32_t seq[4];
    if (pid >= 0) {
        o.producer_id = pid;
        o.producer_epoch = 0;
        o.base_sequence = seq[pid];
        seq[pid] += n;
    }
    size_t len;
    uint8_t *b = gr_batch_build(recs, n, &o, &len);
    if (codec) {
        uint8_t *z;
        size_t zl;
        CHECK(gr_compress(codec, b + GR_BATCH_HEADER_SIZE, len - GR_BATCH_HEADER_SIZE, &z, &zl) == 0);
        b = gr_realloc(b, GR_BATCH_HEADER_SIZE + zl);
        memcpy(b + GR_BATCH_HEADER_SIZE, z, zl);
        free(z);
        len = GR_BATCH_HEADER_SIZE + zl;
        gr_put_be32(b + 8, (uint32_t)(len - 12));
        gr_put_be16(b + 21, (uint16_t)(gr_be16(b + 21) | codec));
        gr_batch_update_crc(b, len);
    }
    struct gr_append_info info;
    CHECK(gr_plog_append_as_leader(log, b, len, 0, &info) == 0);
    CHECKF(info.error == 0, "append error %d", info.error);
    free(b);
}

/* The log read from its start: per key the last value seen ("" for a tombstone), record count,
 * offsets strictly rising. */
struct view {
    char val[64][16];
    bool seen[64];
    int records, tombstones, keyless;
    int64_t last_offset;
    int64_t ts[64];      /* the timestamp of each key's last record */
    int horizon_batches; /* batches with the KIP-534 delete-horizon bit */
    int64_t horizon;     /* the last such batch's base timestamp */
};

static void scan(struct gr_plog *log, struct view *v) {
    memset(v, 0, sizeof *v);
    v->last_offset = -1;
    int64_t off = gr_plog_start_offset(log);
    for (;;) {
        struct gr_plog_read_result r;
        CHECK(gr_plog_read(log, off, 1 << 20, -1, true, &r) == 0 && r.error == 0);
        if (r.len == 0) break;
        CHECK(gr_batch_validate_all(r.data, r.len, 0, NULL) == GR_BATCH_OK);
        struct gr_batch_iter it;
        struct gr_batch_info bi;
        const uint8_t *bp;
        gr_batch_iter_init(&it, r.data, r.len);
        while (gr_batch_iter_next(&it, &bi, &bp) == 1) {
            if (bi.Attributes & GR_BATCH_ATTR_CONTROL) { /* markers: offsets only */
                CHECK(bi.BaseOffset > v->last_offset);
                v->last_offset = gr_batch_info_last_offset(&bi);
                continue;
            }
            if (bi.Attributes & GR_BATCH_ATTR_DELETE_HORIZON) {
                v->horizon_batches++;
                v->horizon = bi.BaseTimestamp;
            }
            const uint8_t *src = bp;
            size_t sl = bi.size;
            uint8_t *view = NULL;
            if (gr_batch_info_compression(&bi)) {
                uint8_t *recs;
                size_t rl;
                CHECK(gr_decompress(gr_batch_info_compression(&bi), bp + 61, bi.size - 61, 1 << 24, &recs, &rl) == 0);
                view = gr_malloc(61 + rl);
                memcpy(view, bp, 61);
                memcpy(view + 61, recs, rl);
                free(recs);
                gr_put_be16(view + 21, 0);
                gr_put_be32(view + 8, (uint32_t)(61 + rl - 12));
                src = view;
                sl = 61 + rl;
            }
            struct gr_batch_rec_iter ri;
            struct gr_batch_rec_view rv;
            CHECK(gr_batch_rec_iter_init(&ri, src, sl) == GR_BATCH_OK);
            while (gr_batch_rec_iter_next(&ri, &rv)) {
                CHECK(rv.Offset > v->last_offset);
                v->last_offset = rv.Offset;
                v->records++;
                if (!rv.Key) {
                    v->keyless++;
                    continue;
                }
                int k = atoi((const char *)rv.Key + 1);
                if (k < 0 || k >= 64) continue;
                v->seen[k] = true;
                v->ts[k] = rv.Timestamp;
                if (rv.Value) snprintf(v->val[k], 16, "%.*s", (int)rv.ValueLength, (const char *)rv.Value);
                else {
                    v->val[k][0] = 0;
                    v->tombstones++;
                }
            }
            CHECK(ri.err == GR_BATCH_OK);
            free(view);
        }
        off = r.next_offset;
        free(r.data);
    }
}

static struct gr_cleaner_params params(void) {
    /* small I/O buffers: every group is written in several chunks */
    struct gr_cleaner_params p = {1 << 20, 0.9, 1e308, gr_wall_ms(), NULL, 512};
    return p;
}

static void test_offset_map_and_codecs(void) {
    struct gr_offset_map m;
    gr_offset_map_init(&m, 24 * 10, 0.5);
    CHECK(m.nslots == 16 && m.max_entries == 8); /* at least 16 slots */
    for (int i = 0; i < 8; i++) {
        char k[8];
        snprintf(k, sizeof k, "key%d", i);
        CHECK(gr_offset_map_put(&m, (const uint8_t *)k, strlen(k), i * 10));
    }
    CHECK(!gr_offset_map_put(&m, (const uint8_t *)"new", 3, 99)); /* full */
    CHECK(gr_offset_map_put(&m, (const uint8_t *)"key3", 4, 100));  /* update is fine */
    CHECK(gr_offset_map_get(&m, (const uint8_t *)"key3", 4) == 100 && gr_offset_map_get(&m, (const uint8_t *)"key4", 4) == 40);
    CHECK(gr_offset_map_get(&m, (const uint8_t *)"nope", 4) == -1 && m.latest_offset == 100);
    gr_offset_map_free(&m);
    /* issue 23 item 14: load factor 1.0 keeps one slot empty, so that looking up a key that is
     * not in a full map ends (it probed forever) */
    gr_offset_map_init(&m, 24 * 16, 1.0);
    CHECK(m.nslots == 16 && m.max_entries == 15);
    for (int i = 0; i < 16; i++) {
        char k[8];
        snprintf(k, sizeof k, "key%d", i);
        CHECK(gr_offset_map_put(&m, (const uint8_t *)k, strlen(k), i) == (i < 15));
    }
    CHECK(gr_offset_map_get(&m, (const uint8_t *)"absent", 6) == -1);
    gr_offset_map_free(&m);
    uint8_t in[5000];
    for (size_t i = 0; i < sizeof in; i++) in[i] = (uint8_t)(i % 37);
    for (int codec = 1; codec <= 4; codec++) {
        uint8_t *z, *d;
        size_t zl, dl;
        CHECK(gr_compress(codec, in, sizeof in, &z, &zl) == 0 && zl < sizeof in);
        d = NULL;
        CHECK(gr_decompress(codec, z, zl, 1 << 20, &d, &dl) == 0 && dl == sizeof in && memcmp(d, in, dl) == 0);
        free(d);
        CHECK(gr_decompress(codec, z, zl, 100, &d, &dl) != 0); /* bound */
        z[zl / 2] ^= 0x55;
        if (gr_decompress(codec, z, zl, 1 << 20, &d, &dl) == 0) free(d); /* garbage: no crash */
        free(z);
    }
}

static void test_clean_basic(void) {
    struct gr_plog *log = open_log("cl-0", 0);
    /* 20 keys overwritten 10 times, mixed codecs, a keyless batch, tombstones for keys 0-4 */
    for (int round = 0; round < 10; round++)
        for (int k = 0; k < 20; k += 4) put(log, k, 4, round, round % 5, -1);
    { /* keyless records (leaders refuse them on compacted topics; a follower or a log whose
       * policy changed may still hold some): the cleaner drops them */
        struct gr_batch_rec kr[2] = {{NULL, -1, "a", 1, NULL, 0, 1}, {NULL, -1, "b", 1, NULL, 0, 1}};
        struct gr_batch_build_opts o = GR_BATCH_BUILD_OPTS_INIT;
        o.base_offset = gr_plog_end_offset(log);
        o.partition_leader_epoch = 0;
        size_t kl;
        uint8_t *kb = gr_batch_build(kr, 2, &o, &kl);
        CHECK(gr_plog_append_as_follower(log, kb, kl, NULL) == 0);
        free(kb);
    }
    put(log, 0, 5, -1, 0, -1); /* tombstones k0..k4 */
    for (int k = 0; k < 20; k += 4) put(log, k + 5 < 20 ? 5 : 0, 1, 60 + k, 0, -1); /* filler -> more segs */
    int64_t end = gr_plog_end_offset(log), size = gr_plog_size_bytes(log);
    int segs = gr_plog_segment_count(log);
    CHECK(segs > 4);
    struct view before, after;
    scan(log, &before);
    struct gr_cleanable c;
    gr_plog_cleanable(log, 0, gr_wall_ms(), &c);
    CHECK(c.compact && c.first_dirty == 0 && c.dirty_ratio == 1.0 && c.cleanable_bytes > 0);
    struct gr_cleaner_params p = params();
    struct gr_clean_stats st;
    CHECK(gr_plog_clean(log, 0, &p, &st) == 0);
    CHECK(st.segments_cleaned > 0 && st.end_offset > 0 && st.end_offset <= end);
    scan(log, &after);
    /* same latest values; tombstones kept (first pass: no delete horizon yet) */
    for (int k = 0; k < 20; k++) CHECKF(strcmp(before.val[k], after.val[k]) == 0, "k%d %s %s", k, before.val[k], after.val[k]);
    CHECK(after.tombstones >= 4 && after.keyless == 0 && before.keyless == 2); /* k0 may be superseded already */
    CHECK(gr_plog_end_offset(log) == end && gr_plog_size_bytes(log) < size);
    CHECK(after.records < before.records);
    gr_plog_cleanable(log, st.end_offset, gr_wall_ms(), &c);
    CHECK(c.first_dirty == st.end_offset && c.dirty_ratio < 0.5);
    /* reopen: the swapped segments load (indexes rebuilt) and read the same */
    gr_plog_flush(log);
    gr_plog_close(log);
    log = open_log("cl-0", end);
    struct view again;
    scan(log, &again);
    CHECK(memcmp(&again, &after, sizeof again) == 0);
    /* delete.retention.ms 0 and old segment mtimes: the next pass drops the tombstones */
    struct gr_plog_config cfg;
    gr_plog_get_config(log, &cfg);
    cfg.delete_retention_ms = 0;
    gr_plog_set_config(log, &cfg);
    for (int i = 0; i < 16; i++) put(log, 30, 4, 99 - i, 0, -1); /* a dirty tail; rolls the segments */
    p = params();
    int64_t cp = st.end_offset;
    /* KIP-534: the first pass stamped the tombstones' batches with its time + delete.retention.ms
     * (1 day then); a pass after that horizon drops them */
    p.now_ms = gr_wall_ms() + 2 * 86400000LL;
    CHECK(gr_plog_clean(log, cp, &p, &st) == 0);
    scan(log, &after);
    CHECK(after.tombstones == 0);
    for (int k = 5; k < 20; k++) CHECK(strcmp(before.val[k], after.val[k]) == 0);
    for (int k = 1; k < 5; k++) CHECK(!after.seen[k]); /* deleted for good (k0 was rewritten after) */
    CHECK(strcmp(after.val[0], before.val[0]) == 0 && before.val[0][0]);
    CHECK(strcmp(after.val[30], "v84") == 0);
    gr_plog_close(log);
}

/* Issue 23 item 17 (KIP-534): a pass that keeps tombstones stamps their batch with the delete
 * horizon (attribute bit 0x40, base timestamp = its time + delete.retention.ms; the records keep
 * their timestamps, compressed batches too); passes before the horizon keep them, the first
 * pass after it drops them, whatever the segment mtimes (Kafka 2.7's mtime horizon never came
 * for a log that compacts into one segment). */
static void test_delete_horizon(void) {
    struct gr_plog *log = open_log("cl-horizon", 0);
    struct gr_plog_config cfg;
    gr_plog_get_config(log, &cfg);
    cfg.delete_retention_ms = 10000;
    gr_plog_set_config(log, &cfg);
    put(log, 0, 10, 1, 0, -1);  /* k0-k9 = v1 */
    put(log, 0, 3, -1, 0, -1);  /* tombstones k0-k2 */
    put(log, 3, 2, -1, 1, -1);  /* tombstones k3-k4, gzip */
    for (int i = 0; i < 12; i++) put(log, 20, 4, 2, 0, -1); /* fillers: the tombstones' segment rolls */
    struct view v;
    scan(log, &v);
    CHECK(v.tombstones == 5 && v.ts[0] == 999 && v.ts[3] == 999);
    int64_t t0 = gr_wall_ms();
    struct gr_cleaner_params p = params();
    p.now_ms = t0;
    struct gr_clean_stats st;
    CHECK(gr_plog_clean(log, 0, &p, &st) == 0 && st.segments_cleaned > 0);
    scan(log, &v);
    CHECK(v.tombstones == 5 && v.horizon_batches == 2 && v.horizon == t0 + 10000);
    for (int k = 0; k < 5; k++) CHECKF(v.ts[k] == 999, "k%d timestamp %" PRId64, k, v.ts[k]); /* rebased */
    for (int k = 5; k < 10; k++) CHECK(strcmp(v.val[k], "v1") == 0 && v.ts[k] == 1001);
    int64_t ck = st.end_offset;
    for (int i = 0; i < 30; i++) put(log, 20, 4, 3, 0, -1);
    p = params();
    p.now_ms = t0 + 9999; /* before the horizon: kept, the horizon unchanged */
    CHECK(gr_plog_clean(log, ck, &p, &st) == 0 && st.segments_cleaned > 0);
    ck = st.end_offset;
    scan(log, &v);
    CHECK(v.tombstones == 5 && v.horizon == t0 + 10000);
    for (int i = 0; i < 30; i++) put(log, 20, 4, 4, 0, -1);
    p = params();
    p.now_ms = t0 + 10000; /* the horizon passed: gone */
    CHECK(gr_plog_clean(log, ck, &p, &st) == 0 && st.segments_cleaned > 0);
    scan(log, &v);
    CHECK(v.tombstones == 0 && v.horizon_batches == 0);
    for (int k = 0; k < 5; k++) CHECK(!v.seen[k]);
    for (int k = 5; k < 10; k++) CHECK(strcmp(v.val[k], "v1") == 0);
    gr_plog_close(log);
}

/* KIP-534's rebase of record timestamps onto the delete horizon with extreme timestamps (a
 * producer may send any int64; message.timestamp.difference.max.ms defaults to no limit): every
 * record keeps its timestamp exactly, and no signed sum overflows (UBSan in `make asan` aborts
 * on one). */
static void test_horizon_extreme_timestamps(void) {
    static const int64_t tss[] = {INT64_MIN + 7, INT64_MAX, -2, INT64_MIN, 0, INT64_MAX - 1};
    enum { N = (int)(sizeof tss / sizeof tss[0]) };
    struct gr_plog *log = open_log("cl-extreme-ts", 0);
    struct gr_plog_config cfg;
    gr_plog_get_config(log, &cfg);
    cfg.delete_retention_ms = INT64_MAX; /* the horizon saturates at INT64_MAX */
    gr_plog_set_config(log, &cfg);
    for (int codec = 0; codec <= 1; codec++) {
        struct gr_batch_rec recs[N];
        char keys[N][8];
        for (int i = 0; i < N; i++) {
            snprintf(keys[i], sizeof keys[i], "k%d", 10 * codec + i);
            recs[i] = (struct gr_batch_rec){keys[i], (int32_t)strlen(keys[i]), NULL, -1, NULL, 0, tss[i]};
        }
        size_t len;
        uint8_t *b = gr_batch_build(recs, N, NULL, &len);
        if (codec) {
            uint8_t *z;
            size_t zl;
            CHECK(gr_compress(codec, b + GR_BATCH_HEADER_SIZE, len - GR_BATCH_HEADER_SIZE, &z, &zl) == 0);
            b = gr_realloc(b, GR_BATCH_HEADER_SIZE + zl);
            memcpy(b + GR_BATCH_HEADER_SIZE, z, zl);
            free(z);
            len = GR_BATCH_HEADER_SIZE + zl;
            gr_put_be32(b + 8, (uint32_t)(len - 12));
            gr_put_be16(b + 21, (uint16_t)(gr_be16(b + 21) | codec));
            gr_batch_update_crc(b, len);
        }
        struct gr_append_info info;
        CHECK(gr_plog_append_as_leader(log, b, len, 0, &info) == 0 && info.error == 0);
        free(b);
    }
    for (int i = 0; i < 12; i++) put(log, 30, 4, 2, 0, -1); /* fillers: the tombstones' segment rolls */
    struct gr_cleaner_params p = params();
    p.now_ms = gr_wall_ms();
    struct gr_clean_stats st;
    CHECK(gr_plog_clean(log, 0, &p, &st) == 0 && st.segments_cleaned > 0);
    struct view v;
    scan(log, &v);
    CHECKF(v.horizon_batches == 2 && v.horizon == INT64_MAX, "%d horizon batches, horizon %" PRId64,
           v.horizon_batches, v.horizon);
    for (int codec = 0; codec <= 1; codec++)
        for (int i = 0; i < N; i++)
            CHECKF(v.seen[10 * codec + i] && v.ts[10 * codec + i] == tss[i], "k%d timestamp %" PRId64 " want %" PRId64,
                   10 * codec + i, v.ts[10 * codec + i], tss[i]);
    gr_plog_close(log);
}

/* Deletion (Kafka's LogManager.asyncDelete): an aborted pass swaps nothing; the renamed log keeps
 * working from "<dir>.<hex>-delete" while a new log opens empty at the old path. */
static void test_abort_and_rename_for_delete(void) {
    struct gr_plog *log = open_log("cl-del-0", 0);
    for (int round = 0; round < 10; round++)
        for (int k = 0; k < 20; k += 4) put(log, k, 4, round, 0, -1);
    int64_t end = gr_plog_end_offset(log), size = gr_plog_size_bytes(log);
    CHECK(gr_plog_segment_count(log) > 3);
    atomic_bool abort = true;
    struct gr_cleaner_params p = params();
    p.abort = &abort;
    struct gr_clean_stats st;
    CHECK(gr_plog_clean(log, 0, &p, &st) == -ECANCELED);
    CHECK(st.segments_cleaned == 0 && gr_plog_size_bytes(log) == size);
    CHECK(gr_plog_rename_for_delete(log) == 0);
    struct stat sb;
    CHECK(stat(pdir("cl-del-0"), &sb) < 0 && errno == ENOENT);
    const char *moved = gr_plog_dir(log);
    CHECK(strncmp(moved, pdir("cl-del-0"), strlen(pdir("cl-del-0"))) == 0 && strlen(moved) > 40);
    CHECK(strcmp(moved + strlen(moved) - 7, "-delete") == 0 && stat(moved, &sb) == 0);
    char *moved_copy = gr_strdup(moved);
    put(log, 0, 4, 50, 0, -1); /* appends (and rolls) go on in the renamed directory */
    gr_plog_flush(log);
    CHECK(gr_plog_end_offset(log) == end + 4);
    struct gr_plog *fresh = open_log("cl-del-0", 0);
    CHECK(gr_plog_end_offset(fresh) == 0 && gr_plog_size_bytes(fresh) == 0);
    abort = false;
    p = params();
    CHECK(gr_plog_clean(log, 0, &p, &st) == 0 && st.segments_cleaned > 0);
    CHECK(gr_plog_delete(log) == 0);
    CHECK(stat(moved_copy, &sb) < 0 && errno == ENOENT);
    free(moved_copy);
    CHECK(gr_plog_end_offset(fresh) == 0);
    gr_plog_close(fresh);
}

/* The rename for deletion needs no file descriptor: a broker out of descriptors (EMFILE) must
 * still move the directory away, or a partition created again at the path would reopen the
 * deleted records (and lose its own when the old log's directory is removed). */
static void test_rename_for_delete_without_fds(void) {
    struct gr_plog *log = open_log("cl-del-emfile-0", 0);
    put(log, 0, 4, 0, 0, -1);
    gr_plog_flush(log);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        rl.rlim_cur = 64;
        setrlimit(RLIMIT_NOFILE, &rl);
        while (open("/dev/null", O_RDONLY) >= 0) {
        }
        if (errno != EMFILE) _exit(2);
        int rc = gr_plog_rename_for_delete(log);
        struct stat sb;
        _exit(rc == 0 && stat(gr_plog_dir(log), &sb) == 0 ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rename without descriptors: status %d", status);
    struct stat sb;
    CHECK(stat(pdir("cl-del-emfile-0"), &sb) < 0 && errno == ENOENT);
    gr_plog_close(log); /* the parent's copy still names the old path: leftovers are removed with the root */
}

static void test_keyless_rejected(void) {
    struct gr_plog *log = open_log("cl-keyless-0", 0);
    struct gr_batch_rec rec = {NULL, -1, "v", 1, NULL, 0, 5};
    size_t len;
    uint8_t *b = gr_batch_build(&rec, 1, NULL, &len);
    struct gr_append_info info;
    CHECK(gr_plog_append_as_leader(log, b, len, 0, &info) == 0);
    CHECK_KERR(info.error, GR_KERR_INVALID_RECORD);
    free(b);
    CHECK(gr_plog_end_offset(log) == 0);
    gr_plog_close(log);
}

static void test_producer_last_batch_and_lag(void) {
    struct gr_plog *log = open_log("cl-pid-0", 0);
    put(log, 0, 2, 1, 0, 1); /* producer 1's only batch: superseded below, but kept (empty) */
    for (int r = 2; r < 30; r++) put(log, 0, 2, r, 0, -1);
    struct gr_cleaner_params p = params();
    struct gr_clean_stats st;
    CHECK(gr_plog_clean(log, 0, &p, &st) == 0);
    struct gr_plog_read_result r;
    CHECK(gr_plog_read(log, 0, 1 << 20, -1, true, &r) == 0 && r.len > 0);
    struct gr_batch_info bi;
    CHECK(gr_batch_validate_one(r.data, r.len, 0, &bi) == GR_BATCH_OK);
    CHECK(bi.ProducerId == 1 && bi.RecordCount == 0 && bi.BaseOffset == 0 && bi.LastOffsetDelta == 1);
    free(r.data);
    /* min.compaction.lag.ms: recent segments are not cleanable */
    struct gr_plog_config cfg;
    gr_plog_get_config(log, &cfg);
    cfg.min_compaction_lag_ms = 3600 * 1000;
    gr_plog_set_config(log, &cfg);
    for (int rr = 0; rr < 30; rr++) put(log, 0, 2, 2000 + rr, 0, -1); /* timestamps 3000+: "now" below */
    struct gr_cleanable c;
    gr_plog_cleanable(log, st.end_offset, 3000 + 1000, &c);
    CHECK(c.first_uncleanable == c.first_dirty && c.cleanable_bytes == 0);
    gr_plog_cleanable(log, st.end_offset, 3000 + 7200 * 1000, &c);
    CHECK(c.first_uncleanable > c.first_dirty && c.cleanable_bytes > 0);
    /* max.compaction.lag.ms forces a log below the dirty ratio */
    cfg.min_compaction_lag_ms = 0;
    cfg.min_cleanable_dirty_ratio = 0.99;
    cfg.max_compaction_lag_ms = 1;
    gr_plog_set_config(log, &cfg);
    gr_plog_cleanable(log, st.end_offset, gr_wall_ms(), &c);
    CHECK(c.must_clean);
    gr_plog_close(log);
}

/* The cleaner killed at each step of the swap: the reopened log reads the same latest values
 * with offsets rising, and a later clean completes. */
static void test_crash_safety(void) {
    static const char *const steps[] = {"cleaned", "swap", "deleted"};
    for (int s = 0; s < 3; s++) {
        char name[32];
        snprintf(name, sizeof name, "cl-crash-%d", s);
        struct gr_plog *log = open_log(name, 0);
        for (int round = 0; round < 8; round++)
            for (int k = 0; k < 12; k += 4) put(log, k, 4, round, round % 3, -1);
        int64_t end = gr_plog_end_offset(log);
        struct view before, after;
        scan(log, &before);
        gr_plog_flush(log);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("GREGOR_TEST_CLEANER_CRASH", steps[s], 1);
            struct gr_cleaner_params p = params();
            struct gr_clean_stats st;
            gr_plog_clean(log, 0, &p, &st);
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "step %s: child not killed", steps[s]);
        gr_plog_close(log);
        log = open_log(name, end);
        CHECK(gr_plog_end_offset(log) == end);
        scan(log, &after);
        for (int k = 0; k < 12; k++) CHECKF(strcmp(before.val[k], after.val[k]) == 0, "step %s k%d", steps[s], k);
        struct gr_cleaner_params p = params();
        struct gr_clean_stats st;
        CHECK(gr_plog_clean(log, 0, &p, &st) == 0);
        scan(log, &after);
        for (int k = 0; k < 12; k++) CHECK(strcmp(before.val[k], after.val[k]) == 0);
        gr_plog_close(log);
        /* no leftovers */
        char cmd[512];
        snprintf(cmd, sizeof cmd, "ls %s | grep -q -E 'cleaned|swap|deleted'", pdir(name));
        CHECK(system(cmd) != 0);
    }
}

/* A segment of the group whose .log cannot be renamed to .log.deleted (an obstacle directory of
 * that name): the pass fails and the swap is undone -- the old segments stay in memory and on disk
 * and, after a restart, no old .log of the group lies next to a cleaned one. */
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void test_swap_rename_failure(void) {
    const char *name = "cl-rename-fail";
    struct gr_plog *log = open_log(name, 0);
    for (int round = 0; round < 30; round++)
        for (int k = 0; k < 12; k += 4) put(log, k, 4, round, 0, -1);
    int64_t end = gr_plog_end_offset(log);
    CHECK(gr_plog_segment_count(log) >= 4);
    struct view before, after;
    scan(log, &before);
    gr_plog_flush(log);
    /* one group for the whole pass */
    struct gr_plog_config cfg;
    gr_plog_get_config(log, &cfg);
    cfg.segment_bytes = 1 << 20;
    gr_plog_set_config(log, &cfg);
    /* the second segment's base */
    DIR *d = opendir(pdir(name));
    CHECK(d != NULL);
    char *names[256];
    int nn = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL && nn < 256) {
        size_t l = strlen(de->d_name);
        if (l == 24 && strcmp(de->d_name + 20, ".log") == 0) names[nn++] = gr_strdup(de->d_name);
    }
    if (d) closedir(d);
    qsort(names, (size_t)nn, sizeof *names, cmp_str);
    CHECK(nn >= 3);
    char obstacle[512], inner[600];
    snprintf(obstacle, sizeof obstacle, "%s/%s.deleted", pdir(name), names[1]);
    snprintf(inner, sizeof inner, "%s/x", obstacle);
    for (int i = 0; i < nn; i++) free(names[i]);
    CHECK(mkdir(obstacle, 0755) == 0 && mkdir(inner, 0755) == 0);
    struct gr_cleaner_params p = params();
    struct gr_clean_stats st;
    CHECK(gr_plog_clean(log, 0, &p, &st) < 0);
    CHECK(st.segments_cleaned == 0);
    scan(log, &after);
    for (int k = 0; k < 12; k++) CHECKF(strcmp(before.val[k], after.val[k]) == 0, "in memory k%d", k);
    CHECK(after.records == before.records && gr_plog_end_offset(log) == end);
    gr_plog_close(log);
    CHECK(rmdir(inner) == 0 && rmdir(obstacle) == 0);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q -E 'cleaned|swap|deleted'", pdir(name));
    CHECK(system(cmd) != 0); /* nothing left over: the swap was undone */
    log = open_log(name, end);
    CHECK(gr_plog_end_offset(log) == end);
    scan(log, &after); /* offsets strictly rising: no overlapping segments */
    for (int k = 0; k < 12; k++) CHECKF(strcmp(before.val[k], after.val[k]) == 0, "reopened k%d", k);
    CHECK(after.records == before.records);
    p = params();
    CHECK(gr_plog_clean(log, 0, &p, &st) == 0 && st.segments_cleaned > 0);
    scan(log, &after);
    for (int k = 0; k < 12; k++) CHECK(strcmp(before.val[k], after.val[k]) == 0);
    gr_plog_close(log);
}

/* Issue 23 item 5: a .log.swap left by a swap that failed half-way (it holds a group whose old
 * segments are gone; gr_plog_complete_swaps finishes it at the next open) is never overwritten
 * by a later pass: the pass fails with an I/O error (the dir goes offline, Kafka's
 * KafkaStorageException) and swaps nothing. */
static void test_existing_swap_not_overwritten(void) {
    const char *name = "cl-swap-exists";
    struct gr_plog *log = open_log(name, 0);
    for (int round = 0; round < 30; round++)
        for (int k = 0; k < 12; k += 4) put(log, k, 4, round, 0, -1);
    CHECK(gr_plog_segment_count(log) >= 4);
    struct view before, after;
    scan(log, &before);
    gr_plog_flush(log);
    char swap[512];
    snprintf(swap, sizeof swap, "%s/%020d.log.swap", pdir(name), 0);
    FILE *f = fopen(swap, "w");
    CHECK(f != NULL);
    fputs("the only copy", f);
    fclose(f);
    /* ... and its .txnindex.swap (the aborted transactions of that group), kept too */
    char tswap[512];
    snprintf(tswap, sizeof tswap, "%s/%020d.txnindex.swap", pdir(name), 0);
    f = fopen(tswap, "w");
    CHECK(f != NULL);
    fputs("the only index", f);
    fclose(f);
    struct gr_cleaner_params p = params();
    struct gr_clean_stats st;
    CHECK(gr_plog_clean(log, 0, &p, &st) == -EIO);
    CHECK(st.segments_cleaned == 0);
    char got[64] = "";
    f = fopen(swap, "r");
    CHECK(f && fgets(got, sizeof got, f) && strcmp(got, "the only copy") == 0);
    if (f) fclose(f);
    got[0] = 0;
    f = fopen(tswap, "r");
    CHECKF(f && fgets(got, sizeof got, f) && strcmp(got, "the only index") == 0,
           "the .txnindex.swap of the half-done swap was replaced (got '%s')", got);
    if (f) fclose(f);
    unlink(tswap);
    scan(log, &after);
    for (int k = 0; k < 12; k++) CHECKF(strcmp(before.val[k], after.val[k]) == 0, "k%d", k);
    CHECK(after.records == before.records);
    gr_plog_close(log);
    unlink(swap);
}

/* A follower truncation while a (throttled) pass reads the segments: a segment cut under the
 * pass reads short, which is not corruption -- the pass is abandoned (retried later), it does not
 * fail with GR_ECORRUPT (which would mark a healthy log uncleanable). */
struct trunc_arg {
    struct gr_plog *log;
    int64_t offset;
};

static void *truncate_later(void *arg) {
    struct trunc_arg *a = arg;
    struct timespec ts = {0, 250 * 1000000L};
    nanosleep(&ts, NULL);
    CHECK(gr_plog_truncate_to(a->log, a->offset) == 0);
    return NULL;
}

static void test_truncation_during_pass(void) {
    struct gr_plog *log = open_log("cl-trunc", 0);
    for (int round = 0; round < 30; round++)
        for (int k = 0; k < 12; k += 4) put(log, k, 4, round, 0, -1);
    CHECK(gr_plog_segment_count(log) >= 5);
    int64_t cut = gr_plog_end_offset(log) / 2 / 4 * 4; /* a batch boundary inside an older segment */
    struct trunc_arg ta = {log, cut};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, truncate_later, &ta) == 0);
    struct gr_cleaner_params p = params();
    p.io_max_bytes_per_second = 4000; /* the map alone takes > 1 s */
    struct gr_clean_stats st;
    int rc = gr_plog_clean(log, 0, &p, &st);
    pthread_join(t, NULL);
    CHECKF(rc == 0, "pass over a log truncated meanwhile: %s", gr_strerror(rc));
    CHECK(gr_plog_end_offset(log) == cut);
    p = params();
    CHECK(gr_plog_clean(log, 0, &p, &st) == 0);
    gr_plog_close(log);
}

/* Issue 23 item 13: compact,delete. Retention deleting the oldest segment while a (throttled)
 * pass runs does not cancel the pass (it did: every retention pass bumped the generation, so a
 * log whose retention deletes a segment every check was never compacted): the groups that lost a
 * segment are skipped -- their records stay deleted -- and the later groups are swapped in. */
struct ret_arg {
    struct gr_plog *log;
    int deleted;
};

static void *retention_later(void *arg) {
    struct ret_arg *a = arg;
    struct timespec ts = {0, 250 * 1000000L};
    nanosleep(&ts, NULL);
    /* by size: everything but ~3/4 of the log goes (the oldest segments) */
    int64_t keep = gr_plog_size_bytes(a->log) * 3 / 4;
    a->deleted = gr_plog_apply_retention(a->log, gr_plog_end_offset(a->log), -1, keep, gr_wall_ms());
    return NULL;
}

static void test_retention_during_pass(void) {
    struct gr_plog *log = open_log("cl-ret", 0);
    struct gr_plog_config cfg;
    gr_plog_get_config(log, &cfg);
    cfg.cleanup_delete = true; /* compact,delete */
    gr_plog_set_config(log, &cfg);
    for (int round = 0; round < 30; round++)
        for (int k = 0; k < 12; k += 4) put(log, k, 4, round, 0, -1);
    CHECK(gr_plog_segment_count(log) >= 5);
    struct view before, after;
    scan(log, &before);
    int64_t end = gr_plog_end_offset(log), size = gr_plog_size_bytes(log);
    struct ret_arg ra = {log, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, retention_later, &ra) == 0);
    struct gr_cleaner_params p = params();
    p.io_max_bytes_per_second = 4000; /* the map alone takes > 1 s */
    struct gr_clean_stats st;
    int rc = gr_plog_clean(log, 0, &p, &st);
    pthread_join(t, NULL);
    CHECKF(rc == 0, "pass over a log whose retention ran meanwhile: %s", gr_strerror(rc));
    CHECK(ra.deleted > 0);
    CHECKF(st.segments_cleaned > 0, "compacted despite retention (%d segments deleted by it)", ra.deleted);
    CHECK(gr_plog_end_offset(log) == end && gr_plog_size_bytes(log) < size * 3 / 4);
    scan(log, &after);
    for (int k = 0; k < 12; k++) CHECKF(strcmp(before.val[k], after.val[k]) == 0, "k%d", k);
    CHECK(after.records < before.records);
    gr_plog_close(log);
}

/* A compressed batch whose records inflate beyond the cleaner's 64 MiB bound is valid data: the
 * pass keeps it as it is and cleans the rest, it does not fail as corrupt (KIP-346 would mark the
 * log uncleanable). A leader refuses such a batch now (the log validator's bound, MESSAGE_TOO_LARGE);
 * logs written before that, and followers, still hold them. */
static void test_huge_inflated_batch_kept(void) {
    struct gr_plog *log = open_log("cl-huge", 0);
    for (int round = 0; round < 6; round++) put(log, 0, 4, round, 0, -1);
    enum { NBIG = 66, VLEN = 1 << 20 };
    char *val = gr_malloc(VLEN);
    memset(val, 'z', VLEN);
    struct gr_batch_rec recs[NBIG];
    static char keys[NBIG][16];
    for (int i = 0; i < NBIG; i++) {
        snprintf(keys[i], 16, "k%d", 40 + i % 8);
        recs[i] = (struct gr_batch_rec){keys[i], (int32_t)strlen(keys[i]), val, VLEN, NULL, 0, 1000};
    }
    size_t len;
    uint8_t *b = gr_batch_build(recs, NBIG, NULL, &len);
    free(val);
    uint8_t *z;
    size_t zl;
    CHECK(gr_compress(GR_CODEC_ZSTD, b + GR_BATCH_HEADER_SIZE, len - GR_BATCH_HEADER_SIZE, &z, &zl) == 0);
    b = gr_realloc(b, GR_BATCH_HEADER_SIZE + zl);
    memcpy(b + GR_BATCH_HEADER_SIZE, z, zl);
    free(z);
    len = GR_BATCH_HEADER_SIZE + zl;
    gr_put_be32(b + 8, (uint32_t)(len - 12));
    gr_put_be16(b + 21, (uint16_t)(gr_be16(b + 21) | GR_CODEC_ZSTD));
    gr_batch_update_crc(b, len);
    struct gr_append_info info;
    struct gr_plog_config cfg;
    gr_plog_get_config(log, &cfg);
    cfg.segment_bytes = 1 << 20; /* the compressed batch is a few KiB */
    gr_plog_set_config(log, &cfg);
    struct gr_append_info linfo;
    CHECK(gr_plog_append_as_leader(log, b, len, 0, &linfo) == 0 && linfo.error == GR_KERR_MESSAGE_TOO_LARGE);
    gr_batch_set_base_offset(b, gr_plog_end_offset(log));
    int arc = gr_plog_append_as_follower(log, b, len, &info);
    cfg.segment_bytes = 1500;
    gr_plog_set_config(log, &cfg);
    CHECKF(arc == 0 && info.error == 0, "append: rc %d error %d", arc, info.error);
    int64_t big_first = info.first_offset;
    free(b);
    for (int round = 6; round < 20; round++) put(log, 0, 4, round, 0, -1);
    int64_t end = gr_plog_end_offset(log);
    struct gr_cleaner_params p = params();
    struct gr_clean_stats st;
    int rc = gr_plog_clean(log, 0, &p, &st);
    CHECKF(rc == 0, "pass over a log with a 66 MiB (inflated) batch: %s", gr_strerror(rc));
    CHECK(st.segments_cleaned > 0 && gr_plog_end_offset(log) == end);
    /* the big batch is still there, whole */
    struct gr_plog_read_result r;
    CHECK(gr_plog_read(log, big_first, 1 << 20, -1, true, &r) == 0 && r.error == 0 && r.len > 0);
    struct gr_batch_info bi;
    CHECK(r.len >= GR_BATCH_HEADER_SIZE && gr_batch_parse_header(r.data, r.len, &bi) == GR_BATCH_OK &&
          bi.BaseOffset == big_first && bi.RecordCount == NBIG);
    free(r.data);
    gr_plog_close(log);
}

/* ---- transactions ---- */

static int32_t g_tseq[8];

/* A transactional batch of pid: n records k<key+i> = v<val>. */
static void txn_put(struct gr_plog *log, int64_t pid, int key, int n, int val) {
    struct gr_batch_rec recs[16];
    char keys[16][16], vals[16][16];
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], 16, "k%d", key + i);
        snprintf(vals[i], 16, "v%d", val);
        recs[i] = (struct gr_batch_rec){keys[i], (int32_t)strlen(keys[i]), vals[i], (int32_t)strlen(vals[i]),
                                        NULL, 0, 1000 + val};
    }
    struct gr_batch_build_opts o = GR_BATCH_BUILD_OPTS_INIT;
    o.attributes = GR_BATCH_ATTR_TRANSACTIONAL;
    o.producer_id = pid;
    o.producer_epoch = 0;
    o.base_sequence = g_tseq[pid];
    g_tseq[pid] += n;
    size_t len;
    uint8_t *b = gr_batch_build(recs, n, &o, &len);
    struct gr_append_info info;
    CHECK(gr_plog_append_origin(log, b, len, 0, false, &info) == 0);
    CHECKF(info.error == 0, "txn append error %d", info.error);
    free(b);
}

static void txn_end(struct gr_plog *log, int64_t pid, bool commit) {
    uint8_t k[4] = {0, 0, 0, commit ? 1 : 0}, v[6] = {0};
    struct gr_batch_rec r = {k, 4, v, 6, NULL, 0, 5000};
    struct gr_batch_build_opts o = GR_BATCH_BUILD_OPTS_INIT;
    o.attributes = GR_BATCH_ATTR_TRANSACTIONAL | GR_BATCH_ATTR_CONTROL;
    o.producer_id = pid;
    o.producer_epoch = 0;
    size_t len;
    uint8_t *b = gr_batch_build(&r, 1, &o, &len);
    struct gr_append_info info;
    CHECK(gr_plog_append_origin(log, b, len, 0, true, &info) == 0);
    CHECKF(info.error == 0, "marker append error %d", info.error);
    free(b);
}

/* Markers of pid in the log: [0] ABORT, [1] COMMIT. */
static void count_markers(struct gr_plog *log, int64_t pid, int out[2]) {
    out[0] = out[1] = 0;
    int64_t off = gr_plog_start_offset(log);
    for (;;) {
        struct gr_plog_read_result r;
        CHECK(gr_plog_read(log, off, 1 << 20, -1, true, &r) == 0 && r.error == 0);
        if (r.len == 0) break;
        struct gr_batch_iter it;
        struct gr_batch_info bi;
        const uint8_t *bp;
        gr_batch_iter_init(&it, r.data, r.len);
        while (gr_batch_iter_next(&it, &bi, &bp) == 1) {
            if (!(bi.Attributes & GR_BATCH_ATTR_CONTROL) || bi.ProducerId != pid || bi.RecordCount != 1) continue;
            struct gr_batch_rec_iter ri;
            struct gr_batch_rec_view rv;
            CHECK(gr_batch_rec_iter_init(&ri, bp, bi.size) == GR_BATCH_OK && gr_batch_rec_iter_next(&ri, &rv));
            out[gr_be16((const uint8_t *)rv.Key + 2) == 1]++;
        }
        off = r.next_offset;
        free(r.data);
    }
}

/* Every file of dir ending in suffix gets mtime ms. */
static void set_mtimes(const char *dir, const char *suffix, int64_t ms) {
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t l = strlen(de->d_name), sl = strlen(suffix);
        if (l < sl || strcmp(de->d_name + l - sl, suffix) != 0) continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct timespec ts[2] = {{ms / 1000, 0}, {ms / 1000, 0}};
        utimensat(AT_FDCWD, p, ts, 0);
    }
    if (d) closedir(d);
}

/* Every .txnindex file belongs to an existing segment; no swap leftovers. Returns how many. */
static int check_txnindex_files(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d))) {
        CHECKF(!strstr(de->d_name, ".swap") && !strstr(de->d_name, ".cleaned") && !strstr(de->d_name, ".deleted"),
               "leftover %s", de->d_name);
        size_t l = strlen(de->d_name);
        if (l != 29 || strcmp(de->d_name + 20, ".txnindex") != 0) continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%.20s.log", dir, de->d_name);
        struct stat st;
        CHECKF(stat(p, &st) == 0, "%s without its segment", de->d_name);
        n++;
    }
    if (d) closedir(d);
    return n;
}

static void fillers(struct gr_plog *log, int n, int val) {
    for (int i = 0; i < n; i++) put(log, 10, 4, val, 0, -1);
}

static void test_transactions(void) {
    const char *name = "cl-txn";
    struct gr_plog *log = open_log(name, 0);
    struct gr_plog_config cfg;
    gr_plog_get_config(log, &cfg);
    cfg.delete_retention_ms = 0;
    gr_plog_set_config(log, &cfg);
    txn_put(log, 1, 0, 4, 1); /* committed k0-k3 = v1 */
    txn_end(log, 1, true);
    int64_t ab_first = gr_plog_end_offset(log);
    txn_put(log, 2, 0, 4, 99); /* aborted k0-k3 = v99 */
    txn_end(log, 2, false);
    int64_t ab_last = gr_plog_end_offset(log) - 1;
    txn_put(log, 2, 30, 1, 7); /* pid 2's last batch: committed k30 */
    txn_end(log, 2, true);
    txn_put(log, 4, 40, 1, 1); /* committed k40 = v1, superseded below */
    txn_end(log, 4, true);
    txn_put(log, 4, 41, 1, 1);
    txn_end(log, 4, true);
    put(log, 40, 1, 2, 0, -1);
    fillers(log, 30, 1);
    int64_t ongoing = gr_plog_end_offset(log);
    txn_put(log, 3, 20, 1, 5); /* undecided */
    fillers(log, 30, 2);
    gr_plog_txn_hw_moved(log, gr_plog_end_offset(log));
    struct gr_aborted_txn *ab = NULL;
    CHECK(gr_plog_collect_aborted(log, 0, INT64_MAX, &ab) == 1);
    free(ab);

    struct gr_cleaner_params p = params();
    struct gr_clean_stats st;
    CHECK(gr_plog_clean(log, 0, &p, &st) == 0 && st.segments_cleaned > 1);
    CHECKF(st.end_offset <= ongoing, "cleaned past the ongoing transaction: %" PRId64 " > %" PRId64, st.end_offset,
           ongoing);
    struct view v;
    scan(log, &v);
    CHECK(strcmp(v.val[0], "v1") == 0 && strcmp(v.val[3], "v1") == 0); /* aborted v99 gone, committed kept */
    CHECK(strcmp(v.val[30], "v7") == 0 && strcmp(v.val[40], "v2") == 0 && strcmp(v.val[41], "v1") == 0);
    CHECK(strcmp(v.val[20], "v5") == 0);
    int m[2];
    count_markers(log, 2, m);
    CHECK(m[0] == 1 && m[1] == 1); /* inside the delete horizon: kept */
    count_markers(log, 4, m);
    CHECK(m[1] == 2);
    /* the ABORT marker stays (its data was seen in this pass): its entry is in the cleaned
     * segment's .txnindex, the merged segments' files are gone; same after a reopen */
    CHECK(gr_plog_collect_aborted(log, 0, INT64_MAX, &ab) == 1);
    CHECK(ab[0].producer_id == 2 && ab[0].first_offset == ab_first && ab[0].last_offset == ab_last);
    free(ab);
    CHECK(check_txnindex_files(pdir(name)) == 1);
    int64_t end = gr_plog_end_offset(log);
    gr_plog_close(log);
    log = open_log(name, end);
    gr_plog_set_config(log, &cfg);
    CHECK(gr_plog_collect_aborted(log, 0, INT64_MAX, &ab) == 1 && ab[0].last_offset == ab_last);
    free(ab);

    /* the transaction is decided; everything past the delete horizon: markers whose data is
     * gone go, with the .txnindex entry */
    txn_end(log, 3, true);
    fillers(log, 30, 3);
    gr_plog_txn_hw_moved(log, gr_plog_end_offset(log));
    set_mtimes(pdir(name), ".log", gr_wall_ms() - 100000);
    p = params();
    int64_t dirty = st.end_offset;
    CHECK(gr_plog_clean(log, dirty, &p, &st) == 0 && st.segments_cleaned > 0);
    CHECK(st.end_offset > ongoing);
    /* KIP-534: pid 2's ABORT marker became discardable in this pass (its data went in the first):
     * it gets its delete horizon (now + 0) now and goes in the next pass */
    count_markers(log, 2, m);
    CHECKF(m[0] == 1 && m[1] == 1, "pid 2 markers: %d abort %d commit", m[0], m[1]);
    fillers(log, 30, 4);
    gr_plog_txn_hw_moved(log, gr_plog_end_offset(log));
    p = params();
    p.now_ms += 1;
    CHECK(gr_plog_clean(log, st.end_offset, &p, &st) == 0 && st.segments_cleaned > 0);
    count_markers(log, 2, m);
    CHECKF(m[0] == 0 && m[1] == 1, "pid 2 markers: %d abort %d commit", m[0], m[1]);
    count_markers(log, 4, m);
    CHECKF(m[1] == 1, "pid 4: %d commits", m[1]); /* the first one's data was superseded */
    count_markers(log, 1, m);
    CHECK(m[1] == 1); /* its data (the latest k0-k3) is still there */
    count_markers(log, 3, m);
    CHECK(m[1] == 1);
    CHECK(gr_plog_collect_aborted(log, 0, INT64_MAX, &ab) == 0);
    free(ab);
    CHECK(check_txnindex_files(pdir(name)) == 0);
    scan(log, &v);
    CHECK(strcmp(v.val[0], "v1") == 0 && strcmp(v.val[20], "v5") == 0 && strcmp(v.val[41], "v1") == 0);
    end = gr_plog_end_offset(log);
    gr_plog_close(log);
    log = open_log(name, end);
    CHECK(gr_plog_collect_aborted(log, 0, INT64_MAX, &ab) == 0);
    free(ab);
    scan(log, &v);
    CHECK(strcmp(v.val[0], "v1") == 0 && strcmp(v.val[30], "v7") == 0);
    gr_plog_close(log);
}

/* The cleaner killed at each swap step with an aborted transaction in the cleaned range: after
 * the reopen the aborted entry is indexed exactly once, in a segment's file, and the committed
 * values read back. */
static void test_txn_crash_safety(void) {
    static const char *const steps[] = {"cleaned", "swap", "deleted", "txnindex"};
    for (int s = 0; s < 4; s++) {
        char name[32];
        snprintf(name, sizeof name, "cl-txncrash-%d", s);
        memset(g_tseq, 0, sizeof g_tseq);
        struct gr_plog *log = open_log(name, 0);
        fillers(log, 20, 1);
        txn_put(log, 5, 0, 4, 1);
        txn_end(log, 5, true);
        txn_put(log, 6, 0, 4, 99);
        txn_end(log, 6, false);
        txn_put(log, 6, 30, 1, 7);
        txn_end(log, 6, true);
        fillers(log, 40, 2);
        gr_plog_txn_hw_moved(log, gr_plog_end_offset(log));
        int64_t end = gr_plog_end_offset(log);
        gr_plog_flush(log);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("GREGOR_TEST_CLEANER_CRASH", steps[s], 1);
            struct gr_cleaner_params p = params();
            struct gr_clean_stats st;
            gr_plog_clean(log, 0, &p, &st);
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "step %s: child not killed", steps[s]);
        gr_plog_close(log);
        log = open_log(name, end);
        CHECK(gr_plog_end_offset(log) == end);
        struct gr_aborted_txn *ab = NULL;
        CHECKF(gr_plog_collect_aborted(log, 0, INT64_MAX, &ab) == 1 && ab[0].producer_id == 6, "step %s", steps[s]);
        free(ab);
        CHECKF(check_txnindex_files(pdir(name)) == 1, "step %s", steps[s]);
        struct gr_cleaner_params p = params();
        struct gr_clean_stats st;
        CHECK(gr_plog_clean(log, 0, &p, &st) == 0);
        struct view v;
        scan(log, &v);
        CHECKF(strcmp(v.val[0], "v1") == 0 && strcmp(v.val[30], "v7") == 0, "step %s: k0=%s", steps[s], v.val[0]);
        CHECK(gr_plog_collect_aborted(log, 0, INT64_MAX, &ab) == 1);
        free(ab);
        CHECK(check_txnindex_files(pdir(name)) == 1);
        gr_plog_close(log);
    }
}

/* Records with key "k<key>" in the log (uncompressed batches). */
static int count_key(struct gr_plog *log, int key) {
    char want[16];
    snprintf(want, sizeof want, "k%d", key);
    int n = 0;
    int64_t off = gr_plog_start_offset(log);
    for (;;) {
        struct gr_plog_read_result r;
        CHECK(gr_plog_read(log, off, 1 << 20, -1, true, &r) == 0 && r.error == 0);
        if (r.len == 0) break;
        struct gr_batch_iter it;
        struct gr_batch_info bi;
        const uint8_t *bp;
        gr_batch_iter_init(&it, r.data, r.len);
        while (gr_batch_iter_next(&it, &bi, &bp) == 1) {
            struct gr_batch_rec_iter ri;
            struct gr_batch_rec_view rv;
            if (gr_batch_rec_iter_init(&ri, bp, bi.size) != GR_BATCH_OK) continue;
            while (gr_batch_rec_iter_next(&ri, &rv))
                if (rv.Key && rv.KeyLength == (int32_t)strlen(want) && memcmp(rv.Key, want, strlen(want)) == 0) n++;
        }
        off = r.next_offset;
        free(r.data);
    }
    return n;
}

/* Kafka's LogCleanerManager.maybeTruncateCheckpoint: a truncation below the cleaner checkpoint
 * lowers it (and cleaner-offset-checkpoint), so records written again below the old checkpoint
 * are cleaned: an old value superseded there does not survive. */
static void test_truncation_lowers_checkpoint(void) {
    char err[256];
    struct gr_config cfg;
    gr_config_defaults(&cfg);
    CHECK(gr_config_set(&cfg, "log.dirs", pdir("lm"), err, sizeof err) == 0);
    CHECK(gr_config_set(&cfg, "zookeeper.connect", "127.0.0.1:1", err, sizeof err) == 0);
    CHECK(gr_config_set(&cfg, "broker.id", "1", err, sizeof err) == 0);
    CHECK(gr_config_set(&cfg, "log.cleaner.enable", "false", err, sizeof err) == 0);
    CHECK(gr_config_finish(&cfg, err, sizeof err) == 0);
    struct gr_plog_manager *lm = NULL;
    CHECK(gr_plog_manager_open(&cfg, 1, "c", &lm) == 0 && lm);
    struct gr_plog_config lc;
    gr_plog_manager_default_config(lm, &lc);
    lc.segment_bytes = 1500;
    lc.cleanup_compact = true;
    lc.cleanup_delete = false;
    lc.min_cleanable_dirty_ratio = 0.01;
    struct gr_lm_log *l = NULL;
    CHECK(gr_plog_manager_get_or_create(lm, "c", 0, &lc, &l) == 0 && l);
    for (int round = 0; round < 10; round++)
        for (int k = 0; k < 20; k += 4) put(l->log, k, 4, round, 0, -1);
    CHECK(gr_plog_manager_clean_once(lm) == 1);
    int64_t ck = atomic_load(&l->cleaner_checkpoint);
    CHECK(ck > 20);
    CHECK(gr_plog_truncate_to(l->log, ck / 2) == 0);
    int64_t t = gr_plog_end_offset(l->log);
    CHECKF(atomic_load(&l->cleaner_checkpoint) == t, "checkpoint %lld after truncating to %lld", (long long)ck,
           (long long)t);
    CHECK(gr_plog_manager_checkpoint(lm) == 0);
    char path[320];
    snprintf(path, sizeof path, "%s/cleaner-offset-checkpoint", pdir("lm"));
    struct gr_offset_checkpoint_entry *e = NULL;
    size_t ne = 0;
    CHECK(gr_offset_checkpoint_read(path, &e, &ne) == 0);
    CHECK(gr_offset_checkpoint_find(e, ne, "c", 0, -1) == t);
    gr_offset_checkpoint_free(e, ne);
    /* grown back: k40 written twice below the old checkpoint, then other keys past it */
    put(l->log, 40, 1, 1, 0, -1);
    put(l->log, 40, 1, 2, 0, -1);
    CHECK(gr_plog_end_offset(l->log) < ck);
    for (int i = 0; i < 60; i++) put(l->log, 50 + (i % 10) * 4, 4, 100 + i, 0, -1);
    CHECK(gr_plog_end_offset(l->log) > ck + 100); /* the old checkpoint lies inside the log */
    CHECK(gr_plog_manager_clean_once(lm) == 1);
    CHECKF(count_key(l->log, 40) == 1, "k40 kept %d times", count_key(l->log, 40));
    gr_plog_manager_release(lm, l);
    gr_plog_manager_close(lm);
    gr_config_release(&cfg);
}

int main(void) {
    gr_log_set_level(GR_LOG_ERROR);
    snprintf(g_root, sizeof g_root, "/tmp/gr-cleaner-XXXXXX");
    if (!mkdtemp(g_root)) return 1;
    test_offset_map_and_codecs();
    test_clean_basic();
    test_delete_horizon();
    test_horizon_extreme_timestamps();
    test_producer_last_batch_and_lag();
    test_keyless_rejected();
    test_abort_and_rename_for_delete();
    test_rename_for_delete_without_fds();
    test_crash_safety();
    test_swap_rename_failure();
    test_existing_swap_not_overwritten();
    test_truncation_during_pass();
    test_retention_during_pass();
    test_huge_inflated_batch_kept();
    test_transactions();
    test_txn_crash_safety();
    test_truncation_lowers_checkpoint();
    nftw(g_root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    if (test_failures) fprintf(stderr, "test_storage_cleaner: %d failures\n", test_failures);
    else printf("test_storage_cleaner: ok\n");
    return test_failures ? 1 : 0;
}
