/* Znode JSON codecs (src/zk/znode_json.c) against Kafka 2.7's exact strings, plus hostile input. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "support/check.h"
#include "zk/kzk.h"

#define DEC(fn, s, ...) fn(s, strlen(s), __VA_ARGS__)
#define BDEC(s, id, out) gr_kzk_broker_decode(id, s, strlen(s), out)

/* True when two JSON texts are equal as JSON values (key order ignored). */
static int json_same(const char *a, const char *b) {
    json_error_t e;
    json_t *x = json_loads(a, 0, &e), *y = json_loads(b, 0, &e);
    int same = x && y && json_equal(x, y);
    if (!same) fprintf(stderr, "  got:      %s\n  expected: %s\n", a, b);
    json_decref(x);
    json_decref(y);
    return same;
}

static void test_broker(void) {
    /* Kafka's v5 example from the reference (plus a second listener). */
    const char *kafka =
        "{\"version\":5,\"host\":\"h\",\"port\":9092,\"jmx_port\":-1,\"timestamp\":\"1600000000000\","
        "\"endpoints\":[\"PLAINTEXT://h:9092\",\"SSL://h:9093\"],\"rack\":\"r1\","
        "\"listener_security_protocol_map\":{\"PLAINTEXT\":\"PLAINTEXT\",\"SSL\":\"SSL\"},"
        "\"features\":{\"f\":{\"min_version\":1,\"max_version\":2}}}";
    struct gr_kzk_broker b;
    CHECK(BDEC(kafka, 7, &b) == 0);
    CHECK(b.id == 7 && b.version == 5 && b.jmx_port == -1 && b.timestamp == 1600000000000LL);
    CHECK(b.n_endpoints == 2);
    if (b.n_endpoints == 2) {
        CHECK(strcmp(b.endpoints[0].listener, "PLAINTEXT") == 0);
        CHECK(strcmp(b.endpoints[0].security_protocol, "PLAINTEXT") == 0);
        CHECK(strcmp(b.endpoints[0].host, "h") == 0 && b.endpoints[0].port == 9092);
        CHECK(strcmp(b.endpoints[1].listener, "SSL") == 0 && b.endpoints[1].port == 9093);
    }
    CHECK(b.rack && strcmp(b.rack, "r1") == 0);
    CHECK(b.n_features == 1 && strcmp(b.features[0].name, "f") == 0 &&
          b.features[0].min_version == 1 && b.features[0].max_version == 2);
    /* Re-encode: same JSON (timestamp preserved since it is non-zero). */
    size_t len;
    char *enc = gr_kzk_broker_encode(&b, &len);
    CHECK(strlen(enc) == len);
    CHECK(json_same(enc, kafka));
    free(enc);
    gr_kzk_broker_release(&b);
    gr_kzk_broker_release(&b); /* idempotent */

    /* Encode from scratch: no rack → no "rack" key; empty features map; timestamp a string. */
    struct gr_kzk_endpoint ep = {.listener = "PLAINTEXT", .security_protocol = "PLAINTEXT",
                                 .host = "localhost", .port = 9092};
    struct gr_kzk_broker nb = {.id = 1, .jmx_port = -1, .timestamp = 42, .n_endpoints = 1,
                               .endpoints = &ep};
    enc = gr_kzk_broker_encode(&nb, &len);
    CHECK(json_same(enc, "{\"version\":5,\"host\":\"localhost\",\"port\":9092,\"jmx_port\":-1,"
                         "\"timestamp\":\"42\",\"endpoints\":[\"PLAINTEXT://localhost:9092\"],"
                         "\"listener_security_protocol_map\":{\"PLAINTEXT\":\"PLAINTEXT\"},"
                         "\"features\":{}}"));
    CHECK(strstr(enc, "\"timestamp\":\"42\"") != NULL);
    CHECK(strstr(enc, "rack") == NULL);
    free(enc);

    /* No PLAINTEXT listener: host null, port -1 (Kafka). Custom listener name mapped. */
    struct gr_kzk_endpoint ep2 = {.listener = "INTERNAL", .security_protocol = "SASL_SSL",
                                  .host = "::1", .port = 9094};
    nb.endpoints = &ep2;
    nb.timestamp = 0; /* now */
    enc = gr_kzk_broker_encode(&nb, &len);
    CHECK(strstr(enc, "\"host\":null") && strstr(enc, "\"port\":-1"));
    CHECK(strstr(enc, "\"INTERNAL://[::1]:9094\"") != NULL);
    CHECK(strstr(enc, "\"INTERNAL\":\"SASL_SSL\"") != NULL);
    struct gr_kzk_broker rb;
    CHECK(gr_kzk_broker_decode(3, enc, len, &rb) == 0);
    CHECK(rb.n_endpoints == 1 && strcmp(rb.endpoints[0].host, "::1") == 0 &&
          strcmp(rb.endpoints[0].security_protocol, "SASL_SSL") == 0 && rb.timestamp > 0);
    CHECK(rb.rack == NULL);
    gr_kzk_broker_release(&rb);
    free(enc);

    /* v4 without features, rack null; v1 host/port only. */
    CHECK(BDEC("{\"version\":4,\"host\":\"a\",\"port\":1,\"jmx_port\":-1,\"timestamp\":\"1\","
              "\"endpoints\":[\"PLAINTEXT://a:1\"],\"rack\":null,"
              "\"listener_security_protocol_map\":{\"PLAINTEXT\":\"PLAINTEXT\"}}",
              1, &rb) == 0);
    CHECK(rb.n_features == 0 && rb.rack == NULL);
    gr_kzk_broker_release(&rb);
    CHECK(BDEC("{\"version\":1,\"host\":\"a\",\"port\":5,\"jmx_port\":-1}", 1,
              &rb) == 0);
    CHECK(rb.n_endpoints == 1 && rb.endpoints[0].port == 5);
    gr_kzk_broker_release(&rb);

    /* Hostile. */
    const char *bad[] = {
        "", "{", "[]", "null", "{\"version\":5}", "{\"version\":\"5\",\"endpoints\":[]}",
        "{\"version\":5,\"endpoints\":[\"PLAINTEXT:/h:1\"]}",
        "{\"version\":5,\"endpoints\":[\"PLAINTEXT://h:99999\"]}",
        "{\"version\":5,\"endpoints\":[\"PLAINTEXT://h:x\"]}",
        "{\"version\":5,\"endpoints\":[1]}",
        "{\"version\":5,\"endpoints\":[\"X://h:1\"],\"listener_security_protocol_map\":{}}",
        "{\"version\":5,\"endpoints\":[],\"features\":{\"f\":{\"min_version\":70000,\"max_version\":1}}}",
        "{\"version\":5,\"endpoints\":[],\"features\":{\"f\":3}}",
        "{\"version\":5,\"endpoints\":[],\"rack\":5}",
        "{\"version\":5,\"version\":5,\"endpoints\":[]}",
        "{\"version\":99999999999999999999999,\"endpoints\":[]}",
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(bad); i++) {
        int rc = BDEC(bad[i], 1, &rb);
        if (rc != GR_ECORRUPT) fprintf(stderr, "  accepted bad broker json #%zu: %s\n", i, bad[i]);
        CHECK(rc == GR_ECORRUPT);
        CHECK(rb.endpoints == NULL && rb.n_endpoints == 0);
    }
    /* Non-NUL-terminated buffer: decoder must stop at len. */
    char buf[8] = {'{', '}', 'x', 'x', 'x', 'x', 'x', 'x'};
    CHECK(gr_kzk_broker_decode(1, buf, 2, &rb) == GR_ECORRUPT);
}

