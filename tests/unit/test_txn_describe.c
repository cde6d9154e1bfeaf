/* KIP-664's coordinator views (coordinator/txn_describe.c: Kafka 3.9's handleDescribeTransactions
 * and listTransactionStates) over a coordinator table built by hand, for the states the wire
 * tests cannot hold still: a __transaction_state partition still loading
 * (COORDINATOR_LOAD_IN_PROGRESS for the list and for its ids), one not owned (NOT_COORDINATOR,
 * and its ids never listed), no coordinator or one stopping (COORDINATOR_NOT_AVAILABLE), Dead
 * ids (never listed, TRANSACTIONAL_ID_NOT_FOUND), and every filter (states, producer ids,
 * duration, start time -1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "common/kerr.h"
#include "common/util.h"
#include "coordinator/txn_internal.h"
#include "support/check.h"

int test_failures;

#define NPARTS 3

/* An id of partition p (of NPARTS) named prefix-N. */
static const char *id_on(int32_t p, const char *prefix, char *buf, size_t len) {
    for (int i = 0;; i++) {
        snprintf(buf, len, "%s-%d", prefix, i);
        if (gr_txn_partition_for(buf, NPARTS) == p) return buf;
    }
}

static struct gr_txn_coordinator *coordinator(struct gr_broker *b) {
    struct gr_txn_coordinator *tc = gr_calloc(1, sizeof *tc);
    tc->b = b;
    tc->cfg.num_partitions = NPARTS;
    pthread_mutex_init(&tc->mu, NULL);
    tc->nparts = NPARTS;
    tc->parts = gr_calloc(NPARTS, sizeof *tc->parts);
    return tc;
}

static struct txn_meta *add(struct gr_txn_coordinator *tc, const char *id, int64_t pid, int state, int64_t start) {
    struct txn_meta *m = txn_meta_new_locked(tc, id, gr_txn_partition_for(id, NPARTS));
    m->pid = pid;
    m->epoch = 3;
    m->state = state;
    m->start_ts = start;
    m->timeout_ms = 60000;
    return m;
}

static int listed(struct gr_txn_coordinator *tc, const struct gr_txn_list_filter *f, int16_t *err, char *ids,
                  size_t len) {
    struct gr_txn_listing *l;
    int n;
    *err = gr_txn_list(tc, f, &l, &n);
    ids[0] = 0;
    /* sorted by id for a stable comparison */
    for (int i = 0; i < n; i++)
        for (int k = i + 1; k < n; k++)
            if (strcmp(l[k].transactional_id, l[i].transactional_id) < 0) {
                struct gr_txn_listing t = l[i];
                l[i] = l[k];
                l[k] = t;
            }
    for (int i = 0; i < n; i++) {
        size_t u = strlen(ids);
        snprintf(ids + u, len - u, "%s%s:%s", i ? "," : "", l[i].transactional_id, l[i].state);
    }
    gr_txn_listings_free(l, n);
    return n;
}

