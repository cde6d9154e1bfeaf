/* Simulated brokers: their lifecycle (start, crash, graceful stop), the virtual clock each
 * controller gets, the in-memory channel manager (sender ops) and the broker side of the
 * control requests (LeaderAndIsr, UpdateMetadata, StopReplica) with Kafka's broker-side fencing
 * (reference §7).
 *
 * Channels: one FIFO per (controller incarnation, target broker), like Kafka's one send thread
 * per broker: only the oldest message of a channel can be processed by the broker; its response
 * must come back (or be lost, which makes the request go out again: a duplicate) before the next
 * one goes. When a channel is torn down (remove_broker, shutdown, crash) the message at its
 * head may already be on the wire: it becomes an orphan that a later step may still deliver to
 * the broker (its answer goes nowhere) or drop; the rest of the queue is dropped.
 *
 * Every request is encoded with the codec at the version the controller chose and decoded back
 * before the broker handles it; every response is encoded and decoded the same way, so the
 * controller receives exactly what a real channel manager would give it (response.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/config_change_listener.h"
#include "controller/flows.h"
#include "controller/request_batch.h"
#include "controller/response.h"
#include "protocol/codec.h"
#include "sim.h"

/* ======================================================================================
 * Virtual clock
 * ====================================================================================== */

struct vtimer {
    uint64_t id;
    int64_t due;
    struct vclock *clk;
    struct gr_ctrl_events *em;
    struct gr_ctrl_event *ev;
    struct vtimer *next;
};

struct vclock {
    struct gr_clock base;
    struct sim *sim;
};

static int64_t vc_now(struct gr_clock *clk) { return ((struct vclock *)clk)->sim->now; }

static uint64_t vc_schedule(struct gr_clock *clk, int64_t delay_ms, struct gr_ctrl_events *em,
                            struct gr_ctrl_event *ev) {
    struct vclock *c = (struct vclock *)clk;
    struct sim *s = c->sim;
    struct vtimer *t = gr_calloc(1, sizeof *t);
    t->id = ++s->next_timer_id;
    t->due = s->now + (delay_ms > 0 ? delay_ms : 0);
    t->clk = c;
    t->em = em;
    t->ev = ev;
    struct vtimer **pp = &s->timers;
    while (*pp && (*pp)->due <= t->due) pp = &(*pp)->next;
    t->next = *pp;
    *pp = t;
    return t->id;
}

static void vc_cancel(struct gr_clock *clk, uint64_t id) {
    struct vclock *c = (struct vclock *)clk;
    for (struct vtimer **pp = &c->sim->timers; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id && (*pp)->clk == c) {
            struct vtimer *t = *pp;
            *pp = t->next;
            gr_ctrl_event_free(t->ev);
            free(t);
            return;
        }
    }
}

static void vc_free(struct gr_clock *clk) {
    struct vclock *c = (struct vclock *)clk;
    struct vtimer **pp = &c->sim->timers;
    while (*pp) {
        if ((*pp)->clk == c) {
            struct vtimer *t = *pp;
            *pp = t->next;
            gr_ctrl_event_free(t->ev);
            free(t);
        } else {
            pp = &(*pp)->next;
        }
    }
    free(c);
}

static const struct gr_clock_ops vclock_ops = {vc_now, vc_schedule, vc_cancel, vc_free};

struct gr_clock *vclock_new(struct sim *s) {
    struct vclock *c = gr_calloc(1, sizeof *c);
    c->base.ops = &vclock_ops;
    c->sim = s;
    return &c->base;
}

int64_t vclock_next_due(struct sim *s) { return s->timers ? s->timers->due : INT64_MAX; }

int64_t vclock_next_due_of(struct sim *s, struct gr_clock *clk) {
    for (struct vtimer *t = s->timers; t; t = t->next)
        if (&t->clk->base == clk) return t->due;
    return INT64_MAX;
}

bool vclock_has_event(struct sim *s, int type) {
    for (struct vtimer *t = s->timers; t; t = t->next)
        if ((int)t->ev->type == type) return true;
    return false;
}

int vclock_fire_due(struct sim *s) {
    int n = 0;
    while (s->timers && s->timers->due <= s->now) {
        struct vtimer *t = s->timers;
        s->timers = t->next;
        gr_ctrl_events_put(t->em, t->ev);
        free(t);
        n++;
    }
    return n;
}

/* ======================================================================================
 * Messages and channels
 * ====================================================================================== */

static void msg_unlink(struct sim *s, struct smsg *m) {
    for (struct smsg **pp = &s->msgs; *pp; pp = &(*pp)->next) {
        if (*pp == m) {
            *pp = m->next;
            s->n_msgs--;
            return;
        }
    }
}

static void msg_free(struct smsg *m) {
    if (m->req && m->req_free) m->req_free(m->req);
    gr_ctrl_event_free(m->completion);
    if (m->resp && m->resp_free) m->resp_free(m->resp);
    free(m);
}

static void note_lost_deletes(struct sim *s, struct smsg *m);

void msg_drop(struct sim *s, struct smsg *m) {
    if (!m->snd && m->deliveries == 0) note_lost_deletes(s, m); /* an orphan given up */
    msg_unlink(s, m);
    msg_free(m);
}

bool msg_is_channel_head(struct sim *s, struct smsg *m) {
    if (!m->snd) return true;
    for (struct smsg *x = s->msgs; x; x = x->next) {
        if (x == m) return true;
        if (x->snd == m->snd && x->to == m->to) return false;
    }
    return false;
}

static struct sbroker *broker_by_id(struct sim *s, int32_t id) {
    for (int i = 0; i < s->n_brokers; i++)
        if (s->brokers[i].id == id) return &s->brokers[i];
    return NULL;
}

bool msg_target_alive(struct sim *s, struct smsg *m) {
    struct sbroker *b = broker_by_id(s, m->to);
    return b && b->alive;
}

static void note_missed(struct sbroker *b, const char *topic, int32_t partition);

static void note_lost_cache_deletes(struct sim *s, struct sbroker *b, const struct UpdateMetadataRequest *r);

/* A StopReplica(delete=true) that never reaches its broker: the controller does not resend it (Kafka
 * 2.7 neither), so the replicas stay on the broker. Recorded for the D2 check. An UpdateMetadata
 * that never reaches it: its removals (leader -2) may be recorded for Q5 (note_lost_cache_deletes). */
static void note_lost_deletes(struct sim *s, struct smsg *m) {
    struct sbroker *b = broker_by_id(s, m->to);
    if (!b || !b->alive || !m->req) return;
    if (m->api_key == GR_API_UPDATE_METADATA) {
        note_lost_cache_deletes(s, b, &((const struct gr_ctrl_req *)m->req)->u.um);
        return;
    }
    if (m->api_key != GR_API_STOP_REPLICA) return;
    const struct StopReplicaRequest *r = &((const struct gr_ctrl_req *)m->req)->u.sr;
    for (int32_t t = 0; t < r->TopicStatesCount; t++)
        for (int32_t i = 0; i < r->TopicStates[t].PartitionStatesCount; i++)
            if (r->TopicStates[t].PartitionStates[i].DeletePartition)
                note_missed(b, r->TopicStates[t].TopicName, r->TopicStates[t].PartitionStates[i].PartitionIndex);
}

