/* BrokerTopicMetrics meters: see broker_topic_stats.h. */
#include "broker/broker_topic_stats.h"

#include <stdio.h>

#include "common/metrics.h"

void gr_bts_mark(struct gr_metrics *reg, const char *topic, const char *meter, int64_t n) {
    if (!reg) return;
    char name[384];
    snprintf(name, sizeof name, "kafka.server:type=BrokerTopicMetrics,name=%s", meter);
    struct gr_meter *m = gr_metrics_meter(reg, name);
    if (m) gr_meter_mark(m, n);
    if (!topic) return;
    snprintf(name, sizeof name, "kafka.server:type=BrokerTopicMetrics,name=%s,topic=%s", meter, topic);
    m = gr_metrics_meter(reg, name);
    if (m) gr_meter_mark(m, n);
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* RecordBatch v2: baseOffset int64, batchLength int32 (bytes after this field), ...,
 * records count int32 at byte 57. */
int64_t gr_bts_record_count(const uint8_t *batches, size_t len) {
    int64_t n = 0;
    size_t off = 0;
    while (off + 61 <= len) {
        uint32_t blen = be32(batches + off + 8);
        if (blen < 49 || off + 12 + blen > len) break;
        n += (int32_t)be32(batches + off + 57);
        off += 12 + (size_t)blen;
    }
    return n;
}
