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
    int *states = NULL;
    if (p->replica_states) {
        states = gr_calloc((size_t)(ra->n_replicas ? ra->n_replicas : 1), sizeof *states);
        for (int i = 0; i < ra->n_replicas; i++) {
            int j = gr_ctrl_replica_index(p, ra->replicas[i]);
            if (j >= 0) states[i] = p->replica_states[j];
        }
    }
    free(p->replica_states);
    p->replica_states = states;
    free(p->replicas);
    free(p->adding);
    free(p->removing);
    p->n_replicas = ra->n_replicas;
    p->replicas = dup_ids(ra->replicas, ra->n_replicas);
    p->n_adding = ra->n_adding;
    p->adding = dup_ids(ra->adding, ra->n_adding);
    p->n_removing = ra->n_removing;
    p->removing = dup_ids(ra->removing, ra->n_removing);
}

/* updateReplicaAssignmentForPartition: writes /brokers/topics/T (guarded, any version) with the
 * context's assignment of every partition, partition `partition` replaced by ra. */
static int write_topic_assignment(struct gr_ctrl_sm *sm, struct gr_ctrl_topic *t, int32_t partition,
                                  const struct gr_replica_assignment *ra) {
    struct gr_kzk_topic_assignment a;
    memset(&a, 0, sizeof a);
    a.topic = t->name;
    a.topic_id = t->topic_id;
    a.n_partitions = t->n_partitions;
    a.partitions = gr_calloc((size_t)(t->n_partitions ? t->n_partitions : 1), sizeof *a.partitions);
    for (int i = 0; i < t->n_partitions; i++) {
        const struct gr_ctrl_partition *p = &t->partitions[i];
        struct gr_kzk_partition_assignment *pa = &a.partitions[i];
        pa->partition = p->partition;
        if (p->partition == partition) {
            pa->n_replicas = ra->n_replicas;
            pa->replicas = ra->replicas;
            pa->n_adding = ra->n_adding;
            pa->adding = ra->adding;
            pa->n_removing = ra->n_removing;
            pa->removing = ra->removing;
        } else {
            pa->n_replicas = p->n_replicas;
            pa->replicas = p->replicas;
            pa->n_adding = p->n_adding;
            pa->adding = p->adding;
            pa->n_removing = p->n_removing;
            pa->removing = p->removing;
        }
    }
    int rc = gr_kzk_set_topic_assignment_guarded(sm->kzk, sm->ctx->epoch_zk_version, t->name, &a, GR_ZANY_VERSION);
    free(a.partitions); /* the arrays are borrowed */
    char buf[256];
    if (rc == 0)
        gr_info(LOGGER, "Successfully updated assignment of partition %s-%d to replicas [%s]", t->name, partition,
                gr_ctrl_fmt_ids(buf, sizeof buf, ra->replicas, ra->n_replicas));
    else if (rc != GR_ECONTROLLER_MOVED)
        gr_error(LOGGER, "Failed to update assignment of partition %s-%d: %s", t->name, partition, gr_kzk_strerror(rc));
    return rc;
}

/* Reads the state znode and writes it back conditionally with `adjust` applied (leader epoch +1
 * always, our controller epoch), retrying BADVERSION. *out gets the new state (also cached).
 * Returns 0, 1 (no state / written by a newer controller: nothing done), GR_ECONTROLLER_MOVED or
 * a ZooKeeper error. remove (may be NULL) are replicas to drop from the ISR (never emptying it;
 * a removed leader becomes -1). */
