/* Controller context: see context.h. */
#include "controller/context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#include <stdatomic.h>

/* Partition states stored and partitions installed or removed, by every context of the process
 * (gr_ctrl_ctx_work). */
static _Atomic uint64_t work_count;

uint64_t gr_ctrl_ctx_work(void) { return atomic_load_explicit(&work_count, memory_order_relaxed); }
static void count_work(uint64_t n) { atomic_fetch_add_explicit(&work_count, n, memory_order_relaxed); }

/* A unique non-NULL marker for deleted slots. */
static struct gr_ctrl_topic tombstone_topic;
#define TOMBSTONE (&tombstone_topic)

void gr_ctrl_ctx_init(struct gr_ctrl_context *ctx) { memset(ctx, 0, sizeof *ctx); }

/* ---- a partition's slot in its topic's pool (context.h) ---- */

static int32_t *slot_isr(const struct gr_ctrl_partition *p) { return p->slot ? p->slot + p->slot_cap : NULL; }
static uint8_t *slot_states(const struct gr_ctrl_partition *p) {
    return p->slot ? (uint8_t *)(p->slot + 2 * (size_t)p->slot_cap) : NULL;
}
/* int32 words of a slot of capacity cap: replicas, isr, then cap state bytes rounded up. */
static size_t slot_words(int cap) { return cap <= 0 ? 0 : 2 * (size_t)cap + ((size_t)cap + 3) / 4; }

/* Stores n ids from src into a partition array whose value is cur and whose slot part (room for
 * cap ids; NULL if none) is slot. own: src is an owned array, kept when it does not fit the slot,
 * freed otherwise. Returns the new value: the slot part when n fits, else an owned array; NULL
 * when n == 0 and empty_null. Frees cur unless it is the slot part or the result. src may be cur
 * or the slot part. */
static int32_t *store_ids(int32_t *cur, int32_t *slot, int cap, int32_t *src, int n, bool own, bool empty_null) {
    int32_t *out;
    if (n == 0 && empty_null) {
        out = NULL;
    } else if (slot && n <= cap) {
        if (n > 0 && src != slot) memmove(slot, src, (size_t)n * sizeof *slot);
        out = slot;
    } else if (own) {
        out = src;
    } else {
        out = gr_malloc((size_t)(n > 0 ? n : 1) * sizeof *out);
        if (n > 0) memcpy(out, src, (size_t)n * sizeof *out);
    }
    if (own && src != out && src != slot && src != cur) free(src);
    if (cur != out && cur != slot) free(cur);
    return out;
}

/* The same for replica states (n bytes; never taken). */
static uint8_t *store_states(uint8_t *cur, uint8_t *slot, int cap, const uint8_t *src, int n) {
    uint8_t *out;
    if (slot && n <= cap) {
        if (n > 0 && src != slot) memmove(slot, src, (size_t)n);
        out = slot;
    } else {
        out = gr_malloc((size_t)(n > 0 ? n : 1));
        if (n > 0) memcpy(out, src, (size_t)n);
    }
    if (cur != out && cur != slot) free(cur);
    return out;
}

static void partition_release(struct gr_ctrl_partition *p) {
    if (p->replicas != p->slot) free(p->replicas);
    free(p->adding);
    free(p->removing);
    if (p->lai.isr != slot_isr(p)) free(p->lai.isr);
    p->lai.isr = NULL;
    p->lai.n_isr = 0;
    if (p->replica_states != slot_states(p)) free(p->replica_states);
    free(p->offline_dirs);
}

/* Gives every partition of t a slot in a new pool sized to its replicas (at least 1), moves its
 * arrays there (those in t's old pool or on the heap; an ISR longer than the replicas stays
 * on the heap) and frees the old pool. */
