/* Partition and replica state machines, elections through ZooKeeper, the controller flows and
 * AlterPartition, run over the in-memory ZooKeeper and recording sender of tests/support/ctrl_fixture.h.
 *
 * Covered: transition validity tables; New -> Online (state znodes, LeaderAndIsr IsNew);
 * broker failure (offline election, removal from the ISR, an ISR of one never empties); broker
 * start-up and bounce (channel add/remove, UpdateMetadata, replicas online); unclean election
 * from the topic config and the meter; BADVERSION retry; a state written by a newer controller;
 * the controller moving (GR_ECONTROLLER_MOVED, nothing sent); invalid transitions refused;
 * AlterPartition validation codes and the write; ISR change notifications; a controlled shutdown writes
 * the ISR shrinks of the partitions the broker follows before the election's requests go out, and
 * answers once they are written, before their own LeaderAndIsr go out; elections written in
 * rounds are sent a round at a time (a state changed between rounds, the controller moving). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "controller/context.h"
#include "controller/controlled_shutdown.h"
#include "controller/event_manager.h"
#include "controller/flows.h"
#include "controller/partition_sm.h"
#include "controller/replica_sm.h"
#include "controller/request_batch.h"
#include "controller/sender.h"
#include "controller/states.h"
#include "protocol/codec.h"
#include "zk/kzk.h"

#include "support/ctrl_fixture.h"

/* ======================= tests ======================= */

/* The data version of a znode, or -1. */
static int node_version(const char *path) {
    struct gr_zstat st;
    return gr_zkb_exists(gr_kzk_backend(kzk), path, false, &st) == GR_ZOK ? st.version : -1;
}

/* The data version of /brokers/topics/<t>, or -1. */
static int topic_version(const char *t) {
    char path[256];
    snprintf(path, sizeof path, "/brokers/topics/%s", t);
    return node_version(path);
}

static void test_transition_tables(void) {
    /* partition: rows = target, bit i = previous state i allowed */
    static const unsigned want_p[GR_PS_COUNT] = {
        [GR_PS_NONEXISTENT] = 1u << GR_PS_OFFLINE,
        [GR_PS_NEW] = 1u << GR_PS_NONEXISTENT,
        [GR_PS_ONLINE] = (1u << GR_PS_NEW) | (1u << GR_PS_ONLINE) | (1u << GR_PS_OFFLINE),
        [GR_PS_OFFLINE] = (1u << GR_PS_NEW) | (1u << GR_PS_ONLINE) | (1u << GR_PS_OFFLINE),
    };
    for (int to = 0; to < GR_PS_COUNT; to++)
        for (int from = 0; from < GR_PS_COUNT; from++)
            CHECK(gr_partition_transition_valid(from, to) == ((want_p[to] >> from) & 1u));
    unsigned oo = (1u << GR_RS_NEW) | (1u << GR_RS_ONLINE) | (1u << GR_RS_OFFLINE) | (1u << GR_RS_DELETION_INELIGIBLE);
    static unsigned want_r[GR_RS_COUNT];
    want_r[GR_RS_NONEXISTENT] = 1u << GR_RS_DELETION_SUCCESSFUL;
    want_r[GR_RS_NEW] = 1u << GR_RS_NONEXISTENT;
    want_r[GR_RS_ONLINE] = oo;
    want_r[GR_RS_OFFLINE] = oo;
    want_r[GR_RS_DELETION_STARTED] = 1u << GR_RS_OFFLINE;
    want_r[GR_RS_DELETION_SUCCESSFUL] = 1u << GR_RS_DELETION_STARTED;
    want_r[GR_RS_DELETION_INELIGIBLE] = (1u << GR_RS_OFFLINE) | (1u << GR_RS_DELETION_STARTED);
    for (int to = 0; to < GR_RS_COUNT; to++)
        for (int from = 0; from < GR_RS_COUNT; from++)
            CHECK(gr_replica_transition_valid(from, to) == ((want_r[to] >> from) & 1u));
    CHECK(!gr_partition_transition_valid(-1, GR_PS_NEW) && !gr_replica_transition_valid(0, 99));
    CHECK(strcmp(gr_partition_state_name(GR_PS_ONLINE), "OnlinePartition") == 0);
    CHECK(strcmp(gr_replica_state_name(GR_RS_DELETION_INELIGIBLE), "ReplicaDeletionIneligible") == 0);
}

static void test_new_partitions_and_broker_failure(void) {
    setup();
    int32_t reps[] = {1, 2, 3, 2, 3, 1};
    create_topic("t", 2, reps, 3);
    struct gr_kzk_tp tps[] = {{(char *)"t", 0}, {(char *)"t", 1}};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, tps, 2) == 0);
    struct gr_ctrl_partition *p0 = gr_ctrl_ctx_partition(&ctx, "t", 0), *p1 = gr_ctrl_ctx_partition(&ctx, "t", 1);
    CHECK(p0->state == GR_PS_ONLINE && p1->state == GR_PS_ONLINE);
    CHECK(p0->lai.leader == 1 && p0->lai.leader_epoch == 0 && p0->lai.controller_epoch == 2 && p0->lai.n_isr == 3);
    CHECK(p1->lai.leader == 2);
    for (int r = 1; r <= 3; r++) CHECK(gr_ctrl_replica_state_get(p0, r) == GR_RS_ONLINE);
    struct gr_kzk_leader_and_isr l;
    CHECK(read_state("t", 0, &l) == 0 && l.leader == 1 && l.leader_epoch == 0 && l.controller_epoch == 2 && l.zk_version == 0);
    gr_kzk_leader_and_isr_release(&l);
    CHECK(topic_version("t") == 0); /* new partitions: the topic znode is not bumped */
    const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *s = sent_lai(3, "t", 0);
    CHECK(s && s->IsNew && s->Leader == 1);
    CHECK(count_sent(GR_API_UPDATE_METADATA, 3) >= 1);
    clear_sent();

    /* broker 1 dies: t-0 elects 2 (ISR minus 1), t-1 drops 1 from its ISR */
    gr_ctrl_ctx_remove_live_broker(&ctx, 1);
    int32_t dead[] = {1};
    CHECK(gr_ctrl_on_broker_failure(&sm, dead, 1) == 0);
    int32_t w23[] = {2, 3};
    CHECK(p0->state == GR_PS_ONLINE && p0->lai.leader == 2 && p0->lai.leader_epoch == 1 && isr_is(&p0->lai, w23, 2));
    CHECK(p1->lai.leader == 2 && p1->lai.leader_epoch == 1 && isr_is(&p1->lai, w23, 2));
    CHECK(gr_ctrl_replica_state_get(p0, 1) == GR_RS_OFFLINE && gr_ctrl_replica_state_get(p1, 1) == GR_RS_OFFLINE);
    CHECK(read_state("t", 0, &l) == 0 && l.leader == 2 && l.leader_epoch == 1 && isr_is(&l, w23, 2) &&
          l.zk_version == p0->lai.zk_version);
    gr_kzk_leader_and_isr_release(&l);
    CHECK(count_sent(GR_API_LEADER_AND_ISR, 1) == 0 && count_sent(GR_API_STOP_REPLICA, 1) == 0);
    s = sent_lai(3, "t", 0);
    CHECK(s && s->Leader == 2 && !s->IsNew);
    clear_sent();

    /* broker 1 comes back (new registration), then bounces (higher epoch) */
    struct gr_kzk_broker cur[3] = {mkbroker(1, 201), mkbroker(2, 102), mkbroker(3, 103)};
    CHECK(gr_ctrl_process_broker_change(&sm, cur, 3) == 0);
    CHECK(strcmp(chan_log, "+1") == 0);
    CHECK(gr_ctrl_ctx_broker(&ctx, 1) && gr_ctrl_ctx_broker(&ctx, 1)->epoch == 201);
    CHECK(gr_ctrl_replica_state_get(p0, 1) == GR_RS_ONLINE);
    CHECK(sent_lai(1, "t", 0) && sent_lai(1, "t", 1));
    CHECK(count_sent(GR_API_UPDATE_METADATA, 1) >= 1 && count_sent(GR_API_UPDATE_METADATA, 2) >= 1);
    clear_sent();
    cur[0].epoch = 301;
    CHECK(gr_ctrl_process_broker_change(&sm, cur, 3) == 0);
    CHECK(strcmp(chan_log, "-1+1") == 0);
    CHECK(gr_ctrl_ctx_broker(&ctx, 1)->epoch == 301 && gr_ctrl_replica_state_get(p0, 1) == GR_RS_ONLINE);
    clear_sent();
    /* broker 3 deregisters */
    CHECK(gr_ctrl_process_broker_change(&sm, cur, 2) == 0);
    CHECK(strcmp(chan_log, "-3") == 0 && !gr_ctrl_ctx_broker(&ctx, 3));
    CHECK(gr_ctrl_replica_state_get(p0, 3) == GR_RS_OFFLINE);
    teardown();
}

