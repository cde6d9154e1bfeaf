/* Kafka's znode JSON (Kafka 2.7 ZkData.scala), encoded and decoded with jansson.
 *
 * Formats (keys and JSON types are exact; key order is ours, Kafka's own order is a hash
 * map's and carries no meaning):
 *
 * | znode                                  | JSON                                                        |
 * |----------------------------------------|-------------------------------------------------------------|
 * | /controller (ephemeral)                | {"version":1,"brokerid":1,"timestamp":"1600000000000"}      |
 * | /controller_epoch                      | 5   (plain decimal text, not JSON; created as 0)            |
 * | /brokers/ids/N (ephemeral, v5)         | {"version":5,"host":"h","port":9092,"endpoints":["PLAINTEXT://h:9092"],"jmx_port":-1,"timestamp":"…","listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"rack":"r1","features":{"f":{"min_version":1,"max_version":2}}} |
 * | /cluster/id                            | {"version":"1","id":"<22-char url-safe base64>"}            |
 * | /brokers/topics/T                      | {"version":2,"partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{}} |
 * |   (Kafka 2.8+, KIP-516: version 3)     | {"version":3,"topic_id":"<22-char url-safe base64 Uuid>","partitions":{…},"adding_replicas":{},"removing_replicas":{}} |
 * | /brokers/topics/T/partitions/P/state   | {"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":[1,2]} |
 * | /config/<type>/<name>                  | {"version":1,"config":{"k":"v"}}                            |
 * | /config/changes/config_change_N        | {"version":2,"entity_path":"topics/T"}                      |
 * |   (read also, as Kafka: version 1)     | {"version":1,"entity_type":"topics","entity_name":"T"} (or "clients") |
 * | /admin/reassign_partitions             | {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]} |
 * | /admin/preferred_replica_election      | {"version":1,"partitions":[{"topic":"t","partition":0}]}    |
 * | /isr_change_notification/isr_change_N  | {"version":1,"partitions":[{"topic":"t","partition":0}]}    |
 * | /log_dir_event_notification/log_dir_event_N | {"version":1,"broker":1,"event":1}                     |
 * | /latest_producer_id_block              | {"version":1,"broker":1,"block_start":"0","block_end":"999"} |
 * | /feature                               | {"version":1,"status":1,"features":{"f":{"min_version_level":1,"max_version_level":2}}} |
 *
 * Decoders treat bytes as hostile: any parse error, missing key, wrong type or out-of-range
 * number returns GR_ECORRUPT with the output left released (safe to release again).
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/util.h"
#include "common/uuid.h"
#include "zk/kzk.h"

/* ---- small helpers ---- */

/* Decoding context remembering the first error. */
struct jdec {
    int err;
};

static json_t *jparse(const char *data, size_t len, size_t flags) {
    if (!data || len == 0) return NULL;
    json_error_t e;
    return json_loadb(data, len, JSON_REJECT_DUPLICATES | flags, &e);
}

static char *jdump(json_t *root, size_t *len) {
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!s) {
        fprintf(stderr, "gregor: out of memory encoding JSON\n");
        abort();
    }
    /* jansson allocates with malloc by default, so callers may free() it. */
    if (len) *len = strlen(s);
    return s;
}

static int64_t jint_range(struct jdec *d, const json_t *v, int64_t lo, int64_t hi) {
    if (!json_is_integer(v)) {
        d->err = GR_ECORRUPT;
        return 0;
    }
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        d->err = GR_ECORRUPT;
        return 0;
    }
    return (int64_t)x;
}

static int32_t jget_i32(struct jdec *d, const json_t *obj, const char *key) {
    return (int32_t)jint_range(d, json_object_get(obj, key), INT32_MIN, INT32_MAX);
}

static const char *jget_str(struct jdec *d, const json_t *obj, const char *key) {
    const json_t *v = json_object_get(obj, key);
    if (!json_is_string(v)) {
        d->err = GR_ECORRUPT;
        return "";
    }
    return json_string_value(v);
}

/* Parses data as a JSON object (anything else is an error in d). The caller decrefs the result
 * (NULL when the bytes are not JSON). */
static json_t *jparse_object(struct jdec *d, const char *data, size_t len) {
    json_t *root = jparse(data, len, 0);
    if (!json_is_object(root)) d->err = GR_ECORRUPT;
    return root;
}

/* A new object {"version": version} to encode a znode into. */
static json_t *jroot_new(int version) {
    json_t *root = json_object();
    json_object_set_new(root, "version", json_integer(version));
    return root;
}

/* {"topic": topic, "partition": partition} */
static json_t *jtp_new(const char *topic, int32_t partition) {
    json_t *o = json_object();
    json_object_set_new(o, "topic", json_string(topic));
    json_object_set_new(o, "partition", json_integer(partition));
    return o;
}

/* root's "partitions" array, or NULL with the error in d (also when d already has one). */
static const json_t *jget_partitions(struct jdec *d, const json_t *root) {
    const json_t *arr = d->err ? NULL : json_object_get(root, "partitions");
    if (!d->err && !json_is_array(arr)) d->err = GR_ECORRUPT;
    return d->err ? NULL : arr;
}

/* The topic of a {"topic": "t", "partition": p, ...} object (borrowed from o), with p >= 0 in
 * *partition; "" and the error in d when o is not such an object (*partition is then left
 * alone if o is not an object at all). */
