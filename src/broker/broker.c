/* struct gr_broker lifecycle; see broker.h. */
#include "broker/broker.h"

#include <stdlib.h>

#include "broker/broker_topic_stats.h"
#include "broker/metadata_cache.h"
#include "replication/partitions.h"
#include "admin/topic_admin.h"
#include "common/util.h"
#include "controller/controller.h"

struct gr_broker *gr_broker_new(const struct gr_config *cfg, int32_t broker_id)
{
    struct gr_broker *b = gr_calloc(1, sizeof(*b));
    b->cfg = cfg;
    b->broker_id = broker_id;
    atomic_store(&b->broker_epoch, -1);
    b->metadata = gr_mdc_new(broker_id);
    b->partitions = gr_partitions_new();
    b->admin = gr_topic_admin_new(b); /* hooks itself to metadata cache updates */
    return b;
}

void gr_broker_free(struct gr_broker *b)
{
    if (!b)
        return;
    gr_topic_admin_free(b->admin);
    gr_bts_free(b->topic_stats);
    gr_partitions_free(b->partitions);
    gr_mdc_free(b->metadata);
    free(b);
}

bool gr_broker_is_controller(struct gr_broker *b)
{
    if (b->controller_is_active && b->controller)
        return b->controller_is_active(b->controller);
    if (b->controller)
        return gr_controller_is_active(b->controller);
    return gr_mdc_controller_id(b->metadata) == b->broker_id;
}

int64_t gr_broker_epoch(struct gr_broker *b)
{
    /* Kafka compares with KafkaController.brokerEpoch: the controller object is the authority
     * (it learns the new epoch on re-registration after a session expiry). */
    if (b->controller)
        return gr_controller_broker_epoch(b->controller);
    return atomic_load(&b->broker_epoch);
}
