/* Scripted regressions for controller bugs the simulation found (docs/SIMULATION.md, "Known
 * findings"). Unlike a pinned seed, a script keeps exercising its bug when the step menu changes:
 * the setup is fixed, only the interleavings inside each settle phase come from the PRNG, and each
 * script runs under several seeds. Every settle ends with the quiet invariants; a script adds its
 * own checks. Run by main before the seeds (--no-scenarios skips them). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/util.h"
#include "controller/reassignment.h"
#include "common/uuid.h"
#include "sim.h"

#define SCENARIO_SEEDS 8

/* A topic with one partition on the given replicas, written as an admin tool does (with a topic id,
 * as Gregor's and Kafka 2.8+'s admin: the controller writes nothing more). */
static void create_topic(struct sim *s, const char *name, const int32_t *replicas, int n) {
    struct gr_kzk_partition_assignment pa = {.partition = 0, .n_replicas = n, .replicas = (int32_t *)replicas};
    struct gr_kzk_topic_assignment a = {.topic = (char *)name, .n_partitions = 1, .partitions = &pa};
    struct gr_uuid id;
    char idtext[GR_UUID_STR_LEN + 1];
    sim_topic_id(s, &id);
    a.topic_id = gr_uuid_to_string(&id, idtext);
    if (gr_kzk_create_topic(s->admin_kzk, name, &a, NULL) != 0) sim_fail(s, "scenario", "cannot create topic %s", name);
}

static void start_all(struct sim *s) {
    for (int i = 0; i < s->n_brokers; i++)
        if (!node_start(s, &s->brokers[i])) sim_fail(s, "scenario", "broker %d does not start", s->brokers[i].id);
}

/* Settles without restarting dead brokers. */
static void settle_keep_dead(struct sim *s) {
    s->settle_no_restart = true;
    sim_settle(s);
    s->settle_no_restart = false;
}

/* The partition state in ZooKeeper (false if none). */
static bool zk_state(struct sim *s, const char *topic, struct gr_kzk_leader_and_isr *out) {
    char p[256];
    snprintf(p, sizeof p, "/brokers/topics/%s/partitions/0/state", topic);
    const char *d;
    int len;
    memset(out, 0, sizeof *out);
    return zm_peek(s->zm, p, &d, &len, NULL) == GR_ZOK && d && gr_kzk_partition_state_decode(d, (size_t)len, out) == 0;
}

static struct sbroker *active(struct sim *s) {
    for (int i = 0; i < s->n_brokers; i++)
        if (s->brokers[i].alive && gr_controller_is_active(s->brokers[i].ctrl)) return &s->brokers[i];
    return NULL;
}

struct api_result {
    int16_t top, err;
    bool answered;
};

static void api_answer(void *arg, int16_t top, const struct gr_reassign_api_payload *pl) {
    struct api_result *r = arg;
    r->answered = true;
    r->top = top;
    r->err = pl->n > 0 ? pl->items[0].err : GR_KERR_NONE;
}

/* AlterPartitionReassignments for partition 0 of topic (n == 0: cancel) to the active controller. */
static void reassign(struct sim *s, const char *topic, const int32_t *target, int n, struct api_result *res) {
    struct sbroker *c = active(s);
    memset(res, 0, sizeof *res);
    if (!c) {
        sim_fail(s, "scenario", "no active controller");
        return;
    }
    struct gr_reassign_api_payload *pl = gr_reassign_api_payload_new(1);
    pl->items[0].topic = gr_strdup(topic);
    pl->items[0].cancel = n == 0;
    if (n) {
        pl->items[0].replicas = gr_malloc(sizeof(int32_t) * (size_t)n);
        memcpy(pl->items[0].replicas, target, sizeof(int32_t) * (size_t)n);
        pl->items[0].n_replicas = n;
    }
    pl->respond = api_answer;
    pl->arg = res;
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_API_PARTITION_REASSIGNMENT);
    ev->payload = pl;
    ev->payload_free = gr_reassign_api_payload_free;
    ev->preempt = gr_reassign_api_preempt;
    gr_ctrl_events_put(gr_controller_events(c->ctrl), ev);
}

/* A replica on a failed log dir that is the partition's only ISR member is not elected again
 * (states.c gr_ctrl_replica_online ignored offline dirs: O1). */
static void scenario_offline_dir_only_isr(struct sim *s) {
    char topic[16];
    for (int i = 0;; i++) {
        snprintf(topic, sizeof topic, "od%d", i);
        if (sim_dir_of(topic, 0) == 1) break;
    }
    start_all(s);
    int32_t reps[] = {1, 2};
    create_topic(s, topic, reps, 2);
    sim_settle(s);
    node_crash(s, &s->brokers[1], true); /* broker 2: the ISR shrinks to [1] */
    settle_keep_dead(s);
    admin_log_dir_failure(s, &s->brokers[0]);
    settle_keep_dead(s); /* O1 fails here if broker 1 is elected from its failed dir */
    struct gr_kzk_leader_and_isr l;
    if (!s->failed && zk_state(s, topic, &l)) {
        if (l.leader != -1) sim_fail(s, "scenario offline dir", "%s-0 is led by %d, want no leader", topic, l.leader);
        gr_kzk_leader_and_isr_release(&l);
    }
}

/* Cancelling a reassignment whose only in-sync replicas are being added is refused: it would
 * delete them and leave the partition without a leader (ISR outside the replicas, P2). */
static void scenario_cancel_keeps_isr(struct sim *s) {
    char topic[16];
    for (int i = 0;; i++) {
        snprintf(topic, sizeof topic, "ck%d", i);
        if (sim_dir_of(topic, 0) == 1) break;
    }
    start_all(s);
    int32_t reps[] = {1};
    create_topic(s, topic, reps, 1);
    sim_settle(s);
    /* broker 3's replica will sit on a failed dir: the reassignment cannot complete */
    admin_log_dir_failure(s, &s->brokers[2]);
    settle_keep_dead(s);
    struct api_result res;
    int32_t target[] = {2, 3};
    reassign(s, topic, target, 2, &res);
    settle_keep_dead(s); /* broker 2 catches up and joins the ISR */
    if (s->failed) return;
    if (!res.answered || res.top || res.err) {
        sim_fail(s, "scenario cancel", "reassignment answered %d/%d", res.top, res.err);
        return;
    }
    node_crash(s, &s->brokers[0], true); /* broker 1 (the origin) goes: ISR [2] */
    settle_keep_dead(s);
    struct api_result cres;
    reassign(s, topic, NULL, 0, &cres);
    settle_keep_dead(s);
    struct gr_kzk_leader_and_isr l;
    if (!s->failed && zk_state(s, topic, &l)) {
        if (cres.err != GR_KERR_INVALID_REPLICA_ASSIGNMENT || l.leader != 2)
            sim_fail(s, "scenario cancel", "cancel answered %s, leader %d (want INVALID_REPLICA_ASSIGNMENT, 2)",
                     gr_kerr_name(cres.err), l.leader);
        gr_kzk_leader_and_isr_release(&l);
    }
}

/* Does broker b's metadata cache hold topic-partition? */
static bool caches(struct sbroker *b, const char *topic, int32_t partition) {
    for (int i = 0; i < b->n_parts; i++)
        if (b->parts[i].in_cache && b->parts[i].partition == partition && strcmp(b->parts[i].topic, topic) == 0)
            return true;
    return false;
}

