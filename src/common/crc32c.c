/* CRC-32C, table-driven with slicing-by-8. The eight 256-entry tables are computed once
 * (pthread_once) from the reflected Castagnoli polynomial. */
#include "common/crc32c.h"

#include <pthread.h>
#include <string.h>

#define CRC32C_POLY 0x82F63B78u

static uint32_t g_tab[8][256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void crc32c_init_tables(void) {
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
}

uint32_t gr_crc32c(uint32_t crc, const void *buf, size_t len) {
    pthread_once(&g_once, crc32c_init_tables);
    const uint8_t *p = buf;
    uint32_t c = ~crc;
    /* Byte-at-a-time until 8-byte aligned. */
    while (len > 0 && ((uintptr_t)p & 7) != 0) {
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
    return ~c;
}
