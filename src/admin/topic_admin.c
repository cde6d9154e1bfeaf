/* Topic creation, partition addition and the delayed operations waiting for their leaders; see
 * topic_admin.h. Order of checks follows Kafka 2.7's AdminManager.createTopics and
 * AdminZkClient.validateTopicCreate / createPartitions. */
#include "admin/topic_admin.h"

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

/* ------------------------------------------------------------------ create topic */

static int16_t check_exists_and_collisions(struct gr_broker *b, const char *name,
                                           struct gr_topic_result *res)
{
    if (b->metadata && gr_mdc_contains_topic(b->metadata, name))
        return fail(res, GR_KERR_TOPIC_ALREADY_EXISTS, "Topic '%s' already exists.", name);
    if (!b->zk)
        return GR_KERR_NONE;
    struct gr_zstrings all = { 0, NULL };
    int rc = gr_kzk_get_topics(b->zk, false, &all);
    if (rc != 0)
        return fail(res, GR_KERR_UNKNOWN_SERVER_ERROR, "cannot list topics in ZooKeeper: %s",
                    gr_kzk_strerror(rc));
    int16_t e = GR_KERR_NONE;
    for (int i = 0; i < all.count && e == GR_KERR_NONE; i++) {
        if (strcmp(all.names[i], name) == 0)
            e = fail(res, GR_KERR_TOPIC_ALREADY_EXISTS, "Topic '%s' already exists.", name);
    }
    if (e == GR_KERR_NONE && gr_topic_has_collision_chars(name)) {
        for (int i = 0; i < all.count && e == GR_KERR_NONE; i++)
            if (gr_topic_collides(name, all.names[i]))
                e = fail(res, GR_KERR_INVALID_TOPIC_EXCEPTION,
                         "Topic '%s' collides with existing topics: %s", name, all.names[i]);
    }
    gr_zstrings_free(&all);
    return e;
}

int16_t gr_topic_admin_create_topic(struct gr_broker *b, const struct gr_topic_spec *spec,
                                    bool validate_only, bool use_zk_brokers,
                                    int fixed_start_index, struct gr_topic_result *res)
{
    res_init(res);
    const char *name = spec->name;
    char msg[256];
    int16_t e;

    if (gr_topic_validate_name(name, msg, sizeof(msg)) != GR_KERR_NONE)
        return fail(res, GR_KERR_INVALID_TOPIC_EXCEPTION, "%s", msg);
    /* Existence first, in the cache and in ZooKeeper: this broker's cache may lag (it just
     * restarted, or a failover is under way), and an existing topic must never be answered with
     * an assignment error such as INVALID_REPLICATION_FACTOR while few brokers are alive (the
     * chaos suite saw that turn into a producer's fatal error). */
    e = check_exists_and_collisions(b, name, res);
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
        struct gr_broker_meta *brokers = NULL;
        int nb = 0;
        if (use_zk_brokers && b->zk) {
            int rc = zk_brokers(b, &brokers, &nb);
            if (rc != 0)
                return fail(res, GR_KERR_UNKNOWN_SERVER_ERROR,
                            "cannot read brokers from ZooKeeper: %s", gr_kzk_strerror(rc));
        } else if (b->metadata) {
            gr_mdc_alive_brokers(b->metadata, &brokers, &nb);
        }
        if (use_zk_brokers)
            drop_racks_if_mixed(brokers, nb);
        if (nparts > 0 && rf > 0 && rf <= nb)
            flat = gr_malloc(sizeof(int32_t) * (size_t)nparts * (size_t)rf);
        e = gr_assign_replicas(brokers, nb, nparts, rf, fixed_start_index, 0, flat, msg,
                               sizeof(msg));
        gr_broker_metas_free(brokers, nb);
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

    struct gr_kzk_config cfg = { 0, NULL, NULL };
    cfg.n = spec->n_configs;
    cfg.keys = (char **)spec->config_names;
    cfg.values = (char **)spec->config_values;
    e = GR_KERR_NONE;
    for (int i = 0; e == GR_KERR_NONE && i < spec->n_configs; i++) {
        if (gr_topic_config_validate(spec->config_names[i], spec->config_values[i], msg,
                                     sizeof(msg)) != GR_KERR_NONE)
            e = fail(res, GR_KERR_INVALID_CONFIG, "%s", msg);
    }
    if (e == GR_KERR_NONE && !validate_only) {
        if (!b->zk) {
            e = fail(res, GR_KERR_UNKNOWN_SERVER_ERROR, "no ZooKeeper connection");
        } else {
            int rc = gr_kzk_create_topic(b->zk, name, &ta, &cfg);
            if (rc == GR_KZK_EEXISTS)
                e = fail(res, GR_KERR_TOPIC_ALREADY_EXISTS, "Topic '%s' already exists.", name);
            else if (rc != 0)
                e = fail(res, GR_KERR_UNKNOWN_SERVER_ERROR, "cannot create topic '%s': %s", name,
                         gr_kzk_strerror(rc));
            else
                gr_info(LOGGER, "Creating topic %s with %d partitions and replication factor %d",
                        name, nparts, rf);
        }
    }
    free(ta.partitions);
    free(flat);
    if (e == GR_KERR_NONE)
        res->error = GR_KERR_NONE;
    return e;
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
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            int64_t wait_ms = next - now;
            if (wait_ms > 1000)
                wait_ms = 1000;
            ts.tv_sec += wait_ms / 1000;
            ts.tv_nsec += (wait_ms % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
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
