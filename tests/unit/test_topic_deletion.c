/* Topic deletion manager (Kafka 2.7's TopicDeletionManager) and the controller side of controlled
 * shutdown, over an in-memory ZooKeeper backend and a recording sender (the fixture of
 * tests/support/ctrl_fixture.h, shared with test_state_machines.c).
 *
 * Covered: a full deletion (Offline -> NonExistent partitions, UpdateMetadata leader -2,
 * StopReplica delete=false then delete=true with epoch -2, responses -> DeletionSuccessful,
 * completion deletes the three znodes and the context entry); a replica on a dead broker makes the
 * topic ineligible and the deletion resumes when the broker starts up; a StopReplica error fails
 * the replica (ineligible) and an explicit resume retries it; a whole-request error; a replica
 * that goes offline during deletion; delete.topic.enable=false and unknown topics (znodes
 * removed); failover init (ineligible when a replica is offline); the controller moving during
 * completion (nothing deleted); completion waits until every live broker answered the
 * UpdateMetadata with leader -2 (a failed broker stops holding it up; a broker away at completion
 * gets the removal at its next start-up); gauges and OfflinePartitionsCount; controlled shutdown (stale
 * epoch, unknown broker, leaders moved with the ControlledShutdown election, followers stopped
 * and removed from the ISR, RF=1 partitions and topics being deleted not listed as remaining). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "controller/context.h"
#include "controller/controlled_shutdown.h"
#include "controller/event_manager.h"
#include "controller/flows.h"
#include "controller/partition_sm.h"
#include "controller/replica_sm.h"
#include "controller/request_batch.h"
#include "controller/response.h"
#include "controller/sender.h"
#include "controller/states.h"
#include "controller/topic_deletion.h"
#include "zk/kzk.h"

#include "support/ctrl_fixture.h"

/* ======================= tests ======================= */

static void noop_free(void *p) { (void)p; }

/* Does a StopReplica to broker carry t-p with delete flag `del` (and, if epoch != 0, that epoch)? */
static bool sent_stop(int32_t broker, const char *t, int32_t p, bool del, int32_t epoch) {
    for (int i = 0; i < n_sent; i++) {
        if (sent[i].api_key != GR_API_STOP_REPLICA || sent[i].broker != broker || !sent[i].req) continue;
        const struct StopReplicaRequest *r = sent[i].req;
        for (int k = 0; k < r->TopicStatesCount; k++) {
            if (strcmp(r->TopicStates[k].TopicName, t) != 0) continue;
            for (int j = 0; j < r->TopicStates[k].PartitionStatesCount; j++) {
                const struct StopReplicaRequest_StopReplicaPartitionState *ps = &r->TopicStates[k].PartitionStates[j];
                if (ps->PartitionIndex == p && ps->DeletePartition == del && (epoch == 0 || ps->LeaderEpoch == epoch))
                    return true;
            }
        }
    }
    return false;
}

/* The UpdateMetadata leader sent to broker for t-p (the last one), or 99 if none. */
static int32_t sent_um_leader(int32_t broker, const char *t, int32_t p) {
    int32_t leader = 99;
    for (int i = 0; i < n_sent; i++) {
        if (sent[i].api_key != GR_API_UPDATE_METADATA || sent[i].broker != broker || !sent[i].req) continue;
        const struct UpdateMetadataRequest *r = sent[i].req;
        for (int k = 0; k < r->TopicStatesCount; k++) {
            if (strcmp(r->TopicStates[k].TopicName, t) != 0) continue;
            for (int j = 0; j < r->TopicStates[k].PartitionStatesCount; j++)
                if (r->TopicStates[k].PartitionStates[j].PartitionIndex == p)
                    leader = r->TopicStates[k].PartitionStates[j].Leader;
        }
    }
    return leader;
}

/* Answers every StopReplica(delete=true) sent to broker: partition errors from err_of(p) (or
 * a top-level error with no partitions when top != NONE). Returns the number answered. */
