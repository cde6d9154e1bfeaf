/* Replica fetchers (Kafka's ReplicaFetcherManager / ReplicaFetcherThread): one thread per source
 * broker (leader), not per partition, fetching every partition this broker follows from that
 * leader with Fetch v11 (ReplicaId = our broker id, CurrentLeaderEpoch set), appending as follower.
 *
 * A partition added to a fetcher starts in the Truncating state: the fetcher asks the leader
 * OffsetForLeaderEpoch v3 for our latest local epoch and truncates (KIP-101/KIP-279: to
 * min(leader's end offset for that epoch, our end offset for it, our LEO); when the leader
 * answers with an epoch we do not have, to our end offset for the largest epoch below it, and
 * asks again), then fetches from its log end offset. OFFSET_OUT_OF_RANGE asks the leader for
 * its log end / start offsets (ListOffsets v5) and truncates or restarts the log accordingly.
 * Partition errors (fenced/unknown epoch, not leader) back the partition off for
 * replica.fetch.backoff.ms; connection errors back the whole fetcher off and reconnect (the
 * leader's inter-broker endpoint comes from the metadata cache).
 *
 * Threading: gr_fetcher_* may be called from any thread but NOT with a partition lock held.
 * When gr_fetcher_remove returns, no fetcher is appending to or truncating that partition. */
#ifndef GR_BROKER_FETCHER_H
#define GR_BROKER_FETCHER_H

#include <stdint.h>

struct gr_replica_manager;
struct gr_broker;
struct gr_fetcher_manager;

struct gr_fetcher_manager *gr_fetcher_manager_new(struct gr_replica_manager *rm, struct gr_broker *b);
/* Stops and joins every fetcher thread. NULL is ignored. */
void gr_fetcher_manager_free(struct gr_fetcher_manager *fm);

/* Starts following topic-partition from `leader` at leader_epoch (replacing any previous entry,
 * on whichever fetcher). */
void gr_fetcher_add(struct gr_fetcher_manager *fm, const char *topic, int32_t partition, int32_t leader,
                    int32_t leader_epoch);
/* Stops following topic-partition (no-op if not followed). */
void gr_fetcher_remove(struct gr_fetcher_manager *fm, const char *topic, int32_t partition);
/* Stops fetcher threads that have no partitions left. */
void gr_fetcher_shutdown_idle(struct gr_fetcher_manager *fm);
/* Partitions followed in total (tests, metrics). */
int gr_fetcher_count(struct gr_fetcher_manager *fm);

#endif
