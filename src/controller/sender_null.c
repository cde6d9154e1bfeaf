/* The broker request sender that drops everything: logs at DEBUG (see sender.h). */
#include "common/log.h"
#include "controller/event_manager.h"
#include "controller/sender.h"

#define LOGGER "kafka.controller.ControllerChannelManager"

static void null_startup(void *ctx, struct gr_ctrl_events *em) { (void)ctx, (void)em; }
static void null_shutdown(void *ctx) { (void)ctx; }

static void null_add(void *ctx, const struct gr_kzk_broker *b) {
    (void)ctx;
    gr_debug(LOGGER, "Added broker %d (no channel: null sender)", b->id);
}

static void null_remove(void *ctx, int32_t id) {
    (void)ctx;
    gr_debug(LOGGER, "Removed broker %d", id);
}

static void null_send(void *ctx, int32_t broker_id, int16_t api_key, int16_t api_version, void *request,
                      void (*request_free)(void *), struct gr_ctrl_event *completion) {
    (void)ctx;
    gr_debug(LOGGER, "Dropping request api_key=%d v%d to broker %d (null sender)", api_key, api_version,
             broker_id);
    if (request && request_free) request_free(request);
    gr_ctrl_event_free(completion);
}

const struct gr_ctrl_sender_ops gr_ctrl_sender_null = {
    .startup = null_startup,
    .shutdown = null_shutdown,
    .add_broker = null_add,
    .remove_broker = null_remove,
    .send = null_send,
};
