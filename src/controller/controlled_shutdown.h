/* Controlled shutdown on the controller (Kafka 2.7's KafkaController.doControlledShutdown and the
 * ControlledShutdown event).
 *
 * The request handler (src/api/handle_controlled_shutdown.c) submits it through the front door
 * (requests.h), which enqueues a ControlledShutdown event (broker_id, broker_epoch, payload
 * struct gr_ctrl_cs_payload with preempt hook). On the
 * event thread (reference §6):
 *   1. not the active controller           -> NOT_CONTROLLER (ControllerMovedException); also
 *                                              when the event is preempted or dropped
 *   2. epoch != -1 and < the cached epoch  -> STALE_BROKER_EPOCH
 *   3. broker not registered               -> BROKER_NOT_AVAILABLE
 *   4. the broker joins shuttingDownBrokerIds
 *   5. its partitions with more than one assigned replica, leadership info, and a topic not
 *      queued for deletion: those it leads -> OnlinePartition with the ControlledShutdown
 *      election; those it follows -> StopReplica(delete=false) to it, then OfflineReplica
 *   6. answer NONE with partitionLeadersOnBroker (RemainingPartitions): the partitions it still
 *      leads that have more than one replica and whose topic is not queued for deletion.
 * The broker retries until NONE with nothing remaining (controlled_shutdown_client.h).
 *
 * Threading: gr_ctrl_cs_* run on the controller's event thread except the payload's free and
 * preempt functions, which may run on any thread (they only answer). */
#ifndef GR_CONTROLLER_CONTROLLED_SHUTDOWN_H
#define GR_CONTROLLER_CONTROLLED_SHUTDOWN_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/states.h"

struct gr_ctrl_event;

/* doControlledShutdown: steps 2-6 for an active controller. On NONE, *remaining (malloc'd,
 * gr_ctrl_tp_list_free; topic names borrowed from the context, valid until the next event)
 * holds the partitions the broker still leads. Returns the Kafka error; *rc gets 0 or
 * GR_ECONTROLLER_MOVED (the caller resigns; the answer is then NOT_CONTROLLER). */
int16_t gr_ctrl_do_controlled_shutdown(struct gr_ctrl_sm *sm, int32_t broker_id, int64_t broker_epoch,
                                       struct gr_ctrl_tp_list *remaining, int *rc);

/* Kafka's ControllerContext.partitionLeadersOnBroker: partitions with leadership info led by id,
 * with more than one assigned replica, of topics not queued for deletion (a single-replica
 * partition cannot move, so listing it would only make the broker retry in vain). Appended to out
 * (names borrowed from the context). */
void gr_ctrl_partition_leaders_on_broker(struct gr_ctrl_context *ctx, int32_t id, struct gr_ctrl_tp_list *out);

/* The event payload. respond is called exactly once: by gr_ctrl_cs_complete on the event thread,
 * or with NOT_CONTROLLER by gr_ctrl_cs_fail / the preempt hook / the free function. The response
 * passed to it is valid only during the call. */
struct gr_ctrl_cs_payload {
    void (*respond)(void *arg, int16_t error, const struct gr_kzk_tp *remaining, int n_remaining);
    void *arg;
    bool responded;
};

/* Builds a ControlledShutdown event owning pl (payload_free and preempt set). */
struct gr_ctrl_event *gr_ctrl_cs_event_new(int32_t broker_id, int64_t broker_epoch, struct gr_ctrl_cs_payload *pl);
/* Answers with error and nothing remaining (e.g. NOT_CONTROLLER when not active). */
void gr_ctrl_cs_fail(struct gr_ctrl_event *ev, int16_t error);
/* Event handler body for an active controller. Returns 0 or GR_ECONTROLLER_MOVED. */
int gr_ctrl_cs_complete(struct gr_ctrl_sm *sm, struct gr_ctrl_event *ev);

#endif
