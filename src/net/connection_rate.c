/* Connection creation rate limits: see connection_rate.h. */
#include "net/connection_rate.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/rate.h"
#include "common/util.h"

#define LOGGER "kafka.network.ConnectionQuotas"
#define IP_EXPIRY_MS (3600LL * 1000)
#define SWEEP_EVERY_MS 30000

struct ip_quota {
    char ip[64];
    double rate;
    struct ip_quota *next;
};

struct ip_sensor {
    char ip[64];
    struct gr_rate r;
    int64_t last_ms;
    struct ip_sensor *next;
};

struct gr_conn_rate {
    pthread_mutex_t mu;
    struct gr_rate_cfg rc;
    int nl, protected_listener;
    double broker_bound;
    struct gr_rate broker;
    double *listener_bound;
    struct gr_rate *listener;
    /* per IP */
    double ip_default; /* < 0: none */
    struct ip_quota **quotas;
    size_t nq_buckets;
    int nquotas;
    struct ip_sensor **sensors;
    size_t ns_buckets;
    int nsensors;
    int64_t next_sweep_ms;
};

static uint64_t h64(const char *s) {
    uint64_t h = 14695981039346656037ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

bool gr_conn_rate_normalize_ip(const char *in, char *out, size_t n) {
    unsigned char a[16];
    if (inet_pton(AF_INET, in, a) == 1) return inet_ntop(AF_INET, a, out, (socklen_t)n) != NULL;
    if (inet_pton(AF_INET6, in, a) != 1) return false;
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(a, mapped, 12) == 0) return inet_ntop(AF_INET, a + 12, out, (socklen_t)n) != NULL;
    return inet_ntop(AF_INET6, a, out, (socklen_t)n) != NULL;
}

