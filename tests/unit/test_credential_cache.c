/* The SCRAM credential cache as the DynamicConfigManager feeds it (broker/dynamic_config_manager.h,
 * security/credential_cache.h) over an in-memory ZooKeeper whose reads of /config/users/... can
 * be made to fail:
 *  - a user whose re-read fails after a change notification is refused at once (fail closed) and
 *    is loaded again when ZooKeeper answers, without another change of that user (the listener
 *    hands the notification again);
 *  - a start-up load that fails for a moment is retried (no valid user refused until changed). */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/dynamic_config_manager.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/config_change_listener.h"
#include "support/check.h"
#include "support/memzk.h"
#include "zk/kzk.h"
#include "storage/log_config.h"
#include "common/config.h"

int test_failures;

static const struct gr_zk_backend_ops *mem_ops;
static struct gr_zk_backend_ops faulty_ops;
static atomic_int fail_users;   /* >0: fail reads of /config/users/... (count down when counting) */
static atomic_bool fail_counts; /* fail_users counts down */
static atomic_int fail_brokers; /* >0: fail reads of /config/brokers/... (count down) */

static bool users_path(const char *p) {
    return strncmp(p, "/config/users/", 14) == 0;
}

static bool take_fault(void) {
    if (atomic_load(&fail_users) <= 0) return false;
    if (atomic_load(&fail_counts)) atomic_fetch_sub(&fail_users, 1);
    return true;
}

static int f_get(struct gr_zk_backend *b, const char *path, bool watch, char **data, int *len, struct gr_zstat *st) {
    if (users_path(path) && take_fault()) return GR_ZNOAUTH;
    if (strncmp(path, "/config/brokers/", 16) == 0 && atomic_load(&fail_brokers) > 0) {
        atomic_fetch_sub(&fail_brokers, 1);
        return GR_ZNOAUTH;
    }
    return mem_ops->get(b, path, watch, data, len, st);
}

static int f_get_many(struct gr_zk_backend *b, const char *const *paths, int n, bool watch,
                      struct gr_zget_result *res) {
    int rc = mem_ops->get_many(b, paths, n, watch, res);
    if (n > 0 && users_path(paths[0]) && take_fault())
        for (int i = 0; i < n; i++) res[i].rc = GR_ZNOAUTH; /* per-path codes, as the backends report */
    return rc;
}

#define KEY "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

static void set_user(struct memzk *z, const char *user, int iterations) {
    char path[128], json[512];
    snprintf(path, sizeof path, "/config/users/%s", user);
    snprintf(json, sizeof json,
             "{\"version\":1,\"config\":{\"SCRAM-SHA-256\":\"salt=c2FsdA==,stored_key=" KEY ",server_key=" KEY
             ",iterations=%d\"}}",
             iterations);
    if (memzk_set(z, path, json, (int)strlen(json), -1, NULL) == GR_ZNONODE)
        CHECK(memzk_create(z, path, json, (int)strlen(json), 0, NULL) == GR_ZOK);
}

static void notify(struct memzk *z, const char *entity) {
    char json[256];
    snprintf(json, sizeof json, "{\"version\":2,\"entity_path\":\"%s\"}", entity);
    CHECK(memzk_create(z, "/config/changes/config_change_", json, (int)strlen(json), GR_ZSEQUENCE, NULL) == GR_ZOK);
}

static int iterations(struct gr_dynamic_config_manager *d, const char *user) {
    struct gr_scram_cred c;
    return gr_dcm_scram_credential(d, GR_SCRAM_SHA_256, user, &c) == 0 ? c.iterations : -1;
}

struct env {
    struct memzk *z;
    struct gr_kzk *k;
    struct gr_broker b;
};

static void env_init(struct env *e) {
    e->z = memzk_new(6000);
    mem_ops = e->z->base.ops;
    faulty_ops = *mem_ops;
    faulty_ops.get = f_get;
    faulty_ops.get_many = f_get_many;
    e->z->base.ops = &faulty_ops;
    e->k = gr_kzk_new(&e->z->base);
    CHECK(gr_kzk_ensure_paths(e->k) == 0);
    memset(&e->b, 0, sizeof e->b);
    e->b.broker_id = 1;
    e->b.zk = e->k;
}

static void env_free(struct env *e) {
    gr_kzk_free(e->k);
    memzk_free(e->z);
}

