/* Control requests from the controller: UpdateMetadata v0-8, LeaderAndIsr v0-7, StopReplica
 * v0-4 (the versions of a Kafka 3.9 ZooKeeper broker; isKRaftController and the Type field
 * belong to KRaft migration, which Gregor has none of: they are read and ignored), with Kafka's
 * fencing (KafkaApis + ReplicaManager):
 *
 *   broker epoch   request BrokerEpoch != -1 and < ours -> STALE_BROKER_EPOCH
 *                  (UpdateMetadata, StopReplica: top-level code only; LeaderAndIsr: top-level
 *                  and every partition)
 *   controller     request ControllerEpoch < highest seen ->
 *     epoch          UpdateMetadata: NOT_CONTROLLER (ControllerMovedException);
 *                    LeaderAndIsr: STALE_CONTROLLER_EPOCH top-level and every partition;
 *                    StopReplica: STALE_CONTROLLER_EPOCH top-level, no partitions.
 *                  Otherwise the highest seen becomes the request's.
 *   leader epoch   LeaderAndIsr: a partition is applied only if the request's LeaderEpoch is
 *                  greater than the hosted one (new partitions start at -1); equal or lower ->
 *                  STALE_CONTROLLER_EPOCH for that partition; this broker not in Replicas ->
 *                  UNKNOWN_TOPIC_OR_PARTITION.
 *                  StopReplica v3: LeaderEpoch -2 (deletion) or -1 (none) bypass the check;
 *                  greater than the hosted one -> stop; otherwise FENCED_LEADER_EPOCH.
 *                  Partitions not hosted are stopped (NONE) so leftover logs get deleted.
 *   authorization  all three need Cluster CLUSTER_ACTION (api/authorize.h), checked first:
 *                  CLUSTER_AUTHORIZATION_FAILED top-level (LeaderAndIsr: and every partition).
 * All three run under the partition registry's state-change lock (Kafka's
 * replicaStateChangeLock), one at a time. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker.h"
#include "api/authorize.h"
#include "api/handlers.h"
#include "replication/log_dir_failure.h"
#include "broker/metadata_cache.h"
#include "replication/partitions.h"
#include "admin/topic_admin.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "common/uuid.h"

#define LOGGER "state.change.logger"

static bool broker_epoch_stale(struct gr_broker *b, int64_t req_epoch)
{
    if (req_epoch == -1)
        return false;
    return req_epoch < gr_broker_epoch(b);
}

/* ---------------- UpdateMetadata ---------------- */

void gr_handle_update_metadata(struct gr_broker *b, struct gr_api_req *req,
                               const struct gr_req_header *hdr, void *body)
{
    const struct UpdateMetadataRequest *rq = body;
    struct UpdateMetadataResponse *resp = gr_api_new_response(req);
    if (!gr_api_authorized_cluster(req, GR_ACL_OP_CLUSTER_ACTION)) {
        resp->ErrorCode = GR_KERR_CLUSTER_AUTHORIZATION_FAILED;
        gr_api_respond(req, resp);
        return;
    }
    if (broker_epoch_stale(b, rq->BrokerEpoch)) {
        gr_info(LOGGER, "[Broker id=%d] Received update metadata request with broker epoch %lld "
                        "smaller than the current broker epoch %lld", b->broker_id,
                (long long)rq->BrokerEpoch, (long long)gr_broker_epoch(b));
        resp->ErrorCode = GR_KERR_STALE_BROKER_EPOCH;
        gr_api_respond(req, resp);
        return;
    }
    gr_partitions_lock(b->partitions);
    int32_t known = gr_partitions_controller_epoch_locked(b->partitions);
    if (rq->ControllerEpoch < known) {
        gr_partitions_unlock(b->partitions);
        gr_warn(LOGGER, "[Broker id=%d] Received update metadata request with correlation id %d "
                        "from an old controller %d with epoch %d. Latest known controller epoch "
                        "is %d", b->broker_id, hdr->CorrelationId, rq->ControllerId,
                rq->ControllerEpoch, known);
        resp->ErrorCode = GR_KERR_NOT_CONTROLLER;
        gr_api_respond(req, resp);
        return;
    }
    /* The cache's update hook (set by gr_broker_new) re-checks delayed topic operations. */
    gr_mdc_update(b->metadata, hdr->RequestApiVersion, rq, NULL);
    gr_partitions_set_controller_epoch_locked(b->partitions, rq->ControllerEpoch);
    gr_partitions_unlock(b->partitions);
    resp->ErrorCode = GR_KERR_NONE;
    gr_api_respond(req, resp);
}