static void test_isr_never_empty_and_unclean(void) {
    setup();
    /* topic "solo" on broker 3 only; topic "u" on [1,2] created while 2 is down */
    int32_t solo[] = {3};
    create_topic("solo", 1, solo, 1);
    gr_ctrl_ctx_remove_live_broker(&ctx, 2);
    int32_t u[] = {1, 2}, cl[] = {1, 2};
    create_topic("u", 1, u, 2);
    create_topic("clean", 1, cl, 2);
    struct gr_kzk_config cfg = {0};
    gr_kzk_config_set(&cfg, "unclean.leader.election.enable", "true");
    CHECK(gr_kzk_set_entity_config(kzk, "topics", "u", &cfg) == 0);
    gr_kzk_config_release(&cfg);
    struct gr_kzk_tp tps[] = {{(char *)"solo", 0}, {(char *)"u", 0}, {(char *)"clean", 0}};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, tps, 3) == 0);
    struct gr_ctrl_partition *ps = gr_ctrl_ctx_partition(&ctx, "solo", 0), *pu = gr_ctrl_ctx_partition(&ctx, "u", 0),
                             *pc = gr_ctrl_ctx_partition(&ctx, "clean", 0);
    int32_t w1[] = {1}, w2[] = {2}, w3[] = {3};
    CHECK(pu->lai.leader == 1 && isr_is(&pu->lai, w1, 1));
    /* 2 comes back: its replicas go online, the ISR stays [1] */
    add_live(2, 202);
    int32_t back[] = {2};
    CHECK(gr_ctrl_on_broker_startup(&sm, back, 1) == 0);
    CHECK(isr_is(&pu->lai, w1, 1) && gr_ctrl_replica_state_get(pu, 2) == GR_RS_ONLINE);
    clear_sent();

    /* 3 dies: solo has no replica left; its ISR keeps [3], leader -1 */
    gr_ctrl_ctx_remove_live_broker(&ctx, 3);
    int32_t d3[] = {3};
    CHECK(gr_ctrl_on_broker_failure(&sm, d3, 1) == 0);
    CHECK(ps->state == GR_PS_OFFLINE && ps->lai.leader == -1 && isr_is(&ps->lai, w3, 1));
    struct gr_kzk_leader_and_isr l;
    CHECK(read_state("solo", 0, &l) == 0 && l.leader == -1 && isr_is(&l, w3, 1) && l.leader_epoch == 1);
    gr_kzk_leader_and_isr_release(&l);
    CHECK(gr_ctrl_ctx_offline_partition_count(&ctx) == 1);
    clear_sent();

    /* 1 dies: "u" allows unclean election -> 2 with ISR [2]; "clean" stays offline */
    gr_ctrl_ctx_remove_live_broker(&ctx, 1);
    int32_t d1[] = {1};
    CHECK(gr_ctrl_on_broker_failure(&sm, d1, 1) == 0);
    CHECK(pu->state == GR_PS_ONLINE && pu->lai.leader == 2 && isr_is(&pu->lai, w2, 1));
    CHECK(pc->state == GR_PS_OFFLINE && pc->lai.leader == -1 && isr_is(&pc->lai, w1, 1));
    CHECK(sm.unclean_elections && gr_meter_count(sm.unclean_elections) == 1);
    /* an explicit unclean election (admin) elects 2 for "clean" as well */
    struct gr_psm_strategy unclean = {.kind = GR_ELECT_OFFLINE, .allow_unclean = true};
    int rcs[1];
    struct gr_kzk_tp tc = {(char *)"clean", 0};
    CHECK(gr_psm_handle_state_changes(&sm, &tc, 1, GR_PS_ONLINE, &unclean, rcs) == 0 && rcs[0] == 0);
    CHECK(pc->lai.leader == 2 && gr_meter_count(sm.unclean_elections) == 2);
    teardown();
}

static void test_retry_fencing_invalid(void) {
    setup();
    int32_t reps[] = {1, 2, 3};
    create_topic("r", 1, reps, 3);
    struct gr_kzk_tp tp = {(char *)"r", 0};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, &tp, 1) == 0);
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(&ctx, "r", 0);
    clear_sent();

    /* a concurrent writer bumps the version right before our write: BADVERSION, reread, retry */
    zk->bump_before_multi = gr_strdup("/brokers/topics/r/partitions/0/state");
    struct gr_psm_strategy cs = {.kind = GR_ELECT_CONTROLLED_SHUTDOWN};
    ctx.shutting_down = gr_malloc(sizeof(int32_t));
    ctx.shutting_down[0] = 1;
    ctx.n_shutting_down = 1;
    int rcs[1] = {-7};
    CHECK(gr_psm_handle_state_changes(&sm, &tp, 1, GR_PS_ONLINE, &cs, rcs) == 0 && rcs[0] == 0);
    int32_t w23[] = {2, 3};
    CHECK(p->lai.leader == 2 && p->lai.leader_epoch == 1 && isr_is(&p->lai, w23, 2) && p->lai.zk_version == 2);
    CHECK(sent_lai(1, "r", 0) != NULL); /* shutting-down replicas still get LeaderAndIsr */
    clear_sent();
    ctx.n_shutting_down = 0;

    /* preferred election back to 1 is impossible (1 not in ISR): failure, nothing changes */
    struct gr_psm_strategy pref = {.kind = GR_ELECT_PREFERRED};
    CHECK(gr_psm_handle_state_changes(&sm, &tp, 1, GR_PS_ONLINE, &pref, rcs) == 0 && rcs[0] == GR_PSM_EFAILED);
    CHECK(p->lai.leader == 2 && p->lai.leader_epoch == 1 && n_sent == 0);

    /* invalid transitions are refused */
    CHECK(gr_psm_handle_state_changes(&sm, &tp, 1, GR_PS_NEW, NULL, rcs) == 0 && rcs[0] == GR_PSM_EFAILED);
    CHECK(p->state == GR_PS_ONLINE);
    struct gr_ctrl_replica rep = {"r", 0, 3};
    CHECK(gr_rsm_handle_state_changes(&sm, &rep, 1, GR_RS_DELETION_SUCCESSFUL) == 0);
    CHECK(gr_ctrl_replica_state_get(p, 3) == GR_RS_ONLINE);
    CHECK(gr_psm_handle_state_changes(&sm, &tp, 1, GR_PS_NONEXISTENT, NULL, rcs) == 0 && rcs[0] == GR_PSM_EFAILED);

    /* a state written by a newer controller aborts the election */
    struct gr_kzk_leader_and_isr l;
    CHECK(read_state("r", 0, &l) == 0);
    l.controller_epoch = 9;
    CHECK(gr_kzk_update_partition_state_conditional(kzk, "r", 0, &l, &l.zk_version) == 0);
    gr_kzk_leader_and_isr_release(&l);
    struct gr_psm_strategy off = {.kind = GR_ELECT_OFFLINE};
    CHECK(gr_psm_handle_state_changes(&sm, &tp, 1, GR_PS_ONLINE, &off, rcs) == 0 && rcs[0] == GR_PSM_EFAILED);
    CHECK(p->lai.leader_epoch == 1);

    /* the controller moved: /controller_epoch changed -> GR_ECONTROLLER_MOVED, nothing sent */
    CHECK(read_state("r", 0, &l) == 0);
    l.controller_epoch = 2;
    CHECK(gr_kzk_update_partition_state_conditional(kzk, "r", 0, &l, &l.zk_version) == 0);
    gr_kzk_leader_and_isr_release(&l);
    CHECK(memzk_set(zk, "/controller_epoch", "3", 1, -1, NULL) == 0);
    clear_sent();
    gr_ctrl_ctx_remove_live_broker(&ctx, 2);
    int32_t d2[] = {2};
    CHECK(gr_ctrl_on_broker_failure(&sm, d2, 1) == GR_ECONTROLLER_MOVED);
    CHECK(n_sent == 0 && gr_ctrl_batch_empty(sm.batch));
    teardown();
}

