/* Leader-epoch cache (KIP-101): epoch -> first offset written in that epoch. */
#include "storage/epoch_cache.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "storage/checkpoint.h"

#define LOGGER "storage.epochcache"

int gr_epoch_cache_persist(const struct gr_epoch_cache *ec) {
    size_t cap = 32 + ec->n * 34, len = 0;
    char *buf = gr_malloc(cap);
    len += (size_t)snprintf(buf, cap, "0\n%zu\n", ec->n);
    for (size_t i = 0; i < ec->n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%" PRId32 " %" PRId64 "\n", ec->e[i].epoch,
                                ec->e[i].start_offset);
    char *path = gr_asprintf("%s/%s", ec->dir, GR_LEADER_EPOCH_CHECKPOINT);
    int rc = gr_checkpoint_write_atomic(path, buf, len);
    free(path);
    free(buf);
    return rc;
}

static void push(struct gr_epoch_cache *ec, int32_t epoch, int64_t start) {
    if (ec->n == ec->cap) {
        ec->cap = ec->cap ? ec->cap * 2 : 8;
        ec->e = gr_realloc(ec->e, ec->cap * sizeof *ec->e);
    }
    ec->e[ec->n++] = (struct gr_epoch_entry){epoch, start};
}

/* Parses the file text; 0 or -1 when malformed. */
static int parse(struct gr_epoch_cache *ec, char *text) {
    char *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    if (!line || strcmp(line, "0") != 0) return -1;
    line = strtok_r(NULL, "\n", &save);
    char *end;
    if (!line) return -1;
    errno = 0;
    long long count = strtoll(line, &end, 10);
    if (errno || *end || count < 0 || count > 10000000) return -1;
    for (long long i = 0; i < count; i++) {
        line = strtok_r(NULL, "\n", &save);
        if (!line) return -1;
        long long ep = strtoll(line, &end, 10);
        if (end == line || *end != ' ' || ep < 0 || ep > INT32_MAX) return -1;
        char *p = end + 1;
        long long off = strtoll(p, &end, 10);
        if (end == p || *end || off < 0) return -1;
        /* Entries must increase in both columns. */
        if (ec->n && (ep <= ec->e[ec->n - 1].epoch || off < ec->e[ec->n - 1].start_offset)) return -1;
        push(ec, (int32_t)ep, off);
    }
    return 0;
}

void gr_epoch_cache_init(struct gr_epoch_cache *ec, const char *dir) {
    memset(ec, 0, sizeof *ec);
    ec->dir = dir;
}

int gr_epoch_cache_load(struct gr_epoch_cache *ec, const char *dir) {
    gr_epoch_cache_init(ec, dir);
    char *path = gr_asprintf("%s/%s", dir, GR_LEADER_EPOCH_CHECKPOINT);
    char *text;
    int rc = gr_checkpoint_read_file(path, &text, NULL);
    if (rc < 0) {
        free(path);
        return rc == -ENOENT ? 0 : rc;
    }
    if (parse(ec, text) < 0) {
        gr_warn(LOGGER, "malformed leader epoch checkpoint '%s'; starting with an empty cache", path);
        ec->n = 0;
        rc = gr_epoch_cache_persist(ec);
    }
    free(text);
    free(path);
    return rc;
}

void gr_epoch_cache_release(struct gr_epoch_cache *ec) {
    free(ec->e);
    memset(ec, 0, sizeof *ec);
}

int gr_epoch_cache_assign(struct gr_epoch_cache *ec, int32_t epoch, int64_t start_offset) {
    if (epoch < 0 || start_offset < 0) return 0;
    if (ec->n) {
        const struct gr_epoch_entry *last = &ec->e[ec->n - 1];
        if (last->epoch == epoch && start_offset >= last->start_offset) return 0;
    }
    size_t before = ec->n;
    while (ec->n && (ec->e[ec->n - 1].epoch >= epoch || ec->e[ec->n - 1].start_offset >= start_offset)) ec->n--;
    if (before - ec->n > 1 || (before != ec->n && ec->e[ec->n].start_offset != start_offset))
        gr_warn(LOGGER, "new epoch entry (epoch=%" PRId32 ", startOffset=%" PRId64 ") removed %zu conflicting "
                "entries of '%s'", epoch, start_offset, before - ec->n, ec->dir);
    push(ec, epoch, start_offset);
    return gr_epoch_cache_persist(ec);
}

int gr_epoch_cache_truncate_from_end(struct gr_epoch_cache *ec, int64_t end_offset) {
    if (end_offset < 0) return 0;
    size_t before = ec->n;
    while (ec->n && ec->e[ec->n - 1].start_offset >= end_offset) ec->n--;
    return before != ec->n ? gr_epoch_cache_persist(ec) : 0;
}

int gr_epoch_cache_truncate_from_start(struct gr_epoch_cache *ec, int64_t start_offset) {
    size_t k = 0;
    while (k < ec->n && ec->e[k].start_offset <= start_offset) k++;
    if (k == 0) return 0;
    /* Keep entry k-1 (the last one starting at or before start_offset), re-based. */
    struct gr_epoch_entry keep = {ec->e[k - 1].epoch, start_offset};
    if (k == 1 && ec->e[0].start_offset == start_offset) return 0;
    memmove(ec->e + 1, ec->e + k, (ec->n - k) * sizeof *ec->e);
    ec->n -= k - 1;
    ec->e[0] = keep;
    return gr_epoch_cache_persist(ec);
}

int gr_epoch_cache_clear(struct gr_epoch_cache *ec) {
    ec->n = 0;
    return gr_epoch_cache_persist(ec);
}

void gr_epoch_cache_end_offset_for(const struct gr_epoch_cache *ec, int32_t epoch, int64_t log_end_offset,
                                   int64_t *end_offset, int32_t *epoch_out) {
    *end_offset = -1;
    *epoch_out = -1;
    if (epoch < 0 || ec->n == 0) return;
    if (ec->e[ec->n - 1].epoch == epoch) {
        *end_offset = log_end_offset;
        *epoch_out = epoch;
        return;
    }
    /* higher = first entry with epoch > requested; floor = the one before it (if any). */
    size_t h = 0;
    while (h < ec->n && ec->e[h].epoch <= epoch) h++;
    if (h == ec->n) return; /* requested epoch above every known epoch */
    *end_offset = ec->e[h].start_offset;
    *epoch_out = h > 0 ? ec->e[h - 1].epoch : epoch;
}
