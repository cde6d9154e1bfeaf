/* High-watermark and ISR rules of replication/replica_state.c (Kafka 2.7 Partition semantics). */
#include "replication/replica_state.h"

#include <stdio.h>
#include <string.h>

#include "common/kerr.h"
#include "support/check.h"

#define LAG 10000

static void leader_of_three(struct gr_replica_state *st, int64_t leo, int64_t now) {
    int32_t reps[3] = {1, 2, 3};
    gr_rs_init(st, 1);
    CHECK(gr_rs_set_assignment(st, 1, 5, 7, 1, reps, 3, reps, 3) == 0);
    gr_rs_become_leader(st, leo, now, false);
}

int main(void) {
    struct gr_replica_state st;
    int32_t out[GR_RS_MAX_REPLICAS];

    /* 1. A new leader does not advance the HW until every ISR follower fetched. */
    leader_of_three(&st, 100, 1000);
    CHECK(gr_rs_is_leader(&st));
    CHECK(st.nremotes == 2);
    CHECK(st.leader_epoch_start_offset == 100);
    CHECK(gr_rs_hw_candidate(&st, 100, 1000, LAG) == -1);
    gr_rs_update_follower(&st, 2, 100, 0, 1001, 100);
    CHECK(gr_rs_hw_candidate(&st, 100, 1001, LAG) == -1);
    gr_rs_update_follower(&st, 3, 90, 0, 1002, 100);
    CHECK(gr_rs_hw_candidate(&st, 100, 1002, LAG) == 90);
    gr_rs_update_follower(&st, 3, 100, 0, 1003, 100);
    CHECK(gr_rs_hw_candidate(&st, 100, 1003, LAG) == 100);
    CHECK(!gr_rs_update_follower(&st, 9, 100, 0, 1003, 100)); /* not a replica */

    /* 2. The HW waits for the slowest ISR member; leader appends don't move it alone. */
    CHECK(gr_rs_hw_candidate(&st, 150, 1004, LAG) == 100);
    gr_rs_update_follower(&st, 2, 150, 0, 1005, 150);
    CHECK(gr_rs_hw_candidate(&st, 150, 1005, LAG) == 100);
    gr_rs_update_follower(&st, 3, 120, 0, 1006, 150);
    CHECK(gr_rs_hw_candidate(&st, 150, 1006, LAG) == 120);

    /* 3. Out-of-sync: follower 3 stops fetching; after the lag time it is out of sync. Caught-up
     *    time: 3 was caught up at 1003 (fetched 100 when the leader LEO was 100). */
    CHECK(gr_rs_out_of_sync(&st, 150, 1003 + LAG, LAG, out) == 0);
    CHECK(gr_rs_out_of_sync(&st, 150, 1003 + LAG + 1, LAG, out) == 1 && out[0] == 3);
    /* A follower whose LEO equals the leader's is never out of sync. */
    gr_rs_update_follower(&st, 2, 150, 0, 1007, 150);
    CHECK(gr_rs_out_of_sync(&st, 150, 1007 + 5 * LAG, LAG, out) == 1 && out[0] == 3);

    /* 4. Slow follower: each fetch reaches the LEO seen at its previous fetch -> caught up at the
     *    previous fetch time, so it stays in sync while the leader keeps appending. */
    leader_of_three(&st, 0, 0);
    int64_t now = 0, leo = 0;
    for (int i = 0; i < 100; i++) {
        now += 1000;
        int64_t prev_leo = leo;
        leo += 10;
        gr_rs_update_follower(&st, 2, prev_leo, 0, now, leo); /* always one step behind */
        gr_rs_update_follower(&st, 3, leo, 0, now, leo);
    }
    CHECK(gr_rs_out_of_sync(&st, leo, now, LAG, out) == 0);
    /* ...but a follower that falls further behind each time is dropped after the lag time. */
    leader_of_three(&st, 0, 0);
    now = 0;
    leo = 0;
    int64_t f = 0;
    int dropped_at = -1;
    for (int i = 0; i < 100 && dropped_at < 0; i++) {
        now += 1000;
        leo += 10;
        f += 5;
        gr_rs_update_follower(&st, 2, f, 0, now, leo);
        gr_rs_update_follower(&st, 3, leo, 0, now, leo);
        if (gr_rs_out_of_sync(&st, leo, now, LAG, out) == 1) dropped_at = i;
    }
    CHECK(dropped_at >= 9 && dropped_at <= 12);

    /* 5. Shrink proposal: pending shrink keeps the old ISR as maximal ISR (HW held back), blocks
     *    further proposals; committing applies the controller's ISR and zkVersion. */
    leader_of_three(&st, 100, 1000);
    gr_rs_update_follower(&st, 2, 100, 0, 1001, 100);
    gr_rs_update_follower(&st, 3, 50, 0, 1001, 100);
    int32_t gone[1] = {3};
    CHECK(gr_rs_propose_shrink(&st, gone, 1));
    CHECK(st.isr_state == GR_ISR_PENDING_SHRINK && st.nproposed == 2);
    CHECK(!gr_rs_propose_shrink(&st, gone, 1));
    CHECK(!gr_rs_propose_expand(&st, 3));
    CHECK(gr_rs_maximal_isr_size(&st) == 3);
    CHECK(gr_rs_hw_candidate(&st, 100, 1001 + 2 * LAG, LAG) == 50);
    CHECK(gr_rs_out_of_sync(&st, 100, 1001 + 2 * LAG, LAG, out) == 0);
    /* Retriable error -> resend; fatal ones -> give up (still pending). */
    CHECK(gr_rs_apply_alter_partition(&st, GR_KERR_REQUEST_TIMED_OUT, 0, NULL, 0, 0) == -1);
    CHECK(gr_rs_apply_alter_partition(&st, GR_KERR_INVALID_UPDATE_VERSION, 0, NULL, 0, 0) == 0);
    CHECK(st.isr_state == GR_ISR_PENDING_SHRINK);
    /* Stale epoch in the answer is ignored. */
    int32_t newisr[2] = {1, 2};
    CHECK(gr_rs_apply_alter_partition(&st, GR_KERR_NONE, 4, newisr, 2, 8) == 0);
    CHECK(gr_rs_apply_alter_partition(&st, GR_KERR_NONE, 5, newisr, 2, 6) == 0); /* older zkVersion */
    CHECK(gr_rs_apply_alter_partition(&st, GR_KERR_NONE, 5, newisr, 2, 8) == 1);
    CHECK(st.isr_state == GR_ISR_COMMITTED && st.nisr == 2 && st.zk_version == 8);
    CHECK(!gr_rs_in_isr(&st, 3));
    /* Now 3 is outside the ISR and not caught up: the HW no longer waits for it. */
    CHECK(gr_rs_hw_candidate(&st, 100, 1001 + 2 * LAG, LAG) == 100);
    /* An answer with nothing pending is ignored. */
    CHECK(gr_rs_apply_alter_partition(&st, GR_KERR_NONE, 5, newisr, 2, 9) == 0);

    /* 6. Expansion: needs LEO >= HW and >= the epoch start offset; pending expand counts in the
     *    maximal ISR at once. */
    CHECK(!gr_rs_needs_expand(&st, 3, 100));
    gr_rs_update_follower(&st, 3, 100, 0, 30000, 120);
    CHECK(gr_rs_needs_expand(&st, 3, 100));
    CHECK(!gr_rs_needs_expand(&st, 2, 100)); /* already in */
    CHECK(!gr_rs_needs_expand(&st, 3, 110)); /* below the HW */
    /* The controller refuses 3 (INELIGIBLE_REPLICA: restarted under a new broker epoch, shutting
     * down, gone; OPERATION_NOT_ATTEMPTED below v2): the proposal is dropped, the committed ISR
     * stands and no longer waits on 3, and the next fetch may propose again. */
    const int16_t refusals[] = {GR_KERR_INELIGIBLE_REPLICA, GR_KERR_OPERATION_NOT_ATTEMPTED};
    for (int i = 0; i < 2; i++) {
        CHECK(gr_rs_propose_expand(&st, 3));
        CHECK(gr_rs_in_maximal_isr(&st, 3));
        /* A refusal of another proposal (an earlier epoch's, a different ISR or zkVersion: the
         * partition got a LeaderAndIsr and proposed again meanwhile) leaves this one pending: the
         * controller may yet apply it. */
        int32_t sent[3] = {1, 2, 3}, other[3] = {1, 2, 4};
        CHECK(gr_rs_apply_alter_partition(&st, refusals[i], 4, sent, 3, 8) == 0);
        CHECK(gr_rs_apply_alter_partition(&st, refusals[i], 5, sent, 3, 7) == 0);
        CHECK(gr_rs_apply_alter_partition(&st, refusals[i], 5, other, 3, 8) == 0);
        CHECK(gr_rs_apply_alter_partition(&st, refusals[i], 5, sent, 2, 8) == 0);
        CHECK(gr_rs_apply_alter_partition(&st, refusals[i], 0, NULL, 0, 0) == 0);
        CHECK(st.isr_state == GR_ISR_PENDING_EXPAND && st.nproposed == 3 && gr_rs_in_maximal_isr(&st, 3));
        /* the refusal of the pending proposal drops it */
        CHECK(gr_rs_apply_alter_partition(&st, refusals[i], 5, sent, 3, 8) == 0);
        CHECK(st.isr_state == GR_ISR_COMMITTED && st.nproposed == 0 && st.nisr == 2 && st.zk_version == 8);
        CHECK(!gr_rs_in_maximal_isr(&st, 3) && gr_rs_needs_expand(&st, 3, 100));
    }
    /* Unknown topic id / invalid request: give up, still pending (until the next LeaderAndIsr). */
    CHECK(gr_rs_propose_expand(&st, 3));
    CHECK(gr_rs_apply_alter_partition(&st, GR_KERR_UNKNOWN_TOPIC_ID, 0, NULL, 0, 0) == 0);
    CHECK(gr_rs_apply_alter_partition(&st, GR_KERR_INVALID_REQUEST, 0, NULL, 0, 0) == 0);
    CHECK(st.isr_state == GR_ISR_PENDING_EXPAND && st.nproposed == 3);
    CHECK(gr_rs_in_maximal_isr(&st, 3) && !gr_rs_in_isr(&st, 3));
    CHECK(gr_rs_maximal_isr_size(&st) == 3);
    int32_t all[3] = {1, 2, 3};
    CHECK(gr_rs_apply_alter_partition(&st, GR_KERR_NONE, 5, all, 3, 9) == 1);
    CHECK(gr_rs_in_isr(&st, 3));

    /* 7. A caught-up non-ISR replica holds the HW back (so it can join). */
    {
        int32_t reps[3] = {1, 2, 3}, isr2[2] = {1, 2};
        gr_rs_init(&st, 1);
        gr_rs_set_assignment(&st, 1, 0, 0, 1, reps, 3, isr2, 2);
        gr_rs_become_leader(&st, 0, 0, false);
        gr_rs_update_follower(&st, 2, 10, 0, 100, 10);
        gr_rs_update_follower(&st, 3, 10, 0, 100, 10); /* caught up at 100 */
        gr_rs_update_follower(&st, 3, 10, 0, 200, 20); /* behind now, last caught up 100 */
        CHECK(gr_rs_hw_candidate(&st, 20, 200, LAG) == 10);
        gr_rs_update_follower(&st, 2, 20, 0, 210, 20);
        CHECK(gr_rs_hw_candidate(&st, 20, 210, LAG) == 10);
        CHECK(gr_rs_hw_candidate(&st, 20, 100 + LAG + 1, LAG) == 20); /* 3 lagged too long */
    }

    /* 8. A new assignment keeps known followers' state, drops pending changes; epoch moves. */
    leader_of_three(&st, 100, 1000);
    gr_rs_update_follower(&st, 2, 80, 0, 1001, 100);
    gr_rs_propose_shrink(&st, gone, 1);
    {
        int32_t reps[3] = {1, 2, 4}, isr2[2] = {1, 2};
        CHECK(gr_rs_set_assignment(&st, 1, 6, 9, 1, reps, 3, isr2, 2) == 0);
        CHECK(st.isr_state == GR_ISR_COMMITTED && st.leader_epoch == 6 && st.zk_version == 9);
        CHECK(gr_rs_remote(&st, 2)->leo == 80);
        CHECK(gr_rs_remote(&st, 4)->leo == -1);
        CHECK(gr_rs_remote(&st, 3) == NULL);
        gr_rs_become_leader(&st, 100, 2000, true);
        CHECK(gr_rs_remote(&st, 2)->leo == 80); /* was leader: kept */
        int32_t big[GR_RS_MAX_REPLICAS + 1] = {0};
        CHECK(gr_rs_set_assignment(&st, 1, 7, 9, 1, big, GR_RS_MAX_REPLICAS + 1, isr2, 2) < 0);
        CHECK(st.leader_epoch == 6);
    }

    /* 9. Becoming follower. */
    {
        int32_t reps[3] = {1, 2, 3};
        CHECK(gr_rs_set_assignment(&st, 2, 7, 10, 1, reps, 3, reps, 3) == 0);
        CHECK(!gr_rs_is_leader(&st) && st.leader_epoch_start_offset == -1);
    }
    char buf[64];
    CHECK(strcmp(gr_rs_fmt_ids(buf, sizeof buf, all, 3), "1,2,3") == 0);
    gr_rs_destroy(&st);

    /* 10. Memory (issue 14): RF <= GR_RS_INLINE lives in the struct; a larger assignment or ISR
     *     grows the arrays keeping the remote states, the pending proposal and the limit. */
    {
        int32_t reps[3] = {1, 2, 3};
        gr_rs_init(&st, 1);
        CHECK(gr_rs_set_assignment(&st, 1, 5, 7, 1, reps, 3, reps, 3) == 0);
        CHECK(st.heap == NULL && st.cap == GR_RS_INLINE);
        CHECK(sizeof st <= 320);
        int32_t four[4] = {1, 2, 3, 4};
        CHECK(gr_rs_set_assignment(&st, 1, 5, 7, 1, four, 4, reps, 3) == 0);
        CHECK(st.heap == NULL && st.nremotes == 3); /* RF 4: still inline */
        CHECK(gr_rs_set_assignment(&st, 1, 5, 7, 1, reps, 3, reps, 3) == 0);
        gr_rs_become_leader(&st, 100, 1000, false);
        gr_rs_update_follower(&st, 2, 90, 0, 1001, 100);
        int32_t wide[GR_RS_MAX_REPLICAS], isr1[1] = {1};
        for (int i = 0; i < GR_RS_MAX_REPLICAS; i++) wide[i] = i + 1;
        CHECK(gr_rs_set_assignment(&st, 1, 6, 8, 1, wide, GR_RS_MAX_REPLICAS, isr1, 1) == 0);
        CHECK(st.heap != NULL && st.cap == GR_RS_MAX_REPLICAS && st.nremotes == GR_RS_MAX_REPLICAS - 1);
        CHECK(gr_rs_remote(&st, 2)->leo == 90 && gr_rs_remote(&st, 32)->leo == -1);
        CHECK(st.replicas[31] == 32 && st.isr[0] == 1 && st.nisr == 1);
        gr_rs_become_leader(&st, 100, 2000, true);
        gr_rs_update_follower(&st, 32, 100, 0, 2001, 100);
        CHECK(gr_rs_needs_expand(&st, 32, 100) && gr_rs_propose_expand(&st, 32));
        CHECK(gr_rs_maximal_isr_size(&st) == 2 && gr_rs_in_maximal_isr(&st, 32));
        CHECK(gr_rs_apply_alter_partition(&st, GR_KERR_NONE, 6, wide, GR_RS_MAX_REPLICAS, 9) == 1);
        CHECK(st.nisr == GR_RS_MAX_REPLICAS && st.isr[31] == 32);
        CHECK(gr_rs_hw_candidate(&st, 100, 2002, LAG) == -1); /* 30 ISR followers unknown */
        gr_rs_destroy(&st);
    }

    { /* elected_epoch: the epoch at which the broker became leader; a LeaderAndIsr keeping it
       * leader (an ISR shrink by the controller) does not move it (Kafka's makeLeader isNewLeader) */
        struct gr_replica_state es;
        int32_t reps[3] = {1, 2, 3}, isr2[2] = {1, 2};
        gr_rs_init(&es, 1);
        CHECK(es.elected_epoch == -1);
        CHECK(gr_rs_set_assignment(&es, 1, 5, 7, 1, reps, 3, reps, 3) == 0);
        gr_rs_become_leader(&es, 100, 1000, false);
        CHECK(es.elected_epoch == 5);
        CHECK(gr_rs_set_assignment(&es, 1, 6, 8, 1, reps, 3, isr2, 2) == 0);
        gr_rs_become_leader(&es, 100, 1001, true);
        CHECK(es.leader_epoch == 6 && es.elected_epoch == 5);
        CHECK(gr_rs_set_assignment(&es, 2, 7, 9, 1, reps, 3, isr2, 2) == 0); /* follower */
        CHECK(es.elected_epoch == -1);
        CHECK(gr_rs_set_assignment(&es, 1, 8, 10, 1, reps, 3, isr2, 2) == 0);
        gr_rs_become_leader(&es, 120, 1002, false);
        CHECK(es.elected_epoch == 8);
        gr_rs_destroy(&es);
    }

    if (test_failures) fprintf(stderr, "test_replica_state: %d failures\n", test_failures);
    else printf("test_replica_state: ok\n");
    return test_failures ? 1 : 0;
}
