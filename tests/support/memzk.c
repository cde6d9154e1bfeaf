/* The unit tests' in-memory ZooKeeper (see memzk.h, which also says why the simulation has
 * its own model, tests/sim/zkmodel.c). */
#include "support/memzk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static struct memzk *MZ(struct gr_zk_backend *b) { return (struct memzk *)b; }

int memzk_find(struct memzk *z, const char *path) {
    for (int i = 0; i < z->n; i++)
        if (strcmp(z->v[i].path, path) == 0) return i;
    return -1;
}

static bool has_children(struct memzk *z, const char *path) {
    size_t l = strlen(path);
    for (int i = 0; i < z->n; i++)
        if (strncmp(z->v[i].path, path, l) == 0 && z->v[i].path[l] == '/') return true;
    return false;
}

int memzk_create(struct memzk *z, const char *path, const void *data, int len, int flags, char **created) {
    char buf[512];
    if (flags & GR_ZSEQUENCE) {
        snprintf(buf, sizeof buf, "%s%010d", path, z->seq++);
        path = buf;
    }
    if (memzk_find(z, path) >= 0) return GR_ZNODEEXISTS;
    char parent[512];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = 0;
        if (memzk_find(z, parent) < 0) return GR_ZNONODE;
    }
    if (z->n == z->cap) {
        z->cap = z->cap ? z->cap * 2 : 64;
        z->v = gr_realloc(z->v, (size_t)z->cap * sizeof *z->v);
    }
    struct memzk_node *nd = &z->v[z->n++];
    memset(nd, 0, sizeof *nd);
    nd->path = gr_strdup(path);
    nd->len = data ? len : 0;
    nd->data = gr_malloc((size_t)nd->len + 1);
    if (nd->len) memcpy(nd->data, data, (size_t)nd->len);
    nd->data[nd->len] = 0;
    nd->st.czxid = nd->st.mzxid = ++z->zxid;
    if (created) *created = gr_strdup(path);
    return GR_ZOK;
}

int memzk_delete(struct memzk *z, const char *path, int version) {
    int i = memzk_find(z, path);
    if (i < 0) return GR_ZNONODE;
    if (version != -1 && version != z->v[i].st.version) return GR_ZBADVERSION;
    if (has_children(z, path)) return GR_ZNOTEMPTY;
    free(z->v[i].path);
    free(z->v[i].data);
    z->v[i] = z->v[--z->n];
    return GR_ZOK;
}

int memzk_set(struct memzk *z, const char *path, const void *data, int len, int version, struct gr_zstat *st) {
    int i = memzk_find(z, path);
    if (i < 0) return GR_ZNONODE;
    if (version != -1 && version != z->v[i].st.version) return GR_ZBADVERSION;
    free(z->v[i].data);
    z->v[i].len = data ? len : 0;
    z->v[i].data = gr_malloc((size_t)z->v[i].len + 1);
    if (z->v[i].len) memcpy(z->v[i].data, data, (size_t)z->v[i].len);
    z->v[i].data[z->v[i].len] = 0;
    z->v[i].st.version++;
    z->v[i].st.mzxid = ++z->zxid;
    if (st) *st = z->v[i].st;
    return GR_ZOK;
}

static int mz_create(struct gr_zk_backend *b, const char *path, const void *data, int len, int flags, char **created) {
    return memzk_create(MZ(b), path, data, len, flags, created);
}
static int mz_delete(struct gr_zk_backend *b, const char *path, int version) { return memzk_delete(MZ(b), path, version); }
static int mz_get(struct gr_zk_backend *b, const char *path, bool watch, char **data, int *len, struct gr_zstat *st) {
    (void)watch;
    struct memzk *z = MZ(b);
    if (z->timeout_get && strcmp(z->timeout_get, path) == 0) return GR_ZOPERATIONTIMEOUT;
    int i = memzk_find(z, path);
    if (i < 0) return GR_ZNONODE;
    if (data) {
        *data = gr_malloc((size_t)z->v[i].len + 1);
        memcpy(*data, z->v[i].data, (size_t)z->v[i].len + 1);
    }
    if (len) *len = z->v[i].len;
    if (st) *st = z->v[i].st;
    return GR_ZOK;
}
static int mz_set(struct gr_zk_backend *b, const char *path, const void *data, int len, int version, struct gr_zstat *st) {
    return memzk_set(MZ(b), path, data, len, version, st);
}
static int mz_exists(struct gr_zk_backend *b, const char *path, bool watch, struct gr_zstat *st) {
    (void)watch;
    struct memzk *z = MZ(b);
    int i = memzk_find(z, path);
    if (i < 0) return GR_ZNONODE;
    if (st) *st = z->v[i].st;
    return GR_ZOK;
}
static int mz_children(struct gr_zk_backend *b, const char *path, bool watch, struct gr_zstrings *out) {
    (void)watch;
    struct memzk *z = MZ(b);
    memset(out, 0, sizeof *out);
    if (memzk_find(z, path) < 0) return GR_ZNONODE;
    size_t l = strlen(path);
    out->names = gr_malloc((size_t)(z->n + 1) * sizeof(char *));
    for (int i = 0; i < z->n; i++) {
        const char *p = z->v[i].path;
        if (strncmp(p, path, l) == 0 && p[l] == '/' && !strchr(p + l + 1, '/'))
            out->names[out->count++] = gr_strdup(p + l + 1);
        else if (l == 1 && p[0] == '/' && p[1] && !strchr(p + 1, '/')) /* children of "/" */
            out->names[out->count++] = gr_strdup(p + 1);
    }
    return GR_ZOK;
}