static void topic_pack(struct gr_ctrl_topic *t) {
    size_t words = 0;
    for (int i = 0; i < t->n_partitions; i++) {
        int n = t->partitions[i].n_replicas;
        words += slot_words(n > UINT8_MAX ? 0 : n > 0 ? n : 1);
    }
    int32_t *pool = words ? gr_calloc(words, sizeof *pool) : NULL, *next = pool;
    for (int i = 0; i < t->n_partitions; i++) {
        struct gr_ctrl_partition *p = &t->partitions[i];
        int n = p->n_replicas, cap = n > UINT8_MAX ? 0 : n > 0 ? n : 1;
        struct gr_ctrl_partition old = *p; /* its slot, for what not to free */
        p->slot = cap ? next : NULL;
        p->slot_cap = (uint8_t)cap;
        next += slot_words(cap);
        /* an array in the old pool is copied (that pool is freed below), an owned one moved */
        bool own = old.replicas != old.slot;
        p->replicas = store_ids(own ? old.replicas : NULL, p->slot, cap, old.replicas, n, own, false);
        own = old.lai.isr != slot_isr(&old);
        p->lai.isr = store_ids(own ? old.lai.isr : NULL, slot_isr(p), cap, old.lai.isr, old.lai.n_isr, own, true);
        if (old.replica_states) {
            own = old.replica_states != slot_states(&old);
            p->replica_states = store_states(own ? old.replica_states : NULL, slot_states(p), cap, old.replica_states, n);
        }
    }
    free(t->pool);
    t->pool = pool;
}

static int64_t reassigning_in(const struct gr_ctrl_topic *t) {
    int64_t n = 0;
    for (int i = 0; t && i < t->n_partitions; i++) n += t->partitions[i].n_adding > 0 || t->partitions[i].n_removing > 0;
    return n;
}

void gr_ctrl_ctx_reassigning_changed(struct gr_ctrl_context *ctx, bool was, bool is) {
    ctx->n_reassigning += (int64_t)is - (int64_t)was;
}

static void topic_free(struct gr_ctrl_topic *t) {
    for (int i = 0; i < t->n_partitions; i++) partition_release(&t->partitions[i]);
    free(t->partitions);
    free(t->pool);
    free(t->name);
    free(t->topic_id);
    free(t);
}

static void brokers_clear(struct gr_ctrl_context *ctx) {
    for (int i = 0; i < ctx->n_brokers; i++) gr_kzk_broker_release(&ctx->brokers[i].info);
    free(ctx->brokers);
    ctx->brokers = NULL;
    ctx->n_brokers = 0;
}

void gr_ctrl_ctx_reset(struct gr_ctrl_context *ctx) {
    brokers_clear(ctx);
    free(ctx->shutting_down);
    ctx->shutting_down = NULL;
    ctx->n_shutting_down = 0;
    for (size_t i = 0; i < ctx->n_slots; i++) {
        if (ctx->slots[i] && ctx->slots[i] != TOMBSTONE) topic_free(ctx->slots[i]);
        ctx->slots[i] = NULL;
    }
    ctx->n_topics = ctx->n_used = 0;
    ctx->n_partitions = 0;
    ctx->n_reassigning = 0;
    ctx->gen++;
    gr_zstrings_free(&ctx->topics_to_be_deleted);
    memset(&ctx->topics_to_be_deleted, 0, sizeof ctx->topics_to_be_deleted);
}

void gr_ctrl_ctx_release(struct gr_ctrl_context *ctx) {
    gr_ctrl_ctx_reset(ctx);
    free(ctx->slots);
    ctx->slots = NULL;
    ctx->n_slots = 0;
}

void gr_ctrl_ctx_move_topics(struct gr_ctrl_context *dst, struct gr_ctrl_context *src) {
    int32_t epoch = dst->epoch, ezv = dst->epoch_zk_version;
    uint64_t gen = dst->gen, event_gen = dst->event_gen;
    gr_ctrl_ctx_release(dst);
    gr_ctrl_ctx_clear_deletions(src);
    brokers_clear(src);
    free(src->shutting_down);
    src->shutting_down = NULL;
    src->n_shutting_down = 0;
    dst->slots = src->slots;
    dst->n_slots = src->n_slots;
    dst->n_topics = src->n_topics;
    dst->n_used = src->n_used;
    dst->n_partitions = src->n_partitions;
    dst->n_reassigning = src->n_reassigning;
    src->slots = NULL;
    src->n_slots = src->n_topics = src->n_used = 0;
    src->n_partitions = src->n_reassigning = 0;
    src->gen++;
    dst->epoch = epoch;
    dst->epoch_zk_version = ezv;
    dst->gen = gen + 1;
    dst->event_gen = event_gen;
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(dst, &cur))) {
        for (int i = 0; i < t->n_partitions; i++) {
            struct gr_ctrl_partition *p = &t->partitions[i];
            p->state = 0;
            p->fresh_gen = 0;
            if (p->replica_states != slot_states(p)) free(p->replica_states);
            p->replica_states = NULL;
            free(p->offline_dirs);
            p->offline_dirs = NULL;
            p->n_offline_dirs = 0;
        }
    }
}

