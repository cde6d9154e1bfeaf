/* Metadata cache: see metadata_cache.h. Topics are a sorted array of pointers (binary search by
 * name); each topic keeps its partitions sorted by id. An update copies nothing it does not
 * change: it edits the structure in place under the write lock. */
#include "broker/metadata_cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

#define LOGGER "state.change.logger"

struct gr_mdc {
    pthread_rwlock_t lock;
    int32_t local_id;
    int32_t controller_id;
    int n_brokers;
    struct gr_mdc_broker *brokers; /* sorted by id */
    int n_topics;
    int cap_topics;
    struct gr_mdc_topic **topics; /* sorted by name */
    gr_mdc_update_fn on_update;
    void *on_update_ctx;
    _Atomic uint64_t generation;
    /* the topics that have an id, sorted by id (KIP-516's name <-> id both ways); rebuilt after
     * an update that added, removed or re-identified a topic */
    struct gr_mdc_topic **by_id;
    int n_by_id;
    bool by_id_stale;
};

struct gr_mdc *gr_mdc_new(int32_t local_broker_id)
{
    struct gr_mdc *c = gr_calloc(1, sizeof(*c));
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&c->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    c->local_id = local_broker_id;
    c->controller_id = -1;
    return c;
}

static void broker_release(struct gr_mdc_broker *b)
{
    for (int i = 0; i < b->n_endpoints; i++) {
        free(b->endpoints[i].listener);
        free(b->endpoints[i].host);
    }
    free(b->endpoints);
    free(b->rack);
}

void gr_mdc_partition_release(struct gr_mdc_partition *p)
{
    free(p->replicas); /* the one block holding isr and offline too */
    p->replicas = p->isr = p->offline = NULL;
    p->n_replicas = p->n_isr = p->n_offline = 0;
}

static void topic_free(struct gr_mdc_topic *t)
{
    for (int i = 0; i < t->n_partitions; i++)
        gr_mdc_partition_release(&t->partitions[i]);
    free(t->partitions);
    free(t->name);
    free(t);
}

void gr_mdc_free(struct gr_mdc *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n_brokers; i++)
        broker_release(&c->brokers[i]);
    free(c->brokers);
    for (int i = 0; i < c->n_topics; i++)
        topic_free(c->topics[i]);
    free(c->topics);
    free(c->by_id);
    pthread_rwlock_destroy(&c->lock);
    free(c);
}

void gr_mdc_set_on_update(struct gr_mdc *c, gr_mdc_update_fn fn, void *ctx)
{
    pthread_rwlock_wrlock(&c->lock);
    c->on_update = fn;
    c->on_update_ctx = ctx;
    pthread_rwlock_unlock(&c->lock);
}

/* ---- lookup (caller holds a lock) ---- */

/* Index of the topic or -(insertion point) - 1. */
static int topic_search(const struct gr_mdc *c, const char *name)
{
    int lo = 0, hi = c->n_topics - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int cmp = strcmp(c->topics[mid]->name, name);
        if (cmp == 0)
            return mid;
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -lo - 1;
}

static int partition_search(const struct gr_mdc_topic *t, int32_t p)
{
    int lo = 0, hi = t->n_partitions - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int32_t v = t->partitions[mid].partition;
        if (v == p)
            return mid;
        if (v < p)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -lo - 1;
}

static const char *protocol_name(int16_t sp)
{
    switch (sp) {
    case 0: return "PLAINTEXT";
    case 1: return "SSL";
    case 2: return "SASL_PLAINTEXT";
    case 3: return "SASL_SSL";
    default: return "UNKNOWN";
    }
}

/* Sets p's three id lists from copies of the given ones, in one allocation (memory per replica,
 * issue 14: one malloc chunk instead of three). */
static void set_ids(struct gr_mdc_partition *p, const int32_t *r, int32_t nr, const int32_t *i, int32_t ni,
                    const int32_t *o, int32_t no)
{
    nr = r && nr > 0 ? nr : 0;
    ni = i && ni > 0 ? ni : 0;
    no = o && no > 0 ? no : 0;
    p->n_replicas = nr;
    p->n_isr = ni;
    p->n_offline = no;
    p->replicas = p->isr = p->offline = NULL;
    size_t n = (size_t)nr + (size_t)ni + (size_t)no;
    if (n == 0)
        return;
    int32_t *v = gr_malloc(sizeof(int32_t) * n);
    if (nr)
        memcpy(v, r, sizeof(int32_t) * (size_t)nr);
    if (ni)
        memcpy(v + nr, i, sizeof(int32_t) * (size_t)ni);
    if (no)
        memcpy(v + nr + ni, o, sizeof(int32_t) * (size_t)no);
    p->replicas = v;
    p->isr = ni ? v + nr : NULL;
    p->offline = no ? v + nr + ni : NULL;
}

