/* DescribeConfigs v0-4, AlterConfigs v0-2 and IncrementalAlterConfigs v0-1 (DescribeConfigs v4 and
 * AlterConfigs v2 are flexible only; Kafka 2.7 AdminManager), and the configs of CreateTopics v5.
 *
 *   - Resources: TOPIC (2) and BROKER (4). A BROKER name is this broker's id or "" for the
 *     cluster-wide default (/config/brokers/<default>); another id, or a name that is not an
 *     integer, is INVALID_REQUEST, as in Kafka.
 *   - BROKER_LOGGER (8, KIP-412): this broker's loggers and their levels (common/log_controller.h).
 *     DescribeConfigs lists root and every logger (source DYNAMIC_BROKER_LOGGER_CONFIG, 6; the name
 *     must be this broker's id); IncrementalAlterConfigs SET changes a logger's level at once (Kafka's
 *     level names), DELETE makes it follow root again; APPEND/SUBTRACT, an unknown logger, a bad
 *     level or deleting root's level are INVALID_REQUEST with Kafka's messages, and nothing of the
 *     resource is applied. Not persisted (a restart starts from the configured level). AlterConfigs
 *     (the old API) refuses the type, as Kafka.
 *   - Values and sources come from the config model (common/config_model.h) over this broker's
 *     dynamic layers (broker/dynamic_config_manager.h) and server.properties.
 *   - Alters write /config/topics/T or /config/brokers/<id|<default>> and a config change
 *     notification (zk/kzk.h gr_kzk_set_entity_config); every broker's DynamicConfigManager then
 *     applies the change. ValidateOnly validates and writes nothing.
 *   - Errors as Kafka 2.7: unknown topic key -> INVALID_CONFIG "Unknown topic config name: K";
 *     a bad value -> INVALID_REQUEST "Invalid config value for resource ...: Invalid value V for
 *     configuration K: why" (AdminManager turns ConfigException into InvalidRequestException);
 *     a broker key that cannot change at run time -> INVALID_REQUEST "... Cannot update these
 *     configs dynamically: Set(K)"; null values (except IncrementalAlterConfigs DELETE) and
 *     duplicate keys -> INVALID_REQUEST; unknown topic -> UNKNOWN_TOPIC_OR_PARTITION.
 *   - Everything is answered on the I/O thread (ZooKeeper reads/writes are synchronous, as the
 *     other admin handlers do). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/topic_names.h"
#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "broker/dynamic_config_manager.h"
#include "broker/metadata_cache.h"
#include "common/config.h"
#include "common/config_model.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/log_controller.h"
#include "common/util.h"
#include "zk/kzk.h"

#define LOGGER "kafka.server.AdminManager"

#define RT_TOPIC 2
#define RT_BROKER 4
#define RT_BROKER_LOGGER 8

#define OP_SET 0
#define OP_DELETE 1
#define OP_APPEND 2
#define OP_SUBTRACT 3

/* A resource's error (code + message in the request's arena). */
struct res_err {
    int16_t code;
    char msg[512];
};