/* /brokers/topics/T/partitions's data: the stamp's topic id (empty: none); anything else is
 * GR_ECORRUPT, never a crash. */
static void test_topic_stamp(void) {
    size_t len = 9;
    char *s = gr_kzk_topic_stamp_encode(NULL, &len);
    CHECK(len == 0 && s[0] == '\0');
    free(s);
    const char *id = "LLZSphugSjmNB1hmQ7rBtw";
    s = gr_kzk_topic_stamp_encode(id, &len);
    CHECK(strcmp(s, "{\"topic_id\":\"LLZSphugSjmNB1hmQ7rBtw\"}") == 0 && len == strlen(s));
    char *got = NULL;
    CHECK(gr_kzk_topic_stamp_decode(s, len, &got) == 0 && got && strcmp(got, id) == 0);
    free(got);
    free(s);
    CHECK(gr_kzk_topic_stamp_decode("", 0, &got) == 0 && got == NULL);
    CHECK(gr_kzk_topic_stamp_decode(NULL, 0, &got) == 0 && got == NULL);
    const char *bad[] = {"{", "{}", "[]", "null", "\"LLZSphugSjmNB1hmQ7rBtw\"", "{\"topic_id\":1}",
                         "{\"topic_id\":\"not-a-uuid\"}", "{\"topic_id\":\"AAAAAAAAAAAAAAAAAAAAAA\"}",
                         "{\"topic_id\":\"LLZSphugSjmNB1hmQ7rBtw\",\"topic_id\":\"LLZSphugSjmNB1hmQ7rBtw\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        got = (char *)"x";
        CHECK(DEC(gr_kzk_topic_stamp_decode, bad[i], &got) == GR_ECORRUPT && got == NULL);
    }
    char junk[4] = {'{', '\0', '"', '}'}; /* a NUL inside */
    CHECK(gr_kzk_topic_stamp_decode(junk, sizeof junk, &got) == GR_ECORRUPT && got == NULL);
}

