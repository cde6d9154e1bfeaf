/* KIP-511 connections per client software (net/client_software.h): counted under unknown until
 * ApiVersions names the client, moved on a rename, gone with the last connection, at most
 * GR_CLIENT_SW_MAX_ENTRIES pairs per listener, and a rename after close does nothing. */
#include <stdio.h>
#include <string.h>

#include "net/client_software.h"
#include "support/check.h"

int test_failures;

struct seen {
    int n;
    char key[256][96];
    int64_t count[256];
};

static void collect(void *ctx, const char *listener, const char *name, const char *version, int64_t connections) {
    struct seen *s = ctx;
    if (s->n >= 256) return;
    snprintf(s->key[s->n], sizeof s->key[s->n], "%s/%s/%s", listener, name, version);
    s->count[s->n++] = connections;
}

static int64_t count_of(struct gr_client_sw_table *t, const char *key, int *entries) {
    struct seen s = {0};
    gr_client_sw_foreach(t, collect, &s);
    if (entries) *entries = s.n;
    for (int i = 0; i < s.n; i++)
        if (strcmp(s.key[i], key) == 0) return s.count[i];
    return 0;
}

static void test_counts(void) {
    struct gr_client_sw_table *t = gr_client_sw_new();
    struct gr_client_sw *a = NULL, *b = NULL, *c = NULL;
    gr_client_sw_open(t, &a, "PLAINTEXT");
    gr_client_sw_open(t, &b, "PLAINTEXT");
    gr_client_sw_open(t, &c, "SSL");
    CHECK(count_of(t, "PLAINTEXT/unknown/unknown", NULL) == 2);
    gr_client_sw_set(t, &a, "PLAINTEXT", "librdkafka", "2.3.0");
    gr_client_sw_set(t, &b, "PLAINTEXT", "librdkafka", "2.3.0");
    int entries;
    CHECK(count_of(t, "PLAINTEXT/librdkafka/2.3.0", &entries) == 2);
    CHECK(count_of(t, "PLAINTEXT/unknown/unknown", NULL) == 0);
    CHECK(entries == 2); /* the unknown entry of PLAINTEXT went with its last connection */
    gr_client_sw_set(t, &c, "SSL", "", ""); /* "" is unknown (Kafka's ClientInformation) */
    CHECK(count_of(t, "SSL/unknown/unknown", NULL) == 1);
    gr_client_sw_close(t, &a);
    CHECK(count_of(t, "PLAINTEXT/librdkafka/2.3.0", NULL) == 1);
    gr_client_sw_close(t, &b);
    gr_client_sw_set(t, &b, "PLAINTEXT", "late", "1"); /* ApiVersions answered after the close */
    CHECK(count_of(t, "PLAINTEXT/late/1", &entries) == 0);
    CHECK(entries == 1);
    gr_client_sw_close(t, &c);
    gr_client_sw_close(t, &c); /* twice: nothing more */
    CHECK(count_of(t, "SSL/unknown/unknown", &entries) == 0 && entries == 0);
    gr_client_sw_free(t);
}

static void test_bounded(void) {
    struct gr_client_sw_table *t = gr_client_sw_new();
    enum { N = GR_CLIENT_SW_MAX_ENTRIES + 20 };
    static struct gr_client_sw *slot[N];
    for (int i = 0; i < N; i++) {
        char v[16];
        snprintf(v, sizeof v, "%d", i);
        gr_client_sw_open(t, &slot[i], "PLAINTEXT");
        gr_client_sw_set(t, &slot[i], "PLAINTEXT", "evil", v);
    }
    int entries;
    count_of(t, "", &entries);
    CHECK(entries == GR_CLIENT_SW_MAX_ENTRIES); /* the later ones are not counted */
    struct gr_client_sw *other = NULL;
    gr_client_sw_open(t, &other, "SSL"); /* the bound is per listener */
    CHECK(count_of(t, "SSL/unknown/unknown", NULL) == 1);
    for (int i = 0; i < N; i++) gr_client_sw_close(t, &slot[i]);
    count_of(t, "", &entries);
    CHECK(entries == 1);
    gr_client_sw_close(t, &other);
    gr_client_sw_free(t);
}

int main(void) {
    test_counts();
    test_bounded();
    if (test_failures) fprintf(stderr, "%d failure(s)\n", test_failures);
    return test_failures ? 1 : 0;
}
