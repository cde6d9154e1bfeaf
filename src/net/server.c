/* Epoll network server: listeners, connections, framing, the I/O thread pool and the response
 * path. See server.h for the threading model and the handler contract.
 *
 * Object lifetimes (numbered rules):
 * 1. struct gr_net_server is reference counted: one reference for the owner (dropped by
 *    gr_net_server_free) plus one per outstanding request. The last unref destroys everything.
 * 2. A connection (struct conn) belongs to one loop and is touched only by that loop's thread.
 *    Requests do not point at it: they carry (slot, conn id); the loop looks the pair up when
 *    the completion arrives, so a completion for a closed connection finds nothing and is
 *    dropped.
 * 3. A closed connection's memory is freed only at the end of the loop iteration (graveyard),
 *    because later events of the same epoll_wait batch may still point at it.
 * 4. A loop's completion queue (mutex, list, eventfd) is protected by its mutex; `stopped` is
 *    set under that mutex when the loop exits, after which completions free the request without
 *    touching the eventfd.
 * 5. Direct send: a thread completing a request on a plaintext connection writes the response to
 *    the socket itself (no hand-off to the loop) when it holds nothing else: the connection is
 *    muted and its socket idle while a request is with the handlers, so the completer is the only
 *    writer. Holding the loop's fdlock for reading it writes what the socket takes; when all is
 *    written it queues the completion WITHOUT waking the loop and re-arms EPOLLIN (both under the
 *    loop's mutex, so the loop finds the completion before any event of the next request). The
 *    loop applies such completions when it next wakes for anything (an event on that connection
 *    drains them first). A partial write, an error, TLS, throttling or a delayed close go the
 *    usual way (the loop finishes the write). The loop never closes the socket of a connection
 *    with a request in flight without the fdlock held for writing and the request's fd_dead set,
 *    so a completer never writes to a closed or reused descriptor. */
#include "net/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "net/client_software.h"
#include "net/connection_rate.h"
#include "net/tls.h"

#include <openssl/ssl.h>

#define LOGGER "net.server"
#define READ_BUF_INITIAL (16 * 1024)
#define READ_BUF_STEP (1024 * 1024)
#define MAX_EVENTS 128
#define ACCEPTS_PER_WAKEUP 64
#define ACCEPT_PAUSE_MS 100
#define ACCEPT_LIMIT_RECHECK_MS 20 /* max.connections reached: the listener is re-armed this often */
#define IP_BUCKETS 256

enum obj_kind { OBJ_LISTENER = 1, OBJ_WAKEUP = 2, OBJ_CONN = 3 };
enum completion { COMPLETE_RESPOND = 1, COMPLETE_NONE = 2, COMPLETE_CLOSE = 3 };

struct listener {
    char *name;
    char *host;
    int port;       /* configured */
    int bound_port; /* after bind */
    int fd;
    void *ssl_ctx;  /* SSL_CTX *, one reference; NULL = plaintext */
    int sasl;
    atomic_int_fast64_t open; /* connections accepted here and not yet closed */
    struct gr_meter *created, *closed; /* connection-creation-rate / -close-rate (in srv->rates) */
    atomic_int_fast64_t blocked_us;    /* AcceptorBlockedPercent: accepts paused by a limit, all loops */
};

/* epoll_event.data.ptr points at one of these; the kind tells which. */
struct ev_tag {
    enum obj_kind kind;
    int idx; /* listener index for OBJ_LISTENER */
};

/* Progress of writing one response (buf[0..len) with file regions spliced in). */
struct wprog {
    size_t woff; /* bytes of buf written */
    int rcur;    /* the next region */
    size_t roff; /* bytes of regs[rcur] written */
};

struct conn {
    struct ev_tag tag; /* first member: epoll data points here */
    struct loop *loop;
    uint64_t id;
    uint32_t slot;
    int fd;
    bool closed;
    bool muted;    /* a request is with the handlers or its response is being written */
    bool inflight; /* nout > 0 */
    int16_t resp_api_key;     /* of the response being written (request time stats) */
    int64_t resp_received_us; /* its request's received_us */
    int64_t resp_completed_us, resp_taken_us; /* when it was completed / taken for writing */
    struct gr_net_send_metrics resp_metrics[2]; /* its request's sent_metrics */
    /* outstanding requests (dispatched, completion not applied yet), in request order */
    struct req_int *out_head, *out_tail;
    int nout;
    bool ordered;         /* the newest outstanding request holds the connection's order */
    uint64_t next_seq, ordered_seq;
    bool held;            /* a complete non-Produce frame in body waits until nout == 0 */
    int64_t unmute_at_ms; /* > 0: throttled (KIP-219), stays muted until then after its response */
    uint32_t events; /* current epoll interest */
    int64_t last_active_ms;
    const char *listener;
    atomic_int_fast64_t *listener_open; /* its listener's open count */
    int listener_idx;                   /* its listener (-1 until adopted) */
    char peer[64];
    /* read state: header first, then the body */
    uint8_t hdr[4];
    size_t hdr_got;
    int32_t body_size; /* -1 while reading the header */
    uint8_t *body;
    size_t body_cap, body_got;
    /* write state: at most one response (the connection is muted while it is written) */
    uint8_t *wbuf;
    size_t wlen, woff;
    struct gr_net_region *regs; /* file regions spliced into wbuf (sendfile), owned */
    int nregs, rcur;            /* regions; the next one to send */
    size_t roff;                /* bytes of regs[rcur] already sent */
    struct conn *next_dead;
    /* security: the session is lent to the request while one is with the handlers */
    struct gr_net_session *sess;
    struct gr_tls *tls;      /* NULL on plaintext listeners */
    bool handshaking;        /* TLS handshake not complete yet: no frame is read */
    bool parked;             /* muted until the request queue has room (queued.max.requests) */
    bool ip_counted;         /* counted in the server's per-address table */
    char ip[INET6_ADDRSTRLEN]; /* the peer's address without the port */
    int64_t close_at_ms;     /* > 0: closed at this time (failed authentication delay) */
};

struct req_int {
    struct gr_net_request pub; /* first member */
    struct gr_net_server *srv;
    struct loop *loop;
    uint32_t slot;
    enum completion action;
    uint8_t *resp;
    size_t resp_len;
    struct gr_net_region *regs; /* gr_net_respond_regions: owned (fds too) */
    int nregs;
    struct req_int *next;
    /* direct send (rule 5): the connection's socket and epoll tag, copied at dispatch */
    int fd;
    void *tag;
    bool direct;           /* plaintext connection: the completing thread may write the response */
    atomic_bool fd_dead;   /* the loop closed the connection's socket (under the loop's fdlock) */
    enum { SENT_NONE, SENT_ALL, SENT_PART, SENT_FAILED } sent;
    struct wprog wp; /* progress when SENT_PART */
    int64_t completed_us; /* gr_mono_us() when completed */
    int64_t taken_us;     /* gr_mono_us() when the completer started writing it (direct send) */
    bool resp_queued;     /* counted in st_resp_queued until the loop applies it */
    /* ordering (gr_net_request_release) */
    struct req_int *onext; /* the connection's outstanding list (loop thread only) */
    uint64_t seq;
    bool ready;            /* its completion arrived (loop thread only) */
    bool plain;            /* plaintext connection */
    bool released;
};

/* A gr_net_request_release for the loop. */
struct rel_msg {
    uint32_t slot;
    uint64_t conn_id;
    uint64_t seq;
    struct rel_msg *next;
};

struct loop {
    struct gr_net_server *srv;
    int idx;
    int epfd;
    struct ev_tag wake_tag;
    struct ev_tag *listener_tags; /* one per listener */
    bool *listener_paused;
    _Atomic int64_t *blocked_since_us; /* per listener: accepts paused by max.connections or the
                                        * creation rate since then (0: not); written by the loop */
    int64_t accept_resume_ms;
    pthread_t thread;
    bool thread_started;
    /* connection table, loop thread only */
    struct conn **slots;
    uint32_t nslots;
    uint32_t *free_slots;
    uint32_t nfree;
    struct conn *graveyard;
    int delayed_closes; /* connections with close_at_ms set (upper bound) */
    int nthrottled; /* connections with unmute_at_ms > 0 (loop thread only) */
    int nparked;    /* connections with parked set (loop thread only) */
    uint32_t park_scan; /* where the next unpark scan starts (fairness) */
    bool limit_blocked; /* accepts paused for max.connections (logged once per episode) */
    /* max.connection.creation.rate: per listener, the accepted connection waiting for its
     * throttle to end (fd -1: none); the listener is paused meanwhile */
    struct held_conn {
        int fd;
        struct sockaddr_storage ss;
        int64_t until_ms;
    } *held;
    /* connection_creation_rate of an IP: accepted sockets closed unserved at their time */
    struct delayed_sock {
        int fd;
        int64_t close_at_ms;
        struct delayed_sock *next;
    } *dsocks;
    /* completion queue */
    pthread_mutex_t mu;
    int wakefd;
    bool stopped;
    bool wake_pending; /* the eventfd has been written and not read yet */
    struct req_int *done_head, *done_tail;
    struct rel_msg *rel_head, *rel_tail;
    atomic_int nlazy;  /* completions queued without a wakeup (sent directly) */
    /* Completing threads write responses to sockets of this loop while holding it for reading;
     * the loop takes it for writing to close the socket of a connection with a request in flight
     * and, once, to set fds_dead when it exits (rule 5). */
    pthread_rwlock_t fdlock;
    bool fds_dead;
};

/* max.connections.per.ip.overrides: one resolved address and its limit. */
struct ip_override {
    char ip[INET6_ADDRSTRLEN];
    int max;
};

/* Open connections of one peer address (max.connections.per.ip). */
struct ip_count {
    char ip[INET6_ADDRSTRLEN];
    int n;
    struct ip_count *next;
};

