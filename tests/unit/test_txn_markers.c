/* The transaction-marker bookkeeping (coordinator/txn_marker_queue.h, Kafka's
 * TransactionMarkerChannelManager queues and completion handler without I/O): per-broker and
 * unknown-leader queues, markers of many transactions batched into one WriteTxnMarkers request,
 * per-partition outcomes (a failed partition is retried alone, the transaction completes only when
 * every marker is written), cancelling (fencing, a newer Prepare* of the id), emigration of a
 * __transaction_state partition, delays, the Complete* retry queue, and hostile answers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "coordinator/txn_marker_queue.h"
#include "protocol/arena.h"
#include "protocol/messages.h"
#include "support/check.h"

int test_failures;

static int count(const struct gr_txn_marker *l) {
    int n = 0;
    for (; l; l = l->next) n++;
    return n;
}

/* Routes every marker of the unknown queue to broker `dest`. */
static void route_all(struct gr_txn_markers *mk, int32_t dest) {
    struct gr_txn_marker *l = gr_txn_markers_take(mk, &mk->unknown, 0, 1 << 30, NULL);
    struct gr_txn_marker_queue *q = gr_txn_markers_queue(mk, dest, true);
    for (struct gr_txn_marker *m = l, *next; m; m = next) {
        next = m->next;
        gr_txn_markers_put(mk, q, m, 0);
    }
}

/* A response answering every marker of list with err, except (topic, partition) with err2. */
static struct WriteTxnMarkersResponse *answer(const struct WriteTxnMarkersRequest *req, struct gr_arena *a, int16_t err,
                                              const char *topic, int32_t partition, int16_t err2) {
    struct WriteTxnMarkersResponse *r = gr_arena_alloc(a, sizeof *r);
    r->MarkersCount = req->MarkersCount;
    r->Markers = gr_arena_alloc(a, (size_t)req->MarkersCount * sizeof *r->Markers);
    for (int m = 0; m < req->MarkersCount; m++) {
        r->Markers[m].ProducerId = req->Markers[m].ProducerId;
        r->Markers[m].TopicsCount = req->Markers[m].TopicsCount;
        r->Markers[m].Topics = gr_arena_alloc(a, (size_t)req->Markers[m].TopicsCount * sizeof *r->Markers[m].Topics);
        for (int t = 0; t < req->Markers[m].TopicsCount; t++) {
            const struct WriteTxnMarkersRequest_WritableTxnMarkerTopic *rt = &req->Markers[m].Topics[t];
            struct WriteTxnMarkersResponse_WritableTxnMarkerTopicResult *tr = &r->Markers[m].Topics[t];
            tr->Name = gr_arena_alloc(a, strlen(rt->Name) + 1); /* the request borrows the markers' names */
            strcpy(tr->Name, rt->Name);
            tr->PartitionsCount = rt->PartitionIndexesCount;
            tr->Partitions = gr_arena_alloc(a, (size_t)rt->PartitionIndexesCount * sizeof *tr->Partitions);
            for (int i = 0; i < rt->PartitionIndexesCount; i++) {
                tr->Partitions[i].PartitionIndex = rt->PartitionIndexes[i];
                tr->Partitions[i].ErrorCode =
                    topic && strcmp(topic, rt->Name) == 0 && partition == rt->PartitionIndexes[i] ? err2 : err;
            }
        }
    }
    return r;
}

