/* Incremental fetch sessions (KIP-227): see fetch_session.h. */
#include "replication/fetch_session.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/uuid.h"
#include "common/util.h"
#include "replication/tp_index.h"

#define LOGGER "kafka.server.FetchSessionCache"

/* A topic shared by the session's partitions of that topic (issue 14: a follower's session
 * holds thousands of partitions of a few topics; a copy per partition cost ~32 B each). Owned
 * by the cached_parts that point at it (refs), under the cache's mutex. A session by name
 * (Fetch v0-12) keys its partitions by name (id zero); a session by id (v13+, KIP-516) by id,
 * with the name the metadata cache gave when the partition was added (Kafka's CachedPartition
 * keeps it so: a topic deleted and re-created under the same name reads the new topic's log,
 * whose other id the Fetch handler answers INCONSISTENT_TOPIC_ID) or NULL while the id was
 * unknown (filled in by a later request that names the id once it resolves). */
struct fs_topic {
    int refs;
    struct gr_uuid id;
    char *name;                    /* NULL: an id not resolved yet (sessions by id only) */
    char key[GR_UUID_STR_LEN + 1]; /* a session by id: the id's text, its index key */
};

/* Kafka's CachedPartition. */
struct cached_part {
    struct fs_topic *topic; /* NULL: dropped (update_session) */
    int32_t partition;
    int32_t max_bytes, leader_epoch, last_fetched_epoch; /* last_fetched_epoch: Fetch v12+ */
    int64_t fetch_offset, fetcher_log_start;
    int64_t hw, local_log_start; /* last answered; hw -1: answer it next time */
};

struct session {
    struct session *next;
    int32_t id, epoch;
    bool privileged;
    bool uses_ids;      /* opened by a Fetch v13+: partitions by topic id (Kafka's usesTopicIds) */
    int32_t replica_id; /* the follower that opened it, -1 for a consumer */
    int64_t creation_ms, last_used_ms;
    struct cached_part *parts;
    int n, cap;
    struct gr_tpi idx; /* scratch index of parts while a request updates the session */
};

struct gr_fetch_session_cache {
    pthread_mutex_t mu;
    int max_slots;
    int64_t eviction_ms;
    struct session *sessions;
    int n_sessions;
    int64_t n_parts;
    int64_t evictions;
};

static int32_t next_epoch(int32_t e) { return e == INT32_MAX ? 1 : e + 1; }

