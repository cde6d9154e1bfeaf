/* Replicas on offline log dirs, as the controller learns them from LeaderAndIsr responses
 * (Kafka 2.7's LeaderAndIsrResponseReceived + ControllerContext.replicasOnOfflineDirs +
 * onReplicasBecomeOffline).
 *
 * For each LeaderAndIsr response from broker B (top-level NONE): partitions answered
 * KAFKA_STORAGE_ERROR that were not known offline become offline replicas of B; partitions
 * answered NONE are forgotten (a restarted broker's healthy replicas). Newly offline replicas go
 * through the same flow as a broker failure's, gr_ctrl_on_replicas_become_offline (flows.h,
 * Kafka's onReplicasBecomeOffline): partitions they led -> OfflinePartition and
 * triggerOnlinePartitionStateChange elects from the ISR members that are online (not on an
 * offline dir); the replicas -> OfflineReplica (StopReplica(delete=false), removed from the ISR);
 * those of topics queued for deletion fail their deletion (topic_deletion.h); UpdateMetadata.
 * The LogDirEventNotification event (controller.c) is what makes B answer: it sends
 * LeaderAndIsr for all of B's replicas.
 *
 * Where the marks live: per partition in the context (struct gr_ctrl_partition offline_dirs), so
 * every "live replica" test (states.h gr_ctrl_replica_online: elections, deletion, UpdateMetadata's
 * OfflineReplicas) sees them, as Kafka's isReplicaOnline does.
 *
 * The marks go with the context (a new term starts empty, as Kafka's context does) and a broker's
 * marks are dropped when it starts up (onBrokerStartup, flows.c). Event thread only. */
#ifndef GR_CONTROLLER_OFFLINE_DIRS_H
#define GR_CONTROLLER_OFFLINE_DIRS_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/states.h"

struct gr_offline_dirs;
struct gr_topic_deletion;
struct gr_ctrl_event;

/* sm and td (may be NULL) are borrowed. */
struct gr_offline_dirs *gr_od_new(struct gr_ctrl_sm *sm, struct gr_topic_deletion *td);
void gr_od_free(struct gr_offline_dirs *od);

/* LeaderAndIsrResponseReceived (payload struct gr_ctrl_response, broker_id set). Returns 0 or
 * GR_ECONTROLLER_MOVED. */
int gr_od_process_leader_and_isr_response(struct gr_offline_dirs *od, struct gr_ctrl_event *ev);

/* Is the replica of topic-partition on broker known to be on an offline dir? */
bool gr_od_replica_offline(struct gr_offline_dirs *od, const char *topic, int32_t partition, int32_t broker);
int gr_od_count(struct gr_offline_dirs *od);

#endif
