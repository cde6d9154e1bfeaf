/* Replica state machine: see replica_sm.h. */
#include "controller/replica_sm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "controller/request_batch.h"

#define LOGGER "kafka.controller.ZkReplicaStateMachine"

#define SC_LOG(lvl, sm, fmt, ...)                                                                                 \
    gr_log(lvl, GR_STATE_CHANGE_LOGGER, "[Controller id=%d epoch=%d] " fmt, (sm)->controller_id, (sm)->ctx->epoch, \
           __VA_ARGS__)

static void log_failed(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *r, int from, int to, const char *why) {
    SC_LOG(GR_LOG_ERROR, sm,
           "Controller %d epoch %d initiated state change of replica %d for partition %s-%d from %s to %s failed: %s",
           sm->controller_id, sm->ctx->epoch, r->replica, r->topic, r->partition, gr_replica_state_name(from),
           gr_replica_state_name(to), why);
}

static void log_ok(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *r, int from, int to) {
    gr_debug(GR_STATE_CHANGE_LOGGER,
             "[Controller id=%d epoch=%d] Changed state of replica %d for partition %s-%d from %s to %s",
             sm->controller_id, sm->ctx->epoch, r->replica, r->topic, r->partition, gr_replica_state_name(from),
             gr_replica_state_name(to));
}

static void remove_id(int32_t *v, int *n, int32_t id) {
    int k = 0;
    for (int i = 0; i < *n; i++)
        if (v[i] != id) v[k++] = v[i];
    *n = k;
}

/* ReplicaAssignment.removeReplica, keeping replica_states parallel to replicas (and the context's
 * count of partitions being reassigned). */
static void remove_from_assignment(struct gr_ctrl_context *ctx, struct gr_ctrl_partition *p, int32_t id) {
    bool was = p->n_adding > 0 || p->n_removing > 0;
    int idx = gr_ctrl_replica_index(p, id);
    if (idx >= 0) {
        memmove(&p->replicas[idx], &p->replicas[idx + 1], (size_t)(p->n_replicas - idx - 1) * sizeof *p->replicas);
        if (p->replica_states)
            memmove(&p->replica_states[idx], &p->replica_states[idx + 1],
                    (size_t)(p->n_replicas - idx - 1) * sizeof *p->replica_states);
        p->n_replicas--;
    }
    remove_id(p->adding, &p->n_adding, id);
    remove_id(p->removing, &p->n_removing, id);
    gr_ctrl_ctx_reassigning_changed(ctx, was, p->n_adding > 0 || p->n_removing > 0);
}

/* ---- removeReplicasFromIsr ---- */

/* Partitions whose state this handleStateChanges call has already read from ZooKeeper or written
 * (a set of context pointers; the context does not change shape during the call): what the
 * context holds for them is what ZooKeeper returned or accepted moments ago in this same event.
 * Kafka rereads every partition state once per broker whose replicas go offline (when three
 * brokers' replicas went offline, 100k partitions cost 300k reads). Every write is conditional on
 * its zkVersion, so a change made meanwhile shows up as BADVERSION and that partition alone is
 * reread and retried, as in Kafka. */
struct fresh_set {
    const struct gr_ctrl_partition **slots;
    size_t mask;
};

static void fresh_init(struct fresh_set *f, int n) {
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap *= 2;
    f->slots = gr_calloc(cap, sizeof *f->slots);
    f->mask = cap - 1;
}

static size_t fresh_pos(const struct fresh_set *f, const struct gr_ctrl_partition *p) {
    size_t i = (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ULL) & f->mask;
    while (f->slots[i] && f->slots[i] != p) i = (i + 1) & f->mask;
    return i;
}

static bool fresh_has(const struct fresh_set *f, const struct gr_ctrl_partition *p) {
    return f && f->slots[fresh_pos(f, p)] == p;
}

/* Adds p (the set is sized for every replica of the call, so it never fills). */
static void fresh_add(struct fresh_set *f, const struct gr_ctrl_partition *p) {
    if (f) f->slots[fresh_pos(f, p)] = p;
}

/* The current states of reps[idx[k]]'s partitions into cur[k]: copied from the context where
 * from_ctx[k], else read from ZooKeeper. Returns 0 or the read's error. */
static int isr_read(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *reps, const int *idx, int n,
                    const bool *from_ctx, struct gr_kzk_state_result *cur) {
    struct gr_ctrl_context *ctx = sm->ctx;
    struct gr_kzk_tp *tps = gr_malloc((size_t)(n ? n : 1) * sizeof *tps);
    int *read_of = gr_malloc((size_t)(n ? n : 1) * sizeof *read_of);
    int n_read = 0;
    for (int k = 0; k < n; k++) {
        const struct gr_ctrl_replica *r = &reps[idx[k]];
        if (from_ctx[k]) {
            const struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(ctx, r->topic, r->partition);
            cur[k].lai = p->lai;
            cur[k].lai.isr = gr_malloc((size_t)(p->lai.n_isr > 0 ? p->lai.n_isr : 1) * sizeof *cur[k].lai.isr);
            if (p->lai.n_isr > 0) memcpy(cur[k].lai.isr, p->lai.isr, (size_t)p->lai.n_isr * sizeof *cur[k].lai.isr);
            continue;
        }
        tps[n_read].topic = (char *)r->topic;
        tps[n_read].partition = r->partition;
        read_of[n_read++] = k;
    }
    int rc = 0;
    if (n_read > 0) {
        struct gr_kzk_state_result *rd = gr_calloc((size_t)n_read, sizeof *rd);
        rc = gr_kzk_get_partition_states(sm->kzk, tps, n_read, rd);
        for (int j = 0; j < n_read; j++) cur[read_of[j]] = rd[j]; /* moves the isr arrays */
        free(rd);
    }
    free(read_of);
    free(tps);
    return rc;
}