/* Tears down snd's channel to `to` (-1: all channels): the head message, if not answered yet,
 * becomes an orphan; everything else is dropped. */
static void channel_teardown(struct sim *s, struct ssender *snd, int32_t to) {
    bool seen[SIM_MAX_BROKERS + 64] = {0};
    struct smsg **pp = &s->msgs;
    while (*pp) {
        struct smsg *m = *pp;
        if (m->snd != snd || (to >= 0 && m->to != to)) {
            pp = &m->next;
            continue;
        }
        int slot = m->to >= 0 && m->to < (int32_t)(sizeof seen) ? m->to : 0;
        bool head = !seen[slot];
        seen[slot] = true;
        if (head && m->state == MSG_QUEUED) {
            m->snd = NULL; /* orphan: may still reach the broker */
            gr_ctrl_event_free(m->completion);
            m->completion = NULL;
            pp = &m->next;
            continue;
        }
        *pp = m->next;
        s->n_msgs--;
        if (m->state == MSG_QUEUED && m->deliveries == 0) note_lost_deletes(s, m);
        msg_free(m);
    }
}

static void amsg_free(struct amsg *a);

void msgs_release_all(struct sim *s) {
    while (s->amsgs) {
        struct amsg *a = s->amsgs;
        s->amsgs = a->next;
        if (a->state == 1) a->abandoned = true; /* freed when its controller answers */
        else amsg_free(a);
    }
    s->n_amsgs = 0;
    while (s->msgs) {
        struct smsg *m = s->msgs;
        s->msgs = m->next;
        msg_free(m);
    }
    s->n_msgs = 0;
    while (s->timers) {
        struct vtimer *t = s->timers;
        s->timers = t->next;
        gr_ctrl_event_free(t->ev);
        free(t);
    }
}

/* ---- sender ops ---- */

static void snd_startup(void *ctx, struct gr_ctrl_events *em) {
    struct ssender *snd = ctx;
    snd->em = em;
    snd->running = !snd->dead;
    snd->n_added = 0;
}

static void snd_shutdown(void *ctx) {
    struct ssender *snd = ctx;
    channel_teardown(snd->sim, snd, -1);
    snd->running = false;
    snd->n_added = 0;
}

static int snd_find(struct ssender *snd, int32_t id) {
    for (int i = 0; i < snd->n_added; i++)
        if (snd->added[i] == id) return i;
    return -1;
}

static void snd_add(void *ctx, const struct gr_kzk_broker *b) {
    struct ssender *snd = ctx;
    int i = snd_find(snd, b->id);
    if (i >= 0) {
        snd->added_epoch[i] = b->epoch;
        return;
    }
    if (snd->n_added >= SIM_MAX_BROKERS + 1) return;
    snd->added[snd->n_added] = b->id;
    snd->added_epoch[snd->n_added] = b->epoch;
    snd->n_added++;
}

static void snd_remove(void *ctx, int32_t id) {
    struct ssender *snd = ctx;
    int i = snd_find(snd, id);
    if (i < 0) return;
    channel_teardown(snd->sim, snd, id);
    snd->added[i] = snd->added[snd->n_added - 1];
    snd->added_epoch[i] = snd->added_epoch[snd->n_added - 1];
    snd->n_added--;
}

static void snd_send(void *ctx, int32_t broker_id, int16_t api_key, int16_t api_version, void *request,
                     void (*request_free)(void *), struct gr_ctrl_event *completion) {
    struct ssender *snd = ctx;
    struct sim *s = snd->sim;
    if (request) inv_on_send(s, snd->owner, broker_id, api_key, request);
    if (!snd->running || snd->dead || snd_find(snd, broker_id) < 0) {
        if (s->o.verbose)
            printf("    [sim] controller %d: not sending api %d to broker %d (not added)\n", snd->owner->id,
                   api_key, broker_id);
        if (request && request_free) request_free(request);
        gr_ctrl_event_free(completion);
        return;
    }
    struct smsg *m = gr_calloc(1, sizeof *m);
    m->id = ++s->next_msg_id;
    m->snd = snd;
    m->from = snd->owner->id;
    m->to = broker_id;
    m->api_key = api_key;
    m->api_version = api_version;
    m->req = request;
    m->req_free = request_free;
    m->completion = completion;
    m->state = MSG_QUEUED;
    struct smsg **pp = &s->msgs;
    while (*pp) pp = &(*pp)->next;
    *pp = m;
    s->n_msgs++;
    s->n_requests++;
    if (s->o.verbose) printf("    [sim] controller %d queues #%" PRIu64 " api %d to broker %d\n", m->from, m->id, api_key, broker_id);
}

const struct gr_ctrl_sender_ops sim_sender_ops = {
    .startup = snd_startup,
    .shutdown = snd_shutdown,
    .add_broker = snd_add,
    .remove_broker = snd_remove,
    .send = snd_send,
};

/* ======================================================================================
 * Broker side
 * ====================================================================================== */

static struct sb_part *part_find(struct sbroker *b, const char *topic, int32_t partition, bool create) {
    for (int i = 0; i < b->n_parts; i++)
        if (b->parts[i].partition == partition && strcmp(b->parts[i].topic, topic) == 0) return &b->parts[i];
    if (!create) return NULL;
    if (b->n_parts == b->cap_parts) {
        b->cap_parts = b->cap_parts ? b->cap_parts * 2 : 16;
        b->parts = gr_realloc(b->parts, (size_t)b->cap_parts * sizeof *b->parts);
    }
    struct sb_part *p = &b->parts[b->n_parts++];
    memset(p, 0, sizeof *p);
    p->topic = gr_strdup(topic);
    p->partition = partition;
    p->m_leader = p->r_leader = -1;
    p->m_leader_epoch = p->r_leader_epoch = -1;
    return p;
}

static void part_release(struct sb_part *p) {
    free(p->topic);
    free(p->m_isr);
    free(p->m_replicas);
    free(p->r_isr);
    free(p->r_replicas);
}

static void part_remove(struct sbroker *b, struct sb_part *p) {
    part_release(p);
    *p = b->parts[--b->n_parts];
}

int sim_dir_of(const char *topic, int32_t partition) {
    unsigned h = (unsigned)partition;
    for (const char *c = topic; *c; c++) h = h * 31u + (unsigned char)*c;
    return (int)(h % 2u);
}

/* Is b's replica of topic-partition on its failed log dir? */
static bool on_failed_dir(struct sbroker *b, const char *topic, int32_t partition) {
    return b->dir_failed && sim_dir_of(topic, partition) == 1;
}

void node_note_deleted(struct sbroker *b, const char *topic, int32_t partition) {
    b->deleted = gr_realloc(b->deleted, (size_t)(b->n_deleted + 1) * sizeof *b->deleted);
    b->deleted[b->n_deleted++] = gr_asprintf("%s-%d", topic, partition);
}