void gr_ctrl_partition_clear_state(struct gr_ctrl_partition *p) {
    if (p->lai.isr != slot_isr(p)) free(p->lai.isr);
    memset(&p->lai, 0, sizeof p->lai);
    p->lai.leader = -1;
    p->has_state = false;
}

/* ---- brokers ---- */

static int broker_index(const struct gr_ctrl_context *ctx, int32_t id, bool *found) {
    int lo = 0, hi = ctx->n_brokers;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (ctx->brokers[mid].id == id) {
            *found = true;
            return mid;
        }
        if (ctx->brokers[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    *found = false;
    return lo;
}

void gr_ctrl_ctx_add_live_broker(struct gr_ctrl_context *ctx, const struct gr_kzk_broker *b) {
    bool found;
    int i = broker_index(ctx, b->id, &found);
    if (found) {
        gr_kzk_broker_release(&ctx->brokers[i].info);
    } else {
        ctx->brokers = gr_realloc(ctx->brokers, (size_t)(ctx->n_brokers + 1) * sizeof *ctx->brokers);
        memmove(&ctx->brokers[i + 1], &ctx->brokers[i], (size_t)(ctx->n_brokers - i) * sizeof *ctx->brokers);
        ctx->n_brokers++;
    }
    ctx->brokers[i].id = b->id;
    ctx->brokers[i].epoch = b->epoch;
    gr_kzk_broker_copy(&ctx->brokers[i].info, b);
}

void gr_ctrl_ctx_set_live_brokers(struct gr_ctrl_context *ctx, const struct gr_kzk_broker *brokers, int n) {
    brokers_clear(ctx);
    for (int i = 0; i < n; i++) gr_ctrl_ctx_add_live_broker(ctx, &brokers[i]);
}

void gr_ctrl_ctx_remove_live_broker(struct gr_ctrl_context *ctx, int32_t id) {
    bool found;
    int i = broker_index(ctx, id, &found);
    if (!found) return;
    gr_kzk_broker_release(&ctx->brokers[i].info);
    memmove(&ctx->brokers[i], &ctx->brokers[i + 1], (size_t)(ctx->n_brokers - i - 1) * sizeof *ctx->brokers);
    ctx->n_brokers--;
}

struct gr_ctrl_broker *gr_ctrl_ctx_broker(struct gr_ctrl_context *ctx, int32_t id) {
    bool found;
    int i = broker_index(ctx, id, &found);
    return found ? &ctx->brokers[i] : NULL;
}

bool gr_ctrl_ctx_is_live(struct gr_ctrl_context *ctx, int32_t id) { return gr_ctrl_ctx_broker(ctx, id) != NULL; }

char *gr_ctrl_ctx_format_brokers(const struct gr_ctrl_context *ctx, char *buf, size_t len) {
    size_t off = 0;
    if (len) buf[0] = 0;
    for (int i = 0; i < ctx->n_brokers && off < len; i++) {
        int w = snprintf(buf + off, len - off, "%s%d:%lld", i ? "," : "", ctx->brokers[i].id,
                         (long long)ctx->brokers[i].epoch);
        if (w < 0) break;
        off += (size_t)w;
    }
    return buf;
}

/* ---- topic table ---- */

/* Slot of name, or (when absent) NULL with *insert_at the first free/tombstone slot. */
static struct gr_ctrl_topic **lookup(struct gr_ctrl_context *ctx, const char *name, size_t *insert_at) {
    if (ctx->n_slots == 0) return NULL;
    size_t mask = ctx->n_slots - 1;
    size_t i = (size_t)gr_str_hash(name) & mask;
    size_t first_free = (size_t)-1;
    for (size_t probes = 0; probes < ctx->n_slots; probes++, i = (i + 1) & mask) {
        struct gr_ctrl_topic *t = ctx->slots[i];
        if (!t) {
            if (first_free == (size_t)-1) first_free = i;
            break;
        }
        if (t == TOMBSTONE) {
            if (first_free == (size_t)-1) first_free = i;
            continue;
        }
        if (strcmp(t->name, name) == 0) return &ctx->slots[i];
    }
    if (insert_at) *insert_at = first_free;
    return NULL;
}

static void rehash(struct gr_ctrl_context *ctx, size_t n_slots) {
    struct gr_ctrl_topic **old = ctx->slots;
    size_t old_n = ctx->n_slots;
    ctx->slots = gr_calloc(n_slots, sizeof *ctx->slots);
    ctx->n_slots = n_slots;
    ctx->n_used = ctx->n_topics;
    for (size_t i = 0; i < old_n; i++) {
        struct gr_ctrl_topic *t = old[i];
        if (!t || t == TOMBSTONE) continue;
        size_t j = (size_t)gr_str_hash(t->name) & (n_slots - 1);
        while (ctx->slots[j]) j = (j + 1) & (n_slots - 1);
        ctx->slots[j] = t;
    }
    free(old);
}

struct gr_ctrl_topic *gr_ctrl_ctx_topic(struct gr_ctrl_context *ctx, const char *name) {
    struct gr_ctrl_topic **slot = lookup(ctx, name, NULL);
    return slot ? *slot : NULL;
}

static int cmp_part(const void *a, const void *b) {
    const struct gr_ctrl_partition *x = a, *y = b;
    return x->partition < y->partition ? -1 : x->partition > y->partition;
}

struct gr_ctrl_partition *gr_ctrl_topic_partition(struct gr_ctrl_topic *t, int32_t partition) {
    if (!t) return NULL;
    /* Partitions are normally 0..n-1: try the direct index first. */
    if (partition >= 0 && partition < t->n_partitions && t->partitions[partition].partition == partition)
        return &t->partitions[partition];
    struct gr_ctrl_partition key = {.partition = partition};
    return bsearch(&key, t->partitions, (size_t)t->n_partitions, sizeof key, cmp_part);
}

struct gr_ctrl_partition *gr_ctrl_ctx_partition(struct gr_ctrl_context *ctx, const char *topic, int32_t partition) {
    return gr_ctrl_topic_partition(gr_ctrl_ctx_topic(ctx, topic), partition);
}

static int queue_find(const struct gr_ctrl_context *ctx, const char *name) {
    for (int i = 0; i < ctx->topics_to_be_deleted.count; i++)
        if (strcmp(ctx->topics_to_be_deleted.names[i], name) == 0) return i;
    return -1;
}

/* A new partition of pa's assignment, taking its arrays (topic_pack moves the replicas into the
 * pool). */
static void take_assignment(struct gr_ctrl_partition *p, struct gr_kzk_partition_assignment *pa) {
    memset(p, 0, sizeof *p);
    p->partition = pa->partition;
    p->n_replicas = pa->n_replicas;
    p->replicas = pa->replicas;
    p->n_adding = pa->n_adding;
    p->adding = pa->adding;
    p->n_removing = pa->n_removing;
    p->removing = pa->removing;
    p->lai.leader = -1;
    pa->replicas = pa->adding = pa->removing = NULL;
    pa->n_replicas = pa->n_adding = pa->n_removing = 0;
}

struct gr_ctrl_topic *gr_ctrl_ctx_put_topic(struct gr_ctrl_context *ctx, struct gr_kzk_topic_assignment *a) {
    if ((ctx->n_used + 1) * 4 >= ctx->n_slots * 3) {
        size_t want = 64;
        while (want < (ctx->n_topics + 1) * 2) want *= 2;
        rehash(ctx, want);
    }
    size_t insert_at = (size_t)-1;
    struct gr_ctrl_topic **slot = lookup(ctx, a->topic, &insert_at);
    struct gr_ctrl_topic *old = slot ? *slot : NULL;

    struct gr_ctrl_topic *t = gr_calloc(1, sizeof *t);
    t->name = gr_strdup(a->topic);
    t->topic_id = a->topic_id;
    a->topic_id = NULL;
    if (!t->topic_id || gr_uuid_parse(t->topic_id, &t->id) != 0) memset(&t->id, 0, sizeof t->id);
    t->zk_version = a->zk_version;
    t->czxid = a->czxid;
    t->states_stamp = old ? old->states_stamp : 0;
    t->n_partitions = a->n_partitions;
    t->partitions = gr_calloc((size_t)(a->n_partitions ? a->n_partitions : 1), sizeof *t->partitions);
    for (int i = 0; i < a->n_partitions; i++) take_assignment(&t->partitions[i], &a->partitions[i]);
    topic_pack(t);
    for (int i = 0; i < a->n_partitions; i++) {
        struct gr_ctrl_partition *p = &t->partitions[i];
        struct gr_ctrl_partition *prev = gr_ctrl_topic_partition(old, p->partition);
        if (!prev) continue;
        /* keep what we know about existing partitions */
        gr_ctrl_partition_set_state(p, &prev->lai);
        p->has_state = prev->has_state;
        p->state = prev->state;
        if (prev->replica_states && prev->n_replicas == p->n_replicas)
            memcpy(gr_ctrl_partition_replica_states(p), prev->replica_states, (size_t)p->n_replicas);
        p->n_offline_dirs = prev->n_offline_dirs;
        p->offline_dirs = prev->offline_dirs;
        prev->offline_dirs = NULL;
        prev->n_offline_dirs = 0;
    }
    qsort(t->partitions, (size_t)t->n_partitions, sizeof *t->partitions, cmp_part);
    t->queued_for_deletion = old ? old->queued_for_deletion : queue_find(ctx, t->name) >= 0;

    ctx->n_reassigning += reassigning_in(t) - reassigning_in(old);
    ctx->gen++;
    if (old) {
        ctx->n_partitions -= old->n_partitions;
        topic_free(old);
        *slot = t;
    } else {
        /* a reused tombstone was already counted in n_used */
        if (ctx->slots[insert_at] != TOMBSTONE) ctx->n_used++;
        ctx->slots[insert_at] = t;
        ctx->n_topics++;
    }
    ctx->n_partitions += t->n_partitions;
    count_work((uint64_t)t->n_partitions);
    return t;
}

int gr_ctrl_ctx_add_partitions(struct gr_ctrl_context *ctx, struct gr_ctrl_topic *t, struct gr_kzk_topic_assignment *a) {
    int added = 0;
    for (int i = 0; i < a->n_partitions; i++)
        if (!gr_ctrl_topic_partition(t, a->partitions[i].partition)) added++;
    if (!added) return 0;
    ctx->n_reassigning -= reassigning_in(t);
    t->partitions = gr_realloc(t->partitions, (size_t)(t->n_partitions + added) * sizeof *t->partitions);
    int n = t->n_partitions;
    for (int i = 0; i < a->n_partitions; i++) {
        struct gr_kzk_partition_assignment *pa = &a->partitions[i];
        bool fresh = true;
        for (int k = 0; k < t->n_partitions; k++) fresh &= t->partitions[k].partition != pa->partition;
        if (!fresh) continue; /* t is sorted only up to n_partitions: scan */
        take_assignment(&t->partitions[n++], pa);
    }
    t->n_partitions = n;
    qsort(t->partitions, (size_t)t->n_partitions, sizeof *t->partitions, cmp_part);
    topic_pack(t);
    t->zk_version = a->zk_version;
    ctx->gen++;
    ctx->n_partitions += added;
    ctx->n_reassigning += reassigning_in(t);
    return added;
}

void gr_ctrl_ctx_queue_deletion(struct gr_ctrl_context *ctx, const char *name) {
    struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, name);
    if (t) t->queued_for_deletion = true;
    if (queue_find(ctx, name) >= 0) return;
    struct gr_zstrings *q = &ctx->topics_to_be_deleted;
    q->names = gr_realloc(q->names, (size_t)(q->count + 1) * sizeof *q->names);
    q->names[q->count++] = gr_strdup(name);
}

void gr_ctrl_ctx_unqueue_deletion(struct gr_ctrl_context *ctx, const char *name) {
    struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, name);
    if (t) t->queued_for_deletion = false;
    int i = queue_find(ctx, name);
    if (i < 0) return;
    struct gr_zstrings *q = &ctx->topics_to_be_deleted;
    free(q->names[i]);
    memmove(&q->names[i], &q->names[i + 1], (size_t)(q->count - i - 1) * sizeof *q->names);
    q->count--;
}

