/* KIP-890 verification requests to transaction coordinators: one queue, sender thread and kept
 * connection per coordinator broker (add_partitions_to_txn_manager.h). */
#include "broker/add_partitions_to_txn_manager.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "coordinator/txn_coordinator.h"
#include "coordinator/txn_log.h"
#include "net/kafka_client.h"
#include "protocol/codec.h"
#include "protocol/messages.h"

#define LOGGER "kafka.server.AddPartitionsToTxnManager"

/* Transactions per v4 request; the queues are bounded by the connections anyway (header). */
#define GR_APTM_MAX_TXNS_PER_REQUEST 256

/* One check: the partitions of one request (Produce or TxnOffsetCommit). */
struct check {
    struct check *next;
    char *txn_id;
    int64_t pid;
    int16_t epoch;
    int n;
    char **topics;
    int32_t *parts;
    int16_t *errors;
    gr_aptm_cb cb;
    void *ctx;
};

/* A coordinator broker: its queue (under gr_aptm.mu) and its sender thread's client. */
struct node {
    struct node *next;
    struct gr_aptm *m;
    int32_t id;
    pthread_t thread;
    pthread_cond_t cond;
    struct check *head, **tail;
    struct gr_kafka_client *kc; /* the sender thread's; shutdown from any thread */
    int16_t max_version;        /* the peer's AddPartitionsToTxn maximum, learned per connection (sender thread) */
    int64_t deadline;           /* gr_mono_ms by which the current round ends (sender thread) */
};

struct gr_aptm {
    struct gr_broker *b;
    int32_t round_timeout_ms; /* gr_aptm_round_timeout_ms of the broker's config; fixed at gr_aptm_new */
    pthread_mutex_t mu;
    bool stopping, stopped;
    struct node *nodes;
};

static void check_free(struct check *c) {
    for (int i = 0; i < c->n; i++) free(c->topics[i]);
    free(c->topics);
    free(c->parts);
    free(c->errors);
    free(c->txn_id);
    free(c);
}

/* Answers c (every partition err unless errors are set) and frees it. */
static void answer(struct check *c, int16_t err) {
    if (err != GR_KERR_NONE)
        for (int i = 0; i < c->n; i++) c->errors[i] = err;
    c->cb(c->ctx, c->errors, c->n);
    check_free(c);
}

static void answer_all(struct check *list, int16_t err) {
    while (list) {
        struct check *next = list->next;
        answer(list, err);
        list = next;
    }
}

/* ---- one request for the checks of one (transactional id, producer id, epoch) ---- */

static bool same_txn(const struct check *a, const struct check *b) {
    return a->pid == b->pid && a->epoch == b->epoch && strcmp(a->txn_id, b->txn_id) == 0;
}

/* What is left of the round (node.deadline) for the next call, in ms; 0 once it has passed (the
 * caller fails with GR_ETIMEOUT then, without sending: the kafka client reads 0 as its default). */
static int round_left_ms(const struct node *nd) {
    int64_t left = nd->deadline - gr_mono_ms();
    return left > 0 ? (int)GR_MIN(left, (int64_t)INT32_MAX) : 0;
}

/* Points node's client at its broker's inter-broker endpoint (the same target keeps the
 * connection). false when the broker has no known endpoint. */
static bool set_target(struct node *nd) {
    struct gr_broker *b = nd->m->b;
    char host[256];
    int32_t port;
    const struct gr_listener *l = b->cfg ? gr_config_inter_broker_listener(b->cfg) : NULL;
    if (!gr_mdc_get_endpoint(b->metadata, nd->id, l ? l->name : "PLAINTEXT", host, sizeof host, &port))
        return false;
    gr_kafka_client_set_target(nd->kc, nd->id, host, port);
    return true;
}