static int16_t set_err(struct res_err *e, int16_t code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int16_t set_err(struct res_err *e, int16_t code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->code = code;
    return code;
}

static const char *type_word(int8_t t) {
    return t == RT_TOPIC ? "TOPIC" : t == RT_BROKER ? "BROKER" : t == RT_BROKER_LOGGER ? "BROKER_LOGGER" : "UNKNOWN";
}

/* A broker resource's non-empty name as an id (Kafka's message when it is not an integer). */
static bool parse_broker_id(const char *name, long *v, struct res_err *e) {
    char *end;
    *v = strtol(name, &end, 10);
    if (!*end) return true;
    set_err(e, GR_KERR_INVALID_REQUEST, "Broker id must be an integer, but it is: %s", name);
    return false;
}

/* Checks a BROKER resource name: "" = default (*per_broker false), or this broker's id. */
static bool broker_name_ok(struct gr_broker *b, const char *name, bool *per_broker, struct res_err *e) {
    if (!name || !*name) {
        *per_broker = false;
        return true;
    }
    long v;
    if (!parse_broker_id(name, &v, e)) return false;
    if (v != b->broker_id) {
        set_err(e, GR_KERR_INVALID_REQUEST, "Unexpected broker id, expected %d or empty string, but received %s",
                b->broker_id, name);
        return false;
    }
    *per_broker = true;
    return true;
}

static bool topic_known(struct gr_broker *b, const char *topic) {
    return topic && b->metadata && gr_mdc_contains_topic(b->metadata, topic);
}

/* ---------------- BROKER_LOGGER (KIP-412) ---------------- */

static bool wanted(const struct DescribeConfigsRequest_DescribeConfigsResource *r, const char *name);

/* The broker logger resource's name: this broker's id (empty allowed when altering, as Kafka's
 * getBrokerId). False with the error in *e. */
static bool logger_resource_ok(struct gr_broker *b, const char *name, bool describe, struct res_err *e) {
    if (!name || !*name) {
        if (!describe) return true;
        set_err(e, GR_KERR_INVALID_REQUEST, "Broker id must not be empty");
        return false;
    }
    long v;
    if (!parse_broker_id(name, &v, e)) return false;
    if (v != b->broker_id) {
        set_err(e, GR_KERR_INVALID_REQUEST, describe ? "Unexpected broker id, expected %d but received %s"
                                                     : "Unexpected broker id, expected %d, but received %s",
                b->broker_id, name);
        return false;
    }
    return true;
}

static void describe_broker_logger(struct gr_broker *b, struct gr_api_req *req,
                                   const struct DescribeConfigsRequest_DescribeConfigsResource *r,
                                   struct DescribeConfigsResponse_DescribeConfigsResult *o, struct res_err *e) {
    if (!logger_resource_ok(b, r->ResourceName, true, e)) return;
    struct gr_log_logger_info *all = gr_calloc(GR_LOG_MAX_LOGGERS + 1, sizeof *all);
    int n = gr_log_loggers(all, GR_LOG_MAX_LOGGERS + 1);
    if (n > GR_LOG_MAX_LOGGERS + 1) n = GR_LOG_MAX_LOGGERS + 1;
    o->Configs = gr_api_alloc(req, sizeof(*o->Configs) * (size_t)(n ? n : 1));
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!wanted(r, all[i].name)) continue;
        struct DescribeConfigsResponse_DescribeConfigsResourceResult *c = &o->Configs[k++];
        memset(c, 0, sizeof *c);
        c->Name = gr_api_strdup(req, all[i].name);
        c->Value = gr_api_strdup(req, all[i].level);
        c->ConfigSource = 6; /* DYNAMIC_BROKER_LOGGER_CONFIG */
        c->Synonyms = gr_api_alloc(req, sizeof(*c->Synonyms));
    }
    o->ConfigsCount = k;
    free(all);
}

/* IncrementalAlterConfigs on BROKER_LOGGER: every op validated first (AdminManager's
 * validateLogLevelConfigs), then applied unless validate_only. */
