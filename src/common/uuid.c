/* Kafka's Uuid: see uuid.h. */
#include "common/uuid.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/util.h"

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static uint64_t os_random_u64(void *arg) {
    (void)arg;
    uint64_t v = 0;
    size_t got = 0;
    while (got < sizeof v) {
        ssize_t r = getrandom((uint8_t *)&v + got, sizeof v - got, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            /* last resort: ids need uniqueness, not secrecy */
            static _Atomic uint64_t ctr;
            uint64_t x = (uint64_t)gr_mono_us() ^ ((uint64_t)time(NULL) << 20) ^
                         atomic_fetch_add(&ctr, 0x9e3779b97f4a7c15ULL);
            x ^= x >> 33;
            x *= 0xff51afd7ed558ccdULL;
            x ^= x >> 33;
            return x;
        }
        got += (size_t)r;
    }
    return v;
}

bool gr_uuid_is_zero(const struct gr_uuid *u) {
    static const struct gr_uuid zero;
    return memcmp(u->b, zero.b, 16) == 0;
}

bool gr_uuid_equal(const struct gr_uuid *a, const struct gr_uuid *b) { return memcmp(a->b, b->b, 16) == 0; }

static bool reserved(const struct gr_uuid *u) {
    for (int i = 0; i < 15; i++)
        if (u->b[i]) return false;
    return u->b[15] <= 1; /* ZERO_UUID, ONE_UUID (METADATA_TOPIC_ID) */
}

void gr_uuid_random_from(struct gr_uuid *out, uint64_t (*next_u64)(void *arg), void *arg) {
    for (;;) {
        uint64_t hi = next_u64(arg), lo = next_u64(arg);
        for (int i = 0; i < 8; i++) {
            out->b[i] = (uint8_t)(hi >> (56 - 8 * i));
            out->b[8 + i] = (uint8_t)(lo >> (56 - 8 * i));
        }
        out->b[6] = (uint8_t)((out->b[6] & 0x0f) | 0x40); /* version 4 */
        out->b[8] = (uint8_t)((out->b[8] & 0x3f) | 0x80); /* IETF variant */
        /* the first character is b[0]'s top 6 bits: 62 is '-' */
        if (!reserved(out) && (out->b[0] >> 2) != 62) return;
    }
}

void gr_uuid_random(struct gr_uuid *out) { gr_uuid_random_from(out, os_random_u64, NULL); }

char *gr_uuid_to_string(const struct gr_uuid *u, char out[GR_UUID_STR_LEN + 1]) {
    uint8_t b[18] = {0};
    memcpy(b, u->b, 16);
    int o = 0;
    for (int i = 0; i < 18 && o < GR_UUID_STR_LEN; i += 3) {
        uint32_t v = ((uint32_t)b[i] << 16) | ((uint32_t)b[i + 1] << 8) | b[i + 2];
        out[o++] = B64[(v >> 18) & 63];
        out[o++] = B64[(v >> 12) & 63];
        if (o < GR_UUID_STR_LEN) out[o++] = B64[(v >> 6) & 63];
        if (o < GR_UUID_STR_LEN) out[o++] = B64[v & 63];
    }
    out[GR_UUID_STR_LEN] = 0;
    return out;
}

static int b64_val(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
}

int gr_uuid_parse(const char *s, struct gr_uuid *out) {
    if (!s) return -EINVAL;
    size_t n = strnlen(s, 25);
    if (n == 24 && s[22] == '=' && s[23] == '=') n = 22;
    else if (n != 22) return -EINVAL;
    uint8_t b[18] = {0};
    uint32_t acc = 0;
    int bits = 0, o = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_val(s[i]);
        if (v < 0) return -EINVAL;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            b[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (o != 16) return -EINVAL;
    memcpy(out->b, b, 16);
    return 0;
}
