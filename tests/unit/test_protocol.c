/* Protocol codec tests: table-driven round trips of every API x version (requests and
 * responses), byte-exact hand-built frames, and malformed input. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "protocol/codec.h"
#include "support/check.h"

/* ---- deterministic pseudo-random filling driven by the descriptor tables ---- */

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint64_t rnd_int(void)
{
    switch (rnd() % 4) {
    case 0: return 0;
    case 1: return rnd() % 100;
    case 2: return (uint64_t)-(int64_t)(rnd() % 3 + 1);
    default: return rnd();
    }
}

static const uint8_t pool[64] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!?";

static void fill_struct(const struct gr_struct_desc *sd, int16_t ver, struct gr_arena *a, void *out);

static void fill_value(uint8_t type, const struct gr_struct_desc *sub, int16_t ver, bool can_null,
                       struct gr_arena *a, void *p)
{
    switch (type) {
    case GR_FT_BOOL: *(bool *)p = rnd() & 1; break;
    case GR_FT_INT8: *(int8_t *)p = (int8_t)rnd_int(); break;
    case GR_FT_INT16: *(int16_t *)p = (int16_t)rnd_int(); break;
    case GR_FT_UINT16: *(uint16_t *)p = (uint16_t)rnd_int(); break;
    case GR_FT_INT32: *(int32_t *)p = (int32_t)rnd_int(); break;
    case GR_FT_INT64: *(int64_t *)p = (int64_t)rnd_int(); break;
    case GR_FT_FLOAT64: *(double *)p = (double)(int64_t)rnd_int() / 8.0; break;
    case GR_FT_UUID:
        for (int i = 0; i < 16; i++)
            ((uint8_t *)p)[i] = (uint8_t)rnd();
        break;
    case GR_FT_STRING:
        if (can_null && rnd() % 5 == 0) {
            *(char **)p = NULL;
        } else {
            size_t n = rnd() % 9;
            *(char **)p = gr_arena_strndup(a, (const char *)pool + rnd() % 40, n);
        }
        break;
    case GR_FT_BYTES:
    case GR_FT_RECORDS: {
        struct gr_bytes b = { NULL, -1 };
        if (!(can_null && rnd() % 5 == 0)) {
            b.len = (int32_t)(rnd() % 17);
            b.p = pool + rnd() % 40;
        }
        *(struct gr_bytes *)p = b;
        break;
    }
    case GR_FT_STRUCT: fill_struct(sub, ver, a, p); break;
    }
}

static size_t csize(uint8_t type, const struct gr_struct_desc *sub)
{
    switch (type) {
    case GR_FT_BOOL: return sizeof(bool);
    case GR_FT_INT8: return 1;
    case GR_FT_INT16:
    case GR_FT_UINT16: return 2;
    case GR_FT_INT32: return 4;
    case GR_FT_INT64: return 8;
    case GR_FT_FLOAT64: return 8;
    case GR_FT_UUID: return 16;
    case GR_FT_STRING: return sizeof(char *);
    case GR_FT_BYTES:
    case GR_FT_RECORDS: return sizeof(struct gr_bytes);
    default: return sub->size;
    }
}

static bool vin(int16_t v, int16_t lo, int16_t hi)
{
    return v >= lo && v <= hi;
}

static void fill_struct(const struct gr_struct_desc *sd, int16_t ver, struct gr_arena *a, void *out)
{
    gr_proto_init_struct(sd, out);
    for (unsigned i = 0; i < sd->nfields; i++) {
        const struct gr_field_desc *f = &sd->fields[i];
        if (!vin(ver, f->ver_min, f->ver_max))
            continue;
        if (f->tag >= 0 && rnd() % 2)
            continue; /* leave the tagged field at its default */
        bool can_null = vin(ver, f->null_min, f->null_max);
        char *p = (char *)out + f->offset;
        if (!f->is_array) {
            fill_value(f->type, f->sub, ver, can_null, a, p);
            continue;
        }
        int32_t *cnt = (int32_t *)((char *)out + f->count_offset);
        if (can_null && rnd() % 5 == 0) {
            *cnt = -1;
            *(void **)p = NULL;
            continue;
        }
        int32_t n = (int32_t)(rnd() % 4);
        size_t esz = csize(f->type, f->sub);
        char *arr = n ? gr_arena_alloc(a, (size_t)n * esz) : NULL;
        for (int32_t k = 0; k < n; k++)
            fill_value(f->type, f->sub, ver, false, a, arr + (size_t)k * esz);
        *cnt = n;
        *(void **)p = arr;
    }
}

/* Compare two structs field by field (all fields: absent ones must both hold the default). */
static bool eq_struct(const struct gr_struct_desc *sd, const void *x, const void *y, char *path,
                      size_t pathsz);

static bool eq_value(uint8_t type, const struct gr_struct_desc *sub, const void *x, const void *y,
                     char *path, size_t pathsz)
{
    switch (type) {
    case GR_FT_STRING: {
        const char *s = *(char *const *)x, *t = *(char *const *)y;
        if (s == NULL || t == NULL)
            return s == t;
        return strcmp(s, t) == 0;
    }
    case GR_FT_BYTES:
    case GR_FT_RECORDS: {
        const struct gr_bytes *b = x, *c = y;
        if (b->len != c->len)
            return false;
        return b->len <= 0 || memcmp(b->p, c->p, (size_t)b->len) == 0;
    }
    case GR_FT_STRUCT: return eq_struct(sub, x, y, path, pathsz);
    case GR_FT_BOOL: return *(const bool *)x == *(const bool *)y;
    default: return memcmp(x, y, csize(type, sub)) == 0;
    }
}

static bool eq_struct(const struct gr_struct_desc *sd, const void *x, const void *y, char *path,
                      size_t pathsz)
{
    size_t plen = strlen(path);
    for (unsigned i = 0; i < sd->nfields; i++) {
        const struct gr_field_desc *f = &sd->fields[i];
        snprintf(path + plen, pathsz - plen, ".%s", f->name);
        const char *px = (const char *)x + f->offset, *py = (const char *)y + f->offset;
        if (!f->is_array) {
            if (!eq_value(f->type, f->sub, px, py, path, pathsz))
                return false;
            continue;
        }
        int32_t n = *(const int32_t *)((const char *)x + f->count_offset);
        if (n != *(const int32_t *)((const char *)y + f->count_offset))
            return false;
        const char *ax = *(char *const *)px, *ay = *(char *const *)py;
        size_t esz = csize(f->type, f->sub);
        for (int32_t k = 0; k < n; k++)
            if (!eq_value(f->type, f->sub, ax + (size_t)k * esz, ay + (size_t)k * esz, path,
                          pathsz))
                return false;
    }
    path[plen] = '\0';
    return true;
}

