/* The fetching side of incremental fetch sessions (KIP-227): Kafka's FetchSessionHandler, used
 * by the replica fetchers (fetcher.c) so that a follower's fetch lists only the partitions whose
 * fetch parameters changed (for thousands of idle partitions, a few bytes instead of a full
 * list). The leader's side is fetch_session.h.
 *
 *   - no session yet: a full fetch (SessionEpoch 0, every partition); if the answer carries a
 *     SessionId the session is open and the next fetch is incremental at epoch 1;
 *   - incremental: SessionId and the next epoch, the partitions that are new or whose fetch
 *     offset, log start offset, max bytes, leader epoch or last fetched epoch changed, and the partitions no longer
 *     fetched as ForgottenTopicsData; in a session by topic id, a partition whose topic id changed
 *     (the topic deleted and re-created under its name) is sent under the new id and its old id
 *     forgotten, whatever its offsets (Kafka's "replaced" partitions);
 *   - a top-level error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, ...) or a
 *     failed exchange: back to a full fetch, which names the old session (so that the leader
 *     closes it) unless the leader said it does not know it.
 * Not thread-safe: one handler per fetcher, used under its lock. */
#ifndef GR_REPLICATION_FETCH_SESSION_HANDLER_H
#define GR_REPLICATION_FETCH_SESSION_HANDLER_H

#include <stdbool.h>
#include <stdint.h>

#include "protocol/arena.h"
#include "protocol/messages.h"
#include "replication/tp_index.h"

struct gr_fsh_part;

struct gr_fetch_session_handler {
    int32_t session_id; /* 0: none */
    int32_t next_epoch; /* 0: the next fetch is full */
    bool last_full;     /* the fetch in flight was full */
    bool uses_ids;      /* the session is by topic id (Fetch v13+) */
    struct gr_fsh_part *parts; /* what the leader's session holds */
    int n, cap;
    struct gr_tpi idx; /* scratch index of parts while a request is built */
};

void gr_fsh_init(struct gr_fetch_session_handler *h);
void gr_fsh_free(struct gr_fetch_session_handler *h);
/* req holds every partition to fetch (any grouping of topics); rewrites it (arrays in a) into
 * the session's request: SessionId, SessionEpoch, Topics (what changed), ForgottenTopicsData
 * (by name and topic id). uses_ids: the request goes out at v13+ (topics by id); a change of kind
 * makes it a full fetch (a leader's session is by id or by name for its life). */
void gr_fsh_build(struct gr_fetch_session_handler *h, struct FetchRequest *req, struct gr_arena *a, bool uses_ids);
/* The answer to the last built request. */
void gr_fsh_handle_response(struct gr_fetch_session_handler *h, const struct FetchResponse *resp);
/* The exchange failed: the next fetch is full. */
void gr_fsh_handle_error(struct gr_fetch_session_handler *h);

#endif
