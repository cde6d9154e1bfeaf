/* The broker side of controlled shutdown (Kafka 2.7's KafkaServer.controlledShutdown): before a
 * broker with controlled.shutdown.enable=true stops, it asks the active controller to move its
 * leaderships away, retrying until the controller answers NONE with no partitions remaining.
 *
 * Each attempt (at most controlled.shutdown.max.retries):
 *   1. find the controller: /controller in ZooKeeper, then its registration /brokers/ids/N (the
 *      endpoint of inter.broker.listener.name); if ZooKeeper cannot be read, the controller id of
 *      this broker's metadata cache (the address then comes from the cache too). A new
 *      controller, or an I/O error on the previous attempt, means a new connection. The
 *      controller may be this broker itself: the request then goes through its own listener.
 *   2. send ControlledShutdown v3 {BrokerId, BrokerEpoch} through the Kafka client
 *      (net/kafka_client.h); connect bounded by
 *      controller.socket.timeout.ms, the exchange by request.timeout.ms;
 *   3. NONE with an empty RemainingPartitions -> done. Otherwise (an error such as
 *      NOT_CONTROLLER / STALE_BROKER_EPOCH, partitions remaining, no controller, I/O failure)
 *      sleep controlled.shutdown.retry.backoff.ms and try again.
 * After the last failed attempt the broker proceeds with an unclean shutdown (WARN).
 *
 * Threading: blocking; called on the thread running the broker's shut-down. */
#ifndef GR_BROKER_CONTROLLED_SHUTDOWN_CLIENT_H
#define GR_BROKER_CONTROLLED_SHUTDOWN_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

struct gr_kzk;
struct gr_mdc;

struct gr_cs_client_config {
    int32_t broker_id;
    int64_t broker_epoch;          /* the broker's current epoch (czxid), -1 if unknown */
    struct gr_kzk *kzk;            /* borrowed; may be NULL (then only the metadata cache) */
    struct gr_mdc *metadata; /* borrowed; may be NULL */
    const char *listener;          /* inter.broker.listener.name; NULL = the first endpoint */
    int32_t max_retries;           /* controlled.shutdown.max.retries (>= 1 attempt is made if > 0) */
    int64_t retry_backoff_ms;      /* controlled.shutdown.retry.backoff.ms */
    int32_t socket_timeout_ms;     /* controller.socket.timeout.ms */
    int32_t request_timeout_ms;    /* request.timeout.ms */
};

/* Runs the attempts described above. Returns true when the controller confirmed (NONE, nothing
 * remaining), false when every attempt failed (or max_retries <= 0). */
bool gr_controlled_shutdown_run(const struct gr_cs_client_config *cfg);

#endif
