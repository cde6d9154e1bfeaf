/* The topic/broker config model (common/config_model.h): Kafka 2.7's topic keys, types, ranges
 * and messages naming the key; dynamic broker keys; the layering that gives values, sources and
 * synonyms (topic override > per-broker > <default> > server.properties > default); the
 * effective log settings; static props recorded by common/config.c. */
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/config_model.h"
#include "common/log.h"
#include "storage/log_config.h"
#include "storage/compression.h"
#include "support/check.h"

static void test_topic_checks(void) {
    char err[256];
    CHECK(gr_topic_key_count() == 26);
    CHECK(gr_topic_config_check("retention.ms", "1000", err, sizeof err) == GR_CFG_OK);
    CHECK(gr_topic_config_check("retention.ms", "-1", err, sizeof err) == GR_CFG_OK);
    CHECK(gr_topic_config_check("retention.ms", "-2", err, sizeof err) == GR_CFG_INVALID_VALUE);
    CHECKF(strcmp(err, "Invalid value -2 for configuration retention.ms: Value must be at least -1") == 0, "%s", err);
    CHECK(gr_topic_config_check("retention.ms", "soon", err, sizeof err) == GR_CFG_INVALID_VALUE);
    CHECKF(strcmp(err, "Invalid value soon for configuration retention.ms: Not a number of type LONG") == 0, "%s", err);
    CHECK(gr_topic_config_check("segment.bytes", "13", err, sizeof err) == GR_CFG_INVALID_VALUE);
    CHECK(gr_topic_config_check("segment.bytes", "14", err, sizeof err) == GR_CFG_OK);
    CHECK(gr_topic_config_check("segment.bytes", "3000000000", err, sizeof err) == GR_CFG_INVALID_VALUE);
    CHECK(strstr(err, "Not a number of type INT"));
    CHECK(gr_topic_config_check("min.insync.replicas", "0", err, sizeof err) == GR_CFG_INVALID_VALUE);
    CHECK(gr_topic_config_check("retention.bytes", "-5", err, sizeof err) == GR_CFG_OK);
    CHECK(gr_topic_config_check("cleanup.policy", "compact,delete", err, sizeof err) == GR_CFG_OK);
    CHECK(gr_topic_config_check("cleanup.policy", "compact, delete", err, sizeof err) == GR_CFG_OK);
    CHECK(gr_topic_config_check("cleanup.policy", "shred", err, sizeof err) == GR_CFG_INVALID_VALUE);
    CHECK(strstr(err, "cleanup.policy") && strstr(err, "[compact, delete]"));
    CHECK(gr_topic_config_check("cleanup.policy", "", err, sizeof err) == GR_CFG_INVALID_VALUE);
    CHECK(gr_topic_config_check("message.timestamp.type", "LogAppendTime", err, sizeof err) == GR_CFG_OK);
    CHECK(gr_topic_config_check("message.timestamp.type", "Now", err, sizeof err) == GR_CFG_INVALID_VALUE);
    CHECK(gr_topic_config_check("compression.type", "zstd", err, sizeof err) == GR_CFG_OK);
    CHECK(gr_topic_config_check("compression.type", "brotli", err, sizeof err) == GR_CFG_INVALID_VALUE);
    CHECK(gr_topic_config_check("min.cleanable.dirty.ratio", "0.9", err, sizeof err) == GR_CFG_OK);
    CHECK(gr_topic_config_check("min.cleanable.dirty.ratio", "1.5", err, sizeof err) == GR_CFG_INVALID_VALUE);
    CHECK(gr_topic_config_check("unclean.leader.election.enable", "TRUE", err, sizeof err) == GR_CFG_OK);
    CHECK(gr_topic_config_check("unclean.leader.election.enable", "yes", err, sizeof err) == GR_CFG_INVALID_VALUE);
    CHECK(gr_topic_config_check("leader.replication.throttled.replicas", "*", err, sizeof err) == GR_CFG_OK);
    CHECK(gr_topic_config_check("leader.replication.throttled.replicas", "0:1,1:2", err, sizeof err) == GR_CFG_OK);
    CHECK(gr_topic_config_check("leader.replication.throttled.replicas", "0:x", err, sizeof err) ==
          GR_CFG_INVALID_VALUE);
    CHECK(gr_topic_config_check("max.compaction.lag.ms", "0", err, sizeof err) == GR_CFG_INVALID_VALUE);
    CHECK(gr_topic_config_check("retention.ms", NULL, err, sizeof err) == GR_CFG_INVALID_VALUE);
    CHECK(gr_topic_config_check("no.such.key", "1", err, sizeof err) == GR_CFG_UNKNOWN_KEY);
    CHECK(strcmp(err, "Unknown topic config name: no.such.key") == 0);
}

