/* The one Kafka request/response client (Kafka's NetworkClient reduced to one blocking request
 * at a time). Every outbound Kafka conversation in Gregor goes through it: the controller's
 * channel manager, the replica fetchers, the AlterPartition sender, the broker's controlled-shutdown
 * client and gregorctl. It owns the cycle
 *     encode -> (connect) -> send -> receive -> correlation check -> decode
 * and the rule "any failure drops the connection; the next call reconnects". It is built over
 * the blocking net client (net/client.h), which it hides.
 *
 * Target: a client talks to one peer at a time (node id, host, port), set with
 * gr_kafka_client_set_target; changing it drops the connection. The connection is opened lazily
 * by the next call (or gr_kafka_client_connect), bounded by connect_timeout_ms.
 *
 * One call, one attempt: gr_kafka_client_call sends once and returns the decoded response or an
 * error; after an error (transport failure, timeout, correlation id mismatch, undecodable
 * response) the connection is closed and the next call reconnects. Retry policy stays with the
 * caller, except for gr_kafka_client_call_until_answered (the controller's send threads: retry
 * after backoff_ms until a response arrives or the client is shut down).
 *
 * Ownership: the client copies every string given to it and owns its connection. A successful
 * call puts the decoded response struct in the caller's arena and hands back the response frame
 * (malloc'd; the caller frees it after the last use of the body, whose bytes/records fields
 * point into it). The request body is only read during the call.
 *
 * Threading: one thread at a time (the owner) uses a client: every function except
 * gr_kafka_client_shutdown. gr_kafka_client_shutdown may be called from any thread at any time
 * until gr_kafka_client_free; it wakes the owner out of a blocked send/receive or backoff, and
 * from then on every call fails at once with GR_ECLOSED (sticky). A connect() already under way
 * ends within connect_timeout_ms.
 *
 * Errors (int returns): 0; GR_ECLOSED (peer closed the connection, or the client was shut
 * down); GR_ETIMEOUT; GR_EPROTO (correlation id mismatch, malformed or oversized response);
 * -EHOSTUNREACH (no target set, or the name does not resolve); -errno from connect/send/recv
 * (e.g. -ECONNREFUSED); a codec code from encoding (GR_PROTO_E*, -EINVAL, -EMSGSIZE: nothing
 * was sent and the connection is kept). */
#ifndef GR_NET_KAFKA_CLIENT_H
#define GR_NET_KAFKA_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "protocol/arena.h"

/* How a client secures its connections (Kafka's client keys security.protocol, ssl.*, sasl.*).
 * After TCP connect: TLS for SSL/SASL_SSL, then for SASL_* a SaslHandshake v1 and the
 * mechanism's SaslAuthenticate exchange (PLAIN, SCRAM-SHA-256/512) before the first request. A
 * failed authentication fails the connect with GR_EAUTH-like -EACCES (logged at WARN). */
struct gr_client_security {
    const char *protocol;       /* "PLAINTEXT" (or NULL), "SSL", "SASL_PLAINTEXT", "SASL_SSL" */
    void *ssl_ctx;              /* client SSL_CTX * for SSL/SASL_SSL (security/ssl_ctx.h) */
    bool verify_hostname;       /* ssl.endpoint.identification.algorithm=https */
    const char *sasl_mechanism; /* PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 */
    const char *sasl_username;
    const char *sasl_password;
};

/* The security every client uses whose config has security NULL: the broker sets its
 * inter-broker settings here at start-up, gregorctl its --command-config. Copied (the SSL_CTX is
 * referenced); NULL resets to PLAINTEXT. Such clients read it at each connect, so clients made
 * before it was set (e.g. the AlterPartition sender) use it from their next connection on. Any thread. */
void gr_kafka_client_set_default_security(const struct gr_client_security *sec);

