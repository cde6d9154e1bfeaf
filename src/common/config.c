/* server.properties parsing: one table declares every key (name, type, default, bounds, field). */
#include "common/config.h"
#include "common/metadata_version.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/util.h"

/* T_PASSWORD: a string Kafka types PASSWORD (never described, logged or echoed). */
enum cfg_type { T_INT, T_LONG, T_DOUBLE, T_BOOL, T_STRING, T_PASSWORD, T_LIST, T_LISTENERS, T_ADV_LISTENERS, T_DIRS };

struct cfg_key {
    const char *name;
    enum cfg_type type;
    size_t off;         /* offset of the field in struct gr_config */
    const char *dflt;   /* Kafka's default, as text; NULL = unset */
    int64_t min, max;   /* bounds for numbers */
};

#define F(field) offsetof(struct gr_config, field)
#define NOLIM INT64_MIN, INT64_MAX
#define I32 INT32_MIN, INT32_MAX

/* Keys Gregor understands, with Kafka 2.7's defaults (core/.../server/KafkaConfig.scala). */
static const struct cfg_key keys[] = {
    {"broker.id", T_INT, F(broker_id), "-1", I32}, /* range: gr_config_finish, as Kafka */
    {"broker.rack", T_STRING, F(broker_rack), NULL, 0, 0},
    {"replica.selector.class", T_STRING, F(replica_selector_class), NULL, 0, 0},
    {"max.incremental.fetch.session.cache.slots", T_INT, F(max_incremental_fetch_session_cache_slots), "1000", 0,
     INT32_MAX},
    {"zookeeper.connect", T_STRING, F(zookeeper_connect), NULL, 0, 0},
    {"zookeeper.session.timeout.ms", T_INT, F(zookeeper_session_timeout_ms), "18000", 1, INT32_MAX},
    {"zookeeper.connection.timeout.ms", T_INT, F(zookeeper_connection_timeout_ms), "-1", -1, INT32_MAX},
    {"zookeeper.max.in.flight.requests", T_INT, F(zookeeper_max_in_flight_requests), "10", 1, INT32_MAX},
    {"listeners", T_LISTENERS, F(listeners), "PLAINTEXT://:9092", 0, 0},
    {"advertised.listeners", T_ADV_LISTENERS, F(advertised_listeners), NULL, 0, 0},
    {"inter.broker.listener.name", T_STRING, F(inter_broker_listener_name), NULL, 0, 0},
    {"control.plane.listener.name", T_STRING, F(control_plane_listener_name), NULL, 0, 0},
    {"listener.security.protocol.map", T_STRING, F(listener_security_protocol_map), NULL, 0, 0},
    {"security.inter.broker.protocol", T_STRING, F(security_inter_broker_protocol), NULL, 0, 0},
    {"connection.failed.authentication.delay.ms", T_INT, F(connection_failed_authentication_delay_ms), "100", 0,
     INT32_MAX},
    {"socket.request.max.bytes", T_LONG, F(socket_request_max_bytes), "104857600", 1, INT32_MAX},
    {"connections.max.idle.ms", T_LONG, F(connections_max_idle_ms), "600000", NOLIM},
    {"num.network.threads", T_INT, F(num_network_threads), "3", 1, 256},
    {"num.io.threads", T_INT, F(num_io_threads), "8", 1, 256},
    /* limits (docs/SECURITY.md "Hostile input: limits"); Kafka's dynamic updates are not supported */
    {"queued.max.requests", T_INT, F(queued_max_requests), "500", 1, INT32_MAX},
    {"max.connections", T_INT, F(max_connections), "2147483647", 0, INT32_MAX},
    {"max.connections.per.ip", T_INT, F(max_connections_per_ip), "2147483647", 0, INT32_MAX},
    {"max.connections.per.ip.overrides", T_STRING, F(max_connections_per_ip_overrides), NULL, 0, 0},
    {"max.connection.creation.rate", T_INT, F(max_connection_creation_rate), "2147483647", 0, INT32_MAX},
    {"log.dirs", T_DIRS, F(log_dirs), NULL, 0, 0},
    {"log.dir", T_DIRS, F(log_dirs), "/tmp/kafka-logs", 0, 0},
    {"log.segment.bytes", T_LONG, F(log_segment_bytes), "1073741824", 14, INT32_MAX},
    {"log.roll.ms", T_LONG, F(log_roll_ms), "604800000", 1, INT64_MAX},
    {"log.roll.hours", T_LONG, F(log_roll_ms), NULL, 1, INT64_MAX},
    {"log.index.interval.bytes", T_INT, F(log_index_interval_bytes), "4096", 0, INT32_MAX},
    {"log.index.size.max.bytes", T_LONG, F(log_index_size_max_bytes), "10485760", 4, INT32_MAX},
    {"log.retention.ms", T_LONG, F(log_retention_ms), "604800000", -1, INT64_MAX},
    {"log.retention.minutes", T_LONG, F(log_retention_ms), NULL, -1, INT64_MAX},
    {"log.retention.hours", T_LONG, F(log_retention_ms), NULL, -1, INT64_MAX},
    {"log.retention.bytes", T_LONG, F(log_retention_bytes), "-1", NOLIM},
    {"log.retention.check.interval.ms", T_LONG, F(log_retention_check_interval_ms), "300000", 1, INT64_MAX},
    {"log.flush.interval.messages", T_LONG, F(log_flush_interval_messages), "9223372036854775807", 1, INT64_MAX},
    {"log.flush.interval.ms", T_LONG, F(log_flush_interval_ms), "9223372036854775807", 0, INT64_MAX},
    {"log.flush.scheduler.interval.ms", T_LONG, F(log_flush_scheduler_interval_ms), "9223372036854775807", 0,
     INT64_MAX},
    {"log.flush.offset.checkpoint.interval.ms", T_LONG, F(log_flush_offset_checkpoint_interval_ms), "60000", 0,
     INT32_MAX},
    {"message.max.bytes", T_INT, F(message_max_bytes), "1048588", 0, INT32_MAX},
    {"log.cleanup.policy", T_LIST, F(log_cleanup_policy), "delete", 0, 0},
    {"log.message.timestamp.type", T_STRING, F(log_message_timestamp_type), "CreateTime", 0, 0},
    {"compression.type", T_STRING, F(compression_type), "producer", 0, 0},
    {"leader.replication.throttled.rate", T_LONG, F(leader_replication_throttled_rate), "9223372036854775807", 0,
     INT64_MAX},
    {"quota.window.num", T_INT, F(quota_window_num), "11", 1, 1000},
    {"quota.window.size.seconds", T_INT, F(quota_window_size_seconds), "1", 1, 3600},
    {"controller.quota.window.num", T_INT, F(controller_quota_window_num), "11", 1, 1000},
    {"controller.quota.window.size.seconds", T_INT, F(controller_quota_window_size_seconds), "1", 1, 3600},
    {"follower.replication.throttled.rate", T_LONG, F(follower_replication_throttled_rate), "9223372036854775807", 0,
     INT64_MAX},
    {"log.flush.start.offset.checkpoint.interval.ms", T_LONG, F(log_flush_start_offset_checkpoint_interval_ms), "60000",
     0, INT32_MAX},
    {"log.message.timestamp.difference.max.ms", T_LONG, F(log_message_timestamp_difference_max_ms),
     "9223372036854775807", 0, INT64_MAX},
    /* log cleaner (compaction); doubles have no bounds check beyond >= min */
    {"log.cleaner.enable", T_BOOL, F(log_cleaner_enable), "true", 0, 0},
    {"log.cleaner.threads", T_INT, F(log_cleaner_threads), "1", 0, 64},
    {"log.cleaner.dedupe.buffer.size", T_LONG, F(log_cleaner_dedupe_buffer_size), "134217728", 0, INT64_MAX},
    {"log.cleaner.io.buffer.size", T_INT, F(log_cleaner_io_buffer_size), "524288", 0, INT32_MAX},
    {"log.cleaner.io.buffer.load.factor", T_DOUBLE, F(log_cleaner_io_buffer_load_factor), "0.9", 0, 1},
    {"log.cleaner.io.max.bytes.per.second", T_DOUBLE, F(log_cleaner_io_max_bytes_per_second), "1.7976931348623157E308",
     0, 0},
    {"log.cleaner.backoff.ms", T_LONG, F(log_cleaner_backoff_ms), "15000", 0, INT64_MAX},
    {"log.cleaner.min.cleanable.ratio", T_DOUBLE, F(log_cleaner_min_cleanable_ratio), "0.5", 0, 1},
    {"log.cleaner.delete.retention.ms", T_LONG, F(log_cleaner_delete_retention_ms), "86400000", 0, INT64_MAX},
    {"log.cleaner.min.compaction.lag.ms", T_LONG, F(log_cleaner_min_compaction_lag_ms), "0", 0, INT64_MAX},
    {"log.cleaner.max.compaction.lag.ms", T_LONG, F(log_cleaner_max_compaction_lag_ms), "9223372036854775807", 1,
     INT64_MAX},
    /* Gregor-only (no Kafka equivalent): bound on open active-segment files, 0 = automatic. */
    {"gregor.max.open.log.files", T_INT, F(gregor_max_open_log_files), "0", 0, INT32_MAX},
    /* Gregor-only: http://HOST:PORT of the Prometheus endpoint (GET /metrics); unset = off. */
    {"gregor.metrics.listener", T_STRING, F(gregor_metrics_listener), NULL, 0, 0},
    {"auto.create.topics.enable", T_BOOL, F(auto_create_topics_enable), "true", 0, 0},
    {"num.partitions", T_INT, F(num_partitions), "1", 1, INT32_MAX},
    {"default.replication.factor", T_INT, F(default_replication_factor), "1", 1, INT32_MAX},
    {"min.insync.replicas", T_INT, F(min_insync_replicas), "1", 1, INT32_MAX},
    {"delete.topic.enable", T_BOOL, F(delete_topic_enable), "true", 0, 0},
    {"unclean.leader.election.enable", T_BOOL, F(unclean_leader_election_enable), "false", 0, 0},
    {"offsets.topic.replication.factor", T_INT, F(offsets_topic_replication_factor), "3", 1, INT16_MAX},
    {"offsets.topic.num.partitions", T_INT, F(offsets_topic_num_partitions), "50", 1, INT32_MAX},
    {"offsets.topic.segment.bytes", T_INT, F(offsets_topic_segment_bytes), "104857600", 1, INT32_MAX},
    {"replica.lag.time.max.ms", T_LONG, F(replica_lag_time_max_ms), "30000", 1, INT64_MAX},
    {"fetch.max.bytes", T_INT, F(fetch_max_bytes), "57671680", 1024, INT32_MAX},
    {"replica.fetch.max.bytes", T_INT, F(replica_fetch_max_bytes), "1048576", 0, INT32_MAX},
    {"replica.fetch.wait.max.ms", T_INT, F(replica_fetch_wait_max_ms), "500", 0, INT32_MAX},
    {"replica.fetch.min.bytes", T_INT, F(replica_fetch_min_bytes), "1", 0, INT32_MAX},
    {"replica.fetch.response.max.bytes", T_INT, F(replica_fetch_response_max_bytes), "10485760", 0, INT32_MAX},
    {"replica.fetch.backoff.ms", T_INT, F(replica_fetch_backoff_ms), "1000", 0, INT32_MAX},
    {"num.replica.fetchers", T_INT, F(num_replica_fetchers), "1", 1, 64},
    {"replica.socket.timeout.ms", T_INT, F(replica_socket_timeout_ms), "30000", 1, INT32_MAX},
    {"replica.high.watermark.checkpoint.interval.ms", T_LONG, F(replica_high_watermark_checkpoint_interval_ms), "5000",
     1, INT64_MAX},
    {"controller.socket.timeout.ms", T_INT, F(controller_socket_timeout_ms), "30000", 1, INT32_MAX},
    {"auto.leader.rebalance.enable", T_BOOL, F(auto_leader_rebalance_enable), "true", 0, 0},
    /* Gregor's (no Kafka key): the warm standby controller, docs/ARCHITECTURE.md */
    {"gregor.controller.standby.enable", T_BOOL, F(controller_standby_enable), "true", 0, 0},
    {"gregor.controller.standby.refresh.ms", T_LONG, F(controller_standby_refresh_ms), "30000", 1000, INT64_MAX},
    {"leader.imbalance.per.broker.percentage", T_INT, F(leader_imbalance_per_broker_percentage), "10", 0, 100},
    {"leader.imbalance.check.interval.seconds", T_LONG, F(leader_imbalance_check_interval_seconds), "300", 1,
     INT64_MAX},
    {"controlled.shutdown.enable", T_BOOL, F(controlled_shutdown_enable), "true", 0, 0},
    {"controlled.shutdown.max.retries", T_INT, F(controlled_shutdown_max_retries), "3", 0, INT32_MAX},
    {"controlled.shutdown.retry.backoff.ms", T_LONG, F(controlled_shutdown_retry_backoff_ms), "5000", 0, INT64_MAX},
    {"inter.broker.protocol.version", T_STRING, F(inter_broker_protocol_version), "3.9-IV0", 0, 0},
    {"request.timeout.ms", T_INT, F(request_timeout_ms), "30000", 0, INT32_MAX},
    {"broker.id.generation.enable", T_BOOL, F(broker_id_generation_enable), "true", 0, 0},
    {"reserved.broker.max.id", T_INT, F(reserved_broker_max_id), "1000", 0, INT32_MAX},
    {"group.initial.rebalance.delay.ms", T_INT, F(group_initial_rebalance_delay_ms), "3000", 0, INT32_MAX},
    {"group.min.session.timeout.ms", T_INT, F(group_min_session_timeout_ms), "6000", 0, INT32_MAX},
    {"group.max.session.timeout.ms", T_INT, F(group_max_session_timeout_ms), "1800000", 0, INT32_MAX},
    {"group.max.size", T_INT, F(group_max_size), "2147483647", 1, INT32_MAX},
    {"offset.metadata.max.bytes", T_INT, F(offset_metadata_max_bytes), "4096", INT32_MIN, INT32_MAX},
    {"offsets.commit.timeout.ms", T_INT, F(offsets_commit_timeout_ms), "5000", 1, INT32_MAX},
    {"offsets.retention.minutes", T_INT, F(offsets_retention_minutes), "10080", 1, INT32_MAX},
    {"offsets.retention.check.interval.ms", T_LONG, F(offsets_retention_check_interval_ms), "600000", 1, INT64_MAX},
    /* Kafka 2.7 uses it for producer-state expiry too (producer.id.expiration.ms came in 3.4). */
    {"transactional.id.expiration.ms", T_INT, F(transactional_id_expiration_ms), "604800000", 1, INT32_MAX},
    {"authorizer.class.name", T_STRING, F(authorizer_class_name), NULL, 0, 0},
    {"super.users", T_STRING, F(super_users), NULL, 0, 0},
    {"allow.everyone.if.no.acl.found", T_BOOL, F(allow_everyone_if_no_acl_found), "false", 0, 0},
    {"zookeeper.set.acl", T_BOOL, F(zookeeper_set_acl), "false", 0, 0},
    /* Gregor-only: identity for ZooKeeper's digest scheme, "user:password" (Kafka uses a JAAS
     * Client section for ZooKeeper SASL instead; see docs/SECURITY.md). */
    {"gregor.zookeeper.auth.digest", T_PASSWORD, F(gregor_zookeeper_auth_digest), NULL, 0, 0},
    /* Gregor-only, for tests: a client.id of the form "User:<name>" becomes the principal. */
    {"gregor.test.principal.by.client.id", T_BOOL, F(gregor_test_principal_by_client_id), "false", 0, 0},
    {"transaction.state.log.num.partitions", T_INT, F(transaction_state_log_num_partitions), "50", 1, INT32_MAX},
    {"transaction.state.log.replication.factor", T_INT, F(transaction_state_log_replication_factor), "3", 1, INT16_MAX},
    {"transaction.state.log.min.isr", T_INT, F(transaction_state_log_min_isr), "2", 1, INT32_MAX},
    {"transaction.state.log.segment.bytes", T_INT, F(transaction_state_log_segment_bytes), "104857600", 1, INT32_MAX},
    {"transaction.max.timeout.ms", T_INT, F(transaction_max_timeout_ms), "900000", 1, INT32_MAX},
    {"transaction.abort.timed.out.transaction.cleanup.interval.ms", T_INT,
     F(transaction_abort_timed_out_transaction_cleanup_interval_ms), "10000", 1, INT32_MAX},
    {"transaction.remove.expired.transaction.cleanup.interval.ms", T_INT,
     F(transaction_remove_expired_transaction_cleanup_interval_ms), "3600000", 1, INT32_MAX},
    {"transaction.partition.verification.enable", T_BOOL, F(transaction_partition_verification_enable), "true", 0, 0},
};

