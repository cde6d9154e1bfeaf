/* Topic deletion manager: see topic_deletion.h. Names follow Kafka 2.7's TopicDeletionManager. */
#include "controller/topic_deletion.h"

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
#include "controller/response.h"
#include "zk/kzk.h"

#define LOGGER "kafka.controller.TopicDeletionManager"

/* A small set of topic names (deletions are few; linear scans are fine). */
struct name_set {
    int n, cap;
    char **v;
};

/* An UpdateMetadata with leader -2 for topic's partitions sent to broker (at registration epoch)
 * and not acknowledged yet: the topic's deletion completes only when no broker that is live at
 * that epoch still owes one. */
struct um_wait {
    char *topic;
    int32_t broker;
    int64_t epoch;
};

/* A topic whose deletion this controller completed (this term): a broker that starts up later --
 * it may have been away, its cache still holding the topic, since before the deletion began --
 * gets leader -2 for its partitions (harmless to one that never had them). */
struct gone_topic {
    char *topic;
    int32_t n_partitions;
};

struct gr_topic_deletion {
    struct gr_ctrl_sm *sm;
    struct gr_zk_watches *watches;
    bool enabled;
    struct name_set started;    /* topicsWithDeletionStarted */
    struct name_set ineligible; /* topicsIneligibleForDeletion */
    struct um_wait *um;         /* unacknowledged metadata removals (few: linear scans) */
    int n_um, cap_um;
    struct gone_topic *gone;    /* deletions completed in this term */
    int n_gone;
};

#define TD_LOG(lvl, td, fmt, ...) \
    gr_log(lvl, LOGGER, "[Topic Deletion Manager %d] " fmt, (td)->sm->controller_id, __VA_ARGS__)

/* ---- name sets ---- */

static int set_find(const struct name_set *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0) return i;
    return -1;
}

static bool set_has(const struct name_set *s, const char *name) { return set_find(s, name) >= 0; }

static bool set_add(struct name_set *s, const char *name) {
    if (set_has(s, name)) return false;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        s->v = gr_realloc(s->v, (size_t)s->cap * sizeof *s->v);
    }
    s->v[s->n++] = gr_strdup(name);
    return true;
}

static void set_remove(struct name_set *s, const char *name) {
    int i = set_find(s, name);
    if (i < 0) return;
    free(s->v[i]);
    s->v[i] = s->v[--s->n];
}

static void set_clear(struct name_set *s) {
    for (int i = 0; i < s->n; i++) free(s->v[i]);
    s->n = 0;
}

static void set_free(struct name_set *s) {
    set_clear(s);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* ---- the queue (ctx->topics_to_be_deleted) ---- */

static void queue_add(struct gr_ctrl_context *ctx, const char *name) { gr_ctrl_ctx_queue_deletion(ctx, name); }

static void queue_remove(struct gr_ctrl_context *ctx, const char *name) { gr_ctrl_ctx_unqueue_deletion(ctx, name); }

/* Copies of the queued names (the queue changes while we work). */
static char **queue_snapshot(struct gr_ctrl_context *ctx, int *n) {
    struct gr_zstrings *q = &ctx->topics_to_be_deleted;
    char **v = gr_malloc((size_t)(q->count ? q->count : 1) * sizeof *v);
    for (int i = 0; i < q->count; i++) v[i] = gr_strdup(q->names[i]);
    *n = q->count;
    return v;
}

static void free_names(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

static char *fmt_names(char *buf, size_t len, const char *const *names, int n) {
    size_t off = 0;
    if (len) buf[0] = 0;
    for (int i = 0; i < n && off < len; i++) {
        int w = snprintf(buf + off, len - off, "%s%s", i ? "," : "", names[i]);
        if (w < 0) break;
        off += (size_t)w;
    }
    if (off >= len && len > 4) strcpy(buf + len - 4, "...");
    return buf;
}

/* ---- replica queries over the context ---- */

static bool all_replicas_in_state(struct gr_ctrl_context *ctx, const char *topic, int st) {
    struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, topic);
    if (!t) return true;
    for (int i = 0; i < t->n_partitions; i++) {
        struct gr_ctrl_partition *p = &t->partitions[i];
        for (int r = 0; r < p->n_replicas; r++)
            if (gr_ctrl_replica_state_get(p, p->replicas[r]) != st) return false;
    }
    return true;
}

static bool any_replica_in_state(struct gr_ctrl_context *ctx, const char *topic, int st) {
    struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, topic);
    if (!t) return false;
    for (int i = 0; i < t->n_partitions; i++) {
        struct gr_ctrl_partition *p = &t->partitions[i];
        for (int r = 0; r < p->n_replicas; r++)
            if (gr_ctrl_replica_state_get(p, p->replicas[r]) == st) return true;
    }
    return false;
}

/* Replicas of topic in state st (or every replica when st < 0), appended to out. */
static void replicas_in_state(struct gr_ctrl_context *ctx, const char *topic, int st, struct gr_ctrl_replica_list *out) {
    struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, topic);
    if (!t) return;
    for (int i = 0; i < t->n_partitions; i++) {
        struct gr_ctrl_partition *p = &t->partitions[i];
        for (int r = 0; r < p->n_replicas; r++)
            if (st < 0 || gr_ctrl_replica_state_get(p, p->replicas[r]) == st)
                gr_ctrl_replica_list_add(out, t->name, p->partition, p->replicas[r]);
    }
}

