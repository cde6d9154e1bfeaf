/* Kafka wire primitives (formats tabulated in wire.h). */
#include "protocol/wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* ---- reading ---- */

void gr_rbuf_init(struct gr_rbuf *r, const void *p, size_t len)
{
    r->p = p;
    r->len = len;
    r->pos = 0;
    r->err = 0;
}

void gr_rbuf_fail(struct gr_rbuf *r, int err)
{
    if (!r->err)
        r->err = err;
}

const uint8_t *gr_rbuf_take(struct gr_rbuf *r, size_t n)
{
    if (r->err)
        return NULL;
    if (r->len - r->pos < n) {
        gr_rbuf_fail(r, GR_EPROTO);
        return NULL;
    }
    const uint8_t *p = r->p + r->pos;
    r->pos += n;
    return p;
}

void gr_rbuf_skip(struct gr_rbuf *r, size_t n)
{
    (void)gr_rbuf_take(r, n);
}

static uint64_t rd_be(struct gr_rbuf *r, size_t n)
{
    const uint8_t *p = gr_rbuf_take(r, n);
    uint64_t v = 0;
    if (p == NULL)
        return 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

int8_t gr_rbuf_i8(struct gr_rbuf *r)
{
    return (int8_t)rd_be(r, 1);
}

int16_t gr_rbuf_i16(struct gr_rbuf *r)
{
    return (int16_t)(uint16_t)rd_be(r, 2);
}

uint16_t gr_rbuf_u16(struct gr_rbuf *r)
{
    return (uint16_t)rd_be(r, 2);
}

int32_t gr_rbuf_i32(struct gr_rbuf *r)
{
    return (int32_t)(uint32_t)rd_be(r, 4);
}

uint32_t gr_rbuf_u32(struct gr_rbuf *r)
{
    return (uint32_t)rd_be(r, 4);
}

int64_t gr_rbuf_i64(struct gr_rbuf *r)
{
    return (int64_t)rd_be(r, 8);
}

bool gr_rbuf_bool(struct gr_rbuf *r)
{
    return rd_be(r, 1) != 0;
}

double gr_rbuf_f64(struct gr_rbuf *r)
{
    uint64_t u = rd_be(r, 8);
    double d;
    memcpy(&d, &u, sizeof(d));
    return d;
}

void gr_rbuf_uuid(struct gr_rbuf *r, uint8_t out[16])
{
    const uint8_t *p = gr_rbuf_take(r, 16);
    if (p)
        memcpy(out, p, 16);
    else
        memset(out, 0, 16);
}

static uint64_t rd_uvar(struct gr_rbuf *r, int maxbytes)
{
    uint64_t v = 0;
    for (int i = 0; i < maxbytes; i++) {
        const uint8_t *p = gr_rbuf_take(r, 1);
        if (p == NULL)
            return 0;
        v |= (uint64_t)(*p & 0x7f) << (7 * i);
        if (!(*p & 0x80)) {
            /* the last byte of a 32/64-bit varint may only carry the remaining bits */
            if (i == maxbytes - 1 && (*p >> (maxbytes == 5 ? 4 : 1)) != 0)
                break;
            return v;
        }
    }
    gr_rbuf_fail(r, GR_EPROTO);
    return 0;
}

uint32_t gr_rbuf_uvarint(struct gr_rbuf *r)
{
    return (uint32_t)rd_uvar(r, 5);
}

uint64_t gr_rbuf_uvarlong(struct gr_rbuf *r)
{
    return rd_uvar(r, 10);
}

int32_t gr_rbuf_varint(struct gr_rbuf *r)
{
    uint32_t u = gr_rbuf_uvarint(r);
    return (int32_t)((u >> 1) ^ (~(u & 1) + 1));
}

int64_t gr_rbuf_varlong(struct gr_rbuf *r)
{
    uint64_t u = gr_rbuf_uvarlong(r);
    return (int64_t)((u >> 1) ^ (~(u & 1) + 1));
}

/* A length/count prefix: -1 = null; other negatives are errors. */
static int64_t rd_len(struct gr_rbuf *r, bool compact, bool int16)
{
    int64_t n;
    if (compact)
        n = (int64_t)gr_rbuf_uvarint(r) - 1;
    else
        n = int16 ? gr_rbuf_i16(r) : gr_rbuf_i32(r);
    if (r->err)
        return -1;
    if (n < -1 || n > INT32_MAX) {
        gr_rbuf_fail(r, GR_EPROTO);
        return -1;
    }
    return n;
}

static int32_t rd_sized_len(struct gr_rbuf *r, bool compact, bool int16)
{
    int64_t n = rd_len(r, compact, int16);
    if (n > 0 && (uint64_t)n > gr_rbuf_remaining(r)) {
        gr_rbuf_fail(r, GR_EPROTO);
        return -1;
    }
    return (int32_t)n;
}

int32_t gr_rbuf_string_len(struct gr_rbuf *r, bool compact)
{
    return rd_sized_len(r, compact, true);
}

int32_t gr_rbuf_bytes_len(struct gr_rbuf *r, bool compact)
{
    return rd_sized_len(r, compact, false);
}

int32_t gr_rbuf_array_len(struct gr_rbuf *r, bool compact, size_t min_elem)
{
    int64_t n = rd_len(r, compact, false);
    if (min_elem == 0)
        min_elem = 1;
    if (n > 0 && (uint64_t)n > gr_rbuf_remaining(r) / min_elem) {
        gr_rbuf_fail(r, GR_EPROTO);
        return -1;
    }
    return (int32_t)n;
}

char *gr_rbuf_string(struct gr_rbuf *r, struct gr_arena *a, bool compact)
{
    int32_t n = gr_rbuf_string_len(r, compact);
    if (n < 0)
        return NULL;
    const uint8_t *p = gr_rbuf_take(r, (size_t)n);
    if (p == NULL)
        return NULL;
    char *s = gr_arena_strndup(a, (const char *)p, (size_t)n);
    if (s == NULL)
        gr_rbuf_fail(r, GR_EPROTO);
    return s;
}

struct gr_bytes gr_rbuf_bytes(struct gr_rbuf *r, bool compact)
{
    struct gr_bytes b = { NULL, -1 };
    int32_t n = gr_rbuf_bytes_len(r, compact);
    if (n < 0)
        return b;
    b.p = gr_rbuf_take(r, (size_t)n);
    b.len = b.p ? n : -1;
    return b;
}

void gr_rbuf_skip_tagged_fields(struct gr_rbuf *r)
{
    uint32_t n = gr_rbuf_uvarint(r);
    for (uint32_t i = 0; i < n && !r->err; i++) {
        (void)gr_rbuf_uvarint(r);
        uint32_t sz = gr_rbuf_uvarint(r);
        gr_rbuf_skip(r, sz);
    }
}

/* ---- writing ---- */

void gr_wbuf_init(struct gr_wbuf *w)
{
    w->p = NULL;
    w->len = 0;
    w->cap = 0;
    w->err = 0;
}

void gr_wbuf_free(struct gr_wbuf *w)
{
    free(w->p);
    gr_wbuf_init(w);
}

void gr_wbuf_reset(struct gr_wbuf *w)
{
    w->len = 0;
    w->err = 0;
}

void gr_wbuf_fail(struct gr_wbuf *w, int err)
{
    if (!w->err)
        w->err = err;
}

uint8_t *gr_wbuf_reserve(struct gr_wbuf *w, size_t n)
{
    if (w->cap - w->len < n) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap - w->len < n)
            cap *= 2;
        w->p = gr_realloc(w->p, cap);
        w->cap = cap;
    }
    return w->p + w->len;
}