/* Starts every broker and settles; the active controller, or NULL after failing `what`. */
static struct sbroker *start_settled(struct sim *s, const char *what) {
    start_all(s);
    sim_settle(s);
    struct sbroker *c = active(s);
    if (!c) sim_fail(s, what, "no active controller");
    return c;
}

/* A topic deleted while a running broker is not live for the controller (its ZooKeeper session
 * expired and it cannot reconnect yet): it gets none of the deletion's UpdateMetadata (leader -2
 * goes to live brokers only). When it registers again in the same controller term, the controller
 * sends it the removal (topic_deletion.h, a Gregor deviation): its cache must lose the topic. When a
 * later term rules by then, nobody knows of the topic any more: the new controller's full
 * UpdateMetadata names only existing partitions, and the broker's cache keeps the deleted one, as
 * a Kafka 2.7 broker's does (MetadataCache.updateMetadata merges). Q5 accepts exactly that (seed
 * 907560 of the moving range failed it) and nothing in the same term. */
static void delete_while_not_live(struct sim *s, bool move_controller) {
    const char *what = "scenario delete while not live";
    struct sbroker *c = start_settled(s, what);
    if (!c) return;
    const char *topic = "dn0";
    int32_t reps[] = {c->id};
    create_topic(s, topic, reps, 1);
    sim_settle(s); /* every broker caches dn0-0 */
    struct sbroker *x = &s->brokers[0] == c ? &s->brokers[1] : &s->brokers[0];
    x->zk_cut_until = s->now + 4 * SIM_SESSION_TIMEOUT_MS;
    zm_disconnect(x->zc);
    s->settle_hold_cuts = true;
    sim_settle(s); /* x's session expires; the controller handles its failure */
    if (!s->failed && gr_ctrl_ctx_broker(gr_controller_context(c->ctrl), x->id))
        sim_fail(s, what, "broker %d is still live for controller %d", x->id, c->id);
    if (!s->failed && gr_kzk_create_topic_deletion(s->admin_kzk, topic) != 0)
        sim_fail(s, what, "cannot mark %s for deletion", topic);
    if (!s->failed) sim_settle(s); /* the deletion completes without x */
    if (!s->failed && (node_cache_missed(x, topic, 0) < 0 || !caches(x, topic, 0)))
        sim_fail(s, what, "broker %d: its missed removal of %s-0 is not recorded", x->id, topic);
    if (!s->failed && move_controller) {
        zm_expire_session(s->zm, zm_client_session(c->zc)); /* a new term: x is away still */
        sim_settle(s);
    }
    s->settle_hold_cuts = false;
    if (!s->failed) sim_settle(s); /* x registers again; Q5 */
    if (!s->failed && caches(x, topic, 0) != move_controller)
        sim_fail(s, what, "broker %d %s %s-0 after registering again (controller moved: %d)", x->id,
                 move_controller ? "no longer caches" : "still caches", topic, move_controller);
}

/* As above, but the topic is created again under the same name (one partition fewer) while the
 * broker is still away, in the same term: the removal it gets on starting up must spare the new
 * topic's partition (the start-up full UpdateMetadata carries it) and still drop the old
 * partition the new topic does not have. */
static void scenario_recreated_same_term(struct sim *s) {
    const char *what = "scenario re-created while not live";
    struct sbroker *c = start_settled(s, what);
    if (!c) return;
    const char *topic = "rc0";
    struct gr_kzk_partition_assignment pa[2] = {{.partition = 0, .n_replicas = 1, .replicas = &c->id},
                                                {.partition = 1, .n_replicas = 1, .replicas = &c->id}};
    struct gr_kzk_topic_assignment a = {.topic = (char *)topic, .n_partitions = 2, .partitions = pa};
    if (gr_kzk_create_topic(s->admin_kzk, topic, &a, NULL) != 0) sim_fail(s, what, "cannot create %s", topic);
    if (!s->failed) sim_settle(s); /* every broker caches rc0-0 and rc0-1 */
    if (s->failed) return;
    struct sbroker *x = &s->brokers[0] == c ? &s->brokers[1] : &s->brokers[0];
    x->zk_cut_until = s->now + 4 * SIM_SESSION_TIMEOUT_MS;
    zm_disconnect(x->zc);
    s->settle_hold_cuts = true;
    sim_settle(s);
    if (!s->failed && gr_kzk_create_topic_deletion(s->admin_kzk, topic) != 0)
        sim_fail(s, what, "cannot mark %s for deletion", topic);
    if (!s->failed) sim_settle(s); /* deleted without x */
    if (!s->failed) {
        int32_t reps[] = {c->id};
        create_topic(s, topic, reps, 1); /* rc0 again, partition 0 only */
        sim_settle(s);
    }
    s->settle_hold_cuts = false;
    if (!s->failed && !gr_controller_is_active(c->ctrl))
        sim_fail(s, what, "controller %d moved", c->id); /* the script needs one term */
    if (!s->failed) sim_settle(s); /* x registers again in the same term; Q5 */
    if (!s->failed && (!caches(x, topic, 0) || caches(x, topic, 1)))
        sim_fail(s, what, "broker %d caches %s-0: %d, %s-1: %d (want 1, 0)", x->id, topic, caches(x, topic, 0), topic,
                 caches(x, topic, 1));
}

/* KIP-516: a broker hosting a replica is cut off (its session expires, the process lives on with
 * the replica); the partition is moved off it, the topic deleted (its replicas are all live) and
 * created again on the same brokers. When the broker registers again, the LeaderAndIsr of the new
 * topic carries another id than its replica's: the old replica is moved aside (a stray log, kept,
 * never hosted again) and the new one taken (T1: no broker hosts a replica under another id than
 * the znode's). Without the id rule the old replica's newer leader epoch refuses the new topic's
 * LeaderAndIsr (STALE_CONTROLLER_EPOCH) and the broker keeps serving the deleted topic's log. */
static void scenario_recreated_onto_away_replica(struct sim *s) {
    const char *what = "scenario re-created onto a replica kept while away";
    struct sbroker *c = start_settled(s, what);
    if (!c) return;
    struct sbroker *x = &s->brokers[0] == c ? &s->brokers[1] : &s->brokers[0];
    const char *topic = "ri0";
    int32_t reps[2] = {c->id, x->id};
    create_topic(s, topic, reps, 2);
    if (!s->failed) sim_settle(s);
    /* leader elections bump the old replica's leader epoch past the new topic's first ones */
    for (int i = 0; i < 3 && !s->failed; i++) {
        int32_t order[2] = {i % 2 ? c->id : x->id, i % 2 ? x->id : c->id};
        struct api_result res;
        reassign(s, topic, order, 2, &res);
        sim_settle(s);
    }
    if (s->failed) return;
    x->zk_cut_until = s->now + 4 * SIM_SESSION_TIMEOUT_MS;
    zm_disconnect(x->zc);
    s->settle_hold_cuts = true;
    sim_settle(s);
    struct api_result res;
    int32_t only_c[1] = {c->id};
    if (!s->failed) reassign(s, topic, only_c, 1, &res); /* completes: x is not live */
    if (!s->failed) sim_settle(s);
    if (!s->failed && gr_kzk_create_topic_deletion(s->admin_kzk, topic) != 0)
        sim_fail(s, what, "cannot mark %s for deletion", topic);
    if (!s->failed) sim_settle(s); /* deleted without x */
    if (!s->failed) {
        create_topic(s, topic, reps, 2); /* ri0 again, on c and x */
        sim_settle(s);
    }
    s->settle_hold_cuts = false;
    if (!s->failed) sim_settle(s); /* x registers again; T1 */
    struct sb_part *p = NULL;
    for (int j = 0; !s->failed && j < x->n_parts; j++)
        if (strcmp(x->parts[j].topic, topic) == 0 && x->parts[j].partition == 0) p = &x->parts[j];
    if (!s->failed && (!p || !p->has_replica))
        sim_fail(s, what, "broker %d does not host the new %s-0", x->id, topic);
    /* the old replica went either by the deletion's StopReplica (sent again to a returning broker)
     * or, when the new topic's LeaderAndIsr came first, by being moved aside: never both, never
     * neither */
    bool deleted = false;
    for (int i = 0; i < x->n_deleted; i++) deleted |= strcmp(x->deleted[i], "ri0-0") == 0;
    if (!s->failed && (x->n_strays > 1 || (x->n_strays == 1) == deleted))
        sim_fail(s, what, "broker %d moved %d logs aside and %s the old %s-0 by StopReplica", x->id, x->n_strays,
                 deleted ? "deleted" : "did not delete", topic);
}

