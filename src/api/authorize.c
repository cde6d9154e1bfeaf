/* Request authorization: see authorize.h. */
#include "api/authorize.h"

#include <stdio.h>
#include <string.h>

#include "broker/broker.h"
#include "common/config.h"
#include "security/authorizer.h"

const char *gr_api_principal(const struct gr_api_req *req) {
    const char *p = req->principal ? req->principal : "User:ANONYMOUS";
    const struct gr_config *cfg = req->broker ? req->broker->cfg : NULL;
    const char *cid = req->hdr.ClientId;
    if (cfg && cfg->gregor_test_principal_by_client_id && cid && strncmp(cid, "User:", 5) == 0 && cid[5] &&
        strcmp(p, "User:ANONYMOUS") == 0)
        return cid;
    return p;
}

bool gr_api_authorizer_enabled(const struct gr_api_req *req) {
    return req->broker && req->broker->authorizer;
}

/* The client's IP address from req->peer ("1.2.3.4:5", "[::1]:5") in Java's getHostAddress form
 * (gr_acl_host_normalize: "[::ffff:1.2.3.4]:5" -> "1.2.3.4", "[::1]:5" -> "0:0:0:0:0:0:0:1"), the
 * string Kafka compares ACL hosts with. */
static void peer_host(const struct gr_api_req *req, char *out, size_t n) {
    const char *peer = req->peer ? req->peer : "";
    const char *colon = strrchr(peer, ':');
    size_t len = colon ? (size_t)(colon - peer) : strlen(peer);
    if (len >= 2 && peer[0] == '[' && peer[len - 1] == ']') {
        peer++;
        len -= 2;
    }
    char addr[80];
    snprintf(addr, sizeof addr, "%.*s", (int)len, peer);
    gr_acl_host_normalize(addr, out, n);
}

static bool check(struct gr_api_req *req, int op, int type, const char *name, bool log_denied) {
    if (!gr_api_authorizer_enabled(req)) return true;
    char host[80];
    peer_host(req, host, sizeof host);
    return gr_authorizer_authorize(req->broker->authorizer, gr_api_principal(req), host, op, type, name ? name : "",
                                   log_denied);
}

bool gr_api_authorized(struct gr_api_req *req, int op, int resource_type, const char *name) {
    return check(req, op, resource_type, name, true);
}

bool gr_api_authorized_quiet(struct gr_api_req *req, int op, int resource_type, const char *name) {
    return check(req, op, resource_type, name, false);
}

int32_t gr_api_authorized_operations(struct gr_api_req *req, int resource_type, const char *name) {
    uint32_t bits = 0;
    for (int op = GR_ACL_OP_READ; op <= GR_ACL_OP_LAST; op++)
        if (op != GR_ACL_OP_ALL && gr_acl_op_supported(resource_type, op) &&
            check(req, op, resource_type, name, false))
            bits |= 1u << op;
    return (int32_t)bits;
}

bool gr_api_authorized_cluster(struct gr_api_req *req, int op) {
    return check(req, op, GR_ACL_RES_CLUSTER, GR_ACL_CLUSTER_NAME, true);
}
