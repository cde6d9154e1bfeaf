/* Metrics registry: see metrics.h for the rules. The registry is a name-sorted array guarded by
 * one mutex; each meter/histogram has its own mutex so updates never contend on the registry. */
#include "common/metrics.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/util.h"

enum metric_kind { MK_GAUGE, MK_METER, MK_HISTOGRAM, MK_TIMER };

#define METER_BUCKETS 12
#define METER_BUCKET_MS 5000

struct gr_gauge {
    _Atomic int64_t value;
    gr_gauge_fn fn; /* guarded by the registry lock */
    void *arg;
};

struct gr_meter {
    pthread_mutex_t mu;
    int64_t count;
    int64_t start_ms;
    int64_t bucket_start_ms; /* start of buckets[cur] */
    int cur;
    int64_t buckets[METER_BUCKETS];
};

struct gr_histogram {
    pthread_mutex_t mu;
    int64_t count;
    double sum, min, max;
    double window[GR_METRICS_WINDOW];
    int next; /* ring position of the next sample */
};

struct gr_timer {
    struct gr_histogram hist;
    struct gr_meter meter;
};

struct metric {
    char *name;
    enum metric_kind kind;
    union {
        struct gr_gauge *gauge;
        struct gr_meter *meter;
        struct gr_histogram *hist;
        struct gr_timer *timer;
        void *any;
    } u;
};

struct collector {
    gr_metrics_collector_fn fn;
    void *arg;
};

struct gr_metrics {
    pthread_mutex_t mu;
    struct metric *v;
    size_t n, cap;
    pthread_mutex_t cmu; /* guards cols and is held while collectors run; taken before mu */
    struct collector *cols;
    size_t ncols;
};

/* ---- meters ---- */

static void meter_init(struct gr_meter *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    m->start_ms = gr_mono_ms();
    m->bucket_start_ms = m->start_ms;
}

/* Rotates buckets so buckets[cur] covers `now`. Caller holds m->mu. */
static void meter_advance(struct gr_meter *m, int64_t now) {
    int64_t steps = (now - m->bucket_start_ms) / METER_BUCKET_MS;
    if (steps <= 0) return;
    if (steps >= METER_BUCKETS) {
        memset(m->buckets, 0, sizeof m->buckets);
        m->cur = 0;
    } else {
        for (int64_t i = 0; i < steps; i++) {
            m->cur = (m->cur + 1) % METER_BUCKETS;
            m->buckets[m->cur] = 0;
        }
    }
    m->bucket_start_ms += steps * METER_BUCKET_MS;
}

void gr_meter_mark(struct gr_meter *m, int64_t n) {
    int64_t now = gr_mono_ms();
    pthread_mutex_lock(&m->mu);
    meter_advance(m, now);
    m->buckets[m->cur] += n;
    m->count += n;
    pthread_mutex_unlock(&m->mu);
}

int64_t gr_meter_count(struct gr_meter *m) {
    pthread_mutex_lock(&m->mu);
    int64_t c = m->count;
    pthread_mutex_unlock(&m->mu);
    return c;
}

static void meter_rates(struct gr_meter *m, int64_t *count, double *mean_rate, double *one_min) {
    int64_t now = gr_mono_ms();
    pthread_mutex_lock(&m->mu);
    meter_advance(m, now);
    int64_t sum = 0;
    for (int i = 0; i < METER_BUCKETS; i++) sum += m->buckets[i];
    double elapsed_s = (double)(now - m->start_ms) / 1000.0;
    double window_s = GR_MIN(elapsed_s, (double)(METER_BUCKETS * METER_BUCKET_MS) / 1000.0);
    if (window_s < 1.0) window_s = 1.0;
    *count = m->count;
    *mean_rate = elapsed_s > 0 ? (double)m->count / (elapsed_s < 1.0 ? 1.0 : elapsed_s) : 0.0;
    *one_min = (double)sum / window_s;
    pthread_mutex_unlock(&m->mu);
}

