/* ControllerBrokerRequestBatch: see request_batch.h. */
#include "controller/request_batch.h"
#include "controller/response.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "controller/event_manager.h"
#include "controller/sender.h"
#include "protocol/codec.h"

#define LOGGER "kafka.controller.ControllerBrokerRequestBatch"

int16_t gr_ctrl_security_protocol_id(const char *name) {
    if (!name) return 0;
    if (strcmp(name, "SSL") == 0) return 1;
    if (strcmp(name, "SASL_PLAINTEXT") == 0) return 2;
    if (strcmp(name, "SASL_SSL") == 0) return 3;
    return 0;
}

/* ---- entries keyed by (broker, topic, partition) ----
 * Adds append; nothing is looked up while a batch is built. A later add for the same key wins
 * (rule 3) when the entries are sorted at send: entries of one key sort together in the order they
 * were added, and merge_runs keeps the last one with the sticky flags of all. (Why not a hash map
 * looked up at each add: at 400k adds per 100k-partition failover its probes and growth are the
 * top of the event thread, bench/README.md session 6.) */

enum { KIND_LAI, KIND_UM, KIND_SR };

/* A topic name interned in the batch (one arena copy per topic per batch): entries of the same
 * topic share the pointer, so the merge compares pointers and the sort compares ranks, not names
 * (strcmp was the top of the controller's event thread building 300k LeaderAndIsr entries). */
struct topic_ref {
    const char *name; /* in the batch arena */
    uint64_t hash;
    uint32_t rank;    /* position in name order, set by rank_topics before a sort */
    char *sent;       /* its copy in the send's arena (sent_name), NULL before */
};

struct entry {
    int32_t broker; /* -1 in the UpdateMetadata partition list */
    int32_t partition;
    const char *topic; /* == tref->name */
    const struct topic_ref *tref;
    size_t seq; /* position in its list: the order of adds */
    union {
        struct LeaderAndIsrRequest_LeaderAndIsrPartitionState lai;
        struct UpdateMetadataRequest_UpdateMetadataPartitionState um;
        struct StopReplicaRequest_StopReplicaPartitionState sr;
    } st;
};

/* The entries of one kind in the order they were added (duplicates included). */
struct elist {
    struct entry **v;
    size_t n, cap;
};

/* Empties an open-addressing table of pointers between batches: a large one (a burst) is freed, a
 * small one zeroed for reuse. Returns the table to keep (NULL when freed; *n_slots then 0). */
static void *slots_reset(void *slots, size_t *n_slots) {
    if (*n_slots > 4096) {
        free(slots);
        *n_slots = 0;
        return NULL;
    }
    if (slots) memset(slots, 0, *n_slots * sizeof(void *));
    return slots;
}

static void elist_clear(struct elist *l) {
    if (l->cap > 4096) { /* a burst: give the memory back */
        free(l->v);
        l->v = NULL;
        l->cap = 0;
    }
    l->n = 0;
}

static void elist_reserve(struct elist *l, size_t more) {
    if (l->n + more <= l->cap) return;
    size_t cap = l->cap ? l->cap : 64;
    while (cap < l->n + more) cap *= 2;
    l->v = gr_realloc(l->v, cap * sizeof *l->v);
    l->cap = cap;
}

/* A copy of l's entries (in the order added), malloc'd. */
static struct entry **elist_copy(const struct elist *l) {
    struct entry **v = gr_malloc((l->n ? l->n : 1) * sizeof *v);
    if (l->n) memcpy(v, l->v, l->n * sizeof *v);
    return v;
}

static bool same_key(const struct entry *x, const struct entry *y) {
    return x->broker == y->broker && x->partition == y->partition && x->tref == y->tref;
}

/* Rule 3 on entries sorted by key and, within a key, in the order added: keeps the last entry of
 * each key, with LeaderAndIsr's IsNew / StopReplica's DeletePartition set if any of the key's
 * entries had it. Compacts v in place; returns the number of distinct keys. Idempotent. */
static size_t merge_runs(struct entry **v, size_t n, int kind) {
    size_t out = 0;
    for (size_t k = 0; k < n;) {
        size_t m = k + 1;
        while (m < n && same_key(v[m], v[k])) m++;
        struct entry *last = v[m - 1];
        if (m - k > 1 && kind == KIND_LAI)
            for (size_t q = k; q < m - 1; q++) last->st.lai.IsNew |= v[q]->st.lai.IsNew;
        if (m - k > 1 && kind == KIND_SR)
            for (size_t q = k; q < m - 1; q++) last->st.sr.DeletePartition |= v[q]->st.sr.DeletePartition;
        v[out++] = last;
        k = m;
    }
    return out;
}

/* Walks sorted entries v[0..n) one broker at a time: sets [*i, *j) to the next run of entries
 * for one broker that is still in the context and returns it; NULL when none is left. Start
 * with *j = 0. */
static struct gr_ctrl_broker *next_broker_run(struct gr_ctrl_context *ctx, struct entry **v, size_t n, size_t *i,
                                              size_t *j) {
    while (*j < n) {
        *i = *j;
        while (*j < n && v[*j]->broker == v[*i]->broker) (*j)++;
        struct gr_ctrl_broker *br = gr_ctrl_ctx_broker(ctx, v[*i]->broker);
        if (br) return br;
    }
    return NULL;
}

/* In sorted entries whose run starts at `first`: does v[k] start a new topic? */
static bool topic_starts(struct entry **v, size_t first, size_t k) {
    return k == first || v[k]->tref != v[k - 1]->tref;
}

/* Number of topics among sorted entries v[first..end). */
static int count_topics(struct entry **v, size_t first, size_t end) {
    int n = 0;
    for (size_t k = first; k < end; k++)
        if (topic_starts(v, first, k)) n++;
    return n;
}

/* Number of entries from v[k] on (before end) with v[k]'s topic. */
static size_t topic_run_len(struct entry **v, size_t k, size_t end) {
    size_t m = k;
    while (m < end && v[m]->tref == v[k]->tref) m++;
    return m - k;
}

struct gr_ctrl_batch;
static size_t distinct(const struct gr_ctrl_batch *cb, const struct elist *l, int kind, int32_t broker);

/* ---- the batch ---- */

