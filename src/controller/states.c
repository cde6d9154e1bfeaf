/* Partition/replica states and shared helpers: see states.h. */
#include "controller/states.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static const char *const partition_names[GR_PS_COUNT] = {
    [GR_PS_NONEXISTENT] = "NonExistentPartition",
    [GR_PS_NEW] = "NewPartition",
    [GR_PS_ONLINE] = "OnlinePartition",
    [GR_PS_OFFLINE] = "OfflinePartition",
};

static const char *const replica_names[GR_RS_COUNT] = {
    [GR_RS_NONEXISTENT] = "NonExistentReplica",
    [GR_RS_NEW] = "NewReplica",
    [GR_RS_ONLINE] = "OnlineReplica",
    [GR_RS_OFFLINE] = "OfflineReplica",
    [GR_RS_DELETION_STARTED] = "ReplicaDeletionStarted",
    [GR_RS_DELETION_SUCCESSFUL] = "ReplicaDeletionSuccessful",
    [GR_RS_DELETION_INELIGIBLE] = "ReplicaDeletionIneligible",
};

#define BIT(s) (1u << (s))

/* valid previous states of each target, as bit sets */
static const unsigned partition_prev[GR_PS_COUNT] = {
    [GR_PS_NONEXISTENT] = BIT(GR_PS_OFFLINE),
    [GR_PS_NEW] = BIT(GR_PS_NONEXISTENT),
    [GR_PS_ONLINE] = BIT(GR_PS_NEW) | BIT(GR_PS_ONLINE) | BIT(GR_PS_OFFLINE),
    [GR_PS_OFFLINE] = BIT(GR_PS_NEW) | BIT(GR_PS_ONLINE) | BIT(GR_PS_OFFLINE),
};

static const unsigned replica_prev[GR_RS_COUNT] = {
    [GR_RS_NONEXISTENT] = BIT(GR_RS_DELETION_SUCCESSFUL),
    [GR_RS_NEW] = BIT(GR_RS_NONEXISTENT),
    [GR_RS_ONLINE] = BIT(GR_RS_NEW) | BIT(GR_RS_ONLINE) | BIT(GR_RS_OFFLINE) | BIT(GR_RS_DELETION_INELIGIBLE),
    [GR_RS_OFFLINE] = BIT(GR_RS_NEW) | BIT(GR_RS_ONLINE) | BIT(GR_RS_OFFLINE) | BIT(GR_RS_DELETION_INELIGIBLE),
    [GR_RS_DELETION_STARTED] = BIT(GR_RS_OFFLINE),
    [GR_RS_DELETION_SUCCESSFUL] = BIT(GR_RS_DELETION_STARTED),
    [GR_RS_DELETION_INELIGIBLE] = BIT(GR_RS_OFFLINE) | BIT(GR_RS_DELETION_STARTED),
};

static const char *const partition_prev_text[GR_PS_COUNT] = {
    [GR_PS_NONEXISTENT] = "OfflinePartition",
    [GR_PS_NEW] = "NonExistentPartition",
    [GR_PS_ONLINE] = "NewPartition,OnlinePartition,OfflinePartition",
    [GR_PS_OFFLINE] = "NewPartition,OnlinePartition,OfflinePartition",
};

static const char *const replica_prev_text[GR_RS_COUNT] = {
    [GR_RS_NONEXISTENT] = "ReplicaDeletionSuccessful",
    [GR_RS_NEW] = "NonExistentReplica",
    [GR_RS_ONLINE] = "NewReplica,OnlineReplica,OfflineReplica,ReplicaDeletionIneligible",
    [GR_RS_OFFLINE] = "NewReplica,OnlineReplica,OfflineReplica,ReplicaDeletionIneligible",
    [GR_RS_DELETION_STARTED] = "OfflineReplica",
    [GR_RS_DELETION_SUCCESSFUL] = "ReplicaDeletionStarted",
    [GR_RS_DELETION_INELIGIBLE] = "OfflineReplica,ReplicaDeletionStarted",
};

const char *gr_partition_state_name(int st) {
    return st >= 0 && st < GR_PS_COUNT ? partition_names[st] : "UnknownPartitionState";
}

const char *gr_replica_state_name(int st) {
    return st >= 0 && st < GR_RS_COUNT ? replica_names[st] : "UnknownReplicaState";
}

bool gr_partition_transition_valid(int from, int to) {
    if (from < 0 || from >= GR_PS_COUNT || to < 0 || to >= GR_PS_COUNT) return false;
    return (partition_prev[to] & BIT(from)) != 0;
}

bool gr_replica_transition_valid(int from, int to) {
    if (from < 0 || from >= GR_RS_COUNT || to < 0 || to >= GR_RS_COUNT) return false;
    return (replica_prev[to] & BIT(from)) != 0;
}

const char *gr_partition_valid_previous(int to) {
    return to >= 0 && to < GR_PS_COUNT ? partition_prev_text[to] : "";
}

const char *gr_replica_valid_previous(int to) { return to >= 0 && to < GR_RS_COUNT ? replica_prev_text[to] : ""; }