/* The replicas of one partition leaving its ISR in this call: reps[idx[0..n)], in broker order. */
struct isr_group {
    const int *idx;
    int n;
    struct gr_ctrl_partition *p;
};

static void log_group_failed(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *reps, const struct isr_group *g,
                             const char *why) {
    for (int j = 0; j < g->n; j++) {
        const struct gr_ctrl_replica *r = &reps[g->idx[j]];
        log_failed(sm, r, gr_ctrl_replica_state_get(g->p, r->replica), GR_RS_OFFLINE, why);
    }
}

/* What removing the group's replicas from the ISR in state cur means: -1 failed (logged), 0
 * nothing to write (none in the ISR: the context caches ZooKeeper's state), 1 write *a. Kafka
 * writes once per broker (leader -1 if the replica led, the ISR without it unless it is the last
 * one, leader epoch + 1 each time); the group's replicas are removed the same way one after
 * another, in broker order, and the result written ONCE with leader epoch + 1: the same leader
 * and ISR as Kafka's last write, with one write per partition instead of one per broker. */
static int isr_adjust(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *reps, const struct isr_group *g,
                      struct gr_kzk_state_result *cur, struct fresh_set *fresh, struct gr_kzk_leader_and_isr *a) {
    struct gr_ctrl_context *ctx = sm->ctx;
    const char *topic = reps[g->idx[0]].topic;
    if (cur->rc == GR_KZK_ENONODE || cur->rc == GR_ECORRUPT) {
        if (!gr_ctrl_topic_queued_for_deletion(ctx, topic))
            log_group_failed(sm, reps, g, "the leader and isr path in zookeeper is empty");
        return -1;
    }
    if (cur->rc) {
        log_group_failed(sm, reps, g, gr_kzk_strerror(cur->rc));
        return -1;
    }
    struct gr_kzk_leader_and_isr *l = &cur->lai;
    if (l->controller_epoch > ctx->epoch) {
        char why[256];
        snprintf(why, sizeof why,
                 "Leader and isr path written by another controller with epoch %d. Aborting state change by this "
                 "controller",
                 l->controller_epoch);
        log_group_failed(sm, reps, g, why);
        return -1;
    }
    a->leader = l->leader;
    a->isr = gr_malloc((size_t)(l->n_isr > 0 ? l->n_isr : 1) * sizeof *a->isr);
    if (l->n_isr > 0) memcpy(a->isr, l->isr, (size_t)l->n_isr * sizeof *a->isr);
    a->n_isr = l->n_isr;
    bool changed = false;
    for (int j = 0; j < g->n; j++) {
        int32_t id = reps[g->idx[j]].replica;
        bool in_isr = false;
        for (int i = 0; i < a->n_isr; i++) in_isr |= a->isr[i] == id;
        if (!in_isr) continue;
        changed = true;
        if (a->leader == id) a->leader = GR_LEADER_NONE;
        if (a->n_isr > 1) remove_id(a->isr, &a->n_isr, id); /* never empty the ISR */
    }
    if (!changed) {
        gr_kzk_leader_and_isr_release(a);
        l->controller_epoch = ctx->epoch; /* cache what ZooKeeper has, with our controller epoch */
        gr_ctrl_partition_set_state(g->p, l);
        fresh_add(fresh, g->p);
        gr_ctrl_partition_mark_fresh(ctx, g->p);
        return 0;
    }
    a->leader_epoch = l->leader_epoch + 1;
    a->controller_epoch = ctx->epoch;
    a->zk_version = l->zk_version;
    return 1;
}

/* Applies the write of items (items[i] is for group item_of[i], state adj[item_of[i]]; wrc and
 * res[] what gr_kzk_update_partition_states returned for them): ok = 2 for every replica of a
 * written group; BADVERSION puts the group's replicas in retry[]. Returns 0 or
 * GR_ECONTROLLER_MOVED. */
static int isr_apply(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *reps, const struct isr_group *groups,
                     const int *item_of, int n_items, struct gr_kzk_leader_and_isr *adj, int wrc,
                     const struct gr_kzk_write_result *res, struct fresh_set *fresh, char *ok, int *retry,
                     int *n_retry) {
    struct gr_ctrl_context *ctx = sm->ctx;
    for (int i = 0; i < n_items && wrc != GR_ECONTROLLER_MOVED; i++) {
        int k = item_of[i];
        const struct isr_group *g = &groups[k];
        const struct gr_ctrl_replica *r0 = &reps[g->idx[0]];
        int irc = wrc ? wrc : res[i].rc;
        if (irc == GR_KZK_EBADVERSION) {
            gr_debug(LOGGER,
                     "Controller failed to remove %d replica(s) from ISR of partition %s-%d: bad ZK version. This "
                     "will be retried.",
                     g->n, r0->topic, r0->partition);
            for (int j = 0; j < g->n; j++) retry[(*n_retry)++] = g->idx[j];
            continue;
        }
        if (irc) {
            log_group_failed(sm, reps, g, gr_kzk_strerror(irc));
            continue;
        }
        adj[k].zk_version = res[i].zk_version;
        gr_ctrl_partition_set_state(g->p, &adj[k]);
        fresh_add(fresh, g->p);
        gr_ctrl_partition_mark_fresh(ctx, g->p);
        for (int j = 0; j < g->n; j++) ok[g->idx[j]] = 2; /* written */
    }
    return wrc == GR_ECONTROLLER_MOVED ? wrc : 0;
}

