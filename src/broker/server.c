/* Broker start-up and shut-down: see server.h. */
#include "broker/server.h"
#include "broker/dynamic_config_manager.h"
#include "broker/quota_manager.h"
#include "broker/add_partitions_to_txn_manager.h"
#include "coordinator/txn_coordinator.h"
#include "storage/producer_state.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/apis.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "broker/broker_id.h"
#include "broker/broker_topic_stats.h"
#include "broker/metadata_cache.h"
#include "broker/unclean_restart.h"
#include "coordinator/group_coordinator.h"
#include "coordinator/producer_id_manager.h"
#include "broker/controlled_shutdown_client.h"
#include "broker/controller_mutation_quota.h"
#include "broker/metrics_http.h"
#include "replication/log_dir_failure.h"
#include "replication/replica_manager.h"
#include "common/config.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "controller/channel_manager.h"
#include "controller/clock.h"
#include "controller/config_change_listener.h"
#include "broker/finalized_features.h"
#include "security/authorizer.h"
#include "controller/controller.h"
#include "net/server.h"
#include "security/broker_security.h"
#include "storage/checkpoint.h"
#include "zk/backend.h"
#include "zk/kzk.h"

#define LOGGER "kafka.server.KafkaServer"

struct gr_server {
    struct gr_config *cfg; /* startup writes the resolved broker.id into it */
    int32_t broker_id;     /* cfg->broker_id; -1 until startup resolved it */
    struct gr_metrics *metrics;

    int lock_fds[GR_MAX_LOG_DIRS];
    int n_locks;
    char *session_path;
    char *metrics_path;

    struct gr_zk_watches *watches;
    gr_server_zk_open_fn zk_open; /* gr_server_set_zk_open; NULL: gr_zk_real_open */
    void *zk_open_arg;
    struct gr_zk_backend *zkb;
    struct gr_kzk *kzk;
    char cluster_id[64];

    struct gr_net_server *net;
    struct gr_metrics_http *metrics_http; /* gregor.metrics.listener; NULL when off */
    struct gr_kzk_broker info; /* our registration */
    int64_t broker_epoch;

    struct gr_clock *clock;
    struct gr_controller *controller;
    struct gr_ctrl_channel *channel;      /* the controller's per-broker send threads */
    struct gr_config_change_listener *config_changes; /* /config/changes -> DynamicConfigManager */

    struct gr_broker *broker;             /* request handlers' shared context */
    struct gr_replica_manager *replicas;  /* logs, produce/fetch, fetchers */
    struct gr_ldf *log_dir_failure;       /* offline log dirs (log_dir_failure.h) */
    struct gr_authorizer *authorizer;     /* authorizer.class.name set; else NULL */

    pthread_mutex_t session_mu; /* guards last_session */
    struct gr_zsession last_session;
    bool have_last_session;

    bool started, shut_down;
    struct gr_gauge *broker_state; /* kafka.server:type=KafkaServer,name=BrokerState */
    /* NetworkProcessorAvgIdlePercent: the network threads' idle time and the clock at the
     * previous scrape (guarded by idle_mu), so each scrape reports the interval since the last */
    pthread_mutex_t idle_mu;
    int64_t idle_prev_us, idle_prev_at_us, net_started_us;
    double idle_prev_ratio;
};

/* Kafka 2.7's BrokerState values (kafka.server.BrokerStates) */
enum { BROKER_STARTING = 1, BROKER_RUNNING = 3, BROKER_PENDING_CONTROLLED_SHUTDOWN = 6, BROKER_SHUTTING_DOWN = 7 };

static void slog(struct gr_server *s, enum gr_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void slog(struct gr_server *s, enum gr_log_level lvl, const char *fmt, ...) {
    char msg[3072];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gr_log(lvl, LOGGER, "[KafkaServer id=%d] %s", s->broker_id, msg);
}

/* ---- session file ----
 *
 *   one line per session: 0x<session id, lower-case hex> SP <password, 2 hex digits per byte> LF
 *
 * The first line is the current session. Lines after it are sessions of earlier incarnations that
 * this one has not yet closed: a start-up writes its new session in front of the ones it read, and
 * rewrites the file with the new session alone once the earlier ones are closed. A broker killed
 * in between (after connecting, before registering) so leaves every session that may still hold
 * its /brokers/ids/N, and the next start closes them all. Readers of the first line alone (tests
 * expiring the session from outside) see the current session. */

int gr_server_write_sessions(const char *path, const struct gr_zsession *z, int n) {
    size_t cap = 128 * (size_t)(n > 0 ? n : 1), off = 0;
    char *buf = gr_malloc(cap);
    for (int k = 0; k < n; k++) {
        off += (size_t)snprintf(buf + off, cap - off, "0x%" PRIx64 " ", (uint64_t)z[k].id);
        int plen = z[k].passwd_len < 0 ? 0 : GR_MIN(z[k].passwd_len, (int)sizeof z[k].passwd);
        for (int i = 0; i < plen; i++) off += (size_t)snprintf(buf + off, cap - off, "%02x", z[k].passwd[i]);
        off += (size_t)snprintf(buf + off, cap - off, "\n");
    }
    char *tmp = gr_asprintf("%s.tmp", path);
    int rc = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = -errno;
    } else {
        if (write(fd, buf, off) != (ssize_t)off) rc = -EIO;
        if (rc == 0 && fsync(fd) != 0) rc = -errno;
        if (close(fd) != 0 && rc == 0) rc = -errno;
        if (rc == 0 && rename(tmp, path) != 0) rc = -errno;
        if (rc != 0) unlink(tmp);
    }
    free(tmp);
    free(buf);
    return rc;
}

