/* Partition reassignment: see reassignment.h. */
#include "controller/reassignment.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/event_manager.h"
#include "controller/flows.h"
#include "controller/partition_sm.h"
#include "controller/replica_sm.h"
#include "controller/request_batch.h"

#define LOGGER "kafka.controller.KafkaController"

#define SC_LOG(lvl, sm, fmt, ...)                                                                                 \
    gr_log(lvl, GR_STATE_CHANGE_LOGGER, "[Controller id=%d epoch=%d] " fmt, (sm)->controller_id, (sm)->ctx->epoch, \
           __VA_ARGS__)

/* ======================================================================================
 * Arithmetic
 * ====================================================================================== */

static bool has(const int32_t *v, int n, int32_t x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return true;
    return false;
}

static int32_t *dup_ids(const int32_t *v, int n) {
    int32_t *o = gr_malloc((size_t)(n > 0 ? n : 1) * sizeof *o);
    if (n > 0) memcpy(o, v, (size_t)n * sizeof *o);
    return o;
}

/* a - b (order of a kept), malloc'd */
static int32_t *diff(const int32_t *a, int na, const int32_t *b, int nb, int *n) {
    int32_t *o = gr_malloc((size_t)(na > 0 ? na : 1) * sizeof *o);
    int k = 0;
    for (int i = 0; i < na; i++)
        if (!has(b, nb, a[i])) o[k++] = a[i];
    *n = k;
    return o;
}

void gr_replica_assignment_release(struct gr_replica_assignment *a) {
    free(a->replicas);
    free(a->adding);
    free(a->removing);
    memset(a, 0, sizeof *a);
}

void gr_replica_assignment_set(struct gr_replica_assignment *a, const int32_t *replicas, int n_replicas,
                               const int32_t *adding, int n_adding, const int32_t *removing, int n_removing) {
    a->n_replicas = n_replicas > 0 ? n_replicas : 0;
    a->replicas = dup_ids(replicas, a->n_replicas);
    a->n_adding = n_adding > 0 ? n_adding : 0;
    a->adding = dup_ids(adding, a->n_adding);
    a->n_removing = n_removing > 0 ? n_removing : 0;
    a->removing = dup_ids(removing, a->n_removing);
}

bool gr_replica_assignment_reassigning(const struct gr_replica_assignment *a) {
    return a->n_adding > 0 || a->n_removing > 0;
}

int32_t *gr_replica_assignment_origin(const struct gr_replica_assignment *a, int *n) {
    return diff(a->replicas, a->n_replicas, a->adding, a->n_adding, n);
}

int32_t *gr_replica_assignment_target(const struct gr_replica_assignment *a, int *n) {
    return diff(a->replicas, a->n_replicas, a->removing, a->n_removing, n);
}

void gr_replica_assignment_reassign_to(const struct gr_replica_assignment *cur, const int32_t *target, int n_target,
                                       struct gr_replica_assignment *out) {
    int n_ors;
    int32_t *ors = gr_replica_assignment_origin(cur, &n_ors);
    int32_t *rs = gr_malloc((size_t)(n_target + n_ors + 1) * sizeof *rs);
    int n_rs = 0;
    for (int i = 0; i < n_target; i++)
        if (!has(rs, n_rs, target[i])) rs[n_rs++] = target[i];
    for (int i = 0; i < n_ors; i++)
        if (!has(rs, n_rs, ors[i])) rs[n_rs++] = ors[i];
    out->n_replicas = n_rs;
    out->replicas = rs;
    out->adding = diff(rs, n_rs, ors, n_ors, &out->n_adding);
    out->removing = diff(rs, n_rs, target, n_target, &out->n_removing);
    free(ors);
}

static bool ids_equal(const int32_t *a, int na, const int32_t *b, int nb) {
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof *a) == 0);
}

bool gr_replica_assignment_equal(const struct gr_replica_assignment *a, const struct gr_replica_assignment *b) {
    return ids_equal(a->replicas, a->n_replicas, b->replicas, b->n_replicas) &&
           ids_equal(a->adding, a->n_adding, b->adding, b->n_adding) &&
           ids_equal(a->removing, a->n_removing, b->removing, b->n_removing);
}

int16_t gr_reassign_validate(const struct gr_replica_assignment *cur, const int32_t *target, int n_target,
                             const int32_t *live, int n_live, char *msg, size_t msg_len) {
    char ids[512];
    if (!msg) msg_len = 0;
    if (n_target <= 0) {
        if (msg_len) snprintf(msg, msg_len, "Empty replica list specified in partition reassignment.");
        return GR_KERR_INVALID_REPLICA_ASSIGNMENT;
    }
    for (int i = 0; i < n_target; i++)
        if (has(target, i, target[i])) {
            if (msg_len)
                snprintf(msg, msg_len, "Duplicate replica ids in partition reassignment replica list: [%s]",
                         gr_ctrl_fmt_ids(ids, sizeof ids, target, n_target));
            return GR_KERR_INVALID_REPLICA_ASSIGNMENT;
        }
    for (int i = 0; i < n_target; i++)
        if (target[i] < 0) {
            if (msg_len)
                snprintf(msg, msg_len, "Invalid broker id in replica list: [%s]",
                         gr_ctrl_fmt_ids(ids, sizeof ids, target, n_target));
            return GR_KERR_INVALID_REPLICA_ASSIGNMENT;
        }
    struct gr_replica_assignment next;
    gr_replica_assignment_reassign_to(cur, target, n_target, &next);
    int16_t err = GR_KERR_NONE;
    for (int i = 0; i < next.n_adding; i++)
        if (!has(live, n_live, next.adding[i])) {
            if (msg_len) {
                char lb[512];
                snprintf(msg, msg_len,
                         "Replica assignment has brokers that are not alive. Replica list: [%s], live broker list: [%s]",
                         gr_ctrl_fmt_ids(ids, sizeof ids, next.adding, next.n_adding),
                         gr_ctrl_fmt_ids(lb, sizeof lb, live, n_live));
            }
            err = GR_KERR_INVALID_REPLICA_ASSIGNMENT;
            break;
        }
    gr_replica_assignment_release(&next);
    return err;
}

/* ======================================================================================
 * Context helpers
 * ====================================================================================== */

static void assignment_of(const struct gr_ctrl_partition *p, struct gr_replica_assignment *out) {
    if (!p) {
        memset(out, 0, sizeof *out);
        out->replicas = dup_ids(NULL, 0);
        out->adding = dup_ids(NULL, 0);
        out->removing = dup_ids(NULL, 0);
        return;
    }
    gr_replica_assignment_set(out, p->replicas, p->n_replicas, p->adding, p->n_adding, p->removing, p->n_removing);
}

static bool partition_reassigning(const struct gr_ctrl_partition *p) { return p->n_adding > 0 || p->n_removing > 0; }

bool gr_reassign_topic_reassigning(struct gr_ctrl_context *ctx, const char *topic) {
    struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, topic);
    for (int i = 0; t && i < t->n_partitions; i++)
        if (partition_reassigning(&t->partitions[i])) return true;
    return false;
}

int64_t gr_reassign_count(struct gr_ctrl_context *ctx) {
    int64_t n = 0;
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur)))
        for (int i = 0; i < t->n_partitions; i++)
            if (partition_reassigning(&t->partitions[i])) n++;
    return n;
}

/* updatePartitionFullReplicaAssignment: replaces p's arrays with copies of ra; replica states
 * follow their replica ids (new replicas start NonExistent). */
static void set_partition_assignment(struct gr_ctrl_context *ctx, struct gr_ctrl_partition *p,
                                     const struct gr_replica_assignment *ra) {
    gr_ctrl_ctx_reassigning_changed(ctx, partition_reassigning(p), gr_replica_assignment_reassigning(ra));
    gr_ctrl_partition_set_assignment(p, ra->replicas, ra->n_replicas, ra->adding, ra->n_adding, ra->removing,
                                     ra->n_removing);
}

/* The /brokers/topics/T JSON of t: the context's assignment of every partition, t->partitions[i]
 * replaced by over[i] where over (may be NULL) has an entry. */
