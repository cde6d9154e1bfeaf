/* AclAuthorizer (src/security/authorizer.c): Kafka 2.7's matching rules on a cache filled by
 * hand, the ACL znode codecs (src/zk/acl_znodes.c), and create/delete/describe through the
 * in-memory ZooKeeper (conditional writes, change notifications, last ACL -> znode removed). */
#include <stdlib.h>
#include <string.h>

#include "api/authorize.h"
#include "broker/broker.h"
#include "common/config.h"
#include "common/util.h"
#include "security/acl.h"
#include "security/authorizer.h"
#include "support/check.h"
#include "support/memzk.h"
#include "zk/acl_znodes.h"
#include "zk/kzk.h"

#define ALLOW GR_ACL_PERM_ALLOW
#define DENY GR_ACL_PERM_DENY
#define TOPIC GR_ACL_RES_TOPIC
#define GROUP GR_ACL_RES_GROUP
#define LIT GR_ACL_PAT_LITERAL
#define PRE GR_ACL_PAT_PREFIXED

static struct gr_acl_entry E(const char *principal, int op, int perm, const char *host) {
    return (struct gr_acl_entry){.principal = (char *)principal, .host = (char *)host, .op = (int8_t)op,
                                 .perm = (int8_t)perm};
}

static bool can(struct gr_authorizer *a, const char *p, int op, int type, const char *name) {
    return gr_authorizer_authorize(a, p, "10.0.0.1", op, type, name, false);
}

