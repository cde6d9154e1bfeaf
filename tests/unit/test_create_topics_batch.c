/* gr_topic_admin_create_topics (CreateTopics of many topics) over the in-memory ZooKeeper, with a
 * backend wrapper that counts calls and can play a concurrent creator:
 *   - 300 topics, one already in ZooKeeper: TOPIC_ALREADY_EXISTS for it, the rest created with
 *     their configs, in one children read and one multi per 500 topics (not ~4 calls per topic);
 *     every /config/topics/T precedes its /brokers/topics/T inside the multi;
 *   - a name taken between the read and the write (another creator): the multi fails as a whole,
 *     the batch is redone topic by topic, that topic gets TOPIC_ALREADY_EXISTS, the rest exist;
 *   - a leftover /config/topics/T without its topic: created, config overwritten (AdminZkClient);
 *   - '.'/'_' collisions with an existing topic and between topics of the same request;
 *   - validate_only writes nothing; explicit assignments are written as given. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/topic_admin.h"
#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "protocol/messages.h"
#include "support/check.h"
#include "support/memzk.h"
#include "zk/kzk.h"

/* A backend in front of memzk that counts calls and records the last multi's paths. */
struct counting {
    struct gr_zk_backend base;
    struct memzk *z;
    int calls, multis, children;
    int last_multi_n;
    char *last_multi_paths[1200];
    const char *race_create; /* created in memzk right after the next get_children */
};
static struct gr_zk_backend_ops counting_ops;

static struct memzk *inner(struct gr_zk_backend *b) { return ((struct counting *)b)->z; }
#define ZI(b) (&inner(b)->base)

static int c_create(struct gr_zk_backend *b, const char *p, const void *d, int l, int f, char **cp)
{
    ((struct counting *)b)->calls++;
    return gr_zkb_create(ZI(b), p, d, l, f, cp);
}
static int c_delete(struct gr_zk_backend *b, const char *p, int v)
{
    ((struct counting *)b)->calls++;
    return gr_zkb_delete(ZI(b), p, v);
}
static int c_get(struct gr_zk_backend *b, const char *p, bool w, char **d, int *l, struct gr_zstat *st)
{
    ((struct counting *)b)->calls++;
    return gr_zkb_get(ZI(b), p, w, d, l, st);
}
static int c_set(struct gr_zk_backend *b, const char *p, const void *d, int l, int v, struct gr_zstat *st)
{
    ((struct counting *)b)->calls++;
    return gr_zkb_set(ZI(b), p, d, l, v, st);
}
static int c_exists(struct gr_zk_backend *b, const char *p, bool w, struct gr_zstat *st)
{
    ((struct counting *)b)->calls++;
    return gr_zkb_exists(ZI(b), p, w, st);
}
static int c_children(struct gr_zk_backend *b, const char *p, bool w, struct gr_zstrings *out)
{
    struct counting *c = (struct counting *)b;
    c->calls++;
    c->children++;
    int rc = gr_zkb_get_children(ZI(b), p, w, out);
    if (c->race_create) {
        memzk_create(c->z, c->race_create, "{}", 2, 0, NULL);
        c->race_create = NULL;
    }
    return rc;
}
static int c_multi(struct gr_zk_backend *b, const struct gr_zop *ops, int n, struct gr_zop_result *r)
{
    struct counting *c = (struct counting *)b;
    c->calls++;
    c->multis++;
    for (int i = 0; i < c->last_multi_n; i++)
        free(c->last_multi_paths[i]);
    c->last_multi_n = n < 1200 ? n : 1200;
    for (int i = 0; i < c->last_multi_n; i++)
        c->last_multi_paths[i] = gr_strdup(ops[i].path);
    return gr_zkb_multi(ZI(b), ops, n, r);
}
static int c_get_many(struct gr_zk_backend *b, const char *const *p, int n, bool w, struct gr_zget_result *r)
{
    ((struct counting *)b)->calls++;
    return gr_zkb_get_many(ZI(b), p, n, w, r);
}
static int c_children_many(struct gr_zk_backend *b, const char *const *p, int n, bool w,
                           struct gr_zchildren_result *r)
{
    ((struct counting *)b)->calls++;
    return gr_zkb_get_children_many(ZI(b), p, n, w, r);
}
static int c_session(struct gr_zk_backend *b, struct gr_zsession *out) { return gr_zkb_session(ZI(b), out); }
static int c_close_session(struct gr_zk_backend *b, const struct gr_zsession *s)
{
    return gr_zkb_close_session(ZI(b), s);
}
static int c_wait(struct gr_zk_backend *b, int t) { return gr_zkb_wait_connected(ZI(b), t); }
static void c_destroy(struct gr_zk_backend *b)
{
    struct counting *c = (struct counting *)b;
    for (int i = 0; i < c->last_multi_n; i++)
        free(c->last_multi_paths[i]);
    memzk_free(c->z);
    free(c);
}

