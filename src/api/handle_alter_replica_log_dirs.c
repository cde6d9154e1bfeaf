/* AlterReplicaLogDirs (api key 34), versions 0-2 (v2 flexible, nothing else changed), as
 * Kafka 2.7's KafkaApis and
 * ReplicaManager.alterReplicaLogDirs check it, per partition:
 *
 *   - without ALTER on the CLUSTER: CLUSTER_AUTHORIZATION_FAILED for every partition;
 *   - a destination that is not one of log.dirs (absolute path): LOG_DIR_NOT_FOUND;
 *   - an offline destination dir: KAFKA_STORAGE_ERROR;
 *   - a partition this broker holds no log of: REPLICA_NOT_AVAILABLE;
 *   - a log already in the destination dir: NONE (nothing to move).
 *
 * Not in Gregor: moving a replica's log to another dir of the same broker (Kafka's future
 * replica and ReplicaAlterLogDirsThread) and remembering the preferred dir of a partition not
 * yet created; such a request answers KAFKA_STORAGE_ERROR and is logged. See docs/PROTOCOL.md. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/apis.h"
#include "api/authorize.h"
#include "api/handlers.h"
#include "broker/broker.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "replication/log_dir_failure.h"
#include "replication/replica_manager.h"

#define LOGGER "kafka.server.ReplicaManager"

struct where {
    const char *topic;
    int32_t partition;
    int dir_idx; /* -1: no log here */
};

static void find_log(void *ctx, const struct gr_rm_log_info *li) {
    struct where *w = ctx;
    if (li->partition == w->partition && strcmp(li->topic, w->topic) == 0) w->dir_idx = li->dir_idx;
}

/* Index of the configured log dir whose absolute path is path, or -1. */
static int dir_index(const struct gr_broker *b, const char *path) {
    char cwd[4096];
    if (!path || !b->cfg) return -1;
    for (int d = 0; d < b->cfg->num_log_dirs; d++) {
        const char *dir = b->cfg->log_dirs[d];
        if (dir[0] == '/') {
            if (strcmp(dir, path) == 0) return d;
        } else if (getcwd(cwd, sizeof cwd)) {
            size_t n = strlen(cwd);
            if (strncmp(path, cwd, n) == 0 && path[n] == '/' && strcmp(path + n + 1, dir) == 0) return d;
        }
    }
    return -1;
}

static int16_t alter_one(struct gr_broker *b, int d, const char *path, const char *topic, int32_t partition) {
    if (d < 0) return GR_KERR_LOG_DIR_NOT_FOUND;
    struct gr_ldf *ldf = gr_ldf_of(b);
    if (ldf && gr_ldf_dir_offline(ldf, d)) return GR_KERR_KAFKA_STORAGE_ERROR;
    struct where w = {topic, partition, -1};
    gr_rm_foreach_log(b->replica_manager, find_log, &w);
    if (w.dir_idx < 0) return GR_KERR_REPLICA_NOT_AVAILABLE;
    if (w.dir_idx == d) return GR_KERR_NONE;
    gr_warn(LOGGER, "Unable to alter log dir of %s-%d to %s: moving a replica between log dirs is not supported",
            topic, partition, path);
    return GR_KERR_KAFKA_STORAGE_ERROR;
}

GR_API_HANDLER(gr_handle_alter_replica_log_dirs) {
    (void)hdr;
    const struct AlterReplicaLogDirsRequest *rq = body;
    struct AlterReplicaLogDirsResponse *resp = gr_api_new_response(req);
    bool allowed = gr_api_authorized_cluster(req, GR_ACL_OP_ALTER);
    int32_t nt = 0;
    for (int32_t i = 0; i < rq->DirsCount; i++) nt += GR_MAX(rq->Dirs[i].TopicsCount, 0);
    resp->Results = gr_api_alloc(req, (size_t)(nt + 1) * sizeof *resp->Results);
    resp->ResultsCount = nt;
    int32_t k = 0;
    for (int32_t i = 0; i < rq->DirsCount; i++) {
        const struct AlterReplicaLogDirsRequest_AlterReplicaLogDir *dir = &rq->Dirs[i];
        int d = dir_index(b, dir->Path);
        for (int32_t t = 0; t < dir->TopicsCount; t++, k++) {
            const struct AlterReplicaLogDirsRequest_AlterReplicaLogDirTopic *tp = &dir->Topics[t];
            struct AlterReplicaLogDirsResponse_AlterReplicaLogDirTopicResult *r = &resp->Results[k];
            int32_t np = GR_MAX(tp->PartitionsCount, 0);
            r->TopicName = tp->Name ? tp->Name : "";
            r->PartitionsCount = np;
            r->Partitions = gr_api_alloc(req, (size_t)(np + 1) * sizeof *r->Partitions);
            for (int32_t p = 0; p < np; p++) {
                r->Partitions[p].PartitionIndex = tp->Partitions[p];
                r->Partitions[p].ErrorCode = allowed ? alter_one(b, d, dir->Path, r->TopicName, tp->Partitions[p])
                                                     : GR_KERR_CLUSTER_AUTHORIZATION_FAILED;
            }
        }
    }
    gr_api_respond(req, resp);
}
