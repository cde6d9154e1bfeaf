/* gregorctl configs describe|alter: Kafka 2.7's kafka-configs.sh (ConfigCommand) with
 * --bootstrap-server, same options and output.
 *
 *   configs --describe|describe --entity-type topics|brokers|clients|users
 *           [--entity-name N | --entity-default] [--all]
 *   configs --alter|alter --entity-type ... (--entity-name N | --entity-default)
 *           [--add-config k=v,k2=v2] [--delete-config k,k2]
 *
 * (--entity-type users --entity-name U --entity-type clients --entity-name C addresses the
 * user+client-id quota entity, as kafka-configs.sh.) Topics are altered with
 * IncrementalAlterConfigs (SET/DELETE), brokers with AlterConfigs carrying the merged dynamic
 * config, quotas with AlterClientQuotas; describes use DescribeConfigs (synonyms included) and
 * DescribeClientQuotas. Broker resources are sent to that broker (found through Metadata). A
 * square-bracketed value in --add-config keeps its commas (k=[a,b]). Exit: 0 ok, 1 error, 2 usage. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/ctl.h"
#include "cmd/ctl_kafka.h"
#include "common/kerr.h"
#include "common/util.h"
#include "protocol/messages.h"

#define RT_TOPIC 2
#define RT_BROKER 4

struct cfg_args {
    bool describe, alter, all;
    const char *types[2];
    const char *names[2]; /* "" = --entity-default; NULL = none given */
    int ntypes, nnames;
    const char *add, *del;
};

static int usage(void) {
    fprintf(stderr,
            "usage: gregorctl configs --describe|--alter --entity-type topics|brokers|clients|users\n"
            "         [--entity-name N | --entity-default] [--all] [--add-config k=v,k2=v2] [--delete-config k,k2]\n");
    return 2;
}

static const char *source_name(int8_t s) {
    switch (s) {
    case 1: return "DYNAMIC_TOPIC_CONFIG";
    case 2: return "DYNAMIC_BROKER_CONFIG";
    case 3: return "DYNAMIC_DEFAULT_BROKER_CONFIG";
    case 4: return "STATIC_BROKER_CONFIG";
    case 5: return "DEFAULT_CONFIG";
    case 6: return "DYNAMIC_BROKER_LOGGER_CONFIG";
    default: return "UNKNOWN";
    }
}

/* Connects *out to the broker `id` as Metadata on boot advertises it (falls back to boot). */
static struct ctl_kafka *broker_conn(struct ctl_kafka *boot, int32_t id, int timeout_ms, struct ctl_kafka *out,
                                     struct gr_arena *a) {
    struct MetadataResponse *md = ctl_kafka_metadata(boot, NULL, 0, a);
    for (int i = 0; md && i < md->BrokersCount; i++)
        if (md->Brokers[i].NodeId == id &&
            ctl_kafka_connect(md->Brokers[i].Host, md->Brokers[i].Port, timeout_ms, out) == 0)
            return out;
    return boot;
}

/* DescribeConfigs of one resource; NULL on error (printed). */
static struct DescribeConfigsResponse_DescribeConfigsResult *
describe_one(struct ctl_kafka *k, int8_t type, const char *name, bool synonyms, struct gr_arena *a) {
    struct DescribeConfigsRequest rq;
    gr_proto_init_struct(&gr_desc_DescribeConfigsRequest, &rq);
    rq.ResourcesCount = 1;
    rq.Resources = gr_arena_alloc(a, sizeof(*rq.Resources));
    rq.Resources[0].ResourceType = type;
    rq.Resources[0].ResourceName = gr_arena_strdup(a, name);
    rq.Resources[0].ConfigurationKeysCount = -1;
    rq.IncludeSynonyms = synonyms;
    struct DescribeConfigsResponse *r = ctl_kafka_call(k, GR_API_DESCRIBE_CONFIGS, 3, &rq, a);
    if (!r || r->ResultsCount != 1) {
        fprintf(stderr, "Error while executing config command: no DescribeConfigs response\n");
        return NULL;
    }
    struct DescribeConfigsResponse_DescribeConfigsResult *res = &r->Results[0];
    if (res->ErrorCode) {
        fprintf(stderr, "Error while executing config command: %s%s%s\n", gr_kerr_name(res->ErrorCode),
                res->ErrorMessage ? ": " : "", res->ErrorMessage ? res->ErrorMessage : "");
        return NULL;
    }
    return res;
}