static void note_missed(struct sbroker *b, const char *topic, int32_t partition) {
    b->missed = gr_realloc(b->missed, (size_t)(b->n_missed + 1) * sizeof *b->missed);
    b->missed[b->n_missed++] = gr_asprintf("%s-%d", topic, partition);
}

void node_note_missed(struct sbroker *b, const char *topic, int32_t partition) { note_missed(b, topic, partition); }

static void forget_cache_missed(struct sbroker *b, const char *topic, int32_t partition) {
    if (!b->n_cache_missed) return;
    char name[512];
    snprintf(name, sizeof name, "%s-%d", topic, partition);
    for (int i = 0; i < b->n_cache_missed; i++)
        if (strcmp(b->cache_missed[i], name) == 0) {
            free(b->cache_missed[i]);
            b->n_cache_missed--;
            b->cache_missed[i] = b->cache_missed[b->n_cache_missed];
            b->cache_missed_epoch[i] = b->cache_missed_epoch[b->n_cache_missed];
            return;
        }
}

int32_t node_cache_missed(const struct sbroker *b, const char *topic, int32_t partition) {
    char name[512];
    snprintf(name, sizeof name, "%s-%d", topic, partition);
    for (int i = 0; i < b->n_cache_missed; i++)
        if (strcmp(b->cache_missed[i], name) == 0) return b->cache_missed_epoch[i];
    return -1;
}

void node_note_cache_missed(struct sbroker *b, const char *topic, int32_t partition, int32_t owed_by_epoch) {
    if (node_cache_missed(b, topic, partition) >= owed_by_epoch) return;
    forget_cache_missed(b, topic, partition);
    int n = b->n_cache_missed + 1;
    b->cache_missed = gr_realloc(b->cache_missed, (size_t)n * sizeof *b->cache_missed);
    b->cache_missed_epoch = gr_realloc(b->cache_missed_epoch, (size_t)n * sizeof *b->cache_missed_epoch);
    b->cache_missed[b->n_cache_missed] = gr_asprintf("%s-%d", topic, partition);
    b->cache_missed_epoch[b->n_cache_missed++] = owed_by_epoch;
}

/* An UpdateMetadata that b never applies (lost on the way, or refused): its LeaderDuringDelete
 * entries of topics whose znodes are already gone are never sent again (the controller has
 * forgotten the topic; a starting broker's full UpdateMetadata names only existing partitions),
 * so b's cache keeps what it had of them. While the topic still exists, the controller that
 * completes the deletion sends them again to every broker live for it (onTopicDeletion, or a
 * starting broker's full UpdateMetadata with the topic marked being deleted); a broker not live
 * for it then is recorded at the completion (invariants.c, note_deleted_while_offline). */
static void note_lost_cache_deletes(struct sim *s, struct sbroker *b, const struct UpdateMetadataRequest *r) {
    for (int32_t t = 0; t < r->TopicStatesCount; t++) {
        const struct UpdateMetadataRequest_UpdateMetadataTopicState *ts = &r->TopicStates[t];
        char path[512];
        snprintf(path, sizeof path, "/brokers/topics/%s", ts->TopicName);
        if (zm_peek(s->zm, path, NULL, NULL, NULL) == GR_ZOK) continue;
        for (int32_t i = 0; i < ts->PartitionStatesCount; i++) {
            if (ts->PartitionStates[i].Leader != GR_LEADER_DURING_DELETE) continue;
            struct sb_part *p = part_find(b, ts->TopicName, ts->PartitionStates[i].PartitionIndex, false);
            if (p && p->in_cache) node_note_cache_missed(b, p->topic, p->partition, r->ControllerEpoch);
        }
    }
}

static void broker_state_reset(struct sbroker *b) {
    for (int i = 0; i < b->n_deleted; i++) free(b->deleted[i]);
    free(b->deleted);
    b->deleted = NULL;
    b->n_deleted = 0;
    for (int i = 0; i < b->n_missed; i++) free(b->missed[i]);
    free(b->missed);
    b->missed = NULL;
    b->n_missed = 0;
    for (int i = 0; i < b->n_cache_missed; i++) free(b->cache_missed[i]);
    free(b->cache_missed);
    free(b->cache_missed_epoch);
    b->cache_missed = NULL;
    b->cache_missed_epoch = NULL;
    b->n_cache_missed = 0;
    b->dir_failed = false;
    b->cs_state = 0;
    b->cs_attempt = 0;
    b->cs_ok = false;
    for (int i = 0; i < b->n_parts; i++) part_release(&b->parts[i]);
    free(b->parts);
    b->parts = NULL;
    b->n_parts = b->cap_parts = 0;
    b->n_live = 0;
    b->highest_ctrl_epoch = 0;
    b->got_update_metadata = false;
    b->known_controller = -1;
}

static int32_t *dup_ids(const int32_t *v, int32_t n) {
    if (n <= 0) return NULL;
    int32_t *x = gr_malloc((size_t)n * sizeof *x);
    memcpy(x, v, (size_t)n * sizeof *x);
    return x;
}

static bool has_id(const int32_t *v, int32_t n, int32_t id) {
    for (int32_t i = 0; i < n; i++)
        if (v[i] == id) return true;
    return false;
}

/* Kafka's isBrokerEpochStale: -1 is accepted; lower than our registration is stale. */
static bool broker_epoch_stale(struct sbroker *b, int64_t e) {
    int64_t mine = b->ctrl ? gr_controller_broker_epoch(b->ctrl) : b->registered_epoch;
    return e != -1 && e < mine;
}