/* Kafka keys we accept silently (no warning) although Gregor does not act on them yet. */
static const char *const known_ignored[] = {
    "num.recovery.threads.per.data.dir",     "socket.send.buffer.bytes",   "socket.receive.buffer.bytes",
    "group.coordinator.rebalance.protocols", "log.message.format.version",
};

static const struct cfg_key *find_key(const char *name) {
    for (size_t i = 0; i < GR_ARRAY_LEN(keys); i++)
        if (strcmp(keys[i].name, name) == 0) return &keys[i];
    return NULL;
}

static int fail(char *err, size_t errlen, const char *key, const char *value, const char *why) {
    if (gr_config_key_type(key) == GR_CONFIG_TYPE_PASSWORD) value = "[hidden]"; /* Kafka's Password.toString */
    snprintf(err, errlen, "Invalid value %s for configuration %s: %s", value, key, why);
    return GR_ECONFIG;
}

static int parse_i64(const char *s, int64_t *out) {
    if (!*s) return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

int gr_config_parse_listeners(const char *s, struct gr_listener *out, int max, char *err, size_t errlen) {
    int n = 0;
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[512];
        if (len >= sizeof item) {
            snprintf(err, errlen, "listener too long in '%s'", s);
            return GR_ECONFIG;
        }
        memcpy(item, p, len);
        item[len] = 0;
        while (len && item[len - 1] == ' ') item[--len] = 0;
        p += end ? len + 1 : strlen(p);
        if (n >= max) {
            snprintf(err, errlen, "too many listeners in '%s' (at most %d)", s, max);
            return GR_ECONFIG;
        }
        char *sep = strstr(item, "://");
        if (!sep || sep == item) {
            snprintf(err, errlen, "listener '%s' must look like NAME://host:port", item);
            return GR_ECONFIG;
        }
        *sep = 0;
        char *hostport = sep + 3;
        char *colon = strrchr(hostport, ':');
        if (!colon) {
            snprintf(err, errlen, "listener '%s://%s' has no port", item, hostport);
            return GR_ECONFIG;
        }
        *colon = 0;
        int64_t port;
        if (parse_i64(colon + 1, &port) || port < 0 || port > 65535) {
            snprintf(err, errlen, "listener '%s' has an invalid port '%s'", item, colon + 1);
            return GR_ECONFIG;
        }
        char *host = hostport;
        if (host[0] == '[') { /* [ipv6] */
            host++;
            char *rb = strchr(host, ']');
            if (rb) *rb = 0;
        }
        for (int i = 0; i < n; i++)
            if (strcasecmp(out[i].name, item) == 0) {
                snprintf(err, errlen, "listener name %s appears twice", item);
                return GR_ECONFIG;
            }
        if (strlen(item) >= sizeof out[n].name || strlen(host) >= sizeof out[n].host) {
            snprintf(err, errlen, "listener name or host too long in '%s'", s);
            return GR_ECONFIG;
        }
        memcpy(out[n].name, item, strlen(item) + 1);
        for (char *c = out[n].name; *c; c++) *c = (char)toupper((unsigned char)*c);
        memcpy(out[n].host, host, strlen(host) + 1);
        out[n].port = (int)port;
        n++;
    }
    if (n == 0) {
        snprintf(err, errlen, "no listener in '%s'", s);
        return GR_ECONFIG;
    }
    return n;
}

