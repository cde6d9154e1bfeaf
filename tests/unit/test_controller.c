/* The controller driven deterministically: two (or three) controllers over a small in-memory
 * ZooKeeper model implementing the gr_zk_backend vtable, a virtual clock, no threads
 * (gr_ctrl_events_process_one). Checks election, /controller deletion, session expiry with
 * re-registration, the context load, topic/broker change events, epoch fencing, and a broker
 * change in the window where the controller arms its BrokerModifications watch, and a /controller
 * naming a broker that never ran failover for it, an auto-rebalance tick of an earlier term, and
 * PartitionModifications adding only new partitions, and TopicChange pacing (topics created
 * back to back wait for one timer and are handled together), and the warm standby: a resigned
 * controller's refresh waits, and a topic re-created between the failover's stamp read and its
 * znode read has its states read, not kept.
 *
 * The model keeps what the controller relies on: versions, czxid, ephemerals per session,
 * sequential nodes, one-shot data/exists/child watches delivered later (by pump()), atomic multi.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "controller/clock.h"
#include "controller/controller.h"
#include "controller/event_manager.h"
#include "controller/leader_balance.h"
#include "controller/states.h"
#include "zk/backend.h"
#include "zk/kzk.h"

#include "support/check.h"

/* ================= in-memory ZooKeeper ================= */

struct fnode {
    char *path;
    char *data;
    int len;
    struct gr_zstat st;
    int seq;
};

enum { W_DATA = 1, W_CHILD = 2 };
struct fwatch {
    struct fsess *s;
    char *path;
    int kind;
};

struct fevent {
    int type;
    char *path;
};

struct fzk {
    struct fnode *nodes;
    int n;
    int64_t zxid;
    int64_t next_session;
    struct fwatch *w;
    int nw;
};

struct fsess {
    struct gr_zk_backend base;
    struct fzk *z;
    int64_t id;
    bool expired;
    struct fevent *ev;
    int nev;
};

static struct fnode *find(struct fzk *z, const char *path) {
    for (int i = 0; i < z->n; i++)
        if (strcmp(z->nodes[i].path, path) == 0) return &z->nodes[i];
    return NULL;
}

static char *parent_of(const char *path) {
    const char *sl = strrchr(path, '/');
    if (sl == path) return gr_strdup("/");
    return gr_strndup(path, (size_t)(sl - path));
}

static bool is_child(const char *parent, const char *path) {
    size_t pl = strlen(parent);
    if (strcmp(parent, "/") == 0) pl = 0;
    if (strncmp(path, parent, pl) != 0 || path[pl] != '/' || !path[pl + 1]) return false;
    return strchr(path + pl + 1, '/') == NULL && strcmp(path, "/") != 0;
}

static void queue_event(struct fsess *s, int type, const char *path) {
    s->ev = gr_realloc(s->ev, sizeof *s->ev * (size_t)(s->nev + 1));
    s->ev[s->nev].type = type;
    s->ev[s->nev].path = gr_strdup(path);
    s->nev++;
}

/* Fires (and removes) watches of `kind` on path. */
static void fire(struct fzk *z, const char *path, int kind, int type) {
    for (int i = 0; i < z->nw;) {
        if (z->w[i].kind == kind && strcmp(z->w[i].path, path) == 0) {
            if (!z->w[i].s->expired) queue_event(z->w[i].s, type, path);
            free(z->w[i].path);
            z->w[i] = z->w[--z->nw];
        } else {
            i++;
        }
    }
}

/* The arming race: when a data watch is armed on race_path, the broker at that path changes at
 * once (its port becomes race_port) and the notification reaches the client before the arming
 * call returns -- what a real ZooKeeper client thread may do. A controller that registers the
 * path's handler only after arming the watch loses the change (watches are one-shot). */
static const char *race_path;
static int race_port;
static int do_set(struct fzk *z, const char *path, const void *data, int len, int version, struct gr_zstat *st,
                  bool fire_events);

static void race_fire(struct fsess *s, const char *path);

/* Called by get/exists after their answer is complete: the change comes right after. */
static void race_fire(struct fsess *s, const char *path) {
    if (!race_path || strcmp(path, race_path) != 0) return;
    const char *slash = strrchr(path, '/');
    struct fnode *nd = NULL;
    for (int i = 0; i < s->z->n; i++)
        if (strcmp(s->z->nodes[i].path, path) == 0) nd = &s->z->nodes[i];
    struct gr_kzk_broker b;
    memset(&b, 0, sizeof b);
    if (!nd || gr_kzk_broker_decode(atoi(slash + 1), nd->data, (size_t)nd->len, &b) != 0) return;
    b.endpoints[0].port = race_port;
    size_t len = 0;
    char *data = gr_kzk_broker_encode(&b, &len);
    gr_kzk_broker_release(&b);
    do_set(s->z, path, data, (int)len, -1, NULL, false);
    free(data);
    race_path = NULL;
    for (int i = 0; i < s->z->nw; i++) /* the watch fires: one-shot, gone */
        if (s->z->w[i].s == s && s->z->w[i].kind == W_DATA && strcmp(s->z->w[i].path, path) == 0) {
            free(s->z->w[i].path);
            s->z->w[i] = s->z->w[--s->z->nw];
            break;
        }
    s->base.on_watch(s->base.cb_ctx, GR_ZWATCH_CHANGED, path);
}

static void add_watch(struct fsess *s, const char *path, int kind) {
    struct fzk *z = s->z;
    for (int i = 0; i < z->nw; i++)
        if (z->w[i].s == s && z->w[i].kind == kind && strcmp(z->w[i].path, path) == 0) return;
    z->w = gr_realloc(z->w, sizeof *z->w * (size_t)(z->nw + 1));
    z->w[z->nw].s = s;
    z->w[z->nw].path = gr_strdup(path);
    z->w[z->nw].kind = kind;
    z->nw++;
}

static int n_children(struct fzk *z, const char *path) {
    int c = 0;
    for (int i = 0; i < z->n; i++)
        if (is_child(path, z->nodes[i].path)) c++;
    return c;
}

/* Raw mutations (no session checks). fire_events=false inside a multi's dry run. */
/* A multi is one transaction: every op of it gets the same zxid (as ZooKeeper's). */
static int64_t multi_zxid;
static int64_t next_zxid(struct fzk *z) { return multi_zxid ? multi_zxid : ++z->zxid; }

static int do_create(struct fzk *z, struct fsess *s, const char *path, const void *data, int len, int flags,
                     char **created, bool fire_events) {
    char *par = parent_of(path);
    struct fnode *p = find(z, par);
    if (!p) {
        free(par);
        return GR_ZNONODE;
    }
    if (p->st.ephemeralOwner) {
        free(par);
        return GR_ZNOCHILDRENFOREPHEMERALS;
    }
    char *full = (flags & GR_ZSEQUENCE) ? gr_asprintf("%s%010d", path, p->seq++) : gr_strdup(path);
    if (find(z, full)) {
        free(par);
        free(full);
        return GR_ZNODEEXISTS;
    }
    p->st.cversion++;
    z->nodes = gr_realloc(z->nodes, sizeof *z->nodes * (size_t)(z->n + 1));
    struct fnode *nd = &z->nodes[z->n++];
    memset(nd, 0, sizeof *nd);
    nd->path = full;
    nd->len = data ? len : 0;
    nd->data = gr_malloc((size_t)nd->len + 1);
    if (nd->len) memcpy(nd->data, data, (size_t)nd->len);
    nd->data[nd->len] = 0;
    nd->st.czxid = nd->st.mzxid = next_zxid(z);
    nd->st.ephemeralOwner = (flags & GR_ZEPHEMERAL) ? s->id : 0;
    if (created) *created = gr_strdup(full);
    if (fire_events) {
        fire(z, full, W_DATA, GR_ZWATCH_CREATED);
        fire(z, par, W_CHILD, GR_ZWATCH_CHILD);
    }
    free(par);
    return GR_ZOK;
}

