/* The broker's network server: epoll event loops that accept connections and cut the byte
 * stream into Kafka request frames, a pool of I/O threads that run the request handler, and
 * the way back for responses. This layer moves bytes only; it knows nothing of the Kafka codec
 * except the 8-byte prefix every request header starts with.
 *
 * Wire framing (both directions):
 *
 *   offset  size  field
 *   0       4     Size: int32 big-endian, number of bytes that follow
 *   4       Size  the request (or response) itself
 *
 * and every request starts with
 *
 *   0       2     RequestApiKey      int16 BE
 *   2       2     RequestApiVersion  int16 BE
 *   4       4     CorrelationId      int32 BE
 *
 * A request Size below 8, negative, or above socket_request_max_bytes closes the connection
 * (WARN line naming the peer and the reason); the size is checked before any allocation, and the
 * read buffer grows with the bytes actually received, never beyond the announced size.
 *
 * Threading model
 * ---------------
 * - num_network_threads event loops ("network threads"). Each owns an epoll set, the listening
 *   sockets (shared with EPOLLEXCLUSIVE: whichever loop wakes up accepts), the connections it
 *   accepted, an eventfd and a completion queue. A connection lives on one loop for its whole
 *   life and only that loop touches its socket and buffers.
 * - num_io_threads worker threads ("I/O threads", Kafka's request handler pool) take complete
 *   requests from one shared FIFO queue and call the handler.
 * - Ordering: like Kafka, a connection hands one request at a time to the handlers. Once a frame
 *   is complete the connection is muted (its socket is not read any more) until the response
 *   has been written to the socket (or gr_net_respond_none was called) — or, for a Produce
 *   (api_key 0) on a plaintext connection, until its handler calls gr_net_request_release (its
 *   appends are done): then the next frame is read and, if it is a Produce too, handed over while
 *   the first still waits (for replication); any other frame waits until nothing is
 *   outstanding. At most GR_NET_MAX_OUTSTANDING requests are outstanding per connection, and
 *   responses always leave in request order. Kafka's SocketServer mutes until the response is
 *   sent; the deviation lets one producer connection have more than one replication round trip
 *   in flight (bench/README.md, issue 14 session 4). Memory held per connection is bounded by
 *   GR_NET_MAX_OUTSTANDING requests plus their responses.
 * - Direct send: on a plaintext connection the thread that completes a request with a response
 *   (and no throttle or delayed close; the connection's only outstanding request, not released)
 *   writes it to the socket itself, since the muted
 *   connection's socket is idle meanwhile; only a partial write, an error or TLS hands the rest to
 *   the loop. The loop learns of the completion when it next wakes (server.c rule 5).
 * - Idle connections (no bytes read or written for connections_max_idle_ms and no request with
 *   the handlers) are closed by their loop.
 *
 * Handler contract (numbered so other code can cite it)
 * ----------------------------------------------------
 * 1. The handler is called on an I/O thread with a request it now owns. It may finish the
 *    request itself or hand it to any other thread (delayed operations: long-poll Fetch,
 *    acks=all Produce) and return at once.
 * 2. Every request must be completed by exactly one call of gr_net_respond, gr_net_respond_take,
 *    gr_net_respond_none or gr_net_close, from any thread, at any later time. The call frees
 *    the request: neither it nor req->data may be touched afterwards. Calling two of them, or one
 *    twice, is a bug. A request that is never completed leaks and keeps its connection muted.
 * 3. If the connection closed meanwhile (peer gone, idle, server stopped), completing the request
 *    still works: the response is dropped and the request freed.
 * 4. The server's memory stays alive while requests are outstanding: gr_net_server_free may be
 *    called before every request is completed; the last completion frees what remains. After
 *    gr_net_server_stop returns the handler is never called again.
 * 5. A handler that blocks holds an I/O thread; gr_net_server_stop waits for running handler
 *    calls to return (not for requests handed to other threads), so it must not be called from
 *    a handler, and a handler must not wait for something that only happens after stop.
 * 6. The handler must not keep pointers into the request (data, listener, peer) after
 *    completing it; copy what is needed.
 */
#ifndef GR_NET_SERVER_H
#define GR_NET_SERVER_H

#include <stddef.h>
#include <stdint.h>

struct gr_histogram;
struct gr_client_sw;

