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
#include "controller/event_manager.h"
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
/* Topic ids for the controllers and the admin (gr_ctrl_topic_id_source): a function of the seed
 * and a counter, so that drawing them does not move the seed's own random stream. */
struct gr_uuid;
void sim_topic_id(void *sim, struct gr_uuid *out);
/* T2: an admin wrote /brokers/topics/<topic> without its topic id (admin.c). */
struct sim;
void sim_note_id_dropped(struct sim *s, const char *topic);
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
    bool alter_partition;            /* leaders propose ISR changes (AlterPartition) */
    bool admin_flows;          /* deletion, reassignment, elections, unclean config, controlled
                                  shutdown, log dir failures (admin.c) */
    bool zk_outages;           /* whole-ensemble outages and one-sided partitions (a broker cut
                                  off from ZooKeeper, still running, its session expiring) */
    bool zk_long_outages;      /* ... longer than kzk's reconnect wait: calls fail meanwhile */
    bool standby;              /* gregor.controller.standby.enable on every broker (W1) */
};

/* Failovers seen by W1 over the whole run of gregor_sim (printed at the end). */
struct sim_failover_counts {
    uint64_t cold, warm;
    /* T2: znode rewrites without the topic id (a 2.7 tool), ids kept or written back, ids changed
     * (the residual case: the rewrite was not seen by a controller that knew the id); logs moved
     * aside by simulated brokers (T1) */
    uint64_t id_drops, ids_kept, ids_changed, strays;
    uint64_t standby_states, states_confirmed, states_read;
    struct gr_ctrl_load_report last_warm; /* the latest warm failover's report (scenarios) */
};
extern struct sim_failover_counts g_failovers;

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
    uint8_t r_topic_id[16];     /* KIP-516: the id the replica's log holds (all zero: none) */
    int r_n_isr;
    int32_t *r_isr;
    int r_n_replicas;
    int32_t *r_replicas;
    bool alter_pending;         /* an AlterPartition for it is in flight (leaders only) */
};

/* Which of a broker's two log dirs holds a partition (a fixed function of the name). */
int sim_dir_of(const char *topic, int32_t partition);

/* An AlterPartition request from a partition leader to the controller and its answer. */
struct amsg {
    uint64_t id;
    int32_t from;
    int from_inc;
    struct gr_arena arena;      /* request and (decoded copy of) response */
    struct AlterPartitionRequest *req;
    struct AlterPartitionResponse *resp;
    int16_t version;            /* of the request (0-3; by topic id from 2), as the broker's sender */
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
    /* logs moved aside (KIP-516 stray logs: another topic id than the LeaderAndIsr's), over every
     * incarnation: kept on disk, never hosted again */
    int n_strays;
    int n_parts, cap_parts;
    struct sb_part *parts;
    int n_live;
    int32_t live[SIM_MAX_BROKERS + 1];  /* from UpdateMetadata LiveBrokers */
    bool got_update_metadata;
    int32_t known_controller;   /* ControllerId of the last accepted UpdateMetadata */