static void test_broker_checks(void) {
    char err[256];
    CHECK(gr_broker_key_dynamic("log.retention.ms", true));
    CHECK(gr_broker_key_dynamic("log.retention.hours", false));
    CHECK(gr_broker_key_dynamic("min.insync.replicas", false));
    CHECK(gr_broker_key_dynamic("unclean.leader.election.enable", false));
    CHECK(gr_broker_key_dynamic("message.max.bytes", true));
    CHECK(gr_broker_key_dynamic("leader.replication.throttled.rate", true));
    CHECK(!gr_broker_key_dynamic("log.message.format.version", true));
    CHECK(!gr_broker_key_dynamic("broker.id", true));
    CHECK(gr_broker_config_check("log.retention.hours", "2", true, err, sizeof err) == GR_CFG_OK);
    CHECK(gr_broker_config_check("log.retention.ms", "-7", true, err, sizeof err) == GR_CFG_INVALID_VALUE);
    CHECK(strstr(err, "log.retention.ms"));
    CHECK(gr_broker_config_check("log.segment.bytes", "10", false, err, sizeof err) == GR_CFG_INVALID_VALUE);
    CHECK(gr_broker_config_check("num.partitions", "3", true, err, sizeof err) == GR_CFG_NOT_DYNAMIC);
    CHECK(strcmp(err, "Cannot update these configs dynamically: Set(num.partitions)") == 0);
    CHECK(gr_broker_config_check("my.custom.key", "x", true, err, sizeof err) == GR_CFG_OK);
    CHECK(gr_broker_config_check("leader.replication.throttled.rate", "-1", true, err, sizeof err) ==
          GR_CFG_INVALID_VALUE);
    const char *syn[4];
    int n = gr_broker_key_synonyms("log.retention.ms", syn, 4);
    CHECK(n == 3 && strcmp(syn[0], "log.retention.ms") == 0 && strcmp(syn[2], "log.retention.hours") == 0);
    n = gr_broker_key_synonyms("log.retention.minutes", syn, 4);
    CHECK(n == 2 && strcmp(syn[0], "log.retention.minutes") == 0);
    n = gr_broker_key_synonyms("message.max.bytes", syn, 4);
    CHECK(n == 1);
}

static struct gr_props props(char **kv, int n) {
    static char *keys[8], *values[8];
    for (int i = 0; i < n; i++) keys[i] = kv[2 * i], values[i] = kv[2 * i + 1];
    return (struct gr_props){n, keys, values};
}

