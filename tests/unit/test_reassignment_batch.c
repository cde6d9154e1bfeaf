/* Batched partition reassignment over the controller fixture (in-memory ZooKeeper, recording
 * sender): one AlterPartitionReassignments event moving 30 partitions of three topics from
 * brokers 1,2 to 3,4, then the ISR change that completes them all.
 *   - phase U writes each topic znode once (the per-partition code wrote it once per partition);
 *   - ListPartitionReassignments lists the 30 sorted, a partition asked for twice once;
 *   - phase A sends one LeaderAndIsr per broker for all 30 partitions (and one more per new
 *     replica's broker for its NewReplica transition);
 *   - completion: each topic znode written once more, one StopReplica per removed broker, every
 *     partition on [3,4] with a leader among them, nothing left reassigning;
 *   - every write was a guarded multi: with /controller_epoch moved, nothing is written and the
 *     request answers NOT_CONTROLLER. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/flows.h"
#include "controller/reassignment.h"
#include "support/ctrl_fixture.h"

static const char *TOPICS[3] = { "ta", "tb", "tc" };
#define PER 10

static int topic_version(const char *t)
{
    char path[64];
    snprintf(path, sizeof path, "/brokers/topics/%s", t);
    int i = memzk_find(zk, path);
    return i >= 0 ? zk->v[i].st.version : -1;
}

static int16_t answered = -100;
static void respond(void *arg, int16_t top, const struct gr_reassign_api_payload *pl)
{
    (void)arg;
    (void)pl;
    answered = top;
}

static struct gr_reassign_api_payload *move_all(void)
{
    struct gr_reassign_api_payload *pl = gr_reassign_api_payload_new(3 * PER);
    for (int t = 0; t < 3; t++)
        for (int p = 0; p < PER; p++) {
            struct gr_reassign_item *it = &pl->items[t * PER + p];
            it->topic = gr_strdup(TOPICS[t]);
            it->partition = p;
            it->n_replicas = 2;
            it->replicas = gr_malloc(2 * sizeof(int32_t));
            it->replicas[0] = p % 2 ? 4 : 3;
            it->replicas[1] = p % 2 ? 3 : 4;
        }
    pl->respond = respond;
    return pl;
}

static void make_topics(void)
{
    add_live(4, 104);
    int32_t reps[2 * PER];
    for (int p = 0; p < PER; p++) {
        reps[2 * p] = p % 2 ? 2 : 1;
        reps[2 * p + 1] = p % 2 ? 1 : 2;
    }
    struct gr_kzk_tp tps[3 * PER];
    for (int t = 0; t < 3; t++) {
        create_topic(TOPICS[t], PER, reps, 2);
        for (int p = 0; p < PER; p++)
            tps[t * PER + p] = (struct gr_kzk_tp){ (char *)TOPICS[t], p };
    }
    CHECK(gr_ctrl_on_new_partition_creation(&sm, tps, 3 * PER) == 0);
    clear_sent();
}

/* The new replicas caught up: every ISR becomes [old..., 3, 4] (as AlterPartition would write it). */
static void isr_catches_up(void)
{
    for (int t = 0; t < 3; t++)
        for (int p = 0; p < PER; p++) {
            struct gr_kzk_leader_and_isr l;
            CHECK(read_state(TOPICS[t], p, &l) == 0);
            int32_t *isr = gr_malloc(4 * sizeof(int32_t));
            memcpy(isr, l.isr, (size_t)l.n_isr * sizeof(int32_t));
            isr[l.n_isr] = 3;
            isr[l.n_isr + 1] = 4;
            free(l.isr);
            l.isr = isr;
            l.n_isr += 2;
            size_t len;
            char *json = gr_kzk_partition_state_encode(&l, &len);
            char path[64];
            snprintf(path, sizeof path, "/brokers/topics/%s/partitions/%d/state", TOPICS[t], p);
            struct gr_zstat st;
            CHECK(memzk_set(zk, path, json, (int)len, l.zk_version, &st) == 0);
            free(json);
            l.zk_version = st.version;
            gr_ctrl_partition_set_state(gr_ctrl_ctx_partition(&ctx, TOPICS[t], p), &l);
            gr_kzk_leader_and_isr_release(&l);
        }
}

