/* Delayed-operation purgatory: immediate completion, completion by check, expiry, multi-key
 * operations, exactly-once completion under concurrent checkers, shutdown expiry. */
#include "replication/purgatory.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "support/check.h"

struct test_op {
    struct gr_delayed_op op; /* first member */
    atomic_int *ready;       /* completes when *ready >= want */
    int want;
    atomic_int *completions;
    atomic_int *expirations;
    atomic_int *destroyed;
    atomic_int tries;
};

/* What the last try_complete was told (check_many test). */
static uint64_t g_last_key;
static uint64_t g_last_set[8];
static int g_last_nset;

static bool t_try(struct gr_delayed_op *op) {
    struct test_op *t = (struct test_op *)op;
    atomic_fetch_add(&t->tries, 1);
    g_last_key = op->woken_key;
    g_last_nset = op->n_woken < 8 ? op->n_woken : 8;
    for (int i = 0; i < g_last_nset; i++) g_last_set[i] = op->woken_keys[i];
    return atomic_load(t->ready) >= t->want;
}
static void t_complete(struct gr_delayed_op *op, bool expired) {
    struct test_op *t = (struct test_op *)op;
    atomic_fetch_add(t->completions, 1);
    if (expired) atomic_fetch_add(t->expirations, 1);
}
static void t_destroy(struct gr_delayed_op *op) {
    struct test_op *t = (struct test_op *)op;
    atomic_fetch_add(t->destroyed, 1);
    free(t);
}
static const struct gr_delayed_op_vt VT = {t_try, t_complete, t_destroy};

static atomic_int g_ready, g_comp, g_exp, g_destroyed;

static struct test_op *mk(int want, int64_t timeout_ms) {
    struct test_op *t = calloc(1, sizeof *t);
    gr_delayed_op_init(&t->op, &VT, timeout_ms);
    t->ready = &g_ready;
    t->want = want;
    t->completions = &g_comp;
    t->expirations = &g_exp;
    t->destroyed = &g_destroyed;
    return t;
}

static void reset(void) {
    atomic_store(&g_ready, 0);
    atomic_store(&g_comp, 0);
    atomic_store(&g_exp, 0);
    atomic_store(&g_destroyed, 0);
}

static void wait_for(atomic_int *v, int want, int ms) {
    for (int i = 0; i < ms && atomic_load(v) < want; i++) usleep(1000);
}

struct checker_arg {
    struct gr_purgatory *p;
    uint64_t key;
    int rounds;
};
static void *checker(void *arg) {
    struct checker_arg *a = arg;
    for (int i = 0; i < a->rounds; i++) gr_purgatory_check(a->p, a->key);
    return NULL;
}

/* Voluntary context switches of this process's thread named `name` (-1 if none). */
static long thread_switches(const char *name) {
    char path[512], buf[4096];
    long found = -1;
    snprintf(path, sizeof path, "/proc/%d/task", (int)getpid());
    DIR *dir = opendir(path);
    if (!dir) return -1;
    struct dirent *e;
    while ((e = readdir(dir)) && found < 0) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/proc/%d/task/%s/comm", (int)getpid(), e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        char comm[64] = "";
        if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
        fclose(f);
        if (strcmp(comm, name) != 0) continue;
        snprintf(path, sizeof path, "/proc/%d/task/%s/status", (int)getpid(), e->d_name);
        f = fopen(path, "r");
        if (!f) continue;
        while (fgets(buf, sizeof buf, f))
            if (strncmp(buf, "voluntary_ctxt_switches:", 24) == 0) found = atol(buf + 24);
        fclose(f);
    }
    closedir(dir);
    return found;
}

/* 8. Ops due later than the reaper's next look (its 200 ms idle tick) do not wake it: 100
 *    follower-fetch-like ops (500 ms) parked and completed 1 ms apart cost the reaper a few
 *    wake-ups, not one each (before: every op submitted to an empty heap signalled it). */
static void test_reaper_not_woken(void) {
    struct gr_purgatory *p = gr_purgatory_new("quiet");
    uint64_t k = 7;
    usleep(20000); /* the reaper is asleep */
    long before = thread_switches("reaper-quiet");
    CHECK(before >= 0);
    reset();
    for (int i = 0; i < 100; i++) {
        CHECK(!gr_purgatory_submit(p, &mk(i + 1, 500)->op, &k, 1));
        usleep(1000);
        atomic_store(&g_ready, i + 1);
        CHECK(gr_purgatory_check(p, k) == 1);
    }
    long after = thread_switches("reaper-quiet");
    if (after - before >= 20) fprintf(stderr, "reaper woke %ld times for 100 ops\n", after - before);
    CHECK(after - before < 20);
    CHECK(g_comp == 100 && g_exp == 0);
    gr_purgatory_free(p);
}