static void handle_leader_and_isr(struct sim *s, struct sbroker *b, const struct LeaderAndIsrRequest *rq,
                                  struct gr_arena *a, struct LeaderAndIsrResponse *rs) {
    int total = 0;
    for (int32_t t = 0; t < rq->TopicStatesCount; t++) total += rq->TopicStates[t].PartitionStatesCount;
    rs->PartitionErrorsCount = total;
    rs->PartitionErrors = gr_arena_alloc(a, sizeof(*rs->PartitionErrors) * (size_t)(total ? total : 1));
    int16_t top = GR_KERR_NONE;
    if (broker_epoch_stale(b, rq->BrokerEpoch)) top = GR_KERR_STALE_BROKER_EPOCH;
    else if (rq->ControllerEpoch < b->highest_ctrl_epoch) top = GR_KERR_STALE_CONTROLLER_EPOCH;
    else b->highest_ctrl_epoch = rq->ControllerEpoch;
    rs->ErrorCode = top;
    int k = 0;
    for (int32_t t = 0; t < rq->TopicStatesCount; t++) {
        const struct LeaderAndIsrRequest_LeaderAndIsrTopicState *ts = &rq->TopicStates[t];
        for (int32_t i = 0; i < ts->PartitionStatesCount; i++, k++) {
            const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *ps = &ts->PartitionStates[i];
            struct LeaderAndIsrResponse_LeaderAndIsrPartitionError *pe = &rs->PartitionErrors[k];
            pe->TopicName = gr_arena_strdup(a, ts->TopicName);
            pe->PartitionIndex = ps->PartitionIndex;
            if (top != GR_KERR_NONE) {
                pe->ErrorCode = top;
                continue;
            }
            if (!has_id(ps->Replicas, ps->ReplicasCount, b->id)) {
                pe->ErrorCode = GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
                continue;
            }
            if (on_failed_dir(b, ts->TopicName, ps->PartitionIndex)) { /* HostedPartition.Offline */
                pe->ErrorCode = GR_KERR_KAFKA_STORAGE_ERROR;
                continue;
            }
            struct sb_part *p = part_find(b, ts->TopicName, ps->PartitionIndex, true);
            static const uint8_t none[16];
            if (p->has_replica && memcmp(ts->TopicId, none, 16) != 0 && memcmp(p->r_topic_id, none, 16) != 0 &&
                memcmp(p->r_topic_id, ts->TopicId, 16) != 0) {
                /* not the current topic's log (handle_control.c): moved aside as a stray log
                 * (kept, never hosted again), and the new topic's replica starts empty */
                if (s->o.verbose)
                    printf("    [sim] broker %d: %s-%d holds another topic id: its log is moved aside (stray)\n",
                           b->id, ts->TopicName, ps->PartitionIndex);
                b->n_strays++;
                g_failovers.strays++;
                p->has_replica = false;
                p->r_leader_epoch = -1;
                memset(p->r_topic_id, 0, 16);
            }
            if (p->has_replica && ps->LeaderEpoch <= p->r_leader_epoch) {
                pe->ErrorCode = GR_KERR_STALE_CONTROLLER_EPOCH;
                continue;
            }
            p->has_replica = true;
            if (memcmp(ts->TopicId, none, 16) != 0) memcpy(p->r_topic_id, ts->TopicId, 16); /* adopted */
            p->r_leader = ps->Leader;
            p->r_leader_epoch = ps->LeaderEpoch;
            p->r_zk_version = ps->PartitionEpoch;
            p->alter_pending = false;
            free(p->r_isr);
            p->r_n_isr = ps->IsrCount > 0 ? ps->IsrCount : 0;
            p->r_isr = dup_ids(ps->Isr, ps->IsrCount);
            free(p->r_replicas);
            p->r_n_replicas = ps->ReplicasCount > 0 ? ps->ReplicasCount : 0;
            p->r_replicas = dup_ids(ps->Replicas, ps->ReplicasCount);
            pe->ErrorCode = GR_KERR_NONE;
        }
    }
    /* v5+ answers by topic id (the broker's handle_control.c does the same) */
    rs->TopicsCount = rq->TopicStatesCount > 0 ? rq->TopicStatesCount : 0;
    rs->Topics = gr_arena_alloc(a, sizeof(*rs->Topics) * (size_t)(rs->TopicsCount ? rs->TopicsCount : 1));
    for (int32_t t = 0, off = 0; t < rs->TopicsCount; t++) {
        memcpy(rs->Topics[t].TopicId, rq->TopicStates[t].TopicId, 16);
        rs->Topics[t].PartitionErrorsCount = rq->TopicStates[t].PartitionStatesCount;
        rs->Topics[t].PartitionErrors = rs->PartitionErrors + off;
        off += rq->TopicStates[t].PartitionStatesCount;
    }
    if (s->o.verbose)
        for (int t = 0, k2 = 0; t < rq->TopicStatesCount; t++)
            for (int32_t i = 0; i < rq->TopicStates[t].PartitionStatesCount; i++, k2++)
                printf("    [sim] broker %d: LeaderAndIsr %s-%d leader %d epoch %d%s: %s\n", b->id,
                       rq->TopicStates[t].TopicName, rq->TopicStates[t].PartitionStates[i].PartitionIndex,
                       rq->TopicStates[t].PartitionStates[i].Leader, rq->TopicStates[t].PartitionStates[i].LeaderEpoch,
                       rq->TopicStates[t].PartitionStates[i].IsNew ? " (new)" : "",
                       gr_kerr_name(rs->PartitionErrors[k2].ErrorCode));
}

static void handle_update_metadata(struct sim *s, struct sbroker *b, const struct UpdateMetadataRequest *rq,
                                   struct UpdateMetadataResponse *rs) {
    if (broker_epoch_stale(b, rq->BrokerEpoch)) {
        rs->ErrorCode = GR_KERR_STALE_BROKER_EPOCH;
        note_lost_cache_deletes(s, b, rq);
        return;
    }
    if (rq->ControllerEpoch < b->highest_ctrl_epoch) {
        rs->ErrorCode = GR_KERR_NOT_CONTROLLER;
        note_lost_cache_deletes(s, b, rq);
        return;
    }
    b->highest_ctrl_epoch = rq->ControllerEpoch;
    b->got_update_metadata = true;
    b->known_controller = rq->ControllerId;
    b->n_live = 0;
    for (int32_t i = 0; i < rq->LiveBrokersCount && b->n_live < SIM_MAX_BROKERS + 1; i++)
        b->live[b->n_live++] = rq->LiveBrokers[i].Id;
    for (int32_t t = 0; t < rq->TopicStatesCount; t++) {
        const struct UpdateMetadataRequest_UpdateMetadataTopicState *ts = &rq->TopicStates[t];
        for (int32_t i = 0; i < ts->PartitionStatesCount; i++) {
            const struct UpdateMetadataRequest_UpdateMetadataPartitionState *ps = &ts->PartitionStates[i];
            if (s->o.verbose)
                printf("    [sim] broker %d: UpdateMetadata %s-%d leader %d epoch %d (controller epoch %d)\n", b->id,
                       ts->TopicName, ps->PartitionIndex, ps->Leader, ps->LeaderEpoch, rq->ControllerEpoch);
            if (ps->Leader == -2) { /* LeaderDuringDelete: drop from the cache */
                struct sb_part *p = part_find(b, ts->TopicName, ps->PartitionIndex, false);
                if (p) {
                    p->in_cache = false;
                    if (!p->has_replica) part_remove(b, p);
                }
                continue;
            }
            struct sb_part *p = part_find(b, ts->TopicName, ps->PartitionIndex, true);
            p->in_cache = true;
            forget_cache_missed(b, ts->TopicName, ps->PartitionIndex); /* a topic of that name again */
            p->m_leader = ps->Leader;
            p->m_leader_epoch = ps->LeaderEpoch;
            p->m_controller_epoch = ps->ControllerEpoch;
            p->m_zk_version = ps->ZkVersion;
            free(p->m_isr);
            p->m_n_isr = ps->IsrCount > 0 ? ps->IsrCount : 0;
            p->m_isr = dup_ids(ps->Isr, ps->IsrCount);
            free(p->m_replicas);
            p->m_n_replicas = ps->ReplicasCount > 0 ? ps->ReplicasCount : 0;
            p->m_replicas = dup_ids(ps->Replicas, ps->ReplicasCount);
        }
    }
    rs->ErrorCode = GR_KERR_NONE;
}