static void test_controller(void) {
    size_t len;
    char *s = gr_kzk_controller_encode(1, 1600000000000LL, false, &len);
    CHECK(json_same(s, "{\"version\":1,\"brokerid\":1,\"timestamp\":\"1600000000000\"}"));
    CHECK(strstr(s, "\"timestamp\":\"1600000000000\"") != NULL);
    int32_t id = -5;
    CHECK(gr_kzk_controller_decode(s, len, &id) == 0 && id == 1);
    CHECK(!gr_kzk_controller_stamps(s, len));
    free(s);
    /* the stamps marker: an extra field Kafka 2.7's ControllerZNode.decode ignores */
    s = gr_kzk_controller_encode(7, 1600000000000LL, true, &len);
    CHECK(json_same(s, "{\"version\":1,\"brokerid\":7,\"timestamp\":\"1600000000000\",\"gregor_state_stamps\":1}"));
    CHECK(gr_kzk_controller_decode(s, len, &id) == 0 && id == 7 && gr_kzk_controller_stamps(s, len));
    free(s);
    CHECK(!gr_kzk_controller_stamps("3", 1));
    CHECK(!gr_kzk_controller_stamps("{\"gregor_state_stamps\":\"1\"}", 27));
    CHECK(!gr_kzk_controller_stamps("{\"gregor_state_stamps\":2}", 25));
    CHECK(!gr_kzk_controller_stamps("{", 1));
    CHECK(DEC(gr_kzk_controller_decode, "{\"version\":1,\"brokerid\":42,\"timestamp\":\"1\"}", &id) == 0 &&
          id == 42);
    CHECK(DEC(gr_kzk_controller_decode, "3", &id) == 0 && id == 3);
    CHECK(DEC(gr_kzk_controller_decode, "{\"brokerid\":\"1\"}", &id) == GR_ECORRUPT);
    CHECK(DEC(gr_kzk_controller_decode, "\"x\"", &id) == GR_ECORRUPT);
    CHECK(DEC(gr_kzk_controller_decode, "", &id) == GR_ECORRUPT);
    CHECK(DEC(gr_kzk_controller_decode, "{\"brokerid\":4294967296}", &id) == GR_ECORRUPT);

    s = gr_kzk_controller_epoch_encode(5, &len);
    CHECK(strcmp(s, "5") == 0 && len == 1);
    free(s);
    int32_t e = -1;
    CHECK(DEC(gr_kzk_controller_epoch_decode, "0", &e) == 0 && e == 0);
    CHECK(DEC(gr_kzk_controller_epoch_decode, "2147483647", &e) == 0 && e == 2147483647);
    CHECK(DEC(gr_kzk_controller_epoch_decode, "2147483648", &e) == GR_ECORRUPT);
    CHECK(DEC(gr_kzk_controller_epoch_decode, "-1", &e) == GR_ECORRUPT);
    CHECK(DEC(gr_kzk_controller_epoch_decode, "5 ", &e) == GR_ECORRUPT);
    CHECK(DEC(gr_kzk_controller_epoch_decode, "", &e) == GR_ECORRUPT);
    CHECK(DEC(gr_kzk_controller_epoch_decode, "123456789012", &e) == GR_ECORRUPT);
    CHECK(gr_kzk_controller_epoch_decode("17xyz", 2, &e) == 0 && e == 17);
}

