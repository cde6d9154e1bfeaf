/* Connection creation rate limits (KIP-612; Kafka's ConnectionQuotas, the rate part):
 *  - max.connection.creation.rate (broker-wide, default 2147483647 = none) and
 *    listener.name.<l>.max.connection.creation.rate (per listener; unset: the broker-wide value,
 *    as Kafka's valuesWithPrefixOverride): a new connection is recorded on the broker sensor
 *    (not for the protected inter-broker listener) and on its listener's; over a limit, the
 *    acceptor holds that connection and stops accepting on the listener for the throttle time
 *    (Kafka's Acceptor waits in waitForConnectionSlot), then serves it;
 *  - connection_creation_rate of /config/ips/<ip> and /config/ips/<default> (KIP-612's per-IP
 *    quota, Kafka 2.8): a connection that takes its address over the rate is not counted and is
 *    closed, unserved, after the throttle time (Kafka's ConnectionThrottledException and
 *    DelayedCloseSocket); other addresses are not slowed.
 * Rates are Kafka's Rate over quota.window.num windows of quota.window.size.seconds (common/rate.h);
 * throttle times are QuotaUtils.boundedThrottleTime: at most one window.
 * Per-IP sensors exist only for addresses with a quota and are removed after an hour without a
 * connection (Kafka's InactiveSensorExpirationTimeSeconds), swept every 30 s.
 *
 * Ownership: one per network server (net/server.c), freed with it.
 * Threading: any thread (the network threads accept, the config listener sets the IP quotas);
 * one internal mutex, held only for hash lookups and the rate arithmetic (and for the periodic
 * sweep of idle IP sensors). */
#ifndef GR_NET_CONNECTION_RATE_H
#define GR_NET_CONNECTION_RATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gr_conn_rate;

#define GR_CONN_RATE_NONE 2147483647 /* Int.MaxValue: no limit */

/* listener_rates: num_listeners values (GR_CONN_RATE_NONE for none) or NULL (each listener gets
 * broker_rate); protected_listener: the index exempt from the broker-wide rate, -1 none. */
struct gr_conn_rate *gr_conn_rate_new(int num_listeners, int protected_listener, int broker_rate,
                                      const int *listener_rates, int samples, int64_t window_ms);
void gr_conn_rate_free(struct gr_conn_rate *r);

/* Records a new connection on listener idx at now (monotonic ms); returns how long (ms) the
 * acceptor waits before serving it, 0 when within the limits. */
int64_t gr_conn_rate_accept(struct gr_conn_rate *r, int idx, int64_t now);

/* Records a new connection from ip (the peer address as net/server.c formats it: IPv4 dotted,
 * IPv6 per inet_ntop, IPv4-mapped as IPv4); returns 0 when it is accepted, else the delay (ms)
 * after which it is closed without being served (it is then not counted). */
int64_t gr_conn_rate_ip(struct gr_conn_rate *r, const char *ip, int64_t now);

/* Replaces the per-IP quotas: dflt for every address without its own (< 0: none), and n
 * addresses with theirs (any textual form inet_pton reads; others are ignored with a WARN).
 * Sensors of addresses that keep a quota keep their history. */
void gr_conn_rate_set_ip_quotas(struct gr_conn_rate *r, double dflt, const char *const *ips, const double *rates,
                                int n);

/* Live per-IP sensors (tests). */
int gr_conn_rate_ip_sensors(struct gr_conn_rate *r);

/* An address in the form the per-IP state is keyed by; false if it is not an IP address. */
bool gr_conn_rate_normalize_ip(const char *in, char *out, size_t n);

#endif
