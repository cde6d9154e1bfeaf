/* SASL on the broker's connections (Kafka's SaslServerAuthenticator, reduced to PLAIN and SCRAM):
 * SaslHandshake (17) v0-1, SaslAuthenticate (36) v0-2, the raw tokens that follow a v0 handshake,
 * and the gate that keeps every other API away from a SASL listener's connection until it has
 * authenticated.
 *
 * Session states (struct gr_net_session.state, lent to the request by the network layer, so the
 * handler owning the request is the only one touching it):
 *   INITIAL --ApiVersions--> INITIAL --SaslHandshake--> AUTHENTICATE --tokens--> COMPLETE
 * Any other request before COMPLETE closes the connection (Kafka's IllegalSaslStateException).
 * An unknown or disabled mechanism answers UNSUPPORTED_SASL_MECHANISM with the enabled list and
 * closes. A failed authentication answers SASL_AUTHENTICATION_FAILED (v1 handshake) or nothing
 * (v0) and closes the connection after connection.failed.authentication.delay.ms.
 * On success the session's principal is "User:<name>". */
#ifndef GR_API_HANDLE_SASL_H
#define GR_API_HANDLE_SASL_H

#include <stdbool.h>

#include "api/apis.h"

/* Called by dispatch for every decoded request: sets req->principal, and returns false after
 * closing the request when the connection may not send it yet. */
bool gr_sasl_gate(struct gr_api_req *req);

void gr_handle_sasl_handshake(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                              void *body);
void gr_handle_sasl_authenticate(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                 void *body);
/* A raw token frame (after SaslHandshake v0); completes nreq. */
void gr_sasl_raw_token(struct gr_broker *b, struct gr_net_request *nreq);

void gr_handle_describe_user_scram_credentials(struct gr_broker *b, struct gr_api_req *req,
                                               const struct gr_req_header *hdr, void *body);
void gr_handle_alter_user_scram_credentials(struct gr_broker *b, struct gr_api_req *req,
                                            const struct gr_req_header *hdr, void *body);

#endif