static void test_cluster_id(void) {
    char id[23];
    gr_kzk_cluster_id_generate(id);
    CHECK(strlen(id) == 22);
    for (int i = 0; i < 22; i++)
        CHECK((id[i] >= 'A' && id[i] <= 'Z') || (id[i] >= 'a' && id[i] <= 'z') ||
              (id[i] >= '0' && id[i] <= '9') || id[i] == '-' || id[i] == '_');
    char id2[23];
    gr_kzk_cluster_id_generate(id2);
    CHECK(strcmp(id, id2) != 0);
    size_t len;
    char *s = gr_kzk_cluster_id_encode("AbCdEfGhIjKlMnOpQrStUv", &len);
    CHECK(strcmp(s, "{\"version\":\"1\",\"id\":\"AbCdEfGhIjKlMnOpQrStUv\"}") == 0);
    char out[64];
    CHECK(gr_kzk_cluster_id_decode(s, len, out) == 0 && strcmp(out, "AbCdEfGhIjKlMnOpQrStUv") == 0);
    free(s);
    CHECK(DEC(gr_kzk_cluster_id_decode, "{\"version\":\"1\",\"id\":5}", out) == GR_ECORRUPT);
    CHECK(DEC(gr_kzk_cluster_id_decode, "{\"version\":\"1\"}", out) == GR_ECORRUPT);
    CHECK(DEC(gr_kzk_cluster_id_decode, "{\"id\":\"\"}", out) == GR_ECORRUPT);
}

static void test_topic(void) {
    const char *kafka = "{\"version\":2,\"partitions\":{\"0\":[1,2,3],\"1\":[2,3,1]},"
                        "\"adding_replicas\":{\"0\":[3]},\"removing_replicas\":{}}";
    struct gr_kzk_topic_assignment a;
    CHECK(DEC(gr_kzk_topic_assignment_decode, kafka, &a) == 0);
    CHECK(a.n_partitions == 2 && a.topic_id == NULL);
    if (a.n_partitions == 2) {
        CHECK(a.partitions[0].partition == 0 && a.partitions[0].n_replicas == 3 &&
              a.partitions[0].replicas[2] == 3);
        CHECK(a.partitions[0].n_adding == 1 && a.partitions[0].adding[0] == 3);
        CHECK(a.partitions[0].n_removing == 0 && a.partitions[1].n_adding == 0);
        CHECK(a.partitions[1].partition == 1 && a.partitions[1].replicas[0] == 2);
    }
    size_t len;
    char *s = gr_kzk_topic_assignment_encode(&a, &len);
    CHECK(json_same(s, kafka));
    free(s);
    gr_kzk_topic_assignment_release(&a);

    /* Sorted by partition even if JSON order is not; 2.8's v3 with topic_id. */
    CHECK(DEC(gr_kzk_topic_assignment_decode,
              "{\"version\":3,\"topic_id\":\"vGKqNKUXQo2Y2ZzIHU0BNg\",\"partitions\":{\"10\":[1],\"2\":[2]},"
              "\"adding_replicas\":{},\"removing_replicas\":{\"10\":[1]}}",
              &a) == 0);
    CHECK(a.n_partitions == 2 && a.partitions[0].partition == 2 && a.partitions[1].partition == 10);
    CHECK(a.topic_id && strcmp(a.topic_id, "vGKqNKUXQo2Y2ZzIHU0BNg") == 0);
    CHECK(a.partitions[1].n_removing == 1);
    s = gr_kzk_topic_assignment_encode(&a, &len);
    CHECK(strstr(s, "\"version\":3") && strstr(s, "\"topic_id\":\"vGKqNKUXQo2Y2ZzIHU0BNg\""));
    free(s);
    gr_kzk_topic_assignment_release(&a);
    /* Older nodes without adding/removing. */
    CHECK(DEC(gr_kzk_topic_assignment_decode, "{\"version\":1,\"partitions\":{\"0\":[1]}}", &a) == 0);
    CHECK(a.n_partitions == 1);
    gr_kzk_topic_assignment_release(&a);

    const char *bad[] = {
        "{\"version\":2}", "{\"version\":2,\"partitions\":[]}",
        "{\"version\":3,\"topic_id\":\"abc\",\"partitions\":{\"0\":[1]}}", /* no Uuid */
        "{\"version\":3,\"topic_id\":7,\"partitions\":{\"0\":[1]}}",
        "{\"version\":2,\"partitions\":{\"x\":[1]}}", "{\"version\":2,\"partitions\":{\"-1\":[1]}}",
        "{\"version\":2,\"partitions\":{\"0\":[\"1\"]}}", "{\"version\":2,\"partitions\":{\"0\":1}}",
        "{\"version\":2,\"partitions\":{\"0\":[1]},\"adding_replicas\":{\"5\":[1]}}",
        "{\"version\":2,\"partitions\":{\"0\":[1]},\"adding_replicas\":[]}",
        "{\"version\":2,\"partitions\":{\"0\":[1],\"00\":[2]}}",
        "{\"version\":2,\"partitions\":{\"0\":[1.5]}}",
        "{\"version\":2,\"partitions\":{\"99999999999\":[1]}}",
        "{\"partitions\":{\"0\":[1]}}",
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(bad); i++) {
        int rc = DEC(gr_kzk_topic_assignment_decode, bad[i], &a);
        if (rc != GR_ECORRUPT) fprintf(stderr, "  accepted bad topic json #%zu: %s\n", i, bad[i]);
        CHECK(rc == GR_ECORRUPT);
        CHECK(a.partitions == NULL);
    }
}

