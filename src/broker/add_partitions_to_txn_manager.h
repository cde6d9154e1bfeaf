/* Kafka 3.6's AddPartitionsToTxnManager (KIP-890 part 1): asks a transaction coordinator whether
 * partitions are part of a producer's ongoing transaction, before the broker appends the
 * producer's first transactional batch to one of them (Produce, api/handle_produce.c) or its
 * transactional offsets to __consumer_offsets (TxnOffsetCommit, api/handle_txn.c).
 *
 * gr_aptm_verify never waits for the network:
 *   - this broker coordinates the transactional id: answered in place (gr_txn_verify_id), the
 *     callback runs before gr_aptm_verify returns;
 *   - another broker does: the check joins that broker's queue. Each coordinator broker has its
 *     own sender thread and kept connection (the one Kafka client, net/kafka_client.h), one
 *     request in flight. Each round takes everything queued: a coordinator that serves
 *     AddPartitionsToTxn v4 (learned with ApiVersions once per connection) gets it all as one
 *     v4 request with one VerifyOnly transaction per (transactional id, producer id, epoch) --
 *     Kafka 3.9's broker-to-coordinator form, so concurrent producers' checks share one round
 *     trip (a second producer id or epoch of an id already in the request waits for the next);
 *     an older coordinator (a rolling upgrade) one v1 request per transaction (header client id
 *     GR_TXN_VERIFY_CLIENT_ID: the coordinator then only checks and adds nothing). A slow or
 *     stopped coordinator delays only the checks queued for it: each round (what one sender
 *     thread takes from its queue) has one deadline, gr_aptm_round_timeout_ms after it starts,
 *     shared by the ApiVersions exchange of a new connection, its requests and a resend (so one
 *     round lasts at most that, plus one connect of at most GR_APTM_CONNECT_TIMEOUT_MS; a check
 *     queued meanwhile waits for it and then has a round of its own). A failed request fails
 *     every check taken with it; nothing else of the broker waits on it. A request that fails at
 *     once on a kept connection (the peer closed it: connections.max.idle.ms, a restart) goes
 *     out once more on a new one if the round has time left; a timeout is not retried.
 *     Kafka 3.9's manager gives its request the broker's request.timeout.ms from creation while
 *     unsent and again from sending once in flight, so a new connection's ApiVersions can take
 *     it close to twice that; its produce path then waits for acks with the produce request's
 *     own timeout, which does not count the verification. Gregor keeps the verification inside
 *     one request.timeout.ms, capped at GR_APTM_REQUEST_TIMEOUT_MS so that a transactional
 *     producer's request (its request.timeout.ms is 30 s by default, the verification's wait
 *     and then the produce timeout) is answered before the producer gives up on it.
 *   - no coordinator known: COORDINATOR_NOT_AVAILABLE at once.
 * Errors per partition are the coordinator's (gr_txn_verify_id: NONE, INVALID_TXN_STATE -- v4's
 * TRANSACTION_ABORTABLE is answered as that --,
 * INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, NOT_COORDINATOR,
 * COORDINATOR_LOAD_IN_PROGRESS...), NETWORK_EXCEPTION when the request failed or timed out,
 * COORDINATOR_NOT_AVAILABLE when no coordinator is known or the manager shut down. Callers map
 * them for their response (Kafka 3.7 ReplicaManager.maybeStartTransactionVerificationForPartitions).
 *
 * Memory: one queued check per waiting request; a connection has at most one request waiting
 * for verification (it stays muted meanwhile, net/server.h), so the queues are bounded by the
 * connections. One thread per coordinator broker ever asked (bounded by the cluster size).
 *
 * Ownership and threading: the broker owns the manager (gr_broker.add_partitions_to_txn_manager,
 * created at start-up before the network, shut down after it stops). gr_aptm_verify: any thread;
 * its strings are copied. The callback runs exactly once, on the caller's thread (local
 * coordinator, immediate errors) or on a sender thread; it may append and respond but must not
 * call gr_aptm_shutdown/free. gr_aptm_shutdown answers everything queued and joins the threads;
 * after it, gr_aptm_verify answers COORDINATOR_NOT_AVAILABLE at once. */
#ifndef GR_BROKER_ADD_PARTITIONS_TO_TXN_MANAGER_H
#define GR_BROKER_ADD_PARTITIONS_TO_TXN_MANAGER_H

#include <stdint.h>

/* The longest round (see above); a broker's request.timeout.ms below it shortens the round. */
#define GR_APTM_REQUEST_TIMEOUT_MS 10000
#define GR_APTM_CONNECT_TIMEOUT_MS 5000

struct gr_broker;
struct gr_config;
struct gr_aptm;

/* A round's deadline in ms for a broker with config cfg (NULL: the default): request.timeout.ms,
 * as Kafka's AddPartitionsToTxnManager, at most GR_APTM_REQUEST_TIMEOUT_MS. */
int32_t gr_aptm_round_timeout_ms(const struct gr_config *cfg);

/* errors[i] answers topics[i]/partitions[i]; the array is only valid during the call. */
typedef void (*gr_aptm_cb)(void *ctx, const int16_t *errors, int n);

/* b is borrowed (its metadata cache, config and transaction coordinator are read; the round
 * timeout is taken from its config now). */
struct gr_aptm *gr_aptm_new(struct gr_broker *b);
void gr_aptm_shutdown(struct gr_aptm *m);
/* Shuts down if needed, then frees. NULL ignored. */
void gr_aptm_free(struct gr_aptm *m);

/* Are topics[i]/partitions[i] (n >= 1) part of the ongoing transaction of transactional_id with
 * (producer_id, epoch)? m NULL: local coordinator only (others: COORDINATOR_NOT_AVAILABLE). */
void gr_aptm_verify(struct gr_aptm *m, struct gr_broker *b, const char *transactional_id, int64_t producer_id,
                    int16_t epoch, const char *const *topics, const int32_t *partitions, int n, gr_aptm_cb cb,
                    void *ctx);

#endif
