/* The topic/broker config model: see config_model.h. Facts from Kafka 2.7.2's LogConfig,
 * KafkaConfig, DynamicBrokerConfig and AdminManager. */
#include "common/config_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/config.h"
#include "common/util.h"

#define LMAX INT64_MAX
#define LMIN INT64_MIN

static const char *const cleanup_vals[] = {"compact", "delete", NULL};
static const char *const compression_vals[] = {"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer", NULL};
static const char *const ts_vals[] = {"CreateTime", "LogAppendTime", NULL};

enum check { C_NONE, C_RANGE, C_RATIO, C_IN, C_LIST_IN, C_THROTTLED, C_VERSION };

struct tkey {
    const char *name;
    int type; /* GR_CONFIG_TYPE_* */
    const char *dflt;
    enum check check;
    int64_t lo, hi;
    const char *const *valid;
    const char *broker; /* primary broker synonym, NULL = none */
};

/* Kafka 2.7 LogConfig, sorted by name (the order Kafka's describe uses is a map's; sorted is
 * stable and easy to read). */
static const struct tkey tkeys[] = {
    {"cleanup.policy", GR_CONFIG_TYPE_LIST, "delete", C_LIST_IN, 0, 0, cleanup_vals, "log.cleanup.policy"},
    {"compression.type", GR_CONFIG_TYPE_STRING, "producer", C_IN, 0, 0, compression_vals, "compression.type"},
    {"delete.retention.ms", GR_CONFIG_TYPE_LONG, "86400000", C_RANGE, 0, LMAX, NULL, "log.cleaner.delete.retention.ms"},
    {"file.delete.delay.ms", GR_CONFIG_TYPE_LONG, "60000", C_RANGE, 0, LMAX, NULL, "log.segment.delete.delay.ms"},
    {"flush.messages", GR_CONFIG_TYPE_LONG, "9223372036854775807", C_RANGE, 0, LMAX, NULL,
     "log.flush.interval.messages"},
    {"flush.ms", GR_CONFIG_TYPE_LONG, "9223372036854775807", C_RANGE, 0, LMAX, NULL, "log.flush.interval.ms"},
    {"follower.replication.throttled.replicas", GR_CONFIG_TYPE_LIST, "", C_THROTTLED, 0, 0, NULL, NULL},
    {"index.interval.bytes", GR_CONFIG_TYPE_INT, "4096", C_RANGE, 0, INT32_MAX, NULL, "log.index.interval.bytes"},
    {"leader.replication.throttled.replicas", GR_CONFIG_TYPE_LIST, "", C_THROTTLED, 0, 0, NULL, NULL},
    {"max.compaction.lag.ms", GR_CONFIG_TYPE_LONG, "9223372036854775807", C_RANGE, 1, LMAX, NULL,
     "log.cleaner.max.compaction.lag.ms"},
    {"max.message.bytes", GR_CONFIG_TYPE_INT, "1048588", C_RANGE, 0, INT32_MAX, NULL, "message.max.bytes"},
    {"message.downconversion.enable", GR_CONFIG_TYPE_BOOLEAN, "true", C_NONE, 0, 0, NULL,
     "log.message.downconversion.enable"},
    {"message.format.version", GR_CONFIG_TYPE_STRING, "2.7-IV2", C_VERSION, 0, 0, NULL, "log.message.format.version"},
    {"message.timestamp.difference.max.ms", GR_CONFIG_TYPE_LONG, "9223372036854775807", C_RANGE, 0, LMAX, NULL,
     "log.message.timestamp.difference.max.ms"},
    {"message.timestamp.type", GR_CONFIG_TYPE_STRING, "CreateTime", C_IN, 0, 0, ts_vals, "log.message.timestamp.type"},
    {"min.cleanable.dirty.ratio", GR_CONFIG_TYPE_DOUBLE, "0.5", C_RATIO, 0, 0, NULL, "log.cleaner.min.cleanable.ratio"},
    {"min.compaction.lag.ms", GR_CONFIG_TYPE_LONG, "0", C_RANGE, 0, LMAX, NULL, "log.cleaner.min.compaction.lag.ms"},
    {"min.insync.replicas", GR_CONFIG_TYPE_INT, "1", C_RANGE, 1, INT32_MAX, NULL, "min.insync.replicas"},
    {"preallocate", GR_CONFIG_TYPE_BOOLEAN, "false", C_NONE, 0, 0, NULL, "log.preallocate"},
    {"retention.bytes", GR_CONFIG_TYPE_LONG, "-1", C_RANGE, LMIN, LMAX, NULL, "log.retention.bytes"},
    {"retention.ms", GR_CONFIG_TYPE_LONG, "604800000", C_RANGE, -1, LMAX, NULL, "log.retention.ms"},
    {"segment.bytes", GR_CONFIG_TYPE_INT, "1073741824", C_RANGE, 14, INT32_MAX, NULL, "log.segment.bytes"},
    {"segment.index.bytes", GR_CONFIG_TYPE_INT, "10485760", C_RANGE, 0, INT32_MAX, NULL, "log.index.size.max.bytes"},
    {"segment.jitter.ms", GR_CONFIG_TYPE_LONG, "0", C_RANGE, 0, LMAX, NULL, "log.roll.jitter.ms"},
    {"segment.ms", GR_CONFIG_TYPE_LONG, "604800000", C_RANGE, 1, LMAX, NULL, "log.roll.ms"},
    {"unclean.leader.election.enable", GR_CONFIG_TYPE_BOOLEAN, "false", C_NONE, 0, 0, NULL,
     "unclean.leader.election.enable"},
};

