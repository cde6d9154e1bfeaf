/* Record reading and Kafka's record-level validation: see log_validator.h. */
#include "storage/log_validator.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "storage/compression.h"

/* The window grows in steps of at least this much; skipped bytes are read through it too. */
#define WINDOW_STEP ((size_t)64 << 10)

static int inflate_err(ssize_t rc) {
    return rc == -E2BIG ? GR_BATCH_EINFLATE : rc == -ENOMEM ? GR_BATCH_ENOMEM : GR_BATCH_ECODEC;
}

/* Makes at least `need` unread bytes available unless the stream ends first (or fails:
 * rs->err). In place, everything is available already. */
static void fill(struct gr_record_stream *rs, size_t need) {
    while (rs->err == GR_BATCH_OK && !rs->eof && rs->end - rs->start < need) {
        if (rs->cap - rs->start < need || rs->cap == rs->end) {
            /* move the unread bytes down; grow when the room is still short */
            if (rs->start > 0) memmove(rs->win, rs->win + rs->start, rs->end - rs->start);
            rs->end -= rs->start;
            rs->start = 0;
            if (rs->cap - rs->end < WINDOW_STEP / 4 || rs->cap < need) {
                size_t cap = rs->cap + (need > WINDOW_STEP ? need : WINDOW_STEP);
                uint8_t *grown = realloc(rs->win, cap);
                if (!grown) {
                    rs->err = GR_BATCH_ENOMEM;
                    return;
                }
                rs->win = grown, rs->cap = cap;
            }
            rs->data = rs->win;
        }
        ssize_t n = gr_inflater_read(rs->z, rs->win + rs->end, rs->cap - rs->end);
        if (n < 0) rs->err = inflate_err(n);
        else if (n == 0) rs->eof = true;
        else rs->end += (size_t)n;
    }
}

/* Consumes n bytes without keeping them. False when the stream ends first (or fails). */
static bool skip(struct gr_record_stream *rs, size_t n) {
    while (n > 0) {
        if (rs->end == rs->start) fill(rs, n < WINDOW_STEP ? n : WINDOW_STEP);
        size_t k = rs->end - rs->start < n ? rs->end - rs->start : n;
        if (k == 0) return false;
        rs->start += k, n -= k;
    }
    return true;
}

/* A zig-zag varint of at most maxbytes bytes at the read position; advances past it. */
static bool rd_varint(struct gr_record_stream *rs, int maxbytes, int64_t *v) {
    fill(rs, (size_t)maxbytes);
    const uint8_t *p = rs->data + rs->start;
    size_t avail = rs->end - rs->start;
    uint64_t u = 0;
    for (size_t i = 0; i < avail && i < (size_t)maxbytes; i++) {
        u |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            if (maxbytes == 5 && u > UINT32_MAX) return false;
            *v = maxbytes == 5 ? (int64_t)(int32_t)((uint32_t)(u >> 1) ^ -(uint32_t)(u & 1))
                               : (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
            rs->start += i + 1;
            return true;
        }
    }
    return false;
}

int gr_record_stream_open(struct gr_record_stream *rs, const uint8_t *batch, const struct gr_batch_info *bi,
                          size_t max_inflated, unsigned flags) {
    memset(rs, 0, sizeof *rs);
    rs->info = *bi;
    rs->max_record = max_inflated;
    if (bi->RecordCount < 0 || bi->size < GR_BATCH_HEADER_SIZE) return rs->err = GR_BATCH_ECOUNT;
    int codec = gr_batch_info_compression(bi);
    const uint8_t *recs = batch + GR_BATCH_HEADER_SIZE;
    size_t len = bi->size - GR_BATCH_HEADER_SIZE;
    if (codec == GR_CODEC_NONE) {
        rs->data = recs;
        rs->end = len;
        rs->eof = true;
        return GR_BATCH_OK;
    }
    static const uint8_t empty[1];
    rs->data = empty; /* the window, once there is one */
    if (codec > GR_CODEC_ZSTD) return rs->err = GR_BATCH_ECODEC;
    int rc = gr_inflater_open(&rs->z, codec, recs, len, max_inflated, flags);
    if (rc) return rs->err = rc == -ENOMEM ? GR_BATCH_ENOMEM : GR_BATCH_ECODEC;
    return GR_BATCH_OK;
}