/* A re-read that fails: refused at once, back once ZooKeeper answers (no new change needed). */
static void test_failed_reread_retried(void) {
    struct env e;
    env_init(&e);
    set_user(e.z, "alice", 4096);
    struct gr_dynamic_config_manager *d = gr_dcm_new(&e.b);
    CHECK(gr_dcm_credentials_loaded(d));
    CHECK(iterations(d, "alice") == 4096);

    set_user(e.z, "alice", 8192); /* the password changes */
    notify(e.z, "users/alice");
    atomic_store(&fail_counts, true);
    atomic_store(&fail_users, 3); /* ZooKeeper refuses every re-read of that pass (3 attempts) */
    struct gr_zk_watches *w = gr_zk_watches_new();
    struct gr_config_change_listener *l =
        gr_config_change_listener_start_with(e.k, w, NULL, gr_dcm_on_entity_change, d);
    CHECK(l != NULL);
    int it = 0;
    for (int i = 0; i < 100 && (it = iterations(d, "alice")) == 4096; i++) usleep(50 * 1000);
    CHECKF(it == -1 || it == 8192, "old password still valid after a failed re-read (iterations %d)", it);
    for (int i = 0; i < 300 && (it = iterations(d, "alice")) != 8192; i++) usleep(50 * 1000);
    CHECKF(it == 8192, "alice not reloaded after ZooKeeper recovered (iterations %d)", it);
    gr_config_change_listener_stop(l);
    gr_zk_watches_free(w);
    gr_dcm_free(d);
    env_free(&e);
}

/* The start-up load fails twice, then works: every user is loaded. */
static void test_startup_load_retried(void) {
    struct env e;
    env_init(&e);
    set_user(e.z, "alice", 4096);
    set_user(e.z, "bob", 4096);
    atomic_store(&fail_counts, true);
    atomic_store(&fail_users, 2);
    struct gr_dynamic_config_manager *d = gr_dcm_new(&e.b);
    CHECK(gr_dcm_credentials_loaded(d));
    CHECK(iterations(d, "alice") == 4096);
    CHECK(iterations(d, "bob") == 4096);
    CHECK(iterations(d, "carol") == -1);
    gr_dcm_free(d);

    /* ZooKeeper never answers: the start-up code is told (and refuses to start) */
    atomic_store(&fail_counts, false);
    atomic_store(&fail_users, 1);
    d = gr_dcm_new(&e.b);
    CHECK(!gr_dcm_credentials_loaded(d));
    CHECK(iterations(d, "alice") == -1);
    atomic_store(&fail_users, 0);
    gr_dcm_free(d);
    env_free(&e);
}

/* The start-up read of the broker layers (the logs are loaded with them: a cluster-default
 * log.cleanup.policy=compact left unread would load compacted logs as delete ones): retried when
 * it fails for a moment, and the start-up code is told when it never succeeds. */
static void test_startup_broker_layers(void) {
    struct env e;
    env_init(&e);
    const char *json = "{\"version\":1,\"config\":{\"log.cleanup.policy\":\"compact\"}}";
    memzk_create(e.z, "/config/brokers", NULL, 0, 0, NULL); /* unless ensure_paths made it */
    CHECK(memzk_create(e.z, "/config/brokers/<default>", json, (int)strlen(json), 0, NULL) == GR_ZOK);
    atomic_store(&fail_brokers, 2);
    struct gr_dynamic_config_manager *d = gr_dcm_new(&e.b);
    CHECK(gr_dcm_loaded(d));
    struct gr_log_config lc;
    struct gr_config cfg;
    gr_config_defaults(&cfg);
    gr_dcm_log_config(d, &cfg, NULL, &lc);
    CHECKF(lc.lc.cleanup_compact && !lc.lc.cleanup_delete, "the cluster-default cleanup.policy was not read");
    gr_dcm_free(d);

    atomic_store(&fail_brokers, 1000); /* ZooKeeper never answers them */
    d = gr_dcm_new(&e.b);
    CHECKF(!gr_dcm_loaded(d), "a start-up without the broker layers was let through");
    gr_dcm_free(d);
    atomic_store(&fail_brokers, 0);
    gr_config_release(&cfg);
    env_free(&e);
}

int main(void) {
    gr_log_set_level(GR_LOG_ERROR);
    test_startup_broker_layers();
    test_failed_reread_retried();
    test_startup_load_retried();
    if (test_failures) fprintf(stderr, "%d failure(s)\n", test_failures);
    return test_failures ? 1 : 0;
}
