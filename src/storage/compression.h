/* Internal to src/storage: the record-batch codecs Kafka uses, through Debian's libraries
 * (zlib, libsnappy, liblz4, libzstd). Codec ids are the batch attribute bits 0-2:
 * 1 gzip (RFC 1952), 2 snappy (Kafka writes xerial's framed format; raw snappy is also read, as
 * librdkafka may send it), 3 lz4 (LZ4 frame format), 4 zstd (frame). Stateless, thread-safe. */
#ifndef GR_STORAGE_COMPRESSION_H
#define GR_STORAGE_COMPRESSION_H

#include <stddef.h>
#include <stdint.h>

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

#endif
