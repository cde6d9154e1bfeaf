/* gregorctl transactions list | describe | describe-producers | abort | find-hanging
 * (Kafka 3.9's kafka-transactions.sh, tools/.../TransactionsCommand.java; KIP-664).
 *
 * Output is Kafka's: a table (ToolsUtils.prettyPrintTable: every cell padded to its column's
 * widest value and followed by a tab) with Kafka's headers and values ("None" for an absent
 * start offset or start time); errors go to stderr as "<what failed>: <the exception's
 * message>. Enable debug logging for additional detail." and exit 1; usage errors exit 2.
 *
 *   list [--duration-filter MS]      ListTransactions v1 to every broker (Kafka's allByBrokerId)
 *   describe --transactional-id ID   FindCoordinator (transaction) + DescribeTransactions
 *   describe-producers --topic T --partition P [--broker-id B]
 *                                    DescribeProducers at the leader (or at broker B's replica)
 *   abort --topic T --partition P (--start-offset O | --producer-id I --producer-epoch E
 *         --coordinator-epoch C)     KIP-664's abort: DescribeProducers finds the producer whose
 *                                    open transaction starts at O; WriteTxnMarkers v0 (ABORT,
 *                                    that producer id and epoch, coordinator epoch max(its, 0))
 *                                    to the partition's leader
 *   find-hanging (--broker-id B | --topic T [--partition P]) [--max-transaction-timeout MIN]
 *                                    open transactions (DescribeProducers) whose last write is
 *                                    older than MIN minutes (15) and whose transactional id is
 *                                    unknown (ListTransactions by producer id on every broker) or
 *                                    whose coordinator does not list the partition
 *                                    (DescribeTransactions): Kafka's FindHangingTransactionsCommand
 *
 * Every request goes through the CLI's one Kafka client (ctl_kafka.h -> net/kafka_client.c), one
 * connection per broker asked. Single-threaded; memory is the cluster's metadata plus the
 * answers, each bounded by the broker's response sizes. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/ctl.h"
#include "cmd/ctl_kafka.h"
#include "cmd/ctl_print.h"
#include "common/kerr.h"
#include "common/util.h"
#include "protocol/messages.h"

#define MAX_BATCH 500 /* Kafka's FindHangingTransactionsCommand.MAX_BATCH_SIZE */

static int usage(void) {
    fprintf(stderr,
            "usage: gregorctl --bootstrap-server HOST:PORT transactions\n"
            "    list [--duration-filter MS]\n"
            "  | describe --transactional-id ID\n"
            "  | describe-producers --topic T --partition P [--broker-id B]\n"
            "  | abort --topic T --partition P (--start-offset O | --producer-id I --producer-epoch E "
            "--coordinator-epoch C)\n"
            "  | find-hanging (--broker-id B | --topic T [--partition P]) [--max-transaction-timeout MINUTES]\n");
    return 2;
}

/* Kafka's printErrorAndExit(message, cause). */
static int fail(const char *what, int16_t code, const char *server_msg) {
    const char *msg = server_msg && *server_msg ? server_msg : ctl_java_message(code);
    fprintf(stderr, "%s: %s. Enable debug logging for additional detail.\n", what, msg ? msg : gr_kerr_name(code));
    return 1;
}

static int fail_msg(const char *what, const char *msg) {
    fprintf(stderr, "%s: %s. Enable debug logging for additional detail.\n", what, msg);
    return 1;
}

/* The exception message Kafka 3.9's admin client gives a DescribeProducers partition error
 * (DescribeProducersHandler.handlePartitionError). Where Kafka retries until its timeout
 * (NOT_LEADER_OR_FOLLOWER without --broker-id, UNKNOWN_TOPIC_OR_PARTITION) the error is printed
 * at once with the broker's message. */
static int fail_dp(const char *what, const char *topic, int32_t partition, int32_t broker_id,
                   const struct DescribeProducersResponse_PartitionResponse *pr) {
    char m[1024];
    const char *sm = pr->ErrorMessage && *pr->ErrorMessage ? pr->ErrorMessage : ctl_java_message(pr->ErrorCode);
    if (!sm) sm = gr_kerr_name(pr->ErrorCode);
    switch (pr->ErrorCode) {
    case GR_KERR_NOT_LEADER_OR_FOLLOWER:
        if (broker_id >= 0) {
            snprintf(m, sizeof m, "Failed to describe active producers for partition %s-%d on brokerId %d", topic,
                     partition, broker_id);
            return fail_msg(what, m);
        }
        return fail_msg(what, sm);
    case GR_KERR_UNKNOWN_TOPIC_OR_PARTITION:
    case GR_KERR_NETWORK_EXCEPTION: return fail_msg(what, sm);
    case GR_KERR_INVALID_TOPIC_EXCEPTION:
        snprintf(m, sizeof m, "Failed to fetch metadata for partition %s-%d due to invalid topic error: %s", topic,
                 partition, sm);
        return fail_msg(what, m);
    case GR_KERR_TOPIC_AUTHORIZATION_FAILED:
        snprintf(m, sizeof m,
                 "Failed to describe active producers for partition %s-%d due to authorization failure on topic `%s`",
                 topic, partition, topic);
        return fail_msg(what, m);
    default:
        snprintf(m, sizeof m, "Failed to describe active producers for partition %s-%d due to unexpected error", topic,
                 partition);
        return fail_msg(what, m);
    }
}