static bool topic_has_offline_replica(struct gr_ctrl_context *ctx, const char *topic) {
    struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, topic);
    if (!t) return false;
    for (int i = 0; i < t->n_partitions; i++) {
        struct gr_ctrl_partition *p = &t->partitions[i];
        for (int r = 0; r < p->n_replicas; r++)
            if (!gr_ctrl_replica_online(ctx, p, p->replicas[r], false)) return true;
    }
    return false;
}

/* ---- lifecycle ---- */

struct gr_topic_deletion *gr_td_new(struct gr_ctrl_sm *sm, struct gr_zk_watches *watches, bool delete_topic_enable) {
    struct gr_topic_deletion *td = gr_calloc(1, sizeof *td);
    td->sm = sm;
    td->watches = watches;
    td->enabled = delete_topic_enable;
    return td;
}

static void um_clear(struct gr_topic_deletion *td) {
    for (int i = 0; i < td->n_um; i++) free(td->um[i].topic);
    td->n_um = 0;
    for (int i = 0; i < td->n_gone; i++) free(td->gone[i].topic);
    free(td->gone);
    td->gone = NULL;
    td->n_gone = 0;
}

void gr_td_free(struct gr_topic_deletion *td) {
    if (!td) return;
    set_free(&td->started);
    set_free(&td->ineligible);
    um_clear(td);
    free(td->um);
    free(td);
}

/* ---- metadata removals owed by brokers ---- */

static int um_find(const struct gr_topic_deletion *td, const char *topic, int32_t broker) {
    for (int i = 0; i < td->n_um; i++)
        if (td->um[i].broker == broker && strcmp(td->um[i].topic, topic) == 0) return i;
    return -1;
}

static void um_drop(struct gr_topic_deletion *td, int i) {
    free(td->um[i].topic);
    td->um[i] = td->um[--td->n_um];
}

/* topic's leader -2 went to broker at its registration epoch: wait for the answer. */
static void um_await(struct gr_topic_deletion *td, const char *topic, int32_t broker, int64_t epoch) {
    int i = um_find(td, topic, broker);
    if (i < 0) {
        if (td->n_um == td->cap_um) {
            td->cap_um = td->cap_um ? td->cap_um * 2 : 8;
            td->um = gr_realloc(td->um, (size_t)td->cap_um * sizeof *td->um);
        }
        i = td->n_um++;
        td->um[i].topic = gr_strdup(topic);
        td->um[i].broker = broker;
    }
    td->um[i].epoch = epoch;
}

/* Does an UpdateMetadata for topic carry anything (only partitions with a state go out)? */
static bool um_carries(struct gr_ctrl_context *ctx, const char *topic) {
    struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, topic);
    for (int i = 0; t && i < t->n_partitions; i++)
        if (t->partitions[i].has_state) return true;
    return false;
}

/* Every broker live now (the ones the last UpdateMetadata_all went to) owes topics' removals. */
static void um_await_live(struct gr_topic_deletion *td, char *const *topics, int n) {
    struct gr_ctrl_context *ctx = td->sm->ctx;
    for (int t = 0; t < n; t++)
        for (int b = 0; b < ctx->n_brokers && um_carries(ctx, topics[t]); b++)
            um_await(td, topics[t], ctx->brokers[b].id, ctx->brokers[b].epoch);
}

/* Does a broker live at the recorded epoch still owe topic's removal? */
static bool um_owed(const struct gr_topic_deletion *td, const char *topic) {
    struct gr_ctrl_context *ctx = td->sm->ctx;
    for (int i = 0; i < td->n_um; i++) {
        if (strcmp(td->um[i].topic, topic) != 0) continue;
        const struct gr_ctrl_broker *b = gr_ctrl_ctx_broker(ctx, td->um[i].broker);
        if (b && b->epoch == td->um[i].epoch) return true;
    }
    return false;
}

/* The topic is gone: nothing is awaited for it any more; brokers starting up get its removal. */
static void um_topic_completed(struct gr_topic_deletion *td, const char *topic, int32_t n_partitions) {
    for (int i = 0; i < td->n_um;)
        if (strcmp(td->um[i].topic, topic) == 0) um_drop(td, i);
        else i++;
    if (n_partitions <= 0) return;
    td->gone = gr_realloc(td->gone, (size_t)(td->n_gone + 1) * sizeof *td->gone);
    td->gone[td->n_gone].topic = gr_strdup(topic);
    td->gone[td->n_gone++].n_partitions = n_partitions;
}

bool gr_td_deletion_started(const struct gr_topic_deletion *td, const char *topic) {
    return set_has(&td->started, topic);
}

bool gr_td_topic_ineligible(const struct gr_topic_deletion *td, const char *topic) {
    return !td->enabled || set_has(&td->ineligible, topic);
}

/* ---- the deletion steps ---- */

static int resume_deletions(struct gr_topic_deletion *td);

