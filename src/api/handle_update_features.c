/* UpdateFeatures v0-1 (api key 57, KIP-584) as Kafka 3.9's KafkaApis.handleUpdateFeatures on a
 * ZooKeeper-mode broker: Cluster ALTER, else CLUSTER_AUTHORIZATION_FAILED; a broker that is not
 * the active controller answers NOT_CONTROLLER; otherwise the updates go through the
 * controller's front door (controller/requests.h) and are answered from the event thread
 * (controller/feature_versioning.h). v0's AllowDowngrade is the upgrade type SAFE_DOWNGRADE
 * (else UPGRADE), as Kafka's UpdateFeaturesRequest.getFeature; v1 carries UpgradeType (1
 * upgrade, 2 safe downgrade, 3 unsafe downgrade, anything else INVALID_REQUEST for that
 * feature) and ValidateOnly (Gregor writes nothing then; Kafka 3.9's ZooKeeper controller
 * ignores it, see feature_versioning.h). A Gregor broker, like a Kafka ZooKeeper broker of
 * inter-broker protocol 2.7, supports no feature, so every add or upgrade is refused with
 * INVALID_REQUEST; deleting a finalized feature written by someone else works. The request
 * never blocks an I/O thread. */
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
        if (hdr->RequestApiVersion == 0)
            u[i].upgrade_type = r->FeatureUpdates[i].AllowDowngrade ? GR_CTRL_SAFE_DOWNGRADE : GR_CTRL_UPGRADE;
        else
            u[i].upgrade_type = r->FeatureUpdates[i].UpgradeType >= GR_CTRL_UPGRADE &&
                                        r->FeatureUpdates[i].UpgradeType <= GR_CTRL_UNSAFE_DOWNGRADE
                                    ? (int8_t)r->FeatureUpdates[i].UpgradeType
                                    : GR_CTRL_UPGRADE_UNKNOWN;
    }
    /* apis.h rule 4: the request belongs to the front door until respond runs (the updates
     * are copied at submission). */
    gr_ctrl_submit_update_features(b->controller, u, n, r->ValidateOnly, respond, req);
    free(u);
}
