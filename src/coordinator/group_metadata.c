/* Kafka's GroupMetadata and MemberMetadata: one group's members (protocols, assignment,
 * waiting JoinGroup/SyncGroup callbacks), pending member ids, leader, protocol selection and
 * committed offsets, all in memory; and the completion queue that answers waiting callbacks
 * after the coordinator's lock is released. No storage, no timers, no state-machine decisions
 * (those are group_coordinator.c's).
 *
 * Locking: every function that takes a struct group or struct member runs under gc->mu
 * (group_internal.h rule 1); gc_dq_flush runs without it (rule 2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/util.h"
#include "coordinator/group_internal.h"

void gc_dq_init(struct dq *q) {
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

void gc_dq_flush(struct dq *q) {
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
    gc_dq_init(q);
}

/* ---- members and groups ---- */

static uint8_t *dupbytes(const uint8_t *p, int32_t len) {
    if (!p || len <= 0) return NULL;
    uint8_t *c = gr_malloc((size_t)len);
    memcpy(c, p, (size_t)len);
    return c;
}

void gc_member_set_protocols(struct member *m, const struct gr_gc_protocol *p, int n) {
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

void gc_member_set_assignment(struct member *m, const uint8_t *p, int32_t len) {
    free(m->assignment);
    m->assignment = dupbytes(p, len);
    m->assignment_len = m->assignment ? len : 0;
}

static void member_free(struct member *m) {
    gc_member_set_protocols(m, NULL, 0);
    free(m->assignment);
    free(m->id);
    free(m->instance_id);
    free(m->client_id);
    free(m->client_host);
    free(m->protocol_type);
    free(m);
}

/* Does the member support protocol name? Its metadata goes to meta and len. */
bool gc_member_protocol(const struct member *m, const char *name, const uint8_t **meta, int32_t *len) {
    for (int i = 0; i < m->n_protocols; i++)
        if (strcmp(m->protocols[i].name, name) == 0) {
            if (meta) *meta = m->protocols[i].meta;
            if (len) *len = m->protocols[i].len;
            return true;
        }
    return false;
}

/* Kafka's MemberMetadata.matches: the same protocols with the same metadata, in order. */
bool gc_member_matches(const struct member *m, const struct gr_gc_protocol *p, int n) {
    if (m->n_protocols != n) return false;
    for (int i = 0; i < n; i++) {
        const struct proto *q = &m->protocols[i];
        int32_t plen = p[i].metadata && p[i].metadata_len > 0 ? p[i].metadata_len : 0;
        if (!streq(q->name, p[i].name ? p[i].name : "") || q->len != plen) return false;
        if (plen && memcmp(q->meta, p[i].metadata, (size_t)plen) != 0) return false;
    }
    return true;
}

struct member *gc_group_member(struct group *g, const char *id) {
    if (!id) return NULL;
    for (struct member *m = g->members; m; m = m->next)
        if (strcmp(m->id, id) == 0) return m;
    return NULL;
}

bool gc_group_is_pending(struct group *g, const char *id) {
    for (struct pending *p = g->pending; p; p = p->next)
        if (strcmp(p->id, id) == 0) return true;
    return false;
}

bool gc_group_remove_pending(struct group *g, const char *id) {
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

void gc_group_transition(struct gr_group_coordinator *gc, struct group *g, enum gstate to) {
    g->state = to;
    g->state_ts = wall_ms(gc);
    if (to != ST_PREPARING) g->join_armed = false;
}

void gc_group_clear_members(struct group *g) {
    while (g->members) {
        struct member *m = g->members;
        g->members = m->next;
        member_free(m);
    }
    while (g->pending) gc_group_remove_pending(g, g->pending->id);
    g->n_members = g->n_awaiting_join = 0;
    free(g->leader_id);
    g->leader_id = NULL;
}

void gc_group_free(struct group *g) {
    gc_group_clear_members(g);
    for (int i = 0; i < g->n_offsets; i++) {
        free(g->offsets[i].topic);
        free(g->offsets[i].metadata);
    }
    free(g->offsets);
    free(g->offset_index);
    free(g->id);
    free(g->protocol_type);
    free(g->protocol_name);
    free(g);
}

/* ---- committed offsets: a dense array (iteration, OffsetFetch of all) indexed by an open-addressing
 * table keyed by (topic, partition) (lookups): linear probing, at most half full, slots hold
 * array index + 1 (0 = empty); a removal shifts the following run back instead of leaving a
 * tombstone. ---- */

static uint32_t offset_hash(const char *topic, int32_t partition) {
    uint64_t h = gr_str_hash(topic) ^ ((uint64_t)(uint32_t)partition * 0x9E3779B97F4A7C15ull);
    h ^= h >> 29;
    return (uint32_t)(h ^ (h >> 32));
}

/* The slot holding (topic, partition), or the empty slot where it would go. */
static uint32_t offset_slot(const struct group *g, const char *topic, int32_t partition) {
    uint32_t mask = g->index_cap - 1;
    for (uint32_t s = offset_hash(topic, partition) & mask;; s = (s + 1) & mask) {
        int32_t i = g->offset_index[s];
        if (i == 0) return s;
        const struct offset_entry *e = &g->offsets[i - 1];
        if (e->partition == partition && strcmp(e->topic, topic) == 0) return s;
    }
}

static void index_rebuild(struct group *g, uint32_t cap) {
    free(g->offset_index);
    g->offset_index = gr_calloc(cap, sizeof *g->offset_index);
    g->index_cap = cap;
    for (int i = 0; i < g->n_offsets; i++)
        g->offset_index[offset_slot(g, g->offsets[i].topic, g->offsets[i].partition)] = i + 1;
}

struct offset_entry *gc_find_offset(struct group *g, const char *topic, int32_t partition) {
    if (g->n_offsets == 0) return NULL;
    int32_t i = g->offset_index[offset_slot(g, topic, partition)];
    return i ? &g->offsets[i - 1] : NULL;
}

void gc_put_offset(struct group *g, const char *topic, int32_t partition, int64_t offset, int32_t epoch,
                   const char *metadata, int64_t commit_ts, int64_t expire_ts, int64_t append_offset) {
    struct offset_entry *e = gc_find_offset(g, topic, partition);
    if (!e) {
        if (g->n_offsets == g->cap_offsets) {
            g->cap_offsets = g->cap_offsets ? g->cap_offsets * 2 : 8;
            g->offsets = gr_realloc(g->offsets, (size_t)g->cap_offsets * sizeof *g->offsets);
        }
        if ((uint32_t)(g->n_offsets + 1) * 2 > g->index_cap) index_rebuild(g, g->index_cap ? g->index_cap * 2 : 16);
        e = &g->offsets[g->n_offsets++];
        e->topic = gr_strdup(topic);
        e->partition = partition;
        e->metadata = NULL;
        g->offset_index[offset_slot(g, topic, partition)] = g->n_offsets;
    }
    e->offset = offset;
    e->leader_epoch = epoch;
    free(e->metadata);
    e->metadata = gr_strdup(metadata ? metadata : "");
    e->commit_ts = commit_ts;
    e->expire_ts = expire_ts;
    e->append_offset = append_offset;
}

bool gc_txn_offset_is_newer(struct group *g, const char *topic, int32_t partition, int64_t append_offset) {
    const struct offset_entry *e = gc_find_offset(g, topic, partition);
    return !e || e->append_offset < append_offset;
}

/* Empties slot s, moving back the entries of the run after it that may not stay behind the gap. */
static void index_delete_slot(struct group *g, uint32_t s) {
    uint32_t mask = g->index_cap - 1;
    for (uint32_t j = (s + 1) & mask;; j = (j + 1) & mask) {
        int32_t i = g->offset_index[j];
        if (i == 0) break;
        const struct offset_entry *e = &g->offsets[i - 1];
        uint32_t home = offset_hash(e->topic, e->partition) & mask;
        /* the entry at j may move to s unless its home lies cyclically in (s, j] */
        bool stays = s <= j ? (s < home && home <= j) : (s < home || home <= j);
        if (stays) continue;
        g->offset_index[s] = i;
        s = j;
    }
    g->offset_index[s] = 0;
}

void gc_remove_offset(struct group *g, const char *topic, int32_t partition) {
    if (g->n_offsets == 0) return;
    uint32_t s = offset_slot(g, topic, partition);
    int32_t i = g->offset_index[s];
    if (!i) return;
    index_delete_slot(g, s);
    struct offset_entry *e = &g->offsets[i - 1];
    free(e->topic);
    free(e->metadata);
    int32_t last = g->n_offsets - 1;
    if (i - 1 != last) { /* the last entry takes the freed place */
        *e = g->offsets[last];
        g->offset_index[offset_slot(g, e->topic, e->partition)] = i;
    }
    g->n_offsets--;
}

int32_t gc_group_rebalance_timeout(const struct group *g) {
    int32_t t = 0;
    for (const struct member *m = g->members; m; m = m->next) t = GR_MAX(t, m->rebalance_timeout);
    return t;
}

static bool all_members_support(const struct group *g, const char *name) {
    for (const struct member *m = g->members; m; m = m->next)
        if (!gc_member_protocol(m, name, NULL, NULL)) return false;
    return true;
}

/* Kafka's GroupMetadata.supportsProtocols. */
bool gc_group_supports(const struct group *g, const char *type, const struct gr_gc_protocol *p, int n) {
    if (g->state == ST_EMPTY) return type && type[0] && n > 0;
    if (!streq(g->protocol_type, type)) return false;
    for (int i = 0; i < n; i++)
        if (all_members_support(g, p[i].name ? p[i].name : "")) return true;
    return false;
}

/* Kafka's selectProtocol: every member votes for its most preferred protocol among those all
 * members support; the most votes wins (ties: the first member's preference order). */
const char *gc_select_protocol(const struct group *g) {
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

void gc_set_leader(struct group *g, const char *id) {
    free(g->leader_id);
    g->leader_id = dupz(id);
}

void gc_schedule_hb(struct gr_group_coordinator *gc, struct member *m, int32_t timeout_ms) {
    m->hb_deadline = now_ms(gc) + (timeout_ms > 0 ? timeout_ms : 1);
}

void gc_group_add_member(struct group *g, struct member *m) {
    if (!g->members) {
        free(g->protocol_type);
        g->protocol_type = dupz(m->protocol_type);
    }
    if (!g->leader_id) gc_set_leader(g, m->id);
    struct member **pp = &g->members;
    while (*pp) pp = &(*pp)->next;
    *pp = m;
    g->n_members++;
    if (m->join_cb) g->n_awaiting_join++;
}

void gc_group_remove_member(struct group *g, struct member *m) {
    for (struct member **pp = &g->members; *pp; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    g->n_members--;
    if (m->join_cb) g->n_awaiting_join--;
    if (streq(g->leader_id, m->id)) gc_set_leader(g, g->members ? g->members->id : NULL);
    member_free(m);
}

/* ---- results ---- */

void gc_push_join_error(struct dq *q, gr_gc_join_cb cb, void *ctx, const char *member_id, int16_t error) {
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
struct gr_gc_join_result *gc_push_join_ok(struct dq *q, gr_gc_join_cb cb, void *ctx, const struct group *g,
                                          const struct member *m, bool with_members) {
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
            if (g->protocol_name) gc_member_protocol(x, g->protocol_name, &meta, &len);
            jm[k].member_id = gr_arena_strdup(&d->a, x->id);
            jm[k].group_instance_id = gr_arena_strdup(&d->a, x->instance_id);
            jm[k].metadata = arena_bytes(&d->a, meta, len);
            jm[k].metadata_len = jm[k].metadata ? len : 0;
        }
        r->n_members = k;
        r->members = jm;
    }
    return r;
}

void gc_push_sync(struct dq *q, gr_gc_sync_cb cb, void *ctx, const struct group *g, const struct member *m,
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
void gc_invoke_join_error(struct dq *q, struct group *g, struct member *m, const char *member_id, int16_t error) {
    if (!m->join_cb) return;
    gc_push_join_error(q, m->join_cb, m->join_ctx, member_id, error);
    m->join_cb = NULL;
    m->join_ctx = NULL;
    g->n_awaiting_join--;
}
