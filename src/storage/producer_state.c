/* Producer state of one partition: sequence/epoch checks and `<offset>.snapshot` files.
 *
 * Snapshot file `<20-digit map end offset>.snapshot` (Kafka 2.7 ProducerStateManager, version 1;
 * big-endian):
 *
 *   off   size  field
 *   ----  ----  ----------------------------------------------------------------------------
 *      0     2  version                   i16  = 1
 *      2     4  crc                       u32  CRC-32C of bytes [6, end)
 *      6     4  count                     i32  number of entries that follow
 *     10  46*n  entries, each:
 *                 +0   8  producer_id               i64
 *                 +8   2  epoch                     i16
 *                +10   4  last_sequence             i32  (-1 when no data batch is cached)
 *                +14   8  last_offset               i64  (-1: no data batch, e.g. markers only)
 *                +22   4  offset_delta              i32  last_offset - first offset of that batch
 *                +26   8  timestamp                 i64  the producer's last timestamp
 *                +34   4  coordinator_epoch         i32
 *                +38   8  current_txn_first_offset  i64  (-1: no open transaction)
 *
 * Every cached batch of a producer (up to GR_PSTATE_BATCHES_TO_RETAIN) is stored, oldest first, as
 * one entry each; all entries of a producer carry its epoch, timestamp, coordinator epoch and open
 * transaction. Kafka 2.7 stores only the newest batch, so a broker that restarts forgets the
 * others and answers a retry of one of them (a producer that saw a possibly persisted error
 * before the restart) with OUT_OF_ORDER_SEQUENCE_NUMBER, which librdkafka treats as fatal;
 * Gregor answers it as the duplicate it is. The layout is Kafka's: Kafka's reader keeps the last
 * entry of a producer id, i.e. the same state as from a snapshot it wrote itself, and a file
 * Kafka wrote (one entry per producer) loads here as before. Files are written with plain
 * create+write (no fsync, no rename), as Kafka does; a torn or corrupt file fails the version,
 * size or CRC check on load and is deleted, and the next older snapshot is tried. */
#include "storage/producer_state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "storage/batch.h"
#include "common/be.h"

#define LOGGER "kafka.log.ProducerStateManager"
#define HDR_SIZE 10

struct gr_pstate {
    const char *dir; /* borrowed (the owning log's) */
    bool no_snapshots; /* the directory holds no snapshot file: scans are skipped */
    int64_t expiration_ms;
    /* open addressing, linear probing; NULL = empty slot; cap is a power of two */
    struct gr_pstate_entry **slots;
    size_t cap, n;
    int64_t last_map_offset;
    int64_t last_snap_offset;
    gr_pstate_txn_listener txn_listener;
    void *txn_listener_ctx;
    /* Ongoing transactions (Kafka's ongoingTxns TreeMap keyed by first offset): a binary min-heap
     * of the entries with txn_first_offset >= 0 by that offset; each entry knows its heap index
     * (heap_idx, -1 when not in it). */
    struct gr_pstate_entry **heap;
    int n_heap, cap_heap;
    /* KIP-890 verification guards, at most one per producer (Kafka 3.6's VerificationStateEntry):
     * token identifies one verification (a marker that clears the guard makes a later answer of
     * that verification worthless, ABA included); confirmed once the coordinator said yes. */
    struct guard { int64_t pid; uint64_t token; int64_t created_ms; int16_t epoch; bool confirmed; } *guards;
    int n_guards, cap_guards;
    uint64_t next_token;
};

static _Atomic bool verification_enabled;

/* ---- sequences ---- */

int32_t gr_pstate_batch_first_seq(const struct gr_pstate_batch *b) {
    /* Kafka's DefaultRecordBatch.decrementSequence(lastSeq, offsetDelta) */
    if (b->last_seq < b->offset_delta) return (int32_t)((int64_t)INT32_MAX - (b->offset_delta - b->last_seq) + 1);
    return b->last_seq - b->offset_delta;
}

/* DefaultRecordBatch.incrementSequence */
static int32_t incr_seq(int32_t seq, int32_t delta) {
    if (seq > INT32_MAX - delta) return delta - (INT32_MAX - seq) - 1;
    return seq + delta;
}

static bool in_sequence(int32_t last_seq, int32_t next_seq) {
    return (int64_t)next_seq == (int64_t)last_seq + 1 || (next_seq == 0 && last_seq == INT32_MAX);
}

static int32_t entry_last_seq(const struct gr_pstate_entry *e) { return e->n ? e->batches[e->n - 1].last_seq : -1; }

static void entry_init(struct gr_pstate_entry *e, int64_t pid) {
    memset(e, 0, sizeof *e);
    e->producer_id = pid;
    e->epoch = -1;
    e->coordinator_epoch = -1;
    e->last_timestamp = -1;
    e->txn_first_offset = -1;
    e->heap_idx = -1;
}

