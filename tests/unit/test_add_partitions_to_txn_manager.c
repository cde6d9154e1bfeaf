/* The KIP-890 check sender (broker/add_partitions_to_txn_manager.h) against a scripted fake
 * coordinator that speaks the real codec: a coordinator serving AddPartitionsToTxn v4 gets the
 * checks of several transactions as v4 VerifyOnly requests (its TRANSACTION_ABORTABLE read as
 * INVALID_TXN_STATE, a transaction missing from the answer INVALID_TXN_STATE, a top-level error
 * for every check); one serving only up to v3 (an older Gregor during a rolling upgrade) one v1
 * request per transaction; one without AddPartitionsToTxn fails the checks (NETWORK_EXCEPTION).
 * The versions are learned with ApiVersions once per connection. A slow but live coordinator
 * (each answer late, yet within the request timeout) cannot hold a check longer than one round:
 * ApiVersions and AddPartitionsToTxn share the round's deadline. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker/add_partitions_to_txn_manager.h"
#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "coordinator/txn_coordinator.h"
#include "coordinator/txn_log.h"
#include "protocol/codec.h"
#include "protocol/messages.h"
#include "replication/replica_manager.h"
#include "support/check.h"

int test_failures;

/* What the fake coordinator serves and answers (set before each case). */
static atomic_int g_max_version;  /* AddPartitionsToTxn maximum in ApiVersions; -1: not listed */
static atomic_int g_partition_err; /* every partition's answer */
static atomic_int g_top_err;      /* v4 top-level ErrorCode */
static atomic_int g_drop_txns;    /* v4: answer no transaction at all */
static atomic_int g_delay_ms;     /* every answer sent this late */
static atomic_int g_api_versions, g_v1, g_v4, g_v4_txns; /* requests seen */
static atomic_int g_stop;
static int g_listen_fd = -1, g_port;

static int read_full(int fd, uint8_t *p, size_t n) {
    size_t off = 0;
    while (off < n) {
        ssize_t r = recv(fd, p + off, n - off, 0);
        if (r <= 0) return -1;
        off += (size_t)r;
    }
    return 0;
}

