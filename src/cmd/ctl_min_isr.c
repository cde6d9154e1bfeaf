/* min.insync.replicas of topics for gregorctl topics describe --under-min-isr-partitions /
 * --at-min-isr-partitions (ctl_topics_admin.c), as kafka-topics.sh gets it: DescribeConfigs
 * (topic resources, key min.insync.replicas) when the broker serves it (ApiVersions); otherwise,
 * with --zookeeper, the topic's override in /config/topics/<T> or Kafka's default 1. */
#include "cmd/ctl_topics_admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/ctl.h"
#include "cmd/ctl_kafka.h"
#include "common/kerr.h"
#include "common/util.h"
#include "zk/backend.h"
#include "zk/kzk.h"

#define KEY "min.insync.replicas"

static bool serves_describe_configs(struct ctl_kafka *k, struct gr_arena *a) {
    struct ApiVersionsRequest rq;
    gr_proto_init_struct(&gr_desc_ApiVersionsRequest, &rq);
    struct ApiVersionsResponse *r = ctl_kafka_call(k, GR_API_API_VERSIONS, 0, &rq, a);
    for (int32_t i = 0; r && i < r->ApiKeysCount; i++)
        if (r->ApiKeys[i].ApiKey == GR_API_DESCRIBE_CONFIGS) return true;
    return false;
}

static int from_describe_configs(struct ctl_kafka *k, const char *const *topics, int n, int32_t *out,
                                 struct gr_arena *a) {
    struct DescribeConfigsRequest rq;
    gr_proto_init_struct(&gr_desc_DescribeConfigsRequest, &rq);
    rq.ResourcesCount = n;
    rq.Resources = gr_arena_alloc(a, (size_t)(n + 1) * sizeof *rq.Resources);
    static char *key = KEY;
    for (int i = 0; i < n; i++) {
        gr_proto_init_struct(&gr_desc_DescribeConfigsRequest_DescribeConfigsResource, &rq.Resources[i]);
        rq.Resources[i].ResourceType = 2; /* TOPIC */
        rq.Resources[i].ResourceName = (char *)topics[i];
        rq.Resources[i].ConfigurationKeysCount = 1;
        rq.Resources[i].ConfigurationKeys = &key;
    }
    struct DescribeConfigsResponse *r = ctl_kafka_call(k, GR_API_DESCRIBE_CONFIGS, 1, &rq, a);
    if (!r) return 1;
    for (int32_t i = 0; i < r->ResultsCount; i++) {
        const struct DescribeConfigsResponse_DescribeConfigsResult *res = &r->Results[i];
        for (int t = 0; t < n; t++) {
            if (!res->ResourceName || strcmp(res->ResourceName, topics[t]) != 0) continue;
            for (int32_t c = 0; res->ErrorCode == GR_KERR_NONE && c < res->ConfigsCount; c++)
                if (res->Configs[c].Name && strcmp(res->Configs[c].Name, KEY) == 0 && res->Configs[c].Value)
                    out[t] = atoi(res->Configs[c].Value);
        }
    }
    return 0;
}

static int from_zookeeper(const char *connect, int timeout_ms, const char *const *topics, int n, int32_t *out) {
    struct gr_zk_real_config zc = {
        .connect = connect, .session_timeout_ms = timeout_ms, .connection_timeout_ms = timeout_ms};
    struct gr_zk_backend *b = NULL;
    int zrc = gr_zk_real_open(&zc, &b);
    if (zrc != GR_ZOK) {
        fprintf(stderr, "gregorctl: cannot connect to ZooKeeper at %s: %s\n", connect, gr_zrc_name(zrc));
        return 1;
    }
    for (int t = 0; t < n; t++) {
        char path[512];
        char *data = NULL;
        int len = 0;
        out[t] = 1; /* Kafka's default */
        snprintf(path, sizeof path, "/config/topics/%s", topics[t]);
        if (gr_zkb_get(b, path, false, &data, &len, NULL) != GR_ZOK) continue;
        struct gr_kzk_config cfg;
        if (data && gr_kzk_config_decode(data, (size_t)len, &cfg) == 0) {
            const char *v = gr_kzk_config_get(&cfg, KEY);
            if (v) out[t] = atoi(v);
            gr_kzk_config_release(&cfg);
        }
        free(data);
    }
    gr_zkb_destroy(b);
    return 0;
}

int ctl_topics_min_isr(struct ctl_kafka *k, const struct ctl_opts *o, const char *const *topics, int n, int32_t *out) {
    for (int i = 0; i < n; i++) out[i] = -1;
    struct gr_arena a;
    gr_arena_init(&a);
    int rc;
    if (serves_describe_configs(k, &a)) {
        rc = from_describe_configs(k, topics, n, out, &a);
    } else if (o->zookeeper) {
        rc = from_zookeeper(o->zookeeper, o->timeout_ms > 0 ? o->timeout_ms : 10000, topics, n, out);
    } else {
        fprintf(stderr, "gregorctl topics: this broker does not serve DescribeConfigs; give --zookeeper to read "
                        "min.insync.replicas from ZooKeeper\n");
        rc = 2;
    }
    gr_arena_free(&a);
    return rc;
}