struct gr_net_server {
    atomic_int refs;
    struct listener *listeners;
    int num_listeners;
    int64_t max_request;
    int64_t idle_ms;
    int num_loops;
    int num_workers;
    gr_net_handler_fn handler;
    void *handler_ctx;
    bool started, stopped;
    atomic_bool stopping;
    atomic_uint_fast64_t next_conn_id;
    struct loop *loops;
    struct gr_metrics *rates;            /* the listeners' connection meters (never exported) */
    struct gr_client_sw_table *client_sw; /* KIP-511 connections per client software */
    int64_t started_us;
    /* worker queue */
    pthread_mutex_t wmu;
    pthread_cond_t wcond;
    bool wstop;
    struct req_int *wq_head, *wq_tail;
    pthread_t *workers;
    int workers_started;
    /* limits (gr_net_config) */
    int queued_max;
    int max_conns;
    int protected_listener; /* index exempt from max_conns, -1 none */
    int max_per_ip;
    struct ip_override *overrides;
    int n_overrides;
    bool track_ip;        /* a per-address limit is configured */
    struct gr_conn_rate *conn_rate; /* creation rate limits (net/connection_rate.h) */
    atomic_int nconns;    /* open connections, every listener */
    atomic_int nparked;   /* parked connections, every loop */
    pthread_mutex_t ipmu; /* guards ipcounts */
    struct ip_count *ipcounts[IP_BUCKETS];
    /* stats */
    atomic_int_fast64_t st_refused, st_open, st_accepted, st_idle, st_requests, st_responses, st_in, st_out,
        st_sendfile, st_rejected, st_queued, st_resp_queued, st_prod_n, st_prod_queue_us, st_prod_total_us, st_wakeups, st_pipelined,
        st_net_idle_us, st_io_idle_us;
};

/* ---- reference counting and request freeing ---------------------------------------------- */

static void server_destroy(struct gr_net_server *srv) {
    for (int i = 0; i < srv->num_loops && srv->loops; i++) {
        struct loop *l = &srv->loops[i];
        pthread_mutex_destroy(&l->mu);
        pthread_rwlock_destroy(&l->fdlock);
        free(l->listener_tags);
        free(l->listener_paused);
        for (int j = 0; l->held && j < srv->num_listeners; j++)
            if (l->held[j].fd >= 0) close(l->held[j].fd);
        free(l->held);
        free(l->blocked_since_us);
        while (l->dsocks) {
            struct delayed_sock *d = l->dsocks;
            l->dsocks = d->next;
            close(d->fd);
            free(d);
        }
        free(l->slots);
        free(l->free_slots);
    }
    free(srv->loops);
    for (int i = 0; i < srv->num_listeners; i++) {
        free(srv->listeners[i].name);
        free(srv->listeners[i].host);
        SSL_CTX_free(srv->listeners[i].ssl_ctx);
    }
    free(srv->listeners);
    free(srv->workers);
    free(srv->overrides);
    for (int i = 0; i < IP_BUCKETS; i++)
        while (srv->ipcounts[i]) {
            struct ip_count *e = srv->ipcounts[i];
            srv->ipcounts[i] = e->next;
            free(e);
        }
    pthread_mutex_destroy(&srv->ipmu);
    gr_conn_rate_free(srv->conn_rate);
    gr_metrics_free(srv->rates);
    gr_client_sw_free(srv->client_sw);
    pthread_mutex_destroy(&srv->wmu);
    pthread_cond_destroy(&srv->wcond);
    free(srv);
}

static void server_unref(struct gr_net_server *srv) {
    if (atomic_fetch_sub_explicit(&srv->refs, 1, memory_order_acq_rel) == 1) server_destroy(srv);
}

void gr_net_session_free(struct gr_net_session *s) {
    if (!s) return;
    if (__atomic_fetch_sub(&s->extra_refs, 1, __ATOMIC_ACQ_REL) > 0) return; /* still shared */
    if (s->mech_state && s->mech_free) s->mech_free(s->mech_state);
    free(s->principal);
    free(s);
}

static void regions_free(struct gr_net_region *regs, int n) {
    for (int i = 0; i < n; i++)
        if (regs[i].fd >= 0) close(regs[i].fd);
    free(regs);
}

static void req_free(struct req_int *r) {
    struct gr_net_server *srv = r->srv;
    gr_net_session_free(r->pub.session);
    free(r->pub.data);
    free(r->resp);
    regions_free(r->regs, r->nregs);
    free(r);
    server_unref(srv);
}

/* ---- small helpers ------------------------------------------------------------------------- */

static int32_t be32(const uint8_t *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static int16_t be16(const uint8_t *p) { return (int16_t)((uint16_t)p[0] << 8 | p[1]); }

static void format_addr(const struct sockaddr *sa, char *out, size_t outlen) {
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
        snprintf(out, outlen, "%s:%d", host, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
        snprintf(out, outlen, "[%s]:%d", host, port);
    } else {
        snprintf(out, outlen, "unknown");
    }
}

/* The address of sa without the port; an IPv4-mapped IPv6 address as IPv4. */
static void peer_ip(const struct sockaddr *sa, char *out, size_t outlen) {
    snprintf(out, outlen, "?");
    if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)outlen);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a))
            inet_ntop(AF_INET, &a->s6_addr[12], out, (socklen_t)outlen);
        else
            inet_ntop(AF_INET6, a, out, (socklen_t)outlen);
    }
}

static void stat_add(atomic_int_fast64_t *c, int64_t v) {
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/* ---- configuration ------------------------------------------------------------------------- */

void gr_net_config_init(struct gr_net_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->socket_request_max_bytes = GR_NET_DEFAULT_SOCKET_REQUEST_MAX_BYTES;
    cfg->connections_max_idle_ms = GR_NET_DEFAULT_CONNECTIONS_MAX_IDLE_MS;
    cfg->num_network_threads = GR_NET_DEFAULT_NUM_NETWORK_THREADS;
    cfg->num_io_threads = GR_NET_DEFAULT_NUM_IO_THREADS;
    cfg->queued_max_requests = GR_NET_DEFAULT_QUEUED_MAX_REQUESTS;
    cfg->max_connections = INT32_MAX;
    cfg->max_connections_per_ip = INT32_MAX;
    cfg->max_connection_creation_rate = GR_CONN_RATE_NONE;
    cfg->quota_window_num = 11;
    cfg->quota_window_size_seconds = 1;
}

/* Adds every address `host` resolves to with limit max. Returns 0 or -1 (cannot resolve). */
static int override_add(struct gr_net_server *srv, const char *host, int max) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0) return -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        char ip[INET6_ADDRSTRLEN];
        /* the form peers are counted under (an IPv4-mapped IPv6 address as IPv4, as Java's
         * InetAddress): "::ffff:10.0.0.5:1" must limit 10.0.0.5 */
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
        peer_ip(ai->ai_addr, ip, sizeof ip);
        srv->overrides = gr_realloc(srv->overrides, (size_t)(srv->n_overrides + 1) * sizeof *srv->overrides);
        struct ip_override *o = &srv->overrides[srv->n_overrides++];
        snprintf(o->ip, sizeof o->ip, "%s", ip);
        o->max = max;
    }
    freeaddrinfo(res);
    return 0;
}

/* Parses max.connections.per.ip.overrides ("host:n,host:n"; the last ':' ends the host, so an
 * IPv6 literal works). Returns 0 or GR_ECONFIG (logged). */
static int parse_overrides(struct gr_net_server *srv, const char *spec) {
    char *copy = gr_strdup(spec ? spec : "");
    int rc = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ' || *tok == '\t') tok++;
        size_t len = strlen(tok);
        while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t')) tok[--len] = 0;
        if (!len) continue;
        char *colon = strrchr(tok, ':'), *end = NULL;
        long v = colon ? strtol(colon + 1, &end, 10) : -1;
        if (!colon || colon == tok || end == colon + 1 || *end || v < 0 || v > INT32_MAX) {
            gr_error(LOGGER, "invalid max.connections.per.ip.overrides entry '%s' (expected host:count)", tok);
            rc = GR_ECONFIG;
            break;
        }
        *colon = 0;
        if (override_add(srv, tok, (int)v) != 0) {
            gr_error(LOGGER, "invalid max.connections.per.ip.overrides: cannot resolve host '%s'", tok);
            rc = GR_ECONFIG;
        }
    }
    free(copy);
    return rc;
}

static int check_config(const struct gr_net_config *cfg) {
    if (cfg->num_listeners < 1 || !cfg->listeners) {
        gr_error(LOGGER, "invalid network config: no listeners");
        return GR_ECONFIG;
    }
    for (int i = 0; i < cfg->num_listeners; i++) {
        const struct gr_net_listener *l = &cfg->listeners[i];
        if (!l->name || !l->name[0]) {
            gr_error(LOGGER, "invalid network config: listener %d has no name", i);
            return GR_ECONFIG;
        }
        if (l->port < 0 || l->port > 65535) {
            gr_error(LOGGER, "invalid network config: listener %s has port %d", l->name, l->port);
            return GR_ECONFIG;
        }
    }
    if (cfg->socket_request_max_bytes < 8 || cfg->socket_request_max_bytes > INT32_MAX) {
        gr_error(LOGGER, "invalid network config: socket.request.max.bytes=%lld (must be 8..%d)",
                 (long long)cfg->socket_request_max_bytes, INT32_MAX);
        return GR_ECONFIG;
    }
    for (int i = 0; cfg->listener_max_connection_creation_rate && i < cfg->num_listeners; i++)
        if (cfg->listener_max_connection_creation_rate[i] < 0) {
            gr_error(LOGGER, "invalid network config: listener.name.%s.max.connection.creation.rate=%d",
                     cfg->listeners[i].name, cfg->listener_max_connection_creation_rate[i]);
            return GR_ECONFIG;
        }
    if (cfg->max_connection_creation_rate < 0) {
        gr_error(LOGGER, "invalid network config: max.connection.creation.rate=%d", cfg->max_connection_creation_rate);
        return GR_ECONFIG;
    }
    if (cfg->queued_max_requests < 1 || cfg->max_connections < 0 || cfg->max_connections_per_ip < 0) {
        gr_error(LOGGER, "invalid network config: queued.max.requests=%d max.connections=%d max.connections.per.ip=%d",
                 cfg->queued_max_requests, cfg->max_connections, cfg->max_connections_per_ip);
        return GR_ECONFIG;
    }
    if (cfg->num_network_threads < 1 || cfg->num_network_threads > 64 || cfg->num_io_threads < 1 ||
        cfg->num_io_threads > 1024) {
        gr_error(LOGGER, "invalid network config: num.network.threads=%d num.io.threads=%d",
                 cfg->num_network_threads, cfg->num_io_threads);
        return GR_ECONFIG;
    }
    return 0;
}