static int do_delete(struct fzk *z, const char *path, int version, bool fire_events) {
    struct fnode *nd = find(z, path);
    if (!nd) return GR_ZNONODE;
    if (version != -1 && version != nd->st.version) return GR_ZBADVERSION;
    if (n_children(z, path)) return GR_ZNOTEMPTY;
    char *par = parent_of(path);
    struct fnode *p = find(z, par);
    if (p) p->st.cversion++;
    char *copy = gr_strdup(path);
    free(nd->path);
    free(nd->data);
    *nd = z->nodes[--z->n];
    if (fire_events) {
        fire(z, copy, W_DATA, GR_ZWATCH_DELETED);
        fire(z, copy, W_CHILD, GR_ZWATCH_DELETED);
        fire(z, par, W_CHILD, GR_ZWATCH_CHILD);
    }
    free(copy);
    free(par);
    return GR_ZOK;
}

static int do_set(struct fzk *z, const char *path, const void *data, int len, int version, struct gr_zstat *st,
                  bool fire_events) {
    struct fnode *nd = find(z, path);
    if (!nd) return GR_ZNONODE;
    if (version != -1 && version != nd->st.version) return GR_ZBADVERSION;
    free(nd->data);
    nd->len = data ? len : 0;
    nd->data = gr_malloc((size_t)nd->len + 1);
    if (nd->len) memcpy(nd->data, data, (size_t)nd->len);
    nd->data[nd->len] = 0;
    nd->st.version++;
    nd->st.mzxid = next_zxid(z);
    if (st) *st = nd->st;
    if (fire_events) fire(z, path, W_DATA, GR_ZWATCH_CHANGED);
    return GR_ZOK;
}

static struct fsess *S(struct gr_zk_backend *b) { return (struct fsess *)b; }
#define LIVE(s)                                                                                    \
    do {                                                                                           \
        if ((s)->expired) return GR_ZSESSIONEXPIRED;                                               \
    } while (0)

static int f_create(struct gr_zk_backend *b, const char *path, const void *data, int len, int flags, char **created) {
    LIVE(S(b));
    return do_create(S(b)->z, S(b), path, data, len, flags, created, true);
}
static int f_delete(struct gr_zk_backend *b, const char *path, int version) {
    LIVE(S(b));
    return do_delete(S(b)->z, path, version, true);
}
/* Runs once right after a get of get_hook_path has answered (then clears itself): what another
 * session does between a read and the write that depends on it. */
static const char *get_hook_path;
static void (*get_hook)(void);
static int f_get(struct gr_zk_backend *b, const char *path, bool watch, char **data, int *len, struct gr_zstat *st) {
    LIVE(S(b));
    struct fnode *nd = find(S(b)->z, path);
    if (!nd) return GR_ZNONODE;
    if (watch) add_watch(S(b), path, W_DATA);
    if (data) {
        *data = gr_malloc((size_t)nd->len + 1);
        memcpy(*data, nd->data, (size_t)nd->len + 1);
    }
    if (len) *len = nd->len;
    if (st) *st = nd->st;
    if (watch) race_fire(S(b), path);
    if (get_hook && get_hook_path && strcmp(path, get_hook_path) == 0) {
        void (*h)(void) = get_hook;
        get_hook = NULL;
        get_hook_path = NULL;
        h();
    }
    return GR_ZOK;
}
static int f_set(struct gr_zk_backend *b, const char *path, const void *data, int len, int version, struct gr_zstat *st) {
    LIVE(S(b));
    return do_set(S(b)->z, path, data, len, version, st, true);
}
static int f_exists(struct gr_zk_backend *b, const char *path, bool watch, struct gr_zstat *st) {
    LIVE(S(b));
    if (watch) add_watch(S(b), path, W_DATA);
    struct fnode *nd = find(S(b)->z, path);
    if (!nd) return GR_ZNONODE;
    if (st) *st = nd->st;
    if (watch) race_fire(S(b), path);
    return GR_ZOK;
}
static int f_children(struct gr_zk_backend *b, const char *path, bool watch, struct gr_zstrings *out) {
    LIVE(S(b));
    struct fzk *z = S(b)->z;
    if (!find(z, path)) return GR_ZNONODE;
    if (watch) add_watch(S(b), path, W_CHILD);
    out->count = 0;
    out->names = gr_calloc((size_t)z->n + 1, sizeof(char *));
    for (int i = 0; i < z->n; i++)
        if (is_child(path, z->nodes[i].path)) out->names[out->count++] = gr_strdup(strrchr(z->nodes[i].path, '/') + 1);
    return GR_ZOK;
}

static struct fnode *clone_nodes(struct fzk *z) {
    struct fnode *c = gr_malloc(sizeof *c * (size_t)(z->n + 1));
    for (int i = 0; i < z->n; i++) {
        c[i] = z->nodes[i];
        c[i].path = gr_strdup(z->nodes[i].path);
        c[i].data = gr_malloc((size_t)z->nodes[i].len + 1);
        memcpy(c[i].data, z->nodes[i].data, (size_t)z->nodes[i].len + 1);
    }
    return c;
}

static void free_nodes(struct fnode *v, int n) {
    for (int i = 0; i < n; i++) {
        free(v[i].path);
        free(v[i].data);
    }
    free(v);
}

static int f_multi(struct gr_zk_backend *b, const struct gr_zop *ops, int n, struct gr_zop_result *res) {
    LIVE(S(b));
    struct fzk *z = S(b)->z;
    memset(res, 0, sizeof *res * (size_t)n);
    /* dry run on a copy */
    struct fnode *saved = clone_nodes(z);
    int saved_n = z->n;
    int64_t saved_zxid = z->zxid;
    int fail = -1, frc = GR_ZOK;
    for (int i = 0; i < n && fail < 0; i++) {
        int rc;
        switch (ops[i].type) {
        case GR_ZOP_CREATE: rc = do_create(z, S(b), ops[i].path, ops[i].data, ops[i].len, ops[i].flags, NULL, false); break;
        case GR_ZOP_DELETE: rc = do_delete(z, ops[i].path, ops[i].version, false); break;
        case GR_ZOP_SET: rc = do_set(z, ops[i].path, ops[i].data, ops[i].len, ops[i].version, NULL, false); break;
        case GR_ZOP_CHECK: {
            struct fnode *nd = find(z, ops[i].path);
            rc = !nd ? GR_ZNONODE : (ops[i].version != -1 && nd->st.version != ops[i].version) ? GR_ZBADVERSION : GR_ZOK;
            break;
        }
        default: rc = GR_ZBADARGUMENTS;
        }
        if (rc != GR_ZOK) {
            fail = i;
            frc = rc;
        }
    }
    free_nodes(z->nodes, z->n);
    z->nodes = saved;
    z->n = saved_n;
    z->zxid = saved_zxid;
    if (fail >= 0) {
        for (int i = 0; i < n; i++) res[i].rc = i < fail ? GR_ZOK : i == fail ? frc : GR_ZRUNTIMEINCONSISTENCY;
        return frc;
    }
    multi_zxid = ++z->zxid;
    for (int i = 0; i < n; i++) {
        int rc = GR_ZOK;
        switch (ops[i].type) {
        case GR_ZOP_CREATE:
            rc = do_create(z, S(b), ops[i].path, ops[i].data, ops[i].len, ops[i].flags, &res[i].created_path, true);
            if (rc == GR_ZOK) res[i].stat = find(z, res[i].created_path)->st;
            break;
        case GR_ZOP_DELETE: rc = do_delete(z, ops[i].path, ops[i].version, true); break;
        case GR_ZOP_SET: rc = do_set(z, ops[i].path, ops[i].data, ops[i].len, ops[i].version, &res[i].stat, true); break;
        default: break;
        }
        res[i].rc = rc;
    }
    multi_zxid = 0;
    return GR_ZOK;
}

