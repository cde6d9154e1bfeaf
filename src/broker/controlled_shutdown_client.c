/* Controlled shutdown, broker side: see controlled_shutdown_client.h. */
#include "broker/controlled_shutdown_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "broker/metadata_cache.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "net/kafka_client.h"
#include "protocol/codec.h"
#include "zk/kzk.h"

#define LOGGER "kafka.server.KafkaServer"
#define CS_VERSION 3

struct target {
    int32_t id;
    char host[256];
    int32_t port;
};

static void sleep_ms(int64_t ms) {
    if (ms <= 0) return;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Where is the controller? 0 and *t, or -1 (reason logged). */
static int find_controller(const struct gr_cs_client_config *cfg, struct target *t) {
    memset(t, 0, sizeof *t);
    t->id = -1;
    if (cfg->kzk) {
        int32_t id = -1;
        int rc = gr_kzk_get_controller_id(cfg->kzk, false, &id);
        if (rc == 0 && id < 0) {
            gr_info(LOGGER, "[KafkaServer id=%d] No controller registered in ZooKeeper", cfg->broker_id);
            return -1;
        }
        if (rc == 0) {
            struct gr_kzk_broker b;
            memset(&b, 0, sizeof b);
            rc = gr_kzk_get_broker(cfg->kzk, id, false, &b);
            if (rc == GR_KZK_ENONODE) {
                gr_info(LOGGER, "[KafkaServer id=%d] Broker registration for controller %d is not available (i.e. the "
                        "Controller's ZK session expired)", cfg->broker_id, id);
                return -1;
            }
            if (rc == 0) {
                const struct gr_kzk_endpoint *ep = NULL;
                for (int i = 0; i < b.n_endpoints; i++)
                    if (!ep && (!cfg->listener || (b.endpoints[i].listener && strcmp(b.endpoints[i].listener, cfg->listener) == 0)))
                        ep = &b.endpoints[i];
                if (ep) {
                    t->id = id;
                    snprintf(t->host, sizeof t->host, "%s", ep->host && ep->host[0] ? ep->host : "localhost");
                    t->port = ep->port;
                }
                gr_kzk_broker_release(&b);
                if (t->id >= 0) return 0;
                gr_warn(LOGGER, "[KafkaServer id=%d] Controller %d has no endpoint for listener %s", cfg->broker_id, id,
                        cfg->listener ? cfg->listener : "(any)");
                return -1;
            }
        }
        gr_warn(LOGGER, "[KafkaServer id=%d] Cannot read the controller from ZooKeeper (%s); trying the metadata cache",
                cfg->broker_id, gr_kzk_strerror(rc));
    }
    if (!cfg->metadata) return -1;
    int32_t id = gr_mdc_controller_id(cfg->metadata);
    if (id < 0) {
        gr_info(LOGGER, "[KafkaServer id=%d] No controller known to the metadata cache", cfg->broker_id);
        return -1;
    }
    if (!gr_mdc_get_endpoint(cfg->metadata, id, cfg->listener ? cfg->listener : "PLAINTEXT", t->host,
                                        sizeof t->host, &t->port)) {
        gr_info(LOGGER, "[KafkaServer id=%d] Controller %d is not in the metadata cache", cfg->broker_id, id);
        return -1;
    }
    t->id = id;
    return 0;
}

/* One exchange. Returns 0 with *err and *remaining set, or a negative transport/codec error. */
static int call(const struct gr_cs_client_config *cfg, struct gr_kafka_client *kc, int16_t *err, int *remaining,
                char *first, size_t first_len) {
    struct ControlledShutdownRequest rq;
    gr_proto_init_struct(&gr_desc_ControlledShutdownRequest, &rq);
    rq.BrokerId = cfg->broker_id;
    rq.BrokerEpoch = cfg->broker_epoch;
    struct gr_arena a;
    gr_arena_init(&a);
    void *body = NULL;
    uint8_t *frame = NULL;
    int rc = gr_kafka_client_call(kc, GR_API_CONTROLLED_SHUTDOWN, CS_VERSION, &rq, 0, &a, &body, &frame);
    if (!rc) {
        const struct ControlledShutdownResponse *r = body;
        *err = r->ErrorCode;
        *remaining = r->RemainingPartitionsCount > 0 ? r->RemainingPartitionsCount : 0;
        first[0] = 0;
        if (*remaining > 0 && r->RemainingPartitions[0].TopicName)
            snprintf(first, first_len, "%s-%d", r->RemainingPartitions[0].TopicName, r->RemainingPartitions[0].PartitionIndex);
    }
    gr_arena_free(&a);
    free(frame);
    return rc;
}

bool gr_controlled_shutdown_run(const struct gr_cs_client_config *cfg) {
    int32_t id = cfg->broker_id;
    gr_info(LOGGER, "[KafkaServer id=%d] Starting controlled shutdown", id);
    char client_id[32];
    snprintf(client_id, sizeof client_id, "%d", id);
    /* A new controller (a new target) or an I/O error (the client drops the connection) means a
     * new connection on the next attempt. */
    char prefix[48];
    snprintf(prefix, sizeof prefix, "[KafkaServer id=%d]", id);
    struct gr_kafka_client_config kcfg = {
        .client_id = client_id,
        .logger = LOGGER,
        .log_prefix = prefix,
        .connect_timeout_ms = cfg->socket_timeout_ms > 0 ? cfg->socket_timeout_ms : 30000,
        .request_timeout_ms = cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : 30000,
    };
    struct gr_kafka_client *kc = gr_kafka_client_new(&kcfg);
    struct target prev = {.id = -1};
    bool ok = false;
    for (int left = cfg->max_retries; left > 0 && !ok; left--) {
        struct target t;
        if (find_controller(cfg, &t) == 0) {
            prev = t;
            gr_kafka_client_set_target(kc, t.id, t.host, t.port);
        }
        if (prev.id >= 0) {
            int16_t err = GR_KERR_NONE;
            int remaining = 0;
            char first[300] = "";
            int rc = call(cfg, kc, &err, &remaining, first, sizeof first);
            if (rc) {
                gr_warn(LOGGER, "[KafkaServer id=%d] Error during controlled shutdown with controller %d at %s:%d, "
                        "possibly because leader movement took longer than the configured controller.socket.timeout.ms "
                        "and/or request.timeout.ms: %s", id, prev.id, prev.host, prev.port, gr_strerror(rc));
            } else if (err == GR_KERR_NONE && remaining == 0) {
                ok = true;
                gr_info(LOGGER, "[KafkaServer id=%d] Controlled shutdown succeeded", id);
            } else {
                gr_info(LOGGER, "[KafkaServer id=%d] Remaining partitions to move: %d%s%s%s", id, remaining,
                        first[0] ? " (first " : "", first, first[0] ? ")" : "");
                gr_info(LOGGER, "[KafkaServer id=%d] Error from controller: %s", id, gr_kerr_name(err));
            }
        }
        if (!ok && left > 1) {
            sleep_ms(cfg->retry_backoff_ms);
            gr_warn(LOGGER, "[KafkaServer id=%d] Retrying controlled shutdown after the previous attempt failed...", id);
        }
    }
    gr_kafka_client_free(kc);
    if (!ok)
        gr_warn(LOGGER, "[KafkaServer id=%d] Proceeding to do an unclean shutdown as all the controlled shutdown attempts "
                "failed", id);
    return ok;
}
