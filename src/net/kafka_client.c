/* The Kafka request/response client: see kafka_client.h. */
#include "net/kafka_client.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "net/client.h"
#include "protocol/codec.h"
#include "security/scram.h"

#include <openssl/ssl.h>

#define DEFAULT_TIMEOUT_MS 30000

/* A client's own copy of struct gr_client_security. */
struct sec_copy {
    bool tls, sasl;
    void *ssl_ctx; /* one SSL_CTX reference */
    bool verify_hostname;
    char *mechanism, *username, *password;
};

static pthread_mutex_t default_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sec_copy default_sec;

static void sec_release(struct sec_copy *d) {
    SSL_CTX_free(d->ssl_ctx);
    free(d->mechanism);
    free(d->username);
    free(d->password);
    memset(d, 0, sizeof *d);
}

static void sec_from(struct sec_copy *d, const struct gr_client_security *s) {
    memset(d, 0, sizeof *d);
    if (!s || !s->protocol) return;
    d->tls = strcmp(s->protocol, "SSL") == 0 || strcmp(s->protocol, "SASL_SSL") == 0;
    d->sasl = strncmp(s->protocol, "SASL_", 5) == 0;
    if (d->tls && s->ssl_ctx && SSL_CTX_up_ref(s->ssl_ctx) == 1) d->ssl_ctx = s->ssl_ctx;
    d->verify_hostname = s->verify_hostname;
    d->mechanism = gr_strdup(s->sasl_mechanism ? s->sasl_mechanism : "GSSAPI");
    d->username = gr_strdup(s->sasl_username ? s->sasl_username : "");
    d->password = gr_strdup(s->sasl_password ? s->sasl_password : "");
}

static void sec_dup(struct sec_copy *d, const struct sec_copy *s) {
    *d = *s;
    if (s->ssl_ctx) SSL_CTX_up_ref(s->ssl_ctx);
    d->mechanism = s->mechanism ? gr_strdup(s->mechanism) : NULL;
    d->username = s->username ? gr_strdup(s->username) : NULL;
    d->password = s->password ? gr_strdup(s->password) : NULL;
}

void gr_kafka_client_set_default_security(const struct gr_client_security *sec) {
    struct sec_copy n;
    sec_from(&n, sec);
    pthread_mutex_lock(&default_mu);
    sec_release(&default_sec);
    default_sec = n;
    pthread_mutex_unlock(&default_mu);
}

struct gr_kafka_client {
    char *client_id;
    const char *logger; /* the caller's (kafka_client.h) */
    char *prefix; /* log-line prefix */
    int connect_timeout_ms;
    int request_timeout_ms;
    int64_t max_response_bytes;
    int32_t node_id; /* target */
    char *host;
    int port;
    char peer[300];
    int32_t corr;
    struct sec_copy sec;
    bool sec_default; /* sec follows the process default, re-read at each connect */

    pthread_mutex_t lock; /* cli pointer and closed (shutdown runs on other threads) */
    pthread_cond_t cond;  /* closed; CLOCK_MONOTONIC */
    struct gr_net_client *cli; /* I/O on it only by the owner, without the lock */
    bool closed;
};

struct gr_kafka_client *gr_kafka_client_new(const struct gr_kafka_client_config *cfg) {
    struct gr_kafka_client *kc = gr_calloc(1, sizeof *kc);
    kc->client_id = gr_strdup(cfg && cfg->client_id ? cfg->client_id : "gregor");
    kc->logger = cfg && cfg->logger ? cfg->logger : "net.kafka_client"; /* not copied: kafka_client.h */
    if (cfg && cfg->log_prefix) {
        kc->prefix = gr_strdup(cfg->log_prefix);
    } else {
        size_t n = strlen(kc->client_id) + 3;
        kc->prefix = gr_malloc(n);
        snprintf(kc->prefix, n, "[%s]", kc->client_id);
    }
    kc->connect_timeout_ms = cfg && cfg->connect_timeout_ms ? cfg->connect_timeout_ms : DEFAULT_TIMEOUT_MS;
    kc->request_timeout_ms = cfg && cfg->request_timeout_ms ? cfg->request_timeout_ms : DEFAULT_TIMEOUT_MS;
    kc->max_response_bytes = cfg ? cfg->max_response_bytes : 0;
    kc->node_id = -1;
    if (cfg && cfg->security) sec_from(&kc->sec, cfg->security);
    else kc->sec_default = true;
    pthread_mutex_init(&kc->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&kc->cond, &ca);
    pthread_condattr_destroy(&ca);
    return kc;
}