/* ---- round trips ---- */

static void roundtrip_body(const struct gr_api_desc *api, bool response, int16_t ver, int iter)
{
    const struct gr_struct_desc *sd = response ? api->response : api->request;
    struct gr_arena a;
    struct gr_wbuf w1, w2;
    gr_arena_init(&a);
    gr_wbuf_init(&w1);
    gr_wbuf_init(&w2);
    void *msg = gr_arena_alloc(&a, sd->size);
    fill_struct(sd, ver, &a, msg);
    int rc = gr_proto_encode_body(api->key, response, ver, msg, &w1);
    CHECKF(rc == 0, "%s v%d encode: %d", sd->name, ver, rc);
    struct gr_rbuf r;
    gr_rbuf_init(&r, w1.p, w1.len);
    void *dec = NULL;
    rc = gr_proto_decode_body(api->key, response, ver, &r, &a, &dec);
    CHECKF(rc == 0 && dec != NULL, "%s v%d iter %d decode: %d", sd->name, ver, iter, rc);
    if (rc == 0) {
        CHECKF(r.pos == r.len, "%s v%d: %zu bytes left over", sd->name, ver, r.len - r.pos);
        char path[512] = "";
        CHECKF(eq_struct(sd, msg, dec, path, sizeof(path)), "%s v%d iter %d differs at %s",
              sd->name, ver, iter, path);
        rc = gr_proto_encode_body(api->key, response, ver, dec, &w2);
        CHECKF(rc == 0 && w1.len == w2.len && (w1.len == 0 || memcmp(w1.p, w2.p, w1.len) == 0),
              "%s v%d iter %d: re-encoding differs", sd->name, ver, iter);
    }
    gr_wbuf_free(&w1);
    gr_wbuf_free(&w2);
    gr_arena_free(&a);
}

/* Full frames: request through encode_request/decode_request and the response through
 * encode_response/decode_response; then every truncation of both must fail cleanly. */
static void roundtrip_frames(const struct gr_api_desc *api, int16_t ver)
{
    struct gr_arena a;
    struct gr_wbuf w;
    gr_arena_init(&a);
    gr_wbuf_init(&w);
    void *req = gr_arena_alloc(&a, api->request->size);
    fill_struct(api->request, ver, &a, req);
    int32_t corr = (int32_t)rnd();
    int rc = gr_proto_encode_request(api->key, ver, corr, (rnd() & 1) ? "client-1" : NULL, req, &w);
    CHECKF(rc == 0, "%s v%d encode_request: %d", api->name, ver, rc);
    CHECKF(w.len >= 4 && (size_t)gr_rbuf_i32(&(struct gr_rbuf){ w.p, w.len, 0, 0 }) == w.len - 4,
          "%s v%d: bad size prefix", api->name, ver);
    struct gr_req_header hdr;
    void *body;
    rc = gr_proto_decode_request(w.p + 4, w.len - 4, &a, &hdr, &body);
    CHECKF(rc == 0, "%s v%d decode_request: %d", api->name, ver, rc);
    CHECKF(hdr.RequestApiKey == api->key && hdr.RequestApiVersion == ver &&
              hdr.CorrelationId == corr,
          "%s v%d: header mismatch", api->name, ver);
    CHECKF(hdr.HeaderVersion == gr_proto_request_header_version(api->key, ver), "%s v%d hv",
          api->name, ver);
    char path[512] = "";
    if (rc == 0)
        CHECKF(eq_struct(api->request, req, body, path, sizeof(path)), "%s v%d frame differs at %s",
              api->name, ver, path);
    /* every truncation fails */
    for (size_t cut = 0; cut < w.len - 4; cut++) {
        struct gr_arena t;
        gr_arena_init(&t);
        rc = gr_proto_decode_request(w.p + 4, cut, &t, &hdr, &body);
        CHECKF(rc == GR_EPROTO && body == NULL, "%s v%d request cut at %zu: rc %d", api->name, ver,
              cut, rc);
        gr_arena_free(&t);
    }

    gr_wbuf_reset(&w);
    void *resp = gr_arena_alloc(&a, api->response->size);
    fill_struct(api->response, ver, &a, resp);
    struct gr_req_header rh = { api->key, ver, corr, NULL, 1 };
    rc = gr_proto_encode_response(&rh, resp, &w);
    CHECKF(rc == 0, "%s v%d encode_response: %d", api->name, ver, rc);
    int32_t rcorr = 0;
    rc = gr_proto_decode_response(api->key, ver, w.p + 4, w.len - 4, &a, &rcorr, &body);
    CHECKF(rc == 0 && rcorr == corr, "%s v%d decode_response: %d", api->name, ver, rc);
    path[0] = '\0';
    if (rc == 0)
        CHECKF(eq_struct(api->response, resp, body, path, sizeof(path)),
              "%s v%d response frame differs at %s", api->name, ver, path);
    for (size_t cut = 0; cut < w.len - 4; cut++) {
        struct gr_arena t;
        gr_arena_init(&t);
        rc = gr_proto_decode_response(api->key, ver, w.p + 4, cut, &t, &rcorr, &body);
        CHECKF(rc == GR_EPROTO && body == NULL, "%s v%d response cut at %zu: rc %d", api->name,
              ver, cut, rc);
        gr_arena_free(&t);
    }
    gr_wbuf_free(&w);
    gr_arena_free(&a);
}

static void test_all_apis(void)
{
    int combos = 0;
    for (int key = -1; key < 100; key++) {
        const struct gr_api_desc *api = gr_proto_api((int16_t)key);
        if (api == NULL)
            continue;
        CHECKF(api->key == key, "table key %d", key);
        for (int16_t v = api->min_version; v <= api->max_version; v++) {
            for (int it = 0; it < 25; it++) {
                roundtrip_body(api, false, v, it);
                roundtrip_body(api, true, v, it);
            }
            roundtrip_frames(api, v);
            combos++;
        }
    }
    CHECKF(combos > 150, "only %d api/version combinations", combos);
    printf("round-tripped %d api/version combinations\n", combos);
}

/* ---- the encoder against a reference ----
 * The generic encoder of 01752be (every value through the gr_wbuf_* primitives, every field
 * looked up per element), kept here verbatim as the reference: the faster encoder in codec.c
 * must produce the same bytes and the same errors for every API, version and content. */