#define GR_NET_DEFAULT_SOCKET_REQUEST_MAX_BYTES 104857600 /* Kafka socket.request.max.bytes */
#define GR_NET_DEFAULT_CONNECTIONS_MAX_IDLE_MS 600000     /* Kafka connections.max.idle.ms */
#define GR_NET_DEFAULT_NUM_NETWORK_THREADS 1
#define GR_NET_DEFAULT_NUM_IO_THREADS 8
#define GR_NET_DEFAULT_QUEUED_MAX_REQUESTS 500 /* Kafka queued.max.requests */
#define GR_NET_MAX_OUTSTANDING 5  /* requests per connection after releases (librdkafka's idempotent limit) */
#define GR_NET_SASL_MAX_RECEIVE 524288 /* frames before SASL completes (Kafka 2.8's sasl.server.max.receive.size) */

/* One listening socket, e.g. {"PLAINTEXT", "0.0.0.0", 9092}. host NULL or "" means all
 * interfaces; port 0 binds an ephemeral port (see gr_net_server_port).
 *
 * Security (docs/SECURITY.md), from gr_net_config.security: with ssl_ctx (an SSL_CTX *, reference taken by
 * gr_net_server_new) every connection first completes a TLS handshake (net/tls.h) before any
 * frame is read; a peer that is not speaking TLS, or fails the handshake, is closed and logged
 * at WARN. The principal of a verified client certificate becomes the session's principal. With
 * sasl the session is marked as needing SASL; the handler enforces it (api/apis.c). */
struct gr_net_listener {
    const char *name;
    const char *host;
    int port;
};

/* The security of one listener (gr_net_config.security). */
struct gr_net_listener_security {
    void *ssl_ctx; /* NULL: plaintext */
    int sasl;      /* nonzero: SASL_PLAINTEXT / SASL_SSL */
};

/* Per-connection authentication state. The connection and every outstanding request share it
 * (reference counted; the last one frees it, mech_free for mech_state). A handler may change it
 * only while its request is the connection's only outstanding one, which holds for every request
 * but a released Produce (gr_net_request_release), and a released Produce only reads it. */
struct gr_net_session {
    char *principal;       /* malloc'd "User:..."; NULL = "User:ANONYMOUS" */
    int sasl;              /* the listener requires SASL */
    int tls;               /* the connection is TLS */
    int state;             /* owned by the handler layer (api/handle_sasl.c); 0 at accept */
    int authenticated;     /* SASL complete; until then a SASL listener accepts frames of at most
                            * GR_NET_SASL_MAX_RECEIVE bytes */
    int raw_tokens;        /* the next frames are raw SASL tokens (SaslHandshake v0): any size
                            * of at least 1 is accepted and api_key reads as -1 */
    char mechanism[32];
    void *mech_state;      /* the SASL mechanism's server state, freed with mech_free */
    void (*mech_free)(void *);
    int64_t close_after_ms; /* > 0: once the response is written, close the connection after
                             * this delay without reading more (failed authentication) */
    int extra_refs;         /* private to net/server.c: requests sharing it (see release below) */
    struct gr_client_sw *client_sw; /* private to net/: its KIP-511 count (net/client_software.h) */
};

/* Frees a session (principal, mech_state). NULL ignored. */
void gr_net_session_free(struct gr_net_session *s);

struct gr_net_config {
    const struct gr_net_listener *listeners; /* copied by gr_net_server_new */
    int num_listeners;
    const struct gr_net_listener_security *security; /* NULL (all plaintext) or one per listener */
    int64_t socket_request_max_bytes; /* 8 .. INT32_MAX */
    int64_t connections_max_idle_ms;  /* <= 0: never close idle connections */
    int num_network_threads;          /* >= 1 */
    int num_io_threads;               /* >= 1 */
    /* Limits (docs/SECURITY.md "Hostile input: limits"), Kafka's names and defaults: */
    int queued_max_requests;                      /* >= 1, queued.max.requests (500): at this many complete requests
                              * waiting for an I/O thread the network threads stop reading
                              * (connections stay muted) until the queue drops below it */
    int max_connections;                          /* >= 0, max.connections (INT32_MAX): broker-wide; at the limit the
                              * listeners stop accepting (new connections wait in the backlog)
                              * until a connection closes. With more than one listener the
                              * inter-broker one is exempt (its connections still count) */
    const char *inter_broker_listener;            /* NULL: none; copied */
    int max_connections_per_ip;                   /* >= 0, max.connections.per.ip (INT32_MAX): a connection from an
                                 * address that already has this many is closed right after
                                 * accept (INFO line) */
    const char *max_connections_per_ip_overrides; /* max.connections.per.ip.overrides, "host:n,..."
                                                   * (host names resolved at start); NULL/"" none */
    /* KIP-612 (net/connection_rate.h): max.connection.creation.rate (2147483647 = none), and per
     * listener (NULL: every listener gets the broker-wide value, as Kafka); rates measured over
     * quota.window.num (11) windows of quota.window.size.seconds (1). */
    int max_connection_creation_rate;
    const int *listener_max_connection_creation_rate; /* num_listeners values, or NULL */
    int quota_window_num;
    int quota_window_size_seconds;
};

