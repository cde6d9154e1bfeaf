/* Kafka's Rate over a SampledStat (org.apache.kafka.common.metrics.stats.Rate): the sum of the
 * values recorded in the last `samples` windows of `window_ms`, divided by the time they span
 * (at least samples - 1 full windows, so a new sensor does not report a burst as a huge rate).
 * The quotas (broker/quota_manager.c) and the connection creation rate limits (net/server.c)
 * measure with it, and compute their throttle times as Kafka's QuotaUtils.throttleTime does.
 *
 * Ownership and locking: a struct gr_rate is plain data owned by its user, who serializes the
 * calls on it (no internal lock). */
#ifndef GR_COMMON_RATE_H
#define GR_COMMON_RATE_H

#include <stdbool.h>
#include <stdint.h>

#define GR_RATE_MAX_SAMPLES 64 /* quota.window.num above this is capped */

struct gr_rate {
    int64_t start[GR_RATE_MAX_SAMPLES];
    double val[GR_RATE_MAX_SAMPLES];
    int cur;
    bool used;
};

struct gr_rate_cfg {
    int samples;      /* quota.window.num (11), 1..GR_RATE_MAX_SAMPLES */
    int64_t window_ms; /* quota.window.size.seconds (1) in ms */
};

/* Records v at now (ms, monotonic) and returns the rate per second over the window; *win_ms (may
 * be NULL) gets the window length the rate was computed over (Kafka's Rate.windowSize). */
double gr_rate_record(const struct gr_rate_cfg *cfg, struct gr_rate *r, double v, int64_t now, int64_t *win_ms);

/* Kafka's QuotaUtils.throttleTime for a rate over bound: (rate - bound) / bound * window, in ms
 * (the whole window when bound is 0); 0 when rate <= bound. */
int64_t gr_rate_throttle_ms(double rate, double bound, int64_t win_ms);

#endif