void gr_kafka_client_free(struct gr_kafka_client *kc) {
    if (!kc) return;
    gr_kafka_client_disconnect(kc);
    pthread_cond_destroy(&kc->cond);
    pthread_mutex_destroy(&kc->lock);
    free(kc->client_id);
    free(kc->prefix);
    free(kc->host);
    sec_release(&kc->sec);
    free(kc);
}

void gr_kafka_client_disconnect(struct gr_kafka_client *kc) {
    pthread_mutex_lock(&kc->lock);
    struct gr_net_client *cli = kc->cli;
    kc->cli = NULL;
    pthread_mutex_unlock(&kc->lock);
    gr_net_client_close(cli);
}

void gr_kafka_client_set_target(struct gr_kafka_client *kc, int32_t node_id, const char *host, int port) {
    if (kc->host && host && node_id == kc->node_id && port == kc->port && strcmp(host, kc->host) == 0) return;
    gr_kafka_client_disconnect(kc);
    free(kc->host);
    kc->host = host ? gr_strdup(host) : NULL;
    kc->port = port;
    kc->node_id = node_id;
    snprintf(kc->peer, sizeof kc->peer, "%s:%d", host ? host : "", port);
}

bool gr_kafka_client_connected(const struct gr_kafka_client *kc) {
    /* the owner is the only writer of cli, and the owner is asking */
    return kc->cli != NULL;
}

const char *gr_kafka_client_peer(const struct gr_kafka_client *kc) { return kc->peer; }

bool gr_kafka_client_is_shut_down(struct gr_kafka_client *kc) {
    pthread_mutex_lock(&kc->lock);
    bool c = kc->closed;
    pthread_mutex_unlock(&kc->lock);
    return c;
}

/* One request/response on a connection being set up (no reconnect, no retry). */
static int setup_call(struct gr_kafka_client *kc, struct gr_net_client *cli, int16_t key, int16_t ver, const void *body,
                      struct gr_arena *a, void **resp) {
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    int32_t corr = ++kc->corr;
    int rc = gr_proto_encode_request(key, ver, corr, kc->client_id, body, &w);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (rc == 0) rc = gr_net_client_send_recv(cli, w.p, w.len, &buf, &len, kc->request_timeout_ms);
    gr_wbuf_free(&w);
    if (rc) return rc;
    uint8_t *copy = gr_arena_alloc(a, len);
    memcpy(copy, buf, len);
    free(buf);
    int32_t got = -1;
    rc = gr_proto_decode_response(key, ver, copy, len, a, &got, resp);
    return rc || got != corr ? GR_EPROTO : 0;
}

/* One SaslAuthenticate v1 round: token in, server token out (in a). */
static int sasl_round(struct gr_kafka_client *kc, struct gr_net_client *cli, const uint8_t *tok, size_t n,
                      struct gr_arena *a, const uint8_t **out, size_t *out_len) {
    struct SaslAuthenticateRequest rq = {.AuthBytes = {.p = tok, .len = (int32_t)n}};
    struct SaslAuthenticateResponse *r = NULL;
    int rc = setup_call(kc, cli, GR_API_SASL_AUTHENTICATE, 1, &rq, a, (void **)&r);
    if (rc) return rc;
    if (r->ErrorCode) {
        gr_warn(kc->logger, "%s SASL authentication to node %d (%s) failed: %s", kc->prefix, kc->node_id, kc->peer,
                r->ErrorMessage ? r->ErrorMessage : "SASL_AUTHENTICATION_FAILED");
        return -EACCES;
    }
    *out = r->AuthBytes.p;
    *out_len = r->AuthBytes.len > 0 ? (size_t)r->AuthBytes.len : 0;
    return 0;
}

