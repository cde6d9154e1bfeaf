/* Kafka RecordBatch v2 (magic 2): validation, in-place rewrites, iteration, a small builder.
 *
 * RecordBatch v2 byte table (all integers big-endian; "varint" = zigzag varint as in protobuf):
 *
 *   off  size  field                 notes
 *   ---  ----  --------------------  ---------------------------------------------------------
 *     0     8  baseOffset            i64  offset of the first record; assigned by the leader
 *     8     4  batchLength           i32  bytes that follow this field (total size - 12)
 *    12     4  partitionLeaderEpoch  i32  stamped by the leader; NOT covered by the CRC
 *    16     1  magic                 i8   2 (0 and 1 are the old MessageSet formats; the magic
 *                                         byte sits at offset 16 in those too)
 *    17     4  crc                   u32  CRC-32C of bytes [21, end)
 *    21     2  attributes            i16  bits 0-2 compression (0 none, 1 gzip, 2 snappy,
 *                                         3 lz4, 4 zstd), bit 3 timestampType (1 LogAppendTime),
 *                                         bit 4 isTransactional, bit 5 isControlBatch
 *    23     4  lastOffsetDelta       i32  offset of the last record - baseOffset
 *    27     8  baseTimestamp         i64  (Kafka 2.7 calls it firstTimestamp)
 *    35     8  maxTimestamp          i64
 *    43     8  producerId            i64  -1 when not idempotent
 *    51     2  producerEpoch         i16
 *    53     4  baseSequence          i32
 *    57     4  recordCount           i32
 *    61     -  records               recordCount records; compressed as one blob when
 *                                    attributes & 7 != 0 (stored as received, never decoded here)
 *
 * Record (inside an uncompressed batch):
 *   length varint (bytes after this field) | attributes i8 | timestampDelta varlong |
 *   offsetDelta varint | keyLength varint (-1 = null) | key | valueLength varint (-1 = null) |
 *   value | headerCount varint | headers: headerKeyLength varint (>= 0) | headerKey |
 *   headerValueLength varint (-1 = null) | headerValue
 *
 * COMPATIBILITY: this layout is Kafka's wire and disk format; it must never change.
 *
 * Every function here is pure (no global state) and may be called from any thread on buffers
 * the caller owns. Bytes are hostile: malformed input yields an error, never an assert. */
#ifndef GR_STORAGE_BATCH_H
#define GR_STORAGE_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GR_BATCH_MAGIC 2
#define GR_BATCH_LOG_OVERHEAD 12  /* baseOffset + batchLength */
#define GR_BATCH_HEADER_SIZE 61   /* bytes before the first record */
#define GR_BATCH_CRC_START 21     /* the CRC covers [21, end) */
/* Largest baseOffset accepted in a log (keeps offset arithmetic far from overflow). */
#define GR_BATCH_MAX_OFFSET (INT64_MAX / 4)

/* Field offsets (see the table above). */
#define GR_BATCH_OFF_BASE_OFFSET 0
#define GR_BATCH_OFF_LENGTH 8
#define GR_BATCH_OFF_LEADER_EPOCH 12
#define GR_BATCH_OFF_MAGIC 16
#define GR_BATCH_OFF_CRC 17
#define GR_BATCH_OFF_ATTRIBUTES 21
#define GR_BATCH_OFF_LAST_OFFSET_DELTA 23
#define GR_BATCH_OFF_BASE_TIMESTAMP 27
#define GR_BATCH_OFF_MAX_TIMESTAMP 35
#define GR_BATCH_OFF_PRODUCER_ID 43
#define GR_BATCH_OFF_PRODUCER_EPOCH 51
#define GR_BATCH_OFF_BASE_SEQUENCE 53
#define GR_BATCH_OFF_RECORD_COUNT 57