/* A state-change line recorded for later (gr_ctrl_batch_log_*). */
enum { SCL_ONLINE, SCL_ISR_REMOVED };
#define SCL_ISR_INLINE 5
struct sclog_rec {
    const char *topic; /* in sclog.names */
    int32_t partition, replica;
    int8_t kind, from;
    struct gr_kzk_leader_and_isr lai; /* isr points at isr_inline or into sclog.names */
    int32_t isr_inline[SCL_ISR_INLINE];
};

struct sclog {
    struct sclog_rec *v;
    int n, cap;
    bool hold;
    struct gr_arena names; /* topic copies (one per run of the same topic) and long ISRs */
    const char *last_copy; /* the latest topic copied */
};

struct gr_ctrl_batch {
    struct gr_ctrl_sm *sm;
    struct gr_arena arena; /* entries, topic names and their arrays */
    struct elist lai, um, sr;
    /* interned topic names (open addressing; refs in the arena), and the last one looked up
     * (callers add a topic's partitions one after another) */
    struct topic_ref **topics;
    size_t n_topic_slots, n_topics;
    bool ranked;
    struct topic_ref *last_ref;
    int n_um_brokers, cap_um_brokers;
    int32_t *um_brokers; /* sorted, unique */
    struct sclog log;    /* state-change lines to write after the send */
};

struct gr_ctrl_batch *gr_ctrl_batch_new(struct gr_ctrl_sm *sm) {
    struct gr_ctrl_batch *b = gr_calloc(1, sizeof *b);
    b->sm = sm;
    gr_arena_init(&b->arena);
    gr_arena_init(&b->log.names);
    return b;
}

/* ---- deferred state-change lines ---- */

static void sclog_reset(struct sclog *l) {
    l->n = 0;
    if (l->cap > 4096) {
        free(l->v);
        l->v = NULL;
        l->cap = 0;
    }
    gr_arena_free(&l->names);
    gr_arena_init(&l->names);
    l->last_copy = NULL;
}

static struct sclog_rec *sclog_add(struct sclog *l, const char *topic, int32_t partition,
                                   const struct gr_kzk_leader_and_isr *lai) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->v = gr_realloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    struct sclog_rec *r = &l->v[l->n++];
    if (!l->last_copy || strcmp(l->last_copy, topic) != 0) /* callers go topic by topic */
        l->last_copy = gr_arena_strdup(&l->names, topic);
    r->topic = l->last_copy;
    r->partition = partition;
    r->replica = -1;
    r->from = 0;
    r->lai = *lai;
    int n = lai->n_isr > 0 ? lai->n_isr : 0;
    r->lai.n_isr = n;
    r->lai.isr = n <= SCL_ISR_INLINE ? NULL : gr_arena_alloc(&l->names, (size_t)n * sizeof(int32_t));
    if (n) memcpy(r->lai.isr ? r->lai.isr : r->isr_inline, lai->isr, (size_t)n * sizeof(int32_t));
    return r;
}

void gr_ctrl_batch_log_online(struct gr_ctrl_batch *b, const char *topic, int32_t partition, int from_state,
                              const struct gr_kzk_leader_and_isr *lai) {
    struct sclog_rec *r = sclog_add(&b->log, topic, partition, lai);
    r->kind = SCL_ONLINE;
    r->from = (int8_t)from_state;
}

void gr_ctrl_batch_log_isr_removed(struct gr_ctrl_batch *b, const char *topic, int32_t partition, int32_t replica,
                                   const struct gr_kzk_leader_and_isr *lai) {
    struct sclog_rec *r = sclog_add(&b->log, topic, partition, lai);
    r->kind = SCL_ISR_REMOVED;
    r->replica = replica;
}

static void sclog_write(const struct gr_ctrl_batch *b, const struct sclog_rec *r) {
    const struct gr_ctrl_sm *sm = b->sm;
    const int32_t *isr_v = r->lai.isr ? r->lai.isr : r->isr_inline;
    char isr[256];
    gr_ctrl_fmt_ids(isr, sizeof isr, isr_v, r->lai.n_isr);
    if (r->kind == SCL_ONLINE) {
        gr_log(GR_LOG_INFO, GR_STATE_CHANGE_LOGGER,
               "[Controller id=%d epoch=%d] Changed partition %s-%d from %s to OnlinePartition with state "
               "LeaderAndIsr(leader=%d, leaderEpoch=%d, isr=%s, zkVersion=%d)",
               sm->controller_id, sm->ctx->epoch, r->topic, r->partition, gr_partition_state_name(r->from),
               r->lai.leader, r->lai.leader_epoch, isr, r->lai.zk_version);
    } else {
        gr_log(GR_LOG_INFO, GR_STATE_CHANGE_LOGGER,
               "[Controller id=%d epoch=%d] Partition %s-%d state changed to (Leader:%d,ISR:%s,LeaderEpoch:%d,"
               "ControllerEpoch:%d) after removing replica %d from the ISR as part of transition to OfflineReplica",
               sm->controller_id, sm->ctx->epoch, r->topic, r->partition, r->lai.leader, isr, r->lai.leader_epoch,
               r->lai.controller_epoch, r->replica);
    }
}

void gr_ctrl_batch_flush_log(struct gr_ctrl_batch *b) {
    for (int i = 0; i < b->log.n; i++) sclog_write(b, &b->log.v[i]);
    sclog_reset(&b->log);
}

void gr_ctrl_batch_hold_log(struct gr_ctrl_batch *b, bool hold) {
    b->log.hold = hold;
    if (!hold) gr_ctrl_batch_flush_log(b);
}

int gr_ctrl_batch_pending_log(const struct gr_ctrl_batch *b) { return b->log.n; }

void gr_ctrl_batch_clear(struct gr_ctrl_batch *b) {
    elist_clear(&b->lai);
    elist_clear(&b->um);
    elist_clear(&b->sr);
    b->topics = slots_reset(b->topics, &b->n_topic_slots);
    b->n_topics = 0;
    b->ranked = false;
    b->last_ref = NULL;
    b->n_um_brokers = 0;
    gr_arena_free(&b->arena);
}

void gr_ctrl_batch_free(struct gr_ctrl_batch *b) {
    if (!b) return;
    gr_ctrl_batch_clear(b);
    free(b->lai.v);
    free(b->um.v);
    free(b->sr.v);
    free(b->topics);
    free(b->um_brokers);
    free(b->log.v);
    gr_arena_free(&b->log.names);
    free(b);
}

