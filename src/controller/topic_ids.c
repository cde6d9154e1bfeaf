/* Topic ids assigned by the controller (KafkaController.processTopicIds): see topic_ids.h. */
#include "controller/topic_ids.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

#define LOGGER "kafka.controller.KafkaController"
#define IDS_PER_MULTI 200 /* set ops per guarded multi */
#define RETRIES 5         /* rereads of one topic whose znode keeps changing under us */

static void new_id(const struct gr_ctrl_topic_id_source *src, struct gr_uuid *out) {
    if (src && src->fn) src->fn(src->arg, out);
    else gr_uuid_random(out);
}

/* The znode content of t as the context holds it, with id (arrays borrowed from the context;
 * free only a->partitions). */
static void from_context(const struct gr_ctrl_topic *t, const char *id, struct gr_kzk_topic_assignment *a) {
    memset(a, 0, sizeof *a);
    a->topic = t->name;
    a->topic_id = (char *)id;
    a->n_partitions = t->n_partitions;
    a->partitions = gr_calloc((size_t)(t->n_partitions ? t->n_partitions : 1), sizeof *a->partitions);
    for (int i = 0; i < t->n_partitions; i++) {
        const struct gr_ctrl_partition *p = &t->partitions[i];
        a->partitions[i] = (struct gr_kzk_partition_assignment){
            .partition = p->partition, .n_replicas = p->n_replicas, .replicas = p->replicas,
            .n_adding = p->n_adding, .adding = p->adding, .n_removing = p->n_removing, .removing = p->removing};
    }
}

const char *gr_ctrl_topic_stamp_id(void *ctx, const char *topic) {
    const struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, topic);
    /* a topic znode created again behind our back is another topic: never stamp ours into it
     * (the next controller would give it our id, and with it the deleted topic's logs) */
    return t && !t->recreated ? t->topic_id : NULL;
}

/* sver of an id not taken from a stamp (write_with_stamp) */
#define NOT_FROM_STAMP INT32_MIN

/* The op that writes the id stamp data[0..len) to spath (write_with_stamp's rule): a set at sver
 * when the id is that stamp's own, else a set when a stamp exists, else a create. */
static struct gr_zop stamp_op(const char *spath, const char *data, size_t len, bool stamped, int32_t sver) {
    if (sver != NOT_FROM_STAMP) return gr_zop_set(spath, data, (int)len, sver);
    return stamped ? gr_zop_set(spath, data, (int)len, GR_ZANY_VERSION) : gr_zop_create(spath, data, (int)len, 0);
}

/* Writes a (t's znode content, with its id) conditionally on version and the id into the stamp,
 * in one guarded multi: a set when stamped (its /partitions znode existed when read), else a
 * create (Kafka's controller creates that znode when it creates the first partition state, and
 * an existing one is fine there). An id taken from the stamp (sver: the stamp's version when
 * read, else NOT_FROM_STAMP) is written only over that very stamp (a set at sver): the topic
 * znode's version alone cannot tell a topic deleted and created again meanwhile (a new znode at
 * version 0 too), and its stamp died with it -- the old id never goes into the new topic. A stamp
 * gone meanwhile (the topic's deletion is under way, or done) is GR_KZK_ENONODE; one created or
 * written meanwhile GR_KZK_EEXISTS / GR_KZK_EBADVERSION. */
static int write_with_stamp(struct gr_kzk *kzk, const struct gr_ctrl_context *ctx, const char *topic,
                            const struct gr_kzk_topic_assignment *a, int32_t version, bool stamped, int32_t sver) {
    size_t len, slen;
    char *json = gr_kzk_topic_assignment_encode(a, &len);
    char *sdata = gr_kzk_topic_stamp_encode(a->topic_id, &slen);
    char *path = gr_asprintf("/brokers/topics/%s", topic), *spath = gr_asprintf("/brokers/topics/%s/partitions", topic);
    struct gr_zop ops[2] = {gr_zop_set(path, json, (int)len, version), stamp_op(spath, sdata, slen, stamped, sver)};
    int rc = gr_kzk_guarded_multi(kzk, ctx->epoch_zk_version, ops, 2, NULL);
    free(json);
    free(sdata);
    free(path);
    free(spath);
    return rc;
}

