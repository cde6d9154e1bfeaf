/* Pipelined guarded multis (the backend's multi_many, kzk's guarded_items) and the replica state
 * machine's one ISR write per partition, over the in-memory ZooKeeper (tests/support/memzk.h)
 * and the controller fixture (ctrl_fixture.h).
 *
 * Covered: bulk creates and updates go as several multis per multi_many call, every one guarded;
 * a batch with one failing conditional write is rerun without that item (the others land, the
 * item reports BADVERSION, no item-by-item fallback); a controller epoch lost in the middle of a
 * pipeline stops the call (GR_ECONTROLLER_MOVED), nothing after the lost check is written and no
 * further multi is sent; an ordered bulk write (a topic's subtree deleted deepest first) still
 * works with tiny batches; all replicas of a partition going offline in one event cost ONE state
 * write (Kafka: one per broker) with the leader and ISR Kafka's last write would leave; elections
 * start from the cached state and fall back to a read (a failed election) or reread on
 * BADVERSION (a stale cache); kzk update jobs start after the next write, or not at all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "controller/flows.h"
#include "controller/partition_sm.h"
#include "controller/replica_sm.h"
#include "zk/kzk.h"

#include "support/ctrl_fixture.h"

#define NP 1000

static struct gr_kzk_state_write *items_for(const char *topic, int n, const struct gr_kzk_leader_and_isr *lai) {
    struct gr_kzk_state_write *w = gr_calloc((size_t)n, sizeof *w);
    for (int i = 0; i < n; i++) w[i] = (struct gr_kzk_state_write){.topic = topic, .partition = i, .lai = lai};
    return w;
}

static int state_version(const char *topic, int p) {
    char path[128];
    snprintf(path, sizeof path, "/brokers/topics/%s/partitions/%d/state", topic, p);
    int i = memzk_find(zk, path);
    return i < 0 ? -1 : zk->v[i].st.version;
}

/* Creates NP states of "big" through kzk in batches of 50 ops (49 items + the check). */
static void create_big(const struct gr_kzk_leader_and_isr *lai) {
    memzk_create(zk, "/brokers/topics", NULL, 0, 0, NULL);
    CHECK(memzk_create(zk, "/brokers/topics/big", "{}", 2, 0, NULL) == 0);
    struct gr_kzk_state_write *w = items_for("big", NP, lai);
    struct gr_kzk_write_result *wr = gr_calloc(NP, sizeof *wr);
    CHECK(gr_kzk_create_partition_states(kzk, ctx.epoch_zk_version, w, NP, wr) == 0);
    int ok = 0;
    for (int i = 0; i < NP; i++) ok += wr[i].rc == 0 && state_version("big", i) == 0;
    CHECK(ok == NP);
    free(wr);
    free(w);
}

static void test_pipelined_create_and_partial_failure(void) {
    setup();
    gr_kzk_set_batch_size(kzk, 50);
    int32_t isr[] = {1, 2, 3};
    struct gr_kzk_leader_and_isr lai = {.leader = 1, .controller_epoch = ctx.epoch, .n_isr = 3, .isr = isr};
    zk->n_multi = zk->n_multi_many = zk->max_multi_many = 0;
    create_big(&lai);
    /* ceil(1000/49) = 21 multis for the partition parents, 21 for the states, 1 for
     * …/partitions; several per multi_many call (8 in flight) */
    CHECK(zk->n_multi == 43);
    CHECK(zk->max_multi_many == 8);
    CHECK(zk->n_multi_many <= 9);

    /* Updates: three items in different batches are stale (another writer got there first). */
    memzk_set(zk, "/brokers/topics/big/partitions/3/state", "{}", 2, -1, NULL);
    memzk_set(zk, "/brokers/topics/big/partitions/500/state", "{}", 2, -1, NULL);
    memzk_set(zk, "/brokers/topics/big/partitions/999/state", "{}", 2, -1, NULL);
    struct gr_kzk_leader_and_isr upd = lai;
    upd.leader = 2;
    upd.leader_epoch = 1;
    upd.zk_version = 0;
    struct gr_kzk_state_write *w = items_for("big", NP, &upd);
    struct gr_kzk_write_result *wr = gr_calloc(NP, sizeof *wr);
    zk->n_multi = 0;
    CHECK(gr_kzk_update_partition_states(kzk, ctx.epoch_zk_version, w, NP, wr) == 0);
    int ok = 0;
    for (int i = 0; i < NP; i++) {
        bool stale = i == 3 || i == 500 || i == 999;
        ok += stale ? (wr[i].rc == GR_KZK_EBADVERSION && state_version("big", i) == 1)
                    : (wr[i].rc == 0 && wr[i].zk_version == 1 && state_version("big", i) == 1);
    }
    CHECK(ok == NP);
    /* 21 batches + one rerun (without the stale item) for each of the three */
    CHECK(zk->n_multi == 24);
    free(wr);
    free(w);
    teardown();
}