/* Broker synonym groups (precedence order) and the unit of each name in ms. */
struct syn {
    const char *name;
    int64_t unit;
    const char *group; /* the group's primary name */
};
static const struct syn syns[] = {
    {"log.roll.ms", 1, "log.roll.ms"},
    {"log.roll.hours", 3600000, "log.roll.ms"},
    {"log.roll.jitter.ms", 1, "log.roll.jitter.ms"},
    {"log.roll.jitter.hours", 3600000, "log.roll.jitter.ms"},
    {"log.retention.ms", 1, "log.retention.ms"},
    {"log.retention.minutes", 60000, "log.retention.ms"},
    {"log.retention.hours", 3600000, "log.retention.ms"},
    {"log.flush.interval.ms", 1, "log.flush.interval.ms"},
    {"log.flush.scheduler.interval.ms", 1, "log.flush.interval.ms"},
};

/* Kafka's KafkaConfig defaults of the broker synonyms (staticDefaultConfigs); the *.ms members
 * of the groups above have none. */
static const char *const broker_defaults[][2] = {
    {"log.cleanup.policy", "delete"},
    {"compression.type", "producer"},
    {"log.cleaner.delete.retention.ms", "86400000"},
    {"log.segment.delete.delay.ms", "60000"},
    {"log.flush.interval.messages", "9223372036854775807"},
    {"log.flush.scheduler.interval.ms", "9223372036854775807"},
    {"log.index.interval.bytes", "4096"},
    {"log.cleaner.max.compaction.lag.ms", "9223372036854775807"},
    {"message.max.bytes", "1048588"},
    {"log.message.downconversion.enable", "true"},
    {"log.message.format.version", "2.7-IV2"},
    {"log.message.timestamp.difference.max.ms", "9223372036854775807"},
    {"log.message.timestamp.type", "CreateTime"},
    {"log.cleaner.min.cleanable.ratio", "0.5"},
    {"log.cleaner.min.compaction.lag.ms", "0"},
    {"min.insync.replicas", "1"},
    {"log.preallocate", "false"},
    {"log.retention.bytes", "-1"},
    {"log.retention.hours", "168"},
    {"log.segment.bytes", "1073741824"},
    {"log.index.size.max.bytes", "10485760"},
    {"log.roll.jitter.hours", "0"},
    {"log.roll.hours", "168"},
    {"unclean.leader.election.enable", "false"},
    {"leader.replication.throttled.rate", "9223372036854775807"},
    {"follower.replication.throttled.rate", "9223372036854775807"},
};

