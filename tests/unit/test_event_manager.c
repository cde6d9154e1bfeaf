/* Controller event manager: FIFO order, clear_and_put with preemption, waiting, the event
 * thread, close, metrics, and the virtual-clock seam. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/metrics.h"
#include "common/util.h"
#include "controller/clock.h"
#include "controller/event_manager.h"
#include "support/check.h"

/* ---- a virtual clock ---- */
struct fake_clock {
    struct gr_clock base;
    int64_t now;
    int n_scheduled;
    struct gr_ctrl_event *pending[16];
    struct gr_ctrl_events *pending_em[16];
    int64_t due[16];
};
static int64_t fc_now(struct gr_clock *c) { return ((struct fake_clock *)c)->now; }
static uint64_t fc_schedule(struct gr_clock *c, int64_t delay, struct gr_ctrl_events *em, struct gr_ctrl_event *ev) {
    struct fake_clock *f = (struct fake_clock *)c;
    int i = f->n_scheduled++;
    f->pending[i] = ev;
    f->pending_em[i] = em;
    f->due[i] = f->now + delay;
    return (uint64_t)i + 1;
}
static void fc_cancel(struct gr_clock *c, uint64_t id) {
    struct fake_clock *f = (struct fake_clock *)c;
    gr_ctrl_event_free(f->pending[id - 1]);
    f->pending[id - 1] = NULL;
}
static void fc_free(struct gr_clock *c) { (void)c; }
static const struct gr_clock_ops fc_ops = {fc_now, fc_schedule, fc_cancel, fc_free};
/* Advances time and fires due timers. */
static void fc_advance(struct fake_clock *f, int64_t ms) {
    f->now += ms;
    for (int i = 0; i < f->n_scheduled; i++) {
        if (f->pending[i] && f->due[i] <= f->now) {
            gr_ctrl_events_put(f->pending_em[i], f->pending[i]);
            f->pending[i] = NULL;
        }
    }
}

/* ---- a recording processor ---- */
struct recorder {
    pthread_mutex_t mu;
    int processed[256];
    int n_processed;
    int preempted[256];
    int n_preempted;
    _Atomic int gate_seq;  /* thread tests: processing this event blocks until the gate opens */
    _Atomic int in_gate;   /* set while the event thread waits at the gate */
    _Atomic int gate_open;
};

static void rec_process(void *ctx, struct gr_ctrl_event *ev) {
    struct recorder *r = ctx;
    if (atomic_load(&r->gate_seq) && ev->partition == atomic_load(&r->gate_seq)) {
        atomic_store(&r->in_gate, 1);
        while (!atomic_load(&r->gate_open)) usleep(1000);
    }
    pthread_mutex_lock(&r->mu);
    if (r->n_processed < 256) r->processed[r->n_processed++] = ev->partition;
    pthread_mutex_unlock(&r->mu);
}

static void rec_preempt(void *ctx, struct gr_ctrl_event *ev) {
    struct recorder *r = ctx;
    pthread_mutex_lock(&r->mu);
    if (r->n_preempted < 256) r->preempted[r->n_preempted++] = ev->partition;
    pthread_mutex_unlock(&r->mu);
    if (ev->preempt) ev->preempt(ev);
}

static int hook_calls;
static void count_preempt_hook(struct gr_ctrl_event *ev) {
    (void)ev;
    hook_calls++;
}

static struct gr_ctrl_event *ev_seq(enum gr_ctrl_event_type type, int seq) {
    struct gr_ctrl_event *ev = gr_ctrl_event_new(type);
    ev->partition = seq; /* used as a sequence number by the recorder */
    return ev;
}

static int payload_frees;
static void payload_free(void *p) {
    free(p);
    payload_frees++;
}

