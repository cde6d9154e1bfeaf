/* The topic id's second copy in /brokers/topics/T/partitions (controller/topic_ids.h), over the
 * in-memory ZooKeeper of the controller fixture (tests/support/ctrl_fixture.h).
 *
 * Covered: a topic found without an id takes the id its stamp holds (znode, stamp and context);
 * a malformed stamp is none (a new id, written over it); a topic without a /partitions znode gets
 * one created holding its new id; a znode that changed under the batched write falls back to the
 * one-by-one write, which still takes the stamp's id and writes the stamp; the write-back of a
 * known id also writes the stamp; the lookup kzk's stamps use answers from the context. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "controller/topic_ids.h"
#include "support/ctrl_fixture.h"

static const char *const ID_A = "LLZSphugSjmNB1hmQ7rBtw";

/* Fresh ids: a counter in the first byte (deterministic, never the stamp's). */
static void next_id(void *arg, struct gr_uuid *out) {
    int *n = arg;
    memset(out, 0, sizeof *out);
    ((unsigned char *)out)[0] = (unsigned char)(0x40 + (*n)++);
    ((unsigned char *)out)[15] = 1;
}

static char *znode_id(const char *topic) {
    struct gr_kzk_topic_assignment a;
    CHECK(gr_kzk_get_topic_assignments(kzk, &topic, 1, false, &a) == 0 && a.rc == 0);
    char *id = a.topic_id ? gr_strdup(a.topic_id) : NULL;
    gr_kzk_topic_assignment_release(&a);
    return id;
}

/* The id /brokers/topics/<topic>/partitions holds; "<none>" when missing, "<bad>" when malformed. */
static const char *stamp_of(const char *topic, char *buf, size_t n) {
    struct gr_kzk_topic_stamp st;
    CHECK(gr_kzk_get_topic_stamps(kzk, &topic, 1, &st) == 0);
    snprintf(buf, n, "%s", st.rc == GR_KZK_ENONODE ? "<none>" : st.rc ? "<bad>" : st.topic_id ? st.topic_id : "");
    free(st.topic_id);
    return buf;
}

static void put_stamp(const char *topic, const char *data) {
    char path[256];
    snprintf(path, sizeof path, "/brokers/topics/%s/partitions", topic);
    if (memzk_find(zk, path) < 0) CHECK(memzk_create(zk, path, data, (int)strlen(data), 0, NULL) == 0);
    else CHECK(memzk_set(zk, path, data, (int)strlen(data), -1, NULL) == 0);
}

static bool all_same(const char *topic, const char *want) {
    char buf[64];
    char *z = znode_id(topic);
    const struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(&ctx, topic);
    bool ok = z && strcmp(z, want) == 0 && t && t->topic_id && strcmp(t->topic_id, want) == 0 &&
              strcmp(stamp_of(topic, buf, sizeof buf), want) == 0;
    if (!ok)
        fprintf(stderr, "%s: znode %s, context %s, stamp %s, want %s\n", topic, z ? z : "-",
                t && t->topic_id ? t->topic_id : "-", stamp_of(topic, buf, sizeof buf), want);
    free(z);
    return ok;
}

static void test_assign_takes_the_stamps_id(void) {
    setup();
    int32_t reps[] = {1, 2};
    create_topic("a", 1, reps, 2);  /* written without an id (a 2.x tool) */
    create_topic("b", 1, reps, 2);
    create_topic("c", 1, reps, 2);
    put_stamp("a", "{\"topic_id\":\"LLZSphugSjmNB1hmQ7rBtw\"}");
    put_stamp("b", "{\"topic_id\":\"no\"}");  /* malformed: none */
    /* c: no /partitions znode (no partition state yet) */
    int n = 0;
    struct gr_ctrl_topic_id_source src = {next_id, &n};
    const char *names[] = {"a", "b", "c"};
    CHECK(gr_ctrl_assign_topic_ids(kzk, &ctx, &src, names, 3) == 0);
    CHECK(all_same("a", ID_A));
    char b_id[64], c_id[64];
    const struct gr_ctrl_topic *tb = gr_ctrl_ctx_topic(&ctx, "b"), *tc = gr_ctrl_ctx_topic(&ctx, "c");
    CHECK(tb->topic_id && strcmp(tb->topic_id, ID_A) != 0 && all_same("b", tb->topic_id));
    CHECK(tc->topic_id && strcmp(tc->topic_id, tb->topic_id) != 0 && all_same("c", tc->topic_id));
    snprintf(b_id, sizeof b_id, "%s", tb->topic_id);
    snprintf(c_id, sizeof c_id, "%s", tc->topic_id);
    /* the lookup kzk's stamps use */
    CHECK(strcmp(gr_ctrl_topic_stamp_id(&ctx, "a"), ID_A) == 0 && gr_ctrl_topic_stamp_id(&ctx, "zz") == NULL);
    /* ... and a state write stamps the id (not empty) */
    gr_kzk_set_stamp_id_lookup(kzk, gr_ctrl_topic_stamp_id, &ctx);
    int32_t isr[] = {1, 2};
    struct gr_kzk_leader_and_isr lai = {.leader = 1, .controller_epoch = 2, .n_isr = 2, .isr = isr};
    struct gr_kzk_state_write w = {.topic = "c", .partition = 0, .lai = &lai};
    struct gr_kzk_write_result res;
    CHECK(gr_kzk_create_partition_states(kzk, 2, &w, 1, &res) == 0 && res.rc == 0);
    CHECK(all_same("c", c_id));
    gr_kzk_set_stamp_id_lookup(kzk, NULL, NULL);
    teardown();
}

