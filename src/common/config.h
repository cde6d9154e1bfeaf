/* Broker configuration: Kafka-style server.properties with Kafka's key names and defaults.
 *
 * Every key Gregor understands is declared once in the table in config.c (name, type, default,
 * bounds, the struct field it fills). Unknown keys are logged as warnings and otherwise ignored, as
 * Kafka does; an invalid value is an error naming the key. The struct is filled once at start-up and
 * read-only afterwards, so any thread may read it without locks. */
#ifndef GR_CONFIG_H
#define GR_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GR_MAX_LISTENERS 8
#define GR_MAX_LOG_DIRS 16
#define GR_MAX_STATIC_PROPS 256

struct gr_listener {
    char name[64];  /* listener name, e.g. PLAINTEXT */
    char host[256]; /* may be empty (= all interfaces for listeners, hostname for advertised) */
    int port;
};

struct gr_config {
    /* identity and ZooKeeper */
    int32_t broker_id;
    char *broker_rack; /* NULL when unset */
    char *replica_selector_class; /* replica.selector.class (KIP-392); NULL: consumers read from leaders */
    int32_t max_incremental_fetch_session_cache_slots; /* KIP-227 */
    char *zookeeper_connect;          /* host:port[,host:port...][/chroot] */
    int32_t zookeeper_session_timeout_ms;
    int32_t zookeeper_connection_timeout_ms; /* -1 in the file means "same as session timeout" */
    int32_t zookeeper_max_in_flight_requests;

    /* network */
    struct gr_listener listeners[GR_MAX_LISTENERS];
    int num_listeners;
    struct gr_listener advertised_listeners[GR_MAX_LISTENERS];
    int num_advertised_listeners;
    char *inter_broker_listener_name;
    char *control_plane_listener_name; /* NULL when unset */
    int64_t socket_request_max_bytes;
    int64_t connections_max_idle_ms;
    int32_t num_network_threads;
    int32_t num_io_threads;
    int32_t queued_max_requests; /* complete requests waiting for an I/O thread */
    int32_t max_connections;     /* broker-wide, the inter-broker listener exempt */
    int32_t max_connections_per_ip;
    char *max_connections_per_ip_overrides; /* "host:n,host:n" or NULL */
    int32_t max_connection_creation_rate;   /* KIP-612, broker-wide (2147483647: none) */
    /* per listener (index of listeners[]): listener.name.<l>.max.connection.creation.rate when
     * ..._set (filled by the validation); unset: the broker-wide value */
    bool listener_max_connection_creation_rate_set[GR_MAX_LISTENERS];
    int32_t listener_max_connection_creation_rate[GR_MAX_LISTENERS];

    /* security (docs/SECURITY.md) */
    char *listener_security_protocol_map;   /* NULL: Kafka's default, each protocol maps to itself */
    char *security_inter_broker_protocol;   /* NULL when unset (Kafka's default PLAINTEXT) */
    int32_t connection_failed_authentication_delay_ms;
    /* Every ssl.*, sasl.* and listener.name.* key as given, read through gr_config_listener_prop
     * (owned, parallel arrays). */
    int num_security_props;
    char **security_keys;
    char **security_values;

    /* storage */
    char *log_dirs[GR_MAX_LOG_DIRS];
    int num_log_dirs;
    int64_t log_segment_bytes;
    int64_t log_roll_ms;
    int32_t log_index_interval_bytes;
    int64_t log_index_size_max_bytes;
    int64_t log_retention_ms;
    int64_t log_retention_bytes;
    int64_t log_retention_check_interval_ms;
    int64_t log_flush_interval_messages;
    int64_t log_flush_interval_ms;
    int64_t log_flush_scheduler_interval_ms;
    int64_t log_flush_offset_checkpoint_interval_ms;
    int32_t message_max_bytes;
    char *log_cleanup_policy;         /* log.cleanup.policy (list: delete, compact) */
    char *log_message_timestamp_type; /* log.message.timestamp.type */
    char *compression_type;           /* compression.type */
    int64_t leader_replication_throttled_rate;   /* bytes/s, INT64_MAX = unthrottled */
    int64_t follower_replication_throttled_rate;
    int32_t quota_window_num;          /* quota.window.num: samples of client quota rates */
    int32_t quota_window_size_seconds; /* quota.window.size.seconds */
    int32_t controller_quota_window_num;          /* controller.quota.window.num (KIP-599 token bucket) */
    int32_t controller_quota_window_size_seconds; /* controller.quota.window.size.seconds */
    int32_t gregor_max_open_log_files; /* gregor.max.open.log.files (Gregor-only; 0 = automatic) */
    char *gregor_metrics_listener;     /* gregor.metrics.listener http://HOST:PORT (Gregor-only; NULL = off) */
    int64_t log_flush_start_offset_checkpoint_interval_ms;
    int64_t log_message_timestamp_difference_max_ms;