static int set_dirs(struct gr_config *cfg, const char *value, char *err, size_t errlen, const char *key) {
    for (int i = 0; i < cfg->num_log_dirs; i++) free(cfg->log_dirs[i]);
    cfg->num_log_dirs = 0;
    const char *p = value;
    while (*p) {
        while (*p == ',' || *p == ' ') p++;
        if (!*p) break;
        size_t len = strcspn(p, ",");
        while (len && p[len - 1] == ' ') len--;
        if (cfg->num_log_dirs >= GR_MAX_LOG_DIRS) return fail(err, errlen, key, value, "too many directories");
        cfg->log_dirs[cfg->num_log_dirs++] = gr_strndup(p, len);
        p += strcspn(p, ",");
    }
    if (cfg->num_log_dirs == 0) return fail(err, errlen, key, value, "no directory given");
    return 0;
}

/* Kafka's ValidString / ValidList for the string keys that have one; NULL when value is fine. */
static char *check_enum(const char *key, const char *value) {
    if (strcmp(key, "log.message.timestamp.type") == 0 && strcmp(value, "CreateTime") != 0 &&
        strcmp(value, "LogAppendTime") != 0)
        return "String must be one of: CreateTime, LogAppendTime";
    if (strcmp(key, "compression.type") == 0) {
        static const char *const ok[] = {"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"};
        for (size_t i = 0; i < GR_ARRAY_LEN(ok); i++)
            if (strcmp(ok[i], value) == 0) return NULL;
        return "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer";
    }
    if (strcmp(key, "log.cleanup.policy") == 0) {
        size_t n = 0;
        for (const char *p = value; *p;) {
            size_t len = strcspn(p, ",");
            const char *t = p;
            while (len && *t == ' ') t++, len--;
            while (len && t[len - 1] == ' ') len--;
            if (!((len == 6 && strncmp(t, "delete", 6) == 0) || (len == 7 && strncmp(t, "compact", 7) == 0)))
                return "Invalid value in list, must be one of: [compact, delete]";
            n++;
            p += strcspn(p, ",");
            if (*p) p++;
        }
        if (n == 0) return "Invalid value in list, must be one of: [compact, delete]";
    }
    return NULL;
}

