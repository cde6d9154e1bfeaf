/* Fetch from follower (KIP-392): Kafka 2.7's RackAwareReplicaSelector and
 * ReplicaManager.findPreferredReadReplica.
 *
 * With replica.selector.class = org.apache.kafka.common.replica.RackAwareReplicaSelector, the
 * leader of a partition answers a consumer's Fetch v11+ that carries a client rack (RackId) with
 * PreferredReadReplica = a replica in the client's rack (no data), and the consumer then fetches
 * from that replica. The rules:
 *   - only consumer fetches (ReplicaId < 0), only on the leader, only with a selector configured;
 *   - candidates: the leader (its own log end offset, caught up now) and every remote replica
 *     whose known log end offset >= the fetch offset and log start offset <= the fetch offset,
 *     that has an endpoint on the listener the request came in on;
 *   - no client rack: the leader; else the replicas in the client's rack (broker.rack): none ->
 *     the leader; the leader among them -> the leader; else the one with the highest log end
 *     offset, then the least time since it was last caught up;
 *   - the leader itself is never returned as preferred (-1 then: the leader serves the read).
 *
 * Pure functions plus one lookup of the partition's replication state (under p->lock) and the
 * metadata cache (brokers' racks and endpoints). */
#ifndef GR_REPLICATION_REPLICA_SELECTOR_H
#define GR_REPLICATION_REPLICA_SELECTOR_H

#include <stdbool.h>
#include <stdint.h>

struct gr_replica_manager;
struct gr_rm_partition;

#define GR_RACK_AWARE_REPLICA_SELECTOR "org.apache.kafka.common.replica.RackAwareReplicaSelector"

/* Kafka's ReplicaView. */
struct gr_replica_view {
    int32_t id;
    const char *rack; /* NULL: none */
    int64_t log_end_offset;
    int64_t time_since_caught_up_ms;
};

/* RackAwareReplicaSelector.select: the chosen replica's id (leader->id when no better one). */
int32_t gr_rack_aware_select(const char *client_rack, const struct gr_replica_view *leader,
                             const struct gr_replica_view *replicas, int n);

/* findPreferredReadReplica for a consumer fetch of partition p (reference held, p->lock NOT
 * held) at fetch_offset: the preferred read replica's broker id, or -1 (read from here). */
int32_t gr_rm_preferred_read_replica(struct gr_replica_manager *rm, struct gr_rm_partition *p,
                                     const char *client_rack, const char *listener, int64_t fetch_offset);

#endif
