/* Replica fetcher threads (see fetcher.h). */
#include "replication/fetcher.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "broker/broker.h"
#include "broker/metadata_cache.h"
#include "replication/replica_internal.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "net/client.h"
#include "protocol/codec.h"

#define LOGGER "kafka.server.ReplicaFetcherThread"
#define FETCH_VERSION 11
#define OFLE_VERSION 3
#define LIST_OFFSETS_VERSION 5

enum fstate { F_TRUNCATING, F_FETCHING };

struct fpart {
    char *topic;
    int32_t partition;
    int32_t leader_epoch;
    enum fstate state;
    int64_t delay_until_ms;
    bool out_of_range; /* ask the leader for its offsets before fetching */
    struct gr_rm_partition *p; /* reference */
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
    struct gr_net_client *cli;
    pthread_mutex_t cli_lock; /* cli pointer, for shutdown from other threads */
    int32_t corr;
    char name[64];
    struct fetcher *next;
};

struct gr_fetcher_manager {
    struct gr_replica_manager *rm;
    struct gr_broker *b;
    pthread_mutex_t lock; /* the list of fetchers */
    struct fetcher *fetchers;
};

static int64_t backoff_ms(struct fetcher *f) {
    int64_t ms = f->fm->b->cfg ? f->fm->b->cfg->replica_fetch_backoff_ms : 1000;
    return ms > 0 ? ms : 1;
}

static void timed_wait(pthread_cond_t *c, pthread_mutex_t *m, int64_t ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(c, m, &ts);
}

static void fpart_release(struct fpart *fp) {
    free(fp->topic);
    gr_rm_partition_unref(fp->p);
}

static struct fpart *find_part(struct fetcher *f, const char *topic, int32_t partition) {
    for (int i = 0; i < f->nparts; i++)
        if (f->parts[i].partition == partition && strcmp(f->parts[i].topic, topic) == 0) return &f->parts[i];
    return NULL;
}

/* Removes the entry; f->lock held. */
static bool remove_part_locked(struct fetcher *f, const char *topic, int32_t partition) {
    struct fpart *fp = find_part(f, topic, partition);
    if (!fp) return false;
    fpart_release(fp);
    *fp = f->parts[--f->nparts];
    return true;
}

/* ---- one exchange with the leader ---- */

static void close_client(struct fetcher *f) {
    pthread_mutex_lock(&f->cli_lock);
    struct gr_net_client *c = f->cli;
    f->cli = NULL;
    pthread_mutex_unlock(&f->cli_lock);
    gr_net_client_close(c);
}

static int ensure_connected(struct fetcher *f) {
    if (f->cli) return 0;
    struct gr_broker *b = f->fm->b;
    const struct gr_listener *l = b->cfg ? gr_config_inter_broker_listener(b->cfg) : NULL;
    char host[256];
    int32_t port;
    if (!b->metadata || !gr_mdc_get_endpoint(b->metadata, f->leader_id, l ? l->name : "PLAINTEXT", host,
                                                        sizeof host, &port))
        return -EHOSTUNREACH;
    struct gr_net_client *c = NULL;
    int timeout = b->cfg ? b->cfg->replica_socket_timeout_ms : 30000;
    int rc = gr_net_client_connect(host, port, timeout, &c);
    if (rc < 0) return rc;
    pthread_mutex_lock(&f->cli_lock);
    f->cli = c;
    bool stop = f->stop;
    pthread_mutex_unlock(&f->cli_lock);
    if (stop) gr_net_client_shutdown(c);
    gr_info(LOGGER, "[%s] connected to broker %d at %s:%d", f->name, f->leader_id, host, port);
    return 0;
}

/* Encodes body as api/ver, sends it and decodes the answer into a. Caller frees *frame. */
static int exchange(struct fetcher *f, int16_t api, int16_t ver, const void *body, struct gr_arena *a, void **resp,
                    uint8_t **frame, int timeout_ms) {
    *frame = NULL;
    int rc = ensure_connected(f);
    if (rc < 0) return rc;
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    int32_t corr = ++f->corr;
    char client_id[48];
    snprintf(client_id, sizeof client_id, "broker-%d-fetcher", f->fm->b->broker_id);
    rc = gr_proto_encode_request(api, ver, corr, client_id, body, &w);
    if (rc < 0) {
        gr_wbuf_free(&w);
        return rc;
    }
    size_t rlen = 0;
    rc = gr_net_client_send_recv(f->cli, w.p, w.len, frame, &rlen, timeout_ms);
    gr_wbuf_free(&w);
    if (rc < 0) {
        close_client(f);
        return rc;
    }
    int32_t rcorr;
    rc = gr_proto_decode_response(api, ver, *frame, rlen, a, &rcorr, resp);
    if (rc < 0) {
        close_client(f);
        free(*frame);
        *frame = NULL;
    }
    return rc;
}

