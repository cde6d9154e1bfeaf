/* DescribeClientQuotas v0-1 and AlterClientQuotas v0-1 (v1 is flexible only), as Kafka 2.7's
 * AdminManager. Not served: Kafka 2.8+'s "ip" entity (KIP-612 connection_creation_rate), which
 * Gregor does not enforce; it is an unknown entity type here (INVALID_REQUEST).
 *
 *   - Entities: "user" and "client-id" (alone or together); a null name is the default entity
 *     (<default>). Stored as Kafka stores them: /config/users/<u>, /config/users/<u>/clients/<c>,
 *     /config/clients/<c>, names URL-encoded (broker/quota_manager.h gr_quota_sanitize), with a
 *     config change notification, so every broker's quota manager reloads.
 *   - Keys: producer_byte_rate, consumer_byte_rate (must be whole numbers), request_percentage,
 *     controller_mutation_rate (enforced by broker/controller_mutation_quota.c). Unknown key, empty or unknown
 *     entity type, empty name -> INVALID_REQUEST, as Kafka.
 *   - DescribeClientQuotas filters with Kafka's rules: components EXACT(0) / DEFAULT(1) / ANY(2),
 *     `strict` excludes entities with components not named; an unknown entity type is
 *     UNSUPPORTED_VERSION, a duplicate or empty one INVALID_REQUEST.
 *   - Any broker serves them (ZooKeeper reads/writes on the I/O thread, as the config APIs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "broker/quota_manager.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "zk/backend.h"
#include "zk/kzk.h"

#define LOGGER "kafka.server.AdminManager"
#define DFLT "<default>"

static bool quota_key(const char *k, bool *is_long) {
    *is_long = strcmp(k, "producer_byte_rate") == 0 || strcmp(k, "consumer_byte_rate") == 0;
    return *is_long || strcmp(k, "request_percentage") == 0 || strcmp(k, "controller_mutation_rate") == 0;
}

/* ---------------- AlterClientQuotas ---------------- */

/* The entity's path under /config: type ("users"/"clients") and name (sanitized, malloc'd). */
static int16_t entity_path(const struct AlterClientQuotasRequest_EntryData *e, const char **type, char **name,
                           char **user_node, char *msg, size_t msglen) {
    const char *user = NULL, *client = NULL;
    bool has_user = false, has_client = false;
    if (e->EntityCount <= 0) {
        snprintf(msg, msglen, "Invalid empty client quota entity");
        return GR_KERR_INVALID_REQUEST;
    }
    for (int i = 0; i < e->EntityCount; i++) {
        const char *t = e->Entity[i].EntityType ? e->Entity[i].EntityType : "";
        const char *n = e->Entity[i].EntityName;
        if (strcmp(t, "user") == 0 && !has_user)
            has_user = true, user = n;
        else if (strcmp(t, "client-id") == 0 && !has_client)
            has_client = true, client = n;
        else {
            snprintf(msg, msglen, "Unhandled client quota entity type: %s", t);
            return GR_KERR_INVALID_REQUEST;
        }
        if (n && !*n) {
            snprintf(msg, msglen, "Empty %s not supported", t);
            return GR_KERR_INVALID_REQUEST;
        }
    }
    char *su = has_user ? (user ? gr_quota_sanitize(user) : gr_strdup(DFLT)) : NULL;
    char *sc = has_client ? (client ? gr_quota_sanitize(client) : gr_strdup(DFLT)) : NULL;
    if (su && sc) {
        *type = "users";
        *name = gr_asprintf("%s/clients/%s", su, sc);
        *user_node = su;
        su = NULL;
    } else if (su) {
        *type = "users";
        *name = su;
        su = NULL;
    } else {
        *type = "clients";
        *name = sc;
        sc = NULL;
    }
    free(su);
    free(sc);
    return GR_KERR_NONE;
}

