/* Group APIs (Kafka 3.9 KafkaApis.handle{FindCoordinator,JoinGroup,SyncGroup,Heartbeat,LeaveGroup,
 * OffsetCommit,OffsetFetch,DescribeGroups,ListGroups,DeleteGroups}Request for classic groups; the
 * versions and what each adds are in docs/GROUPS.md) on top of the group
 * coordinator (group_coordinator.h), and the coordinator's wiring to the broker: its storage
 * is the replica manager's __consumer_offsets partitions.
 *
 * FindCoordinator (key type 0 = group; v4+ a batch of keys, each answered on its own): partition = abs(hash(group)) % partitions of
 * __consumer_offsets; the coordinator is that partition's leader from the metadata cache, with
 * its endpoint for the listener the request came in on. When the topic does not exist yet it is
 * created (offsets.topic.num.partitions partitions, replication factor
 * min(offsets.topic.replication.factor, live brokers) -- Kafka refuses with
 * COORDINATOR_NOT_AVAILABLE until enough brokers are alive; Gregor creates it smaller so small
 * test clusters work, and says so in the log) and COORDINATOR_NOT_AVAILABLE is answered until
 * the partition has a live leader. Key type 1 (transactions): the same over __transaction_state
 * (coordinator/txn_coordinator.h).
 *
 * Authorization (api/authorize.h), as KafkaApis: FindCoordinator Group (or TransactionalId)
 * DESCRIBE; Join/Sync/Heartbeat/LeaveGroup Group READ; OffsetCommit Group READ + Topic READ;
 * OffsetFetch Group DESCRIBE + Topic DESCRIBE (unauthorized topics left out of an all-topics
 * fetch); DescribeGroups Group DESCRIBE; ListGroups Cluster DESCRIBE, else only the groups the
 * principal may describe; DeleteGroups Group DELETE. Denied: GROUP_AUTHORIZATION_FAILED (30),
 * TOPIC_AUTHORIZATION_FAILED (29), TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "coordinator/group_coordinator.h"
#include "coordinator/group_offsets.h"
#include "coordinator/txn_coordinator.h"
#include "coordinator/txn_log.h"
#include "broker/metadata_cache.h"
#include "replication/replica_manager.h"
#include "admin/internal_topics.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"

#define LOGGER "kafka.server.KafkaApis"

static struct gr_group_coordinator *coordinator(struct gr_broker *b) { return b->group_coordinator; }

/* Kafka's clientHost: "/" + the peer's address. */
static char *client_host(struct gr_api_req *req) {
    const char *peer = req->peer ? req->peer : "";
    const char *colon = strrchr(peer, ':');
    size_t n = colon ? (size_t)(colon - peer) : strlen(peer);
    char *s = gr_api_alloc(req, n + 2);
    s[0] = '/';
    memcpy(s + 1, peer, n);
    s[n + 1] = 0;
    return s;
}

/* ---- FindCoordinator ---- */

/* The coordinator of one key (KafkaApis.getCoordinator): an error, or *node/host/port of the
 * leader of the key's partition of the internal topic. host is in req's arena. Key type 2
 * (share groups, KIP-932) is INVALID_REQUEST below v6 and, as a 3.9 ZooKeeper broker answers
 * it, COORDINATOR_NOT_AVAILABLE after the Cluster CLUSTER_ACTION check from v6. */
static int16_t find_coordinator(struct gr_broker *b, struct gr_api_req *req, int8_t key_type, const char *key,
                                bool *create_tried, int32_t *node, char **host, int32_t *port) {
    *node = -1;
    *host = "";
    *port = -1;
    if (!key) key = "";
    if (key_type == 0 && !gr_api_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_GROUP, key))
        return GR_KERR_GROUP_AUTHORIZATION_FAILED;
    if (key_type == 1 && !gr_api_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TRANSACTIONAL_ID, key))
        return GR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    if (key_type == 2 && req->hdr.RequestApiVersion < 6) return GR_KERR_INVALID_REQUEST;
    if (key_type == 2 && !gr_api_authorized(req, GR_ACL_OP_CLUSTER_ACTION, GR_ACL_RES_CLUSTER, GR_ACL_CLUSTER_NAME))
        return GR_KERR_CLUSTER_AUTHORIZATION_FAILED;
    if (key_type == 2) return GR_KERR_COORDINATOR_NOT_AVAILABLE;
    if (key_type != 0 && key_type != 1) return GR_KERR_INVALID_REQUEST;
    struct gr_group_coordinator *gc = coordinator(b);
    if ((key_type == 0 && !gc) || (key_type == 1 && !b->txn_coordinator)) return GR_KERR_COORDINATOR_NOT_AVAILABLE;
    const char *ctopic = key_type == 1 ? GR_TXN_TOPIC : GR_OFFSETS_TOPIC;
    if (!gr_mdc_contains_topic(b->metadata, ctopic)) {
        /* once per request: each attempt is a ZooKeeper round trip, and the cache does not
         * learn the topic before the controller's UpdateMetadata, so a batch of k keys would
         * otherwise try k times */
        if (!*create_tried) gr_internal_topic_create(b, ctopic); /* COORDINATOR_NOT_AVAILABLE whatever it answers */
        *create_tried = true;
        return GR_KERR_COORDINATOR_NOT_AVAILABLE;
    }
    int32_t p = key_type == 0 ? gr_gc_partition_for(gc, key) : gr_txn_partition_of(b->txn_coordinator, key);
    struct gr_mdc_partition part;
    int16_t e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    if (gr_mdc_get_partition(b->metadata, ctopic, p, &part)) {
        char h[256];
        int32_t port_;
        if (part.leader >= 0 && gr_mdc_get_endpoint(b->metadata, part.leader, req->listener, h, sizeof h, &port_)) {
            e = GR_KERR_NONE;
            *node = part.leader;
            *host = gr_api_strdup(req, h);
            *port = port_;
        }
        gr_mdc_partition_release(&part);
    }
    return e;
}