static struct AlterPartitionResponse last_resp;
static int n_resp;
static int32_t last_isr_version;
static void capture(void *arg, const struct AlterPartitionResponse *r) {
    (void)arg;
    last_resp = *r;
    last_isr_version = r->TopicsCount > 0 && r->Topics[0].PartitionsCount > 0 ? r->Topics[0].Partitions[0].PartitionEpoch : -99;
    n_resp++;
}

static void test_alter_partition(void) {
    setup();
    int32_t reps[] = {1, 2, 3};
    create_topic("a", 1, reps, 3);
    struct gr_kzk_tp tp = {(char *)"a", 0};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, &tp, 1) == 0);
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(&ctx, "a", 0);
    clear_sent();

    /* validation codes */
    CHECK(gr_alter_partition_check_broker(&ctx, 9, 1) == GR_KERR_STALE_BROKER_EPOCH);
    CHECK(gr_alter_partition_check_broker(&ctx, 1, 100) == GR_KERR_STALE_BROKER_EPOCH);
    CHECK(gr_alter_partition_check_broker(&ctx, 1, 101) == GR_KERR_NONE);
    bool already;
    int32_t isr12[] = {1, 2}, isr123[] = {1, 2, 3}, isr14[] = {1, 4}, isr11[] = {1, 1};
#define PROPOSE(ver, le, ids, n, pe) \
    (&(struct gr_alter_partition_proposal){.version = ver, .broker_id = 1, .leader_epoch = le, .isr = ids, .n_isr = n, \
                                          .partition_epoch = pe})
    CHECK(gr_alter_partition_check_partition(&ctx, NULL, PROPOSE(0, 0, isr12, 2, 0), &already) ==
          GR_KERR_UNKNOWN_TOPIC_OR_PARTITION);
    CHECK(gr_alter_partition_check_partition(&ctx, p, PROPOSE(0, -1, isr12, 2, 0), &already) == GR_KERR_FENCED_LEADER_EPOCH);
    /* a leader that knows a newer state than ours: we are probably not the controller any more */
    CHECK(gr_alter_partition_check_partition(&ctx, p, PROPOSE(0, 0, isr12, 2, 5), &already) == GR_KERR_NOT_CONTROLLER);
    CHECK(gr_alter_partition_check_partition(&ctx, p, PROPOSE(0, 1, isr12, 2, 0), &already) == GR_KERR_NOT_CONTROLLER);
    CHECK(gr_alter_partition_check_partition(&ctx, p, PROPOSE(0, 0, isr123, 3, 0), &already) == GR_KERR_NONE && already);
    CHECK(gr_alter_partition_check_partition(&ctx, p, PROPOSE(0, 0, isr12, 2, 0), &already) == GR_KERR_NONE && !already);
    /* not assigned (4), or named twice: INVALID_REQUEST */
    CHECK(gr_alter_partition_check_partition(&ctx, p, PROPOSE(3, 0, isr14, 2, 0), &already) == GR_KERR_INVALID_REQUEST);
    CHECK(gr_alter_partition_check_partition(&ctx, p, PROPOSE(3, 0, isr11, 2, 0), &already) == GR_KERR_INVALID_REQUEST);
    /* KIP-704: no RECOVERING state here (nor any other value) */
    struct gr_alter_partition_proposal rec = *PROPOSE(1, 0, isr12, 2, 0);
    rec.leader_recovery_state = 1;
    CHECK(gr_alter_partition_check_partition(&ctx, p, &rec, &already) == GR_KERR_INVALID_REQUEST);
    rec.leader_recovery_state = 0;
    CHECK(gr_alter_partition_check_partition(&ctx, p, &rec, &already) == GR_KERR_NONE);
    /* KIP-841: a member shutting down is ineligible: INELIGIBLE_REPLICA from v2, OPERATION_NOT_ATTEMPTED below */
    ctx.shutting_down = gr_realloc(ctx.shutting_down, sizeof(int32_t));
    ctx.shutting_down[0] = 2;
    ctx.n_shutting_down = 1;
    CHECK(gr_alter_partition_check_partition(&ctx, p, PROPOSE(2, 0, isr12, 2, 0), &already) == GR_KERR_INELIGIBLE_REPLICA);
    CHECK(gr_alter_partition_check_partition(&ctx, p, PROPOSE(0, 0, isr12, 2, 0), &already) ==
          GR_KERR_OPERATION_NOT_ATTEMPTED);
    CHECK(gr_alter_partition_check_partition(&ctx, p, PROPOSE(2, 0, isr123, 3, 0), &already) == GR_KERR_NONE &&
          already); /* the ISR as it is: answered, nothing written */
    ctx.n_shutting_down = 0;
    /* KIP-903 (v3): each member's broker epoch must be its registration's, or -1 */
    int64_t good[] = {101, 102}, unknown[] = {-1, -1}, stale[] = {101, 7};
    struct gr_alter_partition_proposal v3 = *PROPOSE(3, 0, isr12, 2, 0);
    v3.isr_epochs = good;
    CHECK(gr_alter_partition_check_partition(&ctx, p, &v3, &already) == GR_KERR_NONE);
    v3.isr_epochs = unknown;
    CHECK(gr_alter_partition_check_partition(&ctx, p, &v3, &already) == GR_KERR_NONE);
    v3.isr_epochs = stale;
    CHECK(gr_alter_partition_check_partition(&ctx, p, &v3, &already) == GR_KERR_INELIGIBLE_REPLICA);
    /* a member that is not a live broker */
    gr_ctrl_ctx_remove_live_broker(&ctx, 2);
    CHECK(gr_alter_partition_check_partition(&ctx, p, PROPOSE(3, 0, isr12, 2, 0), &already) == GR_KERR_INELIGIBLE_REPLICA);
    struct gr_kzk_broker b2 = {.id = 2, .epoch = 102};
    gr_ctrl_ctx_add_live_broker(&ctx, &b2);
    CHECK(gr_alter_partition_check_partition(&ctx, p, PROPOSE(3, 0, isr12, 2, 0), &already) == GR_KERR_NONE);
