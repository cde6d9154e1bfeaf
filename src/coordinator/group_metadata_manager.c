/* Kafka's GroupMetadataManager: the table of groups (hashed by id), which __consumer_offsets
 * partitions this coordinator owns and at which leader epoch, the records written to those
 * partitions (group metadata batches, the write queue, storage errors as the APIs report them),
 * and loading a partition's groups and offsets back from its log when this broker becomes its
 * leader (unloading them when it stops being the leader). Record formats: group_offsets.h.
 *
 * Locking: *_locked functions run under gc->mu (group_internal.h rule 1); storage calls run
 * without it (rule 2): gc_wq_flush and the reads of load_partition. gr_gc_poll_partitions is
 * never concurrent with itself (rule 4). */
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

#define LOAD_READ_BYTES (1 << 20)

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
        for (struct group *g = gc->buckets[i]; g; g = g->next) {
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

struct group *gc_find_group_locked(struct gr_group_coordinator *gc, const char *id) {
    for (struct group *g = gc->buckets[hash_str(id) % NBUCKETS]; g; g = g->next)
        if (strcmp(g->id, id) == 0) return g;
    return NULL;
}

struct group *gc_create_group_locked(struct gr_group_coordinator *gc, const char *id, int32_t partition) {
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

void gc_remove_group_locked(struct gr_group_coordinator *gc, struct group *g) {
    for (struct group **pp = &gc->buckets[hash_str(g->id) % NBUCKETS]; *pp; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            gc->n_groups--;
            break;
        }
    gc_group_free(g);
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

/* ---- loading and unloading ---- */

/* Kafka's onGroupUnloaded for every group of partition p (p < 0: all). */
void gc_unload_locked(struct gr_group_coordinator *gc, int32_t p, struct dq *q) {
    int count = 0;
    for (int b = 0; b < NBUCKETS; b++) {
        for (struct group *g = gc->buckets[b], *next; g; g = next) {
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

/* Applies one record of partition p read back from the log. */
static void apply_record_locked(struct gr_group_coordinator *gc, int32_t p, int64_t base_offset,
                                const struct gr_batch_rec_view *rec) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct gr_go_key key;
    if (rec->KeyLength < 0 || gr_go_decode_key(rec->Key, (size_t)rec->KeyLength, &a, &key) != 0) {
        gr_warn(LOGGER, "Skipping a record at offset %" PRId64 " of %s-%d with an unreadable key", rec->Offset,
                GR_OFFSETS_TOPIC, p);
        goto out;
    }
    struct group *g = gc_find_group_locked(gc, key.group);
    if (key.kind == GR_GO_KEY_OFFSET) {
        if (rec->ValueLength < 0) {
            if (g) gc_remove_offset(g, key.topic, key.partition);
            goto out;
        }
        struct gr_go_offset_value v;
        if (gr_go_decode_offset_value(rec->Value, (size_t)rec->ValueLength, &a, &v) != 0) {
            gr_warn(LOGGER, "Skipping an unreadable offset commit value at offset %" PRId64 " of %s-%d", rec->Offset,
                    GR_OFFSETS_TOPIC, p);
            goto out;
        }
        if (!g) g = gc_create_group_locked(gc, key.group, p);
        gc_put_offset(g, key.topic, key.partition, v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                      v.expire_timestamp, base_offset);
        goto out;
    }
    /* group metadata */
    if (rec->ValueLength < 0) {
        if (g) {
            gc_group_clear_members(g);
            g->generation = 0;
            free(g->protocol_name);
            g->protocol_name = NULL;
            gc_group_transition(gc, g, ST_EMPTY);
            if (g->n_offsets == 0) gc_remove_group_locked(gc, g);
        }
        goto out;
    }
    struct gr_go_group_value v;
    if (gr_go_decode_group_value(rec->Value, (size_t)rec->ValueLength, &a, &v) != 0) {
        gr_warn(LOGGER, "Skipping an unreadable group metadata value at offset %" PRId64 " of %s-%d", rec->Offset,
                GR_OFFSETS_TOPIC, p);
        goto out;
    }
    if (!g) g = gc_create_group_locked(gc, key.group, p);
    gc_group_clear_members(g);
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
        gc_member_set_protocols(m, &pr, 1);
        gc_member_set_assignment(m, x->assignment, x->assignment_len);
        gc_group_add_member(g, m);
    }
    if (v.leader && gc_group_member(g, v.leader)) gc_set_leader(g, v.leader);
    gc_group_transition(gc, g, g->members ? ST_STABLE : ST_EMPTY);
    if (v.current_state_timestamp >= 0) g->state_ts = v.current_state_timestamp;
out:
    gr_arena_free(&a);
}

/* A batch whose records cannot be read (it does not decompress, or is malformed) is skipped,
 * as a corrupt record is; the rest of the partition still loads. */
static void warn_skipped_batch(int32_t p, const struct gr_batch_info *info) {
    gr_warn(LOGGER, "Skipping an unreadable batch (codec %d) at offset %" PRId64 " of %s-%d",
            gr_batch_info_compression(info), info->BaseOffset, GR_OFFSETS_TOPIC, p);
}

/* A transactional batch met while loading (txn_offsets.h): offset records wait for their
 * marker; a COMMIT marker applies the producer's pending offsets of this partition, an ABORT
 * drops them. */
static void gc_load_txn_batch_locked(struct gr_group_coordinator *gc, int32_t p, const struct gr_batch_info *info,
                                     const uint8_t *batch) {
    if (info->Attributes & GR_BATCH_ATTR_CONTROL) {
        int16_t type = -1;
        int32_t ce;
        if (gr_pstate_parse_marker(batch, info->size, &type, &ce) != 0) return;
        struct gr_txn_offset *l = gr_txn_offsets_take(info->ProducerId, p);
        for (struct gr_txn_offset *o = l; o && type == GR_CONTROL_COMMIT; o = o->next) {
            struct group *g = gc_find_group_locked(gc, o->group);
            if (!g) g = gc_create_group_locked(gc, o->group, p);
            /* Kafka's loader: only over an offset stored before the transactional one */
            if (gc_txn_offset_is_newer(g, o->topic, o->partition, o->append_offset))
                gc_put_offset(g, o->topic, o->partition, o->offset, o->leader_epoch, o->metadata, info->MaxTimestamp,
                              -1, o->append_offset);
        }
        gr_txn_offsets_free(l);
        return;
    }
    struct gr_coord_records cr;
    struct gr_batch_rec_view rec;
    if (gr_coord_records_init(&cr, batch, info) != 0) {
        warn_skipped_batch(p, info);
        gr_coord_records_release(&cr);
        return;
    }
    while (gr_batch_rec_iter_next(&cr.it, &rec) == 1) {
        struct gr_arena a;
        gr_arena_init(&a);
        struct gr_go_key key;
        struct gr_go_offset_value v;
        if (rec.KeyLength >= 0 && rec.ValueLength >= 0 &&
            gr_go_decode_key(rec.Key, (size_t)rec.KeyLength, &a, &key) == 0 && key.kind == GR_GO_KEY_OFFSET &&
            gr_go_decode_offset_value(rec.Value, (size_t)rec.ValueLength, &a, &v) == 0)
            gr_txn_offsets_add(info->ProducerId, p, key.group, key.topic, key.partition, v.offset, v.leader_epoch,
                               v.metadata, info->BaseOffset);
        gr_arena_free(&a);
    }
    gr_coord_records_release(&cr);
}

/* Applies every record of the batches in buf. */
static void apply_batches(struct gr_group_coordinator *gc, int32_t p, const uint8_t *buf, size_t len) {
    struct gr_batch_iter it;
    struct gr_batch_info info;
    const uint8_t *batch;
    gr_batch_iter_init(&it, buf, len);
    pthread_mutex_lock(&gc->mu);
    while (gr_batch_iter_next(&it, &info, &batch) == 1) {
        if (info.Attributes & GR_BATCH_ATTR_TRANSACTIONAL) { /* TxnOffsetCommit batches and markers */
            gc_load_txn_batch_locked(gc, p, &info, batch);
            continue;
        }
        if (info.Attributes & GR_BATCH_ATTR_CONTROL) continue;
        /* compressed or not (Kafka's loader decompresses): a compression.type other than
         * "producer" on __consumer_offsets stores our own writes compressed */
        struct gr_coord_records cr;
        struct gr_batch_rec_view rec;
        if (gr_coord_records_init(&cr, batch, &info) == 0)
            while (gr_batch_rec_iter_next(&cr.it, &rec) == 1) apply_record_locked(gc, p, info.BaseOffset, &rec);
        else
            warn_skipped_batch(p, &info);
        gr_coord_records_release(&cr);
    }
    pthread_mutex_unlock(&gc->mu);
}

/* Reads [off, end) of partition p into memory. Returns false if reading failed or the
 * coordinator stopped; *off is where reading stopped. */
static bool load_range(struct gr_group_coordinator *gc, int32_t p, int64_t *off, int64_t end) {
    while (*off < end) {
        struct gr_plog_read_result res;
        memset(&res, 0, sizeof res);
        int16_t e = gc->cfg.storage.read(gc->cfg.storage.ctx, p, *off, LOAD_READ_BYTES, &res);
        if (e != GR_KERR_NONE) {
            gr_warn(LOGGER, "Cannot load %s-%d at offset %" PRId64 ": %s", GR_OFFSETS_TOPIC, p, *off, gr_kerr_name(e));
            free(res.data);
            return false;
        }
        if (res.len > 0) apply_batches(gc, p, res.data, res.len);
        free(res.data);
        if (res.len == 0 || res.next_offset <= *off) break;
        *off = res.next_offset;
        pthread_mutex_lock(&gc->mu);
        bool active = gc->active;
        pthread_mutex_unlock(&gc->mu);
        if (!active) return false;
    }
    return true;
}

/* Reads partition p into memory and takes ownership of it at epoch (Kafka's loadGroupsAndOffsets
 * + onGroupLoaded). As Kafka's loader, it reads up to the log end as it moves, not only to the end
 * seen when loading began: transaction markers are written while the partition loads (and their
 * completion is left to the loader, gr_gc_complete_txn_offsets). Ownership is taken under gc->mu
 * only once no marker came in since the log end was last looked at. Returns false if reading
 * failed (the partition is then released). */
static bool load_partition(struct gr_group_coordinator *gc, int32_t p, int32_t epoch, int64_t start, int64_t end) {
    int64_t t0 = gr_mono_ms();
    int64_t off = start;
    bool ok;
    for (;;) {
        ok = load_range(gc, p, &off, end);
        if (!ok) break;
        int32_t now_epoch = -1;
        int64_t now_end = 0;
        if (!gc->cfg.storage.leader_info(gc->cfg.storage.ctx, p, &now_epoch, NULL, &now_end) || now_epoch != epoch) {
            ok = false; /* leadership moved on: the next poll unloads or reloads */
            break;
        }
        if (now_end > end) { /* the log grew while loading */
            end = now_end;
            continue;
        }
        pthread_mutex_lock(&gc->mu); /* held from this check to taking ownership below */
        if (!gc->parts[p].marker_during_load) break;
        gc->parts[p].marker_during_load = false;
        pthread_mutex_unlock(&gc->mu);
    }
    if (!ok) pthread_mutex_lock(&gc->mu);
    struct dq q;
    gc_dq_init(&q);
    struct part *pt = &gc->parts[p];
    int ngroups = 0;
    if (ok && gc->active) {
        for (int b = 0; b < NBUCKETS; b++)
            for (struct group *g = gc->buckets[b]; g; g = g->next) {
                if (g->partition != p) continue;
                ngroups++;
                for (struct member *m = g->members; m; m = m->next) gc_schedule_hb(gc, m, m->session_timeout);
            }
        pt->state = PART_OWNED;
        pt->epoch = epoch;
    } else {
        gc_unload_locked(gc, p, &q);
        pt->state = PART_NONE;
    }
    pt->marker_during_load = false;
    pthread_mutex_unlock(&gc->mu);
    gc_dq_flush(&q);
    if (ok)
        gr_info(LOGGER, "Finished loading offsets and group metadata from %s-%d (leader epoch %d, %d groups, "
                        "offsets %" PRId64 "..%" PRId64 ") in %" PRId64 " milliseconds",
                GR_OFFSETS_TOPIC, p, epoch, ngroups, start, end, gr_mono_ms() - t0);
    return ok;
}

void gr_gc_poll_partitions(struct gr_group_coordinator *gc) {
    int32_t n = gc_effective_partitions(gc);
    for (int32_t p = 0; p < n; p++) {
        int32_t epoch = -1;
        int64_t start = 0, end = 0;
        bool leader = gc->cfg.storage.leader_info(gc->cfg.storage.ctx, p, &epoch, &start, &end);
        struct dq q;
        gc_dq_init(&q);
        pthread_mutex_lock(&gc->mu);
        if (!gc->active) {
            pthread_mutex_unlock(&gc->mu);
            return;
        }
        gc_ensure_parts_locked(gc, p + 1);
        struct part *pt = &gc->parts[p];
        if (pt->state == PART_OWNED && (!leader || pt->epoch != epoch)) {
            gc_unload_locked(gc, p, &q);
            pt->state = PART_NONE;
        }
        bool load = leader && pt->state == PART_NONE;
        if (load) {
            pt->state = PART_LOADING;
            pt->epoch = epoch;
            gr_debug(LOGGER, "Elected as the group coordinator for partition %d in epoch %d; loading", p, epoch);
        }
        pthread_mutex_unlock(&gc->mu);
        gc_dq_flush(&q);
        if (load) load_partition(gc, p, epoch, start, end);
    }
}
