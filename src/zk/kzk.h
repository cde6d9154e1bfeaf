/* Kafka's znodes as typed calls over a gr_zk_backend (Kafka 2.7's KafkaZkClient + ZkData).
 *
 * Three parts:
 *   A. Pure JSON codecs (znode_json.c): struct <-> bytes, Kafka's exact JSON. Decoders treat
 *      input as hostile: bad JSON / wrong types / out-of-range numbers -> GR_ECORRUPT, never a
 *      crash. Encoders return a malloc'd NUL-terminated string (caller frees).
 *   B. Typed calls (kzk.c) over a backend. They retry ZooKeeper CONNECTIONLOSS/OPERATIONTIMEOUT
 *      until reconnected (Kafka's retryRequestsUntilConnected), stopping on session expiry or
 *      close. All controller writes are guarded multis (check /controller_epoch zkVersion);
 *      every one that writes a partition state znode also sets its topic's standby stamp
 *      (gr_kzk_get_state_stamps) in the same transaction.
 *   C. A watch registry (watch.c) mapping paths to handlers, fed by the backend's callbacks.
 *
 * Return codes of kzk calls: 0, or
 *   GR_ECONTROLLER_MOVED  guarded write refused: /controller_epoch's version changed (or election lost)
 *   GR_EZK                any other ZooKeeper failure (logged with the path and ZooKeeper code)
 *   GR_ECORRUPT           a znode held data we cannot parse (logged)
 *   GR_KZK_ENONODE / GR_KZK_EEXISTS / GR_KZK_EBADVERSION / GR_KZK_ENOTEMPTY  specific outcomes
 *   GR_KZK_EBROKER_REGISTERED  /brokers/ids/N is held by a session that is not ours
 * Per-item results inside arrays use the same codes.
 *
 * Threading: a gr_kzk may be used from several threads at once (the backend serialises what it
 * must); it is never to be called from a backend/watch callback. The setters (batch size, depth,
 * async, state stamps, stamp id lookup) are called before the gr_kzk is shared. The stamp id
 * lookup (gr_kzk_set_stamp_id_lookup) is its setter's (the controller's): kzk calls it only on the
 * thread making a guarded write, and never after that owner is gone (gregord frees the kzk first).
 */
#ifndef GR_ZK_KZK_H
#define GR_ZK_KZK_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zk/backend.h"

enum {
    GR_KZK_ENONODE = -1101,
    GR_KZK_EEXISTS = -1102,
    GR_KZK_EBADVERSION = -1103,
    GR_KZK_ENOTEMPTY = -1104,
    GR_KZK_EBROKER_REGISTERED = -1105,
};
/* Text for kzk return codes; falls back to gr_strerror for others. */
const char *gr_kzk_strerror(int rc);
/* Maps a gr_zrc to a kzk code (ZOK->0, NONODE->GR_KZK_ENONODE, ..., other -> GR_EZK). */
int gr_kzk_from_zrc(int zrc);

/* ======================================================================================
 * A. Znode JSON codecs (pure)
 * ====================================================================================== */

/* One advertised endpoint: "<listener>://<host>:<port>", security protocol from
 * listener_security_protocol_map (defaults to the listener name when absent, as Kafka does for
 * v1-v3 nodes, where the listener name is the protocol). */
struct gr_kzk_endpoint {
    char *listener;            /* e.g. "PLAINTEXT" */
    char *security_protocol;   /* e.g. "PLAINTEXT" */
    char *host;                /* may be "" (wildcard); IPv6 without brackets */
    int32_t port;
};

/* A supported-feature range in the broker znode's "features" map. */
struct gr_kzk_feature {
    char *name;
    int16_t min_version;
    int16_t max_version;
};

/* /brokers/ids/N (v5). Encode writes: version, host, port, endpoints, jmx_port, timestamp
 * (a string of ms), listener_security_protocol_map, rack (only when non-NULL), features.
 * host/port are those of the first PLAINTEXT endpoint, else null / -1 (as Kafka). */
struct gr_kzk_broker {
    int32_t id;
    int32_t version;           /* decode: as found; encode: ignored (always 5) */
    int32_t jmx_port;          /* -1 */
    int64_t timestamp;         /* decode: parsed; encode: 0 means "now" */
    int n_endpoints;
    struct gr_kzk_endpoint *endpoints;
    char *rack;                /* NULL when not set */
    int n_features;
    struct gr_kzk_feature *features;
    int64_t epoch;             /* filled by reads: czxid of the znode; -1 otherwise */
};
char *gr_kzk_broker_encode(const struct gr_kzk_broker *b, size_t *len);
int gr_kzk_broker_decode(int32_t id, const char *data, size_t len, struct gr_kzk_broker *out);
void gr_kzk_broker_release(struct gr_kzk_broker *b);
/* Deep copy (dst must be released separately). */
void gr_kzk_broker_copy(struct gr_kzk_broker *dst, const struct gr_kzk_broker *src);
/* Parses "LISTENER://host:port" ("[::1]" accepted) into ep (security_protocol = NULL).
 * Returns 0 or GR_ECORRUPT. */