static int apply(struct gr_config *cfg, const struct cfg_key *k, const char *value, char *err, size_t errlen) {
    char *field = (char *)cfg + k->off;
    switch (k->type) {
    case T_INT:
    case T_LONG: {
        int64_t v;
        if (parse_i64(value, &v)) return fail(err, errlen, k->name, value, "not a number");
        /* unit-scaled aliases */
        if (strcmp(k->name, "log.roll.hours") == 0 || strcmp(k->name, "log.retention.hours") == 0)
            v = v < 0 ? v : v * 3600000;
        else if (strcmp(k->name, "log.retention.minutes") == 0)
            v = v < 0 ? v : v * 60000;
        if (v < k->min || v > k->max) {
            char why[96];
            snprintf(why, sizeof why, "out of range [%lld, %lld]", (long long)k->min, (long long)k->max);
            return fail(err, errlen, k->name, value, why);
        }
        if (k->type == T_INT) *(int32_t *)field = (int32_t)v;
        else *(int64_t *)field = v;
        return 0;
    }
    case T_DOUBLE: {
        char *end;
        errno = 0;
        double v = strtod(value, &end);
        if (errno == ERANGE || end == value || *end) return fail(err, errlen, k->name, value, "not a number");
        if (v < (double)k->min || (k->max > k->min && v > (double)k->max)) {
            char why[96];
            snprintf(why, sizeof why, "out of range [%lld, %lld]", (long long)k->min, (long long)k->max);
            return fail(err, errlen, k->name, value, why);
        }
        *(double *)field = v;
        return 0;
    }
    case T_BOOL:
        if (strcasecmp(value, "true") == 0) *(bool *)field = true;
        else if (strcasecmp(value, "false") == 0) *(bool *)field = false;
        else return fail(err, errlen, k->name, value, "expected true or false");
        return 0;
    case T_STRING:
    case T_PASSWORD:
    case T_LIST: {
        char *why = check_enum(k->name, value);
        if (why) return fail(err, errlen, k->name, value, why);
        char **s = (char **)field;
        free(*s);
        *s = value[0] ? gr_strdup(value) : NULL;
        return 0;
    }
    case T_LISTENERS:
    case T_ADV_LISTENERS: {
        struct gr_listener tmp[GR_MAX_LISTENERS];
        char why[256];
        int n = gr_config_parse_listeners(value, tmp, GR_MAX_LISTENERS, why, sizeof why);
        if (n < 0) return fail(err, errlen, k->name, value, why);
        if (k->type == T_LISTENERS) {
            memcpy(cfg->listeners, tmp, sizeof tmp);
            cfg->num_listeners = n;
        } else {
            memcpy(cfg->advertised_listeners, tmp, sizeof tmp);
            cfg->num_advertised_listeners = n;
        }
        return 0;
    }
    case T_DIRS:
        return set_dirs(cfg, value, err, errlen, k->name);
    }
    return 0;
}