void gr_td_mark_ineligible(struct gr_topic_deletion *td, const char *const *topics, int n, const char *reason) {
    if (!td->enabled) return;
    char buf[1024];
    const char **halted = gr_malloc((size_t)(n ? n : 1) * sizeof *halted);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (gr_ctrl_topic_queued_for_deletion(td->sm->ctx, topics[i]) && set_add(&td->ineligible, topics[i]))
            halted[k++] = topics[i];
    if (k) TD_LOG(GR_LOG_INFO, td, "Halted deletion of topics %s due to %s", fmt_names(buf, sizeof buf, halted, k), reason);
    free(halted);
}

int gr_td_resume_for_topics(struct gr_topic_deletion *td, const char *const *topics, int n) {
    if (!td->enabled) return 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!gr_ctrl_topic_queued_for_deletion(td->sm->ctx, topics[i])) continue;
        set_remove(&td->ineligible, topics[i]);
        k++;
    }
    return k ? resume_deletions(td) : 0;
}

int gr_td_fail_replica_deletion(struct gr_topic_deletion *td, const struct gr_ctrl_replica *r, int n) {
    if (!td->enabled) return 0;
    struct gr_ctrl_context *ctx = td->sm->ctx;
    struct gr_ctrl_replica_list failed = {0}, to_offline = {0};
    struct name_set topics = {0};
    for (int i = 0; i < n; i++) {
        if (!gr_ctrl_topic_queued_for_deletion(ctx, r[i].topic)) continue;
        /* A replica no longer assigned (a reassignment removed it; the answer to a request sent
         * while it was being added arrives late) is not one the deletion waits for. Kafka 2.7
         * halts the topic anyway, and as no start-up of that broker resumes it, the deletion
         * hangs until a controller failover; Gregor ignores it. */
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(ctx, r[i].topic, r[i].partition);
        if (!p || gr_ctrl_replica_index(p, r[i].replica) < 0) continue;
        gr_ctrl_replica_list_add(&failed, r[i].topic, r[i].partition, r[i].replica);
        set_add(&topics, r[i].topic);
        int st = p ? gr_ctrl_replica_state_get(p, r[i].replica) : GR_RS_NONEXISTENT;
        if (st == GR_RS_NEW || st == GR_RS_ONLINE)
            gr_ctrl_replica_list_add(&to_offline, r[i].topic, r[i].partition, r[i].replica);
    }
    int rc = 0;
    if (failed.n) {
        char buf[1024];
        TD_LOG(GR_LOG_DEBUG, td, "Deletion failed for %d replicas. Halting deletion for topics %s", failed.n,
               fmt_names(buf, sizeof buf, (const char *const *)topics.v, topics.n));
        /* the names in failed point into the context or the caller's list; both stay valid here */
        rc = gr_rsm_handle_state_changes(td->sm, to_offline.v, to_offline.n, GR_RS_OFFLINE);
        if (!rc) rc = gr_rsm_handle_state_changes(td->sm, failed.v, failed.n, GR_RS_DELETION_INELIGIBLE);
        if (!rc) {
            gr_td_mark_ineligible(td, (const char *const *)topics.v, topics.n, "replica deletion failure");
            rc = resume_deletions(td);
        }
    }
    gr_ctrl_replica_list_free(&failed);
    gr_ctrl_replica_list_free(&to_offline);
    set_free(&topics);
    return rc;
}

/* completeReplicaDeletion */
static int complete_replica_deletion(struct gr_topic_deletion *td, const struct gr_ctrl_replica *r, int n) {
    struct gr_ctrl_replica_list ok = {0};
    for (int i = 0; i < n; i++)
        if (gr_ctrl_topic_queued_for_deletion(td->sm->ctx, r[i].topic))
            gr_ctrl_replica_list_add(&ok, r[i].topic, r[i].partition, r[i].replica);
    TD_LOG(GR_LOG_DEBUG, td, "Deletion successfully completed for %d replicas", ok.n);
    int rc = gr_rsm_handle_state_changes(td->sm, ok.v, ok.n, GR_RS_DELETION_SUCCESSFUL);
    gr_ctrl_replica_list_free(&ok);
    if (!rc) rc = resume_deletions(td);
    return rc;
}

/* completeDeleteTopic */
static int complete_delete_topic(struct gr_topic_deletion *td, const char *topic) {
    struct gr_ctrl_sm *sm = td->sm;
    struct gr_ctrl_context *ctx = sm->ctx;
    if (td->watches) {
        /* mutePartitionModifications: so a re-created topic is seen by TopicChange first */
        char path[512];
        snprintf(path, sizeof path, "/brokers/topics/%s", topic);
        gr_zk_watches_unregister_node(td->watches, path);
    }
    struct gr_ctrl_replica_list done = {0};
    replicas_in_state(ctx, topic, GR_RS_DELETION_SUCCESSFUL, &done);
    int rc = gr_rsm_handle_state_changes(sm, done.v, done.n, GR_RS_NONEXISTENT);
    gr_ctrl_replica_list_free(&done);
    if (rc) return rc;
    rc = gr_kzk_delete_topic_guarded(sm->kzk, ctx->epoch_zk_version, topic);
    if (rc) {
        if (rc != GR_ECONTROLLER_MOVED)
            TD_LOG(GR_LOG_ERROR, td, "Cannot delete the znodes of topic %s: %s (retried on the next resume)", topic,
                   gr_kzk_strerror(rc));
        return rc;
    }
    /* controllerContext.removeTopic */
    char *name = gr_strdup(topic); /* topic may point into the queue */
    struct gr_ctrl_topic *gone = gr_ctrl_ctx_topic(ctx, name);
    um_topic_completed(td, name, gone ? gone->n_partitions : 0);
    gr_ctrl_ctx_remove_topic(ctx, name);
    queue_remove(ctx, name);
    set_remove(&td->started, name);
    set_remove(&td->ineligible, name);
    TD_LOG(GR_LOG_INFO, td, "Deletion of topic %s successfully completed", name);
    free(name);
    return 0;
}

