/* Controlled shutdown on the controller: see controlled_shutdown.h. */
#include "controller/controlled_shutdown.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/event_manager.h"
#include "controller/partition_sm.h"
#include "controller/replica_sm.h"
#include "controller/request_batch.h"

#define LOGGER "kafka.controller.KafkaController"

static void add_shutting_down(struct gr_ctrl_context *ctx, int32_t id) {
    if (gr_ctrl_broker_shutting_down(ctx, id)) return;
    ctx->shutting_down = gr_realloc(ctx->shutting_down, (size_t)(ctx->n_shutting_down + 1) * sizeof *ctx->shutting_down);
    ctx->shutting_down[ctx->n_shutting_down++] = id;
}

static int16_t do_controlled_shutdown(struct gr_ctrl_sm *sm, int32_t id, int64_t broker_epoch,
                                      struct gr_ctrl_tp_list *remaining, int *rc, void (*written)(void *),
                                      void *arg) {
    struct gr_ctrl_context *ctx = sm->ctx;
    *rc = 0;
    memset(remaining, 0, sizeof *remaining);
    if (broker_epoch != -1) {
        struct gr_ctrl_broker *b = gr_ctrl_ctx_broker(ctx, id);
        /* Kafka reads liveBrokerIdAndEpochs(id): an unknown broker fails later as not available */
        if (b && broker_epoch < b->epoch) {
            gr_info(LOGGER,
                    "[Controller id=%d epoch=%d] Received controlled shutdown request from an old broker epoch %lld for "
                    "broker %d. Current broker epoch is %lld.",
                    sm->controller_id, ctx->epoch, (long long)broker_epoch, id, (long long)b->epoch);
            return GR_KERR_STALE_BROKER_EPOCH;
        }
    }
    gr_info(LOGGER, "[Controller id=%d epoch=%d] Shutting down broker %d", sm->controller_id, ctx->epoch, id);
    if (!gr_ctrl_broker_registered(ctx, id)) {
        gr_info(LOGGER, "[Controller id=%d epoch=%d] Broker id %d does not exist.", sm->controller_id, ctx->epoch, id);
        return GR_KERR_BROKER_NOT_AVAILABLE;
    }
    add_shutting_down(ctx, id);
    char buf[512];
    gr_debug(LOGGER, "[Controller id=%d epoch=%d] All shutting down brokers: %s", sm->controller_id, ctx->epoch,
             gr_ctrl_fmt_ids(buf, sizeof buf, ctx->shutting_down, ctx->n_shutting_down));

    struct gr_ctrl_tp_list led = {0}, followed = {0};
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur))) {
        if (gr_ctrl_topic_queued_for_deletion(ctx, t->name)) continue;
        for (int i = 0; i < t->n_partitions; i++) {
            struct gr_ctrl_partition *p = &t->partitions[i];
            if (p->n_replicas <= 1 || !p->has_state || gr_ctrl_replica_index(p, id) < 0) continue;
            if (p->lai.leader == id) gr_ctrl_tp_list_add(&led, t->name, p->partition);
            else gr_ctrl_tp_list_add(&followed, t->name, p->partition);
        }
    }
    gr_info(LOGGER, "[Controller id=%d epoch=%d] Controlled shutdown of broker %d: moving leadership of %d partitions, "
            "stopping %d follower replicas",
            sm->controller_id, ctx->epoch, id, led.n, followed.n);
    /* The followed replicas' ISR shrinks touch other partitions than the election: prepared from
     * the context now, written as soon as the election's writes are done, while the election's
     * LeaderAndIsr/UpdateMetadata and the StopReplica are built and sent (replica_sm.h). The
     * answer still waits for them, as in Kafka. */
    struct gr_ctrl_replica_list reps = {0};
    for (int i = 0; i < followed.n; i++)
        gr_ctrl_replica_list_add(&reps, followed.v[i].topic, followed.v[i].partition, id);
    struct gr_rsm_prepared *pr = followed.n ? gr_rsm_prepare_offline(sm, reps.v, reps.n) : NULL;
    struct gr_psm_strategy st = {.kind = GR_ELECT_CONTROLLED_SHUTDOWN, .allow_unclean = false};
    *rc = gr_psm_handle_state_changes(sm, led.v, led.n, GR_PS_ONLINE, &st, NULL);
    if (!*rc && pr) {
        gr_ctrl_batch_begin(sm->batch);
        for (int i = 0; i < followed.n; i++)
            gr_ctrl_batch_add_stop_replica(sm->batch, &id, 1, followed.v[i].topic, followed.v[i].partition, false);
        gr_ctrl_batch_send(sm->batch);
        *rc = gr_rsm_finish_offline(sm, pr, written, arg);
        pr = NULL;
    }
    gr_rsm_prepared_free(pr);
    gr_ctrl_replica_list_free(&reps);
    gr_ctrl_tp_list_free(&led);
    gr_ctrl_tp_list_free(&followed);
    if (*rc) return GR_KERR_NOT_CONTROLLER;
    gr_ctrl_partition_leaders_on_broker(ctx, id, remaining);
    return GR_KERR_NONE;
}

