/* AlterPartition sender (see alter_partition.h). */
#include "replication/alter_partition.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "net/kafka_client.h"
#include "protocol/codec.h"
#include "replication/replica_state.h" /* GR_RS_MAX_REPLICAS */
#include "replication/tp_index.h"     /* gr_tpi_hash */

#define LOGGER "kafka.server.DefaultAlterPartitionManager"
#define RETRY_BACKOFF_MS 500

struct item {
    char *topic;
    uint8_t topic_id[16]; /* zero: none */
    int32_t partition;
    int32_t leader_epoch;
    int32_t zk_version;
    int n;
    int32_t isr[GR_RS_MAX_REPLICAS];
    bool in_flight;
    bool cleared;  /* superseded or forgotten: drop it (and its answer, if in flight) */
    bool answered; /* scratch of send_batch: answered for good */
    uint64_t hash;
    struct item *next;  /* the queue */
    struct item *hnext; /* index chain (live items only) */
};

struct gr_alter_partition {
    struct gr_alter_partition_config cfg;
    const struct gr_alter_partition_ops *ops;
    void *ctx;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct item *items;
    /* Index of the live (not cleared) items by topic-partition: chained, power-of-two buckets,
     * doubled past one item per bucket. A leader proposes ISR changes for thousands of
     * partitions at once (a restarted follower catching up), and every lookup used to scan the
     * queue (O(n^2) per batch). */
    struct item **tab;
    size_t ntab, nlive;
    bool stop;
    pthread_t thread;
    bool started;
    struct gr_kafka_client *kc; /* used by the thread; shut down by gr_alter_partition_free */
};

static void item_free(struct item *it) {
    free(it->topic);
    free(it);
}

/* ---- the index (a->lock held) ---- */

static struct item **idx_slot(struct gr_alter_partition *a, uint64_t h, const char *topic, int32_t partition) {
    struct item **pp = &a->tab[h & (a->ntab - 1)];
    while (*pp && !((*pp)->hash == h && (*pp)->partition == partition && strcmp((*pp)->topic, topic) == 0))
        pp = &(*pp)->hnext;
    return pp;
}

/* The live item of topic-partition, or NULL. */
static struct item *idx_find(struct gr_alter_partition *a, const char *topic, int32_t partition) {
    return a->ntab ? *idx_slot(a, gr_tpi_hash(topic, partition), topic, partition) : NULL;
}

static void idx_add(struct gr_alter_partition *a, struct item *it) {
    if (a->nlive + 1 > a->ntab) {
        size_t old_n = a->ntab;
        struct item **old = a->tab;
        a->ntab = old_n ? old_n * 2 : 64;
        a->tab = gr_calloc(a->ntab, sizeof *a->tab);
        for (size_t b = 0; b < old_n; b++)
            for (struct item *x = old[b], *nx; x; x = nx) {
                nx = x->hnext;
                x->hnext = a->tab[x->hash & (a->ntab - 1)];
                a->tab[x->hash & (a->ntab - 1)] = x;
            }
        free(old);
    }
    it->hnext = a->tab[it->hash & (a->ntab - 1)];
    a->tab[it->hash & (a->ntab - 1)] = it;
    a->nlive++;
}

/* Marks a live item cleared and drops it from the index; the queue frees it later. */
static void clear_item(struct gr_alter_partition *a, struct item *it) {
    struct item **pp = idx_slot(a, it->hash, it->topic, it->partition);
    if (*pp == it) {
        *pp = it->hnext;
        a->nlive--;
    }
    it->hnext = NULL;
    it->cleared = true;
}

/* Frees cleared items that are not in flight. */
static void sweep_locked(struct gr_alter_partition *a) {
    struct item **pp = &a->items;
    while (*pp) {
        struct item *it = *pp;
        if (it->cleared && !it->in_flight) {
            *pp = it->next;
            item_free(it);
        } else {
            pp = &it->next;
        }
    }
}