void gr_ctrl_ctx_clear_deletions(struct gr_ctrl_context *ctx) {
    for (int i = 0; i < ctx->topics_to_be_deleted.count; i++) {
        struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, ctx->topics_to_be_deleted.names[i]);
        if (t) t->queued_for_deletion = false;
    }
    gr_zstrings_free(&ctx->topics_to_be_deleted);
    memset(&ctx->topics_to_be_deleted, 0, sizeof ctx->topics_to_be_deleted);
}

void gr_ctrl_ctx_remove_topic(struct gr_ctrl_context *ctx, const char *name) {
    struct gr_ctrl_topic **slot = lookup(ctx, name, NULL);
    if (!slot) return;
    ctx->n_partitions -= (*slot)->n_partitions;
    count_work((uint64_t)(*slot)->n_partitions);
    ctx->n_reassigning -= reassigning_in(*slot);
    ctx->gen++;
    topic_free(*slot);
    *slot = TOMBSTONE;
    ctx->n_topics--;
}

void gr_ctrl_partition_set_state(struct gr_ctrl_partition *p, const struct gr_kzk_leader_and_isr *lai) {
    int32_t *isr = store_ids(p->lai.isr, slot_isr(p), p->slot_cap, lai->isr, lai->n_isr, false, true);
    p->lai = *lai;
    p->lai.isr = isr;
    p->has_state = true;
    count_work(1);
}

