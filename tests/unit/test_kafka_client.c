/* The Kafka request/response client (net/kafka_client.h) against a scripted fake broker that
 * speaks the real codec: a good answer; a correlation id mismatch (error, connection dropped,
 * the next call reconnects); the peer closing the connection (GR_ECLOSED, then a reconnect);
 * a peer that never answers (GR_ETIMEOUT within the bound); retry-until-answered across a
 * restart of the peer; shutdown from another thread waking a blocked call and a backoff; a
 * target change; encode errors (not sent, not retried); the client's lines are logged under the
 * caller's logger name itself, so per-logger levels (KIP-412) are never those of a freed
 * client's logger whose address got reused. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/log_controller.h"
#include "common/util.h"
#include "net/kafka_client.h"
#include "protocol/codec.h"
#include "support/check.h"

int test_failures;

enum mode { M_OK, M_WRONG_CORR, M_CLOSE, M_SILENT };

static atomic_int g_mode;       /* what the fake broker does with the next request */
static atomic_int g_wrong_left; /* the next this many requests get M_WRONG_CORR whatever g_mode says */
static atomic_int g_accepts;    /* connections accepted */
static atomic_int g_requests;   /* requests read (each one's answer already decided) */
static atomic_int g_stop;
static int g_listen_fd = -1;
static void *server_main(void *arg);
static int g_port;

static int read_full(int fd, uint8_t *p, size_t n) {
    size_t off = 0;
    while (off < n) {
        ssize_t r = recv(fd, p + off, n - off, 0);
        if (r <= 0) return -1;
        off += (size_t)r;
    }
    return 0;
}

/* Answers one Metadata request per the mode; returns -1 when the connection is over. */
static int serve_one(int fd) {
    uint8_t hdr[4];
    if (read_full(fd, hdr, 4)) return -1;
    uint32_t size = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
    if (size > (1u << 20)) return -1;
    uint8_t *frame = malloc(size);
    if (read_full(fd, frame, size)) {
        free(frame);
        return -1;
    }
    /* The answer is decided before the request is counted, so that a thread that sees the count
     * cannot change how this request is answered any more. */
    int mode = atomic_load(&g_mode);
    if (atomic_load(&g_wrong_left) > 0) { /* only this thread decrements it */
        atomic_fetch_sub(&g_wrong_left, 1);
        mode = M_WRONG_CORR;
    }
    atomic_fetch_add(&g_requests, 1);
    struct gr_arena a;
    gr_arena_init(&a);
    struct gr_req_header rh;
    void *body = NULL;
    int rc = gr_proto_decode_request(frame, size, &a, &rh, &body);
    int ret = 0;
    if (rc != 0 || mode == M_CLOSE) {
        ret = -1;
    } else if (mode == M_SILENT) {
        uint8_t b;
        while (recv(fd, &b, 1, 0) > 0) { /* until the client gives up */
        }
        ret = -1;
    } else {
        struct MetadataResponse *r = gr_proto_new(&a, &gr_desc_MetadataResponse);
        r->ControllerId = 42;
        r->BrokersCount = 0;
        r->TopicsCount = 0;
        if (mode == M_WRONG_CORR) rh.CorrelationId += 7;
        struct gr_wbuf w;
        gr_wbuf_init(&w);
        if (gr_proto_encode_response(&rh, r, &w) != 0 || send(fd, w.p, w.len, MSG_NOSIGNAL) != (ssize_t)w.len)
            ret = -1;
        gr_wbuf_free(&w);
    }
    gr_arena_free(&a);
    free(frame);
    return ret;
}

static void *server_main(void *arg) {
    (void)arg;
    while (!atomic_load(&g_stop)) {
        int fd = accept(g_listen_fd, NULL, NULL);
        if (fd < 0) continue;
        atomic_fetch_add(&g_accepts, 1);
        while (!atomic_load(&g_stop) && serve_one(fd) == 0) {
        }
        close(fd);
    }
    return NULL;
}

static void start_listener(int port) {
    g_listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(g_listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(g_listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0) abort();
    socklen_t sl = sizeof sa;
    getsockname(g_listen_fd, (struct sockaddr *)&sa, &sl);
    g_port = ntohs(sa.sin_port);
    listen(g_listen_fd, 8);
}

static struct gr_kafka_client *new_client(void) {
    struct gr_kafka_client_config cfg = {.client_id = "test", .connect_timeout_ms = 2000, .request_timeout_ms = 2000};
    struct gr_kafka_client *kc = gr_kafka_client_new(&cfg);
    gr_kafka_client_set_target(kc, 1, "127.0.0.1", g_port);
    return kc;
}

/* Metadata v7 for no topics; 0 and ControllerId 42 on success. */
static int metadata(struct gr_kafka_client *kc, int timeout_ms) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct MetadataRequest rq;
    gr_proto_init_struct(&gr_desc_MetadataRequest, &rq);
    rq.TopicsCount = 0;
    void *resp = NULL;
    uint8_t *frame = NULL;
    int rc = gr_kafka_client_call(kc, GR_API_METADATA, 7, &rq, timeout_ms, &a, &resp, &frame);
    if (rc == 0) CHECK(resp && ((struct MetadataResponse *)resp)->ControllerId == 42 && frame);
    else CHECK(!resp && !frame);
    free(frame);
    gr_arena_free(&a);
    return rc;
}

