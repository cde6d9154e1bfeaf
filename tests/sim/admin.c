/* Admin tools and broker-initiated controller requests of the simulation (docs/SIMULATION.md,
 * "fault and admin menu"):
 *
 *  - topic deletion: /admin/delete_topics/T created as kafka-topics --delete does;
 *  - reassignment: /admin/reassign_partitions written as kafka-reassign-partitions does (only
 *    when absent), or an AlterPartitionReassignments request (ApiPartitionReassignment event with
 *    a struct gr_reassign_api_payload) to the controller a broker knows, targets or cancellation;
 *  - elections: /admin/preferred_replica_election, or ElectLeaders (PREFERRED / UNCLEAN) as a
 *    ReplicaLeaderElection event with a struct gr_elect_payload;
 *  - unclean.leader.election.enable=true for a topic: /config/topics/T rewritten plus a
 *    /config/changes notification (kafka-configs); every broker's config change listener reads it;
 *  - log dir failure: a broker's dir 1 fails (its replicas there answer KAFKA_STORAGE_ERROR) and
 *    the broker writes /log_dir_event_notification;
 *  - controlled shutdown: the broker sends ControlledShutdown (the event as the request handler
 *    puts it) to the controller it knows, retries up to 3 times until NONE with nothing remaining,
 *    then stops.
 * Answers of the API events are checked against the answering controller's context when they
 * arrive (on that controller's processing step). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/util.h"
#include "controller/controlled_shutdown.h"
#include "controller/leader_balance.h"
#include "controller/reassignment.h"
#include "controller/states.h"
#include "sim.h"

#define VLOG(s, ...)                                                                                                   \
    do {                                                                                                               \
        if ((s)->o.verbose) {                                                                                          \
            printf("[%6" PRId64 " t=%7" PRId64 "] ", (s)->step, (s)->now);                                           \
            printf(__VA_ARGS__);                                                                                       \
            printf("\n");                                                                                              \
        }                                                                                                              \
    } while (0)

#define MAX_TOPICS 64

struct sbroker *sim_broker(struct sim *s, int32_t id) {
    for (int i = 0; i < s->n_brokers; i++)
        if (s->brokers[i].id == id) return &s->brokers[i];
    return NULL;
}

/* Topics in /brokers/topics (copied names, sorted as the model lists them). */
static int zk_topics(struct sim *s, char names[][32], int max) {
    const char **v;
    int n = zm_peek_children(s->zm, "/brokers/topics", &v);
    int k = 0;
    for (int i = 0; i < n && k < max; i++) snprintf(names[k++], 32, "%s", v[i]);
    return k;
}

static bool zk_exists(struct sim *s, const char *path) { return zm_peek(s->zm, path, NULL, NULL, NULL) == GR_ZOK; }

static bool topic_queued(struct sim *s, const char *topic) {
    char p[320];
    snprintf(p, sizeof p, "/admin/delete_topics/%.200s", topic);
    return zk_exists(s, p);
}

/* ZooKeeper's assignment of a topic (caller releases). */
static bool zk_topic(struct sim *s, const char *topic, struct gr_kzk_topic_assignment *a) {
    char p[320];
    snprintf(p, sizeof p, "/brokers/topics/%.200s", topic);
    const char *d;
    int len;
    memset(a, 0, sizeof *a);
    if (zm_peek(s->zm, p, &d, &len, NULL) != GR_ZOK || !d) return false;
    return gr_kzk_topic_assignment_decode(d, (size_t)len, a) == 0;
}

/* A random partition of a random existing topic (queued topics only if allow_deleting). */
static bool pick_partition(struct sim *s, bool allow_deleting, char topic[32], int32_t *partition) {
    char names[MAX_TOPICS][32];
    int n = zk_topics(s, names, MAX_TOPICS);
    if (n == 0) return false;
    for (int tries = 0; tries < 4; tries++) {
        const char *t = names[rng_below(&s->rng, (uint32_t)n)];
        if (!allow_deleting && topic_queued(s, t)) continue;
        struct gr_kzk_topic_assignment a;
        if (!zk_topic(s, t, &a)) continue;
        bool ok = a.n_partitions > 0;
        if (ok) *partition = a.partitions[rng_below(&s->rng, (uint32_t)a.n_partitions)].partition;
        gr_kzk_topic_assignment_release(&a);
        if (!ok) continue;
        snprintf(topic, 32, "%s", t);
        return true;
    }
    return false;
}

