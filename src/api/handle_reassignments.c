/* AlterPartitionReassignments v0 (key 45) and ListPartitionReassignments v0 (key 46): the
 * handlers turn the request into an ApiPartitionReassignment / ListPartitionReassignments
 * controller event (controller/reassignment.h) whose payload answers the request from the
 * controller's event thread. A broker that is not the active controller still queues the event
 * (as Kafka does); the controller answers NOT_CONTROLLER, and so does a preempted event.
 *
 * AlterPartitionReassignments: Replicas null cancels the partition's reassignment (revert to
 * the original replicas). Response: one entry per requested partition, grouped by topic in
 * request order; per-partition errors INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS,
 * UNKNOWN_TOPIC_OR_PARTITION; a top-level NOT_CONTROLLER leaves Responses empty.
 * ListPartitionReassignments: Topics null lists every reassigning partition; otherwise only the
 * listed ones that are reassigning. */
#include <stdlib.h>
#include <string.h>

#include "api/apis.h"
#include "broker/broker.h"
#include "common/kerr.h"
#include "common/util.h"
#include "controller/controller.h"
#include "controller/event_manager.h"
#include "controller/reassignment.h"

/* ---- AlterPartitionReassignments ---- */

static void alter_fail(struct gr_api_req *req, int16_t err)
{
    struct AlterPartitionReassignmentsResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = err;
    resp->ResponsesCount = 0;
    resp->Responses = NULL;
    gr_api_respond(req, resp);
}

/* Event thread (or whoever frees the event): builds and sends the response. */
static void alter_respond(void *arg, int16_t top_err, const struct gr_reassign_api_payload *pl)
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
            op->ErrorCode = k < pl->n ? pl->items[k].err : GR_KERR_UNKNOWN_SERVER_ERROR;
            op->ErrorMessage = k < pl->n ? gr_api_strdup(req, pl->items[k].msg) : NULL;
        }
    }
    gr_api_respond(req, resp);
}

static void handle_alter(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr, void *body)
{
    (void)hdr;
    struct AlterPartitionReassignmentsRequest *rq = body;
    if (!b->controller) {
        alter_fail(req, GR_KERR_NOT_CONTROLLER);
        return;
    }
    int n = 0;
    for (int t = 0; t < rq->TopicsCount; t++)
        if (rq->Topics[t].PartitionsCount > 0) n += rq->Topics[t].PartitionsCount;
    struct gr_reassign_api_payload *pl = gr_reassign_api_payload_new(n);
    int k = 0;
    for (int t = 0; t < rq->TopicsCount; t++) {
        const struct AlterPartitionReassignmentsRequest_ReassignableTopic *rt = &rq->Topics[t];
        for (int i = 0; i < rt->PartitionsCount; i++, k++) {
            const struct AlterPartitionReassignmentsRequest_ReassignablePartition *rp = &rt->Partitions[i];
            struct gr_reassign_item *it = &pl->items[k];
            it->topic = rt->Name ? gr_strdup(rt->Name) : NULL;
            it->partition = rp->PartitionIndex;
            it->cancel = rp->ReplicasCount < 0;
            it->n_replicas = rp->ReplicasCount > 0 ? rp->ReplicasCount : 0;
            it->replicas = gr_malloc(sizeof(int32_t) * (size_t)(it->n_replicas ? it->n_replicas : 1));
            if (it->n_replicas) memcpy(it->replicas, rp->Replicas, sizeof(int32_t) * (size_t)it->n_replicas);
        }
    }
    pl->respond = alter_respond;
    pl->arg = req; /* apis.h rule 4: the request now belongs to the event */
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_API_PARTITION_REASSIGNMENT);
    ev->payload = pl;
    ev->payload_free = gr_reassign_api_payload_free;
    ev->preempt = gr_reassign_api_preempt;
    gr_ctrl_events_put(gr_controller_events(b->controller), ev);
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

