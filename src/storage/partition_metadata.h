/* `partition.metadata` (Kafka 2.8+'s PartitionMetadataFile, KIP-516): the topic id of the log in
 * one partition directory, so that a log left behind by a deleted topic is never taken for a new
 * topic of the same name.
 *
 *   line 1     "version: 0"                  (readers accept any version >= 0, as Kafka)
 *   line 2     "topic_id: <Uuid text>"       22-char URL-safe base64, never ZERO_UUID
 *
 * Separator: ':' then one or more white-space characters. Kafka writes no final '\n'; we write
 * one (Kafka's reader takes both). Written atomically through gr_checkpoint_write_atomic
 * ("partition.metadata.tmp", fsync, rename, directory fsync), before the log is used under the
 * id (storage/log.h gr_plog_assign_topic_id). Contents are hostile: anything else is GR_ECORRUPT.
 * COMPATIBILITY: Kafka's format; Kafka reads what we write and vice versa.
 *
 * Stateless; any thread (two writers of one directory are serialised by the log's lock). */
#ifndef GR_STORAGE_PARTITION_METADATA_H
#define GR_STORAGE_PARTITION_METADATA_H

#include "common/uuid.h"

#define GR_PARTITION_METADATA_FILE "partition.metadata"

/* Reads <dir>/partition.metadata: 0 and *out, -ENOENT when the file does not exist, GR_ECORRUPT
 * when it is malformed (or longer than a few hundred bytes), or -errno. */
int gr_partition_metadata_read(const char *dir, struct gr_uuid *out);
/* Writes <dir>/partition.metadata for id atomically. 0 or -errno. */
int gr_partition_metadata_write(const char *dir, const struct gr_uuid *id);

#endif
