/* Fetch from follower (KIP-392): see replica_selector.h. */
#include "replication/replica_selector.h"

#include <string.h>

#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "common/config.h"
#include "common/util.h"
#include "replication/replica_internal.h"
#include "replication/replica_state.h"

/* ReplicaView.comparator: log end offset, then (reversed) time since last caught up. */
static bool better(const struct gr_replica_view *a, const struct gr_replica_view *b) {
    if (a->log_end_offset != b->log_end_offset) return a->log_end_offset > b->log_end_offset;
    return a->time_since_caught_up_ms < b->time_since_caught_up_ms;
}

int32_t gr_rack_aware_select(const char *client_rack, const struct gr_replica_view *leader,
                             const struct gr_replica_view *replicas, int n) {
    if (!client_rack || !client_rack[0]) return leader->id;
    if (leader->rack && strcmp(leader->rack, client_rack) == 0) return leader->id;
    const struct gr_replica_view *best = NULL;
    for (int i = 0; i < n; i++) {
        const struct gr_replica_view *r = &replicas[i];
        if (!r->rack || strcmp(r->rack, client_rack) != 0) continue;
        if (!best || better(r, best)) best = r;
    }
    return best ? best->id : leader->id;
}

struct endpoint_view {
    bool present;
    const char *rack;
};

/* Looks up broker id's rack and whether it has an endpoint on listener (under the mdc lock). */
static struct endpoint_view endpoint_of(struct gr_mdc *c, int32_t id, const char *listener) {
    struct endpoint_view v = {false, NULL};
    const struct gr_mdc_broker *b = gr_mdc_broker(c, id);
    if (b && (!listener || gr_mdc_broker_endpoint(b, listener))) {
        v.present = true;
        v.rack = b->rack;
    }
    return v;
}

int32_t gr_rm_preferred_read_replica(struct gr_replica_manager *rm, struct gr_rm_partition *p,
                                     const char *client_rack, const char *listener, int64_t fetch_offset) {
    if (!rm->cfg || !rm->cfg->replica_selector_class || !client_rack || !client_rack[0]) return -1;
    struct gr_rs_remote remotes[GR_RS_MAX_REPLICAS];
    int n = 0;
    int64_t now = gr_mono_ms();
    pthread_mutex_lock(&p->lock);
    bool leader = gr_rs_is_leader(&p->st);
    int32_t leader_id = p->st.local_id;
    for (int i = 0; leader && i < p->st.nremotes; i++) remotes[n++] = p->st.remotes[i];
    pthread_mutex_unlock(&p->lock);
    if (!leader) return -1;
    int64_t leo = gr_plog_end_offset(p->lml->log);
    struct gr_replica_view views[GR_RS_MAX_REPLICAS], lv;
    int k = 0;
    struct gr_mdc *c = rm->b->metadata;
    gr_mdc_rdlock(c);
    struct endpoint_view le = endpoint_of(c, leader_id, listener);
    lv = (struct gr_replica_view){leader_id, le.rack, leo, 0};
    for (int i = 0; i < n; i++) {
        const struct gr_rs_remote *r = &remotes[i];
        if (r->leo < 0 || r->leo < fetch_offset || r->log_start_offset > fetch_offset) continue;
        struct endpoint_view e = endpoint_of(c, r->id, listener);
        if (!e.present) continue;
        views[k++] = (struct gr_replica_view){r->id, e.rack, r->leo, GR_MAX(now - r->last_caught_up_ms, 0)};
    }
    int32_t chosen = gr_rack_aware_select(client_rack, &lv, views, k);
    gr_mdc_unlock(c);
    return chosen == leader_id ? -1 : chosen;
}