    /* admin.c: the /config/changes listener this broker runs (no thread) */
    struct gr_config_change_listener *ccl;
    /* log dir 1 failed in this incarnation: its replicas answer KAFKA_STORAGE_ERROR */
    bool dir_failed;
    /* partitions deleted by StopReplica(delete=true) in this incarnation ("topic-partition") */
    int n_deleted;
    char **deleted;
    /* replicas whose StopReplica(delete=true) this incarnation refused (fenced: sent to its previous
     * registration): the controller does not retry, the replica stays (Kafka 2.7 too) */
    int n_missed;
    char **missed;
    /* partitions of deleted topics whose removal (UpdateMetadata with LeaderDuringDelete) this
     * incarnation's metadata cache has not got, with the controller epoch of the term that owes
     * it: the deletion completed while the broker was not live for the controller, or the
     * request that carried it was lost or refused after the topic was gone. That term sends it
     * again when the broker starts up (topic_deletion.h); once a later term rules, nobody knows
     * of the topic any more and the cache keeps it, as Kafka 2.7's MetadataCache does. Q5
     * accepts such a partition only then (node_note_cache_missed). */
    int n_cache_missed;
    char **cache_missed;
    int32_t *cache_missed_epoch;
    /* controlled shutdown (KafkaServer.controlledShutdown): 0 idle, 1 request at a controller,
     * 2 answered (or could not be sent): the next step retries or stops the broker */
    int cs_state;
    int cs_attempt;
    bool cs_ok;
    uint64_t cs_seq;
    /* one-sided partition: cannot reach ZooKeeper before this virtual time (0: not cut off) */
    int64_t zk_cut_until;
    /* scenarios: delete.topic.enable=false from its next start (a rolling change of the setting) */
    bool delete_disabled;
    /* scenarios: from its next start, runs as a Gregor of an earlier version (or Kafka) would: no
     * state stamps, no stamps marker in /controller, no standby */
    bool no_stamps;
    /* scenarios (sim.interrupt_deletion_of): its next ZooKeeper write loses the connection before
     * reaching the server, and its session expires while kzk waits to reconnect */
    bool interrupt_next_write;
    bool expire_on_wait;
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
    bool settle_no_restart;     /* scenarios: settle keeps dead brokers down */
    bool settle_hold_cuts;      /* scenarios: settle keeps brokers cut off from ZooKeeper (they
                                   wait, never reconnect) and returns once the rest is quiet,
                                   without the quiet checks (they need every live broker
                                   registered) */
    bool failed;
    char fail_msg[4096];
    /* scenarios: ops per multi of every broker's kzk from its next start (0: kzk's default) */
    int kzk_batch;
    int kzk_depth; /* multis in flight of every broker's kzk from its next start (0: kzk's default) */
    int64_t standby_refresh_ms; /* scenarios: brokers started from now on refresh their standby
                                 * this often (0: every 20 s) */
    /* scenarios: the first committed multi of a broker that deletes a partition state znode of
     * this topic arms that broker's interrupt_next_write, once (a deletion cut between its multis) */
    const char *interrupt_deletion_of;

    struct sbroker brokers[SIM_MAX_BROKERS];
    int n_brokers;

    struct zm_client *admin;
    struct gr_kzk *admin_kzk;
    int n_topics_created;
    uint64_t n_topic_ids;     /* ids drawn by sim_topic_id */
    /* T2: each topic's id at the last quiet check, by incarnation (czxid); topics whose znode an
     * admin rewrote without its id since then (admin_add_partitions, as a Kafka 2.7 tool) */
    int n_known_ids;
    /* stamped: its /brokers/topics/T/partitions held an id (the controller's second copy) */
    struct sim_known_id { char *topic; int64_t czxid; char id[32]; bool stamped; } *known_ids;
    int n_id_dropped;
    char **id_dropped;
    int32_t *id_dropped_epoch;  /* the controller epoch at the topic's first such rewrite */
    char **id_dropped_stamp_id; /* the id its /partitions znode held at the latest such rewrite, or NULL */
    int n_admin_ops;            /* deletions, reassignments, elections, config changes */
    /* partitions an admin asked to elect uncleanly (ElectLeaders UNCLEAN) while the request is
     * pending: "topic-partition" */
    int n_unclean_req;
    char **unclean_req;
    /* the auto-rebalance check (Q7): brokers whose imbalance exceeded 10% when the timer was
     * fired on a quiet cluster; checked at the next quiet point */
    bool q7_armed;
    bool q7_over[SIM_MAX_BROKERS + 1];

    /* whole-ensemble outage: may end from this virtual time on; zxid when it began */
    int64_t outage_until;
    int64_t outage_zxid;

    /* messages */
    struct smsg *msgs;          /* every in-flight message, in send order */
    int n_msgs;
    uint64_t next_msg_id;

    struct amsg *amsgs;         /* AlterPartition requests in flight */
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
    int64_t n_unclean_elections, n_deletions_done, n_reassign_done, n_cs_done;
    int64_t n_outages, n_zk_partitions;
    uint64_t trace;             /* hash of the choices, for determinism checks */
};

