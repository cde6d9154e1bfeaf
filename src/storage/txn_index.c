/* The aborted-transaction index: see txn_index.h. */
#include "storage/txn_index.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "common/be.h"

#define LOGGER "kafka.log.TransactionIndex"

struct gr_txn_index {
    const char *dir; /* borrowed */
    struct gr_aborted_txn *e; /* sorted by last_offset */
    int n, cap;
    int64_t *dirty; /* bases of the files written since the last gr_txn_index_flush */
    int ndirty, capdirty;
};

static void mark_dirty(struct gr_txn_index *ti, int64_t base) {
    for (int i = 0; i < ti->ndirty; i++)
        if (ti->dirty[i] == base) return;
    if (ti->ndirty == ti->capdirty) {
        ti->capdirty = ti->capdirty ? ti->capdirty * 2 : 4;
        ti->dirty = gr_realloc(ti->dirty, (size_t)ti->capdirty * sizeof *ti->dirty);
    }
    ti->dirty[ti->ndirty++] = base;
}

void gr_txn_index_encode(const struct gr_aborted_txn *e, uint8_t out[GR_TXN_INDEX_ENTRY_SIZE]) {
    gr_put_be16(out, 0);
    gr_put_be64(out + 2, (uint64_t)e->producer_id);
    gr_put_be64(out + 10, (uint64_t)e->first_offset);
    gr_put_be64(out + 18, (uint64_t)e->last_offset);
    gr_put_be64(out + 26, (uint64_t)e->last_stable_offset);
}

int gr_txn_index_decode(const uint8_t *buf, size_t len, struct gr_aborted_txn *e) {
    if (len < GR_TXN_INDEX_ENTRY_SIZE || gr_be16(buf) != 0) return -EINVAL;
    e->producer_id = (int64_t)gr_be64(buf + 2);
    e->first_offset = (int64_t)gr_be64(buf + 10);
    e->last_offset = (int64_t)gr_be64(buf + 18);
    e->last_stable_offset = (int64_t)gr_be64(buf + 26);
    e->segment_base = -1;
    return 0;
}

static char *file_path(const struct gr_txn_index *ti, int64_t base) {
    size_t n = strlen(ti->dir) + 48;
    char *p = gr_malloc(n);
    snprintf(p, n, "%s/%020" PRId64 GR_TXN_INDEX_SUFFIX, ti->dir, base);
    return p;
}

static void push(struct gr_txn_index *ti, const struct gr_aborted_txn *e) {
    if (ti->n == ti->cap) {
        ti->cap = ti->cap ? ti->cap * 2 : 16;
        ti->e = gr_realloc(ti->e, (size_t)ti->cap * sizeof *ti->e);
    }
    ti->e[ti->n++] = *e;
}

static int cmp_last(const void *a, const void *b) {
    const struct gr_aborted_txn *x = a, *y = b;
    return x->last_offset < y->last_offset ? -1 : x->last_offset > y->last_offset;
}

static void load_file(struct gr_txn_index *ti, const char *name, int64_t base) {
    size_t n = strlen(ti->dir) + strlen(name) + 2;
    char *path = gr_malloc(n);
    snprintf(path, n, "%s/%s", ti->dir, name);
    FILE *f = fopen(path, "rb");
    free(path);
    if (!f) return;
    uint8_t buf[GR_TXN_INDEX_ENTRY_SIZE];
    struct gr_aborted_txn e;
    while (fread(buf, 1, sizeof buf, f) == sizeof buf) {
        if (gr_txn_index_decode(buf, sizeof buf, &e) != 0) break;
        e.segment_base = base;
        push(ti, &e);
    }
    fclose(f);
}

struct gr_txn_index *gr_txn_index_new(const char *dir) {
    struct gr_txn_index *ti = gr_calloc(1, sizeof *ti);
    ti->dir = dir;
    return ti;
}

struct gr_txn_index *gr_txn_index_open(const char *dir) {
    struct gr_txn_index *ti = gr_txn_index_new(dir);
    DIR *d = opendir(dir);
    if (!d) return ti;
    struct dirent *de;
    size_t sl = strlen(GR_TXN_INDEX_SUFFIX);
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l != 20 + sl || strcmp(de->d_name + 20, GR_TXN_INDEX_SUFFIX) != 0) continue;
        char *end;
        long long base = strtoll(de->d_name, &end, 10);
        if (end != de->d_name + 20 || base < 0) continue;
        load_file(ti, de->d_name, base);
    }
    closedir(d);
    if (ti->n > 1) qsort(ti->e, (size_t)ti->n, sizeof *ti->e, cmp_last);
    return ti;
}

void gr_txn_index_free(struct gr_txn_index *ti) {
    if (!ti) return;
    free(ti->e);
    free(ti->dirty);
    free(ti);
}

int gr_txn_index_count(const struct gr_txn_index *ti) { return ti->n; }

int gr_txn_index_append(struct gr_txn_index *ti, int64_t segment_base, const struct gr_aborted_txn *in) {
    if (ti->n && in->last_offset <= ti->e[ti->n - 1].last_offset) return 0;
    struct gr_aborted_txn e = *in;
    e.segment_base = segment_base;
    uint8_t buf[GR_TXN_INDEX_ENTRY_SIZE];
    gr_txn_index_encode(&e, buf);
    char *path = file_path(ti, segment_base);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int rc = 0;
    if (fd < 0 || write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) rc = -errno ? -errno : -EIO;
    if (fd >= 0) close(fd);
    if (rc) gr_warn(LOGGER, "cannot append to %s: %s", path, strerror(-rc));
    else
        mark_dirty(ti, segment_base);
    free(path);
    push(ti, &e); /* memory stays right even if the file write failed */
    return rc;
}

