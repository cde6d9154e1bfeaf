/* Kafka's topic name rules (clients' org.apache.kafka.common.internals.Topic, 2.7).
 *
 *   legal characters  [a-zA-Z0-9._-]
 *   length            1..249
 *   not               "." or ".."
 *   collisions        two names that become equal when every '.' is replaced by '_' collide
 *                     (metric names cannot tell them apart); creating a name with a '.' or '_'
 *                     that collides with an existing different topic is INVALID_TOPIC_EXCEPTION.
 * Internal topics: __consumer_offsets, __transaction_state.
 *
 * Pure functions, any thread. */
#ifndef GR_BROKER_TOPIC_NAMES_H
#define GR_BROKER_TOPIC_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GR_TOPIC_MAX_NAME_LEN 249
#define GR_GROUP_METADATA_TOPIC "__consumer_offsets"
#define GR_TRANSACTION_STATE_TOPIC "__transaction_state"

/* NONE or INVALID_TOPIC_EXCEPTION (with Kafka's message in err when err != NULL). NULL is
 * invalid. */
int16_t gr_topic_validate_name(const char *name, char *err, size_t errlen);
/* Does the name contain '.' or '_'? */
bool gr_topic_has_collision_chars(const char *name);
/* Do a and b differ but become equal with '.' -> '_'? */
bool gr_topic_collides(const char *a, const char *b);
/* __consumer_offsets or __transaction_state. */
bool gr_topic_is_internal(const char *name);

#endif