bool gr_ctrl_batch_empty(const struct gr_ctrl_batch *b) {
    return b->lai.n == 0 && b->sr.n == 0 && b->n_um_brokers == 0;
}

int gr_ctrl_batch_begin(struct gr_ctrl_batch *b) {
    if (gr_ctrl_batch_empty(b)) {
        if (b->um.n) gr_ctrl_batch_clear(b);
        return 0;
    }
    gr_error(LOGGER,
             "Controller to broker state change requests batch is not empty while creating a new one: "
             "%zu LeaderAndIsr, %zu StopReplica entries and UpdateMetadata to %d brokers might be lost",
             distinct(b, &b->lai, KIND_LAI, -1), distinct(b, &b->sr, KIND_SR, -1), b->n_um_brokers);
    gr_ctrl_batch_clear(b);
    return -EBUSY;
}

static void topics_grow(struct gr_ctrl_batch *b) {
    size_t n_slots = b->n_topic_slots ? b->n_topic_slots * 2 : 64;
    struct topic_ref **old = b->topics;
    size_t old_n = b->n_topic_slots;
    b->topics = gr_calloc(n_slots, sizeof *b->topics);
    b->n_topic_slots = n_slots;
    for (size_t i = 0; i < old_n; i++) {
        if (!old[i]) continue;
        size_t j = (size_t)old[i]->hash & (n_slots - 1);
        while (b->topics[j]) j = (j + 1) & (n_slots - 1);
        b->topics[j] = old[i];
    }
    free(old);
}

/* The batch's interned copy of a topic name (added if new). */
static struct topic_ref *intern_topic(struct gr_ctrl_batch *b, const char *topic) {
    if (b->last_ref && (topic == b->last_ref->name || strcmp(topic, b->last_ref->name) == 0)) return b->last_ref;
    if ((b->n_topics + 1) * 4 >= b->n_topic_slots * 3) topics_grow(b);
    uint64_t h = gr_str_hash(topic);
    size_t mask = b->n_topic_slots - 1, i = (size_t)h & mask;
    while (b->topics[i] && (b->topics[i]->hash != h || strcmp(b->topics[i]->name, topic) != 0)) i = (i + 1) & mask;
    if (!b->topics[i]) {
        struct topic_ref *t = gr_arena_alloc(&b->arena, sizeof *t);
        t->name = gr_arena_strdup(&b->arena, topic);
        t->hash = h;
        t->rank = 0;
        b->topics[i] = t;
        b->n_topics++;
        b->ranked = false;
    }
    b->last_ref = b->topics[i];
    return b->topics[i];
}

static int cmp_topic_ref(const void *a, const void *b) {
    return strcmp((*(struct topic_ref *const *)a)->name, (*(struct topic_ref *const *)b)->name);
}

/* Sets every interned topic's rank to its position in name order. */
static void rank_topics(struct gr_ctrl_batch *b) {
    if (b->ranked) return;
    struct topic_ref **v = gr_malloc((b->n_topics ? b->n_topics : 1) * sizeof *v);
    size_t k = 0;
    for (size_t i = 0; i < b->n_topic_slots; i++)
        if (b->topics[i]) v[k++] = b->topics[i];
    qsort(v, k, sizeof *v, cmp_topic_ref);
    for (size_t i = 0; i < k; i++) v[i]->rank = (uint32_t)i;
    free(v);
    b->ranked = true;
}

/* Sorting 300k LeaderAndIsr entries (a 100k-partition failover) by comparing through entry and
 * topic-ref pointers was the top of the event thread. Each entry's order is instead packed into
 * one integer -- broker's position among the batch's brokers, topic rank, partition, entry index,
 * with just the bits they need -- and the integers are radix-sorted. When they do not fit in 64
 * bits, the entries are sorted with the comparator. */
/* Sorts k[0..n) (distinct values below 2^bits) with an LSD radix sort of 11-bit digits. */
static void radix_sort_u64(uint64_t *k, size_t n, int bits) {
    uint64_t *tmp = gr_malloc((n ? n : 1) * sizeof *tmp), *src = k, *dst = tmp;
    size_t count[2048];
    for (int shift = 0; shift < bits; shift += 11) {
        memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++) count[(src[i] >> shift) & 2047]++;
        size_t sum = 0;
        for (int d = 0; d < 2048; d++) {
            size_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) dst[count[(src[i] >> shift) & 2047]++] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != k) memcpy(k, src, n * sizeof *k);
    free(tmp);
}

