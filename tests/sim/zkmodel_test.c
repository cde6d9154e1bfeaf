/* Unit checks of the in-memory ZooKeeper model (run by `gregor_sim --selftest` and before
 * every simulation run): data/versions/stat, sequential and ephemeral nodes, multi atomicity
 * and per-op results, one-shot watches, disconnects, expiry, new sessions, close_session, and
 * kzk's broker registration and controller election running on top of it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "zk/kzk.h"
#include "zkmodel.h"
#include "../support/check.h"

/* The counter behind CHECK (tests/support/check.h). The simulation is not linked with
 * tests/support, so it is defined here rather than by check.c. */
int test_failures;

/* A recorder for callbacks. */
struct rec {
    int n;
    int type[64];
    char path[64][128];
    int nsess;
    int sess[32];
};

static void rec_watch(void *ctx, int type, const char *path) {
    struct rec *r = ctx;
    if (r->n < 64) {
        r->type[r->n] = type;
        snprintf(r->path[r->n], sizeof r->path[0], "%s", path);
    }
    r->n++;
}

static void rec_session(void *ctx, int state) {
    struct rec *r = ctx;
    if (r->nsess < 32) r->sess[r->nsess] = state;
    r->nsess++;
}

static void drain(struct zm *zm) {
    struct zm_client *cs[16];
    for (;;) {
        int n = zm_deliverable(zm, cs, 16);
        if (n == 0) break;
        for (int i = 0; i < n && i < 16; i++) zm_deliver_one(cs[i]);
    }
}

static void basic_ops(void) {
    struct zm *zm = zm_new();
    struct rec r = {0};
    struct zm_client *c = zm_client_new(zm, 6000, rec_watch, rec_session, &r);
    struct gr_zk_backend *b = zm_backend(c);
    zm_set_time(zm, 1000);

    CHECK(gr_zkb_create(b, "/a", "x", 1, 0, NULL) == GR_ZOK);
    CHECK(gr_zkb_create(b, "/a", "x", 1, 0, NULL) == GR_ZNODEEXISTS);
    CHECK(gr_zkb_create(b, "/b/c", NULL, 0, 0, NULL) == GR_ZNONODE);
    CHECK(gr_zkb_create(b, "bad", NULL, 0, 0, NULL) == GR_ZBADARGUMENTS);
    CHECK(gr_zkb_create(b, "/a/", NULL, 0, 0, NULL) == GR_ZBADARGUMENTS);
    char *d = NULL;
    int len = -1;
    struct gr_zstat st;
    CHECK(gr_zkb_get(b, "/a", false, &d, &len, &st) == GR_ZOK);
    CHECK(len == 1 && d && d[0] == 'x' && d[1] == 0);
    CHECK(st.version == 0 && st.czxid == st.mzxid && st.ctime == 1000);
    int64_t czxid = st.czxid;
    free(d);
    CHECK(gr_zkb_set(b, "/a", "yy", 2, 1, NULL) == GR_ZBADVERSION);
    CHECK(gr_zkb_set(b, "/a", "yy", 2, 0, &st) == GR_ZOK);
    CHECK(st.version == 1 && st.czxid == czxid && st.mzxid > czxid && st.dataLength == 2);
    CHECK(gr_zkb_set(b, "/a", "zz", 2, GR_ZANY_VERSION, &st) == GR_ZOK && st.version == 2);
    /* null data reads as len 0 with a buffer */
    CHECK(gr_zkb_create(b, "/n", NULL, 0, 0, NULL) == GR_ZOK);
    CHECK(gr_zkb_get(b, "/n", false, &d, &len, NULL) == GR_ZOK && d && len == 0);
    free(d);
    /* children and cversion */
    CHECK(gr_zkb_create(b, "/a/k1", NULL, 0, 0, NULL) == GR_ZOK);
    CHECK(gr_zkb_create(b, "/a/k2", NULL, 0, 0, NULL) == GR_ZOK);
    CHECK(gr_zkb_delete(b, "/a", GR_ZANY_VERSION) == GR_ZNOTEMPTY);
    CHECK(gr_zkb_exists(b, "/a", false, &st) == GR_ZOK && st.numChildren == 2 && st.cversion == 2);
    struct gr_zstrings ch;
    CHECK(gr_zkb_get_children(b, "/a", false, &ch) == GR_ZOK && ch.count == 2);
    CHECK(ch.count == 2 && strcmp(ch.names[0], "k1") == 0 && strcmp(ch.names[1], "k2") == 0);
    gr_zstrings_free(&ch);
    CHECK(gr_zkb_delete(b, "/a/k1", 5) == GR_ZBADVERSION);
    CHECK(gr_zkb_delete(b, "/a/k1", 0) == GR_ZOK);
    CHECK(gr_zkb_exists(b, "/a", false, &st) == GR_ZOK && st.numChildren == 1 && st.cversion == 3);
    /* sequential: counter from the parent's cversion */
    char *cp = NULL;
    CHECK(gr_zkb_create(b, "/a/s_", NULL, 0, GR_ZSEQUENCE, &cp) == GR_ZOK);
    CHECK(cp && strcmp(cp, "/a/s_0000000003") == 0);
    free(cp);
    CHECK(gr_zkb_create(b, "/a/s_", NULL, 0, GR_ZSEQUENCE, &cp) == GR_ZOK);
    CHECK(cp && strcmp(cp, "/a/s_0000000004") == 0);
    free(cp);
    /* ephemerals */
    CHECK(gr_zkb_create(b, "/e", "1", 1, GR_ZEPHEMERAL, NULL) == GR_ZOK);
    CHECK(gr_zkb_create(b, "/e/x", NULL, 0, 0, NULL) == GR_ZNOCHILDRENFOREPHEMERALS);
    CHECK(gr_zkb_exists(b, "/e", false, &st) == GR_ZOK && st.ephemeralOwner == zm_client_session(c));
    char buf[200];
    CHECK(zm_selfcheck(zm, buf, sizeof buf) == 0);
    gr_zkb_destroy(b);
    struct zm_client *c2 = zm_client_new(zm, 6000, NULL, NULL, NULL);
    CHECK(gr_zkb_exists(zm_backend(c2), "/e", false, NULL) == GR_ZNONODE);
    CHECK(gr_zkb_exists(zm_backend(c2), "/a", false, NULL) == GR_ZOK);
    CHECK(zm_selfcheck(zm, buf, sizeof buf) == 0);
    gr_zkb_destroy(zm_backend(c2));
    zm_free(zm);
}

