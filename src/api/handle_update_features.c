/* UpdateFeatures v0 (api key 57, KIP-584) as Kafka 2.7's KafkaApis.handleUpdateFeatures: a broker
 * that is not the active controller answers NOT_CONTROLLER; otherwise the updates go through the
 * controller's front door (controller/requests.h) and are answered from the event thread
 * (controller/feature_versioning.h). A Gregor broker, like a Kafka 2.7 one, supports no feature,
 * so every add or upgrade is refused with INVALID_REQUEST; deleting a finalized feature written by
 * someone else works. The request never blocks an I/O thread. */
#include <stdlib.h>

#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "common/kerr.h"
#include "common/util.h"
#include "controller/requests.h"

/* Runs on whichever thread the front door answers on; completes the request exactly once. */
static void respond(void *arg, int16_t top, const struct gr_ctrl_feature_result *r, int n) {
    struct gr_api_req *req = arg;
    const struct UpdateFeaturesRequest *rq = req->body;
    struct UpdateFeaturesResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = top;
    resp->ErrorMessage = NULL;
    resp->ResultsCount = n;
    resp->Results = gr_api_alloc(req, sizeof(*resp->Results) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        resp->Results[i].Feature = gr_api_strdup(req, rq->FeatureUpdates[i].Feature ? rq->FeatureUpdates[i].Feature : "");
        resp->Results[i].ErrorCode = r[i].error;
        resp->Results[i].ErrorMessage = r[i].error ? gr_api_strdup(req, r[i].message) : NULL;
    }
    gr_api_respond(req, resp);
}

void gr_handle_update_features(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                               void *body) {
    (void)hdr;
    const struct UpdateFeaturesRequest *r = body;
    if (!gr_api_authorized_cluster(req, GR_ACL_OP_ALTER)) {
        respond(req, GR_KERR_CLUSTER_AUTHORIZATION_FAILED, NULL, 0);
        return;
    }
    if (!b->controller || !gr_broker_is_controller(b)) {
        respond(req, GR_KERR_NOT_CONTROLLER, NULL, 0);
        return;
    }
    int n = r->FeatureUpdatesCount > 0 ? r->FeatureUpdatesCount : 0;
    struct gr_ctrl_feature_update *u = gr_calloc((size_t)n + 1, sizeof *u);
    for (int i = 0; i < n; i++) {
        u[i].feature = r->FeatureUpdates[i].Feature;
        u[i].max_version_level = r->FeatureUpdates[i].MaxVersionLevel;
        u[i].allow_downgrade = r->FeatureUpdates[i].AllowDowngrade;
    }
    /* apis.h rule 4: the request belongs to the front door until respond runs (the updates
     * are copied at submission). */
    gr_ctrl_submit_update_features(b->controller, u, n, respond, req);
    free(u);
}
