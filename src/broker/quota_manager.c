/* Client quotas and replication throttle rates: see quota_manager.h. */
#include "broker/quota_manager.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/apis.h"
#include "api/authorize.h"
#include "protocol/codec.h"
#include "protocol/desc.h"
#include "broker/broker.h"
#include "broker/dynamic_config_manager.h"
#include "common/config.h"
#include "common/log.h"
#include "common/rate.h"
#include "common/util.h"
#include "net/server.h"
#include "zk/backend.h"
#include "zk/kzk.h"

#define LOGGER "kafka.server.ClientQuotaManager"

#define DEFAULT "<default>"

#define NTYPES 4
static const char *const quota_keys[NTYPES] = {"producer_byte_rate", "consumer_byte_rate", "request_percentage",
                                               "controller_mutation_rate"};

/* One entity with quotas; names sanitized as stored, NULL = component absent. */
struct qent {
    char *user, *client;
    bool has[NTYPES];
    double v[NTYPES];
    struct qent *hnext; /* hash chain of its entity table */
};

/* The quota entities, immutable once built (a reload builds a new table and swaps it in). */
struct qtable {
    struct qent *ents;
    int n;
    struct qent **buckets;
    size_t nbuckets;
    bool any[NTYPES]; /* some entity has a quota of that type */
};

/* A quota sensor: the usage of one metric-tag pair (ClientQuotaManager's sensors). */
struct usage {
    char *key; /* "user\nclient" of the matched entity's components */
    uint64_t hash;
    int64_t last_ms; /* last recorded; idle longer than the expiry: removed */
    struct gr_rate r[NTYPES];
    struct usage *next;
};

#define USAGE_SHARDS 64
#define SWEEP_EVERY_MS 30000 /* Kafka's Metrics ExpireSensorTask period */

/* A shard of the sensors: its own lock and hash table, so clients of different shards never
 * wait for each other and no lookup scans more than its chain. */
struct usage_shard {
    pthread_mutex_t mu;
    struct usage **buckets;
    size_t nbuckets, count;
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
    struct gr_rate repl[2];               /* bytes of throttled replication traffic */
    struct gr_rate_cfg rc;             /* quota.window.num, quota.window.size.seconds */
    pthread_rwlock_t tmu;              /* guards the pointer `t` (readers: lookups; writer: reload) */
    struct qtable *t;
    struct usage_shard shards[USAGE_SHARDS];
    _Atomic int64_t sensor_expiry_ms; /* InactiveSensorExpirationTimeSeconds (3600 s) */
    _Atomic int64_t next_sweep_ms;    /* the record that passes it sweeps every shard */
    _Atomic int64_t repl_rate[2];     /* [0] follower, [1] leader */
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

static uint64_t hash_str(uint64_t h, const char *s) {
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) h = (h ^ *p) * 1099511628211ULL;
    return (h ^ (s ? 0xff : 0xfe)) * 1099511628211ULL; /* absent and "" differ */
}

static uint64_t ent_hash(const char *user, const char *client) {
    return hash_str(hash_str(14695981039346656037ULL, user), client);
}

static void free_table(struct qtable *t) {
    if (!t) return;
    for (int i = 0; i < t->n; i++) free(t->ents[i].user), free(t->ents[i].client);
    free(t->ents);
    free(t->buckets);
    free(t);
}

/* Takes ents (n of them) into a new table with its hash index. */
static struct qtable *build_table(struct qent *ents, int n) {
    struct qtable *t = gr_calloc(1, sizeof *t);
    t->ents = ents;
    t->n = n;
    t->nbuckets = 16;
    while (t->nbuckets < (size_t)n * 2) t->nbuckets *= 2;
    t->buckets = gr_calloc(t->nbuckets, sizeof *t->buckets);
    for (int i = 0; i < n; i++) {
        struct qent *e = &ents[i];
        size_t b = ent_hash(e->user, e->client) & (t->nbuckets - 1);
        e->hnext = t->buckets[b];
        t->buckets[b] = e;
        for (int k = 0; k < NTYPES; k++) t->any[k] |= e->has[k];
    }
    return t;
}

