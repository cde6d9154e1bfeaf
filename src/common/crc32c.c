/* CRC-32C. Two implementations behind one entry point, chosen once (pthread_once):
 * - x86-64 with SSE4.2: the crc32 instruction, 8 bytes a step. One instruction has a latency of
 *   about three cycles but a throughput of one a cycle, so long inputs run as three independent
 *   streams over adjacent blocks whose CRCs are then combined: the raw CRC state is linear over
 *   GF(2), so crc(A||B) = shift_|B|(crc(A)) ^ crc_from_0(B), where shift_n ("feed n zero bytes")
 *   is a 32x32 bit matrix, kept as four 256-entry tables per block size.
 * - elsewhere: table-driven slicing-by-8 (gr_crc32c_sw, also the tests' reference).
 * All tables are computed at first use from the reflected Castagnoli polynomial. */
#include "common/crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CRC32C_HW 1
#include <nmmintrin.h>
#endif

#define CRC32C_POLY 0x82F63B78u
#define LONG_BLOCK 4096 /* three-stream block sizes: inputs >= 3 * LONG_BLOCK, then SHORT */
#define SHORT_BLOCK 256

static uint32_t g_tab[8][256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static uint32_t (*g_raw)(uint32_t, const uint8_t *, size_t); /* state in, state out: no inversion */

/* Slicing-by-8 over the raw (non-inverted) state. */
static uint32_t sw_raw(uint32_t c, const uint8_t *p, size_t len) {
    while (len > 0 && ((uintptr_t)p & 7) != 0) { /* byte at a time until 8-byte aligned */
        c = (c >> 8) ^ g_tab[0][(c ^ *p++) & 0xff];
        len--;
    }
    while (len >= 8) {
        /* Assemble little-endian words explicitly so this is correct on any host order. */
        uint32_t lo = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        lo ^= c;
        c = g_tab[7][lo & 0xff] ^ g_tab[6][(lo >> 8) & 0xff] ^ g_tab[5][(lo >> 16) & 0xff] ^
            g_tab[4][lo >> 24] ^ g_tab[3][hi & 0xff] ^ g_tab[2][(hi >> 8) & 0xff] ^
            g_tab[1][(hi >> 16) & 0xff] ^ g_tab[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len-- > 0) c = (c >> 8) ^ g_tab[0][(c ^ *p++) & 0xff];
    return c;
}

#ifdef CRC32C_HW
static uint32_t g_shift_long[4][256], g_shift_short[4][256];

/* The state after feeding n zero bytes, as a table lookup per state byte. */
static uint32_t shift(const uint32_t t[4][256], uint32_t c) {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
}

static uint64_t load64(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, sizeof w); /* x86-64: little-endian, unaligned loads are fine */
    return w;
}

/* Three streams over blocks [0,blk), [blk,2blk), [2blk,3blk) while 3 * blk bytes remain. */
__attribute__((target("sse4.2"))) static uint32_t hw_three(uint32_t c, const uint8_t **pp, size_t *lenp, size_t blk,
                                                           const uint32_t t[4][256]) {
    const uint8_t *p = *pp;
    size_t len = *lenp;
    while (len >= 3 * blk) {
        uint64_t c0 = c, c1 = 0, c2 = 0;
        for (const uint8_t *end = p + blk; p < end; p += 8) {
            c0 = _mm_crc32_u64(c0, load64(p));
            c1 = _mm_crc32_u64(c1, load64(p + blk));
            c2 = _mm_crc32_u64(c2, load64(p + 2 * blk));
        }
        c = shift(t, (uint32_t)c0) ^ (uint32_t)c1;
        c = shift(t, c) ^ (uint32_t)c2;
        p += 2 * blk;
        len -= 3 * blk;
    }
    *pp = p;
    *lenp = len;
    return c;
}

__attribute__((target("sse4.2"))) static uint32_t hw_raw(uint32_t c, const uint8_t *p, size_t len) {
    while (len > 0 && ((uintptr_t)p & 7) != 0) {
        c = _mm_crc32_u8(c, *p++);
        len--;
    }
    if (len >= 3 * SHORT_BLOCK) {
        c = hw_three(c, &p, &len, LONG_BLOCK, g_shift_long);
        c = hw_three(c, &p, &len, SHORT_BLOCK, g_shift_short);
    }
    uint64_t c64 = c;
    for (; len >= 8; p += 8, len -= 8) c64 = _mm_crc32_u64(c64, load64(p));
    c = (uint32_t)c64;
    while (len-- > 0) c = _mm_crc32_u8(c, *p++);
    return c;
}

/* t = the "feed n zero bytes" operator: the image of each of the 32 state bits, combined per byte. */
static void build_shift(uint32_t t[4][256], size_t n) {
    static const uint8_t zeros[LONG_BLOCK];
    uint32_t basis[32];
    for (int i = 0; i < 32; i++) basis[i] = sw_raw(1u << i, zeros, n);
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int j = 0; j < 8; j++)
                if (b & (1u << j)) v ^= basis[8 * k + j];
            t[k][b] = v;
        }
}
#endif

static void crc32c_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        g_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = g_tab[0][i];
        for (int t = 1; t < 8; t++) {
            c = (c >> 8) ^ g_tab[0][c & 0xff];
            g_tab[t][i] = c;
        }
    }
    g_raw = sw_raw;
#ifdef CRC32C_HW
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        build_shift(g_shift_long, LONG_BLOCK);
        build_shift(g_shift_short, SHORT_BLOCK);
        g_raw = hw_raw;
    }
#endif
}

uint32_t gr_crc32c(uint32_t crc, const void *buf, size_t len) {
    pthread_once(&g_once, crc32c_init);
    return ~g_raw(~crc, buf, len);
}

uint32_t gr_crc32c_sw(uint32_t crc, const void *buf, size_t len) {
    pthread_once(&g_once, crc32c_init);
    return ~sw_raw(~crc, buf, len);
}

const char *gr_crc32c_impl(void) {
    pthread_once(&g_once, crc32c_init);
    return g_raw == sw_raw ? "table (slicing-by-8)" : "SSE4.2 crc32 (three streams)";
}