static int answer_stop(struct gr_topic_deletion *td, int32_t broker, int16_t (*err_of)(int32_t p), int16_t top) {
    int answered = 0;
    for (int i = 0; i < n_sent; i++) {
        if (sent[i].api_key != GR_API_STOP_REPLICA || sent[i].broker != broker || !sent[i].ev) continue;
        struct gr_ctrl_event *ev = sent[i].ev;
        const struct StopReplicaRequest *rq = sent[i].req;
        struct gr_ctrl_response *r = gr_ctrl_response_new();
        r->api_key = GR_API_STOP_REPLICA;
        r->api_version = 3;
        r->broker_id = broker;
        r->request = sent[i].req;
        r->request_free = sent[i].req_free;
        sent[i].req = NULL;
        sent[i].req_free = noop_free;
        sent[i].ev = NULL;
        struct StopReplicaResponse *b = gr_arena_alloc(&r->arena, sizeof *b);
        b->ErrorCode = top;
        int n = 0;
        for (int k = 0; k < rq->TopicStatesCount; k++) n += rq->TopicStates[k].PartitionStatesCount;
        b->PartitionErrors = gr_arena_alloc(&r->arena, sizeof *b->PartitionErrors * (size_t)(n ? n : 1));
        b->PartitionErrorsCount = 0;
        if (top == GR_KERR_NONE)
            for (int k = 0; k < rq->TopicStatesCount; k++)
                for (int j = 0; j < rq->TopicStates[k].PartitionStatesCount; j++) {
                    struct StopReplicaResponse_StopReplicaPartitionError *pe = &b->PartitionErrors[b->PartitionErrorsCount++];
                    pe->TopicName = rq->TopicStates[k].TopicName;
                    pe->PartitionIndex = rq->TopicStates[k].PartitionStates[j].PartitionIndex;
                    pe->ErrorCode = err_of ? err_of(pe->PartitionIndex) : GR_KERR_NONE;
                }
        r->body = b;
        ev->payload = r;
        ev->payload_free = gr_ctrl_response_free;
        CHECK(gr_td_process_stop_replica_response(td, ev) == 0);
        gr_ctrl_event_free(ev);
        answered++;
    }
    return answered;
}

/* Answers every UpdateMetadata sent to broker (error err; broker_epoch, if not 0, replaces the
 * request's). Returns the number answered. */
static int answer_um(struct gr_topic_deletion *td, int32_t broker, int16_t err) {
    int answered = 0;
    for (int i = 0; i < n_sent; i++) {
        if (sent[i].api_key != GR_API_UPDATE_METADATA || sent[i].broker != broker || !sent[i].ev) continue;
        struct gr_ctrl_event *ev = sent[i].ev;
        struct gr_ctrl_response *r = gr_ctrl_response_new();
        r->api_key = GR_API_UPDATE_METADATA;
        r->api_version = GR_CTRL_UPDATE_METADATA_VERSION;
        r->broker_id = broker;
        r->request = sent[i].req;
        r->request_free = sent[i].req_free;
        sent[i].req = NULL;
        sent[i].req_free = noop_free;
        sent[i].ev = NULL;
        struct UpdateMetadataResponse *b = gr_arena_alloc(&r->arena, sizeof *b);
        b->ErrorCode = err;
        r->body = b;
        ev->payload = r;
        ev->payload_free = gr_ctrl_response_free;
        CHECK(gr_td_process_update_metadata_response(td, ev) == 0);
        gr_ctrl_event_free(ev);
        answered++;
    }
    return answered;
}

static bool znode(const char *path) {
    return memzk_find(zk, path) >= 0;
}

static void request_deletion(const char *t) {
    char p[256];
    snprintf(p, sizeof p, "/admin/delete_topics/%s", t);
    CHECK(memzk_create(zk, p, NULL, 0, 0, NULL) == 0);
}

/* t: 2 partitions on [1,2,3] / [2,3,1], online */
static void make_t(void) {
    int32_t reps[] = {1, 2, 3, 2, 3, 1};
    create_topic("t", 2, reps, 3);
    struct gr_kzk_tp tps[] = {{(char *)"t", 0}, {(char *)"t", 1}};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, tps, 2) == 0);
    struct gr_kzk_config cfg = {0};
    gr_kzk_config_set(&cfg, "retention.ms", "1000");
    CHECK(gr_kzk_set_entity_config(kzk, "topics", "t", &cfg) == 0);
    gr_kzk_config_release(&cfg);
    clear_sent();
}