/* Applies one op to c (AdminManager.alterClientQuotas): remove, or set with the key's type. */
static int16_t apply_op(struct gr_kzk_config *c, const struct AlterClientQuotasRequest_OpData *op, char *msg,
                        size_t msglen) {
    const char *k = op->Key ? op->Key : "";
    bool is_long;
    if (op->Remove) {
        struct gr_kzk_config n2 = {0};
        for (int j = 0; j < c->n; j++)
            if (strcmp(c->keys[j], k) != 0) gr_kzk_config_set(&n2, c->keys[j], c->values[j]);
        gr_kzk_config_release(c);
        *c = n2;
        return GR_KERR_NONE;
    }
    if (!quota_key(k, &is_long)) {
        snprintf(msg, msglen, "Invalid configuration key %s", k);
        return GR_KERR_INVALID_REQUEST;
    }
    char val[64];
    if (is_long) {
        long long lv = (long long)(op->Value + 1e-6);
        if ((double)lv - op->Value > 1e-6 || op->Value - (double)lv > 1e-6) {
            snprintf(msg, msglen, "Configuration %s must be a Long value", k);
            return GR_KERR_INVALID_REQUEST;
        }
        snprintf(val, sizeof val, "%lld", lv);
    } else {
        snprintf(val, sizeof val, "%.17g", op->Value);
        if (!strpbrk(val, ".eEn")) strcat(val, ".0");
    }
    gr_kzk_config_set(c, k, val);
    return GR_KERR_NONE;
}

/* Writes the entity (and, for users/<u>/clients/<c>, its empty parents first, as Kafka creates
 * them) with a change notification. */
static int16_t write_entity(struct gr_broker *b, const char *type, const char *name, const char *user_node,
                            const struct gr_kzk_config *c, char *msg, size_t msglen) {
    if (user_node) {
        struct gr_zk_backend *zb = gr_kzk_backend(b->zk);
        char *p1 = gr_asprintf("/config/users/%s", user_node);
        char *p2 = gr_asprintf("/config/users/%s/clients", user_node);
        gr_zkb_create(zb, "/config/users", NULL, 0, 0, NULL); /* GR_ZNODEEXISTS is fine */
        gr_zkb_create(zb, p1, NULL, 0, 0, NULL);
        gr_zkb_create(zb, p2, NULL, 0, 0, NULL);
        free(p1);
        free(p2);
    }
    int rc = gr_kzk_set_entity_config(b->zk, type, name, c);
    if (rc) {
        snprintf(msg, msglen, "Cannot write /config/%s/%s: %s", type, name, gr_kzk_strerror(rc));
        return GR_KERR_UNKNOWN_SERVER_ERROR;
    }
    gr_info(LOGGER, "Updated client quotas of /config/%s/%s", type, name);
    return GR_KERR_NONE;
}

static int16_t alter_entry(struct gr_broker *b, const struct AlterClientQuotasRequest_EntryData *e, bool validate_only,
                           char *msg, size_t msglen) {
    const char *type = NULL;
    char *name = NULL, *user_node = NULL;
    int16_t code = entity_path(e, &type, &name, &user_node, msg, msglen);
    if (code) return code;
    struct gr_kzk_config c = {0};
    if (!b->zk) {
        code = GR_KERR_UNKNOWN_SERVER_ERROR;
    } else if (gr_kzk_get_entity_config(b->zk, type, name, &c) != 0) {
        snprintf(msg, msglen, "Cannot read /config/%s/%s", type, name);
        code = GR_KERR_UNKNOWN_SERVER_ERROR;
    }
    for (int i = 0; !code && i < e->OpsCount; i++) code = apply_op(&c, &e->Ops[i], msg, msglen);
    if (!code && !validate_only) code = write_entity(b, type, name, user_node, &c, msg, msglen);
    gr_kzk_config_release(&c);
    free(name);
    free(user_node);
    return code;
}

void gr_handle_alter_client_quotas(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                   void *body) {
    (void)hdr;
    const struct AlterClientQuotasRequest *rq = body;
    struct AlterClientQuotasResponse *resp = gr_api_new_response(req);
    bool allowed = gr_api_authorized_cluster(req, GR_ACL_OP_ALTER_CONFIGS);
    int n = rq->EntriesCount > 0 ? rq->EntriesCount : 0;
    resp->EntriesCount = n;
    resp->Entries = gr_api_alloc(req, sizeof(*resp->Entries) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        const struct AlterClientQuotasRequest_EntryData *e = &rq->Entries[i];
        struct AlterClientQuotasResponse_EntryData *o = &resp->Entries[i];
        int ne = e->EntityCount > 0 ? e->EntityCount : 0;
        o->EntityCount = ne;
        o->Entity = gr_api_alloc(req, sizeof(*o->Entity) * (size_t)(ne ? ne : 1));
        for (int j = 0; j < ne; j++) {
            o->Entity[j].EntityType = e->Entity[j].EntityType;
            o->Entity[j].EntityName = e->Entity[j].EntityName;
        }
        char msg[256] = "";
        o->ErrorCode = allowed ? alter_entry(b, e, rq->ValidateOnly, msg, sizeof msg)
                               : GR_KERR_CLUSTER_AUTHORIZATION_FAILED; /* Cluster ALTER_CONFIGS, as Kafka 2.7 */
        o->ErrorMessage = o->ErrorCode && msg[0] ? gr_api_strdup(req, msg) : NULL;
        if (o->ErrorCode)
            gr_info(LOGGER, "Error encountered while updating client quotas: %s %s", gr_kerr_name(o->ErrorCode), msg);
    }
    gr_api_respond(req, resp);
}

