/* The controller's CPU for the replica state machine's start-up at failover (issue 14): the step
 * between "states read" and "replicas offline" in bench_election.py's timeline, without ZooKeeper.
 *
 * Fills a controller context with N partitions (topics of P partitions, RF 3 on brokers 101-103,
 * all registered, every partition with a leader and a full ISR -- bench_election.py's --replicas
 * fake), then runs gr_rsm_startup_init + gr_rsm_startup_online K times (every replica Online -> Online: three LeaderAndIsr of
 * N partitions and UpdateMetadata to the three brokers) against a sender that keeps the requests.
 *
 * Per run it prints the thread CPU and wall time of that (building and handing over the
 * requests; the state-change lines go to /dev/null), and once an FNV-1a hash of every request
 * encoded, in the order sent (compare it between builds: the bytes must not change). Run it under
 * `valgrind --tool=callgrind` for instruction counts.
 *
 * Usage: bench_ctrl_startup [-n N] [-p PER_TOPIC] [-k K]     defaults: -n 100000 -p 100 -k 5
 * Built by CMake (build/bench/bench_ctrl_startup). Prints figures; not a test (exits 1 when a
 * start-up fails or sends nothing). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "controller/context.h"
#include "controller/event_manager.h"
#include "controller/replica_sm.h"
#include "controller/request_batch.h"
#include "controller/sender.h"
#include "controller/states.h"
#include "protocol/codec.h"

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct kept {
    int32_t broker;
    int16_t api_key, ver;
    void *req;
    void (*req_free)(void *);
};
static struct kept kept[64];
static int n_kept;

static void ks_startup(void *c, struct gr_ctrl_events *em) { (void)c, (void)em; }
static void ks_shutdown(void *c) { (void)c; }
static void ks_add(void *c, const struct gr_kzk_broker *b) { (void)c, (void)b; }
static void ks_remove(void *c, int32_t id) { (void)c, (void)id; }
static void ks_send(void *c, int32_t broker, int16_t api_key, int16_t ver, void *req, void (*req_free)(void *),
                    struct gr_ctrl_event *ev) {
    (void)c;
    gr_ctrl_event_free(ev);
    if (n_kept == 64) {
        req_free(req);
        return;
    }
    kept[n_kept++] = (struct kept){broker, api_key, ver, req, req_free};
}
static const struct gr_ctrl_sender_ops keep_ops = {ks_startup, ks_shutdown, ks_add, ks_remove, ks_send, NULL};

static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Hash of the kept requests encoded (order included); frees them. */
static uint64_t drain(int *n_out) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n_kept; i++) {
        struct gr_wbuf w;
        gr_wbuf_init(&w);
        if (gr_proto_encode_request(kept[i].api_key, kept[i].ver, 1, "c", kept[i].req, &w) != 0) {
            fprintf(stderr, "encoding request %d failed\n", i);
            exit(1);
        }
        int32_t hdr[2] = {kept[i].broker, kept[i].api_key};
        h = fnv1a(h, (const uint8_t *)hdr, sizeof hdr);
        h = fnv1a(h, w.p, w.len);
        gr_wbuf_free(&w);
        kept[i].req_free(kept[i].req);
    }
    *n_out = n_kept;
    n_kept = 0;
    return h;
}