int gr_net_server_new(const struct gr_net_config *cfg, gr_net_handler_fn handler, void *handler_ctx,
                      struct gr_net_server **out) {
    *out = NULL;
    if (!handler) return GR_ECONFIG;
    int rc = check_config(cfg);
    if (rc) return rc;
    struct gr_net_server *srv = gr_calloc(1, sizeof *srv);
    atomic_init(&srv->refs, 1);
    srv->num_listeners = cfg->num_listeners;
    srv->listeners = gr_calloc((size_t)cfg->num_listeners, sizeof *srv->listeners);
    srv->rates = gr_metrics_new();
    srv->client_sw = gr_client_sw_new();
    for (int i = 0; i < cfg->num_listeners; i++) {
        const struct gr_net_listener *l = &cfg->listeners[i];
        char mname[32];
        snprintf(mname, sizeof mname, "created-%d", i);
        srv->listeners[i].created = gr_metrics_meter(srv->rates, mname);
        snprintf(mname, sizeof mname, "closed-%d", i);
        srv->listeners[i].closed = gr_metrics_meter(srv->rates, mname);
        srv->listeners[i].name = gr_strdup(l->name);
        srv->listeners[i].host = gr_strdup(l->host ? l->host : "");
        srv->listeners[i].port = l->port;
        srv->listeners[i].bound_port = -1;
        srv->listeners[i].fd = -1;
        const struct gr_net_listener_security *sec = cfg->security ? &cfg->security[i] : NULL;
        srv->listeners[i].sasl = sec ? sec->sasl : 0;
        if (sec && sec->ssl_ctx && SSL_CTX_up_ref(sec->ssl_ctx) == 1) srv->listeners[i].ssl_ctx = sec->ssl_ctx;
    }
    srv->max_request = cfg->socket_request_max_bytes;
    srv->idle_ms = cfg->connections_max_idle_ms > 0 ? cfg->connections_max_idle_ms : 0;
    srv->num_loops = cfg->num_network_threads;
    srv->num_workers = cfg->num_io_threads;
    srv->handler = handler;
    srv->handler_ctx = handler_ctx;
    srv->queued_max = cfg->queued_max_requests;
    srv->max_conns = cfg->max_connections;
    srv->max_per_ip = cfg->max_connections_per_ip;
    srv->protected_listener = -1;
    for (int i = 0; i < cfg->num_listeners && cfg->num_listeners > 1 && cfg->inter_broker_listener; i++)
        if (strcasecmp(cfg->listeners[i].name, cfg->inter_broker_listener) == 0) srv->protected_listener = i;
    atomic_init(&srv->nconns, 0);
    atomic_init(&srv->nparked, 0);
    pthread_mutex_init(&srv->ipmu, NULL);
    atomic_init(&srv->stopping, false);
    atomic_init(&srv->next_conn_id, 1);
    pthread_mutex_init(&srv->wmu, NULL);
    pthread_cond_init(&srv->wcond, NULL);
    srv->loops = gr_calloc((size_t)srv->num_loops, sizeof *srv->loops);
    for (int i = 0; i < srv->num_loops; i++) {
        struct loop *l = &srv->loops[i];
        l->srv = srv;
        l->idx = i;
        l->epfd = -1;
        l->wakefd = -1;
        l->stopped = true; /* until the thread runs: completions must not touch the eventfd */
        l->wake_tag.kind = OBJ_WAKEUP;
        l->listener_tags = gr_calloc((size_t)srv->num_listeners, sizeof *l->listener_tags);
        l->listener_paused = gr_calloc((size_t)srv->num_listeners, sizeof *l->listener_paused);
        l->held = gr_calloc((size_t)srv->num_listeners, sizeof *l->held);
        l->blocked_since_us = gr_calloc((size_t)srv->num_listeners, sizeof *l->blocked_since_us);
        for (int j = 0; j < srv->num_listeners; j++) l->held[j].fd = -1;
        for (int j = 0; j < srv->num_listeners; j++) {
            l->listener_tags[j].kind = OBJ_LISTENER;
            l->listener_tags[j].idx = j;
        }
        pthread_mutex_init(&l->mu, NULL);
        pthread_rwlock_init(&l->fdlock, NULL);
    }
    srv->workers = gr_calloc((size_t)srv->num_workers, sizeof *srv->workers);
    if (parse_overrides(srv, cfg->max_connections_per_ip_overrides) != 0) {
        server_destroy(srv);
        return GR_ECONFIG;
    }
    srv->track_ip = srv->max_per_ip < INT32_MAX || srv->n_overrides > 0;
    srv->conn_rate = gr_conn_rate_new(srv->num_listeners, srv->protected_listener, cfg->max_connection_creation_rate,
                                      cfg->listener_max_connection_creation_rate, cfg->quota_window_num,
                                      (int64_t)cfg->quota_window_size_seconds * 1000);
    *out = srv;
    return 0;
}

/* ---- connection table ---------------------------------------------------------------------- */

static uint32_t slot_alloc(struct loop *l, struct conn *c) {
    if (l->nfree == 0) {
        uint32_t old = l->nslots, n = old ? old * 2 : 64;
        l->slots = gr_realloc(l->slots, n * sizeof *l->slots);
        l->free_slots = gr_realloc(l->free_slots, n * sizeof *l->free_slots);
        for (uint32_t i = old; i < n; i++) l->slots[i] = NULL;
        for (uint32_t i = n; i > old; i--) l->free_slots[l->nfree++] = i - 1;
        l->nslots = n;
    }
    uint32_t s = l->free_slots[--l->nfree];
    l->slots[s] = c;
    return s;
}

static struct conn *slot_lookup(struct loop *l, uint32_t slot, uint64_t id) {
    if (slot >= l->nslots) return NULL;
    struct conn *c = l->slots[slot];
    return (c && c->id == id) ? c : NULL;
}

static void conn_set_events(struct conn *c, uint32_t events) {
    if (c->closed || c->events == events) return;
    struct epoll_event ev = {.events = events, .data.ptr = &c->tag};
    if (epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0) c->events = events;
    else gr_error(LOGGER, "epoll_ctl(MOD) on connection %llu failed: %s", (unsigned long long)c->id,
                  strerror(errno));
}

/* ---- connection limits (max.connections, max.connections.per.ip) ----------------------------- */

static uint32_t ip_hash(const char *ip) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *ip; ip++) h = (h ^ (uint8_t)*ip) * 16777619u;
    return h % IP_BUCKETS;
}

static int ip_limit(const struct gr_net_server *srv, const char *ip) {
    for (int i = 0; i < srv->n_overrides; i++)
        if (strcmp(srv->overrides[i].ip, ip) == 0) return srv->overrides[i].max;
    return srv->max_per_ip;
}

/* Counts a connection from ip unless ip already has its limit. Returns the limit when refused,
 * -1 when counted. Any loop. */
static int ip_take(struct gr_net_server *srv, const char *ip) {
    int max = ip_limit(srv, ip);
    pthread_mutex_lock(&srv->ipmu);
    struct ip_count **b = &srv->ipcounts[ip_hash(ip)], *e = *b;
    while (e && strcmp(e->ip, ip) != 0) e = e->next;
    int rc = -1;
    if ((e ? e->n : 0) >= max) {
        rc = max;
    } else if (e) {
        e->n++;
    } else {
        e = gr_calloc(1, sizeof *e);
        snprintf(e->ip, sizeof e->ip, "%s", ip);
        e->n = 1;
        e->next = *b;
        *b = e;
    }
    pthread_mutex_unlock(&srv->ipmu);
    return rc;
}

static void ip_release(struct gr_net_server *srv, const char *ip) {
    pthread_mutex_lock(&srv->ipmu);
    for (struct ip_count **p = &srv->ipcounts[ip_hash(ip)]; *p; p = &(*p)->next) {
        if (strcmp((*p)->ip, ip) != 0) continue;
        struct ip_count *e = *p;
        if (--e->n == 0) {
            *p = e->next;
            free(e);
        }
        break;
    }
    pthread_mutex_unlock(&srv->ipmu);
}

/* Takes one of max.connections for a connection about to be accepted on listener idx (the
 * protected inter-broker listener always gets one). Returns false at the limit. */
static bool conn_slot_take(struct gr_net_server *srv, int idx) {
    int n = atomic_load(&srv->nconns);
    do {
        if (idx != srv->protected_listener && n >= srv->max_conns) return false;
    } while (!atomic_compare_exchange_weak(&srv->nconns, &n, n + 1));
    return true;
}

/* ---- queued.max.requests: parking connections while the request queue is full ---------------- */

static bool queue_full(struct gr_net_server *srv) {
    return atomic_load(&srv->st_queued) >= srv->queued_max;
}

/* Mutes c until the request queue has room; the loop unparks it (unpark_some). */
static void conn_park(struct conn *c) {
    c->muted = true;
    if (!c->wbuf) conn_set_events(c, 0);
    if (c->parked) return;
    c->parked = true;
    c->loop->nparked++;
    atomic_fetch_add(&c->loop->srv->nparked, 1); /* before the loop re-checks the queue (Dekker) */
}

static void conn_unpark_mark(struct conn *c) {
    if (!c->parked) return;
    c->parked = false;
    c->loop->nparked--;
    atomic_fetch_sub(&c->loop->srv->nparked, 1);
}

static void conn_close(struct conn *c) {
    if (c->closed) return;
    struct loop *l = c->loop;
    c->closed = true;
    if (c->unmute_at_ms) {
        c->unmute_at_ms = 0;
        l->nthrottled--;
    }
    if (c->nout > 0) { /* a completer may be writing to it (rule 5) */
        pthread_rwlock_wrlock(&l->fdlock);
        for (struct req_int *o = c->out_head; o; o = o->onext) atomic_store(&o->fd_dead, true);
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        pthread_rwlock_unlock(&l->fdlock);
    } else {
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    c->fd = -1;
    free(c->body);
    c->body = NULL;
    free(c->wbuf);
    c->wbuf = NULL;
    gr_tls_free(c->tls);
    c->tls = NULL;
    if (c->listener_idx >= 0) gr_client_sw_close(l->srv->client_sw, &c->sess->client_sw);
    gr_net_session_free(c->sess);
    c->sess = NULL;
    regions_free(c->regs, c->nregs);
    c->regs = NULL;
    c->nregs = 0;
    conn_unpark_mark(c);
    if (c->ip_counted) ip_release(l->srv, c->ip);
    atomic_fetch_sub(&l->srv->nconns, 1);
    l->slots[c->slot] = NULL;
    l->free_slots[l->nfree++] = c->slot;
    c->next_dead = l->graveyard;
    l->graveyard = c;
    stat_add(&l->srv->st_open, -1);
    if (c->listener_open) stat_add(c->listener_open, -1);
    if (c->listener_idx >= 0) gr_meter_mark(l->srv->listeners[c->listener_idx].closed, 1);
}

static void bury_dead(struct loop *l) {
    while (l->graveyard) {
        struct conn *c = l->graveyard;
        l->graveyard = c->next_dead;
        free(c);
    }
}

/* ---- accepting ----------------------------------------------------------------------------- */

static void set_sockopts(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
}

static int listener_watch(struct loop *l, int idx, bool on) {
    struct listener *ls = &l->srv->listeners[idx];
    if (!on) return epoll_ctl(l->epfd, EPOLL_CTL_DEL, ls->fd, NULL);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &l->listener_tags[idx]};
    return epoll_ctl(l->epfd, EPOLL_CTL_ADD, ls->fd, &ev);
}