#undef PROPOSE

    /* a real shrink through the event path */
    struct AlterPartitionRequest_PartitionData pd = {.PartitionIndex = 0, .LeaderEpoch = 0, .NewIsrCount = 2,
                                               .NewIsr = isr12, .PartitionEpoch = 0};
    struct AlterPartitionRequest_TopicData td = {.TopicName = (char *)"a", .PartitionsCount = 1, .Partitions = &pd};
    struct AlterPartitionRequest req = {.BrokerId = 1, .BrokerEpoch = 101, .TopicsCount = 1, .Topics = &td};
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_ALTER_PARTITION_RECEIVED);
    ev->broker_id = 1;
    ev->broker_epoch = 101;
    struct gr_ctrl_alter_partition_payload *pl = gr_calloc(1, sizeof *pl);
    pl->request = &req;
    pl->respond = capture;
    ev->payload = pl;
    ev->payload_free = gr_ctrl_alter_partition_payload_free;
    CHECK(gr_ctrl_alter_partition_complete(&sm, ev) == 0);
    CHECK(n_resp == 1 && last_resp.ErrorCode == 0 && last_isr_version == 1);
    gr_ctrl_event_free(ev);
    CHECK(n_resp == 1); /* freeing an answered payload does not answer again */
    CHECK(isr_is(&p->lai, isr12, 2) && p->lai.leader_epoch == 0 && p->lai.zk_version == 1);
    struct gr_kzk_leader_and_isr l;
    CHECK(read_state("a", 0, &l) == 0 && isr_is(&l, isr12, 2) && l.leader_epoch == 0 && l.zk_version == 1);
    gr_kzk_leader_and_isr_release(&l);
    CHECK(count_sent(GR_API_UPDATE_METADATA, -1) == 3);
    clear_sent();

    /* stale version now, then a stale broker epoch, then an unanswered event answers NOT_CONTROLLER */
    struct gr_arena a;
    gr_arena_init(&a);
    struct AlterPartitionResponse resp;
    memset(&resp, 0, sizeof resp);
    CHECK(gr_ctrl_process_alter_partition(&sm, 0, 1, 101, &req, &a, &resp) == 0);
    CHECK(resp.ErrorCode == 0 && resp.Topics[0].Partitions[0].ErrorCode == GR_KERR_NONE); /* already applied */
    pd.NewIsr = isr123;
    pd.NewIsrCount = 3;
    CHECK(gr_ctrl_process_alter_partition(&sm, 0, 1, 101, &req, &a, &resp) == 0);
    CHECK(resp.Topics[0].Partitions[0].ErrorCode == GR_KERR_INVALID_UPDATE_VERSION);
    CHECK(gr_ctrl_process_alter_partition(&sm, 0, 1, 99, &req, &a, &resp) == 0 &&
          resp.ErrorCode == GR_KERR_STALE_BROKER_EPOCH);
    pd.PartitionEpoch = 1;
    zk->bump_before_multi = gr_strdup("/brokers/topics/a/partitions/0/state");
    CHECK(gr_ctrl_process_alter_partition(&sm, 0, 1, 101, &req, &a, &resp) == 0);
    CHECK(resp.Topics[0].Partitions[0].ErrorCode == GR_KERR_INVALID_UPDATE_VERSION); /* BADVERSION in ZooKeeper */
    gr_arena_free(&a);
    pl = gr_calloc(1, sizeof *pl);
    pl->respond = capture;
    gr_ctrl_alter_partition_payload_free(pl);
    CHECK(n_resp == 2 && last_resp.ErrorCode == GR_KERR_NOT_CONTROLLER);
    teardown();
}

/* v2-v3: topics by id (an unknown id: UNKNOWN_TOPIC_ID per partition; the response names topics by
 * the ids asked for), v3's ISR members with their broker epochs (a stale one: INELIGIBLE_REPLICA,
 * nothing written), then the same shrink accepted. */
static void test_alter_partition_by_id(void) {
    setup();
    int32_t reps[] = {1, 2, 3};
    create_topic("a", 1, reps, 3);
    struct gr_kzk_tp tp = {(char *)"a", 0};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, &tp, 1) == 0);
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(&ctx, "a", 0);
    struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(&ctx, "a");
    memset(t->id.b, 0x5a, 16);
    clear_sent();

    struct AlterPartitionRequest_BrokerState isr[] = {{1, 101}, {2, 7}}; /* 2's epoch is 102 */
    struct AlterPartitionRequest_PartitionData pd = {.PartitionIndex = 0, .LeaderEpoch = 0, .NewIsrCount = 0,
                                                     .NewIsrWithEpochsCount = 2, .NewIsrWithEpochs = isr,
                                                     .PartitionEpoch = 0};
    struct AlterPartitionRequest_TopicData td[2] = {{.PartitionsCount = 1, .Partitions = &pd},
                                                    {.PartitionsCount = 1, .Partitions = &pd}};
    memset(td[0].TopicId, 0x33, 16); /* no such topic */
    memset(td[1].TopicId, 0x5a, 16);
    struct AlterPartitionRequest req = {.BrokerId = 1, .BrokerEpoch = 101, .TopicsCount = 2, .Topics = td};
    struct gr_arena a;
    gr_arena_init(&a);
    struct AlterPartitionResponse resp;
    memset(&resp, 0, sizeof resp);
    CHECK(gr_ctrl_process_alter_partition(&sm, 3, 1, 101, &req, &a, &resp) == 0 && resp.ErrorCode == 0);
    CHECK(resp.TopicsCount == 2 && resp.Topics[0].Partitions[0].ErrorCode == GR_KERR_UNKNOWN_TOPIC_ID &&
          memcmp(resp.Topics[0].TopicId, td[0].TopicId, 16) == 0);
    CHECK(resp.Topics[1].Partitions[0].ErrorCode == GR_KERR_INELIGIBLE_REPLICA &&
          memcmp(resp.Topics[1].TopicId, t->id.b, 16) == 0);
    CHECK(p->lai.n_isr == 3 && p->lai.zk_version == 0);
    isr[1].BrokerEpoch = 102;
    CHECK(gr_ctrl_process_alter_partition(&sm, 3, 1, 101, &req, &a, &resp) == 0 && resp.ErrorCode == 0);
    CHECK(resp.Topics[1].Partitions[0].ErrorCode == GR_KERR_NONE && resp.Topics[1].Partitions[0].IsrCount == 2 &&
          resp.Topics[1].Partitions[0].PartitionEpoch == 1);
    int32_t isr12[] = {1, 2};
    CHECK(isr_is(&p->lai, isr12, 2) && p->lai.zk_version == 1);
    /* the same by name at v2 finds nothing: a v2 request's topics are ids */
    td[1].TopicName = (char *)"a";
    memset(td[1].TopicId, 0, 16);
    CHECK(gr_ctrl_process_alter_partition(&sm, 2, 1, 101, &req, &a, &resp) == 0);
    CHECK(resp.Topics[1].Partitions[0].ErrorCode == GR_KERR_UNKNOWN_TOPIC_ID);
    gr_arena_free(&a);
    teardown();
}

static void test_isr_change_notification(void) {
    setup();
    int32_t reps[] = {1, 2, 3};
    create_topic("n", 1, reps, 3);
    struct gr_kzk_tp tp = {(char *)"n", 0};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, &tp, 1) == 0);
    clear_sent();
    /* the leader (pre-AlterPartition) shrinks the ISR itself and notifies */
    struct gr_kzk_leader_and_isr l;
    CHECK(read_state("n", 0, &l) == 0);
    l.n_isr = 1;
    int32_t nv;
    CHECK(gr_kzk_update_partition_state_conditional(kzk, "n", 0, &l, &nv) == 0);
    gr_kzk_leader_and_isr_release(&l);
    CHECK(gr_kzk_create_isr_change_notification(kzk, &tp, 1) == 0);
    CHECK(gr_ctrl_process_isr_change_notification(&sm) == 0);
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(&ctx, "n", 0);
    CHECK(p->lai.n_isr == 1 && p->lai.zk_version == nv);
    CHECK(count_sent(GR_API_UPDATE_METADATA, -1) == 3);
    struct gr_zstrings names = {0};
    CHECK(gr_kzk_get_isr_change_notifications(kzk, false, &names) == 0 && names.count == 0);
    gr_zstrings_free(&names);
    teardown();
}

