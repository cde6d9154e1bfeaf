/* KIP-599 controller mutation quota: see controller_mutation_quota.h. */
#include "broker/controller_mutation_quota.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api/apis.h"
#include "broker/broker.h"
#include "broker/quota_manager.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "net/server.h"

#define LOGGER "kafka.server.ControllerMutationQuotaManager"

/* Kafka's TokenBucket of one sensor. */
struct bucket {
    char *sensor;
    double tokens;
    double rate, burst; /* at the last refill */
    int64_t last_ms;    /* 0: never used (the first refill fills it) */
    struct bucket *next;
};

struct gr_cmq {
    struct gr_broker *b;
    int samples;        /* controller.quota.window.num */
    int64_t window_ms;  /* controller.quota.window.size.seconds */
    pthread_mutex_t mu; /* guards buckets and nbuckets */
    struct bucket *buckets;
    int nbuckets;
};

struct gr_cmq *gr_cmq_new(struct gr_broker *b) {
    struct gr_cmq *q = gr_calloc(1, sizeof *q);
    q->b = b;
    q->samples = b->cfg && b->cfg->controller_quota_window_num > 0 ? b->cfg->controller_quota_window_num : 11;
    q->window_ms = b->cfg && b->cfg->controller_quota_window_size_seconds > 0
                       ? b->cfg->controller_quota_window_size_seconds * 1000LL
                       : 1000;
    pthread_mutex_init(&q->mu, NULL);
    return q;
}

void gr_cmq_free(struct gr_cmq *q) {
    if (!q) return;
    while (q->buckets) {
        struct bucket *x = q->buckets;
        q->buckets = x->next;
        free(x->sensor);
        free(x);
    }
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* The sensor's bucket refilled to now (mu held). The other buckets that have refilled to their
 * burst are freed on the way: a full bucket is what a new one starts as, so forgetting it changes
 * nothing (Kafka expires idle quota sensors), and a client cycling through client ids keeps only
 * the buckets still in debt. */
static struct bucket *refilled(struct gr_cmq *q, const char *sensor, double rate, int64_t now) {
    struct bucket *x = NULL;
    for (struct bucket **pp = &q->buckets; *pp;) {
        struct bucket *y = *pp;
        if (!x && strcmp(y->sensor, sensor) == 0) {
            x = y;
        } else if (!(y->tokens + y->rate * (double)(now - y->last_ms) / 1000.0 < y->burst)) { /* full (or NaN) */
            *pp = y->next;
            free(y->sensor);
            free(y);
            q->nbuckets--;
            continue;
        }
        pp = &y->next;
    }
    if (!x) {
        x = gr_calloc(1, sizeof *x);
        x->sensor = gr_strdup(sensor);
        x->next = q->buckets;
        q->buckets = x;
        q->nbuckets++;
    }
    double burst = rate * (double)q->samples * ((double)q->window_ms / 1000.0);
    x->tokens = x->last_ms ? fmin(burst, x->tokens + rate * (double)(now - x->last_ms) / 1000.0) : burst;
    x->last_ms = now;
    x->rate = rate;
    x->burst = burst;
    return x;
}

int gr_cmq_num_buckets(struct gr_cmq *q) {
    pthread_mutex_lock(&q->mu);
    int n = q->nbuckets;
    pthread_mutex_unlock(&q->mu);
    return n;
}

void gr_cmq_begin(struct gr_broker *b, struct gr_api_req *req, int16_t strict_since, struct gr_cmq_req *r) {
    memset(r, 0, sizeof *r);
    r->q = b ? b->controller_mutation_quota : NULL;
    r->strict = req->hdr.RequestApiVersion >= strict_since;
    if (!r->q || !b->quotas) return;
    /* the quota user is the principal's name (Kafka's session.sanitizedUser) */
    const char *user = req->principal && strncmp(req->principal, "User:", 5) == 0 ? req->principal + 5 : req->principal;
    bool any;
    r->rate = gr_quota_entity(b->quotas, GR_QUOTA_CONTROLLER_MUTATION, user, req->hdr.ClientId, &r->sensor, &any);
    if (r->rate < 0) { /* an entity without the key: Kafka's default bound, Int.MaxValue per second */
        free(r->sensor);
        r->sensor = NULL;
    }
}

int16_t gr_cmq_record(struct gr_cmq_req *r, double permits) {
    if (!r->sensor) return GR_KERR_NONE;
    struct gr_cmq *q = r->q;
    int64_t now = gr_mono_ms();
    int16_t err = GR_KERR_NONE;
    pthread_mutex_lock(&q->mu);
    struct bucket *x = refilled(q, r->sensor, r->rate, now);
    if (r->strict && x->tokens < 0) {
        err = GR_KERR_THROTTLING_QUOTA_EXCEEDED; /* checkQuotas before record: nothing taken */
    } else {
        x->tokens -= permits;
    }
    double tokens = x->tokens;
    pthread_mutex_unlock(&q->mu);
    if (tokens < 0) { /* ControllerMutationQuotaManager.throttleTimeMs */
        double ms = r->rate > 0 ? -tokens / r->rate * 1000.0 : (double)INT32_MAX; /* a tiny rate: huge */
        r->throttle_ms = ms < (double)INT32_MAX ? llround(ms) : INT32_MAX;
        r->throttled_at_ms = now;
    }
    gr_debug(LOGGER, "%s mutation quota %s: %.0f permits, %.1f tokens left (rate %.3f/s)%s",
             r->strict ? "strict" : "permissive", r->sensor, permits, tokens, r->rate,
             err ? ": THROTTLING_QUOTA_EXCEEDED" : "");
    return err;
}

int32_t gr_cmq_finish(struct gr_api_req *req, struct gr_cmq_req *r) {
    int64_t ms = 0;
    if (r->throttle_ms > 0) /* less the time since it was measured (AbstractControllerMutationQuota) */
        ms = GR_MAX(0, r->throttle_ms - (gr_mono_ms() - r->throttled_at_ms));
    if (ms > INT32_MAX) ms = INT32_MAX;
    if (ms > req->net->throttle_ms) req->net->throttle_ms = (int32_t)ms;
    free(r->sensor);
    r->sensor = NULL;
    return (int32_t)ms;
}