/* BrokerTopicMetrics' topic filter: per-topic meters only for topics in the metadata cache. */
static bool topic_known(void *ctx, const char *topic) {
    return gr_mdc_contains_topic(ctx, topic);
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* One line into *out: 0, or GR_ECORRUPT. */
static int parse_session_line(const char *line, struct gr_zsession *out) {
    memset(out, 0, sizeof *out);
    char *end;
    errno = 0;
    unsigned long long id = strtoull(line, &end, 16);
    if (errno || end == line || *end != ' ') return GR_ECORRUPT;
    out->id = (int64_t)id;
    const char *p = end + 1;
    int n = 0;
    while (p[0] && p[1] && hexval(p[0]) >= 0 && hexval(p[1]) >= 0) {
        if (n == (int)sizeof out->passwd) return GR_ECORRUPT;
        out->passwd[n++] = (unsigned char)(hexval(p[0]) * 16 + hexval(p[1]));
        p += 2;
    }
    if (*p && *p != '\n') return GR_ECORRUPT;
    out->passwd_len = n;
    return 0;
}

int gr_server_read_sessions(const char *path, struct gr_zsession *out, int max) {
    FILE *f = fopen(path, "r");
    if (!f) return -errno;
    char line[256];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        struct gr_zsession z;
        if (parse_session_line(line, &z) != 0) break;
        bool dup = false;
        for (int k = 0; k < n; k++) dup = dup || out[k].id == z.id;
        if (!dup) out[n++] = z;
    }
    fclose(f);
    /* a corrupt line ends the list; the sessions before it are still ours to close */
    return n == 0 ? GR_ECORRUPT : n;
}

/* Writes the current session to the file and remembers it; *prev gets the one before (if any).
 * earlier[0..*n) (may be NULL): sessions of earlier processes not yet closed, written after the
 * current one; one equal to the current session is dropped from the array (and from *n). */
static bool persist_session(struct gr_server *s, struct gr_zsession *prev, struct gr_zsession *earlier, int *n) {
    struct gr_zsession cur;
    bool had = false;
    if (gr_zkb_session(s->zkb, &cur) != GR_ZOK) return false;
    pthread_mutex_lock(&s->session_mu);
    if (s->have_last_session && prev) {
        *prev = s->last_session;
        had = s->last_session.id != cur.id;
    }
    s->last_session = cur;
    s->have_last_session = true;
    pthread_mutex_unlock(&s->session_mu);
    struct gr_zsession lines[GR_SERVER_MAX_PREV_SESSIONS + 1] = {cur};
    int nlines = 1;
    if (earlier) {
        int keep = 0;
        for (int k = 0; k < *n; k++)
            if (earlier[k].id != cur.id) earlier[keep++] = earlier[k];
        *n = keep;
        for (int k = 0; k < keep && nlines < (int)(sizeof lines / sizeof *lines); k++) lines[nlines++] = earlier[k];
    }
    int rc = gr_server_write_sessions(s->session_path, lines, nlines);
    if (rc != 0) slog(s, GR_LOG_ERROR, "Cannot write %s: %s", s->session_path, gr_strerror(rc));
    else if (nlines > 1)
        slog(s, GR_LOG_INFO, "ZooKeeper session 0x%" PRIx64 " written to %s (with %d of a previous run)",
             (uint64_t)cur.id, s->session_path, nlines - 1);
    else slog(s, GR_LOG_INFO, "ZooKeeper session 0x%" PRIx64 " written to %s", (uint64_t)cur.id, s->session_path);
    return had;
}

/* Start-up, just before registering (Kafka's moment: the previous run's /brokers/ids/N goes and
 * the new one comes within milliseconds): closes the earlier sessions prevs[0..n) recorded right
 * after connecting (they belong to dead processes: the log-dir lock is ours), then records the
 * current session alone, or with those that could not be closed (gr_kzk_register_broker and the
 * next start try again). Until then they stay in the file, so a process killed in between leaves
 * every session that may still hold /brokers/ids/N for the next start. Returns how many were
 * still alive (closed now: the previous run died without a clean shutdown). */
static int close_previous_sessions(struct gr_server *s, struct gr_zsession *prevs, int n) {
    if (n == 0) return 0;
    int left = 0, live = 0;
    for (int k = 0; k < n; k++) {
        int c = gr_zkb_close_session(s->zkb, &prevs[k]);
        if (c == GR_ZOK) live++;
        if (c == GR_ZOK || c == GR_ZSESSIONEXPIRED) {
            slog(s, GR_LOG_INFO, "Closed the ZooKeeper session 0x%" PRIx64 " of a previous run (%s)",
                 (uint64_t)prevs[k].id, c == GR_ZOK ? "closed" : "already expired");
        } else {
            slog(s, GR_LOG_WARN, "Cannot close the ZooKeeper session 0x%" PRIx64 " of a previous run: %s",
                 (uint64_t)prevs[k].id, gr_zrc_name(c));
            prevs[left++] = prevs[k];
        }
    }
    persist_session(s, NULL, prevs, &left);
    return live;
}

