/* Controller flows: see flows.h. */
#include "controller/flows.h"


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/uuid.h"
#include "common/util.h"
#include "controller/event_manager.h"
#include "controller/partition_sm.h"
#include "controller/replica_sm.h"
#include "controller/request_batch.h"
#include "controller/response.h"
#include "controller/sender.h"
#include "controller/states.h"
#include "protocol/codec.h"

#define LOGGER "kafka.controller.KafkaController"

/* ---- UpdateMetadata ---- */

void gr_ctrl_send_update_metadata(struct gr_ctrl_sm *sm, const int32_t *brokers, int n_brokers,
                                  const struct gr_kzk_tp *tps, int n_tps) {
    gr_ctrl_batch_begin(sm->batch);
    gr_ctrl_batch_add_update_metadata(sm->batch, brokers, n_brokers, tps, n_tps);
    gr_ctrl_batch_send(sm->batch);
}

static int32_t *registered_ids(struct gr_ctrl_context *ctx, int *n) {
    int32_t *ids = gr_malloc((size_t)(ctx->n_brokers ? ctx->n_brokers : 1) * sizeof *ids);
    for (int i = 0; i < ctx->n_brokers; i++) ids[i] = ctx->brokers[i].id;
    *n = ctx->n_brokers;
    return ids;
}

void gr_ctrl_send_update_metadata_all(struct gr_ctrl_sm *sm, const struct gr_kzk_tp *tps, int n_tps) {
    int n;
    int32_t *ids = registered_ids(sm->ctx, &n);
    gr_ctrl_send_update_metadata(sm, ids, n, tps, n_tps);
    free(ids);
}

/* ---- new partitions ---- */

int gr_ctrl_on_new_partition_creation(struct gr_ctrl_sm *sm, const struct gr_kzk_tp *tps, int n) {
    if (n <= 0) return 0;
    gr_info(LOGGER, "New partition creation callback for %d partitions (first %s-%d)", n, tps[0].topic,
            tps[0].partition);
    struct gr_ctrl_replica_list reps = {0};
    struct gr_psm_strategy st = {.kind = GR_ELECT_OFFLINE, .allow_unclean = false};
    int rc = gr_psm_handle_state_changes(sm, tps, n, GR_PS_NEW, NULL, NULL);
    if (!rc) {
        gr_rsm_replicas_for_partitions(sm, tps, n, &reps);
        rc = gr_rsm_handle_state_changes(sm, reps.v, reps.n, GR_RS_NEW);
    }
    if (!rc) rc = gr_psm_handle_state_changes(sm, tps, n, GR_PS_ONLINE, &st, NULL);
    if (!rc) {
        reps.n = 0; /* the assignment may have changed: recompute */
        gr_rsm_replicas_for_partitions(sm, tps, n, &reps);
        rc = gr_rsm_handle_state_changes(sm, reps.v, reps.n, GR_RS_ONLINE);
    }
    gr_ctrl_replica_list_free(&reps);
    return rc;
}

/* ---- brokers ---- */

static bool in(const int32_t *v, int n, int32_t x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return true;
    return false;
}

int gr_ctrl_on_broker_startup(struct gr_ctrl_sm *sm, const int32_t *ids, int n) {
    struct gr_ctrl_context *ctx = sm->ctx;
    char buf[512];
    gr_info(LOGGER, "New broker startup callback for %s", gr_ctrl_fmt_ids(buf, sizeof buf, ids, n));
    gr_ctrl_clear_offline_dirs(ctx, ids, n); /* replicasOnOfflineDirs.remove(new brokers) */
    /* existing brokers learn about the new ones (no partition states) */
    int32_t *existing = gr_malloc((size_t)(ctx->n_brokers ? ctx->n_brokers : 1) * sizeof *existing);
    int n_existing = 0;
    for (int i = 0; i < ctx->n_brokers; i++)
        if (!in(ids, n, ctx->brokers[i].id)) existing[n_existing++] = ctx->brokers[i].id;
    gr_ctrl_send_update_metadata(sm, existing, n_existing, NULL, 0);
    free(existing);
    /* the new brokers get every partition with a leader */
    gr_ctrl_batch_begin(sm->batch);
    gr_ctrl_batch_add_update_metadata_all(sm->batch, ids, n);
    gr_ctrl_batch_send(sm->batch);

    struct gr_ctrl_replica_list reps = {0};
    gr_rsm_replicas_on_brokers(sm, ids, n, &reps);
    int rc = gr_rsm_handle_state_changes(sm, reps.v, reps.n, GR_RS_ONLINE);
    gr_ctrl_replica_list_free(&reps);
    if (!rc) rc = gr_psm_trigger_online(sm, NULL);
    if (!rc && sm->hooks.brokers_started) rc = sm->hooks.brokers_started(sm->hooks.arg, ids, n);
    return rc;
}

