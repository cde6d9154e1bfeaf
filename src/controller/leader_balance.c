/* Preferred / unclean leader elections and auto leader rebalance: see leader_balance.h. */
#include "controller/leader_balance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/event_manager.h"
#include "controller/partition_sm.h"
#include "controller/reassignment.h"

#define LOGGER "kafka.controller.KafkaController"

static const char *type_name(int type) { return type == GR_ELECTION_UNCLEAN ? "UNCLEAN" : "PREFERRED"; }

static const char *trigger_name(enum gr_election_trigger t) {
    return t == GR_TRIGGER_AUTO ? "AutoTriggered" : t == GR_TRIGGER_ZK ? "ZkTriggered" : "AdminClientTriggered";
}

static bool in_isr(const struct gr_ctrl_partition *p, int32_t id) {
    for (int i = 0; i < p->lai.n_isr; i++)
        if (p->lai.isr[i] == id) return true;
    return false;
}

/* ---- gauge ---- */

static bool has_preferred_leader(const struct gr_ctrl_partition *p) {
    int32_t preferred = p->replicas[0];
    bool adding = false;
    for (int i = 0; i < p->n_adding; i++)
        if (p->adding[i] == preferred) adding = true;
    if ((p->n_adding > 0 || p->n_removing > 0) && adding) return !in_isr(p, preferred);
    return p->lai.leader == preferred;
}

int64_t gr_leader_balance_imbalance_count(struct gr_ctrl_context *ctx) {
    int64_t n = 0;
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur))) {
        if (gr_ctrl_topic_queued_for_deletion(ctx, t->name)) continue;
        for (int i = 0; i < t->n_partitions; i++) {
            const struct gr_ctrl_partition *p = &t->partitions[i];
            if (p->has_state && p->n_replicas > 0 && !has_preferred_leader(p)) n++;
        }
    }
    return n;
}

/* ---- onReplicaElection ---- */

/* removePartitionsFromPreferredReplicaElection */
static int remove_from_preferred(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, const struct gr_kzk_tp *tps, int n,
                                 bool auto_triggered) {
    for (int i = 0; i < n; i++) {
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, tps[i].topic, tps[i].partition);
        if (!p || !p->n_replicas) continue;
        if (p->has_state && p->lai.leader == p->replicas[0])
            gr_info(LOGGER, "Partition %s-%d completed preferred replica leader election. New leader is %d",
                    tps[i].topic, tps[i].partition, p->replicas[0]);
        else
            gr_warn(LOGGER, "Partition %s-%d failed to complete preferred replica leader election to %d. Leader is still %d",
                    tps[i].topic, tps[i].partition, p->replicas[0], p->has_state ? p->lai.leader : -1);
    }
    if (auto_triggered) return 0;
    int rc = gr_kzk_delete_preferred_election_guarded(sm->kzk, sm->ctx->epoch_zk_version);
    if (rc == GR_KZK_ENONODE) rc = 0;
    if (rc == 0 && em) gr_ctrl_events_put(em, gr_ctrl_event_new(GR_EV_REPLICA_LEADER_ELECTION)); /* re-arm */
    return rc;
}

int gr_leader_balance_elect(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, const struct gr_kzk_tp *tps, int n,
                            int type, enum gr_election_trigger trigger, int *rcs) {
    gr_info(LOGGER, "Starting replica leader election (%s) for %d partitions%s%s%s triggered by %s", type_name(type), n,
            n ? " (first " : "", n ? tps[0].topic : "", n ? ")" : "", trigger_name(trigger));
    int *own = NULL;
    if (!rcs) rcs = own = gr_malloc((size_t)(n > 0 ? n : 1) * sizeof *rcs);
    struct gr_psm_strategy st;
    if (type == GR_ELECTION_UNCLEAN) {
        st.kind = GR_ELECT_OFFLINE;
        st.allow_unclean = trigger == GR_TRIGGER_ADMIN; /* conservative, as Kafka */
    } else {
        st.kind = GR_ELECT_PREFERRED;
        st.allow_unclean = false;
    }
    int rc = n > 0 ? gr_psm_handle_state_changes(sm, tps, n, GR_PS_ONLINE, &st, rcs) : 0;
    if (rc == GR_ECONTROLLER_MOVED) {
        gr_info(LOGGER, "Error completing replica leader election (%s) because controller has moved to another broker.",
                type_name(type));
        free(own);
        return rc;
    }
    if (trigger != GR_TRIGGER_ADMIN) {
        for (int i = 0; i < n; i++)
            if (rcs[i])
                gr_error(LOGGER, "Error completing replica leader election (%s) for partition %s-%d", type_name(type),
                         tps[i].topic, tps[i].partition);
        rc = remove_from_preferred(sm, em, tps, n, trigger == GR_TRIGGER_AUTO);
    }
    free(own);
    return rc;
}