/* Controller hook, on the controller's event thread after a new session was established. */
static bool on_new_session(void *arg, struct gr_zsession *prev) {
    return persist_session(arg, prev, NULL, NULL);
}

/* ---- log dir locks ---- */

static int mkdirs(const char *path) {
    char *p = gr_strdup(path);
    int rc = 0;
    for (char *q = p + 1; *q; q++) {
        if (*q != '/') continue;
        *q = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) rc = -errno;
        *q = '/';
    }
    if (rc == 0 && mkdir(p, 0755) != 0 && errno != EEXIST) rc = -errno;
    free(p);
    return rc;
}

/* Kafka's LogManager.lockLogDirs: an exclusive lock on <dir>/.lock for the process's life. The
 * log manager (storage/log_manager.h), which opens the dirs later, must not lock .lock again
 * (flock locks conflict between two descriptors of the same process). */
static int lock_log_dirs(struct gr_server *s) {
    for (int i = 0; i < s->cfg->num_log_dirs; i++) {
        const char *dir = s->cfg->log_dirs[i];
        int rc = mkdirs(dir);
        if (rc != 0) {
            slog(s, GR_LOG_ERROR, "Cannot create log dir %s: %s", dir, gr_strerror(rc));
            return rc;
        }
        char *path = gr_asprintf("%s/.lock", dir);
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            rc = -errno;
            slog(s, GR_LOG_ERROR, "Cannot open %s: %s", path, gr_strerror(rc));
            free(path);
            return rc;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            slog(s, GR_LOG_ERROR,
                 "Failed to acquire lock on file .lock in %s. A Kafka instance in another process or thread is using "
                 "this directory.",
                 dir);
            close(fd);
            free(path);
            return GR_SERVER_ELOCKED;
        }
        free(path);
        s->lock_fds[s->n_locks++] = fd;
    }
    return 0;
}

static void unlock_log_dirs(struct gr_server *s) {
    for (int i = 0; i < s->n_locks; i++) close(s->lock_fds[i]);
    s->n_locks = 0;
}

/* ---- registration data ---- */

static const char *security_protocol_of(const struct gr_config *cfg, const char *listener) {
    const char *p = gr_config_security_protocol(cfg, listener);
    return p ? p : "PLAINTEXT"; /* gr_config_finish checked every listener has one */
}

/* The host Kafka would advertise for an empty host: the canonical host name. */
static char *canonical_hostname(void) {
    char host[256];
    if (gethostname(host, sizeof host) != 0) return gr_strdup("localhost");
    host[sizeof host - 1] = 0;
    struct addrinfo hints = {.ai_flags = AI_CANONNAME, .ai_family = AF_UNSPEC}, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) == 0 && res && res->ai_canonname) {
        char *c = gr_strdup(res->ai_canonname);
        freeaddrinfo(res);
        return c;
    }
    if (res) freeaddrinfo(res);
    return gr_strdup(host);
}

/* Fills s->info from the advertised listeners; a port of 0 becomes the bound port of the
 * listener of the same name. */
static void build_broker_info(struct gr_server *s) {
    const struct gr_config *cfg = s->cfg;
    memset(&s->info, 0, sizeof s->info);
    s->info.id = s->broker_id;
    s->info.jmx_port = -1;
    s->info.timestamp = 0; /* now */
    s->info.epoch = -1;
    s->info.rack = cfg->broker_rack ? gr_strdup(cfg->broker_rack) : NULL;
    s->info.n_endpoints = cfg->num_advertised_listeners;
    s->info.endpoints = gr_calloc((size_t)(cfg->num_advertised_listeners + 1), sizeof *s->info.endpoints);
    for (int i = 0; i < cfg->num_advertised_listeners; i++) {
        const struct gr_listener *l = &cfg->advertised_listeners[i];
        struct gr_kzk_endpoint *ep = &s->info.endpoints[i];
        ep->listener = gr_strdup(l->name);
        ep->security_protocol = gr_strdup(security_protocol_of(cfg, l->name));
        ep->host = l->host[0] ? gr_strdup(l->host) : canonical_hostname();
        ep->port = l->port;
        if (ep->port == 0 && s->net) {
            for (int j = 0; j < cfg->num_listeners; j++)
                if (strcmp(cfg->listeners[j].name, l->name) == 0) ep->port = gr_net_server_port(s->net, j);
        }
    }
}

/* ---- network ---- */

/* kafka.coordinator.group:type=GroupMetadataManager gauges. */
static void group_collector(void *arg, struct gr_prom_out *o) {
    struct gr_server *s = arg;
    if (!s->broker || !s->broker->group_coordinator) return;
    struct gr_gc_counts c;
    gr_gc_counts(s->broker->group_coordinator, &c);
    const struct { const char *name; int64_t v; } g[] = {
        {"NumGroups", c.groups}, {"NumGroupsPreparingRebalance", c.preparing_rebalance},
        {"NumGroupsCompletingRebalance", c.completing_rebalance}, {"NumGroupsStable", c.stable},
        {"NumGroupsDead", c.dead}, {"NumGroupsEmpty", c.empty}, {"NumOffsets", c.offsets},
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        char jmx[128];
        snprintf(jmx, sizeof jmx, "kafka.coordinator.group:type=GroupMetadataManager,name=%s", g[i].name);
        gr_prom_gauge(o, jmx, (double)g[i].v);
    }
}

