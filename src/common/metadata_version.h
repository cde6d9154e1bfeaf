/* inter.broker.protocol.version (Kafka's MetadataVersion in ZooKeeper mode): what the cluster's
 * brokers all speak, so that a rolling upgrade can run new brokers next to old ones before the
 * version is raised. Gregor uses it for what KIP-516 changed between brokers: whether topics get
 * ids (Kafka's usesTopicId, 2.8-IV0+) and which LeaderAndIsr / UpdateMetadata / StopReplica
 * versions the controller sends (Kafka 3.9's ControllerChannelManager table, from the 2.7 versions
 * up), and which AlterPartition version a partition leader sends to the controller. Plain values;
 * any thread. */
#ifndef GR_COMMON_METADATA_VERSION_H
#define GR_COMMON_METADATA_VERSION_H

#include <stdbool.h>
#include <stdint.h>

/* An ordered value: major * 10000 + minor * 100 + IV (a version without "-IVn" is its latest IV,
 * 99). Kafka's strings "2.7", "2.7-IV2", "2.8.0", "3.9-IV0". */
#define GR_IBP(major, minor, iv) ((major) * 10000 + (minor) * 100 + (iv))
#define GR_IBP_LATEST GR_IBP(3, 9, 0)

/* 0 and *out, or -EINVAL for a string Kafka would refuse (not "X.Y", "X.Y.Z" or "X.Y-IVn"). */
int gr_ibp_parse(const char *s, int32_t *out);

struct gr_ibp_features {
    bool topic_ids;                 /* 2.8-IV0+: topics get ids (admin, controller) */
    int16_t leader_and_isr_version; /* 7 (3.4-IV0+), 5 (2.8-IV1+), else 4 */
    int16_t update_metadata_version;/* 8 (3.4-IV0+), 7 (2.8-IV1+), else 6 */
    int16_t stop_replica_version;   /* 4 (3.4-IV0+), else 3 */
    /* AlterPartition (key 56) a leader sends: 3 (3.5-IV1+, KIP-903's NewIsrWithEpochs), 2
     * (3.3-IV3+, KIP-841: topic ids, INELIGIBLE_REPLICA), 1 (3.2-IV0+, KIP-704's
     * LeaderRecoveryState), else 0 (Kafka 2.7-3.1's AlterIsr v0). Kafka picks it by ApiVersions
     * negotiation with the controller; Gregor's brokers do not negotiate with each other, so the
     * IBP (raised only once every broker runs the new version) bounds it instead. A batch with
     * a partition whose log has no topic id yet goes at min(this, 1), as Kafka's
     * AlterPartitionRequest.Builder(canUseTopicIds = false). */
    int16_t alter_partition_version;
};
/* What ibp allows (an unparsable or NULL string counts as GR_IBP_LATEST). */
void gr_ibp_features(const char *ibp, struct gr_ibp_features *out);

#endif
