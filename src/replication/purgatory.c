/* Delayed-operation purgatory (see purgatory.h for the rules).
 *
 * Data structures, all under p->lock:
 *   - a hash of watch lists, key -> array of op pointers, doubled when it holds more than two
 *     lists per bucket (a follower's fetch watches every partition it follows: 100k keys);
 *   - a binary min-heap of waiting ops ordered by deadline (op->heap_idx is its slot).
 * A registered op holds one reference for the purgatory; checkers take a temporary reference
 * per op while they evaluate it outside p->lock. */
#include "replication/purgatory.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"

#define NBUCKETS_MIN 1024

struct watch_list {
    struct watch_list *next;
    uint64_t key;
    struct gr_delayed_op **ops;
    int n, cap;
};

struct gr_purgatory {
    char name[48];
    pthread_mutex_t lock;
    pthread_cond_t cond; /* reaper wake-up: earlier deadline or shutdown */
    pthread_t reaper;
    bool stopping;
    struct watch_list **buckets;
    size_t nbuckets; /* a power of two */
    size_t nlists;
    struct gr_delayed_op **heap;
    size_t heap_n, heap_cap;
    uint64_t check_stamp; /* gr_purgatory_check_many's pass counter */
    int64_t reaper_until_ms; /* the reaper sleeps until then (0: it is not sleeping) */
};

/* An idle reaper looks again after this long (Kafka's reaper advances its clock every 200 ms),
 * so submitting an op due later needs no wake-up: a follower's fetch parked for 500 ms per
 * produce request no longer wakes the reaper each time. */
#define REAPER_IDLE_MS 200

static const char *LOGGER = "kafka.server.DelayedOperationPurgatory";

static size_t bucket_of(const struct gr_purgatory *p, uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)(key & (p->nbuckets - 1));
}

/* p->lock held. */
static void grow_buckets(struct gr_purgatory *p) {
    size_t old_n = p->nbuckets;
    struct watch_list **old = p->buckets;
    p->nbuckets = old_n * 2;
    p->buckets = gr_calloc(p->nbuckets, sizeof *p->buckets);
    for (size_t b = 0; b < old_n; b++) {
        struct watch_list *w = old[b];
        while (w) {
            struct watch_list *next = w->next;
            size_t nb = bucket_of(p, w->key);
            w->next = p->buckets[nb];
            p->buckets[nb] = w;
            w = next;
        }
    }
    free(old);
}

/* ---- op references ---- */

static void op_ref(struct gr_delayed_op *op) { atomic_fetch_add(&op->refs, 1); }

static void op_unref(struct gr_delayed_op *op) {
    if (atomic_fetch_sub(&op->refs, 1) == 1) {
        pthread_mutex_destroy(&op->lock);
        if (op->keys != op->inline_keys) free(op->keys);
        op->vt->destroy(op);
    }
}

/* Claims the op for completion; true for exactly one caller. */
static bool op_claim(struct gr_delayed_op *op) {
    int expect = 0;
    return atomic_compare_exchange_strong(&op->completed, &expect, 1);
}

/* ---- heap (p->lock held) ---- */

static void heap_swap(struct gr_purgatory *p, size_t a, size_t b) {
    struct gr_delayed_op *t = p->heap[a];
    p->heap[a] = p->heap[b];
    p->heap[b] = t;
    p->heap[a]->heap_idx = a;
    p->heap[b]->heap_idx = b;
}

static void heap_up(struct gr_purgatory *p, size_t i) {
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (p->heap[parent]->deadline_ms <= p->heap[i]->deadline_ms) break;
        heap_swap(p, parent, i);
        i = parent;
    }
}

static void heap_down(struct gr_purgatory *p, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < p->heap_n && p->heap[l]->deadline_ms < p->heap[m]->deadline_ms) m = l;
        if (r < p->heap_n && p->heap[r]->deadline_ms < p->heap[m]->deadline_ms) m = r;
        if (m == i) break;
        heap_swap(p, i, m);
        i = m;
    }
}

static void heap_push(struct gr_purgatory *p, struct gr_delayed_op *op) {
    if (p->heap_n == p->heap_cap) {
        p->heap_cap = p->heap_cap ? p->heap_cap * 2 : 64;
        p->heap = gr_realloc(p->heap, p->heap_cap * sizeof *p->heap);
    }
    op->heap_idx = p->heap_n;
    p->heap[p->heap_n++] = op;
    heap_up(p, op->heap_idx);
}

