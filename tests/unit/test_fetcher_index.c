/* The fetchers' partition index (replication/fetcher.c): adding, replacing and removing many
 * partitions keeps exactly the partitions followed, each released once. Before issue 14 every
 * add and remove scanned all partitions of every fetcher (O(n) each, O(n^2) to create n
 * followers); the figures are in bench/README.md, this test checks correctness only.
 * No leader is reachable (leader_endpoint says unknown), so the threads only back off. */
#include "replication/fetcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/check.h"

static int refs; /* outstanding get() references */

struct part {
    int dummy;
};

static struct part the_part;

static gr_fetcher_part *get(void *ctx, const char *topic, int32_t partition) {
    (void)ctx;
    (void)topic;
    (void)partition;
    __atomic_add_fetch(&refs, 1, __ATOMIC_SEQ_CST);
    return &the_part;
}
static void release(gr_fetcher_part *p) {
    (void)p;
    __atomic_sub_fetch(&refs, 1, __ATOMIC_SEQ_CST);
}
static int32_t latest_epoch(gr_fetcher_part *p) { (void)p; return -1; }
static int64_t zero(gr_fetcher_part *p) { (void)p; return 0; }
static void end_for(gr_fetcher_part *p, int32_t e, int64_t *end, int32_t *eo) {
    (void)p;
    (void)e;
    *end = -1;
    *eo = -1;
}
static int truncate_(void *c, gr_fetcher_part *p, int32_t le, int64_t o, bool f) {
    (void)c, (void)p, (void)le, (void)o, (void)f;
    return 0;
}
static int append_(void *c, gr_fetcher_part *p, int32_t le, const uint8_t *r, size_t n, int64_t hw, int64_t ls) {
    (void)c, (void)p, (void)le, (void)r, (void)n, (void)hw, (void)ls;
    return 0;
}
static bool endpoint(void *c, int32_t id, char *h, size_t hl, int32_t *port) {
    (void)c, (void)id, (void)h, (void)hl, (void)port;
    return false;
}

static const struct gr_fetcher_ops OPS = {
    .get = get, .release = release, .latest_epoch = latest_epoch, .log_end_offset = zero, .log_start_offset = zero,
    .high_watermark = zero, .end_offset_for_epoch = end_for, .truncate = truncate_, .append = append_,
    .leader_endpoint = endpoint};

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    struct gr_fetcher_config cfg = {.broker_id = 1, .backoff_ms = 60000, .socket_timeout_ms = 1000,
                                    .wait_max_ms = 500, .min_bytes = 1, .max_bytes = 1 << 20,
                                    .response_max_bytes = 10 << 20};
    struct gr_fetcher_manager *fm = gr_fetcher_manager_new(&cfg, &OPS, NULL);
    char topic[32];
    /* n partitions over topics of 100, spread over two leaders. */
    for (int i = 0; i < n; i++) {
        snprintf(topic, sizeof topic, "t-%05d", i / 100);
        gr_fetcher_add(fm, topic, i % 100, 2 + i % 2, 0);
    }
    CHECK(gr_fetcher_count(fm) == n);
    CHECK(refs == n);
    /* Re-adding (new epoch, other leader) replaces, never duplicates. */
    for (int i = 0; i < n; i += 3) {
        snprintf(topic, sizeof topic, "t-%05d", i / 100);
        gr_fetcher_add(fm, topic, i % 100, 2 + (i + 1) % 2, 1);
    }
    CHECK(gr_fetcher_count(fm) == n);
    CHECK(refs == n);
    /* Remove every other one (in a scattered order), and some that are not followed. */
    int removed = 0;
    for (int j = 0; j < n; j++) {
        int i = (int)(((long long)j * 7919) % n);
        snprintf(topic, sizeof topic, "t-%05d", i / 100);
        if (i % 2 == 0) {
            gr_fetcher_remove(fm, topic, i % 100);
            removed++;
        }
        gr_fetcher_remove(fm, "absent", i);
    }
    CHECK(gr_fetcher_count(fm) == n - removed);
    CHECK(refs == n - removed);
    /* Those left are still found: removing each drops the count by one. */
    for (int i = 1; i < n; i += 2) {
        snprintf(topic, sizeof topic, "t-%05d", i / 100);
        gr_fetcher_remove(fm, topic, i % 100);
        gr_fetcher_remove(fm, topic, i % 100); /* twice: no-op */
    }
    CHECK(gr_fetcher_count(fm) == 0);
    CHECK(refs == 0);
    /* Batches (a LeaderAndIsr): add_many over three leaders, again with other leaders and
     * epochs (replaces), remove_many of every third plus unknown ones. */
    struct gr_fetcher_tp *v = calloc((size_t)n, sizeof *v);
    char (*names)[32] = calloc((size_t)n, 32);
    for (int i = 0; i < n; i++) {
        snprintf(names[i], 32, "b-%05d", i / 100);
        v[i] = (struct gr_fetcher_tp){.topic = names[i], .partition = i % 100, .leader = 2 + i % 3, .leader_epoch = 0};
    }
    gr_fetcher_add_many(fm, v, n);
    CHECK(gr_fetcher_count(fm) == n && refs == n);
    for (int i = 0; i < n; i++) v[i].leader = 2 + (i + 1) % 3, v[i].leader_epoch = 1;
    gr_fetcher_add_many(fm, v, n);
    CHECK(gr_fetcher_count(fm) == n && refs == n);
    int k = 0;
    for (int i = 0; i < n; i += 3) v[k++] = v[i];
    gr_fetcher_remove_many(fm, v, k);
    gr_fetcher_remove_many(fm, v, k); /* twice: no-op */
    CHECK(gr_fetcher_count(fm) == n - k && refs == n - k);
    for (int i = 0; i < n; i++) v[i] = (struct gr_fetcher_tp){.topic = names[i], .partition = i % 100};
    gr_fetcher_remove_many(fm, v, n);
    CHECK(gr_fetcher_count(fm) == 0 && refs == 0);
    /* A broker shutting down (gr_fetcher_stop_adding) follows nothing new: an addition only
     * removes the partition's old entry (the become-follower LeaderAndIsr of its controlled
     * shutdown starts no fetcher). */
    for (int i = 0; i < n; i++)
        v[i] = (struct gr_fetcher_tp){.topic = names[i], .partition = i % 100, .leader = 2 + i % 3, .leader_epoch = 2};
    gr_fetcher_add_many(fm, v, n / 2);
    CHECK(gr_fetcher_count(fm) == n / 2 && refs == n / 2);
    gr_fetcher_stop_adding(fm);
    for (int i = 0; i < n; i++) v[i].leader_epoch = 3;
    gr_fetcher_add_many(fm, v, n); /* the first half is followed: they are dropped */
    gr_fetcher_add(fm, names[0], 0, 2, 4);
    CHECK(gr_fetcher_count(fm) == 0 && refs == 0);
    free(names);
    free(v);
    gr_fetcher_manager_free(fm);
    printf("test_fetcher_index: OK (%d partitions)\n", n);
    return 0;
}
