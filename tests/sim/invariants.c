/* Invariants of the controller simulation.
 *
 * Checked as things happen (finer than "after every step"):
 *  - on every committed ZooKeeper transaction (zm on_commit hook):
 *      E1 /controller_epoch is never deleted and only ever increases;
 *      E2 it is bumped only by an election (the same multi creates /controller naming the
 *         writer), which records the epoch's winner (broker id + incarnation);
 *      E3 a guarded write (multi with a check of /controller_epoch) is made by the winner of the
 *         epoch that version belongs to: at most one controller acts per epoch;
 *      P1 partition states are written only by guarded multis, carrying the current controller
 *         epoch (a stale epoch is never accepted);
 *      P2 leader in ISR (or -1), ISR non-empty, no duplicates, ISR within the assigned replicas;
 *      P3 a partition's leader epoch never decreases;
 *  - on every request the controller sends (sim sender):
 *      E4 ControllerId is the sender and ControllerEpoch was won by this very incarnation;
 *      R1 a LeaderAndIsr never announces a leader epoch newer than ZooKeeper holds, and its
 *         leader is in its ISR.
 * Checked when the cluster is quiet (nothing queued or in flight, sessions settled):
 *      Q1 ZooKeeper's tree is well formed; registrations are exactly the live brokers;
 *      Q2 exactly one controller: /controller names a live broker that knows it is active with
 *         the current epoch; every other live broker knows who it is;
 *      Q3 the active controller's context equals ZooKeeper (brokers and epochs, topics,
 *         assignments, partition states);
 *      Q4 (--expect states) every partition with a live replica has a state; a partition is led
 *         by a live broker whenever one of its ISR replicas is live;
 *      Q5 (--expect metadata) every live broker's metadata cache equals ZooKeeper, and every live
 *         replica saw the current leader epoch through LeaderAndIsr;
 *      Q6 (--alter-isr, with Q5) a partition's leader knows the ISR and zkVersion ZooKeeper has.
 * Admin flows (docs/SIMULATION.md has the full table): U1 unclean elections only where enabled
 * (counted), D0 no new leader for a topic being deleted, D4 deletions only of deleted topics or
 * removed replicas, R2 assignments move as KIP-455 says (on commits/requests); O1, D1, D2, R5, R6,
 * N1, Q7 when quiet (inv_quiet_admin). R3, R4 and C1 are checked by admin.c on the answers. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "common/uuid.h"
#include "controller/request_batch.h"
#include "sim.h"

static char *ids_str(char *buf, size_t len, const int32_t *v, int n);

#define STATE_SUFFIX "/state"
#define TOPICS_PREFIX "/brokers/topics/"

void inv_init(struct sim *s) {
    s->max_epoch = -1;
    s->cur_epoch = -1;
    s->cur_epoch_version = -1;
    s->n_epoch_recs = 0;
    s->winners = NULL;
    s->actors = NULL;
    s->version_epoch = NULL;
    s->n_version_epoch = 0;
}

void inv_release(struct sim *s) {
    free(s->winners);
    free(s->actors);
    free(s->version_epoch);
    s->winners = s->actors = NULL;
    s->version_epoch = NULL;
}

static void ensure_epoch(struct sim *s, int32_t e) {
    if (e < s->n_epoch_recs) return;
    int n = e + 16;
    s->winners = gr_realloc(s->winners, (size_t)n * sizeof *s->winners);
    s->actors = gr_realloc(s->actors, (size_t)n * sizeof *s->actors);
    for (int i = s->n_epoch_recs; i < n; i++) {
        s->winners[i].broker = -1;
        s->winners[i].incarnation = 0;
        s->actors[i].broker = -1;
        s->actors[i].incarnation = 0;
    }
    s->n_epoch_recs = n;
}

static void set_version_epoch(struct sim *s, int32_t version, int32_t epoch) {
    if (version < 0) return;
    if (version >= s->n_version_epoch) {
        int n = version + 16;
        s->version_epoch = gr_realloc(s->version_epoch, (size_t)n * sizeof(int32_t));
        for (int i = s->n_version_epoch; i < n; i++) s->version_epoch[i] = -1;
        s->n_version_epoch = n;
    }
    s->version_epoch[version] = epoch;
}

/* E3/E4: broker (id, inc) acts under epoch e. */
static void record_act(struct sim *s, int32_t e, int32_t id, int inc, const char *what) {
    if (e < 0) {
        sim_fail(s, "E3 one controller per epoch", "broker %d (incarnation %d) %s under unknown epoch %d", id, inc,
                 what, e);
        return;
    }
    ensure_epoch(s, e);
    struct sim_epoch_rec *w = &s->winners[e];
    if (w->broker != id || w->incarnation != inc) {
        sim_fail(s, "E3 one controller per epoch",
                 "broker %d (incarnation %d) %s under epoch %d, which was won by broker %d (incarnation %d)", id, inc,
                 what, e, w->broker, w->incarnation);
        return;
    }
    if (s->actors[e].broker < 0) s->actors[e] = *w;
}

static int64_t parse_epoch(const char *d, int len) {
    int32_t e;
    if (!d || gr_kzk_controller_epoch_decode(d, (size_t)len, &e) != 0) return -1;
    return e;
}

/* "/brokers/topics/T/partitions/P/state" -> topic (malloc'd) and P. */
static bool parse_state_path(const char *path, char **topic, int32_t *partition) {
    size_t pl = strlen(TOPICS_PREFIX);
    if (strncmp(path, TOPICS_PREFIX, pl) != 0) return false;
    size_t n = strlen(path);
    size_t sl = strlen(STATE_SUFFIX);
    if (n <= pl + sl || strcmp(path + n - sl, STATE_SUFFIX) != 0) return false;
    const char *t = path + pl;
    const char *mid = strstr(t, "/partitions/");
    if (!mid) return false;
    const char *p = mid + strlen("/partitions/");
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || strcmp(end, STATE_SUFFIX) != 0) return false;
    *topic = gr_strndup(t, (size_t)(mid - t));
    *partition = (int32_t)v;
    return true;
}

/* The assignment of topic/partition as ZooKeeper holds it now (replicas copied into out). */
static bool zk_assignment(struct sim *s, const char *topic, int32_t partition, int32_t **out, int *n) {
    char path[512];
    snprintf(path, sizeof path, TOPICS_PREFIX "%s", topic);
    const char *d;
    int len;
    if (zm_peek(s->zm, path, &d, &len, NULL) != GR_ZOK || !d) return false;
    struct gr_kzk_topic_assignment a;
    memset(&a, 0, sizeof a);
    if (gr_kzk_topic_assignment_decode(d, (size_t)len, &a) != 0) return false;
    bool found = false;
    for (int i = 0; i < a.n_partitions; i++) {
        if (a.partitions[i].partition == partition) {
            *n = a.partitions[i].n_replicas;
            *out = gr_malloc(sizeof(int32_t) * (size_t)(*n + 1));
            memcpy(*out, a.partitions[i].replicas, sizeof(int32_t) * (size_t)*n);
            found = true;
        }
    }
    gr_kzk_topic_assignment_release(&a);
    return found;
}

static bool in_ids(const int32_t *v, int n, int32_t id) {
    for (int i = 0; i < n; i++)
        if (v[i] == id) return true;
    return false;
}

static bool zk_exists(struct sim *s, const char *path) { return zm_peek(s->zm, path, NULL, NULL, NULL) == GR_ZOK; }

static bool topic_queued(struct sim *s, const char *topic) {
    char p[512];
    snprintf(p, sizeof p, "/admin/delete_topics/%s", topic);
    return zk_exists(s, p);
}

/* Does /config/topics/T set unclean.leader.election.enable=true? */
static bool topic_unclean(struct sim *s, const char *topic) {
    char p[512];
    snprintf(p, sizeof p, "/config/topics/%s", topic);
    const char *d;
    int len;
    if (zm_peek(s->zm, p, &d, &len, NULL) != GR_ZOK || !d) return false;
    struct gr_kzk_config c = {0};
    bool on = false;
    if (gr_kzk_config_decode(d, (size_t)len, &c) == 0) {
        const char *v = gr_kzk_config_get(&c, "unclean.leader.election.enable");
        on = v && strcmp(v, "true") == 0;
    }
    gr_kzk_config_release(&c);
    return on;
}

static bool unclean_requested(struct sim *s, const char *topic, int32_t partition) {
    char tp[512];
    snprintf(tp, sizeof tp, "%s-%d", topic, partition);
    for (int i = 0; i < s->n_unclean_req; i++)
        if (strcmp(s->unclean_req[i], tp) == 0) return true;
    return false;
}

/* Is broker id's replica of topic-partition on its failed log dir (alive brokers only)? */
static bool replica_dir_failed(struct sim *s, int32_t id, const char *topic, int32_t partition) {
    struct sbroker *b = sim_broker(s, id);
    return b && b->alive && b->dir_failed && sim_dir_of(topic, partition) == 1;
}

/* a - b into out (order of a), returns the count */
static int ids_minus(const int32_t *a, int na, const int32_t *b, int nb, int32_t *out) {
    int k = 0;
    for (int i = 0; i < na; i++)
        if (!in_ids(b, nb, a[i])) out[k++] = a[i];
    return k;
}

static bool set_eq(const int32_t *a, int na, const int32_t *b, int nb) {
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (!in_ids(b, nb, a[i])) return false;
    return true;
}

static bool seq_eq(const int32_t *a, int na, const int32_t *b, int nb) {
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return false;
    return true;
}

