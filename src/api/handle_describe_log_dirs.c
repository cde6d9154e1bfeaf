/* DescribeLogDirs (api key 35), versions 0-4, as Kafka 3.9's ReplicaManager.describeLogDirs: one
 * result per configured log dir (absolute path); an offline dir answers KAFKA_STORAGE_ERROR with
 * no topics; an online one lists its partition logs (all, or those the request names) with
 * their size in bytes, offset lag max(0, high watermark - log end offset) and IsFutureKey false
 * (Gregor has no future logs: no alter-replica-log-dirs). Topics with no listed partition in a
 * dir are left out. Without DESCRIBE on the CLUSTER: no results, and from v3 the top-level
 * ErrorCode CLUSTER_AUTHORIZATION_FAILED. v4 (KIP-827): each online dir's TotalBytes and
 * UsableBytes, its file system's size and the space available to unprivileged users (statvfs
 * f_blocks and f_bavail times f_frsize, as Java's FileStore); a dir statvfs fails on answers
 * UNKNOWN_SERVER_ERROR with no topics (Kafka: an IOException); offline dirs keep -1. */
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "api/apis.h"
#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/util.h"
#include "replication/log_dir_failure.h"
#include "replication/replica_manager.h"

struct ld_log {
    int dir_idx;
    char *topic;
    int32_t partition;
    int64_t size, lag;
};

struct ld_collect {
    struct gr_api_req *req;
    const struct DescribeLogDirsRequest *rq;
    struct ld_log *v;
    int n, cap;
};

static bool wanted(const struct DescribeLogDirsRequest *rq, const char *topic, int32_t partition) {
    if (rq->TopicsCount < 0) return true;
    for (int32_t t = 0; t < rq->TopicsCount; t++) {
        const struct DescribeLogDirsRequest_DescribableLogDirTopic *dt = &rq->Topics[t];
        if (!dt->Topic || strcmp(dt->Topic, topic) != 0) continue;
        for (int32_t i = 0; i < dt->PartitionsCount; i++)
            if (dt->Partitions[i] == partition) return true;
    }
    return false;
}

static void collect(void *ctx, const struct gr_rm_log_info *li) {
    struct ld_collect *c = ctx;
    if (!wanted(c->rq, li->topic, li->partition)) return;
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->v = gr_realloc(c->v, (size_t)c->cap * sizeof *c->v);
    }
    c->v[c->n++] = (struct ld_log){li->dir_idx, gr_api_strdup(c->req, li->topic), li->partition, li->size,
                                   GR_MAX(li->high_watermark - li->log_end_offset, 0)};
}

static int cmp_log(const void *a, const void *b) {
    const struct ld_log *x = a, *y = b;
    if (x->dir_idx != y->dir_idx) return x->dir_idx - y->dir_idx;
    int c = strcmp(x->topic, y->topic);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

static char *absolute(struct gr_api_req *req, const char *dir) {
    if (dir[0] == '/') return gr_api_strdup(req, dir);
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return gr_api_strdup(req, dir);
    char *p = gr_api_alloc(req, strlen(cwd) + strlen(dir) + 2);
    strcpy(p, cwd);
    strcat(p, "/");
    strcat(p, dir);
    return p;
}

/* Fills result r with the logs v[*i..] of dir d (v sorted by dir, topic, partition). */
static void fill_dir(struct gr_api_req *req, struct DescribeLogDirsResponse_DescribeLogDirsResult *r,
                     const struct ld_log *v, int n, int *i, int d) {
    int start = *i, end = start, topics = 0;
    while (end < n && v[end].dir_idx == d) {
        if (end == start || strcmp(v[end].topic, v[end - 1].topic) != 0) topics++;
        end++;
    }
    r->TopicsCount = topics;
    r->Topics = gr_api_alloc(req, (size_t)(topics + 1) * sizeof *r->Topics);
    int t = -1;
    for (int k = start; k < end; k++) {
        if (k == start || strcmp(v[k].topic, v[k - 1].topic) != 0) {
            t++;
            int np = 0;
            while (k + np < end && strcmp(v[k + np].topic, v[k].topic) == 0) np++;
            r->Topics[t].Name = v[k].topic;
            r->Topics[t].PartitionsCount = 0;
            r->Topics[t].Partitions = gr_api_alloc(req, (size_t)(np + 1) * sizeof *r->Topics[t].Partitions);
        }
        struct DescribeLogDirsResponse_DescribeLogDirsPartition *p =
            &r->Topics[t].Partitions[r->Topics[t].PartitionsCount++];
        p->PartitionIndex = v[k].partition;
        p->PartitionSize = v[k].size;
        p->OffsetLag = v[k].lag;
        p->IsFutureKey = false;
    }
    *i = end;
}

void gr_handle_describe_log_dirs(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr,
                                 void *body) {
    (void)hdr;
    if (!gr_api_authorized_cluster(req, GR_ACL_OP_DESCRIBE)) { /* no results; v3+: the error */
        struct DescribeLogDirsResponse *empty = gr_api_new_response(req);
        empty->ResultsCount = 0;
        empty->Results = NULL;
        empty->ErrorCode = GR_KERR_CLUSTER_AUTHORIZATION_FAILED;
        gr_api_respond(req, empty);
        return;
    }
    struct ld_collect c = {.req = req, .rq = body};
    gr_rm_foreach_log(b->replica_manager, collect, &c);
    if (c.n > 0) qsort(c.v, (size_t)c.n, sizeof *c.v, cmp_log);
    struct DescribeLogDirsResponse *resp = gr_api_new_response(req);
    resp->ErrorCode = GR_KERR_NONE;
    int nd = b->cfg ? b->cfg->num_log_dirs : 0;
    resp->ThrottleTimeMs = 0;
    resp->ResultsCount = nd;
    resp->Results = gr_api_alloc(req, (size_t)(nd + 1) * sizeof *resp->Results);
    struct gr_ldf *ldf = gr_ldf_of(b);
    int i = 0;
    for (int d = 0; d < nd; d++) {
        struct DescribeLogDirsResponse_DescribeLogDirsResult *r = &resp->Results[d];
        r->LogDir = absolute(req, b->cfg->log_dirs[d]);
        r->TotalBytes = r->UsableBytes = -1;
        while (i < c.n && c.v[i].dir_idx < d) i++;
        struct statvfs fs;
        bool offline = ldf && gr_ldf_dir_offline(ldf, d);
        bool unreadable = !offline && statvfs(b->cfg->log_dirs[d], &fs) != 0;
        if (offline || unreadable) {
            r->ErrorCode = offline ? GR_KERR_KAFKA_STORAGE_ERROR : GR_KERR_UNKNOWN_SERVER_ERROR;
            r->TopicsCount = 0;
            r->Topics = NULL;
            while (i < c.n && c.v[i].dir_idx == d) i++;
            continue;
        }
        r->ErrorCode = GR_KERR_NONE;
        r->TotalBytes = (int64_t)GR_MIN((uint64_t)fs.f_blocks * fs.f_frsize, (uint64_t)INT64_MAX);
        r->UsableBytes = (int64_t)GR_MIN((uint64_t)fs.f_bavail * fs.f_frsize, (uint64_t)INT64_MAX);
        fill_dir(req, r, c.v, c.n, &i, d);
    }
    free(c.v);
    gr_api_respond(req, resp);
}