static void multi_ops(void) {
    struct zm *zm = zm_new();
    struct zm_client *c = zm_client_new(zm, 6000, NULL, NULL, NULL);
    struct gr_zk_backend *b = zm_backend(c);
    CHECK(gr_zkb_create(b, "/ce", "0", 1, 0, NULL) == GR_ZOK);
    /* success: create + set; stat on the set */
    struct gr_zop ops[3] = {gr_zop_create("/ctl", "c", 1, GR_ZEPHEMERAL), gr_zop_set("/ce", "1", 1, 0),
                            gr_zop_check("/ce", 1)};
    struct gr_zop_result res[3];
    CHECK(gr_zkb_multi(b, ops, 3, res) == GR_ZOK);
    CHECK(res[0].rc == GR_ZOK && res[0].created_path && strcmp(res[0].created_path, "/ctl") == 0);
    CHECK(res[1].rc == GR_ZOK && res[1].stat.version == 1);
    CHECK(res[2].rc == GR_ZOK);
    struct gr_zstat s1, s2;
    CHECK(gr_zkb_exists(b, "/ctl", false, &s1) == GR_ZOK && gr_zkb_exists(b, "/ce", false, &s2) == GR_ZOK);
    CHECK(s1.czxid == s2.mzxid); /* one transaction, one zxid */
    gr_zop_results_release(res, 3);
    /* failure in the middle: nothing applied, per-op codes */
    int64_t zx = zm_last_zxid(zm);
    struct gr_zop ops2[4] = {gr_zop_create("/x", NULL, 0, 0), gr_zop_set("/ce", "2", 1, 1),
                             gr_zop_check("/ce", 0), gr_zop_delete("/ctl", -1)};
    struct gr_zop_result res2[4];
    CHECK(gr_zkb_multi(b, ops2, 4, res2) == GR_ZBADVERSION);
    CHECK(res2[0].rc == GR_ZOK && res2[1].rc == GR_ZOK && res2[2].rc == GR_ZBADVERSION &&
          res2[3].rc == GR_ZRUNTIMEINCONSISTENCY);
    CHECK(res2[0].created_path == NULL);
    CHECK(gr_zkb_exists(b, "/x", false, NULL) == GR_ZNONODE);
    const char *d;
    int len;
    CHECK(zm_peek(zm, "/ce", &d, &len, &s2) == GR_ZOK && s2.version == 1 && d[0] == '1');
    CHECK(zm_last_zxid(zm) == zx);
    /* ops see earlier ops of the same multi */
    struct gr_zop ops3[3] = {gr_zop_create("/p", NULL, 0, 0), gr_zop_create("/p/q", NULL, 0, 0),
                             gr_zop_delete("/p/q", 0)};
    struct gr_zop_result res3[3];
    CHECK(gr_zkb_multi(b, ops3, 3, res3) == GR_ZOK);
    gr_zop_results_release(res3, 3);
    CHECK(gr_zkb_exists(b, "/p", false, &s1) == GR_ZOK && s1.numChildren == 0 && s1.cversion == 2);
    /* rollback of a delete restores child order */
    CHECK(gr_zkb_create(b, "/p/a", NULL, 0, 0, NULL) == GR_ZOK);
    CHECK(gr_zkb_create(b, "/p/b", NULL, 0, 0, NULL) == GR_ZOK);
    CHECK(gr_zkb_create(b, "/p/c", NULL, 0, 0, NULL) == GR_ZOK);
    struct gr_zop ops4[2] = {gr_zop_delete("/p/b", 0), gr_zop_create("/p/a", NULL, 0, 0)};
    struct gr_zop_result res4[2];
    CHECK(gr_zkb_multi(b, ops4, 2, res4) == GR_ZNODEEXISTS);
    const char **names;
    CHECK(zm_peek_children(zm, "/p", &names) == 3);
    CHECK(strcmp(names[0], "a") == 0 && strcmp(names[1], "b") == 0 && strcmp(names[2], "c") == 0);
    char buf[200];
    CHECK(zm_selfcheck(zm, buf, sizeof buf) == 0);
    gr_zkb_destroy(b);
    zm_free(zm);
}