static char *topic_json(struct gr_ctrl_topic *t, const struct gr_replica_assignment *const *over, size_t *len) {
    struct gr_kzk_topic_assignment a;
    memset(&a, 0, sizeof a);
    a.topic = t->name;
    a.topic_id = t->topic_id;
    a.n_partitions = t->n_partitions;
    a.partitions = gr_calloc((size_t)(t->n_partitions ? t->n_partitions : 1), sizeof *a.partitions);
    for (int i = 0; i < t->n_partitions; i++) {
        const struct gr_ctrl_partition *p = &t->partitions[i];
        const struct gr_replica_assignment *o = over ? over[i] : NULL;
        struct gr_kzk_partition_assignment *pa = &a.partitions[i];
        pa->partition = p->partition;
        pa->n_replicas = o ? o->n_replicas : p->n_replicas;
        pa->replicas = o ? o->replicas : p->replicas;
        pa->n_adding = o ? o->n_adding : p->n_adding;
        pa->adding = o ? o->adding : p->adding;
        pa->n_removing = o ? o->n_removing : p->n_removing;
        pa->removing = o ? o->removing : p->removing;
    }
    char *json = gr_kzk_topic_assignment_encode(&a, len);
    free(a.partitions); /* the arrays are borrowed */
    return json;
}

/* Topic znodes per guarded multi: within the backend's batch and far below ZooKeeper's 1 MiB
 * request limit. */
#define TOPIC_WRITES_PER_MULTI 200
#define TOPIC_WRITE_BYTES (512 * 1024)

/* updateReplicaAssignmentForPartition for every partition of n topics: writes each
 * /brokers/topics/ts[i] (any version) with topic_json(ts[i], overs[i]), many topics per guarded
 * multi (the epoch check first, as every controller write). A multi that fails on a topic is redone
 * one topic per guarded multi so that each gets its own result in rcs[i]. Returns 0 or
 * GR_ECONTROLLER_MOVED. */
static int write_topics(struct gr_ctrl_sm *sm, struct gr_ctrl_topic **ts, const struct gr_replica_assignment *const *const *overs,
                        int n, int *rcs) {
    char **json = gr_calloc((size_t)(n ? n : 1), sizeof *json);
    char **path = gr_calloc((size_t)(n ? n : 1), sizeof *path);
    size_t *len = gr_calloc((size_t)(n ? n : 1), sizeof *len);
    struct gr_zop *ops = gr_malloc((size_t)TOPIC_WRITES_PER_MULTI * sizeof *ops);
    for (int i = 0; i < n; i++) {
        json[i] = topic_json(ts[i], overs ? overs[i] : NULL, &len[i]);
        path[i] = gr_asprintf("/brokers/topics/%s", ts[i]->name);
        rcs[i] = 0;
    }
    int out = 0;
    for (int s = 0; s < n && !out;) {
        int m = 0;
        size_t bytes = 0;
        while (s + m < n && m < TOPIC_WRITES_PER_MULTI && (m == 0 || bytes + len[s + m] <= TOPIC_WRITE_BYTES)) {
            ops[m] = gr_zop_set(path[s + m], json[s + m], (int)len[s + m], GR_ZANY_VERSION);
            bytes += len[s + m] + strlen(path[s + m]);
            m++;
        }
        int rc = gr_kzk_guarded_multi(sm->kzk, sm->ctx->epoch_zk_version, ops, m, NULL);
        if (rc && rc != GR_ECONTROLLER_MOVED && m > 1)
            for (int i = 0; i < m && rc != GR_ECONTROLLER_MOVED; i++)
                rc = rcs[s + i] = gr_kzk_guarded_multi(sm->kzk, sm->ctx->epoch_zk_version, &ops[i], 1, NULL);
        else
            for (int i = 0; i < m; i++) rcs[s + i] = rc;
        if (rc == GR_ECONTROLLER_MOVED) out = rc;
        for (int i = 0; i < m; i++)
            if (rcs[s + i] && rcs[s + i] != GR_ECONTROLLER_MOVED)
                gr_error(LOGGER, "Failed to update assignment of topic %s: %s", ts[s + i]->name, gr_kzk_strerror(rcs[s + i]));
        s += m;
    }
    for (int i = 0; i < n; i++) {
        free(json[i]);
        free(path[i]);
    }
    free(ops);
    free(len);
    free(path);
    free(json);
    return out;
}

/* A leader-epoch bump of one partition (see bump_leader_epochs). */
struct bump {
    const char *topic;
    int32_t partition;
    const int32_t *remove; /* replicas to drop from the ISR (never emptying it; a removed leader
                            * becomes -1); may be NULL */
    int n_remove;
    int status;                       /* 0 written, 1 nothing done (no state / newer controller),
                                       * else a kzk code */
    struct gr_kzk_leader_and_isr lai; /* status 0: the new state (owned, also cached) */
};

/* The new state of b from cur: `remove` out of the ISR, leader epoch + 1, our controller epoch. */
static void bumped_state(const struct gr_ctrl_context *ctx, const struct bump *b, const struct gr_kzk_leader_and_isr *cur,
                         struct gr_kzk_leader_and_isr *n) {
    *n = *cur;
    n->isr = dup_ids(cur->isr, cur->n_isr);
    for (int i = 0; i < b->n_remove; i++) {
        if (!has(n->isr, n->n_isr, b->remove[i])) continue;
        if (n->leader == b->remove[i]) n->leader = GR_LEADER_NONE;
        if (n->n_isr > 1) {
            int k = 0;
            for (int j = 0; j < n->n_isr; j++)
                if (n->isr[j] != b->remove[i]) n->isr[k++] = n->isr[j];
            n->n_isr = k;
        }
    }
    n->leader_epoch = cur->leader_epoch + 1;
    n->controller_epoch = ctx->epoch;
}

/* Reads the state znodes of b[0..n) (one pipelined read) and writes them back conditionally with
 * the bump applied (guarded multis of many partitions), rereading and retrying the ones that
 * failed on BADVERSION. Sets each b[i].status. Returns 0 or GR_ECONTROLLER_MOVED. */
static int bump_leader_epochs(struct gr_ctrl_sm *sm, struct bump *b, int n) {
    struct gr_ctrl_context *ctx = sm->ctx;
    int *pend = gr_malloc((size_t)(n ? n : 1) * sizeof *pend);
    int np = n;
    for (int i = 0; i < n; i++) {
        pend[i] = i;
        b[i].status = GR_KZK_EBADVERSION;
        memset(&b[i].lai, 0, sizeof b[i].lai);
    }
    struct gr_kzk_tp *tps = gr_malloc((size_t)(n ? n : 1) * sizeof *tps);
    struct gr_kzk_state_result *cur = gr_calloc((size_t)(n ? n : 1), sizeof *cur);
    struct gr_kzk_state_write *w = gr_malloc((size_t)(n ? n : 1) * sizeof *w);
    struct gr_kzk_write_result *wr = gr_calloc((size_t)(n ? n : 1), sizeof *wr);
    int *widx = gr_malloc((size_t)(n ? n : 1) * sizeof *widx);
    int out = 0;
    for (int attempt = 0; attempt < 100 && np > 0 && !out; attempt++) {
        /* every pending state read from ZooKeeper (no cached copy: as in Kafka) */
        for (int j = 0; j < np; j++) tps[j] = (struct gr_kzk_tp){.topic = (char *)b[pend[j]].topic, .partition = b[pend[j]].partition};
        memset(cur, 0, (size_t)np * sizeof *cur);
        int rc = gr_kzk_get_partition_states(sm->kzk, tps, np, cur);
        int nw = 0;
        for (int j = 0; j < np; j++) {
            struct bump *x = &b[pend[j]];
            int irc = rc ? rc : cur[j].rc;
            if (irc == GR_KZK_ENONODE || irc == GR_ECORRUPT) {
                SC_LOG(GR_LOG_ERROR, sm, "Cannot update leader epoch for partition %s-%d as leaderAndIsr path is empty",
                       x->topic, x->partition);
                x->status = 1;
            } else if (irc) {
                x->status = irc;
            } else if (cur[j].lai.controller_epoch > ctx->epoch) {
                SC_LOG(GR_LOG_ERROR, sm,
                       "Leader and isr path of %s-%d written by another controller with epoch %d. Aborting state change "
                       "by this controller",
                       x->topic, x->partition, cur[j].lai.controller_epoch);
                x->status = 1;
            } else {
                bumped_state(ctx, x, &cur[j].lai, &x->lai);
                w[nw] = (struct gr_kzk_state_write){.topic = x->topic, .partition = x->partition, .lai = &x->lai};
                widx[nw++] = pend[j];
            }
            gr_kzk_leader_and_isr_release(&cur[j].lai);
        }
        np = 0;
        if (nw == 0) break;
        rc = gr_kzk_update_partition_states(sm->kzk, ctx->epoch_zk_version, w, nw, wr);
        for (int j = 0; j < nw; j++) {
            struct bump *x = &b[widx[j]];
            int irc = rc ? rc : wr[j].rc;
            if (irc == 0) {
                x->lai.zk_version = wr[j].zk_version;
                struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(ctx, x->topic, x->partition);
                if (p) gr_ctrl_partition_set_state(p, &x->lai);
                x->status = 0;
                gr_info(LOGGER, "Updated leader epoch for partition %s-%d to %d, zkVersion=%d", x->topic, x->partition,
                        x->lai.leader_epoch, x->lai.zk_version);
                continue;
            }
            gr_kzk_leader_and_isr_release(&x->lai);
            x->status = irc;
            if (irc == GR_KZK_EBADVERSION) pend[np++] = widx[j];
        }
        if (rc == GR_ECONTROLLER_MOVED) out = rc;
    }
    free(widx);
    free(wr);
    free(w);
    free(cur);
    free(tps);
    free(pend);
    return out;
}

