/* Kafka wire primitives: a read cursor with a sticky error and a growable write buffer.
 *
 * Encodings (all integers big-endian unless stated):
 *
 *   type              classic (non-flexible versions)       compact (flexible versions)
 *   ----------------  ------------------------------------  ------------------------------------
 *   int8/16/32/64     1/2/4/8 bytes, two's complement       same
 *   uint16            2 bytes                               same
 *   bool              1 byte, 0 = false, else true          same
 *   float64           8 bytes, IEEE 754 binary64            same
 *   uuid              16 bytes                              same
 *   string            int16 length N, N bytes; -1 = null    uvarint N+1, N bytes; 0 = null
 *   bytes/records     int32 length N, N bytes; -1 = null    uvarint N+1, N bytes; 0 = null
 *   array             int32 count N, N elements; -1 = null  uvarint N+1, N elements; 0 = null
 *   tagged fields     (absent)                              uvarint count, then per field:
 *                                                           uvarint tag, uvarint size, size bytes
 *
 *   uvarint: 7 bits per byte, least significant group first, high bit = more bytes follow
 *   (at most 5 bytes for 32 bits, 10 for 64). varint/varlong: zigzag ((n << 1) ^ (n >> 63))
 *   then uvarint.
 *
 * Readers never read past the end: a short buffer, an overlong varint or an invalid length sets
 * r->err (GR_EPROTO) once, later reads return zero values, and the caller checks r->err at the
 * end. Writers abort on OOM (via gr_realloc) and record invalid input (e.g. a classic string
 * longer than 32767 bytes) in w->err. Neither type is thread-safe; both belong to their user. */
#ifndef GR_PROTOCOL_WIRE_H
#define GR_PROTOCOL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/arena.h"
#include "protocol/desc.h"

struct gr_rbuf {
    const uint8_t *p; /* not owned */
    size_t len;
    size_t pos;
    int err; /* first error (GR_EPROTO), 0 if none */
};

/* Start reading len bytes at p (the memory must outlive the cursor and anything decoded). */
void gr_rbuf_init(struct gr_rbuf *r, const void *p, size_t len);
/* Record err unless an error is already recorded. */
void gr_rbuf_fail(struct gr_rbuf *r, int err);
static inline size_t gr_rbuf_remaining(const struct gr_rbuf *r)
{
    return r->err ? 0 : r->len - r->pos;
}
/* Consume n bytes and return a pointer to them, or NULL (and set the error) if fewer remain. */
const uint8_t *gr_rbuf_take(struct gr_rbuf *r, size_t n);
void gr_rbuf_skip(struct gr_rbuf *r, size_t n);

int8_t gr_rbuf_i8(struct gr_rbuf *r);
int16_t gr_rbuf_i16(struct gr_rbuf *r);
uint16_t gr_rbuf_u16(struct gr_rbuf *r);
int32_t gr_rbuf_i32(struct gr_rbuf *r);
uint32_t gr_rbuf_u32(struct gr_rbuf *r);
int64_t gr_rbuf_i64(struct gr_rbuf *r);
bool gr_rbuf_bool(struct gr_rbuf *r);
double gr_rbuf_f64(struct gr_rbuf *r);
void gr_rbuf_uuid(struct gr_rbuf *r, uint8_t out[16]);
uint32_t gr_rbuf_uvarint(struct gr_rbuf *r);
uint64_t gr_rbuf_uvarlong(struct gr_rbuf *r);
int32_t gr_rbuf_varint(struct gr_rbuf *r);  /* zigzag */
int64_t gr_rbuf_varlong(struct gr_rbuf *r); /* zigzag */

/* Length prefix of a string/bytes: -1 for null, else a length already checked against the
 * remaining bytes. Any other negative value or a length past the end is an error (returns -1
 * with r->err set, so always check r->err). */
int32_t gr_rbuf_string_len(struct gr_rbuf *r, bool compact);
int32_t gr_rbuf_bytes_len(struct gr_rbuf *r, bool compact);
/* Array count: -1 for null, else a count with count * min_elem <= remaining (min_elem is the
 * smallest encoded size of one element, at least 1), so callers may allocate count elements. */
int32_t gr_rbuf_array_len(struct gr_rbuf *r, bool compact, size_t min_elem);
/* A string copied into the arena and NUL-terminated; NULL for null or on error. */
char *gr_rbuf_string(struct gr_rbuf *r, struct gr_arena *a, bool compact);
/* A view into the input buffer; len -1 for null (or on error). */
struct gr_bytes gr_rbuf_bytes(struct gr_rbuf *r, bool compact);
/* Skip a whole tagged-field section. */
void gr_rbuf_skip_tagged_fields(struct gr_rbuf *r);

struct gr_wbuf {
    uint8_t *p; /* owned; gr_wbuf_free releases it */
    size_t len;
    size_t cap;
    int err; /* first error (negative errno), 0 if none */
};

void gr_wbuf_init(struct gr_wbuf *w);
void gr_wbuf_free(struct gr_wbuf *w);
/* Forget the contents and the error, keep the memory. */
void gr_wbuf_reset(struct gr_wbuf *w);
void gr_wbuf_fail(struct gr_wbuf *w, int err);
/* Make room for n more bytes; returns where they will go (w->len is unchanged). */
uint8_t *gr_wbuf_reserve(struct gr_wbuf *w, size_t n);
/* Append n bytes of room and return a pointer to them (contents unspecified). */
uint8_t *gr_wbuf_grow(struct gr_wbuf *w, size_t n);
void gr_wbuf_append(struct gr_wbuf *w, const void *p, size_t n);
/* Overwrite 4 bytes at off (off + 4 <= w->len) with v big-endian, e.g. a size prefix. */
void gr_wbuf_patch_i32(struct gr_wbuf *w, size_t off, int32_t v);

void gr_wbuf_i8(struct gr_wbuf *w, int8_t v);
void gr_wbuf_i16(struct gr_wbuf *w, int16_t v);
void gr_wbuf_u16(struct gr_wbuf *w, uint16_t v);
void gr_wbuf_i32(struct gr_wbuf *w, int32_t v);
void gr_wbuf_u32(struct gr_wbuf *w, uint32_t v);
void gr_wbuf_i64(struct gr_wbuf *w, int64_t v);
void gr_wbuf_bool(struct gr_wbuf *w, bool v);
void gr_wbuf_f64(struct gr_wbuf *w, double v);
void gr_wbuf_uuid(struct gr_wbuf *w, const uint8_t v[16]);
void gr_wbuf_uvarint(struct gr_wbuf *w, uint32_t v);
void gr_wbuf_uvarlong(struct gr_wbuf *w, uint64_t v);
void gr_wbuf_varint(struct gr_wbuf *w, int32_t v);
void gr_wbuf_varlong(struct gr_wbuf *w, int64_t v);
/* Bytes gr_wbuf_uvarint would write for v. */
size_t gr_uvarint_size(uint32_t v);
/* String (NULL = null), bytes (len -1 = null) and array-count prefixes. */
void gr_wbuf_string(struct gr_wbuf *w, const char *s, bool compact);
void gr_wbuf_bytes(struct gr_wbuf *w, struct gr_bytes b, bool compact);
void gr_wbuf_array_len(struct gr_wbuf *w, int32_t count, bool compact);

#endif
