/* The broker's CPU for one all-topics Metadata answer at N partitions (issue 14).
 *
 * Runs a bare broker in this process (network server with one I/O thread, no ZooKeeper, no
 * replica manager), fills its metadata cache with N partitions (topics of P partitions, RF 3 on
 * brokers 1-3, every broker with a PLAINTEXT endpoint) through gr_mdc_update, then sends K
 * all-topics Metadata requests per version over one connection and reads the raw answers.
 *
 * Per version it prints: the answer's size, an FNV-1a hash of the answer after the correlation id
 * (compare it between builds: the bytes must not change), and the broker's CPU per answer = this
 * process's CPU minus the client thread's own CPU (load-independent up to cache effects), plus the
 * encoder alone (the decoded answer encoded again K times on this thread).
 *
 * Usage: bench_metadata [-n N[,N...]] [-p PER_TOPIC] [-k K] [-v V[,V...]]
 *   defaults: -n 30000,100000 -p 100 -k 20 -v 1,9
 * Built by CMake (build/bench/bench_metadata). Prints figures; not a test (exits 1 when an answer does
 * not decode or re-encodes differently). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/apis.h"
#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "common/config.h"
#include "common/log.h"
#include "common/metrics.h"
#include "net/client.h"
#include "net/server.h"
#include "protocol/codec.h"

static double cpu_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* n partitions in topics of per partitions each; replicas rotate over brokers 1-3, broker 3's
 * replica is offline in every 7th partition (so the offline arrays are not all empty). */
static void fill_cache(struct gr_mdc *c, int n, int per)
{
    struct UpdateMetadataRequest_UpdateMetadataEndpoint ep[3] = {
        { 9092, "host1", "PLAINTEXT", 0 }, { 9093, "host2", "PLAINTEXT", 0 },
        { 9094, "host3", "PLAINTEXT", 0 } };
    struct UpdateMetadataRequest_UpdateMetadataBroker brokers[3] = {
        { .Id = 1, .EndpointsCount = 1, .Endpoints = &ep[0], .Rack = "r1" },
        { .Id = 2, .EndpointsCount = 1, .Endpoints = &ep[1], .Rack = NULL },
        { .Id = 3, .EndpointsCount = 1, .Endpoints = &ep[2], .Rack = "r3" } };
    int nt = (n + per - 1) / per;
    struct UpdateMetadataRequest_UpdateMetadataTopicState *ts = calloc((size_t)nt, sizeof *ts);
    struct UpdateMetadataRequest_UpdateMetadataPartitionState *ps = calloc((size_t)n, sizeof *ps);
    int32_t *ids = calloc((size_t)n * 7, sizeof *ids);
    char (*names)[32] = calloc((size_t)nt, 32);
    for (int t = 0; t < nt; t++) {
        snprintf(names[t], 32, "bench-topic-%05d", t);
        ts[t].TopicName = names[t];
        ts[t].PartitionStates = &ps[t * per];
        ts[t].PartitionStatesCount = (t + 1) * per <= n ? per : n - t * per;
    }
    for (int i = 0; i < n; i++) {
        int32_t *r = &ids[(size_t)i * 7];
        for (int k = 0; k < 3; k++)
            r[k] = 1 + (i + k) % 3;
        bool off = i % 7 == 0;
        for (int k = 0, m = 0; k < 3; k++)
            if (!off || r[k] != 3)
                r[3 + m++] = r[k];
        r[6] = 3;
        ps[i] = (struct UpdateMetadataRequest_UpdateMetadataPartitionState){
            .TopicName = names[i / per], .PartitionIndex = i % per, .ControllerEpoch = 1,
            .Leader = r[3], .LeaderEpoch = i % 5, .IsrCount = off ? 2 : 3, .Isr = &r[3],
            .ZkVersion = 0, .ReplicasCount = 3, .Replicas = r,
            .OfflineReplicasCount = off ? 1 : 0, .OfflineReplicas = off ? &r[6] : NULL };
    }
    struct UpdateMetadataRequest rq = { .ControllerId = 1, .ControllerEpoch = 1, .BrokerEpoch = -1,
                                        .TopicStatesCount = nt, .TopicStates = ts,
                                        .LiveBrokersCount = 3, .LiveBrokers = brokers };
    gr_mdc_update(c, 6, &rq, NULL);
    free(ts);
    free(ps);
    free(ids);
    free(names);
}

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (s && *s && n < max) {
        out[n++] = atoi(s);
        s = strchr(s, ',');
        if (s)
            s++;
    }
    return n;
}