/* KIP-511's socket-server-metrics `connections` per client software. */
static void client_software_gauge(void *ctx, const char *listener, const char *name, const char *version,
                                  int64_t connections) {
    char jmx[768];
    snprintf(jmx, sizeof jmx,
             "kafka.server:type=socket-server-metrics,name=connections,clientSoftwareName=%s,clientSoftwareVersion=%s,"
             "listener=%s",
             name, version, listener);
    gr_prom_gauge(ctx, jmx, (double)connections);
}

/* kafka.network:type=RequestChannel figures from the network server's counters. */
static void network_collector(void *arg, struct gr_prom_out *o) {
    struct gr_server *s = arg;
    struct gr_net_stats st;
    gr_net_server_stats(s->net, &st);
    gr_prom_gauge(o, "kafka.network:type=RequestChannel,name=RequestQueueSize", (double)st.request_queue_size);
    gr_prom_gauge(o, "kafka.network:type=RequestChannel,name=ResponseQueueSize", (double)st.response_queue_size);
    /* Kafka's socket-server-metrics connection-count, per listener (Kafka also splits it per
     * network thread: networkProcessor; a sum over either label is the same) */
    for (int i = 0; i < gr_net_server_num_listeners(s->net); i++) {
        const char *lname;
        int64_t n = gr_net_server_listener_connections(s->net, i, &lname);
        char jmx[256];
        snprintf(jmx, sizeof jmx, "kafka.server:type=socket-server-metrics,name=connection-count,listener=%s", lname);
        gr_prom_gauge(o, jmx, (double)n);
        double created, closed, blocked;
        gr_net_server_listener_rates(s->net, i, &created, &closed, &blocked);
        snprintf(jmx, sizeof jmx, "kafka.server:type=socket-server-metrics,name=connection-creation-rate,listener=%s",
                 lname);
        gr_prom_gauge(o, jmx, created);
        snprintf(jmx, sizeof jmx, "kafka.server:type=socket-server-metrics,name=connection-close-rate,listener=%s",
                 lname);
        gr_prom_gauge(o, jmx, closed);
        snprintf(jmx, sizeof jmx, "kafka.network:type=Acceptor,name=AcceptorBlockedPercent,listener=%s", lname);
        gr_prom_gauge(o, jmx, blocked);
    }
    gr_net_server_client_software(s->net, client_software_gauge, o);
    int64_t now = gr_mono_us();
    if (st.num_network_threads > 0) {
        /* Kafka: the mean of the processors' io-wait-ratio over the recent window; here the
         * fraction of the interval since the previous scrape the network threads spent waiting */
        pthread_mutex_lock(&s->idle_mu);
        int64_t dt = now - s->idle_prev_at_us;
        if (dt >= 100000) {
            s->idle_prev_ratio = (double)(st.network_idle_us - s->idle_prev_us) / ((double)dt * st.num_network_threads);
            s->idle_prev_ratio = GR_MAX(0.0, GR_MIN(1.0, s->idle_prev_ratio));
            s->idle_prev_us = st.network_idle_us;
            s->idle_prev_at_us = now;
        }
        double r = s->idle_prev_ratio;
        pthread_mutex_unlock(&s->idle_mu);
        gr_prom_gauge(o, "kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent", r);
    }
    if (st.num_io_threads > 0 && now > s->net_started_us) {
        /* Kafka's RequestHandlerAvgIdlePercent meter is marked with idle ns / threads; the
         * exporter rule reads its MeanRate: the idle fraction since start */
        double r = (double)st.io_idle_us / ((double)(now - s->net_started_us) * st.num_io_threads);
        gr_prom_gauge(o, "kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent",
                      GR_MAX(0.0, GR_MIN(1.0, r)));
    }
    gr_prom_meter(o, "gregor.network:type=RequestMetrics,name=Responses,request=Produce", (double)st.produce_responses);
    gr_prom_meter(o, "gregor.network:type=RequestMetrics,name=QueueTimeUs,request=Produce", (double)st.produce_queue_us);
    gr_prom_meter(o, "gregor.network:type=RequestMetrics,name=TotalTimeUs,request=Produce", (double)st.produce_total_us);
    gr_prom_meter(o, "gregor.network:type=SocketServer,name=NetworkThreadWakeups", (double)st.loop_wakeups);
    gr_prom_meter(o, "gregor.network:type=SocketServer,name=PipelinedRequests", (double)st.requests_pipelined);
}