/* R2 on a rewrite of /brokers/topics/T: every partition's reassignment moves as KIP-455 says.
 * reassigning -> reassigning keeps the origin (ORS = RS - AR, as a set); reassigning -> done ends
 * at the old target (RS - RR, completion) or the old origin (cancellation); done -> reassigning
 * starts from the old replicas; done -> done keeps the set of replicas (reassigning to a reordered
 * list completes at once). */
/* A replica a reassignment removes while its broker is not live for the writing controller gets
 * no StopReplica at all (Kafka 2.7's ControllerChannelManager drops requests to offline brokers),
 * so a broker process that still hosts it keeps a stray replica: recorded as missed for D2. The
 * writer's StopReplica(delete) goes out in the same event, before this write, so its context's
 * live brokers at the commit are the ones it decided with. */
/* The context of the controller whose session committed t, if that broker incarnation is
 * running with a controller (*wid: its id); NULL otherwise. */
static struct gr_ctrl_context *writer_context(struct sim *s, const struct zm_txn *t, int32_t *wid) {
    int winc;
    if (!sim_session_owner(s, t->session, wid, &winc)) return NULL;
    struct sbroker *w = sim_broker(s, *wid);
    if (!w || !w->alive || w->incarnation != winc || !w->ctrl) return NULL;
    return gr_controller_context(w->ctrl);
}

static void note_removed_while_offline(struct sim *s, const struct zm_txn *t, const char *topic,
                                       const struct gr_kzk_partition_assignment *op,
                                       const struct gr_kzk_partition_assignment *np) {
    int32_t wid;
    struct gr_ctrl_context *ctx = writer_context(s, t, &wid);
    if (!ctx) return;
    for (int r = 0; r < op->n_replicas; r++) {
        int32_t id = op->replicas[r];
        if (in_ids(np->replicas, np->n_replicas, id) || gr_ctrl_ctx_broker(ctx, id)) continue;
        struct sbroker *b = sim_broker(s, id);
        if (b && b->alive) node_note_missed(b, topic, op->partition);
    }
}

/* The topic's znodes are deleted (completeDeleteTopic). Kafka 2.7 sends a deletion's
 * UpdateMetadata (LeaderDuringDelete) only to the brokers live for the controller
 * (TopicDeletionManager.onTopicDeletion, or onBrokerStartup's full UpdateMetadata with the topic
 * marked being deleted), and nothing names the topic once it is gone: a broker process that is not
 * live for the writer now (its session expired and it is not registered again, or the controller
 * has not processed its new registration yet) never learns of the deletion, and its metadata cache
 * (MetadataCache.updateMetadata drops a partition only on LeaderDuringDelete) keeps what it had.
 * Gregor's controller sends such a broker the removal when it starts up again in the same term
 * (topic_deletion.h); the record names the writer's epoch, and Q5 accepts the stale partition
 * only once a later term rules. */
static void note_deleted_while_offline(struct sim *s, const struct zm_txn *t, const struct zm_change *c) {
    size_t pl = strlen(TOPICS_PREFIX);
    if (c->op != GR_ZOP_DELETE || strncmp(c->path, TOPICS_PREFIX, pl) != 0 || strchr(c->path + pl, '/')) return;
    const char *topic = c->path + pl;
    int32_t wid;
    struct gr_ctrl_context *ctx = writer_context(s, t, &wid);
    if (!ctx) return;
    for (int i = 0; i < s->n_brokers; i++) {
        struct sbroker *b = &s->brokers[i];
        if (!b->alive) continue;
        struct gr_ctrl_broker *cb = gr_ctrl_ctx_broker(ctx, b->id);
        char path[64];
        snprintf(path, sizeof path, "/brokers/ids/%d", b->id);
        struct gr_zstat st;
        if (cb && zm_peek(s->zm, path, NULL, NULL, &st) == GR_ZOK && st.czxid == cb->epoch) continue;
        for (int j = 0; j < b->n_parts; j++)
            if (b->parts[j].in_cache && strcmp(b->parts[j].topic, topic) == 0) {
                if (s->o.verbose)
                    printf("    [sim] broker %d is not live for controller %d as topic %s is deleted: its cache keeps "
                           "%s-%d\n",
                           b->id, wid, topic, topic, b->parts[j].partition);
                node_note_cache_missed(b, topic, b->parts[j].partition, ctx->epoch);
            }
    }
}

static void check_assignment_change(struct sim *s, const struct zm_txn *t, const struct zm_change *c) {
    size_t pl = strlen(TOPICS_PREFIX);
    if (c->op != GR_ZOP_SET || strncmp(c->path, TOPICS_PREFIX, pl) != 0 || strchr(c->path + pl, '/')) return;
    struct gr_kzk_topic_assignment o, n;
    memset(&o, 0, sizeof o);
    memset(&n, 0, sizeof n);
    if (!c->old_data || gr_kzk_topic_assignment_decode(c->old_data, (size_t)c->old_len, &o) != 0) return;
    if (gr_kzk_topic_assignment_decode(c->data, (size_t)c->len, &n) != 0) {
        sim_fail(s, "R2 reassignments follow KIP-455", "%s: unparsable assignment written", c->path);
        gr_kzk_topic_assignment_release(&o);
        return;
    }
    char b1[128], b2[128];
    for (int i = 0; i < n.n_partitions && !s->failed; i++) {
        const struct gr_kzk_partition_assignment *np = &n.partitions[i], *op = NULL;
        for (int k = 0; k < o.n_partitions; k++)
            if (o.partitions[k].partition == np->partition) op = &o.partitions[k];
        if (!op) continue;
        int32_t oors[64], otrs[64], nors[64];
        int n_oors = ids_minus(op->replicas, op->n_replicas, op->adding, op->n_adding, oors);
        int n_otrs = ids_minus(op->replicas, op->n_replicas, op->removing, op->n_removing, otrs);
        int n_nors = ids_minus(np->replicas, np->n_replicas, np->adding, np->n_adding, nors);
        bool was = op->n_adding || op->n_removing, is = np->n_adding || np->n_removing;
        const char *why = NULL;
        if (was && is && !set_eq(oors, n_oors, nors, n_nors)) why = "the origin replicas changed";
        else if (was && !is && !seq_eq(np->replicas, np->n_replicas, otrs, n_otrs) &&
                 !set_eq(np->replicas, np->n_replicas, oors, n_oors))
            why = "it ended at neither the target nor the origin";
        else if (!was && is && !set_eq(nors, n_nors, op->replicas, op->n_replicas)) why = "it did not start from the replicas";
        else if (!was && !is && !set_eq(np->replicas, np->n_replicas, op->replicas, op->n_replicas))
            why = "the replicas changed without a reassignment"; /* a reordering is a reassignment */
        if (why)
            sim_fail(s, "R2 reassignments follow KIP-455", "%s-%d: %s: [%s] (adding %d removing %d) -> [%s] (adding %d removing %d)",
                     n.topic ? n.topic : c->path + pl, np->partition, why,
                     ids_str(b1, sizeof b1, op->replicas, op->n_replicas), op->n_adding, op->n_removing,
                     ids_str(b2, sizeof b2, np->replicas, np->n_replicas), np->n_adding, np->n_removing);
        if (was && !is && !why) s->n_reassign_done++;
        if (!why) note_removed_while_offline(s, t, c->path + pl, op, np);
    }
    gr_kzk_topic_assignment_release(&o);
    gr_kzk_topic_assignment_release(&n);
}

/* P2 on one leader/ISR. */
static void check_lai_shape(struct sim *s, const char *what, const char *topic, int32_t partition, int32_t leader,
                            const int32_t *isr, int n_isr, const int32_t *replicas, int n_replicas) {
    if (n_isr <= 0) {
        sim_fail(s, "P2 leader in ISR within replicas", "%s %s-%d: empty ISR", what, topic, partition);
        return;
    }
    if (leader != -1 && !in_ids(isr, n_isr, leader)) {
        sim_fail(s, "P2 leader in ISR within replicas", "%s %s-%d: leader %d not in ISR", what, topic, partition,
                 leader);
        return;
    }
    for (int i = 0; i < n_isr; i++) {
        if (in_ids(isr, i, isr[i])) {
            sim_fail(s, "P2 leader in ISR within replicas", "%s %s-%d: ISR has %d twice", what, topic, partition,
                     isr[i]);
            return;
        }
        if (replicas && !in_ids(replicas, n_replicas, isr[i])) {
            sim_fail(s, "P2 leader in ISR within replicas", "%s %s-%d: ISR member %d is not an assigned replica",
                     what, topic, partition, isr[i]);
            return;
        }
    }
}

static bool txn_guard(const struct zm_txn *t, int32_t *version) {
    for (int i = 0; i < t->n_checks; i++) {
        if (strcmp(t->checks[i].path, "/controller_epoch") == 0) {
            *version = t->checks[i].version;
            return true;
        }
    }
    return false;
}

