/* CRC-32C known vectors (RFC 3720 appendix B.4 and the classic "123456789" check value). */
#include "common/crc32c.h"

#include <stdio.h>
#include <string.h>

#include "support/check.h"

int main(void) {
    uint8_t buf[64];
    CHECK(gr_crc32c(0, "123456789", 9) == 0xE3069283u);
    CHECK(gr_crc32c(0, "", 0) == 0);
    memset(buf, 0, 32);
    CHECK(gr_crc32c(0, buf, 32) == 0x8A9136AAu);
    memset(buf, 0xff, 32);
    CHECK(gr_crc32c(0, buf, 32) == 0x62A8AB43u);
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
    CHECK(gr_crc32c(0, buf, 32) == 0x46DD794Eu);
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(31 - i);
    CHECK(gr_crc32c(0, buf, 32) == 0x113FDB5Cu);
    /* Chaining and misaligned starts agree with the one-shot value. */
    uint8_t big[1000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 7 + 3);
    uint32_t whole = gr_crc32c(0, big, sizeof big);
    for (size_t cut = 0; cut <= 17; cut++) {
        uint32_t c = gr_crc32c(0, big, cut);
        c = gr_crc32c(c, big + cut, sizeof big - cut);
        CHECK(c == whole);
    }
    /* Bitwise reference on odd offsets/lengths. */
    for (size_t off = 0; off < 9; off++) {
        for (size_t len = 0; len < 40; len++) {
            uint32_t r = 0xffffffffu;
            for (size_t i = 0; i < len; i++) {
                r ^= big[off + i];
                for (int k = 0; k < 8; k++) r = (r & 1) ? (r >> 1) ^ 0x82F63B78u : r >> 1;
            }
            CHECK(gr_crc32c(0, big + off, len) == ~r);
        }
    }
    /* The hardware path (three streams of 4096- and 256-byte blocks, combined) against the tables
     * and a bitwise reference, on lengths around the block thresholds and odd starts. */
    static uint8_t huge[70000];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof huge; i++) {
        x = x * 1103515245u + 12345u;
        huge[i] = (uint8_t)(x >> 16);
    }
    const size_t lens[] = {767, 768, 769, 1000, 1536, 3 * 4096 - 1, 3 * 4096, 3 * 4096 + 7, 3 * 4096 + 768,
                           40000, 65536, 69990};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (size_t off = 0; off < 9; off++) {
            uint32_t hw = gr_crc32c(0, huge + off, lens[li]), sw = gr_crc32c_sw(0, huge + off, lens[li]);
            CHECK(hw == sw);
            uint32_t c = gr_crc32c(0xdeadbeefu, huge + off, lens[li]);
            CHECK(c == gr_crc32c_sw(0xdeadbeefu, huge + off, lens[li]));
        }
    uint32_t r = 0xffffffffu;
    for (size_t i = 0; i < 3 * 4096 + 771; i++) {
        r ^= huge[3 + i];
        for (int k = 0; k < 8; k++) r = (r & 1) ? (r >> 1) ^ 0x82F63B78u : r >> 1;
    }
    CHECK(gr_crc32c(0, huge + 3, 3 * 4096 + 771) == ~r);
    printf("test_crc32c: implementation %s\n", gr_crc32c_impl());
    if (test_failures) fprintf(stderr, "test_crc32c: %d failures\n", test_failures);
    else printf("test_crc32c: ok\n");
    return test_failures ? 1 : 0;
}