/* ---- truncation (KIP-101/KIP-279) ---- */

/* Applies one OffsetForLeaderEpoch answer to fp; f->lock held. */
static void apply_epoch_answer(struct fetcher *f, struct fpart *fp, int32_t asked_epoch,
                               const struct OffsetForLeaderEpochResponse_OffsetForLeaderPartitionResult *res) {
    struct gr_replica_manager *rm = f->fm->rm;
    int64_t now = gr_mono_ms();
    if (res->ErrorCode != GR_KERR_NONE) {
        gr_info(LOGGER, "[%s] OffsetForLeaderEpoch for %s-%d failed with %s; retrying", f->name, fp->topic,
                fp->partition, gr_kerr_name(res->ErrorCode));
        fp->delay_until_ms = now + backoff_ms(f);
        return;
    }
    int64_t leo = gr_rm_log_end_offset(fp->p);
    int64_t target;
    bool done = true;
    if (res->EndOffset < 0) {
        /* The leader knows nothing of our epoch (cannot happen with a current leader, which
         * always knows its own epoch): fall back to our high watermark, as Kafka does. */
        target = gr_rm_high_watermark(fp->p);
    } else if (res->LeaderEpoch < 0) {
        target = GR_MIN(res->EndOffset, leo);
    } else {
        int64_t my_end;
        int32_t my_epoch;
        gr_rm_end_offset_for_epoch(fp->p, res->LeaderEpoch, &my_end, &my_epoch);
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
    int rc = gr_rm_follower_truncate(rm, fp->p, fp->leader_epoch, target, false);
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
                f->name, fp->topic, fp->partition, gr_rm_log_end_offset(fp->p), leo, res->LeaderEpoch, res->EndOffset);
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
    req->ReplicaId = f->fm->b->broker_id;
    req->TopicsCount = n; /* one topic entry per partition keeps it simple */
    req->Topics = gr_arena_alloc(&a, (size_t)n * sizeof *req->Topics);
    int32_t *asked = gr_arena_alloc(&a, (size_t)n * sizeof *asked);
    int32_t *epochs = gr_arena_alloc(&a, (size_t)n * sizeof *epochs);
    int k = 0;
    for (int i = 0; i < f->nparts && k < n; i++) {
        struct fpart *fp = &f->parts[i];
        if (fp->state != F_TRUNCATING || fp->delay_until_ms > now) continue;
        struct OffsetForLeaderEpochRequest_OffsetForLeaderTopic *t = &req->Topics[k];
        t->Name = gr_arena_strdup(&a, fp->topic);
        t->PartitionsCount = 1;
        t->Partitions = gr_arena_alloc(&a, sizeof *t->Partitions);
        t->Partitions[0].PartitionIndex = fp->partition;
        t->Partitions[0].CurrentLeaderEpoch = fp->leader_epoch;
        asked[k] = gr_rm_latest_epoch(fp->p);
        t->Partitions[0].LeaderEpoch = asked[k];
        epochs[k] = fp->leader_epoch;
        k++;
    }
    /* A log without any epoch (empty, or never written in an epoch): nothing can diverge. */
    int real = 0;
    for (int i = 0; i < k; i++) {
        if (asked[i] < 0) {
            struct fpart *fp = find_part(f, req->Topics[i].Name, req->Topics[i].Partitions[0].PartitionIndex);
            if (fp && fp->leader_epoch == epochs[i]) {
                if (gr_rm_log_end_offset(fp->p) > 0)
                    gr_rm_follower_truncate(f->fm->rm, fp->p, fp->leader_epoch, gr_rm_high_watermark(fp->p), false);
                fp->state = F_FETCHING;
            }
        } else {
            req->Topics[real] = req->Topics[i];
            asked[real] = asked[i];
            epochs[real] = epochs[i];
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
    int timeout = f->fm->b->cfg ? f->fm->b->cfg->replica_socket_timeout_ms : 30000;
    int rc = exchange(f, GR_API_OFFSET_FOR_LEADER_EPOCH, OFLE_VERSION, req, &a, &body, &frame, timeout);
    pthread_mutex_lock(&f->lock);
    if (rc == 0) {
        struct OffsetForLeaderEpochResponse *resp = body;
        for (int t = 0; t < resp->TopicsCount; t++) {
            for (int i = 0; i < resp->Topics[t].PartitionsCount; i++) {
                const struct OffsetForLeaderEpochResponse_OffsetForLeaderPartitionResult *res =
                    &resp->Topics[t].Partitions[i];
                struct fpart *fp = find_part(f, resp->Topics[t].Name ? resp->Topics[t].Name : "", res->PartitionIndex);
                if (!fp || fp->state != F_TRUNCATING) continue;
                /* Only apply answers to what we asked at the same leader epoch. */
                int32_t ask = -1;
                bool match = false;
                for (int j = 0; j < real; j++)
                    if (req->Topics[j].Partitions[0].PartitionIndex == fp->partition &&
                        strcmp(req->Topics[j].Name, fp->topic) == 0 && epochs[j] == fp->leader_epoch) {
                        ask = asked[j];
                        match = true;
                    }
                if (match) apply_epoch_answer(f, fp, ask, res);
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
    struct ListOffsetRequest *req = gr_proto_new(&a, &gr_desc_ListOffsetRequest);
    req->ReplicaId = f->fm->b->broker_id;
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
    int timeout = f->fm->b->cfg ? f->fm->b->cfg->replica_socket_timeout_ms : 30000;
    int rc = exchange(f, GR_API_LIST_OFFSETS, LIST_OFFSETS_VERSION, req, &a, &body, &frame, timeout);
    if (rc == 0) {
        struct ListOffsetResponse *resp = body;
        rc = GR_EPROTO;
        if (resp->TopicsCount == 1 && resp->Topics[0].PartitionsCount == 1) {
            const struct ListOffsetResponse_ListOffsetPartitionResponse *pr = &resp->Topics[0].Partitions[0];
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
    int rc = leader_offset(f, topic, partition, epoch, GR_LIST_OFFSETS_LATEST, &leader_end);
    if (rc == 0) rc = leader_offset(f, topic, partition, epoch, GR_LIST_OFFSETS_EARLIEST, &leader_start);
    pthread_mutex_lock(&f->lock);
    struct fpart *fp = find_part(f, topic, partition);
    free(topic);
    if (!fp || fp->leader_epoch != epoch) return 0;
    if (rc < 0) {
        fp->delay_until_ms = gr_mono_ms() + backoff_ms(f);
        return rc == -EAGAIN ? 0 : rc;
    }
    int64_t leo = gr_rm_log_end_offset(fp->p);
    if (leader_end < leo) {
        /* Cannot happen with epoch-based truncation unless an unclean election lost data. */
        gr_warn(LOGGER, "[%s] %s-%d: leader's log end offset %" PRId64 " is below ours %" PRId64 "; truncating",
                f->name, fp->topic, fp->partition, leader_end, leo);
        gr_rm_follower_truncate(f->fm->rm, fp->p, epoch, leader_end, false);
    } else if (leo < leader_start) {
        gr_info(LOGGER, "[%s] %s-%d: our log end offset %" PRId64 " is below the leader's log start offset %" PRId64
                        "; restarting the log there",
                f->name, fp->topic, fp->partition, leo, leader_start);
        gr_rm_follower_truncate(f->fm->rm, fp->p, epoch, leader_start, true);
    }
    fp->out_of_range = false;
    return 0;
}

/* ---- fetching ---- */

static int do_fetch(struct fetcher *f) {
    struct gr_broker *b = f->fm->b;
    const struct gr_config *cfg = b->cfg;
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
    int n = 0;
    for (int i = 0; i < f->nparts; i++)
        if (f->parts[i].state == F_FETCHING && f->parts[i].delay_until_ms <= now) n++;
    if (n == 0) return 0;
    struct gr_arena a;
    gr_arena_init(&a);
    struct FetchRequest *req = gr_proto_new(&a, &gr_desc_FetchRequest);
    req->ReplicaId = b->broker_id;
    req->MaxWaitMs = cfg ? cfg->replica_fetch_wait_max_ms : 500;
    req->MinBytes = cfg ? cfg->replica_fetch_min_bytes : 1;
    req->MaxBytes = cfg ? cfg->replica_fetch_response_max_bytes : 10485760;
    req->IsolationLevel = 0;
    req->SessionId = 0;
    req->SessionEpoch = -1;
    req->TopicsCount = n;
    req->Topics = gr_arena_alloc(&a, (size_t)n * sizeof *req->Topics);
    req->ForgottenTopicsDataCount = 0;
    req->RackId = gr_arena_strdup(&a, "");
    int32_t *epochs = gr_arena_alloc(&a, (size_t)n * sizeof *epochs);
    int k = 0;
    for (int i = 0; i < f->nparts && k < n; i++) {
        struct fpart *fp = &f->parts[i];
        if (fp->state != F_FETCHING || fp->delay_until_ms > now) continue;
        struct FetchRequest_FetchTopic *t = &req->Topics[k];
        t->Topic = gr_arena_strdup(&a, fp->topic);
        t->PartitionsCount = 1;
        t->Partitions = gr_arena_alloc(&a, sizeof *t->Partitions);
        t->Partitions[0].Partition = fp->partition;
        t->Partitions[0].CurrentLeaderEpoch = fp->leader_epoch;
        t->Partitions[0].FetchOffset = gr_rm_log_end_offset(fp->p);
        t->Partitions[0].LastFetchedEpoch = -1;
        t->Partitions[0].LogStartOffset = gr_rm_log_start_offset(fp->p);
        t->Partitions[0].PartitionMaxBytes = cfg ? cfg->replica_fetch_max_bytes : 1048576;
        epochs[k] = fp->leader_epoch;
        k++;
    }
    pthread_mutex_unlock(&f->lock);
    void *body = NULL;
    uint8_t *frame = NULL;
    int timeout = (cfg ? cfg->replica_socket_timeout_ms : 30000) + req->MaxWaitMs;
    int rc = exchange(f, GR_API_FETCH, FETCH_VERSION, req, &a, &body, &frame, timeout);
    pthread_mutex_lock(&f->lock);
    if (rc == 0) {
        struct FetchResponse *resp = body;
        now = gr_mono_ms();
        for (int t = 0; t < resp->ResponsesCount; t++) {
            const struct FetchResponse_FetchableTopicResponse *tr = &resp->Responses[t];
            for (int i = 0; i < tr->PartitionResponsesCount; i++) {
                const struct FetchResponse_FetchablePartitionResponse *pr = &tr->PartitionResponses[i];
                struct fpart *fp = find_part(f, tr->Topic ? tr->Topic : "", pr->Partition);
                if (!fp || fp->state != F_FETCHING) continue;
                int32_t asked_epoch = -2;
                int64_t asked_offset = -1;
                for (int j = 0; j < k; j++)
                    if (req->Topics[j].Partitions[0].Partition == fp->partition &&
                        strcmp(req->Topics[j].Topic, fp->topic) == 0) {
                        asked_epoch = epochs[j];
                        asked_offset = req->Topics[j].Partitions[0].FetchOffset;
                    }
                if (asked_epoch != fp->leader_epoch) continue; /* re-added meanwhile */
                switch (pr->ErrorCode) {
                case GR_KERR_NONE: {
                    if (gr_rm_log_end_offset(fp->p) != asked_offset) break; /* changed under us */
                    int arc = gr_rm_follower_append(f->fm->rm, fp->p, fp->leader_epoch, pr->RecordSet.p,
                                                    pr->RecordSet.len > 0 ? (size_t)pr->RecordSet.len : 0,
                                                    pr->HighWatermark);
                    if (arc == -ERANGE) {
                        gr_warn(LOGGER, "[%s] %s-%d: fetched data does not start at our log end offset; "
                                        "truncating again",
                                f->name, fp->topic, fp->partition);
                        fp->state = F_TRUNCATING;
                    } else if (arc < 0 && arc != -ESTALE) {
                        fp->delay_until_ms = now + backoff_ms(f);
                    }
                    break;
                }
                case GR_KERR_OFFSET_OUT_OF_RANGE:
                    fp->out_of_range = true;
                    break;
                default:
                    gr_info(LOGGER, "[%s] fetch of %s-%d failed with %s; backing off", f->name, fp->topic,
                            fp->partition, gr_kerr_name(pr->ErrorCode));
                    fp->delay_until_ms = now + backoff_ms(f);
                    break;
                }
            }
        }
    }
    free(frame);
    gr_arena_free(&a);
    return rc;
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
    close_client(f);
    return NULL;
}

/* ---- manager ---- */

static struct fetcher *fetcher_new(struct gr_fetcher_manager *fm, int32_t leader) {
    struct fetcher *f = gr_calloc(1, sizeof *f);
    f->fm = fm;
    f->leader_id = leader;
    pthread_mutex_init(&f->lock, NULL);
    pthread_mutex_init(&f->cli_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&f->cond, &ca);
    pthread_condattr_destroy(&ca);
    snprintf(f->name, sizeof f->name, "ReplicaFetcherThread-0-%d", leader);
    if (pthread_create(&f->thread, NULL, fetcher_main, f) != 0) {
        gr_error(LOGGER, "cannot start a fetcher thread for broker %d", leader);
        pthread_cond_destroy(&f->cond);
        pthread_mutex_destroy(&f->cli_lock);
        pthread_mutex_destroy(&f->lock);
        free(f);
        return NULL;
    }
    return f;
}

static void fetcher_stop_free(struct fetcher *f) {
    pthread_mutex_lock(&f->cli_lock);
    f->stop = true;
    if (f->cli) gr_net_client_shutdown(f->cli);
    pthread_mutex_unlock(&f->cli_lock);
    pthread_mutex_lock(&f->lock);
    f->stop = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    pthread_join(f->thread, NULL);
    for (int i = 0; i < f->nparts; i++) fpart_release(&f->parts[i]);
    free(f->parts);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->cli_lock);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

struct gr_fetcher_manager *gr_fetcher_manager_new(struct gr_replica_manager *rm, struct gr_broker *b) {
    struct gr_fetcher_manager *fm = gr_calloc(1, sizeof *fm);
    fm->rm = rm;
    fm->b = b;
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
    free(fm);
}

void gr_fetcher_remove(struct gr_fetcher_manager *fm, const char *topic, int32_t partition) {
    if (!fm) return;
    pthread_mutex_lock(&fm->lock);
    for (struct fetcher *f = fm->fetchers; f; f = f->next) {
        pthread_mutex_lock(&f->lock);
        bool removed = remove_part_locked(f, topic, partition);
        pthread_mutex_unlock(&f->lock);
        if (removed) break;
    }
    pthread_mutex_unlock(&fm->lock);
}

void gr_fetcher_add(struct gr_fetcher_manager *fm, const char *topic, int32_t partition, int32_t leader,
                    int32_t leader_epoch) {
    if (!fm) return;
    gr_fetcher_remove(fm, topic, partition);
    struct gr_rm_partition *p = gr_rm_get_partition(fm->rm, topic, partition);
    if (!p) return;
    pthread_mutex_lock(&fm->lock);
    struct fetcher *f = fm->fetchers;
    while (f && f->leader_id != leader) f = f->next;
    if (!f) {
        f = fetcher_new(fm, leader);
        if (!f) {
            pthread_mutex_unlock(&fm->lock);
            gr_rm_partition_unref(p);
            return;
        }
        f->next = fm->fetchers;
        fm->fetchers = f;
    }
    pthread_mutex_lock(&f->lock);
    if (f->nparts == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 16;
        f->parts = gr_realloc(f->parts, (size_t)f->cap * sizeof *f->parts);
    }
    struct fpart *fp = &f->parts[f->nparts++];
    memset(fp, 0, sizeof *fp);
    fp->topic = gr_strdup(topic);
    fp->partition = partition;
    fp->leader_epoch = leader_epoch;
    fp->state = F_TRUNCATING;
    fp->p = p;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    pthread_mutex_unlock(&fm->lock);
    gr_info(LOGGER, "[ReplicaFetcherManager on broker %d] Added fetcher to broker %d for partition %s-%d at "
                    "leader epoch %d",
            fm->b->broker_id, leader, topic, partition, leader_epoch);
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
