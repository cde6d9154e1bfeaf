/* Controller channel manager: see channel_manager.h. */
#include "controller/channel_manager.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/config.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "controller/event_manager.h"
#include "controller/response.h"
#include "net/kafka_client.h"
#include "protocol/codec.h"

#define LOGGER "kafka.controller.ControllerChannelManager"
#define MGROUP "kafka.controller:type=ControllerChannelManager"

/* Shared by the manager and its threads (reference counted): counts live send threads. */
struct shared {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int live_threads;
    int refs;
};

static void shared_unref(struct shared *s) {
    pthread_mutex_lock(&s->lock);
    int left = --s->refs;
    pthread_mutex_unlock(&s->lock);
    if (left == 0) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->cond);
        free(s);
    }
}

struct item {
    int16_t api_key, api_version;
    void *request;
    void (*request_free)(void *);
    struct gr_ctrl_event *completion;
    int64_t enqueue_ms;
    struct item *next;
};

static void item_free(struct item *it) {
    if (it->request && it->request_free) it->request_free(it->request);
    gr_ctrl_event_free(it->completion);
    free(it);
}

/* One broker's queue and send thread. Fields marked (L) are guarded by lock; the event manager and
 * metric pointers may only be used under lock while !stopping (rule 2). */
struct chan {
    int32_t id;
    int32_t controller_id;
    char *host;
    int port;
    int timeout_ms;
    int backoff_ms;
    char client_id[32];
    char qsize_name[160], timer_name[160];

    pthread_mutex_t lock;
    pthread_cond_t cond;      /* queue non-empty / stopping; CLOCK_MONOTONIC */
    struct item *head, *tail; /* (L) */
    int64_t qlen;             /* (L) */
    bool in_flight;           /* (L) the thread holds a request taken from the queue */
    bool stopping;            /* (L) */
    struct gr_kafka_client *kc; /* used by the thread; shut down by stop_chan (any thread) */
    struct gr_ctrl_events *em;/* (L) */
    struct gr_gauge *qgauge, *total; /* (L) */
    struct gr_timer *timer;   /* (L) */
    struct gr_metrics *metrics;

    struct shared *sh;
    pthread_t thread;
    struct chan *next; /* manager list */
};

struct gr_ctrl_channel {
    int32_t controller_id;
    char *listener;
    int timeout_ms;
    int backoff_ms;
    struct gr_metrics *metrics;
    struct gr_gauge *total;
    struct gr_ctrl_events *em;
    pthread_mutex_t lock; /* chans list (queue_size may be called from any thread) */
    struct chan *chans;
    struct shared *sh;
};

static void chan_free(struct chan *c) {
    struct item *it = c->head;
    while (it) {
        struct item *n = it->next;
        item_free(it);
        it = n;
    }
    gr_kafka_client_free(c->kc);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c->host);
    free(c);
}

static bool is_stopping(struct chan *c) {
    pthread_mutex_lock(&c->lock);
    bool s = c->stopping;
    pthread_mutex_unlock(&c->lock);
    return s;
}

/* Sends one request until answered or stopping (the Kafka client reconnects after any failure
 * and waits backoff_ms between attempts; stop_chan shuts it down). Returns the decoded response
 * or NULL. */
static struct gr_ctrl_response *send_until_answered(struct chan *c, struct item *it) {
    struct gr_ctrl_response *r = gr_ctrl_response_new();
    r->api_key = it->api_key;
    r->api_version = it->api_version;
    r->broker_id = c->id;
    int rc = gr_kafka_client_call_until_answered(c->kc, it->api_key, it->api_version, it->request, c->timeout_ms,
                                                 c->backoff_ms, &r->arena, &r->body, &r->frame);
    if (rc == 0) return r;
    if (rc != GR_ECLOSED && !is_stopping(c))
        gr_error(LOGGER, "Controller %d cannot send request api_key=%d v%d to broker %d: %s; dropping it",
                 c->controller_id, it->api_key, it->api_version, c->id, gr_proto_strerror(rc));
    gr_ctrl_response_free(r);
    return NULL;
}