static inline bool ref_ver_in(int16_t v, int16_t lo, int16_t hi)
{
    return v >= lo && v <= hi;
}

static inline bool ref_present(const struct gr_field_desc *f, int16_t ver)
{
    return ref_ver_in(ver, f->ver_min, f->ver_max);
}

static inline bool ref_nullable(const struct gr_field_desc *f, int16_t ver)
{
    return ref_ver_in(ver, f->null_min, f->null_max);
}

static inline void *ref_at(const void *base, uint32_t off)
{
    return (char *)base + off;
}

/* sizeof the C representation of one value of this type. */
static size_t ref_value_size(uint8_t type, const struct gr_struct_desc *sub)
{
    switch (type) {
    case GR_FT_BOOL: return sizeof(bool);
    case GR_FT_INT8: return 1;
    case GR_FT_INT16:
    case GR_FT_UINT16: return 2;
    case GR_FT_INT32: return 4;
    case GR_FT_INT64: return 8;
    case GR_FT_FLOAT64: return sizeof(double);
    case GR_FT_UUID: return 16;
    case GR_FT_STRING: return sizeof(char *);
    case GR_FT_BYTES:
    case GR_FT_RECORDS: return sizeof(struct gr_bytes);
    case GR_FT_STRUCT: return sub->size;
    }
    return 1;
}

static bool ref_struct_is_default(const struct gr_struct_desc *sd, const void *base);

/* Does the field hold its default (tagged fields are only written when they do not)? */
static bool ref_field_is_default(const struct gr_field_desc *f, const void *base)
{
    const void *p = ref_at(base, f->offset);
    if (f->is_array)
        return *(const int32_t *)ref_at(base, f->count_offset) == (f->def_null ? -1 : 0);
    switch (f->type) {
    case GR_FT_BOOL: return *(const bool *)p == (f->def_int != 0);
    case GR_FT_INT8: return *(const int8_t *)p == (int8_t)f->def_int;
    case GR_FT_INT16: return *(const int16_t *)p == (int16_t)f->def_int;
    case GR_FT_UINT16: return *(const uint16_t *)p == (uint16_t)f->def_int;
    case GR_FT_INT32: return *(const int32_t *)p == (int32_t)f->def_int;
    case GR_FT_INT64: return *(const int64_t *)p == f->def_int;
    case GR_FT_FLOAT64: return memcmp(p, &f->def_f64, sizeof(double)) == 0;
    case GR_FT_UUID: {
        static const uint8_t zero[16];
        return memcmp(p, zero, 16) == 0;
    }
    case GR_FT_STRING: {
        const char *s = *(char *const *)p;
        if (s == NULL || f->def_str == NULL)
            return s == f->def_str;
        return strcmp(s, f->def_str) == 0;
    }
    case GR_FT_BYTES:
    case GR_FT_RECORDS: {
        const struct gr_bytes *b = p;
        return f->def_null ? b->len < 0 : b->len == 0;
    }
    case GR_FT_STRUCT: return ref_struct_is_default(f->sub, p);
    }
    return false;
}

static bool ref_struct_is_default(const struct gr_struct_desc *sd, const void *base)
{
    for (unsigned i = 0; i < sd->nfields; i++)
        if (!ref_field_is_default(&sd->fields[i], base))
            return false;
    return true;
}

static void ref_encode_struct(const struct gr_struct_desc *sd, int16_t ver, bool flex,
                          const void *in, struct gr_wbuf *w);

static void ref_encode_value(uint8_t type, const struct gr_struct_desc *sub, int16_t ver, bool flex,
                         bool can_null, const void *p, struct gr_wbuf *w)
{
    switch (type) {
    case GR_FT_BOOL: gr_wbuf_bool(w, *(const bool *)p); break;
    case GR_FT_INT8: gr_wbuf_i8(w, *(const int8_t *)p); break;
    case GR_FT_INT16: gr_wbuf_i16(w, *(const int16_t *)p); break;
    case GR_FT_UINT16: gr_wbuf_u16(w, *(const uint16_t *)p); break;
    case GR_FT_INT32: gr_wbuf_i32(w, *(const int32_t *)p); break;
    case GR_FT_INT64: gr_wbuf_i64(w, *(const int64_t *)p); break;
    case GR_FT_FLOAT64: gr_wbuf_f64(w, *(const double *)p); break;
    case GR_FT_UUID: gr_wbuf_uuid(w, p); break;
    case GR_FT_STRING: {
        const char *s = *(char *const *)p;
        gr_wbuf_string(w, (s == NULL && !can_null) ? "" : s, flex);
        break;
    }
    case GR_FT_BYTES:
    case GR_FT_RECORDS: {
        struct gr_bytes b = *(const struct gr_bytes *)p;
        if (b.len == -1 && !can_null)
            b.len = 0;
        gr_wbuf_bytes(w, b, flex);
        break;
    }
    case GR_FT_STRUCT: ref_encode_struct(sub, ver, flex, p, w); break;
    default: gr_wbuf_fail(w, -EINVAL); break;
    }
}

static void ref_encode_field(const struct gr_field_desc *f, int16_t ver, bool flex, const void *base,
                         struct gr_wbuf *w)
{
    if (!f->is_array) {
        ref_encode_value(f->type, f->sub, ver, flex, ref_nullable(f, ver), ref_at(base, f->offset), w);
        return;
    }
    int32_t n = *(const int32_t *)ref_at(base, f->count_offset);
    const char *arr = *(char *const *)ref_at(base, f->offset);
    if (n < -1 || (n > 0 && arr == NULL)) {
        gr_wbuf_fail(w, -EINVAL);
        return;
    }
    if (n == -1) {
        gr_wbuf_array_len(w, ref_nullable(f, ver) ? -1 : 0, flex);
        return;
    }
    gr_wbuf_array_len(w, n, flex);
    size_t esz = ref_value_size(f->type, f->sub);
    for (int32_t i = 0; i < n && !w->err; i++)
        ref_encode_value(f->type, f->sub, ver, flex, false, arr + (size_t)i * esz, w);
}