static void check_state_change(struct sim *s, const struct zm_txn *t, const struct zm_change *c, bool guarded) {
    char *topic = NULL;
    int32_t partition;
    if (!parse_state_path(c->path, &topic, &partition)) return;
    if (!guarded && !t->session_close) {
        sim_fail(s, "P1 partition states only through guarded writes", "%s %s without a /controller_epoch check",
                 c->op == GR_ZOP_DELETE ? "delete of" : "write of", c->path);
        free(topic);
        return;
    }
    if (c->op == GR_ZOP_DELETE) {
        free(topic);
        return;
    }
    struct gr_kzk_leader_and_isr now, old;
    memset(&now, 0, sizeof now);
    memset(&old, 0, sizeof old);
    if (gr_kzk_partition_state_decode(c->data, (size_t)c->len, &now) != 0) {
        sim_fail(s, "P2 leader in ISR within replicas", "%s: unparsable state written: %.*s", c->path, c->len,
                 c->data ? c->data : "");
        free(topic);
        return;
    }
    if (now.controller_epoch != s->cur_epoch) {
        sim_fail(s, "P1 no stale controller epoch accepted", "%s written with controller_epoch %d while the epoch is %d",
                 c->path, now.controller_epoch, s->cur_epoch);
    }
    int32_t *replicas = NULL;
    int n_replicas = 0;
    bool have = zk_assignment(s, topic, partition, &replicas, &n_replicas);
    if (!have) {
        sim_fail(s, "P2 leader in ISR within replicas", "%s written but the topic's assignment has no partition %d",
                 c->path, partition);
    } else {
        check_lai_shape(s, "ZooKeeper state", topic, partition, now.leader, now.isr, now.n_isr, replicas, n_replicas);
    }
    free(replicas);
    if (c->op == GR_ZOP_SET && c->old_data && gr_kzk_partition_state_decode(c->old_data, (size_t)c->old_len, &old) == 0) {
        if (now.leader_epoch < old.leader_epoch)
            sim_fail(s, "P3 leader epoch never decreases", "%s: leader epoch %d -> %d", c->path, old.leader_epoch,
                     now.leader_epoch);
        bool new_leader = now.leader != -1 && now.leader != old.leader;
        if (new_leader && !in_ids(old.isr, old.n_isr, now.leader)) {
            /* U1: only an unclean election may pick a replica outside the ISR, and it is recorded */
            if (topic_unclean(s, topic) || unclean_requested(s, topic, partition))
                s->n_unclean_elections++;
            else
                sim_fail(s, "U1 clean elections pick an ISR member",
                         "%s: leader %d elected outside the ISR of the previous state (leader %d) without unclean "
                         "election enabled",
                         c->path, now.leader, old.leader);
        }
        /* D0: the writer knows the topic is being deleted: no new leader (its reassignments are
         * frozen too) */
        struct sbroker *w = NULL;
        int32_t wid;
        int winc;
        if (new_leader && sim_session_owner(s, t->session, &wid, &winc)) w = sim_broker(s, wid);
        if (w && w->alive && w->incarnation == winc && w->ctrl) {
            struct gr_ctrl_context *ctx = gr_controller_context(w->ctrl);
            if (gr_ctrl_topic_queued_for_deletion(ctx, topic) && !s->failed)
                sim_fail(s, "D0 no new leader for a topic being deleted",
                         "%s: controller %d elected leader %d (was %d) while deleting topic %s", c->path, wid,
                         now.leader, old.leader, topic);
        }
        gr_kzk_leader_and_isr_release(&old);
    }
    gr_kzk_leader_and_isr_release(&now);
    free(topic);
}

void inv_on_commit(void *arg, const struct zm_txn *t) {
    struct sim *s = arg;
    if (zm_down(s->zm)) {
        sim_fail(s, "Z1 nothing is written while the ensemble is down",
                 "a transaction of session 0x%" PRIx64 " (%d changes, first %s) committed during an outage",
                 (uint64_t)t->session, t->n_changes, t->n_changes ? t->changes[0].path : "-");
        return;
    }
    int32_t wid = -1;
    int winc = 0;
    bool is_broker = sim_session_owner(s, t->session, &wid, &winc);
    bool created_controller = false;
    int32_t controller_in_txn = -1;
    for (int i = 0; i < t->n_changes; i++) {
        const struct zm_change *c = &t->changes[i];
        if (strcmp(c->path, "/controller") == 0 && c->op == GR_ZOP_CREATE) {
            created_controller = true;
            if (c->data) gr_kzk_controller_decode(c->data, (size_t)c->len, &controller_in_txn);
        }
    }
    int32_t guard_version = -1;
    bool guarded = txn_guard(t, &guard_version);
    for (int i = 0; i < t->n_changes; i++) {
        const struct zm_change *c = &t->changes[i];
        if (strcmp(c->path, "/controller_epoch") == 0) {
            if (c->op == GR_ZOP_DELETE) {
                sim_fail(s, "E1 controller epoch monotonic", "/controller_epoch deleted");
                continue;
            }
            int64_t e = parse_epoch(c->data, c->len);
            if (e < 0) {
                sim_fail(s, "E1 controller epoch monotonic", "/controller_epoch set to unparsable '%.*s'", c->len,
                         c->data ? c->data : "");
                continue;
            }
            if (c->op == GR_ZOP_SET) {
                if (e <= s->max_epoch)
                    sim_fail(s, "E1 controller epoch monotonic", "/controller_epoch %d -> %" PRId64, s->max_epoch, e);
                if (!created_controller || !is_broker || controller_in_txn != wid)
                    sim_fail(s, "E2 epoch bumped only by an election",
                             "/controller_epoch set to %" PRId64 " by session 0x%" PRIx64
                             " without creating /controller for itself",
                             e, (uint64_t)t->session);
                ensure_epoch(s, (int32_t)e);
                if (s->winners[e].broker >= 0)
                    sim_fail(s, "E2 epoch bumped only by an election", "epoch %" PRId64 " won twice", e);
                s->winners[e].broker = wid;
                s->winners[e].incarnation = winc;
                s->n_elections++;
            }
            set_version_epoch(s, c->stat.version, (int32_t)e);
            s->cur_epoch = (int32_t)e;
            s->cur_epoch_version = c->stat.version;
            if (e > s->max_epoch) s->max_epoch = (int32_t)e;
        }
    }
    /* A broker that did not win the guard's epoch deleting /controller while it names that broker,
     * conditional on no election since its read of /controller_epoch
     * (gr_kzk_delete_controller_if_named: reclaim_controller), gives up a claim of its own; it
     * does not act as the controller of that epoch (not E3's). */
    int32_t named = -1;
    int32_t ge = guard_version >= 0 && guard_version < s->n_version_epoch ? s->version_epoch[guard_version] : -1;
    if (guarded && is_broker && ge >= 0 && t->n_changes == 1 && t->changes[0].op == GR_ZOP_DELETE &&
        strcmp(t->changes[0].path, "/controller") == 0 && t->changes[0].old_data &&
        gr_kzk_controller_decode(t->changes[0].old_data, (size_t)t->changes[0].old_len, &named) == 0 &&
        named == wid) {
        ensure_epoch(s, ge);
        if (s->winners[ge].broker != wid || s->winners[ge].incarnation != winc) guarded = false;
    }
    if (guarded) {
        int32_t e = guard_version >= 0 && guard_version < s->n_version_epoch ? s->version_epoch[guard_version] : -1;
        if (!is_broker)
            sim_fail(s, "E3 one controller per epoch", "guarded write by non-broker session 0x%" PRIx64,
                     (uint64_t)t->session);
        else
            record_act(s, e, wid, winc, "wrote to ZooKeeper");
    }
    for (int i = 0; i < t->n_changes && !s->failed; i++) check_state_change(s, t, &t->changes[i], guarded);
    for (int i = 0; i < t->n_changes && !s->failed; i++) check_assignment_change(s, t, &t->changes[i]);
    for (int i = 0; i < t->n_changes && !s->failed; i++) note_deleted_while_offline(s, t, &t->changes[i]);
}

/* Q3 also: the context's indexes (kept incrementally) agree with a full count: partitions being
 * reassigned, and each topic's queued-for-deletion flag with the queue of names. */
static void check_context_indexes(struct sim *s, struct gr_ctrl_context *ctx) {
    int64_t reassigning = 0;
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur))) {
        for (int i = 0; i < t->n_partitions; i++)
            reassigning += t->partitions[i].n_adding > 0 || t->partitions[i].n_removing > 0;
        bool listed = false;
        for (int q = 0; q < ctx->topics_to_be_deleted.count; q++) listed |= strcmp(ctx->topics_to_be_deleted.names[q], t->name) == 0;
        if (listed != t->queued_for_deletion) {
            sim_fail(s, "Q3 context equals ZooKeeper", "topic %s: queued-for-deletion flag %d, queue %d", t->name,
                     t->queued_for_deletion, listed);
            return;
        }
    }
    if (reassigning != ctx->n_reassigning)
        sim_fail(s, "Q3 context equals ZooKeeper", "context counts %lld partitions being reassigned, it has %lld",
                 (long long)ctx->n_reassigning, (long long)reassigning);
}

/* ---- requests ---- */

/* ZooKeeper's leader epoch of a partition, -1 if it has no state. */
static int32_t zk_leader_epoch(struct sim *s, const char *topic, int32_t partition) {
    char path[512];
    snprintf(path, sizeof path, TOPICS_PREFIX "%s/partitions/%d/state", topic, partition);
    const char *d;
    int len;
    if (zm_peek(s->zm, path, &d, &len, NULL) != GR_ZOK || !d) return -1;
    struct gr_kzk_leader_and_isr l;
    memset(&l, 0, sizeof l);
    if (gr_kzk_partition_state_decode(d, (size_t)len, &l) != 0) return -1;
    int32_t e = l.leader_epoch;
    gr_kzk_leader_and_isr_release(&l);
    return e;
}

/* D4: a replica is deleted (StopReplica delete=true) only when its topic is being deleted (or is
 * gone), or the broker is not in the partition's target replicas (removed by a reassignment). */
