/* The table of APIs and request dispatch; see apis.h. */
#include "api/apis.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/quota_manager.h"
#include "api/handlers.h"
#include "api/handle_sasl.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "net/server.h"

#define LOGGER "kafka.server.KafkaApis"
#define MAX_API_KEY 128

#define RM GR_API_NEEDS_REPLICA_MANAGER

/* The table (contract in apis.h), indexed by api key. Versions are what Gregor implements of
 * Kafka's ranges (the codec's tables know Kafka 3.9's; only these are served and advertised). */
static const struct gr_api_entry apis[MAX_API_KEY] = {
    /* produce and consume: replication/ */
    [GR_API_PRODUCE] = {0, 11, gr_handle_produce, RM},
    [GR_API_FETCH] = {0, 17, gr_handle_fetch, RM},
    [GR_API_LIST_OFFSETS] = {0, 9, gr_handle_list_offsets, RM},
    [GR_API_OFFSET_FOR_LEADER_EPOCH] = {0, 4, gr_handle_offsets_for_leader_epoch, RM},
    [GR_API_DESCRIBE_LOG_DIRS] = {0, 4, gr_handle_describe_log_dirs, RM},
    [GR_API_DELETE_RECORDS] = {0, 2, gr_handle_delete_records, RM},
    [GR_API_ALTER_REPLICA_LOG_DIRS] = {0, 2, gr_handle_alter_replica_log_dirs, RM},
    /* cluster metadata: broker/metadata_cache */
    [GR_API_METADATA] = {0, 12, gr_handle_metadata, 0},
    [GR_API_API_VERSIONS] = {0, 4, gr_handle_api_versions, 0},
    [GR_API_DESCRIBE_CLUSTER] = {0, 1, gr_handle_describe_cluster, 0},
    /* controller -> broker: broker/metadata_cache, replication/partitions + hooks */
    [GR_API_LEADER_AND_ISR] = {0, 7, gr_handle_leader_and_isr, 0},
    [GR_API_STOP_REPLICA] = {0, 4, gr_handle_stop_replica, 0},
    [GR_API_UPDATE_METADATA] = {0, 8, gr_handle_update_metadata, 0},
    /* broker -> controller: controller/requests.h */
    [GR_API_CONTROLLED_SHUTDOWN] = {0, 3, gr_handle_controlled_shutdown, 0},
    [GR_API_ALTER_PARTITION] = {0, 3, gr_handle_alter_partition, 0},
    /* groups: coordinator/ */
    [GR_API_OFFSET_COMMIT] = {0, 9, gr_handle_offset_commit, 0},
    [GR_API_OFFSET_FETCH] = {0, 9, gr_handle_offset_fetch, 0},
    [GR_API_FIND_COORDINATOR] = {0, 6, gr_handle_find_coordinator, 0},
    [GR_API_JOIN_GROUP] = {0, 9, gr_handle_join_group, 0},
    [GR_API_HEARTBEAT] = {0, 4, gr_handle_heartbeat, 0},
    [GR_API_LEAVE_GROUP] = {0, 5, gr_handle_leave_group, 0},
    [GR_API_SYNC_GROUP] = {0, 5, gr_handle_sync_group, 0},
    [GR_API_DESCRIBE_GROUPS] = {0, 5, gr_handle_describe_groups, 0},
    [GR_API_LIST_GROUPS] = {0, 5, gr_handle_list_groups, 0},
    [GR_API_DELETE_GROUPS] = {0, 2, gr_handle_delete_groups, 0},
    /* producer ids for idempotence: coordinator/producer_id_manager */
    [GR_API_INIT_PRODUCER_ID] = {0, 5, gr_handle_init_producer_id, 0},
    [GR_API_OFFSET_DELETE] = {0, 0, gr_handle_offset_delete, 0},
    /* transactions: coordinator/txn_coordinator, api/handle_txn.c */
    [GR_API_ADD_PARTITIONS_TO_TXN] = {0, 5, gr_handle_add_partitions_to_txn, 0},
    [GR_API_ADD_OFFSETS_TO_TXN] = {0, 4, gr_handle_add_offsets_to_txn, 0},
    [GR_API_END_TXN] = {0, 4, gr_handle_end_txn, 0},
    [GR_API_WRITE_TXN_MARKERS] = {0, 1, gr_handle_write_txn_markers, RM},
    [GR_API_TXN_OFFSET_COMMIT] = {0, 4, gr_handle_txn_offset_commit, 0},
    [GR_API_DESCRIBE_PRODUCERS] = {0, 0, gr_handle_describe_producers, RM},
    [GR_API_DESCRIBE_TRANSACTIONS] = {0, 0, gr_handle_describe_transactions, 0},
    [GR_API_LIST_TRANSACTIONS] = {0, 1, gr_handle_list_transactions, 0},
    /* topic administration: admin/, and the controller through requests.h or ZooKeeper */
    [GR_API_CREATE_TOPICS] = {0, 7, gr_handle_create_topics, 0},
    [GR_API_DELETE_TOPICS] = {0, 6, gr_handle_delete_topics, 0},
    [GR_API_CREATE_PARTITIONS] = {0, 3, gr_handle_create_partitions, 0},
    [GR_API_ELECT_LEADERS] = {0, 2, gr_handle_elect_leaders, 0},
    [GR_API_ALTER_PARTITION_REASSIGNMENTS] = {0, 0, gr_handle_alter_partition_reassignments, 0},
    [GR_API_LIST_PARTITION_REASSIGNMENTS] = {0, 0, gr_handle_list_partition_reassignments, 0},
    /* feature versioning: controller/feature_versioning.h, broker/finalized_features.h */
    [GR_API_UPDATE_FEATURES] = {0, 1, gr_handle_update_features, 0},
    /* delegation tokens: token authentication is disabled (handle_delegation_tokens.c) */
    [GR_API_CREATE_DELEGATION_TOKEN] = {0, 3, gr_handle_create_delegation_token, 0},
    [GR_API_RENEW_DELEGATION_TOKEN] = {0, 2, gr_handle_renew_delegation_token, 0},
    [GR_API_EXPIRE_DELEGATION_TOKEN] = {0, 2, gr_handle_expire_delegation_token, 0},
    [GR_API_DESCRIBE_DELEGATION_TOKEN] = {0, 3, gr_handle_describe_delegation_token, 0},
    /* ACLs: security/authorizer.h */
    [GR_API_DESCRIBE_ACLS] = {0, 3, gr_handle_describe_acls, 0},
    [GR_API_CREATE_ACLS] = {0, 3, gr_handle_create_acls, 0},
    [GR_API_DELETE_ACLS] = {0, 3, gr_handle_delete_acls, 0},
    /* security: api/handle_sasl.c, api/handle_user_scram.c */
    [GR_API_SASL_HANDSHAKE] = {0, 1, gr_handle_sasl_handshake, 0},
    [GR_API_SASL_AUTHENTICATE] = {0, 2, gr_handle_sasl_authenticate, 0},
    [GR_API_DESCRIBE_USER_SCRAM_CREDENTIALS] = {0, 0, gr_handle_describe_user_scram_credentials, 0},
    [GR_API_ALTER_USER_SCRAM_CREDENTIALS] = {0, 0, gr_handle_alter_user_scram_credentials, 0},
    /* configs and quotas: common/config_model, broker/dynamic_config_manager, broker/quota_manager */
    [GR_API_DESCRIBE_CONFIGS] = {0, 4, gr_handle_describe_configs, 0},
    [GR_API_ALTER_CONFIGS] = {0, 2, gr_handle_alter_configs, 0},
    [GR_API_INCREMENTAL_ALTER_CONFIGS] = {0, 1, gr_handle_incremental_alter_configs, 0},
    [GR_API_DESCRIBE_CLIENT_QUOTAS] = {0, 1, gr_handle_describe_client_quotas, 0},
    [GR_API_ALTER_CLIENT_QUOTAS] = {0, 1, gr_handle_alter_client_quotas, 0},
};