/* ---------------- LeaderAndIsr ---------------- */

struct lai_item {
    const char *topic;
    const uint8_t *topic_id; /* 16 bytes; zero below v5 */
    const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *ps;
};

static const uint8_t NO_TOPIC_ID[16];

static int collect_lai(struct gr_api_req *req, int16_t ver, const struct LeaderAndIsrRequest *rq,
                       struct lai_item **out)
{
    int n = 0;
    if (ver <= 1) {
        n = rq->UngroupedPartitionStatesCount > 0 ? rq->UngroupedPartitionStatesCount : 0;
    } else {
        for (int32_t i = 0; i < rq->TopicStatesCount; i++)
            if (rq->TopicStates[i].PartitionStatesCount > 0)
                n += rq->TopicStates[i].PartitionStatesCount;
    }
    struct lai_item *v = gr_api_alloc(req, sizeof(*v) * (size_t)(n ? n : 1));
    int k = 0;
    if (ver <= 1) {
        for (int i = 0; i < n; i++) {
            v[k].topic = rq->UngroupedPartitionStates[i].TopicName;
            v[k].topic_id = NO_TOPIC_ID;
            v[k++].ps = &rq->UngroupedPartitionStates[i];
        }
    } else {
        for (int32_t i = 0; i < rq->TopicStatesCount; i++)
            for (int32_t j = 0; j < rq->TopicStates[i].PartitionStatesCount; j++) {
                v[k].topic = rq->TopicStates[i].TopicName;
                v[k].topic_id = ver >= 5 ? rq->TopicStates[i].TopicId : NO_TOPIC_ID;
                v[k++].ps = &rq->TopicStates[i].PartitionStates[j];
            }
    }
    *out = v;
    return k;
}

static int32_t *dup_ids(const int32_t *v, int32_t n, int *out_n)
{
    *out_n = n > 0 ? n : 0;
    if (n <= 0)
        return NULL;
    int32_t *r = gr_malloc(sizeof(int32_t) * (size_t)n);
    memcpy(r, v, sizeof(int32_t) * (size_t)n);
    return r;
}

static void apply_lai_state(struct gr_partition_state *st,
                            const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *ps,
                            const uint8_t topic_id[16])
{
    memcpy(st->topic_id.b, topic_id, 16);
    free(st->isr);
    free(st->replicas);
    free(st->adding);
    free(st->removing);
    st->leader = ps->Leader;
    st->leader_epoch = ps->LeaderEpoch;
    st->controller_epoch = ps->ControllerEpoch;
    st->zk_version = ps->PartitionEpoch;
    st->isr = dup_ids(ps->Isr, ps->IsrCount, &st->n_isr);
    st->replicas = dup_ids(ps->Replicas, ps->ReplicasCount, &st->n_replicas);
    st->adding = dup_ids(ps->AddingReplicas, ps->AddingReplicasCount, &st->n_adding);
    st->removing = dup_ids(ps->RemovingReplicas, ps->RemovingReplicasCount, &st->n_removing);
    st->is_new = ps->IsNew;
}

