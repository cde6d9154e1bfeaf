/* Table-driven encode/decode of Kafka messages and headers (see codec.h and desc.h).
 *
 * Every routine walks a gr_struct_desc: for each field it checks whether the field exists in
 * the version being coded, then codes the value (or each array element) by its gr_ftype. The
 * flexible flag selects compact lengths and adds a tagged-field section after each struct. */
#include "protocol/codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static inline bool ver_in(int16_t v, int16_t lo, int16_t hi)
{
    return v >= lo && v <= hi;
}

static inline bool present(const struct gr_field_desc *f, int16_t ver)
{
    return ver_in(ver, f->ver_min, f->ver_max);
}

static inline bool nullable(const struct gr_field_desc *f, int16_t ver)
{
    return ver_in(ver, f->null_min, f->null_max);
}

static inline void *at(const void *base, uint32_t off)
{
    return (char *)base + off;
}

/* sizeof the C representation of one value of this type. */
static size_t value_size(uint8_t type, const struct gr_struct_desc *sub)
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

static size_t struct_wire_min(const struct gr_struct_desc *sd, int16_t ver, bool flex);

/* The fewest bytes one value of this type can occupy on the wire. */
static size_t value_wire_min(uint8_t type, const struct gr_struct_desc *sub, int16_t ver,
                             bool flex)
{
    switch (type) {
    case GR_FT_BOOL:
    case GR_FT_INT8: return 1;
    case GR_FT_INT16:
    case GR_FT_UINT16: return 2;
    case GR_FT_INT32: return 4;
    case GR_FT_INT64:
    case GR_FT_FLOAT64: return 8;
    case GR_FT_UUID: return 16;
    case GR_FT_STRING: return flex ? 1 : 2;
    case GR_FT_BYTES:
    case GR_FT_RECORDS: return flex ? 1 : 4;
    case GR_FT_STRUCT: return struct_wire_min(sub, ver, flex);
    }
    return 1;
}

static size_t struct_wire_min(const struct gr_struct_desc *sd, int16_t ver, bool flex)
{
    size_t n = flex ? 1 : 0; /* tagged-field count */
    for (unsigned i = 0; i < sd->nregular; i++) {
        const struct gr_field_desc *f = &sd->fields[i];
        if (!present(f, ver))
            continue;
        n += f->is_array ? (flex ? 1 : 4) : value_wire_min(f->type, f->sub, ver, flex);
    }
    return n;
}

/* ---- defaults ---- */

static void set_default(const struct gr_field_desc *f, void *base)
{
    void *p = at(base, f->offset);
    if (f->is_array) {
        *(int32_t *)at(base, f->count_offset) = f->def_null ? -1 : 0;
        *(void **)p = NULL;
        return;
    }
    switch (f->type) {
    case GR_FT_BOOL: *(bool *)p = f->def_int != 0; break;
    case GR_FT_INT8: *(int8_t *)p = (int8_t)f->def_int; break;
    case GR_FT_INT16: *(int16_t *)p = (int16_t)f->def_int; break;
    case GR_FT_UINT16: *(uint16_t *)p = (uint16_t)f->def_int; break;
    case GR_FT_INT32: *(int32_t *)p = (int32_t)f->def_int; break;
    case GR_FT_INT64: *(int64_t *)p = f->def_int; break;
    case GR_FT_FLOAT64: *(double *)p = f->def_f64; break;
    case GR_FT_UUID: memset(p, 0, 16); break;
    case GR_FT_STRING: *(char **)p = (char *)f->def_str; break;
    case GR_FT_BYTES:
    case GR_FT_RECORDS: {
        struct gr_bytes b = { NULL, f->def_null ? -1 : 0 };
        *(struct gr_bytes *)p = b;
        break;
    }
    case GR_FT_STRUCT: gr_proto_init_struct(f->sub, p); break;
    }
}

void gr_proto_init_struct(const struct gr_struct_desc *sd, void *out)
{
    memset(out, 0, sd->size);
    for (unsigned i = 0; i < sd->nfields; i++)
        set_default(&sd->fields[i], out);
}

void *gr_proto_new(struct gr_arena *a, const struct gr_struct_desc *sd)
{
    void *p = gr_arena_alloc(a, sd->size);
    if (p)
        gr_proto_init_struct(sd, p);
    return p;
}

static bool struct_is_default(const struct gr_struct_desc *sd, const void *base);