/* The batched multi fails (the znode changed meanwhile): one by one, still with the stamp's id. */
static void test_fallback_takes_the_stamps_id(void) {
    setup();
    int32_t reps[] = {1, 2};
    create_topic("d", 1, reps, 2);
    put_stamp("d", "{\"topic_id\":\"LLZSphugSjmNB1hmQ7rBtw\"}");
    zk->bump_before_multi = gr_strdup("/brokers/topics/d");
    int n = 0;
    struct gr_ctrl_topic_id_source src = {next_id, &n};
    const char *names[] = {"d"};
    CHECK(gr_ctrl_assign_topic_ids(kzk, &ctx, &src, names, 1) == 0);
    CHECK(all_same("d", ID_A));
    teardown();
}

/* The write-back of a known id into a znode rewritten without it writes the stamp too (here one
 * wiped by hand). */
static void test_restore_writes_the_stamp(void) {
    setup();
    int32_t reps[] = {1, 2};
    create_topic("e", 1, reps, 2);
    int n = 0;
    struct gr_ctrl_topic_id_source src = {next_id, &n};
    const char *names[] = {"e"};
    put_stamp("e", "");
    CHECK(gr_ctrl_assign_topic_ids(kzk, &ctx, &src, names, 1) == 0);
    struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(&ctx, "e");
    char id[64];
    snprintf(id, sizeof id, "%s", t->topic_id);
    CHECK(all_same("e", id));
    /* a 2.x tool rewrites the znode; the stamp is wiped too */
    struct gr_kzk_topic_assignment a;
    const char *name = "e";
    CHECK(gr_kzk_get_topic_assignments(kzk, &name, 1, false, &a) == 0);
    free(a.topic_id);
    a.topic_id = NULL;
    CHECK(gr_kzk_set_topic_assignment(kzk, "e", &a, a.zk_version) == 0);
    gr_kzk_topic_assignment_release(&a);
    put_stamp("e", "");
    CHECK(gr_kzk_get_topic_assignments(kzk, &name, 1, false, &a) == 0 && !a.topic_id);
    a.czxid = t->czxid;
    CHECK(gr_ctrl_restore_topic_id(kzk, &ctx, t, &a) == 0);
    gr_kzk_topic_assignment_release(&a);
    CHECK(all_same("e", id));
    teardown();
}

/* memzk before_multi_fn: /brokers/topics/<arg> deleted by hand (with its stamp) and written again
 * with the same content, without an id (a 2.x tool) -- a new incarnation at version 0. */
static void recreate_topic(struct memzk *z, void *arg) {
    char p[256], sp[256];
    snprintf(p, sizeof p, "/brokers/topics/%s", (const char *)arg);
    snprintf(sp, sizeof sp, "/brokers/topics/%s/partitions", (const char *)arg);
    int i = memzk_find(z, p);
    CHECK(i >= 0);
    int len = z->v[i].len;
    char *data = gr_malloc((size_t)len + 1);
    memcpy(data, z->v[i].data, (size_t)len + 1);
    CHECK(memzk_delete(z, sp, -1) == GR_ZOK);
    CHECK(memzk_delete(z, p, -1) == GR_ZOK);
    CHECK(memzk_create(z, p, data, len, 0, NULL) == GR_ZOK);
    free(data);
}

/* The topic is deleted and created again between the read of its stamp and the write: the old
 * incarnation's id (its stamp's) never goes into the new incarnation (znode, stamp, context). */
static void test_recreated_between_read_and_write_never_gets_the_old_id(void) {
    setup();
    int32_t reps[] = {1, 2};
    create_topic("f", 1, reps, 2);
    struct gr_kzk_topic_assignment a;
    const char *name = "f";
    CHECK(gr_kzk_get_topic_assignments(kzk, &name, 1, false, &a) == 0 && a.rc == 0);
    struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(&ctx, "f");
    t->czxid = a.czxid;
    t->zk_version = a.zk_version;
    gr_kzk_topic_assignment_release(&a);
    put_stamp("f", "{\"topic_id\":\"LLZSphugSjmNB1hmQ7rBtw\"}");
    zk->before_multi_fn = recreate_topic;
    zk->before_multi_arg = (void *)"f";
    int n = 0;
    struct gr_ctrl_topic_id_source src = {next_id, &n};
    const char *names[] = {"f"};
    CHECK(gr_ctrl_assign_topic_ids(kzk, &ctx, &src, names, 1) == 0);
    char buf[64];
    char *z = znode_id("f");
    t = gr_ctrl_ctx_topic(&ctx, "f");
    CHECK(!z || strcmp(z, ID_A) != 0);
    CHECK(strcmp(stamp_of("f", buf, sizeof buf), ID_A) != 0);
    CHECK(!t->topic_id || strcmp(t->topic_id, ID_A) != 0);
    free(z);
    teardown();
}