/* Partitions of the given topics, appended (topic names borrowed from the context). */
static void partitions_of(struct gr_ctrl_context *ctx, char *const *topics, int n, struct gr_ctrl_tp_list *out) {
    for (int i = 0; i < n; i++) {
        struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, topics[i]);
        for (int j = 0; t && j < t->n_partitions; j++) gr_ctrl_tp_list_add(out, t->name, t->partitions[j].partition);
    }
}

/* onPartitionDeletion */
static int on_partition_deletion(struct gr_topic_deletion *td, char *const *topics, int n) {
    struct gr_ctrl_context *ctx = td->sm->ctx;
    struct gr_ctrl_replica_list dead = {0}, retry = {0};
    const char **ineligible = gr_malloc((size_t)(n ? n : 1) * sizeof *ineligible);
    int n_ineligible = 0;
    for (int i = 0; i < n; i++) {
        struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, topics[i]);
        if (!t) continue;
        bool any_dead = false;
        for (int j = 0; j < t->n_partitions; j++) {
            struct gr_ctrl_partition *p = &t->partitions[j];
            for (int r = 0; r < p->n_replicas; r++) {
                int32_t id = p->replicas[r];
                if (!gr_ctrl_replica_online(ctx, p, id, false)) {
                    gr_ctrl_replica_list_add(&dead, t->name, p->partition, id);
                    any_dead = true;
                } else if (gr_ctrl_replica_state_get(p, id) != GR_RS_DELETION_SUCCESSFUL) {
                    gr_ctrl_replica_list_add(&retry, t->name, p->partition, id);
                }
            }
        }
        if (any_dead) {
            TD_LOG(GR_LOG_DEBUG, td, "Dead replicas found for topic %s", t->name);
            ineligible[n_ineligible++] = t->name;
        }
    }
    int rc = gr_rsm_handle_state_changes(td->sm, dead.v, dead.n, GR_RS_DELETION_INELIGIBLE);
    /* StopReplica(delete=false) first so followers stop fetching, then StopReplica(delete=true) */
    if (!rc) rc = gr_rsm_handle_state_changes(td->sm, retry.v, retry.n, GR_RS_OFFLINE);
    if (!rc) rc = gr_rsm_handle_state_changes(td->sm, retry.v, retry.n, GR_RS_DELETION_STARTED);
    if (!rc && n_ineligible) gr_td_mark_ineligible(td, ineligible, n_ineligible, "offline replicas");
    free(ineligible);
    gr_ctrl_replica_list_free(&dead);
    gr_ctrl_replica_list_free(&retry);
    return rc;
}

/* onTopicDeletion */
static int on_topic_deletion(struct gr_topic_deletion *td, char *const *topics, int n) {
    struct gr_ctrl_sm *sm = td->sm;
    struct gr_ctrl_context *ctx = sm->ctx;
    char **unseen = gr_malloc((size_t)(n ? n : 1) * sizeof *unseen);
    int n_unseen = 0;
    for (int i = 0; i < n; i++)
        if (!set_has(&td->started, topics[i])) unseen[n_unseen++] = topics[i];
    int rc = 0;
    if (n_unseen) {
        struct gr_ctrl_tp_list parts = {0};
        partitions_of(ctx, unseen, n_unseen, &parts);
        rc = gr_psm_handle_state_changes(sm, parts.v, parts.n, GR_PS_OFFLINE, NULL, NULL);
        if (!rc) rc = gr_psm_handle_state_changes(sm, parts.v, parts.n, GR_PS_NONEXISTENT, NULL, NULL);
        gr_ctrl_tp_list_free(&parts);
        /* after the partition state changes (OfflinePartitionsCount excludes started topics) */
        if (!rc)
            for (int i = 0; i < n_unseen; i++) set_add(&td->started, unseen[i]);
    }
    free(unseen);
    if (rc) return rc;
    /* brokers stop serving the topic: UpdateMetadata with leader -2 (the topic is queued) */
    struct gr_ctrl_tp_list all = {0};
    partitions_of(ctx, topics, n, &all);
    gr_ctrl_send_update_metadata_all(sm, all.v, all.n);
    gr_ctrl_tp_list_free(&all);
    um_await_live(td, topics, n);
    return on_partition_deletion(td, topics, n);
}

