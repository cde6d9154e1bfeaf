/* Leader election strategies (controller/election.h), table-driven: one row per case of the
 * reference's §4 table (Offline clean/unclean, Reassign, Preferred, ControlledShutdown), run
 * against a real controller context. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "controller/context.h"
#include "controller/election.h"
#include "controller/states.h"
#include "support/check.h"

#define MAXR 8
#define END (-99) /* list terminator */

struct row {
    const char *name;
    enum gr_election_strategy strategy;
    int32_t replicas[MAXR], removing[MAXR], isr[MAXR], live[MAXR], shutting[MAXR];
    bool unclean;
    int32_t want_leader; /* -1: no election */
    int32_t want_isr[MAXR];
    int32_t want_recipients[MAXR];
    bool want_unclean;
};

static int len(const int32_t *v) {
    int n = 0;
    while (v[n] != END) n++;
    return n;
}

static bool same(const int32_t *got, int n, const int32_t *want) {
    if (n != len(want)) return false;
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) return false;
    return true;
}

static const struct row rows[] = {
    {"offline: first live ISR member", GR_ELECT_OFFLINE, {1, 2, 3, END}, {END}, {1, 2, 3, END}, {2, 3, END}, {END},
     false, 2, {2, 3, END}, {2, 3, END}, false},
    {"offline: assignment order decides", GR_ELECT_OFFLINE, {3, 1, 2, END}, {END}, {1, 2, END}, {1, 2, 3, END}, {END},
     false, 1, {1, 2, END}, {3, 1, 2, END}, false},
    {"offline: no live ISR, unclean off", GR_ELECT_OFFLINE, {1, 2, 3, END}, {END}, {1, END}, {2, 3, END}, {END},
     false, -1, {END}, {2, 3, END}, false},
    {"offline: no live ISR, unclean on", GR_ELECT_OFFLINE, {1, 2, 3, END}, {END}, {1, END}, {2, 3, END}, {END}, true,
     2, {2, END}, {2, 3, END}, true},
    {"offline: live ISR wins over unclean", GR_ELECT_OFFLINE, {1, 2, 3, END}, {END}, {1, 3, END}, {2, 3, END}, {END},
     true, 3, {3, END}, {2, 3, END}, false},
    {"offline: nothing live", GR_ELECT_OFFLINE, {1, 2, END}, {END}, {1, 2, END}, {END}, {END}, true, -1, {END},
     {END}, false},
    {"offline: shutting down is not live", GR_ELECT_OFFLINE, {1, 2, END}, {END}, {1, 2, END}, {1, 2, END}, {1, END},
     false, 2, {2, END}, {2, END}, false},
    {"reassign: first live target in ISR", GR_ELECT_REASSIGN, {1, 2, 3, 4, END}, {1, END}, {1, 2, 3, END},
     {1, 2, 3, 4, END}, {END}, false, 2, {1, 2, 3, END}, {2, 3, 4, END}, false},
    {"reassign: removing replica never leads", GR_ELECT_REASSIGN, {1, 4, END}, {1, END}, {1, END}, {1, 4, END},
     {END}, false, -1, {END}, {4, END}, false},
    {"reassign: dead target skipped", GR_ELECT_REASSIGN, {4, 5, 1, END}, {1, END}, {1, 4, 5, END}, {1, 5, END},
     {END}, false, 5, {1, 4, 5, END}, {4, 5, END}, false},
    {"preferred: head live and in ISR", GR_ELECT_PREFERRED, {2, 1, END}, {END}, {1, 2, END}, {1, 2, END}, {END},
     false, 2, {1, 2, END}, {2, 1, END}, false},
    {"preferred: head not in ISR", GR_ELECT_PREFERRED, {2, 1, END}, {END}, {1, END}, {1, 2, END}, {END}, false, -1,
     {END}, {2, 1, END}, false},
    {"preferred: head dead", GR_ELECT_PREFERRED, {2, 1, END}, {END}, {1, 2, END}, {1, END}, {END}, false, -1, {END},
     {2, 1, END}, false},
    {"controlled shutdown: skip shutting-down leader", GR_ELECT_CONTROLLED_SHUTDOWN, {1, 2, 3, END}, {END},
     {1, 2, 3, END}, {1, 2, 3, END}, {1, END}, false, 2, {2, 3, END}, {1, 2, 3, END}, false},
    {"controlled shutdown: only the shutting-down broker in ISR", GR_ELECT_CONTROLLED_SHUTDOWN, {1, 2, END}, {END},
     {1, END}, {1, 2, END}, {1, END}, false, -1, {END}, {1, 2, END}, false},
    {"controlled shutdown: dead replica neither leads nor receives", GR_ELECT_CONTROLLED_SHUTDOWN, {1, 2, 3, END},
     {END}, {1, 3, END}, {1, 3, END}, {1, END}, false, 3, {3, END}, {1, 3, END}, false},
};

