/* The broker's DynamicConfigManager (Kafka 2.7 DynamicConfigManager + ConfigHandler +
 * DynamicBrokerConfig): holds this broker's dynamic broker configs (/config/brokers/<id> and
 * /config/brokers/<default>) and applies config changes live.
 *
 * gregord runs one /config/changes listener per broker (controller/config_change_listener.h) with
 * gr_dcm_on_entity_change as its hook. For each changed entity:
 *   topics/T          the hosted partitions of T get the new effective settings at once
 *                     (gr_rm_reload_topic_config); unclean.leader.election.enable=true goes to the
 *                     controller through its front door (controller/requests.h)
 *   brokers/<default>, brokers/<this id>
 *                     the layer is re-read; every hosted partition is re-configured; the broker's
 *                     unclean.leader.election.enable goes to the controller; replication throttle
 *                     rates are re-read
 *   clients/..., users/...  the quota manager re-reads its quotas (broker/quota_manager.h)
 *   users/<user>      also the user's SCRAM credentials are re-read into the credential cache
 *                     (loaded whole at start-up; SaslAuthenticate reads only the cache)
 *   (other brokers' entities are ignored)
 *
 * Ownership: created by the start-up code after the broker's ZooKeeper client is set
 * (b->dynamic_config), freed after the listener stopped and the network server stopped. b is
 * borrowed.
 * Threading: the layers are guarded by an internal mutex; every function may be called from any
 * thread. NULL `d` is accepted everywhere and means "no dynamic configs" (static configs only). */
#ifndef GR_BROKER_DYNAMIC_CONFIG_MANAGER_H
#define GR_BROKER_DYNAMIC_CONFIG_MANAGER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/config_model.h"
#include "security/scram.h"
#include "storage/log_config.h"
#include "zk/kzk.h"

struct gr_broker;
struct gr_config;
struct gr_dynamic_config_manager;

/* Reads this broker's dynamic layers from ZooKeeper (missing nodes = empty). */
struct gr_dynamic_config_manager *gr_dcm_new(struct gr_broker *b);
void gr_dcm_free(struct gr_dynamic_config_manager *d);

/* Tells the controller (b->controller, now set) the broker-level unclean.leader.election.enable
 * in effect (it may come from a dynamic config). */
void gr_dcm_controller_attached(struct gr_dynamic_config_manager *d);

/* Did the start-up load of every user's SCRAM credentials succeed (true without ZooKeeper)? The
 * start-up code refuses to start otherwise (as Kafka's DynamicConfigManager.startup would throw). */
bool gr_dcm_credentials_loaded(const struct gr_dynamic_config_manager *d);

/* Did the whole start-up load succeed -- the cluster-default and per-broker configs
 * (/config/brokers/<default>, /config/brokers/<id>) and every user's credentials (true without
 * ZooKeeper)? The logs are loaded with the broker layers: the start-up code refuses to start
 * otherwise (Kafka's DynamicBrokerConfig.initialize throws). */
bool gr_dcm_loaded(const struct gr_dynamic_config_manager *d);

/* The SCRAM credential of `user` (the client's name) from the in-memory cache (Kafka's
 * CredentialCache; security/credential_cache.h): 0 and *out, or -ENOENT for an unknown user or
 * mechanism. Never reads ZooKeeper: safe on I/O threads before authentication. */
int gr_dcm_scram_credential(struct gr_dynamic_config_manager *d, enum gr_scram_mech m, const char *user,
                            struct gr_scram_cred *out);

/* The /config/changes hook (ctx = the manager). false: not applied yet -- a read it needs
 * failed (/config/topics/<T> for a hosted topic, /config/brokers/<default> or /<id>, a user's
 * credentials, the client or IP quotas); the listener hands it again later with bounded
 * back-off. */
bool gr_dcm_on_entity_change(void *ctx, const char *entity_path);

/* A consistent copy of the broker layers, for describing/resolving without holding the lock. */
struct gr_dcm_view {
    struct gr_kzk_config dyn_broker, dyn_default; /* owned copies */
    const struct gr_config *static_cfg;           /* borrowed */
    struct gr_props pb, pd, pt;                   /* views used by `layers` */
    struct gr_cfg_layers layers;                  /* topic layer empty until gr_dcm_view_topic */
};
void gr_dcm_view_get(struct gr_dynamic_config_manager *d, const struct gr_config *static_cfg, struct gr_dcm_view *v);
/* Points v->layers.topic at the topic overrides tc (borrowed; NULL = none). */
void gr_dcm_view_topic(struct gr_dcm_view *v, const struct gr_kzk_config *tc);
void gr_dcm_view_release(struct gr_dcm_view *v);

/* The effective settings of a topic with overrides tc (NULL = none) over this broker's dynamic
 * and static configs (storage/log_config.h's one resolution). */
void gr_dcm_log_config(struct gr_dynamic_config_manager *d, const struct gr_config *static_cfg,
                       const struct gr_kzk_config *tc, struct gr_log_config *out);

/* A broker key's effective numeric value (per broker > default > static > dflt). */
int64_t gr_dcm_broker_long(struct gr_dynamic_config_manager *d, const struct gr_config *static_cfg, const char *name,
                           int64_t dflt);

#endif
