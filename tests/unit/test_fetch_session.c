/* Incremental fetch sessions (KIP-227, replication/fetch_session.h): opening a session on a full
 * fetch, widening an incremental request to the session's partitions, answering only what
 * changed, epochs and their errors, forgotten partitions, closing, and the cache's eviction
 * rules (stale sessions, followers' privilege, the 120 s protection of new sessions); sessions by
 * topic id (Fetch v13+, KIP-516). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "replication/fetch_session.h"
#include "replication/fetch_session_handler.h"
#include "support/check.h"

static struct gr_arena A;

/* A request for one topic "t" with partitions ps[0..n) at offsets offs. */
static struct FetchRequest *req(int32_t replica, int32_t sid, int32_t epoch, const int32_t *ps, const int64_t *offs,
                                int n, const int32_t *forget, int nf) {
    struct FetchRequest *r = gr_arena_alloc(&A, sizeof *r);
    memset(r, 0, sizeof *r);
    r->ReplicaId = replica;
    r->SessionId = sid;
    r->SessionEpoch = epoch;
    r->TopicsCount = n ? 1 : 0;
    r->Topics = gr_arena_alloc(&A, sizeof *r->Topics);
    r->Topics[0].Topic = "t";
    r->Topics[0].PartitionsCount = n;
    r->Topics[0].Partitions = gr_arena_alloc(&A, (size_t)(n + 1) * sizeof *r->Topics[0].Partitions);
    for (int i = 0; i < n; i++)
        r->Topics[0].Partitions[i] = (struct FetchRequest_FetchPartition){
            .Partition = ps[i], .CurrentLeaderEpoch = -1, .FetchOffset = offs[i], .LastFetchedEpoch = -1,
            .LogStartOffset = -1, .PartitionMaxBytes = 1000};
    r->ForgottenTopicsDataCount = nf ? 1 : 0;
    r->ForgottenTopicsData = gr_arena_alloc(&A, sizeof *r->ForgottenTopicsData);
    r->ForgottenTopicsData[0].Topic = "t";
    r->ForgottenTopicsData[0].PartitionsCount = nf;
    r->ForgottenTopicsData[0].Partitions = (int32_t *)forget;
    return r;
}

/* A response to r (one topic): hw[i], records of len[i] bytes. */
static struct FetchResponse *resp_for(const struct FetchRequest *r, const int64_t *hw, const int32_t *len) {
    struct FetchResponse *p = gr_arena_alloc(&A, sizeof *p);
    memset(p, 0, sizeof *p);
    p->ResponsesCount = r->TopicsCount;
    p->Responses = gr_arena_alloc(&A, sizeof *p->Responses);
    if (!r->TopicsCount) return p;
    int n = r->Topics[0].PartitionsCount;
    p->Responses[0].Topic = "t";
    p->Responses[0].PartitionsCount = n;
    p->Responses[0].Partitions = gr_arena_alloc(&A, (size_t)(n + 1) * sizeof *p->Responses[0].Partitions);
    for (int i = 0; i < n; i++) {
        struct FetchResponse_PartitionData *x = &p->Responses[0].Partitions[i];
        memset(x, 0, sizeof *x);
        x->PartitionIndex = r->Topics[0].Partitions[i].Partition;
        x->HighWatermark = hw[i];
        x->LogStartOffset = 0;
        x->PreferredReadReplica = -1;
        x->DivergingEpoch.Epoch = x->DivergingEpoch.EndOffset = -1; /* the schema's defaults */
        x->Records.len = len[i];
    }
    return p;
}

