/* Replica fetcher threads (see fetcher.h). */
#include "replication/fetch_session_handler.h"
#include "replication/fetcher.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "common/uuid.h"
#include "net/kafka_client.h"
#include "protocol/codec.h"

#define LOGGER "kafka.server.ReplicaFetcherThread"
/* Truncation on fetch (KIP-595): Fetch v12+ (inter.broker.protocol.version 2.7-IV1+). */
#define TRUNCATION_ON_FETCH(f) ((f)->fm->cfg.fetch_version >= 12)
#define OFLE_VERSION 3
#define LIST_OFFSETS_VERSION 5
#define OPS(f) ((f)->fm->ops)
/* ListOffsets timestamps (Kafka's ListOffsetsRequest.LATEST_TIMESTAMP / EARLIEST_TIMESTAMP) */
#define LATEST_TIMESTAMP (-1)
#define EARLIEST_TIMESTAMP (-2)

enum fstate { F_TRUNCATING, F_FETCHING };

#define THROTTLE_RECHECK_MS 100 /* a throttled replica left out of a fetch is considered again after */

/* New partitions and the long poll: a Fetch waiting up to replica.fetch.wait.max.ms without
 * them is interrupted once (topics created one after another each add partitions; a whole long
 * poll between them made every topic created within it wait it out); while partitions keep
 * being added (within ADD_BURST_MS of the last addition) a Fetch waits at most
 * KICK_MIN_INTERVAL_MS, so later additions need no interrupt. An interrupt drops the connection
 * and leaves the leader a parked fetch that reads every partition once more when it expires: at
 * 100k partitions an interrupt per addition cost the leader O(partitions) each. */
#define KICK_MIN_INTERVAL_MS 50
#define ADD_BURST_MS 1000
/* ... but a round costs the leader a read of every partition in the session (twice when the
 * wait expires), so with many partitions the burst wait grows with them: 1 ms per 100
 * partitions (50k partitions: 500 ms), keeping the leader's per-round work at a small share of
 * the wait. New partitions of a burst wait at most that long for their first fetch. */
#define BURST_PARTS_PER_MS 100

struct fpart {
    const char *topic; /* ops->topic(p) (borrowed), or a copy (topic_owned) */
    bool topic_owned;
    int32_t partition;
    int32_t leader_epoch;
    enum fstate state;
    int64_t delay_until_ms;
    int64_t err_backoff_ms; /* next partition-error back-off (0: first error; see part_backoff) */
    bool out_of_range; /* ask the leader for its offsets before fetching */
    bool throttled;    /* a follower-throttled replica (ops->throttled), as of the last fetch */
    int64_t leader_hw; /* the leader's high watermark in the last response, -1 = none yet */
    int64_t lag;       /* leader_hw - our log end after the last append (Kafka's FetcherLagMetrics), -1 none */
    gr_fetcher_part *p; /* reference (ops->get) */
    uint64_t hash;      /* part_hash(topic, partition), for the index */
    /* What the request of round `round` (fetcher's f->round) asked for this partition: answers
     * are applied only to the request that asked (a partition removed and re-added meanwhile
     * starts at round 0). Set under f->lock. */
    uint64_t round;
    int32_t asked_epoch;  /* our leader epoch in that request */
    int32_t asked_latest; /* OffsetForLeaderEpoch: the epoch asked about */
    int64_t asked_offset; /* Fetch: FetchOffset */
};

struct fetcher {
    struct gr_fetcher_manager *fm;
    int32_t leader_id;
    pthread_t thread;
    pthread_mutex_t lock; /* parts, and held while a response is applied */
    pthread_cond_t cond;
    bool stop;
    struct fpart *parts;
    int nparts, cap;
    /* Index of parts by (topic, partition): open addressing, linear probing; a slot holds an
     * index into parts or -1. idx_cap is a power of two >= 2 * nparts (0: none yet). A fetcher
     * follows up to every partition its leader leads, so lookups must not scan parts. */
    int32_t *idx;
    uint32_t idx_cap;
    uint64_t round; /* request counter (fpart.round) */
    struct gr_kafka_client *kc; /* used by the thread; shut down by fetcher_stop_free */
    struct gr_fetch_session_handler session; /* KIP-227, under lock */
    bool in_fetch; /* a Fetch is under way (f->lock released meanwhile) */
    bool kicked;   /* that Fetch was interrupted to add partitions (gr_fetcher_add) */
    int32_t inflight_wait_ms; /* MaxWaitMs of the Fetch under way */
    int64_t last_add_ms; /* partitions were last added (kick_locked) */
    char name[64];
    struct gr_meter *fetch_rate; /* answered Fetch requests (Kafka's FetcherStats RequestsPerSec), in fm->rates */
    char rate_name[32];
    struct fetcher *next;
};

struct gr_fetcher_manager {
    struct gr_fetcher_config cfg;
    const struct gr_fetcher_ops *ops;
    void *ctx;
    pthread_mutex_t lock; /* the list of fetchers */
    struct fetcher *fetchers;
    bool leaving; /* gr_fetcher_stop_adding: additions only stop the old entry (under lock) */
    struct gr_metrics *rates; /* the fetchers' meters (never exported: gr_fetcher_stats reads them) */
};

/* The longest a Fetch waits while partitions are being added (f->lock held). */
static int32_t burst_wait_ms(const struct fetcher *f) {
    return GR_MAX(KICK_MIN_INTERVAL_MS, f->nparts / BURST_PARTS_PER_MS);
}

static int64_t backoff_ms(struct fetcher *f) {
    int64_t ms = f->fm->cfg.backoff_ms;
    return ms > 0 ? ms : 1;
}

/* First back-off after a partition error, doubled per consecutive error up to
 * replica.fetch.backoff.ms. A new partition's first fetches race with the leader's own
 * LeaderAndIsr (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH until it
 * has applied it, a few ms later); a flat replica.fetch.backoff.ms (1 s) there kept the high
 * watermark of a just-created partition still for up to that second (issue 14). */
#define PART_BACKOFF_FIRST_MS 5

