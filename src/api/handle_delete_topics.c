/* DeleteTopics v0-6 (api key 20), Kafka 3.9's KafkaApis.handleDeleteTopicsRequest (ZooKeeper
 * mode) + AdminManager.deleteTopics + DelayedDeleteTopics:
 *   - v6 (KIP-516) names each topic by name or by topic id (resolved through this broker's
 *     metadata cache, where Kafka asks the controller context of the same broker): an unknown id
 *     -> UNKNOWN_TOPIC_ID; an id whose topic the principal may not describe ->
 *     TOPIC_AUTHORIZATION_FAILED with a null name; a topic with both a name and an id ->
 *     INVALID_REQUEST for every topic of the request (Kafka's InvalidRequestException); answers
 *     carry the id given (ZERO_UUID for topics named);
 *   - the controller mutation quota (KIP-599, broker/controller_mutation_quota.h) takes one token
 *     per partition of each topic before it is marked; strict from v5: THROTTLING_QUOTA_EXCEEDED
 *     for a topic that finds the quota exceeded; ThrottleTimeMs and the channel mute either way;
 *   - not the active controller            -> NOT_CONTROLLER for every topic;
 *   - delete.topic.enable=false            -> TOPIC_DELETION_DISABLED (v3+) / INVALID_REQUEST
 *                                             (v0-2) for every topic;
 *   - no Topic DELETE permission           -> TOPIC_AUTHORIZATION_FAILED (api/authorize.h),
 *                                             whether or not the topic exists;
 *   - topic unknown to the metadata cache  -> UNKNOWN_TOPIC_OR_PARTITION; a topic named twice is
 *                                             handled once (both entries get its result);
 *   - otherwise /admin/delete_topics/T is created (already there is fine: the request still
 *     waits), a topic gone from ZooKeeper meanwhile -> UNKNOWN_TOPIC_OR_PARTITION, a ZooKeeper
 *     failure -> UNKNOWN_SERVER_ERROR;
 *   - then the request waits until none of its topics is in this broker's metadata cache (the
 *     controller's UpdateMetadata with leader -2 removes them) -> NONE, or TimeoutMs expires ->
 *     REQUEST_TIMED_OUT for those still present. TimeoutMs <= 0 answers REQUEST_TIMED_OUT at
 *     once for the topics marked.
 * The wait never blocks an I/O thread: waiters are kept in a list re-checked every 20 ms by one
 * thread (started on first use, lives for the process). gr_delete_topics_abort_waits answers a
 * broker's waiters at shut-down (after its network server stopped, before the broker is freed). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "broker/controller_mutation_quota.h"
#include "broker/metadata_cache.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "common/uuid.h"
#include "zk/kzk.h"

#define LOGGER "kafka.server.AdminManager"
#define POLL_MS 20

static const uint8_t NO_ID[16];

struct dt_wait {
    struct gr_broker *b;
    struct gr_api_req *req;
    struct DeleteTopicsResponse *resp;
    int n;            /* awaited entries */
    int *idx;         /* response index of each */
    int64_t deadline_ms;
    struct dt_wait *next;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct dt_wait *head;
    bool started;
    pthread_t thread;
} W = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, false, 0};

/* Answers w: entries whose topic is still cached get REQUEST_TIMED_OUT. Frees w (not req). */
static void finish(struct dt_wait *w) {
    for (int i = 0; i < w->n; i++) {
        struct DeleteTopicsResponse_DeletableTopicResult *r = &w->resp->Responses[w->idx[i]];
        if (gr_mdc_contains_topic(w->b->metadata, r->Name)) r->ErrorCode = GR_KERR_REQUEST_TIMED_OUT;
    }
    gr_api_respond(w->req, w->resp);
    free(w->idx);
    free(w);
}

static bool gone(const struct dt_wait *w) {
    for (int i = 0; i < w->n; i++)
        if (gr_mdc_contains_topic(w->b->metadata, w->resp->Responses[w->idx[i]].Name)) return false;
    return true;
}

/* Unlinks the waits that match (W.mu held) and returns them as a list. */
static struct dt_wait *take_locked(bool (*match)(const struct dt_wait *, const void *), const void *arg) {
    struct dt_wait *taken = NULL, **pp = &W.head;
    while (*pp) {
        struct dt_wait *w = *pp;
        if (match(w, arg)) {
            *pp = w->next;
            w->next = taken;
            taken = w;
        } else {
            pp = &w->next;
        }
    }
    return taken;
}

static void finish_all(struct dt_wait *list) {
    while (list) {
        struct dt_wait *w = list;
        list = w->next;
        finish(w);
    }
}