static bool contains(const int32_t *v, int32_t n, int32_t x)
{
    for (int32_t i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(const void *const *)a, y = (uintptr_t)*(const void *const *)b;
    return (x > y) - (x < y);
}

/* Does the batch name a partition twice (a controller never sends that; then the changes are
 * applied one by one, in order, as they always were)? */
static bool lai_has_duplicates(struct gr_api_req *req, const struct gr_lai_change *v, int n)
{
    if (n < 2)
        return false;
    const void **p = gr_api_alloc(req, sizeof(*p) * (size_t)n);
    for (int i = 0; i < n; i++)
        p[i] = v[i].st;
    qsort(p, (size_t)n, sizeof(*p), cmp_ptr);
    for (int i = 1; i < n; i++)
        if (p[i] == p[i - 1])
            return true;
    return false;
}

/* Hands the partitions that passed the checks to the replica manager: one batch, or (hooks
 * without a batch function, or duplicates) one call per partition. */
static void apply_lai_changes(struct gr_broker *b, struct gr_api_req *req, struct gr_lai_change *v,
                              int n)
{
    if (n == 0)
        return;
    if (b->hooks.apply_leader_and_isr && !lai_has_duplicates(req, v, n)) {
        b->hooks.apply_leader_and_isr(b->hooks.ctx, b, v, n);
        return;
    }
    for (int i = 0; i < n; i++) {
        int16_t e = GR_KERR_NONE;
        if (v[i].leader && b->hooks.become_leader)
            e = b->hooks.become_leader(b->hooks.ctx, b, v[i].st);
        else if (!v[i].leader && b->hooks.become_follower)
            e = b->hooks.become_follower(b->hooks.ctx, b, v[i].st);
        v[i].error = e;
    }
}

/* KIP-516, before any epoch check (Kafka's hasConsistentTopicId comes first too): a log on this
 * broker whose partition.metadata holds another id than the request's is not the current topic's.
 * Usually it is the log of a deleted topic of the same name, left here because this broker was
 * away (down, or cut off) while the deletion ran; but it may also be the current topic's own data
 * when the topic's id changed (a tool rewrote /brokers/topics/T without its id while no
 * controller knew it, and the next one gave the topic a new id: docs/STORAGE.md). Kafka 3.9 in
 * ZooKeeper mode answers INCONSISTENT_TOPIC_ID and leaves the partition unavailable on this
 * replica until an operator acts; KRaft (3.7+) moves such logs aside. Gregor moves it aside too
 * (StopReplica with move_aside: fetchers stopped, the directory renamed
 * "<topic>-<partition>.<id>-stray", closed, KEPT and never loaded again) and goes on as for a
 * partition it never had: the new topic's replica is created empty and fetches from its leader.
 * Nothing is ever deleted for a mismatch, so a wrong id costs availability of that copy, never
 * data. A log without an id (created before ids) adopts the request's (replica manager). An
 * unreadable partition.metadata answers KAFKA_STORAGE_ERROR and keeps the log in place (we
 * cannot tell whose it is). */
static int16_t move_aside_log_of_other_topic(struct gr_broker *b, const struct LeaderAndIsrRequest *rq,
                                             const struct lai_item *it)
{
    if (memcmp(it->topic_id, NO_TOPIC_ID, 16) == 0 || !b->hooks.log_topic_id)
        return GR_KERR_NONE;
    struct gr_uuid have, want;
    memcpy(want.b, it->topic_id, 16);
    int32_t part = it->ps->PartitionIndex;
    int r = b->hooks.log_topic_id(b->hooks.ctx, b, it->topic, part, &have);
    if (r < 0) {
        gr_error(LOGGER, "[Broker id=%d] Partition %s-%d: its partition.metadata cannot be read; "
                         "not serving it", b->broker_id, it->topic, part);
        return GR_KERR_KAFKA_STORAGE_ERROR;
    }
    if (r == 0 || gr_uuid_equal(&have, &want))
        return GR_KERR_NONE;
    char hs[GR_UUID_STR_LEN + 1], ws[GR_UUID_STR_LEN + 1], path[4096] = "";
    gr_uuid_to_string(&have, hs);
    gr_uuid_to_string(&want, ws);
    struct gr_stop_change sc = { .topic = it->topic, .partition = part, .delete_partition = true,
                                 .move_aside = true, .aside_path = path, .aside_cap = sizeof path };
    if (b->hooks.stop_replicas)
        b->hooks.stop_replicas(b->hooks.ctx, b, &sc, 1);
    else
        sc.error = GR_KERR_KAFKA_STORAGE_ERROR; /* no way to move it aside: never delete it */
    if (sc.error != GR_KERR_NONE) {
        gr_error(LOGGER, "[Broker id=%d] Topic ID in the log of partition %s-%d: %s does not match the "
                         "topic ID received from controller %d epoch %d: %s, and the log cannot be "
                         "moved aside: not serving it", b->broker_id, it->topic, part, hs, rq->ControllerId,
                 rq->ControllerEpoch, ws);
        return sc.error;
    }
    gr_warn(LOGGER, "[Broker id=%d] Topic ID in the log of partition %s-%d: %s does not match the "
                    "topic ID received from controller %d epoch %d: %s. The log is kept as a stray "
                    "log in %s (never served or removed; docs/STORAGE.md) and the partition starts "
                    "empty under %s", b->broker_id, it->topic, part, hs, rq->ControllerId,
            rq->ControllerEpoch, ws, path[0] ? path : "(no directory)", ws);
    gr_partitions_remove_locked(b->partitions, it->topic, part);
    return GR_KERR_NONE;
}

/* v5+ answers per topic id (KIP-516): the flat list (in request order) cut by the request's
 * topics, each under the id the request gave it. */
static void lai_response_by_topic_id(struct gr_api_req *req, const struct LeaderAndIsrRequest *rq,
                                     struct LeaderAndIsrResponse *resp)
{
    int32_t nt = rq->TopicStatesCount > 0 ? rq->TopicStatesCount : 0;
    resp->Topics = gr_api_alloc(req, sizeof(*resp->Topics) * (size_t)(nt ? nt : 1));
    resp->TopicsCount = nt;
    int32_t off = 0;
    for (int32_t t = 0; t < nt; t++) {
        int32_t np = rq->TopicStates[t].PartitionStatesCount > 0 ? rq->TopicStates[t].PartitionStatesCount : 0;
        memcpy(resp->Topics[t].TopicId, rq->TopicStates[t].TopicId, 16);
        resp->Topics[t].PartitionErrorsCount = np;
        resp->Topics[t].PartitionErrors = resp->PartitionErrors + off;
        off += np;
    }
}

void gr_handle_leader_and_isr(struct gr_broker *b, struct gr_api_req *req,
                              const struct gr_req_header *hdr, void *body)
{
    const struct LeaderAndIsrRequest *rq = body;
    int16_t ver = hdr->RequestApiVersion;
    struct LeaderAndIsrResponse *resp = gr_api_new_response(req);
    struct lai_item *items;
    int n = collect_lai(req, ver, rq, &items);
    resp->PartitionErrors = gr_api_alloc(req, sizeof(*resp->PartitionErrors) * (size_t)(n ? n : 1));
    resp->PartitionErrorsCount = n;
    for (int i = 0; i < n; i++) {
        resp->PartitionErrors[i].TopicName = (char *)items[i].topic;
        resp->PartitionErrors[i].PartitionIndex = items[i].ps->PartitionIndex;
    }

    int16_t whole = GR_KERR_NONE;
    if (!gr_api_authorized_cluster(req, GR_ACL_OP_CLUSTER_ACTION)) {
        whole = GR_KERR_CLUSTER_AUTHORIZATION_FAILED;
    } else if (broker_epoch_stale(b, rq->BrokerEpoch)) {
        gr_info(LOGGER, "[Broker id=%d] Received LeaderAndIsr request with broker epoch %lld "
                        "smaller than the current broker epoch %lld", b->broker_id,
                (long long)rq->BrokerEpoch, (long long)gr_broker_epoch(b));
        whole = GR_KERR_STALE_BROKER_EPOCH;
    }
    if (whole == GR_KERR_NONE) {
        gr_partitions_lock(b->partitions);
        int32_t known = gr_partitions_controller_epoch_locked(b->partitions);
        if (rq->ControllerEpoch < known) {
            gr_warn(LOGGER, "[Broker id=%d] Ignoring LeaderAndIsr request from controller %d with "
                            "correlation id %d since its controller epoch %d is old. Latest "
                            "known controller epoch is %d", b->broker_id, rq->ControllerId,
                    hdr->CorrelationId, rq->ControllerEpoch, known);
            whole = GR_KERR_STALE_CONTROLLER_EPOCH;
        } else {
            gr_partitions_set_controller_epoch_locked(b->partitions, rq->ControllerEpoch);
            struct gr_lai_change *changes = gr_api_alloc(req, sizeof(*changes) * (size_t)(n ? n : 1));
            int *change_of = gr_api_alloc(req, sizeof(*change_of) * (size_t)(n ? n : 1));
            int nc = 0;
            for (int i = 0; i < n; i++) {
                const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *ps = items[i].ps;
                int16_t *err = &resp->PartitionErrors[i].ErrorCode;
                if (!items[i].topic) {
                    *err = GR_KERR_INVALID_REQUEST;
                    continue;
                }
                /* a replica on an offline log dir answers before any epoch check (Kafka's
                 * HostedPartition.Offline): this is how the controller finds it */
                int16_t off = gr_ldf_check_partition(b, items[i].topic, ps->PartitionIndex);
                if (off != GR_KERR_NONE) {
                    gr_warn(LOGGER, "[Broker id=%d] Ignoring LeaderAndIsr request from controller %d "
                                    "epoch %d for partition %s-%d as the local replica for the "
                                    "partition is in an offline log directory", b->broker_id,
                            rq->ControllerId, rq->ControllerEpoch, items[i].topic,
                            ps->PartitionIndex);
                    *err = off;
                    continue;
                }
                int16_t tid_err = move_aside_log_of_other_topic(b, rq, &items[i]);
                if (tid_err != GR_KERR_NONE) {
                    *err = tid_err;
                    continue;
                }
                struct gr_partition_state *st = gr_partitions_get_or_create_locked(
                    b->partitions, items[i].topic, ps->PartitionIndex);
                if (ps->LeaderEpoch == st->leader_epoch && memcmp(items[i].topic_id, NO_TOPIC_ID, 16) != 0 &&
                    gr_uuid_is_zero(&st->topic_id) && b->hooks.adopt_topic_id &&
                    contains(ps->Replicas, ps->ReplicasCount, b->broker_id)) {
                    /* Kafka: "the controller may send LeaderAndIsr to upgrade to using topic IDs
                     * without bumping the epoch": the log takes the id, nothing else changes */
                    struct gr_uuid id;
                    memcpy(id.b, items[i].topic_id, 16);
                    *err = b->hooks.adopt_topic_id(b->hooks.ctx, b, items[i].topic, ps->PartitionIndex, &id);
                    if (*err == GR_KERR_NONE)
                        st->topic_id = id;
                    continue;
                }
                if (ps->LeaderEpoch <= st->leader_epoch) {
                    gr_info(LOGGER, "[Broker id=%d] Ignoring LeaderAndIsr request from "
                                    "controller %d epoch %d for partition %s-%d since its "
                                    "leader epoch %d is not newer than the current leader "
                                    "epoch %d", b->broker_id, rq->ControllerId,
                            rq->ControllerEpoch, items[i].topic, ps->PartitionIndex,
                            ps->LeaderEpoch, st->leader_epoch);
                    *err = GR_KERR_STALE_CONTROLLER_EPOCH;
                    continue;
                }
                if (!contains(ps->Replicas, ps->ReplicasCount, b->broker_id)) {
                    gr_warn(LOGGER, "[Broker id=%d] Ignoring LeaderAndIsr request from "
                                    "controller %d epoch %d for partition %s-%d as itself is not "
                                    "in assigned replica list", b->broker_id, rq->ControllerId,
                            rq->ControllerEpoch, items[i].topic, ps->PartitionIndex);
                    *err = GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
                    continue;
                }
                apply_lai_state(st, ps, items[i].topic_id);
                bool leader = ps->Leader == b->broker_id;
                /* DEBUG (Kafka: TRACE "Received LeaderAndIsr request ...") per partition: the INFO
                 * line of each transition is the replica manager's "Leader/Follower T-P starts
                 * at leader epoch ..." (at 100k partitions a line more each cost a failover
                 * ~10 % of the LeaderAndIsr handling) */
                gr_debug(LOGGER, "[Broker id=%d] %s for partition %s-%d: leader %d leader epoch %d "
                                "(controller %d epoch %d)", b->broker_id,
                        leader ? "Becoming leader" : "Becoming follower", items[i].topic,
                        ps->PartitionIndex, ps->Leader, ps->LeaderEpoch, rq->ControllerId,
                        rq->ControllerEpoch);
                changes[nc] = (struct gr_lai_change){ .st = st, .leader = leader };
                change_of[nc++] = i;
            }
            apply_lai_changes(b, req, changes, nc);
            for (int c = 0; c < nc; c++)
                resp->PartitionErrors[change_of[c]].ErrorCode = changes[c].error;
            if (b->hooks.leader_and_isr_done)
                b->hooks.leader_and_isr_done(b->hooks.ctx, b);
        }
        gr_partitions_unlock(b->partitions);
    }
    resp->ErrorCode = whole;
    if (whole != GR_KERR_NONE)
        for (int i = 0; i < n; i++)
            resp->PartitionErrors[i].ErrorCode = whole;
    if (ver >= 5)
        lai_response_by_topic_id(req, rq, resp);
    gr_api_respond(req, resp);
}

/* ---------------- StopReplica ---------------- */

struct sr_item {
    const char *topic;
    int32_t partition;
    int32_t leader_epoch;
    bool del;
};

static int collect_sr(struct gr_api_req *req, int16_t ver, const struct StopReplicaRequest *rq,
                      struct sr_item **out)
{
    int n = 0;
    if (ver == 0) {
        n = rq->UngroupedPartitionsCount > 0 ? rq->UngroupedPartitionsCount : 0;
    } else if (ver <= 2) {
        for (int32_t i = 0; i < rq->TopicsCount; i++)
            if (rq->Topics[i].PartitionIndexesCount > 0)
                n += rq->Topics[i].PartitionIndexesCount;
    } else {
        for (int32_t i = 0; i < rq->TopicStatesCount; i++)
            if (rq->TopicStates[i].PartitionStatesCount > 0)
                n += rq->TopicStates[i].PartitionStatesCount;
    }
    struct sr_item *v = gr_api_alloc(req, sizeof(*v) * (size_t)(n ? n : 1));
    int k = 0;
    if (ver == 0) {
        for (int i = 0; i < n; i++)
            v[k++] = (struct sr_item){ rq->UngroupedPartitions[i].TopicName,
                                       rq->UngroupedPartitions[i].PartitionIndex, -1,
                                       rq->DeletePartitions };
    } else if (ver <= 2) {
        for (int32_t i = 0; i < rq->TopicsCount; i++)
            for (int32_t j = 0; j < rq->Topics[i].PartitionIndexesCount; j++)
                v[k++] = (struct sr_item){ rq->Topics[i].Name, rq->Topics[i].PartitionIndexes[j],
                                           -1, rq->DeletePartitions };
    } else {
        for (int32_t i = 0; i < rq->TopicStatesCount; i++)
            for (int32_t j = 0; j < rq->TopicStates[i].PartitionStatesCount; j++) {
                const struct StopReplicaRequest_StopReplicaPartitionState *ps =
                    &rq->TopicStates[i].PartitionStates[j];
                v[k++] = (struct sr_item){ rq->TopicStates[i].TopicName, ps->PartitionIndex,
                                           ps->LeaderEpoch, ps->DeletePartition };
            }
    }
    *out = v;
    return k;
}

void gr_handle_stop_replica(struct gr_broker *b, struct gr_api_req *req,
                            const struct gr_req_header *hdr, void *body)
{
    const struct StopReplicaRequest *rq = body;
    int16_t ver = hdr->RequestApiVersion;
    struct StopReplicaResponse *resp = gr_api_new_response(req);
    resp->PartitionErrorsCount = 0;
    if (!gr_api_authorized_cluster(req, GR_ACL_OP_CLUSTER_ACTION)) {
        resp->ErrorCode = GR_KERR_CLUSTER_AUTHORIZATION_FAILED;
        gr_api_respond(req, resp);
        return;
    }
    if (broker_epoch_stale(b, rq->BrokerEpoch)) {
        gr_info(LOGGER, "[Broker id=%d] Received StopReplica request with broker epoch %lld "
                        "smaller than the current broker epoch %lld", b->broker_id,
                (long long)rq->BrokerEpoch, (long long)gr_broker_epoch(b));
        resp->ErrorCode = GR_KERR_STALE_BROKER_EPOCH;
        gr_api_respond(req, resp);
        return;
    }
    struct sr_item *items;
    int n = collect_sr(req, ver, rq, &items);
    gr_partitions_lock(b->partitions);
    int32_t known = gr_partitions_controller_epoch_locked(b->partitions);
    if (rq->ControllerEpoch < known) {
        gr_partitions_unlock(b->partitions);
        gr_warn(LOGGER, "[Broker id=%d] Ignoring StopReplica request from controller %d with "
                        "correlation id %d since its controller epoch %d is old. Latest known "
                        "controller epoch is %d", b->broker_id, rq->ControllerId,
                hdr->CorrelationId, rq->ControllerEpoch, known);
        resp->ErrorCode = GR_KERR_STALE_CONTROLLER_EPOCH;
        gr_api_respond(req, resp);
        return;
    }
    gr_partitions_set_controller_epoch_locked(b->partitions, rq->ControllerEpoch);
    resp->PartitionErrors = gr_api_alloc(req, sizeof(*resp->PartitionErrors) * (size_t)(n ? n : 1));
    resp->PartitionErrorsCount = n;
    struct gr_stop_change *stops = gr_api_alloc(req, sizeof(*stops) * (size_t)(n ? n : 1));
    int *stop_of = gr_api_alloc(req, sizeof(*stop_of) * (size_t)(n ? n : 1));
    int ns = 0, n_ignored = 0, first_ignored = -1;
    int32_t first_current = 0;
    for (int i = 0; i < n; i++) {
        struct StopReplicaResponse_StopReplicaPartitionError *pe = &resp->PartitionErrors[i];
        pe->TopicName = (char *)items[i].topic;
        pe->PartitionIndex = items[i].partition;
        if (!items[i].topic) {
            pe->ErrorCode = GR_KERR_INVALID_REQUEST;
            continue;
        }
        struct gr_partition_state *st =
            gr_partitions_get_locked(b->partitions, items[i].topic, items[i].partition);
        int32_t e = items[i].leader_epoch;
        if (st && !(e == -2 || e == -1 || e > st->leader_epoch)) {
            /* one line per partition at DEBUG, a summary after the lock is released: a
             * controlled shutdown at 100k partitions sends ~67k of these to the leaving broker */
            gr_debug(LOGGER, "[Broker id=%d] Ignoring StopReplica request (delete=%s) from "
                             "controller %d epoch %d for partition %s-%d since its leader epoch "
                             "%d is not newer than the current leader epoch %d", b->broker_id,
                     items[i].del ? "true" : "false", rq->ControllerId, rq->ControllerEpoch,
                     items[i].topic, items[i].partition, e, st->leader_epoch);
            if (n_ignored++ == 0) {
                first_ignored = i;
                first_current = st->leader_epoch;
            }
            pe->ErrorCode = GR_KERR_FENCED_LEADER_EPOCH;
            continue;
        }
        stops[ns] = (struct gr_stop_change){ .topic = items[i].topic,
                                             .partition = items[i].partition,
                                             .delete_partition = items[i].del };
        stop_of[ns++] = i;
    }
    if (b->hooks.stop_replicas) {
        if (ns > 0)
            b->hooks.stop_replicas(b->hooks.ctx, b, stops, ns);
    } else {
        for (int c = 0; c < ns; c++)
            stops[c].error = b->hooks.stop_replica
                                 ? b->hooks.stop_replica(b->hooks.ctx, b, stops[c].topic,
                                                         stops[c].partition,
                                                         stops[c].delete_partition)
                                 : GR_KERR_NONE;
    }
    for (int c = 0; c < ns; c++) {
        if (stops[c].error == GR_KERR_NONE && stops[c].delete_partition)
            gr_partitions_remove_locked(b->partitions, stops[c].topic, stops[c].partition);
        resp->PartitionErrors[stop_of[c]].ErrorCode = stops[c].error;
    }
    gr_partitions_unlock(b->partitions);
    if (n_ignored)
        gr_warn(LOGGER, "[Broker id=%d] Ignoring StopReplica request from controller %d epoch %d for %d "
                        "partition(s) since their leader epochs are not newer than the current ones, "
                        "first %s-%d (delete=%s, leader epoch %d, current %d)", b->broker_id,
                rq->ControllerId, rq->ControllerEpoch, n_ignored, items[first_ignored].topic,
                items[first_ignored].partition, items[first_ignored].del ? "true" : "false",
                items[first_ignored].leader_epoch, first_current);
    resp->ErrorCode = GR_KERR_NONE;
    gr_api_respond(req, resp);
}
