/* Offset checkpoints and meta.properties (formats in checkpoint.h). */
#include "storage/checkpoint.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

#define LOGGER "storage.checkpoint"

static int write_all(int fd, const void *data, size_t len) {
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static int fsync_parent_dir(const char *path) {
    char *copy = gr_strdup(path);
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(copy);
    if (fd < 0) return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

int gr_checkpoint_write_atomic(const char *path, const void *data, size_t len) {
    char *tmp = gr_asprintf("%s.tmp", path);
    int rc = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    rc = write_all(fd, data, len);
    if (rc == 0 && fsync(fd) < 0) rc = -errno;
    if (close(fd) < 0 && rc == 0) rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0) rc = -errno;
    if (rc == 0) rc = fsync_parent_dir(path);
    if (rc != 0) {
        gr_error(LOGGER, "cannot write checkpoint '%s': %s", path, gr_strerror(rc));
        unlink(tmp);
    }
out:
    free(tmp);
    return rc;
}

int gr_checkpoint_read_file(const char *path, char **out, size_t *len_out) {
    *out = NULL;
    if (len_out) *len_out = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    if (st.st_size > (64 << 20)) {
        close(fd);
        return -EFBIG;
    }
    size_t cap = (size_t)st.st_size + 1, len = 0;
    char *buf = gr_malloc(cap);
    for (;;) {
        if (len + 1 >= cap) {
            if (cap > (64u << 20)) {
                free(buf);
                close(fd);
                return -EFBIG;
            }
            cap *= 2;
            buf = gr_realloc(buf, cap);
        }
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r < 0) {
            if (errno == EINTR) continue;
            int rc = -errno;
            free(buf);
            close(fd);
            return rc;
        }
        if (r == 0) break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = '\0';
    *out = buf;
    if (len_out) *len_out = len;
    return 0;
}

/* ---- a line cursor that remembers its first error ---- */

struct lines {
    char *p;
    int err;
};

/* Returns the next line (NUL-terminated in place, without '\n' or '\r') or NULL at the end. */
static char *next_line(struct lines *l) {
    if (l->err || !l->p || !*l->p) return NULL;
    char *s = l->p, *nl = strchr(s, '\n');
    if (nl) {
        *nl = '\0';
        l->p = nl + 1;
    } else {
        l->p = s + strlen(s);
    }
    size_t n = strlen(s);
    if (n > 0 && s[n - 1] == '\r') s[n - 1] = '\0';
    return s;
}

/* Strict decimal parse of the whole string into [lo, hi]. */
static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s || isspace((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* ---- offset checkpoints ---- */

int gr_offset_checkpoint_write(const char *path, const struct gr_offset_checkpoint_entry *entries, size_t n) {
    size_t cap = 64, len = 0;
    for (size_t i = 0; i < n; i++) cap += strlen(entries[i].topic) + 48;
    char *buf = gr_malloc(cap);
    len += (size_t)snprintf(buf + len, cap - len, "0\n%zu\n", n);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s %" PRId32 " %" PRId64 "\n", entries[i].topic,
                                entries[i].partition, entries[i].offset);
    int rc = gr_checkpoint_write_atomic(path, buf, len);
    free(buf);
    return rc;
}

void gr_offset_checkpoint_free(struct gr_offset_checkpoint_entry *entries, size_t n) {
    if (!entries) return;
    for (size_t i = 0; i < n; i++) free(entries[i].topic);
    free(entries);
}

int gr_offset_checkpoint_read(const char *path, struct gr_offset_checkpoint_entry **out, size_t *n) {
    *out = NULL;
    *n = 0;
    char *text;
    int rc = gr_checkpoint_read_file(path, &text, NULL);
    if (rc == -ENOENT) return 0;
    if (rc < 0) return rc;
    struct lines l = {text, 0};
    int64_t version, count;
    struct gr_offset_checkpoint_entry *ents = NULL;
    size_t got = 0;
    if (parse_i64(next_line(&l), 0, 0, &version) < 0 || parse_i64(next_line(&l), 0, 10000000, &count) < 0)
        goto corrupt;
    ents = gr_calloc((size_t)count ? (size_t)count : 1, sizeof *ents);
    for (; got < (size_t)count; got++) {
        char *line = next_line(&l);
        if (!line) goto corrupt;
        char *sp1 = strchr(line, ' ');
        char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
        if (!sp1 || !sp2 || sp1 == line || strchr(sp2 + 1, ' ')) goto corrupt;
        *sp1 = *sp2 = '\0';
        int64_t part, off;
        if (parse_i64(sp1 + 1, 0, INT32_MAX, &part) < 0 || parse_i64(sp2 + 1, INT64_MIN, INT64_MAX, &off) < 0)
            goto corrupt;
        ents[got].topic = gr_strdup(line);
        ents[got].partition = (int32_t)part;
        ents[got].offset = off;
    }
    /* Only blank lines may follow. */
    for (char *line; (line = next_line(&l)) != NULL;)
        if (*line) goto corrupt;
    free(text);
    *out = ents;
    *n = got;
    return 0;
corrupt:
    gr_error(LOGGER, "malformed offset checkpoint '%s'", path);
    gr_offset_checkpoint_free(ents, got);
    free(text);
    return GR_ECORRUPT;
}

int64_t gr_offset_checkpoint_find(const struct gr_offset_checkpoint_entry *entries, size_t n,
                                  const char *topic, int32_t partition, int64_t dflt) {
    for (size_t i = 0; i < n; i++)
        if (entries[i].partition == partition && strcmp(entries[i].topic, topic) == 0) return entries[i].offset;
    return dflt;
}

static int cmp_tp(const char *ta, int32_t pa, const char *tb, int32_t pb) {
    int c = strcmp(ta, tb);
    return c ? c : (pa < pb ? -1 : pa > pb);
}

static int cmp_entry(const void *a, const void *b) {
    const struct gr_offset_checkpoint_entry *x = a, *y = b;
    return cmp_tp(x->topic, x->partition, y->topic, y->partition);
}

void gr_offset_checkpoint_sort(struct gr_offset_checkpoint_entry *entries, size_t n) {
    if (n > 1) qsort(entries, n, sizeof *entries, cmp_entry);
}

int64_t gr_offset_checkpoint_find_sorted(const struct gr_offset_checkpoint_entry *entries, size_t n,
                                         const char *topic, int32_t partition, int64_t dflt) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_tp(entries[mid].topic, entries[mid].partition, topic, partition);
        if (c == 0) return entries[mid].offset;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return dflt;
}

/* ---- meta.properties ---- */

int gr_meta_properties_read(const char *log_dir, struct gr_meta_properties *out) {
    memset(out, 0, sizeof *out);
    out->version = -1;
    out->broker_id = -1;
    char *path = gr_asprintf("%s/%s", log_dir, GR_META_PROPERTIES);
    char *text;
    int rc = gr_checkpoint_read_file(path, &text, NULL);
    if (rc < 0) {
        free(path);
        return rc;
    }
    struct lines l = {text, 0};
    for (char *line; (line = next_line(&l)) != NULL;) {
        while (isspace((unsigned char)*line)) line++;
        if (!*line || *line == '#' || *line == '!') continue;
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = '\0';
        char *key = line, *val = eq + 1;
        for (char *e = eq - 1; e >= key && isspace((unsigned char)*e); e--) *e = '\0';
        while (isspace((unsigned char)*val)) val++;
        for (char *e = val + strlen(val); e > val && isspace((unsigned char)e[-1]);) *--e = '\0';
        int64_t v;
        if (strcmp(key, "version") == 0) {
            if (parse_i64(val, 0, INT32_MAX, &v) < 0) rc = GR_ECORRUPT;
            else out->version = (int32_t)v;
        } else if (strcmp(key, "broker.id") == 0) {
            if (parse_i64(val, 0, INT32_MAX, &v) < 0) rc = GR_ECORRUPT;
            else out->broker_id = (int32_t)v;
        } else if (strcmp(key, "cluster.id") == 0) {
            if (strlen(val) >= sizeof out->cluster_id) rc = GR_ECORRUPT;
            else snprintf(out->cluster_id, sizeof out->cluster_id, "%s", val);
        }
    }
    if (rc == 0 && (out->version != 0 || out->broker_id < 0)) rc = GR_ECORRUPT;
    if (rc) gr_error(LOGGER, "malformed or unsupported '%s'", path);
    free(text);
    free(path);
    return rc;
}

int gr_meta_properties_write(const char *log_dir, const struct gr_meta_properties *mp) {
    char stamp[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%a %b %d %H:%M:%S UTC %Y", &tm);
    char *text;
    if (mp->cluster_id[0])
        text = gr_asprintf("#\n#%s\ncluster.id=%s\nversion=0\nbroker.id=%" PRId32 "\n", stamp, mp->cluster_id,
                           mp->broker_id);
    else
        text = gr_asprintf("#\n#%s\nversion=0\nbroker.id=%" PRId32 "\n", stamp, mp->broker_id);
    char *path = gr_asprintf("%s/%s", log_dir, GR_META_PROPERTIES);
    int rc = gr_checkpoint_write_atomic(path, text, strlen(text));
    free(path);
    free(text);
    return rc;
}

int gr_meta_properties_check(const char *log_dir, int32_t broker_id, const char *cluster_id) {
    struct gr_meta_properties mp;
    if (!cluster_id) cluster_id = "";
    int rc = gr_meta_properties_read(log_dir, &mp);
    if (rc == -ENOENT) {
        memset(&mp, 0, sizeof mp);
        mp.broker_id = broker_id;
        snprintf(mp.cluster_id, sizeof mp.cluster_id, "%s", cluster_id);
        return gr_meta_properties_write(log_dir, &mp);
    }
    if (rc < 0) return rc;
    if (mp.broker_id != broker_id) {
        gr_error(LOGGER,
                 "configured broker.id %" PRId32 " doesn't match stored broker.id %" PRId32
                 " in meta.properties of log dir '%s'",
                 broker_id, mp.broker_id, log_dir);
        return GR_EMETA_BROKER_ID;
    }
    if (mp.cluster_id[0] && cluster_id[0] && strcmp(mp.cluster_id, cluster_id) != 0) {
        gr_error(LOGGER,
                 "the cluster ID %s doesn't match stored clusterId %s in meta.properties of log dir '%s'; "
                 "the broker is trying to join the wrong cluster",
                 cluster_id, mp.cluster_id, log_dir);
        return GR_EMETA_CLUSTER_ID;
    }
    if (!mp.cluster_id[0] && cluster_id[0]) {
        snprintf(mp.cluster_id, sizeof mp.cluster_id, "%s", cluster_id);
        return gr_meta_properties_write(log_dir, &mp);
    }
    return 0;
}