static void test_state(void) {
    const char *kafka =
        "{\"version\":1,\"leader\":1,\"leader_epoch\":0,\"controller_epoch\":1,\"isr\":[1,2,3]}";
    struct gr_kzk_leader_and_isr s = {0};
    CHECK(DEC(gr_kzk_partition_state_decode, kafka, &s) == 0);
    CHECK(s.leader == 1 && s.leader_epoch == 0 && s.controller_epoch == 1 && s.n_isr == 3 &&
          s.isr[2] == 3);
    size_t len;
    char *e = gr_kzk_partition_state_encode(&s, &len);
    CHECK(strcmp(e, kafka) == 0); /* we write Kafka's order exactly */
    free(e);
    gr_kzk_leader_and_isr_release(&s);
    /* Empty ISR and leader -1 (offline). */
    struct gr_kzk_leader_and_isr off = {.leader = -1, .leader_epoch = 7, .controller_epoch = 3};
    e = gr_kzk_partition_state_encode(&off, &len);
    CHECK(strcmp(e, "{\"version\":1,\"leader\":-1,\"leader_epoch\":7,\"controller_epoch\":3,\"isr\":[]}") == 0);
    CHECK(gr_kzk_partition_state_decode(e, len, &s) == 0 && s.leader == -1 && s.n_isr == 0);
    gr_kzk_leader_and_isr_release(&s);
    free(e);
    const char *bad[] = {"{}", "{\"leader\":1}", "{\"leader\":1,\"leader_epoch\":0,\"controller_epoch\":1}",
                         "{\"leader\":\"1\",\"leader_epoch\":0,\"controller_epoch\":1,\"isr\":[]}",
                         "{\"leader\":1,\"leader_epoch\":0,\"controller_epoch\":1,\"isr\":[null]}",
                         "{\"leader\":1,\"leader_epoch\":0,\"controller_epoch\":1,\"isr\":{}}",
                         "[1,2]", "nonsense"};
    for (size_t i = 0; i < GR_ARRAY_LEN(bad); i++) {
        CHECK(DEC(gr_kzk_partition_state_decode, bad[i], &s) == GR_ECORRUPT);
        CHECK(s.isr == NULL);
    }
}

/* The decoder's allocation-free fast path and its jansson reference agree on documents around
 * the fast path's edges (it must either decode exactly as jansson or leave them to it). */