static void test_batch_start_and_complete(void)
{
    setup();
    make_topics();
    int v0[3];
    for (int t = 0; t < 3; t++)
        v0[t] = topic_version(TOPICS[t]);
    struct gr_reassign_api_payload *pl = move_all();
    struct gr_ctrl_event ev = { .type = GR_EV_API_PARTITION_REASSIGNMENT, .payload = pl };
    answered = -100;
    CHECK(gr_reassign_process_api(&sm, NULL, &ev, true) == 0);
    CHECK(answered == GR_KERR_NONE);
    for (int i = 0; i < pl->n; i++)
        CHECK(pl->items[i].err == GR_KERR_NONE);
    gr_reassign_api_payload_free(pl);
    for (int t = 0; t < 3; t++)
        CHECK(topic_version(TOPICS[t]) == v0[t] + 1);
    CHECK(gr_reassign_count(&ctx) == 3 * PER);
    struct gr_ctrl_partition *p0 = gr_ctrl_ctx_partition(&ctx, "tb", 0);
    CHECK(p0->n_replicas == 4 && p0->n_adding == 2 && p0->n_removing == 2);
    /* phase A: one LeaderAndIsr per broker for all 30 partitions (A1: ORS 1,2 and AR 3,4), and
     * one more to 3 and 4 from their NewReplica transition (A2) */
    CHECK(count_sent(GR_API_LEADER_AND_ISR, 1) == 1 && count_sent(GR_API_LEADER_AND_ISR, 2) == 1);
    CHECK(count_sent(GR_API_LEADER_AND_ISR, 3) == 2 && count_sent(GR_API_LEADER_AND_ISR, 4) == 2);
    const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *s = sent_lai(3, "tc", 9);
    CHECK(s && s->IsNew && s->LeaderEpoch == 1);

    /* ListPartitionReassignments: all 30, sorted; a partition asked for twice is listed once */
    struct gr_reassign_list_payload *lp = gr_reassign_list_payload_new();
    lp->all = true;
    struct gr_ctrl_event lev = { .type = GR_EV_LIST_PARTITION_REASSIGNMENTS, .payload = lp };
    CHECK(gr_reassign_process_list(&sm, &lev, true) == 0 && lp->n_out == 3 * PER);
    CHECK(lp->n_out == 3 * PER && strcmp(lp->out[0].topic, "ta") == 0 && lp->out[PER].partition == 0 &&
          strcmp(lp->out[3 * PER - 1].topic, "tc") == 0 && lp->out[3 * PER - 1].partition == PER - 1);
    gr_reassign_list_payload_free(lp);
    lp = gr_reassign_list_payload_new();
    lp->n_req = 3;
    lp->req = gr_calloc(3, sizeof *lp->req);
    lp->req[0] = (struct gr_kzk_tp){ gr_strdup("tb"), 4 };
    lp->req[1] = (struct gr_kzk_tp){ gr_strdup("tb"), 4 };
    lp->req[2] = (struct gr_kzk_tp){ gr_strdup("ta"), 1 };
    lev.payload = lp;
    CHECK(gr_reassign_process_list(&sm, &lev, true) == 0 && lp->n_out == 2);
    CHECK(lp->n_out == 2 && strcmp(lp->out[0].topic, "ta") == 0 && strcmp(lp->out[1].topic, "tb") == 0);
    gr_reassign_list_payload_free(lp);

    isr_catches_up();
    clear_sent();
    CHECK(gr_reassign_maybe_complete(&sm, NULL) == 0);
    CHECK(gr_reassign_count(&ctx) == 0);
    for (int t = 0; t < 3; t++) {
        CHECK(topic_version(TOPICS[t]) == v0[t] + 2);
        for (int p = 0; p < PER; p++) {
            struct gr_ctrl_partition *p1 = gr_ctrl_ctx_partition(&ctx, TOPICS[t], p);
            int32_t want[2] = { p % 2 ? 4 : 3, p % 2 ? 3 : 4 };
            CHECK(p1->n_replicas == 2 && p1->replicas[0] == want[0] && p1->replicas[1] == want[1]);
            struct gr_kzk_leader_and_isr l;
            CHECK(read_state(TOPICS[t], p, &l) == 0);
            CHECK((l.leader == 3 || l.leader == 4) && l.n_isr == 2);
            gr_kzk_leader_and_isr_release(&l);
        }
        char path[64];
        snprintf(path, sizeof path, "/brokers/topics/%s", TOPICS[t]);
        const char *d = zk->v[memzk_find(zk, path)].data;
        CHECK(strstr(d, "\"adding_replicas\":{}") != NULL && strstr(d, "\"removing_replicas\":{}") != NULL);
    }
    CHECK(count_sent(GR_API_STOP_REPLICA, 1) == 1 && count_sent(GR_API_STOP_REPLICA, 2) == 1);
    CHECK(count_sent(GR_API_LEADER_AND_ISR, 3) <= 2 && count_sent(GR_API_LEADER_AND_ISR, 4) <= 2);
    teardown();
}

