/* ACL vocabulary of Kafka 3.9 (org.apache.kafka.common.{acl,resource}): resource types,
 * operations, permission and pattern types with their wire codes and their names, one ACL entry,
 * a binding (resource pattern + entry) and the filters of DescribeAcls / DeleteAcls.
 *
 * Pure values: no locking, no I/O. Strings inside the structs are owned by whoever owns the
 * struct (gr_acl_entry_release / gr_acl_binding_release free them). */
#ifndef GR_SECURITY_ACL_H
#define GR_SECURITY_ACL_H

#include <stdbool.h>
#include <stdint.h>

/* Wire codes (ResourceType, AclOperation, AclPermissionType, PatternType). 0 = UNKNOWN. */
enum gr_acl_resource_type {
    GR_ACL_RES_UNKNOWN = 0, GR_ACL_RES_ANY = 1, GR_ACL_RES_TOPIC = 2, GR_ACL_RES_GROUP = 3,
    GR_ACL_RES_CLUSTER = 4, GR_ACL_RES_TRANSACTIONAL_ID = 5, GR_ACL_RES_DELEGATION_TOKEN = 6,
    GR_ACL_RES_USER = 7, /* KIP-373 (Kafka 3.3): whose tokens a principal may create or describe */
};
#define GR_ACL_RES_LAST GR_ACL_RES_USER
enum gr_acl_op {
    GR_ACL_OP_UNKNOWN = 0, GR_ACL_OP_ANY = 1, GR_ACL_OP_ALL = 2, GR_ACL_OP_READ = 3,
    GR_ACL_OP_WRITE = 4, GR_ACL_OP_CREATE = 5, GR_ACL_OP_DELETE = 6, GR_ACL_OP_ALTER = 7,
    GR_ACL_OP_DESCRIBE = 8, GR_ACL_OP_CLUSTER_ACTION = 9, GR_ACL_OP_DESCRIBE_CONFIGS = 10,
    GR_ACL_OP_ALTER_CONFIGS = 11, GR_ACL_OP_IDEMPOTENT_WRITE = 12,
    GR_ACL_OP_CREATE_TOKENS = 13, GR_ACL_OP_DESCRIBE_TOKENS = 14, /* KIP-373, on User resources */
};
#define GR_ACL_OP_LAST GR_ACL_OP_DESCRIBE_TOKENS
enum gr_acl_perm { GR_ACL_PERM_UNKNOWN = 0, GR_ACL_PERM_ANY = 1, GR_ACL_PERM_DENY = 2, GR_ACL_PERM_ALLOW = 3 };
enum gr_acl_pattern {
    GR_ACL_PAT_UNKNOWN = 0, GR_ACL_PAT_ANY = 1, GR_ACL_PAT_MATCH = 2, GR_ACL_PAT_LITERAL = 3,
    GR_ACL_PAT_PREFIXED = 4,
};

#define GR_ACL_WILDCARD "*"              /* resource name, host */
#define GR_ACL_WILDCARD_PRINCIPAL "User:*"
#define GR_ACL_CLUSTER_NAME "kafka-cluster"

/* Names. *_name returns Kafka's PascalCase name ("Topic", "DescribeConfigs", "Allow",
 * "Prefixed" -> for patterns the enum name "PREFIXED"), "Unknown" for out-of-range codes.
 * *_parse accepts the PascalCase name or the enum name ("DESCRIBE_CONFIGS"), case-insensitively,
 * and returns the code or 0 (UNKNOWN). */
const char *gr_acl_resource_type_name(int t);
const char *gr_acl_resource_type_enum_name(int t); /* "TOPIC", "TRANSACTIONAL_ID" */
const char *gr_acl_op_name(int op);
const char *gr_acl_perm_name(int p);
const char *gr_acl_pattern_name(int p);           /* "LITERAL", "PREFIXED", ... */
int gr_acl_resource_type_parse(const char *s);
int gr_acl_op_parse(const char *s);
int gr_acl_perm_parse(const char *s);
int gr_acl_pattern_parse(const char *s);

/* Is `p` a principal string "<type>:<name>" with a non-empty type (name may be empty)? */
bool gr_acl_principal_valid(const char *p);

/* One access control entry (AccessControlEntry). */
struct gr_acl_entry {
    char *principal; /* "User:alice", "User:*" */
    char *host;      /* "*" or an IP address */
    int8_t op;       /* enum gr_acl_op (concrete: not ANY/UNKNOWN) */
    int8_t perm;     /* GR_ACL_PERM_ALLOW / DENY */
};
void gr_acl_entry_release(struct gr_acl_entry *e);
void gr_acl_entry_copy(struct gr_acl_entry *dst, const struct gr_acl_entry *src);
bool gr_acl_entry_equal(const struct gr_acl_entry *a, const struct gr_acl_entry *b);

/* A resource pattern plus an entry (AclBinding). */
struct gr_acl_binding {
    int8_t resource_type;
    int8_t pattern_type; /* LITERAL or PREFIXED */
    char *name;
    struct gr_acl_entry entry;
};
void gr_acl_binding_release(struct gr_acl_binding *b);

/* A filter (AclBindingFilter): ANY codes and NULL strings match everything; pattern MATCH
 * matches the literal name, the literal wildcard and every prefix pattern that prefixes name. */
struct gr_acl_filter {
    int8_t resource_type;
    int8_t pattern_type;
    const char *name;       /* NULL = any */
    const char *principal;  /* NULL = any */
    const char *host;       /* NULL = any */
    int8_t op;              /* GR_ACL_OP_ANY = any */
    int8_t perm;            /* GR_ACL_PERM_ANY = any */
};
/* Does the filter's resource part match pattern (type, pattern_type, name)? */
bool gr_acl_filter_matches_pattern(const struct gr_acl_filter *f, int type, int pattern_type, const char *name);
/* Does the filter's entry part match e? */
bool gr_acl_filter_matches_entry(const struct gr_acl_filter *f, const struct gr_acl_entry *e);
/* NULL when the filter is well-formed for DescribeAcls/DeleteAcls, else why not (no UNKNOWN
 * codes). */
const char *gr_acl_filter_invalid(const struct gr_acl_filter *f);
/* NULL when b may be created (CreateAcls), else the reason (Kafka's validation: no UNKNOWN/ANY
 * codes, LITERAL or PREFIXED, non-empty name, cluster named kafka-cluster, valid principal).
 * Like Kafka's broker it does not check gr_acl_op_supported (kafka-acls.sh does, client side). */
const char *gr_acl_binding_invalid(const struct gr_acl_binding *b);
/* AclEntry.supportedOperations: may op (or ALL) be granted on resource type t? */
bool gr_acl_op_supported(int resource_type, int op);

/* The error code Kafka answers when op on resource type t is denied:
 * TOPIC_AUTHORIZATION_FAILED, GROUP_..., CLUSTER_..., TRANSACTIONAL_ID_..., DELEGATION_TOKEN_... */
int16_t gr_acl_denied_error(int resource_type);

#endif
