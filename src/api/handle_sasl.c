/* SaslHandshake, SaslAuthenticate, raw SASL tokens and the pre-authentication gate: see
 * handle_sasl.h. */
#include "api/handle_sasl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker.h"
#include "broker/dynamic_config_manager.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "net/server.h"
#include "security/sasl_server.h"
#include "security/scram.h"
#include "zk/kzk.h"

#define LOGGER "org.apache.kafka.common.security.authenticator.SaslServerAuthenticator"

enum { SASL_INITIAL = 0, SASL_AUTHENTICATE = 1, SASL_COMPLETE = 2 };

bool gr_sasl_gate(struct gr_api_req *r) {
    struct gr_net_session *s = r->net->session;
    r->principal = s && s->principal ? s->principal : "User:ANONYMOUS";
    if (!s || !s->sasl || s->authenticated) return true;
    int16_t key = r->hdr.RequestApiKey;
    bool ok = (key == GR_API_API_VERSIONS && s->state == SASL_INITIAL) ||
              (key == GR_API_SASL_HANDSHAKE && s->state == SASL_INITIAL) ||
              (key == GR_API_SASL_AUTHENTICATE && s->state == SASL_AUTHENTICATE && !s->raw_tokens);
    if (ok) return true;
    char why[160];
    const struct gr_api_desc *d = gr_proto_api(key);
    snprintf(why, sizeof why, "Unexpected Kafka request of type %s during SASL handshake.", d ? d->name : "unknown");
    gr_api_close(r, why);
    return false;
}

static int scram_lookup(void *ctx, enum gr_scram_mech m, const char *user, struct gr_scram_cred *cred) {
    struct gr_broker *b = ctx; /* the cache only: no ZooKeeper read before authentication */
    return gr_dcm_scram_credential(b->dynamic_config, m, user, cred);
}

static void authenticated(struct gr_net_session *s, const char *user) {
    free(s->principal);
    s->principal = gr_asprintf("User:%s", user);
    s->state = SASL_COMPLETE;
    s->authenticated = 1;
    s->raw_tokens = 0;
    if (s->mech_state && s->mech_free) s->mech_free(s->mech_state);
    s->mech_state = NULL;
}

static void failed(struct gr_broker *b, struct gr_net_session *s, const char *peer, const char *why) {
    gr_info(LOGGER, "Failed authentication with %s (Authentication failed during authentication due to invalid "
            "credentials with SASL mechanism %s: %s)", peer, s->mechanism, why);
    int32_t delay = b->cfg ? b->cfg->connection_failed_authentication_delay_ms : 100;
    s->close_after_ms = delay > 0 ? delay : 1;
}

/* One token through the session's mechanism. 0 (with a response, possibly empty) or an error
 * after which the connection goes. */
static int sasl_step(struct gr_broker *b, struct gr_net_session *s, const char *listener, const uint8_t *tok,
                     size_t n, uint8_t **out, size_t *out_len, const char **why) {
    *out = NULL;
    *out_len = 0;
    if (strcmp(s->mechanism, "PLAIN") == 0) {
        char user[256];
        const char *jaas = b->cfg ? gr_sasl_jaas_config(b->cfg, listener, "PLAIN") : NULL;
        int rc = gr_sasl_plain_check(jaas, tok, n, user, sizeof user, why);
        if (rc == 0) authenticated(s, user);
        return rc;
    }
    struct gr_scram_server *ss = s->mech_state;
    if (!ss) return *why = "no SASL mechanism", -EINVAL;
    int rc = gr_scram_server_step(ss, tok, n, scram_lookup, b, out, out_len, why);
    if (rc == 0 && gr_scram_server_done(ss)) {
        char user[256];
        snprintf(user, sizeof user, "%s", gr_scram_server_user(ss));
        authenticated(s, user);
    }
    return rc;
}

static char **mechanism_list(struct gr_api_req *req, const char *list, int32_t *count) {
    int n = 0;
    char **out = gr_api_alloc(req, sizeof(char *) * 16);
    for (const char *p = list; *p && n < 16;) {
        while (*p == ',' || *p == ' ') p++;
        size_t l = strcspn(p, ", ");
        if (!l) break;
        char *m = gr_api_alloc(req, l + 1);
        memcpy(m, p, l);
        out[n++] = m;
        p += l;
    }
    *count = n;
    return out;
}

