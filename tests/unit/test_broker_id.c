/* The start-up broker id (broker/broker_id.h, Kafka 2.7's KafkaServer.getOrGenerateBrokerId):
 * configured, stored in the log dirs' meta.properties, or generated from /brokers/seqid; the
 * conflicts that stop a broker. Log dirs in a temporary directory, the in-memory ZooKeeper. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/broker_id.h"
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "storage/checkpoint.h"
#include "support/check.h"
#include "support/memzk.h"
#include "zk/kzk.h"

static char root[] = "/tmp/gr_broker_id_test_XXXXXX";
static int ncase;

static struct memzk *zk;
static struct gr_kzk *kzk;

static int seqid_version(void) {
    int i = memzk_find(zk, "/brokers/seqid");
    return i < 0 ? -1 : zk->v[i].st.version;
}

/* A config with two fresh (empty) log dirs of case n, broker.id = id and the other two keys as
 * given (NULL: default). dirs[] get the two paths (gr_malloc'd). */
static void make_config(struct gr_config *c, char *dirs[2], const char *id, const char *generation,
                        const char *reserved) {
    char err[256];
    ncase++;
    dirs[0] = gr_asprintf("%s/c%d-a", root, ncase);
    dirs[1] = gr_asprintf("%s/c%d-b", root, ncase);
    CHECK(mkdir(dirs[0], 0755) == 0 && mkdir(dirs[1], 0755) == 0);
    char *list = gr_asprintf("%s,%s", dirs[0], dirs[1]);
    gr_config_defaults(c);
    CHECK(gr_config_set(c, "log.dirs", list, err, sizeof err) == 0);
    if (id) CHECK(gr_config_set(c, "broker.id", id, err, sizeof err) == 0);
    if (generation) CHECK(gr_config_set(c, "broker.id.generation.enable", generation, err, sizeof err) == 0);
    if (reserved) CHECK(gr_config_set(c, "reserved.broker.max.id", reserved, err, sizeof err) == 0);
    free(list);
}

static void store(const char *dir, int32_t id) {
    struct gr_meta_properties mp = {.version = 0, .broker_id = id};
    CHECK(gr_meta_properties_write(dir, &mp) == 0);
}

/* Runs the resolution; returns its code, *out the id (-100 if not set). */
static int resolve(const char *id, const char *generation, const char *reserved, int32_t stored_a, int32_t stored_b,
                   int32_t *out) {
    struct gr_config c;
    char *dirs[2];
    make_config(&c, dirs, id, generation, reserved);
    if (stored_a >= 0) store(dirs[0], stored_a);
    if (stored_b >= 0) store(dirs[1], stored_b);
    *out = -100;
    int rc = gr_broker_id_resolve(&c, kzk, out);
    gr_config_release(&c);
    free(dirs[0]);
    free(dirs[1]);
    return rc;
}

static void test_generated(void) {
    int32_t id;
    /* fresh cluster: /brokers/seqid is created and bumped; ids follow reserved.broker.max.id */
    CHECK(resolve(NULL, NULL, NULL, -1, -1, &id) == 0 && id == 1001);
    CHECK(seqid_version() == 1);
    CHECK(resolve("-1", NULL, NULL, -1, -1, &id) == 0 && id == 1002);
    CHECK(resolve(NULL, NULL, "5000", -1, -1, &id) == 0 && id == 5003);
    CHECK(seqid_version() == 3);
}

static void test_configured_and_stored(void) {
    int32_t id;
    int before = seqid_version();
    /* configured, nothing stored */
    CHECK(resolve("5", NULL, NULL, -1, -1, &id) == 0 && id == 5);
    CHECK(resolve("5", "false", NULL, -1, -1, &id) == 0 && id == 5);
    /* stored in one dir, the other empty: used when broker.id is -1, also with generation off */
    CHECK(resolve(NULL, NULL, NULL, 7, -1, &id) == 0 && id == 7);
    CHECK(resolve(NULL, NULL, NULL, -1, 7, &id) == 0 && id == 7);
    CHECK(resolve("-1", "false", NULL, 7, -1, &id) == 0 && id == 7);
    /* stored above reserved.broker.max.id (a generated id) */
    CHECK(resolve(NULL, NULL, NULL, 1001, 1001, &id) == 0 && id == 1001);
    /* configured and stored agree */
    CHECK(resolve("7", NULL, NULL, 7, 7, &id) == 0 && id == 7);
    CHECK(seqid_version() == before); /* none of these generated an id */
}

static void test_conflicts(void) {
    int32_t id;
    int before = seqid_version();
    /* configured vs stored */
    CHECK(resolve("5", NULL, NULL, 7, -1, &id) == GR_EMETA_BROKER_ID && id == -100);
    CHECK(resolve("5", NULL, NULL, 7, 7, &id) == GR_EMETA_BROKER_ID);
    /* dirs disagree, whatever is configured */
    CHECK(resolve(NULL, NULL, NULL, 7, 8, &id) == GR_EMETA_BROKER_ID && id == -100);
    CHECK(resolve("7", NULL, NULL, 7, 8, &id) == GR_EMETA_BROKER_ID);
    CHECK(seqid_version() == before);

    /* an unreadable meta.properties */
    struct gr_config c;
    char *dirs[2];
    make_config(&c, dirs, NULL, NULL, NULL);
    char *path = gr_asprintf("%s/%s", dirs[1], GR_META_PROPERTIES);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("version=0\nbroker.id=abc\n", f);
        fclose(f);
    }
    CHECK(gr_broker_id_resolve(&c, kzk, &id) == GR_ECORRUPT);
    free(path);
    gr_config_release(&c);
    free(dirs[0]);
    free(dirs[1]);

    /* no id anywhere and generation off (gr_config_finish refuses such a config) */
    CHECK(resolve(NULL, "false", NULL, -1, -1, &id) == GR_ECONFIG);
    CHECK(seqid_version() == before);
}

int main(void) {
    gr_log_set_level(GR_LOG_WARN); /* the conflicts below log their errors on purpose */
    if (!mkdtemp(root)) return 1;
    zk = memzk_new(6000);
    kzk = gr_kzk_new(&zk->base);
    test_generated();
    test_configured_and_stored();
    test_conflicts();
    gr_kzk_free(kzk);
    memzk_free(zk);
    char *cmd = gr_asprintf("rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", root);
    free(cmd);
    if (test_failures) {
        fprintf(stderr, "test_broker_id: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_broker_id: ok\n");
    return 0;
}
