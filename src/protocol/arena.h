/* Bump allocator for decoded protocol messages.
 *
 * Ownership: everything gr_arena_alloc() returns belongs to the arena and is released at once
 * by gr_arena_free(); there is no per-object free. An arena is not thread-safe: one thread
 * (usually the one handling the request) uses it at a time. */
#ifndef GR_PROTOCOL_ARENA_H
#define GR_PROTOCOL_ARENA_H

#include <stddef.h>

/* Refuse single allocations above this (a decoder bug or hostile input, never real data). */
#define GR_ARENA_MAX_ALLOC ((size_t)1 << 30)

struct gr_arena_chunk;

struct gr_arena {
    struct gr_arena_chunk *head; /* newest chunk first */
    size_t total;                /* bytes obtained from malloc, for accounting */
};

/* Prepare an empty arena (no allocation happens until the first gr_arena_alloc). */
void gr_arena_init(struct gr_arena *a);
/* Zeroed memory aligned for any type, valid until gr_arena_free. Returns NULL only when
 * n > GR_ARENA_MAX_ALLOC (malloc failure aborts, like gr_malloc). */
void *gr_arena_alloc(struct gr_arena *a, size_t n);
/* Copy n bytes of s into the arena and NUL-terminate. NULL only if n is too large. */
char *gr_arena_strndup(struct gr_arena *a, const char *s, size_t n);
/* Copy a NUL-terminated string (NULL stays NULL). */
char *gr_arena_strdup(struct gr_arena *a, const char *s);
/* Release everything; the arena is empty and may be reused afterwards. */
void gr_arena_free(struct gr_arena *a);

#endif
