/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by Kafka RecordBatch v2. */
#ifndef GR_CRC32C_H
#define GR_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extends `crc` (0 to start) over buf[0..len). gr_crc32c(0, "123456789", 9) == 0xE3069283.
 * Chaining works: gr_crc32c(gr_crc32c(0, a, n), b, m) == CRC of a||b. Pure; any thread. */
uint32_t gr_crc32c(uint32_t crc, const void *buf, size_t len);

/* The same, always with the portable table code (the reference the tests compare against). */
uint32_t gr_crc32c_sw(uint32_t crc, const void *buf, size_t len);

/* Which implementation gr_crc32c uses on this CPU (SSE4.2 instruction or tables), for logs. */
const char *gr_crc32c_impl(void);

#endif