static int cmp_entry(const void *a, const void *b) {
    const struct entry *x = *(struct entry *const *)a, *y = *(struct entry *const *)b;
    if (x->broker != y->broker) return x->broker < y->broker ? -1 : 1;
    if (x->tref != y->tref) return x->tref->rank < y->tref->rank ? -1 : 1;
    if (x->partition != y->partition) return x->partition < y->partition ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int bits_for(uint64_t max) {
    int b = 0;
    while (b < 64 && (max >> b) != 0) b++;
    return b;
}

/* Position of id in the sorted ids[0..n), or -1. */
static int broker_pos(const int32_t *ids, int n, int32_t id) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (ids[mid] == id) return mid;
        if (ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

static struct entry **sort_entries(struct gr_ctrl_batch *b, struct entry **v, size_t n);

/* The distinct entries of l (rule 3: merge_runs) sorted by (broker, topic name, partition),
 * malloc'd; their number in *n_out. */
static struct entry **sorted_entries(struct gr_ctrl_batch *b, const struct elist *l, int kind, size_t *n_out) {
    rank_topics(b);
    struct entry **v = sort_entries(b, elist_copy(l), l->n);
    *n_out = merge_runs(v, l->n, kind);
    return v;
}

/* Sorts v[0..n) (entries in the order added) by (broker, topic rank, partition, order added);
 * returns the sorted array (v, or a new one after freeing v). */
static struct entry **sort_entries(struct gr_ctrl_batch *b, struct entry **v, size_t n) {
    int32_t ids[64];
    int n_ids = 0;
    int32_t max_part = 0;
    bool packable = true;
    for (size_t i = 0; i < n && packable; i++) {
        if (v[i]->partition < 0) packable = false;
        else if (v[i]->partition > max_part) max_part = v[i]->partition;
        if (broker_pos(ids, n_ids, v[i]->broker) >= 0) continue;
        if (n_ids == 64) {
            packable = false;
            break;
        }
        int k = n_ids++;
        while (k > 0 && ids[k - 1] > v[i]->broker) {
            ids[k] = ids[k - 1];
            k--;
        }
        ids[k] = v[i]->broker;
    }
    int bb = bits_for((uint64_t)(n_ids > 0 ? n_ids - 1 : 0)), br = bits_for(b->n_topics ? b->n_topics - 1 : 0);
    int bp = bits_for((uint64_t)max_part), bi = bits_for(n ? n - 1 : 0);
    if (!packable || bb + br + bp + bi > 64) {
        qsort(v, n, sizeof *v, cmp_entry);
        return v;
    }
    uint64_t *k = gr_malloc((n ? n : 1) * sizeof *k);
    for (size_t i = 0; i < n; i++) {
        uint64_t key = (uint64_t)broker_pos(ids, n_ids, v[i]->broker);
        key = (key << br | v[i]->tref->rank) << bp | (uint64_t)v[i]->partition;
        k[i] = bi ? key << bi | i : key;
    }
    radix_sort_u64(k, n, bb + br + bp + bi);
    struct entry **out = gr_malloc((n ? n : 1) * sizeof *out);
    uint64_t imask = bi ? (bi == 64 ? ~0ULL : (1ULL << bi) - 1) : 0;
    for (size_t i = 0; i < n; i++) out[i] = v[k[i] & imask];
    free(k);
    free(v);
    return out;
}

/* A new entry for the key, appended to l (an earlier one for the key is merged at send). */
static struct entry *entry_add(struct gr_ctrl_batch *b, struct elist *l, int32_t broker, struct topic_ref *t,
                               int32_t partition) {
    elist_reserve(l, 1);
    struct entry *e = gr_arena_alloc(&b->arena, sizeof *e);
    e->broker = broker;
    e->partition = partition;
    e->tref = t;
    e->topic = t->name;
    e->seq = l->n;
    l->v[l->n++] = e;
    return e;
}

/* Number of distinct keys in l, of broker (all when broker < 0). Sorts a copy (tests, logs). */
static size_t distinct(const struct gr_ctrl_batch *cb, const struct elist *l, int kind, int32_t broker) {
    if (l->n == 0) return 0;
    /* changes only the topics' rank cache, and the sticky flags merge_runs sets on each key's last
     * entry (which the send sets the same way) */
    struct gr_ctrl_batch *b = (struct gr_ctrl_batch *)cb;
    size_t n, c = 0;
    struct entry **v = sorted_entries(b, l, kind, &n);
    for (size_t i = 0; i < n; i++)
        if (broker < 0 || v[i]->broker == broker) c++;
    free(v);
    return c;
}

/* Arrays in the batch arena are shared by entries (a LeaderAndIsr add's brokers and the
 * partition's UpdateMetadata entry) and carry a forwarding pointer in front: their copy in the
 * send's arena, made once by sent_ints (the batch arena is freed at the send; the requests, which
 * may wait in the brokers' queues, keep only what they need). */
static int32_t *batch_ints(struct gr_ctrl_batch *b, const int32_t *v, int n) {
    if (n <= 0) return NULL;
    int32_t **fwd = gr_arena_alloc(&b->arena, sizeof *fwd + (size_t)n * sizeof(int32_t));
    int32_t *d = (int32_t *)(fwd + 1);
    if (v) memcpy(d, v, (size_t)n * sizeof *d);
    return d;
}

static int32_t *sent_ints(struct gr_arena *a, int32_t *v, int n) {
    if (!v || n <= 0) return NULL;
    int32_t **fwd = (int32_t **)v - 1;
    if (!*fwd) {
        *fwd = gr_arena_alloc(a, (size_t)n * sizeof(int32_t));
        memcpy(*fwd, v, (size_t)n * sizeof(int32_t));
    }
    return *fwd;
}

static char *sent_name(struct gr_arena *a, const struct topic_ref *t) {
    struct topic_ref *m = (struct topic_ref *)t; /* the batch's own ref */
    if (!m->sent) m->sent = gr_arena_strdup(a, t->name);
    return m->sent;
}

static void add_um_broker(struct gr_ctrl_batch *b, int32_t id) {
    int lo = 0, hi = b->n_um_brokers;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (b->um_brokers[mid] == id) return;
        if (b->um_brokers[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    if (b->n_um_brokers == b->cap_um_brokers) {
        b->cap_um_brokers = b->cap_um_brokers ? b->cap_um_brokers * 2 : 8;
        b->um_brokers = gr_realloc(b->um_brokers, (size_t)b->cap_um_brokers * sizeof *b->um_brokers);
    }
    memmove(&b->um_brokers[lo + 1], &b->um_brokers[lo], (size_t)(b->n_um_brokers - lo) * sizeof *b->um_brokers);
    b->um_brokers[lo] = id;
    b->n_um_brokers++;
}

/* Copies of p's replicas and ISR already in the batch arena (NULL: none yet). */
struct um_arrays {
    int32_t *replicas, *isr;
};

/* Adds the current UpdateMetadata state of one partition (rule 4), using the copies in have. */
static void add_um_partition_with(struct gr_ctrl_batch *b, const char *topic, struct gr_ctrl_partition *p,
                                  const struct um_arrays *have) {
    struct gr_ctrl_context *ctx = b->sm->ctx;
    if (!p->has_state) {
        gr_info(LOGGER, "Leader not yet assigned for partition %s-%d. Skip sending UpdateMetadataRequest.", topic,
                p->partition);
        return;
    }
    bool deleting = gr_ctrl_topic_queued_for_deletion(ctx, topic);
    struct entry *e = entry_add(b, &b->um, -1, intern_topic(b, topic), p->partition);
    struct UpdateMetadataRequest_UpdateMetadataPartitionState *s = &e->st.um; /* zeroed */
    s->PartitionIndex = p->partition;
    s->ControllerEpoch = p->lai.controller_epoch;
    if (deleting) { /* LeaderAndIsr.duringDelete(isr): leader -2, epoch 0, zkVersion 0 */
        s->Leader = GR_LEADER_DURING_DELETE;
        s->LeaderEpoch = 0;
        s->ZkVersion = 0;
    } else {
        s->Leader = p->lai.leader;
        s->LeaderEpoch = p->lai.leader_epoch;
        s->ZkVersion = p->lai.zk_version;
    }
    s->IsrCount = p->lai.n_isr;
    s->Isr = have->isr ? have->isr : batch_ints(b, p->lai.isr, p->lai.n_isr);
    s->ReplicasCount = p->n_replicas;
    s->Replicas = have->replicas ? have->replicas : batch_ints(b, p->replicas, p->n_replicas);
    int n_off = 0;
    for (int i = 0; i < p->n_replicas; i++)
        if (!gr_ctrl_replica_online(ctx, p, p->replicas[i], false)) n_off++;
    s->OfflineReplicasCount = n_off;
    if (n_off) {
        int32_t *off = batch_ints(b, NULL, n_off);
        s->OfflineReplicas = off;
        for (int i = 0; i < p->n_replicas; i++)
            if (!gr_ctrl_replica_online(ctx, p, p->replicas[i], false)) *off++ = p->replicas[i];
    }
}

static void add_um_partition(struct gr_ctrl_batch *b, const char *topic, struct gr_ctrl_partition *p) {
    static const struct um_arrays none;
    add_um_partition_with(b, topic, p, &none);
}

void gr_ctrl_batch_add_update_metadata(struct gr_ctrl_batch *b, const int32_t *brokers, int n_brokers,
                                       const struct gr_kzk_tp *tps, int n_tps) {
    for (int i = 0; i < n_brokers; i++)
        if (brokers[i] >= 0) add_um_broker(b, brokers[i]);
    for (int i = 0; i < n_tps; i++) {
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(b->sm->ctx, tps[i].topic, tps[i].partition);
        if (!p) {
            gr_info(LOGGER, "Leader not yet assigned for partition %s-%d. Skip sending UpdateMetadataRequest.",
                    tps[i].topic, tps[i].partition);
            continue;
        }
        add_um_partition(b, tps[i].topic, p);
    }
}

void gr_ctrl_batch_add_update_metadata_all(struct gr_ctrl_batch *b, const int32_t *brokers, int n_brokers) {
    struct gr_ctrl_context *ctx = b->sm->ctx;
    for (int i = 0; i < n_brokers; i++)
        if (brokers[i] >= 0) add_um_broker(b, brokers[i]);
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur)))
        for (int i = 0; i < t->n_partitions; i++)
            if (t->partitions[i].has_state) add_um_partition(b, t->name, &t->partitions[i]);
}

void gr_ctrl_batch_add_update_metadata_deleted(struct gr_ctrl_batch *b, int32_t broker, const char *topic,
                                               int32_t n_partitions) {
    add_um_broker(b, broker);
    struct topic_ref *t = intern_topic(b, topic);
    for (int32_t i = 0; i < n_partitions; i++) {
        struct entry *e = entry_add(b, &b->um, -1, t, i);
        struct UpdateMetadataRequest_UpdateMetadataPartitionState *s = &e->st.um; /* zeroed */
        s->PartitionIndex = i;
        s->ControllerEpoch = b->sm->ctx->epoch;
        s->Leader = GR_LEADER_DURING_DELETE; /* LeaderAndIsr.duringDelete: the broker drops it */
    }
}

void gr_ctrl_batch_add_update_metadata_brokers_only(struct gr_ctrl_batch *b) {
    struct gr_ctrl_context *ctx = b->sm->ctx;
    for (int i = 0; i < ctx->n_brokers; i++) add_um_broker(b, ctx->brokers[i].id);
}

void gr_ctrl_batch_add_leader_and_isr(struct gr_ctrl_batch *b, const int32_t *brokers, int n_brokers,
                                      const char *topic, int32_t partition,
                                      const struct gr_kzk_leader_and_isr *lai, bool is_new) {
    struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(b->sm->ctx, topic, partition);
    if (!p) {
        gr_error(LOGGER, "Not adding LeaderAndIsr for unknown partition %s-%d", topic, partition);
        return;
    }
    gr_ctrl_batch_add_leader_and_isr_p(b, brokers, n_brokers, topic, p, lai, is_new);
}

void gr_ctrl_batch_add_leader_and_isr_p(struct gr_ctrl_batch *b, const int32_t *brokers, int n_brokers,
                                        const char *topic, struct gr_ctrl_partition *p,
                                        const struct gr_kzk_leader_and_isr *lai, bool is_new) {
    struct gr_ctrl_context *ctx = b->sm->ctx;
    int32_t partition = p->partition;
    struct topic_ref *t = intern_topic(b, topic);
    /* the arrays are copied once per call and shared by its entries (and the partition's
     * UpdateMetadata entry): nothing changes them once added */
    struct um_arrays shared = {.replicas = batch_ints(b, p->replicas, p->n_replicas)};
    int32_t *isr = batch_ints(b, lai->isr, lai->n_isr);
    if (lai == &p->lai) shared.isr = isr;
    int32_t *adding = batch_ints(b, p->adding, p->n_adding);
    int32_t *removing = batch_ints(b, p->removing, p->n_removing);
    for (int i = 0; i < n_brokers; i++) {
        if (brokers[i] < 0) continue;
        struct entry *e = entry_add(b, &b->lai, brokers[i], t, partition);
        struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *s = &e->st.lai; /* zeroed */
        s->PartitionIndex = partition;
        s->ControllerEpoch = lai->controller_epoch;
        s->Leader = lai->leader;
        s->LeaderEpoch = lai->leader_epoch;
        s->IsrCount = lai->n_isr;
        s->Isr = isr;
        s->PartitionEpoch = lai->zk_version;
        s->ReplicasCount = p->n_replicas;
        s->Replicas = shared.replicas;
        s->AddingReplicasCount = p->n_adding;
        s->AddingReplicas = adding;
        s->RemovingReplicasCount = p->n_removing;
        s->RemovingReplicas = removing;
        s->IsNew = is_new; /* sticky: merge_runs */
    }
    /* rule 1: UpdateMetadata for this partition to every registered broker */
    for (int i = 0; i < ctx->n_brokers; i++) add_um_broker(b, ctx->brokers[i].id);
    add_um_partition_with(b, topic, p, &shared);
}

void gr_ctrl_batch_add_stop_replica(struct gr_ctrl_batch *b, const int32_t *brokers, int n_brokers,
                                    const char *topic, int32_t partition, bool delete_partition) {
    struct gr_ctrl_context *ctx = b->sm->ctx;
    int32_t epoch;
    if (gr_ctrl_topic_queued_for_deletion(ctx, topic)) {
        epoch = GR_EPOCH_DURING_DELETE;
    } else {
        struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(ctx, topic, partition);
        epoch = p && p->has_state ? p->lai.leader_epoch : GR_EPOCH_NONE;
    }
    struct topic_ref *t = intern_topic(b, topic);
    for (int i = 0; i < n_brokers; i++) {
        if (brokers[i] < 0) continue;
        struct entry *e = entry_add(b, &b->sr, brokers[i], t, partition);
        e->st.sr.PartitionIndex = partition;
        e->st.sr.LeaderEpoch = epoch;
        e->st.sr.DeletePartition = delete_partition; /* sticky: merge_runs */
    }
}

/* ---- sending ---- */

void gr_ctrl_req_free(void *req) {
    struct gr_ctrl_req *box = req;
    if (!box) return;
    if (box->shared && atomic_fetch_sub(&box->shared->refs, 1) == 1) {
        gr_arena_free(&box->shared->arena);
        free(box->shared);
    }
    free(box);
}

/* The arena of one send's requests (all of them), holding one reference for the sender, dropped
 * by shared_release. Arrays and topic names shared by entries are copied into it once. */
static struct gr_ctrl_shared_arena *shared_new(void) {
    struct gr_ctrl_shared_arena *s = gr_calloc(1, sizeof *s);
    atomic_init(&s->refs, 1);
    gr_arena_init(&s->arena);
    return s;
}

static void shared_release(struct gr_ctrl_shared_arena *s) {
    if (atomic_fetch_sub(&s->refs, 1) == 1) {
        gr_arena_free(&s->arena);
        free(s);
    }
}

/* A request box for api_key whose structures live in sh (the box takes a reference). */
static struct gr_ctrl_req *req_box_new(int16_t api_key, struct gr_ctrl_shared_arena *sh) {
    struct gr_ctrl_req *box = gr_calloc(1, sizeof *box);
    box->api_key = api_key;
    box->shared = sh;
    atomic_fetch_add(&sh->refs, 1);
    return box;
}

static const struct gr_kzk_endpoint *broker_endpoint(const struct gr_ctrl_broker *br, const char *listener) {
    if (br->info.n_endpoints == 0) return NULL;
    if (listener)
        for (int i = 0; i < br->info.n_endpoints; i++)
            if (br->info.endpoints[i].listener && strcmp(br->info.endpoints[i].listener, listener) == 0)
                return &br->info.endpoints[i];
    return &br->info.endpoints[0];
}

static void deliver(struct gr_ctrl_batch *b, int32_t broker, struct gr_ctrl_req *box, int16_t ver,
                    enum gr_ctrl_event_type completion_type, bool with_completion) {
    struct gr_ctrl_event *ev = NULL;
    if (with_completion) {
        ev = gr_ctrl_event_new(completion_type);
        ev->broker_id = broker;
    }
    b->sm->sender->send(b->sm->sender_ctx, broker, box->api_key, ver, box, gr_ctrl_req_free, ev);
}

/* The id the context holds for topic (ZERO_UUID when it has none, or is gone: a removal the
 * broker missed), as Kafka's topicIds.getOrElse(topic, Uuid.ZERO_UUID). */
static void topic_id_of(struct gr_ctrl_context *ctx, const char *topic, uint8_t out[16]) {
    struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, topic);
    if (t) memcpy(out, t->id.b, 16);
    else memset(out, 0, 16);
}

