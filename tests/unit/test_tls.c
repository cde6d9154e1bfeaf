/* TLS through the epoll server and the blocking client (net/tls.c, security/ssl_ctx.c) with
 * certificates made at test time by the openssl command line: the principal of a client
 * certificate as Kafka's default principal builder prints it, ssl.client.auth=required without a
 * certificate, hostname verification, a large echo (partial TLS reads and writes), plaintext on
 * a TLS port. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "common/util.h"
#include "net/client.h"
#include "net/server.h"
#include "security/ssl_ctx.h"
#include "support/check.h"

int test_failures;

static char dir[64];

/* Echoes the frame, or answers with the session's principal for api key 1. */
static void handler(void *ctx, struct gr_net_request *req) {
    (void)ctx;
    const char *p = req->session->principal ? req->session->principal : "User:ANONYMOUS";
    size_t n = req->api_key == 1 ? strlen(p) + 4 : req->len;
    uint8_t *buf = gr_malloc(n + 4);
    buf[0] = (uint8_t)(n >> 24), buf[1] = (uint8_t)(n >> 16), buf[2] = (uint8_t)(n >> 8), buf[3] = (uint8_t)n;
    if (req->api_key == 1) {
        memcpy(buf + 4, req->data + 4, 4); /* correlation id */
        memcpy(buf + 8, p, strlen(p));
    } else {
        memcpy(buf + 4, req->data + 4, 4);
        memcpy(buf + 8, req->data + 4, req->len - 4);
    }
    gr_net_respond_take(req, buf, n + 4);
}

struct props {
    const char *k[8], *v[8];
};

static const char *get(void *ctx, const char *key) {
    struct props *p = ctx;
    for (int i = 0; i < 8 && p->k[i]; i++)
        if (strcmp(p->k[i], key) == 0) return p->v[i];
    return NULL;
}

static int sh(const char *cmd) {
    char full[2048];
    snprintf(full, sizeof full, "cd %s && ( %s ) >/dev/null 2>&1", dir, cmd);
    return system(full);
}

static char *path(const char *name) { return gr_asprintf("%s/%s", dir, name); }

/* The whole of a file in dir, NUL-terminated (malloc'd). */
static char *read_file(const char *name) {
    char *p = path(name);
    FILE *f = fopen(p, "r");
    free(p);
    char *buf = gr_calloc(1, 16384);
    if (f) {
        size_t n = fread(buf, 1, 16383, f);
        buf[n] = 0;
        fclose(f);
    }
    return buf;
}

/* A frame: api key, version 0, correlation id, then payload bytes. */
static uint8_t *frame(int16_t key, int32_t corr, size_t payload, size_t *len) {
    *len = 12 + payload;
    uint8_t *f = gr_calloc(1, *len);
    uint32_t sz = (uint32_t)(*len - 4);
    f[0] = (uint8_t)(sz >> 24), f[1] = (uint8_t)(sz >> 16), f[2] = (uint8_t)(sz >> 8), f[3] = (uint8_t)sz;
    f[4] = (uint8_t)(key >> 8), f[5] = (uint8_t)key;
    f[8] = (uint8_t)(corr >> 24), f[9] = (uint8_t)(corr >> 16), f[10] = (uint8_t)(corr >> 8), f[11] = (uint8_t)corr;
    for (size_t i = 0; i < payload; i++) f[12 + i] = (uint8_t)(i * 7);
    return f;
}