static void entry_maybe_update_epoch(struct gr_pstate_entry *e, int16_t epoch) {
    if (e->epoch != epoch) {
        e->n = 0;
        e->epoch = epoch;
    }
}

static void entry_add_batch(struct gr_pstate_entry *e, int16_t epoch, int32_t last_seq, int64_t last_offset,
                            int32_t offset_delta, int64_t ts) {
    entry_maybe_update_epoch(e, epoch);
    if (e->n == GR_PSTATE_BATCHES_TO_RETAIN) {
        memmove(e->batches, e->batches + 1, (GR_PSTATE_BATCHES_TO_RETAIN - 1) * sizeof e->batches[0]);
        e->n--;
    }
    e->batches[e->n++] = (struct gr_pstate_batch){last_seq, last_offset, offset_delta, ts};
    e->last_timestamp = ts;
}

/* ---- the table ---- */

static size_t slot_of(int64_t pid, size_t cap) {
    uint64_t h = (uint64_t)pid * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

static struct gr_pstate_entry *find(const struct gr_pstate *ps, int64_t pid) {
    if (!ps->cap) return NULL;
    for (size_t i = slot_of(pid, ps->cap);; i = (i + 1) & (ps->cap - 1)) {
        struct gr_pstate_entry *e = ps->slots[i];
        if (!e) return NULL;
        if (e->producer_id == pid) return e;
    }
}

static void place(struct gr_pstate_entry **slots, size_t cap, struct gr_pstate_entry *e) {
    size_t i = slot_of(e->producer_id, cap);
    while (slots[i]) i = (i + 1) & (cap - 1);
    slots[i] = e;
}

static void grow(struct gr_pstate *ps) {
    size_t cap = ps->cap ? ps->cap * 2 : 16;
    struct gr_pstate_entry **slots = gr_calloc(cap, sizeof *slots);
    for (size_t i = 0; i < ps->cap; i++)
        if (ps->slots[i]) place(slots, cap, ps->slots[i]);
    free(ps->slots);
    ps->slots = slots;
    ps->cap = cap;
}

/* ---- ongoing transactions: min-heap by txn_first_offset ---- */

static bool heap_less(const struct gr_pstate *ps, int a, int b) {
    return ps->heap[a]->txn_first_offset < ps->heap[b]->txn_first_offset;
}

static void heap_swap(struct gr_pstate *ps, int a, int b) {
    struct gr_pstate_entry *t = ps->heap[a];
    ps->heap[a] = ps->heap[b];
    ps->heap[b] = t;
    ps->heap[a]->heap_idx = a;
    ps->heap[b]->heap_idx = b;
}

static void heap_fix(struct gr_pstate *ps, int i) {
    while (i > 0 && heap_less(ps, i, (i - 1) / 2)) {
        heap_swap(ps, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < ps->n_heap && heap_less(ps, l, m)) m = l;
        if (r < ps->n_heap && heap_less(ps, r, m)) m = r;
        if (m == i) return;
        heap_swap(ps, i, m);
        i = m;
    }
}

/* Puts e in, moves it or takes it out of the heap after its txn_first_offset was set. O(log n). */
static void heap_update(struct gr_pstate *ps, struct gr_pstate_entry *e) {
    if (e->txn_first_offset >= 0 && e->heap_idx < 0) {
        if (ps->n_heap == ps->cap_heap) {
            ps->cap_heap = ps->cap_heap ? ps->cap_heap * 2 : 8;
            ps->heap = gr_realloc(ps->heap, (size_t)ps->cap_heap * sizeof *ps->heap);
        }
        e->heap_idx = ps->n_heap++;
        ps->heap[e->heap_idx] = e;
        heap_fix(ps, e->heap_idx);
    } else if (e->txn_first_offset < 0 && e->heap_idx >= 0) {
        int i = e->heap_idx;
        e->heap_idx = -1;
        if (i != --ps->n_heap) {
            ps->heap[i] = ps->heap[ps->n_heap];
            ps->heap[i]->heap_idx = i;
            heap_fix(ps, i);
        }
    } else if (e->heap_idx >= 0) {
        heap_fix(ps, e->heap_idx);
    }
}

/* Stores a copy of e (replacing the entry of the same pid). */
static void put(struct gr_pstate *ps, const struct gr_pstate_entry *e) {
    struct gr_pstate_entry *cur = find(ps, e->producer_id);
    if (cur) {
        int idx = cur->heap_idx;
        *cur = *e;
        cur->heap_idx = idx;
        heap_update(ps, cur);
        return;
    }
    if ((ps->n + 1) * 4 > ps->cap * 3) grow(ps);
    cur = gr_malloc(sizeof *cur);
    *cur = *e;
    cur->heap_idx = -1;
    place(ps->slots, ps->cap, cur);
    ps->n++;
    heap_update(ps, cur);
}

static void clear_entries(struct gr_pstate *ps) {
    for (size_t i = 0; i < ps->cap; i++) {
        free(ps->slots[i]);
        ps->slots[i] = NULL;
    }
    ps->n = 0;
    ps->n_heap = 0;
}

struct gr_pstate *gr_pstate_new(const char *dir, int64_t expiration_ms) {
    struct gr_pstate *ps = gr_calloc(1, sizeof *ps);
    ps->dir = dir;
    ps->expiration_ms = expiration_ms;
    return ps;
}

void gr_pstate_free(struct gr_pstate *ps) {
    if (!ps) return;
    clear_entries(ps);
    free(ps->slots);
    free(ps->heap);
    free(ps->guards);
    free(ps);
}

void gr_pstate_assume_no_snapshots(struct gr_pstate *ps) { ps->no_snapshots = true; }

void gr_pstate_set_expiration_ms(struct gr_pstate *ps, int64_t expiration_ms) { ps->expiration_ms = expiration_ms; }
int64_t gr_pstate_map_end_offset(const struct gr_pstate *ps) { return ps->last_map_offset; }
void gr_pstate_set_map_end_offset(struct gr_pstate *ps, int64_t offset) { ps->last_map_offset = offset; }
int gr_pstate_producer_count(const struct gr_pstate *ps) { return (int)ps->n; }

bool gr_pstate_lookup(const struct gr_pstate *ps, int64_t producer_id, struct gr_pstate_entry *out) {
    const struct gr_pstate_entry *e = find(ps, producer_id);
    if (e && out) *out = *e;
    return e != NULL;
}

int gr_pstate_list(const struct gr_pstate *ps, struct gr_pstate_entry *out, int max) {
    int n = 0;
    for (size_t i = 0; i < ps->cap && n < max; i++)
        if (ps->slots[i]) out[n++] = *ps->slots[i];
    return n;
}

/* ---- appends ---- */

void gr_pstate_append_init(struct gr_pstate_append *app) { memset(app, 0, sizeof *app); }

void gr_pstate_append_release(struct gr_pstate_append *app) {
    free(app->next);
    free(app->orig_epoch);
    free(app->done);
    free(app->consumed);
    memset(app, 0, sizeof *app);
}

/* The staged entry of pid, created from the stored one (or empty) on first use. */
static int staged(struct gr_pstate *ps, struct gr_pstate_append *app, int64_t pid) {
    for (int i = 0; i < app->n; i++)
        if (app->next[i].producer_id == pid) return i;
    if (app->n == app->cap) {
        app->cap = app->cap ? app->cap * 2 : 4;
        app->next = gr_realloc(app->next, (size_t)app->cap * sizeof *app->next);
        app->orig_epoch = gr_realloc(app->orig_epoch, (size_t)app->cap * sizeof *app->orig_epoch);
    }
    const struct gr_pstate_entry *cur = find(ps, pid);
    if (cur) app->next[app->n] = *cur;
    else entry_init(&app->next[app->n], pid);
    app->orig_epoch[app->n] = cur ? cur->epoch : -1;
    return app->n++;
}

/* Kafka's ProducerAppendInfo.appendDataBatch checks; returns NONE or the error. */
static int16_t check_data_batch(const struct gr_pstate_entry *e, int16_t orig_epoch, const struct gr_batch_info *bi,
                                enum gr_pstate_origin origin) {
    if (bi->ProducerEpoch < e->epoch) {
        if (origin == GR_PSTATE_REPLICATION) {
            gr_warn(LOGGER, "producer %" PRId64 " epoch %d at offset %" PRId64 " is below the last seen epoch %d",
                    bi->ProducerId, bi->ProducerEpoch, bi->BaseOffset, e->epoch);
            return GR_KERR_NONE;
        }
        return GR_KERR_INVALID_PRODUCER_EPOCH;
    }
    if (origin != GR_PSTATE_CLIENT) return GR_KERR_NONE;
    if (bi->ProducerEpoch != e->epoch) {
        if (bi->BaseSequence != 0 && e->epoch != -1) return GR_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
    } else if (!(orig_epoch == -1 || in_sequence(entry_last_seq(e), bi->BaseSequence))) {
        return GR_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
    }
    return GR_KERR_NONE;
}

/* ---- transactions ---- */

void gr_pstate_set_txn_listener(struct gr_pstate *ps, gr_pstate_txn_listener fn, void *ctx) {
    ps->txn_listener = fn;
    ps->txn_listener_ctx = ctx;
}

void gr_pstate_set_verification_enabled(bool on) { verification_enabled = on; }
bool gr_pstate_verification_enabled(void) { return verification_enabled; }

static int guard_find(const struct gr_pstate *ps, int64_t pid) {
    for (int i = 0; i < ps->n_guards; i++)
        if (ps->guards[i].pid == pid) return i;
    return -1;
}

static void guard_clear(struct gr_pstate *ps, int64_t pid) {
    int i = guard_find(ps, pid);
    if (i >= 0) ps->guards[i] = ps->guards[--ps->n_guards];
}

bool gr_pstate_needs_verification(const struct gr_pstate *ps, int64_t producer_id, int16_t epoch) {
    if (!verification_enabled) return false;
    const struct gr_pstate_entry *e = find(ps, producer_id);
    if (e && epoch < e->epoch) return false; /* the append fails the epoch check anyway */
    return !(e && e->txn_first_offset >= 0 && e->epoch == epoch);
}

uint64_t gr_pstate_start_verification(struct gr_pstate *ps, int64_t producer_id, int16_t epoch, int64_t now_ms) {
    if (!gr_pstate_needs_verification(ps, producer_id, epoch)) return 0;
    int i = guard_find(ps, producer_id);
    if (i >= 0 && ps->guards[i].epoch == epoch) return ps->guards[i].token; /* a verification under way */
    if (i < 0) {
        if (ps->n_guards == ps->cap_guards) {
            ps->cap_guards = ps->cap_guards ? ps->cap_guards * 2 : 4;
            ps->guards = gr_realloc(ps->guards, (size_t)ps->cap_guards * sizeof *ps->guards);
        }
        i = ps->n_guards++;
    }
    ps->guards[i] = (struct guard){producer_id, ++ps->next_token, now_ms, epoch, false};
    return ps->guards[i].token;
}

void gr_pstate_end_verification(struct gr_pstate *ps, int64_t producer_id, uint64_t token, bool verified) {
    int i = guard_find(ps, producer_id);
    if (i < 0 || ps->guards[i].token != token) return; /* cleared (a marker) or replaced meanwhile */
    if (verified) ps->guards[i].confirmed = true;
    else ps->guards[i] = ps->guards[--ps->n_guards];
}

int gr_pstate_verification_count(const struct gr_pstate *ps) { return ps->n_guards; }

int64_t gr_pstate_first_ongoing_offset(const struct gr_pstate *ps) {
    return ps->n_heap ? ps->heap[0]->txn_first_offset : -1;
}

int gr_pstate_ongoing_count(const struct gr_pstate *ps) { return ps->n_heap; }

bool gr_pstate_check_ongoing(const struct gr_pstate *ps) {
    int open = 0;
    int64_t m = -1;
    for (size_t i = 0; i < ps->cap; i++) {
        const struct gr_pstate_entry *e = ps->slots[i];
        if (!e) continue;
        if (e->txn_first_offset >= 0) {
            open++;
            if (m < 0 || e->txn_first_offset < m) m = e->txn_first_offset;
            if (e->heap_idx < 0 || e->heap_idx >= ps->n_heap || ps->heap[e->heap_idx] != e) return false;
        } else if (e->heap_idx != -1) {
            return false;
        }
    }
    for (int i = 1; i < ps->n_heap; i++)
        if (ps->heap[i]->txn_first_offset < ps->heap[(i - 1) / 2]->txn_first_offset) return false;
    return open == ps->n_heap && m == gr_pstate_first_ongoing_offset(ps);
}

int gr_pstate_parse_marker(const uint8_t *batch, size_t len, int16_t *type, int32_t *coordinator_epoch) {
    struct gr_batch_rec_iter it;
    struct gr_batch_rec_view rec;
    *coordinator_epoch = -1;
    if (gr_batch_rec_iter_init(&it, batch, len) != GR_BATCH_OK) return -EINVAL;
    if (gr_batch_rec_iter_next(&it, &rec) != 1 || !rec.Key || rec.KeyLength < 4) return -EINVAL;
    *type = (int16_t)gr_be16(rec.Key + 2);
    if (rec.Value && rec.ValueLength >= 6) *coordinator_epoch = (int32_t)gr_be32(rec.Value + 2);
    return 0;
}

static void push_done(struct gr_pstate_append *app, const struct gr_pstate_completed_txn *t) {
    if (app->n_done == app->cap_done) {
        app->cap_done = app->cap_done ? app->cap_done * 2 : 4;
        app->done = gr_realloc(app->done, (size_t)app->cap_done * sizeof *app->done);
    }
    app->done[app->n_done++] = *t;
}

static void push_consumed(struct gr_pstate_append *app, int64_t pid) {
    if (app->n_consumed == app->cap_consumed) {
        app->cap_consumed = app->cap_consumed ? app->cap_consumed * 2 : 4;
        app->consumed = gr_realloc(app->consumed, (size_t)app->cap_consumed * sizeof *app->consumed);
    }
    app->consumed[app->n_consumed++] = pid;
}

/* A transaction marker (Kafka's appendEndTxnMarker). */
static int16_t stage_marker(struct gr_pstate_append *app, struct gr_pstate_entry *e, const struct gr_batch_info *bi,
                            const uint8_t *batch, enum gr_pstate_origin origin) {
    int16_t type = -1;
    int32_t coord_epoch = -1;
    if (gr_pstate_parse_marker(batch, bi->size, &type, &coord_epoch) != 0 ||
        (type != GR_CONTROL_ABORT && type != GR_CONTROL_COMMIT))
        return GR_KERR_NONE; /* other control records (e.g. LEADER_CHANGE) end nothing */
    if (origin == GR_PSTATE_COORDINATOR) {
        if (bi->ProducerEpoch < e->epoch) return GR_KERR_INVALID_PRODUCER_EPOCH;
        if (coord_epoch < e->coordinator_epoch) return GR_KERR_TRANSACTION_COORDINATOR_FENCED;
    }
    struct gr_pstate_completed_txn t = {bi->ProducerId, e->txn_first_offset >= 0 ? e->txn_first_offset : bi->BaseOffset,
                                        bi->BaseOffset, type == GR_CONTROL_ABORT, -1};
    push_done(app, &t);
    entry_maybe_update_epoch(e, bi->ProducerEpoch);
    e->coordinator_epoch = coord_epoch;
    e->txn_first_offset = -1;
    e->last_timestamp = bi->MaxTimestamp;
    return GR_KERR_NONE;
}

static int16_t stage_batch(struct gr_pstate *ps, struct gr_pstate_append *app, struct gr_pstate_entry *e,
                           int16_t orig_epoch, const struct gr_batch_info *bi, const uint8_t *batch,
                           enum gr_pstate_origin origin) {
    int64_t last_offset = gr_batch_info_last_offset(bi);
    if (bi->Attributes & GR_BATCH_ATTR_CONTROL) return stage_marker(app, e, bi, batch, origin);
    int16_t err = check_data_batch(e, orig_epoch, bi, origin);
    if (err != GR_KERR_NONE) return err;
    bool txn = (bi->Attributes & GR_BATCH_ATTR_TRANSACTIONAL) != 0;
    if (e->txn_first_offset >= 0 && !txn && origin == GR_PSTATE_CLIENT) return GR_KERR_INVALID_TXN_STATE;
    if (txn && origin != GR_PSTATE_REPLICATION && verification_enabled && e->txn_first_offset < 0) {
        /* KIP-890: starting a transaction here needs the coordinator's confirmation (Kafka 3.7
         * checks the coordinator's own transactional offset commits too) */
        int g = guard_find(ps, bi->ProducerId);
        if (g < 0 || ps->guards[g].epoch != bi->ProducerEpoch || !ps->guards[g].confirmed)
            return GR_KERR_INVALID_TXN_STATE;
        push_consumed(app, bi->ProducerId);
    }
    entry_add_batch(e, bi->ProducerEpoch, incr_seq(bi->BaseSequence, bi->LastOffsetDelta), last_offset,
                    (int32_t)(last_offset - bi->BaseOffset), bi->MaxTimestamp);
    if (txn && e->txn_first_offset < 0) e->txn_first_offset = bi->BaseOffset;
    return GR_KERR_NONE;
}

static bool find_duplicate(const struct gr_pstate_entry *e, const struct gr_batch_info *bi,
                           struct gr_pstate_batch *dup) {
    if (bi->ProducerEpoch != e->epoch) return false;
    int32_t last_seq = incr_seq(bi->BaseSequence, bi->LastOffsetDelta);
    for (int i = 0; i < e->n; i++) {
        if (gr_pstate_batch_first_seq(&e->batches[i]) == bi->BaseSequence && e->batches[i].last_seq == last_seq) {
            *dup = e->batches[i];
            return true;
        }
    }
    return false;
}

int16_t gr_pstate_prepare(struct gr_pstate *ps, const uint8_t *buf, size_t len, enum gr_pstate_origin origin,
                          struct gr_pstate_append *app, struct gr_pstate_batch *dup, bool *is_dup) {
    if (is_dup) *is_dup = false;
    struct gr_batch_iter it;
    struct gr_batch_info bi;
    const uint8_t *p;
    gr_batch_iter_init(&it, buf, len);
    while (gr_batch_iter_next(&it, &bi, &p) == 1) {
        if (bi.ProducerId < 0) continue;
        if (origin == GR_PSTATE_CLIENT && dup) {
            const struct gr_pstate_entry *cur = find(ps, bi.ProducerId);
            if (cur && find_duplicate(cur, &bi, dup)) {
                /* a duplicate answers for the whole append, so it must be the only batch (the
                 * log refuses more than one per append, as Kafka's LogValidator) */
                if (bi.size != len) return GR_KERR_INVALID_RECORD;
                *is_dup = true;
                return GR_KERR_NONE;
            }
        }
        int i = staged(ps, app, bi.ProducerId);
        int16_t err = stage_batch(ps, app, &app->next[i], app->orig_epoch[i], &bi, p, origin);
        if (err != GR_KERR_NONE) {
            gr_debug(LOGGER, "[dir=%s] rejecting batch of producer %" PRId64 " epoch %d seq %d: %s", ps->dir,
                     bi.ProducerId, bi.ProducerEpoch, bi.BaseSequence, gr_kerr_name(err));
            return err;
        }
    }
    return GR_KERR_NONE;
}

void gr_pstate_commit(struct gr_pstate *ps, struct gr_pstate_append *app, int64_t map_end) {
    for (int i = 0; i < app->n; i++) put(ps, &app->next[i]);
    ps->last_map_offset = map_end;
    for (int i = 0; i < app->n_consumed; i++) guard_clear(ps, app->consumed[i]);
    /* The transactions open at a marker's moment are those still open after the whole append
     * plus those a later marker of the same append ended (a follower's or replay's append holds
     * many batches): the heap alone, read after the puts, misses the latter, and an index entry
     * claiming nothing was open below its marker made the fetch's aborted-transaction scan stop
     * early (a read_committed consumer then delivered aborted records). Transactions that
     * started after the marker count too, as in Kafka (startedTransactions are added first);
     * a lower value is always safe. */
    int64_t later = -1;
    for (int i = app->n_done - 1; i >= 0; i--) {
        int64_t open = gr_pstate_first_ongoing_offset(ps);
        if (later >= 0 && (open < 0 || later < open)) open = later;
        app->done[i].first_open_offset = open;
        if (later < 0 || app->done[i].first_offset < later) later = app->done[i].first_offset;
    }
    for (int i = 0; i < app->n_done; i++) {
        guard_clear(ps, app->done[i].producer_id);
        if (ps->txn_listener) ps->txn_listener(ps->txn_listener_ctx, &app->done[i]);
    }
}

void gr_pstate_load_batches(struct gr_pstate *ps, const uint8_t *buf, size_t len, int64_t map_end) {
    struct gr_pstate_append app;
    gr_pstate_append_init(&app);
    gr_pstate_prepare(ps, buf, len, GR_PSTATE_REPLICATION, &app, NULL, NULL);
    gr_pstate_commit(ps, &app, map_end);
    gr_pstate_append_release(&app);
}

/* ---- expiry ---- */

static bool expired(const struct gr_pstate *ps, const struct gr_pstate_entry *e, int64_t now_ms) {
    return e->txn_first_offset < 0 && now_ms - e->last_timestamp >= ps->expiration_ms;
}

int gr_pstate_remove_expired(struct gr_pstate *ps, int64_t now_ms) {
    /* verification guards whose produce never came (Kafka 3.6 drops VerificationStateEntries
     * after the producer expiration time too) */
    for (int i = 0; i < ps->n_guards;) {
        if (now_ms - ps->guards[i].created_ms >= ps->expiration_ms) ps->guards[i] = ps->guards[--ps->n_guards];
        else i++;
    }
    int removed = 0;
    for (size_t i = 0; i < ps->cap; i++) {
        if (ps->slots[i] && expired(ps, ps->slots[i], now_ms)) {
            free(ps->slots[i]);
            ps->slots[i] = NULL;
            removed++;
        }
    }
    if (!removed) return 0;
    /* re-place the survivors (linear probing has no tombstones) */
    struct gr_pstate_entry **old = ps->slots;
    ps->slots = gr_calloc(ps->cap, sizeof *ps->slots);
    for (size_t i = 0; i < ps->cap; i++)
        if (old[i]) place(ps->slots, ps->cap, old[i]);
    free(old);
    ps->n -= (size_t)removed;
    gr_info(LOGGER, "[dir=%s] expired %d producer id(s)", ps->dir, removed);
    return removed;
}

/* ---- snapshot codec ---- */

uint8_t *gr_pstate_snapshot_encode(const struct gr_pstate_entry *entries, int n, size_t *len) {
    size_t count = 0;
    for (int i = 0; i < n; i++) count += entries[i].n > 0 ? (size_t)entries[i].n : 1;
    size_t size = HDR_SIZE + count * GR_PSTATE_SNAPSHOT_ENTRY_SIZE;
    uint8_t *b = gr_malloc(size);
    gr_put_be16(b, GR_PSTATE_SNAPSHOT_VERSION);
    gr_put_be32(b + 6, (uint32_t)count);
    uint8_t *q = b + HDR_SIZE;
    for (int i = 0; i < n; i++) {
        const struct gr_pstate_entry *e = &entries[i];
        int k = 0;
        do { /* one entry per cached batch, oldest first; one with no batch when none is cached */
            const struct gr_pstate_batch *bm = e->n ? &e->batches[k] : NULL;
            gr_put_be64(q, (uint64_t)e->producer_id);
            gr_put_be16(q + 8, (uint16_t)e->epoch);
            gr_put_be32(q + 10, (uint32_t)(bm ? bm->last_seq : -1));
            gr_put_be64(q + 14, (uint64_t)(bm ? bm->last_offset : -1));
            gr_put_be32(q + 22, (uint32_t)(bm ? bm->offset_delta : 0));
            gr_put_be64(q + 26, (uint64_t)e->last_timestamp);
            gr_put_be32(q + 34, (uint32_t)e->coordinator_epoch);
            gr_put_be64(q + 38, (uint64_t)e->txn_first_offset);
            q += GR_PSTATE_SNAPSHOT_ENTRY_SIZE;
        } while (++k < e->n);
    }
    gr_put_be32(b + 2, gr_crc32c(0, b + 6, size - 6));
    *len = size;
    return b;
}

int gr_pstate_snapshot_decode(const uint8_t *buf, size_t len, struct gr_pstate_entry **out, int *n) {
    *out = NULL;
    *n = 0;
    if (len < HDR_SIZE) return GR_ECORRUPT;
    if ((int16_t)gr_be16(buf) != GR_PSTATE_SNAPSHOT_VERSION) return GR_ECORRUPT;
    if (gr_be32(buf + 2) != gr_crc32c(0, buf + 6, len - 6)) return GR_ECORRUPT;
    int32_t count = (int32_t)gr_be32(buf + 6);
    if (count < 0 || (size_t)count != (len - HDR_SIZE) / GR_PSTATE_SNAPSHOT_ENTRY_SIZE ||
        (len - HDR_SIZE) % GR_PSTATE_SNAPSHOT_ENTRY_SIZE != 0)
        return GR_ECORRUPT;
    struct gr_pstate_entry *v = gr_calloc((size_t)count + 1, sizeof *v);
    int m = 0;
    const uint8_t *q = buf + HDR_SIZE;
    for (int i = 0; i < count; i++, q += GR_PSTATE_SNAPSHOT_ENTRY_SIZE) {
        int64_t pid = (int64_t)gr_be64(q);
        int16_t epoch = (int16_t)gr_be16(q + 8);
        /* consecutive entries of one producer id: its cached batches, oldest first */
        struct gr_pstate_entry *e = m > 0 && v[m - 1].producer_id == pid ? &v[m - 1] : NULL;
        if (!e) {
            e = &v[m++];
            entry_init(e, pid);
        }
        entry_maybe_update_epoch(e, epoch);
        int32_t seq = (int32_t)gr_be32(q + 10);
        int64_t off = (int64_t)gr_be64(q + 14);
        int32_t delta = (int32_t)gr_be32(q + 22);
        e->last_timestamp = (int64_t)gr_be64(q + 26);
        e->coordinator_epoch = (int32_t)gr_be32(q + 34);
        e->txn_first_offset = (int64_t)gr_be64(q + 38);
        if (off >= 0) {
            if (e->n == GR_PSTATE_BATCHES_TO_RETAIN) {
                memmove(e->batches, e->batches + 1, (GR_PSTATE_BATCHES_TO_RETAIN - 1) * sizeof e->batches[0]);
                e->n--;
            }
            e->batches[e->n++] = (struct gr_pstate_batch){seq, off, delta, e->last_timestamp};
        }
    }
    *out = v;
    *n = m;
    return 0;
}

/* ---- snapshot files ---- */

static int64_t parse_snapshot_name(const char *name) {
    size_t sl = strlen(GR_PSTATE_SNAPSHOT_SUFFIX);
    if (strlen(name) != 20 + sl || strcmp(name + 20, GR_PSTATE_SNAPSHOT_SUFFIX) != 0) return -1;
    int64_t v = 0;
    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9' || v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (name[i] - '0');
    }
    return v;
}

