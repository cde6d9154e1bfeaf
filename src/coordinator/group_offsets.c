/* __consumer_offsets partitioning and record formats: see group_offsets.h. */
#include "coordinator/group_offsets.h"

#include <string.h>

#include "common/util.h"

/* Next code point of UTF-8 text at *p (advanced); malformed sequences yield U+FFFD and
 * consume one byte. */
static uint32_t utf8_next(const unsigned char **pp) {
    const unsigned char *p = *pp;
    uint32_t c = p[0];
    int n;
    uint32_t min;
    if (c < 0x80) {
        *pp = p + 1;
        return c;
    } else if ((c & 0xE0) == 0xC0) {
        n = 1, c &= 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        n = 2, c &= 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        n = 3, c &= 0x07, min = 0x10000;
    } else {
        *pp = p + 1;
        return 0xFFFD;
    }
    for (int i = 1; i <= n; i++) {
        if ((p[i] & 0xC0) != 0x80) {
            *pp = p + 1;
            return 0xFFFD;
        }
        c = (c << 6) | (p[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
        *pp = p + 1;
        return 0xFFFD;
    }
    *pp = p + n + 1;
    return c;
}

int32_t gr_java_string_hash(const char *s) {
    uint32_t h = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        uint32_t c = utf8_next(&p);
        if (c >= 0x10000) { /* a surrogate pair in UTF-16 */
            c -= 0x10000;
            h = h * 31u + (0xD800 + (c >> 10));
            h = h * 31u + (0xDC00 + (c & 0x3FF));
        } else {
            h = h * 31u + c;
        }
    }
    return (int32_t)h;
}

int32_t gr_group_partition_for(const char *group_id, int32_t n) {
    if (n <= 0) return 0;
    int32_t h = gr_java_string_hash(group_id ? group_id : "");
    return (int32_t)(((uint32_t)h & 0x7fffffffu) % (uint32_t)n);
}

/* ---- encoders ---- */

void gr_go_encode_offset_key(struct gr_wbuf *w, const char *group, const char *topic, int32_t partition) {
    gr_wbuf_i16(w, 1);
    gr_wbuf_string(w, group ? group : "", false);
    gr_wbuf_string(w, topic ? topic : "", false);
    gr_wbuf_i32(w, partition);
}

void gr_go_encode_group_key(struct gr_wbuf *w, const char *group) {
    gr_wbuf_i16(w, 2);
    gr_wbuf_string(w, group ? group : "", false);
}

void gr_go_encode_offset_value(struct gr_wbuf *w, const struct gr_go_offset_value *v) {
    const char *md = v->metadata ? v->metadata : "";
    if (v->expire_timestamp >= 0) {
        gr_wbuf_i16(w, 1);
        gr_wbuf_i64(w, v->offset);
        gr_wbuf_string(w, md, false);
        gr_wbuf_i64(w, v->commit_timestamp);
        gr_wbuf_i64(w, v->expire_timestamp);
    } else {
        gr_wbuf_i16(w, 3);
        gr_wbuf_i64(w, v->offset);
        gr_wbuf_i32(w, v->leader_epoch);
        gr_wbuf_string(w, md, false);
        gr_wbuf_i64(w, v->commit_timestamp);
    }
}

static void put_bytes(struct gr_wbuf *w, const uint8_t *p, int32_t len) {
    struct gr_bytes b = {.p = p, .len = p ? len : 0};
    if (b.len < 0) b.len = 0;
    gr_wbuf_bytes(w, b, false);
}

void gr_go_encode_group_value(struct gr_wbuf *w, const struct gr_go_group_value *v) {
    gr_wbuf_i16(w, 3);
    gr_wbuf_string(w, v->protocol_type ? v->protocol_type : "", false);
    gr_wbuf_i32(w, v->generation);
    gr_wbuf_string(w, v->protocol, false);
    gr_wbuf_string(w, v->leader, false);
    gr_wbuf_i64(w, v->current_state_timestamp);
    gr_wbuf_array_len(w, v->n_members, false);
    for (int i = 0; i < v->n_members; i++) {
        const struct gr_go_member *m = &v->members[i];
        gr_wbuf_string(w, m->member_id ? m->member_id : "", false);
        gr_wbuf_string(w, m->group_instance_id, false);
        gr_wbuf_string(w, m->client_id ? m->client_id : "", false);
        gr_wbuf_string(w, m->client_host ? m->client_host : "", false);
        gr_wbuf_i32(w, m->rebalance_timeout);
        gr_wbuf_i32(w, m->session_timeout);
        put_bytes(w, m->subscription, m->subscription_len);
        put_bytes(w, m->assignment, m->assignment_len);
    }
}

/* ---- decoders ---- */

/* A non-null string: null is corrupt. */
static char *req_string(struct gr_rbuf *r, struct gr_arena *a) {
    char *s = gr_rbuf_string(r, a, false);
    if (!s && !r->err) gr_rbuf_fail(r, GR_EPROTO);
    return s;
}

int gr_go_decode_key(const uint8_t *buf, size_t len, struct gr_arena *a, struct gr_go_key *out) {
    memset(out, 0, sizeof *out);
    if (!buf) return GR_ECORRUPT;
    struct gr_rbuf r;
    gr_rbuf_init(&r, buf, len);
    out->version = gr_rbuf_i16(&r);
    if (r.err) return GR_ECORRUPT;
    if (out->version == 0 || out->version == 1) {
        out->kind = GR_GO_KEY_OFFSET;
        out->group = req_string(&r, a);
        out->topic = req_string(&r, a);
        out->partition = gr_rbuf_i32(&r);
    } else if (out->version == 2) {
        out->kind = GR_GO_KEY_GROUP;
        out->group = req_string(&r, a);
    } else {
        return GR_ECORRUPT;
    }
    return r.err ? GR_ECORRUPT : 0;
}

int gr_go_decode_offset_value(const uint8_t *buf, size_t len, struct gr_arena *a,
                              struct gr_go_offset_value *out) {
    memset(out, 0, sizeof *out);
    out->leader_epoch = -1;
    out->expire_timestamp = -1;
    if (!buf) return GR_ECORRUPT;
    struct gr_rbuf r;
    gr_rbuf_init(&r, buf, len);
    out->version = gr_rbuf_i16(&r);
    if (r.err || out->version < 0 || out->version > 3) return GR_ECORRUPT;
    out->offset = gr_rbuf_i64(&r);
    if (out->version == 3) out->leader_epoch = gr_rbuf_i32(&r);
    out->metadata = gr_rbuf_string(&r, a, false);
    out->commit_timestamp = gr_rbuf_i64(&r);
    if (out->version == 1) out->expire_timestamp = gr_rbuf_i64(&r);
    if (r.err) return GR_ECORRUPT;
    if (!out->metadata) out->metadata = gr_arena_strdup(a, "");
    return 0;
}

int gr_go_decode_group_value(const uint8_t *buf, size_t len, struct gr_arena *a,
                             struct gr_go_group_value *out) {
    memset(out, 0, sizeof *out);
    out->current_state_timestamp = -1;
    if (!buf) return GR_ECORRUPT;
    struct gr_rbuf r;
    gr_rbuf_init(&r, buf, len);
    int16_t v = out->version = gr_rbuf_i16(&r);
    if (r.err || v < 0 || v > 3) return GR_ECORRUPT;
    out->protocol_type = req_string(&r, a);
    out->generation = gr_rbuf_i32(&r);
    out->protocol = gr_rbuf_string(&r, a, false);
    out->leader = gr_rbuf_string(&r, a, false);
    if (v >= 2) out->current_state_timestamp = gr_rbuf_i64(&r);
    /* smallest member: 3 empty strings (6) + nullable (2, v3) + timeouts (4-8) + 2 bytes (8) */
    int32_t n = gr_rbuf_array_len(&r, false, 18);
    if (r.err) return GR_ECORRUPT;
    if (n < 0) n = 0;
    out->n_members = n;
    out->members = n ? gr_arena_alloc(a, (size_t)n * sizeof *out->members) : NULL;
    if (n && !out->members) return GR_ECORRUPT;
    for (int i = 0; i < n && !r.err; i++) {
        struct gr_go_member *m = &out->members[i];
        m->member_id = req_string(&r, a);
        if (v >= 3) m->group_instance_id = gr_rbuf_string(&r, a, false);
        m->client_id = req_string(&r, a);
        m->client_host = req_string(&r, a);
        m->rebalance_timeout = v >= 1 ? gr_rbuf_i32(&r) : -1;
        m->session_timeout = gr_rbuf_i32(&r);
        if (v == 0) m->rebalance_timeout = m->session_timeout;
        struct gr_bytes b = gr_rbuf_bytes(&r, false);
        m->subscription = b.len > 0 ? b.p : NULL;
        m->subscription_len = b.len > 0 ? b.len : 0;
        b = gr_rbuf_bytes(&r, false);
        m->assignment = b.len > 0 ? b.p : NULL;
        m->assignment_len = b.len > 0 ? b.len : 0;
    }
    return r.err ? GR_ECORRUPT : 0;
}
