/* The controller's clock and timers, behind an interface so a simulation can drive the
 * controller with virtual time (Kafka's Time + KafkaScheduler, reduced to what the controller
 * needs).
 *
 * A timer never runs controller code itself: when it fires it puts an event on an event manager,
 * and the event thread processes it like any other event. So the timer thread (real clock) or the
 * simulation loop (virtual clock) never touches controller state.
 *
 * The clock carries the event manager and the event as opaque pointers: it does not include or
 * call the event manager (which uses the clock for enqueue times); the real clock is given the
 * two functions it needs at creation.
 *
 * The real clock (gr_clock_real_new) uses CLOCK_MONOTONIC and one timer thread. */
#ifndef GR_CONTROLLER_CLOCK_H
#define GR_CONTROLLER_CLOCK_H

#include <stdint.h>

struct gr_ctrl_events;
struct gr_ctrl_event;
struct gr_clock;

struct gr_clock_ops {
    /* Milliseconds on a monotonic clock. Any thread. */
    int64_t (*now_ms)(struct gr_clock *clk);
    /* Puts `ev` on `em` (gr_ctrl_events_put) once delay_ms have passed. Takes ownership of ev.
     * Returns a timer id > 0 for cancel. Any thread. */
    uint64_t (*schedule)(struct gr_clock *clk, int64_t delay_ms, struct gr_ctrl_events *em,
                         struct gr_ctrl_event *ev);
    /* Cancels a timer that has not fired yet and frees its event; a fired or unknown id is
     * ignored. Any thread. */
    void (*cancel)(struct gr_clock *clk, uint64_t id);
    /* Stops the clock's thread (if any), frees pending events and the clock. */
    void (*free)(struct gr_clock *clk);
};

/* Implementations embed this as their first member. */
struct gr_clock {
    const struct gr_clock_ops *ops;
};

static inline int64_t gr_clock_now_ms(struct gr_clock *clk) { return clk->ops->now_ms(clk); }
static inline uint64_t gr_clock_schedule(struct gr_clock *clk, int64_t delay_ms, struct gr_ctrl_events *em,
                                         struct gr_ctrl_event *ev) {
    return clk->ops->schedule(clk, delay_ms, em, ev);
}
static inline void gr_clock_cancel(struct gr_clock *clk, uint64_t id) { clk->ops->cancel(clk, id); }
static inline void gr_clock_free(struct gr_clock *clk) {
    if (clk) clk->ops->free(clk);
}

/* What the real clock does with a timer's event: fire = put it on em when due (the owner passes
 * gr_ctrl_events_put); drop = free it unfired on cancel or clock free (gr_ctrl_event_free). */
typedef void (*gr_clock_fire_fn)(struct gr_ctrl_events *em, struct gr_ctrl_event *ev);
typedef void (*gr_clock_drop_fn)(struct gr_ctrl_event *ev);

/* A wall-time clock: gr_mono_ms() and a timer thread (started lazily on the first schedule). */
struct gr_clock *gr_clock_real_new(gr_clock_fire_fn fire, gr_clock_drop_fn drop);

#endif