static int bump_leader_epoch(struct gr_ctrl_sm *sm, const char *topic, int32_t partition, const int32_t *remove,
                             int n_remove, struct gr_kzk_leader_and_isr *out) {
    struct gr_ctrl_context *ctx = sm->ctx;
    struct gr_kzk_tp tp = {.topic = (char *)topic, .partition = partition};
    for (int attempt = 0; attempt < 100; attempt++) {
        struct gr_kzk_state_result cur;
        memset(&cur, 0, sizeof cur);
        int rc = gr_kzk_get_partition_states(sm->kzk, &tp, 1, &cur);
        if (rc == 0) rc = cur.rc;
        if (rc == GR_KZK_ENONODE || rc == GR_ECORRUPT) {
            SC_LOG(GR_LOG_ERROR, sm, "Cannot update leader epoch for partition %s-%d as leaderAndIsr path is empty",
                   topic, partition);
            gr_kzk_leader_and_isr_release(&cur.lai);
            return 1;
        }
        if (rc) {
            gr_kzk_leader_and_isr_release(&cur.lai);
            return rc;
        }
        if (cur.lai.controller_epoch > ctx->epoch) {
            SC_LOG(GR_LOG_ERROR, sm,
                   "Leader and isr path of %s-%d written by another controller with epoch %d. Aborting state change by "
                   "this controller",
                   topic, partition, cur.lai.controller_epoch);
            gr_kzk_leader_and_isr_release(&cur.lai);
            return 1;
        }
        struct gr_kzk_leader_and_isr n = cur.lai;
        n.isr = dup_ids(cur.lai.isr, cur.lai.n_isr);
        for (int i = 0; i < n_remove; i++) {
            if (!has(n.isr, n.n_isr, remove[i])) continue;
            if (n.leader == remove[i]) n.leader = GR_LEADER_NONE;
            if (n.n_isr > 1) {
                int k = 0;
                for (int j = 0; j < n.n_isr; j++)
                    if (n.isr[j] != remove[i]) n.isr[k++] = n.isr[j];
                n.n_isr = k;
            }
        }
        n.leader_epoch = cur.lai.leader_epoch + 1;
        n.controller_epoch = ctx->epoch;
        gr_kzk_leader_and_isr_release(&cur.lai);
        struct gr_kzk_state_write w = {.topic = topic, .partition = partition, .lai = &n};
        struct gr_kzk_write_result res = {0};
        rc = gr_kzk_update_partition_states(sm->kzk, ctx->epoch_zk_version, &w, 1, &res);
        if (rc == 0) rc = res.rc;
        if (rc == GR_KZK_EBADVERSION) {
            free(n.isr);
            continue;
        }
        if (rc) {
            free(n.isr);
            return rc;
        }
        n.zk_version = res.zk_version;
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(ctx, topic, partition);
        if (p) gr_ctrl_partition_set_state(p, &n);
        *out = n; /* takes n.isr */
        gr_info(LOGGER, "Updated leader epoch for partition %s-%d to %d, zkVersion=%d", topic, partition, n.leader_epoch,
                n.zk_version);
        return 0;
    }
    return GR_KZK_EBADVERSION;
}

/* updateLeaderEpochAndSendRequest: epoch + 1, LeaderAndIsr to `plain` and `fresh` (IsNew). */
static int update_leader_epoch_and_send(struct gr_ctrl_sm *sm, const char *topic, int32_t partition,
                                        const int32_t *plain, int n_plain, const int32_t *fresh, int n_fresh) {
    struct gr_kzk_leader_and_isr l;
    memset(&l, 0, sizeof l);
    int rc = bump_leader_epoch(sm, topic, partition, NULL, 0, &l);
    if (rc == 1) {
        SC_LOG(GR_LOG_ERROR, sm,
               "Failed to send LeaderAndIsr request with new replica assignment to leader for partition being "
               "reassigned %s-%d",
               topic, partition);
        return 0;
    }
    if (rc) return rc;
    gr_ctrl_batch_begin(sm->batch);
    gr_ctrl_batch_add_leader_and_isr(sm->batch, plain, n_plain, topic, partition, &l, false);
    if (n_fresh) gr_ctrl_batch_add_leader_and_isr(sm->batch, fresh, n_fresh, topic, partition, &l, true);
    gr_ctrl_batch_send(sm->batch);
    SC_LOG(GR_LOG_INFO, sm,
           "Sent LeaderAndIsr request (leader=%d, leaderEpoch=%d) with new replica assignment to leader %d for "
           "partition being reassigned %s-%d",
           l.leader, l.leader_epoch, l.leader, topic, partition);
    gr_kzk_leader_and_isr_release(&l);
    return 0;
}