/* gr_apis_set_test_handler's replacements. */
static _Atomic(gr_api_handler_fn) test_handlers[MAX_API_KEY];

const struct gr_api_entry *gr_apis_entry(int16_t api_key)
{
    if (api_key < 0 || api_key >= MAX_API_KEY || !apis[api_key].fn)
        return NULL;
    return &apis[api_key];
}

int gr_apis_lookup(int16_t api_key, int16_t *min_ver, int16_t *max_ver)
{
    const struct gr_api_entry *e = gr_apis_entry(api_key);
    if (!e)
        return 0;
    if (min_ver)
        *min_ver = e->min_ver;
    if (max_ver)
        *max_ver = e->max_ver;
    return 1;
}

int gr_apis_set_test_handler(int16_t api_key, gr_api_handler_fn fn)
{
    if (!gr_apis_entry(api_key))
        return -EINVAL;
    atomic_store(&test_handlers[api_key], fn);
    return 0;
}

void gr_apis_fill_api_versions(struct ApiVersionsResponse *resp, struct gr_arena *a)
{
    int n = 0;
    for (int k = 0; k < MAX_API_KEY; k++)
        if (apis[k].fn)
            n++;
    resp->ApiKeys = gr_arena_alloc(a, sizeof(*resp->ApiKeys) * (size_t)(n ? n : 1));
    resp->ApiKeysCount = n;
    int i = 0;
    for (int k = 0; k < MAX_API_KEY && i < n; k++) {
        if (!apis[k].fn)
            continue;
        resp->ApiKeys[i].ApiKey = (int16_t)k;
        resp->ApiKeys[i].MinVersion = apis[k].min_ver;
        resp->ApiKeys[i].MaxVersion = apis[k].max_ver;
        i++;
    }
}

