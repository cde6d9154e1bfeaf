/* The broker's security set-up from its configuration (docs/SECURITY.md): one
 * struct gr_net_listener_security per listener (TLS context for SSL/SASL_SSL, SASL flag for
 * SASL_*), and the inter-broker client settings every outbound connection of the broker uses
 * (controller -> brokers, replica fetchers, AlterPartition, controlled shutdown), installed as the
 * Kafka client's default (net/kafka_client.h):
 *   protocol   the inter-broker listener's security protocol
 *   TLS        the inter-broker listener's ssl.* keys (listener.name.<l>. prefix first), so its
 *              keystore is also the client certificate
 *   SASL       sasl.mechanism.inter.broker.protocol (Kafka's default GSSAPI is refused), with
 *              the username/password options of that listener's JAAS config for the mechanism.
 * Start-up thread only. */
#ifndef GR_SECURITY_BROKER_SECURITY_H
#define GR_SECURITY_BROKER_SECURITY_H

#include <stddef.h>

#include "net/server.h"

struct gr_config;

/* Fills ls[0..cfg->num_listeners) and installs the inter-broker client default. 0, or
 * GR_ECONFIG with a message naming the key in err (nothing to release then). */
int gr_security_broker_init(const struct gr_config *cfg, struct gr_net_listener_security *ls, char *err,
                            size_t errlen);
/* Drops the caller's SSL_CTX references (the network server holds its own). */
void gr_security_listeners_release(struct gr_net_listener_security *ls, int n);

#endif