static int describe_resource(struct ctl_kafka *boot, const struct ctl_opts *o, int8_t type, const char *etype,
                             const char *name, bool all) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct ctl_kafka bc = {0}, *k = boot;
    int8_t want = type == RT_TOPIC ? 1 : (*name ? 2 : 3);
    if (type == RT_BROKER && *name) {
        char *end;
        long id = strtol(name, &end, 10);
        if (*end) {
            fprintf(stderr, "The entity name for %s must be a valid integer broker id, found: %s\n", etype, name);
            gr_arena_free(&a);
            return 1;
        }
        k = broker_conn(boot, (int32_t)id, o->timeout_ms, &bc, &a);
    }
    if (type == RT_BROKER && !*name)
        printf("Default configs for %s in the cluster are:\n", etype);
    else
        printf("%s configs for %.*s %s are:\n", all ? "All" : "Dynamic", (int)strlen(etype) - 1, etype, name);
    struct DescribeConfigsResponse_DescribeConfigsResult *res = describe_one(k, type, name, true, &a);
    for (int i = 0; res && i < res->ConfigsCount; i++) {
        const struct DescribeConfigsResponse_DescribeConfigsResourceResult *e = &res->Configs[i];
        if (!all && e->ConfigSource != want) continue;
        printf("  %s=%s sensitive=%s synonyms={", e->Name, e->Value ? e->Value : "null",
               e->IsSensitive ? "true" : "false");
        for (int j = 0; j < e->SynonymsCount; j++)
            printf("%s%s:%s=%s", j ? ", " : "", source_name(e->Synonyms[j].Source), e->Synonyms[j].Name,
                   e->Synonyms[j].Value ? e->Synonyms[j].Value : "null");
        printf("}\n");
    }
    if (k != boot) ctl_kafka_close(&bc);
    gr_arena_free(&a);
    return res ? 0 : 1;
}

/* ---- --add-config / --delete-config parsing ---- */

struct kv {
    char *k, *v;
};

/* Splits "k=v,k2=[a,b]" into pairs (strings malloc'd). Returns the count or -1. */
static int parse_add(const char *s, struct kv *out, int max) {
    int n = 0;
    const char *p = s;
    while (p && *p) {
        const char *eq = strchr(p, '=');
        if (!eq || n >= max) return -1;
        const char *v = eq + 1, *end;
        if (*v == '[') {
            const char *rb = strchr(v, ']');
            if (!rb) return -1;
            out[n].v = gr_strndup(v + 1, (size_t)(rb - v - 1));
            end = rb + 1;
        } else {
            end = v + strcspn(v, ",");
            out[n].v = gr_strndup(v, (size_t)(end - v));
        }
        out[n].k = gr_strndup(p, (size_t)(eq - p));
        n++;
        p = *end == ',' ? end + 1 : NULL;
        if (end[0] && end[0] != ',') return -1;
    }
    return n;
}

static int parse_del(const char *s, char **out, int max) {
    int n = 0;
    for (const char *p = s; p && *p && n < max;) {
        size_t l = strcspn(p, ",");
        out[n++] = gr_strndup(p, l);
        p = p[l] ? p + l + 1 : NULL;
    }
    return n;
}

static void free_kv(struct kv *kv, int n, char **del, int nd) {
    for (int i = 0; i < n; i++) free(kv[i].k), free(kv[i].v);
    for (int i = 0; i < nd; i++) free(del[i]);
}

static int print_alter_error(int16_t code, const char *msg) {
    fprintf(stderr, "Error while executing config command with args: %s%s%s\n", gr_kerr_name(code), msg ? ": " : "",
            msg ? msg : "");
    return 1;
}

/* kafka-configs.sh refuses to delete a key that is not set at this level (ConfigSource `source`):
 * false, with its error printed, if one of del[0..nd) is not. */