/* ---- context helpers ---- */

bool gr_ctrl_broker_registered(const struct gr_ctrl_context *ctx, int32_t id) {
    int lo = 0, hi = ctx->n_brokers;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (ctx->brokers[mid].id == id) return true;
        if (ctx->brokers[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return false;
}

bool gr_ctrl_broker_shutting_down(const struct gr_ctrl_context *ctx, int32_t id) {
    for (int i = 0; i < ctx->n_shutting_down; i++)
        if (ctx->shutting_down[i] == id) return true;
    return false;
}

bool gr_ctrl_replica_online(const struct gr_ctrl_context *ctx, const struct gr_ctrl_partition *p, int32_t broker,
                            bool include_shutting_down) {
    if (!gr_ctrl_broker_registered(ctx, broker)) return false;
    if (!include_shutting_down && gr_ctrl_broker_shutting_down(ctx, broker)) return false;
    return !gr_ctrl_replica_on_offline_dir(p, broker);
}

bool gr_ctrl_replica_on_offline_dir(const struct gr_ctrl_partition *p, int32_t broker) {
    for (int i = 0; p && i < p->n_offline_dirs; i++)
        if (p->offline_dirs[i] == broker) return true;
    return false;
}

bool gr_ctrl_replica_set_offline_dir(struct gr_ctrl_partition *p, int32_t broker, bool offline) {
    bool was = gr_ctrl_replica_on_offline_dir(p, broker);
    if (was == offline) return false;
    if (offline) {
        p->offline_dirs = gr_realloc(p->offline_dirs, (size_t)(p->n_offline_dirs + 1) * sizeof *p->offline_dirs);
        p->offline_dirs[p->n_offline_dirs++] = broker;
    } else {
        int k = 0;
        for (int i = 0; i < p->n_offline_dirs; i++)
            if (p->offline_dirs[i] != broker) p->offline_dirs[k++] = p->offline_dirs[i];
        p->n_offline_dirs = k;
    }
    return true;
}

void gr_ctrl_clear_offline_dirs(struct gr_ctrl_context *ctx, const int32_t *ids, int n) {
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur)))
        for (int i = 0; i < t->n_partitions; i++)
            for (int k = 0; t->partitions[i].n_offline_dirs && k < n; k++)
                gr_ctrl_replica_set_offline_dir(&t->partitions[i], ids[k], false);
}

bool gr_ctrl_topic_queued_for_deletion(const struct gr_ctrl_context *ctx, const char *topic) {
    if (ctx->topics_to_be_deleted.count == 0) return false;
    const struct gr_ctrl_topic *t = gr_ctrl_ctx_topic((struct gr_ctrl_context *)ctx, topic);
    if (t) return t->queued_for_deletion; /* the index (context.h) */
    for (int i = 0; i < ctx->topics_to_be_deleted.count; i++) /* a name the context does not know */
        if (strcmp(ctx->topics_to_be_deleted.names[i], topic) == 0) return true;
    return false;
}

int gr_ctrl_replica_index(const struct gr_ctrl_partition *p, int32_t replica) {
    for (int i = 0; i < p->n_replicas; i++)
        if (p->replicas[i] == replica) return i;
    return -1;
}

int gr_ctrl_replica_state_get(struct gr_ctrl_partition *p, int32_t replica) {
    int i = gr_ctrl_replica_index(p, replica);
    if (i < 0 || !p->replica_states) return GR_RS_NONEXISTENT;
    return p->replica_states[i];
}

void gr_ctrl_replica_state_set(struct gr_ctrl_partition *p, int32_t replica, int st) {
    int i = gr_ctrl_replica_index(p, replica);
    if (i < 0) return;
    gr_ctrl_partition_replica_states(p)[i] = (uint8_t)st;
}

void gr_ctrl_tp_list_add(struct gr_ctrl_tp_list *l, const char *topic, int32_t partition) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = gr_realloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    l->v[l->n].topic = (char *)topic;
    l->v[l->n].partition = partition;
    l->n++;
}

void gr_ctrl_tp_list_free(struct gr_ctrl_tp_list *l) {
    free(l->v);
    memset(l, 0, sizeof *l);
}

void gr_ctrl_replica_list_add(struct gr_ctrl_replica_list *l, const char *topic, int32_t partition,
                              int32_t replica) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = gr_realloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    l->v[l->n].topic = topic;
    l->v[l->n].partition = partition;
    l->v[l->n].replica = replica;
    l->n++;
}

void gr_ctrl_replica_list_free(struct gr_ctrl_replica_list *l) {
    free(l->v);
    memset(l, 0, sizeof *l);
}

char *gr_ctrl_fmt_ids(char *buf, size_t len, const int32_t *ids, int n) {
    size_t off = 0;
    if (len) buf[0] = 0;
    for (int i = 0; i < n && off < len; i++) {
        int w = snprintf(buf + off, len - off, "%s%d", i ? "," : "", ids[i]);
        if (w < 0) break;
        off += (size_t)w;
    }
    return buf;
}
