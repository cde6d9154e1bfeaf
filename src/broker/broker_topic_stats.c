/* BrokerTopicMetrics meters: see broker_topic_stats.h. */
#include "broker/broker_topic_stats.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/be.h"
#include "common/metrics.h"
#include "common/util.h"

static const char *const METER_NAMES[GR_BTS_N] = {
    [GR_BTS_MESSAGES_IN] = "MessagesInPerSec",
    [GR_BTS_BYTES_IN] = "BytesInPerSec",
    [GR_BTS_BYTES_OUT] = "BytesOutPerSec",
    [GR_BTS_REPLICATION_BYTES_OUT] = "ReplicationBytesOutPerSec",
    [GR_BTS_TOTAL_PRODUCE] = "TotalProduceRequestsPerSec",
    [GR_BTS_FAILED_PRODUCE] = "FailedProduceRequestsPerSec",
    [GR_BTS_TOTAL_FETCH] = "TotalFetchRequestsPerSec",
    [GR_BTS_FAILED_FETCH] = "FailedFetchRequestsPerSec",
    [GR_BTS_PRODUCE_CONVERSIONS] = "ProduceMessageConversionsPerSec",
    [GR_BTS_FETCH_CONVERSIONS] = "FetchMessageConversionsPerSec",
};

struct bts_topic {
    char *name;
    uint64_t hash;
    struct gr_meter *_Atomic meters[GR_BTS_N]; /* NULL until first marked */
};

struct gr_bts {
    struct gr_metrics *reg;
    gr_bts_topic_known_fn known; /* NULL: every legal name */
    void *known_ctx;
    struct gr_meter *_Atomic all[GR_BTS_N];
    pthread_rwlock_t lock; /* guards slots, n_slots, n (not the topics' meters: atomic) */
    struct bts_topic **slots; /* open addressing, power-of-two size; entries never removed */
    size_t n_slots, n;
};

static struct gr_meter *cached(struct gr_bts *s, struct gr_meter *_Atomic *cache, enum gr_bts_meter meter,
                               const char *topic);

struct gr_bts *gr_bts_new(struct gr_metrics *reg) {
    if (!reg) return NULL;
    struct gr_bts *s = gr_calloc(1, sizeof *s);
    s->reg = reg;
    pthread_rwlock_init(&s->lock, NULL);
    s->n_slots = 64;
    s->slots = gr_calloc(s->n_slots, sizeof *s->slots);
    /* the all-topics meters exist from the start (a dashboard summing them over the brokers shows
     * 0, not "no data", when the only broker that counted something has restarted); per-topic
     * ones come with their first event */
    for (int m = 0; m < GR_BTS_N; m++) cached(s, &s->all[m], (enum gr_bts_meter)m, NULL);
    return s;
}

void gr_bts_free(struct gr_bts *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_slots; i++)
        if (s->slots[i]) {
            free(s->slots[i]->name);
            free(s->slots[i]);
        }
    free(s->slots);
    pthread_rwlock_destroy(&s->lock);
    free(s);
}

/* The slot holding topic, or the empty slot where it belongs. Caller holds the lock. */
static struct bts_topic **probe(struct gr_bts *s, const char *topic, uint64_t h) {
    size_t mask = s->n_slots - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        struct bts_topic *t = s->slots[i];
        if (!t || (t->hash == h && strcmp(t->name, topic) == 0)) return &s->slots[i];
    }
}

static void grow(struct gr_bts *s) {
    size_t n_slots = s->n_slots * 2;
    struct bts_topic **slots = gr_calloc(n_slots, sizeof *slots);
    for (size_t i = 0; i < s->n_slots; i++) {
        struct bts_topic *t = s->slots[i];
        if (!t) continue;
        size_t j = (size_t)t->hash & (n_slots - 1);
        while (slots[j]) j = (j + 1) & (n_slots - 1);
        slots[j] = t;
    }
    free(s->slots);
    s->slots = slots;
    s->n_slots = n_slots;
}

void gr_bts_set_topic_filter(struct gr_bts *s, gr_bts_topic_known_fn fn, void *ctx) {
    if (!s) return;
    s->known = fn;
    s->known_ctx = ctx;
}

/* Kafka's Topic.validate: 1-249 characters of [a-zA-Z0-9._-]. */
static bool legal_topic(const char *t) {
    size_t n = 0;
    for (; t[n]; n++)
        if (n >= 249 || !(isalnum((unsigned char)t[n]) || t[n] == '.' || t[n] == '_' || t[n] == '-')) return false;
    return n > 0;
}

/* The topic's entry, made on first use; NULL for a name that gets no per-topic meters. */
static struct bts_topic *topic_entry(struct gr_bts *s, const char *topic) {
    uint64_t h = gr_str_hash(topic);
    pthread_rwlock_rdlock(&s->lock);
    struct bts_topic *t = *probe(s, topic, h);
    pthread_rwlock_unlock(&s->lock);
    if (t) return t;
    if (!legal_topic(topic) || (s->known && !s->known(s->known_ctx, topic))) return NULL;
    pthread_rwlock_wrlock(&s->lock);
    if ((s->n + 1) * 4 >= s->n_slots * 3) grow(s);
    struct bts_topic **slot = probe(s, topic, h);
    if (!*slot) {
        t = gr_calloc(1, sizeof *t);
        t->name = gr_strdup(topic);
        t->hash = h;
        *slot = t;
        s->n++;
    }
    t = *slot;
    pthread_rwlock_unlock(&s->lock);
    return t;
}

/* The meter behind *cache, looked up in the registry on first use (two threads may both look it
 * up: the registry returns the same meter). */
static struct gr_meter *cached(struct gr_bts *s, struct gr_meter *_Atomic *cache, enum gr_bts_meter meter,
                               const char *topic) {
    struct gr_meter *m = atomic_load_explicit(cache, memory_order_acquire);
    if (m) return m;
    char name[384];
    if (topic)
        snprintf(name, sizeof name, "kafka.server:type=BrokerTopicMetrics,name=%s,topic=%s", METER_NAMES[meter], topic);
    else
        snprintf(name, sizeof name, "kafka.server:type=BrokerTopicMetrics,name=%s", METER_NAMES[meter]);
    m = gr_metrics_meter(s->reg, name);
    atomic_store_explicit(cache, m, memory_order_release);
    return m;
}

void gr_bts_mark(struct gr_bts *s, const char *topic, enum gr_bts_meter meter, int64_t n) {
    if (!s || meter < 0 || meter >= GR_BTS_N) return;
    struct gr_meter *m = cached(s, &s->all[meter], meter, NULL);
    if (m) gr_meter_mark(m, n);
    if (!topic) return;
    struct bts_topic *t = topic_entry(s, topic);
    if (!t) return;
    m = cached(s, &t->meters[meter], meter, topic);
    if (m) gr_meter_mark(m, n);
}

/* RecordBatch v2: baseOffset int64, batchLength int32 (bytes after this field), ...,
 * records count int32 at byte 57. */
int64_t gr_bts_record_count(const uint8_t *batches, size_t len) {
    int64_t n = 0;
    size_t off = 0;
    while (off + 61 <= len) {
        uint32_t blen = gr_be32(batches + off + 8);
        if (blen < 49 || off + 12 + blen > len) break;
        n += (int32_t)gr_be32(batches + off + 57);
        off += 12 + (size_t)blen;
    }
    return n;
}
