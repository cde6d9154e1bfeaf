/* The replica manager's side of its two seams: the ops through which the replica fetchers
 * (fetcher.h, Kafka's ReplicaFetcherThread over ReplicaManager) and the AlterPartition sender
 * (alter_partition.h) reach the hosted partitions, the metadata cache and the broker. Those two
 * modules include nothing of the replica manager or the broker; the dependency runs one way,
 * from here to them. Declared in replica_internal.h. */
#include <stdio.h>
#include <string.h>

#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "common/config.h"
#include "common/metadata_version.h"
#include "common/uuid.h"
#include "storage/log.h"
#include "replication/replica_internal.h"
#include "broker/quota_manager.h"

/* ---- fetcher ---- */

static gr_fetcher_part *f_get(void *ctx, const char *topic, int32_t partition) {
    return gr_rm_get_partition(ctx, topic, partition);
}
static void f_release(gr_fetcher_part *p) { gr_rm_partition_unref(p); }
static const char *f_topic(gr_fetcher_part *p) { return ((struct gr_rm_partition *)p)->topic; }
static int32_t f_latest_epoch(gr_fetcher_part *p) { return gr_rm_latest_epoch(p); }
static bool f_topic_id(gr_fetcher_part *p, uint8_t out[16]) {
    struct gr_uuid id;
    if (gr_plog_topic_id(((struct gr_rm_partition *)p)->lml->log, &id) != 1) return false;
    memcpy(out, id.b, 16);
    return true;
}
static int64_t f_log_start(gr_fetcher_part *p) { return gr_rm_log_start_offset(p); }
static int64_t f_log_end(gr_fetcher_part *p) { return gr_rm_log_end_offset(p); }
static int64_t f_hw(gr_fetcher_part *p) { return gr_rm_high_watermark(p); }
static void f_end_for_epoch(gr_fetcher_part *p, int32_t epoch, int64_t *end, int32_t *epoch_out) {
    gr_rm_end_offset_for_epoch(p, epoch, end, epoch_out);
}
static int f_truncate(void *ctx, gr_fetcher_part *p, int32_t leader_epoch, int64_t offset, bool fully) {
    return gr_rm_follower_truncate(ctx, p, leader_epoch, offset, fully);
}
static int f_append(void *ctx, gr_fetcher_part *p, int32_t leader_epoch, const uint8_t *records, size_t len,
                    int64_t leader_hw, int64_t leader_log_start) {
    return gr_rm_follower_append(ctx, p, leader_epoch, records, len, leader_hw, leader_log_start);
}

/* broker_id's endpoint on our inter-broker listener, from the metadata cache. */
static bool endpoint(struct gr_replica_manager *rm, int32_t broker_id, char *host, size_t hostlen, int32_t *port) {
    struct gr_broker *b = rm->b;
    const struct gr_listener *l = b->cfg ? gr_config_inter_broker_listener(b->cfg) : NULL;
    return b->metadata &&
           gr_mdc_get_endpoint(b->metadata, broker_id, l ? l->name : "PLAINTEXT", host, hostlen, port);
}

static bool f_leader_endpoint(void *ctx, int32_t broker_id, char *host, size_t hostlen, int32_t *port) {
    return endpoint(ctx, broker_id, host, hostlen, port);
}

/* follower.replication.throttled.rate (broker/quota_manager.h) */
static bool f_throttled(void *ctx, const char *topic, int32_t partition) {
    struct gr_replica_manager *rm = ctx;
    return rm->b && gr_quota_replica_throttled(rm->b->quotas, false, topic, partition);
}
static bool f_quota_exceeded(void *ctx) {
    struct gr_replica_manager *rm = ctx;
    return rm->b && gr_quota_replication_exceeded(rm->b->quotas, false);
}
static void f_quota_record(void *ctx, size_t bytes) {
    struct gr_replica_manager *rm = ctx;
    if (rm->b) gr_quota_replication_record(rm->b->quotas, false, (double)bytes);
}

