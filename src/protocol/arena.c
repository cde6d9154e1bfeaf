/* Bump allocator: a list of chunks, each carved front to back. Chunk sizes double from 4 KiB
 * up to 1 MiB; a request larger than the next chunk gets a chunk of its own. */
#include "protocol/arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define ARENA_FIRST_CHUNK 4096
#define ARENA_MAX_CHUNK (1024 * 1024)
#define ARENA_ALIGN (alignof(max_align_t))

struct gr_arena_chunk {
    struct gr_arena_chunk *next;
    size_t size; /* usable bytes in data[] */
    size_t used;
    alignas(max_align_t) unsigned char data[];
};

void gr_arena_init(struct gr_arena *a)
{
    a->head = NULL;
    a->total = 0;
}

void *gr_arena_alloc(struct gr_arena *a, size_t n)
{
    if (n > GR_ARENA_MAX_ALLOC)
        return NULL;
    size_t need = (n + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
    if (need == 0)
        need = ARENA_ALIGN;
    struct gr_arena_chunk *c = a->head;
    if (c == NULL || c->size - c->used < need) {
        size_t sz = c ? GR_MIN(c->size * 2, (size_t)ARENA_MAX_CHUNK) : ARENA_FIRST_CHUNK;
        if (sz < need)
            sz = need;
        struct gr_arena_chunk *nc = gr_malloc(sizeof(*nc) + sz);
        nc->size = sz;
        nc->used = 0;
        a->total += sz;
        if (c != NULL && sz == need && c->size - c->used >= ARENA_FIRST_CHUNK) {
            /* a big one-off block: keep carving the current chunk afterwards */
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            a->head = nc;
        }
        c = nc;
    }
    void *p = c->data + c->used;
    c->used += need;
    memset(p, 0, n);
    return p;
}

char *gr_arena_strndup(struct gr_arena *a, const char *s, size_t n)
{
    if (n >= GR_ARENA_MAX_ALLOC)
        return NULL;
    char *d = gr_arena_alloc(a, n + 1);
    if (d == NULL)
        return NULL;
    if (n)
        memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *gr_arena_strdup(struct gr_arena *a, const char *s)
{
    return s ? gr_arena_strndup(a, s, strlen(s)) : NULL;
}

void gr_arena_free(struct gr_arena *a)
{
    struct gr_arena_chunk *c = a->head;
    while (c) {
        struct gr_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->total = 0;
}
