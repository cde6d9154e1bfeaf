/* Incremental fetch sessions (KIP-227): Kafka 2.7's FetchSession.scala (FetchSessionCache,
 * FetchSession, CachedPartition and the Full / Incremental / Sessionless / SessionError fetch
 * contexts).
 *
 * A Fetch v7+ with SessionEpoch 0 (a full fetch) lists every partition and, when the cache has a
 * slot, opens a session: the answer carries a new SessionId and the broker remembers the
 * partitions (fetch offset, max bytes, log start offset, leader epoch) and what it last
 * answered of each (high watermark, log start offset). Later fetches (SessionId, epoch 1, 2, ...)
 * list only partitions whose fetch parameters changed and ForgottenTopicsData to drop; the broker
 * reads every partition of the session and answers only those with records, an error, a changed
 * high watermark or log start offset, or a preferred read replica (the answered ones move to the
 * end of the session so that a byte limit rotates fairly). Epoch -1 (or v0-6) is sessionless;
 * a full fetch or epoch -1 naming a session closes it. Errors: unknown session
 * FETCH_SESSION_ID_NOT_FOUND, wrong epoch INVALID_FETCH_SESSION_EPOCH (top-level, no data); an
 * incremental fetch that leaves the session empty closes it and is answered sessionless.
 *
 * Topic ids (KIP-516, Kafka 3.9's FetchSession): a session opened by a Fetch v13+ keys its
 * partitions by topic id (Topics and ForgottenTopicsData name ids), one opened by v7-12 by name;
 * continuing one with the other kind of request is FETCH_SESSION_TOPIC_ID_ERROR (top-level, no
 * data, the session stays). The Fetch handler resolves a v13+ request's ids to names before
 * gr_fsc_begin (FetchRequest_FetchTopic.Topic, NULL for an unknown id); a session by id keeps the
 * name it was given with each partition (NULL until a request names the id resolved), and the
 * request gr_fsc_begin returns carries both, TopicId and Topic (NULL: unresolved).
 *
 * The cache holds max.incremental.fetch.session.cache.slots sessions. A new session takes a free
 * slot, else evicts: first a session unused for 120 s; else the least valuable session that the
 * newcomer outranks, ordered by (privileged, partition count, id) — followers' sessions are
 * privileged; a session is evictable by anyone only once older than 120 s, and by a follower
 * (privileged) at once if it is a consumer's. A follower's new session also closes that
 * follower's other sessions, once the request passed the CLUSTER_ACTION check
 * (gr_fsc_replica_authorized; Gregor runs one fetcher per source broker, fetcher.h): a full fetch
 * whose answer the follower never read (it dropped the connection) leaves a session it will
 * never name, and at 100k partitions each such session held ~30k cached partitions until the
 * 1000 slots filled (gigabytes; issue 14). A cached partition costs 56 B: its topic (name, id)
 * is shared with the neighbouring partitions of the same topic, and a full session's array is
 * allocated to size.
 *
 * Use from the Fetch handler: gr_fsc_begin turns the request into the full list of partitions to
 * read (a FetchRequest in the request's arena), gr_fsc_finish turns the full response into what
 * is sent (filtering an incremental one) and updates the session. Thread-safety: one mutex per
 * cache; begin/finish of different requests may run concurrently. */
#ifndef GR_REPLICATION_FETCH_SESSION_H
#define GR_REPLICATION_FETCH_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "protocol/arena.h"
#include "protocol/messages.h"

#define GR_FSC_EVICTION_MS 120000

struct gr_fetch_session_cache;

struct gr_fetch_session_cache *gr_fsc_new(int max_slots, int64_t eviction_ms);
void gr_fsc_free(struct gr_fetch_session_cache *c);
/* Number of open sessions and of their partitions (Kafka's NumIncrementalFetchSessions /
 * NumIncrementalFetchPartitionsCached). */
void gr_fsc_stats(struct gr_fetch_session_cache *c, int *sessions, int64_t *partitions);
/* Sessions evicted for a newcomer since the cache was made (Kafka's
 * IncrementalFetchSessionEvictionsPerSec). */
int64_t gr_fsc_evictions(struct gr_fetch_session_cache *c);

enum gr_fsc_kind { GR_FSC_SESSIONLESS, GR_FSC_FULL, GR_FSC_INCREMENTAL, GR_FSC_ERROR };

/* One request's fetch context (Kafka's FetchContext). */
struct gr_fsc_ctx {
    enum gr_fsc_kind kind;
    int16_t error;      /* GR_FSC_ERROR */
    int32_t session_id; /* GR_FSC_INCREMENTAL */
    int32_t epoch;      /* the session's epoch after this request (incremental) */
    bool privileged;    /* a follower's fetch */
    bool uses_ids;      /* a Fetch v13+: partitions by topic id */
    int32_t replica_id; /* the request's ReplicaId (-1: a consumer) */
    int n;              /* partitions of the full request (incremental) */
    int64_t *cached_hw, *cached_log_start; /* what was last answered, per partition (incremental) */
};

/* A topic id's name (malloc'd, the caller frees) or NULL: the metadata cache's, for a session by
 * id whose partitions were added while their id was unknown (Kafka's maybeResolveUnknownName).
 * Called under the cache's mutex; must not call back into the cache. */
typedef char *(*gr_fsc_resolve_fn)(void *arg, const uint8_t id[16]);

/* Kafka's FetchManager.newContext for request r of version `version` at time now_ms. Returns the
 * request to read: r itself (sessionless, full) or a FetchRequest of all the session's
 * partitions (incremental), allocated in a; NULL for GR_FSC_ERROR. resolve (may be NULL): names
 * the session's unresolved ids (sessions by id). */
const struct FetchRequest *gr_fsc_begin(struct gr_fetch_session_cache *c, const struct FetchRequest *r,
                                        int16_t version, int64_t now_ms, struct gr_arena *a, struct gr_fsc_ctx *ctx,
                                        gr_fsc_resolve_fn resolve, void *resolve_arg);

/* The Fetch handler's CLUSTER_ACTION decision for a request with ReplicaId >= 0. Not authorized:
 * the request's session (if one opens) is an ordinary consumer-ranked one tied to no replica, so it
 * neither closes that replica's sessions nor outranks consumers' (a spoofed ReplicaId must not
 * touch a real follower's sessions). Call between gr_fsc_begin and gr_fsc_finish. */
void gr_fsc_replica_authorized(struct gr_fsc_ctx *ctx, bool authorized);

/* Kafka's updateAndGenerateResponseData: resp answers the request gr_fsc_begin returned (same
 * topics and partitions, in order); sets SessionId and ErrorCode, filters an incremental answer
 * (new arrays in a), opens the session of a full fetch and records what was answered. */
void gr_fsc_finish(struct gr_fetch_session_cache *c, const struct FetchRequest *full, struct gr_fsc_ctx *ctx,
                   struct FetchResponse *resp, int64_t now_ms, struct gr_arena *a);

#endif