static void *answer_topics(struct gr_arena *a, const struct AddPartitionsToTxnRequest_AddPartitionsToTxnTopic *in,
                           int32_t n) {
    struct AddPartitionsToTxnResponse_AddPartitionsToTxnTopicResult *out = gr_arena_alloc(a, (size_t)(n + 1) * sizeof *out);
    for (int32_t t = 0; t < n; t++) {
        out[t].Name = in[t].Name;
        out[t].ResultsByPartitionCount = in[t].PartitionsCount;
        out[t].ResultsByPartition =
            gr_arena_alloc(a, (size_t)(in[t].PartitionsCount + 1) * sizeof *out[t].ResultsByPartition);
        for (int32_t i = 0; i < in[t].PartitionsCount; i++) {
            out[t].ResultsByPartition[i].PartitionIndex = in[t].Partitions[i];
            out[t].ResultsByPartition[i].PartitionErrorCode = (int16_t)atomic_load(&g_partition_err);
        }
    }
    return out;
}

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
    struct gr_arena a;
    gr_arena_init(&a);
    struct gr_req_header rh;
    void *body = NULL;
    int ret = gr_proto_decode_request(frame, size, &a, &rh, &body) == 0 ? 0 : -1;
    void *resp = NULL;
    if (ret == 0 && rh.RequestApiKey == GR_API_API_VERSIONS) {
        atomic_fetch_add(&g_api_versions, 1);
        struct ApiVersionsResponse *r = gr_proto_new(&a, &gr_desc_ApiVersionsResponse);
        r->ApiKeys = gr_arena_alloc(&a, 2 * sizeof *r->ApiKeys);
        r->ApiKeysCount = 0;
        r->ApiKeys[r->ApiKeysCount++] = (struct ApiVersionsResponse_ApiVersion){GR_API_API_VERSIONS, 0, 3};
        if (atomic_load(&g_max_version) >= 0)
            r->ApiKeys[r->ApiKeysCount++] =
                (struct ApiVersionsResponse_ApiVersion){GR_API_ADD_PARTITIONS_TO_TXN, 0, (int16_t)atomic_load(&g_max_version)};
        resp = r;
    } else if (ret == 0 && rh.RequestApiKey == GR_API_ADD_PARTITIONS_TO_TXN && rh.RequestApiVersion <= 3) {
        atomic_fetch_add(&g_v1, 1);
        const struct AddPartitionsToTxnRequest *rq = body;
        struct AddPartitionsToTxnResponse *r = gr_proto_new(&a, &gr_desc_AddPartitionsToTxnResponse);
        r->ResultsByTopicV3AndBelowCount = rq->V3AndBelowTopicsCount;
        r->ResultsByTopicV3AndBelow = answer_topics(&a, rq->V3AndBelowTopics, rq->V3AndBelowTopicsCount);
        resp = r;
    } else if (ret == 0 && rh.RequestApiKey == GR_API_ADD_PARTITIONS_TO_TXN) {
        atomic_fetch_add(&g_v4, 1);
        const struct AddPartitionsToTxnRequest *rq = body;
        struct AddPartitionsToTxnResponse *r = gr_proto_new(&a, &gr_desc_AddPartitionsToTxnResponse);
        r->ErrorCode = (int16_t)atomic_load(&g_top_err);
        int32_t nt = atomic_load(&g_drop_txns) || r->ErrorCode ? 0 : rq->TransactionsCount;
        r->ResultsByTransactionCount = nt;
        r->ResultsByTransaction = gr_arena_alloc(&a, (size_t)(nt + 1) * sizeof *r->ResultsByTransaction);
        for (int32_t x = 0; x < rq->TransactionsCount; x++) {
            CHECK(rq->Transactions[x].VerifyOnly);
            atomic_fetch_add(&g_v4_txns, 1);
        }
        for (int32_t x = 0; x < nt; x++) {
            r->ResultsByTransaction[x].TransactionalId = rq->Transactions[x].TransactionalId;
            r->ResultsByTransaction[x].TopicResultsCount = rq->Transactions[x].TopicsCount;
            r->ResultsByTransaction[x].TopicResults =
                answer_topics(&a, rq->Transactions[x].Topics, rq->Transactions[x].TopicsCount);
        }
        resp = r;
    } else {
        ret = -1;
    }
    if (resp && atomic_load(&g_delay_ms) > 0) usleep((useconds_t)atomic_load(&g_delay_ms) * 1000);
    if (resp) {
        struct gr_wbuf w;
        gr_wbuf_init(&w);
        if (gr_proto_encode_response(&rh, resp, &w) != 0 || send(fd, w.p, w.len, MSG_NOSIGNAL) != (ssize_t)w.len)
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
        while (!atomic_load(&g_stop) && serve_one(fd) == 0) {
        }
        close(fd);
    }
    return NULL;
}

static void start_listener(void) {
    g_listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(g_listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0) abort();
    socklen_t sl = sizeof sa;
    getsockname(g_listen_fd, (struct sockaddr *)&sa, &sl);
    g_port = ntohs(sa.sin_port);
    listen(g_listen_fd, 8);
}

/* ---- the broker side ---- */

struct answer {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int answered;
    int16_t err[4];
};

static void on_answer(void *ctx, const int16_t *errors, int n) {
    struct answer *a = ctx;
    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < n && i < 4; i++) a->err[i] = errors[i];
    a->answered++;
    pthread_cond_broadcast(&a->cond);
    pthread_mutex_unlock(&a->mu);
}

static bool wait_answered(struct answer *a, int n) {
    struct timespec ts = gr_timespec_after_ms(CLOCK_REALTIME, 15000);
    pthread_mutex_lock(&a->mu);
    while (a->answered < n && pthread_cond_timedwait(&a->cond, &a->mu, &ts) == 0) {
    }
    bool ok = a->answered >= n;
    pthread_mutex_unlock(&a->mu);
    return ok;
}

static const char *const TOPICS[2] = {"t", "t"};
static const int32_t PARTS[2] = {0, 1};

/* Checks of n transactions (ids tx-0..), two partitions each, through a new manager (a new
 * connection, so ApiVersions again); answers[i] gets transaction i's errors. */