static void test_state_fast_path(void) {
    char big[1024];
    int n = snprintf(big, sizeof big, "{\"leader\":1,\"leader_epoch\":0,\"controller_epoch\":1,\"isr\":[");
    for (int i = 0; i < 70; i++) n += snprintf(big + n, sizeof big - (size_t)n, "%s%d", i ? "," : "", i);
    snprintf(big + n, sizeof big - (size_t)n, "]}");
    const char *docs[] = {
        "{\"version\":1,\"leader\":1,\"leader_epoch\":0,\"controller_epoch\":1,\"isr\":[1,2,3]}",
        " {\r\n\t\"isr\" : [ 3 , 1 ] , \"controller_epoch\":2,\"leader\":-1, \"leader_epoch\":9 } \n",
        "{\"leader\":2147483647,\"leader_epoch\":-2147483648,\"controller_epoch\":0,\"isr\":[]}",
        "{\"leader\":2147483648,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[]}",
        "{\"leader\":-2147483649,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[]}",
        "{\"leader\":99999999999,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[]}",
        "{\"leader\":-0,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[]}",
        "{\"leader\":01,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[]}",
        "{\"leader\":1.0,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[]}",
        "{\"leader\":1e2,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[]}",
        "{\"leader\":+1,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[]}",
        "{\"leader\":1,\"leader\":2,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[]}",
        "{\"leader\":1,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[],\"isr\":[1]}",
        "{\"le\\u0061der\":1,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[]}",
        "{\"leader\":1,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[],\"foo\":\"x\"}",
        "{\"version\":\"1\",\"leader\":1,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[]}",
        "{\"Leader\":1,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[]}",
        "{\"leader\":1,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[1,]}",
        "{\"leader\":1,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[1]}x",
        "{\"leader\":1,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[1]},",
        "{\"leader\":1,\"leader_epoch\":0,\"controller_epoch\":0,}",
        "{\"leader\":1,\"leader_epoch\":0,\"isr\":[1]}",
        "{\"leader\":1 2,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[]}",
        "{\"leader\":-,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[]}",
        "{\"leader\":1,\"leader_epoch\":0,\"controller_epoch\":0,\"isr\":[1]",
        big,
        "",
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(docs); i++) {
        struct gr_kzk_leader_and_isr f = {0}, j = {0};
        int rf = DEC(gr_kzk_partition_state_decode, docs[i], &f);
        int rj = DEC(gr_kzk_partition_state_decode_json, docs[i], &j);
        if (rf != rj) fprintf(stderr, "  doc %zu: fast %d, jansson %d: %s\n", i, rf, rj, docs[i]);
        CHECK(rf == rj);
        if (rf == 0)
            CHECK(f.leader == j.leader && f.leader_epoch == j.leader_epoch && f.controller_epoch == j.controller_epoch &&
                  f.n_isr == j.n_isr && (f.n_isr == 0 || memcmp(f.isr, j.isr, (size_t)f.n_isr * sizeof *f.isr) == 0));
        gr_kzk_leader_and_isr_release(&f);
        gr_kzk_leader_and_isr_release(&j);
    }
    struct gr_kzk_leader_and_isr s = {0};
    CHECK(DEC(gr_kzk_partition_state_decode, docs[1], &s) == 0 && s.leader == -1 && s.leader_epoch == 9 &&
          s.controller_epoch == 2 && s.n_isr == 2 && s.isr[0] == 3 && s.isr[1] == 1);
    gr_kzk_leader_and_isr_release(&s);
    CHECK(DEC(gr_kzk_partition_state_decode, big, &s) == 0 && s.n_isr == 70 && s.isr[69] == 69);
    gr_kzk_leader_and_isr_release(&s);
}