/* ---- request lifetime ---- */

/* Error codes of a response, counted as Kafka's AbstractResponse.errorCounts does for most APIs:
 * every ErrorCode field (top level, per topic, per partition, ...) present at this version. */
struct error_counts {
    int16_t code[16];
    int64_t count[16];
    int n;
};

static inline void count_error(struct error_counts *ec, int16_t c)
{
    int k = 0;
    while (k < ec->n && ec->code[k] != c)
        k++;
    if (k == ec->n && ec->n < 16)
        ec->code[ec->n++] = c;
    if (k < ec->n)
        ec->count[k]++;
}

/* Where the ErrorCode fields of a response are, for one version: per struct, in field order, the
 * ErrorCode fields present at the version and the nested structs (or arrays of structs) that
 * hold one; structs without any are left out, so counting walks only what it must (a Metadata
 * answer's partitions, not their replica lists; nothing of a response without error codes).
 * Built once per API and version on first use (a few dozen fields), published with a
 * compare-and-swap, never freed; read-only after. */
#define EC_MAX_PLANS 48
#define EC_MAX_ITEMS 16
struct ec_item {
    uint32_t offset, count_offset;
    uint32_t elem_size;  /* arrays: sizeof one element; 0 for an ErrorCode or a nested struct */
    int8_t kind;         /* 0 ErrorCode, 1 nested struct, 2 array of structs */
    int16_t sub;         /* plan index of the struct (kinds 1, 2) */
};
struct ec_plan {
    int n;
    struct ec_item item[EC_MAX_ITEMS];
};
struct ec_plans {
    int n;
    struct ec_plan p[EC_MAX_PLANS];
};

