/* Partition state machine and election driver: see partition_sm.h. */
#include "controller/partition_sm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "controller/request_batch.h"

#define LOGGER "kafka.controller.ZkPartitionStateMachine"

#define SC_LOG(lvl, sm, fmt, ...)                                                                                 \
    gr_log(lvl, GR_STATE_CHANGE_LOGGER, "[Controller id=%d epoch=%d] " fmt, (sm)->controller_id, (sm)->ctx->epoch, \
           __VA_ARGS__)

static void log_failed(struct gr_ctrl_sm *sm, const struct gr_kzk_tp *tp, int from, int to, const char *why) {
    SC_LOG(GR_LOG_ERROR, sm, "Controller %d epoch %d failed to change state for partition %s-%d from %s to %s: %s",
           sm->controller_id, sm->ctx->epoch, tp->topic, tp->partition, gr_partition_state_name(from),
           gr_partition_state_name(to), why);
}

void gr_psm_partitions_in_states(struct gr_ctrl_sm *sm, unsigned state_mask, const char *topic,
                                 struct gr_ctrl_tp_list *out) {
    struct gr_ctrl_context *ctx = sm->ctx;
    if (topic) {
        struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, topic);
        if (!t) return;
        for (int i = 0; i < t->n_partitions; i++)
            if (state_mask & (1u << t->partitions[i].state)) gr_ctrl_tp_list_add(out, t->name, t->partitions[i].partition);
        return;
    }
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur)))
        for (int i = 0; i < t->n_partitions; i++)
            if (state_mask & (1u << t->partitions[i].state)) gr_ctrl_tp_list_add(out, t->name, t->partitions[i].partition);
}

int gr_psm_topic_unclean_enabled(struct gr_ctrl_sm *sm, const char *topic, bool *enabled) {
    struct gr_kzk_config cfg = {0};
    int rc = gr_kzk_get_entity_config(sm->kzk, "topics", topic, &cfg);
    if (rc) return rc;
    const char *v = gr_kzk_config_get(&cfg, "unclean.leader.election.enable");
    *enabled = v ? strcasecmp(v, "true") == 0 : sm->unclean_default;
    gr_kzk_config_release(&cfg);
    return 0;
}

/* ---- New -> Online ---- */

