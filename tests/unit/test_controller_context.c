/* The controller context's memory per partition (issue 14) and the ownership rules of the
 * partitions' arrays (context.h: replicas, ISR and replica states in a slot of the topic's pool,
 * on the heap only when they outgrow it).
 *
 * Covered: the size of struct gr_ctrl_partition; the heap a 1000 x 10 RF-3 context holds per
 * partition (mallinfo2's bytes in use: allocation sizes and counts, not RSS; skipped where the
 * allocator does not report them, e.g. under ASan); every array in its slot; an assignment
 * growing past the slot and shrinking back, replica states following their ids; an ISR longer
 * than the slot taken and replaced; a state set from the partition's own; a topic put again
 * (states kept) and partitions added (pool rebuilt, contents kept). Leaks and double frees show
 * in the ASan build. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "controller/context.h"
#include "controller/states.h"
#include "zk/kzk.h"

#include "support/check.h"

static int32_t *ids(int n, int32_t first) {
    int32_t *v = gr_malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int i = 0; i < n; i++) v[i] = first + i;
    return v;
}

/* An assignment of n partitions, RF rf, replicas p, p+1, ... (heap arrays, as a ZooKeeper read
 * leaves them). */
static void assignment(struct gr_kzk_topic_assignment *a, const char *topic, int n, int rf) {
    memset(a, 0, sizeof *a);
    a->topic = gr_strdup(topic);
    a->n_partitions = n;
    a->partitions = gr_calloc((size_t)n, sizeof *a->partitions);
    for (int i = 0; i < n; i++) {
        a->partitions[i].partition = i;
        a->partitions[i].n_replicas = rf;
        a->partitions[i].replicas = ids(rf, i);
    }
}

static bool in_slot(const struct gr_ctrl_partition *p) {
    bool ok = p->slot != NULL && p->replicas == p->slot;
    if (p->lai.n_isr > 0) ok = ok && p->lai.isr == p->slot + p->slot_cap;
    if (p->replica_states) ok = ok && p->replica_states == (const uint8_t *)(p->slot + 2 * p->slot_cap);
    return ok;
}

/* Leader 1st replica, ISR = the replicas, every replica Online: what a creation leaves. */
static void online(struct gr_ctrl_partition *p) {
    int32_t isr[8];
    memcpy(isr, p->replicas, (size_t)p->n_replicas * sizeof *isr);
    struct gr_kzk_leader_and_isr l = {.leader = isr[0], .leader_epoch = 0, .controller_epoch = 1,
                                      .n_isr = p->n_replicas, .isr = isr, .zk_version = 0};
    gr_ctrl_partition_set_state(p, &l);
    p->state = GR_PS_ONLINE;
    for (int r = 0; r < p->n_replicas; r++) gr_ctrl_replica_state_set(p, p->replicas[r], GR_RS_ONLINE);
}

static void test_size_and_heap_per_partition(void) {
    /* 128 B before the pool (GR_REPLICA_ASSIGNMENT_FIELDS' padding, int state, int *states) */
    CHECKF(sizeof(struct gr_ctrl_partition) <= 112, "sizeof %zu", sizeof(struct gr_ctrl_partition));

    struct gr_ctrl_context ctx;
    gr_ctrl_ctx_init(&ctx);
    size_t before = mallinfo2().uordblks;
    enum { TOPICS = 1000, PER_TOPIC = 10 };
    char name[64];
    for (int t = 0; t < TOPICS; t++) {
        snprintf(name, sizeof name, "bench-topic-%05d", t);
        struct gr_kzk_topic_assignment a;
        assignment(&a, name, PER_TOPIC, 3);
        struct gr_ctrl_topic *tp = gr_ctrl_ctx_put_topic(&ctx, &a);
        gr_kzk_topic_assignment_release(&a);
        for (int i = 0; i < PER_TOPIC; i++) online(&tp->partitions[i]);
    }
    size_t after = mallinfo2().uordblks;
    int not_in_slot = 0;
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(&ctx, &cur)))
        for (int i = 0; i < t->n_partitions; i++) not_in_slot += !in_slot(&t->partitions[i]);
    CHECKF(not_in_slot == 0, "%d partitions with arrays outside their slot", not_in_slot);
    if (after > before) {
        /* ~156 B: the struct, a 28 B slot, and per topic its struct, name, array and pool. Before
         * the pool: ~240 B (three 12 B arrays of their own per partition, 32 B chunks each). */
        double per = (double)(after - before) / (TOPICS * PER_TOPIC);
        printf("controller context, 1000 x 10 RF 3: %.0f B of heap per partition\n", per);
        CHECKF(per <= 180, "%.0f B per partition", per);
    } else {
        printf("controller context: mallinfo2 reports nothing here (ASan?), heap figure skipped\n");
    }
    gr_ctrl_ctx_release(&ctx);
}

