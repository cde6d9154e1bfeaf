/* Kafka's ControllerBrokerRequestBatch: collects the LeaderAndIsr, UpdateMetadata and StopReplica
 * work that one state-machine step produces, then sends one request of each kind per broker.
 *
 * Use (event thread only):
 *     gr_ctrl_batch_begin(b);                       // newBatch
 *     gr_ctrl_batch_add_leader_and_isr(b, ...);     // any number of adds
 *     gr_ctrl_batch_send(b);                        // sendRequestsToBrokers(ctx->epoch)
 *
 * Rules (as Kafka's):
 *  1. Each LeaderAndIsr entry also adds UpdateMetadata for that partition to ALL registered
 *     (live or shutting-down) brokers.
 *  2. Per broker the order of sending is LeaderAndIsr, then UpdateMetadata, then StopReplica.
 *     Brokers that are no longer registered at send time are skipped.
 *  3. A later add for the same (broker, partition) replaces the earlier one; LeaderAndIsr's IsNew
 *     and StopReplica's DeletePartition are sticky (once true, stay true). (Adds append; the rule
 *     is applied when the entries are sorted at the send, so adding costs no lookup.)
 *  4. UpdateMetadata partition states are taken from the context at add time: leader/ISR as
 *     cached, OfflineReplicas = assigned replicas that are not online, and leader -2
 *     (LeaderDuringDelete) for topics queued for deletion. Partitions without leadership info
 *     are skipped (INFO log). LiveBrokers = all registered brokers with all their endpoints and
 *     rack.
 *  5. StopReplica's LeaderEpoch is -2 for topics queued for deletion, else the cached leader
 *     epoch (or -1 when unknown).
 *  6. Requests are stamped with the controller's id, ctx->epoch and the target broker's epoch,
 *     at the versions a Kafka 3.9 ZooKeeper controller sends (inter.broker.protocol.version 3.4+):
 *     LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4, with isKRaftController false and Type 0
 *     (unknown; FULL/INCREMENTAL are KRaft migration's). Every topic carries the context's topic
 *     id (KIP-516; ZERO_UUID when it has none). LeaderAndIsr answers come back keyed by topic id
 *     (v5+): gr_ctrl_lai_response_errors gives them by name.
 *  7. Completion events given to the sender: LeaderAndIsrResponseReceived and
 *     UpdateMetadataResponseReceived (broker_id set) for every request;
 *     TopicDeletionStopReplicaResponseReceived only for StopReplica requests with at least one
 *     DeletePartition = true (others get no completion, as in Kafka).
 *
 * Requests handed to the sender are `struct gr_ctrl_req` boxes (below): the request struct is
 * the first member, so the `void *request` pointer is both. Arrays live in a reference-counted
 * arena shared by all requests of one send (the UpdateMetadata requests differ only in
 * BrokerEpoch and share their arrays; a partition's ISR and replicas are one copy for all its
 * LeaderAndIsr entries), so request_free may run on any thread (send threads); the arena goes
 * when the last request of the send is freed. */
#ifndef GR_CONTROLLER_REQUEST_BATCH_H
#define GR_CONTROLLER_REQUEST_BATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "controller/states.h"
#include "protocol/arena.h"
#include "protocol/messages.h"

#define GR_CTRL_LEADER_AND_ISR_VERSION 7
#define GR_CTRL_UPDATE_METADATA_VERSION 8
#define GR_CTRL_STOP_REPLICA_VERSION 4

/* Security protocol ids (Kafka's SecurityProtocol.id). Unknown names map to PLAINTEXT (0). */
int16_t gr_ctrl_security_protocol_id(const char *name);

/* A shared, reference-counted arena. */
struct gr_ctrl_shared_arena {
    atomic_int refs;
    struct gr_arena arena;
};

/* A request handed to the sender: the body first, then the arena holding its arrays. */
struct gr_ctrl_req {
    union {
        struct LeaderAndIsrRequest lai;
        struct UpdateMetadataRequest um;
        struct StopReplicaRequest sr;
    } u;
    int16_t api_key;
    struct gr_ctrl_shared_arena *shared;
};
/* request_free for boxes: drops the arena reference, frees the box. Any thread. */
void gr_ctrl_req_free(void *req);

/* A LeaderAndIsr answer (payload of LeaderAndIsrResponseReceived, response.h) at v5+ lists its
 * partitions under topic ids; this fills the v0-4 view (PartitionErrors with TopicName) from it,
 * naming each topic after the request that was sent (its TopicStates pair names and ids), so the
 * handlers read one layout. Partitions of a topic the request does not name (a broker answering
 * what it was not asked) or of ZERO_UUID shared by several of its topics are left out. No-op
 * below v5 or without the sent request. Event thread. */
struct gr_ctrl_response;
void gr_ctrl_lai_response_normalize(struct gr_ctrl_response *r);

struct gr_ctrl_batch;

/* A batch bound to sm (borrowed: ctx, sender, controller id, listener name). */
/* Fills in sm's owned parts: creates its batch and registers the UncleanLeaderElectionsPerSec
 * meter (when sm->metrics is set). The other fields of sm must be filled in before. Here rather
 * than in states.c so that the states module does not depend on the batch (which depends on it). */
void gr_ctrl_sm_init(struct gr_ctrl_sm *sm);
void gr_ctrl_sm_release(struct gr_ctrl_sm *sm);

struct gr_ctrl_batch *gr_ctrl_batch_new(struct gr_ctrl_sm *sm);
void gr_ctrl_batch_free(struct gr_ctrl_batch *b);