static void test_resolution(void) {
    char err[256];
    struct gr_config sc;
    gr_config_defaults(&sc);
    CHECK(gr_config_set(&sc, "log.retention.hours", "24", err, sizeof err) == 0);
    CHECK(gr_config_set(&sc, "min.insync.replicas", "2", err, sizeof err) == 0);
    CHECK(strcmp(gr_config_static_value(&sc, "log.retention.hours"), "24") == 0);
    CHECK(gr_config_static_value(&sc, "log.retention.ms") == NULL);

    struct gr_cfg_layers L = {.static_cfg = &sc};
    struct gr_cfg_entry e;
    /* nothing dynamic: static synonym wins, converted to ms */
    CHECK(gr_topic_config_resolve(&L, "retention.ms", &e));
    CHECK(e.source == GR_CFG_SRC_STATIC_BROKER && strcmp(gr_cfg_entry_value(&e), "86400000") == 0);
    CHECK(e.nsyn == 2 && strcmp(e.syn[0].name, "log.retention.hours") == 0 &&
          e.syn[0].source == GR_CFG_SRC_STATIC_BROKER);
    CHECK(strcmp(e.syn[1].name, "log.retention.hours") == 0 && e.syn[1].source == GR_CFG_SRC_DEFAULT &&
          strcmp(e.syn[1].value, "168") == 0);
    CHECK(gr_topic_config_resolve(&L, "max.message.bytes", &e));
    CHECK(e.source == GR_CFG_SRC_DEFAULT && strcmp(gr_cfg_entry_value(&e), "1048588") == 0);
    CHECK(gr_topic_config_resolve(&L, "leader.replication.throttled.replicas", &e));
    CHECK(e.source == GR_CFG_SRC_DEFAULT && e.nsyn == 0 && strcmp(gr_cfg_entry_value(&e), "") == 0);
    CHECK(!gr_topic_config_resolve(&L, "log.retention.ms", &e));

    /* layers in precedence order */
    char *dd[] = {"log.retention.minutes", "30", "min.insync.replicas", "3"};
    char *db[] = {"log.retention.ms", "5000"};
    char *tp[] = {"retention.ms", "777"};
    struct gr_props pdd = props(dd, 2);
    L.dyn_default = &pdd;
    CHECK(gr_topic_config_resolve(&L, "retention.ms", &e));
    CHECK(e.source == GR_CFG_SRC_DYNAMIC_DEFAULT_BROKER && strcmp(gr_cfg_entry_value(&e), "1800000") == 0);
    CHECK(gr_topic_config_resolve(&L, "min.insync.replicas", &e));
    CHECK(e.source == GR_CFG_SRC_DYNAMIC_DEFAULT_BROKER && strcmp(gr_cfg_entry_value(&e), "3") == 0);
    CHECK(e.nsyn == 3 && e.syn[1].source == GR_CFG_SRC_STATIC_BROKER && e.syn[2].source == GR_CFG_SRC_DEFAULT);
    static char *dbk[1], *dbv[1];
    dbk[0] = db[0], dbv[0] = db[1];
    struct gr_props pdb = {1, dbk, dbv};
    L.dyn_broker = &pdb;
    CHECK(gr_topic_config_resolve(&L, "retention.ms", &e));
    CHECK(e.source == GR_CFG_SRC_DYNAMIC_BROKER && strcmp(gr_cfg_entry_value(&e), "5000") == 0);
    static char *tk[1], *tv[1];
    tk[0] = tp[0], tv[0] = tp[1];
    struct gr_props ptp = {1, tk, tv};
    L.topic = &ptp;
    CHECK(gr_topic_config_resolve(&L, "retention.ms", &e));
    CHECK(e.source == GR_CFG_SRC_TOPIC && strcmp(gr_cfg_entry_value(&e), "777") == 0);
    CHECK(e.nsyn == 5 && e.syn[0].source == GR_CFG_SRC_TOPIC && e.syn[1].source == GR_CFG_SRC_DYNAMIC_BROKER &&
          e.syn[2].source == GR_CFG_SRC_DYNAMIC_DEFAULT_BROKER && e.syn[3].source == GR_CFG_SRC_STATIC_BROKER &&
          e.syn[4].source == GR_CFG_SRC_DEFAULT);

    /* broker entries: per broker and the <default> view */
    CHECK(gr_broker_config_resolve(&L, "log.retention.ms", true, &e));
    CHECK(e.source == GR_CFG_SRC_DYNAMIC_BROKER && !e.read_only && strcmp(gr_cfg_entry_value(&e), "5000") == 0);
    CHECK(gr_broker_config_resolve(&L, "broker.id", true, &e) && e.read_only && e.source == GR_CFG_SRC_DEFAULT);
    CHECK(gr_broker_config_resolve(&L, "min.insync.replicas", false, &e));
    CHECK(e.source == GR_CFG_SRC_DYNAMIC_DEFAULT_BROKER && e.nsyn == 1);
    CHECK(!gr_broker_config_resolve(&L, "log.segment.bytes", false, &e));

    /* effective log settings */
    struct gr_log_config s;
    gr_log_config_resolve(&L, &s);
    CHECK(s.retention_ms == 777 && s.min_insync_replicas == 3 && s.lc.segment_bytes == 1073741824);
    CHECK(!s.unclean_leader_election_enable && !s.lc.log_append_time && s.lc.cleanup_delete && !s.lc.cleanup_compact);
    char *t2[] = {"cleanup.policy", "compact", "message.timestamp.type", "LogAppendTime"};
    struct gr_props pt2 = props(t2, 2);
    L.topic = &pt2;
    gr_log_config_resolve(&L, &s);
    CHECK(s.lc.cleanup_compact && !s.lc.cleanup_delete && s.lc.log_append_time && s.retention_ms == 5000);
    /* issue 27: flush.messages=0 flushes after every append (Kafka's unflushed >= 0), not never */
    char *t3[] = {"flush.messages", "0"};
    struct gr_props pt3 = props(t3, 1);
    L.topic = &pt3;
    gr_log_config_resolve(&L, &s);
    CHECK(s.lc.flush_messages == 1);
    /* issue 23 item 15: every broker-level log setting reaches the log (Kafka's DynamicLogConfig):
     * dynamic default < per broker < topic */
    char *dd2[] = {"log.cleanup.policy", "compact", "log.message.timestamp.type", "LogAppendTime",
                   "log.cleaner.delete.retention.ms", "1234", "log.cleaner.min.compaction.lag.ms", "55",
                   "log.cleaner.max.compaction.lag.ms", "66", "log.cleaner.min.cleanable.ratio", "0.25",
                   "log.index.size.max.bytes", "4096", "compression.type", "zstd", "log.segment.bytes", "20000",
                   "log.roll.jitter.ms", "77", "log.message.timestamp.difference.max.ms", "88",
                   "log.segment.delete.delay.ms", "99"};
    char *k2[12], *v2[12];
    for (int i = 0; i < 12; i++) k2[i] = dd2[2 * i], v2[i] = dd2[2 * i + 1];
    struct gr_props pdd2 = {12, k2, v2};
    char *db2k[] = {"compression.type"}, *db2v[] = {"gzip"};
    struct gr_props pdb2 = {1, db2k, db2v};
    char *t4k[] = {"segment.bytes"}, *t4v[] = {"30000"};
    struct gr_props pt4 = {1, t4k, t4v};
    struct gr_cfg_layers L2 = {.topic = &pt4, .dyn_broker = &pdb2, .dyn_default = &pdd2, .static_cfg = &sc};
    gr_log_config_resolve(&L2, &s);
    CHECK(s.lc.cleanup_compact && !s.lc.cleanup_delete && s.lc.log_append_time);
    CHECK(s.lc.delete_retention_ms == 1234 && s.lc.min_compaction_lag_ms == 55 && s.lc.max_compaction_lag_ms == 66);
    CHECK(s.lc.min_cleanable_dirty_ratio == 0.25 && s.lc.index_max_bytes == 4096);
    CHECK(s.lc.compression_type == GR_CODEC_GZIP && s.lc.segment_bytes == 30000 && s.lc.roll_jitter_ms == 77);
    CHECK(s.lc.timestamp_difference_max_ms == 88 && s.lc.file_delete_delay_ms == 99);
    gr_config_release(&sc);
}

