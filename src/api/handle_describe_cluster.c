/* DescribeCluster (api key 60, KIP-700; v1 adds EndpointType, KIP-919), as Kafka 3.9's
 * KafkaApis.handleDescribeCluster on a ZooKeeper-mode broker (AuthHelper.computeDescribeClusterResponse):
 *  - the endpoint type must be BROKER (1): a ZooKeeper broker has no controller endpoints, so
 *    CONTROLLER (2) gets MISMATCHED_ENDPOINT_TYPE and any other code UNSUPPORTED_ENDPOINT_TYPE
 *    (v0 cannot carry the field; its answer would be INVALID_REQUEST for both);
 *  - brokers: the live brokers of the metadata cache that have an endpoint for the listener the
 *    request came in on (as Metadata's broker list); the controller id, -1 when the controller is
 *    not among them;
 *  - IncludeClusterAuthorizedOperations: the KIP-430 bit field when Cluster DESCRIBE is allowed,
 *    else 0; not asked: INT32_MIN (the schema's default).
 * Reads the metadata cache under its read lock; nothing blocks. */
#include <stdint.h>
#include <stdio.h>

#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "common/kerr.h"

#define ENDPOINT_BROKER 1
#define ENDPOINT_CONTROLLER 2

static char *unsupported_message(struct gr_api_req *req, int type) {
    char *m = gr_api_alloc(req, 48);
    snprintf(m, 48, "Unsupported endpoint type %d", type);
    return m;
}

GR_API_HANDLER(gr_handle_describe_cluster) {
    const struct DescribeClusterRequest *rq = body;
    int16_t ver = hdr->RequestApiVersion;
    struct DescribeClusterResponse *resp = gr_api_new_response(req);
    if (rq->EndpointType != ENDPOINT_BROKER) {
        bool known = rq->EndpointType == ENDPOINT_CONTROLLER;
        resp->ErrorCode = ver == 0 ? GR_KERR_INVALID_REQUEST
                          : known  ? GR_KERR_MISMATCHED_ENDPOINT_TYPE
                                   : GR_KERR_UNSUPPORTED_ENDPOINT_TYPE;
        resp->ErrorMessage = known ? gr_api_strdup(req, "The request was sent to an endpoint of type BROKER, "
                                                        "but we wanted an endpoint of type CONTROLLER")
                                   : unsupported_message(req, rq->EndpointType);
        gr_api_respond(req, resp);
        return;
    }
    resp->ClusterAuthorizedOperations = INT32_MIN;
    if (rq->IncludeClusterAuthorizedOperations)
        resp->ClusterAuthorizedOperations =
            gr_api_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_CLUSTER, GR_ACL_CLUSTER_NAME)
                ? gr_api_authorized_operations(req, GR_ACL_RES_CLUSTER, GR_ACL_CLUSTER_NAME)
                : 0;
    struct gr_mdc *c = b->metadata;
    gr_mdc_rdlock(c);
    int nb = gr_mdc_num_brokers(c);
    resp->Brokers = gr_api_alloc(req, sizeof(*resp->Brokers) * (size_t)(nb ? nb : 1));
    int k = 0;
    int32_t controller = gr_mdc_controller_id_locked(c);
    bool controller_listed = false;
    for (int i = 0; i < nb; i++) {
        const struct gr_mdc_broker *br = gr_mdc_broker_at(c, i);
        const struct gr_mdc_endpoint *ep = gr_mdc_broker_endpoint(br, req->listener);
        if (!ep)
            continue;
        resp->Brokers[k].BrokerId = br->id;
        resp->Brokers[k].Host = gr_api_strdup(req, ep->host);
        resp->Brokers[k].Port = ep->port;
        resp->Brokers[k].Rack = br->rack ? gr_api_strdup(req, br->rack) : NULL;
        controller_listed |= br->id == controller;
        k++;
    }
    gr_mdc_unlock(c);
    resp->BrokersCount = k;
    resp->ControllerId = controller_listed ? controller : -1;
    resp->ClusterId = gr_api_strdup(req, b->cluster_id);
    resp->EndpointType = ENDPOINT_BROKER;
    gr_api_respond(req, resp);
}
