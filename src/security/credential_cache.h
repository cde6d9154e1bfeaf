/* Kafka 2.7's CredentialCache: the SCRAM credentials of every user (/config/users/<user>), kept
 * in memory so that an authentication never waits for ZooKeeper. The DynamicConfigManager
 * (broker/dynamic_config_manager.h) loads it at start-up and replaces a user's entry on each
 * users/<user> config change notification (Kafka's UserConfigHandler).
 *
 * Keys are the znode names (Kafka's Sanitizer form, see gr_sanitize_user); lookups take the
 * user name as the client sent it and sanitize it themselves.
 *
 * Ownership: the caller of gr_credcache_new owns the cache. Credentials are copied in and out.
 * Threading: internally locked; every function may be called from any thread. Lookups never do
 * I/O. */
#ifndef GR_SECURITY_CREDENTIAL_CACHE_H
#define GR_SECURITY_CREDENTIAL_CACHE_H

#include "security/scram.h"

struct gr_kzk_config;
struct gr_credential_cache;

struct gr_credential_cache *gr_credcache_new(void);
void gr_credcache_free(struct gr_credential_cache *c);

/* Replaces the credentials of the user whose znode name is `name` by the SCRAM-SHA-256 and
 * SCRAM-SHA-512 entries of cfg (NULL or without SCRAM entries: the user is removed). An entry
 * that does not parse is left out (that mechanism then fails as for an unknown user). */
void gr_credcache_update(struct gr_credential_cache *c, const char *name, const struct gr_kzk_config *cfg);

/* Removes one user (znode name) from the cache. */
void gr_credcache_remove(struct gr_credential_cache *c, const char *name);

/* 0 and *out for a known user and mechanism, -ENOENT otherwise. `user` is the client's name. */
int gr_credcache_get(struct gr_credential_cache *c, enum gr_scram_mech m, const char *user, struct gr_scram_cred *out);

/* Number of users with at least one credential (tests). */
int gr_credcache_size(struct gr_credential_cache *c);

#endif