/* The topic id of /brokers/topics/<topic> into out (empty when none or no znode). */
static void znode_topic_id(struct sim *s, const char *topic, char out[32], int32_t *version) {
    char path[128];
    snprintf(path, sizeof path, "/brokers/topics/%s", topic);
    const char *d;
    int len;
    struct gr_zstat st;
    out[0] = 0;
    if (zm_peek(s->zm, path, &d, &len, &st) != GR_ZOK || !d) return;
    struct gr_kzk_topic_assignment a;
    if (gr_kzk_topic_assignment_decode(d, (size_t)len, &a) != 0) return;
    if (a.topic_id) snprintf(out, 32, "%s", a.topic_id);
    if (version) *version = st.version;
    gr_kzk_topic_assignment_release(&a);
}

/* KIP-516: a Kafka 2.7 tool rewrites a topic's znode without its id (kafka-topics --zookeeper
 * --alter adding a partition) while the controller knows the id: the controller writes the same
 * id back and takes the new partition; no broker moves a log aside (T1, T2). Without the
 * controller's write-back (gr_ctrl_restore_topic_id) the topic stays without an id until the next
 * failover gives it a new one, and every replica's log would be moved aside. */
static void scenario_rewrite_without_id(struct sim *s) {
    const char *what = "scenario znode rewritten without its topic id";
    struct sbroker *c = start_settled(s, what);
    if (!c) return;
    struct sbroker *x = &s->brokers[0] == c ? &s->brokers[1] : &s->brokers[0];
    const char *topic = "rw0";
    int32_t reps[2] = {c->id, x->id};
    create_topic(s, topic, reps, 2);
    if (!s->failed) sim_settle(s);
    if (s->failed) return;
    char before[32], after[32];
    int32_t version = -1;
    znode_topic_id(s, topic, before, &version);
    int strays = 0;
    for (int i = 0; i < s->n_brokers; i++) strays += s->brokers[i].n_strays;
    struct gr_kzk_partition_assignment pa[2] = {{.partition = 0, .n_replicas = 2, .replicas = reps},
                                                {.partition = 1, .n_replicas = 2, .replicas = reps}};
    struct gr_kzk_topic_assignment a = {.topic = (char *)topic, .n_partitions = 2, .partitions = pa};
    if (!before[0] || gr_kzk_set_topic_assignment(s->admin_kzk, topic, &a, version) != 0)
        sim_fail(s, what, "cannot rewrite %s without its id (it had '%s')", topic, before);
    if (!s->failed) sim_settle(s);
    if (s->failed) return;
    znode_topic_id(s, topic, after, NULL);
    if (strcmp(before, after) != 0)
        sim_fail(s, what, "topic %s had id %s, has '%s' after the rewrite", topic, before, after);
    for (int i = 0; i < s->n_brokers; i++) strays -= s->brokers[i].n_strays;
    if (!s->failed && strays != 0) sim_fail(s, what, "%d logs moved aside", -strays);
}

/* The same rewrite while no controller runs (every broker down): the next controller cannot
 * know the id from its own context and takes the one /brokers/topics/T/partitions holds (the
 * stamp); same id, no log moved aside (T1, T2). Without it (a new id) every replica's log would
 * be moved aside and the topic would restart empty. */
static void scenario_rewrite_without_id_no_controller(struct sim *s) {
    const char *what = "scenario znode rewritten without its topic id while no controller runs";
    struct sbroker *c = start_settled(s, what);
    if (!c) return;
    struct sbroker *x = &s->brokers[0] == c ? &s->brokers[1] : &s->brokers[0];
    const char *topic = "rw1";
    int32_t reps[2] = {c->id, x->id};
    create_topic(s, topic, reps, 2);
    if (!s->failed) sim_settle(s);
    if (s->failed) return;
    char before[32], after[32];
    int32_t version = -1;
    znode_topic_id(s, topic, before, &version);
    int strays = 0;
    for (int i = 0; i < s->n_brokers; i++) strays += s->brokers[i].n_strays;
    for (int i = 0; i < s->n_brokers; i++)
        if (s->brokers[i].alive) node_crash(s, &s->brokers[i], true);
    struct gr_kzk_partition_assignment pa[1] = {{.partition = 0, .n_replicas = 2, .replicas = reps}};
    struct gr_kzk_topic_assignment a = {.topic = (char *)topic, .n_partitions = 1, .partitions = pa};
    if (!before[0] || gr_kzk_set_topic_assignment(s->admin_kzk, topic, &a, version) != 0)
        sim_fail(s, what, "cannot rewrite %s without its id (it had '%s')", topic, before);
    if (s->failed) return;
    sim_note_id_dropped(s, topic);
    start_all(s);
    if (!s->failed) sim_settle(s);
    if (s->failed) return;
    znode_topic_id(s, topic, after, NULL);
    if (strcmp(before, after) != 0)
        sim_fail(s, what, "topic %s had id %s, has '%s' after the rewrite and a new controller", topic, before, after);
    for (int i = 0; i < s->n_brokers; i++) strays -= s->brokers[i].n_strays;
    if (!s->failed && strays != 0) sim_fail(s, what, "%d logs moved aside", -strays);
}

/* ---- the warm standby controller (W1 checks every failover's context) ---- */

/* Lets every standby refresh (simnode.c: every 20 s of virtual time) run on a quiet cluster. */
static void refresh_standbys(struct sim *s) {
    sim_advance(s, 21000);
    sim_settle(s);
}

static void want_warm(struct sim *s, const char *what, uint64_t warm_before) {
    if (!s->failed && g_failovers.warm == warm_before)
        sim_fail(s, what, "no failover started from the standby context (%" PRIu64 " warm in all)", g_failovers.warm);
}

/* The controller's broker is killed (or only its session lost) while a reassignment and a
 * deletion are under way, then the next controller too: two failovers in a row, both warm, from
 * standby contexts that missed the latest ISR and assignment changes. */