static void log_isr_written(int n_items, int64_t ms) {
    gr_log(n_items >= 1000 ? GR_LOG_INFO : GR_LOG_DEBUG, LOGGER, "Wrote %d ISR shrink(s) to ZooKeeper in %lld ms",
           n_items, (long long)ms);
}

/* idx[] sorted by partition (context pointer), then by index into reps (= broker order). */
static const struct gr_ctrl_partition *const *g_sort_parts;
static int cmp_by_partition(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    uintptr_t px = (uintptr_t)g_sort_parts[x], py = (uintptr_t)g_sort_parts[y];
    if (px != py) return px < py ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* One round of ISR shrinks, prepared (isr_round_prepare) then written and applied: the groups of
 * idx[] by partition, their current states, the adjusted states and the items to write. */
struct isr_round {
    struct isr_group *groups;
    int *heads;
    int ng;
    struct gr_kzk_state_result *cur;
    struct gr_kzk_leader_and_isr *adj;
    struct gr_kzk_state_write *items;
    int *item_of;
    int n_items;
};

/* Prepares one round over items idx[0..n) of reps (parts[i] = reps[i]'s partition): every
 * partition is read once and written at most once for all its replicas in the round. States
 * come from ZooKeeper, except (use_fresh: the first round) partitions in `fresh`, taken from the
 * context. ok[i] = 1 for a replica its partition's state does not hold (nothing to write; that
 * partition joins `fresh`); failures are logged. R->items are the writes left to make. */
static void isr_round_prepare(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *reps,
                              struct gr_ctrl_partition *const *parts, int *idx, int n, struct fresh_set *fresh,
                              bool use_fresh, char *ok, struct isr_round *R) {
    memset(R, 0, sizeof *R);
    g_sort_parts = (const struct gr_ctrl_partition *const *)parts;
    qsort(idx, (size_t)n, sizeof *idx, cmp_by_partition);
    g_sort_parts = NULL;
    R->groups = gr_malloc((size_t)(n ? n : 1) * sizeof *R->groups);
    R->heads = gr_malloc((size_t)(n ? n : 1) * sizeof *R->heads);
    int ng = 0;
    for (int k = 0; k < n;) {
        int e = k;
        while (e < n && parts[idx[e]] == parts[idx[k]]) e++;
        R->groups[ng] = (struct isr_group){.idx = &idx[k], .n = e - k, .p = parts[idx[k]]};
        R->heads[ng++] = idx[k];
        k = e;
    }
    R->ng = ng;
    /* Where the first round may start from the context instead of reading ZooKeeper: partitions
     * read or written in this call (`fresh`), and partitions whose cached ISR holds one of the
     * group's replicas -- a write follows, conditional on the cached zkVersion, so a state changed
     * meanwhile in ZooKeeper fails with BADVERSION and is reread (next round), as in Kafka. A
     * partition whose cached ISR holds none of them is read: "nothing to write" must not rest on
     * a cache that may lag a leader's own ISR write. */
    bool *from_ctx = gr_calloc((size_t)(ng ? ng : 1), sizeof *from_ctx);
    for (int g = 0; use_fresh && g < ng; g++) {
        const struct gr_ctrl_partition *p = R->groups[g].p;
        if (!p->has_state) continue;
        bool in_isr = fresh_has(fresh, p) || gr_ctrl_partition_fresh(sm->ctx, p);
        for (int j = 0; j < R->groups[g].n && !in_isr; j++)
            for (int i = 0; i < p->lai.n_isr; i++) in_isr |= p->lai.isr[i] == reps[R->groups[g].idx[j]].replica;
        from_ctx[g] = in_isr;
    }
    R->cur = gr_calloc((size_t)(ng ? ng : 1), sizeof *R->cur);
    int rc = isr_read(sm, reps, R->heads, ng, from_ctx, R->cur);
    free(from_ctx);
    R->adj = gr_calloc((size_t)(ng ? ng : 1), sizeof *R->adj);
    R->items = gr_calloc((size_t)(ng ? ng : 1), sizeof *R->items);
    R->item_of = gr_malloc((size_t)(ng ? ng : 1) * sizeof *R->item_of);
    if (rc) {
        for (int g = 0; g < ng; g++) log_group_failed(sm, reps, &R->groups[g], gr_kzk_strerror(rc));
        return;
    }
    for (int g = 0; g < ng; g++) {
        int what = isr_adjust(sm, reps, &R->groups[g], &R->cur[g], fresh, &R->adj[g]);
        if (what == 0)
            for (int j = 0; j < R->groups[g].n; j++) ok[R->groups[g].idx[j]] = 1;
        if (what != 1) continue;
        const struct gr_ctrl_replica *r = &reps[R->heads[g]];
        R->items[R->n_items] =
            (struct gr_kzk_state_write){.topic = r->topic, .partition = r->partition, .lai = &R->adj[g]};
        R->item_of[R->n_items++] = g;
    }
}

static void isr_round_free(struct isr_round *R) {
    for (int g = 0; R->adj && g < R->ng; g++) gr_kzk_leader_and_isr_release(&R->adj[g]);
    for (int g = 0; R->cur && g < R->ng; g++) gr_kzk_leader_and_isr_release(&R->cur[g].lai);
    free(R->adj);
    free(R->items);
    free(R->item_of);
    free(R->cur);
    free(R->groups);
    free(R->heads);
    memset(R, 0, sizeof *R);
}

/* One round (isr_round_prepare, then the writes on this thread); ok[i] set when replica i's
 * partition state is settled (written, or did not contain it); retries go to retry[]. */
static int remove_from_isr_round(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *reps,
                                 struct gr_ctrl_partition *const *parts, int *idx, int n, struct fresh_set *fresh,
                                 bool use_fresh, char *ok, int *retry, int *n_retry) {
    *n_retry = 0;
    struct isr_round R;
    isr_round_prepare(sm, reps, parts, idx, n, fresh, use_fresh, ok, &R);
    int ret = 0;
    if (R.n_items) {
        struct gr_kzk_write_result *res = gr_calloc((size_t)R.n_items, sizeof *res);
        int64_t t0 = gr_mono_ms();
        int wrc = gr_kzk_update_partition_states(sm->kzk, sm->ctx->epoch_zk_version, R.items, R.n_items, res);
        log_isr_written(R.n_items, gr_mono_ms() - t0);
        ret = isr_apply(sm, reps, R.groups, R.item_of, R.n_items, R.adj, wrc, res, fresh, ok, retry, n_retry);
        free(res);
    }
    isr_round_free(&R);
    return ret;
}

/* ---- handleStateChanges for one broker ---- */

/* The replicas whose transition to target is valid (indexes into reps, in valid[]); the others
 * are logged as failed. Returns how many. */
static int valid_transitions(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *reps, int n, int target, int *valid) {
    int n_valid = 0;
    for (int i = 0; i < n; i++) {
        const struct gr_ctrl_replica *r = &reps[i];
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, r->topic, r->partition);
        if (!p) {
            log_failed(sm, r, GR_RS_NONEXISTENT, target, "the partition is not in the controller's context");
            continue;
        }
        int from = gr_ctrl_replica_state_get(p, r->replica);
        if (!gr_replica_transition_valid(from, target)) {
            char why[512];
            snprintf(why, sizeof why,
                     "Replica [Topic=%s,Partition=%d,Replica=%d] should be in the %s states before moving to %s "
                     "state. Instead it is in %s state",
                     r->topic, r->partition, r->replica, gr_replica_valid_previous(target),
                     gr_replica_state_name(target), gr_replica_state_name(from));
            log_failed(sm, r, from, target, why);
            continue;
        }
        if (gr_ctrl_replica_index(p, r->replica) < 0) {
            log_failed(sm, r, from, target, "the replica is not in the partition's assignment");
            continue;
        }
        valid[n_valid++] = i;
    }
    return n_valid;
}

