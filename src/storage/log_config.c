/* Kafka's LogConfig.fromProps over the config layers (see log_config.h). */
#include "storage/log_config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/config.h"
#include "common/util.h"

/* The value of topic key `name` over L, or NULL (Kafka's default, as text, is the last layer). */
static const char *value_of(const struct gr_cfg_layers *L, const char *name, struct gr_cfg_entry *e) {
    if (!gr_topic_config_resolve(L, name, e)) return NULL;
    return gr_cfg_entry_value(e);
}

static int64_t num(const struct gr_cfg_layers *L, const char *name, int64_t lo, int64_t hi) {
    struct gr_cfg_entry e;
    const char *v = value_of(L, name, &e);
    char *end;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (v && !errno && end != v && !*end && x >= lo && x <= hi) return x;
    return strtoll(gr_topic_key_default(name), NULL, 10);
}

static double ratio(const struct gr_cfg_layers *L, const char *name) {
    struct gr_cfg_entry e;
    const char *v = value_of(L, name, &e);
    char *end;
    double d = v ? strtod(v, &end) : -1;
    if (v && end != v && !*end && d >= 0 && d <= 1) return d;
    return strtod(gr_topic_key_default(name), NULL);
}

void gr_log_config_resolve(const struct gr_cfg_layers *L, struct gr_log_config *out) {
    struct gr_plog_config *lc = &out->lc;
    struct gr_cfg_entry e;
    const char *v;
    gr_plog_config_defaults(lc);
    lc->segment_bytes = (int32_t)num(L, "segment.bytes", 14, INT32_MAX);
    lc->roll_ms = num(L, "segment.ms", 1, INT64_MAX);
    lc->roll_jitter_ms = num(L, "segment.jitter.ms", 0, INT64_MAX);
    lc->index_interval_bytes = (int32_t)num(L, "index.interval.bytes", 0, INT32_MAX);
    lc->max_message_bytes = (int32_t)num(L, "max.message.bytes", 0, INT32_MAX);
    /* Kafka's Log.append flushes once unflushedMessages >= flush.messages: 0 flushes every
     * append, as 1 does */
    lc->flush_messages = GR_MAX(num(L, "flush.messages", 0, INT64_MAX), 1);
    lc->flush_ms = num(L, "flush.ms", 0, INT64_MAX);
    /* an index needs room for one entry of each kind (Kafka's broker key is atLeast(4)) */
    lc->index_max_bytes = (int32_t)GR_MAX(num(L, "segment.index.bytes", 0, INT32_MAX), 12);
    if ((v = value_of(L, "cleanup.policy", &e)) == NULL || gr_plog_parse_cleanup_policy(v, lc) < 0)
        gr_plog_parse_cleanup_policy("delete", lc);
    lc->min_cleanable_dirty_ratio = ratio(L, "min.cleanable.dirty.ratio");
    lc->delete_retention_ms = num(L, "delete.retention.ms", 0, INT64_MAX);
    lc->min_compaction_lag_ms = num(L, "min.compaction.lag.ms", 0, INT64_MAX);
    lc->max_compaction_lag_ms = num(L, "max.compaction.lag.ms", 1, INT64_MAX);
    lc->file_delete_delay_ms = num(L, "file.delete.delay.ms", 0, INT64_MAX);
    if ((v = value_of(L, "message.timestamp.type", &e)) == NULL || gr_plog_parse_timestamp_type(v, lc) < 0)
        lc->log_append_time = false;
    lc->timestamp_difference_max_ms = num(L, "message.timestamp.difference.max.ms", 0, INT64_MAX);
    if ((v = value_of(L, "compression.type", &e)) == NULL || gr_plog_parse_compression_type(v, lc) < 0)
        gr_plog_parse_compression_type("producer", lc);
    v = value_of(L, "message.downconversion.enable", &e);
    lc->downconversion_enable = !v || strcasecmp(v, "false") != 0;
    if (L->static_cfg && L->static_cfg->transactional_id_expiration_ms > 0)
        lc->producer_id_expiration_ms = L->static_cfg->transactional_id_expiration_ms;
    out->retention_ms = num(L, "retention.ms", -1, INT64_MAX);
    out->retention_bytes = num(L, "retention.bytes", INT64_MIN, INT64_MAX);
    out->min_insync_replicas = (int32_t)num(L, "min.insync.replicas", 1, INT32_MAX);
    v = value_of(L, "unclean.leader.election.enable", &e);
    out->unclean_leader_election_enable = v && strcasecmp(v, "true") == 0;
}