/* Whether t's /partitions znode exists (0/1), or an error. */
static int stamp_exists(struct gr_kzk *kzk, const char *topic) {
    struct gr_kzk_topic_stamp st;
    int rc = gr_kzk_get_topic_stamps(kzk, &topic, 1, &st);
    if (rc == 0) rc = st.rc == GR_ECORRUPT ? 0 : st.rc;
    free(st.topic_id);
    if (rc == GR_KZK_ENONODE) return 0;
    return rc == 0 ? 1 : rc;
}

static void adopt(struct gr_ctrl_topic *t, const char *text, const struct gr_uuid *id, int32_t zk_version) {
    free(t->topic_id);
    t->topic_id = gr_strdup(text);
    t->id = *id;
    t->zk_version = zk_version;
}

/* The id t's stamp holds (topic_ids.h), into *id: true when there is one. A malformed stamp is
 * none (WARN); so is a stamp older than t's znode (czxid: the one read; cannot be its child:
 * never trusted). */
static bool id_from_stamp(const struct gr_ctrl_topic *t, int64_t czxid, const struct gr_kzk_topic_stamp *st,
                          struct gr_uuid *id) {
    if (st->rc == GR_ECORRUPT) {
        gr_warn(LOGGER, "Topic %s: /brokers/topics/%s/partitions holds data that is no topic id stamp: ignored, the "
                        "topic gets a new id", t->name, t->name);
        return false;
    }
    if (st->rc != 0 || !st->topic_id) return false;
    if (st->czxid < czxid) {
        gr_warn(LOGGER, "Topic %s: the id %s of /brokers/topics/%s/partitions is older than the topic znode: ignored",
                t->name, st->topic_id, t->name);
        return false;
    }
    gr_uuid_parse(st->topic_id, id); /* the decoder checked it */
    gr_warn(LOGGER, "Topic %s: /brokers/topics/%s has no topic id (rewritten by a tool of Kafka 2.7 or older?); "
                    "restoring its id %s from /brokers/topics/%s/partitions", t->name, t->name, st->topic_id, t->name);
    return true;
}

/* One topic on its own: conditional on the version the context holds, then on what a reread
 * finds. id: the id chosen, taken from the stamp at version sver (else NOT_FROM_STAMP); a reread
 * chooses again (the stamp's id if it still holds one, else a new one from src). 0,
 * GR_ECONTROLLER_MOVED or another error. */
