/* Replica manager: hosted partitions, leader/follower transitions, high watermark and ISR
 * maintenance, leader appends with acks=all waiting in the produce purgatory (see
 * replica_manager.h for the wiring and the lock order). */
#include "replication/replica_manager.h"
#include "replication/log_dir_failure.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

#include "replication/alter_partition.h"
#include "broker/broker.h"
#include "replication/fetcher.h"
#include "replication/fetch_session.h"
#include "broker/metadata_cache.h"
#include "replication/partitions.h"
#include "replication/purgatory.h"
#include "replication/replica_internal.h"
#include "common/metrics.h"
#include "broker/dynamic_config_manager.h"
#include "common/config_model.h"
#include "common/config.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "storage/batch.h"
#include "storage/checkpoint.h"
#include "zk/kzk.h"

#define LOGGER "kafka.server.ReplicaManager"
#define STATE_LOGGER "state.change.logger"

uint64_t gr_rm_key(const char *topic, int32_t partition) {
    uint64_t h = 1469598103934665603ULL;
    for (const char *s = topic; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;
    h = (h ^ (uint32_t)partition) * 1099511628211ULL;
    return h;
}

struct gr_broker *gr_rm_broker(struct gr_replica_manager *rm) { return rm->b; }

/* ---- partition map ---- */

static size_t bucket_of(const struct gr_replica_manager *rm, uint64_t key) {
    return (size_t)(key & (rm->nbuckets - 1));
}

static struct gr_rm_partition *find_locked(struct gr_replica_manager *rm, const char *topic, int32_t partition) {
    uint64_t key = gr_rm_key(topic, partition);
    for (struct gr_rm_partition *p = rm->buckets[bucket_of(rm, key)]; p; p = p->next)
        if (p->key == key && p->partition == partition && strcmp(p->topic, topic) == 0) return p;
    return NULL;
}

/* Doubles the map (map lock held for writing). */
static void grow_map_locked(struct gr_replica_manager *rm) {
    size_t old_n = rm->nbuckets;
    struct gr_rm_partition **old = rm->buckets;
    rm->nbuckets = old_n * 2;
    rm->buckets = gr_calloc(rm->nbuckets, sizeof *rm->buckets);
    for (size_t b = 0; b < old_n; b++) {
        struct gr_rm_partition *p = old[b];
        while (p) {
            struct gr_rm_partition *next = p->next;
            size_t nb = bucket_of(rm, p->key);
            p->next = rm->buckets[nb];
            rm->buckets[nb] = p;
            p = next;
        }
    }
    free(old);
}

struct gr_rm_partition *gr_rm_get_partition(struct gr_replica_manager *rm, const char *topic, int32_t partition) {
    if (!topic) return NULL;
    pthread_rwlock_rdlock(&rm->map_lock);
    struct gr_rm_partition *p = find_locked(rm, topic, partition);
    if (p) atomic_fetch_add(&p->refs, 1);
    pthread_rwlock_unlock(&rm->map_lock);
    return p;
}

void gr_rm_partition_unref(struct gr_rm_partition *p) {
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1) return;
    if (p->lml) gr_plog_manager_release(NULL, p->lml);
    pthread_mutex_destroy(&p->lock);
    gr_rs_destroy(&p->st);
    free(p);
}

int16_t gr_rm_not_hosted_error(struct gr_replica_manager *rm, const char *topic, int32_t partition) {
    if (rm->b && rm->b->metadata && topic && partition >= 0 &&
        partition < gr_mdc_num_partitions(rm->b->metadata, topic))
        return GR_KERR_NOT_LEADER_OR_FOLLOWER;
    return GR_KERR_UNKNOWN_TOPIC_OR_PARTITION;
}

static int read_topic_config(struct gr_replica_manager *rm, const char *topic, struct gr_plog_config *lc,
                             int32_t *min_isr, int64_t *ret_ms, int64_t *ret_bytes);

#define TOPIC_CONFIG_CACHE_MS 1000

/* Topic overrides from /config/topics/<topic>, read at most once a second per topic in a row
 * (partitions of one topic arrive together in one LeaderAndIsr). Hook callers only. 0, or the
 * error of a failed read (the outputs then hold the broker defaults, which must not be applied:
 * see read_topic_config). */