/* On a new connection, asks the peer's ApiVersions (as Kafka's NetworkClient does once per
 * connection) and keeps its AddPartitionsToTxn maximum in nd->max_version: a coordinator that
 * serves v4 gets one batched VerifyOnly request for every queued transaction, an older one (a
 * Gregor before the KIP-890 batched form, during a rolling upgrade) one v1 request per
 * transaction. A kept connection keeps what was learned. 0 or the call's error. */
static int negotiate(struct node *nd) {
    if (gr_kafka_client_connected(nd->kc)) return 0;
    int left = round_left_ms(nd);
    if (left == 0) return GR_ETIMEOUT;
    struct gr_arena a;
    gr_arena_init(&a);
    struct ApiVersionsRequest rq;
    gr_proto_init_struct(&gr_desc_ApiVersionsRequest, &rq);
    void *body = NULL;
    int rc = gr_kafka_client_call(nd->kc, GR_API_API_VERSIONS, 0, &rq, left, &a, &body, NULL);
    if (rc == 0) {
        const struct ApiVersionsResponse *r = body;
        nd->max_version = -1;
        for (int32_t i = 0; r->ErrorCode == GR_KERR_NONE && i < r->ApiKeysCount; i++)
            if (r->ApiKeys[i].ApiKey == GR_API_ADD_PARTITIONS_TO_TXN) nd->max_version = r->ApiKeys[i].MaxVersion;
        if (nd->max_version < 1) rc = GR_EPROTO; /* no AddPartitionsToTxn v1: cannot verify there */
    }
    if (rc != 0) gr_kafka_client_disconnect(nd->kc);
    gr_arena_free(&a);
    return rc;
}

/* Sends rq as AddPartitionsToTxn version v over node's connection, within what is left of the
 * round. A kept connection the peer closed meanwhile (connections.max.idle.ms, a restart) fails
 * the first call at once: once more on a new one (ApiVersions first), if the peer still serves
 * v and the round has time left; a timeout is not retried (the round's time is spent). */
static int call(struct node *nd, int16_t v, const struct AddPartitionsToTxnRequest *rq, struct gr_arena *a,
                void **body, uint8_t **frame) {
    bool kept = gr_kafka_client_connected(nd->kc);
    int left = round_left_ms(nd);
    if (left == 0) return GR_ETIMEOUT;
    int rc = gr_kafka_client_call(nd->kc, GR_API_ADD_PARTITIONS_TO_TXN, v, rq, left, a, body, frame);
    if (rc != 0 && kept && rc != GR_ETIMEOUT && !gr_kafka_client_is_shut_down(nd->kc)) {
        rc = negotiate(nd);
        if (rc == 0 && (v >= 4) != (nd->max_version >= 4)) rc = GR_EPROTO; /* the peer changed: next round */
        if (rc == 0) rc = (left = round_left_ms(nd)) == 0 ? GR_ETIMEOUT : 0;
        if (rc == 0) rc = gr_kafka_client_call(nd->kc, GR_API_ADD_PARTITIONS_TO_TXN, v, rq, left, a, body, frame);
    }
    return rc;
}

/* The distinct topics, each with its distinct partitions, over every check of group (in the
 * arena); *count their number. */
static struct AddPartitionsToTxnRequest_AddPartitionsToTxnTopic *group_topics(struct gr_arena *a,
                                                                              const struct check *group,
                                                                              int32_t *count) {
    int total = 0;
    for (const struct check *c = group; c; c = c->next) total += c->n;
    struct AddPartitionsToTxnRequest_AddPartitionsToTxnTopic *topics = gr_arena_alloc(a, (size_t)total * sizeof *topics);
    int32_t nt = 0;
    for (const struct check *c = group; c; c = c->next)
        for (int i = 0; i < c->n; i++) {
            struct AddPartitionsToTxnRequest_AddPartitionsToTxnTopic *t = NULL;
            for (int k = 0; k < nt && !t; k++)
                if (strcmp(topics[k].Name, c->topics[i]) == 0) t = &topics[k];
            if (!t) {
                t = &topics[nt++];
                t->Name = c->topics[i];
                t->PartitionsCount = 0;
                t->Partitions = gr_arena_alloc(a, (size_t)total * sizeof *t->Partitions);
            }
            bool have = false;
            for (int k = 0; k < t->PartitionsCount && !have; k++) have = t->Partitions[k] == c->parts[i];
            if (!have) t->Partitions[t->PartitionsCount++] = c->parts[i];
        }
    *count = nt;
    return topics;
}