/* attributes bits */
#define GR_BATCH_ATTR_COMPRESSION_MASK 0x07
#define GR_BATCH_ATTR_LOG_APPEND_TIME 0x08
#define GR_BATCH_ATTR_TRANSACTIONAL 0x10
#define GR_BATCH_ATTR_CONTROL 0x20
#define GR_BATCH_ATTR_DELETE_HORIZON 0x40 /* KIP-534: baseTimestamp holds the delete horizon */

/* Validation results (a domain of their own; gr_batch_err_kerr() maps them to Kafka codes). */
enum gr_batch_err {
    GR_BATCH_OK = 0,
    GR_BATCH_ETRUNCATED,  /* the buffer ends inside a batch (or inside its header) */
    GR_BATCH_ELENGTH,     /* batchLength smaller than the v2 header or absurd */
    GR_BATCH_EOLDMAGIC,   /* magic 0 or 1: an old MessageSet -> UNSUPPORTED_FOR_MESSAGE_FORMAT */
    GR_BATCH_EMAGIC,      /* magic > 2 or < 0 */
    GR_BATCH_ECRC,        /* CRC-32C mismatch */
    GR_BATCH_ECOUNT,      /* recordCount / lastOffsetDelta inconsistent */
    GR_BATCH_ERECORDS,    /* a record inside an uncompressed batch is malformed */
    GR_BATCH_ECONTROL,    /* control batch from a client (GR_BATCH_V_CLIENT only) */
    GR_BATCH_ESEQUENCE,   /* producerId set but baseSequence < 0 (GR_BATCH_V_CLIENT only) */
    GR_BATCH_ECODEC,      /* the records section does not decompress (log_validator.h) */
    GR_BATCH_EINFLATE,    /* it decompresses to more than the bound (log_validator.h) */
    GR_BATCH_ENOMEM,      /* no memory to read it */
};

/* Human-readable name of a gr_batch_err ("CRC mismatch", ...). */
const char *gr_batch_strerror(int err);
/* The Kafka error code a broker should return for a validation failure:
 * EOLDMAGIC -> UNSUPPORTED_FOR_MESSAGE_FORMAT; ECOUNT/ERECORDS/ECONTROL/ESEQUENCE ->
 * INVALID_RECORD; EINFLATE -> MESSAGE_TOO_LARGE; ENOMEM -> UNKNOWN_SERVER_ERROR; everything
 * else (ECODEC included) -> CORRUPT_MESSAGE; GR_BATCH_OK -> NONE. */
int16_t gr_batch_err_kerr(int err);

/* The header fields of one batch, in Kafka's names. */
struct gr_batch_info {
    int64_t BaseOffset;
    int32_t BatchLength;
    int32_t PartitionLeaderEpoch;
    int8_t Magic;
    uint32_t Crc;
    int16_t Attributes;
    int32_t LastOffsetDelta;
    int64_t BaseTimestamp;
    int64_t MaxTimestamp;
    int64_t ProducerId;
    int16_t ProducerEpoch;
    int32_t BaseSequence;
    int32_t RecordCount;
    size_t size; /* whole batch in bytes: BatchLength + 12 */
};

static inline int64_t gr_batch_info_last_offset(const struct gr_batch_info *b) {
    return b->BaseOffset + b->LastOffsetDelta;
}
static inline int gr_batch_info_compression(const struct gr_batch_info *b) {
    return b->Attributes & GR_BATCH_ATTR_COMPRESSION_MASK;
}

/* Validation flags. */
#define GR_BATCH_V_CLIENT 0x1  /* stricter checks Kafka applies to producer batches: recordCount
                                  > 0, lastOffsetDelta == recordCount - 1, record offsetDeltas
                                  0..n-1, no control batches, baseSequence >= 0 if producerId >= 0 */
#define GR_BATCH_V_NO_RECORDS 0x2 /* skip record parsing for uncompressed batches */