static void check_stop_replica_delete(struct sim *s, int32_t to, const struct StopReplicaRequest *r) {
    for (int32_t t = 0; t < r->TopicStatesCount && !s->failed; t++) {
        const struct StopReplicaRequest_StopReplicaTopicState *ts = &r->TopicStates[t];
        for (int32_t i = 0; i < ts->PartitionStatesCount && !s->failed; i++) {
            if (!ts->PartitionStates[i].DeletePartition) continue;
            if (topic_queued(s, ts->TopicName)) continue;
            char path[512];
            snprintf(path, sizeof path, TOPICS_PREFIX "%s", ts->TopicName);
            const char *d;
            int len;
            if (zm_peek(s->zm, path, &d, &len, NULL) != GR_ZOK || !d) continue;
            struct gr_kzk_topic_assignment a;
            memset(&a, 0, sizeof a);
            if (gr_kzk_topic_assignment_decode(d, (size_t)len, &a) != 0) continue;
            for (int k = 0; k < a.n_partitions; k++) {
                const struct gr_kzk_partition_assignment *pa = &a.partitions[k];
                if (pa->partition != ts->PartitionStates[i].PartitionIndex) continue;
                int32_t trs[64];
                int n = ids_minus(pa->replicas, pa->n_replicas, pa->removing, pa->n_removing, trs);
                char b1[128];
                if (in_ids(trs, n, to))
                    sim_fail(s, "D4 replicas are deleted only by deletions and reassignments",
                             "controller %d deletes %s-%d on broker %d, a target replica [%s] of a topic not being "
                             "deleted",
                             r->ControllerId, ts->TopicName, pa->partition, to, ids_str(b1, sizeof b1, trs, n));
            }
            gr_kzk_topic_assignment_release(&a);
        }
    }
}

void inv_on_send(struct sim *s, struct sbroker *from, int32_t to, int16_t api_key, const void *req) {
    int32_t cid, cepoch;
    const struct gr_ctrl_req *box = req;
    switch (api_key) {
    case GR_API_LEADER_AND_ISR: cid = box->u.lai.ControllerId; cepoch = box->u.lai.ControllerEpoch; break;
    case GR_API_UPDATE_METADATA: cid = box->u.um.ControllerId; cepoch = box->u.um.ControllerEpoch; break;
    case GR_API_STOP_REPLICA: cid = box->u.sr.ControllerId; cepoch = box->u.sr.ControllerEpoch; break;
    default: return;
    }
    if (cid != from->id) {
        sim_fail(s, "E4 requests carry the sender's identity", "broker %d sent api %d with ControllerId %d", from->id,
                 api_key, cid);
        return;
    }
    record_act(s, cepoch, from->id, from->incarnation, "sent a control request");
    if (api_key == GR_API_STOP_REPLICA) check_stop_replica_delete(s, to, &box->u.sr);
    if (api_key == GR_API_LEADER_AND_ISR) {
        const struct LeaderAndIsrRequest *r = &box->u.lai;
        for (int32_t t = 0; t < r->TopicStatesCount; t++) {
            const struct LeaderAndIsrRequest_LeaderAndIsrTopicState *ts = &r->TopicStates[t];
            for (int32_t i = 0; i < ts->PartitionStatesCount; i++) {
                const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *ps = &ts->PartitionStates[i];
                int32_t ze = zk_leader_epoch(s, ts->TopicName, ps->PartitionIndex);
                /* a zombie controller (an older epoch) may still announce a state it read before
                 * the partition's topic was deleted: the state znode is gone, not newer */
                bool gone_for_zombie = ze == -1 && cepoch < s->cur_epoch;
                if (ps->LeaderEpoch > ze && !gone_for_zombie)
                    sim_fail(s, "R1 LeaderAndIsr follows ZooKeeper",
                             "broker %d announced %s-%d leader epoch %d but ZooKeeper has %d", from->id, ts->TopicName,
                             ps->PartitionIndex, ps->LeaderEpoch, ze);
                /* Kafka's reassignment (B3) announces RS = TRS while the ISR still holds the
                 * replicas being removed (B4 takes them out next): the ISR must be within the
                 * announced replicas or ZooKeeper's full assignment */
                int32_t rs[128];
                int n_rs = 0;
                for (int32_t k = 0; k < ps->ReplicasCount && n_rs < 64; k++) rs[n_rs++] = ps->Replicas[k];
                int32_t *zr = NULL;
                int n_zr = 0;
                if (zk_assignment(s, ts->TopicName, ps->PartitionIndex, &zr, &n_zr))
                    for (int k = 0; k < n_zr && n_rs < 128; k++)
                        if (!in_ids(rs, n_rs, zr[k])) rs[n_rs++] = zr[k];
                free(zr);
                check_lai_shape(s, "LeaderAndIsr", ts->TopicName, ps->PartitionIndex, ps->Leader, ps->Isr,
                                ps->IsrCount, rs, n_rs);
            }
        }
    }
}

void inv_after_step(struct sim *s) {
    /* /controller_epoch as tracked must match the tree (cheap: one lookup). */
    const char *d;
    int len;
    struct gr_zstat st;
    if (zm_peek(s->zm, "/controller_epoch", &d, &len, &st) == GR_ZOK) {
        int64_t e = parse_epoch(d, len);
        if (e != s->cur_epoch || st.version != s->cur_epoch_version)
            sim_fail(s, "E1 controller epoch monotonic", "tracked epoch %d v%d but ZooKeeper has %" PRId64 " v%d",
                     s->cur_epoch, s->cur_epoch_version, e, st.version);
    }
}

/* ======================================================================================
 * Quiet checks
 * ====================================================================================== */

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static bool same_ids(const int32_t *a, int na, const int32_t *b, int nb) {
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return false;
    return true;
}

static bool same_set(const int32_t *a, int na, const int32_t *b, int nb) {
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (!in_ids(b, nb, a[i])) return false;
    return true;
}

static char *ids_str(char *buf, size_t len, const int32_t *v, int n) {
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < n && off + 12 < len; i++) off += (size_t)snprintf(buf + off, len - off, "%s%d", i ? "," : "", v[i]);
    return buf;
}

static struct sbroker *alive_broker(struct sim *s, int32_t id) {
    for (int i = 0; i < s->n_brokers; i++)
        if (s->brokers[i].id == id && s->brokers[i].alive) return &s->brokers[i];
    return NULL;
}

