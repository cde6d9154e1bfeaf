/* Network server tests: framing limits, in-order responses with delayed out-of-order handler
 * completions, muting, idle close, many connections, completions after disconnect/stop.
 * The client side uses raw blocking sockets so the server is tested on its own. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "net/server.h"
#include "support/check.h"

/* api keys understood by the test handler */
enum {
    API_ECHO = 0,    /* respond at once: [corr][request bytes 8..] */
    API_DELAY = 1,   /* respond later, from a delayer thread, in random order */
    API_NONE = 2,    /* gr_net_respond_none */
    API_CLOSE = 3,   /* gr_net_close */
    API_HOLD = 4,    /* keep the request in `held` for the test to complete */
    API_BADSIZE = 5, /* respond with a frame whose size prefix is wrong */
    API_BLOCK = 6,   /* block the I/O thread until the gate opens, then echo */
};

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static atomic_int blocked_now;

/* epoll_ctl interposed: fail_exclusive_adds > 0 makes that many of the next EPOLLEXCLUSIVE adds
 * (the listeners' registrations) fail with ENOMEM. */
static atomic_int fail_exclusive_adds;
static int (*real_epoll_ctl)(int, int, int, struct epoll_event *);

__attribute__((constructor)) static void resolve_epoll_ctl(void) {
    *(void **)(&real_epoll_ctl) = dlsym(RTLD_NEXT, "epoll_ctl");
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev) {
    if (op == EPOLL_CTL_ADD && ev && (ev->events & EPOLLEXCLUSIVE)) {
        int n = atomic_load(&fail_exclusive_adds);
        while (n > 0 && !atomic_compare_exchange_weak(&fail_exclusive_adds, &n, n - 1)) {
        }
        if (n > 0) {
            errno = ENOMEM;
            return -1;
        }
    }
    return real_epoll_ctl(epfd, op, fd, ev);
}

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void respond_echo(struct gr_net_request *req) {
    size_t body = 4 + (req->len - 8);
    uint8_t *buf = gr_malloc(4 + body);
    put32(buf, (uint32_t)body);
    put32(buf + 4, (uint32_t)req->correlation_id);
    memcpy(buf + 8, req->data + 8, req->len - 8);
    gr_net_respond_take(req, buf, 4 + body);
}

/* ---- delayer: completes requests from other threads, out of order ------------------------- */

/* Released Produce requests (api_key 0, api_version RELEASE_VER): released at once, completed
 * later from the delayer in random order. Counts how many were outstanding together and
 * whether any other request reached the handler while some were. */
#define RELEASE_VER 0x7e
static atomic_int rel_outstanding, rel_max, rel_violations;

#define DELAY_MAX 4096
static pthread_mutex_t dmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dcond = PTHREAD_COND_INITIALIZER;
static struct gr_net_request *dq[DELAY_MAX];
static int dn;
static bool dstop;
static atomic_int held_count;
static struct gr_net_request *held[64];
static pthread_mutex_t hmu = PTHREAD_MUTEX_INITIALIZER;

static void *delayer_main(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (;;) {
        pthread_mutex_lock(&dmu);
        while (dn == 0 && !dstop) pthread_cond_wait(&dcond, &dmu);
        if (dn == 0 && dstop) {
            pthread_mutex_unlock(&dmu);
            return NULL;
        }
        int i = (int)(rand_r(&seed) % (unsigned)dn);
        struct gr_net_request *req = dq[i];
        dq[i] = dq[--dn];
        pthread_mutex_unlock(&dmu);
        usleep((useconds_t)(rand_r(&seed) % 2000));
        if (req->api_key == API_ECHO && req->api_version == RELEASE_VER) atomic_fetch_sub(&rel_outstanding, 1);
        respond_echo(req);
    }
}


static void delay_req(struct gr_net_request *req) {
    pthread_mutex_lock(&dmu);
    if (dn < DELAY_MAX) {
        dq[dn++] = req;
        pthread_cond_signal(&dcond);
        pthread_mutex_unlock(&dmu);
    } else {
        pthread_mutex_unlock(&dmu);
        respond_echo(req);
    }
}