static int f_get_many(struct gr_zk_backend *b, const char *const *paths, int n, bool watch, struct gr_zget_result *res) {
    memset(res, 0, sizeof *res * (size_t)n);
    for (int i = 0; i < n; i++) res[i].rc = f_get(b, paths[i], watch, &res[i].data, &res[i].len, &res[i].stat);
    return GR_ZOK;
}
static int f_children_many(struct gr_zk_backend *b, const char *const *paths, int n, bool watch,
                           struct gr_zchildren_result *res) {
    memset(res, 0, sizeof *res * (size_t)n);
    for (int i = 0; i < n; i++) res[i].rc = f_children(b, paths[i], watch, &res[i].children);
    return GR_ZOK;
}
static int f_session(struct gr_zk_backend *b, struct gr_zsession *out) {
    LIVE(S(b));
    memset(out, 0, sizeof *out);
    out->id = S(b)->id;
    out->passwd_len = 16;
    return GR_ZOK;
}
static void expire_ephemerals(struct fzk *z, int64_t id) {
    for (int i = 0; i < z->n;) {
        if (z->nodes[i].st.ephemeralOwner == id) {
            char *p = gr_strdup(z->nodes[i].path);
            do_delete(z, p, -1, true);
            free(p);
            i = 0;
        } else {
            i++;
        }
    }
}
static int f_close_session(struct gr_zk_backend *b, const struct gr_zsession *s) {
    expire_ephemerals(S(b)->z, s->id);
    return GR_ZOK;
}
static int f_wait_connected(struct gr_zk_backend *b, int t) {
    (void)t;
    return S(b)->expired ? GR_ZSESSIONEXPIRED : GR_ZOK;
}
static void f_destroy(struct gr_zk_backend *b) {
    struct fsess *s = S(b);
    expire_ephemerals(s->z, s->id);
    for (int i = 0; i < s->z->nw;) {
        if (s->z->w[i].s == s) {
            free(s->z->w[i].path);
            s->z->w[i] = s->z->w[--s->z->nw];
        } else {
            i++;
        }
    }
    for (int i = 0; i < s->nev; i++) free(s->ev[i].path);
    free(s->ev);
    free(s);
}

static const struct gr_zk_backend_ops fops = {
    f_create, f_delete, f_get, f_set, f_exists, f_children, f_multi, f_get_many, f_children_many,
    f_session, f_close_session, f_wait_connected, f_destroy, NULL,
};

static struct fsess *fsess_new(struct fzk *z, struct gr_zk_watches *w) {
    struct fsess *s = gr_calloc(1, sizeof *s);
    s->base.ops = &fops;
    s->base.on_watch = gr_zk_watches_on_watch;
    s->base.on_session = gr_zk_watches_on_session;
    s->base.cb_ctx = w;
    s->base.session_timeout_ms = 3000;
    s->z = z;
    s->id = ++z->next_session;
    return s;
}

/* Kills a session: ephemerals and watches go; the owner sees EXPIRED then (after the test calls
 * renew) NEW_SESSION. */
static void fsess_expire(struct fsess *s) {
    s->expired = true;
    expire_ephemerals(s->z, s->id);
    for (int i = 0; i < s->z->nw;) {
        if (s->z->w[i].s == s) {
            free(s->z->w[i].path);
            s->z->w[i] = s->z->w[--s->z->nw];
        } else {
            i++;
        }
    }
    for (int i = 0; i < s->nev; i++) free(s->ev[i].path);
    s->nev = 0;
    s->base.on_session(s->base.cb_ctx, GR_ZSESSION_EXPIRED);
}

static void fsess_renew(struct fsess *s) {
    s->expired = false;
    s->id = ++s->z->next_session;
    s->base.on_session(s->base.cb_ctx, GR_ZSESSION_NEW_SESSION);
}

/* Delivers queued watch events. Returns how many. */
static int pump(struct fsess *s) {
    int n = s->nev;
    struct fevent *ev = s->ev;
    s->ev = NULL;
    s->nev = 0;
    for (int i = 0; i < n; i++) {
        s->base.on_watch(s->base.cb_ctx, ev[i].type, ev[i].path);
        free(ev[i].path);
    }
    free(ev);
    return n;
}

/* ================= virtual clock ================= */

struct vclock {
    struct gr_clock base;
    int64_t now;
    struct {
        uint64_t id;
        int64_t due;
        struct gr_ctrl_events *em;
        struct gr_ctrl_event *ev;
    } t[64];
    int n;
    uint64_t next;
};
static int64_t v_now(struct gr_clock *c) { return ((struct vclock *)c)->now; }
static uint64_t v_schedule(struct gr_clock *c, int64_t d, struct gr_ctrl_events *em, struct gr_ctrl_event *ev) {
    struct vclock *v = (struct vclock *)c;
    if (v->n == 64) {
        gr_ctrl_event_free(ev);
        return 0;
    }
    v->t[v->n].id = ++v->next;
    v->t[v->n].due = v->now + d;
    v->t[v->n].em = em;
    v->t[v->n].ev = ev;
    return v->t[v->n++].id;
}
static void v_cancel(struct gr_clock *c, uint64_t id) {
    struct vclock *v = (struct vclock *)c;
    for (int i = 0; i < v->n; i++)
        if (v->t[i].id == id) {
            gr_ctrl_event_free(v->t[i].ev);
            v->t[i] = v->t[--v->n];
            return;
        }
}
static void v_free(struct gr_clock *c) {
    struct vclock *v = (struct vclock *)c;
    for (int i = 0; i < v->n; i++) gr_ctrl_event_free(v->t[i].ev);
    v->n = 0;
}
static const struct gr_clock_ops vops = {v_now, v_schedule, v_cancel, v_free};

/* ================= brokers ================= */

struct node {
    int32_t id;
    struct gr_zk_watches *w;
    struct fsess *s;
    struct gr_kzk *k;
    struct gr_metrics *m;
    struct gr_controller *c;
    struct gr_kzk_broker info;
};

static struct fzk Z;
static struct vclock VC = {.base = {&vops}};
static int64_t g_standby_refresh_ms; /* > 0: node_start turns the warm standby on with it */