static int16_t incremental_broker_logger(struct gr_broker *b,
                                         const struct IncrementalAlterConfigsRequest_AlterConfigsResource *r,
                                         bool validate_only, struct res_err *e) {
    if (!logger_resource_ok(b, r->ResourceName, false, e)) return e->code;
    int nc = r->ConfigsCount > 0 ? r->ConfigsCount : 0;
    const char *rn = r->ResourceName ? r->ResourceName : "";
    for (int i = 0; i < nc; i++) {
        const struct IncrementalAlterConfigsRequest_AlterableConfig *x = &r->Configs[i];
        if (x->ConfigOperation == OP_APPEND || x->ConfigOperation == OP_SUBTRACT)
            return set_err(e, GR_KERR_INVALID_REQUEST, "%s operation is not allowed for the BROKER_LOGGER resource",
                           x->ConfigOperation == OP_APPEND ? "APPEND" : "SUBTRACT");
        if (!gr_log_logger_exists(x->Name))
            return set_err(e, GR_KERR_INVALID_REQUEST,
                           "Invalid config value for resource ConfigResource(type=BROKER_LOGGER, name='%s'): Logger %s "
                           "does not exist!",
                           rn, x->Name);
        if (x->ConfigOperation == OP_SET && !gr_log_valid_level(x->Value))
            return set_err(e, GR_KERR_INVALID_REQUEST,
                           "Invalid config value for resource ConfigResource(type=BROKER_LOGGER, name='%s'): Cannot set "
                           "the log level of %s to %s as it is not a supported log level. Valid log levels are TRACE, "
                           "DEBUG, INFO, WARN, ERROR, FATAL",
                           rn, x->Name, x->Value);
        if (x->ConfigOperation == OP_DELETE && strcmp(x->Name, GR_LOG_ROOT_LOGGER) == 0)
            return set_err(e, GR_KERR_INVALID_REQUEST, "Removing the log level of the root logger is not allowed");
    }
    for (int i = 0; i < nc && !validate_only; i++) {
        const struct IncrementalAlterConfigsRequest_AlterableConfig *x = &r->Configs[i];
        if (x->ConfigOperation == OP_SET)
            gr_log_set_logger_level(x->Name, x->Value);
        else
            gr_log_unset_logger_level(x->Name);
        gr_info(LOGGER, "Log level of %s %s%s", x->Name, x->ConfigOperation == OP_SET ? "set to " : "unset",
                x->ConfigOperation == OP_SET ? x->Value : "");
    }
    return GR_KERR_NONE;
}

/* ---------------- DescribeConfigs ---------------- */

static bool wanted(const struct DescribeConfigsRequest_DescribeConfigsResource *r, const char *name) {
    if (r->ConfigurationKeysCount <= 0) return true;
    for (int i = 0; i < r->ConfigurationKeysCount; i++)
        if (r->ConfigurationKeys[i] && strcmp(r->ConfigurationKeys[i], name) == 0) return true;
    return false;
}

static void fill_entry(struct gr_api_req *req, int16_t ver, bool synonyms, const struct gr_cfg_entry *e,
                       struct DescribeConfigsResponse_DescribeConfigsResourceResult *o) {
    o->Name = gr_api_strdup(req, e->name);
    o->Value = e->sensitive ? NULL : gr_api_strdup(req, gr_cfg_entry_value(e));
    o->ReadOnly = e->read_only;
    o->IsDefault = e->source == GR_CFG_SRC_DEFAULT;
    o->ConfigSource = e->source;
    o->IsSensitive = e->sensitive;
    o->ConfigType = ver >= 3 ? e->type : 0;
    o->Documentation = NULL;
    int n = synonyms ? e->nsyn : 0;
    o->SynonymsCount = n;
    o->Synonyms = gr_api_alloc(req, sizeof(*o->Synonyms) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        o->Synonyms[i].Name = gr_api_strdup(req, e->syn[i].name);
        o->Synonyms[i].Value = e->sensitive ? NULL : gr_api_strdup(req, e->syn[i].value);
        o->Synonyms[i].Source = e->syn[i].source;
    }
}

/* Names a broker describe lists: Gregor's key table, the model's log synonyms, and whatever the
 * layers hold (custom keys too), each once. Returns the count; names point into static tables or
 * the view. */
static int broker_names(const struct gr_dcm_view *v, const char **out, int max) {
    int n = 0;
#define ADD(nm)                                                                  \
    do {                                                                         \
        const char *x_ = (nm);                                                   \
        bool dup_ = false;                                                       \
        for (int j_ = 0; j_ < n && !dup_; j_++) dup_ = strcmp(out[j_], x_) == 0; \
        if (!dup_ && n < max) out[n++] = x_;                                     \
    } while (0)
    for (int i = 0; i < gr_config_key_count(); i++) ADD(gr_config_key_name(i));
    for (int i = 0; i < gr_topic_key_count(); i++) {
        const char *syn[4];
        const char *bk = gr_topic_key_broker_synonym(gr_topic_key_name(i));
        int ns = bk ? gr_broker_key_synonyms(bk, syn, 4) : 0;
        for (int j = 0; j < ns; j++) ADD(syn[j]);
    }
    for (int i = 0; i < v->dyn_broker.n; i++) ADD(v->dyn_broker.keys[i]);
    for (int i = 0; i < v->dyn_default.n; i++) ADD(v->dyn_default.keys[i]);
    for (int i = 0; v->static_cfg && i < v->static_cfg->n_static; i++) ADD(v->static_cfg->static_keys[i]);
#undef ADD
    return n;
}

