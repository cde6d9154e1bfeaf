/* Replica fetchers (Kafka's ReplicaFetcherManager / ReplicaFetcherThread): one thread per source
 * broker (leader), not per partition, fetching every partition this broker follows from that
 * leader at config.fetch_version (Kafka 3.9's: 17 at inter.broker.protocol.version 3.9-IV0;
 * ReplicaId, from v15 ReplicaState.ReplicaId, = our broker id, CurrentLeaderEpoch set), appending
 * as follower. From v13 topics are named by topic id (the local log's, ops->topic_id) when every
 * partition of the request has one, else the request falls back to v12 by name (Kafka's
 * RemoteLeaderEndPoint.buildFetch); the fetch session is then opened anew, since a leader's session
 * is by id or by name for its life. UNKNOWN_TOPIC_ID / INCONSISTENT_TOPIC_ID (the leader does not
 * know the id yet, or holds the name under another id) back the partition off like other errors.
 *
 * Truncation on fetch (KIP-595, Kafka 2.7-IV1+): a partition whose log knows its latest epoch
 * starts fetching at once with that epoch as LastFetchedEpoch; a leader whose log diverges from
 * ours answers DivergingEpoch (the end of the largest epoch we share) instead of records, and the
 * fetcher truncates as for an OffsetForLeaderEpoch answer (below) and fetches on. A partition
 * without any epoch, and every partition below 2.7-IV1, starts in the Truncating state: the
 * fetcher asks the leader
 * OffsetForLeaderEpoch v3 for our latest local epoch and truncates (KIP-101/KIP-279: to
 * min(leader's end offset for that epoch, our end offset for it, our LEO); when the leader
 * answers with an epoch we do not have, to our end offset for the largest epoch below it, and
 * asks again), then fetches from its log end offset. OFFSET_OUT_OF_RANGE asks the leader for
 * its log end / start offsets (ListOffsets v5) and truncates or restarts the log accordingly.
 * Partition errors (fenced/unknown epoch, not leader) back the partition off, 5 ms at first and
 * doubling per consecutive error up to replica.fetch.backoff.ms (a new partition's first fetch
 * usually reaches its leader before the leader's LeaderAndIsr did); connection errors back the whole fetcher off and reconnect (the
 * leader's inter-broker endpoint comes from the metadata cache).
 *
 * Each fetcher talks to its leader through one Kafka client (net/kafka_client.h): a connection
 * or protocol failure closes the connection, and the next round reconnects after the back-off.
 *
 * Dependencies: the fetcher knows nothing of the replica manager or the broker (no include of
 * either; this breaks the replica_manager <-> fetcher cycle). What it needs from them -- its
 * view of a local replica and the leader's address -- comes through struct gr_fetcher_ops
 * (Kafka's AbstractFetcherThread abstract methods, which ReplicaFetcherThread implements over
 * ReplicaManager). The replica manager supplies the ops (replica_manager_ops.c) and is the only
 * caller of gr_fetcher_*.
 *
 * Threading: gr_fetcher_* may be called from any thread but NOT with a partition lock held.
 * When gr_fetcher_remove returns, no fetcher is appending to or truncating that partition.
 * The ops are called on fetcher threads (and get/release also on the caller of
 * gr_fetcher_add/remove), with the fetcher's own lock held but no partition lock. */
#ifndef GR_BROKER_FETCHER_H
#define GR_BROKER_FETCHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gr_fetcher_manager;

/* A local replica as the fetcher sees it: an opaque reference from ops->get. */
typedef void gr_fetcher_part;

struct gr_fetcher_ops {
    /* A reference to the hosted partition, or NULL if it is not hosted; release drops it. */
    gr_fetcher_part *(*get)(void *ctx, const char *topic, int32_t partition);
    void (*release)(gr_fetcher_part *p);
    /* Optional: p's topic name, valid while the reference is held (the fetcher then keeps no copy
     * of its own: memory per partition, issue 14). NULL: the fetcher copies the name. */
    const char *(*topic)(gr_fetcher_part *p);
    /* The local log: latest epoch (-1 none), log start/end offsets, high watermark, and the
     * end offset of `epoch` (Kafka's endOffsetFor: *epoch_out is the largest epoch <= epoch). */
    int32_t (*latest_epoch)(gr_fetcher_part *p);
    /* Optional: the log's topic id (KIP-516) into out; false when it has none. */
    bool (*topic_id)(gr_fetcher_part *p, uint8_t out[16]);
    int64_t (*log_start_offset)(gr_fetcher_part *p);
    int64_t (*log_end_offset)(gr_fetcher_part *p);
    int64_t (*high_watermark)(gr_fetcher_part *p);
    void (*end_offset_for_epoch)(gr_fetcher_part *p, int32_t epoch, int64_t *end_offset, int32_t *epoch_out);
    /* Follower writes (contracts of gr_rm_follower_truncate / gr_rm_follower_append). */
    int (*truncate)(void *ctx, gr_fetcher_part *p, int32_t leader_epoch, int64_t offset, bool fully);
    int (*append)(void *ctx, gr_fetcher_part *p, int32_t leader_epoch, const uint8_t *records, size_t len,
                  int64_t leader_hw, int64_t leader_log_start);
    /* The leader's endpoint on the inter-broker listener; false if unknown. */
    bool (*leader_endpoint)(void *ctx, int32_t broker_id, char *host, size_t hostlen, int32_t *port);
    /* Follower replication throttle (Kafka's ReplicationQuotaManager FOLLOWER), all optional: is
     * topic-partition a throttled replica here, is follower.replication.throttled.rate exceeded,
     * record bytes fetched for throttled replicas. A throttled replica that is not in sync (its log
     * end below the leader's high watermark of the last response) is left out of fetches while the
     * rate is exceeded. */
    bool (*throttled)(void *ctx, const char *topic, int32_t partition);
    bool (*quota_exceeded)(void *ctx);
    void (*quota_record)(void *ctx, size_t bytes);
};

