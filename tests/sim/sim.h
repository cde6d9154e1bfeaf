/* The deterministic controller simulation: shared types of the driver (sim.c), the simulated
 * brokers and their controller plumbing (simnode.c: virtual clocks, in-memory channels,
 * broker-side request handling) and the invariant checker (invariants.c).
 *
 * Everything runs on one thread. All randomness comes from one seeded PRNG (struct sim.rng);
 * time is virtual (sim->now). See docs/SIMULATION.md. */
#ifndef GR_SIM_SIM_H
#define GR_SIM_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/clock.h"
#include "controller/controller.h"
#include "controller/sender.h"
#include "protocol/arena.h"
#include "zk/kzk.h"
#include "zkmodel.h"

#define SIM_MAX_BROKERS 9
#define SIM_SESSION_TIMEOUT_MS 6000

/* ---- PRNG (xoshiro256**) ---- */
struct sim_rng {
    uint64_t s[4];
};
void rng_seed(struct sim_rng *r, uint64_t seed);
uint64_t rng_next(struct sim_rng *r);
/* Uniform in [0, n) (n > 0). */
uint32_t rng_below(struct sim_rng *r, uint32_t n);
/* True with probability num/den. */
bool rng_chance(struct sim_rng *r, uint32_t num, uint32_t den);

/* ---- options ---- */
struct sim_opts {
    uint64_t seed;
    int steps;                 /* chaos steps per episode */
    int episodes;              /* chaos + settle rounds per seed */
    int brokers;
    bool verbose;
    bool watch_flush;          /* zm flush-on-call (ZooKeeper's notification ordering) */
    /* which flows to expect from the controller (what has landed) */
    bool expect_states;        /* partition states created for new topics (onNewPartitionCreation) */
    bool expect_metadata;      /* brokers' metadata converges (UpdateMetadata) */
    bool admin_topics;         /* admin creates topics */
    bool zk_faults;            /* connection losses inside calls */
    bool hand_edits;           /* /controller deleted / rewritten by hand */
    bool hand_move;            /* /controller rewritten by hand to another broker id */
    bool alter_isr;            /* leaders propose ISR changes (AlterIsr) */
};

/* ---- a simulated broker's partition view (from LeaderAndIsr / UpdateMetadata) ---- */
struct sb_part {
    char *topic;
    int32_t partition;
    /* from UpdateMetadata (metadata cache) */
    bool in_cache;
    int32_t m_leader, m_leader_epoch, m_controller_epoch, m_zk_version;
    int m_n_isr;
    int32_t *m_isr;
    int m_n_replicas;
    int32_t *m_replicas;
    /* from LeaderAndIsr (replica manager) */
    bool has_replica;
    int32_t r_leader, r_leader_epoch, r_zk_version;
    int r_n_isr;
    int32_t *r_isr;
    int r_n_replicas;
    int32_t *r_replicas;
    bool alter_pending;         /* an AlterIsr for it is in flight (leaders only) */
};

/* An AlterIsr request from a partition leader to the controller and its answer. */
struct amsg {
    uint64_t id;
    int32_t from;
    int from_inc;
    struct gr_arena arena;      /* request and (decoded copy of) response */
    struct AlterIsrRequest *req;
    struct AlterIsrResponse *resp;
    int state;                  /* 0 on its way, 1 at the controller, 2 answered */
    bool abandoned;             /* the sender died while the controller held it */
    struct amsg *next;
};

/* ---- in-flight controller -> broker messages ---- */
enum msg_state { MSG_QUEUED = 0, MSG_REQ_SENT, MSG_RESP_READY };

struct smsg {
    uint64_t id;
    struct ssender *snd;       /* NULL once orphaned */
    int32_t from;              /* controller broker id */
    int32_t to;
    int16_t api_key, api_version;
    void *req;
    void (*req_free)(void *);
    struct gr_ctrl_event *completion;
    int state;
    int deliveries;            /* times the broker processed it */
    void *resp;                /* response box while MSG_RESP_READY */
    void (*resp_free)(void *);
    struct smsg *next;
};

/* The in-memory channel manager of one controller incarnation. */
struct ssender {
    struct sim *sim;
    struct sbroker *owner;
    struct gr_ctrl_events *em;  /* set by startup */
    bool running;
    bool dead;                  /* its broker crashed */
    int32_t added[SIM_MAX_BROKERS + 1];
    int64_t added_epoch[SIM_MAX_BROKERS + 1];
    int n_added;
};

/* ---- a simulated broker (one KafkaServer) ---- */
struct sbroker {
    struct sim *sim;
    int32_t id;
    bool alive;
    int incarnation;            /* bumped on every (re)start */
    int64_t registered_epoch;   /* czxid of its /brokers/ids/N (current) */
    int64_t cur_session;        /* its client's session id (kept after a crash: the broker
                                   persists it and kills it on restart) */
    int64_t last_session;       /* session id before the latest NEW_SESSION (hook) */
    bool expire_pending;        /* EXPIRED delivered, Expire not processed yet */

