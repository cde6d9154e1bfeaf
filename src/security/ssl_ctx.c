/* ssl.* keys -> SSL_CTX: see ssl_ctx.h. */
#include "security/ssl_ctx.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "net/tls.h"
#include "security/ssl_principal_mapper.h"

struct ctx_build {
    SSL_CTX *ctx;
    gr_prop_fn get;
    void *get_ctx;
    char *err;
    size_t errlen;
};

static const char *prop(struct ctx_build *b, const char *key) {
    const char *v = b->get(b->get_ctx, key);
    return v && v[0] ? v : NULL;
}

static int failf(struct ctx_build *b, const char *key, const char *what) {
    unsigned long e = ERR_get_error();
    char ossl[200] = "";
    if (e) ERR_error_string_n(e, ossl, sizeof ossl);
    ERR_clear_error();
    snprintf(b->err, b->errlen, "Invalid value for configuration %s: %s%s%s", key, what, ossl[0] ? ": " : "", ossl);
    return -1;
}

static int key_password_cb(char *buf, int size, int rwflag, void *u) {
    const char *pw = u;
    if (!pw) return 0;
    int n = (int)strlen(pw);
    if (n > size) n = size;
    memcpy(buf, pw, (size_t)n);
    return n;
}

static BIO *open_bio(struct ctx_build *b, const char *inline_key, const char *location_key, const char **used) {
    const char *pem = prop(b, inline_key);
    if (pem) {
        *used = inline_key;
        return BIO_new_mem_buf(pem, -1);
    }
    const char *loc = prop(b, location_key);
    if (!loc) return NULL;
    *used = location_key;
    return BIO_new_file(loc, "r");
}

/* Adds every certificate of a PEM bio to the trust store. Returns how many. */
static int add_trusted_pem(SSL_CTX *ctx, BIO *bio) {
    X509_STORE *st = SSL_CTX_get_cert_store(ctx);
    int n = 0;
    X509 *x;
    while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
        if (X509_STORE_add_cert(st, x) == 1) n++;
        X509_free(x);
    }
    ERR_clear_error(); /* the end of the PEM data */
    return n;
}

static PKCS12 *read_p12(struct ctx_build *b, const char *loc_key, const char *pw_key, EVP_PKEY **key, X509 **cert,
                        STACK_OF(X509) **ca) {
    const char *loc = prop(b, loc_key);
    BIO *bio = loc ? BIO_new_file(loc, "rb") : NULL;
    if (!bio) {
        failf(b, loc_key, "cannot read the PKCS12 file");
        return NULL;
    }
    PKCS12 *p12 = d2i_PKCS12_bio(bio, NULL);
    BIO_free(bio);
    if (!p12 || PKCS12_parse(p12, prop(b, pw_key) ? prop(b, pw_key) : "", key, cert, ca) != 1) {
        failf(b, loc_key, "cannot parse the PKCS12 file (wrong password?)");
        PKCS12_free(p12);
        return NULL;
    }
    return p12;
}

static int load_keystore(struct ctx_build *b, bool server) {
    const char *type = prop(b, "ssl.keystore.type");
    if (!prop(b, "ssl.keystore.location") && !prop(b, "ssl.keystore.key")) {
        if (server) return failf(b, "ssl.keystore.location", "an SSL listener needs a keystore");
        return 0; /* a client without a certificate */
    }
    if (type && strcasecmp(type, "PKCS12") == 0) {
        EVP_PKEY *key = NULL;
        X509 *cert = NULL;
        STACK_OF(X509) *ca = NULL;
        PKCS12 *p12 = read_p12(b, "ssl.keystore.location", "ssl.keystore.password", &key, &cert, &ca);
        if (!p12) return -1;
        int rc = 0;
        if (!key || !cert || SSL_CTX_use_certificate(b->ctx, cert) != 1 || SSL_CTX_use_PrivateKey(b->ctx, key) != 1)
            rc = failf(b, "ssl.keystore.location", "the PKCS12 keystore needs a private key and its certificate");
        for (int i = 0; rc == 0 && ca && i < sk_X509_num(ca); i++) {
            X509 *x = sk_X509_value(ca, i);
            if (SSL_CTX_add1_chain_cert(b->ctx, x) != 1) rc = failf(b, "ssl.keystore.location", "bad chain certificate");
        }
        EVP_PKEY_free(key);
        X509_free(cert);
        sk_X509_pop_free(ca, X509_free);
        PKCS12_free(p12);
        return rc;
    }
    if (type && strcasecmp(type, "PEM") != 0)
        return failf(b, "ssl.keystore.type", "only PEM and PKCS12 keystores are supported");
    /* PEM: the key, then the chain (the key may come first or last in a single file) */
    const char *used = NULL;
    BIO *kb = open_bio(b, "ssl.keystore.key", "ssl.keystore.location", &used);
    if (!kb) return failf(b, "ssl.keystore.location", "cannot read the keystore");
    char *kpw = (char *)prop(b, "ssl.key.password");
    EVP_PKEY *key = PEM_read_bio_PrivateKey(kb, NULL, key_password_cb, kpw);
    BIO_free(kb);
    if (!key) return failf(b, used, "no readable private key (wrong ssl.key.password?)");
    int rc = SSL_CTX_use_PrivateKey(b->ctx, key) == 1 ? 0 : failf(b, used, "unusable private key");
    EVP_PKEY_free(key);
    if (rc) return rc;
    BIO *cb = open_bio(b, "ssl.keystore.certificate.chain", "ssl.keystore.location", &used);
    if (!cb) return failf(b, "ssl.keystore.certificate.chain", "cannot read the certificate chain");
    X509 *x = PEM_read_bio_X509(cb, NULL, NULL, NULL);
    if (!x || SSL_CTX_use_certificate(b->ctx, x) != 1) rc = failf(b, used, "no certificate in the keystore");
    X509_free(x);
    while (rc == 0 && (x = PEM_read_bio_X509(cb, NULL, NULL, NULL)) != NULL)
        if (SSL_CTX_add0_chain_cert(b->ctx, x) != 1) {
            X509_free(x);
            rc = failf(b, used, "bad chain certificate");
        }
    ERR_clear_error();
    BIO_free(cb);
    if (rc == 0 && SSL_CTX_check_private_key(b->ctx) != 1)
        rc = failf(b, used, "the private key does not match the certificate");
    return rc;
}

