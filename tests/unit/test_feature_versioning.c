/* Feature versioning (KIP-584) as Kafka 2.7: /feature at controller failover, UpdateFeatures
 * validation, and the broker's finalized-feature cache. Runs on the in-memory ZooKeeper. */
#include <stdlib.h>
#include <string.h>

#include "broker/finalized_features.h"
#include "common/kerr.h"
#include "controller/feature_versioning.h"
#include "protocol/arena.h"
#include "support/check.h"
#include "support/memzk.h"
#include "zk/kzk.h"

int test_failures;

static struct memzk *zk;
static struct gr_kzk *kzk;

static void setup(void) {
    zk = memzk_new(6000);
    kzk = gr_kzk_new(&zk->base);
}

static void teardown(void) {
    gr_kzk_free(kzk);
    memzk_free(zk);
}

static const char *node_data(void) {
    int i = memzk_find(zk, "/feature");
    return i < 0 ? NULL : zk->v[i].data;
}

static int node_version(void) {
    int i = memzk_find(zk, "/feature");
    return i < 0 ? -100 : zk->v[i].st.version;
}

static void test_setup_creates_enabled(void) {
    setup();
    CHECK(gr_ctrl_feature_versioning_setup(kzk, true) == 0);
    CHECK(node_data() && strcmp(node_data(), "{\"version\":1,\"status\":1,\"features\":{}}") == 0);
    /* a second failover leaves an enabled node alone */
    int v = node_version();
    CHECK(gr_ctrl_feature_versioning_setup(kzk, true) == 0);
    CHECK(node_version() == v);
    teardown();
}

static void test_setup_enables_disabled_node(void) {
    setup();
    const char *dis = "{\"version\":1,\"status\":0,\"features\":{\"f\":{\"min_version_level\":1,\"max_version_level\":2}}}";
    CHECK(memzk_create(zk, "/feature", dis, (int)strlen(dis), 0, NULL) == 0);
    CHECK(gr_ctrl_feature_versioning_setup(kzk, true) == 0);
    CHECK(node_data() && strcmp(node_data(), "{\"version\":1,\"status\":1,\"features\":{}}") == 0);
    CHECK(node_version() == 1);
    teardown();
}

static void test_setup_disabled(void) {
    setup();
    const char *en = "{\"version\":1,\"status\":1,\"features\":{}}";
    CHECK(memzk_create(zk, "/feature", en, (int)strlen(en), 0, NULL) == 0);
    CHECK(gr_ctrl_feature_versioning_setup(kzk, false) == 0);
    CHECK(node_data() && strcmp(node_data(), "{\"version\":1,\"status\":0,\"features\":{}}") == 0);
    teardown();
}

static void test_updates(void) {
    setup();
    /* an existing finalized feature "f" [1,3]; this broker supports "g" [2,5] */
    const char *en = "{\"version\":1,\"status\":1,\"features\":{\"f\":{\"min_version_level\":1,\"max_version_level\":3}}}";
    CHECK(memzk_create(zk, "/feature", en, (int)strlen(en), 0, NULL) == 0);
    struct gr_kzk_feature supported[] = {{.name = "g", .min_version = 2, .max_version = 5}};
    struct gr_ctrl_feature_update u[] = {
        {.feature = "", .max_version_level = 1, .upgrade_type = GR_CTRL_UPGRADE}, /* empty name */
        {.feature = "x", .max_version_level = 2, .upgrade_type = GR_CTRL_UPGRADE}, /* not supported */
        {.feature = "f", .max_version_level = 3, .upgrade_type = GR_CTRL_UPGRADE}, /* same value */
        {.feature = "f", .max_version_level = 2, .upgrade_type = GR_CTRL_UPGRADE}, /* downgrade without the flag */
        {.feature = "f", .max_version_level = 4, .upgrade_type = GR_CTRL_SAFE_DOWNGRADE}, /* flag but higher */
        {.feature = "x", .max_version_level = 0, .upgrade_type = GR_CTRL_SAFE_DOWNGRADE}, /* delete a missing one */
        {.feature = "f", .max_version_level = 0, .upgrade_type = GR_CTRL_UPGRADE}, /* < 1 without the flag */
        {.feature = "g", .max_version_level = 1, .upgrade_type = GR_CTRL_UPGRADE}, /* below supported min */
    };
    int n = (int)(sizeof u / sizeof u[0]);
    struct gr_ctrl_feature_result r[8];
    CHECK(gr_ctrl_feature_updates_apply(kzk, supported, 1, u, n, false, r) == 0);
    for (int i = 0; i < n; i++) CHECK(r[i].error == GR_KERR_INVALID_REQUEST && r[i].message[0]);
    CHECK(strstr(r[1].message, "not supported") != NULL);
    CHECK(node_version() == 0); /* nothing valid: no write */

    /* valid: add g at 4, delete f */
    struct gr_ctrl_feature_update ok[] = {
        {.feature = "g", .max_version_level = 4, .upgrade_type = GR_CTRL_UPGRADE},
        {.feature = "f", .max_version_level = 0, .upgrade_type = GR_CTRL_SAFE_DOWNGRADE},
    };
    CHECK(gr_ctrl_feature_updates_apply(kzk, supported, 1, ok, 2, false, r) == 0);
    CHECK(r[0].error == GR_KERR_NONE && r[1].error == GR_KERR_NONE);
    CHECK(node_data() && strcmp(node_data(), "{\"version\":1,\"status\":1,\"features\":{\"g\":{\"min_version_level\":2,"
                                             "\"max_version_level\":4}}}") == 0);
    /* a Kafka 2.7 broker supports nothing: every upgrade is refused */
    struct gr_ctrl_feature_update up = {.feature = "g", .max_version_level = 5, .upgrade_type = GR_CTRL_UPGRADE};
    CHECK(gr_ctrl_feature_updates_apply(kzk, NULL, 0, &up, 1, false, r) == 0);
    CHECK(r[0].error == GR_KERR_INVALID_REQUEST);
    teardown();
}