uint8_t *gr_wbuf_grow(struct gr_wbuf *w, size_t n)
{
    uint8_t *p = gr_wbuf_reserve(w, n);
    w->len += n;
    return p;
}

void gr_wbuf_append(struct gr_wbuf *w, const void *p, size_t n)
{
    if (n)
        memcpy(gr_wbuf_grow(w, n), p, n);
}

static void wr_be(uint8_t *p, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

void gr_wbuf_patch_i32(struct gr_wbuf *w, size_t off, int32_t v)
{
    if (off + 4 > w->len) {
        gr_wbuf_fail(w, -EINVAL);
        return;
    }
    wr_be(w->p + off, (uint32_t)v, 4);
}

void gr_wbuf_i8(struct gr_wbuf *w, int8_t v)
{
    wr_be(gr_wbuf_grow(w, 1), (uint8_t)v, 1);
}

void gr_wbuf_i16(struct gr_wbuf *w, int16_t v)
{
    wr_be(gr_wbuf_grow(w, 2), (uint16_t)v, 2);
}

void gr_wbuf_u16(struct gr_wbuf *w, uint16_t v)
{
    wr_be(gr_wbuf_grow(w, 2), v, 2);
}

void gr_wbuf_i32(struct gr_wbuf *w, int32_t v)
{
    wr_be(gr_wbuf_grow(w, 4), (uint32_t)v, 4);
}

void gr_wbuf_u32(struct gr_wbuf *w, uint32_t v)
{
    wr_be(gr_wbuf_grow(w, 4), v, 4);
}

void gr_wbuf_i64(struct gr_wbuf *w, int64_t v)
{
    wr_be(gr_wbuf_grow(w, 8), (uint64_t)v, 8);
}

void gr_wbuf_bool(struct gr_wbuf *w, bool v)
{
    gr_wbuf_i8(w, v ? 1 : 0);
}

void gr_wbuf_f64(struct gr_wbuf *w, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof(u));
    wr_be(gr_wbuf_grow(w, 8), u, 8);
}

