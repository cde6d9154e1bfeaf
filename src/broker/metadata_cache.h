/* The broker's metadata cache (Kafka's MetadataCache): what the controller last told this broker
 * through UpdateMetadata -- live brokers with their endpoints per listener and rack, the
 * controller id, and the state of every partition. Client-facing Metadata answers come from here.
 *
 * Locking: one reader-writer lock (writer-preferring). gr_mdc_update applies a whole
 * UpdateMetadata request under the write lock, so a reader never sees half of one. Readers
 * either use the copying helpers (which lock internally) or bracket a walk of the gr_mdc_* view
 * with gr_mdc_rdlock/unlock; pointers from the view are valid only until unlock.
 *
 * Ownership: the cache owns everything it returns through the view; the copying helpers return
 * malloc'd memory the caller frees as documented. */
#ifndef GR_BROKER_METADATA_CACHE_H
#define GR_BROKER_METADATA_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "admin/assignment.h"
#include "common/uuid.h"
#include "protocol/messages.h"

/* Leader value the controller sends for partitions of a topic being deleted (LeaderDuringDelete). */
#define GR_LEADER_DURING_DELETE (-2)
#define GR_NO_LEADER (-1)

struct gr_mdc_endpoint {
    char *listener; /* e.g. "PLAINTEXT" */
    char *host;
    int32_t port;
    int16_t security_protocol; /* 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL */
};

struct gr_mdc_broker {
    int32_t id;
    char *rack; /* NULL when none */
    int n_endpoints;
    struct gr_mdc_endpoint *endpoints;
};

/* replicas, isr and offline live in one allocation starting at `replicas` (which is non-NULL
 * whenever any of the three is; gr_mdc_partition_release frees it). */
struct gr_mdc_partition {
    int32_t partition;
    int32_t controller_epoch;
    int32_t leader;
    int32_t leader_epoch;
    int32_t zk_version;
    int n_replicas;
    int n_isr;
    int n_offline;
    int32_t *replicas;
    int32_t *isr;
    int32_t *offline;
};

struct gr_mdc_topic {
    char *name;
    struct gr_uuid id; /* KIP-516 topic id from UpdateMetadata v7+; zero when none */
    int n_partitions; /* partitions known, sorted by partition id (ids need not be dense) */
    int cap;
    struct gr_mdc_partition *partitions;
};

struct gr_mdc;

/* Called after every applied update, outside the lock, on the thread that applied it. */
typedef void (*gr_mdc_update_fn)(void *ctx);

/* An empty cache (no brokers, controller -1). local_broker_id is used for logging only. */
struct gr_mdc *gr_mdc_new(int32_t local_broker_id);
void gr_mdc_free(struct gr_mdc *c);

/* Sets the hook called after each update (NULL to clear). Set before updates can arrive. */
void gr_mdc_set_on_update(struct gr_mdc *c, gr_mdc_update_fn fn, void *ctx);

/* Applies an UpdateMetadata request decoded at `version` (0-8): replaces the live brokers and
 * the controller id (negative -> none); if the request carries partition states, merges them
 * into the existing ones (partitions with leader -2 are removed, topics left without partitions
 * disappear). Each topic state of v5+ also sets its topic's id (v7+ TopicId; ZERO_UUID, and
 * every v5-6 state, leaves the topic without one, as Kafka's ZkMetadataCache). *n_deleted (if
 * not NULL) gets the number of partitions removed. Any thread. */
void gr_mdc_update(struct gr_mdc *c, int16_t version,
                              const struct UpdateMetadataRequest *req, int *n_deleted);

/* ---- locked view ---- */
void gr_mdc_rdlock(struct gr_mdc *c);
void gr_mdc_unlock(struct gr_mdc *c);
/* Live brokers sorted by id. */
int gr_mdc_num_brokers(const struct gr_mdc *c);
const struct gr_mdc_broker *gr_mdc_broker_at(const struct gr_mdc *c, int i);
const struct gr_mdc_broker *gr_mdc_broker(const struct gr_mdc *c, int32_t id);
/* The endpoint of b for listener, NULL if b has none. */
const struct gr_mdc_endpoint *gr_mdc_broker_endpoint(const struct gr_mdc_broker *b,
                                                     const char *listener);
/* Topics sorted by name. */
int gr_mdc_num_topics(const struct gr_mdc *c);
const struct gr_mdc_topic *gr_mdc_topic_at(const struct gr_mdc *c, int i);
const struct gr_mdc_topic *gr_mdc_topic(const struct gr_mdc *c, const char *name);
const struct gr_mdc_partition *gr_mdc_partition(const struct gr_mdc_topic *t, int32_t partition);
int32_t gr_mdc_controller_id_locked(const struct gr_mdc *c);
/* The topic whose id is id (KIP-516), NULL if none (zero never matches). O(log topics). */
const struct gr_mdc_topic *gr_mdc_topic_by_id(const struct gr_mdc *c, const struct gr_uuid *id);

/* ---- copying helpers (lock internally; any thread) ---- */
int32_t gr_mdc_controller_id(struct gr_mdc *c);
bool gr_mdc_contains_topic(struct gr_mdc *c, const char *topic);
/* Number of partitions of topic in the cache (0 if unknown). */
int gr_mdc_num_partitions(struct gr_mdc *c, const char *topic);
/* Is every partition 0..n_partitions-1 of topic present with a leader (>= 0)? */
bool gr_mdc_topic_ready(struct gr_mdc *c, const char *topic,
                                   int32_t n_partitions);
/* Copy of one partition's state; false if unknown. Free out->replicas/isr/offline with
 * gr_mdc_partition_release. */
bool gr_mdc_get_partition(struct gr_mdc *c, const char *topic,
                                     int32_t partition, struct gr_mdc_partition *out);
void gr_mdc_partition_release(struct gr_mdc_partition *p);
/* Copy of one broker's endpoint for listener: host copied into host (hostlen bytes). false when
 * the broker is not live or lacks the listener. */
bool gr_mdc_get_endpoint(struct gr_mdc *c, int32_t broker_id,
                                    const char *listener, char *host, size_t hostlen,
                                    int32_t *port);
/* Live brokers (id, rack) sorted by id: *out malloc'd, racks copied; free with
 * gr_broker_metas_free. */
void gr_mdc_alive_brokers(struct gr_mdc *c, struct gr_broker_meta **out,
                                     int *n);
void gr_broker_metas_free(struct gr_broker_meta *m, int n);
/* Topic ids both ways (KIP-516; what Fetch v13+ and DeleteTopics v6 resolve through):
 * gr_mdc_topic_id copies topic's id into *out, false when the topic is unknown or has none;
 * gr_mdc_topic_name_by_id returns a malloc'd copy of the name (caller frees) or NULL. */
bool gr_mdc_topic_id(struct gr_mdc *c, const char *topic, struct gr_uuid *out);
char *gr_mdc_topic_name_by_id(struct gr_mdc *c, const struct gr_uuid *id);
/* Increases by one with every applied update. */
uint64_t gr_mdc_generation(struct gr_mdc *c);

#endif