static char *snapshot_path(const struct gr_pstate *ps, int64_t offset) {
    return gr_asprintf("%s/%020" PRId64 "%s", ps->dir, offset, GR_PSTATE_SNAPSHOT_SUFFIX);
}

/* Calls fn for each snapshot offset in the directory; with `del` set, deletes those for which
 * fn returns true. Returns the min or max offset seen (want_max), -1 if none. */
static int64_t scan_snapshots(const struct gr_pstate *ps, bool want_max, bool (*pred)(int64_t, const int64_t *),
                              const int64_t *arg) {
    if (ps->no_snapshots) return -1;
    DIR *d = opendir(ps->dir);
    if (!d) return -1;
    int64_t best = -1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int64_t off = parse_snapshot_name(de->d_name);
        if (off < 0) continue;
        if (pred && pred(off, arg)) {
            char *p = snapshot_path(ps, off);
            if (unlink(p) < 0 && errno != ENOENT) gr_warn(LOGGER, "cannot delete '%s': %s", p, strerror(errno));
            free(p);
            continue;
        }
        if (best < 0 || (want_max ? off > best : off < best)) best = off;
    }
    closedir(d);
    return best;
}

int64_t gr_pstate_latest_snapshot_offset(const struct gr_pstate *ps) { return scan_snapshots(ps, true, NULL, NULL); }
int64_t gr_pstate_oldest_snapshot_offset(const struct gr_pstate *ps) { return scan_snapshots(ps, false, NULL, NULL); }