static void ref_encode_struct(const struct gr_struct_desc *sd, int16_t ver, bool flex,
                          const void *in, struct gr_wbuf *w)
{
    for (unsigned i = 0; i < sd->nregular && !w->err; i++) {
        const struct gr_field_desc *f = &sd->fields[i];
        if (ref_present(f, ver))
            ref_encode_field(f, ver, flex, in, w);
    }
    if (!flex || w->err)
        return;
    uint32_t ntags = 0;
    for (unsigned i = sd->nregular; i < sd->nfields; i++) {
        const struct gr_field_desc *f = &sd->fields[i];
        if (ref_present(f, ver) && !ref_field_is_default(f, in))
            ntags++;
    }
    gr_wbuf_uvarint(w, ntags);
    for (unsigned i = sd->nregular; i < sd->nfields && ntags && !w->err; i++) {
        const struct gr_field_desc *f = &sd->fields[i];
        if (!ref_present(f, ver) || ref_field_is_default(f, in))
            continue;
        gr_wbuf_uvarint(w, (uint32_t)f->tag);
        /* encode the value, then slide it right to make room for its size prefix */
        size_t start = w->len;
        ref_encode_field(f, ver, flex, in, w);
        size_t len = w->len - start;
        if (len > UINT32_MAX) {
            gr_wbuf_fail(w, -EMSGSIZE);
            return;
        }
        size_t s = gr_uvarint_size((uint32_t)len);
        gr_wbuf_reserve(w, s);
        memmove(w->p + start + s, w->p + start, len);
        size_t end = w->len + s;
        w->len = start;
        gr_wbuf_uvarint(w, (uint32_t)len);
        w->len = end;
    }
}


static int ref_encode_body(const struct gr_struct_desc *sd, int16_t ver, bool flex, const void *in,
                           struct gr_wbuf *w)
{
    ref_encode_struct(sd, ver, flex, in, w);
    int rc = w->err;
    if (rc) {
        w->len = 0;
        w->err = 0;
    }
    return rc;
}

/* Damages a filled message the way a buggy handler could: non-nullable arrays left null (-1,
 * encoded as empty), a count without elements or below -1 (both -EINVAL). */
static void damage_struct(const struct gr_struct_desc *sd, int16_t ver, void *m, int how)
{
    for (unsigned i = 0; i < sd->nfields; i++) {
        const struct gr_field_desc *f = &sd->fields[i];
        if (!vin(ver, f->ver_min, f->ver_max))
            continue;
        char *p = (char *)m + f->offset;
        int32_t *cnt = f->is_array ? (int32_t *)((char *)m + f->count_offset) : NULL;
        if (cnt && rnd() % 4 == 0) {
            if (how == 0) {
                *cnt = -1;
                *(void **)p = NULL;
            } else if (how == 1 && *cnt == 0) {
                *cnt = 2;
            } else if (how == 2) {
                *cnt = -2;
            }
            return;
        }
        if (f->type == GR_FT_STRUCT && cnt && *cnt > 0 && *(void **)p)
            damage_struct(f->sub, ver, *(char **)p + (size_t)(rnd() % (uint64_t)*cnt) * f->sub->size, how);
        else if (f->type == GR_FT_STRUCT && !cnt)
            damage_struct(f->sub, ver, p, how);
    }
}

static void compare_encoders(const struct gr_api_desc *api, bool response, int16_t ver, int iter)
{
    const struct gr_struct_desc *sd = response ? api->response : api->request;
    bool flex = gr_proto_is_flexible(api, ver);
    struct gr_arena a;
    struct gr_wbuf w1, w2;
    gr_arena_init(&a);
    gr_wbuf_init(&w1);
    gr_wbuf_init(&w2);
    void *msg = gr_arena_alloc(&a, sd->size);
    fill_struct(sd, ver, &a, msg);
    if (iter % 4 == 3)
        damage_struct(sd, ver, msg, (int)(rnd() % 3));
    int rc1 = gr_proto_encode_struct(sd, ver, flex, msg, &w1);
    int rc2 = ref_encode_body(sd, ver, flex, msg, &w2);
    CHECKF(rc1 == rc2, "%s v%d iter %d: encoder %d, reference %d", sd->name, ver, iter, rc1, rc2);
    CHECKF(rc1 != 0 || (w1.len == w2.len && (w1.len == 0 || memcmp(w1.p, w2.p, w1.len) == 0)),
           "%s v%d iter %d: encoder and reference bytes differ (%zu vs %zu bytes)", sd->name, ver,
           iter, w1.len, w2.len);
    gr_wbuf_free(&w1);
    gr_wbuf_free(&w2);
    gr_arena_free(&a);
}

/* A Metadata answer like the broker's (many partitions, RF 3, some offline replicas, varied
 * error codes) at every version, against the reference. */
static void compare_metadata_answer(void)
{
    struct gr_arena a;
    gr_arena_init(&a);
    enum { NT = 7, NP = 301 };
    static int32_t ids[NT][NP][7];
    struct MetadataResponse_MetadataResponseTopic topics[NT];
    struct MetadataResponse_MetadataResponseBroker brokers[3] = {
        { 1, "host1", 9092, "r1" }, { 2, "host2", 9093, NULL }, { 3, "h3", 9094, "r3" } };
    for (int t = 0; t < NT; t++) {
        struct MetadataResponse_MetadataResponsePartition *ps = gr_arena_alloc(&a, sizeof(*ps) * NP);
        for (int i = 0; i < NP; i++) {
            int32_t *r = ids[t][i];
            for (int k = 0; k < 7; k++)
                r[k] = (int32_t)(1 + (i + k) % 3 + (k == 6 ? 1000000 : 0));
            ps[i] = (struct MetadataResponse_MetadataResponsePartition){
                .ErrorCode = (int16_t)(i % 11 == 0 ? 5 : 0), .PartitionIndex = i, .LeaderId = r[0],
                .LeaderEpoch = i * 7919, .ReplicaNodesCount = 3, .ReplicaNodes = r,
                .IsrNodesCount = i % 5, .IsrNodes = &r[3], .OfflineReplicasCount = i % 2,
                .OfflineReplicas = &r[6] };
        }
        char *name = gr_arena_alloc(&a, 32);
        snprintf(name, 32, "topic-%d", t);
        topics[t] = (struct MetadataResponse_MetadataResponseTopic){
            .ErrorCode = 0, .Name = name, .IsInternal = t == 3, .PartitionsCount = NP,
            .Partitions = ps, .TopicAuthorizedOperations = t == 2 ? 0x1f8 : INT32_MIN };
    }
    struct MetadataResponse resp = { .ThrottleTimeMs = 3, .BrokersCount = 3, .Brokers = brokers,
                                     .ClusterId = "cid", .ControllerId = 2, .TopicsCount = NT,
                                     .Topics = topics, .ClusterAuthorizedOperations = INT32_MIN };
    const struct gr_api_desc *api = gr_proto_api(GR_API_METADATA);
    for (int16_t v = api->min_version; v <= api->max_version; v++) {
        struct gr_wbuf w1, w2;
        gr_wbuf_init(&w1);
        gr_wbuf_init(&w2);
        bool flex = gr_proto_is_flexible(api, v);
        int rc1 = gr_proto_encode_struct(api->response, v, flex, &resp, &w1);
        int rc2 = ref_encode_body(api->response, v, flex, &resp, &w2);
        CHECKF(rc1 == 0 && rc2 == 0 && w1.len == w2.len && memcmp(w1.p, w2.p, w1.len) == 0,
               "Metadata answer v%d: encoder and reference differ (%zu vs %zu bytes)", v, w1.len,
               w2.len);
        gr_wbuf_free(&w1);
        gr_wbuf_free(&w2);
    }
    gr_arena_free(&a);
}