static void node_start(struct node *n, int32_t id) {
    memset(n, 0, sizeof *n);
    n->id = id;
    n->w = gr_zk_watches_new();
    n->s = fsess_new(&Z, n->w);
    n->k = gr_kzk_new(&n->s->base);
    n->m = gr_metrics_new();
    CHECK(gr_kzk_ensure_paths(n->k) == 0);
    n->info.id = id;
    n->info.jmx_port = -1;
    n->info.n_endpoints = 1;
    n->info.endpoints = gr_calloc(1, sizeof *n->info.endpoints);
    n->info.endpoints[0].listener = gr_strdup("PLAINTEXT");
    n->info.endpoints[0].security_protocol = gr_strdup("PLAINTEXT");
    n->info.endpoints[0].host = gr_strdup("127.0.0.1");
    n->info.endpoints[0].port = 9090 + id;
    int64_t epoch = -1;
    CHECK(gr_kzk_register_broker(n->k, &n->info, NULL, 0, &epoch) == 0);
    struct gr_controller_config cc = {
        .broker_id = id,
        .broker_info = &n->info,
        .broker_epoch = epoch,
        .kzk = n->k,
        .watches = n->w,
        .clock = &VC.base,
        .metrics = n->m,
        .auto_leader_rebalance_enable = true,
        .leader_imbalance_check_interval_ms = 300000,
        .delete_topic_enable = true,
        .no_thread = true,
        .standby_enable = g_standby_refresh_ms > 0,
        .standby_refresh_ms = g_standby_refresh_ms,
    };
    n->c = gr_controller_new(&cc);
    CHECK(gr_controller_startup(n->c) == 0);
}

static void node_stop(struct node *n) {
    gr_controller_shutdown(n->c);
    gr_kzk_free(n->k);
    gr_zkb_destroy(&n->s->base);
    gr_controller_free(n->c);
    gr_zk_watches_free(n->w);
    gr_metrics_free(n->m);
    gr_kzk_broker_release(&n->info);
}

/* Puts the events of every timer due by VC.now. */
static void fire_due(void) {
    for (int i = 0; i < VC.n;) {
        if (VC.t[i].due <= VC.now) {
            gr_ctrl_events_put(VC.t[i].em, VC.t[i].ev);
            VC.t[i] = VC.t[--VC.n];
        } else {
            i++;
        }
    }
}

/* Delivers watches and processes events on every node until nothing moves. */
static void settle(struct node *nodes, int n) {
    for (int round = 0; round < 1000; round++) {
        int moved = 0;
        for (int i = 0; i < n; i++) {
            if (!nodes[i].c) continue;
            moved += pump(nodes[i].s);
            while (gr_ctrl_events_process_one(gr_controller_events(nodes[i].c))) moved++;
        }
        if (!moved) return;
    }
    CHECK(!"settle did not converge");
}

static int active_count(struct node *nodes, int n, int32_t *who) {
    int c = 0;
    for (int i = 0; i < n; i++)
        if (nodes[i].c && gr_controller_is_active(nodes[i].c)) {
            c++;
            if (who) *who = nodes[i].id;
        }
    return c;
}

static int32_t zk_controller(struct node *any) {
    int32_t id = -2;
    CHECK(gr_kzk_get_controller_id(any->k, false, &id) == 0);
    return id;
}

static int32_t zk_epoch(struct node *any) {
    int32_t e = -1, v = -1;
    CHECK(gr_kzk_get_controller_epoch(any->k, false, &e, &v) == 0);
    return e;
}

static int64_t gauge(struct node *n, const char *name) {
    char full[256];
    int64_t v = -1;
    gr_metrics_read_gauge(n->m, gr_metrics_name(full, sizeof full, "kafka.controller", "KafkaController", name), &v);
    return v;
}

/* The gauges that are recomputed only when the context changed agree with a fresh scan. */
static void check_gauges(struct node *n) {
    if (!gr_controller_is_active(n->c)) return;
    struct gr_ctrl_context *ctx = gr_controller_context(n->c);
    int64_t offline = 0;
    size_t cur = 0;
    struct gr_ctrl_topic *t;
    while ((t = gr_ctrl_ctx_next_topic(ctx, &cur)))
        for (int i = 0; i < t->n_partitions; i++) offline += t->partitions[i].state == GR_PS_OFFLINE;
    CHECK(gauge(n, "OfflinePartitionsCount") == offline);
    CHECK(gauge(n, "PreferredReplicaImbalanceCount") == gr_leader_balance_imbalance_count(ctx));
}


static void create_topic(struct node *via, const char *topic, int parts, bool with_states) {
    struct gr_kzk_topic_assignment a = {0};
    a.n_partitions = parts;
    a.partitions = gr_calloc((size_t)parts, sizeof *a.partitions);
    for (int p = 0; p < parts; p++) {
        a.partitions[p].partition = p;
        a.partitions[p].n_replicas = 2;
        a.partitions[p].replicas = gr_malloc(2 * sizeof(int32_t));
        a.partitions[p].replicas[0] = 1 + p % 2;
        a.partitions[p].replicas[1] = 1 + (p + 1) % 2;
    }
    CHECK(gr_kzk_create_topic(via->k, topic, &a, NULL) == 0);
    if (with_states) {
        for (int p = 0; p < parts; p++) {
            char path[256];
            int32_t isr[2] = {a.partitions[p].replicas[0], a.partitions[p].replicas[1]};
            struct gr_kzk_leader_and_isr lai = {.leader = isr[0], .leader_epoch = 0, .controller_epoch = 1, .n_isr = 2, .isr = isr};
            size_t len;
            char *js = gr_kzk_partition_state_encode(&lai, &len);
            snprintf(path, sizeof path, "/brokers/topics/%s/partitions", topic);
            gr_zkb_create(&via->s->base, path, NULL, 0, 0, NULL);
            snprintf(path, sizeof path, "/brokers/topics/%s/partitions/%d", topic, p);
            gr_zkb_create(&via->s->base, path, NULL, 0, 0, NULL);
            snprintf(path, sizeof path, "/brokers/topics/%s/partitions/%d/state", topic, p);
            CHECK(gr_zkb_create(&via->s->base, path, js, (int)len, 0, NULL) == GR_ZOK);
            free(js);
        }
    }
    gr_kzk_topic_assignment_release(&a);
}

/* ---- kzk's wait for the connection (ZooKeeper unreachable longer than 10 waits) ---- */

static int down_waits; /* waits that still find ZooKeeper unreachable */
static int n_waits;
static int o_get(struct gr_zk_backend *b, const char *path, bool watch, char **data, int *len, struct gr_zstat *st) {
    (void)b, (void)path, (void)watch, (void)st;
    if (down_waits > 0) return GR_ZCONNECTIONLOSS;
    *data = gr_strdup("{\"version\":1,\"brokerid\":7,\"timestamp\":\"1\"}");
    *len = (int)strlen(*data);
    return GR_ZOK;
}
static int o_wait_connected(struct gr_zk_backend *b, int t) {
    (void)b, (void)t;
    n_waits++;
    if (down_waits > 0) {
        down_waits--;
        return GR_ZOPERATIONTIMEOUT;
    }
    return GR_ZOK;
}

/* Topic `topic`, one partition on brokers r0 and r1, its state (leader r0, the given leader
 * epoch) at version 0, through session s. */
