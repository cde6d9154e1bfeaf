/* Topic compression.type on the leader's Produce path (Kafka 2.7's LogValidator): the batches a
 * producer sent are stored in the topic's codec. "producer" keeps every batch as sent;
 * "uncompressed", "gzip", "snappy", "lz4" and "zstd" rewrite each v2 batch whose codec differs
 * (a batch already in the target codec is kept byte for byte): its records section is
 * decompressed (bounded by GR_RECOMPRESSION_MAX_INFLATED, against decompression bombs), its
 * records given offsetDeltas 0..n-1 (Kafka assigns fresh offsets to a rebuilt batch) and
 * checked as an uncompressed client batch's (batch.h, GR_BATCH_V_CLIENT; the log validator,
 * log_validator.h, has read them already on the leader's path), then compressed with the
 * target codec (or left plain). The header is copied: offsets, timestamps, producer
 * id/epoch/base sequence, record count and the attribute bits other than 0-2 are unchanged (so
 * producer-state duplicate detection, which reads headers only, is unaffected); only
 * attributes bits 0-2, batchLength and the CRC-32C are rewritten. Record bytes other than the
 * offsetDelta (and the record length varint) are copied unchanged.
 *
 * Only leader appends of client batches and Produce v0-v2 up-conversion use this (storage/log.c,
 * api/handle_produce.c); the cleaner reads records through the log validator's record stream.
 * Followers, log recovery and the cleaner keep what they get; coordinator appends (group
 * offsets, transaction markers) are not recompressed.
 *
 * Pure functions (no global state), callable from any thread on buffers the caller owns; the
 * output buffer is gr_malloc'd and owned by the caller. Input bytes are hostile. */
#ifndef GR_STORAGE_RECOMPRESSION_H
#define GR_STORAGE_RECOMPRESSION_H

#include <stddef.h>
#include <stdint.h>

struct gr_batch_info;

/* compression.type "producer": keep the producer's codec. Other targets are codec ids 0-4
 * (storage/compression.h: 0 uncompressed, 1 gzip, 2 snappy, 3 lz4, 4 zstd). */
#define GR_COMPRESSION_PRODUCER (-1)

/* Largest records section a batch may decompress to (as the cleaner's and the legacy
 * conversion's limit): 64 MiB. */
#define GR_RECOMPRESSION_MAX_INFLATED ((size_t)64 << 20)

/* Parses a compression.type value ("producer", "uncompressed", "gzip", "snappy", "lz4",
 * "zstd"; exact, as Kafka's ValidString). Returns GR_COMPRESSION_PRODUCER, a codec id 0-4, or
 * -EINVAL (a negative value other than GR_COMPRESSION_PRODUCER). */
int gr_compression_type_parse(const char *v);

/* An uncompressed view of the compressed v2 batch b (header bi): the header copied with
 * BatchLength and the codec bits fixed, then the decompressed records (at most max_inflated
 * bytes). The CRC is not recomputed (gr_batch_rec_iter does not check it; gr_batch_update_crc
 * makes the view a valid batch). Returns 0 with a gr_malloc'd *out the caller frees, or
 * gr_decompress's error. Used here, by the time index look-up (segment.c) and by coordinator
 * record reads. */
int gr_batch_inflate(const uint8_t *b, const struct gr_batch_info *bi, size_t max_inflated, uint8_t **out,
                     size_t *out_len);

/* Kafka's buildRecordsAndAssignOffsets for one client v2 batch at b (header bi, checked with
 * GR_BATCH_V_CLIENT; records read by the log validator): a new batch in codec `target` (0-4)
 * whose i-th record has offsetDelta i -- every other record byte, and the header but for
 * attributes bits 0-2, batchLength and the CRC, copied. The leader stores this instead of the
 * producer's batch when its codec is not compression.type's or its offsetDeltas are not
 * 0..n-1 (log_validator.h res->rebuild; some producers send them so and Kafka accepts them).
 * Returns NONE with a gr_malloc'd *out / *out_len the caller frees; CORRUPT_MESSAGE when the
 * records do not decompress (or inflate past GR_RECOMPRESSION_MAX_INFLATED); INVALID_RECORD
 * (or gr_batch_err_kerr's code) when they are malformed. *out is NULL on every error. */
int16_t gr_batch_rebuild(const uint8_t *b, const struct gr_batch_info *bi, int target, uint8_t **out,
                         size_t *out_len);

/* Rewrites the whole v2 batches of in[0..len) (validated by the caller with
 * gr_batch_validate_all and GR_BATCH_V_CLIENT: the records of uncompressed batches are not
 * checked again) into codec `target` (0-4; GR_COMPRESSION_PRODUCER does nothing).
 * Returns a Kafka error: NONE with *out = NULL when every batch already uses the target codec
 * (keep `in`), or NONE with *out / *out_len a new gr_malloc'd buffer holding all batches (the
 * caller frees it); CORRUPT_MESSAGE when a records section does not decompress (corrupt, or
 * larger than GR_RECOMPRESSION_MAX_INFLATED); INVALID_RECORD (or the code gr_batch_err_kerr
 * gives) when the decompressed records are malformed; CORRUPT_MESSAGE for a malformed batch
 * header. *out is NULL on every error. */
int16_t gr_recompress_batches(const uint8_t *in, size_t len, int target, uint8_t **out, size_t *out_len);

#endif
