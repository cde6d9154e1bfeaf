/* Kafka's FetchSessionHandler for the replica fetchers: see fetch_session_handler.h. */
#include "replication/fetch_session_handler.h"

#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/util.h"
#include "replication/tp_index.h"

struct gr_fsh_part {
    char *topic;
    int32_t partition;
    int64_t fetch_offset, log_start;
    int32_t max_bytes, leader_epoch, last_fetched_epoch;
    uint8_t topic_id[16]; /* sessions by id: what ForgottenTopicsData names */
    bool seen; /* scratch: present in the request being built */
};

void gr_fsh_init(struct gr_fetch_session_handler *h) { memset(h, 0, sizeof *h); }

static void clear_parts(struct gr_fetch_session_handler *h) {
    for (int i = 0; i < h->n; i++) free(h->parts[i].topic);
    h->n = 0;
}

void gr_fsh_free(struct gr_fetch_session_handler *h) {
    clear_parts(h);
    free(h->parts);
    gr_tpi_free(&h->idx);
    memset(h, 0, sizeof *h);
}

void gr_fsh_handle_error(struct gr_fetch_session_handler *h) { h->next_epoch = 0; }

static bool part_eq(const void *ctx, int32_t pos, const char *topic, int32_t partition) {
    const struct gr_fsh_part *p = &((const struct gr_fetch_session_handler *)ctx)->parts[pos];
    return p->partition == partition && strcmp(p->topic, topic) == 0;
}

static struct gr_fsh_part *add(struct gr_fetch_session_handler *h, const char *topic, int32_t partition) {
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 16;
        h->parts = gr_realloc(h->parts, (size_t)h->cap * sizeof *h->parts);
    }
    struct gr_fsh_part *p = &h->parts[h->n++];
    memset(p, 0, sizeof *p);
    p->topic = gr_strdup(topic);
    p->partition = partition;
    return p;
}

static bool zero_id(const uint8_t id[16]) {
    for (int i = 0; i < 16; i++)
        if (id[i]) return false;
    return true;
}

static bool same(const struct gr_fsh_part *p, const struct FetchRequest_FetchPartition *fp) {
    return p->fetch_offset == fp->FetchOffset && p->log_start == fp->LogStartOffset &&
           p->max_bytes == fp->PartitionMaxBytes && p->leader_epoch == fp->CurrentLeaderEpoch &&
           p->last_fetched_epoch == fp->LastFetchedEpoch;
}

static void remember(struct gr_fsh_part *p, const struct FetchRequest_FetchPartition *fp) {
    p->fetch_offset = fp->FetchOffset;
    p->log_start = fp->LogStartOffset;
    p->max_bytes = fp->PartitionMaxBytes;
    p->leader_epoch = fp->CurrentLeaderEpoch;
    p->last_fetched_epoch = fp->LastFetchedEpoch;
    p->seen = true;
}

static void remember_topic(struct gr_fsh_part *p, const struct FetchRequest_FetchTopic *ft,
                           const struct FetchRequest_FetchPartition *fp) {
    remember(p, fp);
    memcpy(p->topic_id, ft->TopicId, sizeof p->topic_id);
}