static bool done_or_due(const struct dt_wait *w, const void *now_ms) {
    return gone(w) || *(const int64_t *)now_ms >= w->deadline_ms;
}

static bool of_broker(const struct dt_wait *w, const void *b) { return w->b == b; }

static void *waiter_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&W.mu);
    for (;;) {
        while (!W.head) pthread_cond_wait(&W.cv, &W.mu);
        int64_t now = gr_mono_ms();
        struct dt_wait *done = take_locked(done_or_due, &now);
        pthread_mutex_unlock(&W.mu);
        finish_all(done);
        struct timespec ts = gr_timespec_after_ms(CLOCK_REALTIME, POLL_MS);
        pthread_mutex_lock(&W.mu);
        pthread_cond_timedwait(&W.cv, &W.mu, &ts);
    }
    return NULL;
}

static void park(struct dt_wait *w) {
    pthread_mutex_lock(&W.mu);
    if (!W.started) {
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&W.thread, &at, waiter_main, NULL) == 0) W.started = true;
        pthread_attr_destroy(&at);
        if (!W.started) {
            pthread_mutex_unlock(&W.mu);
            gr_error(LOGGER, "cannot start the topic deletion waiter thread; answering at once");
            finish(w);
            return;
        }
    }
    w->next = W.head;
    W.head = w;
    pthread_cond_broadcast(&W.cv);
    pthread_mutex_unlock(&W.mu);
}

void gr_delete_topics_abort_waits(struct gr_broker *b) {
    pthread_mutex_lock(&W.mu);
    struct dt_wait *done = take_locked(of_broker, b);
    pthread_mutex_unlock(&W.mu);
    finish_all(done);
}

/* AdminZkClient.deleteTopic: the topic must exist in ZooKeeper; mark it for deletion. */
/* expect_id (v6 by id, else NULL): the id the name was resolved from. This broker's metadata
 * cache lags the topic znode: a topic deleted and re-created under the same name (a client
 * retrying a DeleteTopics by id that already succeeded) is still the old id's in the cache; the
 * znode is the truth, so a name whose znode holds another id (or none) is not the topic asked
 * for: UNKNOWN_TOPIC_ID, and the topic of that name is left alone. */
static int16_t mark_for_deletion(struct gr_broker *b, const char *topic, const struct gr_uuid *expect_id) {
    if (!b->zk) return GR_KERR_UNKNOWN_SERVER_ERROR;
    struct gr_kzk_topic_assignment a;
    memset(&a, 0, sizeof a);
    int rc = gr_kzk_get_topic_assignments(b->zk, &topic, 1, false, &a);
    int arc = a.rc;
    bool other_id = false;
    if (rc == 0 && arc == 0 && expect_id) {
        struct gr_uuid have;
        other_id = !a.topic_id || gr_uuid_parse(a.topic_id, &have) != 0 || !gr_uuid_equal(&have, expect_id);
    }
    gr_kzk_topic_assignment_release(&a);
    if (rc == 0 && arc == GR_KZK_ENONODE) return expect_id ? GR_KERR_UNKNOWN_TOPIC_ID : GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
    if (other_id) {
        gr_warn(LOGGER, "Not deleting topic %s: its znode holds another topic id than the one requested", topic);
        return GR_KERR_UNKNOWN_TOPIC_ID;
    }
    if (rc == 0) rc = gr_kzk_create_topic_deletion(b->zk, topic);
    if (rc != 0) {
        gr_error(LOGGER, "Error processing delete topic request for topic %s: %s", topic, gr_kzk_strerror(rc));
        return GR_KERR_UNKNOWN_SERVER_ERROR;
    }
    gr_info(LOGGER, "Topic %s marked for deletion", topic);
    return GR_KERR_NONE;
}