static void test_ok_and_reuse(void) {
    struct gr_kafka_client *kc = new_client();
    int accepts = atomic_load(&g_accepts);
    atomic_store(&g_mode, M_OK);
    CHECK(!gr_kafka_client_connected(kc));
    CHECK(metadata(kc, 0) == 0);
    CHECK(metadata(kc, 0) == 0);
    CHECK(gr_kafka_client_connected(kc));
    CHECK(atomic_load(&g_accepts) == accepts + 1); /* one connection for both */
    /* frame NULL: the response lives in the arena alone */
    struct gr_arena a;
    gr_arena_init(&a);
    struct MetadataRequest rq;
    gr_proto_init_struct(&gr_desc_MetadataRequest, &rq);
    rq.TopicsCount = 0;
    void *resp = NULL;
    CHECK(gr_kafka_client_call(kc, GR_API_METADATA, 7, &rq, 0, &a, &resp, NULL) == 0);
    CHECK(resp && ((struct MetadataResponse *)resp)->ControllerId == 42);
    gr_arena_free(&a);
    /* the same target keeps the connection, a new one drops it */
    gr_kafka_client_set_target(kc, 1, "127.0.0.1", g_port);
    CHECK(gr_kafka_client_connected(kc));
    gr_kafka_client_set_target(kc, 2, "127.0.0.1", g_port);
    CHECK(!gr_kafka_client_connected(kc));
    gr_kafka_client_free(kc);
}

static void test_wrong_correlation_reconnects(void) {
    struct gr_kafka_client *kc = new_client();
    atomic_store(&g_mode, M_OK);
    CHECK(metadata(kc, 0) == 0);
    int accepts = atomic_load(&g_accepts);
    atomic_store(&g_mode, M_WRONG_CORR);
    CHECK(metadata(kc, 0) == GR_EPROTO);
    CHECK(!gr_kafka_client_connected(kc));
    atomic_store(&g_mode, M_OK);
    CHECK(metadata(kc, 0) == 0);
    CHECK(atomic_load(&g_accepts) == accepts + 1);
    gr_kafka_client_free(kc);
}

static void test_peer_close_reconnects(void) {
    struct gr_kafka_client *kc = new_client();
    atomic_store(&g_mode, M_OK);
    CHECK(metadata(kc, 0) == 0);
    int accepts = atomic_load(&g_accepts);
    atomic_store(&g_mode, M_CLOSE);
    CHECK(metadata(kc, 0) == GR_ECLOSED);
    CHECK(!gr_kafka_client_connected(kc));
    atomic_store(&g_mode, M_OK);
    CHECK(metadata(kc, 0) == 0);
    CHECK(atomic_load(&g_accepts) == accepts + 1);
    gr_kafka_client_free(kc);
}

static void test_timeout(void) {
    struct gr_kafka_client *kc = new_client();
    atomic_store(&g_mode, M_SILENT);
    int64_t t0 = gr_mono_ms();
    CHECK(metadata(kc, 300) == GR_ETIMEOUT);
    int64_t took = gr_mono_ms() - t0;
    CHECK(took >= 250 && took < 2000);
    CHECK(!gr_kafka_client_connected(kc));
    atomic_store(&g_mode, M_OK);
    CHECK(metadata(kc, 0) == 0); /* the silent connection was closed; a new one answers */
    gr_kafka_client_free(kc);
}

struct shutter {
    struct gr_kafka_client *kc;
    int delay_ms;
};

static void *shut_later(void *arg) {
    struct shutter *s = arg;
    usleep((useconds_t)s->delay_ms * 1000);
    gr_kafka_client_shutdown(s->kc);
    return NULL;
}

static void test_shutdown_wakes_blocked_call_and_backoff(void) {
    struct gr_kafka_client *kc = new_client();
    atomic_store(&g_mode, M_SILENT);
    struct shutter s = {kc, 200};
    pthread_t th;
    pthread_create(&th, NULL, shut_later, &s);
    int64_t t0 = gr_mono_ms();
    int rc = metadata(kc, 10000);
    CHECK(rc == GR_ECLOSED);
    CHECK(gr_mono_ms() - t0 < 5000);
    pthread_join(th, NULL);
    CHECK(gr_kafka_client_is_shut_down(kc));
    atomic_store(&g_mode, M_OK);
    CHECK(metadata(kc, 0) == GR_ECLOSED); /* sticky */
    t0 = gr_mono_ms();
    CHECK(gr_kafka_client_backoff(kc, 5000) == GR_ECLOSED);
    CHECK(gr_mono_ms() - t0 < 1000);
    gr_kafka_client_free(kc);

    /* a backoff in progress is interrupted too */
    kc = new_client();
    s.kc = kc;
    pthread_create(&th, NULL, shut_later, &s);
    t0 = gr_mono_ms();
    CHECK(gr_kafka_client_backoff(kc, 10000) == GR_ECLOSED);
    CHECK(gr_mono_ms() - t0 < 5000);
    pthread_join(th, NULL);
    gr_kafka_client_free(kc);
}