static void put_topic_with_state(struct fsess *s, const char *topic, int32_t r0, int32_t r1, int32_t leader,
                                 int32_t leader_epoch) {
    struct gr_kzk_topic_assignment a = {0};
    a.n_partitions = 1;
    a.partitions = gr_calloc(1, sizeof *a.partitions);
    a.partitions[0].n_replicas = 2;
    a.partitions[0].replicas = gr_malloc(2 * sizeof(int32_t));
    a.partitions[0].replicas[0] = r0;
    a.partitions[0].replicas[1] = r1;
    size_t len;
    char *js = gr_kzk_topic_assignment_encode(&a, &len);
    char path[256];
    snprintf(path, sizeof path, "/brokers/topics/%s", topic);
    CHECK(gr_zkb_create(&s->base, path, js, (int)len, 0, NULL) == GR_ZOK);
    free(js);
    gr_kzk_topic_assignment_release(&a);
    int32_t isr[2] = {r0, r1};
    struct gr_kzk_leader_and_isr lai = {.leader = leader, .leader_epoch = leader_epoch, .controller_epoch = 1,
                                        .n_isr = 2, .isr = isr};
    js = gr_kzk_partition_state_encode(&lai, &len);
    snprintf(path, sizeof path, "/brokers/topics/%s/partitions", topic);
    CHECK(gr_zkb_create(&s->base, path, NULL, 0, 0, NULL) == GR_ZOK);
    snprintf(path, sizeof path, "/brokers/topics/%s/partitions/0", topic);
    CHECK(gr_zkb_create(&s->base, path, NULL, 0, 0, NULL) == GR_ZOK);
    snprintf(path, sizeof path, "/brokers/topics/%s/partitions/0/state", topic);
    CHECK(gr_zkb_create(&s->base, path, js, (int)len, 0, NULL) == GR_ZOK);
    free(js);
}

static int32_t g_recreate_leader;
static struct fsess *g_recreate_sess;
/* The topic "sx" deleted and created again by hand (a new czxid; its state again at version 0,
 * another leader epoch), right after the failover's stamp read answered, before its read of sx's
 * znode (get_hook). */
static void recreate_sx(void) {
    struct fsess *s = g_recreate_sess;
    static const char *const tree[] = {"/brokers/topics/sx/partitions/0/state", "/brokers/topics/sx/partitions/0",
                                       "/brokers/topics/sx/partitions", "/brokers/topics/sx"};
    for (int i = 0; i < 4; i++) CHECK(gr_zkb_delete(&s->base, tree[i], -1) == GR_ZOK);
    put_topic_with_state(s, "sx", 11, 12, g_recreate_leader, 5);
}

/* The earliest timer node n has pending, as a delay from VC.now (INT64_MAX: none). */
static int64_t next_timer_in(struct node *n) {
    int64_t best = INT64_MAX;
    for (int i = 0; i < VC.n; i++)
        if (VC.t[i].em == gr_controller_events(n->c) && VC.t[i].due - VC.now < best) best = VC.t[i].due - VC.now;
    return best;
}

/* A controller that resigns leaves its standby refresh for 5 s (docs/ARCHITECTURE.md "Warm
 * standby controller"): the next controller's failover runs right then, and a refresh of the empty
 * standby (every topic decoded, every state read) competed with it for ZooKeeper and the CPU
 * (issue 28 session 13: at 100k the new controller needed 82 ms for its first small reads instead of 3-12). */
static void test_standby_refresh_waits_after_resignation(void) {
    g_standby_refresh_ms = 10000;
    struct node nodes[2];
    memset(nodes, 0, sizeof nodes);
    node_start(&nodes[0], 11);
    node_start(&nodes[1], 12);
    settle(nodes, 2);
    fire_due(); /* the start-up refreshes */
    settle(nodes, 2);
    int32_t who = -1;
    CHECK(active_count(nodes, 2, &who) == 1);
    struct node *act = &nodes[who - 11], *other = &nodes[12 - who];
    CHECK(next_timer_in(other) == 10000); /* the standby's periodic refresh */
    /* a topic the standby holds with its state at version 0 */
    put_topic_with_state(act->s, "sx", 11, 12, 11, 0);
    settle(nodes, 2);
    VC.now += 10000;
    fire_due();
    settle(nodes, 2);
    /* the stamps are read first (inline here; on a thread in gregord, while the topics are read):
     * sx's proves the standby's state current, then sx is deleted and created again before its
     * znode is read -- the failover must read the new incarnation's state, not keep the old one
     * (a conditional write at version 0 would then have succeeded over it) */
    get_hook_path = "/brokers/topics/sx/partitions";
    get_hook = recreate_sx;
    g_recreate_sess = other->s;
    g_recreate_leader = other->id;
    VC.now += 1;
    fsess_expire(act->s); /* it resigns; the other takes over */
    settle(nodes, 2);
    CHECK(!gr_controller_is_active(act->c));
    CHECK(gr_controller_is_active(other->c));
    CHECK(get_hook == NULL);
    struct gr_ctrl_partition *sx0 = gr_ctrl_ctx_partition(gr_controller_context(other->c), "sx", 0);
    CHECK(sx0 && sx0->has_state && sx0->lai.leader_epoch >= 5);
    CHECK(next_timer_in(act) == 5000); /* not at once: STANDBY_AFTER_RESIGN_MS */
    /* then it refreshes, and keeps refreshing every period */
    VC.now += 5000;
    fire_due();
    settle(nodes, 2);
    CHECK(next_timer_in(act) == 10000);
    for (int i = 0; i < 2; i++) node_stop(&nodes[i]);
    v_free(&VC.base);
    g_standby_refresh_ms = 0;
}

/* ---- the deferred candidacy (controller.c defer_candidacy) ---- */

/* The deferred-candidacy Reelect timers node n has pending. */
static int pending_reelects(struct node *n) {
    int k = 0;
    for (int i = 0; i < VC.n; i++) k += VC.t[i].em == gr_controller_events(n->c) && VC.t[i].ev->type == GR_EV_REELECT;
    return k;
}

/* Puts the events of node n's due deferred-candidacy timers only (its standby refreshes stay
 * pending: its standby stays empty). */
static void fire_due_reelects(struct node *n) {
    for (int i = 0; i < VC.n;) {
        if (VC.t[i].due <= VC.now && VC.t[i].em == gr_controller_events(n->c) && VC.t[i].ev->type == GR_EV_REELECT) {
            gr_ctrl_events_put(VC.t[i].em, VC.t[i].ev);
            VC.t[i] = VC.t[--VC.n];
        } else {
            i++;
        }
    }
}

/* Delivers node n's watches and processes its events (only n's) until nothing moves. */
static void run_node(struct node *n) {
    for (;;) {
        int moved = pump(n->s);
        while (gr_ctrl_events_process_one(gr_controller_events(n->c))) moved++;
        if (!moved) return;
    }
}

static void put_controller_znode(struct node *via, int32_t id) {
    char js[128];
    snprintf(js, sizeof js, "{\"version\":1,\"brokerid\":%d,\"timestamp\":\"1\"}", id);
    CHECK(gr_zkb_create(&via->s->base, "/controller", js, (int)strlen(js), 0, NULL) == GR_ZOK);
}

/* A deferred candidacy whose Reelect is already queued when it is superseded does not run for
 * controller: not after an Expire, before the new session's RegisterBrokerAndReelect registered
 * the broker (Expire pre-empts every pending event), and not behind a later deferral, whose timer
 * stays tracked (the stale one cleared its id: the shutdown then left it armed, to fire on a freed
 * event manager in gregord). Broker 22 is cold (no standby refresh has run); 21's event thread is
 * busy (its events are never processed here). */