/* initializeLeaderAndIsrForPartitions: rcs[i] for idx[i]. */
static int initialize_partitions(struct gr_ctrl_sm *sm, const struct gr_kzk_tp *tps, const int *idx, int n, int *rcs) {
    struct gr_ctrl_context *ctx = sm->ctx;
    struct gr_kzk_leader_and_isr *lais = gr_calloc((size_t)(n ? n : 1), sizeof *lais);
    struct gr_kzk_state_write *items = gr_calloc((size_t)(n ? n : 1), sizeof *items);
    int *item_of = gr_malloc((size_t)(n ? n : 1) * sizeof *item_of);
    int n_items = 0;
    for (int k = 0; k < n; k++) {
        const struct gr_kzk_tp *tp = &tps[idx[k]];
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(ctx, tp->topic, tp->partition);
        int32_t *live = gr_malloc((size_t)(p->n_replicas ? p->n_replicas : 1) * sizeof *live);
        int n_live = 0;
        for (int i = 0; i < p->n_replicas; i++)
            if (gr_ctrl_replica_online(ctx, p, p->replicas[i], false)) live[n_live++] = p->replicas[i];
        if (n_live == 0) {
            char rep[256], why[512];
            char brokers[512];
            snprintf(why, sizeof why,
                     "assigned replicas are [%s], live brokers are [%s]. No assigned replica is alive.",
                     gr_ctrl_fmt_ids(rep, sizeof rep, p->replicas, p->n_replicas),
                     gr_ctrl_ctx_format_brokers(ctx, brokers, sizeof brokers));
            log_failed(sm, tp, GR_PS_NEW, GR_PS_ONLINE, why);
            free(live);
            rcs[idx[k]] = GR_PSM_EFAILED;
            continue;
        }
        struct gr_kzk_leader_and_isr *l = &lais[n_items];
        l->leader = live[0];
        l->leader_epoch = 0;
        l->controller_epoch = ctx->epoch;
        l->isr = live;
        l->n_isr = n_live;
        l->zk_version = 0;
        items[n_items].topic = tp->topic;
        items[n_items].partition = tp->partition;
        items[n_items].lai = l;
        item_of[n_items] = idx[k];
        n_items++;
    }
    int ret = 0;
    if (n_items > 0) {
        struct gr_kzk_write_result *res = gr_calloc((size_t)n_items, sizeof *res);
        int rc = gr_kzk_create_partition_states(sm->kzk, ctx->epoch_zk_version, items, n_items, res);
        if (rc == GR_ECONTROLLER_MOVED) {
            gr_error(LOGGER, "Controller moved to another broker when trying to create the topic partition state znode");
            ret = rc;
        } else {
            for (int i = 0; i < n_items; i++) {
                const struct gr_kzk_tp *tp = &tps[item_of[i]];
                int irc = rc ? rc : res[i].rc;
                if (irc != 0) {
                    log_failed(sm, tp, GR_PS_NEW, GR_PS_ONLINE, gr_kzk_strerror(irc));
                    rcs[item_of[i]] = GR_PSM_EFAILED;
                    continue;
                }
                struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(ctx, tp->topic, tp->partition);
                struct gr_kzk_leader_and_isr *l = (struct gr_kzk_leader_and_isr *)items[i].lai; /* in lais */
                l->zk_version = res[i].zk_version;
                gr_ctrl_partition_set_state(p, l);
                gr_ctrl_partition_mark_fresh(ctx, p);
                gr_ctrl_batch_add_leader_and_isr(sm->batch, l->isr, l->n_isr, tp->topic, tp->partition, l, true);
                /* "Changed partition T-P from NewPartition to OnlinePartition with state ...",
                 * written after the send (request_batch.h) */
                gr_ctrl_batch_log_online(sm->batch, tp->topic, tp->partition, GR_PS_NEW, &p->lai);
                p->state = GR_PS_ONLINE;
                rcs[item_of[i]] = 0;
            }
        }
        free(res);
    }
    for (int i = 0; i < n_items; i++) free(lais[i].isr);
    free(lais);
    free(items);
    free(item_of);
    return ret;
}

/* ---- elections ---- */

struct topic_unclean {
    const char *topic;
    int rc;
    bool enabled;
};

/* One round of doElectLeaderForPartitions: the partitions read (req[k], tps index idx[k]), their
 * ZooKeeper states cur[k] and election results er[k]. */
struct round {
    struct gr_ctrl_sm *sm;
    const struct gr_psm_strategy *strategy;
    int *rcs;
    int n;
    struct gr_kzk_tp *req;
    int *idx;
    struct gr_kzk_state_result *cur;
    struct gr_election_result *er;
    struct topic_unclean *cache; /* unclean.leader.election.enable per topic, read once */
    int n_cache;
    /* cached[k]: cur[k] was taken from the context, not read (the first round); an election that
     * fails on it is retried on a fresh read instead of failing (retry / n_retry). */
    bool *cached;
    int *retry;
    int *n_retry;
};

static void round_fail(struct round *r, const struct gr_kzk_tp *tp, int tps_index, const char *why) {
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(r->sm->ctx, tp->topic, tp->partition);
    log_failed(r->sm, tp, p ? p->state : GR_PS_NONEXISTENT, GR_PS_ONLINE, why);
    r->rcs[tps_index] = GR_PSM_EFAILED;
}

/* An offline election picks a leader among the partition's online replicas (clean: in the ISR,
 * unclean: any), so with none online it fails whatever ZooKeeper holds: fail it without reading
 * the state (Kafka reads it first; with every replica's broker gone that was one read per
 * partition, 100k reads in a failover with 100k such partitions). Only the reason logged can
 * differ: a missing or newer-epoch state would have been named. The others go to r->req. */
