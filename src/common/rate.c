/* Kafka's Rate: see rate.h. */
#include "common/rate.h"

#include <math.h>

/* Kafka's Rate.windowSize: time since the oldest live sample, at least samples - 1 windows. */
static int64_t window_size(const struct gr_rate_cfg *cfg, const struct gr_rate *r, int64_t now) {
    int64_t oldest = now;
    for (int i = 0; i < cfg->samples; i++)
        if (r->start[i] && now - r->start[i] < cfg->samples * cfg->window_ms && r->start[i] < oldest)
            oldest = r->start[i];
    int64_t elapsed = now - oldest;
    int64_t full = elapsed / cfg->window_ms;
    if (full < cfg->samples - 1) elapsed += (cfg->samples - 1 - full) * cfg->window_ms;
    return elapsed > 0 ? elapsed : 1;
}

double gr_rate_record(const struct gr_rate_cfg *cfg, struct gr_rate *r, double v, int64_t now, int64_t *win_ms) {
    if (!r->used || now - r->start[r->cur] >= cfg->window_ms) {
        r->cur = r->used ? (r->cur + 1) % cfg->samples : 0;
        r->start[r->cur] = now;
        r->val[r->cur] = 0;
        r->used = true;
    }
    r->val[r->cur] += v;
    double total = 0;
    for (int i = 0; i < cfg->samples; i++)
        if (r->start[i] && now - r->start[i] < cfg->samples * cfg->window_ms) total += r->val[i];
    int64_t win = window_size(cfg, r, now);
    if (win_ms) *win_ms = win;
    return total / ((double)win / 1000.0);
}

int64_t gr_rate_throttle_ms(double rate, double bound, int64_t win_ms) {
    if (rate <= bound) return 0;
    double t = bound > 0 ? (rate - bound) / bound * (double)win_ms : (double)win_ms;
    return t > 9e15 ? INT64_MAX : (int64_t)llround(t);
}