static int start_network(struct gr_server *s) {
    const struct gr_config *cfg = s->cfg;
    if (cfg->num_listeners == 0) return 0;
    struct gr_net_listener ls[GR_MAX_LISTENERS];
    for (int i = 0; i < cfg->num_listeners; i++) {
        ls[i].name = cfg->listeners[i].name;
        ls[i].host = cfg->listeners[i].host;
        ls[i].port = cfg->listeners[i].port;
    }
    struct gr_net_listener_security sec[GR_MAX_LISTENERS];
    char err[1024];
    int rc = gr_security_broker_init(cfg, sec, err, sizeof err);
    if (rc != 0) {
        slog(s, GR_LOG_ERROR, "%s", err);
        return rc;
    }
    struct gr_net_config nc;
    gr_net_config_init(&nc);
    nc.listeners = ls;
    nc.num_listeners = cfg->num_listeners;
    nc.security = sec;
    if (cfg->socket_request_max_bytes > 0) nc.socket_request_max_bytes = cfg->socket_request_max_bytes;
    nc.connections_max_idle_ms = cfg->connections_max_idle_ms;
    if (cfg->num_network_threads > 0) nc.num_network_threads = cfg->num_network_threads;
    if (cfg->num_io_threads > 0) nc.num_io_threads = cfg->num_io_threads;
    nc.queued_max_requests = cfg->queued_max_requests;
    nc.max_connections = cfg->max_connections;
    nc.max_connections_per_ip = cfg->max_connections_per_ip;
    nc.max_connections_per_ip_overrides = cfg->max_connections_per_ip_overrides;
    nc.max_connection_creation_rate = cfg->max_connection_creation_rate;
    int conn_rates[GR_MAX_LISTENERS];
    for (int i = 0; i < cfg->num_listeners; i++)
        conn_rates[i] = cfg->listener_max_connection_creation_rate_set[i] ? cfg->listener_max_connection_creation_rate[i]
                                                                          : cfg->max_connection_creation_rate;
    nc.listener_max_connection_creation_rate = conn_rates;
    nc.quota_window_num = cfg->quota_window_num;
    nc.quota_window_size_seconds = cfg->quota_window_size_seconds;
    const struct gr_listener *ibl = gr_config_inter_broker_listener(cfg);
    nc.inter_broker_listener = ibl ? ibl->name : NULL;
    rc = gr_net_server_new(&nc, gr_apis_dispatch, s->broker, &s->net);
    gr_security_listeners_release(sec, cfg->num_listeners); /* the server holds its references */
    if (rc != 0) return rc;
    rc = gr_net_server_start(s->net);
    if (rc != 0) {
        gr_net_server_free(s->net);
        s->net = NULL;
        return rc;
    }
    s->net_started_us = s->idle_prev_at_us = gr_mono_us();
    gr_metrics_add_collector(s->metrics, network_collector, s);
    return 0;
}

/* ---- lifecycle ---- */

struct gr_server *gr_server_new(struct gr_config *cfg) {
    struct gr_server *s = gr_calloc(1, sizeof *s);
    s->cfg = cfg;
    s->broker_id = cfg->broker_id;
    s->metrics = gr_metrics_new();
    gr_metrics_add_collector(s->metrics, gr_metrics_process_collector, NULL);
    pthread_mutex_init(&s->session_mu, NULL);
    pthread_mutex_init(&s->idle_mu, NULL);
    s->broker_state = gr_metrics_gauge(s->metrics, "kafka.server:type=KafkaServer,name=BrokerState");
    const char *dir = cfg->num_log_dirs > 0 ? cfg->log_dirs[0] : "/tmp/kafka-logs";
    s->session_path = gr_asprintf("%s/zk-session", dir);
    s->metrics_path = gr_asprintf("%s/gregor-metrics.json", dir);
    return s;
}

static int connect_zookeeper(struct gr_server *s) {
    const struct gr_config *cfg = s->cfg;
    s->watches = gr_zk_watches_new();
    struct gr_zk_real_config zc = {
        .connect = cfg->zookeeper_connect,
        .session_timeout_ms = cfg->zookeeper_session_timeout_ms,
        .connection_timeout_ms = cfg->zookeeper_connection_timeout_ms,
        .metrics = s->metrics,
        .on_watch = gr_zk_watches_on_watch,
        .on_session = gr_zk_watches_on_session,
        .cb_ctx = s->watches,
        .secure_acls = cfg->zookeeper_set_acl,
        .digest_auth = cfg->gregor_zookeeper_auth_digest,
    };
    slog(s, GR_LOG_INFO, "Connecting to zookeeper on %s", cfg->zookeeper_connect);
    int zrc = s->zk_open ? s->zk_open(s->zk_open_arg, &zc, &s->zkb) : gr_zk_real_open(&zc, &s->zkb);
    if (zrc != GR_ZOK) {
        slog(s, GR_LOG_ERROR, "Cannot connect to ZooKeeper at %s: %s", cfg->zookeeper_connect, gr_zrc_name(zrc));
        s->zkb = NULL;
        return GR_EZK;
    }
    s->kzk = gr_kzk_new(s->zkb);
    gr_kzk_set_async(s->kzk, true); /* a controlled shutdown writes ISR shrinks on a helper thread */
    return 0;
}