int16_t gr_ctrl_do_controlled_shutdown(struct gr_ctrl_sm *sm, int32_t id, int64_t broker_epoch,
                                       struct gr_ctrl_tp_list *remaining, int *rc) {
    return do_controlled_shutdown(sm, id, broker_epoch, remaining, rc, NULL, NULL);
}

void gr_ctrl_partition_leaders_on_broker(struct gr_ctrl_context *ctx, int32_t id, struct gr_ctrl_tp_list *out) {
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur))) {
        if (gr_ctrl_topic_queued_for_deletion(ctx, t->name)) continue;
        for (int i = 0; i < t->n_partitions; i++) {
            const struct gr_ctrl_partition *p = &t->partitions[i];
            if (p->has_state && p->lai.leader == id && p->n_replicas > 1)
                gr_ctrl_tp_list_add(out, t->name, p->partition);
        }
    }
}

/* ---- the event ---- */

static void answer(struct gr_ctrl_cs_payload *pl, int16_t error, const struct gr_kzk_tp *rem, int n) {
    if (!pl || pl->responded) return;
    pl->responded = true;
    if (pl->respond) pl->respond(pl->arg, error, rem, n);
}

static void payload_free(void *p) {
    struct gr_ctrl_cs_payload *pl = p;
    if (!pl) return;
    answer(pl, GR_KERR_NOT_CONTROLLER, NULL, 0);
    free(pl);
}

/* ControlledShutdown.preempt: ControllerMovedException. */
static void preempt(struct gr_ctrl_event *ev) { answer(ev->payload, GR_KERR_NOT_CONTROLLER, NULL, 0); }

struct gr_ctrl_event *gr_ctrl_cs_event_new(int32_t broker_id, int64_t broker_epoch, struct gr_ctrl_cs_payload *pl) {
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_CONTROLLED_SHUTDOWN);
    ev->broker_id = broker_id;
    ev->broker_epoch = broker_epoch;
    ev->payload = pl;
    ev->payload_free = payload_free;
    ev->preempt = preempt;
    return ev;
}

void gr_ctrl_cs_fail(struct gr_ctrl_event *ev, int16_t error) { answer(ev->payload, error, NULL, 0); }

/* The answer NONE with partitionLeadersOnBroker, logged. */
static void answer_done(struct gr_ctrl_sm *sm, int32_t id, struct gr_ctrl_cs_payload *pl) {
    struct gr_ctrl_tp_list rem = {0};
    gr_ctrl_partition_leaders_on_broker(sm->ctx, id, &rem);
    gr_info(LOGGER, "[Controller id=%d epoch=%d] Controlled shutdown of broker %d: %d partitions still led",
            sm->controller_id, sm->ctx->epoch, id, rem.n);
    answer(pl, GR_KERR_NONE, rem.v, rem.n);
    gr_ctrl_tp_list_free(&rem);
}

struct early_answer {
    struct gr_ctrl_sm *sm;
    int32_t id;
    struct gr_ctrl_cs_payload *pl;
};

static void answer_early(void *arg) {
    struct early_answer *e = arg;
    answer_done(e->sm, e->id, e->pl);
}

int gr_ctrl_cs_complete(struct gr_ctrl_sm *sm, struct gr_ctrl_event *ev) {
    struct gr_ctrl_cs_payload *pl = ev->payload;
    struct gr_ctrl_tp_list rem = {0};
    int rc = 0;
    /* The state-change lines of the elections and ISR shrinks (one per partition: 100k at 100k
     * partitions, 0.3-0.4 s) are written after the answer: the broker waits for nothing else.
     * Nor for the LeaderAndIsr/UpdateMetadata that tell the other replicas about its removal from
     * their ISRs: the answer goes once those ISR shrinks are written (what Kafka's answer waits
     * for), and the requests are built and queued right after it in the same event, before any
     * later event (such as the BrokerChange of the broker's exit) runs. */
    gr_ctrl_batch_hold_log(sm->batch, true);
    struct early_answer e = {.sm = sm, .id = ev->broker_id, .pl = pl};
    int16_t err = do_controlled_shutdown(sm, ev->broker_id, ev->broker_epoch, &rem, &rc, answer_early, &e);
    if (err == GR_KERR_NONE && pl && !pl->responded) answer_done(sm, ev->broker_id, pl);
    else answer(pl, err, NULL, 0); /* no-op once answered */
    gr_ctrl_batch_hold_log(sm->batch, false); /* writes the held lines */
    gr_ctrl_tp_list_free(&rem);
    return rc;
}
