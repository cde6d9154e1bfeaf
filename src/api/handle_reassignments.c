/* AlterPartitionReassignments v0 (key 45) and ListPartitionReassignments v0 (key 46): the
 * handlers submit the request through the controller's front door (controller/requests.h;
 * processed as ApiPartitionReassignment / ListPartitionReassignments, controller/reassignment.h),
 * which answers from the controller's event thread. A broker that is not the active controller
 * still submits (as Kafka does); the controller answers NOT_CONTROLLER, and so does a preempted
 * event.
 *
 * AlterPartitionReassignments: Replicas null cancels the partition's reassignment (revert to
 * the original replicas). Response: one entry per requested partition, grouped by topic in
 * request order; per-partition errors INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS,
 * UNKNOWN_TOPIC_OR_PARTITION; a top-level NOT_CONTROLLER leaves Responses empty.
 * ListPartitionReassignments: Topics null lists every reassigning partition; otherwise only the
 * listed ones that are reassigning.
 * Authorization (api/authorize.h): Alter needs Cluster ALTER, List Cluster DESCRIBE, else a
 * top-level CLUSTER_AUTHORIZATION_FAILED. */
#include <stdlib.h>
#include <string.h>

#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "common/kerr.h"
#include "common/util.h"
#include "controller/requests.h"

/* ---- AlterPartitionReassignments ---- */

static void alter_fail(struct gr_api_req *req, int16_t err)
{
    struct AlterPartitionReassignmentsResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = err;
    resp->ResponsesCount = 0;
    resp->Responses = NULL;
    gr_api_respond(req, resp);
}

/* Whichever thread the front door answers on (requests.h rule 2): builds and sends the
 * response. res holds one result per requested partition, in request order. */
static void alter_respond(void *arg, int16_t top_err, const struct gr_ctrl_tp_result *res, int n)
{
    struct gr_api_req *req = arg;
    const struct AlterPartitionReassignmentsRequest *rq = req->body;
    if (top_err != GR_KERR_NONE) {
        alter_fail(req, top_err);
        return;
    }
    struct AlterPartitionReassignmentsResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = GR_KERR_NONE;
    int nt = rq->TopicsCount > 0 ? rq->TopicsCount : 0;
    resp->ResponsesCount = nt;
    resp->Responses = gr_api_alloc(req, sizeof(*resp->Responses) * (size_t)(nt ? nt : 1));
    int k = 0;
    for (int t = 0; t < nt; t++) {
        const struct AlterPartitionReassignmentsRequest_ReassignableTopic *rt = &rq->Topics[t];
        struct AlterPartitionReassignmentsResponse_ReassignableTopicResponse *ot = &resp->Responses[t];
        gr_proto_init_struct(&gr_desc_AlterPartitionReassignmentsResponse_ReassignableTopicResponse, ot);
        ot->Name = rt->Name ? rt->Name : "";
        int np = rt->PartitionsCount > 0 ? rt->PartitionsCount : 0;
        ot->PartitionsCount = np;
        ot->Partitions = gr_api_alloc(req, sizeof(*ot->Partitions) * (size_t)(np ? np : 1));
        for (int i = 0; i < np; i++, k++) {
            struct AlterPartitionReassignmentsResponse_ReassignablePartitionResponse *op = &ot->Partitions[i];
            gr_proto_init_struct(&gr_desc_AlterPartitionReassignmentsResponse_ReassignablePartitionResponse, op);
            op->PartitionIndex = rt->Partitions[i].PartitionIndex;
            op->ErrorCode = k < n ? res[k].error : GR_KERR_UNKNOWN_SERVER_ERROR;
            op->ErrorMessage = k < n ? gr_api_strdup(req, res[k].message) : NULL;
        }
    }
    gr_api_respond(req, resp);
}

void gr_handle_alter_partition_reassignments(struct gr_broker *b, struct gr_api_req *req,
                                             const struct gr_req_header *hdr, void *body)
{
    (void)hdr;
    struct AlterPartitionReassignmentsRequest *rq = body;
    if (!gr_api_authorized_cluster(req, GR_ACL_OP_ALTER)) {
        alter_fail(req, GR_KERR_CLUSTER_AUTHORIZATION_FAILED);
        return;
    }
    int n = 0;
    for (int t = 0; t < rq->TopicsCount; t++)
        if (rq->Topics[t].PartitionsCount > 0) n += rq->Topics[t].PartitionsCount;
    struct gr_ctrl_reassignment *items = gr_calloc((size_t)(n ? n : 1), sizeof *items);
    int k = 0;
    for (int t = 0; t < rq->TopicsCount; t++) {
        const struct AlterPartitionReassignmentsRequest_ReassignableTopic *rt = &rq->Topics[t];
        for (int i = 0; i < rt->PartitionsCount; i++, k++) {
            const struct AlterPartitionReassignmentsRequest_ReassignablePartition *rp = &rt->Partitions[i];
            items[k].topic = rt->Name;
            items[k].partition = rp->PartitionIndex;
            items[k].replicas = rp->Replicas;
            items[k].n_replicas = rp->ReplicasCount; /* < 0 (null): cancel */
        }
    }
    /* apis.h rule 4: the request now belongs to the front door (which copies items) */
    gr_ctrl_submit_alter_reassignments(b->controller, items, n, alter_respond, req);
    free(items);
}

