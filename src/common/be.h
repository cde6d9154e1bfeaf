/* Big-endian load/store helpers (static inline, no alignment needs). */
#ifndef GR_COMMON_BE_H
#define GR_COMMON_BE_H

#include <stdint.h>

static inline uint16_t gr_be16(const uint8_t *p) { return (uint16_t)((uint16_t)p[0] << 8 | p[1]); }
static inline uint32_t gr_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}
static inline uint64_t gr_be64(const uint8_t *p) { return (uint64_t)gr_be32(p) << 32 | gr_be32(p + 4); }
static inline void gr_put_be16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static inline void gr_put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
static inline void gr_put_be64(uint8_t *p, uint64_t v) {
    gr_put_be32(p, (uint32_t)(v >> 32));
    gr_put_be32(p + 4, (uint32_t)v);
}

#endif