static void test_encoder_matches_reference(void)
{
    int combos = 0;
    for (int key = 0; key < 100; key++) {
        const struct gr_api_desc *api = gr_proto_api((int16_t)key);
        if (api == NULL)
            continue;
        for (int16_t v = api->min_version; v <= api->max_version; v++, combos++)
            for (int it = 0; it < 40; it++) {
                compare_encoders(api, false, v, it);
                compare_encoders(api, true, v, it);
            }
    }
    compare_metadata_answer();
    printf("encoder matches the reference on %d api/version combinations\n", combos);
}

/* ---- byte-exact frames ---- */

static void check_bytes(const char *what, const struct gr_wbuf *w, const uint8_t *exp, size_t n)
{
    bool ok = w->len == n && (n == 0 || memcmp(w->p, exp, n) == 0);
    CHECKF(ok, "%s: bytes differ", what);
    if (!ok) {
        fprintf(stderr, "  got:");
        for (size_t i = 0; i < w->len; i++)
            fprintf(stderr, " %02x", w->p[i]);
        fprintf(stderr, "\n  exp:");
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, " %02x", exp[i]);
        fputc('\n', stderr);
    }
}

static void test_exact_frames(void)
{
    struct gr_arena a;
    struct gr_wbuf w;
    gr_arena_init(&a);
    gr_wbuf_init(&w);

    /* ApiVersions v0 request: header v1, empty body. */
    struct ApiVersionsRequest av = { 0 };
    CHECKF(gr_proto_encode_request(GR_API_API_VERSIONS, 0, 1, "abc", &av, &w) == 0, "av0");
    static const uint8_t av0[] = { 0, 0, 0, 13, 0, 18, 0, 0, 0, 0, 0, 1, 0, 3, 'a', 'b', 'c' };
    check_bytes("ApiVersions v0 request", &w, av0, sizeof(av0));

    /* ApiVersions v3 request: header v2 (classic client id + empty tags), compact strings. */
    gr_wbuf_reset(&w);
    av.ClientSoftwareName = "kcat";
    av.ClientSoftwareVersion = "1.0";
    CHECKF(gr_proto_encode_request(GR_API_API_VERSIONS, 3, 2, "abc", &av, &w) == 0, "av3");
    static const uint8_t av3[] = { 0, 0, 0, 24, 0, 18, 0, 3, 0, 0, 0, 2, 0, 3, 'a', 'b', 'c', 0,
                                   5, 'k', 'c', 'a', 't', 4, '1', '.', '0', 0 };
    check_bytes("ApiVersions v3 request", &w, av3, sizeof(av3));
    struct gr_req_header hdr;
    void *body;
    CHECKF(gr_proto_decode_request(w.p + 4, w.len - 4, &a, &hdr, &body) == 0, "av3 decode");
    struct ApiVersionsRequest *avd = body;
    CHECKF(hdr.HeaderVersion == 2 && hdr.ClientId && strcmp(hdr.ClientId, "abc") == 0, "av3 hdr");
    CHECKF(avd && strcmp(avd->ClientSoftwareName, "kcat") == 0 &&
              strcmp(avd->ClientSoftwareVersion, "1.0") == 0,
          "av3 body");

    /* ApiVersions v3 response: response header v0 (no tag byte) even though flexible. */
    gr_wbuf_reset(&w);
    struct ApiVersionsResponse_ApiVersion keys[1] = { { 18, 0, 3 } };
    struct ApiVersionsResponse avr;
    gr_proto_init_struct(&gr_desc_ApiVersionsResponse, &avr);
    avr.ApiKeysCount = 1;
    avr.ApiKeys = keys;
    hdr.CorrelationId = 2;
    CHECKF(gr_proto_encode_response(&hdr, &avr, &w) == 0, "avr encode");
    static const uint8_t avr3[] = { 0, 0, 0, 19, 0, 0, 0, 2, /* corr, no header tags */
                                    0, 0,                   /* ErrorCode */
                                    2, 0, 18, 0, 0, 0, 3, 0, /* ApiKeys: 1 entry + its tags */
                                    0, 0, 0, 0,             /* ThrottleTimeMs */
                                    0 };                    /* defaults: no tagged fields */
    check_bytes("ApiVersions v3 response", &w, avr3, sizeof(avr3));

    /* Metadata v1 request for topic "t1", then with a null topic list (all topics). */
    gr_wbuf_reset(&w);
    struct MetadataRequest_MetadataRequestTopic mt = { .Name = "t1" };
    struct MetadataRequest mr;
    gr_proto_init_struct(&gr_desc_MetadataRequest, &mr);
    CHECKF(mr.AllowAutoTopicCreation == true, "default true");
    mr.TopicsCount = 1;
    mr.Topics = &mt;
    CHECKF(gr_proto_encode_request(GR_API_METADATA, 1, 5, "c", &mr, &w) == 0, "md1");
    static const uint8_t md1[] = { 0, 0, 0, 19, 0, 3, 0, 1, 0, 0, 0, 5, 0, 1, 'c',
                                   0, 0, 0, 1, 0, 2, 't', '1' };
    check_bytes("Metadata v1 request", &w, md1, sizeof(md1));
    gr_wbuf_reset(&w);
    mr.TopicsCount = -1;
    mr.Topics = NULL;
    CHECKF(gr_proto_encode_request(GR_API_METADATA, 1, 5, "c", &mr, &w) == 0, "md1 null");
    static const uint8_t md1n[] = { 0, 0, 0, 15, 0, 3, 0, 1, 0, 0, 0, 5, 0, 1, 'c',
                                    0xff, 0xff, 0xff, 0xff };
    check_bytes("Metadata v1 request (null topics)", &w, md1n, sizeof(md1n));
    CHECKF(gr_proto_decode_request(w.p + 4, w.len - 4, &a, &hdr, &body) == 0, "md1n decode");
    CHECKF(body && ((struct MetadataRequest *)body)->TopicsCount == -1, "md1n null array");
    CHECKF(body && ((struct MetadataRequest *)body)->AllowAutoTopicCreation == true,
          "absent field takes default");

    /* CreateTopics v5 request (flexible) with unknown tagged fields at two levels. */
    static const uint8_t ct5[] = {
        0, 19, 0, 5, 0, 0, 0, 7, 0, 1, 'c', 0, /* header v2 */
        2,                                     /* Topics: 1 */
        2, 't', 0, 0, 0, 3, 0, 1,              /* Name "t", NumPartitions 3, RF 1 */
        1,                                     /* Assignments: empty */
        2, 2, 'k', 0, 0,                       /* Configs: [{Name "k", Value null, no tags}] */
        1, 5, 2, 0xaa, 0xbb,                   /* topic tags: unknown tag 5, 2 bytes */
        0, 0, 0x75, 0x30, 1,                   /* TimeoutMs 30000, ValidateOnly true */
        1, 10, 0                               /* top tags: unknown tag 10, 0 bytes */
    };
    CHECKF(gr_proto_decode_request(ct5, sizeof(ct5), &a, &hdr, &body) == 0, "ct5 decode");
    struct CreateTopicsRequest *ct = body;
    CHECKF(hdr.RequestApiKey == 19 && hdr.RequestApiVersion == 5 && hdr.CorrelationId == 7,
          "ct5 header");
    CHECKF(ct && ct->TopicsCount == 1 && strcmp(ct->Topics[0].Name, "t") == 0 &&
              ct->Topics[0].NumPartitions == 3 && ct->Topics[0].ReplicationFactor == 1 &&
              ct->Topics[0].AssignmentsCount == 0 && ct->Topics[0].ConfigsCount == 1 &&
              strcmp(ct->Topics[0].Configs[0].Name, "k") == 0 &&
              ct->Topics[0].Configs[0].Value == NULL && ct->TimeoutMs == 30000 &&
              ct->ValidateOnly,
          "ct5 body");
    gr_wbuf_reset(&w);
    CHECKF(gr_proto_encode_request(19, 5, 7, "c", ct, &w) == 0, "ct5 encode");
    uint8_t ct5x[sizeof(ct5) + 4];
    size_t n = 0;
    ct5x[n++] = 0, ct5x[n++] = 0, ct5x[n++] = 0, ct5x[n++] = 0;
    memcpy(ct5x + n, ct5, 27); /* up to the topic tag section */
    n += 27;
    ct5x[n++] = 0; /* unknown tags are dropped */
    memcpy(ct5x + n, ct5 + 32, 5);
    n += 5;
    ct5x[n++] = 0;
    ct5x[3] = (uint8_t)(n - 4);
    check_bytes("CreateTopics v5 re-encoded", &w, ct5x, n);

    /* CreateTopics v5 response with the known tagged field TopicConfigErrorCode (tag 0). */
    gr_wbuf_reset(&w);
    struct CreateTopicsResponse_CreatableTopicResult tr;
    gr_proto_init_struct(&gr_desc_CreateTopicsResponse_CreatableTopicResult, &tr);
    CHECKF(tr.NumPartitions == -1 && tr.ReplicationFactor == -1 && tr.ConfigsCount == 0 &&
              tr.TopicConfigErrorCode == 0,
          "CreatableTopicResult defaults");
    tr.Name = "t";
    tr.NumPartitions = 3;
    tr.ReplicationFactor = 1;
    tr.ConfigsCount = -1;
    tr.TopicConfigErrorCode = 42;
    struct CreateTopicsResponse ctr = { .ThrottleTimeMs = 0, .TopicsCount = 1, .Topics = &tr };
    struct gr_req_header rh = { 19, 5, 9, NULL, 2 };
    CHECKF(gr_proto_encode_response(&rh, &ctr, &w) == 0, "ctr5 encode");
    static const uint8_t ctr5[] = {
        0, 0, 0, 28, 0, 0, 0, 9, 0, /* size, correlation id, header tags */
        0, 0, 0, 0, 2,              /* ThrottleTimeMs, Topics: 1 */
        2, 't', 0, 0, 0,            /* Name, ErrorCode, ErrorMessage null */
        0, 0, 0, 3, 0, 1, 0,        /* NumPartitions, ReplicationFactor, Configs null */
        1, 0, 2, 0, 42,             /* tags: TopicConfigErrorCode (tag 0, 2 bytes) = 42 */
        0                           /* top-level tags */
    };
    check_bytes("CreateTopics v5 response", &w, ctr5, sizeof(ctr5));
    int32_t corr = 0;
    CHECKF(gr_proto_decode_response(19, 5, w.p + 4, w.len - 4, &a, &corr, &body) == 0 &&
              corr == 9,
          "ctr5 decode");
    struct CreateTopicsResponse *ctd = body;
    CHECKF(ctd && ctd->TopicsCount == 1 && ctd->Topics[0].TopicConfigErrorCode == 42 &&
              ctd->Topics[0].ConfigsCount == -1 && ctd->Topics[0].ErrorMessage == NULL,
          "ctr5 body");
    /* tagged field at its default is omitted */
    gr_wbuf_reset(&w);
    tr.TopicConfigErrorCode = 0;
    CHECKF(gr_proto_encode_response(&rh, &ctr, &w) == 0 && w.len == sizeof(ctr5) - 4 &&
              w.p[w.len - 2] == 0,
          "default tagged field omitted");

    /* ControlledShutdown v0 uses request header v0 (no client id). */
    gr_wbuf_reset(&w);
    struct ControlledShutdownRequest cs;
    gr_proto_init_struct(&gr_desc_ControlledShutdownRequest, &cs);
    cs.BrokerId = 2;
    CHECKF(gr_proto_encode_request(GR_API_CONTROLLED_SHUTDOWN, 0, 4, "ignored", &cs, &w) == 0,
          "cs0");
    static const uint8_t cs0[] = { 0, 0, 0, 12, 0, 7, 0, 0, 0, 0, 0, 4, 0, 0, 0, 2 };
    check_bytes("ControlledShutdown v0 request", &w, cs0, sizeof(cs0));
    CHECKF(gr_proto_decode_request(w.p + 4, w.len - 4, &a, &hdr, &body) == 0 &&
              hdr.HeaderVersion == 0 && hdr.ClientId == NULL &&
              ((struct ControlledShutdownRequest *)body)->BrokerId == 2 &&
              ((struct ControlledShutdownRequest *)body)->BrokerEpoch == -1,
          "cs0 decode");
    gr_wbuf_free(&w);
    gr_arena_free(&a);
}