/* ---- ListPartitionReassignments ---- */

static void list_fail(struct gr_api_req *req, int16_t err)
{
    struct ListPartitionReassignmentsResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = err;
    resp->TopicsCount = 0;
    resp->Topics = NULL;
    gr_api_respond(req, resp);
}

static int32_t *copy_ids(struct gr_api_req *req, const int32_t *v, int n)
{
    int32_t *o = gr_api_alloc(req, sizeof(int32_t) * (size_t)(n ? n : 1));
    if (n) memcpy(o, v, sizeof(int32_t) * (size_t)n);
    return o;
}

static void list_respond(void *arg, int16_t top_err, const struct gr_ctrl_reassignment_listing *out, int n_out)
{
    struct gr_api_req *req = arg;
    if (top_err != GR_KERR_NONE) {
        list_fail(req, top_err);
        return;
    }
    struct ListPartitionReassignmentsResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = GR_KERR_NONE;
    int nt = 0;
    for (int i = 0; i < n_out; i++)
        if (i == 0 || strcmp(out[i].topic, out[i - 1].topic) != 0) nt++;
    resp->TopicsCount = nt;
    resp->Topics = gr_api_alloc(req, sizeof(*resp->Topics) * (size_t)(nt ? nt : 1));
    int t = -1;
    for (int i = 0; i < n_out; i++) {
        const struct gr_ctrl_reassignment_listing *l = &out[i];
        if (i == 0 || strcmp(l->topic, out[i - 1].topic) != 0) {
            t++;
            gr_proto_init_struct(&gr_desc_ListPartitionReassignmentsResponse_OngoingTopicReassignment, &resp->Topics[t]);
            resp->Topics[t].Name = gr_api_strdup(req, l->topic);
            int np = 0;
            for (int j = i; j < n_out && strcmp(out[j].topic, l->topic) == 0; j++) np++;
            resp->Topics[t].PartitionsCount = 0;
            resp->Topics[t].Partitions = gr_api_alloc(req, sizeof(*resp->Topics[t].Partitions) * (size_t)np);
        }
        struct ListPartitionReassignmentsResponse_OngoingTopicReassignment *ot = &resp->Topics[t];
        struct ListPartitionReassignmentsResponse_OngoingPartitionReassignment *op = &ot->Partitions[ot->PartitionsCount++];
        gr_proto_init_struct(&gr_desc_ListPartitionReassignmentsResponse_OngoingPartitionReassignment, op);
        op->PartitionIndex = l->partition;
        op->ReplicasCount = l->n_replicas;
        op->Replicas = copy_ids(req, l->replicas, l->n_replicas);
        op->AddingReplicasCount = l->n_adding;
        op->AddingReplicas = copy_ids(req, l->adding, l->n_adding);
        op->RemovingReplicasCount = l->n_removing;
        op->RemovingReplicas = copy_ids(req, l->removing, l->n_removing);
    }
    gr_api_respond(req, resp);
}

void gr_handle_list_partition_reassignments(struct gr_broker *b, struct gr_api_req *req,
                                            const struct gr_req_header *hdr, void *body)
{
    (void)hdr;
    struct ListPartitionReassignmentsRequest *rq = body;
    if (!gr_api_authorized_cluster(req, GR_ACL_OP_DESCRIBE)) {
        list_fail(req, GR_KERR_CLUSTER_AUTHORIZATION_FAILED);
        return;
    }
    bool all = rq->TopicsCount < 0;
    int n = 0;
    for (int t = 0; t < rq->TopicsCount; t++)
        if (rq->Topics[t].PartitionIndexesCount > 0 && rq->Topics[t].Name) n += rq->Topics[t].PartitionIndexesCount;
    struct gr_kzk_tp *tps = gr_calloc((size_t)(n ? n : 1), sizeof *tps);
    int k = 0;
    for (int t = 0; t < rq->TopicsCount; t++)
        for (int i = 0; i < rq->Topics[t].PartitionIndexesCount && rq->Topics[t].Name; i++, k++) {
            tps[k].topic = (char *)rq->Topics[t].Name;
            tps[k].partition = rq->Topics[t].PartitionIndexes[i];
        }
    /* apis.h rule 4: the request now belongs to the front door (which copies tps) */
    gr_ctrl_submit_list_reassignments(b->controller, tps, all ? -1 : n, list_respond, req);
    free(tps);
}
