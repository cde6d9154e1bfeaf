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
};

struct gr_aptm {
    struct gr_broker *b;
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

/* Sends the checks `group` (same transaction) to node's broker; answers them. Returns false when
 * the request failed (no answer from the broker). */
static bool send_group(struct node *nd, struct check *group) {
    struct gr_broker *b = nd->m->b;
    char host[256];
    int32_t port;
    const struct gr_listener *l = b->cfg ? gr_config_inter_broker_listener(b->cfg) : NULL;
    if (!gr_mdc_get_endpoint(b->metadata, nd->id, l ? l->name : "PLAINTEXT", host, sizeof host, &port)) {
        answer_all(group, GR_KERR_COORDINATOR_NOT_AVAILABLE);
        return true;
    }
    gr_kafka_client_set_target(nd->kc, nd->id, host, port); /* the same target keeps the connection */
    struct gr_arena a;
    gr_arena_init(&a);
    /* the distinct topics and their distinct partitions over every check of the group */
    int total = 0;
    for (struct check *c = group; c; c = c->next) total += c->n;
    struct AddPartitionsToTxnRequest *rq = gr_proto_new(&a, &gr_desc_AddPartitionsToTxnRequest);
    rq->V3AndBelowTransactionalId = group->txn_id;
    rq->V3AndBelowProducerId = group->pid;
    rq->V3AndBelowProducerEpoch = group->epoch;
    rq->V3AndBelowTopics = gr_arena_alloc(&a, (size_t)total * sizeof *rq->V3AndBelowTopics);
    rq->V3AndBelowTopicsCount = 0;
    for (struct check *c = group; c; c = c->next)
        for (int i = 0; i < c->n; i++) {
            struct AddPartitionsToTxnRequest_AddPartitionsToTxnTopic *t = NULL;
            for (int k = 0; k < rq->V3AndBelowTopicsCount && !t; k++)
                if (strcmp(rq->V3AndBelowTopics[k].Name, c->topics[i]) == 0) t = &rq->V3AndBelowTopics[k];
            if (!t) {
                t = &rq->V3AndBelowTopics[rq->V3AndBelowTopicsCount++];
                t->Name = c->topics[i];
                t->PartitionsCount = 0;
                t->Partitions = gr_arena_alloc(&a, (size_t)total * sizeof *t->Partitions);
            }
            bool have = false;
            for (int k = 0; k < t->PartitionsCount && !have; k++) have = t->Partitions[k] == c->parts[i];
            if (!have) t->Partitions[t->PartitionsCount++] = c->parts[i];
        }
    void *body = NULL;
    uint8_t *frame = NULL;
    bool kept = gr_kafka_client_connected(nd->kc);
    int rc = gr_kafka_client_call(nd->kc, GR_API_ADD_PARTITIONS_TO_TXN, 1, rq, GR_APTM_REQUEST_TIMEOUT_MS, &a, &body,
                                  &frame);
    /* a kept connection the peer closed meanwhile (connections.max.idle.ms, a restart) fails the
     * first call at once: once more on a new connection; a timeout is not retried (a slow
     * coordinator would double the wait) */
    if (rc != 0 && kept && rc != GR_ETIMEOUT && !gr_kafka_client_is_shut_down(nd->kc))
        rc = gr_kafka_client_call(nd->kc, GR_API_ADD_PARTITIONS_TO_TXN, 1, rq, GR_APTM_REQUEST_TIMEOUT_MS, &a, &body,
                                  &frame);
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

/* Splits list into groups of one transaction (arrival order kept) and sends each. Once a request
 * failed (timeout, connection refused or lost), the rest of the list fails with it, as the one
 * merged request of Kafka's sender does: asking a stopped coordinator again for each transaction
 * would hold the last one GR_APTM_REQUEST_TIMEOUT_MS times the number of groups, its connection
 * muted all along. */
static void send_all(struct node *nd, struct check *list) {
    while (list) {
        struct check *group = list, **gt = &group->next;
        list = list->next;
        group->next = NULL;
        for (struct check **pp = &list; *pp;) {
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
        if (!send_group(nd, group)) {
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
                                          .request_timeout_ms = GR_APTM_REQUEST_TIMEOUT_MS};
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

struct gr_aptm *gr_aptm_new(struct gr_broker *b) {
    struct gr_aptm *m = gr_calloc(1, sizeof *m);
    m->b = b;
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