static void test_full_deletion(void) {
    setup();
    struct gr_topic_deletion *td = gr_td_new(&sm, NULL, true);
    sm.hooks = gr_td_flow_hooks(td);
    make_t();
    CHECK(gr_td_init(td) == 0);
    request_deletion("t");
    CHECK(gr_td_process_topic_deletion(td) == 0);
    CHECK(gr_ctrl_topic_queued_for_deletion(&ctx, "t") && gr_td_deletion_started(td, "t"));
    struct gr_ctrl_partition *p0 = gr_ctrl_ctx_partition(&ctx, "t", 0);
    CHECK(p0->state == GR_PS_NONEXISTENT);
    for (int b = 1; b <= 3; b++) {
        CHECK(sent_um_leader(b, "t", 0) == GR_LEADER_DURING_DELETE && sent_um_leader(b, "t", 1) == GR_LEADER_DURING_DELETE);
        CHECK(sent_stop(b, "t", 0, false, 0) && sent_stop(b, "t", 1, false, 0));
        CHECK(sent_stop(b, "t", 0, true, GR_EPOCH_DURING_DELETE) && sent_stop(b, "t", 1, true, GR_EPOCH_DURING_DELETE));
        CHECK(gr_ctrl_replica_state_get(p0, b) == GR_RS_DELETION_STARTED);
    }
    CHECK(count_sent(GR_API_LEADER_AND_ISR, -1) == 0); /* no LeaderAndIsr for a topic being deleted */
    struct gr_td_counts c;
    gr_td_counts(td, &c);
    CHECK(c.topics_to_delete == 1 && c.replicas_to_delete == 6 && c.topics_ineligible == 0 && c.replicas_ineligible == 0);
    CHECK(answer_stop(td, 1, NULL, GR_KERR_NONE) == 1);
    CHECK(gr_ctrl_replica_state_get(p0, 1) == GR_RS_DELETION_SUCCESSFUL);
    gr_td_counts(td, &c);
    CHECK(c.replicas_to_delete == 4);
    CHECK(answer_stop(td, 2, NULL, GR_KERR_NONE) == 1);
    CHECK(gr_ctrl_ctx_topic(&ctx, "t") && znode("/brokers/topics/t"));
    CHECK(answer_stop(td, 3, NULL, GR_KERR_NONE) == 1);
    /* every replica is deleted, but no broker has confirmed it stopped serving the topic: a
     * completion now would lose the removal for good if this controller resigned before the
     * UpdateMetadata arrived (simulation seeds 11275, 12754) */
    CHECK(gr_ctrl_ctx_topic(&ctx, "t") && znode("/brokers/topics/t") && znode("/admin/delete_topics/t"));
    CHECK(answer_um(td, 1, GR_KERR_NONE) >= 1 && answer_um(td, 2, GR_KERR_STALE_BROKER_EPOCH) >= 1);
    CHECK(gr_ctrl_ctx_topic(&ctx, "t")); /* broker 2 was fenced: it still owes the removal */
    /* broker 2 fails: it no longer holds the deletion up */
    gr_ctrl_ctx_remove_live_broker(&ctx, 2);
    int32_t two[] = {2};
    CHECK(gr_ctrl_on_broker_failure(&sm, two, 1) == 0);
    CHECK(gr_ctrl_ctx_topic(&ctx, "t"));
    CHECK(answer_um(td, 3, GR_KERR_NONE) >= 1);
    /* complete */
    CHECK(!gr_ctrl_ctx_topic(&ctx, "t"));
    CHECK(!znode("/brokers/topics/t") && !znode("/brokers/topics/t/partitions/0/state"));
    CHECK(!znode("/config/topics/t") && !znode("/admin/delete_topics/t"));
    CHECK(!gr_ctrl_topic_queued_for_deletion(&ctx, "t") && !gr_td_deletion_started(td, "t"));
    gr_td_counts(td, &c);
    CHECK(c.topics_to_delete == 0 && c.replicas_to_delete == 0);
    /* broker 2 was away at completion: its start-up brings the removal (leader -2 for both) */
    clear_sent();
    add_live(2, 202);
    CHECK(gr_ctrl_on_broker_startup(&sm, two, 1) == 0);
    CHECK(sent_um_leader(2, "t", 0) == GR_LEADER_DURING_DELETE && sent_um_leader(2, "t", 1) == GR_LEADER_DURING_DELETE);
    CHECK(sent_um_leader(1, "t", 0) == 99);
    gr_td_free(td);
    teardown();
}