void gr_handle_delete_topics(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                             void *body) {
    const struct DeleteTopicsRequest *rq = body;
    int16_t ver = hdr->RequestApiVersion;
    struct DeleteTopicsResponse *resp = gr_api_new_response(req);
    int n = ver >= 6 ? (rq->TopicsCount > 0 ? rq->TopicsCount : 0) : (rq->TopicNamesCount > 0 ? rq->TopicNamesCount : 0);
    resp->ThrottleTimeMs = 0;
    resp->ResponsesCount = n;
    resp->Responses = gr_api_alloc(req, sizeof(*resp->Responses) * (size_t)(n ? n : 1));
    /* v6 (KIP-516): each topic by name or by id; both -> INVALID_REQUEST for every topic (Kafka
     * throws InvalidRequestException) */
    for (int i = 0; ver >= 6 && i < n; i++) {
        struct DeleteTopicsResponse_DeletableTopicResult *r = &resp->Responses[i];
        r->Name = rq->Topics[i].Name;
        memcpy(r->TopicId, rq->Topics[i].TopicId, 16);
    }
    for (int i = 0; ver >= 6 && i < n; i++)
        if (rq->Topics[i].Name && memcmp(rq->Topics[i].TopicId, NO_ID, 16) != 0) {
            for (int j = 0; j < n; j++) {
                resp->Responses[j].ErrorCode = GR_KERR_INVALID_REQUEST;
                resp->Responses[j].ErrorMessage = "Topic name and topic ID can not both be specified.";
            }
            gr_api_respond(req, resp);
            return;
        }
    int16_t whole = GR_KERR_NONE;
    if (!gr_broker_is_controller(b)) whole = GR_KERR_NOT_CONTROLLER;
    else if (b->cfg && !b->cfg->delete_topic_enable) whole = ver < 3 ? GR_KERR_INVALID_REQUEST : GR_KERR_TOPIC_DELETION_DISABLED;
    int *idx = gr_calloc((size_t)(n ? n : 1), sizeof *idx);
    int n_wait = 0;
    struct gr_cmq_req cq; /* KIP-599: strict from v5 */
    gr_cmq_begin(b, req, 5, &cq);
    for (int i = 0; i < n; i++) {
        struct DeleteTopicsResponse_DeletableTopicResult *r = &resp->Responses[i];
        if (ver < 6) r->Name = rq->TopicNames[i];
        r->ErrorMessage = NULL;
        r->ErrorCode = whole;
        if (whole != GR_KERR_NONE) continue;
        if (ver >= 6 && memcmp(r->TopicId, NO_ID, 16) != 0) { /* by id: the name the cache has */
            struct gr_uuid id;
            memcpy(id.b, r->TopicId, 16);
            char *name = gr_mdc_topic_name_by_id(b->metadata, &id);
            r->Name = name ? gr_api_strdup(req, name) : NULL;
            free(name);
            if (!r->Name) {
                r->ErrorCode = GR_KERR_UNKNOWN_TOPIC_ID;
                continue;
            }
            if (!gr_api_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, r->Name)) {
                r->Name = NULL; /* not disclosed; the id is no secret */
                r->ErrorCode = GR_KERR_TOPIC_AUTHORIZATION_FAILED;
                continue;
            }
        }
        if (!r->Name || !gr_api_authorized(req, GR_ACL_OP_DELETE, GR_ACL_RES_TOPIC, r->Name)) {
            /* v6 with neither name nor id: Kafka's authorization filter drops null names */
            r->ErrorCode = GR_KERR_TOPIC_AUTHORIZATION_FAILED;
            continue;
        }
        if (!r->Name || !gr_mdc_contains_topic(b->metadata, r->Name)) {
            r->ErrorCode = GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
            continue;
        }
        int dup = -1;
        for (int j = 0; j < i; j++)
            if (resp->Responses[j].Name && strcmp(resp->Responses[j].Name, r->Name) == 0) dup = j;
        if (dup >= 0) {
            r->ErrorCode = resp->Responses[dup].ErrorCode;
            r->ErrorMessage = resp->Responses[dup].ErrorMessage;
        } else if (gr_cmq_record(&cq, gr_mdc_num_partitions(b->metadata, r->Name)) != GR_KERR_NONE) {
            r->ErrorCode = GR_KERR_THROTTLING_QUOTA_EXCEEDED;
            r->ErrorMessage = GR_CMQ_MESSAGE;
        } else {
            struct gr_uuid want;
            bool by_id = ver >= 6 && memcmp(r->TopicId, NO_ID, 16) != 0;
            if (by_id) memcpy(want.b, r->TopicId, 16);
            r->ErrorCode = mark_for_deletion(b, r->Name, by_id ? &want : NULL);
        }
        if (r->ErrorCode == GR_KERR_NONE) idx[n_wait++] = i;
    }
    resp->ThrottleTimeMs = gr_cmq_finish(req, &cq);
    if (n_wait == 0) {
        free(idx);
        gr_api_respond(req, resp);
        return;
    }
    if (rq->TimeoutMs <= 0) {
        for (int i = 0; i < n_wait; i++) resp->Responses[idx[i]].ErrorCode = GR_KERR_REQUEST_TIMED_OUT;
        free(idx);
        gr_api_respond(req, resp);
        return;
    }
    struct dt_wait *w = gr_calloc(1, sizeof *w);
    w->b = b;
    w->req = req; /* apis.h rule 2: answered later from the waiter thread */
    w->resp = resp;
    w->n = n_wait;
    w->idx = idx;
    w->deadline_ms = gr_mono_ms() + rq->TimeoutMs;
    park(w);
}