static int sasl_authenticate(struct gr_kafka_client *kc, struct gr_net_client *cli, struct gr_arena *a) {
    struct SaslHandshakeRequest hs = {.Mechanism = kc->sec.mechanism};
    struct SaslHandshakeResponse *hr = NULL;
    int rc = setup_call(kc, cli, GR_API_SASL_HANDSHAKE, 1, &hs, a, (void **)&hr);
    if (rc) return rc;
    if (hr->ErrorCode) {
        gr_warn(kc->logger, "%s SASL mechanism %s refused by node %d (%s): error %d", kc->prefix, kc->sec.mechanism,
                kc->node_id, kc->peer, hr->ErrorCode);
        return -EACCES;
    }
    const uint8_t *out;
    size_t out_len;
    if (strcmp(kc->sec.mechanism, "PLAIN") == 0) {
        size_t ul = strlen(kc->sec.username), pl = strlen(kc->sec.password);
        uint8_t *tok = gr_arena_alloc(a, ul + pl + 2);
        tok[0] = 0;
        memcpy(tok + 1, kc->sec.username, ul);
        tok[ul + 1] = 0;
        memcpy(tok + ul + 2, kc->sec.password, pl);
        return sasl_round(kc, cli, tok, ul + pl + 2, a, &out, &out_len);
    }
    enum gr_scram_mech m = gr_scram_mech_parse(kc->sec.mechanism);
    if (m == GR_SCRAM_NONE) {
        gr_warn(kc->logger, "%s SASL mechanism %s is not supported", kc->prefix, kc->sec.mechanism);
        return -EPROTONOSUPPORT;
    }
    struct gr_scram_client *sc = gr_scram_client_new(m, kc->sec.username, kc->sec.password);
    uint8_t *msg = NULL;
    size_t ml = 0;
    rc = gr_scram_client_step(sc, NULL, 0, &msg, &ml);
    if (rc == 0) rc = sasl_round(kc, cli, msg, ml, a, &out, &out_len);
    free(msg);
    msg = NULL;
    if (rc == 0) rc = gr_scram_client_step(sc, out, out_len, &msg, &ml);
    if (rc == 0) rc = sasl_round(kc, cli, msg, ml, a, &out, &out_len);
    free(msg);
    if (rc == 0 && gr_scram_client_step(sc, out, out_len, NULL, NULL) != 0) {
        gr_warn(kc->logger, "%s node %d (%s) failed SCRAM server verification", kc->prefix, kc->node_id, kc->peer);
        rc = -EACCES;
    }
    gr_scram_client_free(sc);
    return rc;
}

/* TLS and SASL on a fresh connection, as the client's security says. */
static int secure(struct gr_kafka_client *kc, struct gr_net_client *cli) {
    int rc = 0;
    if (kc->sec.tls) {
        if (!kc->sec.ssl_ctx) return GR_EPROTO;
        rc = gr_net_client_start_tls(cli, kc->sec.ssl_ctx, kc->host, kc->sec.verify_hostname, kc->connect_timeout_ms);
        if (rc) return rc;
    }
    if (kc->sec.sasl) {
        struct gr_arena a;
        gr_arena_init(&a);
        rc = sasl_authenticate(kc, cli, &a);
        gr_arena_free(&a);
    }
    return rc;
}

int gr_kafka_client_connect(struct gr_kafka_client *kc) {
    if (gr_kafka_client_is_shut_down(kc)) return GR_ECLOSED;
    if (kc->cli) return 0;
    if (!kc->host) return -EHOSTUNREACH;
    if (kc->sec_default) { /* clients made before start-up installed the default see it too */
        sec_release(&kc->sec);
        pthread_mutex_lock(&default_mu);
        sec_dup(&kc->sec, &default_sec);
        pthread_mutex_unlock(&default_mu);
    }
    struct gr_net_client *cli = NULL;
    int rc = gr_net_client_connect(kc->host, kc->port, kc->connect_timeout_ms, &cli);
    if (rc) {
        gr_debug(kc->logger, "%s cannot connect to node %d (%s): %s", kc->prefix, kc->node_id, kc->peer, gr_strerror(rc));
        return rc;
    }
    if (kc->max_response_bytes > 0) gr_net_client_set_max_response_bytes(cli, kc->max_response_bytes);
    rc = secure(kc, cli);
    if (rc) {
        gr_net_client_close(cli);
        return rc;
    }
    pthread_mutex_lock(&kc->lock);
    bool closed = kc->closed;
    if (!closed) kc->cli = cli;
    pthread_mutex_unlock(&kc->lock);
    if (closed) {
        gr_net_client_close(cli);
        return GR_ECLOSED;
    }
    gr_info(kc->logger, "%s connected to node %d (%s)", kc->prefix, kc->node_id, kc->peer);
    return 0;
}

/* gr_kafka_client_call; *retriable false when retrying cannot help (the request cannot be
 * encoded or framed: nothing was sent); *connected true once a connection was open (the failure,
 * if any, came from the exchange rather than from connecting). */
