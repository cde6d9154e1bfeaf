/* Kafka's GroupMetadataManager.loadGroupsAndOffsets on its single-thread scheduler, and the
 * partition bookkeeping around it (loadingPartitions, ownedPartitions, onElection /
 * onResignation): which __consumer_offsets partitions this coordinator is loading or owns, at
 * which leader epoch, and the loader thread that reads a newly led partition's log back into
 * groups and offsets.
 *
 * Why a thread of its own rather than the coordinator's thread (group_coordinator.c): that thread
 * fires the heartbeat, join and initial-delay timers; a long load there stalled every group of the
 * broker. As Kafka's group-metadata-manager scheduler, one thread loads one partition at a time
 * (loads of one partition stay in order, and the transactional offsets a load rebuilds, which
 * txn_offsets.h keys by partition, are never rebuilt twice at once); meanwhile only the groups of
 * the partitions still loading answer COORDINATOR_LOAD_IN_PROGRESS (check_locked in
 * group_coordinator.c). A load builds its groups in a private table without the coordinator's
 * lock and publishes them in one step (group_internal.h rule 5), as Kafka's loader fills its
 * loadedGroups / loadedOffsets maps and adds the groups at the end.
 *
 * Unload during a load (leadership lost through LeaderAndIsr or StopReplica, seen by the poll),
 * a new leader term while a load runs (leadership lost and regained between two polls), and the
 * shutdown cancel the load (load_id); it notices
 * before its next read and at its end and discards what it read. A load whose read fails gives
 * the partition up and the poll schedules it again a second later (Kafka 2.7 logs the error
 * and marks the partition owned with nothing loaded, so its consumers would fall back to
 * auto.offset.reset; Gregor keeps answering COORDINATOR_LOAD_IN_PROGRESS until a load succeeds).
 *
 * Test hook: GREGOR_TEST_GROUP_LOAD_PAUSE=<path>: while the file <path> exists, every load waits
 * after each chunk it read (before the next read, and before taking ownership), so tests can hold
 * a partition in loading deterministically. It never waits past a cancel or the shutdown.
 *
 * Locking: group_internal.h rules 1, 2, 4, 5. */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "coordinator/coord_records.h"
#include "coordinator/group_internal.h"
#include "coordinator/group_offsets.h"
#include "coordinator/txn_offsets.h"
#include "storage/batch.h"
#include "storage/producer_state.h"

#define LOAD_READ_BYTES (1 << 20)
#define LOAD_RETRY_MS 1000

/* Applies one record of partition p read back from the log to the load's table. */
static void apply_record(struct gr_group_coordinator *gc, struct gc_table *t, int32_t p, int64_t base_offset,
                         const struct gr_batch_rec_view *rec) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct gr_go_key key;
    if (rec->KeyLength < 0 || gr_go_decode_key(rec->Key, (size_t)rec->KeyLength, &a, &key) != 0) {
        gr_warn(LOGGER, "Skipping a record at offset %" PRId64 " of %s-%d with an unreadable key", rec->Offset,
                GR_OFFSETS_TOPIC, p);
        goto out;
    }
    struct group *g = gc_table_find(t, key.group);
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
        if (!g) gc_table_add(t, g = gc_group_new(gc, key.group, p));
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
            if (g->n_offsets == 0) gc_table_remove(t, g);
        }
        goto out;
    }
    struct gr_go_group_value v;
    if (gr_go_decode_group_value(rec->Value, (size_t)rec->ValueLength, &a, &v) != 0) {
        gr_warn(LOGGER, "Skipping an unreadable group metadata value at offset %" PRId64 " of %s-%d", rec->Offset,
                GR_OFFSETS_TOPIC, p);
        goto out;
    }
    if (!g) gc_table_add(t, g = gc_group_new(gc, key.group, p));
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

/* A batch whose records cannot be read (it does not decompress, or is malformed) is skipped,
 * as a corrupt record is; the rest of the partition still loads. */
