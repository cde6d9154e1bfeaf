#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int g_fd = 2;
static int g_level = -1;
static char g_prefix[128];

static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

static int current_level(void) {
    if (g_level < 0) {
        const char *env = getenv("GREGOR_LOG_LEVEL");
        g_level = (env && strcasecmp(env, "debug") == 0) ? GR_LOG_DEBUG : GR_LOG_INFO;
    }
    return g_level;
}

void gr_log_set_level(enum gr_log_level lvl) { g_level = (int)lvl; }

void gr_log_set_prefix(const char *prefix) {
    snprintf(g_prefix, sizeof g_prefix, "%s", prefix ? prefix : "");
}

int gr_log_open(const char *path) {
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    g_fd = fd;
    return 0;
}

void gr_vlog(enum gr_log_level lvl, const char *logger, const char *fmt, va_list ap) {
    if ((int)lvl < current_level()) return;
    char line[4096];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "[%04d-%02d-%02d %02d:%02d:%02d,%03d] %s %s%s", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000),
                     level_names[lvl], g_prefix, g_prefix[0] ? " " : "");
    if (n < 0) return;
    if ((size_t)n < sizeof line) {
        int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        if (m > 0) n += m;
    }
    if ((size_t)n >= sizeof line - 32) n = (int)sizeof line - 32;
    if (logger) n += snprintf(line + n, sizeof line - (size_t)n, " (%s)", logger);
    line[n++] = '\n';
    ssize_t w = write(g_fd, line, (size_t)n);
    (void)w;
}

void gr_log(enum gr_log_level lvl, const char *logger, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    gr_vlog(lvl, logger, fmt, ap);
    va_end(ap);
}
