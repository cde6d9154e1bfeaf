/* An in-memory model of a ZooKeeper server and its clients, implementing the gr_zk_backend
 * vtable (zk/backend.h) so kzk.c and the controller run on it unchanged.
 *
 * Modelled (ZooKeeper 3.x semantics):
 *  - one tree of znodes with data, data version, cversion, czxid/mzxid/pzxid from one global
 *    zxid counter (a multi is one transaction: one zxid), ctime/mtime from the virtual clock;
 *  - ephemerals owned by sessions, NOCHILDRENFOREPHEMERALS, sequential names (10-digit counter
 *    from the parent's cversion), NONODE / NODEEXISTS / BADVERSION / NOTEMPTY;
 *  - multi: all-or-nothing, per-op results as ZooKeeper reports them (ops before the failing
 *    one GR_ZOK, the failing one its code, later ones GR_ZRUNTIMEINCONSISTENCY);
 *  - sessions with one-shot data and child watches kept server-side (exists on a missing node
 *    sets a data watch that fires CREATED); a session's watches die with it;
 *  - clients (handles): CONNECTED, DISCONNECTED (calls fail with CONNECTIONLOSS, the session
 *    lives on; watches fired meanwhile are delivered after reconnecting), EXPIRED (the session
 *    is dead; calls fail with SESSIONEXPIRED until zm_new_session gives the handle a fresh
 *    session and NEW_SESSION), CLOSED (crashed or destroyed: GR_ZCLOSING).
 *
 * Notifications are NOT delivered inside the call that caused them: every watch or session
 * event is queued per client, in order, and the driver delivers it later (zm_deliver_one), so
 * faults can interleave. Like a real server, which sends notifications on the connection
 * before later replies, pending events of a connected client are delivered at the start of its
 * next call (zm_set_flush_on_call, default on), so a client never reads state newer than a
 * notification it has not seen.
 *
 * Single-threaded: the whole model, its clients and every callback run on the driver's thread.
 * (tests/fuzz/fuzz_locked_zkmodel.h makes it the ZooKeeper of one multi-threaded in-process
 * broker by taking one mutex around every call and delivering notifications from one thread.)
 * Callbacks (on_watch/on_session of a client) must not call the model back (backend.h rule 1).
 *
 * Not the unit tests' ZooKeeper: tests/support/memzk.{h,c} is a deliberately smaller,
 * synchronous table (no sessions, ephemerals or watches; direct writes and one scripted fault)
 * for tests/unit. This model is for the simulation, whose scheduler owns time, sessions and
 * notification delivery. memzk.h says precisely why the two are kept apart and where they
 * differ; a fix to the ZooKeeper semantics both model goes into both files.
 */
#ifndef GR_SIM_ZKMODEL_H
#define GR_SIM_ZKMODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "zk/backend.h"

struct zm;
struct zm_client;

/* Client handle states. */
enum zm_client_state { ZMC_CONNECTED = 1, ZMC_DISCONNECTED, ZMC_EXPIRED, ZMC_CLOSED };

/* Decision of the call_fault hook for one call of a connected client. */
enum zm_fault { ZM_FAULT_NONE = 0, ZM_FAULT_LOSS_BEFORE, ZM_FAULT_LOSS_AFTER };

/* One change inside a committed transaction (for invariant checks). Pointers are borrowed for
 * the duration of the on_commit call. */
struct zm_change {
    int op;                 /* GR_ZOP_CREATE, GR_ZOP_DELETE, GR_ZOP_SET */
    const char *path;
    const char *data;       /* new data (CREATE/SET), NUL-terminated; NULL for DELETE */
    int len;
    const char *old_data;   /* previous data (SET/DELETE), NUL-terminated; NULL for CREATE */
    int old_len;
    struct gr_zstat stat;   /* after the change (CREATE/SET) or before (DELETE) */
};
/* A committed transaction. `checks` are the CHECK ops of a multi (path + version). */
struct zm_txn {
    int64_t zxid;
    int64_t session;        /* session id of the writer (0 for session-close deletions) */
    bool is_multi;
    bool session_close;     /* deletions of a closed/expired session's ephemerals */
    int n_changes;
    const struct zm_change *changes;
    int n_checks;
    const struct gr_zop *checks;
};

struct zm_hooks {
    /* kzk waits for a DISCONNECTED client to reconnect (backend wait_connected). Return GR_ZOK
     * (the model reconnects it), GR_ZSESSIONEXPIRED (the model expires its session) or
     * GR_ZOPERATIONTIMEOUT (stays disconnected). NULL: reconnect. */
    int (*wait_connected)(void *arg, struct zm_client *c, int timeout_ms);
    /* Called before each call of a connected client: enum zm_fault (is_write: the call changes
     * state). NULL: no faults. */
    int (*call_fault)(void *arg, struct zm_client *c, bool is_write);
    /* Called after every committed write transaction. NULL: nothing. */
    void (*on_commit)(void *arg, const struct zm_txn *t);
    void *arg;
};