static void test_lost_epoch_mid_pipeline(void) {
    setup();
    gr_kzk_set_batch_size(kzk, 50);
    int32_t isr[] = {1, 2, 3};
    struct gr_kzk_leader_and_isr lai = {.leader = 1, .controller_epoch = ctx.epoch, .n_isr = 3, .isr = isr};
    create_big(&lai);
    struct gr_kzk_leader_and_isr upd = lai;
    upd.leader = 2;
    upd.zk_version = 0;
    struct gr_kzk_state_write *w = items_for("big", NP, &upd);
    struct gr_kzk_write_result *wr = gr_calloc(NP, sizeof *wr);
    /* another controller is elected after our first two multis */
    zk->bump_before_multi = gr_strdup("/controller_epoch");
    zk->bump_skip = 2;
    zk->n_multi = zk->n_multi_many = 0;
    CHECK(gr_kzk_update_partition_states(kzk, ctx.epoch_zk_version, w, NP, wr) == GR_ECONTROLLER_MOVED);
    int written = 0, first_unwritten = -1;
    for (int i = 0; i < NP; i++) {
        if (state_version("big", i) == 1) written++;
        else if (first_unwritten < 0) first_unwritten = i;
    }
    CHECK(written == 2 * 49 && first_unwritten == 2 * 49); /* exactly the first two batches */
    for (int i = 0; i < NP; i++) CHECK(wr[i].rc == GR_ECONTROLLER_MOVED);
    /* the rest of the window was in flight (each refused by its own check); nothing after it */
    CHECK(zk->n_multi == 8 && zk->n_multi_many == 1);
    /* and every later guarded write is refused */
    zk->n_multi = 0;
    CHECK(gr_kzk_update_partition_states(kzk, ctx.epoch_zk_version, w, NP, wr) == GR_ECONTROLLER_MOVED);
    CHECK(state_version("big", NP - 1) == 0 && zk->n_multi <= 8);
    free(wr);
    free(w);
    teardown();
}

static void test_ordered_delete_small_batches(void) {
    setup();
    gr_kzk_set_batch_size(kzk, 4);
    int32_t isr[] = {1};
    struct gr_kzk_leader_and_isr lai = {.leader = 1, .controller_epoch = ctx.epoch, .n_isr = 1, .isr = isr};
    memzk_create(zk, "/brokers/topics", NULL, 0, 0, NULL);
    CHECK(memzk_create(zk, "/brokers/topics/d", "{}", 2, 0, NULL) == 0);
    struct gr_kzk_state_write *w = items_for("d", 40, &lai);
    struct gr_kzk_write_result wr[40];
    CHECK(gr_kzk_create_partition_states(kzk, ctx.epoch_zk_version, w, 40, wr) == 0);
    CHECK(state_version("d", 39) == 0);
    CHECK(gr_kzk_delete_topic_guarded(kzk, ctx.epoch_zk_version, "d") == 0);
    CHECK(memzk_find(zk, "/brokers/topics/d") < 0 && memzk_find(zk, "/brokers/topics/d/partitions") < 0);
    free(w);
    teardown();
}

/* All three replicas of every partition go offline in one broker-failure event: one state write
 * per partition (version + 1), leader -1, ISR the last replica Kafka's per-broker writes would
 * leave, leader epoch + 1. */
