/* Kafka's ssl.* keys -> an OpenSSL SSL_CTX (Kafka's SslFactory / DefaultSslEngineFactory).
 *
 * Keys read (through `get`, which returns a borrowed value or NULL; the broker passes
 * gr_config_listener_prop for one listener, gregorctl its --command-config file):
 *   ssl.keystore.type            PEM | PKCS12 (JKS is refused with a clear error)
 *   ssl.keystore.location        PEM: private key + certificate chain; PKCS12: the .p12 file
 *   ssl.keystore.password        PKCS12 password
 *   ssl.key.password             password of an encrypted PEM private key
 *   ssl.keystore.key / ssl.keystore.certificate.chain    inline PEM (KIP-651)
 *   ssl.truststore.type          PEM | PKCS12
 *   ssl.truststore.location / ssl.truststore.certificates (inline PEM) / ssl.truststore.password
 *   ssl.client.auth              none | requested | required (server side)
 *   ssl.enabled.protocols        default TLSv1.2,TLSv1.3
 *   ssl.cipher.suites            IANA names (TLS_ECDHE_RSA_WITH_...), as Java spells them
 *   ssl.endpoint.identification.algorithm   https (default): clients verify the host name
 * Without a truststore a client trusts the system's CA store (as Java trusts cacerts).
 *
 * Ownership: the returned SSL_CTX * belongs to the caller (SSL_CTX_free); OpenSSL reference
 * counts it, so SSL objects made from it may outlive the caller's reference. Thread-safe to use
 * from several threads once built. */
#ifndef GR_SECURITY_SSL_CTX_H
#define GR_SECURITY_SSL_CTX_H

#include <stdbool.h>
#include <stddef.h>

typedef const char *(*gr_prop_fn)(void *ctx, const char *key);

/* Builds a server (listener) or client context. Returns an SSL_CTX * or NULL with a reason in
 * err naming the key. *verify_hostname (may be NULL) tells whether clients must check the
 * peer's name. */
void *gr_ssl_ctx_new(bool server, gr_prop_fn get, void *get_ctx, bool *verify_hostname, char *err,
                     size_t errlen);

#endif