/* newBatch: returns 0, or -EBUSY after logging an ERROR and clearing when the previous batch was
 * not empty (Kafka throws IllegalStateException there). */
int gr_ctrl_batch_begin(struct gr_ctrl_batch *b);
/* Drops everything collected. */
void gr_ctrl_batch_clear(struct gr_ctrl_batch *b);
bool gr_ctrl_batch_empty(const struct gr_ctrl_batch *b);

/* addLeaderAndIsrRequestForBrokers: brokers < 0 are ignored. lai is the leader/ISR with its
 * controller epoch and zkVersion (copied); the assignment comes from the context (the partition
 * must exist there, otherwise the call logs and does nothing). */
void gr_ctrl_batch_add_leader_and_isr(struct gr_ctrl_batch *b, const int32_t *brokers, int n_brokers,
                                      const char *topic, int32_t partition,
                                      const struct gr_kzk_leader_and_isr *lai, bool is_new);
/* The same for a partition of the context the caller already holds (p: its topic's `topic`). */
void gr_ctrl_batch_add_leader_and_isr_p(struct gr_ctrl_batch *b, const int32_t *brokers, int n_brokers,
                                        const char *topic, struct gr_ctrl_partition *p,
                                        const struct gr_kzk_leader_and_isr *lai, bool is_new);
/* addUpdateMetadataRequestForBrokers: adds brokers (< 0 ignored) to the recipients and the given
 * partitions' current states (rule 4). */
void gr_ctrl_batch_add_update_metadata(struct gr_ctrl_batch *b, const int32_t *brokers, int n_brokers,
                                       const struct gr_kzk_tp *tps, int n_tps);
/* Same, with every partition that has leadership info (onBrokerStartup's full update). Unlike
 * Kafka's partitionsWithLeaders, topics queued for deletion are included -- with leader -2, so a
 * broker that was away while their deletion started (its session expired, the process lived on)
 * drops them from its metadata cache instead of serving them forever. */
void gr_ctrl_batch_add_update_metadata_all(struct gr_ctrl_batch *b, const int32_t *brokers, int n_brokers);
/* All registered brokers as recipients (liveOrShuttingDownBrokerIds), no partitions added. */
void gr_ctrl_batch_add_update_metadata_brokers_only(struct gr_ctrl_batch *b);
/* Leader -2 for partitions 0..n_partitions-1 of a topic the context no longer has, to broker
 * (a removal the broker missed while it was away; see topic_deletion.c). */
void gr_ctrl_batch_add_update_metadata_deleted(struct gr_ctrl_batch *b, int32_t broker, const char *topic,
                                               int32_t n_partitions);
/* addStopReplicaRequestForBrokers (rule 5). */
void gr_ctrl_batch_add_stop_replica(struct gr_ctrl_batch *b, const int32_t *brokers, int n_brokers,
                                    const char *topic, int32_t partition, bool delete_partition);

/* sendRequestsToBrokers: builds and hands the requests to the sender (rules 2, 6, 7) and
 * clears the batch. */
void gr_ctrl_batch_send(struct gr_ctrl_batch *b);

/* ---- state-change log lines written after the send ----
 * The per-partition state.change.logger INFO lines of elections and initialisations ("Changed
 * partition T-P from S to OnlinePartition with state LeaderAndIsr(...)") and of ISR shrinks
 * ("Partition T-P state changed to (...) after removing replica R from the ISR as part of
 * transition to OfflineReplica") are recorded in the batch (values copied) and written after its
 * requests went to the sender: at 100k partitions formatting and writing ~100k such lines took
 * 0.3-0.4 s per step, before the LeaderAndIsr/UpdateMetadata could go out. Same lines, same
 * contents, later. gr_ctrl_batch_send writes them unless they are held; gr_ctrl_batch_flush_log
 * writes them at once (a step that ends without a send, e.g. the controller moved). While held
 * (the controlled shutdown, until it has answered the broker) they accumulate over several
 * batches; gr_ctrl_batch_hold_log(b, false) writes them. gr_ctrl_batch_free drops unwritten ones
 * without writing (the context may be gone). Topic names are copied. */
void gr_ctrl_batch_log_online(struct gr_ctrl_batch *b, const char *topic, int32_t partition, int from_state,
                              const struct gr_kzk_leader_and_isr *lai);
void gr_ctrl_batch_log_isr_removed(struct gr_ctrl_batch *b, const char *topic, int32_t partition, int32_t replica,
                                   const struct gr_kzk_leader_and_isr *lai);
void gr_ctrl_batch_hold_log(struct gr_ctrl_batch *b, bool hold);
void gr_ctrl_batch_flush_log(struct gr_ctrl_batch *b);
/* Lines recorded and not yet written (tests). */
int gr_ctrl_batch_pending_log(const struct gr_ctrl_batch *b);

/* Introspection for tests: number of LeaderAndIsr entries for broker (or all brokers if -1),
 * UpdateMetadata recipients and partition states, StopReplica entries. */
int gr_ctrl_batch_count_leader_and_isr(const struct gr_ctrl_batch *b, int32_t broker);
int gr_ctrl_batch_count_update_metadata_brokers(const struct gr_ctrl_batch *b);
int gr_ctrl_batch_count_update_metadata_partitions(const struct gr_ctrl_batch *b);
int gr_ctrl_batch_count_stop_replica(const struct gr_ctrl_batch *b, int32_t broker);

#endif