static int load_topic_config(struct gr_replica_manager *rm, const char *topic, struct gr_plog_config *lc,
                              int32_t *min_isr, int64_t *ret_ms, int64_t *ret_bytes) {
    int lo = 0, hi = rm->n_tcfg_pre - 1;
    while (lo <= hi) { /* read ahead for this LeaderAndIsr? */
        int mid = lo + (hi - lo) / 2, c = strcmp(rm->tcfg_pre[mid].topic, topic);
        if (c == 0) {
            *lc = rm->tcfg_pre[mid].lc;
            *min_isr = rm->tcfg_pre[mid].min_isr;
            *ret_ms = rm->tcfg_pre[mid].ret_ms;
            *ret_bytes = rm->tcfg_pre[mid].ret_bytes;
            return 0;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    int64_t now = gr_mono_ms();
    if (rm->tcfg_cache.topic && strcmp(rm->tcfg_cache.topic, topic) == 0 &&
        now - rm->tcfg_cache.read_ms < TOPIC_CONFIG_CACHE_MS) {
        *lc = rm->tcfg_cache.lc;
        *min_isr = rm->tcfg_cache.min_isr;
        *ret_ms = rm->tcfg_cache.ret_ms;
        *ret_bytes = rm->tcfg_cache.ret_bytes;
        return 0;
    }
    int rc = read_topic_config(rm, topic, lc, min_isr, ret_ms, ret_bytes);
    if (rc != 0) return rc; /* not cached: the next partition reads again */
    free(rm->tcfg_cache.topic);
    rm->tcfg_cache.topic = gr_strdup(topic);
    rm->tcfg_cache.read_ms = now;
    rm->tcfg_cache.lc = *lc;
    rm->tcfg_cache.min_isr = *min_isr;
    rm->tcfg_cache.ret_ms = *ret_ms;
    rm->tcfg_cache.ret_bytes = *ret_bytes;
    return 0;
}

/* The topic's effective settings from its overrides tc (/config/topics/<topic>; NULL: none) over
 * the broker's dynamic and static configs: storage/log_config.h's one resolution. */
static void topic_config_from(struct gr_replica_manager *rm, const char *topic, const struct gr_kzk_config *tc,
                              struct gr_plog_config *lc, int32_t *min_isr, int64_t *ret_ms, int64_t *ret_bytes) {
    (void)topic;
    struct gr_log_config r;
    gr_dcm_log_config(rm->b ? rm->b->dynamic_config : NULL, rm->cfg, tc, &r);
    *lc = r.lc;
    *min_isr = r.min_insync_replicas;
    *ret_ms = r.retention_ms;
    *ret_bytes = r.retention_bytes;
}

/* The topic's effective settings, reading /config/topics/<topic> (no ZooKeeper, in tests: the
 * broker defaults). Returns 0, or the error of a failed read (ZooKeeper unreachable, session
 * expired, unparsable znode): the outputs then hold the broker defaults, and a caller must not
 * apply them to a log -- cleanup.policy=delete and log.retention.ms on a compacted topic or on
 * one with retention.ms=-1 would delete what it must keep (Kafka's fetchEntityConfig throws and
 * nothing is changed). A missing znode is no error (no overrides). */
static int read_topic_config(struct gr_replica_manager *rm, const char *topic, struct gr_plog_config *lc,
                             int32_t *min_isr, int64_t *ret_ms, int64_t *ret_bytes) {
    struct gr_kzk_config tc = {0};
    bool zk = rm->b && rm->b->zk;
    int rc = zk ? gr_kzk_get_entity_config(rm->b->zk, "topics", topic, &tc) : 0;
    topic_config_from(rm, topic, zk && rc == 0 ? &tc : NULL, lc, min_isr, ret_ms, ret_bytes);
    if (zk && rc == 0) gr_kzk_config_release(&tc);
    if (rc != 0) gr_error(LOGGER, "cannot read /config/topics/%s: %s", topic, gr_kzk_strerror(rc));
    return rc;
}

/* The log manager's start-up hook (gr_plog_manager_topic_configs_fn, Kafka's
 * zkClient.getLogConfigs before LogManager.loadLogs): the settings of the topics whose logs are
 * on disk, read in pipelined ZooKeeper batches and resolved by topic_config_from. A failed read
 * refuses the start-up, as Kafka's. */
static int startup_topic_configs(void *ctx, struct gr_plog_manager *lm, const char *const *topics, int n,
                                 struct gr_lm_topic_config *out) {
    struct gr_replica_manager *rm = ctx;
    (void)lm; /* being opened: nothing is loaded yet */
    enum { CHUNK = 1000 };
    struct gr_kzk_config *tc = gr_calloc(CHUNK, sizeof *tc);
    int *rcs = gr_calloc(CHUNK, sizeof *rcs);
    int rc = 0;
    for (int at = 0; rc == 0 && at < n; at += CHUNK) {
        int m = GR_MIN(CHUNK, n - at);
        bool zk = rm->b && rm->b->zk;
        if (zk && (rc = gr_kzk_get_entity_configs(rm->b->zk, "topics", topics + at, m, tc, rcs)) != 0) {
            gr_error(LOGGER, "cannot read /config/topics: %s", gr_kzk_strerror(rc));
            break;
        }
        for (int i = 0; i < m; i++) {
            if (zk && rcs[i] != 0 && rc == 0) {
                gr_error(LOGGER, "cannot read /config/topics/%s: %s", topics[at + i], gr_kzk_strerror(rcs[i]));
                rc = rcs[i];
            }
            int32_t min_isr;
            struct gr_lm_topic_config *t = &out[at + i];
            topic_config_from(rm, topics[at + i], zk && rcs[i] == 0 ? &tc[i] : NULL, &t->lc, &min_isr, &t->retention_ms,
                              &t->retention_bytes);
            if (zk) gr_kzk_config_release(&tc[i]);
        }
    }
    free(rcs);
    free(tc);
    return rc == 0 ? 0 : -EIO;
}

static struct gr_rm_partition **snapshot(struct gr_replica_manager *rm, int *n);

int gr_rm_reload_topic_config(struct gr_replica_manager *rm, const char *topic) {
    if (!rm) return 0;
    if (rm->b && rm->b->partitions) gr_partitions_lock(rm->b->partitions);
    free(rm->tcfg_cache.topic); /* the cache may hold the old values */
    rm->tcfg_cache.topic = NULL;
    if (rm->b && rm->b->partitions) gr_partitions_unlock(rm->b->partitions);
    int n = 0;
    struct gr_rm_partition **arr = snapshot(rm, &n);
    char *last = NULL;
    struct gr_plog_config lc;
    int32_t min_isr = 1;
    int64_t ret_ms = 0, ret_bytes = 0;
    bool read_ok = false;
    int failed = 0; /* the first failed read's error */
    for (int i = 0; i < n; i++) {
        struct gr_rm_partition *p = arr[i];
        if (!topic || strcmp(p->topic, topic) == 0) {
            if (!last || strcmp(last, p->topic) != 0) {
                int rc = read_topic_config(rm, p->topic, &lc, &min_isr, &ret_ms, &ret_bytes);
                read_ok = rc == 0;
                if (rc && (!failed || failed == GR_ECORRUPT)) failed = rc; /* a retryable one first */
                free(last);
                last = gr_strdup(p->topic);
            }
            if (!read_ok) { /* keep the settings in force (Kafka: the change is not applied) */
                gr_rm_partition_unref(p);
                continue;
            }
            pthread_mutex_lock(&p->lock);
            p->min_isr = min_isr;
            if (p->lml) {
                gr_plog_set_config(p->lml->log, &lc);
                atomic_store(&p->lml->retention_ms, ret_ms);
                atomic_store(&p->lml->retention_bytes, ret_bytes);
            }
            pthread_mutex_unlock(&p->lock);
        }
        gr_rm_partition_unref(p);
    }
    free(last);
    free(arr);
    return failed;
}

/* A new partition with its log (created if absent), NOT yet in the map; refs = 2 (the map's, to
 * be, and the caller's). Hook callers only (the registry's state-change lock serializes them,
 * so creations never race each other). */
static struct gr_rm_partition *create_partition(struct gr_replica_manager *rm, const char *topic, int32_t partition,
                                                int16_t *err) {
    struct gr_plog_config lc;
    int32_t min_isr;
    int64_t ret_ms, ret_bytes;
    if (load_topic_config(rm, topic, &lc, &min_isr, &ret_ms, &ret_bytes) != 0) {
        /* ZooKeeper did not answer: a log loaded at start-up keeps the settings it got then
         * (Kafka's getOrCreateLog reads no config for an existing log); a new one is not made
         * with the broker defaults (Kafka's fetchLogConfig throws). */
        struct gr_lm_log *cur = gr_plog_manager_acquire(rm->lm, topic, partition);
        if (!cur) {
            *err = GR_KERR_KAFKA_STORAGE_ERROR;
            return NULL;
        }
        gr_plog_get_config(cur->log, &lc);
        ret_ms = atomic_load(&cur->retention_ms);
        ret_bytes = atomic_load(&cur->retention_bytes);
        gr_plog_manager_release(rm->lm, cur);
    }
    struct gr_lm_log *lml = NULL;
    int rc = gr_plog_manager_get_or_create(rm->lm, topic, partition, &lc, &lml);
    if (rc < 0) {
        *err = GR_KERR_KAFKA_STORAGE_ERROR;
        return NULL;
    }
    gr_plog_set_config(lml->log, &lc);
    atomic_store(&lml->retention_ms, ret_ms);
    atomic_store(&lml->retention_bytes, ret_bytes);
    struct gr_rm_partition *p = gr_calloc(1, sizeof *p);
    p->topic = lml->topic; /* borrowed: p holds lml until its last unref */
    p->partition = partition;
    p->key = gr_rm_key(topic, partition);
    atomic_init(&p->refs, 2); /* the map's and the caller's */
    pthread_mutex_init(&p->lock, NULL);
    gr_rs_init(&p->st, rm->broker_id);
    p->lml = lml;
    p->min_isr = min_isr;
    p->online = true;
    return p;
}

/* Map lock held for writing; p not in the map. */
static void map_insert_locked(struct gr_replica_manager *rm, struct gr_rm_partition *p) {
    size_t b = bucket_of(rm, p->key);
    p->next = rm->buckets[b];
    rm->buckets[b] = p;
    if ((size_t)++rm->npartitions > rm->nbuckets) grow_map_locked(rm);
}

/* Map lock held for writing. Returns the entry with the map's reference, or NULL. */
static struct gr_rm_partition *map_remove_locked(struct gr_replica_manager *rm, const char *topic, int32_t partition) {
    struct gr_rm_partition **pp = &rm->buckets[bucket_of(rm, gr_rm_key(topic, partition))];
    while (*pp && !((*pp)->partition == partition && strcmp((*pp)->topic, topic) == 0)) pp = &(*pp)->next;
    struct gr_rm_partition *p = *pp;
    if (p) {
        *pp = p->next;
        p->next = NULL;
        rm->npartitions--;
    }
    return p;
}

static struct gr_rm_partition *map_remove(struct gr_replica_manager *rm, const char *topic, int32_t partition) {
    pthread_rwlock_wrlock(&rm->map_lock);
    struct gr_rm_partition *p = map_remove_locked(rm, topic, partition);
    pthread_rwlock_unlock(&rm->map_lock);
    return p; /* carries the map's reference */
}

/* All partitions with a reference each; free the array and unref each. */
static struct gr_rm_partition **snapshot(struct gr_replica_manager *rm, int *n) {
    pthread_rwlock_rdlock(&rm->map_lock);
    struct gr_rm_partition **arr = gr_malloc((size_t)(rm->npartitions + 1) * sizeof *arr);
    int k = 0;
    for (size_t b = 0; b < rm->nbuckets; b++)
        for (struct gr_rm_partition *p = rm->buckets[b]; p; p = p->next) {
            atomic_fetch_add(&p->refs, 1);
            arr[k++] = p;
        }
    pthread_rwlock_unlock(&rm->map_lock);
    *n = k;
    return arr;
}

/* ---- HW / ISR ---- */

/* Leader: recompute the HW. p->lock held. Returns true if it moved. */
static bool maybe_increment_hw_locked(struct gr_replica_manager *rm, struct gr_rm_partition *p, int64_t now) {
    if (!gr_rs_is_leader(&p->st)) return false;
    int64_t leo = gr_plog_end_offset(p->lml->log);
    int64_t cand = gr_rs_hw_candidate(&p->st, leo, now, rm->cfg->replica_lag_time_max_ms);
    int64_t old = atomic_load(&p->lml->hw);
    if (cand > old) {
        atomic_store(&p->lml->hw, cand);
        gr_plog_txn_hw_moved(p->lml->log, cand); /* Kafka's onHighWatermarkUpdated: stable txns */
        return true;
    }
    return false;
}

static void propose_locked(struct gr_replica_manager *rm, struct gr_rm_partition *p, const char *what) {
    char a[256], b2[256];
    gr_info(LOGGER, "[Partition %s-%d broker=%d] %s ISR from %s to %s (leader epoch %d, zkVersion %d)", p->topic,
            p->partition, rm->broker_id, what, gr_rs_fmt_ids(a, sizeof a, p->st.isr, p->st.nisr),
            gr_rs_fmt_ids(b2, sizeof b2, p->st.proposed, p->st.nproposed), p->st.leader_epoch, p->st.zk_version);
    struct gr_uuid id; /* Kafka's Partition.topicId: the log's (none yet: the batch goes by name) */
    bool has_id = gr_plog_topic_id(p->lml->log, &id) == 1;
    gr_alter_partition_enqueue(rm->alter_partition, p->topic, has_id ? id.b : NULL, p->partition, p->st.leader_epoch,
                               p->st.proposed, p->st.nproposed, p->st.zk_version);
}

void gr_rm_wake(struct gr_replica_manager *rm, struct gr_rm_partition *p, bool hw_moved) {
    gr_purgatory_check(rm->fetch_purg, p->key);
    if (hw_moved) gr_purgatory_check(rm->produce_purg, p->key);
}

void gr_rm_update_follower(struct gr_replica_manager *rm, struct gr_rm_partition *p, int32_t follower_id,
                           int64_t fetch_offset, int64_t follower_log_start, int64_t leader_leo) {
    int64_t now = gr_mono_ms();
    bool hw_moved = false;
    pthread_mutex_lock(&p->lock);
    if (gr_rs_is_leader(&p->st) && p->online) {
        struct gr_rs_remote *r = gr_rs_remote(&p->st, follower_id);
        int64_t prev = r ? r->leo : -1, prev_start = r ? r->log_start_offset : -1;
        if (gr_rs_update_follower(&p->st, follower_id, fetch_offset, follower_log_start, now, leader_leo)) {
            /* a waiting DeleteRecords may complete (delete_records.c) */
            if (prev_start != follower_log_start) hw_moved = true;
            if (gr_rs_needs_expand(&p->st, follower_id, atomic_load(&p->lml->hw)) &&
                gr_rs_propose_expand(&p->st, follower_id))
                propose_locked(rm, p, "Expanding");
            if (prev != fetch_offset && maybe_increment_hw_locked(rm, p, now)) hw_moved = true;
        }
    }
    pthread_mutex_unlock(&p->lock);
    if (hw_moved) gr_rm_wake(rm, p, true);
}

/* IsrShrinksPerSec / IsrExpandsPerSec when an ISR change committed, FailedIsrUpdatesPerSec
 * when the controller refused or failed it. */
static void isr_meters(struct gr_replica_manager *rm, int r, int16_t error, int old_nisr, int new_nisr) {
    struct gr_metrics *reg = rm->b ? rm->b->metrics : NULL;
    const char *name = NULL;
    if (!reg) return;
    if (r == 1 && new_nisr < old_nisr)
        name = "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec";
    else if (r == 1 && new_nisr > old_nisr)
        name = "kafka.server:type=ReplicaManager,name=IsrExpandsPerSec";
    else if (r == -1 || (r == 0 && error != GR_KERR_NONE))
        name = "kafka.server:type=ReplicaManager,name=FailedIsrUpdatesPerSec";
    struct gr_meter *m = name ? gr_metrics_meter(reg, name) : NULL;
    if (m) gr_meter_mark(m, 1);
}

int gr_rm_alter_partition_result(struct gr_replica_manager *rm, const char *topic, int32_t partition, int16_t error,
                                 int32_t leader_epoch, const int32_t *isr, int nisr, int32_t zk_version) {
    struct gr_rm_partition *p = gr_rm_get_partition(rm, topic, partition);
    if (!p) return 0;
    int r;
    bool hw_moved = false;
    int old_nisr = 0, new_nisr = 0;
    pthread_mutex_lock(&p->lock);
    if (!gr_rs_is_leader(&p->st)) {
        r = 0;
    } else {
        old_nisr = p->st.nisr;
        r = gr_rs_apply_alter_partition(&p->st, error, leader_epoch, isr, nisr, zk_version);
        char buf[256];
        if (r == 1) {
            gr_info(LOGGER, "[Partition %s-%d broker=%d] ISR updated to %s and zkVersion to %d", topic, partition,
                    rm->broker_id, gr_rs_fmt_ids(buf, sizeof buf, p->st.isr, p->st.nisr), p->st.zk_version);
            hw_moved = maybe_increment_hw_locked(rm, p, gr_mono_ms());
        } else if (r == 0 && error != GR_KERR_NONE) {
            gr_info(LOGGER, "[Partition %s-%d broker=%d] controller refused the ISR change (%s); waiting for "
                            "new metadata",
                    topic, partition, rm->broker_id, gr_kerr_name(error));
        } else if (r == -1) {
            gr_warn(LOGGER, "[Partition %s-%d broker=%d] ISR change failed with %s; retrying", topic, partition,
                    rm->broker_id, gr_kerr_name(error));
        }
    }
    new_nisr = p->st.nisr;
    pthread_mutex_unlock(&p->lock);
    isr_meters(rm, r, error, old_nisr, new_nisr); /* no partition lock held */
    /* Even without an HW move, waiting acks=all produces must re-check min.insync. */
    gr_rm_wake(rm, p, true);
    (void)hw_moved;
    gr_rm_partition_unref(p);
    return r == -1 ? -1 : 0;
}

/* Memory (issue 14): a LeaderAndIsr for thousands of partitions leaves megabytes freed in the
 * malloc arenas of the threads that decoded, applied and answered it (and of the controller's,
 * on the controller), which glibc keeps: ~1.6 KB per partition on the controller, ~0.2 KB on the
 * others at 10k; many small ones (1000 topics x 10) leave the same. Once LeaderAndIsr requests
 * have carried GR_RM_TRIM_MIN partitions since the last trim, the ISR thread hands free pages
 * back with malloc_trim(0) GR_RM_TRIM_DELAY_MS after the last request that crossed it (the
 * thread wakes for it; a burst is trimmed about once): a walk of the free lists, off every
 * request path. */
#define GR_RM_TRIM_MIN 1000
#define GR_RM_TRIM_DELAY_MS 300
/* A second trim this long after the first: the fetchers for the new partitions, the leaders'
 * fetch sessions and the first rounds of their fetch requests allocate and free as much again in
 * the seconds after a large LeaderAndIsr (~0.5 KiB per partition left free at 1000 topics x 10). */
#define GR_RM_TRIM_SETTLE_MS 4000

/* The next trim that is due, 0 if none. */
static int64_t trim_due(struct gr_replica_manager *rm) {
    int64_t a = atomic_load(&rm->trim_after_ms), b = atomic_load(&rm->trim_again_ms);
    return a == 0 ? b : b == 0 ? a : GR_MIN(a, b);
}

/* Also between bursts: steady fetch traffic frees buffers of every size, and the pages they
 * leave free stay resident. When the RSS grew by GR_RM_TRIM_GROWTH_PAGES and 1/16 since the last
 * trim (or the first check), trim again: one /proc read per ISR-thread period, a trim only after
 * growth. */
#define GR_RM_TRIM_GROWTH_PAGES 512 /* 2 MiB of 4 KiB pages */

static void trim_now(struct gr_replica_manager *rm) {
    malloc_trim(0);
    rm->trim_rss_pages = gr_rss_pages();
}

static void maybe_trim(struct gr_replica_manager *rm) {
    int64_t now = gr_mono_ms();
    int64_t due = atomic_load(&rm->trim_after_ms);
    if (due != 0 && now >= due && atomic_compare_exchange_strong(&rm->trim_after_ms, &due, 0)) {
        trim_now(rm);
        atomic_store(&rm->trim_again_ms, gr_mono_ms() + GR_RM_TRIM_SETTLE_MS);
        return;
    }
    due = atomic_load(&rm->trim_again_ms);
    if (due != 0 && now >= due && atomic_compare_exchange_strong(&rm->trim_again_ms, &due, 0)) {
        trim_now(rm);
        return;
    }
    long rss = gr_rss_pages();
    if (rm->trim_rss_pages == 0) rm->trim_rss_pages = rss;
    else if (rss > rm->trim_rss_pages + GR_MAX((long)GR_RM_TRIM_GROWTH_PAGES, rm->trim_rss_pages / 16)) trim_now(rm);
}

void gr_rm_malloc_policy(void) {
    /* glibc makes up to 8 malloc arenas per core, one per thread that allocates while another
     * holds an arena; each keeps what its thread freed. gregord's threads are few and fixed (I/O,
     * request handlers, fetchers, purgatory reapers), so the arenas mostly hold each other's
     * garbage: at 1000 topics x 10 partitions 16 arenas held ~14 MB free next to 26 MB in use
     * (issue 14, memory per replica). One arena per core (at least 2) keeps contention where it
     * was on small machines and the free memory shared. MALLOC_ARENA_MAX in the environment wins. */
    if (getenv("MALLOC_ARENA_MAX")) return;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    mallopt(M_ARENA_MAX, (int)(n < 2 ? 2 : n > 64 ? 64 : n));
}

static void *isr_thread_main(void *arg) {
    struct gr_replica_manager *rm = arg;
    pthread_setname_np(pthread_self(), "isr-expiration");
    int64_t period = rm->cfg->replica_lag_time_max_ms / 2;
    if (period < 10) period = 10;
    if (period > 5000) period = 5000;
    pthread_mutex_lock(&rm->tlock);
    while (!rm->stopping) {
        int64_t wait = period, tdue = trim_due(rm); /* a due trim shortens the wait (at most 10 ms early) */
        if (tdue != 0) wait = GR_MAX((int64_t)10, GR_MIN(wait, tdue - gr_mono_ms()));
        struct timespec ts = gr_timespec_after_ms(CLOCK_MONOTONIC, wait);
        pthread_cond_timedwait(&rm->tcond, &rm->tlock, &ts);
        if (rm->stopping) break;
        pthread_mutex_unlock(&rm->tlock);
        maybe_trim(rm);
        int n;
        struct gr_rm_partition **arr = snapshot(rm, &n);
        for (int i = 0; i < n; i++) {
            struct gr_rm_partition *p = arr[i];
            bool moved = false;
            pthread_mutex_lock(&p->lock);
            if (p->online && gr_rs_is_leader(&p->st)) {
                int64_t now = gr_mono_ms();
                int32_t out[GR_RS_MAX_REPLICAS];
                int64_t leo = gr_plog_end_offset(p->lml->log);
                int k = gr_rs_out_of_sync(&p->st, leo, now, rm->cfg->replica_lag_time_max_ms, out);
                if (k > 0 && gr_rs_propose_shrink(&p->st, out, k)) propose_locked(rm, p, "Shrinking");
                moved = maybe_increment_hw_locked(rm, p, now);
            }
            pthread_mutex_unlock(&p->lock);
            if (moved) gr_rm_wake(rm, p, true);
            gr_rm_partition_unref(p);
        }
        free(arr);
        pthread_mutex_lock(&rm->tlock);
    }
    pthread_mutex_unlock(&rm->tlock);
    return NULL;
}

/* ---- hooks ---- */

/* LeaderAndIsr and StopReplica are applied in chunks of this many partitions: the fetchers', the
 * AlterPartition sender's, the partition map's and the purgatories' locks are taken once per chunk
 * instead of once per partition (at 100k partitions the per-partition acquisitions queued
 * behind follower fetches walking every partition), while a chunk still becomes visible
 * (map, fetchers) long before the rest of a 100k-partition request is done. */
#define LAI_CHUNK 512

/* Leader transition of a hosted partition (Kafka's Partition.makeLeader). */
static int16_t make_leader(struct gr_replica_manager *rm, struct gr_rm_partition *p, const struct gr_partition_state *st) {
    int16_t err = GR_KERR_NONE;
    int64_t now = gr_mono_ms();
    pthread_mutex_lock(&p->lock);
    p->online = true;
    bool was_leader = gr_rs_is_leader(&p->st);
    int rc = gr_rs_set_assignment(&p->st, rm->broker_id, st->leader_epoch, st->zk_version, st->controller_epoch,
                                  st->replicas, st->n_replicas, st->isr, st->n_isr);
    if (rc < 0) {
        err = GR_KERR_INVALID_REQUEST;
    } else {
        p->replication_factor = gr_rm_replication_factor(st);
        int64_t leo = gr_plog_end_offset(p->lml->log);
        gr_rs_become_leader(&p->st, leo, now, was_leader);
        maybe_increment_hw_locked(rm, p, now);
        char buf[256];
        gr_info(STATE_LOGGER,
                "[Broker id=%d] Leader %s-%d starts at leader epoch %d from offset %" PRId64
                " with high watermark %" PRId64 " ISR [%s]",
                rm->broker_id, st->topic, st->partition, st->leader_epoch, leo, atomic_load(&p->lml->hw),
                gr_rs_fmt_ids(buf, sizeof buf, st->isr, st->n_isr));
    }
    pthread_mutex_unlock(&p->lock);
    return err;
}

/* Follower transition (Kafka's Partition.makeFollower); *fetch: start a fetcher for it. */
static int16_t make_follower(struct gr_replica_manager *rm, struct gr_rm_partition *p,
                             const struct gr_partition_state *st, bool *fetch) {
    pthread_mutex_lock(&p->lock);
    p->online = true;
    int rc = gr_rs_set_assignment(&p->st, st->leader, st->leader_epoch, st->zk_version, st->controller_epoch,
                                  st->replicas, st->n_replicas, NULL, 0);
    int64_t leo = gr_plog_end_offset(p->lml->log);
    pthread_mutex_unlock(&p->lock);
    gr_info(STATE_LOGGER,
            "[Broker id=%d] Follower %s-%d starts at leader epoch %d from offset %" PRId64
            " with high watermark %" PRId64 ". Leader is %d",
            rm->broker_id, st->topic, st->partition, st->leader_epoch, leo, atomic_load(&p->lml->hw), st->leader);
    *fetch = rc == 0 && st->leader >= 0 && st->leader != rm->broker_id;
    return rc < 0 ? GR_KERR_INVALID_REQUEST : GR_KERR_NONE;
}

/* KIP-516: the log takes the request's topic id (a log without one adopts it; partition.metadata
 * is written before the partition is used under it). A log of another id never gets here
 * (handle_control.c moves it aside first); if one does, INCONSISTENT_TOPIC_ID as Kafka. */
static int16_t assign_topic_id(struct gr_replica_manager *rm, struct gr_rm_partition *p,
                               const struct gr_partition_state *st) {
    if (gr_uuid_is_zero(&st->topic_id)) return GR_KERR_NONE; /* an older controller: no id */
    int rc = gr_plog_assign_topic_id(p->lml->log, &st->topic_id);
    if (rc == 0) return GR_KERR_NONE;
    if (rc == -EEXIST) {
        gr_error(STATE_LOGGER, "[Broker id=%d] Partition %s-%d: its log holds another topic id than the request's",
                 rm->broker_id, st->topic, st->partition);
        return GR_KERR_INCONSISTENT_TOPIC_ID;
    }
    if (rc != GR_ECORRUPT) {
        char what[300];
        snprintf(what, sizeof what, "writing the partition.metadata of %s-%d", st->topic, st->partition);
        gr_plog_manager_report_io_error(rm->lm, p->lml->dir_idx, rc, what);
    }
    return GR_KERR_KAFKA_STORAGE_ERROR;
}

/* broker.h adopt_topic_id: a hosted partition's log takes the id at an unchanged leader epoch. */
static int16_t hook_adopt_topic_id(void *ctx, struct gr_broker *b, const char *topic, int32_t partition,
                                   const struct gr_uuid *id) {
    struct gr_replica_manager *rm = ctx;
    (void)b;
    struct gr_rm_partition *p = gr_rm_get_partition(rm, topic, partition);
    if (!p) return GR_KERR_NONE; /* not hosted: the next transition assigns it */
    struct gr_partition_state st = {.topic = (char *)topic, .partition = partition, .topic_id = *id};
    int16_t e = assign_topic_id(rm, p, &st);
    if (e == GR_KERR_NONE)
        gr_info(STATE_LOGGER, "[Broker id=%d] Updating log for %s-%d to assign its topic id from a LeaderAndIsr request",
                rm->broker_id, topic, partition);
    gr_rm_partition_unref(p);
    return e;
}

/* LeaderAndIsr's topic id check (broker.h log_topic_id). */
static int hook_log_topic_id(void *ctx, struct gr_broker *b, const char *topic, int32_t partition,
                             struct gr_uuid *out) {
    struct gr_replica_manager *rm = ctx;
    (void)b;
    struct gr_lm_log *l = gr_plog_manager_acquire(rm->lm, topic, partition);
    if (!l) return 0;
    int r = gr_plog_topic_id(l->log, out);
    gr_plog_manager_release(rm->lm, l);
    return r;
}

/* One chunk of hook_apply_lai (v[0..m), m <= LAI_CHUNK, distinct partitions). */
static void apply_lai_chunk(struct gr_replica_manager *rm, struct gr_broker *b, struct gr_lai_change *v, int m) {
    struct gr_fetcher_tp tps[LAI_CHUNK], follow[LAI_CHUNK];
    const char *topics[LAI_CHUNK];
    int32_t parts[LAI_CHUNK];
    uint64_t keys[LAI_CHUNK];
    struct gr_rm_partition *ps[LAI_CHUNK];
    bool fresh[LAI_CHUNK];
    for (int i = 0; i < m; i++) {
        tps[i] = (struct gr_fetcher_tp){.topic = v[i].st->topic, .partition = v[i].st->partition};
        topics[i] = v[i].st->topic;
        parts[i] = v[i].st->partition;
        v[i].error = GR_KERR_NONE;
    }
    /* Stop fetching them and forget their queued ISR changes (Kafka: removeFetcherForPartitions
     * before makeLeaders / makeFollowers). */
    gr_fetcher_remove_many(rm->fetchers, tps, m);
    gr_alter_partition_clear_many(rm->alter_partition, topics, parts, m);
    /* Hosted ones: one read lock for the chunk. */
    pthread_rwlock_rdlock(&rm->map_lock);
    for (int i = 0; i < m; i++) {
        ps[i] = find_locked(rm, topics[i], parts[i]);
        if (ps[i]) atomic_fetch_add(&ps[i]->refs, 1);
    }
    pthread_rwlock_unlock(&rm->map_lock);
    /* New ones: their logs (no map lock held), transitions, then one write lock to publish. */
    int nfresh = 0, nfollow = 0;
    for (int i = 0; i < m; i++) {
        fresh[i] = !ps[i];
        if (fresh[i]) {
            ps[i] = create_partition(rm, topics[i], parts[i], &v[i].error);
            if (ps[i]) nfresh++;
        }
        struct gr_rm_partition *p = ps[i];
        if (!p) continue;
        if ((v[i].error = gr_ldf_check(b, p->lml->dir_idx)) != GR_KERR_NONE) continue; /* offline dir */
        if ((v[i].error = assign_topic_id(rm, p, v[i].st)) != GR_KERR_NONE) continue;
        bool fetch = false;
        v[i].error = v[i].leader ? make_leader(rm, p, v[i].st) : make_follower(rm, p, v[i].st, &fetch);
        if (fetch)
            follow[nfollow++] = (struct gr_fetcher_tp){.topic = topics[i], .partition = parts[i],
                                                       .leader = v[i].st->leader,
                                                       .leader_epoch = v[i].st->leader_epoch};
    }
    if (nfresh > 0) {
        pthread_rwlock_wrlock(&rm->map_lock);
        for (int i = 0; i < m; i++)
            if (fresh[i] && ps[i]) map_insert_locked(rm, ps[i]);
        pthread_rwlock_unlock(&rm->map_lock);
    }
    /* Waiting produces/fetches re-check (a new leader answers parked follower reads; a former
     * leader's waiters answer NOT_LEADER_OR_FOLLOWER): each waiting op once per chunk. */
    int nk = 0;
    for (int i = 0; i < m; i++)
        if (ps[i]) keys[nk++] = ps[i]->key;
    gr_purgatory_check_many(rm->fetch_purg, keys, nk);
    gr_purgatory_check_many(rm->produce_purg, keys, nk);
    gr_fetcher_add_many(rm->fetchers, follow, nfollow);
    for (int i = 0; i < m; i++) gr_rm_partition_unref(ps[i]);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Reads the configs of the topics of v's partitions that are not hosted yet in one pipelined
 * ZooKeeper batch (rm->tcfg_pre, for load_topic_config). A CreateTopics of many small topics
 * reaches a broker as LeaderAndIsr requests naming several topics each, and one synchronous read
 * per topic made a 1000-topic creation wait ~1000 ZooKeeper round trips per broker. */
static void prefetch_topic_configs(struct gr_replica_manager *rm, const struct gr_lai_change *v, int n) {
    if (!rm->b || !rm->b->zk || n < 2) return;
    const char **names = gr_malloc((size_t)n * sizeof *names);
    int k = 0;
    pthread_rwlock_rdlock(&rm->map_lock);
    for (int i = 0; i < n; i++)
        if ((k == 0 || strcmp(names[k - 1], v[i].st->topic) != 0) && !find_locked(rm, v[i].st->topic, v[i].st->partition))
            names[k++] = v[i].st->topic;
    pthread_rwlock_unlock(&rm->map_lock);
    qsort(names, (size_t)k, sizeof *names, cmp_str);
    int u = 0;
    for (int i = 0; i < k; i++)
        if (u == 0 || strcmp(names[u - 1], names[i]) != 0) names[u++] = names[i];
    if (u >= 2) { /* one topic: load_topic_config reads it once anyway */
        struct gr_kzk_config *tc = gr_calloc((size_t)u, sizeof *tc);
        int *rcs = gr_calloc((size_t)u, sizeof *rcs);
        gr_kzk_get_entity_configs(rm->b->zk, "topics", names, u, tc, rcs);
        rm->tcfg_pre = gr_calloc((size_t)u, sizeof *rm->tcfg_pre);
        for (int i = 0; i < u; i++) {
            if (rcs[i] != 0) continue; /* read it the usual way */
            struct gr_rm_tcfg *t = &rm->tcfg_pre[rm->n_tcfg_pre++];
            t->topic = gr_strdup(names[i]);
            topic_config_from(rm, names[i], &tc[i], &t->lc, &t->min_isr, &t->ret_ms, &t->ret_bytes);
            gr_kzk_config_release(&tc[i]);
        }
        free(rcs);
        free(tc);
    }
    free(names);
}

static void drop_prefetched_configs(struct gr_replica_manager *rm) {
    for (int i = 0; i < rm->n_tcfg_pre; i++) free(rm->tcfg_pre[i].topic);
    free(rm->tcfg_pre);
    rm->tcfg_pre = NULL;
    rm->n_tcfg_pre = 0;
}

/* LeaderAndIsr batch (broker.h's apply_leader_and_isr). */
static void hook_apply_lai(void *ctx, struct gr_broker *b, struct gr_lai_change *v, int n) {
    struct gr_replica_manager *rm = ctx;
    prefetch_topic_configs(rm, v, n);
    for (int i = 0; i < n; i += LAI_CHUNK) apply_lai_chunk(rm, b, v + i, GR_MIN(LAI_CHUNK, n - i));
    drop_prefetched_configs(rm);
    if (atomic_fetch_add(&rm->trim_parts, n) + n >= GR_RM_TRIM_MIN) { /* counts from the last trim */
        atomic_store(&rm->trim_parts, 0);
        atomic_store(&rm->trim_after_ms, gr_mono_ms() + GR_RM_TRIM_DELAY_MS);
    }
}

static int16_t hook_become_leader(void *ctx, struct gr_broker *b, const struct gr_partition_state *st) {
    struct gr_lai_change c = {.st = st, .leader = true};
    hook_apply_lai(ctx, b, &c, 1);
    return c.error;
}

static int16_t hook_become_follower(void *ctx, struct gr_broker *b, const struct gr_partition_state *st) {
    struct gr_lai_change c = {.st = st, .leader = false};
    hook_apply_lai(ctx, b, &c, 1);
    return c.error;
}

/* One chunk of hook_stop_replicas. */
static void stop_chunk(struct gr_replica_manager *rm, struct gr_stop_change *v, int m) {
    struct gr_fetcher_tp tps[LAI_CHUNK];
    const char *topics[LAI_CHUNK];
    int32_t parts[LAI_CHUNK];
    uint64_t keys[LAI_CHUNK];
    struct gr_rm_partition *ps[LAI_CHUNK];
    for (int i = 0; i < m; i++) {
        tps[i] = (struct gr_fetcher_tp){.topic = v[i].topic, .partition = v[i].partition};
        topics[i] = v[i].topic;
        parts[i] = v[i].partition;
        v[i].error = GR_KERR_NONE;
    }
    gr_fetcher_remove_many(rm->fetchers, tps, m);
    gr_alter_partition_clear_many(rm->alter_partition, topics, parts, m);
    /* Deleted ones leave the map (carrying its reference); the others get a reference. */
    pthread_rwlock_wrlock(&rm->map_lock);
    for (int i = 0; i < m; i++) {
        if (v[i].delete_partition) {
            ps[i] = map_remove_locked(rm, topics[i], parts[i]);
        } else {
            ps[i] = find_locked(rm, topics[i], parts[i]);
            if (ps[i]) atomic_fetch_add(&ps[i]->refs, 1);
        }
    }
    pthread_rwlock_unlock(&rm->map_lock);
    int nk = 0;
    for (int i = 0; i < m; i++) {
        if (!ps[i]) continue;
        if (v[i].delete_partition) {
            pthread_mutex_lock(&ps[i]->lock);
            ps[i]->online = false;
            pthread_mutex_unlock(&ps[i]->lock);
        }
        keys[nk++] = ps[i]->key;
    }
    gr_purgatory_check_many(rm->fetch_purg, keys, nk);
    gr_purgatory_check_many(rm->produce_purg, keys, nk);
    for (int i = 0; i < m; i++) {
        gr_rm_partition_unref(ps[i]);
        if (!v[i].delete_partition) {
            gr_info(STATE_LOGGER, "[Broker id=%d] Stopped replica %s-%d", rm->broker_id, topics[i], parts[i]);
            continue;
        }
        if (v[i].move_aside) { /* KIP-516: another topic's log, kept aside (broker.h) */
            int rc = gr_plog_manager_move_aside(rm->lm, topics[i], parts[i], v[i].aside_path, v[i].aside_cap);
            if (rc < 0 && rc != -ENOENT) v[i].error = GR_KERR_KAFKA_STORAGE_ERROR; /* reported as a dir failure */
            gr_info(STATE_LOGGER, "[Broker id=%d] Stopped replica %s-%d and %s its log aside", rm->broker_id, topics[i],
                    parts[i], rc < 0 && rc != -ENOENT ? "could not move" : "moved");
            continue;
        }
        int rc = gr_plog_manager_remove(rm->lm, topics[i], parts[i], true);
        if (rc == -ENOENT) gr_plog_manager_delete_orphan(rm->lm, topics[i], parts[i]);
        gr_info(STATE_LOGGER, "[Broker id=%d] Stopped replica %s-%d and deleted its log", rm->broker_id, topics[i],
                parts[i]);
    }
}

static void hook_stop_replicas(void *ctx, struct gr_broker *b, struct gr_stop_change *v, int n) {
    struct gr_replica_manager *rm = ctx;
    (void)b;
    for (int i = 0; i < n; i += LAI_CHUNK) stop_chunk(rm, v + i, GR_MIN(LAI_CHUNK, n - i));
}

static int16_t hook_stop_replica(void *ctx, struct gr_broker *b, const char *topic, int32_t partition,
                                 bool delete_partition) {
    struct gr_stop_change c = {.topic = topic, .partition = partition, .delete_partition = delete_partition};
    hook_stop_replicas(ctx, b, &c, 1);
    return c.error;
}

static void hook_leader_and_isr_done(void *ctx, struct gr_broker *b) {
    struct gr_replica_manager *rm = ctx;
    gr_fetcher_shutdown_idle(rm->fetchers);
}

/* ---- follower side ---- */

int32_t gr_rm_latest_epoch(struct gr_rm_partition *p) { return gr_plog_latest_epoch(p->lml->log); }
int64_t gr_rm_log_end_offset(struct gr_rm_partition *p) { return gr_plog_end_offset(p->lml->log); }
int64_t gr_rm_log_start_offset(struct gr_rm_partition *p) { return gr_plog_start_offset(p->lml->log); }
int64_t gr_rm_high_watermark(struct gr_rm_partition *p) { return atomic_load(&p->lml->hw); }

void gr_rm_end_offset_for_epoch(struct gr_rm_partition *p, int32_t epoch, int64_t *end_offset, int32_t *epoch_out) {
    gr_plog_end_offset_for_epoch(p->lml->log, epoch, end_offset, epoch_out);
}

static bool follower_current_locked(struct gr_replica_manager *rm, struct gr_rm_partition *p, int32_t leader_epoch) {
    return p->online && !gr_rs_is_leader(&p->st) && p->st.leader_epoch == leader_epoch;
}

int gr_rm_follower_append(struct gr_replica_manager *rm, struct gr_rm_partition *p, int32_t leader_epoch,
                          const uint8_t *records, size_t len, int64_t leader_hw, int64_t leader_log_start) {
    int rc = 0;
    pthread_mutex_lock(&p->lock);
    if (!follower_current_locked(rm, p, leader_epoch)) {
        pthread_mutex_unlock(&p->lock);
        return -ESTALE;
    }
    struct gr_plog *log = p->lml->log;
    int64_t leo = gr_plog_end_offset(log);
    /* Skip whole batches we already have; hand the log only whole batches (a leader never sends
     * a partial one, but the bytes are hostile: the log validates them again). */
    struct gr_batch_iter it;
    struct gr_batch_info bi;
    const uint8_t *bp;
    size_t pos = 0, end = 0;
    gr_batch_iter_init(&it, records, len);
    while (gr_batch_iter_next(&it, &bi, &bp) == 1) {
        size_t at = (size_t)(bp - records);
        if (gr_batch_info_last_offset(&bi) < leo && end == 0) {
            pos = at + bi.size;
            continue;
        }
        end = at + bi.size;
    }
    if (end > pos && gr_ldf_check(rm->b, p->lml->dir_idx) != GR_KERR_NONE) {
        rc = -EIO; /* offline dir */
    } else if (end > pos) {
        /* Kafka's Partition.appendRecordsToFollowerOrFutureReplica: an empty log restarted at the
         * leader's log start offset, which DeleteRecords may have put inside a batch, gets that
         * whole batch; the log restarts at the batch's first offset (the log start offset is raised
         * again below from the leader's). */
        struct gr_batch_info first;
        if (leo == gr_plog_start_offset(log) &&
            gr_batch_parse_header(records + pos, end - pos, &first) == GR_BATCH_OK && first.BaseOffset < leo &&
            gr_batch_info_last_offset(&first) >= leo) {
            gr_info(LOGGER,
                    "[ReplicaFetcher broker=%d] %s-%d: first offset %" PRId64 " of the fetched batch is below "
                    "the log start offset %" PRId64 " of our empty log; restarting the log at %" PRId64,
                    rm->broker_id, p->topic, p->partition, first.BaseOffset, leo, first.BaseOffset);
            rc = gr_plog_truncate_fully_and_start_at(log, first.BaseOffset);
        }
        struct gr_append_info info;
        if (rc == 0) rc = gr_plog_append_as_follower(log, records + pos, end - pos, &info);
        if (rc < 0 && rc != -ERANGE) {
            gr_error(LOGGER, "[ReplicaFetcher broker=%d] append to %s-%d failed: %s", rm->broker_id, p->topic,
                     p->partition, gr_strerror(rc));
            gr_plog_manager_report_io_error(rm->lm, p->lml->dir_idx, rc, "appending to a follower log");
        }
    }
    if (rc == 0) {
        int64_t new_leo = gr_plog_end_offset(log);
        int64_t hw = leader_hw < new_leo ? leader_hw : new_leo;
        if (hw >= 0) atomic_store(&p->lml->hw, hw);
        if (hw >= 0) gr_plog_txn_hw_moved(log, hw); /* completed transactions below it are stable */
        /* Kafka's follower: maybeIncrementLogStartOffset(leader's log start), never past its HW */
        if (leader_log_start > 0 && leader_log_start <= hw) gr_plog_maybe_increment_log_start_offset(log, leader_log_start);
    }
    pthread_mutex_unlock(&p->lock);
    if (rc == 0) gr_purgatory_check(rm->fetch_purg, p->key); /* consumers fetching from this follower (KIP-392) */
    return rc;
}

int gr_rm_follower_truncate(struct gr_replica_manager *rm, struct gr_rm_partition *p, int32_t leader_epoch,
                            int64_t offset, bool fully) {
    pthread_mutex_lock(&p->lock);
    if (!follower_current_locked(rm, p, leader_epoch)) {
        pthread_mutex_unlock(&p->lock);
        return -ESTALE;
    }
    struct gr_plog *log = p->lml->log;
    int64_t leo = gr_plog_end_offset(log);
    int rc;
    if (fully) {
        rc = gr_plog_truncate_fully_and_start_at(log, offset);
        gr_info(LOGGER, "[Broker id=%d] Restarted log of %s-%d at offset %" PRId64, rm->broker_id, p->topic,
                p->partition, offset);
    } else {
        rc = offset < leo ? gr_plog_truncate_to(log, offset) : 0;
        if (offset < leo)
            gr_info(LOGGER, "[Broker id=%d] Truncated %s-%d from %" PRId64 " to offset %" PRId64, rm->broker_id,
                    p->topic, p->partition, leo, gr_plog_end_offset(log));
    }
    int64_t new_leo = gr_plog_end_offset(log);
    int64_t hw = atomic_load(&p->lml->hw);
    if (hw > new_leo || fully) atomic_store(&p->lml->hw, fully ? offset : new_leo);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

/* ---- leader append and acks=all ---- */

int16_t gr_rm_check_epoch_locked(struct gr_rm_partition *p, int32_t current_leader_epoch, bool require_leader) {
    if (!p->online) return GR_KERR_NOT_LEADER_OR_FOLLOWER;
    if (current_leader_epoch >= 0) {
        if (current_leader_epoch < p->st.leader_epoch) return GR_KERR_FENCED_LEADER_EPOCH;
        if (current_leader_epoch > p->st.leader_epoch) return GR_KERR_UNKNOWN_LEADER_EPOCH;
    }
    if (require_leader && !gr_rs_is_leader(&p->st)) return GR_KERR_NOT_LEADER_OR_FOLLOWER;
    return GR_KERR_NONE;
}

struct delayed_produce {
    struct gr_delayed_op op;
    struct gr_replica_manager *rm;
    int n;
    struct gr_rm_produce_part *parts;
    gr_rm_produce_done_fn done;
    void *ctx;
};

static bool dp_try(struct gr_delayed_op *op) {
    struct delayed_produce *dp = (struct delayed_produce *)op;
    bool all = true;
    for (int i = 0; i < dp->n; i++) {
        struct gr_rm_produce_part *pp = &dp->parts[i];
        if (pp->required_offset < 0) continue;
        struct gr_rm_partition *p = gr_rm_get_partition(dp->rm, pp->topic, pp->partition);
        if (!p) {
            pp->error = GR_KERR_NOT_LEADER_OR_FOLLOWER;
            pp->required_offset = -1;
            continue;
        }
        pthread_mutex_lock(&p->lock);
        if (!p->online || !gr_rs_is_leader(&p->st)) {
            pp->error = GR_KERR_NOT_LEADER_OR_FOLLOWER;
            pp->required_offset = -1;
        } else if (atomic_load(&p->lml->hw) >= pp->required_offset) {
            pp->error = gr_rs_maximal_isr_size(&p->st) >= p->min_isr ? GR_KERR_NONE
                                                                      : GR_KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND;
            pp->required_offset = -1;
        } else {
            all = false;
        }
        pthread_mutex_unlock(&p->lock);
        gr_rm_partition_unref(p);
    }
    return all;
}

static void dp_complete(struct gr_delayed_op *op, bool expired) {
    struct delayed_produce *dp = (struct delayed_produce *)op;
    for (int i = 0; i < dp->n; i++) {
        if (dp->parts[i].required_offset >= 0) {
            dp->parts[i].error = GR_KERR_REQUEST_TIMED_OUT;
            dp->parts[i].required_offset = -1;
        }
    }
    dp->done(dp->ctx, dp->parts, dp->n);
}

static void dp_destroy(struct gr_delayed_op *op) { free(op); }

static const struct gr_delayed_op_vt DP_VT = {dp_try, dp_complete, dp_destroy};

/* Appends one partition; *wake gets 0 (nothing appended), 1 (appended: wake the fetch
 * purgatory) or 2 (appended and the HW moved: wake the produce purgatory too). */
static void append_one(struct gr_replica_manager *rm, struct gr_rm_produce_part *pp, int16_t acks, int *wake) {
    *wake = 0;
    pp->required_offset = -1;
    pp->base_offset = -1;
    pp->log_start_offset = -1;
    pp->log_append_time = -1;
    struct gr_rm_partition *p = gr_rm_get_partition(rm, pp->topic, pp->partition);
    if (!p) {
        pp->error = gr_rm_not_hosted_error(rm, pp->topic, pp->partition);
        return;
    }
    bool moved = false;
    pthread_mutex_lock(&p->lock);
    int16_t err = gr_rm_check_epoch_locked(p, -1, true);
    if (err == GR_KERR_NONE && acks == -1 && p->st.nisr < p->min_isr) {
        gr_warn(LOGGER, "[ReplicaManager broker=%d] rejecting produce to %s-%d: ISR size %d is below "
                        "min.insync.replicas %d",
                rm->broker_id, p->topic, p->partition, p->st.nisr, p->min_isr);
        err = GR_KERR_NOT_ENOUGH_REPLICAS;
    }
    if (err == GR_KERR_NONE) err = gr_ldf_check(rm->b, p->lml->dir_idx);
    if (err == GR_KERR_NONE) {
        struct gr_append_info info;
        int rc = gr_plog_append_origin(p->lml->log, pp->records, pp->records_len, p->st.leader_epoch, pp->coordinator,
                                       &info);
        if (rc < 0) {
            gr_error(LOGGER, "append to %s-%d failed: %s", p->topic, p->partition, gr_strerror(rc));
            gr_plog_manager_report_io_error(rm->lm, p->lml->dir_idx, rc, "appending to a log");
            err = GR_KERR_KAFKA_STORAGE_ERROR;
        } else {
            err = info.error;
            if (err != GR_KERR_NONE && pp->want_record_errors && info.validation.record_error_count > 0 &&
                !pp->validation && (pp->validation = malloc(sizeof *pp->validation)) != NULL)
                *pp->validation = info.validation;
        }
        if (err == GR_KERR_NONE) {
            pp->base_offset = info.first_offset; /* a duplicate's original offsets */
            pp->log_start_offset = info.log_start_offset;
            pp->log_append_time = info.log_append_time;
            if (acks == -1) pp->required_offset = info.last_offset + 1;
            moved = maybe_increment_hw_locked(rm, p, gr_mono_ms());
        }
    }
    pp->error = err;
    pthread_mutex_unlock(&p->lock);
    if (err == GR_KERR_NONE) *wake = moved ? 2 : 1;
    gr_rm_partition_unref(p);
}

static void park_produce(struct gr_replica_manager *rm, int32_t timeout_ms, struct gr_rm_produce_part *parts, int n,
                         gr_rm_produce_done_fn done, void *ctx);

void gr_rm_produce(struct gr_replica_manager *rm, int16_t acks, int32_t timeout_ms, struct gr_rm_produce_part *parts,
                   int n, gr_rm_produce_done_fn done, void *ctx) {
    gr_rm_produce_ordered(rm, acks, timeout_ms, parts, n, done, NULL, ctx);
}

void gr_rm_produce_ordered(struct gr_replica_manager *rm, int16_t acks, int32_t timeout_ms,
                           struct gr_rm_produce_part *parts, int n, gr_rm_produce_done_fn done,
                           void (*appended)(void *ctx), void *ctx) {
    /* The purgatories are woken after the answer is handed over or the produce is parked (Kafka
     * 2.7's ActionQueue): completing the followers' parked fetches reads and encodes their
     * records, which must not delay this producer's acknowledgement. */
    struct woken {
        uint64_t key;
        int how;
    } small[8], *wk = n <= 8 ? small : gr_malloc((size_t)n * sizeof *wk);
    int nw = 0;
    bool wait = false;
    for (int i = 0; i < n; i++) {
        if (parts[i].error != GR_KERR_NONE) { /* pre-set by the caller (e.g. invalid topic) */
            parts[i].required_offset = -1;
            continue;
        }
        int how;
        append_one(rm, &parts[i], acks, &how);
        if (how) wk[nw++] = (struct woken){gr_rm_key(parts[i].topic, parts[i].partition), how};
        if (parts[i].required_offset >= 0) wait = true;
    }
    if (wait && appended) appended(ctx);
    if (wait) park_produce(rm, timeout_ms, parts, n, done, ctx);
    else done(ctx, parts, n); /* parts may be gone after this */
    for (int i = 0; i < nw; i++) {
        gr_purgatory_check(rm->fetch_purg, wk[i].key);
        if (wk[i].how == 2) gr_purgatory_check(rm->produce_purg, wk[i].key);
    }
    if (wk != small) free(wk);
}

/* Parks an acks=-1 produce in the produce purgatory until the HW passes every appended part. */
static void park_produce(struct gr_replica_manager *rm, int32_t timeout_ms, struct gr_rm_produce_part *parts, int n,
                         gr_rm_produce_done_fn done, void *ctx) {
    struct delayed_produce *dp = gr_calloc(1, sizeof *dp);
    gr_delayed_op_init(&dp->op, &DP_VT, timeout_ms);
    dp->rm = rm;
    dp->n = n;
    dp->parts = parts;
    dp->done = done;
    dp->ctx = ctx;
    uint64_t small[8], *keys = n <= 8 ? small : gr_malloc((size_t)n * sizeof *keys);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (parts[i].required_offset >= 0) keys[k++] = gr_rm_key(parts[i].topic, parts[i].partition);
    gr_purgatory_submit(rm->produce_purg, &dp->op, keys, k);
    if (keys != small) free(keys);
}

struct append_one_ctx {
    struct gr_rm_produce_part part;
    gr_rm_append_cb cb;
    void *ctx;
};

static void append_done(void *ctx, struct gr_rm_produce_part *parts, int n) {
    struct append_one_ctx *c = ctx;
    (void)n;
    c->cb(c->ctx, parts[0].error, parts[0].base_offset, parts[0].log_start_offset);
    free(c->part.topic);
    free(c);
}

void gr_rm_append(struct gr_replica_manager *rm, const char *topic, int32_t partition, uint8_t *batches,
                  size_t len, int16_t acks, int32_t timeout_ms, gr_rm_append_cb cb, void *ctx) {
    struct append_one_ctx *c = gr_calloc(1, sizeof *c);
    c->part.topic = gr_strdup(topic);
    c->part.partition = partition;
    c->part.records = batches;
    c->part.records_len = len;
    c->cb = cb;
    c->ctx = ctx;
    gr_rm_produce(rm, acks, timeout_ms, &c->part, 1, append_done, c);
}

int16_t gr_rm_read(struct gr_replica_manager *rm, const char *topic, int32_t partition, int64_t offset,
                   int32_t max_bytes, bool committed_only, struct gr_plog_read_result *res) {
    memset(res, 0, sizeof *res);
    struct gr_rm_partition *p = gr_rm_get_partition(rm, topic, partition);
    if (!p) return gr_rm_not_hosted_error(rm, topic, partition);
    pthread_mutex_lock(&p->lock);
    int16_t err = gr_rm_check_epoch_locked(p, -1, true);
    int64_t hw = atomic_load(&p->lml->hw);
    pthread_mutex_unlock(&p->lock);
    if (err == GR_KERR_NONE) err = gr_ldf_check(rm->b, p->lml->dir_idx);
    if (err == GR_KERR_NONE) {
        int rc = gr_plog_read(p->lml->log, offset, max_bytes, committed_only ? hw : -1, true, res);
        if (rc < 0) gr_plog_manager_report_io_error(rm->lm, p->lml->dir_idx, rc, "reading a log");
        err = rc < 0 ? GR_KERR_KAFKA_STORAGE_ERROR : res->error;
    }
    gr_rm_partition_unref(p);
    return err;
}

bool gr_rm_partition_info(struct gr_replica_manager *rm, const char *topic, int32_t partition,
                          struct gr_rm_partition_info *out) {
    struct gr_rm_partition *p = gr_rm_get_partition(rm, topic, partition);
    if (!p) return false;
    pthread_mutex_lock(&p->lock);
    out->is_leader = gr_rs_is_leader(&p->st);
    out->leader = p->st.leader_id;
    out->leader_epoch = p->st.leader_epoch;
    out->elected_epoch = p->st.elected_epoch;
    out->nisr = GR_MIN(p->st.nisr, 32);
    memcpy(out->isr, p->st.isr, (size_t)out->nisr * sizeof(int32_t));
    out->high_watermark = atomic_load(&p->lml->hw);
    pthread_mutex_unlock(&p->lock);
    out->log_start_offset = gr_plog_start_offset(p->lml->log);
    out->log_end_offset = gr_plog_end_offset(p->lml->log);
    gr_rm_partition_unref(p);
    return true;
}

/* ---- lifecycle ---- */

/* The log manager's I/O errors go to the log dir failure flow (Kafka's LogDirFailureChannel). */
static bool rm_io_error(void *ctx, int dir_idx, int err, const char *what) {
    return gr_ldf_report(ctx, dir_idx, err, what);
}

int gr_replica_manager_new(struct gr_broker *b, struct gr_replica_manager **out) {
    *out = NULL;
    struct gr_replica_manager *rm = gr_calloc(1, sizeof *rm);
    rm->nbuckets = GR_RM_NBUCKETS_MIN;
    rm->buckets = gr_calloc(rm->nbuckets, sizeof *rm->buckets);
    rm->b = b;
    rm->cfg = b->cfg;
    rm->broker_id = b->broker_id;
    /* Writers first: follower fetches read-lock the map once per partition they name (tens of
     * thousands per second at 100k partitions), and with glibc's default reader preference a
     * LeaderAndIsr creating partitions waited for a gap in that stream for every insertion. */
    pthread_rwlockattr_t rwa;
    pthread_rwlockattr_init(&rwa);
    pthread_rwlockattr_setkind_np(&rwa, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&rm->map_lock, &rwa);
    pthread_rwlockattr_destroy(&rwa);
    pthread_mutex_init(&rm->tlock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&rm->tcond, &ca);
    pthread_condattr_destroy(&ca);
    int rc = gr_plog_manager_open_with_configs(b->cfg, b->broker_id, b->cluster_id, startup_topic_configs, rm, &rm->lm);
    if (rc < 0) {
        pthread_cond_destroy(&rm->tcond);
        pthread_mutex_destroy(&rm->tlock);
        pthread_rwlock_destroy(&rm->map_lock);
        free(rm->buckets);
        free(rm);
        return rc;
    }
    rm->produce_purg = gr_purgatory_new("produce");
    rm->fetch_purg = gr_purgatory_new("fetch");
    rm->fetch_sessions = gr_fsc_new(rm->cfg ? rm->cfg->max_incremental_fetch_session_cache_slots : 1000,
                                    GR_FSC_EVICTION_MS);
    struct gr_alter_partition_config acfg;
    gr_rm_alter_partition_config(rm, &acfg);
    rm->alter_partition = gr_alter_partition_new(&acfg, &gr_rm_alter_partition_ops, rm);
    struct gr_fetcher_config fcfg;
    gr_rm_fetcher_config(rm, &fcfg);
    rm->fetchers = gr_fetcher_manager_new(&fcfg, &gr_rm_fetcher_ops, rm);
    if (pthread_create(&rm->isr_thread, NULL, isr_thread_main, rm) == 0) rm->isr_thread_started = true;
    b->hooks.ctx = rm;
    b->hooks.become_leader = hook_become_leader;
    b->hooks.become_follower = hook_become_follower;
    b->hooks.stop_replica = hook_stop_replica;
    b->hooks.leader_and_isr_done = hook_leader_and_isr_done;
    b->hooks.apply_leader_and_isr = hook_apply_lai;
    b->hooks.stop_replicas = hook_stop_replicas;
    b->hooks.log_topic_id = hook_log_topic_id;
    b->hooks.adopt_topic_id = hook_adopt_topic_id;
    b->replica_manager = rm;
    gr_plog_manager_set_io_error_handler(rm->lm, rm_io_error, b);
    if (b->metrics) {
        gr_metrics_add_collector(b->metrics, gr_rm_metrics_collector, rm);
        gr_metrics_add_collector(b->metrics, gr_plog_manager_metrics_collector, rm->lm);
        /* Registered now so dashboards see 0 rather than nothing before the first change. */
        gr_metrics_meter(b->metrics, "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec");
        gr_metrics_meter(b->metrics, "kafka.server:type=ReplicaManager,name=IsrExpandsPerSec");
        gr_metrics_meter(b->metrics, "kafka.server:type=ReplicaManager,name=FailedIsrUpdatesPerSec");
    }
    gr_info(LOGGER, "[ReplicaManager broker=%d] started with %d log(s)", rm->broker_id, gr_plog_manager_count(rm->lm));
    *out = rm;
    return 0;
}

void gr_replica_manager_begin_shutdown(struct gr_replica_manager *rm) {
    if (rm) gr_fetcher_stop_adding(rm->fetchers);
}

void gr_replica_manager_shutdown(struct gr_replica_manager *rm) {
    if (!rm || rm->shut_down) return;
    rm->shut_down = true;
    if (rm->b && rm->b->metrics) gr_metrics_remove_collector(rm->b->metrics, gr_rm_metrics_collector, rm);
    if (rm->b && rm->b->metrics) gr_metrics_remove_collector(rm->b->metrics, gr_plog_manager_metrics_collector, rm->lm);
    if (rm->b && rm->b->hooks.ctx == rm) memset(&rm->b->hooks, 0, sizeof rm->b->hooks);
    gr_info(LOGGER, "[ReplicaManager broker=%d] Shutting down", rm->broker_id);
    gr_fetcher_manager_free(rm->fetchers);
    rm->fetchers = NULL;
    gr_info(LOGGER, "[ReplicaFetcherManager on broker %d] shutdown completed", rm->broker_id);
    pthread_mutex_lock(&rm->tlock);
    rm->stopping = true;
    pthread_cond_broadcast(&rm->tcond);
    pthread_mutex_unlock(&rm->tlock);
    if (rm->isr_thread_started) pthread_join(rm->isr_thread, NULL);
    gr_alter_partition_free(rm->alter_partition);
    rm->alter_partition = NULL;
    gr_purgatory_free(rm->produce_purg);
    rm->produce_purg = NULL;
    gr_purgatory_free(rm->fetch_purg);
    gr_fsc_free(rm->fetch_sessions);
    rm->fetch_sessions = NULL;
    rm->fetch_purg = NULL;
    int n;
    struct gr_rm_partition **arr = snapshot(rm, &n);
    for (int i = 0; i < n; i++) {
        struct gr_rm_partition *p = map_remove(rm, arr[i]->topic, arr[i]->partition);
        gr_rm_partition_unref(p);
        gr_rm_partition_unref(arr[i]);
    }
    free(arr);
    gr_info(LOGGER, "[ReplicaManager broker=%d] Closing the logs", rm->broker_id);
    gr_plog_manager_close(rm->lm);
    rm->lm = NULL;
    gr_info(LOGGER, "[ReplicaManager broker=%d] Shut down completely", rm->broker_id);
}

void gr_replica_manager_free(struct gr_replica_manager *rm) {
    if (!rm) return;
    gr_replica_manager_shutdown(rm);
    if (rm->b && rm->b->replica_manager == rm) rm->b->replica_manager = NULL;
    pthread_cond_destroy(&rm->tcond);
    pthread_mutex_destroy(&rm->tlock);
    pthread_rwlock_destroy(&rm->map_lock);
    free(rm->tcfg_cache.topic);
    free(rm->buckets);
    free(rm);
}
