/* The log validator: the one reader of the records inside a RecordBatch v2, compressed or not,
 * and the record-level checks Kafka 2.7's LogValidator applies before a leader stores a batch.
 *
 * Users (one code path for each way a batch's records are read):
 *   - leader appends (storage/log.c): every client and coordinator batch is checked record by
 *     record with gr_log_validate_batch before anything is stored, whatever compression.type
 *     says (Kafka's validateMessagesAndAssignOffsets, compressed or not);
 *   - the log cleaner (storage/log_cleaner.c) reads the records it keeps through
 *     gr_record_stream (a batch that does not read is corrupt: the pass fails, KIP-346);
 *   - down-conversion for Fetch v0-v3 (storage/legacy_records.c) reads records through it, so
 *     gzip, snappy and lz4 batches convert record by record;
 *   - up-conversion of Produce v0-v2 message sets (legacy_records.c) inflates their wrappers
 *     with the same streaming codecs (compression.h).
 *
 * Memory is bounded whatever a batch inflates to: a compressed batch is decompressed as it is
 * read (compression.h's streaming codecs), keeping one record in a window (or, when the caller
 * wants no key/value bytes, only the varints: key, value and header bytes are skipped as they
 * stream past, as Kafka's skipKeyValueIterator). The whole records section may inflate to at
 * most max_inflated bytes (GR_VALIDATOR_MAX_INFLATED: the cleaner and the conversions read what
 * produce accepted, so one bound serves all); past it a produce gets MESSAGE_TOO_LARGE (Kafka
 * 2.7 has no such bound: a Java producer answers MESSAGE_TOO_LARGE by splitting the batch).
 *
 * Errors (gr_batch_err, mapped by gr_batch_err_kerr):
 *   ECODEC   the compressed bytes do not decompress             -> CORRUPT_MESSAGE
 *   EINFLATE more than max_inflated bytes, or one record larger than the window allows
 *                                                               -> MESSAGE_TOO_LARGE
 *   ERECORDS a record is malformed, the records end before recordCount records, bytes remain
 *            after them, or (not client) the offsetDeltas do not rise -> INVALID_RECORD
 *   ENOMEM                                                      -> UNKNOWN_SERVER_ERROR
 * Kafka 2.7 answers a stream that does not decompress with UNKNOWN_SERVER_ERROR (its
 * KafkaException falls through to the catch-all); Gregor answers CORRUPT_MESSAGE, the code for
 * bytes that are not a valid batch. Record-level failures (no key in a compacted topic, a
 * timestamp out of range) are Kafka's per-record errors: INVALID_RECORD / INVALID_TIMESTAMP with
 * the index of each failing record (Produce v8+ RecordErrors).
 *
 * Pure functions on buffers the caller owns; callable from any thread; a gr_record_stream is
 * used by one thread at a time and closed by its opener. Bytes are hostile. */
#ifndef GR_STORAGE_LOG_VALIDATOR_H
#define GR_STORAGE_LOG_VALIDATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/batch.h"

struct gr_inflater;

/* The most a batch's records section may decompress to: 64 MiB. */
#define GR_VALIDATOR_MAX_INFLATED ((size_t)64 << 20)

/* ---- reading records ---- */

/* Reads the records of one v2 batch whose header and CRC were checked. Fields are private. */
struct gr_record_stream {
    struct gr_batch_info info;
    struct gr_inflater *z; /* NULL: uncompressed, records read in place */
    const uint8_t *data;   /* the window (compressed) or the records section (in place) */
    uint8_t *win;          /* owned window (compressed only) */
    size_t cap, start, end; /* unread bytes are data[start, end) */
    size_t max_record;     /* largest record the window may hold */
    bool eof;              /* no more bytes will come */
    int32_t index;         /* records returned so far */
    int err;               /* GR_BATCH_OK or why reading stopped */
    const uint8_t *raw;    /* the last record's bytes when read whole (else NULL), length first */
    size_t raw_len;
};

