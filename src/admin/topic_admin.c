/* Topic creation, partition addition and the delayed operations waiting for their leaders; see
 * topic_admin.h. Order of checks follows Kafka 2.7's AdminManager.createTopics and
 * AdminZkClient.validateTopicCreate / createPartitions. */
#include "admin/topic_admin.h"
#include "common/metadata_version.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "admin/assignment.h"
#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "admin/topic_names.h"
#include "common/config.h"
#include "common/config_model.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "zk/kzk.h"

#define LOGGER "kafka.server.AdminManager"

/* ------------------------------------------------------------------ results */

static int16_t fail(struct gr_topic_result *res, int16_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int16_t fail(struct gr_topic_result *res, int16_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->message, sizeof(res->message), fmt, ap);
    va_end(ap);
    res->error = code;
    return code;
}

static void res_init(struct gr_topic_result *res)
{
    memset(res, 0, sizeof(*res));
    res->num_partitions = -1;
    res->replication_factor = -1;
}

/* ------------------------------------------------------------------ topic configs */

/* Kafka 2.7 LogConfig's names, types and ranges live in the config model (common/config_model.h);
 * CreateTopics reports every problem as INVALID_CONFIG (AdminManager.createTopics). */
int16_t gr_topic_config_validate(const char *name, const char *value, char *err, size_t errlen)
{
    return gr_topic_config_check(name, value, err, errlen) == GR_CFG_OK ? GR_KERR_NONE : GR_KERR_INVALID_CONFIG;
}

/* ------------------------------------------------------------------ broker lists */

static int zk_brokers(struct gr_broker *b, struct gr_broker_meta **out, int *n)
{
    struct gr_kzk_broker *zb = NULL;
    int nz = 0;
    int rc = gr_kzk_get_all_brokers(b->zk, false, false, &zb, &nz);
    if (rc != 0)
        return rc;
    *out = gr_calloc((size_t)(nz ? nz : 1), sizeof(**out));
    for (int i = 0; i < nz; i++) {
        (*out)[i].id = zb[i].id;
        (*out)[i].rack = zb[i].rack ? gr_strdup(zb[i].rack) : NULL;
    }
    *n = nz;
    gr_kzk_brokers_free(zb, nz);
    return 0;
}

/* RackAwareMode.Safe (auto-creation): if only some brokers have a rack, ignore racks. */
static void drop_racks_if_mixed(struct gr_broker_meta *m, int n)
{
    int with = 0;
    for (int i = 0; i < n; i++)
        with += m[i].rack != NULL;
    if (with == 0 || with == n)
        return;
    for (int i = 0; i < n; i++) {
        free((char *)m[i].rack);
        m[i].rack = NULL;
    }
}

/* ------------------------------------------------------------------ existing topic names */

/* The topic names a CreateTopics request checks against: /brokers/topics' children, read once per
 * request, plus the names this request is creating. Hashed by their collision form ('.' -> '_'),
 * so the exact-name and the collision checks are one chain walk each. */
struct name_entry {
    char *name;
    uint64_t h;
    int next;
};
struct name_set {
    int n, cap;
    struct name_entry *e;
    int nb;
    int *heads; /* nb buckets, -1 = empty */
};

static uint64_t collision_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a over the collision form */
    for (; *s; s++) {
        unsigned char c = (unsigned char)(*s == '.' ? '_' : *s);
        h = (h ^ c) * 1099511628211ULL;
    }
    return h;
}

static void name_set_rehash(struct name_set *s, int nb)
{
    free(s->heads);
    s->nb = nb;
    s->heads = gr_malloc(sizeof(int) * (size_t)nb);
    for (int i = 0; i < nb; i++)
        s->heads[i] = -1;
    for (int i = 0; i < s->n; i++) {
        int b = (int)(s->e[i].h % (uint64_t)nb);
        s->e[i].next = s->heads[b];
        s->heads[b] = i;
    }
}

/* Adds a copy of name (no duplicate check). */
static void name_set_add(struct name_set *s, const char *name)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->e = gr_realloc(s->e, sizeof(*s->e) * (size_t)s->cap);
    }
    struct name_entry *e = &s->e[s->n];
    e->name = gr_strdup(name);
    e->h = collision_hash(name);
    s->n++;
    if (s->n > s->nb) {
        name_set_rehash(s, s->cap * 2);
        return;
    }
    int b = (int)(e->h % (uint64_t)s->nb);
    e->next = s->heads[b];
    s->heads[b] = s->n - 1;
}