/* -> NewReplica: LeaderAndIsr (IsNew) to the replica where the partition has a state, unless it is
 * the leader. */
static void to_new(struct gr_ctrl_sm *sm, int32_t replica_id, const struct gr_ctrl_replica *r) {
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, r->topic, r->partition);
    int from = gr_ctrl_replica_state_get(p, r->replica);
    if (p->has_state) {
        if (p->lai.leader == replica_id) {
            char why[256];
            snprintf(why, sizeof why,
                     "Replica %d for partition %s-%d cannot be moved to NewReplica state as it is being requested to "
                     "become leader",
                     replica_id, r->topic, r->partition);
            log_failed(sm, r, from, GR_RS_OFFLINE, why);
            return;
        }
        gr_ctrl_batch_add_leader_and_isr(sm->batch, &replica_id, 1, r->topic, r->partition, &p->lai, true);
    }
    log_ok(sm, r, from, GR_RS_NEW);
    gr_ctrl_replica_state_set(p, r->replica, GR_RS_NEW);
}

/* The other states: only the state changes (DeletionStarted also sends StopReplica(delete);
 * NonExistent also leaves the assignment). */
static void to_plain(struct gr_ctrl_sm *sm, int32_t replica_id, const struct gr_ctrl_replica *r, int target) {
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, r->topic, r->partition);
    log_ok(sm, r, gr_ctrl_replica_state_get(p, r->replica), target);
    if (target == GR_RS_NONEXISTENT) {
        remove_from_assignment(sm->ctx, p, r->replica);
        return;
    }
    gr_ctrl_replica_state_set(p, r->replica, target);
    if (target == GR_RS_DELETION_STARTED)
        gr_ctrl_batch_add_stop_replica(sm->batch, &replica_id, 1, r->topic, r->partition, true);
}

/* A replica left the ISR in ZooKeeper (or was not in it): log it, LeaderAndIsr to the other
 * replicas (not for a topic being deleted), OfflineReplica. */
static void offline_after_isr(struct gr_ctrl_sm *sm, int32_t replica_id, const struct gr_ctrl_replica *r,
                              struct gr_ctrl_partition *p) {
    struct gr_ctrl_context *ctx = sm->ctx;
    /* "Partition T-P state changed to (...) after removing replica R from the ISR as part of
     * transition to OfflineReplica", written after the send (request_batch.h) */
    gr_ctrl_batch_log_isr_removed(sm->batch, r->topic, r->partition, replica_id, &p->lai);
    if (!gr_ctrl_topic_queued_for_deletion(ctx, r->topic)) {
        int32_t small[8];
        int32_t *rcpt = p->n_replicas <= 8 ? small : gr_malloc((size_t)p->n_replicas * sizeof *rcpt);
        int n_rcpt = 0;
        for (int j = 0; j < p->n_replicas; j++)
            if (p->replicas[j] != replica_id) rcpt[n_rcpt++] = p->replicas[j];
        gr_ctrl_batch_add_leader_and_isr(sm->batch, rcpt, n_rcpt, r->topic, r->partition, &p->lai, false);
        if (rcpt != small) free(rcpt);
    }
    log_ok(sm, r, gr_ctrl_replica_state_get(p, r->replica), GR_RS_OFFLINE);
    gr_ctrl_replica_state_set(p, r->replica, GR_RS_OFFLINE);
}

