/* Broker security set-up: see broker_security.h. */
#include "security/broker_security.h"

#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "net/kafka_client.h"
#include "security/sasl_server.h"
#include "security/ssl_ctx.h"

#define LOGGER "kafka.server.KafkaServer"

struct listener_props {
    const struct gr_config *cfg;
    const char *listener;
    bool sasl; /* SASL_SSL: Kafka 2.7 never asks for client certificates there (KIP-684 is 3.0) */
};

static const char *listener_prop(void *ctx, const char *key) {
    struct listener_props *p = ctx;
    if (p->sasl && strcmp(key, "ssl.client.auth") == 0) return "none";
    return gr_config_listener_prop(p->cfg, p->listener, key);
}

static bool is_tls(const char *proto) { return proto && (!strcmp(proto, "SSL") || !strcmp(proto, "SASL_SSL")); }
static bool is_sasl(const char *proto) { return proto && !strncmp(proto, "SASL_", 5); }

static int inter_broker_client(const struct gr_config *cfg, char *err, size_t errlen) {
    const struct gr_listener *ibl = gr_config_inter_broker_listener(cfg);
    const char *proto = ibl ? gr_config_security_protocol(cfg, ibl->name) : NULL;
    struct gr_client_security sec = {.protocol = proto ? proto : "PLAINTEXT"};
    struct listener_props lp = {cfg, ibl ? ibl->name : NULL, false};
    char *user = NULL, *pass = NULL;
    int rc = 0;
    if (is_tls(proto)) {
        char why[512];
        sec.ssl_ctx = gr_ssl_ctx_new(false, listener_prop, &lp, &sec.verify_hostname, why, sizeof why);
        if (!sec.ssl_ctx) {
            snprintf(err, errlen, "inter-broker listener %s: %s", ibl->name, why);
            return GR_ECONFIG;
        }
    }
    if (is_sasl(proto)) {
        const char *mech = gr_config_listener_prop(cfg, NULL, "sasl.mechanism.inter.broker.protocol");
        if (!mech) mech = "GSSAPI";
        if (!gr_sasl_mechanism_enabled(cfg, ibl->name, mech)) {
            snprintf(err, errlen,
                     "Invalid value %s for configuration sasl.mechanism.inter.broker.protocol: it must be PLAIN, "
                     "SCRAM-SHA-256 or SCRAM-SHA-512 and enabled on listener %s (sasl.enabled.mechanisms)",
                     mech, ibl->name);
            rc = GR_ECONFIG;
        } else {
            const char *jaas = gr_sasl_jaas_config(cfg, ibl->name, mech);
            user = gr_jaas_option(jaas, "username");
            pass = gr_jaas_option(jaas, "password");
            if (!user || !pass) {
                snprintf(err, errlen, "the JAAS configuration of listener %s for %s needs username and password "
                         "options for inter-broker connections", ibl->name, mech);
                rc = GR_ECONFIG;
            }
        }
        sec.sasl_mechanism = mech;
        sec.sasl_username = user;
        sec.sasl_password = pass;
    }
    if (rc == 0) {
        gr_kafka_client_set_default_security(&sec);
        gr_info(LOGGER, "inter-broker connections use listener %s (%s%s%s)", ibl ? ibl->name : "?", sec.protocol,
                sec.sasl_mechanism ? ", " : "", sec.sasl_mechanism ? sec.sasl_mechanism : "");
    }
    SSL_CTX_free(sec.ssl_ctx);
    free(user);
    free(pass);
    return rc;
}

int gr_security_broker_init(const struct gr_config *cfg, struct gr_net_listener_security *ls, char *err,
                            size_t errlen) {
    memset(ls, 0, sizeof *ls * (size_t)cfg->num_listeners);
    for (int i = 0; i < cfg->num_listeners; i++) {
        const char *name = cfg->listeners[i].name;
        const char *proto = gr_config_security_protocol(cfg, name);
        ls[i].sasl = is_sasl(proto);
        if (ls[i].sasl) {
            const char *mechs = gr_sasl_enabled_mechanisms(cfg, name);
            bool any = gr_sasl_mechanism_enabled(cfg, name, "PLAIN") ||
                       gr_sasl_mechanism_enabled(cfg, name, "SCRAM-SHA-256") ||
                       gr_sasl_mechanism_enabled(cfg, name, "SCRAM-SHA-512");
            if (!any) {
                snprintf(err, errlen, "Invalid value %s for configuration sasl.enabled.mechanisms (listener %s): "
                         "Gregor implements PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", mechs, name);
                gr_security_listeners_release(ls, i);
                return GR_ECONFIG;
            }
        }
        if (!is_tls(proto)) continue;
        struct listener_props lp = {cfg, name, ls[i].sasl != 0};
        char why[512];
        ls[i].ssl_ctx = gr_ssl_ctx_new(true, listener_prop, &lp, NULL, why, sizeof why);
        if (!ls[i].ssl_ctx) {
            snprintf(err, errlen, "listener %s: %s", name, why);
            gr_security_listeners_release(ls, i);
            return GR_ECONFIG;
        }
    }
    int rc = inter_broker_client(cfg, err, errlen);
    if (rc) gr_security_listeners_release(ls, cfg->num_listeners);
    return rc;
}

void gr_security_listeners_release(struct gr_net_listener_security *ls, int n) {
    for (int i = 0; i < n; i++) {
        SSL_CTX_free(ls[i].ssl_ctx);
        ls[i].ssl_ctx = NULL;
    }
}