/* Sends the checks `group` (same transaction) to node's broker as one AddPartitionsToTxn v1 (the
 * coordinator serves no v4); answers them. Returns false when the request failed (no answer from
 * the broker). */
static bool send_group(struct node *nd, struct check *group) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct AddPartitionsToTxnRequest *rq = gr_proto_new(&a, &gr_desc_AddPartitionsToTxnRequest);
    rq->V3AndBelowTransactionalId = group->txn_id;
    rq->V3AndBelowProducerId = group->pid;
    rq->V3AndBelowProducerEpoch = group->epoch;
    rq->V3AndBelowTopics = group_topics(&a, group, &rq->V3AndBelowTopicsCount);
    void *body = NULL;
    uint8_t *frame = NULL;
    int rc = call(nd, 1, rq, &a, &body, &frame);
    if (rc != 0) {
        gr_warn(LOGGER, "AddPartitionsToTxn (verify) of '%s' to broker %d (%s) failed: %s", group->txn_id, nd->id,
                gr_kafka_client_peer(nd->kc), gr_strerror(rc));
        free(frame);
        gr_arena_free(&a);
        answer_all(group, GR_KERR_NETWORK_EXCEPTION);
        return false;
    }
    const struct AddPartitionsToTxnResponse *resp = body;
    for (struct check *c = group; c; c = c->next)
        for (int i = 0; i < c->n; i++) {
            c->errors[i] = GR_KERR_INVALID_TXN_STATE; /* not in the answer: not verified */
            for (int t = 0; t < resp->ResultsByTopicV3AndBelowCount; t++) {
                const struct AddPartitionsToTxnResponse_AddPartitionsToTxnTopicResult *tr = &resp->ResultsByTopicV3AndBelow[t];
                if (!tr->Name || strcmp(tr->Name, c->topics[i]) != 0) continue;
                for (int k = 0; k < tr->ResultsByPartitionCount; k++)
                    if (tr->ResultsByPartition[k].PartitionIndex == c->parts[i]) c->errors[i] = tr->ResultsByPartition[k].PartitionErrorCode;
            }
        }
    free(frame);
    gr_arena_free(&a);
    answer_all(group, GR_KERR_NONE);
    return true;
}

/* Takes the first check of *list and every later one of the same transaction (arrival order
 * kept) out of *list: one transaction's group. */
static struct check *take_group(struct check **list) {
    struct check *group = *list, **gt = &group->next;
    *list = group->next;
    group->next = NULL;
    for (struct check **pp = list; *pp;) {
        if (same_txn(*pp, group)) {
            struct check *c = *pp;
            *pp = c->next;
            c->next = NULL;
            *gt = c;
            gt = &c->next;
        } else {
            pp = &(*pp)->next;
        }
    }
    return group;
}

/* One AddPartitionsToTxn v4 request (Kafka 3.9's AddPartitionsToTxnManager: every queued
 * transaction of one coordinator in one request, each VerifyOnly) for the groups of *list; a
 * group whose transactional id is already in the request (another producer id or epoch: a
 * zombie and its successor), whose answer could not be told apart, stays in *list for the next
 * request. Answers the groups sent. Returns false when the request failed (no answer). */
