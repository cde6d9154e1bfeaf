/* The aborted-transaction index of a partition (Kafka 2.7's TransactionIndex): one
 * `<20-digit segment base offset>.txnindex` file per segment that saw an ABORT marker, holding
 * fixed 34-byte entries, big-endian (Kafka's layout, docs/STORAGE.md):
 *
 *   off size field
 *     0   2  version             i16 = 0
 *     2   8  producer_id         i64
 *    10   8  first_offset        i64  first offset of the aborted transaction
 *    18   8  last_offset         i64  offset of the ABORT marker
 *    26   8  last_stable_offset  i64  LSO right after the marker was written
 *
 * Entries are appended in marker order (last_offset rises strictly) to the file of the segment
 * that is active when the marker is written. The index also keeps every entry in memory (a
 * sorted array) for read_committed fetches.
 *
 * Ownership and threading: a gr_txn_index belongs to one gr_plog, which calls every function
 * under its mutex; nothing here locks. Returns are 0 or -errno. */
#ifndef GR_STORAGE_TXN_INDEX_H
#define GR_STORAGE_TXN_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GR_TXN_INDEX_SUFFIX ".txnindex"
#define GR_TXN_INDEX_ENTRY_SIZE 34

struct gr_aborted_txn {
    int64_t producer_id;
    int64_t first_offset;
    int64_t last_offset;
    int64_t last_stable_offset;
    int64_t segment_base; /* which file holds it (memory only) */
};

struct gr_txn_index;

/* Loads every `*.txnindex` file of dir (a bad trailing partial entry is ignored). dir is
 * borrowed: it must outlive the index. */
struct gr_txn_index *gr_txn_index_open(const char *dir);
/* An empty index for dir without reading it (a log directory just created). */
struct gr_txn_index *gr_txn_index_new(const char *dir);
void gr_txn_index_free(struct gr_txn_index *ti);

/* Appends e to `<segment_base>.txnindex`. An entry whose last_offset is not above the last one
 * is ignored (a replayed marker is already indexed) and 0 returned. */
int gr_txn_index_append(struct gr_txn_index *ti, int64_t segment_base, const struct gr_aborted_txn *e);
/* Kafka's TransactionIndex.flush, called with LogSegment.flush: fdatasyncs every file appended
 * to or rewritten since the last call. 0, or the first -errno (the files that failed stay due). */
int gr_txn_index_flush(struct gr_txn_index *ti);
/* Drops entries whose marker is at or above offset (log truncation), rewriting files. */
int gr_txn_index_truncate(struct gr_txn_index *ti, int64_t offset);
/* Drops the files (and entries) of segments whose base is below segment_base (retention). */
void gr_txn_index_drop_segments_below(struct gr_txn_index *ti, int64_t segment_base);
/* Deletes everything (files too). */
void gr_txn_index_clear(struct gr_txn_index *ti);

/* Kafka's collectAbortedTransactions: entries with last_offset >= fetch_offset and
 * first_offset < upper_bound, in order; the scan stops after an entry whose
 * last_stable_offset >= upper_bound. Returns how many were written to out (at most max); *total
 * gets the number that match. */
int gr_txn_index_collect(const struct gr_txn_index *ti, int64_t fetch_offset, int64_t upper_bound,
                         struct gr_aborted_txn *out, int max, int *total);
int gr_txn_index_count(const struct gr_txn_index *ti);

/* The log cleaner (log_cleaner.c): every entry with last_offset >= from and first_offset < to
 * (no LSO stop), in marker order, *out malloc'd (NULL when none); returns the count. */
int gr_txn_index_range(const struct gr_txn_index *ti, int64_t from, int64_t to, struct gr_aborted_txn **out);
/* After the cleaner swapped the segments with bases in [first_base, end_base) (markers below
 * group_end) for one segment at first_base whose file it already wrote with kept[0..n): the
 * in-memory entries of those segments are replaced by kept. An entry of those files whose marker
 * lies at or past group_end (re-created on replay in a later segment's file) is kept and moved to
 * first_base's file, which is then rewritten. */
void gr_txn_index_replace_segments(struct gr_txn_index *ti, int64_t first_base, int64_t end_base, int64_t group_end,
                                   const struct gr_aborted_txn *kept, int n);

/* Pure codec (tests, fuzzing). decode returns 0 or -EINVAL (wrong size or version). */
void gr_txn_index_encode(const struct gr_aborted_txn *e, uint8_t out[GR_TXN_INDEX_ENTRY_SIZE]);
int gr_txn_index_decode(const uint8_t *buf, size_t len, struct gr_aborted_txn *e);

#endif
