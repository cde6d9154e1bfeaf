/* Kafka's GroupCoordinator: the group APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
 * OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, DeleteGroups), the rebalance state
 * machine (prepare / complete join, storing the leader's assignment), member and join timers,
 * and the coordinator's lifecycle. See group_coordinator.h for the contract.
 *
 * The module's other files: group_metadata.c (groups and members in memory, queued answers),
 * group_metadata_manager.c (the group table, owned partitions, writes, loading). Ownership and
 * locking rules, numbered so the code can cite them: group_internal.h. */
#include "coordinator/group_coordinator.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "coordinator/group_internal.h"
#include "coordinator/txn_offsets.h"
#include "coordinator/group_offsets.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "storage/batch.h"

#define NEW_MEMBER_JOIN_TIMEOUT_MS (5 * 60 * 1000)

static const char *const state_names[] = {"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"};

/* A random version-4 UUID in Java's UUID.toString() form. */
static void random_uuid(char out[37]) {
    uint8_t b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        uint64_t x = (uint64_t)gr_mono_us() * 0x9E3779B97F4A7C15ull;
        for (int i = 0; i < 16; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            b[i] = (uint8_t)x;
        }
    }
    b[6] = (uint8_t)((b[6] & 0x0F) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3F) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* ---- storing the group's metadata (Kafka's storeGroup and its callback) ---- */

/* Context of a group metadata write (rule 3). */
struct store_ctx {
    struct gr_group_coordinator *gc;
    char *group_id;
    int32_t generation;
    bool sync; /* the leader's SyncGroup waits for it */
    uint8_t *batch;
};

static void maybe_prepare_rebalance_locked(struct gr_group_coordinator *gc, struct group *g, const char *reason,
                                           struct dq *q, struct wq *w);

/* Kafka's resetAndPropagateAssignmentError. */
static void reset_assignment_error_locked(struct group *g, int16_t error, struct dq *q) {
    for (struct member *m = g->members; m; m = m->next) {
        gc_member_set_assignment(m, NULL, 0);
        if (m->sync_cb) {
            gc_push_sync(q, m->sync_cb, m->sync_ctx, NULL, NULL, error);
            m->sync_cb = NULL;
            m->sync_ctx = NULL;
        }
    }
}

/* Kafka's propagateAssignment (assignments already set on the members). */
static void propagate_assignment_locked(struct gr_group_coordinator *gc, struct group *g, struct dq *q) {
    for (struct member *m = g->members; m; m = m->next) {
        if (!m->sync_cb) continue;
        gc_push_sync(q, m->sync_cb, m->sync_ctx, g, m, GR_KERR_NONE);
        m->sync_cb = NULL;
        m->sync_ctx = NULL;
        gc_schedule_hb(gc, m, m->session_timeout);
    }
}

static void store_done(void *arg, int16_t error, int64_t base_offset) {
    (void)base_offset;
    struct store_ctx *c = arg;
    struct gr_group_coordinator *gc = c->gc;
    struct dq q;
    struct wq w = {0};
    gc_dq_init(&q);
    pthread_mutex_lock(&gc->mu);
    struct group *g = gc_find_group_locked(gc, c->group_id);
    if (g && g->inflight > 0) g->inflight--;
    if (error != GR_KERR_NONE)
        gr_warn(LOGGER, "Failed to write the metadata of group %s generation %d to %s: %s", c->group_id,
                c->generation, GR_OFFSETS_TOPIC, gr_kerr_name(error));
    if (c->sync && g && g->state == ST_COMPLETING && g->generation == c->generation) {
        int16_t e = gc_map_store_error(error, false);
        if (e != GR_KERR_NONE) {
            reset_assignment_error_locked(g, e, &q);
            maybe_prepare_rebalance_locked(gc, g, "error when storing group assignment during SyncGroup", &q, &w);
        } else {
            propagate_assignment_locked(gc, g, &q);
            gc_group_transition(gc, g, ST_STABLE);
            gr_info(LOGGER, "Group %s is Stable at generation %d with %d members", g->id, g->generation,
                    g->n_members);
        }
    }
    pthread_mutex_unlock(&gc->mu);
    gc_wq_flush(gc, &w);
    gc_dq_flush(&q);
    free(c->batch);
    free(c->group_id);
    free(c);
}

/* Queues the write of g's metadata (Kafka's storeGroup). */
static void store_group_locked(struct gr_group_coordinator *gc, struct group *g, bool sync, struct wq *w) {
    struct store_ctx *c = gr_calloc(1, sizeof *c);
    c->gc = gc;
    c->group_id = gr_strdup(g->id);
    c->generation = g->generation;
    c->sync = sync;
    size_t len;
    c->batch = gc_build_group_batch(gc, g, false, false, &len);
    g->inflight++;
    gc_wq_add(w, g->partition, c->batch, len, -1, store_done, c);
}

/* ---- rebalance ---- */

static void complete_join_locked(struct gr_group_coordinator *gc, struct group *g, struct dq *q, struct wq *w);

static void arm_join(struct gr_group_coordinator *gc, struct group *g, bool initial, int32_t delay, int32_t remaining) {
    g->join_armed = true;
    g->join_initial = initial;
    g->join_delay = delay;
    g->join_remaining = remaining;
    g->join_deadline = now_ms(gc) + delay;
}

/* Kafka's DelayedJoin.tryComplete (the initial delayed join only completes on expiry). */
static void try_complete_join_locked(struct gr_group_coordinator *gc, struct group *g, struct dq *q, struct wq *w) {
    if (g->state != ST_PREPARING || !g->join_armed || g->join_initial) return;
    if (g->n_members == g->n_awaiting_join && !g->pending) complete_join_locked(gc, g, q, w);
}

static void prepare_rebalance_locked(struct gr_group_coordinator *gc, struct group *g, const char *reason,
                                     struct dq *q, struct wq *w) {
    if (g->state == ST_COMPLETING) reset_assignment_error_locked(g, GR_KERR_REBALANCE_IN_PROGRESS, q);
    int32_t rt = gc_group_rebalance_timeout(g);
    if (g->state == ST_EMPTY) {
        int32_t d = gc->cfg.initial_rebalance_delay_ms;
        arm_join(gc, g, true, d, GR_MAX(rt - d, 0));
    } else {
        arm_join(gc, g, false, rt, 0);
    }
    gr_info(LOGGER, "Preparing to rebalance group %s in state %s with old generation %d (%s-%d) (reason: %s)", g->id,
            state_names[g->state], g->generation, GR_OFFSETS_TOPIC, g->partition, reason);
    g->state = ST_PREPARING;
    g->state_ts = wall_ms(gc);
    try_complete_join_locked(gc, g, q, w); /* Kafka's tryCompleteElseWatch */
}

static void maybe_prepare_rebalance_locked(struct gr_group_coordinator *gc, struct group *g, const char *reason,
                                           struct dq *q, struct wq *w) {
    if (g->state == ST_STABLE || g->state == ST_COMPLETING || g->state == ST_EMPTY)
        prepare_rebalance_locked(gc, g, reason, q, w);
}