/* Does the field hold its default (tagged fields are only written when they do not)? */
static bool field_is_default(const struct gr_field_desc *f, const void *base)
{
    const void *p = at(base, f->offset);
    if (f->is_array)
        return *(const int32_t *)at(base, f->count_offset) == (f->def_null ? -1 : 0);
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
    case GR_FT_STRUCT: return struct_is_default(f->sub, p);
    }
    return false;
}

static bool struct_is_default(const struct gr_struct_desc *sd, const void *base)
{
    for (unsigned i = 0; i < sd->nfields; i++)
        if (!field_is_default(&sd->fields[i], base))
            return false;
    return true;
}

/* ---- decoding ---- */

static void decode_struct(const struct gr_struct_desc *sd, int16_t ver, bool flex,
                          struct gr_rbuf *r, struct gr_arena *a, void *out);

static void decode_value(uint8_t type, const struct gr_struct_desc *sub, int16_t ver, bool flex,
                         bool can_null, struct gr_rbuf *r, struct gr_arena *a, void *p)
{
    switch (type) {
    case GR_FT_BOOL: *(bool *)p = gr_rbuf_bool(r); break;
    case GR_FT_INT8: *(int8_t *)p = gr_rbuf_i8(r); break;
    case GR_FT_INT16: *(int16_t *)p = gr_rbuf_i16(r); break;
    case GR_FT_UINT16: *(uint16_t *)p = gr_rbuf_u16(r); break;
    case GR_FT_INT32: *(int32_t *)p = gr_rbuf_i32(r); break;
    case GR_FT_INT64: *(int64_t *)p = gr_rbuf_i64(r); break;
    case GR_FT_FLOAT64: *(double *)p = gr_rbuf_f64(r); break;
    case GR_FT_UUID: gr_rbuf_uuid(r, p); break;
    case GR_FT_STRING: {
        char *s = gr_rbuf_string(r, a, flex);
        if (s == NULL && !r->err && !can_null)
            gr_rbuf_fail(r, GR_EPROTO); /* null in a non-nullable field, as Kafka rejects */
        *(char **)p = s;
        break;
    }
    case GR_FT_BYTES:
    case GR_FT_RECORDS: {
        struct gr_bytes b = gr_rbuf_bytes(r, flex);
        if (b.len < 0 && !r->err && !can_null)
            gr_rbuf_fail(r, GR_EPROTO);
        *(struct gr_bytes *)p = b;
        break;
    }
    case GR_FT_STRUCT: decode_struct(sub, ver, flex, r, a, p); break;
    default: gr_rbuf_fail(r, GR_EPROTO); break;
    }
}

static void decode_field(const struct gr_field_desc *f, int16_t ver, bool flex, struct gr_rbuf *r,
                         struct gr_arena *a, void *base)
{
    if (!f->is_array) {
        decode_value(f->type, f->sub, ver, flex, nullable(f, ver), r, a, at(base, f->offset));
        return;
    }
    int32_t *countp = at(base, f->count_offset);
    void **ptrp = at(base, f->offset);
    *ptrp = NULL;
    *countp = 0;
    int32_t n = gr_rbuf_array_len(r, flex, value_wire_min(f->type, f->sub, ver, flex));
    if (r->err)
        return;
    if (n < 0) {
        if (!nullable(f, ver))
            gr_rbuf_fail(r, GR_EPROTO);
        *countp = -1;
        return;
    }
    if (n == 0)
        return;
    size_t esz = value_size(f->type, f->sub);
    char *arr = gr_arena_alloc(a, (size_t)n * esz);
    if (arr == NULL) {
        gr_rbuf_fail(r, GR_EPROTO);
        return;
    }
    for (int32_t i = 0; i < n && !r->err; i++)
        decode_value(f->type, f->sub, ver, flex, false, r, a, arr + (size_t)i * esz);
    *ptrp = arr;
    *countp = n;
}

static const struct gr_field_desc *find_tag(const struct gr_struct_desc *sd, uint32_t tag,
                                            int16_t ver)
{
    for (unsigned i = sd->nregular; i < sd->nfields; i++) {
        const struct gr_field_desc *f = &sd->fields[i];
        if ((uint32_t)f->tag == tag && present(f, ver))
            return f;
    }
    return NULL;
}