static bool send_batch_v4(struct node *nd, struct check **list) {
    struct check *groups[GR_APTM_MAX_TXNS_PER_REQUEST];
    int ng = 0;
    struct check *later = NULL, **lt = &later;
    while (*list) {
        struct check *g = take_group(list);
        bool dup = ng == GR_APTM_MAX_TXNS_PER_REQUEST;
        for (int i = 0; i < ng && !dup; i++) dup = strcmp(groups[i]->txn_id, g->txn_id) == 0;
        if (dup) { /* back in line, in order */
            *lt = g;
            while (*lt) lt = &(*lt)->next;
        } else {
            groups[ng++] = g;
        }
    }
    *list = later;
    struct gr_arena a;
    gr_arena_init(&a);
    struct AddPartitionsToTxnRequest *rq = gr_proto_new(&a, &gr_desc_AddPartitionsToTxnRequest);
    rq->TransactionsCount = ng;
    rq->Transactions = gr_arena_alloc(&a, (size_t)ng * sizeof *rq->Transactions);
    for (int i = 0; i < ng; i++) {
        struct AddPartitionsToTxnRequest_AddPartitionsToTxnTransaction *t = &rq->Transactions[i];
        t->TransactionalId = groups[i]->txn_id;
        t->ProducerId = groups[i]->pid;
        t->ProducerEpoch = groups[i]->epoch;
        t->VerifyOnly = true;
        t->Topics = group_topics(&a, groups[i], &t->TopicsCount);
    }
    void *body = NULL;
    uint8_t *frame = NULL;
    int rc = call(nd, 4, rq, &a, &body, &frame);
    if (rc != 0) {
        gr_warn(LOGGER, "AddPartitionsToTxn (verify, %d transactions) to broker %d (%s) failed: %s", ng, nd->id,
                gr_kafka_client_peer(nd->kc), gr_strerror(rc));
        free(frame);
        gr_arena_free(&a);
        for (int i = 0; i < ng; i++) answer_all(groups[i], GR_KERR_NETWORK_EXCEPTION);
        return false;
    }
    const struct AddPartitionsToTxnResponse *resp = body;
    for (int g = 0; g < ng; g++) {
        const struct AddPartitionsToTxnResponse_AddPartitionsToTxnResult *tx = NULL;
        for (int x = 0; x < resp->ResultsByTransactionCount && !tx; x++)
            if (resp->ResultsByTransaction[x].TransactionalId &&
                strcmp(resp->ResultsByTransaction[x].TransactionalId, groups[g]->txn_id) == 0)
                tx = &resp->ResultsByTransaction[x];
        for (struct check *c = groups[g]; c; c = c->next)
            for (int i = 0; i < c->n; i++) {
                int16_t e = resp->ErrorCode != GR_KERR_NONE ? resp->ErrorCode : GR_KERR_INVALID_TXN_STATE;
                for (int t = 0; tx && resp->ErrorCode == GR_KERR_NONE && t < tx->TopicResultsCount; t++) {
                    const struct AddPartitionsToTxnResponse_AddPartitionsToTxnTopicResult *tr = &tx->TopicResults[t];
                    if (!tr->Name || strcmp(tr->Name, c->topics[i]) != 0) continue;
                    for (int k = 0; k < tr->ResultsByPartitionCount; k++)
                        if (tr->ResultsByPartition[k].PartitionIndex == c->parts[i])
                            e = tr->ResultsByPartition[k].PartitionErrorCode;
                }
                /* v4 says TRANSACTION_ABORTABLE where v1 and the local check say INVALID_TXN_STATE */
                c->errors[i] = e == GR_KERR_TRANSACTION_ABORTABLE ? GR_KERR_INVALID_TXN_STATE : e;
            }
    }
    free(frame);
    gr_arena_free(&a);
    for (int i = 0; i < ng; i++) answer_all(groups[i], GR_KERR_NONE);
    return true;
}