int gr_ctrl_on_broker_failure(struct gr_ctrl_sm *sm, const int32_t *ids, int n) {
    struct gr_ctrl_context *ctx = sm->ctx;
    char buf[512];
    gr_info(LOGGER, "Broker failure callback for %s", gr_ctrl_fmt_ids(buf, sizeof buf, ids, n));
    int k = 0;
    for (int i = 0; i < ctx->n_shutting_down; i++) {
        if (in(ids, n, ctx->shutting_down[i]))
            gr_info(LOGGER, "Removed %d from list of shutting down brokers.", ctx->shutting_down[i]);
        else ctx->shutting_down[k++] = ctx->shutting_down[i];
    }
    ctx->n_shutting_down = k;
    struct gr_ctrl_replica_list reps = {0};
    gr_rsm_replicas_on_brokers(sm, ids, n, &reps);
    int rc = gr_ctrl_on_replicas_become_offline(sm, reps.v, reps.n);
    gr_ctrl_replica_list_free(&reps);
    if (!rc && sm->hooks.brokers_failed) rc = sm->hooks.brokers_failed(sm->hooks.arg, ids, n);
    return rc;
}

/* Partitions of r (deduplicated) that have leadership info, a topic not queued for deletion and
 * a leader that is not online (dead broker, offline dir): Kafka's partitionsWithOfflineLeader,
 * restricted to the partitions these replicas belong to -- a partition whose leader was already
 * offline is Offline already and retried by triggerOnlinePartitionStateChange. */
/* (topic, partition) order (by name: the order must not depend on where things were allocated). */
static int cmp_tp_ptr(const void *a, const void *b) {
    const struct gr_kzk_tp *x = a, *y = b;
    int c = x->topic == y->topic ? 0 : strcmp(x->topic, y->topic);
    if (c) return c;
    return x->partition < y->partition ? -1 : x->partition > y->partition;
}

static void partitions_with_offline_leader(struct gr_ctrl_context *ctx, const struct gr_ctrl_replica *r, int n,
                                           struct gr_ctrl_tp_list *out) {
    for (int i = 0; i < n; i++) {
        struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, r[i].topic);
        struct gr_ctrl_partition *p = gr_ctrl_topic_partition(t, r[i].partition);
        if (!p || !p->has_state || gr_ctrl_topic_queued_for_deletion(ctx, t->name)) continue;
        if (!gr_ctrl_replica_online(ctx, p, p->lai.leader, false)) gr_ctrl_tp_list_add(out, t->name, p->partition);
    }
    /* several offline replicas of one partition: sort and keep one (n log n, not n^2) */
    if (out->n < 2) return;
    qsort(out->v, (size_t)out->n, sizeof *out->v, cmp_tp_ptr);
    int k = 1;
    for (int i = 1; i < out->n; i++)
        if (cmp_tp_ptr(&out->v[k - 1], &out->v[i]) != 0) out->v[k++] = out->v[i];
    out->n = k;
}

/* How long a step waits for the elections' requests to be answered before its next writes. */
#define ELECTIONS_APPLIED_WAIT_MS 1000

/* Gregor's: after a step's elections, waits (at most ELECTIONS_APPLIED_WAIT_MS) until the live
 * brokers have answered every request sent so far -- the elections' LeaderAndIsr and
 * UpdateMetadata -- before the step goes on to its ISR shrinks and, in a failover, the
 * LeaderAndIsr of every online replica. Those are most of the step's work (at 100k partitions
 * 67k ISR shrinks written, LeaderAndIsr and UpdateMetadata of all 100k built, sent and decoded),
 * and on a shared machine they took the CPU from the brokers applying the new leaders, the one
 * part clients wait for. Nothing changes order or content: the requests each broker gets, and
 * when the rest is written, only later. A registered broker that does not answer (cut off, or
 * stopped before its session expires) costs the whole wait in each such step (two when a
 * BrokerChange has both bounced and dead brokers). No wait without a sender that can (the
 * simulation, tests). */
static void wait_elections_applied(struct gr_ctrl_sm *sm) {
    if (!sm->sender || !sm->sender->wait_idle) return;
    int64_t t0 = gr_mono_ms();
    bool idle = sm->sender->wait_idle(sm->sender_ctx, ELECTIONS_APPLIED_WAIT_MS);
    int64_t took = gr_mono_ms() - t0;
    if (!idle)
        gr_info(LOGGER, "The elections' requests were not all answered within %d ms; going on", ELECTIONS_APPLIED_WAIT_MS);
    else if (took >= 10)
        gr_info(LOGGER, "The elections' requests were answered after %lld ms", (long long)took);
}