static void test_dead_replica_then_startup(void) {
    setup();
    struct gr_topic_deletion *td = gr_td_new(&sm, NULL, true);
    sm.hooks = gr_td_flow_hooks(td);
    make_t();
    CHECK(gr_td_init(td) == 0);
    gr_ctrl_ctx_remove_live_broker(&ctx, 3);
    int32_t dead[] = {3};
    CHECK(gr_ctrl_on_broker_failure(&sm, dead, 1) == 0);
    clear_sent();
    request_deletion("t");
    CHECK(gr_td_process_topic_deletion(td) == 0);
    struct gr_ctrl_partition *p0 = gr_ctrl_ctx_partition(&ctx, "t", 0);
    CHECK(gr_td_topic_ineligible(td, "t"));
    CHECK(gr_ctrl_replica_state_get(p0, 3) == GR_RS_DELETION_INELIGIBLE);
    CHECK(!sent_stop(3, "t", 0, true, 0) && sent_stop(1, "t", 0, true, GR_EPOCH_DURING_DELETE));
    struct gr_td_counts c;
    gr_td_counts(td, &c);
    CHECK(c.topics_ineligible == 1 && c.replicas_ineligible == 2);
    CHECK(answer_stop(td, 1, NULL, GR_KERR_NONE) == 1 && answer_stop(td, 2, NULL, GR_KERR_NONE) == 1);
    CHECK(gr_ctrl_ctx_topic(&ctx, "t") && znode("/admin/delete_topics/t"));
    /* Kafka's retry moved the dead replicas back to Offline; the topic stays halted */
    CHECK(gr_ctrl_replica_state_get(p0, 3) == GR_RS_OFFLINE && gr_td_topic_ineligible(td, "t"));
    clear_sent();
    /* broker 3 returns: deletion resumes for it only */
    add_live(3, 303);
    CHECK(gr_ctrl_on_broker_startup(&sm, dead, 1) == 0);
    CHECK(!gr_td_topic_ineligible(td, "t"));
    CHECK(sent_stop(3, "t", 0, true, GR_EPOCH_DURING_DELETE) && sent_stop(3, "t", 1, true, GR_EPOCH_DURING_DELETE));
    CHECK(!sent_stop(1, "t", 0, true, 0));
    CHECK(answer_stop(td, 3, NULL, GR_KERR_NONE) == 1);
    for (int b = 1; b <= 3; b++) answer_um(td, b, GR_KERR_NONE);
    CHECK(!gr_ctrl_ctx_topic(&ctx, "t") && !znode("/brokers/topics/t") && !znode("/admin/delete_topics/t"));
    gr_td_free(td);
    teardown();
}

static int16_t storage_error_on_0(int32_t p) { return p == 0 ? GR_KERR_KAFKA_STORAGE_ERROR : GR_KERR_NONE; }