static void standby_two_failovers(struct sim *s, bool crash) {
    const char *what = "scenario standby: two failovers during a reassignment and a deletion";
    struct sbroker *c = start_settled(s, what);
    if (!c) return;
    int32_t r1[] = {1, 2}, r2[] = {2, 3}, r3[] = {3, 1};
    create_topic(s, "sb0", r1, 2);
    create_topic(s, "sb1", r2, 2);
    create_topic(s, "sb2", r3, 2);
    if (!s->failed) sim_settle(s);
    if (!s->failed) refresh_standbys(s);
    if (s->failed) return;
    uint64_t warm = g_failovers.warm;
    int32_t target[] = {3, 1};
    struct api_result res;
    reassign(s, "sb0", target, 2, &res); /* queued on the controller, not yet processed */
    if (!s->failed && gr_kzk_create_topic_deletion(s->admin_kzk, "sb1") != 0)
        sim_fail(s, what, "cannot mark sb1 for deletion");
    for (int round = 0; round < 2 && !s->failed; round++) {
        struct sbroker *a = active(s);
        if (!a) {
            sim_settle(s);
            a = active(s);
        }
        if (!a) break;
        if (crash) node_crash(s, a, true);
        else zm_expire_session(s->zm, zm_client_session(a->zc));
        settle_keep_dead(s);
    }
    want_warm(s, what, warm);
    if (!s->failed) sim_settle(s); /* the dead come back; quiet checks */
}

static void scenario_standby_crash(struct sim *s) { standby_two_failovers(s, true); }
static void scenario_standby_expire(struct sim *s) { standby_two_failovers(s, false); }

/* A broker cut off from ZooKeeper long enough to miss leader and ISR changes (its session
 * expires) becomes the controller right after it returns: its standby context is stale, and the
 * failover must find every stale state by its version and read it. */
static void scenario_standby_partitioned(struct sim *s) {
    const char *what = "scenario standby: a broker partitioned away becomes controller";
    struct sbroker *c = start_settled(s, what);
    if (!c) return;
    int32_t r1[] = {1, 2, 3}, r2[] = {2, 3, 1};
    create_topic(s, "sp0", r1, 3);
    create_topic(s, "sp1", r2, 3);
    if (!s->failed) sim_settle(s);
    if (!s->failed) refresh_standbys(s);
    if (s->failed) return;
    struct sbroker *x = &s->brokers[0] == c ? &s->brokers[1] : &s->brokers[0];
    struct sbroker *y = NULL;
    for (int i = 0; i < s->n_brokers; i++)
        if (&s->brokers[i] != c && &s->brokers[i] != x) y = &s->brokers[i];
    x->zk_cut_until = s->now + 3 * SIM_SESSION_TIMEOUT_MS;
    zm_disconnect(x->zc);
    s->settle_hold_cuts = true;
    sim_settle(s); /* x's session expires: the controller moves leaders off x and shrinks ISRs */
    if (!s->failed && gr_kzk_create_topic_deletion(s->admin_kzk, "sp1") != 0)
        sim_fail(s, what, "cannot mark sp1 for deletion");
    if (!s->failed) sim_settle(s);
    s->settle_hold_cuts = false;
    uint64_t warm = g_failovers.warm;
    if (!s->failed && y) node_crash(s, y, true);
    if (!s->failed) node_crash(s, c, true); /* only x is left: it must take over */
    x->zk_cut_until = 0;
    if (!s->failed) settle_keep_dead(s);
    if (!s->failed && !gr_controller_is_active(x->ctrl)) sim_fail(s, what, "broker %d is not the controller", x->id);
    want_warm(s, what, warm);
    if (!s->failed) sim_settle(s);
}

/* A state znode deleted and created again at the same version under an unchanged topic znode
 * (docs/ARCHITECTURE.md, "Warm standby controller"): the controller's deletion of a topic is cut
 * between two of its multis (its session expires; the first multi removed some state znodes), the
 * next controller runs with delete.topic.enable=false (a rolling change of the setting), removes
 * /admin/delete_topics/T and creates the missing states at version 0 with its own leader and ISR.
 * A broker that held the old states at version 0 in its standby, cut off meanwhile, then becomes
 * the controller: the new znodes are at the versions it holds, so only the stamps (kzk: the
 * deletes' and the creates' multis set /brokers/topics/rs0/partitions) tell it the states
 * changed. W1 fails without them. */
static void scenario_standby_recreated_states(struct sim *s) {
    const char *what = "scenario standby: states re-created at version 0 after an interrupted deletion";
    s->kzk_batch = 4; /* three deletes per multi: a 4-partition topic takes several */
    struct sbroker *c = start_settled(s, what);
    if (!c) return;
    struct sbroker *d = NULL, *x = NULL; /* d: the next controller (deletion off); x: the stale standby */
    for (int i = 0; i < s->n_brokers; i++) {
        if (&s->brokers[i] == c) continue;
        if (!d) d = &s->brokers[i];
        else x = &s->brokers[i];
    }
    const char *topic = "rs0";
    int32_t reps[] = {c->id, d->id};
    struct gr_kzk_partition_assignment pa[4];
    for (int p = 0; p < 4; p++) pa[p] = (struct gr_kzk_partition_assignment){.partition = p, .n_replicas = 2, .replicas = reps};
    struct gr_kzk_topic_assignment a = {.topic = (char *)topic, .n_partitions = 4, .partitions = pa};
    if (gr_kzk_create_topic(s->admin_kzk, topic, &a, NULL) != 0) sim_fail(s, what, "cannot create %s", topic);
    if (!s->failed) sim_settle(s);
    if (!s->failed) refresh_standbys(s); /* x's standby: rs0's states at version 0, led by c */
    if (s->failed) return;
    /* x is cut off from here on (it must neither refresh nor take over before the end) */
    x->zk_cut_until = s->now + 1000 * SIM_SESSION_TIMEOUT_MS;
    zm_disconnect(x->zc);
    s->settle_hold_cuts = true;
    sim_settle(s);
    /* d restarts with delete.topic.enable=false */
    d->delete_disabled = true;
    if (!s->failed) node_crash(s, d, true);
    if (!s->failed && !node_start(s, d)) sim_fail(s, what, "broker %d does not start again", d->id);
    if (!s->failed) sim_settle(s);
    if (!s->failed && !gr_controller_is_active(c->ctrl)) sim_fail(s, what, "controller %d moved", c->id);
    if (s->failed) return;
    /* c deletes rs0 and is cut after its first multi of deletes; it cannot come back meanwhile */
    c->zk_cut_until = s->now + 1000 * SIM_SESSION_TIMEOUT_MS;
    s->interrupt_deletion_of = topic;
    if (gr_kzk_create_topic_deletion(s->admin_kzk, topic) != 0) sim_fail(s, what, "cannot mark %s for deletion", topic);
    if (!s->failed) sim_settle(s); /* d takes over, drops the marker, creates the missing states */
    if (s->failed) return;
    int remaining = 0;
    for (int p = 0; p < 4; p++) {
        char path[128];
        struct gr_zstat st;
        snprintf(path, sizeof path, "/brokers/topics/%s/partitions/%d/state", topic, p);
        if (zm_peek(s->zm, path, NULL, NULL, &st) == GR_ZOK && st.version == 0) remaining++;
    }
    if (s->interrupt_deletion_of || !gr_controller_is_active(d->ctrl) ||
        zm_peek(s->zm, "/admin/delete_topics/rs0", NULL, NULL, NULL) == GR_ZOK || remaining == 0) {
        sim_fail(s, what, "the script did not run as planned (interrupted: %d, controller %d: %d, states at v0: %d)",
                 !s->interrupt_deletion_of, d->id, gr_controller_is_active(d->ctrl), remaining);
        return;
    }
    /* c stays away (the states d created must stay at version 0); x comes back, gets a new session
     * and refreshes its standby: every check passes at version 0 */
    node_crash(s, c, true);
    s->settle_hold_cuts = false;
    settle_keep_dead(s);
    if (s->failed) return;
    uint64_t warm = g_failovers.warm;
    node_crash(s, d, true);
    settle_keep_dead(s); /* x takes over: W1 */
    if (!s->failed && !gr_controller_is_active(x->ctrl)) sim_fail(s, what, "broker %d is not the controller", x->id);
    want_warm(s, what, warm);
    d->delete_disabled = false;
    if (!s->failed) sim_settle(s);
}

