/* Bounded open files (storage/fd_cache.h): 3,000 partition logs with a bound of 64 cached
 * descriptors. Appends and reads in random order, rolls, flushes of evicted logs, close and
 * reopen (load and recovery paths), torn tails, and a few threads sharing the cache. Checks the
 * process's /proc/self/fd count stays below bound + slack and that data, offsets and the offset
 * index (memory and .index files) are right. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "storage/batch.h"
#include "common/be.h"
#include "storage/fd_cache.h"
#include "storage/log.h"
#include "support/check.h"

#define NLOGS 3000
#define NHOT 10         /* logs that get many appends (and roll) */
#define BOUND 64
#define SLACK 8         /* one temporary .log + one .index + the /proc/self/fd directory, and spare */
#define INTERVAL 512    /* index.interval.bytes */
#define SEG_BYTES 16384 /* segment.bytes */

static char g_root[128];
static int g_base_fds, g_max_fds;
static struct gr_plog_config g_cfg;

struct tlog {
    struct gr_plog *log;
    int64_t leo;
    bool flushed; /* flushed after the last append (reopened with its recovery point) */
};
static struct tlog g_logs[NLOGS];

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(uint32_t n) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng % n);
}

static int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

static void note_fds(void) {
    int n = count_fds() - g_base_fds;
    if (n > g_max_fds) g_max_fds = n;
}

static char *ldir(int i) {
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/t-%d", g_root, i);
    return buf;
}

/* Value of the record at `offset` of log i: "<i>:<offset>|" padded to a size that varies. */
static int mk_value(char *buf, size_t cap, int i, int64_t offset) {
    int n = snprintf(buf, cap, "%d:%" PRId64 "|", i, offset);
    int pad = 20 + (int)((offset * 37 + i) % 180);
    memset(buf + n, 'p', (size_t)pad);
    return n + pad;
}

static bool value_ok(const struct gr_batch_rec_view *rv, int i) {
    char want[512];
    int n = mk_value(want, sizeof want, i, rv->Offset);
    return rv->ValueLength == n && memcmp(rv->Value, want, (size_t)n) == 0;
}

static void append_n(int i, int nrec) {
    struct tlog *t = &g_logs[i];
    static char vals[8][512];
    struct gr_batch_rec recs[8];
    for (int k = 0; k < nrec; k++) {
        int vl = mk_value(vals[k], sizeof vals[k], i, t->leo + k);
        recs[k] = (struct gr_batch_rec){"k", 1, vals[k], vl, NULL, 0, 1000 + t->leo + k};
    }
    size_t len;
    uint8_t *b = gr_batch_build(recs, nrec, NULL, &len);
    struct gr_append_info info;
    int rc = gr_plog_append_as_leader(t->log, b, len, 1, &info);
    free(b);
    CHECK(rc == 0 && info.error == GR_KERR_NONE);
    CHECK(info.first_offset == t->leo && info.last_offset == t->leo + nrec - 1);
    t->leo += nrec;
    t->flushed = false;
}

/* Reads from `off` (one call) and checks the batches: the first contains off, offsets are
 * contiguous, every value is the one written. */
static void check_read_at(int i, int64_t off) {
    struct gr_plog_read_result r;
    CHECK(gr_plog_read(g_logs[i].log, off, 2048, -1, true, &r) == 0);
    CHECK(r.error == GR_KERR_NONE && r.log_end_offset == g_logs[i].leo);
    if (off == g_logs[i].leo) {
        CHECK(r.len == 0);
        return;
    }
    CHECK(r.len > 0);
    struct gr_batch_summary s;
    CHECK(gr_batch_validate_all(r.data, r.len, 0, &s) == GR_BATCH_OK && s.offsets_contiguous);
    CHECK(s.first_offset <= off && s.last_offset >= off && r.first_offset == s.first_offset);
    struct gr_batch_iter it;
    struct gr_batch_info bi;
    const uint8_t *p;
    gr_batch_iter_init(&it, r.data, r.len);
    while (gr_batch_iter_next(&it, &bi, &p) == 1) {
        struct gr_batch_rec_iter ri;
        struct gr_batch_rec_view rv;
        CHECK(gr_batch_rec_iter_init(&ri, p, bi.size) == GR_BATCH_OK);
        while (gr_batch_rec_iter_next(&ri, &rv)) CHECK(value_ok(&rv, i));
    }
    free(r.data);
}