static void test_failover_startup(void) {
    setup();
    int32_t reps[] = {1, 2, 3, 3, 1, 2};
    create_topic("f", 2, reps, 3);
    /* f-0 has a state with a dead leader (4 not registered, but 2 in ISR); f-1 has none */
    struct gr_kzk_leader_and_isr st = {.leader = 3, .leader_epoch = 5, .controller_epoch = 1, .n_isr = 2,
                                       .isr = (int32_t[]){3, 2}};
    struct gr_kzk_state_write w = {"f", 0, &st};
    struct gr_kzk_write_result wr;
    CHECK(gr_kzk_create_partition_states(kzk, ctx.epoch_zk_version, &w, 1, &wr) == 0 && wr.rc == 0);
    gr_ctrl_partition_set_state(gr_ctrl_ctx_partition(&ctx, "f", 0), &st);
    /* g-0: led by 3 alone in its ISR, no live replica to elect (unclean off) */
    int32_t greps[] = {3, 1};
    create_topic("g", 1, greps, 2);
    struct gr_kzk_leader_and_isr gst = {.leader = 3, .leader_epoch = 2, .controller_epoch = 1, .n_isr = 1,
                                        .isr = (int32_t[]){3}};
    struct gr_kzk_state_write gw = {"g", 0, &gst};
    CHECK(gr_kzk_create_partition_states(kzk, ctx.epoch_zk_version, &gw, 1, &wr) == 0 && wr.rc == 0);
    gr_ctrl_partition_set_state(gr_ctrl_ctx_partition(&ctx, "g", 0), &gst);
    gr_ctrl_ctx_remove_live_broker(&ctx, 3);
    CHECK(gr_ctrl_failover_start_state_machines(&sm) == 0);
    struct gr_ctrl_partition *p0 = gr_ctrl_ctx_partition(&ctx, "f", 0), *p1 = gr_ctrl_ctx_partition(&ctx, "f", 1);
    int32_t w2[] = {2};
    /* f-0 is elected before its dead replica goes Offline (onReplicasBecomeOffline's order, not
     * ZkReplicaStateMachine.startup's): ONE write -- the election, which drops 3 from the ISR -- and
     * the Offline step finds nothing left to write (Kafka's order: the ISR shrink with leader -1,
     * leader epoch 6, then the election, 7) */
    CHECK(p0->state == GR_PS_ONLINE && p0->lai.leader == 2 && p0->lai.leader_epoch == 6 && isr_is(&p0->lai, w2, 1));
    CHECK(node_version("/brokers/topics/f/partitions/0/state") == 1 && p0->lai.zk_version == 1);
    /* ... and before the online replicas' LeaderAndIsr: the first one a survivor gets about f-0
     * names the elected leader, never the dead one */
    CHECK(sent_lai(2, "f", 0) && sent_lai(2, "f", 0)->Leader == 2 && sent_lai(2, "f", 0)->LeaderEpoch == 6);
    CHECK(sent_lai(1, "f", 0) && sent_lai(1, "f", 0)->Leader == 2);
    /* g-0: no election possible; Offline then takes its leader (never its last ISR member) */
    struct gr_ctrl_partition *g0 = gr_ctrl_ctx_partition(&ctx, "g", 0);
    int32_t w3[] = {3};
    CHECK(g0->state == GR_PS_OFFLINE && g0->lai.leader == GR_LEADER_NONE && g0->lai.leader_epoch == 3 &&
          isr_is(&g0->lai, w3, 1) && node_version("/brokers/topics/g/partitions/0/state") == 1);
    CHECK(gr_ctrl_replica_state_get(g0, 3) == GR_RS_OFFLINE);
    CHECK(p1->state == GR_PS_ONLINE && p1->lai.leader == 1);
    CHECK(gr_ctrl_replica_state_get(p0, 3) == GR_RS_OFFLINE && gr_ctrl_replica_state_get(p0, 1) == GR_RS_ONLINE);
    /* the first request is the brokers-only UpdateMetadata */
    CHECK(n_sent > 0 && sent[0].api_key == GR_API_UPDATE_METADATA);
    /* f-1's state was created by a failover: the topic znode is not written, and the standby's
     * stamp (f's partitions znode) moved in the create's own multi */
    CHECK(topic_version("f") == 0);
    CHECK(node_version("/brokers/topics/f/partitions") >= 1);
    struct gr_kzk_topic_assignment a;
    memset(&a, 0, sizeof a);
    const char *names[] = {"f"};
    CHECK(gr_kzk_get_topic_assignments(kzk, names, 1, false, &a) == 0 && a.rc == 0 && a.n_partitions == 2 &&
          a.partitions[0].n_replicas == 3 && a.partitions[1].replicas[0] == 3);
    gr_kzk_topic_assignment_release(&a);
    teardown();
}

/* gr_kzk_get_topic_assignments_since (the standby's assignments kept at failover): a topic znode
 * with the known czxid and version is reported unchanged and not decoded; a setData (version), a
 * delete and create again at version 0 (czxid), an unknown topic (czxid 0) or a missing one are
 * read as gr_kzk_get_topic_assignments reads them. */
static void test_topic_assignments_since(void) {
    setup();
    int32_t reps[] = {1, 2, 2, 3};
    create_topic("s", 2, reps, 2);
    const char *names[] = {"s", "gone"};
    struct gr_kzk_topic_assignment a[2];
    CHECK(gr_kzk_get_topic_assignments(kzk, names, 2, false, a) == 0 && a[0].rc == 0 && !a[0].unchanged &&
          a[0].n_partitions == 2 && a[1].rc == GR_KZK_ENONODE);
    int64_t cz[2] = {a[0].czxid, 77};
    int32_t ver[2] = {a[0].zk_version, 0};
    CHECK(cz[0] != 0);
    gr_kzk_topic_assignment_release(&a[0]);
    gr_kzk_topic_assignment_release(&a[1]);
    /* the known znode: unchanged, nothing decoded */
    CHECK(gr_kzk_get_topic_assignments_since(kzk, names, 2, true, cz, ver, a) == 0 && a[0].rc == 0 &&
          a[0].unchanged && a[0].n_partitions == 0 && a[0].czxid == cz[0] && a[0].zk_version == ver[0] &&
          a[1].rc == GR_KZK_ENONODE && !a[1].unchanged);
    gr_kzk_topic_assignment_release(&a[0]);
    gr_kzk_topic_assignment_release(&a[1]);
    /* unknown (czxid 0): decoded */
    int64_t cz0 = 0;
    CHECK(gr_kzk_get_topic_assignments_since(kzk, names, 1, false, &cz0, ver, a) == 0 && !a[0].unchanged &&
          a[0].n_partitions == 2);
    /* written since: decoded */
    const char *js1 = "{\"version\":1,\"partitions\":{\"0\":[3,1]}}";
    CHECK(memzk_set(zk, "/brokers/topics/s", js1, (int)strlen(js1), -1, NULL) == 0);
    gr_kzk_topic_assignment_release(&a[0]);
    CHECK(gr_kzk_get_topic_assignments_since(kzk, names, 1, false, cz, ver, a) == 0 && a[0].rc == 0 &&
          !a[0].unchanged && a[0].n_partitions == 1 && a[0].partitions[0].replicas[0] == 3);
    gr_kzk_topic_assignment_release(&a[0]);
    /* deleted and created again, back at version 0: a new czxid, decoded */
    const char *js = "{\"version\":1,\"partitions\":{\"0\":[2]}}";
    const char *rn[] = {"r"};
    CHECK(memzk_create(zk, "/brokers/topics/r", js, (int)strlen(js), 0, NULL) == 0);
    CHECK(gr_kzk_get_topic_assignments(kzk, rn, 1, false, a) == 0 && a[0].rc == 0);
    int64_t rcz = a[0].czxid;
    int32_t rver = a[0].zk_version;
    gr_kzk_topic_assignment_release(&a[0]);
    CHECK(memzk_delete(zk, "/brokers/topics/r", -1) == 0);
    CHECK(memzk_create(zk, "/brokers/topics/r", js, (int)strlen(js), 0, NULL) == 0);
    CHECK(gr_kzk_get_topic_assignments_since(kzk, rn, 1, false, &rcz, &rver, a) == 0 && a[0].rc == 0 &&
          a[0].zk_version == rver && a[0].czxid != rcz && !a[0].unchanged && a[0].n_partitions == 1);
    gr_kzk_topic_assignment_release(&a[0]);
    teardown();
}