/* One round: sends the checks of list, batched in v4 requests when the coordinator serves v4,
 * else one v1 request per transaction (arrival order kept). The round has one deadline, the
 * manager's round timeout from now: the ApiVersions exchange of a new connection, the requests
 * and a resend on a new connection share it, so a slow but live coordinator holds a check at
 * most that long (plus one connect), not that long per exchange. Once a request failed
 * (timeout, connection refused or lost), the rest of the list fails with it, as the one merged
 * request of Kafka's sender does: asking a stopped coordinator again for each transaction would
 * hold the last one that long times the number of groups, its connection muted all along. */
static void send_all(struct node *nd, struct check *list) {
    nd->deadline = gr_mono_ms() + nd->m->round_timeout_ms;
    if (!set_target(nd)) {
        answer_all(list, GR_KERR_COORDINATOR_NOT_AVAILABLE);
        return;
    }
    int rc = negotiate(nd);
    if (rc != 0) {
        gr_warn(LOGGER, "ApiVersions to broker %d (%s) for AddPartitionsToTxn (verify) failed: %s", nd->id,
                gr_kafka_client_peer(nd->kc), gr_strerror(rc));
        answer_all(list, GR_KERR_NETWORK_EXCEPTION);
        return;
    }
    while (list) {
        bool ok = nd->max_version >= 4 ? send_batch_v4(nd, &list) : send_group(nd, take_group(&list));
        if (!ok) {
            answer_all(list, GR_KERR_NETWORK_EXCEPTION);
            return;
        }
    }
}

static void *sender_thread(void *arg) {
    struct node *nd = arg;
    struct gr_aptm *m = nd->m;
    char name[16];
    snprintf(name, sizeof name, "aptm-%d", (int)nd->id);
    pthread_setname_np(pthread_self(), name);
    pthread_mutex_lock(&m->mu);
    for (;;) {
        if (!nd->head && !m->stopping) {
            pthread_cond_wait(&nd->cond, &m->mu);
            continue;
        }
        struct check *list = nd->head;
        nd->head = NULL;
        nd->tail = &nd->head;
        bool stop = m->stopping;
        pthread_mutex_unlock(&m->mu);
        if (stop) {
            answer_all(list, GR_KERR_COORDINATOR_NOT_AVAILABLE);
            return NULL;
        }
        send_all(nd, list);
        pthread_mutex_lock(&m->mu);
    }
}

/* The node of broker id, created with its thread on first use (m->mu held). NULL if the thread
 * cannot start. */
static struct node *node_locked(struct gr_aptm *m, int32_t id) {
    for (struct node *nd = m->nodes; nd; nd = nd->next)
        if (nd->id == id) return nd;
    struct node *nd = gr_calloc(1, sizeof *nd);
    nd->m = m;
    nd->id = id;
    nd->tail = &nd->head;
    pthread_cond_init(&nd->cond, NULL);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "[AddPartitionsToTxnSenderThread-%d]", (int)id);
    struct gr_kafka_client_config kcfg = {.client_id = GR_TXN_VERIFY_CLIENT_ID,
                                          .logger = LOGGER,
                                          .log_prefix = prefix,
                                          .connect_timeout_ms = GR_APTM_CONNECT_TIMEOUT_MS,
                                          .request_timeout_ms = m->round_timeout_ms};
    nd->kc = gr_kafka_client_new(&kcfg);
    if (pthread_create(&nd->thread, NULL, sender_thread, nd) != 0) {
        gr_kafka_client_free(nd->kc);
        pthread_cond_destroy(&nd->cond);
        free(nd);
        return NULL;
    }
    nd->next = m->nodes;
    m->nodes = nd;
    return nd;
}

/* ---- API ---- */

int32_t gr_aptm_round_timeout_ms(const struct gr_config *cfg) {
    int32_t t = cfg && cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : GR_APTM_REQUEST_TIMEOUT_MS;
    return GR_MIN(t, GR_APTM_REQUEST_TIMEOUT_MS);
}

