/* gregor_sim: the controller driven deterministically (docs/SIMULATION.md).
 *
 *   gregor_sim --seeds N [--start S] [--steps K] [--episodes E] [--brokers B] [--verbose]
 *   gregor_sim --seed S [...]          replay one seed (same options as the failing run)
 *   gregor_sim --selftest              only the ZooKeeper model's unit checks
 *
 * One run = one seed. B simulated brokers (each: a real gr_controller over its own session of
 * the in-memory ZooKeeper, a virtual clock and an in-memory channel manager) and an admin
 * client. Each run is E episodes of K chaos steps followed by a settle phase (no new faults;
 * everything is delivered until the cluster is quiet), after which the quiet invariants are
 * checked. Every step is chosen by the seeded PRNG among the enabled actions. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "controller/config_change_listener.h"
#include "common/util.h"
#include "common/uuid.h"
#include "sim.h"

/* ======================================================================================
 * PRNG: xoshiro256** seeded through splitmix64
 * ====================================================================================== */

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void rng_seed(struct sim_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t splitmix_fn(void *arg) { return splitmix(arg); }

void sim_topic_id(void *sim, struct gr_uuid *out) {
    struct sim *s = sim;
    uint64_t x = s->o.seed * 0x2545f4914f6cdd1dULL + (s->n_topic_ids++ << 20);
    gr_uuid_random_from(out, splitmix_fn, &x);
}

uint64_t rng_next(struct sim_rng *r) {
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

uint32_t rng_below(struct sim_rng *r, uint32_t n) { return n ? (uint32_t)(rng_next(r) % n) : 0; }
bool rng_chance(struct sim_rng *r, uint32_t num, uint32_t den) { return rng_below(r, den) < num; }

/* ======================================================================================
 * Reporting
 * ====================================================================================== */

static char g_replay_opts[256];
static bool g_silent; /* the determinism re-run prints nothing */

void sim_fail(struct sim *s, const char *invariant, const char *fmt, ...) {
    if (s->failed) return;
    s->failed = true;
    char msg[3000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(s->fail_msg, sizeof s->fail_msg,
             "VIOLATION seed=%" PRIu64 " step=%" PRId64 " (%s, t=%" PRId64 "ms): [%s] %s\n"
             "  replay: build/tests/gregor_sim --seed %" PRIu64 "%s --verbose",
             s->o.seed, s->step, s->phase ? "settle" : "chaos", s->now, invariant, msg, s->o.seed, g_replay_opts);
    if (s->o.verbose) printf("%s\n", s->fail_msg);
}

void sim_trace(struct sim *s, uint64_t v) { s->trace = (s->trace ^ v) * 0x100000001b3ULL; }

void sim_note_session(struct sim *s, int64_t sid, int32_t id, int inc) {
    if (s->n_sessmap == s->cap_sessmap) {
        s->cap_sessmap = s->cap_sessmap ? s->cap_sessmap * 2 : 32;
        s->sessmap = gr_realloc(s->sessmap, (size_t)s->cap_sessmap * sizeof *s->sessmap);
    }
    s->sessmap[s->n_sessmap].sid = sid;
    s->sessmap[s->n_sessmap].id = id;
    s->sessmap[s->n_sessmap].inc = inc;
    s->n_sessmap++;
}

bool sim_session_owner(struct sim *s, int64_t sid, int32_t *id, int *inc) {
    for (int i = s->n_sessmap - 1; i >= 0; i--) {
        if (s->sessmap[i].sid == sid) {
            *id = s->sessmap[i].id;
            *inc = s->sessmap[i].inc;
            return true;
        }
    }
    return false;
}

#define VLOG(s, ...)                                                                                                   \
    do {                                                                                                               \
        if ((s)->o.verbose) {                                                                                          \
            printf("[%6" PRId64 " t=%7" PRId64 "] ", (s)->step, (s)->now);                                           \
            printf(__VA_ARGS__);                                                                                       \
            printf("\n");                                                                                              \
        }                                                                                                              \
    } while (0)

/* ======================================================================================
 * ZooKeeper fault hooks
 * ====================================================================================== */

/* The ensemble is back: sessions get a fresh timeout; the admin tool reconnects. */
static void outage_end(struct sim *s) {
    if (!zm_down(s->zm)) return;
    VLOG(s, "the ZooKeeper ensemble is back (sessions get a fresh timeout)");
    zm_outage_end(s->zm);
    zm_reconnect(s->admin);
}

/* kzk waits for a lost connection: usually it comes back; sometimes the session expires. */
static int hook_wait_connected(void *arg, struct zm_client *c, int timeout_ms) {
    struct sim *s = arg;
    struct sbroker *b = zm_client_user(c);
    /* The ensemble is down or this broker is cut off from it: kzk's wait blocks the caller until
     * ZooKeeper is reachable again (or the session expired). kzk waits in slices of timeout_ms;
     * --long-outages lets each slice pass one by one (the outage outlasts many session
     * timeouts), otherwise the wait jumps to the end of the outage at once. */
    if (b && b->expire_on_wait) { /* a scripted interruption (interrupt_deletion_of) */
        b->expire_on_wait = false;
        VLOG(s, "zk: broker %d's session expires while it waits to reconnect (scripted)", b->id);
        return GR_ZSESSIONEXPIRED;
    }
    int64_t until = zm_down(s->zm) ? s->outage_until : (b && b->zk_cut_until > s->now) ? b->zk_cut_until : 0;
    if (s->o.zk_long_outages && until > s->now + timeout_ms) {
        if (timeout_ms > 0) {
            s->now += timeout_ms;
            zm_set_time(s->zm, s->now);
        }
        sim_trace(s, 0xe5);
        return GR_ZOPERATIONTIMEOUT;
    }
    if (zm_down(s->zm)) {
        if (s->outage_until > s->now) s->now = s->outage_until;
        zm_set_time(s->zm, s->now);
        VLOG(s, "zk: broker %d waits until the ensemble is back", b ? b->id : -1);
        outage_end(s);
        sim_trace(s, 0xe3);
        return GR_ZOK;
    }
    if (b && b->zk_cut_until > s->now) {
        s->now = b->zk_cut_until;
        zm_set_time(s->zm, s->now);
        b->zk_cut_until = 0;
        /* A partition always outlasts the session timeout (A_ZK_PARTITION): the server has
         * expired the session; the broker learns it on reconnecting. */
        VLOG(s, "zk: broker %d waits until its link to ZooKeeper is back: its session expired", b->id);
        sim_trace(s, 0xe4);
        return GR_ZSESSIONEXPIRED;
    }
    if (s->phase == 0 && b && rng_chance(&s->rng, 1, 6)) {
        VLOG(s, "zk: broker %d's session expires while it waits to reconnect", b->id);
        sim_trace(s, 0xe1);
        return GR_ZSESSIONEXPIRED;
    }
    s->now += 1 + rng_below(&s->rng, 50);
    zm_set_time(s->zm, s->now);
    sim_trace(s, 0xe2);
    return GR_ZOK;
}

static int hook_call_fault(void *arg, struct zm_client *c, bool is_write) {
    struct sim *s = arg;
    struct sbroker *w = zm_client_user(c);
    if (w && w->interrupt_next_write && is_write) {
        w->interrupt_next_write = false;
        w->expire_on_wait = true;
        VLOG(s, "zk: broker %d's connection drops before its write reaches the server (scripted)", w->id);
        return ZM_FAULT_LOSS_BEFORE;
    }
    if (s->phase != 0 || !s->o.zk_faults || !zm_client_user(c)) return ZM_FAULT_NONE;
    uint32_t r = rng_below(&s->rng, 400);
    struct sbroker *b = zm_client_user(c);
    if (r == 0) {
        VLOG(s, "zk: broker %d's connection drops before its call reaches the server", b->id);
        return ZM_FAULT_LOSS_BEFORE;
    }
    if (r == 1 && is_write) {
        VLOG(s, "zk: broker %d's connection drops after the server applied its write", b->id);
        return ZM_FAULT_LOSS_AFTER;
    }
    return ZM_FAULT_NONE;
}

/* Every committed transaction: the scripted interruption of a deletion (interrupt_deletion_of),
 * then the invariants. */
static void hook_on_commit(void *arg, const struct zm_txn *t) {
    struct sim *s = arg;
    const char *topic = s->interrupt_deletion_of;
    int32_t wid = -1;
    int winc = 0;
    if (topic && t->is_multi && sim_session_owner(s, t->session, &wid, &winc)) {
        char prefix[300];
        snprintf(prefix, sizeof prefix, "/brokers/topics/%s/partitions/", topic);
        for (int i = 0; i < t->n_changes; i++) {
            const struct zm_change *c = &t->changes[i];
            size_t pl = strlen(c->path);
            if (c->op != GR_ZOP_DELETE || strncmp(c->path, prefix, strlen(prefix)) != 0 || pl < 6 ||
                strcmp(c->path + pl - 6, "/state") != 0)
                continue;
            for (int k = 0; k < s->n_brokers; k++)
                if (s->brokers[k].id == wid) s->brokers[k].interrupt_next_write = true;
            s->interrupt_deletion_of = NULL;
            VLOG(s, "broker %d deleted state znodes of %s: its next write is interrupted (scripted)", wid, topic);
            break;
        }
    }
    inv_on_commit(arg, t);
}

/* ======================================================================================
 * Admin operations (an admin tool's own ZooKeeper session)
 * ====================================================================================== */

/* Kafka's rack-unaware assignment (reference §5) over the registered brokers. */
static void admin_create_topic(struct sim *s) {
    const char **names;
    int n = zm_peek_children(s->zm, "/brokers/ids", &names);
    if (n <= 0) return;
    int32_t ids[64];
    int nb = 0;
    for (int i = 0; i < n && nb < 64; i++) ids[nb++] = (int32_t)atoi(names[i]);
    for (int i = 1; i < nb; i++)
        for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
            int32_t t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    int parts = 1 + (int)rng_below(&s->rng, 3);
    int rf = 1 + (int)rng_below(&s->rng, (uint32_t)(nb < 3 ? nb : 3));
    int start = (int)rng_below(&s->rng, (uint32_t)nb);
    int shift = (int)rng_below(&s->rng, (uint32_t)nb);
    struct gr_kzk_topic_assignment a;
    memset(&a, 0, sizeof a);
    char topic[32];
    /* every 4th creation re-creates a deleted topic's name when there is one (KIP-516's case: a
     * broker away across the deletion must not serve the old log for the new topic); every
     * other one carries an id as Gregor's and Kafka 2.8+'s admin writes it, the rest get theirs
     * from the controller (topics written by a 2.7 broker or a tool) */
    int made = s->n_topics_created++;
    snprintf(topic, sizeof topic, "t%d", made);
    if (made % 4 == 3) {
        int pick = (int)rng_below(&s->rng, (uint32_t)made);
        char path[64];
        snprintf(path, sizeof path, "/brokers/topics/t%d", pick);
        if (zm_peek(s->zm, path, NULL, NULL, NULL) == GR_ZNONODE) snprintf(topic, sizeof topic, "t%d", pick);
    }
    a.topic = topic;
    char idtext[GR_UUID_STR_LEN + 1];
    if (made % 2 == 0) {
        struct gr_uuid id;
        sim_topic_id(s, &id);
        a.topic_id = gr_uuid_to_string(&id, idtext);
    }
    a.n_partitions = parts;
    a.partitions = gr_calloc((size_t)parts, sizeof *a.partitions);
    for (int p = 0; p < parts; p++) {
        if (p > 0 && p % nb == 0) shift++;
        int first = (p + start) % nb;
        struct gr_kzk_partition_assignment *pa = &a.partitions[p];
        pa->partition = p;
        pa->n_replicas = rf;
        pa->replicas = gr_calloc((size_t)rf, sizeof(int32_t));
        pa->replicas[0] = ids[first];
        for (int j = 0; j < rf - 1; j++) pa->replicas[j + 1] = ids[(first + 1 + (shift + j) % (nb - 1)) % nb];
    }
    int rc = gr_kzk_create_topic(s->admin_kzk, topic, &a, NULL);
    VLOG(s, "admin: create topic %s (%d partitions, RF %d): %s", topic, parts, rf, rc ? gr_kzk_strerror(rc) : "ok");
    for (int p = 0; p < parts; p++) free(a.partitions[p].replicas);
    free(a.partitions);
}

static void admin_delete_controller(struct sim *s) {
    int rc = gr_zkb_delete(zm_backend(s->admin), "/controller", GR_ZANY_VERSION);
    VLOG(s, "admin: delete /controller: %s", gr_zrc_name(rc));
}

/* Rewrites /controller by hand (same owner data or another broker id). */
static void admin_touch_controller(struct sim *s, bool other_id) {
    const char *d;
    int len;
    int32_t cid;
    if (zm_peek(s->zm, "/controller", &d, &len, NULL) != GR_ZOK || !d ||
        gr_kzk_controller_decode(d, (size_t)len, &cid) != 0)
        return;
    if (other_id) cid = s->brokers[rng_below(&s->rng, (uint32_t)s->n_brokers)].id;
    size_t l;
    char *json = gr_kzk_controller_encode(cid, s->now, gr_kzk_controller_stamps(d, (size_t)len), &l);
    int rc = gr_zkb_set(zm_backend(s->admin), "/controller", json, (int)l, GR_ZANY_VERSION, NULL);
    free(json);
    VLOG(s, "admin: rewrite /controller with brokerid %d: %s", cid, gr_zrc_name(rc));
}

/* ======================================================================================
 * Steps
 * ====================================================================================== */

enum act {
    A_ZK_DELIVER,
    A_PROCESS,
    A_NEW_SESSION,
    A_RECONNECT,
    A_MSG_REQ,
    A_MSG_RESP,
    A_MSG_LOSE,
    A_ORPHAN_DELIVER,
    A_ORPHAN_DROP,
    A_TIME,
    A_CRASH,
    A_RESTART,
    A_STOP,
    A_EXPIRE,
    A_DISCONNECT,
    A_DEL_CONTROLLER,
    A_TOUCH_CONTROLLER,
    A_CREATE_TOPIC,
    A_ALTER_PROPOSE,
    A_AMSG_DELIVER,
    A_AMSG_COMPLETE,
    A_AMSG_DROP,
    A_DELETE_TOPIC,
    A_REASSIGN_ZK,
    A_REASSIGN_API,
    A_REASSIGN_CANCEL,
    A_PREFERRED_ZK,
    A_ELECT_PREFERRED,
    A_ELECT_UNCLEAN,
    A_UNCLEAN_CONFIG,
    A_LOG_DIR_FAIL,
    A_CS_BEGIN,
    A_CS_STEP,
    A_CCL_PROCESS,
    A_ALTER_EXPAND,
    A_ADD_PARTITIONS,
    A_ZK_OUTAGE,
    A_ZK_OUTAGE_END,
    A_ZK_PARTITION,
    A_COUNT
};


struct cand {
    int act;
    int weight;
    void *p;
};

#define MAX_CANDS 256

struct cands {
    struct cand v[MAX_CANDS];
    int n;
    int total;
};

static void add(struct cands *c, int act, int weight, void *p) {
    if (weight <= 0 || c->n >= MAX_CANDS) return;
    c->v[c->n].act = act;
    c->v[c->n].weight = weight;
    c->v[c->n].p = p;
    c->n++;
    c->total += weight;
}

static int n_alive(struct sim *s) {
    int n = 0;
    for (int i = 0; i < s->n_brokers; i++) n += s->brokers[i].alive;
    return n;
}

/* Enabled non-fault actions (progress). */
static void progress_cands(struct sim *s, struct cands *c, bool chaos) {
    struct zm_client *cl[SIM_MAX_BROKERS + 4];
    int nd = zm_deliverable(s->zm, cl, SIM_MAX_BROKERS + 4);
    for (int i = 0; i < nd && i < SIM_MAX_BROKERS + 4; i++) add(c, A_ZK_DELIVER, 40, cl[i]);
    for (int i = 0; i < s->n_brokers; i++) {
        struct sbroker *b = &s->brokers[i];
        if (!b->alive) continue;
        if (gr_ctrl_events_size(gr_controller_events(b->ctrl)) > 0) add(c, A_PROCESS, 50, b);
        int st = zm_client_state(b->zc);
        bool reach = !zm_down(s->zm) && b->zk_cut_until <= s->now;
        if (reach && st == ZMC_EXPIRED && zm_expired_delivered(b->zc) && !b->expire_pending)
            add(c, A_NEW_SESSION, 20, b);
        if (reach && st == ZMC_DISCONNECTED) add(c, A_RECONNECT, chaos ? 6 : 20, b);
        if (b->ccl && gr_config_change_listener_dirty(b->ccl)) add(c, A_CCL_PROCESS, 20, b);
        if (b->cs_state == 2) add(c, A_CS_STEP, 10, b);
        if (!chaos && s->o.alter_partition && alter_expand_possible(s, b)) add(c, A_ALTER_EXPAND, 10, b);
    }
    for (struct smsg *m = s->msgs; m; m = m->next) {
        if (!m->snd) {
            if (msg_target_alive(s, m)) add(c, A_ORPHAN_DELIVER, 6, m);
            add(c, A_ORPHAN_DROP, 6, m);
            continue;
        }
        if (!msg_is_channel_head(s, m) || !msg_target_alive(s, m)) continue;
        if (m->state == MSG_QUEUED) add(c, A_MSG_REQ, 30, m);
        else {
            add(c, A_MSG_RESP, 30, m);
            if (chaos) add(c, A_MSG_LOSE, 2, m);
        }
    }
}

static void amsg_cands(struct sim *s, struct cands *c, bool chaos) {
    for (struct amsg *a = s->amsgs; a; a = a->next) {
        if (a->state == 0) {
            if (amsg_target(s, a)) add(c, A_AMSG_DELIVER, 20, a);
            else if (!chaos) add(c, A_AMSG_DROP, 20, a);
            if (chaos) add(c, A_AMSG_DROP, 1, a);
        } else if (a->state == 2) {
            add(c, A_AMSG_COMPLETE, 20, a);
        }
    }
}

/* While the whole ensemble is down: the brokers run on (crashes, AlterPartition proposals, time), no
 * admin tool or restart can reach ZooKeeper; the outage ends once its minimum length passed. */
static void outage_fault_cands(struct sim *s, struct cands *c) {
    int alive = n_alive(s);
    for (int i = 0; i < s->n_brokers; i++) {
        struct sbroker *b = &s->brokers[i];
        if (!b->alive) continue;
        if (s->o.alter_partition) add(c, A_ALTER_PROPOSE, 3, b);
        if (alive > 1) add(c, A_CRASH, 1, b);
    }
    if (s->now >= s->outage_until) add(c, A_ZK_OUTAGE_END, 4, NULL);
    add(c, A_TIME, 6, NULL);
}

static void fault_cands(struct sim *s, struct cands *c) {
    if (zm_down(s->zm)) {
        outage_fault_cands(s, c);
        return;
    }
    if (s->o.zk_outages) {
        add(c, A_ZK_OUTAGE, 1, NULL);
        for (int i = 0; i < s->n_brokers; i++)
            if (s->brokers[i].alive && zm_client_state(s->brokers[i].zc) == ZMC_CONNECTED)
                add(c, A_ZK_PARTITION, 1, &s->brokers[i]);
    }
    if (s->o.alter_partition)
        for (int i = 0; i < s->n_brokers; i++)
            if (s->brokers[i].alive) add(c, A_ALTER_PROPOSE, 3, &s->brokers[i]);
    int alive = n_alive(s);
    for (int i = 0; i < s->n_brokers; i++) {
        struct sbroker *b = &s->brokers[i];
        if (b->alive) {
            if (alive > 1) add(c, A_CRASH, 1, b);
            if (alive > 1) add(c, A_STOP, 1, b);
            if (zm_client_state(b->zc) == ZMC_CONNECTED) {
                add(c, A_EXPIRE, 1, b);
                add(c, A_DISCONNECT, 1, b);
            }
        } else {
            add(c, A_RESTART, 3, b);
        }
    }
    if (s->o.hand_edits && zm_peek(s->zm, "/controller", NULL, NULL, NULL) == GR_ZOK) {
        add(c, A_DEL_CONTROLLER, 1, NULL);
        add(c, A_TOUCH_CONTROLLER, 1, NULL);
    }
    if (s->o.admin_topics && s->n_topics_created < 12) add(c, A_CREATE_TOPIC, 2, NULL);
    if (s->o.admin_flows && s->n_topics_created > 0) {
        add(c, A_DELETE_TOPIC, 1, NULL);
        add(c, A_REASSIGN_ZK, 1, NULL);
        add(c, A_REASSIGN_API, 1, NULL);
        add(c, A_REASSIGN_CANCEL, 1, NULL);
        add(c, A_PREFERRED_ZK, 1, NULL);
        add(c, A_ELECT_PREFERRED, 1, NULL);
        add(c, A_ELECT_UNCLEAN, 1, NULL);
        add(c, A_UNCLEAN_CONFIG, 1, NULL);
        add(c, A_ADD_PARTITIONS, 1, NULL);
        for (int i = 0; i < s->n_brokers; i++) {
            struct sbroker *b = &s->brokers[i];
            if (!b->alive) continue;
            if (!b->dir_failed) add(c, A_LOG_DIR_FAIL, 1, b);
            if (b->cs_state == 0 && alive > 1) add(c, A_CS_BEGIN, 1, b);
        }
    }
    add(c, A_TIME, 6, NULL);
}

static void advance_time(struct sim *s, int64_t to) {
    if (to < s->now) to = s->now;
    s->now = to;
    zm_set_time(s->zm, s->now);
    int fired = vclock_fire_due(s);
    int expired = zm_tick(s->zm);
    VLOG(s, "time -> %" PRId64 " ms (%d timers fired, %d sessions expired)", s->now, fired, expired);
}

void sim_advance(struct sim *s, int64_t ms) { advance_time(s, s->now + ms); }

/* Next interesting instant: a timer or a session deadline. */
static int64_t next_instant(struct sim *s) {
    int64_t a = vclock_next_due(s), b = zm_next_deadline(s->zm);
    return a < b ? a : b;
}

static void do_process(struct sim *s, struct sbroker *b) {
    bool had_expire = b->expire_pending;
    gr_ctrl_events_process_one(gr_controller_events(b->ctrl));
    if (had_expire) b->expire_pending = false;
}

static void do_act(struct sim *s, const struct cand *c) {
    struct sbroker *b = c->p;
    struct smsg *m = c->p;
    uint64_t tag = 0;
    switch (c->act) {
    case A_ZK_DELIVER: {
        struct sbroker *o = zm_client_user(c->p);
        tag = o ? (uint64_t)o->id : 99;
        break;
    }
    case A_MSG_REQ: case A_MSG_RESP: case A_MSG_LOSE: case A_ORPHAN_DELIVER: case A_ORPHAN_DROP: tag = m->id; break;
    case A_AMSG_DELIVER: case A_AMSG_COMPLETE: case A_AMSG_DROP: tag = ((struct amsg *)c->p)->id; break;
    case A_TIME: case A_DEL_CONTROLLER: case A_TOUCH_CONTROLLER: case A_CREATE_TOPIC: case A_DELETE_TOPIC:
    case A_ZK_OUTAGE: case A_ZK_OUTAGE_END:
    case A_REASSIGN_ZK: case A_REASSIGN_API: case A_REASSIGN_CANCEL: case A_PREFERRED_ZK: case A_ELECT_PREFERRED:
    case A_ELECT_UNCLEAN: case A_UNCLEAN_CONFIG: case A_ADD_PARTITIONS: tag = 0; break;
    default: tag = b ? (uint64_t)b->id : 0; break;
    }
    sim_trace(s, (uint64_t)c->act * 1000003 + tag);
    switch (c->act) {
    case A_ZK_DELIVER: {
        struct zm_client *cl = c->p;
        struct sbroker *owner = zm_client_user(cl);
        bool was = zm_expired_delivered(cl);
        zm_deliver_one(cl);
        if (owner && !was && zm_expired_delivered(cl)) owner->expire_pending = true;
        VLOG(s, "zk: deliver an event to broker %d", owner ? owner->id : -1);
        break;
    }
    case A_PROCESS:
        VLOG(s, "broker %d: process one controller event (queue %" PRId64 ")", b->id,
             gr_ctrl_events_size(gr_controller_events(b->ctrl)));
        do_process(s, b);
        break;
    case A_NEW_SESSION:
        b->last_session = b->cur_session;
        zm_new_session(b->zc);
        b->cur_session = zm_client_session(b->zc);
        sim_note_session(s, b->cur_session, b->id, b->incarnation);
        VLOG(s, "zk: broker %d gets a new session 0x%" PRIx64, b->id, (uint64_t)b->cur_session);
        break;
    case A_RECONNECT:
        zm_reconnect(b->zc);
        VLOG(s, "zk: broker %d reconnects (%s)", b->id,
             zm_client_state(b->zc) == ZMC_CONNECTED ? "session alive" : "session expired");
        break;
    case A_MSG_REQ:
        VLOG(s, "net: deliver request #%" PRIu64 " api %d %d -> %d%s", m->id, m->api_key, m->from, m->to,
             m->deliveries ? " (again)" : "");
        msg_deliver_request(s, m);
        break;
    case A_MSG_RESP:
        VLOG(s, "net: deliver response #%" PRIu64 " api %d %d -> %d", m->id, m->api_key, m->to, m->from);
        msg_deliver_response(s, m);
        break;
    case A_MSG_LOSE:
        VLOG(s, "net: lose response #%" PRIu64 " (the request will be resent)", m->id);
        msg_lose_response(s, m);
        break;
    case A_ORPHAN_DELIVER:
        VLOG(s, "net: late delivery of orphaned request #%" PRIu64 " api %d from %d to %d", m->id, m->api_key, m->from,
             m->to);
        msg_deliver_request(s, m);
        break;
    case A_ORPHAN_DROP:
        VLOG(s, "net: drop orphaned request #%" PRIu64, m->id);
        msg_drop(s, m);
        break;
    case A_TIME: {
        int64_t to = s->now + 1 + rng_below(&s->rng, 2000);
        int64_t ni = next_instant(s);
        if (ni < to + 5000 && rng_chance(&s->rng, 1, 2)) to = ni;
        advance_time(s, to);
        break;
    }
    case A_CRASH: {
        bool close = rng_chance(&s->rng, 1, 4);
        VLOG(s, "FAULT: broker %d crashes%s", b->id, close ? " (session closed)" : "");
        node_crash(s, b, close);
        s->n_faults++;
        break;
    }
    case A_STOP:
        VLOG(s, "FAULT: broker %d stops gracefully", b->id);
        node_stop(s, b);
        s->n_faults++;
        break;
    case A_RESTART: {
        bool ok = node_start(s, b);
        VLOG(s, "broker %d restarts (incarnation %d): %s", b->id, b->incarnation, ok ? "ok" : "failed");
        break;
    }
    case A_EXPIRE:
        VLOG(s, "FAULT: broker %d's session 0x%" PRIx64 " expires", b->id, (uint64_t)zm_client_session(b->zc));
        zm_expire_session(s->zm, zm_client_session(b->zc));
        s->n_faults++;
        break;
    case A_DISCONNECT:
        VLOG(s, "FAULT: broker %d loses its ZooKeeper connection", b->id);
        zm_disconnect(b->zc);
        s->n_faults++;
        break;
    case A_DEL_CONTROLLER:
        admin_delete_controller(s);
        s->n_faults++;
        break;
    case A_TOUCH_CONTROLLER:
        admin_touch_controller(s, s->o.hand_move);
        s->n_faults++;
        break;
    case A_CREATE_TOPIC: admin_create_topic(s); break;
    case A_ALTER_PROPOSE:
        VLOG(s, "broker %d: a leader proposes an ISR change", b->id);
        if (!alter_propose(s, b)) VLOG(s, "  (nothing to change)");
        break;
    case A_AMSG_DELIVER: {
        struct amsg *a = c->p;
        VLOG(s, "net: AlterPartition #%" PRIu64 " from broker %d reaches the controller on broker %d", a->id, a->from,
             amsg_target(s, a)->id);
        amsg_deliver(s, a);
        break;
    }
    case A_AMSG_COMPLETE: {
        struct amsg *a = c->p;
        VLOG(s, "net: AlterPartition #%" PRIu64 " answer reaches broker %d", a->id, a->from);
        amsg_complete(s, a);
        break;
    }
    case A_AMSG_DROP: {
        struct amsg *a = c->p;
        VLOG(s, "net: AlterPartition #%" PRIu64 " from broker %d given up", a->id, a->from);
        amsg_drop(s, a);
        break;
    }
    case A_DELETE_TOPIC: admin_delete_topic(s); break;
    case A_REASSIGN_ZK: admin_reassign_zk(s); break;
    case A_REASSIGN_API: admin_reassign_api(s, false); break;
    case A_REASSIGN_CANCEL: admin_reassign_api(s, true); break;
    case A_PREFERRED_ZK: admin_preferred_zk(s); break;
    case A_ELECT_PREFERRED: admin_elect_api(s, false); break;
    case A_ELECT_UNCLEAN: admin_elect_api(s, true); break;
    case A_UNCLEAN_CONFIG: admin_unclean_enable(s); break;
    case A_ADD_PARTITIONS: admin_add_partitions(s); break;
    case A_LOG_DIR_FAIL:
        admin_log_dir_failure(s, b);
        s->n_faults++;
        break;
    case A_CS_BEGIN:
        VLOG(s, "broker %d begins a controlled shutdown", b->id);
        cs_begin(s, b);
        break;
    case A_CS_STEP: cs_step(s, b); break;
    case A_CCL_PROCESS:
        VLOG(s, "broker %d: the config change listener reads /config/changes", b->id);
        gr_config_change_listener_process(b->ccl);
        break;
    case A_ALTER_EXPAND:
        VLOG(s, "broker %d: a leader adds a caught-up follower to the ISR", b->id);
        alter_expand(s, b);
        break;
    case A_ZK_OUTAGE:
        /* --long-outages: up to 15 session timeouts, beyond kzk's former give-up (10) */
        s->outage_until = s->now + rng_below(&s->rng, (s->o.zk_long_outages ? 15 : 2) * SIM_SESSION_TIMEOUT_MS);
        s->outage_zxid = zm_last_zxid(s->zm);
        VLOG(s, "FAULT: the whole ZooKeeper ensemble goes down (for at least %" PRId64 " ms)",
             s->outage_until - s->now);
        zm_outage_begin(s->zm);
        s->n_faults++;
        s->n_outages++;
        break;
    case A_ZK_OUTAGE_END:
        outage_end(s);
        break;
    case A_ZK_PARTITION:
        b->zk_cut_until = s->now + SIM_SESSION_TIMEOUT_MS +
                          rng_below(&s->rng, (s->o.zk_long_outages ? 14 : 1) * SIM_SESSION_TIMEOUT_MS);
        VLOG(s, "FAULT: broker %d is cut off from ZooKeeper until t=%" PRId64 " (it keeps running; its session "
                "expires meanwhile)", b->id, b->zk_cut_until);
        zm_disconnect(b->zc);
        s->n_faults++;
        s->n_zk_partitions++;
        break;
    }
}

static struct cand pick(struct sim *s, struct cands *c) {
    uint32_t r = rng_below(&s->rng, (uint32_t)c->total);
    for (int i = 0; i < c->n; i++) {
        if (r < (uint32_t)c->v[i].weight) return c->v[i];
        r -= (uint32_t)c->v[i].weight;
    }
    return c->v[c->n - 1];
}

static void before_step(struct sim *s) {
    if (s->o.verbose) {
        char p[48];
        snprintf(p, sizeof p, "[step %" PRId64 "]", s->step);
        gr_log_set_prefix(p);
    }
}

static void after_step(struct sim *s) {
    if (!s->failed) inv_after_step(s);
}

/* Chaos: K steps mixing progress and faults. */
static void chaos(struct sim *s, int steps) {
    s->phase = 0;
    for (int i = 0; i < steps && !s->failed; i++) {
        s->step++;
        before_step(s);
        struct cands c = {.n = 0, .total = 0};
        progress_cands(s, &c, true);
        amsg_cands(s, &c, true);
        fault_cands(s, &c);
        struct cand x = pick(s, &c);
        do_act(s, &x);
        after_step(s);
    }
}

/* Anything still moving? (timers of periodic tasks do not count) */
static bool busy(struct sim *s) {
    if (zm_pending_total(s->zm) > 0 || s->n_msgs > 0 || s->n_amsgs > 0) return true;
    for (int i = 0; i < s->n_brokers; i++) {
        struct sbroker *b = &s->brokers[i];
        if (!b->alive) continue;
        if (gr_ctrl_events_size(gr_controller_events(b->ctrl)) > 0) return true;
        if (zm_client_state(b->zc) != ZMC_CONNECTED && !(s->settle_hold_cuts && b->zk_cut_until > s->now)) return true;
        if (b->cs_state != 0) return true;
    }
    if (vclock_has_event(s, GR_EV_TOPIC_CHANGE)) return true; /* a paced TopicChange is due */
    if (vclock_has_event(s, GR_EV_REELECT)) return true;       /* a deferred candidacy is due */
    return zm_next_deadline(s->zm) != INT64_MAX;
}

/* Settle: no new faults; restart some dead brokers; deliver everything until quiet. */
void sim_settle(struct sim *s) {
    s->phase = 1;
    outage_end(s);
    for (int i = 0; i < s->n_brokers && !s->settle_hold_cuts; i++) s->brokers[i].zk_cut_until = 0;
    bool want[SIM_MAX_BROKERS] = {0};
    int wanted = 0;
    for (int i = 0; i < s->n_brokers; i++) {
        if (!s->brokers[i].alive && !s->settle_no_restart && rng_chance(&s->rng, 2, 3)) {
            want[i] = true;
            wanted++;
        }
    }
    bool q7_done = false;
    s->q7_armed = false;
    if (n_alive(s) == 0 && wanted == 0) {
        want[rng_below(&s->rng, (uint32_t)s->n_brokers)] = true;
        wanted++;
    }
    for (int guard = 0; guard < 200000 && !s->failed; guard++) {
        s->step++;
        before_step(s);
        struct cands c = {.n = 0, .total = 0};
        progress_cands(s, &c, false);
        amsg_cands(s, &c, false);
        for (int i = 0; i < s->n_brokers; i++)
            if (want[i] && !s->brokers[i].alive) add(&c, A_RESTART, 2, &s->brokers[i]);
        if (c.n > 0) {
            struct cand x = pick(s, &c);
            do_act(s, &x);
            if (x.act == A_RESTART) {
                struct sbroker *b = x.p;
                if (!b->alive) { /* registration refused: its old session still lives; wait */
                    int64_t d = zm_next_deadline(s->zm);
                    if (d != INT64_MAX) advance_time(s, d);
                }
            }
            after_step(s);
            continue;
        }
        if (busy(s)) {
            int64_t ni = next_instant(s);
            if (ni == INT64_MAX) {
                sim_fail(s, "L1 the cluster settles", "busy but nothing can happen");
                return;
            }
            advance_time(s, ni);
            after_step(s);
            continue;
        }
        /* the listeners' periodic re-read (a watch may have been lost with a session) */
        bool woke = false;
        for (int i = 0; i < s->n_brokers; i++) {
            struct sbroker *b = &s->brokers[i];
            if (!b->alive || !b->ccl || (s->settle_hold_cuts && b->zk_cut_until > s->now)) continue;
            gr_config_change_listener_process(b->ccl);
            woke |= gr_ctrl_events_size(gr_controller_events(b->ctrl)) > 0;
        }
        if (woke) {
            VLOG(s, "quiet: a config change listener found a missed notification");
            after_step(s);
            continue;
        }
        if (s->o.admin_flows && !q7_done) {
            q7_done = true;
            if (rng_chance(&s->rng, 1, 2)) {
                int64_t due = q7_arm(s);
                if (due != INT64_MAX) {
                    VLOG(s, "quiet: firing the auto-rebalance check (Q7)");
                    advance_time(s, due);
                    after_step(s);
                    continue;
                }
            }
        }
        if (s->settle_hold_cuts) {
            VLOG(s, "quiet (brokers cut off from ZooKeeper are held): not checked");
            return;
        }
        VLOG(s, "quiet: checking the cluster");
        inv_quiet(s);
        return;
    }
    if (!s->failed) sim_fail(s, "L1 the cluster settles", "still busy after 200000 settle steps");
}

/* ======================================================================================
 * One run
 * ====================================================================================== */

void sim_setup(struct sim *s, const struct sim_opts *o) {
    memset(s, 0, sizeof *s);
    s->o = *o;
    rng_seed(&s->rng, o->seed);
    if (o->seed % 5 == 0) {
        /* one seed in five: writes in rounds of 4 states (multis of 2 ops, 2 in flight), so a
         * step's elections are written and sent a round at a time (partition_sm.c round_written) */
        s->kzk_batch = 3;
        s->kzk_depth = 2;
    }
    s->zm = zm_new();
    zm_set_flush_on_call(s->zm, o->watch_flush);
    struct zm_hooks h = {.wait_connected = hook_wait_connected, .call_fault = hook_call_fault,
                         .on_commit = hook_on_commit, .arg = s};
    zm_set_hooks(s->zm, &h);
    s->now = 1000;
    zm_set_time(s->zm, s->now);
    inv_init(s);
    s->admin = zm_client_new(s->zm, 1 << 30, NULL, NULL, NULL);
    s->admin_kzk = gr_kzk_new(zm_backend(s->admin));
    s->n_brokers = o->brokers;
    for (int i = 0; i < s->n_brokers; i++) {
        struct sbroker *b = &s->brokers[i];
        b->sim = s;
        b->id = i + 1;
        b->info.id = b->id;
        b->info.jmx_port = -1;
        b->info.timestamp = 1;
        b->info.n_endpoints = 1;
        b->info.endpoints = gr_calloc(1, sizeof *b->info.endpoints);
        b->info.endpoints[0].listener = gr_strdup("PLAINTEXT");
        b->info.endpoints[0].security_protocol = gr_strdup("PLAINTEXT");
        b->info.endpoints[0].host = gr_asprintf("broker%d", b->id);
        b->info.endpoints[0].port = 9092;
        b->info.epoch = -1;
    }
}

void sim_teardown(struct sim *s) {
    for (int i = 0; i < s->n_brokers; i++) node_release(s, &s->brokers[i]);
    msgs_release_all(s);
    gr_kzk_free(s->admin_kzk);
    gr_zkb_destroy(zm_backend(s->admin));
    zm_free(s->zm);
    inv_release(s);
    free(s->sessmap);
    for (int i = 0; i < s->n_unclean_req; i++) free(s->unclean_req[i]);
    free(s->unclean_req);
    for (int i = 0; i < s->n_known_ids; i++) free(s->known_ids[i].topic);
    free(s->known_ids);
    for (int i = 0; i < s->n_id_dropped; i++) free(s->id_dropped[i]);
    free(s->id_dropped);
    free(s->id_dropped_epoch);
    for (int i = 0; i < s->n_id_dropped; i++) free(s->id_dropped_stamp_id[i]);
    free(s->id_dropped_stamp_id);
}

/* Returns 0 if the seed passed. */
static int run_seed(const struct sim_opts *o, uint64_t *trace_out) {
    struct sim *s = gr_calloc(1, sizeof *s);
    sim_setup(s, o);
    /* start brokers in a random order */
    for (int k = 0; k < s->n_brokers; k++) {
        int i = (int)rng_below(&s->rng, (uint32_t)s->n_brokers);
        while (s->brokers[i].alive) i = (i + 1) % s->n_brokers;
        node_start(s, &s->brokers[i]);
        VLOG(s, "broker %d starts", s->brokers[i].id);
    }
    for (int e = 0; e < o->episodes && !s->failed; e++) {
        chaos(s, o->steps);
        if (!s->failed) sim_settle(s);
    }
    if (s->failed && !g_silent) printf("%s\n", s->fail_msg);
    if (o->verbose)
        printf("seed %" PRIu64 ": %" PRId64 " steps, %" PRId64 " elections, %" PRId64 " requests (%" PRId64
               " delivered), %" PRId64 " faults (%" PRId64 " ZooKeeper outages, %" PRId64 " one-sided partitions), trace %016" PRIx64 "\n",
               o->seed, s->step, s->n_elections, s->n_requests, s->n_msgs_delivered, s->n_faults, s->n_outages,
               s->n_zk_partitions, s->trace);
    int rc = s->failed ? 1 : 0;
    if (trace_out) *trace_out = s->trace ^ (uint64_t)zm_last_zxid(s->zm);
    sim_teardown(s);
    free(s);
    return rc;
}

/* ======================================================================================
 * main
 * ====================================================================================== */

static void usage(void) {
    fprintf(stderr,
            "usage: gregor_sim --seeds N [--start S] | --seed S  [--steps K] [--episodes E] [--brokers B]\n"
            "                  [--expect states,metadata|none] [--no-topics] [--no-zk-faults] [--no-zk-outages] [--long-outages] [--standby] [--scenarios-only] [--no-watch-flush]\n"
            "                  [--no-hand-edits] [--hand-move] [--alter-isr|--no-alter-isr] [--no-admin] [--no-scenarios] [--verbose]\n"
            "       gregor_sim --selftest\n");
}

static void parse_expect(struct sim_opts *o, const char *v) {
    o->expect_states = strstr(v, "states") != NULL;
    o->expect_metadata = strstr(v, "metadata") != NULL;
}

int main(int argc, char **argv) {
    struct sim_opts o = {.steps = 400, .episodes = 3, .brokers = 3, .watch_flush = true,
                         .admin_topics = true, .zk_faults = true, .hand_edits = true, .zk_outages = true,
                         .expect_states = true, .expect_metadata = true, .alter_partition = true, .admin_flows = true};
    uint64_t seeds = 0, start = 1, one = 0;
    bool have_one = false, selftest = false, run_scenarios = true, scenarios_only = false;
    char extra[256] = "";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--seeds") && v) seeds = strtoull(v, NULL, 10), i++;
        else if (!strcmp(a, "--start") && v) start = strtoull(v, NULL, 10), i++;
        else if (!strcmp(a, "--seed") && v) one = strtoull(v, NULL, 10), have_one = true, i++;
        else if (!strcmp(a, "--steps") && v) o.steps = atoi(v), i++;
        else if (!strcmp(a, "--episodes") && v) o.episodes = atoi(v), i++;
        else if (!strcmp(a, "--brokers") && v) o.brokers = atoi(v), i++;
        else if (!strcmp(a, "--expect") && v) parse_expect(&o, v), i++;
        else if (!strcmp(a, "--no-topics")) o.admin_topics = false;
        else if (!strcmp(a, "--no-zk-faults")) o.zk_faults = false;
        else if (!strcmp(a, "--no-zk-outages")) o.zk_outages = false;
        else if (!strcmp(a, "--long-outages")) o.zk_long_outages = true;
        else if (!strcmp(a, "--standby")) o.standby = true;
        else if (!strcmp(a, "--scenarios-only")) scenarios_only = true;
        else if (!strcmp(a, "--no-watch-flush")) o.watch_flush = false;
        else if (!strcmp(a, "--hand-move")) o.hand_move = true;
        else if (!strcmp(a, "--no-hand-edits")) o.hand_edits = false;
        else if (!strcmp(a, "--alter-isr")) o.alter_partition = true;
        else if (!strcmp(a, "--no-alter-isr")) o.alter_partition = false;
        else if (!strcmp(a, "--no-admin")) o.admin_flows = false;
        else if (!strcmp(a, "--no-scenarios")) run_scenarios = false;
        else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) o.verbose = true;
        else if (!strcmp(a, "--selftest")) selftest = true;
        else {
            usage();
            return 2;
        }
        /* options that change the run are repeated in the replay line */
        if (strcmp(a, "--seeds") && strcmp(a, "--start") && strcmp(a, "--seed") && strcmp(a, "--verbose") &&
            strcmp(a, "-v") && strcmp(a, "--selftest")) {
            size_t l = strlen(extra);
            snprintf(extra + l, sizeof extra - l, " %s%s%s", a, v && a[0] == '-' && v[0] != '-' ? " " : "",
                     v && v[0] != '-' ? v : "");
        }
    }
    snprintf(g_replay_opts, sizeof g_replay_opts, "%s", extra);
    if (o.brokers < 1 || o.brokers > SIM_MAX_BROKERS || o.steps < 0 || o.episodes < 1) {
        usage();
        return 2;
    }
    if (!o.verbose) gr_log_set_level((enum gr_log_level)(GR_LOG_ERROR + 1));
    else setvbuf(stdout, NULL, _IONBF, 0); /* interleave with the log lines on stderr */
    int f = zm_unit_checks();
    if (f) {
        fprintf(stderr, "zkmodel: %d unit check(s) failed\n", f);
        return 1;
    }
    if (selftest) {
        printf("zkmodel unit checks passed\n");
        return 0;
    }
    if (!have_one && run_scenarios) {
        bool v = o.verbose;
        f = sim_scenarios(&o);
        o.verbose = v;
        if (f) {
            fprintf(stderr, "gregor_sim: %d regression scenario(s) failed\n", f);
            return 1;
        }
    }
    if (scenarios_only && run_scenarios && !have_one) {
        printf("gregor_sim: scenarios passed; failovers checked by W1: %" PRIu64 " cold, %" PRIu64 " warm\n",
               g_failovers.cold, g_failovers.warm);
        return 0;
    }
    if (!have_one && seeds == 0) {
        usage();
        return 2;
    }
    if (have_one) {
        uint64_t t1, t2;
        o.seed = one;
        int rc = run_seed(&o, &t1);
        /* determinism: the same seed must take the same path */
        bool v = o.verbose;
        o.verbose = false;
        gr_log_set_level((enum gr_log_level)(GR_LOG_ERROR + 1));
        g_silent = true;
        int rc2 = run_seed(&o, &t2);
        g_silent = false;
        o.verbose = v;
        if (t1 != t2 || rc != rc2) {
            printf("NONDETERMINISTIC: seed %" PRIu64 " took two different paths (%016" PRIx64 " vs %016" PRIx64 ")\n",
                   one, t1, t2);
            return 1;
        }
        printf("seed %" PRIu64 ": %s\n", one, rc ? "FAILED" : "ok");
        return rc;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int failed = 0;
    for (uint64_t sd = start; sd < start + seeds; sd++) {
        o.seed = sd;
        if (run_seed(&o, NULL) != 0) failed++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("gregor_sim: %" PRIu64 " seeds (%" PRIu64 "..%" PRIu64 "), %d failed, %.1f s, %.0f seeds/minute\n", seeds,
           start, start + seeds - 1, failed, secs, secs > 0 ? (double)seeds * 60.0 / secs : 0.0);
    printf("gregor_sim: failovers checked by W1: %" PRIu64 " cold, %" PRIu64 " warm (%" PRIu64
           " standby states offered, %" PRIu64 " kept by their topic's stamp, %" PRIu64 " read)\n",
           g_failovers.cold, g_failovers.warm, g_failovers.standby_states, g_failovers.states_confirmed,
           g_failovers.states_read);
    printf("gregor_sim: topic ids (T2): %" PRIu64 " znode rewrites without the id, %" PRIu64 " ids kept, %" PRIu64
           " changed (no controller saw the rewrite); %" PRIu64 " logs moved aside (T1)\n",
           g_failovers.id_drops, g_failovers.ids_kept, g_failovers.ids_changed, g_failovers.strays);
    return failed ? 1 : 0;
}