static void test_session_lifecycle(void) {
    struct gr_fetch_session_cache *c = gr_fsc_new(10, GR_FSC_EVICTION_MS);
    struct gr_fsc_ctx ctx;
    const int32_t ps[] = {0, 1};
    const int64_t offs[] = {3, 4};
    /* full fetch: a session is opened */
    const struct FetchRequest *r = req(-1, 0, 0, ps, offs, 2, NULL, 0);
    const struct FetchRequest *f = gr_fsc_begin(c, r, 11, 0, &A, &ctx, NULL, NULL);
    CHECK(f == r && ctx.kind == GR_FSC_FULL);
    struct FetchResponse *resp = resp_for(f, (const int64_t[]){10, 10}, (const int32_t[]){5, 0});
    gr_fsc_finish(c, f, &ctx, resp, 0, &A);
    int32_t sid = resp->SessionId;
    CHECK(sid > 0 && resp->ResponsesCount == 1 && resp->Responses[0].PartitionsCount == 2);
    int ns;
    int64_t np;
    gr_fsc_stats(c, &ns, &np);
    CHECK(ns == 1 && np == 2);

    /* incremental, nothing listed: both partitions are read, only the changed one answered */
    f = gr_fsc_begin(c, req(-1, sid, 1, NULL, NULL, 0, NULL, 0), 11, 1, &A, &ctx, NULL, NULL);
    CHECK(f && ctx.kind == GR_FSC_INCREMENTAL && f->TopicsCount == 1 && f->Topics[0].PartitionsCount == 2);
    CHECK(f->Topics[0].Partitions[0].FetchOffset == 3 && f->Topics[0].Partitions[1].FetchOffset == 4);
    resp = resp_for(f, (const int64_t[]){10, 11}, (const int32_t[]){0, 0});
    gr_fsc_finish(c, f, &ctx, resp, 1, &A);
    CHECK(resp->SessionId == sid && resp->ResponsesCount == 1 && resp->Responses[0].PartitionsCount == 1 &&
          resp->Responses[0].Partitions[0].PartitionIndex == 1);
    /* nothing changed at all: an empty answer */
    f = gr_fsc_begin(c, req(-1, sid, 2, NULL, NULL, 0, NULL, 0), 11, 2, &A, &ctx, NULL, NULL);
    resp = resp_for(f, (const int64_t[]){10, 11}, (const int32_t[]){0, 0});
    gr_fsc_finish(c, f, &ctx, resp, 2, &A);
    CHECK(resp->SessionId == sid && resp->ResponsesCount == 0 && resp->ErrorCode == 0);

    /* a replayed epoch and an unknown session are top-level errors */
    f = gr_fsc_begin(c, req(-1, sid, 2, NULL, NULL, 0, NULL, 0), 11, 3, &A, &ctx, NULL, NULL);
    CHECK(!f && ctx.kind == GR_FSC_ERROR);
    CHECK_KERR(ctx.error, GR_KERR_INVALID_FETCH_SESSION_EPOCH);
    resp = resp_for(req(-1, 0, 0, NULL, NULL, 0, NULL, 0), NULL, NULL);
    gr_fsc_finish(c, NULL, &ctx, resp, 3, &A);
    CHECK_KERR(resp->ErrorCode, GR_KERR_INVALID_FETCH_SESSION_EPOCH);
    CHECK(resp->SessionId == 0);
    f = gr_fsc_begin(c, req(-1, sid + 1, 1, NULL, NULL, 0, NULL, 0), 11, 3, &A, &ctx, NULL, NULL);
    CHECK(!f && ctx.error == GR_KERR_FETCH_SESSION_ID_NOT_FOUND);

    /* a listed partition updates its fetch offset; a new one is added (always answered once) */
    f = gr_fsc_begin(c, req(-1, sid, 3, (const int32_t[]){0, 2}, (const int64_t[]){8, 0}, 2, NULL, 0), 11, 4, &A,
                     &ctx, NULL, NULL);
    CHECK(f && f->Topics[0].PartitionsCount == 3);
    int64_t off0 = -1;
    for (int i = 0; i < 3; i++)
        if (f->Topics[0].Partitions[i].Partition == 0) off0 = f->Topics[0].Partitions[i].FetchOffset;
    CHECK(off0 == 8);
    int64_t hw3[3];
    for (int i = 0; i < 3; i++) hw3[i] = f->Topics[0].Partitions[i].Partition == 1 ? 11 : 10;
    resp = resp_for(f, hw3, (const int32_t[]){0, 0, 0});
    gr_fsc_finish(c, f, &ctx, resp, 4, &A);
    CHECK(resp->ResponsesCount == 1 && resp->Responses[0].PartitionsCount == 1 &&
          resp->Responses[0].Partitions[0].PartitionIndex == 2);

    /* forgetting every partition closes the session (answered sessionless) */
    f = gr_fsc_begin(c, req(-1, sid, 4, NULL, NULL, 0, (const int32_t[]){0, 1, 2}, 3), 11, 5, &A, &ctx, NULL, NULL);
    CHECK(f && ctx.kind == GR_FSC_SESSIONLESS);
    gr_fsc_stats(c, &ns, &np);
    CHECK(ns == 0 && np == 0);
    /* v0-6 and epoch -1 are sessionless; a full fetch naming a session closes it */
    f = gr_fsc_begin(c, req(-1, 0, 0, ps, offs, 2, NULL, 0), 6, 6, &A, &ctx, NULL, NULL);
    CHECK(ctx.kind == GR_FSC_SESSIONLESS);
    f = gr_fsc_begin(c, req(-1, 0, 0, ps, offs, 2, NULL, 0), 11, 6, &A, &ctx, NULL, NULL);
    resp = resp_for(f, (const int64_t[]){1, 1}, (const int32_t[]){0, 0});
    gr_fsc_finish(c, f, &ctx, resp, 6, &A);
    CHECK(resp->SessionId > 0);
    f = gr_fsc_begin(c, req(-1, resp->SessionId, -1, ps, offs, 2, NULL, 0), 11, 7, &A, &ctx, NULL, NULL);
    CHECK(ctx.kind == GR_FSC_SESSIONLESS);
    gr_fsc_stats(c, &ns, &np);
    CHECK(ns == 0);
    gr_fsc_free(c);
}

static int32_t open_full(struct gr_fetch_session_cache *c, int32_t replica, int n, int64_t now) {
    static const int32_t ps[] = {0, 1, 2, 3};
    static const int64_t offs[] = {0, 0, 0, 0};
    static const int64_t hw[] = {0, 0, 0, 0};
    static const int32_t len[] = {0, 0, 0, 0};
    struct gr_fsc_ctx ctx;
    const struct FetchRequest *f = gr_fsc_begin(c, req(replica, 0, 0, ps, offs, n, NULL, 0), 11, now, &A, &ctx, NULL, NULL);
    struct FetchResponse *resp = resp_for(f, hw, len);
    gr_fsc_finish(c, f, &ctx, resp, now, &A);
    return resp->SessionId;
}