static void test_decisions(void) {
    struct gr_authorizer_config cfg = {.super_users = " User:root ; User:ops;"};
    struct gr_authorizer *a = gr_authorizer_new(&cfg);
    /* no ACLs, allow.everyone.if.no.acl.found=false: denied; super users always allowed */
    CHECK(!can(a, "User:alice", GR_ACL_OP_READ, TOPIC, "t"));
    CHECK(can(a, "User:root", GR_ACL_OP_READ, TOPIC, "t"));
    CHECK(can(a, "User:ops", GR_ACL_OP_ALTER, GR_ACL_RES_CLUSTER, "kafka-cluster"));
    CHECK(!can(a, "User:Root", GR_ACL_OP_READ, TOPIC, "t")); /* case-sensitive */

    struct gr_acl_entry t[] = {E("User:alice", GR_ACL_OP_READ, ALLOW, "*"),
                               E("User:bob", GR_ACL_OP_WRITE, ALLOW, "10.0.0.2")};
    gr_authorizer_cache_put(a, TOPIC, LIT, "t", t, 2, 0);
    CHECK(can(a, "User:alice", GR_ACL_OP_READ, TOPIC, "t"));
    CHECK(!can(a, "User:alice", GR_ACL_OP_WRITE, TOPIC, "t"));
    CHECK(!can(a, "User:alice", GR_ACL_OP_READ, TOPIC, "t2"));      /* literal: exact name */
    CHECK(!can(a, "User:bob", GR_ACL_OP_WRITE, TOPIC, "t"));        /* host 10.0.0.1 != 10.0.0.2 */
    CHECK(gr_authorizer_authorize(a, "User:bob", "10.0.0.2", GR_ACL_OP_WRITE, TOPIC, "t", false));
    /* implied: DESCRIBE by READ/WRITE/DELETE/ALTER, DESCRIBE_CONFIGS by ALTER_CONFIGS */
    CHECK(can(a, "User:alice", GR_ACL_OP_DESCRIBE, TOPIC, "t"));
    CHECK(!can(a, "User:alice", GR_ACL_OP_DESCRIBE_CONFIGS, TOPIC, "t"));
    struct gr_acl_entry g[] = {E("User:carol", GR_ACL_OP_ALTER_CONFIGS, ALLOW, "*"),
                               E("User:dave", GR_ACL_OP_DELETE, ALLOW, "*")};
    gr_authorizer_cache_put(a, GROUP, LIT, "g", g, 2, 0);
    CHECK(can(a, "User:carol", GR_ACL_OP_DESCRIBE_CONFIGS, GROUP, "g"));
    CHECK(!can(a, "User:carol", GR_ACL_OP_DESCRIBE, GROUP, "g"));
    CHECK(can(a, "User:dave", GR_ACL_OP_DESCRIBE, GROUP, "g"));
    CHECK(!can(a, "User:dave", GR_ACL_OP_READ, GROUP, "g"));

    /* prefixed and wildcard resources; ALL; User:* */
    struct gr_acl_entry pre[] = {E("User:erin", GR_ACL_OP_ALL, ALLOW, "*")};
    gr_authorizer_cache_put(a, TOPIC, PRE, "logs-", pre, 1, 0);
    CHECK(can(a, "User:erin", GR_ACL_OP_WRITE, TOPIC, "logs-app"));
    CHECK(can(a, "User:erin", GR_ACL_OP_WRITE, TOPIC, "logs-"));
    CHECK(!can(a, "User:erin", GR_ACL_OP_WRITE, TOPIC, "logs"));
    CHECK(!can(a, "User:erin", GR_ACL_OP_WRITE, GROUP, "logs-app")); /* other resource type */
    struct gr_acl_entry wild[] = {E("User:*", GR_ACL_OP_READ, ALLOW, "*")};
    gr_authorizer_cache_put(a, TOPIC, LIT, "*", wild, 1, 0);
    CHECK(can(a, "User:zed", GR_ACL_OP_READ, TOPIC, "anything"));
    CHECK(!can(a, "User:zed", GR_ACL_OP_WRITE, TOPIC, "anything"));

    /* DENY takes precedence, from any matching resource, and is never widened */
    struct gr_acl_entry deny[] = {E("User:erin", GR_ACL_OP_WRITE, DENY, "*")};
    gr_authorizer_cache_put(a, TOPIC, LIT, "logs-secret", deny, 1, 0);
    CHECK(!can(a, "User:erin", GR_ACL_OP_WRITE, TOPIC, "logs-secret"));
    CHECK(can(a, "User:erin", GR_ACL_OP_READ, TOPIC, "logs-secret"));
    CHECK(can(a, "User:erin", GR_ACL_OP_DESCRIBE, TOPIC, "logs-secret")); /* DENY WRITE != DENY DESCRIBE */
    struct gr_acl_entry deny_all[] = {E("User:*", GR_ACL_OP_ALL, DENY, "10.0.0.1")};
    gr_authorizer_cache_put(a, TOPIC, PRE, "logs-x", deny_all, 1, 0);
    CHECK(!can(a, "User:erin", GR_ACL_OP_READ, TOPIC, "logs-xyz"));
    CHECK(can(a, "User:root", GR_ACL_OP_READ, TOPIC, "logs-xyz")); /* super user beats DENY */

    /* n == 0 removes the resource */
    gr_authorizer_cache_put(a, TOPIC, LIT, "t", NULL, 0, 0);
    gr_authorizer_cache_put(a, TOPIC, LIT, "*", NULL, 0, 0);
    CHECK(!can(a, "User:alice", GR_ACL_OP_READ, TOPIC, "t"));
    gr_authorizer_free(a);

    /* allow.everyone.if.no.acl.found: only where no ACL at all applies */
    cfg = (struct gr_authorizer_config){.allow_everyone_if_no_acl_found = true};
    a = gr_authorizer_new(&cfg);
    CHECK(can(a, "User:x", GR_ACL_OP_WRITE, TOPIC, "free"));
    gr_authorizer_cache_put(a, TOPIC, LIT, "guarded", t, 1, 0);
    CHECK(!can(a, "User:x", GR_ACL_OP_WRITE, TOPIC, "guarded"));
    CHECK(can(a, "User:x", GR_ACL_OP_WRITE, TOPIC, "free"));
    gr_authorizer_free(a);
}

