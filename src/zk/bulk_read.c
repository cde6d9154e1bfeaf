/* Bulk read over a second ZooKeeper session: see bulk_read.h. Wire format: ZooKeeper's jute
 * encoding (big-endian ints, strings and buffers as int32 length + bytes, -1 for null), each
 * packet preceded by its int32 length. */
#include "zk/bulk_read.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/be.h"
#include "common/util.h"

#define OP_GETDATA 4
#define OP_SYNC 9
#define OP_AUTH 100
#define OP_CLOSE (-11)
#define XID_AUTH (-4)
#define XID_SYNC 1
#define XID_FIRST 2
#define SEND_CHUNK (64 * 1024)
#define RECV_CHUNK (1024 * 1024)
#define GR_ZK_BULK_REFILL 500 /* replies taken before sending more */

struct buf {
    char *p;
    size_t len, cap;
};

static void b_need(struct buf *b, size_t more) {
    if (b->len + more <= b->cap) return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    b->p = gr_realloc(b->p, cap);
    b->cap = cap;
}

static void b_i32(struct buf *b, int32_t v) {
    b_need(b, 4);
    gr_put_be32((uint8_t *)b->p + b->len, (uint32_t)v);
    b->len += 4;
}

static void b_i64(struct buf *b, int64_t v) {
    b_i32(b, (int32_t)((uint64_t)v >> 32));
    b_i32(b, (int32_t)(uint32_t)v);
}

static void b_bytes(struct buf *b, const void *p, size_t n) {
    b_i32(b, (int32_t)n);
    b_need(b, n);
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

/* A string field: chroot then path (one ustring). */
static void b_path(struct buf *b, const char *chroot, const char *path) {
    size_t c = strlen(chroot), n = strlen(path);
    if (c && strcmp(path, "/") == 0) n = 0; /* "/" under a chroot is the chroot itself */
    b_i32(b, (int32_t)(c + n));
    b_need(b, c + n);
    memcpy(b->p + b->len, chroot, c);
    memcpy(b->p + b->len + c, path, n);
    b->len += c + n;
}

/* Starts a packet: room for its length, filled in by b_end. */
static size_t b_begin(struct buf *b) {
    size_t at = b->len;
    b_i32(b, 0);
    return at;
}

static void b_end(struct buf *b, size_t at) {
    gr_put_be32((uint8_t *)b->p + at, (uint32_t)(b->len - at - 4));
}

/* ---- reading ---- */

struct rd {
    const unsigned char *p;
    size_t n, off;
    bool bad;
};

static int32_t r_i32(struct rd *r) {
    if (r->off + 4 > r->n) {
        r->bad = true;
        return 0;
    }
    r->off += 4;
    return (int32_t)gr_be32(r->p + r->off - 4);
}

static int64_t r_i64(struct rd *r) {
    uint64_t hi = (uint32_t)r_i32(r);
    return (int64_t)(hi << 32 | (uint32_t)r_i32(r));
}

/* ---- the connection ---- */

struct conn {
    int fd;
    int timeout_ms;
    struct buf in;  /* unparsed bytes at in.p[in_off..in.len) */
    size_t in_off;
};

static int dial(const char *hostport, int timeout_ms) {
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (!colon || (size_t)(colon - hostport) >= sizeof host) return -1;
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0 || !ai) return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    if (fd < 0) return -1;
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    int err = 0;
    socklen_t el = sizeof err;
    if (poll(&pf, 1, timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static int send_all(struct conn *c, const char *p, size_t n);

static int read_some(struct conn *c) {
    if (c->in_off > 0 && c->in_off == c->in.len) c->in.len = c->in_off = 0;
    if (c->in_off > RECV_CHUNK) { /* compact */
        memmove(c->in.p, c->in.p + c->in_off, c->in.len - c->in_off);
        c->in.len -= c->in_off;
        c->in_off = 0;
    }
    b_need(&c->in, RECV_CHUNK);
    ssize_t got = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len, 0);
    if (got > 0) {
        c->in.len += (size_t)got;
        return 0;
    }
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    return -1; /* closed or failed */
}

/* Sends p[0..n) (polling; replies are read meanwhile into c->in so the server never blocks on
 * us). Returns 0 or -1. */
static int send_all(struct conn *c, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR) return -1;
        struct pollfd pf = {.fd = c->fd, .events = POLLOUT | POLLIN};
        if (poll(&pf, 1, c->timeout_ms) != 1) return -1;
        if ((pf.revents & POLLIN) && read_some(c) != 0) return -1;
        if (pf.revents & (POLLERR | POLLHUP) && !(pf.revents & POLLOUT)) return -1;
    }
    return 0;
}

