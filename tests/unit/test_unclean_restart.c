/* The restart gap after an unclean death (broker/unclean_restart.h) does not end on a read it
 * could not make: a partition state whose read fails (ZooKeeper refusing or losing the
 * connection for that one znode of the batch) may still list this broker in a shared ISR, so it
 * counts as unknown and the broker keeps waiting, instead of counting as "not listed" and
 * registering while the controller still holds it in the ISR (it could then be kept or made
 * leader over its shorter log).
 *
 * Over an in-memory ZooKeeper whose batched gets of one partition state fail for the first
 * passes; the "controller" takes broker 1 out of that ISR on a later pass. The wait must return
 * only after that. No clock assertion. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/unclean_restart.h"
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "support/check.h"
#include "support/memzk.h"
#include "zk/kzk.h"

#define LISTED "/brokers/topics/b/partitions/0/state"

static struct memzk *g_zk;
static const struct gr_zk_backend_ops *mem_ops;
static struct gr_zk_backend_ops faulty_ops;
static int g_calls;      /* batched gets so far */
static bool g_handled;   /* the "controller" took broker 1 out of b-0's ISR */

static void put(const char *path, const char *json) {
    if (memzk_set(g_zk, path, json, (int)strlen(json), -1, NULL) == GR_ZNONODE) {
        char *p = gr_strdup(path);
        for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
            *s = 0;
            (void)memzk_create(g_zk, p, NULL, 0, 0, NULL);
            *s = '/';
        }
        free(p);
        CHECK(memzk_create(g_zk, path, json, (int)strlen(json), 0, NULL) == GR_ZOK);
    }
}

static int f_get_many(struct gr_zk_backend *b, const char *const *paths, int n, bool watch,
                      struct gr_zget_result *res) {
    if (++g_calls == 4) { /* the controller handles the death */
        put(LISTED, "{\"controller_epoch\":2,\"leader\":2,\"version\":1,\"leader_epoch\":2,\"isr\":[2]}");
        g_handled = true;
    }
    int rc = mem_ops->get_many(b, paths, n, watch, res);
    for (int i = 0; i < n; i++)
        if (g_calls < 4 && strcmp(paths[i], LISTED) == 0) {
            free(res[i].data);
            res[i].data = NULL;
            res[i].len = 0;
            res[i].rc = GR_ZNOAUTH;
        }
    return rc;
}

int main(void) {
    gr_log_set_level(GR_LOG_ERROR);
    struct gr_config cfg;
    gr_config_defaults(&cfg);
    char dir[256], sub[300];
    snprintf(dir, sizeof dir, "/tmp/gr-test-uncleanrestart-%d", (int)getpid());
    CHECK(mkdir(dir, 0755) == 0);
    snprintf(sub, sizeof sub, "%s/a-0", dir);
    CHECK(mkdir(sub, 0755) == 0);
    snprintf(sub, sizeof sub, "%s/b-0", dir);
    CHECK(mkdir(sub, 0755) == 0);
    free(cfg.log_dirs[0]);
    cfg.log_dirs[0] = gr_strdup(dir);
    cfg.num_log_dirs = 1;

    g_zk = memzk_new(6000);
    mem_ops = g_zk->base.ops;
    faulty_ops = *mem_ops;
    faulty_ops.get_many = f_get_many;
    g_zk->base.ops = &faulty_ops;
    struct gr_kzk *kzk = gr_kzk_new(&g_zk->base);
    CHECK(gr_kzk_ensure_paths(kzk) == 0);
    put("/brokers/ids/2", "{}"); /* another broker is registered: the death will be handled */
    put("/brokers/topics/a/partitions/0/state",
        "{\"controller_epoch\":1,\"leader\":2,\"version\":1,\"leader_epoch\":1,\"isr\":[2,3]}");
    put(LISTED, "{\"controller_epoch\":1,\"leader\":1,\"version\":1,\"leader_epoch\":1,\"isr\":[1,2]}");

    int left = gr_unclean_restart_wait(kzk, &cfg, 1, 600000);
    CHECKF(g_handled, "registered after %d pass(es) while b-0's state could not be read (it lists broker 1)",
           g_calls);
    CHECK(left == 0);

    gr_kzk_free(kzk);
    memzk_free(g_zk);
    gr_config_release(&cfg);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
    if (test_failures) {
        fprintf(stderr, "test_unclean_restart: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_unclean_restart: ok\n");
    return 0;
}