static void send_leader_and_isr(struct gr_ctrl_batch *b, struct gr_ctrl_shared_arena *sh) {
    struct gr_ctrl_sm *sm = b->sm;
    struct gr_ctrl_context *ctx = sm->ctx;
    if (b->lai.n == 0) return;
    size_t n, i, j = 0;
    struct entry **v = sorted_entries(b, &b->lai, KIND_LAI, &n);
    struct gr_ctrl_broker *br;
    while ((br = next_broker_run(ctx, v, n, &i, &j))) {
        int32_t broker = v[i]->broker;
        struct gr_arena *a = &sh->arena;
        struct gr_ctrl_req *box = req_box_new(GR_API_LEADER_AND_ISR, sh);
        struct LeaderAndIsrRequest *r = &box->u.lai;
        gr_proto_init_struct(&gr_desc_LeaderAndIsrRequest, r);
        r->ControllerId = sm->controller_id;
        r->ControllerEpoch = ctx->epoch;
        r->BrokerEpoch = br->epoch;
        /* topics */
        int n_topics = count_topics(v, i, j);
        r->TopicStatesCount = n_topics;
        r->TopicStates = gr_arena_alloc(a, (size_t)n_topics * sizeof *r->TopicStates);
        int32_t *leaders = gr_arena_alloc(a, (j - i) * sizeof *leaders);
        int n_leaders = 0, n_become_leader = 0;
        int t = -1;
        for (size_t k = i; k < j; k++) {
            if (topic_starts(v, i, k)) {
                t++;
                r->TopicStates[t].TopicName = sent_name(a, v[k]->tref);
                topic_id_of(ctx, v[k]->tref->name, r->TopicStates[t].TopicId);
                r->TopicStates[t].PartitionStatesCount = 0;
                r->TopicStates[t].PartitionStates =
                    gr_arena_alloc(a, topic_run_len(v, k, j) * sizeof *r->TopicStates[t].PartitionStates);
            }
            struct LeaderAndIsrRequest_LeaderAndIsrTopicState *ts = &r->TopicStates[t];
            struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *ps = &ts->PartitionStates[ts->PartitionStatesCount++];
            *ps = v[k]->st.lai;
            ps->TopicName = NULL;
            ps->Isr = sent_ints(a, ps->Isr, ps->IsrCount);
            ps->Replicas = sent_ints(a, ps->Replicas, ps->ReplicasCount);
            ps->AddingReplicas = sent_ints(a, ps->AddingReplicas, ps->AddingReplicasCount);
            ps->RemovingReplicas = sent_ints(a, ps->RemovingReplicas, ps->RemovingReplicasCount);
            if (ps->Leader == broker) n_become_leader++;
            bool seen = false;
            for (int q = 0; q < n_leaders; q++)
                if (leaders[q] == ps->Leader) seen = true;
            if (!seen) leaders[n_leaders++] = ps->Leader;
        }
        /* LiveLeaders: registered brokers among the leaders, at the inter-broker listener */
        r->LiveLeaders = gr_arena_alloc(a, (size_t)(n_leaders ? n_leaders : 1) * sizeof *r->LiveLeaders);
        r->LiveLeadersCount = 0;
        for (int q = 0; q < n_leaders; q++) {
            struct gr_ctrl_broker *lb = gr_ctrl_ctx_broker(ctx, leaders[q]);
            if (!lb) continue;
            const struct gr_kzk_endpoint *ep = broker_endpoint(lb, sm->inter_broker_listener);
            struct LeaderAndIsrRequest_LeaderAndIsrLiveLeader *ll = &r->LiveLeaders[r->LiveLeadersCount++];
            ll->BrokerId = lb->id;
            ll->HostName = gr_arena_strdup(a, ep && ep->host ? ep->host : "");
            ll->Port = ep ? ep->port : -1;
        }
        gr_info(GR_STATE_CHANGE_LOGGER,
                "[Controller id=%d epoch=%d] Sending LeaderAndIsr request to broker %d with %d become-leader and "
                "%d become-follower partitions",
                sm->controller_id, ctx->epoch, broker, n_become_leader, (int)(j - i) - n_become_leader);
        deliver(b, broker, box, sm->leader_and_isr_version ? sm->leader_and_isr_version : GR_CTRL_LEADER_AND_ISR_VERSION,
                GR_EV_LEADER_AND_ISR_RESPONSE, true);
    }
    free(v);
}