/* ---- the server ---- */

struct zm *zm_new(void);
/* Frees the model. Every client must have been destroyed first. */
void zm_free(struct zm *zm);
void zm_set_hooks(struct zm *zm, const struct zm_hooks *h);
void zm_set_flush_on_call(struct zm *zm, bool on);
/* Virtual time (ms) used for ctime/mtime and session deadlines. */
void zm_set_time(struct zm *zm, int64_t now_ms);
/* Expires every session whose deadline (disconnected or detached for longer than its timeout)
 * is <= now. Returns how many expired. */
int zm_tick(struct zm *zm);
/* Earliest session deadline, or INT64_MAX. */
int64_t zm_next_deadline(struct zm *zm);
int64_t zm_last_zxid(struct zm *zm);

/* ---- clients ---- */

/* A new client with a fresh, connected session (no CONNECTED event is queued: like
 * gr_zk_real_open, it returns connected). The backend's callbacks are fixed here. Free with
 * gr_zkb_destroy (closes the session: its ephemerals go at once). */
struct zm_client *zm_client_new(struct zm *zm, int session_timeout_ms, gr_zk_watch_fn on_watch,
                                gr_zk_session_fn on_session, void *cb_ctx);
struct gr_zk_backend *zm_backend(struct zm_client *c);
struct zm_client *zm_client_of(struct gr_zk_backend *b);
int zm_client_state(struct zm_client *c);
/* Current session id (0 if none). */
int64_t zm_client_session(struct zm_client *c);
/* A label for logs / the hooks. */
void zm_client_set_user(struct zm_client *c, void *user);
void *zm_client_user(struct zm_client *c);

/* Connection loss: CONNECTED -> DISCONNECTED, queues DISCONNECTED; the session's deadline
 * starts. No-op in other states. */
void zm_disconnect(struct zm_client *c);
/* DISCONNECTED -> CONNECTED, queues CONNECTED (if the session is still alive; otherwise the
 * client learns of the expiry: -> EXPIRED, queues EXPIRED). */
void zm_reconnect(struct zm_client *c);
/* EXPIRED (after its EXPIRED event was delivered) -> CONNECTED with a fresh session, queues
 * NEW_SESSION. Returns false if not applicable. */
bool zm_new_session(struct zm_client *c);
/* The client process dies: the handle stops working (GR_ZCLOSING), pending events are
 * dropped, its session lives on until its timeout (or close_session) unless close_now. The
 * handle must still be destroyed with gr_zkb_destroy. */
void zm_crash(struct zm_client *c, bool close_now);
/* Server-side expiry of a session by id (deletes its ephemerals, fires watches; its client, if
 * any, becomes EXPIRED and gets EXPIRED queued). Returns false if no such live session. */
bool zm_expire_session(struct zm *zm, int64_t session_id);

/* ---- notifications ---- */

/* Clients (in creation order) that have at least one deliverable event; returns the count,
 * fills out[] up to max. */
int zm_deliverable(struct zm *zm, struct zm_client **out, int max);
/* Delivers the oldest deliverable event of c. Returns true if one was delivered. */
bool zm_deliver_one(struct zm_client *c);
/* Number of queued (not necessarily deliverable) events of c / of everyone. */
int zm_pending(struct zm_client *c);
int zm_pending_total(struct zm *zm);
/* Whole-ensemble outage. zm_outage_begin: every server is down; every connected client becomes
 * DISCONNECTED (queued), nothing can be read or written, no session expires, reconnecting and
 * new sessions fail, a client destroyed or crashed meanwhile leaves its session behind (nobody can
 * close it). zm_outage_end: the ensemble is back and, as ZooKeeper's newly elected leader does,
 * gives every live session a fresh timeout: clients that reconnect within it keep their session. */
void zm_outage_begin(struct zm *zm);
void zm_outage_end(struct zm *zm);
bool zm_down(struct zm *zm);
/* True if c's EXPIRED event has been delivered and it has no session yet. */
bool zm_expired_delivered(struct zm_client *c);

/* ---- inspection (no watches, no sessions; borrowed pointers valid until the next write) ---- */

/* GR_ZOK with data (NUL-terminated, NULL for null data), len and stat, or GR_ZNONODE. */
int zm_peek(struct zm *zm, const char *path, const char **data, int *len, struct gr_zstat *stat);
/* Children names of path in creation order; returns the count or -1 if path is missing. names
 * may be NULL to count. */
int zm_peek_children(struct zm *zm, const char *path, const char ***names);
/* Writes a text dump of the tree into a malloc'd string (for failure reports). */
char *zm_dump(struct zm *zm);
/* Structural self-check (parent links, numChildren, hash). Returns 0 or describes the first
 * problem in buf. */
int zm_selfcheck(struct zm *zm, char *buf, int len);

/* Runs the model's own unit checks; returns the number of failures (printed to stderr). */
int zm_unit_checks(void);

#endif