double gr_meter_one_minute_rate(struct gr_meter *m) {
    int64_t c;
    double mr, om;
    meter_rates(m, &c, &mr, &om);
    return om;
}

/* ---- histograms ---- */

static void hist_init(struct gr_histogram *h) {
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->mu, NULL);
}

void gr_histogram_update(struct gr_histogram *h, double v) {
    pthread_mutex_lock(&h->mu);
    if (h->count == 0 || v < h->min) h->min = v;
    if (h->count == 0 || v > h->max) h->max = v;
    h->count++;
    h->sum += v;
    h->window[h->next] = v;
    h->next = (h->next + 1) % GR_METRICS_WINDOW;
    pthread_mutex_unlock(&h->mu);
}

void gr_histogram_clear(struct gr_histogram *h) {
    pthread_mutex_lock(&h->mu);
    h->count = 0;
    h->sum = h->min = h->max = 0;
    h->next = 0;
    pthread_mutex_unlock(&h->mu);
}

int64_t gr_histogram_count(struct gr_histogram *h) {
    pthread_mutex_lock(&h->mu);
    int64_t c = h->count;
    pthread_mutex_unlock(&h->mu);
    return c;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* Nearest-rank-with-interpolation quantile of sorted v[0..n). */
static double quantile(const double *v, size_t n, double q) {
    if (n == 0) return 0;
    double pos = q * (double)(n + 1);
    if (pos < 1) return v[0];
    if (pos >= (double)n) return v[n - 1];
    size_t lo = (size_t)pos;
    double frac = pos - (double)lo;
    return v[lo - 1] + frac * (v[lo] - v[lo - 1]);
}

void gr_histogram_snapshot(struct gr_histogram *h, struct gr_histogram_snapshot *out) {
    double *tmp = gr_malloc(sizeof(double) * GR_METRICS_WINDOW);
    pthread_mutex_lock(&h->mu);
    size_t n = h->count < GR_METRICS_WINDOW ? (size_t)h->count : GR_METRICS_WINDOW;
    memcpy(tmp, h->window, n * sizeof(double));
    out->count = h->count;
    out->min = h->min;
    out->max = h->max;
    out->mean = h->count ? h->sum / (double)h->count : 0;
    pthread_mutex_unlock(&h->mu);
    qsort(tmp, n, sizeof(double), cmp_double);
    out->p50 = quantile(tmp, n, 0.5);
    out->p75 = quantile(tmp, n, 0.75);
    out->p95 = quantile(tmp, n, 0.95);
    out->p98 = quantile(tmp, n, 0.98);
    out->p99 = quantile(tmp, n, 0.99);
    out->p999 = quantile(tmp, n, 0.999);
    free(tmp);
}

void gr_timer_update(struct gr_timer *t, double ms) {
    gr_histogram_update(&t->hist, ms);
    gr_meter_mark(&t->meter, 1);
}

void gr_timer_snapshot(struct gr_timer *t, struct gr_histogram_snapshot *out) {
    gr_histogram_snapshot(&t->hist, out);
}

/* ---- gauges ---- */

void gr_gauge_set(struct gr_gauge *g, int64_t v) { atomic_store(&g->value, v); }
void gr_gauge_add(struct gr_gauge *g, int64_t delta) { atomic_fetch_add(&g->value, delta); }

/* Caller holds the registry lock when the gauge has a callback. */
static int64_t gauge_read_locked(struct gr_gauge *g) {
    if (g->fn) return g->fn(g->arg);
    return atomic_load(&g->value);
}

int64_t gr_gauge_get(struct gr_gauge *g) {
    if (!g->fn) return atomic_load(&g->value);
    /* Callback gauges are read through the registry (gr_metrics_read_gauge) so the callback
     * runs under the registry lock; a direct read calls it without that guarantee. */
    return g->fn(g->arg);
}

/* ---- registry ---- */

struct gr_metrics *gr_metrics_new(void) {
    struct gr_metrics *reg = gr_calloc(1, sizeof *reg);
    pthread_mutex_init(&reg->mu, NULL);
    pthread_mutex_init(&reg->cmu, NULL);
    return reg;
}

static void metric_free(struct metric *m) {
    switch (m->kind) {
    case MK_GAUGE: free(m->u.gauge); break;
    case MK_METER: pthread_mutex_destroy(&m->u.meter->mu); free(m->u.meter); break;
    case MK_HISTOGRAM: pthread_mutex_destroy(&m->u.hist->mu); free(m->u.hist); break;
    case MK_TIMER:
        pthread_mutex_destroy(&m->u.timer->hist.mu);
        pthread_mutex_destroy(&m->u.timer->meter.mu);
        free(m->u.timer);
        break;
    }
    free(m->name);
}

void gr_metrics_free(struct gr_metrics *reg) {
    if (!reg) return;
    for (size_t i = 0; i < reg->n; i++) metric_free(&reg->v[i]);
    free(reg->v);
    free(reg->cols);
    pthread_mutex_destroy(&reg->cmu);
    pthread_mutex_destroy(&reg->mu);
    free(reg);
}

char *gr_metrics_name(char *buf, size_t len, const char *group, const char *type, const char *name) {
    snprintf(buf, len, "%s:type=%s,name=%s", group, type, name);
    return buf;
}

/* Binary search; returns the index of name or the insertion point with *found = false. */
static size_t find_locked(struct gr_metrics *reg, const char *name, bool *found) {
    size_t lo = 0, hi = reg->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(reg->v[mid].name, name);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    *found = false;
    return lo;
}

static void *alloc_kind(enum metric_kind kind) {
    switch (kind) {
    case MK_GAUGE: return gr_calloc(1, sizeof(struct gr_gauge));
    case MK_METER: {
        struct gr_meter *m = gr_malloc(sizeof *m);
        meter_init(m);
        return m;
    }
    case MK_HISTOGRAM: {
        struct gr_histogram *h = gr_malloc(sizeof *h);
        hist_init(h);
        return h;
    }
    case MK_TIMER: {
        struct gr_timer *t = gr_malloc(sizeof *t);
        hist_init(&t->hist);
        meter_init(&t->meter);
        return t;
    }
    }
    return NULL;
}

/* Returns the metric of that name and kind, creating it if absent; NULL on a kind clash. The
 * optional hook runs under the lock on the result (used to set gauge callbacks). */
static void *get_or_create(struct gr_metrics *reg, const char *name, enum metric_kind kind, gr_gauge_fn fn,
                           void *arg) {
    pthread_mutex_lock(&reg->mu);
    bool found;
    size_t i = find_locked(reg, name, &found);
    void *res;
    if (found) {
        res = reg->v[i].kind == kind ? reg->v[i].u.any : NULL;
    } else {
        if (reg->n == reg->cap) {
            reg->cap = reg->cap ? reg->cap * 2 : 32;
            reg->v = gr_realloc(reg->v, reg->cap * sizeof *reg->v);
        }
        memmove(&reg->v[i + 1], &reg->v[i], (reg->n - i) * sizeof *reg->v);
        reg->v[i].name = gr_strdup(name);
        reg->v[i].kind = kind;
        reg->v[i].u.any = alloc_kind(kind);
        reg->n++;
        res = reg->v[i].u.any;
    }
    if (res && kind == MK_GAUGE && fn) {
        struct gr_gauge *g = res;
        g->fn = fn;
        g->arg = arg;
    }
    pthread_mutex_unlock(&reg->mu);
    return res;
}

struct gr_gauge *gr_metrics_gauge(struct gr_metrics *reg, const char *name) {
    return get_or_create(reg, name, MK_GAUGE, NULL, NULL);
}

struct gr_gauge *gr_metrics_gauge_fn(struct gr_metrics *reg, const char *name, gr_gauge_fn fn, void *arg) {
    return get_or_create(reg, name, MK_GAUGE, fn, arg);
}

struct gr_meter *gr_metrics_meter(struct gr_metrics *reg, const char *name) {
    return get_or_create(reg, name, MK_METER, NULL, NULL);
}

struct gr_histogram *gr_metrics_histogram(struct gr_metrics *reg, const char *name) {
    return get_or_create(reg, name, MK_HISTOGRAM, NULL, NULL);
}

struct gr_timer *gr_metrics_timer(struct gr_metrics *reg, const char *name) {
    return get_or_create(reg, name, MK_TIMER, NULL, NULL);
}

int gr_metrics_remove(struct gr_metrics *reg, const char *name) {
    pthread_mutex_lock(&reg->mu);
    bool found;
    size_t i = find_locked(reg, name, &found);
    if (!found) {
        pthread_mutex_unlock(&reg->mu);
        return -ENOENT;
    }
    struct metric m = reg->v[i];
    memmove(&reg->v[i], &reg->v[i + 1], (reg->n - i - 1) * sizeof *reg->v);
    reg->n--;
    pthread_mutex_unlock(&reg->mu);
    metric_free(&m);
    return 0;
}

int gr_metrics_read_gauge(struct gr_metrics *reg, const char *name, int64_t *out) {
    pthread_mutex_lock(&reg->mu);
    bool found;
    size_t i = find_locked(reg, name, &found);
    int rc = 0;
    if (!found) rc = -ENOENT;
    else if (reg->v[i].kind != MK_GAUGE) rc = -EINVAL;
    else *out = gauge_read_locked(reg->v[i].u.gauge);
    pthread_mutex_unlock(&reg->mu);
    return rc;
}

/* Names are ours (no user input), but escape anyway so the output is always valid JSON. */
static void put_json_string(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c < 0x20) fprintf(out, "\\u%04x", c);
        else fputc(c, out);
    }
    fputc('"', out);
}

