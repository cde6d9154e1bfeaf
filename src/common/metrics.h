/* A small metrics registry in the spirit of Kafka's Yammer metrics.
 *
 * Every metric has a full Kafka-style name, e.g.
 *   "kafka.controller:type=ControllerEventManager,name=EventQueueSize"
 * (gr_metrics_name() builds one from group, type and name). Kinds:
 *   gauge     an int64 value: either stored (gr_gauge_set) or computed by a callback at read time
 *   meter     a counter with rates (mean rate since creation, one-minute rate)
 *   histogram count, min, mean, max and Yammer's percentiles p50, p75, p95, p98, p99, p999
 *             (over the last GR_METRICS_WINDOW samples: a sliding window, not Yammer's decaying
 *             reservoir)
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
 *    not go through the controller's virtual clock.
 * 5. Collectors (gr_metrics_add_collector) produce samples that are computed at scrape time and
 *    have no registry entry (per-partition log sizes, ReplicaManager counts, process figures).
 *    They run on the dumping thread without the registry lock (so they may take their own
 *    locks, and code holding those locks may update metrics), one dump at a time. After
 *    gr_metrics_remove_collector returns, a collector is never called again.
 *
 * Prometheus exposition (gr_metrics_dump_prometheus) names metrics as the JMX exporter's
 * kafka-2_0_0.yml rules name Kafka's MBeans (docs/METRICS.md has the table):
 *   "<domain>:type=T,name=N[,k=v...]"  ->  family lower("<domain>_T_N") with every character
 *   outside [a-zA-Z0-9_] turned into '_', and every k=v but type/name as a label (label names
 *   sanitised the same way, case kept; values escaped as the text format requires). Tag values
 *   must not contain ',' (topic names, API names and broker ids never do).
 *   gauge                    -> <family> (gauge)
 *   meter  "...PerSec"       -> <family minus persec>_total (counter); other meters <family>_count
 *   histogram/timer          -> <family>{quantile="0.50"|"0.75"|"0.95"|"0.98"|"0.99"|"0.999"},
 *                               <family>_sum, <family>_count (summary); the quantile values are
 *                               the exporter's "0.$N" of Yammer's <N>thPercentile attributes */
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
    double min, max, mean;                /* 0 when count == 0 */
    double p50, p75, p95, p98, p99, p999; /* Yammer's 50th..999thPercentile; 0 when count == 0 */
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

/* ---- Prometheus ---- */

struct gr_prom_out; /* samples being collected for one exposition */
typedef void (*gr_metrics_collector_fn)(void *arg, struct gr_prom_out *out);

/* Adds a collector called at every Prometheus dump (rule 5). arg must stay valid until removed. */
void gr_metrics_add_collector(struct gr_metrics *reg, gr_metrics_collector_fn fn, void *arg);
/* Removes the collector registered with fn and arg (no-op if absent). */
void gr_metrics_remove_collector(struct gr_metrics *reg, gr_metrics_collector_fn fn, void *arg);

/* For collectors: one sample under a JMX-style name, mapped as described above. A gauge value,
 * or a meter's count (for names ending in PerSec -> ..._total). */
void gr_prom_gauge(struct gr_prom_out *o, const char *jmx_name, double value);
void gr_prom_meter(struct gr_prom_out *o, const char *jmx_name, double count);
/* A sample with a Prometheus name as given (e.g. process_open_fds); type is "gauge" or
 * "counter"; labels NULL or "k=v,k=v" (values must not contain ',' or '='); help may be NULL. */
void gr_prom_raw(struct gr_prom_out *o, const char *family, const char *type, const char *labels, const char *help,
                 double value);

/* The process_* figures of the Prometheus client libraries, read from /proc/self: resident and
 * virtual memory, open and max fds, CPU seconds, start time. A collector (arg unused). */
void gr_metrics_process_collector(void *arg, struct gr_prom_out *out);

/* Writes every metric and every collector's samples in the Prometheus text exposition format
 * (version 0.0.4), one "# TYPE" line per family, families sorted by name. Returns 0 or -EIO. */
int gr_metrics_dump_prometheus(struct gr_metrics *reg, FILE *out);

/* Helpers exposed for the unit test: the family of a JMX name's name part, and label escaping. */
/* Writes the Prometheus family of jmx_name into buf ("" if the name has no ':'). */
char *gr_prom_family(char *buf, size_t len, const char *jmx_name);
/* Writes s escaped as a label value (\\, \", \n) to out. */
void gr_prom_put_label_value(FILE *out, const char *s);

#endif