static bool deletes_are_set(const struct DescribeConfigsResponse_DescribeConfigsResult *cur, int8_t source,
                            char **del, int nd) {
    for (int i = 0; i < nd; i++) {
        bool found = false;
        for (int j = 0; j < cur->ConfigsCount; j++)
            found |= cur->Configs[j].ConfigSource == source && strcmp(cur->Configs[j].Name, del[i]) == 0;
        if (!found) {
            fprintf(stderr, "Error while executing config command: Invalid config(s): %s\n", del[i]);
            return false;
        }
    }
    return true;
}

static int alter_topic(struct ctl_kafka *k, const char *name, struct kv *add, int na, char **del, int nd) {
    struct gr_arena a;
    gr_arena_init(&a);
    int rc = 1;
    struct DescribeConfigsResponse_DescribeConfigsResult *cur = describe_one(k, RT_TOPIC, name, false, &a);
    if (!cur) goto out;
    if (!deletes_are_set(cur, 1, del, nd)) goto out;
    struct IncrementalAlterConfigsRequest rq;
    gr_proto_init_struct(&gr_desc_IncrementalAlterConfigsRequest, &rq);
    rq.ResourcesCount = 1;
    rq.Resources = gr_arena_alloc(&a, sizeof(*rq.Resources));
    rq.Resources[0].ResourceType = RT_TOPIC;
    rq.Resources[0].ResourceName = gr_arena_strdup(&a, name);
    rq.Resources[0].ConfigsCount = na + nd;
    rq.Resources[0].Configs = gr_arena_alloc(&a, sizeof(*rq.Resources[0].Configs) * (size_t)(na + nd + 1));
    for (int i = 0; i < na; i++)
        rq.Resources[0].Configs[i] = (struct IncrementalAlterConfigsRequest_AlterableConfig){add[i].k, 0, add[i].v};
    for (int i = 0; i < nd; i++)
        rq.Resources[0].Configs[na + i] = (struct IncrementalAlterConfigsRequest_AlterableConfig){del[i], 1, ""};
    struct IncrementalAlterConfigsResponse *r = ctl_kafka_call(k, GR_API_INCREMENTAL_ALTER_CONFIGS, 1, &rq, &a);
    if (!r || r->ResponsesCount != 1)
        fprintf(stderr, "Error while executing config command: no IncrementalAlterConfigs response\n");
    else if (r->Responses[0].ErrorCode)
        print_alter_error(r->Responses[0].ErrorCode, r->Responses[0].ErrorMessage);
    else
        rc = 0;
out:
    gr_arena_free(&a);
    return rc;
}

static int alter_broker(struct ctl_kafka *k, const char *name, struct kv *add, int na, char **del, int nd) {
    struct gr_arena a;
    gr_arena_init(&a);
    int rc = 1;
    int8_t want = *name ? 2 : 3;
    struct DescribeConfigsResponse_DescribeConfigsResult *cur = describe_one(k, RT_BROKER, name, false, &a);
    if (!cur) goto out;
    if (!deletes_are_set(cur, want, del, nd)) goto out;
    struct AlterConfigsRequest rq;
    gr_proto_init_struct(&gr_desc_AlterConfigsRequest, &rq);
    rq.ResourcesCount = 1;
    rq.Resources = gr_arena_alloc(&a, sizeof(*rq.Resources));
    rq.Resources[0].ResourceType = RT_BROKER;
    rq.Resources[0].ResourceName = gr_arena_strdup(&a, name);
    struct AlterConfigsRequest_AlterableConfig *c =
        gr_arena_alloc(&a, sizeof(*c) * (size_t)(cur->ConfigsCount + na + 1));
    int n = 0;
    for (int j = 0; j < cur->ConfigsCount; j++) { /* the current dynamic ones, minus deletes and replaced */
        const char *cn = cur->Configs[j].Name;
        bool drop = cur->Configs[j].ConfigSource != want;
        for (int i = 0; i < nd && !drop; i++) drop = strcmp(del[i], cn) == 0;
        for (int i = 0; i < na && !drop; i++) drop = strcmp(add[i].k, cn) == 0;
        if (drop) continue;
        if (!cur->Configs[j].Value) {
            fprintf(stderr,
                    "Error while executing config command: All sensitive broker config entries must be "
                    "specified for --alter, missing entries: Set(%s)\n",
                    cn);
            goto out;
        }
        c[n++] = (struct AlterConfigsRequest_AlterableConfig){(char *)cn, cur->Configs[j].Value};
    }
    for (int i = 0; i < na; i++) c[n++] = (struct AlterConfigsRequest_AlterableConfig){add[i].k, add[i].v};
    rq.Resources[0].ConfigsCount = n;
    rq.Resources[0].Configs = c;
    struct AlterConfigsResponse *r = ctl_kafka_call(k, GR_API_ALTER_CONFIGS, 1, &rq, &a);
    if (!r || r->ResponsesCount != 1)
        fprintf(stderr, "Error while executing config command: no AlterConfigs response\n");
    else if (r->Responses[0].ErrorCode)
        print_alter_error(r->Responses[0].ErrorCode, r->Responses[0].ErrorMessage);
    else
        rc = 0;
out:
    gr_arena_free(&a);
    return rc;
}