/* ---- ReplicaLeaderElection ---- */

struct gr_elect_payload *gr_elect_payload_new(int n) {
    struct gr_elect_payload *pl = gr_calloc(1, sizeof *pl);
    pl->n = n;
    pl->items = gr_calloc((size_t)(n > 0 ? n : 1), sizeof *pl->items);
    return pl;
}

static void answer(struct gr_elect_payload *pl, int16_t top) {
    if (pl->responded) return;
    pl->responded = true;
    if (pl->respond) pl->respond(pl->arg, top, pl);
}

static void answer_not_controller(struct gr_elect_payload *pl) {
    if (pl->responded) return;
    for (int i = 0; i < pl->n; i++) {
        pl->items[i].err = GR_KERR_NOT_CONTROLLER;
        pl->items[i].leader = -1;
    }
    answer(pl, pl->all ? GR_KERR_NOT_CONTROLLER : GR_KERR_NONE);
}

void gr_elect_payload_free(void *payload) {
    struct gr_elect_payload *pl = payload;
    if (!pl) return;
    answer_not_controller(pl);
    for (int i = 0; i < pl->n; i++) {
        free(pl->items[i].topic);
        free(pl->items[i].msg);
    }
    free(pl->items);
    free(pl);
}

void gr_elect_preempt(struct gr_ctrl_event *ev) {
    if (ev->payload) answer_not_controller(ev->payload);
}

static void set_item(struct gr_elect_item *it, int16_t err, const char *msg) {
    it->err = err;
    it->leader = -1;
    free(it->msg);
    it->msg = msg ? gr_strdup(msg) : NULL;
}