static const char *jget_tp(struct jdec *d, const json_t *o, int32_t *partition) {
    if (!json_is_object(o)) {
        d->err = GR_ECORRUPT;
        return "";
    }
    const char *t = jget_str(d, o, "topic");
    *partition = (int32_t)jint_range(d, json_object_get(o, "partition"), 0, INT32_MAX);
    return t;
}

/* Integer or decimal string (Kafka writes timestamps/ids as strings; be lenient either way). */
static int64_t jint_or_str_i64(struct jdec *d, const json_t *v) {
    if (json_is_integer(v)) return (int64_t)json_integer_value(v);
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        errno = 0;
        long long x = strtoll(s, &end, 10);
        if (errno || end == s || *end) {
            d->err = GR_ECORRUPT;
            return 0;
        }
        return (int64_t)x;
    }
    d->err = GR_ECORRUPT;
    return 0;
}

/* Array of int32 → malloc'd array (NULL when empty). */
static int32_t *jint_array(struct jdec *d, const json_t *arr, int *n) {
    *n = 0;
    if (!json_is_array(arr)) {
        d->err = GR_ECORRUPT;
        return NULL;
    }
    size_t cnt = json_array_size(arr);
    if (cnt == 0 || cnt > INT32_MAX / 4) return NULL;
    int32_t *out = gr_malloc(cnt * sizeof(int32_t));
    for (size_t i = 0; i < cnt; i++)
        out[i] = (int32_t)jint_range(d, json_array_get(arr, i), INT32_MIN, INT32_MAX);
    *n = (int)cnt;
    return out;
}

static json_t *jint_array_new(const int32_t *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

static int jversion(struct jdec *d, const json_t *root) {
    return jget_i32(d, root, "version");
}

/* See kzk.h. */
int gr_kzk_parse_nonneg_i32(const char *s, int32_t *out) {
    if (!*s) return -1;
    int64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
        if (v > INT32_MAX) return -1;
    }
    *out = (int32_t)v;
    return 0;
}

/* ---- endpoints and /brokers/ids/N ---- */

int gr_kzk_endpoint_parse(const char *s, struct gr_kzk_endpoint *ep) {
    memset(ep, 0, sizeof(*ep));
    const char *sep = strstr(s, "://");
    if (!sep || sep == s) return GR_ECORRUPT;
    const char *hp = sep + 3;
    const char *colon = strrchr(hp, ':');
    if (!colon) return GR_ECORRUPT;
    const char *h0 = hp, *h1 = colon;
    if (*h0 == '[') {
        if (h1 - h0 < 2 || h1[-1] != ']') return GR_ECORRUPT;
        h0++;
        h1--;
    }
    for (const char *c = h0; c < h1; c++) /* Kafka's host class: [0-9a-zA-Z\-%._:] */
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
              *c == '-' || *c == '%' || *c == '.' || *c == '_' || *c == ':'))
            return GR_ECORRUPT;
    int32_t port;
    if (gr_kzk_parse_nonneg_i32(colon + 1, &port) || port > 65535) return GR_ECORRUPT;
    ep->listener = gr_strndup(s, (size_t)(sep - s));
    ep->host = gr_strndup(h0, (size_t)(h1 - h0));
    ep->port = port;
    return 0;
}

static void endpoint_release(struct gr_kzk_endpoint *ep) {
    free(ep->listener);
    free(ep->security_protocol);
    free(ep->host);
    memset(ep, 0, sizeof(*ep));
}

void gr_kzk_broker_release(struct gr_kzk_broker *b) {
    if (!b) return;
    for (int i = 0; i < b->n_endpoints; i++) endpoint_release(&b->endpoints[i]);
    free(b->endpoints);
    free(b->rack);
    for (int i = 0; i < b->n_features; i++) free(b->features[i].name);
    free(b->features);
    int32_t id = b->id;
    memset(b, 0, sizeof(*b));
    b->id = id;
    b->epoch = -1;
}

void gr_kzk_broker_copy(struct gr_kzk_broker *dst, const struct gr_kzk_broker *src) {
    *dst = *src;
    dst->endpoints = src->n_endpoints ? gr_calloc((size_t)src->n_endpoints, sizeof(*dst->endpoints)) : NULL;
    for (int i = 0; i < src->n_endpoints; i++) {
        const struct gr_kzk_endpoint *s = &src->endpoints[i];
        struct gr_kzk_endpoint *e = &dst->endpoints[i];
        e->listener = s->listener ? gr_strdup(s->listener) : NULL;
        e->security_protocol = s->security_protocol ? gr_strdup(s->security_protocol) : NULL;
        e->host = s->host ? gr_strdup(s->host) : NULL;
        e->port = s->port;
    }
    dst->rack = src->rack ? gr_strdup(src->rack) : NULL;
    dst->features = src->n_features ? gr_calloc((size_t)src->n_features, sizeof(*dst->features)) : NULL;
    for (int i = 0; i < src->n_features; i++) {
        dst->features[i] = src->features[i];
        dst->features[i].name = gr_strdup(src->features[i].name);
    }
}

static char *endpoint_string(const struct gr_kzk_endpoint *e) {
    const char *host = e->host ? e->host : "";
    if (strchr(host, ':')) return gr_asprintf("%s://[%s]:%d", e->listener, host, e->port);
    return gr_asprintf("%s://%s:%d", e->listener, host, e->port);
}