static void bumps_release(struct bump *b, int n) {
    for (int i = 0; i < n; i++) gr_kzk_leader_and_isr_release(&b[i].lai);
    free(b);
}

/* One partition of a batched onPartitionReassignment. */
struct job {
    const char *topic; /* the context's name (stable for the event) */
    int32_t partition;
    const struct gr_replica_assignment *ra; /* borrowed */
    int rc;        /* 0, or the kzk code that stopped this partition */
    bool complete; /* TRS in the ISR (phase B) */
    int n_trs;
    int32_t *trs;  /* owned */
    int n_ors;
    int32_t *ors;  /* owned */
};

static bool job_live(const struct job *j) { return j->topic && j->rc == 0; }

/* stopRemovedReplicasOfReassignedPartition, for replicas already gone from the in-memory
 * assignment: out of the ISR with the leader epoch + 1 (LeaderAndIsr to the remaining replicas),
 * then StopReplica(delete=true) carrying that new epoch; for every partition of b at once (one
 * read, guarded multis, one request batch).
 *
 * The epoch is bumped even when no removed replica is in the ISR. A broker ignores a StopReplica
 * whose leader epoch is not above the one it holds (FENCED_LEADER_EPOCH), and a removed replica has
 * seen the current epoch (phase A's LeaderAndIsr): Kafka's replica state machine path
 * (OfflineReplica -> ReplicaDeletionStarted) bumps only when the replica is in the ISR, so a
 * cancelled reassignment's not-yet-in-sync replicas are never deleted there (stray replicas). For
 * the same reason this does not go through the replica state machine, which also keeps states only
 * for assigned replicas. Statuses as bump_leader_epochs (1 counts as done). */
static int stop_removed_replicas(struct gr_ctrl_sm *sm, struct bump *b, int n) {
    if (n <= 0) return 0;
    int rc = bump_leader_epochs(sm, b, n);
    if (rc) return rc;
    struct gr_ctrl_tp_list leaderless = {0};
    gr_ctrl_batch_begin(sm->batch);
    for (int i = 0; i < n; i++) {
        if (b[i].status != 0 && b[i].status != 1) continue;
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, b[i].topic, b[i].partition);
        if (b[i].status == 0 && p) {
            const struct gr_kzk_leader_and_isr *l = &b[i].lai;
            char isr[256], ids[128];
            SC_LOG(GR_LOG_INFO, sm,
                   "Partition %s-%d state changed to (Leader:%d,ISR:%s,LeaderEpoch:%d,ControllerEpoch:%d) after "
                   "removing replicas %s from the ISR as part of reassignment",
                   b[i].topic, b[i].partition, l->leader, gr_ctrl_fmt_ids(isr, sizeof isr, l->isr, l->n_isr),
                   l->leader_epoch, l->controller_epoch, gr_ctrl_fmt_ids(ids, sizeof ids, b[i].remove, b[i].n_remove));
            gr_ctrl_batch_add_leader_and_isr(sm->batch, p->replicas, p->n_replicas, b[i].topic, b[i].partition, l, false);
        }
        gr_ctrl_batch_add_stop_replica(sm->batch, b[i].remove, b[i].n_remove, b[i].topic, b[i].partition, true);
        if (b[i].status == 0 && p && b[i].lai.leader == GR_LEADER_NONE && p->state == GR_PS_ONLINE)
            gr_ctrl_tp_list_add(&leaderless, b[i].topic, b[i].partition);
    }
    gr_ctrl_batch_send(sm->batch);
    /* The removed leader took the leadership with it (the reassignment's own election failed: no
     * new replica was live and in the ISR). Kafka leaves such a partition OnlinePartition with no
     * leader, so no later broker start-up elects one; here it goes OfflinePartition, which the
     * next BrokerChange / election trigger picks up. */
    if (leaderless.n) rc = gr_psm_handle_state_changes(sm, leaderless.v, leaderless.n, GR_PS_OFFLINE, NULL, NULL);
    gr_ctrl_tp_list_free(&leaderless);
    return rc;
}

/* updateLeaderEpochAndSendRequest for jobs idx[0..n): epoch + 1, then one request batch with
 * LeaderAndIsr to `plain` (ORS in phase A, TRS in phase B) and to AR (IsNew, phase A only). */
static int update_leader_epochs_and_send(struct gr_ctrl_sm *sm, struct job *jobs, const int *idx, int n, bool phase_a) {
    if (n <= 0) return 0;
    struct bump *b = gr_calloc((size_t)n, sizeof *b);
    for (int i = 0; i < n; i++) b[i] = (struct bump){.topic = jobs[idx[i]].topic, .partition = jobs[idx[i]].partition};
    int rc = bump_leader_epochs(sm, b, n);
    if (rc) {
        bumps_release(b, n);
        return rc;
    }
    gr_ctrl_batch_begin(sm->batch);
    for (int i = 0; i < n; i++) {
        struct job *j = &jobs[idx[i]];
        if (b[i].status == 1) {
            SC_LOG(GR_LOG_ERROR, sm,
                   "Failed to send LeaderAndIsr request with new replica assignment to leader for partition being "
                   "reassigned %s-%d",
                   j->topic, j->partition);
            continue;
        }
        if (b[i].status) {
            j->rc = b[i].status;
            continue;
        }
        const struct gr_kzk_leader_and_isr *l = &b[i].lai;
        if (phase_a) {
            gr_ctrl_batch_add_leader_and_isr(sm->batch, j->ors, j->n_ors, j->topic, j->partition, l, false);
            if (j->ra->n_adding)
                gr_ctrl_batch_add_leader_and_isr(sm->batch, j->ra->adding, j->ra->n_adding, j->topic, j->partition, l,
                                                 true);
        } else {
            gr_ctrl_batch_add_leader_and_isr(sm->batch, j->trs, j->n_trs, j->topic, j->partition, l, false);
        }
        SC_LOG(GR_LOG_INFO, sm,
               "Sent LeaderAndIsr request (leader=%d, leaderEpoch=%d) with new replica assignment to leader %d for "
               "partition being reassigned %s-%d",
               l->leader, l->leader_epoch, l->leader, j->topic, j->partition);
    }
    gr_ctrl_batch_send(sm->batch);
    bumps_release(b, n);
    return 0;
}

/* maybeRemoveFromZkReassignment: drops the entries for which drop(entry) is true; deletes the
 * znode when nothing is left (and queues ZkPartitionReassignment to re-arm the watch). */
typedef bool (*zk_entry_pred)(const struct gr_kzk_reassignment_entry *e, const void *arg);