/* -> OfflineReplica for the valid replicas of a call (every broker of the call; reps sorted by
 * broker): StopReplica(delete=false); partitions without a state go Offline at once
 * (UpdateMetadata); the others leave the ISR in ZooKeeper first -- all of a partition's replicas
 * going offline in this call in ONE conditional write (rounds retrying BADVERSION) -- then,
 * broker by broker, each replica's LeaderAndIsr to the partition's other replicas and its state
 * change. Steps: offline_begin, offline_batch_start, offline_rounds (0 or GR_ECONTROLLER_MOVED),
 * offline_free; gr_rsm_prepare_offline runs the first round's preparation early. */
struct offline_call {
    const struct gr_ctrl_replica *reps; /* sorted by broker */
    int n;
    int *valid, n_valid;
    struct fresh_set fresh;
    struct gr_ctrl_partition **parts; /* parts[i]: reps[i]'s partition (valid ones) */
    char *ok;                         /* ok[i]: replica i's partition state settled */
    int *with, n_with;                /* valid replicas whose partition has a state */
    int *retry;
};

/* The valid transitions (failures logged), their partitions and the replicas to remove from an
 * ISR; nothing goes to the batch yet. */
static void offline_begin(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *reps, int n, struct offline_call *c) {
    memset(c, 0, sizeof *c);
    c->reps = reps;
    c->n = n;
    c->valid = gr_malloc((size_t)(n ? n : 1) * sizeof *c->valid);
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && reps[j].replica == reps[i].replica) j++;
        int m = valid_transitions(sm, &reps[i], j - i, GR_RS_OFFLINE, &c->valid[c->n_valid]);
        for (int k = 0; k < m; k++) c->valid[c->n_valid + k] += i;
        c->n_valid += m;
        i = j;
    }
    fresh_init(&c->fresh, n);
    c->parts = gr_calloc((size_t)(n ? n : 1), sizeof *c->parts);
    c->ok = gr_calloc((size_t)(n ? n : 1), 1);
    c->with = gr_malloc((size_t)(c->n_valid ? c->n_valid : 1) * sizeof *c->with);
    c->retry = gr_malloc((size_t)(c->n_valid ? c->n_valid : 1) * sizeof *c->retry);
    for (int k = 0; k < c->n_valid; k++) {
        const struct gr_ctrl_replica *r = &reps[c->valid[k]];
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, r->topic, r->partition);
        c->parts[c->valid[k]] = p;
        if (p->has_state) c->with[c->n_with++] = c->valid[k];
    }
}

/* StopReplica(delete=false) for every valid replica; partitions without a state go Offline at
 * once (UpdateMetadata). */
static void offline_batch_start(struct gr_ctrl_sm *sm, struct offline_call *c) {
    for (int k = 0; k < c->n_valid; k++) {
        const struct gr_ctrl_replica *r = &c->reps[c->valid[k]];
        struct gr_ctrl_partition *p = c->parts[c->valid[k]];
        gr_ctrl_batch_add_stop_replica(sm->batch, &r->replica, 1, r->topic, r->partition, false);
        if (p->has_state) continue;
        struct gr_kzk_tp tp = {.topic = (char *)r->topic, .partition = r->partition};
        log_ok(sm, r, gr_ctrl_replica_state_get(p, r->replica), GR_RS_OFFLINE);
        gr_ctrl_batch_add_update_metadata_brokers_only(sm->batch);
        gr_ctrl_batch_add_update_metadata(sm->batch, NULL, 0, &tp, 1);
        gr_ctrl_replica_state_set(p, r->replica, GR_RS_OFFLINE);
    }
}

/* Rounds over c->with until every ISR shrink is settled (first: the first round may start from
 * the context). Returns 0 or GR_ECONTROLLER_MOVED. */
static int offline_write_rounds(struct gr_ctrl_sm *sm, struct offline_call *c, bool first) {
    int ret = 0;
    for (; c->n_with > 0 && !ret; first = false) {
        int n_retry = 0;
        ret = remove_from_isr_round(sm, c->reps, c->parts, c->with, c->n_with, &c->fresh, first, c->ok, c->retry,
                                    &n_retry);
        memcpy(c->with, c->retry, (size_t)n_retry * sizeof *c->with);
        c->n_with = n_retry;
    }
    return ret;
}

/* Each settled replica's LeaderAndIsr and state change. */
static void offline_after_writes(struct gr_ctrl_sm *sm, struct offline_call *c) {
    for (int k = 0; k < c->n_valid; k++)
        if (c->ok[c->valid[k]]) offline_after_isr(sm, c->reps[c->valid[k]].replica, &c->reps[c->valid[k]], c->parts[c->valid[k]]);
}

static void offline_free(struct offline_call *c) {
    free(c->fresh.slots);
    free(c->valid);
    free(c->parts);
    free(c->ok);
    free(c->with);
    free(c->retry);
}

/* handleStateChanges for the replicas of one broker (any target but Offline and Online). */
static void do_handle(struct gr_ctrl_sm *sm, int32_t replica_id, const struct gr_ctrl_replica *reps, int n,
                      int target) {
    int *valid = gr_malloc((size_t)(n ? n : 1) * sizeof *valid);
    int n_valid = valid_transitions(sm, reps, n, target, valid);
    for (int k = 0; k < n_valid; k++) {
        const struct gr_ctrl_replica *r = &reps[valid[k]];
        if (target == GR_RS_NEW) to_new(sm, replica_id, r);
        else to_plain(sm, replica_id, r, target);
    }
    free(valid);
}