static void watches(void) {
    struct zm *zm = zm_new();
    struct rec r = {0};
    struct zm_client *w = zm_client_new(zm, 6000, rec_watch, rec_session, &r);
    struct zm_client *c = zm_client_new(zm, 6000, NULL, NULL, NULL);
    zm_set_flush_on_call(zm, false);
    struct gr_zk_backend *wb = zm_backend(w), *b = zm_backend(c);
    CHECK(gr_zkb_exists(wb, "/w", true, NULL) == GR_ZNONODE);
    CHECK(gr_zkb_get(wb, "/w2", true, NULL, NULL, NULL) == GR_ZNONODE); /* no watch */
    CHECK(gr_zkb_create(b, "/w", NULL, 0, 0, NULL) == GR_ZOK);
    CHECK(gr_zkb_create(b, "/w2", NULL, 0, 0, NULL) == GR_ZOK);
    CHECK(r.n == 0);                 /* queued, not delivered inside the call */
    CHECK(zm_pending(w) == 1);
    drain(zm);
    CHECK(r.n == 1 && r.type[0] == GR_ZWATCH_CREATED && strcmp(r.path[0], "/w") == 0);
    /* one-shot data watch */
    CHECK(gr_zkb_get(wb, "/w", true, NULL, NULL, NULL) == GR_ZOK);
    CHECK(gr_zkb_set(b, "/w", "1", 1, -1, NULL) == GR_ZOK);
    CHECK(gr_zkb_set(b, "/w", "2", 1, -1, NULL) == GR_ZOK);
    drain(zm);
    CHECK(r.n == 2 && r.type[1] == GR_ZWATCH_CHANGED);
    /* child watch + data watch on the same node, then delete: one DELETED */
    struct gr_zstrings ch;
    CHECK(gr_zkb_get_children(wb, "/w", true, &ch) == GR_ZOK);
    gr_zstrings_free(&ch);
    CHECK(gr_zkb_create(b, "/w/k", NULL, 0, 0, NULL) == GR_ZOK);
    drain(zm);
    CHECK(r.n == 3 && r.type[2] == GR_ZWATCH_CHILD && strcmp(r.path[2], "/w") == 0);
    CHECK(gr_zkb_delete(b, "/w/k", -1) == GR_ZOK);
    drain(zm);
    CHECK(r.n == 3); /* child watch was one-shot */
    CHECK(gr_zkb_get_children(wb, "/w", true, &ch) == GR_ZOK);
    gr_zstrings_free(&ch);
    CHECK(gr_zkb_exists(wb, "/w", true, NULL) == GR_ZOK);
    CHECK(gr_zkb_delete(b, "/w", -1) == GR_ZOK);
    drain(zm);
    CHECK(r.n == 4 && r.type[3] == GR_ZWATCH_DELETED);
    /* parent child watch fires on ephemeral removal at session close */
    CHECK(gr_zkb_create(b, "/ids", NULL, 0, 0, NULL) == GR_ZOK);
    struct zm_client *eph = zm_client_new(zm, 6000, NULL, NULL, NULL);
    CHECK(gr_zkb_create(zm_backend(eph), "/ids/1", NULL, 0, GR_ZEPHEMERAL, NULL) == GR_ZOK);
    CHECK(gr_zkb_get_children(wb, "/ids", true, &ch) == GR_ZOK && ch.count == 1);
    gr_zstrings_free(&ch);
    zm_set_time(zm, 100);
    zm_crash(eph, false);
    CHECK(zm_tick(zm) == 0);
    zm_set_time(zm, 100 + 6000);
    CHECK(zm_tick(zm) == 1);
    CHECK(gr_zkb_exists(b, "/ids/1", false, NULL) == GR_ZNONODE);
    drain(zm);
    CHECK(r.n == 5 && r.type[4] == GR_ZWATCH_CHILD && strcmp(r.path[4], "/ids") == 0);
    gr_zkb_destroy(zm_backend(eph));
    /* flush on call: a pending notification is delivered before the next reply */
    zm_set_flush_on_call(zm, true);
    CHECK(gr_zkb_exists(wb, "/f", true, NULL) == GR_ZNONODE);
    CHECK(gr_zkb_create(b, "/f", NULL, 0, 0, NULL) == GR_ZOK);
    CHECK(r.n == 5);
    CHECK(gr_zkb_exists(wb, "/f", false, NULL) == GR_ZOK);
    CHECK(r.n == 6 && r.type[5] == GR_ZWATCH_CREATED);
    gr_zkb_destroy(wb);
    gr_zkb_destroy(b);
    zm_free(zm);
}