/* 1-3 distinct broker ids in random order. */
static int random_replicas(struct sim *s, int32_t *out) {
    int n = 1 + (int)rng_below(&s->rng, (uint32_t)(s->n_brokers < 3 ? s->n_brokers : 3));
    int k = 0;
    while (k < n) {
        int32_t id = s->brokers[rng_below(&s->rng, (uint32_t)s->n_brokers)].id;
        bool dup = false;
        for (int i = 0; i < k; i++) dup |= out[i] == id;
        if (!dup) out[k++] = id;
    }
    return n;
}

/* The broker an admin client talks to: the controller a random live broker knows (the client's
 * metadata), or that broker itself if it knows none. */
static struct sbroker *admin_target(struct sim *s) {
    struct sbroker *live[SIM_MAX_BROKERS];
    int n = 0;
    for (int i = 0; i < s->n_brokers; i++)
        if (s->brokers[i].alive) live[n++] = &s->brokers[i];
    if (n == 0) return NULL;
    struct sbroker *b = live[rng_below(&s->rng, (uint32_t)n)];
    struct sbroker *c = b->known_controller >= 0 ? sim_broker(s, b->known_controller) : NULL;
    return c && c->alive ? c : b;
}

/* ---- deletion ---- */

bool admin_delete_topic(struct sim *s) {
    char names[MAX_TOPICS][32];
    int n = zk_topics(s, names, MAX_TOPICS);
    int cand[MAX_TOPICS], nc = 0;
    for (int i = 0; i < n; i++)
        if (!topic_queued(s, names[i])) cand[nc++] = i;
    if (nc == 0) return false;
    const char *t = names[cand[rng_below(&s->rng, (uint32_t)nc)]];
    int rc = gr_kzk_create_topic_deletion(s->admin_kzk, t);
    VLOG(s, "admin: delete topic %s: %s", t, rc ? gr_kzk_strerror(rc) : "marked");
    s->n_admin_ops++;
    return true;
}

/* ---- reassignment ---- */

bool admin_reassign_zk(struct sim *s) {
    if (zk_exists(s, "/admin/reassign_partitions")) return false;
    struct gr_kzk_reassignment r = {0};
    struct gr_kzk_reassignment_entry e[2];
    int want = 1 + (int)rng_below(&s->rng, 2);
    for (int i = 0; i < want; i++) {
        char topic[32];
        int32_t partition;
        /* the tool refuses unknown topics, not ones being deleted */
        if (!pick_partition(s, rng_chance(&s->rng, 1, 4), topic, &partition)) break;
        bool dup = false;
        for (int j = 0; j < r.n; j++) dup |= e[j].partition == partition && strcmp(e[j].topic, topic) == 0;
        if (dup) continue;
        e[r.n].topic = gr_strdup(topic);
        e[r.n].partition = partition;
        e[r.n].replicas = gr_calloc(3, sizeof(int32_t));
        e[r.n].n_replicas = random_replicas(s, e[r.n].replicas);
        r.n++;
    }
    if (r.n == 0) return false;
    r.entries = e;
    int rc = gr_kzk_create_reassignment(s->admin_kzk, &r);
    if (s->o.verbose) {
        char b[64];
        VLOG(s, "admin: write /admin/reassign_partitions, first %s-%d -> [%s] (%d entries): %s", e[0].topic,
             e[0].partition, gr_ctrl_fmt_ids(b, sizeof b, e[0].replicas, e[0].n_replicas), r.n,
             rc ? gr_kzk_strerror(rc) : "ok");
    }
    for (int i = 0; i < r.n; i++) {
        free(e[i].topic);
        free(e[i].replicas);
    }
    s->n_admin_ops++;
    return true;
}

