/* The time index (format and rules in time_index.h and docs/STORAGE.md). */
#include "storage/time_index.h"

#include <stdlib.h>

#include "common/util.h"
#include "common/be.h"

void gr_time_index_free(struct gr_time_index *t) {
    free(t->e);
    t->e = NULL;
    t->n = t->cap = t->n_file = 0;
}

static void push(struct gr_time_index *t, int64_t ts, uint32_t rel) {
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 32;
        t->e = gr_realloc(t->e, t->cap * sizeof *t->e);
    }
    t->e[t->n++] = (struct gr_time_entry){ts, rel};
}

bool gr_time_index_maybe_append(struct gr_time_index *t, int64_t ts, uint32_t rel) {
    if (ts < 0) return false;
    if (t->n) {
        const struct gr_time_entry *last = &t->e[t->n - 1];
        if (ts <= last->ts || rel < last->rel) return false;
    }
    push(t, ts, rel);
    return true;
}

void gr_time_index_truncate(struct gr_time_index *t, uint32_t rel_limit) {
    while (t->n && t->e[t->n - 1].rel >= rel_limit) t->n--;
    if (t->n_file > t->n) t->n_file = t->n;
}

long gr_time_index_lookup(const struct gr_time_index *t, int64_t target) {
    size_t lo = 0, hi = t->n; /* first entry with ts > target */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->e[mid].ts <= target) lo = mid + 1;
        else hi = mid;
    }
    return (long)lo - 1;
}

void gr_time_index_encode(const struct gr_time_index *t, size_t from, uint8_t *out) {
    for (size_t i = from; i < t->n; i++, out += GR_TIME_INDEX_ENTRY_SIZE) {
        gr_put_be64(out, (uint64_t)t->e[i].ts);
        gr_put_be32(out + 8, t->e[i].rel);
    }
}

int gr_time_index_decode(struct gr_time_index *t, const uint8_t *buf, size_t len, int64_t max_rel) {
    t->n = t->n_file = 0;
    if (len % GR_TIME_INDEX_ENTRY_SIZE) return -1;
    for (size_t off = 0; off < len; off += GR_TIME_INDEX_ENTRY_SIZE) {
        int64_t ts = (int64_t)gr_be64(buf + off);
        uint32_t rel = gr_be32(buf + off + 8);
        if (ts < 0 || (int64_t)rel > max_rel || (t->n && (ts <= t->e[t->n - 1].ts || rel < t->e[t->n - 1].rel))) {
            t->n = 0;
            return -1;
        }
        push(t, ts, rel);
    }
    t->n_file = t->n;
    return 0;
}
