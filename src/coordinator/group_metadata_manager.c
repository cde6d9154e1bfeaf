/* Kafka's GroupMetadataManager: the table of groups (hashed by id), the records written to the
 * __consumer_offsets partitions (group metadata batches, the write queue, storage errors as the
 * APIs report them), and unloading a partition's groups when this broker stops leading it.
 * Loading them back, and which partitions are loading or owned: group_metadata_loader.c. Record
 * formats: group_offsets.h.
 *
 * Locking: *_locked functions run under gc->mu (group_internal.h rule 1); storage calls run
 * without it (rule 2): gc_wq_flush. The gc_table_* functions lock nothing: on gc->groups they
 * need gc->mu, on a loader's private table nothing (rule 5). */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "coordinator/group_internal.h"
#include "coordinator/txn_offsets.h"
#include "storage/producer_state.h"
#include "coordinator/group_offsets.h"
#include "storage/batch.h"
#include "coordinator/coord_records.h"

/* ---- the group table and the owned partitions ---- */

static uint32_t hash_str(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

int32_t gc_effective_partitions(struct gr_group_coordinator *gc) {
    int32_t n = gc->cfg.storage.num_partitions ? gc->cfg.storage.num_partitions(gc->cfg.storage.ctx) : 0;
    return n > 0 ? n : gc->cfg.num_partitions;
}

void gr_gc_counts(struct gr_group_coordinator *gc, struct gr_gc_counts *out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&gc->mu);
    for (int i = 0; i < NBUCKETS; i++)
        for (struct group *g = gc->groups.buckets[i]; g; g = g->next) {
            out->groups++;
            out->offsets += g->n_offsets;
            switch (g->state) {
            case ST_EMPTY: out->empty++; break;
            case ST_PREPARING: out->preparing_rebalance++; break;
            case ST_COMPLETING: out->completing_rebalance++; break;
            case ST_STABLE: out->stable++; break;
            case ST_DEAD: out->dead++; break;
            }
        }
    pthread_mutex_unlock(&gc->mu);
}

int32_t gr_gc_partition_for(struct gr_group_coordinator *gc, const char *group_id) {
    return gr_group_partition_for(group_id, gc_effective_partitions(gc));
}

void gc_ensure_parts_locked(struct gr_group_coordinator *gc, int32_t n) {
    if (n <= gc->n_parts_cap) return;
    gc->parts = gr_realloc(gc->parts, (size_t)n * sizeof *gc->parts);
    memset(gc->parts + gc->n_parts_cap, 0, (size_t)(n - gc->n_parts_cap) * sizeof *gc->parts);
    gc->n_parts_cap = n;
}

struct group *gc_table_find(struct gc_table *t, const char *id) {
    for (struct group *g = t->buckets[hash_str(id) % NBUCKETS]; g; g = g->next)
        if (strcmp(g->id, id) == 0) return g;
    return NULL;
}

void gc_table_add(struct gc_table *t, struct group *g) {
    uint32_t b = hash_str(g->id) % NBUCKETS;
    g->next = t->buckets[b];
    t->buckets[b] = g;
    t->n_groups++;
}

void gc_table_remove(struct gc_table *t, struct group *g) {
    for (struct group **pp = &t->buckets[hash_str(g->id) % NBUCKETS]; *pp; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            t->n_groups--;
            break;
        }
    gc_group_free(g);
}

void gc_table_clear(struct gc_table *t) {
    for (int b = 0; b < NBUCKETS; b++)
        while (t->buckets[b]) gc_table_remove(t, t->buckets[b]);
}

struct group *gc_group_new(struct gr_group_coordinator *gc, const char *id, int32_t partition) {
    struct group *g = gr_calloc(1, sizeof *g);
    g->id = gr_strdup(id);
    g->partition = partition;
    g->state = ST_EMPTY;
    g->state_ts = wall_ms(gc);
    g->created_ms = now_ms(gc);
    return g;
}

struct group *gc_find_group_locked(struct gr_group_coordinator *gc, const char *id) {
    return gc_table_find(&gc->groups, id);
}

struct group *gc_create_group_locked(struct gr_group_coordinator *gc, const char *id, int32_t partition) {
    struct group *g = gc_group_new(gc, id, partition);
    gc_table_add(&gc->groups, g);
    return g;
}

void gc_remove_group_locked(struct gr_group_coordinator *gc, struct group *g) {
    gc_table_remove(&gc->groups, g);
}

/* ---- persistence ---- */

int16_t gc_map_store_error(int16_t e, bool offsets) {
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
uint8_t *gc_build_group_batch(struct gr_group_coordinator *gc, const struct group *g, bool tombstone,
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
            if (g->protocol_name) gc_member_protocol(m, g->protocol_name, &meta, &mlen);
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

void gc_wq_add(struct wq *w, int32_t p, uint8_t *batch, size_t len, int16_t acks, void (*done)(void *, int16_t, int64_t),
               void *ctx) {
    struct write *x = gr_calloc(1, sizeof *x);
    *x = (struct write){.next = w->head, .partition = p, .batch = batch, .len = len, .acks = acks, .done = done, .ctx = ctx};
    w->head = x;
}

void gc_wq_flush(struct gr_group_coordinator *gc, struct wq *w) {
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

/* ---- unloading (loading: group_metadata_loader.c) ---- */

/* Kafka's onGroupUnloaded for every group of partition p (p < 0: all). */
void gc_unload_locked(struct gr_group_coordinator *gc, int32_t p, struct dq *q) {
    int count = 0;
    for (int b = 0; b < NBUCKETS; b++) {
        for (struct group *g = gc->groups.buckets[b], *next; g; g = next) {
            next = g->next;
            if (p >= 0 && g->partition != p) continue;
            for (struct member *m = g->members; m; m = m->next) {
                if (m->join_cb) {
                    gc_push_join_error(q, m->join_cb, m->join_ctx, m->id, GR_KERR_NOT_COORDINATOR);
                    m->join_cb = NULL;
                }
                if (m->sync_cb) {
                    gc_push_sync(q, m->sync_cb, m->sync_ctx, NULL, NULL, GR_KERR_NOT_COORDINATOR);
                    m->sync_cb = NULL;
                }
            }
            gc_remove_group_locked(gc, g);
            count++;
        }
    }
    if (p >= 0) gr_txn_offsets_drop_partition(p); /* the next owner rebuilds them from the log */
    if (p >= 0 && count)
        gr_info(LOGGER, "Unloaded %d groups of %s-%d (no longer its leader)", count, GR_OFFSETS_TOPIC, p);
}