void gr_handle_sasl_handshake(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                              void *body) {
    const struct SaslHandshakeRequest *rq = body;
    struct SaslHandshakeResponse *resp = gr_api_new_response(req);
    struct gr_net_session *s = req->net->session;
    const char *list = gr_sasl_enabled_mechanisms(b->cfg, req->listener);
    resp->Mechanisms = mechanism_list(req, list, &resp->MechanismsCount);
    if (!s->sasl || s->state != SASL_INITIAL) { /* a PLAINTEXT/SSL listener, or authenticated already */
        resp->ErrorCode = GR_KERR_ILLEGAL_SASL_STATE; /* as KafkaApis: no mechanism list */
        resp->MechanismsCount = 0;
        gr_api_respond(req, resp);
        return;
    }
    const char *mech = rq->Mechanism ? rq->Mechanism : "";
    if (!gr_sasl_mechanism_enabled(b->cfg, req->listener, mech) || strlen(mech) >= sizeof s->mechanism) {
        gr_info(LOGGER, "Unsupported SASL mechanism %.64s from %s on listener %s (enabled: %s)", mech, req->peer,
                req->listener, list);
        resp->ErrorCode = GR_KERR_UNSUPPORTED_SASL_MECHANISM;
        s->close_after_ms = 1;
        gr_api_respond(req, resp);
        return;
    }
    snprintf(s->mechanism, sizeof s->mechanism, "%s", mech);
    enum gr_scram_mech sm = gr_scram_mech_parse(mech);
    if (sm != GR_SCRAM_NONE) {
        s->mech_state = gr_scram_server_new(sm);
        s->mech_free = gr_scram_server_free;
    }
    s->state = SASL_AUTHENTICATE;
    s->raw_tokens = hdr->RequestApiVersion == 0;
    resp->ErrorCode = GR_KERR_NONE;
    gr_api_respond(req, resp);
}

void gr_handle_sasl_authenticate(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                 void *body) {
    (void)hdr;
    const struct SaslAuthenticateRequest *rq = body;
    struct SaslAuthenticateResponse *resp = gr_api_new_response(req);
    struct gr_net_session *s = req->net->session;
    if (!s->sasl || s->state != SASL_AUTHENTICATE) {
        resp->ErrorCode = GR_KERR_ILLEGAL_SASL_STATE;
        resp->ErrorMessage = gr_api_strdup(req, s->sasl ? "SaslAuthenticate request received after successful authentication"
                                                         : "Unexpected SaslAuthenticate request on a listener without SASL");
        gr_api_respond(req, resp);
        return;
    }
    uint8_t *out = NULL;
    size_t out_len = 0;
    const char *why = "";
    int rc = sasl_step(b, s, req->listener, rq->AuthBytes.p, (size_t)GR_MAX(0, rq->AuthBytes.len), &out,
                       &out_len, &why);
    if (rc) {
        failed(b, s, req->peer, why);
        resp->ErrorCode = GR_KERR_SASL_AUTHENTICATION_FAILED;
        char *msg = gr_asprintf("Authentication failed during authentication due to invalid credentials with SASL "
                                "mechanism %s", s->mechanism);
        resp->ErrorMessage = gr_api_strdup(req, msg);
        free(msg);
    } else {
        resp->ErrorCode = GR_KERR_NONE;
        if (out_len) {
            uint8_t *copy = gr_api_alloc(req, out_len);
            memcpy(copy, out, out_len);
            resp->AuthBytes.p = copy;
        }
        resp->AuthBytes.len = (int32_t)out_len;
        if (s->authenticated)
            gr_debug(LOGGER, "%s authenticated as %s with %s on listener %s", req->peer, s->principal, s->mechanism,
                     req->listener);
    }
    free(out);
    gr_api_respond(req, resp);
}

void gr_sasl_raw_token(struct gr_broker *b, struct gr_net_request *nreq) {
    struct gr_net_session *s = nreq->session;
    uint8_t *out = NULL;
    size_t out_len = 0;
    const char *why = "";
    int rc = sasl_step(b, s, nreq->listener, nreq->data, nreq->len, &out, &out_len, &why);
    if (rc) {
        failed(b, s, nreq->peer, why);
        free(out);
        gr_net_respond_none(nreq); /* v0 has no error response: the connection just closes */
        return;
    }
    uint8_t *frame = gr_malloc(out_len + 4);
    frame[0] = (uint8_t)(out_len >> 24);
    frame[1] = (uint8_t)(out_len >> 16);
    frame[2] = (uint8_t)(out_len >> 8);
    frame[3] = (uint8_t)out_len;
    if (out_len) memcpy(frame + 4, out, out_len);
    free(out);
    gr_net_respond_take(nreq, frame, out_len + 4);
}
