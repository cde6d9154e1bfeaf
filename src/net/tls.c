/* TLS on a non-blocking socket: see tls.h. */
#include "net/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "net/x500_name.h"

struct gr_tls {
    SSL *ssl;
    bool want_write;
    char err[256];
};

static void set_error(struct gr_tls *t, int ssl_err, const char *what) {
    unsigned long e = ERR_get_error();
    char buf[200] = "";
    if (e) ERR_error_string_n(e, buf, sizeof buf);
    else if (ssl_err == SSL_ERROR_SYSCALL) snprintf(buf, sizeof buf, "%s", errno ? strerror(errno) : "unexpected EOF");
    else snprintf(buf, sizeof buf, "SSL error %d", ssl_err);
    ERR_clear_error();
    snprintf(t->err, sizeof t->err, "%s: %s", what, buf);
    if (ssl_err == SSL_ERROR_SSL) {
        long vr = SSL_get_verify_result(t->ssl);
        if (vr != X509_V_OK) {
            size_t n = strlen(t->err);
            snprintf(t->err + n, sizeof t->err - n, " (certificate: %s)", X509_verify_cert_error_string(vr));
        }
    }
}

/* OpenSSL writes to the socket with write(2), not send(MSG_NOSIGNAL): a peer that is gone
 * would raise SIGPIPE. Ignore it unless the program installed its own handler. */
static pthread_once_t sigpipe_once = PTHREAD_ONCE_INIT;
static void ignore_sigpipe(void) {
    struct sigaction old;
    if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
}

static struct gr_tls *tls_new(void *ssl_ctx, int fd) {
    pthread_once(&sigpipe_once, ignore_sigpipe);
    SSL *ssl = SSL_new((SSL_CTX *)ssl_ctx);
    if (!ssl) return NULL;
    if (SSL_set_fd(ssl, fd) != 1) {
        SSL_free(ssl);
        return NULL;
    }
    SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    struct gr_tls *t = gr_calloc(1, sizeof *t);
    t->ssl = ssl;
    return t;
}

struct gr_tls *gr_tls_server_new(void *ssl_ctx, int fd) {
    struct gr_tls *t = tls_new(ssl_ctx, fd);
    if (t) SSL_set_accept_state(t->ssl);
    return t;
}

struct gr_tls *gr_tls_client_new(void *ssl_ctx, int fd, const char *host, bool verify_host) {
    struct gr_tls *t = tls_new(ssl_ctx, fd);
    if (!t) return NULL;
    SSL_set_connect_state(t->ssl);
    unsigned char addr[16];
    bool literal = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
    if (!literal) SSL_set_tlsext_host_name(t->ssl, host);
    if (verify_host) {
        X509_VERIFY_PARAM *vp = SSL_get0_param(t->ssl);
        int ok = literal ? X509_VERIFY_PARAM_set1_ip_asc(vp, host) : X509_VERIFY_PARAM_set1_host(vp, host, 0);
        if (ok != 1) {
            gr_tls_free(t);
            return NULL;
        }
    }
    return t;
}

void gr_tls_free(struct gr_tls *t) {
    if (!t) return;
    SSL_free(t->ssl);
    free(t);
}

int gr_tls_handshake(struct gr_tls *t) {
    ERR_clear_error();
    int rc = SSL_do_handshake(t->ssl);
    if (rc == 1) return 0;
    int e = SSL_get_error(t->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        t->want_write = e == SSL_ERROR_WANT_WRITE;
        return 1;
    }
    set_error(t, e, "TLS handshake failed");
    return -1;
}

bool gr_tls_wants_write(const struct gr_tls *t) { return t->want_write; }

ssize_t gr_tls_recv(struct gr_tls *t, void *buf, size_t n) {
    ERR_clear_error();
    int rc = SSL_read(t->ssl, buf, (int)GR_MIN(n, (size_t)INT32_MAX));
    if (rc > 0) return rc;
    int e = SSL_get_error(t->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        t->want_write = e == SSL_ERROR_WANT_WRITE;
        errno = EAGAIN;
        return -1;
    }
    if (e == SSL_ERROR_ZERO_RETURN) return 0;
    if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        if (rc == 0 || errno == 0) return 0; /* EOF without close_notify */
        int saved = errno;
        set_error(t, e, "TLS read failed");
        errno = saved;
        return -1;
    }
    set_error(t, e, "TLS read failed");
    errno = EPROTO;
    return -1;
}

ssize_t gr_tls_send(struct gr_tls *t, const void *buf, size_t n) {
    ERR_clear_error();
    int rc = SSL_write(t->ssl, buf, (int)GR_MIN(n, (size_t)INT32_MAX));
    if (rc > 0) return rc;
    int e = SSL_get_error(t->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        t->want_write = e == SSL_ERROR_WANT_WRITE;
        errno = EAGAIN;
        return -1;
    }
    int saved = errno;
    set_error(t, e, "TLS write failed");
    errno = (e == SSL_ERROR_SYSCALL && saved) ? saved : EPROTO;
    return -1;
}

bool gr_tls_pending(const struct gr_tls *t) { return SSL_has_pending(t->ssl) == 1; }

const char *gr_tls_error(const struct gr_tls *t) { return t->err[0] ? t->err : "unknown TLS error"; }

/* ---- the principal of a client certificate ---- */

struct mapper {
    gr_tls_principal_fn fn;
    void *arg;
    void (*free_fn)(void *);
};

static int mapper_idx = -1;
static pthread_once_t mapper_once = PTHREAD_ONCE_INIT;

static void mapper_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp) {
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    struct mapper *m = ptr;
    if (!m) return;
    if (m->free_fn) m->free_fn(m->arg);
    free(m);
}

static void mapper_index(void) {
    mapper_idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, mapper_free);
}

int gr_tls_ctx_set_principal_mapper(void *ssl_ctx, gr_tls_principal_fn fn, void *arg, void (*free_fn)(void *)) {
    pthread_once(&mapper_once, mapper_index);
    if (mapper_idx < 0) return -1;
    struct mapper *m = gr_calloc(1, sizeof *m);
    m->fn = fn;
    m->arg = arg;
    m->free_fn = free_fn;
    struct mapper *old = SSL_CTX_get_ex_data(ssl_ctx, mapper_idx);
    if (SSL_CTX_set_ex_data(ssl_ctx, mapper_idx, m) != 1) {
        free(m);
        return -1;
    }
    if (old) {
        if (old->free_fn) old->free_fn(old->arg);
        free(old);
    }
    return 0;
}

int gr_tls_peer_principal(const struct gr_tls *t, char **principal, char *err, size_t errlen) {
    *principal = NULL;
    X509 *cert = SSL_get1_peer_certificate(t->ssl);
    if (!cert) return 0;
    char *dn = gr_x500_name_rfc2253(X509_get_subject_name(cert));
    X509_free(cert);
    if (!dn) {
        snprintf(err, errlen, "cannot decode the subject of the client certificate");
        return -1;
    }
    pthread_once(&mapper_once, mapper_index);
    const struct mapper *m = mapper_idx >= 0 ? SSL_CTX_get_ex_data(SSL_get_SSL_CTX(t->ssl), mapper_idx) : NULL;
    char *name = m ? m->fn(m->arg, dn, err, errlen) : gr_strdup(dn);
    free(dn);
    if (!name) return -1;
    *principal = gr_asprintf("User:%s", name);
    free(name);
    return 0;
}

void gr_tls_describe(const struct gr_tls *t, char *out, size_t outlen) {
    snprintf(out, outlen, "%s %s", SSL_get_version(t->ssl), SSL_get_cipher_name(t->ssl));
}
