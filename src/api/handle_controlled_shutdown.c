/* ControlledShutdown v0-3 (api key 7) on the broker that may be the controller (Kafka 2.7's
 * KafkaApis.handleControlledShutdownRequest): a broker that is not the active controller answers
 * NOT_CONTROLLER at once; otherwise a ControlledShutdown event is put on the controller's queue
 * and the request is answered from the event thread (controlled_shutdown.h), or with
 * NOT_CONTROLLER if the event is preempted or dropped. The request never blocks an I/O thread. */
#include <stdlib.h>
#include <string.h>

#include "api/apis.h"
#include "broker/broker.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/controlled_shutdown.h"
#include "controller/controller.h"
#include "controller/event_manager.h"

#define LOGGER "kafka.server.KafkaApis"

/* Runs on whichever thread answers (event thread, preempting thread or the one freeing the
 * event). The request (arg) is completed here, exactly once (payload contract). */
static void respond(void *arg, int16_t error, const struct gr_kzk_tp *rem, int n) {
    struct gr_api_req *req = arg;
    struct ControlledShutdownResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = error;
    resp->RemainingPartitionsCount = n;
    resp->RemainingPartitions = gr_api_alloc(req, sizeof(*resp->RemainingPartitions) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        resp->RemainingPartitions[i].TopicName = gr_api_strdup(req, rem[i].topic);
        resp->RemainingPartitions[i].PartitionIndex = rem[i].partition;
    }
    gr_api_respond(req, resp);
}

static void handle_controlled_shutdown(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                       void *body) {
    const struct ControlledShutdownRequest *r = body;
    int64_t epoch = hdr->RequestApiVersion >= 2 ? r->BrokerEpoch : -1;
    gr_info(LOGGER, "[KafkaApi-%d] ControlledShutdown request v%d from broker %d (epoch %lld) via %s", b->broker_id,
            hdr->RequestApiVersion, r->BrokerId, (long long)epoch, req->peer);
    if (!b->controller || !gr_broker_is_controller(b)) {
        respond(req, GR_KERR_NOT_CONTROLLER, NULL, 0);
        return;
    }
    struct gr_ctrl_cs_payload *pl = gr_calloc(1, sizeof *pl);
    pl->respond = respond;
    pl->arg = req; /* apis.h rule 4: the request now belongs to the event */
    gr_ctrl_events_put(gr_controller_events(b->controller), gr_ctrl_cs_event_new(r->BrokerId, epoch, pl));
}

int gr_controlled_shutdown_register_api(void) {
    return gr_apis_register(GR_API_CONTROLLED_SHUTDOWN, 0, 3, handle_controlled_shutdown);
}