/* Plan index for sd at ver, -1 when sd holds no ErrorCode (or the tables are full). */
static int ec_plan_build(struct ec_plans *ps, const struct gr_struct_desc *sd, int16_t ver, int depth)
{
    if (depth >= 8 || ps->n >= EC_MAX_PLANS)
        return -1;
    int me = ps->n++;
    struct ec_plan pl = {.n = 0};
    for (unsigned i = 0; i < sd->nfields && pl.n < EC_MAX_ITEMS; i++) {
        const struct gr_field_desc *f = &sd->fields[i];
        if (ver < f->ver_min || ver > f->ver_max)
            continue;
        if (f->type == GR_FT_INT16 && !f->is_array && strcmp(f->name, "ErrorCode") == 0) {
            pl.item[pl.n++] = (struct ec_item){.offset = f->offset, .kind = 0};
        } else if (f->type == GR_FT_STRUCT) {
            int sub = ec_plan_build(ps, f->sub, ver, depth + 1);
            if (sub >= 0)
                pl.item[pl.n++] = (struct ec_item){.offset = f->offset, .count_offset = f->count_offset,
                                                   .elem_size = f->sub->size,
                                                   .kind = (int8_t)(f->is_array ? 2 : 1),
                                                   .sub = (int16_t)sub};
        }
    }
    if (pl.n == 0) { /* nothing below: drop this plan and any built for its fields */
        ps->n = me;
        return -1;
    }
    ps->p[me] = pl;
    return me;
}

#define EC_MAX_VERSIONS 16
static _Atomic(struct ec_plans *) ec_cache[MAX_API_KEY][EC_MAX_VERSIONS];

/* The plans of d's response at ver (plan 0 the top level; none when n == 0). */
static const struct ec_plans *ec_plans_for(const struct gr_api_desc *d, int16_t ver)
{
    if (d->key < 0 || d->key >= MAX_API_KEY || ver < 0 || ver >= EC_MAX_VERSIONS)
        return NULL;
    _Atomic(struct ec_plans *) *slot = &ec_cache[d->key][ver];
    struct ec_plans *ps = atomic_load_explicit(slot, memory_order_acquire);
    if (ps)
        return ps;
    struct ec_plans *mine = gr_calloc(1, sizeof *mine);
    ec_plan_build(mine, d->response, ver, 0); /* the top plan, if any, is index 0 */
    if (atomic_compare_exchange_strong_explicit(slot, &ps, mine, memory_order_acq_rel,
                                                memory_order_acquire))
        return mine;
    free(mine); /* another thread published first */
    return ps;
}

static void count_errors(const struct ec_plans *ps, int plan, const char *s, struct error_counts *ec)
{
    const struct ec_plan *pl = &ps->p[plan];
    for (int i = 0; i < pl->n; i++) {
        const struct ec_item *it = &pl->item[i];
        if (it->kind == 0) {
            count_error(ec, *(const int16_t *)(s + it->offset));
        } else if (it->kind == 1) {
            count_errors(ps, it->sub, s + it->offset, ec);
        } else {
            int32_t n = *(const int32_t *)(s + it->count_offset);
            const char *arr = *(char *const *)(s + it->offset);
            const struct ec_plan *sp = &ps->p[it->sub];
            if (sp->n == 1 && sp->item[0].kind == 0) { /* e.g. partitions: one ErrorCode each */
                uint32_t off = sp->item[0].offset;
                for (int32_t j = 0; arr && j < n; j++)
                    count_error(ec, *(const int16_t *)(arr + (size_t)j * it->elem_size + off));
            } else {
                for (int32_t j = 0; arr && j < n; j++)
                    count_errors(ps, it->sub, arr + (size_t)j * it->elem_size, ec);
            }
        }
    }
}

/* kafka.network:type=RequestMetrics,name=ErrorsPerSec,request,error for one response. */
static void record_error_metrics(struct gr_metrics *reg, const struct gr_api_desc *d, const char *name,
                                 int16_t ver, const void *resp)
{
    struct error_counts ec = {.n = 0};
    const struct ec_plans *ps = ec_plans_for(d, ver);
    struct ec_plans *tmp = NULL;
    if (!ps) { /* a version past the cache: plan for this response alone */
        tmp = gr_calloc(1, sizeof *tmp);
        ec_plan_build(tmp, d->response, ver, 0);
        ps = tmp;
    }
    if (ps->n > 0)
        count_errors(ps, 0, resp, &ec);
    free(tmp);
    for (int k = 0; k < ec.n; k++) {
        char n[192];
        snprintf(n, sizeof(n), "kafka.network:type=RequestMetrics,name=ErrorsPerSec,request=%s,error=%s", name,
                 gr_kerr_name(ec.code[k]));
        struct gr_meter *m = gr_metrics_meter(reg, n);
        if (m)
            gr_meter_mark(m, ec.count[k]);
    }
}

