/* The Prometheus endpoint: see metrics_http.h. */
#include "broker/metrics_http.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"

#define LOGGER "gregor.metrics.MetricsHttp"

struct gr_metrics_http {
    struct MHD_Daemon *d;
    struct gr_metrics *reg;
    int port;
};

int gr_metrics_http_parse(const char *url, char *host, size_t hostlen, int *port) {
    static const char scheme[] = "http://";
    if (!url || strncasecmp(url, scheme, sizeof scheme - 1) != 0) return -EINVAL;
    const char *h = url + sizeof scheme - 1;
    const char *colon;
    if (*h == '[') {
        const char *close = strchr(h, ']');
        if (!close || close[1] != ':') return -EINVAL;
        if ((size_t)(close - h - 1) >= hostlen) return -EINVAL;
        snprintf(host, hostlen, "%.*s", (int)(close - h - 1), h + 1);
        colon = close + 1;
    } else {
        colon = strrchr(h, ':');
        if (!colon || (size_t)(colon - h) >= hostlen) return -EINVAL;
        snprintf(host, hostlen, "%.*s", (int)(colon - h), h);
    }
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (errno || end == colon + 1 || p < 0 || p > 65535) return -EINVAL;
    if (*end == '/') end++;
    if (*end) return -EINVAL;
    *port = (int)p;
    return 0;
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *ctype, char *body, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    struct gr_metrics_http *h = cls;
    (void)version;
    (void)upload_data;
    (void)con_cls;
    if (*upload_data_size) { /* a body we do not want: discard it */
        *upload_data_size = 0;
        return MHD_YES;
    }
    const char *text = "text/plain; charset=utf-8";
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        char *b = gr_strdup("Method Not Allowed\n");
        return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, text, b, strlen(b));
    }
    if (strcmp(url, "/metrics") == 0) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f) return MHD_NO;
        int rc = gr_metrics_dump_prometheus(h->reg, f);
        fclose(f);
        if (rc != 0) {
            free(buf);
            char *b = gr_strdup("cannot render the metrics\n");
            return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, text, b, strlen(b));
        }
        return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", buf, len);
    }
    if (strcmp(url, "/") == 0) {
        char *b = gr_strdup("Gregor broker: Prometheus metrics at /metrics\n");
        return reply(conn, MHD_HTTP_OK, text, b, strlen(b));
    }
    char *b = gr_strdup("Not Found\n");
    return reply(conn, MHD_HTTP_NOT_FOUND, text, b, strlen(b));
}

int gr_metrics_http_start(const char *url, struct gr_metrics *reg, struct gr_metrics_http **out) {
    char host[256], portstr[16];
    int port;
    *out = NULL;
    if (gr_metrics_http_parse(url, host, sizeof host, &port) != 0) return -EINVAL;
    snprintf(portstr, sizeof portstr, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    int grc = getaddrinfo(host[0] ? host : NULL, portstr, &hints, &ai);
    if (grc != 0 || !ai) {
        gr_error(LOGGER, "gregor.metrics.listener %s: cannot resolve host '%s': %s", url, host, gai_strerror(grc));
        return -EINVAL;
    }
    struct gr_metrics_http *h = gr_calloc(1, sizeof *h);
    h->reg = reg;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
    int e = errno;
    freeaddrinfo(ai);
    if (!h->d) {
        free(h);
        int rc = e ? -e : -EADDRINUSE;
        gr_error(LOGGER, "gregor.metrics.listener %s: cannot listen: %s", url, gr_strerror(rc));
        return rc;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : port;
    gr_info(LOGGER, "Serving Prometheus metrics on %s (port %d) at /metrics", url, h->port);
    *out = h;
    return 0;
}

int gr_metrics_http_port(const struct gr_metrics_http *h) {
    return h ? h->port : -1;
}

void gr_metrics_http_stop(struct gr_metrics_http *h) {
    if (!h) return;
    MHD_stop_daemon(h->d);
    free(h);
}
