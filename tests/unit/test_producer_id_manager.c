/* Producer id manager: blocks of 1000 in /latest_producer_id_block with Kafka's JSON, ids in
 * order, a new block when one is used up, races between brokers (another broker's write lands
 * between our read and our conditional write), a retried write that had landed, a missing znode.
 * In-memory ZooKeeper; with GREGOR_TEST_ZK=host:port also two managers in threads on a real
 * ZooKeeper (under a fresh chroot). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "coordinator/producer_id_manager.h"
#include "support/check.h"
#include "support/memzk.h"
#include "zk/kzk.h"

int test_failures;

#define PID_PATH "/latest_producer_id_block"

static char *znode(struct memzk *z) {
    int i = memzk_find(z, PID_PATH);
    return i < 0 ? NULL : z->v[i].data;
}

static void test_blocks_in_order(void) {
    struct memzk *z = memzk_new(6000);
    struct gr_kzk *k = gr_kzk_new(&z->base);
    CHECK(gr_kzk_ensure_paths(k) == 0);
    CHECK(znode(z) && znode(z)[0] == '\0'); /* created empty */
    struct gr_pidm *a = gr_pidm_new(k, 1);
    int64_t s, e, id;
    gr_pidm_current_block(a, &s, &e);
    CHECK(s == -1 && e == -1);
    CHECK(gr_pidm_claim(a) == 0);
    gr_pidm_current_block(a, &s, &e);
    CHECK(s == 0 && e == 999);
    CHECK(strcmp(znode(z), "{\"version\":1,\"broker\":1,\"block_start\":\"0\",\"block_end\":\"999\"}") == 0);
    for (int i = 0; i < 1000; i++) {
        CHECK(gr_pidm_generate(a, &id) == 0 && id == i);
    }
    /* exhausted: the next block */
    CHECK(gr_pidm_generate(a, &id) == 0 && id == 1000);
    CHECK(strcmp(znode(z), "{\"version\":1,\"broker\":1,\"block_start\":\"1000\",\"block_end\":\"1999\"}") == 0);
    /* a second broker (or a restart) takes the block after */
    struct gr_pidm *b = gr_pidm_new(k, 2);
    CHECK(gr_pidm_generate(b, &id) == 0 && id == 2000);
    gr_pidm_free(b);
    b = gr_pidm_new(k, 2); /* "restart": never reuses */
    CHECK(gr_pidm_generate(b, &id) == 0 && id == 3000);
    CHECK(gr_pidm_generate(a, &id) == 0 && id == 1001);
    gr_pidm_free(a);
    gr_pidm_free(b);
    gr_kzk_free(k);
    gr_zkb_destroy(&z->base);
}

/* A backend wrapper whose next set first lets "another broker" claim (race), or applies the
 * write twice (the retry after a connection loss sees BADVERSION although the first landed). */
static struct gr_zk_backend_ops g_ops;
static int (*g_real_set)(struct gr_zk_backend *, const char *, const void *, int, int, struct gr_zstat *);
static struct gr_pidm *g_other;
static int g_mode; /* 0 none, 1 race, 2 landed */
static int g_sets;

static int hooked_set(struct gr_zk_backend *bk, const char *path, const void *data, int len, int version,
                      struct gr_zstat *st) {
    g_sets++;
    int mode = g_mode;
    g_mode = 0;
    if (mode == 1) {
        int64_t id;
        CHECK(gr_pidm_claim(g_other) == 0); /* another broker gets there first */
        (void)id;
    }
    int rc = g_real_set(bk, path, data, len, version, st);
    if (mode == 2 && rc == GR_ZOK) rc = g_real_set(bk, path, data, len, version, st); /* retried */
    return rc;
}