static void sessions(void) {
    struct zm *zm = zm_new();
    struct rec r = {0};
    struct zm_client *c = zm_client_new(zm, 6000, rec_watch, rec_session, &r);
    struct zm_client *o = zm_client_new(zm, 6000, NULL, NULL, NULL);
    struct gr_zk_backend *b = zm_backend(c), *ob = zm_backend(o);
    zm_set_flush_on_call(zm, false);
    CHECK(gr_zkb_create(b, "/e", NULL, 0, GR_ZEPHEMERAL, NULL) == GR_ZOK);
    CHECK(gr_zkb_exists(b, "/w", true, NULL) == GR_ZNONODE);
    /* disconnect: calls fail, watch events are held until reconnect */
    zm_disconnect(c);
    CHECK(gr_zkb_get(b, "/e", false, NULL, NULL, NULL) == GR_ZCONNECTIONLOSS);
    CHECK(gr_zkb_create(ob, "/w", NULL, 0, 0, NULL) == GR_ZOK);
    drain(zm);
    CHECK(r.nsess == 1 && r.sess[0] == GR_ZSESSION_DISCONNECTED && r.n == 0);
    zm_reconnect(c);
    drain(zm);
    CHECK(r.nsess == 2 && r.sess[1] == GR_ZSESSION_CONNECTED && r.n == 1);
    CHECK(gr_zkb_exists(b, "/e", false, NULL) == GR_ZOK);
    /* expiry while disconnected: discovered on reconnect */
    int64_t old = zm_client_session(c);
    zm_set_time(zm, 50);
    zm_disconnect(c);
    zm_set_time(zm, 50 + 6000);
    CHECK(zm_tick(zm) == 1);
    CHECK(gr_zkb_exists(ob, "/e", false, NULL) == GR_ZNONODE);
    zm_reconnect(c);
    CHECK(zm_client_state(c) == ZMC_EXPIRED);
    CHECK(gr_zkb_get(b, "/w", false, NULL, NULL, NULL) == GR_ZSESSIONEXPIRED);
    CHECK(!zm_new_session(c)); /* EXPIRED not delivered yet */
    drain(zm);
    CHECK(r.sess[r.nsess - 1] == GR_ZSESSION_EXPIRED);
    CHECK(zm_new_session(c));
    drain(zm);
    CHECK(r.sess[r.nsess - 1] == GR_ZSESSION_NEW_SESSION);
    CHECK(zm_client_session(c) != old && zm_client_state(c) == ZMC_CONNECTED);
    /* close_session from another client kills it at once */
    CHECK(gr_zkb_create(b, "/e", NULL, 0, GR_ZEPHEMERAL, NULL) == GR_ZOK);
    struct gr_zsession s;
    CHECK(gr_zkb_session(b, &s) == GR_ZOK);
    CHECK(gr_zkb_close_session(ob, &s) == GR_ZOK);
    CHECK(gr_zkb_close_session(ob, &s) == GR_ZSESSIONEXPIRED);
    CHECK(gr_zkb_exists(ob, "/e", false, NULL) == GR_ZNONODE);
    CHECK(zm_client_state(c) == ZMC_EXPIRED);
    /* wait_connected: default hook reconnects */
    drain(zm);
    CHECK(zm_new_session(c));
    zm_disconnect(c);
    CHECK(gr_zkb_wait_connected(b, 1000) == GR_ZOK && zm_client_state(c) == ZMC_CONNECTED);
    /* crash: CLOSING; destroy of the other closes its session */
    zm_crash(c, true);
    CHECK(gr_zkb_get(b, "/w", false, NULL, NULL, NULL) == GR_ZCLOSING);
    gr_zkb_destroy(b);
    gr_zkb_destroy(ob);
    char buf[200];
    CHECK(zm_selfcheck(zm, buf, sizeof buf) == 0);
    zm_free(zm);
}