static void decode_struct(const struct gr_struct_desc *sd, int16_t ver, bool flex,
                          struct gr_rbuf *r, struct gr_arena *a, void *out)
{
    for (unsigned i = 0; i < sd->nregular && !r->err; i++) {
        const struct gr_field_desc *f = &sd->fields[i];
        if (present(f, ver))
            decode_field(f, ver, flex, r, a, out);
        else
            set_default(f, out);
    }
    for (unsigned i = sd->nregular; i < sd->nfields; i++)
        set_default(&sd->fields[i], out);
    if (!flex || r->err)
        return;
    uint32_t ntags = gr_rbuf_uvarint(r);
    for (uint32_t k = 0; k < ntags && !r->err; k++) {
        uint32_t tag = gr_rbuf_uvarint(r);
        uint32_t sz = gr_rbuf_uvarint(r);
        if (r->err)
            return;
        if (sz > gr_rbuf_remaining(r)) {
            gr_rbuf_fail(r, GR_EPROTO);
            return;
        }
        const struct gr_field_desc *f = find_tag(sd, tag, ver);
        if (f != NULL) {
            struct gr_rbuf sub;
            gr_rbuf_init(&sub, r->p + r->pos, sz);
            decode_field(f, ver, flex, &sub, a, out);
            if (sub.err)
                gr_rbuf_fail(r, sub.err);
        }
        gr_rbuf_skip(r, sz);
    }
}

int gr_proto_decode_struct(const struct gr_struct_desc *sd, int16_t ver, bool flexible,
                           struct gr_rbuf *r, struct gr_arena *a, void *out)
{
    decode_struct(sd, ver, flexible, r, a, out);
    return r->err;
}

/* ---- encoding ----
 *
 * The hot path of a large answer (a Metadata answer of 100k partitions: ~10 values and three
 * int32 arrays per partition) writes through the inline helpers below: one capacity check per
 * value or per array of fixed-size values, big-endian stores in place, and per array of structs
 * the fields present at the version resolved once rather than per element. The bytes are
 * exactly those of the gr_wbuf_* primitives (a test compares both). */

/* n more bytes at the end of w for the caller to fill (w->len already advanced past them). */
static inline uint8_t *put(struct gr_wbuf *w, size_t n)
{
    if (w->cap - w->len < n)
        gr_wbuf_reserve(w, n);
    uint8_t *p = w->p + w->len;
    w->len += n;
    return p;
}

static inline void be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void be64(uint8_t *p, uint64_t v)
{
    be32(p, (uint32_t)(v >> 32));
    be32(p + 4, (uint32_t)v);
}

static inline void put_uvarint(struct gr_wbuf *w, uint32_t v)
{
    if (v < 0x80)
        *put(w, 1) = (uint8_t)v;
    else
        gr_wbuf_uvarint(w, v);
}

/* An array's count (n >= 0), as gr_wbuf_array_len. */
static inline void put_array_len(struct gr_wbuf *w, int32_t n, bool flex)
{
    if (n == INT32_MAX && flex)
        gr_wbuf_array_len(w, n, flex); /* records the error */
    else if (flex)
        put_uvarint(w, (uint32_t)n + 1);
    else
        be32(put(w, 4), (uint32_t)n);
}

static void encode_struct(const struct gr_struct_desc *sd, int16_t ver, bool flex,
                          const void *in, struct gr_wbuf *w);

static inline void encode_value(uint8_t type, const struct gr_struct_desc *sub, int16_t ver,
                                bool flex, bool can_null, const void *p, struct gr_wbuf *w)
{
    switch (type) {
    case GR_FT_BOOL: *put(w, 1) = *(const bool *)p ? 1 : 0; break;
    case GR_FT_INT8: *put(w, 1) = (uint8_t)*(const int8_t *)p; break;
    case GR_FT_INT16: be16(put(w, 2), (uint16_t)*(const int16_t *)p); break;
    case GR_FT_UINT16: be16(put(w, 2), *(const uint16_t *)p); break;
    case GR_FT_INT32: be32(put(w, 4), (uint32_t)*(const int32_t *)p); break;
    case GR_FT_INT64: be64(put(w, 8), (uint64_t)*(const int64_t *)p); break;
    case GR_FT_FLOAT64: {
        uint64_t u;
        memcpy(&u, p, sizeof(u));
        be64(put(w, 8), u);
        break;
    }
    case GR_FT_UUID: memcpy(put(w, 16), p, 16); break;
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
    case GR_FT_STRUCT: encode_struct(sub, ver, flex, p, w); break;
    default: gr_wbuf_fail(w, -EINVAL); break;
    }
}