static void run_checks(struct gr_broker *b, int n, struct answer *answers) {
    struct gr_aptm *m = gr_aptm_new(b);
    for (int i = 0; i < n; i++) {
        pthread_mutex_init(&answers[i].mu, NULL);
        pthread_cond_init(&answers[i].cond, NULL);
        answers[i].answered = 0;
        char id[16];
        snprintf(id, sizeof id, "tx-%d", i);
        gr_aptm_verify(m, b, id, 100 + i, 0, TOPICS, PARTS, 2, on_answer, &answers[i]);
    }
    for (int i = 0; i < n; i++) CHECK(wait_answered(&answers[i], 1));
    gr_aptm_free(m);
    for (int i = 0; i < n; i++) {
        pthread_mutex_destroy(&answers[i].mu);
        pthread_cond_destroy(&answers[i].cond);
    }
}

static void reset(int max_version, int16_t partition_err) {
    atomic_store(&g_max_version, max_version);
    atomic_store(&g_partition_err, partition_err);
    atomic_store(&g_top_err, 0);
    atomic_store(&g_drop_txns, 0);
    atomic_store(&g_delay_ms, 0);
    atomic_store(&g_api_versions, 0);
    atomic_store(&g_v1, 0);
    atomic_store(&g_v4, 0);
    atomic_store(&g_v4_txns, 0);
}

static void test_v4_coordinator(struct gr_broker *b) {
    struct answer ans[3];
    reset(5, GR_KERR_NONE);
    run_checks(b, 3, ans);
    CHECK(atomic_load(&g_api_versions) == 1); /* once per connection */
    CHECK(atomic_load(&g_v1) == 0 && atomic_load(&g_v4) >= 1 && atomic_load(&g_v4) <= 3);
    CHECK(atomic_load(&g_v4_txns) == 3);
    for (int i = 0; i < 3; i++) CHECK(ans[i].err[0] == GR_KERR_NONE && ans[i].err[1] == GR_KERR_NONE);

    reset(4, GR_KERR_TRANSACTION_ABORTABLE); /* not part of the transaction, in v4's words */
    run_checks(b, 2, ans);
    for (int i = 0; i < 2; i++) CHECK(ans[i].err[0] == GR_KERR_INVALID_TXN_STATE && ans[i].err[1] == GR_KERR_INVALID_TXN_STATE);

    reset(4, GR_KERR_NONE); /* a transaction the answer leaves out is not verified */
    atomic_store(&g_drop_txns, 1);
    run_checks(b, 1, ans);
    CHECK(ans[0].err[0] == GR_KERR_INVALID_TXN_STATE && ans[0].err[1] == GR_KERR_INVALID_TXN_STATE);

    reset(4, GR_KERR_NONE); /* a top-level error answers every check */
    atomic_store(&g_top_err, GR_KERR_CLUSTER_AUTHORIZATION_FAILED);
    run_checks(b, 2, ans);
    for (int i = 0; i < 2; i++)
        CHECK(ans[i].err[0] == GR_KERR_CLUSTER_AUTHORIZATION_FAILED && ans[i].err[1] == GR_KERR_CLUSTER_AUTHORIZATION_FAILED);
}

static void test_older_coordinator(struct gr_broker *b) {
    struct answer ans[3];
    reset(3, GR_KERR_NONE); /* a Gregor before the batched form */
    run_checks(b, 3, ans);
    CHECK(atomic_load(&g_v4) == 0 && atomic_load(&g_v1) == 3); /* one per transaction */
    for (int i = 0; i < 3; i++) CHECK(ans[i].err[0] == GR_KERR_NONE && ans[i].err[1] == GR_KERR_NONE);

    reset(3, GR_KERR_INVALID_TXN_STATE);
    run_checks(b, 1, ans);
    CHECK(ans[0].err[0] == GR_KERR_INVALID_TXN_STATE);

    reset(-1, GR_KERR_NONE); /* no AddPartitionsToTxn at all: nothing sent, the checks fail */
    run_checks(b, 2, ans);
    CHECK(atomic_load(&g_v1) == 0 && atomic_load(&g_v4) == 0);
    for (int i = 0; i < 2; i++) CHECK(ans[i].err[0] == GR_KERR_NETWORK_EXCEPTION);
}

/* A coordinator that answers each request after 70% of the round: ApiVersions and then
 * AddPartitionsToTxn each come within the timeout, but not both within one round. The check
 * fails (NETWORK_EXCEPTION) once the round's time is spent, instead of being answered after
 * twice the timeout. Load only makes the answers later, so the outcome does not depend on it. */