void gr_config_defaults(struct gr_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    char err[256];
    for (size_t i = 0; i < GR_ARRAY_LEN(keys); i++)
        if (keys[i].dflt) (void)apply(cfg, &keys[i], keys[i].dflt, err, sizeof err);
}

static bool is_security_key(const char *key) {
    return strncmp(key, "ssl.", 4) == 0 || strncmp(key, "sasl.", 5) == 0 ||
           strncmp(key, "listener.name.", 14) == 0 || strcmp(key, "principal.builder.class") == 0;
}

static void set_security_prop(struct gr_config *cfg, const char *key, const char *value) {
    for (int i = 0; i < cfg->num_security_props; i++)
        if (strcmp(cfg->security_keys[i], key) == 0) {
            free(cfg->security_values[i]);
            cfg->security_values[i] = gr_strdup(value);
            return;
        }
    int n = cfg->num_security_props + 1;
    cfg->security_keys = gr_realloc(cfg->security_keys, (size_t)n * sizeof(char *));
    cfg->security_values = gr_realloc(cfg->security_values, (size_t)n * sizeof(char *));
    cfg->security_keys[n - 1] = gr_strdup(key);
    cfg->security_values[n - 1] = gr_strdup(value);
    cfg->num_security_props = n;
}

/* Remembers key=value as given (server.properties or an override), replacing an earlier one. */
static void record_static(struct gr_config *cfg, const char *key, const char *value) {
    for (int i = 0; i < cfg->n_static; i++)
        if (strcmp(cfg->static_keys[i], key) == 0) {
            free(cfg->static_values[i]);
            cfg->static_values[i] = gr_strdup(value);
            return;
        }
    if (cfg->n_static >= GR_MAX_STATIC_PROPS) return;
    cfg->static_keys[cfg->n_static] = gr_strdup(key);
    cfg->static_values[cfg->n_static++] = gr_strdup(value);
}

int gr_config_set(struct gr_config *cfg, const char *key, const char *value, char *err, size_t errlen) {
    const struct cfg_key *k = find_key(key);
    if (!k && is_security_key(key)) {
        set_security_prop(cfg, key, value);
        return 0;
    }
    record_static(cfg, key, value);
    if (!k) {
        for (size_t i = 0; i < GR_ARRAY_LEN(known_ignored); i++)
            if (strcmp(known_ignored[i], key) == 0) return 0;
        gr_warn("KafkaConfig", "unknown configuration '%s' ignored", key);
        return 0;
    }
    /* log.dirs takes precedence over log.dir, whatever their order in the file. */
    if (strcmp(key, "log.dir") == 0 && cfg->log_dirs_explicit) return 0;
    int rc = apply(cfg, k, value, err, errlen);
    if (rc == 0 && strcmp(key, "log.dirs") == 0) cfg->log_dirs_explicit = true;
    return rc;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    return s;
}

int gr_config_load_file(struct gr_config *cfg, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot open config file '%s': %s", path, strerror(errno));
        return -errno;
    }
    char line[8192];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#' || *s == '!') continue;
        size_t kl = strcspn(s, "=:");
        if (!s[kl]) {
            snprintf(err, errlen, "%s:%d: expected key=value, got '%s'", path, lineno, s);
            rc = GR_ECONFIG;
            break;
        }
        s[kl] = 0;
        char *key = trim(s), *value = trim(s + kl + 1);
        char why[512];
        rc = gr_config_set(cfg, key, value, why, sizeof why);
        if (rc) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
            break;
        }
    }
    fclose(f);
    return rc;
}