/* UpdateFeatures v1's upgrade types and ValidateOnly (Kafka 3.9's validateFeatureUpdate). */
static void test_upgrade_types_and_validate_only(void) {
    setup();
    const char *en = "{\"version\":1,\"status\":1,\"features\":{\"f\":{\"min_version_level\":1,\"max_version_level\":3}}}";
    CHECK(memzk_create(zk, "/feature", en, (int)strlen(en), 0, NULL) == 0);
    struct gr_ctrl_feature_update bad[] = {
        {.feature = "f", .max_version_level = 0, .upgrade_type = GR_CTRL_UPGRADE_UNKNOWN}, /* unknown type */
        {.feature = "f", .max_version_level = 0, .upgrade_type = 4},                        /* unknown code */
        {.feature = "f", .max_version_level = 2, .upgrade_type = GR_CTRL_UNSAFE_DOWNGRADE}, /* not SAFE */
        {.feature = "f", .max_version_level = 4, .upgrade_type = GR_CTRL_UNSAFE_DOWNGRADE}, /* not UPGRADE */
    };
    struct gr_ctrl_feature_result r[4];
    CHECK(gr_ctrl_feature_updates_apply(kzk, NULL, 0, bad, 4, false, r) == 0);
    for (int i = 0; i < 4; i++) CHECK(r[i].error == GR_KERR_INVALID_REQUEST);
    CHECK(strstr(r[0].message, "unknown upgrade type") && strstr(r[1].message, "unknown upgrade type"));
    CHECK(node_version() == 0);
    /* an unsafe downgrade below 1 deletes; validate-only answers NONE and writes nothing */
    struct gr_ctrl_feature_update del = {.feature = "f", .max_version_level = 0, .upgrade_type = GR_CTRL_UNSAFE_DOWNGRADE};
    CHECK(gr_ctrl_feature_updates_apply(kzk, NULL, 0, &del, 1, true, r) == 0);
    CHECK(r[0].error == GR_KERR_NONE);
    CHECK(node_version() == 0 && strcmp(node_data(), en) == 0);
    CHECK(gr_ctrl_feature_updates_apply(kzk, NULL, 0, &del, 1, false, r) == 0);
    CHECK(r[0].error == GR_KERR_NONE);
    CHECK(node_version() == 1 && strcmp(node_data(), "{\"version\":1,\"status\":1,\"features\":{}}") == 0);
    teardown();
}

static void test_cache(void) {
    setup();
    struct gr_zk_watches *w = gr_zk_watches_new();
    struct gr_finalized_features *ff = gr_finalized_features_new(kzk, w);
    CHECK(ff != NULL);
    struct gr_arena a;
    gr_arena_init(&a);
    int64_t epoch;
    int n;
    struct gr_finalized_feature *f;
    gr_finalized_features_refresh(ff);
    gr_finalized_features_get(ff, &a, &epoch, &n, &f);
    CHECK(epoch == -1 && n == 0); /* absent */
    const char *en = "{\"version\":1,\"status\":1,\"features\":{\"g\":{\"min_version_level\":2,\"max_version_level\":4}}}";
    CHECK(memzk_create(zk, "/feature", en, (int)strlen(en), 0, NULL) == 0);
    CHECK(memzk_set(zk, "/feature", en, (int)strlen(en), -1, NULL) == 0); /* version 1 */
    gr_finalized_features_refresh(ff);
    gr_finalized_features_get(ff, &a, &epoch, &n, &f);
    CHECK(epoch == 1 && n == 1 && f && strcmp(f[0].name, "g") == 0 && f[0].min_version_level == 2 &&
          f[0].max_version_level == 4);
    const char *dis = "{\"version\":1,\"status\":0,\"features\":{}}";
    CHECK(memzk_set(zk, "/feature", dis, (int)strlen(dis), -1, NULL) == 0);
    gr_finalized_features_refresh(ff);
    gr_finalized_features_get(ff, &a, &epoch, &n, &f);
    CHECK(epoch == -1 && n == 0); /* disabled empties the cache */
    gr_finalized_features_get(NULL, &a, &epoch, &n, &f);
    CHECK(epoch == -1 && n == 0);
    gr_arena_free(&a);
    gr_finalized_features_stop(ff);
    gr_zk_watches_free(w);
    teardown();
}

int main(void) {
    test_setup_creates_enabled();
    test_setup_enables_disabled_node();
    test_setup_disabled();
    test_updates();
    test_upgrade_types_and_validate_only();
    test_cache();
    if (test_failures == 0) printf("ok\n");
    return test_failures != 0;
}
