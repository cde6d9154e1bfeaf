/* DeleteRecords on the leader (Kafka's ReplicaManager.deleteRecords + DelayedDeleteRecords):
 * each partition's log start offset is raised to the requested offset (-1 = the high watermark)
 * and the request waits in the produce purgatory until the partition's low watermark -- the
 * smallest log start offset among the leader and its in-sync followers (followers report theirs
 * in every Fetch) -- reaches it, or answers REQUEST_TIMED_OUT at the timeout. */
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "replication/log_dir_failure.h"
#include "replication/purgatory.h"
#include "replication/replica_internal.h"
#include "storage/log_manager.h"

#define LOGGER "kafka.server.ReplicaManager"

/* Kafka's Partition.lowWatermarkIfLeader (ISR members stand for Kafka's "alive brokers"; one
 * that has not fetched in this epoch counts as unknown, -1). p->lock held. */
static int64_t low_watermark_locked(struct gr_rm_partition *p) {
    int64_t lw = gr_plog_start_offset(p->lml->log);
    for (int i = 0; i < p->st.nisr; i++) {
        int32_t id = p->st.isr[i];
        if (id == p->st.local_id) continue;
        struct gr_rs_remote *r = gr_rs_remote(&p->st, id);
        int64_t ls = r ? r->log_start_offset : -1;
        if (ls < lw) lw = ls;
    }
    return lw;
}

static void delete_one(struct gr_replica_manager *rm, struct gr_rm_delete_records_part *dp) {
    dp->low_watermark = -1;
    dp->waiting = false;
    struct gr_rm_partition *p = gr_rm_get_partition(rm, dp->topic, dp->partition);
    if (!p) {
        dp->error = gr_rm_not_hosted_error(rm, dp->topic, dp->partition);
        return;
    }
    pthread_mutex_lock(&p->lock);
    int16_t err = gr_rm_check_epoch_locked(p, -1, true);
    if (err == GR_KERR_NONE) err = gr_ldf_check(rm->b, p->lml->dir_idx);
    struct gr_plog_config cfg;
    if (err == GR_KERR_NONE) {
        gr_plog_get_config(p->lml->log, &cfg);
        if (!cfg.cleanup_delete) err = GR_KERR_POLICY_VIOLATION;
    }
    if (err == GR_KERR_NONE) {
        int64_t hw = atomic_load(&p->lml->hw);
        int64_t target = dp->offset == -1 ? hw : dp->offset;
        if (target < 0 || target > hw) {
            err = GR_KERR_OFFSET_OUT_OF_RANGE;
        } else if (gr_plog_maybe_increment_log_start_offset(p->lml->log, target) < 0) {
            err = GR_KERR_OFFSET_OUT_OF_RANGE;
        } else {
            dp->offset = target;
            dp->low_watermark = low_watermark_locked(p);
            dp->waiting = dp->low_watermark < target;
        }
    }
    dp->error = err;
    pthread_mutex_unlock(&p->lock);
    gr_rm_partition_unref(p);
}

struct delayed_delete {
    struct gr_delayed_op op;
    struct gr_replica_manager *rm;
    struct gr_rm_delete_records_part *parts;
    int n;
    gr_rm_delete_records_done_fn done;
    void *ctx;
};

static bool dd_try(struct gr_delayed_op *op) {
    struct delayed_delete *dd = (struct delayed_delete *)op;
    bool all = true;
    for (int i = 0; i < dd->n; i++) {
        struct gr_rm_delete_records_part *dp = &dd->parts[i];
        if (!dp->waiting) continue;
        struct gr_rm_partition *p = gr_rm_get_partition(dd->rm, dp->topic, dp->partition);
        if (!p) {
            dp->error = gr_rm_not_hosted_error(dd->rm, dp->topic, dp->partition);
            dp->waiting = false;
            continue;
        }
        pthread_mutex_lock(&p->lock);
        int16_t err = gr_rm_check_epoch_locked(p, -1, true);
        if (err != GR_KERR_NONE) {
            dp->error = err;
            dp->waiting = false;
        } else {
            dp->low_watermark = low_watermark_locked(p);
            if (dp->low_watermark >= dp->offset) dp->waiting = false;
            else all = false;
        }
        pthread_mutex_unlock(&p->lock);
        gr_rm_partition_unref(p);
    }
    return all;
}

static void dd_complete(struct gr_delayed_op *op, bool expired) {
    struct delayed_delete *dd = (struct delayed_delete *)op;
    (void)expired;
    for (int i = 0; i < dd->n; i++)
        if (dd->parts[i].waiting) {
            dd->parts[i].error = GR_KERR_REQUEST_TIMED_OUT;
            dd->parts[i].waiting = false;
        }
    dd->done(dd->ctx, dd->parts, dd->n);
}

static void dd_destroy(struct gr_delayed_op *op) { free(op); }

static const struct gr_delayed_op_vt DD_VT = {dd_try, dd_complete, dd_destroy};

void gr_rm_delete_records(struct gr_replica_manager *rm, int32_t timeout_ms, struct gr_rm_delete_records_part *parts,
                          int n, gr_rm_delete_records_done_fn done, void *ctx) {
    bool wait = false;
    for (int i = 0; i < n; i++) {
        if (parts[i].error != GR_KERR_NONE) {
            parts[i].waiting = false;
            parts[i].low_watermark = -1;
            continue;
        }
        delete_one(rm, &parts[i]);
        if (parts[i].waiting) wait = true;
        if (parts[i].error == GR_KERR_NONE)
            gr_info(LOGGER, "[ReplicaManager broker=%d] DeleteRecords on %s-%d: log start offset %lld", rm->broker_id,
                    parts[i].topic, parts[i].partition, (long long)parts[i].offset);
    }
    if (!wait) {
        done(ctx, parts, n);
        return;
    }
    struct delayed_delete *dd = gr_calloc(1, sizeof *dd);
    gr_delayed_op_init(&dd->op, &DD_VT, timeout_ms);
    dd->rm = rm;
    dd->parts = parts;
    dd->n = n;
    dd->done = done;
    dd->ctx = ctx;
    uint64_t small[8], *keys = n <= 8 ? small : gr_malloc((size_t)n * sizeof *keys);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (parts[i].waiting) keys[k++] = gr_rm_key(parts[i].topic, parts[i].partition);
    gr_purgatory_submit(rm->produce_purg, &dd->op, keys, k);
    if (keys != small) free(keys);
}
