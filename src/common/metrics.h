/* A small metrics registry in the spirit of Kafka's Yammer metrics.
 *
 * Every metric has a full Kafka-style name, e.g.
 *   "kafka.controller:type=ControllerEventManager,name=EventQueueSize"
 * (gr_metrics_name() builds one from group, type and name). Kinds:
 *   gauge     an int64 value: either stored (gr_gauge_set) or computed by a callback at read time
 *   meter     a counter with rates (mean rate since creation, one-minute rate)
 *   histogram count, min, mean, max, p50, p99 (percentiles over the last GR_METRICS_WINDOW
 *             samples: a sliding window, not Yammer's decaying reservoir)
 *   timer     a histogram of durations in ms plus a meter of how often it was updated
 *
 * Lifetime and threading rules
 * 1. The registry owns every metric. A metric pointer stays valid until gr_metrics_remove() on
 *    its name or gr_metrics_free(); using it afterwards is a bug.
 * 2. Registering a name that already exists with the same kind returns the existing metric
 *    (like Yammer's newGauge/newTimer); with a different kind returns NULL.
 * 3. All functions may be called from any thread. Updates are atomic or take the metric's own
 *    small lock; gauge callbacks run on the thread that reads or dumps the registry, with the
 *    registry lock held, so a callback must not call back into the registry. Once
 *    gr_metrics_remove() has returned the callback is never called again.
 * 4. Time for rates comes from gr_mono_ms(); metrics never influence control flow, so they do
 *    not go through the controller's virtual clock. */
#ifndef GR_METRICS_H
#define GR_METRICS_H

#include <stdint.h>
#include <stdio.h>

#define GR_METRICS_WINDOW 1028 /* samples kept for percentiles (Yammer's reservoir size) */

struct gr_metrics;
struct gr_gauge;
struct gr_meter;
struct gr_histogram;
struct gr_timer;

typedef int64_t (*gr_gauge_fn)(void *arg);

/* A consistent snapshot of a histogram (or the histogram part of a timer). */
struct gr_histogram_snapshot {
    int64_t count;
    double min, max, mean, p50, p99; /* 0 when count == 0 */
};

struct gr_metrics *gr_metrics_new(void);
/* Frees the registry and every metric in it. NULL is ignored. */
void gr_metrics_free(struct gr_metrics *reg);

/* Writes "group:type=T,name=N" into buf (truncating) and returns buf. */
char *gr_metrics_name(char *buf, size_t len, const char *group, const char *type, const char *name);

/* Registers (or returns the existing) stored-value gauge, initially 0. */
struct gr_gauge *gr_metrics_gauge(struct gr_metrics *reg, const char *name);
/* Registers a gauge whose value is fn(arg) at read time. arg must stay valid until the gauge is
 * removed. If the name exists as a gauge, its callback is replaced. */
struct gr_gauge *gr_metrics_gauge_fn(struct gr_metrics *reg, const char *name, gr_gauge_fn fn, void *arg);
void gr_gauge_set(struct gr_gauge *g, int64_t v);
void gr_gauge_add(struct gr_gauge *g, int64_t delta);
int64_t gr_gauge_get(struct gr_gauge *g);

struct gr_meter *gr_metrics_meter(struct gr_metrics *reg, const char *name);
void gr_meter_mark(struct gr_meter *m, int64_t n);
int64_t gr_meter_count(struct gr_meter *m);
/* Events per second over roughly the last minute. */
double gr_meter_one_minute_rate(struct gr_meter *m);

struct gr_histogram *gr_metrics_histogram(struct gr_metrics *reg, const char *name);
void gr_histogram_update(struct gr_histogram *h, double v);
/* Forgets every sample (Kafka clears EventQueueTimeMs after a long idle period). */
void gr_histogram_clear(struct gr_histogram *h);
void gr_histogram_snapshot(struct gr_histogram *h, struct gr_histogram_snapshot *out);
int64_t gr_histogram_count(struct gr_histogram *h);

struct gr_timer *gr_metrics_timer(struct gr_metrics *reg, const char *name);
/* Records one duration in milliseconds. */
void gr_timer_update(struct gr_timer *t, double ms);
void gr_timer_snapshot(struct gr_timer *t, struct gr_histogram_snapshot *out);

/* Removes and frees the metric called name (any kind). Returns 0 or -ENOENT. */
int gr_metrics_remove(struct gr_metrics *reg, const char *name);

/* Reads a gauge by name into *out. Returns 0, -ENOENT (or -EINVAL if not a gauge). */
int gr_metrics_read_gauge(struct gr_metrics *reg, const char *name, int64_t *out);

/* Writes every metric as one JSON object keyed by name, sorted by name:
 *   {"kafka.controller:type=KafkaController,name=ActiveControllerCount":{"type":"gauge","value":1},
 *    "...EventQueueTimeMs":{"type":"histogram","count":3,"min":0,"max":2,"mean":1,"p50":1,"p99":2},
 *    "...LeaderElectionRateAndTimeMs":{"type":"timer","count":..,"meanRate":..,"oneMinuteRate":..,
 *       "min":..,"max":..,"mean":..,"p50":..,"p99":..},
 *    "...":{"type":"meter","count":..,"meanRate":..,"oneMinuteRate":..}}
 * followed by a newline. Returns 0 or -EIO. */
int gr_metrics_dump_json(struct gr_metrics *reg, FILE *out);

/* Dumps into path atomically (path.tmp, fsync-free rename). Returns 0 or -errno. */
int gr_metrics_dump_file(struct gr_metrics *reg, const char *path);

#endif
