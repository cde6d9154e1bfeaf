/* ACL znodes as Kafka 2.7 stores them (ZkData.scala: ZkAclStore, ZkAclChangeStore, AclEntry).
 *
 *   /kafka-acl/<Type>/<name>                        literal ACLs of one resource
 *   /kafka-acl-extended/prefixed/<Type>/<name>      prefixed ACLs
 *     data {"version":1,"acls":[{"principal":"User:a","permissionType":"Allow",
 *                                "operation":"Read","host":"*"}]}
 *   /kafka-acl-changes/acl_changes_<seq>            "TOPIC:<name>" (literal resources)
 *   /kafka-acl-extended-changes/acl_changes_<seq>   {"version":1,"resourceType":"TOPIC",
 *                                                    "name":"<name>","patternType":"PREFIXED"}
 * <Type> is the PascalCase resource type (Topic, Group, Cluster, TransactionalId,
 * DelegationToken).
 *
 * Codecs are pure; the calls go straight to the kzk's backend, retrying CONNECTIONLOSS /
 * OPERATIONTIMEOUT a few times, and return the kzk codes (0, GR_KZK_ENONODE, GR_KZK_EEXISTS,
 * GR_KZK_EBADVERSION, GR_EZK, GR_ECORRUPT). Any thread except ZooKeeper callbacks. */
#ifndef GR_ZK_ACL_ZNODES_H
#define GR_ZK_ACL_ZNODES_H

#include <stddef.h>
#include <stdint.h>

#include "security/acl.h"

struct gr_kzk;

#define GR_ACL_CHANGES_LITERAL "/kafka-acl-changes"
#define GR_ACL_CHANGES_EXTENDED "/kafka-acl-extended-changes"
#define GR_ACL_CHANGE_PREFIX "acl_changes_"

/* The ACL list JSON. Decode: entries with an unknown operation/permission or a malformed
 * principal make the whole node GR_ECORRUPT (Kafka throws too). *out malloc'd array. */
char *gr_acl_znode_encode(const struct gr_acl_entry *e, int n, size_t *len);
int gr_acl_znode_decode(const char *data, size_t len, struct gr_acl_entry **out, int *n);
void gr_acl_entries_free(struct gr_acl_entry *e, int n);

/* Change-notification payloads. Decode fills *type, *pattern and *name (malloc'd). */
char *gr_acl_change_encode(int type, int pattern, const char *name, size_t *len);
int gr_acl_change_decode(const char *data, size_t len, int extended, int *type, int *pattern, char **name);

/* Path of a resource's znode (malloc'd), or of its type's parent when name is NULL. */
char *gr_acl_znode_path(int pattern, int type, const char *name);

/* Creates the roots and per-type parents of both stores and both change paths (createAclPaths). */
int gr_acl_znodes_ensure_paths(struct gr_kzk *k);
/* Names of the resources of (pattern, type) that have a znode. */
int gr_acl_znodes_list(struct gr_kzk *k, int pattern, int type, char ***names, int *n);
/* Reads a resource's ACLs and zkVersion. GR_KZK_ENONODE when it has none. */
int gr_acl_znodes_read(struct gr_kzk *k, int pattern, int type, const char *name,
                       struct gr_acl_entry **out, int *n, int32_t *zk_version);
/* Writes the ACLs conditionally: expected_version < 0 creates the node (GR_KZK_EEXISTS if it
 * exists); otherwise sets it at that version (GR_KZK_EBADVERSION / ENONODE when it moved); n == 0
 * deletes it at that version. *new_version gets the node's version after the write. */
int gr_acl_znodes_write(struct gr_kzk *k, int pattern, int type, const char *name,
                        const struct gr_acl_entry *e, int n, int32_t expected_version,
                        int32_t *new_version);
/* Creates the change notification for a resource (sequential node in the pattern's change
 * path). */
int gr_acl_znodes_notify(struct gr_kzk *k, int pattern, int type, const char *name);

#endif