/* ---- transport: plaintext or TLS (net/tls.h) ------------------------------------------------ */

static void conn_read(struct conn *c);

/* The session of a new connection, and its TLS state on an SSL listener. */
static int conn_secure(struct conn *c, const struct listener *ls) {
    c->sess = gr_calloc(1, sizeof *c->sess);
    c->sess->sasl = ls->sasl;
    if (!ls->ssl_ctx) return 0;
    c->sess->tls = 1;
    c->tls = gr_tls_server_new(ls->ssl_ctx, c->fd);
    if (!c->tls) {
        gr_error(LOGGER, "cannot set up TLS for connection from %s on listener %s", c->peer, ls->name);
        gr_net_session_free(c->sess);
        return -1;
    }
    c->handshaking = true;
    return 0;
}

static ssize_t conn_recv(struct conn *c, void *buf, size_t n) {
    return c->tls ? gr_tls_recv(c->tls, buf, n) : recv(c->fd, buf, n, 0);
}

/* One step of the TLS handshake; once done the connection reads frames. */
static void conn_handshake(struct conn *c) {
    int rc = gr_tls_handshake(c->tls);
    if (rc == 1) {
        conn_set_events(c, gr_tls_wants_write(c->tls) ? EPOLLOUT : EPOLLIN);
        return;
    }
    if (rc < 0) {
        gr_warn(LOGGER, "closing connection %llu from %s on listener %s: %s", (unsigned long long)c->id,
                c->peer, c->listener, gr_tls_error(c->tls));
        conn_close(c);
        return;
    }
    c->handshaking = false;
    c->last_active_ms = gr_mono_ms();
    char why[512];
    if (gr_tls_peer_principal(c->tls, &c->sess->principal, why, sizeof why) != 0) {
        /* Kafka: the principal builder throws, the authentication fails, the channel closes */
        gr_warn(LOGGER, "closing connection %llu from %s on listener %s: cannot build the principal: %s",
                (unsigned long long)c->id, c->peer, c->listener, why);
        conn_close(c);
        return;
    }
    char what[128];
    gr_tls_describe(c->tls, what, sizeof what);
    gr_debug(LOGGER, "TLS handshake with %s on listener %s complete (%s, principal %s)", c->peer, c->listener,
             what, c->sess->principal ? c->sess->principal : "User:ANONYMOUS");
    conn_set_events(c, EPOLLIN);
    conn_read(c);
}

static const char *peer_ip_str(const struct sockaddr_storage *ss) {
    static __thread char ip[INET6_ADDRSTRLEN];
    peer_ip((const struct sockaddr *)ss, ip, sizeof ip);
    return ip;
}

/* Closes, unserved, an accepted socket whose address is over its connection_creation_rate, at
 * now + ms (Kafka's DelayedCloseSocket: the client sees its connection accepted, then closed). */
static void delay_close(struct loop *l, int fd, int64_t at) {
    struct delayed_sock *d = gr_calloc(1, sizeof *d);
    d->fd = fd;
    d->close_at_ms = at;
    d->next = l->dsocks;
    l->dsocks = d;
}

static void close_delayed_socks(struct loop *l, int64_t now) {
    for (struct delayed_sock **pp = &l->dsocks; *pp;) {
        struct delayed_sock *d = *pp;
        if (now < d->close_at_ms) {
            pp = &d->next;
            continue;
        }
        *pp = d->next;
        close(d->fd);
        free(d);
    }
}

/* Serves an accepted socket (one of max.connections taken for it) on listener idx: the per-IP
 * limits, then a connection. */
static void conn_adopt(struct loop *l, int idx, int fd, const struct sockaddr_storage *ss) {
    struct gr_net_server *srv = l->srv;
    struct listener *ls = &srv->listeners[idx];
    char ip[INET6_ADDRSTRLEN];
    peer_ip((const struct sockaddr *)ss, ip, sizeof ip);
    int64_t now = gr_mono_ms();
    int64_t throttle = gr_conn_rate_ip(srv->conn_rate, ip, now);
    if (throttle > 0) { /* connection_creation_rate of the address (KIP-612) */
        gr_debug(LOGGER, "Delaying closing of connection from %s for %lld ms (connection_creation_rate)", ip,
                 (long long)throttle);
        delay_close(l, fd, now + throttle);
        atomic_fetch_sub(&srv->nconns, 1);
        stat_add(&srv->st_refused, 1);
        return;
    }
    int max = srv->track_ip ? ip_take(srv, ip) : -1;
    if (max >= 0) { /* max.connections.per.ip: Kafka closes it too (TooManyConnectionsException) */
        gr_info(LOGGER,
                "closing connection from %s on listener %s: the address already has %d connections "
                "(max.connections.per.ip)",
                ip, ls->name, max);
        close(fd);
        atomic_fetch_sub(&srv->nconns, 1);
        stat_add(&srv->st_refused, 1);
        return;
    }
    set_sockopts(fd);
    struct conn *c = gr_calloc(1, sizeof *c);
    c->listener_idx = -1;
    memcpy(c->ip, ip, sizeof c->ip);
    c->ip_counted = srv->track_ip;
    c->tag.kind = OBJ_CONN;
    c->loop = l;
    c->id = atomic_fetch_add_explicit(&srv->next_conn_id, 1, memory_order_relaxed);
    c->fd = fd;
    c->body_size = -1;
    c->listener = ls->name;
    c->listener_open = &ls->open;
    c->last_active_ms = now;
    format_addr((const struct sockaddr *)ss, c->peer, sizeof c->peer);
    c->events = EPOLLIN;
    if (conn_secure(c, ls) != 0) {
        close(fd);
        if (c->ip_counted) ip_release(srv, c->ip);
        atomic_fetch_sub(&srv->nconns, 1);
        free(c);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &c->tag};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        gr_error(LOGGER, "epoll_ctl(ADD) for connection from %s failed: %s", c->peer, strerror(errno));
        close(fd);
        gr_tls_free(c->tls);
        gr_net_session_free(c->sess);
        if (c->ip_counted) ip_release(srv, c->ip);
        atomic_fetch_sub(&srv->nconns, 1);
        free(c);
        return;
    }
    c->slot = slot_alloc(l, c);
    stat_add(&srv->st_open, 1);
    stat_add(&ls->open, 1);
    stat_add(&srv->st_accepted, 1);
    c->listener_idx = idx;
    gr_meter_mark(ls->created, 1);
    gr_client_sw_open(srv->client_sw, &c->sess->client_sw, ls->name);
    gr_debug(LOGGER, "accepted connection %llu from %s on listener %s", (unsigned long long)c->id, c->peer, ls->name);
}

/* AcceptorBlockedPercent: listener idx stops accepting for a limit (loop thread). */
static void block_start(struct loop *l, int idx) {
    if (atomic_load(&l->blocked_since_us[idx]) == 0) atomic_store(&l->blocked_since_us[idx], gr_mono_us());
}

/* ... and accepts again (now_ms: the loop's clock; the time is taken in us). */
static void block_end(struct loop *l, int idx, int64_t now_ms) {
    (void)now_ms;
    int64_t since = atomic_exchange(&l->blocked_since_us[idx], 0);
    if (since > 0) stat_add(&l->srv->listeners[idx].blocked_us, gr_mono_us() - since);
}

static void pause_listener_until(struct loop *l, int idx, int64_t at) {
    if (!l->listener_paused[idx] && listener_watch(l, idx, false) == 0) l->listener_paused[idx] = true;
    if (!l->accept_resume_ms || at < l->accept_resume_ms) l->accept_resume_ms = at;
}

static void accept_some(struct loop *l, int idx) {
    struct gr_net_server *srv = l->srv;
    struct listener *ls = &srv->listeners[idx];
    for (int n = 0; n < ACCEPTS_PER_WAKEUP; n++) {
        if (l->held[idx].fd >= 0) return; /* waiting out a creation-rate throttle */
        if (!conn_slot_take(srv, idx)) {
            /* max.connections: stop accepting (Kafka's Acceptor blocks); the backlog holds them */
            if (!l->limit_blocked)
                gr_info(LOGGER, "max.connections=%d reached; listener %s stops accepting until a connection closes",
                        srv->max_conns, ls->name);
            l->limit_blocked = true;
            block_start(l, idx);
            if (!l->listener_paused[idx] && listener_watch(l, idx, false) == 0) {
                l->listener_paused[idx] = true;
                if (!l->accept_resume_ms) l->accept_resume_ms = gr_mono_ms() + ACCEPT_LIMIT_RECHECK_MS;
            }
            return;
        }
        if (idx != srv->protected_listener) l->limit_blocked = false;
        /* accepting again without having been paused (the pause itself failed): the block ends */
        if (!l->listener_paused[idx] && atomic_load(&l->blocked_since_us[idx])) block_end(l, idx, 0);
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(ls->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            atomic_fetch_sub(&srv->nconns, 1);
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
                return;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Level-triggered: stop watching for a while instead of spinning. */
                gr_warn(LOGGER, "cannot accept on listener %s: %s; pausing accepts for %d ms",
                        ls->name, strerror(errno), ACCEPT_PAUSE_MS);
                if (!l->listener_paused[idx] && listener_watch(l, idx, false) == 0) {
                    l->listener_paused[idx] = true;
                    l->accept_resume_ms = gr_mono_ms() + ACCEPT_PAUSE_MS;
                }
                return;
            }
            gr_error(LOGGER, "accept on listener %s failed: %s", ls->name, strerror(errno));
            return;
        }
        int64_t now = gr_mono_ms();
        int64_t wait = gr_conn_rate_accept(srv->conn_rate, idx, now);
        if (wait > 0) {
            /* max.connection.creation.rate: this connection waits, and the listener with it
             * (Kafka's Acceptor blocks in waitForConnectionSlot) */
            /* at most one line per throttle (<= one quota window) per listener and network thread */
            gr_info(LOGGER,
                    "listener %s over max.connection.creation.rate: the connection from %s waits %lld ms, and "
                    "accepting with it",
                    ls->name, peer_ip_str(&ss), (long long)wait);
            l->held[idx].fd = fd;
            l->held[idx].ss = ss;
            l->held[idx].until_ms = now + wait;
            block_start(l, idx);
            pause_listener_until(l, idx, now + wait);
            return;
        }
        conn_adopt(l, idx, fd, &ss);
    }
}