/* handleStateChanges to Offline for every broker's replicas at once (v sorted by broker). */
static int handle_offline(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *v, int n) {
    struct offline_call c;
    offline_begin(sm, v, n, &c);
    offline_batch_start(sm, &c);
    int rc = offline_write_rounds(sm, &c, true);
    if (!rc) offline_after_writes(sm, &c);
    offline_free(&c);
    return rc;
}

/* ---- handleStateChanges to Online ---- */

/* One partition's replicas going online in this call that get a LeaderAndIsr entry: a chain of
 * indexes into the call's pending array, found through an open-addressing table keyed by the
 * context's partition pointer. */
struct online_group {
    struct gr_ctrl_partition *p;
    const char *topic;
    int head, tail, n;
};

struct online_pending {
    int32_t replica;
    int next;
};

/* The group of p in groups[] (slots hold group index + 1), added if new. */
static int online_group_of(struct online_group *groups, int *n_groups, int *slots, size_t mask,
                           struct gr_ctrl_partition *p, const char *topic) {
    size_t i = (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ULL) & mask;
    while (slots[i] && groups[slots[i] - 1].p != p) i = (i + 1) & mask;
    if (!slots[i]) {
        groups[*n_groups] = (struct online_group){.p = p, .topic = topic, .head = -1, .tail = -1};
        slots[i] = ++*n_groups;
    }
    return slots[i] - 1;
}

/* handleStateChanges to Online for every broker's replicas at once (v sorted by broker). Each
 * replica is validated, logged and moved to OnlineReplica as Kafka does it, broker by broker;
 * the LeaderAndIsr entries (replicas not coming from NewReplica, partitions with a leader) are
 * then added once per partition for all of its replicas going online: the requests are the same
 * as adding them one replica at a time (the batch keys entries by broker and partition and takes
 * everything from the context, which this call does not change), but the partition's
 * UpdateMetadata entry is built once instead of once per replica (300k rebuilds for 100k
 * partitions at failover). */
static void handle_online(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *v, int n) {
    struct gr_ctrl_context *ctx = sm->ctx;
    int *valid = gr_malloc((size_t)n * sizeof *valid);
    struct online_pending *pend = gr_malloc((size_t)n * sizeof *pend);
    struct online_group *groups = gr_malloc((size_t)n * sizeof *groups);
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap *= 2;
    int *slots = gr_calloc(cap, sizeof *slots);
    int n_groups = 0, n_pend = 0;
    struct gr_ctrl_topic *t = NULL;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && v[j].replica == v[i].replica) j++;
        int m = valid_transitions(sm, &v[i], j - i, GR_RS_ONLINE, valid);
        for (int k = 0; k < m; k++) {
            const struct gr_ctrl_replica *r = &v[i + valid[k]];
            if (!t || (t->name != r->topic && strcmp(t->name, r->topic) != 0)) t = gr_ctrl_ctx_topic(ctx, r->topic);
            struct gr_ctrl_partition *p = gr_ctrl_topic_partition(t, r->partition);
            int from = gr_ctrl_replica_state_get(p, r->replica);
            if (from != GR_RS_NEW && p->has_state) {
                struct online_group *g = &groups[online_group_of(groups, &n_groups, slots, cap - 1, p, t->name)];
                pend[n_pend] = (struct online_pending){.replica = r->replica, .next = -1};
                if (g->tail >= 0) pend[g->tail].next = n_pend;
                else g->head = n_pend;
                g->tail = n_pend++;
                g->n++;
            }
            log_ok(sm, r, from, GR_RS_ONLINE);
            gr_ctrl_replica_state_set(p, r->replica, GR_RS_ONLINE);
        }
        i = j;
    }
    int32_t *ids = gr_malloc((size_t)(n_pend ? n_pend : 1) * sizeof *ids);
    for (int g = 0; g < n_groups; g++) {
        int k = 0;
        for (int e = groups[g].head; e >= 0; e = pend[e].next) ids[k++] = pend[e].replica;
        gr_ctrl_batch_add_leader_and_isr_p(sm->batch, ids, k, groups[g].topic, groups[g].p, &groups[g].p->lai, false);
    }
    free(ids);
    free(slots);
    free(groups);
    free(pend);
    free(valid);
}

static int cmp_replica_id(const void *a, const void *b) {
    const struct gr_ctrl_replica *x = a, *y = b;
    return x->replica < y->replica ? -1 : x->replica > y->replica;
}

/* replicas grouped by broker id, ascending, into v (a counting sort over the distinct ids, which
 * are few: 300k replicas at a 100k-partition failover; qsort when there are more than 256). */