/* Reads the whole log and returns the number of records seen. */
static int64_t check_read_all(int i) {
    int64_t off = 0;
    while (off < g_logs[i].leo) {
        struct gr_plog_read_result r;
        CHECK(gr_plog_read(g_logs[i].log, off, 1 << 16, -1, true, &r) == 0);
        if (r.error != GR_KERR_NONE || r.len == 0) {
            CHECK(!"read_all stopped early");
            free(r.data);
            break;
        }
        check_read_at(i, off);
        off = r.next_offset;
        free(r.data);
    }
    return off;
}

static void open_log(int i, int64_t recovery_point) {
    int rc = gr_plog_open_dir(ldir(i), &g_cfg, recovery_point, &g_logs[i].log);
    CHECK(rc == 0);
}

static void *read_file(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return NULL;
    struct stat st;
    fstat(fd, &st);
    uint8_t *buf = malloc((size_t)st.st_size + 1);
    ssize_t n = pread(fd, buf, (size_t)st.st_size, 0);
    close(fd);
    *len = n > 0 ? (size_t)n : 0;
    return buf;
}

/* After a clean close: every .index file must equal what the index rule gives for its .log. */
static int check_index_files(int i) {
    DIR *d = opendir(ldir(i));
    if (!d) return errno == ENOENT && g_logs[i].leo == 0 ? 0 : -1; /* never written: no directory */
    int entries = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t nl = strlen(de->d_name);
        if (nl != 24 || strcmp(de->d_name + 20, ".log") != 0) continue;
        int64_t base = strtoll(de->d_name, NULL, 10);
        char path[512];
        snprintf(path, sizeof path, "%s/%s", ldir(i), de->d_name);
        size_t loglen, idxlen;
        uint8_t *logb = read_file(path, &loglen);
        snprintf(path, sizeof path, "%s/%020" PRId64 ".index", ldir(i), base);
        uint8_t *idxb = read_file(path, &idxlen);
        /* an empty segment of a new log has no index files until data arrives */
        if (logb && loglen == 0 && !idxb) {
            free(logb);
            continue;
        }
        CHECK(logb && idxb);
        if (!logb || !idxb) {
            free(logb);
            free(idxb);
            continue;
        }
        uint8_t *want = malloc(loglen / 8 + 8);
        size_t nwant = 0;
        int64_t since = 0;
        struct gr_batch_iter it;
        struct gr_batch_info bi;
        const uint8_t *p;
        gr_batch_iter_init(&it, logb, loglen);
        while (gr_batch_iter_next(&it, &bi, &p) == 1) {
            if (since > INTERVAL) {
                gr_put_be32(want + nwant, (uint32_t)(gr_batch_info_last_offset(&bi) - base));
                gr_put_be32(want + nwant + 4, (uint32_t)(p - logb));
                nwant += 8;
                since = 0;
            }
            since += (int64_t)bi.size;
        }
        CHECK(idxlen == nwant && memcmp(idxb, want, nwant) == 0);
        entries += (int)(nwant / 8);
        free(want);
        free(logb);
        free(idxb);
    }
    closedir(d);
    return entries;
}

/* Appends raw bytes at the end of log i's last segment (a torn write). */
static void add_garbage(int i, const void *bytes, size_t n) {
    DIR *d = opendir(ldir(i));
    char last[256] = "";
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strlen(de->d_name) == 24 && strcmp(de->d_name + 20, ".log") == 0 && strcmp(de->d_name, last) > 0)
            snprintf(last, sizeof last, "%s", de->d_name);
    closedir(d);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", ldir(i), last);
    int fd = open(path, O_WRONLY | O_APPEND);
    CHECK(fd >= 0 && write(fd, bytes, n) == (ssize_t)n);
    if (fd >= 0) close(fd);
}