static void resume_accepts(struct loop *l, int64_t now) {
    if (!l->accept_resume_ms || now < l->accept_resume_ms) return;
    l->accept_resume_ms = 0;
    for (int i = 0; i < l->srv->num_listeners; i++) {
        if (l->held[i].fd >= 0) {
            if (now < l->held[i].until_ms) { /* still throttled */
                if (!l->accept_resume_ms || l->held[i].until_ms < l->accept_resume_ms)
                    l->accept_resume_ms = l->held[i].until_ms;
                continue;
            }
            int fd = l->held[i].fd;
            l->held[i].fd = -1;
            conn_adopt(l, i, fd, &l->held[i].ss);
        }
        if (!l->listener_paused[i]) continue;
        if (listener_watch(l, i, true) == 0 || errno == EEXIST) {
            l->listener_paused[i] = false;
            block_end(l, i, now);
            continue;
        }
        /* not watched and no resume time: it would never accept again */
        gr_warn(LOGGER, "cannot watch listener %s again: %s; retried in %d ms", l->srv->listeners[i].name,
                strerror(errno), ACCEPT_PAUSE_MS);
        if (!l->accept_resume_ms || now + ACCEPT_PAUSE_MS < l->accept_resume_ms) l->accept_resume_ms = now + ACCEPT_PAUSE_MS;
    }
}

void gr_net_server_set_ip_connection_rates(struct gr_net_server *srv, double dflt, const char *const *ips,
                                           const double *rates, int n) {
    if (srv) gr_conn_rate_set_ip_quotas(srv->conn_rate, dflt, ips, rates, n);
}

/* ---- reading and dispatching --------------------------------------------------------------- */

static void reject_frame(struct conn *c, int32_t size, const char *why) {
    if (!c->tls && c->hdr[0] == 0x16 && c->hdr[1] == 0x03)
        why = "a TLS handshake on a listener that is not SSL";
    gr_warn(LOGGER,
            "closing connection %llu from %s on listener %s: invalid request size %d (%s; "
            "socket.request.max.bytes=%lld)",
            (unsigned long long)c->id, c->peer, c->listener, size, why,
            (long long)c->loop->srv->max_request);
    stat_add(&c->loop->srv->st_rejected, 1);
    conn_close(c);
}

static void worker_enqueue(struct gr_net_server *srv, struct req_int *r) {
    pthread_mutex_lock(&srv->wmu);
    r->next = NULL;
    if (srv->wq_tail) srv->wq_tail->next = r;
    else srv->wq_head = r;
    srv->wq_tail = r;
    atomic_fetch_add(&srv->st_queued, 1);
    pthread_cond_signal(&srv->wcond);
    pthread_mutex_unlock(&srv->wmu);
}

static void dispatch(struct conn *c) {
    struct gr_net_server *srv = c->loop->srv;
    conn_unpark_mark(c);
    struct req_int *r = gr_calloc(1, sizeof *r);
    r->pub.data = c->body;
    r->pub.len = c->body_got;
    if (c->sess->raw_tokens) { /* a raw SASL token, not a Kafka request */
        r->pub.api_key = -1;
    } else {
        r->pub.api_key = be16(c->body);
        r->pub.api_version = be16(c->body + 2);
        r->pub.correlation_id = be32(c->body + 4);
    }
    r->pub.session = c->sess; /* shared: one reference per outstanding request */
    __atomic_add_fetch(&c->sess->extra_refs, 1, __ATOMIC_RELAXED);
    r->pub.conn_id = c->id;
    r->pub.listener = c->listener;
    memcpy(r->pub.peer, c->peer, sizeof r->pub.peer);
    r->pub.received_us = gr_mono_us();
    r->srv = srv;
    r->loop = c->loop;
    r->slot = c->slot;
    r->fd = c->fd;
    r->tag = &c->tag;
    r->plain = c->tls == NULL;
    /* direct send only for a request alone on an idle socket (rule 5) */
    r->direct = r->plain && c->nout == 0 && !c->wbuf;
    atomic_init(&r->fd_dead, false);
    r->seq = ++c->next_seq;
    if (c->nout > 0) stat_add(&srv->st_pipelined, 1);
    if (c->out_tail) c->out_tail->onext = r;
    else c->out_head = r;
    c->out_tail = r;
    c->nout++;
    c->ordered = true;
    c->ordered_seq = r->seq;
    c->held = false;
    c->body = NULL;
    c->body_cap = c->body_got = 0;
    c->body_size = -1;
    c->hdr_got = 0;
    c->muted = true;
    c->inflight = true;
    if (!c->wbuf) conn_set_events(c, 0);
    atomic_fetch_add_explicit(&srv->refs, 1, memory_order_relaxed);
    stat_add(&srv->st_requests, 1);
    worker_enqueue(srv, r);
}

/* Reads until EAGAIN, EOF or one complete frame (which mutes the connection). */
static void conn_read(struct conn *c) {
    struct gr_net_server *srv = c->loop->srv;
    while (!c->closed && !c->muted) {
        if (queue_full(srv)) { /* queued.max.requests: read nothing more until there is room */
            conn_park(c);
            return;
        }
        uint8_t *dst;
        size_t want;
        if (c->body_size < 0) {
            dst = c->hdr + c->hdr_got;
            want = 4 - c->hdr_got;
        } else {
            if (c->body_got == c->body_cap) {
                /* Grow with the bytes that arrive, but jump to READ_BUF_STEP at the first growth:
                 * doubling from 16 KiB copied a 1 MB produce request once more in reallocs; now a
                 * request up to READ_BUF_STEP costs one copy of at most READ_BUF_INITIAL bytes, and
                 * a stalled connection still holds at most READ_BUF_STEP for an announced size. */
                size_t ncap = GR_MIN((size_t)c->body_size, GR_MAX(c->body_cap * 2, (size_t)READ_BUF_STEP));
                c->body = gr_realloc(c->body, ncap);
                c->body_cap = ncap;
            }
            dst = c->body + c->body_got;
            want = c->body_cap - c->body_got;
        }
        ssize_t n = conn_recv(c, dst, want);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (c->tls) conn_set_events(c, EPOLLIN | (gr_tls_wants_write(c->tls) ? EPOLLOUT : 0));
                return;
            }
            gr_debug(LOGGER, "closing connection %llu from %s: read failed: %s",
                     (unsigned long long)c->id, c->peer, c->tls ? gr_tls_error(c->tls) : strerror(errno));
            conn_close(c);
            return;
        }
        if (n == 0) {
            if (c->hdr_got > 0 || c->body_size >= 0)
                gr_info(LOGGER, "connection %llu from %s closed by peer in the middle of a request",
                        (unsigned long long)c->id, c->peer);
            else
                gr_debug(LOGGER, "connection %llu from %s closed by peer", (unsigned long long)c->id,
                         c->peer);
            conn_close(c);
            return;
        }
        stat_add(&srv->st_in, n);
        c->last_active_ms = gr_mono_ms();
        if (c->body_size < 0) {
            c->hdr_got += (size_t)n;
            if (c->hdr_got < 4) continue;
            int32_t size = be32(c->hdr);
            int32_t min_size = c->sess->raw_tokens ? 1 : 8;
            const char *bad = size < 0                          ? "negative"
                              : size < min_size                   ? "shorter than a request header"
                              : (int64_t)size > srv->max_request ? "above the limit"
                              : (c->sess->sasl && !c->sess->authenticated && size > GR_NET_SASL_MAX_RECEIVE)
                                  ? "above the limit before SASL authentication (524288)"
                                                                  : NULL;
            if (bad) {
                reject_frame(c, size, bad);
                return;
            }
            c->body_size = size;
            c->body_cap = GR_MIN((size_t)size, (size_t)READ_BUF_INITIAL);
            c->body = gr_malloc(c->body_cap);
            c->body_got = 0;
        } else {
            c->body_got += (size_t)n;
            if (c->body_got < (size_t)c->body_size) continue;
            if (c->nout > 0 && (c->sess->raw_tokens || be16(c->body) != 0)) {
                /* only a Produce joins released ones; anything else waits for them */
                c->held = true;
                c->muted = true;
                conn_set_events(c, 0);
                return;
            }
            dispatch(c);
        }
    }
}

/* ---- writing ------------------------------------------------------------------------------- */

static void conn_unmute(struct conn *c) {
    if (c->sess && c->sess->close_after_ms > 0) { /* failed authentication: close later */
        c->close_at_ms = gr_mono_ms() + c->sess->close_after_ms;
        c->loop->delayed_closes++;
        conn_set_events(c, 0);
        return;
    }
    if (c->unmute_at_ms > gr_mono_ms()) { /* throttled: the loop unmutes it at unmute_at_ms */
        conn_set_events(c, 0);
        return;
    }
    if (c->unmute_at_ms) {
        c->unmute_at_ms = 0;
        c->loop->nthrottled--;
    }
    c->muted = false;
    conn_set_events(c, EPOLLIN);
    /* TLS may hold decrypted bytes of the next request that epoll cannot see */
    if (c->tls && gr_tls_pending(c->tls)) conn_read(c);
}

/* Reads the next frame if the connection may: nothing holds its order, no frame is held, no
 * response is being written and fewer than GR_NET_MAX_OUTSTANDING requests are outstanding
 * (then conn_unmute applies throttling and delayed closes). Otherwise it stays muted. */
static void conn_try_read(struct conn *c) {
    if (c->closed) return;
    if (c->ordered || c->held || c->wbuf || c->nout >= GR_NET_MAX_OUTSTANDING) {
        c->muted = true;
        if (!c->wbuf) conn_set_events(c, 0);
        return;
    }
    conn_unmute(c);
}

/* Unmutes throttled connections whose time has come. */
static void unmute_throttled(struct loop *l, int64_t now) {
    for (uint32_t i = 0; i < l->nslots && l->nthrottled > 0; i++) {
        struct conn *c = l->slots[i];
        if (c && !c->closed && c->unmute_at_ms && c->unmute_at_ms <= now) conn_try_read(c);
    }
}

/* Writes what the socket takes of a response. Returns 1 when all of it is written, 0 when the
 * socket is full, -1 on a write error (errno set), -2 when a file region got shorter (the
 * response cannot be completed). A finished region's fd is closed and set to -1. Called by the
 * connection's loop, or by a completing thread that owns the response (direct send). */