int main(void) {
    struct gr_purgatory *p = gr_purgatory_new("test");
    CHECK(p != NULL);
    uint64_t k1 = 1, k2 = 2, k3 = 3;

    /* 1. Completes at once: never registered. */
    reset();
    atomic_store(&g_ready, 1);
    CHECK(gr_purgatory_submit(p, &mk(1, 1000)->op, &k1, 1));
    CHECK(g_comp == 1 && g_exp == 0 && g_destroyed == 1);
    CHECK(gr_purgatory_waiting(p) == 0);

    /* 2. Waits, then completes on check of its key; a check on another key does nothing. */
    reset();
    CHECK(!gr_purgatory_submit(p, &mk(1, 10000)->op, &k1, 1));
    CHECK(gr_purgatory_waiting(p) == 1);
    atomic_store(&g_ready, 1);
    CHECK(gr_purgatory_check(p, k2) == 0);
    CHECK(g_comp == 0);
    CHECK(gr_purgatory_check(p, k1) == 1);
    CHECK(g_comp == 1 && g_exp == 0 && g_destroyed == 1);
    CHECK(gr_purgatory_waiting(p) == 0);
    CHECK(gr_purgatory_check(p, k1) == 0);

    /* 3. Expiry: deadline order respected, expired flag set. */
    reset();
    int64_t t0 = gr_mono_ms();
    gr_purgatory_submit(p, &mk(1, 200)->op, &k1, 1);
    gr_purgatory_submit(p, &mk(1, 50)->op, &k2, 1);
    CHECK(gr_purgatory_waiting(p) == 2);
    wait_for(&g_exp, 1, 2000);
    CHECK(g_exp == 1);
    CHECK(gr_mono_ms() - t0 >= 45);
    CHECK(gr_purgatory_waiting(p) == 1);
    wait_for(&g_exp, 2, 2000);
    CHECK(g_exp == 2 && g_comp == 2);
    wait_for(&g_destroyed, 2, 1000);
    CHECK(g_destroyed == 2);
    CHECK(gr_mono_ms() - t0 >= 195);

    /* 4. Multi-key op: completes via any of its keys, leaves every watch list. */
    reset();
    uint64_t keys[6] = {k1, k2, k3, 4, 5, 6}; /* more than the inline key slots */
    gr_purgatory_submit(p, &mk(1, 10000)->op, keys, 6);
    atomic_store(&g_ready, 1);
    CHECK(gr_purgatory_check(p, 5) == 1);
    CHECK(gr_purgatory_check(p, k1) == 0);
    CHECK(g_comp == 1 && g_destroyed == 1);

    /* 5. Many ops, many concurrent checkers: each completes exactly once. */
    reset();
    enum { NOPS = 500, NTH = 4 };
    for (int i = 0; i < NOPS; i++) {
        uint64_t k = (uint64_t)(i % 3) + 1;
        gr_purgatory_submit(p, &mk(1, 10000)->op, &k, 1);
    }
    CHECK(gr_purgatory_waiting(p) == NOPS);
    atomic_store(&g_ready, 1);
    pthread_t th[NTH];
    struct checker_arg args[NTH];
    for (int i = 0; i < NTH; i++) {
        args[i] = (struct checker_arg){p, (uint64_t)(i % 3) + 1, 50};
        pthread_create(&th[i], NULL, checker, &args[i]);
    }
    for (int i = 0; i < NTH; i++) pthread_join(th[i], NULL);
    CHECK(g_comp == NOPS);
    CHECK(g_destroyed == NOPS);
    CHECK(gr_purgatory_waiting(p) == 0);

    /* 6. Race between expiry and checks: still exactly once per op. */
    reset();
    for (int i = 0; i < 200; i++) gr_purgatory_submit(p, &mk(1, i % 20)->op, &k1, 1);
    atomic_store(&g_ready, 1);
    for (int i = 0; i < 20; i++) gr_purgatory_check(p, k1);
    wait_for(&g_destroyed, 200, 3000);
    CHECK(g_comp == 200 && g_destroyed == 200);

    /* 6b. check_many: each op evaluated once per call, told the key (one) or the sorted set of
     * keys (several) that concern it; keys nobody watches cost nothing. */
    reset();
    {
        uint64_t wk[5] = {50, 10, 30, 20, 40};
        struct test_op *a = mk(1, 100000), *b1 = mk(1, 100000);
        gr_purgatory_submit(p, &a->op, wk, 5);
        gr_purgatory_submit(p, &b1->op, &wk[2], 1); /* watches 30 only */
        int tries_a = atomic_load(&a->tries), tries_b = atomic_load(&b1->tries);
        uint64_t ck[4] = {40, 999, 20, 40}; /* 40 twice, 999 unwatched */
        CHECK(gr_purgatory_check_many(p, ck, 4) == 0);
        CHECK(atomic_load(&a->tries) == tries_a + 1);
        CHECK(atomic_load(&b1->tries) == tries_b); /* not concerned */
        CHECK(g_last_key == 0 && g_last_nset == 2 && g_last_set[0] == 20 && g_last_set[1] == 40);
        uint64_t ck2[2] = {30, 777};
        CHECK(gr_purgatory_check_many(p, ck2, 2) == 0);
        CHECK(atomic_load(&a->tries) == tries_a + 2 && atomic_load(&b1->tries) == tries_b + 1);
        CHECK(g_last_key == 30 && g_last_nset == 0);
        atomic_store(&g_ready, 1);
        uint64_t ck3[3] = {10, 30, 50};
        CHECK(gr_purgatory_check_many(p, ck3, 3) == 2);
        wait_for(&g_destroyed, 2, 3000);
        CHECK(g_comp == 2 && g_exp == 0 && gr_purgatory_waiting(p) == 0);
    }

    test_reaper_not_woken();

    /* 7. Shutdown expires what waits. */
    reset();
    gr_purgatory_submit(p, &mk(1, 100000)->op, &k1, 1);
    gr_purgatory_submit(p, &mk(1, 100000)->op, &k2, 1);
    gr_purgatory_free(p);
    CHECK(g_comp == 2 && g_exp == 2 && g_destroyed == 2);

    if (test_failures) fprintf(stderr, "test_purgatory: %d failures\n", test_failures);
    else printf("test_purgatory: ok\n");
    return test_failures ? 1 : 0;
}