static void round_select(struct round *r, const struct gr_kzk_tp *tps, const int *idx, int n) {
    struct gr_ctrl_context *ctx = r->sm->ctx;
    r->req = gr_malloc((size_t)(n ? n : 1) * sizeof *r->req);
    r->idx = gr_malloc((size_t)(n ? n : 1) * sizeof *r->idx);
    r->n = 0;
    for (int k = 0; k < n; k++) {
        const struct gr_kzk_tp *tp = &tps[idx[k]];
        struct gr_ctrl_partition *p =
            r->strategy->kind == GR_ELECT_OFFLINE ? gr_ctrl_ctx_partition(ctx, tp->topic, tp->partition) : NULL;
        bool any_online = !p;
        for (int i = 0; p && i < p->n_replicas && !any_online; i++)
            any_online = gr_ctrl_replica_online(ctx, p, p->replicas[i], false);
        if (!any_online) {
            char why[512];
            snprintf(why, sizeof why, "Failed to elect leader for partition %s-%d under strategy %s", tp->topic,
                     tp->partition, gr_election_strategy_name(r->strategy->kind));
            round_fail(r, tp, idx[k], why);
            continue;
        }
        r->req[r->n] = *tp;
        r->idx[r->n++] = idx[k];
    }
}

/* Whether topic allows an unclean election (0) or the error reading its config. */
static int round_unclean_enabled(struct round *r, const char *topic, bool *enabled) {
    int c;
    for (c = 0; c < r->n_cache; c++)
        if (strcmp(r->cache[c].topic, topic) == 0) break;
    if (c == r->n_cache) {
        r->cache = gr_realloc(r->cache, (size_t)(r->n_cache + 1) * sizeof *r->cache);
        r->cache[c].topic = topic;
        r->cache[c].enabled = false;
        r->cache[c].rc = gr_psm_topic_unclean_enabled(r->sm, topic, &r->cache[c].enabled);
        r->n_cache++;
    }
    *enabled = r->cache[c].enabled;
    return r->cache[c].rc;
}

/* An election of req[k] that cannot go ahead: failed (logged, rcs set) -- or, when it was tried on
 * the context's cached state, retried on a state read from ZooKeeper (next round), so that only
 * a ZooKeeper read ever decides "no leader to write". */
static void elect_fail(struct round *r, int k, const char *why) {
    if (r->cached && r->cached[k]) {
        r->retry[(*r->n_retry)++] = r->idx[k];
        return;
    }
    round_fail(r, &r->req[k], r->idx[k], why);
}

/* The election of req[k] over its ZooKeeper state: true with er[k] filled when it has a leader to
 * write, false when it failed (logged, rcs set). */
static bool round_elect(struct round *r, int k) {
    struct gr_ctrl_sm *sm = r->sm;
    struct gr_ctrl_context *ctx = sm->ctx;
    const struct gr_kzk_tp *tp = &r->req[k];
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(ctx, tp->topic, tp->partition);
    const struct gr_kzk_state_result *cur = &r->cur[k];
    char why[512];
    if (cur->rc == GR_KZK_ENONODE || cur->rc == GR_ECORRUPT) {
        snprintf(why, sizeof why, "LeaderAndIsr information doesn't exist for partition %s-%d in %s state", tp->topic,
                 tp->partition, gr_partition_state_name(p->state));
        elect_fail(r, k, why);
        return false;
    }
    if (cur->rc) {
        elect_fail(r, k, gr_kzk_strerror(cur->rc));
        return false;
    }
    if (cur->lai.controller_epoch > ctx->epoch) {
        snprintf(why, sizeof why,
                 "Aborted leader election for partition %s-%d since the LeaderAndIsr path was already written by "
                 "another controller. This probably means that the current controller %d went through a soft "
                 "failure and another controller was elected with epoch %d.",
                 tp->topic, tp->partition, sm->controller_id, cur->lai.controller_epoch);
        elect_fail(r, k, why);
        return false;
    }
    bool unclean = false;
    if (r->strategy->kind == GR_ELECT_OFFLINE && !gr_elect_has_live_isr(ctx, p, &cur->lai)) {
        int rc = r->strategy->allow_unclean ? (unclean = true, 0) : round_unclean_enabled(r, tp->topic, &unclean);
        if (rc) {
            elect_fail(r, k, gr_kzk_strerror(rc));
            return false;
        }
    }
    struct gr_election_result *er = &r->er[k];
    gr_elect_partition(ctx, p, &cur->lai, r->strategy->kind, unclean, er);
    if (!er->elected) {
        snprintf(why, sizeof why, "Failed to elect leader for partition %s-%d under strategy %s", tp->topic,
                 tp->partition, gr_election_strategy_name(r->strategy->kind));
        elect_fail(r, k, why);
        return false;
    }
    if (er->unclean) {
        if (sm->unclean_elections) gr_meter_mark(sm->unclean_elections, 1);
        SC_LOG(GR_LOG_WARN, sm, "Unclean leader election: partition %s-%d gets out-of-sync leader %d", tp->topic,
               tp->partition, er->lai.leader);
    }
    er->lai.controller_epoch = ctx->epoch;
    return true;
}