static void test_eviction(void) {
    struct gr_fetch_session_cache *c = gr_fsc_new(1, GR_FSC_EVICTION_MS);
    int32_t a = open_full(c, -1, 2, 0);
    CHECK(a > 0);
    CHECK(open_full(c, -1, 4, 1000) == 0); /* a consumer cannot evict a young session */
    CHECK(gr_fsc_evictions(c) == 0);
    int32_t f = open_full(c, 2, 1, 2000);  /* a follower evicts a consumer's session at once */
    CHECK(f > 0 && f != a);
    CHECK(gr_fsc_evictions(c) == 1); /* IncrementalFetchSessionEvictionsPerSec */
    CHECK(open_full(c, 3, 4, 3000) == 0); /* but not a young follower session */
    CHECK(gr_fsc_evictions(c) == 1);
    /* an old session may be evicted by a more valuable newcomer */
    int32_t g = open_full(c, 3, 4, 2000 + GR_FSC_EVICTION_MS + 1);
    CHECK(g > 0);
    CHECK(open_full(c, 3, 2, 2000 + 2 * GR_FSC_EVICTION_MS + 2) > 0); /* stale (unused for 120 s): evicted */
    CHECK(gr_fsc_evictions(c) == 2); /* g evicted f (stale); replica 3 then closed its own g: no eviction */
    struct gr_fetch_session_cache *none = gr_fsc_new(0, GR_FSC_EVICTION_MS);
    CHECK(open_full(none, -1, 2, 0) == 0); /* max.incremental.fetch.session.cache.slots=0 */
    gr_fsc_free(none);
    gr_fsc_free(c);
}

/* The fetching side (fetch_session_handler.h) against the cache: full, then incremental with
 * only changed partitions, forgotten ones, and recovery from an unknown session. */
static void test_handler_against_cache(void) {
    struct gr_fetch_session_cache *c = gr_fsc_new(10, GR_FSC_EVICTION_MS);
    struct gr_fetch_session_handler h;
    gr_fsh_init(&h);
    struct gr_fsc_ctx ctx;
    const int32_t ps[] = {0, 1, 2};
    /* full */
    struct FetchRequest *r = req(7, 0, -1, ps, (const int64_t[]){5, 5, 5}, 3, NULL, 0);
    gr_fsh_build(&h, r, &A, false);
    CHECK(r->SessionEpoch == 0 && r->TopicsCount == 1 && r->Topics[0].PartitionsCount == 3);
    const struct FetchRequest *f = gr_fsc_begin(c, r, 11, 0, &A, &ctx, NULL, NULL);
    struct FetchResponse *resp = resp_for(f, (const int64_t[]){5, 5, 5}, (const int32_t[]){0, 0, 0});
    gr_fsc_finish(c, f, &ctx, resp, 0, &A);
    gr_fsh_handle_response(&h, resp);
    CHECK(h.session_id == resp->SessionId && h.session_id > 0 && h.next_epoch == 1);
    /* partition 1 advanced, 2 is no longer fetched: one partition sent, one forgotten */
    r = req(7, 0, -1, ps, (const int64_t[]){5, 9}, 2, NULL, 0);
    gr_fsh_build(&h, r, &A, false);
    CHECK(r->SessionId == h.session_id && r->SessionEpoch == 1);
    CHECK(r->TopicsCount == 1 && r->Topics[0].Partitions[0].Partition == 1 && r->Topics[0].Partitions[0].FetchOffset == 9);
    CHECK(r->ForgottenTopicsDataCount == 1 && r->ForgottenTopicsData[0].Partitions[0] == 2);
    f = gr_fsc_begin(c, r, 11, 1, &A, &ctx, NULL, NULL);
    CHECK(ctx.kind == GR_FSC_INCREMENTAL && f->Topics[0].PartitionsCount == 2);
    resp = resp_for(f, (const int64_t[]){5, 9}, (const int32_t[]){0, 0});
    gr_fsc_finish(c, f, &ctx, resp, 1, &A);
    gr_fsh_handle_response(&h, resp);
    CHECK(h.next_epoch == 2);
    /* the leader lost the session: the error resets to a full fetch */
    gr_fsc_free(c);
    c = gr_fsc_new(10, GR_FSC_EVICTION_MS);
    r = req(7, 0, -1, ps, (const int64_t[]){5, 9}, 2, NULL, 0);
    gr_fsh_build(&h, r, &A, false);
    f = gr_fsc_begin(c, r, 11, 2, &A, &ctx, NULL, NULL);
    CHECK(!f && ctx.error == GR_KERR_FETCH_SESSION_ID_NOT_FOUND);
    resp = resp_for(req(7, 0, 0, NULL, NULL, 0, NULL, 0), NULL, NULL);
    gr_fsc_finish(c, NULL, &ctx, resp, 2, &A);
    gr_fsh_handle_response(&h, resp);
    CHECK(h.session_id == 0 && h.next_epoch == 0);
    r = req(7, 0, -1, ps, (const int64_t[]){5, 9}, 2, NULL, 0);
    gr_fsh_build(&h, r, &A, false);
    CHECK(r->SessionId == 0 && r->SessionEpoch == 0 && r->Topics[0].PartitionsCount == 2);
    gr_fsh_free(&h);
    gr_fsc_free(c);
}