char *gr_kzk_broker_encode(const struct gr_kzk_broker *b, size_t *len) {
    const struct gr_kzk_endpoint *plain = NULL;
    for (int i = 0; i < b->n_endpoints; i++) {
        const char *sp = b->endpoints[i].security_protocol ? b->endpoints[i].security_protocol
                                                             : b->endpoints[i].listener;
        if (sp && strcmp(sp, "PLAINTEXT") == 0) {
            plain = &b->endpoints[i];
            break;
        }
    }
    json_t *root = jroot_new(5);
    json_object_set_new(root, "host", plain ? json_string(plain->host ? plain->host : "") : json_null());
    json_object_set_new(root, "port", json_integer(plain ? plain->port : -1));
    json_t *eps = json_array();
    json_t *map = json_object();
    for (int i = 0; i < b->n_endpoints; i++) {
        const struct gr_kzk_endpoint *e = &b->endpoints[i];
        char *s = endpoint_string(e);
        json_array_append_new(eps, json_string(s));
        free(s);
        json_object_set_new(map, e->listener,
                            json_string(e->security_protocol ? e->security_protocol : e->listener));
    }
    json_object_set_new(root, "endpoints", eps);
    json_object_set_new(root, "jmx_port", json_integer(b->jmx_port));
    char ts[32];
    snprintf(ts, sizeof ts, "%" PRId64, b->timestamp ? b->timestamp : gr_wall_ms());
    json_object_set_new(root, "timestamp", json_string(ts));
    json_object_set_new(root, "listener_security_protocol_map", map);
    if (b->rack) json_object_set_new(root, "rack", json_string(b->rack));
    json_t *feats = json_object();
    for (int i = 0; i < b->n_features; i++) {
        json_t *f = json_object();
        json_object_set_new(f, "min_version", json_integer(b->features[i].min_version));
        json_object_set_new(f, "max_version", json_integer(b->features[i].max_version));
        json_object_set_new(feats, b->features[i].name, f);
    }
    json_object_set_new(root, "features", feats);
    return jdump(root, len);
}

/* features map: {"name":{"<minkey>":a,"<maxkey>":b}} */
static struct gr_kzk_feature *decode_features(struct jdec *d, const json_t *obj, const char *minkey,
                                              const char *maxkey, int *n) {
    *n = 0;
    if (!obj || json_is_null(obj)) return NULL;
    if (!json_is_object(obj)) {
        d->err = GR_ECORRUPT;
        return NULL;
    }
    size_t cnt = json_object_size(obj);
    if (cnt == 0) return NULL;
    struct gr_kzk_feature *f = gr_calloc(cnt, sizeof(*f));
    const char *key;
    json_t *v;
    int i = 0;
    json_object_foreach((json_t *)obj, key, v) {
        f[i].name = gr_strdup(key);
        if (!json_is_object(v)) {
            d->err = GR_ECORRUPT;
        } else {
            f[i].min_version = (int16_t)jint_range(d, json_object_get(v, minkey), INT16_MIN, INT16_MAX);
            f[i].max_version = (int16_t)jint_range(d, json_object_get(v, maxkey), INT16_MIN, INT16_MAX);
        }
        i++;
    }
    *n = i;
    return f;
}

int gr_kzk_broker_decode(int32_t id, const char *data, size_t len, struct gr_kzk_broker *out) {
    memset(out, 0, sizeof(*out));
    out->id = id;
    out->epoch = -1;
    json_t *root = jparse(data, len, 0);
    if (!json_is_object(root)) {
        json_decref(root);
        return GR_ECORRUPT;
    }
    struct jdec d = {0};
    out->version = jversion(&d, root);
    const json_t *jmx = json_object_get(root, "jmx_port");
    out->jmx_port = jmx ? (int32_t)jint_range(&d, jmx, INT32_MIN, INT32_MAX) : -1;
    const json_t *ts = json_object_get(root, "timestamp");
    out->timestamp = ts ? jint_or_str_i64(&d, ts) : 0;
    const json_t *rack = json_object_get(root, "rack");
    if (rack && !json_is_null(rack)) {
        if (json_is_string(rack)) out->rack = gr_strdup(json_string_value(rack));
        else d.err = GR_ECORRUPT;
    }
    if (!d.err && out->version <= 1) {
        /* v1: only host/port, a PLAINTEXT endpoint. */
        const char *host = jget_str(&d, root, "host");
        int32_t port = jget_i32(&d, root, "port");
        if (!d.err) {
            out->endpoints = gr_calloc(1, sizeof(*out->endpoints));
            out->n_endpoints = 1;
            out->endpoints[0].listener = gr_strdup("PLAINTEXT");
            out->endpoints[0].security_protocol = gr_strdup("PLAINTEXT");
            out->endpoints[0].host = gr_strdup(host);
            out->endpoints[0].port = port;
        }
    } else if (!d.err) {
        const json_t *eps = json_object_get(root, "endpoints");
        const json_t *map = json_object_get(root, "listener_security_protocol_map");
        if (map && !json_is_null(map) && !json_is_object(map)) d.err = GR_ECORRUPT;
        if (!json_is_array(eps)) d.err = GR_ECORRUPT;
        size_t cnt = d.err ? 0 : json_array_size(eps);
        if (cnt > 0) out->endpoints = gr_calloc(cnt, sizeof(*out->endpoints));
        for (size_t i = 0; i < cnt && !d.err; i++) {
            const json_t *e = json_array_get(eps, i);
            struct gr_kzk_endpoint *ep = &out->endpoints[out->n_endpoints];
            if (!json_is_string(e) || gr_kzk_endpoint_parse(json_string_value(e), ep)) {
                d.err = GR_ECORRUPT;
                break;
            }
            out->n_endpoints++;
            const json_t *sp = json_is_object(map) ? json_object_get(map, ep->listener) : NULL;
            if (sp && !json_is_string(sp)) d.err = GR_ECORRUPT;
            else if (map && json_is_object(map) && !sp) d.err = GR_ECORRUPT; /* as Kafka: unknown listener */
            else ep->security_protocol = gr_strdup(sp ? json_string_value(sp) : ep->listener);
        }
        out->features = decode_features(&d, json_object_get(root, "features"), "min_version",
                                        "max_version", &out->n_features);
    }
    json_decref(root);
    if (d.err) {
        gr_kzk_broker_release(out);
        return GR_ECORRUPT;
    }
    return 0;
}