/* v0-3 look up Key; v4+ (KIP-699) look up each of CoordinatorKeys and answer one Coordinator
 * per key, in request order, each with its own ErrorCode (and ErrorMessage, the error's name,
 * when it is not NONE; Kafka 3.9 leaves it "" there, Gregor says which error it was). An
 * unknown key type fails every key with INVALID_REQUEST, as Kafka's getErrorResponse does. */
void gr_handle_find_coordinator(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                void *body) {
    const struct FindCoordinatorRequest *r = body;
    struct FindCoordinatorResponse *resp = gr_api_new_response(req);
    if (hdr->RequestApiVersion < 4) {
        bool tried = false;
        int16_t e = find_coordinator(b, req, r->KeyType, r->Key, &tried, &resp->NodeId, &resp->Host, &resp->Port);
        resp->ErrorCode = e;
        resp->ErrorMessage = (char *)gr_kerr_name(e);
        gr_api_respond(req, resp);
        return;
    }
    int n = GR_MAX(r->CoordinatorKeysCount, 0);
    resp->CoordinatorsCount = n;
    resp->Coordinators = gr_api_alloc(req, (size_t)(n + 1) * sizeof *resp->Coordinators);
    bool tried = false; /* one KeyType per request */
    for (int i = 0; i < n; i++) {
        struct FindCoordinatorResponse_Coordinator *c = &resp->Coordinators[i];
        c->Key = r->CoordinatorKeys[i] ? r->CoordinatorKeys[i] : "";
        c->ErrorCode = find_coordinator(b, req, r->KeyType, c->Key, &tried, &c->NodeId, &c->Host, &c->Port);
        c->ErrorMessage = c->ErrorCode == GR_KERR_NONE ? NULL : (char *)gr_kerr_name(c->ErrorCode);
    }
    gr_api_respond(req, resp);
}

/* ---- JoinGroup ---- */

static void join_done(void *ctx, const struct gr_gc_join_result *r) {
    struct gr_api_req *req = ctx;
    int16_t ver = req->hdr.RequestApiVersion;
    struct JoinGroupResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = r->error;
    resp->GenerationId = r->generation_id;
    resp->ProtocolType = gr_api_strdup(req, r->protocol_type);
    resp->ProtocolName = gr_api_strdup(req, ver >= 7 ? r->protocol_name : (r->protocol_name ? r->protocol_name : ""));
    resp->Leader = gr_api_strdup(req, r->leader_id ? r->leader_id : "");
    resp->MemberId = gr_api_strdup(req, r->member_id ? r->member_id : "");
    resp->SkipAssignment = r->skip_assignment;
    resp->MembersCount = r->n_members;
    resp->Members = gr_api_alloc(req, (size_t)(r->n_members + 1) * sizeof *resp->Members);
    for (int i = 0; i < r->n_members; i++) {
        struct JoinGroupResponse_JoinGroupResponseMember *m = &resp->Members[i];
        m->MemberId = gr_api_strdup(req, r->members[i].member_id);
        m->GroupInstanceId = gr_api_strdup(req, r->members[i].group_instance_id);
        m->Metadata.p = r->members[i].metadata; /* encoded before this callback returns */
        m->Metadata.len = r->members[i].metadata ? r->members[i].metadata_len : 0;
    }
    gr_api_respond(req, resp);
}

void gr_handle_join_group(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                          void *body) {
    const struct JoinGroupRequest *r = body;
    struct gr_gc_protocol *protos = gr_api_alloc(req, (size_t)(GR_MAX(r->ProtocolsCount, 0) + 1) * sizeof *protos);
    int np = 0;
    for (int i = 0; i < r->ProtocolsCount; i++) {
        protos[np].name = r->Protocols[i].Name ? r->Protocols[i].Name : "";
        protos[np].metadata = r->Protocols[i].Metadata.p;
        protos[np].metadata_len = r->Protocols[i].Metadata.len > 0 ? r->Protocols[i].Metadata.len : 0;
        np++;
    }
    struct gr_gc_join_req jr = {
        .group_id = r->GroupId,
        .member_id = r->MemberId ? r->MemberId : "",
        .group_instance_id = r->GroupInstanceId,
        .client_id = hdr->ClientId ? hdr->ClientId : "",
        .client_host = client_host(req),
        .protocol_type = r->ProtocolType ? r->ProtocolType : "",
        .session_timeout_ms = r->SessionTimeoutMs,
        .rebalance_timeout_ms = hdr->RequestApiVersion == 0 ? r->SessionTimeoutMs : r->RebalanceTimeoutMs,
        .require_known_member_id = hdr->RequestApiVersion >= 4 && r->GroupInstanceId == NULL,
        .support_skip_assignment = hdr->RequestApiVersion >= 9,
        .n_protocols = np,
        .protocols = protos,
    };
    if (r->Reason) /* v8+ (KIP-800): the client's reason, logged as Kafka's rebalance reasons are */
        gr_info(LOGGER, "Member %s of group %s joins; client reason: %s", jr.member_id, r->GroupId ? r->GroupId : "",
                r->Reason);
    struct gr_group_coordinator *gc = coordinator(b);
    if (!gr_api_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_GROUP, r->GroupId)) {
        struct gr_gc_join_result er = {.error = GR_KERR_GROUP_AUTHORIZATION_FAILED, .generation_id = -1,
                                       .leader_id = "", .member_id = ""};
        join_done(req, &er);
        return;
    }
    if (!gc) {
        struct gr_gc_join_result er = {.error = GR_KERR_COORDINATOR_NOT_AVAILABLE, .generation_id = -1,
                                       .leader_id = "", .member_id = jr.member_id};
        join_done(req, &er);
        return;
    }
    gr_gc_join_group(gc, &jr, join_done, req);
}

