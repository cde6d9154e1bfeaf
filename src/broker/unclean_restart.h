/* The restart gap after an unclean death (Kafka's behaviour that Gregor's fast restart must keep).
 *
 * A Kafka 2.7 broker killed without a clean shutdown cannot register again before ZooKeeper
 * expires its old session: until then /brokers/ids/N is held by the dead process. So the
 * controller always sees the broker die first and takes it out of every ISR (onBrokerFailure,
 * or a new controller's failover: its offline replicas go OfflineReplica) before the new
 * incarnation registers. Kafka needs that: it does not fsync each write (flush.messages is
 * Long.MAX), so a broker that lost power comes back with a shorter log, and only replication
 * (truncation to the leader's epoch, KIP-101, then re-fetching) brings its records back -- as a
 * follower. If it stayed in an ISR, the controller could keep or make it leader and the followers
 * would truncate to its shorter log: acknowledged records lost on every replica.
 *
 * Gregor closes the previous session itself at start-up (server.c close_previous_sessions) so a
 * restart does not wait a session timeout; that removes the gap: the old registration and the new
 * one can come within milliseconds, and a controller elected in between (the dead broker was the
 * controller) or one that dies while handling the bounce reads the new registration as the old
 * broker, alive in its ISRs. gr_unclean_restart_wait restores the gap's guarantee without its
 * cost: after the old session is closed and before registering, it waits until no partition state
 * of a log this broker holds still lists it in an ISR shared with another broker (the controller
 * has handled the death), at most timeout_ms (the session timeout: never longer than Kafka's own
 * gap); it does not wait when no other broker is registered (nobody could handle it).
 *
 * Called once, by the start-up thread, with no lock held; reads ZooKeeper through kzk (borrowed). */
#ifndef GR_BROKER_UNCLEAN_RESTART_H
#define GR_BROKER_UNCLEAN_RESTART_H

#include <stdint.h>

struct gr_config;
struct gr_kzk;

/* Waits as above. The partitions are the "<topic>-<partition>" directories of cfg's log dirs.
 * Returns the number still listing this broker when it gave up (0: the death was handled, or
 * there was nothing to wait for); logs what it waited for. */
int gr_unclean_restart_wait(struct gr_kzk *kzk, const struct gr_config *cfg, int32_t broker_id, int64_t timeout_ms);

#endif