static void test_slow_coordinator(struct gr_broker *b, struct gr_config *cfg) { /* cfg: b's */
    int32_t saved = cfg->request_timeout_ms;
    cfg->request_timeout_ms = 1000; /* the round's deadline (below GR_APTM_REQUEST_TIMEOUT_MS) */
    CHECK(gr_aptm_round_timeout_ms(b->cfg) == 1000);
    struct answer ans[1];
    reset(4, GR_KERR_NONE);
    atomic_store(&g_delay_ms, 700);
    run_checks(b, 1, ans);
    CHECK(atomic_load(&g_api_versions) == 1);
    CHECK(ans[0].err[0] == GR_KERR_NETWORK_EXCEPTION && ans[0].err[1] == GR_KERR_NETWORK_EXCEPTION);
    cfg->request_timeout_ms = saved;
    /* the default and a larger request.timeout.ms give GR_APTM_REQUEST_TIMEOUT_MS */
    CHECK(gr_aptm_round_timeout_ms(NULL) == GR_APTM_REQUEST_TIMEOUT_MS);
    CHECK(gr_aptm_round_timeout_ms(b->cfg) == GR_APTM_REQUEST_TIMEOUT_MS);
    atomic_store(&g_delay_ms, 0);
}

int main(void) {
    gr_log_set_level(GR_LOG_ERROR);
    start_listener();
    pthread_t srv;
    pthread_create(&srv, NULL, server_main, NULL);

    struct gr_config cfg;
    gr_config_defaults(&cfg);
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/gr-test-aptm-%d", (int)getpid());
    free(cfg.log_dirs[0]);
    cfg.log_dirs[0] = gr_strdup(dir);
    cfg.num_log_dirs = 1;
    struct gr_broker *b = gr_broker_new(&cfg, 1);
    struct gr_replica_manager *rm = NULL;
    CHECK(gr_replica_manager_new(b, &rm) == 0); /* hosts nothing: the coordinator leads no partition */
    struct gr_txn_config tcfg = {.num_partitions = 50, .max_timeout_ms = 900000, .id_expiration_ms = 604800000,
                                 .abort_interval_ms = 10000, .remove_expired_interval_ms = 3600000};
    CHECK(gr_txn_coordinator_start(b, rm, &tcfg) == 0); /* coordinates nothing: every id is remote */
    /* every partition of __transaction_state led by broker 2, the fake coordinator */
    typedef struct UpdateMetadataRequest_UpdateMetadataPartitionState ps_t;
    typedef struct UpdateMetadataRequest_UpdateMetadataTopicState ts_t;
    int32_t r2[1] = {2};
    ps_t parts[50];
    for (int i = 0; i < 50; i++)
        parts[i] = (ps_t){.PartitionIndex = i, .ControllerEpoch = 1, .Leader = 2, .LeaderEpoch = 0, .IsrCount = 1,
                          .Isr = r2, .ReplicasCount = 1, .Replicas = r2};
    ts_t topics[1] = {{.TopicName = GR_TXN_TOPIC, .PartitionStatesCount = 50, .PartitionStates = parts}};
    struct UpdateMetadataRequest_UpdateMetadataEndpoint ep = {g_port, "127.0.0.1", "PLAINTEXT", 0};
    struct UpdateMetadataRequest_UpdateMetadataBroker broker = {.Id = 2, .EndpointsCount = 1, .Endpoints = &ep};
    struct UpdateMetadataRequest req = {.ControllerId = 2, .ControllerEpoch = 1, .BrokerEpoch = -1,
                                        .TopicStatesCount = 1, .TopicStates = topics, .LiveBrokersCount = 1,
                                        .LiveBrokers = &broker};
    gr_mdc_update(b->metadata, 6, &req, NULL);

    test_v4_coordinator(b);
    test_older_coordinator(b);
    test_slow_coordinator(b, &cfg);

    gr_txn_coordinator_free(b->txn_coordinator);
    b->txn_coordinator = NULL;
    gr_replica_manager_shutdown(rm);
    gr_replica_manager_free(rm);
    gr_broker_free(b);
    gr_config_release(&cfg);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    atomic_store(&g_stop, 1);
    shutdown(g_listen_fd, SHUT_RDWR);
    close(g_listen_fd);
    pthread_join(srv, NULL);
    if (test_failures) {
        fprintf(stderr, "test_add_partitions_to_txn_manager: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_add_partitions_to_txn_manager: ok\n");
    return 0;
}