int gr_config_finish(struct gr_config *cfg, char *err, size_t errlen) {
    if (!cfg->zookeeper_connect) {
        snprintf(err, errlen, "Missing required configuration zookeeper.connect which has no default value");
        return GR_ECONFIG;
    }
    int32_t ibp;
    if (gr_ibp_parse(cfg->inter_broker_protocol_version, &ibp) != 0) {
        snprintf(err, errlen, "Invalid value %s for configuration inter.broker.protocol.version: Version `%s` "
                 "is not a valid version", cfg->inter_broker_protocol_version ? cfg->inter_broker_protocol_version : "null",
                 cfg->inter_broker_protocol_version ? cfg->inter_broker_protocol_version : "null");
        return GR_ECONFIG;
    }
    /* Kafka's KafkaConfig.validateValues: -1 asks for a generated id (broker/broker_id.h), which
     * lies above reserved.broker.max.id; configured ids must stay at or below it. */
    if (cfg->broker_id_generation_enable) {
        if (cfg->broker_id < -1 || cfg->broker_id > cfg->reserved_broker_max_id) {
            snprintf(err, errlen,
                     "Invalid value %d for configuration broker.id: broker.id must be greater than or equal to -1 "
                     "and not greater than reserved.broker.max.id (%d)",
                     cfg->broker_id, cfg->reserved_broker_max_id);
            return GR_ECONFIG;
        }
    } else if (cfg->broker_id < 0) {
        snprintf(err, errlen,
                 "Invalid value %d for configuration broker.id: broker.id must be greater than or equal to 0 "
                 "(broker.id.generation.enable is false)",
                 cfg->broker_id);
        return GR_ECONFIG;
    }
    /* Kafka's KafkaConfig: a per-IP limit of 0 would refuse every peer unless overrides let some in. */
    if (cfg->max_connections_per_ip == 0 &&
        (!cfg->max_connections_per_ip_overrides || !cfg->max_connections_per_ip_overrides[0])) {
        snprintf(err, errlen, "Invalid value 0 for configuration max.connections.per.ip: "
                              "max.connections.per.ip.overrides must be set when it is 0");
        return GR_ECONFIG;
    }
    /* Keys naming a Java class Gregor cannot load: refused, not silently ignored (a custom principal
     * builder or SASL callback handler changes who a client is). Kafka's own default builder is
     * what Gregor implements, so naming it is accepted. */
    for (int i = 0; i < cfg->num_security_props; i++) {
        const char *k = cfg->security_keys[i], *v = cfg->security_values[i];
        size_t kl = strlen(k);
        bool builder = kl >= 23 && strcmp(k + kl - 23, "principal.builder.class") == 0 &&
                       (kl == 23 || k[kl - 24] == '.');
        bool callback = kl >= 34 && strcmp(k + kl - 34, "sasl.server.callback.handler.class") == 0 &&
                        (kl == 34 || k[kl - 35] == '.');
        if ((!builder && !callback) || !v || !v[0]) continue;
        if (builder && strcmp(v, "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder") == 0)
            continue;
        snprintf(err, errlen,
                 "Invalid value %s for configuration %s: Gregor cannot load Java classes; %s",
                 v, k,
                 builder ? "remove it to use Kafka's default principal builder (User:<SASL user> or "
                           "User:<certificate DN> after ssl.principal.mapping.rules)"
                         : "remove it to use the built-in PLAIN (JAAS user_<name> options) and SCRAM "
                           "(ZooKeeper credentials) servers");
        return GR_ECONFIG;
    }
    /* KIP-612: listener.name.<l>.max.connection.creation.rate, else the broker-wide value
     * (Kafka's valuesWithPrefixOverride) */
    for (int i = 0; i < cfg->num_listeners; i++) {
        const char *v = gr_config_listener_prop(cfg, cfg->listeners[i].name, "max.connection.creation.rate");
        cfg->listener_max_connection_creation_rate_set[i] = v != NULL;
        if (!v) continue;
        char *end;
        errno = 0;
        long r = strtol(v, &end, 10);
        if (!*v || *end || errno || r < 0 || r > INT32_MAX) {
            snprintf(err, errlen,
                     "Invalid value %s for configuration listener.name.%s.max.connection.creation.rate: "
                     "Value must be at least 0 (an int)",
                     v, cfg->listeners[i].name);
            return GR_ECONFIG;
        }
        cfg->listener_max_connection_creation_rate[i] = (int32_t)r;
    }
    if (cfg->zookeeper_connection_timeout_ms < 0)
        cfg->zookeeper_connection_timeout_ms = cfg->zookeeper_session_timeout_ms;
    if (cfg->num_advertised_listeners == 0) {
        memcpy(cfg->advertised_listeners, cfg->listeners, sizeof cfg->listeners);
        cfg->num_advertised_listeners = cfg->num_listeners;
    }
    for (int i = 0; i < cfg->num_advertised_listeners; i++) {
        struct gr_listener *l = &cfg->advertised_listeners[i];
        bool found = false;
        for (int j = 0; j < cfg->num_listeners; j++)
            if (strcmp(cfg->listeners[j].name, l->name) == 0) found = true;
        if (!found) {
            snprintf(err, errlen, "Invalid value for configuration advertised.listeners: listener %s is not in listeners",
                     l->name);
            return GR_ECONFIG;
        }
        /* Kafka advertises the canonical host name for an empty host; we use localhost. A port
         * of 0 is replaced by the bound port once the server listens. */
        if (!l->host[0]) snprintf(l->host, sizeof l->host, "%s", "localhost");
    }
    for (int i = 0; i < cfg->num_listeners; i++)
        if (!gr_config_security_protocol(cfg, cfg->listeners[i].name)) {
            snprintf(err, errlen,
                     "Invalid value for configuration listener.security.protocol.map: no security protocol "
                     "for listener %s (protocols: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)",
                     cfg->listeners[i].name);
            return GR_ECONFIG;
        }
    if (cfg->inter_broker_listener_name && cfg->security_inter_broker_protocol) {
        snprintf(err, errlen, "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.");
        return GR_ECONFIG;
    }
    /* security.inter.broker.protocol names the listener of the same name */
    const char *ibl = cfg->inter_broker_listener_name ? cfg->inter_broker_listener_name
                                                      : cfg->security_inter_broker_protocol;
    if (ibl) {
        bool found = false;
        for (int i = 0; i < cfg->num_advertised_listeners; i++)
            if (strcasecmp(cfg->advertised_listeners[i].name, ibl) == 0) found = true;
        if (!found) {
            snprintf(err, errlen, "Invalid value %s for configuration %s: not among the advertised listeners", ibl,
                     cfg->inter_broker_listener_name ? "inter.broker.listener.name" : "security.inter.broker.protocol");
            return GR_ECONFIG;
        }
    }
    if (cfg->authorizer_class_name && strcmp(cfg->authorizer_class_name, "kafka.security.authorizer.AclAuthorizer") != 0 &&
        strcmp(cfg->authorizer_class_name, "kafka.security.auth.SimpleAclAuthorizer") != 0) {
        snprintf(err, errlen, "Invalid value %s for configuration authorizer.class.name: only "
                 "kafka.security.authorizer.AclAuthorizer is available", cfg->authorizer_class_name);
        return GR_ECONFIG;
    }
    if (cfg->zookeeper_set_acl && !cfg->gregor_zookeeper_auth_digest) {
        snprintf(err, errlen, "zookeeper.set.acl is true, but no ZooKeeper authentication is configured "
                 "(gregor.zookeeper.auth.digest=user:password)");
        return GR_ECONFIG;
    }
    if (cfg->log_cleanup_policy) {
        const char *p = cfg->log_cleanup_policy;
        if (strcmp(p, "delete") && strcmp(p, "compact") && strcmp(p, "compact,delete") && strcmp(p, "delete,compact")) {
            snprintf(err, errlen, "Invalid value %s for configuration log.cleanup.policy: expected delete, compact or both", p);
            return GR_ECONFIG;
        }
    }
    if (cfg->log_message_timestamp_type && strcmp(cfg->log_message_timestamp_type, "CreateTime") &&
        strcmp(cfg->log_message_timestamp_type, "LogAppendTime")) {
        snprintf(err, errlen, "Invalid value %s for configuration log.message.timestamp.type: expected CreateTime or LogAppendTime",
                 cfg->log_message_timestamp_type);
        return GR_ECONFIG;
    }
    if (cfg->replica_selector_class &&
        strcmp(cfg->replica_selector_class, "org.apache.kafka.common.replica.RackAwareReplicaSelector") != 0) {
        snprintf(err, errlen, "Invalid value %s for configuration replica.selector.class: only "
                 "org.apache.kafka.common.replica.RackAwareReplicaSelector is available", cfg->replica_selector_class);
        return GR_ECONFIG;
    }
    if (cfg->min_insync_replicas < 1) {
        snprintf(err, errlen, "Invalid value for configuration min.insync.replicas: must be at least 1");
        return GR_ECONFIG;
    }
    return 0;
}

