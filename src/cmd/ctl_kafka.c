/* Kafka-protocol client helpers for gregorctl; see ctl_kafka.h. */
#include "cmd/ctl_kafka.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "net/kafka_client.h"

int ctl_kafka_parse_hostport(const char *s, char *host, size_t hostlen, int *port)
{
    if (!s || !*s)
        return -EINVAL;
    const char *colon;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (!end || end[1] != ':')
            return -EINVAL;
        snprintf(host, hostlen, "%.*s", (int)(end - s - 1), s + 1);
        colon = end + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            return -EINVAL;
        snprintf(host, hostlen, "%.*s", (int)(colon - s), s);
    }
    char *e;
    long p = strtol(colon + 1, &e, 10);
    if (*e || p <= 0 || p > 65535)
        return -EINVAL;
    *port = (int)p;
    return 0;
}

int ctl_kafka_connect(const char *host, int port, int timeout_ms, struct ctl_kafka *k)
{
    memset(k, 0, sizeof(*k));
    k->timeout_ms = timeout_ms;
    struct gr_kafka_client_config cfg = { .client_id = "gregorctl", .logger = "gregorctl",
                                          .connect_timeout_ms = timeout_ms,
                                          .request_timeout_ms = timeout_ms };
    k->kc = gr_kafka_client_new(&cfg);
    gr_kafka_client_set_target(k->kc, -1, host, port);
    int rc = gr_kafka_client_connect(k->kc);
    if (rc != 0) {
        fprintf(stderr, "cannot connect to %s: %s\n", gr_kafka_client_peer(k->kc), gr_strerror(rc));
        ctl_kafka_close(k);
    }
    return rc;
}

int ctl_kafka_connect_str(const char *bootstrap_list, int timeout_ms, struct ctl_kafka *k)
{
    memset(k, 0, sizeof(*k));
    char *list = gr_strdup(bootstrap_list ? bootstrap_list : "");
    int n = 0, rc = -EINVAL;
    char host[256];
    int port;
    /* check every entry before trying any, so a typo is reported whatever answers first */
    for (char *save = NULL, *e = strtok_r(list, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        while (*e == ' ')
            e++;
        if (ctl_kafka_parse_hostport(e, host, sizeof(host), &port) != 0 || !host[0]) {
            fprintf(stderr, "invalid bootstrap server address '%s' (expected HOST:PORT)\n", e);
            free(list);
            return -EINVAL;
        }
        n++;
    }
    if (n == 0)
        fprintf(stderr, "invalid bootstrap server list '%s' (expected HOST:PORT[,HOST:PORT...])\n",
                bootstrap_list ? bootstrap_list : "");
    free(list);
    list = gr_strdup(bootstrap_list ? bootstrap_list : "");
    for (char *save = NULL, *e = strtok_r(list, ",", &save); e && n > 0; e = strtok_r(NULL, ",", &save)) {
        while (*e == ' ')
            e++;
        ctl_kafka_parse_hostport(e, host, sizeof(host), &port);
        rc = ctl_kafka_connect(host, port, timeout_ms, k);
        if (rc == 0)
            break;
    }
    free(list);
    return rc;
}

void ctl_kafka_close(struct ctl_kafka *k)
{
    gr_kafka_client_free(k->kc);
    k->kc = NULL;
}

const char *ctl_kafka_peer(const struct ctl_kafka *k)
{
    return k->kc ? gr_kafka_client_peer(k->kc) : "";
}

void *ctl_kafka_call(struct ctl_kafka *k, int16_t api_key, int16_t ver, const void *body,
                     struct gr_arena *a)
{
    void *out = NULL;
    /* frame NULL: the response frame is copied into a, so the answer lives as long as a */
    int rc = gr_kafka_client_call(k->kc, api_key, ver, body, k->timeout_ms, a, &out, NULL);
    if (rc != 0) {
        fprintf(stderr, "request (api %d v%d) to %s failed: %s\n", api_key, ver, ctl_kafka_peer(k),
                rc == GR_EPROTO ? "invalid response" : gr_proto_strerror(rc));
        return NULL;
    }
    return out;
}

struct MetadataResponse *ctl_kafka_metadata(struct ctl_kafka *k, const char *const *topics, int n,
                                            struct gr_arena *a)
{
    struct MetadataRequest rq;
    gr_proto_init_struct(&gr_desc_MetadataRequest, &rq);
    if (n < 0) {
        rq.TopicsCount = -1;
        rq.Topics = NULL;
    } else {
        rq.TopicsCount = n;
        rq.Topics = gr_arena_alloc(a, sizeof(*rq.Topics) * (size_t)(n ? n : 1));
        for (int i = 0; i < n; i++)
            rq.Topics[i].Name = (char *)topics[i];
    }
    rq.AllowAutoTopicCreation = false;
    return ctl_kafka_call(k, GR_API_METADATA, 7, &rq, a);
}

int ctl_kafka_connect_controller(struct ctl_kafka *boot, int timeout_ms, struct ctl_kafka *ctl)
{
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct MetadataResponse *md = ctl_kafka_metadata(boot, NULL, 0, &ar);
    int rc = md ? 1 : -1;
    if (md && md->ControllerId >= 0)
        for (int32_t i = 0; i < md->BrokersCount; i++)
            if (md->Brokers[i].NodeId == md->ControllerId) {
                rc = ctl_kafka_connect(md->Brokers[i].Host, md->Brokers[i].Port, timeout_ms, ctl);
                break;
            }
    gr_arena_free(&ar);
    return rc;
}

void *ctl_kafka_call_controller(struct ctl_kafka *boot, int timeout_ms, int attempts, int16_t api_key, int16_t ver,
                                const void *body, struct gr_arena *a, bool (*retry)(const void *resp))
{
    int64_t deadline = gr_mono_ms() + timeout_ms;
    void *last = NULL;
    for (int attempt = 0; attempt < attempts; attempt++) {
        struct ctl_kafka ctl;
        struct ctl_kafka *target = &ctl;
        int crc = ctl_kafka_connect_controller(boot, timeout_ms, &ctl);
        if (crc == 1)
            target = boot; /* controller unknown to this broker: ask it directly */
        if (crc >= 0) {
            target->timeout_ms = timeout_ms + 5000;
            void *r = ctl_kafka_call(target, api_key, ver, body, a);
            target->timeout_ms = timeout_ms;
            if (target == &ctl)
                ctl_kafka_close(&ctl);
            if (r) {
                last = r;
                if (!retry(r))
                    return r;
            }
        }
        if (gr_mono_ms() >= deadline)
            break;
        usleep(300 * 1000);
    }
    return last;
}
