/* Client quotas and replication throttle rates: see quota_manager.h. */
#include "broker/quota_manager.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/apis.h"
#include "protocol/codec.h"
#include "protocol/desc.h"
#include "broker/broker.h"
#include "broker/dynamic_config_manager.h"
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "net/server.h"
#include "zk/backend.h"
#include "zk/kzk.h"

#define LOGGER "kafka.server.ClientQuotaManager"

#define MAX_SAMPLES 64 /* quota.window.num above this is capped */
#define DEFAULT "<default>"

#define NTYPES 4
static const char *const quota_keys[NTYPES] = {"producer_byte_rate", "consumer_byte_rate", "request_percentage",
                                               "controller_mutation_rate"};

/* One entity with quotas; names sanitized as stored, NULL = component absent. */
struct qent {
    char *user, *client;
    bool has[NTYPES];
    double v[NTYPES];
};

/* Kafka's Rate over SampledStat: SAMPLES windows of WINDOW_MS. */
struct rate {
    int64_t start[MAX_SAMPLES];
    double val[MAX_SAMPLES];
    int cur;
    bool used;
};

struct usage {
    char *key; /* "user\nclient" of the matched entity's components */
    struct rate r[NTYPES];
    struct usage *next;
};

/* A topic's throttled replicas on this broker (its *.replication.throttled.replicas). */
struct throttled_topic {
    char *topic;
    bool all[2];       /* "*" ([0] follower, [1] leader) */
    int32_t *parts[2]; /* partitions listed with this broker's id */
    int nparts[2];
    struct throttled_topic *next;
};

struct gr_quota_manager {
    struct gr_broker *b;
    pthread_mutex_t rmu;               /* the two below */
    struct throttled_topic *throttled; /* cache, filled on first use of a topic */
    struct rate repl[2];               /* bytes of throttled replication traffic */
    int samples;                       /* quota.window.num */
    int64_t window_ms;                 /* quota.window.size.seconds */
    pthread_mutex_t mu;
    struct qent *ents;
    int n;
    struct usage *usage;
    _Atomic int64_t repl_rate[2]; /* [0] follower, [1] leader */
};

/* ---- names (Kafka's Sanitizer: URL encoding, '*' as %2A, space as %20) ---- */

static char *sanitize(const char *s) {
    size_t n = strlen(s);
    char *out = gr_malloc(n * 3 + 1), *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
            *p == '-' || *p == '_')
            *o++ = (char)*p;
        else
            o += sprintf(o, "%%%02X", *p);
    }
    *o = 0;
    return out;
}

char *gr_quota_sanitize(const char *name) {
    return sanitize(name);
}