/* Opens the records of the batch at `batch` (header bi, bi->size bytes there). max_inflated:
 * the most its records section may decompress to (GR_VALIDATOR_MAX_INFLATED); flags:
 * compression.h's GR_INFLATE_*. Returns GR_BATCH_OK or an error (then closing is still fine). */
int gr_record_stream_open(struct gr_record_stream *rs, const uint8_t *batch, const struct gr_batch_info *bi,
                          size_t max_inflated, unsigned flags);
/* The next record: 1 with *rec filled, 0 after the last one (rs->err is GR_BATCH_OK when the
 * records ended exactly after recordCount records) or on an error (rs->err). A record of at most
 * whole_up_to bytes is read whole: its key, value and headers point into the stream (valid until
 * the next call) and rs->raw/raw_len hold its bytes (the window holds at most max_inflated; a
 * longer record is EINFLATE). A longer one is read skipping its key, value and header bytes:
 * rec->Key/Value/headers and rs->raw are NULL, their lengths are set, and it may be of any size.
 * Offset and Timestamp are BaseOffset/BaseTimestamp plus the deltas. */
#define GR_RECORD_SKIP_DATA ((size_t)0)
#define GR_RECORD_WHOLE SIZE_MAX
int gr_record_stream_next(struct gr_record_stream *rs, struct gr_batch_rec_view *rec, size_t whole_up_to);
void gr_record_stream_close(struct gr_record_stream *rs);

/* ---- validating a batch (Kafka's LogValidator) ---- */

struct gr_validator_config {
    bool client;           /* AppendOrigin.Client: offsetDeltas other than 0..n-1 set res->rebuild */
    bool compacted;        /* cleanup.policy has compact: every record needs a key */
    bool log_append_time;  /* message.timestamp.type=LogAppendTime (no timestamp limit) */
    int64_t max_diff_ms;   /* message.timestamp.difference.max.ms (INT64_MAX: no limit) */
    int64_t now_ms;
    size_t max_inflated;   /* GR_VALIDATOR_MAX_INFLATED */
};

/* Record errors kept per batch (Kafka lists every one; the count beyond is still counted). */
#define GR_VALIDATOR_MAX_RECORD_ERRORS 32

struct gr_validator_result {
    int16_t error;               /* NONE or the batch's Kafka error */
    const char *message;         /* ErrorMessage for the response (static), NULL on NONE */
    int32_t record_error_count;  /* failing records (may exceed the kept ones) */
    int32_t kept;                /* entries of record_errors */
    struct {
        int32_t BatchIndex;
        const char *BatchIndexErrorMessage; /* static */
    } record_errors[GR_VALIDATOR_MAX_RECORD_ERRORS];
    int32_t records;             /* records read */
    int64_t max_timestamp;       /* largest record timestamp (-1 if none) */
    bool rebuild;                /* client batch whose offsetDeltas are not 0..n-1: store it only
                                    rebuilt with fresh ones (recompression.h gr_batch_rebuild;
                                    Kafka's inPlaceAssignment = false) */
};

/* Validates the records of the batch at `batch` (header and CRC already checked, e.g. by
 * gr_batch_validate_one with GR_BATCH_V_NO_RECORDS): each record parses, offsetDeltas rise
 * (client: any values; not 0..n-1 sets res->rebuild, as Kafka 2.7 accepts them and assigns
 * fresh inner offsets), exactly recordCount records fill the batch; then Kafka's per-record
 * checks: a key in a compacted topic (not for control batches), a LogAppendTime batch from a
 * producer is INVALID_TIMESTAMP, and with CreateTime each timestamp but -1 within max_diff_ms
 * of now. Reading stops at the first structural error (its code, no record errors); record
 * errors are collected over the whole batch (INVALID_TIMESTAMP if any is a timestamp error,
 * else INVALID_RECORD, as Kafka's processRecordErrors). Returns res->error. */
int16_t gr_log_validate_batch(const uint8_t *batch, const struct gr_batch_info *bi, const struct gr_validator_config *cfg,
                              struct gr_validator_result *res);

#endif
