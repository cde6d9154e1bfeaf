/* Broker start-up and shut-down (Kafka's KafkaServer).
 *
 * gr_server_startup, in Kafka's order:
 *   1. lock every log dir (<dir>/.lock, flock) -- a second process on the same dirs is refused
 *   2. connect to ZooKeeper (the chroot is created if missing), persist the session to
 *      <first log dir>/zk-session in front of the earlier incarnations' sessions listed there
 *   3. create Kafka's persistent paths, get or create /cluster/id, then the broker id
 *      (broker_id.h: the configured broker.id, the one in the log dirs' meta.properties, or with
 *      broker.id=-1 a generated one); it is written into the config's broker_id, which every
 *      component started afterwards reads
 *   4. the request handlers' context (struct gr_broker), the log-dir failure handler, the log
 *      manager and replica manager (meta.properties checked, logs recovered), the group
 *      coordinator
 *   5. start the network server on the listeners: every API of the table (api/apis.c) is served
 *   6. close the earlier incarnations' sessions listed in zk-session (their ephemerals go), then
 *      register /brokers/ids/N with the advertised listeners (broker epoch = czxid); held by
 *      anyone else -> GR_SERVER_EREGISTERED
 *   7. start the controller (election happens on its event thread; its channel manager sends to
 *      the other brokers) and the /config/changes listener
 *
 * gr_server_shutdown: controlled shutdown (when enabled: ask the controller to move leadership
 * away, controlled_shutdown_client.h), stop the network server, answer waiting DeleteTopics
 * requests, shut down the group coordinator and the replica manager (flush, checkpoints), stop
 * the controller (resigning and deleting /controller if it was ours), close the ZooKeeper session
 * (our ephemerals vanish at once), release the log-dir locks.
 *
 * Files under <first log dir>:
 *   zk-session          lines "0x<session id hex> <password hex>\n": the current session first,
 *                       then earlier incarnations' sessions not yet closed (a start-up writes
 *                       its own in front of them, closes them, then writes its own alone);
 *                       rewritten atomically after the connection and after every new session
 *                       (tests expire the session from outside with its first line)
 *   gregor-metrics.json the metrics registry, written by gr_server_dump_metrics (gregord: 2 s);
 *                       the same registry is served at gregor.metrics.listener (metrics_http.h)
 *
 * Threading: new/startup/shutdown/free on one owner thread; the accessors from any thread. */
#ifndef GR_BROKER_SERVER_H
#define GR_BROKER_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "zk/backend.h"
#include "zk/kzk.h"

struct gr_config;
struct gr_server;
struct gr_metrics;
struct gr_controller;

enum {
    GR_SERVER_EREGISTERED = GR_KZK_EBROKER_REGISTERED, /* broker.id held by another live broker */
    GR_SERVER_ELOCKED = -1201,                         /* a log dir is locked by another process */
};

/* Creates a server for cfg (borrowed; finished with gr_config_finish; must outlive the server).
 * Nothing is started. gr_server_startup sets cfg->broker_id to the resolved id (step 3), as
 * Kafka's KafkaServer sets config.brokerId: when broker.id was -1 the caller sees the id found in
 * meta.properties or generated once startup got that far. */
struct gr_server *gr_server_new(struct gr_config *cfg);

/* Starts everything (see above). Returns 0, GR_SERVER_EREGISTERED, GR_SERVER_ELOCKED, GR_EZK,
 * GR_EMETA_BROKER_ID / GR_EMETA_CLUSTER_ID (storage/checkpoint.h: meta.properties of another
 * broker or cluster), -errno ...; on failure whatever was started is stopped again (the reason is logged). */
int gr_server_startup(struct gr_server *s);

/* Shuts down what startup started. Idempotent. */
void gr_server_shutdown(struct gr_server *s);

/* Shuts down if needed and frees. NULL is ignored. */
void gr_server_free(struct gr_server *s);

/* ZooKeeper seam (in-process tests and fuzz targets, e.g. tests/fuzz/fuzz_broker_session.c): set
 * before gr_server_startup, step 2 calls fn(arg, zc, out) instead of gr_zk_real_open(zc, out),
 * with the same configuration (connect string, timeouts and the watch/session callbacks the
 * backend must deliver to). The backend fn returns in *out is OWNED by the server exactly like
 * the real one: destroyed at shutdown (which closes its session), never before. fn returns a
 * gr_zrc; anything but GR_ZOK fails the start-up with GR_EZK. The backend must follow every
 * rule of zk/backend.h, including calls from several threads at once. arg is borrowed and must
 * outlive the server. Owner thread, before startup. */
typedef int (*gr_server_zk_open_fn)(void *arg, const struct gr_zk_real_config *zc, struct gr_zk_backend **out);
void gr_server_set_zk_open(struct gr_server *s, gr_server_zk_open_fn fn, void *arg);

/* The port listener i (the config's order) is bound to: the configured one, or the one the
 * kernel chose for port 0. 0 before startup or when there is no such listener. Any thread
 * between startup and shutdown. */
int gr_server_listener_port(struct gr_server *s, int i);

/* Writes the metrics atomically to <first log dir>/gregor-metrics.json. Returns 0 or -errno. */
int gr_server_dump_metrics(struct gr_server *s);

struct gr_metrics *gr_server_metrics(struct gr_server *s);
/* NULL before startup. */
struct gr_controller *gr_server_controller(struct gr_server *s);
const char *gr_server_cluster_id(struct gr_server *s);
int64_t gr_server_broker_epoch(struct gr_server *s);

/* Session file helpers (exposed for tests): write n lines "0x<id> <hex password>\n" atomically
 * (fsynced, then renamed) / read at most max distinct sessions, first line first. read returns
 * how many (>= 1), -errno (-ENOENT: no file), or GR_ECORRUPT when the first line does not parse. */
#define GR_SERVER_MAX_PREV_SESSIONS 8
int gr_server_write_sessions(const char *path, const struct gr_zsession *s, int n);
int gr_server_read_sessions(const char *path, struct gr_zsession *out, int max);

#endif