const char *gr_props_get(const struct gr_props *p, const char *key) {
    for (int i = 0; p && i < p->n; i++)
        if (strcmp(p->keys[i], key) == 0) return p->values[i];
    return NULL;
}

static const struct tkey *tfind(const char *name) {
    for (size_t i = 0; i < GR_ARRAY_LEN(tkeys); i++)
        if (strcmp(tkeys[i].name, name) == 0) return &tkeys[i];
    return NULL;
}

int gr_topic_key_count(void) {
    return (int)GR_ARRAY_LEN(tkeys);
}
const char *gr_topic_key_name(int i) {
    return i >= 0 && i < gr_topic_key_count() ? tkeys[i].name : NULL;
}
bool gr_topic_key_known(const char *name) {
    return tfind(name) != NULL;
}

const char *gr_topic_key_default(const char *name) {
    const struct tkey *k = tfind(name);
    return k ? k->dflt : NULL;
}

const char *gr_topic_key_broker_synonym(const char *name) {
    const struct tkey *k = tfind(name);
    return k ? k->broker : NULL;
}

int gr_topic_key_type(const char *name) {
    const struct tkey *k = tfind(name);
    return k ? k->type : GR_CONFIG_TYPE_UNKNOWN;
}

static const char *type_name(int type) {
    switch (type) {
    case GR_CONFIG_TYPE_INT: return "INT";
    case GR_CONFIG_TYPE_LONG: return "LONG";
    case GR_CONFIG_TYPE_DOUBLE: return "DOUBLE";
    case GR_CONFIG_TYPE_BOOLEAN: return "BOOLEAN";
    case GR_CONFIG_TYPE_LIST: return "LIST";
    default: return "STRING";
    }
}

static bool in_vals(const char *v, size_t len, const char *const *vals) {
    for (; *vals; vals++)
        if (strlen(*vals) == len && strncmp(*vals, v, len) == 0) return true;
    return false;
}

/* Trims spaces around [p, p+len). */
static const char *trim_item(const char *p, size_t *len) {
    while (*len && *p == ' ') p++, (*len)--;
    while (*len && p[*len - 1] == ' ') (*len)--;
    return p;
}

/* ThrottledReplicaListValidator: "*" or "partition:broker,..." (both integers). */
static bool throttled_ok(const char *v) {
    const char *t = v;
    size_t len = strlen(v);
    t = trim_item(t, &len);
    if (len == 0 || (len == 1 && *t == '*')) return true;
    for (const char *p = v; *p;) {
        size_t l = strcspn(p, ",");
        const char *it = trim_item(p, &l);
        const char *colon = memchr(it, ':', l);
        if (!colon || colon == it || colon == it + l - 1) return false;
        for (const char *c = it; c < it + l; c++)
            if (c != colon && (*c < '0' || *c > '9')) return false;
        p += strcspn(p, ",");
        if (*p) p++;
    }
    return true;
}

/* Checks value against k; scale converts a broker synonym's unit (value * scale is checked). */
/* Why an INT/LONG value is invalid (scale: a broker synonym's unit, value*scale is range-checked),
 * NULL when it is fine. */
static const char *why_number(const struct tkey *k, const char *value, int64_t scale, char *buf, size_t len) {
    char *end;
    errno = 0;
    while (*value == ' ') value++;
    long long v = strtoll(value, &end, 10);
    while (*end == ' ') end++;
    if (errno || end == value || *end || (k->type == GR_CONFIG_TYPE_INT && (v > INT32_MAX || v < INT32_MIN))) {
        snprintf(buf, len, "Not a number of type %s", type_name(k->type));
        return buf;
    }
    if (scale > 1 && v > 0) v = v > INT64_MAX / scale ? INT64_MAX : v * scale;
    if (k->check != C_RANGE || (v >= k->lo && v <= k->hi)) return NULL;
    if (k->hi == LMAX || k->hi == INT32_MAX)
        snprintf(buf, len, "Value must be at least %lld", (long long)k->lo);
    else
        snprintf(buf, len, "Value must be in [%lld, %lld]", (long long)k->lo, (long long)k->hi);
    return buf;
}

