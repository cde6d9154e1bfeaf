/* The broker's id at start-up (Kafka 2.7's KafkaServer.getOrGenerateBrokerId).
 *
 * gr_broker_id_resolve reads <dir>/meta.properties of every log dir (a missing file gives no id
 * from that dir) and decides:
 *   - the dirs hold more than one distinct broker.id        -> GR_EMETA_BROKER_ID
 *     ("Failed to match broker.id across log.dirs ...")
 *   - broker.id is configured (>= 0) and the dirs hold another one -> GR_EMETA_BROKER_ID
 *     (Kafka's InconsistentBrokerIdException message)
 *   - broker.id is configured                                -> that id
 *   - the dirs hold one id                                   -> that id
 *   - none, broker.id.generation.enable                      -> a new id: the new data version of
 *     /brokers/seqid (gr_kzk_generate_broker_sequence_id) + reserved.broker.max.id, so the first
 *     generated id of a cluster is reserved.broker.max.id + 1 (1001 by default)
 *   - none, generation disabled (gr_config_finish refuses that config) -> GR_ECONFIG
 * Nothing is written here: the log manager's per-dir check (gr_meta_properties_check) writes the
 * id into every dir that has no meta.properties, as before. Errors are logged with the dirs and
 * ids they concern.
 *
 * Ownership: cfg and kzk are borrowed for the call. Threading: blocking (file reads, at most one
 * ZooKeeper write); called once, on the thread running gr_server_startup, before anything uses
 * the id. */
#ifndef GR_BROKER_BROKER_ID_H
#define GR_BROKER_BROKER_ID_H

#include <stdint.h>

struct gr_config;
struct gr_kzk;

/* *out = the broker id (see above). Returns 0, GR_EMETA_BROKER_ID, GR_ECORRUPT (an unreadable
 * meta.properties), GR_EZK (the sequence bump failed) or GR_ECONFIG. */
int gr_broker_id_resolve(const struct gr_config *cfg, struct gr_kzk *kzk, int32_t *out);

#endif