void gr_wbuf_uuid(struct gr_wbuf *w, const uint8_t v[16])
{
    gr_wbuf_append(w, v, 16);
}

void gr_wbuf_uvarlong(struct gr_wbuf *w, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    gr_wbuf_append(w, tmp, n);
}

void gr_wbuf_uvarint(struct gr_wbuf *w, uint32_t v)
{
    gr_wbuf_uvarlong(w, v);
}

void gr_wbuf_varint(struct gr_wbuf *w, int32_t v)
{
    gr_wbuf_uvarint(w, ((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

void gr_wbuf_varlong(struct gr_wbuf *w, int64_t v)
{
    gr_wbuf_uvarlong(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

size_t gr_uvarint_size(uint32_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static void wr_len(struct gr_wbuf *w, int64_t n, bool compact, bool int16)
{
    if (compact)
        gr_wbuf_uvarint(w, (uint32_t)(n + 1));
    else if (int16)
        gr_wbuf_i16(w, (int16_t)n);
    else
        gr_wbuf_i32(w, (int32_t)n);
}

void gr_wbuf_string(struct gr_wbuf *w, const char *s, bool compact)
{
    if (s == NULL) {
        wr_len(w, -1, compact, true);
        return;
    }
    size_t n = strlen(s);
    if (n > (compact ? (size_t)INT32_MAX - 1 : (size_t)INT16_MAX)) {
        gr_wbuf_fail(w, -EMSGSIZE);
        return;
    }
    wr_len(w, (int64_t)n, compact, true);
    gr_wbuf_append(w, s, n);
}

void gr_wbuf_bytes(struct gr_wbuf *w, struct gr_bytes b, bool compact)
{
    if (b.len < 0 || (b.p == NULL && b.len > 0)) {
        if (b.len < -1 || b.len > 0)
            gr_wbuf_fail(w, -EINVAL);
        wr_len(w, -1, compact, false);
        return;
    }
    if (compact && b.len == INT32_MAX) {
        gr_wbuf_fail(w, -EMSGSIZE);
        return;
    }
    wr_len(w, b.len, compact, false);
    gr_wbuf_append(w, b.p, (size_t)b.len);
}

void gr_wbuf_array_len(struct gr_wbuf *w, int32_t count, bool compact)
{
    if (count < -1 || (compact && count == INT32_MAX)) {
        gr_wbuf_fail(w, -EINVAL);
        count = -1;
    }
    wr_len(w, count, compact, false);
}