int gr_kzk_endpoint_parse(const char *s, struct gr_kzk_endpoint *ep);
/* Parses a non-negative decimal int32 string exactly ("0", "17"; no sign, no spaces, at most
 * INT32_MAX): broker ids, ports, partition keys. Returns 0 or -1 (out untouched). */
int gr_kzk_parse_nonneg_i32(const char *s, int32_t *out);

/* /controller: {"version":1,"brokerid":N,"timestamp":"<ms>"}, plus "gregor_state_stamps":1 when
 * state_stamps (Gregor's: this controller stamps every state write, see gr_kzk_get_state_stamps;
 * Kafka 2.7 reads only "brokerid"). Decode returns the brokerid; (Kafka also accepts a bare
 * integer from very old versions: so do we.) gr_kzk_controller_stamps: whether the data carries
 * the stamps marker. */
#define GR_KZK_CONTROLLER_STAMPS_KEY "gregor_state_stamps"
char *gr_kzk_controller_encode(int32_t broker_id, int64_t timestamp_ms, bool state_stamps, size_t *len);
int gr_kzk_controller_decode(const char *data, size_t len, int32_t *broker_id);
bool gr_kzk_controller_stamps(const char *data, size_t len);

/* /controller_epoch: plain decimal text, e.g. "5". */
char *gr_kzk_controller_epoch_encode(int32_t epoch, size_t *len);
int gr_kzk_controller_epoch_decode(const char *data, size_t len, int32_t *epoch);

/* /cluster/id: {"version":"1","id":"<22 chars>"}. id_out must hold 64 bytes. */
char *gr_kzk_cluster_id_encode(const char *id, size_t *len);
int gr_kzk_cluster_id_decode(const char *data, size_t len, char id_out[64]);
/* A fresh cluster id: 22-char URL-safe base64 (no padding) of a random (v4) UUID. */
void gr_kzk_cluster_id_generate(char out[23]);

/* /brokers/topics/T (version 2): partitions, adding_replicas, removing_replicas. Version 3
 * (2.8, KIP-516) adds "topic_id" (Uuid text, common/uuid.h), kept in topic_id; encode writes v3
 * iff topic_id is set, else v2. Every writer of the znode carries the id it read (an id never
 * changes once set). Partitions are kept sorted by partition id. Decode rejects negative
 * partition ids / non-integer replicas / duplicate partitions / a topic_id that is no Uuid. */
/* A partition's replica assignment, Kafka's ReplicaAssignment: replicas (RS), adding_replicas
 * (AR) and removing_replicas (RR; both NULL/0 when not reassigning). Declared once, here, and
 * spliced into every struct that carries one (this znode's partitions, the controller context's
 * partitions, controller/reassignment.h's struct gr_replica_assignment), so the field names and
 * types cannot drift apart; each struct says who owns the arrays. */
#define GR_REPLICA_ASSIGNMENT_FIELDS \
    int n_replicas;                  \
    int32_t *replicas;               \
    int n_adding;                    \
    int32_t *adding;                 \
    int n_removing;                  \
    int32_t *removing;

struct gr_kzk_partition_assignment {
    int32_t partition;
    GR_REPLICA_ASSIGNMENT_FIELDS /* owned by the assignment (gr_kzk_topic_assignment_release) */
};
struct gr_kzk_topic_assignment {
    char *topic;               /* set by reads / caller; not in the JSON */
    char *topic_id;            /* NULL unless version 3; else a valid Uuid's text */
    int n_partitions;
    struct gr_kzk_partition_assignment *partitions;
    int32_t zk_version;        /* filled by reads */
    int64_t czxid;             /* filled by reads: the znode's creation (tells a re-created topic) */
    int rc;                    /* per-item result of batched reads */
    bool unchanged;            /* gr_kzk_get_topic_assignments_since: the znode is the known one
                                * (rc 0, not decoded: no partitions, no topic id) */
};
char *gr_kzk_topic_assignment_encode(const struct gr_kzk_topic_assignment *a, size_t *len);
int gr_kzk_topic_assignment_decode(const char *data, size_t len,
                                   struct gr_kzk_topic_assignment *out);
void gr_kzk_topic_assignment_release(struct gr_kzk_topic_assignment *a);

/* /brokers/topics/T/partitions (Gregor's; Kafka creates it empty and never reads or writes its
 * data): the standby stamp's data (gr_kzk_set_stamp_id_lookup), {"topic_id":"<Uuid>"}, a second
 * copy of T's id that a Kafka 2.x tool rewriting /brokers/topics/T never touches and that dies
 * with T's znode (its child). Encode: NULL id -> "" (len 0). Decode: empty data -> *id NULL, 0;
 * an object with a valid Uuid "topic_id" -> *id malloc'd, 0; anything else (not JSON, no or a
 * bad topic_id, the zero Uuid: never a topic's) -> *id NULL, GR_ECORRUPT. */
char *gr_kzk_topic_stamp_encode(const char *topic_id, size_t *len);
int gr_kzk_topic_stamp_decode(const char *data, size_t len, char **topic_id);

/* …/partitions/P/state: {"version":1,"leader":L,"leader_epoch":E,"controller_epoch":C,"isr":[..]}.
 * zk_version = the znode's data version (filled by reads; the expected version for updates). */