/* JSON has no NaN/Inf; metrics never produce them, but be safe. */
static void put_num(FILE *out, const char *key, double v) {
    if (v != v || v > 1e300 || v < -1e300) v = 0;
    fprintf(out, ",\"%s\":%.6g", key, v);
}

static void put_hist(FILE *out, const struct gr_histogram_snapshot *s) {
    put_num(out, "min", s->min);
    put_num(out, "max", s->max);
    put_num(out, "mean", s->mean);
    put_num(out, "p50", s->p50);
    put_num(out, "p75", s->p75);
    put_num(out, "p95", s->p95);
    put_num(out, "p98", s->p98);
    put_num(out, "p99", s->p99);
    put_num(out, "p999", s->p999);
}

int gr_metrics_dump_json(struct gr_metrics *reg, FILE *out) {
    pthread_mutex_lock(&reg->mu);
    fputc('{', out);
    for (size_t i = 0; i < reg->n; i++) {
        struct metric *m = &reg->v[i];
        if (i) fputc(',', out);
        put_json_string(out, m->name);
        fputc(':', out);
        struct gr_histogram_snapshot s;
        int64_t count;
        double mean_rate, one_min;
        switch (m->kind) {
        case MK_GAUGE:
            fprintf(out, "{\"type\":\"gauge\",\"value\":%lld}", (long long)gauge_read_locked(m->u.gauge));
            break;
        case MK_METER:
            meter_rates(m->u.meter, &count, &mean_rate, &one_min);
            fprintf(out, "{\"type\":\"meter\",\"count\":%lld", (long long)count);
            put_num(out, "meanRate", mean_rate);
            put_num(out, "oneMinuteRate", one_min);
            fputc('}', out);
            break;
        case MK_HISTOGRAM:
            gr_histogram_snapshot(m->u.hist, &s);
            fprintf(out, "{\"type\":\"histogram\",\"count\":%lld", (long long)s.count);
            put_hist(out, &s);
            fputc('}', out);
            break;
        case MK_TIMER:
            gr_histogram_snapshot(&m->u.timer->hist, &s);
            meter_rates(&m->u.timer->meter, &count, &mean_rate, &one_min);
            fprintf(out, "{\"type\":\"timer\",\"count\":%lld", (long long)s.count);
            put_num(out, "meanRate", mean_rate);
            put_num(out, "oneMinuteRate", one_min);
            put_hist(out, &s);
            fputc('}', out);
            break;
        }
    }
    fputs("}\n", out);
    pthread_mutex_unlock(&reg->mu);
    return ferror(out) ? -EIO : 0;
}