/* ---- /controller and /controller_epoch ---- */

char *gr_kzk_controller_encode(int32_t broker_id, int64_t timestamp_ms, bool state_stamps, size_t *len) {
    json_t *root = jroot_new(1);
    json_object_set_new(root, "brokerid", json_integer(broker_id));
    char ts[32];
    snprintf(ts, sizeof ts, "%" PRId64, timestamp_ms);
    json_object_set_new(root, "timestamp", json_string(ts));
    if (state_stamps) json_object_set_new(root, GR_KZK_CONTROLLER_STAMPS_KEY, json_integer(1));
    return jdump(root, len);
}

bool gr_kzk_controller_stamps(const char *data, size_t len) {
    json_t *root = jparse(data, len, JSON_DECODE_ANY);
    json_t *v = json_is_object(root) ? json_object_get(root, GR_KZK_CONTROLLER_STAMPS_KEY) : NULL;
    bool yes = json_is_integer(v) && json_integer_value(v) == 1;
    json_decref(root);
    return yes;
}

int gr_kzk_controller_decode(const char *data, size_t len, int32_t *broker_id) {
    json_t *root = jparse(data, len, JSON_DECODE_ANY);
    struct jdec d = {0};
    if (json_is_integer(root)) {
        *broker_id = (int32_t)jint_range(&d, root, INT32_MIN, INT32_MAX);
    } else if (json_is_object(root)) {
        *broker_id = jget_i32(&d, root, "brokerid");
    } else {
        d.err = GR_ECORRUPT;
    }
    json_decref(root);
    return d.err;
}

char *gr_kzk_controller_epoch_encode(int32_t epoch, size_t *len) {
    char *s = gr_asprintf("%d", epoch);
    if (len) *len = strlen(s);
    return s;
}

int gr_kzk_controller_epoch_decode(const char *data, size_t len, int32_t *epoch) {
    if (!data || len == 0 || len > 11) return GR_ECORRUPT;
    char buf[16];
    memcpy(buf, data, len);
    buf[len] = 0;
    int32_t v;
    if (gr_kzk_parse_nonneg_i32(buf, &v)) return GR_ECORRUPT;
    *epoch = v;
    return 0;
}

/* ---- /cluster/id ---- */

char *gr_kzk_cluster_id_encode(const char *id, size_t *len) {
    json_t *root = json_object();
    json_object_set_new(root, "version", json_string("1"));
    json_object_set_new(root, "id", json_string(id));
    return jdump(root, len);
}

int gr_kzk_cluster_id_decode(const char *data, size_t len, char id_out[64]) {
    struct jdec d = {0};
    json_t *root = jparse_object(&d, data, len);
    const char *id = d.err ? "" : jget_str(&d, root, "id");
    if (!d.err && (strlen(id) == 0 || strlen(id) >= 64)) d.err = GR_ECORRUPT;
    if (!d.err) snprintf(id_out, 64, "%s", id);
    json_decref(root);
    return d.err;
}

void gr_kzk_cluster_id_generate(char out[23]) {
    struct gr_uuid u;
    gr_uuid_random(&u); /* Kafka's CoreUtils.generateUuidAsBase64: the same text form */
    gr_uuid_to_string(&u, out);
}

/* ---- /brokers/topics/T ---- */

static void pa_release(struct gr_kzk_partition_assignment *p) {
    free(p->replicas);
    free(p->adding);
    free(p->removing);
    memset(p, 0, sizeof(*p));
}

void gr_kzk_topic_assignment_release(struct gr_kzk_topic_assignment *a) {
    if (!a) return;
    for (int i = 0; i < a->n_partitions; i++) pa_release(&a->partitions[i]);
    free(a->partitions);
    free(a->topic);
    free(a->topic_id);
    int rc = a->rc;
    int32_t zv = a->zk_version;
    memset(a, 0, sizeof(*a));
    a->rc = rc;
    a->zk_version = zv;
}

static json_t *pmap(const struct gr_kzk_topic_assignment *a, int which) {
    json_t *m = json_object();
    for (int i = 0; i < a->n_partitions; i++) {
        const struct gr_kzk_partition_assignment *p = &a->partitions[i];
        const int32_t *v = which == 0 ? p->replicas : which == 1 ? p->adding : p->removing;
        int n = which == 0 ? p->n_replicas : which == 1 ? p->n_adding : p->n_removing;
        if (which != 0 && n == 0) continue;
        char key[16];
        snprintf(key, sizeof key, "%d", p->partition);
        json_object_set_new(m, key, jint_array_new(v, n));
    }
    return m;
}