static int maybe_remove_from_zk(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, zk_entry_pred drop,
                                const void *arg) {
    struct gr_kzk_reassignment r;
    memset(&r, 0, sizeof r);
    int rc = gr_kzk_get_reassignment(sm->kzk, false, &r);
    if (rc == GR_KZK_ENONODE) return 0;
    if (rc == GR_ECORRUPT) {
        gr_kzk_reassignment_release(&r);
        return 0; /* gr_reassign_process_zk deletes it */
    }
    if (rc) return rc;
    int k = 0, removed = 0;
    for (int i = 0; i < r.n; i++) {
        if (drop(&r.entries[i], arg)) {
            gr_info(LOGGER, "Removing partition %s-%d from the list of reassigned partitions in zookeeper",
                    r.entries[i].topic, r.entries[i].partition);
            free(r.entries[i].topic);
            free(r.entries[i].replicas);
            removed++;
        } else {
            r.entries[k++] = r.entries[i];
        }
    }
    r.n = k;
    if (removed == 0) {
        gr_kzk_reassignment_release(&r);
        return 0;
    }
    if (r.n == 0) {
        gr_info(LOGGER, "No more partitions need to be reassigned. Deleting zk path /admin/reassign_partitions");
        rc = gr_kzk_delete_reassignment_guarded(sm->kzk, sm->ctx->epoch_zk_version);
        if (rc == 0 && em) gr_ctrl_events_put(em, gr_ctrl_event_new(GR_EV_ZK_PARTITION_REASSIGNMENT));
    } else {
        rc = gr_kzk_set_reassignment_guarded(sm->kzk, sm->ctx->epoch_zk_version, &r);
    }
    gr_kzk_reassignment_release(&r);
    return rc;
}

/* A sorted set of partitions (with optional replicas) for the predicates of maybe_remove_from_zk:
 * one binary search per znode entry instead of a scan of the set. Strings and arrays borrowed. */
struct tp_key {
    const char *topic;
    int32_t partition;
    const int32_t *replicas; /* NULL: any */
    int n;
};
struct tp_set {
    int n, cap;
    struct tp_key *v;
};

static void tp_set_add(struct tp_set *s, const char *topic, int32_t partition, const int32_t *replicas, int n) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->v = gr_realloc(s->v, (size_t)s->cap * sizeof *s->v);
    }
    s->v[s->n++] = (struct tp_key){topic, partition, replicas, n};
}

static int cmp_tp_key(const void *a, const void *b) {
    const struct tp_key *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

static void tp_set_seal(struct tp_set *s) {
    if (s->n > 1) qsort(s->v, (size_t)s->n, sizeof *s->v, cmp_tp_key);
}

/* Is the entry's partition in the set (and, for keys with replicas, with exactly those)? */
static bool tp_set_drop(const struct gr_kzk_reassignment_entry *e, const void *arg) {
    const struct tp_set *s = arg;
    struct tp_key k = {e->topic, e->partition, NULL, 0};
    const struct tp_key *f = s->n ? bsearch(&k, s->v, (size_t)s->n, sizeof k, cmp_tp_key) : NULL;
    if (!f) return false;
    /* equal keys may repeat: look at the run around f */
    const struct tp_key *lo = f, *hi = f;
    while (lo > s->v && cmp_tp_key(lo - 1, &k) == 0) lo--;
    while (hi + 1 < s->v + s->n && cmp_tp_key(hi + 1, &k) == 0) hi++;
    for (const struct tp_key *x = lo; x <= hi; x++)
        if (!x->replicas || ids_equal(e->replicas, e->n_replicas, x->replicas, x->n)) return true;
    return false;
}

/* ======================================================================================
 * onPartitionReassignment, for many partitions at once
 * ====================================================================================== */

/* The tail of onNewPartitionCreation for a partition that stayed New: its replicas not yet
 * NewReplica become so, the partition goes Online (a leader among the live replicas), every replica
 * OnlineReplica -- so the replica states match the leadership (a leader left NonExistent could not
 * be taken offline later). */
static int bring_new_partition_online(struct gr_ctrl_sm *sm, const char *topic, int32_t partition) {
    struct gr_kzk_tp tp = {.topic = (char *)topic, .partition = partition};
    struct gr_ctrl_replica_list fresh = {0}, all = {0};
    gr_rsm_replicas_for_partitions(sm, &tp, 1, &all);
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, topic, partition);
    for (int i = 0; p && i < all.n; i++)
        if (gr_ctrl_replica_state_get(p, all.v[i].replica) == GR_RS_NONEXISTENT)
            gr_ctrl_replica_list_add(&fresh, all.v[i].topic, all.v[i].partition, all.v[i].replica);
    struct gr_psm_strategy st = {.kind = GR_ELECT_OFFLINE, .allow_unclean = false};
    int rc = gr_rsm_handle_state_changes(sm, fresh.v, fresh.n, GR_RS_NEW);
    if (!rc) rc = gr_psm_handle_state_changes(sm, &tp, 1, GR_PS_ONLINE, &st, NULL);
    p = gr_ctrl_ctx_partition(sm->ctx, topic, partition);
    if (!rc && p && p->has_state) rc = gr_rsm_handle_state_changes(sm, all.v, all.n, GR_RS_ONLINE);
    gr_ctrl_replica_list_free(&fresh);
    gr_ctrl_replica_list_free(&all);
    return rc;
}

/* Jobs sorted by topic, so that each topic's partitions are one run. */
static struct job *sort_jobs_ctx;
static int cmp_job_idx(const void *a, const void *b) {
    const struct job *x = &sort_jobs_ctx[*(const int *)a], *y = &sort_jobs_ctx[*(const int *)b];
    int c = strcmp(x->topic, y->topic);
    if (c) return c;
    return (x->partition > y->partition) - (x->partition < y->partition);
}

/* Live jobs' indexes sorted by topic (event thread only: the comparator's context is static). */
static int *jobs_by_topic(struct job *jobs, int n, int *m) {
    int *idx = gr_malloc((size_t)(n ? n : 1) * sizeof *idx);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (job_live(&jobs[i])) idx[k++] = i;
    sort_jobs_ctx = jobs;
    if (k > 1) qsort(idx, (size_t)k, sizeof *idx, cmp_job_idx);
    sort_jobs_ctx = NULL;
    *m = k;
    return idx;
}

/* updateCurrentReassignment (U1-U3) for every live job: the changed topics' /brokers/topics/T
 * written together (U1, write_topics), the context (U2), then replicas of an earlier reassignment
 * that are no longer in RS leave the ISR and are stopped, all partitions at once (U3). */
static int update_current_reassignments(struct gr_ctrl_sm *sm, struct job *jobs, int n) {
    int m;
    int *idx = jobs_by_topic(jobs, n, &m);
    /* per topic run: [first, end) in idx, its topic and overrides */
    int *run_s = gr_malloc((size_t)(m ? m : 1) * sizeof *run_s), *run_e = gr_malloc((size_t)(m ? m : 1) * sizeof *run_e);
    struct gr_ctrl_topic **ts = gr_malloc((size_t)(m ? m : 1) * sizeof *ts);
    const struct gr_replica_assignment ***overs = gr_calloc((size_t)(m ? m : 1), sizeof *overs);
    int *wrc = gr_calloc((size_t)(m ? m : 1), sizeof *wrc);
    int nt = 0;
    for (int s = 0; s < m;) {
        struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(sm->ctx, jobs[idx[s]].topic);
        int e = s;
        while (e < m && strcmp(jobs[idx[e]].topic, jobs[idx[s]].topic) == 0) e++;
        const struct gr_replica_assignment **over = gr_calloc((size_t)(t->n_partitions ? t->n_partitions : 1), sizeof *over);
        bool any = false;
        for (int i = s; i < e; i++) {
            struct job *j = &jobs[idx[i]];
            struct gr_ctrl_partition *p = gr_ctrl_topic_partition(t, j->partition);
            struct gr_replica_assignment cur;
            assignment_of(p, &cur);
            if (!gr_replica_assignment_equal(&cur, j->ra)) {
                char a[256], b[256];
                gr_debug(LOGGER, "Updating assignment of partition %s-%d from [%s] to [%s]", j->topic, j->partition,
                         gr_ctrl_fmt_ids(a, sizeof a, cur.replicas, cur.n_replicas),
                         gr_ctrl_fmt_ids(b, sizeof b, j->ra->replicas, j->ra->n_replicas));
                over[p - t->partitions] = j->ra;
                any = true;
            }
            gr_replica_assignment_release(&cur);
        }
        if (any) {
            run_s[nt] = s;
            run_e[nt] = e;
            ts[nt] = t;
            overs[nt++] = over;
        } else {
            free(over);
        }
        s = e;
    }
    int rc = write_topics(sm, ts, (const struct gr_replica_assignment *const *const *)overs, nt, wrc); /* U1 */
    struct bump *stops = gr_calloc((size_t)(n ? n : 1), sizeof *stops);
    int32_t **unneeded = gr_calloc((size_t)(n ? n : 1), sizeof *unneeded);
    int *stop_job = gr_malloc((size_t)(n ? n : 1) * sizeof *stop_job);
    int n_stops = 0;
    for (int r = 0; r < nt && !rc; r++) {
        struct gr_ctrl_topic *t = ts[r];
        for (int i = run_s[r]; i < run_e[r]; i++) {
            struct job *j = &jobs[idx[i]];
            struct gr_ctrl_partition *p = gr_ctrl_topic_partition(t, j->partition);
            if (!overs[r][p - t->partitions]) continue;
            if (wrc[r]) {
                j->rc = wrc[r];
                continue;
            }
            char buf[256];
            gr_info(LOGGER, "Successfully updated assignment of partition %s-%d to replicas [%s]", j->topic,
                    j->partition, gr_ctrl_fmt_ids(buf, sizeof buf, j->ra->replicas, j->ra->n_replicas));
            int n_un;
            int32_t *un = diff(p->replicas, p->n_replicas, j->ra->replicas, j->ra->n_replicas, &n_un);
            set_partition_assignment(sm->ctx, p, j->ra); /* U2 */
            if (n_un) {
                unneeded[n_stops] = un;
                stops[n_stops] = (struct bump){.topic = j->topic, .partition = j->partition, .remove = un, .n_remove = n_un};
                stop_job[n_stops++] = idx[i];
            } else {
                free(un);
            }
        }
    }
    for (int r = 0; r < nt; r++) free(overs[r]);
    if (!rc) rc = stop_removed_replicas(sm, stops, n_stops); /* U3 */
    for (int i = 0; i < n_stops && !rc; i++)
        if (stops[i].status != 0 && stops[i].status != 1) jobs[stop_job[i]].rc = stops[i].status;
    for (int i = 0; i < n_stops; i++) {
        gr_kzk_leader_and_isr_release(&stops[i].lai);
        free(unneeded[i]);
    }
    free(stops);
    free(unneeded);
    free(stop_job);
    free(wrc);
    free(overs);
    free(ts);
    free(run_e);
    free(run_s);
    free(idx);
    return rc;
}