/* Connection loss after a write was applied: kzk's retry must find its own effect. */
static int lose_next, lose_skip, n_writes;
static int fault_hook(void *arg, struct zm_client *c, bool is_write) {
    (void)arg, (void)c;
    if (is_write) n_writes++;
    if (is_write && lose_skip > 0) {
        lose_skip--;
        return ZM_FAULT_NONE;
    }
    if (is_write && lose_next) {
        lose_next--;
        return ZM_FAULT_LOSS_AFTER;
    }
    return ZM_FAULT_NONE;
}

/* Whole-ensemble outage: everyone disconnected, nothing expires or is written, reconnecting
 * fails; afterwards every live session has a fresh timeout. */
static void outages(void) {
    struct zm *zm = zm_new();
    struct rec r1 = {0}, r2 = {0};
    zm_set_time(zm, 1000);
    struct zm_client *c1 = zm_client_new(zm, 6000, rec_watch, rec_session, &r1);
    struct zm_client *c2 = zm_client_new(zm, 6000, rec_watch, rec_session, &r2);
    CHECK(gr_zkb_create(zm_backend(c1), "/e", NULL, 0, GR_ZEPHEMERAL, NULL) == GR_ZOK);
    int64_t sid1 = zm_client_session(c1);
    int64_t zxid = zm_last_zxid(zm);
    zm_outage_begin(zm);
    CHECK(zm_down(zm));
    CHECK(zm_client_state(c1) == ZMC_DISCONNECTED && zm_client_state(c2) == ZMC_DISCONNECTED);
    CHECK(gr_zkb_create(zm_backend(c2), "/x", NULL, 0, 0, NULL) == GR_ZCONNECTIONLOSS);
    zm_set_time(zm, 100000); /* far past every timeout: no server, no expiry */
    CHECK(zm_tick(zm) == 0);
    CHECK(zm_next_deadline(zm) == INT64_MAX);
    zm_reconnect(c1);
    CHECK(zm_client_state(c1) == ZMC_DISCONNECTED);
    CHECK(!zm_expire_session(zm, sid1));
    gr_zkb_destroy(zm_backend(c2)); /* nobody to close its session: it lingers */
    CHECK(zm_last_zxid(zm) == zxid);
    zm_outage_end(zm);
    CHECK(!zm_down(zm));
    CHECK(zm_next_deadline(zm) == 100000 + 6000);
    zm_set_time(zm, 100000 + 5000);
    CHECK(zm_tick(zm) == 0);
    zm_reconnect(c1); /* within the fresh timeout: same session, ephemeral still there */
    CHECK(zm_client_state(c1) == ZMC_CONNECTED && zm_client_session(c1) == sid1);
    CHECK(gr_zkb_exists(zm_backend(c1), "/e", false, NULL) == GR_ZOK);
    zm_set_time(zm, 100000 + 6000);
    CHECK(zm_tick(zm) == 1); /* c2's orphaned session */
    gr_zkb_destroy(zm_backend(c1));
    zm_free(zm);
}

/* A pipelined bulk write (multi_many: here 5 multis of 4 states) whose second multi is applied
 * but its answer lost: the client is disconnected, so the three after it report CONNECTIONLOSS
 * unapplied; kzk reconnects and reruns them, the rerun of the second finds its own states
 * (landed_already) and every state ends created once. */
