/* Internal to src/storage: the record-batch codecs Kafka uses, through Debian's libraries
 * (zlib, libsnappy, liblz4, libzstd). Codec ids are the batch attribute bits 0-2:
 * 1 gzip (RFC 1952), 2 snappy (Kafka writes xerial's framed format; raw snappy is also read, as
 * librdkafka may send it), 3 lz4 (LZ4 frame format), 4 zstd (frame). Stateless, thread-safe. */
#ifndef GR_STORAGE_COMPRESSION_H
#define GR_STORAGE_COMPRESSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define GR_CODEC_NONE 0
#define GR_CODEC_GZIP 1
#define GR_CODEC_SNAPPY 2
#define GR_CODEC_LZ4 3
#define GR_CODEC_ZSTD 4

/* Decompresses in[0..len) into a gr_malloc'd *out (*out_len bytes), at most max_out bytes.
 * Returns 0, -EINVAL (corrupt input or unknown codec) or -E2BIG (larger than max_out). */
int gr_decompress(int codec, const uint8_t *in, size_t len, size_t max_out, uint8_t **out, size_t *out_len);
/* Compresses in[0..len) into a gr_malloc'd *out. Returns 0 or -EINVAL. */
int gr_compress(int codec, const uint8_t *in, size_t len, uint8_t **out, size_t *out_len);

/* Streaming decompression (the log validator's record reader, log_validator.h): output comes in
 * pieces the caller asks for, so memory stays the codec's own window (gzip 32 KiB, lz4 a block of
 * at most 4 MiB, zstd a window of at most 128 MiB
 * (written only as far as the output goes), snappy one block of at most 32x its compressed
 * size) whatever the stream inflates to. The stream reads in[0..len), which must outlive it.
 * Not thread-safe per stream; streams are independent. */
struct gr_inflater;
/* Kafka's magic 0 LZ4 writers computed the frame descriptor checksum wrongly (KAFKA-3160) and
 * Kafka ignores that byte for magic 0 (KafkaLZ4BlockInputStream): so does this flag. */
#define GR_INFLATE_LZ4_IGNORE_HC 0x1
/* Opens a stream of codec (1-4) over in[0..len) that yields at most max_out bytes. 0, -EINVAL
 * (unknown codec, or an LZ4 header too short to repair) or -ENOMEM; *out is freed with
 * gr_inflater_close. */
int gr_inflater_open(struct gr_inflater **out, int codec, const uint8_t *in, size_t len, size_t max_out,
                     unsigned flags);
/* Reads up to n (> 0) bytes into dst: the count (> 0), 0 at the end of the compressed stream,
 * -EINVAL (corrupt, or the input ends before the stream does), -E2BIG (more than max_out) or
 * -ENOMEM. After an error the stream only fails. */
ssize_t gr_inflater_read(struct gr_inflater *z, uint8_t *dst, size_t n);
void gr_inflater_close(struct gr_inflater *z);
/* The LZ4 frame descriptor checksum of descriptor[0..len): (XXH32(descriptor, 0) >> 8) & 0xff. */
uint8_t gr_lz4_header_checksum(const uint8_t *descriptor, size_t len);

#endif