/* ---- threads sharing the cache ---- */

#define TLOGS 300
#define NTHREADS 4
static _Atomic int64_t g_tcount[TLOGS];

static void *worker(void *arg) {
    uint64_t s = (uint64_t)(uintptr_t)arg * 7919 + 1;
    for (int k = 0; k < 1500; k++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        int i = (int)((s >> 33) % TLOGS);
        if ((s >> 20) & 1) {
            struct gr_batch_rec r[2] = {{"a", 1, "v1", 2, NULL, 0, 1}, {"b", 1, "v2", 2, NULL, 0, 2}};
            size_t len;
            uint8_t *b = gr_batch_build(r, 2, NULL, &len);
            struct gr_append_info info;
            CHECK(gr_plog_append_as_leader(g_logs[i].log, b, len, 1, &info) == 0 && info.error == 0);
            free(b);
            g_tcount[i] += 2;
        } else {
            struct gr_plog_read_result res;
            int64_t end = gr_plog_end_offset(g_logs[i].log);
            CHECK(gr_plog_read(g_logs[i].log, end > 0 ? (int64_t)((s >> 40) % (uint64_t)end) : 0, 4096, -1, true,
                              &res) == 0);
            if (res.len) {
                struct gr_batch_summary sm;
                CHECK(gr_batch_validate_all(res.data, res.len, 0, &sm) == GR_BATCH_OK && sm.offsets_contiguous);
            }
            free(res.data);
            if (k % 100 == 0) CHECK(gr_plog_flush(g_logs[i].log) == 0);
        }
    }
    return NULL;
}

