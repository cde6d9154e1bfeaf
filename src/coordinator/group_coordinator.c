/* The group coordinator: membership state machine, offsets cache, persistence to
 * __consumer_offsets and loading from it. See group_coordinator.h for the contract.
 *
 * Internal rules (numbered so the code can cite them):
 *  1. gc->mu guards everything reachable from gc->buckets and gc->parts. Functions named
 *     *_locked need it held.
 *  2. Storage calls (leader_info, append, read) and user callbacks never run under gc->mu.
 *     Completions decided under the lock are queued on a struct dq and run by dq_flush after
 *     the unlock.
 *  3. Asynchronous storage completions refer to their group by id (looked up again), never by
 *     pointer: the group may have been unloaded or deleted meanwhile.
 *  4. Only one thread at a time runs gr_gc_poll_partitions (the background thread, or the test),
 *     so loading/unloading of partitions is never concurrent with itself. */
#include "coordinator/group_coordinator.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "coordinator/group_offsets.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "storage/batch.h"

#define LOGGER "kafka.coordinator.group.GroupCoordinator"

#define NEW_MEMBER_JOIN_TIMEOUT_MS (5 * 60 * 1000)
#define CLEANUP_INTERVAL_MS (10 * 60 * 1000)
#define NBUCKETS 1024
#define LOAD_READ_BYTES (1 << 20)

enum gstate { ST_EMPTY, ST_PREPARING, ST_COMPLETING, ST_STABLE, ST_DEAD };
static const char *const state_names[] = {"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"};

enum { PART_NONE, PART_LOADING, PART_OWNED };

struct proto {
    char *name;
    uint8_t *meta;
    int32_t len;
};

struct member {
    struct member *next;
    char *id, *instance_id, *client_id, *client_host, *protocol_type;
    int32_t session_timeout, rebalance_timeout;
    int n_protocols;
    struct proto *protocols;
    uint8_t *assignment;
    int32_t assignment_len;
    bool is_new, is_leaving;
    gr_gc_join_cb join_cb; /* awaiting join iff set */
    void *join_ctx;
    gr_gc_sync_cb sync_cb; /* awaiting sync iff set */
    void *sync_ctx;
    int64_t hb_deadline; /* 0 = no heartbeat expectation scheduled */
};

struct pending {
    struct pending *next;
    char *id;
    int64_t deadline;
};

struct offset_entry {
    char *topic;
    int32_t partition;
    int64_t offset;
    int32_t leader_epoch;
    char *metadata;
    int64_t commit_ts, expire_ts;
};

struct group {
    struct group *next; /* hash chain */
    char *id;
    int32_t partition;
    enum gstate state;
    int64_t state_ts; /* wall ms of the last transition */
    int32_t generation;
    char *protocol_type, *protocol_name, *leader_id;
    struct member *members; /* insertion order */
    int n_members, n_awaiting_join;
    struct pending *pending;
    /* the delayed join of PreparingRebalance */
    bool join_armed, join_initial, new_member_added;
    int64_t join_deadline;
    int32_t join_delay, join_remaining;
    struct offset_entry *offsets;
    int n_offsets, cap_offsets;
    int inflight;        /* storage writes in flight */
    int64_t created_ms;  /* mono */
};

struct part {
    int state;
    int32_t epoch;
};

struct gr_group_coordinator {
    struct gr_gc_config cfg;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    pthread_t thread;
    bool thread_started, stopping, kick;
    bool active;
    struct group *buckets[NBUCKETS];
    int n_groups;
    struct part *parts;
    int32_t n_parts_cap;
    int64_t next_cleanup;
};

/* ---- completion queue (rule 2) ---- */

enum { D_JOIN, D_SYNC };
struct done {
    struct done *next;
    int kind;
    gr_gc_join_cb join_cb;
    gr_gc_sync_cb sync_cb;
    void *ctx;
    struct gr_gc_join_result jr;
    struct gr_gc_sync_result sr;
    struct gr_arena a;
};
struct dq {
    struct done *head, **tail;
};

static void dq_init(struct dq *q) {
    q->head = NULL;
    q->tail = &q->head;
}

static struct done *dq_push(struct dq *q, int kind) {
    struct done *d = gr_calloc(1, sizeof *d);
    d->kind = kind;
    gr_arena_init(&d->a);
    *q->tail = d;
    q->tail = &d->next;
    return d;
}

static void dq_flush(struct dq *q) {
    struct done *d = q->head;
    while (d) {
        struct done *next = d->next;
        if (d->kind == D_JOIN)
            d->join_cb(d->ctx, &d->jr);
        else
            d->sync_cb(d->ctx, &d->sr);
        gr_arena_free(&d->a);
        free(d);
        d = next;
    }
    dq_init(q);
}

static const uint8_t *arena_bytes(struct gr_arena *a, const uint8_t *p, int32_t len) {
    if (!p || len <= 0) return NULL;
    uint8_t *c = gr_arena_alloc(a, (size_t)len);
    memcpy(c, p, (size_t)len);
    return c;
}

/* ---- small helpers ---- */

static int64_t now_ms(struct gr_group_coordinator *gc) { return gc->cfg.mono_ms ? gc->cfg.mono_ms() : gr_mono_ms(); }
static int64_t wall_ms(struct gr_group_coordinator *gc) { return gc->cfg.wall_ms ? gc->cfg.wall_ms() : gr_wall_ms(); }

static char *dupz(const char *s) { return s ? gr_strdup(s) : NULL; }
static bool streq(const char *a, const char *b) {
    if (!a || !b) return a == b;
    return strcmp(a, b) == 0;
}

static uint8_t *dupbytes(const uint8_t *p, int32_t len) {
    if (!p || len <= 0) return NULL;
    uint8_t *c = gr_malloc((size_t)len);
    memcpy(c, p, (size_t)len);
    return c;
}

static uint32_t hash_str(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* A random version-4 UUID in Java's UUID.toString() form. */
static void random_uuid(char out[37]) {
    uint8_t b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        uint64_t x = (uint64_t)gr_mono_us() * 0x9E3779B97F4A7C15ull;
        for (int i = 0; i < 16; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            b[i] = (uint8_t)x;
        }
    }
    b[6] = (uint8_t)((b[6] & 0x0F) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3F) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static int32_t effective_partitions(struct gr_group_coordinator *gc) {
    int32_t n = gc->cfg.storage.num_partitions ? gc->cfg.storage.num_partitions(gc->cfg.storage.ctx) : 0;
    return n > 0 ? n : gc->cfg.num_partitions;
}

int32_t gr_gc_partition_for(struct gr_group_coordinator *gc, const char *group_id) {
    return gr_group_partition_for(group_id, effective_partitions(gc));
}

static void ensure_parts_locked(struct gr_group_coordinator *gc, int32_t n) {
    if (n <= gc->n_parts_cap) return;
    gc->parts = gr_realloc(gc->parts, (size_t)n * sizeof *gc->parts);
    memset(gc->parts + gc->n_parts_cap, 0, (size_t)(n - gc->n_parts_cap) * sizeof *gc->parts);
    gc->n_parts_cap = n;
}

/* ---- members and groups ---- */

static void member_set_protocols(struct member *m, const struct gr_gc_protocol *p, int n) {
    for (int i = 0; i < m->n_protocols; i++) {
        free(m->protocols[i].name);
        free(m->protocols[i].meta);
    }
    free(m->protocols);
    m->n_protocols = n;
    m->protocols = n ? gr_calloc((size_t)n, sizeof *m->protocols) : NULL;
    for (int i = 0; i < n; i++) {
        m->protocols[i].name = gr_strdup(p[i].name ? p[i].name : "");
        m->protocols[i].meta = dupbytes(p[i].metadata, p[i].metadata_len);
        m->protocols[i].len = m->protocols[i].meta ? p[i].metadata_len : 0;
    }
}

static void member_set_assignment(struct member *m, const uint8_t *p, int32_t len) {
    free(m->assignment);
    m->assignment = dupbytes(p, len);
    m->assignment_len = m->assignment ? len : 0;
}

static void member_free(struct member *m) {
    member_set_protocols(m, NULL, 0);
    free(m->assignment);
    free(m->id);
    free(m->instance_id);
    free(m->client_id);
    free(m->client_host);
    free(m->protocol_type);
    free(m);
}

/* Does the member support protocol name? Its metadata goes to meta and len. */
static bool member_protocol(const struct member *m, const char *name, const uint8_t **meta, int32_t *len) {
    for (int i = 0; i < m->n_protocols; i++)
        if (strcmp(m->protocols[i].name, name) == 0) {
            if (meta) *meta = m->protocols[i].meta;
            if (len) *len = m->protocols[i].len;
            return true;
        }
    return false;
}

/* Kafka's MemberMetadata.matches: the same protocols with the same metadata, in order. */
static bool member_matches(const struct member *m, const struct gr_gc_protocol *p, int n) {
    if (m->n_protocols != n) return false;
    for (int i = 0; i < n; i++) {
        const struct proto *q = &m->protocols[i];
        int32_t plen = p[i].metadata && p[i].metadata_len > 0 ? p[i].metadata_len : 0;
        if (!streq(q->name, p[i].name ? p[i].name : "") || q->len != plen) return false;
        if (plen && memcmp(q->meta, p[i].metadata, (size_t)plen) != 0) return false;
    }
    return true;
}

static struct member *group_member(struct group *g, const char *id) {
    if (!id) return NULL;
    for (struct member *m = g->members; m; m = m->next)
        if (strcmp(m->id, id) == 0) return m;
    return NULL;
}

static bool group_is_pending(struct group *g, const char *id) {
    for (struct pending *p = g->pending; p; p = p->next)
        if (strcmp(p->id, id) == 0) return true;
    return false;
}

static bool group_remove_pending(struct group *g, const char *id) {
    for (struct pending **pp = &g->pending; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->id, id) == 0) {
            struct pending *p = *pp;
            *pp = p->next;
            free(p->id);
            free(p);
            return true;
        }
    return false;
}