/* ---- client quotas ---- */

static const char *quota_type(const char *etype) {
    return strcmp(etype, "users") == 0 ? "user" : "client-id";
}

/* Java's Double.toString, as kafka-configs.sh prints a quota (a java.lang.Double): the shortest
 * decimal digits that read back as v; plain ("1048576.0", "0.5") for 1e-3 <= |v| < 1e7, else
 * d.dddE<n> ("1.048576E7", "1.0E-4"). */
static void java_double(double v, char *buf, size_t len) {
    if (isnan(v) || isinf(v)) {
        snprintf(buf, len, "%s", isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
        return;
    }
    const char *sign = signbit(v) ? "-" : "";
    double a = fabs(v);
    if (a == 0) {
        snprintf(buf, len, "%s0.0", sign);
        return;
    }
    char sci[40];
    for (int p = 0; p < 17; p++) { /* 17 significant digits always round-trip */
        snprintf(sci, sizeof sci, "%.*e", p, a);
        if (strtod(sci, NULL) == a) break;
    }
    char dig[24];
    int nd = 0;
    for (const char *c = sci; *c && *c != 'e'; c++)
        if (*c >= '0' && *c <= '9') dig[nd++] = *c;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    dig[nd] = 0;
    int e = atoi(strchr(sci, 'e') + 1);
    if (a >= 1e-3 && a < 1e7) {
        char ip[24], fp[32];
        if (e >= 0) {
            int il = e + 1;
            snprintf(ip, sizeof ip, "%.*s%.*s", il < nd ? il : nd, dig, il > nd ? il - nd : 0, "0000000");
            snprintf(fp, sizeof fp, "%s", il < nd ? dig + il : "0");
        } else {
            snprintf(ip, sizeof ip, "0");
            snprintf(fp, sizeof fp, "%.*s%s", -e - 1, "00", dig);
        }
        snprintf(buf, len, "%s%s.%s", sign, ip, fp);
    } else {
        snprintf(buf, len, "%s%c.%sE%d", sign, dig[0], nd > 1 ? dig + 1 : "0", e);
    }
}

static int describe_quotas(struct ctl_kafka *k, const struct cfg_args *ar) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct DescribeClientQuotasRequest rq;
    gr_proto_init_struct(&gr_desc_DescribeClientQuotasRequest, &rq);
    rq.ComponentsCount = ar->ntypes;
    rq.Components = gr_arena_alloc(&a, sizeof(*rq.Components) * 2);
    for (int i = 0; i < ar->ntypes; i++) {
        rq.Components[i].EntityType = (char *)quota_type(ar->types[i]);
        const char *nm = i < ar->nnames ? ar->names[i] : NULL;
        rq.Components[i].MatchType = !nm ? 2 : *nm ? 0 : 1;
        rq.Components[i].Match = nm && *nm ? (char *)nm : NULL;
    }
    rq.Strict = ar->ntypes == 2 || ar->nnames > 0;
    struct DescribeClientQuotasResponse *r = ctl_kafka_call(k, GR_API_DESCRIBE_CLIENT_QUOTAS, 0, &rq, &a);
    int rc = 0;
    if (!r || r->ErrorCode) {
        fprintf(stderr, "Error while executing config command: %s%s%s\n",
                r ? gr_kerr_name(r->ErrorCode) : "no response", r && r->ErrorMessage ? ": " : "",
                r && r->ErrorMessage ? r->ErrorMessage : "");
        rc = 1;
    }
    for (int i = 0; !rc && i < r->EntriesCount; i++) {
        const struct DescribeClientQuotasResponse_EntryData *e = &r->Entries[i];
        printf("Quota configs for ");
        /* user first, then client-id */
        int printed = 0;
        for (int pass = 0; pass < 2; pass++)
            for (int j = 0; j < e->EntityCount; j++) {
                const char *t = e->Entity[j].EntityType;
                if ((pass == 0) != (strcmp(t, "user") == 0)) continue;
                const char *tw = strcmp(t, "user") == 0 ? "user-principal" : "client-id";
                if (e->Entity[j].EntityName)
                    printf("%s%s '%s'", printed++ ? ", " : "", tw, e->Entity[j].EntityName);
                else
                    printf("%sthe default %s", printed++ ? ", " : "", tw);
            }
        printf(" are ");
        for (int j = 0; j < e->ValuesCount; j++) {
            char num[64];
            java_double(e->Values[j].Value, num, sizeof num);
            printf("%s%s=%s", j ? ", " : "", e->Values[j].Key, num);
        }
        printf("\n");
    }
    gr_arena_free(&a);
    return rc;
}

