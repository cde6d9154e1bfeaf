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
    struct gr_ctrl_replica_list fresh = {0};
    for (int i = 0; i < b->PartitionErrorsCount; i++) {
        const struct LeaderAndIsrResponse_LeaderAndIsrPartitionError *pe = &b->PartitionErrors[i];
        if (!pe->TopicName) continue;
        struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, pe->TopicName);
        struct gr_ctrl_partition *p = gr_ctrl_topic_partition(t, pe->PartitionIndex);
        if (!p) continue;
        if (pe->ErrorCode == GR_KERR_NONE) gr_ctrl_replica_set_offline_dir(p, broker, false);
        else if (pe->ErrorCode == GR_KERR_KAFKA_STORAGE_ERROR && gr_ctrl_replica_set_offline_dir(p, broker, true))
            gr_ctrl_replica_list_add(&fresh, t->name, pe->PartitionIndex, broker);
    }
    int rc = 0;
    if (fresh.n) {
        gr_warn(GR_STATE_CHANGE_LOGGER,
                "[Controller id=%d epoch=%d] Mark %d replicas on broker %d as offline (KAFKA_STORAGE_ERROR: offline "
                "log dir), first %s-%d",
                sm->controller_id, ctx->epoch, fresh.n, broker, fresh.v[0].topic, fresh.v[0].partition);
        /* the same flow as a broker failure (replica_online sees the offline dir) */
        rc = gr_ctrl_on_replicas_become_offline(sm, fresh.v, fresh.n);
    }
    gr_ctrl_replica_list_free(&fresh);
    return rc;
}