/* Restarts b and lets its start-up standby refresh run; with the refresh period set longer than
 * the script (sim.standby_refresh_ms), that is its last. */
static void restart_for_last_refresh(struct sim *s, struct sbroker *b, const char *what) {
    s->standby_refresh_ms = 3600 * 1000;
    node_crash(s, b, true);
    if (!node_start(s, b)) sim_fail(s, what, "broker %d does not start again", b->id);
    if (!s->failed) sim_settle(s);
    if (!s->failed) sim_advance(s, 1000); /* its start-up refresh (due now) runs */
    if (!s->failed) sim_settle(s);
}

/* The stamp proof (docs/ARCHITECTURE.md, "Warm standby controller"): a broker's standby is
 * refreshed, then the controller writes one topic's states (a broker dies: its leaderships move,
 * its ISR memberships go) and the controller's broker dies before any refresh. The survivor's warm
 * failover must find that topic's stamp changed and read its states, and keep the other topic's
 * (unwritten) states by their unchanged stamp. W1 fails if the changed topic is trusted. */
static void scenario_standby_write_after_refresh(struct sim *s) {
    const char *what = "scenario standby: a state write between the last refresh and the failover";
    struct sbroker *c = start_settled(s, what);
    if (!c) return;
    struct sbroker *b = NULL, *x = NULL; /* b: dies first (leads sw0); x: the survivor */
    for (int i = 0; i < s->n_brokers; i++) {
        if (&s->brokers[i] == c) continue;
        if (!b) b = &s->brokers[i];
        else x = &s->brokers[i];
    }
    /* neither topic is x's (x's restart writes no state); only sw0 is b's */
    int32_t r0[] = {b->id, c->id}, r1[] = {c->id};
    create_topic(s, "sw0", r0, 2);
    create_topic(s, "sw1", r1, 1);
    if (!s->failed) sim_settle(s);
    if (s->failed) return;
    restart_for_last_refresh(s, x, what); /* x's start-up refresh is its last */
    if (!s->failed && !gr_controller_is_active(c->ctrl)) sim_fail(s, what, "controller %d moved", c->id);
    if (s->failed) return;
    struct gr_kzk_leader_and_isr before, after;
    bool had = zk_state(s, "sw0", &before);
    gr_kzk_leader_and_isr_release(&before);
    node_crash(s, b, true);
    settle_keep_dead(s); /* c moves sw0's leadership off b and shrinks its ISR */
    bool moved = zk_state(s, "sw0", &after) && after.leader != b->id && had;
    gr_kzk_leader_and_isr_release(&after);
    if (!s->failed && (!moved || !gr_controller_is_active(c->ctrl))) {
        sim_fail(s, what, "the script did not run as planned (sw0 moved: %d, controller %d: %d)", moved, c->id,
                 gr_controller_is_active(c->ctrl));
        return;
    }
    if (s->failed) return;
    uint64_t warm = g_failovers.warm;
    node_crash(s, c, true);
    settle_keep_dead(s); /* x takes over: W1 */
    if (!s->failed && !gr_controller_is_active(x->ctrl)) sim_fail(s, what, "broker %d is not the controller", x->id);
    want_warm(s, what, warm);
    const struct gr_ctrl_load_report *r = &g_failovers.last_warm;
    if (!s->failed && (r->states_read != 1 || r->states_confirmed != 1))
        sim_fail(s, what, "broker %d kept %lld states by their stamp and read %lld (want sw1-0 kept, sw0-0 read)", x->id,
                 (long long)r->states_confirmed, (long long)r->states_read);
    s->standby_refresh_ms = 0;
    if (!s->failed) sim_settle(s);
}

/* Stamps prove only the writes of controllers that stamp (docs/ARCHITECTURE.md, "Warm standby
 * controller": a rolling upgrade from a Gregor without them, or a Kafka broker as controller). x's
 * standby is refreshed under a stamping controller c; c dies while x is briefly cut off, so o, which
 * runs as an earlier version (sbroker.no_stamps), becomes the controller and moves so0's leadership
 * without stamping; o dies and x takes over without a refresh in between. Its failover must see
 * that an unseen controller held office (epoch: last seen + 2) and read every state. W1 fails if it
 * trusts the unchanged stamps. */
static void scenario_standby_unstamped_controller(struct sim *s) {
    const char *what = "scenario standby: a controller of an earlier version between the refresh and the failover";
    struct sbroker *c = start_settled(s, what);
    if (!c) return;
    struct sbroker *o = NULL, *x = NULL;
    for (int i = 0; i < s->n_brokers; i++) {
        if (&s->brokers[i] == c) continue;
        if (!o) o = &s->brokers[i];
        else x = &s->brokers[i];
    }
    int32_t r0[] = {c->id, o->id}, r1[] = {c->id};
    create_topic(s, "so0", r0, 2);
    create_topic(s, "so1", r1, 1);
    if (!s->failed) sim_settle(s);
    o->no_stamps = true; /* o restarts as an earlier version */
    if (!s->failed) node_crash(s, o, true);
    if (!s->failed && !node_start(s, o)) sim_fail(s, what, "broker %d does not start again", o->id);
    if (!s->failed) sim_settle(s);
    if (!s->failed) restart_for_last_refresh(s, x, what);
    if (!s->failed && !gr_controller_is_active(c->ctrl)) sim_fail(s, what, "controller %d moved", c->id);
    if (s->failed) return;
    /* x misses c's death (cut off for less than a session); o wins and writes so0's state (a new
     * leader, or none if o is not in its ISR) */
    struct gr_kzk_leader_and_isr st;
    bool had = zk_state(s, "so0", &st);
    int32_t epoch_before = st.leader_epoch;
    gr_kzk_leader_and_isr_release(&st);
    x->zk_cut_until = s->now + SIM_SESSION_TIMEOUT_MS / 2;
    zm_disconnect(x->zc);
    s->settle_hold_cuts = true;
    node_crash(s, c, true);
    settle_keep_dead(s);
    s->settle_hold_cuts = false;
    x->zk_cut_until = 0;
    if (!s->failed) settle_keep_dead(s);
    bool moved = had && zk_state(s, "so0", &st) && st.leader_epoch > epoch_before;
    gr_kzk_leader_and_isr_release(&st);
    if (!s->failed && (!moved || !gr_controller_is_active(o->ctrl))) {
        sim_fail(s, what, "the script did not run as planned (so0 written by %d: %d, controller %d: %d)", o->id, moved,
                 o->id, gr_controller_is_active(o->ctrl));
        return;
    }
    uint64_t warm = g_failovers.warm;
    node_crash(s, o, true);
    settle_keep_dead(s); /* x takes over: W1 */
    if (!s->failed && !gr_controller_is_active(x->ctrl)) sim_fail(s, what, "broker %d is not the controller", x->id);
    want_warm(s, what, warm);
    if (!s->failed && g_failovers.last_warm.states_confirmed != 0)
        sim_fail(s, what, "broker %d kept %lld states by their stamps after an unseen controller", x->id,
                 (long long)g_failovers.last_warm.states_confirmed);
    s->standby_refresh_ms = 0;
    o->no_stamps = false;
    if (!s->failed) sim_settle(s);
}