static pthread_t g_server;

static void *reopen_later(void *arg) {
    (void)arg;
    usleep(300 * 1000);
    start_listener(g_port);
    pthread_create(&g_server, NULL, server_main, NULL);
    return NULL;
}

static void stop_server(void) {
    atomic_store(&g_stop, 1);
    shutdown(g_listen_fd, SHUT_RDWR);
    close(g_listen_fd);
    pthread_join(g_server, NULL);
    atomic_store(&g_stop, 0);
}

/* Retry until answered: across a refused connection (the peer is down, then comes back) and
 * across answers with a wrong correlation id (each one drops the connection). */
static void test_until_answered(void) {
    struct gr_kafka_client *kc = new_client();
    stop_server();
    atomic_store(&g_mode, M_OK);
    CHECK(metadata(kc, 0) == -ECONNREFUSED);
    pthread_t th;
    pthread_create(&th, NULL, reopen_later, NULL);
    struct gr_arena a;
    gr_arena_init(&a);
    struct MetadataRequest rq;
    gr_proto_init_struct(&gr_desc_MetadataRequest, &rq);
    rq.TopicsCount = 0;
    void *resp = NULL;
    uint8_t *frame = NULL;
    CHECK(gr_kafka_client_call_until_answered(kc, GR_API_METADATA, 7, &rq, 0, 50, &a, &resp, &frame) == 0);
    CHECK(resp && ((struct MetadataResponse *)resp)->ControllerId == 42);
    free(frame);
    pthread_join(th, NULL);

    /* two wrong answers, then a right one: scripted in the fake broker itself (a thread flipping
     * g_mode once it saw two requests counted could flip it while the second one was still being
     * answered, which then came out right) */
    int before = atomic_load(&g_requests), accepts = atomic_load(&g_accepts);
    atomic_store(&g_wrong_left, 2);
    CHECK(gr_kafka_client_call_until_answered(kc, GR_API_METADATA, 7, &rq, 0, 50, &a, &resp, &frame) == 0);
    CHECK(resp && ((struct MetadataResponse *)resp)->ControllerId == 42);
    free(frame);
    CHECK(atomic_load(&g_wrong_left) == 0);
    CHECK(atomic_load(&g_requests) == before + 3);
    CHECK(atomic_load(&g_accepts) == accepts + 2); /* a new connection after each mismatch */

    /* an encoding error is returned at once, nothing sent, not retried */
    before = atomic_load(&g_requests);
    CHECK(gr_kafka_client_call_until_answered(kc, GR_API_METADATA, 999, &rq, 0, 50, &a, &resp, &frame) ==
          GR_PROTO_EUNSUPPORTED_VERSION);
    CHECK(atomic_load(&g_requests) == before);
    gr_arena_free(&a);
    gr_kafka_client_free(kc);
}

/* KIP-412's level table remembers a logger by the name's pointer (common/log_controller.h): a
 * client must log under the caller's (literal) logger name, not a heap copy whose address a later
 * client's copy of another name reuses (that client's lines then took the first logger's level,
 * and its own logger never existed for IncrementalAlterConfigs). */
static void test_logger_name_is_callers(void) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0); /* a port nothing listens on */
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
          getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
    int dead_port = ntohs(sa.sin_port);
    close(fd);
    static const char *const names[] = {"kc.logger.one", "kc.logger.two", "kc.logger.333", "kc.logger.444"};
    for (int i = 0; i < 4; i++) {
        struct gr_kafka_client_config cfg = {.client_id = "gregor", .logger = names[i], .connect_timeout_ms = 1000};
        struct gr_kafka_client *kc = gr_kafka_client_new(&cfg);
        gr_kafka_client_set_target(kc, 1, "127.0.0.1", dead_port);
        CHECK(gr_kafka_client_connect(kc) != 0); /* logs "cannot connect" at DEBUG: the logger exists */
        gr_kafka_client_free(kc);
        CHECK(gr_log_logger_exists(names[i]));
    }
}

int main(void) {
    start_listener(0);
    pthread_create(&g_server, NULL, server_main, NULL);
    test_ok_and_reuse();
    test_wrong_correlation_reconnects();
    test_peer_close_reconnects();
    test_timeout();
    test_shutdown_wakes_blocked_call_and_backoff();
    test_until_answered();
    test_logger_name_is_callers();
    stop_server();
    if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures);
    return test_failures ? 1 : 0;
}
