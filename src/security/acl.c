/* ACL vocabulary: see acl.h. */
#include "security/acl.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/kerr.h"
#include "common/util.h"

static const char *const res_names[] = {"Unknown", "Any", "Topic", "Group", "Cluster", "TransactionalId",
                                        "DelegationToken", "User"};
static const char *const res_enum_names[] = {"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID",
                                             "DELEGATION_TOKEN", "USER"};
static const char *const op_names[] = {"Unknown", "Any", "All", "Read", "Write", "Create", "Delete", "Alter",
                                       "Describe", "ClusterAction", "DescribeConfigs", "AlterConfigs",
                                       "IdempotentWrite", "CreateTokens", "DescribeTokens"};
static const char *const perm_names[] = {"Unknown", "Any", "Deny", "Allow"};
static const char *const pattern_names[] = {"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"};

#define NAME_OF(tab, i) ((i) >= 0 && (size_t)(i) < GR_ARRAY_LEN(tab) ? tab[i] : tab[0])

const char *gr_acl_resource_type_name(int t) { return NAME_OF(res_names, t); }
const char *gr_acl_resource_type_enum_name(int t) { return NAME_OF(res_enum_names, t); }
const char *gr_acl_op_name(int op) { return NAME_OF(op_names, op); }
const char *gr_acl_perm_name(int p) { return NAME_OF(perm_names, p); }
const char *gr_acl_pattern_name(int p) { return NAME_OF(pattern_names, p); }

/* Case-insensitive compare ignoring underscores: "DESCRIBE_CONFIGS" == "DescribeConfigs". */
static bool name_eq(const char *a, const char *b) {
    for (;;) {
        while (*a == '_') a++;
        while (*b == '_') b++;
        if (!*a || !*b) return !*a && !*b;
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
        a++, b++;
    }
}

static int parse_in(const char *const *tab, size_t n, const char *s) {
    if (!s) return 0;
    for (size_t i = 1; i < n; i++)
        if (name_eq(tab[i], s)) return (int)i;
    return 0;
}

int gr_acl_resource_type_parse(const char *s) { return parse_in(res_names, GR_ARRAY_LEN(res_names), s); }
int gr_acl_op_parse(const char *s) { return parse_in(op_names, GR_ARRAY_LEN(op_names), s); }
int gr_acl_perm_parse(const char *s) { return parse_in(perm_names, GR_ARRAY_LEN(perm_names), s); }
int gr_acl_pattern_parse(const char *s) { return parse_in(pattern_names, GR_ARRAY_LEN(pattern_names), s); }

bool gr_acl_principal_valid(const char *p) {
    if (!p) return false;
    const char *colon = strchr(p, ':');
    return colon && colon != p;
}

void gr_acl_entry_release(struct gr_acl_entry *e) {
    free(e->principal);
    free(e->host);
    e->principal = e->host = NULL;
}

void gr_acl_entry_copy(struct gr_acl_entry *dst, const struct gr_acl_entry *src) {
    dst->principal = gr_strdup(src->principal);
    dst->host = gr_strdup(src->host);
    dst->op = src->op;
    dst->perm = src->perm;
}

bool gr_acl_entry_equal(const struct gr_acl_entry *a, const struct gr_acl_entry *b) {
    return a->op == b->op && a->perm == b->perm && strcmp(a->principal, b->principal) == 0 &&
           strcmp(a->host, b->host) == 0;
}

void gr_acl_binding_release(struct gr_acl_binding *b) {
    free(b->name);
    b->name = NULL;
    gr_acl_entry_release(&b->entry);
}

bool gr_acl_filter_matches_pattern(const struct gr_acl_filter *f, int type, int pattern_type, const char *name) {
    if (f->resource_type != GR_ACL_RES_ANY && f->resource_type != type) return false;
    if (f->pattern_type != GR_ACL_PAT_ANY && f->pattern_type != GR_ACL_PAT_MATCH && f->pattern_type != pattern_type)
        return false;
    if (!f->name) return true;
    if (f->pattern_type == GR_ACL_PAT_ANY || f->pattern_type == pattern_type) return strcmp(f->name, name) == 0;
    /* MATCH */
    if (pattern_type == GR_ACL_PAT_LITERAL) return strcmp(f->name, name) == 0 || strcmp(name, GR_ACL_WILDCARD) == 0;
    if (pattern_type == GR_ACL_PAT_PREFIXED) return strncmp(f->name, name, strlen(name)) == 0;
    return false;
}

bool gr_acl_filter_matches_entry(const struct gr_acl_filter *f, const struct gr_acl_entry *e) {
    if (f->principal && strcmp(f->principal, e->principal) != 0) return false;
    if (f->host && strcmp(f->host, e->host) != 0) return false;
    if (f->op != GR_ACL_OP_ANY && f->op != e->op) return false;
    if (f->perm != GR_ACL_PERM_ANY && f->perm != e->perm) return false;
    return true;
}

