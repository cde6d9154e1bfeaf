/* A tiny in-memory ZooKeeper for unit tests: one flat table of znodes implementing the
 * gr_zk_backend vtable (zk/backend.h), so kzk.c and the controller's state machines run on it.
 *
 * Kept: data, data version, czxid/mzxid from one zxid counter, NONODE / NODEEXISTS /
 * BADVERSION / NOTEMPTY, a parent must exist, sequential names from ONE counter for the whole
 * tree (10 digits), multi all-or-nothing with per-op results as ZooKeeper reports them.
 * Not modelled: sessions (one fixed session id 1, never expires), ephemerals, watches (the
 * watch flag is ignored), cversion.
 *
 * Why there are two in-memory ZooKeepers (this one and tests/sim/zkmodel.{h,c}), on purpose:
 *  - memzk serves unit tests (tests/unit via tests/support/ctrl_fixture.c): a synchronous table
 *    a test can read and poke directly (z->v, memzk_create/set/delete bypassing the backend)
 *    and one scripted fault (bump_before_multi: another writer wins a guarded write). A test
 *    that arms a watch here gets no notification to deliver or ignore; nothing runs later.
 *  - zkmodel serves the simulation (tests/sim, gregor_sim): a ZooKeeper server with sessions,
 *    ephemerals, server-side one-shot watches whose notifications the simulation's scheduler
 *    delivers later, connection loss / expiry, fault hooks on every call and a commit log for
 *    the invariants. Using it in unit tests would make every test drive sessions and queued
 *    notifications it does not care about.
 * Both answer data, versions, NONODE / NODEEXISTS / BADVERSION / NOTEMPTY and multi per-op
 * results as ZooKeeper does; where they differ, memzk is the simplified one (sequential names
 * from one counter for the whole tree, not the parent's cversion; no ephemerals, watches or
 * sessions). A unit test that needs those uses real ZooKeeper (GREGOR_TEST_ZK, see
 * test_zk_real.c) or belongs in the simulation. A fix to the ZooKeeper semantics both model
 * goes into both files.
 *
 * Single-threaded: every call runs on the test's thread. */
#ifndef GR_TESTS_SUPPORT_MEMZK_H
#define GR_TESTS_SUPPORT_MEMZK_H

#include <stdbool.h>
#include <stdint.h>

#include "zk/backend.h"

struct memzk_node {
    char *path;
    char *data; /* len bytes + a NUL */
    int len;
    struct gr_zstat st;
};

struct memzk {
    struct gr_zk_backend base; /* first: &z->base is the backend handed to gr_kzk_new */
    struct memzk_node *v;
    int n, cap;
    int64_t zxid;
    int seq;
    /* Fault: before the next multi, this node's version is bumped (as if another writer got
     * there first) and the string is freed. Set with gr_strdup; NULL: no fault. */
    char *bump_before_multi;
    /* With bump_before_multi: that many multis run first, untouched (0: the next one). */
    int bump_skip;
    /* Fault: called once before the next multi runs (then cleared): another writer's changes,
     * e.g. a topic deleted and created again between a read and the write. NULL: none. */
    void (*before_multi_fn)(struct memzk *z, void *arg);
    void *before_multi_arg;
    /* Fault: every read (get) of this path times out (GR_ZOPERATIONTIMEOUT: a live connection
     * that does not answer in time). Set with gr_strdup; NULL: none. */
    char *timeout_get;
    /* Counters for tests: multis run (one per multi, also inside multi_many), multi_many calls
     * and the most multis one multi_many call carried. */
    int n_multi;
    int n_multi_many;
    int max_multi_many;
};

/* An empty tree (not even "/brokers") whose backend reports session_timeout_ms. Free it with
 * gr_zkb_destroy(&z->base) or memzk_free (which is what the backend's destroy does). */
struct memzk *memzk_new(int session_timeout_ms);
void memzk_free(struct memzk *z);

/* Direct writes that bypass the backend (for fixtures and for "another writer" faults); the
 * same results as the backend calls (GR_ZOK or a GR_Z* code). created (may be NULL) gets a
 * malloc'd copy of the created path. */
int memzk_create(struct memzk *z, const char *path, const void *data, int len, int flags, char **created);
int memzk_delete(struct memzk *z, const char *path, int version);
int memzk_set(struct memzk *z, const char *path, const void *data, int len, int version, struct gr_zstat *st);
/* Index of path in z->v, or -1. */
int memzk_find(struct memzk *z, const char *path);

#endif
