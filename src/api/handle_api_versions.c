/* ApiVersions v0-4 (KIP-35, KIP-511; v4, KAFKA-17011, only allows a SupportedFeatures MinVersion of
 * 0, and Gregor supports no feature). Advertises exactly the registered APIs. The response
 * header never carries tagged fields (the codec uses response header v0 for this API).
 * v3 requests with an invalid ClientSoftwareName/Version get INVALID_REQUEST, as Kafka 2.7. */
#include <stdbool.h>

#include "api/handlers.h"
#include "broker/broker.h"
#include "broker/finalized_features.h"
#include "common/kerr.h"
#include "net/server.h"

/* Kafka's pattern for the v3 software fields: [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? */
static bool valid_software_field(const char *s)
{
    if (!s || !*s)
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        bool edge = p == s || p[1] == '\0';
        if (!alnum && (edge || (c != '-' && c != '.')))
            return false;
    }
    return true;
}

/* v3's tagged feature fields, as Kafka 2.7: SupportedFeatures is always empty (a Kafka 2.7 broker
 * supports no feature); FinalizedFeatures and their epoch come from the /feature cache. */
static void fill_features(struct gr_broker *b, struct gr_api_req *req, struct ApiVersionsResponse *resp)
{
    resp->SupportedFeaturesCount = 0;
    int64_t epoch;
    int n;
    struct gr_finalized_feature *f;
    gr_finalized_features_get(b ? b->finalized_features : NULL, &req->arena, &epoch, &n, &f);
    resp->FinalizedFeaturesEpoch = epoch;
    resp->FinalizedFeaturesCount = n;
    resp->FinalizedFeatures = gr_api_alloc(req, sizeof(*resp->FinalizedFeatures) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        resp->FinalizedFeatures[i].Name = f[i].name;
        resp->FinalizedFeatures[i].MinVersionLevel = f[i].min_version_level;
        resp->FinalizedFeatures[i].MaxVersionLevel = f[i].max_version_level;
    }
}

void gr_handle_api_versions(struct gr_broker *b, struct gr_api_req *req,
                            const struct gr_req_header *hdr, void *body)
{
    const struct ApiVersionsRequest *rq = body;
    struct ApiVersionsResponse *resp = gr_api_new_response(req);
    if (hdr->RequestApiVersion >= 3 && (!valid_software_field(rq->ClientSoftwareName) ||
                                        !valid_software_field(rq->ClientSoftwareVersion))) {
        resp->ErrorCode = GR_KERR_INVALID_REQUEST;
        gr_api_respond(req, resp);
        return;
    }
    resp->ErrorCode = GR_KERR_NONE;
    /* KIP-511: the connection counts under this client software from now on (Kafka's Processor
     * registers the ClientInformation of a valid ApiVersions; before v3 it stays unknown) */
    if (hdr->RequestApiVersion >= 3 && req->net)
        gr_net_set_client_software(req->net, rq->ClientSoftwareName, rq->ClientSoftwareVersion);
    gr_apis_fill_api_versions(resp, &req->arena);
    if (hdr->RequestApiVersion >= 3)
        fill_features(b, req, resp);
    gr_api_respond(req, resp);
}