static void test_names_and_filters(void) {
    CHECK(gr_acl_op_parse("DescribeConfigs") == GR_ACL_OP_DESCRIBE_CONFIGS);
    CHECK(gr_acl_op_parse("DESCRIBE_CONFIGS") == GR_ACL_OP_DESCRIBE_CONFIGS);
    CHECK(gr_acl_op_parse("idempotentwrite") == GR_ACL_OP_IDEMPOTENT_WRITE);
    CHECK(gr_acl_op_parse("Fly") == GR_ACL_OP_UNKNOWN);
    CHECK(strcmp(gr_acl_op_name(GR_ACL_OP_CLUSTER_ACTION), "ClusterAction") == 0);
    CHECK(gr_acl_resource_type_parse("TRANSACTIONAL_ID") == GR_ACL_RES_TRANSACTIONAL_ID);
    CHECK(gr_acl_pattern_parse("prefixed") == PRE);
    /* KIP-373 (Kafka 3.3+, ACL APIs v3): the User resource and its two token operations */
    CHECK(gr_acl_resource_type_parse("User") == GR_ACL_RES_USER);
    CHECK(strcmp(gr_acl_resource_type_name(GR_ACL_RES_USER), "User") == 0);
    CHECK(gr_acl_op_parse("CREATE_TOKENS") == GR_ACL_OP_CREATE_TOKENS);
    CHECK(strcmp(gr_acl_op_name(GR_ACL_OP_DESCRIBE_TOKENS), "DescribeTokens") == 0);
    CHECK(gr_acl_op_supported(GR_ACL_RES_USER, GR_ACL_OP_CREATE_TOKENS));
    CHECK(!gr_acl_op_supported(GR_ACL_RES_USER, GR_ACL_OP_READ));
    CHECK(gr_acl_op_parse("Fly") == GR_ACL_OP_UNKNOWN);
    struct gr_acl_filter f = {.resource_type = TOPIC, .pattern_type = GR_ACL_PAT_MATCH, .name = "logs-app",
                              .op = GR_ACL_OP_ANY, .perm = GR_ACL_PERM_ANY};
    CHECK(gr_acl_filter_matches_pattern(&f, TOPIC, LIT, "logs-app"));
    CHECK(gr_acl_filter_matches_pattern(&f, TOPIC, LIT, "*"));
    CHECK(gr_acl_filter_matches_pattern(&f, TOPIC, PRE, "logs-"));
    CHECK(!gr_acl_filter_matches_pattern(&f, TOPIC, PRE, "logs-apps"));
    CHECK(!gr_acl_filter_matches_pattern(&f, GROUP, LIT, "logs-app"));
    f.pattern_type = GR_ACL_PAT_ANY;
    CHECK(!gr_acl_filter_matches_pattern(&f, TOPIC, LIT, "*"));
    CHECK(gr_acl_filter_matches_pattern(&f, TOPIC, PRE, "logs-app"));
    struct gr_acl_binding b = {.resource_type = GR_ACL_RES_CLUSTER, .pattern_type = LIT, .name = "c",
                               .entry = E("User:a", GR_ACL_OP_ALTER, ALLOW, "*")};
    CHECK(gr_acl_binding_invalid(&b) != NULL); /* cluster must be kafka-cluster */
    b.name = "kafka-cluster";
    CHECK(gr_acl_binding_invalid(&b) == NULL);
    b.entry.principal = "alice";
    CHECK(gr_acl_binding_invalid(&b) != NULL);
    /* KIP-373's token operations only on the User resource (an older Gregor cannot parse them in
     * the znode of another resource type) */
    b.entry.principal = "User:a";
    b.entry.op = GR_ACL_OP_CREATE_TOKENS;
    CHECK(gr_acl_binding_invalid(&b) != NULL);
    b.resource_type = GR_ACL_RES_TOPIC, b.name = "t", b.entry.op = GR_ACL_OP_DESCRIBE_TOKENS;
    CHECK(gr_acl_binding_invalid(&b) != NULL);
    b.resource_type = GR_ACL_RES_USER, b.name = "User:bob";
    CHECK(gr_acl_binding_invalid(&b) == NULL);
    b.entry.op = GR_ACL_OP_CREATE_TOKENS;
    CHECK(gr_acl_binding_invalid(&b) == NULL);
    CHECK(gr_acl_op_supported(GROUP, GR_ACL_OP_READ) && !gr_acl_op_supported(GROUP, GR_ACL_OP_WRITE));
}