/* isReassignmentComplete for every live job: not reassigning, or TRS within the ISR in ZooKeeper
 * (one pipelined read of the states). */
static void check_complete(struct gr_ctrl_sm *sm, struct job *jobs, int n) {
    struct gr_kzk_tp *tps = gr_malloc((size_t)(n ? n : 1) * sizeof *tps);
    int *idx = gr_malloc((size_t)(n ? n : 1) * sizeof *idx);
    int k = 0;
    for (int i = 0; i < n; i++) {
        struct job *j = &jobs[i];
        j->complete = false;
        if (!job_live(j)) continue;
        if (!gr_replica_assignment_reassigning(j->ra)) {
            j->complete = true;
            continue;
        }
        tps[k] = (struct gr_kzk_tp){.topic = (char *)j->topic, .partition = j->partition};
        idx[k++] = i;
    }
    struct gr_kzk_state_result *cur = gr_calloc((size_t)(k ? k : 1), sizeof *cur);
    int rc = k ? gr_kzk_get_partition_states(sm->kzk, tps, k, cur) : 0;
    for (int i = 0; i < k; i++) {
        struct job *j = &jobs[idx[i]];
        if (rc) {
            j->rc = rc;
        } else if (cur[i].rc == 0) {
            bool all = true;
            for (int r = 0; r < j->n_trs; r++)
                if (!has(cur[i].lai.isr, cur[i].lai.n_isr, j->trs[r])) all = false;
            j->complete = all;
        }
        gr_kzk_leader_and_isr_release(&cur[i].lai);
    }
    free(cur);
    free(idx);
    free(tps);
}

/* Phase A for the jobs not complete: A1 epoch + 1 and LeaderAndIsr to ORS and AR (IsNew), one
 * request batch; A2 AR -> NewReplica, one state machine call. */
static int phase_a(struct gr_ctrl_sm *sm, struct job *jobs, int n) {
    int *idx = gr_malloc((size_t)(n ? n : 1) * sizeof *idx);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (job_live(&jobs[i]) && !jobs[i].complete) idx[k++] = i;
    int rc = update_leader_epochs_and_send(sm, jobs, idx, k, true);
    struct gr_ctrl_replica_list adding = {0};
    for (int i = 0; i < k && !rc; i++) {
        struct job *j = &jobs[idx[i]];
        if (!job_live(j)) continue;
        for (int r = 0; r < j->ra->n_adding; r++) gr_ctrl_replica_list_add(&adding, j->topic, j->partition, j->ra->adding[r]);
    }
    if (!rc && adding.n) rc = gr_rsm_handle_state_changes(sm, adding.v, adding.n, GR_RS_NEW);
    gr_ctrl_replica_list_free(&adding);
    free(idx);
    return rc;
}

/* Phase B for the complete jobs, each step for all of them at once: B1 AR -> OnlineReplica; B2
 * RS = TRS in memory; B3 a Reassign election for those whose leader is not in TRS or is dead
 * (one partition state machine call), epoch + 1 and LeaderAndIsr to TRS for the others (one
 * request batch); B4-B5 RR leave the ISR and are stopped; B6 one /brokers/topics/T write per
 * topic; B7 the entries leave /admin/reassign_partitions (one read, one write); B8 one
 * UpdateMetadata batch. */
static int phase_b(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, struct job *jobs, int n) {
    struct gr_ctrl_context *ctx = sm->ctx;
    int *idx = gr_malloc((size_t)(n ? n : 1) * sizeof *idx);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (job_live(&jobs[i]) && jobs[i].complete) idx[k++] = i;
    if (k == 0) {
        free(idx);
        return 0;
    }
    /* B1 */
    struct gr_ctrl_replica_list adding = {0};
    for (int i = 0; i < k; i++) {
        struct job *j = &jobs[idx[i]];
        for (int r = 0; r < j->ra->n_adding; r++) gr_ctrl_replica_list_add(&adding, j->topic, j->partition, j->ra->adding[r]);
    }
    int rc = gr_rsm_handle_state_changes(sm, adding.v, adding.n, GR_RS_ONLINE);
    gr_ctrl_replica_list_free(&adding);
    /* B2, and the B3 split */
    struct gr_ctrl_tp_list elect = {0};
    int *keep = gr_malloc((size_t)k * sizeof *keep);
    int n_keep = 0;
    for (int i = 0; i < k && !rc; i++) {
        struct job *j = &jobs[idx[i]];
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(ctx, j->topic, j->partition);
        struct gr_replica_assignment done = {0};
        gr_replica_assignment_set(&done, j->trs, j->n_trs, NULL, 0, NULL, 0);
        set_partition_assignment(ctx, p, &done);
        gr_replica_assignment_release(&done);
        int32_t leader = p->has_state ? p->lai.leader : GR_LEADER_NONE;
        if (!has(j->trs, j->n_trs, leader) || !gr_ctrl_replica_online(ctx, p, leader, false)) {
            gr_info(LOGGER, "Leader %d for partition %s-%d being reassigned is %s. Re-electing leader", leader,
                    j->topic, j->partition,
                    has(j->trs, j->n_trs, leader) ? "in the new list of replicas but is dead"
                                                  : "not in the new list of replicas");
            gr_ctrl_tp_list_add(&elect, j->topic, j->partition);
        } else {
            gr_info(LOGGER, "Leader %d for partition %s-%d being reassigned is already in the new list of replicas "
                    "and is alive", leader, j->topic, j->partition);
            keep[n_keep++] = idx[i];
        }
    }
    /* B3 */
    if (!rc && elect.n) {
        struct gr_psm_strategy st = {.kind = GR_ELECT_REASSIGN};
        rc = gr_psm_handle_state_changes(sm, elect.v, elect.n, GR_PS_ONLINE, &st, NULL);
    }
    gr_ctrl_tp_list_free(&elect);
    if (!rc) rc = update_leader_epochs_and_send(sm, jobs, keep, n_keep, false);
    free(keep);
    /* B4, B5 */
    if (!rc) {
        struct bump *stops = gr_calloc((size_t)k, sizeof *stops);
        int *stop_job = gr_malloc((size_t)k * sizeof *stop_job);
        int n_stops = 0;
        for (int i = 0; i < k; i++) {
            struct job *j = &jobs[idx[i]];
            if (!job_live(j) || j->ra->n_removing <= 0) continue;
            stops[n_stops] = (struct bump){.topic = j->topic, .partition = j->partition, .remove = j->ra->removing,
                                           .n_remove = j->ra->n_removing};
            stop_job[n_stops++] = idx[i];
        }
        rc = stop_removed_replicas(sm, stops, n_stops);
        for (int i = 0; i < n_stops && !rc; i++)
            if (stops[i].status != 0 && stops[i].status != 1) jobs[stop_job[i]].rc = stops[i].status;
        bumps_release(stops, n_stops);
        free(stop_job);
    }
    free(idx);
    /* B6: the context already holds RS = TRS (B2): every topic touched, written together */
    int m = 0;
    idx = rc ? NULL : jobs_by_topic(jobs, n, &m);
    struct gr_ctrl_topic **ts = gr_malloc((size_t)(m ? m : 1) * sizeof *ts);
    int *run_s = gr_malloc((size_t)(m ? m : 1) * sizeof *run_s), *run_e = gr_malloc((size_t)(m ? m : 1) * sizeof *run_e);
    int *wrc = gr_calloc((size_t)(m ? m : 1), sizeof *wrc);
    int nt = 0;
    for (int s = 0; s < m;) {
        int e = s;
        bool any = false;
        while (e < m && strcmp(jobs[idx[e]].topic, jobs[idx[s]].topic) == 0) any |= jobs[idx[e++]].complete;
        if (any) {
            ts[nt] = gr_ctrl_ctx_topic(ctx, jobs[idx[s]].topic);
            run_s[nt] = s;
            run_e[nt++] = e;
        }
        s = e;
    }
    if (!rc) rc = write_topics(sm, ts, NULL, nt, wrc);
    for (int r = 0; r < nt && !rc; r++)
        for (int i = run_s[r]; i < run_e[r] && wrc[r]; i++)
            if (jobs[idx[i]].complete) jobs[idx[i]].rc = wrc[r];
    free(wrc);
    free(run_e);
    free(run_s);
    free(ts);
    free(idx);
    /* B7 */
    struct tp_set done_set = {0};
    for (int i = 0; i < n && !rc; i++)
        if (job_live(&jobs[i]) && jobs[i].complete)
            tp_set_add(&done_set, jobs[i].topic, jobs[i].partition, jobs[i].trs, jobs[i].n_trs);
    tp_set_seal(&done_set);
    if (!rc && done_set.n) {
        int zrc = maybe_remove_from_zk(sm, em, tp_set_drop, &done_set);
        if (zrc == GR_ECONTROLLER_MOVED) rc = zrc;
        for (int i = 0; i < n && zrc && !rc; i++)
            if (job_live(&jobs[i]) && jobs[i].complete) jobs[i].rc = zrc;
    }
    free(done_set.v);
    /* B8 */
    struct gr_ctrl_tp_list upd = {0};
    for (int i = 0; i < n && !rc; i++) {
        struct job *j = &jobs[i];
        if (!job_live(j) || !j->complete) continue;
        gr_ctrl_tp_list_add(&upd, j->topic, j->partition);
        char b[256];
        gr_info(LOGGER, "Completed reassignment of partition %s-%d to [%s]", j->topic, j->partition,
                gr_ctrl_fmt_ids(b, sizeof b, j->trs, j->n_trs));
    }
    if (upd.n) gr_ctrl_send_update_metadata_all(sm, upd.v, upd.n);
    gr_ctrl_tp_list_free(&upd);
    return rc;
}

