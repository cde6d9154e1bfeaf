/* __transaction_state record codec: see txn_log.h. */
#include "coordinator/txn_log.h"

#include "coordinator/group_offsets.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "common/be.h"

static const char *const names[] = {"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                                    "CompleteAbort", "Dead", "PrepareEpochFence"};

const char *gr_txn_state_name(int s) { return s >= 0 && s < 8 ? names[s] : "?"; }

bool gr_txn_transition_valid(int from, int to) {
    switch (to) {
    case GR_TXN_EMPTY: return from == GR_TXN_EMPTY || from == GR_TXN_COMPLETE_COMMIT || from == GR_TXN_COMPLETE_ABORT;
    case GR_TXN_ONGOING:
        return from == GR_TXN_ONGOING || from == GR_TXN_EMPTY || from == GR_TXN_COMPLETE_COMMIT ||
               from == GR_TXN_COMPLETE_ABORT;
    case GR_TXN_PREPARE_COMMIT: return from == GR_TXN_ONGOING;
    case GR_TXN_PREPARE_ABORT: return from == GR_TXN_ONGOING || from == GR_TXN_PREPARE_EPOCH_FENCE;
    case GR_TXN_COMPLETE_COMMIT: return from == GR_TXN_PREPARE_COMMIT;
    case GR_TXN_COMPLETE_ABORT: return from == GR_TXN_PREPARE_ABORT;
    case GR_TXN_DEAD: return from == GR_TXN_EMPTY || from == GR_TXN_COMPLETE_COMMIT || from == GR_TXN_COMPLETE_ABORT;
    case GR_TXN_PREPARE_EPOCH_FENCE: return from == GR_TXN_ONGOING;
    default: return false;
    }
}

int32_t gr_txn_partition_for(const char *id, int32_t n) {
    int32_t h = gr_java_string_hash(id); /* over UTF-16 code units, as Java */
    if (h == INT32_MIN) h = 0;            /* Kafka's Utils.abs */
    if (h < 0) h = -h;
    return n > 0 ? h % n : 0;
}

struct wb {
    uint8_t *p;
    size_t len, cap;
};
static void put(struct wb *w, const void *src, size_t n) {
    if (w->len + n > w->cap) {
        w->cap = (w->len + n) * 2 + 64;
        w->p = gr_realloc(w->p, w->cap);
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}
static void put16(struct wb *w, int16_t v) { uint8_t b[2]; gr_put_be16(b, (uint16_t)v); put(w, b, 2); }
static void put32(struct wb *w, int32_t v) { uint8_t b[4]; gr_put_be32(b, (uint32_t)v); put(w, b, 4); }
static void put64(struct wb *w, int64_t v) { uint8_t b[8]; gr_put_be64(b, (uint64_t)v); put(w, b, 8); }
static void putstr(struct wb *w, const char *s) {
    size_t n = strlen(s);
    put16(w, (int16_t)n);
    put(w, s, n);
}

uint8_t *gr_txn_log_key(const char *id, size_t *len) {
    struct wb w = {0};
    put16(&w, 0);
    putstr(&w, id);
    *len = w.len;
    return w.p;
}

uint8_t *gr_txn_log_value(const struct gr_txn_record *r, size_t *len) {
    struct wb w = {0};
    put16(&w, 0);
    put64(&w, r->producer_id);
    put16(&w, r->producer_epoch);
    put32(&w, r->timeout_ms);
    uint8_t st = (uint8_t)r->state;
    put(&w, &st, 1);
    if (r->state == GR_TXN_EMPTY) {
        put32(&w, -1);
    } else {
        /* group partitions by topic, in first-seen order */
        int ntopics = 0;
        for (int i = 0; i < r->n_parts; i++) {
            bool seen = false;
            for (int j = 0; j < i && !seen; j++) seen = strcmp(r->parts[j].topic, r->parts[i].topic) == 0;
            if (!seen) ntopics++;
        }
        put32(&w, ntopics);
        for (int i = 0; i < r->n_parts; i++) {
            bool seen = false;
            for (int j = 0; j < i && !seen; j++) seen = strcmp(r->parts[j].topic, r->parts[i].topic) == 0;
            if (seen) continue;
            putstr(&w, r->parts[i].topic);
            int cnt = 0;
            for (int j = i; j < r->n_parts; j++) cnt += strcmp(r->parts[j].topic, r->parts[i].topic) == 0;
            put32(&w, cnt);
            for (int j = i; j < r->n_parts; j++)
                if (strcmp(r->parts[j].topic, r->parts[i].topic) == 0) put32(&w, r->parts[j].partition);
        }
    }
    put64(&w, r->update_ts);
    put64(&w, r->start_ts);
    *len = w.len;
    return w.p;
}

struct rb {
    const uint8_t *p;
    size_t len, pos;
    bool bad;
};
static const uint8_t *take(struct rb *r, size_t n) {
    if (r->bad || r->len - r->pos < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *q = r->p + r->pos;
    r->pos += n;
    return q;
}
static int16_t get16(struct rb *r) { const uint8_t *q = take(r, 2); return q ? (int16_t)gr_be16(q) : 0; }
static int32_t get32(struct rb *r) { const uint8_t *q = take(r, 4); return q ? (int32_t)gr_be32(q) : 0; }
static int64_t get64(struct rb *r) { const uint8_t *q = take(r, 8); return q ? (int64_t)gr_be64(q) : 0; }
static char *getstr(struct rb *r) {
    int16_t n = get16(r);
    if (n < 0) { r->bad = true; return NULL; }
    const uint8_t *q = take(r, (size_t)n);
    if (!q) return NULL;
    char *s = gr_malloc((size_t)n + 1);
    memcpy(s, q, (size_t)n);
    s[n] = 0;
    return s;
}

void gr_txn_record_free(struct gr_txn_record *r) {
    free(r->transactional_id);
    for (int i = 0; i < r->n_parts; i++) free(r->parts[i].topic);
    free(r->parts);
    memset(r, 0, sizeof *r);
}

int gr_txn_log_decode(const uint8_t *key, size_t klen, const uint8_t *value, size_t vlen, struct gr_txn_record *out) {
    memset(out, 0, sizeof *out);
    struct rb k = {key, klen, 0, false};
    if (!key || get16(&k) != 0) return -EINVAL;
    out->transactional_id = getstr(&k);
    if (k.bad) goto bad;
    if (!value) {
        out->tombstone = true;
        return 0;
    }
    struct rb v = {value, vlen, 0, false};
    if (get16(&v) != 0) goto bad;
    out->producer_id = get64(&v);
    out->producer_epoch = get16(&v);
    out->timeout_ms = get32(&v);
    const uint8_t *st = take(&v, 1);
    out->state = st ? (int8_t)st[0] : -1;
    if (out->state < 0 || out->state > GR_TXN_DEAD) goto bad;
    int32_t nt = get32(&v);
    for (int32_t t = 0; t < nt && !v.bad; t++) {
        char *topic = getstr(&v);
        int32_t np = get32(&v);
        if (v.bad || np < 0 || (size_t)np > v.len / 4) { free(topic); goto bad; }
        out->parts = gr_realloc(out->parts, (size_t)(out->n_parts + np + 1) * sizeof *out->parts);
        for (int32_t i = 0; i < np; i++) {
            out->parts[out->n_parts].topic = gr_strdup(topic);
            out->parts[out->n_parts].partition = get32(&v);
            out->n_parts++;
        }
        free(topic);
    }
    out->update_ts = get64(&v);
    out->start_ts = get64(&v);
    if (v.bad) goto bad;
    return 0;
bad:
    gr_txn_record_free(out);
    return -EINVAL;
}