void gr_record_stream_close(struct gr_record_stream *rs) {
    gr_inflater_close(rs->z);
    free(rs->win);
    rs->z = NULL, rs->win = NULL, rs->data = NULL;
}

/* After recordCount records: nothing may remain (Kafka: "records still remaining"). */
static int at_end(struct gr_record_stream *rs) {
    fill(rs, 1);
    if (rs->err == GR_BATCH_OK && rs->end > rs->start) rs->err = GR_BATCH_ERECORDS;
    return 0;
}

/* A record's fields as varints and skipped bytes (no key/value/header bytes kept). */
static bool read_skipping(struct gr_record_stream *rs, struct gr_batch_rec_view *r) {
    int64_t len, v;
    if (!rd_varint(rs, 5, &len) || len < 0) return false;
    size_t consumed = 0; /* positions move when the window does: count the bytes instead */
#define TRACK(expr)                                      \
    do {                                                 \
        size_t before = rs->start;                       \
        if (!(expr)) return false;                       \
        consumed += rs->start - before;                  \
    } while (0)
    fill(rs, 1);
    if (rs->end == rs->start) return false;
    r->Attributes = (int8_t)rs->data[rs->start++];
    consumed = 1;
    TRACK(rd_varint(rs, 10, &r->TimestampDelta));
    TRACK(rd_varint(rs, 5, &v));
    r->OffsetDelta = (int32_t)v;
    for (int f = 0; f < 2; f++) {
        TRACK(rd_varint(rs, 5, &v));
        if (v < -1 || (v > 0 && (uint64_t)v > (uint64_t)len)) return false;
        if (f == 0) r->KeyLength = (int32_t)v;
        else r->ValueLength = (int32_t)v;
        if (v > 0) {
            if (!skip(rs, (size_t)v)) return false;
            consumed += (size_t)v;
        }
    }
    TRACK(rd_varint(rs, 5, &v));
    if (v < 0 || (uint64_t)v > (uint64_t)len) return false;
    r->HeaderCount = (int32_t)v;
    for (int32_t h = 0; h < r->HeaderCount; h++) {
        for (int f = 0; f < 2; f++) {
            TRACK(rd_varint(rs, 5, &v));
            if (v < (f == 0 ? 0 : -1) || (v > 0 && (uint64_t)v > (uint64_t)len)) return false;
            if (v > 0) {
                if (!skip(rs, (size_t)v)) return false;
                consumed += (size_t)v;
            }
        }
        if (consumed > (size_t)len) return false;
    }
#undef TRACK
    return consumed == (size_t)len; /* the length must cover the record exactly */
}

/* A whole record in the window, parsed in place; one longer than whole_up_to is read skipping
 * (*skipped set). */
static bool read_whole(struct gr_record_stream *rs, struct gr_batch_rec_view *r, size_t whole_up_to, bool *skipped) {
    fill(rs, 5);
    const uint8_t *p = rs->data + rs->start;
    size_t avail = rs->end - rs->start;
    uint64_t u = 0;
    size_t vl = 0;
    for (size_t i = 0; i < avail && i < 5; i++) {
        u |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            vl = i + 1;
            break;
        }
    }
    if (vl == 0 || (u & 1) || u > UINT32_MAX) return false; /* malformed or negative length */
    size_t total = vl + (size_t)(u >> 1);
    if (total > whole_up_to) {
        *skipped = true;
        return read_skipping(rs, r);
    }
    if (total > rs->max_record) {
        rs->err = GR_BATCH_EINFLATE;
        return false;
    }
    fill(rs, total);
    if (rs->err != GR_BATCH_OK || rs->end - rs->start < total) return false;
    size_t used;
    if (gr_batch_parse_record(rs->data + rs->start, total, &rs->info, r, &used) != GR_BATCH_OK) return false;
    rs->raw = rs->data + rs->start;
    rs->raw_len = used;
    rs->start += used;
    return true;
}