/* ---- SyncGroup ---- */

static void sync_done(void *ctx, const struct gr_gc_sync_result *r) {
    struct gr_api_req *req = ctx;
    struct SyncGroupResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = r->error;
    resp->ProtocolType = gr_api_strdup(req, r->protocol_type);
    resp->ProtocolName = gr_api_strdup(req, r->protocol_name);
    resp->Assignment.p = r->assignment;
    resp->Assignment.len = r->assignment ? r->assignment_len : 0;
    gr_api_respond(req, resp);
}

void gr_handle_sync_group(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                          void *body) {
    (void)hdr;
    const struct SyncGroupRequest *r = body;
    int n = GR_MAX(r->AssignmentsCount, 0);
    struct gr_gc_assignment *as = gr_api_alloc(req, (size_t)(n + 1) * sizeof *as);
    for (int i = 0; i < n; i++) {
        as[i].member_id = r->Assignments[i].MemberId ? r->Assignments[i].MemberId : "";
        as[i].data = r->Assignments[i].Assignment.p;
        as[i].len = r->Assignments[i].Assignment.len > 0 ? r->Assignments[i].Assignment.len : 0;
    }
    struct gr_gc_sync_req sr = {
        .group_id = r->GroupId,
        .member_id = r->MemberId ? r->MemberId : "",
        .group_instance_id = r->GroupInstanceId,
        .protocol_type = r->ProtocolType,
        .protocol_name = r->ProtocolName,
        .generation_id = r->GenerationId,
        .n_assignments = n,
        .assignments = as,
    };
    struct gr_group_coordinator *gc = coordinator(b);
    if (!gr_api_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_GROUP, r->GroupId)) {
        struct gr_gc_sync_result er = {.error = GR_KERR_GROUP_AUTHORIZATION_FAILED};
        sync_done(req, &er);
        return;
    }
    if (!gc) {
        struct gr_gc_sync_result er = {.error = GR_KERR_COORDINATOR_NOT_AVAILABLE};
        sync_done(req, &er);
        return;
    }
    gr_gc_sync_group(gc, &sr, sync_done, req);
}

/* ---- Heartbeat, LeaveGroup ---- */

void gr_handle_heartbeat(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                         void *body) {
    (void)hdr;
    const struct HeartbeatRequest *r = body;
    struct HeartbeatResponse *resp = gr_api_new_response(req);
    struct gr_group_coordinator *gc = coordinator(b);
    resp->ErrorCode = !gr_api_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_GROUP, r->GroupId)
                          ? GR_KERR_GROUP_AUTHORIZATION_FAILED
                      : gc ? gr_gc_heartbeat(gc, r->GroupId, r->MemberId ? r->MemberId : "", r->GroupInstanceId,
                                           r->GenerationId)
                         : GR_KERR_COORDINATOR_NOT_AVAILABLE;
    gr_api_respond(req, resp);
}

void gr_handle_leave_group(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                           void *body) {
    const struct LeaveGroupRequest *r = body;
    bool batch = hdr->RequestApiVersion >= 3;
    int n = batch ? GR_MAX(r->MembersCount, 0) : 1;
    struct gr_gc_leave_member *ms = gr_api_alloc(req, (size_t)(n + 1) * sizeof *ms);
    for (int i = 0; i < n; i++) {
        ms[i].member_id = batch ? r->Members[i].MemberId : r->MemberId;
        ms[i].group_instance_id = batch ? r->Members[i].GroupInstanceId : NULL;
        if (batch && r->Members[i].Reason) /* v5+ (KIP-800) */
            gr_info(LOGGER, "Member %s of group %s leaves; client reason: %s",
                    ms[i].member_id ? ms[i].member_id : "", r->GroupId ? r->GroupId : "", r->Members[i].Reason);
    }
    struct gr_group_coordinator *gc = coordinator(b);
    int16_t top = !gr_api_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_GROUP, r->GroupId) ? GR_KERR_GROUP_AUTHORIZATION_FAILED
                  : gc ? gr_gc_leave_group(gc, r->GroupId, ms, n)
                       : GR_KERR_COORDINATOR_NOT_AVAILABLE;
    struct LeaveGroupResponse *resp = gr_api_new_response(req);
    if (batch) {
        resp->ErrorCode = top;
        resp->MembersCount = top == GR_KERR_NONE ? n : 0;
        resp->Members = gr_api_alloc(req, (size_t)(n + 1) * sizeof *resp->Members);
        for (int i = 0; i < resp->MembersCount; i++) {
            resp->Members[i].MemberId = (char *)(ms[i].member_id ? ms[i].member_id : "");
            resp->Members[i].GroupInstanceId = (char *)ms[i].group_instance_id;
            resp->Members[i].ErrorCode = ms[i].error;
        }
    } else {
        /* v0-2: the top-level error, else the member's */
        resp->ErrorCode = top != GR_KERR_NONE ? top : ms[0].error;
    }
    gr_api_respond(req, resp);
}

