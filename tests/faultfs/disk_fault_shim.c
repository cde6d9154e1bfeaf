/* disk_fault_shim: an LD_PRELOAD library for the disk-fault tests (tests/chaos/test_disk_chaos.py,
 * docs/TESTING.md "Disk faults"). It never changes what gregord does on its own; it only fails
 * calls on request and writes down what a power loss would undo.
 *
 * Environment (read at each call, so a test may start a broker with it and leave it on):
 *   GREGOR_FAULT_DIR       the log dir: only paths under it are journaled or failed
 *   GREGOR_FAULT_TRIGGER   a path prefix; while the file <prefix>-eio-write exists every
 *                          write/pwrite/writev to a file under the dir fails with EIO, while
 *                          <prefix>-eio-fsync exists every fsync/fdatasync of one does
 *   GREGOR_FAULT_JOURNAL   the power-loss journal (outside the dir): one line per event below,
 *                          appended with one write(2) each, so a SIGKILL leaves whole lines
 *
 * Journal lines (tab-separated; paths absolute, as gregord opens them):
 *   O <size> <path>        the file existed with <size> bytes when first opened for writing
 *   C <path>               the file was created (its directory entry is not durable yet)
 *   S <size> <path>        fsync/fdatasync succeeded: <size> bytes are durable
 *   T <size> <path>        ftruncate to <size>
 *   D <path>               fsync of a directory succeeded: its entries are durable
 *   R <backup|-> <from> <to>   rename (renameat2 too); the replaced <to>, if any, was hard-linked
 *                          to <backup> first so that undoing the rename can bring it back
 *   U <backup> <path>      unlink; the file was hard-linked to <backup> first
 * The test's power loss (tests/chaos/disk_faults.py) SIGKILLs the broker and replays the journal:
 * creates, renames and unlinks whose directory was not fsynced afterwards are undone (newest
 * first) and every file is cut to its durable length, as a file system that keeps nothing
 * unsynced would leave it. Not modelled: mkdir/rmdir of partition directories (kept), an
 * ftruncate is durable at once, data overwritten in place below the durable length stays.
 *
 * Thread-safe: no shared state but the journal descriptor (opened once, atomically) and a
 * backup counter (atomic). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define REAL(name) real_##name
#define RESOLVE(name)                                                                                              \
    do {                                                                                                           \
        if (!REAL(name)) REAL(name) = dlsym(RTLD_NEXT, #name);                                                     \
    } while (0)

static int (*REAL(open))(const char *, int, ...);
static int (*REAL(open64))(const char *, int, ...);
static int (*REAL(__open_2))(const char *, int);
static int (*REAL(__open64_2))(const char *, int);
static int (*REAL(fsync))(int);
static int (*REAL(fdatasync))(int);
static int (*REAL(ftruncate))(int, off_t);
static int (*REAL(rename))(const char *, const char *);
static int (*REAL(renameat2))(int, const char *, int, const char *, unsigned);
static int (*REAL(unlink))(const char *);
static ssize_t (*REAL(write))(int, const void *, size_t);
static ssize_t (*REAL(pwrite))(int, const void *, size_t, off_t);
static ssize_t (*REAL(pwrite64))(int, const void *, size_t, off_t);
static ssize_t (*REAL(writev))(int, const struct iovec *, int);
static ssize_t (*REAL(pwritev))(int, const struct iovec *, int, off_t);

static atomic_int journal_fd = -1;
static atomic_long backups;

/* Is path under $GREGOR_FAULT_DIR? */
static int under_dir(const char *path) {
    const char *dir = getenv("GREGOR_FAULT_DIR");
    if (!dir || !path || path[0] != '/') return 0;
    size_t dl = strlen(dir);
    return strncmp(path, dir, dl) == 0 && (path[dl] == '/' || path[dl] == 0);
}

static int fd_path(int fd, char *path, size_t cap) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, cap - 1);
    if (n <= 0) return -1;
    path[n] = 0;
    return 0;
}

static int triggered(const char *what) {
    const char *trig = getenv("GREGOR_FAULT_TRIGGER");
    if (!trig) return 0;
    char t[PATH_MAX];
    snprintf(t, sizeof t, "%s-%s", trig, what);
    return access(t, F_OK) == 0;
}

/* Fail this call on fd (EIO) when <trigger>-<what> exists and fd's file is under the dir. */
static int fault_on_fd(int fd, const char *what) {
    if (!triggered(what)) return 0;
    char path[PATH_MAX];
    return fd_path(fd, path, sizeof path) == 0 && under_dir(path);
}

static void journal(const char *fmt, ...) {
    const char *jp = getenv("GREGOR_FAULT_JOURNAL");
    if (!jp) return;
    int fd = atomic_load(&journal_fd);
    if (fd < 0) {
        int nfd = (int)syscall(SYS_openat, AT_FDCWD, jp, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (nfd < 0) return;
        int expected = -1;
        if (!atomic_compare_exchange_strong(&journal_fd, &expected, nfd)) {
            close(nfd);
            fd = expected;
        } else {
            fd = nfd;
        }
    }
    char line[3 * PATH_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof line) (void)syscall(SYS_write, fd, line, (size_t)n);
}

/* A hard link of path to a fresh backup name next to the journal; "-" when there is nothing. */
static void backup(const char *path, char *out, size_t cap) {
    const char *jp = getenv("GREGOR_FAULT_JOURNAL");
    snprintf(out, cap, "-");
    struct stat st;
    if (!jp || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return;
    char b[PATH_MAX];
    snprintf(b, sizeof b, "%s.bak.%d.%ld", jp, (int)getpid(), atomic_fetch_add(&backups, 1));
    if (link(path, b) == 0) snprintf(out, cap, "%s", b);
}

/* Before an open with write intent: what existed. */
static void before_open(const char *path, int flags, int *existed, off_t *size) {
    struct stat st;
    *existed = stat(path, &st) == 0 && S_ISREG(st.st_mode);
    *size = *existed ? ((flags & O_TRUNC) ? 0 : st.st_size) : 0;
}

static void after_open(const char *path, int fd, int existed, off_t size) {
    if (fd < 0) return;
    if (existed) journal("O\t%lld\t%s\n", (long long)size, path);
    else journal("C\t%s\n", path);
}

static int writes(int flags) { return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)); }

