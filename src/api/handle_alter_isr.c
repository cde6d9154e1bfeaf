/* AlterIsr request handler: see alter_isr_api.h. */
#include "controller/alter_isr_api.h"

#include <stdlib.h>

#include "api/apis.h"
#include "broker/broker.h"
#include "common/kerr.h"
#include "common/util.h"
#include "controller/controller.h"
#include "controller/event_manager.h"
#include "controller/flows.h"

/* Runs on whichever thread answers (event thread or the one freeing the event). */
static void respond(void *arg, const struct AlterIsrResponse *resp) { gr_api_respond(arg, resp); }

static void handle_alter_isr(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                             void *body) {
    (void)hdr;
    struct AlterIsrRequest *r = body;
    if (!b->controller || !gr_broker_is_controller(b)) {
        struct AlterIsrResponse *resp = gr_api_new_response(req);
        resp->ErrorCode = GR_KERR_NOT_CONTROLLER;
        resp->TopicsCount = 0;
        resp->Topics = NULL;
        gr_api_respond(req, resp);
        return;
    }
    struct gr_ctrl_alter_isr_payload *pl = gr_calloc(1, sizeof *pl);
    pl->request = r;
    pl->respond = respond;
    pl->arg = req; /* rule 4 of apis.h: the request now belongs to the event */
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_ALTER_ISR_RECEIVED);
    ev->broker_id = r->BrokerId;
    ev->broker_epoch = r->BrokerEpoch;
    ev->payload = pl;
    ev->payload_free = gr_ctrl_alter_isr_payload_free;
    gr_ctrl_events_put(gr_controller_events(b->controller), ev);
}

int gr_ctrl_alter_isr_register_api(void) { return gr_apis_register(GR_API_ALTER_ISR, 0, 0, handle_alter_isr); }