/* stopRemovedReplicasOfReassignedPartition, for replicas already gone from the in-memory
 * assignment: out of the ISR with the leader epoch + 1 (LeaderAndIsr to the remaining replicas),
 * then StopReplica(delete=true) carrying that new epoch.
 *
 * The epoch is bumped even when no removed replica is in the ISR. A broker ignores a StopReplica
 * whose leader epoch is not above the one it holds (FENCED_LEADER_EPOCH), and a removed replica has
 * seen the current epoch (phase A's LeaderAndIsr): Kafka's replica state machine path
 * (OfflineReplica -> ReplicaDeletionStarted) bumps only when the replica is in the ISR, so a
 * cancelled reassignment's not-yet-in-sync replicas are never deleted there (stray replicas). For
 * the same reason this does not go through the replica state machine, which also keeps states only
 * for assigned replicas. */
static int stop_removed_replicas(struct gr_ctrl_sm *sm, const char *topic, int32_t partition, const int32_t *ids,
                                 int n) {
    if (n <= 0) return 0;
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, topic, partition);
    if (!p) return 0;
    struct gr_kzk_leader_and_isr l;
    memset(&l, 0, sizeof l);
    int rc = bump_leader_epoch(sm, topic, partition, ids, n, &l);
    if (rc && rc != 1) return rc;
    bool wrote = rc == 0;
    rc = 0;
    p = gr_ctrl_ctx_partition(sm->ctx, topic, partition);
    gr_ctrl_batch_begin(sm->batch);
    if (wrote && p) {
        char isr[256];
        SC_LOG(GR_LOG_INFO, sm,
               "Partition %s-%d state changed to (Leader:%d,ISR:%s,LeaderEpoch:%d,ControllerEpoch:%d) after removing "
               "replicas %s from the ISR as part of reassignment",
               topic, partition, l.leader, gr_ctrl_fmt_ids(isr, sizeof isr, l.isr, l.n_isr), l.leader_epoch,
               l.controller_epoch, gr_ctrl_fmt_ids((char[128]){0}, 128, ids, n));
        gr_ctrl_batch_add_leader_and_isr(sm->batch, p->replicas, p->n_replicas, topic, partition, &l, false);
    }
    gr_ctrl_batch_add_stop_replica(sm->batch, ids, n, topic, partition, true);
    gr_ctrl_batch_send(sm->batch);
    gr_kzk_leader_and_isr_release(&l);
    return rc;
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

struct tp_replicas {
    const char *topic;
    int32_t partition;
    const int32_t *replicas;
    int n;
};

static bool drop_completed(const struct gr_kzk_reassignment_entry *e, const void *arg) {
    const struct tp_replicas *x = arg;
    return strcmp(e->topic, x->topic) == 0 && e->partition == x->partition &&
           ids_equal(e->replicas, e->n_replicas, x->replicas, x->n);
}

/* isReassignmentComplete: not reassigning, or TRS subset of the ISR in ZooKeeper (reread). */
static int reassignment_complete(struct gr_ctrl_sm *sm, const char *topic, int32_t partition,
                                 const struct gr_replica_assignment *ra, bool *complete) {
    *complete = false;
    if (!gr_replica_assignment_reassigning(ra)) {
        *complete = true;
        return 0;
    }
    struct gr_kzk_tp tp = {.topic = (char *)topic, .partition = partition};
    struct gr_kzk_state_result cur;
    memset(&cur, 0, sizeof cur);
    int rc = gr_kzk_get_partition_states(sm->kzk, &tp, 1, &cur);
    if (rc == 0 && cur.rc == 0) {
        int n_trs;
        int32_t *trs = gr_replica_assignment_target(ra, &n_trs);
        bool all = true;
        for (int i = 0; i < n_trs; i++)
            if (!has(cur.lai.isr, cur.lai.n_isr, trs[i])) all = false;
        *complete = all;
        free(trs);
    }
    gr_kzk_leader_and_isr_release(&cur.lai);
    return rc;
}