int gr_metrics_dump_file(struct gr_metrics *reg, const char *path) {
    char *tmp = gr_asprintf("%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        int e = -errno;
        free(tmp);
        return e;
    }
    int rc = gr_metrics_dump_json(reg, f);
    if (fclose(f) != 0 && rc == 0) rc = -errno;
    if (rc == 0 && rename(tmp, path) != 0) rc = -errno;
    if (rc != 0) unlink(tmp);
    free(tmp);
    return rc;
}

/* ---- Prometheus exposition ---- */

struct prom_sample {
    char *family; /* the name on the # TYPE line */
    const char *type;
    char *name;   /* the sample's name: family, or family_sum / family_count for summaries */
    char *labels; /* rendered label pairs without braces, "" for none */
    char *help;   /* the JMX name, or NULL */
    double value;
    size_t seq;
};

struct gr_prom_out {
    struct prom_sample *v;
    size_t n, cap;
};

void gr_metrics_add_collector(struct gr_metrics *reg, gr_metrics_collector_fn fn, void *arg) {
    pthread_mutex_lock(&reg->cmu);
    reg->cols = gr_realloc(reg->cols, (reg->ncols + 1) * sizeof *reg->cols);
    reg->cols[reg->ncols++] = (struct collector){fn, arg};
    pthread_mutex_unlock(&reg->cmu);
}