/* The fetching side by topic id (the replica fetcher at Fetch v13+): an incremental request and
 * its ForgottenTopicsData carry the partitions' topic ids (the leader's session is keyed by
 * them); a change of kind (ids <-> names) makes the next fetch full. */
static void test_handler_by_topic_id(void) {
    struct gr_fetch_session_cache *c = gr_fsc_new(10, GR_FSC_EVICTION_MS);
    struct gr_fetch_session_handler h;
    gr_fsh_init(&h);
    struct gr_fsc_ctx ctx;
    const int32_t ps[] = {0, 1, 2};
    struct FetchRequest *r = req(7, 0, -1, ps, (const int64_t[]){5, 5, 5}, 3, NULL, 0);
    memset(r->Topics[0].TopicId, 0xab, 16);
    gr_fsh_build(&h, r, &A, true);
    CHECK(r->SessionEpoch == 0);
    const struct FetchRequest *f = gr_fsc_begin(c, r, 17, 0, &A, &ctx, NULL, NULL);
    struct FetchResponse *resp = resp_for(f, (const int64_t[]){5, 5, 5}, (const int32_t[]){0, 0, 0});
    gr_fsc_finish(c, f, &ctx, resp, 0, &A);
    gr_fsh_handle_response(&h, resp);
    CHECK(h.session_id > 0 && h.next_epoch == 1);
    /* partition 1 advanced, 2 dropped */
    r = req(7, 0, -1, ps, (const int64_t[]){5, 9}, 2, NULL, 0);
    memset(r->Topics[0].TopicId, 0xab, 16);
    gr_fsh_build(&h, r, &A, true);
    CHECK(r->SessionEpoch == 1 && r->TopicsCount == 1 && r->Topics[0].TopicId[0] == 0xab &&
          r->Topics[0].TopicId[15] == 0xab && r->Topics[0].Partitions[0].Partition == 1);
    CHECK(r->ForgottenTopicsDataCount == 1 && r->ForgottenTopicsData[0].TopicId[0] == 0xab &&
          r->ForgottenTopicsData[0].Partitions[0] == 2);
    f = gr_fsc_begin(c, r, 17, 1, &A, &ctx, NULL, NULL);
    /* the leader's session updated partition 1 (no new zero-id partition) and dropped 2 */
    CHECK(f && ctx.kind == GR_FSC_INCREMENTAL && f->TopicsCount == 1 && f->Topics[0].PartitionsCount == 2);
    CHECK(f && f->Topics[0].TopicId[0] == 0xab);
    for (int i = 0; f && i < f->Topics[0].PartitionsCount; i++)
        CHECK(f->Topics[0].Partitions[i].FetchOffset == (f->Topics[0].Partitions[i].Partition == 1 ? 9 : 5));
    resp = resp_for(f, (const int64_t[]){5, 9}, (const int32_t[]){0, 0});
    gr_fsc_finish(c, f, &ctx, resp, 1, &A);
    gr_fsh_handle_response(&h, resp);
    /* a partition without an id: the request goes by name, and so must a new session */
    r = req(7, 0, -1, ps, (const int64_t[]){5, 9}, 2, NULL, 0);
    gr_fsh_build(&h, r, &A, false);
    CHECK(r->SessionEpoch == 0 && r->SessionId == h.session_id && r->Topics[0].PartitionsCount == 2);
    gr_fsh_free(&h);
    gr_fsc_free(c);
}

/* The topic was deleted and re-created under the same name between two rounds (the follower's
 * log now holds another topic id) while the fetch offsets stayed equal (both logs empty): the
 * handler must send the partition under its new id and forget the old id (Kafka's
 * FetchSessionHandler "replaced" set), else the leader's session keeps serving the old id
 * (INCONSISTENT_TOPIC_ID, which the fetcher cannot name) and the new topic never replicates. */