/* Rewrites the file of base from memory (deleting it when empty). */
static void rewrite_file(struct gr_txn_index *ti, int64_t base) {
    char *path = file_path(ti, base);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int k = 0;
    for (int i = 0; i < ti->n && fd >= 0; i++) {
        if (ti->e[i].segment_base != base) continue;
        uint8_t buf[GR_TXN_INDEX_ENTRY_SIZE];
        gr_txn_index_encode(&ti->e[i], buf);
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) break;
        k++;
    }
    if (fd >= 0) close(fd);
    if (!k) unlink(path);
    else
        mark_dirty(ti, base);
    free(path);
}

int gr_txn_index_flush(struct gr_txn_index *ti) {
    int rc = 0;
    int k = 0;
    for (int i = 0; i < ti->ndirty; i++) {
        char *path = file_path(ti, ti->dirty[i]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        int r = 0;
        if (fd < 0)
            r = errno == ENOENT ? 0 : -errno; /* emptied since: nothing to keep */
        else if (fdatasync(fd) < 0)
            r = -errno;
        if (fd >= 0) close(fd);
        if (r) {
            gr_error(LOGGER, "cannot fsync %s: %s", path, strerror(-r));
            if (!rc) rc = r;
            ti->dirty[k++] = ti->dirty[i]; /* still to be made durable */
        }
        free(path);
    }
    ti->ndirty = k;
    return rc;
}

int gr_txn_index_truncate(struct gr_txn_index *ti, int64_t offset) {
    int keep = ti->n;
    while (keep > 0 && ti->e[keep - 1].last_offset >= offset) keep--;
    if (keep == ti->n) return 0;
    int64_t *bases = gr_malloc((size_t)(ti->n - keep) * sizeof *bases);
    int nb = 0;
    for (int i = keep; i < ti->n; i++)
        if (!nb || bases[nb - 1] != ti->e[i].segment_base) bases[nb++] = ti->e[i].segment_base;
    ti->n = keep;
    for (int i = 0; i < nb; i++) rewrite_file(ti, bases[i]);
    free(bases);
    return 0;
}

void gr_txn_index_drop_segments_below(struct gr_txn_index *ti, int64_t segment_base) {
    int k = 0;
    for (int i = 0; i < ti->n; i++) {
        if (ti->e[i].segment_base >= segment_base) {
            ti->e[k++] = ti->e[i];
        } else if (i == 0 || ti->e[i - 1].segment_base != ti->e[i].segment_base) {
            char *path = file_path(ti, ti->e[i].segment_base);
            unlink(path);
            free(path);
        }
    }
    ti->n = k;
}

void gr_txn_index_clear(struct gr_txn_index *ti) { gr_txn_index_drop_segments_below(ti, INT64_MAX); }

int gr_txn_index_collect(const struct gr_txn_index *ti, int64_t fetch_offset, int64_t upper_bound,
                         struct gr_aborted_txn *out, int max, int *total) {
    int k = 0, t = 0;
    for (int i = 0; i < ti->n; i++) {
        const struct gr_aborted_txn *e = &ti->e[i];
        if (e->last_offset < fetch_offset) continue;
        if (e->first_offset < upper_bound) {
            if (k < max) out[k++] = *e;
            t++;
        }
        /* Kafka stops after an entry whose last stable offset is >= upper_bound; earlier Gregor
         * versions could write that value too high (for a marker whose follower append also ended
         * another transaction), so every overlapping entry is collected instead: the
         * exact set, whatever the files say (the scan covers every entry anyway). */
    }
    if (total) *total = t;
    return k;
}

int gr_txn_index_range(const struct gr_txn_index *ti, int64_t from, int64_t to, struct gr_aborted_txn **out) {
    int k = 0;
    *out = NULL;
    for (int i = 0; i < ti->n; i++) {
        const struct gr_aborted_txn *e = &ti->e[i];
        if (e->last_offset < from || e->first_offset >= to) continue;
        if (!*out) *out = gr_malloc((size_t)(ti->n - i) * sizeof **out);
        (*out)[k++] = *e;
    }
    return k;
}

void gr_txn_index_replace_segments(struct gr_txn_index *ti, int64_t first_base, int64_t end_base, int64_t group_end,
                                   const struct gr_aborted_txn *kept, int n) {
    int k = 0;
    bool carried = false;
    for (int i = 0; i < ti->n; i++) {
        struct gr_aborted_txn e = ti->e[i];
        bool in_group = e.segment_base >= first_base && e.segment_base < end_base;
        if (in_group && e.last_offset < group_end) continue; /* its marker was cleaned: kept[] decides */
        if (in_group && e.segment_base != first_base) {
            e.segment_base = first_base;
            carried = true;
        }
        ti->e[k++] = e;
    }
    ti->n = k;
    for (int j = 0; j < n; j++) {
        bool dup = false; /* already indexed in another segment's file (replayed marker) */
        for (int i = 0; i < k && !dup; i++) dup = ti->e[i].last_offset == kept[j].last_offset;
        if (dup) continue;
        struct gr_aborted_txn e = kept[j];
        e.segment_base = first_base;
        push(ti, &e);
    }
    if (ti->n > 1) qsort(ti->e, (size_t)ti->n, sizeof *ti->e, cmp_last);
    if (carried) rewrite_file(ti, first_base);
}
