/* struct gr_broker: the shared context of one broker process, handed to every request handler.
 *
 * Ownership (numbered so other code can cite it):
 *  1. gr_broker_new creates the struct and the parts it OWNS: metadata (metadata cache),
 *     partitions (partition registry / state-change lock) and admin (delayed topic operations).
 *     gr_broker_free releases exactly those.
 *  2. Everything else is BORROWED and filled in by the broker start-up code (broker/server.c)
 *     before the network server starts: cfg, zk, controller, net, authorizer, cluster_id,
 *     broker_epoch.
 *     The owner must keep them alive until gr_broker_free, and must stop the network server
 *     (which stops new handler calls) before freeing the broker.
 *  3. The replication slots (hooks, replica_manager) and group_coordinator are set once at
 *     start-up by gr_replica_manager_new and gr_group_coordinator_start; NULL means "not
 *     present" (hooks become no-ops; api/apis.h says what the request handlers do then).
 *
 * Threading: after start-up the plain fields are read-only, so any thread may read them;
 * broker_epoch changes on ZooKeeper session re-registration and is atomic. The owned parts
 * document their own locking. */
#ifndef GR_BROKER_BROKER_H
#define GR_BROKER_BROKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gr_config;
struct gr_kzk;
struct gr_controller;
struct gr_finalized_features;
struct gr_net_server;
struct gr_mdc;
struct gr_partitions;
struct gr_partition_state;
struct gr_topic_admin;
struct gr_replica_manager;
struct gr_group_coordinator;
struct gr_authorizer;
struct gr_dynamic_config_manager;
struct gr_quota_manager;
struct gr_broker;
struct gr_pidm;
struct gr_uuid;

/* One partition of a LeaderAndIsr batch (hook apply_leader_and_isr). */
struct gr_lai_change {
    const struct gr_partition_state *st; /* already updated from the request (see below) */
    bool leader;                         /* this broker is its leader */
    int16_t error;                       /* out: the partition's error code */
};

/* One partition of a StopReplica batch (hook stop_replicas). */
struct gr_stop_change {
    const char *topic;
    int32_t partition;
    bool delete_partition;
    /* with delete_partition: the log is moved aside as a stray log (KIP-516: it holds another
     * topic id; storage/log_manager.h gr_plog_manager_move_aside), never deleted; its new path
     * goes into aside_path (aside_cap bytes) when set. A failed rename sets error
     * (KAFKA_STORAGE_ERROR) and leaves the log where it was. */
    bool move_aside;
    char *aside_path;
    size_t aside_cap;
    int16_t error; /* out */
};

/* Replication hooks, called by the LeaderAndIsr / StopReplica handlers (handle_control.c) on an
 * I/O thread WITH the partition registry's state-change lock held (do not call gr_partitions_*
 * locking functions from them; the registry's *_locked functions are fine). Each returns a Kafka
 * error code for that partition (NONE, or e.g. KAFKA_STORAGE_ERROR), which goes into the
 * response. `st` is the partition's state already updated from the request (leader, epoch, ISR,
 * replicas, zk version, is_new). A NULL function is a no-op returning NONE. */
struct gr_replica_hooks {
    void *ctx;
    int16_t (*become_leader)(void *ctx, struct gr_broker *b, const struct gr_partition_state *st);
    int16_t (*become_follower)(void *ctx, struct gr_broker *b,
                               const struct gr_partition_state *st);
    /* StopReplica: stop fetching/serving topic-partition; delete_partition also removes its
     * log. Called for partitions the broker hosts and, with delete_partition, also for ones it
     * does not (to delete leftover logs, as Kafka does). The registry entry is removed after
     * this returns when delete_partition is true. */
    int16_t (*stop_replica)(void *ctx, struct gr_broker *b, const char *topic, int32_t partition,
                            bool delete_partition);
    /* After a LeaderAndIsr request was applied (e.g. to (re)start fetchers in one batch). */
    void (*leader_and_isr_done)(void *ctx, struct gr_broker *b);
    /* Batches: when set, the handlers call these once per request (with every partition that
     * passed the request's checks, in request order) instead of become_leader / become_follower
     * / stop_replica per partition. Same contract per item; each item's error is set. A
     * LeaderAndIsr or StopReplica names up to every partition of the broker, and per-partition
     * calls took the replica manager's, the fetchers' and the purgatory's locks per partition. */
    void (*apply_leader_and_isr)(void *ctx, struct gr_broker *b, struct gr_lai_change *v, int n);
    void (*stop_replicas)(void *ctx, struct gr_broker *b, struct gr_stop_change *v, int n);
    /* KIP-516: the topic id of topic-partition's log on this broker (hosted, or loaded from disk
     * and not hosted yet): 1 and *out; 0 when there is no log or it has no id; GR_ECORRUPT when
     * its partition.metadata is unreadable. NULL function: 0. */
    int (*log_topic_id)(void *ctx, struct gr_broker *b, const char *topic, int32_t partition,
                        struct gr_uuid *out);
    /* KIP-516: a hosted partition's log without an id takes id (a LeaderAndIsr at the current
     * leader epoch: the controller upgrading to ids); Kafka error code. NULL function: NONE. */
    int16_t (*adopt_topic_id)(void *ctx, struct gr_broker *b, const char *topic, int32_t partition,
                              const struct gr_uuid *id);
};