static int assign_one(struct gr_kzk *kzk, struct gr_ctrl_context *ctx, const struct gr_ctrl_topic_id_source *src,
                      struct gr_ctrl_topic *t, const struct gr_uuid *id0, int32_t sver) {
    struct gr_uuid id = *id0;
    char text[GR_UUID_STR_LEN + 1];
    gr_uuid_to_string(&id, text);
    struct gr_kzk_topic_assignment a;
    from_context(t, text, &a);
    int stamped = sver != NOT_FROM_STAMP ? 1 : stamp_exists(kzk, t->name);
    if (stamped < 0) {
        free(a.partitions);
        return stamped;
    }
    int rc = write_with_stamp(kzk, ctx, t->name, &a, t->zk_version, stamped, sver);
    free(a.partitions);
    int32_t version = t->zk_version;
    /* the znode changed, or its stamp was created, written or deleted meanwhile: read both again */
    for (int attempt = 0; (rc == GR_KZK_EBADVERSION || rc == GR_KZK_EEXISTS ||
                           (rc == GR_KZK_ENONODE && sver != NOT_FROM_STAMP)) && attempt < RETRIES; attempt++) {
        struct gr_kzk_topic_assignment cur;
        const char *name = t->name;
        struct gr_kzk_topic_stamp st;
        rc = gr_kzk_get_topic_stamps(kzk, &name, 1, &st);
        if (rc == 0 && st.rc != 0 && st.rc != GR_KZK_ENONODE && st.rc != GR_ECORRUPT) rc = st.rc;
        if (rc != 0) {
            free(st.topic_id);
            return rc;
        }
        rc = gr_kzk_get_topic_assignments(kzk, &name, 1, false, &cur);
        if (rc == 0) rc = cur.rc;
        if (rc == GR_KZK_ENONODE) { /* deleted meanwhile: nothing to read again */
            free(st.topic_id);
            gr_kzk_topic_assignment_release(&cur);
            return 0;
        }
        if (rc == 0 && cur.topic_id) { /* someone else gave it one: it stays */
            struct gr_uuid theirs;
            gr_uuid_parse(cur.topic_id, &theirs); /* the decoder checked it */
            gr_info(LOGGER, "Topic %s got id %s meanwhile; keeping it", t->name, cur.topic_id);
            adopt(t, cur.topic_id, &theirs, cur.zk_version);
            gr_kzk_topic_assignment_release(&cur);
            free(st.topic_id);
            return 0;
        }
        if (rc == 0) {
            /* choose again: the stamp of the znode just read, else (the stamp's id was the
             * earlier incarnation's, or is gone) a new one */
            stamped = st.rc != GR_KZK_ENONODE;
            if (id_from_stamp(t, cur.czxid, &st, &id)) {
                sver = st.zk_version;
            } else if (sver != NOT_FROM_STAMP) {
                new_id(src, &id);
                sver = NOT_FROM_STAMP;
            }
            gr_uuid_to_string(&id, text);
            cur.topic_id = gr_strdup(text);
            version = cur.zk_version;
            rc = write_with_stamp(kzk, ctx, t->name, &cur, version, stamped, sver);
        }
        free(st.topic_id);
        gr_kzk_topic_assignment_release(&cur);
    }
    if (rc == GR_KZK_ENONODE) return 0; /* deleted meanwhile */
    if (rc != 0) return rc;
    gr_info(LOGGER, "Assigned topic id %s to topic %s", text, t->name);
    adopt(t, text, &id, version + 1); /* a conditional set at version v leaves v + 1 */
    return 0;
}

