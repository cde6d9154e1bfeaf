/* A live config change whose read fails is retried, not lost (controller/config_change_listener.h,
 * broker/dynamic_config_manager.h): the broker's /config/changes listener hands a topic change
 * (topics/T), a broker-layer change (brokers/<default>) or a client quota change (clients/c) to the
 * DynamicConfigManager; when the /config/topics/T, /config/brokers/<default> or /config/clients
 * read fails at that moment (ZooKeeper stalled or
 * refusing), the notification stays unprocessed and the next pass applies it, with no further
 * change of that entity. The old listener marked it processed and the hosted log kept its old
 * settings until the topic's next change. Kafka's ZkNodeChangeNotificationListener does not
 * advance lastExecutedChange past a notification whose processing threw.
 *
 * Over an in-memory ZooKeeper whose gets of chosen paths fail (GR_ZNOAUTH: not retried inside
 * kzk, as a read that outlasted kzk's own retries), with a thread-less listener driven here. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/dynamic_config_manager.h"
#include "broker/quota_manager.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/config_change_listener.h"
#include "replication/partitions.h"
#include "replication/replica_internal.h"
#include "replication/replica_manager.h"
#include "storage/log.h"
#include "storage/log_manager.h"
#include "support/check.h"
#include "support/memzk.h"
#include "zk/kzk.h"

#define TOPIC "cc"

static struct gr_config g_cfg;
static struct memzk *g_zk;
static struct gr_kzk *g_kzk;
static const struct gr_zk_backend_ops *mem_ops;
static struct gr_zk_backend_ops faulty_ops;
static const char *g_fail_prefix; /* gets of paths starting with it fail while g_fail > 0 */
static int g_fail;                /* failures left */

static int f_get(struct gr_zk_backend *b, const char *path, bool watch, char **data, int *len, struct gr_zstat *st) {
    if (g_fail > 0 && g_fail_prefix && strncmp(path, g_fail_prefix, strlen(g_fail_prefix)) == 0) {
        g_fail--;
        return GR_ZNOAUTH;
    }
    return mem_ops->get(b, path, watch, data, len, st);
}

static int f_get_many(struct gr_zk_backend *b, const char *const *paths, int n, bool watch,
                      struct gr_zget_result *res) {
    int rc = mem_ops->get_many(b, paths, n, watch, res);
    for (int i = 0; i < n; i++)
        if (g_fail > 0 && g_fail_prefix && strncmp(paths[i], g_fail_prefix, strlen(g_fail_prefix)) == 0) {
            g_fail--;
            res[i].rc = GR_ZNOAUTH;
        }
    return rc;
}

static void put(const char *path, const char *json) {
    if (memzk_set(g_zk, path, json, (int)strlen(json), -1, NULL) == GR_ZNONODE)
        CHECK(memzk_create(g_zk, path, json, (int)strlen(json), 0, NULL) == GR_ZOK);
}

static void notify(const char *entity) {
    char json[256];
    snprintf(json, sizeof json, "{\"version\":2,\"entity_path\":\"%s\"}", entity);
    CHECK(memzk_create(g_zk, "/config/changes/config_change_", json, (int)strlen(json), GR_ZSEQUENCE, NULL) ==
          GR_ZOK);
}

static int16_t lead(struct gr_broker *b) {
    static int32_t reps[1] = {1};
    struct gr_partition_state st = {0};
    st.topic = TOPIC;
    st.partition = 0;
    st.leader = 1;
    st.leader_epoch = 1;
    st.controller_epoch = 1;
    st.isr = reps;
    st.n_isr = 1;
    st.replicas = reps;
    st.n_replicas = 1;
    int16_t e = b->hooks.become_leader(b->hooks.ctx, b, &st);
    b->hooks.leader_and_isr_done(b->hooks.ctx, b);
    return e;
}