char *gr_kzk_topic_assignment_encode(const struct gr_kzk_topic_assignment *a, size_t *len) {
    json_t *root = jroot_new(a->topic_id ? 3 : 2);
    if (a->topic_id) json_object_set_new(root, "topic_id", json_string(a->topic_id));
    json_object_set_new(root, "partitions", pmap(a, 0));
    json_object_set_new(root, "adding_replicas", pmap(a, 1));
    json_object_set_new(root, "removing_replicas", pmap(a, 2));
    return jdump(root, len);
}

char *gr_kzk_topic_stamp_encode(const char *topic_id, size_t *len) {
    if (!topic_id) {
        if (len) *len = 0;
        return gr_strdup("");
    }
    json_t *root = json_object();
    json_object_set_new(root, "topic_id", json_string(topic_id));
    return jdump(root, len);
}

int gr_kzk_topic_stamp_decode(const char *data, size_t len, char **topic_id) {
    *topic_id = NULL;
    if (len == 0) return 0;
    struct jdec d = {0};
    json_t *root = jparse_object(&d, data, len);
    const char *text = d.err ? "" : jget_str(&d, root, "topic_id");
    struct gr_uuid u;
    if (!d.err && (gr_uuid_parse(text, &u) != 0 || gr_uuid_is_zero(&u))) d.err = GR_ECORRUPT; /* never written */
    if (!d.err) *topic_id = gr_strdup(text);
    json_decref(root);
    return d.err;
}

static int pa_cmp(const void *x, const void *y) {
    const struct gr_kzk_partition_assignment *a = x, *b = y;
    return (a->partition > b->partition) - (a->partition < b->partition);
}

static struct gr_kzk_partition_assignment *pa_find(struct gr_kzk_topic_assignment *a, int32_t p) {
    struct gr_kzk_partition_assignment key = {.partition = p};
    return bsearch(&key, a->partitions, (size_t)a->n_partitions, sizeof(key), pa_cmp);
}

int gr_kzk_topic_assignment_decode(const char *data, size_t len,
                                   struct gr_kzk_topic_assignment *out) {
    memset(out, 0, sizeof(*out));
    struct jdec d = {0};
    json_t *root = jparse_object(&d, data, len);
    int version = d.err ? 0 : jversion(&d, root);
    const json_t *parts = d.err ? NULL : json_object_get(root, "partitions");
    if (!d.err && !json_is_object(parts)) d.err = GR_ECORRUPT;
    if (!d.err && version >= 3) {
        const json_t *tid = json_object_get(root, "topic_id");
        struct gr_uuid u;
        if (tid && json_is_string(tid) && gr_uuid_parse(json_string_value(tid), &u) == 0)
            out->topic_id = gr_strdup(json_string_value(tid));
        else if (tid && !json_is_null(tid)) d.err = GR_ECORRUPT; /* Kafka's Uuid.fromString throws */
    }
    size_t cnt = d.err ? 0 : json_object_size(parts);
    if (cnt > 0) out->partitions = gr_calloc(cnt, sizeof(*out->partitions));
    const char *key;
    json_t *v;
    if (cnt > 0) {
        json_object_foreach((json_t *)parts, key, v) {
            struct gr_kzk_partition_assignment *p = &out->partitions[out->n_partitions];
            if (gr_kzk_parse_nonneg_i32(key, &p->partition)) {
                d.err = GR_ECORRUPT;
                break;
            }
            p->replicas = jint_array(&d, v, &p->n_replicas);
            out->n_partitions++;
            if (d.err) break;
        }
    }
    if (!d.err && out->n_partitions > 1) {
        qsort(out->partitions, (size_t)out->n_partitions, sizeof(*out->partitions), pa_cmp);
        for (int i = 1; i < out->n_partitions; i++)
            if (out->partitions[i].partition == out->partitions[i - 1].partition) d.err = GR_ECORRUPT;
    }
    for (int which = 1; which <= 2 && !d.err; which++) {
        const json_t *m = json_object_get(root, which == 1 ? "adding_replicas" : "removing_replicas");
        if (!m || json_is_null(m)) continue;
        if (!json_is_object(m)) {
            d.err = GR_ECORRUPT;
            break;
        }
        json_object_foreach((json_t *)m, key, v) {
            int32_t pid;
            struct gr_kzk_partition_assignment *p;
            if (gr_kzk_parse_nonneg_i32(key, &pid) || !(p = pa_find(out, pid))) {
                d.err = GR_ECORRUPT;
                break;
            }
            int32_t **dst = which == 1 ? &p->adding : &p->removing;
            int *nd = which == 1 ? &p->n_adding : &p->n_removing;
            if (*dst) {
                d.err = GR_ECORRUPT;
                break;
            }
            *dst = jint_array(&d, v, nd);
            if (d.err) break;
        }
    }
    json_decref(root);
    if (d.err) {
        gr_kzk_topic_assignment_release(out);
        out->rc = 0;
        return GR_ECORRUPT;
    }
    return 0;
}

/* ---- partition state ---- */

void gr_kzk_leader_and_isr_release(struct gr_kzk_leader_and_isr *s) {
    if (!s) return;
    free(s->isr);
    s->isr = NULL;
    s->n_isr = 0;
}

