/* Metadata v0-9 (Kafka 2.7 KafkaApis.handleTopicMetadataRequest + MetadataCache).
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
#include "admin/topic_admin.h"
#include "admin/topic_names.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"

#define LOGGER "kafka.server.KafkaApis"

static bool has_alive_endpoint(const struct gr_mdc *c, int32_t id, const char *listener)
{
    return gr_mdc_broker_endpoint(gr_mdc_broker(c, id), listener) != NULL;
}

static int32_t *filter_alive(struct gr_api_req *req, const struct gr_mdc *c,
                             const int32_t *ids, int n, const char *listener, bool filter,
                             int32_t *out_n)
{
    int32_t *r = gr_api_alloc(req, sizeof(int32_t) * (size_t)(n ? n : 1));
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!filter || has_alive_endpoint(c, ids[i], listener))
            r[k++] = ids[i];
    *out_n = k;
    return r;
}

static void fill_topic(struct gr_api_req *req, const struct gr_mdc *c,
                       const struct gr_mdc_topic *t, int16_t ver,
                       struct MetadataResponse_MetadataResponseTopic *out)
{
    const char *listener = req->listener;
    bool v0 = ver == 0;
    out->ErrorCode = GR_KERR_NONE;
    out->Name = gr_api_strdup(req, t->name);
    out->IsInternal = gr_topic_is_internal(t->name);
    out->TopicAuthorizedOperations = INT32_MIN;
    out->PartitionsCount = t->n_partitions;
    out->Partitions = gr_api_alloc(req, sizeof(*out->Partitions) * (size_t)(t->n_partitions ? t->n_partitions : 1));
    for (int i = 0; i < t->n_partitions; i++) {
        const struct gr_mdc_partition *p = &t->partitions[i];
        struct MetadataResponse_MetadataResponsePartition *o = &out->Partitions[i];
        o->PartitionIndex = p->partition;
        o->LeaderEpoch = p->leader_epoch;
        o->ReplicaNodes = filter_alive(req, c, p->replicas, p->n_replicas, listener, v0,
                                       &o->ReplicaNodesCount);
        o->IsrNodes = filter_alive(req, c, p->isr, p->n_isr, listener, v0, &o->IsrNodesCount);
        o->OfflineReplicas = filter_alive(req, c, p->offline, p->n_offline, listener, false,
                                          &o->OfflineReplicasCount);
        const struct gr_mdc_broker *lb = gr_mdc_broker(c, p->leader);
        if (!gr_mdc_broker_endpoint(lb, listener)) {
            o->LeaderId = -1;
            o->ErrorCode = (lb && ver >= 6) ? GR_KERR_LISTENER_NOT_FOUND
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
    if (out->IsInternal) {
        spec.num_partitions = b->cfg ? b->cfg->offsets_topic_num_partitions : 50;
        spec.replication_factor =
            (int16_t)(b->cfg ? b->cfg->offsets_topic_replication_factor : 3);
        /* Kafka's internal topics are compacted (GroupMetadataManager / TransactionStateManager) */
        static const char *const cn[] = {"cleanup.policy", "compression.type", "segment.bytes"};
        char seg[16];
        snprintf(seg, sizeof seg, "%d", b->cfg ? b->cfg->offsets_topic_segment_bytes : 104857600);
        const char *const cv[] = {"compact", "producer", seg};
        spec.n_configs = 3;
        spec.config_names = cn;
        spec.config_values = cv;
        int16_t e = gr_topic_admin_create_topic(b, &spec, false, true, -1, &res);
        out->ErrorCode = (e == GR_KERR_NONE || e == GR_KERR_TOPIC_ALREADY_EXISTS)
                             ? GR_KERR_LEADER_NOT_AVAILABLE
                             : GR_KERR_COORDINATOR_NOT_AVAILABLE; /* Kafka: too few live brokers */
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

void gr_handle_metadata(struct gr_broker *b, struct gr_api_req *req,
                        const struct gr_req_header *hdr, void *body)
{
    const struct MetadataRequest *rq = body;
    int16_t ver = hdr->RequestApiVersion;
    struct MetadataResponse *resp = gr_api_new_response(req);
    bool all = rq->TopicsCount < 0 || (ver == 0 && rq->TopicsCount == 0);
    bool allow_auto = ver < 4 || rq->AllowAutoTopicCreation;
    struct gr_mdc *c = b->metadata;

    /* Requested names, de-duplicated, that the cache does not know (auto-creation happens
     * outside the cache lock: it writes ZooKeeper). */
    int n_req = all ? 0 : rq->TopicsCount;
    const char **missing = gr_api_alloc(req, sizeof(char *) * (size_t)(n_req ? n_req : 1));
    int n_missing = 0;

    gr_mdc_rdlock(c);
    int n_out_max = all ? gr_mdc_num_topics(c) : n_req;
    resp->Topics = gr_api_alloc(req, sizeof(*resp->Topics) * (size_t)(n_out_max ? n_out_max : 1));
    int n_out = 0;
    if (all) {
        for (int i = 0; i < gr_mdc_num_topics(c); i++) {
            const struct gr_mdc_topic *t = gr_mdc_topic_at(c, i);
            if (gr_api_authorized_quiet(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, t->name))
                fill_topic(req, c, t, ver, &resp->Topics[n_out++]);
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
                fill_topic(req, c, t, ver, &resp->Topics[n_out++]);
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
    if (ver >= 8 && rq->IncludeClusterAuthorizedOperations) /* KIP-430, as KafkaApis */
        resp->ClusterAuthorizedOperations =
            gr_api_authorized_quiet(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_CLUSTER, GR_ACL_CLUSTER_NAME)
                ? gr_api_authorized_operations(req, GR_ACL_RES_CLUSTER, GR_ACL_CLUSTER_NAME)
                : 0;
    if (ver >= 8 && rq->IncludeTopicAuthorizedOperations)
        for (int i = 0; i < n_out; i++)
            if (resp->Topics[i].ErrorCode != GR_KERR_TOPIC_AUTHORIZATION_FAILED)
                resp->Topics[i].TopicAuthorizedOperations =
                    gr_api_authorized_operations(req, GR_ACL_RES_TOPIC, resp->Topics[i].Name);
    resp->ThrottleTimeMs = 0;
    gr_api_respond(req, resp);
}
