/* The controller's front door: see requests.h. Each submit function builds the event payload
 * its controller module defines (flows.h, controlled_shutdown.h, leader_balance.h,
 * reassignment.h) with a small adapter as the payload's respond function; the adapter turns the
 * payload's answer into the typed callback of requests.h and frees itself. The payload modules
 * guarantee respond is called exactly once (processed, preempted, or freed unprocessed). */
#include "controller/requests.h"

#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/util.h"
#include "controller/controlled_shutdown.h"
#include "controller/controller.h"
#include "controller/event_manager.h"
#include "controller/feature_versioning.h"
#include "controller/flows.h"
#include "controller/leader_balance.h"
#include "controller/reassignment.h"

/* What an adapter needs: the caller's callback (one of the typed fn pointers) and opaque. */
struct closure {
    void (*fn)(void);
    void *opaque;
};

static struct closure *closure_new(void (*fn)(void), void *opaque)
{
    struct closure *cl = gr_malloc(sizeof *cl);
    cl->fn = fn;
    cl->opaque = opaque;
    return cl;
}

static void put(struct gr_controller *c, struct gr_ctrl_event *ev)
{
    gr_ctrl_events_put(gr_controller_events(c), ev);
}

/* Queues an event of `type` carrying pl (freed by pfree; preempt answers NOT_CONTROLLER). */
static void put_payload(struct gr_controller *c, enum gr_ctrl_event_type type, void *pl, void (*pfree)(void *),
                        gr_ctrl_event_fn preempt)
{
    struct gr_ctrl_event *ev = gr_ctrl_event_new(type);
    ev->payload = pl;
    ev->payload_free = pfree;
    ev->preempt = preempt;
    put(c, ev);
}

/* ---- AlterPartition ---- */

static void alter_partition_answer(void *arg, const struct AlterPartitionResponse *resp)
{
    struct closure *cl = arg;
    ((gr_ctrl_alter_partition_done_fn)cl->fn)(cl->opaque, resp);
    free(cl);
}

void gr_ctrl_submit_alter_partition(struct gr_controller *c, int16_t version, const struct AlterPartitionRequest *request,
                                    gr_ctrl_alter_partition_done_fn done, void *opaque)
{
    struct gr_ctrl_alter_partition_payload *pl = gr_calloc(1, sizeof *pl);
    pl->request = request;
    pl->version = version;
    pl->respond = alter_partition_answer;
    pl->arg = closure_new((void (*)(void))done, opaque);
    if (!c) {
        gr_ctrl_alter_partition_payload_free(pl); /* answers NOT_CONTROLLER */
        return;
    }
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_ALTER_PARTITION_RECEIVED);
    ev->broker_id = request->BrokerId;
    ev->broker_epoch = request->BrokerEpoch;
    ev->payload = pl;
    ev->payload_free = gr_ctrl_alter_partition_payload_free;
    put(c, ev);
}

/* ---- ControlledShutdown ---- */

static void cs_answer(void *arg, int16_t error, const struct gr_kzk_tp *rem, int n)
{
    struct closure *cl = arg;
    ((gr_ctrl_controlled_shutdown_done_fn)cl->fn)(cl->opaque, error, rem, n);
    free(cl);
}

void gr_ctrl_submit_controlled_shutdown(struct gr_controller *c, int32_t broker_id, int64_t broker_epoch,
                                        gr_ctrl_controlled_shutdown_done_fn done, void *opaque)
{
    if (!c) {
        done(opaque, GR_KERR_NOT_CONTROLLER, NULL, 0);
        return;
    }
    struct gr_ctrl_cs_payload *pl = gr_calloc(1, sizeof *pl);
    pl->respond = cs_answer;
    pl->arg = closure_new((void (*)(void))done, opaque);
    put(c, gr_ctrl_cs_event_new(broker_id, broker_epoch, pl));
}

/* ---- ElectLeaders ---- */

static void elect_answer(void *arg, int16_t top_err, const struct gr_elect_payload *pl)
{
    struct closure *cl = arg;
    int n = pl->n;
    struct gr_ctrl_tp_result *r = gr_calloc((size_t)(n > 0 ? n : 1), sizeof *r);
    for (int i = 0; i < n; i++) {
        r[i].topic = pl->items[i].topic ? pl->items[i].topic : "";
        r[i].partition = pl->items[i].partition;
        r[i].error = pl->items[i].err;
        r[i].message = pl->items[i].msg;
        r[i].leader = pl->items[i].err == GR_KERR_NONE ? pl->items[i].leader : -1;
    }
    ((gr_ctrl_elect_done_fn)cl->fn)(cl->opaque, top_err, r, n);
    free(r);
    free(cl);
}

void gr_ctrl_submit_elect_leaders(struct gr_controller *c, int8_t type, const struct gr_kzk_tp *tps, int n,
                                  gr_ctrl_elect_done_fn done, void *opaque)
{
    bool all = n < 0;
    struct gr_elect_payload *pl = gr_elect_payload_new(all ? 0 : n);
    pl->type = type;
    pl->all = all;
    for (int i = 0; i < pl->n; i++) {
        pl->items[i].topic = gr_strdup(tps[i].topic ? tps[i].topic : "");
        pl->items[i].partition = tps[i].partition;
        pl->items[i].leader = -1;
    }
    pl->respond = elect_answer;
    pl->arg = closure_new((void (*)(void))done, opaque);
    if (!c || (type != GR_ELECTION_PREFERRED && type != GR_ELECTION_UNCLEAN)) {
        /* no controller object (tests) or an unknown election type: answer here */
        int16_t err = c ? GR_KERR_INVALID_REQUEST : GR_KERR_NOT_CONTROLLER;
        for (int i = 0; i < pl->n; i++) pl->items[i].err = err;
        pl->responded = true;
        elect_answer(pl->arg, all ? err : GR_KERR_NONE, pl);
        gr_elect_payload_free(pl);
        return;
    }
    put_payload(c, GR_EV_REPLICA_LEADER_ELECTION, pl, gr_elect_payload_free, gr_elect_preempt);
}