/* ---- a table as ToolsUtils.prettyPrintTable prints it ---- */

struct table {
    int ncols, nrows, cap;
    char **cells; /* row-major, row 0 = headers; malloc'd */
};

static void table_init(struct table *t, const char *const *headers, int ncols) {
    memset(t, 0, sizeof *t);
    t->ncols = ncols;
    t->cells = gr_calloc((size_t)ncols, sizeof *t->cells);
    t->cap = 1;
    t->nrows = 1;
    for (int i = 0; i < ncols; i++) t->cells[i] = gr_strdup(headers[i]);
}

static void table_add(struct table *t, char **row) {
    if (t->nrows == t->cap) {
        t->cap *= 2;
        t->cells = gr_realloc(t->cells, (size_t)t->cap * (size_t)t->ncols * sizeof *t->cells);
    }
    for (int i = 0; i < t->ncols; i++) t->cells[t->nrows * t->ncols + i] = row[i];
    t->nrows++;
}

static void table_print_free(struct table *t) {
    size_t *w = gr_calloc((size_t)t->ncols, sizeof *w);
    for (int r = 0; r < t->nrows; r++)
        for (int c = 0; c < t->ncols; c++) w[c] = GR_MAX(w[c], strlen(t->cells[r * t->ncols + c]));
    for (int r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) printf("%-*s\t", (int)w[c], t->cells[r * t->ncols + c]);
        printf("\n");
    }
    for (int i = 0; i < t->nrows * t->ncols; i++) free(t->cells[i]);
    free(t->cells);
    free(w);
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    char *s = NULL;
    if (vasprintf(&s, f, ap) < 0) s = NULL;
    va_end(ap);
    if (!s) abort();
    return s;
}

/* ---- the cluster: brokers and partitions from Metadata ---- */

struct cluster {
    struct gr_arena ar;
    struct MetadataResponse *md;
    int timeout_ms;
};

static int cluster_load(const struct ctl_opts *o, const char *const *topics, int n, struct cluster *c) {
    gr_arena_init(&c->ar);
    c->timeout_ms = o->timeout_ms;
    struct ctl_kafka boot;
    if (ctl_kafka_connect_str(o->bootstrap_server, o->timeout_ms, &boot) != 0) return -1;
    c->md = ctl_kafka_metadata(&boot, topics, n, &c->ar);
    ctl_kafka_close(&boot);
    return c->md ? 0 : -1;
}

static void cluster_free(struct cluster *c) { gr_arena_free(&c->ar); }

static const struct MetadataResponse_MetadataResponseTopic *md_topic(const struct cluster *c, const char *topic) {
    for (int t = 0; t < c->md->TopicsCount; t++)
        if (c->md->Topics[t].Name && strcmp(c->md->Topics[t].Name, topic) == 0) return &c->md->Topics[t];
    return NULL;
}

static const struct MetadataResponse_MetadataResponsePartition *md_partition(const struct cluster *c,
                                                                            const char *topic, int32_t p) {
    const struct MetadataResponse_MetadataResponseTopic *mt = md_topic(c, topic);
    for (int i = 0; mt && i < mt->PartitionsCount; i++)
        if (mt->Partitions[i].PartitionIndex == p) return &mt->Partitions[i];
    return NULL;
}

/* Sends one request to broker id (a fresh connection); the answer lives in a. NULL: the broker
 * is unknown or did not answer (printed). */
static void *call_broker(const struct cluster *c, int32_t id, int16_t api, int16_t ver, const void *body,
                         struct gr_arena *a) {
    for (int b = 0; b < c->md->BrokersCount; b++) {
        if (c->md->Brokers[b].NodeId != id) continue;
        struct ctl_kafka k;
        if (ctl_kafka_connect(c->md->Brokers[b].Host, c->md->Brokers[b].Port, c->timeout_ms, &k) != 0) return NULL;
        void *r = ctl_kafka_call(&k, api, ver, body, a);
        ctl_kafka_close(&k);
        return r;
    }
    fprintf(stderr, "gregorctl transactions: broker %d is not in the cluster's metadata\n", id);
    return NULL;
}

/* ---- DescribeProducers ---- */

struct tp {
    const char *topic;
    int32_t partition;
    int32_t broker; /* where to ask */
};

/* DescribeProducers of parts[0..n) (all asked of parts[i].broker) into out[i] (NULL on a
 * network failure; the partition responses live in a). */