/* Who sent an API request and to which controller incarnation (freed by the answer). */
struct api_call {
    struct sim *s;
    int32_t to;
    int to_inc;
    uint64_t seq;
};

static struct api_call *api_call_new(struct sim *s, struct sbroker *to) {
    struct api_call *c = gr_calloc(1, sizeof *c);
    c->s = s;
    c->to = to->id;
    c->to_inc = to->incarnation;
    c->seq = ++s->next_msg_id;
    return c;
}

/* The answering controller's context, when the answer comes from its processing step. */
static struct gr_ctrl_context *answering_ctx(struct api_call *c) {
    struct sbroker *b = sim_broker(c->s, c->to);
    if (!b || !b->alive || b->incarnation != c->to_inc || !b->ctrl || !gr_controller_is_active(b->ctrl)) return NULL;
    return gr_controller_context(b->ctrl);
}

static void reassign_answer(void *arg, int16_t top, const struct gr_reassign_api_payload *pl) {
    struct api_call *c = arg;
    struct sim *s = c->s;
    VLOG(s, "  [sim] AlterPartitionReassignments #%" PRIu64 " answered by broker %d: %s", c->seq, c->to,
         gr_kerr_name(top));
    struct gr_ctrl_context *ctx = top == GR_KERR_NONE ? answering_ctx(c) : NULL;
    for (int i = 0; ctx && i < pl->n && !s->failed; i++) {
        const struct gr_reassign_item *it = &pl->items[i];
        VLOG(s, "  [sim]   %s-%d %s: %s%s%s", it->topic, it->partition, it->cancel ? "cancel" : "reassign",
             gr_kerr_name(it->err), it->msg ? " " : "", it->msg ? it->msg : "");
        if (it->err != GR_KERR_NONE) continue;
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(ctx, it->topic, it->partition);
        if (!p) {
            sim_fail(s, "R3 reassignment answers match the controller",
                     "%s-%d answered NONE but the controller does not know it", it->topic, it->partition);
            break;
        }
        /* TRS = replicas - removing must be the requested target (cancel: not reassigning) */
        int32_t trs[SIM_MAX_BROKERS + 4];
        int n = 0;
        for (int r = 0; r < p->n_replicas && n < SIM_MAX_BROKERS + 4; r++) {
            bool rem = false;
            for (int k = 0; k < p->n_removing; k++) rem |= p->removing[k] == p->replicas[r];
            if (!rem) trs[n++] = p->replicas[r];
        }
        bool ok;
        if (it->cancel) {
            ok = p->n_adding == 0 && p->n_removing == 0;
        } else {
            ok = n == it->n_replicas;
            for (int k = 0; ok && k < n; k++) ok = trs[k] == it->replicas[k];
        }
        if (!ok) {
            char b1[64], b2[64];
            sim_fail(s, "R3 reassignment answers match the controller",
                     "%s-%d %s answered NONE but the controller holds target [%s] (adding %d, removing %d), asked [%s]",
                     it->topic, it->partition, it->cancel ? "cancel" : "reassignment", gr_ctrl_fmt_ids(b1, sizeof b1, trs, n),
                     p->n_adding, p->n_removing,
                     it->cancel ? "origin" : gr_ctrl_fmt_ids(b2, sizeof b2, it->replicas, it->n_replicas));
        }
    }
    free(c);
}