static void test_errors_and_offline_during_deletion(void) {
    setup();
    struct gr_topic_deletion *td = gr_td_new(&sm, NULL, true);
    sm.hooks = gr_td_flow_hooks(td);
    make_t();
    CHECK(gr_td_init(td) == 0);
    request_deletion("t");
    CHECK(gr_td_process_topic_deletion(td) == 0);
    struct gr_ctrl_partition *p0 = gr_ctrl_ctx_partition(&ctx, "t", 0), *p1 = gr_ctrl_ctx_partition(&ctx, "t", 1);
    CHECK(answer_stop(td, 1, storage_error_on_0, GR_KERR_NONE) == 1);
    CHECK(gr_ctrl_replica_state_get(p0, 1) == GR_RS_DELETION_INELIGIBLE);
    CHECK(gr_ctrl_replica_state_get(p1, 1) == GR_RS_DELETION_SUCCESSFUL);
    CHECK(gr_td_topic_ineligible(td, "t"));
    /* a whole-request error from broker 2 fails both of its replicas */
    CHECK(answer_stop(td, 2, NULL, GR_KERR_STALE_BROKER_EPOCH) == 1);
    CHECK(gr_ctrl_replica_state_get(p0, 2) == GR_RS_DELETION_INELIGIBLE && gr_ctrl_replica_state_get(p1, 2) == GR_RS_DELETION_INELIGIBLE);
    /* broker 3 dies while its replicas are DeletionStarted: they fail too; with nothing Started
     * any more, Kafka's retry moves every Ineligible replica back to Offline (topic still halted) */
    gr_ctrl_ctx_remove_live_broker(&ctx, 3);
    int32_t dead[] = {3};
    CHECK(gr_ctrl_on_broker_failure(&sm, dead, 1) == 0);
    CHECK(gr_ctrl_replica_state_get(p0, 3) == GR_RS_OFFLINE && gr_ctrl_replica_state_get(p0, 2) == GR_RS_OFFLINE);
    CHECK(gr_ctrl_replica_state_get(p1, 1) == GR_RS_DELETION_SUCCESSFUL && gr_td_topic_ineligible(td, "t"));
    add_live(3, 333);
    clear_sent();
    /* resumeDeletionForTopics (what broker start-up or a finished reassignment does) retries */
    const char *topics[] = {"t"};
    CHECK(gr_td_resume_for_topics(td, topics, 1) == 0);
    CHECK(sent_stop(1, "t", 0, true, 0) && !sent_stop(1, "t", 1, true, 0));
    CHECK(sent_stop(2, "t", 0, true, 0) && sent_stop(2, "t", 1, true, 0) && sent_stop(3, "t", 1, true, 0));
    for (int b = 1; b <= 3; b++) CHECK(answer_stop(td, b, NULL, GR_KERR_NONE) == 1);
    for (int b = 1; b <= 3; b++) answer_um(td, b, GR_KERR_NONE);
    CHECK(!gr_ctrl_ctx_topic(&ctx, "t") && !znode("/brokers/topics/t"));
    gr_td_free(td);
    teardown();
}