static void describe_producers(const struct cluster *c, const struct tp *parts, int n,
                              const struct DescribeProducersResponse_PartitionResponse **out, struct gr_arena *a) {
    for (int i = 0; i < n; i++) out[i] = NULL;
    for (int i = 0; i < n; i++) {
        if (out[i]) continue;
        /* one request per broker and batch: the partitions of parts[i].broker not yet asked */
        struct DescribeProducersRequest rq;
        gr_proto_init_struct(&gr_desc_DescribeProducersRequest, &rq);
        rq.Topics = gr_arena_alloc(a, (size_t)MAX_BATCH * sizeof *rq.Topics);
        rq.TopicsCount = 0;
        int *idx = gr_arena_alloc(a, (size_t)MAX_BATCH * sizeof *idx), k = 0;
        for (int j = i; j < n && k < MAX_BATCH; j++) {
            if (out[j] || parts[j].broker != parts[i].broker) continue;
            bool dup = false;
            for (int q = 0; q < k && !dup; q++)
                dup = strcmp(parts[idx[q]].topic, parts[j].topic) == 0 && parts[idx[q]].partition == parts[j].partition;
            if (dup) continue;
            idx[k++] = j;
            struct DescribeProducersRequest_TopicRequest *t = &rq.Topics[rq.TopicsCount++];
            t->Name = (char *)parts[j].topic;
            t->PartitionIndexesCount = 1;
            t->PartitionIndexes = gr_arena_alloc(a, sizeof(int32_t));
            t->PartitionIndexes[0] = parts[j].partition;
        }
        struct DescribeProducersResponse *r = call_broker(c, parts[i].broker, GR_API_DESCRIBE_PRODUCERS, 0, &rq, a);
        static const struct DescribeProducersResponse_PartitionResponse none = {.ErrorCode = GR_KERR_NETWORK_EXCEPTION};
        for (int q = 0; q < k; q++) {
            const struct tp *want = &parts[idx[q]];
            out[idx[q]] = &none;
            for (int t = 0; r && t < r->TopicsCount; t++)
                for (int p = 0; p < r->Topics[t].PartitionsCount; p++)
                    if (strcmp(r->Topics[t].Name, want->topic) == 0 &&
                        r->Topics[t].Partitions[p].PartitionIndex == want->partition)
                        out[idx[q]] = &r->Topics[t].Partitions[p];
        }
        /* the same partition named twice shares the answer */
        for (int j = i; j < n; j++)
            for (int q = 0; q < k && !out[j]; q++)
                if (parts[j].broker == parts[i].broker && strcmp(parts[idx[q]].topic, parts[j].topic) == 0 &&
                    parts[idx[q]].partition == parts[j].partition)
                    out[j] = out[idx[q]];
        /* a broker with more than MAX_BATCH partitions: the next i not yet answered starts its next batch */
    }
}

/* The broker to ask for topic-partition: broker_id when >= 0, else the leader. */
static int target_of(const struct cluster *c, const char *topic, int32_t p, int32_t broker_id, int32_t *out) {
    if (broker_id >= 0) {
        *out = broker_id;
        return 0;
    }
    const struct MetadataResponse_MetadataResponsePartition *mp = md_partition(c, topic, p);
    if (!mp) return GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
    if (mp->LeaderId < 0) return GR_KERR_LEADER_NOT_AVAILABLE;
    *out = mp->LeaderId;
    return 0;
}

/* target_of, with the metadata read again while the partition is unknown or has no leader, until
 * --timeout-ms (as Kafka's admin client retries its metadata lookup: a topic just created may not
 * have reached the bootstrap broker yet). */
static int target_wait(const struct ctl_opts *o, struct cluster *c, const char *topic, int32_t p, int32_t broker_id,
                       int32_t *out) {
    int64_t deadline = gr_wall_ms() + o->timeout_ms;
    const char *topics[1] = {topic};
    for (;;) {
        int err = target_of(c, topic, p, broker_id, out);
        if (err == 0 || gr_wall_ms() >= deadline) return err;
        usleep(200 * 1000);
        struct cluster again;
        if (cluster_load(o, topics, 1, &again) != 0) {
            cluster_free(&again);
            return err;
        }
        cluster_free(c);
        *c = again;
    }
}

static char *txn_start_str(int64_t off) { return off >= 0 ? fmt("%" PRId64, off) : gr_strdup("None"); }