/* GR_KERR_NONE, TOPIC_ALREADY_EXISTS (name is in the set) or INVALID_TOPIC_EXCEPTION (a
 * different name with the same collision form, written to *other). */
static int16_t name_set_check(const struct name_set *s, const char *name, const char **other)
{
    if (s->nb == 0)
        return GR_KERR_NONE;
    uint64_t h = collision_hash(name);
    int16_t e = GR_KERR_NONE;
    for (int i = s->heads[h % (uint64_t)s->nb]; i >= 0; i = s->e[i].next) {
        if (s->e[i].h != h)
            continue;
        if (strcmp(s->e[i].name, name) == 0)
            return GR_KERR_TOPIC_ALREADY_EXISTS;
        if (e == GR_KERR_NONE && gr_topic_collides(name, s->e[i].name)) {
            e = GR_KERR_INVALID_TOPIC_EXCEPTION;
            *other = s->e[i].name;
        }
    }
    return e;
}

static void name_set_free(struct name_set *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->e[i].name);
    free(s->e);
    free(s->heads);
    memset(s, 0, sizeof(*s));
}

/* ------------------------------------------------------------------ create topics */

/* What one request reads from ZooKeeper and the metadata cache, at most once each. */
struct create_ctx {
    struct gr_broker *b;
    bool use_zk_brokers;
    bool names_read;
    int names_rc; /* kzk code of the /brokers/topics read */
    struct name_set names;
    bool brokers_read;
    bool brokers_from_zk_retried;
    int brokers_rc;
    struct gr_broker_meta *brokers;
    int nb;
};

/* A validated topic waiting to be written: the two znodes' JSON. */
struct pending_topic {
    int idx; /* into specs / results */
    char *cjson, *ajson;
    size_t clen, alen;
    struct gr_uuid id; /* in ajson */
};

static int16_t check_exists_and_collisions(struct create_ctx *c, const char *name,
                                           struct gr_topic_result *res)
{
    struct gr_broker *b = c->b;
    if (b->metadata && gr_mdc_contains_topic(b->metadata, name))
        return fail(res, GR_KERR_TOPIC_ALREADY_EXISTS, "Topic '%s' already exists.", name);
    if (!b->zk)
        return GR_KERR_NONE;
    if (!c->names_read) {
        c->names_read = true;
        struct gr_zstrings all = { 0, NULL };
        c->names_rc = gr_kzk_get_topics(b->zk, false, &all);
        for (int i = 0; c->names_rc == 0 && i < all.count; i++)
            name_set_add(&c->names, all.names[i]);
        gr_zstrings_free(&all);
    }
    if (c->names_rc != 0)
        return fail(res, GR_KERR_UNKNOWN_SERVER_ERROR, "cannot list topics in ZooKeeper: %s",
                    gr_kzk_strerror(c->names_rc));
    const char *other = NULL;
    int16_t e = name_set_check(&c->names, name, &other);
    if (e == GR_KERR_TOPIC_ALREADY_EXISTS)
        return fail(res, e, "Topic '%s' already exists.", name);
    if (e == GR_KERR_INVALID_TOPIC_EXCEPTION)
        return fail(res, e, "Topic '%s' collides with existing topics: %s", name, other);
    return GR_KERR_NONE;
}

/* The brokers an assignment may use (see gr_topic_admin_create_topic), read once. */
static int ctx_brokers(struct create_ctx *c)
{
    if (c->brokers_read)
        return c->brokers_rc;
    c->brokers_read = true;
    struct gr_broker *b = c->b;
    if (c->use_zk_brokers && b->zk)
        c->brokers_rc = zk_brokers(b, &c->brokers, &c->nb);
    else if (b->metadata)
        gr_mdc_alive_brokers(b->metadata, &c->brokers, &c->nb);
    if (c->brokers_rc == 0 && c->use_zk_brokers)
        drop_racks_if_mixed(c->brokers, c->nb);
    return c->brokers_rc;
}

/* Validates one topic (the checks of gr_topic_admin_create_topic, in Kafka's order) and encodes
 * its znodes into *out. Returns res->error. */
static int16_t prepare_topic(struct create_ctx *c, const struct gr_topic_spec *spec,
                             int fixed_start_index, struct gr_topic_result *res,
                             struct pending_topic *out)
{
    res_init(res);
    struct gr_broker *b = c->b;
    const char *name = spec->name;
    char msg[256];
    int16_t e;