static void send_update_metadata(struct gr_ctrl_batch *b, struct gr_ctrl_shared_arena *sh) {
    struct gr_ctrl_sm *sm = b->sm;
    struct gr_ctrl_context *ctx = sm->ctx;
    if (b->n_um_brokers == 0) return;
    /* partition states grouped by topic */
    size_t n;
    struct entry **v = sorted_entries(b, &b->um, KIND_UM, &n);
    char ids[512];
    gr_info(GR_STATE_CHANGE_LOGGER,
            "[Controller id=%d epoch=%d] Sending UpdateMetadata request to brokers %s for %zu partitions",
            sm->controller_id, ctx->epoch, gr_ctrl_fmt_ids(ids, sizeof ids, b->um_brokers, b->n_um_brokers), n);
    int n_targets = 0;
    for (int i = 0; i < b->n_um_brokers; i++)
        if (gr_ctrl_ctx_broker(ctx, b->um_brokers[i])) n_targets++;
    if (n_targets == 0) {
        free(v);
        return;
    }

    struct gr_arena *a = &sh->arena;
    int n_topics = count_topics(v, 0, n);
    struct UpdateMetadataRequest_UpdateMetadataTopicState *topics =
        gr_arena_alloc(a, (size_t)(n_topics ? n_topics : 1) * sizeof *topics);
    int t = -1;
    for (size_t k = 0; k < n; k++) {
        if (topic_starts(v, 0, k)) {
            t++;
            topics[t].TopicName = sent_name(a, v[k]->tref);
            topic_id_of(ctx, v[k]->tref->name, topics[t].TopicId);
            topics[t].PartitionStatesCount = 0;
            topics[t].PartitionStates = gr_arena_alloc(a, topic_run_len(v, k, n) * sizeof *topics[t].PartitionStates);
        }
        struct UpdateMetadataRequest_UpdateMetadataPartitionState *ps =
            &topics[t].PartitionStates[topics[t].PartitionStatesCount++];
        *ps = v[k]->st.um;
        ps->TopicName = NULL;
        ps->Isr = sent_ints(a, ps->Isr, ps->IsrCount);
        ps->Replicas = sent_ints(a, ps->Replicas, ps->ReplicasCount);
        ps->OfflineReplicas = sent_ints(a, ps->OfflineReplicas, ps->OfflineReplicasCount);
    }
    free(v);
    /* live brokers */
    struct UpdateMetadataRequest_UpdateMetadataBroker *live =
        gr_arena_alloc(a, (size_t)(ctx->n_brokers ? ctx->n_brokers : 1) * sizeof *live);
    for (int i = 0; i < ctx->n_brokers; i++) {
        const struct gr_ctrl_broker *br = &ctx->brokers[i];
        struct UpdateMetadataRequest_UpdateMetadataBroker *lb = &live[i];
        gr_proto_init_struct(&gr_desc_UpdateMetadataRequest_UpdateMetadataBroker, lb);
        lb->Id = br->id;
        lb->EndpointsCount = br->info.n_endpoints;
        lb->Endpoints = gr_arena_alloc(a, (size_t)(br->info.n_endpoints ? br->info.n_endpoints : 1) *
                                              sizeof *lb->Endpoints);
        for (int e = 0; e < br->info.n_endpoints; e++) {
            const struct gr_kzk_endpoint *ep = &br->info.endpoints[e];
            lb->Endpoints[e].Port = ep->port;
            lb->Endpoints[e].Host = gr_arena_strdup(a, ep->host ? ep->host : "");
            lb->Endpoints[e].Listener = gr_arena_strdup(a, ep->listener ? ep->listener : "");
            lb->Endpoints[e].SecurityProtocol =
                gr_ctrl_security_protocol_id(ep->security_protocol ? ep->security_protocol : ep->listener);
        }
        lb->Rack = br->info.rack ? gr_arena_strdup(a, br->info.rack) : NULL;
    }
    for (int i = 0; i < b->n_um_brokers; i++) {
        struct gr_ctrl_broker *br = gr_ctrl_ctx_broker(ctx, b->um_brokers[i]);
        if (!br) continue;
        struct gr_ctrl_req *box = req_box_new(GR_API_UPDATE_METADATA, sh);
        struct UpdateMetadataRequest *r = &box->u.um;
        gr_proto_init_struct(&gr_desc_UpdateMetadataRequest, r);
        r->ControllerId = sm->controller_id;
        r->ControllerEpoch = ctx->epoch;
        r->BrokerEpoch = br->epoch;
        r->TopicStatesCount = n_topics;
        r->TopicStates = n_topics ? topics : NULL;
        r->LiveBrokersCount = ctx->n_brokers;
        r->LiveBrokers = live;
        deliver(b, br->id, box, sm->update_metadata_version ? sm->update_metadata_version : GR_CTRL_UPDATE_METADATA_VERSION,
                GR_EV_UPDATE_METADATA_RESPONSE, true);
    }
}