static int run_version(struct gr_net_client *cli, int n, int16_t ver, int k, bool print)
{
    struct MetadataRequest rq = { .TopicsCount = ver == 0 ? 0 : -1, .AllowAutoTopicCreation = true };
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    if (gr_proto_encode_request(GR_API_METADATA, ver, 7, "bench", &rq, &w) != 0)
        return -1;
    uint64_t hash = 0;
    size_t size = 0;
    uint8_t *last = NULL;
    double p0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID), t0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < k; i++) {
        uint8_t *resp = NULL;
        size_t len = 0;
        if (gr_net_client_send_recv(cli, w.p, w.len, &resp, &len, 30000) != 0 || len < 4) {
            fprintf(stderr, "send_recv failed\n");
            return -1;
        }
        free(last);
        last = resp;
        size = len;
    }
    double p1 = cpu_s(CLOCK_PROCESS_CPUTIME_ID), t1 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
    hash = fnv1a(last + 4, size - 4);
    /* the encoder alone: decode the last answer, encode it k times on this thread */
    struct gr_arena a;
    gr_arena_init(&a);
    void *body = NULL;
    int32_t corr;
    double enc_ms = -1;
    int bad = 0;
    if (gr_proto_decode_response(GR_API_METADATA, ver, last, size, &a, &corr, &body) != 0) {
        fprintf(stderr, "v%d: the answer does not decode\n", ver);
        bad = 1;
    } else {
        struct gr_req_header hdr = { .RequestApiKey = GR_API_METADATA, .RequestApiVersion = ver,
                                     .CorrelationId = corr };
        double e0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
        for (int i = 0; i < k; i++) {
            struct gr_wbuf out;
            gr_wbuf_init(&out);
            gr_proto_encode_response(&hdr, body, &out);
            if (out.len != size + 4 || memcmp(out.p + 4, last, size) != 0) {
                fprintf(stderr, "v%d: re-encoded answer differs\n", ver);
                bad = 1;
            }
            gr_wbuf_free(&out);
        }
        enc_ms = (cpu_s(CLOCK_THREAD_CPUTIME_ID) - e0) * 1e3 / k;
    }
    gr_arena_free(&a);
    if (print)
        printf("%7d  v%-2d %9zu  %016llx  %8.2f  %8.2f\n", n, ver, size, (unsigned long long)hash,
           ((p1 - p0) - (t1 - t0)) * 1e3 / k, enc_ms);
    free(last);
    gr_wbuf_free(&w);
    return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
    int sizes[8] = { 30000, 100000 }, nsizes = 2, vers[16] = { 1, 9 }, nvers = 2;
    int per = 100, k = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-n") == 0)
            nsizes = parse_list(argv[i + 1], sizes, 8);
        else if (strcmp(argv[i], "-v") == 0)
            nvers = parse_list(argv[i + 1], vers, 16);
        else if (strcmp(argv[i], "-p") == 0)
            per = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-k") == 0)
            k = atoi(argv[i + 1]);
    }
    if (per < 1 || k < 1)
        return 2;
    gr_log_set_level(GR_LOG_ERROR);
    printf("# partitions ver  bytes      fnv1a(answer)     broker_ms  encode_ms  (CPU per answer)\n");
    for (int s = 0; s < nsizes; s++) {
        struct gr_config cfg;
        gr_config_defaults(&cfg);
        cfg.auto_create_topics_enable = false;
        struct gr_broker *b = gr_broker_new(&cfg, 1);
        snprintf(b->cluster_id, sizeof(b->cluster_id), "bench-cluster");
        b->metrics = gr_metrics_new(); /* as gregord: request metrics walk every answer */
        fill_cache(b->metadata, sizes[s], per);
        struct gr_net_listener ls[1] = { { "PLAINTEXT", "127.0.0.1", 0 } };
        struct gr_net_config nc;
        gr_net_config_init(&nc);
        nc.listeners = ls;
        nc.num_listeners = 1;
        nc.num_io_threads = 1;
        struct gr_net_server *srv = NULL;
        struct gr_net_client *cli = NULL;
        if (gr_net_server_new(&nc, gr_apis_dispatch, b, &srv) != 0 || gr_net_server_start(srv) != 0 ||
            gr_net_client_connect("127.0.0.1", gr_net_server_port(srv, 0), 2000, &cli) != 0) {
            fprintf(stderr, "cannot start the broker\n");
            return 2;
        }
        for (int v = 0; v < nvers; v++) {
            run_version(cli, sizes[s], (int16_t)vers[v], 2, false); /* warm-up */
            if (run_version(cli, sizes[s], (int16_t)vers[v], k, true) != 0)
                return 1;
        }
        gr_net_client_close(cli);
        gr_net_server_stop(srv);
        gr_net_server_free(srv);
        struct gr_metrics *reg = b->metrics;
        b->metrics = NULL;
        gr_broker_free(b);
        gr_metrics_free(reg);
        gr_config_release(&cfg);
    }
    return 0;
}