/* Backs fp off after a partition error; returns the delay chosen. */
static int64_t part_backoff(struct fetcher *f, struct fpart *fp, int64_t now) {
    int64_t max = backoff_ms(f);
    int64_t ms = fp->err_backoff_ms > 0 ? fp->err_backoff_ms : GR_MIN((int64_t)PART_BACKOFF_FIRST_MS, max);
    fp->err_backoff_ms = GR_MIN(ms * 2, max);
    fp->delay_until_ms = now + ms;
    return ms;
}

static void timed_wait(pthread_cond_t *c, pthread_mutex_t *m, int64_t ms) {
    struct timespec ts = gr_timespec_after_ms(CLOCK_MONOTONIC, ms);
    pthread_cond_timedwait(c, m, &ts);
}

static void fpart_release(struct gr_fetcher_manager *fm, struct fpart *fp) {
    if (fp->topic_owned) free((char *)fp->topic);
    fp->topic = NULL;
    fm->ops->release(fp->p); /* after the name: it may be the reference's */
}

/* ---- the parts index (f->lock held) ---- */

static uint64_t part_hash(const char *topic, int32_t partition) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *c = (const unsigned char *)topic; *c; c++) h = (h ^ *c) * 1099511628211ULL;
    h = (h ^ (uint32_t)partition) * 1099511628211ULL;
    return h ^ (h >> 29);
}

/* The slot holding (topic, partition), or the empty slot where it would go. idx_cap > 0. */
static uint32_t idx_slot(const struct fetcher *f, uint64_t h, const char *topic, int32_t partition) {
    uint32_t mask = f->idx_cap - 1, s = (uint32_t)h & mask;
    for (;; s = (s + 1) & mask) {
        int32_t i = f->idx[s];
        if (i < 0) return s;
        const struct fpart *fp = &f->parts[i];
        if (fp->hash == h && fp->partition == partition && strcmp(fp->topic, topic) == 0) return s;
    }
}

/* Rebuilds the index for at least `need` parts. */
static void idx_rebuild(struct fetcher *f, int need) {
    uint32_t cap = 64;
    while (cap < (uint32_t)need * 2) cap *= 2;
    free(f->idx);
    f->idx = gr_malloc((size_t)cap * sizeof *f->idx);
    for (uint32_t s = 0; s < cap; s++) f->idx[s] = -1;
    f->idx_cap = cap;
    for (int i = 0; i < f->nparts; i++) {
        const struct fpart *fp = &f->parts[i];
        f->idx[idx_slot(f, fp->hash, fp->topic, fp->partition)] = i;
    }
}

static struct fpart *find_part(struct fetcher *f, const char *topic, int32_t partition) {
    if (f->idx_cap == 0) return NULL;
    int32_t i = f->idx[idx_slot(f, part_hash(topic, partition), topic, partition)];
    return i >= 0 ? &f->parts[i] : NULL;
}

/* Empties slot s and moves later entries of its probe run back (no tombstones). */
static void idx_delete_slot(struct fetcher *f, uint32_t s) {
    uint32_t mask = f->idx_cap - 1;
    f->idx[s] = -1;
    for (uint32_t j = (s + 1) & mask; f->idx[j] >= 0; j = (j + 1) & mask) {
        uint32_t home = (uint32_t)f->parts[f->idx[j]].hash & mask;
        /* Can entry j move to the hole s? Only if its home is not in (s, j] cyclically. */
        bool stays = s <= j ? (home > s && home <= j) : (home > s || home <= j);
        if (stays) continue;
        f->idx[s] = f->idx[j];
        f->idx[j] = -1;
        s = j;
    }
}

/* Removes the entry; f->lock held. */
static bool remove_part_locked(struct fetcher *f, const char *topic, int32_t partition) {
    if (f->idx_cap == 0) return false;
    uint64_t h = part_hash(topic, partition);
    uint32_t s = idx_slot(f, h, topic, partition);
    int32_t i = f->idx[s];
    if (i < 0) return false;
    idx_delete_slot(f, s);
    fpart_release(f->fm, &f->parts[i]);
    int32_t last = --f->nparts;
    if (i != last) { /* the last entry moves into i: repoint its slot */
        f->parts[i] = f->parts[last];
        f->idx[idx_slot(f, f->parts[i].hash, f->parts[i].topic, f->parts[i].partition)] = i;
    }
    return true;
}

/* ---- one exchange with the leader ---- */

/* Encodes body as api/ver, sends it to the leader and decodes the answer into a (connecting
 * first if needed; any failure drops the connection). Caller frees *frame. */
static int exchange(struct fetcher *f, int16_t api, int16_t ver, const void *body, struct gr_arena *a, void **resp,
                    uint8_t **frame, int timeout_ms) {
    *frame = NULL;
    if (!gr_kafka_client_connected(f->kc)) {
        char host[256];
        int32_t port;
        if (!f->fm->ops->leader_endpoint(f->fm->ctx, f->leader_id, host, sizeof host, &port)) return -EHOSTUNREACH;
        gr_kafka_client_set_target(f->kc, f->leader_id, host, port);
    }
    return gr_kafka_client_call(f->kc, api, ver, body, timeout_ms, a, resp, frame);
}

/* ---- truncation (KIP-101/KIP-279) ---- */

