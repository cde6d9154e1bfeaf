/* Metadata v0-12 (Kafka 3.9 KafkaApis.handleTopicMetadataRequest + ZkMetadataCache).
 *
 *   - topic ids (KIP-516): every answered topic carries its id from the metadata cache (v10+;
 *     ZERO_UUID for unknown, denied and not-yet-created topics). v12 asks by id: when any
 *     requested topic has a non-zero TopicId, only the ids are looked up (names in the same
 *     request are ignored, as Kafka): an unknown id is answered UNKNOWN_TOPIC_ID (null name,
 *     the id), a topic the principal may not describe TOPIC_AUTHORIZATION_FAILED (null name, the
 *     id: ids are not secret), the others in full. Below v12 a null name or a non-zero id is
 *     INVALID_REQUEST for every requested topic (Kafka throws InvalidRequestException, whose
 *     error answer lists each requested topic with the code, no brokers).
 *   - ClusterAuthorizedOperations only at v8-10 (v11 dropped it).
 *
 *   - topics: null (v1+), or an empty list at v0, means all topics in the cache; an empty list
 *     at v1+ means none. Duplicates are answered once.
 *   - brokers: live brokers that have an endpoint for the listener the request came in on.
 *   - per partition: leader (-1 with LEADER_NOT_AVAILABLE when the leader is not live, or, from
 *     v6 on, LISTENER_NOT_FOUND when it lacks this listener), leader epoch (v7+), replicas, ISR,
 *     offline replicas (v5+). At v0 replicas/ISR without a live endpoint are left out and the
 *     partition gets REPLICA_NOT_AVAILABLE.
 *   - unknown topics: auto-created (auto.create.topics.enable, and AllowAutoTopicCreation at
 *     v4+, always below v4) with num.partitions / default.replication.factor and answered
 *     LEADER_NOT_AVAILABLE (or the creation's error, e.g. INVALID_REPLICATION_FACTOR,
 *     INVALID_TOPIC_EXCEPTION); internal topics are created regardless of the flag; otherwise
 *     UNKNOWN_TOPIC_OR_PARTITION.
 * Auto-creation writes ZooKeeper from the I/O thread, like Kafka 2.7.
 * Authorization (api/authorize.h, as KafkaApis): topics need Topic DESCRIBE. All-topics requests
 * silently leave out the others; named ones are answered TOPIC_AUTHORIZATION_FAILED without
 * saying whether they exist. Auto-creation needs Cluster CREATE or Topic CREATE, else
 * TOPIC_AUTHORIZATION_FAILED. */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "broker/broker.h"
#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/metadata_cache.h"
#include "admin/internal_topics.h"
#include "admin/topic_admin.h"
#include "admin/topic_names.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"

#define LOGGER "kafka.server.KafkaApis"

/* The live brokers as one answer sees them, looked up once per answer rather than per
 * partition: ids sorted (as the cache keeps them) and whether each has an endpoint for the
 * request's listener. Arena memory; valid for the request. */
struct live_view {
    int n;
    int32_t *id;
    bool *has_ep;
};

static void live_view_init(struct gr_api_req *req, const struct gr_mdc *c, struct live_view *lv)
{
    int nb = gr_mdc_num_brokers(c);
    lv->n = nb;
    lv->id = gr_api_alloc(req, sizeof(int32_t) * (size_t)(nb ? nb : 1));
    lv->has_ep = gr_api_alloc(req, sizeof(bool) * (size_t)(nb ? nb : 1));
    for (int i = 0; i < nb; i++) {
        const struct gr_mdc_broker *br = gr_mdc_broker_at(c, i);
        lv->id[i] = br->id;
        lv->has_ep[i] = gr_mdc_broker_endpoint(br, req->listener) != NULL;
    }
}

