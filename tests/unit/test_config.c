/* Broker configuration (common/config.h): Kafka defaults, bad values naming the key, unknown keys,
 * listener parsing, file loading, overrides and the cross-key checks of gr_config_finish. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "support/check.h"

static void test_defaults(void) {
    struct gr_config c;
    gr_config_defaults(&c);
    CHECK(c.broker_id == -1);
    CHECK(c.broker_rack == NULL);
    CHECK(c.zookeeper_connect == NULL);
    CHECK(c.zookeeper_session_timeout_ms == 18000);
    CHECK(c.zookeeper_max_in_flight_requests == 10);
    CHECK(c.num_listeners == 1);
    CHECK(strcmp(c.listeners[0].name, "PLAINTEXT") == 0 && c.listeners[0].port == 9092 && c.listeners[0].host[0] == 0);
    CHECK(c.num_log_dirs == 1 && strcmp(c.log_dirs[0], "/tmp/kafka-logs") == 0);
    CHECK(c.log_segment_bytes == 1073741824);
    CHECK(c.log_retention_ms == 604800000LL);
    CHECK(c.delete_topic_enable == true);
    CHECK(c.auto_leader_rebalance_enable == true);
    CHECK(c.leader_imbalance_per_broker_percentage == 10);
    CHECK(c.leader_imbalance_check_interval_seconds == 300);
    CHECK(c.unclean_leader_election_enable == false);
    CHECK(c.controlled_shutdown_enable == true);
    CHECK(c.controlled_shutdown_max_retries == 3);
    CHECK(c.controlled_shutdown_retry_backoff_ms == 5000);
    CHECK(c.controller_socket_timeout_ms == 30000);
    CHECK(c.replica_lag_time_max_ms == 30000);
    CHECK(c.offsets_topic_replication_factor == 3);
    CHECK(c.min_insync_replicas == 1);
    CHECK(c.num_partitions == 1);
    CHECK(c.default_replication_factor == 1);
    CHECK(c.reserved_broker_max_id == 1000);
    CHECK(c.inter_broker_protocol_version && strcmp(c.inter_broker_protocol_version, "3.9-IV0") == 0);
    CHECK(c.socket_request_max_bytes == 104857600);
    gr_config_release(&c);
}

/* Sets key=value expecting GR_ECONFIG with the key named in the message. */
static void expect_bad(const char *key, const char *value) {
    struct gr_config c;
    gr_config_defaults(&c);
    char err[512] = "";
    int rc = gr_config_set(&c, key, value, err, sizeof err);
    if (rc != GR_ECONFIG || !strstr(err, key)) {
        fprintf(stderr, "  %s=%s: rc %d, message '%s'\n", key, value, rc, err);
        test_failures++;
    }
    gr_config_release(&c);
}

static void test_bad_values(void) {
    expect_bad("broker.id", "x");
    expect_bad("broker.id", "12abc");
    expect_bad("zookeeper.session.timeout.ms", "abc");
    expect_bad("zookeeper.session.timeout.ms", "0");
    expect_bad("zookeeper.session.timeout.ms", "99999999999");
    expect_bad("log.segment.bytes", "-5");
    expect_bad("listeners", "PLAINTEXT//nonsense");
    expect_bad("listeners", "PLAINTEXT://host:notaport");
    expect_bad("listeners", "PLAINTEXT://host:70000");
    expect_bad("auto.leader.rebalance.enable", "maybe");
    expect_bad("num.io.threads", "");
    expect_bad("leader.imbalance.per.broker.percentage", "101");
}