    /* log cleaner (compaction), Kafka's log.cleaner.* */
    bool log_cleaner_enable;
    int32_t log_cleaner_threads;
    int64_t log_cleaner_dedupe_buffer_size;
    int32_t log_cleaner_io_buffer_size;
    double log_cleaner_io_buffer_load_factor;
    double log_cleaner_io_max_bytes_per_second;
    int64_t log_cleaner_backoff_ms;
    double log_cleaner_min_cleanable_ratio;
    int64_t log_cleaner_delete_retention_ms;
    int64_t log_cleaner_min_compaction_lag_ms;
    int64_t log_cleaner_max_compaction_lag_ms;

    /* topics */
    bool auto_create_topics_enable;
    int32_t num_partitions;
    int32_t default_replication_factor;
    int32_t min_insync_replicas;
    bool delete_topic_enable;
    bool unclean_leader_election_enable;
    int32_t offsets_topic_replication_factor;
    int32_t offsets_topic_num_partitions;
    int32_t offsets_topic_segment_bytes; /* segment.bytes of the internal topics at creation */

    int32_t fetch_max_bytes; /* fetch.max.bytes: a Fetch response's records, at most (Kafka 2.7) */

    /* replication */
    int64_t replica_lag_time_max_ms;
    int32_t replica_fetch_max_bytes;
    int32_t replica_fetch_wait_max_ms;
    int32_t replica_fetch_min_bytes;
    int32_t replica_fetch_response_max_bytes;
    int32_t replica_fetch_backoff_ms;
    int32_t num_replica_fetchers;
    int32_t replica_socket_timeout_ms;
    int64_t replica_high_watermark_checkpoint_interval_ms;

    /* controller */
    int32_t controller_socket_timeout_ms;
    bool auto_leader_rebalance_enable;
    bool controller_standby_enable;          /* gregor.controller.standby.enable */
    int64_t controller_standby_refresh_ms;   /* gregor.controller.standby.refresh.ms */
    int32_t leader_imbalance_per_broker_percentage;
    int64_t leader_imbalance_check_interval_seconds;
    bool controlled_shutdown_enable;
    int32_t controlled_shutdown_max_retries;
    int64_t controlled_shutdown_retry_backoff_ms;
    char *inter_broker_protocol_version;
    int32_t request_timeout_ms;

    /* broker id generation */
    bool broker_id_generation_enable;
    int32_t reserved_broker_max_id;

    /* group coordinator */
    int32_t group_initial_rebalance_delay_ms;
    int32_t group_min_session_timeout_ms;
    int32_t group_max_session_timeout_ms;
    int32_t group_max_size;                      /* group.max.size */
    int32_t offset_metadata_max_bytes;           /* offset.metadata.max.bytes */
    int32_t offsets_commit_timeout_ms;           /* offsets.commit.timeout.ms */
    int32_t offsets_retention_minutes;           /* offsets.retention.minutes */
    int64_t offsets_retention_check_interval_ms; /* offsets.retention.check.interval.ms */
    int32_t transactional_id_expiration_ms;

    /* authorization (security/authorizer.h) and ZooKeeper ACLs */
    char *authorizer_class_name;          /* NULL: no authorizer, everything allowed */
    char *super_users;                    /* "User:a;User:b", NULL when unset */
    bool allow_everyone_if_no_acl_found;
    bool zookeeper_set_acl;
    char *gregor_zookeeper_auth_digest;   /* Gregor-only: "user:password" for ZooKeeper digest auth */
    bool gregor_test_principal_by_client_id; /* Gregor-only, TESTS ONLY: client.id "User:x" is the principal */