    struct zm_client *zc;
    struct gr_kzk *kzk;
    struct gr_zk_watches *watches;
    struct gr_clock *clock;
    struct ssender *snd;
    struct gr_controller *ctrl;
    struct gr_kzk_broker info;

    /* broker side */
    int32_t highest_ctrl_epoch;
    int n_parts, cap_parts;
    struct sb_part *parts;
    int n_live;
    int32_t live[SIM_MAX_BROKERS + 1];  /* from UpdateMetadata LiveBrokers */
    bool got_update_metadata;
    int32_t known_controller;   /* ControllerId of the last accepted UpdateMetadata */
};

/* ---- the simulation ---- */
struct sim_epoch_rec {
    int32_t broker;             /* -1 none */
    int incarnation;
};

struct sim {
    struct sim_opts o;
    struct sim_rng rng;
    struct zm *zm;
    int64_t now;
    int64_t step;
    int phase;                  /* 0 chaos, 1 settle */
    bool failed;
    char fail_msg[4096];

    struct sbroker brokers[SIM_MAX_BROKERS];
    int n_brokers;

    struct zm_client *admin;
    struct gr_kzk *admin_kzk;
    int n_topics_created;

    /* messages */
    struct smsg *msgs;          /* every in-flight message, in send order */
    int n_msgs;
    uint64_t next_msg_id;

    struct amsg *amsgs;         /* AlterIsr requests in flight */
    int n_amsgs;

    /* virtual timers of every clock */
    struct vtimer *timers;
    uint64_t next_timer_id;

    /* invariants */
    int32_t max_epoch;          /* highest /controller_epoch value seen */
    int32_t cur_epoch;          /* current value */
    int32_t cur_epoch_version;
    int n_epoch_recs;
    struct sim_epoch_rec *winners;  /* by epoch */
    struct sim_epoch_rec *actors;   /* by epoch: first actor seen */
    int32_t *version_epoch;         /* /controller_epoch data version -> epoch */
    int n_version_epoch;

    struct { int64_t sid; int32_t id; int inc; } *sessmap;
    int n_sessmap, cap_sessmap;

    /* statistics */
    int64_t n_elections, n_msgs_delivered, n_faults, n_quiet_checks, n_requests;
    uint64_t trace;             /* hash of the choices, for determinism checks */
};

/* sim.c */
void sim_fail(struct sim *s, const char *invariant, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sim_trace(struct sim *s, uint64_t v);
/* Records that session sid belongs to incarnation inc of broker id. */
void sim_note_session(struct sim *s, int64_t sid, int32_t id, int inc);
/* Owner of a session: true (with broker id and incarnation) for broker sessions. */
bool sim_session_owner(struct sim *s, int64_t sid, int32_t *id, int *inc);

/* simnode.c */
struct gr_clock *vclock_new(struct sim *s);
/* Earliest due time of any timer, INT64_MAX if none. */
int64_t vclock_next_due(struct sim *s);
/* Fires every timer due at or before s->now. Returns how many. */
int vclock_fire_due(struct sim *s);

extern const struct gr_ctrl_sender_ops sim_sender_ops;
/* Starts broker b (a new incarnation). Returns false if its registration failed (it stays
 * down). */
bool node_start(struct sim *s, struct sbroker *b);
/* Crash: the process dies (session lingers unless close_session). */
void node_crash(struct sim *s, struct sbroker *b, bool close_session);
/* Graceful stop: controller shutdown, session closed. */
void node_stop(struct sim *s, struct sbroker *b);
/* Frees everything at the end of a run. */
void node_release(struct sim *s, struct sbroker *b);
/* Message actions. */
void msg_deliver_request(struct sim *s, struct smsg *m);
void msg_deliver_response(struct sim *s, struct smsg *m);
void msg_lose_response(struct sim *s, struct smsg *m);
void msg_drop(struct sim *s, struct smsg *m);
/* The head (oldest) message of m's channel? Orphans are always heads. */
bool msg_is_channel_head(struct sim *s, struct smsg *m);
bool msg_target_alive(struct sim *s, struct smsg *m);
void msgs_release_all(struct sim *s);
/* AlterIsr: a leader of b proposes an ISR change (false if it leads nothing changeable). */
bool alter_propose(struct sim *s, struct sbroker *b);
/* The broker's current controller (from its metadata), NULL if unknown or down. */
struct sbroker *amsg_target(struct sim *s, struct amsg *a);
void amsg_deliver(struct sim *s, struct amsg *a);
void amsg_complete(struct sim *s, struct amsg *a);
/* The leader gives up on an undelivered proposal. */
void amsg_drop(struct sim *s, struct amsg *a);

/* invariants.c */
void inv_init(struct sim *s);
void inv_release(struct sim *s);
void inv_on_commit(void *arg, const struct zm_txn *t);
/* A controller incarnation sends a request (called by the sim sender). */
void inv_on_send(struct sim *s, struct sbroker *from, int16_t api_key, const void *req);
/* Cheap checks after every step. */
void inv_after_step(struct sim *s);
/* Checks of a quiet cluster (nothing in flight). */
void inv_quiet(struct sim *s);

#endif
