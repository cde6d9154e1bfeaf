/* Kafka's LogConfig.fromProps: the one function that gives a log its settings.
 *
 * Every setting of a partition log (struct gr_plog_config), plus the topic settings that live
 * beside the log (retention.ms/bytes in the log manager's entry, min.insync.replicas and
 * unclean.leader.election.enable in the replica manager), is resolved here from the config
 * layers of common/config_model.h, each key in Kafka's precedence:
 *
 *   topic override  >  /config/brokers/<id>  >  /config/brokers/<default>
 *   >  server.properties  >  Kafka's default
 *
 * (Kafka: LogConfig.fromProps(KafkaConfig's dynamic log defaults, topic overrides), the defaults
 * being kept current by DynamicLogConfig.reconfigure.) Callers: the log manager at start-up
 * (logs open with server.properties, then the start-up hook gives every loaded log its topic's
 * resolution before anything runs), the replica manager at LeaderAndIsr and on every topic or
 * broker config change (gr_rm_reload_topic_config). No other code turns config values into
 * log settings.
 *
 * Pure function over borrowed data: no locks, no I/O, any thread. An unparsable value at a
 * layer (values are validated when they are written) falls back to Kafka's default. */
#ifndef GR_STORAGE_LOG_CONFIG_H
#define GR_STORAGE_LOG_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "common/config_model.h"
#include "storage/log.h"

struct gr_log_config {
    struct gr_plog_config lc; /* the log's own settings (gr_plog_set_config) */
    int64_t retention_ms;     /* retention.ms (-1: unlimited) */
    int64_t retention_bytes;  /* retention.bytes (< 0: unlimited) */
    int32_t min_insync_replicas;
    bool unclean_leader_election_enable;
};

/* Resolves every topic setting over `layers` (layers->static_cfg may be NULL: Kafka's
 * defaults). transactional.id.expiration.ms (a broker-only key, not dynamic in Kafka) comes
 * from layers->static_cfg. */
void gr_log_config_resolve(const struct gr_cfg_layers *layers, struct gr_log_config *out);

#endif
