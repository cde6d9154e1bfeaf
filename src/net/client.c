/* Blocking outbound connection with poll-based timeouts. See client.h. */
#include "net/client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "net/tls.h"

#define LOGGER "net.client"
#define RESP_BUF_INITIAL (64 * 1024)

struct gr_net_client {
    int fd;
    struct gr_tls *tls; /* NULL: plaintext */
    bool broken;
    int64_t max_response;
    char peer[300];
};

static int32_t be32(const uint8_t *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

/* Milliseconds left until deadline (-1 = none), clamped at 0. */
static int remaining(int64_t deadline) {
    if (deadline < 0) return -1;
    int64_t left = deadline - gr_mono_ms();
    return left <= 0 ? 0 : (int)GR_MIN(left, INT32_MAX);
}

/* Waits for `events` on fd. Returns 0, GR_ETIMEOUT, or -errno. POLLHUP/POLLERR count as ready:
 * the following send/recv reports what happened. */
static int wait_fd(int fd, short events, int64_t deadline) {
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int ms = remaining(deadline);
        int n = poll(&p, 1, ms);
        if (n > 0) return 0;
        if (n == 0) return GR_ETIMEOUT;
        if (errno != EINTR) return -errno;
    }
}

static int connect_one(const struct addrinfo *ai, int64_t deadline, int *out_fd) {
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int rc = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            rc = -errno;
            goto out_close;
        }
        rc = wait_fd(fd, POLLOUT, deadline);
        if (rc) goto out_close;
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
        if (err) {
            rc = -err;
            goto out_close;
        }
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    *out_fd = fd;
    return 0;
out_close:
    close(fd);
    return rc;
}

int gr_net_client_connect(const char *host, int port, int timeout_ms, struct gr_net_client **out) {
    *out = NULL;
    if (!host || port <= 0 || port > 65535) return -EINVAL;
    int64_t deadline = timeout_ms < 0 ? -1 : gr_mono_ms() + timeout_ms;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int grc = getaddrinfo(host, portstr, &hints, &res);
    if (grc != 0) {
        gr_debug(LOGGER, "cannot resolve %s: %s", host, gai_strerror(grc));
        return -EHOSTUNREACH;
    }
    int rc = -EHOSTUNREACH, fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        rc = connect_one(ai, deadline, &fd);
        if (rc == 0 || rc == GR_ETIMEOUT) break;
    }
    freeaddrinfo(res);
    if (rc) return rc;
    struct gr_net_client *cli = gr_calloc(1, sizeof *cli);
    cli->fd = fd;
    cli->max_response = GR_NET_CLIENT_DEFAULT_MAX_RESPONSE_BYTES;
    snprintf(cli->peer, sizeof cli->peer, "%s:%d", host, port);
    *out = cli;
    return 0;
}

static int send_all(struct gr_net_client *cli, const uint8_t *p, size_t len, int64_t deadline) {
    size_t off = 0;
    while (off < len) {
        ssize_t n = cli->tls ? gr_tls_send(cli->tls, p + off, len - off) : send(cli->fd, p + off, len - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            bool in = cli->tls && !gr_tls_wants_write(cli->tls);
            int rc = wait_fd(cli->fd, in ? POLLIN : POLLOUT, deadline);
            if (rc) return rc;
            continue;
        }
        return (n < 0 && errno != EPIPE && errno != ECONNRESET) ? -errno : GR_ECLOSED;
    }
    return 0;
}

static int recv_all(struct gr_net_client *cli, uint8_t *p, size_t len, int64_t deadline) {
    size_t off = 0;
    while (off < len) {
        ssize_t n = cli->tls ? gr_tls_recv(cli->tls, p + off, len - off) : recv(cli->fd, p + off, len - off, 0);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n == 0) return GR_ECLOSED;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            bool out = cli->tls && gr_tls_wants_write(cli->tls);
            int rc = wait_fd(cli->fd, out ? POLLOUT : POLLIN, deadline);
            if (rc) return rc;
            continue;
        }
        return (errno == ECONNRESET || errno == EPROTO) ? GR_ECLOSED : -errno;
    }
    return 0;
}

static int check_request(const struct gr_net_client *cli, const uint8_t *req, size_t len) {
    if (!req || len < 12 || len - 4 > INT32_MAX || (size_t)(uint32_t)be32(req) != len - 4) {
        gr_error(LOGGER, "refusing to send a malformed request frame of %zu bytes to %s", len,
                 cli->peer);
        return -EINVAL;
    }
    return 0;
}

