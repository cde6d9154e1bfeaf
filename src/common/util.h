/* Small helpers shared by every subsystem: clocks, allocation that aborts on OOM, errors. */
#ifndef GR_UTIL_H
#define GR_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define GR_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define GR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define GR_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Project error codes: functions return 0, a negative errno, or one of these (all < -1000
 * so they never collide with errno values). Kafka error codes are a separate domain (kerr.h). */
enum {
    GR_ECONTROLLER_MOVED = -1001, /* a guarded ZooKeeper write found /controller_epoch changed */
    GR_EZK = -1002,               /* a ZooKeeper call failed (details logged) */
    GR_ECORRUPT = -1003,          /* bytes from disk or network failed validation */
    GR_ECONFIG = -1004,           /* invalid configuration */
    GR_ECLOSED = -1005,           /* the object is shutting down */
    GR_ETIMEOUT = -1006,
    GR_EPROTO = -1007,            /* malformed protocol data */
};

/* Milliseconds on CLOCK_MONOTONIC (for timeouts and durations). */
int64_t gr_mono_ms(void);
/* Microseconds on CLOCK_MONOTONIC. */
int64_t gr_mono_us(void);
/* Milliseconds since the Unix epoch (for timestamps written anywhere). */
int64_t gr_wall_ms(void);
/* The time `ms` milliseconds from now on `clock` (negative counts as 0): the absolute deadline
 * that pthread_cond_timedwait wants (CLOCK_REALTIME unless the condvar was set to another). */
struct timespec gr_timespec_after_ms(clockid_t clock, int64_t ms);

/* FNV-1a (64-bit) of a NUL-terminated string: the hash of the name-keyed tables. */
uint64_t gr_str_hash(const char *s);

/* Resident pages of this process (/proc/self/statm), 0 if unknown; gr_rss_kib the same in KiB. */
long gr_rss_pages(void);
long gr_rss_kib(void);

/* Allocation that aborts the process with a message on OOM. */
void *gr_malloc(size_t n);
void *gr_calloc(size_t n, size_t size);
void *gr_realloc(void *p, size_t n);
char *gr_strdup(const char *s);
char *gr_strndup(const char *s, size_t n);
/* printf into a fresh allocation. */
char *gr_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Human-readable text for our return codes (negative errno or GR_E*). */
const char *gr_strerror(int rc);

#endif
