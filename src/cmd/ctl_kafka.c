/* Kafka-protocol client helpers for gregorctl; see ctl_kafka.h. */
#include "cmd/ctl_kafka.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "net/client.h"

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
    k->next_corr = 1;
    k->timeout_ms = timeout_ms;
    snprintf(k->peer, sizeof(k->peer), "%s:%d", host, port);
    int rc = gr_net_client_connect(host, port, timeout_ms, &k->cli);
    if (rc != 0)
        fprintf(stderr, "cannot connect to %s: %s\n", k->peer, gr_strerror(rc));
    return rc;
}

int ctl_kafka_connect_str(const char *hostport, int timeout_ms, struct ctl_kafka *k)
{
    char host[256];
    int port;
    if (ctl_kafka_parse_hostport(hostport, host, sizeof(host), &port) != 0) {
        fprintf(stderr, "invalid HOST:PORT '%s'\n", hostport);
        return -EINVAL;
    }
    return ctl_kafka_connect(host, port, timeout_ms, k);
}

void ctl_kafka_close(struct ctl_kafka *k)
{
    gr_net_client_close(k->cli);
    k->cli = NULL;
}

void *ctl_kafka_call(struct ctl_kafka *k, int16_t api_key, int16_t ver, const void *body,
                     struct gr_arena *a)
{
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    int32_t corr = k->next_corr++;
    int rc = gr_proto_encode_request(api_key, ver, corr, "gregorctl", body, &w);
    if (rc != 0) {
        fprintf(stderr, "cannot encode request (api %d v%d): %s\n", api_key, ver,
                gr_proto_strerror(rc));
        gr_wbuf_free(&w);
        return NULL;
    }
    uint8_t *resp = NULL;
    size_t len = 0;
    rc = gr_net_client_send_recv(k->cli, w.p, w.len, &resp, &len, k->timeout_ms);
    gr_wbuf_free(&w);
    if (rc != 0) {
        fprintf(stderr, "request to %s failed: %s\n", k->peer, gr_strerror(rc));
        return NULL;
    }
    uint8_t *copy = gr_arena_alloc(a, len);
    memcpy(copy, resp, len);
    free(resp);
    int32_t got = 0;
    void *out = NULL;
    rc = gr_proto_decode_response(api_key, ver, copy, len, a, &got, &out);
    if (rc != 0 || got != corr) {
        fprintf(stderr, "invalid response from %s: %s\n", k->peer,
                rc ? gr_proto_strerror(rc) : "correlation id mismatch");
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