static void test_handler_topic_id_replaced(void) {
    struct gr_fetch_session_cache *c = gr_fsc_new(10, GR_FSC_EVICTION_MS);
    struct gr_fetch_session_handler h;
    gr_fsh_init(&h);
    struct gr_fsc_ctx ctx;
    const int32_t ps[] = {0, 1};
    struct FetchRequest *r = req(7, 0, -1, ps, (const int64_t[]){0, 0}, 2, NULL, 0);
    memset(r->Topics[0].TopicId, 0xab, 16);
    gr_fsh_build(&h, r, &A, true);
    const struct FetchRequest *f = gr_fsc_begin(c, r, 17, 0, &A, &ctx, NULL, NULL);
    struct FetchResponse *resp = resp_for(f, (const int64_t[]){0, 0}, (const int32_t[]){0, 0});
    gr_fsc_finish(c, f, &ctx, resp, 0, &A);
    gr_fsh_handle_response(&h, resp);
    CHECK(h.session_id > 0 && h.next_epoch == 1);
    /* same name, same offsets, new id */
    r = req(7, 0, -1, ps, (const int64_t[]){0, 0}, 2, NULL, 0);
    memset(r->Topics[0].TopicId, 0xcd, 16);
    gr_fsh_build(&h, r, &A, true);
    CHECK(r->SessionEpoch == 1 && r->TopicsCount == 2);
    for (int t = 0; t < r->TopicsCount; t++) CHECK(r->Topics[t].TopicId[0] == 0xcd);
    CHECK(r->ForgottenTopicsDataCount == 2);
    for (int t = 0; t < r->ForgottenTopicsDataCount; t++) CHECK(r->ForgottenTopicsData[t].TopicId[0] == 0xab);
    f = gr_fsc_begin(c, r, 17, 1, &A, &ctx, NULL, NULL);
    /* the leader's session now holds exactly the new id's partitions */
    CHECK(f && ctx.kind == GR_FSC_INCREMENTAL);
    int n = 0;
    for (int t = 0; f && t < f->TopicsCount; t++) {
        CHECK(f->Topics[t].TopicId[0] == 0xcd);
        n += f->Topics[t].PartitionsCount;
    }
    CHECK(n == 2);
    resp = resp_for(f, (const int64_t[]){0, 0}, (const int32_t[]){0, 0});
    gr_fsc_finish(c, f, &ctx, resp, 1, &A);
    gr_fsh_handle_response(&h, resp);
    /* and the round after sends nothing more (the handler remembers the new id) */
    r = req(7, 0, -1, ps, (const int64_t[]){0, 0}, 2, NULL, 0);
    memset(r->Topics[0].TopicId, 0xcd, 16);
    gr_fsh_build(&h, r, &A, true);
    CHECK(r->TopicsCount == 0 && r->ForgottenTopicsDataCount == 0);
    gr_fsh_free(&h);
    gr_fsc_free(c);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* A follower session of thousands of partitions over rounds that change, add and drop some:
 * the handler sends exactly the new and changed ones, and the leader's widened request holds
 * exactly the follower's partitions at their current offsets (both sides index their sessions;
 * before issue 14 each named partition was found by a scan: O(n^2) per round). */
static void test_handler_many(void) {
    enum { N = 4000, ROUNDS = 6 };
    struct gr_fetch_session_cache *c = gr_fsc_new(10, GR_FSC_EVICTION_MS);
    struct gr_fetch_session_handler h;
    gr_fsh_init(&h);
    static int32_t ps[2 * N], got[2 * N];
    static int64_t offs[2 * N], hw[2 * N];
    static int32_t len[2 * N];
    int n = N;
    for (int i = 0; i < n; i++) ps[i] = i, offs[i] = 0, hw[i] = 0, len[i] = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int changed = 0;
        if (round > 0) {
            for (int i = round; i < n; i += 7) offs[i]++, changed++;  /* advanced */
            for (int i = 0; i < 5; i++) ps[n] = N + round * 10 + i, offs[n++] = 0, changed++; /* new */
            for (int i = 0; i < 3; i++) ps[round * 11 + i * 101] = ps[--n], offs[round * 11 + i * 101] = offs[n]; /* dropped */
        }
        struct FetchRequest *r = req(7, 0, -1, ps, offs, n, NULL, 0);
        gr_fsh_build(&h, r, &A, false);
        if (round == 0) {
            CHECK(r->SessionEpoch == 0 && r->Topics[0].PartitionsCount == n);
        } else {
            int sent = 0, forgotten = 0;
            for (int t = 0; t < r->TopicsCount; t++) sent += r->Topics[t].PartitionsCount;
            for (int t = 0; t < r->ForgottenTopicsDataCount; t++) forgotten += r->ForgottenTopicsData[t].PartitionsCount;
            CHECK(sent <= changed && sent >= changed - 3 && forgotten == 3);
        }
        struct gr_fsc_ctx ctx;
        const struct FetchRequest *f = gr_fsc_begin(c, r, 11, round, &A, &ctx, NULL, NULL);
        CHECK(f != NULL);
        if (!f) break;
        CHECK(ctx.kind == (round == 0 ? GR_FSC_FULL : GR_FSC_INCREMENTAL));
        int m = 0;
        for (int t = 0; t < f->TopicsCount; t++)
            for (int i = 0; i < f->Topics[t].PartitionsCount; i++) {
                const struct FetchRequest_FetchPartition *fp = &f->Topics[t].Partitions[i];
                int k = 0;
                while (k < n && ps[k] != fp->Partition) k++;
                CHECK(k < n && offs[k] == fp->FetchOffset);
                got[m++] = fp->Partition;
            }
        CHECK(m == n);
        qsort(got, (size_t)m, sizeof *got, cmp_i32);
        for (int i = 1; i < m; i++) CHECK(got[i] != got[i - 1]);
        struct FetchResponse *resp = resp_for(f, hw, len);
        gr_fsc_finish(c, f, &ctx, resp, round, &A);
        gr_fsh_handle_response(&h, resp);
        CHECK(h.session_id != 0 && h.next_epoch == round + 1);
    }
    gr_fsh_free(&h);
    gr_fsc_free(c);
}

/* A follower's full fetch whose answer it never read (it dropped the connection) opened a session
 * it will never name; its next full fetch closes it instead of leaving it to fill the cache. */