/* Applies one OffsetForLeaderEpoch answer to fp; f->lock held. */
static void apply_epoch_answer(struct fetcher *f, struct fpart *fp, int32_t asked_epoch,
                               const struct OffsetForLeaderEpochResponse_EpochEndOffset *res) {
    int64_t now = gr_mono_ms();
    if (res->ErrorCode != GR_KERR_NONE) {
        int64_t ms = part_backoff(f, fp, now);
        gr_info(LOGGER, "[%s] OffsetForLeaderEpoch for %s-%d failed with %s; retrying in %" PRId64 " ms", f->name,
                fp->topic, fp->partition, gr_kerr_name(res->ErrorCode), ms);
        return;
    }
    fp->err_backoff_ms = 0;
    int64_t leo = OPS(f)->log_end_offset(fp->p);
    int64_t target;
    bool done = true;
    if (res->EndOffset < 0) {
        /* The leader knows nothing of our epoch (cannot happen with a current leader, which
         * always knows its own epoch): fall back to our high watermark, as Kafka does. */
        target = OPS(f)->high_watermark(fp->p);
    } else if (res->LeaderEpoch < 0) {
        target = GR_MIN(res->EndOffset, leo);
    } else {
        int64_t my_end;
        int32_t my_epoch;
        OPS(f)->end_offset_for_epoch(fp->p, res->LeaderEpoch, &my_end, &my_epoch);
        if (my_epoch < 0 || my_end < 0) {
            target = GR_MIN(res->EndOffset, leo);
        } else if (my_epoch != res->LeaderEpoch) {
            /* We don't have the leader's epoch: cut back to the end of our largest epoch below
             * it and ask again with that one. */
            target = GR_MIN(my_end, leo);
            done = false;
        } else {
            target = GR_MIN(GR_MIN(my_end, res->EndOffset), leo);
        }
    }
    (void)asked_epoch;
    int rc = OPS(f)->truncate(f->fm->ctx, fp->p, fp->leader_epoch, target, false);
    if (rc == -ESTALE) {
        fp->delay_until_ms = now + backoff_ms(f);
        return;
    }
    if (rc < 0) {
        gr_error(LOGGER, "[%s] truncation of %s-%d to %" PRId64 " failed: %s", f->name, fp->topic, fp->partition,
                 target, gr_strerror(rc));
        fp->delay_until_ms = now + backoff_ms(f);
        return;
    }
    if (done) {
        fp->state = F_FETCHING;
        gr_info(LOGGER, "[%s] %s-%d: truncation done, log end offset %" PRId64 " (was %" PRId64
                        "; leader's epoch %d ends at %" PRId64 "); fetching",
                f->name, fp->topic, fp->partition, OPS(f)->log_end_offset(fp->p), leo, res->LeaderEpoch, res->EndOffset);
    }
}

/* Sends OffsetForLeaderEpoch for every ready truncating partition. Called and returns with
 * f->lock held (released around the network exchange). Returns 0 or a connection error. */
static int do_truncation(struct fetcher *f) {
    int64_t now = gr_mono_ms();
    int n = 0;
    for (int i = 0; i < f->nparts; i++)
        if (f->parts[i].state == F_TRUNCATING && f->parts[i].delay_until_ms <= now) n++;
    if (n == 0) return 0;
    struct gr_arena a;
    gr_arena_init(&a);
    struct OffsetForLeaderEpochRequest *req = gr_proto_new(&a, &gr_desc_OffsetForLeaderEpochRequest);
    req->ReplicaId = f->fm->cfg.broker_id;
    req->TopicsCount = n; /* one topic entry per partition keeps it simple */
    req->Topics = gr_arena_alloc(&a, (size_t)n * sizeof *req->Topics);
    int32_t *asked = gr_arena_alloc(&a, (size_t)n * sizeof *asked);
    int32_t *epochs = gr_arena_alloc(&a, (size_t)n * sizeof *epochs);
    ptrdiff_t *fp_of = gr_arena_alloc(&a, (size_t)n * sizeof *fp_of); /* f->lock held until sent */
    uint64_t round = ++f->round;
    int k = 0;
    for (int i = 0; i < f->nparts && k < n; i++) {
        struct fpart *fp = &f->parts[i];
        if (fp->state != F_TRUNCATING || fp->delay_until_ms > now) continue;
        struct OffsetForLeaderEpochRequest_OffsetForLeaderTopic *t = &req->Topics[k];
        t->Topic = gr_arena_strdup(&a, fp->topic);
        t->PartitionsCount = 1;
        t->Partitions = gr_arena_alloc(&a, sizeof *t->Partitions);
        t->Partitions[0].Partition = fp->partition;
        t->Partitions[0].CurrentLeaderEpoch = fp->leader_epoch;
        asked[k] = OPS(f)->latest_epoch(fp->p);
        t->Partitions[0].LeaderEpoch = asked[k];
        epochs[k] = fp->leader_epoch;
        fp_of[k] = fp - f->parts;
        k++;
    }
    /* A log without any epoch (empty, or never written in an epoch): nothing can diverge. */
    int real = 0;
    for (int i = 0; i < k; i++) {
        struct fpart *fp = &f->parts[fp_of[i]]; /* still there: f->lock held since */
        if (asked[i] < 0) {
            if (OPS(f)->log_end_offset(fp->p) > 0)
                OPS(f)->truncate(f->fm->ctx, fp->p, fp->leader_epoch, OPS(f)->high_watermark(fp->p), false);
            fp->state = F_FETCHING;
        } else {
            req->Topics[real] = req->Topics[i];
            fp->round = round;
            fp->asked_epoch = epochs[i];
            fp->asked_latest = asked[i];
            real++;
        }
    }
    req->TopicsCount = real;
    if (real == 0) {
        gr_arena_free(&a);
        return 0;
    }
    pthread_mutex_unlock(&f->lock);
    void *body = NULL;
    uint8_t *frame = NULL;
    int timeout = f->fm->cfg.socket_timeout_ms;
    int rc = exchange(f, GR_API_OFFSET_FOR_LEADER_EPOCH, OFLE_VERSION, req, &a, &body, &frame, timeout);
    pthread_mutex_lock(&f->lock);
    if (rc == 0) {
        struct OffsetForLeaderEpochResponse *resp = body;
        for (int t = 0; t < resp->TopicsCount; t++) {
            for (int i = 0; i < resp->Topics[t].PartitionsCount; i++) {
                const struct OffsetForLeaderEpochResponse_EpochEndOffset *res =
                    &resp->Topics[t].Partitions[i];
                struct fpart *fp = find_part(f, resp->Topics[t].Topic ? resp->Topics[t].Topic : "", res->Partition);
                if (!fp || fp->state != F_TRUNCATING) continue;
                /* Only apply answers to what this request asked at the same leader epoch. */
                if (fp->round == round && fp->asked_epoch == fp->leader_epoch)
                    apply_epoch_answer(f, fp, fp->asked_latest, res);
            }
        }
    }
    free(frame);
    gr_arena_free(&a);
    return rc;
}

/* ---- out of range ---- */

