/* Kafka 2.7's AclAuthorizer (kafka.security.authorizer.AclAuthorizer): decisions from an ACL
 * cache that mirrors ZooKeeper's ACL znodes (zk/acl_znodes.h), and the ACL admin operations
 * behind CreateAcls / DeleteAcls / DescribeAcls.
 *
 * Decision for (principal, host, operation, resource type, resource name):
 *  1. principal in super.users ("User:a;User:b") -> allowed;
 *  2. the ACLs considered are those of the literal name, the literal wildcard "*" and every
 *     prefixed pattern that is a prefix of the name (same resource type);
 *  3. none -> allow.everyone.if.no.acl.found;
 *  4. a matching DENY -> denied; 5. a matching ALLOW -> allowed; else denied.
 * An ACL matches when its principal is the principal or "User:*", its operation the operation or
 * All, its host the host or "*". Implied: DESCRIBE is allowed by READ/WRITE/DELETE/ALTER,
 * DESCRIBE_CONFIGS by ALTER_CONFIGS (denies are never widened).
 *
 * Updates go to ZooKeeper first, conditional on the cached zkVersion (re-read and retried on a
 * conflict), then into this broker's cache, then a change notification is written; every other
 * broker's listener thread re-reads the changed resource within a second (watch, plus a 1 s
 * re-check so a lost watch cannot delay it longer).
 *
 * Threading: gr_authorizer_authorize and gr_authorizer_acls may be called from any thread at
 * any time (read lock on the cache). Admin calls (create/delete) block on ZooKeeper and are
 * serialised by an internal mutex (Kafka's `lock`); call them from a request thread. The
 * authorizer owns its listener thread; kzk and watches are borrowed and must outlive it. */
#ifndef GR_SECURITY_AUTHORIZER_H
#define GR_SECURITY_AUTHORIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "security/acl.h"

struct gr_kzk;
struct gr_zk_watches;
struct gr_authorizer;

struct gr_authorizer_config {
    const char *super_users;             /* super.users, may be NULL */
    bool allow_everyone_if_no_acl_found; /* allow.everyone.if.no.acl.found */
};

/* An authorizer with an empty cache and no ZooKeeper (unit tests fill it with
 * gr_authorizer_cache_put). */
struct gr_authorizer *gr_authorizer_new(const struct gr_authorizer_config *cfg);
/* Attaches ZooKeeper: creates the ACL paths, starts the change listeners and loads the cache
 * (listeners first, as Kafka, so no change is missed). Returns 0 or a kzk error (logged).
 * watches NULL (unit tests on a single-threaded ZooKeeper): no listener thread. */
int gr_authorizer_start(struct gr_authorizer *a, struct gr_kzk *kzk, struct gr_zk_watches *watches);
/* Stops the listener thread and frees everything. NULL is ignored. */
void gr_authorizer_free(struct gr_authorizer *a);

/* The host an ACL's `host` is compared with (as a string, like Kafka's AclAuthorizer): the
 * client address as Java's InetAddress.getHostAddress writes it. IPv4 "a.b.c.d" as is; an
 * IPv4-mapped IPv6 address (a peer of a "[::]" listener) as its IPv4 "a.b.c.d" (Java makes an
 * Inet4Address of it); any other IPv6 address as eight lower-case hex groups without leading
 * zeros or "::" compression ("0:0:0:0:0:0:0:1", "fe80:0:0:0:0:0:0:1"); anything else (not an
 * address) unchanged. out gets at most n-1 characters. */
void gr_acl_host_normalize(const char *addr, char *out, size_t n);

/* The decision above. Denials are logged at INFO on kafka.authorizer.logger when log_denied
 * (an explicit request), else at DEBUG (filtering, e.g. Metadata for all topics); the resource
 * is LITERAL name. */
bool gr_authorizer_authorize(struct gr_authorizer *a, const char *principal, const char *host, int op,
                             int resource_type, const char *name, bool log_denied);
bool gr_authorizer_is_super_user(const struct gr_authorizer *a, const char *principal);

/* Replaces the cached ACLs of a resource pattern (entries copied; n == 0 removes it). */
void gr_authorizer_cache_put(struct gr_authorizer *a, int type, int pattern, const char *name,
                             const struct gr_acl_entry *e, int n, int32_t zk_version);

/* CreateAcls: adds bindings[i] (already validated with gr_acl_binding_invalid) to ZooKeeper and
 * the cache; errors[i] gets NONE or a Kafka error code (UNKNOWN_SERVER_ERROR when ZooKeeper
 * failed). Needs ZooKeeper (gr_authorizer_start). */
void gr_authorizer_create_acls(struct gr_authorizer *a, const struct gr_acl_binding *bindings, int n,
                               int16_t *errors);

/* Called per binding: removed by (or failed to remove for) filter `filter_index`; or described. */
typedef void (*gr_acl_binding_fn)(void *ctx, int filter_index, const struct gr_acl_binding *b, int16_t error);
/* DeleteAcls: removes every cached binding matching one of the filters (a binding counts for the
 * first filter that matches it), plus resources named exactly by LITERAL/PREFIXED/ANY filters
 * that are in ZooKeeper but not yet cached. */
void gr_authorizer_delete_acls(struct gr_authorizer *a, const struct gr_acl_filter *filters, int n,
                               gr_acl_binding_fn fn, void *ctx);

/* DescribeAcls: calls fn for every cached binding matching the filter (filter_index = 0). */
void gr_authorizer_acls(struct gr_authorizer *a, const struct gr_acl_filter *filter, gr_acl_binding_fn fn,
                        void *ctx);

#endif