int gr_ctrl_on_replicas_become_offline(struct gr_ctrl_sm *sm, const struct gr_ctrl_replica *r, int n) {
    struct gr_ctrl_context *ctx = sm->ctx;
    struct gr_ctrl_replica_list for_deletion = {0}, not_for_deletion = {0};
    for (int i = 0; i < n; i++) {
        if (gr_ctrl_topic_queued_for_deletion(ctx, r[i].topic))
            gr_ctrl_replica_list_add(&for_deletion, r[i].topic, r[i].partition, r[i].replica);
        else gr_ctrl_replica_list_add(&not_for_deletion, r[i].topic, r[i].partition, r[i].replica);
    }
    struct gr_ctrl_tp_list offline_leader = {0};
    partitions_with_offline_leader(ctx, r, n, &offline_leader);
    int rc = gr_psm_handle_state_changes(sm, offline_leader.v, offline_leader.n, GR_PS_OFFLINE, NULL, NULL);
    if (!rc) rc = gr_psm_trigger_online(sm, NULL);
    if (!rc && offline_leader.n > 0) wait_elections_applied(sm);
    if (!rc) rc = gr_rsm_handle_state_changes(sm, not_for_deletion.v, not_for_deletion.n, GR_RS_OFFLINE);
    if (!rc && for_deletion.n && sm->hooks.replicas_offline_for_deletion)
        rc = sm->hooks.replicas_offline_for_deletion(sm->hooks.arg, for_deletion.v, for_deletion.n);
    /* Kafka sends this only when no partition lost its leader, counting on the elections' own
     * UpdateMetadata; but a partition that was already leaderless counts as "lost" too, and when no
     * election succeeds nobody tells the surviving brokers about the failed ones (simulation seed
     * 2556). The brokers-only request is small: always send it. */
    if (!rc) gr_ctrl_send_update_metadata_all(sm, NULL, 0);
    gr_ctrl_tp_list_free(&offline_leader);
    gr_ctrl_replica_list_free(&for_deletion);
    gr_ctrl_replica_list_free(&not_for_deletion);
    return rc;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static const struct gr_kzk_broker *find_broker(const struct gr_kzk_broker *v, int n, int32_t id) {
    for (int i = 0; i < n; i++)
        if (v[i].id == id) return &v[i];
    return NULL;
}

int gr_ctrl_process_broker_change(struct gr_ctrl_sm *sm, const struct gr_kzk_broker *cur, int n) {
    struct gr_ctrl_context *ctx = sm->ctx;
    size_t cap = (size_t)(n + ctx->n_brokers + 1);
    int32_t *new_ids = gr_malloc(cap * sizeof(int32_t)), *dead = gr_malloc(cap * sizeof(int32_t)),
            *bounced = gr_malloc(cap * sizeof(int32_t)), *all = gr_malloc(cap * sizeof(int32_t));
    int n_new = 0, n_dead = 0, n_bounced = 0, n_all = 0;
    for (int i = 0; i < n; i++) {
        all[n_all++] = cur[i].id;
        struct gr_ctrl_broker *known = gr_ctrl_ctx_broker(ctx, cur[i].id);
        if (!known) new_ids[n_new++] = cur[i].id;
        else if (cur[i].epoch > known->epoch) bounced[n_bounced++] = cur[i].id;
    }
    for (int i = 0; i < ctx->n_brokers; i++)
        if (!find_broker(cur, n, ctx->brokers[i].id)) dead[n_dead++] = ctx->brokers[i].id;
    qsort(new_ids, (size_t)n_new, sizeof(int32_t), cmp_i32);
    qsort(dead, (size_t)n_dead, sizeof(int32_t), cmp_i32);
    qsort(bounced, (size_t)n_bounced, sizeof(int32_t), cmp_i32);
    qsort(all, (size_t)n_all, sizeof(int32_t), cmp_i32);
    char b1[256], b2[256], b3[256], b4[512];
    gr_info(LOGGER, "Newly added brokers: %s, deleted brokers: %s, bounced brokers: %s, all live brokers: %s",
            gr_ctrl_fmt_ids(b1, sizeof b1, new_ids, n_new), gr_ctrl_fmt_ids(b2, sizeof b2, dead, n_dead),
            gr_ctrl_fmt_ids(b3, sizeof b3, bounced, n_bounced), gr_ctrl_fmt_ids(b4, sizeof b4, all, n_all));

    for (int i = 0; i < n_new; i++) sm->sender->add_broker(sm->sender_ctx, find_broker(cur, n, new_ids[i]));
    for (int i = 0; i < n_bounced; i++) sm->sender->remove_broker(sm->sender_ctx, bounced[i]);
    for (int i = 0; i < n_bounced; i++) sm->sender->add_broker(sm->sender_ctx, find_broker(cur, n, bounced[i]));
    for (int i = 0; i < n_dead; i++) sm->sender->remove_broker(sm->sender_ctx, dead[i]);

    int rc = 0;
    if (n_new) {
        for (int i = 0; i < n_new; i++) gr_ctrl_ctx_add_live_broker(ctx, find_broker(cur, n, new_ids[i]));
        rc = gr_ctrl_on_broker_startup(sm, new_ids, n_new);
    }
    if (!rc && n_bounced) {
        for (int i = 0; i < n_bounced; i++) gr_ctrl_ctx_remove_live_broker(ctx, bounced[i]);
        rc = gr_ctrl_on_broker_failure(sm, bounced, n_bounced);
        for (int i = 0; i < n_bounced; i++) gr_ctrl_ctx_add_live_broker(ctx, find_broker(cur, n, bounced[i]));
        if (!rc) rc = gr_ctrl_on_broker_startup(sm, bounced, n_bounced);
    }
    if (!rc && n_dead) {
        for (int i = 0; i < n_dead; i++) gr_ctrl_ctx_remove_live_broker(ctx, dead[i]);
        rc = gr_ctrl_on_broker_failure(sm, dead, n_dead);
    }
    if (n_new || n_dead || n_bounced) {
        char eb[1024];
        gr_info(LOGGER, "Updated broker epochs cache: %s", gr_ctrl_ctx_format_brokers(ctx, eb, sizeof eb));
    }
    free(new_ids);
    free(dead);
    free(bounced);
    free(all);
    return rc;
}

int gr_ctrl_failover_start_state_machines(struct gr_ctrl_sm *sm) {
    gr_info(LOGGER, "Sending update metadata request");
    gr_ctrl_send_update_metadata_all(sm, NULL, 0);
    struct gr_ctrl_replica_list offline = {0};
    gr_rsm_startup_init(sm, &offline);
    int rc = gr_psm_startup(sm);
    if (!rc && offline.n > 0) wait_elections_applied(sm); /* a broker is down: elections were made */
    if (!rc) rc = gr_rsm_startup_online(sm);
    if (!rc) {
        gr_info(LOGGER, "Triggering offline replica state changes");
        rc = gr_rsm_handle_state_changes(sm, offline.v, offline.n, GR_RS_OFFLINE);
    }
    gr_ctrl_replica_list_free(&offline);
    return rc;
}

/* ---- ISR change notifications ---- */

/* Rereads the states of tps from ZooKeeper into the context (updateLeaderAndIsrCache). */
static void reload_states(struct gr_ctrl_sm *sm, const struct gr_kzk_tp *tps, int n) {
    if (n <= 0) return;
    struct gr_kzk_state_result *res = gr_calloc((size_t)n, sizeof *res);
    int rc = gr_kzk_get_partition_states(sm->kzk, tps, n, res);
    if (rc) gr_error(LOGGER, "Cannot reload %d partition states: %s", n, gr_kzk_strerror(rc));
    for (int i = 0; i < n; i++) {
        if (!rc && res[i].rc == 0) {
            struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, tps[i].topic, tps[i].partition);
            if (p) gr_ctrl_partition_set_state(p, &res[i].lai);
        }
        gr_kzk_leader_and_isr_release(&res[i].lai);
    }
    free(res);
}