static struct gr_ctrl_partition *job_partition(struct gr_ctrl_sm *sm, const struct job *j) {
    return gr_ctrl_ctx_partition(sm->ctx, j->topic, j->partition);
}

/* onPartitionReassignment for jobs[0..n) (distinct partitions): each step for all of them at
 * once. Per-partition failures land in jobs[i].rc; returns 0 or GR_ECONTROLLER_MOVED. */
static int reassign_batch(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, struct job *jobs, int n) {
    for (int i = 0; i < n; i++) {
        struct job *j = &jobs[i];
        struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(sm->ctx, j->topic);
        j->rc = 0;
        j->topic = gr_ctrl_topic_partition(t, j->partition) ? t->name : NULL; /* NULL: nothing to do */
        j->ors = gr_replica_assignment_origin(j->ra, &j->n_ors);
        j->trs = gr_replica_assignment_target(j->ra, &j->n_trs);
    }
    int rc = update_current_reassignments(sm, jobs, n);
    for (int i = 0; i < n && !rc; i++) {
        struct job *j = &jobs[i];
        struct gr_ctrl_partition *p = job_live(j) ? job_partition(sm, j) : NULL;
        if (p && !p->has_state && p->state == GR_PS_NEW) {
            /* Never brought online (no assigned replica was live at its creation): Kafka cannot
             * reassign it (no leader/ISR to bump) and leaves it New until the next broker change,
             * though the replicas just added may be live (simulation seed 12609, Q4). Try now. */
            int prc = bring_new_partition_online(sm, j->topic, j->partition);
            if (prc == GR_ECONTROLLER_MOVED) rc = prc;
            else j->rc = prc;
        }
    }
    if (!rc) check_complete(sm, jobs, n);
    if (!rc) rc = phase_a(sm, jobs, n);
    if (!rc) rc = phase_b(sm, em, jobs, n);
    for (int i = 0; i < n; i++) {
        free(jobs[i].ors);
        free(jobs[i].trs);
        jobs[i].ors = jobs[i].trs = NULL;
    }
    return rc;
}

static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return (x > y) - (x < y);
}

/* reassign_batch, or one job at a time when a partition appears twice (the later one then sees
 * the earlier one's outcome, as when Kafka loops over them). */
static int run_jobs(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, struct job *jobs, int n) {
    void **ps = gr_malloc((size_t)(n ? n : 1) * sizeof *ps);
    int k = 0;
    for (int i = 0; i < n; i++) {
        void *p = gr_ctrl_ctx_partition(sm->ctx, jobs[i].topic, jobs[i].partition);
        if (p) ps[k++] = p;
    }
    if (k > 1) qsort(ps, (size_t)k, sizeof *ps, cmp_ptr);
    bool dup = false;
    for (int i = 1; i < k && !dup; i++) dup = ps[i] == ps[i - 1];
    free(ps);
    if (!dup) return reassign_batch(sm, em, jobs, n);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) rc = reassign_batch(sm, em, &jobs[i], 1);
    return rc;
}

int gr_reassign_on_partition_reassignment(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, const char *topic,
                                          int32_t partition, const struct gr_replica_assignment *ra) {
    struct job j = {.topic = topic, .partition = partition, .ra = ra};
    int rc = reassign_batch(sm, em, &j, 1);
    return rc ? rc : j.rc;
}

/* maybeTriggerPartitionReassignment's checks before a partition is reassigned: NONE or
 * UNKNOWN_TOPIC_OR_PARTITION. */
static int16_t trigger_check(struct gr_ctrl_sm *sm, const char *topic, int32_t partition) {
    if (gr_ctrl_topic_queued_for_deletion(sm->ctx, topic)) {
        gr_info(LOGGER, "Skipping reassignment of %s-%d since the topic is currently being deleted", topic, partition);
        return GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
    }
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, topic, partition);
    if (!p || p->n_replicas == 0) return GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
    return GR_KERR_NONE;
}

/* The error a triggered partition answers: NONE, NOT_CONTROLLER (batch_rc: the controller moved)
 * or UNKNOWN_SERVER_ERROR (a ZooKeeper failure for that partition). */
static int16_t job_error(const char *topic, int32_t partition, int job_rc, int batch_rc) {
    if (batch_rc == GR_ECONTROLLER_MOVED) {
        gr_info(LOGGER, "Failed completing reassignment of partition %s-%d because controller has moved to another broker",
                topic, partition);
        return GR_KERR_NOT_CONTROLLER;
    }
    if (job_rc) {
        gr_error(LOGGER, "Error completing reassignment of partition %s-%d: %s", topic, partition,
                 gr_kzk_strerror(job_rc));
        return GR_KERR_UNKNOWN_SERVER_ERROR;
    }
    return GR_KERR_NONE;
}

/* maybeBuildReassignment: target NULL = cancel (revert to ORS); false if there is nothing to
 * cancel. */
static bool build_reassignment(struct gr_ctrl_partition *p, const int32_t *target, int n_target, bool cancel,
                               struct gr_replica_assignment *out) {
    struct gr_replica_assignment cur;
    assignment_of(p, &cur);
    bool ok = true;
    if (cancel) {
        if (gr_replica_assignment_reassigning(&cur)) {
            int n_ors;
            int32_t *ors = gr_replica_assignment_origin(&cur, &n_ors);
            gr_replica_assignment_reassign_to(&cur, ors, n_ors, out);
            free(ors);
        } else {
            ok = false;
        }
    } else {
        gr_replica_assignment_reassign_to(&cur, target, n_target, out);
    }
    gr_replica_assignment_release(&cur);
    return ok;
}