static void test_disabled_unknown_and_failover(void) {
    setup();
    struct gr_topic_deletion *off = gr_td_new(&sm, NULL, false);
    make_t();
    request_deletion("t");
    request_deletion("nosuch");
    CHECK(gr_td_process_topic_deletion(off) == 0);
    CHECK(!znode("/admin/delete_topics/t") && !znode("/admin/delete_topics/nosuch"));
    CHECK(!gr_ctrl_topic_queued_for_deletion(&ctx, "t") && gr_ctrl_ctx_topic(&ctx, "t") && znode("/brokers/topics/t"));
    CHECK(count_sent(GR_API_STOP_REPLICA, -1) == 0);
    request_deletion("t");
    CHECK(gr_td_init(off) == 0 && !znode("/admin/delete_topics/t")); /* failover: removed too */
    gr_td_free(off);

    /* enabled: an unknown topic's znode is removed; failover with an offline replica */
    struct gr_topic_deletion *td = gr_td_new(&sm, NULL, true);
    sm.hooks = gr_td_flow_hooks(td);
    request_deletion("nosuch");
    CHECK(gr_td_process_topic_deletion(td) == 0 && !znode("/admin/delete_topics/nosuch"));
    request_deletion("t");
    gr_ctrl_ctx_remove_live_broker(&ctx, 2);
    CHECK(gr_td_init(td) == 0);
    CHECK(gr_ctrl_topic_queued_for_deletion(&ctx, "t") && gr_td_topic_ineligible(td, "t"));
    CHECK(gr_td_try(td) == 0);
    CHECK(!gr_td_deletion_started(td, "t")); /* ineligible: nothing started */
    /* the controller moves before completion: guarded deletes fail, nothing is removed */
    add_live(2, 222);
    int32_t back[] = {2};
    CHECK(gr_ctrl_on_broker_startup(&sm, back, 1) == 0);
    CHECK(gr_td_deletion_started(td, "t"));
    CHECK(answer_stop(td, 1, NULL, GR_KERR_NONE) == 1 && answer_stop(td, 2, NULL, GR_KERR_NONE) == 1);
    for (int b = 1; b <= 3; b++) answer_um(td, b, GR_KERR_NONE);
    CHECK(memzk_set(zk, "/controller_epoch", "3", 1, -1, NULL) == 0); /* another controller */
    int answered = 0;
    for (int i = 0; i < n_sent; i++) {
        if (sent[i].api_key != GR_API_STOP_REPLICA || sent[i].broker != 3 || !sent[i].ev) continue;
        struct gr_ctrl_event *ev = sent[i].ev;
        struct gr_ctrl_response *r = gr_ctrl_response_new();
        const struct StopReplicaRequest *rq = sent[i].req;
        r->api_key = GR_API_STOP_REPLICA;
        r->request = sent[i].req;
        r->request_free = sent[i].req_free;
        sent[i].req = NULL;
        sent[i].req_free = noop_free;
        sent[i].ev = NULL;
        struct StopReplicaResponse *b = gr_arena_alloc(&r->arena, sizeof *b);
        b->PartitionErrors = gr_arena_alloc(&r->arena, 2 * sizeof *b->PartitionErrors);
        for (int j = 0; j < rq->TopicStates[0].PartitionStatesCount && j < 2; j++) {
            b->PartitionErrors[j].TopicName = rq->TopicStates[0].TopicName;
            b->PartitionErrors[j].PartitionIndex = rq->TopicStates[0].PartitionStates[j].PartitionIndex;
        }
        b->PartitionErrorsCount = rq->TopicStates[0].PartitionStatesCount;
        r->body = b;
        ev->payload = r;
        ev->payload_free = gr_ctrl_response_free;
        CHECK(gr_td_process_stop_replica_response(td, ev) == GR_ECONTROLLER_MOVED);
        gr_ctrl_event_free(ev);
        answered++;
    }
    CHECK(answered == 1);
    CHECK(znode("/brokers/topics/t") && znode("/admin/delete_topics/t") && znode("/config/topics/t"));
    gr_td_free(td);
    teardown();
}

static void test_offline_partition_count(void) {
    setup();
    struct gr_topic_deletion *td = gr_td_new(&sm, NULL, true);
    sm.hooks = gr_td_flow_hooks(td);
    int32_t one[] = {3};
    create_topic("o", 1, one, 1);
    struct gr_kzk_tp tp = {(char *)"o", 0};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, &tp, 1) == 0);
    CHECK(gr_td_offline_partition_count(td) == 0);
    gr_ctrl_ctx_remove_live_broker(&ctx, 3);
    int32_t dead[] = {3};
    CHECK(gr_ctrl_on_broker_failure(&sm, dead, 1) == 0);
    CHECK(gr_td_offline_partition_count(td) == 1);
    /* once its deletion starts the partition no longer counts */
    request_deletion("o");
    CHECK(gr_td_process_topic_deletion(td) == 0);
    CHECK(gr_td_deletion_started(td, "o") && gr_td_offline_partition_count(td) == 0);
    gr_td_free(td);
    teardown();
}

static int cs_calls;
static int16_t cs_err;
static int cs_n;
static void cs_respond(void *arg, int16_t error, const struct gr_kzk_tp *rem, int n) {
    (void)arg, (void)rem;
    cs_calls++;
    cs_err = error;
    cs_n = n;
}