/* n elements of a fixed-size integer type: one capacity check, one loop. false for other
 * types. */
static inline bool encode_fixed_array(uint8_t type, const char *arr, int32_t n, struct gr_wbuf *w)
{
    switch (type) {
    case GR_FT_INT32: {
        uint8_t *o = put(w, (size_t)n * 4);
        const int32_t *v = (const int32_t *)arr;
        for (int32_t i = 0; i < n; i++)
            be32(o + (size_t)i * 4, (uint32_t)v[i]);
        return true;
    }
    case GR_FT_INT64: {
        uint8_t *o = put(w, (size_t)n * 8);
        const int64_t *v = (const int64_t *)arr;
        for (int32_t i = 0; i < n; i++)
            be64(o + (size_t)i * 8, (uint64_t)v[i]);
        return true;
    }
    case GR_FT_INT16: {
        uint8_t *o = put(w, (size_t)n * 2);
        const int16_t *v = (const int16_t *)arr;
        for (int32_t i = 0; i < n; i++)
            be16(o + (size_t)i * 2, (uint16_t)v[i]);
        return true;
    }
    }
    return false;
}

static void encode_struct_array(const struct gr_struct_desc *sd, int16_t ver, bool flex,
                                const char *arr, int32_t n, struct gr_wbuf *w);

static void encode_field(const struct gr_field_desc *f, int16_t ver, bool flex, const void *base,
                         struct gr_wbuf *w)
{
    if (!f->is_array) {
        encode_value(f->type, f->sub, ver, flex, nullable(f, ver), at(base, f->offset), w);
        return;
    }
    int32_t n = *(const int32_t *)at(base, f->count_offset);
    const char *arr = *(char *const *)at(base, f->offset);
    if (n < -1 || (n > 0 && arr == NULL)) {
        gr_wbuf_fail(w, -EINVAL);
        return;
    }
    if (n == -1) {
        gr_wbuf_array_len(w, nullable(f, ver) ? -1 : 0, flex);
        return;
    }
    put_array_len(w, n, flex);
    if (n == 0 || encode_fixed_array(f->type, arr, n, w))
        return;
    if (f->type == GR_FT_STRUCT) {
        encode_struct_array(f->sub, ver, flex, arr, n, w);
        return;
    }
    size_t esz = value_size(f->type, f->sub);
    for (int32_t i = 0; i < n && !w->err; i++)
        encode_value(f->type, f->sub, ver, flex, false, arr + (size_t)i * esz, w);
}