/* Q3/Q4/Q5 for one topic. */
static void check_topic(struct sim *s, struct sbroker *act, const char *topic, const int32_t *live, int n_live) {
    char path[512], b1[128], b2[128];
    snprintf(path, sizeof path, TOPICS_PREFIX "%s", topic);
    const char *d;
    int len;
    if (zm_peek(s->zm, path, &d, &len, NULL) != GR_ZOK || !d) return;
    struct gr_kzk_topic_assignment a;
    memset(&a, 0, sizeof a);
    if (gr_kzk_topic_assignment_decode(d, (size_t)len, &a) != 0) {
        sim_fail(s, "Q3 context equals ZooKeeper", "%s holds unparsable data", path);
        return;
    }
    struct gr_ctrl_context *ctx = gr_controller_context(act->ctrl);
    struct gr_ctrl_topic *ct = gr_ctrl_ctx_topic(ctx, topic);
    if (!ct) {
        sim_fail(s, "Q3 context equals ZooKeeper", "controller %d does not know topic %s", act->id, topic);
        goto out;
    }
    if (ct->n_partitions != a.n_partitions) {
        sim_fail(s, "Q3 context equals ZooKeeper", "topic %s: controller has %d partitions, ZooKeeper %d", topic,
                 ct->n_partitions, a.n_partitions);
        goto out;
    }
    bool queued = topic_queued(s, topic), unclean = topic_unclean(s, topic);
    for (int i = 0; i < a.n_partitions && !s->failed; i++) {
        const struct gr_kzk_partition_assignment *pa = &a.partitions[i];
        struct gr_ctrl_partition *cp = gr_ctrl_topic_partition(ct, pa->partition);
        if (!cp || !same_ids(cp->replicas, cp->n_replicas, pa->replicas, pa->n_replicas) ||
            !same_ids(cp->adding, cp->n_adding, pa->adding, pa->n_adding) ||
            !same_ids(cp->removing, cp->n_removing, pa->removing, pa->n_removing)) {
            sim_fail(s, "Q3 context equals ZooKeeper",
                     "%s-%d: controller replicas [%s] (adding %d, removing %d), ZooKeeper [%s] (adding %d, removing %d)",
                     topic, pa->partition, cp ? ids_str(b1, sizeof b1, cp->replicas, cp->n_replicas) : "missing",
                     cp ? cp->n_adding : -1, cp ? cp->n_removing : -1,
                     ids_str(b2, sizeof b2, pa->replicas, pa->n_replicas), pa->n_adding, pa->n_removing);
            break;
        }
        char sp[600];
        snprintf(sp, sizeof sp, "%s/partitions/%d/state", path, pa->partition);
        const char *sd;
        int sl;
        struct gr_zstat st;
        bool zk_has = zm_peek(s->zm, sp, &sd, &sl, &st) == GR_ZOK && sd;
        if (!zk_has) {
            if (cp->has_state)
                sim_fail(s, "Q3 context equals ZooKeeper", "%s-%d: controller has a state, ZooKeeper none", topic,
                         pa->partition);
            else if (s->o.expect_states && !queued) {
                /* Kafka leaves a partition New (no state) while none of its replicas is live */
                bool any_live = false;
                for (int k = 0; k < pa->n_replicas; k++) any_live |= in_ids(live, n_live, pa->replicas[k]);
                if (any_live)
                    sim_fail(s, "Q4 every partition has a state",
                             "%s-%d has no state in a quiet cluster although replica(s) [%s] include a live broker",
                             topic, pa->partition, ids_str(b1, sizeof b1, pa->replicas, pa->n_replicas));
            }
            continue;
        }
        struct gr_kzk_leader_and_isr z;
        memset(&z, 0, sizeof z);
        if (gr_kzk_partition_state_decode(sd, (size_t)sl, &z) != 0) {
            sim_fail(s, "Q3 context equals ZooKeeper", "%s unparsable", sp);
            continue;
        }
        z.zk_version = st.version;
        /* controller_epoch is not compared: like Kafka, the controller caches partitions it did
         * not need to rewrite (e.g. an offline replica already out of the ISR) with its own epoch */
        if (!cp->has_state || cp->lai.leader != z.leader || cp->lai.leader_epoch != z.leader_epoch ||
            cp->lai.zk_version != z.zk_version ||
            !same_ids(cp->lai.isr, cp->lai.n_isr, z.isr, z.n_isr)) {
            sim_fail(s, "Q3 context equals ZooKeeper",
                     "%s-%d: controller {leader %d epoch %d isr [%s] cepoch %d v%d}, ZooKeeper {leader %d epoch %d isr "
                     "[%s] cepoch %d v%d}",
                     topic, pa->partition, cp->has_state ? cp->lai.leader : -9, cp->lai.leader_epoch,
                     ids_str(b1, sizeof b1, cp->lai.isr, cp->lai.n_isr), cp->lai.controller_epoch, cp->lai.zk_version,
                     z.leader, z.leader_epoch, ids_str(b2, sizeof b2, z.isr, z.n_isr), z.controller_epoch,
                     z.zk_version);
        }
        if (!s->failed && z.leader != -1 && replica_dir_failed(s, z.leader, topic, pa->partition))
            sim_fail(s, "O1 no leader on an offline log dir", "%s-%d is led by broker %d from its failed log dir", topic,
                     pa->partition, z.leader);
        if (!s->failed && s->o.expect_states && !queued) {
            /* a usable replica: live broker, replica not on a failed log dir */
            bool isr_live = false, any_live = false;
            for (int k = 0; k < z.n_isr; k++)
                isr_live |= in_ids(live, n_live, z.isr[k]) && !replica_dir_failed(s, z.isr[k], topic, pa->partition);
            for (int k = 0; k < pa->n_replicas; k++)
                any_live |= in_ids(live, n_live, pa->replicas[k]) &&
                            !replica_dir_failed(s, pa->replicas[k], topic, pa->partition);
            if (z.leader != -1 && !in_ids(live, n_live, z.leader))
                sim_fail(s, "Q4 partitions led by live brokers", "%s-%d led by dead broker %d", topic, pa->partition,
                         z.leader);
            else if (z.leader == -1 && isr_live)
                sim_fail(s, "Q4 partitions led by live brokers", "%s-%d offline although ISR [%s] has a live broker",
                         topic, pa->partition, ids_str(b1, sizeof b1, z.isr, z.n_isr));
            /* (a partition that went offline before a reassignment added live replicas is not
             * re-elected until the next broker change, as in Kafka) */
            else if (z.leader == -1 && unclean && any_live && !pa->n_adding)
                sim_fail(s, "Q4 partitions led by live brokers",
                         "%s-%d offline although unclean election is enabled and replicas [%s] include a live one",
                         topic, pa->partition, ids_str(b1, sizeof b1, pa->replicas, pa->n_replicas));
        }
        if (!s->failed && s->o.alter_partition && (pa->n_adding || pa->n_removing) && z.leader != -1 && !queued) {
            /* R6: a reassignment whose target replicas are all usable completes */
            int32_t trs[64];
            int n = ids_minus(pa->replicas, pa->n_replicas, pa->removing, pa->n_removing, trs);
            bool all = true;
            for (int k = 0; k < n; k++)
                all &= in_ids(live, n_live, trs[k]) && !replica_dir_failed(s, trs[k], topic, pa->partition);
            if (all)
                sim_fail(s, "R6 reassignments complete",
                         "%s-%d is still being reassigned to [%s] (ISR [%s], leader %d) although every target is live",
                         topic, pa->partition, ids_str(b1, sizeof b1, trs, n), ids_str(b2, sizeof b2, z.isr, z.n_isr),
                         z.leader);
        }
        if (!s->failed && s->o.expect_metadata && !queued) {
            for (int k = 0; k < s->n_brokers && !s->failed; k++) {
                struct sbroker *b = &s->brokers[k];
                if (!b->alive) continue;
                struct sb_part *bp = NULL;
                for (int j = 0; j < b->n_parts; j++)
                    if (b->parts[j].partition == pa->partition && strcmp(b->parts[j].topic, topic) == 0)
                        bp = &b->parts[j];
                if (!bp || !bp->in_cache || bp->m_leader != z.leader || bp->m_leader_epoch != z.leader_epoch ||
                    !same_ids(bp->m_isr, bp->m_n_isr, z.isr, z.n_isr)) {
                    sim_fail(s, "Q5 broker metadata converges",
                             "broker %d caches %s-%d as {leader %d epoch %d isr [%s]}, ZooKeeper {leader %d epoch %d "
                             "isr [%s]}",
                             b->id, topic, pa->partition, bp && bp->in_cache ? bp->m_leader : -9,
                             bp ? bp->m_leader_epoch : -9, bp ? ids_str(b1, sizeof b1, bp->m_isr, bp->m_n_isr) : "",
                             z.leader, z.leader_epoch, ids_str(b2, sizeof b2, z.isr, z.n_isr));
                    break;
                }
                if (s->o.alter_partition && bp->has_replica && z.leader == b->id && bp->r_leader == b->id &&
                    (!same_ids(bp->r_isr, bp->r_n_isr, z.isr, z.n_isr) || bp->r_zk_version != st.version)) {
                    sim_fail(s, "Q6 leaders know their ISR",
                             "leader %d of %s-%d has ISR [%s] version %d, ZooKeeper [%s] version %d", b->id, topic,
                             pa->partition, ids_str(b1, sizeof b1, bp->r_isr, bp->r_n_isr), bp->r_zk_version,
                             ids_str(b2, sizeof b2, z.isr, z.n_isr), st.version);
                    break;
                }
                if (in_ids(pa->replicas, pa->n_replicas, b->id) && z.leader != -1 &&
                    !replica_dir_failed(s, b->id, topic, pa->partition) &&
                    (!bp->has_replica || bp->r_leader_epoch != z.leader_epoch))
                    sim_fail(s, "Q5 replicas follow the leader epoch",
                             "live replica %d of %s-%d has leader epoch %d (hosted %d), ZooKeeper %d", b->id, topic,
                             pa->partition, bp->r_leader_epoch, bp->has_replica, z.leader_epoch);
            }
        }
        gr_kzk_leader_and_isr_release(&z);
    }
out:
    gr_kzk_topic_assignment_release(&a);
}

/* Quiet checks of the admin flows (deletion, reassignment, elections, notifications, Q7). */
/* T1 (KIP-516): every topic has an id in ZooKeeper once the cluster is quiet (the controller
 * gives one to topics written without, and writes a known one back), and no live broker hosts a
 * replica of a topic it is assigned to under another id than the znode's: a log of another id
 * (a deleted topic of the same name) is moved aside, never served for the new one. */
static void inv_topic_ids(struct sim *s) {
    static const uint8_t none[16];
    for (int i = 0; i < s->n_brokers && !s->failed; i++) {
        struct sbroker *b = &s->brokers[i];
        if (!b->alive) continue;
        for (int j = 0; j < b->n_parts && !s->failed; j++) {
            struct sb_part *p = &b->parts[j];
            if (!p->has_replica) continue;
            char path[512];
            snprintf(path, sizeof path, TOPICS_PREFIX "%s", p->topic);
            const char *d;
            int len;
            if (zm_peek(s->zm, path, &d, &len, NULL) != GR_ZOK || !d) continue; /* gone: D2 */
            struct gr_kzk_topic_assignment a;
            if (gr_kzk_topic_assignment_decode(d, (size_t)len, &a) != 0) continue;
            struct gr_uuid zid;
            bool has = a.topic_id && gr_uuid_parse(a.topic_id, &zid) == 0;
            bool assigned = false;
            for (int k = 0; k < a.n_partitions; k++)
                if (a.partitions[k].partition == p->partition)
                    for (int r = 0; r < a.partitions[k].n_replicas; r++) assigned |= a.partitions[k].replicas[r] == b->id;
            gr_kzk_topic_assignment_release(&a);
            if (!has) {
                sim_fail(s, "T1 topic ids", "topic %s has no topic id in ZooKeeper", p->topic);
                return;
            }
            if (assigned && (memcmp(p->r_topic_id, none, 16) == 0 || memcmp(p->r_topic_id, zid.b, 16) != 0)) {
                char got[GR_UUID_STR_LEN + 1], want[GR_UUID_STR_LEN + 1];
                struct gr_uuid g;
                memcpy(g.b, p->r_topic_id, 16);
                sim_fail(s, "T1 topic ids", "broker %d hosts %s-%d under topic id %s, ZooKeeper's is %s", b->id,
                         p->topic, p->partition, gr_uuid_to_string(&g, got), gr_uuid_to_string(&zid, want));
                return;
            }
        }
    }
}

/* Whether topic's /brokers/topics/T/partitions (the standby stamp) holds a topic id now. */
/* The id t's /partitions stamp holds (malloc'd), or NULL. */
static char *stamp_id(struct sim *s, const char *topic) {
    char path[512];
    snprintf(path, sizeof path, TOPICS_PREFIX "%s/partitions", topic);
    const char *d;
    int len;
    if (zm_peek(s->zm, path, &d, &len, NULL) != GR_ZOK || !d || len <= 0) return NULL;
    char *id = NULL;
    if (gr_kzk_topic_stamp_decode(d, (size_t)len, &id) != 0) {
        free(id);
        return NULL;
    }
    return id;
}

static bool stamp_holds_id(struct sim *s, const char *topic) {
    char *id = stamp_id(s, topic);
    free(id);
    return id != NULL;
}

