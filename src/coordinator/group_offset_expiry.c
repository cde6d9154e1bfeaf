/* Offset retention (KIP-211) as Kafka 2.7's GroupMetadata.removeExpiredOffsets and
 * GroupMetadataManager.cleanupGroupMetadata do it, run every offsets.retention.check.interval.ms
 * by gr_gc_tick:
 *
 *   - an offset committed with an explicit retention (OffsetCommit v2-v4, record v1 with an
 *     expire timestamp) expires once now >= its expire timestamp;
 *   - otherwise, by the group's kind:
 *       * a group with a protocol type that is Empty: every offset expires once
 *         offsets.retention.ms has passed since the group became Empty;
 *       * a "consumer" group with members and a chosen protocol: offsets of topics no member
 *         subscribes to expire at commit time + retention;
 *       * a group without protocol type (offsets only, "simple consumer"): each offset expires
 *         at its commit time + retention;
 *       * any other group: nothing expires;
 *   - while an OffsetCommit of the group is being written nothing of it expires (Kafka skips
 *     the partitions with a pending commit; Gregor does not track them per partition);
 *   - expired offsets get tombstones in __consumer_offsets (acks=1: a lost tombstone is written
 *     again by the next run, the offset being still expired on a new leader);
 *   - an Empty group left without offsets becomes Dead and is removed; a group metadata
 *     tombstone is written too unless its generation is 0 (a group that only stored offsets).
 *
 * Locking: under gc->mu (group_internal.h rule 1); writes are queued on a struct wq (rule 2). */
#include <stdlib.h>

#include "common/kerr.h"
#include "common/log.h"
#include "coordinator/group_internal.h"
#include "coordinator/group_offsets.h"
#include "storage/batch.h"

struct expiry_tombs {
    char *group;
    uint8_t *batch;
};

static void tombs_written(void *arg, int16_t error, int64_t base_offset) {
    (void)base_offset;
    struct expiry_tombs *t = arg;
    if (error != GR_KERR_NONE)
        gr_warn(LOGGER, "Failed to write the tombstones of expired offsets of group %s: %s", t->group,
                gr_kerr_name(error));
    free(t->group);
    free(t->batch);
    free(t);
}

enum base { BASE_NONE, BASE_EMPTY_SINCE, BASE_COMMIT, BASE_COMMIT_UNSUBSCRIBED };

static enum base expiry_base(const struct group *g) {
    bool has_type = g->protocol_type && g->protocol_type[0];
    if (has_type && g->state == ST_EMPTY) return BASE_EMPTY_SINCE;
    if (has_type && streq(g->protocol_type, "consumer") && g->protocol_name && g->members)
        return BASE_COMMIT_UNSUBSCRIBED;
    if (!has_type) return BASE_COMMIT;
    return BASE_NONE;
}

static bool offset_expired(const struct group *g, const struct offset_entry *o, enum base b, int64_t now,
                           int64_t retention) {
    if (b == BASE_NONE) return false;
    if (b == BASE_COMMIT_UNSUBSCRIBED && gc_group_subscribed_to(g, o->topic)) return false;
    if (o->expire_ts >= 0) return now >= o->expire_ts;
    int64_t base = b == BASE_EMPTY_SINCE && g->state_ts > 0 ? g->state_ts : o->commit_ts;
    return now - base >= retention;
}

bool gc_expire_group_offsets_locked(struct gr_group_coordinator *gc, struct group *g, int64_t now, struct wq *w,
                                    int *n_removed) {
    if (g->inflight > 0 || g->state == ST_DEAD) return false;
    enum base b = expiry_base(g);
    int n = g->n_offsets + 1;
    struct gr_batch_rec *recs = gr_calloc((size_t)n, sizeof *recs);
    struct gr_wbuf *keys = gr_calloc((size_t)n, sizeof *keys);
    int k = 0;
    for (int i = 0; i < g->n_offsets;) {
        struct offset_entry *o = &g->offsets[i];
        if (!offset_expired(g, o, b, now, gc->cfg.offsets_retention_ms)) {
            i++;
            continue;
        }
        gr_wbuf_init(&keys[k]);
        gr_go_encode_offset_key(&keys[k], g->id, o->topic, o->partition);
        recs[k] = (struct gr_batch_rec){.key = keys[k].p, .key_len = (int32_t)keys[k].len, .value_len = -1,
                                        .timestamp = now};
        k++;
        gc_remove_offset(g, o->topic, o->partition); /* g->offsets[i] now holds the next entry */
    }
    *n_removed += k;
    bool dead = g->state == ST_EMPTY && g->n_offsets == 0 && !g->members && !g->pending;
    if (dead) {
        gr_info(LOGGER, "Group %s transitioned to Dead in generation %d", g->id, g->generation);
        if (g->generation > 0) {
            gr_wbuf_init(&keys[k]);
            gr_go_encode_group_key(&keys[k], g->id);
            recs[k] = (struct gr_batch_rec){.key = keys[k].p, .key_len = (int32_t)keys[k].len, .value_len = -1,
                                            .timestamp = now};
            k++;
        }
    }
    if (k > 0) {
        struct expiry_tombs *t = gr_calloc(1, sizeof *t);
        size_t len;
        t->group = gr_strdup(g->id);
        t->batch = gr_batch_build(recs, k, NULL, &len);
        gc_wq_add(w, g->partition, t->batch, len, 1, tombs_written, t);
    }
    for (int i = 0; i < k; i++) gr_wbuf_free(&keys[i]);
    free(keys);
    free(recs);
    return dead;
}