static struct gr_histogram *request_histogram(struct gr_metrics *reg, const char *metric, const char *request) {
    char n[192];
    snprintf(n, sizeof(n), "kafka.network:type=RequestMetrics,name=%s,request=%s", metric, request);
    return gr_metrics_histogram(reg, n);
}

static void update_ms(struct gr_histogram *h, int64_t us) {
    if (h) gr_histogram_update(h, (double)GR_MAX(0, us) / 1000.0);
}

/* One request's RequestMetrics under the request tag `name` (Kafka's updateRequestMetrics):
 * RequestsPerSec (per version), RequestQueueTimeMs, LocalTimeMs, RemoteTimeMs, ThrottleTimeMs
 * now; ResponseQueueTimeMs, ResponseSendTimeMs and TotalTimeMs by the network thread once the
 * response is written (*sent); MessageConversionsTimeMs and TemporaryMemoryBytes for Produce and
 * Fetch only, as Kafka. */
static void record_request_timing(struct gr_metrics *reg, const struct gr_api_req *r, const char *name,
                                  int64_t local_us, int64_t remote_us, struct gr_net_send_metrics *sent) {
    char n[192];
    snprintf(n, sizeof(n), "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=%s,version=%d", name,
             r->hdr.RequestApiVersion);
    struct gr_meter *m = gr_metrics_meter(reg, n);
    if (m) gr_meter_mark(m, 1);
    update_ms(request_histogram(reg, "RequestQueueTimeMs", name), r->dispatch_us - r->net->received_us);
    update_ms(request_histogram(reg, "LocalTimeMs", name), local_us);
    update_ms(request_histogram(reg, "RemoteTimeMs", name), remote_us);
    struct gr_histogram *h = request_histogram(reg, "ThrottleTimeMs", name);
    if (h) gr_histogram_update(h, GR_MAX(0, r->net->throttle_ms));
    if (r->hdr.RequestApiKey == GR_API_PRODUCE || strcmp(name, "Fetch") == 0) {
        update_ms(request_histogram(reg, "MessageConversionsTimeMs", name), r->conversion_us);
        h = request_histogram(reg, "TemporaryMemoryBytes", name);
        if (h) gr_histogram_update(h, (double)r->temporary_memory_bytes);
    }
    sent->response_queue_ms = request_histogram(reg, "ResponseQueueTimeMs", name);
    sent->response_send_ms = request_histogram(reg, "ResponseSendTimeMs", name);
    sent->total_ms = request_histogram(reg, "TotalTimeMs", name);
}

/* kafka.network:type=RequestMetrics for a decoded request being completed, named as Kafka 2.7's
 * RequestChannel names them: every request under its API name (request="Fetch" included); a
 * Fetch also under FetchConsumer or FetchFollower (RequestsPerSec, TotalTimeMs,
 * RequestQueueTimeMs); ErrorsPerSec only under the API name. */
/* The request being dispatched on this I/O thread (its handler time counts for request quotas
 * when it is answered synchronously). */
static _Thread_local struct gr_api_req *dispatching;

