/* ListTransactions (api key 66), versions 0-1 (KIP-664, Kafka 3.0; v1 adds DurationFilter,
 * KIP-994, Kafka 3.8), as Kafka 3.9's KafkaApis.handleListTransactionsRequest +
 * TransactionStateManager.listTransactionStates: the ids of the __transaction_state partitions
 * this broker coordinates, filtered by state names (names Kafka does not know are echoed in
 * UnknownStateFilters and match nothing), producer ids and duration (v1: only transactions
 * started more than DurationFilter ms ago; < 0 = all; as Kafka, an id whose start time is -1 --
 * Empty since InitProducerId -- passes any duration), and then by TransactionalId DESCRIBE (ids
 * the principal may not describe are left out, no error). COORDINATOR_LOAD_IN_PROGRESS while a
 * partition is loading, COORDINATOR_NOT_AVAILABLE without a coordinator. */
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

/* Kafka's TransactionState.fromName: -1 for a name it does not know. */
static int state_from_name(const char *name) {
    for (int s = GR_TXN_EMPTY; s <= GR_TXN_PREPARE_EPOCH_FENCE; s++)
        if (name && strcmp(gr_txn_state_name(s), name) == 0) return s;
    return -1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void gr_handle_list_transactions(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                 void *body) {
    const struct ListTransactionsRequest *r = body;
    struct ListTransactionsResponse *resp = gr_api_new_response(req);
    int nsf = GR_MAX(r->StateFiltersCount, 0);
    struct gr_txn_list_filter f = {
        .producer_ids = r->ProducerIdFilters,
        .n_producer_ids = GR_MAX(r->ProducerIdFiltersCount, 0),
        .filter_states = nsf > 0,
        .duration_ms = hdr->RequestApiVersion >= 1 ? r->DurationFilter : -1,
    };
    for (int i = 0; i < nsf; i++) {
        int st = state_from_name(r->StateFilters[i]);
        if (st >= 0) f.state_mask |= 1u << st;
    }
    resp->ThrottleTimeMs = 0;
    resp->UnknownStateFilters = gr_api_alloc(req, (size_t)(nsf + 1) * sizeof *resp->UnknownStateFilters);
    resp->UnknownStateFiltersCount = 0;
    resp->TransactionStatesCount = 0;
    resp->TransactionStates = NULL;
    struct gr_txn_listing *l = NULL;
    int n = 0;
    resp->ErrorCode = gr_txn_list(b->txn_coordinator, &f, &l, &n);
    /* Kafka fills UnknownStateFilters only when it gets as far as listing, each name once (a set:
     * sorted here, so a request of millions of names costs n log n) */
    if (resp->ErrorCode == GR_KERR_NONE) {
        for (int i = 0; i < nsf; i++)
            if (state_from_name(r->StateFilters[i]) < 0)
                resp->UnknownStateFilters[resp->UnknownStateFiltersCount++] = r->StateFilters[i] ? r->StateFilters[i] : "";
        qsort(resp->UnknownStateFilters, (size_t)resp->UnknownStateFiltersCount, sizeof(char *), cmp_str);
        int k = 0;
        for (int i = 0; i < resp->UnknownStateFiltersCount; i++)
            if (k == 0 || strcmp(resp->UnknownStateFilters[k - 1], resp->UnknownStateFilters[i]) != 0)
                resp->UnknownStateFilters[k++] = resp->UnknownStateFilters[i];
        resp->UnknownStateFiltersCount = k;
    }
    resp->TransactionStates = gr_api_alloc(req, (size_t)(n + 1) * sizeof *resp->TransactionStates);
    for (int i = 0; i < n; i++) {
        if (!gr_api_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TRANSACTIONAL_ID, l[i].transactional_id))
            continue;
        struct ListTransactionsResponse_TransactionState *s = &resp->TransactionStates[resp->TransactionStatesCount++];
        s->TransactionalId = gr_api_strdup(req, l[i].transactional_id);
        s->ProducerId = l[i].producer_id;
        s->TransactionState = (char *)l[i].state;
    }
    gr_txn_listings_free(l, n);
    gr_api_respond(req, resp);
}
