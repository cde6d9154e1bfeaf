/* gregorctl acls: kafka-acls.sh (2.7) for Gregor, over CreateAcls / DeleteAcls / DescribeAcls v2.
 *
 *   acls add|remove|list [--topic T]... [--group G]... [--cluster] [--transactional-id X]...
 *        [--resource-pattern-type literal|prefixed|any|match]
 *        [--allow-principal P]... [--deny-principal P]... [--allow-host H]... [--deny-host H]...
 *        [--operation OP]... [--producer] [--consumer] [--principal P] [--force]
 *
 * As kafka-acls.sh: hosts default to "*" for the principals given; operations default to All;
 * --producer = WRITE, DESCRIBE, CREATE on the topics; --consumer = READ, DESCRIBE on the topics
 * and READ on the groups (needs --group). The pattern type defaults to literal; add accepts only
 * literal or prefixed, list and remove also any and match. remove without a principal removes
 * every ACL of the resources; with one, exactly the ACLs the options describe. list without a
 * resource lists every ACL of every pattern type; --principal filters by principal. --force is accepted (never asks).
 * Output follows kafka-acls.sh:
 *   Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`:
 *    	(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)
 * Exit 1 when the broker refused anything (the error is printed), 2 on a usage error. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd/ctl.h"
#include "cmd/ctl_kafka.h"
#include "common/kerr.h"
#include "common/util.h"
#include "security/acl.h"

#define MAXV 32

struct acl_args {
    const char *cmd;
    int n_res;
    int8_t res_type[MAXV];
    const char *res_name[MAXV];
    int8_t pattern;
    const char *allow_p[MAXV], *deny_p[MAXV], *allow_h[MAXV], *deny_h[MAXV];
    int n_allow_p, n_deny_p, n_allow_h, n_deny_h;
    int8_t ops[MAXV];
    int n_ops;
    bool producer, consumer;
    const char *principal; /* list filter */
};

static int usage(void) {
    fprintf(stderr, "usage: gregorctl --bootstrap-server HOST:PORT acls add|remove|list [--topic T] [--group G] "
                    "[--cluster] [--transactional-id X] [--resource-pattern-type literal|prefixed|any|match] "
                    "[--allow-principal P] [--deny-principal P] [--allow-host H] [--deny-host H] [--operation OP] "
                    "[--producer] [--consumer] [--principal P] [--force]\n");
    return 2;
}

/* "READ" / "Read" / "describe-configs"? kafka-acls.sh takes Read, Write, DescribeConfigs... */
static int parse_op(const char *s) {
    char buf[64];
    size_t j = 0;
    for (size_t i = 0; s[i] && j + 1 < sizeof buf; i++)
        if (s[i] != '-') buf[j++] = s[i];
    buf[j] = 0;
    int op = gr_acl_op_parse(buf);
    return op > GR_ACL_OP_ANY ? op : -1;
}

static const char *upper_op(int op, char *buf, size_t n) {
    /* AclOperation enum name, e.g. DESCRIBE_CONFIGS */
    const char *p = gr_acl_op_name(op);
    size_t j = 0;
    for (size_t i = 0; p[i] && j + 2 < n; i++) {
        if (i && isupper((unsigned char)p[i])) buf[j++] = '_';
        buf[j++] = (char)toupper((unsigned char)p[i]);
    }
    buf[j] = 0;
    return buf;
}

static const char *perm_upper(int p) { return p == GR_ACL_PERM_ALLOW ? "ALLOW" : p == GR_ACL_PERM_DENY ? "DENY" : "ANY"; }

#define PUSH(arr, n, v)                                                                                                \
    do {                                                                                                               \
        if ((n) >= MAXV) return usage();                                                                               \
        (arr)[(n)++] = (v);                                                                                            \
    } while (0)