void gr_fsh_build(struct gr_fetch_session_handler *h, struct FetchRequest *req, struct gr_arena *a, bool uses_ids) {
    if (h->uses_ids != uses_ids) h->next_epoch = 0; /* the leader's session is by id or by name for life */
    h->uses_ids = uses_ids;
    h->last_full = h->next_epoch == 0;
    req->SessionId = h->session_id;
    req->SessionEpoch = h->next_epoch;
    req->ForgottenTopicsDataCount = 0;
    req->ForgottenTopicsData = NULL;
    if (h->last_full) { /* the leader's session will hold exactly this request */
        clear_parts(h); /* SessionId stays: a full fetch naming a session closes it (Kafka's nextCloseExisting) */
        for (int t = 0; t < req->TopicsCount; t++)
            for (int i = 0; i < req->Topics[t].PartitionsCount; i++)
                remember_topic(add(h, req->Topics[t].Topic, req->Topics[t].Partitions[i].Partition), &req->Topics[t],
                               &req->Topics[t].Partitions[i]);
        return;
    }
    for (int i = 0; i < h->n; i++) h->parts[i].seen = false;
    /* keep only what is new or changed (topics of one partition each, in a) */
    int total = 0;
    for (int t = 0; t < req->TopicsCount; t++) total += GR_MAX(req->Topics[t].PartitionsCount, 0);
    struct FetchRequest_FetchTopic *out = gr_arena_alloc(a, (size_t)(total + 1) * sizeof *out);
    /* an index of the session's partitions for this round: O(1) per partition named */
    gr_tpi_reset(&h->idx, h->n + total);
    for (int i = 0; i < h->n; i++) gr_tpi_insert(&h->idx, h->parts[i].topic, h->parts[i].partition, i);
    struct replaced_part {
        const char *topic;
        int32_t partition;
        uint8_t id[16];
    } *replaced = gr_arena_alloc(a, (size_t)(total + 1) * sizeof *replaced);
    int nr = 0;
    int k = 0;
    for (int t = 0; t < req->TopicsCount; t++)
        for (int i = 0; i < req->Topics[t].PartitionsCount; i++) {
            const struct FetchRequest_FetchTopic *ft = &req->Topics[t];
            const char *topic = ft->Topic ? ft->Topic : "";
            int32_t pos = gr_tpi_find(&h->idx, topic, ft->Partitions[i].Partition, part_eq, h);
            struct gr_fsh_part *p = pos >= 0 ? &h->parts[pos] : NULL;
            bool send = !p || !same(p, &ft->Partitions[i]);
            /* Kafka's FetchSessionHandler "replaced": the topic was deleted and re-created under
             * this name (another id): the leader's session holds the old id, which is forgotten,
             * and the partition is sent under its new one whatever its offsets. */
            if (p && h->uses_ids && memcmp(p->topic_id, ft->TopicId, sizeof p->topic_id) != 0 &&
                !zero_id(p->topic_id) && !zero_id(ft->TopicId)) {
                replaced[nr].partition = p->partition;
                memcpy(replaced[nr].id, p->topic_id, sizeof replaced[nr].id);
                replaced[nr].topic = gr_arena_strdup(a, p->topic);
                nr++;
                send = true;
            }
            if (!p) {
                p = add(h, topic, ft->Partitions[i].Partition);
                gr_tpi_insert(&h->idx, topic, ft->Partitions[i].Partition, h->n - 1);
            }
            remember_topic(p, ft, &ft->Partitions[i]);
            if (!send) continue;
            out[k].Topic = ft->Topic;
            memcpy(out[k].TopicId, ft->TopicId, sizeof out[k].TopicId);
            out[k].PartitionsCount = 1;
            out[k].Partitions = &ft->Partitions[i];
            k++;
        }
    req->Topics = out;
    req->TopicsCount = k;
    /* forget the rest (one entry per partition) */
    int nf = nr;
    for (int i = 0; i < h->n; i++) nf += !h->parts[i].seen;
    if (nf == 0) return;
    req->ForgottenTopicsData = gr_arena_alloc(a, (size_t)nf * sizeof *req->ForgottenTopicsData);
    for (int i = 0; i < nr; i++) {
        struct FetchRequest_ForgottenTopic *f = &req->ForgottenTopicsData[i];
        f->Topic = (char *)replaced[i].topic;
        memcpy(f->TopicId, replaced[i].id, sizeof f->TopicId);
        f->PartitionsCount = 1;
        f->Partitions = gr_arena_alloc(a, sizeof *f->Partitions);
        f->Partitions[0] = replaced[i].partition;
    }
    for (int i = 0, w = nr; i < h->n;) {
        struct gr_fsh_part *p = &h->parts[i];
        if (p->seen) {
            i++;
            continue;
        }
        struct FetchRequest_ForgottenTopic *f = &req->ForgottenTopicsData[w++];
        f->Topic = gr_arena_strdup(a, p->topic);
        memcpy(f->TopicId, p->topic_id, sizeof f->TopicId);
        f->PartitionsCount = 1;
        f->Partitions = gr_arena_alloc(a, sizeof *f->Partitions);
        f->Partitions[0] = p->partition;
        free(p->topic);
        h->parts[i] = h->parts[--h->n];
    }
    req->ForgottenTopicsDataCount = nf;
}

void gr_fsh_handle_response(struct gr_fetch_session_handler *h, const struct FetchResponse *resp) {
    if (resp->ErrorCode != GR_KERR_NONE) {
        if (resp->ErrorCode == GR_KERR_FETCH_SESSION_ID_NOT_FOUND) h->session_id = 0;
        h->next_epoch = 0;
        return;
    }
    if (h->last_full) {
        h->session_id = resp->SessionId;
        h->next_epoch = resp->SessionId != 0 ? 1 : 0;
        return;
    }
    h->next_epoch = h->next_epoch == INT32_MAX ? 1 : h->next_epoch + 1;
}
