/* In-memory ZooKeeper model for the simulation (see zkmodel.h for what is modelled, and
 * tests/support/memzk.h for why the unit tests have their own, smaller one).
 *
 * Layout: znodes live in a chained hash table keyed by full path; each node also keeps its
 * children in creation order (so get_children is deterministic). Writes are applied in place
 * with an undo log: a failing multi op rolls back everything before it. Watch triggers are
 * derived from the undo log after commit. Sessions are kept (dead ones too) in creation order;
 * each holds its server-side data and child watches as small path sets.
 *
 * Notification queue: one global list of events in the order they were produced, each aimed
 * at one client. An event produced while its client is disconnected is "held" (the server would
 * send it after the client re-registers its watches) and is moved behind the CONNECTED event
 * when the client reconnects. A client's events are delivered strictly in order.
 *
 * Differences from a real server (deliberate, documented in docs/SIMULATION.md): failed writes
 * do not consume a zxid; a client whose session the server expires while it is connected learns
 * of it at once (EXPIRED without a preceding DISCONNECTED); ACLs, quotas, TTL and container
 * nodes, and sync() are not modelled.
 */
#include "zkmodel.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* ------------------------------------------------------------------------------------------ */
/* types */

struct wset {
    char **p;
    int n, cap;
};

struct zm_session {
    int64_t id;
    unsigned char passwd[16];
    bool alive;
    struct zm_client *client; /* attached handle, NULL when detached (crashed) */
    int timeout_ms;
    int64_t deadline;         /* INT64_MAX while its client is connected */
    struct wset dw, cw;       /* data (and exists) watches, child watches */
};

struct znode {
    char *path;
    const char *name;         /* last component (points into path) */
    char *data;               /* NUL-terminated copy, NULL = null data */
    int len;
    struct gr_zstat st;
    struct znode *parent;
    struct znode **kids;
    int nkids, capkids;
    struct znode *hnext;
};

enum { EV_WATCH = 0, EV_SESSION = 1 };

struct zev {
    struct zm_client *c;
    int kind;
    int type;                 /* gr_zwatch_type or gr_zsession_state */
    char *path;
    bool held;
    struct zev *next;
};

struct zm_client {
    struct gr_zk_backend base; /* first */
    struct zm *zm;
    int state;
    struct zm_session *sess;
    bool expired_delivered;
    void *user;
    int npending;
    struct zm_client *next;
};

struct zm {
    struct znode **buckets;
    size_t nbuckets, nnodes;
    struct znode *root;
    int64_t zxid;
    int64_t now;
    struct zm_session **sessions;
    int nsessions, capsessions;
    int64_t next_sid;
    struct zm_client *clients; /* creation order */
    struct zev *evhead, *evtail;
    int nevents;
    struct zm_hooks hooks;
    bool flush_on_call;
    bool down;                 /* whole-ensemble outage (zm_outage_begin .. zm_outage_end) */
};

/* ------------------------------------------------------------------------------------------ */
/* small helpers */

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static bool wset_has(const struct wset *w, const char *p) {
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->p[i], p) == 0) return true;
    return false;
}

static void wset_add(struct wset *w, const char *p) {
    if (wset_has(w, p)) return;
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 8;
        w->p = gr_realloc(w->p, (size_t)w->cap * sizeof(char *));
    }
    w->p[w->n++] = gr_strdup(p);
}

static bool wset_remove(struct wset *w, const char *p) {
    for (int i = 0; i < w->n; i++) {
        if (strcmp(w->p[i], p) == 0) {
            free(w->p[i]);
            memmove(&w->p[i], &w->p[i + 1], (size_t)(w->n - i - 1) * sizeof(char *));
            w->n--;
            return true;
        }
    }
    return false;
}

static void wset_clear(struct wset *w) {
    for (int i = 0; i < w->n; i++) free(w->p[i]);
    free(w->p);
    memset(w, 0, sizeof(*w));
}

/* Valid ZooKeeper path: "/" or "/a/b" (no empty components, no trailing slash). */
static bool path_ok(const char *p) {
    if (!p || p[0] != '/') return false;
    if (p[1] == 0) return true;
    for (const char *s = p; *s; s++) {
        if (*s == '/' && (s[1] == '/' || s[1] == 0)) return false;
    }
    return true;
}

/* Parent path of p (malloc'd), "/" for top-level nodes; NULL for "/". */
static char *parent_of(const char *p) {
    const char *slash = strrchr(p, '/');
    if (!slash || p[1] == 0) return NULL;
    if (slash == p) return gr_strdup("/");
    return gr_strndup(p, (size_t)(slash - p));
}

static char *dup_data(const void *d, int len) {
    if (!d) return NULL;
    if (len < 0) len = 0;
    char *x = gr_malloc((size_t)len + 1);
    memcpy(x, d, (size_t)len);
    x[len] = 0;
    return x;
}

/* ------------------------------------------------------------------------------------------ */
/* node table */

static struct znode *node_find(struct zm *zm, const char *path) {
    for (struct znode *n = zm->buckets[hash_str(path) & (zm->nbuckets - 1)]; n; n = n->hnext)
        if (strcmp(n->path, path) == 0) return n;
    return NULL;
}

static void hash_insert(struct zm *zm, struct znode *n) {
    if (zm->nnodes + 1 > zm->nbuckets) {
        size_t nb = zm->nbuckets * 2;
        struct znode **b = gr_calloc(nb, sizeof(*b));
        for (size_t i = 0; i < zm->nbuckets; i++) {
            struct znode *x = zm->buckets[i];
            while (x) {
                struct znode *nx = x->hnext;
                size_t j = hash_str(x->path) & (nb - 1);
                x->hnext = b[j];
                b[j] = x;
                x = nx;
            }
        }
        free(zm->buckets);
        zm->buckets = b;
        zm->nbuckets = nb;
    }
    size_t j = hash_str(n->path) & (zm->nbuckets - 1);
    n->hnext = zm->buckets[j];
    zm->buckets[j] = n;
    zm->nnodes++;
}

static void hash_remove(struct zm *zm, struct znode *n) {
    struct znode **pp = &zm->buckets[hash_str(n->path) & (zm->nbuckets - 1)];
    for (; *pp; pp = &(*pp)->hnext) {
        if (*pp == n) {
            *pp = n->hnext;
            n->hnext = NULL;
            zm->nnodes--;
            return;
        }
    }
}

