/* Request dispatch (Kafka's KafkaApis.handle) and the table of APIs.
 *
 * The table (apis.c, `apis[]`) is the one place that says which Kafka APIs this broker serves:
 * api key -> supported versions [min, max] -> handler (+ what the handler needs). Contract:
 *   - Nothing registers handlers at run time; adding an API = one table line + its handler in
 *     src/api/handle_<api>.c declared in api/handlers.h.
 *   - ApiVersions advertises exactly the table: every entry, with its range (tests/unit/
 *     test_broker_apis.c checks this over the wire). A range never exceeds what the protocol codec
 *     knows (messages.c); test_broker_apis checks that too.
 *   - Handlers reach subsystem state only through struct gr_broker (broker.h): b->replica_manager,
 *     b->group_coordinator, b->controller (through controller/requests.h), b->metadata, ...
 *   - An entry flagged GR_API_NEEDS_REPLICA_MANAGER is refused (connection closed, WARN logged)
 *     while b->replica_manager is NULL -- only in unit tests that build a bare broker; gregord
 *     always has one. Every other handler copes with a missing subsystem itself (e.g. the group
 *     APIs answer COORDINATOR_NOT_AVAILABLE, the controller APIs NOT_CONTROLLER).
 *   - Tests may replace the handler of an entry (gr_apis_set_test_handler); versions and the
 *     advertised list never change.
 *
 * gr_apis_dispatch is the network server's handler (gr_net_handler_fn, ctx = struct gr_broker *):
 * it decodes the frame with the protocol codec and calls the table's handler with the decoded
 * header and body.
 *
 * Dispatch rules:
 *   - ApiVersions at a version we do not implement -> UNSUPPORTED_VERSION response encoded as v0
 *     with the full supported list (KIP-511; librdkafka relies on it).
 *   - any other unknown api key, unsupported version, or a body that does not parse -> WARN log
 *     naming the peer and the reason, and the connection is closed (as Kafka does).
 *
 * Request lifetime (numbered so handlers can cite it):
 *  1. The handler receives a struct gr_api_req it now owns. hdr and body live in req->arena and
 *     point into the request frame (zero-copy bytes), all valid until the request is completed.
 *  2. It must complete the request exactly once with gr_api_respond, gr_api_respond_none or
 *     gr_api_close -- from the I/O thread before returning, or later from any other thread
 *     (deferred responses: delayed operations). Completion frees the request, its arena and the
 *     frame; nothing of it may be used afterwards.
 *  3. Response bodies may be built in req->arena (gr_api_alloc / gr_proto_new) and are encoded
 *     by gr_api_respond before anything is freed.
 *  4. The request is used by one thread at a time; handing it to another thread transfers it.
 *     (Only its memory outlives the completion while the handler call that received it has not
 *     returned: dispatch then stamps local_done_us, Kafka's apiLocalCompleteTime, and frees it.)
 */
#ifndef GR_API_APIS_H
#define GR_API_APIS_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/codec.h"

struct gr_broker;
struct gr_net_request;

struct gr_api_req {
    struct gr_broker *broker;
    struct gr_net_request *net; /* the frame; owned until completion */
    struct gr_arena arena;      /* decoded header/body, response scratch */
    struct gr_req_header hdr;
    void *body;                 /* struct <Api>Request */
    const char *listener;       /* listener name the request arrived on */
    const char *peer;           /* "host:port" of the client, for logs */
    /* The authenticated principal as Kafka's default principal builder names it, valid until
     * completion: "User:ANONYMOUS" (PLAINTEXT, SSL without a client certificate),
     * "User:<name>" after SASL, "User:CN=...,O=..." (certificate subject DN) for SSL client
     * authentication. Never NULL. The authorizer reads exactly this. */
    const char *principal;
    int64_t received_ms;        /* gr_mono_ms() at dispatch */
    int64_t dispatch_us;        /* gr_mono_us() at dispatch (request quota: handler thread time) */
    /* Request metrics (Kafka's RequestChannel.Request fields), read at completion: */
    _Atomic int64_t local_done_us; /* the handler call returned (0: not yet); dispatch only */
    _Atomic int refs;              /* private to apis.c: the completion and a running handler call */
    int64_t conversion_us;         /* Produce/Fetch: time spent converting record formats */
    int64_t temporary_memory_bytes; /* Produce/Fetch: bytes allocated for conversions */
};

typedef void (*gr_api_handler_fn)(struct gr_broker *b, struct gr_api_req *req,
                                  const struct gr_req_header *hdr, void *body);

/* What a handler needs from struct gr_broker before dispatch may call it (see above). */
#define GR_API_NEEDS_REPLICA_MANAGER 0x1u

/* One line of the table. */
struct gr_api_entry {
    int16_t min_ver, max_ver;
    gr_api_handler_fn fn; /* NULL: api key not served */
    unsigned needs;       /* GR_API_NEEDS_* */
};

/* The table's entry for api_key, or NULL if the broker does not serve it. */
const struct gr_api_entry *gr_apis_entry(int16_t api_key);

/* Is api_key in the table, and if so its range. */
int gr_apis_lookup(int16_t api_key, int16_t *min_ver, int16_t *max_ver);

/* Tests only: dispatch calls fn instead of the table's handler of api_key (which must be in the
 * table; returns -EINVAL otherwise). NULL restores the table's handler. Call while no request
 * of that key is being dispatched. */
int gr_apis_set_test_handler(int16_t api_key, gr_api_handler_fn fn);

/* The network server's handler. ctx is the struct gr_broker *. */
void gr_apis_dispatch(void *ctx, struct gr_net_request *req);

/* Encodes body (a struct <Api>Response for the request's api key and version) with the
 * response header and sends it. If encoding fails the connection is closed (ERROR logged).
 * Completes and frees req. Any thread. */
void gr_api_respond(struct gr_api_req *req, const void *body);
/* Completes req without a response. Any thread. */
void gr_api_respond_none(struct gr_api_req *req);
/* Completes req by closing the connection (reason logged at WARN). Any thread. */
void gr_api_close(struct gr_api_req *req, const char *reason);

/* Zeroed memory in the request's arena (lives until completion). */
void *gr_api_alloc(struct gr_api_req *req, size_t n);
/* A response struct of the request's API initialised to its schema defaults, in the arena. */
void *gr_api_new_response(struct gr_api_req *req);

/* Zero-copy responses (Fetch over sendfile). A response field of bytes whose content is a
 * 16-byte marker (gr_api_region.marker, preceded on the wire by its length 16: int32, or the
 * uvarint 17 of a flexible version's compact bytes) is replaced
 * on the wire by the file region (fd, off, len). gr_api_respond_regions encodes body, splices the
 * regions in and sends them with sendfile (net/server.h gr_net_respond_regions); when the
 * connection cannot use sendfile or a marker is not found the regions are read and copied in.
 * Takes the regions' fds. */
struct gr_api_region {
    uint8_t marker[16];
    int fd;
    int64_t off;
    size_t len;
};
/* Whether responses on this request's connection may use file regions (false with
 * GREGOR_FETCH_SENDFILE=0 and on TLS connections). */
bool gr_api_req_can_sendfile(const struct gr_api_req *req);
void gr_api_respond_regions(struct gr_api_req *req, const void *body, struct gr_api_region *regions, int n);
/* Copy of s in the arena (NULL stays NULL). */
char *gr_api_strdup(struct gr_api_req *req, const char *s);

/* Fills resp (an initialised ApiVersionsResponse) with the table, in api key order, allocating
 * in a. */
void gr_apis_fill_api_versions(struct ApiVersionsResponse *resp, struct gr_arena *a);

#endif