static void test_deferred_candidacy_superseded(void) {
    g_standby_refresh_ms = 10000;
    struct node nodes[2];
    memset(nodes, 0, sizeof nodes);
    node_start(&nodes[0], 21);
    node_start(&nodes[1], 22);
    settle(nodes, 2);
    int32_t who = -1;
    CHECK(active_count(nodes, 2, &who) == 1 && who == 21);
    struct node *b = &nodes[1];
    /* /controller deleted by hand: 22 defers */
    CHECK(gr_zkb_delete(&nodes[0].s->base, "/controller", -1) == GR_ZOK);
    run_node(b);
    CHECK(!gr_controller_is_active(b->c) && zk_controller(b) == -1 && pending_reelects(b) == 1);
    /* 22's session expires; its deferred Reelect fires before the new session's
     * RegisterBrokerAndReelect is queued */
    fsess_expire(b->s);
    VC.now += 500;
    fire_due_reelects(b);
    fsess_renew(b->s);
    run_node(b);
    CHECK(!gr_controller_is_active(b->c)); /* the old candidacy did not elect it unregistered */
    CHECK(zk_controller(b) == -1 && pending_reelects(b) == 1); /* the new session's own deferral */
    /* 21 is named by hand and 22 sees it; then /controller is deleted again, and 22's deferred
     * Reelect fires behind that deletion's Reelect (which defers again) */
    put_controller_znode(&nodes[0], 21);
    run_node(b);
    CHECK(gr_controller_active_id(b->c) == 21);
    CHECK(gr_zkb_delete(&nodes[0].s->base, "/controller", -1) == GR_ZOK);
    pump(b->s);
    VC.now += 500;
    fire_due_reelects(b);
    run_node(b);
    CHECK(!gr_controller_is_active(b->c) && zk_controller(b) == -1);
    CHECK(pending_reelects(b) == 1);
    /* the later deferral runs for controller */
    VC.now += 500;
    fire_due_reelects(b);
    run_node(b);
    CHECK(gr_controller_is_active(b->c) && zk_controller(b) == 22);
    /* /controller deleted again, 22 resigns and defers; its shutdown cancels the timer */
    CHECK(gr_zkb_delete(&nodes[0].s->base, "/controller", -1) == GR_ZOK);
    run_node(b);
    CHECK(!gr_controller_is_active(b->c) && pending_reelects(b) == 1);
    gr_controller_shutdown(b->c);
    CHECK(pending_reelects(b) == 0);
    for (int i = 0; i < 2; i++) node_stop(&nodes[i]);
    v_free(&VC.base);
    g_standby_refresh_ms = 0;
}

/* The sessions of the controller (31) and of broker 32 expire together (ZooKeeper unreachable
 * from both past the session timeout; 33 kept its session, its event thread is busy): 32, not the
 * controller, still holds its standby (its Expire resigned nothing it had moved) and runs for
 * controller at once in its new session. (With its standby counted empty after the Expire, it
 * deferred like the cold 31, and the two raced.) */
static void test_warm_broker_elects_at_once_after_expiry(void) {
    g_standby_refresh_ms = 10000;
    struct node nodes[3];
    memset(nodes, 0, sizeof nodes);
    node_start(&nodes[0], 31);
    node_start(&nodes[1], 32);
    node_start(&nodes[2], 33);
    settle(nodes, 3);
    fire_due(); /* the start-up refreshes */
    settle(nodes, 3);
    int32_t who = -1;
    CHECK(active_count(nodes, 3, &who) == 1 && who == 31);
    fsess_expire(nodes[0].s);
    fsess_expire(nodes[1].s);
    fsess_renew(nodes[0].s);
    fsess_renew(nodes[1].s);
    run_node(&nodes[1]);
    CHECK(gr_controller_is_active(nodes[1].c) && zk_controller(&nodes[1]) == 32);
    CHECK(pending_reelects(&nodes[1]) == 0);
    settle(nodes, 3);
    CHECK(active_count(nodes, 3, &who) == 1 && who == 32);
    for (int i = 0; i < 3; i++) node_stop(&nodes[i]);
    v_free(&VC.base);
    g_standby_refresh_ms = 0;
}

/* A call waits as long as the session may live (the old kzk gave up after 10 waits and the
 * controller dropped the event, its watch never re-armed); after gr_kzk_stop_waiting (shutdown)
 * a call fails at once instead. */
static void test_kzk_waits_for_connection(void) {
    static const struct gr_zk_backend_ops ops = {.get = o_get, .wait_connected = o_wait_connected};
    struct gr_zk_backend b = {.ops = &ops, .session_timeout_ms = 6000};
    struct gr_kzk *k = gr_kzk_new(&b);
    int32_t id = -1;
    down_waits = 25;
    n_waits = 0;
    CHECK(gr_kzk_get_controller_id(k, false, &id) == 0 && id == 7);
    CHECK(n_waits == 26);
    gr_kzk_stop_waiting(k);
    down_waits = 25;
    n_waits = 0;
    CHECK(gr_kzk_get_controller_id(k, false, &id) != 0);
    CHECK(n_waits <= 1);
    gr_kzk_free(k);
}

/* reclaim_controller's delete of a /controller naming this broker must not delete a claim another
 * broker won meanwhile: between its read of /controller (naming it, at version 0 as every znode
 * an election creates) and its delete, the znode goes (its session expired and the backend is on
 * a new one, or the read came from a lagging server) and broker 2 wins the next epoch, creating
 * /controller at version 0 again. A delete conditional on the version alone removes broker 2's
 * claim (an election for nothing); conditional on /controller_epoch too it is refused, as every
 * election moves that. */
static struct fsess *aba_s1;
static struct gr_kzk *aba_k2;
static void aba_elect_other(void) {
    CHECK(gr_zkb_delete(&aba_s1->base, "/controller", -1) == GR_ZOK);
    int32_t e = -1, v = -1;
    CHECK(gr_kzk_register_controller_and_increment_epoch(aba_k2, 2, &e, &v) == 0 && e == 2);
}

static void test_delete_if_named_keeps_a_new_claim(void) {
    struct gr_zk_watches *w1 = gr_zk_watches_new(), *w2 = gr_zk_watches_new();
    aba_s1 = fsess_new(&Z, w1);
    struct fsess *s2 = fsess_new(&Z, w2);
    struct gr_kzk *k1 = gr_kzk_new(&aba_s1->base);
    aba_k2 = gr_kzk_new(&s2->base);
    int32_t e = -1, v = -1, id = -1;
    CHECK(gr_kzk_register_controller_and_increment_epoch(k1, 1, &e, &v) == 0 && e == 1);
    get_hook_path = "/controller";
    get_hook = aba_elect_other;
    CHECK(gr_kzk_delete_controller_if_named(k1, 1) == 0);
    CHECK(get_hook == NULL); /* the race ran */
    CHECK(gr_kzk_get_controller_id(k1, false, &id) == 0);
    CHECK(id == 2); /* broker 2's claim is still there */
    /* with nothing in between, the delete goes through */
    CHECK(gr_kzk_delete_controller_if_named(aba_k2, 2) == 0);
    CHECK(gr_kzk_get_controller_id(k1, false, &id) == 0 && id == -1);
    CHECK(gr_zkb_delete(&aba_s1->base, "/controller_epoch", -1) == GR_ZOK); /* main starts at epoch 0 */
    gr_kzk_free(k1);
    gr_kzk_free(aba_k2);
    aba_k2 = NULL;
    gr_zkb_destroy(&aba_s1->base);
    gr_zkb_destroy(&s2->base);
    aba_s1 = NULL;
    gr_zk_watches_free(w1);
    gr_zk_watches_free(w2);
}

