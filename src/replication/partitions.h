/* The broker's partition registry: the partitions this broker hosts as a replica, with the state
 * the controller last gave it through LeaderAndIsr (Kafka's ReplicaManager.allPartitions plus
 * each Partition's leader/epoch/ISR/replicas/zkVersion), and the highest controller epoch seen
 * (ReplicaManager.controllerEpoch).
 *
 * Locking: one mutex, Kafka's replicaStateChangeLock. Control-request handling holds it for the
 * whole request (gr_partitions_lock/unlock) so LeaderAndIsr / StopReplica / UpdateMetadata are
 * applied one at a time; the copying readers lock internally. The replication hooks in struct
 * gr_broker run with this lock held: they must not call back into the locking functions. */
#ifndef GR_BROKER_PARTITIONS_H
#define GR_BROKER_PARTITIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/uuid.h"

/* One hosted partition. Arrays are owned by the registry (or by whoever holds a copy); the
 * registry's own entries share their topic name with the entries of the same topic (never free
 * or replace it; a copy from gr_partition_state_copy owns its own). */
struct gr_partition_state {
    char *topic;
    int32_t partition;
    int32_t leader;           /* -1 none */
    int32_t leader_epoch;     /* -1 until the first LeaderAndIsr */
    int32_t controller_epoch; /* epoch of the controller that made the decision */
    int32_t zk_version;       /* of the partition state znode */
    int n_isr;
    int32_t *isr;
    int n_replicas;
    int32_t *replicas;
    int n_adding;
    int32_t *adding;
    int n_removing;
    int32_t *removing;
    bool is_new;              /* IsNew of the last applied LeaderAndIsr */
    struct gr_uuid topic_id;  /* TopicId of the last applied LeaderAndIsr (v5+); zero: none */
};

struct gr_partitions;

struct gr_partitions *gr_partitions_new(void);
void gr_partitions_free(struct gr_partitions *r);

/* The state-change lock (not recursive). */
void gr_partitions_lock(struct gr_partitions *r);
void gr_partitions_unlock(struct gr_partitions *r);

/* ---- with the lock held ---- */
/* Highest controller epoch seen (0 initially, as Kafka's KafkaController.InitialControllerEpoch). */
int32_t gr_partitions_controller_epoch_locked(const struct gr_partitions *r);
void gr_partitions_set_controller_epoch_locked(struct gr_partitions *r, int32_t epoch);
/* The hosted partition or NULL. Valid until the lock is released or the entry removed. */
struct gr_partition_state *gr_partitions_get_locked(struct gr_partitions *r, const char *topic,
                                                    int32_t partition);
/* The entry for topic-partition, created with leader -1 / leader_epoch -1 if absent. */
struct gr_partition_state *gr_partitions_get_or_create_locked(struct gr_partitions *r,
                                                              const char *topic,
                                                              int32_t partition);
/* Removes the entry if present. */
void gr_partitions_remove_locked(struct gr_partitions *r, const char *topic, int32_t partition);
int gr_partitions_count_locked(const struct gr_partitions *r);
struct gr_partition_state *gr_partitions_at_locked(struct gr_partitions *r, int i);

/* ---- copying readers (any thread, lock taken internally) ---- */
/* Deep copy of one partition's state; false if not hosted. Release with
 * gr_partition_state_release. */
bool gr_partitions_get(struct gr_partitions *r, const char *topic, int32_t partition,
                       struct gr_partition_state *out);
void gr_partition_state_release(struct gr_partition_state *s);
/* Deep copy (dst released separately). */
void gr_partition_state_copy(struct gr_partition_state *dst, const struct gr_partition_state *src);

#endif