int gr_server_startup(struct gr_server *s) {
    if (s->started) return 0;
    s->started = true;
    const struct gr_config *cfg = s->cfg;
    slog(s, GR_LOG_INFO, "starting");
    gr_gauge_set(s->broker_state, BROKER_STARTING);
    int rc = lock_log_dirs(s);
    if (rc != 0) goto fail;

    /* Sessions of earlier incarnations that may still hold /brokers/ids/N (session file). */
    struct gr_zsession prevs[GR_SERVER_MAX_PREV_SESSIONS];
    int nprev = gr_server_read_sessions(s->session_path, prevs, GR_SERVER_MAX_PREV_SESSIONS);
    if (nprev < 0) nprev = 0;

    if ((rc = connect_zookeeper(s)) != 0) goto fail;
    persist_session(s, NULL, prevs, &nprev); /* in front of the earlier ones, until closed */

    if ((rc = gr_kzk_ensure_paths(s->kzk)) != 0) {
        slog(s, GR_LOG_ERROR, "Cannot create the persistent ZooKeeper paths: %s", gr_kzk_strerror(rc));
        goto fail;
    }
    if ((rc = gr_kzk_get_or_create_cluster_id(s->kzk, s->cluster_id)) != 0) {
        slog(s, GR_LOG_ERROR, "Cannot get or create the cluster id: %s", gr_kzk_strerror(rc));
        goto fail;
    }
    slog(s, GR_LOG_INFO, "Cluster ID = %s", s->cluster_id);

    /* broker.id: configured, stored in meta.properties or generated (broker_id.h). Every
     * component started below reads it from s->broker_id or cfg->broker_id. */
    int32_t broker_id;
    if ((rc = gr_broker_id_resolve(cfg, s->kzk, &broker_id)) != 0) goto fail;
    s->cfg->broker_id = s->broker_id = broker_id;

    /* Request handlers' context, then the logs (meta.properties checked, crash recovery) and the
     * replica manager (b->replica_manager, used by Produce/Fetch/ListOffsets/OffsetForLeaderEpoch). */
    s->broker = gr_broker_new(cfg, s->broker_id);
    s->broker->zk = s->kzk;
    s->broker->metrics = s->metrics;
    s->broker->topic_stats = gr_bts_new(s->metrics);
    gr_bts_set_topic_filter(s->broker->topic_stats, topic_known, s->broker->metadata);
    if (cfg->gregor_metrics_listener && cfg->gregor_metrics_listener[0] &&
        (rc = gr_metrics_http_start(cfg->gregor_metrics_listener, s->metrics, &s->metrics_http)) != 0) {
        slog(s, GR_LOG_ERROR, "Cannot start the metrics endpoint gregor.metrics.listener=%s: %s",
             cfg->gregor_metrics_listener, gr_strerror(rc));
        goto fail;
    }
    s->broker->dynamic_config = gr_dcm_new(s->broker); /* before the logs: their configs */
    if (!gr_dcm_loaded(s->broker->dynamic_config)) {
        slog(s, GR_LOG_ERROR, "Cannot load the dynamic broker configs (/config/brokers) or the SCRAM credentials "
             "(/config/users) from ZooKeeper");
        rc = GR_EZK;
        goto fail;
    }
    s->broker->quotas = gr_quota_manager_new(s->broker);
    s->broker->controller_mutation_quota = gr_cmq_new(s->broker);
    snprintf(s->broker->cluster_id, sizeof s->broker->cluster_id, "%s", s->cluster_id);
    s->log_dir_failure = gr_ldf_start(s->broker, cfg, s->kzk);
    if ((rc = gr_replica_manager_new(s->broker, &s->replicas)) != 0) {
        slog(s, GR_LOG_ERROR, "Cannot start the log and replica manager: %s",
             rc == GR_EMETA_BROKER_ID   ? "a log dir belongs to another broker.id (meta.properties)"
             : rc == GR_EMETA_CLUSTER_ID ? "a log dir belongs to another cluster (meta.properties cluster.id)"
                                         : gr_strerror(rc));
        goto fail;
    }

    /* The authorizer (ACL cache loaded from ZooKeeper) before the first request. */
    if (cfg->authorizer_class_name) {
        struct gr_authorizer_config ac = {.super_users = cfg->super_users,
                                          .allow_everyone_if_no_acl_found = cfg->allow_everyone_if_no_acl_found};
        s->authorizer = gr_authorizer_new(&ac);
        if ((rc = gr_authorizer_start(s->authorizer, s->kzk, s->watches)) != 0) goto fail;
        s->broker->authorizer = s->authorizer;
    }
    if (cfg->gregor_test_principal_by_client_id)
        slog(s, GR_LOG_WARN, "gregor.test.principal.by.client.id=true: clients choose their principal through "
                             "client.id. FOR TESTS ONLY: never on a real cluster");

    /* Group coordinator: after the replica manager (its storage), before the network. */
    if ((rc = gr_group_coordinator_start(s->broker, s->replicas)) != 0) {
        slog(s, GR_LOG_ERROR, "Cannot start the group coordinator: %s", gr_strerror(rc));
        goto fail;
    }
    gr_metrics_add_collector(s->metrics, group_collector, s);

    /* Transaction coordinator: after the replica manager, before the network. */
    {
        const struct gr_config *c = s->cfg;
        struct gr_txn_config tcfg = {
            .num_partitions = c->transaction_state_log_num_partitions,
            .max_timeout_ms = c->transaction_max_timeout_ms,
            .id_expiration_ms = c->transactional_id_expiration_ms,
            .abort_interval_ms = c->transaction_abort_timed_out_transaction_cleanup_interval_ms,
            .remove_expired_interval_ms = c->transaction_remove_expired_transaction_cleanup_interval_ms};
        gr_pstate_set_verification_enabled(c->transaction_partition_verification_enable);
        s->broker->add_partitions_to_txn_manager = gr_aptm_new(s->broker);
        if ((rc = gr_txn_coordinator_start(s->broker, s->replicas, &tcfg)) != 0) {
            slog(s, GR_LOG_ERROR, "Cannot start the transaction coordinator: %s", gr_strerror(rc));
            goto fail;
        }
    }

    /* Producer ids for InitProducerId: claim this broker's first block now, as Kafka's
     * transaction coordinator does at start-up (a failure is retried on the first request). */
    s->broker->producer_id_manager = gr_pidm_new(s->kzk, s->broker_id);
    if ((rc = gr_pidm_claim(s->broker->producer_id_manager)) != 0)
        slog(s, GR_LOG_WARN, "Cannot claim a producer id block yet: %s", gr_kzk_strerror(rc));
    rc = 0;

    /* Every API of the table (api/apis.c) can be served from here on. */
    if ((rc = start_network(s)) != 0) {
        slog(s, GR_LOG_ERROR, "Cannot start the network server: %s", gr_strerror(rc));
        goto fail;
    }
    s->broker->net = s->net;
    gr_quota_manager_reload_ips(s->broker->quotas); /* /config/ips: the per-IP connection rates */

    build_broker_info(s);
    /* registration may still meet any of them holding /brokers/ids/N (one that could not be
     * closed, or one whose close the server has not yet applied): it closes that one again */
    struct gr_zsession earlier[GR_SERVER_MAX_PREV_SESSIONS];
    int nearlier = nprev;
    memcpy(earlier, prevs, sizeof earlier);
    /* a previous run that died holding its session: Kafka's restart gap (unclean_restart.h) */
    if (close_previous_sessions(s, prevs, nprev) > 0)
        gr_unclean_restart_wait(s->kzk, cfg, s->broker_id, cfg->zookeeper_session_timeout_ms);
    rc = gr_kzk_register_broker(s->kzk, &s->info, earlier, nearlier, &s->broker_epoch);
    if (rc == GR_KZK_EBROKER_REGISTERED) {
        slog(s, GR_LOG_ERROR, "broker.id %d is already registered by another live broker (another session holds "
                              "/brokers/ids/%d)", s->broker_id, s->broker_id);
        rc = GR_SERVER_EREGISTERED;
        goto fail;
    }
    if (rc != 0) {
        slog(s, GR_LOG_ERROR, "Cannot register broker %d: %s", s->broker_id, gr_kzk_strerror(rc));
        goto fail;
    }
    s->info.epoch = s->broker_epoch;
    atomic_store(&s->broker->broker_epoch, s->broker_epoch); /* until the controller is attached */

    s->clock = gr_controller_real_clock_new();
    s->channel = gr_ctrl_channel_new_for_broker(cfg, s->broker_id, s->metrics);
    struct gr_controller_config cc = {
        .broker_id = s->broker_id,
        .broker_info = &s->info,
        .broker_epoch = s->broker_epoch,
        .kzk = s->kzk,
        .watches = s->watches,
        .clock = s->clock,
        .sender = &gr_ctrl_channel_ops,
        .sender_ctx = s->channel,
        .metrics = s->metrics,
        .broker_config = cfg,
        .auto_leader_rebalance_enable = cfg->auto_leader_rebalance_enable,
        .leader_imbalance_check_interval_ms = cfg->leader_imbalance_check_interval_seconds * 1000,
        .delete_topic_enable = cfg->delete_topic_enable,
        .standby_enable = cfg->controller_standby_enable,
        .standby_refresh_ms = cfg->controller_standby_refresh_ms,
        .on_new_session = on_new_session,
        .hook_arg = s,
    };
    s->controller = gr_controller_new(&cc);
    s->broker->controller = s->controller;
    if ((rc = gr_controller_startup(s->controller)) != 0) {
        slog(s, GR_LOG_ERROR, "Cannot start the controller: %s", gr_strerror(rc));
        goto fail;
    }
    gr_dcm_controller_attached(s->broker->dynamic_config);
    s->config_changes = gr_config_change_listener_start_with(s->kzk, s->watches, s->controller,
                                                             gr_dcm_on_entity_change, s->broker->dynamic_config);
    s->broker->finalized_features = gr_finalized_features_start(s->kzk, s->watches);
    gr_gauge_set(s->broker_state, BROKER_RUNNING);
    slog(s, GR_LOG_INFO, "started (broker epoch %" PRId64 ")", s->broker_epoch);
    return 0;

fail:
    gr_server_shutdown(s);
    return rc;
}

