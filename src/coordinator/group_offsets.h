/* The __consumer_offsets topic: which partition a group lives in, and the key/value formats of
 * the records the group coordinator writes there (Kafka 2.7's GroupMetadataManager schemas, so
 * a log written by Gregor reads like one written by Kafka and vice versa).
 *
 * Partition of a group: Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions, where
 * hashCode is Java's String.hashCode over the UTF-16 code units of the id and Utils.abs(n) is
 * n & 0x7fffffff.
 *
 * Record keys (all integers big-endian; string = int16 length + UTF-8 bytes, nullable string
 * length -1 = null; bytes = int32 length + bytes):
 *
 *   offset commit key, version 0 or 1 (Gregor writes 1)
 *     off  size  field
 *       0     2  version        int16  0 or 1
 *       2     -  group          string
 *       -     -  topic          string
 *       -     4  partition      int32
 *
 *   group metadata key, version 2
 *       0     2  version        int16  2
 *       2     -  group          string
 *
 * Offset commit values (a null value is a tombstone: the offset was deleted):
 *   v0: version int16 | offset int64 | metadata string | timestamp int64
 *   v1: version int16 | offset int64 | metadata string | commit_timestamp int64 |
 *       expire_timestamp int64                      (written when a retention time was given)
 *   v2: version int16 | offset int64 | metadata string | commit_timestamp int64
 *   v3: version int16 | offset int64 | leader_epoch int32 | metadata string |
 *       commit_timestamp int64                      (written otherwise)
 *
 * Group metadata values (null = the group was deleted):
 *   version int16 | protocol_type string | generation int32 | protocol nullable string |
 *   leader nullable string | current_state_timestamp int64 (v2+) | members array (int32 count):
 *     member_id string | group_instance_id nullable string (v3+) | client_id string |
 *     client_host string | rebalance_timeout int32 (v1+) | session_timeout int32 |
 *     subscription bytes | assignment bytes
 *   Gregor writes v3.
 *
 * COMPATIBILITY: these are Kafka's on-disk formats; never change them.
 *
 * Pure functions on caller-owned buffers; any thread. Bytes read back are hostile: decoders
 * return GR_ECORRUPT, never assert. */
#ifndef GR_BROKER_GROUP_OFFSETS_H
#define GR_BROKER_GROUP_OFFSETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/arena.h"
#include "protocol/wire.h"

#define GR_OFFSETS_TOPIC "__consumer_offsets"
#define GR_OFFSETS_DEFAULT_PARTITIONS 50

/* Java's String.hashCode of the UTF-8 string s (decoded to UTF-16; malformed bytes count as
 * U+FFFD, as Java's decoder does). */
int32_t gr_java_string_hash(const char *s);
/* abs(hashCode(group_id)) % n (n > 0). */
int32_t gr_group_partition_for(const char *group_id, int32_t n);

enum gr_go_key_kind { GR_GO_KEY_OFFSET = 1, GR_GO_KEY_GROUP = 2 };

/* A decoded key; strings live in the arena given to the decoder. */
struct gr_go_key {
    enum gr_go_key_kind kind;
    int16_t version;
    char *group;
    char *topic;       /* offset keys only */
    int32_t partition; /* offset keys only */
};

struct gr_go_offset_value {
    int16_t version;
    int64_t offset;
    int32_t leader_epoch; /* -1 when absent (v0-v2) */
    char *metadata;       /* never NULL after decoding ("" when null on disk) */
    int64_t commit_timestamp;
    int64_t expire_timestamp; /* -1 when absent */
};

struct gr_go_member {
    char *member_id;
    char *group_instance_id; /* NULL when none */
    char *client_id;
    char *client_host;
    int32_t rebalance_timeout;
    int32_t session_timeout;
    const uint8_t *subscription; /* points into the decoded buffer */
    int32_t subscription_len;
    const uint8_t *assignment;
    int32_t assignment_len;
};

struct gr_go_group_value {
    int16_t version;
    char *protocol_type;
    int32_t generation;
    char *protocol; /* NULL when none */
    char *leader;   /* NULL when none */
    int64_t current_state_timestamp; /* -1 when absent */
    int n_members;
    struct gr_go_member *members;
};

/* Encoders append to w. */
void gr_go_encode_offset_key(struct gr_wbuf *w, const char *group, const char *topic, int32_t partition);
void gr_go_encode_group_key(struct gr_wbuf *w, const char *group);
/* Writes v1 when expire_timestamp >= 0, else v3. */
void gr_go_encode_offset_value(struct gr_wbuf *w, const struct gr_go_offset_value *v);
/* Writes v3. */
void gr_go_encode_group_value(struct gr_wbuf *w, const struct gr_go_group_value *v);

/* Decoders: 0 or GR_ECORRUPT (unknown version, short or malformed bytes). Strings go into a;
 * byte fields point into buf. */
int gr_go_decode_key(const uint8_t *buf, size_t len, struct gr_arena *a, struct gr_go_key *out);
int gr_go_decode_offset_value(const uint8_t *buf, size_t len, struct gr_arena *a,
                              struct gr_go_offset_value *out);
int gr_go_decode_group_value(const uint8_t *buf, size_t len, struct gr_arena *a,
                             struct gr_go_group_value *out);

#endif