static void kid_insert(struct znode *p, struct znode *k, int at) {
    if (p->nkids == p->capkids) {
        p->capkids = p->capkids ? p->capkids * 2 : 4;
        p->kids = gr_realloc(p->kids, (size_t)p->capkids * sizeof(*p->kids));
    }
    if (at < 0 || at > p->nkids) at = p->nkids;
    memmove(&p->kids[at + 1], &p->kids[at], (size_t)(p->nkids - at) * sizeof(*p->kids));
    p->kids[at] = k;
    p->nkids++;
}

static int kid_remove(struct znode *p, struct znode *k) {
    for (int i = 0; i < p->nkids; i++) {
        if (p->kids[i] == k) {
            memmove(&p->kids[i], &p->kids[i + 1], (size_t)(p->nkids - i - 1) * sizeof(*p->kids));
            p->nkids--;
            return i;
        }
    }
    return -1;
}

static void node_free(struct znode *n) {
    if (!n) return;
    free(n->path);
    free(n->data);
    free(n->kids);
    free(n);
}

static struct znode *node_alloc(const char *path) {
    struct znode *n = gr_calloc(1, sizeof(*n));
    n->path = gr_strdup(path);
    const char *slash = strrchr(n->path, '/');
    n->name = slash ? slash + 1 : n->path;
    return n;
}

/* ------------------------------------------------------------------------------------------ */
/* server */

struct zm *zm_new(void) {
    struct zm *zm = gr_calloc(1, sizeof(*zm));
    zm->nbuckets = 64;
    zm->buckets = gr_calloc(zm->nbuckets, sizeof(*zm->buckets));
    zm->root = node_alloc("/");
    zm->root->name = "";
    hash_insert(zm, zm->root);
    zm->next_sid = 0x10000a5a000001LL;
    zm->flush_on_call = true;
    /* ZooKeeper itself creates /zookeeper. */
    struct znode *zk = node_alloc("/zookeeper");
    zk->parent = zm->root;
    kid_insert(zm->root, zk, -1);
    zm->root->st.numChildren = 1;
    zm->root->st.cversion = 1;
    hash_insert(zm, zk);
    return zm;
}

void zm_free(struct zm *zm) {
    if (!zm) return;
    for (size_t i = 0; i < zm->nbuckets; i++) {
        struct znode *n = zm->buckets[i];
        while (n) {
            struct znode *nx = n->hnext;
            node_free(n);
            n = nx;
        }
    }
    free(zm->buckets);
    for (int i = 0; i < zm->nsessions; i++) {
        wset_clear(&zm->sessions[i]->dw);
        wset_clear(&zm->sessions[i]->cw);
        free(zm->sessions[i]);
    }
    free(zm->sessions);
    struct zev *e = zm->evhead;
    while (e) {
        struct zev *nx = e->next;
        free(e->path);
        free(e);
        e = nx;
    }
    free(zm);
}

void zm_set_hooks(struct zm *zm, const struct zm_hooks *h) {
    if (h) zm->hooks = *h;
    else memset(&zm->hooks, 0, sizeof(zm->hooks));
}

void zm_set_flush_on_call(struct zm *zm, bool on) { zm->flush_on_call = on; }
void zm_set_time(struct zm *zm, int64_t now_ms) { zm->now = now_ms; }
int64_t zm_last_zxid(struct zm *zm) { return zm->zxid; }

/* ------------------------------------------------------------------------------------------ */
/* events */

static void ev_append(struct zm *zm, struct zev *e) {
    e->next = NULL;
    if (zm->evtail) zm->evtail->next = e;
    else zm->evhead = e;
    zm->evtail = e;
    zm->nevents++;
    e->c->npending++;
}

static void ev_queue(struct zm_client *c, int kind, int type, const char *path, bool held) {
    struct zev *e = gr_calloc(1, sizeof(*e));
    e->c = c;
    e->kind = kind;
    e->type = type;
    e->path = path ? gr_strdup(path) : NULL;
    e->held = held;
    ev_append(c->zm, e);
}

/* Unlinks e (prev is its predecessor or NULL). */
static void ev_unlink(struct zm *zm, struct zev *prev, struct zev *e) {
    if (prev) prev->next = e->next;
    else zm->evhead = e->next;
    if (zm->evtail == e) zm->evtail = prev;
    zm->nevents--;
    e->c->npending--;
    e->next = NULL;
}

/* Drops c's events: all of them, or only held ones. */
static void ev_drop(struct zm_client *c, bool held_only) {
    struct zm *zm = c->zm;
    struct zev *prev = NULL, *e = zm->evhead;
    while (e) {
        struct zev *nx = e->next;
        if (e->c == c && (!held_only || e->held)) {
            ev_unlink(zm, prev, e);
            free(e->path);
            free(e);
        } else {
            prev = e;
        }
        e = nx;
    }
}

/* Moves c's held events to the tail (after whatever was just queued), un-holding them. */
static void ev_release_held(struct zm_client *c) {
    struct zm *zm = c->zm;
    struct zev *moved = NULL, **mt = &moved;
    struct zev *prev = NULL, *e = zm->evhead;
    while (e) {
        struct zev *nx = e->next;
        if (e->c == c && e->held) {
            ev_unlink(zm, prev, e);
            e->held = false;
            *mt = e;
            mt = &e->next;
        } else {
            prev = e;
        }
        e = nx;
    }
    while (moved) {
        struct zev *nx = moved->next;
        ev_append(zm, moved);
        moved = nx;
    }
}

static struct zev *ev_first_deliverable(struct zm_client *c, struct zev **prevp) {
    struct zev *prev = NULL;
    for (struct zev *e = c->zm->evhead; e; prev = e, e = e->next) {
        if (e->c == c && !e->held) {
            *prevp = prev;
            return e;
        }
    }
    return NULL;
}

bool zm_deliver_one(struct zm_client *c) {
    if (c->state == ZMC_CLOSED) return false;
    struct zev *prev;
    struct zev *e = ev_first_deliverable(c, &prev);
    if (!e) return false;
    ev_unlink(c->zm, prev, e);
    if (e->kind == EV_WATCH) {
        if (c->base.on_watch) c->base.on_watch(c->base.cb_ctx, e->type, e->path);
    } else {
        if (e->type == GR_ZSESSION_EXPIRED) c->expired_delivered = true;
        if (c->base.on_session) c->base.on_session(c->base.cb_ctx, e->type);
    }
    free(e->path);
    free(e);
    return true;
}