static int cmp_broker(const void *a, const void *b)
{
    const struct gr_mdc_broker *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* ---- update (caller holds the write lock) ---- */

static void set_brokers(struct gr_mdc *c, int16_t version,
                        const struct UpdateMetadataRequest *req)
{
    for (int i = 0; i < c->n_brokers; i++)
        broker_release(&c->brokers[i]);
    free(c->brokers);
    c->brokers = NULL;
    c->n_brokers = 0;
    int n = req->LiveBrokersCount > 0 ? req->LiveBrokersCount : 0;
    if (n == 0)
        return;
    c->brokers = gr_calloc((size_t)n, sizeof(*c->brokers));
    for (int i = 0; i < n; i++) {
        const struct UpdateMetadataRequest_UpdateMetadataBroker *src = &req->LiveBrokers[i];
        /* A broker listed twice keeps its last entry (Kafka's map semantics). */
        int slot = c->n_brokers;
        for (int j = 0; j < c->n_brokers; j++)
            if (c->brokers[j].id == src->Id) {
                broker_release(&c->brokers[j]);
                memset(&c->brokers[j], 0, sizeof(c->brokers[j]));
                slot = j;
                break;
            }
        struct gr_mdc_broker *b = &c->brokers[slot];
        if (slot == c->n_brokers)
            c->n_brokers++;
        b->id = src->Id;
        b->rack = (version >= 2 && src->Rack) ? gr_strdup(src->Rack) : NULL;
        if (version == 0) {
            b->n_endpoints = 1;
            b->endpoints = gr_calloc(1, sizeof(*b->endpoints));
            b->endpoints[0].listener = gr_strdup("PLAINTEXT");
            b->endpoints[0].host = gr_strdup(src->V0Host ? src->V0Host : "");
            b->endpoints[0].port = src->V0Port;
            b->endpoints[0].security_protocol = 0;
        } else {
            int ne = src->EndpointsCount > 0 ? src->EndpointsCount : 0;
            b->n_endpoints = ne;
            b->endpoints = ne ? gr_calloc((size_t)ne, sizeof(*b->endpoints)) : NULL;
            for (int e = 0; e < ne; e++) {
                const struct UpdateMetadataRequest_UpdateMetadataEndpoint *se = &src->Endpoints[e];
                struct gr_mdc_endpoint *de = &b->endpoints[e];
                de->security_protocol = se->SecurityProtocol;
                de->listener = gr_strdup((version >= 3 && se->Listener) ? se->Listener
                                                  : protocol_name(se->SecurityProtocol));
                de->host = gr_strdup(se->Host ? se->Host : "");
                de->port = se->Port;
            }
        }
    }
    qsort(c->brokers, (size_t)c->n_brokers, sizeof(*c->brokers), cmp_broker);
}

static void remove_partition(struct gr_mdc *c, const char *topic, int32_t p)
{
    int ti = topic_search(c, topic);
    if (ti < 0)
        return;
    struct gr_mdc_topic *t = c->topics[ti];
    int pi = partition_search(t, p);
    if (pi < 0)
        return;
    gr_mdc_partition_release(&t->partitions[pi]);
    memmove(&t->partitions[pi], &t->partitions[pi + 1],
            sizeof(*t->partitions) * (size_t)(t->n_partitions - pi - 1));
    t->n_partitions--;
    if (t->n_partitions == 0) {
        if (!gr_uuid_is_zero(&t->id))
            c->by_id_stale = true; /* rebuilt before the write lock goes */
        topic_free(t);
        memmove(&c->topics[ti], &c->topics[ti + 1],
                sizeof(*c->topics) * (size_t)(c->n_topics - ti - 1));
        c->n_topics--;
    }
}

/* hint: how many states of this topic the request still carries (this one included): a topic's
 * array grows to fit them at once (exact for a new topic; doubling left up to half of it unused). */
static void put_partition(struct gr_mdc *c, const char *topic, int16_t version,
                          const struct UpdateMetadataRequest_UpdateMetadataPartitionState *s, int hint)
{
    int ti = topic_search(c, topic);
    struct gr_mdc_topic *t;
    if (ti < 0) {
        ti = -ti - 1;
        if (c->n_topics == c->cap_topics) {
            c->cap_topics = c->cap_topics ? c->cap_topics * 2 : 16;
            c->topics = gr_realloc(c->topics, sizeof(*c->topics) * (size_t)c->cap_topics);
        }
        memmove(&c->topics[ti + 1], &c->topics[ti],
                sizeof(*c->topics) * (size_t)(c->n_topics - ti));
        t = gr_calloc(1, sizeof(*t));
        t->name = gr_strdup(topic);
        c->topics[ti] = t;
        c->n_topics++;
    } else {
        t = c->topics[ti];
    }
    int pi = partition_search(t, s->PartitionIndex);
    struct gr_mdc_partition *p;
    if (pi < 0) {
        pi = -pi - 1;
        if (t->n_partitions == t->cap) {
            int grow = t->n_partitions / 8 > hint ? t->n_partitions / 8 : hint;
            t->cap = t->n_partitions + (grow > 0 ? grow : 1);
            t->partitions = gr_realloc(t->partitions, sizeof(*t->partitions) * (size_t)t->cap);
        }
        memmove(&t->partitions[pi + 1], &t->partitions[pi],
                sizeof(*t->partitions) * (size_t)(t->n_partitions - pi));
        t->n_partitions++;
        p = &t->partitions[pi];
        memset(p, 0, sizeof(*p));
    } else {
        p = &t->partitions[pi];
        gr_mdc_partition_release(p);
    }
    p->partition = s->PartitionIndex;
    p->controller_epoch = s->ControllerEpoch;
    p->leader = s->Leader;
    p->leader_epoch = s->LeaderEpoch;
    p->zk_version = s->ZkVersion;
    set_ids(p, s->Replicas, s->ReplicasCount, s->Isr, s->IsrCount, version >= 4 ? s->OfflineReplicas : NULL,
            version >= 4 ? s->OfflineReplicasCount : 0);
}

static void apply_state(struct gr_mdc *c, const char *topic, int16_t version,
                        const struct UpdateMetadataRequest_UpdateMetadataPartitionState *s,
                        int hint, int *added, int *deleted)
{
    if (!topic)
        return; /* a null topic name cannot be cached */
    if (s->Leader == GR_LEADER_DURING_DELETE) {
        remove_partition(c, topic, s->PartitionIndex);
        (*deleted)++;
    } else {
        put_partition(c, topic, version, s, hint);
        (*added)++;
    }
}

static int cmp_topic_id(const void *a, const void *b)
{
    const struct gr_mdc_topic *x = *(const struct gr_mdc_topic *const *)a, *y = *(const struct gr_mdc_topic *const *)b;
    return memcmp(x->id.b, y->id.b, 16);
}

static void rebuild_by_id(struct gr_mdc *c)
{
    c->by_id = gr_realloc(c->by_id, sizeof(*c->by_id) * (size_t)(c->n_topics ? c->n_topics : 1));
    c->n_by_id = 0;
    for (int i = 0; i < c->n_topics; i++)
        if (!gr_uuid_is_zero(&c->topics[i]->id))
            c->by_id[c->n_by_id++] = c->topics[i];
    qsort(c->by_id, (size_t)c->n_by_id, sizeof(*c->by_id), cmp_topic_id);
    c->by_id_stale = false;
}

/* Kafka's ZkMetadataCache: a topic state with a non-zero id sets the topic's id, a zero one
 * clears it. A topic the request removed entirely is gone already. */
static void set_topic_id(struct gr_mdc *c, const char *topic, const uint8_t id[16])
{
    if (!topic)
        return;
    int ti = topic_search(c, topic);
    if (ti < 0)
        return;
    struct gr_mdc_topic *t = c->topics[ti];
    if (memcmp(t->id.b, id, 16) != 0) {
        memcpy(t->id.b, id, 16);
        c->by_id_stale = true;
    }
}

void gr_mdc_update(struct gr_mdc *c, int16_t version,
                              const struct UpdateMetadataRequest *req, int *n_deleted)
{
    int added = 0, deleted = 0;
    pthread_rwlock_wrlock(&c->lock);
    c->controller_id = req->ControllerId < 0 ? -1 : req->ControllerId;
    set_brokers(c, version, req);
    if (version <= 4) {
        int32_t run_end = 0; /* states of one topic usually come together */
        for (int32_t i = 0; i < req->UngroupedPartitionStatesCount; i++) {
            const struct UpdateMetadataRequest_UpdateMetadataPartitionState *s =
                &req->UngroupedPartitionStates[i];
            if (i >= run_end)
                for (run_end = i + 1; run_end < req->UngroupedPartitionStatesCount && s->TopicName &&
                                      req->UngroupedPartitionStates[run_end].TopicName &&
                                      strcmp(req->UngroupedPartitionStates[run_end].TopicName, s->TopicName) == 0;
                     run_end++) {
                }
            apply_state(c, s->TopicName, version, s, run_end - i, &added, &deleted);
        }
    } else {
        for (int32_t i = 0; i < req->TopicStatesCount; i++) {
            const struct UpdateMetadataRequest_UpdateMetadataTopicState *ts = &req->TopicStates[i];
            for (int32_t j = 0; j < ts->PartitionStatesCount; j++)
                apply_state(c, ts->TopicName, version, &ts->PartitionStates[j], ts->PartitionStatesCount - j,
                            &added, &deleted);
            static const uint8_t no_id[16];
            set_topic_id(c, ts->TopicName, version >= 7 ? ts->TopicId : no_id);
        }
    }
    if (c->by_id_stale)
        rebuild_by_id(c);
    atomic_fetch_add(&c->generation, 1);
    gr_mdc_update_fn fn = c->on_update;
    void *ctx = c->on_update_ctx;
    pthread_rwlock_unlock(&c->lock);
    gr_info(LOGGER,
            "[Broker id=%d] Add %d partitions and deleted %d partitions from metadata cache in "
            "response to UpdateMetadata request sent by controller %d epoch %d",
            c->local_id, added, deleted, req->ControllerId, req->ControllerEpoch);
    if (n_deleted)
        *n_deleted = deleted;
    if (fn)
        fn(ctx);
}

/* ---- locked view ---- */

void gr_mdc_rdlock(struct gr_mdc *c) { pthread_rwlock_rdlock(&c->lock); }
void gr_mdc_unlock(struct gr_mdc *c) { pthread_rwlock_unlock(&c->lock); }

int gr_mdc_num_brokers(const struct gr_mdc *c) { return c->n_brokers; }

const struct gr_mdc_broker *gr_mdc_broker_at(const struct gr_mdc *c, int i)
{
    return (i >= 0 && i < c->n_brokers) ? &c->brokers[i] : NULL;
}

const struct gr_mdc_broker *gr_mdc_broker(const struct gr_mdc *c, int32_t id)
{
    int lo = 0, hi = c->n_brokers - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (c->brokers[mid].id == id)
            return &c->brokers[mid];
        if (c->brokers[mid].id < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

const struct gr_mdc_endpoint *gr_mdc_broker_endpoint(const struct gr_mdc_broker *b,
                                                     const char *listener)
{
    if (!b || !listener)
        return NULL;
    for (int i = 0; i < b->n_endpoints; i++)
        if (strcmp(b->endpoints[i].listener, listener) == 0)
            return &b->endpoints[i];
    return NULL;
}

int gr_mdc_num_topics(const struct gr_mdc *c) { return c->n_topics; }

const struct gr_mdc_topic *gr_mdc_topic_at(const struct gr_mdc *c, int i)
{
    return (i >= 0 && i < c->n_topics) ? c->topics[i] : NULL;
}

const struct gr_mdc_topic *gr_mdc_topic(const struct gr_mdc *c, const char *name)
{
    if (!name)
        return NULL;
    int i = topic_search(c, name);
    return i >= 0 ? c->topics[i] : NULL;
}

const struct gr_mdc_partition *gr_mdc_partition(const struct gr_mdc_topic *t, int32_t partition)
{
    if (!t)
        return NULL;
    int i = partition_search(t, partition);
    return i >= 0 ? &t->partitions[i] : NULL;
}

int32_t gr_mdc_controller_id_locked(const struct gr_mdc *c) { return c->controller_id; }

/* ---- copying helpers ---- */

int32_t gr_mdc_controller_id(struct gr_mdc *c)
{
    pthread_rwlock_rdlock(&c->lock);
    int32_t id = c->controller_id;
    pthread_rwlock_unlock(&c->lock);
    return id;
}

bool gr_mdc_contains_topic(struct gr_mdc *c, const char *topic)
{
    pthread_rwlock_rdlock(&c->lock);
    bool r = gr_mdc_topic(c, topic) != NULL;
    pthread_rwlock_unlock(&c->lock);
    return r;
}

int gr_mdc_num_partitions(struct gr_mdc *c, const char *topic)
{
    pthread_rwlock_rdlock(&c->lock);
    const struct gr_mdc_topic *t = gr_mdc_topic(c, topic);
    int n = t ? t->n_partitions : 0;
    pthread_rwlock_unlock(&c->lock);
    return n;
}

bool gr_mdc_topic_ready(struct gr_mdc *c, const char *topic,
                                   int32_t n_partitions)
{
    bool ok = true;
    pthread_rwlock_rdlock(&c->lock);
    const struct gr_mdc_topic *t = gr_mdc_topic(c, topic);
    for (int32_t p = 0; p < n_partitions && ok; p++) {
        const struct gr_mdc_partition *pp = gr_mdc_partition(t, p);
        ok = pp && pp->leader >= 0;
    }
    pthread_rwlock_unlock(&c->lock);
    return ok;
}

bool gr_mdc_get_partition(struct gr_mdc *c, const char *topic,
                                     int32_t partition, struct gr_mdc_partition *out)
{
    memset(out, 0, sizeof(*out));
    pthread_rwlock_rdlock(&c->lock);
    const struct gr_mdc_partition *p = gr_mdc_partition(gr_mdc_topic(c, topic), partition);
    if (p) {
        *out = *p;
        set_ids(out, p->replicas, p->n_replicas, p->isr, p->n_isr, p->offline, p->n_offline);
    }
    pthread_rwlock_unlock(&c->lock);
    return p != NULL;
}

bool gr_mdc_get_endpoint(struct gr_mdc *c, int32_t broker_id,
                                    const char *listener, char *host, size_t hostlen,
                                    int32_t *port)
{
    pthread_rwlock_rdlock(&c->lock);
    const struct gr_mdc_endpoint *e = gr_mdc_broker_endpoint(gr_mdc_broker(c, broker_id), listener);
    if (e) {
        snprintf(host, hostlen, "%s", e->host);
        *port = e->port;
    }
    pthread_rwlock_unlock(&c->lock);
    return e != NULL;
}

void gr_mdc_alive_brokers(struct gr_mdc *c, struct gr_broker_meta **out,
                                     int *n)
{
    pthread_rwlock_rdlock(&c->lock);
    *n = c->n_brokers;
    *out = gr_calloc((size_t)(c->n_brokers ? c->n_brokers : 1), sizeof(**out));
    for (int i = 0; i < c->n_brokers; i++) {
        (*out)[i].id = c->brokers[i].id;
        (*out)[i].rack = c->brokers[i].rack ? gr_strdup(c->brokers[i].rack) : NULL;
    }
    pthread_rwlock_unlock(&c->lock);
}

void gr_broker_metas_free(struct gr_broker_meta *m, int n)
{
    if (!m)
        return;
    for (int i = 0; i < n; i++)
        free((char *)m[i].rack);
    free(m);
}

uint64_t gr_mdc_generation(struct gr_mdc *c)
{
    return atomic_load(&c->generation);
}

/* ---- topic ids (KIP-516) ---- */

const struct gr_mdc_topic *gr_mdc_topic_by_id(const struct gr_mdc *c, const struct gr_uuid *id)
{
    int lo = 0, hi = c->n_by_id - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int cmp = memcmp(c->by_id[mid]->id.b, id->b, 16);
        if (cmp == 0)
            return c->by_id[mid];
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

bool gr_mdc_topic_id(struct gr_mdc *c, const char *topic, struct gr_uuid *out)
{
    pthread_rwlock_rdlock(&c->lock);
    int ti = topic ? topic_search(c, topic) : -1;
    bool found = ti >= 0 && !gr_uuid_is_zero(&c->topics[ti]->id);
    if (found)
        *out = c->topics[ti]->id;
    pthread_rwlock_unlock(&c->lock);
    return found;
}

char *gr_mdc_topic_name_by_id(struct gr_mdc *c, const struct gr_uuid *id)
{
    if (gr_uuid_is_zero(id))
        return NULL;
    pthread_rwlock_rdlock(&c->lock);
    const struct gr_mdc_topic *t = gr_mdc_topic_by_id(c, id);
    char *name = t ? gr_strdup(t->name) : NULL;
    pthread_rwlock_unlock(&c->lock);
    return name;
}