/* ---------------- DescribeClientQuotas ---------------- */

/* One stored entity: a component is absent (has false), the default (name NULL) or named. */
struct qrow {
    bool has_user, has_client;
    char *user, *client; /* desanitized */
    struct gr_kzk_config cfg;
};

static void add_row(struct gr_kzk *zk, const char *type, const char *path, const char *u, const char *c,
                    struct qrow **rows, int *n, int *cap) {
    struct qrow r = {0};
    if (gr_kzk_get_entity_config(zk, type, path, &r.cfg) != 0) return;
    bool is_long, any = false;
    for (int i = 0; i < r.cfg.n; i++) any |= quota_key(r.cfg.keys[i], &is_long);
    if (!any) {
        gr_kzk_config_release(&r.cfg);
        return;
    }
    r.has_user = u != NULL;
    r.has_client = c != NULL;
    r.user = u && strcmp(u, DFLT) != 0 ? gr_quota_desanitize(u) : NULL;
    r.client = c && strcmp(c, DFLT) != 0 ? gr_quota_desanitize(c) : NULL;
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *rows = gr_realloc(*rows, sizeof **rows * (size_t)*cap);
    }
    (*rows)[(*n)++] = r;
}

static int load_rows(struct gr_kzk *zk, struct qrow **rows) {
    struct gr_zk_backend *zb = gr_kzk_backend(zk);
    int n = 0, cap = 0;
    struct gr_zstrings users = {0}, clients = {0};
    if (gr_zkb_get_children(zb, "/config/users", false, &users) == GR_ZOK)
        for (int i = 0; i < users.count; i++) {
            add_row(zk, "users", users.names[i], users.names[i], NULL, rows, &n, &cap);
            char *p = gr_asprintf("/config/users/%s/clients", users.names[i]);
            struct gr_zstrings uc = {0};
            if (gr_zkb_get_children(zb, p, false, &uc) == GR_ZOK)
                for (int j = 0; j < uc.count; j++) {
                    char *nm = gr_asprintf("%s/clients/%s", users.names[i], uc.names[j]);
                    add_row(zk, "users", nm, users.names[i], uc.names[j], rows, &n, &cap);
                    free(nm);
                }
            gr_zstrings_free(&uc);
            free(p);
        }
    if (gr_zkb_get_children(zb, "/config/clients", false, &clients) == GR_ZOK)
        for (int i = 0; i < clients.count; i++)
            add_row(zk, "clients", clients.names[i], NULL, clients.names[i], rows, &n, &cap);
    gr_zstrings_free(&users);
    gr_zstrings_free(&clients);
    return n;
}

/* Kafka's matches(): comp NULL = no component of that type in the filter. */
static bool matches(const struct DescribeClientQuotasRequest_ComponentData *comp, bool strict, bool has,
                    const char *name) {
    if (!comp) return !has || !strict;
    if (!has) return false;
    switch (comp->MatchType) {
    case 0: return name && comp->Match && strcmp(name, comp->Match) == 0;
    case 1: return name == NULL;
    default: return true;
    }
}

/* Kafka's describeClientQuotas checks of the filter: *cu / *cc get the user / client-id
 * components (NULL when absent). Returns the error (message in msg). */