/* ---- OffsetCommit ---- */

struct commit_req {
    struct gr_api_req *req;
    const struct OffsetCommitRequest *r;
};

static void commit_done(void *ctx, struct gr_gc_commit_part *parts, int n) {
    struct commit_req *c = ctx;
    struct gr_api_req *req = c->req;
    const struct OffsetCommitRequest *r = c->r;
    struct OffsetCommitResponse *resp = gr_api_new_response(req);
    int nt = GR_MAX(r->TopicsCount, 0);
    resp->TopicsCount = nt;
    resp->Topics = gr_api_alloc(req, (size_t)(nt + 1) * sizeof *resp->Topics);
    int k = 0;
    for (int t = 0; t < nt; t++) {
        const struct OffsetCommitRequest_OffsetCommitRequestTopic *rt = &r->Topics[t];
        struct OffsetCommitResponse_OffsetCommitResponseTopic *ot = &resp->Topics[t];
        int np = GR_MAX(rt->PartitionsCount, 0);
        ot->Name = rt->Name;
        ot->PartitionsCount = np;
        ot->Partitions = gr_api_alloc(req, (size_t)(np + 1) * sizeof *ot->Partitions);
        for (int i = 0; i < np && k < n; i++, k++) {
            ot->Partitions[i].PartitionIndex = parts[k].partition;
            ot->Partitions[i].ErrorCode = parts[k].error;
        }
    }
    gr_api_respond(req, resp);
}

void gr_handle_offset_commit(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                             void *body) {
    const struct OffsetCommitRequest *r = body;
    int n = 0;
    for (int t = 0; t < r->TopicsCount; t++) n += GR_MAX(r->Topics[t].PartitionsCount, 0);
    struct gr_gc_commit_part *parts = gr_api_alloc(req, (size_t)(n + 1) * sizeof *parts);
    int64_t now = gr_wall_ms();
    bool group_ok = gr_api_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_GROUP, r->GroupId);
    int k = 0;
    for (int t = 0; t < r->TopicsCount; t++) {
        const struct OffsetCommitRequest_OffsetCommitRequestTopic *rt = &r->Topics[t];
        const char *topic = rt->Name ? rt->Name : "";
        int nparts = gr_mdc_num_partitions(b->metadata, topic);
        int16_t auth_err = !group_ok ? GR_KERR_GROUP_AUTHORIZATION_FAILED
                           : !gr_api_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, topic)
                               ? GR_KERR_TOPIC_AUTHORIZATION_FAILED
                               : GR_KERR_NONE;
        for (int i = 0; i < rt->PartitionsCount; i++, k++) {
            const struct OffsetCommitRequest_OffsetCommitRequestPartition *rp = &rt->Partitions[i];
            struct gr_gc_commit_part *p = &parts[k];
            p->topic = topic;
            p->partition = rp->PartitionIndex;
            p->offset = rp->CommittedOffset;
            p->leader_epoch = rp->CommittedLeaderEpoch;
            p->metadata = rp->CommittedMetadata ? rp->CommittedMetadata : "";
            p->commit_timestamp = (hdr->RequestApiVersion == 1 && rp->CommitTimestamp != -1) ? rp->CommitTimestamp : now;
            p->expire_timestamp = r->RetentionTimeMs == -1 ? -1 : now + r->RetentionTimeMs;
            p->error = auth_err != GR_KERR_NONE ? auth_err
                       : (rp->PartitionIndex < 0 || rp->PartitionIndex >= nparts) ? GR_KERR_UNKNOWN_TOPIC_OR_PARTITION
                                                                                   : GR_KERR_NONE;
        }
    }
    struct commit_req *c = gr_api_alloc(req, sizeof *c);
    c->req = req;
    c->r = r;
    struct gr_group_coordinator *gc = coordinator(b);
    if (!gc || !group_ok) {
        for (int i = 0; i < n; i++)
            if (parts[i].error == GR_KERR_NONE) parts[i].error = GR_KERR_COORDINATOR_NOT_AVAILABLE;
        commit_done(c, parts, n);
        return;
    }
    gr_gc_commit_offsets(gc, r->GroupId, r->MemberId, r->GroupInstanceId, r->GenerationIdOrMemberEpoch, parts, n, commit_done, c);
}

/* ---- OffsetFetch ---- */

/* One group's offsets (KafkaApis.fetchOffsetsForGroup / fetchAllOffsetsForGroup): *parts holds
 * the n requested partitions (all = false) or receives every committed one (all = true).
 * Group DESCRIBE first; then Topic DESCRIBE: an all-topics fetch leaves unauthorized topics
 * out, a named one answers them TOPIC_AUTHORIZATION_FAILED with offset -1. Returns the group's
 * error (the parts are then meaningless). */