/* An admin rewrote topic's znode without its id: the epoch of the first such rewrite since the
 * last quiet point, and the id its stamp holds at the latest (the id the next controller must
 * take: an earlier rewrite may have found the stamp empty and the id rightly changed, and the
 * stamp then took the new one). */
void sim_note_id_dropped(struct sim *s, const char *topic) {
    char *sid = stamp_id(s, topic);
    for (int i = 0; i < s->n_id_dropped; i++)
        if (strcmp(s->id_dropped[i], topic) == 0) {
            free(s->id_dropped_stamp_id[i]);
            s->id_dropped_stamp_id[i] = sid;
            return;
        }
    s->id_dropped = gr_realloc(s->id_dropped, (size_t)(s->n_id_dropped + 1) * sizeof *s->id_dropped);
    s->id_dropped_epoch =
        gr_realloc(s->id_dropped_epoch, (size_t)(s->n_id_dropped + 1) * sizeof *s->id_dropped_epoch);
    s->id_dropped_stamp_id =
        gr_realloc(s->id_dropped_stamp_id, (size_t)(s->n_id_dropped + 1) * sizeof *s->id_dropped_stamp_id);
    s->id_dropped_epoch[s->n_id_dropped] = s->cur_epoch;
    s->id_dropped_stamp_id[s->n_id_dropped] = sid;
    s->id_dropped[s->n_id_dropped++] = gr_strdup(topic);
}

/* T2 (KIP-516): a topic's id never changes while the topic lives (same czxid) -- unless an admin
 * rewrote its znode without the id (a Kafka 2.7 tool) since the last check, no controller that
 * knew the id saw that rewrite, and the topic's /partitions znode held no id (at the last quiet
 * point nor at any such rewrite): the residual case, docs/STORAGE.md "Stray logs". The active
 * controller writes a known id back; the next one takes the id the /partitions stamp holds. "No
 * controller saw it" needs a controller election since the rewrite: within one controller term
 * (/controller_epoch unchanged from the rewrite to this quiet point) the term's controller was
 * active throughout and must have put the id back. Quiet points only; T1 checks that the id is
 * there. */
static void inv_topic_ids_stable(struct sim *s) {
    const char **names;
    int n = zm_peek_children(s->zm, "/brokers/topics", &names);
    struct sim_known_id *next = gr_calloc((size_t)(n > 0 ? n : 1), sizeof *next);
    int m = 0;
    for (int i = 0; i < n && !s->failed; i++) {
        char path[512];
        snprintf(path, sizeof path, TOPICS_PREFIX "%s", names[i]);
        const char *d;
        int len;
        struct gr_zstat st;
        if (zm_peek(s->zm, path, &d, &len, &st) != GR_ZOK || !d) continue;
        struct gr_kzk_topic_assignment a;
        if (gr_kzk_topic_assignment_decode(d, (size_t)len, &a) != 0) continue;
        if (a.topic_id && strlen(a.topic_id) < sizeof next[m].id) {
            next[m].topic = gr_strdup(names[i]);
            next[m].czxid = st.czxid;
            next[m].stamped = stamp_holds_id(s, names[i]);
            snprintf(next[m].id, sizeof next[m].id, "%s", a.topic_id);
            for (int k = 0; k < s->n_known_ids; k++) {
                const struct sim_known_id *o = &s->known_ids[k];
                if (strcmp(o->topic, names[i]) != 0 || o->czxid != st.czxid) continue;
                bool was_dropped = false, dropped = false; /* ... and a controller election since */
                const char *must = o->stamped ? o->id : NULL; /* ... and the id a stamp held */
                for (int j = 0; j < s->n_id_dropped; j++) {
                    if (strcmp(s->id_dropped[j], names[i]) != 0) continue;
                    was_dropped = true;
                    dropped = s->id_dropped_epoch[j] != s->cur_epoch;
                    if (s->id_dropped_stamp_id[j]) must = s->id_dropped_stamp_id[j];
                }
                bool stamped = must && strcmp(must, a.topic_id) != 0;
                if (strcmp(o->id, a.topic_id) == 0) {
                    if (was_dropped) g_failovers.ids_kept++;
                } else if (dropped && !stamped) {
                    g_failovers.ids_changed++;
                    if (s->o.verbose)
                        printf("    [sim] T2: topic %s got a new id %s (was %s): its znode was rewritten without "
                               "the id where no controller that knew it saw\n", names[i], a.topic_id, o->id);
                } else {
                    sim_fail(s, "T2 topic ids", "topic %s (czxid %lld) changed its id from %s to %s, and %s",
                             names[i], (long long)st.czxid, o->id, a.topic_id,
                             stamped ? "its /partitions znode held an id (the next controller must take it)"
                             : was_dropped ? "the controller that knew it saw the znode rewritten without it"
                                           : "no admin dropped it");
                }
            }
            m++;
        }
        gr_kzk_topic_assignment_release(&a);
    }
    for (int i = 0; i < s->n_known_ids; i++) free(s->known_ids[i].topic);
    free(s->known_ids);
    s->known_ids = next;
    s->n_known_ids = m;
    for (int i = 0; i < s->n_id_dropped; i++) free(s->id_dropped[i]);
    free(s->id_dropped);
    free(s->id_dropped_epoch);
    for (int i = 0; i < s->n_id_dropped; i++) free(s->id_dropped_stamp_id[i]);
    free(s->id_dropped_stamp_id);
    s->id_dropped = NULL;
    s->id_dropped_epoch = NULL;
    s->id_dropped_stamp_id = NULL;
    s->n_id_dropped = 0;
}