void gr_ctrl_partition_take_state(struct gr_ctrl_partition *p, struct gr_kzk_leader_and_isr *lai) {
    int32_t *isr = store_ids(p->lai.isr, slot_isr(p), p->slot_cap, lai->isr, lai->n_isr, true, true);
    p->lai = *lai;
    p->lai.isr = isr;
    lai->isr = NULL;
    lai->n_isr = 0;
    p->has_state = true;
    count_work(1);
}

uint8_t *gr_ctrl_partition_replica_states(struct gr_ctrl_partition *p) {
    if (!p->replica_states) {
        int n = p->n_replicas;
        if (p->slot && n <= p->slot_cap) {
            p->replica_states = slot_states(p);
            memset(p->replica_states, 0, (size_t)n);
        } else {
            p->replica_states = gr_calloc((size_t)(n > 0 ? n : 1), 1);
        }
    }
    return p->replica_states;
}

void gr_ctrl_partition_set_assignment(struct gr_ctrl_partition *p, const int32_t *replicas, int n_replicas,
                                      const int32_t *adding, int n_adding, const int32_t *removing, int n_removing) {
    uint8_t *states = NULL;
    if (p->replica_states) { /* states follow their replica ids (computed from the old arrays) */
        states = gr_calloc((size_t)(n_replicas > 0 ? n_replicas : 1), 1);
        for (int i = 0; i < n_replicas; i++) {
            int j = -1;
            for (int k = 0; k < p->n_replicas && j < 0; k++)
                if (p->replicas[k] == replicas[i]) j = k;
            if (j >= 0) states[i] = p->replica_states[j];
        }
    }
    p->replicas = store_ids(p->replicas, p->slot, p->slot_cap, (int32_t *)replicas, n_replicas, false, false);
    p->n_replicas = n_replicas;
    int32_t *a = n_adding > 0 ? gr_malloc((size_t)n_adding * sizeof *a) : NULL;
    int32_t *r = n_removing > 0 ? gr_malloc((size_t)n_removing * sizeof *r) : NULL;
    if (a) memcpy(a, adding, (size_t)n_adding * sizeof *a);
    if (r) memcpy(r, removing, (size_t)n_removing * sizeof *r);
    free(p->adding);
    free(p->removing);
    p->adding = a;
    p->n_adding = n_adding;
    p->removing = r;
    p->n_removing = n_removing;
    if (states) {
        p->replica_states = store_states(p->replica_states, slot_states(p), p->slot_cap, states, n_replicas);
        free(states);
    }
}