int zm_deliverable(struct zm *zm, struct zm_client **out, int max) {
    int n = 0;
    for (struct zm_client *c = zm->clients; c; c = c->next) {
        if (c->state == ZMC_CLOSED || c->npending == 0) continue;
        struct zev *prev;
        if (!ev_first_deliverable(c, &prev)) continue;
        if (n < max) out[n] = c;
        n++;
    }
    return n;
}

int zm_pending(struct zm_client *c) { return c->npending; }
int zm_pending_total(struct zm *zm) { return zm->nevents; }
bool zm_expired_delivered(struct zm_client *c) {
    return c->state == ZMC_EXPIRED && c->expired_delivered;
}

/* A watch fired for session s. */
static void notify(struct zm_session *s, int type, const char *path) {
    struct zm_client *c = s->client;
    if (!c || c->state == ZMC_CLOSED || c->state == ZMC_EXPIRED) return;
    ev_queue(c, EV_WATCH, type, path, c->state != ZMC_CONNECTED);
}

static void trigger_data(struct zm *zm, const char *path, int type) {
    for (int i = 0; i < zm->nsessions; i++) {
        struct zm_session *s = zm->sessions[i];
        if (s->alive && wset_remove(&s->dw, path)) notify(s, type, path);
    }
}

static void trigger_child(struct zm *zm, const char *path, int type) {
    for (int i = 0; i < zm->nsessions; i++) {
        struct zm_session *s = zm->sessions[i];
        if (s->alive && wset_remove(&s->cw, path)) notify(s, type, path);
    }
}