static int alter_quotas(struct ctl_kafka *k, const struct cfg_args *ar, struct kv *add, int na, char **del, int nd) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct AlterClientQuotasRequest rq;
    gr_proto_init_struct(&gr_desc_AlterClientQuotasRequest, &rq);
    rq.EntriesCount = 1;
    rq.Entries = gr_arena_alloc(&a, sizeof(*rq.Entries));
    struct AlterClientQuotasRequest_EntryData *e = &rq.Entries[0];
    e->EntityCount = ar->ntypes;
    e->Entity = gr_arena_alloc(&a, sizeof(*e->Entity) * 2);
    for (int i = 0; i < ar->ntypes; i++) {
        e->Entity[i].EntityType = (char *)quota_type(ar->types[i]);
        e->Entity[i].EntityName = ar->names[i] && *ar->names[i] ? (char *)ar->names[i] : NULL;
    }
    e->OpsCount = na + nd;
    e->Ops = gr_arena_alloc(&a, sizeof(*e->Ops) * (size_t)(na + nd + 1));
    for (int i = 0; i < na; i++) {
        char *end;
        double v = strtod(add[i].v, &end);
        if (*end || end == add[i].v) {
            fprintf(stderr, "Error while executing config command: Cannot parse quota configuration value for %s: %s\n",
                    add[i].k, add[i].v);
            gr_arena_free(&a);
            return 1;
        }
        e->Ops[i] = (struct AlterClientQuotasRequest_OpData){add[i].k, v, false};
    }
    for (int i = 0; i < nd; i++) e->Ops[na + i] = (struct AlterClientQuotasRequest_OpData){del[i], 0, true};
    struct AlterClientQuotasResponse *r = ctl_kafka_call(k, GR_API_ALTER_CLIENT_QUOTAS, 0, &rq, &a);
    int rc = 1;
    if (!r || r->EntriesCount != 1)
        fprintf(stderr, "Error while executing config command: no AlterClientQuotas response\n");
    else if (r->Entries[0].ErrorCode)
        print_alter_error(r->Entries[0].ErrorCode, r->Entries[0].ErrorMessage);
    else
        rc = 0;
    gr_arena_free(&a);
    return rc;
}

/* ---- main ---- */