static void test_znode_codecs(void) {
    /* Kafka's own example (ZkData.scala), any key order */
    const char *kafka = "{\"version\": 1, \"acls\": [ { \"host\":\"host1\", \"permissionType\": \"Deny\","
                        "\"operation\": \"Read\",\"principal\": \"User:alice\"}]}";
    struct gr_acl_entry *e = NULL;
    int n = 0;
    CHECK(gr_acl_znode_decode(kafka, strlen(kafka), &e, &n) == 0 && n == 1);
    if (n == 1)
        CHECK(strcmp(e[0].principal, "User:alice") == 0 && strcmp(e[0].host, "host1") == 0 &&
              e[0].op == GR_ACL_OP_READ && e[0].perm == DENY);
    size_t len;
    char *s = gr_acl_znode_encode(e, n, &len);
    CHECK(strcmp(s, "{\"version\":1,\"acls\":[{\"principal\":\"User:alice\",\"permissionType\":\"Deny\","
                    "\"operation\":\"Read\",\"host\":\"host1\"}]}") == 0);
    free(s);
    gr_acl_entries_free(e, n);
    static const char *const bad[] = {"{", "[]", "{\"version\":2,\"acls\":[]}", "{\"version\":1}",
                                      "{\"version\":1,\"acls\":[{\"principal\":\"alice\",\"permissionType\":"
                                      "\"Allow\",\"operation\":\"Read\",\"host\":\"*\"}]}",
                                      "{\"version\":1,\"acls\":[{\"principal\":\"User:a\",\"permissionType\":"
                                      "\"Allow\",\"operation\":\"Jump\",\"host\":\"*\"}]}",
                                      "{\"version\":1,\"acls\":[7]}"};
    for (size_t i = 0; i < GR_ARRAY_LEN(bad); i++) CHECKF(gr_acl_znode_decode(bad[i], strlen(bad[i]), &e, &n) == GR_ECORRUPT, "%s", bad[i]);

    s = gr_acl_change_encode(TOPIC, LIT, "t:1", &len);
    CHECK(strcmp(s, "TOPIC:t:1") == 0);
    int type, pat;
    char *name;
    CHECK(gr_acl_change_decode(s, len, 0, &type, &pat, &name) == 0 && type == TOPIC && pat == LIT &&
          strcmp(name, "t:1") == 0);
    free(name);
    free(s);
    CHECK(gr_acl_change_decode("Group:g", 7, 0, &type, &pat, &name) == 0 && type == GROUP); /* case-insensitive */
    free(name);
    s = gr_acl_change_encode(GROUP, PRE, "g-", &len);
    CHECK(strcmp(s, "{\"version\":1,\"resourceType\":\"GROUP\",\"name\":\"g-\",\"patternType\":\"PREFIXED\"}") == 0);
    CHECK(gr_acl_change_decode(s, len, 1, &type, &pat, &name) == 0 && type == GROUP && pat == PRE);
    free(name);
    free(s);
    CHECK(gr_acl_change_decode("nocolon", 7, 0, &type, &pat, &name) == GR_ECORRUPT);
    s = gr_acl_znode_path(PRE, GR_ACL_RES_TRANSACTIONAL_ID, "tx");
    CHECK(strcmp(s, "/kafka-acl-extended/prefixed/TransactionalId/tx") == 0);
    free(s);
}

struct seen {
    int n;
    int filter[8];
    char principal[8][32];
};

static void record(void *ctx, int fi, const struct gr_acl_binding *b, int16_t err) {
    struct seen *s = ctx;
    CHECK(err == 0);
    if (s->n < 8) {
        s->filter[s->n] = fi;
        snprintf(s->principal[s->n], sizeof s->principal[0], "%s", b->entry.principal);
        s->n++;
    }
}

