/* Group coordinator alone (no broker, ZooKeeper or network): one group with N committed
 * partitions over an in-memory __consumer_offsets. Phases (wall time each, printed):
 *   commit      one OffsetCommit of all N partitions (the coordinator's cache update included)
 *   fetch-all   R OffsetFetch of every committed partition (null topic list)
 *   fetch-one   R OffsetFetch of one partition (the last committed)
 *   fetch-list  one OffsetFetch listing all N partitions (a consumer's committed() of them all)
 *   load        a second coordinator loading the partition's log (N offset records) on fail-over
 * Usage: bench_group_offsets [-n N] [-r R]   (defaults 10000 and 1000)
 * Built by CMake (build/bench/bench_group_offsets). Exits 1 when an answer is wrong. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "coordinator/group_coordinator.h"
#include "storage/batch.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* one partition's log in memory; every partition led at epoch 0 */
static uint8_t *g_log;
static size_t g_len;
static int64_t g_end;

static bool s_leader(void *ctx, int32_t p, int32_t *epoch, int32_t *term, int64_t *start, int64_t *end) {
    (void)ctx;
    (void)p;
    if (epoch) *epoch = 0;
    if (term) *term = 1;
    if (start) *start = 0;
    if (end) *end = g_end;
    return true;
}

static void s_append(void *ctx, int32_t p, uint8_t *batch, size_t len, int16_t acks, int32_t timeout_ms,
                     void (*done)(void *, int16_t, int64_t), void *done_ctx) {
    (void)ctx, (void)p, (void)acks, (void)timeout_ms;
    int64_t base = g_end;
    gr_batch_set_base_offset(batch, base);
    g_end += gr_batch_record_count(batch);
    g_log = gr_realloc(g_log, g_len + len);
    memcpy(g_log + g_len, batch, len);
    g_len += len;
    done(done_ctx, GR_KERR_NONE, base);
}

static int16_t s_read(void *ctx, int32_t p, int64_t offset, int32_t max_bytes, struct gr_plog_read_result *res) {
    (void)ctx, (void)p, (void)max_bytes;
    memset(res, 0, sizeof *res);
    res->next_offset = offset;
    if (offset == 0 && g_len) { /* the whole log at once */
        res->data = gr_malloc(g_len);
        memcpy(res->data, g_log, g_len);
        res->len = g_len;
        res->next_offset = g_end;
    }
    res->log_end_offset = g_end;
    return GR_KERR_NONE;
}

static int32_t s_nparts(void *ctx) {
    (void)ctx;
    return 1;
}

static struct gr_group_coordinator *new_gc(void) {
    struct gr_gc_config c;
    gr_gc_config_defaults(&c);
    c.broker_id = 1;
    c.storage = (struct gr_gc_storage){.leader_info = s_leader, .append = s_append, .read = s_read,
                                       .num_partitions = s_nparts};
    c.background_thread = false;
    struct gr_group_coordinator *gc = gr_gc_new(&c);
    gr_gc_poll_partitions(gc); /* loads (inline without background threads) */
    return gc;
}

static void on_commit(void *ctx, struct gr_gc_commit_part *parts, int n) {
    int *bad = ctx;
    for (int i = 0; i < n; i++) *bad += parts[i].error != GR_KERR_NONE;
}

int main(int argc, char **argv) {
    int n = 10000, r = 1000, opt;
    while ((opt = getopt(argc, argv, "n:r:")) != -1) {
        if (opt == 'n') n = atoi(optarg);
        else if (opt == 'r') r = atoi(optarg);
        else {
            fprintf(stderr, "usage: %s [-n partitions] [-r rounds]\n", argv[0]);
            return 2;
        }
    }
    if (n < 1 || r < 1) return 2;
    gr_log_set_level(GR_LOG_WARN);
    const char *G = "bench-group";
    struct gr_group_coordinator *gc = new_gc();
    struct gr_gc_commit_part *parts = gr_calloc((size_t)n, sizeof *parts);
    char **topics = gr_calloc((size_t)n, sizeof *topics);
    for (int i = 0; i < n; i++) { /* 100 partitions per topic */
        topics[i] = gr_asprintf("bench-topic-%d", i / 100);
        parts[i] = (struct gr_gc_commit_part){.topic = topics[i], .partition = i % 100, .offset = i,
                                              .leader_epoch = -1, .commit_timestamp = 1, .expire_timestamp = -1};
    }
    int bad = 0;
    double t = now_s();
    gr_gc_commit_offsets(gc, G, "", NULL, -1, parts, n, on_commit, &bad);
    printf("commit      %d partitions: %.2f ms\n", n, (now_s() - t) * 1e3);

    t = now_s();
    for (int k = 0; k < r; k++) {
        struct gr_arena a;
        gr_arena_init(&a);
        struct gr_gc_fetch_part *all = NULL;
        int na = 0;
        bad += gr_gc_fetch_offsets(gc, G, true, false, &all, &na, &a) != GR_KERR_NONE || na != n;
        gr_arena_free(&a);
    }
    printf("fetch-all   %d rounds: %.3f ms per OffsetFetch of %d partitions\n", r, (now_s() - t) * 1e3 / r, n);

    t = now_s();
    for (int k = 0; k < r; k++) {
        struct gr_arena a;
        gr_arena_init(&a);
        struct gr_gc_fetch_part one = {.topic = topics[n - 1], .partition = (n - 1) % 100};
        struct gr_gc_fetch_part *op = &one;
        int no = 1;
        bad += gr_gc_fetch_offsets(gc, G, false, false, &op, &no, &a) != GR_KERR_NONE || one.offset != n - 1;
        gr_arena_free(&a);
    }
    printf("fetch-one   %d rounds: %.4f ms per OffsetFetch of 1 partition\n", r, (now_s() - t) * 1e3 / r);

    struct gr_gc_fetch_part *list = gr_calloc((size_t)n, sizeof *list);
    for (int i = 0; i < n; i++) list[i] = (struct gr_gc_fetch_part){.topic = topics[i], .partition = i % 100};
    struct gr_arena a;
    gr_arena_init(&a);
    int nl = n;
    t = now_s();
    bad += gr_gc_fetch_offsets(gc, G, false, false, &list, &nl, &a) != GR_KERR_NONE;
    printf("fetch-list  1 round: %.2f ms per OffsetFetch listing %d partitions\n", (now_s() - t) * 1e3, n);
    for (int i = 0; i < n; i++) bad += list[i].offset != i;
    gr_arena_free(&a);

    t = now_s();
    struct gr_group_coordinator *gc2 = new_gc();
    printf("load        %" PRId64 " records: %.2f ms\n", g_end, (now_s() - t) * 1e3);
    struct gr_gc_counts cnt;
    gr_gc_counts(gc2, &cnt);
    bad += cnt.offsets != n;

    gr_gc_free(gc2);
    gr_gc_free(gc);
    for (int i = 0; i < n; i++) free(topics[i]);
    free(topics);
    free(list);
    free(parts);
    free(g_log);
    if (bad) fprintf(stderr, "%d wrong answers\n", bad);
    return bad ? 1 : 0;
}