/* retryDeletionForIneligibleReplicas */
static int retry_ineligible(struct gr_topic_deletion *td, char *const *topics, int n) {
    struct gr_ctrl_replica_list failed = {0};
    for (int i = 0; i < n; i++) replicas_in_state(td->sm->ctx, topics[i], GR_RS_DELETION_INELIGIBLE, &failed);
    char buf[1024];
    TD_LOG(GR_LOG_DEBUG, td, "Retrying deletion of topics %s since %d replicas were not successfully deleted",
           fmt_names(buf, sizeof buf, (const char *const *)topics, n), failed.n);
    int rc = gr_rsm_handle_state_changes(td->sm, failed.v, failed.n, GR_RS_OFFLINE);
    gr_ctrl_replica_list_free(&failed);
    return rc;
}

static bool eligible(struct gr_topic_deletion *td, const char *topic) {
    struct gr_ctrl_context *ctx = td->sm->ctx;
    return gr_ctrl_topic_queued_for_deletion(ctx, topic) && !any_replica_in_state(ctx, topic, GR_RS_DELETION_STARTED) &&
           !gr_td_topic_ineligible(td, topic);
}

/* resumeDeletions */
static int resume_deletions(struct gr_topic_deletion *td) {
    struct gr_ctrl_context *ctx = td->sm->ctx;
    int n;
    char **queued = queue_snapshot(ctx, &n);
    char **retry = gr_malloc((size_t)(n ? n : 1) * sizeof *retry);
    char **go = gr_malloc((size_t)(n ? n : 1) * sizeof *go);
    int n_retry = 0, n_go = 0, rc = 0;
    char buf[1024];
    if (n) TD_LOG(GR_LOG_INFO, td, "Handling deletion for topics %s", fmt_names(buf, sizeof buf, (const char *const *)queued, n));
    for (int i = 0; i < n && !rc; i++) {
        const char *topic = queued[i];
        if (all_replicas_in_state(ctx, topic, GR_RS_DELETION_SUCCESSFUL)) {
            if (um_owed(td, topic)) {
                /* every replica is deleted; a live broker has not yet confirmed it stopped
                 * serving the topic's metadata: completing now would lose that removal for good
                 * if this controller resigned before it arrived (simulation seeds 11275, 12754) */
                TD_LOG(GR_LOG_DEBUG, td, "Deletion of topic %s waits for UpdateMetadata answers", topic);
                continue;
            }
            rc = complete_delete_topic(td, topic);
            if (rc == GR_ECONTROLLER_MOVED) break;
            rc = 0; /* other failures: retried on the next resume */
        } else if (!any_replica_in_state(ctx, topic, GR_RS_DELETION_STARTED) &&
                   any_replica_in_state(ctx, topic, GR_RS_DELETION_INELIGIBLE)) {
            retry[n_retry++] = queued[i];
        }
        if (eligible(td, topic)) {
            TD_LOG(GR_LOG_INFO, td, "Deletion of topic %s (re)started", topic);
            go[n_go++] = queued[i];
        }
    }
    if (!rc && n_retry) rc = retry_ineligible(td, retry, n_retry);
    if (!rc && n_go) rc = on_topic_deletion(td, go, n_go);
    free(retry);
    free(go);
    free_names(queued, n);
    return rc;
}

/* ---- entry points ---- */

int gr_td_try(struct gr_topic_deletion *td) { return td->enabled ? resume_deletions(td) : 0; }

int gr_td_init(struct gr_topic_deletion *td) {
    struct gr_ctrl_sm *sm = td->sm;
    struct gr_ctrl_context *ctx = sm->ctx;
    set_clear(&td->started);
    set_clear(&td->ineligible);
    um_clear(td);
    gr_ctrl_ctx_clear_deletions(ctx);
    struct gr_zstrings names = {0};
    int rc = gr_kzk_get_topic_deletions(sm->kzk, true, &names);
    if (rc) return rc;
    char buf[2048];
    TD_LOG(GR_LOG_INFO, td, "Initializing manager with initial deletions: %s",
           fmt_names(buf, sizeof buf, (const char *const *)names.names, names.count));
    if (!td->enabled) {
        if (names.count) {
            TD_LOG(GR_LOG_INFO, td, "Removing %s since delete topic is disabled", buf);
            rc = gr_kzk_delete_topic_deletions_guarded(sm->kzk, ctx->epoch_zk_version,
                                                       (const char *const *)names.names, names.count);
        }
        gr_zstrings_free(&names);
        return rc;
    }
    for (int i = 0; i < names.count; i++) queue_add(ctx, names.names[i]);
    const char **inel = gr_malloc((size_t)(names.count ? names.count : 1) * sizeof *inel);
    int k = 0;
    for (int i = 0; i < names.count; i++)
        if (topic_has_offline_replica(ctx, names.names[i]))
            inel[k++] = names.names[i];
    for (int i = 0; i < k; i++) set_add(&td->ineligible, inel[i]);
    if (k) TD_LOG(GR_LOG_INFO, td, "Initial ineligible deletions: %s", fmt_names(buf, sizeof buf, inel, k));
    free(inel);
    gr_zstrings_free(&names);
    return 0;
}