bool admin_reassign_api(struct sim *s, bool cancel) {
    struct sbroker *to = admin_target(s);
    if (!to) return false;
    int n = 1 + (int)rng_below(&s->rng, 2);
    struct gr_reassign_api_payload *pl = gr_reassign_api_payload_new(n);
    int k = 0;
    for (int i = 0; i < n; i++) {
        char topic[32];
        int32_t partition;
        if (!pick_partition(s, rng_chance(&s->rng, 1, 4), topic, &partition)) break;
        bool dup = false;
        for (int j = 0; j < k; j++) dup |= pl->items[j].partition == partition && strcmp(pl->items[j].topic, topic) == 0;
        if (dup) continue;
        struct gr_reassign_item *it = &pl->items[k++];
        it->topic = gr_strdup(topic);
        it->partition = partition;
        it->cancel = cancel;
        if (!cancel) {
            it->replicas = gr_calloc(3, sizeof(int32_t));
            it->n_replicas = random_replicas(s, it->replicas);
        }
    }
    pl->n = k;
    if (k == 0) {
        gr_reassign_api_payload_free(pl);
        return false;
    }
    struct api_call *c = api_call_new(s, to);
    pl->respond = reassign_answer;
    pl->arg = c;
    if (s->o.verbose) {
        char b[64];
        VLOG(s, "admin: AlterPartitionReassignments #%" PRIu64 " to broker %d: %s-%d %s [%s] (%d items)", c->seq, to->id,
             pl->items[0].topic, pl->items[0].partition, cancel ? "cancel" : "->",
             cancel ? "" : gr_ctrl_fmt_ids(b, sizeof b, pl->items[0].replicas, pl->items[0].n_replicas), k);
    }
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_API_PARTITION_REASSIGNMENT);
    ev->payload = pl;
    ev->payload_free = gr_reassign_api_payload_free;
    ev->preempt = gr_reassign_api_preempt;
    gr_ctrl_events_put(gr_controller_events(to->ctrl), ev);
    s->n_admin_ops++;
    return true;
}

/* ---- elections ---- */

bool admin_preferred_zk(struct sim *s) {
    if (zk_exists(s, "/admin/preferred_replica_election")) return false;
    struct gr_kzk_tp tps[3];
    char topics[3][32];
    int n = 0, want = 1 + (int)rng_below(&s->rng, 3);
    for (int i = 0; i < want; i++) {
        if (!pick_partition(s, rng_chance(&s->rng, 1, 4), topics[n], &tps[n].partition)) break;
        bool dup = false;
        for (int j = 0; j < n; j++) dup |= tps[j].partition == tps[n].partition && strcmp(topics[j], topics[n]) == 0;
        if (dup) continue;
        tps[n].topic = topics[n];
        n++;
    }
    if (n == 0) return false;
    int rc = gr_kzk_create_preferred_election(s->admin_kzk, tps, n);
    VLOG(s, "admin: write /admin/preferred_replica_election, first %s-%d (%d partitions): %s", tps[0].topic,
         tps[0].partition, n, rc ? gr_kzk_strerror(rc) : "ok");
    s->n_admin_ops++;
    return true;
}

static void unclean_req_remove(struct sim *s, const char *tp) {
    for (int i = 0; i < s->n_unclean_req; i++)
        if (strcmp(s->unclean_req[i], tp) == 0) {
            free(s->unclean_req[i]);
            s->unclean_req[i] = s->unclean_req[--s->n_unclean_req];
            return;
        }
}

static void elect_answer(void *arg, int16_t top, const struct gr_elect_payload *pl) {
    struct api_call *c = arg;
    struct sim *s = c->s;
    VLOG(s, "  [sim] ElectLeaders #%" PRIu64 " (%s) answered by broker %d: %s", c->seq,
         pl->type == GR_ELECTION_UNCLEAN ? "unclean" : "preferred", c->to, gr_kerr_name(top));
    struct gr_ctrl_context *ctx = top == GR_KERR_NONE ? answering_ctx(c) : NULL;
    for (int i = 0; i < pl->n; i++) {
        const struct gr_elect_item *it = &pl->items[i];
        VLOG(s, "  [sim]   %s-%d: %s leader %d", it->topic, it->partition, gr_kerr_name(it->err), it->leader);
        if (pl->type == GR_ELECTION_UNCLEAN) {
            char tp[64];
            snprintf(tp, sizeof tp, "%s-%d", it->topic, it->partition);
            unclean_req_remove(s, tp);
        }
        struct gr_ctrl_partition *p = ctx ? gr_ctrl_ctx_partition(ctx, it->topic, it->partition) : NULL;
        if (p && it->err == GR_KERR_NONE && !s->failed &&
            (!p->has_state || p->lai.leader != it->leader ||
             (pl->type == GR_ELECTION_PREFERRED && (p->n_replicas == 0 || p->replicas[0] != it->leader))))
            sim_fail(s, "R4 election answers match the controller",
                     "%s-%d: %s election answered leader %d, the controller has leader %d (preferred %d)", it->topic,
                     it->partition, pl->type == GR_ELECTION_UNCLEAN ? "unclean" : "preferred", it->leader,
                     p->has_state ? p->lai.leader : -9, p->n_replicas ? p->replicas[0] : -1);
    }
    free(c);
}