static void test_one_write_per_partition_offline(void) {
    setup();
    int32_t reps[] = {1, 2, 3, 2, 3, 1, 3, 1, 2};
    create_topic("o", 3, reps, 3);
    struct gr_kzk_tp tps[] = {{(char *)"o", 0}, {(char *)"o", 1}, {(char *)"o", 2}};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, tps, 3) == 0);
    for (int p = 0; p < 3; p++) CHECK(state_version("o", p) == 0);
    clear_sent();
    gr_ctrl_ctx_remove_live_broker(&ctx, 1);
    gr_ctrl_ctx_remove_live_broker(&ctx, 2);
    gr_ctrl_ctx_remove_live_broker(&ctx, 3);
    int32_t dead[] = {1, 2, 3};
    zk->n_multi = 0;
    CHECK(gr_ctrl_on_broker_failure(&sm, dead, 3) == 0);
    for (int p = 0; p < 3; p++) {
        struct gr_kzk_leader_and_isr l;
        CHECK(read_state("o", p, &l) == 0);
        int32_t last[] = {3};
        CHECK(l.zk_version == 1 && l.leader == -1 && l.leader_epoch == 1 && isr_is(&l, last, 1));
        struct gr_ctrl_partition *cp = gr_ctrl_ctx_partition(&ctx, "o", p);
        CHECK(cp->lai.zk_version == 1 && cp->lai.leader == -1);
        for (int r = 1; r <= 3; r++) CHECK(gr_ctrl_replica_state_get(cp, r) == GR_RS_OFFLINE);
        gr_kzk_leader_and_isr_release(&l);
    }
    teardown();
}

/* Two of three replicas go offline in one event while the cached state is stale (a leader wrote
 * its ISR directly): the write from the cache fails with BADVERSION, the state is reread and the
 * partition still gets exactly one successful write. */
static void test_offline_stale_cache_rereads(void) {
    setup();
    int32_t reps[] = {1, 2, 3};
    create_topic("s", 1, reps, 3);
    struct gr_kzk_tp tp = {(char *)"s", 0};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, &tp, 1) == 0);
    /* the leader (1) shrank the ISR to [1,2] in ZooKeeper; the context still says [1,2,3] v0 */
    struct gr_kzk_leader_and_isr l;
    CHECK(read_state("s", 0, &l) == 0);
    l.n_isr = 2;
    CHECK(gr_kzk_update_partition_state_conditional(kzk, "s", 0, &l, &l.zk_version) == 0);
    gr_kzk_leader_and_isr_release(&l);
    clear_sent();
    gr_ctrl_ctx_remove_live_broker(&ctx, 2);
    gr_ctrl_ctx_remove_live_broker(&ctx, 3);
    int32_t dead[] = {2, 3};
    CHECK(gr_ctrl_on_broker_failure(&sm, dead, 2) == 0);
    CHECK(read_state("s", 0, &l) == 0);
    int32_t one[] = {1};
    CHECK(l.zk_version == 2 && l.leader == 1 && isr_is(&l, one, 1));
    gr_kzk_leader_and_isr_release(&l);
    teardown();
}

/* Elections start from the context's cached state (no read). The cache is stale here: the
 * leader (2) added 1 back to the ISR in ZooKeeper (pre-AlterPartition write); the cache says ISR [2].
 * A preferred election to 1 fails on the cache, so it is retried on a read, which finds 1 in the
 * ISR and elects it: only a ZooKeeper read decides "no leader". */
static void test_cached_election_falls_back_to_read(void) {
    setup();
    int32_t reps[] = {1, 2, 3};
    create_topic("e", 1, reps, 3);
    struct gr_kzk_tp tp = {(char *)"e", 0};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, &tp, 1) == 0);
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(&ctx, "e", 0);
    int32_t cached_isr[] = {2};
    struct gr_kzk_leader_and_isr c = {.leader = 2, .leader_epoch = 1, .controller_epoch = ctx.epoch, .n_isr = 1,
                                      .isr = cached_isr, .zk_version = 0};
    int32_t nv;
    CHECK(gr_kzk_update_partition_state_conditional(kzk, "e", 0, &c, &nv) == 0 && nv == 1);
    c.zk_version = 1;
    gr_ctrl_partition_set_state(p, &c); /* the controller saw ISR [2] at version 1 */
    int32_t zk_isr[] = {2, 1};
    struct gr_kzk_leader_and_isr z = c;
    z.isr = zk_isr;
    z.n_isr = 2;
    CHECK(gr_kzk_update_partition_state_conditional(kzk, "e", 0, &z, &nv) == 0 && nv == 2);
    clear_sent();
    struct gr_psm_strategy pref = {.kind = GR_ELECT_PREFERRED};
    int rcs[1] = {-7};
    CHECK(gr_psm_handle_state_changes(&sm, &tp, 1, GR_PS_ONLINE, &pref, rcs) == 0 && rcs[0] == 0);
    struct gr_kzk_leader_and_isr l;
    CHECK(read_state("e", 0, &l) == 0 && l.leader == 1 && l.zk_version == 3 && p->lai.leader == 1);
    gr_kzk_leader_and_isr_release(&l);
    /* a stale cache that does allow the election: the conditional write fails, reread, elect */
    c.zk_version = 2; /* leader 1 at version 3 in ZooKeeper; the cache claims leader 2 at 2 */
    gr_ctrl_partition_set_state(p, &c);
    struct gr_psm_strategy cs = {.kind = GR_ELECT_CONTROLLED_SHUTDOWN};
    ctx.shutting_down = gr_malloc(sizeof(int32_t));
    ctx.shutting_down[0] = 1;
    ctx.n_shutting_down = 1;
    CHECK(gr_psm_handle_state_changes(&sm, &tp, 1, GR_PS_ONLINE, &cs, rcs) == 0 && rcs[0] == 0);
    CHECK(read_state("e", 0, &l) == 0 && l.leader == 2 && l.zk_version == 4 && p->lai.zk_version == 4);
    gr_kzk_leader_and_isr_release(&l);
    ctx.n_shutting_down = 0;
    teardown();
}