struct gr_broker {
    /* -- identity (borrowed / set before start) -- */
    const struct gr_config *cfg;
    int32_t broker_id;
    char cluster_id[64];          /* "" until known */
    _Atomic int64_t broker_epoch; /* czxid of /brokers/ids/<id>, used only without a controller
                                   * (tests); -1 unknown. See gr_broker_epoch. */

    /* -- borrowed subsystems -- */
    struct gr_kzk *zk;
    struct gr_controller *_Atomic controller; /* opaque to the broker side; atomic so start-up
                                               * may attach it after the network started */
    /* Is this broker the active controller? Optional override (tests); when NULL,
     * gr_controller_is_active(controller) is used, or, without a controller, "metadata cache's
     * controller id == broker_id". Any thread. */
    bool (*controller_is_active)(struct gr_controller *c);
    struct gr_net_server *net;
    struct gr_authorizer *authorizer; /* security/authorizer.h; NULL: no authorizer configured,
                                       * every request allowed (api/authorize.h) */
    struct gr_metrics *metrics; /* the broker's registry (common/metrics.h); may be NULL (tests) */

    /* -- owned -- */
    struct gr_bts *topic_stats; /* BrokerTopicMetrics over `metrics` (broker_topic_stats.h); NULL
                                 * without a registry. Set with metrics at start-up. */
    struct gr_mdc *metadata;
    struct gr_partitions *partitions;
    struct gr_topic_admin *admin;

    /* -- subsystems set at start-up by their own start functions (rule 3) -- */
    struct gr_replica_hooks hooks;
    struct gr_replica_manager *replica_manager;     /* replication/replica_manager.h */
    struct gr_group_coordinator *group_coordinator; /* coordinator/group_coordinator.h */
    struct gr_txn_coordinator *txn_coordinator;     /* coordinator/txn_coordinator.h; NULL: the
                                                     * transaction APIs answer NOT_COORDINATOR */
    /* broker/finalized_features.h; set once the broker has started (atomic: ApiVersions reads it
     * from I/O threads before that); NULL answers "no finalized features". */
    struct gr_finalized_features *_Atomic finalized_features;
    struct gr_aptm *add_partitions_to_txn_manager; /* broker/add_partitions_to_txn_manager.h (KIP-890
                                                    * checks); NULL: local coordinator only */
    struct gr_pidm *producer_id_manager; /* coordinator/producer_id_manager.h; NULL: InitProducerId
                                          * answers COORDINATOR_NOT_AVAILABLE */
    /* Set by the start-up code (NULL in bare unit-test brokers: static configs only, no quotas). */
    struct gr_dynamic_config_manager *dynamic_config; /* broker/dynamic_config_manager.h */
    struct gr_quota_manager *quotas;                  /* broker/quota_manager.h */
    struct gr_cmq *controller_mutation_quota;         /* broker/controller_mutation_quota.h */
};

/* Creates a broker context for broker_id with cfg (borrowed; may be NULL in tests, in which case
 * Kafka's defaults are used where a config value is needed) and creates the owned parts. Caller
 * thread: start-up. */
struct gr_broker *gr_broker_new(const struct gr_config *cfg, int32_t broker_id);

/* Releases the owned parts (pending delayed admin operations are answered REQUEST_TIMED_OUT
 * first) and the struct. The network server must already be stopped. NULL is ignored. */
void gr_broker_free(struct gr_broker *b);

/* Is this broker the active controller right now (see controller_is_active)? Any thread. */
bool gr_broker_is_controller(struct gr_broker *b);

/* This broker's epoch for fencing control requests: gr_controller_broker_epoch(controller) when
 * a controller is attached (Kafka's KafkaController.brokerEpoch), else broker_epoch. Any thread. */
int64_t gr_broker_epoch(struct gr_broker *b);

#endif
