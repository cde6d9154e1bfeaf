/* Blocking outbound connection to another broker (controller send threads, replica fetchers,
 * the admin CLI). One request at a time: send a frame, wait for the response frame with the
 * same correlation id. Timeouts use poll(2) on a non-blocking socket.
 *
 * Framing is the one described in server.h: int32 big-endian Size, then Size bytes. Requests
 * carry CorrelationId at bytes [8..12) counting the size prefix; responses carry it at bytes
 * [0..4) of the frame returned here (which excludes the size prefix).
 *
 * Threading: a client is used by one thread at a time, except gr_net_client_shutdown, which any
 * thread may call to wake up a thread blocked in the client (e.g. on controller shutdown).
 *
 * Errors: after any error other than -EINVAL (bad arguments, nothing sent) the connection is
 * in an unknown state and every later call returns GR_ECLOSED; close it and connect again. */
#ifndef GR_NET_CLIENT_H
#define GR_NET_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#define GR_NET_CLIENT_DEFAULT_MAX_RESPONSE_BYTES (1LL << 30) /* 1 GiB */

struct gr_net_client;

/* Resolves host (name or literal) and connects, trying each address until one succeeds within
 * timeout_ms overall (< 0: no timeout). Returns 0 and *out, or GR_ETIMEOUT, -errno (e.g.
 * -ECONNREFUSED), -EHOSTUNREACH when the name does not resolve. Any thread. */
int gr_net_client_connect(const char *host, int port, int timeout_ms, struct gr_net_client **out);

/* Sends req_frame (len bytes INCLUDING its 4-byte size prefix, which must equal len - 4, and at
 * least the 8-byte request header prefix) and waits for the response. On success *resp_frame is
 * a malloc'd buffer the caller frees, holding the response WITHOUT its size prefix (*resp_len
 * >= 4), whose correlation id matched the request's. timeout_ms bounds the whole exchange
 * (< 0: no timeout). Returns 0, -EINVAL (bad frame), GR_ETIMEOUT, GR_EPROTO (correlation id
 * mismatch, response size invalid or above the limit), GR_ECLOSED (peer closed or client
 * unusable), or -errno. */
int gr_net_client_send_recv(struct gr_net_client *cli, const uint8_t *req_frame, size_t len,
                            uint8_t **resp_frame, size_t *resp_len, int timeout_ms);

/* Sends req_frame without waiting for any response (e.g. Produce acks=0). Same checks and
 * errors as gr_net_client_send_recv. */
int gr_net_client_send_only(struct gr_net_client *cli, const uint8_t *req_frame, size_t len,
                            int timeout_ms);

/* Turns the connection into TLS (net/tls.h): the handshake runs within timeout_ms (< 0: none),
 * SNI is host and, with verify_host, the server certificate must name host. ssl_ctx is a client
 * SSL_CTX * (security/ssl_ctx.h). Returns 0, GR_ETIMEOUT, or GR_EPROTO (handshake failed; the
 * reason is logged at WARN). Call right after connect. */
int gr_net_client_start_tls(struct gr_net_client *cli, void *ssl_ctx, const char *host, int verify_host,
                            int timeout_ms);

/* Largest response accepted (default 1 GiB; at most INT32_MAX). */
void gr_net_client_set_max_response_bytes(struct gr_net_client *cli, int64_t max_bytes);

/* "host:port" as given to connect, for log lines. Owned by the client. */
const char *gr_net_client_peer(const struct gr_net_client *cli);

/* Shuts the socket down in both directions so that a thread blocked in send_recv returns
 * GR_ECLOSED promptly. Does not free anything. Any thread; safe to race with the user thread
 * (but not with gr_net_client_close). */
void gr_net_client_shutdown(struct gr_net_client *cli);

/* Closes the connection and frees the client. NULL is ignored. */
void gr_net_client_close(struct gr_net_client *cli);

#endif