int gr_td_process_topic_deletion(struct gr_topic_deletion *td) {
    struct gr_ctrl_sm *sm = td->sm;
    struct gr_ctrl_context *ctx = sm->ctx;
    struct gr_zstrings names = {0};
    int rc = gr_kzk_get_topic_deletions(sm->kzk, true, &names);
    if (rc) return rc;
    const char **unknown = gr_malloc((size_t)(names.count + 1) * sizeof *unknown);
    const char **known = gr_malloc((size_t)(names.count + 1) * sizeof *known);
    int n_unknown = 0, n_known = 0;
    for (int i = 0; i < names.count; i++) {
        if (gr_ctrl_ctx_topic(ctx, names.names[i])) known[n_known++] = names.names[i];
        else unknown[n_unknown++] = names.names[i];
    }
    char buf[2048];
    if (n_unknown) {
        TD_LOG(GR_LOG_WARN, td, "Ignoring request to delete non-existing topics %s",
               fmt_names(buf, sizeof buf, unknown, n_unknown));
        rc = gr_kzk_delete_topic_deletions_guarded(sm->kzk, ctx->epoch_zk_version, unknown, n_unknown);
    }
    if (!rc && n_known) {
        if (!td->enabled) {
            TD_LOG(GR_LOG_INFO, td, "Removing %s since delete topic is disabled", fmt_names(buf, sizeof buf, known, n_known));
            rc = gr_kzk_delete_topic_deletions_guarded(sm->kzk, ctx->epoch_zk_version, known, n_known);
        } else {
            TD_LOG(GR_LOG_INFO, td, "Starting topic deletion for topics %s", fmt_names(buf, sizeof buf, known, n_known));
            for (int i = 0; i < n_known; i++) queue_add(ctx, known[i]);
            rc = resume_deletions(td);
        }
    }
    free(unknown);
    free(known);
    gr_zstrings_free(&names);
    return rc;
}

/* Was (topic, partition) sent with DeletePartition = true in this StopReplica request? */
static bool request_deletes(const struct StopReplicaRequest *rq, const char *topic, int32_t partition) {
    if (!rq) return false;
    for (int i = 0; i < rq->TopicStatesCount; i++) {
        const struct StopReplicaRequest_StopReplicaTopicState *ts = &rq->TopicStates[i];
        if (!ts->TopicName || strcmp(ts->TopicName, topic) != 0) continue;
        for (int j = 0; j < ts->PartitionStatesCount; j++)
            if (ts->PartitionStates[j].PartitionIndex == partition) return ts->PartitionStates[j].DeletePartition;
    }
    return false;
}

int gr_td_process_stop_replica_response(struct gr_topic_deletion *td, struct gr_ctrl_event *ev) {
    struct gr_ctrl_response *r = ev->payload;
    if (!r || !r->body || r->api_key != GR_API_STOP_REPLICA) return 0;
    struct gr_ctrl_context *ctx = td->sm->ctx;
    const struct StopReplicaResponse *b = r->body;
    const struct StopReplicaRequest *rq = r->request; /* struct gr_ctrl_req starts with it */
    int32_t replica = ev->broker_id;
    /* The answer of an earlier registration of the broker (queued before the controller saw it
     * bounce): its start-up already restarted these deletions, whose own answers are still to
     * come; failing them now would halt the topic until the broker restarts again. */
    const struct gr_ctrl_broker *now = gr_ctrl_ctx_broker(ctx, replica);
    if (rq && now && rq->BrokerEpoch != -1 && rq->BrokerEpoch < now->epoch) {
        TD_LOG(GR_LOG_INFO, td, "Ignoring a StopReplica response of broker %d's earlier registration (epoch %lld, now %lld)",
               replica, (long long)rq->BrokerEpoch, (long long)now->epoch);
        return 0;
    }
    struct gr_ctrl_replica_list failed = {0}, ok = {0};
    /* topic pointers must outlive the state changes: borrow the context's names */
    for (int i = 0; i < b->PartitionErrorsCount; i++) {
        const struct StopReplicaResponse_StopReplicaPartitionError *pe = &b->PartitionErrors[i];
        if (!pe->TopicName || !set_has(&td->started, pe->TopicName)) continue;
        if (rq && !request_deletes(rq, pe->TopicName, pe->PartitionIndex)) continue;
        struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, pe->TopicName);
        if (!t) continue;
        if (b->ErrorCode != GR_KERR_NONE || pe->ErrorCode != GR_KERR_NONE)
            gr_ctrl_replica_list_add(&failed, t->name, pe->PartitionIndex, replica);
        else gr_ctrl_replica_list_add(&ok, t->name, pe->PartitionIndex, replica);
    }
    if (b->ErrorCode != GR_KERR_NONE && b->PartitionErrorsCount <= 0 && rq) {
        /* whole request refused (e.g. STALE_BROKER_EPOCH): every deleted partition failed */
        for (int i = 0; i < rq->TopicStatesCount; i++) {
            const struct StopReplicaRequest_StopReplicaTopicState *ts = &rq->TopicStates[i];
            if (!ts->TopicName || !set_has(&td->started, ts->TopicName)) continue;
            struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, ts->TopicName);
            for (int j = 0; t && j < ts->PartitionStatesCount; j++)
                if (ts->PartitionStates[j].DeletePartition)
                    gr_ctrl_replica_list_add(&failed, t->name, ts->PartitionStates[j].PartitionIndex, replica);
        }
    }
    gr_debug(LOGGER, "[Topic Deletion Manager %d] Delete topic callback invoked on StopReplica response from broker %d: "
             "error %s, %d deleted, %d failed",
             td->sm->controller_id, replica, gr_kerr_name(b->ErrorCode), ok.n, failed.n);
    int rc = 0;
    if (failed.n) {
        TD_LOG(GR_LOG_WARN, td, "Broker %d failed to delete %d replicas (first %s-%d); deletion halted for them", replica,
               failed.n, failed.v[0].topic, failed.v[0].partition);
        rc = gr_td_fail_replica_deletion(td, failed.v, failed.n);
    }
    /* completion may remove topics from the context: re-resolve names first */
    if (!rc && ok.n) {
        struct gr_ctrl_replica_list still = {0};
        for (int i = 0; i < ok.n; i++) {
            struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, ok.v[i].topic);
            if (t) gr_ctrl_replica_list_add(&still, t->name, ok.v[i].partition, ok.v[i].replica);
        }
        rc = complete_replica_deletion(td, still.v, still.n);
        gr_ctrl_replica_list_free(&still);
    }
    gr_ctrl_replica_list_free(&failed);
    gr_ctrl_replica_list_free(&ok);
    return rc;
}