/* A stamp that cannot be read (a get that keeps timing out) while others can: its topic is left
 * without an id for now (the next failover or TopicChange), never given a new one instead of the
 * id the stamp may hold (the brokers would move its logs aside). */
static void test_unreadable_stamp_never_means_a_new_id(void) {
    setup();
    int32_t reps[] = {1, 2};
    create_topic("g", 1, reps, 2);
    create_topic("h", 1, reps, 2);
    put_stamp("g", "{\"topic_id\":\"LLZSphugSjmNB1hmQ7rBtw\"}");
    zk->timeout_get = gr_strdup("/brokers/topics/g/partitions");
    int n = 0;
    struct gr_ctrl_topic_id_source src = {next_id, &n};
    const char *names[] = {"g", "h"};
    gr_ctrl_assign_topic_ids(kzk, &ctx, &src, names, 2); /* an error, logged */
    free(zk->timeout_get);
    zk->timeout_get = NULL;
    char *z = znode_id("g");
    const struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(&ctx, "g");
    CHECK(!z || strcmp(z, ID_A) == 0);
    CHECK(!t->topic_id || strcmp(t->topic_id, ID_A) == 0);
    free(z);
    /* once readable, the stamp's id */
    CHECK(gr_ctrl_assign_topic_ids(kzk, &ctx, &src, names, 2) == 0);
    CHECK(all_same("g", ID_A));
    teardown();
}

/* /brokers/topics/T deleted by hand and created again (without an id) behind the active
 * controller's back: the controller declines to write the earlier topic's id into it, and the
 * stamps its later state writes make (here: a partition added by the new znode) never carry that
 * id either -- else the next controller would give it to the new topic (its stamp is younger than
 * the znode) and the brokers would keep the deleted topic's logs. */
static void test_recreated_behind_the_controller_stamps_no_old_id(void) {
    setup();
    int32_t reps[] = {1, 2};
    create_topic("i", 1, reps, 2);
    struct gr_kzk_topic_assignment a;
    const char *name = "i";
    CHECK(gr_kzk_get_topic_assignments(kzk, &name, 1, false, &a) == 0 && a.rc == 0);
    struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(&ctx, "i");
    t->czxid = a.czxid;
    t->zk_version = a.zk_version;
    gr_kzk_topic_assignment_release(&a);
    int n = 0;
    struct gr_ctrl_topic_id_source src = {next_id, &n};
    const char *names[] = {"i"};
    CHECK(gr_ctrl_assign_topic_ids(kzk, &ctx, &src, names, 1) == 0);
    char old_id[64];
    snprintf(old_id, sizeof old_id, "%s", t->topic_id);
    CHECK(all_same("i", old_id));
    recreate_topic(zk, (void *)"i"); /* written by hand: its content (then without the id) */
    CHECK(gr_kzk_get_topic_assignments(kzk, &name, 1, false, &a) == 0 && a.rc == 0);
    free(a.topic_id);
    a.topic_id = NULL;
    CHECK(gr_kzk_set_topic_assignment(kzk, "i", &a, a.zk_version) == 0);
    gr_kzk_topic_assignment_release(&a);
    CHECK(gr_kzk_get_topic_assignments(kzk, &name, 1, false, &a) == 0 && a.rc == 0 && !a.topic_id);
    CHECK(a.czxid != t->czxid);
    CHECK(gr_ctrl_restore_topic_id(kzk, &ctx, t, &a) == 0); /* declined: another incarnation */
    gr_kzk_topic_assignment_release(&a);
    char *z = znode_id("i");
    CHECK(!z);
    free(z);
    gr_kzk_set_stamp_id_lookup(kzk, gr_ctrl_topic_stamp_id, &ctx);
    int32_t isr[] = {1, 2};
    struct gr_kzk_leader_and_isr lai = {.leader = 1, .controller_epoch = 2, .n_isr = 2, .isr = isr};
    struct gr_kzk_state_write w = {.topic = "i", .partition = 1, .lai = &lai};
    struct gr_kzk_write_result res;
    CHECK(gr_kzk_create_partition_states(kzk, 2, &w, 1, &res) == 0 && res.rc == 0);
    char buf[64];
    CHECK(strcmp(stamp_of("i", buf, sizeof buf), old_id) != 0);
    gr_kzk_set_stamp_id_lookup(kzk, NULL, NULL);
    teardown();
}

int main(void) {
    test_assign_takes_the_stamps_id();
    test_fallback_takes_the_stamps_id();
    test_restore_writes_the_stamp();
    test_recreated_between_read_and_write_never_gets_the_old_id();
    test_unreadable_stamp_never_means_a_new_id();
    test_recreated_behind_the_controller_stamps_no_old_id();
    if (test_failures) {
        fprintf(stderr, "test_topic_id_stamp: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_topic_id_stamp: ok\n");
    return 0;
}
