/* CreateTopics v0-7 and CreatePartitions v0-3 (Kafka 2.7 KafkaApis + AdminManager; v7 is Kafka
 * 2.8's, answering each created topic's id, KIP-516: the one topic_admin.c wrote into its znode;
 * ZERO_UUID for validate-only and failed topics).
 *
 *   - Only the active controller serves them: any other broker answers NOT_CONTROLLER for every
 *     topic (clients then refresh metadata and retry on the controller).
 *   - A topic named more than once in one request gets INVALID_REQUEST for each entry.
 *   - The topics are validated and written to ZooKeeper together (gr_topic_admin_create_topics:
 *     one read of the existing topics, multis of many topics, per-topic results). Topics that
 *     succeeded are then awaited: the response goes out once all their partitions have leaders in this
 *     broker's metadata cache (NONE) or when TimeoutMs expires (REQUEST_TIMED_OUT for those still
 *     leaderless). TimeoutMs <= 0 answers at once with REQUEST_TIMED_OUT for the topics that were
 *     created (Kafka's semantics); ValidateOnly answers at once with the validation result.
 *   - The wait never blocks an I/O thread: the request is parked in the admin's delayed-operation
 *     list and answered from the thread that sees it complete.
 *   - Authorization (api/authorize.h): CreateTopics needs Cluster CREATE or Topic CREATE,
 *     CreatePartitions Topic ALTER, else TOPIC_AUTHORIZATION_FAILED for that topic.
 *   - The controller mutation quota (KIP-599, broker/controller_mutation_quota.h): a topic that
 *     passed validation takes one token per partition created (CreateTopics: all of them,
 *     CreatePartitions: the ones added) before it is written; strict from CreateTopics v6 and
 *     CreatePartitions v3 (THROTTLING_QUOTA_EXCEEDED for a topic that finds the quota exceeded).
 *     ValidateOnly takes none. ThrottleTimeMs and the channel mute follow the quota. */
#include <stdlib.h>
#include <string.h>

#include "broker/broker.h"
#include "broker/controller_mutation_quota.h"
#include "broker/metadata_cache.h"
#include "api/authorize.h"
#include "api/handlers.h"
#include "admin/topic_admin.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"

#define LOGGER "kafka.server.KafkaApis"

static bool dup_name(char *const *names, int n, int i)
{
    for (int j = 0; j < n; j++)
        if (j != i && names[j] && names[i] && strcmp(names[j], names[i]) == 0)
            return true;
    return false;
}

/* ---------------- awaiting created topics (both APIs) ---------------- */

/* The topics of one request that were written and are awaited before the response goes out
 * (all in the request's arena). */
struct awaited {
    struct gr_api_req *req;
    void *resp;
    void (*time_out)(void *resp, int idx); /* marks response entry idx REQUEST_TIMED_OUT */
    int n;
    int *idx;           /* response index of each awaited topic */
    const char **names; /* its name */
    int32_t *parts;     /* its partition count */
};

/* Room for up to max awaited topics of req, whose response is resp. */
static struct awaited *awaited_new(struct gr_api_req *req, void *resp, int max,
                                   void (*time_out)(void *resp, int idx))
{
    struct awaited *w = gr_api_alloc(req, sizeof(*w));
    size_t m = (size_t)(max ? max : 1);
    w->req = req;
    w->resp = resp;
    w->time_out = time_out;
    w->n = 0;
    w->idx = gr_api_alloc(req, sizeof(int) * m);
    w->names = gr_api_alloc(req, sizeof(char *) * m);
    w->parts = gr_api_alloc(req, sizeof(int32_t) * m);
    return w;
}

static void awaited_add(struct awaited *w, int idx, const char *name, int32_t parts)
{
    w->idx[w->n] = idx;
    w->names[w->n] = name;
    w->parts[w->n] = parts;
    w->n++;
}

static void awaited_done(void *ctx, int n, const bool *ready)
{
    struct awaited *w = ctx;
    for (int i = 0; i < n; i++)
        if (!ready[i]) w->time_out(w->resp, w->idx[i]);
    gr_api_respond(w->req, w->resp);
}

/* Completes the request: at once when nothing is awaited or it only validates, at once with
 * REQUEST_TIMED_OUT for the awaited topics when timeout_ms <= 0, otherwise once they have
 * leaders or time out (the request then belongs to the delayed operation, apis.h rule 2). */
