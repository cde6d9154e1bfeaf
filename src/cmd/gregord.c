/* gregord: one Gregor broker process.
 *
 *   gregord CONFIG [--override key=value ...]
 *
 * Configuration: Kafka's defaults, then the server.properties file CONFIG, then the overrides in
 * order, then the cross-key checks. An invalid configuration prints "gregord: <message naming
 * the key>" and exits 2. SIGTERM / SIGINT shut the broker down cleanly (exit 0). A broker.id
 * already registered by another live broker, or any other start-up failure, exits 1. Without
 * broker.id the server's start-up fills cfg.broker_id in (broker/broker_id.h). While
 * running, the metrics are written to <first log dir>/gregor-metrics.json every 2 seconds. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "broker/server.h"
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "replication/replica_manager.h"
#include "storage/checkpoint.h"

#define METRICS_INTERVAL_S 2

static void usage(void) {
    fprintf(stderr, "usage: gregord CONFIG [--override key=value ...]\n");
}

/* Applies one "key=value" override. Returns 0 or GR_ECONFIG with err filled. */
static int apply_override(struct gr_config *cfg, const char *kv, char *err, size_t errlen) {
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv) {
        snprintf(err, errlen, "invalid override '%s': expected key=value", kv);
        return GR_ECONFIG;
    }
    char *key = gr_strndup(kv, (size_t)(eq - kv));
    int rc = gr_config_set(cfg, key, eq + 1, err, errlen);
    free(key);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage();
        return 2;
    }
    gr_rm_malloc_policy(); /* memory per partition (issue 14): before any thread starts */
    /* Partition logs keep files open: use the whole descriptor allowance, as Kafka's start
     * scripts expect operators to raise it. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct gr_config cfg;
    char err[1024];
    gr_config_defaults(&cfg);
    if (gr_config_load_file(&cfg, argv[1], err, sizeof err) != 0) {
        fprintf(stderr, "gregord: %s\n", err);
        gr_config_release(&cfg);
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        const char *kv = NULL;
        if (strcmp(argv[i], "--override") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "gregord: --override needs key=value\n");
                gr_config_release(&cfg);
                return 2;
            }
            kv = argv[++i];
        } else if (strncmp(argv[i], "--override=", 11) == 0) {
            kv = argv[i] + 11;
        } else {
            fprintf(stderr, "gregord: unknown argument '%s'\n", argv[i]);
            usage();
            gr_config_release(&cfg);
            return 2;
        }
        if (apply_override(&cfg, kv, err, sizeof err) != 0) {
            fprintf(stderr, "gregord: %s\n", err);
            gr_config_release(&cfg);
            return 2;
        }
    }
    if (gr_config_finish(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "gregord: %s\n", err);
        gr_config_release(&cfg);
        return 2;
    }

    /* Signals are taken synchronously by the main thread only: block them before any thread. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct gr_server *srv = gr_server_new(&cfg);
    int rc = gr_server_startup(srv);
    if (rc != 0) {
        if (rc == GR_SERVER_EREGISTERED)
            fprintf(stderr, "gregord: broker.id %d is already registered\n", cfg.broker_id);
        else if (rc == GR_EMETA_BROKER_ID)
            fprintf(stderr, "gregord: start-up failed: broker.id does not match meta.properties (see above)\n");
        else if (rc == GR_EMETA_CLUSTER_ID)
            fprintf(stderr, "gregord: start-up failed: cluster.id does not match meta.properties (see above)\n");
        else
            fprintf(stderr, "gregord: start-up failed: %s\n", gr_kzk_strerror(rc));
        gr_server_free(srv);
        gr_config_release(&cfg);
        return 1;
    }

    gr_server_dump_metrics(srv);
    for (;;) {
        struct timespec ts = {.tv_sec = METRICS_INTERVAL_S, .tv_nsec = 0};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT) {
            gr_info("kafka.Kafka", "Received signal %s, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            break;
        }
        if (sig < 0 && errno != EAGAIN && errno != EINTR) break;
        int mrc = gr_server_dump_metrics(srv);
        if (mrc != 0) gr_warn("kafka.Kafka", "Cannot write the metrics file: %s", gr_strerror(mrc));
    }
    gr_server_shutdown(srv);
    gr_server_dump_metrics(srv);
    gr_server_free(srv);
    gr_config_release(&cfg);
    return 0;
}
