/* Kafka's BrokerTopicStats: the kafka.server:type=BrokerTopicMetrics meters, marked once for all
 * topics (no topic tag) and once for the topic (topic=<name>), as Kafka's
 * brokerTopicStats.topicStats(topic) + allTopicsStats do.
 *
 * Ownership: one struct gr_bts per broker (struct gr_broker.topic_stats), made by gr_bts_new
 * over the broker's registry (common/metrics.h), which it borrows and which must outlive it.
 * Meters live in that registry; the all-topics ones are created with the gr_bts (exposed at 0
 * from the start), a topic's on its first mark (a per-topic meter nobody marked is not exposed,
 * as Kafka's lazy meters); the gr_bts remembers each one's pointer per topic, so a mark on the Produce and
 * Fetch paths costs a hash lookup under a read lock instead of formatting the meter's name and
 * searching the registry.
 * Locking: any thread; a read-write lock guards the topic table, the meters lock themselves.
 * Lifetime: per-topic meters stay until gr_bts_free, also after the topic is deleted (Kafka
 * removes them). A NULL gr_bts makes every call a no-op.
 * Hostile names: a request may name any topic (denied, unknown, not even a legal name). Per-topic
 * meters are made only for a legal Kafka topic name ([a-zA-Z0-9._-], at most 249 characters) that
 * the topic filter (gr_bts_set_topic_filter: the broker's metadata cache) knows; other marks
 * count for all topics only. So the registry and /metrics grow with the cluster's topics, not
 * with what clients send (Kafka marks per topic only for existing, authorized partitions). */
#ifndef GR_BROKER_BROKER_TOPIC_STATS_H
#define GR_BROKER_BROKER_TOPIC_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gr_metrics;
struct gr_bts;

enum gr_bts_meter {
    GR_BTS_MESSAGES_IN,           /* MessagesInPerSec */
    GR_BTS_BYTES_IN,              /* BytesInPerSec */
    GR_BTS_BYTES_OUT,             /* BytesOutPerSec */
    GR_BTS_REPLICATION_BYTES_OUT, /* ReplicationBytesOutPerSec */
    GR_BTS_TOTAL_PRODUCE,         /* TotalProduceRequestsPerSec */
    GR_BTS_FAILED_PRODUCE,        /* FailedProduceRequestsPerSec */
    GR_BTS_TOTAL_FETCH,           /* TotalFetchRequestsPerSec */
    GR_BTS_FAILED_FETCH,          /* FailedFetchRequestsPerSec */
    GR_BTS_PRODUCE_CONVERSIONS,   /* ProduceMessageConversionsPerSec: records up-converted from magic 0/1 */
    GR_BTS_FETCH_CONVERSIONS,     /* FetchMessageConversionsPerSec: records down-converted for v0-v3 fetches */
    GR_BTS_N
};

/* NULL when reg is NULL. */
struct gr_bts *gr_bts_new(struct gr_metrics *reg);
void gr_bts_free(struct gr_bts *s);

/* Does the topic exist (e.g. in the metadata cache)? Called only when a topic has no meters yet;
 * any thread. */
typedef bool (*gr_bts_topic_known_fn)(void *ctx, const char *topic);
/* Sets the filter (before the first mark; ctx borrowed, must outlive s). Without one every legal
 * name gets meters (unit tests). */
void gr_bts_set_topic_filter(struct gr_bts *s, gr_bts_topic_known_fn fn, void *ctx);

/* Marks the meter by n for all topics and, when topic is not NULL, for the topic. */
void gr_bts_mark(struct gr_bts *s, const char *topic, enum gr_bts_meter meter, int64_t n);

/* Records in a buffer of RecordBatch v2 batches (the count field of each complete batch). */
int64_t gr_bts_record_count(const uint8_t *batches, size_t len);

#endif