struct gr_quota_manager *gr_quota_manager_new(struct gr_broker *b) {
    struct gr_quota_manager *q = gr_calloc(1, sizeof *q);
    q->b = b;
    q->rc.samples = b->cfg && b->cfg->quota_window_num > 0 ? b->cfg->quota_window_num : 11;
    if (q->rc.samples > GR_RATE_MAX_SAMPLES) q->rc.samples = GR_RATE_MAX_SAMPLES;
    q->rc.window_ms =
        b->cfg && b->cfg->quota_window_size_seconds > 0 ? b->cfg->quota_window_size_seconds * 1000LL : 1000;
    pthread_rwlock_init(&q->tmu, NULL);
    q->t = build_table(NULL, 0);
    for (int i = 0; i < USAGE_SHARDS; i++) {
        pthread_mutex_init(&q->shards[i].mu, NULL);
        q->shards[i].nbuckets = 16;
        q->shards[i].buckets = gr_calloc(16, sizeof(struct usage *));
    }
    atomic_init(&q->sensor_expiry_ms, 3600LL * 1000);
    atomic_init(&q->next_sweep_ms, 0);
    pthread_mutex_init(&q->rmu, NULL);
    atomic_init(&q->repl_rate[0], INT64_MAX);
    atomic_init(&q->repl_rate[1], INT64_MAX);
    gr_quota_manager_reload(q);
    gr_quota_manager_reload_replication(q);
    return q;
}

void gr_quota_manager_free(struct gr_quota_manager *q) {
    if (!q) return;
    free_table(q->t);
    for (int i = 0; i < USAGE_SHARDS; i++) {
        struct usage_shard *sh = &q->shards[i];
        for (size_t b = 0; b < sh->nbuckets; b++)
            for (struct usage *u = sh->buckets[b], *nx; u; u = nx) {
                nx = u->next;
                free(u->key);
                free(u);
            }
        free(sh->buckets);
        pthread_mutex_destroy(&sh->mu);
    }
    gr_quota_replication_topic_changed(q, NULL);
    pthread_mutex_destroy(&q->rmu);
    pthread_rwlock_destroy(&q->tmu);
    free(q);
}

/* Adds the entity at /config/<path> if it has quota keys. */
/* Adds the quotas of one entity. false: ZooKeeper could not be read (a config that does not
 * parse counts as no quotas). */
static bool load_one(struct gr_kzk *zk, const char *type, const char *name, const char *user, const char *client,
                     struct qent **ents, int *n, int *cap) {
    struct gr_kzk_config c = {0};
    int rc = gr_kzk_get_entity_config(zk, type, name, &c);
    if (rc != 0) return rc == GR_ECORRUPT;
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
    if (!any) return true;
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *ents = gr_realloc(*ents, sizeof **ents * (size_t)*cap);
    }
    e.user = user ? gr_strdup(user) : NULL;
    e.client = client ? gr_strdup(client) : NULL;
    (*ents)[(*n)++] = e;
    return true;
}

/* A listing that worked (an absent parent is an empty one). */
static bool listed(int zrc) { return zrc == GR_ZOK || zrc == GR_ZNONODE; }