static int parse_args(int argc, char **argv, struct cfg_args *ar) {
    memset(ar, 0, sizeof *ar);
    for (int i = 1; i < argc; i++) {
        const char *x = argv[i];
        if (strcmp(x, "--describe") == 0 || strcmp(x, "describe") == 0)
            ar->describe = true;
        else if (strcmp(x, "--alter") == 0 || strcmp(x, "alter") == 0)
            ar->alter = true;
        else if (strcmp(x, "--all") == 0)
            ar->all = true;
        else if (strcmp(x, "--entity-default") == 0) {
            if (ar->nnames >= 2) return -1;
            ar->names[ar->nnames++] = "";
        } else if (i + 1 >= argc)
            return -1;
        else if (strcmp(x, "--entity-type") == 0) {
            if (ar->ntypes >= 2) return -1;
            ar->types[ar->ntypes++] = argv[++i];
        } else if (strcmp(x, "--entity-name") == 0) {
            if (ar->nnames >= 2) return -1;
            ar->names[ar->nnames++] = argv[++i];
        } else if (strcmp(x, "--add-config") == 0)
            ar->add = argv[++i];
        else if (strcmp(x, "--delete-config") == 0)
            ar->del = argv[++i];
        else
            return -1;
    }
    if (ar->describe == ar->alter || ar->ntypes == 0 || ar->nnames > ar->ntypes) return -1;
    for (int i = 0; i < ar->ntypes; i++)
        if (strcmp(ar->types[i], "topics") && strcmp(ar->types[i], "brokers") && strcmp(ar->types[i], "clients") &&
            strcmp(ar->types[i], "users"))
            return -1;
    if (ar->ntypes == 2 && !(strcmp(ar->types[0], "users") == 0 && strcmp(ar->types[1], "clients") == 0)) return -1;
    if (ar->alter && (ar->nnames != ar->ntypes || (!ar->add && !ar->del))) return -1;
    return 0;
}

int ctl_configs_main(const struct ctl_opts *o, int argc, char **argv) {
    struct cfg_args ar;
    if (parse_args(argc, argv, &ar) != 0) return usage();
    if (!o->bootstrap_server) {
        fprintf(stderr, "gregorctl configs: --bootstrap-server is required\n");
        return 2;
    }
    struct ctl_kafka boot;
    if (ctl_kafka_connect_str(o->bootstrap_server, o->timeout_ms, &boot) != 0) return 1;
    const char *et = ar.types[0];
    bool quota = strcmp(et, "clients") == 0 || strcmp(et, "users") == 0;
    int8_t type = strcmp(et, "topics") == 0 ? RT_TOPIC : RT_BROKER;
    int rc = 0;
    if (ar.describe) {
        if (quota) {
            rc = describe_quotas(&boot, &ar);
        } else if (ar.nnames) {
            rc = describe_resource(&boot, o, type, et, ar.names[0], ar.all);
        } else { /* every topic, or every broker and the default */
            struct gr_arena a;
            gr_arena_init(&a);
            struct MetadataResponse *md = ctl_kafka_metadata(&boot, NULL, type == RT_TOPIC ? -1 : 0, &a);
            int n = !md ? 0 : type == RT_TOPIC ? md->TopicsCount : md->BrokersCount;
            for (int i = 0; i < n && !rc; i++) {
                char id[16];
                if (type == RT_BROKER) snprintf(id, sizeof id, "%d", md->Brokers[i].NodeId);
                rc = describe_resource(&boot, o, type, et, type == RT_TOPIC ? md->Topics[i].Name : id, ar.all);
            }
            if (!rc && type == RT_BROKER) rc = describe_resource(&boot, o, type, et, "", ar.all);
            rc = rc || !md;
            gr_arena_free(&a);
        }
        ctl_kafka_close(&boot);
        return rc;
    }
    struct kv add[128];
    char *del[128];
    int na = ar.add ? parse_add(ar.add, add, 128) : 0;
    int nd = ar.del ? parse_del(ar.del, del, 128) : 0;
    if (na < 0) {
        fprintf(stderr, "gregorctl configs: --add-config must be k=v,k2=v2 (use [a,b] for list values)\n");
        ctl_kafka_close(&boot);
        return 2;
    }
    const char *name = ar.names[0];
    if (quota) {
        rc = alter_quotas(&boot, &ar, add, na, del, nd);
    } else if (type == RT_TOPIC) {
        rc = alter_topic(&boot, name, add, na, del, nd);
    } else {
        struct gr_arena a;
        gr_arena_init(&a);
        struct ctl_kafka bc = {0}, *k = &boot;
        if (*name) k = broker_conn(&boot, (int32_t)atoi(name), o->timeout_ms, &bc, &a);
        rc = alter_broker(k, name, add, na, del, nd);
        if (k != &boot) ctl_kafka_close(&bc);
        gr_arena_free(&a);
    }
    if (!rc) {
        if (*name)
            printf("Completed updating config for %.*s %s.\n", (int)strlen(et) - 1, et, name);
        else
            printf("Completed updating default config for %s in the cluster.\n", et);
    }
    free_kv(add, na, del, nd);
    ctl_kafka_close(&boot);
    return rc;
}
