/* Topic deletion (Kafka 2.7's TopicDeletionManager plus KafkaController.processTopicDeletion and
 * processTopicDeletionStopReplicaResponseReceived). The DeleteTopics request handler
 * (src/api/handle_delete_topics.c) only creates /admin/delete_topics/<topic>, as Kafka's
 * AdminManager does; this module sees it through that path's child watch.
 *
 * Where the state lives:
 *   - topics queued for deletion: ctx->topics_to_be_deleted (context.h; gr_ctrl_topic_queued_for_
 *     deletion reads it, and the request batch sends leader -2 / StopReplica epoch -2 for them);
 *   - topics whose deletion started (topicsWithDeletionStarted) and topics ineligible for deletion
 *     (topicsIneligibleForDeletion): in struct gr_topic_deletion;
 *   - replica states (DeletionStarted/Successful/Ineligible): the replica state machine's, in the
 *     context.
 *
 * Flow (reference §6 "Topic deletion"):
 *   resume: for each queued topic -- all replicas DeletionSuccessful and every broker live at the
 *     epoch it was sent to has answered the UpdateMetadata with leader -2 (a deviation: Kafka does
 *     not wait, and a removal lost with a resigning controller's channels is never resent)
 *     -> complete (replicas ->
 *     NonExistent; guarded delete of /brokers/topics/T (recursive), /config/topics/T,
 *     /admin/delete_topics/T; the topic leaves the context); else none Started but some
 *     Ineligible -> retry (Ineligible -> Offline); eligible (queued, none Started, not marked
 *     ineligible) -> onTopicDeletion.
 *   onTopicDeletion: first time per topic: partitions -> Offline -> NonExistent; UpdateMetadata
 *     (leader -2) for its partitions to every registered broker; replicas on dead (or
 *     shutting-down) brokers -> DeletionIneligible and the topic is marked ineligible; the live
 *     ones not yet deleted -> Offline -> DeletionStarted (StopReplica delete=true, epoch -2).
 *   StopReplica responses: errors -> failReplicaDeletion (Ineligible, topic marked ineligible,
 *     resume); successes -> DeletionSuccessful, resume.
 *   A broker that starts up with replicas of a queued topic resumes it (flow hook brokers_started);
 *   it owes the removal of every queued topic (its start-up UpdateMetadata carries leader -2), and
 *   gets leader -2 for every topic whose deletion this controller completed (it may have been away,
 *   its cache still holding them; this term only; a topic created again under that name keeps
 *   its partitions: the request carries their current state instead);
 *   a broker that fails stops holding a completion up (flow hook brokers_failed);
 *   replicas of a queued topic that go offline fail (hook replicas_offline_for_deletion).
 * delete.topic.enable=false: /admin/delete_topics children are deleted and nothing else happens.
 *
 * Reassignments: Kafka halts a topic's deletion while one of its partitions is being reassigned
 * (and resumes it when one completes). Here a deletion does not wait: reassignments of a topic
 * queued for deletion are frozen instead (reassignment.h: never resumed or completed, new ones
 * refused), and the deletion removes every replica of RS, adding ones included. Kafka's way
 * leaves stray replicas (a reassignment resumed by a broker start-up sends LeaderAndIsr to a
 * replica whose deletion already succeeded) and deletions that hang (a frozen partition of a topic
 * being deleted is never re-elected, so its reassignment cannot complete).
 *
 * Two more deliberate deviations, both to avoid deletions that hang forever:
 *   - a StopReplica response with a top-level error and no partition errors fails every
 *     delete=true partition of that request (Kafka ignores such a response);
 *   - failReplicaDeletion first moves replicas that are still New/Online to Offline (Kafka's
 *     direct Online -> Ineligible is an invalid transition that leaves them Online).
 *
 * Threading: everything runs on the controller's event thread. Functions return 0 or GR_ECONTROLLER_MOVED (the caller resigns) or a kzk error. */
#ifndef GR_CONTROLLER_TOPIC_DELETION_H
#define GR_CONTROLLER_TOPIC_DELETION_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/states.h"

struct gr_topic_deletion;
struct gr_zk_watches;
struct gr_ctrl_event;

/* Creates the manager over sm (borrowed, as are watches, used to mute /brokers/topics/T data
 * watches of deleted topics; may be NULL). Any thread, before the controller starts. */
struct gr_topic_deletion *gr_td_new(struct gr_ctrl_sm *sm, struct gr_zk_watches *watches, bool delete_topic_enable);
void gr_td_free(struct gr_topic_deletion *td);

/* Flow hooks (brokers_started, replicas_offline_for_deletion) bound to td; brokers_failed is
 * NULL. Assign to sm->hooks. */
struct gr_ctrl_flow_hooks gr_td_flow_hooks(struct gr_topic_deletion *td);

/* Failover step 5 (fetchTopicDeletionsInProgress + init): reads /admin/delete_topics (arming the
 * child watch); enabled: queues all of them, ineligible = those with a replica that is not online;
 * disabled: deletes the znodes.
 * Forgets any state of an earlier term. */
int gr_td_init(struct gr_topic_deletion *td);

/* Failover step 8 (tryTopicDeletion): resumes queued deletions. */
int gr_td_try(struct gr_topic_deletion *td);

/* The TopicDeletion event (children of /admin/delete_topics changed): unknown topics' znodes are
 * deleted; disabled: all znodes deleted; else all are queued, then deletions resume. Active
 * controller only. */
int gr_td_process_topic_deletion(struct gr_topic_deletion *td);

/* An UpdateMetadata response (event thread, active controller): a broker that answered NONE to a
 * request carrying leader -2 for a queued topic, at its current registration, no longer holds up
 * that topic's completion; the deletion resumes. Returns as gr_td_try. */
int gr_td_process_update_metadata_response(struct gr_topic_deletion *td, struct gr_ctrl_event *ev);

/* TopicDeletionStopReplicaResponseReceived (payload struct gr_ctrl_response, broker_id set). */
int gr_td_process_stop_replica_response(struct gr_topic_deletion *td, struct gr_ctrl_event *ev);

/* markTopicIneligibleForDeletion (only topics queued are marked) / resumeDeletionForTopics (the
 * marks of queued topics are cleared, then deletions resume). */
void gr_td_mark_ineligible(struct gr_topic_deletion *td, const char *const *topics, int n, const char *reason);
int gr_td_resume_for_topics(struct gr_topic_deletion *td, const char *const *topics, int n);
/* failReplicaDeletion: replicas of queued topics -> DeletionIneligible, their topics marked,
 * deletions resume. */
int gr_td_fail_replica_deletion(struct gr_topic_deletion *td, const struct gr_ctrl_replica *r, int n);

/* Is the topic's deletion started (topicsWithDeletionStarted)? */
bool gr_td_deletion_started(const struct gr_topic_deletion *td, const char *topic);
bool gr_td_topic_ineligible(const struct gr_topic_deletion *td, const char *topic);

/* Gauge values (Kafka's updateMetrics): queued topics; their replicas not DeletionSuccessful;
 * topics marked ineligible; replicas in DeletionIneligible. */
struct gr_td_counts {
    int64_t topics_to_delete;
    int64_t replicas_to_delete;
    int64_t topics_ineligible;
    int64_t replicas_ineligible;
};
void gr_td_counts(struct gr_topic_deletion *td, struct gr_td_counts *out);

/* OfflinePartitionsCount as Kafka keeps it: partitions in OfflinePartition state, topics whose
 * deletion started excluded. */
int64_t gr_td_offline_partition_count(struct gr_topic_deletion *td);

#endif
