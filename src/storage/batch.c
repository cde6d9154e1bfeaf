/* RecordBatch v2 validation, iteration and building. The byte table is in batch.h. */
#include "storage/batch.h"

#include <string.h>

#include "common/crc32c.h"
#include "common/kerr.h"
#include "common/util.h"
#include "common/be.h"

/* ---- a read cursor that remembers its first error ---- */

struct cur {
    const uint8_t *p, *end;
    int err; /* 0 or 1 */
};

static size_t cur_left(const struct cur *c) { return c->err ? 0 : (size_t)(c->end - c->p); }

static const uint8_t *cur_bytes(struct cur *c, size_t n) {
    if (c->err || (size_t)(c->end - c->p) < n) {
        c->err = 1;
        return NULL;
    }
    const uint8_t *r = c->p;
    c->p += n;
    return r;
}

static int8_t cur_i8(struct cur *c) {
    const uint8_t *b = cur_bytes(c, 1);
    return b ? (int8_t)b[0] : 0;
}

/* Unsigned LEB128 of at most maxbytes bytes (one bounds check, not one per byte). */
static inline uint64_t cur_uvar(struct cur *c, int maxbytes) {
    const uint8_t *p = c->p;
    size_t avail = (size_t)(c->end - p);
    if (c->err || avail == 0) {
        c->err = 1;
        return 0;
    }
    if (p[0] < 0x80) { /* one byte: most lengths and deltas */
        c->p = p + 1;
        return p[0];
    }
    if (avail >= 2 && p[1] < 0x80) { /* two bytes: zigzag lengths of 64..8191 */
        c->p = p + 2;
        return (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
    }
    size_t lim = avail < (size_t)maxbytes ? avail : (size_t)maxbytes;
    uint64_t v = 0;
    for (size_t i = 0; i < lim; i++) {
        v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            c->p = p + i + 1;
            return v;
        }
    }
    c->err = 1; /* truncated or too long */
    return 0;
}