static void pipelined_states_with_loss(struct zm *zm, struct gr_kzk *k) {
    CHECK(gr_zkb_create(gr_kzk_backend(k), "/brokers/topics/p", "{}", 2, 0, NULL) == GR_ZOK);
    gr_kzk_set_batch_size(k, 5);
    int32_t isr[] = {1};
    struct gr_kzk_leader_and_isr lai = {.leader = 1, .controller_epoch = 1, .n_isr = 1, .isr = isr};
    struct gr_kzk_state_write w[20];
    struct gr_kzk_write_result res[20];
    for (int i = 0; i < 20; i++) w[i] = (struct gr_kzk_state_write){.topic = "p", .partition = i, .lai = &lai};
    /* writes: 1 multi for …/partitions, 5 for …/partitions/P, then the states' */
    lose_skip = 1 + 5 + 1;
    lose_next = 1;
    n_writes = 0;
    CHECK(gr_kzk_create_partition_states(k, 1, w, 20, res) == 0);
    for (int i = 0; i < 20; i++) {
        char path[64];
        snprintf(path, sizeof path, "/brokers/topics/p/partitions/%d/state", i);
        struct gr_zstat st;
        CHECK(res[i].rc == 0 && zm_peek(zm, path, NULL, NULL, &st) == GR_ZOK && st.version == 0);
    }
    /* parents 1 + 5; states: the first two reach the server (the second's answer is lost, the
     * client is disconnected: the other three fail before reaching it); after the reconnect the
     * four unfinished ones: the second's rerun fails on its first state, which exists, and one
     * pipelined read finds all four of its states landed: no more writes */
    CHECK(n_writes == 1 + 5 + 2 + 4);
    lose_skip = lose_next = 0;
    gr_kzk_set_batch_size(k, 1000);
}

/* The mzxid of a znode (0: none). */
static int64_t mzxid_of(struct zm *zm, const char *path) {
    struct gr_zstat st;
    return zm_peek(zm, path, NULL, NULL, &st) == GR_ZOK ? st.mzxid : 0;
}

/* The standby's stamps (gr_kzk_get_state_stamps): every guarded multi that creates, sets or
 * deletes a state znode of T sets /brokers/topics/T/partitions in the same transaction (its mzxid
 * is the multi's zxid), once per topic; a multi that deletes that znode itself does not set it;
 * a multi of other paths stamps nothing; a stale epoch writes nothing. */
static void state_stamps(struct zm *zm, struct gr_kzk *k) {
    CHECK(gr_zkb_create(gr_kzk_backend(k), "/brokers/topics/sa", "{}", 2, 0, NULL) == GR_ZOK);
    CHECK(gr_zkb_create(gr_kzk_backend(k), "/brokers/topics/sb", "{}", 2, 0, NULL) == GR_ZOK);
    int32_t isr[] = {1};
    struct gr_kzk_leader_and_isr lai = {.leader = 1, .controller_epoch = 1, .n_isr = 1, .isr = isr};
    struct gr_kzk_state_write w[3] = {{.topic = "sa", .partition = 0, .lai = &lai},
                                      {.topic = "sa", .partition = 1, .lai = &lai},
                                      {.topic = "sb", .partition = 0, .lai = &lai}};
    struct gr_kzk_write_result res[3];
    CHECK(gr_kzk_create_partition_states(k, 1, w, 3, res) == 0);
    int64_t z = zm_last_zxid(zm);
    CHECK(mzxid_of(zm, "/brokers/topics/sa/partitions") == z && mzxid_of(zm, "/brokers/topics/sb/partitions") == z);
    struct gr_zstat st;
    CHECK(zm_peek(zm, "/brokers/topics/sa/partitions", NULL, NULL, &st) == GR_ZOK && st.version == 1); /* once */
    const char *topics[] = {"sa", "sb", "gone"};
    int64_t stamps[3];
    CHECK(gr_kzk_get_state_stamps(k, topics, 3, stamps) == 0 && stamps[0] == z && stamps[1] == z && stamps[2] == 0);
    /* a set of sa-1 moves sa's stamp only */
    lai.zk_version = 0;
    CHECK(gr_kzk_update_partition_states(k, 1, &w[1], 1, res) == 0 && res[0].rc == 0);
    CHECK(mzxid_of(zm, "/brokers/topics/sa/partitions") == zm_last_zxid(zm));
    CHECK(mzxid_of(zm, "/brokers/topics/sb/partitions") == z);
    /* a stale epoch: nothing written, no stamp */
    int64_t before = zm_last_zxid(zm);
    lai.zk_version = 1;
    CHECK(gr_kzk_update_partition_states(k, 0, &w[1], 1, res) == GR_ECONTROLLER_MOVED);
    CHECK(zm_last_zxid(zm) == before && mzxid_of(zm, "/brokers/topics/sa/partitions") == before);
    /* a delete of a state alone (a topic deletion cut between its multis) stamps */
    struct gr_zop del = gr_zop_delete("/brokers/topics/sa/partitions/0/state", GR_ZANY_VERSION);
    CHECK(gr_kzk_guarded_multi(k, 1, &del, 1, NULL) == 0);
    CHECK(mzxid_of(zm, "/brokers/topics/sa/partitions") == zm_last_zxid(zm));
    /* one that deletes the partitions znode too does not set it (the multi would fail) */
    struct gr_zop all[3] = {gr_zop_delete("/brokers/topics/sb/partitions/0/state", GR_ZANY_VERSION),
                            gr_zop_delete("/brokers/topics/sb/partitions/0", GR_ZANY_VERSION),
                            gr_zop_delete("/brokers/topics/sb/partitions", GR_ZANY_VERSION)};
    CHECK(gr_kzk_guarded_multi(k, 1, all, 3, NULL) == 0);
    CHECK(mzxid_of(zm, "/brokers/topics/sb/partitions") == 0);
    /* other paths (even one that looks close) stamp nothing */
    before = mzxid_of(zm, "/brokers/topics/sa/partitions");
    struct gr_zop other = gr_zop_create("/brokers/topics/sa/partitions/9", NULL, 0, 0);
    CHECK(gr_kzk_guarded_multi(k, 1, &other, 1, NULL) == 0);
    CHECK(mzxid_of(zm, "/brokers/topics/sa/partitions") == before);
}