static void *send_thread(void *arg) {
    struct chan *c = arg;
    char name[16];
    snprintf(name, sizeof name, "ctrl-send-%d", c->id);
    pthread_setname_np(pthread_self(), name);
    for (;;) {
        pthread_mutex_lock(&c->lock);
        while (!c->stopping && !c->head) pthread_cond_wait(&c->cond, &c->lock);
        if (c->stopping) {
            pthread_mutex_unlock(&c->lock);
            break;
        }
        struct item *it = c->head;
        c->head = it->next;
        if (!c->head) c->tail = NULL;
        c->qlen--;
        c->in_flight = true;
        if (c->qgauge) gr_gauge_set(c->qgauge, c->qlen);
        if (c->total) gr_gauge_add(c->total, -1);
        if (c->timer) gr_timer_update(c->timer, (double)(gr_mono_ms() - it->enqueue_ms));
        pthread_mutex_unlock(&c->lock);

        struct gr_ctrl_response *r = send_until_answered(c, it);
        if (r) {
            /* the response owns the request from now on */
            r->request = it->request;
            r->request_free = it->request_free;
            it->request = NULL;
            if (it->completion) {
                pthread_mutex_lock(&c->lock);
                if (!c->stopping && c->em) {
                    it->completion->payload = r;
                    it->completion->payload_free = gr_ctrl_response_free;
                    it->completion->broker_id = c->id;
                    gr_ctrl_events_put(c->em, it->completion);
                    it->completion = NULL;
                    r = NULL;
                }
                pthread_mutex_unlock(&c->lock);
            }
            gr_ctrl_response_free(r);
        }
        item_free(it);
        pthread_mutex_lock(&c->lock);
        c->in_flight = false;
        pthread_mutex_unlock(&c->lock);
        pthread_mutex_lock(&c->sh->lock); /* op_wait_idle: see there */
        pthread_cond_broadcast(&c->sh->cond);
        pthread_mutex_unlock(&c->sh->lock);
    }
    struct shared *sh = c->sh;
    chan_free(c);
    pthread_mutex_lock(&sh->lock);
    sh->live_threads--;
    pthread_cond_broadcast(&sh->cond);
    pthread_mutex_unlock(&sh->lock);
    shared_unref(sh);
    return NULL;
}

/* ---- manager ---- */

struct gr_ctrl_channel *gr_ctrl_channel_new(const struct gr_ctrl_channel_config *cfg) {
    struct gr_ctrl_channel *ch = gr_calloc(1, sizeof *ch);
    ch->controller_id = cfg->controller_id;
    ch->listener = cfg->inter_broker_listener ? gr_strdup(cfg->inter_broker_listener) : NULL;
    ch->timeout_ms = cfg->socket_timeout_ms > 0 ? cfg->socket_timeout_ms : 30000;
    ch->backoff_ms = cfg->backoff_ms > 0 ? cfg->backoff_ms : 100;
    ch->metrics = cfg->metrics;
    pthread_mutex_init(&ch->lock, NULL);
    ch->sh = gr_calloc(1, sizeof *ch->sh);
    pthread_mutex_init(&ch->sh->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ch->sh->cond, &ca);
    pthread_condattr_destroy(&ca);
    ch->sh->refs = 1;
    if (ch->metrics) ch->total = gr_metrics_gauge(ch->metrics, MGROUP ",name=TotalQueueSize");
    return ch;
}

const char *gr_ctrl_channel_listener_name(const struct gr_config *cfg) {
    if (!cfg) return NULL;
    if (cfg->control_plane_listener_name && cfg->control_plane_listener_name[0]) return cfg->control_plane_listener_name;
    const struct gr_listener *l = gr_config_inter_broker_listener(cfg);
    return l ? l->name : NULL;
}

struct gr_ctrl_channel *gr_ctrl_channel_new_for_broker(const struct gr_config *cfg, int32_t broker_id,
                                                       struct gr_metrics *metrics) {
    struct gr_ctrl_channel_config cc = {
        .controller_id = broker_id,
        .inter_broker_listener = gr_ctrl_channel_listener_name(cfg),
        .socket_timeout_ms = cfg ? cfg->controller_socket_timeout_ms : 30000,
        .backoff_ms = 100,
        .metrics = metrics,
    };
    return gr_ctrl_channel_new(&cc);
}

static struct chan *unlink_chan(struct gr_ctrl_channel *ch, int32_t id) {
    pthread_mutex_lock(&ch->lock);
    struct chan **pp = &ch->chans, *c = NULL;
    while (*pp) {
        if ((*pp)->id == id) {
            c = *pp;
            *pp = c->next;
            break;
        }
        pp = &(*pp)->next;
    }
    pthread_mutex_unlock(&ch->lock);
    return c;
}

