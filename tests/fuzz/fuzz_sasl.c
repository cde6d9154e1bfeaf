/* libFuzzer target: the SASL and SCRAM parsers a client reaches before it is authenticated.
 * The first byte picks the parser; the rest is its input:
 *   0  SCRAM server: client-first, then (after the first '\n') client-final
 *   1  SASL/PLAIN token against a fixed JAAS configuration
 *   2  JAAS option lookup on arbitrary text
 *   3  SCRAM credential string (ZooKeeper value) parse, re-format, re-parse
 *   4  base64 decode
 *   5  SCRAM client fed an arbitrary server-first / server-final (a hostile broker)
 * None may crash, leak, read out of bounds or allocate more than a small multiple of its input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "security/sasl_server.h"
#include "security/scram.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct gr_scram_cred cred;
static int have_cred;

static int lookup(void *ctx, enum gr_scram_mech m, const char *user, struct gr_scram_cred *out) {
    (void)ctx;
    (void)m;
    if (strcmp(user, "alice") != 0) return -1;
    *out = cred;
    return 0;
}

static void check(int cond) {
    if (!cond) abort();
}

static void scram_server(const uint8_t *p, size_t n) {
    const uint8_t *nl = memchr(p, '\n', n);
    size_t n1 = nl ? (size_t)(nl - p) : n;
    struct gr_scram_server *s = gr_scram_server_new(GR_SCRAM_SHA_256);
    uint8_t *out = NULL;
    size_t ol = 0;
    const char *why;
    int rc = gr_scram_server_step(s, p, n1, lookup, NULL, &out, &ol, &why);
    check(rc != 0 || (out && ol > 0));
    free(out);
    if (rc == 0 && nl) {
        out = NULL;
        rc = gr_scram_server_step(s, nl + 1, n - n1 - 1, lookup, NULL, &out, &ol, &why);
        check(rc != 0 || gr_scram_server_done(s));
        free(out);
    }
    gr_scram_server_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!have_cred) {
        gr_scram_cred_from_password(GR_SCRAM_SHA_256, "secret", 4096, &cred);
        have_cred = 1;
    }
    if (size < 1) return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    char *text = malloc(n + 1);
    memcpy(text, p, n);
    text[n] = 0;
    switch (data[0] % 6) {
    case 0: scram_server(p, n); break;
    case 1: {
        char user[256];
        const char *why;
        (void)gr_sasl_plain_check("x required user_alice=\"pw\" user_bob=b;", p, n, user, sizeof user, &why);
        break;
    }
    case 2: free(gr_jaas_option(text, "user_alice")); break;
    case 3: {
        struct gr_scram_cred c, c2;
        if (gr_scram_cred_parse(GR_SCRAM_SHA_256, text, &c) == 0) {
            char *s = gr_scram_cred_format(&c);
            check(gr_scram_cred_parse(GR_SCRAM_SHA_256, s, &c2) == 0 && c2.iterations == c.iterations &&
                  c2.salt_len == c.salt_len && memcmp(c2.stored_key, c.stored_key, 32) == 0);
            free(s);
        }
        break;
    }
    case 4: {
        uint8_t out[256];
        int l = gr_b64_decode(text, n, out, sizeof out);
        check(l < 0 || (size_t)l <= sizeof out);
        break;
    }
    case 5: {
        const uint8_t *nl = memchr(p, '\n', n);
        size_t n1 = nl ? (size_t)(nl - p) : n;
        struct gr_scram_client *c = gr_scram_client_new(GR_SCRAM_SHA_256, "alice", "secret");
        uint8_t *out = NULL;
        size_t ol;
        gr_scram_client_step(c, NULL, 0, &out, &ol);
        free(out);
        out = NULL;
        if (gr_scram_client_step(c, p, n1, &out, &ol) == 0 && nl) (void)gr_scram_client_step(c, nl + 1, n - n1 - 1, NULL, NULL);
        free(out);
        gr_scram_client_free(c);
        break;
    }
    }
    free(text);
    return 0;
}