const struct gr_fetcher_ops gr_rm_fetcher_ops = {
    .get = f_get,
    .release = f_release,
    .topic = f_topic,
    .latest_epoch = f_latest_epoch,
    .topic_id = f_topic_id,
    .log_start_offset = f_log_start,
    .log_end_offset = f_log_end,
    .high_watermark = f_hw,
    .end_offset_for_epoch = f_end_for_epoch,
    .truncate = f_truncate,
    .append = f_append,
    .leader_endpoint = f_leader_endpoint,
    .throttled = f_throttled,
    .quota_exceeded = f_quota_exceeded,
    .quota_record = f_quota_record,
};

void gr_rm_fetcher_config(const struct gr_replica_manager *rm, struct gr_fetcher_config *out) {
    const struct gr_config *cfg = rm->cfg;
    *out = (struct gr_fetcher_config){
        .broker_id = rm->broker_id,
        .backoff_ms = cfg ? cfg->replica_fetch_backoff_ms : 1000,
        .socket_timeout_ms = cfg ? cfg->replica_socket_timeout_ms : 30000,
        .wait_max_ms = cfg ? cfg->replica_fetch_wait_max_ms : 500,
        .min_bytes = cfg ? cfg->replica_fetch_min_bytes : 1,
        .max_bytes = cfg ? cfg->replica_fetch_max_bytes : 1048576,
        .response_max_bytes = cfg ? cfg->replica_fetch_response_max_bytes : 10485760,
    };
    int32_t ibp = GR_IBP_LATEST; /* Kafka 3.9's MetadataVersion.fetchRequestVersion */
    if (cfg && cfg->inter_broker_protocol_version && gr_ibp_parse(cfg->inter_broker_protocol_version, &ibp) != 0)
        ibp = GR_IBP_LATEST;
    out->fetch_version = ibp >= GR_IBP(3, 9, 0)   ? 17
                         : ibp >= GR_IBP(3, 7, 4) ? 16
                         : ibp >= GR_IBP(3, 5, 1) ? 15
                         : ibp >= GR_IBP(3, 5, 0) ? 14
                         : ibp >= GR_IBP(3, 1, 0) ? 13
                         : ibp >= GR_IBP(2, 7, 1) ? 12
                                                  : 11;
}

/* ---- AlterPartition sender ---- */

static bool a_controller_endpoint(void *ctx, int32_t *id, char *host, size_t hostlen, int32_t *port) {
    struct gr_replica_manager *rm = ctx;
    if (!rm->b->metadata) return false;
    *id = gr_mdc_controller_id(rm->b->metadata);
    return *id >= 0 && endpoint(rm, *id, host, hostlen, port);
}

static int64_t a_broker_epoch(void *ctx) {
    struct gr_replica_manager *rm = ctx;
    return gr_broker_epoch(rm->b); /* the controller's epoch when attached (broker.h) */
}

static int a_result(void *ctx, const char *topic, int32_t partition, int16_t error, int32_t leader_epoch,
                    const int32_t *isr, int nisr, int32_t zk_version) {
    return gr_rm_alter_partition_result(ctx, topic, partition, error, leader_epoch, isr, nisr, zk_version);
}

const struct gr_alter_partition_ops gr_rm_alter_partition_ops = {
    .controller_endpoint = a_controller_endpoint,
    .broker_epoch = a_broker_epoch,
    .result = a_result,
};

void gr_rm_alter_partition_config(const struct gr_replica_manager *rm, struct gr_alter_partition_config *out) {
    struct gr_ibp_features ibp;
    gr_ibp_features(rm->cfg ? rm->cfg->inter_broker_protocol_version : NULL, &ibp);
    *out = (struct gr_alter_partition_config){
        .broker_id = rm->broker_id,
        .socket_timeout_ms = rm->cfg ? rm->cfg->controller_socket_timeout_ms : 30000,
        .version = ibp.alter_partition_version,
    };
}
