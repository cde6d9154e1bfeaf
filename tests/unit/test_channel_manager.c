/* Controller channel manager (controller/channel_manager.h) against a real network server:
 * requests built by the request batch reach the broker encoded at the right versions, responses
 * come back as completion events with the decoded body; a dropped connection is retried; a
 * broker that is down keeps its request queued until removal, and removal does not block;
 * queue metrics; wait_idle (false while a down broker holds a request, true once every request
 * sent was answered). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/kerr.h"
#include "common/metrics.h"
#include "common/util.h"
#include "controller/channel_manager.h"
#include "controller/clock.h"
#include "controller/context.h"
#include "controller/event_manager.h"
#include "controller/request_batch.h"
#include "controller/response.h"
#include "controller/states.h"
#include "net/server.h"
#include "protocol/codec.h"
#include "support/check.h"

/* ---- a broker that answers control requests ---- */

static atomic_int n_requests[8];
static atomic_int close_next; /* close the connection instead of answering, this many times */
static atomic_long last_broker_epoch;

static void handler(void *ctx, struct gr_net_request *req) {
    (void)ctx;
    struct gr_arena a;
    gr_arena_init(&a);
    struct gr_req_header h;
    void *body = NULL;
    if (gr_proto_decode_request(req->data, req->len, &a, &h, &body) != 0) {
        gr_arena_free(&a);
        gr_net_close(req);
        return;
    }
    if (h.RequestApiKey >= 0 && h.RequestApiKey < 8) atomic_fetch_add(&n_requests[h.RequestApiKey], 1);
    if (atomic_load(&close_next) > 0) {
        atomic_fetch_sub(&close_next, 1);
        gr_arena_free(&a);
        gr_net_close(req);
        return;
    }
    void *resp = NULL;
    if (h.RequestApiKey == GR_API_LEADER_AND_ISR) {
        struct LeaderAndIsrRequest *r = body;
        atomic_store(&last_broker_epoch, r->BrokerEpoch);
        struct LeaderAndIsrResponse *lr = gr_proto_new(&a, &gr_desc_LeaderAndIsrResponse);
        lr->ErrorCode = 0;
        resp = lr;
    } else if (h.RequestApiKey == GR_API_UPDATE_METADATA) {
        struct UpdateMetadataRequest *r = body;
        atomic_store(&last_broker_epoch, r->BrokerEpoch);
        struct UpdateMetadataResponse *ur = gr_proto_new(&a, &gr_desc_UpdateMetadataResponse);
        ur->ErrorCode = GR_KERR_NONE;
        resp = ur;
    } else {
        struct StopReplicaResponse *sr = gr_proto_new(&a, &gr_desc_StopReplicaResponse);
        resp = sr;
    }
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    gr_proto_encode_response(&h, resp, &w);
    gr_net_respond(req, w.p, w.len);
    gr_wbuf_free(&w);
    gr_arena_free(&a);
}

/* ---- controller side ---- */

static int n_events;
static int16_t ev_api[64];
static int32_t ev_broker[64];
static void process(void *ctx, struct gr_ctrl_event *ev) {
    (void)ctx;
    struct gr_ctrl_response *r = ev->payload;
    if (n_events < 64) {
        ev_api[n_events] = r ? r->api_key : -1;
        ev_broker[n_events] = ev->broker_id;
    }
    n_events++;
    CHECK(r && r->body && r->request);
    if (r && r->api_key == GR_API_UPDATE_METADATA) CHECK(((struct UpdateMetadataResponse *)r->body)->ErrorCode == 0);
}
static void preempt(void *ctx, struct gr_ctrl_event *ev) { (void)ctx, (void)ev; }

static void pump(struct gr_ctrl_events *em, int want, int max_ms) {
    int64_t end = gr_mono_ms() + max_ms;
    while (n_events < want && gr_mono_ms() < end) {
        if (!gr_ctrl_events_process_one(em)) usleep(5000);
    }
}

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(fd, (struct sockaddr *)&sa, sizeof sa);
    socklen_t l = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &l);
    close(fd);
    return ntohs(sa.sin_port);
}

