/* ElectLeaders v0-2 (key 43): the handler queues a ReplicaLeaderElection controller event
 * (controller/leader_balance.h) whose payload answers the request from the controller's event
 * thread. v0 has no ElectionType (PREFERRED) and no top-level ErrorCode. TopicPartitions null =
 * every partition; then partitions that needed no election (ELECTION_NOT_NEEDED) are left out
 * of the response, as Kafka does. Results are grouped by topic in the order given.
 *
 * Difference from Kafka: the response is sent as soon as the controller has written the new
 * leaders and sent LeaderAndIsr, without Kafka's DelayedElectLeader wait for this broker's
 * metadata cache to show them (TimeoutMs is not used). */
#include <stdlib.h>
#include <string.h>

#include "api/apis.h"
#include "broker/broker.h"
#include "common/kerr.h"
#include "common/util.h"
#include "controller/controller.h"
#include "controller/event_manager.h"
#include "controller/leader_balance.h"

static void respond(void *arg, int16_t top_err, const struct gr_elect_payload *pl)
{
    struct gr_api_req *req = arg;
    struct ElectLeadersResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = top_err;
    /* group by topic, first-seen order */
    int n = pl->n;
    int *topic_of = gr_malloc(sizeof(int) * (size_t)(n ? n : 1));
    int *first = gr_malloc(sizeof(int) * (size_t)(n ? n : 1));
    int nt = 0;
    for (int i = 0; i < n; i++) {
        topic_of[i] = -1;
        if (pl->all && pl->items[i].err == GR_KERR_ELECTION_NOT_NEEDED) continue;
        const char *tn = pl->items[i].topic ? pl->items[i].topic : "";
        int t;
        for (t = 0; t < nt; t++) {
            const char *x = pl->items[first[t]].topic ? pl->items[first[t]].topic : "";
            if (strcmp(x, tn) == 0) break;
        }
        if (t == nt) first[nt++] = i;
        topic_of[i] = t;
    }
    resp->ReplicaElectionResultsCount = nt;
    resp->ReplicaElectionResults = gr_api_alloc(req, sizeof(*resp->ReplicaElectionResults) * (size_t)(nt ? nt : 1));
    for (int t = 0; t < nt; t++) {
        struct ElectLeadersResponse_ReplicaElectionResult *r = &resp->ReplicaElectionResults[t];
        gr_proto_init_struct(&gr_desc_ElectLeadersResponse_ReplicaElectionResult, r);
        r->Topic = gr_api_strdup(req, pl->items[first[t]].topic ? pl->items[first[t]].topic : "");
        int np = 0;
        for (int i = 0; i < n; i++)
            if (topic_of[i] == t) np++;
        r->PartitionResultCount = 0;
        r->PartitionResult = gr_api_alloc(req, sizeof(*r->PartitionResult) * (size_t)(np ? np : 1));
        for (int i = 0; i < n; i++) {
            if (topic_of[i] != t) continue;
            struct ElectLeadersResponse_PartitionResult *pr = &r->PartitionResult[r->PartitionResultCount++];
            gr_proto_init_struct(&gr_desc_ElectLeadersResponse_PartitionResult, pr);
            pr->PartitionId = pl->items[i].partition;
            pr->ErrorCode = pl->items[i].err;
            pr->ErrorMessage = gr_api_strdup(req, pl->items[i].msg);
        }
    }
    free(topic_of);
    free(first);
    gr_api_respond(req, resp);
}

static void handle_elect_leaders(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                 void *body)
{
    struct ElectLeadersRequest *rq = body;
    int8_t type = hdr->RequestApiVersion >= 1 ? rq->ElectionType : GR_ELECTION_PREFERRED;
    int n = 0;
    for (int t = 0; t < rq->TopicPartitionsCount; t++)
        if (rq->TopicPartitions[t].PartitionIdCount > 0) n += rq->TopicPartitions[t].PartitionIdCount;
    struct gr_elect_payload *pl = gr_elect_payload_new(n);
    pl->type = type;
    pl->all = rq->TopicPartitionsCount < 0;
    int k = 0;
    for (int t = 0; t < rq->TopicPartitionsCount; t++)
        for (int i = 0; i < rq->TopicPartitions[t].PartitionIdCount; i++, k++) {
            pl->items[k].topic = gr_strdup(rq->TopicPartitions[t].Topic ? rq->TopicPartitions[t].Topic : "");
            pl->items[k].partition = rq->TopicPartitions[t].PartitionId[i];
            pl->items[k].leader = -1;
        }
    pl->respond = respond;
    pl->arg = req;
    if (!b->controller || (type != GR_ELECTION_PREFERRED && type != GR_ELECTION_UNCLEAN)) {
        /* no controller object (tests) or an unknown election type */
        int16_t err = b->controller ? GR_KERR_INVALID_REQUEST : GR_KERR_NOT_CONTROLLER;
        for (int i = 0; i < pl->n; i++) pl->items[i].err = err;
        pl->responded = true;
        respond(req, pl->all ? err : GR_KERR_NONE, pl);
        gr_elect_payload_free(pl);
        return;
    }
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_REPLICA_LEADER_ELECTION);
    ev->payload = pl;
    ev->payload_free = gr_elect_payload_free;
    ev->preempt = gr_elect_preempt;
    gr_ctrl_events_put(gr_controller_events(b->controller), ev);
}

int gr_elect_leaders_register_api(void)
{
    return gr_apis_register(GR_API_ELECT_LEADERS, 0, 2, handle_elect_leaders);
}