struct gr_kzk_leader_and_isr {
    int32_t leader;
    int32_t leader_epoch;
    int32_t controller_epoch;
    int n_isr;
    int32_t *isr;
    int32_t zk_version;
};
char *gr_kzk_partition_state_encode(const struct gr_kzk_leader_and_isr *s, size_t *len);
int gr_kzk_partition_state_decode(const char *data, size_t len, struct gr_kzk_leader_and_isr *out);
/* The same decoder without its allocation-free fast path (jansson only): the reference the
 * fuzzer and the tests compare the fast path with. */
int gr_kzk_partition_state_decode_json(const char *data, size_t len, struct gr_kzk_leader_and_isr *out);
void gr_kzk_leader_and_isr_release(struct gr_kzk_leader_and_isr *s);

/* /config/<type>/<name>: {"version":1,"config":{"k":"v",...}} (values are strings). */
struct gr_kzk_config {
    int n;
    char **keys;
    char **values;
};
char *gr_kzk_config_encode(const struct gr_kzk_config *c, size_t *len);
int gr_kzk_config_decode(const char *data, size_t len, struct gr_kzk_config *out);
void gr_kzk_config_release(struct gr_kzk_config *c);
/* Sets (copy) or replaces key=value. */
void gr_kzk_config_set(struct gr_kzk_config *c, const char *key, const char *value);
/* The value for key or NULL (borrowed). */
const char *gr_kzk_config_get(const struct gr_kzk_config *c, const char *key);

/* /config/changes/config_change_N: {"version":2,"entity_path":"topics/T"}. Decoding also takes
 * Kafka's version 1, {"version":1,"entity_type":"topics"|"clients","entity_name":"N"}, as the
 * entity path "topics/N" / "clients/N" (Kafka 2.7's ConfigEntityChangeNotificationHandler); any
 * other version, or another version-1 entity type, is GR_ECORRUPT (Kafka logs and skips it). */
char *gr_kzk_config_change_encode(const char *entity_path, size_t *len);
int gr_kzk_config_change_decode(const char *data, size_t len, char **entity_path);

/* A topic-partition. topic is owned by whoever owns the containing array. */
struct gr_kzk_tp {
    char *topic;
    int32_t partition;
};
void gr_kzk_tps_release(struct gr_kzk_tp *tps, int n); /* frees topics and the array */

/* /admin/reassign_partitions: {"version":1,"partitions":[{"topic":t,"partition":p,
 * "replicas":[..]}]}. replicas NULL/n=-1 never occurs on decode (missing -> GR_ECORRUPT). */
struct gr_kzk_reassignment_entry {
    char *topic;
    int32_t partition;
    int n_replicas;
    int32_t *replicas;
};
struct gr_kzk_reassignment {
    int n;
    struct gr_kzk_reassignment_entry *entries;
};
char *gr_kzk_reassignment_encode(const struct gr_kzk_reassignment *r, size_t *len);
int gr_kzk_reassignment_decode(const char *data, size_t len, struct gr_kzk_reassignment *out);
void gr_kzk_reassignment_release(struct gr_kzk_reassignment *r);

/* {"version":1,"partitions":[{"topic":t,"partition":p},...]}: used by
 * /admin/preferred_replica_election and /isr_change_notification/isr_change_N. Decode returns a
 * malloc'd array (free with gr_kzk_tps_release). */
char *gr_kzk_tp_list_encode(const struct gr_kzk_tp *tps, int n, size_t *len);
int gr_kzk_tp_list_decode(const char *data, size_t len, struct gr_kzk_tp **out, int *n);

/* /log_dir_event_notification/log_dir_event_N: {"version":1,"broker":B,"event":1}
 * (event 1 = LogDirFailure). */
char *gr_kzk_log_dir_event_encode(int32_t broker_id, int32_t event, size_t *len);
int gr_kzk_log_dir_event_decode(const char *data, size_t len, int32_t *broker_id, int32_t *event);

/* /latest_producer_id_block: {"version":1,"broker":B,"block_start":"S","block_end":"E"}. */
struct gr_kzk_producer_id_block {
    int32_t broker;
    int64_t block_start;
    int64_t block_end;
};
char *gr_kzk_producer_id_block_encode(const struct gr_kzk_producer_id_block *b, size_t *len);
int gr_kzk_producer_id_block_decode(const char *data, size_t len,
                                    struct gr_kzk_producer_id_block *out);

/* /feature: {"version":1,"status":S,"features":{"f":{"min_version_level":a,"max_version_level":b}}}
 * (status 0 = disabled, 1 = enabled). n_features/features use gr_kzk_feature (levels). */
struct gr_kzk_feature_znode {
    int32_t status;
    int n_features;
    struct gr_kzk_feature *features;
};
char *gr_kzk_feature_znode_encode(const struct gr_kzk_feature_znode *f, size_t *len);
int gr_kzk_feature_znode_decode(const char *data, size_t len, struct gr_kzk_feature_znode *out);
void gr_kzk_feature_znode_release(struct gr_kzk_feature_znode *f);

/* ======================================================================================
 * B. Typed calls
 * ====================================================================================== */

struct gr_kzk;

