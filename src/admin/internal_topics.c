/* Internal topic creation; rules in internal_topics.h. */
#include "admin/internal_topics.h"

#include <stdio.h>
#include <string.h>

#include "admin/topic_admin.h"
#include "admin/topic_names.h"
#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"

#define LOGGER "kafka.server.KafkaApis"

/* Kafka's defaults, for a broker without a configuration (unit tests). */
#define DEFAULT_PARTITIONS 50
#define DEFAULT_RF 3
#define DEFAULT_SEGMENT_BYTES 104857600
#define DEFAULT_TXN_MIN_ISR 2

int16_t gr_internal_topic_create(struct gr_broker *b, const char *name) {
    const struct gr_config *c = b->cfg;
    bool offsets = strcmp(name, GR_GROUP_METADATA_TOPIC) == 0;
    if (!offsets && strcmp(name, GR_TRANSACTION_STATE_TOPIC) != 0) return GR_KERR_INVALID_REQUEST;
    int32_t nparts, rf, seg;
    const char *rf_prop;
    if (offsets) {
        nparts = c ? c->offsets_topic_num_partitions : DEFAULT_PARTITIONS;
        rf = c ? c->offsets_topic_replication_factor : DEFAULT_RF;
        seg = c ? c->offsets_topic_segment_bytes : DEFAULT_SEGMENT_BYTES;
        rf_prop = "offsets.topic.replication.factor";
    } else {
        nparts = c ? c->transaction_state_log_num_partitions : DEFAULT_PARTITIONS;
        rf = c ? c->transaction_state_log_replication_factor : DEFAULT_RF;
        seg = c ? c->transaction_state_log_segment_bytes : DEFAULT_SEGMENT_BYTES;
        rf_prop = "transaction.state.log.replication.factor";
    }

    struct gr_broker_meta *brokers = NULL;
    int alive = 0;
    gr_mdc_alive_brokers(b->metadata, &brokers, &alive);
    gr_broker_metas_free(brokers, alive);
    if (alive < rf) {
        gr_error(LOGGER,
                 "Number of alive brokers '%d' does not meet the required replication factor '%d' for the %s "
                 "topic (configured via '%s'). This error can be ignored if the cluster is starting up and "
                 "not all brokers are up yet.",
                 alive, rf, offsets ? "offsets" : "transactions state", rf_prop);
        return GR_KERR_COORDINATOR_NOT_AVAILABLE;
    }

    char segv[16], misr[16];
    snprintf(segv, sizeof segv, "%d", seg);
    snprintf(misr, sizeof misr, "%d", c ? c->transaction_state_log_min_isr : DEFAULT_TXN_MIN_ISR);
    static const char *const offsets_names[] = {"cleanup.policy", "compression.type", "segment.bytes"};
    const char *const offsets_values[] = {"compact", "producer", segv};
    static const char *const txn_names[] = {"unclean.leader.election.enable", "compression.type", "cleanup.policy",
                                            "min.insync.replicas", "segment.bytes"};
    const char *const txn_values[] = {"false", "uncompressed", "compact", misr, segv};
    struct gr_topic_spec spec = {.name = name,
                                 .num_partitions = nparts,
                                 .replication_factor = (int16_t)rf,
                                 .n_configs = offsets ? 3 : 5,
                                 .config_names = offsets ? offsets_names : txn_names,
                                 .config_values = offsets ? offsets_values : txn_values};
    struct gr_topic_result res;
    int16_t e = gr_topic_admin_create_topic(b, &spec, false, true, -1, &res);
    if (e == GR_KERR_NONE)
        gr_info(LOGGER, "Auto creation of topic %s with %d partitions and replication factor %d is successful", name,
                nparts, rf);
    else if (e == GR_KERR_TOPIC_ALREADY_EXISTS) /* another broker created it meanwhile */
        e = GR_KERR_NONE;
    else
        gr_warn(LOGGER, "Auto creation of topic %s failed: %s (%s)", name, gr_kerr_name(e), res.message);
    return e;
}
