/* The topic/broker config model: Kafka 2.7's LogConfig key table (name, type, default, range,
 * broker synonyms) and the rules of dynamic broker configs (which keys may change at run time,
 * per broker or cluster-wide), plus the layering that gives every key its value and source:
 *
 *   topic override (TOPIC_CONFIG)  >  /config/brokers/<id> (DYNAMIC_BROKER_CONFIG)
 *   >  /config/brokers/<default> (DYNAMIC_DEFAULT_BROKER_CONFIG)  >  server.properties
 *   (STATIC_BROKER_CONFIG)  >  Kafka's default (DEFAULT_CONFIG)
 *
 * Pure functions over borrowed data: no locks, no I/O; any thread. The layers (struct gr_props)
 * are borrowed for the duration of a call. Used by the DescribeConfigs/AlterConfigs handlers,
 * the broker's DynamicConfigManager and CreateTopics validation. */
#ifndef GR_COMMON_CONFIG_MODEL_H
#define GR_COMMON_CONFIG_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gr_config;

/* ConfigSource ids of DescribeConfigs v1+ (and CreateTopics v5). */
enum {
    GR_CFG_SRC_UNKNOWN = 0,
    GR_CFG_SRC_TOPIC = 1,
    GR_CFG_SRC_DYNAMIC_BROKER = 2,
    GR_CFG_SRC_DYNAMIC_DEFAULT_BROKER = 3,
    GR_CFG_SRC_STATIC_BROKER = 4,
    GR_CFG_SRC_DEFAULT = 5,
};

/* key -> value strings (the layout of struct gr_kzk_config, so a ZooKeeper config can be viewed
 * as one without copying). */
struct gr_props {
    int n;
    char **keys;
    char **values;
};
const char *gr_props_get(const struct gr_props *p, const char *key);

/* The broker-level layers under a topic's overrides. Any pointer may be NULL (= empty). */
struct gr_cfg_layers {
    const struct gr_props *topic;       /* /config/topics/T */
    const struct gr_props *dyn_broker;  /* /config/brokers/<this broker's id> */
    const struct gr_props *dyn_default; /* /config/brokers/<default> */
    const struct gr_config *static_cfg; /* server.properties (gr_config_static_value) */
};

/* One synonym as DescribeConfigs reports it (value points into the layers or static tables). */
struct gr_cfg_synonym {
    const char *name;
    const char *value;
    int8_t source;
};
#define GR_CFG_MAX_SYNONYMS 16

/* One resolved entry. */
struct gr_cfg_entry {
    const char *name;
    char value[64];        /* converted to the entry's unit (e.g. log.retention.hours -> ms) */
    const char *value_ptr; /* value when it does not fit / is text: points into layers or tables */
    int8_t source;
    int8_t type; /* GR_CONFIG_TYPE_* */
    bool read_only, sensitive;
    int nsyn;
    struct gr_cfg_synonym syn[GR_CFG_MAX_SYNONYMS];
};
/* The entry's value text. */
static inline const char *gr_cfg_entry_value(const struct gr_cfg_entry *e) {
    return e->value_ptr ? e->value_ptr : e->value;
}

/* ---- topic keys (LogConfig) ---- */

int gr_topic_key_count(void);
const char *gr_topic_key_name(int i); /* in Kafka's (sorted) order */
bool gr_topic_key_known(const char *name);
/* Kafka's topic-level default of name as text ("" for empty lists), NULL if unknown. */
const char *gr_topic_key_default(const char *name);
/* The broker key whose value is the topic key's default (e.g. segment.bytes -> log.segment.bytes),
 * NULL when it has none (e.g. the *.replication.throttled.replicas). */
const char *gr_topic_key_broker_synonym(const char *name);
/* GR_CONFIG_TYPE_* of a topic key (UNKNOWN if unknown). */
int gr_topic_key_type(const char *name);

/* Result of a check: */
#define GR_CFG_OK 0
#define GR_CFG_UNKNOWN_KEY 1   /* Kafka: InvalidConfigurationException (INVALID_CONFIG) */
#define GR_CFG_INVALID_VALUE 2 /* Kafka: ConfigException "Invalid value V for configuration K: why" */
#define GR_CFG_NOT_DYNAMIC 3   /* broker key that cannot change at run time */
#define GR_CFG_CONFLICT \
    4 /* Kafka: InvalidConfigurationException (INVALID_CONFIG) from
                                  LogConfig.validateValues */
/* Checks one topic key=value with Kafka's names, types and ranges; err gets Kafka's message,
 * naming the key. */
int gr_topic_config_check(const char *name, const char *value, char *err, size_t errlen);
/* Checks a topic's complete overrides together, after each passed gr_topic_config_check (Kafka
 * 2.7's LogConfig.validateValues, over LogConfig's own defaults for keys not set, not the
 * broker's): min.compaction.lag.ms > max.compaction.lag.ms is GR_CFG_CONFLICT. */
int gr_topic_configs_check_all(int n, char *const *keys, char *const *values, char *err, size_t errlen);

/* Resolves topic key `name` for a topic over `layers` (the topic's value, source, and synonyms
 * in precedence order, as AdminManager.createTopicConfigEntry does). Returns false if name is
 * not a topic key. */
bool gr_topic_config_resolve(const struct gr_cfg_layers *layers, const char *name, struct gr_cfg_entry *out);

/* ---- broker keys (KafkaConfig + DynamicBrokerConfig) ---- */

/* May `name` be changed dynamically in Gregor (per broker, or with per_broker false cluster-wide)? */
bool gr_broker_key_dynamic(const char *name, bool per_broker);
/* Checks a dynamic broker update key=value: GR_CFG_NOT_DYNAMIC for a known key that cannot change
 * at run time (Kafka: "Cannot update these configs dynamically: ..."), GR_CFG_INVALID_VALUE for a
 * bad value; unknown (custom) keys are accepted, as Kafka does. */
int gr_broker_config_check(const char *name, const char *value, bool per_broker, char *err, size_t errlen);
/* The broker key's synonyms in precedence order, name first when it is the primary (Kafka's
 * DynamicBrokerConfig.brokerConfigSynonyms); returns their count (>= 1). */
int gr_broker_key_synonyms(const char *name, const char **out, int max);
/* Resolves broker key `name` (layers->topic ignored). per_broker false describes
 * /config/brokers/<default>: only DYNAMIC_DEFAULT_BROKER_CONFIG synonyms count. Returns false when
 * the key has no value at any layer in that view. */
bool gr_broker_config_resolve(const struct gr_cfg_layers *layers, const char *name, bool per_broker,
                              struct gr_cfg_entry *out);

/* The settings a log applies are resolved over these layers by storage/log_config.h. */

#endif
