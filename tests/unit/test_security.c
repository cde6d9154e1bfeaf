/* Security building blocks without sockets: SCRAM (credential string, client <-> server
 * exchanges, malformed messages), base64, JAAS options, SASL/PLAIN, user name sanitizing, and
 * the security keys of server.properties. */
#define OPENSSL_SUPPRESS_DEPRECATED /* RAND_set_rand_method: a generator that fails */
#include <errno.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "security/sasl_server.h"
#include "security/scram.h"
#include "support/check.h"

int test_failures;

static const char *known_user = "alice";
static struct gr_scram_cred known_cred;

static int lookup(void *ctx, enum gr_scram_mech m, const char *user, struct gr_scram_cred *cred) {
    (void)ctx;
    if (strcmp(user, known_user) != 0 || m != GR_SCRAM_SHA_512) return -ENOENT;
    *cred = known_cred;
    return 0;
}

/* Runs a full exchange; returns the server's result of the last step. */
static int exchange(const char *user, const char *password) {
    struct gr_scram_client *c = gr_scram_client_new(GR_SCRAM_SHA_512, user, password);
    struct gr_scram_server *s = gr_scram_server_new(GR_SCRAM_SHA_512);
    uint8_t *m1, *m2, *m3, *m4;
    size_t l1, l2, l3, l4;
    const char *why;
    CHECK(gr_scram_client_step(c, NULL, 0, &m1, &l1) == 0);
    int rc = gr_scram_server_step(s, m1, l1, lookup, NULL, &m2, &l2, &why);
    if (rc == 0) {
        CHECK(gr_scram_client_step(c, m2, l2, &m3, &l3) == 0);
        rc = gr_scram_server_step(s, m3, l3, lookup, NULL, &m4, &l4, &why);
        if (rc == 0) {
            CHECK(gr_scram_server_done(s));
            CHECK(strcmp(gr_scram_server_user(s), user) == 0);
            CHECK(gr_scram_client_step(c, m4, l4, NULL, NULL) == 0); /* the server proved itself */
            free(m4);
        }
        free(m3);
        free(m2);
    }
    free(m1);
    gr_scram_client_free(c);
    gr_scram_server_free(s);
    return rc;
}

static void test_scram(void) {
    CHECK(gr_scram_cred_from_password(GR_SCRAM_SHA_512, "alice-secret", 4096, &known_cred) == 0);
    char *str = gr_scram_cred_format(&known_cred);
    struct gr_scram_cred back;
    CHECK(gr_scram_cred_parse(GR_SCRAM_SHA_512, str, &back) == 0);
    CHECK(back.iterations == 4096 && back.salt_len == 32 && back.key_len == 64);
    CHECK(memcmp(back.stored_key, known_cred.stored_key, 64) == 0);
    CHECK(gr_scram_cred_parse(GR_SCRAM_SHA_256, str, &back) != 0); /* 64-byte keys are not SHA-256's */
    free(str);
    CHECK(gr_scram_cred_parse(GR_SCRAM_SHA_512, "salt=abc,iterations=1", &back) != 0);
    CHECK(gr_scram_cred_parse(GR_SCRAM_SHA_512, "", &back) != 0);

    CHECK(exchange("alice", "alice-secret") == 0);
    CHECK(exchange("alice", "wrong") == -EACCES);
    CHECK(exchange("bob", "alice-secret") == -EACCES);

    const char *bad[] = {"", "x", "n,,", "n,,n=alice", "n,,r=abc", "p=x,,n=alice,r=a", "n,a=bob,n=alice,r=abc",
                         "n,,n=al=ice,r=abc", "n,,n=alice,r=ab\001c",
                         /* Kafka's ClientFirstMessage pattern starts with "n,": no "y" */
                         "y,,n=alice,r=abc"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gr_scram_server *s = gr_scram_server_new(GR_SCRAM_SHA_512);
        uint8_t *out = NULL;
        size_t ol;
        const char *why = NULL;
        int rc = gr_scram_server_step(s, (const uint8_t *)bad[i], strlen(bad[i]), lookup, NULL, &out, &ol, &why);
        CHECKF(rc != 0 && out == NULL && why && why[0], "message '%s' accepted", bad[i]);
        /* after a failure nothing more is accepted */
        CHECK(gr_scram_server_step(s, (const uint8_t *)"n,,n=alice,r=x", 14, lookup, NULL, &out, &ol, &why) != 0);
        gr_scram_server_free(s);
    }
    /* an oversized message is refused before any parsing */
    size_t big = GR_SCRAM_MAX_MESSAGE + 1;
    char *huge = malloc(big);
    memset(huge, 'a', big);
    struct gr_scram_server *s = gr_scram_server_new(GR_SCRAM_SHA_512);
    uint8_t *out;
    size_t ol;
    const char *why;
    CHECK(gr_scram_server_step(s, (uint8_t *)huge, big, lookup, NULL, &out, &ol, &why) == -EINVAL);
    gr_scram_server_free(s);
    free(huge);
    /* saslname escaping round-trips through client and server */
    known_user = "a,b=c";
    CHECK(exchange("a,b=c", "alice-secret") == 0);
    known_user = "alice";
}

