/* DescribeTransactions (api key 65), version 0 (KIP-664, Kafka 3.0), as Kafka 3.9's
 * KafkaApis.handleDescribeTransactionsRequest + TransactionCoordinator.handleDescribeTransactions:
 * per transactional id, TRANSACTIONAL_ID_AUTHORIZATION_FAILED without TransactionalId DESCRIBE,
 * else the coordinator's view (coordinator/txn_coordinator.h gr_txn_describe: NOT_COORDINATOR,
 * COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST for "",
 * TRANSACTIONAL_ID_NOT_FOUND); the topics listed are only those the principal may DESCRIBE.
 * Fields of an errored id keep Kafka's defaults (empty state, zeros), as Kafka answers them.
 * The answer repeats a transaction's partitions for every time its id is named: a request naming
 * the id of a transaction over many partitions a million times would make an answer thousands of
 * times its size (the broker's memory), so past GR_DESCRIBE_TRANSACTIONS_MAX_ENTRIES ids plus
 * partitions the connection is closed instead, as DescribeProducers does (Kafka has no bound). */
#include <stdlib.h>
#include <string.h>

#include "api/apis.h"
#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "common/kerr.h"
#include "common/util.h"
#include "coordinator/txn_coordinator.h"
#include "coordinator/txn_log.h"

#define GR_DESCRIBE_TRANSACTIONS_MAX_ENTRIES (1 << 20)

static void fill_topics(struct gr_api_req *req, const struct gr_txn_description *d,
                        struct DescribeTransactionsResponse_TransactionState *s) {
    s->Topics = gr_api_alloc(req, (size_t)(d->n_parts + 1) * sizeof *s->Topics);
    s->TopicsCount = 0;
    for (int i = 0; i < d->n_parts; i++) {
        const char *topic = d->parts[i].topic;
        struct DescribeTransactionsResponse_TopicData *td = NULL;
        for (int k = 0; k < s->TopicsCount && !td; k++)
            if (strcmp(s->Topics[k].Topic, topic) == 0) td = &s->Topics[k];
        if (!td) {
            if (!gr_api_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, topic)) continue;
            td = &s->Topics[s->TopicsCount++];
            td->Topic = gr_api_strdup(req, topic);
            td->Partitions = gr_api_alloc(req, (size_t)(d->n_parts + 1) * sizeof *td->Partitions);
            td->PartitionsCount = 0;
        }
        td->Partitions[td->PartitionsCount++] = d->parts[i].partition;
    }
}

void gr_handle_describe_transactions(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                     void *body) {
    (void)hdr;
    const struct DescribeTransactionsRequest *r = body;
    struct DescribeTransactionsResponse *resp = gr_api_new_response(req);
    int n = GR_MAX(r->TransactionalIdsCount, 0);
    int64_t entries = n;
    resp->ThrottleTimeMs = 0;
    resp->TransactionStatesCount = n;
    if (n > GR_DESCRIBE_TRANSACTIONS_MAX_ENTRIES) goto too_large;
    resp->TransactionStates = gr_api_alloc(req, (size_t)(n + 1) * sizeof *resp->TransactionStates);
    for (int i = 0; i < n; i++) {
        const char *id = r->TransactionalIds[i] ? r->TransactionalIds[i] : "";
        struct DescribeTransactionsResponse_TransactionState *s = &resp->TransactionStates[i];
        s->TransactionalId = (char *)id;
        s->TransactionState = "";
        s->Topics = NULL;
        s->TopicsCount = 0;
        if (!gr_api_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TRANSACTIONAL_ID, id)) {
            s->ErrorCode = GR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
            continue;
        }
        struct gr_txn_description d;
        s->ErrorCode = gr_txn_describe(b->txn_coordinator, id, &d);
        if (s->ErrorCode == GR_KERR_NONE && (entries += d.n_parts) > GR_DESCRIBE_TRANSACTIONS_MAX_ENTRIES) {
            gr_txn_description_release(&d);
            goto too_large;
        }
        if (s->ErrorCode == GR_KERR_NONE) {
            s->TransactionState = (char *)d.state;
            s->TransactionTimeoutMs = d.timeout_ms;
            s->TransactionStartTimeMs = d.start_ts;
            s->ProducerId = d.producer_id;
            s->ProducerEpoch = d.producer_epoch;
            fill_topics(req, &d, s);
        }
        gr_txn_description_release(&d);
    }
    gr_api_respond(req, resp);
    return;
too_large:
    gr_api_close(req, "DescribeTransactions: the answer would hold over 2^20 transactional ids and partitions");
}