static void record_request_metrics(struct gr_api_req *r, const void *resp) {
    struct gr_metrics *reg = r->broker ? r->broker->metrics : NULL;
    const struct gr_api_desc *d = gr_proto_api(r->hdr.RequestApiKey);
    if (!reg || !r->body || !d) return;
    int64_t now_us = gr_mono_us();
    /* Kafka: local = dequeued -> the handler returned, or -> this response if that came first;
     * remote = the handler returned -> this response (waiting in a purgatory) */
    int64_t local_done = r == dispatching ? 0 : atomic_load(&r->local_done_us);
    if (local_done <= 0 || local_done > now_us) local_done = now_us;
    int64_t local_us = local_done - r->dispatch_us, remote_us = now_us - local_done;
    struct gr_net_send_metrics *sent = r->net->sent_metrics;
    if (r->hdr.RequestApiKey == GR_API_FETCH) {
        bool follower = ((const struct FetchRequest *)r->body)->ReplicaId >= 0;
        record_request_timing(reg, r, follower ? "FetchFollower" : "FetchConsumer", local_us, remote_us, sent++);
    }
    record_request_timing(reg, r, d->name, local_us, remote_us, sent);
    if (resp) record_error_metrics(reg, d, d->name, r->hdr.RequestApiVersion, resp);
}

/* Drops one reference: the completion's, or the running handler call's (dispatch). */
static void req_free(struct gr_api_req *r)
{
    if (atomic_fetch_sub(&r->refs, 1) > 1) return;
    gr_arena_free(&r->arena);
    free(r);
}

void gr_api_respond(struct gr_api_req *r, const void *body)
{
    gr_quota_on_response(r, (void *)body, r == dispatching); /* its throttle, then the metrics */
    record_request_metrics(r, body); /* before completion frees r->net */
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    int rc = gr_proto_encode_response(&r->hdr, body, &w);
    if (rc != 0) {
        gr_error(LOGGER, "cannot encode %s v%d response (correlation id %d) for %s: %s",
                 gr_proto_api(r->hdr.RequestApiKey) ? gr_proto_api(r->hdr.RequestApiKey)->name
                                                     : "?",
                 r->hdr.RequestApiVersion, r->hdr.CorrelationId, r->peer, gr_proto_strerror(rc));
        gr_wbuf_free(&w);
        gr_net_close(r->net);
        req_free(r);
        return;
    }
    /* Hand the buffer over: gr_net_respond_take frees it with free(). */
    gr_net_respond_take(r->net, w.p, w.len);
    req_free(r);
}