void gr_server_shutdown(struct gr_server *s) {
    if (!s->started || s->shut_down) return;
    s->shut_down = true;
    slog(s, GR_LOG_INFO, "shutting down");
    if (s->kzk) gr_kzk_stop_waiting(s->kzk); /* ZooKeeper down: no call may block the shutdown */
    gr_metrics_http_stop(s->metrics_http); /* no scrape may see subsystems being freed */
    s->metrics_http = NULL;
    /* Leaving: the become-follower LeaderAndIsr of our controlled shutdown (every partition we
     * led) must not start fetchers we would stop a moment later (16 s at 33k partitions). */
    if (s->replicas) gr_replica_manager_begin_shutdown(s->replicas);
    if (s->controller && s->net && s->cfg->controlled_shutdown_enable) {
        gr_gauge_set(s->broker_state, BROKER_PENDING_CONTROLLED_SHUTDOWN);
        const struct gr_listener *ibl = gr_config_inter_broker_listener(s->cfg);
        struct gr_cs_client_config csc = {
            .broker_id = s->broker_id,
            .broker_epoch = gr_server_broker_epoch(s),
            .kzk = s->kzk,
            .metadata = s->broker ? s->broker->metadata : NULL,
            .listener = ibl ? ibl->name : NULL,
            .max_retries = s->cfg->controlled_shutdown_max_retries,
            .retry_backoff_ms = s->cfg->controlled_shutdown_retry_backoff_ms,
            .socket_timeout_ms = s->cfg->controller_socket_timeout_ms,
            .request_timeout_ms = s->cfg->request_timeout_ms,
        };
        gr_controlled_shutdown_run(&csc);
    }
    gr_gauge_set(s->broker_state, BROKER_SHUTTING_DOWN);
    if (s->net) gr_net_server_stop(s->net);
    if (s->net) gr_metrics_remove_collector(s->metrics, network_collector, s);
    if (s->broker) gr_delete_topics_abort_waits(s->broker);
    if (s->broker) gr_group_coordinator_shutdown(s->broker->group_coordinator); /* before its storage */
    if (s->broker) gr_aptm_shutdown(s->broker->add_partitions_to_txn_manager); /* waiting produces answered */
    if (s->broker) gr_txn_coordinator_shutdown(s->broker->txn_coordinator);
    if (s->replicas) gr_replica_manager_shutdown(s->replicas); /* flush + checkpoints */
    gr_ldf_stop(s->log_dir_failure);
    s->log_dir_failure = NULL;
    gr_config_change_listener_stop(s->config_changes);
    s->config_changes = NULL;
    if (s->broker) {
        gr_finalized_features_stop(s->broker->finalized_features);
        s->broker->finalized_features = NULL;
    }
    gr_authorizer_free(s->authorizer); /* network stopped: no request uses it */
    s->authorizer = NULL;
    if (s->broker) s->broker->authorizer = NULL;
    if (s->controller) gr_controller_shutdown(s->controller);
    if (s->kzk) {
        gr_kzk_free(s->kzk);
        s->kzk = NULL;
    }
    if (s->zkb) {
        gr_zkb_destroy(s->zkb); /* closes the session: our ephemerals go now */
        s->zkb = NULL;
    }
    if (s->controller) {
        gr_controller_free(s->controller);
        s->controller = NULL;
    }
    if (s->clock) {
        gr_clock_free(s->clock);
        s->clock = NULL;
    }
    if (s->channel) {
        gr_ctrl_channel_free(s->channel);
        s->channel = NULL;
    }
    if (s->broker) s->broker->net = NULL;
    if (s->net) {
        gr_net_server_free(s->net);
        s->net = NULL;
    }
    gr_metrics_remove_collector(s->metrics, group_collector, s); /* no-op if never added */
    if (s->broker && s->broker->group_coordinator) { /* its writes completed in the rm shutdown */
        gr_group_coordinator_free(s->broker->group_coordinator);
        gr_txn_coordinator_free(s->broker->txn_coordinator);
        s->broker->txn_coordinator = NULL;
        s->broker->group_coordinator = NULL;
    }
    if (s->replicas) {
        gr_replica_manager_free(s->replicas);
        s->replicas = NULL;
    }
    if (s->broker) {
        gr_aptm_free(s->broker->add_partitions_to_txn_manager);
        s->broker->add_partitions_to_txn_manager = NULL;
        gr_pidm_free(s->broker->producer_id_manager);
        s->broker->producer_id_manager = NULL;
        gr_dcm_free(s->broker->dynamic_config);
        gr_quota_manager_free(s->broker->quotas);
        gr_cmq_free(s->broker->controller_mutation_quota);
        s->broker->controller_mutation_quota = NULL;
        gr_broker_free(s->broker);
        s->broker = NULL;
    }
    if (s->watches) {
        gr_zk_watches_free(s->watches);
        s->watches = NULL;
    }
    unlock_log_dirs(s);
    slog(s, GR_LOG_INFO, "shut down completed");
}

