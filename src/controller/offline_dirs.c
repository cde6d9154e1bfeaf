/* Replicas on offline log dirs: see offline_dirs.h. */
#include "controller/offline_dirs.h"

#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/event_manager.h"
#include "controller/flows.h"
#include "controller/partition_sm.h"
#include "controller/replica_sm.h"
#include "controller/response.h"
#include "controller/topic_deletion.h"

#define LOGGER "kafka.controller.KafkaController"

struct entry {
    int32_t broker;
    int32_t partition;
    char *topic;
};

struct gr_offline_dirs {
    struct gr_ctrl_sm *sm;
    struct gr_topic_deletion *td;
    int32_t epoch; /* controller epoch the set belongs to */
    int n, cap;
    struct entry *v;
};

struct gr_offline_dirs *gr_od_new(struct gr_ctrl_sm *sm, struct gr_topic_deletion *td) {
    struct gr_offline_dirs *od = gr_calloc(1, sizeof *od);
    od->sm = sm;
    od->td = td;
    return od;
}

static void clear(struct gr_offline_dirs *od) {
    for (int i = 0; i < od->n; i++) free(od->v[i].topic);
    od->n = 0;
}

void gr_od_free(struct gr_offline_dirs *od) {
    if (!od) return;
    clear(od);
    free(od->v);
    free(od);
}

static int find(struct gr_offline_dirs *od, const char *topic, int32_t partition, int32_t broker) {
    for (int i = 0; i < od->n; i++)
        if (od->v[i].broker == broker && od->v[i].partition == partition && strcmp(od->v[i].topic, topic) == 0) return i;
    return -1;
}

static void sync_epoch(struct gr_offline_dirs *od) {
    if (od->epoch != od->sm->ctx->epoch) {
        clear(od);
        od->epoch = od->sm->ctx->epoch;
    }
}

bool gr_od_replica_offline(struct gr_offline_dirs *od, const char *topic, int32_t partition, int32_t broker) {
    sync_epoch(od);
    return find(od, topic, partition, broker) >= 0;
}

int gr_od_count(struct gr_offline_dirs *od) {
    sync_epoch(od);
    return od->n;
}

int gr_od_process_leader_and_isr_response(struct gr_offline_dirs *od, struct gr_ctrl_event *ev) {
    struct gr_ctrl_response *r = ev->payload;
    if (!r || !r->body || r->api_key != GR_API_LEADER_AND_ISR) return 0;
    const struct LeaderAndIsrResponse *b = r->body;
    if (b->ErrorCode != GR_KERR_NONE) return 0;
    sync_epoch(od);
    struct gr_ctrl_sm *sm = od->sm;
    struct gr_ctrl_context *ctx = sm->ctx;
    int32_t broker = ev->broker_id;
    struct gr_ctrl_replica_list fresh = {0}, deleting = {0};
    for (int i = 0; i < b->PartitionErrorsCount; i++) {
        const struct LeaderAndIsrResponse_LeaderAndIsrPartitionError *pe = &b->PartitionErrors[i];
        if (!pe->TopicName) continue;
        int at = find(od, pe->TopicName, pe->PartitionIndex, broker);
        if (pe->ErrorCode == GR_KERR_NONE && at >= 0) {
            free(od->v[at].topic);
            od->v[at] = od->v[--od->n];
        } else if (pe->ErrorCode == GR_KERR_KAFKA_STORAGE_ERROR && at < 0) {
            struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, pe->TopicName);
            if (!t || !gr_ctrl_topic_partition(t, pe->PartitionIndex)) continue;
            if (od->n == od->cap) {
                od->cap = od->cap ? od->cap * 2 : 16;
                od->v = gr_realloc(od->v, (size_t)od->cap * sizeof *od->v);
            }
            od->v[od->n++] = (struct entry){broker, pe->PartitionIndex, gr_strdup(pe->TopicName)};
            if (gr_ctrl_topic_queued_for_deletion(ctx, t->name))
                gr_ctrl_replica_list_add(&deleting, t->name, pe->PartitionIndex, broker);
            else gr_ctrl_replica_list_add(&fresh, t->name, pe->PartitionIndex, broker);
        }
    }
    int rc = 0;
    if (fresh.n || deleting.n)
        gr_warn(GR_STATE_CHANGE_LOGGER,
                "[Controller id=%d epoch=%d] Mark %d replicas on broker %d as offline (KAFKA_STORAGE_ERROR: offline "
                "log dir), first %s-%d",
                sm->controller_id, ctx->epoch, fresh.n + deleting.n, broker,
                fresh.n ? fresh.v[0].topic : deleting.v[0].topic, fresh.n ? fresh.v[0].partition : deleting.v[0].partition);
    if (deleting.n && od->td) rc = gr_td_fail_replica_deletion(od->td, deleting.v, deleting.n);
    if (!rc && fresh.n) {
        /* onReplicasBecomeOffline with the replicas' dir state taken into account: the replica
         * leaves the ISR first (its leadership goes to -1), then leaderless partitions are
         * re-elected from what remains of the ISR */
        rc = gr_rsm_handle_state_changes(sm, fresh.v, fresh.n, GR_RS_OFFLINE);
        struct gr_ctrl_tp_list leaderless = {0};
        for (int i = 0; !rc && i < fresh.n; i++) {
            struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(ctx, fresh.v[i].topic, fresh.v[i].partition);
            if (!p || !p->has_state) continue;
            bool dup = false;
            for (int k = 0; k < leaderless.n; k++)
                if (leaderless.v[k].partition == fresh.v[i].partition && strcmp(leaderless.v[k].topic, fresh.v[i].topic) == 0)
                    dup = true;
            if (!dup && (p->lai.leader < 0 || !gr_ctrl_replica_online(ctx, p->lai.leader, false)))
                gr_ctrl_tp_list_add(&leaderless, fresh.v[i].topic, fresh.v[i].partition);
        }
        if (!rc) rc = gr_psm_handle_state_changes(sm, leaderless.v, leaderless.n, GR_PS_OFFLINE, NULL, NULL);
        if (!rc) rc = gr_psm_trigger_online(sm, NULL);
        if (!rc && leaderless.n == 0) gr_ctrl_send_update_metadata_all(sm, NULL, 0);
        gr_ctrl_tp_list_free(&leaderless);
    }
    gr_ctrl_replica_list_free(&fresh);
    gr_ctrl_replica_list_free(&deleting);
    return rc;
}