static int call_once(struct gr_kafka_client *kc, int16_t api_key, int16_t api_version, const void *body,
                     int timeout_ms, struct gr_arena *a, void **resp, uint8_t **frame, bool *retriable,
                     bool *connected) {
    *retriable = false;
    *connected = false;
    *resp = NULL;
    if (frame) *frame = NULL;
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    int32_t corr = ++kc->corr;
    int rc = gr_proto_encode_request(api_key, api_version, corr, kc->client_id, body, &w);
    if (rc) {
        gr_error(kc->logger, "%s cannot encode request api_key=%d v%d: %s", kc->prefix, api_key, api_version,
                 gr_proto_strerror(rc));
        gr_wbuf_free(&w);
        return rc;
    }
    *retriable = true;
    rc = gr_kafka_client_connect(kc);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (rc == 0) {
        *connected = true;
        int t = timeout_ms == 0 ? kc->request_timeout_ms : timeout_ms;
        /* the net client checks the correlation id (GR_EPROTO on a mismatch) */
        rc = gr_net_client_send_recv(kc->cli, w.p, w.len, &buf, &len, t);
        if (rc == -EINVAL) *retriable = false; /* a frame the net client refuses */
    }
    gr_wbuf_free(&w);
    if (rc == 0 && !frame) { /* the caller wants the frame in the arena */
        uint8_t *copy = gr_arena_alloc(a, len);
        if (copy) memcpy(copy, buf, len);
        free(buf);
        buf = copy;
        rc = copy ? 0 : GR_EPROTO;
    }
    if (rc == 0) {
        int32_t got = -1;
        rc = gr_proto_decode_response(api_key, api_version, buf, len, a, &got, resp);
        if (rc == 0 && got != corr) rc = GR_EPROTO;
        if (rc) {
            gr_warn(kc->logger, "%s undecodable response (api_key=%d v%d) from node %d (%s): %s", kc->prefix,
                    api_key, api_version, kc->node_id, kc->peer, gr_proto_strerror(rc));
            rc = GR_EPROTO;
        }
    }
    if (rc) {
        if (frame) free(buf);
        *resp = NULL;
        gr_kafka_client_disconnect(kc);
        return rc;
    }
    if (frame) *frame = buf;
    return 0;
}

int gr_kafka_client_call(struct gr_kafka_client *kc, int16_t api_key, int16_t api_version, const void *body,
                         int timeout_ms, struct gr_arena *a, void **resp, uint8_t **frame) {
    bool retriable, connected;
    return call_once(kc, api_key, api_version, body, timeout_ms, a, resp, frame, &retriable, &connected);
}

int gr_kafka_client_call_until_answered(struct gr_kafka_client *kc, int16_t api_key, int16_t api_version,
                                        const void *body, int timeout_ms, int backoff_ms, struct gr_arena *a,
                                        void **resp, uint8_t **frame) {
    for (;;) {
        bool retriable, connected;
        int rc = call_once(kc, api_key, api_version, body, timeout_ms, a, resp, frame, &retriable, &connected);
        if (rc == 0 || !retriable) return rc;
        if (gr_kafka_client_is_shut_down(kc)) return GR_ECLOSED;
        /* a peer that cannot be reached is retried quietly (DEBUG, logged by connect); a failed
         * exchange is worth a WARN */
        if (connected)
            gr_warn(kc->logger, "%s request api_key=%d v%d to node %d (%s) failed: %s. Reconnecting.", kc->prefix,
                    api_key, api_version, kc->node_id, kc->peer, gr_strerror(rc));
        if (gr_kafka_client_backoff(kc, backoff_ms) != 0) return GR_ECLOSED;
    }
}

int gr_kafka_client_backoff(struct gr_kafka_client *kc, int64_t ms) {
    struct timespec ts = gr_timespec_after_ms(CLOCK_MONOTONIC, ms);
    pthread_mutex_lock(&kc->lock);
    while (!kc->closed)
        if (pthread_cond_timedwait(&kc->cond, &kc->lock, &ts) == ETIMEDOUT) break;
    bool closed = kc->closed;
    pthread_mutex_unlock(&kc->lock);
    return closed ? GR_ECLOSED : 0;
}

void gr_kafka_client_interrupt(struct gr_kafka_client *kc) {
    if (!kc) return;
    pthread_mutex_lock(&kc->lock);
    if (kc->cli) gr_net_client_shutdown(kc->cli);
    pthread_mutex_unlock(&kc->lock);
}

void gr_kafka_client_shutdown(struct gr_kafka_client *kc) {
    if (!kc) return;
    pthread_mutex_lock(&kc->lock);
    kc->closed = true;
    if (kc->cli) gr_net_client_shutdown(kc->cli);
    pthread_cond_broadcast(&kc->cond);
    pthread_mutex_unlock(&kc->lock);
}