/* ======================================================================================
 * onPartitionReassignment
 * ====================================================================================== */

/* updateCurrentReassignment (U1-U3). */
static int update_current_reassignment(struct gr_ctrl_sm *sm, struct gr_ctrl_topic *t, struct gr_ctrl_partition *p,
                                       const struct gr_replica_assignment *ra) {
    struct gr_replica_assignment cur;
    assignment_of(p, &cur);
    int rc = 0;
    if (!gr_replica_assignment_equal(&cur, ra)) {
        char a[256], b[256];
        gr_debug(LOGGER, "Updating assignment of partition %s-%d from [%s] to [%s]", t->name, p->partition,
                 gr_ctrl_fmt_ids(a, sizeof a, cur.replicas, cur.n_replicas),
                 gr_ctrl_fmt_ids(b, sizeof b, ra->replicas, ra->n_replicas));
        rc = write_topic_assignment(sm, t, p->partition, ra); /* U1 */
        if (rc == 0) {
            set_partition_assignment(sm->ctx, p, ra); /* U2 */
            int n_unneeded;
            int32_t *unneeded = diff(cur.replicas, cur.n_replicas, ra->replicas, ra->n_replicas, &n_unneeded);
            if (n_unneeded) rc = stop_removed_replicas(sm, t->name, p->partition, unneeded, n_unneeded); /* U3 */
            free(unneeded);
        }
    }
    gr_replica_assignment_release(&cur);
    return rc;
}

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