struct gr_fetch_session_cache *gr_fsc_new(int max_slots, int64_t eviction_ms) {
    struct gr_fetch_session_cache *c = gr_calloc(1, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    c->max_slots = max_slots < 0 ? 0 : max_slots;
    c->eviction_ms = eviction_ms;
    return c;
}

static bool same_name(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

/* The index key of a request's topic in session s: its id's text (sessions by id, into buf) or
 * its name. */
static const char *req_key(const struct session *s, const char *topic, const uint8_t id[16],
                           char buf[GR_UUID_STR_LEN + 1]) {
    if (!s->uses_ids) return topic ? topic : "";
    struct gr_uuid u;
    memcpy(u.b, id, sizeof u.b);
    return gr_uuid_to_string(&u, buf);
}

static const char *part_key(const struct session *s, const struct cached_part *cp) {
    return s->uses_ids ? cp->topic->key : cp->topic->name;
}

/* A reference to the topic (topic, id): `near`'s (the previously added partition's) if it is
 * the same topic, else a new one. A session by id takes a name `near` lacks. */
static struct fs_topic *topic_ref(const struct session *s, struct fs_topic *near, const char *topic,
                                  const uint8_t id[16]) {
    if (near && (s->uses_ids ? memcmp(near->id.b, id, 16) == 0 : same_name(near->name, topic))) {
        if (!near->name && topic) near->name = gr_strdup(topic);
        near->refs++;
        return near;
    }
    struct fs_topic *t = gr_calloc(1, sizeof *t);
    t->refs = 1;
    if (s->uses_ids) {
        memcpy(t->id.b, id, 16);
        gr_uuid_to_string(&t->id, t->key);
        t->name = topic ? gr_strdup(topic) : NULL;
    } else {
        t->name = gr_strdup(topic ? topic : "");
    }
    return t;
}

static void topic_unref(struct fs_topic *t) {
    if (t && --t->refs == 0) {
        free(t->name);
        free(t);
    }
}

static bool same_topic(const struct cached_part *a, const struct cached_part *b) {
    return a->topic == b->topic ||
           (memcmp(a->topic->id.b, b->topic->id.b, 16) == 0 && same_name(a->topic->name, b->topic->name));
}

static void session_free(struct session *s) {
    for (int i = 0; i < s->n; i++) topic_unref(s->parts[i].topic);
    free(s->parts);
    gr_tpi_free(&s->idx);
    free(s);
}

void gr_fsc_free(struct gr_fetch_session_cache *c) {
    if (!c) return;
    for (struct session *s = c->sessions, *n; s; s = n) {
        n = s->next;
        session_free(s);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int64_t gr_fsc_evictions(struct gr_fetch_session_cache *c) {
    pthread_mutex_lock(&c->mu);
    int64_t n = c->evictions;
    pthread_mutex_unlock(&c->mu);
    return n;
}

void gr_fsc_stats(struct gr_fetch_session_cache *c, int *sessions, int64_t *partitions) {
    pthread_mutex_lock(&c->mu);
    *sessions = c->n_sessions;
    *partitions = c->n_parts;
    pthread_mutex_unlock(&c->mu);
}

static struct session *find_locked(struct gr_fetch_session_cache *c, int32_t id) {
    for (struct session *s = c->sessions; s; s = s->next)
        if (s->id == id) return s;
    return NULL;
}

static void remove_locked(struct gr_fetch_session_cache *c, struct session *s) {
    for (struct session **pp = &c->sessions; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            c->n_sessions--;
            c->n_parts -= s->n;
            session_free(s);
            return;
        }
}

/* Kafka's EvictableKey order: privileged, size, id. */
static int key_cmp(bool pa, int sa, int32_t ia, bool pb, int sb, int32_t ib) {
    if (pa != pb) return pa ? 1 : -1;
    if (sa != sb) return sa < sb ? -1 : 1;
    return ia < ib ? -1 : ia > ib;
}

/* Kafka's tryEvict for a newcomer (privileged, size). */
static bool try_evict_locked(struct gr_fetch_session_cache *c, bool privileged, int size, int64_t now) {
    struct session *oldest = NULL, *cheapest = NULL;
    for (struct session *s = c->sessions; s; s = s->next) {
        if (!oldest || s->last_used_ms < oldest->last_used_ms) oldest = s;
        bool old = now - s->creation_ms > c->eviction_ms;
        bool evictable = privileged ? (!s->privileged || old) : old;
        if (evictable && (!cheapest || key_cmp(s->privileged, s->n, s->id, cheapest->privileged, cheapest->n,
                                               cheapest->id) < 0))
            cheapest = s;
    }
    if (oldest && now - oldest->last_used_ms > c->eviction_ms) {
        gr_info(LOGGER, "Evicting stale FetchSession %d.", oldest->id);
        remove_locked(c, oldest);
        c->evictions++;
        return true;
    }
    if (!cheapest || key_cmp(privileged, size, 0, cheapest->privileged, cheapest->n, cheapest->id) < 0) return false;
    gr_info(LOGGER, "Evicting FetchSession %d (%d partitions) for a more valuable one.", cheapest->id, cheapest->n);
    remove_locked(c, cheapest);
    c->evictions++;
    return true;
}

static int32_t new_session_id_locked(struct gr_fetch_session_cache *c) {
    for (;;) {
        uint32_t x;
        if (getrandom(&x, sizeof x, 0) != (ssize_t)sizeof x) x = (uint32_t)gr_mono_us() * 2654435761u;
        int32_t id = (int32_t)(x & 0x7fffffff);
        if (id != 0 && !find_locked(c, id)) return id;
    }
}

/* key: the request's req_key */
static bool cp_eq(const void *ctx, int32_t pos, const char *key, int32_t partition) {
    const struct session *s = ctx;
    const struct cached_part *cp = &s->parts[pos];
    return cp->topic && cp->partition == partition && strcmp(part_key(s, cp), key) == 0;
}

static void set_params(struct cached_part *cp, const struct FetchRequest_FetchPartition *fp) {
    cp->fetch_offset = fp->FetchOffset;
    cp->fetcher_log_start = fp->LogStartOffset;
    cp->max_bytes = fp->PartitionMaxBytes;
    cp->leader_epoch = fp->CurrentLeaderEpoch;
    cp->last_fetched_epoch = fp->LastFetchedEpoch;
}

static struct cached_part *add_part(struct session *s, const char *topic, const uint8_t id[16],
                                    const struct FetchRequest_FetchPartition *fp) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->parts = gr_realloc(s->parts, (size_t)s->cap * sizeof *s->parts);
    }
    struct fs_topic *near = s->n > 0 ? s->parts[s->n - 1].topic : NULL;
    struct cached_part *cp = &s->parts[s->n++];
    *cp = (struct cached_part){.topic = topic_ref(s, near, topic, id), .partition = fp->Partition, .hw = -1,
                               .local_log_start = -1};
    set_params(cp, fp);
    return cp;
}

/* The session's partitions as a FetchRequest (consecutive equal topics grouped), in a; a session
 * by id first names what resolve now knows. */
static struct FetchRequest *session_request(struct session *s, const struct FetchRequest *r, struct gr_arena *a,
                                            gr_fsc_resolve_fn resolve, void *resolve_arg) {
    struct FetchRequest *f = gr_arena_alloc(a, sizeof *f);
    *f = *r;
    f->ForgottenTopicsDataCount = 0;
    f->ForgottenTopicsData = NULL;
    int nt = 0;
    const struct fs_topic *tried = NULL; /* a topic's partitions share it: one lookup per topic */
    for (int i = 0; resolve && s->uses_ids && i < s->n; i++) {
        struct fs_topic *t = s->parts[i].topic;
        if (t->name || t == tried) continue;
        t->name = resolve(resolve_arg, t->id.b);
        tried = t;
    }
    for (int i = 0; i < s->n; i++)
        if (i == 0 || !same_topic(&s->parts[i], &s->parts[i - 1])) nt++;
    f->Topics = gr_arena_alloc(a, (size_t)(nt + 1) * sizeof *f->Topics);
    f->TopicsCount = nt;
    struct FetchRequest_FetchPartition *ps = gr_arena_alloc(a, (size_t)(s->n + 1) * sizeof *ps);
    int t = -1;
    for (int i = 0; i < s->n; i++) {
        const struct cached_part *cp = &s->parts[i];
        if (i == 0 || !same_topic(cp, &s->parts[i - 1])) {
            t++;
            f->Topics[t].Topic = cp->topic->name ? gr_arena_strdup(a, cp->topic->name) : NULL;
            memcpy(f->Topics[t].TopicId, cp->topic->id.b, 16);
            f->Topics[t].Partitions = &ps[i];
            f->Topics[t].PartitionsCount = 0;
        }
        ps[i] = (struct FetchRequest_FetchPartition){.Partition = cp->partition,
                                                    .CurrentLeaderEpoch = cp->leader_epoch,
                                                    .FetchOffset = cp->fetch_offset,
                                                    .LastFetchedEpoch = cp->last_fetched_epoch,
                                                    .LogStartOffset = cp->fetcher_log_start,
                                                    .PartitionMaxBytes = cp->max_bytes};
        f->Topics[t].PartitionsCount++;
    }
    return f;
}

/* Kafka's FetchSession.update: O(session + request), through an index of the session built for
 * this request (a follower's session holds every partition its leader leads). Forgotten
 * partitions are dropped keeping the order of the rest. */
static void update_session(struct gr_fetch_session_cache *c, struct session *s, const struct FetchRequest *r) {
    int before = s->n, named = 0;
    for (int t = 0; t < r->TopicsCount; t++) named += GR_MAX(r->Topics[t].PartitionsCount, 0);
    for (int t = 0; t < r->ForgottenTopicsDataCount; t++) named += GR_MAX(r->ForgottenTopicsData[t].PartitionsCount, 0);
    if (named == 0) return;
    gr_tpi_reset(&s->idx, s->n + named);
    for (int i = 0; i < s->n; i++) gr_tpi_insert(&s->idx, part_key(s, &s->parts[i]), s->parts[i].partition, i);
    char buf[GR_UUID_STR_LEN + 1];
    for (int t = 0; t < r->TopicsCount; t++) {
        const struct FetchRequest_FetchTopic *ft = &r->Topics[t];
        const char *key = req_key(s, ft->Topic, ft->TopicId, buf);
        for (int i = 0; i < ft->PartitionsCount; i++) {
            int32_t pos = gr_tpi_find(&s->idx, key, ft->Partitions[i].Partition, cp_eq, s);
            if (pos >= 0) {
                struct cached_part *cp = &s->parts[pos];
                set_params(cp, &ft->Partitions[i]);
                if (!cp->topic->name && ft->Topic) cp->topic->name = gr_strdup(ft->Topic); /* resolved now */
            } else {
                add_part(s, ft->Topic, ft->TopicId, &ft->Partitions[i]);
                gr_tpi_insert(&s->idx, part_key(s, &s->parts[s->n - 1]), ft->Partitions[i].Partition, s->n - 1);
            }
        }
    }
    bool removed = false;
    for (int t = 0; t < r->ForgottenTopicsDataCount; t++) {
        const struct FetchRequest_ForgottenTopic *ft = &r->ForgottenTopicsData[t];
        const char *key = req_key(s, ft->Topic, ft->TopicId, buf);
        for (int i = 0; i < ft->PartitionsCount; i++) {
            int32_t pos = gr_tpi_find(&s->idx, key, ft->Partitions[i], cp_eq, s);
            if (pos < 0) continue;
            topic_unref(s->parts[pos].topic); /* marked: cp_eq skips it */
            s->parts[pos].topic = NULL;
            removed = true;
        }
    }
    if (removed) {
        int w = 0;
        for (int i = 0; i < s->n; i++)
            if (s->parts[i].topic) s->parts[w++] = s->parts[i];
        s->n = w;
    }
    c->n_parts += s->n - before;
}

const struct FetchRequest *gr_fsc_begin(struct gr_fetch_session_cache *c, const struct FetchRequest *r,
                                        int16_t version, int64_t now_ms, struct gr_arena *a, struct gr_fsc_ctx *ctx,
                                        gr_fsc_resolve_fn resolve, void *resolve_arg) {
    memset(ctx, 0, sizeof *ctx);
    ctx->privileged = r->ReplicaId >= 0;
    ctx->replica_id = r->ReplicaId >= 0 ? r->ReplicaId : -1;
    ctx->uses_ids = version >= 13;
    int32_t sid = version >= 7 ? r->SessionId : 0, epoch = version >= 7 ? r->SessionEpoch : -1;
    pthread_mutex_lock(&c->mu);
    if (epoch == 0 || epoch == -1) { /* a full fetch closes the session it names */
        struct session *s = sid ? find_locked(c, sid) : NULL;
        if (s) {
            gr_debug(LOGGER, "Removed fetch session %d.", sid);
            remove_locked(c, s);
        }
        pthread_mutex_unlock(&c->mu);
        ctx->kind = epoch == 0 ? GR_FSC_FULL : GR_FSC_SESSIONLESS;
        return r;
    }
    struct session *s = find_locked(c, sid);
    if (!s || s->epoch != epoch) {
        pthread_mutex_unlock(&c->mu);
        ctx->kind = GR_FSC_ERROR;
        ctx->error = s ? GR_KERR_INVALID_FETCH_SESSION_EPOCH : GR_KERR_FETCH_SESSION_ID_NOT_FOUND;
        gr_debug(LOGGER, "Fetch session %d epoch %d: %s", sid, epoch, gr_kerr_name(ctx->error));
        return NULL;
    }
    if (s->uses_ids != ctx->uses_ids) { /* Kafka: a session is by id or by name for its life */
        pthread_mutex_unlock(&c->mu);
        ctx->kind = GR_FSC_ERROR;
        ctx->error = GR_KERR_FETCH_SESSION_TOPIC_ID_ERROR;
        gr_debug(LOGGER, "Fetch session %d: opened %s topic ids, continued by a Fetch v%d", sid,
                 s->uses_ids ? "with" : "without", version);
        return NULL;
    }
    update_session(c, s, r);
    if (s->n == 0) {
        gr_debug(LOGGER, "Closing fetch session %d: no partitions left.", sid);
        remove_locked(c, s);
        pthread_mutex_unlock(&c->mu);
        ctx->kind = GR_FSC_SESSIONLESS;
        return r;
    }
    s->last_used_ms = now_ms;
    s->epoch = next_epoch(s->epoch);
    ctx->kind = GR_FSC_INCREMENTAL;
    ctx->session_id = sid;
    ctx->epoch = s->epoch;
    ctx->n = s->n;
    ctx->cached_hw = gr_arena_alloc(a, (size_t)s->n * sizeof *ctx->cached_hw);
    ctx->cached_log_start = gr_arena_alloc(a, (size_t)s->n * sizeof *ctx->cached_log_start);
    for (int i = 0; i < s->n; i++) {
        ctx->cached_hw[i] = s->parts[i].hw;
        ctx->cached_log_start[i] = s->parts[i].local_log_start;
    }
    const struct FetchRequest *full = session_request(s, r, a, resolve, resolve_arg);
    pthread_mutex_unlock(&c->mu);
    return full;
}

/* Kafka's CachedPartition.maybeUpdateResponseData (the decision part). */
static bool must_respond(const struct FetchResponse_PartitionData *pr, int64_t hw, int64_t log_start) {
    return pr->Records.len > 0 || pr->HighWatermark != hw || pr->LogStartOffset != log_start ||
           pr->PreferredReadReplica >= 0 || pr->ErrorCode != GR_KERR_NONE || pr->DivergingEpoch.Epoch >= 0;
}

static void open_session(struct gr_fetch_session_cache *c, const struct FetchRequest *full, struct gr_fsc_ctx *ctx,
                         struct FetchResponse *resp, int64_t now_ms) {
    int size = 0;
    for (int t = 0; t < full->TopicsCount; t++) size += GR_MAX(full->Topics[t].PartitionsCount, 0);
    pthread_mutex_lock(&c->mu);
    if (ctx->replica_id >= 0) /* the follower's earlier sessions (fetch_session.h) */
        for (struct session *s = c->sessions, *nx; s; s = nx) {
            nx = s->next;
            if (s->replica_id == ctx->replica_id) {
                gr_debug(LOGGER, "Closing fetch session %d of replica %d: it opened a new one.", s->id, s->replica_id);
                remove_locked(c, s);
            }
        }
    if (c->max_slots <= 0 || (c->n_sessions >= c->max_slots && !try_evict_locked(c, ctx->privileged, size, now_ms))) {
        pthread_mutex_unlock(&c->mu);
        resp->SessionId = 0;
        return;
    }
    struct session *s = gr_calloc(1, sizeof *s);
    s->id = new_session_id_locked(c);
    s->privileged = ctx->privileged;
    s->uses_ids = ctx->uses_ids;
    s->replica_id = ctx->replica_id;
    s->creation_ms = s->last_used_ms = now_ms;
    s->epoch = 1;
    for (int t = 0; t < full->TopicsCount && t < resp->ResponsesCount; t++) {
        const struct FetchRequest_FetchTopic *ft = &full->Topics[t];
        const struct FetchResponse_FetchableTopicResponse *tr = &resp->Responses[t];
        for (int i = 0; i < ft->PartitionsCount && i < tr->PartitionsCount; i++) {
            const struct FetchResponse_PartitionData *pr = &tr->Partitions[i];
            struct cached_part *cp = add_part(s, ft->Topic, ft->TopicId, &ft->Partitions[i]);
            cp->hw = pr->ErrorCode != GR_KERR_NONE ? -1 : pr->HighWatermark;
            cp->local_log_start = pr->LogStartOffset;
        }
    }
    if (s->n > 0 && s->n < s->cap) { /* no doubling slack in a session that may hold 100k */
        s->parts = gr_realloc(s->parts, (size_t)s->n * sizeof *s->parts);
        s->cap = s->n;
    }
    s->next = c->sessions;
    c->sessions = s;
    c->n_sessions++;
    c->n_parts += s->n;
    resp->SessionId = s->id;
    gr_debug(LOGGER, "Created a new full fetch session %d with %d partition(s).", s->id, s->n);
    pthread_mutex_unlock(&c->mu);
}

/* Filters an incremental answer and records it in the session (which keeps the partitions in
 * the order gr_fsc_begin saw them: its epoch changed only by this request). */
static void finish_incremental(struct gr_fetch_session_cache *c, struct gr_fsc_ctx *ctx, struct FetchResponse *resp,
                               struct gr_arena *a) {
    bool *keep = gr_arena_alloc(a, (size_t)ctx->n + 1);
    int k = 0;
    for (int t = 0; t < resp->ResponsesCount; t++) {
        struct FetchResponse_FetchableTopicResponse *tr = &resp->Responses[t];
        int w = 0;
        for (int i = 0; i < tr->PartitionsCount && k < ctx->n; i++, k++) {
            keep[k] = must_respond(&tr->Partitions[i], ctx->cached_hw[k], ctx->cached_log_start[k]);
            if (keep[k]) tr->Partitions[w++] = tr->Partitions[i];
        }
        tr->PartitionsCount = w;
    }
    /* drop topics left without partitions */
    int wt = 0;
    for (int t = 0; t < resp->ResponsesCount; t++)
        if (resp->Responses[t].PartitionsCount > 0) resp->Responses[wt++] = resp->Responses[t];
    resp->ResponsesCount = wt;
    resp->SessionId = ctx->session_id;
    pthread_mutex_lock(&c->mu);
    struct session *s = find_locked(c, ctx->session_id);
    if (s && s->epoch == ctx->epoch && s->n == ctx->n) {
        /* record what was answered, then move the answered partitions to the end */
        struct cached_part *moved = gr_calloc((size_t)s->n + 1, sizeof *moved);
        int nm = 0, ns = 0;
        k = 0;
        for (int t = 0; t < resp->ResponsesCount; t++) {
            const struct FetchResponse_FetchableTopicResponse *tr = &resp->Responses[t];
            for (int i = 0; i < tr->PartitionsCount; i++) {
                const struct FetchResponse_PartitionData *pr = &tr->Partitions[i];
                while (k < s->n && !keep[k]) k++;
                if (k == s->n) break;
                s->parts[k].hw = pr->ErrorCode != GR_KERR_NONE ? -1 : pr->HighWatermark;
                s->parts[k].local_log_start = pr->LogStartOffset;
                k++;
            }
        }
        for (int i = 0; i < s->n; i++) {
            if (keep[i])
                moved[nm++] = s->parts[i];
            else
                s->parts[ns++] = s->parts[i];
        }
        memcpy(s->parts + ns, moved, (size_t)nm * sizeof *moved);
        free(moved);
    }
    pthread_mutex_unlock(&c->mu);
}

void gr_fsc_replica_authorized(struct gr_fsc_ctx *ctx, bool authorized) {
    if (authorized) return;
    ctx->privileged = false;
    ctx->replica_id = -1;
}

void gr_fsc_finish(struct gr_fetch_session_cache *c, const struct FetchRequest *full, struct gr_fsc_ctx *ctx,
                   struct FetchResponse *resp, int64_t now_ms, struct gr_arena *a) {
    switch (ctx->kind) {
    case GR_FSC_SESSIONLESS: resp->SessionId = 0; break;
    case GR_FSC_FULL: open_session(c, full, ctx, resp, now_ms); break;
    case GR_FSC_INCREMENTAL: finish_incremental(c, ctx, resp, a); break;
    case GR_FSC_ERROR:
        resp->ErrorCode = ctx->error;
        resp->SessionId = 0;
        resp->ResponsesCount = 0;
        break;
    }
}