static void group_transition(struct gr_group_coordinator *gc, struct group *g, enum gstate to) {
    g->state = to;
    g->state_ts = wall_ms(gc);
    if (to != ST_PREPARING) g->join_armed = false;
}

static struct group *find_group_locked(struct gr_group_coordinator *gc, const char *id) {
    for (struct group *g = gc->buckets[hash_str(id) % NBUCKETS]; g; g = g->next)
        if (strcmp(g->id, id) == 0) return g;
    return NULL;
}

static struct group *create_group_locked(struct gr_group_coordinator *gc, const char *id, int32_t partition) {
    struct group *g = gr_calloc(1, sizeof *g);
    g->id = gr_strdup(id);
    g->partition = partition;
    g->state = ST_EMPTY;
    g->state_ts = wall_ms(gc);
    g->created_ms = now_ms(gc);
    uint32_t b = hash_str(id) % NBUCKETS;
    g->next = gc->buckets[b];
    gc->buckets[b] = g;
    gc->n_groups++;
    return g;
}

static void group_clear_members(struct group *g) {
    while (g->members) {
        struct member *m = g->members;
        g->members = m->next;
        member_free(m);
    }
    while (g->pending) group_remove_pending(g, g->pending->id);
    g->n_members = g->n_awaiting_join = 0;
    free(g->leader_id);
    g->leader_id = NULL;
}

static void group_free(struct group *g) {
    group_clear_members(g);
    for (int i = 0; i < g->n_offsets; i++) {
        free(g->offsets[i].topic);
        free(g->offsets[i].metadata);
    }
    free(g->offsets);
    free(g->id);
    free(g->protocol_type);
    free(g->protocol_name);
    free(g);
}

static void remove_group_locked(struct gr_group_coordinator *gc, struct group *g) {
    for (struct group **pp = &gc->buckets[hash_str(g->id) % NBUCKETS]; *pp; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            gc->n_groups--;
            break;
        }
    group_free(g);
}

static struct offset_entry *find_offset(struct group *g, const char *topic, int32_t partition) {
    for (int i = 0; i < g->n_offsets; i++)
        if (g->offsets[i].partition == partition && strcmp(g->offsets[i].topic, topic) == 0) return &g->offsets[i];
    return NULL;
}

static void put_offset(struct group *g, const char *topic, int32_t partition, int64_t offset, int32_t epoch,
                       const char *metadata, int64_t commit_ts, int64_t expire_ts) {
    struct offset_entry *e = find_offset(g, topic, partition);
    if (!e) {
        if (g->n_offsets == g->cap_offsets) {
            g->cap_offsets = g->cap_offsets ? g->cap_offsets * 2 : 8;
            g->offsets = gr_realloc(g->offsets, (size_t)g->cap_offsets * sizeof *g->offsets);
        }
        e = &g->offsets[g->n_offsets++];
        e->topic = gr_strdup(topic);
        e->partition = partition;
        e->metadata = NULL;
    }
    e->offset = offset;
    e->leader_epoch = epoch;
    free(e->metadata);
    e->metadata = gr_strdup(metadata ? metadata : "");
    e->commit_ts = commit_ts;
    e->expire_ts = expire_ts;
}

static void remove_offset(struct group *g, const char *topic, int32_t partition) {
    struct offset_entry *e = find_offset(g, topic, partition);
    if (!e) return;
    free(e->topic);
    free(e->metadata);
    *e = g->offsets[--g->n_offsets];
}

static int32_t group_rebalance_timeout(const struct group *g) {
    int32_t t = 0;
    for (const struct member *m = g->members; m; m = m->next) t = GR_MAX(t, m->rebalance_timeout);
    return t;
}

static bool all_members_support(const struct group *g, const char *name) {
    for (const struct member *m = g->members; m; m = m->next)
        if (!member_protocol(m, name, NULL, NULL)) return false;
    return true;
}

/* Kafka's GroupMetadata.supportsProtocols. */
static bool group_supports(const struct group *g, const char *type, const struct gr_gc_protocol *p, int n) {
    if (g->state == ST_EMPTY) return type && type[0] && n > 0;
    if (!streq(g->protocol_type, type)) return false;
    for (int i = 0; i < n; i++)
        if (all_members_support(g, p[i].name ? p[i].name : "")) return true;
    return false;
}

/* Kafka's selectProtocol: every member votes for its most preferred protocol among those all
 * members support; the most votes wins (ties: the first member's preference order). */
static const char *select_protocol(const struct group *g) {
    const struct member *first = g->members;
    const char *best = NULL;
    int best_votes = -1;
    for (int i = 0; i < first->n_protocols; i++) {
        const char *cand = first->protocols[i].name;
        if (!all_members_support(g, cand)) continue;
        int votes = 0;
        for (const struct member *m = g->members; m; m = m->next) {
            for (int j = 0; j < m->n_protocols; j++) {
                if (!all_members_support(g, m->protocols[j].name)) continue;
                if (strcmp(m->protocols[j].name, cand) == 0) votes++;
                break;
            }
        }
        if (votes > best_votes) best = cand, best_votes = votes;
    }
    return best;
}

static void set_leader(struct group *g, const char *id) {
    free(g->leader_id);
    g->leader_id = dupz(id);
}

static void schedule_hb(struct gr_group_coordinator *gc, struct member *m, int32_t timeout_ms) {
    m->hb_deadline = now_ms(gc) + (timeout_ms > 0 ? timeout_ms : 1);
}

static void group_add_member(struct group *g, struct member *m) {
    if (!g->members) {
        free(g->protocol_type);
        g->protocol_type = dupz(m->protocol_type);
    }
    if (!g->leader_id) set_leader(g, m->id);
    struct member **pp = &g->members;
    while (*pp) pp = &(*pp)->next;
    *pp = m;
    g->n_members++;
    if (m->join_cb) g->n_awaiting_join++;
}