static void handler(void *ctx, struct gr_net_request *req) {
    (void)ctx;
    if (req->api_key == API_ECHO && req->api_version == RELEASE_VER) {
        int now = atomic_fetch_add(&rel_outstanding, 1) + 1;
        int m = atomic_load(&rel_max);
        while (now > m && !atomic_compare_exchange_weak(&rel_max, &m, now)) {
        }
        gr_net_request_release(req);
        delay_req(req);
        return;
    }
    if (req->api_key != API_ECHO && atomic_load(&rel_outstanding) > 0) atomic_fetch_add(&rel_violations, 1);
    switch (req->api_key) {
    case API_ECHO: respond_echo(req); break;
    case API_DELAY: delay_req(req); break;
    case API_NONE: gr_net_respond_none(req); break;
    case API_BLOCK:
        atomic_fetch_add(&blocked_now, 1);
        pthread_mutex_lock(&gate_mu);
        while (!gate_open) pthread_cond_wait(&gate_cond, &gate_mu);
        pthread_mutex_unlock(&gate_mu);
        atomic_fetch_sub(&blocked_now, 1);
        respond_echo(req);
        break;
    case API_HOLD:
        pthread_mutex_lock(&hmu);
        held[atomic_load(&held_count) % 64] = req;
        atomic_fetch_add(&held_count, 1);
        pthread_mutex_unlock(&hmu);
        break;
    case API_BADSIZE: {
        uint8_t buf[12];
        put32(buf, 100);
        put32(buf + 4, (uint32_t)req->correlation_id);
        put32(buf + 8, 0);
        gr_net_respond(req, buf, sizeof buf);
        break;
    }
    default: gr_net_close(req); break;
    }
}

static struct gr_net_request *take_held(int idx, int timeout_ms) {
    int64_t end = gr_mono_ms() + timeout_ms;
    while (atomic_load(&held_count) <= idx && gr_mono_ms() < end) usleep(1000);
    if (atomic_load(&held_count) <= idx) return NULL;
    pthread_mutex_lock(&hmu);
    struct gr_net_request *r = held[idx % 64];
    pthread_mutex_unlock(&hmu);
    return r;
}

/* ---- raw socket helpers -------------------------------------------------------------------- */

static int raw_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        fprintf(stderr, "connect: %s\n", strerror(errno));
        close(fd);
        return -1;
    }
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

static bool write_all(int fd, const void *p, size_t len) {
    const uint8_t *b = p;
    while (len) {
        ssize_t n = send(fd, b, len, MSG_NOSIGNAL);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            return false;
        }
        b += n;
        len -= (size_t)n;
    }
    return true;
}

static bool read_all(int fd, void *p, size_t len) {
    uint8_t *b = p;
    while (len) {
        ssize_t n = recv(fd, b, len, 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            return false;
        }
        b += n;
        len -= (size_t)n;
    }
    return true;
}

/* Builds a request frame: size, api_key, api_version 0, corr, payload of `plen` bytes. */
static uint8_t *make_req(int16_t api, int32_t corr, size_t plen, size_t *len) {
    *len = 12 + plen;
    uint8_t *b = gr_malloc(*len);
    put32(b, (uint32_t)(8 + plen));
    b[4] = (uint8_t)((uint16_t)api >> 8);
    b[5] = (uint8_t)api;
    b[6] = b[7] = 0;
    put32(b + 8, (uint32_t)corr);
    for (size_t i = 0; i < plen; i++) b[12 + i] = (uint8_t)(i * 7 + (size_t)corr);
    return b;
}

static bool send_req(int fd, int16_t api, int32_t corr, size_t plen) {
    size_t len;
    uint8_t *b = make_req(api, corr, plen, &len);
    bool ok = write_all(fd, b, len);
    free(b);
    return ok;
}

/* Reads one response and checks it is the echo of request (corr, plen). */
static bool read_echo(int fd, int32_t corr, size_t plen) {
    uint8_t hdr[8];
    if (!read_all(fd, hdr, 8)) {
        fprintf(stderr, "read_echo: no response for corr %d\n", corr);
        return false;
    }
    uint32_t size = get32(hdr);
    int32_t got = (int32_t)get32(hdr + 4);
    if (got != corr || size != 4 + plen) {
        fprintf(stderr, "read_echo: expected corr %d size %zu, got corr %d size %u\n", corr,
                4 + plen, got, size);
        return false;
    }
    uint8_t *p = gr_malloc(plen + 1);
    bool ok = read_all(fd, p, plen);
    for (size_t i = 0; ok && i < plen; i++)
        if (p[i] != (uint8_t)(i * 7 + (size_t)corr)) ok = false;
    free(p);
    return ok;
}

/* True if the peer closes fd (EOF or reset) within timeout_ms. */
static bool wait_closed(int fd, int timeout_ms) {
    int64_t end = gr_mono_ms() + timeout_ms;
    for (;;) {
        int left = (int)(end - gr_mono_ms());
        if (left <= 0) return false;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, left) <= 0) return false;
        uint8_t b[4096];
        ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
        if (n == 0) return true;
        if (n < 0 && errno == ECONNRESET) return true;
    }
}

