/* The broker's Prometheus endpoint: an HTTP server on gregor.metrics.listener=http://HOST:PORT
 * answering GET /metrics with the registry in the text exposition format
 * (gr_metrics_dump_prometheus). Gregor-only: Kafka itself exposes JMX and leaves HTTP to the
 * JMX exporter agent; this endpoint serves the names that agent's kafka-2_0_0.yml produces.
 *
 * HTTP is libmicrohttpd (Debian's libmicrohttpd-dev) with its own polling thread: request
 * parsing, keep-alive and limits are a solved problem we do not re-solve for one URL.
 *
 * Ownership and threading: the server borrows the registry, which must outlive
 * gr_metrics_http_stop. Start and stop from the owning (start-up) thread; scrapes run on
 * libmicrohttpd's thread and only read the registry (its own locking, metrics.h rule 3).
 *   GET|HEAD /metrics  200, text/plain; version=0.0.4
 *   GET /              200, a one-line pointer to /metrics
 *   other paths        404; other methods 405 */
#ifndef GR_BROKER_METRICS_HTTP_H
#define GR_BROKER_METRICS_HTTP_H

#include <stddef.h>

struct gr_metrics;
struct gr_metrics_http;

/* Parses "http://HOST:PORT" (HOST may be empty = all interfaces, or [v6]; PORT 0..65535).
 * Returns 0 or -EINVAL. */
int gr_metrics_http_parse(const char *url, char *host, size_t hostlen, int *port);

/* Binds and starts serving. Returns 0, -EINVAL (bad URL), or -errno (e.g. -EADDRINUSE). */
int gr_metrics_http_start(const char *url, struct gr_metrics *reg, struct gr_metrics_http **out);

/* The bound port (useful with port 0), or -1. */
int gr_metrics_http_port(const struct gr_metrics_http *h);

/* Stops the server (waits for a running scrape) and frees it. NULL is ignored. */
void gr_metrics_http_stop(struct gr_metrics_http *h);

#endif