static void test_arrays_outgrow_the_slot(void) {
    struct gr_ctrl_context ctx;
    gr_ctrl_ctx_init(&ctx);
    struct gr_kzk_topic_assignment a;
    assignment(&a, "t", 2, 3);
    struct gr_ctrl_topic *t = gr_ctrl_ctx_put_topic(&ctx, &a);
    gr_kzk_topic_assignment_release(&a);
    struct gr_ctrl_partition *p = gr_ctrl_topic_partition(t, 1); /* replicas 1, 2, 3 */
    online(p);
    gr_ctrl_replica_state_set(p, 2, GR_RS_OFFLINE);
    CHECK(in_slot(p));

    /* a reassignment to 3, 4, 5, 6, 2 (adding 4, 5, 6; removing 1): past the slot's 3 */
    int32_t rs[] = {3, 4, 5, 6, 2}, add[] = {4, 5, 6}, rem[] = {1};
    gr_ctrl_partition_set_assignment(p, rs, 5, add, 3, rem, 1);
    CHECK(p->n_replicas == 5 && p->replicas != p->slot && memcmp(p->replicas, rs, sizeof rs) == 0);
    CHECK(p->n_adding == 3 && p->adding[2] == 6 && p->n_removing == 1 && p->removing[0] == 1);
    CHECK(gr_ctrl_replica_state_get(p, 3) == GR_RS_ONLINE && gr_ctrl_replica_state_get(p, 2) == GR_RS_OFFLINE);
    CHECK(gr_ctrl_replica_state_get(p, 4) == GR_RS_NONEXISTENT && gr_ctrl_replica_state_get(p, 1) == GR_RS_NONEXISTENT);
    gr_ctrl_replica_state_set(p, 6, GR_RS_NEW);

    /* an ISR of 5, taken (owned, longer than the slot), then a state set from p's own */
    struct gr_kzk_leader_and_isr l = {.leader = 3, .leader_epoch = 1, .controller_epoch = 1, .n_isr = 5,
                                      .isr = ids(5, 2), .zk_version = 1};
    gr_ctrl_partition_take_state(p, &l);
    CHECK(l.isr == NULL && p->lai.n_isr == 5 && p->lai.isr[4] == 6 && p->lai.isr != p->slot + p->slot_cap);
    gr_ctrl_partition_set_state(p, &p->lai);
    CHECK(p->lai.n_isr == 5 && p->lai.isr[0] == 2 && p->lai.leader == 3);

    /* back to three replicas: everything returns to the slot, states kept by id */
    int32_t rs2[] = {6, 2, 3};
    gr_ctrl_partition_set_assignment(p, rs2, 3, NULL, 0, NULL, 0);
    CHECK(p->replicas == p->slot && p->adding == NULL && p->n_adding == 0 && p->removing == NULL);
    CHECK(gr_ctrl_replica_state_get(p, 6) == GR_RS_NEW && gr_ctrl_replica_state_get(p, 2) == GR_RS_OFFLINE &&
          gr_ctrl_replica_state_get(p, 3) == GR_RS_ONLINE);
    struct gr_kzk_leader_and_isr l2 = {.leader = 6, .leader_epoch = 2, .controller_epoch = 1, .n_isr = 2,
                                       .isr = ids(2, 6), .zk_version = 2};
    gr_ctrl_partition_take_state(p, &l2); /* fits: copied into the slot, the taken array freed */
    CHECK(in_slot(p) && p->lai.isr[1] == 7 && p->lai.zk_version == 2);
    struct gr_kzk_leader_and_isr none = {.leader = -1, .leader_epoch = 3, .n_isr = 0};
    gr_ctrl_partition_set_state(p, &none);
    CHECK(p->lai.isr == NULL && p->lai.n_isr == 0 && p->has_state);

    /* the topic read again (same partitions) and then one more partition: states and ISRs kept */
    struct gr_ctrl_partition *p0 = gr_ctrl_topic_partition(t, 0);
    online(p0);
    assignment(&a, "t", 2, 3);
    t = gr_ctrl_ctx_put_topic(&ctx, &a);
    gr_kzk_topic_assignment_release(&a);
    p0 = gr_ctrl_topic_partition(t, 0);
    CHECK(in_slot(p0) && p0->has_state && p0->lai.n_isr == 3 && p0->lai.isr[2] == 2 &&
          gr_ctrl_replica_state_get(p0, 1) == GR_RS_ONLINE && p0->state == GR_PS_ONLINE);
    CHECK(gr_ctrl_replica_state_get(gr_ctrl_topic_partition(t, 1), 2) == GR_RS_OFFLINE); /* same replicas 1,2,3 */
    assignment(&a, "t", 3, 4);
    CHECK(gr_ctrl_ctx_add_partitions(&ctx, t, &a) == 1);
    gr_kzk_topic_assignment_release(&a);
    p0 = gr_ctrl_topic_partition(t, 0);
    struct gr_ctrl_partition *p2 = gr_ctrl_topic_partition(t, 2);
    CHECK(in_slot(p0) && p0->n_replicas == 3 && p0->lai.isr[1] == 1 && gr_ctrl_replica_state_get(p0, 2) == GR_RS_ONLINE);
    CHECK(in_slot(p2) && p2->n_replicas == 4 && p2->replicas[3] == 5 && !p2->has_state && p2->slot_cap == 4);
    CHECK(gr_ctrl_ctx_partition_count(&ctx) == 3);
    gr_ctrl_ctx_release(&ctx);
}

int main(void) {
    test_size_and_heap_per_partition();
    test_arrays_outgrow_the_slot();
    if (test_failures) {
        fprintf(stderr, "test_controller_context: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_controller_context: ok\n");
    return 0;
}
