/* The Prometheus endpoint (broker/metrics_http.c): gregor.metrics.listener parsing, and a real
 * HTTP exchange over loopback (GET/HEAD /metrics, 404, 405). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker/metrics_http.h"
#include "common/metrics.h"
#include "support/check.h"

/* Sends req to 127.0.0.1:port and returns everything the server answered (malloc'd). */
static char *http(int port, const char *req) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while ((r = read(fd, buf + n, cap - n - 1)) > 0) n += (size_t)r;
    buf[n] = 0;
    close(fd);
    return buf;
}

int main(void) {
    char host[64];
    int port;
    CHECK(gr_metrics_http_parse("http://127.0.0.1:9192", host, sizeof host, &port) == 0 &&
          strcmp(host, "127.0.0.1") == 0 && port == 9192);
    CHECK(gr_metrics_http_parse("http://:0", host, sizeof host, &port) == 0 && host[0] == 0 && port == 0);
    CHECK(gr_metrics_http_parse("http://[::1]:80/", host, sizeof host, &port) == 0 && strcmp(host, "::1") == 0);
    CHECK(gr_metrics_http_parse("HTTP://h:1", host, sizeof host, &port) == 0);
    CHECK(gr_metrics_http_parse("https://h:1", host, sizeof host, &port) == -EINVAL);
    CHECK(gr_metrics_http_parse("http://h", host, sizeof host, &port) == -EINVAL);
    CHECK(gr_metrics_http_parse("http://h:70000", host, sizeof host, &port) == -EINVAL);
    CHECK(gr_metrics_http_parse("http://h:12x", host, sizeof host, &port) == -EINVAL);
    CHECK(gr_metrics_http_parse(NULL, host, sizeof host, &port) == -EINVAL);

    struct gr_metrics *reg = gr_metrics_new();
    gr_gauge_set(gr_metrics_gauge(reg, "kafka.controller:type=KafkaController,name=ActiveControllerCount"), 1);
    struct gr_metrics_http *h = NULL;
    CHECK(gr_metrics_http_start("ftp://x:1", reg, &h) == -EINVAL && h == NULL);
    CHECK(gr_metrics_http_start("http://127.0.0.1:0", reg, &h) == 0 && h);
    int p = gr_metrics_http_port(h);
    CHECK(p > 0);
    struct gr_metrics_http *h2 = NULL;
    char busy[64];
    snprintf(busy, sizeof busy, "http://127.0.0.1:%d", p);
    CHECK(gr_metrics_http_start(busy, reg, &h2) < 0 && h2 == NULL); /* port in use */

    char *r = http(p, "GET /metrics HTTP/1.0\r\n\r\n");
    CHECK(strncmp(r, "HTTP/1.0 200", 12) == 0 || strncmp(r, "HTTP/1.1 200", 12) == 0);
    CHECK(strstr(r, "text/plain; version=0.0.4") != NULL);
    CHECK(strstr(r, "\nkafka_controller_kafkacontroller_activecontrollercount 1\n") != NULL);
    free(r);
    r = http(p, "HEAD /metrics HTTP/1.0\r\n\r\n");
    CHECK(strstr(r, " 200 ") && !strstr(r, "activecontrollercount"));
    free(r);
    r = http(p, "GET /nope HTTP/1.0\r\n\r\n");
    CHECK(strstr(r, " 404 ") != NULL);
    free(r);
    r = http(p, "POST /metrics HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc");
    CHECK(strstr(r, " 405 ") != NULL);
    free(r);
    gr_metrics_http_stop(h);
    gr_metrics_http_stop(NULL);
    gr_metrics_free(reg);
    if (test_failures) {
        fprintf(stderr, "test_metrics_http: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_metrics_http: ok\n");
    return 0;
}