void gr_alter_partition_enqueue(struct gr_alter_partition *a, const char *topic, const uint8_t *topic_id,
                                int32_t partition, int32_t leader_epoch, const int32_t *new_isr, int n,
                                int32_t zk_version) {
    if (!a || n < 0 || n > GR_RS_MAX_REPLICAS) return;
    pthread_mutex_lock(&a->lock);
    struct item *it = idx_find(a, topic, partition);
    if (it && it->in_flight) {
        clear_item(a, it); /* its answer no longer matters */
        it = NULL;
    }
    if (!it) {
        it = gr_calloc(1, sizeof *it);
        it->topic = gr_strdup(topic);
        it->partition = partition;
        it->hash = gr_tpi_hash(topic, partition);
        it->next = a->items;
        a->items = it;
        idx_add(a, it);
    }
    if (topic_id) memcpy(it->topic_id, topic_id, sizeof it->topic_id);
    else memset(it->topic_id, 0, sizeof it->topic_id);
    it->leader_epoch = leader_epoch;
    it->zk_version = zk_version;
    it->n = n;
    memcpy(it->isr, new_isr, (size_t)n * sizeof *new_isr);
    pthread_cond_broadcast(&a->cond);
    pthread_mutex_unlock(&a->lock);
}

void gr_alter_partition_clear_many(struct gr_alter_partition *a, const char *const *topics, const int32_t *partitions,
                                   int n) {
    if (!a || n <= 0) return;
    pthread_mutex_lock(&a->lock);
    for (int i = 0; i < n && a->nlive > 0; i++) {
        struct item *it = idx_find(a, topics[i], partitions[i]);
        if (it) clear_item(a, it);
    }
    pthread_mutex_unlock(&a->lock);
}

void gr_alter_partition_clear(struct gr_alter_partition *a, const char *topic, int32_t partition) {
    gr_alter_partition_clear_many(a, &topic, &partition, 1);
}

int gr_alter_partition_pending(struct gr_alter_partition *a) {
    pthread_mutex_lock(&a->lock);
    int n = (int)a->nlive;
    pthread_mutex_unlock(&a->lock);
    return n;
}

static void timed_wait(struct gr_alter_partition *a, int64_t ms) {
    struct timespec ts = gr_timespec_after_ms(CLOCK_MONOTONIC, ms);
    pthread_cond_timedwait(&a->cond, &a->lock, &ts);
}

/* Points the client at the active controller (a new controller or endpoint drops the old
 * connection). a->lock NOT held. */
static int target_controller(struct gr_alter_partition *a) {
    int32_t ctrl = -1, port = -1;
    char host[256];
    if (!a->ops->controller_endpoint(a->ctx, &ctrl, host, sizeof host, &port)) return -EHOSTUNREACH;
    gr_kafka_client_set_target(a->kc, ctrl, host, port);
    return 0;
}

static bool id_is_zero(const uint8_t *id) {
    static const uint8_t zero[16];
    return memcmp(id, zero, 16) == 0;
}

/* (topic id, topic name) of the items sent at v2+, sorted by id: the answers name topics by id. */
struct sent_id {
    uint8_t id[16];
    const char *topic; /* in the request's arena */
};

static int sent_id_cmp(const void *x, const void *y) { return memcmp(x, y, 16); }