struct gr_ctrl_topic *gr_ctrl_ctx_next_topic(struct gr_ctrl_context *ctx, size_t *cursor) {
    while (*cursor < ctx->n_slots) {
        struct gr_ctrl_topic *t = ctx->slots[(*cursor)++];
        if (t && t != TOMBSTONE) return t;
    }
    return NULL;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

const char **gr_ctrl_ctx_sorted_topics(struct gr_ctrl_context *ctx, size_t *n) {
    const char **v = gr_malloc((ctx->n_topics ? ctx->n_topics : 1) * sizeof *v);
    size_t k = 0, cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur))) v[k++] = t->name;
    qsort(v, k, sizeof *v, cmp_str);
    *n = k;
    return v;
}

size_t gr_ctrl_ctx_topic_count(const struct gr_ctrl_context *ctx) { return ctx->n_topics; }
int64_t gr_ctrl_ctx_partition_count(const struct gr_ctrl_context *ctx) { return ctx->n_partitions; }

int64_t gr_ctrl_ctx_offline_partition_count(struct gr_ctrl_context *ctx) {
    int64_t n = 0;
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur))) {
        for (int i = 0; i < t->n_partitions; i++) {
            struct gr_ctrl_partition *p = &t->partitions[i];
            if (!p->has_state) continue;
            if (p->lai.leader < 0 || !gr_ctrl_ctx_is_live(ctx, p->lai.leader)) n++;
        }
    }
    return n;
}