/* The hosted log's max.message.bytes and retention.ms in force. */
static void in_force(struct gr_replica_manager *rm, int32_t *max_message_bytes, int64_t *retention_ms) {
    *max_message_bytes = -1;
    *retention_ms = -2;
    struct gr_lm_log *l = gr_plog_manager_acquire(rm->lm, TOPIC, 0);
    CHECK(l != NULL);
    if (!l) return;
    struct gr_plog_config lc;
    gr_plog_get_config(l->log, &lc);
    *max_message_bytes = lc.max_message_bytes;
    *retention_ms = atomic_load(&l->retention_ms);
    gr_plog_manager_release(rm->lm, l);
}

/* The producer_byte_rate in force for client c (-1: none). */
static double quota(struct gr_broker *b, const char *c) {
    char *sensor = NULL;
    bool any = false;
    double v = gr_quota_entity(b->quotas, GR_QUOTA_PRODUCE, "ANONYMOUS", c, &sensor, &any);
    free(sensor);
    return any ? v : -1;
}

int main(void) {
    gr_log_set_level(GR_LOG_ERROR);
    gr_config_defaults(&g_cfg);
    g_cfg.broker_id = 1;
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/gr-test-ccretry-%d", (int)getpid());
    free(g_cfg.log_dirs[0]);
    g_cfg.log_dirs[0] = gr_strdup(dir);
    g_cfg.num_log_dirs = 1;
    g_cfg.min_insync_replicas = 1;
    g_zk = memzk_new(6000);
    mem_ops = g_zk->base.ops;
    faulty_ops = *mem_ops;
    faulty_ops.get = f_get;
    faulty_ops.get_many = f_get_many;
    g_zk->base.ops = &faulty_ops;
    g_kzk = gr_kzk_new(&g_zk->base);
    CHECK(gr_kzk_ensure_paths(g_kzk) == 0);
    put("/config/topics/" TOPIC, "{\"version\":1,\"config\":{\"max.message.bytes\":\"100000\"}}");

    struct gr_broker *b = gr_broker_new(&g_cfg, 1);
    b->zk = g_kzk;
    struct gr_replica_manager *rm = NULL;
    CHECK(gr_replica_manager_new(b, &rm) == 0);
    CHECK(lead(b) == GR_KERR_NONE);
    struct gr_dynamic_config_manager *d = gr_dcm_new(b);
    CHECK(d && gr_dcm_loaded(d));
    b->dynamic_config = d; /* as the start-up code sets it: the replica manager resolves through it */
    struct gr_zk_watches *w = gr_zk_watches_new();
    struct gr_config_change_listener *l = gr_config_change_listener_new_with(g_kzk, w, NULL, gr_dcm_on_entity_change, d);
    CHECK(gr_config_change_listener_process(l)); /* nothing pending */
    int32_t mmb;
    int64_t ret;
    in_force(rm, &mmb, &ret);
    CHECK(mmb == 100000);

    /* 1. topics/cc: the change is written, then every read of /config/topics/cc fails for a pass */
    put("/config/topics/" TOPIC, "{\"version\":1,\"config\":{\"max.message.bytes\":\"54321\"}}");
    notify("topics/" TOPIC);
    g_fail_prefix = "/config/topics/" TOPIC;
    g_fail = 1000;
    CHECK(!gr_config_change_listener_process(l)); /* not applied: pending */
    in_force(rm, &mmb, &ret);
    CHECKF(mmb == 100000, "max.message.bytes %d while the read fails", mmb);
    g_fail = 0; /* ZooKeeper answers again; no new change of the topic */
    CHECK(gr_config_change_listener_process(l));
    in_force(rm, &mmb, &ret);
    CHECKF(mmb == 54321, "topic change lost after a failed read: max.message.bytes %d", mmb);

    /* 2. brokers/<default>: the cluster default's read fails once, then the layer is applied */
    put("/config/brokers/<default>", "{\"version\":1,\"config\":{\"log.retention.ms\":\"777000\"}}");
    notify("brokers/<default>");
    g_fail_prefix = "/config/brokers/";
    g_fail = 1;
    CHECK(!gr_config_change_listener_process(l));
    CHECK(gr_dcm_broker_long(d, &g_cfg, "log.retention.ms", -3) != 777000);
    CHECK(gr_config_change_listener_process(l));
    CHECKF(gr_dcm_broker_long(d, &g_cfg, "log.retention.ms", -3) == 777000, "broker default change lost");
    in_force(rm, &mmb, &ret);
    CHECKF(ret == 777000, "hosted log retention.ms %lld", (long long)ret);

    /* 3. clients/c1: a quota change whose /config/clients listing fails keeps the quotas in force
     * (the old reload dropped every quota on a failed listing) and is applied on the next pass */
    b->quotas = gr_quota_manager_new(b);
    put("/config/clients/c1", "{\"version\":1,\"config\":{\"producer_byte_rate\":\"1000\"}}");
    notify("clients/c1");
    CHECK(gr_config_change_listener_process(l));
    CHECK(quota(b, "c1") == 1000);
    put("/config/clients/c1", "{\"version\":1,\"config\":{\"producer_byte_rate\":\"2000\"}}");
    notify("clients/c1");
    g_fail_prefix = "/config/clients";
    g_fail = 1000;
    CHECK(!gr_config_change_listener_process(l));
    CHECKF(quota(b, "c1") == 1000, "quota %g while the read fails", quota(b, "c1"));
    g_fail = 0;
    CHECK(gr_config_change_listener_process(l));
    CHECKF(quota(b, "c1") == 2000, "quota change lost after a failed read: %g", quota(b, "c1"));

    /* 4. a later change goes through once, and a processed change is not handed again */
    put("/config/topics/" TOPIC, "{\"version\":1,\"config\":{\"max.message.bytes\":\"60000\"}}");
    notify("topics/" TOPIC);
    CHECK(gr_config_change_listener_process(l));
    in_force(rm, &mmb, &ret);
    CHECK(mmb == 60000);
    put("/config/topics/" TOPIC, "{\"version\":1,\"config\":{\"max.message.bytes\":\"70000\"}}"); /* no notification */
    CHECK(gr_config_change_listener_process(l));
    in_force(rm, &mmb, &ret);
    CHECK(mmb == 60000);

    /* 5. a config that does not parse is not retried: it never will, and every later change
     * (here a client quota's) would wait behind it forever */
    put("/config/topics/" TOPIC, "{\"version\":1,\"config\":{\"max.message.bytes\":1}}");
    notify("topics/" TOPIC);
    put("/config/brokers/<default>", "{\"version\":1,\"config\":[]}");
    notify("brokers/<default>");
    put("/config/clients/c1", "{\"version\":1,\"config\":{\"producer_byte_rate\":\"3000\"}}");
    notify("clients/c1");
    CHECK(gr_config_change_listener_process(l));
    CHECKF(quota(b, "c1") == 3000, "a change behind an unparsable config is never applied: quota %g",
           quota(b, "c1"));
    in_force(rm, &mmb, &ret);
    CHECKF(mmb == 60000 && ret == 777000, "settings in force changed by unparsable configs: %d %lld", mmb,
           (long long)ret);

    gr_config_change_listener_stop(l);
    gr_zk_watches_free(w);
    gr_replica_manager_free(rm);
    gr_quota_manager_free(b->quotas);
    b->quotas = NULL;
    b->dynamic_config = NULL;
    gr_dcm_free(d);
    b->zk = NULL;
    gr_broker_free(b);
    gr_kzk_free(g_kzk);
    memzk_free(g_zk);
    gr_config_release(&g_cfg);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
    if (test_failures) {
        fprintf(stderr, "test_config_change_retry: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_config_change_retry: ok\n");
    return 0;
}