/* A random generator that fails: no SCRAM nonce is made from whatever the buffer held. */
static int failing_bytes(unsigned char *buf, int num) {
    (void)buf, (void)num;
    return 0;
}

static void test_scram_random_failure(void) {
    static RAND_METHOD failing;
    failing = *RAND_get_rand_method();
    failing.bytes = failing_bytes;
    failing.pseudorand = failing_bytes;
    CHECK(RAND_set_rand_method(&failing) == 1);
    struct gr_scram_client *c = gr_scram_client_new(GR_SCRAM_SHA_512, "alice", "alice-secret");
    uint8_t *m1 = NULL;
    size_t l1 = 0;
    CHECK(gr_scram_client_step(c, NULL, 0, &m1, &l1) == -EIO && m1 == NULL);
    gr_scram_client_free(c);
    struct gr_scram_server *s = gr_scram_server_new(GR_SCRAM_SHA_512);
    uint8_t *out = NULL;
    size_t ol;
    const char *why = NULL;
    const char *first = "n,,n=alice,r=abc";
    CHECK(gr_scram_server_step(s, (const uint8_t *)first, strlen(first), lookup, NULL, &out, &ol, &why) != 0 &&
          out == NULL);
    gr_scram_server_free(s);
    struct gr_scram_cred cred;
    CHECK(gr_scram_cred_from_password(GR_SCRAM_SHA_512, "x", 4096, &cred) != 0); /* random salt */
    RAND_set_rand_method(NULL);
    CHECK(exchange("alice", "alice-secret") == 0);
}

static void test_base64(void) {
    uint8_t out[16];
    CHECK(gr_b64_decode("", 0, out, sizeof out) == 0);
    CHECK(gr_b64_decode("YQ==", 4, out, sizeof out) == 1 && out[0] == 'a');
    CHECK(gr_b64_decode("YWI=", 4, out, sizeof out) == 2);
    CHECK(gr_b64_decode("YWJj", 4, out, sizeof out) == 3);
    CHECK(gr_b64_decode("YW=j", 4, out, sizeof out) < 0);
    CHECK(gr_b64_decode("YWJ", 3, out, sizeof out) < 0);
    CHECK(gr_b64_decode("Y*Jj", 4, out, sizeof out) < 0);
    CHECK(gr_b64_decode("YWJjYWJjYWJjYWJjYWJjYWJj", 24, out, 4) < 0); /* does not fit */
}

