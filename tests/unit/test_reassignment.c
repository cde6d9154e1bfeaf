/* Reassignment arithmetic and validation (controller/reassignment.h): ORS/TRS, reassignTo
 * (Kafka's ReplicaAssignment examples incl. overlapping and superseding reassignments and
 * cancellation), validateReplicas, and the imbalance count of leader_balance.h over a context. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/util.h"
#include "controller/context.h"
#include "controller/leader_balance.h"
#include "controller/reassignment.h"
#include "support/check.h"

#define END (-99)
static int len(const int32_t *v) {
    int n = 0;
    while (v[n] != END) n++;
    return n;
}
static bool eq(const int32_t *got, int n, const int32_t *want) {
    int m = len(want);
    return n == m && (n == 0 || memcmp(got, want, (size_t)n * sizeof *got) == 0);
}

struct row {
    const char *name;
    int32_t rs[8], ar[8], rr[8]; /* current */
    int32_t target[8];
    int32_t want_rs[8], want_ar[8], want_rr[8];
};

static const struct row rows[] = {
    /* reference §6 / KafkaController's comment: {1,2,3} -> {4,5,6} */
    {"disjoint", {1, 2, 3, END}, {END}, {END}, {4, 5, 6, END}, {4, 5, 6, 1, 2, 3, END}, {4, 5, 6, END}, {1, 2, 3, END}},
    /* overlap keeps target order first: [1,2,3] -> [3,4,2] = [3,4,2,1] */
    {"overlap", {1, 2, 3, END}, {END}, {END}, {3, 4, 2, END}, {3, 4, 2, 1, END}, {4, END}, {1, END}},
    {"same set", {1, 2, 3, END}, {END}, {END}, {1, 2, 3, END}, {1, 2, 3, END}, {END}, {END}},
    {"reorder only", {1, 2, 3, END}, {END}, {END}, {3, 2, 1, END}, {3, 2, 1, END}, {END}, {END}},
    {"shrink", {1, 2, 3, END}, {END}, {END}, {1, END}, {1, 2, 3, END}, {END}, {2, 3, END}},
    /* superseding: in flight [4,5,6,1,2,3] (ORS 1,2,3) -> new target [7,1] */
    {"supersede", {4, 5, 6, 1, 2, 3, END}, {4, 5, 6, END}, {1, 2, 3, END}, {7, 1, END},
     {7, 1, 2, 3, END}, {7, END}, {2, 3, END}},
    /* cancel = reassign to ORS */
    {"cancel", {4, 5, 6, 1, 2, 3, END}, {4, 5, 6, END}, {1, 2, 3, END}, {1, 2, 3, END},
     {1, 2, 3, END}, {END}, {END}},
};

static void test_reassign_to(void) {
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct row *r = &rows[i];
        struct gr_replica_assignment cur = {0}, out = {0};
        gr_replica_assignment_set(&cur, r->rs, len(r->rs), r->ar, len(r->ar), r->rr, len(r->rr));
        gr_replica_assignment_reassign_to(&cur, r->target, len(r->target), &out);
        bool ok = eq(out.replicas, out.n_replicas, r->want_rs) && eq(out.adding, out.n_adding, r->want_ar) &&
                  eq(out.removing, out.n_removing, r->want_rr);
        if (!ok) fprintf(stderr, "row %s\n", r->name);
        CHECK(ok);
        /* ORS of the result = ORS of the input; TRS of the result = target */
        int n1, n2, n3;
        int32_t *o1 = gr_replica_assignment_origin(&cur, &n1), *o2 = gr_replica_assignment_origin(&out, &n2);
        int32_t *t = gr_replica_assignment_target(&out, &n3);
        if (strcmp(r->name, "overlap") && strcmp(r->name, "reorder only")) CHECK(n1 == n2 && memcmp(o1, o2, (size_t)n1 * 4) == 0);
        CHECK(eq(t, n3, r->target));
        CHECK(gr_replica_assignment_reassigning(&out) == (len(r->want_ar) + len(r->want_rr) > 0));
        free(o1);
        free(o2);
        free(t);
        gr_replica_assignment_release(&cur);
        gr_replica_assignment_release(&out);
    }
}