static void fill(struct gr_ctrl_context *ctx, int n, int per_topic) {
    static struct gr_kzk_endpoint ep[3];
    for (int b = 0; b < 3; b++) {
        ep[b] = (struct gr_kzk_endpoint){.listener = (char *)"PLAINTEXT", .security_protocol = (char *)"PLAINTEXT",
                                         .host = (char *)"127.0.0.1", .port = 9101 + b};
        struct gr_kzk_broker br = {.id = 101 + b, .epoch = 1000 + b, .jmx_port = -1, .n_endpoints = 1, .endpoints = &ep[b]};
        gr_ctrl_ctx_add_live_broker(ctx, &br);
    }
    for (int t = 0; t * per_topic < n; t++) {
        char name[32];
        snprintf(name, sizeof name, "bench-%05d", t);
        int np = n - t * per_topic < per_topic ? n - t * per_topic : per_topic;
        struct gr_kzk_topic_assignment a = {.topic = name, .n_partitions = np};
        a.partitions = gr_calloc((size_t)np, sizeof *a.partitions);
        for (int i = 0; i < np; i++) {
            a.partitions[i].partition = i;
            a.partitions[i].n_replicas = 3;
            a.partitions[i].replicas = gr_malloc(3 * sizeof(int32_t));
            for (int r = 0; r < 3; r++) a.partitions[i].replicas[r] = 101 + (t * per_topic + i + r) % 3;
        }
        gr_ctrl_ctx_put_topic(ctx, &a); /* takes the replica arrays */
        for (int i = 0; i < np; i++) {
            struct gr_ctrl_partition *p = gr_ctrl_ctx_partition(ctx, name, i);
            int32_t isr[3];
            memcpy(isr, p->replicas, sizeof isr);
            struct gr_kzk_leader_and_isr l = {.leader = isr[0], .leader_epoch = 0, .controller_epoch = 1, .n_isr = 3,
                                              .isr = isr, .zk_version = 0};
            gr_ctrl_partition_set_state(p, &l);
        }
        a.topic = NULL;
        gr_kzk_topic_assignment_release(&a);
    }
}

int main(int argc, char **argv) {
    int n = 100000, per_topic = 100, k = 5, opt;
    while ((opt = getopt(argc, argv, "n:p:k:")) != -1) {
        if (opt == 'n') n = atoi(optarg);
        else if (opt == 'p') per_topic = atoi(optarg);
        else if (opt == 'k') k = atoi(optarg);
        else {
            fprintf(stderr, "usage: %s [-n N] [-p PER_TOPIC] [-k K]\n", argv[0]);
            return 2;
        }
    }
    if (n < 1 || per_topic < 1 || k < 1) return 2;
    gr_log_open("/dev/null");
    struct gr_ctrl_context ctx;
    gr_ctrl_ctx_init(&ctx);
    ctx.epoch = 2;
    ctx.epoch_zk_version = 1;
    fill(&ctx, n, per_topic);
    struct gr_ctrl_sm sm;
    memset(&sm, 0, sizeof sm);
    sm.controller_id = 1;
    sm.ctx = &ctx;
    sm.sender = &keep_ops;
    gr_ctrl_sm_init(&sm);
    printf("gr_rsm_startup_init + _online, %d partitions (%d per topic), 3 registered brokers, every replica online\n", n, per_topic);
    double best = 1e9;
    int status = 0;
    for (int i = 0; i < k; i++) {
        double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
        struct gr_ctrl_replica_list offline = {0}; /* none: every replica is online */
        gr_rsm_startup_init(&sm, &offline);
        int rc = gr_rsm_startup_online(&sm);
        gr_ctrl_replica_list_free(&offline);
        double c1 = clock_s(CLOCK_THREAD_CPUTIME_ID), w1 = clock_s(CLOCK_MONOTONIC);
        int n_req;
        uint64_t h = drain(&n_req);
        printf("  run %d: rc %d, thread CPU %.1f ms, wall %.1f ms, %d requests, hash %016llx\n", i + 1, rc,
               (c1 - c0) * 1e3, (w1 - w0) * 1e3, n_req, (unsigned long long)h);
        if (c1 - c0 < best) best = c1 - c0;
        if (rc != 0 || n_req == 0) status = 1; /* a failed start-up, or nothing sent */
    }
    printf("  best thread CPU %.1f ms\n", best * 1e3);
    gr_ctrl_sm_release(&sm);
    gr_ctrl_ctx_release(&ctx);
    return status;
}