static struct gr_net_server *start_server(int64_t max_bytes, int64_t idle_ms, int io_threads,
                                          int net_threads) {
    struct gr_net_listener ls[] = {{"PLAINTEXT", "127.0.0.1", 0}, {"CONTROLLER", "127.0.0.1", 0}};
    struct gr_net_config cfg;
    gr_net_config_init(&cfg);
    cfg.listeners = ls;
    cfg.num_listeners = 2;
    if (max_bytes) cfg.socket_request_max_bytes = max_bytes;
    if (idle_ms) cfg.connections_max_idle_ms = idle_ms;
    cfg.num_io_threads = io_threads;
    cfg.num_network_threads = net_threads;
    struct gr_net_server *srv = NULL;
    int rc = gr_net_server_new(&cfg, handler, NULL, &srv);
    CHECK(rc == 0);
    if (rc) return NULL;
    rc = gr_net_server_start(srv);
    CHECK(rc == 0);
    CHECK(gr_net_server_port(srv, 0) > 0);
    CHECK(gr_net_server_port(srv, 1) > 0);
    CHECK(gr_net_server_port(srv, 2) == -1);
    return srv;
}

static int64_t wait_stat_open(struct gr_net_server *srv, int64_t want, int timeout_ms) {
    struct gr_net_stats st;
    int64_t end = gr_mono_ms() + timeout_ms;
    do {
        gr_net_server_stats(srv, &st);
        if (st.connections_open == want) break;
        usleep(2000);
    } while (gr_mono_ms() < end);
    return st.connections_open;
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_echo_and_listeners(struct gr_net_server *srv) {
    for (int l = 0; l < 2; l++) {
        int fd = raw_connect(gr_net_server_port(srv, l));
        CHECK(fd >= 0);
        CHECK(send_req(fd, API_ECHO, 42, 10));
        CHECK(read_echo(fd, 42, 10));
        CHECK(send_req(fd, API_ECHO, -7, 0));
        CHECK(read_echo(fd, -7, 0));
        close(fd);
    }
}

/* Pipelined requests on several connections; the handler answers from delayer threads in random
 * order with delays; every connection must still see its responses in request order. */
static void test_pipelined_out_of_order(struct gr_net_server *srv) {
    enum { CONNS = 8, PER = 60 };
    int fds[CONNS];
    for (int c = 0; c < CONNS; c++) {
        fds[c] = raw_connect(gr_net_server_port(srv, 0));
        CHECK(fds[c] >= 0);
        /* all requests of a connection in one write: they arrive pipelined */
        size_t total = 0, len;
        uint8_t *all = NULL;
        for (int i = 0; i < PER; i++) {
            uint8_t *r = make_req(API_DELAY, c * 1000 + i, (size_t)(i % 5) * 3, &len);
            all = gr_realloc(all, total + len);
            memcpy(all + total, r, len);
            total += len;
            free(r);
        }
        CHECK(write_all(fds[c], all, total));
        free(all);
    }
    for (int c = 0; c < CONNS; c++) {
        for (int i = 0; i < PER; i++) {
            if (!read_echo(fds[c], c * 1000 + i, (size_t)(i % 5) * 3)) {
                CHECK(!"out-of-order or missing response");
                break;
            }
        }
        close(fds[c]);
    }
}

static void test_large_frame(struct gr_net_server *srv) {
    int fd = raw_connect(gr_net_server_port(srv, 0));
    size_t plen = 3 * 1024 * 1024 + 17;
    CHECK(send_req(fd, API_ECHO, 9, plen));
    CHECK(read_echo(fd, 9, plen));
    /* and a small one behind it still works */
    CHECK(send_req(fd, API_DELAY, 10, 1));
    CHECK(read_echo(fd, 10, 1));
    close(fd);
}

static void test_bad_frames(struct gr_net_server *srv, int64_t limit) {
    struct gr_net_stats before, after;
    gr_net_server_stats(srv, &before);
    int good = raw_connect(gr_net_server_port(srv, 0));
    CHECK(send_req(good, API_ECHO, 1, 0));
    CHECK(read_echo(good, 1, 0));
    int32_t sizes[] = {-1, INT32_MAX, (int32_t)(limit + 1), 3, 0, 7, INT32_MIN};
    for (size_t i = 0; i < GR_ARRAY_LEN(sizes); i++) {
        int fd = raw_connect(gr_net_server_port(srv, 0));
        uint8_t hdr[12] = {0};
        put32(hdr, (uint32_t)sizes[i]);
        CHECK(write_all(fd, hdr, sizeof hdr));
        if (!wait_closed(fd, 3000)) {
            fprintf(stderr, "size %d did not close the connection\n", sizes[i]);
            CHECK(!"bad frame size accepted");
        }
        close(fd);
        CHECK(send_req(good, API_ECHO, 100 + (int32_t)i, 3));
        CHECK(read_echo(good, 100 + (int32_t)i, 3));
    }
    /* exactly the limit is accepted */
    CHECK(send_req(good, API_ECHO, 77, (size_t)limit - 8));
    CHECK(read_echo(good, 77, (size_t)limit - 8));
    /* a header and part of a body, then the client goes away */
    int fd = raw_connect(gr_net_server_port(srv, 0));
    uint8_t part[12];
    put32(part, 100);
    put32(part + 4, 0);
    put32(part + 8, 5);
    CHECK(write_all(fd, part, sizeof part));
    usleep(20000);
    close(fd);
    /* only the size prefix, then close */
    fd = raw_connect(gr_net_server_port(srv, 0));
    CHECK(write_all(fd, part, 2));
    close(fd);
    CHECK(wait_stat_open(srv, 1, 3000) == 1); /* only `good` is left */
    CHECK(send_req(good, API_ECHO, 200, 0));
    CHECK(read_echo(good, 200, 0));
    close(good);
    gr_net_server_stats(srv, &after);
    CHECK(after.frames_rejected - before.frames_rejected == (int64_t)GR_ARRAY_LEN(sizes));
}

static void test_none_close_badsize(struct gr_net_server *srv) {
    int fd = raw_connect(gr_net_server_port(srv, 0));
    CHECK(send_req(fd, API_NONE, 1, 0));
    CHECK(send_req(fd, API_ECHO, 2, 4));
    CHECK(read_echo(fd, 2, 4)); /* no response for 1, then 2's */
    CHECK(send_req(fd, API_CLOSE, 3, 0));
    CHECK(wait_closed(fd, 3000));
    close(fd);

    fd = raw_connect(gr_net_server_port(srv, 0));
    CHECK(send_req(fd, API_BADSIZE, 4, 0));
    CHECK(wait_closed(fd, 3000));
    close(fd);
}

static void test_many_connections(struct gr_net_server *srv) {
    enum { N = 200 };
    static int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = raw_connect(gr_net_server_port(srv, i % 2));
        CHECK(fds[i] >= 0);
    }
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < 3; k++)
            CHECK(send_req(fds[i], k == 1 ? API_DELAY : API_ECHO, i * 10 + k, (size_t)k));
    }
    for (int i = 0; i < N; i++)
        for (int k = 0; k < 3; k++) CHECK(read_echo(fds[i], i * 10 + k, (size_t)k));
    /* every connection has been answered, so accepted, and none is closed yet */
    struct gr_net_stats st;
    gr_net_server_stats(srv, &st);
    CHECK(st.connections_open >= N);
    for (int i = 0; i < N; i++) close(fds[i]);
}