int gr_ctrl_process_isr_change_notification(struct gr_ctrl_sm *sm) {
    struct gr_zstrings names = {0};
    int rc = gr_kzk_get_isr_change_notifications(sm->kzk, true, &names);
    if (rc) {
        gr_error(LOGGER, "Cannot read ISR change notifications: %s", gr_kzk_strerror(rc));
        return 0;
    }
    if (names.count == 0) {
        gr_zstrings_free(&names);
        return 0;
    }
    struct gr_kzk_tp *tps = NULL;
    int n_tps = 0;
    rc = gr_kzk_get_isr_change_partitions(sm->kzk, (const char *const *)names.names, names.count, &tps, &n_tps);
    if (rc) {
        gr_error(LOGGER, "Cannot read ISR change notifications: %s", gr_kzk_strerror(rc));
    } else if (n_tps > 0) {
        reload_states(sm, tps, n_tps);
        gr_ctrl_send_update_metadata_all(sm, tps, n_tps);
    }
    gr_kzk_tps_release(tps, n_tps);
    rc = gr_kzk_delete_isr_change_notifications_guarded(sm->kzk, sm->ctx->epoch_zk_version,
                                                        (const char *const *)names.names, names.count);
    gr_zstrings_free(&names);
    if (rc && rc != GR_ECONTROLLER_MOVED) {
        gr_error(LOGGER, "Cannot delete ISR change notifications: %s", gr_kzk_strerror(rc));
        rc = 0;
    }
    return rc;
}

/* ---- AlterPartition ---- */

