/* Bounded open files for partition logs: one process-wide LRU cache of the active segments'
 * .log file descriptors.
 *
 * Why: a broker hosts thousands of partition logs; keeping every active segment's .log open
 * would need one descriptor per partition (10,000 partitions ran a broker out of its 20,000-fd
 * limit). With this cache at most gr_storage_max_open_files() active-segment descriptors are
 * open at once, whatever the partition count. Offset indexes need no descriptor between calls
 * (they live in memory; see segment.c), and older segments are opened only for the duration of
 * one read, so the storage layer's descriptor use is bounded by
 *     max open files + (calls in progress at once) x 2.
 *
 * How: each active segment embeds a struct gr_fd_slot. A user pins the slot for the duration of
 * one operation (gr_fd_slot_acquire ... gr_fd_slot_release); acquiring a slot whose descriptor
 * was evicted reopens the file (O_RDWR, never O_CREAT: a vanished file is an I/O error, not an
 * empty segment). All writes use pwrite at explicit positions, so a reopened descriptor needs no
 * seek and behaves exactly like the original one. When more than the bound are open, the least
 * recently used *unpinned* descriptors are closed; a pinned descriptor is never closed by
 * another thread, so the bound can be exceeded by at most the number of operations in progress
 * (it is restored when they release). Closing never loses data (it stays in the page cache);
 * a later flush reopens the file and fsyncs it (see gr_segment_fsync).
 *
 * Locking: one global mutex guards the LRU list, every slot's fd and pin count. Lock order:
 * a log's mutex, then the cache mutex (the cache never takes a log's mutex), and the cache
 * mutex is never held across open(2)/close(2). A slot's owner (the segment, protected by its
 * log's mutex) is the only one that acquires, releases or removes it. */
#ifndef GR_STORAGE_FD_CACHE_H
#define GR_STORAGE_FD_CACHE_H

#include <stdint.h>
#include <sys/types.h>

/* ---- public (any thread, any time) ---- */

/* Sets the bound on cached open active-segment descriptors for the whole process. n <= 0 means
 * automatic: min(4096, soft RLIMIT_NOFILE / 4), at least 16, computed now. Lowering the bound
 * closes unpinned descriptors at once. Never set: automatic, computed at first use. */
void gr_storage_set_max_open_files(int n);

/* The bound in force (computes the automatic one if never set). */
int gr_storage_max_open_files(void);

/* Counters for tests and metrics. */
struct gr_storage_fd_stats {
    int open;            /* descriptors in the cache now */
    int max;             /* the bound */
    uint64_t opens;      /* opens through the cache (first opens and reopens) */
    uint64_t evictions;  /* descriptors closed to respect the bound */
};
void gr_storage_fd_stats(struct gr_storage_fd_stats *out);

/* ---- internal to src/storage ---- */

/* One cached descriptor. Zero-initialise with gr_fd_slot_init. Fields are private. */
struct gr_fd_slot {
    int fd;    /* -1 when not open */
    int pins;  /* operations in progress */
    struct gr_fd_slot *prev, *next; /* LRU list (most recent first) while fd >= 0 */
};

void gr_fd_slot_init(struct gr_fd_slot *s);

/* open(2) for storage files: on EMFILE/ENFILE it closes idle (unpinned) cached descriptors,
 * even under the bound, and retries, so running out of descriptors elsewhere (sockets) does not
 * fail a log operation while the cache holds idle files. Returns the fd or -1 with errno set. */
int gr_storage_open(const char *path, int flags, mode_t mode);

/* Pins the slot and returns its descriptor, opening `path` (O_RDWR | O_CLOEXEC, plus O_CREAT
 * when `create`) if it is not open. May close other slots' unpinned descriptors. Returns the
 * fd (>= 0) or -errno. Every successful acquire needs one gr_fd_slot_release. */
int gr_fd_slot_acquire(struct gr_fd_slot *s, const char *path, int create);

/* Pins the slot and returns its descriptor if it is open; -1 (nothing pinned) if not, when the
 * caller makes the path and calls gr_fd_slot_acquire. Lets a hot path skip formatting a path
 * that an open descriptor does not need. */
int gr_fd_slot_pin(struct gr_fd_slot *s);

/* Unpins the slot (its descriptor may be evicted from now on). */
void gr_fd_slot_release(struct gr_fd_slot *s);

/* Closes the slot's descriptor if open and takes it out of the cache. The slot must not be
 * pinned. */
void gr_fd_slot_remove(struct gr_fd_slot *s);

#endif