static void heap_remove(struct gr_purgatory *p, struct gr_delayed_op *op) {
    size_t i = op->heap_idx;
    if (i >= p->heap_n || p->heap[i] != op) return;
    p->heap_n--;
    if (i != p->heap_n) {
        p->heap[i] = p->heap[p->heap_n];
        p->heap[i]->heap_idx = i;
        heap_down(p, i);
        heap_up(p, i);
    }
}

/* ---- watch lists (p->lock held) ---- */

static struct watch_list *wl_find(struct gr_purgatory *p, uint64_t key, bool create) {
    size_t b = bucket_of(p, key);
    for (struct watch_list *w = p->buckets[b]; w; w = w->next)
        if (w->key == key) return w;
    if (!create) return NULL;
    struct watch_list *w = gr_calloc(1, sizeof *w);
    w->key = key;
    w->next = p->buckets[b];
    p->buckets[b] = w;
    if (++p->nlists > 2 * p->nbuckets) grow_buckets(p);
    return w;
}

static void wl_add(struct gr_purgatory *p, uint64_t key, struct gr_delayed_op *op) {
    struct watch_list *w = wl_find(p, key, true);
    for (int i = 0; i < w->n; i++)
        if (w->ops[i] == op) return; /* the same key twice in one op */
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 4;
        w->ops = gr_realloc(w->ops, (size_t)w->cap * sizeof *w->ops);
    }
    w->ops[w->n++] = op;
}

static void wl_remove(struct gr_purgatory *p, uint64_t key, struct gr_delayed_op *op) {
    size_t b = bucket_of(p, key);
    struct watch_list **pp = &p->buckets[b];
    while (*pp && (*pp)->key != key) pp = &(*pp)->next;
    struct watch_list *w = *pp;
    if (!w) return;
    for (int i = 0; i < w->n; i++) {
        if (w->ops[i] == op) {
            w->ops[i] = w->ops[--w->n];
            break;
        }
    }
    if (w->n == 0) {
        *pp = w->next;
        free(w->ops);
        free(w);
        p->nlists--;
    }
}

/* Removes a claimed op from the heap and its watch lists. Returns true if it was registered
 * (the caller then owns the purgatory's reference and must drop it). */
static bool unregister(struct gr_purgatory *p, struct gr_delayed_op *op) {
    pthread_mutex_lock(&p->lock);
    bool was = op->registered;
    if (was) {
        op->registered = false;
        heap_remove(p, op);
        for (int i = 0; i < op->nkeys; i++) wl_remove(p, op->keys[i], op);
    }
    pthread_mutex_unlock(&p->lock);
    return was;
}

/* Evaluates op under its lock; on success claims it. */
static bool try_claim_keys(struct gr_delayed_op *op, uint64_t key, const uint64_t *keys, int nkeys) {
    bool claimed = false;
    pthread_mutex_lock(&op->lock);
    op->woken_key = key;
    op->woken_keys = keys;
    op->n_woken = key ? 0 : nkeys;
    if (atomic_load(&op->completed) == 0 && op->vt->try_complete(op)) claimed = op_claim(op);
    op->woken_keys = NULL;
    op->n_woken = 0;
    pthread_mutex_unlock(&op->lock);
    return claimed;
}

static bool try_claim(struct gr_delayed_op *op, uint64_t key) { return try_claim_keys(op, key, NULL, 0); }

/* A claimed op: leave the purgatory, run on_complete, drop the registration reference. */
static void finish(struct gr_purgatory *p, struct gr_delayed_op *op, bool expired) {
    bool was = unregister(p, op);
    op->vt->on_complete(op, expired);
    if (was) op_unref(op);
}

/* ---- reaper ---- */