static void test_controlled_shutdown(void) {
    setup();
    /* a: [2,1,3] led by 2; b: [1,2,3] followed by 2; s: [2] (RF 1) led by 2 */
    int32_t a[] = {2, 1, 3}, b[] = {1, 2, 3}, s1[] = {2};
    create_topic("a", 1, a, 3);
    create_topic("b", 1, b, 3);
    create_topic("s", 1, s1, 1);
    struct gr_kzk_tp tps[] = {{(char *)"a", 0}, {(char *)"b", 0}, {(char *)"s", 0}};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, tps, 3) == 0);
    clear_sent();
    struct gr_ctrl_tp_list rem;
    int rc;
    CHECK(gr_ctrl_do_controlled_shutdown(&sm, 2, 101, &rem, &rc) == GR_KERR_STALE_BROKER_EPOCH && rc == 0);
    CHECK(gr_ctrl_do_controlled_shutdown(&sm, 9, -1, &rem, &rc) == GR_KERR_BROKER_NOT_AVAILABLE);
    CHECK(!gr_ctrl_broker_shutting_down(&ctx, 2));
    CHECK(gr_ctrl_do_controlled_shutdown(&sm, 2, 102, &rem, &rc) == GR_KERR_NONE && rc == 0);
    CHECK(gr_ctrl_broker_shutting_down(&ctx, 2));
    struct gr_ctrl_partition *pa = gr_ctrl_ctx_partition(&ctx, "a", 0), *pb = gr_ctrl_ctx_partition(&ctx, "b", 0);
    int32_t w13[] = {1, 3};
    CHECK(pa->lai.leader == 1 && isr_is(&pa->lai, w13, 2) && pa->lai.leader_epoch == 1);
    CHECK(sent_lai(2, "a", 0) && sent_lai(2, "a", 0)->Leader == 1); /* shutting-down replicas are told too */
    CHECK(sent_stop(2, "b", 0, false, 0) && isr_is(&pb->lai, w13, 2) && pb->lai.leader == 1);
    CHECK(gr_ctrl_replica_state_get(pb, 2) == GR_RS_OFFLINE);
    /* partitionLeadersOnBroker: s still led by 2 but single-replica, so not listed (listing it
     * made the broker exhaust its retries and shut down uncleanly) */
    CHECK(gr_ctrl_ctx_partition(&ctx, "s", 0)->lai.leader == 2);
    CHECK(rem.n == 0);
    gr_ctrl_tp_list_free(&rem);
    /* nor a topic queued for deletion; a multi-replica partition it leads is */
    struct gr_ctrl_tp_list led = {0};
    pa->lai.leader = 2;
    gr_ctrl_partition_leaders_on_broker(&ctx, 2, &led);
    CHECK(led.n == 1 && strcmp(led.v[0].topic, "a") == 0);
    led.n = 0;
    gr_ctrl_ctx_queue_deletion(&ctx, "a");
    gr_ctrl_partition_leaders_on_broker(&ctx, 2, &led);
    CHECK(led.n == 0);
    gr_ctrl_tp_list_free(&led);
    gr_ctrl_ctx_clear_deletions(&ctx);
    pa->lai.leader = 1;
    /* the event path: answered once; preempted/dropped events answer NOT_CONTROLLER */
    struct gr_ctrl_cs_payload *pl = gr_calloc(1, sizeof *pl);
    pl->respond = cs_respond;
    struct gr_ctrl_event *ev = gr_ctrl_cs_event_new(2, -1, pl);
    CHECK(gr_ctrl_cs_complete(&sm, ev) == 0);
    CHECK(cs_calls == 1 && cs_err == GR_KERR_NONE && cs_n == 0);
    gr_ctrl_event_free(ev);
    CHECK(cs_calls == 1);
    pl = gr_calloc(1, sizeof *pl);
    pl->respond = cs_respond;
    ev = gr_ctrl_cs_event_new(2, -1, pl);
    ev->preempt(ev);
    CHECK(cs_calls == 2 && cs_err == GR_KERR_NOT_CONTROLLER);
    gr_ctrl_event_free(ev);
    pl = gr_calloc(1, sizeof *pl);
    pl->respond = cs_respond;
    gr_ctrl_event_free(gr_ctrl_cs_event_new(2, -1, pl));
    CHECK(cs_calls == 3 && cs_err == GR_KERR_NOT_CONTROLLER);
    teardown();
}

/* The controller answers a ControlledShutdown before it writes the per-partition state-change
 * lines of the event (at 100k partitions ~100k lines, 0.3-0.4 s the broker waited for): at the
 * answer the lines are held, after the event they are in the log with their usual contents. */
static char *read_file(const char *path) {
    gr_log_flush(); /* INFO lines of a burst are buffered (common/log.h) */
    FILE *f = fopen(path, "r");
    if (!f) return gr_strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = gr_malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = 0;
    fclose(f);
    return s;
}