/* A handler completes a request after its client disconnected: dropped, no crash. */
static void test_respond_after_disconnect(struct gr_net_server *srv) {
    CHECK(wait_stat_open(srv, 0, 3000) == 0);
    int base = atomic_load(&held_count);
    /* reset: the server sees EPOLLHUP/ERR even while muted and closes before the response */
    int fd = raw_connect(gr_net_server_port(srv, 0));
    CHECK(send_req(fd, API_HOLD, 5, 8));
    struct gr_net_request *r = take_held(base, 3000);
    CHECK(r != NULL);
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
    CHECK(wait_stat_open(srv, 0, 3000) == 0);
    if (r) respond_echo(r);
    base++;
    /* orderly close: noticed when the response is written or the socket read again */
    fd = raw_connect(gr_net_server_port(srv, 0));
    CHECK(send_req(fd, API_HOLD, 5, 8));
    r = take_held(base, 3000);
    CHECK(r != NULL);
    close(fd);
    if (r) respond_echo(r);
    CHECK(wait_stat_open(srv, 0, 3000) == 0);
    base++;

    /* the same with gr_net_close and gr_net_respond_none */
    for (int k = 0; k < 2; k++) {
        fd = raw_connect(gr_net_server_port(srv, 0));
        CHECK(send_req(fd, API_HOLD, 6, 0));
        r = take_held(base + k, 3000);
        CHECK(r != NULL);
        close(fd);
        usleep(20000);
        if (r) {
            if (k == 0) gr_net_close(r);
            else gr_net_respond_none(r);
        }
    }
    CHECK(wait_stat_open(srv, 0, 3000) == 0);
    fd = raw_connect(gr_net_server_port(srv, 0));
    CHECK(send_req(fd, API_ECHO, 8, 1));
    CHECK(read_echo(fd, 8, 1));
    close(fd);
}

