/* ControlledShutdown v0-3 (api key 7) on the broker that may be the controller (Kafka 2.7's
 * KafkaApis.handleControlledShutdownRequest): a broker that is not the active controller answers
 * NOT_CONTROLLER at once; otherwise the request goes through the controller's front door
 * (controller/requests.h) and is answered from the event thread (controlled_shutdown.h), or with
 * NOT_CONTROLLER if the controller moves first. The request never blocks an I/O thread. */
#include <stdlib.h>
#include <string.h>

#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/requests.h"

#define LOGGER "kafka.server.KafkaApis"

/* Runs on whichever thread the front door answers on (controller/requests.h rule 2). The
 * request (arg) is completed here, exactly once. */
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

void gr_handle_controlled_shutdown(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                       void *body) {
    const struct ControlledShutdownRequest *r = body;
    int64_t epoch = hdr->RequestApiVersion >= 2 ? r->BrokerEpoch : -1;
    gr_info(LOGGER, "[KafkaApi-%d] ControlledShutdown request v%d from broker %d (epoch %lld) via %s", b->broker_id,
            hdr->RequestApiVersion, r->BrokerId, (long long)epoch, req->peer);
    if (!gr_api_authorized_cluster(req, GR_ACL_OP_CLUSTER_ACTION)) { /* Kafka: CLUSTER_ACTION */
        respond(req, GR_KERR_CLUSTER_AUTHORIZATION_FAILED, NULL, 0);
        return;
    }
    if (!b->controller || !gr_broker_is_controller(b)) {
        respond(req, GR_KERR_NOT_CONTROLLER, NULL, 0);
        return;
    }
    /* apis.h rule 4: the request now belongs to the front door until respond runs */
    gr_ctrl_submit_controlled_shutdown(b->controller, r->BrokerId, epoch, respond, req);
}
