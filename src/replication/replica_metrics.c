/* The replica manager's figures for the Prometheus endpoint (a collector, common/metrics.h
 * rule 5), computed at scrape time from the hosted partitions as Kafka's ReplicaManager,
 * Partition and Log gauges compute them:
 *   kafka.server:type=ReplicaManager  PartitionCount, LeaderCount, UnderReplicatedPartitions
 *                                     (leader, |ISR| < |replicas| minus the replicas a
 *                                     reassignment is adding, Kafka's Partition.isUnderReplicated),
 *                                     UnderMinIsrPartitionCount
 *                                     (leader, |ISR| < min.insync.replicas),
 *                                     AtMinIsrPartitionCount (leader, |ISR| == min ISR)
 *   kafka.cluster:type=Partition      UnderReplicated, UnderMinIsr, AtMinIsr, ReplicasCount,
 *                                     InSyncReplicasCount per leader partition (as Kafka, leaders only)
 *   kafka.log:type=Log                Size, LogStartOffset, LogEndOffset, NumLogSegments per log
 *   kafka.server:type=DelayedOperationPurgatory  PurgatorySize per delayedOperation (Produce, Fetch)
 *   kafka.log:type=LogManager         OfflineLogDirectoryCount
 * Locks: the map lock (read) then each partition's lock, never with a registry lock held.
 * Also gr_rm_foreach_log (replica_manager.h), which DescribeLogDirs shares with the Log gauges. */
#include <pthread.h>
#include <stdio.h>

#include "common/metrics.h"
#include "replication/fetch_session.h"
#include "replication/log_dir_failure.h"
#include "replication/partitions.h"
#include "replication/purgatory.h"
#include "replication/replica_internal.h"
#include "storage/log_manager.h"

int32_t gr_rm_replication_factor(const struct gr_partition_state *st) {
    int32_t n = 0;
    for (int i = 0; i < st->n_replicas; i++) {
        bool adding = false;
        for (int j = 0; j < st->n_adding && !adding; j++) adding = st->adding[j] == st->replicas[i];
        n += !adding;
    }
    return n;
}

static void partition_gauge(struct gr_prom_out *o, const char *name, const char *topic, int32_t partition, double v) {
    char n[512];
    snprintf(n, sizeof n, "kafka.cluster:type=Partition,name=%s,topic=%s,partition=%d", name, topic, partition);
    gr_prom_gauge(o, n, v);
}

struct foreach_ctx {
    void (*fn)(void *ctx, const struct gr_rm_log_info *li);
    void *ctx;
};

static void foreach_one(void *ctx, struct gr_lm_log *l) {
    struct foreach_ctx *f = ctx;
    struct gr_rm_log_info li = {.dir_idx = l->dir_idx,
                                .topic = l->topic,
                                .partition = l->partition,
                                .size = gr_plog_size_bytes(l->log),
                                .log_start_offset = gr_plog_start_offset(l->log),
                                .log_end_offset = gr_plog_end_offset(l->log),
                                .high_watermark = atomic_load(&l->hw),
                                .segments = gr_plog_segment_count(l->log)};
    f->fn(f->ctx, &li);
}

void gr_rm_foreach_log(struct gr_replica_manager *rm, void (*fn)(void *ctx, const struct gr_rm_log_info *li),
                       void *ctx) {
    struct foreach_ctx f = {fn, ctx};
    if (rm && rm->lm) gr_plog_manager_foreach(rm->lm, foreach_one, &f);
}

static void log_gauges(void *ctx, const struct gr_rm_log_info *l) {
    struct gr_prom_out *o = ctx;
    static const char *const names[] = {"Size", "LogStartOffset", "LogEndOffset", "NumLogSegments"};
    double v[] = {(double)l->size, (double)l->log_start_offset, (double)l->log_end_offset, (double)l->segments};
    char n[512];
    for (int i = 0; i < 4; i++) {
        snprintf(n, sizeof n, "kafka.log:type=Log,name=%s,topic=%s,partition=%d", names[i], l->topic, l->partition);
        gr_prom_gauge(o, n, v[i]);
    }
}

