/* libFuzzer target for the protocol codec.
 *
 * Input byte 0 selects the mode:
 *   even: the rest is a request frame (after the size prefix) for gr_proto_decode_request;
 *   odd:  byte 1 picks an API from the table, byte 2 a version in its range, and the rest is a
 *         response frame for gr_proto_decode_response.
 * Whatever decodes must re-encode, and decoding that encoding must give the same bytes again
 * (the codec normalises bools, drops unknown/default tagged fields, but is otherwise exact). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_stable(const struct gr_wbuf *w1, const struct gr_wbuf *w2)
{
    if (w1->len != w2->len || (w1->len && memcmp(w1->p, w2->p, w1->len) != 0))
        abort();
}

static void fuzz_request(const uint8_t *data, size_t size)
{
    struct gr_arena a;
    struct gr_req_header hdr;
    void *body;
    gr_arena_init(&a);
    int rc = gr_proto_decode_request(data, size, &a, &hdr, &body);
    if (rc == 0) {
        struct gr_wbuf w1, w2;
        gr_wbuf_init(&w1);
        gr_wbuf_init(&w2);
        if (gr_proto_encode_request(hdr.RequestApiKey, hdr.RequestApiVersion, hdr.CorrelationId,
                                    hdr.ClientId, body, &w1) != 0)
            abort();
        struct gr_req_header h2;
        void *b2;
        if (gr_proto_decode_request(w1.p + 4, w1.len - 4, &a, &h2, &b2) != 0)
            abort();
        if (gr_proto_encode_request(h2.RequestApiKey, h2.RequestApiVersion, h2.CorrelationId,
                                    h2.ClientId, b2, &w2) != 0)
            abort();
        check_stable(&w1, &w2);
        /* the matching response type must encode from a default-initialised struct */
        gr_wbuf_reset(&w1);
        const struct gr_api_desc *api = gr_proto_api(hdr.RequestApiKey);
        void *resp = gr_proto_new(&a, api->response);
        if (gr_proto_encode_response(&hdr, resp, &w1) != 0)
            abort();
        gr_wbuf_free(&w1);
        gr_wbuf_free(&w2);
    } else if (rc != GR_EPROTO && rc != GR_PROTO_EUNKNOWN_API &&
               rc != GR_PROTO_EUNSUPPORTED_VERSION) {
        abort();
    }
    gr_arena_free(&a);
}

static void fuzz_response(const uint8_t *data, size_t size)
{
    if (size < 2)
        return;
    const struct gr_api_desc *api = &gr_proto_apis[data[0] % GR_API_COUNT];
    int16_t ver = (int16_t)(api->min_version +
                            data[1] % (api->max_version - api->min_version + 1));
    data += 2;
    size -= 2;
    struct gr_arena a;
    gr_arena_init(&a);
    int32_t corr;
    void *body;
    int rc = gr_proto_decode_response(api->key, ver, data, size, &a, &corr, &body);
    if (rc == 0) {
        struct gr_wbuf w1, w2;
        gr_wbuf_init(&w1);
        gr_wbuf_init(&w2);
        struct gr_req_header hdr = { api->key, ver, corr, NULL, 0 };
        if (gr_proto_encode_response(&hdr, body, &w1) != 0)
            abort();
        int32_t c2;
        void *b2;
        if (gr_proto_decode_response(api->key, ver, w1.p + 4, w1.len - 4, &a, &c2, &b2) != 0 ||
            c2 != corr)
            abort();
        if (gr_proto_encode_response(&hdr, b2, &w2) != 0)
            abort();
        check_stable(&w1, &w2);
        gr_wbuf_free(&w1);
        gr_wbuf_free(&w2);
    } else if (rc != GR_EPROTO) {
        abort();
    }
    gr_arena_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        fuzz_response(data + 1, size - 1);
    else
        fuzz_request(data + 1, size - 1);
    return 0;
}