static void awaited_finish(struct gr_broker *b, struct awaited *w, bool validate_only, int32_t timeout_ms)
{
    if (w->n == 0 || validate_only) {
        gr_api_respond(w->req, w->resp);
        return;
    }
    if (timeout_ms <= 0) {
        for (int i = 0; i < w->n; i++)
            w->time_out(w->resp, w->idx[i]);
        gr_api_respond(w->req, w->resp);
        return;
    }
    gr_topic_admin_wait(b->admin, w->n, w->names, w->parts, timeout_ms, awaited_done, w);
}

/* ---------------- CreateTopics ---------------- */

static void ct_time_out(void *resp, int idx)
{
    struct CreateTopicsResponse_CreatableTopicResult *r = &((struct CreateTopicsResponse *)resp)->Topics[idx];
    r->ErrorCode = GR_KERR_REQUEST_TIMED_OUT;
    r->ErrorMessage = NULL;
}

void gr_handle_create_topics(struct gr_broker *b, struct gr_api_req *req,
                             const struct gr_req_header *hdr, void *body)
{
    const struct CreateTopicsRequest *rq = body;
    int16_t ver = hdr->RequestApiVersion;
    struct CreateTopicsResponse *resp = gr_api_new_response(req);
    int n = rq->TopicsCount > 0 ? rq->TopicsCount : 0;
    resp->TopicsCount = n;
    resp->Topics = gr_api_alloc(req, sizeof(*resp->Topics) * (size_t)(n ? n : 1));
    char **names = gr_api_alloc(req, sizeof(char *) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++)
        names[i] = rq->Topics[i].Name;
    bool controller = gr_broker_is_controller(b);
    struct awaited *w = awaited_new(req, resp, n, ct_time_out);
    /* Kafka: Cluster CREATE, else Topic CREATE per topic (api/authorize.h) */
    bool cluster_create = gr_api_authorized_quiet(req, GR_ACL_OP_CREATE, GR_ACL_RES_CLUSTER, GR_ACL_CLUSTER_NAME);

    /* Pass 1: the handler's own checks; the topics that pass become specs (arena). */
    struct gr_topic_spec *specs = gr_api_alloc(req, sizeof(*specs) * (size_t)(n ? n : 1));
    int *spec_of = gr_api_alloc(req, sizeof(int) * (size_t)(n ? n : 1)); /* spec -> topic */
    int ns = 0;
    for (int i = 0; i < n; i++) {
        const struct CreateTopicsRequest_CreatableTopic *t = &rq->Topics[i];
        struct CreateTopicsResponse_CreatableTopicResult *r = &resp->Topics[i];
        r->Name = t->Name;
        r->NumPartitions = -1;
        r->ReplicationFactor = -1;
        r->ConfigsCount = -1;
        r->Configs = NULL;
        if (!controller) {
            r->ErrorCode = GR_KERR_NOT_CONTROLLER;
            r->ErrorMessage = gr_api_strdup(req, "This is not the correct controller for this cluster.");
            continue;
        }
        /* Kafka: the created topic's configs only with Topic DESCRIBE_CONFIGS (else
         * TopicConfigErrorCode TOPIC_AUTHORIZATION_FAILED and no configs, partitions or RF) */
        if (!gr_api_authorized_quiet(req, GR_ACL_OP_DESCRIBE_CONFIGS, GR_ACL_RES_TOPIC, t->Name))
            r->TopicConfigErrorCode = GR_KERR_TOPIC_AUTHORIZATION_FAILED;
        if (dup_name(names, n, i)) {
            r->ErrorCode = GR_KERR_INVALID_REQUEST;
            r->ErrorMessage = gr_api_strdup(req, "Found multiple entries for this topic.");
            continue;
        }
        if (!cluster_create && !gr_api_authorized(req, GR_ACL_OP_CREATE, GR_ACL_RES_TOPIC, t->Name)) {
            r->ErrorCode = GR_KERR_TOPIC_AUTHORIZATION_FAILED;
            r->ErrorMessage = gr_api_strdup(req, "Authorization failed.");
            continue;
        }
        /* Flatten the explicit assignment into the spec's arrays (arena). */
        int na = t->AssignmentsCount > 0 ? t->AssignmentsCount : 0;
        int32_t *pids = gr_api_alloc(req, sizeof(int32_t) * (size_t)(na ? na : 1));
        const int32_t **reps = gr_api_alloc(req, sizeof(int32_t *) * (size_t)(na ? na : 1));
        int *nreps = gr_api_alloc(req, sizeof(int) * (size_t)(na ? na : 1));
        for (int k = 0; k < na; k++) {
            pids[k] = t->Assignments[k].PartitionIndex;
            reps[k] = t->Assignments[k].BrokerIds;
            nreps[k] = t->Assignments[k].BrokerIdsCount > 0 ? t->Assignments[k].BrokerIdsCount : 0;
        }
        int nc = t->ConfigsCount > 0 ? t->ConfigsCount : 0;
        const char **ck = gr_api_alloc(req, sizeof(char *) * (size_t)(nc ? nc : 1));
        const char **cv = gr_api_alloc(req, sizeof(char *) * (size_t)(nc ? nc : 1));
        for (int k = 0; k < nc; k++) {
            ck[k] = t->Configs[k].Name ? t->Configs[k].Name : "";
            cv[k] = t->Configs[k].Value;
        }
        specs[ns] = (struct gr_topic_spec){
            .name = t->Name,
            .num_partitions = t->NumPartitions,
            .replication_factor = t->ReplicationFactor,
            .n_assignments = na,
            .partition_ids = pids,
            .replicas = reps,
            .n_replicas = nreps,
            .n_configs = nc,
            .config_names = ck,
            .config_values = cv,
        };
        spec_of[ns++] = i;
    }
    /* With a mutation quota: validate first, take the tokens of each valid topic in order (Kafka's
     * AdminManager records right before each write), leave out the ones refused. */
    struct gr_topic_result *res = gr_api_alloc(req, sizeof(*res) * (size_t)(ns ? ns : 1));
    struct gr_cmq_req cq;
    gr_cmq_begin(b, req, 6, &cq);
    if (ns > 0 && cq.sensor && !rq->ValidateOnly) {
        gr_topic_admin_create_topics(b, specs, ns, true, false, -1, res);
        int kept = 0;
        for (int s = 0; s < ns; s++) {
            if (res[s].error == GR_KERR_NONE && gr_cmq_record(&cq, res[s].num_partitions) != GR_KERR_NONE) {
                struct CreateTopicsResponse_CreatableTopicResult *r = &resp->Topics[spec_of[s]];
                r->ErrorCode = GR_KERR_THROTTLING_QUOTA_EXCEEDED;
                r->ErrorMessage = gr_api_strdup(req, GR_CMQ_MESSAGE);
                continue;
            }
            specs[kept] = specs[s];
            spec_of[kept++] = spec_of[s];
        }
        ns = kept;
    }
    resp->ThrottleTimeMs = gr_cmq_finish(req, &cq);
    /* Pass 2: validate and write them all at once (one ZooKeeper read, multis of many topics). */
    if (ns > 0)
        gr_topic_admin_create_topics(b, specs, ns, rq->ValidateOnly, false, -1, res);
    for (int s = 0; s < ns; s++) {
        int i = spec_of[s];
        const struct CreateTopicsRequest_CreatableTopic *t = &rq->Topics[i];
        struct CreateTopicsResponse_CreatableTopicResult *r = &resp->Topics[i];
        int16_t e = res[s].error;
        r->ErrorCode = e;
        r->ErrorMessage = (e != GR_KERR_NONE && res[s].message[0]) ? gr_api_strdup(req, res[s].message)
                                                                   : NULL;
        if (e != GR_KERR_NONE) {
            r->TopicConfigErrorCode = GR_KERR_NONE; /* Kafka resets it with the configs */
            gr_info(LOGGER, "Error processing create topic request for %s: %s (%s)",
                    t->Name ? t->Name : "null", gr_kerr_name(e), res[s].message);
            continue;
        }
        memcpy(r->TopicId, res[s].topic_id.b, 16); /* v7; zero for validate only (as Kafka) */
        if (ver >= 5 && r->TopicConfigErrorCode == GR_KERR_NONE) {
            r->NumPartitions = res[s].num_partitions;
            r->ReplicationFactor = res[s].replication_factor;
            gr_configs_fill_created_topic(b, req, specs[s].n_configs, specs[s].config_names,
                                          specs[s].config_values, r);
        }
        if (!rq->ValidateOnly)
            awaited_add(w, i, t->Name, res[s].num_partitions);
    }
    awaited_finish(b, w, rq->ValidateOnly, rq->TimeoutMs);
}