    if (gr_topic_validate_name(name, msg, sizeof(msg)) != GR_KERR_NONE)
        return fail(res, GR_KERR_INVALID_TOPIC_EXCEPTION, "%s", msg);
    /* Existence first, in the cache and in ZooKeeper: this broker's cache may lag (it just
     * restarted, or a failover is under way), and an existing topic must never be answered with
     * an assignment error such as INVALID_REPLICATION_FACTOR while few brokers are alive (the
     * chaos suite saw that turn into a producer's fatal error). */
    e = check_exists_and_collisions(c, name, res);
    if (e != GR_KERR_NONE)
        return e;
    for (int i = 0; i < spec->n_configs; i++)
        if (!spec->config_values[i])
            return fail(res, GR_KERR_INVALID_REQUEST,
                        "Null value not supported for topic configs : %s",
                        spec->config_names[i]);
    if ((spec->num_partitions != -1 || spec->replication_factor != -1) &&
        spec->n_assignments > 0)
        return fail(res, GR_KERR_INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.");

    int32_t nparts = spec->num_partitions;
    int rf = spec->replication_factor;
    if (nparts == -1)
        nparts = b->cfg ? b->cfg->num_partitions : 1;
    if (rf == -1)
        rf = b->cfg ? b->cfg->default_replication_factor : 1;

    /* The assignment, as a gr_kzk_topic_assignment. */
    struct gr_kzk_topic_assignment ta = { 0 };
    ta.topic = (char *)name;
    int32_t *flat = NULL;
    if (spec->n_assignments > 0) {
        e = gr_assign_validate_new_topic(spec->n_assignments, spec->partition_ids,
                                         spec->replicas, spec->n_replicas, msg, sizeof(msg));
        if (e != GR_KERR_NONE)
            return fail(res, e, "%s", msg);
        nparts = spec->n_assignments;
        rf = spec->n_replicas[0];
        ta.n_partitions = nparts;
        ta.partitions = gr_calloc((size_t)nparts, sizeof(*ta.partitions));
        for (int i = 0; i < nparts; i++) {
            /* validate_new_topic guaranteed ids are a permutation of 0..n-1 */
            struct gr_kzk_partition_assignment *pa = &ta.partitions[spec->partition_ids[i]];
            pa->partition = spec->partition_ids[i];
            pa->n_replicas = spec->n_replicas[i];
            pa->replicas = (int32_t *)spec->replicas[i];
        }
    } else {
        int rc = ctx_brokers(c);
        if (rc == 0 && rf > c->nb && !c->use_zk_brokers && b->zk && !c->brokers_from_zk_retried) {
            /* Kafka takes the live brokers from the metadata cache only, which lags
             * /brokers/ids for a moment after brokers start: rather than answer
             * INVALID_REPLICATION_FACTOR from a stale cache, ask ZooKeeper once. */
            gr_broker_metas_free(c->brokers, c->nb);
            c->brokers = NULL;
            c->nb = 0;
            c->brokers_read = false;
            c->use_zk_brokers = true;
            c->brokers_from_zk_retried = true;
            rc = ctx_brokers(c);
        }
        if (rc != 0)
            return fail(res, GR_KERR_UNKNOWN_SERVER_ERROR,
                        "cannot read brokers from ZooKeeper: %s", gr_kzk_strerror(rc));
        if (nparts > 0 && rf > 0 && rf <= c->nb)
            flat = gr_malloc(sizeof(int32_t) * (size_t)nparts * (size_t)rf);
        e = gr_assign_replicas(c->brokers, c->nb, nparts, rf, fixed_start_index, 0, flat, msg,
                               sizeof(msg));
        if (e != GR_KERR_NONE) {
            free(flat);
            return fail(res, e, "%s", msg);
        }
        ta.n_partitions = nparts;
        ta.partitions = gr_calloc((size_t)nparts, sizeof(*ta.partitions));
        for (int i = 0; i < nparts; i++) {
            ta.partitions[i].partition = i;
            ta.partitions[i].n_replicas = rf;
            ta.partitions[i].replicas = flat + (size_t)i * (size_t)rf;
        }
    }
    res->num_partitions = nparts;
    res->replication_factor = (int16_t)rf;

    e = GR_KERR_NONE;
    for (int i = 0; e == GR_KERR_NONE && i < spec->n_configs; i++) {
        if (gr_topic_config_validate(spec->config_names[i], spec->config_values[i], msg,
                                     sizeof(msg)) != GR_KERR_NONE)
            e = fail(res, GR_KERR_INVALID_CONFIG, "%s", msg);
    }
    if (e == GR_KERR_NONE &&
        gr_topic_configs_check_all(spec->n_configs, (char *const *)spec->config_names,
                                   (char *const *)spec->config_values, msg, sizeof(msg)) != GR_CFG_OK)
        e = fail(res, GR_KERR_INVALID_CONFIG, "%s", msg);
    if (e == GR_KERR_NONE && out && !b->zk) /* out == NULL: validate only */
        e = fail(res, GR_KERR_UNKNOWN_SERVER_ERROR, "no ZooKeeper connection");
    if (e == GR_KERR_NONE && out) {
        struct gr_kzk_config cfg = { spec->n_configs, (char **)spec->config_names,
                                     (char **)spec->config_values };
        out->cjson = gr_kzk_config_encode(&cfg, &out->clen);
        char idtext[GR_UUID_STR_LEN + 1];
        struct gr_ibp_features ibp; /* AdminZkClient's usesTopicId: inter.broker.protocol.version 2.8+ */
        gr_ibp_features(b->cfg ? b->cfg->inter_broker_protocol_version : NULL, &ibp);
        memset(&out->id, 0, sizeof out->id);
        if (ibp.topic_ids) {
            gr_uuid_random(&out->id); /* the one place a topic id is born (the controller only adds
                                       * ids to topics created without one) */
            ta.topic_id = gr_uuid_to_string(&out->id, idtext);
        }
        out->ajson = gr_kzk_topic_assignment_encode(&ta, &out->alen);
    }
    free(ta.partitions);
    free(flat);
    if (e == GR_KERR_NONE)
        res->error = GR_KERR_NONE;
    return e;
}

static void log_created(const char *name, const struct gr_topic_result *res)
{
    gr_info(LOGGER, "Creating topic %s with %d partitions and replication factor %d", name,
            res->num_partitions, res->replication_factor);
}

/* Did /brokers/topics/T get exactly our assignment (our own write, applied before a connection
 * loss hid its answer)? */
static bool assignment_is_ours(struct gr_broker *b, const char *name, const char *ajson)
{
    struct gr_kzk_topic_assignment cur;
    memset(&cur, 0, sizeof(cur));
    bool ours = false;
    if (gr_kzk_get_topic_assignments(b->zk, &name, 1, false, &cur) == 0 && cur.rc == 0) {
        size_t len;
        char *json = gr_kzk_topic_assignment_encode(&cur, &len);
        ours = strcmp(json, ajson) == 0;
        free(json);
    }
    gr_kzk_topic_assignment_release(&cur);
    return ours;
}

/* One topic written on its own (the fallback of a failed batch): AdminZkClient's writes through
 * gr_kzk_create_topic, which also handles a leftover /config/topics/T and missing parents.
 * maybe_applied: the batch's multi may have been applied (connection loss). */
static void write_one(struct gr_broker *b, const struct gr_topic_spec *spec,
                      const struct pending_topic *p, struct gr_topic_result *res,
                      bool maybe_applied)
{
    const char *name = spec->name;
    struct gr_kzk_topic_assignment ta;
    memset(&ta, 0, sizeof(ta));
    int rc = gr_kzk_topic_assignment_decode(p->ajson, p->alen, &ta);
    if (rc == 0) {
        struct gr_kzk_config cfg = { spec->n_configs, (char **)spec->config_names,
                                     (char **)spec->config_values };
        rc = gr_kzk_create_topic(b->zk, name, &ta, &cfg);
    }
    gr_kzk_topic_assignment_release(&ta);
    if (rc == GR_KZK_EEXISTS && maybe_applied && assignment_is_ours(b, name, p->ajson))
        rc = 0;
    if (rc == GR_KZK_EEXISTS)
        fail(res, GR_KERR_TOPIC_ALREADY_EXISTS, "Topic '%s' already exists.", name);
    else if (rc != 0)
        fail(res, GR_KERR_UNKNOWN_SERVER_ERROR, "cannot create topic '%s': %s", name,
             gr_kzk_strerror(rc));
    else
        log_created(name, res);
}

/* Topics per multi: two creates each, within the backend's multi size and well below
 * ZooKeeper's 1 MiB request limit (jute.maxbuffer). */
#define CREATE_BATCH_TOPICS 500
#define CREATE_BATCH_BYTES (512 * 1024)

/* Writes p[0..n) in multis of {create /config/topics/T, create /brokers/topics/T} per topic, in
 * that order (a watcher never sees an assignment without its config). A multi that fails is
 * all-or-nothing, so its topics are then written one by one (write_one), which gives each its own
 * outcome: TOPIC_ALREADY_EXISTS for a topic a concurrent creator won, success for the others. */
static void write_pending(struct gr_broker *b, const struct gr_topic_spec *specs,
                          struct pending_topic *p, int n, struct gr_topic_result *results)
{
    struct gr_zk_backend *zb = gr_kzk_backend(b->zk);
    struct gr_zop *ops = gr_malloc(sizeof(*ops) * 2 * CREATE_BATCH_TOPICS);
    struct gr_zop_result *zr = gr_calloc(2 * CREATE_BATCH_TOPICS, sizeof(*zr));
    char **paths = gr_calloc(2 * CREATE_BATCH_TOPICS, sizeof(char *));
    for (int start = 0; start < n;) {
        int m = 0;
        size_t bytes = 0;
        while (start + m < n && m < CREATE_BATCH_TOPICS) {
            const struct pending_topic *q = &p[start + m];
            size_t sz = q->clen + q->alen + 2 * strlen(specs[q->idx].name) + 64;
            if (m > 0 && bytes + sz > CREATE_BATCH_BYTES)
                break;
            bytes += sz;
            const char *name = specs[q->idx].name;
            paths[2 * m] = gr_asprintf("/config/topics/%s", name);
            paths[2 * m + 1] = gr_asprintf("/brokers/topics/%s", name);
            ops[2 * m] = gr_zop_create(paths[2 * m], q->cjson, (int)q->clen, 0);
            ops[2 * m + 1] = gr_zop_create(paths[2 * m + 1], q->ajson, (int)q->alen, 0);
            m++;
        }
        int zrc = gr_zkb_multi(zb, ops, 2 * m, zr);
        gr_zop_results_release(zr, 2 * m);
        for (int i = 0; i < 2 * m; i++) {
            free(paths[i]);
            paths[i] = NULL;
        }
        if (zrc == GR_ZOK) {
            for (int i = 0; i < m; i++)
                log_created(specs[p[start + i].idx].name, &results[p[start + i].idx]);
        } else {
            bool maybe = zrc == GR_ZCONNECTIONLOSS || zrc == GR_ZOPERATIONTIMEOUT;
            if (m > 1 || zrc != GR_ZNODEEXISTS)
                gr_info(LOGGER, "Creating %d topics in one transaction failed (%s); writing them "
                        "one by one", m, gr_zrc_name(zrc));
            for (int i = 0; i < m; i++)
                write_one(b, &specs[p[start + i].idx], &p[start + i], &results[p[start + i].idx],
                          maybe);
        }
        start += m;
    }
    free(paths);
    free(zr);
    free(ops);
}

int gr_topic_admin_create_topics(struct gr_broker *b, const struct gr_topic_spec *specs, int n,
                                 bool validate_only, bool use_zk_brokers, int fixed_start_index,
                                 struct gr_topic_result *results)
{
    struct create_ctx c = { .b = b, .use_zk_brokers = use_zk_brokers };
    struct pending_topic *p = gr_calloc((size_t)(n ? n : 1), sizeof(*p));
    int np = 0, n_ok = 0;
    for (int i = 0; i < n; i++) {
        struct pending_topic *q = validate_only ? NULL : &p[np];
        if (prepare_topic(&c, &specs[i], fixed_start_index, &results[i], q) != GR_KERR_NONE)
            continue;
        n_ok++;
        if (validate_only)
            continue;
        q->idx = i;
        np++;
        /* later topics of this request check against it (collisions, as when written one by
         * one) */
        if (c.names_read && c.names_rc == 0)
            name_set_add(&c.names, specs[i].name);
    }
    if (np > 0)
        write_pending(b, specs, p, np, results);
    for (int i = 0; i < np; i++) {
        free(p[i].cjson);
        free(p[i].ajson);
        if (results[p[i].idx].error != GR_KERR_NONE)
            n_ok--;
        else
            results[p[i].idx].topic_id = p[i].id;
    }
    free(p);
    name_set_free(&c.names);
    gr_broker_metas_free(c.brokers, c.nb);
    return n_ok;
}

int16_t gr_topic_admin_create_topic(struct gr_broker *b, const struct gr_topic_spec *spec,
                                    bool validate_only, bool use_zk_brokers,
                                    int fixed_start_index, struct gr_topic_result *res)
{
    gr_topic_admin_create_topics(b, spec, 1, validate_only, use_zk_brokers, fixed_start_index,
                                 res);
    return res->error;
}

/* ------------------------------------------------------------------ create partitions */

int16_t gr_topic_admin_create_partitions(struct gr_broker *b, const char *topic,
                                         int32_t new_count, int n_assign,
                                         const int32_t *const *replicas, const int *n_replicas,
                                         bool validate_only, struct gr_topic_result *res)
{
    res_init(res);
    char msg[256];
    if (!b->zk)
        return fail(res, GR_KERR_UNKNOWN_SERVER_ERROR, "no ZooKeeper connection");
    struct gr_kzk_topic_assignment cur;
    memset(&cur, 0, sizeof(cur));
    int rc = gr_kzk_get_topic_assignments(b->zk, &topic, 1, false, &cur);
    if (rc == 0)
        rc = cur.rc;
    if (rc == GR_KZK_ENONODE || (rc == 0 && cur.n_partitions == 0)) {
        gr_kzk_topic_assignment_release(&cur);
        return fail(res, GR_KERR_UNKNOWN_TOPIC_OR_PARTITION, "The topic '%s' does not exist.",
                    topic);
    }
    if (rc != 0) {
        gr_kzk_topic_assignment_release(&cur);
        return fail(res, GR_KERR_UNKNOWN_SERVER_ERROR, "cannot read topic '%s': %s", topic,
                    gr_kzk_strerror(rc));
    }
    int16_t e = GR_KERR_NONE;
    struct gr_broker_meta *brokers = NULL;
    int nb = 0;
    int32_t *flat = NULL;
    struct gr_kzk_partition_assignment *parts = NULL;
    const struct gr_kzk_partition_assignment *p0 = NULL;
    for (int i = 0; i < cur.n_partitions; i++) {
        if (cur.partitions[i].n_adding > 0 || cur.partitions[i].n_removing > 0) {
            e = fail(res, GR_KERR_REASSIGNMENT_IN_PROGRESS,
                     "A partition reassignment is in progress for the topic '%s'.", topic);
            goto out;
        }
        if (cur.partitions[i].partition == 0)
            p0 = &cur.partitions[i];
    }
    int32_t old = cur.n_partitions;
    int32_t inc = new_count - old;
    if (inc < 0) {
        e = fail(res, GR_KERR_INVALID_PARTITIONS,
                 "Topic currently has %d partitions, which is higher than the requested %d.",
                 old, new_count);
        goto out;
    }
    if (inc == 0) {
        e = fail(res, GR_KERR_INVALID_PARTITIONS, "Topic already has %d partitions.", old);
        goto out;
    }
    rc = zk_brokers(b, &brokers, &nb);
    if (rc != 0) {
        e = fail(res, GR_KERR_UNKNOWN_SERVER_ERROR, "cannot read brokers: %s",
                 gr_kzk_strerror(rc));
        goto out;
    }
    int32_t *ids = gr_malloc(sizeof(int32_t) * (size_t)(nb ? nb : 1));
    for (int i = 0; i < nb; i++)
        ids[i] = brokers[i].id;
    if (n_assign >= 0) {
        for (int i = 0; i < n_assign && e == GR_KERR_NONE; i++)
            for (int j = 0; j < n_replicas[i] && e == GR_KERR_NONE; j++) {
                bool found = false;
                for (int k = 0; k < nb; k++)
                    found |= ids[k] == replicas[i][j];
                if (!found)
                    e = fail(res, GR_KERR_INVALID_REPLICA_ASSIGNMENT,
                             "Unknown broker(s) in replica assignment: %d.", replicas[i][j]);
            }
        if (e == GR_KERR_NONE && n_assign != inc)
            e = fail(res, GR_KERR_INVALID_REPLICA_ASSIGNMENT,
                     "Increasing the number of partitions by %d but %d assignments provided.",
                     inc, n_assign);
    }
    if (e == GR_KERR_NONE && !p0)
        e = fail(res, GR_KERR_UNKNOWN_SERVER_ERROR,
                 "Unexpected existing replica assignment for topic '%s', partition id 0 is "
                 "missing.", topic);
    if (e != GR_KERR_NONE) {
        free(ids);
        goto out;
    }
    int rf = p0->n_replicas;
    parts = gr_calloc((size_t)new_count, sizeof(*parts));
    memcpy(parts, cur.partitions, sizeof(*parts) * (size_t)old);
    if (n_assign >= 0) {
        e = gr_assign_validate_added(n_assign, replicas, n_replicas, rf, ids, nb, msg,
                                     sizeof(msg));
        if (e != GR_KERR_NONE) {
            fail(res, e, "%s", msg);
            free(ids);
            goto out;
        }
        for (int i = 0; i < inc; i++) {
            parts[old + i].partition = old + i;
            parts[old + i].n_replicas = n_replicas[i];
            parts[old + i].replicas = (int32_t *)replicas[i];
        }
    } else {
        int start = gr_assign_add_partitions_start_index(brokers, nb, p0->replicas[0]);
        if (inc > 0 && rf > 0 && rf <= nb)
            flat = gr_malloc(sizeof(int32_t) * (size_t)inc * (size_t)rf);
        e = gr_assign_replicas(brokers, nb, inc, rf, start, old, flat, msg, sizeof(msg));
        if (e != GR_KERR_NONE) {
            fail(res, e, "%s", msg);
            free(ids);
            goto out;
        }
        for (int i = 0; i < inc; i++) {
            parts[old + i].partition = old + i;
            parts[old + i].n_replicas = rf;
            parts[old + i].replicas = flat + (size_t)i * (size_t)rf;
        }
    }
    free(ids);
    res->num_partitions = new_count;
    res->replication_factor = (int16_t)rf;
    if (!validate_only) {
        struct gr_kzk_topic_assignment na = cur;
        na.n_partitions = new_count;
        na.partitions = parts;
        rc = gr_kzk_set_topic_assignment(b->zk, topic, &na, cur.zk_version);
        if (rc == GR_KZK_EBADVERSION)
            e = fail(res, GR_KERR_UNKNOWN_SERVER_ERROR,
                     "topic '%s' changed concurrently; retry", topic);
        else if (rc != 0)
            e = fail(res, GR_KERR_UNKNOWN_SERVER_ERROR, "cannot update topic '%s': %s", topic,
                     gr_kzk_strerror(rc));
        else
            gr_info(LOGGER, "Creating %d partitions for '%s'", inc, topic);
    }
out:
    free(parts);
    free(flat);
    gr_broker_metas_free(brokers, nb);
    gr_kzk_topic_assignment_release(&cur);
    if (e == GR_KERR_NONE)
        res->error = GR_KERR_NONE;
    return e;
}

/* ------------------------------------------------------------------ delayed operations */

struct waiter {
    struct waiter *next;
    int n;
    char **topics;
    int32_t *nparts;
    bool *ready;
    int64_t deadline_ms;
    gr_topic_wait_fn fn;
    void *ctx;
};

struct gr_topic_admin {
    struct gr_broker *b;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct waiter *head;
    bool stop;
    bool dirty; /* metadata changed since the timer thread last checked */
    pthread_t thread;
    bool thread_started;
};

static void waiter_free(struct waiter *w)
{
    for (int i = 0; i < w->n; i++)
        free(w->topics[i]);
    free(w->topics);
    free(w->nparts);
    free(w->ready);
    free(w);
}

/* Fills w->ready; true if all topics are ready. */
static bool waiter_check(struct gr_topic_admin *a, struct waiter *w)
{
    bool all = true;
    for (int i = 0; i < w->n; i++) {
        if (!w->ready[i])
            w->ready[i] = gr_mdc_topic_ready(a->b->metadata, w->topics[i], w->nparts[i]);
        all = all && w->ready[i];
    }
    return all;
}

static void complete(struct waiter *w)
{
    w->fn(w->ctx, w->n, w->ready);
    waiter_free(w);
}

/* Removes and returns the waiters that are complete (all ready, or expired when now >= 0). */
static struct waiter *take_done_locked(struct gr_topic_admin *a, int64_t now, bool force)
{
    struct waiter *done = NULL, **pp = &a->head;
    while (*pp) {
        struct waiter *w = *pp;
        if (force || waiter_check(a, w) || (now >= 0 && now >= w->deadline_ms)) {
            *pp = w->next;
            w->next = done;
            done = w;
        } else {
            pp = &w->next;
        }
    }
    return done;
}

static void complete_list(struct waiter *w)
{
    while (w) {
        struct waiter *next = w->next;
        complete(w);
        w = next;
    }
}

static void *timer_main(void *arg)
{
    struct gr_topic_admin *a = arg;
    pthread_mutex_lock(&a->lock);
    while (!a->stop) {
        int64_t now = gr_mono_ms();
        struct waiter *done = take_done_locked(a, now, false);
        a->dirty = false;
        if (done) {
            pthread_mutex_unlock(&a->lock);
            complete_list(done);
            pthread_mutex_lock(&a->lock);
            continue;
        }
        int64_t next = -1;
        for (struct waiter *w = a->head; w; w = w->next)
            if (next < 0 || w->deadline_ms < next)
                next = w->deadline_ms;
        if (a->dirty)
            continue;
        if (next < 0) {
            pthread_cond_wait(&a->cond, &a->lock);
        } else {
            /* The condvar uses CLOCK_REALTIME by default; wait relative to it. */
            int64_t wait_ms = next - now;
            if (wait_ms > 1000)
                wait_ms = 1000;
            struct timespec ts = gr_timespec_after_ms(CLOCK_REALTIME, wait_ms);
            pthread_cond_timedwait(&a->cond, &a->lock, &ts);
        }
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

static void on_metadata_update(void *ctx) { gr_topic_admin_notify(ctx); }

struct gr_topic_admin *gr_topic_admin_new(struct gr_broker *b)
{
    struct gr_topic_admin *a = gr_calloc(1, sizeof(*a));
    a->b = b;
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->cond, NULL);
    if (pthread_create(&a->thread, NULL, timer_main, a) == 0)
        a->thread_started = true;
    else
        gr_error(LOGGER, "cannot start the topic purgatory thread");
    if (b->metadata)
        gr_mdc_set_on_update(b->metadata, on_metadata_update, a);
    return a;
}

void gr_topic_admin_free(struct gr_topic_admin *a)
{
    if (!a)
        return;
    if (a->b->metadata)
        gr_mdc_set_on_update(a->b->metadata, NULL, NULL);
    pthread_mutex_lock(&a->lock);
    a->stop = true;
    struct waiter *done = take_done_locked(a, -1, true);
    a->head = NULL;
    pthread_cond_broadcast(&a->cond);
    pthread_mutex_unlock(&a->lock);
    if (a->thread_started)
        pthread_join(a->thread, NULL);
    complete_list(done);
    pthread_cond_destroy(&a->cond);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

void gr_topic_admin_wait(struct gr_topic_admin *a, int n, const char *const *topics,
                         const int32_t *n_partitions, int64_t timeout_ms, gr_topic_wait_fn fn,
                         void *ctx)
{
    struct waiter *w = gr_calloc(1, sizeof(*w));
    w->n = n;
    w->topics = gr_calloc((size_t)(n ? n : 1), sizeof(char *));
    w->nparts = gr_calloc((size_t)(n ? n : 1), sizeof(int32_t));
    w->ready = gr_calloc((size_t)(n ? n : 1), sizeof(bool));
    for (int i = 0; i < n; i++) {
        w->topics[i] = gr_strdup(topics[i]);
        w->nparts[i] = n_partitions[i];
    }
    w->fn = fn;
    w->ctx = ctx;
    w->deadline_ms = gr_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    /* tryCompleteElseWatch: check once, then watch. */
    if (waiter_check(a, w) || timeout_ms <= 0) {
        complete(w);
        return;
    }
    pthread_mutex_lock(&a->lock);
    if (a->stop) {
        pthread_mutex_unlock(&a->lock);
        complete(w);
        return;
    }
    w->next = a->head;
    a->head = w;
    a->dirty = true; /* an update may have landed between the check and the insert */
    pthread_cond_broadcast(&a->cond);
    pthread_mutex_unlock(&a->lock);
}

void gr_topic_admin_notify(struct gr_topic_admin *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->lock);
    if (a->head) {
        a->dirty = true;
        pthread_cond_broadcast(&a->cond);
    }
    pthread_mutex_unlock(&a->lock);
}