/* Reads the header of the batch at buf (len bytes available). Checks only that the 17 bytes up
 * to magic are present, the magic, that batchLength is sane and that the whole batch and its
 * header fit in len. No CRC check. Returns GR_BATCH_OK or an error; fills *out on OK (and
 * BaseOffset/BatchLength/Magic as far as read otherwise). */
int gr_batch_parse_header(const uint8_t *buf, size_t len, struct gr_batch_info *out);

/* Like gr_batch_parse_header() for a header read separately from the batch (e.g. the first 61
 * bytes pread from a segment): buf holds hdr_len bytes, `avail` bytes exist from the batch start
 * (e.g. file size - position); the batch must fit in avail. */
int gr_batch_peek_header(const uint8_t *buf, size_t hdr_len, size_t avail, struct gr_batch_info *out);

/* Fully validates the single batch at the start of buf: header, CRC, counts, and (unless
 * GR_BATCH_V_NO_RECORDS, and only when uncompressed) every record. The batch may be followed by
 * more bytes; out->size tells where it ends. */
int gr_batch_validate_one(const uint8_t *buf, size_t len, unsigned flags, struct gr_batch_info *out);

/* Totals over a buffer of concatenated batches. */
struct gr_batch_summary {
    int batches;
    int64_t records;           /* sum of recordCount */
    int64_t first_offset;      /* baseOffset of the first batch */
    int64_t last_offset;       /* lastOffset of the last batch */
    int64_t max_timestamp;     /* max of maxTimestamp (-1 if none) */
    int64_t offset_of_max_timestamp; /* lastOffset of the batch holding max_timestamp */
    size_t max_batch_size;     /* largest single batch in bytes */
    bool offsets_contiguous;   /* each batch starts at the previous lastOffset + 1 */
    size_t bad_pos;            /* on error: byte position of the failing batch */
};

/* Validates every batch of buf[0..len), which must consist of whole batches exactly (a partial
 * trailing batch is GR_BATCH_ETRUNCATED, an empty buffer is GR_BATCH_ETRUNCATED too). Returns
 * GR_BATCH_OK or the first error; *sum (may be NULL) is filled as far as validation got. */
int gr_batch_validate_all(const uint8_t *buf, size_t len, unsigned flags, struct gr_batch_summary *sum);

/* Iteration over concatenated batches with header checks only (no CRC).
 *   struct gr_batch_iter it; gr_batch_iter_init(&it, buf, len);
 *   while (gr_batch_iter_next(&it, &info, &ptr) == 1) ...;  then it.err says why it stopped
 * (GR_BATCH_OK at a clean end, GR_BATCH_ETRUNCATED for a partial tail, ...). */
struct gr_batch_iter {
    const uint8_t *buf;
    size_t len;
    size_t pos; /* position of the next batch */
    int err;
};
void gr_batch_iter_init(struct gr_batch_iter *it, const uint8_t *buf, size_t len);
/* Returns 1 with *info and *batch (pointer into buf) filled, or 0 at the end / on error. */
int gr_batch_iter_next(struct gr_batch_iter *it, struct gr_batch_info *info, const uint8_t **batch);

/* Sum of recordCount over the whole batches in buf (stops at the first malformed header). */
int64_t gr_batch_count_records(const uint8_t *buf, size_t len);

/* In-place rewrites of the two fields the CRC does not cover; batch must hold >= 16 bytes. */
void gr_batch_set_base_offset(uint8_t *batch, int64_t base_offset);
void gr_batch_set_partition_leader_epoch(uint8_t *batch, int32_t epoch);
/* Direct field reads (batch must hold >= 61 bytes; no validation). */
int64_t gr_batch_base_offset(const uint8_t *batch);
int32_t gr_batch_partition_leader_epoch(const uint8_t *batch);
int64_t gr_batch_last_offset(const uint8_t *batch);
int64_t gr_batch_max_timestamp(const uint8_t *batch);
int32_t gr_batch_record_count(const uint8_t *batch);
/* Recomputes and stores the CRC (after changing covered fields, e.g. in tests). */
void gr_batch_update_crc(uint8_t *batch, size_t size);
/* Writes v as a zig-zag varint (Kafka's varint/varlong: the same bytes for an int32 widened to
 * int64) at p, at most 10 bytes; returns its size. */