/* A server on 127.0.0.1 with PLAINTEXT and CONTROLLER listeners and the given limits. */
static struct gr_net_server *start_limited(int queued_max, int max_conns, int per_ip, const char *overrides) {
    struct gr_net_listener ls[] = {{"PLAINTEXT", "127.0.0.1", 0}, {"CONTROLLER", "127.0.0.1", 0}};
    struct gr_net_config cfg;
    gr_net_config_init(&cfg);
    cfg.listeners = ls;
    cfg.num_listeners = 2;
    cfg.num_io_threads = 1;
    cfg.num_network_threads = 1;
    cfg.inter_broker_listener = "controller"; /* names compare without case, as Kafka's listener names */
    if (queued_max) cfg.queued_max_requests = queued_max;
    if (max_conns) cfg.max_connections = max_conns;
    if (per_ip) cfg.max_connections_per_ip = per_ip;
    cfg.max_connections_per_ip_overrides = overrides;
    struct gr_net_server *srv = NULL;
    CHECK(gr_net_server_new(&cfg, handler, NULL, &srv) == 0);
    if (!srv) return NULL;
    CHECK(gr_net_server_start(srv) == 0);
    return srv;
}

/* True if fd has bytes (or EOF) to read within timeout_ms. */
static bool readable(int fd, int timeout_ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, timeout_ms) > 0;
}

/* queued.max.requests: with the only I/O thread blocked, at most that many complete requests
 * wait; the other connections are not read (their bytes stay in the kernel) until there is room,
 * and then every one is answered. */
static void test_queued_max_requests(void) {
    struct gr_net_server *srv = start_limited(2, 0, 0, NULL);
    if (!srv) return;
    int port = gr_net_server_port(srv, 0);
    gate_open = false;
    int blocker = raw_connect(port);
    CHECK(send_req(blocker, API_BLOCK, 1, 0));
    for (int i = 0; i < 200 && atomic_load(&blocked_now) == 0; i++) usleep(5000);
    CHECK(atomic_load(&blocked_now) == 1);
    enum { N = 10, PLEN = 65536 };
    int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = raw_connect(port);
        CHECK(send_req(fds[i], API_ECHO, 100 + i, PLEN));
    }
    usleep(300000);
    struct gr_net_stats st;
    gr_net_server_stats(srv, &st);
    CHECK(st.request_queue_size == 2);
    CHECK(st.requests == 3);                       /* the blocked one and two queued */
    CHECK(st.bytes_in < 4 * (int64_t)(12 + PLEN)); /* the others were not read */
    CHECK(!readable(fds[N - 1], 0));
    pthread_mutex_lock(&gate_mu);
    gate_open = true;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_mu);
    CHECK(read_echo(blocker, 1, 0));
    for (int i = 0; i < N; i++) CHECK(read_echo(fds[i], 100 + i, PLEN));
    gr_net_server_stats(srv, &st);
    CHECK(st.request_queue_size == 0);
    for (int i = 0; i < N; i++) close(fds[i]);
    close(blocker);
    gr_net_server_free(srv);
}

/* max.connections: at the limit the listener stops accepting (a new connection waits in the
 * backlog, unanswered) until one closes; the inter-broker listener is exempt.
 * max.connections.per.ip(.overrides): one more is closed right after accept. */
static void test_connection_limits(void) {
    struct gr_net_server *srv = start_limited(0, 2, 0, NULL);
    if (!srv) return;
    int port = gr_net_server_port(srv, 0);
    int a = raw_connect(port), b = raw_connect(port), c = raw_connect(port);
    CHECK(send_req(a, API_ECHO, 1, 1) && read_echo(a, 1, 1));
    CHECK(send_req(b, API_ECHO, 2, 1) && read_echo(b, 2, 1));
    CHECK(send_req(c, API_ECHO, 3, 1));
    CHECK(!readable(c, 300)); /* not accepted yet */
    int ctl = raw_connect(gr_net_server_port(srv, 1));
    CHECK(send_req(ctl, API_ECHO, 4, 1) && read_echo(ctl, 4, 1)); /* exempt listener */
    close(ctl);
    close(a);
    CHECK(read_echo(c, 3, 1)); /* accepted once a connection closed */
    close(b);
    close(c);
    gr_net_server_free(srv);

    srv = start_limited(0, 0, 1, " 127.0.0.1:3 , ::1:1");
    if (!srv) return;
    port = gr_net_server_port(srv, 0);
    int fds[4];
    for (int i = 0; i < 4; i++) fds[i] = raw_connect(port);
    CHECK(wait_closed(fds[3], 3000)); /* the 4th from 127.0.0.1 (override 3) */
    for (int i = 0; i < 3; i++) CHECK(send_req(fds[i], API_ECHO, 10 + i, 1) && read_echo(fds[i], 10 + i, 1));
    struct gr_net_stats st;
    gr_net_server_stats(srv, &st);
    CHECK(st.connections_refused == 1);
    close(fds[0]);
    CHECK(wait_stat_open(srv, 2, 3000) == 2);
    fds[0] = raw_connect(port); /* a closed one frees its place */
    CHECK(send_req(fds[0], API_ECHO, 20, 1) && read_echo(fds[0], 20, 1));
    for (int i = 0; i < 4; i++) close(fds[i]);
    gr_net_server_free(srv);

    /* an override written as an IPv4-mapped IPv6 address is the IPv4 peer's (Java's InetAddress
     * makes it an Inet4Address): a limit meant for 127.0.0.1 must not be bypassed */
    srv = start_limited(0, 0, 0, "::ffff:127.0.0.1:1");
    if (!srv) return;
    port = gr_net_server_port(srv, 0);
    fds[0] = raw_connect(port);
    fds[1] = raw_connect(port);
    CHECK(wait_closed(fds[1], 3000));
    CHECK(send_req(fds[0], API_ECHO, 30, 1) && read_echo(fds[0], 30, 1));
    close(fds[0]);
    close(fds[1]);
    gr_net_server_free(srv);

    /* a malformed override is a configuration error */
    struct gr_net_listener ls[] = {{"PLAINTEXT", "127.0.0.1", 0}};
    struct gr_net_config cfg;
    gr_net_config_init(&cfg);
    cfg.listeners = ls;
    cfg.num_listeners = 1;
    cfg.max_connections_per_ip_overrides = "127.0.0.1";
    CHECK(gr_net_server_new(&cfg, handler, NULL, &srv) == GR_ECONFIG);
    cfg.max_connections_per_ip_overrides = "127.0.0.1:x";
    CHECK(gr_net_server_new(&cfg, handler, NULL, &srv) == GR_ECONFIG);
}