/* sim.c */
/* A run's life: set up (brokers not started), settle (no faults; restart most dead brokers;
 * deliver everything; check the quiet invariants), tear down. */
void sim_setup(struct sim *s, const struct sim_opts *o);
void sim_settle(struct sim *s);
/* Moves virtual time on by ms (timers fire, sessions past their deadline expire). */
void sim_advance(struct sim *s, int64_t ms);
void sim_teardown(struct sim *s);
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
/* Earliest due time of clk's timers, INT64_MAX if none. */
int64_t vclock_next_due_of(struct sim *s, struct gr_clock *clk);
/* Whether a pending timer carries an event of this type (a controller's deferred TopicChange:
 * work the cluster still has to do, unlike the periodic auto-rebalance check). */
bool vclock_has_event(struct sim *s, int type);
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
/* AlterPartition: a leader of b proposes an ISR change (false if it leads nothing changeable). */
bool alter_propose(struct sim *s, struct sbroker *b);
/* The broker's current controller (from its metadata), NULL if unknown or down. */
struct sbroker *amsg_target(struct sim *s, struct amsg *a);
void amsg_deliver(struct sim *s, struct amsg *a);
void amsg_complete(struct sim *s, struct amsg *a);
/* The leader gives up on an undelivered proposal. */
void amsg_drop(struct sim *s, struct amsg *a);

/* admin.c: admin tools and broker-initiated controller requests */
struct sbroker *sim_broker(struct sim *s, int32_t id);
/* Each returns false when it had nothing to do. */
bool admin_delete_topic(struct sim *s);
bool admin_reassign_zk(struct sim *s);
bool admin_reassign_api(struct sim *s, bool cancel);
bool admin_preferred_zk(struct sim *s);
bool admin_elect_api(struct sim *s, bool unclean);
bool admin_unclean_enable(struct sim *s);
bool admin_add_partitions(struct sim *s);
bool admin_log_dir_failure(struct sim *s, struct sbroker *b);
/* Controlled shutdown: b asks its controller (attempt 1); cs_step retries or stops b. */
bool cs_begin(struct sim *s, struct sbroker *b);
void cs_step(struct sim *s, struct sbroker *b);
/* A leader adds a live follower that follows its leader epoch to the ISR (settle phase: the
 * follower has caught up). False if there is none. */
bool alter_expand(struct sim *s, struct sbroker *b);
bool alter_expand_possible(struct sim *s, struct sbroker *b);
/* Q7: arms the auto-rebalance check (quiet cluster) and returns the due time of the active
 * controller's auto-rebalance timer (INT64_MAX if none). */
int64_t q7_arm(struct sim *s);
/* Broker-side records (simnode.c) */
void node_note_deleted(struct sbroker *b, const char *topic, int32_t partition);
/* Records a replica deletion the broker will never receive (D2 excuses it). */
void node_note_missed(struct sbroker *b, const char *topic, int32_t partition);
void node_note_cache_missed(struct sbroker *b, const char *topic, int32_t partition, int32_t owed_by_epoch);
/* the controller epoch of the term that owes b the removal of topic-partition, -1 if none */
int32_t node_cache_missed(const struct sbroker *b, const char *topic, int32_t partition);

/* scenarios.c: scripted regressions, run before the seeds. Returns the number that failed. */
int sim_scenarios(const struct sim_opts *base);

/* invariants.c */
void inv_init(struct sim *s);
void inv_release(struct sim *s);
void inv_on_commit(void *arg, const struct zm_txn *t);
/* A controller incarnation sends a request (called by the sim sender). */
void inv_on_send(struct sim *s, struct sbroker *from, int32_t to, int16_t api_key, const void *req);
/* Cheap checks after every step. */
void inv_after_step(struct sim *s);
/* W1: a failover's freshly loaded context (warm or cold) equals what a cold load of ZooKeeper's
 * current tree builds (called from the controller's on_context_loaded hook). */
void inv_on_context_loaded(struct sim *s, struct sbroker *b, struct gr_ctrl_context *ctx,
                           const struct gr_ctrl_load_report *r);
/* Checks of a quiet cluster (nothing in flight). */
void inv_quiet(struct sim *s);

#endif