/* Kafka's onCompleteJoin. */
static void complete_join_locked(struct gr_group_coordinator *gc, struct group *g, struct dq *q, struct wq *w) {
    g->join_armed = false;
    /* dynamic members that did not rejoin are dropped; a static member (KIP-345) keeps its
     * member id and its place in the assignment until it leaves or its session times out, so a
     * restarting instance finds it and rejoins without another rebalance */
    for (struct member *m = g->members, *next; m; m = next) {
        next = m->next;
        if (m->join_cb || m->instance_id) continue;
        gr_info(LOGGER, "Dynamic member %s in group %s has failed to rejoin before the rebalance timeout, removing it",
                m->id, g->id);
        gc_group_remove_member(g, m);
    }
    if (g->state == ST_DEAD) return;
    /* maybeElectNewJoinedLeader */
    struct member *leader = gc_group_member(g, g->leader_id);
    if (g->members && (!leader || !leader->join_cb)) {
        struct member *j = NULL;
        for (struct member *m = g->members; m && !j; m = m->next)
            if (m->join_cb) j = m;
        if (j) {
            gc_set_leader(g, j->id);
        } else {
            gr_error(LOGGER, "Group %s could not complete rebalance because no members rejoined", g->id);
            arm_join(gc, g, false, gc_group_rebalance_timeout(g), 0);
            return;
        }
    }
    g->generation++;
    free(g->protocol_name);
    g->protocol_name = NULL;
    if (g->members) {
        g->protocol_name = dupz(gc_select_protocol(g));
        gc_group_transition(gc, g, ST_COMPLETING);
        gr_info(LOGGER, "Stabilized group %s generation %d (%s-%d) with %d members", g->id, g->generation,
                GR_OFFSETS_TOPIC, g->partition, g->n_members);
        for (struct member *m = g->members; m; m = m->next) {
            if (m->join_cb) { /* Kafka's maybeInvokeJoinCallback: a static member away has none */
                bool is_leader = streq(m->id, g->leader_id);
                gc_push_join_ok(q, m->join_cb, m->join_ctx, g, m, is_leader);
                m->join_cb = NULL;
                m->join_ctx = NULL;
                g->n_awaiting_join--;
            }
            gc_schedule_hb(gc, m, m->session_timeout);
            m->is_new = false;
        }
    } else {
        gc_group_transition(gc, g, ST_EMPTY);
        gr_info(LOGGER, "Group %s with generation %d is now empty (%s-%d)", g->id, g->generation, GR_OFFSETS_TOPIC,
                g->partition);
        store_group_locked(gc, g, false, w);
    }
}

/* Kafka's removeMemberAndUpdateGroup. */
static void remove_member_and_update_locked(struct gr_group_coordinator *gc, struct group *g, struct member *m,
                                            const char *reason, struct dq *q, struct wq *w) {
    gc_invoke_join_error(q, g, m, "", GR_KERR_UNKNOWN_MEMBER_ID);
    if (m->sync_cb) { /* not in Kafka (its callback would be dropped); answer rather than leak */
        gc_push_sync(q, m->sync_cb, m->sync_ctx, NULL, NULL, GR_KERR_REBALANCE_IN_PROGRESS);
        m->sync_cb = NULL;
    }
    gc_group_remove_member(g, m);
    switch (g->state) {
    case ST_STABLE:
    case ST_COMPLETING: maybe_prepare_rebalance_locked(gc, g, reason, q, w); break;
    case ST_PREPARING: try_complete_join_locked(gc, g, q, w); break;
    default: break;
    }
}

/* ---- validation ---- */

struct probe {
    int32_t partition;
    bool leader;
    int32_t epoch;
    int32_t term;
};

/* Outside the lock (rule 2): where the group lives and whether we lead it. */
static void probe_group(struct gr_group_coordinator *gc, const char *group_id, struct probe *pr) {
    pr->partition = gr_gc_partition_for(gc, group_id);
    pr->epoch = -1;
    pr->term = -1;
    pr->leader = gc->cfg.storage.leader_info(gc->cfg.storage.ctx, pr->partition, &pr->epoch, &pr->term, NULL, NULL);
}

/* Kafka's validateGroupStatus minus the group id check. */
static int16_t check_locked(struct gr_group_coordinator *gc, const struct probe *pr) {
    if (!gc->active) return GR_KERR_COORDINATOR_NOT_AVAILABLE;
    gc_ensure_parts_locked(gc, pr->partition + 1);
    struct part *pt = &gc->parts[pr->partition];
    if (!pr->leader) return GR_KERR_NOT_COORDINATOR;
    /* the leader term, not the epoch: a new epoch of the same leadership keeps the groups */
    if (pt->state == PART_OWNED && pt->term == pr->term) return GR_KERR_NONE;
    /* led here but not (yet) loaded in this leader term: wake the loader */
    gc->kick = true;
    pthread_cond_signal(&gc->cond);
    return GR_KERR_COORDINATOR_LOAD_IN_PROGRESS;
}