/* Runs one settle with the brokers cut[0..n) off from ZooKeeper for less than a session (they see
 * nothing meanwhile, and keep their sessions), dead brokers kept down; then lets them back. */
static void settle_without(struct sim *s, struct sbroker **cut, int n) {
    for (int i = 0; i < n; i++) {
        cut[i]->zk_cut_until = s->now + SIM_SESSION_TIMEOUT_MS / 2;
        zm_disconnect(cut[i]->zc);
    }
    s->settle_hold_cuts = true;
    settle_keep_dead(s);
    s->settle_hold_cuts = false;
    for (int i = 0; i < n; i++) cut[i]->zk_cut_until = 0;
    if (!s->failed) settle_keep_dead(s);
}

/* The refreshes' half of the rule above: an unseen controller of an earlier version between two
 * refreshes. x's standby is refreshed under c (epoch E); c dies and o (no stamps) takes over (E+1)
 * and writes sr0's state; o resigns alive and c, back, takes over again (E+2) and leaves sr0 as it
 * is (no AlterIsr in this script); x refreshes (sees E+2: the stamps of its E refresh prove nothing
 * of E+1), then c dies and x takes over (E+3, one after the epoch its refresh saw, so the failover's
 * own check passes). W1 fails if the refresh kept sr0's state by its unchanged stamp. */
static void scenario_standby_unstamped_between_refreshes(struct sim *s) {
    const char *what = "scenario standby: a controller of an earlier version between two refreshes";
    s->o.alter_partition = false;
    struct sbroker *c = start_settled(s, what);
    if (!c) return;
    struct sbroker *o = NULL, *x = NULL;
    for (int i = 0; i < s->n_brokers; i++) {
        if (&s->brokers[i] == c) continue;
        if (!o) o = &s->brokers[i];
        else x = &s->brokers[i];
    }
    o->no_stamps = true; /* o restarts as an earlier version, before the topic exists */
    node_crash(s, o, true);
    if (!node_start(s, o)) sim_fail(s, what, "broker %d does not start again", o->id);
    if (!s->failed) sim_settle(s);
    int32_t r0[] = {c->id, o->id};
    create_topic(s, "sr0", r0, 2);
    if (!s->failed) sim_settle(s);
    if (!s->failed) refresh_standbys(s); /* x's standby: sr0 led by c, under c's epoch */
    if (!s->failed && !gr_controller_is_active(c->ctrl)) sim_fail(s, what, "controller %d moved", c->id);
    if (s->failed) return;
    node_crash(s, c, true);
    settle_without(s, &x, 1); /* o takes over and moves sr0's leadership to itself, unstamped */
    struct gr_kzk_leader_and_isr st;
    bool by_o = zk_state(s, "sr0", &st) && st.leader == o->id;
    gr_kzk_leader_and_isr_release(&st);
    if (!s->failed && (!by_o || !gr_controller_is_active(o->ctrl))) {
        sim_fail(s, what, "the script did not run as planned (sr0 led by %d: %d, controller %d: %d)", o->id, by_o,
                 o->id, gr_controller_is_active(o->ctrl));
        return;
    }
    if (s->failed) return;
    /* o resigns alive; c, back, takes over */
    struct sbroker *ox[] = {o, x};
    for (int i = 0; i < 2; i++) {
        ox[i]->zk_cut_until = s->now + SIM_SESSION_TIMEOUT_MS / 2;
        zm_disconnect(ox[i]->zc);
    }
    if (gr_zkb_delete(zm_backend(s->admin), "/controller", GR_ZANY_VERSION) != GR_ZOK)
        sim_fail(s, what, "cannot delete /controller");
    if (!s->failed && !node_start(s, c)) sim_fail(s, what, "broker %d does not start again", c->id);
    s->settle_hold_cuts = true;
    if (!s->failed) settle_keep_dead(s);
    s->settle_hold_cuts = false;
    for (int i = 0; i < 2; i++) ox[i]->zk_cut_until = 0;
    if (!s->failed) settle_keep_dead(s);
    by_o = zk_state(s, "sr0", &st) && st.leader == o->id;
    gr_kzk_leader_and_isr_release(&st);
    if (!s->failed && (!by_o || !gr_controller_is_active(c->ctrl))) {
        sim_fail(s, what, "the script did not run as planned (sr0 still led by %d: %d, controller %d: %d)", o->id, by_o,
                 c->id, gr_controller_is_active(c->ctrl));
        return;
    }
    if (!s->failed) refresh_standbys(s); /* x's refresh sees c's new epoch */
    if (s->failed) return;
    uint64_t warm = g_failovers.warm;
    node_crash(s, c, true);
    settle_without(s, &o, 1); /* x takes over: W1 */
    if (!s->failed && !gr_controller_is_active(x->ctrl)) sim_fail(s, what, "broker %d is not the controller", x->id);
    want_warm(s, what, warm);
    o->no_stamps = false;
    if (!s->failed) sim_settle(s);
}

/* A state written by a broker, not a controller: a Kafka broker whose inter.broker.protocol.version
 * predates 2.7-IV2 (a rolling upgrade from Kafka) shrinks its ISR by a conditional setData of the
 * state znode and then creates /isr_change_notification/isr_change_N, which the controller
 * processes (re-reads the state) and deletes (flows.c). That write carries no stamp, and no
 * controller epoch changed. x's standby is refreshed before it; c processes the notification and
 * dies; x takes over (b, the writer, cut off meanwhile) and W1 checks its context. W1 fails if x
 * keeps sl0's state by its unchanged stamp. */