static bool below(int64_t off, const int64_t *a) { return off < a[0]; }
static bool out_of_range(int64_t off, const int64_t *a) { return off <= a[0] || off > a[1]; }
static bool any(int64_t off, const int64_t *a) {
    (void)off;
    (void)a;
    return true;
}

void gr_pstate_delete_snapshots_before(struct gr_pstate *ps, int64_t offset) {
    int64_t a[1] = {offset};
    scan_snapshots(ps, true, below, a);
}

void gr_pstate_delete_snapshots_out_of_range(struct gr_pstate *ps, int64_t log_start, int64_t log_end) {
    int64_t a[2] = {log_start, log_end};
    scan_snapshots(ps, true, out_of_range, a);
}

int gr_pstate_take_snapshot(struct gr_pstate *ps) {
    if (ps->last_map_offset <= ps->last_snap_offset) return 0;
    struct gr_pstate_entry *v = gr_malloc((ps->n + 1) * sizeof *v);
    int n = 0;
    for (size_t i = 0; i < ps->cap; i++)
        if (ps->slots[i]) v[n++] = *ps->slots[i];
    size_t len;
    uint8_t *buf = gr_pstate_snapshot_encode(v, n, &len);
    free(v);
    char *path = snapshot_path(ps, ps->last_map_offset);
    int rc = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) rc = -errno;
    for (size_t off = 0; rc == 0 && off < len;) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) rc = w < 0 ? -errno : -EIO;
        else off += (size_t)w;
    }
    if (fd >= 0) close(fd);
    if (rc) {
        gr_error(LOGGER, "cannot write producer snapshot '%s': %s", path, gr_strerror(rc));
        unlink(path);
    } else {
        gr_debug(LOGGER, "wrote producer snapshot at offset %" PRId64 " with %d producer(s) in '%s'",
                 ps->last_map_offset, n, ps->dir);
        ps->last_snap_offset = ps->last_map_offset;
        ps->no_snapshots = false;
    }
    free(path);
    free(buf);
    return rc;
}

