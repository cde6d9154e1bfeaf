/* ZooKeeper write-path benchmark: what the controller's partition-state writes cost against a
 * real ZooKeeper, without brokers. N state znodes (/brokers/topics/bzwT/partitions/P/state,
 * topics of 100) are created once; then, per configuration, every one of them is rewritten:
 *   kzk B D   gr_kzk_update_partition_states (guarded multis of B-1 conditional setData + the
 *             /controller_epoch check, D in flight) -- the controller's write path
 *   aset W    zoo_aset of every znode, conditional, W in flight, no multi (the floor: what a
 *             client pipelining plain setData gets, like the kazoo reference of bench_failover)
 * Printed per run: wall time, writes/s, this process's CPU (user+sys) and the ZooKeeper
 * server's CPU (-p PID: utime+stime from /proc/PID/stat), both in µs per write.
 * Usage: bench_zkwrite -z HOST:PORT [-n N] [-p ZKPID] [-r ROUNDS] [spec...]
 *        spec: kzk:B:D or aset:W (default: kzk:1000:8 kzk:200:16 kzk:100:32 aset:4096)
 * Built by CMake (build/bench/bench_zkwrite). Prints figures; not a test (exits 1 when a write
 * failed). HOST:PORT may carry a chroot (HOST:PORT/PATH, which must exist). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include "common/log.h"
#include "zk/backend.h"
#include "zk/kzk.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* utime + stime of a process in seconds, -1 when unknown. */
static double proc_cpu_s(int pid) {
    if (pid <= 0) return -1;
    char p[64], buf[2048];
    snprintf(p, sizeof p, "/proc/%d/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *s = strrchr(buf, ')');
    if (!s) return -1;
    unsigned long ut = 0, st = 0;
    /* fields after ')': state(3) ... utime(14) stime(15) */
    if (sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double load1(void) {
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

struct items {
    int n;
    char **topics;
    struct gr_kzk_leader_and_isr *lai;
    int32_t *isr;
    struct gr_kzk_state_write *w;
};

static void items_init(struct items *it, int n) {
    it->n = n;
    int nt = (n + 99) / 100;
    it->topics = calloc((size_t)nt, sizeof(char *));
    for (int t = 0; t < nt; t++) {
        it->topics[t] = malloc(32);
        snprintf(it->topics[t], 32, "bzw%d", t);
    }
    it->lai = calloc((size_t)n, sizeof(*it->lai));
    it->isr = calloc((size_t)n * 3, sizeof(int32_t));
    it->w = calloc((size_t)n, sizeof(*it->w));
    for (int i = 0; i < n; i++) {
        int32_t *isr = &it->isr[i * 3];
        isr[0] = 1 + i % 3;
        isr[1] = 1 + (i + 1) % 3;
        isr[2] = 1 + (i + 2) % 3;
        it->lai[i] = (struct gr_kzk_leader_and_isr){.leader = isr[0], .leader_epoch = 0,
                                                     .controller_epoch = 1, .n_isr = 3, .isr = isr};
        it->w[i] = (struct gr_kzk_state_write){.topic = it->topics[i / 100], .partition = i % 100,
                                               .lai = &it->lai[i]};
    }
}

/* The next write of every item: bump the leader epoch, drop or restore the last ISR member. */
static void items_step(struct items *it) {
    for (int i = 0; i < it->n; i++) {
        it->lai[i].leader_epoch++;
        it->lai[i].n_isr = it->lai[i].n_isr == 3 ? 2 : 3;
    }
}

static int ensure_epoch(struct gr_zk_backend *b, int32_t *ezv) {
    struct gr_zstat st;
    int rc = gr_zkb_create(b, "/controller_epoch", "1", 1, 0, NULL);
    if (rc != GR_ZOK && rc != GR_ZNODEEXISTS) return rc;
    char *d = NULL;
    int len = 0;
    rc = gr_zkb_get(b, "/controller_epoch", false, &d, &len, &st);
    free(d);
    if (rc == GR_ZOK) *ezv = st.version;
    return rc;
}

/* ---- raw pipelined zoo_aset (the floor) ---- */

struct aset_ctx {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int inflight, errors;
    int32_t *versions;
};
struct aset_slot {
    struct aset_ctx *c;
    int i;
};

static void aset_cb(int rc, const struct Stat *st, const void *data) {
    const struct aset_slot *s = data;
    struct aset_ctx *c = s->c;
    pthread_mutex_lock(&c->mu);
    if (rc == ZOK) c->versions[s->i] = st->version;
    else c->errors++;
    c->inflight--;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void zk_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh, (void)type, (void)state, (void)path, (void)ctx;
}

static int run_aset(const char *connect, struct items *it, int window) {
    zhandle_t *zh = zookeeper_init(connect, zk_watcher, 30000, NULL, NULL, 0);
    if (!zh) return -1;
    for (int i = 0; i < 100 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++) usleep(20000);
    struct aset_ctx c = {.inflight = 0};
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    c.versions = calloc((size_t)it->n, sizeof(int32_t));
    struct aset_slot *slots = calloc((size_t)it->n, sizeof(*slots));
    char **paths = calloc((size_t)it->n, sizeof(char *));
    char **jsons = calloc((size_t)it->n, sizeof(char *));
    size_t *lens = calloc((size_t)it->n, sizeof(size_t));
    for (int i = 0; i < it->n; i++) {
        paths[i] = malloc(96);
        snprintf(paths[i], 96, "/brokers/topics/%s/partitions/%d/state", it->w[i].topic,
                 it->w[i].partition);
        jsons[i] = gr_kzk_partition_state_encode(&it->lai[i], &lens[i]);
        slots[i] = (struct aset_slot){.c = &c, .i = i};
    }
    for (int i = 0; i < it->n; i++) {
        pthread_mutex_lock(&c.mu);
        while (c.inflight >= window) pthread_cond_wait(&c.cv, &c.mu);
        c.inflight++;
        pthread_mutex_unlock(&c.mu);
        zoo_aset(zh, paths[i], jsons[i], (int)lens[i], it->lai[i].zk_version, aset_cb, &slots[i]);
    }
    pthread_mutex_lock(&c.mu);
    while (c.inflight > 0) pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
    for (int i = 0; i < it->n; i++) {
        it->lai[i].zk_version = c.versions[i];
        free(paths[i]);
        free(jsons[i]);
    }
    int errors = c.errors;
    free(paths);
    free(jsons);
    free(lens);
    free(slots);
    free(c.versions);
    zookeeper_close(zh);
    return errors;
}

int main(int argc, char **argv) {
    const char *connect = NULL;
    int n = 30000, zkpid = 0, rounds = 1, opt;
    while ((opt = getopt(argc, argv, "z:n:p:r:")) != -1) {
        switch (opt) {
        case 'z': connect = optarg; break;
        case 'n': n = atoi(optarg); break;
        case 'p': zkpid = atoi(optarg); break;
        case 'r': rounds = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: %s -z HOST:PORT [-n N] [-p ZKPID] [-r ROUNDS] [kzk:B:D|aset:W ...]\n",
                    argv[0]);
            return 2;
        }
    }
    if (!connect) {
        fprintf(stderr, "-z HOST:PORT is required\n");
        return 2;
    }
    const char *defaults[] = {"kzk:1000:8", "kzk:200:16", "kzk:100:32", "aset:4096"};
    const char **specs = optind < argc ? (const char **)&argv[optind] : defaults;
    int n_specs = optind < argc ? argc - optind : 4;
    gr_log_set_level(GR_LOG_WARN);
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    struct gr_zk_real_config cfg = {.connect = connect, .session_timeout_ms = 30000,
                                    .connection_timeout_ms = 10000};
    struct gr_zk_backend *b = NULL;
    int rc = gr_zk_real_open(&cfg, &b);
    if (rc != GR_ZOK) {
        fprintf(stderr, "connect %s: %s\n", connect, gr_zrc_name(rc));
        return 1;
    }
    struct gr_kzk *k = gr_kzk_new(b);
    gr_kzk_ensure_paths(k);
    int32_t ezv = 0;
    if ((rc = ensure_epoch(b, &ezv)) != GR_ZOK) {
        fprintf(stderr, "/controller_epoch: %s\n", gr_zrc_name(rc));
        return 1;
    }
    struct items it;
    items_init(&it, n);
    /* Create the topics' znodes (parents) and the states; existing ones are read back. */
    double t0 = now_s();
    for (int t = 0; t < (n + 99) / 100; t++) {
        char p[64];
        snprintf(p, sizeof p, "/brokers/topics/%s", it.topics[t]);
        gr_zkb_create(b, p, NULL, 0, 0, NULL);
    }
    struct gr_kzk_write_result *wr = calloc((size_t)n, sizeof(*wr));
    gr_kzk_create_partition_states(k, ezv, it.w, n, wr);
    struct gr_kzk_tp *tps = calloc((size_t)n, sizeof(*tps));
    for (int i = 0; i < n; i++) tps[i] = (struct gr_kzk_tp){.topic = (char *)it.w[i].topic, .partition = it.w[i].partition};
    struct gr_kzk_state_result *sr = calloc((size_t)n, sizeof(*sr));
    gr_kzk_get_partition_states(k, tps, n, sr);
    for (int i = 0; i < n; i++) {
        it.lai[i].zk_version = sr[i].rc ? 0 : sr[i].lai.zk_version;
        free(sr[i].lai.isr);
    }
    free(sr);
    free(tps);
    printf("# %d state znodes ready in %.2f s (load %.2f)\n", n, now_s() - t0, load1());
    printf("%-14s %6s %9s %10s %12s %12s %6s %6s\n", "spec", "round", "wall_ms", "writes/s",
           "cli_us/write", "zk_us/write", "errors", "load");
    int failed = 0;
    for (int r = 0; r < rounds; r++) {
        for (int s = 0; s < n_specs; s++) {
            int bsz = 1000, depth = 8, window = 4096;
            bool aset = strncmp(specs[s], "aset", 4) == 0;
            if (aset) sscanf(specs[s], "aset:%d", &window);
            else sscanf(specs[s], "kzk:%d:%d", &bsz, &depth);
            items_step(&it);
            double c0 = cpu_s(), z0 = proc_cpu_s(zkpid), w0 = now_s();
            int errors = 0;
            if (aset) {
                errors = run_aset(connect, &it, window);
            } else {
                gr_kzk_set_batch_size(k, bsz);
                gr_kzk_set_pipeline_depth(k, depth);
                rc = gr_kzk_update_partition_states(k, ezv, it.w, n, wr);
                for (int i = 0; i < n; i++) {
                    if (rc || wr[i].rc) errors++;
                    else it.lai[i].zk_version = wr[i].zk_version;
                }
            }
            double w = now_s() - w0, c = cpu_s() - c0, z1 = proc_cpu_s(zkpid);
            printf("%-14s %6d %9.0f %10.0f %12.2f %12.2f %6d %6.2f\n", specs[s], r, w * 1e3, n / w,
                   c * 1e6 / n, z0 >= 0 ? (z1 - z0) * 1e6 / n : -1.0, errors, load1());
            fflush(stdout);
            failed |= errors != 0;
        }
    }
    free(wr);
    gr_kzk_free(k);
    gr_zkb_destroy(b);
    return failed ? 1 : 0;
}
