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
 * Usage is measured per (user, client-id) in a rate over quota.window.num (11) windows of
 * quota.window.size.seconds (1 s). When a recorded value takes the rate over the quota, the
 * throttle time is (rate - quota) / quota * window length (ClientQuotaManager); the request
 * handler puts it in the response's ThrottleTimeMs and mutes the channel for that long (KIP-219).
 *
 * Ownership: created by the start-up code (b->quotas) after the ZooKeeper client, freed after the
 * network server and the config listener stopped. NULL `q` is accepted everywhere (no quotas).
 * Threading: any thread; an internal mutex guards the quotas and the usage table. */
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

/* Re-reads every client quota from ZooKeeper (the DynamicConfigManager's thread). */
void gr_quota_manager_reload(struct gr_quota_manager *q);
/* Re-reads the broker's leader/follower.replication.throttled.rate. */
void gr_quota_manager_reload_replication(struct gr_quota_manager *q);

/* Records `value` (bytes, or for GR_QUOTA_REQUEST thread time in ms) used by (user, client_id)
 * now and returns the throttle time in ms (0 when within quota or no quota applies). user NULL =
 * the anonymous principal "ANONYMOUS". */
int32_t gr_quota_record(struct gr_quota_manager *q, enum gr_quota_type type, const char *user, const char *client_id,
                        double value);

/* For request handlers: records value for the request's client (b->quotas, user ANONYMOUS, the
 * header's client id) and, when over quota, sets the request's throttle so that the network layer
 * mutes the channel for that long after the response (net/server.h throttle_ms). Returns the
 * throttle time in ms (0 = none), to put in the response's ThrottleTimeMs. */
int32_t gr_quota_throttle(struct gr_broker *b, struct gr_api_req *req, enum gr_quota_type type, double value);

/* request_percentage (ClientRequestQuotaManager), called by gr_api_respond / gr_api_respond_none
 * just before a response goes out: records the handler's thread time (now - dispatch, when
 * answered on the dispatching thread; 0 for deferred answers) for the client and, when over its
 * quota, throttles the channel (at most one window) and raises the response's ThrottleTimeMs (body
 * may be NULL). Cluster actions (controller requests, AlterIsr, follower Fetch) and ApiVersions are
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