void gr_metrics_remove_collector(struct gr_metrics *reg, gr_metrics_collector_fn fn, void *arg) {
    pthread_mutex_lock(&reg->cmu);
    for (size_t i = 0; i < reg->ncols; i++) {
        if (reg->cols[i].fn == fn && reg->cols[i].arg == arg) {
            memmove(&reg->cols[i], &reg->cols[i + 1], (reg->ncols - i - 1) * sizeof *reg->cols);
            reg->ncols--;
            break;
        }
    }
    pthread_mutex_unlock(&reg->cmu);
}

/* Writes s (n bytes) to f with every character outside [a-zA-Z0-9_] turned into '_', lower-cased
 * when lower. */
static void put_sanitised(FILE *f, const char *s, size_t n, bool lower) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '_') c = '_';
        fputc(lower ? tolower(c) : c, f);
    }
}

void gr_prom_put_label_value(FILE *out, const char *s) {
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\\\", out);
        else if (*s == '"')
            fputs("\\\"", out);
        else if (*s == '\n')
            fputs("\\n", out);
        else
            fputc(*s, out);
    }
}

struct jmx_parts {
    const char *domain, *type, *name;
    size_t domain_len, type_len, name_len;
};

/* Renders the labels of props (skipping type= and name=) into a malloc'ed string and fills
 * parts. props is "type=T,name=N,k=v" (a JMX name after ':') or plain "k=v,k=v". */
static char *render_labels(const char *props, struct jmx_parts *parts, const char *extra_k, const char *extra_v) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    bool first = true;
    const char *p = props;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        if (eq) {
            size_t kl = (size_t)(eq - p);
            const char *v = eq + 1;
            size_t vl = n - kl - 1;
            if (parts && kl == 4 && strncmp(p, "type", 4) == 0) {
                parts->type = v;
                parts->type_len = vl;
            } else if (parts && kl == 4 && strncmp(p, "name", 4) == 0) {
                parts->name = v;
                parts->name_len = vl;
            } else {
                if (!first) fputc(',', f);
                first = false;
                put_sanitised(f, p, kl, false);
                fputs("=\"", f);
                char *val = gr_strndup(v, vl);
                gr_prom_put_label_value(f, val);
                free(val);
                fputc('"', f);
            }
        }
        p = end ? end + 1 : NULL;
    }
    if (extra_k) {
        if (!first) fputc(',', f);
        fprintf(f, "%s=\"", extra_k);
        gr_prom_put_label_value(f, extra_v);
        fputc('"', f);
    }
    fclose(f);
    return buf;
}