static void test_batching_across_transactions(void) {
    struct gr_txn_markers mk;
    gr_txn_markers_init(&mk);
    struct gr_txn_pending *a = gr_txn_markers_add_txn(&mk, "a", 10, 1, true, 3, 7);
    struct gr_txn_pending *b = gr_txn_markers_add_txn(&mk, "b", 20, 2, false, 4, 8);
    gr_txn_markers_add_marker(&mk, a, "t1", 0);
    gr_txn_markers_add_marker(&mk, a, "t2", 1);
    gr_txn_markers_add_marker(&mk, a, "t1", 2);
    gr_txn_markers_add_marker(&mk, b, "t1", 0);
    CHECK(mk.unknown.n == 4 && a->left == 3 && b->left == 1 && mk.n_txns == 2);
    route_all(&mk, 5);
    struct gr_txn_marker_queue *q = gr_txn_markers_queue(&mk, 5, false);
    CHECK(q && q->n == 4 && mk.unknown.n == 0 && gr_txn_markers_queue(&mk, 6, false) == NULL);
    struct gr_txn_marker *l = gr_txn_markers_take(&mk, q, 0, 100, NULL);
    CHECK(count(l) == 4 && q->n == 0);
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct WriteTxnMarkersRequest *req = gr_txn_markers_build_request(l, &ar);
    /* one entry per transaction, partitions grouped per topic */
    CHECK(req && req->MarkersCount == 2);
    CHECK(req->Markers[0].ProducerId == 10 && req->Markers[0].ProducerEpoch == 1 && req->Markers[0].TransactionResult &&
          req->Markers[0].CoordinatorEpoch == 7 && req->Markers[0].TopicsCount == 2);
    CHECK(strcmp(req->Markers[0].Topics[0].Name, "t1") == 0 && req->Markers[0].Topics[0].PartitionIndexesCount == 2 &&
          req->Markers[0].Topics[0].PartitionIndexes[0] == 0 && req->Markers[0].Topics[0].PartitionIndexes[1] == 2);
    CHECK(strcmp(req->Markers[0].Topics[1].Name, "t2") == 0 && req->Markers[0].Topics[1].PartitionIndexes[0] == 1);
    CHECK(req->Markers[1].ProducerId == 20 && !req->Markers[1].TransactionResult && req->Markers[1].CoordinatorEpoch == 8 &&
          req->Markers[1].TopicsCount == 1);
    /* t2-1 of "a" is not enough replicas: retried alone; "b" completes, "a" does not */
    struct WriteTxnMarkersResponse *resp = answer(req, &ar, GR_KERR_NONE, "t2", 1, GR_KERR_NOT_ENOUGH_REPLICAS);
    struct gr_txn_pending *done_a = NULL, *done_b = NULL;
    struct gr_txn_marker *retry = NULL;
    for (struct gr_txn_marker *m = l, *next; m; m = next) {
        next = m->next;
        int16_t e = gr_txn_markers_response_error(resp, m);
        if (gr_txn_marker_outcome_of(e) == GR_TXN_MARKER_RETRY) {
            CHECK(e == GR_KERR_NOT_ENOUGH_REPLICAS && strcmp(m->topic, "t2") == 0);
            m->next = retry;
            retry = m;
            continue;
        }
        CHECK(gr_txn_marker_outcome_of(e) == GR_TXN_MARKER_WRITTEN);
        struct gr_txn_pending *t = gr_txn_markers_written(&mk, m);
        if (t == a) done_a = t;
        if (t == b) done_b = t;
    }
    CHECK(!done_a && done_b == b && a->left == 1 && mk.n_txns == 1 && gr_txn_markers_find(&mk, "b") == NULL);
    gr_txn_pending_unref(done_b);
    /* the retry waits its backoff, then goes alone */
    CHECK(count(retry) == 1);
    int32_t d1 = gr_txn_marker_next_backoff(retry), d2 = gr_txn_marker_next_backoff(retry);
    CHECK(d1 == 50 && d2 == 100);
    for (int i = 0; i < 10; i++) gr_txn_marker_next_backoff(retry);
    CHECK(gr_txn_marker_next_backoff(retry) == 1000);
    gr_txn_markers_put(&mk, q, retry, 1000);
    int64_t due = 0;
    CHECK(gr_txn_markers_take(&mk, q, 999, 100, &due) == NULL && due == 1000 && q->n == 1);
    l = gr_txn_markers_take(&mk, q, 1000, 100, &due);
    CHECK(count(l) == 1 && due == INT64_MAX);
    gr_arena_free(&ar);
    gr_arena_init(&ar);
    req = gr_txn_markers_build_request(l, &ar);
    CHECK(req->MarkersCount == 1 && req->Markers[0].TopicsCount == 1 && req->Markers[0].Topics[0].PartitionIndexesCount == 1);
    resp = answer(req, &ar, GR_KERR_NONE, NULL, 0, 0);
    CHECK(gr_txn_markers_response_error(resp, l) == GR_KERR_NONE);
    CHECK(gr_txn_markers_written(&mk, l) == a && mk.n_txns == 0);
    gr_txn_pending_unref(a);
    gr_arena_free(&ar);
    gr_txn_markers_release(&mk);
}