/* Elects items[idx[k]] and stores the answers. */
static int elect_items(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, struct gr_elect_item *items, int n,
                       int type, enum gr_election_trigger trigger) {
    struct gr_ctrl_context *ctx = sm->ctx;
    int *idx = gr_malloc((size_t)(n > 0 ? n : 1) * sizeof *idx);
    struct gr_kzk_tp *tps = gr_malloc((size_t)(n > 0 ? n : 1) * sizeof *tps);
    int n_elect = 0, n_unknown = 0, n_deleting = 0;
    for (int i = 0; i < n; i++) {
        struct gr_elect_item *it = &items[i];
        struct gr_ctrl_topic *t = it->topic ? gr_ctrl_ctx_topic(ctx, it->topic) : NULL;
        struct gr_ctrl_partition *p = gr_ctrl_topic_partition(t, it->partition);
        if (!p || p->n_replicas == 0) {
            set_item(it, GR_KERR_UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.");
            n_unknown++;
            continue;
        }
        if (gr_ctrl_topic_queued_for_deletion(ctx, t->name)) {
            set_item(it, GR_KERR_INVALID_TOPIC_EXCEPTION, "The topic is being deleted");
            n_deleting++;
            continue;
        }
        if (type == GR_ELECTION_PREFERRED && !p->has_state) {
            /* NewPartition (no replica was ever live): the state machine would initialise it with
             * the first live replica and report success for a leader that is not the preferred
             * one; Kafka fails the whole event here (leadership info .get on None) */
            set_item(it, GR_KERR_PREFERRED_LEADER_NOT_AVAILABLE, "The partition has no leader yet.");
            continue;
        }
        int32_t leader = p->has_state ? p->lai.leader : GR_LEADER_NONE;
        bool electable = type == GR_ELECTION_UNCLEAN
                             ? (leader == GR_LEADER_NONE || !gr_ctrl_replica_online(ctx, p, leader, false))
                             : leader != p->replicas[0];
        if (!electable) {
            set_item(it, GR_KERR_ELECTION_NOT_NEEDED, NULL);
            continue;
        }
        idx[n_elect] = i;
        tps[n_elect].topic = t->name;
        tps[n_elect].partition = p->partition;
        n_elect++;
    }
    if (n_unknown)
        gr_info(LOGGER, "Skipping replica leader election (%s) for %d partitions by %s since they do not exist",
                type_name(type), n_unknown, trigger_name(trigger));
    if (n_deleting)
        gr_warn(LOGGER, "Skipping replica leader election (%s) for %d partitions by %s since the respective topics are "
                "being deleted", type_name(type), n_deleting, trigger_name(trigger));
    int *rcs = gr_malloc((size_t)(n_elect > 0 ? n_elect : 1) * sizeof *rcs);
    int rc = gr_leader_balance_elect(sm, em, tps, n_elect, type, trigger, rcs);
    for (int k = 0; k < n_elect; k++) {
        struct gr_elect_item *it = &items[idx[k]];
        if (rc == GR_ECONTROLLER_MOVED) {
            set_item(it, GR_KERR_NOT_CONTROLLER, NULL);
        } else if (rcs[k]) {
            set_item(it, type == GR_ELECTION_PREFERRED ? GR_KERR_PREFERRED_LEADER_NOT_AVAILABLE
                                                       : GR_KERR_ELIGIBLE_LEADERS_NOT_AVAILABLE,
                     type == GR_ELECTION_PREFERRED ? "Failed to elect the preferred replica as leader"
                                                   : "Failed to elect a leader among the eligible replicas");
        } else {
            struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(ctx, tps[k].topic, tps[k].partition);
            set_item(it, GR_KERR_NONE, NULL);
            it->leader = p && p->has_state ? p->lai.leader : -1;
        }
    }
    free(rcs);
    free(idx);
    free(tps);
    return rc;
}

static void fill_all(struct gr_ctrl_context *ctx, struct gr_elect_payload *pl) {
    int cap = 0;
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur)))
        for (int i = 0; i < t->n_partitions; i++) {
            if (pl->n == cap) {
                cap = cap ? cap * 2 : 64;
                pl->items = gr_realloc(pl->items, (size_t)cap * sizeof *pl->items);
            }
            struct gr_elect_item *it = &pl->items[pl->n++];
            memset(it, 0, sizeof *it);
            it->topic = gr_strdup(t->name);
            it->partition = t->partitions[i].partition;
        }
}

int gr_leader_balance_process_election(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, struct gr_ctrl_event *ev,
                                       bool active) {
    struct gr_elect_payload *pl = ev->payload;
    if (!active) {
        if (pl) answer_not_controller(pl);
        return 0;
    }
    if (pl) {
        if (pl->responded) return 0;
        if (pl->all) fill_all(sm->ctx, pl);
        int rc = elect_items(sm, em, pl->items, pl->n, pl->type, GR_TRIGGER_ADMIN);
        answer(pl, GR_KERR_NONE);
        return rc;
    }
    /* ZooKeeper-triggered: the read re-arms the exists-watch */
    struct gr_kzk_tp *tps = NULL;
    int n = 0;
    int rc = gr_kzk_get_preferred_election(sm->kzk, true, &tps, &n);
    if (rc == GR_KZK_ENONODE) return 0;
    if (rc == GR_ECORRUPT) {
        gr_warn(LOGGER, "Ignoring invalid /admin/preferred_replica_election; deleting it");
        return remove_from_preferred(sm, em, NULL, 0, false);
    }
    if (rc) return rc;
    struct gr_elect_item *items = gr_calloc((size_t)(n > 0 ? n : 1), sizeof *items);
    for (int i = 0; i < n; i++) {
        items[i].topic = tps[i].topic;
        items[i].partition = tps[i].partition;
    }
    rc = elect_items(sm, em, items, n, GR_ELECTION_PREFERRED, GR_TRIGGER_ZK);
    for (int i = 0; i < n; i++) free(items[i].msg);
    free(items);
    gr_kzk_tps_release(tps, n);
    return rc;
}