static void test_config(void) {
    struct gr_kzk_config c = {0};
    CHECK(DEC(gr_kzk_config_decode, "{\"version\":1,\"config\":{\"retention.ms\":\"1000\",\"cleanup.policy\":\"compact\"}}", &c) == 0);
    CHECK(c.n == 2 && strcmp(gr_kzk_config_get(&c, "retention.ms"), "1000") == 0);
    CHECK(gr_kzk_config_get(&c, "nope") == NULL);
    gr_kzk_config_set(&c, "retention.ms", "5");
    CHECK(c.n == 2 && strcmp(gr_kzk_config_get(&c, "retention.ms"), "5") == 0);
    size_t len;
    char *e = gr_kzk_config_encode(&c, &len);
    CHECK(json_same(e, "{\"version\":1,\"config\":{\"retention.ms\":\"5\",\"cleanup.policy\":\"compact\"}}"));
    free(e);
    gr_kzk_config_release(&c);
    e = gr_kzk_config_encode(NULL, &len);
    CHECK(strcmp(e, "{\"version\":1,\"config\":{}}") == 0);
    free(e);
    CHECK(DEC(gr_kzk_config_decode, "{\"version\":1,\"config\":{\"a\":1}}", &c) == GR_ECORRUPT);
    CHECK(DEC(gr_kzk_config_decode, "{\"version\":1}", &c) == GR_ECORRUPT);
    CHECK(c.n == 0);

    e = gr_kzk_config_change_encode("topics/T", &len);
    CHECK(strcmp(e, "{\"version\":2,\"entity_path\":\"topics/T\"}") == 0);
    char *ep;
    CHECK(gr_kzk_config_change_decode(e, len, &ep) == 0 && strcmp(ep, "topics/T") == 0);
    free(ep);
    free(e);
    CHECK(DEC(gr_kzk_config_change_decode, "{\"version\":2}", &ep) == GR_ECORRUPT && ep == NULL);
    /* Kafka's version 1: entity_type topics or clients, entity_name */
    CHECK(DEC(gr_kzk_config_change_decode, "{\"version\":1,\"entity_type\":\"topics\",\"entity_name\":\"T\"}", &ep) == 0 &&
          strcmp(ep, "topics/T") == 0);
    free(ep);
    CHECK(DEC(gr_kzk_config_change_decode, "{\"version\":1,\"entity_type\":\"clients\",\"entity_name\":\"c%3A1\"}", &ep) == 0 &&
          strcmp(ep, "clients/c%3A1") == 0);
    free(ep);
    CHECK(DEC(gr_kzk_config_change_decode, "{\"version\":1,\"entity_type\":\"users\",\"entity_name\":\"u\"}", &ep) == GR_ECORRUPT &&
          ep == NULL);
    CHECK(DEC(gr_kzk_config_change_decode, "{\"version\":1,\"entity_type\":\"topics\"}", &ep) == GR_ECORRUPT && ep == NULL);
    CHECK(DEC(gr_kzk_config_change_decode, "{\"version\":1,\"entity_type\":\"topics\",\"entity_name\":null}", &ep) ==
              GR_ECORRUPT && ep == NULL);
    /* other versions, and a version-2 body without its version, are refused as Kafka refuses them */
    CHECK(DEC(gr_kzk_config_change_decode, "{\"version\":3,\"entity_path\":\"topics/T\"}", &ep) == GR_ECORRUPT && ep == NULL);
    CHECK(DEC(gr_kzk_config_change_decode, "{\"entity_path\":\"topics/T\"}", &ep) == GR_ECORRUPT && ep == NULL);
    CHECK(DEC(gr_kzk_config_change_decode, "[1]", &ep) == GR_ECORRUPT && ep == NULL);
}

