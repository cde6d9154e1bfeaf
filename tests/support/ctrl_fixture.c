/* The controller state-machine test fixture (see ctrl_fixture.h). */
#include "support/ctrl_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "controller/flows.h"
#include "controller/request_batch.h"

struct sent sent[MAXSENT];
int n_sent;
char chan_log[512];

static void rs_startup(void *c, struct gr_ctrl_events *em) { (void)c, (void)em; }
static void rs_shutdown(void *c) { (void)c; }
static void rs_add(void *c, const struct gr_kzk_broker *b) {
    (void)c;
    snprintf(chan_log + strlen(chan_log), sizeof chan_log - strlen(chan_log), "+%d", b->id);
}
static void rs_remove(void *c, int32_t id) {
    (void)c;
    snprintf(chan_log + strlen(chan_log), sizeof chan_log - strlen(chan_log), "-%d", id);
}
static void rs_send(void *c, int32_t broker, int16_t api_key, int16_t ver, void *req, void (*req_free)(void *),
                    struct gr_ctrl_event *ev) {
    (void)c, (void)ver;
    if (n_sent == MAXSENT) abort();
    sent[n_sent++] = (struct sent){broker, api_key, req, req_free, ev};
}
const struct gr_ctrl_sender_ops rec_ops = {rs_startup, rs_shutdown, rs_add, rs_remove, rs_send, NULL};

void clear_sent(void) {
    for (int i = 0; i < n_sent; i++) {
        sent[i].req_free(sent[i].req);
        gr_ctrl_event_free(sent[i].ev);
    }
    n_sent = 0;
    chan_log[0] = 0;
}

int count_sent(int16_t api_key, int32_t broker) {
    int c = 0;
    for (int i = 0; i < n_sent; i++)
        if (sent[i].api_key == api_key && (broker < 0 || sent[i].broker == broker)) c++;
    return c;
}

/* The LeaderAndIsr partition state for t-p sent to broker, or NULL. */
const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *sent_lai(int32_t broker, const char *t, int32_t p) {
    for (int i = 0; i < n_sent; i++) {
        if (sent[i].api_key != GR_API_LEADER_AND_ISR || sent[i].broker != broker) continue;
        const struct LeaderAndIsrRequest *r = sent[i].req;
        for (int k = 0; k < r->TopicStatesCount; k++) {
            if (strcmp(r->TopicStates[k].TopicName, t) != 0) continue;
            for (int j = 0; j < r->TopicStates[k].PartitionStatesCount; j++)
                if (r->TopicStates[k].PartitionStates[j].PartitionIndex == p) return &r->TopicStates[k].PartitionStates[j];
        }
    }
    return NULL;
}

/* ======================= fixture ======================= */

struct memzk *zk;
struct gr_kzk *kzk;
struct gr_ctrl_context ctx;
struct gr_ctrl_sm sm;
struct gr_metrics *metrics;

struct gr_kzk_broker mkbroker(int32_t id, int64_t epoch) {
    static struct gr_kzk_endpoint eps[8];
    eps[id] = (struct gr_kzk_endpoint){.listener = (char *)"PLAINTEXT", .security_protocol = (char *)"PLAINTEXT",
                                       .host = (char *)"localhost", .port = 9090 + id};
    return (struct gr_kzk_broker){.id = id, .epoch = epoch, .jmx_port = -1, .n_endpoints = 1, .endpoints = &eps[id]};
}

void add_live(int32_t id, int64_t epoch) {
    struct gr_kzk_broker b = mkbroker(id, epoch);
    gr_ctrl_ctx_add_live_broker(&ctx, &b);
}

/* Creates /brokers/topics/<name> and puts the assignment into the context. */
void create_topic(const char *name, int np, const int32_t *reps, int rf) {
    struct gr_kzk_topic_assignment a = {.topic = (char *)name, .n_partitions = np};
    a.partitions = gr_calloc((size_t)np, sizeof *a.partitions);
    for (int i = 0; i < np; i++) {
        a.partitions[i].partition = i;
        a.partitions[i].n_replicas = rf;
        a.partitions[i].replicas = gr_malloc((size_t)rf * sizeof(int32_t));
        memcpy(a.partitions[i].replicas, reps + i * rf, (size_t)rf * sizeof(int32_t));
    }
    CHECK(gr_kzk_create_topic(kzk, name, &a, NULL) == 0);
    gr_ctrl_ctx_put_topic(&ctx, &a);
    a.topic = NULL;
    gr_kzk_topic_assignment_release(&a);
}

int read_state(const char *t, int32_t p, struct gr_kzk_leader_and_isr *out) {
    struct gr_kzk_tp tp = {(char *)t, p};
    struct gr_kzk_state_result r;
    memset(&r, 0, sizeof r);
    int rc = gr_kzk_get_partition_states(kzk, &tp, 1, &r);
    *out = r.lai;
    return rc ? rc : r.rc;
}

bool isr_is(const struct gr_kzk_leader_and_isr *l, const int32_t *want, int n) {
    if (l->n_isr != n) return false;
    for (int i = 0; i < n; i++)
        if (l->isr[i] != want[i]) return false;
    return true;
}

void setup(void) {
    zk = memzk_new(6000);
    kzk = gr_kzk_new(&zk->base);
    CHECK(memzk_create(zk, "/brokers", NULL, 0, 0, NULL) == 0);
    CHECK(gr_kzk_ensure_paths(kzk) == 0);
    CHECK(memzk_create(zk, "/controller_epoch", "0", 1, 0, NULL) == 0);
    for (int i = 1; i <= 2; i++) CHECK(memzk_set(zk, "/controller_epoch", "2", 1, -1, NULL) == 0);
    gr_ctrl_ctx_init(&ctx);
    ctx.epoch = 2;
    ctx.epoch_zk_version = 2;
    metrics = gr_metrics_new();
    memset(&sm, 0, sizeof sm);
    sm.controller_id = 1;
    sm.ctx = &ctx;
    sm.kzk = kzk;
    sm.sender = &rec_ops;
    sm.metrics = metrics;
    gr_ctrl_sm_init(&sm);
    add_live(1, 101);
    add_live(2, 102);
    add_live(3, 103);
}

void teardown(void) {
    clear_sent();
    gr_ctrl_sm_release(&sm);
    gr_ctrl_ctx_release(&ctx);
    gr_kzk_free(kzk);
    memzk_free(zk);
    gr_metrics_free(metrics);
}