/* A listener paused at max.connections whose re-arm fails (epoll_ctl ENOMEM) is re-armed later,
 * not left paused for good: the connection waiting in the backlog is accepted once one closes. */
static void test_listener_rearm_failure(void) {
    struct gr_net_server *srv = start_limited(0, 1, 0, NULL);
    if (!srv) return;
    int port = gr_net_server_port(srv, 0);
    int a = raw_connect(port);
    CHECK(send_req(a, API_ECHO, 1, 1) && read_echo(a, 1, 1));
    int b = raw_connect(port);
    CHECK(send_req(b, API_ECHO, 2, 1));
    CHECK(!readable(b, 100)); /* the listener is paused */
    atomic_store(&fail_exclusive_adds, 1);
    for (int i = 0; i < 200 && atomic_load(&fail_exclusive_adds) > 0; i++) usleep(5000);
    CHECK(atomic_load(&fail_exclusive_adds) == 0); /* a re-arm failed */
    close(a);
    CHECK(read_echo(b, 2, 1));
    close(b);
    gr_net_server_free(srv);
}

static void test_idle(void) {
    struct gr_net_server *srv = start_server(0, 300, 2, 1);
    if (!srv) return;
    int idle_fd = raw_connect(gr_net_server_port(srv, 0));
    int busy_fd = raw_connect(gr_net_server_port(srv, 0));
    int64_t start = gr_mono_ms();
    bool busy_ok = true;
    while (gr_mono_ms() - start < 900) {
        busy_ok = busy_ok && send_req(busy_fd, API_ECHO, 1, 0) && read_echo(busy_fd, 1, 0);
        usleep(20000);
    }
    CHECK(busy_ok);
    CHECK(wait_closed(idle_fd, 2000));
    close(idle_fd);
    close(busy_fd);
    /* a request held by the handler longer than the idle time keeps its connection */
    int base = atomic_load(&held_count);
    int fd = raw_connect(gr_net_server_port(srv, 0));
    CHECK(send_req(fd, API_HOLD, 3, 0));
    struct gr_net_request *r = take_held(base, 3000);
    usleep(700000); /* more than the idle time */
    if (r) respond_echo(r);
    CHECK(read_echo(fd, 3, 0));
    close(fd);
    struct gr_net_stats st;
    gr_net_server_stats(srv, &st);
    CHECK(st.connections_closed_idle >= 1);
    gr_net_server_free(srv);
}

/* Requests outstanding when the server is freed are completed afterwards safely. */
static void test_free_with_outstanding(void) {
    struct gr_net_server *srv = start_server(0, 0, 2, 2);
    if (!srv) return;
    int base = atomic_load(&held_count);
    int fd1 = raw_connect(gr_net_server_port(srv, 0));
    int fd2 = raw_connect(gr_net_server_port(srv, 1));
    CHECK(send_req(fd1, API_HOLD, 1, 0));
    CHECK(send_req(fd2, API_HOLD, 2, 0));
    struct gr_net_request *r1 = take_held(base, 3000);
    struct gr_net_request *r2 = take_held(base + 1, 3000);
    CHECK(r1 && r2);
    gr_net_server_free(srv);
    CHECK(wait_closed(fd1, 2000));
    if (r1) respond_echo(r1);
    if (r2) gr_net_respond_none(r2);
    close(fd1);
    close(fd2);
}

