/* libFuzzer: transaction bytes from the log and the wire: __transaction_state records (key and
 * value split by the first input byte; a decoded record must re-encode to the same value bytes
 * when its partitions are grouped by topic), .txnindex entries (decode/encode round trip), and
 * batches (markers included) through the producer state's coordinator and replication paths with
 * a listener and the KIP-890 guard switched on. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/txn_log.h"
#include "storage/batch.h"
#include "storage/producer_state.h"
#include "storage/txn_index.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void txn_record(const uint8_t *data, size_t size) {
    if (size < 1) return;
    size_t k = data[0] < size - 1 ? data[0] : size - 1;
    const uint8_t *key = data + 1, *val = data + 1 + k;
    size_t vlen = size - 1 - k;
    struct gr_txn_record r;
    if (gr_txn_log_decode(key, k, vlen ? val : NULL, vlen, &r) != 0) return;
    if (!r.tombstone) {
        size_t len;
        uint8_t *again = gr_txn_log_value(&r, &len);
        struct gr_txn_record r2;
        if (gr_txn_log_decode(key, k, again, len, &r2) != 0) abort();
        if (r2.producer_id != r.producer_id || r2.state != r.state ||
            (r.state != GR_TXN_EMPTY && r2.n_parts != r.n_parts))
            abort();
        gr_txn_record_free(&r2);
        free(again);
    }
    gr_txn_record_free(&r);
}

static void index_entry(const uint8_t *data, size_t size) {
    struct gr_aborted_txn e;
    if (gr_txn_index_decode(data, size, &e) != 0) return;
    uint8_t out[GR_TXN_INDEX_ENTRY_SIZE];
    gr_txn_index_encode(&e, out);
    if (memcmp(out, data, sizeof out) != 0) abort();
}

static int completed;
static void listener(void *ctx, const struct gr_pstate_completed_txn *t) {
    (void)ctx;
    if (t->first_offset > t->last_offset) abort();
    completed++;
}

static void markers(const uint8_t *data, size_t size) {
    if (gr_batch_validate_all(data, size, 0, NULL) != GR_BATCH_OK) return;
    struct gr_pstate *ps = gr_pstate_new("/nonexistent-fuzz-dir", 1000);
    gr_pstate_set_txn_listener(ps, listener, NULL);
    gr_pstate_set_verification_enabled(true);
    enum gr_pstate_origin origins[] = {GR_PSTATE_COORDINATOR, GR_PSTATE_CLIENT};
    for (int round = 0; round < 2; round++) {
        struct gr_pstate_append app;
        bool is_dup;
        struct gr_pstate_batch dup;
        gr_pstate_append_init(&app);
        int16_t err = gr_pstate_prepare(ps, data, size, origins[round], &app, &dup, &is_dup);
        if (err == 0 && !is_dup) gr_pstate_commit(ps, &app, 1);
        gr_pstate_append_release(&app);
        gr_pstate_load_batches(ps, data, size, 2);
        uint64_t token = gr_pstate_start_verification(ps, 1, 0, 0);
        if (token) gr_pstate_end_verification(ps, 1, token, true);
        if (!gr_pstate_check_ongoing(ps)) abort();
    }
    (void)gr_pstate_first_ongoing_offset(ps);
    gr_pstate_set_verification_enabled(false);
    gr_pstate_free(ps);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    txn_record(data, size);
    index_entry(data, size);
    markers(data, size);
    return 0;
}