bool gr_quota_manager_reload(struct gr_quota_manager *q) {
    if (!q || !q->b->zk) return true;
    struct gr_kzk *zk = q->b->zk;
    struct gr_zk_backend *zb = gr_kzk_backend(zk);
    struct qent *ents = NULL;
    int n = 0, cap = 0;
    struct gr_zstrings users = {0}, clients = {0};
    int urc = gr_zkb_get_children(zb, "/config/users", false, &users);
    bool ok = listed(urc);
    if (urc == GR_ZOK)
        for (int i = 0; i < users.count && ok; i++) {
            ok = load_one(zk, "users", users.names[i], users.names[i], NULL, &ents, &n, &cap);
            char *p = gr_asprintf("/config/users/%s/clients", users.names[i]);
            struct gr_zstrings uc = {0};
            int crc = gr_zkb_get_children(zb, p, false, &uc);
            ok = ok && listed(crc);
            if (crc == GR_ZOK)
                for (int j = 0; j < uc.count && ok; j++) {
                    char *nm = gr_asprintf("%s/clients/%s", users.names[i], uc.names[j]);
                    ok = load_one(zk, "users", nm, users.names[i], uc.names[j], &ents, &n, &cap);
                    free(nm);
                }
            gr_zstrings_free(&uc);
            free(p);
        }
    int crc = ok ? gr_zkb_get_children(zb, "/config/clients", false, &clients) : GR_ZOK;
    ok = ok && listed(crc);
    if (ok && crc == GR_ZOK)
        for (int i = 0; i < clients.count && ok; i++)
            ok = load_one(zk, "clients", clients.names[i], NULL, clients.names[i], &ents, &n, &cap);
    gr_zstrings_free(&users);
    gr_zstrings_free(&clients);
    struct qtable *t = build_table(ents, n), *old;
    if (!ok) { /* a read failed: the quotas in force stay, the change is handed again */
        free_table(t);
        gr_warn(LOGGER, "Cannot read the client quotas from ZooKeeper; the quotas in force stay");
        return false;
    }
    pthread_rwlock_wrlock(&q->tmu);
    old = q->t;
    q->t = t;
    pthread_rwlock_unlock(&q->tmu);
    free_table(old);
    gr_info(LOGGER, "%d client quota entit%s loaded", n, n == 1 ? "y" : "ies");
    return true;
}