char *gr_kzk_partition_state_encode(const struct gr_kzk_leader_and_isr *s, size_t *len) {
    json_t *root = jroot_new(1);
    json_object_set_new(root, "leader", json_integer(s->leader));
    json_object_set_new(root, "leader_epoch", json_integer(s->leader_epoch));
    json_object_set_new(root, "controller_epoch", json_integer(s->controller_epoch));
    json_object_set_new(root, "isr", jint_array_new(s->isr, s->n_isr));
    return jdump(root, len);
}

/* ---- partition state: the fast path ----
 * A controller failover decodes one state per partition (100k at a time); jansson builds a tree
 * of allocated objects for each. The common shape -- an object of the five known keys with
 * plain integer values and an array of integers -- is scanned here without allocating (except
 * the ISR). Anything else (other keys, other value types, escapes, numbers outside int32,
 * leading zeros, "-0", a repeated key, a missing key, trailing bytes) is not judged here: the
 * caller falls back to jansson, which decides. So both paths accept exactly the same documents
 * with the same result (tests/fuzz/fuzz_znode_json.c compares them). */

struct scan {
    const char *p, *end;
};

static void scan_ws(struct scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

static bool scan_char(struct scan *s, char c) {
    scan_ws(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return true;
    }
    return false;
}

/* A JSON integer within int32 (no fraction, exponent or leading zero; not "-0"). */
static bool scan_i32(struct scan *s, int32_t *out) {
    scan_ws(s);
    bool neg = s->p < s->end && *s->p == '-';
    const char *d = s->p + (neg ? 1 : 0);
    const char *q = d;
    int64_t v = 0;
    while (q < s->end && *q >= '0' && *q <= '9' && q - d < 11) v = v * 10 + (*q++ - '0');
    size_t nd = (size_t)(q - d);
    if (nd == 0 || nd > 10 || (*d == '0' && (nd > 1 || neg))) return false;
    if (q < s->end && (*q == '.' || *q == 'e' || *q == 'E' || (*q >= '0' && *q <= '9'))) return false;
    if (neg) v = -v;
    if (v < INT32_MIN || v > INT32_MAX) return false;
    *out = (int32_t)v;
    s->p = q;
    return true;
}

/* "key" of lower-case letters and '_' (no escapes) into key[0..cap). */
static bool scan_key(struct scan *s, char *key, size_t cap) {
    if (!scan_char(s, '"')) return false;
    size_t n = 0;
    while (s->p < s->end && ((*s->p >= 'a' && *s->p <= 'z') || *s->p == '_')) {
        if (n + 1 >= cap) return false;
        key[n++] = *s->p++;
    }
    key[n] = 0;
    if (s->p >= s->end || *s->p != '"') return false;
    s->p++;
    return scan_char(s, ':');
}

#define FAST_ISR_MAX 64

static bool scan_isr(struct scan *s, int32_t *isr, int *n) {
    if (!scan_char(s, '[')) return false;
    *n = 0;
    if (scan_char(s, ']')) return true;
    do {
        if (*n == FAST_ISR_MAX || !scan_i32(s, &isr[*n])) return false;
        (*n)++;
    } while (scan_char(s, ','));
    return scan_char(s, ']');
}

/* 1 and *out filled when the document has the common shape, else 0 (out untouched). */
static int partition_state_decode_fast(const char *data, size_t len, struct gr_kzk_leader_and_isr *out) {
    if (!data) return 0;
    struct scan s = {data, data + len};
    int32_t val[4] = {0}, isr[FAST_ISR_MAX];
    int n_isr = 0;
    unsigned seen = 0; /* bits: version, leader, leader_epoch, controller_epoch, isr */
    static const char *const keys[4] = {"version", "leader", "leader_epoch", "controller_epoch"};
    if (!scan_char(&s, '{')) return 0;
    do {
        char key[24];
        if (!scan_key(&s, key, sizeof key)) return 0;
        int k = 0;
        while (k < 4 && strcmp(key, keys[k]) != 0) k++;
        if (k == 4 && strcmp(key, "isr") != 0) return 0;
        if (seen & (1u << k)) return 0;
        seen |= 1u << k;
        if (k == 4 ? !scan_isr(&s, isr, &n_isr) : !scan_i32(&s, &val[k])) return 0;
    } while (scan_char(&s, ','));
    if (!scan_char(&s, '}')) return 0;
    scan_ws(&s);
    if (s.p != s.end || (seen & 0x1e) != 0x1e) return 0;
    out->leader = val[1];
    out->leader_epoch = val[2];
    out->controller_epoch = val[3];
    out->n_isr = n_isr;
    out->isr = NULL;
    if (n_isr > 0) {
        out->isr = gr_malloc((size_t)n_isr * sizeof *out->isr);
        memcpy(out->isr, isr, (size_t)n_isr * sizeof *out->isr);
    }
    return 1;
}

int gr_kzk_partition_state_decode(const char *data, size_t len, struct gr_kzk_leader_and_isr *out) {
    int32_t zv = out->zk_version;
    memset(out, 0, sizeof(*out));
    out->zk_version = zv;
    if (partition_state_decode_fast(data, len, out)) return 0;
    return gr_kzk_partition_state_decode_json(data, len, out);
}

int gr_kzk_partition_state_decode_json(const char *data, size_t len, struct gr_kzk_leader_and_isr *out) {
    int32_t zv = out->zk_version;
    memset(out, 0, sizeof(*out));
    out->zk_version = zv;
    struct jdec d = {0};
    json_t *root = jparse_object(&d, data, len);
    if (!d.err) {
        out->leader = jget_i32(&d, root, "leader");
        out->leader_epoch = jget_i32(&d, root, "leader_epoch");
        out->controller_epoch = jget_i32(&d, root, "controller_epoch");
        out->isr = jint_array(&d, json_object_get(root, "isr"), &out->n_isr);
    }
    json_decref(root);
    if (d.err) {
        gr_kzk_leader_and_isr_release(out);
        return GR_ECORRUPT;
    }
    return 0;
}

/* ---- config ---- */

void gr_kzk_config_release(struct gr_kzk_config *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        free(c->keys[i]);
        free(c->values[i]);
    }
    free(c->keys);
    free(c->values);
    memset(c, 0, sizeof(*c));
}