/* kzk update jobs (the controlled shutdown's ISR shrinks): a job set to start after the next
 * write runs when that write has returned (inline here: no gr_kzk_set_async), its results are
 * gr_kzk_update_partition_states'; a job never started is dropped unrun. */
static void test_update_jobs(void) {
    setup();
    int32_t isr[] = {1, 2, 3};
    struct gr_kzk_leader_and_isr lai = {.leader = 1, .controller_epoch = ctx.epoch, .n_isr = 3, .isr = isr};
    create_big(&lai);
    struct gr_kzk_leader_and_isr upd = lai;
    upd.leader = 2;
    upd.leader_epoch = 1;
    upd.zk_version = 0;
    struct gr_kzk_state_write *w = items_for("big", NP, &upd);
    struct gr_kzk_job *a = gr_kzk_update_partition_states_job(kzk, ctx.epoch_zk_version, w, 10);
    gr_kzk_job_start_after_next_write(a);
    CHECK(!a->started && state_version("big", 0) == 0);
    struct gr_kzk_write_result wr[10];
    CHECK(gr_kzk_update_partition_states(kzk, ctx.epoch_zk_version, &w[500], 10, wr) == 0);
    CHECK(a->started && state_version("big", 0) == 1 && state_version("big", 500) == 1);
    CHECK(gr_kzk_job_wait(a) == 0);
    int ok = 0;
    for (int i = 0; i < 10; i++) ok += a->res[i].rc == 0 && a->res[i].zk_version == 1;
    CHECK(ok == 10);
    gr_kzk_job_free(a);
    /* dropped before any write: never runs */
    struct gr_kzk_job *b = gr_kzk_update_partition_states_job(kzk, ctx.epoch_zk_version, &w[20], 10);
    gr_kzk_job_start_after_next_write(b);
    gr_kzk_job_free(b);
    CHECK(gr_kzk_update_partition_states(kzk, ctx.epoch_zk_version, &w[600], 10, wr) == 0);
    CHECK(state_version("big", 20) == 0 && state_version("big", 600) == 1);
    /* a write that fails (the controller epoch moved) does not start it; waiting runs it, and it
     * is refused the same way */
    struct gr_kzk_job *c = gr_kzk_update_partition_states_job(kzk, ctx.epoch_zk_version, &w[30], 10);
    gr_kzk_job_start_after_next_write(c);
    CHECK(memzk_set(zk, "/controller_epoch", "3", 1, -1, NULL) == 0);
    CHECK(gr_kzk_update_partition_states(kzk, ctx.epoch_zk_version, &w[700], 10, wr) == GR_ECONTROLLER_MOVED);
    CHECK(!c->started);
    CHECK(gr_kzk_job_wait(c) == GR_ECONTROLLER_MOVED && state_version("big", 30) == 0);
    gr_kzk_job_free(c);
    free(w);
    teardown();
}

int main(void) {
    test_update_jobs();
    test_cached_election_falls_back_to_read();
    test_pipelined_create_and_partial_failure();
    test_lost_epoch_mid_pipeline();
    test_ordered_delete_small_batches();
    test_one_write_per_partition_offline();
    test_offline_stale_cache_rereads();
    if (test_failures) {
        fprintf(stderr, "test_kzk_pipeline: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_kzk_pipeline: ok\n");
    return 0;
}