static void group_remove_member(struct group *g, struct member *m) {
    for (struct member **pp = &g->members; *pp; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    g->n_members--;
    if (m->join_cb) g->n_awaiting_join--;
    if (streq(g->leader_id, m->id)) set_leader(g, g->members ? g->members->id : NULL);
    member_free(m);
}

/* ---- results ---- */

static void push_join_error(struct dq *q, gr_gc_join_cb cb, void *ctx, const char *member_id, int16_t error) {
    struct done *d = dq_push(q, D_JOIN);
    d->join_cb = cb;
    d->ctx = ctx;
    d->jr.error = error;
    d->jr.generation_id = -1;
    d->jr.leader_id = "";
    d->jr.member_id = gr_arena_strdup(&d->a, member_id ? member_id : "");
}

/* A successful join result for m with the group's current generation; the leader also gets
 * every member's metadata for the selected protocol (Kafka's currentMemberMetadata). */
static void push_join_ok(struct dq *q, gr_gc_join_cb cb, void *ctx, const struct group *g, const struct member *m,
                         bool with_members) {
    struct done *d = dq_push(q, D_JOIN);
    d->join_cb = cb;
    d->ctx = ctx;
    struct gr_gc_join_result *r = &d->jr;
    r->error = GR_KERR_NONE;
    r->generation_id = g->generation;
    r->protocol_type = gr_arena_strdup(&d->a, g->protocol_type);
    r->protocol_name = gr_arena_strdup(&d->a, g->protocol_name);
    r->leader_id = gr_arena_strdup(&d->a, g->leader_id ? g->leader_id : "");
    r->member_id = gr_arena_strdup(&d->a, m->id);
    if (with_members && g->n_members > 0) {
        struct gr_gc_join_member *jm = gr_arena_alloc(&d->a, (size_t)g->n_members * sizeof *jm);
        int k = 0;
        for (const struct member *x = g->members; x; x = x->next, k++) {
            const uint8_t *meta = NULL;
            int32_t len = 0;
            if (g->protocol_name) member_protocol(x, g->protocol_name, &meta, &len);
            jm[k].member_id = gr_arena_strdup(&d->a, x->id);
            jm[k].group_instance_id = gr_arena_strdup(&d->a, x->instance_id);
            jm[k].metadata = arena_bytes(&d->a, meta, len);
            jm[k].metadata_len = jm[k].metadata ? len : 0;
        }
        r->n_members = k;
        r->members = jm;
    }
}

static void push_sync(struct dq *q, gr_gc_sync_cb cb, void *ctx, const struct group *g, const struct member *m,
                      int16_t error) {
    struct done *d = dq_push(q, D_SYNC);
    d->sync_cb = cb;
    d->ctx = ctx;
    d->sr.error = error;
    if (error == GR_KERR_NONE && g && m) {
        d->sr.protocol_type = gr_arena_strdup(&d->a, g->protocol_type);
        d->sr.protocol_name = gr_arena_strdup(&d->a, g->protocol_name);
        d->sr.assignment = arena_bytes(&d->a, m->assignment, m->assignment_len);
        d->sr.assignment_len = d->sr.assignment ? m->assignment_len : 0;
    }
}

/* Answers m's waiting JoinGroup (Kafka's maybeInvokeJoinCallback). */
static void invoke_join_error(struct dq *q, struct group *g, struct member *m, const char *member_id, int16_t error) {
    if (!m->join_cb) return;
    push_join_error(q, m->join_cb, m->join_ctx, member_id, error);
    m->join_cb = NULL;
    m->join_ctx = NULL;
    g->n_awaiting_join--;
}

/* ---- persistence ---- */

static int16_t map_store_error(int16_t e, bool offsets) {
    switch (e) {
    case GR_KERR_NONE: return GR_KERR_NONE;
    case GR_KERR_UNKNOWN_TOPIC_OR_PARTITION:
    case GR_KERR_NOT_ENOUGH_REPLICAS:
    case GR_KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND: return GR_KERR_COORDINATOR_NOT_AVAILABLE;
    case GR_KERR_NOT_LEADER_OR_FOLLOWER:
    case GR_KERR_KAFKA_STORAGE_ERROR: return GR_KERR_NOT_COORDINATOR;
    case GR_KERR_MESSAGE_TOO_LARGE:
    case GR_KERR_RECORD_LIST_TOO_LARGE:
    case GR_KERR_INVALID_FETCH_SIZE: return offsets ? GR_KERR_INVALID_COMMIT_OFFSET_SIZE : GR_KERR_UNKNOWN_SERVER_ERROR;
    case GR_KERR_REQUEST_TIMED_OUT: return offsets ? e : GR_KERR_REBALANCE_IN_PROGRESS;
    default: return offsets ? e : GR_KERR_UNKNOWN_SERVER_ERROR;
    }
}

/* One batch holding the group metadata record of g (value v3; null value = tombstone) and, when
 * tombstone_offsets, a tombstone for each of g's offsets first. */
static uint8_t *build_group_batch(struct gr_group_coordinator *gc, const struct group *g, bool tombstone,
                                  bool tombstone_offsets, size_t *len) {
    int n = (tombstone_offsets ? g->n_offsets : 0) + 1;
    struct gr_batch_rec *recs = gr_calloc((size_t)n, sizeof *recs);
    struct gr_wbuf *keys = gr_calloc((size_t)n, sizeof *keys);
    struct gr_wbuf val;
    gr_wbuf_init(&val);
    int64_t ts = wall_ms(gc);
    int k = 0;
    if (tombstone_offsets) {
        for (int i = 0; i < g->n_offsets; i++, k++) {
            gr_wbuf_init(&keys[k]);
            gr_go_encode_offset_key(&keys[k], g->id, g->offsets[i].topic, g->offsets[i].partition);
            recs[k] = (struct gr_batch_rec){.key = keys[k].p, .key_len = (int32_t)keys[k].len, .value_len = -1,
                                            .timestamp = ts};
        }
    }
    gr_wbuf_init(&keys[k]);
    gr_go_encode_group_key(&keys[k], g->id);
    recs[k] = (struct gr_batch_rec){.key = keys[k].p, .key_len = (int32_t)keys[k].len, .value_len = -1, .timestamp = ts};
    if (!tombstone) {
        struct gr_go_group_value v = {
            .version = 3,
            .protocol_type = g->protocol_type ? g->protocol_type : "",
            .generation = g->generation,
            .protocol = g->state == ST_EMPTY ? NULL : g->protocol_name,
            .leader = g->state == ST_EMPTY ? NULL : g->leader_id,
            .current_state_timestamp = g->state_ts,
            .n_members = g->n_members,
        };
        struct gr_go_member *ms = g->n_members ? gr_calloc((size_t)g->n_members, sizeof *ms) : NULL;
        int i = 0;
        for (const struct member *m = g->members; m; m = m->next, i++) {
            const uint8_t *meta = NULL;
            int32_t mlen = 0;
            if (g->protocol_name) member_protocol(m, g->protocol_name, &meta, &mlen);
            ms[i] = (struct gr_go_member){.member_id = m->id, .group_instance_id = m->instance_id,
                                          .client_id = m->client_id, .client_host = m->client_host,
                                          .rebalance_timeout = m->rebalance_timeout,
                                          .session_timeout = m->session_timeout, .subscription = meta,
                                          .subscription_len = mlen, .assignment = m->assignment,
                                          .assignment_len = m->assignment_len};
        }
        v.members = ms;
        gr_go_encode_group_value(&val, &v);
        free(ms);
        recs[k].value = val.p;
        recs[k].value_len = (int32_t)val.len;
    }
    uint8_t *batch = gr_batch_build(recs, n, NULL, len);
    for (int i = 0; i < n; i++) gr_wbuf_free(&keys[i]);
    gr_wbuf_free(&val);
    free(keys);
    free(recs);
    return batch;
}

/* A pending write, issued after the unlock (rule 2). */
struct write {
    struct write *next;
    int32_t partition;
    uint8_t *batch;
    size_t len;
    int16_t acks;
    void (*done)(void *, int16_t);
    void *ctx;
};
struct wq {
    struct write *head;
};

static void wq_add(struct wq *w, int32_t p, uint8_t *batch, size_t len, int16_t acks, void (*done)(void *, int16_t),
                   void *ctx) {
    struct write *x = gr_calloc(1, sizeof *x);
    *x = (struct write){.next = w->head, .partition = p, .batch = batch, .len = len, .acks = acks, .done = done, .ctx = ctx};
    w->head = x;
}

static void wq_flush(struct gr_group_coordinator *gc, struct wq *w) {
    struct write *x = w->head;
    w->head = NULL;
    while (x) {
        struct write *next = x->next;
        gc->cfg.storage.append(gc->cfg.storage.ctx, x->partition, x->batch, x->len, x->acks,
                               gc->cfg.offset_commit_timeout_ms, x->done, x->ctx);
        free(x);
        x = next;
    }
}

/* Context of a group metadata write (rule 3). */
struct store_ctx {
    struct gr_group_coordinator *gc;
    char *group_id;
    int32_t generation;
    bool sync; /* the leader's SyncGroup waits for it */
    uint8_t *batch;
};

static void maybe_prepare_rebalance_locked(struct gr_group_coordinator *gc, struct group *g, const char *reason,
                                           struct dq *q, struct wq *w);

/* Kafka's resetAndPropagateAssignmentError. */
static void reset_assignment_error_locked(struct group *g, int16_t error, struct dq *q) {
    for (struct member *m = g->members; m; m = m->next) {
        member_set_assignment(m, NULL, 0);
        if (m->sync_cb) {
            push_sync(q, m->sync_cb, m->sync_ctx, NULL, NULL, error);
            m->sync_cb = NULL;
            m->sync_ctx = NULL;
        }
    }
}

/* Kafka's propagateAssignment (assignments already set on the members). */
static void propagate_assignment_locked(struct gr_group_coordinator *gc, struct group *g, struct dq *q) {
    for (struct member *m = g->members; m; m = m->next) {
        if (!m->sync_cb) continue;
        push_sync(q, m->sync_cb, m->sync_ctx, g, m, GR_KERR_NONE);
        m->sync_cb = NULL;
        m->sync_ctx = NULL;
        schedule_hb(gc, m, m->session_timeout);
    }
}

static void store_done(void *arg, int16_t error) {
    struct store_ctx *c = arg;
    struct gr_group_coordinator *gc = c->gc;
    struct dq q;
    struct wq w = {0};
    dq_init(&q);
    pthread_mutex_lock(&gc->mu);
    struct group *g = find_group_locked(gc, c->group_id);
    if (g && g->inflight > 0) g->inflight--;
    if (error != GR_KERR_NONE)
        gr_warn(LOGGER, "Failed to write the metadata of group %s generation %d to %s: %s", c->group_id,
                c->generation, GR_OFFSETS_TOPIC, gr_kerr_name(error));
    if (c->sync && g && g->state == ST_COMPLETING && g->generation == c->generation) {
        int16_t e = map_store_error(error, false);
        if (e != GR_KERR_NONE) {
            reset_assignment_error_locked(g, e, &q);
            maybe_prepare_rebalance_locked(gc, g, "error when storing group assignment during SyncGroup", &q, &w);
        } else {
            propagate_assignment_locked(gc, g, &q);
            group_transition(gc, g, ST_STABLE);
            gr_info(LOGGER, "Group %s is Stable at generation %d with %d members", g->id, g->generation,
                    g->n_members);
        }
    }
    pthread_mutex_unlock(&gc->mu);
    wq_flush(gc, &w);
    dq_flush(&q);
    free(c->batch);
    free(c->group_id);
    free(c);
}

/* Queues the write of g's metadata (Kafka's storeGroup). */
static void store_group_locked(struct gr_group_coordinator *gc, struct group *g, bool sync, struct wq *w) {
    struct store_ctx *c = gr_calloc(1, sizeof *c);
    c->gc = gc;
    c->group_id = gr_strdup(g->id);
    c->generation = g->generation;
    c->sync = sync;
    size_t len;
    c->batch = build_group_batch(gc, g, false, false, &len);
    g->inflight++;
    wq_add(w, g->partition, c->batch, len, -1, store_done, c);
}

/* ---- rebalance ---- */

static void complete_join_locked(struct gr_group_coordinator *gc, struct group *g, struct dq *q, struct wq *w);

static void arm_join(struct gr_group_coordinator *gc, struct group *g, bool initial, int32_t delay, int32_t remaining) {
    g->join_armed = true;
    g->join_initial = initial;
    g->join_delay = delay;
    g->join_remaining = remaining;
    g->join_deadline = now_ms(gc) + delay;
}

/* Kafka's DelayedJoin.tryComplete (the initial delayed join only completes on expiry). */
static void try_complete_join_locked(struct gr_group_coordinator *gc, struct group *g, struct dq *q, struct wq *w) {
    if (g->state != ST_PREPARING || !g->join_armed || g->join_initial) return;
    if (g->n_members == g->n_awaiting_join && !g->pending) complete_join_locked(gc, g, q, w);
}

static void prepare_rebalance_locked(struct gr_group_coordinator *gc, struct group *g, const char *reason,
                                     struct dq *q, struct wq *w) {
    if (g->state == ST_COMPLETING) reset_assignment_error_locked(g, GR_KERR_REBALANCE_IN_PROGRESS, q);
    int32_t rt = group_rebalance_timeout(g);
    if (g->state == ST_EMPTY) {
        int32_t d = gc->cfg.initial_rebalance_delay_ms;
        arm_join(gc, g, true, d, GR_MAX(rt - d, 0));
    } else {
        arm_join(gc, g, false, rt, 0);
    }
    gr_info(LOGGER, "Preparing to rebalance group %s in state %s with old generation %d (%s-%d) (reason: %s)", g->id,
            state_names[g->state], g->generation, GR_OFFSETS_TOPIC, g->partition, reason);
    g->state = ST_PREPARING;
    g->state_ts = wall_ms(gc);
    try_complete_join_locked(gc, g, q, w); /* Kafka's tryCompleteElseWatch */
}

static void maybe_prepare_rebalance_locked(struct gr_group_coordinator *gc, struct group *g, const char *reason,
                                           struct dq *q, struct wq *w) {
    if (g->state == ST_STABLE || g->state == ST_COMPLETING || g->state == ST_EMPTY)
        prepare_rebalance_locked(gc, g, reason, q, w);
}

/* Kafka's onCompleteJoin. */
static void complete_join_locked(struct gr_group_coordinator *gc, struct group *g, struct dq *q, struct wq *w) {
    g->join_armed = false;
    /* members that did not rejoin are dropped */
    for (struct member *m = g->members, *next; m; m = next) {
        next = m->next;
        if (m->join_cb) continue;
        gr_info(LOGGER, "Member %s in group %s has failed to rejoin before the rebalance timeout, removing it", m->id,
                g->id);
        group_remove_member(g, m);
    }
    if (g->state == ST_DEAD) return;
    /* maybeElectNewJoinedLeader */
    struct member *leader = group_member(g, g->leader_id);
    if (g->members && (!leader || !leader->join_cb)) {
        struct member *j = NULL;
        for (struct member *m = g->members; m && !j; m = m->next)
            if (m->join_cb) j = m;
        if (j) {
            set_leader(g, j->id);
        } else {
            gr_error(LOGGER, "Group %s could not complete rebalance because no members rejoined", g->id);
            arm_join(gc, g, false, group_rebalance_timeout(g), 0);
            return;
        }
    }
    g->generation++;
    free(g->protocol_name);
    g->protocol_name = NULL;
    if (g->members) {
        g->protocol_name = dupz(select_protocol(g));
        group_transition(gc, g, ST_COMPLETING);
        gr_info(LOGGER, "Stabilized group %s generation %d (%s-%d) with %d members", g->id, g->generation,
                GR_OFFSETS_TOPIC, g->partition, g->n_members);
        for (struct member *m = g->members; m; m = m->next) {
            bool is_leader = streq(m->id, g->leader_id);
            push_join_ok(q, m->join_cb, m->join_ctx, g, m, is_leader);
            m->join_cb = NULL;
            m->join_ctx = NULL;
            g->n_awaiting_join--;
            schedule_hb(gc, m, m->session_timeout);
            m->is_new = false;
        }
    } else {
        group_transition(gc, g, ST_EMPTY);
        gr_info(LOGGER, "Group %s with generation %d is now empty (%s-%d)", g->id, g->generation, GR_OFFSETS_TOPIC,
                g->partition);
        store_group_locked(gc, g, false, w);
    }
}

/* Kafka's removeMemberAndUpdateGroup. */
static void remove_member_and_update_locked(struct gr_group_coordinator *gc, struct group *g, struct member *m,
                                            const char *reason, struct dq *q, struct wq *w) {
    invoke_join_error(q, g, m, "", GR_KERR_UNKNOWN_MEMBER_ID);
    if (m->sync_cb) { /* not in Kafka (its callback would be dropped); answer rather than leak */
        push_sync(q, m->sync_cb, m->sync_ctx, NULL, NULL, GR_KERR_REBALANCE_IN_PROGRESS);
        m->sync_cb = NULL;
    }
    group_remove_member(g, m);
    switch (g->state) {
    case ST_STABLE:
    case ST_COMPLETING: maybe_prepare_rebalance_locked(gc, g, reason, q, w); break;
    case ST_PREPARING: try_complete_join_locked(gc, g, q, w); break;
    default: break;
    }
}

/* ---- validation ---- */

struct probe {
    int32_t partition;
    bool leader;
    int32_t epoch;
};

/* Outside the lock (rule 2): where the group lives and whether we lead it. */
static void probe_group(struct gr_group_coordinator *gc, const char *group_id, struct probe *pr) {
    pr->partition = gr_gc_partition_for(gc, group_id);
    pr->epoch = -1;
    pr->leader = gc->cfg.storage.leader_info(gc->cfg.storage.ctx, pr->partition, &pr->epoch, NULL, NULL);
}

/* Kafka's validateGroupStatus minus the group id check. */
static int16_t check_locked(struct gr_group_coordinator *gc, const struct probe *pr) {
    if (!gc->active) return GR_KERR_COORDINATOR_NOT_AVAILABLE;
    ensure_parts_locked(gc, pr->partition + 1);
    struct part *pt = &gc->parts[pr->partition];
    if (!pr->leader) return GR_KERR_NOT_COORDINATOR;
    if (pt->state == PART_OWNED && pt->epoch == pr->epoch) return GR_KERR_NONE;
    /* led here but not (yet) loaded at this epoch: wake the loader */
    gc->kick = true;
    pthread_cond_signal(&gc->cond);
    return GR_KERR_COORDINATOR_LOAD_IN_PROGRESS;
}

int16_t gr_gc_coordinator_status(struct gr_group_coordinator *gc, const char *group_id) {
    struct probe pr;
    probe_group(gc, group_id ? group_id : "", &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    pthread_mutex_unlock(&gc->mu);
    return e;
}

/* ---- JoinGroup ---- */

static struct member *new_member(const struct gr_gc_join_req *rq, const char *id) {
    struct member *m = gr_calloc(1, sizeof *m);
    m->id = gr_strdup(id);
    m->instance_id = dupz(rq->group_instance_id);
    m->client_id = gr_strdup(rq->client_id ? rq->client_id : "");
    m->client_host = gr_strdup(rq->client_host ? rq->client_host : "");
    m->protocol_type = gr_strdup(rq->protocol_type ? rq->protocol_type : "");
    m->session_timeout = rq->session_timeout_ms;
    m->rebalance_timeout = rq->rebalance_timeout_ms;
    member_set_protocols(m, rq->protocols, rq->n_protocols);
    return m;
}

/* Kafka's addMemberAndRebalance. */
static void add_member_and_rebalance_locked(struct gr_group_coordinator *gc, struct group *g,
                                            const struct gr_gc_join_req *rq, const char *id, gr_gc_join_cb cb,
                                            void *ctx, struct dq *q, struct wq *w) {
    struct member *m = new_member(rq, id);
    m->is_new = true;
    if (g->state == ST_PREPARING && g->generation == 0) g->new_member_added = true;
    m->join_cb = cb;
    m->join_ctx = ctx;
    group_add_member(g, m);
    schedule_hb(gc, m, NEW_MEMBER_JOIN_TIMEOUT_MS);
    group_remove_pending(g, id);
    char reason[256];
    snprintf(reason, sizeof reason, "Adding new member %s", id);
    maybe_prepare_rebalance_locked(gc, g, reason, q, w);
}

/* Kafka's updateMemberAndRebalance. */
static void update_member_and_rebalance_locked(struct gr_group_coordinator *gc, struct group *g, struct member *m,
                                               const struct gr_gc_join_req *rq, gr_gc_join_cb cb, void *ctx,
                                               const char *reason, struct dq *q, struct wq *w) {
    member_set_protocols(m, rq->protocols, rq->n_protocols);
    m->session_timeout = rq->session_timeout_ms;
    m->rebalance_timeout = rq->rebalance_timeout_ms;
    if (m->join_cb) /* a superseded JoinGroup of the same member: answer it instead of leaking it */
        push_join_error(q, m->join_cb, m->join_ctx, m->id, GR_KERR_REBALANCE_IN_PROGRESS);
    else
        g->n_awaiting_join++;
    m->join_cb = cb;
    m->join_ctx = ctx;
    maybe_prepare_rebalance_locked(gc, g, reason, q, w);
}

static bool accept_joining_member(struct gr_group_coordinator *gc, struct group *g, const char *member_id) {
    struct member *m = group_member(g, member_id);
    switch (g->state) {
    case ST_EMPTY:
    case ST_DEAD: return true;
    case ST_PREPARING: return (m && m->join_cb) || g->n_awaiting_join < gc->cfg.group_max_size;
    default: return m || g->n_members < gc->cfg.group_max_size;
    }
}

void gr_gc_join_group(struct gr_group_coordinator *gc, const struct gr_gc_join_req *rq, gr_gc_join_cb cb, void *ctx) {
    struct dq q;
    struct wq w = {0};
    dq_init(&q);
    const char *mid = rq->member_id ? rq->member_id : "";
    if (!rq->group_id || !rq->group_id[0]) {
        push_join_error(&q, cb, ctx, mid, GR_KERR_INVALID_GROUP_ID);
        dq_flush(&q);
        return;
    }
    struct probe pr;
    probe_group(gc, rq->group_id, &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    if (e != GR_KERR_NONE) {
        push_join_error(&q, cb, ctx, mid, e);
        goto out;
    }
    if (rq->session_timeout_ms < gc->cfg.min_session_timeout_ms ||
        rq->session_timeout_ms > gc->cfg.max_session_timeout_ms) {
        push_join_error(&q, cb, ctx, mid, GR_KERR_INVALID_SESSION_TIMEOUT);
        goto out;
    }
    bool unknown = mid[0] == 0;
    struct group *g = find_group_locked(gc, rq->group_id);
    if (!g) {
        if (!unknown) {
            push_join_error(&q, cb, ctx, mid, GR_KERR_UNKNOWN_MEMBER_ID);
            goto out;
        }
        g = create_group_locked(gc, rq->group_id, pr.partition);
    }
    if (!accept_joining_member(gc, g, mid)) {
        struct member *m = group_member(g, mid);
        if (m) remove_member_and_update_locked(gc, g, m, "group is over capacity", &q, &w);
        push_join_error(&q, cb, ctx, "", GR_KERR_GROUP_MAX_SIZE_REACHED);
    } else if (g->state == ST_DEAD) {
        push_join_error(&q, cb, ctx, mid, GR_KERR_COORDINATOR_NOT_AVAILABLE);
    } else if (!group_supports(g, rq->protocol_type, rq->protocols, rq->n_protocols)) {
        push_join_error(&q, cb, ctx, mid, GR_KERR_INCONSISTENT_GROUP_PROTOCOL);
    } else if (unknown) {
        char uuid[37];
        random_uuid(uuid);
        const char *prefix = rq->group_instance_id ? rq->group_instance_id : (rq->client_id ? rq->client_id : "");
        char *id = gr_asprintf("%s-%s", prefix, uuid);
        if (rq->require_known_member_id) {
            struct pending *p = gr_calloc(1, sizeof *p);
            p->id = gr_strdup(id);
            p->deadline = now_ms(gc) + rq->session_timeout_ms;
            p->next = g->pending;
            g->pending = p;
            push_join_error(&q, cb, ctx, id, GR_KERR_MEMBER_ID_REQUIRED);
        } else {
            gr_info(LOGGER, "Dynamic member with unknown member id joins group %s in %s state. Created a new member "
                            "id %s for this member and add to the group.",
                    g->id, state_names[g->state], id);
            add_member_and_rebalance_locked(gc, g, rq, id, cb, ctx, &q, &w);
        }
        free(id);
    } else if (group_is_pending(g, mid)) {
        add_member_and_rebalance_locked(gc, g, rq, mid, cb, ctx, &q, &w);
    } else {
        struct member *m = group_member(g, mid);
        if (!m) {
            push_join_error(&q, cb, ctx, mid, GR_KERR_UNKNOWN_MEMBER_ID);
        } else {
            char reason[256];
            switch (g->state) {
            case ST_PREPARING:
                snprintf(reason, sizeof reason, "Member %s joining group during PreparingRebalance", mid);
                update_member_and_rebalance_locked(gc, g, m, rq, cb, ctx, reason, &q, &w);
                break;
            case ST_COMPLETING:
                if (member_matches(m, rq->protocols, rq->n_protocols)) {
                    push_join_ok(&q, cb, ctx, g, m, streq(mid, g->leader_id));
                } else {
                    snprintf(reason, sizeof reason, "Updating metadata for member %s during CompletingRebalance", mid);
                    update_member_and_rebalance_locked(gc, g, m, rq, cb, ctx, reason, &q, &w);
                }
                break;
            case ST_STABLE:
                if (streq(mid, g->leader_id)) {
                    snprintf(reason, sizeof reason, "leader %s re-joining group during Stable", mid);
                    update_member_and_rebalance_locked(gc, g, m, rq, cb, ctx, reason, &q, &w);
                } else if (!member_matches(m, rq->protocols, rq->n_protocols)) {
                    snprintf(reason, sizeof reason, "Updating metadata for member %s during Stable", mid);
                    update_member_and_rebalance_locked(gc, g, m, rq, cb, ctx, reason, &q, &w);
                } else {
                    push_join_ok(&q, cb, ctx, g, m, false);
                }
                break;
            default:
                gr_warn(LOGGER, "Attempt to add rejoining member %s of group %s in unexpected group state %s", mid,
                        g->id, state_names[g->state]);
                push_join_error(&q, cb, ctx, mid, GR_KERR_UNKNOWN_MEMBER_ID);
                break;
            }
        }
    }
    if (g->state == ST_PREPARING) try_complete_join_locked(gc, g, &q, &w);
out:
    pthread_mutex_unlock(&gc->mu);
    wq_flush(gc, &w);
    dq_flush(&q);
}

/* ---- SyncGroup ---- */

void gr_gc_sync_group(struct gr_group_coordinator *gc, const struct gr_gc_sync_req *rq, gr_gc_sync_cb cb, void *ctx) {
    struct dq q;
    struct wq w = {0};
    dq_init(&q);
    if (!rq->group_id || !rq->group_id[0]) {
        push_sync(&q, cb, ctx, NULL, NULL, GR_KERR_INVALID_GROUP_ID);
        dq_flush(&q);
        return;
    }
    const char *mid = rq->member_id ? rq->member_id : "";
    struct probe pr;
    probe_group(gc, rq->group_id, &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    struct group *g = e == GR_KERR_NONE ? find_group_locked(gc, rq->group_id) : NULL;
    struct member *m = g ? group_member(g, mid) : NULL;
    if (e == GR_KERR_COORDINATOR_LOAD_IN_PROGRESS) {
        e = GR_KERR_REBALANCE_IN_PROGRESS; /* Kafka: let the member rejoin */
    } else if (e != GR_KERR_NONE) {
        /* as is */
    } else if (!g) {
        e = GR_KERR_UNKNOWN_MEMBER_ID;
    } else if (g->state == ST_DEAD) {
        e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    } else if (!m) {
        e = GR_KERR_UNKNOWN_MEMBER_ID;
    } else if (rq->generation_id != g->generation) {
        e = GR_KERR_ILLEGAL_GENERATION;
    } else if ((rq->protocol_type && !streq(rq->protocol_type, g->protocol_type)) ||
               (rq->protocol_name && !streq(rq->protocol_name, g->protocol_name))) {
        e = GR_KERR_INCONSISTENT_GROUP_PROTOCOL;
    } else if (g->state == ST_EMPTY) {
        e = GR_KERR_UNKNOWN_MEMBER_ID;
    } else if (g->state == ST_PREPARING) {
        e = GR_KERR_REBALANCE_IN_PROGRESS;
    } else if (g->state == ST_STABLE) {
        push_sync(&q, cb, ctx, g, m, GR_KERR_NONE);
        schedule_hb(gc, m, m->session_timeout);
        goto out;
    } else { /* CompletingRebalance */
        if (m->sync_cb) push_sync(&q, m->sync_cb, m->sync_ctx, NULL, NULL, GR_KERR_REBALANCE_IN_PROGRESS);
        m->sync_cb = cb;
        m->sync_ctx = ctx;
        if (streq(mid, g->leader_id)) {
            gr_info(LOGGER, "Assignment received from leader for group %s for generation %d", g->id, g->generation);
            for (struct member *x = g->members; x; x = x->next) {
                const struct gr_gc_assignment *a = NULL;
                for (int i = 0; i < rq->n_assignments && !a; i++)
                    if (streq(rq->assignments[i].member_id, x->id)) a = &rq->assignments[i];
                if (!a) gr_warn(LOGGER, "Setting empty assignment for member %s of %s for generation %d", x->id,
                                g->id, g->generation);
                member_set_assignment(x, a ? a->data : NULL, a ? a->len : 0);
            }
            store_group_locked(gc, g, true, &w);
        }
        goto out;
    }
    push_sync(&q, cb, ctx, NULL, NULL, e);
out:
    pthread_mutex_unlock(&gc->mu);
    wq_flush(gc, &w);
    dq_flush(&q);
}

/* ---- Heartbeat ---- */

int16_t gr_gc_heartbeat(struct gr_group_coordinator *gc, const char *group_id, const char *member_id,
                        const char *group_instance_id, int32_t generation_id) {
    (void)group_instance_id;
    if (!group_id || !group_id[0]) return GR_KERR_INVALID_GROUP_ID;
    struct probe pr;
    probe_group(gc, group_id, &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    struct group *g = e == GR_KERR_NONE ? find_group_locked(gc, group_id) : NULL;
    struct member *m = g ? group_member(g, member_id) : NULL;
    if (e == GR_KERR_COORDINATOR_LOAD_IN_PROGRESS)
        e = GR_KERR_NONE; /* Kafka: the group is still loading, so respond just blindly */
    else if (e != GR_KERR_NONE)
        ;
    else if (!g)
        e = GR_KERR_UNKNOWN_MEMBER_ID;
    else if (g->state == ST_DEAD)
        e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    else if (!m)
        e = GR_KERR_UNKNOWN_MEMBER_ID;
    else if (generation_id != g->generation)
        e = GR_KERR_ILLEGAL_GENERATION;
    else if (g->state == ST_EMPTY)
        e = GR_KERR_UNKNOWN_MEMBER_ID;
    else {
        schedule_hb(gc, m, m->session_timeout);
        e = g->state == ST_PREPARING ? GR_KERR_REBALANCE_IN_PROGRESS : GR_KERR_NONE;
    }
    pthread_mutex_unlock(&gc->mu);
    return e;
}

/* ---- LeaveGroup ---- */

int16_t gr_gc_leave_group(struct gr_group_coordinator *gc, const char *group_id, struct gr_gc_leave_member *members,
                          int n) {
    for (int i = 0; i < n; i++) members[i].error = GR_KERR_NONE;
    if (!group_id || !group_id[0]) return GR_KERR_INVALID_GROUP_ID;
    struct dq q;
    struct wq w = {0};
    dq_init(&q);
    struct probe pr;
    probe_group(gc, group_id, &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    struct group *g = e == GR_KERR_NONE ? find_group_locked(gc, group_id) : NULL;
    if (e != GR_KERR_NONE) {
        /* top-level error only */
    } else if (!g) {
        for (int i = 0; i < n; i++) members[i].error = GR_KERR_UNKNOWN_MEMBER_ID;
    } else if (g->state == ST_DEAD) {
        e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
    } else {
        for (int i = 0; i < n; i++) {
            const char *mid = members[i].member_id ? members[i].member_id : "";
            struct member *m = NULL;
            if (mid[0] && group_is_pending(g, mid)) {
                group_remove_pending(g, mid);
                if (g->state == ST_PREPARING) try_complete_join_locked(gc, g, &q, &w);
                continue;
            }
            if (!mid[0] && members[i].group_instance_id) { /* static member leaving by instance id */
                for (struct member *x = g->members; x && !m; x = x->next)
                    if (streq(x->instance_id, members[i].group_instance_id)) m = x;
            } else {
                m = group_member(g, mid);
                if (m && members[i].group_instance_id && !streq(m->instance_id, members[i].group_instance_id)) {
                    members[i].error = GR_KERR_FENCED_INSTANCE_ID;
                    continue;
                }
            }
            if (!m) {
                members[i].error = GR_KERR_UNKNOWN_MEMBER_ID;
                continue;
            }
            gr_info(LOGGER, "Member %s has left group %s through explicit LeaveGroup request", m->id, g->id);
            m->is_leaving = true;
            m->hb_deadline = 0;
            char reason[256];
            snprintf(reason, sizeof reason, "removing member %s on LeaveGroup", m->id);
            remove_member_and_update_locked(gc, g, m, reason, &q, &w);
        }
    }
    pthread_mutex_unlock(&gc->mu);
    wq_flush(gc, &w);
    dq_flush(&q);
    return e;
}

/* ---- OffsetCommit ---- */

struct commit_ctx {
    struct gr_group_coordinator *gc;
    char *group_id;
    struct gr_gc_commit_part *parts;
    int n;
    bool *in_batch;
    gr_gc_commit_cb cb;
    void *ctx;
    uint8_t *batch;
};

static void commit_done(void *arg, int16_t error) {
    struct commit_ctx *c = arg;
    struct gr_group_coordinator *gc = c->gc;
    int16_t e = map_store_error(error, true);
    pthread_mutex_lock(&gc->mu);
    struct group *g = find_group_locked(gc, c->group_id);
    if (g && g->inflight > 0) g->inflight--;
    for (int i = 0; i < c->n; i++) {
        if (!c->in_batch[i]) continue;
        struct gr_gc_commit_part *p = &c->parts[i];
        p->error = e;
        if (e == GR_KERR_NONE && g && g->state != ST_DEAD)
            put_offset(g, p->topic, p->partition, p->offset, p->leader_epoch, p->metadata, p->commit_timestamp,
                       p->expire_timestamp);
    }
    pthread_mutex_unlock(&gc->mu);
    if (error != GR_KERR_NONE)
        gr_warn(LOGGER, "Offset commit of group %s failed: %s (answered %s)", c->group_id, gr_kerr_name(error),
                gr_kerr_name(e));
    c->cb(c->ctx, c->parts, c->n);
    free(c->batch);
    free(c->in_batch);
    free(c->group_id);
    free(c);
}

static void commit_fail_all(struct gr_gc_commit_part *parts, int n, int16_t e) {
    for (int i = 0; i < n; i++)
        if (parts[i].error == GR_KERR_NONE) parts[i].error = e;
}

void gr_gc_commit_offsets(struct gr_group_coordinator *gc, const char *group_id, const char *member_id,
                          const char *group_instance_id, int32_t generation_id, struct gr_gc_commit_part *parts,
                          int n, gr_gc_commit_cb cb, void *ctx) {
    (void)group_instance_id;
    if (!group_id) {
        commit_fail_all(parts, n, GR_KERR_INVALID_GROUP_ID);
        cb(ctx, parts, n);
        return;
    }
    const char *mid = member_id ? member_id : "";
    struct probe pr;
    probe_group(gc, group_id, &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    struct group *g = NULL;
    if (e == GR_KERR_NONE) {
        g = find_group_locked(gc, group_id);
        if (!g) {
            if (generation_id < 0)
                g = create_group_locked(gc, group_id, pr.partition); /* offsets-only group */
            else
                e = GR_KERR_ILLEGAL_GENERATION;
        }
    }
    if (e == GR_KERR_NONE) {
        struct member *m = group_member(g, mid);
        if (g->state == ST_DEAD)
            e = GR_KERR_COORDINATOR_NOT_AVAILABLE;
        else if (generation_id < 0 && g->state == ST_EMPTY)
            ; /* the group only stores offsets */
        else if (g->state == ST_COMPLETING)
            e = GR_KERR_REBALANCE_IN_PROGRESS;
        else if (!m)
            e = GR_KERR_UNKNOWN_MEMBER_ID;
        else if (generation_id != g->generation)
            e = GR_KERR_ILLEGAL_GENERATION;
        else
            schedule_hb(gc, m, m->session_timeout);
    }
    if (e != GR_KERR_NONE) {
        pthread_mutex_unlock(&gc->mu);
        commit_fail_all(parts, n, e);
        cb(ctx, parts, n);
        return;
    }
    /* build the batch of the valid parts */
    struct commit_ctx *c = gr_calloc(1, sizeof *c);
    c->gc = gc;
    c->group_id = gr_strdup(group_id);
    c->parts = parts;
    c->n = n;
    c->in_batch = gr_calloc((size_t)(n + 1), sizeof *c->in_batch);
    c->cb = cb;
    c->ctx = ctx;
    struct gr_batch_rec *recs = gr_calloc((size_t)(n + 1), sizeof *recs);
    struct gr_wbuf *bufs = gr_calloc((size_t)(2 * n + 1), sizeof *bufs);
    int k = 0;
    for (int i = 0; i < n; i++) {
        struct gr_gc_commit_part *p = &parts[i];
        if (p->error != GR_KERR_NONE) continue;
        if (p->metadata && (int64_t)strlen(p->metadata) > gc->cfg.max_metadata_size) {
            p->error = GR_KERR_OFFSET_METADATA_TOO_LARGE;
            continue;
        }
        struct gr_wbuf *kb = &bufs[2 * k], *vb = &bufs[2 * k + 1];
        gr_wbuf_init(kb);
        gr_wbuf_init(vb);
        gr_go_encode_offset_key(kb, group_id, p->topic, p->partition);
        struct gr_go_offset_value v = {.offset = p->offset, .leader_epoch = p->leader_epoch,
                                       .metadata = (char *)(p->metadata ? p->metadata : ""),
                                       .commit_timestamp = p->commit_timestamp,
                                       .expire_timestamp = p->expire_timestamp};
        gr_go_encode_offset_value(vb, &v);
        recs[k] = (struct gr_batch_rec){.key = kb->p, .key_len = (int32_t)kb->len, .value = vb->p,
                                        .value_len = (int32_t)vb->len, .timestamp = p->commit_timestamp};
        c->in_batch[i] = true;
        k++;
    }
    size_t len = 0;
    if (k > 0) {
        c->batch = gr_batch_build(recs, k, NULL, &len);
        g->inflight++;
    }
    pthread_mutex_unlock(&gc->mu);
    for (int i = 0; i < 2 * k; i++) gr_wbuf_free(&bufs[i]);
    free(bufs);
    free(recs);
    if (k == 0) {
        free(c->in_batch);
        free(c->group_id);
        free(c);
        cb(ctx, parts, n);
        return;
    }
    gc->cfg.storage.append(gc->cfg.storage.ctx, pr.partition, c->batch, len, -1, gc->cfg.offset_commit_timeout_ms,
                           commit_done, c);
}

/* ---- OffsetFetch ---- */

int16_t gr_gc_fetch_offsets(struct gr_group_coordinator *gc, const char *group_id, bool all,
                            struct gr_gc_fetch_part **parts, int *n, struct gr_arena *a) {
    if (!group_id) return GR_KERR_INVALID_GROUP_ID;
    struct probe pr;
    probe_group(gc, group_id, &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    if (e != GR_KERR_NONE) {
        pthread_mutex_unlock(&gc->mu);
        return e;
    }
    struct group *g = find_group_locked(gc, group_id);
    if (g && g->state == ST_DEAD) g = NULL;
    if (all) {
        int cnt = g ? g->n_offsets : 0;
        struct gr_gc_fetch_part *out = gr_arena_alloc(a, (size_t)(cnt + 1) * sizeof *out);
        for (int i = 0; i < cnt; i++) {
            const struct offset_entry *o = &g->offsets[i];
            out[i] = (struct gr_gc_fetch_part){.topic = gr_arena_strdup(a, o->topic), .partition = o->partition,
                                               .offset = o->offset, .leader_epoch = o->leader_epoch,
                                               .metadata = gr_arena_strdup(a, o->metadata)};
        }
        *parts = out;
        *n = cnt;
    } else {
        for (int i = 0; i < *n; i++) {
            struct gr_gc_fetch_part *p = &(*parts)[i];
            const struct offset_entry *o = g ? find_offset(g, p->topic, p->partition) : NULL;
            p->error = GR_KERR_NONE;
            p->offset = o ? o->offset : -1;
            p->leader_epoch = o ? o->leader_epoch : -1;
            p->metadata = gr_arena_strdup(a, o ? o->metadata : "");
        }
    }
    pthread_mutex_unlock(&gc->mu);
    return GR_KERR_NONE;
}

/* ---- DescribeGroups, ListGroups, DeleteGroups ---- */

int16_t gr_gc_describe_group(struct gr_group_coordinator *gc, const char *group_id, struct gr_arena *a,
                             struct gr_gc_group_summary *out) {
    memset(out, 0, sizeof *out);
    out->state = "";
    out->protocol_type = "";
    out->protocol = "";
    if (!group_id) return GR_KERR_INVALID_GROUP_ID;
    struct probe pr;
    probe_group(gc, group_id, &pr);
    pthread_mutex_lock(&gc->mu);
    int16_t e = check_locked(gc, &pr);
    if (e == GR_KERR_NONE) {
        struct group *g = find_group_locked(gc, group_id);
        if (!g) {
            out->state = "Dead";
        } else {
            bool stable = g->state == ST_STABLE;
            out->state = state_names[g->state];
            out->protocol_type = gr_arena_strdup(a, g->protocol_type ? g->protocol_type : "");
            out->protocol = stable && g->protocol_name ? gr_arena_strdup(a, g->protocol_name) : "";
            out->n_members = g->n_members;
            out->members = gr_arena_alloc(a, (size_t)(g->n_members + 1) * sizeof *out->members);
            int i = 0;
            for (const struct member *m = g->members; m; m = m->next, i++) {
                struct gr_gc_member_summary *s = &out->members[i];
                s->member_id = gr_arena_strdup(a, m->id);
                s->group_instance_id = gr_arena_strdup(a, m->instance_id);
                s->client_id = gr_arena_strdup(a, m->client_id);
                s->client_host = gr_arena_strdup(a, m->client_host);
                if (stable) {
                    const uint8_t *meta = NULL;
                    int32_t len = 0;
                    if (g->protocol_name) member_protocol(m, g->protocol_name, &meta, &len);
                    s->metadata = arena_bytes(a, meta, len);
                    s->metadata_len = s->metadata ? len : 0;
                    s->assignment = arena_bytes(a, m->assignment, m->assignment_len);
                    s->assignment_len = s->assignment ? m->assignment_len : 0;
                }
            }
        }
    }
    pthread_mutex_unlock(&gc->mu);
    return e;
}

int16_t gr_gc_list_groups(struct gr_group_coordinator *gc, const char *const *states, int n_states,
                          struct gr_arena *a, struct gr_gc_listed_group **out, int *n) {
    pthread_mutex_lock(&gc->mu);
    *n = 0;
    *out = gr_arena_alloc(a, (size_t)(gc->n_groups + 1) * sizeof **out);
    if (!gc->active) {
        pthread_mutex_unlock(&gc->mu);
        return GR_KERR_COORDINATOR_NOT_AVAILABLE;
    }
    int16_t e = GR_KERR_NONE;
    for (int32_t p = 0; p < gc->n_parts_cap; p++)
        if (gc->parts[p].state == PART_LOADING) e = GR_KERR_COORDINATOR_LOAD_IN_PROGRESS;
    for (int b = 0; b < NBUCKETS; b++)
        for (struct group *g = gc->buckets[b]; g; g = g->next) {
            if (g->partition >= gc->n_parts_cap || gc->parts[g->partition].state != PART_OWNED) continue;
            const char *st = state_names[g->state];
            bool keep = n_states <= 0;
            for (int i = 0; i < n_states && !keep; i++) keep = streq(states[i], st);
            if (!keep) continue;
            struct gr_gc_listed_group *l = &(*out)[(*n)++];
            l->group_id = gr_arena_strdup(a, g->id);
            l->protocol_type = gr_arena_strdup(a, g->protocol_type ? g->protocol_type : "");
            l->state = st;
        }
    pthread_mutex_unlock(&gc->mu);
    return e;
}

static void tombstone_done(void *arg, int16_t error) {
    char *id = arg;
    if (error != GR_KERR_NONE)
        gr_warn(LOGGER, "Failed to write the tombstones of deleted group %s: %s", id, gr_kerr_name(error));
    free(id);
}

struct tomb {
    char *id;
    uint8_t *batch;
};

static void tomb_done(void *arg, int16_t error) {
    struct tomb *t = arg;
    tombstone_done(t->id, error);
    free(t->batch);
    free(t);
}

void gr_gc_delete_groups(struct gr_group_coordinator *gc, const char *const *ids, int n, int16_t *errors) {
    struct wq w = {0};
    for (int i = 0; i < n; i++) {
        const char *id = ids[i];
        if (!id) {
            errors[i] = GR_KERR_INVALID_GROUP_ID;
            continue;
        }
        struct probe pr;
        probe_group(gc, id, &pr);
        pthread_mutex_lock(&gc->mu);
        int16_t e = check_locked(gc, &pr);
        if (e == GR_KERR_NONE) {
            struct group *g = find_group_locked(gc, id);
            if (!g || g->state == ST_DEAD) {
                e = GR_KERR_GROUP_ID_NOT_FOUND;
            } else if (g->state != ST_EMPTY) {
                e = GR_KERR_NON_EMPTY_GROUP;
            } else {
                struct tomb *t = gr_calloc(1, sizeof *t);
                t->id = gr_strdup(id);
                size_t len;
                t->batch = build_group_batch(gc, g, true, true, &len);
                wq_add(&w, g->partition, t->batch, len, 1, tomb_done, t);
                gr_info(LOGGER, "Group %s deleted (%d offsets removed)", id, g->n_offsets);
                remove_group_locked(gc, g);
            }
        }
        pthread_mutex_unlock(&gc->mu);
        errors[i] = e;
    }
    wq_flush(gc, &w);
}

/* ---- timers ---- */

/* Kafka's MemberMetadata.hasSatisfiedHeartbeat at the moment the expectation expires. */
static bool hb_satisfied(const struct member *m) {
    if (m->is_leaving) return true;
    if (m->is_new) return false;
    return m->join_cb || m->sync_cb;
}

static void tick_group_locked(struct gr_group_coordinator *gc, struct group *g, int64_t now, struct dq *q,
                              struct wq *w) {
restart:
    for (struct member *m = g->members; m; m = m->next) {
        if (!m->hb_deadline || now < m->hb_deadline) continue;
        m->hb_deadline = 0;
        if (hb_satisfied(m)) continue;
        gr_info(LOGGER, "Member %s in group %s has failed, removing it from the group", m->id, g->id);
        char reason[256];
        snprintf(reason, sizeof reason, "removing member %s on heartbeat expiration", m->id);
        /* may complete the join and drop other members: walk again from the start */
        remove_member_and_update_locked(gc, g, m, reason, q, w);
        goto restart;
    }
    for (struct pending *p = g->pending, *next; p; p = next) {
        next = p->next;
        if (now < p->deadline) continue;
        gr_info(LOGGER, "Pending member %s in group %s has been removed after session timeout expiration.", p->id,
                g->id);
        group_remove_pending(g, p->id);
        if (g->state == ST_PREPARING) try_complete_join_locked(gc, g, q, w);
    }
    if (g->state == ST_PREPARING && g->join_armed && now >= g->join_deadline) {
        if (g->join_initial && g->new_member_added && g->join_remaining != 0) {
            g->new_member_added = false;
            int32_t delay = GR_MIN(gc->cfg.initial_rebalance_delay_ms, g->join_remaining);
            int32_t remaining = GR_MAX(g->join_remaining - g->join_delay, 0);
            arm_join(gc, g, true, delay, remaining);
        } else {
            complete_join_locked(gc, g, q, w);
        }
    }
}

void gr_gc_tick(struct gr_group_coordinator *gc) {
    struct dq q;
    struct wq w = {0};
    dq_init(&q);
    int64_t now = now_ms(gc);
    pthread_mutex_lock(&gc->mu);
    bool cleanup = now >= gc->next_cleanup;
    if (cleanup) gc->next_cleanup = now + CLEANUP_INTERVAL_MS;
    for (int b = 0; b < NBUCKETS; b++) {
        for (struct group *g = gc->buckets[b], *next; g; g = next) {
            next = g->next;
            if (g->partition < gc->n_parts_cap && gc->parts[g->partition].state == PART_LOADING) continue;
            tick_group_locked(gc, g, now, &q, &w);
            if (cleanup && g->state == ST_EMPTY && !g->members && !g->pending && g->n_offsets == 0 &&
                g->inflight == 0 && now - g->created_ms >= CLEANUP_INTERVAL_MS) {
                gr_info(LOGGER, "Group %s is empty and has no offsets; removing it", g->id);
                remove_group_locked(gc, g);
            }
        }
    }
    pthread_mutex_unlock(&gc->mu);
    wq_flush(gc, &w);
    dq_flush(&q);
}

/* ---- loading and unloading ---- */

/* Kafka's onGroupUnloaded for every group of partition p (p < 0: all). */
static void unload_locked(struct gr_group_coordinator *gc, int32_t p, struct dq *q) {
    int count = 0;
    for (int b = 0; b < NBUCKETS; b++) {
        for (struct group *g = gc->buckets[b], *next; g; g = next) {
            next = g->next;
            if (p >= 0 && g->partition != p) continue;
            for (struct member *m = g->members; m; m = m->next) {
                if (m->join_cb) {
                    push_join_error(q, m->join_cb, m->join_ctx, m->id, GR_KERR_NOT_COORDINATOR);
                    m->join_cb = NULL;
                }
                if (m->sync_cb) {
                    push_sync(q, m->sync_cb, m->sync_ctx, NULL, NULL, GR_KERR_NOT_COORDINATOR);
                    m->sync_cb = NULL;
                }
            }
            remove_group_locked(gc, g);
            count++;
        }
    }
    if (p >= 0 && count)
        gr_info(LOGGER, "Unloaded %d groups of %s-%d (no longer its leader)", count, GR_OFFSETS_TOPIC, p);
}

/* Applies one record of partition p read back from the log. */
static void apply_record_locked(struct gr_group_coordinator *gc, int32_t p, const struct gr_batch_rec_view *rec) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct gr_go_key key;
    if (rec->KeyLength < 0 || gr_go_decode_key(rec->Key, (size_t)rec->KeyLength, &a, &key) != 0) {
        gr_warn(LOGGER, "Skipping a record at offset %" PRId64 " of %s-%d with an unreadable key", rec->Offset,
                GR_OFFSETS_TOPIC, p);
        goto out;
    }
    struct group *g = find_group_locked(gc, key.group);
    if (key.kind == GR_GO_KEY_OFFSET) {
        if (rec->ValueLength < 0) {
            if (g) remove_offset(g, key.topic, key.partition);
            goto out;
        }
        struct gr_go_offset_value v;
        if (gr_go_decode_offset_value(rec->Value, (size_t)rec->ValueLength, &a, &v) != 0) {
            gr_warn(LOGGER, "Skipping an unreadable offset commit value at offset %" PRId64 " of %s-%d", rec->Offset,
                    GR_OFFSETS_TOPIC, p);
            goto out;
        }
        if (!g) g = create_group_locked(gc, key.group, p);
        put_offset(g, key.topic, key.partition, v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                   v.expire_timestamp);
        goto out;
    }
    /* group metadata */
    if (rec->ValueLength < 0) {
        if (g) {
            group_clear_members(g);
            g->generation = 0;
            free(g->protocol_name);
            g->protocol_name = NULL;
            group_transition(gc, g, ST_EMPTY);
            if (g->n_offsets == 0) remove_group_locked(gc, g);
        }
        goto out;
    }
    struct gr_go_group_value v;
    if (gr_go_decode_group_value(rec->Value, (size_t)rec->ValueLength, &a, &v) != 0) {
        gr_warn(LOGGER, "Skipping an unreadable group metadata value at offset %" PRId64 " of %s-%d", rec->Offset,
                GR_OFFSETS_TOPIC, p);
        goto out;
    }
    if (!g) g = create_group_locked(gc, key.group, p);
    group_clear_members(g);
    g->generation = v.generation;
    free(g->protocol_type);
    g->protocol_type = gr_strdup(v.protocol_type);
    free(g->protocol_name);
    g->protocol_name = dupz(v.protocol);
    for (int i = 0; i < v.n_members; i++) {
        const struct gr_go_member *x = &v.members[i];
        struct member *m = gr_calloc(1, sizeof *m);
        m->id = gr_strdup(x->member_id);
        m->instance_id = dupz(x->group_instance_id);
        m->client_id = gr_strdup(x->client_id);
        m->client_host = gr_strdup(x->client_host);
        m->protocol_type = gr_strdup(v.protocol_type);
        m->session_timeout = x->session_timeout;
        m->rebalance_timeout = x->rebalance_timeout;
        struct gr_gc_protocol pr = {.name = v.protocol ? v.protocol : "", .metadata = x->subscription,
                                    .metadata_len = x->subscription_len};
        member_set_protocols(m, &pr, 1);
        member_set_assignment(m, x->assignment, x->assignment_len);
        group_add_member(g, m);
    }
    if (v.leader && group_member(g, v.leader)) set_leader(g, v.leader);
    group_transition(gc, g, g->members ? ST_STABLE : ST_EMPTY);
    if (v.current_state_timestamp >= 0) g->state_ts = v.current_state_timestamp;
out:
    gr_arena_free(&a);
}

/* Applies every record of the batches in buf. */
static void apply_batches(struct gr_group_coordinator *gc, int32_t p, const uint8_t *buf, size_t len) {
    struct gr_batch_iter it;
    struct gr_batch_info info;
    const uint8_t *batch;
    gr_batch_iter_init(&it, buf, len);
    pthread_mutex_lock(&gc->mu);
    while (gr_batch_iter_next(&it, &info, &batch) == 1) {
        if (info.Attributes & GR_BATCH_ATTR_CONTROL) continue;
        if (gr_batch_info_compression(&info) != 0) {
            gr_warn(LOGGER, "Skipping a compressed batch at offset %" PRId64 " of %s-%d (not supported)",
                    info.BaseOffset, GR_OFFSETS_TOPIC, p);
            continue;
        }
        struct gr_batch_rec_iter ri;
        struct gr_batch_rec_view rec;
        if (gr_batch_rec_iter_init(&ri, batch, info.size) != GR_BATCH_OK) continue;
        while (gr_batch_rec_iter_next(&ri, &rec) == 1) apply_record_locked(gc, p, &rec);
    }
    pthread_mutex_unlock(&gc->mu);
}

/* Reads partition p into memory and takes ownership of it at epoch (Kafka's loadGroupsAndOffsets
 * + onGroupLoaded). Returns false if reading failed (the partition is then released). */
static bool load_partition(struct gr_group_coordinator *gc, int32_t p, int32_t epoch, int64_t start, int64_t end) {
    int64_t t0 = gr_mono_ms();
    int64_t off = start;
    bool ok = true;
    while (off < end) {
        struct gr_plog_read_result res;
        memset(&res, 0, sizeof res);
        int16_t e = gc->cfg.storage.read(gc->cfg.storage.ctx, p, off, LOAD_READ_BYTES, &res);
        if (e != GR_KERR_NONE) {
            gr_warn(LOGGER, "Cannot load %s-%d at offset %" PRId64 ": %s", GR_OFFSETS_TOPIC, p, off, gr_kerr_name(e));
            free(res.data);
            ok = false;
            break;
        }
        if (res.len > 0) apply_batches(gc, p, res.data, res.len);
        free(res.data);
        if (res.len == 0 || res.next_offset <= off) break;
        off = res.next_offset;
        pthread_mutex_lock(&gc->mu);
        bool active = gc->active;
        pthread_mutex_unlock(&gc->mu);
        if (!active) {
            ok = false;
            break;
        }
    }
    struct dq q;
    dq_init(&q);
    pthread_mutex_lock(&gc->mu);
    struct part *pt = &gc->parts[p];
    int ngroups = 0;
    if (ok && gc->active) {
        for (int b = 0; b < NBUCKETS; b++)
            for (struct group *g = gc->buckets[b]; g; g = g->next) {
                if (g->partition != p) continue;
                ngroups++;
                for (struct member *m = g->members; m; m = m->next) schedule_hb(gc, m, m->session_timeout);
            }
        pt->state = PART_OWNED;
        pt->epoch = epoch;
    } else {
        unload_locked(gc, p, &q);
        pt->state = PART_NONE;
    }
    pthread_mutex_unlock(&gc->mu);
    dq_flush(&q);
    if (ok)
        gr_info(LOGGER, "Finished loading offsets and group metadata from %s-%d (leader epoch %d, %d groups, "
                        "offsets %" PRId64 "..%" PRId64 ") in %" PRId64 " milliseconds",
                GR_OFFSETS_TOPIC, p, epoch, ngroups, start, end, gr_mono_ms() - t0);
    return ok;
}

void gr_gc_poll_partitions(struct gr_group_coordinator *gc) {
    int32_t n = effective_partitions(gc);
    for (int32_t p = 0; p < n; p++) {
        int32_t epoch = -1;
        int64_t start = 0, end = 0;
        bool leader = gc->cfg.storage.leader_info(gc->cfg.storage.ctx, p, &epoch, &start, &end);
        struct dq q;
        dq_init(&q);
        pthread_mutex_lock(&gc->mu);
        if (!gc->active) {
            pthread_mutex_unlock(&gc->mu);
            return;
        }
        ensure_parts_locked(gc, p + 1);
        struct part *pt = &gc->parts[p];
        if (pt->state == PART_OWNED && (!leader || pt->epoch != epoch)) {
            unload_locked(gc, p, &q);
            pt->state = PART_NONE;
        }
        bool load = leader && pt->state == PART_NONE;
        if (load) {
            pt->state = PART_LOADING;
            pt->epoch = epoch;
            gr_debug(LOGGER, "Elected as the group coordinator for partition %d in epoch %d; loading", p, epoch);
        }
        pthread_mutex_unlock(&gc->mu);
        dq_flush(&q);
        if (load) load_partition(gc, p, epoch, start, end);
    }
}

/* ---- lifecycle ---- */

void gr_gc_config_defaults(struct gr_gc_config *c) {
    memset(c, 0, sizeof *c);
    c->broker_id = -1;
    c->num_partitions = GR_OFFSETS_DEFAULT_PARTITIONS;
    c->initial_rebalance_delay_ms = 3000;
    c->min_session_timeout_ms = 6000;
    c->max_session_timeout_ms = 1800000;
    c->group_max_size = INT32_MAX;
    c->offset_commit_timeout_ms = 5000;
    c->max_metadata_size = 4096;
    c->background_thread = true;
}

static void *gc_thread(void *arg) {
    struct gr_group_coordinator *gc = arg;
    pthread_setname_np(pthread_self(), "group-coord");
    for (;;) {
        gr_gc_poll_partitions(gc);
        gr_gc_tick(gc);
        pthread_mutex_lock(&gc->mu);
        if (!gc->stopping && !gc->kick) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 50 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&gc->cond, &gc->mu, &ts);
        }
        gc->kick = false;
        bool stop = gc->stopping;
        pthread_mutex_unlock(&gc->mu);
        if (stop) break;
    }
    return NULL;
}

struct gr_group_coordinator *gr_gc_new(const struct gr_gc_config *cfg) {
    struct gr_group_coordinator *gc = gr_calloc(1, sizeof *gc);
    gc->cfg = *cfg;
    if (gc->cfg.num_partitions <= 0) gc->cfg.num_partitions = GR_OFFSETS_DEFAULT_PARTITIONS;
    if (gc->cfg.group_max_size <= 0) gc->cfg.group_max_size = INT32_MAX;
    pthread_mutex_init(&gc->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&gc->cond, &ca);
    pthread_condattr_destroy(&ca);
    gc->active = true;
    gc->next_cleanup = now_ms(gc) + CLEANUP_INTERVAL_MS;
    ensure_parts_locked(gc, gc->cfg.num_partitions);
    if (cfg->background_thread) {
        int rc = pthread_create(&gc->thread, NULL, gc_thread, gc);
        if (rc != 0) {
            gr_error(LOGGER, "Cannot start the group coordinator thread: %s", strerror(rc));
            gr_gc_free(gc);
            return NULL;
        }
        gc->thread_started = true;
    }
    return gc;
}

void gr_gc_shutdown(struct gr_group_coordinator *gc) {
    if (!gc) return;
    struct dq q;
    dq_init(&q);
    pthread_mutex_lock(&gc->mu);
    bool was_active = gc->active;
    gc->active = false;
    gc->stopping = true;
    pthread_cond_broadcast(&gc->cond);
    pthread_mutex_unlock(&gc->mu);
    if (gc->thread_started) {
        pthread_join(gc->thread, NULL);
        gc->thread_started = false;
    }
    pthread_mutex_lock(&gc->mu);
    unload_locked(gc, -1, &q);
    for (int32_t p = 0; p < gc->n_parts_cap; p++) gc->parts[p].state = PART_NONE;
    pthread_mutex_unlock(&gc->mu);
    dq_flush(&q);
    if (was_active) gr_info(LOGGER, "Shutdown complete.");
}

void gr_gc_free(struct gr_group_coordinator *gc) {
    if (!gc) return;
    gr_gc_shutdown(gc);
    if (gc->cfg.storage.release) gc->cfg.storage.release(gc->cfg.storage.ctx);
    free(gc->parts);
    pthread_cond_destroy(&gc->cond);
    pthread_mutex_destroy(&gc->mu);
    free(gc);
}
