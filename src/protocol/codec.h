/* Table-driven Kafka message codec: request/response headers, bodies of every API in the table.
 *
 * Message structs and their descriptors are generated (protocol/messages.h, see
 * docs/PROTOCOL.md). Decoding is zero copy for bytes/records (struct gr_bytes points into the
 * input frame, which the caller keeps alive as long as the decoded message is used) and puts
 * everything else (structs, arrays, NUL-terminated strings) in a caller-supplied gr_arena.
 * All functions are reentrant and may be called from any thread; the tables are immutable.
 *
 * Frames on the wire:
 *   request  = int32 size | request header | request body
 *   response = int32 size | response header | response body
 *
 *   request header v0: int16 RequestApiKey | int16 RequestApiVersion | int32 CorrelationId
 *   request header v1: v0 + ClientId (classic nullable string, int16 length, even in v2)
 *   request header v2: v1 + tagged-field section
 *   response header v0: int32 CorrelationId
 *   response header v1: v0 + tagged-field section
 *
 * Header versions (Kafka's rules): a flexible API version uses request header v2 / response
 * header v1, otherwise v1 / v0; ApiVersions responses always use response header v0 (clients
 * parse it before they know the version); ControlledShutdown v0 requests use request header v0.
 *
 * Return codes: 0, GR_EPROTO (malformed bytes), -EINVAL / -EMSGSIZE (an encode input the wire
 * format cannot express), or the two codes below. */
#ifndef GR_PROTOCOL_CODEC_H
#define GR_PROTOCOL_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/util.h" /* GR_EPROTO */
#include "protocol/arena.h"
#include "protocol/desc.h"
#include "protocol/messages.h"
#include "protocol/wire.h"

enum {
    GR_PROTO_EUNKNOWN_API = -1101,         /* api key not in the table */
    GR_PROTO_EUNSUPPORTED_VERSION = -1102, /* api version outside the table's validVersions */
};

/* The request header (names from Kafka's RequestHeader.json). */
struct gr_req_header {
    int16_t RequestApiKey;
    int16_t RequestApiVersion;
    int32_t CorrelationId;
    char *ClientId;        /* NULL if null or absent (header v0); lives in the decode arena */
    int16_t HeaderVersion; /* 0, 1, 2 as decoded; -1 while/if the header did not parse */
};

/* API table entry for api_key, NULL if the key is not supported. */
const struct gr_api_desc *gr_proto_api(int16_t api_key);
/* Is version ver of this API flexible (compact encodings + tagged fields)? */
bool gr_proto_is_flexible(const struct gr_api_desc *api, int16_t ver);
/* Header versions for api_key at ver (rules above). Unknown keys get request header v1 and
 * response header v0. */
int gr_proto_request_header_version(int16_t api_key, int16_t ver);
int gr_proto_response_header_version(int16_t api_key, int16_t ver);

/* Decode a request frame (the bytes after the 4-byte size prefix). On success returns 0, fills
 * *hdr and sets *body to a struct <Api>Request allocated in a. Errors:
 *   GR_PROTO_EUNKNOWN_API / GR_PROTO_EUNSUPPORTED_VERSION: RequestApiKey, RequestApiVersion and
 *     CorrelationId are valid (ClientId/HeaderVersion too if the rest of the header parsed) so
 *     the caller can answer (ApiVersions: UNSUPPORTED_VERSION with a v0 response) or close;
 *   GR_EPROTO: malformed; if hdr->HeaderVersion >= 0 the header parsed and the body did not.
 * *body is NULL on every error. Trailing bytes after the body are ignored, as Kafka does. */
int gr_proto_decode_request(const uint8_t *frame, size_t len, struct gr_arena *a,
                            struct gr_req_header *hdr, void **body);

/* Append a complete response frame (4-byte size, response header, body) to w for the request
 * described by hdr (its RequestApiKey, RequestApiVersion and CorrelationId are used; to answer
 * an unsupported ApiVersions request, pass a copy with RequestApiVersion = 0). body points to
 * the matching struct <Api>Response. On error w is left as it was and a negative code returned. */
int gr_proto_encode_response(const struct gr_req_header *hdr, const void *body, struct gr_wbuf *w);

/* Append a complete request frame (size, header, body = struct <Api>Request) to w. */
int gr_proto_encode_request(int16_t api_key, int16_t ver, int32_t correlation_id,
                            const char *client_id, const void *body, struct gr_wbuf *w);

/* Decode a response frame (bytes after the size prefix) for a request we sent with api_key/ver:
 * sets *correlation_id (when the header parsed, even on a later error) and *body (a struct
 * <Api>Response in a, NULL on error). */
int gr_proto_decode_response(int16_t api_key, int16_t ver, const uint8_t *frame, size_t len,
                             struct gr_arena *a, int32_t *correlation_id, void **body);

/* Body only (no header, no size): decode the request (response == false) or response message of
 * api_key at ver from r into a new struct in a, or encode one into w. */
int gr_proto_decode_body(int16_t api_key, bool response, int16_t ver, struct gr_rbuf *r,
                         struct gr_arena *a, void **body);
int gr_proto_encode_body(int16_t api_key, bool response, int16_t ver, const void *body,
                         struct gr_wbuf *w);

/* Generic struct codec: fields absent in ver are skipped on encode and set to their defaults on
 * decode; unknown tagged fields are skipped. Encoding is lenient where it cannot lose
 * information: a NULL string / null bytes / Count -1 array in a version where the field is not
 * nullable is written as empty. Tagged fields are written only when they differ from their
 * default. A NULL `in` (or body, in the functions above) encodes an all-defaults struct. */
int gr_proto_decode_struct(const struct gr_struct_desc *sd, int16_t ver, bool flexible,
                           struct gr_rbuf *r, struct gr_arena *a, void *out);
int gr_proto_encode_struct(const struct gr_struct_desc *sd, int16_t ver, bool flexible,
                           const void *in, struct gr_wbuf *w);
/* Set every field of *out to its schema default (JSON "default", else 0/NULL/empty). */
void gr_proto_init_struct(const struct gr_struct_desc *sd, void *out);
/* Allocate a struct in a and initialise it with gr_proto_init_struct. */
void *gr_proto_new(struct gr_arena *a, const struct gr_struct_desc *sd);

/* Text for GR_PROTO_E* codes, falling back to gr_strerror(). */
const char *gr_proto_strerror(int rc);

#endif