bool gr_api_req_can_sendfile(const struct gr_api_req *r)
{
    /* TLS encrypts in user space: its bytes cannot come from the page cache */
    if (r && r->net && r->net->session && r->net->session->tls)
        return false;
    static int enabled = -1;
    if (enabled < 0) {
        const char *e = getenv("GREGOR_FETCH_SENDFILE");
        enabled = !(e && strcmp(e, "0") == 0);
    }
    return enabled;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Splices the regions into the encoded response w: each marker (with its length 16 before it:
 * an int32, or in a flexible version (compact) the uvarint 17, one byte) becomes the region's
 * length in the same form and a file region (zero_copy) or the region's bytes (copy). */
static int splice_regions(struct gr_wbuf *w, struct gr_api_region *reg, int n, bool zero_copy, bool compact,
                          struct gr_net_region **out_regs, uint8_t **out_buf, size_t *out_len)
{
    size_t extra = 0;
    for (int i = 0; i < n; i++) extra += reg[i].len;
    /* a compact length grows from 1 to at most 5 bytes */
    size_t cap = w->len + (zero_copy ? 0 : extra) + (compact ? 4 * (size_t)n : 0) + 1;
    uint8_t *buf = gr_malloc(cap);
    struct gr_net_region *regs = zero_copy ? gr_calloc((size_t)n + 1, sizeof *regs) : NULL;
    size_t in = 0, outp = 0, pre = compact ? 1 : 4;
    for (int i = 0; i < n; i++) {
        const uint8_t *m = memmem(w->p + in, w->len - in, reg[i].marker, 16);
        bool ok = m && m - w->p >= (ptrdiff_t)(in + pre);
        if (ok && compact) ok = m[-1] == 17;
        else if (ok) ok = ((m[-4] << 24) | (m[-3] << 16) | (m[-2] << 8) | m[-1]) == 16;
        if (!ok) {
            /* hand the descriptors taken so far back to the caller's regions (it closes them or
             * retries with a copy) */
            for (int j = 0; regs && j < i; j++) reg[j].fd = regs[j].fd;
            free(buf);
            free(regs);
            return -1;
        }
        size_t at = (size_t)(m - w->p);
        memcpy(buf + outp, w->p + in, at - in);
        outp += at - in;
        if (compact) {
            outp -= 1;
            for (uint64_t v = (uint64_t)reg[i].len + 1;; v >>= 7) {
                buf[outp++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
                if (v <= 0x7f) break;
            }
        } else {
            put_be32(buf + outp - 4, (uint32_t)reg[i].len);
        }
        if (zero_copy) {
            regs[i] = (struct gr_net_region){outp, reg[i].fd, reg[i].off, reg[i].len};
            reg[i].fd = -1;
        } else {
            size_t got = 0;
            while (got < reg[i].len) {
                ssize_t r = pread(reg[i].fd, buf + outp + got, reg[i].len - got, (off_t)(reg[i].off + (int64_t)got));
                if (r <= 0) {
                    free(buf);
                    return -1;
                }
                got += (size_t)r;
            }
            outp += reg[i].len;
        }
        in = at + 16;
    }
    memcpy(buf + outp, w->p + in, w->len - in);
    outp += w->len - in;
    put_be32(buf, (uint32_t)(outp + (zero_copy ? extra : 0) - 4));
    *out_regs = regs;
    *out_buf = buf;
    *out_len = outp;
    return 0;
}

void gr_api_respond_regions(struct gr_api_req *r, const void *body, struct gr_api_region *reg, int n)
{
    gr_quota_on_response(r, (void *)body, r == dispatching);
    record_request_metrics(r, body);
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    int rc = gr_proto_encode_response(&r->hdr, body, &w);
    struct gr_net_region *regs = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    bool zc = gr_api_req_can_sendfile(r);
    bool compact = gr_proto_is_flexible(gr_proto_api(r->hdr.RequestApiKey), r->hdr.RequestApiVersion);
    if (rc == 0 && splice_regions(&w, reg, n, zc, compact, &regs, &buf, &len) != 0 &&
        (!zc || splice_regions(&w, reg, n, false, compact, &regs, &buf, &len) != 0))
        rc = -1;
    gr_wbuf_free(&w);
    for (int i = 0; i < n; i++)
        if (reg[i].fd >= 0) close(reg[i].fd);
    if (rc != 0) {
        gr_error(LOGGER, "cannot encode the zero-copy %s v%d response (correlation id %d) for %s",
                 gr_proto_api(r->hdr.RequestApiKey) ? gr_proto_api(r->hdr.RequestApiKey)->name : "?",
                 r->hdr.RequestApiVersion, r->hdr.CorrelationId, r->peer);
        gr_net_close(r->net);
        req_free(r);
        return;
    }
    if (regs) gr_net_respond_regions(r->net, buf, len, regs, n);
    else gr_net_respond_take(r->net, buf, len);
    req_free(r);
}

void gr_api_respond_none(struct gr_api_req *r)
{
    gr_quota_on_response(r, NULL, r == dispatching);
    record_request_metrics(r, NULL);
    gr_net_respond_none(r->net);
    req_free(r);
}

void gr_api_close(struct gr_api_req *r, const char *reason)
{
    gr_warn(LOGGER, "closing connection from %s (listener %s): %s", r->peer,
            r->listener ? r->listener : "?", reason ? reason : "");
    record_request_metrics(r, NULL);
    gr_net_close(r->net);
    req_free(r);
}

void *gr_api_alloc(struct gr_api_req *r, size_t n) { return gr_arena_alloc(&r->arena, n); }

void *gr_api_new_response(struct gr_api_req *r)
{
    const struct gr_api_desc *d = gr_proto_api(r->hdr.RequestApiKey);
    return d ? gr_proto_new(&r->arena, d->response) : NULL;
}

char *gr_api_strdup(struct gr_api_req *r, const char *s) { return gr_arena_strdup(&r->arena, s); }

/* UNSUPPORTED_VERSION to an ApiVersions request, encoded as v0 with the supported list. */
static void answer_unsupported_api_versions(struct gr_api_req *r)
{
    r->hdr.RequestApiVersion = 0;
    struct ApiVersionsResponse *resp = gr_proto_new(&r->arena, &gr_desc_ApiVersionsResponse);
    resp->ErrorCode = GR_KERR_UNSUPPORTED_VERSION;
    gr_apis_fill_api_versions(resp, &r->arena);
    gr_api_respond(r, resp);
}

void gr_apis_dispatch(void *ctx, struct gr_net_request *nreq)
{
    struct gr_broker *b = ctx;
    if (nreq->session && nreq->session->raw_tokens) { /* after SaslHandshake v0: not a Kafka request */
        gr_sasl_raw_token(b, nreq);
        return;
    }
    struct gr_api_req *r = gr_calloc(1, sizeof(*r));
    r->broker = b;
    r->net = nreq;
    r->listener = nreq->listener;
    r->peer = nreq->peer;
    r->principal = "User:ANONYMOUS";
    r->received_ms = gr_mono_ms();
    r->dispatch_us = gr_mono_us();
    atomic_init(&r->refs, 1);
    gr_arena_init(&r->arena);

    int rc = gr_proto_decode_request(nreq->data, nreq->len, &r->arena, &r->hdr, &r->body);
    int16_t key = nreq->api_key, ver = nreq->api_version;
    const struct gr_api_desc *d = gr_proto_api(key);
    const char *name = d ? d->name : "unknown";
    char why[160];

    const struct gr_api_entry *e = gr_apis_entry(key);
    if (key == GR_API_API_VERSIONS &&
        (rc == GR_PROTO_EUNSUPPORTED_VERSION ||
         (rc == GR_EPROTO && r->hdr.HeaderVersion >= 0 && e && ver > e->max_ver))) {
        /* A version we do not serve: as Kafka, the body is not looked at (the codec's tables may
         * know a newer version than we serve, and a body they cannot decode changes nothing).
         * The header fields the codec promises on these errors are valid. */
        r->hdr.RequestApiKey = key;
        r->hdr.CorrelationId = nreq->correlation_id;
        answer_unsupported_api_versions(r);
        return;
    }
    if (rc != 0) {
        snprintf(why, sizeof(why), "cannot decode %s (key %d) v%d request: %s", name, key, ver,
                 gr_proto_strerror(rc));
        gr_api_close(r, why);
        return;
    }
    if (!e) {
        snprintf(why, sizeof(why), "unsupported API %s (key %d)", name, key);
        gr_api_close(r, why);
        return;
    }
    if (ver < e->min_ver || ver > e->max_ver) {
        if (key == GR_API_API_VERSIONS) {
            answer_unsupported_api_versions(r);
            return;
        }
        snprintf(why, sizeof(why), "unsupported version %d of API %s (supported %d-%d)", ver, name,
                 e->min_ver, e->max_ver);
        gr_api_close(r, why);
        return;
    }
    if (!gr_sasl_gate(r)) /* sets r->principal; closes requests sent before SASL completes */
        return;
    if ((e->needs & GR_API_NEEDS_REPLICA_MANAGER) && !b->replica_manager) {
        snprintf(why, sizeof(why), "API %s needs the replica manager, which this broker does not run", name);
        gr_api_close(r, why);
        return;
    }
    gr_api_handler_fn fn = atomic_load(&test_handlers[key]);
    if (!fn)
        fn = e->fn;
    gr_debug(LOGGER, "%s v%d correlation id %d from %s (client %s, principal %s)", name, ver,
             r->hdr.CorrelationId, r->peer, r->hdr.ClientId ? r->hdr.ClientId : "null", r->principal);
    atomic_store(&r->refs, 2); /* the handler call's, until it returns */
    dispatching = r;
    fn(b, r, &r->hdr, r->body);
    dispatching = NULL;
    atomic_store(&r->local_done_us, gr_mono_us());
    req_free(r);
}