/* The next whole packet (body without its length) into *r, reading as needed (wait: block up to
 * the timeout; else return 1 when none is complete yet). 0 = got one, -1 = failure. */
static int next_packet(struct conn *c, struct rd *r, bool wait) {
    for (;;) {
        size_t avail = c->in.len - c->in_off;
        if (avail >= 4) {
            const unsigned char *q = (const unsigned char *)c->in.p + c->in_off;
            uint32_t n = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
            if (n > 64u * 1024 * 1024) return -1;
            if (avail >= 4 + (size_t)n) {
                *r = (struct rd){.p = q + 4, .n = n};
                c->in_off += 4 + (size_t)n;
                return 0;
            }
        }
        if (!wait) return 1;
        struct pollfd pf = {.fd = c->fd, .events = POLLIN};
        if (poll(&pf, 1, c->timeout_ms) != 1) return -1;
        if (read_some(c) != 0) return -1;
    }
}

static int handshake(struct conn *c, const struct gr_zk_bulk_target *t) {
    struct buf b = {0};
    size_t at = b_begin(&b);
    b_i32(&b, 0);            /* protocolVersion */
    b_i64(&b, 0);            /* lastZxidSeen: none (a fresh session; the sync below orders us) */
    b_i32(&b, t->timeout_ms);
    b_i64(&b, 0);            /* sessionId: new */
    char pw[16] = {0};
    b_bytes(&b, pw, sizeof pw);
    b_need(&b, 1);
    b.p[b.len++] = 0;        /* readOnly: no */
    b_end(&b, at);
    if (t->digest_auth) {
        at = b_begin(&b);
        b_i32(&b, XID_AUTH);
        b_i32(&b, OP_AUTH);
        b_i32(&b, 0);
        b_bytes(&b, "digest", 6);
        b_bytes(&b, t->digest_auth, strlen(t->digest_auth));
        b_end(&b, at);
    }
    at = b_begin(&b);
    b_i32(&b, XID_SYNC);
    b_i32(&b, OP_SYNC);
    b_path(&b, t->chroot, "/");
    b_end(&b, at);
    int rc = send_all(c, b.p, b.len);
    free(b.p);
    if (rc != 0) return -1;
    struct rd r;
    if (next_packet(c, &r, true) != 0) return -1;
    (void)r_i32(&r);                 /* protocolVersion */
    int32_t timeout = r_i32(&r);     /* <= 0: refused */
    if (r.bad || timeout <= 0) return -1;
    if (t->digest_auth) {
        if (next_packet(c, &r, true) != 0) return -1;
        int32_t xid = r_i32(&r);
        (void)r_i64(&r);
        int32_t err = r_i32(&r);
        if (r.bad || xid != XID_AUTH || err != 0) return -1;
    }
    return 0;
}

static void close_session(struct conn *c, int32_t xid) {
    struct buf b = {0};
    size_t at = b_begin(&b);
    b_i32(&b, xid);
    b_i32(&b, OP_CLOSE);
    b_end(&b, at);
    (void)send_all(c, b.p, b.len); /* the server ends the session; no need to wait for it */
    free(b.p);
}

/* One getData reply into res. Returns 0 or -1 (malformed). */
static int take_reply(struct rd *r, int32_t err, struct gr_zget_result *res) {
    res->rc = err;
    if (err != 0) return 0;
    int32_t len = r_i32(r);
    if (r->bad || len < -1 || (len > 0 && r->off + (size_t)len > r->n)) return -1;
    int n = len > 0 ? len : 0;
    res->data = gr_malloc((size_t)n + 1);
    if (n) memcpy(res->data, r->p + r->off, (size_t)n);
    res->data[n] = 0;
    res->len = n;
    r->off += (size_t)n;
    struct gr_zstat *s = &res->stat;
    s->czxid = r_i64(r);
    s->mzxid = r_i64(r);
    s->ctime = r_i64(r);
    s->mtime = r_i64(r);
    s->version = r_i32(r);
    s->cversion = r_i32(r);
    s->aversion = r_i32(r);
    s->ephemeralOwner = r_i64(r);
    s->dataLength = r_i32(r);
    s->numChildren = r_i32(r);
    s->pzxid = r_i64(r);
    return r->bad ? -1 : 0;
}