static int64_t cur_varlong(struct cur *c) {
    uint64_t u = cur_uvar(c, 10);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static int32_t cur_varint(struct cur *c) {
    uint64_t u = cur_uvar(c, 5);
    if (u > 0xffffffffull) {
        c->err = 1;
        return 0;
    }
    uint32_t w = (uint32_t)u;
    return (int32_t)((w >> 1) ^ (~(w & 1) + 1));
}

/* Bytes preceded by a varint length; -1 means null. */
static const uint8_t *cur_len_bytes(struct cur *c, int32_t *len_out, int allow_null) {
    int32_t n = cur_varint(c);
    *len_out = n;
    if (c->err) return NULL;
    if (n < 0) {
        if (n != -1 || !allow_null) c->err = 1;
        return NULL;
    }
    return cur_bytes(c, (size_t)n);
}

/* ---- errors ---- */

const char *gr_batch_strerror(int err) {
    switch (err) {
    case GR_BATCH_OK: return "ok";
    case GR_BATCH_ETRUNCATED: return "truncated batch";
    case GR_BATCH_ELENGTH: return "invalid batch length";
    case GR_BATCH_EOLDMAGIC: return "old message format (magic 0/1)";
    case GR_BATCH_EMAGIC: return "unknown magic";
    case GR_BATCH_ECRC: return "CRC mismatch";
    case GR_BATCH_ECOUNT: return "inconsistent recordCount/lastOffsetDelta";
    case GR_BATCH_ERECORDS: return "malformed record";
    case GR_BATCH_ECONTROL: return "control batch from a client";
    case GR_BATCH_ESEQUENCE: return "producerId set without baseSequence";
    case GR_BATCH_ECODEC: return "records do not decompress";
    case GR_BATCH_EINFLATE: return "records decompress beyond the limit";
    case GR_BATCH_ENOMEM: return "out of memory";
    default: return "unknown batch error";
    }
}

int16_t gr_batch_err_kerr(int err) {
    switch (err) {
    case GR_BATCH_OK: return GR_KERR_NONE;
    case GR_BATCH_EOLDMAGIC: return GR_KERR_UNSUPPORTED_FOR_MESSAGE_FORMAT;
    case GR_BATCH_ECOUNT:
    case GR_BATCH_ERECORDS:
    case GR_BATCH_ECONTROL:
    case GR_BATCH_ESEQUENCE: return GR_KERR_INVALID_RECORD;
    case GR_BATCH_EINFLATE: return GR_KERR_MESSAGE_TOO_LARGE;
    case GR_BATCH_ENOMEM: return GR_KERR_UNKNOWN_SERVER_ERROR;
    default: return GR_KERR_CORRUPT_MESSAGE;
    }
}

/* ---- header ---- */

int gr_batch_peek_header(const uint8_t *buf, size_t hdr_len, size_t avail, struct gr_batch_info *out) {
    memset(out, 0, sizeof *out);
    if (hdr_len > avail) hdr_len = avail;
    if (hdr_len < GR_BATCH_OFF_MAGIC + 1) return GR_BATCH_ETRUNCATED;
    out->BaseOffset = (int64_t)gr_be64(buf + GR_BATCH_OFF_BASE_OFFSET);
    out->BatchLength = (int32_t)gr_be32(buf + GR_BATCH_OFF_LENGTH);
    out->PartitionLeaderEpoch = (int32_t)gr_be32(buf + GR_BATCH_OFF_LEADER_EPOCH);
    out->Magic = (int8_t)buf[GR_BATCH_OFF_MAGIC];
    if (out->Magic == 0 || out->Magic == 1) return GR_BATCH_EOLDMAGIC;
    if (out->Magic != GR_BATCH_MAGIC) return GR_BATCH_EMAGIC;
    if (out->BatchLength < GR_BATCH_HEADER_SIZE - GR_BATCH_LOG_OVERHEAD) return GR_BATCH_ELENGTH;
    out->size = (size_t)out->BatchLength + GR_BATCH_LOG_OVERHEAD;
    if (out->size > avail || hdr_len < GR_BATCH_HEADER_SIZE) return GR_BATCH_ETRUNCATED;
    out->Crc = gr_be32(buf + GR_BATCH_OFF_CRC);
    out->Attributes = (int16_t)gr_be16(buf + GR_BATCH_OFF_ATTRIBUTES);
    out->LastOffsetDelta = (int32_t)gr_be32(buf + GR_BATCH_OFF_LAST_OFFSET_DELTA);
    out->BaseTimestamp = (int64_t)gr_be64(buf + GR_BATCH_OFF_BASE_TIMESTAMP);
    out->MaxTimestamp = (int64_t)gr_be64(buf + GR_BATCH_OFF_MAX_TIMESTAMP);
    out->ProducerId = (int64_t)gr_be64(buf + GR_BATCH_OFF_PRODUCER_ID);
    out->ProducerEpoch = (int16_t)gr_be16(buf + GR_BATCH_OFF_PRODUCER_EPOCH);
    out->BaseSequence = (int32_t)gr_be32(buf + GR_BATCH_OFF_BASE_SEQUENCE);
    out->RecordCount = (int32_t)gr_be32(buf + GR_BATCH_OFF_RECORD_COUNT);
    return GR_BATCH_OK;
}

int gr_batch_parse_header(const uint8_t *buf, size_t len, struct gr_batch_info *out) {
    return gr_batch_peek_header(buf, len, len, out);
}

/* ---- records ---- */

/* Parses one record at c into *r (pointers into the buffer). Returns 0 or -1. */
static int parse_record(struct cur *c, const struct gr_batch_info *bi, struct gr_batch_rec_view *r) {
    memset(r, 0, sizeof *r);
    int32_t len = cur_varint(c);
    if (c->err || len < 0) return -1;
    const uint8_t *body = cur_bytes(c, (size_t)len);
    if (!body) return -1;
    struct cur rc = {body, body + len, 0};
    r->Attributes = cur_i8(&rc);
    r->TimestampDelta = cur_varlong(&rc);
    r->OffsetDelta = cur_varint(&rc);
    r->Key = cur_len_bytes(&rc, &r->KeyLength, 1);
    r->Value = cur_len_bytes(&rc, &r->ValueLength, 1);
    r->HeaderCount = cur_varint(&rc);
    if (rc.err || r->HeaderCount < 0) return -1;
    r->headers = rc.p;
    for (int32_t i = 0; i < r->HeaderCount && !rc.err; i++) {
        int32_t kl, vl;
        cur_len_bytes(&rc, &kl, 0);
        cur_len_bytes(&rc, &vl, 1);
    }
    if (rc.err || rc.p != rc.end) return -1; /* the length must cover the record exactly */
    r->headers_len = (size_t)(rc.p - r->headers);
    r->Offset = (int64_t)((uint64_t)bi->BaseOffset + (uint64_t)(int64_t)r->OffsetDelta);
    r->Timestamp = (int64_t)((uint64_t)bi->BaseTimestamp + (uint64_t)r->TimestampDelta);
    return 0;
}

int gr_batch_parse_record(const uint8_t *p, size_t len, const struct gr_batch_info *bi, struct gr_batch_rec_view *rec,
                          size_t *used) {
    struct cur c = {p, p + len, 0};
    if (parse_record(&c, bi, rec) < 0) return GR_BATCH_ERECORDS;
    *used = (size_t)(c.p - p);
    return GR_BATCH_OK;
}

int gr_batch_rec_iter_init(struct gr_batch_rec_iter *it, const uint8_t *batch, size_t len) {
    memset(it, 0, sizeof *it);
    int err = gr_batch_parse_header(batch, len, &it->info);
    if (err == GR_BATCH_OK && gr_batch_info_compression(&it->info) != 0) err = GR_BATCH_ERECORDS;
    if (err == GR_BATCH_OK && it->info.RecordCount < 0) err = GR_BATCH_ECOUNT;
    it->err = err;
    if (err == GR_BATCH_OK) {
        it->p = batch + GR_BATCH_HEADER_SIZE;
        it->end = batch + it->info.size;
    }
    return err;
}

int gr_batch_rec_iter_next(struct gr_batch_rec_iter *it, struct gr_batch_rec_view *rec) {
    if (it->err != GR_BATCH_OK) return 0;
    if (it->index >= it->info.RecordCount) {
        if (it->p != it->end) it->err = GR_BATCH_ERECORDS; /* trailing bytes after the records */
        return 0;
    }
    struct cur c = {it->p, it->end, 0};
    if (parse_record(&c, &it->info, rec) < 0) {
        it->err = GR_BATCH_ERECORDS;
        return 0;
    }
    it->p = c.p;
    it->index++;
    return 1;
}

int gr_batch_rec_header_next(const struct gr_batch_rec_view *rec, size_t *pos,
                             struct gr_batch_rec_header_view *h) {
    if (*pos >= rec->headers_len) return 0;
    struct cur c = {rec->headers + *pos, rec->headers + rec->headers_len, 0};
    h->Key = cur_len_bytes(&c, &h->KeyLength, 0);
    h->Value = cur_len_bytes(&c, &h->ValueLength, 1);
    if (c.err) return -1;
    *pos = (size_t)(c.p - rec->headers);
    return 1;
}

/* ---- validation ---- */

/* What parse_record checks, without filling a view (the validation hot path): *offset_delta. */
static int check_record(struct cur *c, int32_t *offset_delta) {
    int32_t len = cur_varint(c);
    if (c->err || len < 0) return -1;
    const uint8_t *body = cur_bytes(c, (size_t)len);
    if (!body) return -1;
    struct cur rc = {body, body + len, 0};
    int32_t n;
    cur_i8(&rc);     /* attributes */
    cur_varlong(&rc); /* timestamp delta */
    *offset_delta = cur_varint(&rc);
    cur_len_bytes(&rc, &n, 1); /* key */
    cur_len_bytes(&rc, &n, 1); /* value */
    int32_t headers = cur_varint(&rc);
    if (rc.err || headers < 0) return -1;
    for (int32_t i = 0; i < headers && !rc.err; i++) {
        cur_len_bytes(&rc, &n, 0);
        cur_len_bytes(&rc, &n, 1);
    }
    return rc.err || rc.p != rc.end ? -1 : 0; /* the length must cover the record exactly */
}

int gr_batch_validate_one(const uint8_t *buf, size_t len, unsigned flags, struct gr_batch_info *out) {
    struct gr_batch_info tmp;
    struct gr_batch_info *bi = out ? out : &tmp;
    int err = gr_batch_parse_header(buf, len, bi);
    if (err != GR_BATCH_OK) return err;
    uint32_t crc = gr_crc32c(0, buf + GR_BATCH_CRC_START, bi->size - GR_BATCH_CRC_START);
    if (crc != bi->Crc) return GR_BATCH_ECRC;
    const bool client = (flags & GR_BATCH_V_CLIENT) != 0;
    if (bi->RecordCount < 0 || bi->LastOffsetDelta < 0) return GR_BATCH_ECOUNT;
    if (client) {
        if (bi->RecordCount == 0 || (int64_t)bi->LastOffsetDelta + 1 != bi->RecordCount) return GR_BATCH_ECOUNT;
        if (bi->Attributes & GR_BATCH_ATTR_CONTROL) return GR_BATCH_ECONTROL;
        if (bi->ProducerId >= 0 && bi->BaseSequence < 0) return GR_BATCH_ESEQUENCE;
    } else {
        /* Batches already in a log: offsets must be sane so lastOffset cannot overflow. */
        if (bi->BaseOffset < 0 || bi->BaseOffset > GR_BATCH_MAX_OFFSET) return GR_BATCH_ECOUNT;
        if ((int64_t)bi->RecordCount > (int64_t)bi->LastOffsetDelta + 1) return GR_BATCH_ECOUNT;
    }
    if (gr_batch_info_compression(bi) != 0 || (flags & GR_BATCH_V_NO_RECORDS)) return GR_BATCH_OK;
    /* Uncompressed: every record must parse and the records must fill the batch exactly. */
    struct cur c = {buf + GR_BATCH_HEADER_SIZE, buf + bi->size, 0};
    int64_t prev = -1;
    for (int32_t i = 0; i < bi->RecordCount; i++) {
        int32_t delta;
        if (check_record(&c, &delta) < 0) return GR_BATCH_ERECORDS;
        if (client ? delta != i : (delta <= prev || delta > bi->LastOffsetDelta)) return GR_BATCH_ERECORDS;
        prev = delta;
    }
    if (cur_left(&c) != 0 || c.err) return GR_BATCH_ERECORDS;
    return GR_BATCH_OK;
}

int gr_batch_validate_all(const uint8_t *buf, size_t len, unsigned flags, struct gr_batch_summary *sum) {
    struct gr_batch_summary s;
    memset(&s, 0, sizeof s);
    s.max_timestamp = -1;
    s.offset_of_max_timestamp = -1;
    s.first_offset = -1;
    s.last_offset = -1;
    s.offsets_contiguous = true;
    int err = len == 0 ? GR_BATCH_ETRUNCATED : GR_BATCH_OK;
    size_t pos = 0;
    while (err == GR_BATCH_OK && pos < len) {
        struct gr_batch_info bi;
        err = gr_batch_validate_one(buf + pos, len - pos, flags, &bi);
        if (err != GR_BATCH_OK) {
            s.bad_pos = pos;
            break;
        }
        /* Wrapping arithmetic: client batches may carry any baseOffset. */
        int64_t last = (int64_t)((uint64_t)bi.BaseOffset + (uint64_t)(int64_t)bi.LastOffsetDelta);
        if (s.batches == 0) s.first_offset = bi.BaseOffset;
        else if (bi.BaseOffset != (int64_t)((uint64_t)s.last_offset + 1)) s.offsets_contiguous = false;
        s.last_offset = last;
        s.batches++;
        s.records += bi.RecordCount;
        if (bi.MaxTimestamp > s.max_timestamp) {
            s.max_timestamp = bi.MaxTimestamp;
            s.offset_of_max_timestamp = last;
        }
        if (bi.size > s.max_batch_size) s.max_batch_size = bi.size;
        pos += bi.size;
    }
    if (sum) *sum = s;
    return err;
}

/* ---- iteration and field access ---- */

void gr_batch_iter_init(struct gr_batch_iter *it, const uint8_t *buf, size_t len) {
    it->buf = buf;
    it->len = len;
    it->pos = 0;
    it->err = GR_BATCH_OK;
}

int gr_batch_iter_next(struct gr_batch_iter *it, struct gr_batch_info *info, const uint8_t **batch) {
    if (it->err != GR_BATCH_OK || it->pos >= it->len) return 0;
    int err = gr_batch_parse_header(it->buf + it->pos, it->len - it->pos, info);
    if (err != GR_BATCH_OK) {
        it->err = err;
        return 0;
    }
    *batch = it->buf + it->pos;
    it->pos += info->size;
    return 1;
}

int64_t gr_batch_count_records(const uint8_t *buf, size_t len) {
    struct gr_batch_iter it;
    struct gr_batch_info bi;
    const uint8_t *b;
    int64_t n = 0;
    gr_batch_iter_init(&it, buf, len);
    while (gr_batch_iter_next(&it, &bi, &b))
        if (bi.RecordCount > 0) n += bi.RecordCount;
    return n;
}

void gr_batch_set_base_offset(uint8_t *batch, int64_t base_offset) {
    gr_put_be64(batch + GR_BATCH_OFF_BASE_OFFSET, (uint64_t)base_offset);
}
void gr_batch_set_partition_leader_epoch(uint8_t *batch, int32_t epoch) {
    gr_put_be32(batch + GR_BATCH_OFF_LEADER_EPOCH, (uint32_t)epoch);
}
int64_t gr_batch_base_offset(const uint8_t *batch) { return (int64_t)gr_be64(batch + GR_BATCH_OFF_BASE_OFFSET); }
int32_t gr_batch_partition_leader_epoch(const uint8_t *batch) {
    return (int32_t)gr_be32(batch + GR_BATCH_OFF_LEADER_EPOCH);
}
int64_t gr_batch_last_offset(const uint8_t *batch) {
    return (int64_t)((uint64_t)gr_batch_base_offset(batch) +
                     (uint64_t)(int64_t)(int32_t)gr_be32(batch + GR_BATCH_OFF_LAST_OFFSET_DELTA));
}
int64_t gr_batch_max_timestamp(const uint8_t *batch) { return (int64_t)gr_be64(batch + GR_BATCH_OFF_MAX_TIMESTAMP); }
int32_t gr_batch_record_count(const uint8_t *batch) { return (int32_t)gr_be32(batch + GR_BATCH_OFF_RECORD_COUNT); }

void gr_batch_update_crc(uint8_t *batch, size_t size) {
    gr_put_be32(batch + GR_BATCH_OFF_CRC, gr_crc32c(0, batch + GR_BATCH_CRC_START, size - GR_BATCH_CRC_START));
}

/* ---- builder ---- */

static size_t uvar_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}
static uint64_t zz64(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static size_t varint_size(int64_t v) { return uvar_size(zz64(v)); }
size_t gr_batch_put_varlong(uint8_t *p, int64_t v) {
    uint64_t u = zz64(v);
    size_t n = 0;
    while (u >= 0x80) {
        p[n++] = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    p[n++] = (uint8_t)u;
    return n;
}
static uint8_t *put_varint(uint8_t *p, int64_t v) { return p + gr_batch_put_varlong(p, v); }
static uint8_t *put_len_bytes(uint8_t *p, const void *b, int32_t n) {
    if (n < 0 || !b) return put_varint(p, -1);
    p = put_varint(p, n);
    memcpy(p, b, (size_t)n);
    return p + n;
}
static size_t len_bytes_size(const void *b, int32_t n) {
    return (n < 0 || !b) ? 1 : varint_size(n) + (size_t)n;
}

/* Size of a record's body (after its length varint). */
static size_t rec_body_size(const struct gr_batch_rec *r, int64_t ts_delta, int32_t off_delta) {
    size_t n = 1 + varint_size(ts_delta) + varint_size(off_delta) + len_bytes_size(r->key, r->key_len) +
               len_bytes_size(r->value, r->value_len) + varint_size(r->header_count > 0 ? r->header_count : 0);
    for (int32_t h = 0; h < r->header_count; h++) {
        const struct gr_batch_rec_header *hd = &r->headers[h];
        n += varint_size(hd->key_len > 0 ? hd->key_len : 0) + (hd->key_len > 0 ? (size_t)hd->key_len : 0);
        n += len_bytes_size(hd->value, hd->value_len);
    }
    return n;
}

/* A record's timestamp delta, wrapping as Kafka's long arithmetic does (any int64 timestamps:
 * converted legacy records carry whatever the client wrote). */
static int64_t ts_delta(int64_t ts, int64_t base) { return (int64_t)((uint64_t)ts - (uint64_t)base); }

uint8_t *gr_batch_build(const struct gr_batch_rec *recs, int n, const struct gr_batch_build_opts *opts,
                        size_t *len_out) {
    static const struct gr_batch_build_opts defaults = GR_BATCH_BUILD_OPTS_INIT;
    if (!opts) opts = &defaults;
    if (n < 0) n = 0;
    int64_t base_ts = n > 0 ? recs[0].timestamp : -1, max_ts = -1;
    for (int i = 0; i < n; i++)
        if (recs[i].timestamp > max_ts) max_ts = recs[i].timestamp;
    size_t total = GR_BATCH_HEADER_SIZE;
    for (int i = 0; i < n; i++) {
        size_t body = rec_body_size(&recs[i], ts_delta(recs[i].timestamp, base_ts), i);
        total += varint_size((int64_t)body) + body;
    }
    uint8_t *buf = gr_malloc(total);
    gr_put_be64(buf + GR_BATCH_OFF_BASE_OFFSET, (uint64_t)opts->base_offset);
    gr_put_be32(buf + GR_BATCH_OFF_LENGTH, (uint32_t)(total - GR_BATCH_LOG_OVERHEAD));
    gr_put_be32(buf + GR_BATCH_OFF_LEADER_EPOCH, (uint32_t)opts->partition_leader_epoch);
    buf[GR_BATCH_OFF_MAGIC] = GR_BATCH_MAGIC;
    gr_put_be16(buf + GR_BATCH_OFF_ATTRIBUTES, (uint16_t)(opts->attributes & ~GR_BATCH_ATTR_COMPRESSION_MASK));
    gr_put_be32(buf + GR_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)(n > 0 ? n - 1 : 0));
    gr_put_be64(buf + GR_BATCH_OFF_BASE_TIMESTAMP, (uint64_t)base_ts);
    gr_put_be64(buf + GR_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)max_ts);
    gr_put_be64(buf + GR_BATCH_OFF_PRODUCER_ID, (uint64_t)opts->producer_id);
    gr_put_be16(buf + GR_BATCH_OFF_PRODUCER_EPOCH, (uint16_t)opts->producer_epoch);
    gr_put_be32(buf + GR_BATCH_OFF_BASE_SEQUENCE, (uint32_t)opts->base_sequence);
    gr_put_be32(buf + GR_BATCH_OFF_RECORD_COUNT, (uint32_t)n);
    uint8_t *p = buf + GR_BATCH_HEADER_SIZE;
    for (int i = 0; i < n; i++) {
        const struct gr_batch_rec *r = &recs[i];
        size_t body = rec_body_size(r, ts_delta(r->timestamp, base_ts), i);
        p = put_varint(p, (int64_t)body);
        *p++ = 0; /* record attributes: unused */
        p = put_varint(p, ts_delta(r->timestamp, base_ts));
        p = put_varint(p, i);
        p = put_len_bytes(p, r->key, r->key_len);
        p = put_len_bytes(p, r->value, r->value_len);
        int32_t hc = r->header_count > 0 ? r->header_count : 0;
        p = put_varint(p, hc);
        for (int32_t h = 0; h < hc; h++) {
            const struct gr_batch_rec_header *hd = &r->headers[h];
            int32_t kl = hd->key_len > 0 ? hd->key_len : 0;
            p = put_varint(p, kl);
            if (kl) memcpy(p, hd->key, (size_t)kl);
            p += kl;
            p = put_len_bytes(p, hd->value, hd->value_len);
        }
    }
    gr_batch_update_crc(buf, total);
    *len_out = total;
    return buf;
}