static int read_file(const char *path, uint8_t **out, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size > (1 << 30)) {
        close(fd);
        return -EIO;
    }
    uint8_t *b = gr_malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    *out = b;
    *len = got;
    return 0;
}

int64_t gr_pstate_load_latest_snapshot(struct gr_pstate *ps, int64_t log_start, int64_t now_ms) {
    clear_entries(ps);
    for (;;) {
        int64_t off = gr_pstate_latest_snapshot_offset(ps);
        if (off < 0) break;
        char *path = snapshot_path(ps, off);
        uint8_t *buf = NULL;
        size_t len = 0;
        struct gr_pstate_entry *v = NULL;
        int n = 0;
        int rc = read_file(path, &buf, &len);
        if (rc == 0) rc = gr_pstate_snapshot_decode(buf, len, &v, &n);
        free(buf);
        if (rc == 0) {
            for (int i = 0; i < n; i++)
                if (!expired(ps, &v[i], now_ms)) put(ps, &v[i]);
            free(v);
            gr_info(LOGGER, "loaded producer state from snapshot '%s' (%zu producer(s))", path, ps->n);
            free(path);
            ps->last_snap_offset = ps->last_map_offset = off;
            return off;
        }
        gr_warn(LOGGER, "deleting unreadable producer snapshot '%s': %s", path,
                rc == GR_ECORRUPT ? "bad version, size or CRC" : gr_strerror(rc));
        unlink(path);
        free(path);
    }
    ps->last_snap_offset = ps->last_map_offset = log_start;
    return log_start;
}

void gr_pstate_truncate_head(struct gr_pstate *ps, int64_t log_start) {
    if (ps->last_map_offset < log_start) ps->last_map_offset = log_start;
    gr_pstate_delete_snapshots_before(ps, log_start);
    int64_t latest = gr_pstate_latest_snapshot_offset(ps);
    ps->last_snap_offset = latest >= 0 ? latest : log_start;
}

void gr_pstate_truncate_fully(struct gr_pstate *ps, int64_t offset) {
    clear_entries(ps);
    scan_snapshots(ps, true, any, NULL);
    ps->last_snap_offset = 0;
    ps->last_map_offset = offset;
}
