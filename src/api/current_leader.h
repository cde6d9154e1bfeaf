/* KIP-951 leader discovery (Kafka 3.9's KafkaApis.getCurrentLeader), shared by the handlers that
 * answer NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH with the leader this broker knows: Produce
 * v10+ and Fetch v16+. The leader and its epoch come from the hosted partition if this broker
 * hosts it, else from the metadata cache, (-1, -1) if neither knows it; the endpoint is the
 * leader's on the request's listener (with its rack) if it is a live broker with that listener.
 * Stateless: each call takes and releases the partition's lock and the metadata cache's read
 * lock itself; strings are allocated in the request's arena (live until the response is sent). */
#ifndef GR_API_CURRENT_LEADER_H
#define GR_API_CURRENT_LEADER_H

#include <stdbool.h>
#include <stdint.h>

#include "api/apis.h"

struct gr_api_leader_endpoint {
    char *host; /* in the request's arena */
    int32_t port;
    char *rack; /* NULL: none */
};

void gr_api_current_leader(struct gr_api_req *req, const char *topic, int32_t partition, int32_t *leader,
                           int32_t *epoch);
/* false: the leader is no live broker with the request's listener. */
bool gr_api_leader_endpoint(struct gr_api_req *req, int32_t leader, struct gr_api_leader_endpoint *out);

#endif