static void scenario_standby_broker_isr_write(struct sim *s) {
    const char *what = "scenario standby: an ISR shrink written by a broker of an earlier version";
    s->o.alter_partition = false; /* no AlterIsr: the brokers leave the ISR as written */
    struct sbroker *c = start_settled(s, what);
    if (!c) return;
    struct sbroker *b = NULL, *x = NULL; /* b: the legacy leader of sl0; x: the next controller */
    for (int i = 0; i < s->n_brokers; i++) {
        if (&s->brokers[i] == c) continue;
        if (!b) b = &s->brokers[i];
        else x = &s->brokers[i];
    }
    int32_t r0[] = {b->id, c->id}, r1[] = {b->id}; /* not x's: its restart leaves them as they are */
    create_topic(s, "sl0", r0, 2);
    create_topic(s, "sl1", r1, 1);
    if (!s->failed) sim_settle(s);
    if (s->failed) return;
    restart_for_last_refresh(s, x, what); /* x's start-up refresh is its last */
    if (!s->failed && !gr_controller_is_active(c->ctrl)) sim_fail(s, what, "controller %d moved", c->id);
    struct gr_kzk_leader_and_isr st;
    struct gr_zstat zst;
    const char *d;
    int len;
    if (!s->failed && (zm_peek(s->zm, "/brokers/topics/sl0/partitions/0/state", &d, &len, &zst) != GR_ZOK ||
                       !zk_state(s, "sl0", &st) || st.leader != b->id || st.n_isr != 2))
        sim_fail(s, what, "the script did not run as planned (sl0 not led by %d with two in its ISR)", b->id);
    if (s->failed) return;
    /* b, as a Kafka leader before AlterIsr, drops c from the ISR (Partition.shrinkIsr: a conditional
     * setData of the state, then the notification) */
    st.isr[0] = b->id;
    st.n_isr = 1;
    size_t jl;
    char *json = gr_kzk_partition_state_encode(&st, &jl);
    gr_kzk_leader_and_isr_release(&st);
    /* (through c's session, in a multi under c's epoch guard, only to satisfy P1 and E3, which have
     * no notion of a legacy broker; a real one sets the znode alone) */
    struct gr_zstat est;
    if (zm_peek(s->zm, "/controller_epoch", &d, &len, &est) != GR_ZOK) sim_fail(s, what, "no /controller_epoch");
    struct gr_zop ops[2] = {gr_zop_check("/controller_epoch", est.version),
                            gr_zop_set("/brokers/topics/sl0/partitions/0/state", json, (int)jl, zst.version)};
    struct gr_zop_result zr[2];
    memset(zr, 0, sizeof zr);
    if (!s->failed && gr_zkb_multi(zm_backend(c->zc), ops, 2, zr) != GR_ZOK)
        sim_fail(s, what, "cannot write sl0's state as its leader");
    gr_zop_results_release(zr, 2);
    free(json);
    struct gr_kzk_tp tp = {.topic = "sl0", .partition = 0};
    if (!s->failed && gr_kzk_create_isr_change_notification(s->admin_kzk, &tp, 1) != 0)
        sim_fail(s, what, "cannot create the ISR change notification");
    if (!s->failed) settle_keep_dead(s); /* c reads sl0's state again and deletes the notification */
    if (s->failed) return;
    uint64_t warm = g_failovers.warm;
    node_crash(s, c, true);
    settle_without(s, &b, 1); /* x takes over: W1 */
    if (!s->failed && !gr_controller_is_active(x->ctrl)) sim_fail(s, what, "broker %d is not the controller", x->id);
    want_warm(s, what, warm);
    s->standby_refresh_ms = 0;
    if (!s->failed) sim_settle(s);
}

/* The refresh deferral's half of the ISR-change rule (controller.c process_standby_refresh): a
 * refresh that finds a new controller in office only notes the term and the
 * /isr_change_notification cversion and reads one period later -- but it must still forget the
 * stamps when the cversion moved since the refresh that read them. x's standby is refreshed under c
 * (epoch E); b, a legacy leader, shrinks sl0's ISR itself and announces it; c processes the
 * announcement and dies; b takes over (E+1, writing nothing of sl0); x's next refresh sees E+1 and
 * defers; b dies and x takes over (E+2, one after the epoch its refresh noted, and no announcement
 * since that refresh: the failover's own checks pass). W1 fails if the deferring refresh noted the
 * new cversion without forgetting the stamps (sl0's state kept by its unchanged stamp). */
static void scenario_standby_broker_isr_write_deferred(struct sim *s) {
    const char *what = "scenario standby: a broker's ISR write, then a controller the next refresh only notes";
    s->o.alter_partition = false; /* no AlterIsr: the brokers leave the ISR as written */
    struct sbroker *c = start_settled(s, what);
    if (!c) return;
    struct sbroker *b = NULL, *x = NULL; /* b: the legacy leader of sl0, then the controller; x: the last */
    for (int i = 0; i < s->n_brokers; i++) {
        if (&s->brokers[i] == c) continue;
        if (!b) b = &s->brokers[i];
        else x = &s->brokers[i];
    }
    int32_t r0[] = {b->id, c->id}, r1[] = {b->id};
    create_topic(s, "sl0", r0, 2);
    create_topic(s, "sl1", r1, 1);
    if (!s->failed) sim_settle(s);
    if (s->failed) return;
    restart_for_last_refresh(s, x, what); /* x's start-up refresh reads; the next is an hour away */
    if (!s->failed && !gr_controller_is_active(c->ctrl)) sim_fail(s, what, "controller %d moved", c->id);
    struct gr_kzk_leader_and_isr st;
    struct gr_zstat zst;
    const char *d;
    int len;
    if (!s->failed && (zm_peek(s->zm, "/brokers/topics/sl0/partitions/0/state", &d, &len, &zst) != GR_ZOK ||
                       !zk_state(s, "sl0", &st) || st.leader != b->id || st.n_isr != 2))
        sim_fail(s, what, "the script did not run as planned (sl0 not led by %d with two in its ISR)", b->id);
    if (s->failed) return;
    /* b drops c from the ISR as a Kafka leader before AlterIsr does (see the scenario above) */
    st.isr[0] = b->id;
    st.n_isr = 1;
    size_t jl;
    char *json = gr_kzk_partition_state_encode(&st, &jl);
    gr_kzk_leader_and_isr_release(&st);
    struct gr_zstat est;
    if (zm_peek(s->zm, "/controller_epoch", &d, &len, &est) != GR_ZOK) sim_fail(s, what, "no /controller_epoch");
    struct gr_zop ops[2] = {gr_zop_check("/controller_epoch", est.version),
                            gr_zop_set("/brokers/topics/sl0/partitions/0/state", json, (int)jl, zst.version)};
    struct gr_zop_result zr[2];
    memset(zr, 0, sizeof zr);
    if (!s->failed && gr_zkb_multi(zm_backend(c->zc), ops, 2, zr) != GR_ZOK)
        sim_fail(s, what, "cannot write sl0's state as its leader");
    gr_zop_results_release(zr, 2);
    free(json);
    struct gr_kzk_tp tp = {.topic = "sl0", .partition = 0};
    if (!s->failed && gr_kzk_create_isr_change_notification(s->admin_kzk, &tp, 1) != 0)
        sim_fail(s, what, "cannot create the ISR change notification");
    if (!s->failed) settle_keep_dead(s); /* c reads sl0's state again and deletes the notification */
    if (s->failed) return;
    /* b takes over: x is cut off first (it gets no notification of c's end until b has won) */
    x->zk_cut_until = s->now + SIM_SESSION_TIMEOUT_MS / 2;
    zm_disconnect(x->zc);
    node_crash(s, c, true);
    s->settle_hold_cuts = true;
    settle_keep_dead(s);
    s->settle_hold_cuts = false;
    x->zk_cut_until = 0;
    if (!s->failed) settle_keep_dead(s);
    if (!s->failed && !gr_controller_is_active(b->ctrl)) {
        struct sbroker *a = active(s);
        sim_fail(s, what, "the script did not run as planned (broker %d is not the controller; %d is; c %d x %d)", b->id,
                 a ? a->id : -1, c->id, x->id);
        return;
    }
    if (s->failed) return;
    sim_advance(s, 3600 * 1000); /* x's next refresh: b's term is new to it, it only notes it */
    if (!s->failed) settle_keep_dead(s);
    if (s->failed) return;
    uint64_t warm = g_failovers.warm;
    node_crash(s, b, true);
    settle_keep_dead(s); /* x takes over: W1 */
    if (!s->failed && !gr_controller_is_active(x->ctrl)) sim_fail(s, what, "broker %d is not the controller", x->id);
    want_warm(s, what, warm);
    s->standby_refresh_ms = 0;
    if (!s->failed) sim_settle(s);
}

