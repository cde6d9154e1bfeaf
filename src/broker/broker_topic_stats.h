/* Kafka's BrokerTopicStats: the kafka.server:type=BrokerTopicMetrics meters, marked once for all
 * topics (no topic tag) and once for the topic (topic=<name>), as Kafka's
 * brokerTopicStats.topicStats(topic) + allTopicsStats do. Meters live in the broker's registry
 * (common/metrics.h) and are created on first use; a NULL registry makes every call a no-op.
 * Any thread. Per-topic meters stay after the topic is deleted (Kafka removes them). */
#ifndef GR_BROKER_BROKER_TOPIC_STATS_H
#define GR_BROKER_BROKER_TOPIC_STATS_H

#include <stddef.h>
#include <stdint.h>

struct gr_metrics;

/* Marks "<meter>" (e.g. "BytesInPerSec") by n for all topics and, when topic is not NULL, for
 * the topic. */
void gr_bts_mark(struct gr_metrics *reg, const char *topic, const char *meter, int64_t n);

/* Records in a buffer of RecordBatch v2 batches (the count field of each complete batch). */
int64_t gr_bts_record_count(const uint8_t *batches, size_t len);

#endif
