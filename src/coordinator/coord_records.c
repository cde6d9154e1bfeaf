/* Records of a coordinator-topic batch, decompressed when needed (coord_records.h). */
#include "coordinator/coord_records.h"

#include <stdlib.h>
#include <string.h>

#include "storage/recompression.h"

int gr_coord_records_init(struct gr_coord_records *cr, const uint8_t *batch, const struct gr_batch_info *bi) {
    memset(cr, 0, sizeof *cr);
    const uint8_t *src = batch;
    size_t len = bi->size;
    if (gr_batch_info_compression(bi) != 0) {
        if (gr_batch_inflate(batch, bi, GR_RECOMPRESSION_MAX_INFLATED, &cr->inflated, &len) != 0) return -1;
        src = cr->inflated;
    }
    return gr_batch_rec_iter_init(&cr->it, src, len) == GR_BATCH_OK ? 0 : -1;
}

void gr_coord_records_release(struct gr_coord_records *cr) {
    free(cr->inflated);
    cr->inflated = NULL;
}