/* Would ra keep an in-sync replica? A reassignment that drops every ISR member (a cancellation, or
 * a new target, while only replicas being added are in sync) would stop and delete the only
 * up-to-date copies and leave the partition without a leader; Kafka 2.7 does that, this refuses. */
static bool keeps_isr(const struct gr_ctrl_partition *p, const struct gr_replica_assignment *ra) {
    if (!p || !p->has_state || p->lai.n_isr == 0) return true;
    for (int i = 0; i < p->lai.n_isr; i++)
        if (has(ra->replicas, ra->n_replicas, p->lai.isr[i])) return true;
    return false;
}

#define ISR_LOST_MSG "The reassignment would remove every in-sync replica."

/* ======================================================================================
 * ZooKeeper-triggered reassignment, failover, broker start-up, ISR changes
 * ====================================================================================== */

int gr_reassign_process_zk(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, struct gr_ctrl_tp_list *resumed) {
    struct gr_kzk_reassignment r;
    memset(&r, 0, sizeof r);
    int rc = gr_kzk_get_reassignment(sm->kzk, true, &r); /* exists-watch re-armed either way */
    if (rc == GR_KZK_ENONODE) return 0;
    if (rc == GR_ECORRUPT) {
        gr_warn(LOGGER, "Ignoring partition reassignment due to invalid json in /admin/reassign_partitions; deleting it");
        gr_kzk_reassignment_release(&r);
        rc = gr_kzk_delete_reassignment_guarded(sm->kzk, sm->ctx->epoch_zk_version);
        if (rc == 0) gr_ctrl_events_put(em, gr_ctrl_event_new(GR_EV_ZK_PARTITION_REASSIGNMENT));
        return rc;
    }
    if (rc) return rc;
    int16_t *err = gr_calloc((size_t)(r.n ? r.n : 1), sizeof *err);
    struct gr_replica_assignment *ras = gr_calloc((size_t)(r.n ? r.n : 1), sizeof *ras);
    struct job *jobs = gr_calloc((size_t)(r.n ? r.n : 1), sizeof *jobs);
    int *job_entry = gr_malloc((size_t)(r.n ? r.n : 1) * sizeof *job_entry);
    int nj = 0;
    for (int i = 0; i < r.n; i++) {
        const struct gr_kzk_reassignment_entry *e = &r.entries[i];
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, e->topic, e->partition);
        build_reassignment(p, e->replicas, e->n_replicas, false, &ras[i]);
        err[i] = keeps_isr(p, &ras[i]) ? trigger_check(sm, e->topic, e->partition) : GR_KERR_INVALID_REPLICA_ASSIGNMENT;
        if (err[i] != GR_KERR_NONE) continue;
        jobs[nj] = (struct job){.topic = e->topic, .partition = e->partition, .ra = &ras[i]};
        job_entry[nj++] = i;
    }
    rc = run_jobs(sm, em, jobs, nj);
    for (int k = 0; k < nj; k++) {
        const struct gr_kzk_reassignment_entry *e = &r.entries[job_entry[k]];
        err[job_entry[k]] = job_error(e->topic, e->partition, jobs[k].rc, rc);
    }
    struct tp_set failed = {0};
    for (int i = 0; i < r.n && !rc; i++) {
        const struct gr_kzk_reassignment_entry *e = &r.entries[i];
        if (err[i] != GR_KERR_NONE) {
            tp_set_add(&failed, e->topic, e->partition, NULL, 0);
            gr_warn(LOGGER, "Failed reassignment through zk of partition %s-%d: %s", e->topic, e->partition,
                    gr_kerr_name(err[i]));
        } else if (resumed) {
            struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(sm->ctx, e->topic);
            if (t) gr_ctrl_tp_list_add(resumed, t->name, e->partition);
        }
    }
    tp_set_seal(&failed);
    if (!rc && failed.n) rc = maybe_remove_from_zk(sm, em, tp_set_drop, &failed);
    free(failed.v);
    for (int i = 0; i < r.n; i++) gr_replica_assignment_release(&ras[i]);
    free(ras);
    free(jobs);
    free(job_entry);
    free(err);
    gr_kzk_reassignment_release(&r);
    return rc;
}

/* maybeResumeReassignments(pred), every matching partition in one batch */
typedef bool (*resume_pred)(const struct gr_ctrl_partition *p, const char *topic, const void *arg);

static int maybe_resume(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, resume_pred pred, const void *arg) {
    if (sm->ctx->n_reassigning == 0) return 0; /* the common case costs nothing per event */
    struct gr_ctrl_tp_list l = {0};
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(sm->ctx, &cur))) {
        if (gr_ctrl_topic_queued_for_deletion(sm->ctx, t->name)) continue; /* frozen: see reassignment.h */
        for (int i = 0; i < t->n_partitions; i++)
            if (partition_reassigning(&t->partitions[i]) && pred(&t->partitions[i], t->name, arg))
                gr_ctrl_tp_list_add(&l, t->name, t->partitions[i].partition);
    }
    struct gr_replica_assignment *ras = gr_calloc((size_t)(l.n ? l.n : 1), sizeof *ras);
    struct job *jobs = gr_calloc((size_t)(l.n ? l.n : 1), sizeof *jobs);
    for (int i = 0; i < l.n; i++) {
        assignment_of(gr_ctrl_ctx_partition(sm->ctx, l.v[i].topic, l.v[i].partition), &ras[i]);
        jobs[i] = (struct job){.topic = l.v[i].topic, .partition = l.v[i].partition, .ra = &ras[i]};
    }
    int rc = l.n ? run_jobs(sm, em, jobs, l.n) : 0;
    for (int i = 0; i < l.n; i++) {
        if (jobs[i].rc && !rc)
            gr_error(LOGGER, "Error resuming reassignment of partition %s-%d: %s", l.v[i].topic, l.v[i].partition,
                     gr_kzk_strerror(jobs[i].rc));
        gr_replica_assignment_release(&ras[i]);
    }
    free(ras);
    free(jobs);
    gr_ctrl_tp_list_free(&l);
    return rc;
}

static bool not_in_list(const struct gr_ctrl_partition *p, const char *topic, const void *arg) {
    const struct gr_ctrl_tp_list *l = arg;
    for (int i = 0; i < l->n; i++)
        if (l->v[i].partition == p->partition && strcmp(l->v[i].topic, topic) == 0) return false;
    return true;
}

int gr_reassign_failover(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em) {
    struct gr_ctrl_tp_list resumed = {0};
    int rc = gr_reassign_process_zk(sm, em, &resumed);
    if (!rc) rc = maybe_resume(sm, em, not_in_list, &resumed);
    gr_ctrl_tp_list_free(&resumed);
    return rc;
}

struct id_set {
    const int32_t *ids;
    int n;
};

static bool targets_brokers(const struct gr_ctrl_partition *p, const char *topic, const void *arg) {
    (void)topic;
    const struct id_set *s = arg;
    for (int i = 0; i < p->n_replicas; i++)
        if (!has(p->removing, p->n_removing, p->replicas[i]) && has(s->ids, s->n, p->replicas[i])) return true;
    return false;
}

int gr_reassign_on_brokers_started(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, const int32_t *ids, int n) {
    struct id_set s = {ids, n};
    return maybe_resume(sm, em, targets_brokers, &s);
}

static bool cached_isr_complete(const struct gr_ctrl_partition *p, const char *topic, const void *arg) {
    (void)topic;
    (void)arg;
    if (!p->has_state) return false;
    for (int i = 0; i < p->n_replicas; i++)
        if (!has(p->removing, p->n_removing, p->replicas[i]) && !has(p->lai.isr, p->lai.n_isr, p->replicas[i]))
            return false;
    return true;
}

int gr_reassign_maybe_complete(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em) {
    return maybe_resume(sm, em, cached_isr_complete, NULL);
}

/* ======================================================================================
 * API events
 * ====================================================================================== */

struct gr_reassign_api_payload *gr_reassign_api_payload_new(int n) {
    struct gr_reassign_api_payload *pl = gr_calloc(1, sizeof *pl);
    pl->n = n;
    pl->items = gr_calloc((size_t)(n > 0 ? n : 1), sizeof *pl->items);
    return pl;
}