/* The family of a JMX name plus suffix, with strip removed from the end of its name part when
 * present (PerSec); *labels gets the rendered labels (+ extra_k=extra_v). */
static char *family_of(const char *jmx_name, const char *strip, const char *suffix, char **labels, const char *extra_k,
                       const char *extra_v) {
    const char *colon = strchr(jmx_name, ':');
    struct jmx_parts parts = {0};
    if (!colon) {
        *labels = render_labels(NULL, NULL, extra_k, extra_v);
        return gr_asprintf("%s%s", jmx_name, suffix);
    }
    parts.domain = jmx_name;
    parts.domain_len = (size_t)(colon - jmx_name);
    *labels = render_labels(colon + 1, &parts, extra_k, extra_v);
    size_t nl = parts.name_len;
    size_t sl = strip ? strlen(strip) : 0;
    if (sl && nl > sl && strncmp(parts.name + nl - sl, strip, sl) == 0) nl -= sl;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    put_sanitised(f, parts.domain, parts.domain_len, true);
    if (parts.type) {
        fputc('_', f);
        put_sanitised(f, parts.type, parts.type_len, true);
    }
    if (parts.name) {
        fputc('_', f);
        put_sanitised(f, parts.name, nl, true);
    }
    fputs(suffix, f);
    fclose(f);
    return buf;
}

char *gr_prom_family(char *buf, size_t len, const char *jmx_name) {
    if (!strchr(jmx_name, ':')) {
        if (len) buf[0] = 0;
        return buf;
    }
    char *labels;
    char *fam = family_of(jmx_name, NULL, "", &labels, NULL, NULL);
    snprintf(buf, len, "%s", fam);
    free(fam);
    free(labels);
    return buf;
}

static void out_push(struct gr_prom_out *o, char *family, const char *type, char *name, char *labels, const char *help,
                     double value) {
    if (o->n == o->cap) {
        o->cap = o->cap ? o->cap * 2 : 256;
        o->v = gr_realloc(o->v, o->cap * sizeof *o->v);
    }
    o->v[o->n] = (struct prom_sample){family, type, name, labels, help ? gr_strdup(help) : NULL, value, o->n};
    o->n++;
}

/* Whether the name part of jmx_name ends in `suffix` (and is longer than it). */
static bool name_ends_with(const char *jmx_name, const char *suffix) {
    const char *colon = strchr(jmx_name, ':');
    const char *nm = colon ? strstr(colon, "name=") : NULL;
    size_t nml = nm ? strcspn(nm, ",") : 0, sl = strlen(suffix);
    return nm && nml > 5 + sl && strncmp(nm + nml - sl, suffix, sl) == 0;
}

void gr_prom_gauge(struct gr_prom_out *o, const char *jmx_name, double value) {
    char *labels;
    /* the exporter's "Generic gauges for percents" rule: name=<N>Percent -> <family of N>_percent */
    bool pct = name_ends_with(jmx_name, "Percent");
    char *fam = family_of(jmx_name, pct ? "Percent" : NULL, pct ? "_percent" : "", &labels, NULL, NULL);
    out_push(o, fam, "gauge", gr_strdup(fam), labels, jmx_name, value);
}

void gr_prom_meter(struct gr_prom_out *o, const char *jmx_name, double count) {
    char *labels;
    bool per_sec = name_ends_with(jmx_name, "PerSec");
    char *fam = family_of(jmx_name, per_sec ? "PerSec" : NULL, per_sec ? "_total" : "_count", &labels, NULL, NULL);
    out_push(o, fam, "counter", gr_strdup(fam), labels, jmx_name, count);
}