/* Wraps a backend (NOT owned: destroy the backend after gr_kzk_free). */
struct gr_kzk *gr_kzk_new(struct gr_zk_backend *b);
void gr_kzk_free(struct gr_kzk *k);
struct gr_zk_backend *gr_kzk_backend(struct gr_kzk *k);
/* The id a topic's standby stamp carries (gr_kzk_get_state_stamps): fn(arg, topic) returns the
 * topic's id as text (borrowed: kzk copies it before fn is called again) or NULL. Ownership and
 * threading: fn reads its owner's state (the controller's context), so kzk calls it only on the
 * thread that makes the write -- the owner's event thread; a job (gr_kzk_update_partition_states_job)
 * takes its topics' ids when it is made, never on its own thread. Set before the gr_kzk is shared
 * (the controller, at start); NULL (the default): stamps carry no data. */
typedef const char *(*gr_kzk_stamp_id_fn)(void *arg, const char *topic);
void gr_kzk_set_stamp_id_lookup(struct gr_kzk *k, gr_kzk_stamp_id_fn fn, void *arg);

/* Tests only (the simulation's controller of an earlier version): off = no state stamps in the
 * guarded multis and no stamps marker in /controller (gr_kzk_get_state_stamps). Default on. */
void gr_kzk_set_state_stamps(struct gr_kzk *k, bool on);
/* Max ops per multi batch (default 1000; tests lower it). */
void gr_kzk_set_batch_size(struct gr_kzk *k, int ops);
/* Guarded multis of one bulk write in flight at once (default 8; 1 = one after another). */
void gr_kzk_set_pipeline_depth(struct gr_kzk *k, int multis);
/* Shutdown: from now on a call that finds ZooKeeper unreachable fails at once instead of waiting
 * for the connection (a call already waiting notices within half a second). Any thread. */
void gr_kzk_stop_waiting(struct gr_kzk *k);

/* Creates Kafka's persistent paths if missing (/brokers/ids, /brokers/topics, /brokers/seqid,
 * /config/{topics,clients,users,brokers,changes}, /admin/delete_topics,
 * /isr_change_notification, /latest_producer_id_block, /log_dir_event_notification),
 * parents first, tolerating NODEEXISTS races. */
int gr_kzk_ensure_paths(struct gr_kzk *k);

/* /cluster/id: reads it, or creates it with a fresh id (NODEEXISTS race -> read). out gets the
 * id, NUL-terminated. */
int gr_kzk_get_or_create_cluster_id(struct gr_kzk *k, char out[64]);

/* /brokers/seqid: bumps its data version; *seq = new version (Kafka's generateBrokerSequenceId;
 * the broker id is that + reserved.broker.max.id). */
int gr_kzk_generate_broker_sequence_id(struct gr_kzk *k, int32_t *seq);

/* Registers /brokers/ids/<info->id> as an ephemeral with the v5 JSON, Kafka's way: one multi
 * {create ephemeral with null data, setData(version 0) with the JSON}; *broker_epoch = czxid.
 * If the node exists:
 *   - owned by our current session (our own create raced a connection loss): keep it, return
 *     its czxid (Kafka's CheckedEphemeral does the same);
 *   - owned by one of prevs[0..nprev) (sessions of our earlier incarnations, persisted by the
 *     broker; prevs may be NULL when nprev is 0): close that session via the backend's
 *     close_session (falls back to deleting the node), then create again; each at most once;
 *   - owned by anyone else: GR_KZK_EBROKER_REGISTERED.
 * Any thread. */
int gr_kzk_register_broker(struct gr_kzk *k, const struct gr_kzk_broker *info,
                           const struct gr_zsession *prevs, int nprev, int64_t *broker_epoch);
/* Rewrites /brokers/ids/N's data (updateBrokerInfo; any version). */
int gr_kzk_update_broker(struct gr_kzk *k, const struct gr_kzk_broker *info);

/* Children of /brokers/ids as ints, sorted (non-numeric names skipped). watch: child watch.
 * *ids malloc'd. */
int gr_kzk_get_broker_ids(struct gr_kzk *k, bool watch, int32_t **ids, int *n);
/* One broker (epoch = czxid). watch: data watch on /brokers/ids/N. GR_KZK_ENONODE if absent. */
int gr_kzk_get_broker(struct gr_kzk *k, int32_t id, bool watch, struct gr_kzk_broker *out);
/* All registered brokers, sorted by id: children of /brokers/ids (child watch if watch_ids)
 * then one pipelined get of each (data watch on each if watch_each). Brokers that vanished
 * between the two reads are skipped; unparsable ones are skipped with an error log.
 * *out malloc'd; free with gr_kzk_brokers_free. */
int gr_kzk_get_all_brokers(struct gr_kzk *k, bool watch_ids, bool watch_each,
                           struct gr_kzk_broker **out, int *n);
void gr_kzk_brokers_free(struct gr_kzk_broker *b, int n);

/* /controller: *broker_id or -1 when absent. watch: exists-watch (fires on create/delete/
 * change). */
int gr_kzk_get_controller_id(struct gr_kzk *k, bool watch, int32_t *broker_id);
/* /controller_epoch: epoch and its zkVersion. GR_KZK_ENONODE if absent. */
int gr_kzk_get_controller_epoch(struct gr_kzk *k, bool watch, int32_t *epoch,
                                int32_t *zk_version);
