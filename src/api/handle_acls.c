/* DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v0-2 (v1 adds the pattern type, v2 is
 * flexible), as Kafka 2.7's KafkaApis.handle{Describe,Create,Delete}AclsRequest over the
 * AclAuthorizer (security/authorizer.h):
 *  - no authorizer configured -> SECURITY_DISABLED (54);
 *  - Describe needs Cluster DESCRIBE, Create/Delete need Cluster ALTER, else
 *    CLUSTER_AUTHORIZATION_FAILED (31) (per result for Create/Delete);
 *  - malformed bindings or filters (unknown codes, empty name, a cluster not named
 *    kafka-cluster, a bad principal) -> INVALID_REQUEST (42) with a message.
 * v0 carries no pattern type: the codec fills LITERAL, as Kafka's v0 reader does.
 * Create and Delete write to ZooKeeper synchronously on the request thread (as Kafka). */
#include <stdlib.h>
#include <string.h>

#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "common/kerr.h"
#include "common/util.h"
#include "security/authorizer.h"

#define NO_AUTHORIZER "No Authorizer is configured on the broker"

/* ---- DescribeAcls ---- */

struct describe_ctx {
    struct gr_api_req *req;
    struct DescribeAclsResponse *resp;
    int cap;
};

static void describe_one(void *arg, int filter_index, const struct gr_acl_binding *b, int16_t error) {
    (void)filter_index, (void)error;
    struct describe_ctx *c = arg;
    struct DescribeAclsResponse *resp = c->resp;
    struct DescribeAclsResponse_DescribeAclsResource *r = NULL;
    for (int i = 0; i < resp->ResourcesCount && !r; i++) {
        struct DescribeAclsResponse_DescribeAclsResource *x = &resp->Resources[i];
        if (x->ResourceType == b->resource_type && x->PatternType == b->pattern_type && strcmp(x->ResourceName, b->name) == 0)
            r = x;
    }
    if (!r) {
        if (resp->ResourcesCount == c->cap) {
            /* arena memory cannot grow in place: copy into a larger block */
            int ncap = c->cap ? 2 * c->cap : 8;
            void *nr = gr_api_alloc(c->req, sizeof(*resp->Resources) * (size_t)ncap);
            if (resp->ResourcesCount) memcpy(nr, resp->Resources, sizeof(*resp->Resources) * (size_t)resp->ResourcesCount);
            resp->Resources = nr;
            c->cap = ncap;
        }
        r = &resp->Resources[resp->ResourcesCount++];
        gr_proto_init_struct(&gr_desc_DescribeAclsResponse_DescribeAclsResource, r);
        r->ResourceType = b->resource_type;
        r->ResourceName = gr_api_strdup(c->req, b->name);
        r->PatternType = b->pattern_type;
        r->AclsCount = 0;
        r->Acls = NULL;
    }
    /* grow the resource's ACL array by one (copy; counts are small) */
    struct DescribeAclsResponse_AclDescription *na = gr_api_alloc(c->req, sizeof(*na) * (size_t)(r->AclsCount + 1));
    if (r->AclsCount) memcpy(na, r->Acls, sizeof(*na) * (size_t)r->AclsCount);
    struct DescribeAclsResponse_AclDescription *d = &na[r->AclsCount++];
    d->Principal = gr_api_strdup(c->req, b->entry.principal);
    d->Host = gr_api_strdup(c->req, b->entry.host);
    d->Operation = b->entry.op;
    d->PermissionType = b->entry.perm;
    r->Acls = na;
}

GR_API_HANDLER(gr_handle_describe_acls) {
    (void)hdr;
    struct DescribeAclsRequest *rq = body;
    struct DescribeAclsResponse *resp = gr_api_new_response(req);
    resp->ResourcesCount = 0;
    resp->Resources = NULL;
    struct gr_acl_filter f = {.resource_type = rq->ResourceTypeFilter, .pattern_type = rq->PatternTypeFilter,
                              .name = rq->ResourceNameFilter, .principal = rq->PrincipalFilter,
                              .host = rq->HostFilter, .op = rq->Operation, .perm = rq->PermissionType};
    const char *bad = gr_acl_filter_invalid(&f);
    if (!b->authorizer) {
        resp->ErrorCode = GR_KERR_SECURITY_DISABLED;
        resp->ErrorMessage = NO_AUTHORIZER;
    } else if (!gr_api_authorized_cluster(req, GR_ACL_OP_DESCRIBE)) {
        resp->ErrorCode = GR_KERR_CLUSTER_AUTHORIZATION_FAILED;
    } else if (bad) {
        resp->ErrorCode = GR_KERR_INVALID_REQUEST;
        resp->ErrorMessage = (char *)bad;
    } else {
        struct describe_ctx c = {req, resp, 0};
        gr_authorizer_acls(b->authorizer, &f, describe_one, &c);
    }
    gr_api_respond(req, resp);
}

/* ---- CreateAcls ---- */