static void prom_summary(struct gr_prom_out *o, const char *jmx_name, const struct gr_histogram_snapshot *s) {
    /* the JMX exporter's kafka-2_0_0.yml turns <N>thPercentile into quantile="0.<N>" */
    static const char *const qs[] = {"0.50", "0.75", "0.95", "0.98", "0.99", "0.999"};
    double qv[] = {s->p50, s->p75, s->p95, s->p98, s->p99, s->p999};
    char *labels;
    for (size_t i = 0; i < GR_ARRAY_LEN(qs); i++) {
        char *fam = family_of(jmx_name, NULL, "", &labels, "quantile", qs[i]);
        out_push(o, fam, "summary", gr_strdup(fam), labels, jmx_name, qv[i]);
    }
    char *fam = family_of(jmx_name, NULL, "", &labels, NULL, NULL);
    out_push(o, gr_strdup(fam), "summary", gr_asprintf("%s_sum", fam), gr_strdup(labels), jmx_name,
             s->mean * (double)s->count);
    out_push(o, fam, "summary", gr_asprintf("%s_count", fam), labels, jmx_name, (double)s->count);
}

void gr_prom_raw(struct gr_prom_out *o, const char *family, const char *type, const char *labels, const char *help,
                 double value) {
    out_push(o, gr_strdup(family), type, gr_strdup(family), render_labels(labels, NULL, NULL, NULL), help, value);
}

static int cmp_sample(const void *a, const void *b) {
    const struct prom_sample *x = a, *y = b;
    int c = strcmp(x->family, y->family);
    if (c) return c;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void put_value(FILE *out, double v) {
    if (isnan(v))
        fputs("NaN", out);
    else if (isinf(v))
        fputs(v > 0 ? "+Inf" : "-Inf", out);
    else if (v == floor(v) && fabs(v) < 9e15)
        fprintf(out, "%lld", (long long)v);
    else
        fprintf(out, "%.15g", v);
}

static void collect_registry_locked(struct gr_metrics *reg, struct gr_prom_out *o) {
    for (size_t i = 0; i < reg->n; i++) {
        struct metric *m = &reg->v[i];
        struct gr_histogram_snapshot s;
        int64_t count;
        double mean_rate, one_min;
        switch (m->kind) {
        case MK_GAUGE: gr_prom_gauge(o, m->name, (double)gauge_read_locked(m->u.gauge)); break;
        case MK_METER:
            meter_rates(m->u.meter, &count, &mean_rate, &one_min);
            gr_prom_meter(o, m->name, (double)count);
            break;
        case MK_HISTOGRAM:
            gr_histogram_snapshot(m->u.hist, &s);
            prom_summary(o, m->name, &s);
            break;
        case MK_TIMER:
            gr_histogram_snapshot(&m->u.timer->hist, &s);
            prom_summary(o, m->name, &s);
            break;
        }
    }
}

int gr_metrics_dump_prometheus(struct gr_metrics *reg, FILE *out) {
    struct gr_prom_out o = {0};
    pthread_mutex_lock(&reg->cmu);
    pthread_mutex_lock(&reg->mu);
    collect_registry_locked(reg, &o);
    pthread_mutex_unlock(&reg->mu);
    for (size_t i = 0; i < reg->ncols; i++) reg->cols[i].fn(reg->cols[i].arg, &o);
    pthread_mutex_unlock(&reg->cmu);
    qsort(o.v, o.n, sizeof *o.v, cmp_sample);
    for (size_t i = 0; i < o.n; i++) {
        struct prom_sample *s = &o.v[i];
        if (i == 0 || strcmp(o.v[i - 1].family, s->family) != 0) {
            if (s->help) {
                fprintf(out, "# HELP %s ", s->family);
                for (const char *h = s->help; *h; h++) {
                    if (*h == '\\')
                        fputs("\\\\", out);
                    else if (*h == '\n')
                        fputs("\\n", out);
                    else
                        fputc(*h, out);
                }
                fputc('\n', out);
            }
            fprintf(out, "# TYPE %s %s\n", s->family, s->type);
        }
        fputs(s->name, out);
        if (s->labels[0]) fprintf(out, "{%s}", s->labels);
        fputc(' ', out);
        put_value(out, s->value);
        fputc('\n', out);
    }
    for (size_t i = 0; i < o.n; i++) {
        free(o.v[i].family);
        free(o.v[i].name);
        free(o.v[i].labels);
        free(o.v[i].help);
    }
    free(o.v);
    return ferror(out) ? -EIO : 0;
}

/* ---- process figures ---- */

/* The malloc heap (glibc's mallinfo2, scrape time only: it locks each arena in turn and walks its
 * free lists): what the process's allocations hold, and what the arenas keep free for reuse —
 * the part of the RSS that is not data (issue 14, memory per replica). Free bytes may include
 * pages already handed back with malloc_trim (still counted by glibc, no longer resident). */
static void heap_figures(struct gr_prom_out *o) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    gr_prom_raw(o, "gregor_heap_in_use_bytes", "gauge", NULL,
                "Bytes in malloc'd blocks, mmapped ones included (glibc mallinfo2 uordblks + hblkhd).",
                (double)(mi.uordblks + mi.hblkhd));
    gr_prom_raw(o, "gregor_heap_free_bytes", "gauge", NULL,
                "Bytes the malloc arenas hold free for reuse (glibc mallinfo2 fordblks).", (double)mi.fordblks);
#else
    (void)o;
#endif
}