static void handle_stop_replica(struct sim *s, struct sbroker *b, const struct StopReplicaRequest *rq,
                                struct gr_arena *a, struct StopReplicaResponse *rs) {
    int total = 0;
    for (int32_t t = 0; t < rq->TopicStatesCount; t++) total += rq->TopicStates[t].PartitionStatesCount;
    int16_t top = GR_KERR_NONE;
    if (broker_epoch_stale(b, rq->BrokerEpoch)) top = GR_KERR_STALE_BROKER_EPOCH;
    else if (rq->ControllerEpoch < b->highest_ctrl_epoch) top = GR_KERR_STALE_CONTROLLER_EPOCH;
    else b->highest_ctrl_epoch = rq->ControllerEpoch;
    rs->ErrorCode = top;
    rs->PartitionErrorsCount = top == GR_KERR_NONE ? total : 0;
    rs->PartitionErrors = gr_arena_alloc(a, sizeof(*rs->PartitionErrors) * (size_t)(total ? total : 1));
    if (top != GR_KERR_NONE) {
        if (s->o.verbose) printf("    [sim] broker %d: StopReplica refused: %s\n", b->id, gr_kerr_name(top));
        for (int32_t t = 0; t < rq->TopicStatesCount; t++)
            for (int32_t i = 0; i < rq->TopicStates[t].PartitionStatesCount; i++) {
                struct sb_part *p =
                    part_find(b, rq->TopicStates[t].TopicName, rq->TopicStates[t].PartitionStates[i].PartitionIndex, false);
                if (p && p->has_replica && rq->TopicStates[t].PartitionStates[i].DeletePartition)
                    note_missed(b, p->topic, p->partition);
            }
        return;
    }
    int k = 0;
    for (int32_t t = 0; t < rq->TopicStatesCount; t++) {
        const struct StopReplicaRequest_StopReplicaTopicState *ts = &rq->TopicStates[t];
        for (int32_t i = 0; i < ts->PartitionStatesCount; i++, k++) {
            const struct StopReplicaRequest_StopReplicaPartitionState *ps = &ts->PartitionStates[i];
            struct StopReplicaResponse_StopReplicaPartitionError *pe = &rs->PartitionErrors[k];
            pe->TopicName = gr_arena_strdup(a, ts->TopicName);
            pe->PartitionIndex = ps->PartitionIndex;
            struct sb_part *p = part_find(b, ts->TopicName, ps->PartitionIndex, false);
            int32_t le = ps->LeaderEpoch;
            if (on_failed_dir(b, ts->TopicName, ps->PartitionIndex)) { /* HostedPartition.Offline */
                pe->ErrorCode = GR_KERR_KAFKA_STORAGE_ERROR;
                if (s->o.verbose)
                    printf("    [sim] broker %d: StopReplica %s-%d: KAFKA_STORAGE_ERROR\n", b->id, ts->TopicName,
                           ps->PartitionIndex);
                continue;
            }
            if (p && p->has_replica && le != -1 && le != -2 && le <= p->r_leader_epoch) {
                pe->ErrorCode = GR_KERR_FENCED_LEADER_EPOCH;
                continue;
            }
            pe->ErrorCode = GR_KERR_NONE;
            if (ps->DeletePartition && (!p || p->has_replica)) node_note_deleted(b, ts->TopicName, ps->PartitionIndex);
            if (p && ps->DeletePartition) {
                p->has_replica = false;
                memset(p->r_topic_id, 0, 16);
                p->r_leader = -1;
                p->r_leader_epoch = -1;
                if (!p->in_cache) part_remove(b, p);
            } else if (p) {
                p->r_leader = -1; /* stopped: no longer leading or fetching */
            }
            if (s->o.verbose)
                printf("    [sim] broker %d: StopReplica %s-%d%s epoch %d: %s\n", b->id, ts->TopicName, ps->PartitionIndex,
                       ps->DeletePartition ? " (delete)" : "", le, gr_kerr_name(pe->ErrorCode));
        }
    }
}

/* Encodes body (request or response) as a frame and decodes it back into a. Returns the decoded
 * struct or NULL (sim failure reported). *frame_out receives the frame buffer (caller frees). */
static void *roundtrip_request(struct sim *s, struct smsg *m, struct gr_arena *a, uint8_t **frame_out) {
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    int rc = gr_proto_encode_request(m->api_key, m->api_version, (int32_t)m->id, "controller", m->req, &w);
    if (rc != 0) {
        sim_fail(s, "request encodes", "controller %d -> broker %d: api %d v%d: %s", m->from, m->to, m->api_key,
                 m->api_version, gr_proto_strerror(rc));
        gr_wbuf_free(&w);
        return NULL;
    }
    struct gr_req_header hdr;
    void *body = NULL;
    rc = gr_proto_decode_request(w.p + 4, w.len - 4, a, &hdr, &body);
    if (rc != 0) {
        sim_fail(s, "request decodes", "controller %d -> broker %d: api %d v%d: %s", m->from, m->to, m->api_key,
                 m->api_version, gr_proto_strerror(rc));
        gr_wbuf_free(&w);
        return NULL;
    }
    *frame_out = w.p; /* decoded strings live in the arena; keep the frame for bytes fields */
    return body;
}

void msg_deliver_request(struct sim *s, struct smsg *m) {
    struct sbroker *b = broker_by_id(s, m->to);
    if (!b || !b->alive) return;
    struct gr_arena ra;
    gr_arena_init(&ra);
    uint8_t *rframe = NULL;
    void *body = roundtrip_request(s, m, &ra, &rframe);
    if (!body) {
        gr_arena_free(&ra);
        free(rframe);
        return;
    }
    m->deliveries++;
    s->n_msgs_delivered++;
    /* the broker's answer, built in its own arena */
    struct gr_arena wa;
    gr_arena_init(&wa);
    void *resp = NULL;
    switch (m->api_key) {
    case GR_API_LEADER_AND_ISR: {
        struct LeaderAndIsrResponse *r = gr_proto_new(&wa, &gr_desc_LeaderAndIsrResponse);
        handle_leader_and_isr(s, b, body, &wa, r);
        resp = r;
        break;
    }
    case GR_API_UPDATE_METADATA: {
        struct UpdateMetadataResponse *r = gr_proto_new(&wa, &gr_desc_UpdateMetadataResponse);
        handle_update_metadata(s, b, body, r);
        resp = r;
        break;
    }
    case GR_API_STOP_REPLICA: {
        struct StopReplicaResponse *r = gr_proto_new(&wa, &gr_desc_StopReplicaResponse);
        handle_stop_replica(s, b, body, &wa, r);
        resp = r;
        break;
    }
    default:
        sim_fail(s, "known control request", "controller %d sent api %d to broker %d", m->from, m->api_key, m->to);
        break;
    }
    gr_arena_free(&ra);
    free(rframe);
    if (!resp || !m->snd) { /* an orphan's answer goes nowhere */
        gr_arena_free(&wa);
        if (!m->snd) msg_drop(s, m);
        return;
    }
    /* encode the response frame and decode it as the channel manager would */
    struct gr_req_header hdr = {.RequestApiKey = m->api_key, .RequestApiVersion = m->api_version,
                                .CorrelationId = (int32_t)m->id, .HeaderVersion = 0};
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    int rc = gr_proto_encode_response(&hdr, resp, &w);
    gr_arena_free(&wa);
    if (rc != 0) {
        sim_fail(s, "response encodes", "api %d v%d: %s", m->api_key, m->api_version, gr_proto_strerror(rc));
        gr_wbuf_free(&w);
        return;
    }
    struct gr_ctrl_response *r = gr_ctrl_response_new();
    r->api_key = m->api_key;
    r->api_version = m->api_version;
    r->broker_id = m->to;
    r->frame = w.p; /* owned by r now */
    int32_t corr = 0;
    rc = gr_proto_decode_response(m->api_key, m->api_version, w.p + 4, w.len - 4, &r->arena, &corr, &r->body);
    if (rc != 0 || corr != (int32_t)m->id) {
        sim_fail(s, "response decodes", "api %d v%d: %s", m->api_key, m->api_version, gr_proto_strerror(rc));
        gr_ctrl_response_free(r);
        return;
    }
    if (m->resp && m->resp_free) m->resp_free(m->resp);
    m->resp = r;
    m->resp_free = gr_ctrl_response_free;
    m->state = MSG_RESP_READY;
}