static void test_config_and_bind_errors(struct gr_net_server *srv) {
    struct gr_net_listener ls[] = {{"CLASH", "127.0.0.1", gr_net_server_port(srv, 0)}};
    struct gr_net_config cfg;
    gr_net_config_init(&cfg);
    cfg.listeners = ls;
    cfg.num_listeners = 1;
    cfg.num_io_threads = 1;
    struct gr_net_server *s2 = NULL;
    CHECK(gr_net_server_new(&cfg, handler, NULL, &s2) == 0);
    CHECK(gr_net_server_start(s2) == -EADDRINUSE);
    CHECK(gr_net_server_port(s2, 0) == -1);
    gr_net_server_free(s2);

    cfg.socket_request_max_bytes = 4;
    CHECK(gr_net_server_new(&cfg, handler, NULL, &s2) == GR_ECONFIG);
    cfg.socket_request_max_bytes = 1000;
    cfg.num_listeners = 0;
    CHECK(gr_net_server_new(&cfg, handler, NULL, &s2) == GR_ECONFIG);
    /* never started: free is fine */
    cfg.num_listeners = 1;
    CHECK(gr_net_server_new(&cfg, handler, NULL, &s2) == 0);
    gr_net_server_free(s2);
}

/* Stats once every request read has been answered (the client may read a response before the
 * server counts it as written). */
static void settled_stats(struct gr_net_server *srv, struct gr_net_stats *st) {
    int64_t end = gr_mono_ms() + 3000;
    do {
        gr_net_server_stats(srv, st);
        if (st->responses == st->requests) return;
        usleep(1000);
    } while (gr_mono_ms() < end);
}

/* Request-time figures: only api_key 0 (Produce) responses are counted, each once, after its
 * response was written; total time (read -> written) is at least the queue time. */
static void test_produce_request_time(struct gr_net_server *srv) {
    struct gr_net_stats before, after;
    int fd = raw_connect(gr_net_server_port(srv, 0));
    CHECK(fd >= 0);
    CHECK(send_req(fd, API_ECHO, 1, 4)); /* make sure the connection is accepted */
    CHECK(read_echo(fd, 1, 4));
    settled_stats(srv, &before);
    for (int i = 0; i < 5; i++) {
        CHECK(send_req(fd, i % 2 ? API_DELAY : API_ECHO, 10 + i, 100));
        CHECK(read_echo(fd, 10 + i, 100));
    }
    settled_stats(srv, &after);
    CHECK(after.produce_responses - before.produce_responses == 3);
    CHECK(after.produce_queue_us >= before.produce_queue_us);
    CHECK(after.produce_total_us - before.produce_total_us >= after.produce_queue_us - before.produce_queue_us);
    CHECK(after.loop_wakeups > before.loop_wakeups);
    close(fd);
}

/* Direct send: a response completed on an I/O thread goes to the socket from that thread, so a
 * request answered at once costs its network thread one wakeup (the request's bytes), not two
 * (bytes, then the completion). 200 sequential requests on one connection: at most 1.5 wakeups
 * each (some slack for the loop's periodic scans); the hand-off through the loop made it >= 2. */
static void test_direct_send_wakeups(struct gr_net_server *srv) {
    int fd = raw_connect(gr_net_server_port(srv, 0));
    CHECK(fd >= 0);
    CHECK(send_req(fd, API_ECHO, 1, 4));
    CHECK(read_echo(fd, 1, 4));
    struct gr_net_stats before, after;
    settled_stats(srv, &before);
    enum { N = 200 };
    for (int i = 0; i < N; i++) {
        CHECK(send_req(fd, i % 3 == 2 ? API_DELAY : API_ECHO, 100 + i, (size_t)(i * 37 % 3000)));
        CHECK(read_echo(fd, 100 + i, (size_t)(i * 37 % 3000)));
    }
    settled_stats(srv, &after);
    CHECK(after.responses - before.responses == N);
    int64_t wakeups = after.loop_wakeups - before.loop_wakeups;
    if (wakeups > N * 3 / 2) fprintf(stderr, "test_direct_send_wakeups: %lld wakeups for %d requests\n",
                                     (long long)wakeups, N);
    CHECK(wakeups <= N * 3 / 2);
    close(fd);
}

/* Released Produce requests are pipelined: after gr_net_request_release the next Produce of the
 * connection reaches a handler before the first is completed; their (out-of-order) completions
 * still leave in request order; a non-Produce frame waits until nothing is outstanding. Before,
 * a connection had one request with the handlers at a time. */