static struct counting *counting_new(void)
{
    counting_ops = (struct gr_zk_backend_ops){ c_create, c_delete, c_get, c_set, c_exists, c_children,
                                               c_multi, c_get_many, c_children_many, c_session,
                                               c_close_session, c_wait, c_destroy, NULL };
    struct counting *c = gr_calloc(1, sizeof(*c));
    c->z = memzk_new(6000);
    c->base = c->z->base;
    c->base.ops = &counting_ops;
    return c;
}

static void reset_counts(struct counting *c) { c->calls = c->multis = c->children = 0; }

static bool exists(struct counting *c, const char *path) { return memzk_find(c->z, path) >= 0; }

static const char *data_of(struct counting *c, const char *path)
{
    int i = memzk_find(c->z, path);
    return i >= 0 ? c->z->v[i].data : "";
}

/* Three live brokers without racks in the metadata cache. */
static void live_brokers(struct gr_broker *b)
{
    struct UpdateMetadataRequest_UpdateMetadataEndpoint ep = { 9092, "h", NULL, 0 };
    struct UpdateMetadataRequest_UpdateMetadataBroker br[3] = {
        { .Id = 1, .EndpointsCount = 1, .Endpoints = &ep },
        { .Id = 2, .EndpointsCount = 1, .Endpoints = &ep },
        { .Id = 3, .EndpointsCount = 1, .Endpoints = &ep } };
    struct UpdateMetadataRequest um = { .ControllerId = 1, .ControllerEpoch = 1, .BrokerEpoch = -1,
                                        .LiveBrokersCount = 3, .LiveBrokers = br };
    gr_mdc_update(b->metadata, 1, &um, NULL);
}

#define N_MANY 300

static void test_many_with_one_existing(struct gr_broker *b, struct counting *c)
{
    memzk_create(c->z, "/brokers/topics/t0150", "{}", 2, 0, NULL);
    char names[N_MANY][16];
    struct gr_topic_spec specs[N_MANY];
    struct gr_topic_result res[N_MANY];
    const char *ck[1] = { "retention.ms" };
    const char *cv[1] = { "12345" };
    for (int i = 0; i < N_MANY; i++) {
        snprintf(names[i], sizeof(names[i]), "t%04d", i);
        specs[i] = (struct gr_topic_spec){ .name = names[i], .num_partitions = 4, .replication_factor = 2,
                                           .n_configs = 1, .config_names = ck, .config_values = cv };
    }
    reset_counts(c);
    int ok = gr_topic_admin_create_topics(b, specs, N_MANY, false, false, -1, res);
    CHECK(ok == N_MANY - 1);
    CHECK(res[150].error == GR_KERR_TOPIC_ALREADY_EXISTS);
    CHECK(strcmp(data_of(c, "/brokers/topics/t0150"), "{}") == 0);
    for (int i = 0; i < N_MANY; i++) {
        if (i == 150)
            continue;
        CHECK(res[i].error == GR_KERR_NONE && res[i].num_partitions == 4 && res[i].replication_factor == 2);
        char p[128];
        snprintf(p, sizeof(p), "/config/topics/%.16s", names[i]);
        CHECK(strstr(data_of(c, p), "\"retention.ms\":\"12345\"") != NULL);
        snprintf(p, sizeof(p), "/brokers/topics/%.16s", names[i]);
        struct gr_kzk_topic_assignment a;
        memset(&a, 0, sizeof(a));
        const char *d = data_of(c, p);
        CHECK(gr_kzk_topic_assignment_decode(d, strlen(d), &a) == 0 && a.n_partitions == 4 &&
              a.partitions[3].n_replicas == 2);
        gr_kzk_topic_assignment_release(&a);
    }
    /* one children read, one multi (299 topics x 2 creates), nothing else */
    CHECK(c->children == 1 && c->multis == 1 && c->calls == 2);
    CHECK(c->last_multi_n == 2 * (N_MANY - 1));
    for (int i = 0; i + 1 < c->last_multi_n; i += 2) {
        CHECK(strncmp(c->last_multi_paths[i], "/config/topics/", 15) == 0);
        CHECK(strncmp(c->last_multi_paths[i + 1], "/brokers/topics/", 16) == 0);
        CHECK(strcmp(c->last_multi_paths[i] + 15, c->last_multi_paths[i + 1] + 16) == 0);
    }
}