/* ValidList: every comma-separated item is one of vals, and there is at least one. */
static bool list_ok(const char *value, const char *const *vals) {
    int n = 0;
    for (const char *p = value; *p;) {
        size_t l = strcspn(p, ",");
        const char *it = trim_item(p, &l);
        if (!in_vals(it, l, vals)) return false;
        n++;
        p += strcspn(p, ",");
        if (*p) p++;
    }
    return n > 0;
}

/* Why a STRING/LIST value is invalid, NULL when it is fine. */
static const char *why_text(const struct tkey *k, const char *value, char *buf, size_t len) {
    switch (k->check) {
    case C_IN:
        if (in_vals(value, strlen(value), k->valid)) return NULL;
        snprintf(buf, len, "String must be one of: %s",
                 k->valid == ts_vals ? "CreateTime, LogAppendTime" : "uncompressed, zstd, lz4, snappy, gzip, producer");
        return buf;
    case C_LIST_IN: return list_ok(value, k->valid) ? NULL : "Invalid value in list, must be one of: [compact, delete]";
    case C_THROTTLED:
        return throttled_ok(value) ? NULL
                                   : "Value must be '*' or a list of partition:broker pairs, e.g. 0:101,0:102,1:101";
    case C_VERSION: return value[0] >= '0' && value[0] <= '9' ? NULL : "Unknown message format version";
    default: return NULL;
    }
}

/* Checks value against k; scale converts a broker synonym's unit (value * scale is checked). */
static int check_value(const struct tkey *k, const char *name, const char *value, int64_t scale, char *err,
                       size_t errlen) {
    const char *why = NULL;
    char buf[160];
    if (!value) {
        snprintf(err, errlen, "Invalid value null for configuration %s: value must not be null", name);
        return GR_CFG_INVALID_VALUE;
    }
    switch (k->type) {
    case GR_CONFIG_TYPE_INT:
    case GR_CONFIG_TYPE_LONG: why = why_number(k, value, scale, buf, sizeof buf); break;
    case GR_CONFIG_TYPE_DOUBLE: {
        char *end;
        double d = strtod(value, &end);
        if (end == value || *end)
            why = "Not a number of type DOUBLE";
        else if (d < 0.0 || d > 1.0)
            why = "Value must be no more than 1.0";
        break;
    }
    case GR_CONFIG_TYPE_BOOLEAN:
        if (strcasecmp(value, "true") != 0 && strcasecmp(value, "false") != 0)
            why = "Expected value to be either true or false";
        break;
    default: why = why_text(k, value, buf, sizeof buf); break;
    }
    if (!why) return GR_CFG_OK;
    snprintf(err, errlen, "Invalid value %s for configuration %s: %s", value, name, why);
    return GR_CFG_INVALID_VALUE;
}

int gr_topic_config_check(const char *name, const char *value, char *err, size_t errlen) {
    const struct tkey *k = tfind(name ? name : "");
    if (!k) {
        snprintf(err, errlen, "Unknown topic config name: %s", name ? name : "null");
        return GR_CFG_UNKNOWN_KEY;
    }
    return check_value(k, name, value, 1, err, errlen);
}

int gr_topic_configs_check_all(int n, char *const *keys, char *const *values, char *err, size_t errlen) {
    const char *lo = gr_topic_key_default("min.compaction.lag.ms"), *hi = gr_topic_key_default("max.compaction.lag.ms");
    for (int i = 0; i < n; i++) { /* the last of a repeated key wins, as in Properties */
        if (strcmp(keys[i], "min.compaction.lag.ms") == 0) lo = values[i];
        if (strcmp(keys[i], "max.compaction.lag.ms") == 0) hi = values[i];
    }
    long long min_lag = strtoll(lo, NULL, 10), max_lag = strtoll(hi, NULL, 10);
    if (min_lag > max_lag) {
        snprintf(err, errlen,
                 "conflict topic config setting min.compaction.lag.ms (%lld) > max.compaction.lag.ms (%lld)", min_lag,
                 max_lag);
        return GR_CFG_CONFLICT;
    }
    return GR_CFG_OK;
}