static void test_static_props(void) {
    char err[256];
    struct gr_config c;
    gr_config_defaults(&c);
    CHECK(c.n_static == 0);
    CHECK(gr_config_set(&c, "log.cleanup.policy", "compact", err, sizeof err) == 0);
    CHECK(gr_config_set(&c, "log.cleanup.policy", "bogus", err, sizeof err) != 0 && strstr(err, "log.cleanup.policy"));
    CHECK(gr_config_set(&c, "log.message.timestamp.type", "Later", err, sizeof err) != 0);
    CHECK(gr_config_set(&c, "some.unknown", "v", err, sizeof err) == 0);
    CHECK(strcmp(gr_config_static_value(&c, "some.unknown"), "v") == 0);
    CHECK(strcmp(c.log_cleanup_policy, "compact") == 0);
    CHECK(c.quota_window_num == 11 && c.quota_window_size_seconds == 1);
    CHECK(gr_config_key_type("log.cleanup.policy") == GR_CONFIG_TYPE_LIST);
    CHECK(gr_config_key_type("num.io.threads") == GR_CONFIG_TYPE_INT);
    CHECK(gr_config_check("num.io.threads", "0", err, sizeof err) != 0 && strstr(err, "num.io.threads"));
    gr_config_release(&c);
}

int main(void) {
    gr_log_set_level(GR_LOG_ERROR);
    test_topic_checks();
    test_broker_checks();
    test_resolution();
    test_static_props();
    if (test_failures) {
        fprintf(stderr, "test_config_model: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_config_model: ok\n");
    return 0;
}