static char g_cs_log[256];
static int cs_lines_at_answer = -1;
static void cs_respond_look(void *arg, int16_t error, const struct gr_kzk_tp *rem, int n) {
    (void)arg, (void)rem, (void)n, (void)error;
    char *log = read_file(g_cs_log);
    cs_lines_at_answer = (strstr(log, "Changed partition a-0 from OnlinePartition to OnlinePartition") != NULL) +
                         (strstr(log, "after removing replica 2 from the ISR") != NULL);
    free(log);
}

static void test_controlled_shutdown_answers_before_lines(void) {
    setup();
    int32_t a[] = {2, 1, 3}, b[] = {1, 2, 3};
    create_topic("a", 1, a, 3);
    create_topic("b", 1, b, 3);
    struct gr_kzk_tp tps[] = {{(char *)"a", 0}, {(char *)"b", 0}};
    CHECK(gr_ctrl_on_new_partition_creation(&sm, tps, 2) == 0);
    snprintf(g_cs_log, sizeof g_cs_log, "/tmp/test_topic_deletion_cs_%d.log", (int)getpid());
    unlink(g_cs_log);
    CHECK(gr_log_open(g_cs_log) == 0);
    struct gr_ctrl_cs_payload *pl = gr_calloc(1, sizeof *pl);
    pl->respond = cs_respond_look;
    struct gr_ctrl_event *ev = gr_ctrl_cs_event_new(2, -1, pl);
    CHECK(gr_ctrl_cs_complete(&sm, ev) == 0);
    gr_ctrl_event_free(ev);
    char *log = read_file(g_cs_log);
    gr_log_open("/dev/stderr");
    unlink(g_cs_log);
    CHECK(cs_lines_at_answer == 0);
    CHECK(strstr(log, "[Controller id=1 epoch=") != NULL);
    CHECK(strstr(log, "Changed partition a-0 from OnlinePartition to OnlinePartition with state "
                      "LeaderAndIsr(leader=1, leaderEpoch=1, isr=1,3, zkVersion=1)") != NULL);
    CHECK(strstr(log, "Partition b-0 state changed to (Leader:1,ISR:1,3,LeaderEpoch:1,ControllerEpoch:") != NULL);
    CHECK(strstr(log, "after removing replica 2 from the ISR as part of transition to OfflineReplica") != NULL);
    CHECK(gr_ctrl_batch_pending_log(sm.batch) == 0);
    free(log);
    teardown();
}

/* Seed 535: the answer to a LeaderAndIsr sent while a reassignment added broker 4 arrives
 * (KAFKA_STORAGE_ERROR) after the reassignment was cancelled and the topic queued for deletion.
 * The replica is no longer assigned: the deletion must not be halted for it (nothing would ever
 * resume it, as no start-up of broker 4 concerns the topic). */
static void test_late_failure_of_unassigned_replica(void) {
    setup();
    struct gr_topic_deletion *td = gr_td_new(&sm, NULL, true);
    sm.hooks = gr_td_flow_hooks(td);
    make_t();
    CHECK(gr_td_init(td) == 0);
    request_deletion("t");
    CHECK(gr_td_process_topic_deletion(td) == 0);
    struct gr_ctrl_replica gone = {"t", 0, 4};
    CHECK(gr_td_fail_replica_deletion(td, &gone, 1) == 0);
    CHECK(!gr_td_topic_ineligible(td, "t"));
    for (int b = 1; b <= 3; b++) CHECK(answer_stop(td, b, NULL, GR_KERR_NONE) == 1);
    for (int b = 1; b <= 3; b++) answer_um(td, b, GR_KERR_NONE);
    CHECK(!gr_ctrl_ctx_topic(&ctx, "t") && !znode("/brokers/topics/t"));
    gr_td_free(td);
    teardown();
}

int main(void) {
    test_full_deletion();
    test_dead_replica_then_startup();
    test_errors_and_offline_during_deletion();
    test_disabled_unknown_and_failover();
    test_offline_partition_count();
    test_controlled_shutdown();
    test_controlled_shutdown_answers_before_lines();
    test_late_failure_of_unassigned_replica();
    if (test_failures) {
        fprintf(stderr, "test_topic_deletion: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_topic_deletion: ok\n");
    return 0;
}