static int fail(struct gr_net_client *cli, int rc, const char *what) {
    cli->broken = true;
    gr_debug(LOGGER, "%s %s failed: %s", what, cli->peer, gr_strerror(rc));
    return rc;
}

int gr_net_client_send_only(struct gr_net_client *cli, const uint8_t *req_frame, size_t len,
                            int timeout_ms) {
    if (cli->broken) return GR_ECLOSED;
    int rc = check_request(cli, req_frame, len);
    if (rc) return rc;
    int64_t deadline = timeout_ms < 0 ? -1 : gr_mono_ms() + timeout_ms;
    rc = send_all(cli, req_frame, len, deadline);
    return rc ? fail(cli, rc, "sending to") : 0;
}

int gr_net_client_send_recv(struct gr_net_client *cli, const uint8_t *req_frame, size_t len,
                            uint8_t **resp_frame, size_t *resp_len, int timeout_ms) {
    *resp_frame = NULL;
    *resp_len = 0;
    if (cli->broken) return GR_ECLOSED;
    int rc = check_request(cli, req_frame, len);
    if (rc) return rc;
    int64_t deadline = timeout_ms < 0 ? -1 : gr_mono_ms() + timeout_ms;
    rc = send_all(cli, req_frame, len, deadline);
    if (rc) return fail(cli, rc, "sending to");

    uint8_t hdr[4];
    rc = recv_all(cli, hdr, 4, deadline);
    if (rc) return fail(cli, rc, "receiving from");
    int32_t size = be32(hdr);
    if (size < 4 || (int64_t)size > cli->max_response) {
        gr_warn(LOGGER, "invalid response size %d from %s (limit %lld)", size, cli->peer,
                (long long)cli->max_response);
        return fail(cli, GR_EPROTO, "receiving from");
    }
    /* Grow with the bytes that actually arrive rather than trusting the announced size. */
    size_t cap = GR_MIN((size_t)size, (size_t)RESP_BUF_INITIAL), got = 0;
    uint8_t *buf = gr_malloc(cap);
    while (got < (size_t)size) {
        if (got == cap) { /* after the first bytes, jump to 4 MiB (fewer realloc copies), then double */
            cap = GR_MIN((size_t)size, GR_MAX(cap * 2, (size_t)4 << 20));
            buf = gr_realloc(buf, cap);
        }
        size_t chunk = cap - got;
        rc = recv_all(cli, buf + got, chunk, deadline);
        if (rc) {
            free(buf);
            return fail(cli, rc, "receiving from");
        }
        got += chunk;
    }
    int32_t want = be32(req_frame + 8), have = be32(buf);
    if (want != have) {
        gr_warn(LOGGER, "response from %s has correlation id %d, expected %d", cli->peer, have, want);
        free(buf);
        return fail(cli, GR_EPROTO, "receiving from");
    }
    *resp_frame = buf;
    *resp_len = (size_t)size;
    return 0;
}

int gr_net_client_start_tls(struct gr_net_client *cli, void *ssl_ctx, const char *host, int verify_host,
                            int timeout_ms) {
    int64_t deadline = timeout_ms < 0 ? -1 : gr_mono_ms() + timeout_ms;
    cli->tls = gr_tls_client_new(ssl_ctx, cli->fd, host, verify_host != 0);
    if (!cli->tls) {
        cli->broken = true;
        return GR_EPROTO;
    }
    for (;;) {
        int rc = gr_tls_handshake(cli->tls);
        if (rc == 0) return 0;
        if (rc < 0) {
            gr_warn(LOGGER, "TLS connection to %s failed: %s", cli->peer, gr_tls_error(cli->tls));
            cli->broken = true;
            return GR_EPROTO;
        }
        rc = wait_fd(cli->fd, gr_tls_wants_write(cli->tls) ? POLLOUT : POLLIN, deadline);
        if (rc) {
            cli->broken = true;
            return rc;
        }
    }
}

void gr_net_client_set_max_response_bytes(struct gr_net_client *cli, int64_t max_bytes) {
    cli->max_response = GR_MAX(4, GR_MIN(max_bytes, (int64_t)INT32_MAX));
}

const char *gr_net_client_peer(const struct gr_net_client *cli) { return cli->peer; }

void gr_net_client_shutdown(struct gr_net_client *cli) {
    if (cli && cli->fd >= 0) shutdown(cli->fd, SHUT_RDWR);
}

void gr_net_client_close(struct gr_net_client *cli) {
    if (!cli) return;
    gr_tls_free(cli->tls);
    if (cli->fd >= 0) close(cli->fd);
    free(cli);
}