static volatile int g_stop_sampler;
static void *sampler(void *arg) {
    int *max = arg;
    while (!__atomic_load_n(&g_stop_sampler, __ATOMIC_ACQUIRE)) {
        int n = count_fds() - g_base_fds;
        if (n > *max) *max = n;
        usleep(200);
    }
    return NULL;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int main(void) {
    gr_log_set_level(GR_LOG_WARN);
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_root, sizeof g_root, "%s/gr-openfiles-XXXXXX", base);
    if (!mkdtemp(g_root)) return 1;
    /* A soft limit far below the number of logs proves the bound, not the limit, holds. */
    struct rlimit old_rl, rl;
    getrlimit(RLIMIT_NOFILE, &old_rl);
    rl = old_rl;
    rl.rlim_cur = 256;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 256) rl.rlim_cur = rl.rlim_max;
    CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    gr_storage_set_max_open_files(BOUND);
    CHECK(gr_storage_max_open_files() == BOUND);
    g_base_fds = count_fds();

    /* 0. gr_fd_slot_pin: the descriptor of an open slot without a path, nothing when closed */
    {
        char path[300];
        snprintf(path, sizeof path, "%s/slot.log", g_root);
        struct gr_fd_slot slot;
        gr_fd_slot_init(&slot);
        CHECK(gr_fd_slot_pin(&slot) == -1);
        int fd = gr_fd_slot_acquire(&slot, path, 1);
        CHECK(fd >= 0);
        gr_fd_slot_release(&slot);
        struct gr_storage_fd_stats s1, s2;
        gr_storage_fd_stats(&s1);
        CHECK(gr_fd_slot_pin(&slot) == fd);
        gr_fd_slot_release(&slot);
        gr_storage_fd_stats(&s2);
        CHECK(s2.opens == s1.opens && s2.open == s1.open);
        gr_fd_slot_remove(&slot);
        CHECK(gr_fd_slot_pin(&slot) == -1);
        unlink(path);
    }
    gr_plog_config_defaults(&g_cfg);
    g_cfg.segment_bytes = SEG_BYTES;
    g_cfg.index_interval_bytes = INTERVAL;

    /* 1. open 3,000 empty logs */
    for (int i = 0; i < NLOGS; i++) {
        open_log(i, 0);
        if (i % 100 == 0) note_fds();
    }
    note_fds();
    struct gr_storage_fd_stats st;
    gr_storage_fd_stats(&st);
    CHECK(st.open <= BOUND && st.max == BOUND);
    printf("opened %d logs: max %d fds above baseline (bound %d)\n", NLOGS, g_max_fds, BOUND);

    /* 2. random appends and reads; hot logs roll */
    for (int k = 0; k < 20000; k++) {
        int i = rnd(10) < 3 ? (int)rnd(NHOT) : (int)rnd(NLOGS);
        append_n(i, 1 + (int)rnd(4));
        int j = (int)rnd(NLOGS);
        check_read_at(j, g_logs[j].leo ? (int64_t)rnd((uint32_t)g_logs[j].leo + 1) : 0);
        if (k % 64 == 0) note_fds();
    }
    for (int i = 0; i < NHOT; i++) CHECK(gr_plog_segment_count(g_logs[i].log) > 3);

    /* 3. a flush of a log whose descriptor was evicted still syncs and moves the recovery point */
    append_n(0, 3);
    for (int j = 1; j <= 2 * BOUND; j++) check_read_at(NHOT + j, 0);
    {
        struct gr_storage_fd_stats s1, s2;
        gr_storage_fd_stats(&s1);
        CHECK(gr_plog_recovery_point(g_logs[0].log) < g_logs[0].leo);
        CHECK(gr_plog_flush(g_logs[0].log) == 0);
        CHECK(gr_plog_recovery_point(g_logs[0].log) == g_logs[0].leo);
        gr_storage_fd_stats(&s2);
        CHECK(s2.opens == s1.opens + 1); /* reopened to fsync */
        CHECK(s1.evictions > 0);
    }

    /* Out of descriptors elsewhere (soft limit = descriptors in use): idle cached files are
     * given back so an append to an evicted log and a read of an old segment still work. */
    {
        /* Fill every hole in the descriptor table, then cap the limit at its end. */
        int fillers[512], nf = 0, top = -1;
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL)
            if (de->d_name[0] != '.' && atoi(de->d_name) > top) top = atoi(de->d_name);
        if (d) closedir(d);
        for (;;) {
            int fd = dup(0);
            if (fd < 0) break;
            if (fd > top || nf == 512) {
                close(fd);
                break;
            }
            fillers[nf++] = fd;
        }
        struct rlimit cur, tight;
        getrlimit(RLIMIT_NOFILE, &cur);
        tight = cur;
        tight.rlim_cur = (rlim_t)top + 1;
        struct gr_storage_fd_stats s1, s2;
        gr_storage_fd_stats(&s1);
        CHECK(setrlimit(RLIMIT_NOFILE, &tight) == 0);
        CHECK(open("/dev/null", O_RDONLY) < 0 && errno == EMFILE);
        append_n(NLOGS - 1, 2);
        struct gr_plog_read_result r;
        CHECK(gr_plog_read(g_logs[0].log, 0, 1024, -1, true, &r) == 0 && r.len > 0);
        free(r.data);
        CHECK(setrlimit(RLIMIT_NOFILE, &cur) == 0);
        for (int k = 0; k < nf; k++) close(fillers[k]);
        gr_storage_fd_stats(&s2);
        CHECK(s2.evictions >= s1.evictions + 2);
        printf("at the descriptor limit: %" PRIu64 " cached files given back\n", s2.evictions - s1.evictions);
        check_read_at(NLOGS - 1, 0);
    }

    /* Polling reads at the log end (idle partitions under a fetcher) open no file. */
    {
        struct gr_storage_fd_stats s1, s2;
        gr_storage_fd_stats(&s1);
        for (int j = 0; j < NLOGS; j++) check_read_at(j, g_logs[j].leo);
        gr_storage_fd_stats(&s2);
        CHECK(s2.opens == s1.opens);
    }

    /* 4. every record of every log reads back */
    int64_t total = 0;
    for (int i = 0; i < NLOGS; i++) {
        CHECK(check_read_all(i) == g_logs[i].leo);
        total += g_logs[i].leo;
        if (i % 100 == 0) note_fds();
    }
    printf("after %" PRId64 " records in random order: max %d fds above baseline\n", total, g_max_fds);

    /* 5. close (half of them flushed first); the .index files must match the index rule */
    int idx_entries = 0;
    for (int i = 0; i < NLOGS; i++) {
        if (i % 2 == 0) {
            CHECK(gr_plog_flush(g_logs[i].log) == 0);
            g_logs[i].flushed = true;
        }
        gr_plog_close(g_logs[i].log);
        g_logs[i].log = NULL;
        int e = check_index_files(i);
        CHECK(e >= 0);
        idx_entries += e;
    }
    CHECK(idx_entries > 100);
    gr_storage_fd_stats(&st);
    CHECK(st.open == 0);

    /* 6. reopen: flushed logs take the load path, the others are recovered */
    for (int i = 0; i < NLOGS; i++) {
        open_log(i, g_logs[i].flushed ? g_logs[i].leo : 0);
        CHECK(gr_plog_end_offset(g_logs[i].log) == g_logs[i].leo);
        if (i % 100 == 0) note_fds();
    }
    for (int k = 0; k < 4000; k++) {
        int i = rnd(10) < 3 ? (int)rnd(NHOT) : (int)rnd(NLOGS);
        append_n(i, 1 + (int)rnd(4));
        int j = (int)rnd(NLOGS);
        check_read_at(j, g_logs[j].leo ? (int64_t)rnd((uint32_t)g_logs[j].leo + 1) : 0);
        if (k % 64 == 0) note_fds();
    }
    for (int i = 0; i < NLOGS; i++) CHECK(check_read_all(i) == g_logs[i].leo);
    note_fds();
    printf("after reopening: max %d fds above baseline\n", g_max_fds);

    /* 7. torn tails are cut on recovery, whether the log claims to be flushed or not */
    for (int i = 0; i < 20; i++) {
        int64_t size = gr_plog_size_bytes(g_logs[i].log);
        gr_plog_close(g_logs[i].log);
        static const uint8_t torn[] = {0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 1, 0, 0, 0, 0, 1, 2, 0xde, 0xad};
        add_garbage(i, torn, sizeof torn);
        open_log(i, i % 2 ? g_logs[i].leo : 0);
        CHECK(gr_plog_end_offset(g_logs[i].log) == g_logs[i].leo);
        CHECK(gr_plog_size_bytes(g_logs[i].log) == size);
        append_n(i, 2);
        CHECK(check_read_all(i) == g_logs[i].leo);
    }

    /* 8. threads share a tiny cache (bound 8): pinned descriptors are never closed under a user */
    for (int i = 0; i < TLOGS; i++) g_tcount[i] = gr_plog_end_offset(g_logs[i].log);
    gr_storage_set_max_open_files(8);
    gr_storage_fd_stats(&st);
    CHECK(st.open <= 8);
    int tmax = 0;
    pthread_t th[NTHREADS], smp;
    pthread_create(&smp, NULL, sampler, &tmax);
    for (int t = 0; t < NTHREADS; t++) pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)(t + 1));
    for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
    __atomic_store_n(&g_stop_sampler, 1, __ATOMIC_RELEASE);
    pthread_join(smp, NULL);
    for (int i = 0; i < TLOGS; i++) CHECK(gr_plog_end_offset(g_logs[i].log) == g_tcount[i]);
    printf("threads with bound 8: max %d fds above baseline\n", tmax);
    CHECK(tmax <= 8 + 3 * NTHREADS + SLACK);

    for (int i = 0; i < NLOGS; i++) gr_plog_close(g_logs[i].log);
    gr_storage_fd_stats(&st);
    CHECK(st.open == 0);
    CHECK(count_fds() == g_base_fds);
    printf("max %d fds above baseline for %d logs (bound %d + slack %d); %" PRIu64 " opens, %" PRIu64
           " evictions\n", g_max_fds, NLOGS, BOUND, SLACK, st.opens, st.evictions);
    CHECK(g_max_fds <= BOUND + SLACK);

    setrlimit(RLIMIT_NOFILE, &old_rl);
    nftw(g_root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    if (test_failures) fprintf(stderr, "test_storage_open_files: %d failures\n", test_failures);
    else printf("test_storage_open_files: ok\n");
    return test_failures ? 1 : 0;
}