/* A state create retried after a connection loss finds the znode its first attempt wrote: kzk
 * counts it as created when it holds exactly our JSON (the one rule, landed_already, that retried
 * ISR writes use too); anything else stays NODEEXISTS. */
static void test_create_finds_own_state(void) {
    setup();
    int32_t isr[] = {1};
    struct gr_kzk_leader_and_isr l = {.leader = 1, .leader_epoch = 0, .controller_epoch = ctx.epoch, .n_isr = 1, .isr = isr};
    size_t len;
    char *js = gr_kzk_partition_state_encode(&l, &len);
    memzk_create(zk, "/brokers/topics", NULL, 0, 0, NULL);
    CHECK(memzk_create(zk, "/brokers/topics/x", "{}", 2, 0, NULL) == 0);
    CHECK(memzk_create(zk, "/brokers/topics/x/partitions", NULL, 0, 0, NULL) == 0);
    CHECK(memzk_create(zk, "/brokers/topics/x/partitions/0", NULL, 0, 0, NULL) == 0);
    CHECK(memzk_create(zk, "/brokers/topics/x/partitions/0/state", js, (int)len, 0, NULL) == 0);
    free(js);
    struct gr_kzk_state_write it = {.topic = "x", .partition = 0, .lai = &l};
    struct gr_kzk_write_result res;
    CHECK(gr_kzk_create_partition_states(kzk, ctx.epoch_zk_version, &it, 1, &res) == 0);
    CHECK(res.rc == 0 && res.zk_version == 0);
    l.leader_epoch = 1; /* someone else's state */
    CHECK(gr_kzk_create_partition_states(kzk, ctx.epoch_zk_version, &it, 1, &res) == 0);
    CHECK(res.rc == GR_KZK_EEXISTS);
    teardown();
}

/* ---- controlled shutdown: the followed partitions' ISR shrinks overlap the election's sends ---- */

/* What ZooKeeper held for cs-1 (followed by broker 1) when the election's first LeaderAndIsr
 * (for cs-0, led by broker 1) went out: 1 = broker 1 still in its ISR, 0 = removed, -1 = none. */
static int isr_at_first_lai = -1;

static void cs_send(void *c, int32_t broker, int16_t api_key, int16_t ver, void *req, void (*req_free)(void *),
                    struct gr_ctrl_event *ev) {
    if (api_key == GR_API_LEADER_AND_ISR && isr_at_first_lai < 0) {
        struct gr_kzk_leader_and_isr l;
        CHECK(read_state("cs", 1, &l) == 0);
        isr_at_first_lai = 0;
        for (int i = 0; i < l.n_isr; i++)
            if (l.isr[i] == 1) isr_at_first_lai = 1;
        gr_kzk_leader_and_isr_release(&l);
    }
    rec_ops.send(c, broker, api_key, ver, req, req_free, ev);
}

static void test_controlled_shutdown_isr_shrinks_first(void) {
    setup();
    int32_t reps[] = {1, 2, 3, 2, 1, 3};
    create_topic("cs", 2, reps, 3);
    struct gr_kzk_tp tps[] = {{(char *)"cs", 0}, {(char *)"cs", 1}};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, tps, 2) == 0);
    clear_sent();
    struct gr_ctrl_sender_ops ops = rec_ops;
    ops.send = cs_send;
    sm.sender = &ops;
    struct gr_ctrl_tp_list remaining = {0};
    int rc = -1;
    CHECK(gr_ctrl_do_controlled_shutdown(&sm, 1, -1, &remaining, &rc) == GR_KERR_NONE);
    CHECK(rc == 0 && remaining.n == 0);
    /* the ISR shrink of cs-1 was written right after the election's write, before its sends */
    CHECK(isr_at_first_lai == 0);
    /* the outcome is Kafka's: cs-0 led by 2 without 1 in its ISR, cs-1 still led by 2 without 1;
     * StopReplica(delete=false) for cs-1 to broker 1; broker 1's replica of cs-1 Offline */
    int32_t w23[] = {2, 3};
    struct gr_kzk_leader_and_isr l;
    CHECK(read_state("cs", 0, &l) == 0 && l.leader == 2 && l.leader_epoch == 1 && isr_is(&l, w23, 2));
    gr_kzk_leader_and_isr_release(&l);
    CHECK(read_state("cs", 1, &l) == 0 && l.leader == 2 && l.leader_epoch == 1 && isr_is(&l, w23, 2));
    gr_kzk_leader_and_isr_release(&l);
    struct gr_ctrl_partition *p0 = gr_ctrl_ctx_partition(&ctx, "cs", 0), *p1 = gr_ctrl_ctx_partition(&ctx, "cs", 1);
    CHECK(p0->lai.leader == 2 && isr_is(&p0->lai, w23, 2) && p1->lai.leader == 2 && isr_is(&p1->lai, w23, 2));
    CHECK(p1->lai.zk_version == 1);
    CHECK(gr_ctrl_replica_state_get(p1, 1) == GR_RS_OFFLINE);
    CHECK(count_sent(GR_API_STOP_REPLICA, 1) >= 1);
    CHECK(sent_lai(3, "cs", 1) && sent_lai(3, "cs", 1)->LeaderEpoch == 1);
    gr_ctrl_tp_list_free(&remaining);
    sm.sender = &rec_ops;
    teardown();
}

/* The event's answer: once broker 1 has left every ISR in ZooKeeper, before the LeaderAndIsr
 * that tell the other replicas (for cs-1) are built and sent. */
static int answers, answer_isr_had_1 = -1, answer_lai_sent = -1;
static int16_t answer_err = -1;

static void cs_answer(void *arg, int16_t error, const struct gr_kzk_tp *rem, int n) {
    (void)arg, (void)rem, (void)n;
    answers++;
    answer_err = error;
    struct gr_kzk_leader_and_isr l;
    CHECK(read_state("cs", 1, &l) == 0);
    answer_isr_had_1 = 0;
    for (int i = 0; i < l.n_isr; i++)
        if (l.isr[i] == 1) answer_isr_had_1 = 1;
    gr_kzk_leader_and_isr_release(&l);
    const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *st = sent_lai(3, "cs", 1);
    answer_lai_sent = st && st->LeaderEpoch == 1;
}

static void test_controlled_shutdown_answer_after_isr_writes(void) {
    setup();
    int32_t reps[] = {1, 2, 3, 2, 1, 3};
    create_topic("cs", 2, reps, 3);
    struct gr_kzk_tp tps[] = {{(char *)"cs", 0}, {(char *)"cs", 1}};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, tps, 2) == 0);
    clear_sent();
    struct gr_ctrl_cs_payload *pl = gr_calloc(1, sizeof *pl);
    pl->respond = cs_answer;
    struct gr_ctrl_event *ev = gr_ctrl_cs_event_new(1, -1, pl);
    CHECK(gr_ctrl_cs_complete(&sm, ev) == 0);
    CHECK(answers == 1 && answer_err == GR_KERR_NONE);
    CHECK(answer_isr_had_1 == 0); /* Kafka's order: the ISR shrinks are written first */
    CHECK(answer_lai_sent == 0);  /* their LeaderAndIsr are built and sent after the answer */
    CHECK(sent_lai(3, "cs", 1) && sent_lai(3, "cs", 1)->LeaderEpoch == 1); /* ... in the same event */
    gr_ctrl_event_free(ev);
    CHECK(answers == 1);
    teardown();
}