static void test_names(void) {
    CHECK(strcmp(gr_ctrl_state_name(GR_CS_IDLE), "Idle") == 0);
    CHECK(strcmp(gr_ctrl_state_name(GR_CS_UPDATE_FEATURES), "UpdateFeatures") == 0);
    CHECK(GR_CS_UPDATE_FEATURES == 17 && GR_CS_COUNT == 18);
    CHECK(gr_ctrl_state_timer_name(GR_CS_IDLE) == NULL);
    CHECK(gr_ctrl_state_timer_name(GR_CS_UPDATE_METADATA_RESPONSE_RECEIVED) == NULL);
    CHECK(strcmp(gr_ctrl_state_timer_name(GR_CS_BROKER_CHANGE), "LeaderElectionRateAndTimeMs") == 0);
    CHECK(strcmp(gr_ctrl_state_timer_name(GR_CS_ALTER_PARTITION_REASSIGNMENT),
                 "PartitionReassignmentRateAndTimeMs") == 0);
    CHECK(strcmp(gr_ctrl_state_timer_name(GR_CS_ISR_CHANGE), "IsrChangeRateAndTimeMs") == 0);
    CHECK(gr_ctrl_event_state(GR_EV_EXPIRE) == GR_CS_CONTROLLER_CHANGE);
    CHECK(gr_ctrl_event_state(GR_EV_BROKER_MODIFICATIONS) == GR_CS_BROKER_CHANGE);
    CHECK(gr_ctrl_event_state(GR_EV_PARTITION_MODIFICATIONS) == GR_CS_TOPIC_CHANGE);
    CHECK(gr_ctrl_event_state(GR_EV_SHUTDOWN_EVENT_THREAD) == GR_CS_CONTROLLER_SHUTDOWN);
    CHECK(gr_ctrl_event_state(GR_EV_UPDATE_METADATA_RESPONSE) == GR_CS_UPDATE_METADATA_RESPONSE_RECEIVED);
    CHECK(strcmp(gr_ctrl_event_name(GR_EV_REGISTER_BROKER_AND_REELECT), "RegisterBrokerAndReelect") == 0);
    for (int t = 0; t < GR_EV_COUNT; t++) CHECK(gr_ctrl_event_name((enum gr_ctrl_event_type)t) != NULL);
}

static void test_fifo_and_metrics_virtual_clock(void) {
    struct fake_clock fc = {.base = {&fc_ops}, .now = 1000};
    struct recorder rec = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct gr_ctrl_event_processor proc = {rec_process, rec_preempt, &rec};
    struct gr_metrics *reg = gr_metrics_new();
    struct gr_ctrl_events *em = gr_ctrl_events_new(1, &proc, &fc.base, reg);

    for (int i = 0; i < 50; i++) {
        struct gr_ctrl_event *ev = ev_seq(i % 2 ? GR_EV_BROKER_CHANGE : GR_EV_TOPIC_CHANGE, i);
        ev->payload = gr_malloc(8);
        ev->payload_free = payload_free;
        gr_ctrl_events_put(em, ev);
        fc.now += 1;
    }
    CHECK(gr_ctrl_events_size(em) == 50);
    int64_t v = -1;
    CHECK(gr_metrics_read_gauge(reg, "kafka.controller:type=ControllerEventManager,name=EventQueueSize", &v) == 0);
    CHECK(v == 50);
    fc.now += 100;
    int n = 0;
    while (gr_ctrl_events_process_one(em)) n++;
    CHECK(n == 50);
    CHECK(gr_ctrl_events_process_one(em) == 0);
    CHECK(rec.n_processed == 50);
    for (int i = 0; i < 50 && i < rec.n_processed; i++) CHECK(rec.processed[i] == i);
    CHECK(payload_frees == 50);
    CHECK(gr_ctrl_events_state(em) == GR_CS_IDLE);

    /* queue time: first event waited 150 ms of virtual time, the last 101 */
    struct gr_histogram *h = gr_metrics_histogram(reg, "kafka.controller:type=ControllerEventManager,name=EventQueueTimeMs");
    struct gr_histogram_snapshot s;
    gr_histogram_snapshot(h, &s);
    CHECK(s.count == 50);
    CHECK(s.max == 150 && s.min == 101);
    struct gr_timer *tm = gr_metrics_timer(reg, "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs");
    gr_timer_snapshot(tm, &s);
    CHECK(s.count == 25);
    tm = gr_metrics_timer(reg, "kafka.controller:type=ControllerStats,name=TopicChangeRateAndTimeMs");
    gr_timer_snapshot(tm, &s);
    CHECK(s.count == 25);
    /* no timer for Idle / UpdateMetadataResponseReceived */
    CHECK(gr_metrics_read_gauge(reg, "kafka.controller:type=ControllerStats,name=IdleRateAndTimeMs", &v) == -ENOENT);

    /* timers go through the clock and arrive as ordinary events */
    gr_clock_schedule(&fc.base, 5000, em, ev_seq(GR_EV_AUTO_PREFERRED_REPLICA_LEADER_ELECTION, 99));
    uint64_t id2 = gr_clock_schedule(&fc.base, 5000, em, ev_seq(GR_EV_AUTO_PREFERRED_REPLICA_LEADER_ELECTION, 98));
    gr_clock_cancel(&fc.base, id2);
    fc_advance(&fc, 4999);
    CHECK(gr_ctrl_events_process_one(em) == 0);
    fc_advance(&fc, 1);
    CHECK(gr_ctrl_events_process_one(em) == 1);
    CHECK(rec.n_processed == 51 && rec.processed[50] == 99);

    gr_ctrl_events_free(em);
    CHECK(gr_metrics_read_gauge(reg, "kafka.controller:type=ControllerEventManager,name=EventQueueSize", &v) == -ENOENT);
    gr_metrics_free(reg);
}