/* Asks the leader for one offset (ListOffsets, ReplicaId = us). f->lock NOT held. */
static int leader_offset(struct fetcher *f, const char *topic, int32_t partition, int32_t leader_epoch, int64_t ts,
                         int64_t *out) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct ListOffsetsRequest *req = gr_proto_new(&a, &gr_desc_ListOffsetsRequest);
    req->ReplicaId = f->fm->cfg.broker_id;
    req->IsolationLevel = 0;
    req->TopicsCount = 1;
    req->Topics = gr_arena_alloc(&a, sizeof *req->Topics);
    req->Topics[0].Name = gr_arena_strdup(&a, topic);
    req->Topics[0].PartitionsCount = 1;
    req->Topics[0].Partitions = gr_arena_alloc(&a, sizeof *req->Topics[0].Partitions);
    req->Topics[0].Partitions[0].PartitionIndex = partition;
    req->Topics[0].Partitions[0].CurrentLeaderEpoch = leader_epoch;
    req->Topics[0].Partitions[0].Timestamp = ts;
    req->Topics[0].Partitions[0].MaxNumOffsets = 1;
    void *body = NULL;
    uint8_t *frame = NULL;
    int timeout = f->fm->cfg.socket_timeout_ms;
    int rc = exchange(f, GR_API_LIST_OFFSETS, LIST_OFFSETS_VERSION, req, &a, &body, &frame, timeout);
    if (rc == 0) {
        struct ListOffsetsResponse *resp = body;
        rc = GR_EPROTO;
        if (resp->TopicsCount == 1 && resp->Topics[0].PartitionsCount == 1) {
            const struct ListOffsetsResponse_ListOffsetsPartitionResponse *pr = &resp->Topics[0].Partitions[0];
            if (pr->ErrorCode == GR_KERR_NONE) {
                *out = pr->Offset;
                rc = 0;
            } else {
                rc = -EAGAIN;
            }
        }
    }
    free(frame);
    gr_arena_free(&a);
    return rc;
}

/* Kafka's handleOutOfRangeError. f->lock held (released around the requests). */
static int handle_out_of_range(struct fetcher *f, struct fpart *fp_in) {
    char *topic = gr_strdup(fp_in->topic);
    int32_t partition = fp_in->partition, epoch = fp_in->leader_epoch;
    pthread_mutex_unlock(&f->lock);
    int64_t leader_end = -1, leader_start = -1;
    int rc = leader_offset(f, topic, partition, epoch, LATEST_TIMESTAMP, &leader_end);
    if (rc == 0) rc = leader_offset(f, topic, partition, epoch, EARLIEST_TIMESTAMP, &leader_start);
    pthread_mutex_lock(&f->lock);
    struct fpart *fp = find_part(f, topic, partition);
    free(topic);
    if (!fp || fp->leader_epoch != epoch) return 0;
    if (rc < 0) {
        fp->delay_until_ms = gr_mono_ms() + backoff_ms(f);
        return rc == -EAGAIN ? 0 : rc;
    }
    int64_t leo = OPS(f)->log_end_offset(fp->p);
    if (leader_end < leo) {
        /* Cannot happen with epoch-based truncation unless an unclean election lost data. */
        gr_warn(LOGGER, "[%s] %s-%d: leader's log end offset %" PRId64 " is below ours %" PRId64 "; truncating",
                f->name, fp->topic, fp->partition, leader_end, leo);
        OPS(f)->truncate(f->fm->ctx, fp->p, epoch, leader_end, false);
    } else if (leo < leader_start) {
        gr_info(LOGGER, "[%s] %s-%d: our log end offset %" PRId64 " is below the leader's log start offset %" PRId64
                        "; restarting the log there",
                f->name, fp->topic, fp->partition, leo, leader_start);
        OPS(f)->truncate(f->fm->ctx, fp->p, epoch, leader_start, true);
    }
    fp->out_of_range = false;
    return 0;
}

/* ---- fetching ---- */

/* Fetch v13+: the partitions of a request (one topic entry each, before the session handler
 * narrows it) by (topic id, partition), to name the topics of the answer, which come by id. */
struct id_names {
    int n;
    char (*key)[GR_UUID_STR_LEN + 1]; /* the id's text */
    int32_t *partition;
    const char **topic;
    struct gr_tpi idx;
};

static bool id_names_eq(const void *ctx, int32_t pos, const char *key, int32_t partition) {
    const struct id_names *m = ctx;
    return m->partition[pos] == partition && strcmp(m->key[pos], key) == 0;
}

static void id_names_build(struct id_names *m, const struct FetchRequest *req, struct gr_arena *a) {
    memset(m, 0, sizeof *m);
    int n = GR_MAX(req->TopicsCount, 0);
    m->key = gr_arena_alloc(a, (size_t)(n + 1) * sizeof *m->key);
    m->partition = gr_arena_alloc(a, (size_t)(n + 1) * sizeof *m->partition);
    m->topic = gr_arena_alloc(a, (size_t)(n + 1) * sizeof *m->topic);
    gr_tpi_reset(&m->idx, n);
    for (int t = 0; t < n; t++) {
        const struct FetchRequest_FetchTopic *ft = &req->Topics[t];
        if (ft->PartitionsCount != 1) continue; /* do_fetch makes one entry per partition */
        struct gr_uuid u;
        memcpy(u.b, ft->TopicId, sizeof u.b);
        gr_uuid_to_string(&u, m->key[m->n]);
        m->partition[m->n] = ft->Partitions[0].Partition;
        m->topic[m->n] = ft->Topic;
        gr_tpi_insert(&m->idx, m->key[m->n], m->partition[m->n], m->n);
        m->n++;
    }
}

/* The name of (id, partition) in the request, or NULL (an answer for a partition not asked). */
static const char *id_names_find(const struct id_names *m, const uint8_t id[16], int32_t partition) {
    struct gr_uuid u;
    char key[GR_UUID_STR_LEN + 1];
    memcpy(u.b, id, sizeof u.b);
    gr_uuid_to_string(&u, key);
    int32_t pos = gr_tpi_find(&m->idx, key, partition, id_names_eq, m);
    return pos >= 0 ? m->topic[pos] : NULL;
}