/* gr_rsm_startup_online without its DEBUG lines (one LeaderAndIsr add per partition, taken
 * from the context) sends exactly what the general path sends (DEBUG on: the replica list
 * through handleStateChanges(OnlineReplica)), byte for byte and in the same order, and leaves the
 * same replica states -- with offline replicas (an unregistered broker in and out of an ISR, an
 * offline log dir, a partition without a state) and the offline step after it. */
struct wire_req {
    int32_t broker;
    int16_t api_key;
    struct gr_wbuf w;
};

static int16_t ctrl_version(int16_t api_key) {
    if (api_key == GR_API_LEADER_AND_ISR) return GR_CTRL_LEADER_AND_ISR_VERSION;
    if (api_key == GR_API_UPDATE_METADATA) return GR_CTRL_UPDATE_METADATA_VERSION;
    return GR_CTRL_STOP_REPLICA_VERSION;
}

static int startup_wire(bool debug, struct wire_req *out, int max, int *states, int *n_states) {
    setup();
    int32_t r_b[] = {1, 2, 3, 2, 3, 4, 3, 4, 1, 4, 1, 2};
    int32_t r_a[] = {2, 1, 3, 2, 1, 4};
    create_topic("b", 4, r_b, 3);
    create_topic("a", 3, r_a, 2);
    /* states: b-0 (all online), b-1 and b-2 (4 in the ISR / not), a-0 (2's log dir offline), a-1;
     * b-3 and a-2 have none */
    struct { const char *t; int p; int32_t leader; int32_t isr[3]; int n_isr; } st[] = {
        {"b", 0, 1, {1, 2, 3}, 3}, {"b", 1, 2, {2, 3, 4}, 3}, {"b", 2, 3, {3, 1}, 2},
        {"a", 0, 2, {2, 1}, 2},    {"a", 1, 3, {3, 2}, 2},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(st); i++) {
        struct gr_kzk_leader_and_isr l = {.leader = st[i].leader, .leader_epoch = 4, .controller_epoch = 1,
                                          .n_isr = st[i].n_isr, .isr = st[i].isr};
        struct gr_kzk_state_write w = {st[i].t, st[i].p, &l};
        struct gr_kzk_write_result wr;
        CHECK(gr_kzk_create_partition_states(kzk, ctx.epoch_zk_version, &w, 1, &wr) == 0 && wr.rc == 0);
        gr_ctrl_partition_set_state(gr_ctrl_ctx_partition(&ctx, st[i].t, st[i].p), &l);
    }
    gr_ctrl_replica_set_offline_dir(gr_ctrl_ctx_partition(&ctx, "a", 0), 2, true);
    gr_log_set_level(debug ? GR_LOG_DEBUG : GR_LOG_INFO);
    struct gr_ctrl_replica_list offline = {0};
    gr_rsm_startup_init(&sm, &offline);
    CHECK(gr_rsm_startup_online(&sm) == 0);
    CHECK(gr_rsm_handle_state_changes(&sm, offline.v, offline.n, GR_RS_OFFLINE) == 0);
    gr_ctrl_replica_list_free(&offline);
    gr_log_set_level(GR_LOG_INFO);
    int n = 0;
    for (int i = 0; i < n_sent && n < max; i++, n++) {
        out[n].broker = sent[i].broker;
        out[n].api_key = sent[i].api_key;
        gr_wbuf_init(&out[n].w);
        CHECK(gr_proto_encode_request(sent[i].api_key, ctrl_version(sent[i].api_key), 1, "c", sent[i].req,
                                      &out[n].w) == 0);
    }
    *n_states = 0;
    const char *names[] = {"b", "a"};
    for (int t = 0; t < 2; t++) {
        struct gr_ctrl_topic *tp = gr_ctrl_ctx_topic(&ctx, names[t]);
        for (int p = 0; p < tp->n_partitions; p++)
            for (int r = 0; r < tp->partitions[p].n_replicas; r++)
                states[(*n_states)++] = gr_ctrl_replica_state_get(&tp->partitions[p], tp->partitions[p].replicas[r]);
    }
    teardown();
    return n;
}

static void test_startup_online_same_requests(void) {
    static struct wire_req fast[32], gen[32];
    int st_fast[64], st_gen[64], ns_fast, ns_gen;
    int n_fast = startup_wire(false, fast, 32, st_fast, &ns_fast);
    int n_gen = startup_wire(true, gen, 32, st_gen, &ns_gen);
    CHECK(n_fast == n_gen && n_fast >= 9); /* online: 3 LeaderAndIsr + 3 UpdateMetadata; offline ... */
    for (int i = 0; i < n_fast && i < n_gen; i++) {
        CHECK(fast[i].broker == gen[i].broker && fast[i].api_key == gen[i].api_key);
        CHECK(fast[i].w.len == gen[i].w.len && memcmp(fast[i].w.p, gen[i].w.p, fast[i].w.len) == 0);
    }
    CHECK(ns_fast == ns_gen && memcmp(st_fast, st_gen, (size_t)ns_fast * sizeof *st_fast) == 0);
    for (int i = 0; i < n_fast; i++) gr_wbuf_free(&fast[i].w);
    for (int i = 0; i < n_gen; i++) gr_wbuf_free(&gen[i].w);
}

/* Elections written in rounds (kzk: 2 ops per multi, 2 multis in flight = rounds of 4 states)
 * are sent a round at a time: each LeaderAndIsr names only partitions whose elected state is in
 * ZooKeeper when it goes out. Then the failure paths between rounds: another writer changes a
 * state of a later round (BADVERSION: reread, elected again, sent with the last part), and the controller moves
 * after the first round (its requests went out; nothing of the later rounds is written or sent). */
static int rounds_broker, rounds_lai, rounds_sizes[16], rounds_unwritten, rounds_bump_epoch_at = -1;

static void rounds_send(void *c, int32_t broker, int16_t api_key, int16_t ver, void *req, void (*req_free)(void *),
                        struct gr_ctrl_event *ev) {
    if (api_key == GR_API_LEADER_AND_ISR && broker == rounds_broker) {
        const struct LeaderAndIsrRequest *r = req;
        int n = 0;
        for (int t = 0; t < r->TopicStatesCount; t++)
            for (int i = 0; i < r->TopicStates[t].PartitionStatesCount; i++, n++) {
                const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *ps = &r->TopicStates[t].PartitionStates[i];
                struct gr_kzk_leader_and_isr l;
                if (read_state(r->TopicStates[t].TopicName, ps->PartitionIndex, &l) != 0 ||
                    l.leader_epoch != ps->LeaderEpoch || l.leader != ps->Leader)
                    rounds_unwritten++;
                gr_kzk_leader_and_isr_release(&l);
            }
        if (rounds_lai < 16) rounds_sizes[rounds_lai] = n;
        if (++rounds_lai == rounds_bump_epoch_at) CHECK(memzk_set(zk, "/controller_epoch", "3", 1, -1, NULL) == 0);
    }
    rec_ops.send(c, broker, api_key, ver, req, req_free, ev);
}

static void rounds_reset(int32_t broker) {
    clear_sent();
    rounds_broker = broker;
    rounds_lai = rounds_unwritten = 0;
    memset(rounds_sizes, 0, sizeof rounds_sizes);
}