void gr_kzk_config_set(struct gr_kzk_config *c, const char *key, const char *value) {
    for (int i = 0; i < c->n; i++) {
        if (strcmp(c->keys[i], key) == 0) {
            free(c->values[i]);
            c->values[i] = gr_strdup(value);
            return;
        }
    }
    c->keys = gr_realloc(c->keys, (size_t)(c->n + 1) * sizeof(char *));
    c->values = gr_realloc(c->values, (size_t)(c->n + 1) * sizeof(char *));
    c->keys[c->n] = gr_strdup(key);
    c->values[c->n] = gr_strdup(value);
    c->n++;
}

const char *gr_kzk_config_get(const struct gr_kzk_config *c, const char *key) {
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->keys[i], key) == 0) return c->values[i];
    return NULL;
}

char *gr_kzk_config_encode(const struct gr_kzk_config *c, size_t *len) {
    json_t *root = jroot_new(1);
    json_t *m = json_object();
    for (int i = 0; c && i < c->n; i++) json_object_set_new(m, c->keys[i], json_string(c->values[i]));
    json_object_set_new(root, "config", m);
    return jdump(root, len);
}

int gr_kzk_config_decode(const char *data, size_t len, struct gr_kzk_config *out) {
    memset(out, 0, sizeof(*out));
    struct jdec d = {0};
    json_t *root = jparse_object(&d, data, len);
    const json_t *m = d.err ? NULL : json_object_get(root, "config");
    if (!d.err && !json_is_object(m)) d.err = GR_ECORRUPT;
    if (!d.err) {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)m, key, v) {
            if (!json_is_string(v)) {
                d.err = GR_ECORRUPT;
                break;
            }
            gr_kzk_config_set(out, key, json_string_value(v));
        }
    }
    json_decref(root);
    if (d.err) gr_kzk_config_release(out);
    return d.err;
}

char *gr_kzk_config_change_encode(const char *entity_path, size_t *len) {
    json_t *root = jroot_new(2);
    json_object_set_new(root, "entity_path", json_string(entity_path));
    return jdump(root, len);
}

int gr_kzk_config_change_decode(const char *data, size_t len, char **entity_path) {
    *entity_path = NULL;
    struct jdec d = {0};
    json_t *root = jparse_object(&d, data, len);
    int32_t version = d.err ? 0 : jget_i32(&d, root, "version");
    if (!d.err && version == 2) {
        const char *p = jget_str(&d, root, "entity_path");
        if (!d.err) *entity_path = gr_strdup(p);
    } else if (!d.err && version == 1) { /* Kafka's processEntityConfigChangeVersion1 */
        const char *type = jget_str(&d, root, "entity_type"), *name = jget_str(&d, root, "entity_name");
        if (!d.err && strcmp(type, "topics") != 0 && strcmp(type, "clients") != 0) d.err = GR_ECORRUPT;
        if (!d.err) *entity_path = gr_asprintf("%s/%s", type, name);
    } else if (!d.err) {
        d.err = GR_ECORRUPT; /* "supported versions are 1 and 2" */
    }
    json_decref(root);
    return d.err;
}

/* ---- topic-partition lists ---- */

void gr_kzk_tps_release(struct gr_kzk_tp *tps, int n) {
    if (!tps) return;
    for (int i = 0; i < n; i++) free(tps[i].topic);
    free(tps);
}

char *gr_kzk_tp_list_encode(const struct gr_kzk_tp *tps, int n, size_t *len) {
    json_t *root = jroot_new(1);
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(arr, jtp_new(tps[i].topic, tps[i].partition));
    json_object_set_new(root, "partitions", arr);
    return jdump(root, len);
}

int gr_kzk_tp_list_decode(const char *data, size_t len, struct gr_kzk_tp **out, int *n) {
    *out = NULL;
    *n = 0;
    struct jdec d = {0};
    json_t *root = jparse_object(&d, data, len);
    const json_t *arr = jget_partitions(&d, root);
    size_t cnt = d.err ? 0 : json_array_size(arr);
    struct gr_kzk_tp *tps = cnt ? gr_calloc(cnt, sizeof(*tps)) : NULL;
    int got = 0;
    for (size_t i = 0; i < cnt && !d.err; i++) {
        int32_t p = 0;
        const char *t = jget_tp(&d, json_array_get(arr, i), &p);
        if (d.err) break;
        tps[got].topic = gr_strdup(t);
        tps[got].partition = p;
        got++;
    }
    json_decref(root);
    if (d.err) {
        gr_kzk_tps_release(tps, got);
        return GR_ECORRUPT;
    }
    *out = tps;
    *n = got;
    return 0;
}