/* replica.* settings, read once at creation. */
struct gr_fetcher_config {
    int32_t broker_id;           /* ours: the ReplicaId of our requests */
    int64_t backoff_ms;          /* replica.fetch.backoff.ms */
    int socket_timeout_ms;       /* replica.socket.timeout.ms */
    int32_t wait_max_ms;         /* replica.fetch.wait.max.ms */
    int32_t min_bytes;           /* replica.fetch.min.bytes */
    int32_t max_bytes;           /* replica.fetch.max.bytes (per partition) */
    int32_t response_max_bytes;  /* replica.fetch.response.max.bytes */
    /* Fetch version by inter.broker.protocol.version (Kafka 3.9's MetadataVersion.fetchRequestVersion):
     * 17 (3.9-IV0), 16 (3.7-IV4), 15 (3.5-IV1), 14 (3.5-IV0), 13 (3.1-IV0), 12 (2.7-IV1), else 11.
     * 12+: truncation on fetch; 13+: by topic id when every partition of a request has one. */
    int16_t fetch_version;
};

/* ops and ctx are borrowed and must outlive the manager. */
struct gr_fetcher_manager *gr_fetcher_manager_new(const struct gr_fetcher_config *cfg, const struct gr_fetcher_ops *ops,
                                                  void *ctx);
/* Stops and joins every fetcher thread. NULL is ignored. */
void gr_fetcher_manager_free(struct gr_fetcher_manager *fm);

/* Starts following topic-partition from `leader` at leader_epoch (replacing any previous entry,
 * on whichever fetcher). */
void gr_fetcher_add(struct gr_fetcher_manager *fm, const char *topic, int32_t partition, int32_t leader,
                    int32_t leader_epoch);
/* Stops following topic-partition (no-op if not followed). */
void gr_fetcher_remove(struct gr_fetcher_manager *fm, const char *topic, int32_t partition);
/* One partition of a batch (gr_fetcher_add_many / gr_fetcher_remove_many; remove ignores
 * leader and leader_epoch). */
struct gr_fetcher_tp {
    const char *topic;
    int32_t partition;
    int32_t leader;
    int32_t leader_epoch;
};
/* Batches, for a LeaderAndIsr of thousands of partitions: the same as calling gr_fetcher_remove
 * / gr_fetcher_add for each item in order, but each fetcher's lock is taken once per batch and
 * a fetcher's waiting Fetch is interrupted at most once (Kafka's addFetcherForPartitions /
 * removeFetcherForPartitions take a set too). Items must name distinct partitions. */
void gr_fetcher_remove_many(struct gr_fetcher_manager *fm, const struct gr_fetcher_tp *v, int n);
void gr_fetcher_add_many(struct gr_fetcher_manager *fm, const struct gr_fetcher_tp *v, int n);
/* The broker is shutting down (its controlled shutdown has begun): from now on gr_fetcher_add /
 * gr_fetcher_add_many only stop following the partitions they name (the remove half), so the
 * become-follower LeaderAndIsr the controller sends a leaving broker for every partition it led
 * sets up no fetcher, session or truncation. Fetchers already running go on until
 * gr_fetcher_manager_free. Kafka's broker gets the same effect by stopping its request handlers
 * once the controlled shutdown succeeded. */
void gr_fetcher_stop_adding(struct gr_fetcher_manager *fm);
/* Stops fetcher threads that have no partitions left. */
void gr_fetcher_shutdown_idle(struct gr_fetcher_manager *fm);
/* Partitions followed in total (tests, metrics). */
int gr_fetcher_count(struct gr_fetcher_manager *fm);
/* Kafka's ReplicaFetcherManager gauges: the lowest one-minute rate of answered Fetch requests
 * over the fetcher threads (0 without any), and the largest lag (the leader's high watermark
 * minus our log end after the last append) over their partitions. Any thread. */
void gr_fetcher_stats(struct gr_fetcher_manager *fm, double *min_fetch_rate, int64_t *max_lag);

#endif
