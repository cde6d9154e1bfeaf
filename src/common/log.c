#include "common/log.h"

#include "common/log_controller.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* Output (see log.h): a WARN or ERROR line, or a line logged more than BURST_NS after the
 * previous one, is written at once, and so are the first BURST_LINES lines of a burst (a few lines
 * of one request or event reach the file before its answer); a later DEBUG/INFO line of the burst
 * goes to a shared buffer, which the flusher thread writes HOLD_MS after its first line (or whoever
 * fills it writes it). The buffer is only used while it is non-empty or a burst is on, so a line
 * never overtakes an earlier one. */
#define BURST_NS 1000000LL      /* 1 ms */
#define BURST_LINES 64
#define HOLD_MS 10
#define BUF_CAP (256 * 1024)

static int g_fd = 2;
static int g_level = -1;
static char g_prefix[128];

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv;
static char *g_buf;
static size_t g_len;
static int64_t g_last_ns = INT64_MIN / 2; /* monotonic time of the previous line */
static long g_burst_lines;                /* lines of the current burst before this one */
static bool g_flusher;                    /* the flusher thread runs (or could not be started: false) */
static bool g_flusher_failed;
static atomic_long g_writes;

static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

static int current_level(void) {
    if (g_level < 0) {
        const char *env = getenv("GREGOR_LOG_LEVEL");
        g_level = (env && strcasecmp(env, "debug") == 0) ? GR_LOG_DEBUG : GR_LOG_INFO;
    }
    return g_level;
}

void gr_log_set_level(enum gr_log_level lvl) { g_level = (int)lvl; }

enum gr_log_level gr_log_level(void) { return (enum gr_log_level)current_level(); }

bool gr_log_enabled(enum gr_log_level lvl) {
    int low = gr_log_lowest_override(); /* a logger set below root (log_controller.h) */
    return (int)lvl >= current_level() || (low >= 0 && (int)lvl >= low);
}

void gr_log_set_prefix(const char *prefix) {
    snprintf(g_prefix, sizeof g_prefix, "%s", prefix ? prefix : "");
}

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Writes p[0..n) to the log fd (g_mu held). */
static void write_all(const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(g_fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            break;
        }
        p += w;
        n -= (size_t)w;
    }
    atomic_fetch_add(&g_writes, 1);
}

static void flush_locked(void) {
    if (g_len == 0) return;
    write_all(g_buf, g_len);
    g_len = 0;
}

void gr_log_flush(void) {
    pthread_mutex_lock(&g_mu);
    flush_locked();
    pthread_mutex_unlock(&g_mu);
}

long gr_log_write_count(void) { return atomic_load(&g_writes); }

static void *flusher_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&g_mu);
    for (;;) {
        while (g_len == 0) pthread_cond_wait(&g_cv, &g_mu);
        struct timespec dl = gr_timespec_after_ms(CLOCK_MONOTONIC, HOLD_MS);
        while (g_len > 0 && pthread_cond_timedwait(&g_cv, &g_mu, &dl) != ETIMEDOUT) {
        }
        flush_locked();
    }
    return NULL;
}

/* Starts the flusher thread on first use (g_mu held). Returns whether it runs. The thread takes
 * no signals (gregord waits for SIGTERM in its main thread with them blocked). */
static bool flusher_running_locked(void) {
    if (g_flusher || g_flusher_failed) return g_flusher;
    g_buf = malloc(BUF_CAP);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cv, &ca);
    pthread_condattr_destroy(&ca);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    bool ok = g_buf && pthread_create(&t, &a, flusher_main, NULL) == 0;
    pthread_attr_destroy(&a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!ok) {
        g_flusher_failed = true;
        return false;
    }
#ifdef __linux__
    pthread_setname_np(t, "log-flush");
#endif
    atexit(gr_log_flush);
    g_flusher = true;
    return true;
}

static void emit(enum gr_log_level lvl, const char *line, size_t n) {
    int64_t now = mono_ns();
    pthread_mutex_lock(&g_mu);
    bool burst = now - g_last_ns < BURST_NS;
    g_burst_lines = burst ? g_burst_lines + 1 : 0;
    if (g_burst_lines < BURST_LINES) burst = false;
    g_last_ns = now;
    if (lvl >= GR_LOG_WARN) { /* never held: a warning or error must survive a crash just after it */
        flush_locked();
        write_all(line, n);
    } else if (g_len == 0 && (!burst || !flusher_running_locked())) {
        write_all(line, n);
    } else {
        if (g_len + n > BUF_CAP) flush_locked();
        bool was_empty = g_len == 0;
        memcpy(g_buf + g_len, line, n);
        g_len += n;
        if (was_empty) pthread_cond_signal(&g_cv);
    }
    pthread_mutex_unlock(&g_mu);
}

int gr_log_open(const char *path) {
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    pthread_mutex_lock(&g_mu);
    flush_locked();
    g_fd = fd;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

/* "[2026-11-29 22:19:23," for tv_sec, formatted once per second per thread. */
static const char *date_prefix(time_t sec) {
    static __thread time_t t_sec = (time_t)-1;
    static __thread char t_buf[96];
    if (sec != t_sec) {
        struct tm tm;
        localtime_r(&sec, &tm);
        snprintf(t_buf, sizeof t_buf, "[%04d-%02d-%02d %02d:%02d:%02d,", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                 tm.tm_hour, tm.tm_min, tm.tm_sec);
        t_sec = sec;
    }
    return t_buf;
}

void gr_vlog(enum gr_log_level lvl, const char *logger, const char *fmt, va_list ap) {
    int own = logger ? gr_log_logger_level(logger) : -1; /* a level of its own (KIP-412), or root's */
    if ((int)lvl < (own >= 0 ? own : current_level())) return;
    char line[4096];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    int n = snprintf(line, sizeof line, "%s%03d] %s %s%s", date_prefix(tv.tv_sec), (int)(tv.tv_usec / 1000),
                     level_names[lvl], g_prefix, g_prefix[0] ? " " : "");
    if (n < 0) return;
    if ((size_t)n < sizeof line) {
        int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        if (m > 0) n += m;
    }
    if ((size_t)n >= sizeof line - 32) n = (int)sizeof line - 32;
    if (logger) n += snprintf(line + n, sizeof line - (size_t)n, " (%s)", logger);
    line[n++] = '\n';
    emit(lvl, line, (size_t)n);
}

void gr_log(enum gr_log_level lvl, const char *logger, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    gr_vlog(lvl, logger, fmt, ap);
    va_end(ap);
}