bool admin_elect_api(struct sim *s, bool unclean) {
    struct sbroker *to = admin_target(s);
    if (!to) return false;
    int n = 1 + (int)rng_below(&s->rng, 2);
    struct gr_elect_payload *pl = gr_elect_payload_new(n);
    pl->type = unclean ? GR_ELECTION_UNCLEAN : GR_ELECTION_PREFERRED;
    int k = 0;
    for (int i = 0; i < n; i++) {
        char topic[32];
        int32_t partition;
        if (!pick_partition(s, rng_chance(&s->rng, 1, 4), topic, &partition)) break;
        bool dup = false;
        for (int j = 0; j < k; j++) dup |= pl->items[j].partition == partition && strcmp(pl->items[j].topic, topic) == 0;
        if (dup) continue;
        pl->items[k].topic = gr_strdup(topic);
        pl->items[k].partition = partition;
        k++;
        if (unclean) {
            s->unclean_req = gr_realloc(s->unclean_req, (size_t)(s->n_unclean_req + 1) * sizeof *s->unclean_req);
            s->unclean_req[s->n_unclean_req++] = gr_asprintf("%s-%d", topic, partition);
        }
    }
    pl->n = k;
    if (k == 0) {
        gr_elect_payload_free(pl);
        return false;
    }
    struct api_call *c = api_call_new(s, to);
    pl->respond = elect_answer;
    pl->arg = c;
    VLOG(s, "admin: ElectLeaders #%" PRIu64 " (%s) to broker %d: %s-%d (%d partitions)", c->seq,
         unclean ? "unclean" : "preferred", to->id, pl->items[0].topic, pl->items[0].partition, k);
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_REPLICA_LEADER_ELECTION);
    ev->payload = pl;
    ev->payload_free = gr_elect_payload_free;
    ev->preempt = gr_elect_preempt;
    gr_ctrl_events_put(gr_controller_events(to->ctrl), ev);
    s->n_admin_ops++;
    return true;
}

/* ---- configs ---- */

bool admin_unclean_enable(struct sim *s) {
    char names[MAX_TOPICS][32];
    int n = zk_topics(s, names, MAX_TOPICS);
    if (n == 0) return false;
    const char *t = names[rng_below(&s->rng, (uint32_t)n)];
    struct gr_kzk_config cfg = {0};
    int rc = gr_kzk_get_entity_config(s->admin_kzk, "topics", t, &cfg);
    const char *v = rc == 0 ? gr_kzk_config_get(&cfg, "unclean.leader.election.enable") : NULL;
    if (rc == 0 && !(v && strcmp(v, "true") == 0)) {
        gr_kzk_config_set(&cfg, "unclean.leader.election.enable", "true");
        rc = gr_kzk_set_entity_config(s->admin_kzk, "topics", t, &cfg);
        VLOG(s, "admin: set unclean.leader.election.enable=true on topic %s: %s", t, rc ? gr_kzk_strerror(rc) : "ok");
        s->n_admin_ops++;
    }
    gr_kzk_config_release(&cfg);
    return true;
}

/* ---- log dir failure ---- */