struct gr_aptm *gr_aptm_new(struct gr_broker *b) {
    struct gr_aptm *m = gr_calloc(1, sizeof *m);
    m->b = b;
    m->round_timeout_ms = gr_aptm_round_timeout_ms(b->cfg);
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

void gr_aptm_shutdown(struct gr_aptm *m) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    if (m->stopped) {
        pthread_mutex_unlock(&m->mu);
        return;
    }
    m->stopping = true;
    for (struct node *nd = m->nodes; nd; nd = nd->next) {
        pthread_cond_signal(&nd->cond);
        gr_kafka_client_shutdown(nd->kc); /* a call under way fails now */
    }
    pthread_mutex_unlock(&m->mu);
    for (struct node *nd = m->nodes; nd; nd = nd->next) pthread_join(nd->thread, NULL);
    pthread_mutex_lock(&m->mu);
    m->stopped = true;
    pthread_mutex_unlock(&m->mu);
}

void gr_aptm_free(struct gr_aptm *m) {
    if (!m) return;
    gr_aptm_shutdown(m);
    while (m->nodes) {
        struct node *nd = m->nodes;
        m->nodes = nd->next;
        gr_kafka_client_free(nd->kc);
        pthread_cond_destroy(&nd->cond);
        free(nd);
    }
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void gr_aptm_verify(struct gr_aptm *m, struct gr_broker *b, const char *transactional_id, int64_t producer_id,
                    int16_t epoch, const char *const *topics, const int32_t *partitions, int n, gr_aptm_cb cb,
                    void *ctx) {
    struct check *c = gr_calloc(1, sizeof *c);
    c->txn_id = gr_strdup(transactional_id ? transactional_id : "");
    c->pid = producer_id;
    c->epoch = epoch;
    c->n = n;
    c->topics = gr_calloc((size_t)n + 1, sizeof *c->topics);
    c->parts = gr_calloc((size_t)n + 1, sizeof *c->parts);
    c->errors = gr_calloc((size_t)n + 1, sizeof *c->errors);
    c->cb = cb;
    c->ctx = ctx;
    for (int i = 0; i < n; i++) {
        c->topics[i] = gr_strdup(topics[i]);
        c->parts[i] = partitions[i];
    }
    struct gr_txn_coordinator *tc = b->txn_coordinator;
    if (!tc) {
        answer(c, GR_KERR_COORDINATOR_NOT_AVAILABLE);
        return;
    }
    /* this broker coordinates the id: asked in place (Kafka sends itself a request) */
    bool remote = false;
    for (int i = 0; i < n; i++) {
        c->errors[i] = gr_txn_verify_id(tc, c->txn_id, producer_id, epoch, c->topics[i], c->parts[i]);
        if (c->errors[i] == GR_KERR_NOT_COORDINATOR) remote = true;
    }
    if (!remote || !m) {
        answer(c, remote ? GR_KERR_COORDINATOR_NOT_AVAILABLE : GR_KERR_NONE);
        return;
    }
    struct gr_mdc_partition mp;
    int32_t leader = -1;
    if (gr_mdc_get_partition(b->metadata, GR_TXN_TOPIC, gr_txn_partition_of(tc, c->txn_id), &mp)) {
        leader = mp.leader;
        gr_mdc_partition_release(&mp);
    }
    if (leader < 0 || leader == b->broker_id) { /* unknown, or this broker before it loaded the partition */
        answer(c, leader < 0 ? GR_KERR_COORDINATOR_NOT_AVAILABLE : GR_KERR_NOT_COORDINATOR);
        return;
    }
    pthread_mutex_lock(&m->mu);
    struct node *nd = m->stopping ? NULL : node_locked(m, leader);
    if (nd) {
        *nd->tail = c;
        nd->tail = &c->next;
        pthread_cond_signal(&nd->cond);
    }
    pthread_mutex_unlock(&m->mu);
    if (!nd) answer(c, GR_KERR_COORDINATOR_NOT_AVAILABLE);
}