static int16_t fetch_group(struct gr_broker *b, struct gr_api_req *req, const char *group_id, bool all,
                           bool require_stable, struct gr_gc_fetch_part **parts, int *n) {
    struct gr_group_coordinator *gc = coordinator(b);
    int16_t e = !gr_api_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_GROUP, group_id)
                    ? GR_KERR_GROUP_AUTHORIZATION_FAILED
                : gc ? gr_gc_fetch_offsets(gc, group_id, all, require_stable, parts, n, &req->arena)
                     : GR_KERR_COORDINATOR_NOT_AVAILABLE;
    if (e != GR_KERR_NONE || !gr_api_authorizer_enabled(req)) return e;
    struct gr_gc_fetch_part *ps = *parts;
    int m = 0;
    for (int i = 0; i < *n; i++) {
        bool ok = (i > 0 && strcmp(ps[i].topic, ps[i - 1].topic) == 0)
                      ? ps[i - 1].error != GR_KERR_TOPIC_AUTHORIZATION_FAILED
                      : gr_api_authorized_quiet(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, ps[i].topic);
        if (!ok) {
            ps[i].offset = -1;
            ps[i].leader_epoch = -1;
            ps[i].metadata = "";
            ps[i].error = GR_KERR_TOPIC_AUTHORIZATION_FAILED;
        }
        if (ok || !all) ps[m++] = ps[i];
    }
    *n = m;
    return GR_KERR_NONE;
}

/* parts reordered so each topic's partitions are adjacent, topics in first-seen order;
 * returns the number of topics, *starts[t] the index of topic t's first part (and
 * (*starts)[nt] = n). Sorting, not a scan per topic: a request naming many topics must not
 * cost n * topics string comparisons. */
struct by_topic {
    const char *topic;
    int i;
};
static int cmp_by_topic(const void *a, const void *b) {
    const struct by_topic *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}
struct topic_run {
    int first, start, len; /* first-seen part index; run in the sorted array */
};
static int cmp_run(const void *a, const void *b) {
    const struct topic_run *x = a, *y = b;
    return (x->first > y->first) - (x->first < y->first);
}
static int group_by_topic(struct gr_api_req *req, struct gr_gc_fetch_part *parts, int n, int **starts) {
    struct gr_gc_fetch_part *out = gr_api_alloc(req, (size_t)(n + 1) * sizeof *out);
    struct by_topic *s = gr_api_alloc(req, (size_t)(n + 1) * sizeof *s);
    struct topic_run *runs = gr_api_alloc(req, (size_t)(n + 1) * sizeof *runs);
    int *st = gr_api_alloc(req, (size_t)(n + 2) * sizeof *st);
    for (int i = 0; i < n; i++) s[i] = (struct by_topic){parts[i].topic, i};
    if (n > 1) qsort(s, (size_t)n, sizeof *s, cmp_by_topic);
    int nt = 0;
    for (int i = 0; i < n; i++) {
        if (i == 0 || strcmp(s[i].topic, s[i - 1].topic) != 0) runs[nt++] = (struct topic_run){s[i].i, i, 0};
        runs[nt - 1].len++;
    }
    if (nt > 1) qsort(runs, (size_t)nt, sizeof *runs, cmp_run);
    int k = 0;
    for (int t = 0; t < nt; t++) {
        st[t] = k;
        for (int j = 0; j < runs[t].len; j++) out[k++] = parts[s[runs[t].start + j].i];
    }
    st[nt] = k;
    if (n > 0) memcpy(parts, out, (size_t)n * sizeof *parts);
    *starts = st;
    return nt;
}

/* v0-7: one group, GroupId and Topics at the top level. */
static void offset_fetch_v0_7(struct gr_broker *b, struct gr_api_req *req, const struct OffsetFetchRequest *r,
                              int16_t ver) {
    bool all = r->TopicsCount < 0; /* null topics (v2+): every committed offset */
    int n = 0;
    for (int t = 0; t < r->TopicsCount; t++) n += GR_MAX(r->Topics[t].PartitionIndexesCount, 0);
    struct gr_gc_fetch_part *parts = gr_api_alloc(req, (size_t)(n + 1) * sizeof *parts);
    int k = 0;
    for (int t = 0; t < r->TopicsCount; t++)
        for (int i = 0; i < r->Topics[t].PartitionIndexesCount; i++, k++) {
            parts[k].topic = r->Topics[t].Name ? r->Topics[t].Name : "";
            parts[k].partition = r->Topics[t].PartitionIndexes[i];
        }
    int16_t e = fetch_group(b, req, r->GroupId, all, ver >= 7 && r->RequireStable, &parts, &n);
    struct OffsetFetchResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = e;
    if (e != GR_KERR_NONE) {
        if (ver >= 2 || all) {
            resp->TopicsCount = 0;
            resp->Topics = NULL;
            gr_api_respond(req, resp);
            return;
        }
        for (int i = 0; i < n; i++) {
            parts[i].offset = -1;
            parts[i].leader_epoch = -1;
            parts[i].metadata = "";
            parts[i].error = e;
        }
    }
    int *st;
    int nt = group_by_topic(req, parts, n, &st);
    resp->TopicsCount = nt;
    resp->Topics = gr_api_alloc(req, (size_t)(nt + 1) * sizeof *resp->Topics);
    for (int t = 0; t < nt; t++) {
        struct OffsetFetchResponse_OffsetFetchResponseTopic *ot = &resp->Topics[t];
        ot->Name = (char *)parts[st[t]].topic;
        ot->PartitionsCount = st[t + 1] - st[t];
        ot->Partitions = gr_api_alloc(req, (size_t)(ot->PartitionsCount + 1) * sizeof *ot->Partitions);
        for (int j = 0; j < ot->PartitionsCount; j++) {
            const struct gr_gc_fetch_part *p = &parts[st[t] + j];
            struct OffsetFetchResponse_OffsetFetchResponsePartition *op = &ot->Partitions[j];
            op->PartitionIndex = p->partition;
            op->CommittedOffset = p->offset;
            op->CommittedLeaderEpoch = p->leader_epoch;
            op->Metadata = (char *)(p->metadata ? p->metadata : "");
            op->ErrorCode = p->error;
        }
    }
    if (ver < 2) resp->ErrorCode = GR_KERR_NONE;
    gr_api_respond(req, resp);
}

