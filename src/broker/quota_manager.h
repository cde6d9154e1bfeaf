/* Client quotas (Kafka 2.7 ClientQuotaManager / ClientRequestQuotaManager) and the replication
 * throttle rates (ReplicationQuotaManager's bound) of one broker.
 *
 * Quotas live in ZooKeeper as Kafka stores them: /config/users/<u>, /config/users/<u>/clients/<c>,
 * /config/clients/<c> (names URL-encoded, "<default>" for the default entity), keys
 * producer_byte_rate, consumer_byte_rate (bytes/s) and request_percentage. The quota of a request
 * is the most specific match (ClientQuotaManager's precedence, config_model's order:
 * users/<u>/clients/<c> > users/<u>/clients/<default> > users/<u> > users/<default>/clients/<c> >
 * users/<default>/clients/<default> > users/<default> > clients/<c> > clients/<default>).
 *
 * The user is the request's principal name (KafkaPrincipal.getName: "alice" for User:alice, the
 * certificate's DN on TLS, "ANONYMOUS" without authentication); the client is the header's
 * client.id. Usage is measured per sensor, tagged as Kafka tags it: the actual user and/or client
 * of the components the matched entity has (so a <default> user quota is one sensor per user), in
 * a rate over quota.window.num (11) windows of quota.window.size.seconds (1 s). A sensor not
 * recorded for an hour is removed (Kafka's InactiveSensorExpirationTimeSeconds). When a recorded value takes the rate over the quota, the
 * throttle time is (rate - quota) / quota * window length (ClientQuotaManager); the request
 * handler puts it in the response's ThrottleTimeMs and mutes the channel for that long (KIP-219).
 *
 * Ownership: created by the start-up code (b->quotas) after the ZooKeeper client, freed after the
 * network server and the config listener stopped. NULL `q` is accepted everywhere (no quotas).
 * Threading: any thread. The entities are an immutable table with a hash index, swapped by a
 * reload under a rwlock (lookups take it for reading: eight hash probes). The sensors live in 64
 * shards, each a hash table under its own mutex; a record locks one shard. Every 30 s the record
 * that claims the sweep removes the idle sensors, one shard at a time under that shard's lock
 * (Kafka's ExpireSensorTask). Lock order: table (read) before shard. */
#ifndef GR_BROKER_QUOTA_MANAGER_H
#define GR_BROKER_QUOTA_MANAGER_H

#include <stdbool.h>
#include <stdint.h>

struct gr_broker;
struct gr_api_req;
struct gr_quota_manager;

enum gr_quota_type {
    GR_QUOTA_PRODUCE = 0, /* producer_byte_rate */
    GR_QUOTA_FETCH = 1,   /* consumer_byte_rate */
    GR_QUOTA_REQUEST = 2, /* request_percentage (of one thread, over the window) */
    /* controller_mutation_rate (KIP-599): only looked up here (gr_quota_entity); its token buckets
     * are broker/controller_mutation_quota.h's */
    GR_QUOTA_CONTROLLER_MUTATION = 3,
};

struct gr_quota_manager *gr_quota_manager_new(struct gr_broker *b);
void gr_quota_manager_free(struct gr_quota_manager *q);

/* Re-reads every client quota from ZooKeeper (the DynamicConfigManager's thread). false: a read
 * failed (a config that does not parse counts as no quota); the quotas in force stay and the
 * caller retries (the /config/changes listener hands the change again). */
bool gr_quota_manager_reload(struct gr_quota_manager *q);
/* Re-reads connection_creation_rate of /config/ips/<ip> and /config/ips/<default> (KIP-612) into
 * the network server's per-IP connection rate limits (b->net; nothing before it exists). A failed
 * read keeps the limits in force and returns false (retry later). */
bool gr_quota_manager_reload_ips(struct gr_quota_manager *q);
/* Re-reads the broker's leader/follower.replication.throttled.rate. */
void gr_quota_manager_reload_replication(struct gr_quota_manager *q);