void gr_server_free(struct gr_server *s) {
    if (!s) return;
    gr_server_shutdown(s);
    gr_kzk_broker_release(&s->info);
    gr_metrics_free(s->metrics);
    pthread_mutex_destroy(&s->session_mu);
    pthread_mutex_destroy(&s->idle_mu);
    free(s->session_path);
    free(s->metrics_path);
    free(s);
}

void gr_server_set_zk_open(struct gr_server *s, gr_server_zk_open_fn fn, void *arg) {
    s->zk_open = fn;
    s->zk_open_arg = arg;
}

int gr_server_listener_port(struct gr_server *s, int i) {
    return s->net && i >= 0 && i < s->cfg->num_listeners ? gr_net_server_port(s->net, i) : 0;
}

int gr_server_dump_metrics(struct gr_server *s) { return gr_metrics_dump_file(s->metrics, s->metrics_path); }
struct gr_metrics *gr_server_metrics(struct gr_server *s) { return s->metrics; }
struct gr_controller *gr_server_controller(struct gr_server *s) { return s->controller; }
const char *gr_server_cluster_id(struct gr_server *s) { return s->cluster_id; }
int64_t gr_server_broker_epoch(struct gr_server *s) {
    return s->controller ? gr_controller_broker_epoch(s->controller) : s->broker_epoch;
}