static void list_respond(void *arg, int16_t top_err, const struct gr_reassign_list_payload *pl)
{
    struct gr_api_req *req = arg;
    if (top_err != GR_KERR_NONE) {
        list_fail(req, top_err);
        return;
    }
    struct ListPartitionReassignmentsResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = GR_KERR_NONE;
    int nt = 0;
    for (int i = 0; i < pl->n_out; i++)
        if (i == 0 || strcmp(pl->out[i].topic, pl->out[i - 1].topic) != 0) nt++;
    resp->TopicsCount = nt;
    resp->Topics = gr_api_alloc(req, sizeof(*resp->Topics) * (size_t)(nt ? nt : 1));
    int t = -1;
    for (int i = 0; i < pl->n_out; i++) {
        const struct gr_reassign_listing *l = &pl->out[i];
        if (i == 0 || strcmp(l->topic, pl->out[i - 1].topic) != 0) {
            t++;
            gr_proto_init_struct(&gr_desc_ListPartitionReassignmentsResponse_OngoingTopicReassignment, &resp->Topics[t]);
            resp->Topics[t].Name = gr_api_strdup(req, l->topic);
            int np = 0;
            for (int j = i; j < pl->n_out && strcmp(pl->out[j].topic, l->topic) == 0; j++) np++;
            resp->Topics[t].PartitionsCount = 0;
            resp->Topics[t].Partitions = gr_api_alloc(req, sizeof(*resp->Topics[t].Partitions) * (size_t)np);
        }
        struct ListPartitionReassignmentsResponse_OngoingTopicReassignment *ot = &resp->Topics[t];
        struct ListPartitionReassignmentsResponse_OngoingPartitionReassignment *op = &ot->Partitions[ot->PartitionsCount++];
        gr_proto_init_struct(&gr_desc_ListPartitionReassignmentsResponse_OngoingPartitionReassignment, op);
        op->PartitionIndex = l->partition;
        op->ReplicasCount = l->a.n_replicas;
        op->Replicas = copy_ids(req, l->a.replicas, l->a.n_replicas);
        op->AddingReplicasCount = l->a.n_adding;
        op->AddingReplicas = copy_ids(req, l->a.adding, l->a.n_adding);
        op->RemovingReplicasCount = l->a.n_removing;
        op->RemovingReplicas = copy_ids(req, l->a.removing, l->a.n_removing);
    }
    gr_api_respond(req, resp);
}

static void handle_list(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr, void *body)
{
    (void)hdr;
    struct ListPartitionReassignmentsRequest *rq = body;
    if (!b->controller) {
        list_fail(req, GR_KERR_NOT_CONTROLLER);
        return;
    }
    struct gr_reassign_list_payload *pl = gr_reassign_list_payload_new();
    pl->all = rq->TopicsCount < 0;
    if (!pl->all) {
        int n = 0;
        for (int t = 0; t < rq->TopicsCount; t++)
            if (rq->Topics[t].PartitionIndexesCount > 0) n += rq->Topics[t].PartitionIndexesCount;
        pl->req = gr_calloc((size_t)(n ? n : 1), sizeof *pl->req);
        for (int t = 0; t < rq->TopicsCount; t++)
            for (int i = 0; i < rq->Topics[t].PartitionIndexesCount && rq->Topics[t].Name; i++) {
                pl->req[pl->n_req].topic = gr_strdup(rq->Topics[t].Name);
                pl->req[pl->n_req].partition = rq->Topics[t].PartitionIndexes[i];
                pl->n_req++;
            }
    }
    pl->respond = list_respond;
    pl->arg = req;
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_LIST_PARTITION_REASSIGNMENTS);
    ev->payload = pl;
    ev->payload_free = gr_reassign_list_payload_free;
    ev->preempt = gr_reassign_list_preempt;
    gr_ctrl_events_put(gr_controller_events(b->controller), ev);
}

int gr_reassign_register_apis(void)
{
    int rc = gr_apis_register(GR_API_ALTER_PARTITION_REASSIGNMENTS, 0, 0, handle_alter);
    if (rc == 0) rc = gr_apis_register(GR_API_LIST_PARTITION_REASSIGNMENTS, 0, 0, handle_list);
    return rc;
}