static void test_take_limit_and_order(void) {
    struct gr_txn_markers mk;
    gr_txn_markers_init(&mk);
    struct gr_txn_pending *t = gr_txn_markers_add_txn(&mk, "many", 1, 0, true, 0, 1);
    char topic[16];
    for (int i = 0; i < 25; i++) {
        snprintf(topic, sizeof topic, "t%d", i % 5);
        gr_txn_markers_add_marker(&mk, t, topic, i);
    }
    route_all(&mk, 1);
    struct gr_txn_marker_queue *q = gr_txn_markers_queue(&mk, 1, false);
    int64_t due;
    struct gr_txn_marker *l = gr_txn_markers_take(&mk, q, 0, 10, &due);
    CHECK(count(l) == 10 && q->n == 15 && due == 0 && l->partition == 0 && l->next->partition == 1);
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct WriteTxnMarkersRequest *req = gr_txn_markers_build_request(l, &ar);
    CHECK(req->MarkersCount == 1 && req->Markers[0].TopicsCount == 5);
    /* an answer in another order is still matched by producer id, topic, partition */
    struct WriteTxnMarkersResponse *resp = answer(req, &ar, GR_KERR_NONE, "t3", 8, GR_KERR_REQUEST_TIMED_OUT);
    struct WriteTxnMarkersResponse_WritableTxnMarkerTopicResult tmp = resp->Markers[0].Topics[0];
    resp->Markers[0].Topics[0] = resp->Markers[0].Topics[4];
    resp->Markers[0].Topics[4] = tmp;
    for (struct gr_txn_marker *m = l; m; m = m->next)
        CHECK(gr_txn_markers_response_error(resp, m) ==
              (m->partition == 8 ? GR_KERR_REQUEST_TIMED_OUT : GR_KERR_NONE));
    /* a partition missing from the answer, a null topic name or no answer at all: retried */
    resp->Markers[0].Topics[1].PartitionsCount = 0;
    resp->Markers[0].Topics[2].Name = NULL;
    int missing = 0;
    for (struct gr_txn_marker *m = l; m; m = m->next)
        missing += gr_txn_markers_response_error(resp, m) == GR_KERR_UNKNOWN_SERVER_ERROR;
    CHECK(missing == 4);
    CHECK(gr_txn_markers_response_error(NULL, l) == GR_KERR_UNKNOWN_SERVER_ERROR);
    CHECK(gr_txn_marker_outcome_of(GR_KERR_UNKNOWN_SERVER_ERROR) == GR_TXN_MARKER_RETRY);
    CHECK(gr_txn_marker_outcome_of(GR_KERR_NOT_LEADER_OR_FOLLOWER) == GR_TXN_MARKER_RETRY);
    CHECK(gr_txn_marker_outcome_of(GR_KERR_UNSUPPORTED_FOR_MESSAGE_FORMAT) == GR_TXN_MARKER_WRITTEN);
    CHECK(gr_txn_marker_outcome_of(GR_KERR_TRANSACTION_COORDINATOR_FENCED) == GR_TXN_MARKER_CANCEL);
    CHECK(gr_txn_marker_outcome_of(GR_KERR_INVALID_PRODUCER_EPOCH) == GR_TXN_MARKER_CANCEL);
    for (struct gr_txn_marker *m = l, *next; m; m = next) {
        next = m->next;
        gr_txn_markers_drop(&mk, m);
    }
    CHECK(t->left == 25 && t->refs == 16); /* the table + the 15 still queued */
    gr_arena_free(&ar);
    gr_txn_markers_release(&mk);
}

static void test_cancel_and_replace(void) {
    struct gr_txn_markers mk;
    gr_txn_markers_init(&mk);
    struct gr_txn_pending *old = gr_txn_markers_add_txn(&mk, "x", 5, 1, true, 2, 3);
    gr_txn_markers_add_marker(&mk, old, "t", 0);
    gr_txn_markers_add_marker(&mk, old, "t", 1);
    route_all(&mk, 2);
    struct gr_txn_marker_queue *q = gr_txn_markers_queue(&mk, 2, false);
    struct gr_txn_marker *inflight = gr_txn_markers_take(&mk, q, 0, 1, NULL);
    CHECK(count(inflight) == 1 && q->n == 1);
    /* the partition is reloaded at a new epoch: the same id's Prepare* again */
    struct gr_txn_pending *cur = gr_txn_markers_add_txn(&mk, "x", 5, 1, true, 2, 4);
    CHECK(old->cancelled && !cur->cancelled && gr_txn_markers_find(&mk, "x") == cur && mk.n_txns == 1);
    gr_txn_markers_add_marker(&mk, cur, "t", 0);
    route_all(&mk, 2);
    /* the old queued marker is dropped when taken; the new one goes */
    struct gr_txn_marker *l = gr_txn_markers_take(&mk, q, 0, 100, NULL);
    CHECK(count(l) == 1 && l->txn == cur && q->n == 0);
    /* the old in-flight marker answered: written, but completes nothing */
    CHECK(gr_txn_markers_written(&mk, inflight) == NULL);
    /* fencing (INVALID_PRODUCER_EPOCH): the transaction is cancelled */
    gr_txn_markers_cancel(&mk, cur);
    CHECK(gr_txn_markers_find(&mk, "x") == NULL && mk.n_txns == 0);
    CHECK(gr_txn_markers_written(&mk, l) == NULL);
    gr_txn_markers_release(&mk);
}

