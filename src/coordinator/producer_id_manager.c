/* Producer id blocks in ZooKeeper; see producer_id_manager.h. */
#include "coordinator/producer_id_manager.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/util.h"
#include "zk/kzk.h"

#define LOGGER "kafka.coordinator.transaction.ProducerIdManager"

struct gr_pidm {
    pthread_mutex_t mu;
    struct gr_kzk *zk;
    int32_t broker_id;
    int64_t block_start, block_end; /* -1 before the first claim */
    int64_t next_id;                /* next id to hand out; > block_end: claim first */
};

struct gr_pidm *gr_pidm_new(struct gr_kzk *zk, int32_t broker_id) {
    struct gr_pidm *m = gr_calloc(1, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    m->zk = zk;
    m->broker_id = broker_id;
    m->block_start = m->block_end = -1;
    m->next_id = 0;
    return m;
}

void gr_pidm_free(struct gr_pidm *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* After a BADVERSION: does the znode hold exactly the block we tried to write? */
static bool our_write_landed(struct gr_pidm *m, const struct gr_kzk_producer_id_block *want) {
    struct gr_kzk_producer_id_block cur;
    int32_t ver;
    if (gr_kzk_get_producer_id_block(m->zk, &cur, &ver) != 0) return false;
    return cur.broker == want->broker && cur.block_start == want->block_start && cur.block_end == want->block_end;
}

static int claim_locked(struct gr_pidm *m) {
    for (int attempt = 0;; attempt++) {
        struct gr_kzk_producer_id_block cur, next = {.broker = m->broker_id};
        int32_t version = INT32_MIN;
        int rc = gr_kzk_get_producer_id_block(m->zk, &cur, &version);
        if (rc == GR_KZK_ENONODE && version == INT32_MIN) { /* the znode itself is missing */
            rc = gr_kzk_ensure_producer_id_block(m->zk);
            if (rc) return rc;
            continue;
        }
        if (rc == 0) {
            if (cur.block_end > INT64_MAX - GR_PIDM_BLOCK_SIZE) {
                gr_error(LOGGER, "Exhausted all producerIds as the next block's end producerId would exceed the "
                                 "long type limit (current block end %" PRId64 ")", cur.block_end);
                return -EOVERFLOW;
            }
            next.block_start = cur.block_end + 1;
        } else if (rc == GR_KZK_ENONODE) { /* empty znode: the very first block */
            next.block_start = 0;
        } else {
            return rc;
        }
        next.block_end = next.block_start + GR_PIDM_BLOCK_SIZE - 1;
        rc = gr_kzk_set_producer_id_block(m->zk, &next, version);
        if (rc == GR_KZK_EBADVERSION && our_write_landed(m, &next)) rc = 0;
        if (rc == 0) {
            m->block_start = next.block_start;
            m->block_end = next.block_end;
            m->next_id = next.block_start;
            gr_info(LOGGER, "[ProducerId Manager %d]: Acquired new producerId block (brokerId:%d,blockStartProducerId:%"
                    PRId64 ",blockEndProducerId:%" PRId64 ") by writing to Zk with path version %d",
                    m->broker_id, m->broker_id, next.block_start, next.block_end, version + 1);
            return 0;
        }
        if (rc != GR_KZK_EBADVERSION && rc != GR_KZK_ENONODE && rc != GR_KZK_EEXISTS) return rc;
        gr_debug(LOGGER, "[ProducerId Manager %d]: lost the race for block %" PRId64 "-%" PRId64 ", retrying",
                 m->broker_id, next.block_start, next.block_end);
    }
}

int gr_pidm_claim(struct gr_pidm *m) {
    pthread_mutex_lock(&m->mu);
    int rc = claim_locked(m);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int gr_pidm_generate(struct gr_pidm *m, int64_t *producer_id) {
    pthread_mutex_lock(&m->mu);
    int rc = 0;
    if (m->block_end < 0 || m->next_id > m->block_end) rc = claim_locked(m);
    if (rc == 0) *producer_id = m->next_id++;
    pthread_mutex_unlock(&m->mu);
    return rc;
}

void gr_pidm_current_block(struct gr_pidm *m, int64_t *start, int64_t *end) {
    pthread_mutex_lock(&m->mu);
    *start = m->block_start;
    *end = m->block_end;
    pthread_mutex_unlock(&m->mu);
}
