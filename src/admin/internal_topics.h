/* Creation of the internal topics __consumer_offsets and __transaction_state on first use
 * (Kafka 2.7's KafkaApis.createInternalTopic, GroupCoordinator.offsetsTopicConfigs,
 * TransactionCoordinator.transactionTopicConfigs; AutoTopicCreationManager from Kafka 2.8 on).
 *
 *   topic                 partitions / replication factor              configs
 *   __consumer_offsets    offsets.topic.num.partitions /               cleanup.policy=compact,
 *                         offsets.topic.replication.factor             compression.type=producer,
 *                                                                      segment.bytes=offsets.topic.segment.bytes
 *   __transaction_state   transaction.state.log.num.partitions /       cleanup.policy=compact,
 *                         transaction.state.log.replication.factor     compression.type=uncompressed,
 *                                                                      unclean.leader.election.enable=false,
 *                                                                      min.insync.replicas=transaction.state.log.min.isr,
 *                                                                      segment.bytes=transaction.state.log.segment.bytes
 *
 * With fewer live brokers (this broker's metadata cache) than the configured replication factor
 * nothing is created and the answer is COORDINATOR_NOT_AVAILABLE, as in Kafka: the replication
 * factor and min.insync.replicas are never lowered to what happens to be alive (a coordinator
 * asked for during start-up would otherwise leave the topic under-replicated for good).
 *
 * Stateless; blocks on ZooKeeper (through gr_topic_admin_create_topic); any thread. */
#ifndef GR_ADMIN_INTERNAL_TOPICS_H
#define GR_ADMIN_INTERNAL_TOPICS_H

#include <stdint.h>

struct gr_broker;

/* Creates the internal topic `name` (one of the two above) as described. Returns NONE when it
 * was created or already existed (the caller answers LEADER_NOT_AVAILABLE / COORDINATOR_NOT_AVAILABLE
 * until its leaders are known), COORDINATOR_NOT_AVAILABLE when too few brokers are alive, or the
 * creation's error (INVALID_REQUEST for a name that is not internal). */
int16_t gr_internal_topic_create(struct gr_broker *b, const char *name);

#endif
