/* libFuzzer target: arbitrary bytes sent to the network server over a real TCP connection.
 * The server must frame them (or reject the size) without crashing, leaking or hanging; the
 * handler echoes, answers nothing or closes depending on the api key, so every completion path
 * runs. The input's first byte chooses where the stream is split into two writes. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "net/server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void handler(void *ctx, struct gr_net_request *req) {
    (void)ctx;
    switch ((uint16_t)req->api_key % 3) {
    case 0: {
        uint8_t out[8];
        out[0] = out[1] = out[2] = 0;
        out[3] = 4;
        memcpy(out + 4, req->data + 4, 4);
        gr_net_respond(req, out, sizeof out);
        break;
    }
    case 1: gr_net_respond_none(req); break;
    default: gr_net_close(req); break;
    }
}

static struct gr_net_server *srv;
static int port;

static void start_once(void) {
    if (srv) return;
    gr_log_set_level(GR_LOG_ERROR);
    static const struct gr_net_listener ls[] = {{"FUZZ", "127.0.0.1", 0}};
    struct gr_net_config cfg;
    gr_net_config_init(&cfg);
    cfg.listeners = ls;
    cfg.num_listeners = 1;
    cfg.num_io_threads = 2;
    cfg.socket_request_max_bytes = 1 << 20;
    if (gr_net_server_new(&cfg, handler, NULL, &srv) != 0 || gr_net_server_start(srv) != 0) abort();
    port = gr_net_server_port(srv, 0);
}

static void send_part(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    start_once();
    if (size == 0) return 0;
    size_t split = size > 1 ? data[0] % size : 0;
    data++;
    size--;
    if (split > size) split = size;
    /* Tens of thousands of connections a run can exhaust loopback's ephemeral ports: the server
     * closes first on some inputs, so its side keeps the 4-tuple in TIME_WAIT. That is the
     * harness's limit, not a server failure: spread the source address over 127.0.0.2-254 (the
     * port is chosen at connect time, per 4-tuple) and wait and retry if that is not enough. */
    static unsigned next_src;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = -1;
    for (int tries = 0;; tries++) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) abort();
        int one = 1;
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        struct sockaddr_in src = {.sin_family = AF_INET};
        src.sin_addr.s_addr = htonl(0x7f000002u + next_src++ % 253);
        if (bind(fd, (struct sockaddr *)&src, sizeof src) == 0 &&
            connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            break;
        int e = errno;
        close(fd);
        if ((e != EADDRNOTAVAIL && e != EAGAIN && e != EADDRINUSE) || tries > 1000) {
            fprintf(stderr, "fuzz_frame: connect to 127.0.0.1:%d failed: %s (%d tries)\n", port,
                    strerror(e), tries);
            abort();
        }
        usleep(10000);
    }
    send_part(fd, data, split);
    send_part(fd, data + split, size - split);
    shutdown(fd, SHUT_WR);
    /* The server must end the connection after our EOF: read until it does. */
    int64_t end = gr_mono_ms() + 5000;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int left = (int)(end - gr_mono_ms());
        if (left <= 0) abort(); /* the server hung on this input */
        if (poll(&p, 1, left) <= 0) continue;
        uint8_t buf[4096];
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
    }
    /* Close with RST so neither side keeps the 4-tuple in TIME_WAIT. */
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
    return 0;
}