/* The results res[from, to) of the elected states written (items[i] is req[item_of[i]]), rc the
 * call's: applied to the context and the batch, BADVERSION to r->retry[]. */
static void apply_written(struct round *r, const int *item_of, const struct gr_kzk_write_result *res, int from,
                          int to, int rc) {
    struct gr_ctrl_sm *sm = r->sm;
    struct gr_ctrl_context *ctx = sm->ctx;
    for (int i = from; i < to; i++) {
        int k = item_of[i];
        const struct gr_kzk_tp *tp = &r->req[k];
        int irc = rc ? rc : res[i].rc;
        if (irc == GR_KZK_EBADVERSION) {
            gr_debug(LOGGER, "Controller failed to elect leader for partition %s-%d: bad ZK version. This will be retried.",
                     tp->topic, tp->partition);
            r->retry[(*r->n_retry)++] = r->idx[k];
            continue;
        }
        if (irc) {
            round_fail(r, tp, r->idx[k], gr_kzk_strerror(irc));
            continue;
        }
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(ctx, tp->topic, tp->partition);
        struct gr_election_result *er = &r->er[k];
        er->lai.zk_version = res[i].zk_version;
        gr_ctrl_partition_set_state(p, &er->lai);
        gr_ctrl_partition_mark_fresh(ctx, p);
        gr_ctrl_batch_add_leader_and_isr(sm->batch, er->recipients, er->n_recipients, tp->topic, tp->partition, &p->lai,
                                         false);
        /* "Changed partition T-P from S to OnlinePartition with state ...", after the send */
        gr_ctrl_batch_log_online(sm->batch, tp->topic, tp->partition, p->state, &p->lai);
        p->state = GR_PS_ONLINE;
        r->rcs[r->idx[k]] = 0;
    }
}

struct written_rounds {
    struct round *r;
    const int *item_of;
    const struct gr_kzk_write_result *res;
    int applied; /* items [0, applied) applied */
};

/* A round of the writes is in ZooKeeper: its elections are applied and their LeaderAndIsr and
 * UpdateMetadata requests built and handed to the send threads before the next round is written,
 * so the brokers apply a round while ZooKeeper writes the next (at 100k partitions a broker's 33k
 * leaderships are 5 rounds of ~0.1 s; building a round's requests takes a few ms, during which
 * ZooKeeper waits). Each part's UpdateMetadata goes to every broker, as every step's. Sending a
 * step's batch in parts keeps every rule of the batch: each part's states are in ZooKeeper under
 * this epoch before they are sent, and per broker the parts go in order on one channel. */
static void round_written(void *arg, int first, int count) {
    struct written_rounds *w = arg;
    apply_written(w->r, w->item_of, w->res, first, first + count, 0);
    w->applied = first + count;
    struct gr_ctrl_batch *b = w->r->sm->batch;
    gr_ctrl_batch_send(b);
    gr_ctrl_batch_begin(b);
}

/* Writes the elected states (items[i] is req[item_of[i]]) in guarded multis and applies what was
 * written, a round of multis at a time (round_written); BADVERSION goes to r->retry[]. Returns 0 or
 * GR_ECONTROLLER_MOVED (the rounds before it were applied and sent). */