static int cmd_describe_producers(const struct ctl_opts *o, const char *topic, int32_t partition, int32_t broker_id) {
    char what[512];
    if (broker_id >= 0)
        snprintf(what, sizeof what, "Failed to describe producers for partition %s-%d on broker %d", topic, partition,
                 broker_id);
    else
        snprintf(what, sizeof what, "Failed to describe producers for partition %s-%d on leader", topic, partition);
    struct cluster c;
    const char *topics[1] = {topic};
    if (cluster_load(o, topics, 1, &c) != 0) {
        cluster_free(&c);
        return 1;
    }
    struct tp want = {topic, partition, -1};
    int err = target_wait(o, &c, topic, partition, broker_id, &want.broker);
    if (err) {
        cluster_free(&c);
        return fail(what, (int16_t)err, NULL);
    }
    const struct DescribeProducersResponse_PartitionResponse *pr;
    describe_producers(&c, &want, 1, &pr, &c.ar);
    if (pr->ErrorCode != GR_KERR_NONE) {
        int rc = fail_dp(what, topic, partition, broker_id, pr);
        cluster_free(&c);
        return rc;
    }
    static const char *const headers[] = {"ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                                          "LastTimestamp", "CurrentTransactionStartOffset"};
    struct table t;
    table_init(&t, headers, 6);
    for (int i = 0; i < pr->ActiveProducersCount; i++) {
        const struct DescribeProducersResponse_ProducerState *s = &pr->ActiveProducers[i];
        char *row[6] = {fmt("%" PRId64, s->ProducerId), fmt("%d", s->ProducerEpoch), fmt("%d", s->CoordinatorEpoch),
                        fmt("%d", s->LastSequence), fmt("%" PRId64, s->LastTimestamp),
                        txn_start_str(s->CurrentTxnStartOffset)};
        table_add(&t, row);
    }
    table_print_free(&t);
    cluster_free(&c);
    return 0;
}

/* ---- abort ---- */

static int cmd_abort(const struct ctl_opts *o, const char *topic, int32_t partition, int64_t start_offset,
                     int64_t pid, int32_t pepoch, int32_t cepoch) {
    struct cluster c;
    const char *topics[1] = {topic};
    if (cluster_load(o, topics, 1, &c) != 0) {
        cluster_free(&c);
        return 1;
    }
    int32_t leader = -1;
    int err = target_wait(o, &c, topic, partition, -1, &leader);
    char what[512];
    if (start_offset >= 0) {
        snprintf(what, sizeof what, "Failed to validate producer state for partition %s-%d", topic, partition);
        if (err) {
            cluster_free(&c);
            return fail(what, (int16_t)err, NULL);
        }
        struct tp want = {topic, partition, leader};
        const struct DescribeProducersResponse_PartitionResponse *pr;
        describe_producers(&c, &want, 1, &pr, &c.ar);
        if (pr->ErrorCode != GR_KERR_NONE) {
            int rc = fail_dp(what, topic, partition, -1, pr);
            cluster_free(&c);
            return rc;
        }
        const struct DescribeProducersResponse_ProducerState *found = NULL;
        for (int i = 0; i < pr->ActiveProducersCount && !found; i++)
            if (pr->ActiveProducers[i].CurrentTxnStartOffset == start_offset) found = &pr->ActiveProducers[i];
        if (!found) {
            fprintf(stderr, "Could not find any open transactions starting at offset %" PRId64 " on partition %s-%d\n",
                    start_offset, topic, partition);
            cluster_free(&c);
            return 1;
        }
        pid = found->ProducerId;
        pepoch = found->ProducerEpoch;
        cepoch = GR_MAX(found->CoordinatorEpoch, 0); /* Kafka: coordinatorEpoch().orElse(0) */
    } else {
        /* Kafka: a hanging transaction of a new producer id shows coordinator epoch -1; 0 is <=
         * every leader epoch */
        cepoch = GR_MAX(cepoch, 0);
    }
    snprintf(what, sizeof what,
             "Failed to abort transaction AbortTransactionSpec(topicPartition=%s-%d, producerId=%" PRId64
             ", producerEpoch=%d, coordinatorEpoch=%d)",
             topic, partition, pid, pepoch, cepoch);
    if (err) {
        cluster_free(&c);
        return fail(what, (int16_t)err, NULL);
    }
    struct WriteTxnMarkersRequest rq;
    gr_proto_init_struct(&gr_desc_WriteTxnMarkersRequest, &rq);
    struct WriteTxnMarkersRequest_WritableTxnMarker m = {.ProducerId = pid, .ProducerEpoch = (int16_t)pepoch,
                                                         .TransactionResult = false, .CoordinatorEpoch = cepoch};
    struct WriteTxnMarkersRequest_WritableTxnMarkerTopic mt = {.Name = (char *)topic, .PartitionIndexesCount = 1,
                                                               .PartitionIndexes = &partition};
    m.TopicsCount = 1;
    m.Topics = &mt;
    rq.MarkersCount = 1;
    rq.Markers = &m;
    struct WriteTxnMarkersResponse *r = call_broker(&c, leader, GR_API_WRITE_TXN_MARKERS, 0, &rq, &c.ar);
    int16_t e = GR_KERR_NETWORK_EXCEPTION;
    for (int i = 0; r && i < r->MarkersCount; i++)
        for (int t = 0; t < r->Markers[i].TopicsCount; t++)
            for (int p = 0; p < r->Markers[i].Topics[t].PartitionsCount; p++)
                e = r->Markers[i].Topics[t].Partitions[p].ErrorCode;
    int rc = e == GR_KERR_NONE ? 0 : fail(what, e, NULL);
    cluster_free(&c);
    return rc;
}

/* ---- list ---- */

struct listing {
    char *id;
    int64_t pid;
    char *state;
    int32_t coordinator;
};

/* ListTransactions v1 on every broker (producer ids filter, duration filter); appends to *l. A
 * broker's error is returned (the first), after asking all. */
static int16_t list_all(const struct cluster *c, const int64_t *pids, int npids, int64_t duration,
                        struct listing **l, int *n) {
    int16_t first = GR_KERR_NONE;
    for (int b = 0; b < c->md->BrokersCount; b++) {
        struct gr_arena a;
        gr_arena_init(&a);
        struct ListTransactionsRequest rq;
        gr_proto_init_struct(&gr_desc_ListTransactionsRequest, &rq);
        rq.StateFiltersCount = 0;
        rq.ProducerIdFiltersCount = npids;
        rq.ProducerIdFilters = (int64_t *)pids;
        rq.DurationFilter = duration;
        int32_t id = c->md->Brokers[b].NodeId;
        struct ListTransactionsResponse *r = call_broker(c, id, GR_API_LIST_TRANSACTIONS, 1, &rq, &a);
        int16_t e = r ? r->ErrorCode : GR_KERR_NETWORK_EXCEPTION;
        if (e != GR_KERR_NONE && first == GR_KERR_NONE) first = e;
        for (int i = 0; r && e == GR_KERR_NONE && i < r->TransactionStatesCount; i++) {
            *l = gr_realloc(*l, (size_t)(*n + 1) * sizeof **l);
            (*l)[(*n)++] = (struct listing){gr_strdup(r->TransactionStates[i].TransactionalId),
                                            r->TransactionStates[i].ProducerId,
                                            gr_strdup(r->TransactionStates[i].TransactionState), id};
        }
        gr_arena_free(&a);
    }
    return first;
}

static void listings_free(struct listing *l, int n) {
    for (int i = 0; i < n; i++) {
        free(l[i].id);
        free(l[i].state);
    }
    free(l);
}

static int cmd_list(const struct ctl_opts *o, int64_t duration) {
    struct cluster c;
    if (cluster_load(o, NULL, 0, &c) != 0) {
        cluster_free(&c);
        return 1;
    }
    struct listing *l = NULL;
    int n = 0;
    int16_t e = list_all(&c, NULL, 0, duration, &l, &n);
    cluster_free(&c);
    if (e != GR_KERR_NONE) {
        listings_free(l, n);
        return fail("Failed to list transactions", e, NULL);
    }
    static const char *const headers[] = {"TransactionalId", "Coordinator", "ProducerId", "TransactionState"};
    struct table t;
    table_init(&t, headers, 4);
    for (int i = 0; i < n; i++) {
        char *row[4] = {gr_strdup(l[i].id), fmt("%d", l[i].coordinator), fmt("%" PRId64, l[i].pid),
                        gr_strdup(l[i].state)};
        table_add(&t, row);
    }
    table_print_free(&t);
    listings_free(l, n);
    return 0;
}

/* ---- describe ---- */

/* DescribeTransactions of id at its coordinator; *coordinator its broker id. The state lives in
 * a. Returns the error (FindCoordinator's or the id's). */
static int16_t describe_txn(const struct cluster *c, const char *id, int32_t *coordinator,
                            const struct DescribeTransactionsResponse_TransactionState **out, struct gr_arena *a) {
    *out = NULL;
    struct FindCoordinatorRequest fq;
    gr_proto_init_struct(&gr_desc_FindCoordinatorRequest, &fq);
    fq.Key = (char *)id;
    fq.KeyType = 1;
    int16_t e = GR_KERR_NETWORK_EXCEPTION;
    struct FindCoordinatorResponse *fr = NULL;
    for (int b = 0; b < c->md->BrokersCount && !fr; b++)
        fr = call_broker(c, c->md->Brokers[b].NodeId, GR_API_FIND_COORDINATOR, 3, &fq, a);
    if (!fr) return e;
    if (fr->ErrorCode != GR_KERR_NONE) return fr->ErrorCode;
    *coordinator = fr->NodeId;
    struct DescribeTransactionsRequest rq;
    gr_proto_init_struct(&gr_desc_DescribeTransactionsRequest, &rq);
    char *ids[1] = {(char *)id};
    rq.TransactionalIdsCount = 1;
    rq.TransactionalIds = ids;
    struct DescribeTransactionsResponse *r = call_broker(c, fr->NodeId, GR_API_DESCRIBE_TRANSACTIONS, 0, &rq, a);
    if (!r || r->TransactionStatesCount < 1) return GR_KERR_NETWORK_EXCEPTION;
    *out = &r->TransactionStates[0];
    return (*out)->ErrorCode;
}

/* describe_txn as Kafka's admin client does it: the coordinator is found again on NOT_COORDINATOR /
 * COORDINATOR_NOT_AVAILABLE and COORDINATOR_LOAD_IN_PROGRESS is retried, within --timeout-ms. */
static int16_t describe_txn_retry(const struct cluster *c, const char *id, int32_t *coordinator,
                                  const struct DescribeTransactionsResponse_TransactionState **out, struct gr_arena *a) {
    int64_t deadline = gr_wall_ms() + c->timeout_ms;
    for (;;) {
        int16_t e = describe_txn(c, id, coordinator, out, a);
        if ((e != GR_KERR_NOT_COORDINATOR && e != GR_KERR_COORDINATOR_NOT_AVAILABLE &&
             e != GR_KERR_COORDINATOR_LOAD_IN_PROGRESS) ||
            gr_wall_ms() >= deadline)
            return e;
        usleep(200 * 1000);
    }
}

static int cmd_describe(const struct ctl_opts *o, const char *id) {
    char what[512];
    snprintf(what, sizeof what, "Failed to describe transaction state of transactional-id `%s`", id);
    struct cluster c;
    if (cluster_load(o, NULL, 0, &c) != 0) {
        cluster_free(&c);
        return 1;
    }
    int32_t coord = -1;
    const struct DescribeTransactionsResponse_TransactionState *s;
    int16_t e = describe_txn_retry(&c, id, &coord, &s, &c.ar);
    if (e != GR_KERR_NONE) {
        char m[600];
        if (e == GR_KERR_TRANSACTIONAL_ID_NOT_FOUND)
            snprintf(m, sizeof m, "DescribeTransactions request for transactionalId `%s` failed because the ID could "
                     "not be found", id);
        else if (e == GR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            snprintf(m, sizeof m, "DescribeTransactions request for transactionalId `%s` failed due to authorization "
                     "failure", id);
        else
            snprintf(m, sizeof m, "DescribeTransactions request for transactionalId `%s` failed due to unexpected "
                     "error", id);
        cluster_free(&c);
        return fail_msg(what, m);
    }
    static const char *const headers[] = {"CoordinatorId", "TransactionalId", "ProducerId",
                                          "ProducerEpoch", "TransactionState", "TransactionTimeoutMs",
                                          "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"};
    size_t cap = 1, len = 0;
    char *tps = gr_calloc(1, 1);
    for (int t = 0; t < s->TopicsCount; t++)
        for (int p = 0; p < s->Topics[t].PartitionsCount; p++) {
            char *one = fmt("%s%s-%d", len ? "," : "", s->Topics[t].Topic, s->Topics[t].Partitions[p]);
            size_t ol = strlen(one);
            if (len + ol + 1 > cap) {
                cap = (len + ol + 1) * 2;
                tps = gr_realloc(tps, cap);
            }
            memcpy(tps + len, one, ol + 1);
            len += ol;
            free(one);
        }
    int64_t start = s->TransactionStartTimeMs;
    char *row[9] = {fmt("%d", coord),
                    gr_strdup(id),
                    fmt("%" PRId64, s->ProducerId),
                    fmt("%d", s->ProducerEpoch),
                    gr_strdup(s->TransactionState ? s->TransactionState : ""),
                    fmt("%d", s->TransactionTimeoutMs),
                    start >= 0 ? fmt("%" PRId64, start) : gr_strdup("None"),
                    start >= 0 ? fmt("%" PRId64, gr_wall_ms() - start) : gr_strdup("None"),
                    tps};
    struct table t;
    table_init(&t, headers, 9);
    table_add(&t, row);
    table_print_free(&t);
    cluster_free(&c);
    return 0;
}

/* ---- find-hanging ---- */

/* An open transaction whose producer id no broker lists is called hanging; but a
 * __transaction_state partition without a live leader has nobody to list its ids, and a live
 * transaction of such an id (say in PrepareCommit while its coordinator is down) would be called
 * hanging and then aborted, and its coordinator's COMMIT marker would later find nothing to
 * commit there. GR_KERR_NONE when every partition of __transaction_state has a leader among the
 * live brokers (or the topic does not exist: no transactional id exists), else the error. */
static int16_t coordinators_available(const struct ctl_opts *o, const char **why) {
    const char *topics[1] = {"__transaction_state"};
    struct cluster tc;
    *why = NULL;
    if (cluster_load(o, topics, 1, &tc) != 0) {
        cluster_free(&tc);
        return GR_KERR_NETWORK_EXCEPTION;
    }
    int16_t err = GR_KERR_NONE;
    const struct MetadataResponse_MetadataResponseTopic *mt = md_topic(&tc, topics[0]);
    if (mt && mt->ErrorCode != GR_KERR_NONE && mt->ErrorCode != GR_KERR_UNKNOWN_TOPIC_OR_PARTITION)
        err = mt->ErrorCode;
    for (int p = 0; mt && err == GR_KERR_NONE && mt->ErrorCode == GR_KERR_NONE && p < mt->PartitionsCount; p++) {
        bool live = false;
        for (int b = 0; b < tc.md->BrokersCount && !live; b++)
            live = mt->Partitions[p].LeaderId >= 0 && tc.md->Brokers[b].NodeId == mt->Partitions[p].LeaderId;
        if (!live) {
            err = GR_KERR_COORDINATOR_NOT_AVAILABLE;
            *why = "a partition of __transaction_state has no live leader: the transactional ids it holds cannot "
                   "be listed, so an open transaction cannot be told hanging";
        }
    }
    cluster_free(&tc);
    return err;
}

static int cmd_find_hanging(const struct ctl_opts *o, int32_t broker_id, const char *topic, int32_t partition,
                            int64_t max_timeout_min) {
    if (!topic && broker_id < 0) {
        fprintf(stderr, "The `find-hanging` command requires either --topic or --broker-id to limit the scope of "
                        "the search\n");
        return 1;
    }
    if (partition >= 0 && !topic) {
        fprintf(stderr, "The --partition argument requires --topic to be provided\n");
        return 1;
    }
    int64_t max_ms = max_timeout_min * 60000;
    struct cluster c;
    const char *topics[1] = {topic};
    if (cluster_load(o, topic ? topics : NULL, topic ? 1 : -1, &c) != 0) {
        cluster_free(&c);
        return 1;
    }
    /* the partitions to search (Kafka: every topic, internal ones included, or --topic) */
    int cap = 16, n = 0;
    struct tp *parts = gr_calloc((size_t)cap, sizeof *parts);
    for (int t = 0; t < c.md->TopicsCount; t++) {
        const struct MetadataResponse_MetadataResponseTopic *mt = &c.md->Topics[t];
        if (!mt->Name || (topic && strcmp(mt->Name, topic) != 0)) continue;
        if (mt->ErrorCode != GR_KERR_NONE) {
            char what[400];
            snprintf(what, sizeof what, "Failed to describe 1 topics");
            free(parts);
            cluster_free(&c);
            return fail(what, mt->ErrorCode, NULL);
        }
        for (int p = 0; p < mt->PartitionsCount; p++) {
            const struct MetadataResponse_MetadataResponsePartition *mp = &mt->Partitions[p];
            if (partition >= 0 && mp->PartitionIndex != partition) continue;
            bool has = broker_id < 0;
            for (int r = 0; r < mp->ReplicaNodesCount && !has; r++) has = mp->ReplicaNodes[r] == broker_id;
            if (!has && partition < 0) continue;
            int32_t target = broker_id;
            if (target < 0 && (target = mp->LeaderId) < 0) continue; /* no leader to ask now */
            if (n == cap) parts = gr_realloc(parts, (size_t)(cap *= 2) * sizeof *parts);
            parts[n++] = (struct tp){mt->Name, mp->PartitionIndex, target};
        }
    }
    const struct DescribeProducersResponse_PartitionResponse **pr = gr_calloc((size_t)n + 1, sizeof *pr);
    describe_producers(&c, parts, n, pr, &c.ar);
    int64_t now = gr_wall_ms();
    /* candidates: open transactions whose last write is older than the max timeout */
    struct cand {
        const struct tp *tp;
        const struct DescribeProducersResponse_ProducerState *s;
        bool hanging;
    } *cands = NULL;
    int nc = 0;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        if (pr[i]->ErrorCode != GR_KERR_NONE) {
            char what[400]; /* Kafka prints the Optional<Integer> broker id as Java does */
            if (broker_id >= 0)
                snprintf(what, sizeof what, "Failed to describe producers for %d partitions on broker Optional[%d]", n,
                         broker_id);
            else
                snprintf(what, sizeof what, "Failed to describe producers for %d partitions on broker Optional.empty",
                         n);
            rc = fail(what, pr[i]->ErrorCode, pr[i]->ErrorMessage);
            break;
        }
        for (int k = 0; k < pr[i]->ActiveProducersCount; k++) {
            const struct DescribeProducersResponse_ProducerState *s = &pr[i]->ActiveProducers[k];
            if (s->CurrentTxnStartOffset < 0 || now - s->LastTimestamp <= max_ms) continue;
            cands = gr_realloc(cands, (size_t)(nc + 1) * sizeof *cands);
            cands[nc++] = (struct cand){&parts[i], s, false};
        }
    }
    struct listing *l = NULL;
    int nl = 0;
    if (rc == 0 && nc > 0) {
        int64_t *pids = gr_calloc((size_t)nc, sizeof *pids);
        int np = 0;
        for (int i = 0; i < nc; i++) {
            bool dup = false;
            for (int k = 0; k < np && !dup; k++) dup = pids[k] == cands[i].s->ProducerId;
            if (!dup) pids[np++] = cands[i].s->ProducerId;
        }
        const char *why = NULL;
        int16_t e = coordinators_available(o, &why);
        if (e == GR_KERR_NONE) e = list_all(&c, pids, np, -1, &l, &nl);
        /* the coordinators again: one that lost its partition while we listed */
        if (e == GR_KERR_NONE) e = coordinators_available(o, &why);
        if (e != GR_KERR_NONE) {
            char what[200];
            snprintf(what, sizeof what, "Failed to list transactions for %d producers", np);
            rc = fail(what, e, why);
        }
        free(pids);
    }
    for (int i = 0; rc == 0 && i < nc; i++) {
        const char *id = NULL;
        for (int k = 0; k < nl && !id; k++)
            if (l[k].pid == cands[i].s->ProducerId) id = l[k].id;
        if (!id) {
            cands[i].hanging = true; /* no transactional id for the producer id */
            continue;
        }
        struct gr_arena a;
        gr_arena_init(&a);
        int32_t coord;
        const struct DescribeTransactionsResponse_TransactionState *s;
        int16_t e = describe_txn_retry(&c, id, &coord, &s, &a);
        if (e == GR_KERR_TRANSACTIONAL_ID_NOT_FOUND) {
            cands[i].hanging = true;
        } else if (e != GR_KERR_NONE) {
            rc = fail("Failed to describe 1 transactions", e, NULL);
        } else {
            bool listed = false;
            for (int t = 0; t < s->TopicsCount && !listed; t++)
                for (int p = 0; p < s->Topics[t].PartitionsCount && !listed; p++)
                    listed = strcmp(s->Topics[t].Topic, cands[i].tp->topic) == 0 &&
                             s->Topics[t].Partitions[p] == cands[i].tp->partition;
            cands[i].hanging = !listed;
        }
        gr_arena_free(&a);
    }
    if (rc == 0) {
        static const char *const headers[] = {"Topic",            "Partition",   "ProducerId",    "ProducerEpoch",
                                              "CoordinatorEpoch", "StartOffset", "LastTimestamp", "Duration(min)"};
        struct table t;
        table_init(&t, headers, 8);
        for (int i = 0; i < nc; i++) {
            if (!cands[i].hanging) continue;
            const struct DescribeProducersResponse_ProducerState *s = cands[i].s;
            char *row[8] = {gr_strdup(cands[i].tp->topic),        fmt("%d", cands[i].tp->partition),
                            fmt("%" PRId64, s->ProducerId),       fmt("%d", s->ProducerEpoch),
                            fmt("%d", s->CoordinatorEpoch),       fmt("%" PRId64, s->CurrentTxnStartOffset),
                            fmt("%" PRId64, s->LastTimestamp),    fmt("%" PRId64, (now - s->LastTimestamp) / 60000)};
            table_add(&t, row);
        }
        table_print_free(&t);
    }
    listings_free(l, nl);
    free(cands);
    free(pr);
    free(parts);
    cluster_free(&c);
    return rc;
}

/* ---- arguments ---- */

static bool parse_i64(const char *s, int64_t *out) {
    char *end;
    if (!s || !*s) return false;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno == ERANGE) return false;
    *out = v;
    return true;
}

