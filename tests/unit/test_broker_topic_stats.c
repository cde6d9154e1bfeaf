/* BrokerTopicMetrics (broker/broker_topic_stats.h): marks reach the all-topics and the per-topic
 * meters of the registry under Kafka's names, meters appear only once marked, the topic table
 * grows, and concurrent marks from several threads all count. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "broker/broker_topic_stats.h"
#include "common/metrics.h"
#include "support/check.h"


#define BTM "kafka.server:type=BrokerTopicMetrics,name="

static int64_t count(struct gr_metrics *reg, const char *name) {
    return gr_meter_count(gr_metrics_meter(reg, name));
}

struct worker {
    struct gr_bts *s;
    int id;
};

static bool only_orders(void *ctx, const char *topic) {
    (*(int *)ctx)++;
    return strcmp(topic, "orders") == 0;
}

/* Hostile topic names: no per-topic meter for an illegal name or one the filter does not know. */
static void test_topic_filter(void) {
    struct gr_metrics *reg = gr_metrics_new();
    struct gr_bts *s = gr_bts_new(reg);
    int asked = 0;
    gr_bts_set_topic_filter(s, only_orders, &asked);
    gr_bts_mark(s, "orders", GR_BTS_TOTAL_PRODUCE, 1);
    gr_bts_mark(s, "orders", GR_BTS_TOTAL_PRODUCE, 1);
    gr_bts_mark(s, "ghost", GR_BTS_TOTAL_PRODUCE, 1);
    gr_bts_mark(s, "a,topic=b", GR_BTS_TOTAL_PRODUCE, 1);
    gr_bts_mark(s, "evil\"\n}", GR_BTS_TOTAL_PRODUCE, 1);
    CHECK(asked == 2); /* orders once (then cached), ghost; illegal names never reach the filter */
    CHECK(count(reg, BTM "TotalProduceRequestsPerSec") == 5);
    CHECK(count(reg, BTM "TotalProduceRequestsPerSec,topic=orders") == 2);
    CHECK(gr_metrics_remove(reg, BTM "TotalProduceRequestsPerSec,topic=ghost") != 0);
    CHECK(gr_metrics_remove(reg, BTM "TotalProduceRequestsPerSec,topic=a,topic=b") != 0);
    gr_bts_free(s);
    gr_metrics_free(reg);
}

static void *marker(void *arg) {
    struct worker *w = arg;
    char topic[32];
    for (int i = 0; i < 20000; i++) {
        snprintf(topic, sizeof topic, "t%d", (i + w->id) % 50);
        gr_bts_mark(w->s, topic, GR_BTS_TOTAL_FETCH, 1);
    }
    return NULL;
}

int main(void) {
    CHECK(gr_bts_new(NULL) == NULL);
    gr_bts_mark(NULL, "t", GR_BTS_BYTES_IN, 1); /* no registry: a no-op */

    struct gr_metrics *reg = gr_metrics_new();
    struct gr_bts *s = gr_bts_new(reg);
    gr_bts_mark(s, "orders", GR_BTS_BYTES_IN, 10);
    gr_bts_mark(s, "orders", GR_BTS_BYTES_IN, 5);
    gr_bts_mark(s, "audit", GR_BTS_BYTES_IN, 1);
    gr_bts_mark(s, NULL, GR_BTS_REPLICATION_BYTES_OUT, 7);
    gr_bts_mark(s, "orders", GR_BTS_N, 1); /* out of range: ignored */
    /* Never marked: not in the registry (remove finds nothing). */
    CHECK(gr_metrics_remove(reg, BTM "FailedProduceRequestsPerSec,topic=orders") != 0);
    CHECK(gr_metrics_remove(reg, BTM "ReplicationBytesOutPerSec,topic=orders") != 0);
    CHECK(count(reg, BTM "BytesInPerSec,topic=orders") == 15);
    CHECK(count(reg, BTM "BytesInPerSec,topic=audit") == 1);
    CHECK(count(reg, BTM "BytesInPerSec") == 16);
    CHECK(count(reg, BTM "ReplicationBytesOutPerSec") == 7);

    /* 300 topics: the table grows past its first 64 slots; every topic keeps its own meter. */
    char name[128], topic[32];
    for (int i = 0; i < 300; i++) {
        snprintf(topic, sizeof topic, "many-%d", i);
        gr_bts_mark(s, topic, GR_BTS_MESSAGES_IN, i + 1);
    }
    int bad = 0;
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof name, BTM "MessagesInPerSec,topic=many-%d", i);
        bad += count(reg, name) != i + 1;
    }
    CHECK(bad == 0);
    CHECK(count(reg, BTM "MessagesInPerSec") == 300 * 301 / 2);

    /* Four threads, 50 topics (new ones created while others mark): nothing lost. */
    pthread_t th[4];
    struct worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){.s = s, .id = i};
        pthread_create(&th[i], NULL, marker, &w[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    CHECK(count(reg, BTM "TotalFetchRequestsPerSec") == 80000);
    int64_t sum = 0;
    for (int i = 0; i < 50; i++) {
        snprintf(name, sizeof name, BTM "TotalFetchRequestsPerSec,topic=t%d", i);
        sum += count(reg, name);
    }
    CHECK(sum == 80000);

    gr_bts_free(s);
    gr_metrics_free(reg);
    test_topic_filter();
    return test_failures != 0;
}