static int round_write(struct round *r, const struct gr_kzk_state_write *items, const int *item_of, int n_items) {
    struct gr_ctrl_sm *sm = r->sm;
    struct gr_kzk_write_result *res = gr_calloc((size_t)n_items, sizeof *res);
    struct written_rounds w = {.r = r, .item_of = item_of, .res = res};
    int64_t t0 = gr_mono_ms();
    int rc = gr_kzk_update_partition_states_rounds(sm->kzk, sm->ctx->epoch_zk_version, items, n_items, res,
                                                   round_written, &w);
    gr_log(n_items >= 1000 ? GR_LOG_INFO : GR_LOG_DEBUG, LOGGER, "Wrote %d elected leader(s) to ZooKeeper in %lld ms",
           n_items, (long long)(gr_mono_ms() - t0));
    if (rc != GR_ECONTROLLER_MOVED) apply_written(r, item_of, res, w.applied, n_items, rc);
    free(res);
    return rc == GR_ECONTROLLER_MOVED ? rc : 0;
}

static void round_free(struct round *r) {
    for (int k = 0; r->er && k < r->n; k++) gr_election_result_release(&r->er[k]);
    for (int k = 0; r->cur && k < r->n; k++) gr_kzk_leader_and_isr_release(&r->cur[k].lai);
    free(r->er);
    free(r->cur);
    free(r->cache);
    free(r->cached);
    free(r->req);
    free(r->idx);
}

/* The current states of r->req[0..n) into r->cur. Kafka reads every one from ZooKeeper. With
 * from_cache (the first round) a partition whose state the context holds starts from it: an
 * election that writes does so conditionally on the cached zkVersion, so a state changed
 * meanwhile fails with BADVERSION and is reread and elected again (next round), as after a
 * concurrent change in Kafka; an election that fails on the cached state is retried on a read
 * (elect_fail). The fencing is unchanged: every write is a guarded multi. This saves one read per
 * partition per election (3,333 reads for a broker's leaderships at 10k partitions). */
static int read_states(struct round *r, bool from_cache) {
    struct gr_ctrl_context *ctx = r->sm->ctx;
    struct gr_kzk_tp *rd = gr_malloc((size_t)(r->n ? r->n : 1) * sizeof *rd);
    int *of = gr_malloc((size_t)(r->n ? r->n : 1) * sizeof *of);
    int n_rd = 0;
    r->cached = gr_calloc((size_t)(r->n ? r->n : 1), sizeof *r->cached);
    for (int k = 0; k < r->n; k++) {
        const struct gr_ctrl_partition *p =
            from_cache ? gr_ctrl_ctx_partition(ctx, r->req[k].topic, r->req[k].partition) : NULL;
        if (p && p->has_state) {
            r->cur[k].lai = p->lai;
            r->cur[k].lai.isr = gr_malloc((size_t)(p->lai.n_isr > 0 ? p->lai.n_isr : 1) * sizeof(int32_t));
            if (p->lai.n_isr > 0) memcpy(r->cur[k].lai.isr, p->lai.isr, (size_t)p->lai.n_isr * sizeof(int32_t));
            r->cached[k] = true;
            continue;
        }
        rd[n_rd] = r->req[k];
        of[n_rd++] = k;
    }
    int rc = 0;
    if (n_rd > 0) {
        struct gr_kzk_state_result *res = gr_calloc((size_t)n_rd, sizeof *res);
        rc = gr_kzk_get_partition_states(r->sm->kzk, rd, n_rd, res);
        for (int j = 0; j < n_rd; j++) r->cur[of[j]] = res[j]; /* moves the isr arrays */
        free(res);
    }
    free(rd);
    free(of);
    return rc;
}

/* One round of doElectLeaderForPartitions over idx[0..n): select, read the states, elect, write.
 * Partitions to retry (BADVERSION) are written to retry[] / *n_retry. */