bool admin_log_dir_failure(struct sim *s, struct sbroker *b) {
    if (!b->alive || b->dir_failed) return false;
    b->dir_failed = true;
    /* the partitions on dir 1 go offline at once (HostedPartition.Offline) */
    for (int i = 0; i < b->n_parts; i++) {
        struct sb_part *p = &b->parts[i];
        if (sim_dir_of(p->topic, p->partition) != 1 || !p->has_replica) continue;
        p->has_replica = false;
        p->r_leader = -1;
        p->alter_pending = false;
    }
    int rc = gr_kzk_create_log_dir_event_notification(b->kzk, b->id);
    VLOG(s, "FAULT: broker %d's log dir 1 fails; log dir event notification: %s", b->id, rc ? gr_kzk_strerror(rc) : "ok");
    return true;
}

/* ---- controlled shutdown ---- */

struct cs_call {
    struct api_call c;
    int32_t broker;
    int inc;
    uint64_t seq;
};

static bool in_ids(const int32_t *v, int n, int32_t x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return true;
    return false;
}

/* C1 (on a NONE answer): `remaining` is exactly Kafka's partitionLeadersOnBroker -- the partitions
 * the broker still leads, except single-replica ones and topics queued for deletion (listing those
 * made every broker that led one exhaust its retries) -- and, when no ZooKeeper fault can fail an
 * election (settle phase), none of those could have gone to another replica (in the ISR, live, not
 * shutting down, not on an offline dir). */
static void check_cs_answer(struct sim *s, struct cs_call *cc, const struct gr_kzk_tp *rem, int n_rem) {
    struct gr_ctrl_context *ctx = answering_ctx(&cc->c);
    if (!ctx) return;
    struct sbroker *ab = sim_broker(s, cc->c.to);
    bool zk_ok = s->phase == 1 && ab && ab->zc && zm_client_state(ab->zc) == ZMC_CONNECTED;
    int32_t id = cc->broker;
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    int led = 0;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur)) && !s->failed) {
        for (int i = 0; i < t->n_partitions; i++) {
            struct gr_ctrl_partition *p = &t->partitions[i];
            if (!p->has_state || p->lai.leader != id) continue;
            if (p->n_replicas <= 1 || gr_ctrl_topic_queued_for_deletion(ctx, t->name)) {
                for (int k = 0; k < n_rem && !s->failed; k++)
                    if (rem[k].partition == p->partition && strcmp(rem[k].topic, t->name) == 0)
                        sim_fail(s, "C1 controlled shutdown hands off leadership",
                                 "broker %d's answer lists %s-%d, which has a single replica or is being deleted", id,
                                 t->name, p->partition);
                continue;
            }
            led++;
            bool listed = false;
            for (int k = 0; k < n_rem; k++) listed |= rem[k].partition == p->partition && strcmp(rem[k].topic, t->name) == 0;
            if (!listed) {
                sim_fail(s, "C1 controlled shutdown hands off leadership",
                         "broker %d still leads %s-%d but the answer does not list it", id, t->name, p->partition);
                return;
            }
            if (!zk_ok) continue;
            for (int k = 0; k < p->lai.n_isr; k++) {
                int32_t r = p->lai.isr[k];
                if (r == id || !in_ids(p->replicas, p->n_replicas, r)) continue;
                if (gr_ctrl_replica_online(ctx, p, r, false)) {
                    sim_fail(s, "C1 controlled shutdown hands off leadership",
                             "broker %d still leads %s-%d although ISR member %d is live and not shutting down", id,
                             t->name, p->partition, r);
                    return;
                }
            }
        }
    }
    if (!s->failed && led != n_rem)
        sim_fail(s, "C1 controlled shutdown hands off leadership",
                 "broker %d's answer lists %d remaining partitions, it leads %d", id, n_rem, led);
}

static void cs_answer(void *arg, int16_t error, const struct gr_kzk_tp *rem, int n_rem) {
    struct cs_call *cc = arg;
    struct sim *s = cc->c.s;
    struct sbroker *b = sim_broker(s, cc->broker);
    VLOG(s, "  [sim] ControlledShutdown of broker %d (attempt seq %" PRIu64 ") answered by broker %d: %s, %d remaining",
         cc->broker, cc->seq, cc->c.to, gr_kerr_name(error), n_rem);
    if (error == GR_KERR_NONE && !s->failed) check_cs_answer(s, cc, rem, n_rem);
    if (b && b->alive && b->incarnation == cc->inc && b->cs_state == 1 && b->cs_seq == cc->seq) {
        b->cs_state = 2;
        b->cs_ok = error == GR_KERR_NONE && n_rem == 0;
    }
    free(cc);
}

