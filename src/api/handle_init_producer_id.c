/* InitProducerId (api key 22) v0-4, for idempotent producers (Kafka 2.7 KafkaApis
 * handleInitProducerIdRequest + TransactionCoordinator.handleInitProducerId):
 *   - ProducerId/ProducerEpoch (v3+): exactly one of them -1 -> INVALID_REQUEST (42);
 *   - TransactionalId null: any broker answers with a new producer id from the block it owns in
 *     ZooKeeper (coordinator/producer_id_manager.h) and epoch 0 (the supplied pid/epoch are
 *     ignored, as Kafka does);
 *   - TransactionalId "": INVALID_REQUEST, as Kafka;
 *   - any other TransactionalId: the transaction coordinator (api/handle_txn.c,
 *     coordinator/txn_coordinator.h): epoch bump, fencing, a new pid when the epoch is exhausted.
 * A ZooKeeper failure while claiming a new block answers COORDINATOR_NOT_AVAILABLE too (Kafka
 * would fail the request with an internal error); the client retries.
 * No authorizer: IDEMPOTENT_WRITE is always granted (Gregor has no ACLs). */
#include <inttypes.h>

#include "api/apis.h"
#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "common/kerr.h"
#include "common/log.h"
#include "coordinator/producer_id_manager.h"

#define LOGGER "kafka.server.KafkaApis"

void gr_handle_init_producer_id(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                void *body) {
    const struct InitProducerIdRequest *r = body;
    struct InitProducerIdResponse *resp = gr_api_new_response(req);
    resp->ThrottleTimeMs = 0;
    resp->ProducerId = -1;
    resp->ProducerEpoch = -1;
    resp->ErrorCode = GR_KERR_NONE;
    bool pid_set = r->ProducerId != -1, epoch_set = r->ProducerEpoch != -1;
    struct gr_pidm *m = b->producer_id_manager;
    if (r->TransactionalId && !gr_api_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TRANSACTIONAL_ID, r->TransactionalId)) {
        resp->ErrorCode = GR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    } else if (!r->TransactionalId && !gr_api_authorized_cluster(req, GR_ACL_OP_IDEMPOTENT_WRITE)) {
        resp->ErrorCode = GR_KERR_CLUSTER_AUTHORIZATION_FAILED;
    } else if (hdr->RequestApiVersion >= 3 && pid_set != epoch_set) {
        resp->ErrorCode = GR_KERR_INVALID_REQUEST;
    } else if (r->TransactionalId && !r->TransactionalId[0]) {
        resp->ErrorCode = GR_KERR_INVALID_REQUEST;
    } else if (r->TransactionalId) {
        gr_txn_handle_init_producer_id(b, req, r);
        return;
    } else if (!m) {
        resp->ErrorCode = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    } else {
        int64_t pid;
        int rc = gr_pidm_generate(m, &pid);
        if (rc == 0) {
            resp->ProducerId = pid;
            resp->ProducerEpoch = 0;
        } else {
            gr_warn(LOGGER, "InitProducerId: cannot claim a producer id block: %d", rc);
            resp->ErrorCode = GR_KERR_COORDINATOR_NOT_AVAILABLE;
        }
    }
    gr_api_respond(req, resp);
}