/* Kafka's AbstractFetcherThread.truncateOnFetchResponse (KIP-595): the leader answered our
 * LastFetchedEpoch with the end of the largest epoch it shares with us, as OffsetForLeaderEpoch
 * would (no records came with it): the same truncation (apply_epoch_answer, which may cut below
 * our high watermark, as Kafka's truncate does). If we do not have that epoch the log is cut
 * back to the end of our largest epoch below it, and the next fetch, with that epoch as
 * LastFetchedEpoch, continues the search. f->lock held. */
static void truncate_on_fetch(struct fetcher *f, struct fpart *fp, const struct FetchResponse_EpochEndOffset *d) {
    gr_info(LOGGER, "[%s] %s-%d: the leader's log diverges from ours (its epoch %d ends at %" PRId64
                    ", our log end offset %" PRId64 "); truncating",
            f->name, fp->topic, fp->partition, d->Epoch, d->EndOffset, OPS(f)->log_end_offset(fp->p));
    struct OffsetForLeaderEpochResponse_EpochEndOffset res = {
        .ErrorCode = GR_KERR_NONE, .Partition = fp->partition, .LeaderEpoch = d->Epoch, .EndOffset = d->EndOffset};
    apply_epoch_answer(f, fp, d->Epoch, &res);
    fp->state = F_FETCHING; /* not done: the next fetch asks with the epoch we cut back to */
}

static int do_fetch(struct fetcher *f) {
    const struct gr_fetcher_config *cfg = &f->fm->cfg;
    int64_t now = gr_mono_ms();
    for (int i = 0; i < f->nparts; i++) {
        struct fpart *fp = &f->parts[i];
        if (fp->state == F_FETCHING && fp->out_of_range && fp->delay_until_ms <= now) {
            int rc = handle_out_of_range(f, fp);
            if (rc < 0) return rc;
            i = -1; /* the array may have changed while unlocked */
            now = gr_mono_ms();
        }
    }
    /* follower.replication.throttled.rate: out-of-sync throttled replicas wait while it is exceeded */
    bool exceeded = OPS(f)->quota_exceeded && OPS(f)->quota_exceeded(f->fm->ctx);
    for (int i = 0; i < f->nparts; i++) {
        struct fpart *fp = &f->parts[i];
        if (fp->state != F_FETCHING || fp->delay_until_ms > now) continue;
        fp->throttled = OPS(f)->throttled && OPS(f)->throttled(f->fm->ctx, fp->topic, fp->partition);
        if (!exceeded || !fp->throttled) continue; /* the log end (a lock per partition) only when it matters */
        bool in_sync = fp->leader_hw >= 0 && OPS(f)->log_end_offset(fp->p) >= fp->leader_hw;
        if (!in_sync) fp->delay_until_ms = now + THROTTLE_RECHECK_MS;
    }
    int n = 0;
    for (int i = 0; i < f->nparts; i++)
        if (f->parts[i].state == F_FETCHING && f->parts[i].delay_until_ms <= now) n++;
    if (n == 0) return 0;
    struct gr_arena a;
    gr_arena_init(&a);
    struct FetchRequest *req = gr_proto_new(&a, &gr_desc_FetchRequest);
    req->ReplicaId = cfg->broker_id;
    /* A partition backing off (e.g. a new one whose leader was not ready yet) must not wait out
     * a whole long poll of the others: wait at most until it is due again. */
    int64_t due = INT64_MAX;
    for (int i = 0; i < f->nparts; i++)
        if (f->parts[i].delay_until_ms > now) due = GR_MIN(due, f->parts[i].delay_until_ms);
    req->MaxWaitMs = (int32_t)GR_MIN((int64_t)cfg->wait_max_ms, due == INT64_MAX ? INT64_MAX : due - now);
    if (now - f->last_add_ms < ADD_BURST_MS) req->MaxWaitMs = GR_MIN(req->MaxWaitMs, burst_wait_ms(f));
    f->inflight_wait_ms = req->MaxWaitMs;
    req->MinBytes = cfg->min_bytes;
    req->MaxBytes = cfg->response_max_bytes;
    req->IsolationLevel = 0;
    req->SessionId = 0;
    req->SessionEpoch = -1;
    req->TopicsCount = n;
    req->Topics = gr_arena_alloc(&a, (size_t)n * sizeof *req->Topics);
    req->ForgottenTopicsDataCount = 0;
    req->RackId = gr_arena_strdup(&a, "");
    uint64_t round = ++f->round;
    int k = 0;
    int16_t top = (int16_t)GR_MAX(cfg->fetch_version, 11); /* Gregor's fetcher speaks 11 and up */
    bool by_id = top >= 13; /* every partition has a topic id (checked below) */
    for (int i = 0; i < f->nparts && k < n; i++) {
        struct fpart *fp = &f->parts[i];
        if (fp->state != F_FETCHING || fp->delay_until_ms > now) continue;
        struct FetchRequest_FetchTopic *t = &req->Topics[k];
        t->Topic = gr_arena_strdup(&a, fp->topic);
        t->PartitionsCount = 1;
        t->Partitions = gr_arena_alloc(&a, sizeof *t->Partitions);
        t->Partitions[0].Partition = fp->partition;
        t->Partitions[0].CurrentLeaderEpoch = fp->leader_epoch;
        t->Partitions[0].FetchOffset = OPS(f)->log_end_offset(fp->p);
        t->Partitions[0].LastFetchedEpoch = TRUNCATION_ON_FETCH(f) ? OPS(f)->latest_epoch(fp->p) : -1;
        by_id = by_id && OPS(f)->topic_id && OPS(f)->topic_id(fp->p, t->TopicId);
        t->Partitions[0].LogStartOffset = OPS(f)->log_start_offset(fp->p);
        t->Partitions[0].PartitionMaxBytes = cfg->max_bytes;
        fp->round = round;
        fp->asked_epoch = fp->leader_epoch;
        fp->asked_offset = t->Partitions[0].FetchOffset;
        k++;
    }
    /* Kafka's RemoteLeaderEndPoint.buildFetch: v13+ only if every partition has a topic id */
    int16_t version = by_id ? top : (int16_t)GR_MIN(top, 12);
    req->ReplicaState.ReplicaId = cfg->broker_id; /* v15+ (ReplicaId before) */
    req->ReplicaState.ReplicaEpoch = -1;          /* KRaft's broker epoch */
    struct id_names names;
    if (by_id) id_names_build(&names, req, &a);
    gr_fsh_build(&f->session, req, &a, by_id); /* KIP-227: only what changed since the last round */
    f->in_fetch = true;
    pthread_mutex_unlock(&f->lock);
    void *body = NULL;
    uint8_t *frame = NULL;
    int timeout = cfg->socket_timeout_ms + req->MaxWaitMs;
    int rc = exchange(f, GR_API_FETCH, version, req, &a, &body, &frame, timeout);
    pthread_mutex_lock(&f->lock);
    if (rc != 0) gr_fsh_handle_error(&f->session);
    f->in_fetch = false;
    bool kicked = f->kicked; /* interrupted for new partitions: no back-off, fetch again at once */
    f->kicked = false;
    if (kicked && rc == 0) gr_kafka_client_disconnect(f->kc); /* shut after the answer arrived */
    if (rc == 0) {
        struct FetchResponse *resp = body;
        gr_fsh_handle_response(&f->session, resp);
        gr_meter_mark(f->fetch_rate, 1);
        now = gr_mono_ms();
        for (int t = 0; t < resp->ResponsesCount; t++) {
            const struct FetchResponse_FetchableTopicResponse *tr = &resp->Responses[t];
            for (int i = 0; i < tr->PartitionsCount; i++) {
                const struct FetchResponse_PartitionData *pr = &tr->Partitions[i];
                const char *topic = by_id ? id_names_find(&names, tr->TopicId, pr->PartitionIndex) : tr->Topic;
                struct fpart *fp = topic ? find_part(f, topic, pr->PartitionIndex) : NULL;
                if (!fp || fp->state != F_FETCHING) continue;
                if (fp->round != round || fp->asked_epoch != fp->leader_epoch) continue; /* re-added meanwhile */
                int64_t asked_offset = fp->asked_offset;
                switch (pr->ErrorCode) {
                case GR_KERR_NONE: {
                    fp->err_backoff_ms = 0;
                    fp->leader_hw = pr->HighWatermark;
                    if (fp->throttled && OPS(f)->quota_record && pr->Records.len > 0)
                        OPS(f)->quota_record(f->fm->ctx, (size_t)pr->Records.len);
                    if (OPS(f)->log_end_offset(fp->p) != asked_offset) break; /* changed under us */
                    if (version >= 12 && pr->DivergingEpoch.Epoch >= 0) {
                        truncate_on_fetch(f, fp, &pr->DivergingEpoch);
                        break;
                    }
                    int arc = OPS(f)->append(f->fm->ctx, fp->p, fp->leader_epoch, pr->Records.p,
                                                    pr->Records.len > 0 ? (size_t)pr->Records.len : 0,
                                                    pr->HighWatermark, pr->LogStartOffset);
                    if (arc == -ERANGE) {
                        /* Kafka delays a partition whose fetched data failed (fetchBackOffMs):
                         * should the truncation not help, the fetch repeats at that pace. Not
                         * part_backoff: its doubling restarts at 5 ms, since err_backoff_ms is
                         * reset above and by the truncation's successful OffsetForLeaderEpoch, so
                         * a lasting mismatch looped every 5 ms with a warning each time. */
                        int64_t ms = backoff_ms(f);
                        fp->delay_until_ms = now + ms;
                        gr_warn(LOGGER,
                                "[%s] %s-%d: fetched data does not start at our log end offset; "
                                "truncating again in %" PRId64 " ms",
                                f->name, fp->topic, fp->partition, ms);
                        fp->state = F_TRUNCATING;
                    } else if (arc < 0 && arc != -ESTALE) {
                        fp->delay_until_ms = now + backoff_ms(f);
                    } else if (arc >= 0) {
                        fp->lag = GR_MAX(0, pr->HighWatermark - OPS(f)->log_end_offset(fp->p));
                    }
                    break;
                }
                case GR_KERR_OFFSET_OUT_OF_RANGE:
                    fp->out_of_range = true;
                    break;
                default: {
                    int64_t ms = part_backoff(f, fp, now);
                    gr_info(LOGGER, "[%s] fetch of %s-%d failed with %s; backing off %" PRId64 " ms", f->name,
                            fp->topic, fp->partition, gr_kerr_name(pr->ErrorCode), ms);
                    break;
                }
                }
            }
        }
    }
    if (by_id) gr_tpi_free(&names.idx);
    free(frame);
    gr_arena_free(&a);
    return kicked ? 0 : rc;
}

