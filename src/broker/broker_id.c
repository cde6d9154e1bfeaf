/* Start-up broker id: see broker_id.h. */
#include "broker/broker_id.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "storage/checkpoint.h"
#include "zk/kzk.h"

#define LOGGER "kafka.server.KafkaServer"

int gr_broker_id_resolve(const struct gr_config *cfg, struct gr_kzk *kzk, int32_t *out) {
    /* the distinct ids stored in the dirs, each with the first dir holding it */
    int32_t ids[GR_MAX_LOG_DIRS];
    const char *where[GR_MAX_LOG_DIRS];
    int nids = 0;
    for (int i = 0; i < cfg->num_log_dirs && i < GR_MAX_LOG_DIRS; i++) {
        struct gr_meta_properties mp;
        int rc = gr_meta_properties_read(cfg->log_dirs[i], &mp);
        if (rc == -ENOENT) continue;
        if (rc < 0) {
            gr_error(LOGGER, "Cannot read %s/%s: %s", cfg->log_dirs[i], GR_META_PROPERTIES, gr_strerror(rc));
            return rc;
        }
        bool seen = false;
        for (int j = 0; j < nids; j++) seen = seen || ids[j] == mp.broker_id;
        if (!seen) {
            ids[nids] = mp.broker_id;
            where[nids++] = cfg->log_dirs[i];
        }
    }
    if (nids > 1) {
        char found[1024];
        size_t off = 0;
        for (int j = 0; j < nids && off < sizeof found; j++)
            off += (size_t)snprintf(found + off, sizeof found - off, "%s%d (in %s)", j ? ", " : "", ids[j], where[j]);
        gr_error(LOGGER,
                 "Failed to match broker.id across log.dirs. This could happen if multiple brokers shared a log "
                 "directory (log.dirs) or partial data was manually copied from another broker. Found %s",
                 found);
        return GR_EMETA_BROKER_ID;
    }
    if (cfg->broker_id >= 0 && nids == 1 && ids[0] != cfg->broker_id) {
        gr_error(LOGGER,
                 "Configured broker.id %d doesn't match stored broker.id %d in meta.properties (%s). If you moved "
                 "your data, make sure your configured broker.id matches. If you intend to create a new broker, you "
                 "should remove all data in your data directories (log.dirs).",
                 cfg->broker_id, ids[0], where[0]);
        return GR_EMETA_BROKER_ID;
    }
    if (nids == 0 && cfg->broker_id < 0 && cfg->broker_id_generation_enable) {
        int32_t seq;
        int rc = gr_kzk_generate_broker_sequence_id(kzk, &seq);
        if (rc != 0) {
            gr_error(LOGGER, "Cannot generate a broker.id (/brokers/seqid): %s", gr_kzk_strerror(rc));
            return rc;
        }
        int64_t id = (int64_t)seq + cfg->reserved_broker_max_id;
        if (id > INT32_MAX) {
            gr_error(LOGGER,
                     "Cannot generate a broker.id: /brokers/seqid version %d + reserved.broker.max.id %d "
                     "exceeds the largest id",
                     seq, cfg->reserved_broker_max_id);
            return GR_ECONFIG;
        }
        gr_info(LOGGER, "Generated broker.id %d (/brokers/seqid version %d + reserved.broker.max.id %d)", (int32_t)id,
                seq, cfg->reserved_broker_max_id);
        *out = (int32_t)id;
        return 0;
    }
    if (nids == 1) {
        if (cfg->broker_id < 0) gr_info(LOGGER, "Using broker.id %d stored in meta.properties (%s)", ids[0], where[0]);
        *out = ids[0];
        return 0;
    }
    if (cfg->broker_id < 0) {
        gr_error(LOGGER, "broker.id is not set and broker.id.generation.enable is false");
        return GR_ECONFIG;
    }
    *out = cfg->broker_id;
    return 0;
}
