/* Kafka's Uuid (KIP-516 topic ids): 16 bytes, written as URL-safe base64 without padding (22
 * characters, Uuid.toString). The all-zero id is Uuid.ZERO_UUID ("no id" on the wire);
 * 0...01 is reserved for the KRaft metadata topic. Ids are plain values: no ownership, no
 * locking, every function may be called from any thread. */
#ifndef GR_COMMON_UUID_H
#define GR_COMMON_UUID_H

#include <stdbool.h>
#include <stdint.h>

#define GR_UUID_STR_LEN 22 /* characters of the text form, without the NUL */

struct gr_uuid {
    uint8_t b[16]; /* most significant byte first, as on the wire */
};

/* A fresh random id as Kafka's Uuid.randomUuid: a version 4 UUID, never one of the reserved
 * ids (zero, one) and never one whose text starts with '-'. */
void gr_uuid_random(struct gr_uuid *out);
/* The same, with `next_u64` supplying the random bits instead of getrandom() (the controller
 * simulation's seeded generator). */
void gr_uuid_random_from(struct gr_uuid *out, uint64_t (*next_u64)(void *arg), void *arg);

bool gr_uuid_is_zero(const struct gr_uuid *u);
bool gr_uuid_equal(const struct gr_uuid *a, const struct gr_uuid *b);

/* Uuid.toString into out (GR_UUID_STR_LEN + 1 bytes); returns out. */
char *gr_uuid_to_string(const struct gr_uuid *u, char out[GR_UUID_STR_LEN + 1]);
/* Uuid.fromString: 22 URL-safe base64 characters (or 24 ending in "=="). Returns 0, or -EINVAL
 * for anything else (text from ZooKeeper or disk is hostile). */
int gr_uuid_parse(const char *s, struct gr_uuid *out);

#endif
