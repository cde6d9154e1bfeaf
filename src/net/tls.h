/* TLS on one non-blocking socket, over OpenSSL: the piece of Kafka's SslTransportLayer the epoll
 * server (server.c) and the blocking client (client.c) share. This file does I/O only; building
 * the SSL_CTX from Kafka's ssl.* keys is security/ssl_ctx.c.
 *
 * Ownership: a struct gr_tls belongs to the connection that created it and is used by one
 * thread at a time (the connection's network thread, or the client's owner). It does not own
 * the socket (the caller closes it after gr_tls_free). The SSL_CTX is reference counted by
 * OpenSSL, so the context given to *_new may be freed by its owner afterwards.
 *
 * OpenSSL writes with write(2): the first TLS connection of a process sets SIGPIPE to SIG_IGN
 * unless the program installed a handler (gregord ignores it anyway).
 *
 * Errors follow recv(2)/send(2): -1 with errno EAGAIN while OpenSSL waits for the socket
 * (gr_tls_wants_write tells which direction), EPROTO for a TLS failure (the reason is kept for
 * gr_tls_error), ECONNRESET for a socket error; 0 from gr_tls_recv is the peer's close. */
#ifndef GR_NET_TLS_H
#define GR_NET_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct gr_tls;

/* Server side of a connection accepted on fd. ssl_ctx is an SSL_CTX *. NULL on failure. */
struct gr_tls *gr_tls_server_new(void *ssl_ctx, int fd);
/* Client side towards host: SNI is host (unless it is an address literal) and, with
 * verify_host, the certificate must name host (Kafka's ssl.endpoint.identification.algorithm
 * =https). NULL on failure. */
struct gr_tls *gr_tls_client_new(void *ssl_ctx, int fd, const char *host, bool verify_host);
void gr_tls_free(struct gr_tls *t);

/* One step of the handshake: 0 when complete, 1 when it waits for the socket (see
 * gr_tls_wants_write), -1 when it failed (gr_tls_error says why). */
int gr_tls_handshake(struct gr_tls *t);
bool gr_tls_wants_write(const struct gr_tls *t);

ssize_t gr_tls_recv(struct gr_tls *t, void *buf, size_t n);
ssize_t gr_tls_send(struct gr_tls *t, const void *buf, size_t n);
/* Bytes OpenSSL holds (decrypted, or read ahead from the socket and not yet processed) that a
 * recv would consume without the socket becoming readable: epoll cannot see them. */
bool gr_tls_pending(const struct gr_tls *t);

/* The reason of the last failure, for log lines. */
const char *gr_tls_error(const struct gr_tls *t);
/* The principal mapping of a server context (ssl.principal.mapping.rules, set up by
 * security/ssl_ctx.c): fn(arg, dn) returns the malloc'd principal name for a subject DN, or NULL
 * with a reason in err when the connection must be refused. free_fn(arg) runs when the context is
 * freed. Without a mapping the name is the DN. Returns 0, or -1 (OpenSSL could not keep it). */
typedef char *(*gr_tls_principal_fn)(void *arg, const char *dn, char *err, size_t errlen);
int gr_tls_ctx_set_principal_mapper(void *ssl_ctx, gr_tls_principal_fn fn, void *arg, void (*free_fn)(void *));
/* The principal of the verified peer certificate, as Kafka's DefaultKafkaPrincipalBuilder builds
 * it: 0 with *principal = "User:<mapped name of the subject DN>" (malloc'd; the DN in Java's
 * RFC 2253 form, net/x500_name.h), or NULL without a certificate; -1 when the mapping refuses
 * the DN (no rule applies), with the reason in err: the connection must be closed. */
int gr_tls_peer_principal(const struct gr_tls *t, char **principal, char *err, size_t errlen);
/* "TLSv1.3 TLS_AES_256_GCM_SHA384", for log lines. */
void gr_tls_describe(const struct gr_tls *t, char *out, size_t outlen);

#endif