static void test_orphaned_follower_session(void) {
    struct gr_fetch_session_cache *c = gr_fsc_new(10, GR_FSC_EVICTION_MS);
    const int32_t ps[] = {0, 1, 2};
    const int64_t offs[] = {0, 0, 0};
    struct gr_fsc_ctx ctx;
    int sessions;
    int64_t parts;
    for (int i = 0; i < 3; i++) { /* three lost answers from replica 7, one consumer session */
        struct FetchRequest *r = req(i < 2 ? 7 : -1, 0, 0, ps, offs, 3, NULL, 0);
        const struct FetchRequest *f = gr_fsc_begin(c, r, 11, i, &A, &ctx, NULL, NULL);
        gr_fsc_finish(c, f, &ctx, resp_for(f, (const int64_t[]){0, 0, 0}, (const int32_t[]){0, 0, 0}), i, &A);
    }
    gr_fsc_stats(c, &sessions, &parts);
    CHECK(sessions == 2 && parts == 6); /* replica 7's latest and the consumer's */
    struct FetchRequest *r = req(8, 0, 0, ps, offs, 3, NULL, 0); /* another follower: its own */
    const struct FetchRequest *f = gr_fsc_begin(c, r, 11, 5, &A, &ctx, NULL, NULL);
    gr_fsc_finish(c, f, &ctx, resp_for(f, (const int64_t[]){0, 0, 0}, (const int32_t[]){0, 0, 0}), 5, &A);
    gr_fsc_stats(c, &sessions, &parts);
    CHECK(sessions == 3);
    gr_fsc_free(c);
}

/* Memory (issue 14): a session's cached partitions share their topic's name and the session
 * keeps no doubling slack; ~56 B per partition (was ~89: a copied name each and up to 2x
 * capacity). mallinfo2 counts every arena; not meaningful under ASan. */
static void test_session_memory(void) {
#if !defined(__SANITIZE_ADDRESS__)
    enum { N = 4000 };
    static int32_t ps[N];
    static int64_t offs[N], hw[N];
    static int32_t len[N];
    for (int i = 0; i < N; i++) ps[i] = i;
    for (int16_t ver = 11; ver <= 13; ver += 2) { /* by name, by topic id (KIP-516): the same */
        struct gr_fetch_session_cache *c = gr_fsc_new(10, GR_FSC_EVICTION_MS);
        struct gr_fsc_ctx ctx;
        const struct FetchRequest *f =
            gr_fsc_begin(c, req(7, 0, 0, ps, offs, N, NULL, 0), ver, 0, &A, &ctx, NULL, NULL);
        struct FetchResponse *resp = resp_for(f, hw, len);
        struct mallinfo2 m0 = mallinfo2();
        gr_fsc_finish(c, f, &ctx, resp, 0, &A);
        struct mallinfo2 m1 = mallinfo2(); /* heap chunks + mmapped ones (the partition array) */
        size_t used = (m1.uordblks + m1.hblkhd) - (m0.uordblks + m0.hblkhd);
        CHECK(resp->SessionId != 0);
        printf("fetch session (Fetch v%d): %zu B per cached partition\n", ver, used / N);
        CHECK(used / N <= 64);
        gr_fsc_free(c);
    }
#endif
}

/* Fetch v12: the session keeps each partition's LastFetchedEpoch for the incremental fetches that
 * do not name it, and a partition answered with a DivergingEpoch is always sent (Kafka's
 * CachedPartition.maybeUpdateResponseData), even when nothing else changed. */
static void test_session_keeps_last_fetched_epoch(void) {
    struct gr_fetch_session_cache *c = gr_fsc_new(10, GR_FSC_EVICTION_MS);
    struct gr_fsc_ctx ctx;
    const int32_t ps[] = {0, 1};
    const int64_t offs[] = {5, 7};
    struct FetchRequest *r = req(-1, 0, 0, ps, offs, 2, NULL, 0);
    r->Topics[0].Partitions[0].LastFetchedEpoch = 3;
    const struct FetchRequest *f = gr_fsc_begin(c, r, 12, 0, &A, &ctx, NULL, NULL);
    struct FetchResponse *resp = resp_for(f, (const int64_t[]){10, 10}, (const int32_t[]){0, 0});
    gr_fsc_finish(c, f, &ctx, resp, 0, &A);
    int32_t sid = resp->SessionId;
    CHECK(sid > 0);
    /* incremental, nothing listed: the cached epochs come back */
    f = gr_fsc_begin(c, req(-1, sid, 1, NULL, NULL, 0, NULL, 0), 12, 1, &A, &ctx, NULL, NULL);
    CHECK(f && f->TopicsCount == 1 && f->Topics[0].PartitionsCount == 2);
    CHECK(f->Topics[0].Partitions[0].LastFetchedEpoch == 3 && f->Topics[0].Partitions[1].LastFetchedEpoch == -1);
    /* nothing changed but partition 0 diverges: it alone is answered */
    resp = resp_for(f, (const int64_t[]){10, 10}, (const int32_t[]){0, 0});
    resp->Responses[0].Partitions[0].DivergingEpoch.Epoch = 2;
    resp->Responses[0].Partitions[0].DivergingEpoch.EndOffset = 4;
    gr_fsc_finish(c, f, &ctx, resp, 1, &A);
    CHECK(resp->SessionId == sid && resp->ResponsesCount == 1 && resp->Responses[0].PartitionsCount == 1 &&
          resp->Responses[0].Partitions[0].PartitionIndex == 0 &&
          resp->Responses[0].Partitions[0].DivergingEpoch.EndOffset == 4);
    /* the fetcher names partition 0 again with a new epoch: that one is kept */
    r = req(-1, sid, 2, ps, offs, 1, NULL, 0);
    r->Topics[0].Partitions[0].LastFetchedEpoch = 2;
    f = gr_fsc_begin(c, r, 12, 2, &A, &ctx, NULL, NULL);
    CHECK(f && f->TopicsCount == 1 && f->Topics[0].PartitionsCount == 2);
    for (int i = 0; f && i < f->Topics[0].PartitionsCount; i++) /* (a named partition may move in the session) */
        CHECK(f->Topics[0].Partitions[i].LastFetchedEpoch == (f->Topics[0].Partitions[i].Partition == 0 ? 2 : -1));
    resp = resp_for(f, (const int64_t[]){10, 10}, (const int32_t[]){0, 0});
    gr_fsc_finish(c, f, &ctx, resp, 2, &A);
    CHECK(resp->ResponsesCount == 0);
    gr_fsc_free(c);
}