static void test_concurrent_creator(struct gr_broker *b, struct counting *c)
{
    const char *names[4] = { "r0", "r1", "raced", "r3" };
    struct gr_topic_spec specs[4];
    struct gr_topic_result res[4];
    for (int i = 0; i < 4; i++)
        specs[i] = (struct gr_topic_spec){ .name = names[i], .num_partitions = 1, .replication_factor = 1 };
    c->race_create = "/brokers/topics/raced";
    int ok = gr_topic_admin_create_topics(b, specs, 4, false, false, -1, res);
    CHECK(ok == 3);
    CHECK(res[2].error == GR_KERR_TOPIC_ALREADY_EXISTS && strstr(res[2].message, "raced") != NULL);
    CHECK(res[0].error == 0 && res[1].error == 0 && res[3].error == 0);
    CHECK(exists(c, "/brokers/topics/r0") && exists(c, "/brokers/topics/r1") && exists(c, "/brokers/topics/r3"));
    CHECK(strcmp(data_of(c, "/brokers/topics/raced"), "{}") == 0);
}

static void test_leftover_config(struct gr_broker *b, struct counting *c)
{
    memzk_create(c->z, "/config/topics/left", "{\"version\":1,\"config\":{\"x\":\"y\"}}", 32, 0, NULL);
    const char *names[2] = { "left", "right" };
    struct gr_topic_spec specs[2];
    struct gr_topic_result res[2];
    const char *ck[1] = { "cleanup.policy" };
    const char *cv[1] = { "compact" };
    for (int i = 0; i < 2; i++)
        specs[i] = (struct gr_topic_spec){ .name = names[i], .num_partitions = 1, .replication_factor = 1,
                                           .n_configs = 1, .config_names = ck, .config_values = cv };
    CHECK(gr_topic_admin_create_topics(b, specs, 2, false, false, -1, res) == 2);
    CHECK(res[0].error == 0 && res[1].error == 0);
    CHECK(exists(c, "/brokers/topics/left") && exists(c, "/brokers/topics/right"));
    CHECK(strstr(data_of(c, "/config/topics/left"), "compact") != NULL);
    CHECK(strstr(data_of(c, "/config/topics/left"), "\"x\"") == NULL);
}

static void test_collisions_and_validate_only(struct gr_broker *b, struct counting *c)
{
    memzk_create(c->z, "/brokers/topics/has.dot", "{}", 2, 0, NULL);
    const char *names[4] = { "has_dot", "new.one", "new_one", "fine" };
    struct gr_topic_spec specs[4];
    struct gr_topic_result res[4];
    for (int i = 0; i < 4; i++)
        specs[i] = (struct gr_topic_spec){ .name = names[i], .num_partitions = 1, .replication_factor = 1 };
    /* validate only: the request's own topics are not written, so they do not collide */
    reset_counts(c);
    CHECK(gr_topic_admin_create_topics(b, specs, 4, true, false, -1, res) == 3);
    CHECK(res[0].error == GR_KERR_INVALID_TOPIC_EXCEPTION && strstr(res[0].message, "has.dot") != NULL);
    CHECK(res[1].error == 0 && res[2].error == 0 && res[3].error == 0);
    CHECK(c->multis == 0 && !exists(c, "/brokers/topics/fine") && !exists(c, "/config/topics/fine"));
    CHECK(gr_topic_admin_create_topics(b, specs, 4, false, false, -1, res) == 2);
    CHECK(res[0].error == GR_KERR_INVALID_TOPIC_EXCEPTION);
    CHECK(res[1].error == 0 && res[3].error == 0);
    CHECK(res[2].error == GR_KERR_INVALID_TOPIC_EXCEPTION && strstr(res[2].message, "new.one") != NULL);
    CHECK(exists(c, "/brokers/topics/new.one") && !exists(c, "/brokers/topics/new_one"));
    /* explicit assignment, and a bad one next to it */
    int32_t pids[2] = { 1, 0 };
    int32_t r0[2] = { 3, 1 }, r1[2] = { 2, 3 };
    const int32_t *reps[2] = { r0, r1 };
    int nreps[2] = { 2, 2 };
    int32_t bad_pids[1] = { 5 };
    struct gr_topic_spec s2[2] = {
        { .name = "explicit", .num_partitions = -1, .replication_factor = -1, .n_assignments = 2,
          .partition_ids = pids, .replicas = reps, .n_replicas = nreps },
        { .name = "badassign", .num_partitions = -1, .replication_factor = -1, .n_assignments = 1,
          .partition_ids = bad_pids, .replicas = reps, .n_replicas = nreps } };
    struct gr_topic_result r2[2];
    CHECK(gr_topic_admin_create_topics(b, s2, 2, false, false, -1, r2) == 1);
    CHECK(r2[0].error == 0 && r2[0].num_partitions == 2 && r2[1].error == GR_KERR_INVALID_REPLICA_ASSIGNMENT);
    CHECK(strstr(data_of(c, "/brokers/topics/explicit"), "\"0\":[2,3]") != NULL);
    CHECK(strstr(data_of(c, "/brokers/topics/explicit"), "\"1\":[3,1]") != NULL);
}


