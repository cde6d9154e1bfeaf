/* Logging in the spirit of Kafka's server.log and state-change.log.
 *
 * Lines go to stderr (or the file given to gr_log_open) as
 *   [2026-11-29 22:19:23,123] INFO [Controller id=1 epoch=3] message (subsystem)
 * gr_log_*() may be called from any thread; lines are never split or interleaved, and reach the
 * output in the order they were logged. WARN and ERROR lines, any line logged more than 1 ms
 * after the previous one, and the first 64 lines of a burst are written at once (one write(2),
 * after the buffered lines); the further DEBUG and INFO lines of a burst (lines less than 1 ms
 * apart: the controller logging one state change per partition) are gathered in a 256 KiB buffer that a flusher thread writes 10 ms after its first
 * line, or that the line filling it writes: a burst of 300k INFO lines costs ~500 write(2) calls
 * instead of 300k. Buffered lines are flushed at exit() and before every WARN/ERROR line; a crash
 * (abort, _exit, SIGKILL) can lose the last 10 ms of a burst of INFO lines, never an error.
 * The state-change log is the same stream with the logger name "state.change.logger". */
#ifndef GR_LOG_H
#define GR_LOG_H

#include <stdarg.h>
#include <stdbool.h>

enum gr_log_level { GR_LOG_DEBUG = 0, GR_LOG_INFO = 1, GR_LOG_WARN = 2, GR_LOG_ERROR = 3 };

/* Sets the minimum level printed (default INFO; GREGOR_LOG_LEVEL=debug in the environment
 * lowers it). GR_LOG_ERROR + 1 prints nothing (tests and fuzz targets silence the log so; the
 * log controller describes that level as FATAL). */
void gr_log_set_level(enum gr_log_level lvl);
/* The level set (root's: loggers with a level of their own are in common/log_controller.h). */
enum gr_log_level gr_log_level(void);
/* Whether lines of level lvl are printed by some logger (callers skip work done only for such
 * lines). */
bool gr_log_enabled(enum gr_log_level lvl);
/* Sends lines to `path` (appended) instead of stderr. Returns 0 or -errno. */
int gr_log_open(const char *path);
/* A prefix prepended to every line, e.g. "[KafkaServer id=1]". Copied. */
void gr_log_set_prefix(const char *prefix);

/* Writes the buffered lines now. */
void gr_log_flush(void);
/* How many write(2) calls the logger has made (for tests and benchmarks). */
long gr_log_write_count(void);

void gr_log(enum gr_log_level lvl, const char *logger, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void gr_vlog(enum gr_log_level lvl, const char *logger, const char *fmt, va_list ap);

#define gr_debug(logger, ...) gr_log(GR_LOG_DEBUG, logger, __VA_ARGS__)
#define gr_info(logger, ...) gr_log(GR_LOG_INFO, logger, __VA_ARGS__)
#define gr_warn(logger, ...) gr_log(GR_LOG_WARN, logger, __VA_ARGS__)
#define gr_error(logger, ...) gr_log(GR_LOG_ERROR, logger, __VA_ARGS__)

#endif