/* ---- malformed input ---- */

static int decode_req(const uint8_t *p, size_t n, struct gr_arena *a, struct gr_req_header *hdr)
{
    void *body = (void *)1;
    int rc = gr_proto_decode_request(p, n, a, hdr, &body);
    if (rc != 0)
        CHECKF(body == NULL, "body must be NULL on error");
    return rc;
}

static void test_malformed(void)
{
    struct gr_arena a;
    struct gr_req_header hdr;
    gr_arena_init(&a);

    /* Metadata v1, topic name length -2 (only -1 means null) and -1 (not nullable). */
    static const uint8_t neg2[] = { 0, 3, 0, 1, 0, 0, 0, 5, 0, 1, 'c', 0, 0, 0, 1, 0xff, 0xfe };
    CHECKF(decode_req(neg2, sizeof(neg2), &a, &hdr) == GR_EPROTO, "string length -2");
    CHECKF(hdr.HeaderVersion == 1 && hdr.CorrelationId == 5, "header still returned");
    static const uint8_t neg1[] = { 0, 3, 0, 1, 0, 0, 0, 5, 0, 1, 'c', 0, 0, 0, 1, 0xff, 0xff };
    CHECKF(decode_req(neg1, sizeof(neg1), &a, &hdr) == GR_EPROTO, "null non-nullable string");
    /* client id length -3 */
    static const uint8_t badcid[] = { 0, 3, 0, 1, 0, 0, 0, 5, 0xff, 0xfd, 0, 0, 0, 0 };
    CHECKF(decode_req(badcid, sizeof(badcid), &a, &hdr) == GR_EPROTO && hdr.HeaderVersion == -1,
          "client id length -3");
    /* string longer than the frame */
    static const uint8_t longs[] = { 0, 3, 0, 1, 0, 0, 0, 5, 0, 1, 'c', 0, 0, 0, 1, 0x7f, 0xff, 'x' };
    CHECKF(decode_req(longs, sizeof(longs), &a, &hdr) == GR_EPROTO, "string past end");

    /* Produce v3: records (bytes) length -2, then INT32_MIN. */
    uint8_t prod[] = { 0, 0, 0, 3, 0, 0, 0, 1, 0xff, 0xff, /* header v1, null client id */
                       0xff, 0xff, 0, 1, 0, 0, 0, 100,     /* TransactionalId null, acks, timeout */
                       0, 0, 0, 1, 0, 1, 't',              /* 1 topic "t" */
                       0, 0, 0, 1, 0, 0, 0, 0,             /* 1 partition, index 0 */
                       0xff, 0xff, 0xff, 0xfe };           /* records length -2 */
    CHECKF(decode_req(prod, sizeof(prod), &a, &hdr) == GR_EPROTO, "bytes length -2");
    prod[sizeof(prod) - 4] = 0x80, prod[sizeof(prod) - 3] = 0, prod[sizeof(prod) - 2] = 0,
                        prod[sizeof(prod) - 1] = 0;
    CHECKF(decode_req(prod, sizeof(prod), &a, &hdr) == GR_EPROTO, "bytes length INT32_MIN");
    prod[sizeof(prod) - 4] = 0xff, prod[sizeof(prod) - 3] = 0xff, prod[sizeof(prod) - 2] = 0xff,
                        prod[sizeof(prod) - 1] = 0xff;
    CHECKF(decode_req(prod, sizeof(prod), &a, &hdr) == 0, "records null is fine");
    gr_arena_free(&a);

    /* Array count INT32_MAX with 10 bytes left: fails before allocating. */
    static const uint8_t bigarr[] = { 0, 3, 0, 1, 0, 0, 0, 5, 0, 1, 'c', 0x7f, 0xff, 0xff, 0xff,
                                      0, 1, 'a', 0, 1, 'b', 0, 1, 'c', 0 };
    CHECKF(decode_req(bigarr, sizeof(bigarr), &a, &hdr) == GR_EPROTO, "INT32_MAX array");
    CHECKF(a.total < 65536, "arena grew to %zu", a.total);
    gr_arena_free(&a);
    /* LeaderAndIsr v0 live leaders: 2 elements claimed with 10 bytes left; each needs >= 10
     * (int32 + string + int32), so even a small count is refused before allocating. */
    static const uint8_t lai[] = { 0, 4, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 1,
                                   0, 0, 0, 0, /* UngroupedPartitionStates: empty */
                                   0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 9 };
    CHECKF(decode_req(lai, sizeof(lai), &a, &hdr) == GR_EPROTO, "count * min size > remaining");
    /* Compact count that overflows int32 (uvarint 0xffffffff) in Metadata v9. */
    static const uint8_t cbig[] = { 0, 3, 0, 9, 0, 0, 0, 5, 0, 1, 'c', 0,
                                    0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0 };
    CHECKF(decode_req(cbig, sizeof(cbig), &a, &hdr) == GR_EPROTO, "compact count overflow");
    /* Overlong varint (6 bytes). */
    static const uint8_t vlong[] = { 0, 3, 0, 9, 0, 0, 0, 5, 0, 1, 'c', 0,
                                     0x81, 0x80, 0x80, 0x80, 0x80, 0x00 };
    CHECKF(decode_req(vlong, sizeof(vlong), &a, &hdr) == GR_EPROTO, "overlong varint");
    /* Tagged field whose size runs past the end. */
    static const uint8_t tagpast[] = { 0, 18, 0, 3, 0, 0, 0, 5, 0, 1, 'c', 0,
                                       1, 1, 1, 0, 50, 1 };
    CHECKF(decode_req(tagpast, sizeof(tagpast), &a, &hdr) == GR_EPROTO, "tag size past end");
    gr_arena_free(&a);

    /* Unknown api key, version -1, version too high: distinct codes with the header. */
    static const uint8_t unk[] = { 0x03, 0xe7, 0, 0, 0, 0, 0, 42, 0, 1, 'c' };
    CHECKF(decode_req(unk, sizeof(unk), &a, &hdr) == GR_PROTO_EUNKNOWN_API &&
              hdr.RequestApiKey == 999 && hdr.CorrelationId == 42,
          "unknown api key");
    static const uint8_t vneg[] = { 0, 3, 0xff, 0xff, 0, 0, 0, 43, 0, 1, 'c' };
    CHECKF(decode_req(vneg, sizeof(vneg), &a, &hdr) == GR_PROTO_EUNSUPPORTED_VERSION &&
              hdr.RequestApiVersion == -1 && hdr.CorrelationId == 43,
          "version -1");
    /* ApiVersions v5 (newer than the tables): header parsed as v2, UNSUPPORTED_VERSION. */
    static const uint8_t av5[] = { 0, 18, 0, 5, 0, 0, 0, 44, 0, 1, 'c', 0, 9, 9, 9 };
    CHECKF(decode_req(av5, sizeof(av5), &a, &hdr) == GR_PROTO_EUNSUPPORTED_VERSION &&
              hdr.CorrelationId == 44 && hdr.HeaderVersion == 2 && hdr.ClientId &&
              strcmp(hdr.ClientId, "c") == 0,
          "ApiVersions v5");
    CHECKF(decode_req(av5, 5, &a, &hdr) == GR_EPROTO, "short header");
    CHECKF(gr_proto_api(-1) == NULL && gr_proto_api(999) == NULL && gr_proto_api(58) == NULL,
          "unknown keys");
    const struct gr_api_desc *md = gr_proto_api(GR_API_METADATA);
    CHECKF(md && strcmp(md->name, "Metadata") == 0 && md->min_version == 0 &&
              md->max_version == 12 && md->flex_version == 9 &&
              md->request == &gr_desc_MetadataRequest,
          "metadata api entry");
    CHECKF(gr_proto_response_header_version(GR_API_API_VERSIONS, 3) == 0 &&
              gr_proto_response_header_version(GR_API_METADATA, 9) == 1 &&
              gr_proto_response_header_version(GR_API_METADATA, 8) == 0 &&
              gr_proto_request_header_version(GR_API_CONTROLLED_SHUTDOWN, 0) == 0 &&
              gr_proto_request_header_version(GR_API_CONTROLLED_SHUTDOWN, 1) == 1 &&
              gr_proto_request_header_version(GR_API_CONTROLLED_SHUTDOWN, 3) == 2,
          "header versions");

    /* Encoding errors leave the buffer untouched. */
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    struct MetadataRequest mr;
    gr_proto_init_struct(&gr_desc_MetadataRequest, &mr);
    mr.TopicsCount = 2; /* with a NULL array */
    CHECKF(gr_proto_encode_request(3, 1, 1, "c", &mr, &w) == -EINVAL && w.len == 0 && !w.err,
          "encode NULL array with count");
    CHECKF(gr_proto_encode_request(3, 13, 1, "c", &mr, &w) == GR_PROTO_EUNSUPPORTED_VERSION,
          "encode unsupported version");
    /* NULL body = all defaults (ApiVersions v0 has no fields anyway) */
    gr_wbuf_reset(&w);
    CHECKF(gr_proto_encode_request(GR_API_API_VERSIONS, 0, 1, "abc", NULL, &w) == 0 && w.len == 17,
          "NULL body");
    gr_wbuf_free(&w);
    gr_arena_free(&a);
}