static int write_response(struct gr_net_server *srv, int fd, struct gr_tls *tls, const uint8_t *buf, size_t len,
                          struct gr_net_region *regs, int nregs, struct wprog *p) {
    while (p->woff < len || p->rcur < nregs) {
        size_t upto = p->rcur < nregs ? regs[p->rcur].at : len;
        ssize_t n;
        if (p->woff >= upto) { /* a file region: zero-copy from the page cache */
            struct gr_net_region *g = &regs[p->rcur];
            if (g->len == 0) {
                p->rcur++;
                continue;
            }
            off_t off = (off_t)(g->off + (int64_t)p->roff);
            n = sendfile(fd, g->fd, &off, g->len - p->roff);
            if (n == 0) return -2;
            if (n > 0) {
                p->roff += (size_t)n;
                if (p->roff == g->len) {
                    close(g->fd);
                    g->fd = -1;
                    p->rcur++;
                    p->roff = 0;
                }
                stat_add(&srv->st_out, n);
                stat_add(&srv->st_sendfile, n);
                continue;
            }
        } else {
            n = tls ? gr_tls_send(tls, buf + p->woff, upto - p->woff)
                    : send(fd, buf + p->woff, upto - p->woff, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            return -1;
        }
        p->woff += (size_t)n;
        stat_add(&srv->st_out, n);
    }
    return 1;
}

/* The request metrics completed by the send (struct gr_net_send_metrics), now_us its end. */
static void record_sent(const struct gr_net_send_metrics m[2], int64_t received_us, int64_t completed_us,
                        int64_t taken_us, int64_t now_us) {
    for (int i = 0; i < 2; i++) {
        if (m[i].response_queue_ms)
            gr_histogram_update(m[i].response_queue_ms, (double)GR_MAX(0, taken_us - completed_us) / 1000.0);
        if (m[i].response_send_ms)
            gr_histogram_update(m[i].response_send_ms, (double)GR_MAX(0, now_us - taken_us) / 1000.0);
        if (m[i].total_ms) gr_histogram_update(m[i].total_ms, (double)GR_MAX(0, now_us - received_us) / 1000.0);
    }
}

static void count_response(struct gr_net_server *srv, int16_t api_key, int64_t received_us,
                           const struct gr_net_send_metrics m[2], int64_t completed_us, int64_t taken_us) {
    int64_t now = gr_mono_us();
    stat_add(&srv->st_responses, 1);
    if (api_key == 0) {
        stat_add(&srv->st_prod_n, 1);
        stat_add(&srv->st_prod_total_us, now - received_us);
    }
    record_sent(m, received_us, completed_us, taken_us, now);
}

/* Writes what it can of the pending response; when done, unmutes the connection. */
static void conn_flush(struct conn *c) {
    struct gr_net_server *srv = c->loop->srv;
    if (c->closed || !c->wbuf) return;
    struct wprog p = {c->woff, c->rcur, c->roff};
    int rc = write_response(srv, c->fd, c->tls, c->wbuf, c->wlen, c->regs, c->nregs, &p);
    c->woff = p.woff;
    c->rcur = p.rcur;
    c->roff = p.roff;
    c->last_active_ms = gr_mono_ms();
    if (rc == 0) {
        conn_set_events(c, EPOLLOUT);
        return;
    }
    if (rc == -2) {
        gr_warn(LOGGER, "closing connection %llu from %s: a file region of the response was cut",
                (unsigned long long)c->id, c->peer);
        conn_close(c);
        return;
    }
    if (rc < 0) {
        gr_debug(LOGGER, "closing connection %llu from %s: write failed: %s", (unsigned long long)c->id, c->peer,
                 c->tls ? gr_tls_error(c->tls) : strerror(errno));
        conn_close(c);
        return;
    }
    free(c->wbuf);
    c->wbuf = NULL;
    c->wlen = c->woff = 0;
    regions_free(c->regs, c->nregs);
    c->regs = NULL;
    c->nregs = c->rcur = 0;
    c->roff = 0;
    count_response(srv, c->resp_api_key, c->resp_received_us, c->resp_metrics, c->resp_completed_us,
                   c->resp_taken_us);
}

/* Applies one completion whose turn has come (the head of the outstanding list). */
static void apply_one(struct conn *c, struct req_int *r) {
    if (r->action != COMPLETE_RESPOND) { /* Kafka updates the metrics of a no-op / close response at once */
        int64_t now = gr_mono_us();
        record_sent(r->pub.sent_metrics, r->pub.received_us, r->completed_us, now, now);
    }
    if (r->action == COMPLETE_RESPOND && r->sent == SENT_ALL) { /* written by the completer */
        c->events = EPOLLIN; /* re-armed by the completer */
        c->last_active_ms = gr_mono_ms();
        return;
    }
    if (r->action == COMPLETE_RESPOND && r->sent == SENT_FAILED) {
        gr_debug(LOGGER, "closing connection %llu from %s: writing the response failed", (unsigned long long)c->id,
                 c->peer);
        conn_close(c);
        return;
    }
    switch (r->action) {
    case COMPLETE_RESPOND:; /* (a declaration follows the label: C23, so an empty statement) */
        size_t logical = r->resp_len;
        for (int i = 0; i < r->nregs; i++) logical += r->regs[i].len;
        if (r->resp_len < 4 || (size_t)(uint32_t)be32(r->resp) != logical - 4) {
            gr_error(LOGGER,
                     "response to request api_key=%d correlation_id=%d has a size prefix that does "
                     "not match its length %zu; closing connection %llu from %s",
                     r->pub.api_key, r->pub.correlation_id, r->resp_len,
                     (unsigned long long)c->id, c->peer);
            conn_close(c);
            break;
        }
        c->resp_api_key = r->pub.api_key;
        c->resp_received_us = r->pub.received_us;
        c->resp_completed_us = r->completed_us;
        c->resp_taken_us = r->sent == SENT_PART ? r->taken_us : gr_mono_us();
        memcpy(c->resp_metrics, r->pub.sent_metrics, sizeof c->resp_metrics);
        c->wbuf = r->resp;
        c->wlen = r->resp_len;
        c->woff = r->wp.woff; /* SENT_PART: the completer wrote the start */
        r->resp = NULL;
        c->regs = r->regs;
        c->nregs = r->nregs;
        c->rcur = r->wp.rcur;
        c->roff = r->wp.roff;
        r->regs = NULL;
        r->nregs = 0;
        conn_flush(c);
        break;
    case COMPLETE_NONE: break;
    case COMPLETE_CLOSE:
        gr_debug(LOGGER, "closing connection %llu from %s at the handler's request",
                 (unsigned long long)c->id, c->peer);
        conn_close(c);
        break;
    }
}

/* Applies the completions whose turn has come, in request order (a later request may complete
 * first: it waits here), then hands over a held frame or reads on. */
static void conn_pump(struct conn *c) {
    while (!c->closed && !c->wbuf && c->out_head && c->out_head->ready) {
        struct req_int *r = c->out_head;
        c->out_head = r->onext;
        if (!c->out_head) c->out_tail = NULL;
        c->nout--;
        c->inflight = c->nout > 0;
        apply_one(c, r);
        req_free(r);
    }
    if (c->closed) return;
    if (c->held && c->nout == 0 && !c->wbuf) {
        if (queue_full(c->loop->srv))
            conn_park(c);
        else
            dispatch(c);
        return;
    }
    conn_try_read(c);
}

static void complete_one(struct loop *l, struct req_int *r) {
    struct conn *c = slot_lookup(l, r->slot, r->pub.conn_id);
    if (!c || c->closed) {
        gr_debug(LOGGER, "dropping completion of request %d for closed connection %llu",
                 r->pub.correlation_id, (unsigned long long)r->pub.conn_id);
        req_free(r);
        return;
    }
    if (r->pub.throttle_ms > 0 && r->action != COMPLETE_CLOSE) {
        if (!c->unmute_at_ms) l->nthrottled++;
        c->unmute_at_ms = gr_mono_ms() + r->pub.throttle_ms;
    }
    r->ready = true;
    if (c->ordered && c->ordered_seq == r->seq) c->ordered = false;
    conn_pump(c);
}

/* A released request's order is given up: the connection may read its next frame. */
static void apply_release(struct loop *l, const struct rel_msg *m) {
    struct conn *c = slot_lookup(l, m->slot, m->conn_id);
    if (!c || c->closed || !c->ordered || c->ordered_seq != m->seq) return;
    c->ordered = false;
    conn_try_read(c);
}

/* Applies the queued completions. from_wakeup: called for the eventfd, which is read first. */
static void drain_completions(struct loop *l, bool from_wakeup) {
    if (from_wakeup) {
        uint64_t v;
        ssize_t rd = read(l->wakefd, &v, sizeof v);
        (void)rd;
    }
    pthread_mutex_lock(&l->mu);
    if (from_wakeup) l->wake_pending = false;
    struct req_int *r = l->done_head;
    l->done_head = l->done_tail = NULL;
    struct rel_msg *m = l->rel_head; /* a release is queued before its request's completion */
    l->rel_head = l->rel_tail = NULL;
    atomic_store(&l->nlazy, 0);
    pthread_mutex_unlock(&l->mu);
    while (m) {
        struct rel_msg *next = m->next;
        apply_release(l, m);
        free(m);
        m = next;
    }
    while (r) {
        struct req_int *next = r->next;
        if (r->resp_queued) stat_add(&l->srv->st_resp_queued, -1);
        complete_one(l, r);
        r = next;
    }
}

/* Direct send (rule 5), fdlock held for reading and the descriptor alive: writes what the
 * socket takes and records the outcome in r->sent. */
static void direct_send(struct gr_net_server *srv, struct req_int *r) {
    size_t logical = r->resp_len;
    for (int i = 0; i < r->nregs; i++) logical += r->regs[i].len;
    if (r->resp_len < 4 || (size_t)(uint32_t)be32(r->resp) != logical - 4) return; /* the loop reports it */
    struct wprog p = {0, 0, 0};
    r->taken_us = gr_mono_us();
    int rc = write_response(srv, r->fd, NULL, r->resp, r->resp_len, r->regs, r->nregs, &p);
    if (rc == 1) {
        r->sent = SENT_ALL;
        count_response(srv, r->pub.api_key, r->pub.received_us, r->pub.sent_metrics, r->completed_us, r->taken_us);
    } else if (rc == 0) {
        r->sent = SENT_PART;
        r->wp = p;
    } else {
        r->sent = SENT_FAILED;
    }
}

static void complete(struct gr_net_request *req, enum completion action, uint8_t *resp, size_t len) {
    struct req_int *r = (struct req_int *)req;
    struct loop *l = r->loop;
    r->action = action;
    r->resp = resp;
    r->resp_len = len;
    r->next = NULL;
    r->completed_us = gr_mono_us();
    bool fdlocked = false;
    if (action == COMPLETE_RESPOND && r->direct && r->pub.throttle_ms <= 0 && r->pub.session->close_after_ms <= 0) {
        pthread_rwlock_rdlock(&l->fdlock);
        fdlocked = true;
        if (!l->fds_dead && !atomic_load(&r->fd_dead)) direct_send(l->srv, r);
    }
    pthread_mutex_lock(&l->mu);
    if (l->stopped) {
        pthread_mutex_unlock(&l->mu);
        if (fdlocked) pthread_rwlock_unlock(&l->fdlock);
        req_free(r);
        return;
    }
    if (l->done_tail) l->done_tail->next = r;
    else l->done_head = r;
    l->done_tail = r;
    r->resp_queued = r->sent != SENT_ALL;
    if (r->resp_queued) stat_add(&l->srv->st_resp_queued, 1);
    bool wake = true;
    if (r->sent == SENT_ALL) { /* re-arm reads; the loop applies the completion when it next wakes */
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = r->tag};
        atomic_fetch_add(&l->nlazy, 1); /* before the event can be seen */
        if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, r->fd, &ev) == 0) wake = false;
    }
    if (wake && !l->wake_pending) {
        uint64_t one = 1;
        ssize_t w = write(l->wakefd, &one, sizeof one);
        (void)w;
        l->wake_pending = true;
    }
    pthread_mutex_unlock(&l->mu);
    if (fdlocked) pthread_rwlock_unlock(&l->fdlock);
}