void msg_deliver_response(struct sim *s, struct smsg *m) {
    struct ssender *snd = m->snd;
    struct gr_ctrl_response *r = m->resp;
    m->resp = NULL;
    if (snd && snd->running && m->completion && r) {
        r->request = m->req;
        r->request_free = m->req_free;
        m->req = NULL;
        m->completion->payload = r;
        m->completion->payload_free = gr_ctrl_response_free;
        m->completion->broker_id = m->to;
        gr_ctrl_events_put(snd->em, m->completion);
        m->completion = NULL;
    } else if (r) {
        gr_ctrl_response_free(r);
    }
    msg_drop(s, m);
}

void msg_lose_response(struct sim *s, struct smsg *m) {
    (void)s;
    if (m->resp && m->resp_free) m->resp_free(m->resp);
    m->resp = NULL;
    m->state = MSG_QUEUED; /* the send thread retries: the broker will see it again */
}

/* ======================================================================================
 * AlterPartition: partition leaders -> the controller
 * ====================================================================================== */

static void amsg_unlink(struct sim *s, struct amsg *a) {
    for (struct amsg **pp = &s->amsgs; *pp; pp = &(*pp)->next) {
        if (*pp == a) {
            *pp = a->next;
            s->n_amsgs--;
            return;
        }
    }
}

static void amsg_free(struct amsg *a) {
    gr_arena_free(&a->arena);
    free(a);
}

static void alter_send(struct sim *s, struct sbroker *b, struct sb_part *p, const int32_t *isr, int n, bool shrink) {
    struct amsg *a = gr_calloc(1, sizeof *a);
    a->id = ++s->next_msg_id;
    a->from = b->id;
    a->from_inc = b->incarnation;
    gr_arena_init(&a->arena);
    struct AlterPartitionRequest *rq = gr_proto_new(&a->arena, &gr_desc_AlterPartitionRequest);
    rq->BrokerId = b->id;
    rq->BrokerEpoch = gr_controller_broker_epoch(b->ctrl);
    rq->TopicsCount = 1;
    rq->Topics = gr_arena_alloc(&a->arena, sizeof *rq->Topics);
    rq->Topics[0].TopicName = gr_arena_strdup(&a->arena, p->topic);
    rq->Topics[0].PartitionsCount = 1;
    rq->Topics[0].Partitions = gr_arena_alloc(&a->arena, sizeof *rq->Topics[0].Partitions);
    struct AlterPartitionRequest_PartitionData *pd = &rq->Topics[0].Partitions[0];
    pd->PartitionIndex = p->partition;
    pd->LeaderEpoch = p->r_leader_epoch;
    /* Every version the brokers' sender may use (replication/alter_partition.c), by message id (no
     * draw from the seed's generator): v2+ names the topic by the id its log holds (TopicName
     * stays set for the simulation's own look-ups; the request is not encoded), and falls back
     * to v1 by name without one; v3 carries the sender's broker epoch, -1 for the others. */
    static const uint8_t no_id[16];
    a->version = (int16_t)(a->id % 4);
    if (a->version >= 2 && memcmp(p->r_topic_id, no_id, 16) == 0) a->version = 1;
    memcpy(rq->Topics[0].TopicId, p->r_topic_id, 16);
    if (a->version >= 3) {
        pd->NewIsrWithEpochsCount = n;
        pd->NewIsrWithEpochs = gr_arena_alloc(&a->arena, sizeof *pd->NewIsrWithEpochs * (size_t)(n + 1));
        for (int i = 0; i < n; i++) {
            pd->NewIsrWithEpochs[i].BrokerId = isr[i];
            pd->NewIsrWithEpochs[i].BrokerEpoch = isr[i] == b->id ? rq->BrokerEpoch : -1;
        }
    } else {
        pd->NewIsrCount = n;
        pd->NewIsr = gr_arena_alloc(&a->arena, sizeof(int32_t) * (size_t)(n + 1));
        memcpy(pd->NewIsr, isr, sizeof(int32_t) * (size_t)n);
    }
    pd->PartitionEpoch = p->r_zk_version;
    a->req = rq;
    p->alter_pending = true;
    a->next = NULL;
    struct amsg **pp = &s->amsgs;
    while (*pp) pp = &(*pp)->next;
    *pp = a;
    s->n_amsgs++;
    if (s->o.verbose)
        printf("    [sim] broker %d proposes ISR of %s-%d: %s to %d members (leader epoch %d, version %d)\n", b->id,
               p->topic, p->partition, shrink ? "shrink" : "expand", n, p->r_leader_epoch, p->r_zk_version);
}

bool alter_propose(struct sim *s, struct sbroker *b) {
    if (!b->alive || !b->ctrl) return false;
    int cand[64];
    int nc = 0;
    for (int i = 0; i < b->n_parts && nc < 64; i++) {
        struct sb_part *p = &b->parts[i];
        if (p->has_replica && p->r_leader == b->id && !p->alter_pending && p->r_n_isr > 0 &&
            !on_failed_dir(b, p->topic, p->partition))
            cand[nc++] = i;
    }
    if (nc == 0) return false;
    struct sb_part *p = &b->parts[cand[rng_below(&s->rng, (uint32_t)nc)]];
    int32_t isr[SIM_MAX_BROKERS + 1];
    int n = 0;
    /* shrink: drop a follower; expand: add a live assigned replica not in the ISR */
    int32_t add_c[SIM_MAX_BROKERS + 1];
    int na = 0;
    for (int i = 0; i < p->r_n_replicas; i++) {
        int32_t r = p->r_replicas[i];
        if (has_id(p->r_isr, p->r_n_isr, r)) continue;
        struct sbroker *rb = broker_by_id(s, r);
        if (rb && rb->alive && !on_failed_dir(rb, p->topic, p->partition)) add_c[na++] = r;
    }
    bool shrink = p->r_n_isr > 1 && (na == 0 || rng_chance(&s->rng, 1, 2));
    if (!shrink && na == 0) return false;
    if (shrink) {
        int32_t drop;
        do drop = p->r_isr[rng_below(&s->rng, (uint32_t)p->r_n_isr)];
        while (drop == b->id);
        for (int i = 0; i < p->r_n_isr; i++)
            if (p->r_isr[i] != drop) isr[n++] = p->r_isr[i];
    } else {
        for (int i = 0; i < p->r_n_isr; i++) isr[n++] = p->r_isr[i];
        isr[n++] = add_c[rng_below(&s->rng, (uint32_t)na)];
    }
    alter_send(s, b, p, isr, n, shrink);
    return true;
}

