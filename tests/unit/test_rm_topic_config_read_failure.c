/* A log's topic settings survive a /config/topics read that fails after start-up: the
 * LeaderAndIsr that hosts a partition whose log was loaded at start-up (create_partition) and a
 * config-change reload (gr_rm_reload_topic_config) keep the settings in force instead of
 * applying the broker defaults (cleanup.policy=delete, log.retention.ms), which would let
 * retention delete a compacted topic's data. Kafka's getOrCreateLog reads no config for an
 * existing log and a failed fetchEntityConfig changes nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/broker.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/util.h"
#include "replication/partitions.h"
#include "replication/replica_internal.h"
#include "replication/replica_manager.h"
#include "storage/log.h"
#include "storage/log_manager.h"
#include "support/check.h"
#include "support/memzk.h"
#include "zk/kzk.h"

#define TOPIC "tc"

static struct gr_config g_cfg;
static struct memzk *g_zk;
static struct gr_kzk *g_kzk;

static struct gr_broker *start(struct gr_replica_manager **rm) {
    struct gr_broker *b = gr_broker_new(&g_cfg, 1);
    b->zk = g_kzk;
    CHECK(gr_replica_manager_new(b, rm) == 0);
    return b;
}

static void stop(struct gr_broker *b, struct gr_replica_manager *rm) {
    gr_replica_manager_free(rm);
    b->zk = NULL;
    gr_broker_free(b);
}

static int16_t lead(struct gr_broker *b, int32_t epoch) {
    static int32_t reps[1] = {1};
    struct gr_partition_state st = {0};
    st.topic = TOPIC;
    st.partition = 0;
    st.leader = 1;
    st.leader_epoch = epoch;
    st.controller_epoch = 1;
    st.isr = reps;
    st.n_isr = 1;
    st.replicas = reps;
    st.n_replicas = 1;
    int16_t e = b->hooks.become_leader(b->hooks.ctx, b, &st);
    b->hooks.leader_and_isr_done(b->hooks.ctx, b);
    return e;
}

static void check_compacted(struct gr_replica_manager *rm, const char *when) {
    struct gr_lm_log *l = gr_plog_manager_acquire(rm->lm, TOPIC, 0);
    CHECK(l != NULL);
    if (!l) return;
    struct gr_plog_config lc;
    gr_plog_get_config(l->log, &lc);
    if (!lc.cleanup_compact || lc.cleanup_delete || atomic_load(&l->retention_ms) != -1)
        fprintf(stderr, "%s: compact=%d delete=%d retention.ms=%lld\n", when, lc.cleanup_compact, lc.cleanup_delete,
                (long long)atomic_load(&l->retention_ms));
    CHECK(lc.cleanup_compact && !lc.cleanup_delete);
    CHECK(atomic_load(&l->retention_ms) == -1);
    gr_plog_manager_release(rm->lm, l);
}

int main(void) {
    gr_config_defaults(&g_cfg);
    g_cfg.broker_id = 1;
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/gr-test-rmtc-%d", (int)getpid());
    free(g_cfg.log_dirs[0]);
    g_cfg.log_dirs[0] = gr_strdup(dir);
    g_cfg.num_log_dirs = 1;
    g_cfg.min_insync_replicas = 1;
    g_zk = memzk_new(6000);
    g_kzk = gr_kzk_new(&g_zk->base);
    static const char good[] = "{\"version\":1,\"config\":{\"cleanup.policy\":\"compact\",\"retention.ms\":\"-1\"}}";
    CHECK(memzk_create(g_zk, "/config", NULL, 0, 0, NULL) == GR_ZOK);
    CHECK(memzk_create(g_zk, "/config/topics", NULL, 0, 0, NULL) == GR_ZOK);
    CHECK(memzk_create(g_zk, "/config/topics/" TOPIC, good, (int)strlen(good), 0, NULL) == GR_ZOK);

    /* first life: the partition and its log directory */
    struct gr_replica_manager *rm = NULL;
    struct gr_broker *b = start(&rm);
    CHECK(lead(b, 1) == GR_KERR_NONE);
    check_compacted(rm, "first life");
    struct gr_lm_log *l = gr_plog_manager_acquire(rm->lm, TOPIC, 0);
    CHECK(l && gr_plog_truncate_fully_and_start_at(l->log, 5) == 0); /* makes the directory */
    if (l) gr_plog_manager_release(rm->lm, l);
    stop(b, rm);

    /* restart: the log gets its settings at start-up, then ZooKeeper answers garbage */
    b = start(&rm);
    check_compacted(rm, "after start-up");
    static const char bad[] = "{garbage";
    CHECK(memzk_set(g_zk, "/config/topics/" TOPIC, bad, (int)strlen(bad), -1, NULL) == GR_ZOK);
    CHECK(lead(b, 2) == GR_KERR_NONE);
    check_compacted(rm, "after a LeaderAndIsr whose config read failed");
    gr_rm_reload_topic_config(rm, TOPIC);
    check_compacted(rm, "after a config reload whose read failed");
    stop(b, rm);

    gr_kzk_free(g_kzk);
    memzk_free(g_zk);
    gr_config_release(&g_cfg);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
    if (test_failures) {
        fprintf(stderr, "test_rm_topic_config_read_failure: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_rm_topic_config_read_failure: ok\n");
    return 0;
}