void gr_net_respond(struct gr_net_request *req, const void *buf, size_t len) {
    uint8_t *copy = gr_malloc(len);
    if (len) memcpy(copy, buf, len);
    complete(req, COMPLETE_RESPOND, copy, len);
}

void gr_net_respond_take(struct gr_net_request *req, uint8_t *buf, size_t len) {
    complete(req, COMPLETE_RESPOND, buf, len);
}

void gr_net_respond_regions(struct gr_net_request *req, uint8_t *buf, size_t len, struct gr_net_region *regions,
                            int n) {
    struct req_int *r = (struct req_int *)req;
    r->regs = regions;
    r->nregs = n;
    complete(req, COMPLETE_RESPOND, buf, len);
}

void gr_net_respond_none(struct gr_net_request *req) { complete(req, COMPLETE_NONE, NULL, 0); }

void gr_net_close(struct gr_net_request *req) { complete(req, COMPLETE_CLOSE, NULL, 0); }

void gr_net_request_release(struct gr_net_request *req) {
    struct req_int *r = (struct req_int *)req;
    if (req->api_key != 0 || !r->plain || r->released) return;
    r->released = true;
    r->direct = false; /* another request may be written before it: the loop writes it */
    struct loop *l = r->loop;
    struct rel_msg *m = gr_malloc(sizeof *m);
    m->slot = r->slot;
    m->conn_id = r->pub.conn_id;
    m->seq = r->seq;
    m->next = NULL;
    pthread_mutex_lock(&l->mu);
    if (l->stopped) {
        pthread_mutex_unlock(&l->mu);
        free(m);
        return;
    }
    if (l->rel_tail) l->rel_tail->next = m;
    else l->rel_head = m;
    l->rel_tail = m;
    if (!l->wake_pending) {
        uint64_t one = 1;
        ssize_t w = write(l->wakefd, &one, sizeof one);
        (void)w;
        l->wake_pending = true;
    }
    pthread_mutex_unlock(&l->mu);
}

/* ---- the loop ------------------------------------------------------------------------------ */

static void close_idle(struct loop *l, int64_t now) {
    int64_t idle = l->srv->idle_ms;
    for (uint32_t i = 0; i < l->nslots; i++) {
        struct conn *c = l->slots[i];
        if (!c || c->inflight || now - c->last_active_ms < idle) continue;
        gr_debug(LOGGER, "closing connection %llu from %s: idle for more than %lld ms",
                 (unsigned long long)c->id, c->peer, (long long)idle);
        stat_add(&l->srv->st_idle, 1);
        conn_close(c);
    }
}

/* Connections whose failed-authentication delay is over. */
static void close_delayed(struct loop *l, int64_t now) {
    int left = 0;
    for (uint32_t i = 0; i < l->nslots; i++) {
        struct conn *c = l->slots[i];
        if (!c || c->close_at_ms <= 0) continue;
        if (now < c->close_at_ms) {
            left++;
            continue;
        }
        gr_debug(LOGGER, "closing connection %llu from %s after failed authentication",
                 (unsigned long long)c->id, c->peer);
        conn_close(c);
    }
    l->delayed_closes = left;
}

/* Lets parked connections read again while the request queue has room, starting after the last
 * one unparked (so every connection gets its turn). */
static void unpark_some(struct loop *l) {
    uint32_t n = l->nslots;
    for (uint32_t k = 0; k < n && l->nparked > 0 && !queue_full(l->srv); k++) {
        uint32_t i = (l->park_scan + k) % n;
        struct conn *c = l->slots[i];
        if (!c || c->closed || !c->parked) continue;
        l->park_scan = i + 1;
        conn_unpark_mark(c);
        if (!c->held)
            conn_try_read(c);
        else if (c->nout == 0 && !c->wbuf)
            dispatch(c);
        /* else: its last completion dispatches the held frame (conn_pump) */
    }
}

static void *loop_main(void *arg) {
    struct loop *l = arg;
    struct gr_net_server *srv = l->srv;
    struct epoll_event evs[MAX_EVENTS];
    char tname[16];
    snprintf(tname, sizeof tname, "net-%d", l->idx);
    pthread_setname_np(pthread_self(), tname);
    int tick = srv->idle_ms ? (int)GR_MAX(10, GR_MIN(1000, srv->idle_ms / 4)) : 1000;
    int64_t next_scan = gr_mono_ms() + tick;
    while (!atomic_load(&srv->stopping)) {
        int timeout = tick;
        if (l->delayed_closes || l->dsocks) timeout = GR_MIN(timeout, 10);
        if (l->nthrottled > 0) timeout = GR_MIN(timeout, 5);
        if (l->accept_resume_ms) timeout = (int)GR_MIN(timeout, GR_MAX(1, l->accept_resume_ms - gr_mono_ms()));
        int64_t wait_from = gr_mono_us();
        int n = epoll_wait(l->epfd, evs, MAX_EVENTS, timeout);
        stat_add(&srv->st_net_idle_us, gr_mono_us() - wait_from);
        if (n > 0) stat_add(&srv->st_wakeups, 1);
        if (n < 0 && errno != EINTR) {
            gr_error(LOGGER, "epoll_wait failed in network thread %d: %s", l->idx, strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            struct ev_tag *tag = evs[i].data.ptr;
            uint32_t e = evs[i].events;
            if (tag->kind == OBJ_WAKEUP) {
                drain_completions(l, true);
            } else if (tag->kind == OBJ_LISTENER) {
                accept_some(l, tag->idx);
            } else {
                struct conn *c = (struct conn *)tag;
                /* an event for a connection with a request in flight: its completion may be
                 * queued without a wakeup (rule 5); apply it first */
                if (!c->closed && c->inflight && atomic_load(&l->nlazy) > 0) drain_completions(l, false);
                if (c->closed) continue;
                if (c->handshaking) {
                    conn_handshake(c);
                    continue;
                }
                if (e & (EPOLLERR | EPOLLHUP)) {
                    /* With a pending read, let recv report the EOF/error and any last bytes. */
                    if (!c->muted) conn_read(c);
                    if (!c->closed) conn_close(c);
                    continue;
                }
                if ((e & EPOLLOUT) && c->wbuf) {
                    conn_flush(c);
                    if (!c->closed && !c->wbuf) conn_pump(c);
                }
                else if ((e & EPOLLOUT) && c->tls && !c->muted) conn_read(c);
                if ((e & EPOLLIN) && !c->closed && !c->muted) conn_read(c);
            }
        }
        if (atomic_load(&l->nlazy) > 0) drain_completions(l, false);
        int64_t now = gr_mono_ms();
        resume_accepts(l, now);
        if (l->delayed_closes) close_delayed(l, now);
        if (l->dsocks) close_delayed_socks(l, now);
        if (l->nthrottled > 0) unmute_throttled(l, now);
        if (l->nparked > 0) unpark_some(l);
        if (srv->idle_ms && now >= next_scan) {
            close_idle(l, now);
            next_scan = now + tick;
        }
        bury_dead(l);
    }
    pthread_rwlock_wrlock(&l->fdlock); /* no direct send from here on (rule 5) */
    l->fds_dead = true;
    pthread_rwlock_unlock(&l->fdlock);
    for (uint32_t i = 0; i < l->nslots; i++)
        if (l->slots[i]) conn_close(l->slots[i]);
    bury_dead(l);
    pthread_mutex_lock(&l->mu);
    l->stopped = true;
    struct req_int *r = l->done_head;
    l->done_head = l->done_tail = NULL;
    struct rel_msg *m = l->rel_head;
    l->rel_head = l->rel_tail = NULL;
    pthread_mutex_unlock(&l->mu);
    while (m) {
        struct rel_msg *next = m->next;
        free(m);
        m = next;
    }
    while (r) {
        struct req_int *next = r->next;
        if (r->resp_queued) stat_add(&srv->st_resp_queued, -1);
        req_free(r);
        r = next;
    }
    return NULL;
}

/* ---- workers ------------------------------------------------------------------------------- */

/* Wakes every loop (parked connections may read again). */
static void wake_loops(struct gr_net_server *srv) {
    for (int i = 0; i < srv->num_loops; i++) {
        struct loop *l = &srv->loops[i];
        pthread_mutex_lock(&l->mu);
        if (!l->stopped && !l->wake_pending) {
            uint64_t one = 1;
            ssize_t w = write(l->wakefd, &one, sizeof one);
            (void)w;
            l->wake_pending = true;
        }
        pthread_mutex_unlock(&l->mu);
    }
}

static void *worker_main(void *arg) {
    struct gr_net_server *srv = arg;
    pthread_setname_np(pthread_self(), "io");
    for (;;) {
        pthread_mutex_lock(&srv->wmu);
        if (!srv->wq_head && !srv->wstop) {
            int64_t wait_from = gr_mono_us();
            while (!srv->wq_head && !srv->wstop) pthread_cond_wait(&srv->wcond, &srv->wmu);
            stat_add(&srv->st_io_idle_us, gr_mono_us() - wait_from);
        }
        if (srv->wstop) {
            pthread_mutex_unlock(&srv->wmu);
            return NULL;
        }
        struct req_int *r = srv->wq_head;
        srv->wq_head = r->next;
        if (!srv->wq_head) srv->wq_tail = NULL;
        atomic_fetch_sub(&srv->st_queued, 1);
        pthread_mutex_unlock(&srv->wmu);
        if (atomic_load(&srv->nparked) > 0) wake_loops(srv); /* after the decrement (Dekker) */
        r->next = NULL;
        if (r->pub.api_key == 0) stat_add(&srv->st_prod_queue_us, gr_mono_us() - r->pub.received_us);
        srv->handler(srv->handler_ctx, &r->pub);
    }
}

/* ---- start / stop -------------------------------------------------------------------------- */

static int bind_listener(struct listener *ls) {
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", ls->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    const char *host = ls->host[0] ? ls->host : NULL;
    int grc = getaddrinfo(host, portstr, &hints, &res);
    if (grc != 0) {
        gr_error(LOGGER, "cannot resolve listener %s host '%s': %s", ls->name, ls->host,
                 gai_strerror(grc));
        return -EADDRNOTAVAIL;
    }
    int rc = -EADDRNOTAVAIL;
    /* Without a host prefer the IPv4 wildcard: a broker on 0.0.0.0 is what Kafka does. */
    for (int pass = 0; pass < 2 && rc < 0; pass++) {
        for (struct addrinfo *ai = res; ai && rc < 0; ai = ai->ai_next) {
            if ((pass == 0) != (ai->ai_family == AF_INET)) continue;
            int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0) {
                rc = -errno;
                continue;
            }
            int one = 1;
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
                rc = -errno;
                close(fd);
                continue;
            }
            struct sockaddr_storage ss;
            socklen_t sl = sizeof ss;
            getsockname(fd, (struct sockaddr *)&ss, &sl);
            ls->bound_port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                                       : ntohs(((struct sockaddr_in *)&ss)->sin_port);
            ls->fd = fd;
            rc = 0;
        }
    }
    freeaddrinfo(res);
    if (rc < 0)
        gr_error(LOGGER, "cannot bind listener %s to %s:%d: %s", ls->name,
                 ls->host[0] ? ls->host : "0.0.0.0", ls->port, strerror(-rc));
    return rc;
}