/* ---------------- CreatePartitions ---------------- */

static void cp_time_out(void *resp, int idx)
{
    struct CreatePartitionsResponse_CreatePartitionsTopicResult *r =
        &((struct CreatePartitionsResponse *)resp)->Results[idx];
    r->ErrorCode = GR_KERR_REQUEST_TIMED_OUT;
    r->ErrorMessage = NULL;
}

void gr_handle_create_partitions(struct gr_broker *b, struct gr_api_req *req,
                                 const struct gr_req_header *hdr, void *body)
{
    (void)hdr;
    const struct CreatePartitionsRequest *rq = body;
    struct CreatePartitionsResponse *resp = gr_api_new_response(req);
    int n = rq->TopicsCount > 0 ? rq->TopicsCount : 0;
    resp->ResultsCount = n;
    resp->Results = gr_api_alloc(req, sizeof(*resp->Results) * (size_t)(n ? n : 1));
    char **names = gr_api_alloc(req, sizeof(char *) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++)
        names[i] = rq->Topics[i].Name;
    bool controller = gr_broker_is_controller(b);
    struct awaited *w = awaited_new(req, resp, n, cp_time_out);
    struct gr_cmq_req cq;
    gr_cmq_begin(b, req, 3, &cq); /* KIP-599: strict from v3 */

    for (int i = 0; i < n; i++) {
        const struct CreatePartitionsRequest_CreatePartitionsTopic *t = &rq->Topics[i];
        struct CreatePartitionsResponse_CreatePartitionsTopicResult *r = &resp->Results[i];
        r->Name = t->Name;
        r->ErrorMessage = NULL;
        if (!controller) {
            r->ErrorCode = GR_KERR_NOT_CONTROLLER;
            r->ErrorMessage = gr_api_strdup(req, "This is not the correct controller for this cluster.");
            continue;
        }
        if (dup_name(names, n, i)) {
            r->ErrorCode = GR_KERR_INVALID_REQUEST;
            r->ErrorMessage = gr_api_strdup(req, "Duplicate topic in request.");
            continue;
        }
        if (!t->Name) {
            r->ErrorCode = GR_KERR_INVALID_REQUEST;
            continue;
        }
        if (!gr_api_authorized(req, GR_ACL_OP_ALTER, GR_ACL_RES_TOPIC, t->Name)) {
            r->ErrorCode = GR_KERR_TOPIC_AUTHORIZATION_FAILED;
            continue;
        }
        int na = t->AssignmentsCount;
        const int32_t **reps = NULL;
        int *nreps = NULL;
        if (na >= 0) {
            reps = gr_api_alloc(req, sizeof(int32_t *) * (size_t)(na ? na : 1));
            nreps = gr_api_alloc(req, sizeof(int) * (size_t)(na ? na : 1));
            for (int k = 0; k < na; k++) {
                reps[k] = t->Assignments[k].BrokerIds;
                nreps[k] = t->Assignments[k].BrokerIdsCount > 0 ? t->Assignments[k].BrokerIdsCount
                                                                : 0;
            }
        }
        struct gr_topic_result res;
        int16_t e = GR_KERR_NONE;
        if (cq.sensor && !rq->ValidateOnly) { /* tokens for the partitions added, once valid */
            int32_t before = gr_mdc_num_partitions(b->metadata, t->Name);
            e = gr_topic_admin_create_partitions(b, t->Name, t->Count, na, reps, nreps, true, &res);
            if (e == GR_KERR_NONE && gr_cmq_record(&cq, t->Count - before) != GR_KERR_NONE) {
                r->ErrorCode = GR_KERR_THROTTLING_QUOTA_EXCEEDED;
                r->ErrorMessage = gr_api_strdup(req, GR_CMQ_MESSAGE);
                continue;
            }
        }
        if (e == GR_KERR_NONE)
            e = gr_topic_admin_create_partitions(b, t->Name, t->Count, na, reps, nreps, rq->ValidateOnly, &res);
        r->ErrorCode = e;
        if (e != GR_KERR_NONE) {
            r->ErrorMessage = res.message[0] ? gr_api_strdup(req, res.message) : NULL;
            continue;
        }
        if (!rq->ValidateOnly)
            awaited_add(w, i, t->Name, t->Count);
    }
    resp->ThrottleTimeMs = gr_cmq_finish(req, &cq);
    awaited_finish(b, w, rq->ValidateOnly, rq->TimeoutMs);
}