static void test_store(void) {
    struct memzk *z = memzk_new(6000);
    struct gr_kzk *k = gr_kzk_new(&z->base);
    struct gr_authorizer *a = gr_authorizer_new(NULL);
    CHECK(gr_authorizer_start(a, k, NULL) == 0);
    CHECK(memzk_find(z, "/kafka-acl/Topic") >= 0 && memzk_find(z, "/kafka-acl-extended/prefixed/Group") >= 0);
    CHECK(memzk_find(z, "/kafka-acl-changes") >= 0 && memzk_find(z, "/kafka-acl-extended-changes") >= 0);

    struct gr_acl_binding bs[] = {
        {TOPIC, LIT, "t", E("User:a", GR_ACL_OP_READ, ALLOW, "*")},
        {TOPIC, LIT, "t", E("User:b", GR_ACL_OP_WRITE, ALLOW, "*")},
        {TOPIC, LIT, "t", E("User:a", GR_ACL_OP_READ, ALLOW, "*")}, /* duplicate: stored once */
        {GROUP, PRE, "g", E("User:a", GR_ACL_OP_READ, ALLOW, "*")},
    };
    int16_t errs[4] = {-1, -1, -1, -1};
    gr_authorizer_create_acls(a, bs, 4, errs);
    CHECK(errs[0] == 0 && errs[1] == 0 && errs[2] == 0 && errs[3] == 0);
    int i = memzk_find(z, "/kafka-acl/Topic/t");
    CHECK(i >= 0);
    if (i >= 0) {
        struct gr_acl_entry *e;
        int n;
        CHECK(gr_acl_znode_decode(z->v[i].data, (size_t)z->v[i].len, &e, &n) == 0 && n == 2);
        gr_acl_entries_free(e, n);
    }
    CHECK(memzk_find(z, "/kafka-acl-extended/prefixed/Group/g") >= 0);
    CHECK(can(a, "User:b", GR_ACL_OP_WRITE, TOPIC, "t") && can(a, "User:a", GR_ACL_OP_READ, GROUP, "g1"));

    /* another writer changed the znode: the update re-reads and retries on BADVERSION */
    struct gr_acl_entry other[] = {E("User:c", GR_ACL_OP_READ, ALLOW, "*"), E("User:a", GR_ACL_OP_READ, ALLOW, "*")};
    size_t len;
    char *json = gr_acl_znode_encode(other, 2, &len);
    CHECK(memzk_set(z, "/kafka-acl/Topic/t", json, (int)len, -1, NULL) == GR_ZOK);
    free(json);
    struct gr_acl_binding more = {TOPIC, LIT, "t", E("User:d", GR_ACL_OP_READ, ALLOW, "*")};
    gr_authorizer_create_acls(a, &more, 1, errs);
    CHECK(errs[0] == 0);
    CHECK(can(a, "User:c", GR_ACL_OP_READ, TOPIC, "t") && can(a, "User:d", GR_ACL_OP_READ, TOPIC, "t"));
    CHECK(!can(a, "User:b", GR_ACL_OP_WRITE, TOPIC, "t")); /* the other writer removed it */

    /* describe with a filter; delete with two filters (first matching filter counts) */
    struct seen s = {0};
    struct gr_acl_filter f = {.resource_type = GR_ACL_RES_ANY, .pattern_type = GR_ACL_PAT_ANY, .principal = "User:a",
                              .op = GR_ACL_OP_ANY, .perm = GR_ACL_PERM_ANY};
    gr_authorizer_acls(a, &f, record, &s);
    CHECK(s.n == 2);
    struct gr_acl_filter del[2] = {
        {.resource_type = TOPIC, .pattern_type = LIT, .name = "t", .principal = "User:a", .op = GR_ACL_OP_ANY,
         .perm = GR_ACL_PERM_ANY},
        {.resource_type = TOPIC, .pattern_type = GR_ACL_PAT_ANY, .op = GR_ACL_OP_ANY, .perm = GR_ACL_PERM_ANY},
    };
    memset(&s, 0, sizeof s);
    gr_authorizer_delete_acls(a, del, 2, record, &s);
    CHECK(s.n == 3);
    int by0 = 0;
    for (int j = 0; j < s.n; j++) by0 += s.filter[j] == 0 && strcmp(s.principal[j], "User:a") == 0;
    CHECK(by0 == 1);
    CHECK(memzk_find(z, "/kafka-acl/Topic/t") < 0); /* last ACL gone: znode deleted */
    CHECK(can(a, "User:a", GR_ACL_OP_READ, GROUP, "g1"));

    /* change notifications were written for every change */
    int notes = 0, ext = 0;
    for (int j = 0; j < z->n; j++) {
        notes += strncmp(z->v[j].path, "/kafka-acl-changes/acl_changes_", 31) == 0;
        ext += strncmp(z->v[j].path, "/kafka-acl-extended-changes/acl_changes_", 40) == 0;
    }
    CHECK(notes == 3 && ext == 1);

    /* a second authorizer loads the cache from the znodes */
    struct gr_authorizer *b = gr_authorizer_new(NULL);
    CHECK(gr_authorizer_start(b, k, NULL) == 0);
    CHECK(can(b, "User:a", GR_ACL_OP_READ, GROUP, "g-anything") && !can(b, "User:a", GR_ACL_OP_READ, TOPIC, "t"));
    gr_authorizer_free(b);

    /* an unparsable ACL znode fails the start-up instead of being skipped (its DENYs with it) */
    CHECK(memzk_set(z, "/kafka-acl-extended/prefixed/Group/g", "{garbage", 8, -1, NULL) == GR_ZOK);
    struct gr_authorizer *c = gr_authorizer_new(NULL);
    CHECK(gr_authorizer_start(c, k, NULL) != 0);
    gr_authorizer_free(c);
    gr_authorizer_free(a);
    gr_kzk_free(k);
    gr_zkb_destroy(&z->base);
}

/* api/authorize.c: the principal (with the test-only client.id mapping) and the host taken from
 * the peer address, IPv4 and IPv6. */