void gr_metrics_process_collector(void *arg, struct gr_prom_out *o) {
    (void)arg;
    long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    FILE *f = fopen("/proc/self/stat", "r");
    if (f) {
        char line[1024];
        if (fgets(line, sizeof line, f)) {
            /* Fields after the parenthesised command name, which may hold spaces. */
            const char *p = strrchr(line, ')');
            unsigned long utime = 0, stime = 0, vsize = 0;
            unsigned long long start = 0;
            long rss = 0;
            if (p &&
                sscanf(p + 2,
                       "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %*d %*d %llu %lu %ld",
                       &utime, &stime, &start, &vsize, &rss) == 5 &&
                ticks > 0) {
                gr_prom_raw(o, "process_cpu_seconds_total", "counter", NULL,
                            "Total user and system CPU time spent in seconds.",
                            (double)(utime + stime) / (double)ticks);
                gr_prom_raw(o, "process_resident_memory_bytes", "gauge", NULL, "Resident memory size in bytes.",
                            (double)rss * (double)page);
                gr_prom_raw(o, "process_virtual_memory_bytes", "gauge", NULL, "Virtual memory size in bytes.",
                            (double)vsize);
                FILE *st = fopen("/proc/stat", "r");
                char l2[256];
                while (st && fgets(l2, sizeof l2, st)) {
                    unsigned long long btime;
                    if (sscanf(l2, "btime %llu", &btime) == 1) {
                        gr_prom_raw(o, "process_start_time_seconds", "gauge", NULL,
                                    "Start time of the process since unix epoch in seconds.",
                                    (double)btime + (double)start / (double)ticks);
                        break;
                    }
                }
                if (st) fclose(st);
            }
        }
        fclose(f);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        long n = 0;
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') n++;
        closedir(d);
        gr_prom_raw(o, "process_open_fds", "gauge", NULL, "Number of open file descriptors.",
                    (double)(n - 1)); /* minus the DIR's own fd */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        gr_prom_raw(o, "process_max_fds", "gauge", NULL, "Maximum number of open file descriptors.",
                    rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur);
    heap_figures(o);
    /* Kafka's LinuxIoMetricsCollector: the bytes this process made the storage layer read and
     * write (/proc/self/io read_bytes / write_bytes), as kafka.server:type=KafkaServer gauges */
    FILE *io = fopen("/proc/self/io", "r");
    char l3[128];
    while (io && fgets(l3, sizeof l3, io)) {
        unsigned long long v;
        if (sscanf(l3, "read_bytes: %llu", &v) == 1)
            gr_prom_gauge(o, "kafka.server:type=KafkaServer,name=linux-disk-read-bytes", (double)v);
        else if (sscanf(l3, "write_bytes: %llu", &v) == 1)
            gr_prom_gauge(o, "kafka.server:type=KafkaServer,name=linux-disk-write-bytes", (double)v);
    }
    if (io) fclose(io);
}