static void test_fenced(void)
{
    setup();
    make_topics();
    int v0 = topic_version("ta");
    CHECK(memzk_set(zk, "/controller_epoch", "3", 1, -1, NULL) == 0); /* another controller won */
    struct gr_reassign_api_payload *pl = move_all();
    struct gr_ctrl_event ev = { .type = GR_EV_API_PARTITION_REASSIGNMENT, .payload = pl };
    answered = -100;
    CHECK(gr_reassign_process_api(&sm, NULL, &ev, true) == GR_ECONTROLLER_MOVED);
    CHECK(answered == GR_KERR_NOT_CONTROLLER);
    gr_reassign_api_payload_free(pl);
    CHECK(topic_version("ta") == v0 && gr_reassign_count(&ctx) == 0);
    CHECK(count_sent(GR_API_LEADER_AND_ISR, -1) == 0);
    teardown();
}

/* A reassignment that completes while its only target replica is in the ISR but not live (its
 * session expired after the leader had added it back, sim seed 716612): the Reassign election
 * fails, the removed old leader takes the leadership with it (leader -1, ISR [2]). The partition
 * must then be OfflinePartition so that broker 2's start-up elects it; left Online (Kafka's
 * state) no start-up or trigger ever elects it again. */
static void test_leader_removed_goes_offline(void)
{
    setup();
    int32_t reps[2] = { 1, 2 };
    create_topic("lr", 1, reps, 2);
    struct gr_kzk_tp tp = { (char *)"lr", 0 };
    CHECK(gr_ctrl_on_new_partition_creation(&sm, &tp, 1) == 0);
    gr_ctrl_ctx_remove_live_broker(&ctx, 2); /* gone, still in the ISR [1,2] */
    clear_sent();
    struct gr_reassign_api_payload *pl = gr_reassign_api_payload_new(1);
    pl->items[0].topic = gr_strdup("lr");
    pl->items[0].n_replicas = 1;
    pl->items[0].replicas = gr_malloc(sizeof(int32_t));
    pl->items[0].replicas[0] = 2;
    pl->respond = respond;
    struct gr_ctrl_event ev = { .type = GR_EV_API_PARTITION_REASSIGNMENT, .payload = pl };
    CHECK(gr_reassign_process_api(&sm, NULL, &ev, true) == 0);
    gr_reassign_api_payload_free(pl);
    struct gr_kzk_leader_and_isr l;
    CHECK(read_state("lr", 0, &l) == 0);
    int32_t two = 2;
    CHECK(l.leader == -1 && isr_is(&l, &two, 1));
    gr_kzk_leader_and_isr_release(&l);
    CHECK(gr_ctrl_ctx_partition(&ctx, "lr", 0)->state == GR_PS_OFFLINE);
    add_live(2, 202);
    CHECK(gr_ctrl_on_broker_startup(&sm, &two, 1) == 0);
    CHECK(read_state("lr", 0, &l) == 0);
    CHECK(l.leader == 2);
    gr_kzk_leader_and_isr_release(&l);
    teardown();
}

int main(void)
{
    gr_log_set_level(GR_LOG_ERROR);
    test_batch_start_and_complete();
    test_fenced();
    test_leader_removed_goes_offline();
    if (test_failures) {
        fprintf(stderr, "test_reassignment_batch: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_reassignment_batch: ok\n");
    return 0;
}