static void test_races(void) {
    struct memzk *z = memzk_new(6000);
    g_ops = *z->base.ops;
    g_real_set = g_ops.set;
    g_ops.set = hooked_set;
    z->base.ops = &g_ops;
    struct gr_kzk *k = gr_kzk_new(&z->base);
    CHECK(gr_kzk_ensure_paths(k) == 0);
    struct gr_pidm *a = gr_pidm_new(k, 1);
    g_other = gr_pidm_new(k, 2);
    int64_t s, e, s2, e2;
    /* race: broker 2 claims 0-999 between broker 1's read and write; broker 1 loops to 1000-1999 */
    g_mode = 1;
    g_sets = 0;
    CHECK(gr_pidm_claim(a) == 0);
    gr_pidm_current_block(a, &s, &e);
    gr_pidm_current_block(g_other, &s2, &e2);
    CHECK(s2 == 0 && e2 == 999 && s == 1000 && e == 1999);
    CHECK(g_sets == 3); /* ours (lost), broker 2's, ours again */
    /* a retried write that had landed counts as success (no block skipped) */
    g_mode = 2;
    CHECK(gr_pidm_claim(a) == 0);
    gr_pidm_current_block(a, &s, &e);
    CHECK(s == 2000 && e == 2999);
    CHECK(strstr(znode(z), "\"block_start\":\"2000\"") != NULL && strstr(znode(z), "\"broker\":1") != NULL);
    /* the znode disappeared: created again, blocks restart from 0 (as Kafka would) */
    CHECK(memzk_delete(z, PID_PATH, -1) == GR_ZOK);
    CHECK(gr_pidm_claim(g_other) == 0);
    gr_pidm_current_block(g_other, &s2, &e2);
    CHECK(s2 == 0 && e2 == 999);
    /* garbage in the znode: an error, no id handed out */
    CHECK(memzk_set(z, PID_PATH, "{nope", 5, -1, NULL) == GR_ZOK);
    struct gr_pidm *c = gr_pidm_new(k, 3);
    int64_t id = -5;
    CHECK(gr_pidm_generate(c, &id) != 0 && id == -5);
    /* the id space is exhausted */
    const char *last = "{\"version\":1,\"broker\":1,\"block_start\":\"9223372036854775000\",\"block_end\":"
                       "\"9223372036854775000\"}";
    CHECK(memzk_set(z, PID_PATH, last, (int)strlen(last), -1, NULL) == GR_ZOK);
    CHECK(gr_pidm_generate(c, &id) != 0 && id == -5);
    gr_pidm_free(c);
    gr_pidm_free(a);
    gr_pidm_free(g_other);
    gr_kzk_free(k);
    gr_zkb_destroy(&z->base);
}

/* ---- real ZooKeeper: two managers in threads ---- */

struct racer {
    struct gr_pidm *m;
    int64_t ids[3000];
    int n;
};

static void *race_thread(void *arg) {
    struct racer *r = arg;
    for (r->n = 0; r->n < 3000; r->n++)
        if (gr_pidm_generate(r->m, &r->ids[r->n]) != 0) break;
    return NULL;
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_real_zk(const char *hostport) {
    char connect[256];
    snprintf(connect, sizeof connect, "%s/gr-pidm-%d-%lld", hostport, (int)getpid(), (long long)gr_wall_ms());
    struct gr_zk_real_config zc = {.connect = connect, .session_timeout_ms = 10000, .connection_timeout_ms = 10000};
    struct gr_zk_backend *b1 = NULL, *b2 = NULL;
    CHECK(gr_zk_real_open(&zc, &b1) == GR_ZOK && gr_zk_real_open(&zc, &b2) == GR_ZOK);
    if (!b1 || !b2) return;
    struct gr_kzk *k1 = gr_kzk_new(b1), *k2 = gr_kzk_new(b2);
    CHECK(gr_kzk_ensure_paths(k1) == 0);
    static struct racer r1, r2;
    r1.m = gr_pidm_new(k1, 1);
    r2.m = gr_pidm_new(k2, 2);
    pthread_t t1, t2;
    pthread_create(&t1, NULL, race_thread, &r1);
    pthread_create(&t2, NULL, race_thread, &r2);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK(r1.n == 3000 && r2.n == 3000);
    static int64_t all[6000];
    memcpy(all, r1.ids, sizeof r1.ids);
    memcpy(all + 3000, r2.ids, sizeof r2.ids);
    qsort(all, 6000, sizeof all[0], cmp64);
    int dups = 0;
    for (int i = 1; i < 6000; i++) dups += all[i] == all[i - 1];
    CHECK(dups == 0);
    CHECK(all[0] == 0 && all[5999] == 5999); /* six blocks, none lost */
    gr_pidm_free(r1.m);
    gr_pidm_free(r2.m);
    gr_kzk_free(k1);
    gr_kzk_free(k2);
    gr_zkb_destroy(b1);
    gr_zkb_destroy(b2);
    printf("real ZooKeeper race: ok\n");
}

int main(void) {
    gr_log_set_level(GR_LOG_ERROR);
    test_blocks_in_order();
    test_races();
    const char *zk = getenv("GREGOR_TEST_ZK");
    if (zk && *zk) test_real_zk(zk);
    if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures);
    else printf("test_producer_id_manager: all passed\n");
    return test_failures != 0;
}
