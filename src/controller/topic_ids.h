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
 * which knows the topic's id, writes it back (gr_ctrl_restore_topic_id). Only a controller that
 * never knew the id (the rewrite happened while no controller was active, or before the next
 * one loaded the topic) gives the topic a new one, as Kafka does; the brokers then move their
 * logs of the old id aside, never delete them (api/handle_control.c; docs/STORAGE.md says how
 * an operator gets the data back).
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

/* Gives every topic names[0..n) of ctx that has no id one and writes it (see above); topics not
 * in ctx are skipped. On success t->topic_id/t->id are set and t->zk_version follows the write.
 * A topic whose znode vanished meanwhile is left alone (its deletion is on the way). Returns 0,
 * GR_ECONTROLLER_MOVED (the caller resigns) or another kzk error after logging it (topics already
 * written keep their ids; the rest get theirs at the next failover or TopicChange). */
int gr_ctrl_assign_topic_ids(struct gr_kzk *kzk, struct gr_ctrl_context *ctx, const struct gr_ctrl_topic_id_source *src,
                             const char *const *names, int n);

/* Kafka's PartitionModifications saw /brokers/topics/T (read: its content and zkVersion as just
 * read) without t's id or with another one while the context knows t's id: writes the content
 * back with t's id, conditionally on read->zk_version (a guarded set; on a conflict the znode is
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
