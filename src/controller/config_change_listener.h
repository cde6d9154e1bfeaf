/* The part of Kafka 2.7's DynamicConfigManager (ZkNodeChangeNotificationListener on
 * /config/changes + TopicConfigHandler) that the controller needs: when a topic's config is
 * changed to unclean.leader.election.enable=true and this broker is the active controller, a
 * TopicUncleanLeaderElectionEnable(topic) event is put on the controller's queue, which runs
 * triggerOnlinePartitionStateChange for that topic (the election then reads /config/topics/T).
 *
 *   /config/changes/config_change_<seq>   {"version":2,"entity_path":"topics/T"}
 *   (version 1 notifications, written by Kafka < 2.0 tools, are not understood: logged, skipped)
 *
 * Every notification with a sequence number above the last processed one is read once (all of
 * them after start-up, as Kafka's listener does); notifications are never deleted here (Kafka
 * purges them after 15 minutes: not implemented). Broker-level dynamic configs
 * (brokers/<id>, brokers/<default>) are logged and otherwise ignored: the controller's default
 * comes from server.properties.
 *
 * Threading: one thread of its own (ZooKeeper reads must not run on the ZooKeeper callback
 * thread); the child-watch handler only wakes it. */
#ifndef GR_CONTROLLER_CONFIG_CHANGE_LISTENER_H
#define GR_CONTROLLER_CONFIG_CHANGE_LISTENER_H

struct gr_kzk;
struct gr_zk_watches;
struct gr_controller;
struct gr_config_change_listener;

/* Starts the listener (registers the /config/changes child handler in watches, starts the
 * thread, processes existing notifications). kzk, watches and controller are borrowed and must
 * outlive it. Returns NULL if the thread cannot start (logged). */
struct gr_config_change_listener *gr_config_change_listener_start(struct gr_kzk *kzk, struct gr_zk_watches *watches,
                                                                  struct gr_controller *controller);
/* Unregisters the handler, stops and joins the thread, frees. Call before kzk is freed. NULL is
 * ignored. */
void gr_config_change_listener_stop(struct gr_config_change_listener *l);

#endif
