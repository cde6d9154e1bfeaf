/* API registry and request dispatch; see apis.h. */
#include "api/apis.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker.h"
#include "api/handlers.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "net/server.h"

#define LOGGER "kafka.server.KafkaApis"
#define MAX_API_KEY 128

struct api_entry {
    _Atomic(gr_api_handler_fn) fn;
    int16_t min_ver;
    int16_t max_ver;
};

static struct api_entry registry[MAX_API_KEY];

int gr_apis_register(int16_t api_key, int16_t min_ver, int16_t max_ver, gr_api_handler_fn fn)
{
    const struct gr_api_desc *d = gr_proto_api(api_key);
    if (!d || api_key < 0 || api_key >= MAX_API_KEY || !fn)
        return -EINVAL;
    if (min_ver < d->min_version)
        min_ver = d->min_version;
    if (max_ver > d->max_version)
        max_ver = d->max_version;
    if (min_ver > max_ver)
        return -EINVAL;
    registry[api_key].min_ver = min_ver;
    registry[api_key].max_ver = max_ver;
    atomic_store(&registry[api_key].fn, fn);
    return 0;
}

void gr_apis_unregister(int16_t api_key)
{
    if (api_key >= 0 && api_key < MAX_API_KEY)
        atomic_store(&registry[api_key].fn, (gr_api_handler_fn)NULL);
}

int gr_apis_lookup(int16_t api_key, int16_t *min_ver, int16_t *max_ver)
{
    if (api_key < 0 || api_key >= MAX_API_KEY || !atomic_load(&registry[api_key].fn))
        return 0;
    if (min_ver)
        *min_ver = registry[api_key].min_ver;
    if (max_ver)
        *max_ver = registry[api_key].max_ver;
    return 1;
}

void gr_apis_register_builtin(void)
{
    gr_apis_register(GR_API_API_VERSIONS, 0, 3, gr_handle_api_versions);
    gr_apis_register(GR_API_METADATA, 0, 9, gr_handle_metadata);
    gr_apis_register(GR_API_CREATE_TOPICS, 0, 5, gr_handle_create_topics);
    gr_apis_register(GR_API_CREATE_PARTITIONS, 0, 2, gr_handle_create_partitions);
    gr_apis_register(GR_API_LEADER_AND_ISR, 0, 4, gr_handle_leader_and_isr);
    gr_apis_register(GR_API_STOP_REPLICA, 0, 3, gr_handle_stop_replica);
    gr_apis_register(GR_API_UPDATE_METADATA, 0, 6, gr_handle_update_metadata);
    gr_apis_register(GR_API_INIT_PRODUCER_ID, 0, 4, gr_handle_init_producer_id);
}

void gr_apis_fill_api_versions(struct ApiVersionsResponse *resp, struct gr_arena *a)
{
    int n = 0;
    for (int k = 0; k < MAX_API_KEY; k++)
        if (atomic_load(&registry[k].fn))
            n++;
    resp->ApiKeys = gr_arena_alloc(a, sizeof(*resp->ApiKeys) * (size_t)(n ? n : 1));
    resp->ApiKeysCount = n;
    int i = 0;
    for (int k = 0; k < MAX_API_KEY && i < n; k++) {
        if (!atomic_load(&registry[k].fn))
            continue;
        resp->ApiKeys[i].ApiKey = (int16_t)k;
        resp->ApiKeys[i].MinVersion = registry[k].min_ver;
        resp->ApiKeys[i].MaxVersion = registry[k].max_ver;
        i++;
    }
}

/* ---- request lifetime ---- */

static void req_free(struct gr_api_req *r)
{
    gr_arena_free(&r->arena);
    free(r);
}

void gr_api_respond(struct gr_api_req *r, const void *body)
{
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    int rc = gr_proto_encode_response(&r->hdr, body, &w);
    if (rc != 0) {
        gr_error(LOGGER, "cannot encode %s v%d response (correlation id %d) for %s: %s",
                 gr_proto_api(r->hdr.RequestApiKey) ? gr_proto_api(r->hdr.RequestApiKey)->name
                                                     : "?",
                 r->hdr.RequestApiVersion, r->hdr.CorrelationId, r->peer, gr_proto_strerror(rc));
        gr_wbuf_free(&w);
        gr_net_close(r->net);
        req_free(r);
        return;
    }
    /* Hand the buffer over: gr_net_respond_take frees it with free(). */
    gr_net_respond_take(r->net, w.p, w.len);
    req_free(r);
}

