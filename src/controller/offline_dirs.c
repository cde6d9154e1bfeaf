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
#include "controller/request_batch.h"
#include "controller/response.h"
#include "controller/topic_deletion.h"

#define LOGGER "kafka.controller.KafkaController"

struct gr_offline_dirs {
    struct gr_ctrl_sm *sm;
    struct gr_topic_deletion *td;
};

struct gr_offline_dirs *gr_od_new(struct gr_ctrl_sm *sm, struct gr_topic_deletion *td) {
    struct gr_offline_dirs *od = gr_calloc(1, sizeof *od);
    od->sm = sm;
    od->td = td;
    return od;
}

void gr_od_free(struct gr_offline_dirs *od) { free(od); }

bool gr_od_replica_offline(struct gr_offline_dirs *od, const char *topic, int32_t partition, int32_t broker) {
    return gr_ctrl_replica_on_offline_dir(gr_ctrl_ctx_partition(od->sm->ctx, topic, partition), broker);
}

int gr_od_count(struct gr_offline_dirs *od) {
    int n = 0;
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(od->sm->ctx, &cur)))
        for (int i = 0; i < t->n_partitions; i++) n += t->partitions[i].n_offline_dirs;
    return n;
}

int gr_od_process_leader_and_isr_response(struct gr_offline_dirs *od, struct gr_ctrl_event *ev) {
    struct gr_ctrl_response *r = ev->payload;
    if (!r || !r->body || r->api_key != GR_API_LEADER_AND_ISR) return 0;
    const struct LeaderAndIsrResponse *b = r->body;
    if (b->ErrorCode != GR_KERR_NONE) return 0;
    struct gr_ctrl_sm *sm = od->sm;
    struct gr_ctrl_context *ctx = sm->ctx;
    int32_t broker = ev->broker_id;
    /* An answer of an earlier incarnation of the broker (queued before the controller saw it
     * bounce) says nothing about the new one's log dirs: its storage errors would mark healthy
     * replicas offline until the broker restarts again (Kafka 2.7 does not check this). */
    const struct gr_ctrl_req *sent = r->request;
    const struct gr_ctrl_broker *now = gr_ctrl_ctx_broker(ctx, broker);
    if (sent && sent->api_key == GR_API_LEADER_AND_ISR && now && sent->u.lai.BrokerEpoch != -1 &&
        sent->u.lai.BrokerEpoch < now->epoch) {
        gr_info(GR_STATE_CHANGE_LOGGER,
                "[Controller id=%d epoch=%d] Ignoring a LeaderAndIsr response of broker %d's earlier registration "
                "(epoch %lld, now %lld)",
                sm->controller_id, ctx->epoch, broker, (long long)sent->u.lai.BrokerEpoch, (long long)now->epoch);
        return 0;
    }
    struct gr_ctrl_replica_list fresh = {0}, deleting = {0};
    for (int i = 0; i < b->PartitionErrorsCount; i++) {
        const struct LeaderAndIsrResponse_LeaderAndIsrPartitionError *pe = &b->PartitionErrors[i];
        if (!pe->TopicName) continue;
        struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, pe->TopicName);
        struct gr_ctrl_partition *p = gr_ctrl_topic_partition(t, pe->PartitionIndex);
        if (!p) continue;
        if (pe->ErrorCode == GR_KERR_NONE) {
            gr_ctrl_replica_set_offline_dir(p, broker, false);
        } else if (pe->ErrorCode == GR_KERR_KAFKA_STORAGE_ERROR && gr_ctrl_replica_set_offline_dir(p, broker, true)) {
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
            if (!dup && (p->lai.leader < 0 || !gr_ctrl_replica_online(ctx, p, p->lai.leader, false)))
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