/* --hand-move's livelock (seed 120173 --standby --hand-move at 2d6a9ae; seed 119680 of the same
 * options reproduced it): c is the controller (epoch E); before c processes any of it, /controller
 * is deleted, another broker o wins epoch E+1 (made here by the kzk call of o's election, on o's
 * session, before o's controller runs) and an operator rewrites /controller to name c. When
 * c processes its ControllerChange, /controller names c and c still holds the term it won for
 * epoch E. Kafka 2.7 (maybeResign: isActive is activeControllerId == brokerId) and Gregor before
 * the fix counted that as "still active": c acted with epoch E, every guarded write failed
 * (controller moved), each failure reread the same /controller and nobody elected (Q2 here; L1
 * when brokers keep sending AlterPartition to c). Now c sees that /controller_epoch moved since
 * its election: it resigns, deletes /controller and elects again, so the cluster settles on one
 * controller of a new epoch. */
static void scenario_hand_move_to_stale_controller(struct sim *s) {
    const char *what = "scenario /controller rewritten to name a controller whose term ended unseen";
    struct sbroker *c = start_settled(s, what);
    if (!c) return;
    int32_t reps[] = {c->id};
    create_topic(s, "hm0", reps, 1);
    sim_settle(s);
    if (s->failed) return;
    int32_t e = gr_controller_epoch(c->ctrl);
    struct sbroker *o = &s->brokers[0] == c ? &s->brokers[1] : &s->brokers[0];
    int32_t epoch = -1, zkv = -1;
    if (gr_zkb_delete(zm_backend(s->admin), "/controller", GR_ZANY_VERSION) != GR_ZOK ||
        gr_kzk_register_controller_and_increment_epoch(o->kzk, o->id, &epoch, &zkv) != 0 || epoch != e + 1) {
        sim_fail(s, what, "cannot run the unseen election (epoch %d, want %d)", epoch, e + 1);
        return;
    }
    const char *d;
    int len;
    size_t l;
    if (zm_peek(s->zm, "/controller", &d, &len, NULL) != GR_ZOK || !d) {
        sim_fail(s, what, "no /controller to rewrite");
        return;
    }
    char *json = gr_kzk_controller_encode(c->id, s->now, gr_kzk_controller_stamps(d, (size_t)len), &l);
    if (gr_zkb_set(zm_backend(s->admin), "/controller", json, (int)l, GR_ZANY_VERSION, NULL) != GR_ZOK)
        sim_fail(s, what, "cannot rewrite /controller");
    free(json);
    if (!s->failed) sim_settle(s); /* Q2: one controller, of the epoch in ZooKeeper */
    struct sbroker *n = active(s);
    if (!s->failed && (!n || gr_controller_epoch(n->ctrl) <= e + 1))
        sim_fail(s, what, "controller %d at epoch %d (want one elected after epoch %d)", n ? n->id : -1,
                 n ? gr_controller_epoch(n->ctrl) : -1, e + 1);
}

static void scenario_delete_same_term(struct sim *s) { delete_while_not_live(s, false); }

static void scenario_delete_then_move(struct sim *s) { delete_while_not_live(s, true); }

static const struct {
    const char *name;
    int brokers;
    void (*run)(struct sim *s);
    bool standby; /* runs with gregor.controller.standby.enable (the others without), whatever the options */
} scenarios[] = {
    {"offline dir: the only in-sync replica is not re-elected", 2, scenario_offline_dir_only_isr, false},
    {"cancel keeps an in-sync replica", 3, scenario_cancel_keeps_isr, false},
    {"a topic deleted while a broker is away: removed from its cache in the same term", 3, scenario_delete_same_term, false},
    {"a topic deleted while a broker is away: kept in its cache after a controller move", 3, scenario_delete_then_move, false},
    {"a topic deleted while a broker is away and created again: its new partition stays in the cache", 3,
     scenario_recreated_same_term, false},
    {"a topic re-created onto a replica its broker kept while away: the old replica is moved aside (topic ids)", 3,
     scenario_recreated_onto_away_replica, false},
    {"a topic's znode rewritten without its id by a 2.7 tool: the controller writes the id back (topic ids)", 3,
     scenario_rewrite_without_id, false},
    {"a topic's znode rewritten without its id while no controller runs: the next one takes the id from its stamp "
     "(topic ids)", 3, scenario_rewrite_without_id_no_controller, false},
    {"/controller rewritten by hand to name a controller whose term ended unseen: it resigns and elects again", 3,
     scenario_hand_move_to_stale_controller, false},
    {"standby: the controller's broker killed twice during a reassignment and a deletion", 3, scenario_standby_crash, true},
    {"standby: the controller's session lost twice during a reassignment and a deletion", 3, scenario_standby_expire, true},
    {"standby: a broker partitioned away becomes the controller", 3, scenario_standby_partitioned, true},
    {"standby: states re-created at version 0 after an interrupted deletion (delete.topic.enable=false)", 3,
     scenario_standby_recreated_states, true},
    {"standby: a state write between the last refresh and the failover is found by its topic's stamp", 3,
     scenario_standby_write_after_refresh, true},
    {"standby: a controller of an earlier version (no stamps) between the refresh and the failover", 3,
     scenario_standby_unstamped_controller, true},
    {"standby: a controller of an earlier version (no stamps) between two refreshes", 3,
     scenario_standby_unstamped_between_refreshes, true},
    {"standby: an ISR shrink written by a broker of an earlier version (no stamp, no new epoch)", 3,
     scenario_standby_broker_isr_write, true},
    {"standby: a broker's ISR write, then a controller change that the next refresh only notes (deferred)", 3,
     scenario_standby_broker_isr_write_deferred, true},
};

int sim_scenarios(const struct sim_opts *base) {
    int failed = 0;
    for (size_t k = 0; k < sizeof scenarios / sizeof scenarios[0]; k++) {
        for (uint64_t seed = 1; seed <= SCENARIO_SEEDS; seed++) {
            struct sim_opts o = *base;
            o.seed = 1000000 + seed;
            o.brokers = scenarios[k].brokers;
            o.verbose = false;
            o.zk_faults = false; /* scripted steps must not fail; settle has no faults anyway */
            /* the scripts rely on these flows whatever the run's options */
            o.alter_partition = o.admin_flows = o.expect_states = o.expect_metadata = true;
            /* the standby scripts run with the standby on, the others as written (off: a cut-off
             * broker's StandbyRefresh would wait for ZooKeeper and end the cut early) */
            o.standby = scenarios[k].standby;
            struct sim *s = gr_calloc(1, sizeof *s);
            sim_setup(s, &o);
            s->phase = 1;
            scenarios[k].run(s);
            if (s->failed) {
                printf("SCENARIO FAILED: %s (seed %" PRIu64 ")\n%s\n", scenarios[k].name, o.seed, s->fail_msg);
                failed++;
            }
            bool f = s->failed;
            sim_teardown(s);
            free(s);
            if (f) break;
        }
    }
    return failed;
}
