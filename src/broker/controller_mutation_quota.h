/* The controller mutation quota (KIP-599, Kafka 2.7's ControllerMutationQuotaManager): a client's
 * topic and partition mutations (CreateTopics: the new topic's partitions, CreatePartitions: the
 * partitions added, DeleteTopics: the deleted topic's partitions) are limited by the
 * controller_mutation_rate of its quota entity (/config/users, /config/clients, the precedence of
 * broker/quota_manager.h), in mutations per second.
 *
 * Each (user, client-id) sensor is a token bucket (Kafka's TokenBucket): it holds at most
 * burst = rate x controller.quota.window.num x controller.quota.window.size.seconds tokens, starts
 * full, refills at `rate` per second, and a mutation takes one token per partition; it may go
 * negative. While negative the quota is exceeded and the throttle time is -tokens / rate seconds.
 *   - strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a topic whose mutation
 *     finds the bucket already negative is refused with THROTTLING_QUOTA_EXCEEDED and takes no
 *     token; one that finds it >= 0 goes ahead and takes all its tokens;
 *   - permissive (older versions): every mutation goes ahead and takes its tokens.
 * Either way the response carries ThrottleTimeMs = the largest of this throttle (less the time
 * since it was measured) and the request quota's, and the channel is muted for it (KIP-219).
 * Validate-only requests take no token. Without any controller_mutation_rate in ZooKeeper nothing
 * is recorded. A bucket that has refilled to its burst is forgotten (it is what a new one starts
 * as): memory holds only the sensors still in debt, however many client ids come and go.
 *
 * Ownership: one gr_cmq per broker (b->controller_mutation_quota), created at start-up after the
 * quota manager and freed after the network stopped. A gr_cmq_req lives on the handler's stack for
 * one request. Threading: any thread; a mutex guards the buckets. NULL b->controller_mutation_quota
 * (bare test brokers) means no quota. */
#ifndef GR_BROKER_CONTROLLER_MUTATION_QUOTA_H
#define GR_BROKER_CONTROLLER_MUTATION_QUOTA_H

#include <stdbool.h>
#include <stdint.h>

struct gr_broker;
struct gr_api_req;
struct gr_cmq;

/* The ThrottlingQuotaExceededException message Kafka puts in the topic's ErrorMessage. */
#define GR_CMQ_MESSAGE "The throttling quota has been exceeded."

struct gr_cmq *gr_cmq_new(struct gr_broker *b);
void gr_cmq_free(struct gr_cmq *q);

/* One request's view of its sensor (Kafka's Strict/PermissiveControllerMutationQuota). */
struct gr_cmq_req {
    struct gr_cmq *q;
    char *sensor;        /* NULL: unbounded */
    double rate;         /* controller_mutation_rate of the matched entity */
    bool strict;
    int64_t throttle_ms; /* last measured, at throttled_at_ms */
    int64_t throttled_at_ms;
};

/* Starts the quota of request req: strict when its version is >= strict_since. */
void gr_cmq_begin(struct gr_broker *b, struct gr_api_req *req, int16_t strict_since, struct gr_cmq_req *r);
/* Records `permits` mutations. Returns GR_KERR_NONE, or (strict only) GR_KERR_THROTTLING_QUOTA_EXCEEDED
 * when the quota was already exceeded (nothing recorded). */
int16_t gr_cmq_record(struct gr_cmq_req *r, double permits);
/* Ends the request's quota: sets the channel's throttle and returns the throttle time in ms to
 * put in the response's ThrottleTimeMs (0 = none). Frees r's resources. */
int32_t gr_cmq_finish(struct gr_api_req *req, struct gr_cmq_req *r);
/* How many sensors have a bucket (for tests). */
int gr_cmq_num_buckets(struct gr_cmq *q);

#endif