/* v8+ (KIP-709): Groups, each fetched on its own with its own ErrorCode (a failed group has
 * no topics), RequireStable for all of them. v9's MemberId/MemberEpoch belong to KIP-848's
 * consumer groups: the classic coordinator of a 3.9 ZooKeeper broker ignores them, so does
 * Gregor. */
static void offset_fetch_v8(struct gr_broker *b, struct gr_api_req *req, const struct OffsetFetchRequest *r) {
    struct OffsetFetchResponse *resp = gr_api_new_response(req);
    int ng = GR_MAX(r->GroupsCount, 0);
    resp->GroupsCount = ng;
    resp->Groups = gr_api_alloc(req, (size_t)(ng + 1) * sizeof *resp->Groups);
    /* An all-topics fetch answers every committed offset of the group: the same group named
     * all-topics k times would answer its offsets k times, a response (and memory) the size of
     * the request times the group's offsets. Kafka 3.9 answers each repetition; Gregor answers
     * the first and fails the repetitions with INVALID_REQUEST (clients batch a map of groups,
     * so they never repeat one). */
    bool *repeated = gr_api_alloc(req, (size_t)(ng + 1));
    struct by_topic *ids = gr_api_alloc(req, (size_t)(ng + 1) * sizeof *ids);
    int nall = 0;
    for (int g = 0; g < ng; g++)
        if (r->Groups[g].TopicsCount < 0) ids[nall++] = (struct by_topic){r->Groups[g].GroupId ? r->Groups[g].GroupId : "", g};
    if (nall > 1) qsort(ids, (size_t)nall, sizeof *ids, cmp_by_topic);
    for (int i = 1; i < nall; i++)
        if (strcmp(ids[i].topic, ids[i - 1].topic) == 0) repeated[ids[i].i] = true;
    for (int g = 0; g < ng; g++) {
        const struct OffsetFetchRequest_OffsetFetchRequestGroup *rg = &r->Groups[g];
        struct OffsetFetchResponse_OffsetFetchResponseGroup *og = &resp->Groups[g];
        og->GroupId = rg->GroupId ? rg->GroupId : "";
        if (repeated[g]) {
            og->ErrorCode = GR_KERR_INVALID_REQUEST;
            continue;
        }
        bool all = rg->TopicsCount < 0;
        int n = 0;
        for (int t = 0; t < rg->TopicsCount; t++) n += GR_MAX(rg->Topics[t].PartitionIndexesCount, 0);
        struct gr_gc_fetch_part *parts = gr_api_alloc(req, (size_t)(n + 1) * sizeof *parts);
        int k = 0;
        for (int t = 0; t < rg->TopicsCount; t++)
            for (int i = 0; i < rg->Topics[t].PartitionIndexesCount; i++, k++) {
                parts[k].topic = rg->Topics[t].Name ? rg->Topics[t].Name : "";
                parts[k].partition = rg->Topics[t].PartitionIndexes[i];
            }
        og->ErrorCode = fetch_group(b, req, og->GroupId, all, r->RequireStable, &parts, &n);
        if (og->ErrorCode != GR_KERR_NONE) continue;
        int *st;
        int nt = group_by_topic(req, parts, n, &st);
        og->TopicsCount = nt;
        og->Topics = gr_api_alloc(req, (size_t)(nt + 1) * sizeof *og->Topics);
        for (int t = 0; t < nt; t++) {
            struct OffsetFetchResponse_OffsetFetchResponseTopics *ot = &og->Topics[t];
            ot->Name = (char *)parts[st[t]].topic;
            ot->PartitionsCount = st[t + 1] - st[t];
            ot->Partitions = gr_api_alloc(req, (size_t)(ot->PartitionsCount + 1) * sizeof *ot->Partitions);
            for (int j = 0; j < ot->PartitionsCount; j++) {
                const struct gr_gc_fetch_part *p = &parts[st[t] + j];
                struct OffsetFetchResponse_OffsetFetchResponsePartitions *op = &ot->Partitions[j];
                op->PartitionIndex = p->partition;
                op->CommittedOffset = p->offset;
                op->CommittedLeaderEpoch = p->leader_epoch;
                op->Metadata = (char *)(p->metadata ? p->metadata : "");
                op->ErrorCode = p->error;
            }
        }
    }
    gr_api_respond(req, resp);
}