int main(void) {
    struct gr_net_listener li = {"PLAINTEXT", "127.0.0.1", 0};
    struct gr_net_config nc;
    gr_net_config_init(&nc);
    nc.listeners = &li;
    nc.num_listeners = 1;
    nc.num_io_threads = 2;
    struct gr_net_server *srv;
    CHECK(gr_net_server_new(&nc, handler, NULL, &srv) == 0);
    CHECK(gr_net_server_start(srv) == 0);
    int port = gr_net_server_port(srv, 0);

    struct gr_metrics *metrics = gr_metrics_new();
    struct gr_clock *clk = gr_clock_real_new(gr_ctrl_events_put, gr_ctrl_event_free);
    struct gr_ctrl_event_processor proc = {process, preempt, NULL};
    struct gr_ctrl_events *em = gr_ctrl_events_new(1, &proc, clk, NULL);
    struct gr_ctrl_channel_config cc = {.controller_id = 1, .inter_broker_listener = "REPLICATION",
                                        .socket_timeout_ms = 2000, .backoff_ms = 50, .metrics = metrics};
    struct gr_ctrl_channel *ch = gr_ctrl_channel_new(&cc);
    gr_ctrl_channel_ops.startup(ch, em);

    /* broker 1: first endpoint is a dead port, the REPLICATION one is the server */
    int dead_port = free_port();
    struct gr_kzk_endpoint eps[2] = {
        {.listener = (char *)"PLAINTEXT", .security_protocol = (char *)"PLAINTEXT", .host = (char *)"127.0.0.1", .port = dead_port},
        {.listener = (char *)"REPLICATION", .security_protocol = (char *)"PLAINTEXT", .host = (char *)"127.0.0.1", .port = port},
    };
    struct gr_kzk_broker b1 = {.id = 1, .epoch = 4242, .jmx_port = -1, .n_endpoints = 2, .endpoints = eps};
    struct gr_kzk_broker b2 = {.id = 2, .epoch = 77, .jmx_port = -1, .n_endpoints = 1, .endpoints = eps};

    struct gr_ctrl_context ctx;
    gr_ctrl_ctx_init(&ctx);
    ctx.epoch = 3;
    gr_ctrl_ctx_add_live_broker(&ctx, &b1);
    gr_ctrl_ctx_add_live_broker(&ctx, &b2);
    gr_ctrl_channel_ops.add_broker(ch, &b1);
    gr_ctrl_channel_ops.add_broker(ch, &b2);
    int64_t g;
    CHECK(gr_metrics_read_gauge(metrics, "kafka.controller:type=ControllerChannelManager,name=QueueSize,broker-id=1", &g) == 0);

    struct gr_ctrl_sm sm;
    memset(&sm, 0, sizeof sm);
    sm.controller_id = 1;
    sm.ctx = &ctx;
    sm.sender = &gr_ctrl_channel_ops;
    sm.sender_ctx = ch;
    gr_ctrl_sm_init(&sm);

    /* UpdateMetadata (brokers only) to both; broker 1's connection is dropped once first */
    atomic_store(&close_next, 1);
    gr_ctrl_batch_begin(sm.batch);
    gr_ctrl_batch_add_update_metadata_brokers_only(sm.batch);
    gr_ctrl_batch_send(sm.batch);
    pump(em, 1, 5000);
    CHECK(n_events == 1 && ev_api[0] == GR_API_UPDATE_METADATA && ev_broker[0] == 1);
    CHECK(atomic_load(&n_requests[GR_API_UPDATE_METADATA]) == 2); /* retried after the drop */
    CHECK(atomic_load(&last_broker_epoch) == 4242);
    /* broker 2 is down: its request stays with its thread, so the channels are not idle */
    usleep(200000);
    CHECK(n_events == 1);
    CHECK(!gr_ctrl_channel_ops.wait_idle(ch, 100));
    /* a negative timeout is no wait (it used to make tv_nsec negative: EINVAL, and the wait spun forever) */
    CHECK(!gr_ctrl_channel_ops.wait_idle(ch, -999));
    CHECK(gr_metrics_read_gauge(metrics, "kafka.controller:type=ControllerChannelManager,name=TotalQueueSize", &g) == 0 &&
          g == 0);
    /* removal of a broker whose thread is retrying returns promptly */
    int64_t t0 = gr_mono_ms();
    gr_ctrl_channel_ops.remove_broker(ch, 2);
    CHECK(gr_mono_ms() - t0 < 500);
    CHECK(gr_metrics_read_gauge(metrics, "kafka.controller:type=ControllerChannelManager,name=QueueSize,broker-id=2", &g) != 0);
    /* requests to a removed broker are dropped */
    gr_ctrl_batch_begin(sm.batch);
    gr_ctrl_batch_add_update_metadata_brokers_only(sm.batch);
    gr_ctrl_batch_send(sm.batch);
    pump(em, 2, 5000);
    CHECK(n_events == 2 && ev_broker[1] == 1);

    /* several requests keep their order per broker; wait_idle returns once all are answered */
    int before = atomic_load(&n_requests[GR_API_UPDATE_METADATA]);
    for (int i = 0; i < 5; i++) {
        gr_ctrl_batch_begin(sm.batch);
        gr_ctrl_batch_add_update_metadata_brokers_only(sm.batch);
        gr_ctrl_batch_send(sm.batch);
    }
    CHECK(gr_ctrl_channel_ops.wait_idle(ch, 10000));
    CHECK(atomic_load(&n_requests[GR_API_UPDATE_METADATA]) == before + 5 && gr_ctrl_channel_queue_size(ch, -1) == 0);
    pump(em, 7, 5000);
    CHECK(n_events == 7);
    CHECK(gr_ctrl_channel_queue_size(ch, -1) == 0);

    gr_ctrl_sm_release(&sm);
    gr_ctrl_channel_free(ch);
    while (gr_ctrl_events_process_one(em)) {
    }
    gr_ctrl_events_free(em);
    gr_clock_free(clk);
    gr_ctrl_ctx_release(&ctx);
    gr_net_server_free(srv);
    gr_metrics_free(metrics);
    if (test_failures) {
        fprintf(stderr, "test_channel_manager: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_channel_manager: ok\n");
    return 0;
}