static void describe_topic(struct gr_broker *b, struct gr_api_req *req, int16_t ver, bool syn,
                           const struct DescribeConfigsRequest_DescribeConfigsResource *r,
                           struct DescribeConfigsResponse_DescribeConfigsResult *o, struct res_err *e) {
    char why[256];
    if (!r->ResourceName || gr_topic_validate_name(r->ResourceName, why, sizeof why) != GR_KERR_NONE) {
        set_err(e, GR_KERR_INVALID_TOPIC_EXCEPTION, "%s", why);
        return;
    }
    if (!topic_known(b, r->ResourceName)) {
        e->code = GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
        e->msg[0] = 0;
        return;
    }
    struct gr_kzk_config tc = {0};
    if (b->zk && gr_kzk_get_entity_config(b->zk, "topics", r->ResourceName, &tc) != 0) {
        set_err(e, GR_KERR_UNKNOWN_SERVER_ERROR, "Cannot read /config/topics/%s", r->ResourceName);
        return;
    }
    struct gr_dcm_view v;
    gr_dcm_view_get(b->dynamic_config, b->cfg, &v);
    gr_dcm_view_topic(&v, &tc);
    int max = gr_topic_key_count();
    o->Configs = gr_api_alloc(req, sizeof(*o->Configs) * (size_t)max);
    int n = 0;
    for (int i = 0; i < max; i++) {
        const char *name = gr_topic_key_name(i);
        struct gr_cfg_entry ent;
        if (!wanted(r, name) || !gr_topic_config_resolve(&v.layers, name, &ent)) continue;
        fill_entry(req, ver, syn, &ent, &o->Configs[n++]);
    }
    o->ConfigsCount = n;
    gr_dcm_view_release(&v);
    gr_kzk_config_release(&tc);
}

static void describe_broker(struct gr_broker *b, struct gr_api_req *req, int16_t ver, bool syn,
                            const struct DescribeConfigsRequest_DescribeConfigsResource *r,
                            struct DescribeConfigsResponse_DescribeConfigsResult *o, struct res_err *e) {
    bool per_broker;
    if (!broker_name_ok(b, r->ResourceName, &per_broker, e)) return;
    struct gr_dcm_view v;
    gr_dcm_view_get(b->dynamic_config, b->cfg, &v);
    enum { MAXN = 512 };
    const char **names = gr_api_alloc(req, sizeof(char *) * MAXN);
    int nn = broker_names(&v, names, MAXN);
    o->Configs = gr_api_alloc(req, sizeof(*o->Configs) * (size_t)nn);
    int n = 0;
    for (int i = 0; i < nn; i++) {
        struct gr_cfg_entry ent;
        if (!wanted(r, names[i]) || !gr_broker_config_resolve(&v.layers, names[i], per_broker, &ent)) continue;
        fill_entry(req, ver, syn, &ent, &o->Configs[n++]);
    }
    o->ConfigsCount = n;
    gr_dcm_view_release(&v);
}

/* Kafka 2.7's config authorization: a topic needs Topic `op`, a broker (or broker logger) Cluster
 * `op` (DESCRIBE_CONFIGS or ALTER_CONFIGS). False with the error in *e. */
