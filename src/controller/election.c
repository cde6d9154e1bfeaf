/* Leader election strategies: see election.h. */
#include "controller/election.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "controller/states.h"

const char *gr_election_strategy_name(enum gr_election_strategy s) {
    switch (s) {
    case GR_ELECT_OFFLINE: return "OfflinePartitionLeaderElectionStrategy";
    case GR_ELECT_REASSIGN: return "ReassignPartitionLeaderElectionStrategy";
    case GR_ELECT_PREFERRED: return "PreferredReplicaPartitionLeaderElectionStrategy";
    case GR_ELECT_CONTROLLED_SHUTDOWN: return "ControlledShutdownPartitionLeaderElectionStrategy";
    }
    return "UnknownElectionStrategy";
}

static bool contains(const int32_t *v, int n, int32_t x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return true;
    return false;
}

int32_t gr_elect_offline_leader(const int32_t *assignment, int n_assignment, const int32_t *isr, int n_isr,
                                const int32_t *live, int n_live, bool unclean_enabled, bool *unclean_used) {
    if (unclean_used) *unclean_used = false;
    for (int i = 0; i < n_assignment; i++)
        if (contains(live, n_live, assignment[i]) && contains(isr, n_isr, assignment[i])) return assignment[i];
    if (!unclean_enabled) return -1;
    for (int i = 0; i < n_assignment; i++) {
        if (contains(live, n_live, assignment[i])) {
            if (unclean_used) *unclean_used = true;
            return assignment[i];
        }
    }
    return -1;
}

int32_t gr_elect_reassign_leader(const int32_t *reassignment, int n_reassignment, const int32_t *isr, int n_isr,
                                 const int32_t *live, int n_live) {
    for (int i = 0; i < n_reassignment; i++)
        if (contains(live, n_live, reassignment[i]) && contains(isr, n_isr, reassignment[i]))
            return reassignment[i];
    return -1;
}

int32_t gr_elect_preferred_leader(const int32_t *assignment, int n_assignment, const int32_t *isr, int n_isr,
                                  const int32_t *live, int n_live) {
    if (n_assignment == 0) return -1;
    int32_t head = assignment[0];
    return contains(live, n_live, head) && contains(isr, n_isr, head) ? head : -1;
}

int32_t gr_elect_controlled_shutdown_leader(const int32_t *assignment, int n_assignment, const int32_t *isr,
                                            int n_isr, const int32_t *live, int n_live,
                                            const int32_t *shutting_down, int n_shutting_down) {
    for (int i = 0; i < n_assignment; i++) {
        int32_t id = assignment[i];
        if (contains(live, n_live, id) && contains(isr, n_isr, id) && !contains(shutting_down, n_shutting_down, id))
            return id;
    }
    return -1;
}

void gr_election_result_release(struct gr_election_result *r) {
    gr_kzk_leader_and_isr_release(&r->lai);
    free(r->recipients);
    memset(r, 0, sizeof *r);
}

/* ids of v that are online (include_sd: shutting-down brokers count), malloc'd */
static int32_t *filter_online(struct gr_ctrl_context *ctx, const struct gr_ctrl_partition *p, const int32_t *v, int n,
                              bool include_sd, int *n_out) {
    int32_t *o = gr_malloc((size_t)(n ? n : 1) * sizeof *o);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (gr_ctrl_replica_online(ctx, p, v[i], include_sd)) o[k++] = v[i];
    *n_out = k;
    return o;
}

static void set_new(struct gr_election_result *out, const struct gr_kzk_leader_and_isr *cur, int32_t leader,
                    const int32_t *isr, int n_isr) {
    out->elected = true;
    out->lai.leader = leader;
    out->lai.leader_epoch = cur->leader_epoch + 1;
    out->lai.controller_epoch = cur->controller_epoch;
    out->lai.zk_version = cur->zk_version;
    out->lai.n_isr = n_isr;
    out->lai.isr = gr_malloc((size_t)(n_isr ? n_isr : 1) * sizeof(int32_t));
    if (n_isr) memcpy(out->lai.isr, isr, (size_t)n_isr * sizeof(int32_t));
}