void gr_handle_offset_fetch(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                            void *body) {
    if (hdr->RequestApiVersion >= 8)
        offset_fetch_v8(b, req, body);
    else
        offset_fetch_v0_7(b, req, body, hdr->RequestApiVersion);
}

/* ---- DescribeGroups, ListGroups, DeleteGroups ---- */

void gr_handle_describe_groups(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                               void *body) {
    (void)hdr;
    const struct DescribeGroupsRequest *r = body;
    struct DescribeGroupsResponse *resp = gr_api_new_response(req);
    int n = GR_MAX(r->GroupsCount, 0);
    resp->GroupsCount = n;
    resp->Groups = gr_api_alloc(req, (size_t)(n + 1) * sizeof *resp->Groups);
    struct gr_group_coordinator *gc = coordinator(b);
    for (int i = 0; i < n; i++) {
        struct DescribeGroupsResponse_DescribedGroup *o = &resp->Groups[i];
        struct gr_gc_group_summary s;
        int16_t e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
        memset(&s, 0, sizeof s);
        s.state = s.protocol_type = s.protocol = "";
        if (!gr_api_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_GROUP, r->Groups[i]))
            e = GR_KERR_GROUP_AUTHORIZATION_FAILED;
        else if (gc)
            e = gr_gc_describe_group(gc, r->Groups[i], &req->arena, &s);
        o->ErrorCode = e;
        o->GroupId = r->Groups[i] ? r->Groups[i] : "";
        o->GroupState = (char *)s.state;
        o->ProtocolType = (char *)s.protocol_type;
        o->ProtocolData = (char *)s.protocol;
        o->AuthorizedOperations = e == GR_KERR_NONE && r->IncludeAuthorizedOperations /* KIP-430 */
                                      ? gr_api_authorized_operations(req, GR_ACL_RES_GROUP, o->GroupId)
                                      : INT32_MIN;
        o->MembersCount = s.n_members;
        o->Members = gr_api_alloc(req, (size_t)(s.n_members + 1) * sizeof *o->Members);
        for (int j = 0; j < s.n_members; j++) {
            struct DescribeGroupsResponse_DescribedGroupMember *m = &o->Members[j];
            m->MemberId = (char *)s.members[j].member_id;
            m->GroupInstanceId = (char *)s.members[j].group_instance_id;
            m->ClientId = (char *)s.members[j].client_id;
            m->ClientHost = (char *)s.members[j].client_host;
            m->MemberMetadata.p = s.members[j].metadata;
            m->MemberMetadata.len = s.members[j].metadata_len;
            m->MemberAssignment.p = s.members[j].assignment;
            m->MemberAssignment.len = s.members[j].assignment_len;
        }
    }
    gr_api_respond(req, resp);
}

void gr_handle_list_groups(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                           void *body) {
    (void)hdr;
    const struct ListGroupsRequest *r = body;
    struct ListGroupsResponse *resp = gr_api_new_response(req);
    struct gr_group_coordinator *gc = coordinator(b);
    struct gr_gc_listed_group *gs = NULL;
    int n = 0;
    resp->ErrorCode = gc ? gr_gc_list_groups(gc, (const char *const *)r->StatesFilter, GR_MAX(r->StatesFilterCount, 0),
                                             &req->arena, &gs, &n)
                         : GR_KERR_COORDINATOR_NOT_AVAILABLE;
    /* v5+ TypesFilter (KIP-848): every group of the classic coordinator is "classic", so a
     * filter without that type (matched case-insensitively, as 3.9) lists nothing */
    bool classic = r->TypesFilterCount <= 0;
    for (int i = 0; i < r->TypesFilterCount && !classic; i++)
        classic = r->TypesFilter[i] && strcasecmp(r->TypesFilter[i], "classic") == 0;
    if (!classic) n = 0;
    /* Cluster DESCRIBE lists every group, else only those the principal may describe */
    bool all_groups = gr_api_authorized_quiet(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_CLUSTER, GR_ACL_CLUSTER_NAME);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (all_groups || gr_api_authorized_quiet(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_GROUP, gs[i].group_id)) gs[m++] = gs[i];
    n = m;
    resp->GroupsCount = n;
    resp->Groups = gr_api_alloc(req, (size_t)(n + 1) * sizeof *resp->Groups);
    for (int i = 0; i < n; i++) {
        resp->Groups[i].GroupId = (char *)gs[i].group_id;
        resp->Groups[i].ProtocolType = (char *)gs[i].protocol_type;
        resp->Groups[i].GroupState = (char *)gs[i].state;
        resp->Groups[i].GroupType = "classic";
    }
    gr_api_respond(req, resp);
}