/* Kafka 2.7's registerControllerAndIncrementControllerEpoch. Returns 0 with the new epoch and
 * its zkVersion (the fencing token), GR_ECONTROLLER_MOVED if another broker won, GR_EZK. */
int gr_kzk_register_controller_and_increment_epoch(struct gr_kzk *k, int32_t broker_id,
                                                   int32_t *new_epoch, int32_t *epoch_zk_version);

/* Runs {check(/controller_epoch, epoch_zk_version), ops...} as ONE multi. Returns 0;
 * GR_ECONTROLLER_MOVED if the check failed; else the kzk code of the first failing op, with
 * per-op outcomes in results[n] (kzk codes in .rc; created_path/stat as gr_zop_result, release
 * with gr_zop_results_release) when results != NULL. On failure nothing was applied: ops before
 * the failing one report 0 (rolled back), the failing one its code, later ones GR_EZK
 * (ZooKeeper's RUNTIMEINCONSISTENCY). n must fit one multi (<= batch size). */
int gr_kzk_guarded_multi(struct gr_kzk *k, int32_t epoch_zk_version, const struct gr_zop *ops,
                         int n, struct gr_zop_result *results);
/* Guarded delete of /controller (triggerControllerMove / resignation). NONODE is success. */
int gr_kzk_delete_controller_guarded(struct gr_kzk *k, int32_t epoch_zk_version);
/* Deletes /controller only while it names broker_id (conditional on the version read, and in the
 * same multi on /controller_epoch's version read before it, so a claim an election created after
 * the reads, at the same version 0, is never removed). 0 also when it is absent, names another
 * broker or an election came between. For a broker that finds itself named without having won
 * the last election (controller.c reclaim_controller). */
int gr_kzk_delete_controller_if_named(struct gr_kzk *k, int32_t broker_id);

/* Names of /brokers/topics children (child watch if watch). */
int gr_kzk_get_topics(struct gr_kzk *k, bool watch, struct gr_zstrings *out);
/* Pipelined read of /brokers/topics/<topics[i]> into out[i] (n entries, zeroed by callee);
 * out[i].rc = 0 / GR_KZK_ENONODE / GR_ECORRUPT. watch: data watch on each (set even for
 * corrupt ones). Release each with gr_kzk_topic_assignment_release. Returns 0 unless the
 * whole batch failed. */
int gr_kzk_get_topic_assignments(struct gr_kzk *k, const char *const *topics, int n, bool watch,
                                 struct gr_kzk_topic_assignment *out);
/* The same reads (the same getData, the same watches), but a topic whose znode still has the
 * czxid and data version its caller holds (known_czxid[i] != 0 and known_version[i]) is not
 * decoded: out[i] gets rc 0, unchanged, its czxid and zk_version, and nothing else. A znode's
 * (czxid, version) names its content: every setData moves the version, a delete and create the
 * czxid. known_czxid / known_version may be NULL (decode all). */
int gr_kzk_get_topic_assignments_since(struct gr_kzk *k, const char *const *topics, int n, bool watch,
                                       const int64_t *known_czxid, const int32_t *known_version,
                                       struct gr_kzk_topic_assignment *out);
/* Creates /config/topics/T (config, may be NULL = empty) then /brokers/topics/T (assignment):
 * AdminZkClient.createTopicWithAssignment's writes. GR_KZK_EEXISTS if the topic exists. */
int gr_kzk_create_topic(struct gr_kzk *k, const char *topic,
                        const struct gr_kzk_topic_assignment *a, const struct gr_kzk_config *cfg);
/* Guarded set of /brokers/topics/T (controller: reassignment). expected_version may be
 * GR_ZANY_VERSION. */
int gr_kzk_set_topic_assignment_guarded(struct gr_kzk *k, int32_t epoch_zk_version,
                                        const char *topic, const struct gr_kzk_topic_assignment *a,
                                        int32_t expected_version);
/* Unguarded set of /brokers/topics/T (admin adds partitions). */
int gr_kzk_set_topic_assignment(struct gr_kzk *k, const char *topic,
                                const struct gr_kzk_topic_assignment *a, int32_t expected_version);
/* Topic deletion completion: guarded recursive delete of /brokers/topics/T, then
 * /config/topics/T and /admin/delete_topics/T (missing nodes are fine). */
int gr_kzk_delete_topic_guarded(struct gr_kzk *k, int32_t epoch_zk_version, const char *topic);

/* One partition state to write. For create: zk_version ignored. For update: lai.zk_version is
 * the expected version. */
struct gr_kzk_state_write {
    const char *topic;
    int32_t partition;
    const struct gr_kzk_leader_and_isr *lai;
};
/* Per-item write result: rc (0 / GR_KZK_EEXISTS / GR_KZK_EBADVERSION / GR_KZK_ENONODE / GR_EZK),
 * zk_version = new data version on success. */
struct gr_kzk_write_result {
    int rc;
    int32_t zk_version;
};
/* Pipelined read of partition states (no watches). out[n] zeroed by the callee;
 * out[i].rc = 0/GR_KZK_ENONODE/GR_ECORRUPT; release each .lai. */
