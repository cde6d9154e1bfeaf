/* Kafka 2.7's ZkNodeChangeNotificationListener on /config/changes. gregord runs one per broker,
 * with the broker's DynamicConfigManager (broker/dynamic_config_manager.h) as its hook. Without a
 * hook (the simulation) it does the part of DynamicConfigManager the controller needs: when a topic's config is
 * changed to unclean.leader.election.enable=true and this broker is the active controller, a
 * TopicUncleanLeaderElectionEnable(topic) event is put on the controller's queue, which runs
 * triggerOnlinePartitionStateChange for that topic (the election then reads /config/topics/T).
 *
 *   /config/changes/config_change_<seq>   {"version":2,"entity_path":"topics/T"}
 *   (version 1 notifications, written by Kafka < 2.0 tools, are not understood: logged, skipped)
 *
 * Every notification with a sequence number above the last processed one is read once (all of
 * them after start-up, as Kafka's listener does). A notification that cannot be read, or whose
 * change cannot be applied because a read it needs fails (the hook returns false; without a
 * hook, /config/topics/T), is not marked processed: the pass stops there and the listener
 * retries it after 100 ms, doubling up to 5 s, until it goes through (Kafka's listener does not
 * advance lastExecutedChange past a notification whose processing threw); with a thread, processed notifications older than
 * 15 minutes (ZooKeeper ctime) are deleted (at most one pass a minute), as Kafka's
 * purgeObsoleteNotifications does. Without a hook, broker-level dynamic configs (brokers/<id>,
 * brokers/<default>) are logged and otherwise ignored (the controller's default then comes from
 * server.properties); with gregord's hook they reach the controller through requests.h.
 *
 * Threading: one thread of its own (ZooKeeper reads must not run on the ZooKeeper callback
 * thread); the child-watch handler only wakes it. A simulation creates it without a thread
 * (gr_config_change_listener_new) and calls gr_config_change_listener_process itself. */
#ifndef GR_CONTROLLER_CONFIG_CHANGE_LISTENER_H
#define GR_CONTROLLER_CONFIG_CHANGE_LISTENER_H

#include <stdbool.h>

struct gr_kzk;
struct gr_zk_watches;
struct gr_controller;
struct gr_config_change_listener;

/* Starts the listener (registers the /config/changes child handler in watches, starts the
 * thread, processes existing notifications). kzk, watches and controller are borrowed and must
 * outlive it. Returns NULL if the thread cannot start (logged). */
struct gr_config_change_listener *gr_config_change_listener_start(struct gr_kzk *kzk, struct gr_zk_watches *watches,
                                                                  struct gr_controller *controller);
/* The handler of one changed entity ("topics/T", "brokers/<default>", "clients/c", ...), called on
 * the listener's thread in notification order. false: the change could not be applied yet (e.g. a
 * ZooKeeper read failed); the notification is not marked processed and is handed again (with the
 * ones after it) on the next pass, as a notification that could not be read is. */
typedef bool (*gr_config_change_fn)(void *ctx, const char *entity_path);
/* The broker's listener (one per broker): every notification goes to hook(hook_ctx, entity_path)
 * -- the broker's DynamicConfigManager, which applies the change and tells the controller through
 * its front door (requests.h) -- instead of the controller-only reaction above. */
struct gr_config_change_listener *gr_config_change_listener_start_with(struct gr_kzk *kzk,
                                                                       struct gr_zk_watches *watches,
                                                                       struct gr_controller *controller,
                                                                       gr_config_change_fn hook, void *hook_ctx);
/* The same without a thread: registers the handler (marked dirty so that existing notifications
 * are read by the first process call). The owner drives it. hook may be NULL (the controller-only
 * reaction). */
struct gr_config_change_listener *gr_config_change_listener_new(struct gr_kzk *kzk, struct gr_zk_watches *watches,
                                                                struct gr_controller *controller);
struct gr_config_change_listener *gr_config_change_listener_new_with(struct gr_kzk *kzk,
                                                                     struct gr_zk_watches *watches,
                                                                     struct gr_controller *controller,
                                                                     gr_config_change_fn hook, void *hook_ctx);
/* Did the /config/changes child watch fire (or nothing was read yet)? Any thread. */
bool gr_config_change_listener_dirty(struct gr_config_change_listener *l);
/* Clears the dirty mark and reads every notification newer than the last one processed (re-arming
 * the child watch), putting TopicUncleanLeaderElectionEnable events on the controller's queue.
 * Only for listeners made by gr_config_change_listener_new; the owner's thread. false: a
 * notification could not be read or applied and is still pending; the owner calls again later. */
bool gr_config_change_listener_process(struct gr_config_change_listener *l);

/* Unregisters the handler, stops and joins the thread, frees. Call before kzk is freed. NULL is
 * ignored. */
void gr_config_change_listener_stop(struct gr_config_change_listener *l);

#endif
