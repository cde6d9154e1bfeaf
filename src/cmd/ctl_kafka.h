/* Kafka-protocol client helpers for gregorctl subcommands: connect to a bootstrap server (one
 * of a comma-separated list, as Kafka's tools take it), send one codec request and decode its
 * response (through the Kafka client, net/kafka_client.h), find the controller through
 * Metadata. Single-threaded (the CLI's main thread). Errors are printed to stderr. */
#ifndef GR_CMD_CTL_KAFKA_H
#define GR_CMD_CTL_KAFKA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/codec.h"

struct ctl_opts;
struct gr_kafka_client;

struct ctl_kafka {
    struct gr_kafka_client *kc;
    int timeout_ms; /* connect and per-request bound */
};

/* Splits "host:port" or "[v6]:port" (host into host[hostlen]). 0 or -EINVAL. */
int ctl_kafka_parse_hostport(const char *s, char *host, size_t hostlen, int *port);
/* Connects to host:port. 0 or a negative code (message printed to stderr). */
int ctl_kafka_connect(const char *host, int port, int timeout_ms, struct ctl_kafka *k);
/* --bootstrap-server: a comma-separated list of HOST:PORT. Every entry is checked first (a
 * malformed one is an error naming it: -EINVAL); then each is tried in order until one accepts
 * a connection (each bounded by timeout_ms). 0, or the last error (each failure printed). */
int ctl_kafka_connect_str(const char *bootstrap_list, int timeout_ms, struct ctl_kafka *k);
void ctl_kafka_close(struct ctl_kafka *k);
/* "host:port" of the connected broker. */
const char *ctl_kafka_peer(const struct ctl_kafka *k);
/* Sends body (struct <Api>Request) as api_key/ver and returns the decoded response struct,
 * allocated in a (the response frame is copied into a too), or NULL (error printed). */
void *ctl_kafka_call(struct ctl_kafka *k, int16_t api_key, int16_t ver, const void *body,
                     struct gr_arena *a);
/* Metadata v7 for topics (n < 0: all topics; 0: none). NULL on error. */
struct MetadataResponse *ctl_kafka_metadata(struct ctl_kafka *k, const char *const *topics, int n,
                                            struct gr_arena *a);
/* Connects ctl to the controller named by boot's Metadata. 0 connected, 1 no controller known
 * or it has no endpoint here (use boot itself), negative on error. */
int ctl_kafka_connect_controller(struct ctl_kafka *boot, int timeout_ms, struct ctl_kafka *ctl);
/* Sends body (a request carrying TimeoutMs = timeout_ms) to the controller, connecting to it
 * afresh each attempt, until a response for which retry(resp) is false, at most `attempts`
 * times and 300 ms apart until timeout_ms have passed. Each call waits timeout_ms + 5 s (the
 * broker answers after TimeoutMs at the latest). Returns that response, else the last one
 * received (retry true), else NULL; it lives in a. */
void *ctl_kafka_call_controller(struct ctl_kafka *boot, int timeout_ms, int attempts, int16_t api_key, int16_t ver,
                                const void *body, struct gr_arena *a, bool (*retry)(const void *resp));

/* gregorctl topics create|list|describe (ctl_topics.c). Same contract as the other ctl_*_main
 * functions in cmd/ctl.h: argv[0] is "topics". */
int ctl_topics_main(const struct ctl_opts *o, int argc, char **argv);
/* The same without global options parsed: accepts --bootstrap-server HOST:PORT and
 * --timeout-ms N among its own arguments. */
int gr_ctl_topics_main(int argc, char **argv);

#endif