static int elect_round(struct gr_ctrl_sm *sm, const struct gr_kzk_tp *tps, const int *idx, int n,
                       const struct gr_psm_strategy *strategy, bool from_cache, int *rcs, int *retry, int *n_retry) {
    struct round r = {.sm = sm, .strategy = strategy, .rcs = rcs, .retry = retry, .n_retry = n_retry};
    *n_retry = 0;
    round_select(&r, tps, idx, n);
    r.cur = gr_calloc((size_t)(r.n ? r.n : 1), sizeof *r.cur);
    int rc = read_states(&r, from_cache);
    if (rc) {
        for (int k = 0; k < r.n; k++) gr_kzk_leader_and_isr_release(&r.cur[k].lai);
        for (int k = 0; k < r.n; k++) round_fail(&r, &r.req[k], r.idx[k], gr_kzk_strerror(rc));
        r.n = 0; /* released above */
        round_free(&r);
        return 0;
    }
    r.er = gr_calloc((size_t)(r.n ? r.n : 1), sizeof *r.er);
    struct gr_kzk_state_write *items = gr_calloc((size_t)(r.n ? r.n : 1), sizeof *items);
    int *item_of = gr_malloc((size_t)(r.n ? r.n : 1) * sizeof *item_of);
    int n_items = 0;
    for (int k = 0; k < r.n; k++) {
        if (!round_elect(&r, k)) continue;
        items[n_items] = (struct gr_kzk_state_write){.topic = r.req[k].topic, .partition = r.req[k].partition,
                                                     .lai = &r.er[k].lai};
        item_of[n_items++] = k;
    }
    int ret = n_items > 0 ? round_write(&r, items, item_of, n_items) : 0;
    free(items);
    free(item_of);
    round_free(&r);
    return ret;
}

/* electLeaderForPartitions: rounds until nothing is left to retry. */
static int elect_leaders(struct gr_ctrl_sm *sm, const struct gr_kzk_tp *tps, const int *idx, int n,
                         const struct gr_psm_strategy *strategy, int *rcs) {
    int *remaining = gr_malloc((size_t)(n ? n : 1) * sizeof *remaining);
    int *retry = gr_malloc((size_t)(n ? n : 1) * sizeof *retry);
    memcpy(remaining, idx, (size_t)n * sizeof *remaining);
    int n_rem = n, rc = 0;
    for (bool first = true; n_rem > 0; first = false) {
        int n_retry = 0;
        rc = elect_round(sm, tps, remaining, n_rem, strategy, first, rcs, retry, &n_retry);
        if (rc) break;
        if (n_retry)
            gr_info(LOGGER, "Retrying leader election with strategy %s for %d partitions",
                    gr_election_strategy_name(strategy->kind), n_retry);
        memcpy(remaining, retry, (size_t)n_retry * sizeof *remaining);
        n_rem = n_retry;
    }
    free(remaining);
    free(retry);
    return rc;
}

/* ---- handleStateChanges ---- */

/* The partition of tp if its transition to target is valid, else NULL (logged). */
static struct gr_ctrl_partition *valid_transition(struct gr_ctrl_sm *sm, const struct gr_kzk_tp *tp, int target) {
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, tp->topic, tp->partition);
    if (!p) {
        log_failed(sm, tp, GR_PS_NONEXISTENT, target, "the partition is not in the controller's context");
        return NULL;
    }
    if (!gr_partition_transition_valid(p->state, target)) {
        char why[512];
        snprintf(why, sizeof why,
                 "Partition %s-%d should be in one of %s states before moving to %s state. Instead it is in %s state",
                 tp->topic, tp->partition, gr_partition_valid_previous(target), gr_partition_state_name(target),
                 gr_partition_state_name(p->state));
        log_failed(sm, tp, p->state, target, why);
        return NULL;
    }
    return p;
}

/* The transitions that only change the state (New, Offline, NonExistent). */
static void set_plain(struct gr_ctrl_sm *sm, const struct gr_kzk_tp *tp, struct gr_ctrl_partition *p, int target) {
    if (target == GR_PS_NEW) {
        char rep[256];
        SC_LOG(GR_LOG_INFO, sm, "Changed partition %s-%d state from %s to NewPartition with assigned replicas %s",
               tp->topic, tp->partition, gr_partition_state_name(p->state),
               gr_ctrl_fmt_ids(rep, sizeof rep, p->replicas, p->n_replicas));
    } else {
        gr_debug(GR_STATE_CHANGE_LOGGER, "[Controller id=%d epoch=%d] Changed partition %s-%d state from %s to %s",
                 sm->controller_id, sm->ctx->epoch, tp->topic, tp->partition, gr_partition_state_name(p->state),
                 gr_partition_state_name(target));
    }
    p->state = target;
}