static int16_t check_filter(const struct DescribeClientQuotasRequest *rq,
                            const struct DescribeClientQuotasRequest_ComponentData **cu,
                            const struct DescribeClientQuotasRequest_ComponentData **cc, char *msg, size_t msglen) {
    *cu = *cc = NULL;
    for (int i = 0; i < rq->ComponentsCount; i++) {
        const struct DescribeClientQuotasRequest_ComponentData *c = &rq->Components[i];
        const char *t = c->EntityType ? c->EntityType : "";
        const struct DescribeClientQuotasRequest_ComponentData **slot = strcmp(t, "user") == 0        ? cu
                                                                        : strcmp(t, "client-id") == 0 ? cc
                                                                                                      : NULL;
        if (!*t) {
            snprintf(msg, msglen, "Unexpected empty filter component entity type");
            return GR_KERR_INVALID_REQUEST;
        }
        if (!slot) {
            snprintf(msg, msglen, "Custom entity type '%s' not supported", t);
            return GR_KERR_UNSUPPORTED_VERSION;
        }
        if (*slot) {
            snprintf(msg, msglen, "Duplicate %s filter component entity type", slot == cu ? "user" : "client");
            return GR_KERR_INVALID_REQUEST;
        }
        *slot = c;
        if (c->MatchType < 0 || c->MatchType > 2 || (c->MatchType == 0 && !c->Match)) {
            snprintf(msg, msglen, "Invalid match type %d%s for %s", c->MatchType,
                     c->MatchType == 0 ? " without a name" : "", t);
            return GR_KERR_INVALID_REQUEST;
        }
    }
    return GR_KERR_NONE;
}

/* One DescribeClientQuotas entry for a stored entity (strings copied into the request arena). */
static void fill_entry(struct gr_api_req *req, const struct qrow *r, struct DescribeClientQuotasResponse_EntryData *o) {
    o->Entity = gr_api_alloc(req, sizeof(*o->Entity) * 2);
    o->EntityCount = 0;
    if (r->has_user)
        o->Entity[o->EntityCount++] =
            (struct DescribeClientQuotasResponse_EntityData){gr_api_strdup(req, "user"), gr_api_strdup(req, r->user)};
    if (r->has_client)
        o->Entity[o->EntityCount++] = (struct DescribeClientQuotasResponse_EntityData){gr_api_strdup(req, "client-id"),
                                                                                       gr_api_strdup(req, r->client)};
    o->Values = gr_api_alloc(req, sizeof(*o->Values) * (size_t)(r->cfg.n ? r->cfg.n : 1));
    o->ValuesCount = 0;
    for (int j = 0; j < r->cfg.n; j++) {
        bool is_long;
        if (!quota_key(r->cfg.keys[j], &is_long)) continue;
        o->Values[o->ValuesCount].Key = gr_api_strdup(req, r->cfg.keys[j]);
        o->Values[o->ValuesCount++].Value = strtod(r->cfg.values[j], NULL);
    }
}

void gr_handle_describe_client_quotas(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                      void *body) {
    (void)hdr;
    const struct DescribeClientQuotasRequest *rq = body;
    struct DescribeClientQuotasResponse *resp = gr_api_new_response(req);
    resp->EntriesCount = -1;
    resp->Entries = NULL;
    const struct DescribeClientQuotasRequest_ComponentData *cu, *cc;
    char msg[256] = "";
    int16_t code = !gr_api_authorized_cluster(req, GR_ACL_OP_DESCRIBE_CONFIGS) ? GR_KERR_CLUSTER_AUTHORIZATION_FAILED
                                                                           : check_filter(rq, &cu, &cc, msg, sizeof msg);
    if (!code && !b->zk) code = GR_KERR_UNKNOWN_SERVER_ERROR;
    if (code) {
        resp->ErrorCode = code;
        resp->ErrorMessage = msg[0] ? gr_api_strdup(req, msg) : NULL;
        gr_api_respond(req, resp);
        return;
    }
    struct qrow *rows = NULL;
    int n = load_rows(b->zk, &rows);
    resp->Entries = gr_api_alloc(req, sizeof(*resp->Entries) * (size_t)(n ? n : 1));
    int k = 0;
    for (int i = 0; i < n; i++) {
        struct qrow *r = &rows[i];
        if (matches(cu, rq->Strict, r->has_user, r->user) && matches(cc, rq->Strict, r->has_client, r->client))
            fill_entry(req, r, &resp->Entries[k++]);
        free(r->user);
        free(r->client);
        gr_kzk_config_release(&r->cfg);
    }
    free(rows);
    resp->EntriesCount = k;
    resp->ErrorCode = GR_KERR_NONE;
    gr_api_respond(req, resp);
}