bool gr_elect_has_live_isr(struct gr_ctrl_context *ctx, const struct gr_ctrl_partition *p,
                           const struct gr_kzk_leader_and_isr *cur) {
    for (int i = 0; i < cur->n_isr; i++)
        if (gr_ctrl_replica_online(ctx, p, cur->isr[i], false)) return true;
    return false;
}

void gr_elect_partition(struct gr_ctrl_context *ctx, const struct gr_ctrl_partition *p,
                        const struct gr_kzk_leader_and_isr *cur, enum gr_election_strategy strategy,
                        bool unclean_enabled, struct gr_election_result *out) {
    memset(out, 0, sizeof *out);
    out->lai.leader = -1;
    int n_live = 0;
    int32_t leader = -1;
    switch (strategy) {
    case GR_ELECT_OFFLINE: {
        int32_t *live = filter_online(ctx, p, p->replicas, p->n_replicas, false, &n_live);
        leader = gr_elect_offline_leader(p->replicas, p->n_replicas, cur->isr, cur->n_isr, live, n_live,
                                         unclean_enabled, &out->unclean);
        if (leader >= 0) {
            if (contains(cur->isr, cur->n_isr, leader)) {
                int n_isr;
                int32_t *isr = filter_online(ctx, p, cur->isr, cur->n_isr, false, &n_isr);
                set_new(out, cur, leader, isr, n_isr);
                free(isr);
            } else {
                set_new(out, cur, leader, &leader, 1);
            }
        }
        out->recipients = live;
        out->n_recipients = n_live;
        break;
    }
    case GR_ELECT_REASSIGN: {
        /* target replicas = replicas - removing */
        int32_t *target = gr_malloc((size_t)(p->n_replicas ? p->n_replicas : 1) * sizeof *target);
        int n_target = 0;
        for (int i = 0; i < p->n_replicas; i++)
            if (!contains(p->removing, p->n_removing, p->replicas[i])) target[n_target++] = p->replicas[i];
        int32_t *live = filter_online(ctx, p, target, n_target, false, &n_live);
        leader = gr_elect_reassign_leader(target, n_target, cur->isr, cur->n_isr, live, n_live);
        if (leader >= 0) set_new(out, cur, leader, cur->isr, cur->n_isr);
        free(live);
        out->recipients = target;
        out->n_recipients = n_target;
        break;
    }
    case GR_ELECT_PREFERRED: {
        int32_t *live = filter_online(ctx, p, p->replicas, p->n_replicas, false, &n_live);
        leader = gr_elect_preferred_leader(p->replicas, p->n_replicas, cur->isr, cur->n_isr, live, n_live);
        if (leader >= 0) set_new(out, cur, leader, cur->isr, cur->n_isr);
        free(live);
        out->n_recipients = p->n_replicas;
        out->recipients = gr_malloc((size_t)(p->n_replicas ? p->n_replicas : 1) * sizeof(int32_t));
        if (p->n_replicas) memcpy(out->recipients, p->replicas, (size_t)p->n_replicas * sizeof(int32_t));
        break;
    }
    case GR_ELECT_CONTROLLED_SHUTDOWN: {
        int32_t *live = filter_online(ctx, p, p->replicas, p->n_replicas, true, &n_live);
        leader = gr_elect_controlled_shutdown_leader(p->replicas, p->n_replicas, cur->isr, cur->n_isr, live, n_live,
                                                     ctx->shutting_down, ctx->n_shutting_down);
        if (leader >= 0) {
            int32_t *isr = gr_malloc((size_t)(cur->n_isr ? cur->n_isr : 1) * sizeof *isr);
            int n_isr = 0;
            for (int i = 0; i < cur->n_isr; i++)
                if (!contains(ctx->shutting_down, ctx->n_shutting_down, cur->isr[i])) isr[n_isr++] = cur->isr[i];
            set_new(out, cur, leader, isr, n_isr);
            free(isr);
        }
        out->recipients = live;
        out->n_recipients = n_live;
        break;
    }
    }
}