void gr_handle_delete_groups(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                             void *body) {
    (void)hdr;
    const struct DeleteGroupsRequest *r = body;
    int n = GR_MAX(r->GroupsNamesCount, 0);
    int16_t *errors = gr_api_alloc(req, (size_t)(n + 1) * sizeof *errors);
    struct gr_group_coordinator *gc = coordinator(b);
    /* Group DELETE: only the authorized groups go to the coordinator */
    const char **names = gr_api_alloc(req, (size_t)(n + 1) * sizeof *names);
    int16_t *errs = gr_api_alloc(req, (size_t)(n + 1) * sizeof *errs);
    int *where = gr_api_alloc(req, (size_t)(n + 1) * sizeof *where);
    int m = 0;
    for (int i = 0; i < n; i++) {
        errors[i] = GR_KERR_GROUP_AUTHORIZATION_FAILED;
        if (gr_api_authorized(req, GR_ACL_OP_DELETE, GR_ACL_RES_GROUP, r->GroupsNames[i])) {
            names[m] = r->GroupsNames[i];
            where[m++] = i;
        }
    }
    if (gc)
        gr_gc_delete_groups(gc, names, m, errs);
    else
        for (int i = 0; i < m; i++) errs[i] = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    for (int i = 0; i < m; i++) errors[where[i]] = errs[i];
    struct DeleteGroupsResponse *resp = gr_api_new_response(req);
    resp->ResultsCount = n;
    resp->Results = gr_api_alloc(req, (size_t)(n + 1) * sizeof *resp->Results);
    for (int i = 0; i < n; i++) {
        resp->Results[i].GroupId = r->GroupsNames[i] ? r->GroupsNames[i] : "";
        resp->Results[i].ErrorCode = errors[i];
    }
    gr_api_respond(req, resp);
}

/* ---- storage over the replica manager ---- */

struct rm_storage {
    struct gr_broker *b;
    struct gr_replica_manager *rm;
};

static bool rms_leader_info(void *ctx, int32_t p, int32_t *epoch, int32_t *term, int64_t *start, int64_t *end) {
    struct rm_storage *s = ctx;
    struct gr_rm_partition_info info;
    if (!gr_rm_partition_info(s->rm, GR_OFFSETS_TOPIC, p, &info) || !info.is_leader) return false;
    if (epoch) *epoch = info.leader_epoch;
    if (term) *term = info.elected_epoch;
    if (start) *start = info.log_start_offset;
    if (end) *end = info.log_end_offset;
    return true;
}

struct rms_append {
    void (*done)(void *, int16_t, int64_t);
    void *ctx;
};

static void rms_append_done(void *ctx, int16_t error, int64_t base_offset, int64_t log_start_offset) {
    (void)log_start_offset;
    struct rms_append *a = ctx;
    a->done(a->ctx, error, error == GR_KERR_NONE ? base_offset : -1);
    free(a);
}

static void rms_append(void *ctx, int32_t p, uint8_t *batch, size_t len, int16_t acks, int32_t timeout_ms,
                       void (*done)(void *, int16_t, int64_t), void *done_ctx) {
    struct rm_storage *s = ctx;
    struct rms_append *a = gr_malloc(sizeof *a);
    a->done = done;
    a->ctx = done_ctx;
    gr_rm_append(s->rm, GR_OFFSETS_TOPIC, p, batch, len, acks, timeout_ms, rms_append_done, a);
}

static int16_t rms_read(void *ctx, int32_t p, int64_t offset, int32_t max_bytes, struct gr_plog_read_result *res) {
    struct rm_storage *s = ctx;
    return gr_rm_read(s->rm, GR_OFFSETS_TOPIC, p, offset, max_bytes, false, res);
}

static int32_t rms_num_partitions(void *ctx) {
    struct rm_storage *s = ctx;
    return gr_mdc_num_partitions(s->b->metadata, GR_OFFSETS_TOPIC);
}

static void rms_release(void *ctx) { free(ctx); }

int gr_group_coordinator_start(struct gr_broker *b, struct gr_replica_manager *rm) {
    struct rm_storage *st = gr_calloc(1, sizeof *st);
    st->b = b;
    st->rm = rm;
    struct gr_gc_config c;
    gr_gc_config_defaults(&c);
    c.broker_id = b->broker_id;
    if (b->cfg) {
        if (b->cfg->offsets_topic_num_partitions > 0) c.num_partitions = b->cfg->offsets_topic_num_partitions;
        c.initial_rebalance_delay_ms = b->cfg->group_initial_rebalance_delay_ms;
        c.min_session_timeout_ms = b->cfg->group_min_session_timeout_ms;
        c.max_session_timeout_ms = b->cfg->group_max_session_timeout_ms;
        c.group_max_size = b->cfg->group_max_size;
        c.max_metadata_size = b->cfg->offset_metadata_max_bytes;
        c.offset_commit_timeout_ms = b->cfg->offsets_commit_timeout_ms;
        c.offsets_retention_ms = (int64_t)b->cfg->offsets_retention_minutes * 60000;
        c.offsets_retention_check_interval_ms = b->cfg->offsets_retention_check_interval_ms;
    }
    c.storage = (struct gr_gc_storage){.ctx = st, .leader_info = rms_leader_info, .append = rms_append,
                                       .read = rms_read, .num_partitions = rms_num_partitions,
                                       .release = rms_release};
    struct gr_group_coordinator *gc = gr_gc_new(&c); /* releases st on failure */
    if (!gc) return -EAGAIN;
    b->group_coordinator = gc;
    gr_info("kafka.coordinator.group.GroupCoordinator", "[GroupCoordinator %d]: Startup complete.", b->broker_id);
    return 0;
}

void gr_group_coordinator_shutdown(struct gr_group_coordinator *gc) {
    if (gc) gr_gc_shutdown(gc);
}

void gr_group_coordinator_free(struct gr_group_coordinator *gc) { gr_gc_free(gc); }
