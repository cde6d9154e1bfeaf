/* Broker-side AlterIsr sender (Kafka 2.7's AlterIsrManager): a leader's proposed ISR changes are
 * queued here (at most one per partition) and sent in batches as AlterIsr v0 (BrokerId,
 * BrokerEpoch, per partition LeaderEpoch, NewIsr, CurrentIsrVersion = zkVersion) to the active
 * controller, found through the metadata cache's controller id and its endpoint on the
 * inter-broker listener. One thread, one request in flight.
 *
 * Answers: a top-level error or a connection failure keeps every item and retries after a
 * back-off (the controller may have moved, or may not implement AlterIsr yet); per-partition
 * answers go to gr_rm_alter_isr_result, which commits the ISR, gives up, or asks for a resend.
 *
 * Threading: any thread may enqueue (a partition lock may be held: enqueue only takes the
 * sender's own lock). */
#ifndef GR_BROKER_ALTER_ISR_H
#define GR_BROKER_ALTER_ISR_H

#include <stdbool.h>
#include <stdint.h>

struct gr_replica_manager;
struct gr_broker;
struct gr_alter_isr;

struct gr_alter_isr *gr_alter_isr_new(struct gr_replica_manager *rm, struct gr_broker *b);
void gr_alter_isr_free(struct gr_alter_isr *a);

/* Queues (or replaces the queued item of) topic-partition. */
void gr_alter_isr_enqueue(struct gr_alter_isr *a, const char *topic, int32_t partition, int32_t leader_epoch,
                          const int32_t *new_isr, int n, int32_t zk_version);
/* Forgets a queued item (the partition got a new LeaderAndIsr). */
void gr_alter_isr_clear(struct gr_alter_isr *a, const char *topic, int32_t partition);
/* Items queued or in flight. */
int gr_alter_isr_pending(struct gr_alter_isr *a);

#endif