static void *reaper_main(void *arg) {
    struct gr_purgatory *p = arg;
    char tname[16];
    snprintf(tname, sizeof tname, "reaper-%.8s", p->name);
    pthread_setname_np(pthread_self(), tname);

    pthread_mutex_lock(&p->lock);
    while (!p->stopping) {
        int64_t now = gr_mono_ms();
        if (p->heap_n > 0 && p->heap[0]->deadline_ms <= now) {
            struct gr_delayed_op *op = p->heap[0];
            op_ref(op);
            pthread_mutex_unlock(&p->lock);
            /* Take the op lock so that expiry never overlaps a running try_complete. */
            pthread_mutex_lock(&op->lock);
            bool claimed = op_claim(op);
            pthread_mutex_unlock(&op->lock);
            if (claimed) finish(p, op, true);
            op_unref(op);
            pthread_mutex_lock(&p->lock);
            continue;
        }
        {
            /* The condition variable uses CLOCK_MONOTONIC (set in gr_purgatory_new). */
            int64_t wait_ms = p->heap_n == 0 ? REAPER_IDLE_MS : GR_MIN(p->heap[0]->deadline_ms - now, REAPER_IDLE_MS);
            p->reaper_until_ms = now + wait_ms;
            struct timespec ts = gr_timespec_after_ms(CLOCK_MONOTONIC, wait_ms);
            pthread_cond_timedwait(&p->cond, &p->lock, &ts);
            p->reaper_until_ms = 0;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* ---- public API ---- */

struct gr_purgatory *gr_purgatory_new(const char *name) {
    struct gr_purgatory *p = gr_calloc(1, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name ? name : "purgatory");
    p->nbuckets = NBUCKETS_MIN;
    p->buckets = gr_calloc(p->nbuckets, sizeof *p->buckets);
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cond, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&p->reaper, NULL, reaper_main, p);
    if (rc != 0) {
        gr_error(LOGGER, "cannot start the reaper thread of purgatory %s: %s", p->name, strerror(rc));
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->lock);
        free(p->buckets);
        free(p);
        return NULL;
    }
    return p;
}

void gr_purgatory_free(struct gr_purgatory *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->reaper, NULL);
    /* Expire whatever still waits. */
    for (;;) {
        pthread_mutex_lock(&p->lock);
        struct gr_delayed_op *op = p->heap_n ? p->heap[0] : NULL;
        if (op) op_ref(op);
        pthread_mutex_unlock(&p->lock);
        if (!op) break;
        pthread_mutex_lock(&op->lock);
        bool claimed = op_claim(op);
        pthread_mutex_unlock(&op->lock);
        if (claimed) {
            finish(p, op, true);
        } else if (unregister(p, op)) {
            op_unref(op); /* claimed elsewhere but still listed: cannot happen, be safe */
        }
        op_unref(op);
    }
    for (size_t b = 0; b < p->nbuckets; b++) {
        struct watch_list *w = p->buckets[b];
        while (w) {
            struct watch_list *next = w->next;
            free(w->ops);
            free(w);
            w = next;
        }
    }
    free(p->heap);
    free(p->buckets);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void gr_delayed_op_init(struct gr_delayed_op *op, const struct gr_delayed_op_vt *vt, int64_t timeout_ms) {
    op->vt = vt;
    op->deadline_ms = gr_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    atomic_init(&op->completed, 0);
    atomic_init(&op->refs, 1);
    pthread_mutex_init(&op->lock, NULL);
    op->registered = false;
    op->heap_idx = (size_t)-1;
    op->keys = op->inline_keys;
    op->nkeys = 0;
    op->woken_key = 0;
    op->woken_keys = NULL;
    op->n_woken = 0;
    op->check_stamp = 0;
    op->check_idx = 0;
}

bool gr_purgatory_submit(struct gr_purgatory *p, struct gr_delayed_op *op, const uint64_t *keys, int nkeys) {
    /* The submitter's reference (refs = 1 from init) is dropped at the end. */
    if (try_claim(op, 0)) {
        op->vt->on_complete(op, false);
        op_unref(op);
        return true;
    }
    if (nkeys > GR_DELAYED_OP_INLINE_KEYS) op->keys = gr_malloc((size_t)nkeys * sizeof *keys);
    if (nkeys > 0) memcpy(op->keys, keys, (size_t)nkeys * sizeof *keys);
    op->nkeys = nkeys;

    pthread_mutex_lock(&p->lock);
    if (p->stopping) {
        pthread_mutex_unlock(&p->lock);
        if (op_claim(op)) op->vt->on_complete(op, true);
        op_unref(op);
        return true;
    }
    op_ref(op); /* the purgatory's reference */
    op->registered = true;
    for (int i = 0; i < nkeys; i++) wl_add(p, op->keys[i], op);
    heap_push(p, op);
    if (op->heap_idx == 0 && p->reaper_until_ms != 0 && op->deadline_ms < p->reaper_until_ms)
        pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);

    bool done = false;
    if (try_claim(op, 0)) {
        finish(p, op, false);
        done = true;
    }
    op_unref(op);
    return done;
}