size_t gr_batch_put_varlong(uint8_t *p, int64_t v);

/* ---- records of an uncompressed batch ---- */

/* One record, pointing into the batch. Key/Value are NULL when their length is -1. */
struct gr_batch_rec_view {
    int8_t Attributes;
    int64_t TimestampDelta;
    int32_t OffsetDelta;
    int64_t Offset;    /* BaseOffset + OffsetDelta */
    int64_t Timestamp; /* BaseTimestamp + TimestampDelta */
    int32_t KeyLength;
    const uint8_t *Key;
    int32_t ValueLength;
    const uint8_t *Value;
    int32_t HeaderCount;
    const uint8_t *headers; /* raw header bytes, walk them with gr_batch_rec_header_next() */
    size_t headers_len;
};
struct gr_batch_rec_header_view {
    int32_t KeyLength; /* >= 0 */
    const uint8_t *Key;
    int32_t ValueLength; /* -1 = null */
    const uint8_t *Value;
};

/* Record iterator over one uncompressed batch (validated or not; errors are reported).
 *   gr_batch_rec_iter_init(&it, batch, size) -> GR_BATCH_OK or error (compressed batches give
 *   GR_BATCH_ERECORDS); then gr_batch_rec_iter_next(&it, &rec) returns 1 per record, 0 at the end
 *   or on error (it.err). */
struct gr_batch_rec_iter {
    const uint8_t *p, *end;
    struct gr_batch_info info;
    int32_t index; /* records returned so far */
    int err;
};
int gr_batch_rec_iter_init(struct gr_batch_rec_iter *it, const uint8_t *batch, size_t len);
int gr_batch_rec_iter_next(struct gr_batch_rec_iter *it, struct gr_batch_rec_view *rec);
/* Parses the one record (its length varint first) at p[0..len) into *rec (pointers into p),
 * with Offset/Timestamp from bi's BaseOffset/BaseTimestamp; *used = its size. GR_BATCH_OK or
 * GR_BATCH_ERECORDS (malformed, or its length goes past len). */
int gr_batch_parse_record(const uint8_t *p, size_t len, const struct gr_batch_info *bi, struct gr_batch_rec_view *rec,
                          size_t *used);
/* Walks rec->headers: *pos starts at 0; returns 1 per header, 0 at the end, -1 if malformed. */
int gr_batch_rec_header_next(const struct gr_batch_rec_view *rec, size_t *pos,
                             struct gr_batch_rec_header_view *h);

/* ---- builder (tests and tools) ---- */

struct gr_batch_rec_header {
    const void *key;
    int32_t key_len;
    const void *value;
    int32_t value_len; /* -1 = null */
};
struct gr_batch_rec {
    const void *key;
    int32_t key_len; /* -1 = null key */
    const void *value;
    int32_t value_len; /* -1 = null value (tombstone) */
    const struct gr_batch_rec_header *headers;
    int32_t header_count;
    int64_t timestamp;
};
struct gr_batch_build_opts {
    int64_t base_offset;
    int32_t partition_leader_epoch;
    int16_t attributes; /* compression bits must be 0: the builder only writes uncompressed */
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t base_sequence;
};
#define GR_BATCH_BUILD_OPTS_INIT {0, -1, 0, -1, -1, -1}

/* Builds one uncompressed v2 batch holding recs[0..n) (n >= 0), with a correct CRC.
 * opts may be NULL (GR_BATCH_BUILD_OPTS_INIT). Returns a gr_malloc'd buffer the caller frees,
 * and its size in *len_out. */
uint8_t *gr_batch_build(const struct gr_batch_rec *recs, int n, const struct gr_batch_build_opts *opts,
                        size_t *len_out);

#endif
