/* Partition replication state: the pure HW/ISR rules (see replica_state.h). */
#include "replication/replica_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/util.h"

static void point_inline(struct gr_replica_state *st) {
    st->cap = GR_RS_INLINE;
    st->rcap = GR_RS_INLINE_REMOTES;
    st->remotes = st->inl.remotes;
    st->replicas = st->inl.ids;
    st->isr = st->inl.ids + GR_RS_INLINE;
    st->proposed = st->inl.ids + 2 * GR_RS_INLINE;
    st->heap = NULL;
}

void gr_rs_init(struct gr_replica_state *st, int32_t local_id) {
    memset(st, 0, sizeof *st);
    point_inline(st);
    st->local_id = local_id;
    st->leader_id = -1;
    st->leader_epoch = -1;
    st->zk_version = -1;
    st->controller_epoch = -1;
    st->leader_epoch_start_offset = -1;
    st->elected_epoch = -1;
}

void gr_rs_destroy(struct gr_replica_state *st) {
    free(st->heap);
    st->heap = NULL;
    st->cap = st->rcap = 0;
    st->nreplicas = st->nisr = st->nproposed = st->nremotes = 0;
}

/* Grows the arrays to hold n ids / nrem remote states (<= GR_RS_MAX_REPLICAS + 1), keeping
 * their contents: one heap block for all four, n = max(n, nrem) entries each. */
static void reserve(struct gr_replica_state *st, int n, int nrem) {
    if (n <= st->cap && nrem <= st->rcap) return;
    n = GR_MAX(GR_MAX(n, nrem), st->cap);
    size_t cap = (size_t)n;
    char *blk = gr_malloc(cap * (sizeof(struct gr_rs_remote) + 3 * sizeof(int32_t)));
    struct gr_rs_remote *remotes = (struct gr_rs_remote *)blk;
    int32_t *ids = (int32_t *)(blk + cap * sizeof(struct gr_rs_remote));
    memcpy(remotes, st->remotes, (size_t)st->nremotes * sizeof *remotes);
    memcpy(ids, st->replicas, (size_t)st->nreplicas * sizeof *ids);
    memcpy(ids + cap, st->isr, (size_t)st->nisr * sizeof *ids);
    memcpy(ids + 2 * cap, st->proposed, (size_t)st->nproposed * sizeof *ids);
    free(st->heap);
    st->heap = blk;
    st->cap = st->rcap = n;
    st->remotes = remotes;
    st->replicas = ids;
    st->isr = ids + cap;
    st->proposed = ids + 2 * cap;
}