static void test_set_and_unknown(void) {
    struct gr_config c;
    gr_config_defaults(&c);
    char err[512];
    CHECK(gr_config_set(&c, "broker.id", "3", err, sizeof err) == 0 && c.broker_id == 3);
    CHECK(gr_config_set(&c, "delete.topic.enable", "false", err, sizeof err) == 0 && !c.delete_topic_enable);
    CHECK(gr_config_set(&c, "auto.leader.rebalance.enable", "FALSE", err, sizeof err) == 0 &&
          !c.auto_leader_rebalance_enable);
    CHECK(gr_config_set(&c, "broker.rack", "r1", err, sizeof err) == 0 && c.broker_rack &&
          strcmp(c.broker_rack, "r1") == 0);
    CHECK(gr_config_set(&c, "broker.rack", "r2", err, sizeof err) == 0 && strcmp(c.broker_rack, "r2") == 0);
    CHECK(gr_config_set(&c, "log.dirs", "/a,/b/c", err, sizeof err) == 0);
    CHECK(c.num_log_dirs == 2 && strcmp(c.log_dirs[0], "/a") == 0 && strcmp(c.log_dirs[1], "/b/c") == 0);
    CHECK(gr_config_set(&c, "log.retention.hours", "1", err, sizeof err) == 0 && c.log_retention_ms == 3600000);
    /* Kafka ignores (with a warning) keys it does not know */
    CHECK(gr_config_set(&c, "some.plugin.setting", "whatever", err, sizeof err) == 0);
    CHECK(gr_config_set(&c, "ssl.keystore.location", "/x", err, sizeof err) == 0);
    gr_config_release(&c);
}

static void test_listeners(void) {
    struct gr_listener ls[GR_MAX_LISTENERS];
    char err[512];
    int n = gr_config_parse_listeners("PLAINTEXT://127.0.0.1:9092,INTERNAL://:9093", ls, GR_MAX_LISTENERS, err, sizeof err);
    CHECK(n == 2);
    if (n == 2) {
        CHECK(strcmp(ls[0].name, "PLAINTEXT") == 0 && strcmp(ls[0].host, "127.0.0.1") == 0 && ls[0].port == 9092);
        CHECK(strcmp(ls[1].name, "INTERNAL") == 0 && ls[1].host[0] == 0 && ls[1].port == 9093);
    }
    n = gr_config_parse_listeners("PLAINTEXT://broker-1.example.com:0", ls, GR_MAX_LISTENERS, err, sizeof err);
    CHECK(n == 1 && ls[0].port == 0 && strcmp(ls[0].host, "broker-1.example.com") == 0);
    n = gr_config_parse_listeners("PLAINTEXT://[::1]:9092", ls, GR_MAX_LISTENERS, err, sizeof err);
    CHECK(n == 1 && ls[0].port == 9092 && strstr(ls[0].host, "::1") != NULL);
    CHECK(gr_config_parse_listeners("PLAINTEXT//x:1", ls, GR_MAX_LISTENERS, err, sizeof err) == GR_ECONFIG);
    CHECK(gr_config_parse_listeners("PLAINTEXT://x", ls, GR_MAX_LISTENERS, err, sizeof err) == GR_ECONFIG);
    CHECK(gr_config_parse_listeners("PLAINTEXT://x:1,PLAINTEXT://y:2", ls, GR_MAX_LISTENERS, err, sizeof err) ==
          GR_ECONFIG); /* duplicate listener name */
}