static void snapshot(struct memzk *z, struct memzk_node **v, int *n) {
    *n = z->n;
    *v = gr_malloc((size_t)(z->n + 1) * sizeof **v);
    for (int i = 0; i < z->n; i++) {
        (*v)[i] = z->v[i];
        (*v)[i].path = gr_strdup(z->v[i].path);
        (*v)[i].data = gr_malloc((size_t)z->v[i].len + 1);
        memcpy((*v)[i].data, z->v[i].data, (size_t)z->v[i].len + 1);
    }
}

static void drop_nodes(struct memzk_node *v, int n) {
    for (int i = 0; i < n; i++) {
        free(v[i].path);
        free(v[i].data);
    }
    free(v);
}

static int mz_multi(struct gr_zk_backend *b, const struct gr_zop *ops, int n, struct gr_zop_result *res) {
    struct memzk *z = MZ(b);
    z->n_multi++;
    if (z->before_multi_fn) {
        void (*fn)(struct memzk *, void *) = z->before_multi_fn;
        z->before_multi_fn = NULL;
        fn(z, z->before_multi_arg);
    }
    if (z->bump_before_multi && z->bump_skip > 0) {
        z->bump_skip--;
    } else if (z->bump_before_multi) {
        int i = memzk_find(z, z->bump_before_multi);
        if (i >= 0) z->v[i].st.version++;
        free(z->bump_before_multi);
        z->bump_before_multi = NULL;
    }
    memset(res, 0, (size_t)n * sizeof *res);
    struct memzk_node *saved;
    int saved_n, saved_seq = z->seq;
    snapshot(z, &saved, &saved_n);
    int fail = -1, rc = GR_ZOK;
    for (int i = 0; i < n && fail < 0; i++) {
        const struct gr_zop *op = &ops[i];
        switch (op->type) {
        case GR_ZOP_CREATE: rc = memzk_create(z, op->path, op->data, op->len, op->flags, &res[i].created_path); break;
        case GR_ZOP_DELETE: rc = memzk_delete(z, op->path, op->version); break;
        case GR_ZOP_SET: rc = memzk_set(z, op->path, op->data, op->len, op->version, &res[i].stat); break;
        case GR_ZOP_CHECK: {
            int k = memzk_find(z, op->path);
            rc = k < 0 ? GR_ZNONODE : (op->version != -1 && op->version != z->v[k].st.version) ? GR_ZBADVERSION : GR_ZOK;
            break;
        }
        default: rc = GR_ZUNIMPLEMENTED;
        }
        res[i].rc = rc;
        if (rc != GR_ZOK) fail = i;
    }
    if (fail < 0) {
        drop_nodes(saved, saved_n);
        return GR_ZOK;
    }
    drop_nodes(z->v, z->n);
    z->v = saved;
    z->n = saved_n;
    z->cap = saved_n + 1;
    z->seq = saved_seq;
    for (int i = 0; i < n; i++) {
        free(res[i].created_path);
        res[i].created_path = NULL;
        res[i].rc = i < fail ? GR_ZOK : i == fail ? rc : GR_ZRUNTIMEINCONSISTENCY;
    }
    return rc;
}
static int mz_multi_many(struct gr_zk_backend *b, struct gr_zmulti *m, int n) {
    struct memzk *z = MZ(b);
    z->n_multi_many++;
    if (n > z->max_multi_many) z->max_multi_many = n;
    for (int i = 0; i < n; i++) m[i].rc = mz_multi(b, m[i].ops, m[i].n, m[i].results);
    return GR_ZOK;
}
static int mz_get_many(struct gr_zk_backend *b, const char *const *paths, int n, bool watch, struct gr_zget_result *r) {
    for (int i = 0; i < n; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].rc = mz_get(b, paths[i], watch, &r[i].data, &r[i].len, &r[i].stat);
    }
    return GR_ZOK;
}
static int mz_children_many(struct gr_zk_backend *b, const char *const *paths, int n, bool watch,
                           struct gr_zchildren_result *r) {
    for (int i = 0; i < n; i++) r[i].rc = mz_children(b, paths[i], watch, &r[i].children);
    return GR_ZOK;
}
static int mz_session(struct gr_zk_backend *b, struct gr_zsession *out) {
    (void)b;
    memset(out, 0, sizeof *out);
    out->id = 1;
    return GR_ZOK;
}
static int mz_close_session(struct gr_zk_backend *b, const struct gr_zsession *s) { (void)b, (void)s; return GR_ZOK; }
static int mz_wait_connected(struct gr_zk_backend *b, int t) { (void)b, (void)t; return GR_ZOK; }
void memzk_free(struct memzk *z) {
    drop_nodes(z->v, z->n);
    free(z->bump_before_multi);
    free(z->timeout_get);
    free(z);
}
static void mz_destroy(struct gr_zk_backend *b) { memzk_free(MZ(b)); }
static const struct gr_zk_backend_ops memzk_ops = {mz_create,        mz_delete,     mz_get,           mz_set,
                                                   mz_exists,        mz_children,   mz_multi,         mz_get_many,
                                                   mz_children_many, mz_session,    mz_close_session, mz_wait_connected,
                                                   mz_destroy,       mz_multi_many};

struct memzk *memzk_new(int session_timeout_ms) {
    struct memzk *z = gr_calloc(1, sizeof *z);
    z->base.ops = &memzk_ops;
    z->base.session_timeout_ms = session_timeout_ms;
    return z;
}
