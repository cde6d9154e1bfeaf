/* The producer states of a hosted partition for DescribeProducers (Kafka 3.9's
 * ReplicaManager.activeProducerState -> Partition.activeProducerState -> UnifiedLog.activeProducers).
 * As Kafka, any hosted replica answers (the admin client asks the leader, or --broker-id's
 * replica): a partition not hosted here is NOT_LEADER_OR_FOLLOWER when the metadata cache knows
 * it, else UNKNOWN_TOPIC_OR_PARTITION; a partition whose log directory failed is
 * KAFKA_STORAGE_ERROR. */
#include <stdlib.h>

#include "common/kerr.h"
#include "replication/log_dir_failure.h"
#include "replication/replica_internal.h"
#include "replication/replica_manager.h"
#include "storage/log.h"
#include "storage/log_manager.h"

int16_t gr_rm_active_producers(struct gr_replica_manager *rm, const char *topic, int32_t partition,
                               struct gr_pstate_entry **out, int *n) {
    *out = NULL;
    *n = 0;
    struct gr_rm_partition *p = gr_rm_get_partition(rm, topic, partition);
    if (!p || !atomic_load(&p->online)) {
        if (p) gr_rm_partition_unref(p);
        return gr_rm_not_hosted_error(rm, topic, partition);
    }
    int16_t err = gr_ldf_check(rm->b, p->lml->dir_idx);
    if (err == GR_KERR_NONE && gr_plog_active_producers(p->lml->log, out, n) != 0) err = GR_KERR_UNKNOWN_SERVER_ERROR;
    gr_rm_partition_unref(p);
    return err;
}