/* ---- broker keys ---- */

static const struct syn *syn_find(const char *name) {
    for (size_t i = 0; i < GR_ARRAY_LEN(syns); i++)
        if (strcmp(syns[i].name, name) == 0) return &syns[i];
    return NULL;
}

int gr_broker_key_synonyms(const char *name, const char **out, int max) {
    const struct syn *s = syn_find(name);
    int n = 0;
    if (!s) {
        if (max > 0) out[n++] = name;
        return n;
    }
    /* the group from `name` on (Kafka drops the names before the one described) */
    bool seen = false;
    for (size_t i = 0; i < GR_ARRAY_LEN(syns) && n < max; i++) {
        if (strcmp(syns[i].group, s->group) != 0) continue;
        if (strcmp(syns[i].name, name) == 0) seen = true;
        if (seen) out[n++] = syns[i].name;
    }
    return n;
}

/* The topic key whose broker synonym group contains broker key name, or NULL. */
static const struct tkey *topic_of_broker_key(const char *name, int64_t *unit) {
    const struct syn *s = syn_find(name);
    const char *primary = s ? s->group : name;
    *unit = s ? s->unit : 1;
    for (size_t i = 0; i < GR_ARRAY_LEN(tkeys); i++)
        if (tkeys[i].broker && strcmp(tkeys[i].broker, primary) == 0) return &tkeys[i];
    return NULL;
}

bool gr_broker_key_dynamic(const char *name, bool per_broker) {
    (void)per_broker; /* every key Gregor changes at run time may also be set cluster-wide */
    int64_t unit;
    if (strcmp(name, "log.message.format.version") == 0) return false;
    if (topic_of_broker_key(name, &unit)) return true;
    return strcmp(name, "leader.replication.throttled.rate") == 0 ||
           strcmp(name, "follower.replication.throttled.rate") == 0;
}

static const char *broker_default(const char *name) {
    for (size_t i = 0; i < GR_ARRAY_LEN(broker_defaults); i++)
        if (strcmp(broker_defaults[i][0], name) == 0) return broker_defaults[i][1];
    if (syn_find(name)) return NULL;
    return gr_config_default_value(name);
}

int gr_broker_config_check(const char *name, const char *value, bool per_broker, char *err, size_t errlen) {
    bool known = gr_config_known_key(name) || broker_default(name) != NULL;
    if (!gr_broker_key_dynamic(name, per_broker)) {
        if (!known) return GR_CFG_OK; /* custom configs are allowed */
        snprintf(err, errlen, "Cannot update these configs dynamically: Set(%s)", name);
        return GR_CFG_NOT_DYNAMIC;
    }
    int64_t unit;
    const struct tkey *k = topic_of_broker_key(name, &unit);
    if (k) {
        int rc = check_value(k, name, value, unit, err, errlen);
        if (rc) return rc;
    }
    if (!value) {
        snprintf(err, errlen, "Invalid value null for configuration %s", name);
        return GR_CFG_INVALID_VALUE;
    }
    return gr_config_check(name, value, err, errlen) ? GR_CFG_INVALID_VALUE : GR_CFG_OK;
}

/* ---- resolution ---- */

static void add_syn(struct gr_cfg_entry *e, const char *name, const char *value, int8_t src) {
    if (e->nsyn < GR_CFG_MAX_SYNONYMS) e->syn[e->nsyn++] = (struct gr_cfg_synonym){name, value, src};
}

