/* ElectLeaders v0-2 (key 43): the handler submits the election through the controller's front
 * door (controller/requests.h; processed as ReplicaLeaderElection, controller/leader_balance.h),
 * which answers from the controller's event thread. v0 has no ElectionType (PREFERRED) and no
 * top-level ErrorCode. TopicPartitions null = every partition; then partitions that needed no
 * election (ELECTION_NOT_NEEDED) are left out of the response, as Kafka does.
 * Results are grouped by topic in the order given.
 *
 * Difference from Kafka: the response is sent as soon as the controller has written the new
 * leaders and sent LeaderAndIsr, without Kafka's DelayedElectLeader wait for this broker's
 * metadata cache to show them (TimeoutMs is not used).
 * Authorization (api/authorize.h): Cluster ALTER, else CLUSTER_AUTHORIZATION_FAILED at the top
 * and for every requested partition. */
#include <stdlib.h>
#include <string.h>

#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "common/kerr.h"
#include "common/util.h"
#include "controller/requests.h"

/* What respond needs besides the request: was every partition asked for? */
struct elect_call {
    struct gr_api_req *req;
    bool all;
};

/* Runs on whichever thread the front door answers on (requests.h rule 2). */
static void respond(void *arg, int16_t top_err, const struct gr_ctrl_tp_result *res, int n)
{
    struct elect_call *call = arg;
    struct gr_api_req *req = call->req;
    bool all = call->all;
    free(call);
    struct ElectLeadersResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = top_err;
    /* group by topic, first-seen order: the results of one topic usually come together, so the
     * previous result's topic is tried before the list (100k results over 1,000 topics) */
    int *topic_of = gr_malloc(sizeof(int) * (size_t)(n ? n : 1));
    int *first = gr_malloc(sizeof(int) * (size_t)(n ? n : 1));
    int *count = gr_calloc((size_t)(n ? n : 1), sizeof(int));
    int nt = 0, last = -1;
    for (int i = 0; i < n; i++) {
        topic_of[i] = -1;
        if (all && res[i].error == GR_KERR_ELECTION_NOT_NEEDED) continue;
        int t = last;
        if (t < 0 || strcmp(res[first[t]].topic, res[i].topic) != 0)
            for (t = 0; t < nt; t++)
                if (strcmp(res[first[t]].topic, res[i].topic) == 0) break;
        if (t == nt) first[nt++] = i;
        topic_of[i] = last = t;
        count[t]++;
    }
    resp->ReplicaElectionResultsCount = nt;
    resp->ReplicaElectionResults = gr_api_alloc(req, sizeof(*resp->ReplicaElectionResults) * (size_t)(nt ? nt : 1));
    for (int t = 0; t < nt; t++) {
        struct ElectLeadersResponse_ReplicaElectionResult *r = &resp->ReplicaElectionResults[t];
        gr_proto_init_struct(&gr_desc_ElectLeadersResponse_ReplicaElectionResult, r);
        r->Topic = gr_api_strdup(req, res[first[t]].topic);
        r->PartitionResultCount = 0;
        r->PartitionResult = gr_api_alloc(req, sizeof(*r->PartitionResult) * (size_t)(count[t] ? count[t] : 1));
    }
    for (int i = 0; i < n; i++) {
        if (topic_of[i] < 0) continue;
        struct ElectLeadersResponse_ReplicaElectionResult *r = &resp->ReplicaElectionResults[topic_of[i]];
        struct ElectLeadersResponse_PartitionResult *pr = &r->PartitionResult[r->PartitionResultCount++];
        gr_proto_init_struct(&gr_desc_ElectLeadersResponse_PartitionResult, pr);
        pr->PartitionId = res[i].partition;
        pr->ErrorCode = res[i].error;
        pr->ErrorMessage = gr_api_strdup(req, res[i].message);
    }
    free(count);
    free(topic_of);
    free(first);
    gr_api_respond(req, resp);
}

void gr_handle_elect_leaders(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr, void *body)
{
    struct ElectLeadersRequest *rq = body;
    int8_t type = hdr->RequestApiVersion >= 1 ? rq->ElectionType : GR_ELECTION_PREFERRED;
    bool all = rq->TopicPartitionsCount < 0;
    int n = 0;
    for (int t = 0; t < rq->TopicPartitionsCount; t++)
        if (rq->TopicPartitions[t].PartitionsCount > 0) n += rq->TopicPartitions[t].PartitionsCount;
    struct gr_kzk_tp *tps = gr_calloc((size_t)(n ? n : 1), sizeof *tps);
    int k = 0;
    for (int t = 0; t < rq->TopicPartitionsCount; t++)
        for (int i = 0; i < rq->TopicPartitions[t].PartitionsCount; i++, k++) {
            tps[k].topic = (char *)(rq->TopicPartitions[t].Topic ? rq->TopicPartitions[t].Topic : "");
            tps[k].partition = rq->TopicPartitions[t].Partitions[i];
        }
    struct elect_call *call = gr_malloc(sizeof *call);
    call->req = req; /* apis.h rule 4: the request now belongs to the front door */
    call->all = all;
    if (!gr_api_authorized_cluster(req, GR_ACL_OP_ALTER)) {
        struct gr_ctrl_tp_result *res = gr_calloc((size_t)(n ? n : 1), sizeof *res);
        for (int i = 0; i < n; i++)
            res[i] = (struct gr_ctrl_tp_result){.topic = tps[i].topic, .partition = tps[i].partition,
                                                .error = GR_KERR_CLUSTER_AUTHORIZATION_FAILED, .leader = -1};
        respond(call, GR_KERR_CLUSTER_AUTHORIZATION_FAILED, res, n);
        free(res);
        free(tps);
        return;
    }
    gr_ctrl_submit_elect_leaders(b->controller, type, tps, all ? -1 : n, respond, call); /* copies tps */
    free(tps);
}