GR_API_HANDLER(gr_handle_create_acls) {
    (void)hdr;
    struct CreateAclsRequest *rq = body;
    struct CreateAclsResponse *resp = gr_api_new_response(req);
    int n = rq->CreationsCount > 0 ? rq->CreationsCount : 0;
    resp->ResultsCount = n;
    resp->Results = gr_api_alloc(req, sizeof(*resp->Results) * (size_t)(n ? n : 1));
    int16_t *errs = gr_calloc((size_t)n + 1, sizeof *errs);
    struct gr_acl_binding *valid = gr_calloc((size_t)n + 1, sizeof *valid);
    int *where = gr_calloc((size_t)n + 1, sizeof *where);
    int nv = 0;
    bool allowed = b->authorizer && gr_api_authorized_cluster(req, GR_ACL_OP_ALTER);
    for (int i = 0; i < n; i++) {
        const struct CreateAclsRequest_AclCreation *c = &rq->Creations[i];
        struct CreateAclsResponse_AclCreationResult *r = &resp->Results[i];
        gr_proto_init_struct(&gr_desc_CreateAclsResponse_AclCreationResult, r);
        if (!b->authorizer) {
            r->ErrorCode = GR_KERR_SECURITY_DISABLED;
            r->ErrorMessage = NO_AUTHORIZER;
            continue;
        }
        if (!allowed) {
            r->ErrorCode = GR_KERR_CLUSTER_AUTHORIZATION_FAILED;
            continue;
        }
        struct gr_acl_binding bd = {.resource_type = c->ResourceType, .pattern_type = c->ResourcePatternType,
                                    .name = c->ResourceName,
                                    .entry = {.principal = c->Principal, .host = c->Host, .op = c->Operation,
                                              .perm = c->PermissionType}};
        const char *bad = gr_acl_binding_invalid(&bd);
        if (bad) {
            r->ErrorCode = GR_KERR_INVALID_REQUEST;
            r->ErrorMessage = (char *)bad;
            continue;
        }
        valid[nv] = bd; /* borrowed strings from the request arena */
        where[nv++] = i;
    }
    if (nv) gr_authorizer_create_acls(b->authorizer, valid, nv, errs);
    for (int i = 0; i < nv; i++) {
        resp->Results[where[i]].ErrorCode = errs[i];
        if (errs[i]) resp->Results[where[i]].ErrorMessage = "Failed to update ACLs in ZooKeeper";
    }
    free(errs);
    free(valid);
    free(where);
    gr_api_respond(req, resp);
}

/* ---- DeleteAcls ---- */

struct delete_ctx {
    struct gr_api_req *req;
    struct DeleteAclsResponse *resp;
};

static void deleted_one(void *arg, int fi, const struct gr_acl_binding *b, int16_t error) {
    struct delete_ctx *c = arg;
    struct DeleteAclsResponse_DeleteAclsFilterResult *fr = &c->resp->FilterResults[fi];
    struct DeleteAclsResponse_DeleteAclsMatchingAcl *na = gr_api_alloc(c->req, sizeof(*na) * (size_t)(fr->MatchingAclsCount + 1));
    if (fr->MatchingAclsCount) memcpy(na, fr->MatchingAcls, sizeof(*na) * (size_t)fr->MatchingAclsCount);
    struct DeleteAclsResponse_DeleteAclsMatchingAcl *m = &na[fr->MatchingAclsCount++];
    gr_proto_init_struct(&gr_desc_DeleteAclsResponse_DeleteAclsMatchingAcl, m);
    m->ErrorCode = error;
    if (error) m->ErrorMessage = "Failed to update ACLs in ZooKeeper";
    m->ResourceType = b->resource_type;
    m->ResourceName = gr_api_strdup(c->req, b->name);
    m->PatternType = b->pattern_type;
    m->Principal = gr_api_strdup(c->req, b->entry.principal);
    m->Host = gr_api_strdup(c->req, b->entry.host);
    m->Operation = b->entry.op;
    m->PermissionType = b->entry.perm;
    fr->MatchingAcls = na;
}

GR_API_HANDLER(gr_handle_delete_acls) {
    (void)hdr;
    struct DeleteAclsRequest *rq = body;
    struct DeleteAclsResponse *resp = gr_api_new_response(req);
    int n = rq->FiltersCount > 0 ? rq->FiltersCount : 0;
    resp->FilterResultsCount = n;
    resp->FilterResults = gr_api_alloc(req, sizeof(*resp->FilterResults) * (size_t)(n ? n : 1));
    struct gr_acl_filter *filters = gr_calloc((size_t)n + 1, sizeof *filters);
    bool allowed = b->authorizer && gr_api_authorized_cluster(req, GR_ACL_OP_ALTER);
    const char *bad = NULL;
    for (int i = 0; i < n; i++) {
        const struct DeleteAclsRequest_DeleteAclsFilter *f = &rq->Filters[i];
        struct DeleteAclsResponse_DeleteAclsFilterResult *fr = &resp->FilterResults[i];
        gr_proto_init_struct(&gr_desc_DeleteAclsResponse_DeleteAclsFilterResult, fr);
        fr->MatchingAclsCount = 0;
        fr->MatchingAcls = NULL;
        filters[i] = (struct gr_acl_filter){.resource_type = f->ResourceTypeFilter, .pattern_type = f->PatternTypeFilter,
                                            .name = f->ResourceNameFilter, .principal = f->PrincipalFilter,
                                            .host = f->HostFilter, .op = f->Operation, .perm = f->PermissionType};
        if (!bad) bad = gr_acl_filter_invalid(&filters[i]);
        if (!b->authorizer) {
            fr->ErrorCode = GR_KERR_SECURITY_DISABLED;
            fr->ErrorMessage = NO_AUTHORIZER;
        } else if (!allowed) {
            fr->ErrorCode = GR_KERR_CLUSTER_AUTHORIZATION_FAILED;
        }
    }
    /* Kafka rejects the request as a whole when a filter is malformed: every filter gets
     * INVALID_REQUEST and nothing is deleted. */
    if (allowed && bad) {
        for (int i = 0; i < n; i++) {
            resp->FilterResults[i].ErrorCode = GR_KERR_INVALID_REQUEST;
            resp->FilterResults[i].ErrorMessage = (char *)bad;
        }
    } else if (allowed && n) {
        struct delete_ctx c = {req, resp};
        gr_authorizer_delete_acls(b->authorizer, filters, n, deleted_one, &c);
    }
    free(filters);
    gr_api_respond(req, resp);
}
