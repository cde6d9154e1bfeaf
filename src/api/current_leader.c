/* KIP-951 leader discovery: see current_leader.h. */
#include "api/current_leader.h"

#include <pthread.h>

#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "replication/replica_internal.h"

void gr_api_current_leader(struct gr_api_req *req, const char *topic, int32_t partition, int32_t *leader,
                           int32_t *epoch) {
    struct gr_broker *b = req->broker;
    *leader = -1;
    *epoch = -1;
    if (!topic) return;
    struct gr_rm_partition *p = b && b->replica_manager ? gr_rm_get_partition(b->replica_manager, topic, partition) : NULL;
    if (p) {
        pthread_mutex_lock(&p->lock);
        *leader = p->st.leader_id;
        *epoch = p->st.leader_epoch;
        pthread_mutex_unlock(&p->lock);
        gr_rm_partition_unref(p);
    } else if (b && b->metadata) {
        struct gr_mdc_partition mp;
        if (gr_mdc_get_partition(b->metadata, topic, partition, &mp)) {
            *leader = mp.leader;
            *epoch = mp.leader_epoch;
            gr_mdc_partition_release(&mp);
        }
    }
}

bool gr_api_leader_endpoint(struct gr_api_req *req, int32_t leader, struct gr_api_leader_endpoint *out) {
    struct gr_broker *b = req->broker;
    if (leader < 0 || !b || !b->metadata) return false;
    gr_mdc_rdlock(b->metadata);
    const struct gr_mdc_broker *mb = gr_mdc_broker(b->metadata, leader);
    const struct gr_mdc_endpoint *e = mb ? gr_mdc_broker_endpoint(mb, req->listener) : NULL;
    if (e) {
        out->host = gr_api_strdup(req, e->host);
        out->port = e->port;
        out->rack = mb->rack ? gr_api_strdup(req, mb->rack) : NULL;
    }
    gr_mdc_unlock(b->metadata);
    return e != NULL;
}