static void test_release_pipelining(struct gr_net_server *srv) {
    int fd = raw_connect(gr_net_server_port(srv, 0));
    CHECK(fd >= 0);
    atomic_store(&rel_max, 0);
    atomic_store(&rel_violations, 0);
    enum { N = 40 };
    struct gr_net_stats before, after;
    gr_net_server_stats(srv, &before);
    for (int i = 0; i < N; i++) {
        size_t len;
        bool other = i % 7 == 6;
        uint8_t *b = make_req(other ? API_DELAY : API_ECHO, 500 + i, (size_t)(i * 53 % 700), &len);
        if (!other) b[7] = RELEASE_VER;
        CHECK(write_all(fd, b, len));
        free(b);
    }
    for (int i = 0; i < N; i++) CHECK(read_echo(fd, 500 + i, (size_t)(i * 53 % 700)));
    gr_net_server_stats(srv, &after);
    CHECK(after.requests_pipelined > before.requests_pipelined);
    if (atomic_load(&rel_max) < 2) fprintf(stderr, "test_release_pipelining: at most %d outstanding\n",
                                           atomic_load(&rel_max));
    CHECK(atomic_load(&rel_max) >= 2);
    CHECK(atomic_load(&rel_max) <= GR_NET_MAX_OUTSTANDING);
    CHECK(atomic_load(&rel_violations) == 0);
    close(fd);
}

/* Released and plain requests under concurrency: three connections at once, each writing
 * windows of up to 5 requests (released Produce frames completed in random order by the delayer
 * threads, plain echoes, delayed non-Produce frames) and reading every response back in request
 * order. A lost completion or release would leave a connection without its responses (read
 * timeout); a response written out of turn would show as a wrong correlation id or payload. */
struct stress_arg {
    int port, idx;
    bool ok;
};

static void *stress_conn(void *argp) {
    struct stress_arg *a = argp;
    a->ok = false;
    int fd = raw_connect(a->port);
    if (fd < 0) return NULL;
    unsigned seed = (unsigned)(a->idx * 7919 + 1);
    int32_t corr = 10000 * (a->idx + 1);
    for (int round = 0; round < 120; round++) {
        int n = 1 + (int)(rand_r(&seed) % 5);
        int32_t first = corr;
        size_t lens[5];
        for (int k = 0; k < n; k++) {
            unsigned kind = rand_r(&seed) % 6;
            lens[k] = (size_t)(rand_r(&seed) % 3000);
            size_t len;
            uint8_t *b = make_req(kind == 5 ? API_DELAY : API_ECHO, corr++, lens[k], &len);
            if (kind < 4) b[7] = RELEASE_VER;
            bool w = write_all(fd, b, len);
            free(b);
            if (!w) goto out;
        }
        for (int k = 0; k < n; k++)
            if (!read_echo(fd, first + k, lens[k])) goto out;
    }
    a->ok = true;
out:
    close(fd);
    return NULL;
}

static void test_release_stress(struct gr_net_server *srv) {
    pthread_t th[3];
    struct stress_arg args[3];
    for (int i = 0; i < 3; i++) {
        args[i] = (struct stress_arg){gr_net_server_port(srv, 0), i, false};
        pthread_create(&th[i], NULL, stress_conn, &args[i]);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].ok);
    }
}

int main(void) {
    const int64_t limit = 8 * 1024 * 1024;
    pthread_t delayers[3];
    for (int i = 0; i < 3; i++) pthread_create(&delayers[i], NULL, delayer_main, (void *)(uintptr_t)(i + 1));

    struct gr_net_server *srv = start_server(limit, 0, 4, 2);
    if (!srv) return 1;
    test_echo_and_listeners(srv);
    test_pipelined_out_of_order(srv);
    test_produce_request_time(srv);
    test_direct_send_wakeups(srv);
    test_release_pipelining(srv);
    test_release_stress(srv);
    test_large_frame(srv);
    test_bad_frames(srv, limit);
    test_none_close_badsize(srv);
    test_many_connections(srv);
    test_respond_after_disconnect(srv);
    test_config_and_bind_errors(srv);
    struct gr_net_stats st;
    gr_net_server_stats(srv, &st);
    CHECK(st.connections_accepted > 200);
    CHECK(st.requests > 1000);
    CHECK(st.responses > 1000);
    CHECK(st.bytes_in > 6 * 1024 * 1024);
    CHECK(st.bytes_out > 6 * 1024 * 1024);
    gr_net_server_free(srv);

    test_idle();
    test_free_with_outstanding();
    test_queued_max_requests();
    test_connection_limits();
    test_listener_rearm_failure();

    pthread_mutex_lock(&dmu);
    dstop = true;
    pthread_cond_broadcast(&dcond);
    pthread_mutex_unlock(&dmu);
    for (int i = 0; i < 3; i++) pthread_join(delayers[i], NULL);

    if (test_failures) {
        fprintf(stderr, "test_net: %d check(s) failed\n", test_failures);
        return 1;
    }
    printf("test_net: ok\n");
    return 0;
}
