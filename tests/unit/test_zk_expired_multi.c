/* Regression test: a multi issued on a ZooKeeper handle whose session has just expired.
 *
 * libzookeeper-mt (3.8.0, and still upstream) zoo_amulti() frees the chroot-prefixed path of its
 * first op twice when the handle is in an unrecoverable state (EXPIRED/AUTH_FAILED):
 * Request_path_init() frees it and returns ZINVALIDSTATE, then zoo_amulti's per-op code frees
 * it again (later ops free a stale pointer). The real backend keeps the expired handle installed
 * while the EXPIRED callback runs (the controller processes its Expire event first), so the
 * controller thread could run a guarded multi on it: "free(): double free detected in tcache 2"
 * in the chaos tests (a controller SIGSTOPped past its session timeout). The backend must answer
 * such a multi itself with GR_ZSESSIONEXPIRED and never call zoo_multi on that handle.
 *
 * Needs GREGOR_TEST_ZK=host:port, else prints "skipped" and exits 0. The test holds the EXPIRED
 * callback open (as the controller does) and issues multis (and single calls) meanwhile, then
 * checks that a multi works again on the new session. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "support/check.h"
#include "zk/backend.h"

/* See test_zk_real.c: libzookeeper-mt may leak a little around session expiry (ASan builds). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
    return "leak:libzookeeper_mt.so\n";
}

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static bool g_in_expired;   /* the EXPIRED callback is running */
static bool g_release;      /* the test lets the EXPIRED callback return */
static atomic_int g_new_session;

/* Like the controller: the EXPIRED callback blocks until "the Expire event was processed". */
static void on_session(void *ctx, int state) {
    (void)ctx;
    if (state == GR_ZSESSION_NEW_SESSION) atomic_fetch_add(&g_new_session, 1);
    if (state != GR_ZSESSION_EXPIRED) return;
    pthread_mutex_lock(&g_mu);
    g_in_expired = true;
    pthread_cond_broadcast(&g_cv);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 30;
    while (!g_release)
        if (pthread_cond_timedwait(&g_cv, &g_mu, &dl) != 0) break;
    pthread_mutex_unlock(&g_mu);
}

static bool wait_in_expired(int ms) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    pthread_mutex_lock(&g_mu);
    while (!g_in_expired)
        if (pthread_cond_timedwait(&g_cv, &g_mu, &dl) != 0) break;
    bool in = g_in_expired;
    pthread_mutex_unlock(&g_mu);
    return in;
}

static void release_expired(void) {
    pthread_mutex_lock(&g_mu);
    g_release = true;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

/* The shape of a controller write: check(/controller_epoch) + set. */
static int guarded_set(struct gr_zk_backend *b, int version, struct gr_zop_result res[2]) {
    struct gr_zop ops[2] = {gr_zop_check("/controller_epoch", GR_ZANY_VERSION),
                            gr_zop_set("/state", "x", 1, version)};
    int rc = gr_zkb_multi(b, ops, 2, res);
    gr_zop_results_release(res, 2);
    return rc;
}

int main(void) {
    const char *zk = getenv("GREGOR_TEST_ZK");
    if (!zk || !*zk) {
        printf("test_zk_expired_multi: skipped (GREGOR_TEST_ZK not set)\n");
        return 0;
    }
    /* A chroot: the double free is of the chroot-prefixed path. */
    char connect[512];
    snprintf(connect, sizeof connect, "%s/gregor_test_zk_expired/%d_%lld", zk, (int)getpid(),
             (long long)time(NULL));
    struct gr_zk_backend *b = NULL;
    struct gr_zk_real_config cfg = {.connect = connect,
                                    .session_timeout_ms = 4000,
                                    .connection_timeout_ms = 10000,
                                    .on_session = on_session};
    int rc = gr_zk_real_open(&cfg, &b);
    if (rc != GR_ZOK) {
        fprintf(stderr, "test_zk_expired_multi: cannot connect to %s: %s\n", connect, gr_zrc_name(rc));
        return 1;
    }
    CHECK(gr_zkb_create(b, "/controller_epoch", "1", 1, 0, NULL) == GR_ZOK);
    CHECK(gr_zkb_create(b, "/state", "0", 1, 0, NULL) == GR_ZOK);
    struct gr_zop_result res[2];
    CHECK(guarded_set(b, 0, res) == GR_ZOK && res[1].stat.version == 1);

    /* Expire our session from outside; our handle learns it when it reconnects. */
    struct gr_zsession s;
    CHECK(gr_zkb_session(b, &s) == GR_ZOK);
    CHECK(gr_zk_real_close_session(connect, &s, 10000) == GR_ZOK);
    CHECK(wait_in_expired(20000));

    /* The expired handle is still installed while EXPIRED is being delivered. */
    for (int i = 0; i < 20; i++) {
        rc = guarded_set(b, 1, res);
        CHECK(rc == GR_ZSESSIONEXPIRED);
        CHECK(res[0].rc == GR_ZSESSIONEXPIRED && res[1].rc == GR_ZSESSIONEXPIRED);
    }
    struct gr_zop one = gr_zop_create("/never", NULL, 0, 0);
    CHECK(gr_zkb_multi(b, &one, 1, res) == GR_ZSESSIONEXPIRED);
    gr_zop_results_release(res, 1);
    /* Single calls fail cleanly too (the library checks those itself). */
    char *data = NULL;
    int len = 0;
    CHECK(gr_zkb_get(b, "/state", false, &data, &len, NULL) != GR_ZOK && data == NULL);
    CHECK(gr_zkb_set(b, "/state", "y", 1, GR_ZANY_VERSION, NULL) != GR_ZOK);
    CHECK(gr_zkb_create(b, "/never", NULL, 0, 0, NULL) != GR_ZOK);

    /* Once EXPIRED was handled, a new session comes and multis work again. */
    release_expired();
    for (int i = 0; i < 750 && atomic_load(&g_new_session) < 1; i++) usleep(20 * 1000);
    CHECK(atomic_load(&g_new_session) >= 1);
    CHECK(gr_zkb_wait_connected(b, 10000) == GR_ZOK);
    CHECK(guarded_set(b, 1, res) == GR_ZOK && res[1].stat.version == 2);
    CHECK(gr_zkb_exists(b, "/never", false, NULL) == GR_ZNONODE);
    gr_zkb_destroy(b);

    if (test_failures) {
        fprintf(stderr, "test_zk_expired_multi: %d check(s) failed\n", test_failures);
        return 1;
    }
    printf("test_zk_expired_multi: ok\n");
    return 0;
}