static void group_by_broker(const struct gr_ctrl_replica *replicas, int n, struct gr_ctrl_replica *v) {
    int32_t ids[256];
    int cnt[257], n_ids = 0;
    for (int i = 0; i < n; i++) {
        int32_t id = replicas[i].replica;
        int lo = 0, hi = n_ids;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (ids[mid] < id) lo = mid + 1;
            else hi = mid;
        }
        if (lo < n_ids && ids[lo] == id) continue;
        if (n_ids == 256) {
            memcpy(v, replicas, (size_t)n * sizeof *v);
            qsort(v, (size_t)n, sizeof *v, cmp_replica_id);
            return;
        }
        memmove(&ids[lo + 1], &ids[lo], (size_t)(n_ids - lo) * sizeof *ids);
        ids[lo] = id;
        n_ids++;
    }
    memset(cnt, 0, sizeof cnt);
    int *pos = gr_malloc((size_t)n * sizeof *pos);
    int last = -1;
    for (int i = 0; i < n; i++) {
        int32_t id = replicas[i].replica;
        if (last < 0 || ids[last] != id) { /* replicas of one broker often come in runs */
            int lo = 0, hi = n_ids - 1;
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (ids[mid] < id) lo = mid + 1;
                else hi = mid;
            }
            last = lo;
        }
        pos[i] = last;
        cnt[last + 1]++;
    }
    for (int d = 0; d < n_ids; d++) cnt[d + 1] += cnt[d];
    for (int i = 0; i < n; i++) v[cnt[pos[i]]++] = replicas[i];
    free(pos);
}

/* Ends a handleStateChanges batch: sends it, or (the controller moved: rc GR_ECONTROLLER_MOVED)
 * drops it, keeping the lines of the ISR shrinks already written. Returns 0 or
 * GR_ECONTROLLER_MOVED. */
static int end_batch(struct gr_ctrl_sm *sm, int rc, int target) {
    if (rc == GR_ECONTROLLER_MOVED) {
        gr_error(LOGGER, "Controller moved to another broker when moving some replicas to %s state",
                 gr_replica_state_name(target));
        gr_ctrl_batch_clear(sm->batch);
        gr_ctrl_batch_flush_log(sm->batch); /* the ISR shrinks written before */
        return rc;
    }
    gr_ctrl_batch_send(sm->batch);
    return 0;
}

int gr_rsm_handle_state_changes(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *replicas, int n, int target) {
    if (n <= 0) return 0;
    /* group by broker id (order within a group does not matter: the batch sorts its entries) */
    struct gr_ctrl_replica *v = gr_malloc((size_t)n * sizeof *v);
    group_by_broker(replicas, n, v);
    gr_ctrl_batch_begin(sm->batch);
    int rc = 0;
    if (target == GR_RS_OFFLINE) {
        rc = handle_offline(sm, v, n);
    } else if (target == GR_RS_ONLINE) {
        handle_online(sm, v, n);
    } else {
        for (int i = 0; i < n;) {
            int j = i;
            while (j < n && v[j].replica == v[i].replica) j++;
            do_handle(sm, v[i].replica, &v[i], j - i, target);
            i = j;
        }
    }
    rc = end_batch(sm, rc, target);
    free(v);
    return rc;
}

/* ---- the controlled shutdown's prepared -> Offline ---- */

struct gr_rsm_prepared {
    struct gr_ctrl_replica *v; /* the call's replicas, grouped by broker */
    struct offline_call c;
    struct isr_round first;    /* the first round, prepared */
    struct gr_kzk_job *job;    /* its writes */
};

struct gr_rsm_prepared *gr_rsm_prepare_offline(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *replicas, int n) {
    struct gr_rsm_prepared *pr = gr_calloc(1, sizeof *pr);
    pr->v = gr_malloc((size_t)(n ? n : 1) * sizeof *pr->v);
    if (n > 0) group_by_broker(replicas, n, pr->v);
    offline_begin(sm, pr->v, n, &pr->c);
    if (pr->c.n_with > 0) {
        isr_round_prepare(sm, pr->v, pr->c.parts, pr->c.with, pr->c.n_with, &pr->c.fresh, true, pr->c.ok, &pr->first);
        if (pr->first.n_items) {
            pr->job = gr_kzk_update_partition_states_job(sm->kzk, sm->ctx->epoch_zk_version, pr->first.items,
                                                         pr->first.n_items);
            gr_kzk_job_start_after_next_write(pr->job);
        }
    }
    return pr;
}

void gr_rsm_prepared_free(struct gr_rsm_prepared *pr) {
    if (!pr) return;
    gr_kzk_job_free(pr->job);
    isr_round_free(&pr->first);
    offline_free(&pr->c);
    free(pr->v);
    free(pr);
}

int gr_rsm_finish_offline(struct gr_ctrl_sm *sm, struct gr_rsm_prepared *pr, void (*written)(void *), void *arg) {
    struct offline_call *c = &pr->c;
    gr_ctrl_batch_begin(sm->batch);
    offline_batch_start(sm, c);
    int rc = 0;
    if (c->n_with > 0) {
        int n_retry = 0;
        if (pr->first.n_items) {
            int64_t t0 = gr_mono_ms();
            int wrc = gr_kzk_job_wait(pr->job);
            log_isr_written(pr->first.n_items, pr->job->took_ms);
            if (gr_mono_ms() - t0 > 0)
                gr_debug(LOGGER, "Waited %lld ms for the ISR shrinks written meanwhile", (long long)(gr_mono_ms() - t0));
            rc = isr_apply(sm, c->reps, pr->first.groups, pr->first.item_of, pr->first.n_items, pr->first.adj, wrc,
                           pr->job->res, &c->fresh, c->ok, c->retry, &n_retry);
        }
        memcpy(c->with, c->retry, (size_t)n_retry * sizeof *c->with);
        c->n_with = n_retry;
    }
    if (!rc) rc = offline_write_rounds(sm, c, false);
    if (!rc && written) written(arg);
    if (!rc) offline_after_writes(sm, c);
    rc = end_batch(sm, rc, GR_RS_OFFLINE);
    gr_rsm_prepared_free(pr);
    return rc;
}