static void inv_quiet_admin(struct sim *s, const int32_t *live, int n_live) {
    char b1[128], b2[128], path[512];
    const char **names;
    /* D1: every queued deletion whose replicas are all usable is complete */
    int nd = zm_peek_children(s->zm, "/admin/delete_topics", &names);
    char **dq = gr_malloc(sizeof(char *) * (size_t)(nd > 0 ? nd : 1));
    for (int i = 0; i < nd; i++) dq[i] = gr_strdup(names[i]);
    for (int i = 0; i < nd && !s->failed; i++) {
        snprintf(path, sizeof path, TOPICS_PREFIX "%s", dq[i]);
        const char *d;
        int len;
        if (zm_peek(s->zm, path, &d, &len, NULL) != GR_ZOK || !d) {
            sim_fail(s, "D1 deletions complete", "/admin/delete_topics/%s is left for a topic that does not exist", dq[i]);
            break;
        }
        struct gr_kzk_topic_assignment a;
        memset(&a, 0, sizeof a);
        if (gr_kzk_topic_assignment_decode(d, (size_t)len, &a) != 0) continue;
        bool all = true;
        for (int k = 0; k < a.n_partitions; k++)
            for (int r = 0; r < a.partitions[k].n_replicas; r++) {
                int32_t id = a.partitions[k].replicas[r];
                all &= in_ids(live, n_live, id) && !replica_dir_failed(s, id, dq[i], a.partitions[k].partition);
            }
        if (all) {
            /* the active controller's view, for the report */
            char view[1024] = "";
            size_t off = 0;
            struct sbroker *act = NULL;
            int32_t cid = -1;
            const char *cd;
            int cl;
            if (zm_peek(s->zm, "/controller", &cd, &cl, NULL) == GR_ZOK && cd &&
                gr_kzk_controller_decode(cd, (size_t)cl, &cid) == 0)
                act = sim_broker(s, cid);
            struct gr_ctrl_topic *ct = act && act->alive ? gr_ctrl_ctx_topic(gr_controller_context(act->ctrl), dq[i]) : NULL;
            for (int k = 0; ct && k < ct->n_partitions && off < sizeof view - 80; k++) {
                struct gr_ctrl_partition *p = &ct->partitions[k];
                off += (size_t)snprintf(view + off, sizeof view - off, " p%d[leader %d add %d rem %d states",
                                        p->partition, p->has_state ? p->lai.leader : -9, p->n_adding, p->n_removing);
                for (int r = 0; r < p->n_replicas && off < sizeof view - 20; r++)
                    off += (size_t)snprintf(view + off, sizeof view - off, " %d:%d", p->replicas[r],
                                            gr_ctrl_replica_state_get(p, p->replicas[r]));
                off += (size_t)snprintf(view + off, sizeof view - off, "]");
            }
            sim_fail(s, "D1 deletions complete",
                     "topic %s is still queued for deletion although all its replicas are live; controller %d:%s", dq[i],
                     cid, view);
        }
        gr_kzk_topic_assignment_release(&a);
    }
    for (int i = 0; i < nd; i++) free(dq[i]);
    free(dq);
    if (s->failed) return;
    /* D2: a created topic that is gone left no config and no deletion marker */
    for (int i = 0; i < s->n_topics_created && !s->failed; i++) {
        snprintf(path, sizeof path, TOPICS_PREFIX "t%d", i);
        if (zk_exists(s, path)) continue;
        snprintf(path, sizeof path, "/config/topics/t%d", i);
        if (zk_exists(s, path)) sim_fail(s, "D2 deleted topics leave every broker", "%s is left after the deletion", path);
    }
    if (s->failed) return;
    /* R5: /admin/reassign_partitions lists only running reassignments, with their targets */
    const char *d;
    int len;
    if (zm_peek(s->zm, "/admin/reassign_partitions", &d, &len, NULL) == GR_ZOK && d) {
        struct gr_kzk_reassignment r;
        memset(&r, 0, sizeof r);
        if (gr_kzk_reassignment_decode(d, (size_t)len, &r) == 0) {
            for (int i = 0; i < r.n && !s->failed; i++) {
                const struct gr_kzk_reassignment_entry *e = &r.entries[i];
                /* entries of topics being (or already) deleted stay until the znode is next
                 * processed, as in Kafka */
                snprintf(path, sizeof path, TOPICS_PREFIX "%s", e->topic);
                if (topic_queued(s, e->topic) || !zk_exists(s, path)) continue;
                snprintf(path, sizeof path, TOPICS_PREFIX "%s", e->topic);
                const char *td;
                int tl;
                struct gr_kzk_topic_assignment a;
                memset(&a, 0, sizeof a);
                bool ok = false;
                int32_t trs[64];
                int n = 0;
                if (zm_peek(s->zm, path, &td, &tl, NULL) == GR_ZOK && td &&
                    gr_kzk_topic_assignment_decode(td, (size_t)tl, &a) == 0) {
                    for (int k = 0; k < a.n_partitions; k++) {
                        const struct gr_kzk_partition_assignment *pa = &a.partitions[k];
                        if (pa->partition != e->partition || !(pa->n_adding || pa->n_removing)) continue;
                        n = ids_minus(pa->replicas, pa->n_replicas, pa->removing, pa->n_removing, trs);
                        ok = seq_eq(trs, n, e->replicas, e->n_replicas);
                    }
                }
                gr_kzk_topic_assignment_release(&a);
                if (!ok)
                    sim_fail(s, "R5 the reassignment znode lists running reassignments",
                             "/admin/reassign_partitions lists %s-%d -> [%s], ZooKeeper's assignment targets [%s]",
                             e->topic, e->partition, ids_str(b1, sizeof b1, e->replicas, e->n_replicas),
                             ids_str(b2, sizeof b2, trs, n));
            }
        }
        gr_kzk_reassignment_release(&r);
    }
    if (s->failed) return;
    /* notifications and one-shot admin znodes are consumed */
    static const char *const consumed[] = {"/log_dir_event_notification", "/isr_change_notification"};
    for (size_t i = 0; i < sizeof consumed / sizeof consumed[0]; i++)
        if (zm_peek_children(s->zm, consumed[i], &names) > 0) {
            sim_fail(s, "N1 notifications are consumed", "%s still has %s", consumed[i], names[0]);
            return;
        }
    if (zk_exists(s, "/admin/preferred_replica_election")) {
        sim_fail(s, "N1 notifications are consumed", "/admin/preferred_replica_election is left");
        return;
    }
    /* Q7: after the auto-rebalance check ran on a quiet cluster, a broker that was over 10%
     * imbalanced leads every partition it prefers where it is live and in the ISR */
    if (!s->q7_armed) return;
    s->q7_armed = false;
    int nt = zm_peek_children(s->zm, "/brokers/topics", &names);
    char **tn = gr_malloc(sizeof(char *) * (size_t)(nt > 0 ? nt : 1));
    for (int i = 0; i < nt; i++) tn[i] = gr_strdup(names[i]);
    for (int i = 0; i < nt && !s->failed; i++) {
        if (topic_queued(s, tn[i])) continue;
        struct gr_kzk_topic_assignment a;
        memset(&a, 0, sizeof a);
        snprintf(path, sizeof path, TOPICS_PREFIX "%s", tn[i]);
        if (zm_peek(s->zm, path, &d, &len, NULL) != GR_ZOK || !d || gr_kzk_topic_assignment_decode(d, (size_t)len, &a))
            continue;
        for (int k = 0; k < a.n_partitions && !s->failed; k++) {
            const struct gr_kzk_partition_assignment *pa = &a.partitions[k];
            if (pa->n_replicas == 0) continue;
            int32_t pref = pa->replicas[0];
            if (pref < 1 || pref > SIM_MAX_BROKERS || !s->q7_over[pref] || !in_ids(live, n_live, pref) ||
                replica_dir_failed(s, pref, tn[i], pa->partition))
                continue;
            char sp[600];
            snprintf(sp, sizeof sp, "%s/partitions/%d/state", path, pa->partition);
            const char *sd;
            int sl;
            struct gr_kzk_leader_and_isr z;
            memset(&z, 0, sizeof z);
            if (zm_peek(s->zm, sp, &sd, &sl, NULL) != GR_ZOK || !sd || gr_kzk_partition_state_decode(sd, (size_t)sl, &z))
                continue;
            if (in_ids(z.isr, z.n_isr, pref) && z.leader != pref)
                sim_fail(s, "Q7 auto rebalance elects preferred leaders",
                         "%s-%d: preferred replica %d is live and in the ISR [%s] but broker %d leads after the check",
                         tn[i], pa->partition, pref, ids_str(b1, sizeof b1, z.isr, z.n_isr), z.leader);
            gr_kzk_leader_and_isr_release(&z);
        }
        gr_kzk_topic_assignment_release(&a);
    }
    for (int i = 0; i < nt; i++) free(tn[i]);
    free(tn);
}

void inv_quiet(struct sim *s) {
    char buf[512], b1[128], b2[128];
    s->n_quiet_checks++;
    if (zm_selfcheck(s->zm, buf, sizeof buf) != 0) {
        sim_fail(s, "Q1 ZooKeeper tree well formed", "%s", buf);
        return;
    }
    /* Q1: registrations == live brokers */
    int32_t live[SIM_MAX_BROKERS];
    int n_live = 0;
    for (int i = 0; i < s->n_brokers; i++)
        if (s->brokers[i].alive) live[n_live++] = s->brokers[i].id;
    const char **names;
    int nreg = zm_peek_children(s->zm, "/brokers/ids", &names);
    int32_t reg[64];
    int n_reg = 0;
    for (int i = 0; i < nreg && n_reg < 64; i++) reg[n_reg++] = (int32_t)atoi(names[i]);
    qsort(reg, (size_t)n_reg, sizeof reg[0], cmp_i32);
    if (!same_ids(reg, n_reg, live, n_live)) {
        sim_fail(s, "Q1 registrations are the live brokers", "registered [%s], live [%s]",
                 ids_str(b1, sizeof b1, reg, n_reg), ids_str(b2, sizeof b2, live, n_live));
        return;
    }
    if (n_live == 0) return;
    /* Q2 */
    const char *d;
    int len;
    int32_t cid = -1;
    if (zm_peek(s->zm, "/controller", &d, &len, NULL) != GR_ZOK || !d ||
        gr_kzk_controller_decode(d, (size_t)len, &cid) != 0) {
        sim_fail(s, "Q2 exactly one controller", "no /controller in a quiet cluster with live brokers [%s]",
                 ids_str(b1, sizeof b1, live, n_live));
        return;
    }
    struct sbroker *act = alive_broker(s, cid);
    if (!act) {
        sim_fail(s, "Q2 exactly one controller", "/controller names broker %d, which is not alive", cid);
        return;
    }
    for (int i = 0; i < s->n_brokers; i++) {
        struct sbroker *b = &s->brokers[i];
        if (!b->alive) continue;
        bool active = gr_controller_is_active(b->ctrl);
        int32_t seen = gr_controller_active_id(b->ctrl);
        if (b == act && (!active || gr_controller_epoch(b->ctrl) != s->cur_epoch)) {
            sim_fail(s, "Q2 exactly one controller", "broker %d holds /controller but active=%d epoch=%d (ZooKeeper %d)",
                     b->id, active, gr_controller_epoch(b->ctrl), s->cur_epoch);
            return;
        }
        if (b != act && (active || seen != cid)) {
            sim_fail(s, "Q2 exactly one controller", "broker %d: active=%d, thinks the controller is %d (it is %d)",
                     b->id, active, seen, cid);
            return;
        }
    }
    /* Q3: context */
    struct gr_ctrl_context *ctx = gr_controller_context(act->ctrl);
    if (ctx->epoch != s->cur_epoch || ctx->epoch_zk_version != s->cur_epoch_version) {
        sim_fail(s, "Q3 context equals ZooKeeper", "context epoch %d v%d, ZooKeeper %d v%d", ctx->epoch,
                 ctx->epoch_zk_version, s->cur_epoch, s->cur_epoch_version);
        return;
    }
    if (ctx->n_brokers != n_live) {
        int32_t cb[64];
        int n = 0;
        for (int i = 0; i < ctx->n_brokers && n < 64; i++) cb[n++] = ctx->brokers[i].id;
        sim_fail(s, "Q3 context equals ZooKeeper", "controller's live brokers [%s], registered [%s]",
                 ids_str(b1, sizeof b1, cb, n), ids_str(b2, sizeof b2, live, n_live));
        return;
    }
    for (int i = 0; i < ctx->n_brokers; i++) {
        char p[64];
        snprintf(p, sizeof p, "/brokers/ids/%d", ctx->brokers[i].id);
        struct gr_zstat st;
        if (zm_peek(s->zm, p, NULL, NULL, &st) != GR_ZOK || st.czxid != ctx->brokers[i].epoch) {
            sim_fail(s, "Q3 context equals ZooKeeper", "broker %d: controller has epoch %" PRId64 ", ZooKeeper %" PRId64,
                     ctx->brokers[i].id, ctx->brokers[i].epoch, st.czxid);
            return;
        }
    }
    int nt = zm_peek_children(s->zm, "/brokers/topics", &names);
    if (nt < 0) nt = 0;
    if ((size_t)nt != gr_ctrl_ctx_topic_count(ctx)) {
        sim_fail(s, "Q3 context equals ZooKeeper", "controller knows %zu topics, ZooKeeper has %d",
                 gr_ctrl_ctx_topic_count(ctx), nt);
        return;
    }
    char **tn = gr_malloc(sizeof(char *) * (size_t)(nt + 1));
    for (int i = 0; i < nt; i++) tn[i] = gr_strdup(names[i]);
    for (int i = 0; i < nt && !s->failed; i++) check_topic(s, act, tn[i], live, n_live);
    if (!s->failed) check_context_indexes(s, ctx);
    for (int i = 0; i < nt; i++) free(tn[i]);
    free(tn);
    if (s->failed || !s->o.expect_metadata) return;
    /* Q5: live brokers known by every broker */
    for (int i = 0; i < s->n_brokers; i++) {
        struct sbroker *b = &s->brokers[i];
        if (!b->alive) continue;
        int32_t v[SIM_MAX_BROKERS + 1];
        memcpy(v, b->live, sizeof(int32_t) * (size_t)b->n_live);
        if (!b->got_update_metadata || !same_set(v, b->n_live, live, n_live)) {
            sim_fail(s, "Q5 broker metadata converges", "broker %d knows live brokers [%s], registered [%s]", b->id,
                     ids_str(b1, sizeof b1, v, b->n_live), ids_str(b2, sizeof b2, live, n_live));
            return;
        }
        for (int j = 0; j < b->n_parts; j++) {
            struct sb_part *p = &b->parts[j];
            if (!p->in_cache && !p->has_replica) continue;
            char tp[512];
            snprintf(tp, sizeof tp, TOPICS_PREFIX "%s", p->topic);
            if (zm_peek(s->zm, tp, NULL, NULL, NULL) == GR_ZOK) continue;
            char name[512];
            snprintf(name, sizeof name, "%s-%d", p->topic, p->partition);
            /* a StopReplica(delete) it never got (D2), a deletion's UpdateMetadata it never got
             * and never will, the term that owed it being over (Q5): Kafka 2.7 keeps the
             * replica, or the cached partition, too */
            bool replica_missed = false;
            for (int k = 0; k < b->n_missed; k++) replica_missed |= strcmp(b->missed[k], name) == 0;
            bool cache_ok = !p->in_cache || (node_cache_missed(b, p->topic, p->partition) >= 0 &&
                                             node_cache_missed(b, p->topic, p->partition) < s->cur_epoch);
            bool replica_ok = !p->has_replica || replica_missed;
            if (!cache_ok || !replica_ok) {
                sim_fail(s, !cache_ok ? "Q5 broker metadata converges" : "D2 deleted topics leave every broker",
                         "broker %d %s %s-%d, which ZooKeeper does not have", b->id,
                         !cache_ok ? "caches" : "hosts a replica of", p->topic, p->partition);
                return;
            }
        }
    }
    inv_topic_ids(s);
    if (!s->failed) inv_topic_ids_stable(s);
    if (!s->failed) inv_quiet_admin(s, live, n_live);
}