/* Request metrics the network thread completes once the response is written (Kafka's
 * RequestChannel.updateRequestMetrics at the end of the send): up to two request names (a Fetch
 * counts under Fetch and FetchConsumer/FetchFollower), each with three histograms, any NULL.
 * The histograms belong to a metrics registry that must outlive the server. */
struct gr_net_send_metrics {
    struct gr_histogram *response_queue_ms; /* completion -> a network thread takes the response */
    struct gr_histogram *response_send_ms;  /* taken -> its last byte written */
    struct gr_histogram *total_ms;          /* frame read -> its response's last byte written */
};

/* A complete request frame as the handler sees it. All fields are read-only for the handler
 * except throttle_ms and sent_metrics. */
struct gr_net_request {
    uint8_t *data;          /* the frame after the 4-byte size prefix; owned by the request */
    size_t len;             /* >= 8 */
    int16_t api_key;        /* the header prefix, decoded for convenience */
    int16_t api_version;
    int32_t correlation_id;
    uint64_t conn_id;       /* unique per server (never reused), for logs and sessions */
    const char *listener;   /* listener name; valid while the request lives */
    char peer[64];          /* "1.2.3.4:5678" or "[::1]:5678" */
    int64_t received_us;    /* gr_mono_us() when the last byte of the frame was read */
    struct gr_net_session *session; /* lent to the request; never NULL (see above) */
    int32_t throttle_ms;    /* the handler may set it before completing: the connection then stays
                             * muted this long after the response is written (or after
                             * gr_net_respond_none), Kafka's channel throttling (KIP-219) */
    struct gr_net_send_metrics sent_metrics[2]; /* the handler may set them before completing:
                             * updated when the response is written, or at once for
                             * gr_net_respond_none / gr_net_close (send time 0); not if the
                             * connection closed first */
};

/* Called on an I/O thread; see the handler contract above. */
typedef void (*gr_net_handler_fn)(void *ctx, struct gr_net_request *req);

/* Counters since the server was created (monotonic except connections_open). */
struct gr_net_stats {
    int64_t connections_open;
    int64_t connections_accepted;
    int64_t connections_closed_idle;
    int64_t requests;         /* complete frames handed to the handlers */
    int64_t responses;        /* responses fully written to sockets */
    int64_t bytes_in;
    int64_t bytes_out;
    int64_t bytes_sendfile;   /* of bytes_out, sent from files with sendfile(2) */
    int64_t frames_rejected;  /* connections closed for an invalid frame size */
    int64_t connections_refused; /* closed right after accept: max.connections.per.ip */
    int64_t request_queue_size; /* complete requests waiting for an I/O thread (a gauge) */
    int64_t response_queue_size; /* completed requests waiting for their network thread, their
                                  * response not written yet (a gauge; Kafka's ResponseQueueSize) */
    /* Produce requests (api_key 0) answered with a response, and their time at the broker summed
     * in microseconds (Kafka's RequestMetrics RequestQueueTimeMs / TotalTimeMs for Produce):
     * queue = last byte read -> an I/O thread calls the handler; total = last byte read -> last
     * byte of the response written to the socket. */
    int64_t produce_responses;
    int64_t produce_queue_us;
    int64_t produce_total_us;
    int64_t loop_wakeups; /* epoll_wait returns with at least one event, all network threads */
    int64_t requests_pipelined; /* handed over while another of the connection's was outstanding */
    /* time the threads spent waiting for work, summed over the threads, in microseconds: network
     * threads in epoll_wait, I/O threads for a request (Kafka's NetworkProcessorAvgIdlePercent /
     * RequestHandlerAvgIdlePercent are these over wall time x threads) */
    int64_t network_idle_us, io_idle_us;
    int num_network_threads, num_io_threads;
};


struct gr_net_server;

/* Fills cfg with Kafka's defaults and no listeners. */
void gr_net_config_init(struct gr_net_config *cfg);

/* Validates and copies cfg (listener strings included) and creates a stopped server.
 * handler_ctx is passed to every handler call and is not owned. Returns 0, GR_ECONFIG (reason
 * logged). Any thread. */
int gr_net_server_new(const struct gr_net_config *cfg, gr_net_handler_fn handler, void *handler_ctx,
                      struct gr_net_server **out);

/* Binds and listens on every listener, then starts the network and I/O threads. On failure
 * returns -errno (e.g. -EADDRINUSE) after logging an ERROR naming the listener, and leaves
 * nothing bound or running. Call once, from the owning thread. */
int gr_net_server_start(struct gr_net_server *srv);