/* One attempt: the ControlledShutdown request goes to the controller b knows. */
static void cs_send(struct sim *s, struct sbroker *b) {
    b->cs_attempt++;
    b->cs_seq = ++s->next_msg_id;
    struct sbroker *to = b->known_controller >= 0 ? sim_broker(s, b->known_controller) : NULL;
    if (!to || !to->alive) {
        VLOG(s, "broker %d: controlled shutdown attempt %d: no known controller", b->id, b->cs_attempt);
        b->cs_state = 2;
        b->cs_ok = false;
        return;
    }
    struct cs_call *cc = gr_calloc(1, sizeof *cc);
    cc->c.s = s;
    cc->c.to = to->id;
    cc->c.to_inc = to->incarnation;
    cc->broker = b->id;
    cc->inc = b->incarnation;
    cc->seq = b->cs_seq;
    struct gr_ctrl_cs_payload *pl = gr_calloc(1, sizeof *pl);
    pl->respond = cs_answer;
    pl->arg = cc;
    b->cs_state = 1;
    VLOG(s, "broker %d: controlled shutdown attempt %d to broker %d", b->id, b->cs_attempt, to->id);
    gr_ctrl_events_put(gr_controller_events(to->ctrl),
                       gr_ctrl_cs_event_new(b->id, gr_controller_broker_epoch(b->ctrl), pl));
}

bool cs_begin(struct sim *s, struct sbroker *b) {
    if (!b->alive || b->cs_state != 0) return false;
    b->cs_attempt = 0;
    cs_send(s, b);
    return true;
}

void cs_step(struct sim *s, struct sbroker *b) {
    if (b->cs_state != 2) return;
    if (b->cs_ok || b->cs_attempt >= 3) {
        VLOG(s, "broker %d: controlled shutdown %s after %d attempt(s); stopping", b->id,
             b->cs_ok ? "succeeded" : "failed", b->cs_attempt);
        if (b->cs_ok) s->n_cs_done++;
        node_stop(s, b);
        return;
    }
    cs_send(s, b);
}

/* ---- Q7: auto leader rebalance ---- */

int64_t q7_arm(struct sim *s) {
    memset(s->q7_over, 0, sizeof s->q7_over);
    s->q7_armed = false;
    /* only when no reassignment is in progress anywhere (Kafka skips them all then) */
    char names[MAX_TOPICS][32];
    int nt = zk_topics(s, names, MAX_TOPICS);
    int total[SIM_MAX_BROKERS + 1] = {0}, off[SIM_MAX_BROKERS + 1] = {0};
    for (int i = 0; i < nt; i++) {
        struct gr_kzk_topic_assignment a;
        if (!zk_topic(s, names[i], &a)) continue;
        bool queued = topic_queued(s, names[i]);
        for (int k = 0; k < a.n_partitions; k++) {
            const struct gr_kzk_partition_assignment *pa = &a.partitions[k];
            if (pa->n_adding || pa->n_removing) {
                gr_kzk_topic_assignment_release(&a);
                return INT64_MAX;
            }
            if (queued || pa->n_replicas == 0 || pa->replicas[0] < 1 || pa->replicas[0] > SIM_MAX_BROKERS) continue;
            char sp[320];
            snprintf(sp, sizeof sp, "/brokers/topics/%.40s/partitions/%d/state", names[i], pa->partition);
            const char *d;
            int len;
            if (zm_peek(s->zm, sp, &d, &len, NULL) != GR_ZOK || !d) continue;
            struct gr_kzk_leader_and_isr l;
            memset(&l, 0, sizeof l);
            if (gr_kzk_partition_state_decode(d, (size_t)len, &l) != 0) continue;
            total[pa->replicas[0]]++;
            if (l.leader != pa->replicas[0]) off[pa->replicas[0]]++;
            gr_kzk_leader_and_isr_release(&l);
        }
        gr_kzk_topic_assignment_release(&a);
    }
    bool any = false;
    for (int id = 1; id <= SIM_MAX_BROKERS; id++)
        if (total[id] > 0 && off[id] * 100 > total[id] * 10) s->q7_over[id] = any = true;
    if (!any) return INT64_MAX;
    /* the active controller's auto-rebalance check (its only timer) */
    struct sbroker *act = NULL;
    for (int i = 0; i < s->n_brokers; i++)
        if (s->brokers[i].alive && gr_controller_is_active(s->brokers[i].ctrl)) act = &s->brokers[i];
    int64_t due = act ? vclock_next_due_of(s, act->clock) : INT64_MAX;
    /* other clocks' timers due earlier fire too (advance_time fires everything due) */
    s->q7_armed = due != INT64_MAX;
    return due;
}