static void api_answer(struct gr_reassign_api_payload *pl, int16_t top) {
    if (pl->responded) return;
    pl->responded = true;
    if (pl->respond) pl->respond(pl->arg, top, pl);
}

void gr_reassign_api_payload_free(void *payload) {
    struct gr_reassign_api_payload *pl = payload;
    if (!pl) return;
    api_answer(pl, GR_KERR_NOT_CONTROLLER);
    for (int i = 0; i < pl->n; i++) {
        free(pl->items[i].topic);
        free(pl->items[i].replicas);
        free(pl->items[i].msg);
    }
    free(pl->items);
    free(pl);
}

void gr_reassign_api_preempt(struct gr_ctrl_event *ev) {
    if (ev->payload) api_answer(ev->payload, GR_KERR_NOT_CONTROLLER);
}

int gr_reassign_process_api(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, struct gr_ctrl_event *ev, bool active) {
    struct gr_reassign_api_payload *pl = ev->payload;
    if (!pl || pl->responded) return 0;
    if (!active) {
        api_answer(pl, GR_KERR_NOT_CONTROLLER);
        return 0;
    }
    struct gr_ctrl_context *ctx = sm->ctx;
    int32_t *live = gr_malloc((size_t)(ctx->n_brokers ? ctx->n_brokers : 1) * sizeof *live);
    for (int i = 0; i < ctx->n_brokers; i++) live[i] = ctx->brokers[i].id;
    struct gr_replica_assignment *ras = gr_calloc((size_t)(pl->n ? pl->n : 1), sizeof *ras);
    char *to_trigger = gr_calloc((size_t)(pl->n ? pl->n : 1), 1);
    char msg[1024];
    for (int i = 0; i < pl->n; i++) {
        struct gr_reassign_item *it = &pl->items[i];
        it->err = GR_KERR_NONE;
        if (!it->topic) {
            it->err = GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
            continue;
        }
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(ctx, it->topic, it->partition);
        if (!it->cancel) {
            struct gr_replica_assignment cur;
            assignment_of(p, &cur);
            msg[0] = 0;
            it->err = gr_reassign_validate(&cur, it->replicas, it->n_replicas, live, ctx->n_brokers, msg, sizeof msg);
            gr_replica_assignment_release(&cur);
            if (it->err != GR_KERR_NONE) {
                it->msg = gr_strdup(msg);
                continue;
            }
        }
        if (!build_reassignment(p, it->replicas, it->n_replicas, it->cancel, &ras[i])) {
            it->err = GR_KERR_NO_REASSIGNMENT_IN_PROGRESS;
            continue;
        }
        if (!keeps_isr(p, &ras[i])) {
            it->err = GR_KERR_INVALID_REPLICA_ASSIGNMENT;
            it->msg = gr_strdup(ISR_LOST_MSG);
            continue;
        }
        to_trigger[i] = 1;
    }
    free(live);
    /* the latest reassignment wins: drop these partitions from a ZooKeeper reassignment */
    struct tp_set requested = {0};
    for (int i = 0; i < pl->n; i++)
        if (pl->items[i].err == GR_KERR_NONE && pl->items[i].topic)
            tp_set_add(&requested, pl->items[i].topic, pl->items[i].partition, NULL, 0);
    tp_set_seal(&requested);
    int rc = maybe_remove_from_zk(sm, em, tp_set_drop, &requested);
    free(requested.v);
    struct job *jobs = gr_calloc((size_t)(pl->n ? pl->n : 1), sizeof *jobs);
    int *job_item = gr_malloc((size_t)(pl->n ? pl->n : 1) * sizeof *job_item);
    int nj = 0;
    for (int i = 0; i < pl->n && !rc; i++) {
        if (!to_trigger[i]) continue;
        to_trigger[i] = 0;
        struct gr_reassign_item *it = &pl->items[i];
        it->err = trigger_check(sm, it->topic, it->partition);
        if (it->err != GR_KERR_NONE) {
            if (!it->msg) it->msg = gr_strdup("The partition does not exist.");
            continue;
        }
        jobs[nj] = (struct job){.topic = it->topic, .partition = it->partition, .ra = &ras[i]};
        job_item[nj++] = i;
    }
    if (!rc) rc = run_jobs(sm, em, jobs, nj);
    for (int k = 0; k < nj; k++) {
        struct gr_reassign_item *it = &pl->items[job_item[k]];
        it->err = job_error(it->topic, it->partition, jobs[k].rc, rc);
    }
    free(jobs);
    free(job_item);
    /* a ZooKeeper failure stopped the loop: the items not reached were not reassigned */
    for (int i = 0; i < pl->n; i++) {
        if (!to_trigger[i]) continue;
        pl->items[i].err = GR_KERR_UNKNOWN_SERVER_ERROR;
        if (!pl->items[i].msg) pl->items[i].msg = gr_strdup("The reassignment was not started (ZooKeeper error).");
    }
    for (int i = 0; i < pl->n; i++) gr_replica_assignment_release(&ras[i]);
    free(ras);
    free(to_trigger);
    if (rc == GR_ECONTROLLER_MOVED) api_answer(pl, GR_KERR_NOT_CONTROLLER);
    else api_answer(pl, GR_KERR_NONE);
    return rc;
}

struct gr_reassign_list_payload *gr_reassign_list_payload_new(void) { return gr_calloc(1, sizeof(struct gr_reassign_list_payload)); }

static void list_answer(struct gr_reassign_list_payload *pl, int16_t top) {
    if (pl->responded) return;
    pl->responded = true;
    if (pl->respond) pl->respond(pl->arg, top, pl);
}

void gr_reassign_list_payload_free(void *payload) {
    struct gr_reassign_list_payload *pl = payload;
    if (!pl) return;
    list_answer(pl, GR_KERR_NOT_CONTROLLER);
    for (int i = 0; i < pl->n_req; i++) free(pl->req[i].topic);
    free(pl->req);
    for (int i = 0; i < pl->n_out; i++) {
        free(pl->out[i].topic);
        gr_replica_assignment_release(&pl->out[i].a);
    }
    free(pl->out);
    free(pl);
}

void gr_reassign_list_preempt(struct gr_ctrl_event *ev) {
    if (ev->payload) list_answer(ev->payload, GR_KERR_NOT_CONTROLLER);
}

/* Appends a listing (duplicates are dropped after sorting, in gr_reassign_process_list). */
static void list_add(struct gr_reassign_list_payload *pl, int *cap, const char *topic, const struct gr_ctrl_partition *p) {
    if (pl->n_out == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        pl->out = gr_realloc(pl->out, (size_t)*cap * sizeof *pl->out);
    }
    struct gr_reassign_listing *o = &pl->out[pl->n_out++];
    o->topic = gr_strdup(topic);
    o->partition = p->partition;
    assignment_of(p, &o->a);
}

static int cmp_listing(const void *a, const void *b) {
    const struct gr_reassign_listing *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

int gr_reassign_process_list(struct gr_ctrl_sm *sm, struct gr_ctrl_event *ev, bool active) {
    struct gr_reassign_list_payload *pl = ev->payload;
    if (!pl || pl->responded) return 0;
    if (!active) {
        list_answer(pl, GR_KERR_NOT_CONTROLLER);
        return 0;
    }
    int cap = 0;
    if (pl->all) {
        size_t cur = 0;
        struct gr_ctrl_topic *t;
        while ((t = gr_ctrl_ctx_next_topic(sm->ctx, &cur)))
            for (int i = 0; i < t->n_partitions; i++)
                if (partition_reassigning(&t->partitions[i])) list_add(pl, &cap, t->name, &t->partitions[i]);
    } else {
        for (int i = 0; i < pl->n_req; i++) {
            struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, pl->req[i].topic, pl->req[i].partition);
            if (p && partition_reassigning(p)) list_add(pl, &cap, pl->req[i].topic, p);
        }
    }
    if (pl->n_out > 1) qsort(pl->out, (size_t)pl->n_out, sizeof *pl->out, cmp_listing);
    int k = 0; /* a partition asked for twice is listed once */
    for (int i = 0; i < pl->n_out; i++) {
        if (k > 0 && cmp_listing(&pl->out[k - 1], &pl->out[i]) == 0) {
            free(pl->out[i].topic);
            gr_replica_assignment_release(&pl->out[i].a);
            continue;
        }
        pl->out[k++] = pl->out[i];
    }
    pl->n_out = k;
    list_answer(pl, GR_KERR_NONE);
    return 0;
}
