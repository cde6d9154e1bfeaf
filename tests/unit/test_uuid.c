/* Kafka's Uuid (src/common/uuid.c): text form against Kafka's, reserved ids, hostile text. */
#include <string.h>

#include "common/uuid.h"
#include "support/check.h"

int test_failures;

struct seq {
    uint64_t v[6];
    int i;
};
static uint64_t from_seq(void *arg) {
    struct seq *q = arg;
    return q->v[q->i++ % 6];
}

int main(void) {
    /* Uuid(0x123456789abcdef0L, 0x0fedcba987654321L).toString() */
    struct gr_uuid u = {{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x0f, 0xed, 0xcb, 0xa9, 0x87, 0x65, 0x43, 0x21}};
    char s[GR_UUID_STR_LEN + 1];
    CHECK(strcmp(gr_uuid_to_string(&u, s), "EjRWeJq83vAP7cuph2VDIQ") == 0);
    struct gr_uuid back;
    CHECK(gr_uuid_parse(s, &back) == 0 && gr_uuid_equal(&u, &back));
    CHECK(gr_uuid_parse("EjRWeJq83vAP7cuph2VDIQ==", &back) == 0 && gr_uuid_equal(&u, &back)); /* padded */
    struct gr_uuid zero = {{0}};
    CHECK(gr_uuid_is_zero(&zero) && !gr_uuid_is_zero(&u));
    CHECK(strcmp(gr_uuid_to_string(&zero, s), "AAAAAAAAAAAAAAAAAAAAAA") == 0);
    const char *bad[] = {"", "abc", "EjRWeJq83vAP7cuph2VDI", "EjRWeJq83vAP7cuph2VDIQx", "EjRWeJq83vAP7cuph2VD+Q",
                         "EjRWeJq83vAP7cuph2VD/Q", "EjRWeJq83vAP7cuph2VDIQ=", "EjRWeJq83vAP7cuph2VDIQ==x",
                         "EjRWeJq83vAP7cu h2VDIQ"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECKF(gr_uuid_parse(bad[i], &back) != 0, "%s", bad[i]);
    CHECK(gr_uuid_parse(NULL, &back) != 0);
    /* random ids: version 4, never reserved, never starting with '-', all different */
    struct gr_uuid prev = {{0}};
    for (int i = 0; i < 2000; i++) {
        gr_uuid_random(&u);
        gr_uuid_to_string(&u, s);
        CHECK(s[0] != '-' && (u.b[6] >> 4) == 4 && (u.b[8] >> 6) == 2 && !gr_uuid_equal(&u, &prev));
        prev = u;
    }
    /* a draw whose text starts with '-' (top byte 0xf8 -> 62) is drawn again (reserved ids cannot
     * come out: the version bits are set, as in java.util.UUID.randomUUID) */
    struct seq q = {{0xf800000000000000ULL, 5, 0, 0, 0x0100000000000000ULL, 2}, 0};
    struct gr_uuid r;
    gr_uuid_random_from(&r, from_seq, &q);
    CHECK(q.i == 4 && r.b[0] == 0 && r.b[6] == 0x40 && r.b[8] == 0x80);
    return test_failures != 0;
}
