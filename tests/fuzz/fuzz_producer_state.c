/* libFuzzer: producer state on arbitrary bytes: snapshot decoding (a decoded snapshot must
 * re-encode to the same bytes) and batches with any producer fields through the leader
 * (Client) and follower (Replication) paths of storage/producer_state.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "storage/batch.h"
#include "storage/producer_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void snapshot(const uint8_t *data, size_t size) {
    struct gr_pstate_entry *v = NULL;
    int n = 0;
    if (gr_pstate_snapshot_decode(data, size, &v, &n) != 0) return;
    size_t len;
    uint8_t *again = gr_pstate_snapshot_encode(v, n, &len);
    /* A file with one entry per producer and a data batch in each (Kafka's own) re-encodes to the
     * same bytes. Others (consecutive entries of a producer with different epochs, timestamps
     * or more than 5 batches; entries with no batch) are normalised: decoding the re-encoded
     * bytes and encoding again gives them back unchanged. */
    bool plain = (size_t)n == (size - 10) / 46; /* no entries merged */
    for (int i = 0; i < n; i++)
        if (v[i].n != 1) plain = false;
    if (plain && (len != size || memcmp(again, data, size) != 0)) abort();
    struct gr_pstate_entry *w = NULL;
    int m = 0;
    if (gr_pstate_snapshot_decode(again, len, &w, &m) != 0 || m != n) abort();
    size_t len2;
    uint8_t *third = gr_pstate_snapshot_encode(w, m, &len2);
    if (len2 != len || memcmp(third, again, len) != 0) abort();
    free(third);
    free(w);
    free(again);
    free(v);
}

static void batches(const uint8_t *data, size_t size) {
    if (gr_batch_validate_all(data, size, 0, NULL) != GR_BATCH_OK) return;
    struct gr_pstate *ps = gr_pstate_new("/nonexistent-fuzz-dir", 1000);
    for (int round = 0; round < 2; round++) {
        struct gr_pstate_append app;
        struct gr_pstate_batch dup;
        bool is_dup;
        gr_pstate_append_init(&app);
        int16_t err = gr_pstate_prepare(ps, data, size, GR_PSTATE_CLIENT, &app, &dup, &is_dup);
        if (err == 0 && !is_dup) gr_pstate_commit(ps, &app, 1);
        gr_pstate_append_release(&app);
        gr_pstate_load_batches(ps, data, size, 2);
        if (!gr_pstate_check_ongoing(ps)) abort(); /* the open-transaction heap agrees */
    }
    (void)gr_pstate_remove_expired(ps, INT64_MAX / 2);
    if (!gr_pstate_check_ongoing(ps)) abort();
    gr_pstate_free(ps);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    snapshot(data, size);
    batches(data, size);
    return 0;
}