/* ---- /admin/reassign_partitions ---- */

void gr_kzk_reassignment_release(struct gr_kzk_reassignment *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        free(r->entries[i].topic);
        free(r->entries[i].replicas);
    }
    free(r->entries);
    memset(r, 0, sizeof(*r));
}

char *gr_kzk_reassignment_encode(const struct gr_kzk_reassignment *r, size_t *len) {
    json_t *root = jroot_new(1);
    json_t *arr = json_array();
    for (int i = 0; i < r->n; i++) {
        const struct gr_kzk_reassignment_entry *e = &r->entries[i];
        json_t *o = jtp_new(e->topic, e->partition);
        json_object_set_new(o, "replicas", jint_array_new(e->replicas, e->n_replicas));
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "partitions", arr);
    return jdump(root, len);
}

int gr_kzk_reassignment_decode(const char *data, size_t len, struct gr_kzk_reassignment *out) {
    memset(out, 0, sizeof(*out));
    struct jdec d = {0};
    json_t *root = jparse_object(&d, data, len);
    const json_t *arr = jget_partitions(&d, root);
    size_t cnt = d.err ? 0 : json_array_size(arr);
    if (cnt) out->entries = gr_calloc(cnt, sizeof(*out->entries));
    for (size_t i = 0; i < cnt && !d.err; i++) {
        const json_t *o = json_array_get(arr, i);
        struct gr_kzk_reassignment_entry *e = &out->entries[out->n];
        const char *t = jget_tp(&d, o, &e->partition);
        if (d.err) break;
        e->topic = gr_strdup(t);
        e->replicas = jint_array(&d, json_object_get(o, "replicas"), &e->n_replicas);
        out->n++;
    }
    json_decref(root);
    if (d.err) gr_kzk_reassignment_release(out);
    return d.err;
}

/* ---- log dir events ---- */

char *gr_kzk_log_dir_event_encode(int32_t broker_id, int32_t event, size_t *len) {
    json_t *root = jroot_new(1);
    json_object_set_new(root, "broker", json_integer(broker_id));
    json_object_set_new(root, "event", json_integer(event));
    return jdump(root, len);
}

int gr_kzk_log_dir_event_decode(const char *data, size_t len, int32_t *broker_id, int32_t *event) {
    struct jdec d = {0};
    json_t *root = jparse_object(&d, data, len);
    if (!d.err) {
        int32_t b = jget_i32(&d, root, "broker");
        int32_t e = jget_i32(&d, root, "event");
        if (!d.err) {
            *broker_id = b;
            *event = e;
        }
    }
    json_decref(root);
    return d.err;
}

/* ---- /latest_producer_id_block ---- */

char *gr_kzk_producer_id_block_encode(const struct gr_kzk_producer_id_block *b, size_t *len) {
    json_t *root = jroot_new(1);
    json_object_set_new(root, "broker", json_integer(b->broker));
    char s[32];
    snprintf(s, sizeof s, "%" PRId64, b->block_start);
    json_object_set_new(root, "block_start", json_string(s));
    snprintf(s, sizeof s, "%" PRId64, b->block_end);
    json_object_set_new(root, "block_end", json_string(s));
    return jdump(root, len);
}

int gr_kzk_producer_id_block_decode(const char *data, size_t len,
                                    struct gr_kzk_producer_id_block *out) {
    struct jdec d = {0};
    json_t *root = jparse_object(&d, data, len);
    if (!d.err) {
        struct gr_kzk_producer_id_block b;
        b.broker = jget_i32(&d, root, "broker");
        b.block_start = jint_or_str_i64(&d, json_object_get(root, "block_start"));
        b.block_end = jint_or_str_i64(&d, json_object_get(root, "block_end"));
        if (!d.err) *out = b;
    }
    json_decref(root);
    return d.err;
}

/* ---- /feature ---- */

void gr_kzk_feature_znode_release(struct gr_kzk_feature_znode *f) {
    if (!f) return;
    for (int i = 0; i < f->n_features; i++) free(f->features[i].name);
    free(f->features);
    memset(f, 0, sizeof(*f));
}

char *gr_kzk_feature_znode_encode(const struct gr_kzk_feature_znode *f, size_t *len) {
    json_t *root = jroot_new(1);
    json_object_set_new(root, "status", json_integer(f->status));
    json_t *feats = json_object();
    for (int i = 0; i < f->n_features; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "min_version_level", json_integer(f->features[i].min_version));
        json_object_set_new(o, "max_version_level", json_integer(f->features[i].max_version));
        json_object_set_new(feats, f->features[i].name, o);
    }
    json_object_set_new(root, "features", feats);
    return jdump(root, len);
}

int gr_kzk_feature_znode_decode(const char *data, size_t len, struct gr_kzk_feature_znode *out) {
    memset(out, 0, sizeof(*out));
    struct jdec d = {0};
    json_t *root = jparse_object(&d, data, len);
    if (!d.err) {
        out->status = jget_i32(&d, root, "status");
        const json_t *feats = json_object_get(root, "features");
        if (!json_is_object(feats)) d.err = GR_ECORRUPT;
        else
            out->features = decode_features(&d, feats, "min_version_level", "max_version_level",
                                            &out->n_features);
    }
    json_decref(root);
    if (d.err) gr_kzk_feature_znode_release(out);
    return d.err;
}
