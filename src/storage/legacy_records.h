/* The old message formats (magic 0 and 1 "MessageSets", Kafka before 0.11) that Produce v0-v2
 * and Fetch v0-v3 clients use, and their conversion to and from RecordBatch v2, which is all the
 * log stores (as Kafka 2.7's LogValidator and AbstractRecords.downConvert do it):
 *
 *   message set = (offset int64, message_size int32, message)*
 *   message v0  = crc uint32 (CRC-32 IEEE of the rest) | magic int8 = 0 | attributes int8 |
 *                 key bytes (int32 length, -1 null) | value bytes
 *   message v1  = crc | magic = 1 | attributes (bits 0-2 compression, bit 3 LogAppendTime) |
 *                 timestamp int64 | key | value
 *
 * Up-conversion (Produce): every message becomes a record of one uncompressed v2 batch (offsets
 * 0..n-1 relative, the log assigns the real ones; no producer id); magic 1 keeps its
 * timestamp, magic 0 has none (-1). Checked as Kafka does: CRC (CORRUPT_MESSAGE), sizes and
 * magic consistency (CORRUPT_MESSAGE), at least one message. gzip, snappy (xerial's framing, as
 * Java clients write it, or raw) and lz4 wrapper messages are inflated through the streaming
 * codecs (compression.h; a magic 0 lz4 wrapper's broken header checksum is ignored, as Kafka
 * does since KAFKA-3160) and their inner messages converted (a LogAppendTime wrapper gives them
 * its timestamp; nested compression is CORRUPT_MESSAGE); zstd needs magic 2 (KIP-110):
 * UNSUPPORTED_COMPRESSION_TYPE. The v2 batch is built uncompressed; the caller stores it in the
 * source codec (Kafka's LogValidator keeps a wrapper's codec), reported here.
 *
 * Down-conversion (Fetch): every record of the v2 batches becomes a message of the requested
 * magic with its absolute offset (magic 1: its timestamp, and the LogAppendTime bit of its
 * batch); headers are dropped; control batches (transaction markers) are skipped. Records are
 * read through the log validator's record stream (log_validator.h), so gzip, snappy and lz4
 * batches convert record by record and the messages are sent uncompressed (Kafka recompresses
 * them in the batch's codec; uncompressed is valid for every old client and needs no legacy lz4
 * framing). zstd batches cannot be down-converted (Kafka's RecordsUtil: UnsupportedCompression-
 * TypeException): conversion stops before one, as before a batch that does not read, and
 * *stopped_at_compressed is set. The output is bounded (KIP-283's aim: a compressed batch of ~60
 * KB may hold 64 MB of records): conversion stops before the first message that would take it
 * past the caller's limit; a record is kept in memory only when it could fit (so a record whose
 * headers alone pass the room stops the conversion, as a record too large would).
 *
 * Pure functions, no allocation but the output buffer (malloc'd, caller frees). */
#ifndef GR_STORAGE_LEGACY_RECORDS_H
#define GR_STORAGE_LEGACY_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Magic of the first entry of a record set (byte 16 in both formats), -1 if too short. */
int gr_records_magic(const uint8_t *p, size_t len);

/* CRC-32 (IEEE 802.3, as java.util.zip.CRC32). */
uint32_t gr_crc32_ieee(const uint8_t *p, size_t len);

/* Up-converts a legacy message set. Returns a Kafka error (NONE on success, then *out / *out_len
 * hold one uncompressed v2 batch the caller frees, and *source_codec, if not NULL, is the codec
 * (1-3) of the wrappers converted, else 0). Memory: the output, and the wrappers' inflated
 * values (at most 64 MiB together) while the batch is built. */
int16_t gr_legacy_to_v2(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len, int *source_codec);

/* Down-converts v2 batches (whole batches as a fetch reads them; a trailing partial batch is
 * ignored) to a message set of magic 0 or 1, in offset order, leaving out records before
 * first_offset (the fetch offset: as Kafka's RecordsUtil, so a limited conversion always makes
 * progress), stopping before the first message
 * that would make the set larger than max_bytes -- or, for the first message, than first_max
 * (max'd with max_bytes; SIZE_MAX: the first message always, as Kafka sends at least one).
 * Returns 0 with *out the malloc'd set the caller frees (NULL and *out_len 0 when nothing
 * converts), or -ENOMEM (*out NULL); never allocates more than the output, one record and a
 * codec's window, and checks every allocation. */
int gr_v2_to_legacy(const uint8_t *in, size_t len, int magic, int64_t first_offset, size_t max_bytes, size_t first_max,
                    uint8_t **out, size_t *out_len, bool *stopped_at_compressed);

#endif
