/* Storage-only benchmark: what N empty partition logs cost in the log manager, without brokers,
 * ZooKeeper or the network. Phases (each printed with wall time, CPU time of this process and
 * heap growth from mallinfo2):
 *   create   N logs through gr_plog_manager_get_or_create, as a broker applying LeaderAndIsr does
 *            (-D: and each log's directory, as its first write would make it: since b5793f0 a new log
 *            has no directory until then, so without -D nothing is on disk and open loads 0 logs)
 *   close    gr_plog_manager_close (a clean shutdown: flush, checkpoints, close)
 *   open     gr_plog_manager_open over the same directory (start-up with N existing logs)
 *   close    again
 * Usage: bench_logs [-n N] [-d DIR] [-D]
 * Built by CMake (build/bench/bench_logs). Run under `strace -f -c` for syscall counts. Exits 1
 * when a phase fails or (-D) open does not find the N logs. */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "storage/log.h"
#include "storage/log_manager.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec / 1e6;
}

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

struct mark {
    double wall, cpu;
    size_t heap;
    long rss;
};

static struct mark mark(void) {
    struct mallinfo2 mi = mallinfo2();
    return (struct mark){now_s(), cpu_s(), mi.uordblks + mi.hblkhd, rss_kib()};
}

static void report(const char *what, int n, struct mark a, struct mark b) {
    double wall = b.wall - a.wall, cpu = b.cpu - a.cpu;
    printf("%-8s %7d logs  wall %7.3f s  cpu %7.3f s  %9.0f logs/s (cpu)  heap %+9.1f KiB (%+.0f B/log)  rss %+ld KiB\n",
           what, n, wall, cpu, cpu > 0 ? n / cpu : 0, ((double)b.heap - (double)a.heap) / 1024.0,
           ((double)b.heap - (double)a.heap) / (n ? n : 1), b.rss - a.rss);
    fflush(stdout);
}

int main(int argc, char **argv) {
    int n = 10000;
    const char *dir = NULL;
    int mkdirs = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) n = atoi(argv[++i]);
        else if (strcmp(argv[i], "-d") == 0 && i + 1 < argc) dir = argv[++i];
        else if (strcmp(argv[i], "-D") == 0) mkdirs = 1;
        else {
            fprintf(stderr, "usage: %s [-n N] [-d DIR] [-D]\n", argv[0]);
            return 2;
        }
    }
    char tmp[] = "/tmp/bench_logs.XXXXXX";
    if (!dir) {
        if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
        dir = tmp;
    }
    gr_log_set_level(GR_LOG_WARN);
    struct gr_config cfg;
    gr_config_defaults(&cfg);
    char err[256];
    if (gr_config_set(&cfg, "log.dirs", dir, err, sizeof err) < 0 ||
        gr_config_set(&cfg, "zookeeper.connect", "127.0.0.1:1", err, sizeof err) < 0 || gr_config_set(&cfg, "broker.id", "1", err, sizeof err) < 0 || gr_config_finish(&cfg, err, sizeof err) < 0) {
        fprintf(stderr, "config: %s\n", err);
        return 1;
    }
    struct gr_plog_manager *lm = NULL;
    if (gr_plog_manager_open(&cfg, 1, "bench", &lm) < 0) return fprintf(stderr, "open failed\n"), 1;
    struct mark m1 = mark();
    char topic[64];
    for (int i = 0; i < n; i++) {
        snprintf(topic, sizeof topic, "bench-%05d", i / 100);
        struct gr_lm_log *l = NULL;
        int rc = gr_plog_manager_get_or_create(lm, topic, i % 100, NULL, &l);
        if (rc < 0) return fprintf(stderr, "create %d: %d\n", i, rc), 1;
        /* Starting the log at offset 1 writes into its directory, which makes it (log.c). */
        if (mkdirs && (rc = gr_plog_truncate_fully_and_start_at(l->log, 1)) < 0)
            return fprintf(stderr, "directory of log %d: %d\n", i, rc), 1;
        gr_plog_manager_release(lm, l);
    }
    struct mark m2 = mark();
    report("create", n, m1, m2);
    gr_plog_manager_close(lm);
    struct mark m3 = mark();
    report("close", n, m2, m3);
    lm = NULL;
    if (gr_plog_manager_open(&cfg, 1, "bench", &lm) < 0) return fprintf(stderr, "reopen failed\n"), 1;
    struct mark m4 = mark();
    int opened = gr_plog_manager_count(lm);
    report("open", opened, m3, m4);
    gr_plog_manager_close(lm);
    struct mark m5 = mark();
    report("close", n, m4, m5);
    gr_config_release(&cfg);
    int status = 0;
    if (mkdirs && opened != n) {
        fprintf(stderr, "open found %d logs, created %d\n", opened, n);
        status = 1;
    }
    if (dir == tmp) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
        if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tmp);
    }
    return status;
}
