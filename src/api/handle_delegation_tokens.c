/* Delegation tokens (api keys 38-41: CreateDelegationToken, RenewDelegationToken,
 * ExpireDelegationToken, DescribeDelegationToken), versions 0-2, answered as Kafka 2.7's KafkaApis
 * answers them on a broker without delegation.token.master.key (token authentication disabled,
 * which is all Gregor supports):
 *
 *   - Kafka's allowTokenRequests refuses token requests on PLAINTEXT listeners, from 1-way SSL
 *     (ANONYMOUS) and from token-authenticated sessions: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED.
 *     Gregor approximates it by the principal: User:ANONYMOUS (PLAINTEXT, SSL without a client
 *     certificate) is refused; an authenticated principal (SASL, SSL client certificate) is
 *     allowed (Gregor has no token-authenticated sessions);
 *   - allowed requests get DELEGATION_TOKEN_AUTH_DISABLED (Create also checks its renewers'
 *     principal type first: INVALID_PRINCIPAL_TYPE for a non-"User" renewer, as Kafka), with
 *     Kafka's error values: timestamps -1, empty token id and hmac, the caller as owner.
 * No ACL check is reached in Kafka on these paths, so none is made here. */
#include <string.h>

#include "api/apis.h"
#include "api/handlers.h"
#include "common/kerr.h"

static bool allow_token_requests(const struct gr_api_req *req) {
    return req->principal && strcmp(req->principal, "User:ANONYMOUS") != 0;
}

/* "Type:Name" -> the two halves (in the request's arena). */
static void split_principal(struct gr_api_req *req, char **type, char **name) {
    const char *p = req->principal ? req->principal : "User:ANONYMOUS";
    const char *colon = strchr(p, ':');
    size_t tl = colon ? (size_t)(colon - p) : strlen(p);
    *type = gr_api_alloc(req, tl + 1);
    memcpy(*type, p, tl);
    (*type)[tl] = 0;
    *name = gr_api_strdup(req, colon ? colon + 1 : "");
}

GR_API_HANDLER(gr_handle_create_delegation_token) {
    (void)b;
    (void)hdr;
    const struct CreateDelegationTokenRequest *rq = body;
    struct CreateDelegationTokenResponse *resp = gr_api_new_response(req);
    split_principal(req, &resp->PrincipalType, &resp->PrincipalName);
    resp->IssueTimestampMs = resp->ExpiryTimestampMs = resp->MaxTimestampMs = -1;
    resp->TokenId = "";
    resp->ErrorCode = GR_KERR_DELEGATION_TOKEN_AUTH_DISABLED;
    if (!allow_token_requests(req)) {
        resp->ErrorCode = GR_KERR_DELEGATION_TOKEN_REQUEST_NOT_ALLOWED;
    } else {
        for (int32_t i = 0; i < rq->RenewersCount; i++)
            if (!rq->Renewers[i].PrincipalType || strcmp(rq->Renewers[i].PrincipalType, "User") != 0)
                resp->ErrorCode = GR_KERR_INVALID_PRINCIPAL_TYPE;
    }
    gr_api_respond(req, resp);
}

GR_API_HANDLER(gr_handle_renew_delegation_token) {
    (void)b;
    (void)hdr;
    (void)body;
    struct RenewDelegationTokenResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = allow_token_requests(req) ? GR_KERR_DELEGATION_TOKEN_AUTH_DISABLED
                                                : GR_KERR_DELEGATION_TOKEN_REQUEST_NOT_ALLOWED;
    resp->ExpiryTimestampMs = -1;
    gr_api_respond(req, resp);
}

GR_API_HANDLER(gr_handle_expire_delegation_token) {
    (void)b;
    (void)hdr;
    (void)body;
    struct ExpireDelegationTokenResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = allow_token_requests(req) ? GR_KERR_DELEGATION_TOKEN_AUTH_DISABLED
                                                : GR_KERR_DELEGATION_TOKEN_REQUEST_NOT_ALLOWED;
    resp->ExpiryTimestampMs = -1;
    gr_api_respond(req, resp);
}

GR_API_HANDLER(gr_handle_describe_delegation_token) {
    (void)b;
    (void)hdr;
    (void)body;
    struct DescribeDelegationTokenResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = allow_token_requests(req) ? GR_KERR_DELEGATION_TOKEN_AUTH_DISABLED
                                                : GR_KERR_DELEGATION_TOKEN_REQUEST_NOT_ALLOWED;
    resp->TokensCount = 0;
    gr_api_respond(req, resp);
}
