/* Topic administration on the broker side (Kafka 2.7's AdminManager + AdminZkClient): creating
 * topics (CreateTopics, Metadata auto-creation), adding partitions (CreatePartitions), and the
 * delayed operations that wait until the controller has elected leaders for what was created
 * (Kafka's topic purgatory: DelayedCreatePartitions).
 *
 * Writes go to ZooKeeper through src/zk/kzk.h (new topics: multis through its backend):
 * /config/topics/T then /brokers/topics/T (assignment JSON version 3, with the topic id generated
 * here: KIP-516, AdminZkClient.createTopicWithAssignment with usesTopicId) for a new topic;
 * /brokers/topics/T rewritten with the extra partitions for CreatePartitions (keeping its id). The controller
 * reacts through its TopicChange / PartitionModifications watches; this module never talks to the controller directly.
 *
 * Results are Kafka error codes with a message (struct gr_topic_result). The create/add calls
 * block on ZooKeeper (bounded by the ZooKeeper session) and may be called from I/O threads.
 *
 * Delayed operations: gr_topic_admin_wait registers a waiter; it completes when every listed
 * topic has all its partitions with a leader in this broker's metadata cache (re-checked on
 * each metadata cache update) or when its timeout expires (checked by the admin's timer thread),
 * whichever comes first. The completion callback runs exactly once, on the thread that noticed
 * (the registering thread if already complete, an UpdateMetadata I/O thread, or the timer
 * thread). */
#ifndef GR_BROKER_TOPIC_ADMIN_H
#define GR_BROKER_TOPIC_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/uuid.h"

struct gr_broker;
struct gr_topic_admin;

/* A topic to create. Borrowed for the call. */
struct gr_topic_spec {
    const char *name;
    int32_t num_partitions;     /* -1: num.partitions */
    int16_t replication_factor; /* -1: default.replication.factor */
    /* Explicit assignment (n_assignments > 0): partition partition_ids[i] on replicas[i]
     * (n_replicas[i] ids). Exclusive with num_partitions / replication_factor != -1. */
    int n_assignments;
    const int32_t *partition_ids;
    const int32_t *const *replicas;
    const int *n_replicas;
    /* Topic configs; a NULL value is INVALID_REQUEST (Kafka). */
    int n_configs;
    const char *const *config_names;
    const char *const *config_values;
};

struct gr_topic_result {
    int16_t error;           /* GR_KERR_* */
    char message[256];       /* "" when none */
    int32_t num_partitions;  /* resolved, -1 if unknown */
    int16_t replication_factor;
    struct gr_uuid topic_id; /* the id of the topic created, zero otherwise (validate only, error) */
};

/* Creates the admin for b and starts its timer thread. */
struct gr_topic_admin *gr_topic_admin_new(struct gr_broker *b);
/* Completes every pending waiter as timed out, stops the thread, frees. NULL ignored. */
void gr_topic_admin_free(struct gr_topic_admin *a);

/* Validates and (unless validate_only) creates one topic:
 *   name rules -> INVALID_TOPIC_EXCEPTION; exists (metadata cache or ZooKeeper) ->
 *   TOPIC_ALREADY_EXISTS; '.'/'_' collision -> INVALID_TOPIC_EXCEPTION; null config value or
 *   both counts and an assignment given -> INVALID_REQUEST; bad counts -> INVALID_PARTITIONS /
 *   INVALID_REPLICATION_FACTOR; bad explicit assignment -> INVALID_REPLICA_ASSIGNMENT; unknown
 *   or invalid config -> INVALID_CONFIG; ZooKeeper failure -> UNKNOWN_SERVER_ERROR.
 * Brokers for the assignment: the metadata cache's live brokers, or, with use_zk_brokers (auto
 * creation, as AdminZkClient.createTopic), the brokers registered in ZooKeeper, with racks
 * ignored when only some brokers have one (RackAwareMode.Safe).
 * fixed_start_index: -1 random (normal), >= 0 for deterministic tests. Returns res->error. */
int16_t gr_topic_admin_create_topic(struct gr_broker *b, const struct gr_topic_spec *spec,
                                    bool validate_only, bool use_zk_brokers,
                                    int fixed_start_index, struct gr_topic_result *res);

/* Validates and creates n topics as one request (CreateTopics), with the checks and results of
 * gr_topic_admin_create_topic for each (results[i] for specs[i]). ZooKeeper is read once per
 * call (/brokers/topics' children; the brokers once) and the topics are written in multis of up to
 * 500 topics ({create /config/topics/T, create /brokers/topics/T} per topic, in that order). A
 * multi that fails (a concurrent creator won a name, a leftover /config/topics/T, a connection
 * loss) is redone one topic at a time, so every topic still gets its own result
 * (TOPIC_ALREADY_EXISTS for the name that was taken). A later topic of the request is checked
 * against the earlier ones it creates ('.'/'_' collisions). Returns the number of topics that
 * validated (and, unless validate_only, were created). */
int gr_topic_admin_create_topics(struct gr_broker *b, const struct gr_topic_spec *specs, int n,
                                 bool validate_only, bool use_zk_brokers, int fixed_start_index,
                                 struct gr_topic_result *results);

/* CreatePartitions for one topic: grow `topic` to new_count partitions. assignments (n_assign
 * lists, or n_assign < 0 for none) give the replicas of each new partition in order.
 *   unknown topic -> UNKNOWN_TOPIC_OR_PARTITION; reassignment in progress ->
 *   REASSIGNMENT_IN_PROGRESS; not an increase -> INVALID_PARTITIONS; assignment errors ->
 *   INVALID_REPLICA_ASSIGNMENT / BROKER_NOT_AVAILABLE. */
int16_t gr_topic_admin_create_partitions(struct gr_broker *b, const char *topic,
                                         int32_t new_count, int n_assign,
                                         const int32_t *const *replicas, const int *n_replicas,
                                         bool validate_only, struct gr_topic_result *res);

/* Completion of a waiter: ready[i] tells whether topics[i] had all its partitions led. */
typedef void (*gr_topic_wait_fn)(void *ctx, int n, const bool *ready);

/* Registers a waiter for n topics (names copied) expecting n_partitions[i] partitions each.
 * timeout_ms <= 0 completes at once (after one check). Any thread. */
void gr_topic_admin_wait(struct gr_topic_admin *a, int n, const char *const *topics,
                         const int32_t *n_partitions, int64_t timeout_ms, gr_topic_wait_fn fn,
                         void *ctx);

/* Re-checks the waiters (the metadata cache changed). Any thread; cheap when none wait. */
void gr_topic_admin_notify(struct gr_topic_admin *a);

/* Validates one topic config name=value (Kafka's LogConfig.validate, reduced): NONE or
 * INVALID_CONFIG with a message. */
int16_t gr_topic_config_validate(const char *name, const char *value, char *err, size_t errlen);

#endif