static void test_list_and_describe(void) {
    struct gr_broker b;
    memset(&b, 0, sizeof b);
    b.metadata = gr_mdc_new(1);
    struct gr_txn_coordinator *tc = coordinator(&b);
    char a[64], o[64], d[64], c[64], e[64], x[64];
    id_on(0, "a", a, sizeof a); /* partition 0: owned */
    id_on(0, "o", o, sizeof o);
    id_on(0, "d", d, sizeof d);
    id_on(0, "c", c, sizeof c);
    id_on(0, "e", e, sizeof e);
    id_on(1, "x", x, sizeof x); /* partition 1: loading, then not owned */
    int64_t now = gr_wall_ms();
    struct txn_meta *ma = add(tc, a, 1000, GR_TXN_ONGOING, now - 120000);
    add(tc, o, 1001, GR_TXN_ONGOING, now - 1000);
    add(tc, d, 1002, GR_TXN_DEAD, now - 500000);
    add(tc, c, 1003, GR_TXN_COMPLETE_COMMIT, now - 5000);
    add(tc, e, 1004, GR_TXN_EMPTY, -1);
    add(tc, x, 1005, GR_TXN_ONGOING, now - 500000);
    ma->n_parts = ma->cap_parts = 2;
    ma->parts = gr_calloc(2, sizeof *ma->parts);
    ma->parts[0] = (struct gr_txn_tp){gr_strdup("t"), 0};
    ma->parts[1] = (struct gr_txn_tp){gr_strdup("u"), 4};
    tc->parts[0].state = P_OWNED;
    tc->parts[1].state = P_LOADING;

    char ids[512], want[512];
    int16_t err;
    struct gr_txn_list_filter all = {.duration_ms = -1};
    CHECK(listed(tc, &all, &err, ids, sizeof ids) == 0);
    CHECK(err == GR_KERR_COORDINATOR_LOAD_IN_PROGRESS); /* Kafka: any partition loading */
    struct gr_txn_description desc;
    CHECK(gr_txn_describe(tc, x, &desc) == GR_KERR_COORDINATOR_LOAD_IN_PROGRESS);
    gr_txn_description_release(&desc);

    tc->parts[1].state = P_NONE; /* emigrated: its (stale) ids are not this broker's to list */
    CHECK(listed(tc, &all, &err, ids, sizeof ids) == 4 && err == GR_KERR_NONE);
    snprintf(want, sizeof want, "%s:Ongoing,%s:CompleteCommit,%s:Empty,%s:Ongoing", a, c, e, o);
    CHECK(strcmp(ids, want) == 0);
    CHECK(gr_txn_describe(tc, x, &desc) == GR_KERR_NOT_COORDINATOR);
    gr_txn_description_release(&desc);

    /* states: a mask of known ones */
    struct gr_txn_list_filter st = {.filter_states = true, .state_mask = 1u << GR_TXN_ONGOING, .duration_ms = -1};
    CHECK(listed(tc, &st, &err, ids, sizeof ids) == 2);
    st.state_mask = 0; /* only unknown names were given: nothing matches */
    CHECK(listed(tc, &st, &err, ids, sizeof ids) == 0 && err == GR_KERR_NONE);
    st.state_mask = 1u << GR_TXN_DEAD; /* Dead is never listed */
    CHECK(listed(tc, &st, &err, ids, sizeof ids) == 0);
    /* producer ids */
    int64_t pids[] = {1003, 1005, 77};
    struct gr_txn_list_filter pf = {.producer_ids = pids, .n_producer_ids = 3, .duration_ms = -1};
    CHECK(listed(tc, &pf, &err, ids, sizeof ids) == 1);
    snprintf(want, sizeof want, "%s:CompleteCommit", c);
    CHECK(strcmp(ids, want) == 0);
    /* duration: older than 60 s -> a, and e (start -1, as Kafka) */
    struct gr_txn_list_filter df = {.duration_ms = 60000};
    CHECK(listed(tc, &df, &err, ids, sizeof ids) == 2);
    snprintf(want, sizeof want, "%s:Ongoing,%s:Empty", a, e);
    CHECK(strcmp(ids, want) == 0);

    /* describe */
    CHECK(gr_txn_describe(tc, a, &desc) == GR_KERR_NONE);
    CHECK(strcmp(desc.state, "Ongoing") == 0 && desc.producer_id == 1000 && desc.producer_epoch == 3);
    CHECK(desc.timeout_ms == 60000 && desc.start_ts == now - 120000 && desc.n_parts == 2);
    CHECK(strcmp(desc.parts[1].topic, "u") == 0 && desc.parts[1].partition == 4);
    gr_txn_description_release(&desc);
    CHECK(desc.parts == NULL);
    CHECK(gr_txn_describe(tc, d, &desc) == GR_KERR_TRANSACTIONAL_ID_NOT_FOUND);
    gr_txn_description_release(&desc);
    char un[64];
    id_on(0, "unknown", un, sizeof un);
    CHECK(gr_txn_describe(tc, un, &desc) == GR_KERR_TRANSACTIONAL_ID_NOT_FOUND);
    CHECK(desc.producer_id == -1 && desc.n_parts == 0);
    gr_txn_description_release(&desc);
    CHECK(gr_txn_describe(tc, "", &desc) == GR_KERR_INVALID_REQUEST);
    gr_txn_description_release(&desc);

    /* no coordinator, or one shutting down */
    CHECK(gr_txn_describe(NULL, a, &desc) == GR_KERR_COORDINATOR_NOT_AVAILABLE);
    struct gr_txn_listing *l;
    int n;
    CHECK(gr_txn_list(NULL, &all, &l, &n) == GR_KERR_COORDINATOR_NOT_AVAILABLE && n == 0 && !l);
    tc->stopping = true;
    CHECK(gr_txn_describe(tc, a, &desc) == GR_KERR_COORDINATOR_NOT_AVAILABLE);
    CHECK(gr_txn_list(tc, &all, &l, &n) == GR_KERR_COORDINATOR_NOT_AVAILABLE && n == 0);
    gr_txn_listings_free(l, n);

    for (int i = 0; i < NB; i++)
        while (tc->buckets[i]) txn_meta_remove_locked(tc, tc->buckets[i]);
    free(tc->parts);
    pthread_mutex_destroy(&tc->mu);
    free(tc);
    gr_mdc_free(b.metadata);
}

int main(void) {
    test_list_and_describe();
    if (test_failures) fprintf(stderr, "%d failure(s)\n", test_failures);
    return test_failures ? 1 : 0;
}