/* The port listener `idx` is bound to (useful with port 0), or -1 if idx is out of range or the
 * server has not been started. Any thread. */
int gr_net_server_port(const struct gr_net_server *srv, int idx);

/* The per-IP connection creation rate quotas (connection_creation_rate of /config/ips/<ip>, dflt
 * from /config/ips/<default>, < 0 none), replacing the previous ones; any thread
 * (net/connection_rate.h). */
void gr_net_server_set_ip_connection_rates(struct gr_net_server *srv, double dflt, const char *const *ips,
                                           const double *rates, int n);

/* Closes the listeners and every connection, joins the network and I/O threads (waiting for
 * running handler calls), and drops requests not yet given to a handler. Idempotent. Requests
 * still held by other threads may be completed later (contract rule 3). Owning thread only. */
void gr_net_server_stop(struct gr_net_server *srv);

/* Stops the server if needed and releases the caller's reference; the memory goes when the
 * last outstanding request is completed. NULL is ignored. Owning thread only. */
void gr_net_server_free(struct gr_net_server *srv);

/* Snapshot of the counters (relaxed atomic reads). Any thread. */
void gr_net_server_stats(const struct gr_net_server *srv, struct gr_net_stats *out);
/* Open connections of listener i (0 <= i < gr_net_server_num_listeners) and its name (owned by
 * the server, valid until it is freed). Any thread. */
int gr_net_server_num_listeners(const struct gr_net_server *srv);
int64_t gr_net_server_listener_connections(const struct gr_net_server *srv, int i, const char **name);
/* Listener i's connection-creation-rate and connection-close-rate (Kafka's socket-server-metrics:
 * connections opened / closed per second over about the last minute) and its
 * AcceptorBlockedPercent (Kafka's Acceptor meter, KIP-402: the fraction of the time since start
 * its accepts were paused because max.connections was reached or a connection waited out
 * max.connection.creation.rate, averaged over the network threads). Any thread. */
void gr_net_server_listener_rates(const struct gr_net_server *srv, int i, double *creation_rate, double *close_rate,
                                  double *blocked_fraction);
/* KIP-511: calls fn for every (listener, clientSoftwareName, clientSoftwareVersion) with open
 * connections (net/client_software.h). Any thread; fn must not call into the server. */
void gr_net_server_client_software(struct gr_net_server *srv,
                                   void (*fn)(void *ctx, const char *listener, const char *name, const char *version,
                                              int64_t connections),
                                   void *ctx);
/* The request's ApiVersions (v3+) named the client software: its connection counts under that
 * name and version from now on (until it closes). Names or versions longer than 255 bytes count
 * as unknown. The request's handler, before completing it. */
void gr_net_set_client_software(struct gr_net_request *req, const char *name, const char *version);

/* Completes req with a response frame: buf holds the complete frame INCLUDING the 4-byte size
 * prefix, which must equal len - 4 (otherwise the connection is closed and an ERROR logged, since
 * a wrong prefix would desynchronise the client). gr_net_respond copies buf (the caller keeps
 * it); gr_net_respond_take takes ownership of buf, which must come from malloc/gr_malloc and is
 * released with free(). Frees req. Any thread. */
void gr_net_respond(struct gr_net_request *req, const void *buf, size_t len);
void gr_net_respond_take(struct gr_net_request *req, uint8_t *buf, size_t len);
/* Zero-copy response: the bytes sent are buf[0..len) with file regions spliced in, region i
 * (fd, off, len) going at byte position `at` of buf (ascending, <= len), written with
 * sendfile(2) from the page cache. buf's 4-byte size prefix counts the regions. Takes buf
 * (free()), the regions array (free()) and every region's fd (closed). A region that cannot be
 * sent whole (its file got shorter) closes the connection. */
struct gr_net_region {
    size_t at;
    int fd;
    int64_t off;
    size_t len;
};
void gr_net_respond_regions(struct gr_net_request *req, uint8_t *buf, size_t len, struct gr_net_region *regions,
                            int n);

/* Completes req without a response (e.g. Produce with acks=0): the connection is unmuted and
 * the next request read. Frees req. Any thread. */
void gr_net_respond_none(struct gr_net_request *req);

/* Completes req by closing its connection (e.g. a request that cannot be parsed). Frees req.
 * Any thread. */
void gr_net_close(struct gr_net_request *req);

/* Handler contract 7: the part of a Produce request (api_key 0) that must run in connection
 * order is done (its records are appended): the connection may hand its next Produce to the
 * handlers before req is completed (responses still leave in order). Call at most once, before
 * completing req, from the thread that owns it; afterwards the request may only read its
 * session. No effect for other api keys and on TLS connections. Any thread. */
void gr_net_request_release(struct gr_net_request *req);

#endif
