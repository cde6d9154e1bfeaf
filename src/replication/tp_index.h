/* A small open-addressing index from (topic, partition) to a position in the caller's array,
 * for code that keeps topic-partitions in an array and must look them up per partition of a
 * request (the fetch sessions on both sides: a follower's session holds every partition its
 * leader leads, and a linear scan per named partition made each fetch round O(n^2)).
 *
 * The index stores positions only; the caller says how to read an entry's key (eq callback).
 * Linear probing, power-of-two capacity kept >= 2 x entries by the caller (gr_tpi_reserve), no
 * deletion: callers rebuild it when positions change (cheap: O(n), and they do O(n) work per
 * round anyway). Not thread-safe; owned by whoever embeds it. */
#ifndef GR_REPLICATION_TP_INDEX_H
#define GR_REPLICATION_TP_INDEX_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

struct gr_tpi {
    int32_t *slot; /* position, or -1 */
    uint32_t cap;  /* 0 or a power of two */
    int32_t n;     /* entries inserted */
};

/* Does the caller's entry at pos have this key? */
typedef bool (*gr_tpi_eq_fn)(const void *ctx, int32_t pos, const char *topic, int32_t partition);

static inline uint64_t gr_tpi_hash(const char *topic, int32_t partition) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *c = (const unsigned char *)(topic ? topic : ""); *c; c++)
        h = (h ^ *c) * 1099511628211ULL;
    h = (h ^ (uint32_t)partition) * 1099511628211ULL;
    return h ^ (h >> 29);
}

static inline void gr_tpi_free(struct gr_tpi *x) {
    free(x->slot);
    memset(x, 0, sizeof *x);
}

/* Empties the index and makes room for `need` entries. */
static inline void gr_tpi_reset(struct gr_tpi *x, int32_t need) {
    uint32_t cap = 64;
    while (cap < (uint32_t)(need > 0 ? need : 0) * 2u) cap *= 2;
    if (cap != x->cap) {
        free(x->slot);
        x->slot = gr_malloc((size_t)cap * sizeof *x->slot);
        x->cap = cap;
    }
    memset(x->slot, 0xff, (size_t)cap * sizeof *x->slot);
    x->n = 0;
}

/* The position of (topic, partition), or -1. */
static inline int32_t gr_tpi_find(const struct gr_tpi *x, const char *topic, int32_t partition, gr_tpi_eq_fn eq,
                                  const void *ctx) {
    if (x->cap == 0) return -1;
    uint32_t mask = x->cap - 1;
    for (uint32_t s = (uint32_t)gr_tpi_hash(topic, partition) & mask;; s = (s + 1) & mask) {
        int32_t pos = x->slot[s];
        if (pos < 0) return -1;
        if (eq(ctx, pos, topic, partition)) return pos;
    }
}

/* Adds pos for (topic, partition), which must not be in the index. The caller keeps
 * x->n < x->cap / 2 (gr_tpi_reset with enough room). */
static inline void gr_tpi_insert(struct gr_tpi *x, const char *topic, int32_t partition, int32_t pos) {
    uint32_t mask = x->cap - 1, s = (uint32_t)gr_tpi_hash(topic, partition) & mask;
    while (x->slot[s] >= 0) s = (s + 1) & mask;
    x->slot[s] = pos;
    x->n++;
}

#endif