/* ---- primitives ---- */

static void test_primitives(void)
{
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    static const int32_t vi[] = { 0, 1, -1, 63, -64, 64, INT32_MAX, INT32_MIN };
    static const int64_t vl[] = { 0, -1, 300, INT64_MAX, INT64_MIN };
    for (size_t i = 0; i < GR_ARRAY_LEN(vi); i++)
        gr_wbuf_varint(&w, vi[i]);
    for (size_t i = 0; i < GR_ARRAY_LEN(vl); i++)
        gr_wbuf_varlong(&w, vl[i]);
    gr_wbuf_uvarint(&w, 300);
    gr_wbuf_f64(&w, 1.5);
    struct gr_rbuf r;
    gr_rbuf_init(&r, w.p, w.len);
    for (size_t i = 0; i < GR_ARRAY_LEN(vi); i++)
        CHECKF(gr_rbuf_varint(&r) == vi[i], "varint %d", vi[i]);
    for (size_t i = 0; i < GR_ARRAY_LEN(vl); i++)
        CHECKF(gr_rbuf_varlong(&r) == vl[i], "varlong %" PRId64, vl[i]);
    CHECKF(gr_rbuf_uvarint(&r) == 300 && gr_rbuf_f64(&r) == 1.5 && !r.err && r.pos == r.len,
          "uvarint/f64");
    CHECKF(gr_rbuf_i8(&r) == 0 && r.err == GR_EPROTO, "sticky error at end");
    CHECKF(gr_rbuf_i32(&r) == 0 && r.err == GR_EPROTO, "stays failed");
    /* zigzag: -1 -> 1, 1 -> 2; 300 -> ac 02 */
    gr_wbuf_reset(&w);
    gr_wbuf_varint(&w, -1);
    gr_wbuf_varint(&w, 1);
    gr_wbuf_uvarint(&w, 300);
    static const uint8_t zz[] = { 1, 2, 0xac, 0x02 };
    check_bytes("zigzag/uvarint", &w, zz, sizeof(zz));
    gr_wbuf_reset(&w);
    gr_wbuf_i32(&w, 0);
    gr_wbuf_i16(&w, 7);
    gr_wbuf_patch_i32(&w, 0, 0x01020304);
    static const uint8_t pt[] = { 1, 2, 3, 4, 0, 7 };
    check_bytes("patch_i32", &w, pt, sizeof(pt));
    gr_wbuf_free(&w);

    struct gr_arena a;
    gr_arena_init(&a);
    for (int i = 0; i < 1000; i++) {
        uint8_t *p = gr_arena_alloc(&a, (size_t)(i % 97) + 1);
        CHECKF(p && ((uintptr_t)p % 8) == 0 && p[0] == 0, "arena alloc");
        p[0] = 1;
    }
    CHECKF(gr_arena_alloc(&a, 3 << 20) != NULL, "big arena block");
    CHECKF(gr_arena_alloc(&a, (size_t)1 << 31) == NULL, "huge arena block refused");
    gr_arena_free(&a);
    CHECKF(a.total == 0 && a.head == NULL, "arena freed");
}

int main(void)
{
    test_primitives();
    test_exact_frames();
    test_malformed();
    test_all_apis();
    test_encoder_matches_reference();
    if (test_failures) {
        fprintf(stderr, "%d failure(s)\n", test_failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