/* Sends every queued item once; applies the answers. a->lock held on entry and exit. */
static int send_batch(struct gr_alter_partition *a) {
    int n = 0;
    int16_t version = a->cfg.version < 0 ? 0 : a->cfg.version > 3 ? 3 : a->cfg.version;
    for (struct item *it = a->items; it; it = it->next)
        if (!it->cleared) {
            it->in_flight = true;
            n++;
            if (id_is_zero(it->topic_id) && version > 1) version = 1; /* Kafka's canUseTopicIds */
        }
    if (n == 0) return 0;
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct AlterPartitionRequest *req = gr_proto_new(&ar, &gr_desc_AlterPartitionRequest);
    req->BrokerId = a->cfg.broker_id;
    req->BrokerEpoch = a->ops->broker_epoch(a->ctx);
    req->TopicsCount = n;
    req->Topics = gr_arena_alloc(&ar, (size_t)n * sizeof *req->Topics);
    struct sent_id *ids = gr_arena_alloc(&ar, (size_t)n * sizeof *ids);
    int k = 0;
    for (struct item *it = a->items; it; it = it->next) {
        if (!it->in_flight || it->cleared) continue;
        struct AlterPartitionRequest_TopicData *t = &req->Topics[k];
        gr_proto_init_struct(&gr_desc_AlterPartitionRequest_TopicData, t);
        t->TopicName = gr_arena_strdup(&ar, it->topic);
        memcpy(t->TopicId, it->topic_id, sizeof t->TopicId);
        memcpy(ids[k].id, it->topic_id, 16);
        ids[k].topic = t->TopicName;
        k++;
        t->PartitionsCount = 1;
        t->Partitions = gr_arena_alloc(&ar, sizeof *t->Partitions);
        struct AlterPartitionRequest_PartitionData *pd = &t->Partitions[0];
        gr_proto_init_struct(&gr_desc_AlterPartitionRequest_PartitionData, pd);
        pd->PartitionIndex = it->partition;
        pd->LeaderEpoch = it->leader_epoch;
        pd->PartitionEpoch = it->zk_version;
        pd->LeaderRecoveryState = 0; /* RECOVERED: Gregor has no KIP-704 recovery */
        if (version >= 3) {
            pd->NewIsrCount = 0;
            pd->NewIsrWithEpochsCount = it->n;
            pd->NewIsrWithEpochs = gr_arena_alloc(&ar, (size_t)(it->n + 1) * sizeof *pd->NewIsrWithEpochs);
            for (int i = 0; i < it->n; i++) {
                pd->NewIsrWithEpochs[i].BrokerId = it->isr[i];
                pd->NewIsrWithEpochs[i].BrokerEpoch = it->isr[i] == req->BrokerId ? req->BrokerEpoch : -1;
            }
        } else {
            pd->NewIsrCount = it->n;
            pd->NewIsr = gr_arena_alloc(&ar, (size_t)(it->n + 1) * sizeof(int32_t));
            memcpy(pd->NewIsr, it->isr, (size_t)it->n * sizeof(int32_t));
        }
    }
    pthread_mutex_unlock(&a->lock);
    if (version >= 2) qsort(ids, (size_t)n, sizeof *ids, sent_id_cmp);

    int rc = target_controller(a);
    uint8_t *frame = NULL;
    void *body = NULL;
    if (rc == 0) rc = gr_kafka_client_call(a->kc, GR_API_ALTER_PARTITION, version, req, 0, &ar, &body, &frame);
    struct AlterPartitionResponse *resp = body;
    if (rc == 0 && resp->ErrorCode != GR_KERR_NONE) {
        gr_warn(LOGGER, "[broker %d] controller answered AlterPartition with %s; retrying", a->cfg.broker_id,
                gr_kerr_name(resp->ErrorCode));
        rc = -EAGAIN;
    } else if (rc < 0) {
        gr_warn(LOGGER, "[broker %d] cannot send AlterPartition to the controller: %s; retrying", a->cfg.broker_id,
                gr_strerror(rc));
    }
    /* Apply per-partition answers outside our lock (they take partition locks, which may be held
     * by threads waiting to enqueue). Items answered are removed; the rest stay queued. */
    struct done {
        char *topic;
        int32_t partition;
        bool resend;
    } *dn = gr_calloc((size_t)n + 1, sizeof *dn);
    int nd = 0;
    if (rc == 0) {
        for (int t = 0; t < resp->TopicsCount; t++) {
            const struct AlterPartitionResponse_TopicData *td = &resp->Topics[t];
            const char *topic = td->TopicName ? td->TopicName : "";
            if (version >= 2) {
                const struct sent_id *hit = bsearch(td->TopicId, ids, (size_t)n, sizeof *ids, sent_id_cmp);
                if (!hit) {
                    gr_error(LOGGER, "[broker %d] AlterPartition answer names a topic id that was not sent; ignored",
                             a->cfg.broker_id);
                    continue;
                }
                topic = hit->topic;
            }
            for (int i = 0; i < td->PartitionsCount && nd < n; i++) {
                const struct AlterPartitionResponse_PartitionData *pd = &td->Partitions[i];
                /* What was sent for it: an in-flight item is never modified (enqueue replaces it) */
                int32_t sent_epoch = 0, sent_zk = 0, sent_isr[GR_RS_MAX_REPLICAS];
                int sent_n = 0;
                pthread_mutex_lock(&a->lock);
                struct item *live = idx_find(a, topic, pd->PartitionIndex);
                bool stale = !live || !live->in_flight;
                if (!stale) {
                    sent_epoch = live->leader_epoch;
                    sent_zk = live->zk_version;
                    sent_n = live->n;
                    memcpy(sent_isr, live->isr, (size_t)sent_n * sizeof *sent_isr);
                }
                pthread_mutex_unlock(&a->lock);
                if (stale) continue;
                /* An error answer carries no state: it is applied to the proposal that was sent
                 * (gr_rs_apply_alter_partition), which the partition may have replaced meanwhile
                 * (a LeaderAndIsr and a new proposal between the check above and this call). */
                int r = pd->ErrorCode != GR_KERR_NONE
                            ? a->ops->result(a->ctx, topic, pd->PartitionIndex, pd->ErrorCode, sent_epoch, sent_isr,
                                             sent_n, sent_zk)
                            : a->ops->result(a->ctx, topic, pd->PartitionIndex, pd->ErrorCode, pd->LeaderEpoch,
                                             pd->Isr, pd->IsrCount > 0 ? pd->IsrCount : 0, pd->PartitionEpoch);
                dn[nd].topic = gr_strdup(topic);
                dn[nd].partition = pd->PartitionIndex;
                dn[nd].resend = r == -1;
                nd++;
            }
        }
    }
    free(frame);
    gr_arena_free(&ar);
    pthread_mutex_lock(&a->lock);
    for (int i = 0; i < nd; i++) {
        struct item *it = dn[i].resend ? NULL : idx_find(a, dn[i].topic, dn[i].partition);
        if (it && it->in_flight) clear_item(a, it); /* done */
    }
    for (struct item *it = a->items; it; it = it->next) it->in_flight = false;
    sweep_locked(a);
    for (int i = 0; i < nd; i++) free(dn[i].topic);
    free(dn);
    return rc;
}