#define OPEN_BODY(name, path, flags, call)                                                                         \
    do {                                                                                                           \
        RESOLVE(name);                                                                                             \
        int track_ = under_dir(path) && writes(flags) && !(flags & O_DIRECTORY);                                   \
        int existed_ = 0;                                                                                          \
        off_t size_ = 0;                                                                                           \
        if (track_) before_open(path, flags, &existed_, &size_);                                                   \
        int fd_ = call;                                                                                            \
        if (track_) after_open(path, fd_, existed_, size_);                                                        \
        return fd_;                                                                                                \
    } while (0)

int open(const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    OPEN_BODY(open, path, flags, REAL(open)(path, flags, mode));
}

int open64(const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    OPEN_BODY(open64, path, flags, REAL(open64)(path, flags, mode));
}

int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __open_2(const char *path, int flags) { OPEN_BODY(__open_2, path, flags, REAL(__open_2)(path, flags)); }

int __open64_2(const char *path, int flags) { OPEN_BODY(__open64_2, path, flags, REAL(__open64_2)(path, flags)); }

/* fsync/fdatasync: EIO on request; else, once it succeeded, the durable size or directory. */
static int sync_common(int fd, int (*real)(int)) {
    char path[PATH_MAX];
    int tracked = fd_path(fd, path, sizeof path) == 0 && under_dir(path);
    if (tracked && triggered("eio-fsync")) {
        errno = EIO;
        return -1;
    }
    int rc = real(fd);
    if (rc == 0 && tracked) {
        struct stat st;
        if (fstat(fd, &st) == 0) {
            if (S_ISDIR(st.st_mode)) journal("D\t%s\n", path);
            else if (S_ISREG(st.st_mode)) journal("S\t%lld\t%s\n", (long long)st.st_size, path);
        }
    }
    return rc;
}

int fsync(int fd) {
    RESOLVE(fsync);
    return sync_common(fd, REAL(fsync));
}

int fdatasync(int fd) {
    RESOLVE(fdatasync);
    return sync_common(fd, REAL(fdatasync));
}

int ftruncate(int fd, off_t len) {
    RESOLVE(ftruncate);
    int rc = REAL(ftruncate)(fd, len);
    char path[PATH_MAX];
    if (rc == 0 && fd_path(fd, path, sizeof path) == 0 && under_dir(path))
        journal("T\t%lld\t%s\n", (long long)len, path);
    return rc;
}

int rename(const char *from, const char *to) {
    RESOLVE(rename);
    if (!under_dir(from) && !under_dir(to)) return REAL(rename)(from, to);
    char b[PATH_MAX];
    backup(to, b, sizeof b);
    int rc = REAL(rename)(from, to);
    if (rc == 0) journal("R\t%s\t%s\t%s\n", b, from, to);
    else if (strcmp(b, "-") != 0) (void)syscall(SYS_unlink, b);
    return rc;
}

int renameat2(int ofd, const char *from, int nfd, const char *to, unsigned flags) {
    RESOLVE(renameat2);
    int tracked = ofd == AT_FDCWD && nfd == AT_FDCWD && (under_dir(from) || under_dir(to));
    char b[PATH_MAX] = "-";
    if (tracked) backup(to, b, sizeof b);
    int rc = REAL(renameat2)(ofd, from, nfd, to, flags);
    if (tracked && rc == 0) journal("R\t%s\t%s\t%s\n", b, from, to);
    else if (strcmp(b, "-") != 0) (void)syscall(SYS_unlink, b);
    return rc;
}

int unlink(const char *path) {
    RESOLVE(unlink);
    if (!under_dir(path)) return REAL(unlink)(path);
    char b[PATH_MAX];
    backup(path, b, sizeof b);
    int rc = REAL(unlink)(path);
    if (rc == 0 && strcmp(b, "-") != 0) journal("U\t%s\t%s\n", b, path);
    else if (strcmp(b, "-") != 0) (void)syscall(SYS_unlink, b);
    return rc;
}

#define WRITE_FAULT(fd)                                                                                            \
    do {                                                                                                           \
        if (fault_on_fd(fd, "eio-write")) {                                                                        \
            errno = EIO;                                                                                           \
            return -1;                                                                                             \
        }                                                                                                          \
    } while (0)

ssize_t write(int fd, const void *buf, size_t n) {
    RESOLVE(write);
    WRITE_FAULT(fd);
    return REAL(write)(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    RESOLVE(pwrite);
    WRITE_FAULT(fd);
    return REAL(pwrite)(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
    RESOLVE(pwrite64);
    WRITE_FAULT(fd);
    return REAL(pwrite64)(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    RESOLVE(writev);
    WRITE_FAULT(fd);
    return REAL(writev)(fd, iov, cnt);
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off) {
    RESOLVE(pwritev);
    WRITE_FAULT(fd);
    return REAL(pwritev)(fd, iov, cnt, off);
}