int16_t gr_alter_partition_check_broker(struct gr_ctrl_context *ctx, int32_t broker_id, int64_t broker_epoch) {
    struct gr_ctrl_broker *b = gr_ctrl_ctx_broker(ctx, broker_id);
    if (!b) {
        gr_info(LOGGER, "Ignoring AlterPartition due to unknown broker %d", broker_id);
        return GR_KERR_STALE_BROKER_EPOCH;
    }
    if (b->epoch != broker_epoch) {
        gr_info(LOGGER, "Ignoring AlterPartition due to stale broker epoch %lld for broker %d", (long long)broker_epoch,
                broker_id);
        return GR_KERR_STALE_BROKER_EPOCH;
    }
    return GR_KERR_NONE;
}

/* Whether every proposed member may be in the ISR (KafkaController.tryProcessAlterPartition, KIP-841:
 * registered and not shutting down) and, when the proposal carries broker epochs (v3, KIP-903), was
 * proposed on the strength of its current registration: an epoch other than -1 ("not known") that
 * is not the member's registration epoch is a replica that restarted since (e.g. with an empty
 * disk) and must not re-enter the ISR on what its previous incarnation fetched. */
static bool members_eligible(struct gr_ctrl_context *ctx, const struct gr_alter_partition_proposal *pr) {
    for (int i = 0; i < pr->n_isr; i++) {
        struct gr_ctrl_broker *b = gr_ctrl_ctx_broker(ctx, pr->isr[i]);
        if (!b || gr_ctrl_broker_shutting_down(ctx, pr->isr[i])) return false;
        if (pr->isr_epochs && pr->isr_epochs[i] != -1 && pr->isr_epochs[i] != b->epoch) return false;
    }
    return true;
}

int16_t gr_alter_partition_check_partition(struct gr_ctrl_context *ctx, const struct gr_ctrl_partition *p,
                                           const struct gr_alter_partition_proposal *pr, bool *already) {
    *already = false;
    if (!p || !p->has_state) return GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
    /* a leader that has seen a newer state than ours: we are likely no longer the controller */
    if (pr->partition_epoch > p->lai.zk_version || pr->leader_epoch > p->lai.leader_epoch)
        return GR_KERR_NOT_CONTROLLER;
    if (pr->leader_epoch < p->lai.leader_epoch) return GR_KERR_FENCED_LEADER_EPOCH;
    /* before the partition-epoch fence, for idempotency (a retry of an applied change) */
    if (pr->broker_id == p->lai.leader && pr->n_isr == p->lai.n_isr && pr->leader_recovery_state == 0 &&
        (pr->n_isr == 0 || memcmp(pr->isr, p->lai.isr, (size_t)pr->n_isr * sizeof *pr->isr) == 0)) {
        *already = true;
        return GR_KERR_NONE;
    }
    if (pr->partition_epoch < p->lai.zk_version) return GR_KERR_INVALID_UPDATE_VERSION;
    /* KIP-704: Gregor's partitions are always RECOVERED (no unclean-election recovery state), and
     * Kafka refuses RECOVERED -> RECOVERING; any other value is no state at all */
    if (pr->leader_recovery_state != 0) return GR_KERR_INVALID_REQUEST;
    /* Not checked by Kafka: a member that is not an assigned replica (a leader that missed a
     * reassignment's new replica set could re-add a removed one), or named twice */
    if (pr->n_isr > p->n_replicas) return GR_KERR_INVALID_REQUEST;
    for (int i = 0; i < pr->n_isr; i++) {
        if (gr_ctrl_replica_index(p, pr->isr[i]) < 0) return GR_KERR_INVALID_REQUEST;
        for (int j = 0; j < i; j++)
            if (pr->isr[j] == pr->isr[i]) return GR_KERR_INVALID_REQUEST;
    }
    if (!members_eligible(ctx, pr))
        return pr->version >= 2 ? GR_KERR_INELIGIBLE_REPLICA : GR_KERR_OPERATION_NOT_ATTEMPTED;
    return GR_KERR_NONE;
}

static void fill_partition_ok(struct gr_arena *a, struct AlterPartitionResponse_PartitionData *d,
                              const struct gr_kzk_leader_and_isr *l) {
    d->ErrorCode = GR_KERR_NONE;
    d->LeaderId = l->leader;
    d->LeaderEpoch = l->leader_epoch;
    d->IsrCount = l->n_isr;
    d->Isr = gr_arena_alloc(a, (size_t)(l->n_isr ? l->n_isr : 1) * sizeof(int32_t));
    if (l->n_isr) memcpy(d->Isr, l->isr, (size_t)l->n_isr * sizeof(int32_t));
    d->PartitionEpoch = l->zk_version;
}

/* One AlterPartition request's work: the ISR writes (items[i] answered in out[i], state lais[i]) and
 * every partition named (for the UpdateMetadata). */
