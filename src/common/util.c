#include "common/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t gr_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t gr_mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t gr_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec gr_timespec_after_ms(clockid_t clock, int64_t ms) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    if (ms < 0) ms = 0;
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

uint64_t gr_str_hash(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

long gr_rss_pages(void) {
    FILE *f = fopen("/proc/self/statm", "re");
    long size = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &rss) != 2) rss = 0;
        fclose(f);
    }
    return rss;
}

long gr_rss_kib(void) { return gr_rss_pages() * (sysconf(_SC_PAGESIZE) / 1024); }

static void oom(size_t n) {
    fprintf(stderr, "gregor: out of memory allocating %zu bytes\n", n);
    abort();
}

void *gr_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}

void *gr_calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) oom(n * size);
    return p;
}

void *gr_realloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    return q;
}

char *gr_strdup(const char *s) {
    size_t n = strlen(s);
    char *d = gr_malloc(n + 1);
    memcpy(d, s, n + 1);
    return d;
}

char *gr_strndup(const char *s, size_t n) {
    char *d = gr_malloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *gr_asprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *out = NULL;
    int n = vasprintf(&out, fmt, ap);
    va_end(ap);
    if (n < 0) oom(0);
    return out;
}

const char *gr_strerror(int rc) {
    switch (rc) {
    case 0: return "success";
    case GR_ECONTROLLER_MOVED: return "controller moved (controller epoch zkVersion changed)";
    case GR_EZK: return "ZooKeeper operation failed";
    case GR_ECORRUPT: return "corrupt data";
    case GR_ECONFIG: return "invalid configuration";
    case GR_ECLOSED: return "closed";
    case GR_ETIMEOUT: return "timed out";
    case GR_EPROTO: return "malformed protocol data";
    }
    if (rc < 0 && rc > -4096) return strerror(-rc);
    return "unknown error";
}