static int load_truststore(struct ctx_build *b, bool server) {
    const char *type = prop(b, "ssl.truststore.type");
    if (!prop(b, "ssl.truststore.location") && !prop(b, "ssl.truststore.certificates")) {
        if (!server) SSL_CTX_set_default_verify_paths(b->ctx);
        return 0;
    }
    if (type && strcasecmp(type, "PKCS12") == 0) {
        EVP_PKEY *key = NULL;
        X509 *cert = NULL;
        STACK_OF(X509) *ca = NULL;
        PKCS12 *p12 = read_p12(b, "ssl.truststore.location", "ssl.truststore.password", &key, &cert, &ca);
        if (!p12) return -1;
        X509_STORE *st = SSL_CTX_get_cert_store(b->ctx);
        int n = 0;
        if (cert && X509_STORE_add_cert(st, cert) == 1) n++;
        for (int i = 0; ca && i < sk_X509_num(ca); i++)
            if (X509_STORE_add_cert(st, sk_X509_value(ca, i)) == 1) n++;
        EVP_PKEY_free(key);
        X509_free(cert);
        sk_X509_pop_free(ca, X509_free);
        PKCS12_free(p12);
        return n ? 0 : failf(b, "ssl.truststore.location", "no certificate in the truststore");
    }
    if (type && strcasecmp(type, "PEM") != 0)
        return failf(b, "ssl.truststore.type", "only PEM and PKCS12 truststores are supported");
    const char *used = NULL;
    BIO *bio = open_bio(b, "ssl.truststore.certificates", "ssl.truststore.location", &used);
    if (!bio) return failf(b, "ssl.truststore.location", "cannot read the truststore");
    int n = add_trusted_pem(b->ctx, bio);
    BIO_free(bio);
    return n ? 0 : failf(b, used, "no certificate in the truststore");
}

static int proto_version(const char *s, size_t n) {
    static const struct { const char *name; int v; } ps[] = {
        {"TLSv1", TLS1_VERSION}, {"TLSv1.1", TLS1_1_VERSION}, {"TLSv1.2", TLS1_2_VERSION}, {"TLSv1.3", TLS1_3_VERSION}};
    for (size_t i = 0; i < GR_ARRAY_LEN(ps); i++)
        if (strlen(ps[i].name) == n && strncmp(ps[i].name, s, n) == 0) return ps[i].v;
    return -1;
}

static int set_protocols(struct ctx_build *b) {
    const char *list = prop(b, "ssl.enabled.protocols");
    if (!list) list = "TLSv1.2,TLSv1.3";
    int lo = 0, hi = 0;
    for (const char *p = list; *p;) {
        while (*p == ',' || *p == ' ') p++;
        size_t n = strcspn(p, ", ");
        if (!n) break;
        int v = proto_version(p, n);
        if (v < 0) return failf(b, "ssl.enabled.protocols", "unknown protocol (TLSv1.2 and TLSv1.3 are supported)");
        if (!lo || v < lo) lo = v;
        if (v > hi) hi = v;
        p += n;
    }
    if (!lo) return failf(b, "ssl.enabled.protocols", "no protocol");
    SSL_CTX_set_min_proto_version(b->ctx, lo);
    SSL_CTX_set_max_proto_version(b->ctx, hi);
    return 0;
}

