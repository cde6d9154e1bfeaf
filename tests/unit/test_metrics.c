/* Metrics registry: gauges (stored and callback), meters, histograms, timers, removal, and the
 * JSON dump (checked by parsing it back with jansson), the Prometheus text exposition. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/metrics.h"
#include "common/util.h"
#include "support/check.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

static int64_t forty_two(void *arg) { return *(int64_t *)arg; }

static char *dump_prometheus(struct gr_metrics *reg) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(gr_metrics_dump_prometheus(reg, f) == 0);
    fclose(f);
    return buf;
}

static bool has_line(const char *text, const char *line) {
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p++)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == 0)) return true;
    return false;
}

static int count_substr(const char *text, const char *s) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, s)); p++) n++;
    return n;
}

static int collector_calls;
static void test_collector(void *arg, struct gr_prom_out *o) {
    collector_calls++;
    gr_prom_gauge(o, "kafka.log:type=Log,name=Size,topic=my.topic-1,partition=3", 1234);
    gr_prom_gauge(o, (const char *)arg, 7); /* a label value that needs escaping */
    gr_prom_meter(o, "kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=my.topic-1", 10);
    gr_prom_raw(o, "process_open_fds", "gauge", NULL, "Number of open file descriptors.", 12);
}

/* The Prometheus text exposition: JMX exporter names, label escaping, one TYPE line per family
 * with its samples together, summaries for timers and histograms, collectors. */
static void test_prometheus(void) {
    struct gr_metrics *reg = gr_metrics_new();
    char fam[256];
    CHECK(strcmp(gr_prom_family(fam, sizeof fam, "kafka.controller:type=KafkaController,name=ActiveControllerCount"),
                 "kafka_controller_kafkacontroller_activecontrollercount") == 0);
    CHECK(strcmp(gr_prom_family(fam, sizeof fam, "kafka.log:type=LogCleanerManager,name=max-dirty-percent"),
                 "kafka_log_logcleanermanager_max_dirty_percent") == 0);
    CHECK(strcmp(gr_prom_family(fam, sizeof fam, "no colon"), "") == 0);

    gr_gauge_set(gr_metrics_gauge(reg, "kafka.controller:type=KafkaController,name=ActiveControllerCount"), 1);
    gr_meter_mark(gr_metrics_meter(reg, "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec"), 2);
    gr_meter_mark(gr_metrics_meter(reg, "kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec"), 30);
    gr_meter_mark(gr_metrics_meter(reg, "kafka.server:type=X,name=Plain"), 4);
    gr_gauge_set(gr_metrics_gauge(reg, "kafka.controller:type=ControllerChannelManager,name=QueueSize,broker-id=2"), 5);
    struct gr_timer *t =
        gr_metrics_timer(reg, "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs");
    gr_timer_update(t, 2);
    gr_timer_update(t, 4);
    gr_histogram_update(gr_metrics_histogram(reg, "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce"),
                        1.5);
    const char *evil = "kafka.server:type=T,name=Evil,client-id=a\"b\\c\nd";
    gr_metrics_add_collector(reg, test_collector, (void *)evil);

    char *out = dump_prometheus(reg);
    CHECK(collector_calls == 1);
    CHECK(has_line(out, "# TYPE kafka_controller_kafkacontroller_activecontrollercount gauge"));
    CHECK(has_line(out, "kafka_controller_kafkacontroller_activecontrollercount 1"));
    CHECK(has_line(out, "# TYPE kafka_controller_controllerstats_uncleanleaderelections_total counter"));
    CHECK(has_line(out, "kafka_controller_controllerstats_uncleanleaderelections_total 2"));
    CHECK(has_line(out, "kafka_server_x_plain_count 4"));
    CHECK(has_line(out, "kafka_controller_controllerchannelmanager_queuesize{broker_id=\"2\"} 5"));
    CHECK(has_line(out, "# TYPE kafka_controller_controllerstats_leaderelectionrateandtimems summary"));
    CHECK(has_line(out, "kafka_controller_controllerstats_leaderelectionrateandtimems_count 2"));
    CHECK(has_line(out, "kafka_controller_controllerstats_leaderelectionrateandtimems_sum 6"));
    CHECK(strstr(out, "kafka_controller_controllerstats_leaderelectionrateandtimems{quantile=\"0.99\"} ") != NULL);
    CHECK(has_line(out, "kafka_network_requestmetrics_totaltimems{request=\"Produce\",quantile=\"0.50\"} 1.5"));
    /* issue 27: every <N>thPercentile Kafka's histograms have, as the JMX exporter labels them */
    static const char *const kq[] = {"0.50", "0.75", "0.95", "0.98", "0.99", "0.999"};
    for (size_t i = 0; i < sizeof kq / sizeof kq[0]; i++) {
        char want[160];
        snprintf(want, sizeof want, "kafka_network_requestmetrics_totaltimems{request=\"Produce\",quantile=\"%s\"} 1.5",
                 kq[i]);
        CHECK(has_line(out, want));
    }
    CHECK(has_line(out, "kafka_log_log_size{topic=\"my.topic-1\",partition=\"3\"} 1234"));
    CHECK(has_line(out, "kafka_server_t_evil{client_id=\"a\\\"b\\\\c\\nd\"} 7"));
    CHECK(has_line(out, "process_open_fds 12"));
    CHECK(has_line(out, "# HELP process_open_fds Number of open file descriptors."));
    /* Registry meter and collector meter share a family: one TYPE line, samples adjacent. */
    CHECK(count_substr(out, "# TYPE kafka_server_brokertopicmetrics_bytesin_total counter\n") == 1);
    CHECK(strstr(out, "\nkafka_server_brokertopicmetrics_bytesin_total 30\n"
                      "kafka_server_brokertopicmetrics_bytesin_total{topic=\"my.topic-1\"} 10\n") != NULL);
    /* Every family has exactly one TYPE line. */
    CHECK(count_substr(out, "# TYPE kafka_controller_controllerstats_leaderelectionrateandtimems ") == 1);
    free(out);

    gr_metrics_remove_collector(reg, test_collector, (void *)evil);
    out = dump_prometheus(reg);
    CHECK(collector_calls == 1 && strstr(out, "kafka_log_log_size") == NULL);
    free(out);

    /* The process collector reads /proc/self. */
    gr_metrics_add_collector(reg, gr_metrics_process_collector, NULL);
    out = dump_prometheus(reg);
    CHECK(strstr(out, "\nprocess_resident_memory_bytes ") && strstr(out, "\nprocess_cpu_seconds_total "));
    CHECK(strstr(out, "\nprocess_open_fds ") && strstr(out, "\nprocess_start_time_seconds "));
    /* ... and the malloc heap: a live 1 MiB block is in use */
    void *big = malloc(1 << 20);
    memset(big, 1, 1 << 20);
    free(out);
    out = dump_prometheus(reg);
    const char *hu = strstr(out, "\ngregor_heap_in_use_bytes ");
    CHECK(hu != NULL);
    if (!UNDER_ASAN) /* ASan's allocator is not glibc's: mallinfo2 does not see it */
        CHECK(hu && strtod(hu + strlen("\ngregor_heap_in_use_bytes "), NULL) >= (double)(1 << 20));
    CHECK(strstr(out, "\ngregor_heap_free_bytes ") != NULL);
    free(big);
    free(out);
    gr_metrics_free(reg);
}