int ctl_transactions_main(const struct ctl_opts *o, int argc, char **argv) {
    if (argc < 2) return usage();
    const char *sub = argv[1];
    const char *topic = NULL, *id = NULL;
    int64_t partition = -1, broker = -1, start = -1, pid = -1, pepoch = -1, cepoch = -1, duration = -1, maxmin = 15;
    bool have_partition = false, have_pid = false, have_pepoch = false, have_cepoch = false;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = v != NULL;
        if (strcmp(a, "--topic") == 0 && v) topic = v;
        else if (strcmp(a, "--transactional-id") == 0 && v) id = v;
        /* Kafka's argparse types (Integer, Short, Long) refuse what does not fit: a value cast to
         * a narrower type would name another partition or epoch (--partition 4294967296 is 0,
         * --producer-epoch 65541 is 5), and abort writes a marker there */
        else if (strcmp(a, "--partition") == 0)
            ok = (have_partition = parse_i64(v, &partition)) && partition >= 0 && partition <= INT32_MAX;
        else if (strcmp(a, "--broker-id") == 0) ok = parse_i64(v, &broker) && broker >= 0 && broker <= INT32_MAX;
        else if (strcmp(a, "--start-offset") == 0) ok = parse_i64(v, &start) && start >= 0;
        else if (strcmp(a, "--producer-id") == 0) ok = have_pid = parse_i64(v, &pid);
        else if (strcmp(a, "--producer-epoch") == 0)
            ok = (have_pepoch = parse_i64(v, &pepoch)) && pepoch >= INT16_MIN && pepoch <= INT16_MAX;
        else if (strcmp(a, "--coordinator-epoch") == 0)
            ok = (have_cepoch = parse_i64(v, &cepoch)) && cepoch >= INT32_MIN && cepoch <= INT32_MAX;
        else if (strcmp(a, "--duration-filter") == 0) ok = parse_i64(v, &duration);
        else if (strcmp(a, "--max-transaction-timeout") == 0)
            ok = parse_i64(v, &maxmin) && maxmin >= 0 && maxmin <= INT32_MAX;
        else ok = false;
        if (!ok) {
            fprintf(stderr, "gregorctl transactions %s: bad argument %s\n", sub, a);
            return usage();
        }
        i++;
    }
    if (!o->bootstrap_server) {
        fprintf(stderr, "gregorctl transactions: --bootstrap-server is required\n");
        return 2;
    }
    if (strcmp(sub, "list") == 0) return cmd_list(o, duration);
    if (strcmp(sub, "describe") == 0) return id ? cmd_describe(o, id) : usage();
    if (strcmp(sub, "describe-producers") == 0)
        return topic && have_partition ? cmd_describe_producers(o, topic, (int32_t)partition, (int32_t)broker)
                                       : usage();
    if (strcmp(sub, "abort") == 0) {
        if (!topic || !have_partition) return usage();
        if (start < 0 && !have_pid) {
            fprintf(stderr, "The transaction to abort must be identified either with --start-offset (for brokers on "
                            "3.0 or above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for "
                            "older brokers)\n");
            return 1;
        }
        if (start < 0 && !have_pepoch) {
            fprintf(stderr, "Missing required argument --producer-epoch\n");
            return 1;
        }
        if (start < 0 && !have_cepoch) {
            fprintf(stderr, "Missing required argument --coordinator-epoch\n");
            return 1;
        }
        return cmd_abort(o, topic, (int32_t)partition, start, pid, (int32_t)pepoch, (int32_t)cepoch);
    }
    if (strcmp(sub, "find-hanging") == 0)
        return cmd_find_hanging(o, (int32_t)broker, topic, have_partition ? (int32_t)partition : -1, maxmin);
    return usage();
}