static void *fetcher_main(void *arg) {
    struct fetcher *f = arg;
    char tname[16];
    snprintf(tname, sizeof tname, "fetcher-%d", f->leader_id);
    pthread_setname_np(pthread_self(), tname);
    int64_t conn_backoff_until = 0;
    pthread_mutex_lock(&f->lock);
    while (!f->stop) {
        int64_t now = gr_mono_ms();
        if (f->nparts == 0 || now < conn_backoff_until) {
            timed_wait(&f->cond, &f->lock, f->nparts == 0 ? 1000 : conn_backoff_until - now);
            continue;
        }
        int rc = do_truncation(f);
        if (rc == 0 && !f->stop) rc = do_fetch(f);
        if (rc < 0 && !f->stop) {
            gr_warn(LOGGER, "[%s] cannot reach broker %d: %s; retrying in %" PRId64 " ms", f->name, f->leader_id,
                    gr_strerror(rc), backoff_ms(f));
            conn_backoff_until = gr_mono_ms() + backoff_ms(f);
            continue;
        }
        /* Nothing ready (all partitions backing off)? Sleep until the earliest is ready. */
        now = gr_mono_ms();
        int64_t next = INT64_MAX;
        for (int i = 0; i < f->nparts; i++) next = GR_MIN(next, f->parts[i].delay_until_ms);
        if (next > now && next != INT64_MAX) timed_wait(&f->cond, &f->lock, GR_MIN(next - now, (int64_t)1000));
    }
    pthread_mutex_unlock(&f->lock);
    gr_kafka_client_disconnect(f->kc);
    return NULL;
}

/* ---- manager ---- */

