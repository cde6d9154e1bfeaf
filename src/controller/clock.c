/* The real controller clock: CLOCK_MONOTONIC and one timer thread holding a list of pending
 * timers sorted by due time (the controller has a handful of timers, so a list is enough). */
#include "controller/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "common/util.h"

struct real_timer {
    uint64_t id;
    int64_t due_ms;
    struct gr_ctrl_events *em;
    struct gr_ctrl_event *ev;
    struct real_timer *next;
};

struct real_clock {
    struct gr_clock base;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    gr_clock_fire_fn fire;     /* from gr_clock_real_new */
    gr_clock_drop_fn drop;
    struct real_timer *timers; /* sorted by due_ms, then id */
    uint64_t next_id;
    bool started, stopping;
    pthread_t thread;
};

static int64_t real_now_ms(struct gr_clock *clk) {
    (void)clk;
    return gr_mono_ms();
}

static void *timer_thread(void *arg) {
    struct real_clock *c = arg;
    pthread_setname_np(pthread_self(), "ctrl-timer");
    pthread_mutex_lock(&c->mu);
    while (!c->stopping) {
        struct real_timer *t = c->timers;
        if (!t) {
            pthread_cond_wait(&c->cv, &c->mu);
            continue;
        }
        int64_t now = gr_mono_ms();
        if (t->due_ms > now) {
            struct timespec ts;
            ts.tv_sec = (time_t)(t->due_ms / 1000);
            ts.tv_nsec = (long)(t->due_ms % 1000) * 1000000L;
            pthread_cond_timedwait(&c->cv, &c->mu, &ts);
            continue;
        }
        c->timers = t->next;
        /* Put outside our lock: put may preempt nothing, but keep lock order simple. */
        pthread_mutex_unlock(&c->mu);
        c->fire(t->em, t->ev);
        free(t);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static uint64_t real_schedule(struct gr_clock *clk, int64_t delay_ms, struct gr_ctrl_events *em,
                              struct gr_ctrl_event *ev) {
    struct real_clock *c = (struct real_clock *)clk;
    struct real_timer *t = gr_calloc(1, sizeof *t);
    t->due_ms = gr_mono_ms() + (delay_ms > 0 ? delay_ms : 0);
    t->em = em;
    t->ev = ev;
    pthread_mutex_lock(&c->mu);
    if (c->stopping) {
        pthread_mutex_unlock(&c->mu);
        c->drop(ev);
        free(t);
        return 0;
    }
    uint64_t id = t->id = ++c->next_id; /* t belongs to the timer thread once we unlock */
    struct real_timer **pp = &c->timers;
    while (*pp && (*pp)->due_ms <= t->due_ms) pp = &(*pp)->next;
    t->next = *pp;
    *pp = t;
    if (!c->started) {
        if (pthread_create(&c->thread, NULL, timer_thread, c) == 0) c->started = true;
    }
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return id;
}

static void real_cancel(struct gr_clock *clk, uint64_t id) {
    struct real_clock *c = (struct real_clock *)clk;
    struct real_timer *found = NULL;
    pthread_mutex_lock(&c->mu);
    for (struct real_timer **pp = &c->timers; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            found = *pp;
            *pp = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (found) {
        c->drop(found->ev);
        free(found);
    }
}

static void real_free(struct gr_clock *clk) {
    struct real_clock *c = (struct real_clock *)clk;
    pthread_mutex_lock(&c->mu);
    c->stopping = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (c->started) pthread_join(c->thread, NULL);
    while (c->timers) {
        struct real_timer *t = c->timers;
        c->timers = t->next;
        c->drop(t->ev);
        free(t);
    }
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

static const struct gr_clock_ops real_ops = {
    .now_ms = real_now_ms,
    .schedule = real_schedule,
    .cancel = real_cancel,
    .free = real_free,
};

struct gr_clock *gr_clock_real_new(gr_clock_fire_fn fire, gr_clock_drop_fn drop) {
    struct real_clock *c = gr_calloc(1, sizeof *c);
    c->base.ops = &real_ops;
    c->fire = fire;
    c->drop = drop;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &attr);
    pthread_condattr_destroy(&attr);
    return c->base.ops ? &c->base : NULL;
}