static void test_elections_sent_per_round(void) {
    setup();
    gr_kzk_set_batch_size(kzk, 3);
    gr_kzk_set_pipeline_depth(kzk, 2);
    CHECK(gr_kzk_state_write_round(kzk) == 4);
    int32_t reps[30];
    for (int i = 0; i < 10; i++) reps[3 * i] = 1, reps[3 * i + 1] = 2, reps[3 * i + 2] = 3;
    create_topic("e", 10, reps, 3);
    struct gr_kzk_tp tps[10];
    for (int i = 0; i < 10; i++) tps[i] = (struct gr_kzk_tp){(char *)"e", i};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, tps, 10) == 0);
    struct gr_ctrl_sender_ops ops = rec_ops;
    ops.send = rounds_send;
    sm.sender = &ops;

    /* broker 1 dies: 10 elections in rounds of 4, 4, 2 -> a LeaderAndIsr each to broker 2 (then
     * the replica state machine's, of all 10) */
    rounds_reset(2);
    gr_ctrl_ctx_remove_live_broker(&ctx, 1);
    int32_t dead[] = {1};
    CHECK(gr_ctrl_on_broker_failure(&sm, dead, 1) == 0);
    CHECK(rounds_sizes[0] == 4 && rounds_sizes[1] == 4 && rounds_sizes[2] == 2 && rounds_unwritten == 0);
    for (int i = 0; i < 10; i++) {
        const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *st = sent_lai(2, "e", i);
        CHECK(st && st->Leader == 2 && st->LeaderEpoch == 1);
        CHECK(gr_ctrl_ctx_partition(&ctx, "e", i)->lai.leader == 2);
    }

    /* broker 2 dies too; another writer changes e-9's state (third round) right before its
     * multi: e-9 is reread and elected again in a round of its own */
    rounds_reset(3);
    zk->bump_before_multi = gr_strdup("/brokers/topics/e/partitions/9/state");
    zk->bump_skip = 4; /* the first two rounds (two multis each) go through untouched */
    gr_ctrl_ctx_remove_live_broker(&ctx, 2);
    int32_t dead2[] = {2};
    CHECK(gr_ctrl_on_broker_failure(&sm, dead2, 1) == 0);
    /* e-9 failed its write (BADVERSION), was reread and written again: it goes out with e-8 in
     * the last part of the batch (the part handle_state_changes sends) */
    CHECK(rounds_sizes[0] == 4 && rounds_sizes[1] == 4 && rounds_sizes[2] == 2 && rounds_unwritten == 0);
    CHECK(node_version("/brokers/topics/e/partitions/9/state") == 3);
    for (int i = 0; i < 10; i++) {
        const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *st = sent_lai(3, "e", i);
        struct gr_kzk_leader_and_isr l;
        CHECK(read_state("e", i, &l) == 0 && l.leader == 3);
        CHECK(st && st->Leader == 3 && st->LeaderEpoch == l.leader_epoch);
        CHECK(gr_ctrl_ctx_partition(&ctx, "e", i)->lai.zk_version == l.zk_version);
        gr_kzk_leader_and_isr_release(&l);
    }

    /* both come back; a topic led by 3 with 1 and 2 in its ISR; broker 3 dies and the
     * controller moves once the first round is sent */
    struct gr_kzk_broker cur[3] = {mkbroker(1, 201), mkbroker(2, 202), mkbroker(3, 103)};
    CHECK(gr_ctrl_process_broker_change(&sm, cur, 3) == 0);
    int32_t freps[30];
    for (int i = 0; i < 10; i++) freps[3 * i] = 3, freps[3 * i + 1] = 1, freps[3 * i + 2] = 2;
    create_topic("f", 10, freps, 3);
    for (int i = 0; i < 10; i++) tps[i] = (struct gr_kzk_tp){(char *)"f", i};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, tps, 10) == 0);
    rounds_reset(1);
    rounds_bump_epoch_at = 1;
    gr_ctrl_ctx_remove_live_broker(&ctx, 3);
    int32_t dead3[] = {3};
    CHECK(gr_ctrl_on_broker_failure(&sm, dead3, 1) == GR_ECONTROLLER_MOVED);
    CHECK(rounds_lai == 1 && rounds_sizes[0] == 4 && rounds_unwritten == 0 && gr_ctrl_batch_empty(sm.batch));
    int moved = 0;
    for (int i = 0; i < 10; i++) {
        struct gr_kzk_leader_and_isr l;
        CHECK(read_state("f", i, &l) == 0);
        if (l.leader != 3) moved++;
        CHECK((sent_lai(1, "f", i) != NULL) == (l.leader != 3)); /* sent exactly what was written */
        gr_kzk_leader_and_isr_release(&l);
    }
    CHECK(moved == 4);
    rounds_bump_epoch_at = -1;
    sm.sender = &rec_ops;
    teardown();
}


/* A controlled shutdown whose elections span several rounds (11 led partitions in rounds of 4, 4,
 * 3): each part goes out as its round is written, the ISR shrink of the partition the broker
 * follows (its job starts after the last round) is written before the answer, and that
 * shrink's LeaderAndIsr goes out after it, as with a single round. */
static void test_controlled_shutdown_elections_in_rounds(void) {
    setup();
    gr_kzk_set_batch_size(kzk, 3);
    gr_kzk_set_pipeline_depth(kzk, 2);
    int32_t reps[] = {1, 2, 3, 2, 1, 3};
    create_topic("cs", 2, reps, 3);
    int32_t mreps[30];
    for (int i = 0; i < 10; i++) mreps[3 * i] = 1, mreps[3 * i + 1] = 2, mreps[3 * i + 2] = 3;
    create_topic("cm", 10, mreps, 3);
    struct gr_kzk_tp tps[] = {{(char *)"cs", 0}, {(char *)"cs", 1}};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, tps, 2) == 0);
    struct gr_kzk_tp mt[10];
    for (int i = 0; i < 10; i++) mt[i] = (struct gr_kzk_tp){(char *)"cm", i};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, mt, 10) == 0);
    struct gr_ctrl_sender_ops ops = rec_ops;
    ops.send = rounds_send;
    sm.sender = &ops;
    rounds_reset(2);
    answers = 0;
    struct gr_ctrl_cs_payload *pl = gr_calloc(1, sizeof *pl);
    pl->respond = cs_answer;
    struct gr_ctrl_event *ev = gr_ctrl_cs_event_new(1, -1, pl);
    CHECK(gr_ctrl_cs_complete(&sm, ev) == 0);
    CHECK(answers == 1 && answer_err == GR_KERR_NONE);
    CHECK(answer_isr_had_1 == 0 && answer_lai_sent == 0);
    /* to broker 2: the three election parts, then the ISR shrink's LeaderAndIsr (cs-1) */
    CHECK(rounds_lai == 4 && rounds_sizes[0] == 4 && rounds_sizes[1] == 4 && rounds_sizes[2] == 3 &&
          rounds_sizes[3] == 1 && rounds_unwritten == 0);
    for (int i = 0; i < 10; i++) {
        struct gr_kzk_leader_and_isr l;
        CHECK(read_state("cm", i, &l) == 0 && l.leader == 2);
        gr_kzk_leader_and_isr_release(&l);
    }
    gr_ctrl_event_free(ev);
    sm.sender = &rec_ops;
    teardown();
}

int main(void) {
    test_create_finds_own_state();
    test_controlled_shutdown_answer_after_isr_writes();
    test_controlled_shutdown_isr_shrinks_first();
    test_transition_tables();
    test_new_partitions_and_broker_failure();
    test_isr_never_empty_and_unclean();
    test_retry_fencing_invalid();
    test_alter_partition();
    test_alter_partition_by_id();
    test_isr_change_notification();
    test_failover_startup();
    test_topic_assignments_since();
    test_startup_online_same_requests();
    test_elections_sent_per_round();
    test_controlled_shutdown_elections_in_rounds();
    if (test_failures) {
        fprintf(stderr, "test_state_machines: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_state_machines: ok\n");
    return 0;
}