/* 1: live with an endpoint for the listener, 0: live without one, -1: not live. */
static inline int live_state(const struct live_view *lv, int32_t id)
{
    int lo = 0, hi = lv->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (lv->id[mid] == id)
            return lv->has_ep[mid] ? 1 : 0;
        if (lv->id[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* Copies ids[0..n) to out, leaving out (if filter) those without a live endpoint; returns the
 * number copied. */
static inline int32_t copy_ids(const struct live_view *lv, const int32_t *ids, int n, bool filter,
                        int32_t *out)
{
    if (!filter) { /* a loop: the lists are a few ids, shorter than a memcpy call */
        for (int i = 0; i < n; i++)
            out[i] = ids[i];
        return n;
    }
    int32_t k = 0;
    for (int i = 0; i < n; i++)
        if (live_state(lv, ids[i]) == 1)
            out[k++] = ids[i];
    return k;
}

/* One topic's partitions: one arena block for every partition's replicas, ISR and offline
 * replicas (copied: the cache's arrays are valid only under its lock, and the answer is
 * encoded after it is released). */
static void fill_topic(struct gr_api_req *req, const struct live_view *lv,
                       const struct gr_mdc_topic *t, int16_t ver,
                       struct MetadataResponse_MetadataResponseTopic *out)
{
    bool v0 = ver == 0;
    out->ErrorCode = GR_KERR_NONE;
    out->Name = gr_api_strdup(req, t->name);
    memcpy(out->TopicId, t->id.b, 16);
    out->IsInternal = gr_topic_is_internal(t->name);
    out->TopicAuthorizedOperations = INT32_MIN;
    out->PartitionsCount = t->n_partitions;
    out->Partitions = gr_api_alloc(req, sizeof(*out->Partitions) * (size_t)(t->n_partitions ? t->n_partitions : 1));
    size_t n_ids = 0;
    for (int i = 0; i < t->n_partitions; i++)
        n_ids += (size_t)t->partitions[i].n_replicas + (size_t)t->partitions[i].n_isr +
                 (size_t)t->partitions[i].n_offline;
    int32_t *ids = gr_api_alloc(req, sizeof(int32_t) * (n_ids ? n_ids : 1));
    for (int i = 0; i < t->n_partitions; i++) {
        const struct gr_mdc_partition *p = &t->partitions[i];
        struct MetadataResponse_MetadataResponsePartition *o = &out->Partitions[i];
        o->PartitionIndex = p->partition;
        o->LeaderEpoch = p->leader_epoch;
        o->ReplicaNodes = ids;
        o->ReplicaNodesCount = copy_ids(lv, p->replicas, p->n_replicas, v0, ids);
        ids += o->ReplicaNodesCount;
        o->IsrNodes = ids;
        o->IsrNodesCount = copy_ids(lv, p->isr, p->n_isr, v0, ids);
        ids += o->IsrNodesCount;
        o->OfflineReplicas = ids;
        o->OfflineReplicasCount = copy_ids(lv, p->offline, p->n_offline, false, ids);
        ids += o->OfflineReplicasCount;
        int leader = live_state(lv, p->leader);
        if (leader != 1) {
            o->LeaderId = -1;
            o->ErrorCode = (leader == 0 && ver >= 6) ? GR_KERR_LISTENER_NOT_FOUND
                                                     : GR_KERR_LEADER_NOT_AVAILABLE;
        } else {
            o->LeaderId = p->leader;
            if (o->ReplicaNodesCount < p->n_replicas || o->IsrNodesCount < p->n_isr)
                o->ErrorCode = GR_KERR_REPLICA_NOT_AVAILABLE;
            else
                o->ErrorCode = GR_KERR_NONE;
        }
    }
}

/* A topic the principal may not describe (or create): no partitions, not internal. */
static void fill_denied(struct gr_api_req *req, const char *name, struct MetadataResponse_MetadataResponseTopic *out)
{
    out->ErrorCode = GR_KERR_TOPIC_AUTHORIZATION_FAILED;
    out->Name = gr_api_strdup(req, name);
    out->IsInternal = false;
    out->TopicAuthorizedOperations = INT32_MIN;
    out->PartitionsCount = 0;
    out->Partitions = NULL;
}

static void fill_missing(struct gr_broker *b, struct gr_api_req *req, const char *name,
                         bool allow_auto, struct MetadataResponse_MetadataResponseTopic *out)
{
    out->Name = gr_api_strdup(req, name);
    out->IsInternal = gr_topic_is_internal(name);
    out->TopicAuthorizedOperations = INT32_MIN;
    out->PartitionsCount = 0;
    out->Partitions = NULL;
    bool auto_enable = b->cfg ? b->cfg->auto_create_topics_enable : true;
    if ((out->IsInternal || (allow_auto && auto_enable)) &&
        !gr_api_authorized_quiet(req, GR_ACL_OP_CREATE, GR_ACL_RES_CLUSTER, GR_ACL_CLUSTER_NAME) &&
        !gr_api_authorized(req, GR_ACL_OP_CREATE, GR_ACL_RES_TOPIC, name)) {
        fill_denied(req, name, out);
        return;
    }
    struct gr_topic_result res;
    struct gr_topic_spec spec = { .name = name, .num_partitions = -1, .replication_factor = -1 };
    if (out->IsInternal) { /* Kafka 2.7 getTopicMetadata: created whatever allow_auto says */
        int16_t e = gr_internal_topic_create(b, name);
        out->ErrorCode = e == GR_KERR_NONE                        ? GR_KERR_LEADER_NOT_AVAILABLE
                         : e == GR_KERR_COORDINATOR_NOT_AVAILABLE ? GR_KERR_INVALID_REPLICATION_FACTOR
                                                                  : e;
        return;
    }
    if (!(allow_auto && auto_enable)) {
        out->ErrorCode = GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
        return;
    }
    int16_t e = gr_topic_admin_create_topic(b, &spec, false, true, -1, &res);
    if (e == GR_KERR_NONE || e == GR_KERR_TOPIC_ALREADY_EXISTS) {
        gr_info(LOGGER, "Auto creation of topic %s with %d partitions and replication factor %d "
                        "is successful", name, res.num_partitions, res.replication_factor);
        out->ErrorCode = GR_KERR_LEADER_NOT_AVAILABLE;
    } else {
        gr_info(LOGGER, "Auto creation of topic %s failed: %s (%s)", name, gr_kerr_name(e),
                res.message);
        out->ErrorCode = e;
    }
}

static const uint8_t ZERO_ID[16];

/* Kafka's MetadataRequest.getErrorResponse: every requested topic with the error, no brokers. */
static void respond_error(struct gr_api_req *req, const struct MetadataRequest *rq,
                          struct MetadataResponse *resp, int16_t error)
{
    int n = rq->TopicsCount > 0 ? rq->TopicsCount : 0;
    resp->Topics = gr_api_alloc(req, sizeof(*resp->Topics) * (size_t)(n ? n : 1));
    resp->TopicsCount = n;
    for (int i = 0; i < n; i++) {
        struct MetadataResponse_MetadataResponseTopic *o = &resp->Topics[i];
        o->ErrorCode = error;
        o->Name = rq->Topics[i].Name ? gr_api_strdup(req, rq->Topics[i].Name) : gr_api_strdup(req, "");
        memcpy(o->TopicId, rq->Topics[i].TopicId, 16);
        o->TopicAuthorizedOperations = INT32_MIN;
    }
    resp->BrokersCount = 0;
    resp->ControllerId = -1;
    resp->ClusterAuthorizedOperations = INT32_MIN;
    gr_api_respond(req, resp);
}

/* v12, topics by id (see the top). Cache read lock held. */
static int by_id(struct gr_api_req *req, const struct gr_mdc *c, const struct live_view *lv,
                 const struct MetadataRequest *rq, int16_t ver, struct MetadataResponse_MetadataResponseTopic *out)
{
    int n_out = 0;
    for (int i = 0; i < rq->TopicsCount; i++) {
        const uint8_t *id = rq->Topics[i].TopicId;
        if (memcmp(id, ZERO_ID, 16) == 0)
            continue;
        bool dup = false;
        for (int j = 0; j < i && !dup; j++)
            dup = memcmp(rq->Topics[j].TopicId, id, 16) == 0;
        if (dup)
            continue;
        struct gr_uuid u;
        memcpy(u.b, id, 16);
        const struct gr_mdc_topic *t = gr_mdc_topic_by_id(c, &u);
        struct MetadataResponse_MetadataResponseTopic *o = &out[n_out++];
        if (t && gr_api_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, t->name)) {
            fill_topic(req, lv, t, ver, o);
            continue;
        }
        o->ErrorCode = t ? GR_KERR_TOPIC_AUTHORIZATION_FAILED : GR_KERR_UNKNOWN_TOPIC_ID;
        o->Name = NULL;
        memcpy(o->TopicId, id, 16);
        o->TopicAuthorizedOperations = INT32_MIN;
    }
    return n_out;
}

void gr_handle_metadata(struct gr_broker *b, struct gr_api_req *req,
                        const struct gr_req_header *hdr, void *body)
{
    const struct MetadataRequest *rq = body;
    int16_t ver = hdr->RequestApiVersion;
    struct MetadataResponse *resp = gr_api_new_response(req);
    bool all = rq->TopicsCount < 0 || (ver == 0 && rq->TopicsCount == 0);
    bool use_ids = false;
    for (int i = 0; !all && i < rq->TopicsCount; i++) {
        bool has_id = memcmp(rq->Topics[i].TopicId, ZERO_ID, 16) != 0;
        if (ver < 12 && (!rq->Topics[i].Name || has_id)) {
            respond_error(req, rq, resp, GR_KERR_INVALID_REQUEST);
            return;
        }
        use_ids = use_ids || has_id;
    }
    bool allow_auto = ver < 4 || rq->AllowAutoTopicCreation;
    struct gr_mdc *c = b->metadata;

    /* Requested names, de-duplicated, that the cache does not know (auto-creation happens
     * outside the cache lock: it writes ZooKeeper). */
    int n_req = all ? 0 : rq->TopicsCount;
    const char **missing = gr_api_alloc(req, sizeof(char *) * (size_t)(n_req ? n_req : 1));
    int n_missing = 0;

    gr_mdc_rdlock(c);
    struct live_view lv;
    live_view_init(req, c, &lv);
    int n_out_max = all ? gr_mdc_num_topics(c) : n_req;
    resp->Topics = gr_api_alloc(req, sizeof(*resp->Topics) * (size_t)(n_out_max ? n_out_max : 1));
    int n_out = 0;
    if (use_ids) {
        n_out = by_id(req, c, &lv, rq, ver, resp->Topics);
    } else if (all) {
        for (int i = 0; i < gr_mdc_num_topics(c); i++) {
            const struct gr_mdc_topic *t = gr_mdc_topic_at(c, i);
            if (gr_api_authorized_quiet(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, t->name))
                fill_topic(req, &lv, t, ver, &resp->Topics[n_out++]);
        }
    } else {
        for (int i = 0; i < n_req; i++) {
            const char *name = rq->Topics[i].Name;
            if (!name)
                continue;
            bool dup = false;
            for (int j = 0; j < i && !dup; j++)
                dup = rq->Topics[j].Name && strcmp(rq->Topics[j].Name, name) == 0;
            if (dup)
                continue;
            const struct gr_mdc_topic *t = gr_mdc_topic(c, name);
            if (!gr_api_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, name))
                fill_denied(req, name, &resp->Topics[n_out++]);
            else if (t)
                fill_topic(req, &lv, t, ver, &resp->Topics[n_out++]);
            else
                missing[n_missing++] = name;
        }
    }
    int nb = gr_mdc_num_brokers(c);
    resp->Brokers = gr_api_alloc(req, sizeof(*resp->Brokers) * (size_t)(nb ? nb : 1));
    int k = 0;
    for (int i = 0; i < nb; i++) {
        const struct gr_mdc_broker *br = gr_mdc_broker_at(c, i);
        const struct gr_mdc_endpoint *ep = gr_mdc_broker_endpoint(br, req->listener);
        if (!ep)
            continue;
        resp->Brokers[k].NodeId = br->id;
        resp->Brokers[k].Host = gr_api_strdup(req, ep->host);
        resp->Brokers[k].Port = ep->port;
        resp->Brokers[k].Rack = gr_api_strdup(req, br->rack);
        k++;
    }
    resp->BrokersCount = k;
    resp->ControllerId = gr_mdc_controller_id_locked(c);
    gr_mdc_unlock(c);

    for (int i = 0; i < n_missing; i++)
        fill_missing(b, req, missing[i], allow_auto, &resp->Topics[n_out++]);
    resp->TopicsCount = n_out;
    resp->ClusterId = b->cluster_id[0] ? gr_api_strdup(req, b->cluster_id) : NULL;
    resp->ClusterAuthorizedOperations = INT32_MIN;
    if (ver >= 8 && ver <= 10 && rq->IncludeClusterAuthorizedOperations) /* KIP-430, as KafkaApis */
        resp->ClusterAuthorizedOperations =
            gr_api_authorized_quiet(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_CLUSTER, GR_ACL_CLUSTER_NAME)
                ? gr_api_authorized_operations(req, GR_ACL_RES_CLUSTER, GR_ACL_CLUSTER_NAME)
                : 0;
    if (ver >= 8 && rq->IncludeTopicAuthorizedOperations)
        for (int i = 0; i < n_out; i++)
            if (resp->Topics[i].Name && resp->Topics[i].ErrorCode != GR_KERR_TOPIC_AUTHORIZATION_FAILED &&
                resp->Topics[i].ErrorCode != GR_KERR_UNKNOWN_TOPIC_ID)
                resp->Topics[i].TopicAuthorizedOperations =
                    gr_api_authorized_operations(req, GR_ACL_RES_TOPIC, resp->Topics[i].Name);
    resp->ThrottleTimeMs = 0;
    gr_api_respond(req, resp);
}