struct alter_partition_batch {
    struct gr_kzk_leader_and_isr *lais;
    struct gr_kzk_state_write *items;
    struct AlterPartitionResponse_PartitionData **out;
    int n_items;
    struct gr_kzk_tp *all;
    int n_all;
};

/* One partition of the request: answered now (error, or "already" with the current state) or
 * queued as a write in b. topic NULL: the topic (v2+: its id) is unknown. */
static void alter_partition_partition(struct gr_ctrl_sm *sm, int16_t version, int32_t broker_id, const char *topic,
                                      const struct AlterPartitionRequest_PartitionData *rp, struct gr_arena *a,
                                      struct AlterPartitionResponse_PartitionData *op, struct alter_partition_batch *b) {
    gr_proto_init_struct(&gr_desc_AlterPartitionResponse_PartitionData, op);
    op->PartitionIndex = rp->PartitionIndex;
    if (!topic) {
        op->ErrorCode = version >= 2 ? GR_KERR_UNKNOWN_TOPIC_ID : GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
        return;
    }
    b->all[b->n_all++] = (struct gr_kzk_tp){.topic = (char *)topic, .partition = rp->PartitionIndex};
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, topic, rp->PartitionIndex);
    struct gr_alter_partition_proposal pr = {.version = version, .broker_id = broker_id,
                                             .leader_epoch = rp->LeaderEpoch,
                                             .leader_recovery_state = rp->LeaderRecoveryState,
                                             .partition_epoch = rp->PartitionEpoch};
    if (version >= 3) { /* NewIsrWithEpochs replaces NewIsr */
        pr.n_isr = rp->NewIsrWithEpochsCount > 0 ? rp->NewIsrWithEpochsCount : 0;
        int32_t *ids = gr_arena_alloc(a, (size_t)(pr.n_isr + 1) * sizeof *ids);
        int64_t *epochs = gr_arena_alloc(a, (size_t)(pr.n_isr + 1) * sizeof *epochs);
        for (int i = 0; i < pr.n_isr; i++) {
            ids[i] = rp->NewIsrWithEpochs[i].BrokerId;
            epochs[i] = rp->NewIsrWithEpochs[i].BrokerEpoch;
        }
        pr.isr = ids;
        pr.isr_epochs = epochs;
    } else {
        pr.n_isr = rp->NewIsrCount > 0 ? rp->NewIsrCount : 0;
        pr.isr = rp->NewIsr;
    }
    bool already;
    int16_t err = gr_alter_partition_check_partition(sm->ctx, p, &pr, &already);
    if (err != GR_KERR_NONE) {
        if (err == GR_KERR_INELIGIBLE_REPLICA || err == GR_KERR_OPERATION_NOT_ATTEMPTED) {
            char isr[256];
            gr_info(LOGGER, "Rejecting AlterPartition request from node %d for %s-%d because it specified "
                            "ineligible replicas in the new ISR [%s].",
                    broker_id, topic, rp->PartitionIndex, gr_ctrl_fmt_ids(isr, sizeof isr, pr.isr, pr.n_isr));
        }
        op->ErrorCode = err;
        return;
    }
    if (already) {
        fill_partition_ok(a, op, &p->lai);
        return;
    }
    struct gr_kzk_leader_and_isr *l = &b->lais[b->n_items];
    l->leader = broker_id;
    l->leader_epoch = rp->LeaderEpoch;
    l->controller_epoch = sm->ctx->epoch;
    l->n_isr = pr.n_isr;
    l->isr = (int32_t *)pr.isr; /* borrowed (request or arena): not released */
    l->zk_version = rp->PartitionEpoch;
    b->items[b->n_items] = (struct gr_kzk_state_write){.topic = topic, .partition = rp->PartitionIndex, .lai = l};
    b->out[b->n_items++] = op;
}

/* Writes the queued ISRs and answers each; the context caches what was written. Returns 0 or
 * GR_ECONTROLLER_MOVED. */