static void *client_ctx(const char *cert) {
    char *ca = path("ca.pem"), *ks = cert ? path(cert) : NULL;
    struct props p = {{"ssl.truststore.type", "ssl.truststore.location", "ssl.keystore.type", "ssl.keystore.location"},
                      {"PEM", ca, "PEM", ks}};
    if (!cert) p.k[2] = NULL;
    char err[512];
    bool verify = false;
    void *ctx = gr_ssl_ctx_new(false, get, &p, &verify, err, sizeof err);
    CHECKF(ctx && verify, "%s", err);
    free(ca);
    free(ks);
    return ctx;
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/gregor-test-tls-XXXXXX");
    if (!mkdtemp(dir) || system("openssl version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "test_tls: needs the openssl command\n");
        return 1;
    }
    const char *ec = "genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "openssl %s ca.key && openssl req -x509 -new -key ca.key -out ca.pem -days 2 -subj /CN=ca",
             ec);
    CHECK(sh(cmd) == 0);
    snprintf(cmd, sizeof cmd, "openssl %s s.key && openssl req -new -key s.key -out s.csr -subj /CN=server && "
             "printf 'subjectAltName=IP:127.0.0.1\\n' > s.ext && openssl x509 -req -in s.csr -CA ca.pem -CAkey ca.key "
             "-CAcreateserial -out s.pem -days 2 -extfile s.ext && cat s.key s.pem > server.pem", ec);
    CHECK(sh(cmd) == 0);
    snprintf(cmd, sizeof cmd, "openssl %s c.key && openssl req -new -key c.key -out c.csr -subj '/C=US/O=Test/CN=client1' "
             "&& openssl x509 -req -in c.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out c.pem -days 2 && "
             "cat c.key c.pem > client.pem", ec);
    CHECK(sh(cmd) == 0);

    char *ks = path("server.pem"), *ca = path("ca.pem");
    struct props sp = {{"ssl.keystore.type", "ssl.keystore.location", "ssl.truststore.location", "ssl.client.auth"},
                       {"PEM", ks, ca, "requested"}};
    char err[512];
    void *sctx = gr_ssl_ctx_new(true, get, &sp, NULL, err, sizeof err);
    CHECKF(sctx != NULL, "%s", err);
    sp.v[3] = "required";
    void *sctx_req = gr_ssl_ctx_new(true, get, &sp, NULL, err, sizeof err);
    sp.v[3] = "bogus";
    CHECK(gr_ssl_ctx_new(true, get, &sp, NULL, err, sizeof err) == NULL && strstr(err, "ssl.client.auth"));
    sp.v[1] = "/nonexistent";
    CHECK(gr_ssl_ctx_new(true, get, &sp, NULL, err, sizeof err) == NULL && strstr(err, "ssl.keystore.location"));

    struct gr_net_listener ls[] = {{"SSL", "127.0.0.1", 0}, {"MTLS", "127.0.0.1", 0}};
    struct gr_net_listener_security sec[] = {{sctx, 0}, {sctx_req, 0}};
    struct gr_net_config cfg;
    gr_net_config_init(&cfg);
    cfg.listeners = ls;
    cfg.num_listeners = 2;
    cfg.security = sec;
    struct gr_net_server *srv = NULL;
    CHECK(gr_net_server_new(&cfg, handler, NULL, &srv) == 0);
    SSL_CTX_free(sctx); /* the server keeps its own references */
    SSL_CTX_free(sctx_req);
    CHECK(gr_net_server_start(srv) == 0);
    int port = gr_net_server_port(srv, 0), mport = gr_net_server_port(srv, 1);

    void *with_cert = client_ctx("client.pem"), *no_cert = client_ctx(NULL);
    struct gr_net_client *cli = NULL;
    uint8_t *resp;
    size_t rlen, flen;

    /* principal from the client certificate (RFC 2253, most specific first) */
    CHECK(gr_net_client_connect("127.0.0.1", port, 2000, &cli) == 0);
    CHECK(gr_net_client_start_tls(cli, with_cert, "127.0.0.1", 1, 5000) == 0);
    uint8_t *f = frame(1, 7, 0, &flen);
    CHECK(gr_net_client_send_recv(cli, f, flen, &resp, &rlen, 5000) == 0);
    CHECKF(rlen > 4 && strncmp((char *)resp + 4, "User:CN=client1,O=Test,C=US", rlen - 4) == 0, "principal %.*s",
           (int)(rlen - 4), resp + 4);
    free(resp);
    free(f);
    /* a large echo: partial TLS reads and writes on both sides */
    f = frame(2, 8, 3 * 1024 * 1024, &flen);
    CHECK(gr_net_client_send_recv(cli, f, flen, &resp, &rlen, 20000) == 0 && rlen == flen - 4);
    free(resp);
    free(f);
    gr_net_client_close(cli);

    /* no certificate: ANONYMOUS where it is requested, refused where it is required */
    CHECK(gr_net_client_connect("127.0.0.1", port, 2000, &cli) == 0);
    CHECK(gr_net_client_start_tls(cli, no_cert, "127.0.0.1", 1, 5000) == 0);
    f = frame(1, 11, 0, &flen);
    CHECK(gr_net_client_send_recv(cli, f, flen, &resp, &rlen, 5000) == 0);
    CHECK(rlen > 4 && strncmp((char *)resp + 4, "User:ANONYMOUS", rlen - 4) == 0);
    free(resp);
    gr_net_client_close(cli);
    CHECK(gr_net_client_connect("127.0.0.1", mport, 2000, &cli) == 0);
    int rc = gr_net_client_start_tls(cli, no_cert, "127.0.0.1", 1, 5000);
    if (rc == 0) rc = gr_net_client_send_recv(cli, f, flen, &resp, &rlen, 5000); /* TLS 1.3: fails on first read */
    CHECK(rc != 0);
    gr_net_client_close(cli);

    /* hostname verification: the certificate names 127.0.0.1 only */
    CHECK(gr_net_client_connect("localhost", port, 2000, &cli) == 0);
    CHECK(gr_net_client_start_tls(cli, with_cert, "localhost", 1, 5000) != 0);
    gr_net_client_close(cli);
    CHECK(gr_net_client_connect("localhost", port, 2000, &cli) == 0);
    CHECK(gr_net_client_start_tls(cli, with_cert, "localhost", 0, 5000) == 0); /* algorithm "" */
    gr_net_client_close(cli);

    /* PKCS12 keystore and truststore; inline PEM keystore and truststore (KIP-651) */
    CHECK(sh("openssl pkcs12 -export -inkey c.key -in c.pem -out client.p12 -passout pass:p12pass && "
             "openssl pkcs12 -export -nokeys -in ca.pem -out trust.p12 -passout pass:trustpass") == 0);
    char *p12 = path("client.p12"), *t12 = path("trust.p12");
    struct props pp = {{"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.truststore.type",
                        "ssl.truststore.location", "ssl.truststore.password"},
                       {"PKCS12", p12, "p12pass", "PKCS12", t12, "trustpass"}};
    void *p12ctx = gr_ssl_ctx_new(false, get, &pp, NULL, err, sizeof err);
    CHECKF(p12ctx != NULL, "%s", err);
    pp.v[2] = "wrong";
    CHECK(gr_ssl_ctx_new(false, get, &pp, NULL, err, sizeof err) == NULL && strstr(err, "ssl.keystore.location"));
    char *key_pem = read_file("c.key"), *chain_pem = read_file("c.pem"), *ca_pem = read_file("ca.pem");
    struct props ip = {{"ssl.keystore.type", "ssl.keystore.key", "ssl.keystore.certificate.chain",
                        "ssl.truststore.type", "ssl.truststore.certificates"},
                       {"PEM", key_pem, chain_pem, "PEM", ca_pem}};
    void *inline_ctx = gr_ssl_ctx_new(false, get, &ip, NULL, err, sizeof err);
    CHECKF(inline_ctx != NULL, "%s", err);
    void *ctxs[] = {p12ctx, inline_ctx};
    for (int i = 0; i < 2; i++) {
        if (!ctxs[i]) continue;
        CHECK(gr_net_client_connect("127.0.0.1", mport, 2000, &cli) == 0);
        CHECK(gr_net_client_start_tls(cli, ctxs[i], "127.0.0.1", 1, 5000) == 0);
        CHECK(gr_net_client_send_recv(cli, f, flen, &resp, &rlen, 5000) == 0);
        CHECKF(rlen > 4 && strncmp((char *)resp + 4, "User:CN=client1,O=Test,C=US", rlen - 4) == 0, "keystore %d", i);
        free(resp);
        gr_net_client_close(cli);
        SSL_CTX_free(ctxs[i]);
    }
    free(p12);
    free(t12);
    free(key_pem);
    free(chain_pem);
    free(ca_pem);

    /* plaintext on the TLS port: the connection is closed, the server keeps serving */
    CHECK(gr_net_client_connect("127.0.0.1", port, 2000, &cli) == 0);
    CHECK(gr_net_client_send_recv(cli, f, flen, &resp, &rlen, 5000) != 0);
    gr_net_client_close(cli);
    CHECK(gr_net_client_connect("127.0.0.1", port, 2000, &cli) == 0);
    CHECK(gr_net_client_start_tls(cli, with_cert, "127.0.0.1", 1, 5000) == 0);
    CHECK(gr_net_client_send_recv(cli, f, flen, &resp, &rlen, 5000) == 0);
    free(resp);
    gr_net_client_close(cli);
    free(f);

    /* ssl.enabled.protocols and ssl.cipher.suites (Java's names): a TLSv1.2-only listener with one
     * ECDSA suite; a TLSv1.3-only client cannot connect, a default client can */
    struct props tp = {{"ssl.keystore.type", "ssl.keystore.location", "ssl.enabled.protocols", "ssl.cipher.suites"},
                       {"PEM", ks, "TLSv1.2", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}};
    void *t12ctx = gr_ssl_ctx_new(true, get, &tp, NULL, err, sizeof err);
    CHECKF(t12ctx != NULL, "%s", err);
    tp.v[3] = "TLS_NO_SUCH_SUITE";
    CHECK(gr_ssl_ctx_new(true, get, &tp, NULL, err, sizeof err) == NULL && strstr(err, "ssl.cipher.suites"));
    tp.v[2] = "SSLv3";
    CHECK(gr_ssl_ctx_new(true, get, &tp, NULL, err, sizeof err) == NULL && strstr(err, "ssl.enabled.protocols"));
    struct gr_net_listener ls12[] = {{"TLS12", "127.0.0.1", 0}};
    struct gr_net_listener_security sec12[] = {{t12ctx, 0}};
    cfg.listeners = ls12;
    cfg.num_listeners = 1;
    cfg.security = sec12;
    struct gr_net_server *srv12 = NULL;
    CHECK(gr_net_server_new(&cfg, handler, NULL, &srv12) == 0 && gr_net_server_start(srv12) == 0);
    SSL_CTX_free(t12ctx);
    int port12 = gr_net_server_port(srv12, 0);
    char *cap = path("ca.pem");
    struct props cp13 = {{"ssl.truststore.location", "ssl.enabled.protocols"}, {cap, "TLSv1.3"}};
    void *c13 = gr_ssl_ctx_new(false, get, &cp13, NULL, err, sizeof err);
    CHECK(gr_net_client_connect("127.0.0.1", port12, 2000, &cli) == 0);
    CHECK(gr_net_client_start_tls(cli, c13, "127.0.0.1", 1, 5000) != 0);
    gr_net_client_close(cli);
    CHECK(gr_net_client_connect("127.0.0.1", port12, 2000, &cli) == 0);
    CHECK(gr_net_client_start_tls(cli, no_cert, "127.0.0.1", 1, 5000) == 0);
    f = frame(1, 12, 0, &flen);
    CHECK(gr_net_client_send_recv(cli, f, flen, &resp, &rlen, 5000) == 0);
    free(resp);
    free(f);
    gr_net_client_close(cli);
    SSL_CTX_free(c13);
    free(cap);
    gr_net_server_free(srv12);

    gr_net_server_free(srv);
    SSL_CTX_free(with_cert);
    SSL_CTX_free(no_cert);
    free(ks);
    free(ca);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
    if (test_failures) fprintf(stderr, "test_tls: %d failures\n", test_failures);
    return test_failures ? 1 : 0;
}
