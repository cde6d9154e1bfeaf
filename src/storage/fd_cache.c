/* Process-wide LRU cache of active-segment descriptors (see fd_cache.h for the rules). */
#include "storage/fd_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

#define LOGGER "storage.fd_cache"
#define AUTO_CAP 4096
#define AUTO_MIN 16

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_max;   /* 0 until computed or set */
static int g_open;  /* slots with fd >= 0 */
static uint64_t g_opens, g_evictions;
/* Sentinel of the LRU list: head.next is the most recently used, head.prev the least. */
static struct gr_fd_slot g_head = {-1, 0, &g_head, &g_head};

static int auto_max(void) {
    struct rlimit rl;
    int64_t n = AUTO_CAP;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        n = GR_MIN(n, (int64_t)(rl.rlim_cur / 4));
    return (int)GR_MAX(n, (int64_t)AUTO_MIN);
}

/* With g_mu held. */
static int max_locked(void) {
    if (g_max <= 0) g_max = auto_max();
    return g_max;
}

static void lru_unlink(struct gr_fd_slot *s) {
    s->prev->next = s->next;
    s->next->prev = s->prev;
    s->prev = s->next = NULL;
}

static void lru_push_front(struct gr_fd_slot *s) {
    s->next = g_head.next;
    s->prev = &g_head;
    g_head.next->prev = s;
    g_head.next = s;
}

/* With g_mu held: takes the least recently used unpinned descriptor out of the cache if more
 * than the bound are open (or any when `force`). Returns it (the caller closes it after
 * unlocking) or -1. */
static int pick_victim_locked(bool force) {
    if (!force && g_open <= max_locked()) return -1;
    for (struct gr_fd_slot *s = g_head.prev; s != &g_head; s = s->prev) {
        if (s->pins > 0) continue;
        int fd = s->fd;
        lru_unlink(s);
        s->fd = -1;
        g_open--;
        g_evictions++;
        return fd;
    }
    return -1; /* everything is pinned: over the bound until releases */
}

/* Closes descriptors until the bound holds (or only pinned ones are left). */
static void evict(void) {
    for (;;) {
        pthread_mutex_lock(&g_mu);
        int fd = pick_victim_locked(false);
        pthread_mutex_unlock(&g_mu);
        if (fd < 0) return;
        close(fd);
    }
}

/* Closes one cached unpinned descriptor even under the bound (the process ran out of
 * descriptors elsewhere). Returns false when there is none. */
static bool shed_one(void) {
    pthread_mutex_lock(&g_mu);
    int fd = pick_victim_locked(true);
    pthread_mutex_unlock(&g_mu);
    if (fd < 0) return false;
    close(fd);
    return true;
}

void gr_storage_set_max_open_files(int n) {
    pthread_mutex_lock(&g_mu);
    g_max = n > 0 ? n : auto_max();
    int m = g_max;
    pthread_mutex_unlock(&g_mu);
    gr_info(LOGGER, "at most %d active log segment files are kept open%s", m, n > 0 ? "" : " (automatic)");
    evict();
}

int gr_storage_max_open_files(void) {
    pthread_mutex_lock(&g_mu);
    int m = max_locked();
    pthread_mutex_unlock(&g_mu);
    return m;
}

void gr_storage_fd_stats(struct gr_storage_fd_stats *out) {
    pthread_mutex_lock(&g_mu);
    out->open = g_open;
    out->max = max_locked();
    out->opens = g_opens;
    out->evictions = g_evictions;
    pthread_mutex_unlock(&g_mu);
}

int gr_storage_open(const char *path, int flags, mode_t mode) {
    for (int tries = 0;; tries++) {
        int fd = open(path, flags, mode);
        if (fd >= 0 || (errno != EMFILE && errno != ENFILE) || tries >= 16) return fd;
        /* Out of descriptors (sockets, other files): give back idle cached ones and retry,
         * rather than failing an append or a read because the cache holds idle files. */
        int e = errno;
        static atomic_bool warned;
        if (!atomic_exchange(&warned, true))
            gr_warn(LOGGER, "out of file descriptors opening '%s': closing cached log files to make room "
                    "(lower gregor.max.open.log.files or raise the descriptor limit)", path);
        if (!shed_one()) {
            errno = e;
            return -1;
        }
    }
}

void gr_fd_slot_init(struct gr_fd_slot *s) {
    s->fd = -1;
    s->pins = 0;
    s->prev = s->next = NULL;
}

int gr_fd_slot_pin(struct gr_fd_slot *s) {
    pthread_mutex_lock(&g_mu);
    int fd = s->fd;
    if (fd >= 0) {
        s->pins++;
        if (g_head.next != s) {
            lru_unlink(s);
            lru_push_front(s);
        }
    }
    pthread_mutex_unlock(&g_mu);
    return fd;
}

int gr_fd_slot_acquire(struct gr_fd_slot *s, const char *path, int create) {
    int pinned = gr_fd_slot_pin(s);
    if (pinned >= 0) return pinned;
    /* Only the owner (under its log's mutex) opens this slot, so nobody else can fill it
     * while the lock is dropped for open(2). */
    int fd = gr_storage_open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
    if (fd < 0) {
        int rc = -errno;
        gr_error(LOGGER, "cannot open segment '%s': %s", path, strerror(errno));
        return rc;
    }
    pthread_mutex_lock(&g_mu);
    s->fd = fd;
    s->pins = 1;
    lru_push_front(s);
    g_open++;
    g_opens++;
    bool over = g_open > max_locked();
    pthread_mutex_unlock(&g_mu);
    if (over) evict();
    return fd;
}

void gr_fd_slot_release(struct gr_fd_slot *s) {
    pthread_mutex_lock(&g_mu);
    if (s->pins > 0) s->pins--;
    bool over = g_open > max_locked();
    pthread_mutex_unlock(&g_mu);
    if (over) evict();
}

void gr_fd_slot_remove(struct gr_fd_slot *s) {
    pthread_mutex_lock(&g_mu);
    int fd = s->fd;
    if (fd >= 0) {
        lru_unlink(s);
        s->fd = -1;
        g_open--;
    }
    s->pins = 0;
    pthread_mutex_unlock(&g_mu);
    if (fd >= 0) close(fd);
}