/* Fetch v13+ (KIP-516): a request of nt topics, topic i with id byte ids[i] (the id's 16 bytes all
 * that value), name names[i] (NULL: unresolved), partition 0 at offset 5; forgetting partition 0
 * of the id byte `forget` if non-zero. */
static struct FetchRequest *req_ids(int32_t sid, int32_t epoch, int nt, const uint8_t *ids, const char *const *names,
                                    uint8_t forget) {
    struct FetchRequest *r = gr_arena_alloc(&A, sizeof *r);
    memset(r, 0, sizeof *r);
    r->ReplicaId = -1;
    r->SessionId = sid;
    r->SessionEpoch = epoch;
    r->TopicsCount = nt;
    r->Topics = gr_arena_alloc(&A, (size_t)(nt + 1) * sizeof *r->Topics);
    for (int t = 0; t < nt; t++) {
        memset(r->Topics[t].TopicId, ids[t], 16);
        r->Topics[t].Topic = (char *)names[t];
        r->Topics[t].PartitionsCount = 1;
        r->Topics[t].Partitions = gr_arena_alloc(&A, sizeof *r->Topics[t].Partitions);
        r->Topics[t].Partitions[0] = (struct FetchRequest_FetchPartition){
            .Partition = 0, .CurrentLeaderEpoch = -1, .FetchOffset = 5, .LastFetchedEpoch = -1,
            .LogStartOffset = -1, .PartitionMaxBytes = 1000};
    }
    r->ForgottenTopicsDataCount = forget ? 1 : 0;
    r->ForgottenTopicsData = gr_arena_alloc(&A, sizeof *r->ForgottenTopicsData);
    memset(r->ForgottenTopicsData, 0, sizeof *r->ForgottenTopicsData);
    memset(r->ForgottenTopicsData[0].TopicId, forget, 16);
    r->ForgottenTopicsData[0].PartitionsCount = 1;
    r->ForgottenTopicsData[0].Partitions = gr_arena_alloc(&A, sizeof(int32_t));
    r->ForgottenTopicsData[0].Partitions[0] = 0;
    return r;
}

/* A response to any request: every partition with hw 10, no records (topics as requested). */
static struct FetchResponse *resp_all(const struct FetchRequest *r) {
    struct FetchResponse *p = gr_arena_alloc(&A, sizeof *p);
    memset(p, 0, sizeof *p);
    p->ResponsesCount = r->TopicsCount;
    p->Responses = gr_arena_alloc(&A, (size_t)(r->TopicsCount + 1) * sizeof *p->Responses);
    for (int t = 0; t < r->TopicsCount; t++) {
        struct FetchResponse_FetchableTopicResponse *tr = &p->Responses[t];
        memset(tr, 0, sizeof *tr);
        tr->Topic = r->Topics[t].Topic;
        memcpy(tr->TopicId, r->Topics[t].TopicId, 16);
        tr->PartitionsCount = r->Topics[t].PartitionsCount;
        tr->Partitions = gr_arena_alloc(&A, (size_t)(tr->PartitionsCount + 1) * sizeof *tr->Partitions);
        for (int i = 0; i < tr->PartitionsCount; i++) {
            struct FetchResponse_PartitionData *x = &tr->Partitions[i];
            memset(x, 0, sizeof *x);
            x->PartitionIndex = r->Topics[t].Partitions[i].Partition;
            x->HighWatermark = 10;
            x->PreferredReadReplica = -1;
            x->DivergingEpoch.Epoch = x->DivergingEpoch.EndOffset = -1;
        }
    }
    return p;
}

static int resolves;
static char *resolve_c(void *arg, const uint8_t id[16]) {
    (void)arg;
    resolves++;
    return id[0] == 0xcc ? strdup("u") : NULL; /* only id cc... is known (as "u") */
}

/* The session's topic (index t of request f): its id byte and name. */
static bool has_topic(const struct FetchRequest *f, uint8_t id, const char *name) {
    for (int t = 0; f && t < f->TopicsCount; t++)
        if (f->Topics[t].TopicId[0] == id && f->Topics[t].TopicId[15] == id &&
            (name ? f->Topics[t].Topic && strcmp(f->Topics[t].Topic, name) == 0 : !f->Topics[t].Topic))
            return true;
    return false;
}