static void test_clear_and_put_preempts(void) {
    struct fake_clock fc = {.base = {&fc_ops}};
    struct recorder rec = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct gr_ctrl_event_processor proc = {rec_process, rec_preempt, &rec};
    struct gr_ctrl_events *em = gr_ctrl_events_new(1, &proc, &fc.base, NULL);
    hook_calls = 0;
    for (int i = 0; i < 5; i++) {
        struct gr_ctrl_event *ev = ev_seq(GR_EV_CONTROLLED_SHUTDOWN, i);
        ev->preempt = count_preempt_hook;
        gr_ctrl_events_put(em, ev);
    }
    gr_ctrl_events_clear_and_put(em, ev_seq(GR_EV_EXPIRE, 100), false);
    CHECK(rec.n_preempted == 5);
    CHECK(hook_calls == 5);
    for (int i = 0; i < 5 && i < rec.n_preempted; i++) CHECK(rec.preempted[i] == i);
    CHECK(gr_ctrl_events_size(em) == 1);
    gr_ctrl_events_put(em, ev_seq(GR_EV_BROKER_CHANGE, 101));
    while (gr_ctrl_events_process_one(em)) {}
    CHECK(rec.n_processed == 2 && rec.processed[0] == 100 && rec.processed[1] == 101);

    /* close preempts what is still queued; puts after close are dropped */
    gr_ctrl_events_put(em, ev_seq(GR_EV_BROKER_CHANGE, 102));
    gr_ctrl_events_close(em);
    CHECK(rec.n_preempted == 6 && rec.preempted[5] == 102);
    struct gr_ctrl_event *late = ev_seq(GR_EV_BROKER_CHANGE, 103);
    gr_ctrl_events_put_waited(em, late);
    CHECK(gr_ctrl_events_wait(em, late) == GR_ECLOSED);
    gr_ctrl_event_free(late);
    CHECK(gr_ctrl_events_process_one(em) == 0);
    gr_ctrl_events_free(em);
}

/* A mock event: runs mock_fn on the event thread. */
static _Atomic int mock_ran;
static void mock_fn(struct gr_ctrl_event *ev) {
    (void)ev;
    atomic_fetch_add(&mock_ran, 1);
}

struct expirer_args {
    struct gr_ctrl_events *em;
    int rc;
};

static void *expirer(void *arg) {
    struct expirer_args *a = arg;
    struct gr_ctrl_event *ev = ev_seq(GR_EV_EXPIRE, 200);
    gr_ctrl_events_clear_and_put(a->em, ev, true);
    a->rc = gr_ctrl_events_wait(a->em, ev);
    gr_ctrl_event_free(ev);
    return NULL;
}