/* Appends getData requests for paths[*next..) while fewer than the window are unanswered and the
 * buffer is below SEND_CHUNK. */
static void queue_requests(struct buf *out, const char *chroot, const char *const *paths, int n, int *next,
                           int answered) {
    while (*next < n && *next - answered < GR_ZK_BULK_WINDOW && out->len < SEND_CHUNK) {
        size_t at = b_begin(out);
        b_i32(out, XID_FIRST + *next);
        b_i32(out, OP_GETDATA);
        b_path(out, chroot, paths[*next]);
        b_need(out, 1);
        out->p[out->len++] = 0; /* watch: no */
        b_end(out, at);
        (*next)++;
    }
}

/* Handles one reply (the sync's, then the reads' in order). Returns 0 or -1. */
static int on_reply(struct rd *r, bool *synced, int *answered, struct gr_zget_result *results) {
    int32_t xid = r_i32(r);
    (void)r_i64(r);
    int32_t err = r_i32(r);
    if (r->bad) return -1;
    if (!*synced) {
        *synced = true;
        return xid == XID_SYNC && err == 0 ? 0 : -1;
    }
    if (xid != XID_FIRST + *answered || take_reply(r, err, &results[*answered]) != 0) return -1;
    (*answered)++;
    return 0;
}

/* Sends the reads in chunks, keeping up to the window in flight, and takes the replies as they
 * come: whenever the window is full (or everything is sent) it waits for replies and takes all
 * that have arrived, and sends more as soon as GR_ZK_BULK_REFILL slots are free (refilling only
 * at half the window read ~20 % slower than a client that refills after every reply). */
static int run_reads(struct conn *c, const struct gr_zk_bulk_target *t, const char *const *paths, int n,
                     struct gr_zget_result *results) {
    struct buf out = {0};
    int next = 0, answered = 0;
    bool synced = false;
    int rc = 0;
    while (answered < n && rc == 0) {
        queue_requests(&out, t->chroot, paths, n, &next, answered);
        if (out.len > 0) {
            rc = send_all(c, out.p, out.len);
            out.len = 0;
            if (rc != 0) break;
        }
        bool full = next == n || next - answered >= GR_ZK_BULK_WINDOW;
        if (!full && read_some(c) != 0) { /* non-blocking: take what has arrived */
            rc = -1;
            break;
        }
        struct rd r;
        int got;
        while ((got = next_packet(c, &r, full)) == 0) {
            if (on_reply(&r, &synced, &answered, results) != 0) {
                rc = -1;
                break;
            }
            if (answered == n) break;
            if (full && next < n && next - answered < GR_ZK_BULK_WINDOW - GR_ZK_BULK_REFILL) full = false; /* refill */
        }
        if (got < 0) rc = -1;
    }
    free(out.p);
    if (rc == 0) close_session(c, XID_FIRST + n);
    return rc;
}

static atomic_long g_bulk_reads;

long gr_zk_bulk_reads(void) { return atomic_load(&g_bulk_reads); }

int gr_zk_bulk_get(const struct gr_zk_bulk_target *t, const char *const *paths, int n,
                   struct gr_zget_result *results) {
    memset(results, 0, sizeof *results * (size_t)(n > 0 ? n : 0));
    if (n <= 0) return GR_ZOK;
    struct conn c = {.fd = dial(t->hostport, t->timeout_ms), .timeout_ms = t->timeout_ms};
    if (c.fd < 0) return GR_ZCONNECTIONLOSS;
    int rc = handshake(&c, t) == 0 ? run_reads(&c, t, paths, n, results) : -1;
    close(c.fd);
    free(c.in.p);
    if (rc != 0) {
        gr_zget_results_release(results, n);
        memset(results, 0, sizeof *results * (size_t)n);
        return GR_ZCONNECTIONLOSS;
    }
    atomic_fetch_add(&g_bulk_reads, 1);
    return GR_ZOK;
}