const char *gr_acl_filter_invalid(const struct gr_acl_filter *f) {
    if (f->resource_type <= GR_ACL_RES_UNKNOWN || f->resource_type > GR_ACL_RES_LAST)
        return "unknown resource type";
    if (f->pattern_type <= GR_ACL_PAT_UNKNOWN || f->pattern_type > GR_ACL_PAT_PREFIXED) return "unknown pattern type";
    if (f->op <= GR_ACL_OP_UNKNOWN || f->op > GR_ACL_OP_LAST) return "unknown operation";
    if (f->perm <= GR_ACL_PERM_UNKNOWN || f->perm > GR_ACL_PERM_ALLOW) return "unknown permission type";
    return NULL;
}

/* AclEntry.supportedOperations, as a bit set over op codes (ALL is always allowed). */
static unsigned supported_ops(int t) {
#define B(op) (1u << GR_ACL_OP_##op)
    switch (t) {
    case GR_ACL_RES_TOPIC:
        return B(READ) | B(WRITE) | B(CREATE) | B(DESCRIBE) | B(DELETE) | B(ALTER) | B(DESCRIBE_CONFIGS) |
               B(ALTER_CONFIGS);
    case GR_ACL_RES_GROUP: return B(READ) | B(DESCRIBE) | B(DELETE);
    case GR_ACL_RES_CLUSTER:
        return B(CREATE) | B(CLUSTER_ACTION) | B(DESCRIBE_CONFIGS) | B(ALTER_CONFIGS) | B(IDEMPOTENT_WRITE) |
               B(ALTER) | B(DESCRIBE);
    case GR_ACL_RES_TRANSACTIONAL_ID: return B(DESCRIBE) | B(WRITE);
    case GR_ACL_RES_DELEGATION_TOKEN: return B(DESCRIBE);
    case GR_ACL_RES_USER: return B(CREATE_TOKENS) | B(DESCRIBE_TOKENS);
    default: return 0;
    }
#undef B
}

bool gr_acl_op_supported(int resource_type, int op) {
    return op == GR_ACL_OP_ALL || (op > 0 && op < 32 && (supported_ops(resource_type) & (1u << op)));
}

const char *gr_acl_binding_invalid(const struct gr_acl_binding *b) {
    if (b->resource_type <= GR_ACL_RES_ANY || b->resource_type > GR_ACL_RES_LAST)
        return "Invalid resource type";
    if (b->pattern_type != GR_ACL_PAT_LITERAL && b->pattern_type != GR_ACL_PAT_PREFIXED)
        return "Invalid resource pattern type";
    if (!b->name || !b->name[0]) return "Invalid empty resource name";
    if (strchr(b->name, '/')) return "Resource names stored in ZooKeeper may not contain '/'";
    if (b->resource_type == GR_ACL_RES_CLUSTER && strcmp(b->name, GR_ACL_CLUSTER_NAME) != 0)
        return "The only valid name for the CLUSTER resource is kafka-cluster";
    if (!gr_acl_principal_valid(b->entry.principal)) return "Invalid principal: expected principalType:principalName";
    if (!b->entry.host || !b->entry.host[0]) return "Invalid empty host";
    if (b->entry.perm != GR_ACL_PERM_ALLOW && b->entry.perm != GR_ACL_PERM_DENY) return "Invalid permission type";
    if (b->entry.op <= GR_ACL_OP_ANY || b->entry.op > GR_ACL_OP_LAST) return "Invalid operation";
    /* Kafka 3.9 stores these anywhere, but they only ever matter on a User resource, and in the
     * znode of any other type an older Gregor (whose parser knows no CreateTokens/DescribeTokens)
     * reads the whole resource as corrupt: it keeps the resource's stale ACLs and cannot start. */
    if ((b->entry.op == GR_ACL_OP_CREATE_TOKENS || b->entry.op == GR_ACL_OP_DESCRIBE_TOKENS) &&
        b->resource_type != GR_ACL_RES_USER)
        return "The CreateTokens and DescribeTokens operations apply to the User resource type only";
    return NULL;
}

int16_t gr_acl_denied_error(int resource_type) {
    switch (resource_type) {
    case GR_ACL_RES_TOPIC: return GR_KERR_TOPIC_AUTHORIZATION_FAILED;
    case GR_ACL_RES_GROUP: return GR_KERR_GROUP_AUTHORIZATION_FAILED;
    case GR_ACL_RES_TRANSACTIONAL_ID: return GR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    case GR_ACL_RES_DELEGATION_TOKEN: return 65; /* DELEGATION_TOKEN_AUTHORIZATION_FAILED */
    default: return GR_KERR_CLUSTER_AUTHORIZATION_FAILED;
    }
}