/* ---- AlterPartitionReassignments ---- */

static void reassign_answer(void *arg, int16_t top_err, const struct gr_reassign_api_payload *pl)
{
    struct closure *cl = arg;
    int n = top_err == GR_KERR_NONE ? pl->n : 0;
    struct gr_ctrl_tp_result *r = gr_calloc((size_t)(n > 0 ? n : 1), sizeof *r);
    for (int i = 0; i < n; i++) {
        r[i].topic = pl->items[i].topic ? pl->items[i].topic : "";
        r[i].partition = pl->items[i].partition;
        r[i].error = pl->items[i].err;
        r[i].message = pl->items[i].msg;
        r[i].leader = -1;
    }
    ((gr_ctrl_reassign_done_fn)cl->fn)(cl->opaque, top_err, r, n);
    free(r);
    free(cl);
}

void gr_ctrl_submit_alter_reassignments(struct gr_controller *c, const struct gr_ctrl_reassignment *items, int n,
                                        gr_ctrl_reassign_done_fn done, void *opaque)
{
    if (!c) {
        done(opaque, GR_KERR_NOT_CONTROLLER, NULL, 0);
        return;
    }
    struct gr_reassign_api_payload *pl = gr_reassign_api_payload_new(n);
    for (int k = 0; k < n; k++) {
        struct gr_reassign_item *it = &pl->items[k];
        it->topic = items[k].topic ? gr_strdup(items[k].topic) : NULL;
        it->partition = items[k].partition;
        it->cancel = items[k].n_replicas < 0;
        it->n_replicas = items[k].n_replicas > 0 ? items[k].n_replicas : 0;
        it->replicas = gr_malloc(sizeof(int32_t) * (size_t)(it->n_replicas ? it->n_replicas : 1));
        if (it->n_replicas) memcpy(it->replicas, items[k].replicas, sizeof(int32_t) * (size_t)it->n_replicas);
    }
    pl->respond = reassign_answer;
    pl->arg = closure_new((void (*)(void))done, opaque);
    put_payload(c, GR_EV_API_PARTITION_REASSIGNMENT, pl, gr_reassign_api_payload_free, gr_reassign_api_preempt);
}

/* ---- ListPartitionReassignments ---- */

static void list_answer(void *arg, int16_t top_err, const struct gr_reassign_list_payload *pl)
{
    struct closure *cl = arg;
    int n = top_err == GR_KERR_NONE ? pl->n_out : 0;
    struct gr_ctrl_reassignment_listing *l = gr_calloc((size_t)(n > 0 ? n : 1), sizeof *l);
    for (int i = 0; i < n; i++) {
        const struct gr_reassign_listing *o = &pl->out[i];
        l[i] = (struct gr_ctrl_reassignment_listing){
            .topic = o->topic, .partition = o->partition,
            .replicas = o->a.replicas, .n_replicas = o->a.n_replicas,
            .adding = o->a.adding, .n_adding = o->a.n_adding,
            .removing = o->a.removing, .n_removing = o->a.n_removing};
    }
    ((gr_ctrl_list_reassignments_done_fn)cl->fn)(cl->opaque, top_err, l, n);
    free(l);
    free(cl);
}

void gr_ctrl_submit_list_reassignments(struct gr_controller *c, const struct gr_kzk_tp *tps, int n,
                                       gr_ctrl_list_reassignments_done_fn done, void *opaque)
{
    if (!c) {
        done(opaque, GR_KERR_NOT_CONTROLLER, NULL, 0);
        return;
    }
    struct gr_reassign_list_payload *pl = gr_reassign_list_payload_new();
    pl->all = n < 0;
    if (!pl->all) {
        pl->req = gr_calloc((size_t)(n ? n : 1), sizeof *pl->req);
        for (int i = 0; i < n; i++) {
            if (!tps[i].topic) continue;
            pl->req[pl->n_req].topic = gr_strdup(tps[i].topic);
            pl->req[pl->n_req].partition = tps[i].partition;
            pl->n_req++;
        }
    }
    pl->respond = list_answer;
    pl->arg = closure_new((void (*)(void))done, opaque);
    put_payload(c, GR_EV_LIST_PARTITION_REASSIGNMENTS, pl, gr_reassign_list_payload_free, gr_reassign_list_preempt);
}

/* ---- UpdateFeatures ---- */

static void update_features_answer(void *arg, int16_t top, const struct gr_ctrl_feature_result *r, int n)
{
    struct closure *cl = arg;
    ((gr_ctrl_update_features_done_fn)cl->fn)(cl->opaque, top, r, n);
    free(cl);
}

void gr_ctrl_submit_update_features(struct gr_controller *c, const struct gr_ctrl_feature_update *updates, int n,
                                    bool validate_only,
                                    gr_ctrl_update_features_done_fn done, void *opaque)
{
    if (!c) {
        done(opaque, GR_KERR_NOT_CONTROLLER, NULL, 0);
        return;
    }
    struct closure *cl = closure_new((void (*)(void))done, opaque);
    put(c, gr_ctrl_feature_updates_event_new(updates, n, validate_only, update_features_answer, cl));
}