static int do_handle(struct gr_ctrl_sm *sm, const struct gr_kzk_tp *tps, int n, int target,
                     const struct gr_psm_strategy *strategy, int *rcs) {
    int *uninit = gr_malloc((size_t)(n ? n : 1) * sizeof *uninit), n_uninit = 0;
    int *to_elect = gr_malloc((size_t)(n ? n : 1) * sizeof *to_elect), n_elect = 0;
    for (int i = 0; i < n; i++) {
        rcs[i] = GR_PSM_EFAILED;
        struct gr_ctrl_partition *p = valid_transition(sm, &tps[i], target);
        if (!p) continue;
        if (target != GR_PS_ONLINE) {
            set_plain(sm, &tps[i], p, target);
            rcs[i] = 0;
        } else if (p->state == GR_PS_NEW) {
            uninit[n_uninit++] = i;
        } else {
            to_elect[n_elect++] = i;
        }
    }
    int rc = 0;
    if (n_uninit) rc = initialize_partitions(sm, tps, uninit, n_uninit, rcs);
    if (!rc && n_elect) {
        if (!strategy) {
            gr_error(LOGGER, "Election strategy is a required field when the target state is OnlinePartition");
            for (int k = 0; k < n_elect; k++) rcs[to_elect[k]] = GR_PSM_EFAILED;
        } else {
            rc = elect_leaders(sm, tps, to_elect, n_elect, strategy, rcs);
        }
    }
    free(uninit);
    free(to_elect);
    return rc;
}

int gr_psm_handle_state_changes(struct gr_ctrl_sm *sm, const struct gr_kzk_tp *tps, int n, int target,
                                const struct gr_psm_strategy *strategy, int *rcs) {
    if (n <= 0) return 0;
    int *own = NULL;
    if (!rcs) rcs = own = gr_malloc((size_t)n * sizeof *rcs);
    gr_ctrl_batch_begin(sm->batch);
    int rc = do_handle(sm, tps, n, target, strategy, rcs);
    if (rc == GR_ECONTROLLER_MOVED) {
        gr_error(LOGGER, "Controller moved to another broker when moving some partitions to %s state",
                 gr_partition_state_name(target));
        gr_ctrl_batch_clear(sm->batch);
        gr_ctrl_batch_flush_log(sm->batch); /* the states written before */
    } else {
        gr_ctrl_batch_send(sm->batch);
        rc = 0;
    }
    free(own);
    return rc;
}

int gr_psm_trigger_online(struct gr_ctrl_sm *sm, const char *topic) {
    struct gr_ctrl_tp_list l = {0};
    gr_psm_partitions_in_states(sm, (1u << GR_PS_NEW) | (1u << GR_PS_OFFLINE), topic, &l);
    int k = 0;
    for (int i = 0; i < l.n; i++)
        if (!gr_ctrl_topic_queued_for_deletion(sm->ctx, l.v[i].topic)) l.v[k++] = l.v[i];
    struct gr_psm_strategy st = {.kind = GR_ELECT_OFFLINE, .allow_unclean = false};
    int rc = gr_psm_handle_state_changes(sm, l.v, k, GR_PS_ONLINE, &st, NULL);
    gr_ctrl_tp_list_free(&l);
    return rc;
}

int gr_psm_startup(struct gr_ctrl_sm *sm) {
    struct gr_ctrl_context *ctx = sm->ctx;
    gr_info(LOGGER, "Initializing partition state");
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur))) {
        for (int i = 0; i < t->n_partitions; i++) {
            struct gr_ctrl_partition *p = &t->partitions[i];
            if (!p->has_state) p->state = GR_PS_NEW;
            else if (gr_ctrl_replica_online(ctx, p, p->lai.leader, false)) p->state = GR_PS_ONLINE;
            else p->state = GR_PS_OFFLINE;
        }
    }
    gr_info(LOGGER, "Triggering online partition state changes");
    return gr_psm_trigger_online(sm, NULL);
}