static bool contains(const int32_t *ids, int n, int32_t id) {
    for (int i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

bool gr_rs_is_leader(const struct gr_replica_state *st) { return st->leader_id == st->local_id; }

bool gr_rs_in_isr(const struct gr_replica_state *st, int32_t id) { return contains(st->isr, st->nisr, id); }

bool gr_rs_in_maximal_isr(const struct gr_replica_state *st, int32_t id) {
    if (contains(st->isr, st->nisr, id)) return true;
    return st->isr_state == GR_ISR_PENDING_EXPAND && contains(st->proposed, st->nproposed, id);
}

int gr_rs_maximal_isr_size(const struct gr_replica_state *st) {
    return st->isr_state == GR_ISR_PENDING_EXPAND ? st->nproposed : st->nisr;
}

struct gr_rs_remote *gr_rs_remote(struct gr_replica_state *st, int32_t id) {
    for (int i = 0; i < st->nremotes; i++)
        if (st->remotes[i].id == id) return &st->remotes[i];
    return NULL;
}

static void remote_reset(struct gr_rs_remote *r, int32_t id) {
    memset(r, 0, sizeof *r);
    r->id = id;
    r->leo = -1;
    r->log_start_offset = -1;
    r->last_fetch_leader_leo = -1;
}

int gr_rs_set_assignment(struct gr_replica_state *st, int32_t leader, int32_t leader_epoch,
                         int32_t zk_version, int32_t controller_epoch, const int32_t *replicas,
                         int nreplicas, const int32_t *isr, int nisr) {
    if (nreplicas < 0 || nreplicas > GR_RS_MAX_REPLICAS || nisr < 0 || nisr > GR_RS_MAX_REPLICAS)
        return -E2BIG;
    int nrem = 0; /* distinct replicas other than this broker */
    for (int i = 0; i < nreplicas; i++)
        if (replicas[i] != st->local_id && !contains(replicas, i, replicas[i])) nrem++;
    reserve(st, GR_MAX(nreplicas, nisr), nrem);
    struct gr_rs_remote old[GR_RS_MAX_REPLICAS];
    int nold = st->nremotes;
    memcpy(old, st->remotes, (size_t)nold * sizeof *old);
    st->nremotes = 0;
    for (int i = 0; i < nreplicas; i++) {
        int32_t id = replicas[i];
        if (id == st->local_id || contains(replicas, i, id)) continue; /* self, duplicates */
        struct gr_rs_remote *r = &st->remotes[st->nremotes++];
        remote_reset(r, id);
        for (int j = 0; j < nold; j++)
            if (old[j].id == id) *r = old[j];
    }
    st->nreplicas = nreplicas;
    if (nreplicas > 0) memcpy(st->replicas, replicas, (size_t)nreplicas * sizeof *replicas);
    st->nisr = nisr;
    if (nisr > 0) memcpy(st->isr, isr, (size_t)nisr * sizeof *isr);
    st->isr_state = GR_ISR_COMMITTED;
    st->nproposed = 0;
    st->leader_id = leader;
    st->leader_epoch = leader_epoch;
    st->zk_version = zk_version;
    st->controller_epoch = controller_epoch;
    if (leader != st->local_id) {
        st->leader_epoch_start_offset = -1;
        st->elected_epoch = -1;
    }
    return 0;
}

void gr_rs_become_leader(struct gr_replica_state *st, int64_t leo, int64_t now_ms, bool was_leader) {
    st->leader_epoch_start_offset = leo;
    if (!was_leader || st->elected_epoch < 0) st->elected_epoch = st->leader_epoch;
    for (int i = 0; i < st->nremotes; i++) {
        struct gr_rs_remote *r = &st->remotes[i];
        r->last_fetch_leader_leo = leo;
        r->last_fetch_ms = now_ms;
        r->last_caught_up_ms = gr_rs_in_isr(st, r->id) ? now_ms : 0;
        if (!was_leader) {
            r->leo = -1;
            r->log_start_offset = -1;
        }
    }
}

bool gr_rs_update_follower(struct gr_replica_state *st, int32_t id, int64_t fetch_offset,
                           int64_t log_start_offset, int64_t now_ms, int64_t leader_leo) {
    struct gr_rs_remote *r = gr_rs_remote(st, id);
    if (!r) return false;
    if (fetch_offset >= leader_leo) {
        if (now_ms > r->last_caught_up_ms) r->last_caught_up_ms = now_ms;
    } else if (fetch_offset >= r->last_fetch_leader_leo) {
        if (r->last_fetch_ms > r->last_caught_up_ms) r->last_caught_up_ms = r->last_fetch_ms;
    }
    r->leo = fetch_offset;
    r->log_start_offset = log_start_offset;
    r->last_fetch_leader_leo = leader_leo;
    r->last_fetch_ms = now_ms;
    return true;
}

int64_t gr_rs_hw_candidate(const struct gr_replica_state *st, int64_t leader_leo, int64_t now_ms,
                           int64_t lag_max_ms) {
    int64_t hw = leader_leo;
    for (int i = 0; i < st->nremotes; i++) {
        const struct gr_rs_remote *r = &st->remotes[i];
        if (r->leo < hw &&
            (now_ms - r->last_caught_up_ms <= lag_max_ms || gr_rs_in_maximal_isr(st, r->id)))
            hw = r->leo;
    }
    return hw;
}

bool gr_rs_needs_expand(const struct gr_replica_state *st, int32_t id, int64_t hw) {
    if (st->isr_state != GR_ISR_COMMITTED || gr_rs_in_isr(st, id)) return false;
    if (!contains(st->replicas, st->nreplicas, id)) return false;
    const struct gr_rs_remote *r = NULL;
    for (int i = 0; i < st->nremotes; i++)
        if (st->remotes[i].id == id) r = &st->remotes[i];
    if (!r || st->leader_epoch_start_offset < 0) return false;
    return r->leo >= hw && r->leo >= st->leader_epoch_start_offset;
}

int gr_rs_out_of_sync(const struct gr_replica_state *st, int64_t leader_leo, int64_t now_ms,
                      int64_t lag_max_ms, int32_t *out) {
    if (st->isr_state != GR_ISR_COMMITTED) return 0;
    int n = 0;
    for (int i = 0; i < st->nisr; i++) {
        int32_t id = st->isr[i];
        if (id == st->local_id) continue;
        const struct gr_rs_remote *r = NULL;
        for (int j = 0; j < st->nremotes; j++)
            if (st->remotes[j].id == id) r = &st->remotes[j];
        if (!r) continue; /* in the ISR but not assigned: left for the controller */
        if (r->leo != leader_leo && now_ms - r->last_caught_up_ms > lag_max_ms) out[n++] = id;
    }
    return n;
}

bool gr_rs_propose_expand(struct gr_replica_state *st, int32_t id) {
    if (st->isr_state != GR_ISR_COMMITTED || gr_rs_in_isr(st, id) || st->nisr >= GR_RS_MAX_REPLICAS)
        return false;
    reserve(st, st->nisr + 1, 0);
    memcpy(st->proposed, st->isr, (size_t)st->nisr * sizeof *st->isr);
    st->nproposed = st->nisr;
    st->proposed[st->nproposed++] = id;
    st->isr_state = GR_ISR_PENDING_EXPAND;
    return true;
}

bool gr_rs_propose_shrink(struct gr_replica_state *st, const int32_t *ids, int n) {
    if (st->isr_state != GR_ISR_COMMITTED) return false;
    st->nproposed = 0;
    for (int i = 0; i < st->nisr; i++)
        if (!contains(ids, n, st->isr[i])) st->proposed[st->nproposed++] = st->isr[i];
    if (st->nproposed == st->nisr) return false;
    st->isr_state = GR_ISR_PENDING_SHRINK;
    return true;
}

int gr_rs_apply_alter_partition(struct gr_replica_state *st, int16_t error, int32_t leader_epoch,
                                const int32_t *isr, int nisr, int32_t zk_version) {
    if (st->isr_state == GR_ISR_COMMITTED) return 0; /* superseded (e.g. by LeaderAndIsr) */
    if (error != GR_KERR_NONE) {
        /* Kafka's Partition.handleAlterPartitionError. The controller says the proposal was not
         * applied and our partition epoch is right: back to the committed ISR, so that a later
         * fetch can propose again from fresh state. */
        if (error == GR_KERR_INELIGIBLE_REPLICA || error == GR_KERR_OPERATION_NOT_ATTEMPTED) {
            /* only the refused proposal itself (Kafka: partitionState == proposedIsrState): a
             * later one (after a LeaderAndIsr) may be applied by the controller, and dropping it
             * here would leave this leader with a smaller ISR than ZooKeeper's */
            if (leader_epoch != st->leader_epoch || zk_version != st->zk_version || nisr != st->nproposed ||
                (nisr > 0 && memcmp(isr, st->proposed, (size_t)nisr * sizeof *isr) != 0))
                return 0;
            st->isr_state = GR_ISR_COMMITTED;
            st->nproposed = 0;
            return 0;
        }
        /* our state is out of date: stay pending until the next LeaderAndIsr */
        if (error == GR_KERR_UNKNOWN_TOPIC_OR_PARTITION || error == GR_KERR_UNKNOWN_TOPIC_ID ||
            error == GR_KERR_FENCED_LEADER_EPOCH || error == GR_KERR_INVALID_UPDATE_VERSION ||
            error == GR_KERR_INVALID_REQUEST)
            return 0;
        return -1;
    }
    if (leader_epoch != st->leader_epoch || zk_version < st->zk_version) return 0;
    if (nisr < 0 || nisr > GR_RS_MAX_REPLICAS) return 0;
    reserve(st, nisr, 0);
    st->nisr = nisr;
    if (nisr > 0) memcpy(st->isr, isr, (size_t)nisr * sizeof *isr);
    st->zk_version = zk_version;
    st->isr_state = GR_ISR_COMMITTED;
    st->nproposed = 0;
    return 1;
}

char *gr_rs_fmt_ids(char *buf, int len, const int32_t *ids, int n) {
    int pos = 0;
    buf[0] = 0;
    for (int i = 0; i < n && pos < len; i++)
        pos += snprintf(buf + pos, (size_t)(len - pos), "%s%d", i ? "," : "", ids[i]);
    return buf;
}