static void test_validate(void) {
    struct gr_replica_assignment cur = {0};
    int32_t rs[] = {1, 2, 3};
    gr_replica_assignment_set(&cur, rs, 3, NULL, 0, NULL, 0);
    int32_t live[] = {1, 2, 3, 4};
    char msg[512];
    int32_t ok[] = {2, 3, 4};
    CHECK(gr_reassign_validate(&cur, ok, 3, live, 4, msg, sizeof msg) == GR_KERR_NONE);
    CHECK(gr_reassign_validate(&cur, NULL, 0, live, 4, msg, sizeof msg) == GR_KERR_INVALID_REPLICA_ASSIGNMENT);
    CHECK(strstr(msg, "Empty replica list") != NULL);
    int32_t dup[] = {2, 2, 4};
    CHECK(gr_reassign_validate(&cur, dup, 3, live, 4, msg, sizeof msg) == GR_KERR_INVALID_REPLICA_ASSIGNMENT);
    CHECK(strstr(msg, "Duplicate") != NULL);
    int32_t neg[] = {1, -1};
    CHECK(gr_reassign_validate(&cur, neg, 2, live, 4, msg, sizeof msg) == GR_KERR_INVALID_REPLICA_ASSIGNMENT);
    CHECK(strstr(msg, "Invalid broker id") != NULL);
    int32_t dead[] = {1, 5};
    CHECK(gr_reassign_validate(&cur, dead, 2, live, 4, msg, sizeof msg) == GR_KERR_INVALID_REPLICA_ASSIGNMENT);
    CHECK(strstr(msg, "not alive") != NULL);
    /* a dead broker that is already a replica is fine: only adding replicas must be live */
    int32_t live2[] = {1, 2};
    int32_t keep[] = {3, 1};
    CHECK(gr_reassign_validate(&cur, keep, 2, live2, 2, NULL, 0) == GR_KERR_NONE);
    gr_replica_assignment_release(&cur);
}

static void put(struct gr_ctrl_context *ctx, const char *topic, int np, const int32_t (*reps)[3], const int32_t *leaders,
                const int32_t (*adding)[1]) {
    struct gr_kzk_topic_assignment a;
    memset(&a, 0, sizeof a);
    a.topic = gr_strdup(topic);
    a.n_partitions = np;
    a.partitions = gr_calloc((size_t)np, sizeof *a.partitions);
    for (int i = 0; i < np; i++) {
        a.partitions[i].partition = i;
        a.partitions[i].n_replicas = 3;
        a.partitions[i].replicas = gr_malloc(3 * sizeof(int32_t));
        memcpy(a.partitions[i].replicas, reps[i], 3 * sizeof(int32_t));
        if (adding && adding[i][0] >= 0) {
            a.partitions[i].n_adding = 1;
            a.partitions[i].adding = gr_malloc(sizeof(int32_t));
            a.partitions[i].adding[0] = adding[i][0];
        }
    }
    struct gr_ctrl_topic *t = gr_ctrl_ctx_put_topic(ctx, &a);
    gr_kzk_topic_assignment_release(&a);
    for (int i = 0; i < np; i++) {
        int32_t isr[] = {reps[i][1], reps[i][2]};
        struct gr_kzk_leader_and_isr l = {.leader = leaders[i], .leader_epoch = 0, .controller_epoch = 1, .n_isr = 2, .isr = isr};
        gr_ctrl_partition_set_state(&t->partitions[i], &l);
    }
}

static void test_imbalance(void) {
    struct gr_ctrl_context ctx;
    gr_ctrl_ctx_init(&ctx);
    const int32_t reps[4][3] = {{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {1, 3, 2}};
    const int32_t leaders[4] = {1, 3, 3, 2}; /* p1 and p3 imbalanced */
    put(&ctx, "t", 4, reps, leaders, NULL);
    CHECK(gr_leader_balance_imbalance_count(&ctx) == 2);
    CHECK(!gr_reassign_topic_reassigning(&ctx, "t"));
    CHECK(gr_reassign_count(&ctx) == 0);
    /* a reassigning partition whose preferred replica is being added is not imbalanced until
     * that replica joins the ISR: [4,1,2] adding 4, ISR {1,2}, leader 1 -> not counted */
    const int32_t r2[2][3] = {{4, 1, 2}, {1, 2, 3}};
    const int32_t l2[2] = {1, 1};
    const int32_t add2[2][1] = {{4}, {-1}};
    put(&ctx, "u", 2, r2, l2, add2);
    CHECK(gr_reassign_topic_reassigning(&ctx, "u"));
    CHECK(gr_reassign_count(&ctx) == 1);
    CHECK(gr_leader_balance_imbalance_count(&ctx) == 2);
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(&ctx, "u", 0);
    int32_t isr[] = {1, 2, 4};
    struct gr_kzk_leader_and_isr l = {.leader = 1, .leader_epoch = 1, .controller_epoch = 1, .n_isr = 3, .isr = isr};
    gr_ctrl_partition_set_state(p, &l);
    CHECK(gr_leader_balance_imbalance_count(&ctx) == 3); /* 4 caught up, leader still 1 */
    gr_ctrl_ctx_release(&ctx);
}

int main(void) {
    test_reassign_to();
    test_validate();
    test_imbalance();
    if (test_failures) {
        fprintf(stderr, "%d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_reassignment: ok\n");
    return 0;
}
