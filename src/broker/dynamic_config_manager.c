/* The broker's DynamicConfigManager: see dynamic_config_manager.h. */
#include "broker/dynamic_config_manager.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "broker/broker.h"
#include "broker/quota_manager.h"
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/requests.h"
#include "replication/replica_manager.h"
#include "security/credential_cache.h"

#define LOGGER "kafka.server.DynamicConfigManager"

struct gr_dynamic_config_manager {
    struct gr_broker *b;
    char id[16]; /* this broker's id as text */
    pthread_mutex_t mu;
    struct gr_kzk_config dyn_broker, dyn_default; /* guarded by mu */
    struct gr_credential_cache *creds;            /* SCRAM credentials (own lock) */
    bool creds_loaded;                            /* the start-up load succeeded */
    bool layers_loaded;                           /* the start-up read of both broker layers did */
};

static void copy_config(struct gr_kzk_config *dst, const struct gr_kzk_config *src) {
    memset(dst, 0, sizeof *dst);
    for (int i = 0; i < src->n; i++) gr_kzk_config_set(dst, src->keys[i], src->values[i]);
}

/* Re-reads /config/brokers/<name> into *slot; 0 or the ZooKeeper error (the slot unchanged). */
static int reload_layer(struct gr_dynamic_config_manager *d, const char *name, bool per_broker) {
    struct gr_kzk_config c = {0};
    int rc = gr_kzk_get_entity_config(d->b->zk, "brokers", name, &c);
    if (rc) {
        gr_warn(LOGGER, "Cannot read /config/brokers/%s: %s", name, gr_kzk_strerror(rc));
        return rc;
    }
    pthread_mutex_lock(&d->mu);
    struct gr_kzk_config *slot = per_broker ? &d->dyn_broker : &d->dyn_default;
    gr_kzk_config_release(slot);
    *slot = c;
    pthread_mutex_unlock(&d->mu);
    return 0;
}

/* The start-up read of the cluster-default and per-broker layers, retried for about 10 s as the
 * credentials' (Kafka's DynamicBrokerConfig.initialize fails the start-up): the logs are loaded
 * with these layers (storage/log_config.h), and a log whose cluster-default
 * log.cleanup.policy=compact or log.retention.ms=-1 went unread would be loaded with
 * server.properties' and lose data to retention. */