void gr_api_respond_none(struct gr_api_req *r)
{
    gr_net_respond_none(r->net);
    req_free(r);
}

void gr_api_close(struct gr_api_req *r, const char *reason)
{
    gr_warn(LOGGER, "closing connection from %s (listener %s): %s", r->peer,
            r->listener ? r->listener : "?", reason ? reason : "");
    gr_net_close(r->net);
    req_free(r);
}

void *gr_api_alloc(struct gr_api_req *r, size_t n) { return gr_arena_alloc(&r->arena, n); }

void *gr_api_new_response(struct gr_api_req *r)
{
    const struct gr_api_desc *d = gr_proto_api(r->hdr.RequestApiKey);
    return d ? gr_proto_new(&r->arena, d->response) : NULL;
}

char *gr_api_strdup(struct gr_api_req *r, const char *s) { return gr_arena_strdup(&r->arena, s); }

/* UNSUPPORTED_VERSION to an ApiVersions request, encoded as v0 with the supported list. */
static void answer_unsupported_api_versions(struct gr_api_req *r)
{
    r->hdr.RequestApiVersion = 0;
    struct ApiVersionsResponse *resp = gr_proto_new(&r->arena, &gr_desc_ApiVersionsResponse);
    resp->ErrorCode = GR_KERR_UNSUPPORTED_VERSION;
    gr_apis_fill_api_versions(resp, &r->arena);
    gr_api_respond(r, resp);
}

void gr_apis_dispatch(void *ctx, struct gr_net_request *nreq)
{
    struct gr_broker *b = ctx;
    struct gr_api_req *r = gr_calloc(1, sizeof(*r));
    r->broker = b;
    r->net = nreq;
    r->listener = nreq->listener;
    r->peer = nreq->peer;
    r->received_ms = gr_mono_ms();
    gr_arena_init(&r->arena);

    int rc = gr_proto_decode_request(nreq->data, nreq->len, &r->arena, &r->hdr, &r->body);
    int16_t key = nreq->api_key, ver = nreq->api_version;
    const struct gr_api_desc *d = gr_proto_api(key);
    const char *name = d ? d->name : "unknown";
    char why[160];

    if (rc == GR_PROTO_EUNSUPPORTED_VERSION && key == GR_API_API_VERSIONS) {
        /* The header fields the codec promises on this error are valid. */
        r->hdr.RequestApiKey = key;
        r->hdr.CorrelationId = nreq->correlation_id;
        answer_unsupported_api_versions(r);
        return;
    }
    if (rc != 0) {
        snprintf(why, sizeof(why), "cannot decode %s (key %d) v%d request: %s", name, key, ver,
                 gr_proto_strerror(rc));
        gr_api_close(r, why);
        return;
    }
    gr_api_handler_fn fn = (key >= 0 && key < MAX_API_KEY) ? atomic_load(&registry[key].fn) : NULL;
    if (!fn) {
        snprintf(why, sizeof(why), "unsupported API %s (key %d)", name, key);
        gr_api_close(r, why);
        return;
    }
    if (ver < registry[key].min_ver || ver > registry[key].max_ver) {
        if (key == GR_API_API_VERSIONS) {
            answer_unsupported_api_versions(r);
            return;
        }
        snprintf(why, sizeof(why), "unsupported version %d of API %s (supported %d-%d)", ver, name,
                 registry[key].min_ver, registry[key].max_ver);
        gr_api_close(r, why);
        return;
    }
    gr_debug(LOGGER, "%s v%d correlation id %d from %s (client %s)", name, ver,
             r->hdr.CorrelationId, r->peer, r->hdr.ClientId ? r->hdr.ClientId : "null");
    fn(b, r, &r->hdr, r->body);
}