/* The tagged-field section of a struct (flexible versions). */
static void encode_tagged(const struct gr_struct_desc *sd, int16_t ver, bool flex,
                          const void *in, struct gr_wbuf *w)
{
    if (sd->nfields == sd->nregular) { /* no tagged fields at all: a zero count */
        *put(w, 1) = 0;
        return;
    }
    uint32_t ntags = 0;
    for (unsigned i = sd->nregular; i < sd->nfields; i++) {
        const struct gr_field_desc *f = &sd->fields[i];
        if (present(f, ver) && !field_is_default(f, in))
            ntags++;
    }
    gr_wbuf_uvarint(w, ntags);
    for (unsigned i = sd->nregular; i < sd->nfields && ntags && !w->err; i++) {
        const struct gr_field_desc *f = &sd->fields[i];
        if (!present(f, ver) || field_is_default(f, in))
            continue;
        gr_wbuf_uvarint(w, (uint32_t)f->tag);
        /* encode the value, then slide it right to make room for its size prefix */
        size_t start = w->len;
        encode_field(f, ver, flex, in, w);
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

static void encode_struct(const struct gr_struct_desc *sd, int16_t ver, bool flex,
                          const void *in, struct gr_wbuf *w)
{
    for (unsigned i = 0; i < sd->nregular && !w->err; i++) {
        const struct gr_field_desc *f = &sd->fields[i];
        if (present(f, ver))
            encode_field(f, ver, flex, in, w);
    }
    if (!flex || w->err)
        return;
    encode_tagged(sd, ver, flex, in, w);
}

/* How encode_struct_array writes one field of every element, planned once per array: a run of
 * adjacent fixed-size scalars (one capacity check for the run), an array of fixed-size integers,
 * or anything else through encode_field. */
enum { OP_RUN, OP_INT_ARRAY, OP_FIELD };
struct enc_op {
    uint8_t kind;
    uint8_t n;                     /* OP_RUN: scalars in the run, from scalar[first] */
    uint16_t bytes;                /* OP_RUN: their wire size */
    uint16_t first;
    const struct gr_field_desc *f; /* OP_INT_ARRAY, OP_FIELD */
};
struct enc_scalar {
    uint32_t offset;
    uint8_t type;
};

static int scalar_width(uint8_t type)
{
    switch (type) {
    case GR_FT_BOOL:
    case GR_FT_INT8: return 1;
    case GR_FT_INT16:
    case GR_FT_UINT16: return 2;
    case GR_FT_INT32: return 4;
    case GR_FT_INT64: return 8;
    }
    return 0; /* not a run member */
}

#define ENC_MAX_FIELDS 64
struct enc_plan {
    unsigned nops;
    struct enc_op op[ENC_MAX_FIELDS];
    struct enc_scalar scalar[ENC_MAX_FIELDS];
};

static void plan_struct(const struct gr_struct_desc *sd, int16_t ver, struct enc_plan *pl)
{
    unsigned ns = 0;
    pl->nops = 0;
    for (unsigned k = 0; k < sd->nregular; k++) {
        const struct gr_field_desc *f = &sd->fields[k];
        if (!present(f, ver))
            continue;
        int wd = f->is_array ? 0 : scalar_width(f->type);
        if (wd > 0) {
            struct enc_op *last = pl->nops ? &pl->op[pl->nops - 1] : NULL;
            if (!last || last->kind != OP_RUN) {
                last = &pl->op[pl->nops++];
                *last = (struct enc_op){ .kind = OP_RUN, .first = (uint16_t)ns };
            }
            last->n++;
            last->bytes = (uint16_t)(last->bytes + wd);
            pl->scalar[ns++] = (struct enc_scalar){ f->offset, f->type };
        } else {
            bool ints = f->is_array && (f->type == GR_FT_INT16 || f->type == GR_FT_INT32 ||
                                        f->type == GR_FT_INT64);
            pl->op[pl->nops++] = (struct enc_op){ .kind = ints ? OP_INT_ARRAY : OP_FIELD, .f = f };
        }
    }
}

static inline void encode_run(const struct enc_plan *pl, const struct enc_op *op, const char *in,
                              struct gr_wbuf *w)
{
    uint8_t *o = put(w, op->bytes);
    for (unsigned j = 0; j < op->n; j++) {
        const struct enc_scalar *sc = &pl->scalar[op->first + j];
        const void *p = in + sc->offset;
        switch (sc->type) {
        case GR_FT_BOOL: *o++ = *(const bool *)p ? 1 : 0; break;
        case GR_FT_INT8: *o++ = (uint8_t)*(const int8_t *)p; break;
        case GR_FT_INT16: be16(o, (uint16_t)*(const int16_t *)p); o += 2; break;
        case GR_FT_UINT16: be16(o, *(const uint16_t *)p); o += 2; break;
        case GR_FT_INT32: be32(o, (uint32_t)*(const int32_t *)p); o += 4; break;
        case GR_FT_INT64: be64(o, (uint64_t)*(const int64_t *)p); o += 8; break;
        }
    }
}

/* n structs, every element by the same plan. */
static void encode_struct_array(const struct gr_struct_desc *sd, int16_t ver, bool flex,
                                const char *arr, int32_t n, struct gr_wbuf *w)
{
    if (sd->nregular > ENC_MAX_FIELDS) {
        for (int32_t i = 0; i < n && !w->err; i++)
            encode_struct(sd, ver, flex, arr + (size_t)i * sd->size, w);
        return;
    }
    struct enc_plan pl;
    plan_struct(sd, ver, &pl);
    for (int32_t i = 0; i < n && !w->err; i++) {
        const char *in = arr + (size_t)i * sd->size;
        for (unsigned k = 0; k < pl.nops && !w->err; k++) {
            const struct enc_op *op = &pl.op[k];
            if (op->kind == OP_RUN) {
                encode_run(&pl, op, in, w);
            } else if (op->kind == OP_INT_ARRAY) {
                int32_t c = *(const int32_t *)(in + op->f->count_offset);
                const char *a = *(char *const *)(in + op->f->offset);
                if (c == 0 || (c > 0 && a != NULL)) {
                    put_array_len(w, c, flex);
                    if (c > 0)
                        encode_fixed_array(op->f->type, a, c, w);
                } else {
                    encode_field(op->f, ver, flex, in, w); /* null or invalid */
                }
            } else {
                encode_field(op->f, ver, flex, in, w);
            }
        }
        if (flex && !w->err) {
            if (sd->nfields == sd->nregular)
                *put(w, 1) = 0; /* no tagged fields: a zero count */
            else
                encode_tagged(sd, ver, flex, in, w);
        }
    }
}

int gr_proto_encode_struct(const struct gr_struct_desc *sd, int16_t ver, bool flexible,
                           const void *in, struct gr_wbuf *w)
{
    if (w->err)
        return w->err;
    void *tmp = NULL;
    if (in == NULL) { /* encode an all-defaults message */
        tmp = gr_malloc(sd->size);
        gr_proto_init_struct(sd, tmp);
        in = tmp;
    }
    size_t start = w->len;
    encode_struct(sd, ver, flexible, in, w);
    free(tmp);
    int rc = w->err;
    if (rc) {
        w->len = start;
        w->err = 0;
    }
    return rc;
}

/* ---- API table and headers ---- */

const struct gr_api_desc *gr_proto_api(int16_t api_key)
{
    size_t lo = 0, hi = GR_API_COUNT;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (gr_proto_apis[mid].key == api_key)
            return &gr_proto_apis[mid];
        if (gr_proto_apis[mid].key < api_key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

bool gr_proto_is_flexible(const struct gr_api_desc *api, int16_t ver)
{
    return api->flex_version >= 0 && ver >= api->flex_version;
}

int gr_proto_request_header_version(int16_t api_key, int16_t ver)
{
    const struct gr_api_desc *api = gr_proto_api(api_key);
    if (api == NULL)
        return 1;
    if (gr_proto_is_flexible(api, ver))
        return 2;
    if (api_key == GR_API_CONTROLLED_SHUTDOWN && ver == 0)
        return 0;
    return 1;
}

int gr_proto_response_header_version(int16_t api_key, int16_t ver)
{
    const struct gr_api_desc *api = gr_proto_api(api_key);
    if (api == NULL || api_key == GR_API_API_VERSIONS)
        return 0;
    return gr_proto_is_flexible(api, ver) ? 1 : 0;
}

/* Look up api_key and check ver against its validVersions. */
static int lookup(int16_t api_key, int16_t ver, const struct gr_api_desc **out)
{
    const struct gr_api_desc *api = gr_proto_api(api_key);
    *out = api;
    if (api == NULL)
        return GR_PROTO_EUNKNOWN_API;
    if (ver < api->min_version || ver > api->max_version)
        return GR_PROTO_EUNSUPPORTED_VERSION;
    return 0;
}

int gr_proto_decode_body(int16_t api_key, bool response, int16_t ver, struct gr_rbuf *r,
                         struct gr_arena *a, void **body)
{
    const struct gr_api_desc *api;
    *body = NULL;
    int rc = lookup(api_key, ver, &api);
    if (rc)
        return rc;
    const struct gr_struct_desc *sd = response ? api->response : api->request;
    void *out = gr_arena_alloc(a, sd->size);
    if (out == NULL)
        return -ENOMEM;
    decode_struct(sd, ver, gr_proto_is_flexible(api, ver), r, a, out);
    if (r->err)
        return r->err;
    *body = out;
    return 0;
}

int gr_proto_encode_body(int16_t api_key, bool response, int16_t ver, const void *body,
                         struct gr_wbuf *w)
{
    const struct gr_api_desc *api;
    int rc = lookup(api_key, ver, &api);
    if (rc)
        return rc;
    return gr_proto_encode_struct(response ? api->response : api->request, ver,
                                  gr_proto_is_flexible(api, ver), body, w);
}

int gr_proto_decode_request(const uint8_t *frame, size_t len, struct gr_arena *a,
                            struct gr_req_header *hdr, void **body)
{
    struct gr_rbuf r;
    *body = NULL;
    memset(hdr, 0, sizeof(*hdr));
    hdr->HeaderVersion = -1;
    gr_rbuf_init(&r, frame, len);
    hdr->RequestApiKey = gr_rbuf_i16(&r);
    hdr->RequestApiVersion = gr_rbuf_i16(&r);
    hdr->CorrelationId = gr_rbuf_i32(&r);
    if (r.err)
        return GR_EPROTO;
    const struct gr_api_desc *api;
    int lrc = lookup(hdr->RequestApiKey, hdr->RequestApiVersion, &api);
    int hv = gr_proto_request_header_version(hdr->RequestApiKey, hdr->RequestApiVersion);
    if (hv >= 1)
        hdr->ClientId = gr_rbuf_string(&r, a, false);
    if (hv >= 2)
        gr_rbuf_skip_tagged_fields(&r);
    if (r.err) {
        hdr->ClientId = NULL;
        return lrc ? lrc : GR_EPROTO;
    }
    hdr->HeaderVersion = (int16_t)hv;
    if (lrc)
        return lrc;
    return gr_proto_decode_body(hdr->RequestApiKey, false, hdr->RequestApiVersion, &r, a, body);
}

/* Complete a frame started at start (4-byte size placeholder): on error roll w back, else
 * patch the size prefix. */
static int finish_frame(struct gr_wbuf *w, size_t start, int rc)
{
    if (rc == 0 && w->err)
        rc = w->err;
    if (rc == 0 && w->len - start - 4 > INT32_MAX)
        rc = -EMSGSIZE;
    if (rc) {
        w->len = start;
        w->err = 0;
        return rc;
    }
    gr_wbuf_patch_i32(w, start, (int32_t)(w->len - start - 4));
    return 0;
}

int gr_proto_encode_response(const struct gr_req_header *hdr, const void *body, struct gr_wbuf *w)
{
    const struct gr_api_desc *api;
    int rc = lookup(hdr->RequestApiKey, hdr->RequestApiVersion, &api);
    if (rc)
        return rc;
    if (w->err)
        return w->err;
    size_t start = w->len;
    gr_wbuf_i32(w, 0);
    gr_wbuf_i32(w, hdr->CorrelationId);
    if (gr_proto_response_header_version(hdr->RequestApiKey, hdr->RequestApiVersion) >= 1)
        gr_wbuf_uvarint(w, 0);
    rc = gr_proto_encode_struct(api->response, hdr->RequestApiVersion,
                                gr_proto_is_flexible(api, hdr->RequestApiVersion), body, w);
    return finish_frame(w, start, rc);
}

int gr_proto_encode_request(int16_t api_key, int16_t ver, int32_t correlation_id,
                            const char *client_id, const void *body, struct gr_wbuf *w)
{
    const struct gr_api_desc *api;
    int rc = lookup(api_key, ver, &api);
    if (rc)
        return rc;
    if (w->err)
        return w->err;
    size_t start = w->len;
    int hv = gr_proto_request_header_version(api_key, ver);
    gr_wbuf_i32(w, 0);
    gr_wbuf_i16(w, api_key);
    gr_wbuf_i16(w, ver);
    gr_wbuf_i32(w, correlation_id);
    if (hv >= 1)
        gr_wbuf_string(w, client_id, false);
    if (hv >= 2)
        gr_wbuf_uvarint(w, 0);
    if (w->err)
        return finish_frame(w, start, w->err);
    rc = gr_proto_encode_struct(api->request, ver, gr_proto_is_flexible(api, ver), body, w);
    return finish_frame(w, start, rc);
}

int gr_proto_decode_response(int16_t api_key, int16_t ver, const uint8_t *frame, size_t len,
                             struct gr_arena *a, int32_t *correlation_id, void **body)
{
    const struct gr_api_desc *api;
    *body = NULL;
    int rc = lookup(api_key, ver, &api);
    if (rc)
        return rc;
    struct gr_rbuf r;
    gr_rbuf_init(&r, frame, len);
    int32_t corr = gr_rbuf_i32(&r);
    if (gr_proto_response_header_version(api_key, ver) >= 1)
        gr_rbuf_skip_tagged_fields(&r);
    if (r.err)
        return GR_EPROTO;
    *correlation_id = corr;
    return gr_proto_decode_body(api_key, true, ver, &r, a, body);
}

const char *gr_proto_strerror(int rc)
{
    switch (rc) {
    case GR_PROTO_EUNKNOWN_API: return "unknown api key";
    case GR_PROTO_EUNSUPPORTED_VERSION: return "unsupported api version";
    default: return gr_strerror(rc);
    }
}
