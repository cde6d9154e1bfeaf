/* Authorization of requests (the authorize calls of Kafka 2.7's KafkaApis), one line per check
 * in the handlers:
 *
 *     if (!gr_api_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TOPIC, topic)) -> error 29
 *
 * Without an authorizer (authorizer.class.name unset: b->authorizer NULL) everything is allowed.
 * The principal is req->principal ("User:ANONYMOUS" on PLAINTEXT listeners), or, with the
 * TEST-ONLY key gregor.test.principal.by.client.id=true, the request's client.id when it has the
 * form "User:<name>". The host is the client's IP address. Any thread. */
#ifndef GR_API_AUTHORIZE_H
#define GR_API_AUTHORIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "api/apis.h"
#include "security/acl.h"

/* Is the operation on the resource allowed? Denials are logged (audit log, INFO). */
bool gr_api_authorized(struct gr_api_req *req, int op, int resource_type, const char *name);
/* The same without logging denials (filtering: Metadata of all topics, ListGroups). */
bool gr_api_authorized_quiet(struct gr_api_req *req, int op, int resource_type, const char *name);
/* Shorthand for the cluster resource ("kafka-cluster"). */
bool gr_api_authorized_cluster(struct gr_api_req *req, int op);
/* KIP-430: the bit field (1 << operation code) of the operations the resource type supports
 * that the principal may perform on the LITERAL resource; without an authorizer every supported
 * operation (Kafka's KafkaApis.authorizedOperations). */
int32_t gr_api_authorized_operations(struct gr_api_req *req, int resource_type, const char *name);
/* Is an authorizer configured? */
bool gr_api_authorizer_enabled(const struct gr_api_req *req);
/* The principal the checks use (see above). */
const char *gr_api_principal(const struct gr_api_req *req);

#endif