/* ---- W1: the context a failover starts from ---- */

struct sim_failover_counts g_failovers;

/* W1: right after a failover loaded its context -- before it acts on it -- the context equals
 * what a cold load of ZooKeeper's current tree builds: the same topics (incarnation czxid and
 * zkVersion), assignments, partition states (leader, leader epoch, ISR, controller epoch,
 * zkVersion, or none), and nothing a term learns later (state machine states, replica states,
 * offline dirs, the deletion queue). Nothing else runs inside the step, so the tree is what the
 * controller read or proved. Checked for cold loads too: the warm path must be indistinguishable. */
void inv_on_context_loaded(struct sim *s, struct sbroker *b, struct gr_ctrl_context *ctx,
                           const struct gr_ctrl_load_report *r) {
    const char *W1 = "W1 failover context equals a cold load";
    if (r->warm) {
        g_failovers.warm++;
        g_failovers.standby_states += (uint64_t)r->standby_states;
        g_failovers.states_confirmed += (uint64_t)r->states_confirmed;
        g_failovers.states_read += (uint64_t)r->states_read;
        g_failovers.last_warm = *r;
    } else {
        g_failovers.cold++;
    }
    if (s->failed) return;
    if (r->warm && s->o.verbose)
        printf("[%6" PRId64 " t=%7" PRId64 "] W1: broker %d warm start: %lld of %lld standby states proven current, "
               "%lld read\n",
               s->step, s->now, b->id, (long long)r->states_confirmed, (long long)r->standby_states,
               (long long)r->states_read);
    const char **names = NULL;
    int nt = zm_peek_children(s->zm, "/brokers/topics", &names);
    if (nt < 0) nt = 0;
    if ((size_t)nt != gr_ctrl_ctx_topic_count(ctx)) {
        sim_fail(s, W1, "broker %d (%s): context has %zu topics, ZooKeeper %d", b->id, r->warm ? "warm" : "cold",
                 gr_ctrl_ctx_topic_count(ctx), nt);
        return;
    }
    if (ctx->topics_to_be_deleted.count != 0) {
        sim_fail(s, W1, "broker %d: deletion queue not empty before fetchTopicDeletionsInProgress", b->id);
        return;
    }
    int64_t parts = 0, reassigning = 0;
    char b1[128], b2[128];
    for (int i = 0; i < nt && !s->failed; i++) {
        char path[512];
        snprintf(path, sizeof path, TOPICS_PREFIX "%s", names[i]);
        const char *d;
        int len;
        struct gr_zstat st;
        if (zm_peek(s->zm, path, &d, &len, &st) != GR_ZOK || !d) continue;
        struct gr_kzk_topic_assignment a;
        memset(&a, 0, sizeof a);
        if (gr_kzk_topic_assignment_decode(d, (size_t)len, &a) != 0) continue;
        struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, names[i]);
        if (!t || t->czxid != st.czxid || t->zk_version != st.version || t->n_partitions != a.n_partitions ||
            t->queued_for_deletion || (t->topic_id == NULL) != (a.topic_id == NULL) ||
            (t->topic_id && strcmp(t->topic_id, a.topic_id))) {
            sim_fail(s, W1, "broker %d (%s): topic %s: context czxid %lld v%d, %d partitions; ZooKeeper czxid %lld v%d, %d",
                     b->id, r->warm ? "warm" : "cold", names[i], t ? (long long)t->czxid : -1LL, t ? t->zk_version : -1,
                     t ? t->n_partitions : -1, (long long)st.czxid, st.version, a.n_partitions);
            gr_kzk_topic_assignment_release(&a);
            break;
        }
        parts += t->n_partitions;
        for (int k = 0; k < a.n_partitions && !s->failed; k++) {
            const struct gr_kzk_partition_assignment *pa = &a.partitions[k];
            struct gr_ctrl_partition *cp = gr_ctrl_topic_partition(t, pa->partition);
            if (!cp || !same_ids(cp->replicas, cp->n_replicas, pa->replicas, pa->n_replicas) ||
                !same_ids(cp->adding, cp->n_adding, pa->adding, pa->n_adding) ||
                !same_ids(cp->removing, cp->n_removing, pa->removing, pa->n_removing)) {
                sim_fail(s, W1, "broker %d: %s-%d: assignment differs from ZooKeeper", b->id, names[i], pa->partition);
                break;
            }
            reassigning += cp->n_adding > 0 || cp->n_removing > 0;
            bool clean = cp->state == 0 && cp->n_offline_dirs == 0 && cp->fresh_gen != ctx->event_gen;
            for (int x = 0; cp->replica_states && x < cp->n_replicas; x++) clean &= cp->replica_states[x] == 0;
            if (!clean) {
                sim_fail(s, W1, "broker %d: %s-%d carries state machine state into the failover", b->id, names[i],
                         pa->partition);
                break;
            }
            char sp[600];
            snprintf(sp, sizeof sp, "%s/partitions/%d/state", path, pa->partition);
            const char *sd;
            int sl;
            struct gr_zstat sst;
            bool zk_has = zm_peek(s->zm, sp, &sd, &sl, &sst) == GR_ZOK && sd;
            struct gr_kzk_leader_and_isr z;
            memset(&z, 0, sizeof z);
            if (zk_has && gr_kzk_partition_state_decode(sd, (size_t)sl, &z) != 0) zk_has = false;
            z.zk_version = sst.version;
            if (zk_has != cp->has_state ||
                (zk_has && (cp->lai.leader != z.leader || cp->lai.leader_epoch != z.leader_epoch ||
                            cp->lai.controller_epoch != z.controller_epoch || cp->lai.zk_version != z.zk_version ||
                            !same_ids(cp->lai.isr, cp->lai.n_isr, z.isr, z.n_isr)))) {
                sim_fail(s, W1,
                         "broker %d (%s): %s-%d: context {%s leader %d epoch %d isr [%s] cepoch %d v%d}, ZooKeeper {%s "
                         "leader %d epoch %d isr [%s] cepoch %d v%d}",
                         b->id, r->warm ? "warm" : "cold", names[i], pa->partition, cp->has_state ? "state" : "none",
                         cp->lai.leader, cp->lai.leader_epoch, ids_str(b1, sizeof b1, cp->lai.isr, cp->lai.n_isr),
                         cp->lai.controller_epoch, cp->lai.zk_version, zk_has ? "state" : "none", z.leader,
                         z.leader_epoch, ids_str(b2, sizeof b2, z.isr, z.n_isr), z.controller_epoch, z.zk_version);
            }
            gr_kzk_leader_and_isr_release(&z);
        }
        gr_kzk_topic_assignment_release(&a);
    }
    if (!s->failed && (parts != gr_ctrl_ctx_partition_count(ctx) || reassigning != ctx->n_reassigning))
        sim_fail(s, W1, "broker %d: context counts %lld partitions (%lld reassigning), ZooKeeper %lld (%lld)", b->id,
                 (long long)gr_ctrl_ctx_partition_count(ctx), (long long)ctx->n_reassigning, (long long)parts,
                 (long long)reassigning);
}