    /* every key=value given (file and overrides, known or not), in order: Kafka's
     * STATIC_BROKER_CONFIG source (gr_config_static_value) */
    int n_static;
    char *static_keys[GR_MAX_STATIC_PROPS];
    char *static_values[GR_MAX_STATIC_PROPS];
    /* transaction coordinator (coordinator/txn_coordinator.h) */
    int32_t transaction_state_log_num_partitions;
    int32_t transaction_state_log_replication_factor;
    int32_t transaction_state_log_min_isr;
    int32_t transaction_state_log_segment_bytes;
    int32_t transaction_max_timeout_ms;
    int32_t transaction_abort_timed_out_transaction_cleanup_interval_ms;
    int32_t transaction_remove_expired_transaction_cleanup_interval_ms;
    bool transaction_partition_verification_enable; /* KIP-890 part 1 (Kafka 3.6) */

    /* private to config.c: log.dirs was given, so log.dir is ignored */
    bool log_dirs_explicit;
};

/* Fills `cfg` with Kafka's defaults. */
void gr_config_defaults(struct gr_config *cfg);

/* Applies one `key=value` setting. Unknown keys: logs a warning and returns 0. Invalid values:
 * writes "Invalid value V for configuration K: reason" into err and returns GR_ECONFIG. */
int gr_config_set(struct gr_config *cfg, const char *key, const char *value, char *err, size_t errlen);

/* Reads a server.properties file (key=value or key:value, '#'/'!' comments, blank lines) into cfg
 * (which must already hold defaults), then checks cross-key rules (gr_config_finish is called by
 * the caller after overrides). On failure writes a message naming the file/line/key into err. */
int gr_config_load_file(struct gr_config *cfg, const char *path, char *err, size_t errlen);

/* Checks required keys and cross-key rules after file and overrides are applied (e.g.
 * zookeeper.connect set, log.dirs set, advertised listeners derived from listeners). */
int gr_config_finish(struct gr_config *cfg, char *err, size_t errlen);

/* Releases strings owned by cfg. */
void gr_config_release(struct gr_config *cfg);

/* Parses a listener list "PLAINTEXT://host:port,NAME://:port". Returns count or GR_ECONFIG. */
int gr_config_parse_listeners(const char *s, struct gr_listener *out, int max, char *err, size_t errlen);

/* The security protocol of listener `name` ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
 * through listener.security.protocol.map, or NULL if it has none. */
const char *gr_config_security_protocol(const struct gr_config *cfg, const char *listener);

/* A security setting for a listener: listener.name.<listener lower-case>.<key> if set, else
 * <key>, else NULL. listener NULL looks up <key> only. Borrowed from cfg. */
const char *gr_config_listener_prop(const struct gr_config *cfg, const char *listener, const char *key);

/* Returns the advertised listener used between brokers (inter.broker.listener.name, or the first). */
const struct gr_listener *gr_config_inter_broker_listener(const struct gr_config *cfg);

/* ConfigType ids of DescribeConfigs v3 (Kafka's ConfigDef.Type as DescribeConfigsResponse sends it). */
enum {
    GR_CONFIG_TYPE_UNKNOWN = 0, GR_CONFIG_TYPE_BOOLEAN = 1, GR_CONFIG_TYPE_STRING = 2, GR_CONFIG_TYPE_INT = 3,
    GR_CONFIG_TYPE_SHORT = 4, GR_CONFIG_TYPE_LONG = 5, GR_CONFIG_TYPE_DOUBLE = 6, GR_CONFIG_TYPE_LIST = 7,
    GR_CONFIG_TYPE_CLASS = 8, GR_CONFIG_TYPE_PASSWORD = 9
};

/* The value key was given in server.properties (or an override), as text; NULL if not given. */
const char *gr_config_static_value(const struct gr_config *cfg, const char *key);
/* The table of broker keys Gregor understands, in table order (for DescribeConfigs). */
int gr_config_key_count(void);
const char *gr_config_key_name(int i);
bool gr_config_known_key(const char *key);
/* Kafka's default of key as text, NULL when it has none (or key is unknown). */
const char *gr_config_default_value(const char *key);
/* GR_CONFIG_TYPE_* of key (UNKNOWN for keys not in the table). */
int gr_config_key_type(const char *key);
/* Would gr_config_set accept value for key? 0, or GR_ECONFIG with Kafka's message naming the key
 * in err. Unknown keys are accepted. */
int gr_config_check(const char *key, const char *value, char *err, size_t errlen);

#endif