void gr_rsm_replicas_on_brokers(struct gr_ctrl_sm *sm, const int32_t *brokers, int n, struct gr_ctrl_replica_list *out) {
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(sm->ctx, &cur)))
        for (int i = 0; i < t->n_partitions; i++) {
            struct gr_ctrl_partition *p = &t->partitions[i];
            for (int b = 0; b < n; b++)
                if (gr_ctrl_replica_index(p, brokers[b]) >= 0)
                    gr_ctrl_replica_list_add(out, t->name, p->partition, brokers[b]);
        }
}

void gr_rsm_replicas_for_partitions(struct gr_ctrl_sm *sm, const struct gr_kzk_tp *tps, int n,
                                    struct gr_ctrl_replica_list *out) {
    for (int i = 0; i < n; i++) {
        struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(sm->ctx, tps[i].topic);
        struct gr_ctrl_partition *p = gr_ctrl_topic_partition(t, tps[i].partition);
        if (!p) continue;
        for (int r = 0; r < p->n_replicas; r++)
            gr_ctrl_replica_list_add(out, t->name, p->partition, p->replicas[r]);
    }
}

/* startup's handleStateChanges(online replicas, OnlineReplica) when its per-replica DEBUG lines
 * are not written: every replica startup just set Online is valid (Online -> Online, from the
 * context, in its partition's assignment), nothing in the context changes, and the requests are
 * those of one LeaderAndIsr add per partition with a state for its online replicas -- what
 * handle_online builds from the replica list, without listing, grouping and looking up 300k
 * replicas by name at a 100k-partition failover (test_state_machines compares the two paths'
 * requests byte for byte). n_online: how many replicas startup set Online (0: nothing at all, as
 * gr_rsm_handle_state_changes with none). */
static int startup_online(struct gr_ctrl_sm *sm, size_t n_online) {
    if (n_online == 0) return 0;
    struct gr_ctrl_context *ctx = sm->ctx;
    gr_ctrl_batch_begin(sm->batch);
    int32_t ids_small[8], *ids = ids_small;
    int cap = 8;
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur)))
        for (int i = 0; i < t->n_partitions; i++) {
            struct gr_ctrl_partition *p = &t->partitions[i];
            if (!p->has_state) continue;
            if (p->n_replicas > cap) {
                if (ids != ids_small) free(ids);
                cap = p->n_replicas;
                ids = gr_malloc((size_t)cap * sizeof *ids);
            }
            int k = 0;
            for (int r = 0; r < p->n_replicas; r++)
                if (gr_ctrl_replica_state_get(p, p->replicas[r]) == GR_RS_ONLINE) ids[k++] = p->replicas[r];
            if (k) gr_ctrl_batch_add_leader_and_isr_p(sm->batch, ids, k, t->name, p, &p->lai, false);
        }
    if (ids != ids_small) free(ids);
    return end_batch(sm, 0, GR_RS_ONLINE);
}

/* isOnline (gr_ctrl_replica_online without shutting-down brokers) in two parts: the broker's --
 * registered and not shutting down, remembered for the first 16 ids -- and the partition's log
 * dir (gr_ctrl_replica_on_offline_dir). */
struct broker_memo {
    int32_t id[16];
    bool up[16];
    int n;
};

static bool broker_up(struct broker_memo *m, const struct gr_ctrl_context *ctx, int32_t id) {
    for (int i = 0; i < m->n; i++)
        if (m->id[i] == id) return m->up[i];
    bool up = gr_ctrl_broker_registered(ctx, id) && !gr_ctrl_broker_shutting_down(ctx, id);
    if (m->n < 16) {
        m->id[m->n] = id;
        m->up[m->n++] = up;
    }
    return up;
}

void gr_rsm_startup_init(struct gr_ctrl_sm *sm, struct gr_ctrl_replica_list *offline) {
    struct gr_ctrl_context *ctx = sm->ctx;
    gr_info(LOGGER, "Initializing replica state");
    size_t cur = 0;
    struct broker_memo memo = {0};
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur)))
        for (int i = 0; i < t->n_partitions; i++) {
            struct gr_ctrl_partition *p = &t->partitions[i];
            for (int r = 0; r < p->n_replicas; r++) {
                int32_t id = p->replicas[r];
                if (broker_up(&memo, ctx, id) && !gr_ctrl_replica_on_offline_dir(p, id)) {
                    gr_ctrl_replica_state_set(p, id, GR_RS_ONLINE);
                } else {
                    gr_ctrl_replica_state_set(p, id, GR_RS_DELETION_INELIGIBLE);
                    gr_ctrl_replica_list_add(offline, t->name, p->partition, id);
                }
            }
        }
}

int gr_rsm_startup_online(struct gr_ctrl_sm *sm) {
    /* the online replicas are listed only for the general path, which writes their DEBUG lines */
    bool list_online = gr_log_enabled(GR_LOG_DEBUG);
    struct gr_ctrl_replica_list online = {0};
    size_t n_online = 0, cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(sm->ctx, &cur)))
        for (int i = 0; i < t->n_partitions; i++) {
            struct gr_ctrl_partition *p = &t->partitions[i];
            for (int r = 0; r < p->n_replicas; r++) {
                if (gr_ctrl_replica_state_get(p, p->replicas[r]) != GR_RS_ONLINE) continue;
                if (list_online) gr_ctrl_replica_list_add(&online, t->name, p->partition, p->replicas[r]);
                n_online++;
            }
        }
    gr_info(LOGGER, "Triggering online replica state changes");
    int rc = list_online ? gr_rsm_handle_state_changes(sm, online.v, online.n, GR_RS_ONLINE)
                         : startup_online(sm, n_online);
    gr_ctrl_replica_list_free(&online);
    return rc;
}