static void test_request_checks(void) {
    struct gr_config cfg;
    gr_config_defaults(&cfg);
    struct gr_broker *b = gr_broker_new(&cfg, 1);
    struct gr_api_req req = {.broker = b, .peer = "[::1]:40000", .principal = "User:ANONYMOUS"};
    req.hdr.ClientId = "User:ivy";
    CHECK(gr_api_authorized(&req, GR_ACL_OP_WRITE, TOPIC, "t")); /* no authorizer: allowed */
    CHECK(gr_api_authorized_operations(&req, GROUP, "g") == ((1 << GR_ACL_OP_READ) | (1 << GR_ACL_OP_DESCRIBE) |
                                                             (1 << GR_ACL_OP_DELETE)));
    b->authorizer = gr_authorizer_new(NULL);
    struct gr_acl_entry e[] = {E("User:ivy", GR_ACL_OP_WRITE, ALLOW, "0:0:0:0:0:0:0:1"),
                               E("User:ANONYMOUS", GR_ACL_OP_READ, ALLOW, "127.0.0.1")};
    gr_authorizer_cache_put(b->authorizer, TOPIC, LIT, "t", e, 2, 0);
    CHECK(strcmp(gr_api_principal(&req), "User:ANONYMOUS") == 0); /* mapping off */
    CHECK(!gr_api_authorized(&req, GR_ACL_OP_WRITE, TOPIC, "t"));
    cfg.gregor_test_principal_by_client_id = true;
    CHECK(strcmp(gr_api_principal(&req), "User:ivy") == 0);
    CHECK(gr_api_authorized(&req, GR_ACL_OP_WRITE, TOPIC, "t")); /* [::1] is 0:0:0:0:0:0:0:1, as Java */
    req.peer = "[::ffff:127.0.0.1]:6";                           /* IPv4-mapped on a [::] listener: the IPv4 address */
    CHECK(!gr_api_authorized(&req, GR_ACL_OP_WRITE, TOPIC, "t"));
    req.hdr.ClientId = "consumer-1";
    CHECK(gr_api_authorized(&req, GR_ACL_OP_READ, TOPIC, "t")); /* ANONYMOUS from 127.0.0.1 */
    req.hdr.ClientId = "User:ivy";
    req.peer = "[::1]:40000";
    CHECK(gr_api_authorized_operations(&req, TOPIC, "t") == ((1 << GR_ACL_OP_WRITE) | (1 << GR_ACL_OP_DESCRIBE)));
    req.peer = "127.0.0.1:5";
    CHECK(!gr_api_authorized(&req, GR_ACL_OP_WRITE, TOPIC, "t"));  /* other host */
    req.hdr.ClientId = "consumer-1";                               /* not User:..: ANONYMOUS */
    CHECK(gr_api_authorized(&req, GR_ACL_OP_READ, TOPIC, "t"));
    req.principal = "User:sasl-bob";                               /* an authenticated principal wins */
    req.hdr.ClientId = "User:ivy";
    CHECK(strcmp(gr_api_principal(&req), "User:sasl-bob") == 0);
    gr_authorizer_free(b->authorizer);
    b->authorizer = NULL;
    gr_broker_free(b);
    gr_config_release(&cfg);
}

/* Peer addresses in Java's InetAddress.getHostAddress form. */
static void test_host_normalize(void) {
    static const char *const cases[][2] = {
        {"127.0.0.1", "127.0.0.1"},
        {"::1", "0:0:0:0:0:0:0:1"},
        {"::ffff:10.1.2.3", "10.1.2.3"},
        {"::FFFF:192.168.0.1", "192.168.0.1"},
        {"2001:DB8::0:1", "2001:db8:0:0:0:0:0:1"},
        {"fe80::a00:27ff:fe4e:66a1", "fe80:0:0:0:a00:27ff:fe4e:66a1"},
        {"::", "0:0:0:0:0:0:0:0"},
        {"::127.0.0.1", "0:0:0:0:0:0:7f00:1"}, /* IPv4-compatible (not mapped): Java keeps IPv6 */
        {"not-an-address", "not-an-address"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64];
        gr_acl_host_normalize(cases[i][0], out, sizeof out);
        if (strcmp(out, cases[i][1]) != 0) fprintf(stderr, "%s -> %s, want %s\n", cases[i][0], out, cases[i][1]);
        CHECK(strcmp(out, cases[i][1]) == 0);
    }
}

int main(void) {
    test_host_normalize();
    test_request_checks();
    test_decisions();
    test_names_and_filters();
    test_znode_codecs();
    test_store();
    if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures);
    return test_failures != 0;
}