static int parse_args(int argc, char **argv, struct acl_args *a) {
    memset(a, 0, sizeof *a);
    a->pattern = GR_ACL_PAT_UNKNOWN;
    if (argc < 2) return usage();
    a->cmd = argv[1];
    if (strcmp(a->cmd, "add") && strcmp(a->cmd, "remove") && strcmp(a->cmd, "list")) return usage();
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = true;
        if (!strcmp(k, "--cluster")) {
            PUSH(a->res_name, a->n_res, GR_ACL_CLUSTER_NAME);
            a->res_type[a->n_res - 1] = GR_ACL_RES_CLUSTER;
            takes = false;
        } else if (!strcmp(k, "--producer") || !strcmp(k, "--consumer")) {
            *(k[2] == 'p' ? &a->producer : &a->consumer) = true;
            takes = false;
        } else if (!strcmp(k, "--force")) {
            takes = false;
        } else if (!v) {
            fprintf(stderr, "gregorctl acls: %s needs a value\n", k);
            return usage();
        } else if (!strcmp(k, "--topic") || !strcmp(k, "--group") || !strcmp(k, "--transactional-id")) {
            PUSH(a->res_name, a->n_res, v);
            a->res_type[a->n_res - 1] =
                k[2] == 't' && k[3] == 'o' ? GR_ACL_RES_TOPIC : k[2] == 'g' ? GR_ACL_RES_GROUP : GR_ACL_RES_TRANSACTIONAL_ID;
        } else if (!strcmp(k, "--resource-pattern-type")) {
            a->pattern = (int8_t)gr_acl_pattern_parse(v);
            if (a->pattern <= GR_ACL_PAT_UNKNOWN) {
                fprintf(stderr, "gregorctl acls: unknown resource pattern type %s\n", v);
                return usage();
            }
        } else if (!strcmp(k, "--allow-principal")) {
            PUSH(a->allow_p, a->n_allow_p, v);
        } else if (!strcmp(k, "--deny-principal")) {
            PUSH(a->deny_p, a->n_deny_p, v);
        } else if (!strcmp(k, "--allow-host")) {
            PUSH(a->allow_h, a->n_allow_h, v);
        } else if (!strcmp(k, "--deny-host")) {
            PUSH(a->deny_h, a->n_deny_h, v);
        } else if (!strcmp(k, "--principal")) {
            a->principal = v;
        } else if (!strcmp(k, "--operation")) {
            int op = parse_op(v);
            if (op < 0) {
                fprintf(stderr, "gregorctl acls: unknown operation %s\n", v);
                return usage();
            }
            PUSH(a->ops, a->n_ops, (int8_t)op);
        } else {
            fprintf(stderr, "gregorctl acls: unknown option %s\n", k);
            return usage();
        }
        if (takes) i++;
    }
    for (int i = 0; i < a->n_allow_p + a->n_deny_p; i++) {
        const char *p = i < a->n_allow_p ? a->allow_p[i] : a->deny_p[i - a->n_allow_p];
        if (!gr_acl_principal_valid(p)) {
            fprintf(stderr, "gregorctl acls: principal %s is not of the form Type:name (e.g. User:alice)\n", p);
            return 2;
        }
    }
    if (a->n_allow_p && !a->n_allow_h) a->allow_h[a->n_allow_h++] = "*";
    if (a->n_deny_p && !a->n_deny_h) a->deny_h[a->n_deny_h++] = "*";
    bool is_list = !strcmp(a->cmd, "list");
    if (a->pattern == GR_ACL_PAT_UNKNOWN) a->pattern = GR_ACL_PAT_LITERAL;
    if (!strcmp(a->cmd, "add") && a->pattern != GR_ACL_PAT_LITERAL && a->pattern != GR_ACL_PAT_PREFIXED) {
        fprintf(stderr, "gregorctl acls: A '--resource-pattern-type' value of 'any' or 'match' is not valid when adding acls.\n");
        return 2;
    }
    if (!is_list && a->n_res == 0) {
        fprintf(stderr, "gregorctl acls: You must specify one of: --topic, --cluster, --group, --transactional-id\n");
        return 2;
    }
    if (!strcmp(a->cmd, "add") && !a->n_allow_p && !a->n_deny_p) {
        fprintf(stderr, "gregorctl acls: You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.\n");
        return 2;
    }
    return 0;
}

/* The operations wanted on a resource type (explicit --operation, --producer/--consumer). n = 0
 * means "none apply here"; -1: an operation the resource type does not support. */
static int ops_for(const struct acl_args *a, int type, int8_t *out) {
    int n = 0;
    if (a->producer || a->consumer) {
        if (type == GR_ACL_RES_TOPIC) {
            if (a->producer) out[n++] = GR_ACL_OP_WRITE, out[n++] = GR_ACL_OP_DESCRIBE, out[n++] = GR_ACL_OP_CREATE;
            if (a->consumer) out[n++] = GR_ACL_OP_READ, out[n++] = GR_ACL_OP_DESCRIBE;
        } else if (type == GR_ACL_RES_GROUP && a->consumer) {
            out[n++] = GR_ACL_OP_READ;
        }
        for (int i = 0; i < a->n_ops; i++) out[n++] = a->ops[i];
        return n;
    }
    if (a->n_ops == 0) {
        out[n++] = GR_ACL_OP_ALL;
        return n;
    }
    for (int i = 0; i < a->n_ops; i++) {
        if (!gr_acl_op_supported(type, a->ops[i])) {
            fprintf(stderr, "gregorctl acls: ResourceType %s only supports some operations; %s is not one of them\n",
                    gr_acl_resource_type_enum_name(type), gr_acl_op_name(a->ops[i]));
            return -1;
        }
        out[n++] = a->ops[i];
    }
    return n;
}