/* The stamp's data (gr_kzk_set_stamp_id_lookup): the id the lookup gives on the writing thread,
 * empty without one; a job takes its ids when made (a lookup changed before it runs is not seen);
 * gr_kzk_get_topic_stamps reads them back (ENONODE, ECORRUPT for a hand-written value). */
static const char *stamp_ids[2] = {NULL, NULL}; /* sa's, sb's */
static const char *stamp_lookup(void *arg, const char *topic) {
    (void)arg;
    return strcmp(topic, "ia") == 0 ? stamp_ids[0] : strcmp(topic, "ib") == 0 ? stamp_ids[1] : NULL;
}

static bool stamp_data_is(struct zm *zm, const char *topic, const char *want) {
    char path[128];
    snprintf(path, sizeof path, "/brokers/topics/%s/partitions", topic);
    const char *data = NULL;
    int len = -1;
    if (zm_peek(zm, path, &data, &len, NULL) != GR_ZOK) return false;
    return (size_t)len == strlen(want) && memcmp(data, want, (size_t)len) == 0;
}

static void stamp_ids_data(struct zm *zm, struct gr_kzk *k) {
    const char *ida = "LLZSphugSjmNB1hmQ7rBtw", *idb = "o6nAEpmARSSQfLv3DmOQDw";
    gr_kzk_set_stamp_id_lookup(k, stamp_lookup, NULL);
    stamp_ids[0] = ida;
    stamp_ids[1] = NULL;
    CHECK(gr_zkb_create(gr_kzk_backend(k), "/brokers/topics/ia", "{}", 2, 0, NULL) == GR_ZOK);
    CHECK(gr_zkb_create(gr_kzk_backend(k), "/brokers/topics/ib", "{}", 2, 0, NULL) == GR_ZOK);
    int32_t isr[] = {1};
    struct gr_kzk_leader_and_isr lai = {.leader = 1, .controller_epoch = 1, .n_isr = 1, .isr = isr};
    struct gr_kzk_state_write w[2] = {{.topic = "ia", .partition = 0, .lai = &lai},
                                      {.topic = "ib", .partition = 0, .lai = &lai}};
    struct gr_kzk_write_result res[2];
    CHECK(gr_kzk_create_partition_states(k, 1, w, 2, res) == 0);
    CHECK(stamp_data_is(zm, "ia", "{\"topic_id\":\"LLZSphugSjmNB1hmQ7rBtw\"}"));
    CHECK(stamp_data_is(zm, "ib", "")); /* no id known: empty, as before */
    /* a job takes ib's id when made: a lookup changed before it runs is not seen */
    stamp_ids[1] = idb;
    lai.zk_version = 0;
    struct gr_kzk_job *j = gr_kzk_update_partition_states_job(k, 1, &w[1], 1);
    stamp_ids[1] = ida;
    CHECK(gr_kzk_job_wait(j) == 0 && j->res[0].rc == 0);
    gr_kzk_job_free(j);
    CHECK(stamp_data_is(zm, "ib", "{\"topic_id\":\"o6nAEpmARSSQfLv3DmOQDw\"}"));
    /* read back; a hand-written value is ECORRUPT, a missing znode ENONODE */
    CHECK(gr_zkb_set(gr_kzk_backend(k), "/brokers/topics/ia/partitions", "junk", 4, -1, NULL) == GR_ZOK);
    const char *topics[] = {"ib", "ia", "gone"};
    struct gr_kzk_topic_stamp st[3];
    CHECK(gr_kzk_get_topic_stamps(k, topics, 3, st) == 0);
    CHECK(st[0].rc == 0 && st[0].topic_id && strcmp(st[0].topic_id, idb) == 0 && st[0].zk_version == 2);
    CHECK(st[1].rc == GR_ECORRUPT && !st[1].topic_id);
    CHECK(st[2].rc == GR_KZK_ENONODE && !st[2].topic_id);
    for (int i = 0; i < 3; i++) free(st[i].topic_id);
    /* the lookup off: stamps carry no data again */
    gr_kzk_set_stamp_id_lookup(k, NULL, NULL);
    lai.zk_version = 0;
    CHECK(gr_kzk_update_partition_states(k, 1, &w[0], 1, res) == 0 && res[0].rc == 0);
    CHECK(stamp_data_is(zm, "ia", ""));
}