/* Tells a channel's thread to stop (rule 2) and removes its metrics. */
static void stop_chan(struct gr_ctrl_channel *ch, struct chan *c) {
    /* copy what we need: once stopping is set the thread may free c at any time */
    char qsize_name[sizeof c->qsize_name], timer_name[sizeof c->timer_name];
    memcpy(qsize_name, c->qsize_name, sizeof qsize_name);
    memcpy(timer_name, c->timer_name, sizeof timer_name);
    pthread_t thread = c->thread;
    pthread_detach(thread);
    pthread_mutex_lock(&c->lock);
    c->stopping = true;
    if (c->total) gr_gauge_add(c->total, -c->qlen);
    c->em = NULL;
    c->qgauge = c->total = NULL;
    c->timer = NULL;
    gr_kafka_client_shutdown(c->kc);
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    /* c must not be touched from here on */
    if (ch->metrics) {
        gr_metrics_remove(ch->metrics, qsize_name);
        gr_metrics_remove(ch->metrics, timer_name);
    }
}

static void op_remove_broker(void *ctx, int32_t id) {
    struct gr_ctrl_channel *ch = ctx;
    struct chan *c = unlink_chan(ch, id);
    if (!c) return;
    gr_info(LOGGER, "Controller %d removing broker %d's channel", ch->controller_id, id);
    stop_chan(ch, c);
}

static void op_add_broker(void *ctx, const struct gr_kzk_broker *b) {
    struct gr_ctrl_channel *ch = ctx;
    op_remove_broker(ctx, b->id); /* re-adding replaces (sender.h) */
    const struct gr_kzk_endpoint *ep = NULL;
    for (int i = 0; ch->listener && i < b->n_endpoints; i++)
        if (b->endpoints[i].listener && strcmp(b->endpoints[i].listener, ch->listener) == 0) ep = &b->endpoints[i];
    if (!ep && b->n_endpoints > 0) ep = &b->endpoints[0];
    if (!ep) gr_error(LOGGER, "Broker %d has no endpoint: requests to it will not be delivered", b->id);

    struct chan *c = gr_calloc(1, sizeof *c);
    c->id = b->id;
    c->controller_id = ch->controller_id;
    c->host = gr_strdup(ep && ep->host && ep->host[0] ? ep->host : "localhost");
    c->port = ep ? ep->port : -1;
    c->timeout_ms = ch->timeout_ms;
    c->backoff_ms = ch->backoff_ms;
    snprintf(c->client_id, sizeof c->client_id, "%d", ch->controller_id);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "[RequestSendThread controllerId=%d]", ch->controller_id);
    struct gr_kafka_client_config kcfg = {.client_id = c->client_id, .logger = LOGGER, .log_prefix = prefix,
                                          .connect_timeout_ms = c->timeout_ms, .request_timeout_ms = c->timeout_ms};
    c->kc = gr_kafka_client_new(&kcfg);
    gr_kafka_client_set_target(c->kc, c->id, c->host, c->port);
    snprintf(c->qsize_name, sizeof c->qsize_name, MGROUP ",name=QueueSize,broker-id=%d", b->id);
    snprintf(c->timer_name, sizeof c->timer_name, MGROUP ",name=RequestRateAndQueueTimeMs,broker-id=%d", b->id);
    pthread_mutex_init(&c->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cond, &ca);
    pthread_condattr_destroy(&ca);
    c->em = ch->em;
    c->metrics = ch->metrics;
    if (ch->metrics) {
        c->qgauge = gr_metrics_gauge(ch->metrics, c->qsize_name);
        c->timer = gr_metrics_timer(ch->metrics, c->timer_name);
        c->total = ch->total;
    }
    c->sh = ch->sh;
    pthread_mutex_lock(&ch->sh->lock);
    ch->sh->refs++;
    ch->sh->live_threads++;
    pthread_mutex_unlock(&ch->sh->lock);
    int rc = pthread_create(&c->thread, NULL, send_thread, c);
    if (rc) {
        gr_error(LOGGER, "Cannot start the send thread for broker %d: %s", b->id, strerror(rc));
        pthread_mutex_lock(&ch->sh->lock);
        ch->sh->refs--;
        ch->sh->live_threads--;
        pthread_mutex_unlock(&ch->sh->lock);
        if (ch->metrics) {
            gr_metrics_remove(ch->metrics, c->qsize_name);
            gr_metrics_remove(ch->metrics, c->timer_name);
        }
        chan_free(c);
        return;
    }
    pthread_mutex_lock(&ch->lock);
    c->next = ch->chans;
    ch->chans = c;
    pthread_mutex_unlock(&ch->lock);
    gr_info(LOGGER, "Controller %d added broker %d (%s:%d) with its request send thread", ch->controller_id, b->id,
            c->host, c->port);
}

static void op_startup(void *ctx, struct gr_ctrl_events *em) {
    struct gr_ctrl_channel *ch = ctx;
    ch->em = em;
}

static void op_shutdown(void *ctx) {
    struct gr_ctrl_channel *ch = ctx;
    for (;;) {
        pthread_mutex_lock(&ch->lock);
        struct chan *c = ch->chans;
        if (c) ch->chans = c->next;
        pthread_mutex_unlock(&ch->lock);
        if (!c) break;
        stop_chan(ch, c);
    }
    ch->em = NULL;
}