/* The bindings the options describe for resource r (add, and remove with principals). */
static int bindings_for(const struct acl_args *a, int r, struct gr_acl_binding *out, int cap) {
    int8_t ops[3 * MAXV];
    int nops = ops_for(a, a->res_type[r], ops);
    if (nops < 0) return -1;
    int n = 0;
    if ((a->n_allow_p * a->n_allow_h + a->n_deny_p * a->n_deny_h) * nops > cap) {
        fprintf(stderr, "gregorctl acls: more than %d ACLs for one resource in one command\n", cap);
        return -1;
    }
    for (int pass = 0; pass < 2; pass++) {
        int np = pass ? a->n_deny_p : a->n_allow_p, nh = pass ? a->n_deny_h : a->n_allow_h;
        for (int p = 0; p < np; p++)
            for (int h = 0; h < nh; h++)
                for (int o = 0; o < nops && n < cap; o++)
                    out[n++] = (struct gr_acl_binding){
                        .resource_type = a->res_type[r], .pattern_type = a->pattern, .name = (char *)a->res_name[r],
                        .entry = {.principal = (char *)(pass ? a->deny_p[p] : a->allow_p[p]),
                                  .host = (char *)(pass ? a->deny_h[h] : a->allow_h[h]), .op = ops[o],
                                  .perm = pass ? GR_ACL_PERM_DENY : GR_ACL_PERM_ALLOW}};
    }
    return n;
}

static void print_entry(const char *principal, const char *host, int op, int perm) {
    char buf[64];
    printf(" \t(principal=%s, host=%s, operation=%s, permissionType=%s)\n", principal, host, upper_op(op, buf, sizeof buf),
           perm_upper(perm));
}

static void print_pattern_head(const char *what, int type, const char *name, int pattern) {
    printf("%s for resource `ResourcePattern(resourceType=%s, name=%s, patternType=%s)`: \n", what,
           gr_acl_resource_type_enum_name(type), name, gr_acl_pattern_name(pattern));
}

/* DescribeAcls for (type, name, pattern) [or everything with type ANY]; prints the result. */
static int list_one(struct ctl_kafka *k, struct gr_arena *ar, int type, const char *name, int pattern,
                    const char *principal) {
    struct DescribeAclsRequest rq = {.ResourceTypeFilter = (int8_t)type, .ResourceNameFilter = (char *)name,
                                     .PatternTypeFilter = (int8_t)pattern, .PrincipalFilter = (char *)principal,
                                     .HostFilter = NULL, .Operation = GR_ACL_OP_ANY, .PermissionType = GR_ACL_PERM_ANY};
    struct DescribeAclsResponse *resp = ctl_kafka_call(k, GR_API_DESCRIBE_ACLS, 2, &rq, ar);
    if (!resp) return 1;
    if (resp->ErrorCode) {
        fprintf(stderr, "Error while listing ACLs: %s%s%s\n", gr_kerr_name(resp->ErrorCode),
                resp->ErrorMessage ? ": " : "", resp->ErrorMessage ? resp->ErrorMessage : "");
        return 1;
    }
    for (int i = 0; i < resp->ResourcesCount; i++) {
        const struct DescribeAclsResponse_DescribeAclsResource *r = &resp->Resources[i];
        print_pattern_head("Current ACLs", r->ResourceType, r->ResourceName, r->PatternType);
        for (int j = 0; j < r->AclsCount; j++)
            print_entry(r->Acls[j].Principal, r->Acls[j].Host, r->Acls[j].Operation, r->Acls[j].PermissionType);
        printf("\n");
    }
    return 0;
}

static int do_add(struct ctl_kafka *k, struct gr_arena *ar, const struct acl_args *a) {
    int rc = 0;
    for (int r = 0; r < a->n_res && !rc; r++) {
        struct gr_acl_binding bs[256];
        int n = bindings_for(a, r, bs, 256);
        if (n < 0) return 2;
        struct CreateAclsRequest rq = {.CreationsCount = n, .Creations = gr_arena_alloc(ar, sizeof(*rq.Creations) * (size_t)(n ? n : 1))};
        print_pattern_head("Adding ACLs", a->res_type[r], a->res_name[r], a->pattern);
        for (int i = 0; i < n; i++) {
            rq.Creations[i] = (struct CreateAclsRequest_AclCreation){
                .ResourceType = bs[i].resource_type, .ResourceName = bs[i].name, .ResourcePatternType = bs[i].pattern_type,
                .Principal = bs[i].entry.principal, .Host = bs[i].entry.host, .Operation = bs[i].entry.op,
                .PermissionType = bs[i].entry.perm};
            print_entry(bs[i].entry.principal, bs[i].entry.host, bs[i].entry.op, bs[i].entry.perm);
        }
        printf("\n");
        struct CreateAclsResponse *resp = ctl_kafka_call(k, GR_API_CREATE_ACLS, 2, &rq, ar);
        if (!resp) return 1;
        for (int i = 0; i < resp->ResultsCount; i++)
            if (resp->Results[i].ErrorCode) {
                fprintf(stderr, "Error while adding ACLs: %s%s%s\n", gr_kerr_name(resp->Results[i].ErrorCode),
                        resp->Results[i].ErrorMessage ? ": " : "",
                        resp->Results[i].ErrorMessage ? resp->Results[i].ErrorMessage : "");
                rc = 1;
            }
        if (!rc) rc = list_one(k, ar, a->res_type[r], a->res_name[r], a->pattern, NULL);
    }
    return rc;
}

