/* Control-request responses handed back to the controller: see response.h. */
#include "controller/response.h"

#include <stdlib.h>

#include "common/util.h"

struct gr_ctrl_response *gr_ctrl_response_new(void) {
    struct gr_ctrl_response *r = gr_calloc(1, sizeof *r);
    gr_arena_init(&r->arena);
    return r;
}

void gr_ctrl_response_free(void *resp) {
    struct gr_ctrl_response *r = resp;
    if (!r) return;
    gr_arena_free(&r->arena);
    free(r->frame);
    if (r->request && r->request_free) r->request_free(r->request);
    free(r);
}