static int alter_partition_write(struct gr_ctrl_sm *sm, struct alter_partition_batch *b, struct gr_arena *a) {
    gr_debug(LOGGER, "Updating ISRs for %d partitions.", b->n_items);
    struct gr_kzk_write_result *res = gr_calloc((size_t)b->n_items, sizeof *res);
    int rc = gr_kzk_update_partition_states(sm->kzk, sm->ctx->epoch_zk_version, b->items, b->n_items, res);
    for (int i = 0; i < b->n_items && rc != GR_ECONTROLLER_MOVED; i++) {
        const struct gr_kzk_state_write *it = &b->items[i];
        int irc = rc ? rc : res[i].rc;
        if (irc == GR_KZK_EBADVERSION) {
            gr_info(LOGGER, "Failed to update ISR for partition %s-%d, bad ZK version.", it->topic, it->partition);
            b->out[i]->ErrorCode = GR_KERR_INVALID_UPDATE_VERSION;
            continue;
        }
        if (irc) {
            gr_error(LOGGER, "Failed to update ISR for partition %s-%d: %s", it->topic, it->partition,
                     gr_kzk_strerror(irc));
            b->out[i]->ErrorCode = GR_KERR_UNKNOWN_SERVER_ERROR;
            continue;
        }
        b->lais[i].zk_version = res[i].zk_version;
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(sm->ctx, it->topic, it->partition);
        if (p) gr_ctrl_partition_set_state(p, &b->lais[i]);
        char isr[256];
        gr_debug(LOGGER, "ISR for partition %s-%d updated to [%s] and zkVersion updated to [%d]", it->topic,
                 it->partition, gr_ctrl_fmt_ids(isr, sizeof isr, b->lais[i].isr, b->lais[i].n_isr), b->lais[i].zk_version);
        fill_partition_ok(a, b->out[i], &b->lais[i]);
    }
    free(res);
    return rc == GR_ECONTROLLER_MOVED ? rc : 0;
}

struct id_slot {
    struct gr_uuid id;
    int topic; /* index in the request */
};

static int id_slot_cmp(const void *x, const void *y) {
    return memcmp(((const struct id_slot *)x)->id.b, ((const struct id_slot *)y)->id.b, 16);
}

/* v2+: names[t] = the name of request topic t's id, NULL when no topic has it (Kafka's
 * controllerContext.topicName). One pass over the context's topics, each id looked up among the
 * request's sorted ids: O((topics + n) log n), whatever the request holds. */
static void names_by_id(struct gr_ctrl_context *ctx, const struct AlterPartitionRequest *req, int n,
                        const char **names) {
    struct id_slot *ids = gr_calloc((size_t)n + 1, sizeof *ids);
    for (int t = 0; t < n; t++) {
        memcpy(ids[t].id.b, req->Topics[t].TopicId, 16);
        ids[t].topic = t;
        names[t] = NULL;
    }
    qsort(ids, (size_t)n, sizeof *ids, id_slot_cmp);
    struct gr_ctrl_topic *tp;
    for (size_t cur = 0; n > 0 && (tp = gr_ctrl_ctx_next_topic(ctx, &cur));) {
        if (gr_uuid_is_zero(&tp->id)) continue;
        struct id_slot key = {.id = tp->id};
        struct id_slot *hit = bsearch(&key, ids, (size_t)n, sizeof *ids, id_slot_cmp);
        if (!hit) continue;
        while (hit > ids && id_slot_cmp(hit - 1, &key) == 0) hit--; /* the same id named twice */
        for (; hit < ids + n && id_slot_cmp(hit, &key) == 0; hit++) names[hit->topic] = tp->name;
    }
    free(ids);
}

int gr_ctrl_process_alter_partition(struct gr_ctrl_sm *sm, int16_t version, int32_t broker_id, int64_t broker_epoch,
                                    const struct AlterPartitionRequest *req, struct gr_arena *a,
                                    struct AlterPartitionResponse *resp) {
    resp->ErrorCode = gr_alter_partition_check_broker(sm->ctx, broker_id, broker_epoch);
    resp->TopicsCount = 0;
    resp->Topics = NULL;
    if (resp->ErrorCode != GR_KERR_NONE) return 0;
    int n_topics = req->TopicsCount > 0 ? req->TopicsCount : 0;
    size_t n_total = 1;
    for (int t = 0; t < n_topics; t++)
        if (req->Topics[t].PartitionsCount > 0) n_total += (size_t)req->Topics[t].PartitionsCount;
    struct alter_partition_batch b = {.lais = gr_calloc(n_total, sizeof *b.lais),
                                      .items = gr_calloc(n_total, sizeof *b.items),
                                      .out = gr_calloc(n_total, sizeof *b.out),
                                      .all = gr_calloc(n_total, sizeof *b.all)};
    const char **names = gr_calloc((size_t)n_topics + 1, sizeof *names);
    if (version >= 2) names_by_id(sm->ctx, req, n_topics, names);
    else
        for (int t = 0; t < n_topics; t++) names[t] = req->Topics[t].TopicName;
    resp->TopicsCount = n_topics;
    resp->Topics = gr_arena_alloc(a, (size_t)(n_topics ? n_topics : 1) * sizeof *resp->Topics);
    for (int t = 0; t < n_topics; t++) {
        const struct AlterPartitionRequest_TopicData *rt = &req->Topics[t];
        struct AlterPartitionResponse_TopicData *ot = &resp->Topics[t];
        gr_proto_init_struct(&gr_desc_AlterPartitionResponse_TopicData, ot);
        ot->TopicName = gr_arena_strdup(a, rt->TopicName ? rt->TopicName : "");
        memcpy(ot->TopicId, rt->TopicId, sizeof ot->TopicId);
        ot->PartitionsCount = rt->PartitionsCount > 0 ? rt->PartitionsCount : 0;
        ot->Partitions = gr_arena_alloc(a, (size_t)(ot->PartitionsCount ? ot->PartitionsCount : 1) * sizeof *ot->Partitions);
        for (int i = 0; i < ot->PartitionsCount; i++)
            alter_partition_partition(sm, version, broker_id, names[t], &rt->Partitions[i], a, &ot->Partitions[i], &b);
    }
    int ret = b.n_items ? alter_partition_write(sm, &b, a) : 0;
    if (ret == GR_ECONTROLLER_MOVED) {
        resp->ErrorCode = GR_KERR_NOT_CONTROLLER;
        resp->TopicsCount = 0;
        resp->Topics = NULL;
    } else {
        gr_ctrl_send_update_metadata_all(sm, b.all, b.n_all);
    }
    free(names);
    free(b.lais);
    free(b.items);
    free(b.out);
    free(b.all);
    return ret;
}