int gr_ctrl_assign_topic_ids(struct gr_kzk *kzk, struct gr_ctrl_context *ctx, const struct gr_ctrl_topic_id_source *src,
                             const char *const *names, int n) {
    struct gr_ctrl_topic **todo = gr_malloc(sizeof *todo * (size_t)(n ? n : 1));
    int m = 0;
    for (int i = 0; i < n; i++) {
        struct gr_ctrl_topic *t = gr_ctrl_ctx_topic(ctx, names[i]);
        if (t && !t->topic_id) todo[m++] = t;
    }
    int rc = 0;
    struct gr_uuid *ids = gr_malloc(sizeof *ids * IDS_PER_MULTI);
    char(*texts)[GR_UUID_STR_LEN + 1] = gr_malloc(sizeof *texts * IDS_PER_MULTI);
    struct gr_zop *ops = gr_malloc(sizeof *ops * 2 * IDS_PER_MULTI); /* topic znodes, then stamps */
    char **paths = gr_calloc(IDS_PER_MULTI, sizeof *paths), **jsons = gr_calloc(IDS_PER_MULTI, sizeof *jsons);
    char **spaths = gr_calloc(IDS_PER_MULTI, sizeof *spaths), **sdata = gr_calloc(IDS_PER_MULTI, sizeof *sdata);
    struct gr_kzk_topic_stamp *stamps = gr_calloc(IDS_PER_MULTI, sizeof *stamps);
    int32_t *svers = gr_malloc(sizeof *svers * IDS_PER_MULTI); /* write_with_stamp's sver */
    for (int off = 0; off < m && rc == 0; off += IDS_PER_MULTI) {
        int k = GR_MIN(IDS_PER_MULTI, m - off), n_ops = k;
        /* the stamps first: an id they hold is the topic's (restore_from_stamp) */
        const char *names_k[IDS_PER_MULTI];
        for (int i = 0; i < k; i++) names_k[i] = todo[off + i]->name;
        rc = gr_kzk_get_topic_stamps(kzk, names_k, k, stamps);
        /* a stamp that could not be read may hold the topic's id: never a new one instead (its
         * logs would be moved aside); the rest get theirs at the next failover or TopicChange */
        for (int i = 0; i < k; i++) {
            if (rc == 0 && stamps[i].rc != 0 && stamps[i].rc != GR_KZK_ENONODE && stamps[i].rc != GR_ECORRUPT)
                rc = stamps[i].rc;
        }
        if (rc != 0) {
            for (int i = 0; i < k; i++) free(stamps[i].topic_id);
            break;
        }
        for (int i = 0; i < k; i++) {
            struct gr_ctrl_topic *t = todo[off + i];
            svers[i] = NOT_FROM_STAMP;
            if (id_from_stamp(t, t->czxid, &stamps[i], &ids[i])) svers[i] = stamps[i].zk_version;
            else new_id(src, &ids[i]);
            gr_uuid_to_string(&ids[i], texts[i]);
            struct gr_kzk_topic_assignment a;
            from_context(t, texts[i], &a);
            size_t len;
            jsons[i] = gr_kzk_topic_assignment_encode(&a, &len);
            free(a.partitions);
            paths[i] = gr_asprintf("/brokers/topics/%s", t->name);
            ops[i] = gr_zop_set(paths[i], jsons[i], (int)len, t->zk_version);
            /* the stamp gets the id too: set (at the version read when the id is its own), or
             * created when missing (write_with_stamp) */
            spaths[i] = gr_asprintf("/brokers/topics/%s/partitions", t->name);
            sdata[i] = gr_kzk_topic_stamp_encode(texts[i], &len);
            ops[n_ops++] = stamp_op(spaths[i], sdata[i], len, stamps[i].rc != GR_KZK_ENONODE, svers[i]);
            free(stamps[i].topic_id);
        }
        /* all of them in one multi; if any znode changed since it was read, one by one */
        rc = gr_kzk_guarded_multi(kzk, ctx->epoch_zk_version, ops, n_ops, NULL);
        if (rc == 0) {
            for (int i = 0; i < k; i++) {
                struct gr_ctrl_topic *t = todo[off + i];
                gr_info(LOGGER, "Assigned topic id %s to topic %s", texts[i], t->name);
                adopt(t, texts[i], &ids[i], t->zk_version + 1);
            }
        } else if (rc != GR_ECONTROLLER_MOVED) {
            rc = 0;
            for (int i = 0; i < k && rc == 0; i++) rc = assign_one(kzk, ctx, src, todo[off + i], &ids[i], svers[i]);
        }
        for (int i = 0; i < k; i++) {
            free(paths[i]);
            free(jsons[i]);
            free(spaths[i]);
            free(sdata[i]);
            paths[i] = jsons[i] = spaths[i] = sdata[i] = NULL;
        }
    }
    if (rc != 0 && rc != GR_ECONTROLLER_MOVED)
        gr_error(LOGGER, "Cannot write topic ids: %s", gr_kzk_strerror(rc));
    free(paths);
    free(jsons);
    free(spaths);
    free(sdata);
    free(stamps);
    free(svers);
    free(ops);
    free(texts);
    free(ids);
    free(todo);
    return rc;
}

/* Test hook (topic_ids.h): the write-back waits while the file GREGOR_TEST_TOPIC_ID_RESTORE_PAUSE
 * names exists. */