/* Did this UpdateMetadata carry leader -2 for some partition of topic? */
static bool um_request_removes(const struct UpdateMetadataRequest *rq, const char *topic) {
    for (int i = 0; i < rq->TopicStatesCount; i++) {
        const struct UpdateMetadataRequest_UpdateMetadataTopicState *ts = &rq->TopicStates[i];
        if (!ts->TopicName || strcmp(ts->TopicName, topic) != 0) continue;
        for (int j = 0; j < ts->PartitionStatesCount; j++)
            if (ts->PartitionStates[j].Leader == GR_LEADER_DURING_DELETE) return true;
    }
    for (int i = 0; i < rq->UngroupedPartitionStatesCount; i++) {
        const struct UpdateMetadataRequest_UpdateMetadataPartitionState *ps = &rq->UngroupedPartitionStates[i];
        if (ps->TopicName && strcmp(ps->TopicName, topic) == 0 && ps->Leader == GR_LEADER_DURING_DELETE) return true;
    }
    return false;
}

int gr_td_process_update_metadata_response(struct gr_topic_deletion *td, struct gr_ctrl_event *ev) {
    struct gr_ctrl_response *r = ev->payload;
    if (!td->enabled || !r || !r->body || !r->request || r->api_key != GR_API_UPDATE_METADATA) return 0;
    const struct UpdateMetadataResponse *b = r->body;
    const struct UpdateMetadataRequest *rq = &((const struct gr_ctrl_req *)r->request)->u.um;
    if (b->ErrorCode != GR_KERR_NONE) return 0; /* fenced: the broker's start-up sends them again */
    bool any = false;
    for (int i = 0; i < td->n_um;) {
        struct um_wait *w = &td->um[i];
        if (w->broker == ev->broker_id && (rq->BrokerEpoch == -1 || rq->BrokerEpoch == w->epoch) &&
            um_request_removes(rq, w->topic)) {
            any = true;
            um_drop(td, i);
        } else {
            i++;
        }
    }
    return any ? resume_deletions(td) : 0;
}

/* Leader -2 for a deleted topic's partitions, to broker. A topic of that name created again
 * since (in this term) keeps its partitions: the same request carries their current state instead
 * (the start-up full UpdateMetadata had them already; a removal after it would drop them from the
 * broker's cache), so only old partitions the new topic lacks, or that have no leader yet, go. */
static void um_add_gone_removal(struct gr_topic_deletion *td, int32_t broker, const struct gone_topic *g) {
    gr_ctrl_batch_add_update_metadata_deleted(td->sm->batch, broker, g->topic, g->n_partitions);
    struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(td->sm->ctx, g->topic);
    if (!t || t->n_partitions <= 0) return;
    struct gr_kzk_tp *tps = gr_malloc((size_t)t->n_partitions * sizeof *tps);
    int n = 0;
    for (int j = 0; j < t->n_partitions; j++)
        if (t->partitions[j].partition < g->n_partitions && t->partitions[j].has_state)
            tps[n++] = (struct gr_kzk_tp){.topic = t->name, .partition = t->partitions[j].partition};
    gr_ctrl_batch_add_update_metadata(td->sm->batch, &broker, 1, tps, n);
    free(tps);
}

/* A broker that starts up owes the removal of every queued topic (its start-up UpdateMetadata
 * carries leader -2 for them), and gets the removal of every topic deleted in this term. */