int gr_reassign_on_partition_reassignment(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, const char *topic,
                                          int32_t partition, const struct gr_replica_assignment *ra) {
    struct gr_ctrl_context *ctx = sm->ctx;
    struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, topic);
    struct gr_ctrl_partition *p = gr_ctrl_topic_partition(t, partition);
    if (!p) return 0;
    topic = t->name; /* stable for the rest of the call */
    int rc = update_current_reassignment(sm, t, p, ra);
    if (rc) return rc;
    p = gr_ctrl_topic_partition(t, partition);
    if (p && !p->has_state && p->state == GR_PS_NEW) {
        /* Never brought online (no assigned replica was live at its creation): Kafka cannot
         * reassign it (no leader/ISR to bump) and leaves it New until the next broker change,
         * though the replicas just added may be live (simulation seed 12609, Q4). Try now. */
        rc = bring_new_partition_online(sm, topic, partition);
        if (rc) return rc;
        p = gr_ctrl_topic_partition(t, partition);
    }
    bool complete;
    rc = reassignment_complete(sm, topic, partition, ra, &complete);
    if (rc) return rc;

    int n_ors, n_trs;
    int32_t *ors = gr_replica_assignment_origin(ra, &n_ors);
    int32_t *trs = gr_replica_assignment_target(ra, &n_trs);
    struct gr_ctrl_replica_list adding = {0};
    for (int i = 0; i < ra->n_adding; i++) gr_ctrl_replica_list_add(&adding, topic, partition, ra->adding[i]);

    if (!complete) {
        /* A1: epoch + 1, LeaderAndIsr to ORS and AR (IsNew); A2: AR -> NewReplica */
        rc = update_leader_epoch_and_send(sm, topic, partition, ors, n_ors, ra->adding, ra->n_adding);
        for (int i = 0; !rc && i < adding.n; i++) rc = gr_rsm_handle_state_changes(sm, &adding.v[i], 1, GR_RS_NEW);
    } else {
        /* B1 */
        rc = gr_rsm_handle_state_changes(sm, adding.v, adding.n, GR_RS_ONLINE);
        struct gr_replica_assignment done = {0};
        gr_replica_assignment_set(&done, trs, n_trs, NULL, 0, NULL, 0);
        if (!rc) {
            /* B2 */
            set_partition_assignment(sm->ctx, p, &done);
            /* B3 */
            int32_t leader = p->has_state ? p->lai.leader : GR_LEADER_NONE;
            if (!has(trs, n_trs, leader) || !gr_ctrl_replica_online(ctx, p, leader, false)) {
                gr_info(LOGGER, "Leader %d for partition %s-%d being reassigned is %s. Re-electing leader", leader,
                        topic, partition, has(trs, n_trs, leader) ? "in the new list of replicas but is dead"
                                                                  : "not in the new list of replicas");
                struct gr_psm_strategy st = {.kind = GR_ELECT_REASSIGN};
                struct gr_kzk_tp tp = {.topic = (char *)topic, .partition = partition};
                rc = gr_psm_handle_state_changes(sm, &tp, 1, GR_PS_ONLINE, &st, NULL);
            } else {
                gr_info(LOGGER, "Leader %d for partition %s-%d being reassigned is already in the new list of replicas "
                        "and is alive", leader, topic, partition);
                rc = update_leader_epoch_and_send(sm, topic, partition, trs, n_trs, NULL, 0);
            }
        }
        /* B4, B5 */
        if (!rc) rc = stop_removed_replicas(sm, topic, partition, ra->removing, ra->n_removing);
        /* B6 */
        if (!rc) rc = write_topic_assignment(sm, t, partition, &done);
        /* B7 */
        if (!rc) {
            struct tp_replicas x = {.topic = topic, .partition = partition, .replicas = trs, .n = n_trs};
            rc = maybe_remove_from_zk(sm, em, drop_completed, &x);
        }
        /* B8 */
        if (!rc) {
            struct gr_kzk_tp tp = {.topic = (char *)topic, .partition = partition};
            gr_ctrl_send_update_metadata_all(sm, &tp, 1);
            char b[256];
            gr_info(LOGGER, "Completed reassignment of partition %s-%d to [%s]", topic, partition,
                    gr_ctrl_fmt_ids(b, sizeof b, trs, n_trs));
        }
        gr_replica_assignment_release(&done);
    }
    gr_ctrl_replica_list_free(&adding);
    free(ors);
    free(trs);
    return rc;
}

/* maybeTriggerPartitionReassignment for one partition: the error it answers. *rc gets a
 * controller-moved / ZooKeeper failure. */