/* AdminManager.configSynonyms: every layer, then every name of the group. */
static void broker_synonyms(const struct gr_cfg_layers *L, const char *const *names, int n, bool per_broker,
                            struct gr_cfg_entry *e) {
    for (int i = 0; i < n && per_broker; i++) {
        const char *v = gr_props_get(L->dyn_broker, names[i]);
        if (v) add_syn(e, names[i], v, GR_CFG_SRC_DYNAMIC_BROKER);
    }
    for (int i = 0; i < n; i++) {
        const char *v = gr_props_get(L->dyn_default, names[i]);
        if (v) add_syn(e, names[i], v, GR_CFG_SRC_DYNAMIC_DEFAULT_BROKER);
    }
    for (int i = 0; i < n && per_broker; i++) {
        const char *v = L->static_cfg ? gr_config_static_value(L->static_cfg, names[i]) : NULL;
        if (v) add_syn(e, names[i], v, GR_CFG_SRC_STATIC_BROKER);
    }
    for (int i = 0; i < n && per_broker; i++) {
        const char *v = broker_default(names[i]);
        if (v) add_syn(e, names[i], v, GR_CFG_SRC_DEFAULT);
    }
}

/* Kafka's KafkaConfig.maybeSensitive: a PASSWORD key, or a key of no known type (a custom key may
 * hold anything), is sensitive: described without its value, in its synonyms too. */
static bool is_sensitive(const char *name, int type) {
    return type == GR_CONFIG_TYPE_PASSWORD || type == GR_CONFIG_TYPE_UNKNOWN || strstr(name, "password") != NULL;
}

bool gr_topic_config_resolve(const struct gr_cfg_layers *L, const char *name, struct gr_cfg_entry *e) {
    const struct tkey *k = tfind(name);
    if (!k) return false;
    memset(e, 0, sizeof *e);
    e->name = k->name;
    e->type = (int8_t)k->type;
    e->read_only = false;
    const char *ov = gr_props_get(L->topic, name);
    if (ov) add_syn(e, name, ov, GR_CFG_SRC_TOPIC);
    if (k->broker) {
        const char *names[4];
        int n = gr_broker_key_synonyms(k->broker, names, 4);
        broker_synonyms(L, names, n, true, e);
    }
    if (e->nsyn == 0) {
        e->source = GR_CFG_SRC_DEFAULT;
        e->value_ptr = k->dflt;
        return true;
    }
    e->source = e->syn[0].source;
    const struct syn *s = e->source == GR_CFG_SRC_TOPIC ? NULL : syn_find(e->syn[0].name);
    if (s && s->unit > 1) {
        long long v = strtoll(e->syn[0].value, NULL, 10);
        snprintf(e->value, sizeof e->value, "%lld", v < 0 ? v : v * (long long)s->unit);
    } else {
        e->value_ptr = e->syn[0].value;
    }
    return true;
}

bool gr_broker_config_resolve(const struct gr_cfg_layers *L, const char *name, bool per_broker,
                              struct gr_cfg_entry *e) {
    memset(e, 0, sizeof *e);
    e->name = name;
    int64_t unit;
    const struct tkey *k = topic_of_broker_key(name, &unit);
    int t = gr_config_key_type(name);
    if (t == GR_CONFIG_TYPE_UNKNOWN && (k || broker_default(name))) t = k ? k->type : GR_CONFIG_TYPE_STRING;
    e->type = (int8_t)t; /* UNKNOWN for a custom key, as Kafka */
    e->read_only = !gr_broker_key_dynamic(name, per_broker);
    e->sensitive = is_sensitive(name, t);
    const char *names[4];
    int n = gr_broker_key_synonyms(name, names, 4);
    broker_synonyms(L, names, n, per_broker, e);
    if (e->nsyn == 0) {
        if (!per_broker) return false;
        e->source = GR_CFG_SRC_DEFAULT;
        e->value_ptr = NULL; /* Kafka: no value (e.g. log.retention.ms without a setting) */
        return true;
    }
    e->source = e->syn[0].source;
    e->value_ptr = e->sensitive ? NULL : e->syn[0].value;
    if (e->sensitive)
        for (int i = 0; i < e->nsyn; i++) e->syn[i].value = NULL;
    return true;
}