int gr_record_stream_next(struct gr_record_stream *rs, struct gr_batch_rec_view *rec, size_t whole_up_to) {
    if (rs->err != GR_BATCH_OK) return 0;
    if (rs->index >= rs->info.RecordCount) {
        if (rs->index == rs->info.RecordCount) {
            rs->index++; /* check once */
            at_end(rs);
        }
        return 0;
    }
    memset(rec, 0, sizeof *rec);
    bool skipped = whole_up_to == 0;
    rs->raw = NULL, rs->raw_len = 0;
    bool ok = skipped ? read_skipping(rs, rec) : read_whole(rs, rec, whole_up_to, &skipped);
    if (!ok) {
        if (rs->err == GR_BATCH_OK) rs->err = GR_BATCH_ERECORDS;
        return 0;
    }
    if (skipped) {
        rec->Offset = (int64_t)((uint64_t)rs->info.BaseOffset + (uint64_t)(int64_t)rec->OffsetDelta);
        rec->Timestamp = (int64_t)((uint64_t)rs->info.BaseTimestamp + (uint64_t)rec->TimestampDelta);
    }
    rs->index++;
    return 1;
}

/* ---- validation ---- */

static void record_error(struct gr_validator_result *res, int32_t index, const char *msg) {
    if (res->kept < GR_VALIDATOR_MAX_RECORD_ERRORS) {
        res->record_errors[res->kept].BatchIndex = index;
        res->record_errors[res->kept].BatchIndexErrorMessage = msg;
        res->kept++;
    }
    res->record_error_count++;
}

int16_t gr_log_validate_batch(const uint8_t *batch, const struct gr_batch_info *bi, const struct gr_validator_config *cfg,
                              struct gr_validator_result *res) {
    memset(res, 0, sizeof *res);
    res->max_timestamp = -1;
    bool control = (bi->Attributes & GR_BATCH_ATTR_CONTROL) != 0;
    bool batch_log_append = (bi->Attributes & GR_BATCH_ATTR_LOG_APPEND_TIME) != 0;
    bool check_ts = !cfg->log_append_time && cfg->max_diff_ms != INT64_MAX;
    bool ts_error = false;
    struct gr_record_stream rs;
    int err = gr_record_stream_open(&rs, batch, bi, cfg->max_inflated, 0);
    struct gr_batch_rec_view r;
    int64_t prev = -1;
    while (err == GR_BATCH_OK && gr_record_stream_next(&rs, &r, GR_RECORD_SKIP_DATA) == 1) {
        int32_t i = rs.index - 1;
        /* offsets: a client's that are not 0..n-1 are reassigned by rebuilding the batch
         * (Kafka's inPlaceAssignment = false); any other batch's rise within lastOffsetDelta */
        if (cfg->client) {
            if (r.OffsetDelta != i) res->rebuild = true;
        } else if (r.OffsetDelta <= prev || r.OffsetDelta > bi->LastOffsetDelta) {
            err = GR_BATCH_ERECORDS;
            break;
        }
        prev = r.OffsetDelta;
        if (r.Timestamp > res->max_timestamp) res->max_timestamp = r.Timestamp;
        /* Kafka's validateRecord: the key first, then the timestamp */
        if (cfg->compacted && !control && r.KeyLength < 0) {
            record_error(res, i, "Compacted topic cannot accept a record without a key");
        } else if (check_ts && r.Timestamp != -1 &&
                   (r.Timestamp > cfg->now_ms ? (uint64_t)r.Timestamp - (uint64_t)cfg->now_ms
                                              : (uint64_t)cfg->now_ms - (uint64_t)r.Timestamp) > (uint64_t)cfg->max_diff_ms) {
            record_error(res, i, "Timestamp is out of range (message.timestamp.difference.max.ms)");
            ts_error = true;
        } else if (batch_log_append) {
            record_error(res, i, "A producer may not set the LogAppendTime timestamp type");
            ts_error = true;
        }
    }
    if (err == GR_BATCH_OK) err = rs.err;
    res->records = rs.index > bi->RecordCount ? bi->RecordCount : rs.index;
    gr_record_stream_close(&rs);
    if (err != GR_BATCH_OK) {
        res->error = gr_batch_err_kerr(err);
        res->message = gr_batch_strerror(err);
        res->record_error_count = res->kept = 0;
    } else if (res->record_error_count > 0) {
        res->error = ts_error ? GR_KERR_INVALID_TIMESTAMP : GR_KERR_INVALID_RECORD;
        res->message = "One or more records have been rejected";
    }
    return res->error;
}
