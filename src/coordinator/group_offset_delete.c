/* OffsetDelete (KIP-496): Kafka 2.7's GroupCoordinator.handleDeleteOffsets.
 *
 *   - the coordinator checks of every group API (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
 *     COORDINATOR_NOT_AVAILABLE) are group-level errors;
 *   - an unknown or Dead group: GROUP_ID_NOT_FOUND;
 *   - an Empty group: every listed partition is eligible;
 *   - a non-empty group of protocol type "consumer": partitions of topics a member subscribes
 *     to get GROUP_SUBSCRIBED_TO_TOPIC, the others are eligible (while no protocol has been
 *     chosen yet every topic counts as subscribed, as Kafka's isSubscribedToTopic does);
 *   - a non-empty group of another protocol type: NON_EMPTY_GROUP for the whole request.
 * Eligible partitions answer NONE whether or not an offset was committed; committed ones are
 * removed from memory at once and get tombstones in __consumer_offsets (written after the
 * unlock, group_internal.h rule 2). */
#include <stdlib.h>

#include "common/kerr.h"
#include "common/log.h"
#include "coordinator/group_internal.h"
#include "coordinator/group_offsets.h"
#include "storage/batch.h"

static uint16_t be16(const uint8_t *p) {
    return (uint16_t)(p[0] << 8 | p[1]);
}
static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Does a ConsumerProtocolSubscription (int16 version, [string topic], ...) list topic?
 * Undecodable metadata counts as subscribed (the safe answer). */
static bool subscription_has(const uint8_t *m, int32_t len, const char *topic) {
    if (!m || len < 6) return true;
    uint32_t n = be32(m + 2);
    size_t off = 6, tl = strlen(topic);
    for (uint32_t i = 0; i < n; i++) {
        if (off + 2 > (size_t)len) return true;
        uint16_t sl = be16(m + off);
        off += 2;
        if (off + sl > (size_t)len) return true;
        if (sl == tl && memcmp(m + off, topic, tl) == 0) return true;
        off += sl;
    }
    return false;
}

bool gc_group_subscribed_to(const struct group *g, const char *topic) {
    if (!g->protocol_name) return true;
    for (const struct member *m = g->members; m; m = m->next) {
        const uint8_t *meta = NULL;
        int32_t mlen = 0;
        if (gc_member_protocol(m, g->protocol_name, &meta, &mlen) && subscription_has(meta, mlen, topic)) return true;
    }
    return false;
}

struct offset_tombs {
    char *group;
    uint8_t *batch;
};

static void tombs_done(void *arg, int16_t error, int64_t base_offset) {
    (void)base_offset;
    struct offset_tombs *t = arg;
    if (error != GR_KERR_NONE)
        gr_warn(LOGGER, "Failed to write the offset tombstones of group %s: %s", t->group, gr_kerr_name(error));
    free(t->group);
    free(t->batch);
    free(t);
}

/* Removes the committed offsets of the eligible parts and queues their tombstones on w. */
static void remove_offsets_locked(struct gr_group_coordinator *gc, struct group *g,
                                  struct gr_gc_offset_delete_part *parts, int n, struct wq *w) {
    struct gr_batch_rec *recs = gr_calloc((size_t)n + 1, sizeof *recs);
    struct gr_wbuf *keys = gr_calloc((size_t)n + 1, sizeof *keys);
    int k = 0;
    int64_t ts = wall_ms(gc);
    for (int i = 0; i < n; i++) {
        if (parts[i].error != GR_KERR_NONE || !gc_find_offset(g, parts[i].topic, parts[i].partition)) continue;
        gc_remove_offset(g, parts[i].topic, parts[i].partition);
        gr_wbuf_init(&keys[k]);
        gr_go_encode_offset_key(&keys[k], g->id, parts[i].topic, parts[i].partition);
        recs[k] =
            (struct gr_batch_rec){.key = keys[k].p, .key_len = (int32_t)keys[k].len, .value_len = -1, .timestamp = ts};
        k++;
    }
    if (k > 0) {
        struct offset_tombs *t = gr_calloc(1, sizeof *t);
        size_t len;
        t->group = gr_strdup(g->id);
        t->batch = gr_batch_build(recs, k, NULL, &len);
        gc_wq_add(w, g->partition, t->batch, len, 1, tombs_done, t);
        gr_info(LOGGER, "Removed %d offsets of group %s (OffsetDelete)", k, g->id);
    }
    for (int i = 0; i < k; i++) gr_wbuf_free(&keys[i]);
    free(keys);
    free(recs);
}

int16_t gr_gc_delete_offsets(struct gr_group_coordinator *gc, const char *group_id,
                             struct gr_gc_offset_delete_part *parts, int n) {
    if (!group_id) return GR_KERR_INVALID_GROUP_ID;
    int16_t e = gr_gc_coordinator_status(gc, group_id);
    if (e != GR_KERR_NONE) return e;
    struct wq w = {0};
    pthread_mutex_lock(&gc->mu);
    struct group *g = gc_find_group_locked(gc, group_id);
    if (!g || g->state == ST_DEAD) {
        e = GR_KERR_GROUP_ID_NOT_FOUND;
    } else if (g->state != ST_EMPTY && !streq(g->protocol_type, "consumer")) {
        e = GR_KERR_NON_EMPTY_GROUP;
    } else {
        for (int i = 0; i < n; i++)
            if (parts[i].error == GR_KERR_NONE && g->state != ST_EMPTY && gc_group_subscribed_to(g, parts[i].topic))
                parts[i].error = GR_KERR_GROUP_SUBSCRIBED_TO_TOPIC;
        remove_offsets_locked(gc, g, parts, n, &w);
    }
    pthread_mutex_unlock(&gc->mu);
    gc_wq_flush(gc, &w);
    return e;
}
