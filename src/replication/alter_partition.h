/* Broker-side AlterPartition sender (Kafka's AlterPartitionManager, AlterIsrManager in 2.7): a
 * leader's proposed ISR changes are queued here (at most one per partition) and sent in batches
 * (BrokerId, BrokerEpoch, per partition LeaderEpoch, the new ISR, PartitionEpoch = zkVersion) to
 * the active controller, found through the metadata cache's controller id and its endpoint on the
 * inter-broker listener. One thread, one request in flight.
 *
 * Version: cfg.version, what inter.broker.protocol.version allows (metadata_version.h): v3 at
 * 3.5-IV1+ (NewIsrWithEpochs, KIP-903), v2 (topics by id), v1 (LeaderRecoveryState, always
 * RECOVERED here), v0 (Kafka 2.7's AlterIsr) below 3.2. A batch holding a partition whose log has
 * no topic id yet goes at min(version, 1), by name (Kafka's canUseTopicIds). v3's member epochs
 * are Kafka 3.9's addBrokerEpochToIsr with a ZooKeeper metadata cache: this broker's own epoch for
 * itself, -1 ("not known", which the controller accepts) for the others -- a ZooKeeper-mode
 * leader learns no follower's registration epoch (UpdateMetadata carries none) until followers'
 * fetches carry theirs (Fetch v15+ ReplicaState.ReplicaEpoch). v2+ answers name topics by id:
 * they are matched to the items sent under that id.
 *
 * Answers: a top-level error or a connection failure keeps every item and retries after a
 * back-off (the controller may have moved, or may not implement AlterPartition yet); per-partition
 * answers go to gr_rm_alter_partition_result, which commits the ISR, gives up, or asks for a resend.
 *
 * The requests go through one Kafka client (net/kafka_client.h); a new controller (id or
 * endpoint) means a new connection, and any failure drops it.
 *
 * Dependencies: the sender knows nothing of the replica manager or the broker (this breaks the
 * replica_manager <-> alter_partition cycle). Where the controller is, the broker epoch, and where the
 * per-partition answers go come through struct gr_alter_partition_ops, which the replica manager
 * supplies (replica_manager_ops.c); it is the only caller of gr_alter_partition_*.
 *
 * Threading: any thread may enqueue (a partition lock may be held: enqueue only takes the
 * sender's own lock). The ops run on the sender's thread with no lock of the sender held. */
#ifndef GR_BROKER_ALTER_PARTITION_H
#define GR_BROKER_ALTER_PARTITION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gr_alter_partition;

struct gr_alter_partition_ops {
    /* The active controller's id and its endpoint on the inter-broker listener; false if none
     * is known. */
    bool (*controller_endpoint)(void *ctx, int32_t *id, char *host, size_t hostlen, int32_t *port);
    /* BrokerEpoch to send (-1 unknown). */
    int64_t (*broker_epoch)(void *ctx);
    /* One partition's answer (contract of gr_rm_alter_partition_result): -1 to send the item again,
     * else 0 (the item is done). An error answer comes with the leader epoch, ISR and zkVersion
     * that were sent (the proposal it refuses), a success with the controller's. */
    int (*result)(void *ctx, const char *topic, int32_t partition, int16_t error, int32_t leader_epoch,
                  const int32_t *isr, int nisr, int32_t zk_version);
};

struct gr_alter_partition_config {
    int32_t broker_id;
    int socket_timeout_ms; /* controller.socket.timeout.ms: connect and exchange bound */
    int16_t version;       /* the AlterPartition version to send (0-3, see above) */
};

/* ops and ctx are borrowed and must outlive the sender. Starts its thread. */
struct gr_alter_partition *gr_alter_partition_new(const struct gr_alter_partition_config *cfg,
                                                  const struct gr_alter_partition_ops *ops, void *ctx);
void gr_alter_partition_free(struct gr_alter_partition *a);

/* Queues (or replaces the queued item of) topic-partition. topic_id: the partition's log's topic
 * id (KIP-516), or NULL / zero when it has none yet. */
void gr_alter_partition_enqueue(struct gr_alter_partition *a, const char *topic, const uint8_t *topic_id,
                                int32_t partition, int32_t leader_epoch, const int32_t *new_isr, int n,
                                int32_t zk_version);
/* Forgets a queued item (the partition got a new LeaderAndIsr). */
void gr_alter_partition_clear(struct gr_alter_partition *a, const char *topic, int32_t partition);
/* The same for many partitions under one lock acquisition (a LeaderAndIsr batch). */
void gr_alter_partition_clear_many(struct gr_alter_partition *a, const char *const *topics, const int32_t *partitions,
                                   int n);
/* Items queued or in flight. */
int gr_alter_partition_pending(struct gr_alter_partition *a);

#endif