struct gr_conn_rate *gr_conn_rate_new(int num_listeners, int protected_listener, int broker_rate,
                                      const int *listener_rates, int samples, int64_t window_ms) {
    struct gr_conn_rate *r = gr_calloc(1, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    r->rc.samples = samples < 1 ? 11 : samples > GR_RATE_MAX_SAMPLES ? GR_RATE_MAX_SAMPLES : samples;
    r->rc.window_ms = window_ms > 0 ? window_ms : 1000;
    r->nl = num_listeners;
    r->protected_listener = protected_listener;
    r->broker_bound = broker_rate;
    r->listener_bound = gr_calloc((size_t)(num_listeners > 0 ? num_listeners : 1), sizeof *r->listener_bound);
    r->listener = gr_calloc((size_t)(num_listeners > 0 ? num_listeners : 1), sizeof *r->listener);
    for (int i = 0; i < num_listeners; i++) r->listener_bound[i] = listener_rates ? listener_rates[i] : broker_rate;
    r->ip_default = -1;
    r->nq_buckets = 64;
    r->quotas = gr_calloc(r->nq_buckets, sizeof *r->quotas);
    r->ns_buckets = 256;
    r->sensors = gr_calloc(r->ns_buckets, sizeof *r->sensors);
    return r;
}

static void free_quotas(struct ip_quota **b, size_t n) {
    for (size_t i = 0; i < n; i++)
        for (struct ip_quota *q = b[i], *nx; q; q = nx) {
            nx = q->next;
            free(q);
        }
    free(b);
}

void gr_conn_rate_free(struct gr_conn_rate *r) {
    if (!r) return;
    free_quotas(r->quotas, r->nq_buckets);
    for (size_t i = 0; i < r->ns_buckets; i++)
        for (struct ip_sensor *s = r->sensors[i], *nx; s; s = nx) {
            nx = s->next;
            free(s);
        }
    free(r->sensors);
    free(r->listener_bound);
    free(r->listener);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* Sensor.record with a quota + QuotaUtils.boundedThrottleTime (mu held). */
static int64_t record(struct gr_conn_rate *r, struct gr_rate *s, double bound, double v, int64_t now) {
    int64_t win;
    double rate = gr_rate_record(&r->rc, s, v, now, &win);
    if (bound >= GR_CONN_RATE_NONE || rate <= bound) return 0;
    int64_t t = bound > 0 ? gr_rate_throttle_ms(rate, bound, win) : r->rc.window_ms;
    return t > r->rc.window_ms ? r->rc.window_ms : t;
}

int64_t gr_conn_rate_accept(struct gr_conn_rate *r, int idx, int64_t now) {
    if (!r || idx < 0 || idx >= r->nl) return 0;
    pthread_mutex_lock(&r->mu);
    int64_t t = 0;
    if (idx != r->protected_listener) t = record(r, &r->broker, r->broker_bound, 1.0, now);
    int64_t lt = record(r, &r->listener[idx], r->listener_bound[idx], 1.0, now);
    pthread_mutex_unlock(&r->mu);
    return lt > t ? lt : t;
}

static double ip_bound(struct gr_conn_rate *r, const char *ip) {
    for (struct ip_quota *q = r->quotas[h64(ip) & (r->nq_buckets - 1)]; q; q = q->next)
        if (strcmp(q->ip, ip) == 0) return q->rate;
    return r->ip_default;
}

static void sweep(struct gr_conn_rate *r, int64_t now) {
    r->next_sweep_ms = now + SWEEP_EVERY_MS;
    for (size_t i = 0; i < r->ns_buckets; i++)
        for (struct ip_sensor **pp = &r->sensors[i]; *pp;) {
            struct ip_sensor *s = *pp;
            if (now - s->last_ms > IP_EXPIRY_MS || ip_bound(r, s->ip) < 0) {
                *pp = s->next;
                free(s);
                r->nsensors--;
            } else {
                pp = &s->next;
            }
        }
}

static void grow_sensors(struct gr_conn_rate *r) {
    size_t nb = r->ns_buckets * 2;
    struct ip_sensor **n = gr_calloc(nb, sizeof *n);
    for (size_t i = 0; i < r->ns_buckets; i++)
        for (struct ip_sensor *s = r->sensors[i], *nx; s; s = nx) {
            nx = s->next;
            s->next = n[h64(s->ip) & (nb - 1)];
            n[h64(s->ip) & (nb - 1)] = s;
        }
    free(r->sensors);
    r->sensors = n;
    r->ns_buckets = nb;
}

int64_t gr_conn_rate_ip(struct gr_conn_rate *r, const char *ip, int64_t now) {
    if (!r) return 0;
    pthread_mutex_lock(&r->mu);
    if (now >= r->next_sweep_ms) sweep(r, now);
    double bound = ip_bound(r, ip);
    int64_t t = 0;
    if (bound >= 0 && bound < GR_CONN_RATE_NONE) {
        struct ip_sensor **b = &r->sensors[h64(ip) & (r->ns_buckets - 1)], *s = *b;
        while (s && strcmp(s->ip, ip) != 0) s = s->next;
        if (!s) {
            if ((size_t)r->nsensors >= r->ns_buckets) {
                grow_sensors(r);
                b = &r->sensors[h64(ip) & (r->ns_buckets - 1)];
            }
            s = gr_calloc(1, sizeof *s);
            snprintf(s->ip, sizeof s->ip, "%s", ip);
            s->next = *b;
            *b = s;
            r->nsensors++;
        }
        s->last_ms = now;
        t = record(r, &s->r, bound, 1.0, now);
        if (t > 0) gr_rate_record(&r->rc, &s->r, -1.0, now, NULL); /* not accepted: unrecorded, as Kafka */
    }
    pthread_mutex_unlock(&r->mu);
    return t;
}

void gr_conn_rate_set_ip_quotas(struct gr_conn_rate *r, double dflt, const char *const *ips, const double *rates,
                                int n) {
    if (!r) return;
    size_t nb = 64;
    while (nb < (size_t)n * 2) nb *= 2;
    struct ip_quota **qs = gr_calloc(nb, sizeof *qs);
    int count = 0;
    for (int i = 0; i < n; i++) {
        char ip[64];
        if (!gr_conn_rate_normalize_ip(ips[i], ip, sizeof ip)) {
            gr_warn(LOGGER, "Ignoring the connection_creation_rate of %s: not an IP address", ips[i]);
            continue;
        }
        struct ip_quota *q = gr_calloc(1, sizeof *q);
        snprintf(q->ip, sizeof q->ip, "%s", ip);
        q->rate = rates[i];
        q->next = qs[h64(ip) & (nb - 1)];
        qs[h64(ip) & (nb - 1)] = q;
        count++;
    }
    pthread_mutex_lock(&r->mu);
    struct ip_quota **old = r->quotas;
    size_t oldn = r->nq_buckets;
    r->quotas = qs;
    r->nq_buckets = nb;
    r->nquotas = count;
    r->ip_default = dflt;
    pthread_mutex_unlock(&r->mu);
    free_quotas(old, oldn);
    gr_info(LOGGER, "IP connection rate quotas: %d address%s, default %s", count, count == 1 ? "" : "es",
            dflt < 0 ? "none" : "set");
}

int gr_conn_rate_ip_sensors(struct gr_conn_rate *r) {
    if (!r) return 0;
    pthread_mutex_lock(&r->mu);
    int n = r->nsensors;
    pthread_mutex_unlock(&r->mu);
    return n;
}
