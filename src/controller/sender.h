/* How the controller sends requests to brokers: an interface (Kafka's ControllerChannelManager
 * seen from the controller). Implementations: the channel manager (channel_manager.h: a queue and
 * a send thread per broker; the only controller file that uses src/net), the simulation's
 * in-memory network (tests/sim), and gr_ctrl_sender_null below, which accepts and drops
 * everything (a controller created without a sender; unit tests).
 *
 * Contract
 * 1. Every op is called on the controller's event thread only.
 * 2. startup() is called in onControllerFailover before any add_broker; shutdown() in
 *    onControllerResignation: it removes every broker and drops queued requests (their
 *    completion events are freed, not delivered).
 * 3. send() takes ownership of `request` (freed with request_free, may be NULL) and of
 *    `completion` (may be NULL). When the response arrives the implementation stores it in
 *    completion->payload (with payload_free) and puts the event on the event manager given to
 *    startup(); it never calls controller code directly. A request to a broker that is not added
 *    is dropped with a WARN ("Not sending request ... since it is offline"), like Kafka.
 * 4. The request is whatever the codec layer's struct for (api_key, api_version) is; the sender
 *    fills in nothing: controllerId, controllerEpoch and brokerEpoch are already set by the
 *    controller. */
#ifndef GR_CONTROLLER_SENDER_H
#define GR_CONTROLLER_SENDER_H

#include <stdbool.h>
#include <stdint.h>

#include "zk/kzk.h"

struct gr_ctrl_events;
struct gr_ctrl_event;

struct gr_ctrl_sender_ops {
    void (*startup)(void *ctx, struct gr_ctrl_events *em);
    void (*shutdown)(void *ctx);
    /* Starts a channel to broker b (endpoints copied). Re-adding an id replaces it. */
    void (*add_broker)(void *ctx, const struct gr_kzk_broker *b);
    void (*remove_broker)(void *ctx, int32_t broker_id);
    void (*send)(void *ctx, int32_t broker_id, int16_t api_key, int16_t api_version, void *request,
                 void (*request_free)(void *request), struct gr_ctrl_event *completion);
    /* Optional (NULL: no wait): blocks until every request handed to send() so far has been
     * answered or dropped (its broker removed), at most timeout_ms; true if so. Gregor's, for
     * the elections' requests before the rest of a step (flows.c wait_elections_applied). */
    bool (*wait_idle)(void *ctx, int timeout_ms);
};

/* The sender that drops everything (ctx unused, may be NULL). */
extern const struct gr_ctrl_sender_ops gr_ctrl_sender_null;

#endif