static void close_listeners(struct gr_net_server *srv) {
    for (int i = 0; i < srv->num_listeners; i++) {
        if (srv->listeners[i].fd >= 0) close(srv->listeners[i].fd);
        srv->listeners[i].fd = -1;
    }
}

static int loop_init(struct loop *l) {
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0) return -errno;
    l->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->wakefd < 0) return -errno;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &l->wake_tag};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &ev) != 0) return -errno;
    for (int j = 0; j < l->srv->num_listeners; j++)
        if (listener_watch(l, j, true) != 0) return -errno;
    l->stopped = false;
    return 0;
}

static void loop_release(struct loop *l) {
    if (l->epfd >= 0) close(l->epfd);
    l->epfd = -1;
    pthread_mutex_lock(&l->mu);
    l->stopped = true;
    if (l->wakefd >= 0) close(l->wakefd);
    l->wakefd = -1;
    pthread_mutex_unlock(&l->mu);
}

/* sendfile(2) has no MSG_NOSIGNAL: a response region sent to a peer that is gone raises SIGPIPE.
 * Ignore it unless the program installed its own handler (gregord ignores it anyway). */
static pthread_once_t sigpipe_once = PTHREAD_ONCE_INIT;
static void ignore_sigpipe(void) {
    struct sigaction old;
    if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
}

int gr_net_server_start(struct gr_net_server *srv) {
    if (srv->started) return -EALREADY;
    srv->started = true;
    srv->started_us = gr_mono_us();
    pthread_once(&sigpipe_once, ignore_sigpipe);
    int rc = 0;
    for (int i = 0; i < srv->num_listeners && rc == 0; i++) rc = bind_listener(&srv->listeners[i]);
    for (int i = 0; i < srv->num_loops && rc == 0; i++) {
        rc = loop_init(&srv->loops[i]);
        if (rc) gr_error(LOGGER, "cannot set up network thread %d: %s", i, strerror(-rc));
    }
    for (int i = 0; i < srv->num_workers && rc == 0; i++) {
        rc = -pthread_create(&srv->workers[i], NULL, worker_main, srv);
        if (rc == 0) srv->workers_started++;
    }
    for (int i = 0; i < srv->num_loops && rc == 0; i++) {
        rc = -pthread_create(&srv->loops[i].thread, NULL, loop_main, &srv->loops[i]);
        if (rc == 0) srv->loops[i].thread_started = true;
    }
    if (rc) {
        gr_net_server_stop(srv);
        for (int i = 0; i < srv->num_listeners; i++) srv->listeners[i].bound_port = -1;
        return rc;
    }
    for (int i = 0; i < srv->num_listeners; i++)
        gr_info(LOGGER, "listening on %s:%d (listener %s)",
                srv->listeners[i].host[0] ? srv->listeners[i].host : "0.0.0.0",
                srv->listeners[i].bound_port, srv->listeners[i].name);
    return 0;
}

int gr_net_server_port(const struct gr_net_server *srv, int idx) {
    if (!srv || idx < 0 || idx >= srv->num_listeners) return -1;
    return srv->listeners[idx].bound_port;
}

void gr_net_server_stop(struct gr_net_server *srv) {
    if (!srv->started || srv->stopped) return;
    srv->stopped = true;
    atomic_store(&srv->stopping, true);
    /* 1. network threads: no new requests, every connection closed */
    for (int i = 0; i < srv->num_loops; i++) {
        struct loop *l = &srv->loops[i];
        if (l->thread_started) {
            pthread_mutex_lock(&l->mu);
            if (l->wakefd >= 0) {
                uint64_t one = 1;
                ssize_t w = write(l->wakefd, &one, sizeof one);
                (void)w;
            }
            pthread_mutex_unlock(&l->mu);
            pthread_join(l->thread, NULL);
            l->thread_started = false;
        }
        loop_release(l);
    }
    close_listeners(srv);
    /* 2. I/O threads: wait for running handler calls, drop queued requests */
    pthread_mutex_lock(&srv->wmu);
    srv->wstop = true;
    pthread_cond_broadcast(&srv->wcond);
    pthread_mutex_unlock(&srv->wmu);
    for (int i = 0; i < srv->workers_started; i++) pthread_join(srv->workers[i], NULL);
    srv->workers_started = 0;
    pthread_mutex_lock(&srv->wmu);
    struct req_int *r = srv->wq_head;
    srv->wq_head = srv->wq_tail = NULL;
    pthread_mutex_unlock(&srv->wmu);
    while (r) {
        struct req_int *next = r->next;
        req_free(r);
        r = next;
    }
    gr_info(LOGGER, "network server stopped");
}

void gr_net_server_free(struct gr_net_server *srv) {
    if (!srv) return;
    gr_net_server_stop(srv);
    server_unref(srv);
}

void gr_net_server_stats(const struct gr_net_server *srv, struct gr_net_stats *out) {
    struct gr_net_server *s = (struct gr_net_server *)srv;
    out->connections_open = atomic_load_explicit(&s->st_open, memory_order_relaxed);
    out->connections_accepted = atomic_load_explicit(&s->st_accepted, memory_order_relaxed);
    out->connections_closed_idle = atomic_load_explicit(&s->st_idle, memory_order_relaxed);
    out->requests = atomic_load_explicit(&s->st_requests, memory_order_relaxed);
    out->responses = atomic_load_explicit(&s->st_responses, memory_order_relaxed);
    out->bytes_in = atomic_load_explicit(&s->st_in, memory_order_relaxed);
    out->bytes_out = atomic_load_explicit(&s->st_out, memory_order_relaxed);
    out->bytes_sendfile = atomic_load_explicit(&s->st_sendfile, memory_order_relaxed);
    out->frames_rejected = atomic_load_explicit(&s->st_rejected, memory_order_relaxed);
    out->connections_refused = atomic_load_explicit(&s->st_refused, memory_order_relaxed);
    out->request_queue_size = atomic_load_explicit(&s->st_queued, memory_order_relaxed);
    out->response_queue_size = atomic_load_explicit(&s->st_resp_queued, memory_order_relaxed);
    out->produce_responses = atomic_load_explicit(&s->st_prod_n, memory_order_relaxed);
    out->produce_queue_us = atomic_load_explicit(&s->st_prod_queue_us, memory_order_relaxed);
    out->produce_total_us = atomic_load_explicit(&s->st_prod_total_us, memory_order_relaxed);
    out->loop_wakeups = atomic_load_explicit(&s->st_wakeups, memory_order_relaxed);
    out->requests_pipelined = atomic_load_explicit(&s->st_pipelined, memory_order_relaxed);
    out->network_idle_us = atomic_load_explicit(&s->st_net_idle_us, memory_order_relaxed);
    out->io_idle_us = atomic_load_explicit(&s->st_io_idle_us, memory_order_relaxed);
    out->num_network_threads = s->num_loops;
    out->num_io_threads = s->num_workers;
}

int gr_net_server_num_listeners(const struct gr_net_server *srv) { return srv->num_listeners; }

void gr_net_server_listener_rates(const struct gr_net_server *srv, int i, double *creation_rate, double *close_rate,
                                  double *blocked_fraction) {
    const struct listener *ls = &srv->listeners[i];
    *creation_rate = gr_meter_one_minute_rate(ls->created);
    *close_rate = gr_meter_one_minute_rate(ls->closed);
    int64_t now = gr_mono_us(), blocked = atomic_load_explicit(&ls->blocked_us, memory_order_relaxed);
    for (int j = 0; j < srv->num_loops; j++) {
        int64_t since = atomic_load(&srv->loops[j].blocked_since_us[i]);
        if (since > 0 && since < now) blocked += now - since;
    }
    double span = (double)(now - srv->started_us) * srv->num_loops;
    *blocked_fraction = srv->started_us > 0 && span > 0 ? GR_MIN(1.0, (double)blocked / span) : 0.0;
}

void gr_net_server_client_software(struct gr_net_server *srv,
                                   void (*fn)(void *ctx, const char *listener, const char *name, const char *version,
                                              int64_t connections),
                                   void *ctx) {
    gr_client_sw_foreach(srv->client_sw, fn, ctx);
}

void gr_net_set_client_software(struct gr_net_request *req, const char *name, const char *version) {
    struct req_int *r = (struct req_int *)req;
    if (!name || strlen(name) > 255) name = "";
    if (!version || strlen(version) > 255) version = "";
    gr_client_sw_set(r->srv->client_sw, &req->session->client_sw, req->listener, name, version);
}

int64_t gr_net_server_listener_connections(const struct gr_net_server *srv, int i, const char **name) {
    *name = srv->listeners[i].name;
    return atomic_load_explicit(&srv->listeners[i].open, memory_order_relaxed);
}