static void warn_skipped_batch(int32_t p, const struct gr_batch_info *info) {
    gr_warn(LOGGER, "Skipping an unreadable batch (codec %d) at offset %" PRId64 " of %s-%d",
            gr_batch_info_compression(info), info->BaseOffset, GR_OFFSETS_TOPIC, p);
}

/* A transactional batch met while loading (txn_offsets.h): offset records wait for their
 * marker; a COMMIT marker applies the producer's pending offsets of this partition, an ABORT
 * drops them. */
static void load_txn_batch(struct gr_group_coordinator *gc, struct gc_table *t, int32_t p,
                           const struct gr_batch_info *info, const uint8_t *batch) {
    if (info->Attributes & GR_BATCH_ATTR_CONTROL) {
        int16_t type = -1;
        int32_t ce;
        if (gr_pstate_parse_marker(batch, info->size, &type, &ce) != 0) return;
        struct gr_txn_offset *l = gr_txn_offsets_take(info->ProducerId, p);
        for (struct gr_txn_offset *o = l; o && type == GR_CONTROL_COMMIT; o = o->next) {
            struct group *g = gc_table_find(t, o->group);
            if (!g) gc_table_add(t, g = gc_group_new(gc, o->group, p));
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

/* Applies every record of the batches in buf to the load's table (no lock: rule 5). */
static void apply_batches(struct gr_group_coordinator *gc, struct gc_table *t, int32_t p, const uint8_t *buf,
                          size_t len) {
    struct gr_batch_iter it;
    struct gr_batch_info info;
    const uint8_t *batch;
    gr_batch_iter_init(&it, buf, len);
    while (gr_batch_iter_next(&it, &info, &batch) == 1) {
        if (info.Attributes & GR_BATCH_ATTR_TRANSACTIONAL) { /* TxnOffsetCommit batches and markers */
            load_txn_batch(gc, t, p, &info, batch);
            continue;
        }
        if (info.Attributes & GR_BATCH_ATTR_CONTROL) continue;
        /* compressed or not (Kafka's loader decompresses): a compression.type other than
         * "producer" on __consumer_offsets stores our own writes compressed */
        struct gr_coord_records cr;
        struct gr_batch_rec_view rec;
        if (gr_coord_records_init(&cr, batch, &info) == 0)
            while (gr_batch_rec_iter_next(&cr.it, &rec) == 1) apply_record(gc, t, p, info.BaseOffset, &rec);
        else
            warn_skipped_batch(p, &info);
        gr_coord_records_release(&cr);
    }
}

/* ---- one load ---- */

static bool load_current_locked(struct gr_group_coordinator *gc, int32_t p, uint64_t id) {
    return gc->active && gc->parts[p].state == PART_LOADING && gc->parts[p].load_id == id;
}

static bool load_current(struct gr_group_coordinator *gc, int32_t p, uint64_t id) {
    pthread_mutex_lock(&gc->mu);
    bool cur = load_current_locked(gc, p, id);
    pthread_mutex_unlock(&gc->mu);
    return cur;
}

/* The test hook (see the top): waits while the pause file exists and the load is current. */
static void test_pause(struct gr_group_coordinator *gc, int32_t p, uint64_t id) {
    const char *path = getenv("GREGOR_TEST_GROUP_LOAD_PAUSE");
    if (!path || !path[0] || access(path, F_OK) != 0) return;
    gr_warn(LOGGER, "GREGOR_TEST_GROUP_LOAD_PAUSE: loading of %s-%d paused while %s exists", GR_OFFSETS_TOPIC, p,
            path);
    for (;;) {
        pthread_mutex_lock(&gc->mu);
        bool cur = load_current_locked(gc, p, id);
        if (cur) {
            struct timespec ts = gr_timespec_after_ms(CLOCK_MONOTONIC, 20);
            pthread_cond_timedwait(&gc->load_cond, &gc->mu, &ts);
        }
        pthread_mutex_unlock(&gc->mu);
        if (!cur || access(path, F_OK) != 0) break;
    }
    gr_warn(LOGGER, "GREGOR_TEST_GROUP_LOAD_PAUSE: loading of %s-%d resumed", GR_OFFSETS_TOPIC, p);
}

enum { LOAD_OK, LOAD_STALE, LOAD_FAILED };

/* Reads [*off, end) of partition p into t; *off is where reading stopped. */
static int load_range(struct gr_group_coordinator *gc, struct gc_table *t, int32_t p, uint64_t id, int64_t *off,
                      int64_t end) {
    while (*off < end) {
        struct gr_plog_read_result res;
        memset(&res, 0, sizeof res);
        int16_t e = gc->cfg.storage.read(gc->cfg.storage.ctx, p, *off, LOAD_READ_BYTES, &res);
        if (e != GR_KERR_NONE) {
            gr_warn(LOGGER, "Cannot load %s-%d at offset %" PRId64 ": %s; retrying in %d ms", GR_OFFSETS_TOPIC, p,
                    *off, gr_kerr_name(e), LOAD_RETRY_MS);
            free(res.data);
            return LOAD_FAILED;
        }
        if (res.len > 0) apply_batches(gc, t, p, res.data, res.len);
        free(res.data);
        if (res.len == 0 || res.next_offset <= *off) break;
        *off = res.next_offset;
        test_pause(gc, p, id);
        if (!load_current(gc, p, id)) return LOAD_STALE;
    }
    return LOAD_OK;
}

/* Moves every group of t into gc->groups (Kafka's loadGroup + onGroupLoaded: a group already
 * cached is kept) and expects its members' heartbeats. Returns the number of groups. */
static int publish_locked(struct gr_group_coordinator *gc, struct gc_table *t) {
    int n = 0;
    for (int b = 0; b < NBUCKETS; b++)
        while (t->buckets[b]) {
            struct group *g = t->buckets[b];
            t->buckets[b] = g->next;
            t->n_groups--;
            if (gc_find_group_locked(gc, g->id)) {
                gr_debug(LOGGER, "Group %s loaded from the log is already cached; keeping the cached one", g->id);
                gc_group_free(g);
                continue;
            }
            gc_table_add(&gc->groups, g);
            for (struct member *m = g->members; m; m = m->next) gc_schedule_hb(gc, m, m->session_timeout);
            n++;
        }
    return n;
}

/* Loads partition p in leader term term (at leader epoch epoch) as load id (Kafka's doLoadGroupsAndOffsets +
 * onGroupLoaded). As Kafka's loader, it reads up to the log end as it moves, not only to the end
 * seen when loading began: transaction markers are written while the partition loads (and their
 * completion is left to the loader, gr_gc_complete_txn_offsets). Ownership is taken under gc->mu
 * only once no marker came in since the log end was last looked at, and only while the load is
 * current (rule 5). */
static void load_partition(struct gr_group_coordinator *gc, int32_t p, int32_t term, int32_t epoch, uint64_t id,
                           int64_t queued_ms) {
    int64_t t0 = gr_mono_ms();
    struct gc_table *t = gr_calloc(1, sizeof *t);
    /* what a cancelled load of p left pending: this load rebuilds it from the log */
    gr_txn_offsets_drop_partition(p);
    int32_t now_term = -1;
    int64_t start = 0, off = 0, end = 0;
    int r = LOAD_STALE;
    bool locked = false;
    if (gc->cfg.storage.leader_info(gc->cfg.storage.ctx, p, NULL, &now_term, &start, &end) && now_term == term) {
        off = start;
        for (;;) {
            r = load_range(gc, t, p, id, &off, end);
            if (r != LOAD_OK) break;
            int64_t now_end = 0;
            if (!gc->cfg.storage.leader_info(gc->cfg.storage.ctx, p, NULL, &now_term, NULL, &now_end) ||
                now_term != term) {
                r = LOAD_STALE; /* leadership moved on: the next poll unloads or reloads */
                break;
            }
            if (now_end > end) { /* the log grew while loading */
                end = now_end;
                continue;
            }
            pthread_mutex_lock(&gc->mu); /* held from this check to taking ownership below */
            locked = true;
            if (!load_current_locked(gc, p, id) || !gc->parts[p].marker_during_load) break;
            gc->parts[p].marker_during_load = false;
            pthread_mutex_unlock(&gc->mu);
            locked = false;
        }
    }
    if (!locked) pthread_mutex_lock(&gc->mu);
    struct part *pt = &gc->parts[p];
    bool cur = load_current_locked(gc, p, id);
    bool owned = cur && r == LOAD_OK;
    int ngroups = 0;
    if (owned) {
        ngroups = publish_locked(gc, t);
        pt->state = PART_OWNED;
    } else {
        if (cur) { /* the read failed, or the leadership moved before the poll saw it */
            pt->state = PART_NONE;
            if (r == LOAD_FAILED) pt->retry_at = now_ms(gc) + LOAD_RETRY_MS;
        }
        /* nothing of p is owned, and only this thread loads (rule 4): drop what this load rebuilt */
        gr_txn_offsets_drop_partition(p);
    }
    if (cur) pt->marker_during_load = false;
    pthread_mutex_unlock(&gc->mu);
    gc_table_clear(t);
    free(t);
    int64_t t1 = gr_mono_ms();
    if (owned)
        gr_info(LOGGER, "Finished loading offsets and group metadata from %s-%d (leader epoch %d, %d groups, "
                        "offsets %" PRId64 "..%" PRId64 ") in %" PRId64 " milliseconds, of which %" PRId64
                        " milliseconds was spent in the scheduler",
                GR_OFFSETS_TOPIC, p, epoch, ngroups, start, end, t1 - queued_ms, t0 - queued_ms);
    else if (r != LOAD_FAILED)
        gr_info(LOGGER, "Discarded the load of %s-%d for leader epoch %d: unloaded, a new leader term or shutting down",
                GR_OFFSETS_TOPIC, p, epoch);
}

/* ---- the queue and the loader thread ---- */

/* Runs the next queued load, if any (gc->mu held on entry and on return, released while loading).
 * Returns false when the queue is empty. */
static bool run_next_locked(struct gr_group_coordinator *gc) {
    struct load_job *j = gc->load_head;
    if (!j) return false;
    gc->load_head = j->next;
    if (!gc->load_head) gc->load_tail = &gc->load_head;
    int32_t p = j->partition;
    int64_t queued_ms = j->queued_ms;
    free(j);
    struct part *pt = &gc->parts[p];
    pt->queued = false;
    if (pt->state != PART_LOADING || !gc->active) return true; /* cancelled before it started */
    int32_t epoch = pt->epoch;
    int32_t term = pt->term;
    uint64_t id = pt->load_id;
    pthread_mutex_unlock(&gc->mu);
    load_partition(gc, p, term, epoch, id, queued_ms);
    pthread_mutex_lock(&gc->mu);
    return true;
}

static void *loader_thread(void *arg) {
    struct gr_group_coordinator *gc = arg;
    pthread_setname_np(pthread_self(), "group-loader");
    pthread_mutex_lock(&gc->mu);
    while (!gc->stopping)
        if (!run_next_locked(gc)) pthread_cond_wait(&gc->load_cond, &gc->mu);
    pthread_mutex_unlock(&gc->mu);
    return NULL;
}

bool gc_loader_start(struct gr_group_coordinator *gc) {
    int rc = pthread_create(&gc->loader, NULL, loader_thread, gc);
    if (rc != 0) {
        gr_error(LOGGER, "Cannot start the group metadata loader thread: %s", strerror(rc));
        return false;
    }
    gc->loader_started = true;
    return true;
}

void gc_loader_stop(struct gr_group_coordinator *gc) {
    pthread_mutex_lock(&gc->mu);
    pthread_cond_broadcast(&gc->load_cond);
    pthread_mutex_unlock(&gc->mu);
    if (gc->loader_started) {
        pthread_join(gc->loader, NULL);
        gc->loader_started = false;
    }
    pthread_mutex_lock(&gc->mu);
    while (gc->load_head) {
        struct load_job *j = gc->load_head;
        gc->load_head = j->next;
        if (j->partition < gc->n_parts_cap) gc->parts[j->partition].queued = false;
        free(j);
    }
    gc->load_tail = &gc->load_head;
    pthread_mutex_unlock(&gc->mu);
}

/* Kafka's scheduleLoadGroupAndOffsets: p becomes loading in leader term term; queued unless it
 * already is (a load of p running now sees its id change and discards what it read). */
static void schedule_load_locked(struct gr_group_coordinator *gc, int32_t p, int32_t term, int32_t epoch) {
    struct part *pt = &gc->parts[p];
    pt->state = PART_LOADING;
    pt->term = term;
    pt->epoch = epoch;
    pt->load_id++;
    gr_info(LOGGER, "Scheduling loading of offsets and group metadata from %s-%d for leader epoch %d",
            GR_OFFSETS_TOPIC, p, epoch);
    if (!pt->queued) {
        struct load_job *j = gr_calloc(1, sizeof *j);
        j->partition = p;
        j->queued_ms = gr_mono_ms();
        *gc->load_tail = j;
        gc->load_tail = &j->next;
        pt->queued = true;
    }
    pthread_cond_signal(&gc->load_cond);
}

void gr_gc_poll_partitions(struct gr_group_coordinator *gc) {
    int32_t n = gc_effective_partitions(gc);
    for (int32_t p = 0; p < n; p++) {
        int32_t epoch = -1;
        int32_t term = -1;
        bool leader = gc->cfg.storage.leader_info(gc->cfg.storage.ctx, p, &epoch, &term, NULL, NULL);
        struct dq q;
        gc_dq_init(&q);
        pthread_mutex_lock(&gc->mu);
        if (!gc->active) {
            pthread_mutex_unlock(&gc->mu);
            return;
        }
        gc_ensure_parts_locked(gc, p + 1);
        struct part *pt = &gc->parts[p];
        /* Kafka's onResignation: leadership lost, or lost and regained since (a new leader term).
         * A new leader epoch of the same term (the controller changed the ISR) keeps the groups
         * and a running load, as Kafka 2.7 calls onElection only when makeLeader made this broker
         * a new leader. */
        if (pt->state != PART_NONE && (!leader || pt->term != term)) {
            if (pt->state == PART_OWNED) {
                gc_unload_locked(gc, p, &q);
            } else {
                pt->load_id++; /* cancels the load (rule 5) */
                gr_info(LOGGER, "Cancelled loading %s-%d at leader epoch %d: %s", GR_OFFSETS_TOPIC, p, pt->epoch,
                        leader ? "leadership lost and regained" : "no longer its leader");
            }
            pt->state = PART_NONE;
        } else if (pt->state != PART_NONE && pt->epoch != epoch) {
            gr_info(LOGGER, "%s-%d: leader epoch %d -> %d, still its leader; groups kept", GR_OFFSETS_TOPIC, p,
                     pt->epoch, epoch);
            pt->epoch = epoch;
        }
        if (leader && pt->state == PART_NONE && now_ms(gc) >= pt->retry_at) /* Kafka's onElection */
            schedule_load_locked(gc, p, term, epoch);
        pthread_mutex_unlock(&gc->mu);
        gc_dq_flush(&q);
    }
    if (gc->cfg.background_thread) return;
    /* no threads (tests): load here, unless this poll runs inside a load (a storage hook) */
    pthread_mutex_lock(&gc->mu);
    if (!gc->loading_inline) {
        gc->loading_inline = true;
        while (run_next_locked(gc)) {
        }
        gc->loading_inline = false;
    }
    pthread_mutex_unlock(&gc->mu);
}