/* Sessions by topic id: keyed by id, not name (the old and the new id of a re-created name are
 * two partitions); an unresolved id is named once the resolver knows it; forgotten by id; a
 * session by id continued by name (v12) and one by name continued by id (v13) are
 * FETCH_SESSION_TOPIC_ID_ERROR and stay usable at the same epoch. */
static void test_session_by_topic_id(void) {
    struct gr_fetch_session_cache *c = gr_fsc_new(10, GR_FSC_EVICTION_MS);
    struct gr_fsc_ctx ctx;
    /* full: id aa ("t") and id cc (unknown yet) */
    const struct FetchRequest *r = req_ids(0, 0, 2, (const uint8_t[]){0xaa, 0xcc}, (const char *const[]){"t", NULL}, 0);
    const struct FetchRequest *f = gr_fsc_begin(c, r, 13, 0, &A, &ctx, resolve_c, NULL);
    CHECK(f == r && ctx.kind == GR_FSC_FULL && ctx.uses_ids);
    struct FetchResponse *resp = resp_all(f);
    gr_fsc_finish(c, f, &ctx, resp, 0, &A);
    int32_t sid = resp->SessionId;
    CHECK(sid > 0);
    /* by name: refused, no data, the session keeps its epoch */
    f = gr_fsc_begin(c, req(-1, sid, 1, NULL, NULL, 0, NULL, 0), 12, 1, &A, &ctx, resolve_c, NULL);
    CHECK(!f && ctx.kind == GR_FSC_ERROR && ctx.error == GR_KERR_FETCH_SESSION_TOPIC_ID_ERROR);
    /* by id, epoch 1: cc is named now; id bb under the same name "t" is another partition */
    resolves = 0;
    f = gr_fsc_begin(c, req_ids(sid, 1, 1, (const uint8_t[]){0xbb}, (const char *const[]){"t"}, 0), 14, 1, &A, &ctx,
                     resolve_c, NULL);
    CHECK(f && ctx.kind == GR_FSC_INCREMENTAL && f->TopicsCount == 3);
    CHECK(has_topic(f, 0xaa, "t") && has_topic(f, 0xcc, "u") && has_topic(f, 0xbb, "t"));
    CHECK(resolves == 1);
    resp = resp_all(f);
    gr_fsc_finish(c, f, &ctx, resp, 1, &A);
    /* forget aa by id: bb (same name) stays; the resolved name of cc is kept (no more lookups) */
    resolves = 0;
    f = gr_fsc_begin(c, req_ids(sid, 2, 0, NULL, NULL, 0xaa), 17, 2, &A, &ctx, resolve_c, NULL);
    CHECK(f && f->TopicsCount == 2 && !has_topic(f, 0xaa, "t") && has_topic(f, 0xbb, "t") && has_topic(f, 0xcc, "u"));
    CHECK(resolves == 0);
    resp = resp_all(f);
    gr_fsc_finish(c, f, &ctx, resp, 2, &A);
    CHECK(resp->ResponsesCount == 0); /* nothing changed */
    /* forget an id the session does not hold: nothing happens */
    f = gr_fsc_begin(c, req_ids(sid, 3, 0, NULL, NULL, 0xdd), 17, 3, &A, &ctx, resolve_c, NULL);
    CHECK(f && f->TopicsCount == 2);
    gr_fsc_finish(c, f, &ctx, resp_all(f), 3, &A);

    /* a session by name cannot be continued by id */
    const int32_t ps[] = {0};
    const int64_t offs[] = {1};
    const struct FetchRequest *rn = req(-1, 0, 0, ps, offs, 1, NULL, 0);
    f = gr_fsc_begin(c, rn, 12, 4, &A, &ctx, resolve_c, NULL);
    CHECK(f && !ctx.uses_ids);
    resp = resp_all(f);
    gr_fsc_finish(c, f, &ctx, resp, 4, &A);
    int32_t nsid = resp->SessionId;
    CHECK(nsid > 0 && nsid != sid);
    f = gr_fsc_begin(c, req_ids(nsid, 1, 0, NULL, NULL, 0), 13, 5, &A, &ctx, resolve_c, NULL);
    CHECK(!f && ctx.error == GR_KERR_FETCH_SESSION_TOPIC_ID_ERROR);
    f = gr_fsc_begin(c, req(-1, nsid, 1, NULL, NULL, 0, NULL, 0), 12, 5, &A, &ctx, resolve_c, NULL);
    CHECK(f && ctx.kind == GR_FSC_INCREMENTAL && f->TopicsCount == 1 && f->Topics[0].Topic &&
          strcmp(f->Topics[0].Topic, "t") == 0);
    gr_fsc_finish(c, f, &ctx, resp_all(f), 5, &A);
    int sessions;
    int64_t parts;
    gr_fsc_stats(c, &sessions, &parts);
    CHECK(sessions == 2 && parts == 3);
    gr_fsc_free(c);
}

int main(void) {
    gr_arena_init(&A);
    test_session_memory();
    test_orphaned_follower_session();
    test_handler_many();
    test_session_lifecycle();
    test_session_keeps_last_fetched_epoch();
    test_session_by_topic_id();
    test_eviction();
    test_handler_against_cache();
    test_handler_by_topic_id();
    test_handler_topic_id_replaced();
    gr_arena_free(&A);
    if (test_failures) {
        fprintf(stderr, "%d check(s) failed\n", test_failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