int gr_purgatory_check(struct gr_purgatory *p, uint64_t key) {
    struct gr_delayed_op *small[16], **ops = small;
    int n = 0;
    pthread_mutex_lock(&p->lock);
    struct watch_list *w = wl_find(p, key, false);
    if (w && w->n > 0) {
        if (w->n > (int)GR_ARRAY_LEN(small)) ops = gr_malloc((size_t)w->n * sizeof *ops);
        for (int i = 0; i < w->n; i++) {
            ops[n++] = w->ops[i];
            op_ref(w->ops[i]);
        }
    }
    pthread_mutex_unlock(&p->lock);

    int completed = 0;
    for (int i = 0; i < n; i++) {
        if (try_claim(ops[i], key)) {
            finish(p, ops[i], false);
            completed++;
        }
        op_unref(ops[i]);
    }
    if (ops != small) free(ops);
    return completed;
}

struct op_key {
    int op; /* index in the collected ops */
    uint64_t key;
};

static int cmp_op_key(const void *a, const void *b) {
    const struct op_key *x = a, *y = b;
    if (x->op != y->op) return x->op < y->op ? -1 : 1;
    return (x->key > y->key) - (x->key < y->key);
}

int gr_purgatory_check_many(struct gr_purgatory *p, const uint64_t *keys, int nkeys) {
    if (nkeys <= 1) return nkeys == 1 ? gr_purgatory_check(p, keys[0]) : 0;
    struct gr_delayed_op **ops = NULL;
    struct op_key *pairs = NULL; /* (op, key) for every watch found */
    int n = 0, cap = 0, np = 0, pcap = 0;
    pthread_mutex_lock(&p->lock);
    uint64_t stamp = ++p->check_stamp;
    for (int k = 0; k < nkeys; k++) {
        struct watch_list *w = wl_find(p, keys[k], false);
        for (int i = 0; w && i < w->n; i++) {
            struct gr_delayed_op *op = w->ops[i];
            if (op->check_stamp != stamp) {
                if (n == cap) {
                    cap = cap ? cap * 2 : 16;
                    ops = gr_realloc(ops, (size_t)cap * sizeof *ops);
                }
                op->check_stamp = stamp;
                op->check_idx = n;
                op_ref(op);
                ops[n++] = op;
            }
            if (np == pcap) {
                pcap = pcap ? pcap * 2 : 16;
                pairs = gr_realloc(pairs, (size_t)pcap * sizeof *pairs);
            }
            pairs[np++] = (struct op_key){op->check_idx, keys[k]};
        }
    }
    pthread_mutex_unlock(&p->lock);
    if (n == 0) return 0; /* nobody watches these keys (the common case) */
    qsort(pairs, (size_t)np, sizeof *pairs, cmp_op_key);
    uint64_t *woken = gr_malloc((size_t)(np + 1) * sizeof *woken);
    int completed = 0;
    for (int i = 0, j = 0; i < n; i++) {
        int nw = 0; /* the distinct keys that woke ops[i] */
        for (; j < np && pairs[j].op == i; j++)
            if (nw == 0 || woken[nw - 1] != pairs[j].key) woken[nw++] = pairs[j].key;
        if (try_claim_keys(ops[i], nw == 1 ? woken[0] : 0, woken, nw)) {
            finish(p, ops[i], false);
            completed++;
        }
        op_unref(ops[i]);
    }
    free(woken);
    free(pairs);
    free(ops);
    return completed;
}

int64_t gr_purgatory_waiting(struct gr_purgatory *p) {
    pthread_mutex_lock(&p->lock);
    int64_t n = (int64_t)p->heap_n;
    pthread_mutex_unlock(&p->lock);
    return n;
}