static struct fetcher *fetcher_new(struct gr_fetcher_manager *fm, int32_t leader) {
    struct fetcher *f = gr_calloc(1, sizeof *f);
    f->fm = fm;
    f->leader_id = leader;
    pthread_mutex_init(&f->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&f->cond, &ca);
    pthread_condattr_destroy(&ca);
    snprintf(f->name, sizeof f->name, "ReplicaFetcherThread-0-%d", leader);
    snprintf(f->rate_name, sizeof f->rate_name, "%p", (void *)f); /* unique while f lives */
    f->fetch_rate = gr_metrics_meter(fm->rates, f->rate_name);
    char client_id[48];
    snprintf(client_id, sizeof client_id, "broker-%d-fetcher", fm->cfg.broker_id);
    char prefix[80];
    snprintf(prefix, sizeof prefix, "[%s]", f->name);
    struct gr_kafka_client_config kcfg = {.client_id = client_id, .logger = LOGGER, .log_prefix = prefix,
                                          .connect_timeout_ms = fm->cfg.socket_timeout_ms,
                                          .request_timeout_ms = fm->cfg.socket_timeout_ms};
    f->kc = gr_kafka_client_new(&kcfg);
    if (pthread_create(&f->thread, NULL, fetcher_main, f) != 0) {
        gr_error(LOGGER, "cannot start a fetcher thread for broker %d", leader);
        gr_kafka_client_free(f->kc);
        gr_metrics_remove(fm->rates, f->rate_name);
        pthread_cond_destroy(&f->cond);
        pthread_mutex_destroy(&f->lock);
        free(f);
        return NULL;
    }
    return f;
}