static void test_jaas_plain(void) {
    const char *jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" "
                       "password=\"admin-secret\" user_admin=\"admin-secret\" user_alice=alice-pw "
                       "user_q=\"a \\\"quoted\\\" pw\";";
    char *v = gr_jaas_option(jaas, "username");
    CHECK(v && strcmp(v, "admin") == 0);
    free(v);
    v = gr_jaas_option(jaas, "user_alice");
    CHECK(v && strcmp(v, "alice-pw") == 0);
    free(v);
    v = gr_jaas_option(jaas, "user_q");
    CHECK(v && strcmp(v, "a \"quoted\" pw") == 0);
    free(v);
    CHECK(gr_jaas_option(jaas, "user_bob") == NULL);
    CHECK(gr_jaas_option(jaas, "required") == NULL);
    CHECK(gr_jaas_option(NULL, "x") == NULL);
    free(gr_jaas_option("a=\"unterminated", "a"));

    char user[64];
    const char *why;
    CHECK(gr_sasl_plain_check(jaas, (const uint8_t *)"\0alice\0alice-pw", 15, user, sizeof user, &why) == 0 &&
          strcmp(user, "alice") == 0);
    CHECK(gr_sasl_plain_check(jaas, (const uint8_t *)"alice\0alice\0alice-pw", 20, user, sizeof user, &why) == 0);
    CHECK(gr_sasl_plain_check(jaas, (const uint8_t *)"admin\0alice\0alice-pw", 20, user, sizeof user, &why) == -EACCES);
    CHECK(gr_sasl_plain_check(jaas, (const uint8_t *)"\0alice\0alice-p", 14, user, sizeof user, &why) == -EACCES);
    CHECK(gr_sasl_plain_check(jaas, (const uint8_t *)"\0bob\0alice-pw", 13, user, sizeof user, &why) == -EACCES);
    CHECK(gr_sasl_plain_check(jaas, (const uint8_t *)"alice", 5, user, sizeof user, &why) == -EINVAL);
    CHECK(gr_sasl_plain_check(jaas, (const uint8_t *)"\0\0pw", 4, user, sizeof user, &why) == -EINVAL);
    CHECK(gr_sasl_plain_check(jaas, (const uint8_t *)"\0a\0b\0c", 6, user, sizeof user, &why) == -EINVAL);
    CHECK(gr_sasl_plain_check(NULL, (const uint8_t *)"\0alice\0alice-pw", 15, user, sizeof user, &why) == -EACCES);

    char *s = gr_sanitize_user("a b*c%d");
    CHECK(strcmp(s, "a%20b%2Ac%25d") == 0);
    char *d = gr_desanitize_user(s);
    CHECK(strcmp(d, "a b*c%d") == 0);
    free(s);
    free(d);
}

static void test_config_keys(void) {
    struct gr_config c;
    char err[512];
    gr_config_defaults(&c);
    CHECK(gr_config_set(&c, "zookeeper.connect", "h:1", err, sizeof err) == 0);
    CHECK(gr_config_set(&c, "broker.id", "1", err, sizeof err) == 0);
    CHECK(gr_config_set(&c, "listeners", "INTERNAL://:1,EXTERNAL://:2,SSL://:3", err, sizeof err) == 0);
    CHECK(gr_config_finish(&c, err, sizeof err) != 0); /* INTERNAL has no protocol */
    CHECK(gr_config_set(&c, "listener.security.protocol.map", "INTERNAL:SASL_SSL, EXTERNAL:SASL_PLAINTEXT,SSL:SSL",
                        err, sizeof err) == 0);
    CHECK(gr_config_set(&c, "ssl.keystore.location", "/k", err, sizeof err) == 0);
    CHECK(gr_config_set(&c, "listener.name.internal.ssl.keystore.location", "/ik", err, sizeof err) == 0);
    CHECK(gr_config_set(&c, "security.inter.broker.protocol", "SSL", err, sizeof err) == 0);
    CHECK(gr_config_finish(&c, err, sizeof err) == 0);
    CHECK(strcmp(gr_config_security_protocol(&c, "INTERNAL"), "SASL_SSL") == 0);
    CHECK(strcmp(gr_config_security_protocol(&c, "EXTERNAL"), "SASL_PLAINTEXT") == 0);
    CHECK(gr_config_security_protocol(&c, "OTHER") == NULL);
    CHECK(strcmp(gr_config_listener_prop(&c, "INTERNAL", "ssl.keystore.location"), "/ik") == 0);
    CHECK(strcmp(gr_config_listener_prop(&c, "EXTERNAL", "ssl.keystore.location"), "/k") == 0);
    CHECK(gr_config_listener_prop(&c, "EXTERNAL", "ssl.truststore.location") == NULL);
    CHECK(strcmp(gr_config_inter_broker_listener(&c)->name, "SSL") == 0);
    CHECK(gr_config_set(&c, "inter.broker.listener.name", "INTERNAL", err, sizeof err) == 0);
    CHECK(gr_config_finish(&c, err, sizeof err) != 0 && strstr(err, "Only one of"));
    gr_config_release(&c);
}

int main(void) {
    test_scram();
    test_scram_random_failure();
    test_base64();
    test_jaas_plain();
    test_config_keys();
    if (test_failures) fprintf(stderr, "test_security: %d failures\n", test_failures);
    return test_failures ? 1 : 0;
}