static void kzk_on_model(void) {
    struct zm *zm = zm_new();
    struct zm_hooks h = {.call_fault = fault_hook};
    zm_set_hooks(zm, &h);
    struct zm_client *c = zm_client_new(zm, 6000, NULL, NULL, NULL);
    struct gr_kzk *k = gr_kzk_new(zm_backend(c));
    CHECK(gr_kzk_ensure_paths(k) == 0);
    struct gr_kzk_endpoint ep = {.listener = "PLAINTEXT", .security_protocol = "PLAINTEXT",
                                 .host = "h", .port = 9092};
    struct gr_kzk_broker info = {.id = 1, .jmx_port = -1, .n_endpoints = 1, .endpoints = &ep,
                                 .timestamp = 1};
    int64_t epoch = 0;
    lose_next = 1;
    CHECK(gr_kzk_register_broker(k, &info, NULL, 0, &epoch) == 0);
    struct gr_zstat st;
    CHECK(zm_peek(zm, "/brokers/ids/1", NULL, NULL, &st) == GR_ZOK && st.czxid == epoch);
    int32_t e = 0, v = 0;
    lose_next = 1;
    CHECK(gr_kzk_register_controller_and_increment_epoch(k, 1, &e, &v) == 0);
    CHECK(e == 1 && v == 1);
    int32_t term = 0;
    CHECK(gr_kzk_get_stamping_term(k, &term) == 0 && term == 1); /* a stamping controller in office */
    struct zm_client *c2 = zm_client_new(zm, 6000, NULL, NULL, NULL);
    struct gr_kzk *k2 = gr_kzk_new(zm_backend(c2));
    CHECK(gr_kzk_register_controller_and_increment_epoch(k2, 2, &e, &v) == GR_ECONTROLLER_MOVED);
    struct gr_zop op = gr_zop_create("/guarded", NULL, 0, 0);
    CHECK(gr_kzk_guarded_multi(k2, 0, &op, 1, NULL) == GR_ECONTROLLER_MOVED);
    CHECK(gr_kzk_guarded_multi(k, 1, &op, 1, NULL) == 0);
    pipelined_states_with_loss(zm, k);
    state_stamps(zm, k);
    stamp_ids_data(zm, k);
    /* /controller rewritten by hand without the marker (czxid kept): no longer vouched for */
    CHECK(gr_zkb_set(gr_kzk_backend(k), "/controller", "{\"version\":1,\"brokerid\":1}", 26, -1, NULL) == GR_ZOK);
    CHECK(gr_kzk_get_stamping_term(k, &term) == 0 && term == -1);
    gr_kzk_free(k);
    gr_zkb_destroy(zm_backend(c));
    CHECK(gr_kzk_get_stamping_term(k2, &term) == 0 && term == -1); /* nobody in office */
    gr_kzk_set_state_stamps(k2, false); /* an earlier version: no marker */
    CHECK(gr_kzk_register_controller_and_increment_epoch(k2, 2, &e, &v) == 0 && e == 2);
    CHECK(gr_kzk_get_stamping_term(k2, &term) == 0 && term == -1);
    gr_kzk_free(k2);
    gr_zkb_destroy(zm_backend(c2));
    zm_free(zm);
}

int zm_unit_checks(void) {
    test_failures = 0;
    basic_ops();
    multi_ops();
    watches();
    sessions();
    outages();
    kzk_on_model();
    return test_failures;
}
