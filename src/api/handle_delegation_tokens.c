/* Delegation tokens (api keys 38-41: CreateDelegationToken v0-3, RenewDelegationToken v0-2,
 * ExpireDelegationToken v0-2, DescribeDelegationToken v0-3), answered as Kafka 3.9's KafkaApis
 * answers them on a ZooKeeper-mode broker without delegation.token.master.key (token
 * authentication disabled, which is all Gregor supports):
 *
 *   - Kafka's allowTokenRequests refuses token requests on PLAINTEXT listeners, from 1-way SSL
 *     (ANONYMOUS) and from token-authenticated sessions: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED.
 *     Gregor approximates it by the principal of the checks (gr_api_principal, authorize.h):
 *     User:ANONYMOUS (PLAINTEXT, SSL without a client certificate) is refused; an authenticated
 *     principal (SASL, SSL client certificate) is allowed (Gregor has no token-authenticated
 *     sessions);
 *   - Create v3 (KIP-373) may name an owner other than the caller: the owner is
 *     OwnerPrincipalType:OwnerPrincipalName when the name is non-empty, else the caller. Another
 *     owner needs CREATE_TOKENS on the User resource of the owner ("User:bob"), else
 *     DELEGATION_TOKEN_AUTHORIZATION_FAILED; a named owner without a type is Kafka's
 *     NullPointerException: UNKNOWN_SERVER_ERROR. Then a non-"User" renewer gets
 *     INVALID_PRINCIPAL_TYPE; the rest DELEGATION_TOKEN_AUTH_DISABLED. Every answer carries
 *     Kafka's error values (timestamps -1, empty token id and hmac), the owner, and from v3 the
 *     caller as the token requester;
 *   - Describe v3 adds the requester to each described token: there are none, the error is
 *     DELEGATION_TOKEN_AUTH_DISABLED (or NOT_ALLOWED); Renew and Expire likewise.
 * The only ACL check on these paths is Create's owner check, as in Kafka. */
#include <string.h>

#include "api/apis.h"
#include "api/authorize.h"
#include "api/handlers.h"
#include "common/kerr.h"

static bool allow_token_requests(struct gr_api_req *req) {
    const char *p = gr_api_principal(req);
    return p && strcmp(p, "User:ANONYMOUS") != 0;
}

/* "Type:Name" -> the two halves (in the request's arena). */
static void split_principal(struct gr_api_req *req, char **type, char **name) {
    const char *p = gr_api_principal(req) ? gr_api_principal(req) : "User:ANONYMOUS";
    const char *colon = strchr(p, ':');
    size_t tl = colon ? (size_t)(colon - p) : strlen(p);
    *type = gr_api_alloc(req, tl + 1);
    memcpy(*type, p, tl);
    (*type)[tl] = 0;
    *name = gr_api_strdup(req, colon ? colon + 1 : "");
}

/* "Type:Name" (the User resource's name is the owner's principal string). */
static const char *principal_string(struct gr_api_req *req, const char *type, const char *name) {
    size_t tl = strlen(type), nl = strlen(name);
    char *p = gr_api_alloc(req, tl + nl + 2);
    memcpy(p, type, tl);
    p[tl] = ':';
    memcpy(p + tl + 1, name, nl + 1);
    return p;
}

GR_API_HANDLER(gr_handle_create_delegation_token) {
    (void)b;
    (void)hdr;
    const struct CreateDelegationTokenRequest *rq = body;
    struct CreateDelegationTokenResponse *resp = gr_api_new_response(req);
    split_principal(req, &resp->TokenRequesterPrincipalType, &resp->TokenRequesterPrincipalName);
    resp->PrincipalType = resp->TokenRequesterPrincipalType;
    resp->PrincipalName = resp->TokenRequesterPrincipalName;
    resp->IssueTimestampMs = resp->ExpiryTimestampMs = resp->MaxTimestampMs = -1;
    resp->TokenId = "";
    bool other_owner = rq->OwnerPrincipalName && rq->OwnerPrincipalName[0];
    if (other_owner && !rq->OwnerPrincipalType) {
        resp->ErrorCode = GR_KERR_UNKNOWN_SERVER_ERROR;
        gr_api_respond(req, resp);
        return;
    }
    if (other_owner) {
        resp->PrincipalType = rq->OwnerPrincipalType;
        resp->PrincipalName = rq->OwnerPrincipalName;
        other_owner = strcmp(rq->OwnerPrincipalType, resp->TokenRequesterPrincipalType) != 0 ||
                      strcmp(rq->OwnerPrincipalName, resp->TokenRequesterPrincipalName) != 0;
    }
    resp->ErrorCode = GR_KERR_DELEGATION_TOKEN_AUTH_DISABLED;
    if (!allow_token_requests(req)) {
        resp->ErrorCode = GR_KERR_DELEGATION_TOKEN_REQUEST_NOT_ALLOWED;
    } else if (other_owner && !gr_api_authorized(req, GR_ACL_OP_CREATE_TOKENS, GR_ACL_RES_USER,
                                                 principal_string(req, resp->PrincipalType,
                                                                          resp->PrincipalName))) {
        resp->ErrorCode = GR_KERR_DELEGATION_TOKEN_AUTHORIZATION_FAILED;
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