int gr_leader_balance_failover(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em) {
    struct gr_ctrl_context *ctx = sm->ctx;
    struct gr_kzk_tp *tps = NULL;
    int n = 0;
    int rc = gr_kzk_get_preferred_election(sm->kzk, false, &tps, &n);
    if (rc == GR_KZK_ENONODE || rc == GR_ECORRUPT) {
        rc = 0;
        n = 0;
    }
    if (rc) return rc;
    struct gr_ctrl_tp_list pending = {0};
    int n_done = 0, n_deleting = 0;
    for (int i = 0; i < n; i++) {
        struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, tps[i].topic);
        struct gr_ctrl_partition *p = gr_ctrl_topic_partition(t, tps[i].partition);
        if (!p || !p->n_replicas || (p->has_state && p->lai.leader == p->replicas[0])) {
            n_done++;
            continue;
        }
        if (gr_ctrl_topic_queued_for_deletion(ctx, t->name)) {
            n_deleting++;
            continue;
        }
        gr_ctrl_tp_list_add(&pending, t->name, p->partition);
    }
    gr_info(LOGGER, "Partitions undergoing preferred replica election: %d; completed: %d; skipped due to topic "
            "deletion: %d; resuming: %d", n, n_done, n_deleting, pending.n);
    rc = gr_leader_balance_elect(sm, em, pending.v, pending.n, GR_ELECTION_PREFERRED, GR_TRIGGER_ZK, NULL);
    gr_ctrl_tp_list_free(&pending);
    gr_kzk_tps_release(tps, n);
    return rc;
}

/* ---- auto rebalance ---- */

struct broker_count {
    int32_t id;
    int64_t total, not_preferred;
};

static struct broker_count *count_for(struct broker_count **v, int *n, int *cap, int32_t id) {
    for (int i = 0; i < *n; i++)
        if ((*v)[i].id == id) return &(*v)[i];
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *v = gr_realloc(*v, (size_t)*cap * sizeof **v);
    }
    struct broker_count *b = &(*v)[(*n)++];
    b->id = id;
    b->total = b->not_preferred = 0;
    return b;
}

/* canPreferredReplicaBeLeader (cached ISR) */
static bool preferred_can_lead(struct gr_ctrl_context *ctx, const struct gr_ctrl_partition *p) {
    int32_t pr = p->replicas[0];
    return p->has_state && gr_ctrl_replica_online(ctx, p, pr, false) && in_isr(p, pr);
}

int gr_leader_balance_auto(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, int percent) {
    struct gr_ctrl_context *ctx = sm->ctx;
    struct broker_count *bc = NULL;
    int nb = 0, cap = 0;
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur))) {
        if (gr_ctrl_topic_queued_for_deletion(ctx, t->name)) continue;
        for (int i = 0; i < t->n_partitions; i++) {
            const struct gr_ctrl_partition *p = &t->partitions[i];
            if (!p->n_replicas) continue;
            struct broker_count *b = count_for(&bc, &nb, &cap, p->replicas[0]);
            b->total++;
            if (p->has_state && p->lai.leader != p->replicas[0]) b->not_preferred++;
        }
    }
    bool any_reassigning = gr_reassign_count(ctx) > 0;
    struct gr_ctrl_tp_list cand = {0};
    for (int k = 0; k < nb; k++) {
        double ratio = bc[k].total ? (double)bc[k].not_preferred / (double)bc[k].total : 0.0;
        gr_debug(LOGGER, "Leader imbalance ratio for broker %d is %.3f", bc[k].id, ratio);
        if (!(ratio > (double)percent / 100.0) || any_reassigning) continue;
        cur = 0;
        while ((t = gr_ctrl_ctx_next_topic(ctx, &cur))) {
            if (gr_ctrl_topic_queued_for_deletion(ctx, t->name)) continue;
            for (int i = 0; i < t->n_partitions; i++) {
                const struct gr_ctrl_partition *p = &t->partitions[i];
                if (p->n_replicas && p->replicas[0] == bc[k].id && p->has_state && p->lai.leader != bc[k].id &&
                    preferred_can_lead(ctx, p))
                    gr_ctrl_tp_list_add(&cand, t->name, p->partition);
            }
        }
    }
    free(bc);
    int rc = 0;
    if (cand.n > 0) rc = gr_leader_balance_elect(sm, em, cand.v, cand.n, GR_ELECTION_PREFERRED, GR_TRIGGER_AUTO, NULL);
    gr_ctrl_tp_list_free(&cand);
    return rc;
}