static void restore_test_pause(const char *topic) {
    const char *path = getenv("GREGOR_TEST_TOPIC_ID_RESTORE_PAUSE");
    if (!path || !path[0] || access(path, F_OK) != 0) return;
    gr_warn(LOGGER, "GREGOR_TEST_TOPIC_ID_RESTORE_PAUSE: writing back the topic id of %s paused while %s exists",
            topic, path);
    while (access(path, F_OK) == 0) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int gr_ctrl_restore_topic_id(struct gr_kzk *kzk, struct gr_ctrl_context *ctx, struct gr_ctrl_topic *t,
                             const struct gr_kzk_topic_assignment *read) {
    if (!t->topic_id || (read->topic_id && strcmp(read->topic_id, t->topic_id) == 0)) return 0;
    if (read->czxid != t->czxid) { /* not the incarnation whose id we know: never give it ours */
        t->recreated = true;      /* nor into its stamp */
        gr_warn(LOGGER, "Topic %s: /brokers/topics/%s was created again (czxid %lld, known %lld): not writing the "
                        "id %s of the earlier topic into it", t->name, t->name, (long long)read->czxid,
                (long long)t->czxid, t->topic_id);
        return 0;
    }
    restore_test_pause(t->name);
    if (read->topic_id)
        gr_error(LOGGER, "Topic %s: /brokers/topics/%s was rewritten with topic id %s, but the topic's id is %s: "
                         "a topic's id never changes, writing %s back", t->name, t->name, read->topic_id, t->topic_id,
                 t->topic_id);
    else
        gr_warn(LOGGER, "Topic %s: /brokers/topics/%s was rewritten without its topic id (a tool of Kafka 2.7 or "
                        "older?): writing its id %s back", t->name, t->name, t->topic_id);
    struct gr_kzk_topic_assignment a = *read; /* its content as written, with the id: shallow, not released */
    a.topic_id = t->topic_id;
    int32_t version = read->zk_version;
    int stamped = stamp_exists(kzk, t->name);
    if (stamped < 0) return stamped;
    int rc = write_with_stamp(kzk, ctx, t->name, &a, version, stamped, NOT_FROM_STAMP);
    bool wrote = true;
    /* the znode changed, or its stamp was created meanwhile: read both again */
    for (int attempt = 0; (rc == GR_KZK_EBADVERSION || rc == GR_KZK_EEXISTS) && attempt < RETRIES; attempt++) {
        struct gr_kzk_topic_assignment cur;
        const char *name = t->name;
        stamped = stamp_exists(kzk, t->name);
        if (stamped < 0) return stamped;
        rc = gr_kzk_get_topic_assignments(kzk, &name, 1, false, &cur);
        if (rc == 0) rc = cur.rc;
        if (rc == 0 && cur.czxid != t->czxid) { /* deleted and created again meanwhile: another topic */
            t->recreated = true;
            gr_warn(LOGGER, "Topic %s: /brokers/topics/%s was created again meanwhile (czxid %lld, known %lld): not "
                            "writing the id %s of the earlier topic into it", t->name, t->name, (long long)cur.czxid,
                    (long long)t->czxid, t->topic_id);
            gr_kzk_topic_assignment_release(&cur);
            return 0;
        }
        if (rc == 0 && cur.topic_id && strcmp(cur.topic_id, t->topic_id) == 0) { /* put back meanwhile */
            version = cur.zk_version;
            wrote = false;
        } else if (rc == 0) {
            if (cur.topic_id)
                gr_error(LOGGER, "Topic %s: rewritten again with topic id %s: writing %s back", t->name, cur.topic_id,
                         t->topic_id);
            free(cur.topic_id);
            cur.topic_id = gr_strdup(t->topic_id);
            version = cur.zk_version;
            rc = write_with_stamp(kzk, ctx, t->name, &cur, version, stamped, NOT_FROM_STAMP);
        }
        gr_kzk_topic_assignment_release(&cur);
    }
    if (rc == GR_KZK_ENONODE) return 0; /* deleted meanwhile */
    if (rc != 0) {
        if (rc != GR_ECONTROLLER_MOVED)
            gr_error(LOGGER, "Cannot write the topic id %s of topic %s back: %s (tried again at the next change "
                             "of the znode)", t->topic_id, t->name, gr_kzk_strerror(rc));
        return rc;
    }
    t->zk_version = wrote ? version + 1 : version;
    if (wrote) gr_info(LOGGER, "Restored topic id %s of topic %s", t->topic_id, t->name);
    return 0;
}