static void test_admin(void) {
    const char *rkafka = "{\"version\":1,\"partitions\":[{\"topic\":\"t\",\"partition\":0,\"replicas\":[1,2,3]}]}";
    struct gr_kzk_reassignment r;
    CHECK(DEC(gr_kzk_reassignment_decode, rkafka, &r) == 0);
    CHECK(r.n == 1 && strcmp(r.entries[0].topic, "t") == 0 && r.entries[0].partition == 0 &&
          r.entries[0].n_replicas == 3 && r.entries[0].replicas[1] == 2);
    size_t len;
    char *e = gr_kzk_reassignment_encode(&r, &len);
    CHECK(strcmp(e, rkafka) == 0);
    free(e);
    gr_kzk_reassignment_release(&r);
    CHECK(DEC(gr_kzk_reassignment_decode, "{\"version\":1,\"partitions\":[{\"topic\":\"t\",\"partition\":0}]}", &r) == GR_ECORRUPT);
    CHECK(DEC(gr_kzk_reassignment_decode, "{\"version\":1,\"partitions\":[{\"topic\":\"t\",\"partition\":-1,\"replicas\":[]}]}", &r) == GR_ECORRUPT);
    CHECK(DEC(gr_kzk_reassignment_decode, "{\"version\":1,\"partitions\":[5]}", &r) == GR_ECORRUPT);
    CHECK(r.entries == NULL);

    const char *pkafka = "{\"version\":1,\"partitions\":[{\"topic\":\"t\",\"partition\":0}]}";
    struct gr_kzk_tp *tps;
    int n;
    CHECK(DEC(gr_kzk_tp_list_decode, pkafka, &tps, &n) == 0);
    CHECK(n == 1 && strcmp(tps[0].topic, "t") == 0 && tps[0].partition == 0);
    e = gr_kzk_tp_list_encode(tps, n, &len);
    CHECK(strcmp(e, pkafka) == 0);
    free(e);
    gr_kzk_tps_release(tps, n);
    CHECK(DEC(gr_kzk_tp_list_decode, "{\"version\":1,\"partitions\":[]}", &tps, &n) == 0 && n == 0);
    gr_kzk_tps_release(tps, n);
    CHECK(DEC(gr_kzk_tp_list_decode, "{\"version\":1,\"partitions\":[{\"topic\":1,\"partition\":0}]}", &tps, &n) == GR_ECORRUPT);
    CHECK(DEC(gr_kzk_tp_list_decode, "{\"version\":1,\"partitions\":[{\"topic\":\"a\",\"partition\":0},{\"topic\":\"b\"}]}", &tps, &n) == GR_ECORRUPT);
    CHECK(tps == NULL && n == 0);

    e = gr_kzk_log_dir_event_encode(1, 1, &len);
    CHECK(strcmp(e, "{\"version\":1,\"broker\":1,\"event\":1}") == 0);
    int32_t b = 0, ev = 0;
    CHECK(gr_kzk_log_dir_event_decode(e, len, &b, &ev) == 0 && b == 1 && ev == 1);
    free(e);
    CHECK(DEC(gr_kzk_log_dir_event_decode, "{\"version\":1,\"broker\":\"1\",\"event\":1}", &b, &ev) == GR_ECORRUPT);

    struct gr_kzk_producer_id_block pb = {.broker = 1, .block_start = 0, .block_end = 999};
    e = gr_kzk_producer_id_block_encode(&pb, &len);
    CHECK(strcmp(e, "{\"version\":1,\"broker\":1,\"block_start\":\"0\",\"block_end\":\"999\"}") == 0);
    struct gr_kzk_producer_id_block pb2;
    CHECK(gr_kzk_producer_id_block_decode(e, len, &pb2) == 0 && pb2.block_end == 999 && pb2.broker == 1);
    free(e);
    CHECK(DEC(gr_kzk_producer_id_block_decode, "{\"version\":1,\"broker\":1,\"block_start\":\"x\",\"block_end\":\"9\"}", &pb2) == GR_ECORRUPT);

    const char *fkafka = "{\"version\":1,\"status\":1,\"features\":{\"f\":{\"min_version_level\":1,\"max_version_level\":2}}}";
    struct gr_kzk_feature_znode f;
    CHECK(DEC(gr_kzk_feature_znode_decode, fkafka, &f) == 0);
    CHECK(f.status == 1 && f.n_features == 1 && f.features[0].max_version == 2);
    e = gr_kzk_feature_znode_encode(&f, &len);
    CHECK(strcmp(e, fkafka) == 0);
    free(e);
    gr_kzk_feature_znode_release(&f);
    CHECK(DEC(gr_kzk_feature_znode_decode, "{\"version\":1,\"status\":1}", &f) == GR_ECORRUPT);
}

static void test_endpoint(void) {
    struct gr_kzk_endpoint ep;
    CHECK(gr_kzk_endpoint_parse("PLAINTEXT://:9092", &ep) == 0 && strcmp(ep.host, "") == 0 &&
          ep.port == 9092);
    free(ep.listener);
    free(ep.host);
    CHECK(gr_kzk_endpoint_parse("EXTERNAL://[fe80::1]:1", &ep) == 0 && strcmp(ep.host, "fe80::1") == 0);
    free(ep.listener);
    free(ep.host);
    CHECK(gr_kzk_endpoint_parse("://h:1", &ep) == GR_ECORRUPT);
    CHECK(gr_kzk_endpoint_parse("A://h", &ep) == GR_ECORRUPT);
    CHECK(gr_kzk_endpoint_parse("A://h:", &ep) == GR_ECORRUPT);
    CHECK(gr_kzk_endpoint_parse("A://[:1", &ep) == GR_ECORRUPT);
    CHECK(gr_kzk_endpoint_parse("A://]:1", &ep) == GR_ECORRUPT);
}

int main(void) {
    test_broker();
    test_controller();
    test_topic_stamp();
    test_cluster_id();
    test_topic();
    test_state();
    test_state_fast_path();
    test_config();
    test_admin();
    test_endpoint();
    if (test_failures) {
        fprintf(stderr, "test_zk_json: %d check(s) failed\n", test_failures);
        return 1;
    }
    printf("test_zk_json: ok\n");
    return 0;
}