static void send_stop_replica(struct gr_ctrl_batch *b, struct gr_ctrl_shared_arena *sh) {
    struct gr_ctrl_sm *sm = b->sm;
    struct gr_ctrl_context *ctx = sm->ctx;
    if (b->sr.n == 0) return;
    size_t n, i, j = 0;
    struct entry **v = sorted_entries(b, &b->sr, KIND_SR, &n);
    struct gr_ctrl_broker *br;
    while ((br = next_broker_run(ctx, v, n, &i, &j))) {
        int32_t broker = v[i]->broker;
        struct gr_arena *a = &sh->arena;
        struct gr_ctrl_req *box = req_box_new(GR_API_STOP_REPLICA, sh);
        struct StopReplicaRequest *r = &box->u.sr;
        gr_proto_init_struct(&gr_desc_StopReplicaRequest, r);
        r->ControllerId = sm->controller_id;
        r->ControllerEpoch = ctx->epoch;
        r->BrokerEpoch = br->epoch;
        r->DeletePartitions = false;
        int n_topics = count_topics(v, i, j);
        r->TopicStatesCount = n_topics;
        r->TopicStates = gr_arena_alloc(a, (size_t)n_topics * sizeof *r->TopicStates);
        bool any_delete = false;
        int t = -1;
        for (size_t k = i; k < j; k++) {
            if (topic_starts(v, i, k)) {
                t++;
                r->TopicStates[t].TopicName = sent_name(a, v[k]->tref);
                r->TopicStates[t].PartitionStatesCount = 0;
                r->TopicStates[t].PartitionStates =
                    gr_arena_alloc(a, topic_run_len(v, k, j) * sizeof *r->TopicStates[t].PartitionStates);
            }
            struct StopReplicaRequest_StopReplicaTopicState *ts = &r->TopicStates[t];
            ts->PartitionStates[ts->PartitionStatesCount++] = v[k]->st.sr;
            if (v[k]->st.sr.DeletePartition) any_delete = true;
        }
        gr_info(GR_STATE_CHANGE_LOGGER,
                "[Controller id=%d epoch=%d] Sending StopReplica request for %d replicas to broker %d",
                sm->controller_id, ctx->epoch, (int)(j - i), broker);
        deliver(b, broker, box, sm->stop_replica_version ? sm->stop_replica_version : GR_CTRL_STOP_REPLICA_VERSION,
                GR_EV_TOPIC_DELETION_STOP_REPLICA_RESPONSE, any_delete);
    }
    free(v);
}