static void test_emigration(void) {
    struct gr_txn_markers mk;
    gr_txn_markers_init(&mk);
    struct gr_txn_pending *p1 = gr_txn_markers_add_txn(&mk, "p1", 1, 0, true, 1, 5);
    struct gr_txn_pending *p2 = gr_txn_markers_add_txn(&mk, "p2", 2, 0, true, 2, 5);
    struct gr_txn_pending *p1b = gr_txn_markers_add_txn(&mk, "p1b", 3, 0, false, 1, 5);
    gr_txn_markers_add_marker(&mk, p1, "t", 0);
    gr_txn_markers_add_marker(&mk, p2, "t", 0);
    route_all(&mk, 7);
    gr_txn_markers_add_marker(&mk, p1, "t", 1); /* leader unknown */
    gr_txn_markers_add_marker(&mk, p2, "t", 1);
    struct gr_txn_pending *retry = gr_txn_markers_add_txn(&mk, "r1", 4, 0, true, 1, 5);
    CHECK(gr_txn_markers_take_if_done(&mk, retry) == retry && mk.n_txns == 3); /* no partitions */
    gr_txn_markers_retry_append(&mk, retry, 100);
    gr_txn_markers_add_marker(&mk, p1b, "u", 0);
    int dropped = gr_txn_markers_remove_log_part(&mk, 1);
    CHECK(dropped == 3);
    CHECK(p2->left == 2 && mk.n_txns == 1 && gr_txn_markers_find(&mk, "p2") == p2 && mk.append_retry == NULL);
    CHECK(gr_txn_markers_queue(&mk, 7, false)->n == 1 && mk.unknown.n == 1);
    int64_t due;
    CHECK(gr_txn_markers_take_appends(&mk, 1000, &due) == NULL && due == INT64_MAX);
    gr_txn_markers_release(&mk);
}

static void test_append_retries(void) {
    struct gr_txn_markers mk;
    gr_txn_markers_init(&mk);
    struct gr_txn_pending *a = gr_txn_markers_add_txn(&mk, "a", 1, 0, true, 0, 1);
    struct gr_txn_pending *b = gr_txn_markers_add_txn(&mk, "b", 2, 0, true, 1, 1);
    CHECK(gr_txn_markers_take_if_done(&mk, a) == a && gr_txn_markers_take_if_done(&mk, b) == b);
    gr_txn_markers_retry_append(&mk, a, 200);
    gr_txn_markers_retry_append(&mk, b, 100);
    int64_t due;
    struct gr_txn_pending *l = gr_txn_markers_take_appends(&mk, 150, &due);
    CHECK(l == b && !l->next && due == 200);
    gr_txn_markers_retry_append(&mk, b, 300); /* failed again */
    l = gr_txn_markers_take_appends(&mk, 1000, &due);
    CHECK(l == a && l->next == b && due == INT64_MAX);
    gr_txn_pending_unref(a);
    gr_txn_pending_unref(b);
    gr_txn_markers_release(&mk);
}

/* When a routed marker is due: at once only as a first attempt to a running sender. A marker whose
 * broker has no sender (its thread could not be started) goes back to the unknown queue and must
 * wait, else the manager thread re-routes it in a hot loop. */
static void test_route_delays(void) {
    struct gr_txn_markers mk;
    gr_txn_markers_init(&mk);
    struct gr_txn_pending *t = gr_txn_markers_add_txn(&mk, "r", 1, 0, true, 0, 1);
    gr_txn_markers_add_marker(&mk, t, "x", 0);
    struct gr_txn_marker *m = gr_txn_markers_take(&mk, &mk.unknown, 0, 1, NULL);
    CHECK(m != NULL);
    CHECK(gr_txn_marker_route_at(m, 1000, false, true) == 1000);  /* leader known, sender running */
    CHECK(gr_txn_marker_route_at(m, 1000, false, false) == 1050); /* no sender: its backoff */
    CHECK(gr_txn_marker_route_at(m, 1000, false, false) == 1100); /* growing */
    CHECK(gr_txn_marker_route_at(m, 1000, true, true) == 1200);   /* a retry waits even with a sender */
    gr_txn_markers_drop(&mk, m);
    gr_txn_markers_release(&mk);
}

int main(void) {
    test_route_delays();
    test_batching_across_transactions();
    test_take_limit_and_order();
    test_cancel_and_replace();
    test_emigration();
    test_append_retries();
    if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures);
    return test_failures != 0;
}
