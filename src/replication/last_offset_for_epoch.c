/* Kafka's Partition.lastOffsetForLeaderEpoch (the lookup, without the epoch fencing its callers
 * do first): OffsetForLeaderEpoch answers it, and Fetch v12+ (LastFetchedEpoch) uses it to find
 * where a fetcher's log diverges from ours. See replica_internal.h. */
#include <stdlib.h>

#include "replication/replica_internal.h"
#include "common/util.h"

/* Kafka's LeaderEpochFileCache.endOffsetFor over (epochs, starts)[0..n). */
static void end_offset_for(const int32_t *epochs, const int64_t *starts, int n, int32_t requested, int64_t leo,
                           int32_t *epoch_out, int64_t *end_out) {
    *epoch_out = -1;
    *end_out = -1;
    if (requested < 0 || n == 0) return;
    if (requested == epochs[n - 1]) {
        *epoch_out = requested;
        *end_out = leo;
        return;
    }
    int h = 0;
    while (h < n && epochs[h] <= requested) h++;
    if (h == n) return; /* newer than anything we know */
    *end_out = starts[h];
    *epoch_out = h == 0 ? requested : epochs[h - 1];
}

void gr_rm_last_offset_for_epoch(struct gr_rm_partition *p, int32_t requested, int32_t *epoch_out, int64_t *end_out) {
    pthread_mutex_lock(&p->lock);
    bool leader = gr_rs_is_leader(&p->st);
    int32_t cur_epoch = p->st.leader_epoch;
    int64_t cur_start = p->st.leader_epoch_start_offset;
    pthread_mutex_unlock(&p->lock);
    struct gr_plog *log = p->lml->log;
    int32_t sepochs[64];
    int64_t sstarts[64];
    int32_t *epochs = sepochs;
    int64_t *starts = sstarts;
    int n = gr_plog_epoch_entries(log, epochs, starts, 63);
    if (n > 63) {
        epochs = gr_malloc((size_t)(n + 1) * sizeof *epochs);
        starts = gr_malloc((size_t)(n + 1) * sizeof *starts);
        int m = gr_plog_epoch_entries(log, epochs, starts, n);
        n = GR_MIN(m, n);
    }
    int64_t leo = gr_plog_end_offset(log);
    /* the leader's own epoch before its first append in it (see replica_internal.h) */
    if (leader && cur_epoch >= 0 && cur_start >= 0 && (n == 0 || epochs[n - 1] < cur_epoch)) {
        epochs[n] = cur_epoch;
        starts[n] = cur_start;
        n++;
    }
    end_offset_for(epochs, starts, n, requested, leo, epoch_out, end_out);
    if (epochs != sepochs) {
        free(epochs);
        free(starts);
    }
}