static char *write_file(const char *text) {
    char *path = gr_strdup("/tmp/gr_config_test_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return path;
    ssize_t w = write(fd, text, strlen(text));
    (void)w;
    close(fd);
    return path;
}

static void test_file_overrides_finish(void) {
    char *path = write_file("# a comment\n"
                            "! another comment\n"
                            "\n"
                            "broker.id=5\n"
                            "  zookeeper.connect = 127.0.0.1:2181/gregor  \n"
                            "listeners:PLAINTEXT://127.0.0.1:19092\n"
                            "zookeeper.session.timeout.ms=3000\n"
                            "unknown.key=1\n"
                            "log.dirs=/tmp/gr-a\n");
    struct gr_config c;
    gr_config_defaults(&c);
    char err[512] = "";
    CHECK(gr_config_load_file(&c, path, err, sizeof err) == 0);
    CHECK(c.broker_id == 5);
    CHECK(c.zookeeper_connect && strcmp(c.zookeeper_connect, "127.0.0.1:2181/gregor") == 0);
    CHECK(c.num_listeners == 1 && c.listeners[0].port == 19092);
    /* an override after the file wins */
    CHECK(gr_config_set(&c, "broker.id", "6", err, sizeof err) == 0);
    CHECK(gr_config_finish(&c, err, sizeof err) == 0);
    CHECK(c.broker_id == 6);
    CHECK(c.zookeeper_connection_timeout_ms == 3000); /* defaults to the session timeout */
    CHECK(c.num_advertised_listeners == 1 && c.advertised_listeners[0].port == 19092 &&
          strcmp(c.advertised_listeners[0].host, "127.0.0.1") == 0);
    const struct gr_listener *ib = gr_config_inter_broker_listener(&c);
    CHECK(ib && strcmp(ib->name, "PLAINTEXT") == 0);
    gr_config_release(&c);
    unlink(path);
    free(path);

    /* a bad value in the file names the key (and the file) */
    path = write_file("broker.id=1\nzookeeper.session.timeout.ms=abc\n");
    gr_config_defaults(&c);
    CHECK(gr_config_load_file(&c, path, err, sizeof err) == GR_ECONFIG);
    CHECK(strstr(err, "zookeeper.session.timeout.ms") != NULL);
    gr_config_release(&c);
    unlink(path);
    free(path);

    /* a line that is not key=value */
    path = write_file("broker.id=1\ngarbage\n");
    gr_config_defaults(&c);
    CHECK(gr_config_load_file(&c, path, err, sizeof err) != 0);
    CHECK(strstr(err, ":2") != NULL);
    gr_config_release(&c);
    unlink(path);
    free(path);

    /* a missing file names the path */
    gr_config_defaults(&c);
    CHECK(gr_config_load_file(&c, "/nonexistent/gr-no-such.properties", err, sizeof err) != 0);
    CHECK(strstr(err, "gr-no-such.properties") != NULL);
    gr_config_release(&c);

    /* finish: required keys (broker.id is not one: test_broker_id_range) */
    gr_config_defaults(&c);
    gr_config_set(&c, "broker.id", "1", err, sizeof err);
    CHECK(gr_config_finish(&c, err, sizeof err) == GR_ECONFIG && strstr(err, "zookeeper.connect"));
    gr_config_release(&c);

    /* advertised listener must name a listener; inter.broker.listener.name must be advertised */
    gr_config_defaults(&c);
    gr_config_set(&c, "broker.id", "1", err, sizeof err);
    gr_config_set(&c, "zookeeper.connect", "127.0.0.1:2181", err, sizeof err);
    gr_config_set(&c, "advertised.listeners", "OTHER://h:1", err, sizeof err);
    CHECK(gr_config_finish(&c, err, sizeof err) == GR_ECONFIG && strstr(err, "advertised.listeners"));
    gr_config_release(&c);
    gr_config_defaults(&c);
    gr_config_set(&c, "broker.id", "1", err, sizeof err);
    gr_config_set(&c, "zookeeper.connect", "127.0.0.1:2181", err, sizeof err);
    gr_config_set(&c, "inter.broker.listener.name", "NOPE", err, sizeof err);
    CHECK(gr_config_finish(&c, err, sizeof err) == GR_ECONFIG && strstr(err, "inter.broker.listener.name"));
    gr_config_release(&c);

    /* max.connections.per.ip=0 refuses every peer: only with overrides (Kafka's KafkaConfig) */
    gr_config_defaults(&c);
    gr_config_set(&c, "broker.id", "1", err, sizeof err);
    gr_config_set(&c, "zookeeper.connect", "127.0.0.1:2181", err, sizeof err);
    gr_config_set(&c, "max.connections.per.ip", "0", err, sizeof err);
    CHECK(gr_config_finish(&c, err, sizeof err) == GR_ECONFIG && strstr(err, "max.connections.per.ip"));
    gr_config_set(&c, "max.connections.per.ip.overrides", "127.0.0.1:5", err, sizeof err);
    CHECK(gr_config_finish(&c, err, sizeof err) == 0);
    gr_config_release(&c);
}

/* gr_config_finish on broker.id with the given generation setting and reserved.broker.max.id
 * (NULL: default). Returns its result; err gets the message. */
static int finish_broker_id(const char *id, const char *generation, const char *reserved, char *err, size_t errlen) {
    struct gr_config c;
    gr_config_defaults(&c);
    CHECK(gr_config_set(&c, "zookeeper.connect", "127.0.0.1:2181", err, errlen) == 0);
    if (id) CHECK(gr_config_set(&c, "broker.id", id, err, errlen) == 0);
    if (generation) CHECK(gr_config_set(&c, "broker.id.generation.enable", generation, err, errlen) == 0);
    if (reserved) CHECK(gr_config_set(&c, "reserved.broker.max.id", reserved, err, errlen) == 0);
    err[0] = 0;
    int rc = gr_config_finish(&c, err, errlen);
    gr_config_release(&c);
    return rc;
}

/* Kafka 2.7's KafkaConfig rules: with broker.id.generation.enable (default) broker.id may be -1
 * (generated at start-up) up to reserved.broker.max.id; without it broker.id must be >= 0. */
static void test_broker_id_range(void) {
    char err[512];
    static const char gen_msg[] =
        "broker.id must be greater than or equal to -1 and not greater than reserved.broker.max.id";
    CHECK(finish_broker_id(NULL, NULL, NULL, err, sizeof err) == 0);
    CHECK(finish_broker_id("-1", NULL, NULL, err, sizeof err) == 0);
    CHECK(finish_broker_id("0", NULL, NULL, err, sizeof err) == 0);
    CHECK(finish_broker_id("1000", NULL, NULL, err, sizeof err) == 0);
    CHECK(finish_broker_id("1001", NULL, NULL, err, sizeof err) == GR_ECONFIG);
    CHECK(strstr(err, "broker.id") && strstr(err, gen_msg));
    CHECK(finish_broker_id("-2", NULL, NULL, err, sizeof err) == GR_ECONFIG);
    CHECK(strstr(err, gen_msg) != NULL);
    CHECK(finish_broker_id("-7", "true", NULL, err, sizeof err) == GR_ECONFIG);
    CHECK(strstr(err, gen_msg) != NULL);

    /* reserved.broker.max.id moves the bound */
    CHECK(finish_broker_id("1001", NULL, "2000", err, sizeof err) == 0);
    CHECK(finish_broker_id("2000", NULL, "2000", err, sizeof err) == 0);
    CHECK(finish_broker_id("2001", NULL, "2000", err, sizeof err) == GR_ECONFIG && strstr(err, gen_msg));
    CHECK(finish_broker_id("11", NULL, "10", err, sizeof err) == GR_ECONFIG && strstr(err, gen_msg));
    CHECK(finish_broker_id("-1", NULL, "10", err, sizeof err) == 0);

    /* generation off: an id >= 0 is required, reserved.broker.max.id does not bound it */
    static const char off_msg[] = "broker.id must be greater than or equal to 0";
    CHECK(finish_broker_id(NULL, "false", NULL, err, sizeof err) == GR_ECONFIG);
    CHECK(strstr(err, "broker.id") && strstr(err, off_msg));
    CHECK(finish_broker_id("-1", "false", NULL, err, sizeof err) == GR_ECONFIG && strstr(err, off_msg));
    CHECK(finish_broker_id("0", "false", NULL, err, sizeof err) == 0);
    CHECK(finish_broker_id("5000", "false", NULL, err, sizeof err) == 0);
}

int main(void) {
    gr_log_set_level(GR_LOG_ERROR); /* unknown-key warnings are expected */
    test_defaults();
    test_bad_values();
    test_set_and_unknown();
    test_listeners();
    test_file_overrides_finish();
    test_broker_id_range();
    if (test_failures) {
        fprintf(stderr, "test_config: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_config: ok\n");
    return 0;
}