struct gr_kzk_state_result {
    int rc;
    struct gr_kzk_leader_and_isr lai;
};
int gr_kzk_get_partition_states(struct gr_kzk *k, const struct gr_kzk_tp *tps, int n,
                                struct gr_kzk_state_result *out);
/* The standby's proof stamps (docs/ARCHITECTURE.md, "Warm standby controller"): every guarded
 * multi that creates, sets or deletes a partition state znode of topic T also sets
 * /brokers/topics/T/partitions (any version; data: T's id when the lookup knows it, see
 * gr_kzk_set_stamp_id_lookup, else empty) in the same transaction, unless it deletes that znode
 * itself; so that znode's mzxid changes whenever any state of T is written. Reads it
 * for topics[0..n) (pipelined, no watches): mzxid[i] is its mzxid, or 0 when it is missing or
 * unreadable. Returns 0, or an error when nothing could be read. */
int gr_kzk_get_state_stamps(struct gr_kzk *k, const char *const *topics, int n, int64_t *mzxid);
/* The ids the stamps of topics[0..n) carry (gr_kzk_topic_stamp_decode; pipelined, no watches):
 * out[i].rc 0 (out[i].topic_id malloc'd or NULL: none), GR_KZK_ENONODE, GR_ECORRUPT (logged by
 * the caller) or GR_EZK; out[i].zk_version and out[i].czxid are the znode's. Returns 0, or an
 * error when nothing could be read. */
struct gr_kzk_topic_stamp {
    int rc;
    char *topic_id;
    int32_t zk_version;
    int64_t czxid;
};
int gr_kzk_get_topic_stamps(struct gr_kzk *k, const char *const *topics, int n, struct gr_kzk_topic_stamp *out);
/* The epoch of the controller now in office if it stamps (its /controller carries the stamps
 * marker and was written by the same election as /controller_epoch), else -1 (none in office,
 * one of an earlier version or Kafka, a hand-written znode). Returns 0 or an error. */
int gr_kzk_get_stamping_term(struct gr_kzk *k, int32_t *epoch);
/* The cversion of /isr_change_notification (-1 when it is missing): it moves whenever a broker
 * that writes its ISR to ZooKeeper itself -- a Kafka broker before inter.broker.protocol.version
 * 2.7-IV2, which stamps nothing -- announces a state write, and whenever a controller deletes such
 * announcements. Returns 0 or an error. */
int gr_kzk_get_isr_change_cversion(struct gr_kzk *k, int32_t *cversion);
/* Creates …/partitions, …/partitions/P (existing ones fine) and …/P/state for each item, in
 * guarded multis of up to batch-size ops, several in flight (gr_kzk_set_pipeline_depth); if a
 * batch fails on an item (not the epoch check) that item gets its code and the batch is rerun
 * without it (item by item after a few such failures). A state znode that exists holding
 * exactly our JSON (our own create, retried after a connection loss) counts as created. Returns 0
 * (see res[]), GR_ECONTROLLER_MOVED (nothing more written), or GR_EZK. */
int gr_kzk_create_partition_states(struct gr_kzk *k, int32_t epoch_zk_version,
                                   const struct gr_kzk_state_write *items, int n,
                                   struct gr_kzk_write_result *res);
/* Conditional updates (setData with items[i].lai->zk_version) in guarded multi batches, same
 * fallback and return convention as create. */
int gr_kzk_update_partition_states(struct gr_kzk *k, int32_t epoch_zk_version,
                                   const struct gr_kzk_state_write *items, int n,
                                   struct gr_kzk_write_result *res);
/* The same, in rounds of gr_kzk_state_write_round(k) items (one pipeline's worth of multis):
 * after each round that returned 0 except the last, round_done(arg, first, count) is called on
 * the calling thread with res[first, first + count) final, before the next round is sent -- so a
 * caller can hand what is written to other threads (the elections' requests to the send threads)
 * and have it worked on while ZooKeeper writes the rest (ZooKeeper waits while the callback
 * runs). A round that fails (GR_ECONTROLLER_MOVED, GR_EZK) ends the call: the items after it get
 * that code and are not written. With round_done, res is required (the callback reads it);
 * round_done NULL: one call over all items. A job waiting for
 * the next write (gr_kzk_job_start_after_next_write) starts after the last round. */
int gr_kzk_update_partition_states_rounds(struct gr_kzk *k, int32_t epoch_zk_version,
                                          const struct gr_kzk_state_write *items, int n,
                                          struct gr_kzk_write_result *res,
                                          void (*round_done)(void *arg, int first, int count), void *arg);
/* Items per round of guarded multis: (batch size - 1) x pipeline depth. */
int gr_kzk_state_write_round(const struct gr_kzk *k);
/* An update of partition states (gr_kzk_update_partition_states, same items and results) that
 * runs later or elsewhere: the controlled shutdown writes the ISR shrinks of the partitions the
 * leaving broker follows while the event thread builds and sends the election's requests.
 * Every write is the same guarded multi; only when it runs changes. With gr_kzk_set_async(k,
 * true) (the broker's real ZooKeeper) a started job runs on its own thread; otherwise (the
 * default: the simulation and the unit tests) it runs on the caller's thread when started, so
 * the order of ZooKeeper operations stays deterministic. items (and what they point to) are
 * borrowed until gr_kzk_job_wait returns. Only the thread that owns k (the controller's event
 * thread) starts, waits for and frees a job. */