static void test_thread_mode(void) {
    struct gr_clock *clk = gr_clock_real_new(gr_ctrl_events_put, gr_ctrl_event_free);
    struct recorder rec = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct gr_ctrl_event_processor proc = {rec_process, rec_preempt, &rec};
    struct gr_metrics *reg = gr_metrics_new();
    struct gr_ctrl_events *em = gr_ctrl_events_new(1, &proc, clk, reg);
    CHECK(gr_ctrl_events_start(em) == 0);
    CHECK(!gr_ctrl_events_on_event_thread(em));

    for (int i = 0; i < 20; i++) gr_ctrl_events_put(em, ev_seq(GR_EV_TOPIC_CHANGE, i));
    struct gr_ctrl_event *last = ev_seq(GR_EV_TOPIC_CHANGE, 20);
    gr_ctrl_events_put_waited(em, last);
    CHECK(gr_ctrl_events_wait(em, last) == 0);
    gr_ctrl_event_free(last);
    CHECK(rec.n_processed == 21);
    for (int i = 0; i < 21 && i < rec.n_processed; i++) CHECK(rec.processed[i] == i);

    struct gr_ctrl_event *m = gr_ctrl_event_new(GR_EV_MOCK);
    m->mock_fn = mock_fn;
    gr_ctrl_events_put_waited(em, m);
    CHECK(gr_ctrl_events_wait(em, m) == 0);
    gr_ctrl_event_free(m);
    CHECK(atomic_load(&mock_ran) == 1);

    /* Expire pre-empts a backlog while the thread is busy, and the caller waits for it. The event
     * thread is held inside event 300 (no sleeps: the order is forced) until Expire has replaced
     * the other nine. */
    atomic_store(&rec.gate_seq, 300);
    for (int i = 0; i < 10; i++) gr_ctrl_events_put(em, ev_seq(GR_EV_BROKER_CHANGE, 300 + i));
    while (!atomic_load(&rec.in_gate)) usleep(1000);
    struct expirer_args a = {em, -1};
    pthread_t th;
    pthread_create(&th, NULL, expirer, &a);
    while (gr_ctrl_events_size(em) != 1) usleep(1000); /* Expire queued, the backlog pre-empted */
    atomic_store(&rec.gate_open, 1);
    pthread_join(th, NULL);
    CHECK(a.rc == 0);
    pthread_mutex_lock(&rec.mu);
    int np = rec.n_processed, npre = rec.n_preempted;
    int lastp = rec.processed[np - 1];
    pthread_mutex_unlock(&rec.mu);
    CHECK(lastp == 200);           /* Expire was processed last */
    CHECK(np == 21 + 1 + 1);       /* the 21, event 300, Expire */
    CHECK(npre == 9);              /* 301..309 */

    gr_ctrl_events_close(em);
    gr_ctrl_events_free(em);
    clk->ops->free(clk);
    gr_metrics_free(reg);
}

/* The real clock's timer thread delivers a scheduled event. */
static void test_real_clock(void) {
    struct gr_clock *clk = gr_clock_real_new(gr_ctrl_events_put, gr_ctrl_event_free);
    struct recorder rec = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct gr_ctrl_event_processor proc = {rec_process, rec_preempt, &rec};
    struct gr_ctrl_events *em = gr_ctrl_events_new(1, &proc, clk, NULL);
    int64_t t0 = gr_clock_now_ms(clk);
    gr_clock_schedule(clk, 50, em, ev_seq(GR_EV_AUTO_PREFERRED_REPLICA_LEADER_ELECTION, 7));
    uint64_t c = gr_clock_schedule(clk, 60, em, ev_seq(GR_EV_AUTO_PREFERRED_REPLICA_LEADER_ELECTION, 8));
    gr_clock_cancel(clk, c);
    gr_clock_schedule(clk, 100000, em, ev_seq(GR_EV_AUTO_PREFERRED_REPLICA_LEADER_ELECTION, 9)); /* freed by clock free */
    while (gr_ctrl_events_size(em) == 0 && gr_clock_now_ms(clk) - t0 < 5000) usleep(5000);
    CHECK(gr_clock_now_ms(clk) - t0 >= 50);
    usleep(30 * 1000);
    CHECK(gr_ctrl_events_size(em) == 1);
    CHECK(gr_ctrl_events_process_one(em) == 1);
    CHECK(rec.n_processed == 1 && rec.processed[0] == 7);
    clk->ops->free(clk);
    gr_ctrl_events_free(em);
}

/* Zero-delay timers fire at once on the timer thread, which frees each timer: the schedule call
 * must not read its timer after unlocking (CI run 11b: ASan heap-use-after-free of t->id, from
 * the standby refresh scheduled at resignation). Under ASan this loop found it. */
static void test_real_clock_zero_delay(void) {
    struct gr_clock *clk = gr_clock_real_new(gr_ctrl_events_put, gr_ctrl_event_free);
    struct recorder rec = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct gr_ctrl_event_processor proc = {rec_process, rec_preempt, &rec};
    struct gr_ctrl_events *em = gr_ctrl_events_new(1, &proc, clk, NULL);
    uint64_t last = 0;
    for (int i = 0; i < 3000; i++) {
        uint64_t id = gr_clock_schedule(clk, 0, em, ev_seq(GR_EV_AUTO_PREFERRED_REPLICA_LEADER_ELECTION, i));
        CHECK(id > last);
        last = id;
    }
    while (gr_ctrl_events_size(em) < 3000) usleep(1000);
    clk->ops->free(clk);
    gr_ctrl_events_free(em);
}

int main(void) {
    test_names();
    test_fifo_and_metrics_virtual_clock();
    test_clear_and_put_preempts();
    test_thread_mode();
    test_real_clock();
    test_real_clock_zero_delay();
    if (test_failures) {
        fprintf(stderr, "test_event_manager: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_event_manager: ok\n");
    return 0;
}