bool gr_quota_manager_reload_ips(struct gr_quota_manager *q) {
    if (!q || !q->b->zk || !q->b->net) return true;
    struct gr_kzk *zk = q->b->zk;
    struct gr_zstrings ips = {0};
    int rc = gr_zkb_get_children(gr_kzk_backend(zk), "/config/ips", false, &ips);
    if (rc != GR_ZOK && rc != GR_ZNONODE) {
        gr_warn(LOGGER, "Cannot read /config/ips (ZooKeeper error %d); the IP connection rate quotas stay as they were",
                rc);
        return false;
    }
    const char **names = gr_calloc((size_t)ips.count + 1, sizeof *names);
    double *rates = gr_calloc((size_t)ips.count + 1, sizeof *rates);
    double dflt = -1;
    int n = 0;
    bool ok = true;
    for (int i = 0; i < ips.count && ok; i++) {
        struct gr_kzk_config c = {0};
        int erc = gr_kzk_get_entity_config(zk, "ips", ips.names[i], &c);
        if (erc != 0) {
            ok = erc == GR_ECORRUPT; /* one that does not parse has no rate */
            continue;
        }
        const char *v = gr_kzk_config_get(&c, "connection_creation_rate");
        char *end;
        double r = v ? strtod(v, &end) : -1;
        if (v && *v && !*end && r >= 0) {
            if (strcmp(ips.names[i], DEFAULT) == 0) {
                dflt = r;
            } else {
                names[n] = ips.names[i];
                rates[n++] = r;
            }
        }
        gr_kzk_config_release(&c);
    }
    if (ok) gr_net_server_set_ip_connection_rates(q->b->net, dflt, names, rates, n);
    else gr_warn(LOGGER, "Cannot read the IP connection rate quotas from ZooKeeper; the limits in force stay");
    free(names);
    free(rates);
    gr_zstrings_free(&ips);
    return ok;
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

static const struct qent *lookup(const struct qtable *t, const char *user, const char *client) {
    for (const struct qent *e = t->buckets[ent_hash(user, client) & (t->nbuckets - 1)]; e; e = e->hnext)
        if (eq(e->user, user) && eq(e->client, client)) return e;
    return NULL;
}

/* The most specific entity with a quota of type t (tmu held for reading); NULL if none. Eight
 * hash lookups, whatever the number of entities. */
static const struct qent *find(const struct qtable *t, int type, const char *u, const char *c) {
    if (!t->any[type]) return NULL;
    const char *order[8][2] = {{u, c},          {u, DEFAULT}, {u, NULL},      {DEFAULT, c}, {DEFAULT, DEFAULT},
                               {DEFAULT, NULL}, {NULL, c},    {NULL, DEFAULT}};
    for (int k = 0; k < 8; k++) {
        const struct qent *e = lookup(t, order[k][0], order[k][1]);
        if (e && e->has[type]) return e;
    }
    return NULL;
}

double gr_quota_bound(struct gr_quota_manager *q, enum gr_quota_type type, const char *user, const char *client_id) {
    if (!q) return -1;
    char *u = sanitize(user ? user : "ANONYMOUS"), *c = sanitize(client_id ? client_id : "");
    pthread_rwlock_rdlock(&q->tmu);
    const struct qent *e = find(q->t, (int)type, u, c);
    double v = e ? e->v[type] : -1;
    pthread_rwlock_unlock(&q->tmu);
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
    pthread_rwlock_rdlock(&q->tmu);
    *any = q->t->any[type];
    const struct qent *e = find(q->t, (int)type, u, c);
    double v = e ? e->v[type] : -1;
    if (e) *sensor = gr_asprintf("%s\n%s", e->user ? u : "", e->client ? c : "");
    pthread_rwlock_unlock(&q->tmu);
    free(u);
    free(c);
    return v;
}

/* ---- rates ---- */

/* Removes the sensors of the shard idle for longer than expiry (shard locked). */
static void sweep(struct usage_shard *sh, int64_t now, int64_t expiry) {
    for (size_t b = 0; b < sh->nbuckets; b++)
        for (struct usage **pp = &sh->buckets[b]; *pp;) {
            struct usage *x = *pp;
            if (now - x->last_ms > expiry) {
                *pp = x->next;
                free(x->key);
                free(x);
                sh->count--;
            } else {
                pp = &x->next;
            }
        }
}

/* Kafka's ExpireSensorTask: at most once per period (the caller that claims it), every shard in
 * turn, each under its own lock only. */
static void maybe_sweep(struct gr_quota_manager *q, int64_t now) {
    int64_t due = atomic_load(&q->next_sweep_ms);
    if (now < due) return;
    int64_t expiry = atomic_load(&q->sensor_expiry_ms);
    if (!atomic_compare_exchange_strong(&q->next_sweep_ms, &due,
                                        now + (expiry < SWEEP_EVERY_MS ? expiry : SWEEP_EVERY_MS)))
        return;
    for (int i = 0; i < USAGE_SHARDS; i++) {
        pthread_mutex_lock(&q->shards[i].mu);
        sweep(&q->shards[i], now, expiry);
        pthread_mutex_unlock(&q->shards[i].mu);
    }
}

static void grow(struct usage_shard *sh) {
    size_t nb = sh->nbuckets * 2;
    struct usage **nbk = gr_calloc(nb, sizeof *nbk);
    for (size_t b = 0; b < sh->nbuckets; b++)
        for (struct usage *x = sh->buckets[b], *nx; x; x = nx) {
            nx = x->next;
            x->next = nbk[x->hash & (nb - 1)];
            nbk[x->hash & (nb - 1)] = x;
        }
    free(sh->buckets);
    sh->buckets = nbk;
    sh->nbuckets = nb;
}

/* The sensor of key in its shard (shard locked), created if missing. */
static struct usage *usage_of(struct usage_shard *sh, const char *key, uint64_t h) {
    for (struct usage *x = sh->buckets[h & (sh->nbuckets - 1)]; x; x = x->next)
        if (x->hash == h && strcmp(x->key, key) == 0) return x;
    if (sh->count >= sh->nbuckets) grow(sh);
    struct usage *x = gr_calloc(1, sizeof *x);
    x->key = gr_strdup(key);
    x->hash = h;
    x->next = sh->buckets[h & (sh->nbuckets - 1)];
    sh->buckets[h & (sh->nbuckets - 1)] = x;
    sh->count++;
    return x;
}

int32_t gr_quota_record_at(struct gr_quota_manager *q, enum gr_quota_type type, const char *user,
                           const char *client_id, double value, int64_t now) {
    if (!q) return 0;
    char *u = sanitize(user ? user : "ANONYMOUS"), *c = sanitize(client_id ? client_id : "");
    int32_t ms = 0;
    pthread_rwlock_rdlock(&q->tmu);
    const struct qent *e = find(q->t, (int)type, u, c);
    if (e) {
        /* the sensor's tags: the actual names for the components the quota entity has */
        char *key = gr_asprintf("%s\n%s", e->user ? u : "", e->client ? c : "");
        uint64_t h = hash_str(14695981039346656037ULL, key);
        struct usage_shard *sh = &q->shards[(h >> 32) % USAGE_SHARDS];
        double bound = e->v[type];
        pthread_mutex_lock(&sh->mu);
        struct usage *x = usage_of(sh, key, h);
        free(key);
        x->last_ms = now;
        int64_t win;
        if (type == GR_QUOTA_REQUEST) /* thread ms -> percent-seconds of one thread (Kafka's nanosToPercentage) */
            value = value * 100.0 / 1000.0;
        double rate = gr_rate_record(&q->rc, &x->r[type], value, now, &win);
        pthread_mutex_unlock(&sh->mu);
        if (bound >= 0 && rate > bound) {
            int64_t t = gr_rate_throttle_ms(rate, bound, win);
            if (type == GR_QUOTA_REQUEST && t > q->rc.window_ms) /* ClientRequestQuotaManager caps at one window */
                t = q->rc.window_ms;
            ms = t > INT32_MAX ? INT32_MAX : (int32_t)t;
        }
        gr_debug(LOGGER, "quota %s %s/%s: recorded %.0f, rate %.0f over %lld ms, bound %.0f, throttle %d ms",
                 quota_keys[type], u, c, value, rate, (long long)win, bound, ms);
    }
    pthread_rwlock_unlock(&q->tmu);
    maybe_sweep(q, now);
    free(u);
    free(c);
    return ms;
}

int32_t gr_quota_record(struct gr_quota_manager *q, enum gr_quota_type type, const char *user, const char *client_id,
                        double value) {
    return gr_quota_record_at(q, type, user, client_id, value, gr_mono_ms());
}

void gr_quota_set_sensor_expiry(struct gr_quota_manager *q, int64_t ms) {
    if (q) atomic_store(&q->sensor_expiry_ms, ms);
}

int gr_quota_sensor_count(struct gr_quota_manager *q) {
    int n = 0;
    for (int i = 0; q && i < USAGE_SHARDS; i++) {
        pthread_mutex_lock(&q->shards[i].mu);
        n += (int)q->shards[i].count;
        pthread_mutex_unlock(&q->shards[i].mu);
    }
    return n;
}

/* The user name Kafka's quota callback sees: the principal's name without its type
 * (KafkaPrincipal.getName: "User:alice" -> "alice", a certificate's DN for TLS). */
static const char *quota_user(const struct gr_api_req *req) {
    const char *p = gr_api_principal(req);
    const char *colon = p ? strchr(p, ':') : NULL;
    return colon ? colon + 1 : "ANONYMOUS";
}

int32_t gr_quota_throttle(struct gr_broker *b, struct gr_api_req *req, enum gr_quota_type type, double value) {
    if (!b || !b->quotas) return 0;
    int32_t ms = gr_quota_record(b->quotas, type, quota_user(req), req->hdr.ClientId, value);
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

static double repl_rate_locked(struct gr_rate *r, int64_t now, double add) {
    static const struct gr_rate_cfg rc = {.samples = REPL_SAMPLES, .window_ms = REPL_WINDOW_MS};
    return gr_rate_record(&rc, r, add, now, NULL);
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
    case GR_API_ALTER_PARTITION:
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
    pthread_rwlock_rdlock(&q->tmu);
    bool any = q->t->any[GR_QUOTA_REQUEST];
    pthread_rwlock_unlock(&q->tmu);
    if (!any) return;
    double thread_ms = on_dispatch_thread ? (double)(gr_mono_us() - req->dispatch_us) / 1000.0 : 0.0;
    int32_t ms = gr_quota_record(q, GR_QUOTA_REQUEST, quota_user(req), req->hdr.ClientId, thread_ms);
    if (ms <= 0) return;
    if (ms > req->net->throttle_ms) req->net->throttle_ms = ms;
    raise_throttle_field(req, body, ms);
}