/* The metadata cache knows 3 brokers; ZooKeeper has a 4th that registered since: a topic of RF 4 is
 * assigned from ZooKeeper's list instead of failing with INVALID_REPLICATION_FACTOR. */
static void test_cache_behind_zookeeper(struct gr_broker *b, struct counting *c)
{
    memzk_create(c->z, "/brokers/ids", NULL, 0, 0, NULL);
    for (int id = 1; id <= 4; id++) {
        char p[32], d[256];
        snprintf(p, sizeof(p), "/brokers/ids/%d", id);
        int n = snprintf(d, sizeof(d),
                         "{\"listener_security_protocol_map\":{\"PLAINTEXT\":\"PLAINTEXT\"},"
                         "\"endpoints\":[\"PLAINTEXT://h:%d\"],\"jmx_port\":-1,\"host\":\"h\","
                         "\"timestamp\":\"1\",\"port\":%d,\"version\":4}",
                         9090 + id, 9090 + id);
        memzk_create(c->z, p, d, n, 0, NULL);
    }
    struct gr_topic_spec spec = { .name = "rf4", .num_partitions = 2, .replication_factor = 4 };
    struct gr_topic_result res;
    CHECK(gr_topic_admin_create_topics(b, &spec, 1, false, false, -1, &res) == 1);
    CHECK(res.error == GR_KERR_NONE && res.replication_factor == 4);
    struct gr_topic_spec too_many = { .name = "rf5", .num_partitions = 1, .replication_factor = 5 };
    CHECK(gr_topic_admin_create_topics(b, &too_many, 1, false, false, -1, &res) == 0);
    CHECK(res.error == GR_KERR_INVALID_REPLICATION_FACTOR);
}

int main(void)
{
    gr_log_set_level(GR_LOG_ERROR);
    struct gr_config cfg;
    gr_config_defaults(&cfg);
    struct gr_broker *b = gr_broker_new(&cfg, 1);
    struct counting *c = counting_new();
    memzk_create(c->z, "/brokers", NULL, 0, 0, NULL);
    memzk_create(c->z, "/brokers/topics", NULL, 0, 0, NULL);
    memzk_create(c->z, "/config", NULL, 0, 0, NULL);
    memzk_create(c->z, "/config/topics", NULL, 0, 0, NULL);
    b->zk = gr_kzk_new(&c->base);
    live_brokers(b);

    test_many_with_one_existing(b, c);
    test_concurrent_creator(b, c);
    test_leftover_config(b, c);
    test_collisions_and_validate_only(b, c);
    test_cache_behind_zookeeper(b, c);

    gr_kzk_free(b->zk);
    b->zk = NULL;
    gr_broker_free(b);
    gr_zkb_destroy(&c->base);
    gr_config_release(&cfg);
    if (test_failures) {
        fprintf(stderr, "test_create_topics_batch: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_create_topics_batch: ok\n");
    return 0;
}