static void alter_partition_answer(struct gr_ctrl_alter_partition_payload *pl,
                                   const struct AlterPartitionResponse *resp) {
    if (pl->responded) return;
    pl->responded = true;
    if (pl->respond) pl->respond(pl->arg, resp);
}

void gr_ctrl_alter_partition_fail(struct gr_ctrl_alter_partition_payload *pl, int16_t error) {
    struct AlterPartitionResponse resp;
    gr_proto_init_struct(&gr_desc_AlterPartitionResponse, &resp);
    resp.ErrorCode = error;
    resp.TopicsCount = 0;
    resp.Topics = NULL;
    alter_partition_answer(pl, &resp);
}

void gr_ctrl_alter_partition_payload_free(void *payload) {
    struct gr_ctrl_alter_partition_payload *pl = payload;
    if (!pl) return;
    if (!pl->responded) gr_ctrl_alter_partition_fail(pl, GR_KERR_NOT_CONTROLLER);
    free(pl);
}

int gr_ctrl_alter_partition_complete(struct gr_ctrl_sm *sm, struct gr_ctrl_event *ev) {
    struct gr_ctrl_alter_partition_payload *pl = ev->payload;
    if (!pl || pl->responded) return 0;
    struct gr_arena a;
    gr_arena_init(&a);
    struct AlterPartitionResponse resp;
    gr_proto_init_struct(&gr_desc_AlterPartitionResponse, &resp);
    int rc = gr_ctrl_process_alter_partition(sm, pl->version, ev->broker_id, ev->broker_epoch, pl->request, &a, &resp);
    alter_partition_answer(pl, &resp);
    gr_arena_free(&a);
    return rc;
}

/* ---- responses ---- */

void gr_ctrl_process_leader_and_isr_response(struct gr_ctrl_sm *sm, struct gr_ctrl_event *ev) {
    struct gr_ctrl_response *r = ev->payload;
    if (!r || !r->body) return;
    const struct LeaderAndIsrResponse *b = r->body;
    if (b->ErrorCode != GR_KERR_NONE) {
        gr_error(GR_STATE_CHANGE_LOGGER,
                 "[Controller id=%d epoch=%d] Received error %s in LeaderAndIsr response from broker %d",
                 sm->controller_id, sm->ctx->epoch, gr_kerr_name(b->ErrorCode), ev->broker_id);
        return;
    }
    for (int i = 0; i < b->PartitionErrorsCount; i++) {
        const struct LeaderAndIsrResponse_LeaderAndIsrPartitionError *pe = &b->PartitionErrors[i];
        if (pe->ErrorCode == GR_KERR_KAFKA_STORAGE_ERROR)
            gr_warn(GR_STATE_CHANGE_LOGGER,
                    "[Controller id=%d epoch=%d] Replica %s-%d on broker %d reported KAFKA_STORAGE_ERROR (offline log dir)",
                    sm->controller_id, sm->ctx->epoch, pe->TopicName ? pe->TopicName : "?", pe->PartitionIndex,
                    ev->broker_id);
    }
}

void gr_ctrl_process_update_metadata_response(struct gr_ctrl_sm *sm, struct gr_ctrl_event *ev) {
    struct gr_ctrl_response *r = ev->payload;
    if (!r || !r->body) return;
    const struct UpdateMetadataResponse *b = r->body;
    if (b->ErrorCode != GR_KERR_NONE)
        gr_error(GR_STATE_CHANGE_LOGGER,
                 "[Controller id=%d epoch=%d] Received error %s in UpdateMetadata response from broker %d",
                 sm->controller_id, sm->ctx->epoch, gr_kerr_name(b->ErrorCode), ev->broker_id);
}
