/* How a sender (channel_manager.c, or a simulation's) hands a control-request response back to
 * the controller: the completion event's payload is a struct gr_ctrl_response, freed with
 * gr_ctrl_response_free (the event's payload_free).
 *
 * The response body is decoded into `arena` (byte fields point into `frame`, also owned). The
 * request that was sent is kept too (request/request_free), so a handler can see what was asked
 * (e.g. which StopReplica partitions had DeletePartition = true). */
#ifndef GR_CONTROLLER_RESPONSE_H
#define GR_CONTROLLER_RESPONSE_H

#include <stdint.h>

#include "protocol/arena.h"

struct gr_ctrl_response {
    int16_t api_key;
    int16_t api_version;
    int32_t broker_id;
    void *body;                /* struct <Api>Response in arena */
    struct gr_arena arena;
    uint8_t *frame;            /* malloc'd response frame, may be NULL */
    void *request;             /* the request struct as sent (owned), may be NULL */
    void (*request_free)(void *request);
};

/* A zeroed response with an empty arena. */
struct gr_ctrl_response *gr_ctrl_response_new(void);
/* Frees arena, frame, request and the struct. NULL is ignored. Any thread. */
void gr_ctrl_response_free(void *resp);

#endif
