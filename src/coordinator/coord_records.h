/* The records of one batch read back from a coordinator topic (__consumer_offsets,
 * __transaction_state), compressed or not. Kafka's loaders (GroupMetadataManager.
 * doLoadGroupsAndOffsets, TransactionStateManager.loadTransactionMetadata) iterate every record
 * of every batch whatever its codec; a topic whose compression.type is not "producer" stores the
 * coordinators' own writes compressed (storage/recompression.h), so a loader that skipped them
 * would lose every commit and transaction state at the next fail-over.
 *
 * Usage (any thread; nothing shared):
 *   struct gr_coord_records cr;
 *   if (gr_coord_records_init(&cr, batch, &info) == 0) {
 *       while (gr_batch_rec_iter_next(&cr.it, &rec) == 1) ...;
 *   }
 *   gr_coord_records_release(&cr);   // always, also after a failed init
 * The record views point into `batch` (uncompressed) or into cr's own inflated copy, so they are
 * valid until gr_coord_records_release. */
#ifndef GR_COORDINATOR_COORD_RECORDS_H
#define GR_COORDINATOR_COORD_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "storage/batch.h"

struct gr_coord_records {
    struct gr_batch_rec_iter it;
    uint8_t *inflated; /* gr_malloc'd uncompressed copy of a compressed batch, else NULL */
};

/* Prepares cr.it over the records of the (non-control) batch `batch` described by bi,
 * decompressing it with gr_batch_inflate (at most GR_RECOMPRESSION_MAX_INFLATED bytes) when its
 * codec bits are set. Returns 0, or -1 when the batch does not decompress or its records
 * section is malformed (the caller skips the batch; cr holds nothing to use). */
int gr_coord_records_init(struct gr_coord_records *cr, const uint8_t *batch, const struct gr_batch_info *bi);
void gr_coord_records_release(struct gr_coord_records *cr);

#endif