/* Java's IANA names -> OpenSSL's TLS 1.2 list and TLS 1.3 suites. */
static int set_ciphers(struct ctx_build *b) {
    const char *list = prop(b, "ssl.cipher.suites");
    if (!list) return 0;
    char v12[2048] = "", v13[512] = "";
    for (const char *p = list; *p;) {
        while (*p == ',' || *p == ' ') p++;
        size_t n = strcspn(p, ", ");
        if (!n) break;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)GR_MIN(n, sizeof name - 1), p);
        p += n;
        bool tls13 = strncmp(name, "TLS_AES_", 8) == 0 || strncmp(name, "TLS_CHACHA20_", 13) == 0;
        const char *ossl = tls13 ? name : OPENSSL_cipher_name(name);
        if (!ossl || strcmp(ossl, "(NONE)") == 0) ossl = name; /* already an OpenSSL name */
        char *dst = tls13 ? v13 : v12;
        size_t cap = tls13 ? sizeof v13 : sizeof v12, len = strlen(dst);
        snprintf(dst + len, cap - len, "%s%s", len ? ":" : "", ossl);
    }
    if (v12[0] && SSL_CTX_set_cipher_list(b->ctx, v12) != 1)
        return failf(b, "ssl.cipher.suites", "no usable TLS 1.2 cipher suite");
    if (v13[0] && SSL_CTX_set_ciphersuites(b->ctx, v13) != 1)
        return failf(b, "ssl.cipher.suites", "no usable TLS 1.3 cipher suite");
    if (v12[0] && !v13[0]) SSL_CTX_set_ciphersuites(b->ctx, ""); /* only what was listed */
    if (v13[0] && !v12[0]) SSL_CTX_set_cipher_list(b->ctx, "");
    return 0;
}

static char *map_principal(void *arg, const char *dn, char *err, size_t errlen) {
    return gr_ssl_principal_mapper_name(arg, dn, err, errlen);
}

static void free_mapper(void *arg) {
    gr_ssl_principal_mapper_free(arg);
}

void *gr_ssl_ctx_new(bool server, gr_prop_fn get, void *get_ctx, bool *verify_hostname, char *err, size_t errlen) {
    struct ctx_build b = {.get = get, .get_ctx = get_ctx, .err = err, .errlen = errlen};
    b.ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!b.ctx) {
        failf(&b, "ssl", "cannot create an SSL context");
        return NULL;
    }
    SSL_CTX_set_options(b.ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    /* read whole socket buffers, not one record header + body per read(2); net/tls.h's
     * gr_tls_pending covers what is read ahead */
    SSL_CTX_set_read_ahead(b.ctx, 1);
    if (set_protocols(&b) || set_ciphers(&b) || load_keystore(&b, server) || load_truststore(&b, server)) {
        SSL_CTX_free(b.ctx);
        return NULL;
    }
    if (server) {
        const char *auth = prop(&b, "ssl.client.auth");
        int mode = SSL_VERIFY_NONE;
        if (auth && strcasecmp(auth, "required") == 0) mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
        else if (auth && strcasecmp(auth, "requested") == 0) mode = SSL_VERIFY_PEER;
        else if (auth && strcasecmp(auth, "none") != 0) {
            failf(&b, "ssl.client.auth", "expected none, requested or required");
            SSL_CTX_free(b.ctx);
            return NULL;
        }
        SSL_CTX_set_verify(b.ctx, mode, NULL);
        /* session resumption across the listener's connections is not needed: no session cache,
         * no TLS 1.3 tickets and no TLS 1.2 tickets (RFC 5077, SSL_OP_NO_TICKET) */
        SSL_CTX_set_session_cache_mode(b.ctx, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_num_tickets(b.ctx, 0);
        SSL_CTX_set_options(b.ctx, SSL_OP_NO_TICKET);
        /* ssl.principal.mapping.rules (KIP-371) */
        char why[400];
        struct gr_ssl_principal_mapper *m =
            gr_ssl_principal_mapper_new(prop(&b, "ssl.principal.mapping.rules"), why, sizeof why);
        if (!m || gr_tls_ctx_set_principal_mapper(b.ctx, map_principal, m, free_mapper) != 0) {
            if (m) gr_ssl_principal_mapper_free(m);
            failf(&b, "ssl.principal.mapping.rules", m ? "cannot attach the rules to the TLS context" : why);
            SSL_CTX_free(b.ctx);
            return NULL;
        }
    } else {
        SSL_CTX_set_verify(b.ctx, SSL_VERIFY_PEER, NULL);
    }
    const char *alg = b.get(b.get_ctx, "ssl.endpoint.identification.algorithm");
    if (verify_hostname) *verify_hostname = !alg || strcasecmp(alg, "https") == 0;
    return b.ctx;
}