void gr_ctrl_batch_send(struct gr_ctrl_batch *b) {
    if (b->lai.n || b->um.n || b->sr.n || b->n_um_brokers) b->sm->ctx->gen++; /* context.h */
    struct gr_ctrl_shared_arena *sh = shared_new();
    send_leader_and_isr(b, sh);
    send_update_metadata(b, sh);
    send_stop_replica(b, sh);
    shared_release(sh);
    gr_ctrl_batch_clear(b);
    if (!b->log.hold) gr_ctrl_batch_flush_log(b);
}

void gr_ctrl_lai_response_normalize(struct gr_ctrl_response *r) {
    if (!r || !r->body || r->api_key != GR_API_LEADER_AND_ISR || r->api_version < 5) return;
    const struct gr_ctrl_req *sent = r->request;
    if (!sent || sent->api_key != GR_API_LEADER_AND_ISR) return;
    const struct LeaderAndIsrRequest *rq = &sent->u.lai;
    struct LeaderAndIsrResponse *b = r->body;
    int32_t n = 0;
    for (int32_t i = 0; i < b->TopicsCount; i++)
        if (b->Topics[i].PartitionErrorsCount > 0) n += b->Topics[i].PartitionErrorsCount;
    b->PartitionErrors = gr_arena_alloc(&r->arena, sizeof *b->PartitionErrors * (size_t)(n ? n : 1));
    b->PartitionErrorsCount = 0;
    for (int32_t i = 0; i < b->TopicsCount; i++) {
        const struct LeaderAndIsrResponse_LeaderAndIsrTopicError *te = &b->Topics[i];
        const char *name = NULL;
        int matches = 0;
        for (int32_t t = 0; t < rq->TopicStatesCount; t++)
            if (memcmp(rq->TopicStates[t].TopicId, te->TopicId, 16) == 0) {
                name = rq->TopicStates[t].TopicName;
                matches++;
            }
        if (matches != 1) continue;
        for (int32_t j = 0; j < te->PartitionErrorsCount; j++) {
            struct LeaderAndIsrResponse_LeaderAndIsrPartitionError *pe = &b->PartitionErrors[b->PartitionErrorsCount++];
            *pe = te->PartitionErrors[j];
            pe->TopicName = (char *)name; /* the request outlives the response's use */
        }
    }
}

/* ---- introspection ---- */

int gr_ctrl_batch_count_leader_and_isr(const struct gr_ctrl_batch *b, int32_t broker) {
    return (int)distinct(b, &b->lai, KIND_LAI, broker);
}
int gr_ctrl_batch_count_update_metadata_brokers(const struct gr_ctrl_batch *b) { return b->n_um_brokers; }
int gr_ctrl_batch_count_update_metadata_partitions(const struct gr_ctrl_batch *b) {
    return (int)distinct(b, &b->um, KIND_UM, -1);
}
int gr_ctrl_batch_count_stop_replica(const struct gr_ctrl_batch *b, int32_t broker) {
    return (int)distinct(b, &b->sr, KIND_SR, broker);
}

/* ---- the state machine environment (states.h struct gr_ctrl_sm) ---- */

void gr_ctrl_sm_init(struct gr_ctrl_sm *sm) {
    sm->batch = gr_ctrl_batch_new(sm);
    sm->unclean_elections = NULL;
    if (sm->metrics)
        sm->unclean_elections =
            gr_metrics_meter(sm->metrics, "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec");
}

void gr_ctrl_sm_release(struct gr_ctrl_sm *sm) {
    gr_ctrl_batch_free(sm->batch);
    sm->batch = NULL;
    /* the meter stays in the registry (Kafka's ControllerStats live as long as the broker) */
    sm->unclean_elections = NULL;
}