void gr_config_release(struct gr_config *cfg) {
    for (int i = 0; i < cfg->n_static; i++) {
        free(cfg->static_keys[i]);
        free(cfg->static_values[i]);
    }
    cfg->n_static = 0;
    for (size_t i = 0; i < GR_ARRAY_LEN(keys); i++)
        if (keys[i].type == T_STRING || keys[i].type == T_PASSWORD || keys[i].type == T_LIST) {
            char **s = (char **)((char *)cfg + keys[i].off);
            free(*s);
            *s = NULL;
        }
    for (int i = 0; i < cfg->num_log_dirs; i++) free(cfg->log_dirs[i]);
    cfg->num_log_dirs = 0;
    for (int i = 0; i < cfg->num_security_props; i++) {
        free(cfg->security_keys[i]);
        free(cfg->security_values[i]);
    }
    free(cfg->security_keys);
    free(cfg->security_values);
    cfg->security_keys = cfg->security_values = NULL;
    cfg->num_security_props = 0;
}

static const char *security_prop(const struct gr_config *cfg, const char *key) {
    for (int i = 0; i < cfg->num_security_props; i++)
        if (strcmp(cfg->security_keys[i], key) == 0) return cfg->security_values[i];
    return NULL;
}

const char *gr_config_listener_prop(const struct gr_config *cfg, const char *listener, const char *key) {
    if (listener) {
        char full[512];
        int n = snprintf(full, sizeof full, "listener.name.%s.%s", listener, key);
        if (n > 0 && (size_t)n < sizeof full) {
            for (char *c = full + 14; *c && c < full + 14 + strlen(listener); c++) *c = (char)tolower((unsigned char)*c);
            const char *v = security_prop(cfg, full);
            if (v) return v;
        }
    }
    return security_prop(cfg, key);
}

const char *gr_config_security_protocol(const struct gr_config *cfg, const char *listener) {
    static const char *const protocols[] = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"};
    const char *map = cfg->listener_security_protocol_map;
    if (!map) /* Kafka's default map: every protocol name maps to itself */
        map = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";
    size_t ln = strlen(listener);
    for (const char *p = map; *p;) {
        while (*p == ' ' || *p == ',') p++;
        size_t len = strcspn(p, ",");
        const char *colon = memchr(p, ':', len);
        if (colon && (size_t)(colon - p) == ln && strncasecmp(p, listener, ln) == 0) {
            const char *v = colon + 1;
            size_t vl = len - (size_t)(v - p);
            while (vl && v[vl - 1] == ' ') vl--;
            for (size_t i = 0; i < GR_ARRAY_LEN(protocols); i++)
                if (strlen(protocols[i]) == vl && strncasecmp(v, protocols[i], vl) == 0) return protocols[i];
            return NULL;
        }
        p += len;
    }
    return NULL;
}

const struct gr_listener *gr_config_inter_broker_listener(const struct gr_config *cfg) {
    const char *name = cfg->inter_broker_listener_name ? cfg->inter_broker_listener_name
                                                       : cfg->security_inter_broker_protocol;
    if (name)
        for (int i = 0; i < cfg->num_advertised_listeners; i++)
            if (strcasecmp(cfg->advertised_listeners[i].name, name) == 0)
                return &cfg->advertised_listeners[i];
    return cfg->num_advertised_listeners ? &cfg->advertised_listeners[0] : NULL;
}

/* ---- the key table for describing configs (DescribeConfigs) ---- */

const char *gr_config_static_value(const struct gr_config *cfg, const char *key) {
    for (int i = 0; cfg && i < cfg->n_static; i++)
        if (strcmp(cfg->static_keys[i], key) == 0) return cfg->static_values[i];
    return NULL;
}

int gr_config_key_count(void) { return (int)GR_ARRAY_LEN(keys); }

const char *gr_config_key_name(int i) { return i >= 0 && i < (int)GR_ARRAY_LEN(keys) ? keys[i].name : NULL; }

bool gr_config_known_key(const char *key) { return find_key(key) != NULL; }

const char *gr_config_default_value(const char *key) {
    const struct cfg_key *k = find_key(key);
    return k ? k->dflt : NULL;
}

/* Kafka 2.7 broker keys outside `keys` (the security keys, kept apart by is_security_key, and
 * keys Gregor accepts without acting on them), with KafkaConfig's ConfigDef type: DescribeConfigs
 * needs the type to tell a password from plain text, and a key of no known type is a secret
 * (KafkaConfig.maybeSensitive). Listener-prefixed forms take the type of the key they override. */