/* A live follower of p (led by b) that is outside the ISR and follows p's current leader epoch. */
static int32_t caught_up_follower(struct sim *s, struct sbroker *b, struct sb_part *p) {
    for (int i = 0; i < p->r_n_replicas; i++) {
        int32_t r = p->r_replicas[i];
        if (r == b->id || has_id(p->r_isr, p->r_n_isr, r)) continue;
        struct sbroker *rb = broker_by_id(s, r);
        if (!rb || !rb->alive || on_failed_dir(rb, p->topic, p->partition)) continue;
        struct sb_part *rp = part_find(rb, p->topic, p->partition, false);
        if (rp && rp->has_replica && rp->r_leader == b->id && rp->r_leader_epoch == p->r_leader_epoch) return r;
    }
    return -1;
}

static struct sb_part *expandable(struct sim *s, struct sbroker *b) {
    if (!b->alive || !b->ctrl) return NULL;
    /* only towards an active controller (else the leader retries later: time must move on) */
    struct sbroker *c = b->known_controller >= 0 ? broker_by_id(s, b->known_controller) : NULL;
    if (!c || !c->alive || !c->ctrl || !gr_controller_is_active(c->ctrl)) return NULL;
    for (int i = 0; i < b->n_parts; i++) {
        struct sb_part *p = &b->parts[i];
        if (p->has_replica && p->r_leader == b->id && !p->alter_pending && p->r_n_isr > 0 &&
            !on_failed_dir(b, p->topic, p->partition) && caught_up_follower(s, b, p) >= 0)
            return p;
    }
    return NULL;
}

bool alter_expand_possible(struct sim *s, struct sbroker *b) { return expandable(s, b) != NULL; }

bool alter_expand(struct sim *s, struct sbroker *b) {
    struct sb_part *p = expandable(s, b);
    if (!p) return false;
    int32_t isr[SIM_MAX_BROKERS + 1];
    int n = 0;
    for (int i = 0; i < p->r_n_isr && n < SIM_MAX_BROKERS; i++) isr[n++] = p->r_isr[i];
    isr[n++] = caught_up_follower(s, b, p);
    alter_send(s, b, p, isr, n, false);
    return true;
}

struct sbroker *amsg_target(struct sim *s, struct amsg *a) {
    struct sbroker *from = broker_by_id(s, a->from);
    if (!from || !from->alive || from->incarnation != a->from_inc || from->known_controller < 0) return NULL;
    struct sbroker *t = broker_by_id(s, from->known_controller);
    return t && t->alive ? t : NULL;
}

/* The controller's answer (on the controller's processing step, or when the event is dropped):
 * copied through the codec into the message's arena. */
static void amsg_respond(void *arg, const struct AlterPartitionResponse *resp) {
    struct amsg *a = arg;
    if (a->abandoned) {
        amsg_free(a);
        return;
    }
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    if (gr_proto_encode_body(GR_API_ALTER_PARTITION, true, a->version, resp, &w) == 0) {
        struct gr_rbuf r;
        gr_rbuf_init(&r, w.p, w.len);
        void *body = NULL;
        if (gr_proto_decode_body(GR_API_ALTER_PARTITION, true, a->version, &r, &a->arena, &body) == 0) a->resp = body;
    }
    gr_wbuf_free(&w);
    a->state = 2;
}

void amsg_deliver(struct sim *s, struct amsg *a) {
    struct sbroker *t = amsg_target(s, a);
    if (!t) return;
    struct gr_ctrl_alter_partition_payload *pl = gr_calloc(1, sizeof *pl);
    pl->request = a->req;
    pl->version = a->version;
    pl->respond = amsg_respond;
    pl->arg = a;
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_ALTER_PARTITION_RECEIVED);
    ev->broker_id = a->req->BrokerId;
    ev->broker_epoch = a->req->BrokerEpoch;
    ev->payload = pl;
    ev->payload_free = gr_ctrl_alter_partition_payload_free;
    a->state = 1;
    gr_ctrl_events_put(gr_controller_events(t->ctrl), ev);
}

void amsg_drop(struct sim *s, struct amsg *a) {
    amsg_unlink(s, a);
    struct sbroker *b = broker_by_id(s, a->from);
    const struct AlterPartitionRequest_PartitionData *pd = &a->req->Topics[0].Partitions[0];
    struct sb_part *p = b && b->alive && b->incarnation == a->from_inc
                            ? part_find(b, a->req->Topics[0].TopicName, pd->PartitionIndex, false)
                            : NULL;
    if (p) p->alter_pending = false;
    amsg_free(a);
}

void amsg_complete(struct sim *s, struct amsg *a) {
    amsg_unlink(s, a);
    struct sbroker *b = broker_by_id(s, a->from);
    const struct AlterPartitionResponse *r = a->resp;
    const struct AlterPartitionRequest_PartitionData *pd = &a->req->Topics[0].Partitions[0];
    struct sb_part *p = b && b->alive && b->incarnation == a->from_inc
                            ? part_find(b, a->req->Topics[0].TopicName, pd->PartitionIndex, false)
                            : NULL;
    if (p) {
        p->alter_pending = false;
        if (r && r->ErrorCode == GR_KERR_NONE && r->TopicsCount == 1 && r->Topics[0].PartitionsCount == 1) {
            const struct AlterPartitionResponse_PartitionData *rp = &r->Topics[0].Partitions[0];
            /* Kafka 2.7's Partition.handleAlterIsrResponse gives up on FENCED_LEADER_EPOCH and
             * stays pending until a LeaderAndIsr brings the new epoch (seed 15351: a leader of a
             * topic being deleted, which gets no LeaderAndIsr, re-proposed with its fenced epoch
             * forever). Kafka gives up on INVALID_UPDATE_VERSION too, but its AlterPartitionManager
             * never loses an answer, while this leader may (a dropped proposal): it retries. An
             * answer to a proposal of an earlier epoch is out of date and ignored, as Kafka's. */
            if (rp->ErrorCode == GR_KERR_FENCED_LEADER_EPOCH && pd->LeaderEpoch == p->r_leader_epoch)
                p->alter_pending = true;
            /* Kafka's leader applies the answer only for its current leader epoch */
            if (rp->ErrorCode == GR_KERR_NONE && rp->LeaderEpoch == p->r_leader_epoch && p->r_leader == b->id) {
                free(p->r_isr);
                p->r_n_isr = rp->IsrCount > 0 ? rp->IsrCount : 0;
                p->r_isr = dup_ids(rp->Isr, rp->IsrCount);
                p->r_zk_version = rp->PartitionEpoch;
            }
        }
    }
    if (s->o.verbose)
        printf("    [sim] AlterPartition #%" PRIu64 " (v%d) answered to broker %d: %s / %s\n", a->id, a->version,
               a->from, r ? gr_kerr_name(r->ErrorCode) : "undecodable",
               r && r->TopicsCount == 1 && r->Topics[0].PartitionsCount == 1
                   ? gr_kerr_name(r->Topics[0].Partitions[0].ErrorCode)
                   : "-");
    amsg_free(a);
}