static void setup(struct gr_ctrl_context *ctx, const struct row *r) {
    gr_ctrl_ctx_init(ctx);
    for (int i = 0; r->live[i] != END; i++) {
        struct gr_kzk_broker b = {.id = r->live[i], .epoch = 100 + r->live[i], .jmx_port = -1};
        gr_ctrl_ctx_add_live_broker(ctx, &b);
    }
    ctx->n_shutting_down = len(r->shutting);
    ctx->shutting_down = gr_malloc(sizeof(int32_t) * MAXR);
    memcpy(ctx->shutting_down, r->shutting, sizeof(int32_t) * MAXR);
    struct gr_kzk_topic_assignment a = {.topic = (char *)"t", .n_partitions = 1};
    a.partitions = gr_calloc(1, sizeof *a.partitions);
    a.partitions[0].n_replicas = len(r->replicas);
    a.partitions[0].replicas = gr_malloc(sizeof(int32_t) * MAXR);
    memcpy(a.partitions[0].replicas, r->replicas, sizeof(int32_t) * MAXR);
    a.partitions[0].n_removing = len(r->removing);
    a.partitions[0].removing = gr_malloc(sizeof(int32_t) * MAXR);
    memcpy(a.partitions[0].removing, r->removing, sizeof(int32_t) * MAXR);
    gr_ctrl_ctx_put_topic(ctx, &a);
    a.topic = NULL;
    gr_kzk_topic_assignment_release(&a);
}

static void run_rows(void) {
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct row *r = &rows[i];
        struct gr_ctrl_context ctx;
        setup(&ctx, r);
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(&ctx, "t", 0);
        struct gr_kzk_leader_and_isr cur = {.leader = r->isr[0] == END ? -1 : r->isr[0],
                                            .leader_epoch = 7,
                                            .controller_epoch = 3,
                                            .n_isr = len(r->isr),
                                            .isr = (int32_t *)r->isr,
                                            .zk_version = 11};
        struct gr_election_result er;
        gr_elect_partition(&ctx, p, &cur, r->strategy, r->unclean, &er);
        bool ok = true;
        if (r->want_leader < 0) {
            ok = ok && !er.elected;
        } else {
            ok = ok && er.elected && er.lai.leader == r->want_leader && same(er.lai.isr, er.lai.n_isr, r->want_isr) &&
                 er.lai.leader_epoch == 8 && er.lai.zk_version == 11;
        }
        ok = ok && same(er.recipients, er.n_recipients, r->want_recipients) && er.unclean == r->want_unclean;
        if (!ok) {
            fprintf(stderr, "row '%s': elected=%d leader=%d n_isr=%d n_recipients=%d unclean=%d\n", r->name,
                    er.elected, er.lai.leader, er.lai.n_isr, er.n_recipients, er.unclean);
            test_failures++;
        }
        gr_election_result_release(&er);
        gr_ctrl_ctx_release(&ctx);
    }
}

static void algorithms(void) {
    int32_t a[] = {1, 2, 3}, isr[] = {3}, live[] = {2, 3}, sd[] = {3};
    bool u;
    CHECK(gr_elect_offline_leader(a, 3, isr, 1, live, 2, false, &u) == 3 && !u);
    CHECK(gr_elect_offline_leader(a, 3, isr, 1, live, 1, false, &u) == -1 && !u);
    CHECK(gr_elect_offline_leader(a, 3, isr, 1, live, 1, true, &u) == 2 && u);
    CHECK(gr_elect_offline_leader(a, 3, isr, 0, live, 0, true, &u) == -1);
    CHECK(gr_elect_reassign_leader(a, 3, isr, 1, live, 2) == 3);
    CHECK(gr_elect_preferred_leader(a, 3, isr, 1, live, 2) == -1);
    CHECK(gr_elect_preferred_leader(a, 0, isr, 1, live, 2) == -1);
    CHECK(gr_elect_controlled_shutdown_leader(a, 3, isr, 1, live, 2, sd, 1) == -1);
    CHECK(gr_elect_controlled_shutdown_leader(a, 3, isr, 1, live, 2, sd, 0) == 3);
    CHECK(strcmp(gr_election_strategy_name(GR_ELECT_OFFLINE), "OfflinePartitionLeaderElectionStrategy") == 0);
}

int main(void) {
    algorithms();
    run_rows();
    if (test_failures) {
        fprintf(stderr, "test_election: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_election: ok (%zu rows)\n", sizeof rows / sizeof rows[0]);
    return 0;
}
