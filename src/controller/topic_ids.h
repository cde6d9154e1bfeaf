/* Topic ids (KIP-516) in the ZooKeeper-mode controller: Kafka 2.8+'s KafkaController.processTopicIds.
 *
 * A topic gets its id where it is created (src/admin/topic_admin.c writes /brokers/topics/T at
 * version 3 with a fresh Uuid). Topics created without one (by a broker of an older version, by a
 * tool, or before the upgrade) get one from the active controller: at failover for every topic
 * of the context, and for each topic a TopicChange adds. The id is written into the topic znode
 * CONDITIONALLY on the zkVersion the controller read (a guarded multi, so also fenced by
 * /controller_epoch), never with "any version" as Kafka's setTopicIds does: a concurrent writer
 * (CreatePartitions, another tool) either finds the id already there or makes us read the znode
 * again and write its new content with the id. An id is never changed or removed once set: every
 * writer of the znode (reassignment, restore of a deleted topic's assignment, CreatePartitions)
 * carries the id it read; and when another writer drops it or writes another one (a Kafka 2.7
 * tool rewriting /brokers/topics/T: kafka-topics --zookeeper --alter), the active controller,
 * which knows the topic's id, writes it back (gr_ctrl_restore_topic_id).
 *
 * A second copy of the id survives a controller change: the data of /brokers/topics/T/partitions,
 * the standby stamp (kzk.h, gr_kzk_set_stamp_id_lookup: every state write carries the context's
 * id, gr_ctrl_topic_stamp_id), written also with every id this file writes. Kafka creates that
 * znode empty and never reads or writes its data, so a 2.x tool never rewrites it; it is T's
 * child, so it dies with T's znode (a deletion by the controller or by hand) and an id can never
 * pass to a new incarnation. A controller that finds T without an id (failover, TopicChange)
 * takes the stamp's id if it holds one, and only else a new one, as Kafka does -- left: a topic
 * never stamped (written without an id by a 2.x tool and rewritten before any state write, or a
 * cluster upgraded from 2.7); its brokers then move their logs of the old id aside, never delete
 * them (api/handle_control.c; docs/STORAGE.md).
 *
 * Event thread only (it reads and writes the controller context). */
#ifndef GR_CONTROLLER_TOPIC_IDS_H
#define GR_CONTROLLER_TOPIC_IDS_H

#include "common/uuid.h"
#include "controller/context.h"

/* Where fresh ids come from: NULL fn = gr_uuid_random (the simulation passes a seeded one). */
struct gr_ctrl_topic_id_source {
    void (*fn)(void *arg, struct gr_uuid *out);
    void *arg;
};

/* The stamp id lookup (gr_kzk_set_stamp_id_lookup; ctx: the controller's context): the topic's
 * id as the context holds it, or NULL. Event thread only. */
const char *gr_ctrl_topic_stamp_id(void *ctx, const char *topic);

/* Gives every topic names[0..n) of ctx that has no id one and writes it (see above): the id its
 * stamp holds (a malformed one = none, WARN), else a new one; topics not in ctx are skipped. The
 * stamp, where it exists, gets the id in the same guarded multi. On success t->topic_id/t->id are set and t->zk_version follows the write.
 * A topic whose znode vanished meanwhile is left alone (its deletion is on the way). Returns 0,
 * GR_ECONTROLLER_MOVED (the caller resigns) or another kzk error after logging it (topics already
 * written keep their ids; the rest get theirs at the next failover or TopicChange). */
int gr_ctrl_assign_topic_ids(struct gr_kzk *kzk, struct gr_ctrl_context *ctx, const struct gr_ctrl_topic_id_source *src,
                             const char *const *names, int n);

/* Kafka's PartitionModifications saw /brokers/topics/T (read: its content and zkVersion as just
 * read) without t's id or with another one while the context knows t's id: writes the content
 * back with t's id (and into its stamp, when it exists), conditionally on read->zk_version (a guarded multi; on a conflict the znode is
 * read again and its new content written with the id, up to a few times). A znode with another
 * id is logged at ERROR and gets the context's id back too: the brokers' logs hold the context's
 * id, and a new one would move every replica's data aside. No-op when the ids agree or t has no
 * id. On success t->zk_version follows the write. Returns 0 (also when the znode vanished),
 * GR_ECONTROLLER_MOVED or another kzk error (logged; the next change of the znode tries again).
 * Test hook: while the file named by GREGOR_TEST_TOPIC_ID_RESTORE_PAUSE exists, the write-back
 * (and so the controller's event thread) waits before it starts. */
int gr_ctrl_restore_topic_id(struct gr_kzk *kzk, struct gr_ctrl_context *ctx, struct gr_ctrl_topic *t,
                             const struct gr_kzk_topic_assignment *read);

#endif
