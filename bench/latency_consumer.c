/* latency_consumer: the consuming side of bench_produce.py's produce -> consume latency.
 *
 *   build/bench/latency_consumer BOOTSTRAP TOPIC PARTITIONS [READY_MS]
 *
 * A librdkafka consumer assigned at the end of partitions 0..PARTITIONS-1 (fetch.wait.max.ms 500:
 * long polls), in its own process so that the producing Python process and its GIL are not part
 * of what is measured, and in C, taking whatever is queued in one call, so that working through a
 * burst's records costs well under a microsecond each. It prints "ready" once its first fetches have had READY_MS
 * (default 1500; bench_produce.py --smoke gives less) and a fetch answer has come for every partition, then notes
 * CLOCK_MONOTONIC (the clock of Python's time.perf_counter(), shared by every process) for each
 * record that has a key. When a number N arrives on stdin it keeps polling until it holds N
 * distinct keys (or 10 s passed), prints "KEY NANOSECONDS" per key and exits. Records without a
 * key (the bursts) are only consumed. Errors go to stderr; the exit code is 1 on a bad start. */
#include <librdkafka/rdkafka.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct seen {
    char *key;
    int64_t ns;
};

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static rd_kafka_t *make_consumer(const char *bootstrap) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *kv[][2] = {{"bootstrap.servers", bootstrap}, {"group.id", "lat"},
                           {"enable.auto.commit", "false"}, {"auto.offset.reset", "latest"},
                           {"log_level", "3"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (rd_kafka_conf_set(conf, kv[i][0], kv[i][1], err, sizeof err) != RD_KAFKA_CONF_OK) {
            fprintf(stderr, "latency_consumer: %s\n", err);
            return NULL;
        }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) fprintf(stderr, "latency_consumer: %s\n", err);
    return rk;
}

/* Reads the expected count once stdin has it (non-blocking); -1 until then. */
static long read_expected(void) {
    struct pollfd p = {.fd = 0, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0) return -1;
    char line[64];
    if (!fgets(line, sizeof line, stdin)) return 0; /* EOF: stop now */
    return strtol(line, NULL, 10);
}

static int find_key(const struct seen *v, size_t n, const char *k, size_t klen) {
    for (size_t i = n; i-- > 0;)
        if (strlen(v[i].key) == klen && memcmp(v[i].key, k, klen) == 0) return (int)i;
    return -1;
}

/* Whether a fetch answer has arrived for every assigned partition (its cached high watermark is
 * known): fetching starts once OFFSET_END is resolved, so a record produced after that is consumed. */
static int positions_known(rd_kafka_t *rk, const char *topic, int nparts) {
    for (int i = 0; i < nparts; i++) {
        int64_t lo = -1, hi = -1;
        if (rd_kafka_get_watermark_offsets(rk, topic, i, &lo, &hi) != RD_KAFKA_RESP_ERR_NO_ERROR || hi < 0)
            return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s BOOTSTRAP TOPIC PARTITIONS [READY_MS]\n", argv[0]);
        return 1;
    }
    int nparts = atoi(argv[3]);
    long ready_ms = argc == 5 ? atol(argv[4]) : 1500;
    rd_kafka_t *rk = make_consumer(argv[1]);
    if (!rk || nparts <= 0) return 1;
    rd_kafka_topic_partition_list_t *tl = rd_kafka_topic_partition_list_new(nparts);
    for (int i = 0; i < nparts; i++) rd_kafka_topic_partition_list_add(tl, argv[2], i)->offset = RD_KAFKA_OFFSET_END;
    rd_kafka_resp_err_t e = rd_kafka_assign(rk, tl);
    rd_kafka_topic_partition_list_destroy(tl);
    if (e) {
        fprintf(stderr, "latency_consumer: assign: %s\n", rd_kafka_err2str(e));
        return 1;
    }
    size_t n = 0, cap = 1024;
    struct seen *v = malloc(cap * sizeof *v);
    int64_t ready_at = mono_ns() + ready_ms * 1000000LL, deadline = 0;
    long want = -1;
    rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(rk);
    rd_kafka_message_t *batch[4096];
    while (v && q && (want < 0 || (long)n < want)) {
        /* What is queued, in one call (a burst's records cost well under a microsecond each);
         * when nothing is, one long poll. */
        ssize_t got = rd_kafka_consume_batch_queue(q, 0, batch, sizeof batch / sizeof batch[0]);
        if (got <= 0) {
            batch[0] = rd_kafka_consumer_poll(rk, 50);
            got = batch[0] ? 1 : 0;
        }
        int64_t now = mono_ns();
        for (ssize_t i = 0; i < got; i++) {
            rd_kafka_message_t *m = batch[i];
            if (v && !m->err && m->key && find_key(v, n, m->key, m->key_len) < 0) {
                if (n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
                if (v) v[n++] = (struct seen){.key = strndup(m->key, m->key_len), .ns = now};
            }
            rd_kafka_message_destroy(m);
        }
        if (ready_at && now >= ready_at && positions_known(rk, argv[2], nparts)) {
            printf("ready\n");
            fflush(stdout);
            ready_at = 0;
        }
        if (want < 0 && !ready_at && (want = read_expected()) >= 0) deadline = now + 10000000000LL;
        if (want >= 0 && now > deadline) break;
    }
    if (q) rd_kafka_queue_destroy(q);
    if (!v) return 1;
    for (size_t i = 0; i < n; i++) printf("%s %lld\n", v[i].key, (long long)v[i].ns);
    fflush(stdout);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    for (size_t i = 0; i < n; i++) free(v[i].key);
    free(v);
    return 0;
}
