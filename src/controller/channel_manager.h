/* The controller's channel manager (Kafka's ControllerChannelManager + RequestSendThread): the real
 * gr_ctrl_sender_ops. One queue and one send thread per added broker.
 *
 * A send thread takes the next request from its queue and retries it until a response arrives or
 * the broker is removed, through its own Kafka client (net/kafka_client.h,
 * gr_kafka_client_call_until_answered): connect to the broker's inter-broker endpoint (the
 * endpoint of the listener named at creation, else the broker's first endpoint) with
 * controller.socket.timeout.ms, encode the request with the codec at the version given to send(),
 * send and wait for the response (same timeout); any failure closes the connection, waits 100 ms
 * (interrupted by removal) and retries. A request that cannot be encoded is dropped (ERROR). The response is decoded and delivered as the completion event (payload: struct
 * gr_ctrl_response, response.h) on the event manager given to startup(); a request without a
 * completion is simply freed once answered.
 *
 * Lifetimes (numbered rules):
 *  1. All sender ops are called on the controller's event thread (sender.h).
 *  2. remove_broker and shutdown never wait for a send thread: the thread is told to stop (its
 *     socket is shut down, its backoff interrupted) and exits on its own, freeing its queue. A
 *     thread stuck in connect() finishes within controller.socket.timeout.ms. After remove_broker
 *     returns, that thread never touches the event manager or the metrics again.
 *  3. gr_ctrl_channel_free waits (bounded by the socket timeout + 1 s) for exiting threads, so
 *     tests and process shutdown end cleanly.
 *
 * Metrics (kafka.controller:type=ControllerChannelManager): TotalQueueSize (gauge),
 * QueueSize,broker-id=N (gauge), RequestRateAndQueueTimeMs,broker-id=N (timer of queue time). */
#ifndef GR_CONTROLLER_CHANNEL_MANAGER_H
#define GR_CONTROLLER_CHANNEL_MANAGER_H

#include <stdint.h>

#include "controller/sender.h"

struct gr_metrics;

struct gr_ctrl_channel_config {
    int32_t controller_id;
    const char *inter_broker_listener; /* copied; NULL = first endpoint */
    int socket_timeout_ms;             /* controller.socket.timeout.ms (Kafka default 30000) */
    int backoff_ms;                    /* reconnect backoff; 0 = 100 */
    struct gr_metrics *metrics;        /* borrowed, may be NULL; must outlive the manager */
};

struct gr_ctrl_channel;

/* Creates a manager (no threads until brokers are added). Any thread. */
struct gr_ctrl_channel *gr_ctrl_channel_new(const struct gr_ctrl_channel_config *cfg);
/* Convenience for the broker start-up code: a manager configured from server.properties --
 * control.plane.listener.name if set, else inter.broker.listener.name (else the first listener),
 * controller.socket.timeout.ms -- for controller broker_id. metrics may be NULL. */
struct gr_config;
struct gr_ctrl_channel *gr_ctrl_channel_new_for_broker(const struct gr_config *cfg, int32_t broker_id,
                                                       struct gr_metrics *metrics);
/* The listener name gr_ctrl_channel_new_for_broker picks (borrowed from cfg; NULL if none). */
const char *gr_ctrl_channel_listener_name(const struct gr_config *cfg);

/* Removes every broker, waits for their threads (rule 3) and frees. NULL ignored. Owner thread,
 * not the event thread. */
void gr_ctrl_channel_free(struct gr_ctrl_channel *ch);

/* The ops to install in the controller config, with ctx = the struct gr_ctrl_channel *. */
extern const struct gr_ctrl_sender_ops gr_ctrl_channel_ops;

/* Requests queued for a broker (-1: all). Any thread. */
int64_t gr_ctrl_channel_queue_size(struct gr_ctrl_channel *ch, int32_t broker_id);

#endif