int main(void) {
    gr_log_set_level(getenv("TEST_VERBOSE") ? GR_LOG_DEBUG : GR_LOG_ERROR);
    Z.nodes = gr_calloc(1, sizeof *Z.nodes);
    Z.nodes[0].path = gr_strdup("/");
    Z.nodes[0].data = gr_strdup("");
    Z.n = 1;
    test_kzk_waits_for_connection();
    test_delete_if_named_keeps_a_new_claim();

    struct node nodes[3];
    memset(nodes, 0, sizeof nodes);
    /* a topic exists before any controller */
    node_start(&nodes[0], 1);
    create_topic(&nodes[0], "t1", 4, true);
    node_start(&nodes[1], 2);

    /* 1. election: exactly one controller, epoch 1, context loaded */
    settle(nodes, 2);
    int32_t who = -1;
    CHECK(active_count(nodes, 2, &who) == 1);
    CHECK(zk_controller(&nodes[0]) == who);
    CHECK(zk_epoch(&nodes[0]) == 1);
    struct node *act = &nodes[who - 1], *other = &nodes[2 - who];
    CHECK(gr_controller_epoch(act->c) == 1);
    CHECK(gr_controller_active_id(other->c) == who);
    struct gr_ctrl_context *ctx = gr_controller_context(act->c);
    CHECK(ctx->n_brokers == 2);
    CHECK(gr_ctrl_ctx_topic_count(ctx) == 1 && gr_ctrl_ctx_partition_count(ctx) == 4);
    struct gr_ctrl_partition *p0 = gr_ctrl_ctx_partition(ctx, "t1", 0);
    CHECK(p0 && p0->has_state && p0->lai.leader == 1 && p0->lai.n_isr == 2);
    CHECK(gauge(act, "ActiveControllerCount") == 1 && gauge(other, "ActiveControllerCount") == 0);
    CHECK(gauge(act, "GlobalTopicCount") == 1 && gauge(act, "GlobalPartitionCount") == 4);
    CHECK(gauge(other, "GlobalTopicCount") == 0);
    CHECK(gauge(act, "OfflinePartitionsCount") == 0);
    CHECK(VC.n == 1); /* the auto-rebalance timer */

    /* 2. a new topic and a third broker reach the context through watches */
    create_topic(&nodes[0], "t2", 2, false);
    node_start(&nodes[2], 3);
    settle(nodes, 3);
    CHECK(active_count(nodes, 3, NULL) == 1);
    CHECK(gr_ctrl_ctx_topic_count(ctx) == 2 && gr_ctrl_ctx_partition_count(ctx) == 6);
    CHECK(ctx->n_brokers == 3 && gr_ctrl_ctx_is_live(ctx, 3));
    CHECK(gauge(act, "GlobalTopicCount") == 2);

    /* 2b. topics created back to back (within the 100 ms TopicChange pace of t2's) wait for the
     * pacing timer and are then handled together, in one batch */
    CHECK(VC.n == 1);
    create_topic(&nodes[0], "p1", 2, false);
    settle(nodes, 3);
    create_topic(&nodes[0], "p2", 2, false);
    create_topic(&nodes[0], "p3", 2, false);
    settle(nodes, 3);
    CHECK(gr_ctrl_ctx_topic_count(ctx) == 2 && VC.n == 2); /* deferred: one timer */
    VC.now += 100;
    fire_due();
    settle(nodes, 3);
    CHECK(gr_ctrl_ctx_topic_count(ctx) == 5 && VC.n == 1);
    struct gr_ctrl_partition *pp = gr_ctrl_ctx_partition(ctx, "p3", 1);
    CHECK(pp && pp->has_state && pp->state == GR_PS_ONLINE);
    /* a lone creation after the pace has passed is handled at once */
    VC.now += 1000;
    create_topic(&nodes[0], "p4", 1, false);
    settle(nodes, 3);
    CHECK(gr_ctrl_ctx_topic_count(ctx) == 6 && VC.n == 1);
    CHECK(gauge(act, "GlobalTopicCount") == 6);

    /* 3. deleting /controller: re-election, epoch 2, still exactly one */
    CHECK(gr_zkb_delete(&nodes[0].s->base, "/controller", -1) == GR_ZOK);
    settle(nodes, 3);
    CHECK(active_count(nodes, 3, &who) == 1);
    CHECK(zk_epoch(&nodes[0]) == 2);
    CHECK(zk_controller(&nodes[0]) == who);
    act = &nodes[who - 1];
    ctx = gr_controller_context(act->c);
    CHECK(ctx->n_brokers == 3 && gr_ctrl_ctx_topic_count(ctx) == 6);

    /* 4. the controller's session expires: it resigns; on the new session it re-registers with
     * a new broker epoch; someone (possibly itself) is elected with epoch 3 */
    int64_t old_epoch = gr_controller_broker_epoch(act->c);
    fsess_expire(act->s);
    settle(nodes, 3); /* Expire processed, others re-elect */
    CHECK(!gr_controller_is_active(act->c));
    CHECK(gauge(act, "ActiveControllerCount") == 0 && gauge(act, "GlobalTopicCount") == 0);
    fsess_renew(act->s);
    settle(nodes, 3);
    CHECK(active_count(nodes, 3, &who) == 1);
    CHECK(zk_epoch(&nodes[0]) == 3);
    CHECK(gr_controller_broker_epoch(act->c) > old_epoch);
    struct gr_zstat st;
    char bpath[64];
    snprintf(bpath, sizeof bpath, "/brokers/ids/%d", act->id);
    CHECK(gr_zkb_exists(&nodes[0].s->base, bpath, false, &st) == GR_ZOK && st.czxid == gr_controller_broker_epoch(act->c));
    act = &nodes[who - 1];
    ctx = gr_controller_context(act->c);
    CHECK(ctx->n_brokers == 3);

    /* 5. fencing: bump /controller_epoch behind the controller's back (a hand edit: no election
     * wrote it); its guarded delete of an ISR notification is refused (controller moved). Kafka
     * 2.7 would keep it active, every write failing, until /controller changes; here maybeResign
     * finds /controller still naming it but its election no longer the last one (note_controller):
     * it resigns, deletes /controller and elects again, so a real election moves past the bump and
     * the new controller cleans up */
    char *d = NULL;
    int dl = 0;
    CHECK(gr_zkb_get(&nodes[0].s->base, "/controller_epoch", false, &d, &dl, &st) == GR_ZOK);
    free(d);
    CHECK(gr_zkb_set(&nodes[0].s->base, "/controller_epoch", "9", 1, st.version, NULL) == GR_ZOK);
    struct gr_kzk_tp tp = {.topic = (char *)"t1", .partition = 0};
    CHECK(gr_kzk_create_isr_change_notification(nodes[0].k, &tp, 1) == 0);
    settle(nodes, 3);
    CHECK(active_count(nodes, 3, &who) == 1);
    CHECK(zk_epoch(&nodes[0]) == 10);
    CHECK(gr_controller_epoch(nodes[who - 1].c) == 10);
    struct gr_zstrings kids = {0};
    CHECK(gr_zkb_get_children(&nodes[0].s->base, "/isr_change_notification", false, &kids) == GR_ZOK);
    CHECK(kids.count == 0);
    gr_zstrings_free(&kids);

    /* 6. a broker goes away (session closed): the controller drops it */
    act = &nodes[who - 1];
    struct node *victim = &nodes[who == 3 ? 0 : 2];
    int32_t victim_id = victim->id;
    node_stop(victim);
    victim->c = NULL;
    settle(nodes, 3);
    ctx = gr_controller_context(act->c);
    CHECK(ctx->n_brokers == 2 && !gr_ctrl_ctx_is_live(ctx, victim_id));
    check_gauges(act);

    /* 7. clean shutdown of the controller deletes /controller; a survivor takes over */
    node_stop(act);
    act->c = NULL;
    settle(nodes, 3);
    CHECK(active_count(nodes, 3, &who) == 1);
    CHECK(zk_epoch(&nodes[who - 1]) == 11);

    /* 8. a broker's registration changes right as the controller arms its watch (failover, then
     * a broker start-up): the BrokerModifications handler is registered first, so the change is
     * seen (before the fix the watch fired with no handler and the change was lost for good) */
    act = &nodes[who - 1];
    struct node *other2 = NULL;
    for (int i = 0; i < 3; i++)
        if (&nodes[i] != act && !nodes[i].c) other2 = &nodes[i];
    node_start(other2, (int32_t)(other2 - nodes) + 1);
    settle(nodes, 3);
    ctx = gr_controller_context(act->c);
    CHECK(ctx->n_brokers == 2);
    char rp[64];
    snprintf(rp, sizeof rp, "/brokers/ids/%d", other2->id);
    race_path = rp;
    race_port = 7777;
    node_stop(act); /* failover on other2: it arms the data watch of every live broker */
    act->c = NULL;
    settle(nodes, 3);
    CHECK(active_count(nodes, 3, &who) == 1 && who == other2->id && race_path == NULL);
    ctx = gr_controller_context(other2->c);
    const struct gr_ctrl_broker *br = gr_ctrl_ctx_broker(ctx, other2->id);
    CHECK(br && br->info.endpoints[0].port == 7777);
    /* a broker start-up: hook_brokers_started arms the new broker's watch */
    int32_t back_id = (int32_t)(act - nodes) + 1;
    snprintf(rp, sizeof rp, "/brokers/ids/%d", back_id);
    race_path = rp;
    race_port = 8888;
    node_start(act, back_id);
    settle(nodes, 3);
    CHECK(race_path == NULL);
    br = gr_ctrl_ctx_broker(ctx, back_id);
    CHECK(br && br->info.endpoints[0].port == 8888);

    /* 9. /controller names a broker that never ran failover for it (what a failed guarded delete
     * in trigger_controller_move leaves behind; here a hand edit): that broker must not count
     * itself active with an empty context -- it deletes the claim and a real election follows */
    who = -1;
    CHECK(active_count(nodes, 3, &who) == 1);
    struct node *idle = NULL;
    for (int i = 0; i < 3; i++)
        if (nodes[i].c && nodes[i].id != who) idle = &nodes[i];
    int32_t epoch_before = zk_epoch(idle);
    size_t clen = 0;
    char *cdata = gr_kzk_controller_encode(idle->id, 0, true, &clen);
    CHECK(gr_zkb_set(&idle->s->base, "/controller", cdata, (int)clen, -1, NULL) == GR_ZOK);
    free(cdata);
    settle(nodes, 3);
    CHECK(active_count(nodes, 3, &who) == 1);
    CHECK(zk_epoch(idle) > epoch_before); /* a real election */
    for (int i = 0; i < 3; i++) {
        if (!nodes[i].c) continue;
        bool act_i = gr_controller_is_active(nodes[i].c);
        CHECK(gauge(&nodes[i], "ActiveControllerCount") == (act_i ? 1 : 0));
        if (act_i) CHECK(gr_controller_context(nodes[i].c)->n_brokers == 2 && gr_controller_epoch(nodes[i].c) == zk_epoch(idle));
    }

    /* 10. an auto-rebalance timer of an earlier term fires but its event waits behind the
     * ControllerChange that ends that term; the next term schedules its own timer. The old event
     * must not take over the new term's handle (two timer chains, one never cancelled). */
    for (int i = 0; i < 3; i++)
        if (nodes[i].c && !gr_controller_is_active(nodes[i].c)) {
            node_stop(&nodes[i]);
            nodes[i].c = NULL;
        }
    settle(nodes, 3);
    CHECK(active_count(nodes, 3, &who) == 1);
    act = &nodes[who - 1];
    CHECK(VC.n == 1);
    struct gr_ctrl_event *old_tick = VC.t[0].ev; /* the timer fires... */
    VC.n = 0;
    CHECK(gr_zkb_delete(&act->s->base, "/controller", -1) == GR_ZOK);
    pump(act->s); /* ...after the ControllerChange was queued */
    gr_ctrl_events_put(gr_controller_events(act->c), old_tick);
    settle(nodes, 3);
    CHECK(active_count(nodes, 3, &who) == 1 && who == act->id);
    CHECK(VC.n == 1); /* one chain: the new term's timer */
    int64_t now0 = VC.now;
    VC.now = VC.t[0].due; /* the new term's timer still works */
    gr_ctrl_events_put(VC.t[0].em, VC.t[0].ev);
    VC.n = 0;
    settle(nodes, 3);
    CHECK(VC.n == 1 && VC.t[0].due > now0);
    check_gauges(act);

    /* 11. PartitionModifications adds only the new partitions (Kafka's behaviour): a rewrite of
     * /brokers/topics/t1 that adds partition 4 and also reorders partition 0 changes nothing of
     * partition 0 in the context (before: the topic was rebuilt from ZooKeeper and replica states
     * were re-attached by position) */
    ctx = gr_controller_context(act->c);
    struct gr_ctrl_partition *q0 = gr_ctrl_ctx_partition(ctx, "t1", 0);
    CHECK(q0 && q0->n_replicas == 2 && gr_ctrl_ctx_partition(ctx, "t1", 4) == NULL);
    int32_t r0[2] = {q0->replicas[0], q0->replicas[1]};
    const char *t1name = "t1";
    struct gr_kzk_topic_assignment ta;
    memset(&ta, 0, sizeof ta);
    CHECK(gr_kzk_get_topic_assignments(act->k, &t1name, 1, false, &ta) == 0 && ta.rc == 0 && ta.n_partitions == 4);
    ta.partitions = gr_realloc(ta.partitions, 5 * sizeof *ta.partitions);
    memset(&ta.partitions[4], 0, sizeof ta.partitions[4]);
    ta.partitions[4].partition = 4;
    ta.partitions[4].n_replicas = 1;
    ta.partitions[4].replicas = gr_malloc(sizeof(int32_t));
    ta.partitions[4].replicas[0] = act->id;
    ta.n_partitions = 5;
    for (int i = 0; i < 5; i++)
        if (ta.partitions[i].partition == 0) {
            ta.partitions[i].replicas[0] = r0[1];
            ta.partitions[i].replicas[1] = r0[0];
        }
    size_t tlen = 0;
    char *tjs = gr_kzk_topic_assignment_encode(&ta, &tlen);
    CHECK(gr_zkb_set(&act->s->base, "/brokers/topics/t1", tjs, (int)tlen, -1, NULL) == GR_ZOK);
    free(tjs);
    gr_kzk_topic_assignment_release(&ta);
    settle(nodes, 3);
    q0 = gr_ctrl_ctx_partition(ctx, "t1", 0);
    CHECK(q0 && q0->replicas[0] == r0[0] && q0->replicas[1] == r0[1]);
    struct gr_ctrl_partition *q4 = gr_ctrl_ctx_partition(ctx, "t1", 4);
    CHECK(q4 && q4->has_state && q4->lai.leader == act->id);
    CHECK(gr_ctrl_ctx_partition_count(ctx) == 5 + 2 + 7); /* t1, t2 and p1-p4 (2b) */
    check_gauges(act);

    for (int i = 0; i < 3; i++)
        if (nodes[i].c) node_stop(&nodes[i]);
    v_free(&VC.base);
    test_standby_refresh_waits_after_resignation();
    test_deferred_candidacy_superseded();
    test_warm_broker_elects_at_once_after_expiry();
    free_nodes(Z.nodes, Z.n);
    for (int i = 0; i < Z.nw; i++) free(Z.w[i].path);
    free(Z.w);
    if (test_failures) {
        fprintf(stderr, "test_controller: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_controller: ok\n");
    return 0;
}