static json_t *dump_and_parse(struct gr_metrics *reg) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(gr_metrics_dump_json(reg, f) == 0);
    fclose(f);
    json_error_t err;
    json_t *j = json_loads(buf, 0, &err);
    if (!j) fprintf(stderr, "bad JSON: %s\n%s\n", err.text, buf);
    free(buf);
    return j;
}

int main(void) {
    struct gr_metrics *reg = gr_metrics_new();
    char name[256];
    CHECK(strcmp(gr_metrics_name(name, sizeof name, "kafka.controller", "KafkaController", "ActiveControllerCount"),
                 "kafka.controller:type=KafkaController,name=ActiveControllerCount") == 0);

    struct gr_gauge *g = gr_metrics_gauge(reg, name);
    CHECK(g != NULL);
    CHECK(gr_metrics_gauge(reg, name) == g); /* same name, same kind: same metric */
    CHECK(gr_metrics_timer(reg, name) == NULL); /* kind clash */
    gr_gauge_set(g, 1);
    gr_gauge_add(g, 2);
    CHECK(gr_gauge_get(g) == 3);
    int64_t v = 0;
    CHECK(gr_metrics_read_gauge(reg, name, &v) == 0 && v == 3);
    CHECK(gr_metrics_read_gauge(reg, "nope", &v) == -ENOENT);

    int64_t cb_val = 42;
    gr_metrics_gauge_fn(reg, "kafka.controller:type=KafkaController,name=GlobalTopicCount", forty_two, &cb_val);
    CHECK(gr_metrics_read_gauge(reg, "kafka.controller:type=KafkaController,name=GlobalTopicCount", &v) == 0 &&
          v == 42);

    struct gr_meter *m = gr_metrics_meter(reg, "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec");
    gr_meter_mark(m, 3);
    gr_meter_mark(m, 2);
    CHECK(gr_meter_count(m) == 5);
    CHECK(gr_meter_one_minute_rate(m) > 0);

    struct gr_histogram *h = gr_metrics_histogram(reg, "kafka.controller:type=ControllerEventManager,name=EventQueueTimeMs");
    for (int i = 1; i <= 100; i++) gr_histogram_update(h, i);
    struct gr_histogram_snapshot s;
    gr_histogram_snapshot(h, &s);
    CHECK(s.count == 100 && s.min == 1 && s.max == 100);
    CHECK(s.mean > 50.4 && s.mean < 50.6);
    CHECK(s.p50 >= 49 && s.p50 <= 52);
    CHECK(s.p99 >= 98 && s.p99 <= 100);
    /* Yammer's Snapshot.getValue: position q * (n + 1), interpolated */
    CHECK(fabs(s.p75 - 75.75) < 1e-9 && fabs(s.p95 - 95.95) < 1e-9 && fabs(s.p98 - 98.98) < 1e-9);
    CHECK(s.p999 == 100);
    /* the window slides: after many large samples, percentiles follow */
    for (int i = 0; i < 2 * GR_METRICS_WINDOW; i++) gr_histogram_update(h, 1000);
    gr_histogram_snapshot(h, &s);
    CHECK(s.p50 == 1000 && s.min == 1);
    gr_histogram_clear(h);
    CHECK(gr_histogram_count(h) == 0);
    gr_histogram_snapshot(h, &s);
    CHECK(s.count == 0 && s.p99 == 0);

    struct gr_timer *t = gr_metrics_timer(reg, "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs");
    gr_timer_update(t, 2.5);
    gr_timer_update(t, 7.5);
    gr_timer_snapshot(t, &s);
    CHECK(s.count == 2 && s.min == 2.5 && s.max == 7.5 && s.mean == 5);

    json_t *j = dump_and_parse(reg);
    CHECK(j && json_is_object(j));
    if (j) {
        json_t *e = json_object_get(j, "kafka.controller:type=KafkaController,name=ActiveControllerCount");
        CHECK(e && strcmp(json_string_value(json_object_get(e, "type")), "gauge") == 0);
        CHECK(e && json_integer_value(json_object_get(e, "value")) == 3);
        e = json_object_get(j, "kafka.controller:type=KafkaController,name=GlobalTopicCount");
        CHECK(e && json_integer_value(json_object_get(e, "value")) == 42);
        e = json_object_get(j, "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs");
        CHECK(e && strcmp(json_string_value(json_object_get(e, "type")), "timer") == 0);
        CHECK(e && json_integer_value(json_object_get(e, "count")) == 2);
        CHECK(e && json_number_value(json_object_get(e, "max")) == 7.5);
        CHECK(e && json_object_get(e, "p99") && json_object_get(e, "oneMinuteRate"));
        e = json_object_get(j, "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec");
        CHECK(e && json_integer_value(json_object_get(e, "count")) == 5);
        e = json_object_get(j, "kafka.controller:type=ControllerEventManager,name=EventQueueTimeMs");
        CHECK(e && strcmp(json_string_value(json_object_get(e, "type")), "histogram") == 0);
        CHECK(json_object_size(j) == 5);
        json_decref(j);
    }

    /* removal: the callback gauge is gone and never called again */
    CHECK(gr_metrics_remove(reg, "kafka.controller:type=KafkaController,name=GlobalTopicCount") == 0);
    CHECK(gr_metrics_remove(reg, "kafka.controller:type=KafkaController,name=GlobalTopicCount") == -ENOENT);
    j = dump_and_parse(reg);
    CHECK(j && json_object_size(j) == 4);
    json_decref(j);

    /* atomic file dump */
    char dir[] = "/tmp/gr_metrics_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char *path = gr_asprintf("%s/gregor-metrics.json", dir);
    CHECK(gr_metrics_dump_file(reg, path) == 0);
    json_error_t err;
    j = json_load_file(path, 0, &err);
    CHECK(j && json_object_size(j) == 4);
    json_decref(j);
    char *tmp = gr_asprintf("%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0);
    unlink(path);
    rmdir(dir);
    free(tmp);
    free(path);
    CHECK(gr_metrics_dump_file(reg, "/nonexistent-dir/x.json") < 0);

    gr_metrics_free(reg);
    test_prometheus();
    if (test_failures) {
        fprintf(stderr, "test_metrics: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_metrics: ok\n");
    return 0;
}