static void op_send(void *ctx, int32_t broker_id, int16_t api_key, int16_t api_version, void *request,
                    void (*request_free)(void *), struct gr_ctrl_event *completion) {
    struct gr_ctrl_channel *ch = ctx;
    struct item *it = gr_calloc(1, sizeof *it);
    it->api_key = api_key;
    it->api_version = api_version;
    it->request = request;
    it->request_free = request_free;
    it->completion = completion;
    it->enqueue_ms = gr_mono_ms();
    pthread_mutex_lock(&ch->lock);
    struct chan *c = ch->chans;
    while (c && c->id != broker_id) c = c->next;
    if (c) {
        pthread_mutex_lock(&c->lock);
        if (c->tail) c->tail->next = it;
        else c->head = it;
        c->tail = it;
        c->qlen++;
        if (c->qgauge) gr_gauge_set(c->qgauge, c->qlen);
        if (c->total) gr_gauge_add(c->total, 1);
        pthread_cond_signal(&c->cond);
        pthread_mutex_unlock(&c->lock);
    }
    pthread_mutex_unlock(&ch->lock);
    if (!c) {
        gr_warn(LOGGER, "Not sending request api_key=%d to broker %d, since it is offline.", api_key, broker_id);
        item_free(it);
    }
}

int64_t gr_ctrl_channel_queue_size(struct gr_ctrl_channel *ch, int32_t broker_id) {
    int64_t n = 0;
    pthread_mutex_lock(&ch->lock);
    for (struct chan *c = ch->chans; c; c = c->next) {
        if (broker_id >= 0 && c->id != broker_id) continue;
        pthread_mutex_lock(&c->lock);
        n += c->qlen;
        pthread_mutex_unlock(&c->lock);
    }
    pthread_mutex_unlock(&ch->lock);
    return n;
}

/* sender.h wait_idle. The waiter holds sh->lock while it counts and until it waits on sh->cond;
 * a send thread clears in_flight under its channel's lock and only then takes sh->lock to
 * broadcast, so a request finished after the count wakes the wait (no lost wake-up). Lock order:
 * sh->lock, ch->lock, c->lock (nobody takes sh->lock while holding the other two). */
static bool op_wait_idle(void *ctx, int timeout_ms) {
    struct gr_ctrl_channel *ch = ctx;
    struct shared *sh = ch->sh;
    struct timespec ts = gr_timespec_after_ms(CLOCK_MONOTONIC, timeout_ms); /* negative: now */
    pthread_mutex_lock(&sh->lock);
    bool idle = false;
    for (;;) {
        int64_t busy = 0;
        pthread_mutex_lock(&ch->lock);
        for (struct chan *c = ch->chans; c; c = c->next) {
            pthread_mutex_lock(&c->lock);
            busy += c->qlen + (c->in_flight ? 1 : 0);
            pthread_mutex_unlock(&c->lock);
        }
        pthread_mutex_unlock(&ch->lock);
        if (busy == 0) {
            idle = true;
            break;
        }
        /* 0: woken (or spuriously): count again; ETIMEDOUT or an error: give up, never spin */
        if (pthread_cond_timedwait(&sh->cond, &sh->lock, &ts) != 0) break;
    }
    pthread_mutex_unlock(&sh->lock);
    return idle;
}

void gr_ctrl_channel_free(struct gr_ctrl_channel *ch) {
    if (!ch) return;
    op_shutdown(ch);
    /* rule 3: wait for exiting threads, bounded */
    struct shared *sh = ch->sh;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ch->timeout_ms / 1000 + 2;
    pthread_mutex_lock(&sh->lock);
    while (sh->live_threads > 0)
        if (pthread_cond_timedwait(&sh->cond, &sh->lock, &ts) == ETIMEDOUT) break;
    if (sh->live_threads > 0)
        gr_warn(LOGGER, "%d controller send threads still exiting at shutdown", sh->live_threads);
    pthread_mutex_unlock(&sh->lock);
    if (ch->metrics) gr_metrics_remove(ch->metrics, MGROUP ",name=TotalQueueSize");
    pthread_mutex_destroy(&ch->lock);
    free(ch->listener);
    free(ch);
    shared_unref(sh);
}

const struct gr_ctrl_sender_ops gr_ctrl_channel_ops = {
    .startup = op_startup,
    .shutdown = op_shutdown,
    .add_broker = op_add_broker,
    .remove_broker = op_remove_broker,
    .send = op_send,
    .wait_idle = op_wait_idle,
};