static void *alter_partition_main(void *arg) {
    struct gr_alter_partition *a = arg;
    pthread_setname_np(pthread_self(), "alter-isr");
    pthread_mutex_lock(&a->lock);
    while (!a->stop) {
        sweep_locked(a);
        if (a->nlive == 0) {
            timed_wait(a, 1000);
            continue;
        }
        int rc = send_batch(a);
        if (rc < 0 && !a->stop) timed_wait(a, RETRY_BACKOFF_MS);
        /* Items that must be resent go again at once on the next loop, after a short pause
         * so that a controller answering with a retriable error is not hammered. */
        else if (!a->stop) timed_wait(a, 50);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

struct gr_alter_partition *gr_alter_partition_new(const struct gr_alter_partition_config *cfg,
                                                  const struct gr_alter_partition_ops *ops, void *ctx) {
    struct gr_alter_partition *a = gr_calloc(1, sizeof *a);
    a->cfg = *cfg;
    a->ops = ops;
    a->ctx = ctx;
    char cid[32];
    snprintf(cid, sizeof cid, "broker-%d-alter-isr", cfg->broker_id);
    int timeout = cfg->socket_timeout_ms > 0 ? cfg->socket_timeout_ms : 30000;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "[AlterPartitionManager broker=%d]", cfg->broker_id);
    struct gr_kafka_client_config kcfg = {.client_id = cid, .logger = LOGGER, .log_prefix = prefix,
                                          .connect_timeout_ms = timeout, .request_timeout_ms = timeout};
    a->kc = gr_kafka_client_new(&kcfg);
    pthread_mutex_init(&a->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->cond, &ca);
    pthread_condattr_destroy(&ca);
    gr_info(LOGGER, "[broker %d] sends AlterPartition v%d (inter.broker.protocol.version)", cfg->broker_id,
            cfg->version);
    if (pthread_create(&a->thread, NULL, alter_partition_main, a) == 0) a->started = true;
    else gr_error(LOGGER, "cannot start the AlterPartition thread");
    return a;
}

void gr_alter_partition_free(struct gr_alter_partition *a) {
    if (!a) return;
    pthread_mutex_lock(&a->lock);
    a->stop = true;
    pthread_cond_broadcast(&a->cond);
    pthread_mutex_unlock(&a->lock);
    gr_kafka_client_shutdown(a->kc);
    if (a->started) pthread_join(a->thread, NULL);
    gr_kafka_client_free(a->kc);
    while (a->items) {
        struct item *it = a->items;
        a->items = it->next;
        item_free(it);
    }
    free(a->tab);
    pthread_cond_destroy(&a->cond);
    pthread_mutex_destroy(&a->lock);
    free(a);
}