char *gr_quota_desanitize(const char *s) {
    char *out = gr_malloc(strlen(s) + 1), *o = out;
    for (const char *p = s; *p; p++) {
        unsigned v;
        if (*p == '%' && p[1] && p[2] && sscanf(p + 1, "%2x", &v) == 1) {
            *o++ = (char)v;
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = 0;
    return out;
}

/* ---- lifecycle and loading ---- */

static void free_ents(struct qent *e, int n) {
    for (int i = 0; i < n; i++) free(e[i].user), free(e[i].client);
    free(e);
}

struct gr_quota_manager *gr_quota_manager_new(struct gr_broker *b) {
    struct gr_quota_manager *q = gr_calloc(1, sizeof *q);
    q->b = b;
    q->samples = b->cfg && b->cfg->quota_window_num > 0 ? b->cfg->quota_window_num : 11;
    if (q->samples > MAX_SAMPLES) q->samples = MAX_SAMPLES;
    q->window_ms = b->cfg && b->cfg->quota_window_size_seconds > 0 ? b->cfg->quota_window_size_seconds * 1000LL : 1000;
    pthread_mutex_init(&q->mu, NULL);
    pthread_mutex_init(&q->rmu, NULL);
    atomic_init(&q->repl_rate[0], INT64_MAX);
    atomic_init(&q->repl_rate[1], INT64_MAX);
    gr_quota_manager_reload(q);
    gr_quota_manager_reload_replication(q);
    return q;
}

void gr_quota_manager_free(struct gr_quota_manager *q) {
    if (!q) return;
    free_ents(q->ents, q->n);
    for (struct usage *u = q->usage, *nx; u; u = nx) {
        nx = u->next;
        free(u->key);
        free(u);
    }
    gr_quota_replication_topic_changed(q, NULL);
    pthread_mutex_destroy(&q->rmu);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* Adds the entity at /config/<path> if it has quota keys. */
static void load_one(struct gr_kzk *zk, const char *type, const char *name, const char *user, const char *client,
                     struct qent **ents, int *n, int *cap) {
    struct gr_kzk_config c = {0};
    if (gr_kzk_get_entity_config(zk, type, name, &c) != 0) return;
    struct qent e = {0};
    bool any = false;
    for (int k = 0; k < NTYPES; k++) {
        const char *v = gr_kzk_config_get(&c, quota_keys[k]);
        char *end;
        if (v && (e.v[k] = strtod(v, &end), *v && !*end)) {
            e.has[k] = true;
            any = true;
        }
    }
    gr_kzk_config_release(&c);
    if (!any) return;
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *ents = gr_realloc(*ents, sizeof **ents * (size_t)*cap);
    }
    e.user = user ? gr_strdup(user) : NULL;
    e.client = client ? gr_strdup(client) : NULL;
    (*ents)[(*n)++] = e;
}

void gr_quota_manager_reload(struct gr_quota_manager *q) {
    if (!q || !q->b->zk) return;
    struct gr_kzk *zk = q->b->zk;
    struct gr_zk_backend *zb = gr_kzk_backend(zk);
    struct qent *ents = NULL;
    int n = 0, cap = 0;
    struct gr_zstrings users = {0}, clients = {0};
    if (gr_zkb_get_children(zb, "/config/users", false, &users) == GR_ZOK)
        for (int i = 0; i < users.count; i++) {
            load_one(zk, "users", users.names[i], users.names[i], NULL, &ents, &n, &cap);
            char *p = gr_asprintf("/config/users/%s/clients", users.names[i]);
            struct gr_zstrings uc = {0};
            if (gr_zkb_get_children(zb, p, false, &uc) == GR_ZOK)
                for (int j = 0; j < uc.count; j++) {
                    char *nm = gr_asprintf("%s/clients/%s", users.names[i], uc.names[j]);
                    load_one(zk, "users", nm, users.names[i], uc.names[j], &ents, &n, &cap);
                    free(nm);
                }
            gr_zstrings_free(&uc);
            free(p);
        }
    if (gr_zkb_get_children(zb, "/config/clients", false, &clients) == GR_ZOK)
        for (int i = 0; i < clients.count; i++)
            load_one(zk, "clients", clients.names[i], NULL, clients.names[i], &ents, &n, &cap);
    gr_zstrings_free(&users);
    gr_zstrings_free(&clients);
    pthread_mutex_lock(&q->mu);
    free_ents(q->ents, q->n);
    q->ents = ents;
    q->n = n;
    pthread_mutex_unlock(&q->mu);
    gr_info(LOGGER, "%d client quota entit%s loaded", n, n == 1 ? "y" : "ies");
}

void gr_quota_manager_reload_replication(struct gr_quota_manager *q) {
    if (!q) return;
    struct gr_broker *b = q->b;
    atomic_store(&q->repl_rate[1],
                 gr_dcm_broker_long(b->dynamic_config, b->cfg, "leader.replication.throttled.rate", INT64_MAX));
    atomic_store(&q->repl_rate[0],
                 gr_dcm_broker_long(b->dynamic_config, b->cfg, "follower.replication.throttled.rate", INT64_MAX));
}

int64_t gr_quota_replication_rate(struct gr_quota_manager *q, bool leader) {
    return q ? atomic_load(&q->repl_rate[leader ? 1 : 0]) : INT64_MAX;
}

/* ---- lookup ---- */

static bool eq(const char *a, const char *b) {
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* The most specific entity with a quota of type t (mu held); NULL if none. */
static const struct qent *find(struct gr_quota_manager *q, int t, const char *u, const char *c) {
    const char *order[8][2] = {{u, c},          {u, DEFAULT}, {u, NULL},      {DEFAULT, c}, {DEFAULT, DEFAULT},
                               {DEFAULT, NULL}, {NULL, c},    {NULL, DEFAULT}};
    for (int k = 0; k < 8; k++)
        for (int i = 0; i < q->n; i++)
            if (q->ents[i].has[t] && eq(q->ents[i].user, order[k][0]) && eq(q->ents[i].client, order[k][1]))
                return &q->ents[i];
    return NULL;
}

double gr_quota_bound(struct gr_quota_manager *q, enum gr_quota_type type, const char *user, const char *client_id) {
    if (!q) return -1;
    char *u = sanitize(user ? user : "ANONYMOUS"), *c = sanitize(client_id ? client_id : "");
    pthread_mutex_lock(&q->mu);
    const struct qent *e = find(q, (int)type, u, c);
    double v = e ? e->v[type] : -1;
    pthread_mutex_unlock(&q->mu);
    free(u);
    free(c);
    return v;
}

double gr_quota_entity(struct gr_quota_manager *q, enum gr_quota_type type, const char *user, const char *client_id,
                       char **sensor, bool *any) {
    *sensor = NULL;
    *any = false;
    if (!q) return -1;
    char *u = sanitize(user ? user : "ANONYMOUS"), *c = sanitize(client_id ? client_id : "");
    pthread_mutex_lock(&q->mu);
    for (int i = 0; i < q->n && !*any; i++) *any = q->ents[i].has[type];
    const struct qent *e = find(q, (int)type, u, c);
    double v = e ? e->v[type] : -1;
    if (e) *sensor = gr_asprintf("%s\n%s", e->user ? u : "", e->client ? c : "");
    pthread_mutex_unlock(&q->mu);
    free(u);
    free(c);
    return v;
}

/* ---- rates ---- */

/* Kafka's Rate.windowSize: time since the oldest live sample, at least SAMPLES-1 windows. */
static int64_t window_size(const struct gr_quota_manager *q, struct rate *r, int64_t now) {
    int64_t oldest = now;
    for (int i = 0; i < q->samples; i++)
        if (r->start[i] && now - r->start[i] < q->samples * q->window_ms && r->start[i] < oldest) oldest = r->start[i];
    int64_t elapsed = now - oldest;
    int64_t full = elapsed / q->window_ms;
    if (full < q->samples - 1) elapsed += (q->samples - 1 - full) * q->window_ms;
    return elapsed > 0 ? elapsed : 1;
}

/* Records v at now and returns the rate per second over the window. */
static double rate_record(const struct gr_quota_manager *q, struct rate *r, double v, int64_t now, int64_t *win) {
    if (!r->used || now - r->start[r->cur] >= q->window_ms) {
        r->cur = r->used ? (r->cur + 1) % q->samples : 0;
        r->start[r->cur] = now;
        r->val[r->cur] = 0;
        r->used = true;
    }
    r->val[r->cur] += v;
    double total = 0;
    for (int i = 0; i < q->samples; i++)
        if (r->start[i] && now - r->start[i] < q->samples * q->window_ms) total += r->val[i];
    *win = window_size(q, r, now);
    return total / ((double)*win / 1000.0);
}

static struct usage *usage_of(struct gr_quota_manager *q, const char *key) {
    for (struct usage *x = q->usage; x; x = x->next)
        if (strcmp(x->key, key) == 0) return x;
    struct usage *x = gr_calloc(1, sizeof *x);
    x->key = gr_strdup(key);
    x->next = q->usage;
    q->usage = x;
    return x;
}

int32_t gr_quota_record(struct gr_quota_manager *q, enum gr_quota_type type, const char *user, const char *client_id,
                        double value) {
    if (!q) return 0;
    char *u = sanitize(user ? user : "ANONYMOUS"), *c = sanitize(client_id ? client_id : "");
    int32_t ms = 0;
    pthread_mutex_lock(&q->mu);
    const struct qent *e = find(q, (int)type, u, c);
    if (e) {
        /* the sensor's tags: the actual names for the components the quota entity has */
        char *key = gr_asprintf("%s\n%s", e->user ? u : "", e->client ? c : "");
        struct usage *x = usage_of(q, key);
        free(key);
        int64_t now = gr_mono_ms(), win;
        double bound = e->v[type];
        if (type == GR_QUOTA_REQUEST) /* thread ms -> percent-seconds of one thread (Kafka's nanosToPercentage) */
            value = value * 100.0 / 1000.0;
        double rate = rate_record(q, &x->r[type], value, now, &win);
        if (bound >= 0 && rate > bound) {
            double t = bound > 0 ? (rate - bound) / bound * (double)win : (double)win;
            if (type == GR_QUOTA_REQUEST && t > (double)q->window_ms) /* ClientRequestQuotaManager caps at one window */
                t = (double)q->window_ms;
            ms = t > INT32_MAX ? INT32_MAX : (int32_t)llround(t);
        }
        gr_debug(LOGGER, "quota %s %s/%s: recorded %.0f, rate %.0f over %lld ms, bound %.0f, throttle %d ms",
                 quota_keys[type], u, c, value, rate, (long long)win, bound, ms);
    }
    pthread_mutex_unlock(&q->mu);
    free(u);
    free(c);
    return ms;
}

int32_t gr_quota_throttle(struct gr_broker *b, struct gr_api_req *req, enum gr_quota_type type, double value) {
    if (!b || !b->quotas) return 0;
    int32_t ms = gr_quota_record(b->quotas, type, NULL, req->hdr.ClientId, value);
    if (ms > req->net->throttle_ms) req->net->throttle_ms = ms;
    if (ms > 0)
        gr_debug(LOGGER, "Channel throttled for client %s: %d ms", req->hdr.ClientId ? req->hdr.ClientId : "", ms);
    return ms;
}

/* ---- replication throttles (ReplicationQuotaManager) ---- */

#define REPL_SAMPLES 11     /* replication.quota.window.num */
#define REPL_WINDOW_MS 1000 /* replication.quota.window.size.seconds */

static void free_tt(struct throttled_topic *t) {
    free(t->topic);
    free(t->parts[0]);
    free(t->parts[1]);
    free(t);
}

void gr_quota_replication_topic_changed(struct gr_quota_manager *q, const char *topic) {
    if (!q) return;
    pthread_mutex_lock(&q->rmu);
    for (struct throttled_topic **pp = &q->throttled; *pp;) {
        struct throttled_topic *t = *pp;
        if (!topic || strcmp(t->topic, topic) == 0) {
            *pp = t->next;
            free_tt(t);
        } else {
            pp = &t->next;
        }
    }
    pthread_mutex_unlock(&q->rmu);
}

/* Kafka's parseThrottledPartitions: "*" or "p:b,..." keeping the p whose b is this broker. */
static void parse_throttled(const char *v, int32_t broker, bool *all, int32_t **parts, int *n) {
    *all = false;
    *parts = NULL;
    *n = 0;
    if (!v) return;
    while (*v == ' ') v++;
    if (v[0] == '*') {
        *all = true;
        return;
    }
    for (const char *p = v; *p;) {
        long part, b;
        if (sscanf(p, " %ld:%ld", &part, &b) == 2 && b == broker) {
            *parts = gr_realloc(*parts, sizeof(int32_t) * (size_t)(*n + 1));
            (*parts)[(*n)++] = (int32_t)part;
        }
        p += strcspn(p, ",");
        if (*p) p++;
    }
}

static struct throttled_topic *throttled_of(struct gr_quota_manager *q, const char *topic) {
    for (struct throttled_topic *t = q->throttled; t; t = t->next)
        if (strcmp(t->topic, topic) == 0) return t;
    struct throttled_topic *t = gr_calloc(1, sizeof *t);
    t->topic = gr_strdup(topic);
    struct gr_kzk_config c = {0};
    if (q->b->zk && gr_kzk_get_entity_config(q->b->zk, "topics", topic, &c) == 0) {
        parse_throttled(gr_kzk_config_get(&c, "follower.replication.throttled.replicas"), q->b->broker_id, &t->all[0],
                        &t->parts[0], &t->nparts[0]);
        parse_throttled(gr_kzk_config_get(&c, "leader.replication.throttled.replicas"), q->b->broker_id, &t->all[1],
                        &t->parts[1], &t->nparts[1]);
        gr_kzk_config_release(&c);
    }
    t->next = q->throttled;
    q->throttled = t;
    return t;
}

bool gr_quota_replica_throttled(struct gr_quota_manager *q, bool leader, const char *topic, int32_t partition) {
    if (!q || gr_quota_replication_rate(q, leader) == INT64_MAX) return false;
    int k = leader ? 1 : 0;
    pthread_mutex_lock(&q->rmu);
    struct throttled_topic *t = throttled_of(q, topic);
    bool hit = t->all[k];
    for (int i = 0; i < t->nparts[k] && !hit; i++) hit = t->parts[k][i] == partition;
    pthread_mutex_unlock(&q->rmu);
    return hit;
}

static double repl_rate_locked(struct rate *r, int64_t now, double add) {
    struct gr_quota_manager tmp = {.samples = REPL_SAMPLES, .window_ms = REPL_WINDOW_MS};
    int64_t win;
    return rate_record(&tmp, r, add, now, &win);
}

bool gr_quota_replication_exceeded(struct gr_quota_manager *q, bool leader) {
    if (!q) return false;
    int64_t bound = gr_quota_replication_rate(q, leader);
    if (bound == INT64_MAX) return false;
    pthread_mutex_lock(&q->rmu);
    double rate = repl_rate_locked(&q->repl[leader ? 1 : 0], gr_mono_ms(), 0);
    pthread_mutex_unlock(&q->rmu);
    return rate > (double)bound;
}

void gr_quota_replication_record(struct gr_quota_manager *q, bool leader, double bytes) {
    if (!q || bytes <= 0) return;
    pthread_mutex_lock(&q->rmu);
    repl_rate_locked(&q->repl[leader ? 1 : 0], gr_mono_ms(), bytes);
    pthread_mutex_unlock(&q->rmu);
}

/* ---- request quotas (ClientRequestQuotaManager) ---- */

static bool exempt(const struct gr_api_req *req) {
    switch (req->hdr.RequestApiKey) {
    case GR_API_LEADER_AND_ISR:
    case GR_API_STOP_REPLICA:
    case GR_API_UPDATE_METADATA:
    case GR_API_CONTROLLED_SHUTDOWN:
    case GR_API_ALTER_ISR:
    case GR_API_API_VERSIONS: return true;
    case GR_API_FETCH: return req->body && ((const struct FetchRequest *)req->body)->ReplicaId >= 0;
    default: return false;
    }
}

/* Raises the response's top-level ThrottleTimeMs (found through the codec's descriptor) to ms. */
static void raise_throttle_field(const struct gr_api_req *req, void *body, int32_t ms) {
    const struct gr_api_desc *d = gr_proto_api(req->hdr.RequestApiKey);
    if (!body || !d) return;
    const struct gr_struct_desc *sd = d->response;
    for (int i = 0; i < sd->nregular; i++) {
        const struct gr_field_desc *f = &sd->fields[i];
        if (!f->is_array && f->type == GR_FT_INT32 && strcmp(f->name, "ThrottleTimeMs") == 0) {
            int32_t *v = (int32_t *)((char *)body + f->offset);
            if (*v < ms) *v = ms;
            return;
        }
    }
}

void gr_quota_on_response(struct gr_api_req *req, void *body, bool on_dispatch_thread) {
    struct gr_broker *b = req->broker;
    if (!b || !b->quotas || exempt(req)) return;
    struct gr_quota_manager *q = b->quotas;
    pthread_mutex_lock(&q->mu);
    bool any = false;
    for (int i = 0; i < q->n && !any; i++) any = q->ents[i].has[GR_QUOTA_REQUEST];
    pthread_mutex_unlock(&q->mu);
    if (!any) return;
    double thread_ms = on_dispatch_thread ? (double)(gr_mono_us() - req->dispatch_us) / 1000.0 : 0.0;
    int32_t ms = gr_quota_record(q, GR_QUOTA_REQUEST, NULL, req->hdr.ClientId, thread_ms);
    if (ms <= 0) return;
    if (ms > req->net->throttle_ms) req->net->throttle_ms = ms;
    raise_throttle_field(req, body, ms);
}