static int do_remove(struct ctl_kafka *k, struct gr_arena *ar, const struct acl_args *a) {
    int rc = 0;
    for (int r = 0; r < a->n_res && !rc; r++) {
        struct gr_acl_binding bs[256];
        int n = (a->n_allow_p || a->n_deny_p) ? bindings_for(a, r, bs, 256) : 0;
        if (n < 0) return 2;
        bool whole = !a->n_allow_p && !a->n_deny_p;
        int nf = whole ? 1 : n;
        struct DeleteAclsRequest rq = {.FiltersCount = nf, .Filters = gr_arena_alloc(ar, sizeof(*rq.Filters) * (size_t)(nf ? nf : 1))};
        for (int i = 0; i < nf; i++)
            rq.Filters[i] = whole ? (struct DeleteAclsRequest_DeleteAclsFilter){
                                        .ResourceTypeFilter = a->res_type[r], .ResourceNameFilter = (char *)a->res_name[r],
                                        .PatternTypeFilter = a->pattern, .Operation = GR_ACL_OP_ANY,
                                        .PermissionType = GR_ACL_PERM_ANY}
                                  : (struct DeleteAclsRequest_DeleteAclsFilter){
                                        .ResourceTypeFilter = bs[i].resource_type, .ResourceNameFilter = bs[i].name,
                                        .PatternTypeFilter = bs[i].pattern_type, .PrincipalFilter = bs[i].entry.principal,
                                        .HostFilter = bs[i].entry.host, .Operation = bs[i].entry.op,
                                        .PermissionType = bs[i].entry.perm};
        print_pattern_head(whole ? "Removing all ACLs" : "Removing ACLs", a->res_type[r], a->res_name[r], a->pattern);
        struct DeleteAclsResponse *resp = ctl_kafka_call(k, GR_API_DELETE_ACLS, 2, &rq, ar);
        if (!resp) return 1;
        for (int i = 0; i < resp->FilterResultsCount; i++) {
            const struct DeleteAclsResponse_DeleteAclsFilterResult *fr = &resp->FilterResults[i];
            if (fr->ErrorCode) {
                fprintf(stderr, "Error while removing ACLs: %s%s%s\n", gr_kerr_name(fr->ErrorCode),
                        fr->ErrorMessage ? ": " : "", fr->ErrorMessage ? fr->ErrorMessage : "");
                rc = 1;
            }
            for (int j = 0; j < fr->MatchingAclsCount; j++) {
                const struct DeleteAclsResponse_DeleteAclsMatchingAcl *m = &fr->MatchingAcls[j];
                print_entry(m->Principal, m->Host, m->Operation, m->PermissionType);
                if (m->ErrorCode) rc = 1;
            }
        }
        printf("\n");
    }
    return rc;
}

int ctl_acls_main(const struct ctl_opts *o, int argc, char **argv) {
    struct acl_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    if (!o->bootstrap_server) {
        fprintf(stderr, "gregorctl acls: --bootstrap-server is required\n");
        return 2;
    }
    struct ctl_kafka k;
    if (ctl_kafka_connect_str(o->bootstrap_server, o->timeout_ms, &k) != 0) return 1;
    struct gr_arena ar;
    gr_arena_init(&ar);
    if (!strcmp(a.cmd, "add")) {
        rc = do_add(&k, &ar, &a);
    } else if (!strcmp(a.cmd, "remove")) {
        rc = do_remove(&k, &ar, &a);
    } else if (a.n_res == 0) {
        rc = list_one(&k, &ar, GR_ACL_RES_ANY, NULL, GR_ACL_PAT_ANY, a.principal);
    } else {
        for (int r = 0; r < a.n_res && !rc; r++)
            rc = list_one(&k, &ar, a.res_type[r], a.res_name[r], a.pattern, a.principal);
    }
    gr_arena_free(&ar);
    ctl_kafka_close(&k);
    return rc;
}
