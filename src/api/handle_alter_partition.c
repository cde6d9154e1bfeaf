/* AlterPartition v0-v3 (key 56; v0 is Kafka 2.7's AlterIsr, KIP-497; v1 LeaderRecoveryState,
 * KIP-704; v2 topic ids, KIP-516/841; v3 NewIsrWithEpochs, KIP-903) on the broker that may be the
 * controller (Kafka's KafkaApis.handleAlterPartitionRequest): a broker that is not the active
 * controller answers NOT_CONTROLLER at once; otherwise the request and its version go through the
 * controller's front door (controller/requests.h; the rules per version are
 * gr_ctrl_process_alter_partition's, controller/flows.h) and are answered from the controller's
 * event thread, or with NOT_CONTROLLER if the controller moves before it is processed. Never
 * blocks an I/O thread. */
#include "api/authorize.h"
#include "api/handlers.h"

#include "broker/broker.h"
#include "common/kerr.h"
#include "controller/requests.h"

/* Runs on whichever thread the front door answers on (requests.h rule 2). */
static void respond(void *arg, const struct AlterPartitionResponse *resp) { gr_api_respond(arg, resp); }

void gr_handle_alter_partition(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr, void *body)
{
    struct AlterPartitionRequest *r = body;
    bool allowed = gr_api_authorized_cluster(req, GR_ACL_OP_CLUSTER_ACTION); /* Kafka: CLUSTER_ACTION */
    if (!allowed || !b->controller || !gr_broker_is_controller(b)) {
        struct AlterPartitionResponse *resp = gr_api_new_response(req);
        resp->ErrorCode = allowed ? GR_KERR_NOT_CONTROLLER : GR_KERR_CLUSTER_AUTHORIZATION_FAILED;
        resp->TopicsCount = 0;
        resp->Topics = NULL;
        gr_api_respond(req, resp);
        return;
    }
    /* apis.h rule 4: the request (and r, in its arena) now belongs to the front door until
     * respond runs. */
    gr_ctrl_submit_alter_partition(b->controller, hdr->RequestApiVersion, r, respond, req);
}