struct gr_kzk_stamp_snap; /* kzk.c */
struct gr_kzk_job {
    struct gr_kzk *k;
    int32_t ezv;
    const struct gr_kzk_state_write *items;
    int n;
    struct gr_kzk_write_result *res; /* n results, valid after gr_kzk_job_wait */
    int rc;                          /* the call's return value, valid after gr_kzk_job_wait */
    int64_t took_ms;                 /* how long the writes took, valid after gr_kzk_job_wait */
    bool started, threaded;
    pthread_t thread;
    struct gr_kzk_stamp_snap *stamps; /* its topics' stamp ids, taken when made (kzk.c) */
};
void gr_kzk_set_async(struct gr_kzk *k, bool async);
/* A job for gr_kzk_update_partition_states(k, epoch_zk_version, items, n), not started. */
struct gr_kzk_job *gr_kzk_update_partition_states_job(struct gr_kzk *k, int32_t epoch_zk_version,
                                                      const struct gr_kzk_state_write *items, int n);
void gr_kzk_job_start(struct gr_kzk_job *j);
/* Starts j when the next gr_kzk_update_partition_states call on its kzk has returned 0 (so that
 * j's multis queue behind that call's in ZooKeeper instead of interleaving with them); a call
 * that fails leaves it to gr_kzk_job_wait. One such job per kzk at a time. */
void gr_kzk_job_start_after_next_write(struct gr_kzk_job *j);
/* Starts j if it is not, waits for it and returns its rc (j->res filled). */
int gr_kzk_job_wait(struct gr_kzk_job *j);
/* Waits for j if it was started; a job never started is dropped without running. Frees. */
void gr_kzk_job_free(struct gr_kzk_job *j);
/* Unguarded conditional update of one state (pre-AlterPartition leader ISR write). Writes no standby
 * stamp (gr_kzk_get_state_stamps): nothing in gregord calls it (AlterPartition goes through the
 * controller); a caller would have to stamp. */
int gr_kzk_update_partition_state_conditional(struct gr_kzk *k, const char *topic,
                                              int32_t partition,
                                              const struct gr_kzk_leader_and_isr *lai,
                                              int32_t *new_zk_version);

/* /config/<type>/<name> (type: "topics", "clients", "users", "brokers"). Missing -> empty
 * config and rc 0 (Kafka's fetchEntityConfig). */
int gr_kzk_get_entity_config(struct gr_kzk *k, const char *type, const char *name,
                             struct gr_kzk_config *out);
/* The same for n entities in one pipelined batch read; out[i] and rcs[i] per name (out[i] empty
 * unless rcs[i] == 0). Returns 0, or the error of the batch as a whole. */
int gr_kzk_get_entity_configs(struct gr_kzk *k, const char *type, const char *const *names, int n,
                              struct gr_kzk_config *out, int *rcs);
/* Create-or-set /config/<type>/<name>, then a config change notification
 * (/config/changes/config_change_ sequential, {"version":2,"entity_path":"type/name"}). */
int gr_kzk_set_entity_config(struct gr_kzk *k, const char *type, const char *name,
                             const struct gr_kzk_config *cfg);

/* /admin/delete_topics */
int gr_kzk_get_topic_deletions(struct gr_kzk *k, bool watch, struct gr_zstrings *out);
int gr_kzk_create_topic_deletion(struct gr_kzk *k, const char *topic); /* EEXISTS ok -> 0 */
int gr_kzk_delete_topic_deletions_guarded(struct gr_kzk *k, int32_t epoch_zk_version,
                                          const char *const *topics, int n);

/* /admin/reassign_partitions. get: GR_KZK_ENONODE if absent; watch = exists-watch (set
 * either way). */
int gr_kzk_get_reassignment(struct gr_kzk *k, bool watch, struct gr_kzk_reassignment *out);
int gr_kzk_create_reassignment(struct gr_kzk *k, const struct gr_kzk_reassignment *r);
/* Controller: set (or create when missing) guarded. */
int gr_kzk_set_reassignment_guarded(struct gr_kzk *k, int32_t epoch_zk_version,
                                     const struct gr_kzk_reassignment *r);
int gr_kzk_delete_reassignment_guarded(struct gr_kzk *k, int32_t epoch_zk_version);

/* /admin/preferred_replica_election (same conventions). */
int gr_kzk_get_preferred_election(struct gr_kzk *k, bool watch, struct gr_kzk_tp **tps, int *n);
int gr_kzk_create_preferred_election(struct gr_kzk *k, const struct gr_kzk_tp *tps, int n);
int gr_kzk_delete_preferred_election_guarded(struct gr_kzk *k, int32_t epoch_zk_version);