/* Drops the AlterPartition messages of a dead incarnation (those held by a controller are freed when it
 * answers). */
static void amsgs_abandon(struct sim *s, struct sbroker *b) {
    struct amsg **pp = &s->amsgs;
    while (*pp) {
        struct amsg *a = *pp;
        if (a->from == b->id && a->from_inc == b->incarnation) {
            *pp = a->next;
            s->n_amsgs--;
            if (a->state == 1) a->abandoned = true;
            else amsg_free(a);
            continue;
        }
        pp = &a->next;
    }
}

/* ======================================================================================
 * Lifecycle
 * ====================================================================================== */

static bool hook_new_session(void *arg, struct gr_zsession *prev) {
    struct sbroker *b = arg;
    if (b->last_session == 0) return false;
    memset(prev, 0, sizeof *prev);
    prev->id = b->last_session;
    prev->passwd_len = 16; /* the model's passwords are derived from the id */
    for (int i = 0; i < 16; i++) prev->passwd[i] = (unsigned char)((prev->id * 31 + i * 7) & 0xff);
    return true;
}

static void hook_context_loaded(void *arg, struct gr_ctrl_context *ctx, const struct gr_ctrl_load_report *r) {
    struct sbroker *b = arg;
    inv_on_context_loaded(b->sim, b, ctx, r);
}

/* Frees the per-incarnation objects (controller first; the client must not deliver anymore). */
static void node_teardown(struct sim *s, struct sbroker *b) {
    amsgs_abandon(s, b);
    gr_config_change_listener_stop(b->ccl);
    b->ccl = NULL;
    if (b->snd) {
        channel_teardown(s, b->snd, -1);
        b->snd->dead = true;
        b->snd->running = false;
    }
    if (b->ctrl) gr_controller_free(b->ctrl);
    b->ctrl = NULL;
    if (b->kzk) gr_kzk_free(b->kzk);
    b->kzk = NULL;
    if (b->zc) gr_zkb_destroy(zm_backend(b->zc));
    b->zc = NULL;
    if (b->watches) gr_zk_watches_free(b->watches);
    b->watches = NULL;
    if (b->clock) gr_clock_free(b->clock);
    b->clock = NULL;
    /* orphans still name no sender; queued messages of this sender were dropped */
    free(b->snd);
    b->snd = NULL;
    broker_state_reset(b);
    b->alive = false;
    b->expire_pending = false;
}

bool node_start(struct sim *s, struct sbroker *b) {
    b->incarnation++;
    b->watches = gr_zk_watches_new();
    b->zc = zm_client_new(s->zm, SIM_SESSION_TIMEOUT_MS, gr_zk_watches_on_watch, gr_zk_watches_on_session,
                          b->watches);
    zm_client_set_user(b->zc, b);
    b->kzk = gr_kzk_new(zm_backend(b->zc));
    if (s->kzk_batch) gr_kzk_set_batch_size(b->kzk, s->kzk_batch);
    if (s->kzk_depth) gr_kzk_set_pipeline_depth(b->kzk, s->kzk_depth);
    if (b->no_stamps) gr_kzk_set_state_stamps(b->kzk, false);
    b->interrupt_next_write = b->expire_on_wait = false;
    int64_t prev_sid = b->cur_session;
    b->cur_session = zm_client_session(b->zc);
    b->last_session = 0;
    sim_note_session(s, b->cur_session, b->id, b->incarnation);
    int rc = gr_kzk_ensure_paths(b->kzk);
    int64_t epoch = -1;
    if (rc == 0) {
        /* The broker persisted its previous session id (most of the time) and kills it. */
        struct gr_zsession prev;
        bool have = prev_sid != 0 && rng_chance(&s->rng, 3, 4);
        if (have) {
            struct sbroker tmp = {.last_session = prev_sid};
            hook_new_session(&tmp, &prev);
        }
        rc = gr_kzk_register_broker(b->kzk, &b->info, &prev, have ? 1 : 0, &epoch);
    }
    if (rc != 0 || zm_client_state(b->zc) != ZMC_CONNECTED) {
        if (s->o.verbose) printf("    [sim] broker %d failed to start: %s\n", b->id, gr_kzk_strerror(rc));
        b->cur_session = prev_sid; /* the old session may still hold the registration */
        zm_crash(b->zc, true);
        node_teardown(s, b);
        return false;
    }
    b->registered_epoch = epoch;
    b->clock = vclock_new(s);
    b->snd = gr_calloc(1, sizeof *b->snd);
    b->snd->sim = s;
    b->snd->owner = b;
    broker_state_reset(b);
    struct gr_controller_config cfg = {
        .broker_id = b->id,
        .broker_info = &b->info,
        .broker_epoch = epoch,
        .kzk = b->kzk,
        .watches = b->watches,
        .clock = b->clock,
        .sender = &sim_sender_ops,
        .sender_ctx = b->snd,
        .metrics = NULL,
        .auto_leader_rebalance_enable = true,
        .leader_imbalance_check_interval_ms = 30000,
        .delete_topic_enable = !b->delete_disabled,
        .no_thread = true,
        .on_new_session = hook_new_session,
        .hook_arg = b,
        .standby_enable = s->o.standby && !b->no_stamps,
        .standby_refresh_ms = s->standby_refresh_ms ? s->standby_refresh_ms : 20000,
        .on_context_loaded = hook_context_loaded,
        .context_hook_arg = b,
        .topic_id_fn = sim_topic_id,
        .topic_id_arg = s,
    };
    b->ctrl = gr_controller_new(&cfg);
    b->alive = true;
    gr_controller_startup(b->ctrl);
    if (s->o.admin_flows) b->ccl = gr_config_change_listener_new(b->kzk, b->watches, b->ctrl);
    return true;
}

void node_crash(struct sim *s, struct sbroker *b, bool close_session) {
    if (!b->alive) return;
    zm_crash(b->zc, close_session);
    node_teardown(s, b);
}

void node_stop(struct sim *s, struct sbroker *b) {
    if (!b->alive) return;
    gr_controller_shutdown(b->ctrl);
    node_teardown(s, b); /* destroying the backend closes the session */
}

void node_release(struct sim *s, struct sbroker *b) {
    if (b->alive) {
        zm_crash(b->zc, true);
        node_teardown(s, b);
    }
    broker_state_reset(b);
    gr_kzk_broker_release(&b->info);
}