void gr_rm_metrics_collector(void *arg, struct gr_prom_out *o) {
    struct gr_replica_manager *rm = arg;
    int64_t count = 0, leaders = 0, urp = 0, under_min = 0, at_min = 0;
    pthread_rwlock_rdlock(&rm->map_lock);
    for (size_t b = 0; b < rm->nbuckets; b++) {
        for (struct gr_rm_partition *p = rm->buckets[b]; p; p = p->next) {
            pthread_mutex_lock(&p->lock);
            if (p->online) {
                count++;
                if (gr_rs_is_leader(&p->st)) {
                    bool ur = p->st.nisr < p->replication_factor, um = p->st.nisr < p->min_isr,
                         am = p->st.nisr == p->min_isr;
                    leaders++;
                    urp += ur;
                    under_min += um;
                    at_min += am;
                    partition_gauge(o, "UnderReplicated", p->topic, p->partition, ur);
                    partition_gauge(o, "UnderMinIsr", p->topic, p->partition, um);
                    partition_gauge(o, "AtMinIsr", p->topic, p->partition, am);
                    partition_gauge(o, "ReplicasCount", p->topic, p->partition, p->st.nreplicas);
                    partition_gauge(o, "InSyncReplicasCount", p->topic, p->partition, p->st.nisr);
                }
            }
            pthread_mutex_unlock(&p->lock);
        }
    }
    pthread_rwlock_unlock(&rm->map_lock);
    gr_prom_gauge(o, "kafka.server:type=ReplicaManager,name=PartitionCount", (double)count);
    gr_prom_gauge(o, "kafka.server:type=ReplicaManager,name=LeaderCount", (double)leaders);
    gr_prom_gauge(o, "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions", (double)urp);
    gr_prom_gauge(o, "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount", (double)under_min);
    gr_prom_gauge(o, "kafka.server:type=ReplicaManager,name=AtMinIsrPartitionCount", (double)at_min);
    if (rm->produce_purg)
        gr_prom_gauge(o, "kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,delayedOperation=Produce",
                      (double)gr_purgatory_waiting(rm->produce_purg));
    if (rm->fetch_purg)
        gr_prom_gauge(o, "kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,delayedOperation=Fetch",
                      (double)gr_purgatory_waiting(rm->fetch_purg));
    if (rm->fetch_sessions) { /* KIP-227 */
        int ns;
        int64_t np;
        gr_fsc_stats(rm->fetch_sessions, &ns, &np);
        gr_prom_gauge(o, "kafka.server:type=FetchSessionCache,name=NumIncrementalFetchSessions", (double)ns);
        gr_prom_gauge(o, "kafka.server:type=FetchSessionCache,name=NumIncrementalFetchPartitionsCached", (double)np);
        gr_prom_meter(o, "kafka.server:type=FetchSessionCache,name=IncrementalFetchSessionEvictionsPerSec",
                      (double)gr_fsc_evictions(rm->fetch_sessions));
    }
    double min_rate;
    int64_t max_lag;
    gr_fetcher_stats(rm->fetchers, &min_rate, &max_lag);
    gr_prom_gauge(o, "kafka.server:type=ReplicaFetcherManager,name=MinFetchRate,clientId=Replica", min_rate);
    gr_prom_gauge(o, "kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica", (double)max_lag);
    struct gr_ldf *ldf = rm->b ? gr_ldf_of(rm->b) : NULL;
    gr_prom_gauge(o, "kafka.log:type=LogManager,name=OfflineLogDirectoryCount",
                  ldf ? (double)gr_ldf_offline_count(ldf) : 0.0);
    gr_rm_foreach_log(rm, log_gauges, o);
}