static const struct {
    const char *name;
    int type;
} kafka_types[] = {
    {"ssl.protocol", GR_CONFIG_TYPE_STRING},
    {"ssl.provider", GR_CONFIG_TYPE_STRING},
    {"ssl.cipher.suites", GR_CONFIG_TYPE_LIST},
    {"ssl.enabled.protocols", GR_CONFIG_TYPE_LIST},
    {"ssl.keystore.type", GR_CONFIG_TYPE_STRING},
    {"ssl.keystore.location", GR_CONFIG_TYPE_STRING},
    {"ssl.keystore.password", GR_CONFIG_TYPE_PASSWORD},
    {"ssl.key.password", GR_CONFIG_TYPE_PASSWORD},
    {"ssl.keystore.key", GR_CONFIG_TYPE_PASSWORD},
    {"ssl.keystore.certificate.chain", GR_CONFIG_TYPE_PASSWORD},
    {"ssl.truststore.type", GR_CONFIG_TYPE_STRING},
    {"ssl.truststore.location", GR_CONFIG_TYPE_STRING},
    {"ssl.truststore.password", GR_CONFIG_TYPE_PASSWORD},
    {"ssl.truststore.certificates", GR_CONFIG_TYPE_PASSWORD},
    {"ssl.keymanager.algorithm", GR_CONFIG_TYPE_STRING},
    {"ssl.trustmanager.algorithm", GR_CONFIG_TYPE_STRING},
    {"ssl.endpoint.identification.algorithm", GR_CONFIG_TYPE_STRING},
    {"ssl.secure.random.implementation", GR_CONFIG_TYPE_STRING},
    {"ssl.client.auth", GR_CONFIG_TYPE_STRING},
    {"ssl.principal.mapping.rules", GR_CONFIG_TYPE_STRING},
    {"ssl.engine.factory.class", GR_CONFIG_TYPE_CLASS},
    {"sasl.mechanism.inter.broker.protocol", GR_CONFIG_TYPE_STRING},
    {"sasl.enabled.mechanisms", GR_CONFIG_TYPE_LIST},
    {"sasl.jaas.config", GR_CONFIG_TYPE_PASSWORD},
    {"sasl.kerberos.service.name", GR_CONFIG_TYPE_STRING},
    {"sasl.kerberos.kinit.cmd", GR_CONFIG_TYPE_STRING},
    {"sasl.kerberos.ticket.renew.window.factor", GR_CONFIG_TYPE_DOUBLE},
    {"sasl.kerberos.ticket.renew.jitter", GR_CONFIG_TYPE_DOUBLE},
    {"sasl.kerberos.min.time.before.relogin", GR_CONFIG_TYPE_LONG},
    {"sasl.kerberos.principal.to.local.rules", GR_CONFIG_TYPE_LIST},
    {"sasl.login.refresh.window.factor", GR_CONFIG_TYPE_DOUBLE},
    {"sasl.login.refresh.window.jitter", GR_CONFIG_TYPE_DOUBLE},
    {"sasl.login.refresh.min.period.seconds", GR_CONFIG_TYPE_SHORT},
    {"sasl.login.refresh.buffer.seconds", GR_CONFIG_TYPE_SHORT},
    {"sasl.client.callback.handler.class", GR_CONFIG_TYPE_CLASS},
    {"sasl.server.callback.handler.class", GR_CONFIG_TYPE_CLASS},
    {"sasl.login.class", GR_CONFIG_TYPE_CLASS},
    {"sasl.login.callback.handler.class", GR_CONFIG_TYPE_CLASS},
    {"principal.builder.class", GR_CONFIG_TYPE_CLASS},
    {"connections.max.reauth.ms", GR_CONFIG_TYPE_LONG},
    {"delegation.token.master.key", GR_CONFIG_TYPE_PASSWORD},
    {"delegation.token.max.lifetime.ms", GR_CONFIG_TYPE_LONG},
    {"delegation.token.expiry.time.ms", GR_CONFIG_TYPE_LONG},
    {"password.encoder.secret", GR_CONFIG_TYPE_PASSWORD},
    {"password.encoder.old.secret", GR_CONFIG_TYPE_PASSWORD},
    {"num.recovery.threads.per.data.dir", GR_CONFIG_TYPE_INT},
    {"socket.send.buffer.bytes", GR_CONFIG_TYPE_INT},
    {"socket.receive.buffer.bytes", GR_CONFIG_TYPE_INT},
    {"log.message.format.version", GR_CONFIG_TYPE_STRING},
};

/* The key a listener-prefixed key overrides: "listener.name.<l>.<key>", and for sasl.jaas.config
 * also "listener.name.<l>.<mechanism>.sasl.jaas.config" (Kafka's brokerConfigSynonyms). */
static const char *unprefixed(const char *key) {
    if (strncmp(key, "listener.name.", 14) != 0) return key;
    const char *rest = strchr(key + 14, '.');
    if (!rest) return key;
    rest++;
    const char *jaas = strstr(rest, ".sasl.jaas.config");
    if (jaas && strcmp(jaas, ".sasl.jaas.config") == 0 && strchr(rest, '.') == jaas) return jaas + 1;
    return rest;
}

int gr_config_key_type(const char *key) {
    if (!key) return GR_CONFIG_TYPE_UNKNOWN;
    const struct cfg_key *k = find_key(key);
    if (!k) {
        const char *base = unprefixed(key);
        for (size_t i = 0; i < GR_ARRAY_LEN(kafka_types); i++)
            if (strcmp(kafka_types[i].name, base) == 0) return kafka_types[i].type;
        return base != key ? gr_config_key_type(base) : GR_CONFIG_TYPE_UNKNOWN;
    }
    switch (k->type) {
    case T_INT: return GR_CONFIG_TYPE_INT;
    case T_LONG: return GR_CONFIG_TYPE_LONG;
    case T_DOUBLE: return GR_CONFIG_TYPE_DOUBLE;
    case T_BOOL: return GR_CONFIG_TYPE_BOOLEAN;
    case T_STRING: return GR_CONFIG_TYPE_STRING;
    case T_PASSWORD: return GR_CONFIG_TYPE_PASSWORD;
    default: return GR_CONFIG_TYPE_LIST;
    }
}

int gr_config_check(const char *key, const char *value, char *err, size_t errlen) {
    if (!find_key(key)) return 0;
    struct gr_config tmp;
    gr_config_defaults(&tmp);
    int rc = gr_config_set(&tmp, key, value, err, errlen);
    gr_config_release(&tmp);
    return rc;
}
