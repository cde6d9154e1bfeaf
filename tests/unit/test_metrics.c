/* Metrics registry: gauges (stored and callback), meters, histograms, timers, removal, and the
 * JSON dump (checked by parsing it back with jansson). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/metrics.h"
#include "common/util.h"
#include "support/check.h"

static int64_t forty_two(void *arg) { return *(int64_t *)arg; }

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
    if (test_failures) {
        fprintf(stderr, "test_metrics: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_metrics: ok\n");
    return 0;
}