static void fetcher_stop_free(struct fetcher *f) {
    gr_kafka_client_shutdown(f->kc); /* wakes the thread out of an exchange */
    pthread_mutex_lock(&f->lock);
    f->stop = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    pthread_join(f->thread, NULL);
    gr_kafka_client_free(f->kc);
    for (int i = 0; i < f->nparts; i++) fpart_release(f->fm, &f->parts[i]);
    free(f->parts);
    gr_fsh_free(&f->session);
    free(f->idx);
    gr_metrics_remove(f->fm->rates, f->rate_name);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

struct gr_fetcher_manager *gr_fetcher_manager_new(const struct gr_fetcher_config *cfg, const struct gr_fetcher_ops *ops,
                                                  void *ctx) {
    struct gr_fetcher_manager *fm = gr_calloc(1, sizeof *fm);
    fm->cfg = *cfg;
    fm->ops = ops;
    fm->ctx = ctx;
    fm->rates = gr_metrics_new();
    pthread_mutex_init(&fm->lock, NULL);
    return fm;
}

void gr_fetcher_manager_free(struct gr_fetcher_manager *fm) {
    if (!fm) return;
    pthread_mutex_lock(&fm->lock);
    struct fetcher *f = fm->fetchers;
    fm->fetchers = NULL;
    pthread_mutex_unlock(&fm->lock);
    while (f) {
        struct fetcher *next = f->next;
        fetcher_stop_free(f);
        f = next;
    }
    pthread_mutex_destroy(&fm->lock);
    gr_metrics_free(fm->rates);
    free(fm);
}

void gr_fetcher_remove_many(struct gr_fetcher_manager *fm, const struct gr_fetcher_tp *v, int n) {
    if (!fm || n <= 0) return;
    pthread_mutex_lock(&fm->lock);
    for (struct fetcher *f = fm->fetchers; f; f = f->next) {
        pthread_mutex_lock(&f->lock);
        for (int i = 0; i < n && f->nparts > 0; i++) remove_part_locked(f, v[i].topic, v[i].partition);
        pthread_mutex_unlock(&f->lock);
    }
    pthread_mutex_unlock(&fm->lock);
}

void gr_fetcher_remove(struct gr_fetcher_manager *fm, const char *topic, int32_t partition) {
    struct gr_fetcher_tp tp = {.topic = topic, .partition = partition};
    gr_fetcher_remove_many(fm, &tp, 1);
}

/* The fetcher of `leader`, started if needed; fm->lock held. NULL if no thread could start. */
static struct fetcher *fetcher_for_locked(struct gr_fetcher_manager *fm, int32_t leader) {
    struct fetcher *f = fm->fetchers;
    while (f && f->leader_id != leader) f = f->next;
    if (!f && (f = fetcher_new(fm, leader)) != NULL) {
        f->next = fm->fetchers;
        fm->fetchers = f;
    }
    return f;
}

/* Appends a new Truncating entry holding reference p; f->lock held, not already followed. */
static void add_part_locked(struct fetcher *f, const char *topic, int32_t partition, int32_t leader_epoch,
                            gr_fetcher_part *p) {
    if (f->nparts == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 16;
        f->parts = gr_realloc(f->parts, (size_t)f->cap * sizeof *f->parts);
    }
    if ((uint32_t)(f->nparts + 1) * 2 > f->idx_cap) idx_rebuild(f, f->nparts + 1);
    struct fpart *fp = &f->parts[f->nparts++];
    memset(fp, 0, sizeof *fp);
    const char *borrowed = OPS(f)->topic ? OPS(f)->topic(p) : NULL;
    fp->topic = borrowed ? borrowed : gr_strdup(topic);
    fp->topic_owned = !borrowed;
    fp->partition = partition;
    fp->hash = part_hash(topic, partition);
    f->idx[idx_slot(f, fp->hash, topic, partition)] = (int32_t)(fp - f->parts);
    fp->leader_epoch = leader_epoch;
    /* Kafka 2.7+ (AbstractFetcherThread, isTruncationOnFetchSupported): a log that knows its latest
     * epoch starts fetching at once with it as LastFetchedEpoch, and the leader answers a
     * divergence as DivergingEpoch (truncate_on_fetch); otherwise OffsetForLeaderEpoch first. */
    fp->state = TRUNCATION_ON_FETCH(f) && OPS(f)->latest_epoch(p) >= 0 ? F_FETCHING : F_TRUNCATING;
    fp->leader_hw = -1;
    fp->lag = -1;
    fp->p = p;
}

/* New partitions for f: wake its thread, and interrupt a waiting Fetch that may wait longer than
 * KICK_MIN_INTERVAL_MS (its long poll does not include them). f->lock held. */
static void kick_locked(struct fetcher *f) {
    pthread_cond_broadcast(&f->cond);
    f->last_add_ms = gr_mono_ms();
    if (f->in_fetch && !f->kicked && f->inflight_wait_ms > burst_wait_ms(f)) {
        f->kicked = true;
        gr_kafka_client_interrupt(f->kc);
    }
}

void gr_fetcher_add_many(struct gr_fetcher_manager *fm, const struct gr_fetcher_tp *v, int n) {
    if (!fm || n <= 0) return;
    gr_fetcher_remove_many(fm, v, n);
    pthread_mutex_lock(&fm->lock);
    bool leaving = fm->leaving;
    pthread_mutex_unlock(&fm->lock);
    if (leaving) return; /* the broker is shutting down: nothing to follow any more */
    /* References first (the replica manager's map lock, not under any fetcher lock). */
    gr_fetcher_part **refs = gr_malloc((size_t)n * sizeof *refs);
    for (int i = 0; i < n; i++) refs[i] = fm->ops->get(fm->ctx, v[i].topic, v[i].partition);
    uint8_t *done = gr_calloc((size_t)n, 1); /* 1 handled, 2 added */
    pthread_mutex_lock(&fm->lock);
    /* One pass per distinct leader: a LeaderAndIsr names a handful of leaders. */
    for (int i = 0; i < n; i++) {
        if (done[i]) continue;
        int32_t leader = v[i].leader;
        struct fetcher *f = fetcher_for_locked(fm, leader);
        if (f) pthread_mutex_lock(&f->lock);
        int added = 0;
        for (int j = i; j < n; j++) {
            if (done[j] || v[j].leader != leader) continue;
            done[j] = 1;
            if (!refs[j]) continue; /* not hosted (any more) */
            if (!f) {
                fm->ops->release(refs[j]);
                continue;
            }
            add_part_locked(f, v[j].topic, v[j].partition, v[j].leader_epoch, refs[j]);
            done[j] = 2;
            added++;
        }
        if (f) {
            if (added) kick_locked(f);
            pthread_mutex_unlock(&f->lock);
        }
    }
    pthread_mutex_unlock(&fm->lock);
    /* One line per leader, as Kafka's addFetcherForPartitions logs the set (a line per partition
     * was one write(2) per partition of a 100k-partition LeaderAndIsr). */
    for (int i = 0; i < n; i++) {
        if (done[i] != 2) continue;
        int count = 0, last = i;
        for (int j = i; j < n; j++)
            if (done[j] == 2 && v[j].leader == v[i].leader) {
                count++;
                last = j;
                if (j > i) done[j] = 1;
            }
        if (count == 1)
            gr_info(LOGGER, "[ReplicaFetcherManager on broker %d] Added fetcher to broker %d for partition %s-%d at "
                            "leader epoch %d",
                    fm->cfg.broker_id, v[i].leader, v[i].topic, v[i].partition, v[i].leader_epoch);
        else
            gr_info(LOGGER, "[ReplicaFetcherManager on broker %d] Added fetcher to broker %d for %d partitions "
                            "(%s-%d at leader epoch %d ... %s-%d at leader epoch %d)",
                    fm->cfg.broker_id, v[i].leader, count, v[i].topic, v[i].partition, v[i].leader_epoch,
                    v[last].topic, v[last].partition, v[last].leader_epoch);
    }
    free(done);
    free(refs);
}

void gr_fetcher_stop_adding(struct gr_fetcher_manager *fm) {
    if (!fm) return;
    pthread_mutex_lock(&fm->lock);
    fm->leaving = true;
    pthread_mutex_unlock(&fm->lock);
}

void gr_fetcher_add(struct gr_fetcher_manager *fm, const char *topic, int32_t partition, int32_t leader,
                    int32_t leader_epoch) {
    struct gr_fetcher_tp tp = {.topic = topic, .partition = partition, .leader = leader, .leader_epoch = leader_epoch};
    gr_fetcher_add_many(fm, &tp, 1);
}

void gr_fetcher_shutdown_idle(struct gr_fetcher_manager *fm) {
    if (!fm) return;
    struct fetcher *idle = NULL;
    pthread_mutex_lock(&fm->lock);
    struct fetcher **pp = &fm->fetchers;
    while (*pp) {
        struct fetcher *f = *pp;
        pthread_mutex_lock(&f->lock);
        bool empty = f->nparts == 0;
        pthread_mutex_unlock(&f->lock);
        if (empty) {
            *pp = f->next;
            f->next = idle;
            idle = f;
        } else {
            pp = &f->next;
        }
    }
    pthread_mutex_unlock(&fm->lock);
    while (idle) {
        struct fetcher *next = idle->next;
        fetcher_stop_free(idle);
        idle = next;
    }
}

int gr_fetcher_count(struct gr_fetcher_manager *fm) {
    int n = 0;
    pthread_mutex_lock(&fm->lock);
    for (struct fetcher *f = fm->fetchers; f; f = f->next) {
        pthread_mutex_lock(&f->lock);
        n += f->nparts;
        pthread_mutex_unlock(&f->lock);
    }
    pthread_mutex_unlock(&fm->lock);
    return n;
}

void gr_fetcher_stats(struct gr_fetcher_manager *fm, double *min_fetch_rate, int64_t *max_lag) {
    *min_fetch_rate = 0;
    *max_lag = 0;
    if (!fm) return;
    bool first = true;
    pthread_mutex_lock(&fm->lock);
    for (struct fetcher *f = fm->fetchers; f; f = f->next) {
        double r = f->fetch_rate ? gr_meter_one_minute_rate(f->fetch_rate) : 0;
        *min_fetch_rate = first ? r : GR_MIN(*min_fetch_rate, r);
        first = false;
        pthread_mutex_lock(&f->lock);
        for (int i = 0; i < f->nparts; i++) *max_lag = GR_MAX(*max_lag, f->parts[i].lag);
        pthread_mutex_unlock(&f->lock);
    }
    pthread_mutex_unlock(&fm->lock);
}