struct gr_kafka_client_config {
    const char *client_id;      /* request header ClientId (copied); NULL = "gregor" */
    /* logger name for this client's log lines; NULL = "net.kafka_client". Not copied: it must live
     * as long as the process (a LOGGER literal), as per-logger levels key loggers by the name's
     * address (common/log_controller.h) */
    const char *logger;
    const char *log_prefix;     /* start of its log lines, e.g. "[ReplicaFetcherThread-0-2]" (copied);
                                 * NULL = "[client_id]" */
    int connect_timeout_ms;     /* connect bound; 0 = 30000, < 0 = none */
    int request_timeout_ms;     /* exchange bound when a call passes 0; 0 = 30000, < 0 = none */
    int64_t max_response_bytes; /* 0 = the net client's default (1 GiB) */
    const struct gr_client_security *security; /* NULL: the default (above); copied */
};

struct gr_kafka_client;

/* A client without a target and without a connection. Any thread. */
struct gr_kafka_client *gr_kafka_client_new(const struct gr_kafka_client_config *cfg);
/* Closes the connection and frees. NULL ignored. Owner thread; no concurrent shutdown. */
void gr_kafka_client_free(struct gr_kafka_client *kc);

/* Sets the peer (node_id is only for log lines; -1 if unknown). A target different from the
 * current one closes the connection; the same one keeps it. */
void gr_kafka_client_set_target(struct gr_kafka_client *kc, int32_t node_id, const char *host, int port);
/* Is a connection open (it may still turn out dead on the next call)? */
bool gr_kafka_client_connected(const struct gr_kafka_client *kc);
/* Opens the connection to the target unless one is open. 0 or an error (above). */
int gr_kafka_client_connect(struct gr_kafka_client *kc);
/* Closes the connection (if any); the target is kept. */
void gr_kafka_client_disconnect(struct gr_kafka_client *kc);

/* One request: encodes body (a struct <Api>Request) as api_key/api_version with the next
 * correlation id, connects if needed, sends it and waits for the answer (timeout_ms: 0 = the
 * configured request timeout, < 0 = none), checks its correlation id and decodes it into a.
 * On success *resp is the struct <Api>Response and *frame the buffer it points into (caller
 * frees); frame NULL copies the response frame into a instead, so that the response lives
 * exactly as long as the arena. On error both are NULL and the connection is closed (unless
 * encoding failed). */
int gr_kafka_client_call(struct gr_kafka_client *kc, int16_t api_key, int16_t api_version, const void *body,
                         int timeout_ms, struct gr_arena *a, void **resp, uint8_t **frame);

/* gr_kafka_client_call until it succeeds: after each failure logs a WARN, waits backoff_ms
 * (interrupted by shutdown) and tries again (reconnecting). Returns 0, GR_ECLOSED once shut
 * down, or an encoding error (never retried). */
int gr_kafka_client_call_until_answered(struct gr_kafka_client *kc, int16_t api_key, int16_t api_version,
                                        const void *body, int timeout_ms, int backoff_ms, struct gr_arena *a,
                                        void **resp, uint8_t **frame);

/* Sleeps ms unless/until the client is shut down. 0, or GR_ECLOSED when shut down. */
int gr_kafka_client_backoff(struct gr_kafka_client *kc, int64_t ms);

/* Any thread (see above): wakes the owner and fails every later call with GR_ECLOSED. */
void gr_kafka_client_shutdown(struct gr_kafka_client *kc);
/* Like shutdown, but not sticky: wakes the owner out of a blocked send/receive (that call fails
 * with GR_ECLOSED or an errno and drops the connection; the next call reconnects). Without a
 * call under way, the open connection is shut and the owner's next call fails once. Any thread.
 * (The fetchers use it to add partitions without waiting out a parked long-poll Fetch.) */
void gr_kafka_client_interrupt(struct gr_kafka_client *kc);
bool gr_kafka_client_is_shut_down(struct gr_kafka_client *kc);

/* "host:port" of the target ("" before one is set), for log lines. Owned by the client;
 * valid until the next set_target. */
const char *gr_kafka_client_peer(const struct gr_kafka_client *kc);

#endif