static void um_brokers_started(struct gr_topic_deletion *td, const int32_t *ids, int n) {
    struct gr_ctrl_context *ctx = td->sm->ctx;
    for (int b = 0; b < n; b++) {
        const struct gr_ctrl_broker *br = gr_ctrl_ctx_broker(ctx, ids[b]);
        if (!br) continue;
        if (td->n_gone) {
            TD_LOG(GR_LOG_INFO, td, "Sending broker %d the removal of %d topics deleted while it may have been away",
                   ids[b], td->n_gone);
            gr_ctrl_batch_begin(td->sm->batch);
            for (int i = 0; i < td->n_gone; i++) um_add_gone_removal(td, ids[b], &td->gone[i]);
            gr_ctrl_batch_send(td->sm->batch);
        }
        for (int q = 0; q < ctx->topics_to_be_deleted.count; q++)
            if (um_carries(ctx, ctx->topics_to_be_deleted.names[q]))
                um_await(td, ctx->topics_to_be_deleted.names[q], ids[b], br->epoch);
    }
}

/* ---- flow hooks ---- */

/* onBrokerStartup: resume deletion of queued topics with replicas on the new brokers. */
static int hook_brokers_started(void *arg, const int32_t *ids, int n) {
    struct gr_topic_deletion *td = arg;
    if (!td->enabled) return 0;
    struct gr_ctrl_context *ctx = td->sm->ctx;
    um_brokers_started(td, ids, n);
    const char **topics = gr_malloc((size_t)(ctx->topics_to_be_deleted.count + 1) * sizeof *topics);
    int k = 0;
    for (int q = 0; q < ctx->topics_to_be_deleted.count; q++) {
        struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, ctx->topics_to_be_deleted.names[q]);
        bool hit = false;
        for (int i = 0; t && i < t->n_partitions && !hit; i++)
            for (int b = 0; b < n && !hit; b++)
                if (gr_ctrl_replica_index(&t->partitions[i], ids[b]) >= 0) hit = true;
        if (hit) topics[k++] = t->name;
    }
    int rc = 0;
    if (k) {
        /* names are borrowed from the context: copy, as resuming may complete (remove) topics */
        char **copy = gr_malloc((size_t)k * sizeof *copy);
        for (int i = 0; i < k; i++) copy[i] = gr_strdup(topics[i]);
        rc = gr_td_resume_for_topics(td, (const char *const *)copy, k);
        if (rc) TD_LOG(GR_LOG_ERROR, td, "Resuming deletions after broker start-up failed: %s", gr_kzk_strerror(rc));
        free_names(copy, k);
    }
    free(topics);
    return rc;
}

static int hook_replicas_offline(void *arg, const struct gr_ctrl_replica *r, int n) {
    struct gr_topic_deletion *td = arg;
    int rc = gr_td_fail_replica_deletion(td, r, n);
    if (rc) TD_LOG(GR_LOG_ERROR, td, "Failing replica deletion of offline replicas failed: %s", gr_kzk_strerror(rc));
    return rc;
}

/* Brokers that fail no longer hold up a completion (their removals become "missed"). */
static int hook_brokers_failed(void *arg, const int32_t *ids, int n) {
    struct gr_topic_deletion *td = arg;
    (void)ids;
    if (!td->enabled || n <= 0 || td->n_um == 0) return 0;
    int rc = resume_deletions(td);
    if (rc) TD_LOG(GR_LOG_ERROR, td, "Resuming deletions after broker failure failed: %s", gr_kzk_strerror(rc));
    return rc;
}

struct gr_ctrl_flow_hooks gr_td_flow_hooks(struct gr_topic_deletion *td) {
    struct gr_ctrl_flow_hooks h = {0};
    h.arg = td;
    h.brokers_started = hook_brokers_started;
    h.brokers_failed = hook_brokers_failed;
    h.replicas_offline_for_deletion = hook_replicas_offline;
    return h;
}

/* ---- metrics ---- */

void gr_td_counts(struct gr_topic_deletion *td, struct gr_td_counts *out) {
    struct gr_ctrl_context *ctx = td->sm->ctx;
    memset(out, 0, sizeof *out);
    out->topics_to_delete = ctx->topics_to_be_deleted.count;
    out->topics_ineligible = td->ineligible.n;
    for (int q = 0; q < ctx->topics_to_be_deleted.count; q++) {
        struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, ctx->topics_to_be_deleted.names[q]);
        for (int i = 0; t && i < t->n_partitions; i++) {
            struct gr_ctrl_partition *p = &t->partitions[i];
            for (int r = 0; r < p->n_replicas; r++) {
                int st = gr_ctrl_replica_state_get(p, p->replicas[r]);
                if (st != GR_RS_DELETION_SUCCESSFUL) out->replicas_to_delete++;
                if (st == GR_RS_DELETION_INELIGIBLE) out->replicas_ineligible++;
            }
        }
    }
}

int64_t gr_td_offline_partition_count(struct gr_topic_deletion *td) {
    struct gr_ctrl_context *ctx = td->sm->ctx;
    int64_t n = 0;
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur))) {
        if (set_has(&td->started, t->name)) continue;
        for (int i = 0; i < t->n_partitions; i++)
            if (t->partitions[i].state == GR_PS_OFFLINE) n++;
    }
    return n;
}
