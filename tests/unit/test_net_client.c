/* Outbound client tests, against the network server: request/response, correlation id checks,
 * timeouts, response size limit, send-only, shutdown from another thread, connect errors. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "net/client.h"
#include "net/server.h"
#include "support/check.h"

enum { API_ECHO = 0, API_NONE = 2, API_HOLD = 4, API_WRONG_CORR = 6, API_BIG = 7 };

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void respond_corr(struct gr_net_request *req, int32_t corr, size_t extra) {
    size_t body = 4 + (req->len - 8) + extra;
    uint8_t *buf = gr_calloc(1, 4 + body);
    put32(buf, (uint32_t)body);
    put32(buf + 4, (uint32_t)corr);
    memcpy(buf + 8, req->data + 8, req->len - 8);
    gr_net_respond_take(req, buf, 4 + body);
}

static pthread_mutex_t hmu = PTHREAD_MUTEX_INITIALIZER;
static struct gr_net_request *held[16];
static atomic_int nheld;
static atomic_int nnone;

static void handler(void *ctx, struct gr_net_request *req) {
    (void)ctx;
    switch (req->api_key) {
    case API_ECHO: respond_corr(req, req->correlation_id, 0); break;
    case API_NONE:
        atomic_fetch_add(&nnone, 1);
        gr_net_respond_none(req);
        break;
    case API_HOLD:
        pthread_mutex_lock(&hmu);
        held[atomic_load(&nheld) % 16] = req;
        atomic_fetch_add(&nheld, 1);
        pthread_mutex_unlock(&hmu);
        break;
    case API_WRONG_CORR: respond_corr(req, req->correlation_id + 1, 0); break;
    case API_BIG: respond_corr(req, req->correlation_id, 2 * 1024 * 1024); break;
    default: gr_net_close(req); break;
    }
}

static struct gr_net_request *take_held(int idx) {
    int64_t end = gr_mono_ms() + 3000;
    while (atomic_load(&nheld) <= idx && gr_mono_ms() < end) usleep(1000);
    pthread_mutex_lock(&hmu);
    struct gr_net_request *r = atomic_load(&nheld) > idx ? held[idx % 16] : NULL;
    pthread_mutex_unlock(&hmu);
    return r;
}

static uint8_t *make_req(int16_t api, int32_t corr, size_t plen, size_t *len) {
    *len = 12 + plen;
    uint8_t *b = gr_malloc(*len);
    put32(b, (uint32_t)(8 + plen));
    b[4] = (uint8_t)((uint16_t)api >> 8);
    b[5] = (uint8_t)api;
    b[6] = 0;
    b[7] = 3;
    put32(b + 8, (uint32_t)corr);
    for (size_t i = 0; i < plen; i++) b[12 + i] = (uint8_t)(i ^ (size_t)corr);
    return b;
}

/* send_recv of an `api` request; returns the rc and checks an echo on success */
static int exchange(struct gr_net_client *cli, int16_t api, int32_t corr, size_t plen, int timeout_ms) {
    size_t len, rlen = 0;
    uint8_t *req = make_req(api, corr, plen, &len), *resp = NULL;
    int rc = gr_net_client_send_recv(cli, req, len, &resp, &rlen, timeout_ms);
    if (rc == 0) {
        CHECK(rlen >= 4 + plen);
        CHECK((int32_t)get32(resp) == corr);
        CHECK(memcmp(resp + 4, req + 12, plen) == 0);
    } else {
        CHECK(resp == NULL && rlen == 0);
    }
    free(req);
    free(resp);
    return rc;
}

struct shutdown_arg {
    struct gr_net_client *cli;
    int delay_ms;
};

static void *shutdown_later(void *p) {
    struct shutdown_arg *a = p;
    usleep((useconds_t)a->delay_ms * 1000);
    gr_net_client_shutdown(a->cli);
    return NULL;
}