static int16_t maybe_trigger(struct gr_ctrl_sm *sm, struct gr_ctrl_events *em, const char *topic, int32_t partition,
                             const struct gr_replica_assignment *ra, int *rc) {
    *rc = 0;
    if (gr_ctrl_topic_queued_for_deletion(sm->ctx, topic)) {
        gr_info(LOGGER, "Skipping reassignment of %s-%d since the topic is currently being deleted", topic, partition);
        return GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
    }
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, topic, partition);
    if (!p || p->n_replicas == 0) return GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
    *rc = gr_reassign_on_partition_reassignment(sm, em, topic, partition, ra);
    if (*rc == GR_ECONTROLLER_MOVED) {
        gr_info(LOGGER, "Failed completing reassignment of partition %s-%d because controller has moved to another broker",
                topic, partition);
        return GR_KERR_NOT_CONTROLLER;
    }
    if (*rc) {
        gr_error(LOGGER, "Error completing reassignment of partition %s-%d: %s", topic, partition,
                 gr_kzk_strerror(*rc));
        *rc = 0;
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

struct failed_set {
    const struct gr_kzk_reassignment *r;
    const char *failed; /* per entry */
};

static bool drop_failed(const struct gr_kzk_reassignment_entry *e, const void *arg) {
    const struct failed_set *f = arg;
    for (int i = 0; i < f->r->n; i++)
        if (f->failed[i] && strcmp(f->r->entries[i].topic, e->topic) == 0 && f->r->entries[i].partition == e->partition)
            return true;
    return false;
}

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
    char *failed = gr_calloc((size_t)(r.n ? r.n : 1), 1);
    int n_failed = 0;
    for (int i = 0; i < r.n && !rc; i++) {
        const struct gr_kzk_reassignment_entry *e = &r.entries[i];
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, e->topic, e->partition);
        struct gr_replica_assignment ra;
        build_reassignment(p, e->replicas, e->n_replicas, false, &ra);
        int16_t err = keeps_isr(p, &ra) ? maybe_trigger(sm, em, e->topic, e->partition, &ra, &rc)
                                        : GR_KERR_INVALID_REPLICA_ASSIGNMENT;
        gr_replica_assignment_release(&ra);
        if (rc) break;
        if (err != GR_KERR_NONE) {
            failed[i] = 1;
            n_failed++;
            gr_warn(LOGGER, "Failed reassignment through zk of partition %s-%d: %s", e->topic, e->partition,
                    gr_kerr_name(err));
        } else if (resumed) {
            struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(sm->ctx, e->topic);
            if (t) gr_ctrl_tp_list_add(resumed, t->name, e->partition);
        }
    }
    if (!rc && n_failed) {
        struct failed_set f = {.r = &r, .failed = failed};
        rc = maybe_remove_from_zk(sm, em, drop_failed, &f);
    }
    free(failed);
    gr_kzk_reassignment_release(&r);
    return rc;
}

/* maybeResumeReassignments(pred) */
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
    int rc = 0;
    for (int i = 0; i < l.n && !rc; i++) {
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, l.v[i].topic, l.v[i].partition);
        if (!p) continue;
        struct gr_replica_assignment ra;
        assignment_of(p, &ra);
        rc = gr_reassign_on_partition_reassignment(sm, em, l.v[i].topic, l.v[i].partition, &ra);
        gr_replica_assignment_release(&ra);
        if (rc && rc != GR_ECONTROLLER_MOVED) {
            gr_error(LOGGER, "Error resuming reassignment of partition %s-%d: %s", l.v[i].topic, l.v[i].partition,
                     gr_kzk_strerror(rc));
            rc = 0;
        }
    }
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

static bool drop_requested(const struct gr_kzk_reassignment_entry *e, const void *arg) {
    const struct gr_reassign_api_payload *pl = arg;
    for (int i = 0; i < pl->n; i++)
        if (pl->items[i].err == GR_KERR_NONE && pl->items[i].topic && strcmp(pl->items[i].topic, e->topic) == 0 &&
            pl->items[i].partition == e->partition)
            return true;
    return false;
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
    int rc = maybe_remove_from_zk(sm, em, drop_requested, pl);
    for (int i = 0; i < pl->n && !rc; i++) {
        if (!to_trigger[i]) continue;
        to_trigger[i] = 0;
        struct gr_reassign_item *it = &pl->items[i];
        it->err = maybe_trigger(sm, em, it->topic, it->partition, &ras[i], &rc);
        if (it->err == GR_KERR_UNKNOWN_TOPIC_OR_PARTITION && !it->msg) it->msg = gr_strdup("The partition does not exist.");
    }
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

static void list_add(struct gr_reassign_list_payload *pl, int *cap, const char *topic, const struct gr_ctrl_partition *p) {
    for (int i = 0; i < pl->n_out; i++)
        if (pl->out[i].partition == p->partition && strcmp(pl->out[i].topic, topic) == 0) return;
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
    list_answer(pl, GR_KERR_NONE);
    return 0;
}
