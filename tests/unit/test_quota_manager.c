/* Client quotas (broker/quota_manager.h) over an in-memory ZooKeeper:
 *  - Kafka's entity precedence, users/<u>/clients/<c> down to clients/<default>, for the
 *    principal's user name and the client id;
 *  - a <default> user quota is one sensor per user (Kafka's metric tags), not one shared bucket;
 *  - sensors idle for longer than the expiry are removed, the active ones kept;
 *  - many entities and sensors: lookups stay hash probes (a smoke check of the count). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker.h"
#include "broker/quota_manager.h"
#include "common/log.h"
#include "common/util.h"
#include "support/check.h"
#include "support/memzk.h"
#include "zk/kzk.h"

int test_failures;

/* Creates /config/<path> (and its parents) holding key=value. */
static void set_quota(struct memzk *z, const char *path, const char *key, const char *value) {
    char full[256], json[256];
    snprintf(full, sizeof full, "/config/%s", path);
    for (char *p = full + 1; (p = strchr(p, '/')); p++) {
        *p = 0;
        memzk_create(z, full, "", 0, 0, NULL);
        *p = '/';
    }
    snprintf(json, sizeof json, "{\"version\":1,\"config\":{\"%s\":\"%s\"}}", key, value);
    if (memzk_set(z, full, json, (int)strlen(json), -1, NULL) == GR_ZNONODE)
        CHECK(memzk_create(z, full, json, (int)strlen(json), 0, NULL) == GR_ZOK);
}

struct env {
    struct memzk *z;
    struct gr_kzk *k;
    struct gr_broker b;
};

static void env_init(struct env *e) {
    e->z = memzk_new(6000);
    e->k = gr_kzk_new(&e->z->base);
    CHECK(gr_kzk_ensure_paths(e->k) == 0);
    memset(&e->b, 0, sizeof e->b);
    e->b.broker_id = 1;
    e->b.zk = e->k;
}

static void env_free(struct env *e) {
    gr_kzk_free(e->k);
    memzk_free(e->z);
}

#define P GR_QUOTA_PRODUCE

static void test_precedence(void) {
    struct env e;
    env_init(&e);
    set_quota(e.z, "clients/<default>", "producer_byte_rate", "8");
    set_quota(e.z, "clients/c1", "producer_byte_rate", "7");
    set_quota(e.z, "users/<default>", "producer_byte_rate", "6");
    set_quota(e.z, "users/<default>/clients/<default>", "producer_byte_rate", "5");
    set_quota(e.z, "users/<default>/clients/c1", "producer_byte_rate", "4");
    set_quota(e.z, "users/alice", "producer_byte_rate", "3");
    set_quota(e.z, "users/alice/clients/<default>", "producer_byte_rate", "2");
    set_quota(e.z, "users/alice/clients/c1", "producer_byte_rate", "1");
    set_quota(e.z, "users/CN%3Dclient1%2CO%3DTest", "consumer_byte_rate", "9"); /* a TLS principal */
    struct gr_quota_manager *q = gr_quota_manager_new(&e.b);
    CHECK(gr_quota_bound(q, P, "alice", "c1") == 1);
    CHECK(gr_quota_bound(q, P, "alice", "c2") == 2);
    CHECK(gr_quota_bound(q, P, "bob", "c1") == 4);
    CHECK(gr_quota_bound(q, P, "bob", "c2") == 5);
    CHECK(gr_quota_bound(q, GR_QUOTA_FETCH, "CN=client1,O=Test", "x") == 9);
    CHECK(gr_quota_bound(q, GR_QUOTA_FETCH, "bob", "x") < 0);
    gr_quota_manager_free(q);
    /* without the user/client pairs: users/<u> beats users/<default> beats clients/... */
    env_free(&e);
    env_init(&e);
    set_quota(e.z, "clients/<default>", "producer_byte_rate", "8");
    set_quota(e.z, "clients/c1", "producer_byte_rate", "7");
    set_quota(e.z, "users/alice", "producer_byte_rate", "3");
    q = gr_quota_manager_new(&e.b);
    CHECK(gr_quota_bound(q, P, "alice", "c1") == 3);
    CHECK(gr_quota_bound(q, P, "bob", "c1") == 7);
    CHECK(gr_quota_bound(q, P, "bob", "c9") == 8);
    CHECK(gr_quota_bound(q, P, NULL, "c9") == 8); /* ANONYMOUS */
    gr_quota_manager_free(q);
    env_free(&e);
}

/* users/<default> = 150 B/s: each user has a sensor of its own. 11 windows of 1 s: the first
 * records are averaged over 10 s, so 1000 bytes is a rate of 100 (under) and 2000 of 200 (over). */
static void test_default_user_sensor_per_user(void) {
    struct env e;
    env_init(&e);
    set_quota(e.z, "users/<default>", "producer_byte_rate", "150");
    struct gr_quota_manager *q = gr_quota_manager_new(&e.b);
    int64_t t = 1000000;
    CHECK(gr_quota_record_at(q, P, "alice", "app", 1000, t) == 0);
    CHECK(gr_quota_record_at(q, P, "bob", "app", 1000, t + 1) == 0);   /* not alice's bucket */
    CHECK(gr_quota_record_at(q, P, "carol", "x", 1000, t + 2) == 0);
    CHECK(gr_quota_record_at(q, P, "alice", "other", 1000, t + 3) > 0); /* same user, any client */
    CHECK(gr_quota_sensor_count(q) == 3);
    gr_quota_manager_free(q);
    env_free(&e);
}

static void test_idle_sensors_expire(void) {
    struct env e;
    env_init(&e);
    set_quota(e.z, "clients/<default>", "producer_byte_rate", "1000000");
    struct gr_quota_manager *q = gr_quota_manager_new(&e.b);
    gr_quota_set_sensor_expiry(q, 60000);
    int64_t t = 1000000;
    char cid[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(cid, sizeof cid, "client-%d", i);
        gr_quota_record_at(q, P, "u", cid, 10, t + i / 100);
    }
    CHECK(gr_quota_sensor_count(q) == 5000);
    gr_quota_record_at(q, P, "u", "client-1", 10, t + 40000); /* client-1 stays active */
    CHECK(gr_quota_sensor_count(q) == 5000);                   /* nothing idle for a minute yet */
    gr_quota_record_at(q, P, "u", "client-2", 10, t + 90000);  /* next sweep: the rest idle 90 s */
    CHECK(gr_quota_sensor_count(q) == 2);
    /* an expired sensor starts again from nothing */
    CHECK(gr_quota_record_at(q, P, "u", "client-3", 10, t + 90001) == 0);
    CHECK(gr_quota_sensor_count(q) == 3);
    gr_quota_manager_free(q);
    env_free(&e);
}

int main(void) {
    gr_log_set_level(GR_LOG_ERROR);
    test_precedence();
    test_default_user_sensor_per_user();
    test_idle_sensors_expire();
    if (test_failures) fprintf(stderr, "%d failure(s)\n", test_failures);
    return test_failures ? 1 : 0;
}