int16_t gr_gc_coordinator_status(struct gr_group_coordinator *gc, const char *group_id) {
    struct probe pr;
    probe_group(gc, group_id ? group_id : "", &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    pthread_mutex_unlock(&gc->mu);
    return e;
}

int16_t gr_gc_validate_txn_commit(struct gr_group_coordinator *gc, const char *group_id, const char *member_id,
                                  const char *group_instance_id, int32_t generation_id) {
    struct probe pr;
    probe_group(gc, group_id ? group_id : "", &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    struct group *g = e == GR_KERR_NONE ? gc_find_group_locked(gc, group_id) : NULL;
    bool validate = generation_id >= 0 || (member_id && member_id[0]) || group_instance_id;
    if (g && g->state == ST_DEAD) {
        e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    } else if (g && validate) { /* Kafka 2.7 doTxnCommitOffsets */
        struct member *m = member_id && member_id[0] ? gc_group_member(g, member_id) : NULL;
        if (member_id && member_id[0] && !m)
            e = GR_KERR_UNKNOWN_MEMBER_ID;
        else if (group_instance_id && m && !streq(m->instance_id, group_instance_id))
            e = GR_KERR_FENCED_INSTANCE_ID;
        else if (generation_id >= 0 && generation_id != g->generation)
            e = GR_KERR_ILLEGAL_GENERATION;
    } else if (!g && e == GR_KERR_NONE && generation_id >= 0) {
        e = GR_KERR_ILLEGAL_GENERATION;
    }
    pthread_mutex_unlock(&gc->mu);
    return e;
}

/* ---- JoinGroup ---- */

static struct member *new_member(const struct gr_gc_join_req *rq, const char *id) {
    struct member *m = gr_calloc(1, sizeof *m);
    m->id = gr_strdup(id);
    m->instance_id = dupz(rq->group_instance_id);
    m->client_id = gr_strdup(rq->client_id ? rq->client_id : "");
    m->client_host = gr_strdup(rq->client_host ? rq->client_host : "");
    m->protocol_type = gr_strdup(rq->protocol_type ? rq->protocol_type : "");
    m->session_timeout = rq->session_timeout_ms;
    m->rebalance_timeout = rq->rebalance_timeout_ms;
    gc_member_set_protocols(m, rq->protocols, rq->n_protocols);
    return m;
}

/* Kafka's addMemberAndRebalance. */
static void add_member_and_rebalance_locked(struct gr_group_coordinator *gc, struct group *g,
                                            const struct gr_gc_join_req *rq, const char *id, gr_gc_join_cb cb,
                                            void *ctx, struct dq *q, struct wq *w) {
    struct member *m = new_member(rq, id);
    m->is_new = true;
    if (g->state == ST_PREPARING && g->generation == 0) g->new_member_added = true;
    m->join_cb = cb;
    m->join_ctx = ctx;
    gc_group_add_member(g, m);
    gc_schedule_hb(gc, m, NEW_MEMBER_JOIN_TIMEOUT_MS);
    gc_group_remove_pending(g, id);
    char reason[256];
    snprintf(reason, sizeof reason, "Adding new member %s", id);
    maybe_prepare_rebalance_locked(gc, g, reason, q, w);
}

/* Kafka's updateMemberAndRebalance. */
static void update_member_and_rebalance_locked(struct gr_group_coordinator *gc, struct group *g, struct member *m,
                                               const struct gr_gc_join_req *rq, gr_gc_join_cb cb, void *ctx,
                                               const char *reason, struct dq *q, struct wq *w) {
    gc_member_set_protocols(m, rq->protocols, rq->n_protocols);
    m->session_timeout = rq->session_timeout_ms;
    m->rebalance_timeout = rq->rebalance_timeout_ms;
    if (m->join_cb) /* a superseded JoinGroup of the same member: answer it instead of leaking it */
        gc_push_join_error(q, m->join_cb, m->join_ctx, m->id, GR_KERR_REBALANCE_IN_PROGRESS);
    else
        g->n_awaiting_join++;
    m->join_cb = cb;
    m->join_ctx = ctx;
    maybe_prepare_rebalance_locked(gc, g, reason, q, w);
}

/* Kafka's updateStaticMemberAndRebalance: a known group.instance.id rejoins with an unknown
 * member id and takes over its member under new_id. In a Stable group whose protocol choice
 * does not change, the group is only re-persisted and the member is answered without a
 * rebalance (with the old leader id, so it does not compute an assignment). */
struct static_join_ctx {
    struct gr_group_coordinator *gc;
    char *group_id, *old_id, *new_id, *old_leader;
    bool skip; /* the joiner supports KIP-814's SkipAssignment */
    gr_gc_join_cb cb;
    void *ctx;
    uint8_t *batch;
};

static void static_join_stored(void *arg, int16_t error, int64_t base_offset) {
    (void)base_offset;
    struct static_join_ctx *c = arg;
    struct gr_group_coordinator *gc = c->gc;
    struct dq q;
    gc_dq_init(&q);
    pthread_mutex_lock(&gc->mu);
    struct group *g = gc_find_group_locked(gc, c->group_id);
    if (g && g->inflight > 0) g->inflight--;
    struct member *m = g ? gc_group_member(g, c->new_id) : NULL;
    if (m && m->join_cb == c->cb && m->join_ctx == c->ctx) {
        m->join_cb = NULL;
        m->join_ctx = NULL;
        g->n_awaiting_join--;
        if (error != GR_KERR_NONE) {
            gr_warn(LOGGER, "Failed to persist metadata for group %s: %s", g->id, gr_kerr_name(error));
            gc_static_replace(g, m, c->old_id, &q); /* revert */
            gc_schedule_hb(gc, m, m->session_timeout);
            gc_push_join_error(&q, c->cb, c->ctx, "", gc_map_store_error(error, false));
        } else if (c->skip) {
            /* KIP-814 (JoinGroup v9+): the leader learns it leads, with the members, and is
             * told to skip the assignor; a follower gets the current leader */
            bool is_leader = streq(c->new_id, g->leader_id);
            gc_push_join_ok(&q, c->cb, c->ctx, g, m, is_leader)->skip_assignment = is_leader;
        } else {
            char *leader = g->leader_id;
            g->leader_id = c->old_leader;
            gc_push_join_ok(&q, c->cb, c->ctx, g, m, false);
            g->leader_id = leader;
        }
    }
    pthread_mutex_unlock(&gc->mu);
    gc_dq_flush(&q);
    free(c->batch);
    free(c->group_id);
    free(c->old_id);
    free(c->new_id);
    free(c->old_leader);
    free(c);
}

static void update_static_member_and_rebalance_locked(struct gr_group_coordinator *gc, struct group *g,
                                                      struct member *m, const struct gr_gc_join_req *rq,
                                                      const char *new_id, gr_gc_join_cb cb, void *ctx,
                                                      struct dq *q, struct wq *w) {
    gr_info(LOGGER, "Static member %s of group %s with unknown member id rejoins, assigning new member id %s, while "
                    "old member id %s will be removed.",
            rq->group_instance_id, g->id, new_id, m->id);
    char *old_id = gr_strdup(m->id), *old_leader = dupz(g->leader_id);
    gc_static_replace(g, m, new_id, q);
    gc_schedule_hb(gc, m, m->session_timeout);
    gc_member_set_protocols(m, rq->protocols, rq->n_protocols); /* Kafka's updateMember */
    if (!m->join_cb) g->n_awaiting_join++;
    m->join_cb = cb;
    m->join_ctx = ctx;
    char reason[256];
    if (g->state == ST_STABLE && streq(gc_select_protocol(g), g->protocol_name)) {
        gr_info(LOGGER, "Static member which joins during Stable stage and doesn't affect selectProtocol will not "
                        "trigger rebalance.");
        struct static_join_ctx *c = gr_calloc(1, sizeof *c);
        *c = (struct static_join_ctx){.gc = gc, .group_id = gr_strdup(g->id), .old_id = old_id,
                                      .new_id = gr_strdup(new_id), .old_leader = old_leader,
                                      .skip = rq->support_skip_assignment, .cb = cb, .ctx = ctx};
        size_t len;
        c->batch = gc_build_group_batch(gc, g, false, false, &len);
        g->inflight++;
        gc_wq_add(w, g->partition, c->batch, len, -1, static_join_stored, c);
        return;
    }
    if (g->state == ST_STABLE) {
        snprintf(reason, sizeof reason, "Group's selectedProtocol will change because static member %s with instance "
                 "id %s joined with change of protocol", m->id, rq->group_instance_id);
        maybe_prepare_rebalance_locked(gc, g, reason, q, w);
    } else if (g->state == ST_COMPLETING) {
        snprintf(reason, sizeof reason, "Updating metadata for static member %s with instance id %s", m->id,
                 rq->group_instance_id);
        prepare_rebalance_locked(gc, g, reason, q, w);
    }
    free(old_id);
    free(old_leader);
}

static bool accept_joining_member(struct gr_group_coordinator *gc, struct group *g, const char *member_id) {
    struct member *m = gc_group_member(g, member_id);
    switch (g->state) {
    case ST_EMPTY:
    case ST_DEAD: return true;
    case ST_PREPARING: return (m && m->join_cb) || g->n_awaiting_join < gc->cfg.group_max_size;
    default: return m || g->n_members < gc->cfg.group_max_size;
    }
}

void gr_gc_join_group(struct gr_group_coordinator *gc, const struct gr_gc_join_req *rq, gr_gc_join_cb cb, void *ctx) {
    struct dq q;
    struct wq w = {0};
    gc_dq_init(&q);
    const char *mid = rq->member_id ? rq->member_id : "";
    if (!rq->group_id || !rq->group_id[0]) {
        gc_push_join_error(&q, cb, ctx, mid, GR_KERR_INVALID_GROUP_ID);
        gc_dq_flush(&q);
        return;
    }
    struct probe pr;
    probe_group(gc, rq->group_id, &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    if (e != GR_KERR_NONE) {
        gc_push_join_error(&q, cb, ctx, mid, e);
        goto out;
    }
    if (rq->session_timeout_ms < gc->cfg.min_session_timeout_ms ||
        rq->session_timeout_ms > gc->cfg.max_session_timeout_ms) {
        gc_push_join_error(&q, cb, ctx, mid, GR_KERR_INVALID_SESSION_TIMEOUT);
        goto out;
    }
    bool unknown = mid[0] == 0;
    struct group *g = gc_find_group_locked(gc, rq->group_id);
    if (!g) {
        if (!unknown) {
            gc_push_join_error(&q, cb, ctx, mid, GR_KERR_UNKNOWN_MEMBER_ID);
            goto out;
        }
        g = gc_create_group_locked(gc, rq->group_id, pr.partition);
    }
    if (!accept_joining_member(gc, g, mid)) {
        struct member *m = gc_group_member(g, mid);
        if (m) remove_member_and_update_locked(gc, g, m, "group is over capacity", &q, &w);
        gc_push_join_error(&q, cb, ctx, "", GR_KERR_GROUP_MAX_SIZE_REACHED);
    } else if (g->state == ST_DEAD) {
        gc_push_join_error(&q, cb, ctx, mid, GR_KERR_COORDINATOR_NOT_AVAILABLE);
    } else if (!gc_group_supports(g, rq->protocol_type, rq->protocols, rq->n_protocols)) {
        gc_push_join_error(&q, cb, ctx, mid, GR_KERR_INCONSISTENT_GROUP_PROTOCOL);
    } else if (unknown) {
        char uuid[37];
        random_uuid(uuid);
        const char *prefix = rq->group_instance_id ? rq->group_instance_id : (rq->client_id ? rq->client_id : "");
        char *id = gr_asprintf("%s-%s", prefix, uuid);
        struct member *sm = gc_static_member(g, rq->group_instance_id);
        if (sm) {
            update_static_member_and_rebalance_locked(gc, g, sm, rq, id, cb, ctx, &q, &w);
        } else if (rq->require_known_member_id) {
            struct pending *p = gr_calloc(1, sizeof *p);
            p->id = gr_strdup(id);
            p->deadline = now_ms(gc) + rq->session_timeout_ms;
            p->next = g->pending;
            g->pending = p;
            gc_push_join_error(&q, cb, ctx, id, GR_KERR_MEMBER_ID_REQUIRED);
        } else {
            gr_info(LOGGER, "%s member with unknown member id joins group %s in %s state. Created a new member "
                            "id %s for this member and add to the group.",
                    rq->group_instance_id ? "Static" : "Dynamic", g->id, state_names[g->state], id);
            add_member_and_rebalance_locked(gc, g, rq, id, cb, ctx, &q, &w);
        }
        free(id);
    } else if (gc_group_is_pending(g, mid)) {
        add_member_and_rebalance_locked(gc, g, rq, mid, cb, ctx, &q, &w);
    } else {
        struct member *m = gc_group_member(g, mid);
        if (gc_static_fenced(g, mid, rq->group_instance_id, "join-group")) {
            gc_push_join_error(&q, cb, ctx, mid, GR_KERR_FENCED_INSTANCE_ID);
        } else if (!m || (rq->group_instance_id && !gc_static_member(g, rq->group_instance_id))) {
            gc_push_join_error(&q, cb, ctx, mid, GR_KERR_UNKNOWN_MEMBER_ID);
        } else {
            char reason[256];
            switch (g->state) {
            case ST_PREPARING:
                snprintf(reason, sizeof reason, "Member %s joining group during PreparingRebalance", mid);
                update_member_and_rebalance_locked(gc, g, m, rq, cb, ctx, reason, &q, &w);
                break;
            case ST_COMPLETING:
                if (gc_member_matches(m, rq->protocols, rq->n_protocols)) {
                    gc_push_join_ok(&q, cb, ctx, g, m, streq(mid, g->leader_id));
                } else {
                    snprintf(reason, sizeof reason, "Updating metadata for member %s during CompletingRebalance", mid);
                    update_member_and_rebalance_locked(gc, g, m, rq, cb, ctx, reason, &q, &w);
                }
                break;
            case ST_STABLE:
                if (streq(mid, g->leader_id)) {
                    snprintf(reason, sizeof reason, "leader %s re-joining group during Stable", mid);
                    update_member_and_rebalance_locked(gc, g, m, rq, cb, ctx, reason, &q, &w);
                } else if (!gc_member_matches(m, rq->protocols, rq->n_protocols)) {
                    snprintf(reason, sizeof reason, "Updating metadata for member %s during Stable", mid);
                    update_member_and_rebalance_locked(gc, g, m, rq, cb, ctx, reason, &q, &w);
                } else {
                    gc_push_join_ok(&q, cb, ctx, g, m, false);
                }
                break;
            default:
                gr_warn(LOGGER, "Attempt to add rejoining member %s of group %s in unexpected group state %s", mid,
                        g->id, state_names[g->state]);
                gc_push_join_error(&q, cb, ctx, mid, GR_KERR_UNKNOWN_MEMBER_ID);
                break;
            }
        }
    }
    if (g->state == ST_PREPARING) try_complete_join_locked(gc, g, &q, &w);
out:
    pthread_mutex_unlock(&gc->mu);
    gc_wq_flush(gc, &w);
    gc_dq_flush(&q);
}

/* ---- SyncGroup ---- */

void gr_gc_sync_group(struct gr_group_coordinator *gc, const struct gr_gc_sync_req *rq, gr_gc_sync_cb cb, void *ctx) {
    struct dq q;
    struct wq w = {0};
    gc_dq_init(&q);
    if (!rq->group_id || !rq->group_id[0]) {
        gc_push_sync(&q, cb, ctx, NULL, NULL, GR_KERR_INVALID_GROUP_ID);
        gc_dq_flush(&q);
        return;
    }
    const char *mid = rq->member_id ? rq->member_id : "";
    struct probe pr;
    probe_group(gc, rq->group_id, &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    struct group *g = e == GR_KERR_NONE ? gc_find_group_locked(gc, rq->group_id) : NULL;
    struct member *m = g ? gc_group_member(g, mid) : NULL;
    if (e == GR_KERR_COORDINATOR_LOAD_IN_PROGRESS) {
        e = GR_KERR_REBALANCE_IN_PROGRESS; /* Kafka: let the member rejoin */
    } else if (e != GR_KERR_NONE) {
        /* as is */
    } else if (!g) {
        e = GR_KERR_UNKNOWN_MEMBER_ID;
    } else if (g->state == ST_DEAD) {
        e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    } else if (gc_static_fenced(g, mid, rq->group_instance_id, "sync-group")) {
        e = GR_KERR_FENCED_INSTANCE_ID;
    } else if (!m) {
        e = GR_KERR_UNKNOWN_MEMBER_ID;
    } else if (rq->generation_id != g->generation) {
        e = GR_KERR_ILLEGAL_GENERATION;
    } else if ((rq->protocol_type && !streq(rq->protocol_type, g->protocol_type)) ||
               (rq->protocol_name && !streq(rq->protocol_name, g->protocol_name))) {
        e = GR_KERR_INCONSISTENT_GROUP_PROTOCOL;
    } else if (g->state == ST_EMPTY) {
        e = GR_KERR_UNKNOWN_MEMBER_ID;
    } else if (g->state == ST_PREPARING) {
        e = GR_KERR_REBALANCE_IN_PROGRESS;
    } else if (g->state == ST_STABLE) {
        gc_push_sync(&q, cb, ctx, g, m, GR_KERR_NONE);
        gc_schedule_hb(gc, m, m->session_timeout);
        goto out;
    } else { /* CompletingRebalance */
        if (m->sync_cb) gc_push_sync(&q, m->sync_cb, m->sync_ctx, NULL, NULL, GR_KERR_REBALANCE_IN_PROGRESS);
        m->sync_cb = cb;
        m->sync_ctx = ctx;
        if (streq(mid, g->leader_id)) {
            gr_info(LOGGER, "Assignment received from leader for group %s for generation %d", g->id, g->generation);
            for (struct member *x = g->members; x; x = x->next) {
                const struct gr_gc_assignment *a = NULL;
                for (int i = 0; i < rq->n_assignments && !a; i++)
                    if (streq(rq->assignments[i].member_id, x->id)) a = &rq->assignments[i];
                if (!a) gr_warn(LOGGER, "Setting empty assignment for member %s of %s for generation %d", x->id,
                                g->id, g->generation);
                gc_member_set_assignment(x, a ? a->data : NULL, a ? a->len : 0);
            }
            store_group_locked(gc, g, true, &w);
        }
        goto out;
    }
    gc_push_sync(&q, cb, ctx, NULL, NULL, e);
out:
    pthread_mutex_unlock(&gc->mu);
    gc_wq_flush(gc, &w);
    gc_dq_flush(&q);
}

/* ---- Heartbeat ---- */

int16_t gr_gc_heartbeat(struct gr_group_coordinator *gc, const char *group_id, const char *member_id,
                        const char *group_instance_id, int32_t generation_id) {
    if (!group_id || !group_id[0]) return GR_KERR_INVALID_GROUP_ID;
    struct probe pr;
    probe_group(gc, group_id, &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    struct group *g = e == GR_KERR_NONE ? gc_find_group_locked(gc, group_id) : NULL;
    struct member *m = g ? gc_group_member(g, member_id) : NULL;
    if (e == GR_KERR_COORDINATOR_LOAD_IN_PROGRESS)
        e = GR_KERR_NONE; /* Kafka: the group is still loading, so respond just blindly */
    else if (e != GR_KERR_NONE)
        ;
    else if (!g)
        e = GR_KERR_UNKNOWN_MEMBER_ID;
    else if (g->state == ST_DEAD)
        e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    else if (gc_static_fenced(g, member_id, group_instance_id, "heartbeat"))
        e = GR_KERR_FENCED_INSTANCE_ID;
    else if (!m)
        e = GR_KERR_UNKNOWN_MEMBER_ID;
    else if (generation_id != g->generation)
        e = GR_KERR_ILLEGAL_GENERATION;
    else if (g->state == ST_EMPTY)
        e = GR_KERR_UNKNOWN_MEMBER_ID;
    else {
        gc_schedule_hb(gc, m, m->session_timeout);
        e = g->state == ST_PREPARING ? GR_KERR_REBALANCE_IN_PROGRESS : GR_KERR_NONE;
    }
    pthread_mutex_unlock(&gc->mu);
    return e;
}

/* ---- LeaveGroup ---- */

int16_t gr_gc_leave_group(struct gr_group_coordinator *gc, const char *group_id, struct gr_gc_leave_member *members,
                          int n) {
    for (int i = 0; i < n; i++) members[i].error = GR_KERR_NONE;
    if (!group_id || !group_id[0]) return GR_KERR_INVALID_GROUP_ID;
    struct dq q;
    struct wq w = {0};
    gc_dq_init(&q);
    struct probe pr;
    probe_group(gc, group_id, &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    struct group *g = e == GR_KERR_NONE ? gc_find_group_locked(gc, group_id) : NULL;
    if (e != GR_KERR_NONE) {
        /* top-level error only */
    } else if (!g) {
        for (int i = 0; i < n; i++) members[i].error = GR_KERR_UNKNOWN_MEMBER_ID;
    } else if (g->state == ST_DEAD) {
        e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    } else {
        for (int i = 0; i < n; i++) {
            const char *mid = members[i].member_id ? members[i].member_id : "";
            const char *iid = members[i].group_instance_id;
            if (mid[0] && gc_static_fenced(g, mid, iid, "leave-group")) {
                members[i].error = GR_KERR_FENCED_INSTANCE_ID;
                continue;
            }
            if (mid[0] && gc_group_is_pending(g, mid)) {
                gr_info(LOGGER, "Pending member %s is leaving group %s.", mid, g->id);
                gc_group_remove_pending(g, mid);
                if (g->state == ST_PREPARING) try_complete_join_locked(gc, g, &q, &w);
                continue;
            }
            struct member *m = gc_static_member(g, iid); /* the instance is looked up first */
            if (!m) m = gc_group_member(g, mid);
            if (!m) {
                members[i].error = GR_KERR_UNKNOWN_MEMBER_ID;
                continue;
            }
            gr_info(LOGGER, "Member %s has left group %s through explicit LeaveGroup request", m->id, g->id);
            m->is_leaving = true;
            m->hb_deadline = 0;
            char reason[256];
            snprintf(reason, sizeof reason, "removing member %s on LeaveGroup", m->id);
            remove_member_and_update_locked(gc, g, m, reason, &q, &w);
        }
    }
    pthread_mutex_unlock(&gc->mu);
    gc_wq_flush(gc, &w);
    gc_dq_flush(&q);
    return e;
}

/* ---- OffsetCommit ---- */

struct commit_ctx {
    struct gr_group_coordinator *gc;
    char *group_id;
    struct gr_gc_commit_part *parts;
    int n;
    bool *in_batch;
    gr_gc_commit_cb cb;
    void *ctx;
    uint8_t *batch;
    bool txn; /* GR_GC_GENERATION_TXN: already in the cache since the marker (gr_gc_complete_txn_offsets) */
};

static void commit_done(void *arg, int16_t error, int64_t base_offset) {
    struct commit_ctx *c = arg;
    struct gr_group_coordinator *gc = c->gc;
    int16_t e = gc_map_store_error(error, true);
    pthread_mutex_lock(&gc->mu);
    struct group *g = gc_find_group_locked(gc, c->group_id);
    if (g && g->inflight > 0) g->inflight--;
    for (int i = 0; i < c->n; i++) {
        if (!c->in_batch[i]) continue;
        struct gr_gc_commit_part *p = &c->parts[i];
        p->error = e;
        /* Kafka's onOffsetCommitAppend: not over an offset a later record set meanwhile (another
         * commit or a committed transactional offset whose completion came first), as a reload
         * of the log would not */
        const struct offset_entry *cur = g && !c->txn ? gc_find_offset(g, p->topic, p->partition) : NULL;
        bool older = cur && base_offset >= 0 && cur->append_offset > base_offset;
        if (e == GR_KERR_NONE && g && g->state != ST_DEAD && !c->txn && !older)
            gc_put_offset(g, p->topic, p->partition, p->offset, p->leader_epoch, p->metadata, p->commit_timestamp,
                          p->expire_timestamp, base_offset);
    }
    pthread_mutex_unlock(&gc->mu);
    if (error != GR_KERR_NONE)
        gr_warn(LOGGER, "Offset commit of group %s failed: %s (answered %s)", c->group_id, gr_kerr_name(error),
                gr_kerr_name(e));
    c->cb(c->ctx, c->parts, c->n);
    free(c->batch);
    free(c->in_batch);
    free(c->group_id);
    free(c);
}

static void commit_fail_all(struct gr_gc_commit_part *parts, int n, int16_t e) {
    for (int i = 0; i < n; i++)
        if (parts[i].error == GR_KERR_NONE) parts[i].error = e;
}

void gr_gc_commit_offsets(struct gr_group_coordinator *gc, const char *group_id, const char *member_id,
                          const char *group_instance_id, int32_t generation_id, struct gr_gc_commit_part *parts,
                          int n, gr_gc_commit_cb cb, void *ctx) {
    if (!group_id) {
        commit_fail_all(parts, n, GR_KERR_INVALID_GROUP_ID);
        cb(ctx, parts, n);
        return;
    }
    const char *mid = member_id ? member_id : "";
    struct probe pr;
    probe_group(gc, group_id, &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    struct group *g = NULL;
    if (e == GR_KERR_NONE) {
        g = gc_find_group_locked(gc, group_id);
        if (!g) {
            if (generation_id < 0 || generation_id == GR_GC_GENERATION_TXN)
                g = gc_create_group_locked(gc, group_id, pr.partition); /* offsets-only group */
            else
                e = GR_KERR_ILLEGAL_GENERATION;
        }
    }
    if (e == GR_KERR_NONE) {
        struct member *m = gc_group_member(g, mid);
        if (g->state == ST_DEAD)
            e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
        else if (generation_id == GR_GC_GENERATION_TXN)
            ; /* transactional offsets at their COMMIT marker (checked at TxnOffsetCommit) */
        else if (gc_static_fenced(g, mid, group_instance_id, "commit-offsets"))
            e = GR_KERR_FENCED_INSTANCE_ID;
        else if (generation_id < 0 && g->state == ST_EMPTY)
            ; /* the group only stores offsets */
        else if (!m)
            e = GR_KERR_UNKNOWN_MEMBER_ID;
        else if (generation_id != g->generation)
            e = GR_KERR_ILLEGAL_GENERATION;
        else if (g->state == ST_COMPLETING) /* a current member that has not had its SyncGroup answer */
            e = GR_KERR_REBALANCE_IN_PROGRESS;
        else
            gc_schedule_hb(gc, m, m->session_timeout);
    }
    if (e != GR_KERR_NONE) {
        pthread_mutex_unlock(&gc->mu);
        commit_fail_all(parts, n, e);
        cb(ctx, parts, n);
        return;
    }
    /* build the batch of the valid parts */
    struct commit_ctx *c = gr_calloc(1, sizeof *c);
    c->gc = gc;
    c->group_id = gr_strdup(group_id);
    c->parts = parts;
    c->n = n;
    c->in_batch = gr_calloc((size_t)(n + 1), sizeof *c->in_batch);
    c->cb = cb;
    c->ctx = ctx;
    c->txn = generation_id == GR_GC_GENERATION_TXN;
    struct gr_batch_rec *recs = gr_calloc((size_t)(n + 1), sizeof *recs);
    struct gr_wbuf *bufs = gr_calloc((size_t)(2 * n + 1), sizeof *bufs);
    int k = 0;
    for (int i = 0; i < n; i++) {
        struct gr_gc_commit_part *p = &parts[i];
        if (p->error != GR_KERR_NONE) continue;
        if (gr_gc_metadata_too_large(gc, p->metadata)) {
            p->error = GR_KERR_OFFSET_METADATA_TOO_LARGE;
            continue;
        }
        struct gr_wbuf *kb = &bufs[2 * k], *vb = &bufs[2 * k + 1];
        gr_wbuf_init(kb);
        gr_wbuf_init(vb);
        gr_go_encode_offset_key(kb, group_id, p->topic, p->partition);
        struct gr_go_offset_value v = {.offset = p->offset, .leader_epoch = p->leader_epoch,
                                       .metadata = (char *)(p->metadata ? p->metadata : ""),
                                       .commit_timestamp = p->commit_timestamp,
                                       .expire_timestamp = p->expire_timestamp};
        gr_go_encode_offset_value(vb, &v);
        recs[k] = (struct gr_batch_rec){.key = kb->p, .key_len = (int32_t)kb->len, .value = vb->p,
                                        .value_len = (int32_t)vb->len, .timestamp = p->commit_timestamp};
        c->in_batch[i] = true;
        k++;
    }
    size_t len = 0;
    if (k > 0) {
        c->batch = gr_batch_build(recs, k, NULL, &len);
        g->inflight++;
    }
    pthread_mutex_unlock(&gc->mu);
    for (int i = 0; i < 2 * k; i++) gr_wbuf_free(&bufs[i]);
    free(bufs);
    free(recs);
    if (k == 0) {
        free(c->in_batch);
        free(c->group_id);
        free(c);
        cb(ctx, parts, n);
        return;
    }
    gc->cfg.storage.append(gc->cfg.storage.ctx, pr.partition, c->batch, len, -1, gc->cfg.offset_commit_timeout_ms,
                           commit_done, c);
}

/* ---- transactional offsets at their marker ---- */

static void txn_rewrite_done(void *ctx, struct gr_gc_commit_part *parts, int n) {
    (void)ctx;
    for (int i = 0; i < n; i++) {
        if (parts[i].error != GR_KERR_NONE)
            gr_warn(LOGGER, "transactional offset of %s-%d not rewritten: %s (still committed by its marker)",
                    parts[i].topic, parts[i].partition, gr_kerr_name(parts[i].error));
        free((char *)parts[i].topic);
        free((char *)parts[i].metadata);
    }
    free(parts);
}

void gr_gc_complete_txn_offsets(struct gr_group_coordinator *gc, int64_t producer_id, int32_t offsets_partition,
                                bool commit) {
    struct probe pr = {.partition = offsets_partition, .epoch = -1};
    pr.leader = gc->cfg.storage.leader_info(gc->cfg.storage.ctx, offsets_partition, &pr.epoch, &pr.term, NULL, NULL);
    int64_t now = wall_ms(gc);
    pthread_mutex_lock(&gc->mu);
    if (offsets_partition >= 0 && offsets_partition < gc->n_parts_cap &&
        gc->parts[offsets_partition].state == PART_LOADING) {
        /* Kafka runs the completion after the load (one scheduler thread): the marker is already
         * in the log, and the loader reads to the log end as it moves, so it meets the marker and
         * applies it there; the pending offsets stay for it */
        gc->parts[offsets_partition].marker_during_load = true;
        pthread_mutex_unlock(&gc->mu);
        return;
    }
    /* taken and applied under gc->mu: an OffsetFetch with require_stable sees the offsets either
     * pending (UNSTABLE_OFFSET_COMMIT) or committed, never the previous ones (Kafka 2.7's
     * completePendingTxnOffsetCommit updates the cache at the marker) */
    struct gr_txn_offset *l = gr_txn_offsets_take(producer_id, offsets_partition);
    bool apply = commit && l && check_locked(gc, &pr) == GR_KERR_NONE;
    int n = 0;
    for (struct gr_txn_offset *o = l; apply && o; o = o->next) {
        struct group *g = gc_find_group_locked(gc, o->group);
        if (!g) g = gc_create_group_locked(gc, o->group, offsets_partition);
        /* an ordinary commit stored after the transactional one wins (Kafka's olderThan) */
        if (g->state == ST_DEAD || !gc_txn_offset_is_newer(g, o->topic, o->partition, o->append_offset)) {
            o->append_offset = -1; /* not applied: not rewritten below */
            continue;
        }
        gc_put_offset(g, o->topic, o->partition, o->offset, o->leader_epoch, o->metadata, now, -1, o->append_offset);
        n++;
    }
    pthread_mutex_unlock(&gc->mu);
    /* also as ordinary offset records, so a reload needs no transaction history; the cache does
     * not wait for them (the marker made the offsets durable) */
    for (struct gr_txn_offset *o = l; apply && n && o; o = o->next) {
        if (o->append_offset < 0) continue;
        struct gr_gc_commit_part *cp = gr_calloc(1, sizeof *cp);
        cp->topic = gr_strdup(o->topic);
        cp->partition = o->partition;
        cp->offset = o->offset;
        cp->leader_epoch = o->leader_epoch;
        cp->metadata = gr_strdup(o->metadata);
        cp->commit_timestamp = now;
        cp->expire_timestamp = -1;
        gr_gc_commit_offsets(gc, o->group, "", NULL, GR_GC_GENERATION_TXN, cp, 1, txn_rewrite_done, NULL);
    }
    gr_txn_offsets_free(l);
}

/* ---- OffsetFetch ---- */

int16_t gr_gc_fetch_offsets(struct gr_group_coordinator *gc, const char *group_id, bool all, bool require_stable,
                            struct gr_gc_fetch_part **parts, int *n, struct gr_arena *a) {
    if (!group_id) return GR_KERR_INVALID_GROUP_ID;
    struct probe pr;
    probe_group(gc, group_id, &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    if (e != GR_KERR_NONE) {
        pthread_mutex_unlock(&gc->mu);
        return e;
    }
    struct group *g = gc_find_group_locked(gc, group_id);
    if (g && g->state == ST_DEAD) g = NULL;
    if (all) {
        int cnt = g ? g->n_offsets : 0;
        struct gr_gc_fetch_part *out = gr_arena_alloc(a, (size_t)(cnt + 1) * sizeof *out);
        for (int i = 0; i < cnt; i++) {
            const struct offset_entry *o = &g->offsets[i];
            out[i] = (struct gr_gc_fetch_part){.topic = gr_arena_strdup(a, o->topic), .partition = o->partition,
                                               .offset = o->offset, .leader_epoch = o->leader_epoch,
                                               .metadata = gr_arena_strdup(a, o->metadata)};
        }
        *parts = out;
        *n = cnt;
    } else {
        for (int i = 0; i < *n; i++) {
            struct gr_gc_fetch_part *p = &(*parts)[i];
            const struct offset_entry *o = g ? gc_find_offset(g, p->topic, p->partition) : NULL;
            p->error = GR_KERR_NONE;
            p->offset = o ? o->offset : -1;
            p->leader_epoch = o ? o->leader_epoch : -1;
            p->metadata = gr_arena_strdup(a, o ? o->metadata : "");
        }
    }
    /* KIP-447 require_stable (Kafka 2.7 getOffsets): the leaf lock of txn_offsets under gc->mu */
    for (int i = 0; require_stable && i < *n; i++) {
        struct gr_gc_fetch_part *p = &(*parts)[i];
        if (!gr_txn_offsets_pending_for(group_id, p->topic, p->partition)) continue;
        p->error = GR_KERR_UNSTABLE_OFFSET_COMMIT;
        p->offset = -1;
        p->leader_epoch = -1;
        p->metadata = "";
    }
    pthread_mutex_unlock(&gc->mu);
    return GR_KERR_NONE;
}

/* ---- DescribeGroups, ListGroups, DeleteGroups ---- */

int16_t gr_gc_describe_group(struct gr_group_coordinator *gc, const char *group_id, struct gr_arena *a,
                             struct gr_gc_group_summary *out) {
    memset(out, 0, sizeof *out);
    out->state = "";
    out->protocol_type = "";
    out->protocol = "";
    if (!group_id) return GR_KERR_INVALID_GROUP_ID;
    struct probe pr;
    probe_group(gc, group_id, &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    if (e == GR_KERR_NONE) {
        struct group *g = gc_find_group_locked(gc, group_id);
        if (!g) {
            out->state = "Dead";
        } else {
            bool stable = g->state == ST_STABLE;
            out->state = state_names[g->state];
            out->protocol_type = gr_arena_strdup(a, g->protocol_type ? g->protocol_type : "");
            out->protocol = stable && g->protocol_name ? gr_arena_strdup(a, g->protocol_name) : "";
            out->n_members = g->n_members;
            out->members = gr_arena_alloc(a, (size_t)(g->n_members + 1) * sizeof *out->members);
            int i = 0;
            for (const struct member *m = g->members; m; m = m->next, i++) {
                struct gr_gc_member_summary *s = &out->members[i];
                s->member_id = gr_arena_strdup(a, m->id);
                s->group_instance_id = gr_arena_strdup(a, m->instance_id);
                s->client_id = gr_arena_strdup(a, m->client_id);
                s->client_host = gr_arena_strdup(a, m->client_host);
                if (stable) {
                    const uint8_t *meta = NULL;
                    int32_t len = 0;
                    if (g->protocol_name) gc_member_protocol(m, g->protocol_name, &meta, &len);
                    s->metadata = arena_bytes(a, meta, len);
                    s->metadata_len = s->metadata ? len : 0;
                    s->assignment = arena_bytes(a, m->assignment, m->assignment_len);
                    s->assignment_len = s->assignment ? m->assignment_len : 0;
                }
            }
        }
    }
    pthread_mutex_unlock(&gc->mu);
    return e;
}

int16_t gr_gc_list_groups(struct gr_group_coordinator *gc, const char *const *states, int n_states,
                          struct gr_arena *a, struct gr_gc_listed_group **out, int *n) {
    pthread_mutex_lock(&gc->mu);
    *n = 0;
    *out = gr_arena_alloc(a, (size_t)(gc->groups.n_groups + 1) * sizeof **out);
    if (!gc->active) {
        pthread_mutex_unlock(&gc->mu);
        return GR_KERR_COORDINATOR_NOT_AVAILABLE;
    }
    int16_t e = GR_KERR_NONE;
    for (int32_t p = 0; p < gc->n_parts_cap; p++)
        if (gc->parts[p].state == PART_LOADING) e = GR_KERR_COORDINATOR_LOAD_IN_PROGRESS;
    for (int b = 0; b < NBUCKETS; b++)
        for (struct group *g = gc->groups.buckets[b]; g; g = g->next) {
            if (g->partition >= gc->n_parts_cap || gc->parts[g->partition].state != PART_OWNED) continue;
            const char *st = state_names[g->state];
            bool keep = n_states <= 0;
            for (int i = 0; i < n_states && !keep; i++) keep = states[i] && strcasecmp(states[i], st) == 0; /* 3.9 */
            if (!keep) continue;
            struct gr_gc_listed_group *l = &(*out)[(*n)++];
            l->group_id = gr_arena_strdup(a, g->id);
            l->protocol_type = gr_arena_strdup(a, g->protocol_type ? g->protocol_type : "");
            l->state = st;
        }
    pthread_mutex_unlock(&gc->mu);
    return e;
}

static void tombstone_done(void *arg, int16_t error) {
    char *id = arg;
    if (error != GR_KERR_NONE)
        gr_warn(LOGGER, "Failed to write the tombstones of deleted group %s: %s", id, gr_kerr_name(error));
    free(id);
}

struct tomb {
    char *id;
    uint8_t *batch;
};

static void tomb_done(void *arg, int16_t error, int64_t base_offset) {
    (void)base_offset;
    struct tomb *t = arg;
    tombstone_done(t->id, error);
    free(t->batch);
    free(t);
}

void gr_gc_delete_groups(struct gr_group_coordinator *gc, const char *const *ids, int n, int16_t *errors) {
    struct wq w = {0};
    for (int i = 0; i < n; i++) {
        const char *id = ids[i];
        if (!id) {
            errors[i] = GR_KERR_INVALID_GROUP_ID;
            continue;
        }
        struct probe pr;
        probe_group(gc, id, &pr);
        pthread_mutex_lock(&gc->mu);
        int16_t e = check_locked(gc, &pr);
        if (e == GR_KERR_NONE) {
            struct group *g = gc_find_group_locked(gc, id);
            if (!g || g->state == ST_DEAD) {
                e = GR_KERR_GROUP_ID_NOT_FOUND;
            } else if (g->state != ST_EMPTY) {
                e = GR_KERR_NON_EMPTY_GROUP;
            } else {
                struct tomb *t = gr_calloc(1, sizeof *t);
                t->id = gr_strdup(id);
                size_t len;
                t->batch = gc_build_group_batch(gc, g, true, true, &len);
                gc_wq_add(&w, g->partition, t->batch, len, 1, tomb_done, t);
                gr_info(LOGGER, "Group %s deleted (%d offsets removed)", id, g->n_offsets);
                gc_remove_group_locked(gc, g);
            }
        }
        pthread_mutex_unlock(&gc->mu);
        errors[i] = e;
    }
    gc_wq_flush(gc, &w);
}

/* ---- timers ---- */

/* Kafka's MemberMetadata.hasSatisfiedHeartbeat at the moment the expectation expires. */
static bool hb_satisfied(const struct member *m) {
    if (m->is_leaving) return true;
    if (m->is_new) return false;
    return m->join_cb || m->sync_cb;
}

static void tick_group_locked(struct gr_group_coordinator *gc, struct group *g, int64_t now, struct dq *q,
                              struct wq *w) {
restart:
    for (struct member *m = g->members; m; m = m->next) {
        if (!m->hb_deadline || now < m->hb_deadline) continue;
        m->hb_deadline = 0;
        if (hb_satisfied(m)) continue;
        gr_info(LOGGER, "Member %s in group %s has failed, removing it from the group", m->id, g->id);
        char reason[256];
        snprintf(reason, sizeof reason, "removing member %s on heartbeat expiration", m->id);
        /* may complete the join and drop other members: walk again from the start */
        remove_member_and_update_locked(gc, g, m, reason, q, w);
        goto restart;
    }
    for (struct pending *p = g->pending, *next; p; p = next) {
        next = p->next;
        if (now < p->deadline) continue;
        gr_info(LOGGER, "Pending member %s in group %s has been removed after session timeout expiration.", p->id,
                g->id);
        gc_group_remove_pending(g, p->id);
        if (g->state == ST_PREPARING) try_complete_join_locked(gc, g, q, w);
    }
    if (g->state == ST_PREPARING && g->join_armed && now >= g->join_deadline) {
        if (g->join_initial && g->new_member_added && g->join_remaining != 0) {
            g->new_member_added = false;
            int32_t delay = GR_MIN(gc->cfg.initial_rebalance_delay_ms, g->join_remaining);
            int32_t remaining = GR_MAX(g->join_remaining - g->join_delay, 0);
            arm_join(gc, g, true, delay, remaining);
        } else {
            complete_join_locked(gc, g, q, w);
        }
    }
}

void gr_gc_tick(struct gr_group_coordinator *gc) {
    struct dq q;
    struct wq w = {0};
    gc_dq_init(&q);
    int64_t now = now_ms(gc);
    pthread_mutex_lock(&gc->mu);
    bool cleanup = now >= gc->next_cleanup;
    if (cleanup) gc->next_cleanup = now + gc->cfg.offsets_retention_check_interval_ms;
    int64_t wall = wall_ms(gc);
    int expired = 0;
    for (int b = 0; b < NBUCKETS; b++) {
        for (struct group *g = gc->groups.buckets[b], *next; g; g = next) {
            next = g->next;
            tick_group_locked(gc, g, now, &q, &w);
            if (cleanup && gc_expire_group_offsets_locked(gc, g, wall, &w, &expired)) gc_remove_group_locked(gc, g);
        }
    }
    if (cleanup && expired > 0) gr_info(LOGGER, "Removed %d expired offsets.", expired);
    pthread_mutex_unlock(&gc->mu);
    gc_wq_flush(gc, &w);
    gc_dq_flush(&q);
}

bool gr_gc_metadata_too_large(struct gr_group_coordinator *gc, const char *metadata) {
    return metadata && (int64_t)strlen(metadata) > gc->cfg.max_metadata_size;
}

/* ---- lifecycle ---- */

void gr_gc_config_defaults(struct gr_gc_config *c) {
    memset(c, 0, sizeof *c);
    c->broker_id = -1;
    c->num_partitions = GR_OFFSETS_DEFAULT_PARTITIONS;
    c->initial_rebalance_delay_ms = 3000;
    c->min_session_timeout_ms = 6000;
    c->max_session_timeout_ms = 1800000;
    c->group_max_size = INT32_MAX;
    c->offset_commit_timeout_ms = 5000;
    c->max_metadata_size = 4096;
    c->offsets_retention_ms = 10080LL * 60000;
    c->offsets_retention_check_interval_ms = 600000;
    c->background_thread = true;
}

static void *gc_thread(void *arg) {
    struct gr_group_coordinator *gc = arg;
    pthread_setname_np(pthread_self(), "group-coord");
    for (;;) {
        gr_gc_poll_partitions(gc);
        gr_gc_tick(gc);
        pthread_mutex_lock(&gc->mu);
        if (!gc->stopping && !gc->kick) {
            struct timespec ts = gr_timespec_after_ms(CLOCK_MONOTONIC, 50);
            pthread_cond_timedwait(&gc->cond, &gc->mu, &ts);
        }
        gc->kick = false;
        bool stop = gc->stopping;
        pthread_mutex_unlock(&gc->mu);
        if (stop) break;
    }
    return NULL;
}

struct gr_group_coordinator *gr_gc_new(const struct gr_gc_config *cfg) {
    struct gr_group_coordinator *gc = gr_calloc(1, sizeof *gc);
    gc->cfg = *cfg;
    if (gc->cfg.num_partitions <= 0) gc->cfg.num_partitions = GR_OFFSETS_DEFAULT_PARTITIONS;
    if (gc->cfg.group_max_size <= 0) gc->cfg.group_max_size = INT32_MAX;
    pthread_mutex_init(&gc->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&gc->cond, &ca);
    pthread_condattr_destroy(&ca);
    gc->active = true;
    if (gc->cfg.offsets_retention_ms <= 0) gc->cfg.offsets_retention_ms = 10080LL * 60000;
    if (gc->cfg.offsets_retention_check_interval_ms <= 0) gc->cfg.offsets_retention_check_interval_ms = 600000;
    gc->next_cleanup = now_ms(gc) + gc->cfg.offsets_retention_check_interval_ms;
    gc_ensure_parts_locked(gc, gc->cfg.num_partitions);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&gc->load_cond, &ca);
    pthread_condattr_destroy(&ca);
    gc->load_tail = &gc->load_head;
    if (cfg->background_thread) {
        if (!gc_loader_start(gc)) {
            gr_gc_free(gc);
            return NULL;
        }
        int rc = pthread_create(&gc->thread, NULL, gc_thread, gc);
        if (rc != 0) {
            gr_error(LOGGER, "Cannot start the group coordinator thread: %s", strerror(rc));
            gr_gc_free(gc);
            return NULL;
        }
        gc->thread_started = true;
    }
    return gc;
}

void gr_gc_shutdown(struct gr_group_coordinator *gc) {
    if (!gc) return;
    struct dq q;
    gc_dq_init(&q);
    pthread_mutex_lock(&gc->mu);
    bool was_active = gc->active;
    gc->active = false;
    gc->stopping = true;
    pthread_cond_broadcast(&gc->cond);
    pthread_mutex_unlock(&gc->mu);
    if (gc->thread_started) {
        pthread_join(gc->thread, NULL);
        gc->thread_started = false;
    }
    gc_loader_stop(gc); /* a running load stops before its next read */
    pthread_mutex_lock(&gc->mu);
    gc_unload_locked(gc, -1, &q);
    for (int32_t p = 0; p < gc->n_parts_cap; p++) gc->parts[p].state = PART_NONE;
    pthread_mutex_unlock(&gc->mu);
    gc_dq_flush(&q);
    if (was_active) gr_info(LOGGER, "Shutdown complete.");
}

void gr_gc_free(struct gr_group_coordinator *gc) {
    if (!gc) return;
    gr_gc_shutdown(gc);
    if (gc->cfg.storage.release) gc->cfg.storage.release(gc->cfg.storage.ctx);
    free(gc->parts);
    pthread_cond_destroy(&gc->load_cond);
    pthread_cond_destroy(&gc->cond);
    pthread_mutex_destroy(&gc->mu);
    free(gc);
}