/* Deleted node: one DELETED per session whether it watched data, children or both. */
static void trigger_deleted(struct zm *zm, const char *path) {
    for (int i = 0; i < zm->nsessions; i++) {
        struct zm_session *s = zm->sessions[i];
        if (!s->alive) continue;
        bool a = wset_remove(&s->dw, path);
        bool b = wset_remove(&s->cw, path);
        if (a || b) notify(s, GR_ZWATCH_DELETED, path);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* transactions: apply with undo log */

enum { U_CREATE = 1, U_DELETE, U_SET };

struct undo {
    int kind;
    struct znode *node;
    struct znode *parent;
    struct gr_zstat parent_st;
    int kid_index;
    char *old_data;
    int old_len;
    struct gr_zstat old_st;
};

struct txn {
    struct zm *zm;
    int64_t zxid;
    int64_t sid;
    struct undo *u;
    int n, cap;
};

static struct undo *txn_push(struct txn *t) {
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 8;
        t->u = gr_realloc(t->u, (size_t)t->cap * sizeof(*t->u));
    }
    struct undo *u = &t->u[t->n++];
    memset(u, 0, sizeof(*u));
    return u;
}

static bool version_ok(int want, int have) { return want == GR_ZANY_VERSION || want == have; }

/* Creates; *created gets the actual path (malloc'd) on success. */
static int ap_create(struct txn *t, const char *path, const void *data, int len, int flags,
                     char **created) {
    struct zm *zm = t->zm;
    if (!path_ok(path) || strcmp(path, "/") == 0) {
        if (path && strcmp(path, "/") == 0) return GR_ZNODEEXISTS;
        return GR_ZBADARGUMENTS;
    }
    char *ppath = parent_of(path);
    struct znode *parent = node_find(zm, ppath);
    free(ppath);
    if (!parent) return GR_ZNONODE;
    if (parent->st.ephemeralOwner != 0) return GR_ZNOCHILDRENFOREPHEMERALS;
    char *actual;
    if (flags & GR_ZSEQUENCE) actual = gr_asprintf("%s%010d", path, parent->st.cversion);
    else actual = gr_strdup(path);
    if (node_find(zm, actual)) {
        free(actual);
        return GR_ZNODEEXISTS;
    }
    if ((flags & GR_ZEPHEMERAL) && t->sid == 0) {
        free(actual);
        return GR_ZINVALIDSTATE;
    }
    struct znode *n = node_alloc(actual);
    n->data = dup_data(data, len);
    n->len = data ? (len < 0 ? 0 : len) : 0;
    n->st.czxid = n->st.mzxid = n->st.pzxid = t->zxid;
    n->st.ctime = n->st.mtime = zm->now;
    n->st.ephemeralOwner = (flags & GR_ZEPHEMERAL) ? t->sid : 0;
    n->st.dataLength = n->len;
    n->parent = parent;
    struct undo *u = txn_push(t);
    u->kind = U_CREATE;
    u->node = n;
    u->parent = parent;
    u->parent_st = parent->st;
    kid_insert(parent, n, -1);
    parent->st.cversion++;
    parent->st.pzxid = t->zxid;
    parent->st.numChildren++;
    hash_insert(zm, n);
    if (created) *created = actual;
    else free(actual);
    return GR_ZOK;
}

static int ap_delete(struct txn *t, const char *path, int version) {
    struct zm *zm = t->zm;
    if (!path_ok(path)) return GR_ZBADARGUMENTS;
    if (strcmp(path, "/") == 0) return GR_ZBADARGUMENTS;
    struct znode *n = node_find(zm, path);
    if (!n) return GR_ZNONODE;
    if (!version_ok(version, n->st.version)) return GR_ZBADVERSION;
    if (n->nkids > 0) return GR_ZNOTEMPTY;
    struct znode *parent = n->parent;
    struct undo *u = txn_push(t);
    u->kind = U_DELETE;
    u->node = n;
    u->parent = parent;
    u->parent_st = parent->st;
    u->kid_index = kid_remove(parent, n);
    parent->st.cversion++;
    parent->st.pzxid = t->zxid;
    parent->st.numChildren--;
    hash_remove(zm, n);
    return GR_ZOK;
}

static int ap_set(struct txn *t, const char *path, const void *data, int len, int version,
                  struct gr_zstat *stat) {
    struct zm *zm = t->zm;
    if (!path_ok(path)) return GR_ZBADARGUMENTS;
    struct znode *n = node_find(zm, path);
    if (!n) return GR_ZNONODE;
    if (!version_ok(version, n->st.version)) return GR_ZBADVERSION;
    struct undo *u = txn_push(t);
    u->kind = U_SET;
    u->node = n;
    u->old_data = n->data;
    u->old_len = n->len;
    u->old_st = n->st;
    n->data = dup_data(data, len);
    n->len = data ? (len < 0 ? 0 : len) : 0;
    n->st.version++;
    n->st.mzxid = t->zxid;
    n->st.mtime = zm->now;
    n->st.dataLength = n->len;
    if (stat) *stat = n->st;
    return GR_ZOK;
}

static int ap_check(struct txn *t, const char *path, int version) {
    if (!path_ok(path)) return GR_ZBADARGUMENTS;
    struct znode *n = node_find(t->zm, path);
    if (!n) return GR_ZNONODE;
    if (!version_ok(version, n->st.version)) return GR_ZBADVERSION;
    return GR_ZOK;
}

static void txn_rollback(struct txn *t) {
    struct zm *zm = t->zm;
    for (int i = t->n - 1; i >= 0; i--) {
        struct undo *u = &t->u[i];
        switch (u->kind) {
        case U_CREATE:
            hash_remove(zm, u->node);
            kid_remove(u->parent, u->node);
            u->parent->st = u->parent_st;
            node_free(u->node);
            break;
        case U_DELETE:
            hash_insert(zm, u->node);
            kid_insert(u->parent, u->node, u->kid_index);
            u->parent->st = u->parent_st;
            break;
        case U_SET:
            free(u->node->data);
            u->node->data = u->old_data;
            u->node->len = u->old_len;
            u->node->st = u->old_st;
            break;
        }
    }
    free(t->u);
    t->u = NULL;
    t->n = t->cap = 0;
}

/* Commits: zxid, on_commit hook, watch triggers, frees deleted nodes and old data. */
static void txn_commit(struct txn *t, bool is_multi, bool session_close, const struct gr_zop *checks,
                       int n_checks) {
    struct zm *zm = t->zm;
    if (t->n == 0) {
        free(t->u);
        return;
    }
    zm->zxid = t->zxid;
    if (zm->hooks.on_commit) {
        struct zm_change *ch = gr_calloc((size_t)t->n, sizeof(*ch));
        for (int i = 0; i < t->n; i++) {
            struct undo *u = &t->u[i];
            ch[i].path = u->node->path;
            if (u->kind == U_CREATE) {
                ch[i].op = GR_ZOP_CREATE;
                ch[i].data = u->node->data;
                ch[i].len = u->node->len;
                ch[i].stat = u->node->st;
            } else if (u->kind == U_DELETE) {
                ch[i].op = GR_ZOP_DELETE;
                ch[i].old_data = u->node->data;
                ch[i].old_len = u->node->len;
                ch[i].stat = u->node->st;
            } else {
                ch[i].op = GR_ZOP_SET;
                ch[i].data = u->node->data;
                ch[i].len = u->node->len;
                ch[i].old_data = u->old_data;
                ch[i].old_len = u->old_len;
                ch[i].stat = u->node->st;
            }
        }
        struct zm_txn tx = {.zxid = t->zxid, .session = t->sid, .is_multi = is_multi,
                            .session_close = session_close, .n_changes = t->n, .changes = ch,
                            .n_checks = n_checks, .checks = checks};
        zm->hooks.on_commit(zm->hooks.arg, &tx);
        free(ch);
    }
    for (int i = 0; i < t->n; i++) {
        struct undo *u = &t->u[i];
        const char *p = u->node->path;
        if (u->kind == U_CREATE) {
            trigger_data(zm, p, GR_ZWATCH_CREATED);
            trigger_child(zm, u->parent->path, GR_ZWATCH_CHILD);
        } else if (u->kind == U_DELETE) {
            trigger_deleted(zm, p);
            trigger_child(zm, u->parent->path, GR_ZWATCH_CHILD);
        } else {
            trigger_data(zm, p, GR_ZWATCH_CHANGED);
        }
    }
    for (int i = 0; i < t->n; i++) {
        struct undo *u = &t->u[i];
        if (u->kind == U_DELETE) node_free(u->node);
        if (u->kind == U_SET) free(u->old_data);
    }
    free(t->u);
}

static void txn_begin(struct txn *t, struct zm *zm, int64_t sid) {
    memset(t, 0, sizeof(*t));
    t->zm = zm;
    t->zxid = zm->zxid + 1;
    t->sid = sid;
}

/* ------------------------------------------------------------------------------------------ */
/* sessions */

static struct zm_session *session_new(struct zm *zm, struct zm_client *c, int timeout_ms) {
    struct zm_session *s = gr_calloc(1, sizeof(*s));
    s->id = zm->next_sid++;
    for (int i = 0; i < 16; i++) s->passwd[i] = (unsigned char)((s->id * 31 + i * 7) & 0xff);
    s->alive = true;
    s->client = c;
    s->timeout_ms = timeout_ms;
    s->deadline = INT64_MAX;
    if (zm->nsessions == zm->capsessions) {
        zm->capsessions = zm->capsessions ? zm->capsessions * 2 : 16;
        zm->sessions = gr_realloc(zm->sessions, (size_t)zm->capsessions * sizeof(*zm->sessions));
    }
    zm->sessions[zm->nsessions++] = s;
    return s;
}

static struct zm_session *session_find(struct zm *zm, int64_t id) {
    for (int i = 0; i < zm->nsessions; i++)
        if (zm->sessions[i]->id == id) return zm->sessions[i];
    return NULL;
}

static int cmp_nodep_path(const void *a, const void *b) {
    return strcmp((*(struct znode *const *)a)->path, (*(struct znode *const *)b)->path);
}

/* Kills session s: its ephemerals are deleted in one transaction, its watches dropped. If
 * notify_client, an attached client is told (EXPIRED now if connected; a disconnected one finds
 * out when it reconnects). */
static void session_kill(struct zm *zm, struct zm_session *s, bool notify_client) {
    if (!s->alive) return;
    s->alive = false;
    wset_clear(&s->dw);
    wset_clear(&s->cw);
    /* ephemerals, sorted by path for determinism */
    struct znode **eph = NULL;
    int ne = 0, cap = 0;
    for (size_t i = 0; i < zm->nbuckets; i++) {
        for (struct znode *n = zm->buckets[i]; n; n = n->hnext) {
            if (n->st.ephemeralOwner == s->id) {
                if (ne == cap) {
                    cap = cap ? cap * 2 : 8;
                    eph = gr_realloc(eph, (size_t)cap * sizeof(*eph));
                }
                eph[ne++] = n;
            }
        }
    }
    if (ne > 0) {
        qsort(eph, (size_t)ne, sizeof(*eph), cmp_nodep_path);
        struct txn t;
        txn_begin(&t, zm, s->id);
        for (int i = 0; i < ne; i++) ap_delete(&t, eph[i]->path, GR_ZANY_VERSION);
        txn_commit(&t, false, true, NULL, 0);
    }
    free(eph);
    struct zm_client *c = s->client;
    s->client = NULL;
    if (c && c->sess == s && notify_client) {
        ev_drop(c, true);
        if (c->state == ZMC_CONNECTED) {
            c->state = ZMC_EXPIRED;
            c->sess = NULL;
            c->expired_delivered = false;
            ev_queue(c, EV_SESSION, GR_ZSESSION_EXPIRED, NULL, false);
        }
        /* DISCONNECTED: keeps the dead session pointer; zm_reconnect discovers it. */
        else if (c->state != ZMC_DISCONNECTED) {
            c->sess = NULL;
        }
    } else if (c && c->sess == s) {
        c->sess = NULL;
    }
}

bool zm_expire_session(struct zm *zm, int64_t session_id) {
    struct zm_session *s = session_find(zm, session_id);
    if (!s || !s->alive || zm->down) return false;
    session_kill(zm, s, true);
    return true;
}

int zm_tick(struct zm *zm) {
    int n = 0;
    if (zm->down) return 0; /* no server, no expiry */
    for (int i = 0; i < zm->nsessions; i++) {
        struct zm_session *s = zm->sessions[i];
        if (s->alive && s->deadline <= zm->now) {
            session_kill(zm, s, true);
            n++;
        }
    }
    return n;
}

int64_t zm_next_deadline(struct zm *zm) {
    int64_t d = INT64_MAX;
    if (zm->down) return d;
    for (int i = 0; i < zm->nsessions; i++) {
        struct zm_session *s = zm->sessions[i];
        if (s->alive && s->deadline < d) d = s->deadline;
    }
    return d;
}

/* ------------------------------------------------------------------------------------------ */
/* client state changes */

void zm_disconnect(struct zm_client *c) {
    if (c->state != ZMC_CONNECTED) return;
    c->state = ZMC_DISCONNECTED;
    if (c->sess) c->sess->deadline = c->zm->now + c->sess->timeout_ms;
    ev_queue(c, EV_SESSION, GR_ZSESSION_DISCONNECTED, NULL, false);
}

void zm_reconnect(struct zm_client *c) {
    if (c->state != ZMC_DISCONNECTED || c->zm->down) return;
    if (c->sess && c->sess->alive) {
        c->state = ZMC_CONNECTED;
        c->sess->deadline = INT64_MAX;
        ev_queue(c, EV_SESSION, GR_ZSESSION_CONNECTED, NULL, false);
        ev_release_held(c);
    } else {
        ev_drop(c, true);
        c->state = ZMC_EXPIRED;
        c->sess = NULL;
        c->expired_delivered = false;
        ev_queue(c, EV_SESSION, GR_ZSESSION_EXPIRED, NULL, false);
    }
}

bool zm_new_session(struct zm_client *c) {
    if (c->state != ZMC_EXPIRED || !c->expired_delivered || c->zm->down) return false;
    c->sess = session_new(c->zm, c, c->base.session_timeout_ms);
    c->state = ZMC_CONNECTED;
    c->expired_delivered = false;
    ev_queue(c, EV_SESSION, GR_ZSESSION_NEW_SESSION, NULL, false);
    return true;
}

void zm_crash(struct zm_client *c, bool close_now) {
    if (c->state == ZMC_CLOSED) return;
    ev_drop(c, false);
    struct zm_session *s = c->sess;
    c->state = ZMC_CLOSED;
    c->sess = NULL;
    if (s && s->alive) {
        s->client = NULL;
        if (close_now && !c->zm->down) session_kill(c->zm, s, false);
        else s->deadline = c->zm->now + s->timeout_ms; /* renewed again when an outage ends */
    }
}

void zm_outage_begin(struct zm *zm) {
    if (zm->down) return;
    for (struct zm_client *c = zm->clients; c; c = c->next) zm_disconnect(c);
    zm->down = true;
}

void zm_outage_end(struct zm *zm) {
    if (!zm->down) return;
    zm->down = false;
    for (int i = 0; i < zm->nsessions; i++) {
        struct zm_session *s = zm->sessions[i];
        if (s->alive) s->deadline = zm->now + s->timeout_ms;
    }
}

bool zm_down(struct zm *zm) { return zm->down; }

int zm_client_state(struct zm_client *c) { return c->state; }
int64_t zm_client_session(struct zm_client *c) { return c->sess ? c->sess->id : 0; }
void zm_client_set_user(struct zm_client *c, void *user) { c->user = user; }
void *zm_client_user(struct zm_client *c) { return c->user; }
struct gr_zk_backend *zm_backend(struct zm_client *c) { return &c->base; }
struct zm_client *zm_client_of(struct gr_zk_backend *b) { return (struct zm_client *)b; }

/* ------------------------------------------------------------------------------------------ */
/* backend calls */

/* Common start of every call: state checks, flush, fault decision. */
static int call_begin(struct zm_client *c, bool is_write, int *fault) {
    *fault = ZM_FAULT_NONE;
    if (c->state == ZMC_CLOSED) return GR_ZCLOSING;
    if (c->state == ZMC_EXPIRED) return GR_ZSESSIONEXPIRED;
    if (c->state == ZMC_DISCONNECTED) return GR_ZCONNECTIONLOSS;
    if (c->zm->flush_on_call)
        while (c->state == ZMC_CONNECTED && zm_deliver_one(c)) {
        }
    if (c->state != ZMC_CONNECTED) return GR_ZCONNECTIONLOSS;
    struct zm *zm = c->zm;
    if (zm->hooks.call_fault) *fault = zm->hooks.call_fault(zm->hooks.arg, c, is_write);
    if (*fault == ZM_FAULT_LOSS_BEFORE) {
        zm_disconnect(c);
        return GR_ZCONNECTIONLOSS;
    }
    return GR_ZOK;
}

/* After applying: a LOSS_AFTER fault turns the result into CONNECTIONLOSS. */
static bool call_lost_after(struct zm_client *c, int fault) {
    if (fault != ZM_FAULT_LOSS_AFTER) return false;
    zm_disconnect(c);
    return true;
}

static int64_t sid_of(struct zm_client *c) { return c->sess ? c->sess->id : 0; }

static int b_create(struct gr_zk_backend *b, const char *path, const void *data, int len, int flags,
                    char **created_path) {
    struct zm_client *c = zm_client_of(b);
    if (created_path) *created_path = NULL;
    int fault;
    int rc = call_begin(c, true, &fault);
    if (rc != GR_ZOK) return rc;
    struct txn t;
    txn_begin(&t, c->zm, sid_of(c));
    char *cp = NULL;
    rc = ap_create(&t, path, data, len, flags, &cp);
    if (rc == GR_ZOK) txn_commit(&t, false, false, NULL, 0);
    else txn_rollback(&t);
    if (call_lost_after(c, fault)) {
        free(cp);
        return GR_ZCONNECTIONLOSS;
    }
    if (created_path) *created_path = cp;
    else free(cp);
    return rc;
}

static int b_delete(struct gr_zk_backend *b, const char *path, int version) {
    struct zm_client *c = zm_client_of(b);
    int fault;
    int rc = call_begin(c, true, &fault);
    if (rc != GR_ZOK) return rc;
    struct txn t;
    txn_begin(&t, c->zm, sid_of(c));
    rc = ap_delete(&t, path, version);
    if (rc == GR_ZOK) txn_commit(&t, false, false, NULL, 0);
    else txn_rollback(&t);
    if (call_lost_after(c, fault)) return GR_ZCONNECTIONLOSS;
    return rc;
}

static int b_set(struct gr_zk_backend *b, const char *path, const void *data, int len, int version,
                 struct gr_zstat *stat) {
    struct zm_client *c = zm_client_of(b);
    int fault;
    int rc = call_begin(c, true, &fault);
    if (rc != GR_ZOK) return rc;
    struct txn t;
    txn_begin(&t, c->zm, sid_of(c));
    struct gr_zstat st;
    rc = ap_set(&t, path, data, len, version, &st);
    if (rc == GR_ZOK) txn_commit(&t, false, false, NULL, 0);
    else txn_rollback(&t);
    if (call_lost_after(c, fault)) return GR_ZCONNECTIONLOSS;
    if (rc == GR_ZOK && stat) *stat = st;
    return rc;
}

/* Reads one node without the call prologue. */
static int read_node(struct zm_client *c, const char *path, bool watch, char **data, int *len,
                     struct gr_zstat *stat) {
    if (!path_ok(path)) return GR_ZBADARGUMENTS;
    struct znode *n = node_find(c->zm, path);
    if (!n) return GR_ZNONODE;
    if (watch && c->sess) wset_add(&c->sess->dw, path);
    if (data) {
        *data = gr_malloc((size_t)n->len + 1);
        if (n->len) memcpy(*data, n->data, (size_t)n->len);
        (*data)[n->len] = 0;
    }
    if (len) *len = n->len;
    if (stat) *stat = n->st;
    return GR_ZOK;
}

static int b_get(struct gr_zk_backend *b, const char *path, bool watch, char **data, int *len,
                 struct gr_zstat *stat) {
    struct zm_client *c = zm_client_of(b);
    if (data) *data = NULL;
    if (len) *len = 0;
    int fault;
    int rc = call_begin(c, false, &fault);
    if (rc != GR_ZOK) return rc;
    char *d = NULL;
    int l = 0;
    struct gr_zstat st;
    rc = read_node(c, path, watch, &d, &l, &st);
    if (call_lost_after(c, fault)) {
        free(d);
        return GR_ZCONNECTIONLOSS;
    }
    if (rc == GR_ZOK) {
        if (data) *data = d;
        else free(d);
        if (len) *len = l;
        if (stat) *stat = st;
    }
    return rc;
}

static int b_exists(struct gr_zk_backend *b, const char *path, bool watch, struct gr_zstat *stat) {
    struct zm_client *c = zm_client_of(b);
    int fault;
    int rc = call_begin(c, false, &fault);
    if (rc != GR_ZOK) return rc;
    if (!path_ok(path)) return GR_ZBADARGUMENTS;
    struct znode *n = node_find(c->zm, path);
    if (watch && c->sess) wset_add(&c->sess->dw, path);
    struct gr_zstat st;
    if (n) st = n->st;
    if (call_lost_after(c, fault)) return GR_ZCONNECTIONLOSS;
    if (!n) return GR_ZNONODE;
    if (stat) *stat = st;
    return GR_ZOK;
}

static int read_children(struct zm_client *c, const char *path, bool watch, struct gr_zstrings *out) {
    memset(out, 0, sizeof(*out));
    if (!path_ok(path)) return GR_ZBADARGUMENTS;
    struct znode *n = node_find(c->zm, path);
    if (!n) return GR_ZNONODE;
    if (watch && c->sess) wset_add(&c->sess->cw, path);
    out->count = n->nkids;
    out->names = gr_calloc((size_t)(n->nkids ? n->nkids : 1), sizeof(char *));
    for (int i = 0; i < n->nkids; i++) out->names[i] = gr_strdup(n->kids[i]->name);
    return GR_ZOK;
}

static int b_get_children(struct gr_zk_backend *b, const char *path, bool watch,
                          struct gr_zstrings *out) {
    struct zm_client *c = zm_client_of(b);
    memset(out, 0, sizeof(*out));
    int fault;
    int rc = call_begin(c, false, &fault);
    if (rc != GR_ZOK) return rc;
    rc = read_children(c, path, watch, out);
    if (call_lost_after(c, fault)) {
        gr_zstrings_free(out);
        return GR_ZCONNECTIONLOSS;
    }
    return rc;
}

static int b_multi(struct gr_zk_backend *b, const struct gr_zop *ops, int n,
                   struct gr_zop_result *results) {
    struct zm_client *c = zm_client_of(b);
    memset(results, 0, sizeof(*results) * (size_t)(n > 0 ? n : 0));
    int fault;
    int rc = call_begin(c, true, &fault);
    if (rc != GR_ZOK) {
        for (int i = 0; i < n; i++) results[i].rc = rc;
        return rc;
    }
    struct txn t;
    txn_begin(&t, c->zm, sid_of(c));
    int failed = -1;
    int n_checks = 0;
    for (int i = 0; i < n; i++) {
        const struct gr_zop *op = &ops[i];
        int r;
        switch (op->type) {
        case GR_ZOP_CREATE:
            r = ap_create(&t, op->path, op->data, op->len, op->flags, &results[i].created_path);
            break;
        case GR_ZOP_DELETE: r = ap_delete(&t, op->path, op->version); break;
        case GR_ZOP_SET: r = ap_set(&t, op->path, op->data, op->len, op->version, &results[i].stat); break;
        case GR_ZOP_CHECK:
            r = ap_check(&t, op->path, op->version);
            n_checks++;
            break;
        default: r = GR_ZBADARGUMENTS; break;
        }
        results[i].rc = r;
        if (r != GR_ZOK) {
            failed = i;
            break;
        }
    }
    if (failed >= 0) {
        txn_rollback(&t);
        for (int i = 0; i < n; i++) {
            free(results[i].created_path);
            results[i].created_path = NULL;
            memset(&results[i].stat, 0, sizeof(results[i].stat));
            if (i < failed) results[i].rc = GR_ZOK;
            else if (i > failed) results[i].rc = GR_ZRUNTIMEINCONSISTENCY;
        }
        rc = results[failed].rc;
    } else {
        struct gr_zop *checks = NULL;
        if (n_checks) {
            checks = gr_calloc((size_t)n_checks, sizeof(*checks));
            int j = 0;
            for (int i = 0; i < n; i++)
                if (ops[i].type == GR_ZOP_CHECK) checks[j++] = ops[i];
        }
        txn_commit(&t, true, false, checks, n_checks);
        free(checks);
        rc = GR_ZOK;
    }
    if (call_lost_after(c, fault)) {
        for (int i = 0; i < n; i++) {
            free(results[i].created_path);
            results[i].created_path = NULL;
            results[i].rc = GR_ZCONNECTIONLOSS;
        }
        return GR_ZCONNECTIONLOSS;
    }
    return rc;
}

/* Pipelined multis, one after another: each its own call (fault hooks included). A multi that
 * loses the connection leaves the client disconnected, so the later ones report CONNECTIONLOSS
 * without running, as the real pipeline's unanswered requests do. */
static int b_multi_many(struct gr_zk_backend *b, struct gr_zmulti *m, int n) {
    for (int i = 0; i < n; i++) m[i].rc = b_multi(b, m[i].ops, m[i].n, m[i].results);
    return GR_ZOK;
}

static int b_get_many(struct gr_zk_backend *b, const char *const *paths, int n, bool watch,
                      struct gr_zget_result *results) {
    struct zm_client *c = zm_client_of(b);
    memset(results, 0, sizeof(*results) * (size_t)(n > 0 ? n : 0));
    int fault;
    int rc = call_begin(c, false, &fault);
    if (rc != GR_ZOK) {
        for (int i = 0; i < n; i++) results[i].rc = rc;
        return rc;
    }
    for (int i = 0; i < n; i++)
        results[i].rc = read_node(c, paths[i], watch, &results[i].data, &results[i].len,
                                  &results[i].stat);
    if (call_lost_after(c, fault)) {
        /* The connection dropped half-way through the pipeline: the second half is lost. */
        for (int i = n / 2; i < n; i++) {
            free(results[i].data);
            results[i].data = NULL;
            results[i].len = 0;
            results[i].rc = GR_ZCONNECTIONLOSS;
        }
    }
    return GR_ZOK;
}

static int b_get_children_many(struct gr_zk_backend *b, const char *const *paths, int n, bool watch,
                               struct gr_zchildren_result *results) {
    struct zm_client *c = zm_client_of(b);
    memset(results, 0, sizeof(*results) * (size_t)(n > 0 ? n : 0));
    int fault;
    int rc = call_begin(c, false, &fault);
    if (rc != GR_ZOK) {
        for (int i = 0; i < n; i++) results[i].rc = rc;
        return rc;
    }
    for (int i = 0; i < n; i++) results[i].rc = read_children(c, paths[i], watch, &results[i].children);
    if (call_lost_after(c, fault)) {
        for (int i = n / 2; i < n; i++) {
            gr_zstrings_free(&results[i].children);
            results[i].rc = GR_ZCONNECTIONLOSS;
        }
    }
    return GR_ZOK;
}

static int b_session(struct gr_zk_backend *b, struct gr_zsession *out) {
    struct zm_client *c = zm_client_of(b);
    memset(out, 0, sizeof(*out));
    if (c->state == ZMC_CLOSED) return GR_ZCLOSING;
    if (!c->sess || c->state == ZMC_EXPIRED) return GR_ZINVALIDSTATE;
    out->id = c->sess->id;
    out->passwd_len = 16;
    memcpy(out->passwd, c->sess->passwd, 16);
    return GR_ZOK;
}

static int b_close_session(struct gr_zk_backend *b, const struct gr_zsession *s) {
    struct zm_client *c = zm_client_of(b);
    if (c->state == ZMC_CLOSED) return GR_ZCLOSING;
    if (c->state != ZMC_CONNECTED) return GR_ZCONNECTIONLOSS;
    struct zm_session *x = session_find(c->zm, s->id);
    if (!x || !x->alive) return GR_ZSESSIONEXPIRED;
    if (s->passwd_len != 16 || memcmp(s->passwd, x->passwd, 16) != 0) return GR_ZSESSIONEXPIRED;
    session_kill(c->zm, x, true);
    return GR_ZOK;
}

static int b_wait_connected(struct gr_zk_backend *b, int timeout_ms) {
    struct zm_client *c = zm_client_of(b);
    for (;;) {
        switch (c->state) {
        case ZMC_CONNECTED: return GR_ZOK;
        case ZMC_CLOSED: return GR_ZCLOSING;
        case ZMC_EXPIRED: return GR_ZSESSIONEXPIRED;
        default: break;
        }
        struct zm *zm = c->zm;
        int d = zm->hooks.wait_connected ? zm->hooks.wait_connected(zm->hooks.arg, c, timeout_ms)
                                         : GR_ZOK;
        if (d == GR_ZOK) {
            zm_reconnect(c);
        } else if (d == GR_ZSESSIONEXPIRED) {
            if (c->sess && c->sess->alive) session_kill(zm, c->sess, true);
            zm_reconnect(c); /* discovers the expiry */
        } else {
            return GR_ZOPERATIONTIMEOUT;
        }
    }
}

static void b_destroy(struct gr_zk_backend *b) {
    struct zm_client *c = zm_client_of(b);
    if (!c) return;
    struct zm *zm = c->zm;
    ev_drop(c, false);
    if (c->sess && c->sess->alive && zm->down) { /* nobody to close it: it lingers */
        c->sess->client = NULL;
        c->sess->deadline = zm->now + c->sess->timeout_ms;
    } else if (c->sess && c->sess->alive) {
        c->sess->client = NULL;
        session_kill(zm, c->sess, false);
    } else if (c->sess) {
        c->sess->client = NULL;
    }
    /* a session whose client pointer still names us (dead or detached) must forget it */
    for (int i = 0; i < zm->nsessions; i++)
        if (zm->sessions[i]->client == c) zm->sessions[i]->client = NULL;
    for (struct zm_client **pp = &zm->clients; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    free(c);
}

static const struct gr_zk_backend_ops zm_ops = {
    .create = b_create,
    .delete_node = b_delete,
    .get = b_get,
    .set = b_set,
    .exists = b_exists,
    .get_children = b_get_children,
    .multi = b_multi,
    .multi_many = b_multi_many,
    .get_many = b_get_many,
    .get_children_many = b_get_children_many,
    .session = b_session,
    .close_session = b_close_session,
    .wait_connected = b_wait_connected,
    .destroy = b_destroy,
};

struct zm_client *zm_client_new(struct zm *zm, int session_timeout_ms, gr_zk_watch_fn on_watch,
                                gr_zk_session_fn on_session, void *cb_ctx) {
    struct zm_client *c = gr_calloc(1, sizeof(*c));
    c->base.ops = &zm_ops;
    c->base.on_watch = on_watch;
    c->base.on_session = on_session;
    c->base.cb_ctx = cb_ctx;
    c->base.session_timeout_ms = session_timeout_ms;
    c->zm = zm;
    c->state = ZMC_CONNECTED;
    c->sess = session_new(zm, c, session_timeout_ms);
    struct zm_client **pp = &zm->clients;
    while (*pp) pp = &(*pp)->next;
    *pp = c;
    return c;
}

/* ------------------------------------------------------------------------------------------ */
/* inspection */

int zm_peek(struct zm *zm, const char *path, const char **data, int *len, struct gr_zstat *stat) {
    struct znode *n = node_find(zm, path);
    if (!n) return GR_ZNONODE;
    if (data) *data = n->data;
    if (len) *len = n->len;
    if (stat) *stat = n->st;
    return GR_ZOK;
}

static const char **g_names_buf;
static int g_names_cap;

int zm_peek_children(struct zm *zm, const char *path, const char ***names) {
    struct znode *n = node_find(zm, path);
    if (!n) return -1;
    if (names) {
        if (g_names_cap < n->nkids + 1) {
            g_names_cap = n->nkids + 16;
            g_names_buf = gr_realloc(g_names_buf, (size_t)g_names_cap * sizeof(char *));
        }
        for (int i = 0; i < n->nkids; i++) g_names_buf[i] = n->kids[i]->name;
        *names = g_names_buf;
    }
    return n->nkids;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char *zm_dump(struct zm *zm) {
    const char **paths = gr_malloc(zm->nnodes * sizeof(char *));
    size_t k = 0;
    for (size_t i = 0; i < zm->nbuckets; i++)
        for (struct znode *n = zm->buckets[i]; n; n = n->hnext) paths[k++] = n->path;
    qsort(paths, k, sizeof(char *), cmp_str);
    size_t cap = 4096, len = 0;
    char *out = gr_malloc(cap);
    out[0] = 0;
    for (size_t i = 0; i < k; i++) {
        struct znode *n = node_find(zm, paths[i]);
        char line[1024];
        int l = snprintf(line, sizeof line, "  %s v%d cv%d czxid=%" PRId64 "%s%s%.*s\n", n->path,
                         n->st.version, n->st.cversion, n->st.czxid,
                         n->st.ephemeralOwner ? " eph" : "", n->data ? " " : "",
                         n->data ? (n->len > 300 ? 300 : n->len) : 0, n->data ? n->data : "");
        if (l < 0) continue;
        if ((size_t)l >= sizeof line) l = (int)sizeof line - 1;
        if (len + (size_t)l + 1 > cap) {
            cap = (cap + (size_t)l) * 2;
            out = gr_realloc(out, cap);
        }
        memcpy(out + len, line, (size_t)l + 1);
        len += (size_t)l;
    }
    free(paths);
    return out;
}

int zm_selfcheck(struct zm *zm, char *buf, int len) {
    size_t count = 0;
    for (size_t i = 0; i < zm->nbuckets; i++) {
        for (struct znode *n = zm->buckets[i]; n; n = n->hnext) {
            count++;
            if (n->nkids != n->st.numChildren) {
                snprintf(buf, (size_t)len, "%s: numChildren %d but %d kids", n->path,
                         n->st.numChildren, n->nkids);
                return -1;
            }
            if (n != zm->root) {
                if (!n->parent || node_find(zm, n->parent->path) != n->parent) {
                    snprintf(buf, (size_t)len, "%s: bad parent", n->path);
                    return -1;
                }
                bool found = false;
                for (int j = 0; j < n->parent->nkids; j++) found |= n->parent->kids[j] == n;
                if (!found) {
                    snprintf(buf, (size_t)len, "%s: not among its parent's children", n->path);
                    return -1;
                }
            }
            if (n->st.ephemeralOwner) {
                struct zm_session *s = session_find(zm, n->st.ephemeralOwner);
                if (!s || !s->alive) {
                    snprintf(buf, (size_t)len, "%s: ephemeral of dead session 0x%" PRIx64, n->path,
                             (uint64_t)n->st.ephemeralOwner);
                    return -1;
                }
            }
        }
    }
    if (count != zm->nnodes) {
        snprintf(buf, (size_t)len, "node count %zu != %zu", count, zm->nnodes);
        return -1;
    }
    return 0;
}
