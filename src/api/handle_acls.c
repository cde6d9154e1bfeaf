/* DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v0-3 (v1 adds the pattern type, v2 is
 * flexible, v3 the User resource type of KIP-373, which Kafka 3.9's broker accepts at every
 * version, as here), as Kafka 3.9's AclApis over the ZooKeeper AclAuthorizer
 * (security/authorizer.h):
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

/* The matching bindings, copied out of the authorizer's cache (its read lock is held while the
 * callback runs, so nothing else is done there). */
struct binding_vec {
    struct gr_acl_binding *v;
    int n, cap;
};

static void collect(void *arg, int filter_index, const struct gr_acl_binding *b, int16_t error) {
    (void)filter_index, (void)error;
    struct binding_vec *bv = arg;
    if (bv->n == bv->cap) {
        bv->cap = bv->cap ? 2 * bv->cap : 16;
        bv->v = gr_realloc(bv->v, sizeof(*bv->v) * (size_t)bv->cap);
    }
    struct gr_acl_binding *c = &bv->v[bv->n++];
    *c = (struct gr_acl_binding){.resource_type = b->resource_type, .pattern_type = b->pattern_type,
                                 .name = gr_strdup(b->name)};
    gr_acl_entry_copy(&c->entry, &b->entry);
}

/* Fills resp->Resources: one entry per resource pattern, in first-seen order. */
static void fill_described(struct gr_api_req *req, struct DescribeAclsResponse *resp, const struct binding_vec *bv) {
    int *res_of = gr_calloc((size_t)bv->n + 1, sizeof *res_of);
    int *count = gr_calloc((size_t)bv->n + 1, sizeof *count);
    int *first = gr_calloc((size_t)bv->n + 1, sizeof *first);
    int nr = 0;
    for (int i = 0; i < bv->n; i++) {
        const struct gr_acl_binding *b = &bv->v[i];
        int r = 0;
        while (r < nr && !(bv->v[first[r]].resource_type == b->resource_type &&
                           bv->v[first[r]].pattern_type == b->pattern_type && strcmp(bv->v[first[r]].name, b->name) == 0))
            r++;
        if (r == nr) first[nr++] = i;
        res_of[i] = r;
        count[r]++;
    }
    resp->ResourcesCount = nr;
    resp->Resources = gr_api_alloc(req, sizeof(*resp->Resources) * (size_t)(nr ? nr : 1));
    for (int r = 0; r < nr; r++) {
        struct DescribeAclsResponse_DescribeAclsResource *x = &resp->Resources[r];
        const struct gr_acl_binding *b = &bv->v[first[r]];
        gr_proto_init_struct(&gr_desc_DescribeAclsResponse_DescribeAclsResource, x);
        x->ResourceType = b->resource_type;
        x->ResourceName = gr_api_strdup(req, b->name);
        x->PatternType = b->pattern_type;
        x->AclsCount = 0;
        x->Acls = gr_api_alloc(req, sizeof(*x->Acls) * (size_t)count[r]);
    }
    for (int i = 0; i < bv->n; i++) {
        struct DescribeAclsResponse_DescribeAclsResource *x = &resp->Resources[res_of[i]];
        struct DescribeAclsResponse_AclDescription *d = &x->Acls[x->AclsCount++];
        d->Principal = gr_api_strdup(req, bv->v[i].entry.principal);
        d->Host = gr_api_strdup(req, bv->v[i].entry.host);
        d->Operation = bv->v[i].entry.op;
        d->PermissionType = bv->v[i].entry.perm;
    }
    free(res_of);
    free(count);
    free(first);
}

static void binding_vec_free(struct binding_vec *bv) {
    for (int i = 0; i < bv->n; i++) gr_acl_binding_release(&bv->v[i]);
    free(bv->v);
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
        struct binding_vec bv = {0};
        gr_authorizer_acls(b->authorizer, &f, collect, &bv);
        fill_described(req, resp, &bv);
        binding_vec_free(&bv);
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

struct deleted {
    struct binding_vec bv; /* the removed bindings (copies) */
    int *filter;           /* per binding: the filter it counted for */
    int16_t *error;        /* per binding */
    int cap;
};

static void deleted_one(void *arg, int fi, const struct gr_acl_binding *b, int16_t error) {
    struct deleted *d = arg;
    collect(&d->bv, fi, b, error);
    if (d->cap < d->bv.cap) {
        d->cap = d->bv.cap;
        d->filter = gr_realloc(d->filter, sizeof(*d->filter) * (size_t)d->cap);
        d->error = gr_realloc(d->error, sizeof(*d->error) * (size_t)d->cap);
    }
    d->filter[d->bv.n - 1] = fi;
    d->error[d->bv.n - 1] = error;
}

/* Fills each filter result's MatchingAcls from d. */
static void fill_deleted(struct gr_api_req *req, struct DeleteAclsResponse *resp, const struct deleted *d) {
    for (int f = 0; f < resp->FilterResultsCount; f++) {
        struct DeleteAclsResponse_DeleteAclsFilterResult *fr = &resp->FilterResults[f];
        int cnt = 0;
        for (int i = 0; i < d->bv.n; i++) cnt += d->filter[i] == f;
        fr->MatchingAclsCount = 0;
        fr->MatchingAcls = gr_api_alloc(req, sizeof(*fr->MatchingAcls) * (size_t)(cnt ? cnt : 1));
        for (int i = 0; i < d->bv.n; i++) {
            if (d->filter[i] != f) continue;
            const struct gr_acl_binding *b = &d->bv.v[i];
            struct DeleteAclsResponse_DeleteAclsMatchingAcl *m = &fr->MatchingAcls[fr->MatchingAclsCount++];
            gr_proto_init_struct(&gr_desc_DeleteAclsResponse_DeleteAclsMatchingAcl, m);
            m->ErrorCode = d->error[i];
            if (d->error[i]) m->ErrorMessage = "Failed to update ACLs in ZooKeeper";
            m->ResourceType = b->resource_type;
            m->ResourceName = gr_api_strdup(req, b->name);
            m->PatternType = b->pattern_type;
            m->Principal = gr_api_strdup(req, b->entry.principal);
            m->Host = gr_api_strdup(req, b->entry.host);
            m->Operation = b->entry.op;
            m->PermissionType = b->entry.perm;
        }
    }
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
        struct deleted d = {0};
        gr_authorizer_delete_acls(b->authorizer, filters, n, deleted_one, &d);
        fill_deleted(req, resp, &d);
        binding_vec_free(&d.bv);
        free(d.filter);
        free(d.error);
    }
    free(filters);
    gr_api_respond(req, resp);
}