/* Records `value` (bytes, or for GR_QUOTA_REQUEST thread time in ms) used by (user, client_id)
 * now and returns the throttle time in ms (0 when within quota or no quota applies). user NULL =
 * the anonymous principal "ANONYMOUS". */
int32_t gr_quota_record(struct gr_quota_manager *q, enum gr_quota_type type, const char *user, const char *client_id,
                        double value);
/* The same at a given monotonic time in ms (tests). */
int32_t gr_quota_record_at(struct gr_quota_manager *q, enum gr_quota_type type, const char *user,
                           const char *client_id, double value, int64_t now_ms);
/* Sensor expiry (default 3600 s; tests shorten it) and the number of live sensors. */
void gr_quota_set_sensor_expiry(struct gr_quota_manager *q, int64_t ms);
int gr_quota_sensor_count(struct gr_quota_manager *q);

/* For request handlers: records value for the request's client (b->quotas, the principal's name,
 * the header's client id) and, when over quota, sets the request's throttle so that the network layer
 * mutes the channel for that long after the response (net/server.h throttle_ms). Returns the
 * throttle time in ms (0 = none), to put in the response's ThrottleTimeMs. */
int32_t gr_quota_throttle(struct gr_broker *b, struct gr_api_req *req, enum gr_quota_type type, double value);

/* request_percentage (ClientRequestQuotaManager), called by gr_api_respond / gr_api_respond_none
 * just before a response goes out: records the handler's thread time (now - dispatch, when
 * answered on the dispatching thread; 0 for deferred answers) for the client and, when over its
 * quota, throttles the channel (at most one window) and raises the response's ThrottleTimeMs (body
 * may be NULL). Cluster actions (controller requests, AlterPartition, follower Fetch) and ApiVersions are
 * exempt, as in Kafka. */
void gr_quota_on_response(struct gr_api_req *req, void *body, bool on_dispatch_thread);

/* Kafka's Sanitizer for entity names in znode paths (URL encoding); malloc'd. */
char *gr_quota_sanitize(const char *name);
char *gr_quota_desanitize(const char *sanitized);

/* The quota bound for (user, client_id) and type, or < 0 when unlimited. */
double gr_quota_bound(struct gr_quota_manager *q, enum gr_quota_type type, const char *user, const char *client_id);
/* As gr_quota_bound, and *sensor gets (malloc'd, NULL when unlimited) the key of the usage the
 * request counts in: the sanitized user and client id for the components the matching quota
 * entity has (Kafka's sensor tags), "user\nclient". Whether any entity has a quota of type is
 * *any (quotasEnabled). */
double gr_quota_entity(struct gr_quota_manager *q, enum gr_quota_type type, const char *user, const char *client_id,
                       char **sensor, bool *any);

/* Replication throttle: the rate (bytes/s) for leader (true) or follower traffic, INT64_MAX when
 * unthrottled. */
int64_t gr_quota_replication_rate(struct gr_quota_manager *q, bool leader);

/* Is topic-partition a throttled replica on this broker for leader (true: we send to followers)
 * or follower traffic: the rate is set and the topic's leader/follower.replication.throttled.replicas
 * is "*" or lists partition:<this broker id>. The topic's config is read once and cached until
 * gr_quota_replication_topic_changed. */
bool gr_quota_replica_throttled(struct gr_quota_manager *q, bool leader, const char *topic, int32_t partition);
/* Has throttled leader/follower traffic gone over the rate (over replication.quota.window.num = 11
 * windows of 1 s)? */
bool gr_quota_replication_exceeded(struct gr_quota_manager *q, bool leader);
/* Records bytes of throttled leader/follower traffic. */
void gr_quota_replication_record(struct gr_quota_manager *q, bool leader, double bytes);
/* A topic's config changed (NULL: forget every topic). */
void gr_quota_replication_topic_changed(struct gr_quota_manager *q, const char *topic);

#endif