static void load_layers(struct gr_dynamic_config_manager *d) {
    bool dflt = false, mine = false;
    for (int attempt = 0, delay_ms = 100; attempt < 7 && !(dflt && mine); attempt++, delay_ms *= 2) {
        if (attempt > 0) {
            struct timespec ts = {.tv_sec = delay_ms / 1000, .tv_nsec = (long)(delay_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (!dflt) dflt = reload_layer(d, "<default>", false) == 0;
        if (!mine) mine = reload_layer(d, d->id, true) == 0;
    }
    d->layers_loaded = dflt && mine;
    if (!d->layers_loaded) gr_error(LOGGER, "Cannot load the dynamic broker configs from /config/brokers");
}

/* Loads every user's SCRAM credentials (Kafka's CredentialProvider.updateCredentials at
 * start-up, through DynamicConfigManager's initial load of the users entities). 0, or the
 * ZooKeeper error that kept a user from being read (a config that does not parse is logged and
 * skipped: that user cannot log in until it is fixed). */
static int load_credentials_once(struct gr_dynamic_config_manager *d) {
    struct gr_zstrings names = {0};
    int rc = gr_kzk_get_entity_names(d->b->zk, "users", &names);
    if (rc == GR_KZK_ENONODE) rc = 0; /* no users yet */
    if (rc) {
        gr_zstrings_free(&names);
        return rc;
    }
    if (names.count > 0) {
        struct gr_kzk_config *cfgs = gr_calloc((size_t)names.count, sizeof *cfgs);
        int *rcs = gr_calloc((size_t)names.count, sizeof *rcs);
        rc = gr_kzk_get_entity_configs(d->b->zk, "users", (const char *const *)names.names, names.count, cfgs, rcs);
        for (int i = 0; i < names.count; i++) {
            if (rc == 0 && rcs[i] == 0) {
                gr_credcache_update(d->creds, names.names[i], &cfgs[i]);
            } else if (rc == 0 && rcs[i] == GR_ECORRUPT) {
                gr_error(LOGGER, "Cannot parse /config/users/%s: that user has no SCRAM credentials", names.names[i]);
            } else if (rc == 0) {
                rc = rcs[i];
            }
            gr_kzk_config_release(&cfgs[i]);
        }
        free(cfgs);
        free(rcs);
    }
    gr_zstrings_free(&names);
    return rc;
}

/* The start-up load, retried for about 10 s (Kafka's start-up waits for ZooKeeper and fails if
 * it cannot read the configs): a partial cache would refuse valid users until each one changes. */
static void load_credentials(struct gr_dynamic_config_manager *d) {
    int rc = 0;
    for (int attempt = 0, delay_ms = 100; attempt < 7; attempt++, delay_ms *= 2) {
        if (attempt > 0) {
            gr_warn(LOGGER, "Cannot read /config/users (retrying in %d ms): %s", delay_ms, gr_kzk_strerror(rc));
            struct timespec ts = {.tv_sec = delay_ms / 1000, .tv_nsec = (long)(delay_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        if ((rc = load_credentials_once(d)) == 0) {
            d->creds_loaded = true;
            gr_info(LOGGER, "Loaded the SCRAM credentials of %d users", gr_credcache_size(d->creds));
            return;
        }
    }
    gr_error(LOGGER, "Cannot load the SCRAM credentials from /config/users: %s", gr_kzk_strerror(rc));
}

bool gr_dcm_credentials_loaded(const struct gr_dynamic_config_manager *d) {
    return d && (d->creds_loaded || !d->b->zk);
}

bool gr_dcm_loaded(const struct gr_dynamic_config_manager *d) {
    return d && ((d->creds_loaded && d->layers_loaded) || !d->b->zk);
}

struct gr_dynamic_config_manager *gr_dcm_new(struct gr_broker *b) {
    struct gr_dynamic_config_manager *d = gr_calloc(1, sizeof *d);
    d->b = b;
    snprintf(d->id, sizeof d->id, "%d", b->broker_id);
    pthread_mutex_init(&d->mu, NULL);
    d->creds = gr_credcache_new();
    if (b->zk) {
        load_layers(d);
        if (d->layers_loaded) load_credentials(d);
    }
    return d;
}

int gr_dcm_scram_credential(struct gr_dynamic_config_manager *d, enum gr_scram_mech m, const char *user,
                            struct gr_scram_cred *out) {
    return d ? gr_credcache_get(d->creds, m, user, out) : -ENOENT;
}

void gr_dcm_free(struct gr_dynamic_config_manager *d) {
    if (!d) return;
    gr_kzk_config_release(&d->dyn_broker);
    gr_kzk_config_release(&d->dyn_default);
    gr_credcache_free(d->creds);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

/* ---- views ---- */

static void as_props(struct gr_props *p, const struct gr_kzk_config *c) {
    p->n = c ? c->n : 0;
    p->keys = c ? c->keys : NULL;
    p->values = c ? c->values : NULL;
}

void gr_dcm_view_get(struct gr_dynamic_config_manager *d, const struct gr_config *static_cfg, struct gr_dcm_view *v) {
    memset(v, 0, sizeof *v);
    if (d) {
        pthread_mutex_lock(&d->mu);
        copy_config(&v->dyn_broker, &d->dyn_broker);
        copy_config(&v->dyn_default, &d->dyn_default);
        pthread_mutex_unlock(&d->mu);
    }
    v->static_cfg = static_cfg;
    as_props(&v->pb, &v->dyn_broker);
    as_props(&v->pd, &v->dyn_default);
    v->layers.dyn_broker = &v->pb;
    v->layers.dyn_default = &v->pd;
    v->layers.static_cfg = static_cfg;
    v->layers.topic = NULL;
}

void gr_dcm_view_topic(struct gr_dcm_view *v, const struct gr_kzk_config *tc) {
    as_props(&v->pt, tc);
    v->layers.topic = tc ? &v->pt : NULL;
}

void gr_dcm_view_release(struct gr_dcm_view *v) {
    gr_kzk_config_release(&v->dyn_broker);
    gr_kzk_config_release(&v->dyn_default);
}

void gr_dcm_log_config(struct gr_dynamic_config_manager *d, const struct gr_config *static_cfg,
                       const struct gr_kzk_config *tc, struct gr_log_config *out) {
    struct gr_dcm_view v;
    gr_dcm_view_get(d, static_cfg, &v);
    gr_dcm_view_topic(&v, tc);
    gr_log_config_resolve(&v.layers, out);
    gr_dcm_view_release(&v);
}

int64_t gr_dcm_broker_long(struct gr_dynamic_config_manager *d, const struct gr_config *static_cfg, const char *name,
                           int64_t dflt) {
    /* Kafka 2.7: a <default> replication throttle rate does not reach the throttle. */
    bool skip_default = strstr(name, ".replication.throttled.rate") != NULL;
    const char *v = NULL;
    char buf[64] = "";
    if (d) {
        pthread_mutex_lock(&d->mu);
        v = gr_kzk_config_get(&d->dyn_broker, name);
        if (!v && !skip_default) v = gr_kzk_config_get(&d->dyn_default, name);
        if (v) snprintf(buf, sizeof buf, "%s", v);
        pthread_mutex_unlock(&d->mu);
    }
    if (!buf[0] && static_cfg && (v = gr_config_static_value(static_cfg, name)) != NULL)
        snprintf(buf, sizeof buf, "%s", v);
    if (!buf[0]) return dflt;
    char *end;
    long long x = strtoll(buf, &end, 10);
    return *end ? dflt : x;
}

/* ---- change handling (the listener's thread) ---- */

/* topics/<topic>. false when a read of /config/topics/<topic> failed: the listener hands the
 * change again later (applying it twice is harmless), so the hosted partitions do not keep the
 * old settings until the topic's next change. A config that does not parse (GR_ECORRUPT) is
 * not retried: it will not parse on the next pass either, and the listener would hold every
 * later notification behind it forever (Kafka logs the handler's failure and moves on). */
static bool on_topic(struct gr_dynamic_config_manager *d, const char *topic) {
    struct gr_broker *b = d->b;
    gr_info(LOGGER, "Processing override for entityPath: topics/%s", topic);
    int rc = gr_rm_reload_topic_config(b->replica_manager, topic);
    gr_quota_replication_topic_changed(b->quotas, topic);
    struct gr_kzk_config tc = {0};
    int trc = gr_kzk_get_entity_config(b->zk, "topics", topic, &tc);
    if (trc != 0) return trc == GR_ECORRUPT && (rc == 0 || rc == GR_ECORRUPT);
    const char *v = gr_kzk_config_get(&tc, "unclean.leader.election.enable");
    if (v && strcasecmp(v, "true") == 0 && b->controller)
        gr_ctrl_topic_unclean_leader_election_enabled(b->controller, topic);
    gr_kzk_config_release(&tc);
    return rc == 0 || rc == GR_ECORRUPT;
}

/* The broker-level unclean.leader.election.enable in effect, for the controller. */
static void tell_controller_unclean(struct gr_dynamic_config_manager *d) {
    struct gr_log_config ls;
    gr_dcm_log_config(d, d->b->cfg, NULL, &ls);
    if (d->b->controller)
        gr_ctrl_set_default_unclean_leader_election(d->b->controller, ls.unclean_leader_election_enable);
}

void gr_dcm_controller_attached(struct gr_dynamic_config_manager *d) {
    if (d) tell_controller_unclean(d);
}

/* users/<name>: the user's SCRAM credentials are re-read into the cache (Kafka's
 * UserConfigHandler -> CredentialProvider.updateCredentials). A config that does not parse counts
 * as no credentials. A read that fails drops the user from the cache at once (fail closed: a
 * changed or deleted password must not stay valid), is retried briefly, and then false: the
 * listener keeps the notification and hands it again on its next pass (as Kafka's
 * ZkNodeChangeNotificationListener does not advance past a change it failed to process), so a
 * valid user is back as soon as ZooKeeper answers, not only at its next change. */
static bool on_user_credentials(struct gr_dynamic_config_manager *d, const char *name) {
    if (strchr(name, '/') || strcmp(name, "<default>") == 0) return true; /* quota entities only */
    int rc = 0;
    for (int attempt = 0, delay_ms = 100; attempt < 3; attempt++, delay_ms *= 2) {
        struct gr_kzk_config c = {0};
        rc = gr_kzk_get_entity_config(d->b->zk, "users", name, &c);
        if (rc == 0 || rc == GR_ECORRUPT) {
            gr_credcache_update(d->creds, name, rc == 0 ? &c : NULL);
            gr_kzk_config_release(&c);
            return true;
        }
        gr_credcache_remove(d->creds, name);
        gr_warn(LOGGER, "Cannot read /config/users/%s (retrying in %d ms): %s", name, delay_ms, gr_kzk_strerror(rc));
        struct timespec ts = {.tv_sec = delay_ms / 1000, .tv_nsec = (long)(delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    gr_error(LOGGER, "Cannot read /config/users/%s: %s; its SCRAM credentials are removed until it is read", name,
             gr_kzk_strerror(rc));
    return false;
}

bool gr_dcm_on_entity_change(void *ctx, const char *entity) {
    struct gr_dynamic_config_manager *d = ctx;
    const char *slash = strchr(entity, '/');
    if (!slash || !slash[1]) {
        gr_warn(LOGGER, "Ignoring config change for malformed entity path %s", entity);
        return true;
    }
    size_t tl = (size_t)(slash - entity);
    const char *name = slash + 1;
    if (tl == 6 && strncmp(entity, "topics", 6) == 0) {
        return on_topic(d, name);
    } else if (tl == 7 && strncmp(entity, "brokers", 7) == 0) {
        bool dflt = strcmp(name, "<default>") == 0;
        if (!dflt && strcmp(name, d->id) != 0) return true;
        gr_info(LOGGER, "Processing override for entityPath: %s", entity);
        /* a layer that cannot be read is not applied: false, the change is handed again */
        int lrc = reload_layer(d, name, !dflt);
        if (lrc == GR_ECORRUPT) return true; /* does not parse: the layer in force stays, not retried */
        if (lrc != 0) return false;
        int rc = gr_rm_reload_topic_config(d->b->replica_manager, NULL);
        tell_controller_unclean(d);
        gr_quota_manager_reload_replication(d->b->quotas);
        return rc == 0 || rc == GR_ECORRUPT; /* a topic config that does not parse: not retried */
    } else if ((tl == 7 && strncmp(entity, "clients", 7) == 0) || (tl == 5 && strncmp(entity, "users", 5) == 0)) {
        gr_info(LOGGER, "Processing override for entityPath: %s", entity);
        bool ok = tl != 5 || on_user_credentials(d, name);
        return gr_quota_manager_reload(d->b->quotas) && ok;
    } else if (tl == 3 && strncmp(entity, "ips", 3) == 0) {
        gr_info(LOGGER, "Processing override for entityPath: %s", entity);
        return gr_quota_manager_reload_ips(d->b->quotas);
    } else {
        gr_debug(LOGGER, "Ignoring config change for entity path %s", entity);
    }
    return true;
}