static bool config_authorized(struct gr_api_req *req, int8_t type, const char *name, int op, struct res_err *e) {
    if (type == RT_TOPIC) {
        if (gr_api_authorized(req, op, GR_ACL_RES_TOPIC, name ? name : "")) return true;
        set_err(e, GR_KERR_TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.");
        return false;
    }
    if (gr_api_authorized_cluster(req, op)) return true;
    set_err(e, GR_KERR_CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.");
    return false;
}

void gr_handle_describe_configs(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                void *body) {
    const struct DescribeConfigsRequest *rq = body;
    int16_t ver = hdr->RequestApiVersion;
    struct DescribeConfigsResponse *resp = gr_api_new_response(req);
    int n = rq->ResourcesCount > 0 ? rq->ResourcesCount : 0;
    resp->ResultsCount = n;
    resp->Results = gr_api_alloc(req, sizeof(*resp->Results) * (size_t)(n ? n : 1));
    bool syn = ver >= 1 && rq->IncludeSynonyms;
    for (int i = 0; i < n; i++) {
        const struct DescribeConfigsRequest_DescribeConfigsResource *r = &rq->Resources[i];
        struct DescribeConfigsResponse_DescribeConfigsResult *o = &resp->Results[i];
        o->ResourceType = r->ResourceType;
        o->ResourceName = r->ResourceName ? r->ResourceName : gr_api_strdup(req, "");
        o->ConfigsCount = 0;
        o->Configs = NULL;
        struct res_err e = {0};
        if (!config_authorized(req, r->ResourceType, r->ResourceName, GR_ACL_OP_DESCRIBE_CONFIGS, &e)) {
            /* e holds the error */
        } else if (r->ResourceType == RT_TOPIC)
            describe_topic(b, req, ver, syn, r, o, &e);
        else if (r->ResourceType == RT_BROKER)
            describe_broker(b, req, ver, syn, r, o, &e);
        else if (r->ResourceType == RT_BROKER_LOGGER)
            describe_broker_logger(b, req, r, o, &e);
        else
            set_err(&e, GR_KERR_INVALID_REQUEST, "Unsupported resource type: %s", type_word(r->ResourceType));
        o->ErrorCode = e.code;
        o->ErrorMessage = e.code && e.msg[0] ? gr_api_strdup(req, e.msg) : NULL;
        if (e.code) {
            o->ConfigsCount = 0;
            gr_info(LOGGER, "Error processing describe configs request for resource %s %s: %s %s",
                    type_word(r->ResourceType), r->ResourceName ? r->ResourceName : "null", gr_kerr_name(e.code),
                    e.msg);
        }
    }
    gr_api_respond(req, resp);
}

/* ---------------- alters (both APIs) ---------------- */

/* Validates the complete new config of a resource; returns the error code (message in e). */
static int16_t validate(int8_t type, bool per_broker, const char *rname, const struct gr_kzk_config *c,
                        struct res_err *e) {
    char why[400];
    for (int i = 0; i < c->n; i++) {
        int rc = type == RT_TOPIC ? gr_topic_config_check(c->keys[i], c->values[i], why, sizeof why)
                                  : gr_broker_config_check(c->keys[i], c->values[i], per_broker, why, sizeof why);
        if (rc == GR_CFG_UNKNOWN_KEY) return set_err(e, GR_KERR_INVALID_CONFIG, "%s", why);
        if (rc != GR_CFG_OK)
            return set_err(e, GR_KERR_INVALID_REQUEST,
                           "Invalid config value for resource ConfigResource(type=%s, name='%s'): %s", type_word(type),
                           rname, why);
    }
    if (type == RT_TOPIC && gr_topic_configs_check_all(c->n, c->keys, c->values, why, sizeof why) != GR_CFG_OK)
        return set_err(e, GR_KERR_INVALID_CONFIG, "%s", why);
    return GR_KERR_NONE;
}

/* Common checks and the entity (type, name) for an alter of resource (type, rname). */
static int16_t alter_target(struct gr_broker *b, int8_t type, const char *rname, const char **etype, const char **ename,
                            bool *per_broker, struct res_err *e) {
    if (type == RT_TOPIC) {
        if (!rname || !topic_known(b, rname))
            return set_err(e, GR_KERR_UNKNOWN_TOPIC_OR_PARTITION, "The topic '%s' does not exist.",
                           rname ? rname : "null");
        *etype = "topics";
        *ename = rname;
        *per_broker = false;
        return GR_KERR_NONE;
    }
    if (type == RT_BROKER) {
        *per_broker = false;
        if (!broker_name_ok(b, rname, per_broker, e)) {
            if (strncmp(e->msg, "Unexpected", 10) == 0) /* "or empty string" is describe's wording only */
                snprintf(e->msg, sizeof e->msg, "Unexpected broker id, expected %d, but received %s", b->broker_id,
                         rname);
            return e->code;
        }
        *etype = "brokers";
        *ename = *per_broker ? rname : "<default>";
        return GR_KERR_NONE;
    }
    return set_err(e, GR_KERR_INVALID_REQUEST,
                   "AlterConfigs is only supported for topics and brokers, but resource type is %s", type_word(type));
}

static int16_t write_config(struct gr_broker *b, const char *etype, const char *ename, const struct gr_kzk_config *c,
                            struct res_err *e) {
    if (!b->zk) return set_err(e, GR_KERR_UNKNOWN_SERVER_ERROR, "No ZooKeeper client");
    int rc = gr_kzk_set_entity_config(b->zk, etype, ename, c);
    if (rc)
        return set_err(e, GR_KERR_UNKNOWN_SERVER_ERROR, "Cannot write /config/%s/%s: %s", etype, ename,
                       gr_kzk_strerror(rc));
    gr_info(LOGGER, "Updated /config/%s/%s (%d keys)", etype, ename, c->n);
    return GR_KERR_NONE;
}

static int16_t alter_one(struct gr_broker *b, const struct AlterConfigsRequest_AlterConfigsResource *r,
                         bool validate_only, struct res_err *e) {
    int nc = r->ConfigsCount > 0 ? r->ConfigsCount : 0;
    for (int i = 0; i < nc; i++)
        if (!r->Configs[i].Value || !r->Configs[i].Name)
            return set_err(e, GR_KERR_INVALID_REQUEST, "Null value not supported for : %s",
                           r->Configs[i].Name ? r->Configs[i].Name : "null");
    const char *etype, *ename;
    bool per_broker;
    int16_t code = alter_target(b, r->ResourceType, r->ResourceName, &etype, &ename, &per_broker, e);
    if (code) return code;
    struct gr_kzk_config c = {0};
    for (int i = 0; i < nc; i++) gr_kzk_config_set(&c, r->Configs[i].Name, r->Configs[i].Value);
    code = validate(r->ResourceType, per_broker, r->ResourceName ? r->ResourceName : "", &c, e);
    if (!code && !validate_only) code = write_config(b, etype, ename, &c, e);
    gr_kzk_config_release(&c);
    return code;
}

static void respond_err(struct gr_api_req *req, const struct res_err *e, int16_t *code, char **msg) {
    *code = e->code;
    *msg = e->code && e->msg[0] ? gr_api_strdup(req, e->msg) : NULL;
}

void gr_handle_alter_configs(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr, void *body) {
    (void)hdr;
    const struct AlterConfigsRequest *rq = body;
    struct AlterConfigsResponse *resp = gr_api_new_response(req);
    int n = rq->ResourcesCount > 0 ? rq->ResourcesCount : 0;
    resp->ResponsesCount = n;
    resp->Responses = gr_api_alloc(req, sizeof(*resp->Responses) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        const struct AlterConfigsRequest_AlterConfigsResource *r = &rq->Resources[i];
        struct AlterConfigsResponse_AlterConfigsResourceResponse *o = &resp->Responses[i];
        o->ResourceType = r->ResourceType;
        o->ResourceName = r->ResourceName ? r->ResourceName : gr_api_strdup(req, "");
        struct res_err e = {0};
        if (config_authorized(req, r->ResourceType, r->ResourceName, GR_ACL_OP_ALTER_CONFIGS, &e) &&
            alter_one(b, r, rq->ValidateOnly, &e))
            gr_info(LOGGER, "AlterConfigs %s %s: %s %s", type_word(r->ResourceType), o->ResourceName,
                    gr_kerr_name(e.code), e.msg);
        respond_err(req, &e, &o->ErrorCode, &o->ErrorMessage);
    }
    gr_api_respond(req, resp);
}

/* ---------------- IncrementalAlterConfigs ---------------- */

static bool is_list(int8_t type, const char *name) {
    int t = type == RT_TOPIC ? gr_topic_key_type(name) : gr_config_key_type(name);
    if (type == RT_BROKER && t == GR_CONFIG_TYPE_UNKNOWN && strcmp(name, "log.cleanup.policy") == 0)
        t = GR_CONFIG_TYPE_LIST;
    return t == GR_CONFIG_TYPE_LIST;
}

/* APPEND / SUBTRACT of the comma-separated items of val to/from the current list (or the
 * default). */
static void list_op(struct gr_kzk_config *c, int8_t type, const char *name, const char *val, bool append) {
    const char *cur = gr_kzk_config_get(c, name);
    if (!cur) cur = type == RT_TOPIC ? gr_topic_key_default(name) : gr_config_default_value(name);
    if (!cur) cur = "";
    size_t cap = strlen(cur) + strlen(val) + 2;
    char *out = gr_calloc(1, cap);
    char *items = gr_strdup(cur), *save = NULL;
    for (char *t = strtok_r(items, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        bool drop = false;
        if (!append) {
            char *vs = gr_strdup(val), *s2 = NULL;
            for (char *u = strtok_r(vs, ",", &s2); u && !drop; u = strtok_r(NULL, ",", &s2)) drop = strcmp(u, t) == 0;
            free(vs);
        }
        if (!drop) {
            if (*out) strcat(out, ",");
            strcat(out, t);
        }
    }
    if (append && *val) {
        if (*out) strcat(out, ",");
        strcat(out, val);
    }
    gr_kzk_config_set(c, name, out);
    free(out);
    free(items);
}

static void config_delete(struct gr_kzk_config *c, const char *key) {
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->keys[i], key) == 0) {
            free(c->keys[i]);
            free(c->values[i]);
            memmove(&c->keys[i], &c->keys[i + 1], sizeof(char *) * (size_t)(c->n - i - 1));
            memmove(&c->values[i], &c->values[i + 1], sizeof(char *) * (size_t)(c->n - i - 1));
            c->n--;
            return;
        }
}

static int16_t incremental_one(struct gr_broker *b, const struct IncrementalAlterConfigsRequest_AlterConfigsResource *r,
                               bool validate_only, struct res_err *e) {
    int nc = r->ConfigsCount > 0 ? r->ConfigsCount : 0;
    for (int i = 0; i < nc; i++) {
        const struct IncrementalAlterConfigsRequest_AlterableConfig *x = &r->Configs[i];
        if (!x->Name) return set_err(e, GR_KERR_INVALID_REQUEST, "Null config name");
        for (int j = 0; j < i; j++)
            if (strcmp(r->Configs[j].Name, x->Name) == 0)
                return set_err(e, GR_KERR_INVALID_REQUEST, "Error due to duplicate config keys : %s", x->Name);
        if (!x->Value && x->ConfigOperation != OP_DELETE)
            return set_err(e, GR_KERR_INVALID_REQUEST, "Null value not supported for : %s", x->Name);
        if (x->ConfigOperation < OP_SET || x->ConfigOperation > OP_SUBTRACT)
            return set_err(e, GR_KERR_INVALID_REQUEST, "Unknown config operation %d for config key: %s",
                           x->ConfigOperation, x->Name);
    }
    if (r->ResourceType == RT_BROKER_LOGGER) return incremental_broker_logger(b, r, validate_only, e);
    const char *etype, *ename;
    bool per_broker;
    int16_t code = alter_target(b, r->ResourceType, r->ResourceName, &etype, &ename, &per_broker, e);
    if (code) return code;
    struct gr_kzk_config c = {0};
    if (b->zk && gr_kzk_get_entity_config(b->zk, etype, ename, &c) != 0)
        return set_err(e, GR_KERR_UNKNOWN_SERVER_ERROR, "Cannot read /config/%s/%s", etype, ename);
    for (int i = 0; i < nc && !code; i++) {
        const struct IncrementalAlterConfigsRequest_AlterableConfig *x = &r->Configs[i];
        switch (x->ConfigOperation) {
        case OP_SET: gr_kzk_config_set(&c, x->Name, x->Value); break;
        case OP_DELETE: config_delete(&c, x->Name); break;
        default:
            if (r->ResourceType == RT_TOPIC && !gr_topic_key_known(x->Name)) {
                code = set_err(e, GR_KERR_INVALID_CONFIG, "Unknown topic config name: %s", x->Name);
                break;
            }
            if (!is_list(r->ResourceType, x->Name)) {
                code = set_err(e, GR_KERR_INVALID_REQUEST, "Config value %s is not allowed for config key: %s",
                               x->ConfigOperation == OP_APPEND ? "append" : "subtract", x->Name);
                break;
            }
            list_op(&c, r->ResourceType, x->Name, x->Value, x->ConfigOperation == OP_APPEND);
            break;
        }
    }
    if (!code) code = validate(r->ResourceType, per_broker, r->ResourceName ? r->ResourceName : "", &c, e);
    if (!code && !validate_only) code = write_config(b, etype, ename, &c, e);
    gr_kzk_config_release(&c);
    return code;
}

void gr_handle_incremental_alter_configs(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                         void *body) {
    (void)hdr;
    const struct IncrementalAlterConfigsRequest *rq = body;
    struct IncrementalAlterConfigsResponse *resp = gr_api_new_response(req);
    int n = rq->ResourcesCount > 0 ? rq->ResourcesCount : 0;
    resp->ResponsesCount = n;
    resp->Responses = gr_api_alloc(req, sizeof(*resp->Responses) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        const struct IncrementalAlterConfigsRequest_AlterConfigsResource *r = &rq->Resources[i];
        struct IncrementalAlterConfigsResponse_AlterConfigsResourceResponse *o = &resp->Responses[i];
        o->ResourceType = r->ResourceType;
        o->ResourceName = r->ResourceName ? r->ResourceName : gr_api_strdup(req, "");
        struct res_err e = {0};
        if (config_authorized(req, r->ResourceType, r->ResourceName, GR_ACL_OP_ALTER_CONFIGS, &e) &&
            incremental_one(b, r, rq->ValidateOnly, &e))
            gr_info(LOGGER, "IncrementalAlterConfigs %s %s: %s %s", type_word(r->ResourceType), o->ResourceName,
                    gr_kerr_name(e.code), e.msg);
        respond_err(req, &e, &o->ErrorCode, &o->ErrorMessage);
    }
    gr_api_respond(req, resp);
}

/* ---------------- CreateTopics v5 ---------------- */

void gr_configs_fill_created_topic(struct gr_broker *b, struct gr_api_req *req, int n, const char *const *names,
                                   const char *const *values, struct CreateTopicsResponse_CreatableTopicResult *r) {
    struct gr_kzk_config tc = {0};
    for (int i = 0; i < n; i++)
        if (names[i] && values[i]) gr_kzk_config_set(&tc, names[i], values[i]);
    struct gr_dcm_view v;
    gr_dcm_view_get(b->dynamic_config, b->cfg, &v);
    gr_dcm_view_topic(&v, &tc);
    int max = gr_topic_key_count();
    r->Configs = gr_api_alloc(req, sizeof(*r->Configs) * (size_t)max);
    int k = 0;
    for (int i = 0; i < max; i++) {
        struct gr_cfg_entry ent;
        if (!gr_topic_config_resolve(&v.layers, gr_topic_key_name(i), &ent)) continue;
        r->Configs[k].Name = gr_api_strdup(req, ent.name);
        r->Configs[k].Value = gr_api_strdup(req, gr_cfg_entry_value(&ent));
        r->Configs[k].ReadOnly = false;
        r->Configs[k].ConfigSource = ent.source;
        r->Configs[k].IsSensitive = false;
        k++;
    }
    r->ConfigsCount = k;
    gr_dcm_view_release(&v);
    gr_kzk_config_release(&tc);
}