/* /isr_change_notification/isr_change_<seq> (persistent sequential). */
int gr_kzk_create_isr_change_notification(struct gr_kzk *k, const struct gr_kzk_tp *tps, int n);
/* Children names (e.g. "isr_change_0000000042"), child watch if watch. */
int gr_kzk_get_isr_change_notifications(struct gr_kzk *k, bool watch, struct gr_zstrings *out);
/* Pipelined read of the named notifications; all their partitions concatenated (missing/corrupt
 * notifications skipped). *tps malloc'd (gr_kzk_tps_release). */
int gr_kzk_get_isr_change_partitions(struct gr_kzk *k, const char *const *names, int n,
                                     struct gr_kzk_tp **tps, int *n_tps);
/* Guarded delete of the named notifications (missing ones fine). */
int gr_kzk_delete_isr_change_notifications_guarded(struct gr_kzk *k, int32_t epoch_zk_version,
                                                   const char *const *names, int n);

/* /log_dir_event_notification/log_dir_event_<seq>. */
int gr_kzk_create_log_dir_event_notification(struct gr_kzk *k, int32_t broker_id);
int gr_kzk_get_log_dir_event_notifications(struct gr_kzk *k, bool watch, struct gr_zstrings *out);
/* Broker ids of the named notifications (event 1 only), *ids malloc'd. */
int gr_kzk_get_log_dir_event_brokers(struct gr_kzk *k, const char *const *names, int n,
                                     int32_t **ids, int *n_ids);
int gr_kzk_delete_log_dir_event_notifications_guarded(struct gr_kzk *k, int32_t epoch_zk_version,
                                                      const char *const *names, int n);

/* /latest_producer_id_block: get (GR_KZK_ENONODE if absent/empty) and conditional set
 * (expected_version -1 with create-if-missing semantics when the node does not exist). */
int gr_kzk_get_producer_id_block(struct gr_kzk *k, struct gr_kzk_producer_id_block *out,
                                 int32_t *zk_version);
int gr_kzk_set_producer_id_block(struct gr_kzk *k, const struct gr_kzk_producer_id_block *blk,
                                 int32_t expected_version);
/* Creates /latest_producer_id_block empty (persistent) unless it exists. 0 or an error. */
int gr_kzk_ensure_producer_id_block(struct gr_kzk *k);

/* /feature */
int gr_kzk_get_feature_znode(struct gr_kzk *k, bool watch, struct gr_kzk_feature_znode *out,
                             int32_t *zk_version);
int gr_kzk_set_feature_znode(struct gr_kzk *k, const struct gr_kzk_feature_znode *f);

/* Generic helpers for watches the controller arms: exists-watch (returns 1/0 in *exists),
 * data watch, child watch. */
int gr_kzk_watch_exists(struct gr_kzk *k, const char *path, bool *exists);
int gr_kzk_watch_children(struct gr_kzk *k, const char *path, struct gr_zstrings *out);

/* Names of /config/<type> children, no watch (e.g. the users with SCRAM credentials); a missing
 * parent gives an empty list. */
int gr_kzk_get_entity_names(struct gr_kzk *k, const char *type, struct gr_zstrings *out);

/* ======================================================================================
 * C. Watch registry (watch.c)
 * ====================================================================================== */

/* Handlers run on the backend's callback thread (see backend.h rule 5): copy and enqueue only.
 * `path` is borrowed. */
typedef void (*gr_zk_node_handler)(void *ctx, int type, const char *path);   /* CREATED/DELETED/CHANGED */
typedef void (*gr_zk_child_handler)(void *ctx, const char *path);            /* CHILD on path */
typedef void (*gr_zk_session_handler)(void *ctx, int state);                 /* gr_zsession_state */

struct gr_zk_watches;

struct gr_zk_watches *gr_zk_watches_new(void);
/* Must not be called while a backend can still deliver into it. */
void gr_zk_watches_free(struct gr_zk_watches *w);
/* The two functions to pass as the backend's on_watch / on_session with cb_ctx = w. */
void gr_zk_watches_on_watch(void *w, int type, const char *path);
void gr_zk_watches_on_session(void *w, int state);

/* Registers (or replaces) the handler for exact `path`: data/exists watch events
 * (ZNodeChangeHandler). The ZooKeeper watch itself is armed separately (get/exists with watch).
 * After unregister returns, the handler is not running and will not be called again (unless
 * called from inside a handler, which is allowed). Any thread. */
void gr_zk_watches_register_node(struct gr_zk_watches *w, const char *path,
                                 gr_zk_node_handler fn, void *ctx);
void gr_zk_watches_unregister_node(struct gr_zk_watches *w, const char *path);
/* Child-change handlers keyed by the parent path (ZNodeChildChangeHandler). */
void gr_zk_watches_register_child(struct gr_zk_watches *w, const char *path,
                                  gr_zk_child_handler fn, void *ctx);
void gr_zk_watches_unregister_child(struct gr_zk_watches *w, const char *path);
/* Session-state handlers keyed by a name (StateChangeHandler). */
void gr_zk_watches_register_session(struct gr_zk_watches *w, const char *name,
                                    gr_zk_session_handler fn, void *ctx);
void gr_zk_watches_unregister_session(struct gr_zk_watches *w, const char *name);
/* Drops every node and child handler (onControllerResignation); session handlers stay. */
void gr_zk_watches_clear_nodes(struct gr_zk_watches *w);

#endif