/* ---- adding partitions ---- */

bool admin_add_partitions(struct sim *s) {
    char names[MAX_TOPICS][32];
    int n = zk_topics(s, names, MAX_TOPICS);
    if (n == 0) return false;
    const char *t = names[rng_below(&s->rng, (uint32_t)n)];
    char p[320];
    snprintf(p, sizeof p, "/brokers/topics/%.200s", t);
    struct gr_zstat st;
    if (zm_peek(s->zm, p, NULL, NULL, &st) != GR_ZOK) return false;
    struct gr_kzk_topic_assignment a;
    if (!zk_topic(s, t, &a)) return false;
    const char **v;
    int nb = zm_peek_children(s->zm, "/brokers/ids", &v);
    int32_t ids[SIM_MAX_BROKERS];
    int k = 0;
    for (int i = 0; i < nb && k < SIM_MAX_BROKERS; i++) ids[k++] = (int32_t)atoi(v[i]);
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
            int32_t x = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = x;
        }
    int rf = a.n_partitions > 0 ? a.partitions[0].n_replicas - a.partitions[0].n_adding : 0;
    if (k == 0 || rf <= 0 || rf > k || a.n_partitions >= 6) {
        gr_kzk_topic_assignment_release(&a);
        return false;
    }
    /* AdminUtils with a fixed start: the first broker >= partition 0's first replica */
    int start = 0;
    while (start < k && ids[start] < a.partitions[0].replicas[0]) start++;
    start %= k;
    int np = a.n_partitions;
    a.partitions = gr_realloc(a.partitions, (size_t)(np + 1) * sizeof *a.partitions);
    struct gr_kzk_partition_assignment *pa = &a.partitions[np];
    memset(pa, 0, sizeof *pa);
    pa->partition = np;
    pa->n_replicas = rf;
    pa->replicas = gr_calloc((size_t)rf, sizeof(int32_t));
    int shift = start + np / k;
    int first = (np + start) % k;
    pa->replicas[0] = ids[first];
    for (int j = 0; j < rf - 1; j++) pa->replicas[j + 1] = ids[(first + 1 + (shift + j) % (k > 1 ? k - 1 : 1)) % k];
    a.n_partitions = np + 1;
    /* a careful tool: conditional on the version it read; every other one a Kafka 2.7 tool,
     * which writes the znode without the topic id (kafka-topics --zookeeper --alter): the
     * controller must put the id back (T2) */
    bool drop_id = a.topic_id && s->n_admin_ops % 2 == 1;
    if (drop_id) {
        free(a.topic_id);
        a.topic_id = NULL;
    }
    int rc = gr_kzk_set_topic_assignment(s->admin_kzk, t, &a, st.version);
    if (rc == 0 && drop_id) {
        sim_note_id_dropped(s, t);
        g_failovers.id_drops++;
    }
    VLOG(s, "admin: add partition %s-%d%s: %s", t, np, drop_id ? " (znode without its topic id)" : "",
         rc ? gr_kzk_strerror(rc) : "ok");
    gr_kzk_topic_assignment_release(&a);
    s->n_admin_ops++;
    return true;
}