int main(void) {
    struct gr_net_listener ls[] = {{"PLAINTEXT", "127.0.0.1", 0}};
    struct gr_net_config cfg;
    gr_net_config_init(&cfg);
    cfg.listeners = ls;
    cfg.num_listeners = 1;
    cfg.num_io_threads = 2;
    struct gr_net_server *srv = NULL;
    CHECK(gr_net_server_new(&cfg, handler, NULL, &srv) == 0);
    CHECK(gr_net_server_start(srv) == 0);
    int port = gr_net_server_port(srv, 0);
    struct gr_net_client *cli = NULL;

    /* basic exchanges, including a large one (partial reads/writes on both sides) */
    CHECK(gr_net_client_connect("127.0.0.1", port, 2000, &cli) == 0);
    char peer[64];
    snprintf(peer, sizeof peer, "127.0.0.1:%d", port);
    CHECK(strcmp(gr_net_client_peer(cli), peer) == 0);
    CHECK(exchange(cli, API_ECHO, 1, 0, 2000) == 0);
    CHECK(exchange(cli, API_ECHO, 2, 100, 2000) == 0);
    CHECK(exchange(cli, API_ECHO, 3, 5 * 1024 * 1024, 10000) == 0);
    CHECK(exchange(cli, API_BIG, 4, 10, 10000) == 0);

    /* malformed request frames are refused without breaking the connection */
    uint8_t bad[12] = {0, 0, 0, 9}; /* size says 9, length is 12 */
    uint8_t *resp = NULL;
    size_t rlen = 0;
    CHECK(gr_net_client_send_recv(cli, bad, sizeof bad, &resp, &rlen, 1000) == -EINVAL);
    CHECK(gr_net_client_send_recv(cli, bad, 6, &resp, &rlen, 1000) == -EINVAL);
    CHECK(gr_net_client_send_only(cli, bad, sizeof bad, 1000) == -EINVAL);
    CHECK(exchange(cli, API_ECHO, 5, 1, 2000) == 0);

    /* send-only: no response expected; the next exchange still lines up */
    size_t len;
    uint8_t *req = make_req(API_NONE, 6, 3, &len);
    CHECK(gr_net_client_send_only(cli, req, len, 1000) == 0);
    free(req);
    CHECK(exchange(cli, API_ECHO, 7, 1, 2000) == 0);
    CHECK(atomic_load(&nnone) == 1);

    /* wrong correlation id: GR_EPROTO, then the client is unusable */
    CHECK(exchange(cli, API_WRONG_CORR, 8, 0, 2000) == GR_EPROTO);
    CHECK(exchange(cli, API_ECHO, 9, 0, 2000) == GR_ECLOSED);
    gr_net_client_close(cli);

    /* response above the limit */
    CHECK(gr_net_client_connect("localhost", port, 2000, &cli) == 0);
    gr_net_client_set_max_response_bytes(cli, 1024);
    CHECK(exchange(cli, API_ECHO, 10, 1000, 2000) == 0);
    CHECK(exchange(cli, API_BIG, 11, 0, 2000) == GR_EPROTO);
    gr_net_client_close(cli);

    /* timeout: the handler holds the request */
    CHECK(gr_net_client_connect("127.0.0.1", port, 2000, &cli) == 0);
    int64_t t0 = gr_mono_ms();
    CHECK(exchange(cli, API_HOLD, 12, 0, 200) == GR_ETIMEOUT);
    int64_t took = gr_mono_ms() - t0;
    CHECK(took >= 190 && took < 2000);
    CHECK(exchange(cli, API_ECHO, 13, 0, 200) == GR_ECLOSED);
    gr_net_client_close(cli);
    struct gr_net_request *h = take_held(0);
    CHECK(h != NULL);
    if (h) respond_corr(h, h->correlation_id, 0); /* client gone: dropped */

    /* shutdown from another thread wakes a blocked send_recv */
    CHECK(gr_net_client_connect("127.0.0.1", port, 2000, &cli) == 0);
    struct shutdown_arg sa = {cli, 150};
    pthread_t th;
    pthread_create(&th, NULL, shutdown_later, &sa);
    t0 = gr_mono_ms();
    CHECK(exchange(cli, API_HOLD, 14, 0, -1) == GR_ECLOSED);
    CHECK(gr_mono_ms() - t0 < 3000);
    pthread_join(th, NULL);
    gr_net_client_close(cli);
    h = take_held(1);
    CHECK(h != NULL);
    if (h) gr_net_respond_none(h);

    /* server closes the connection: GR_ECLOSED */
    CHECK(gr_net_client_connect("127.0.0.1", port, 2000, &cli) == 0);
    CHECK(exchange(cli, 99, 15, 0, 2000) == GR_ECLOSED);
    gr_net_client_close(cli);

    /* connect errors: refused, unresolvable, bad port */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, (struct sockaddr *)&sin, sizeof sin);
    socklen_t sl = sizeof sin;
    getsockname(fd, (struct sockaddr *)&sin, &sl);
    int dead_port = ntohs(sin.sin_port);
    close(fd);
    cli = NULL;
    CHECK(gr_net_client_connect("127.0.0.1", dead_port, 2000, &cli) == -ECONNREFUSED);
    CHECK(cli == NULL);
    CHECK(gr_net_client_connect("no-such-host.invalid", port, 2000, &cli) == -EHOSTUNREACH);
    CHECK(gr_net_client_connect("127.0.0.1", 0, 2000, &cli) == -EINVAL);
    gr_net_client_close(NULL);

    gr_net_server_free(srv);
    if (test_failures) {
        fprintf(stderr, "test_net_client: %d check(s) failed\n", test_failures);
        return 1;
    }
    printf("test_net_client: ok\n");
    return 0;
}
