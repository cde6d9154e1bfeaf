/* libFuzzer target: stateful request sequences against ONE real broker running in this process.
 *
 * The broker is gr_server (broker/server.h) exactly as gregord starts it -- log manager on a
 * scratch dir, replica manager, controller, group and transaction coordinators, SASL/SCRAM
 * credential cache, the real network server on 127.0.0.1 port 0 -- with the simulation's
 * ZooKeeper model behind the backend interface (fuzz_locked_zkmodel.h, gr_server_set_zk_open)
 * instead of a ZooKeeper server. Requests go through the real network server over loopback, so
 * every completion path (delayed produce/fetch/join, purgatory, throttling, closing) is real.
 *
 * Input = a sequence of steps (at most MAX_STEPS). Each step's first byte picks a request
 * template (step_fns[]); the template reads its version and fields from the following bytes
 * (an exhausted input reads zeros). Templates: ApiVersions, Metadata, CreateTopics, Produce
 * v2/v3/v8/v11 (record batch v2 or legacy magic 0/1 message set; codec none/gzip/snappy/lz4/zstd;
 * records, sizes, producer fields and "bombs" of zeros from the input), Fetch v2/v4/v11/v12/v13/v17
 * (incl. read_committed, fetch sessions, v12's LastFetchedEpoch, v13+ topic ids -- the fixture
 * topic's, zero or input bytes -- in Topics and ForgottenTopicsData, v15+'s ReplicaState), ListOffsets (v9's special
 * timestamps too), FindCoordinator, the group APIs (JoinGroup,
 * SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch), the transaction APIs
 * (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit), SASL
 * (SaslHandshake v0/v1 then SaslAuthenticate or raw v0 tokens: a correct SCRAM exchange, or one
 * whose messages are mutated by the input), DescribeConfigs, IncrementalAlterConfigs, DescribeCluster, CreateDelegationToken v2/v3,
 * AlterPartition v0-v3 and a raw
 * frame of input bytes. A second byte of each step may mutate the encoded frame (a byte flipped
 * or the frame truncated). Responses are read; member ids, generations, producer ids/epochs and
 * the SASL state they carry feed later steps.
 *
 * Oracles: ASan/UBSan/LSan (the broker is shut down and freed at exit), a response to an
 * unmutated request must arrive within HANG_MS and decode with our codec, and the broker must not
 * close a plaintext connection on an unmutated well-formed request.
 *
 * State persists across steps and inputs; the broker (and its ZooKeeper model and log dir) is
 * rebuilt every FUZZ_BROKER_RESET_EVERY inputs (default 300; 1 = a fresh broker per input, for
 * reproducing a crash) or when RSS passes 700 MB. FUZZ_BROKER_LOG=1 shows the broker's log,
 * FUZZ_BROKER_TRACE=1 one line per request sent. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/apis.h"
#include "broker/server.h"
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "fuzz_locked_zkmodel.h"
#include "fuzz_scratch.h"
#include "protocol/codec.h"
#include "security/scram.h"
#include "storage/batch.h"
#include "storage/compression.h"
#include "storage/legacy_records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_STEPS 24
#define HANG_MS 8000       /* an unmutated request unanswered this long: the broker hangs */
#define MUTATED_WAIT_MS 300 /* a mutated one may legitimately get no answer */
#define REQUEST_MAX_BYTES 4194304 /* socket.request.max.bytes below */
#define USER "fuzz"
#define PASSWORD "fuzz-secret"

/* ---- input ---- */

struct in {
    const uint8_t *p;
    size_t n;
};
static uint8_t u8(struct in *in) {
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}
static uint16_t u16(struct in *in) { return (uint16_t)(u8(in) << 8 | u8(in)); }
static uint32_t u32(struct in *in) { return (uint32_t)u16(in) << 16 | u16(in); }
/* Up to max bytes of the input (fewer when it runs out). */
static const uint8_t *take(struct in *in, size_t want, size_t *got) {
    *got = want < in->n ? want : in->n;
    const uint8_t *p = in->p;
    in->p += *got;
    in->n -= *got;
    return p;
}

/* ---- the broker ---- */

static struct {
    struct lzk *zk;
    struct gr_config cfg;
    struct gr_server *srv;
    char dir[128];
    int gen;
    int port[2];  /* PLAINTEXT, SASL_PLAINTEXT */
    int fd[2];
    bool unanswered[2]; /* an acks=0 produce went on it: the broker may have closed it since */
    int sasl;     /* connection 1: 0 nothing yet, 1 handshake v1 done, 2 handshake v0 done (raw tokens), 3 authenticated */
    int sasl_mech;
    struct gr_scram_client *scram;
    uint8_t server_first[4096]; /* the server-first message of the exchange under way */
    size_t server_first_len;    /* 0: client-first is next */
    int32_t corr;
    long inputs;
    bool trace; /* FUZZ_BROKER_TRACE: one line per request on stderr */
    /* learned from responses */
    char member[2][128];
    int32_t generation[2];
    int64_t pid[3];  /* tx0, tx1, idempotent (null transactional id) */
    int16_t epoch[3];
    int32_t seq[3];
} G;

static const char *const topics[] = {"fz0", "fz1", "fzc", "fz2"};
static const char *const groups[] = {"g0", "g1"};
static const char *const txn_ids[] = {"tx0", "tx1"};

static void set(const char *k, const char *v) {
    char err[512];
    if (gr_config_set(&G.cfg, k, v, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_broker_session: %s\n", err);
        abort();
    }
}

static void conn_close(int i) {
    if (G.fd[i] >= 0) {
        struct linger lg = {.l_onoff = 1, .l_linger = 0}; /* RST: no TIME_WAIT */
        setsockopt(G.fd[i], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        close(G.fd[i]);
    }
    G.fd[i] = -1;
    G.unanswered[i] = false;
    if (i == 1) {
        G.sasl = 0;
        gr_scram_client_free(G.scram);
        G.scram = NULL;
        G.server_first_len = 0;
    }
}

static int conn(int i) {
    if (G.fd[i] >= 0) return G.fd[i];
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) abort();
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)G.port[i])};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        fprintf(stderr, "fuzz_broker_session: connect to the broker: %s\n", strerror(errno));
        abort();
    }
    return G.fd[i] = fd;
}

static bool send_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Reads one size-prefixed frame within wait_ms into *out (malloc'd, without the prefix).
 * 1: a frame; 0: timeout; -1: closed or error. */
static int recv_frame(int fd, int wait_ms, uint8_t **out, size_t *len) {
    int64_t end = gr_mono_ms() + wait_ms;
    uint8_t hdr[4];
    size_t got = 0, need = 4;
    uint8_t *buf = NULL;
    for (;;) {
        if (got == need) {
            if (!buf) {
                int32_t n = (int32_t)((uint32_t)hdr[0] << 24 | hdr[1] << 16 | hdr[2] << 8 | hdr[3]);
                if (n < 0 || n > (64 << 20)) return -1;
                buf = gr_malloc((size_t)n + 1);
                need = (size_t)n;
                got = 0;
                if (need) continue;
            }
            *out = buf;
            *len = need;
            return 1;
        }
        int left = (int)(end - gr_mono_ms());
        if (left <= 0) {
            free(buf);
            return 0;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, left);
        if (r < 0 && errno != EINTR) break;
        if (r <= 0) continue;
        ssize_t k = recv(fd, buf ? buf + got : hdr + got, need - got, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    free(buf);
    return -1;
}

/* Sends the frame p[0..n) on connection c and collects its answer into *f (malloc'd, without
 * the size prefix). strict (an unmutated request that must be answered): the answer is the
 * frame with correlation id `want` (earlier answers are skipped); none within HANG_MS is a hang
 * and aborts. Not strict (mutated, raw, acks=0): whatever comes back first is the answer, if
 * anything; on a plaintext or authenticated connection an ApiVersions v0 "barrier" follows the
 * frame, so its answer says at once that nothing else is coming (the broker answers one
 * connection's requests in order), else MUTATED_WAIT_MS bounds the wait. Returns 1 answered,
 * 0 no answer, -1 the connection is closed (by the broker, or by us after a timeout). */
static int exchange(int c, const uint8_t *p, size_t n, bool strict, int32_t want, uint8_t **f, size_t *fl) {
    *f = NULL;
    int fd = conn(c);
    if (!send_all(fd, p, n)) {
        conn_close(c);
        return -1;
    }
    int32_t bar = -1;
    if (!strict && (c == 0 || G.sasl == 3)) {
        struct gr_wbuf w;
        gr_wbuf_init(&w);
        bar = ++G.corr;
        gr_proto_encode_request(18, 0, bar, "fuzz", NULL, &w);
        bool ok = send_all(fd, w.p, w.len);
        gr_wbuf_free(&w);
        if (!ok) {
            conn_close(c);
            return -1;
        }
    }
    for (;;) {
        uint8_t *fr = NULL;
        size_t len = 0;
        int r = recv_frame(fd, strict ? HANG_MS : MUTATED_WAIT_MS, &fr, &len);
        if (r == 0 && strict) {
            fprintf(stderr, "fuzz_broker_session: no answer in %d ms\n", HANG_MS);
            abort(); /* the broker hangs on this request */
        }
        if (r <= 0) {
            conn_close(c);
            return *f ? 1 : -1;
        }
        int32_t rcorr = len >= 4 ? (int32_t)((uint32_t)fr[0] << 24 | fr[1] << 16 | fr[2] << 8 | fr[3]) : -1;
        if (strict ? rcorr == want : rcorr != bar && !*f) {
            *f = fr;
            *fl = len;
            if (strict || bar < 0) return 1;
            continue; /* then the barrier's answer */
        }
        free(fr);
        if (!strict && rcorr == bar) return *f ? 1 : 0;
    }
}

/* One request on connection c. mutate (from the input): 0 none; else a byte of the frame
 * (after the size) is xor'ed or the frame is truncated. *resp (may be NULL) gets the decoded
 * response body in a. Returns 1 answered, 0 no answer (none expected, timeout, or closed). */
static int call(int c, struct in *in, int16_t api, int16_t ver, const void *body, bool expect, struct gr_arena *a,
                void **resp) {
    if (resp) *resp = NULL;
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    int32_t corr = ++G.corr;
    if (gr_proto_encode_request(api, ver, corr, "fuzz", body, &w) != 0 || w.err) {
        fprintf(stderr, "fuzz_broker_session: cannot encode api %d v%d\n", api, ver);
        abort(); /* a template bug */
    }
    uint8_t m = u8(in);
    bool mutated = false;
    if ((m & 15) == 1 && w.len > 4) { /* flip a byte */
        w.p[4 + u16(in) % (w.len - 4)] ^= (uint8_t)(u8(in) | 1);
        mutated = true;
    } else if ((m & 15) == 2 && w.len > 5) { /* truncate */
        size_t nl = 4 + u16(in) % (w.len - 4);
        w.len = nl;
        uint32_t n = (uint32_t)(nl - 4);
        w.p[0] = (uint8_t)(n >> 24), w.p[1] = (uint8_t)(n >> 16), w.p[2] = (uint8_t)(n >> 8), w.p[3] = (uint8_t)n;
        mutated = true;
    }
    int64_t t0 = gr_mono_us();
    bool strict = expect && !mutated;
    bool tainted = G.unanswered[c];
    if (!expect && !mutated && !(c == 0 || G.sasl == 3)) { /* no barrier possible: send and go on */
        if (!send_all(conn(c), w.p, w.len)) conn_close(c);
        else G.unanswered[c] = true;
        gr_wbuf_free(&w);
        return 0;
    }
    uint8_t *f = NULL;
    size_t fl = 0;
    int r = exchange(c, w.p, w.len, strict, corr, &f, &fl);
    int rc = r == 1;
    /* an unmutated request on a plaintext or authenticated connection must not be refused by
     * closing (a SASL connection before authentication may be; an acks=0 produce sent before on
     * the connection may have made the broker close it; a frame above socket.request.max.bytes
     * is refused by closing, as Kafka does) */
    if (r < 0 && strict && !tainted && (c == 0 || G.sasl == 3) && w.len - 4 <= REQUEST_MAX_BYTES) {
        fprintf(stderr, "fuzz_broker_session: the broker closed the connection on api %d v%d\n", api, ver);
        abort();
    }
    if (r == 1) {
        if (strict) {
            struct gr_arena tmp;
            gr_arena_init(&tmp);
            void *body_out = NULL;
            int32_t cid;
            int d = gr_proto_decode_response(api, ver, f, fl, a ? a : &tmp, &cid, &body_out);
            if (d != 0) {
                fprintf(stderr, "fuzz_broker_session: the answer to api %d v%d does not decode: %s\n", api, ver,
                        gr_proto_strerror(d));
                abort();
            }
            if (resp && a) {
                /* the body points into f for bytes fields: keep f alive in the arena */
                uint8_t *keep = gr_arena_alloc(a, fl ? fl : 1);
                memcpy(keep, f, fl);
                free(f);
                f = NULL;
                d = gr_proto_decode_response(api, ver, keep, fl, a, &cid, resp);
            }
            gr_arena_free(&tmp);
        }
    }
    free(f);
    if (G.trace)
        fprintf(stderr, "step: conn %d api %d v%d%s -> %s in %lld us\n", c, api, ver, mutated ? " (mutated)" : "",
                rc ? "answered" : G.fd[c] < 0 ? "closed" : "no answer", (long long)(gr_mono_us() - t0));
    gr_wbuf_free(&w);
    return rc;
}

/* ---- field helpers ---- */

static char *name_of(struct in *in, struct gr_arena *a, const char *const *set, int n) {
    uint8_t v = u8(in);
    if (v < 248) return (char *)set[v % n];
    if (v == 255) return NULL;
    size_t got;
    const uint8_t *p = take(in, u8(in) % 12, &got);
    char *s = gr_arena_alloc(a, got + 1);
    memcpy(s, p, got);
    for (size_t i = 0; i < got; i++)
        if (!s[i]) s[i] = 'x';
    return s;
}
static char *topic_of(struct in *in, struct gr_arena *a) { return name_of(in, a, topics, 4); }

static int16_t ver_of(struct in *in, int16_t api, const int16_t *pref, int npref) {
    uint8_t v = u8(in);
    if (v < 224) return pref[v % npref];
    /* a version the broker serves (the codec's tables know Kafka 3.9's, more than that) */
    int16_t lo = 0, hi = 0;
    gr_apis_lookup(api, &lo, &hi);
    return (int16_t)(lo + v % (hi - lo + 1));
}

static void *new_(struct gr_arena *a, const struct gr_struct_desc *d) { return gr_proto_new(a, d); }
#define NEWA(a, T, n) ((struct T *)gr_arena_alloc((a), sizeof(struct T) * (size_t)((n) > 0 ? (n) : 1)))


/* ---- record sets ---- */

static uint8_t *record_values(struct in *in, struct gr_arena *a, int32_t *len) {
    uint8_t k = u8(in);
    if (k == 255) { /* a bomb: zeros that compress to nothing */
        *len = (int32_t)((u16(in) % 1024 + 1) * 1024);
        return gr_arena_alloc(a, (size_t)*len);
    }
    if (k == 254) {
        *len = -1;
        return NULL;
    }
    size_t got;
    const uint8_t *p = take(in, k % 48, &got);
    uint8_t *v = gr_arena_alloc(a, got + 1);
    memcpy(v, p, got);
    *len = (int32_t)got;
    return v;
}

/* A v2 batch: n records from the input, compressed with codec, producer fields pid/epoch/seq. */
static uint8_t *v2_batch(struct in *in, struct gr_arena *a, int codec, int64_t pid, int16_t epoch, int32_t seq,
                         bool txn, size_t *len) {
    int n = u8(in) % 6 + 1;
    struct gr_batch_rec *recs = gr_arena_alloc(a, sizeof *recs * (size_t)n);
    int64_t now = gr_wall_ms();
    for (int i = 0; i < n; i++) {
        recs[i].key = record_values(in, a, &recs[i].key_len);
        recs[i].value = record_values(in, a, &recs[i].value_len);
        recs[i].timestamp = u8(in) == 7 ? (int64_t)u32(in) : now;
        if (u8(in) == 3) {
            struct gr_batch_rec_header *h = gr_arena_alloc(a, sizeof *h);
            h->key = "h";
            h->key_len = 1;
            h->value = record_values(in, a, &h->value_len);
            recs[i].headers = h;
            recs[i].header_count = 1;
        }
    }
    struct gr_batch_build_opts o = GR_BATCH_BUILD_OPTS_INIT;
    o.producer_id = pid;
    o.producer_epoch = epoch;
    o.base_sequence = seq;
    uint8_t flags = u8(in);
    if (txn) o.attributes |= 0x10;
    if (flags == 0x20) o.attributes |= 0x20;          /* a control batch from a client */
    if ((flags & 0x0f) == 0x08) o.attributes |= 0x08; /* LogAppendTime from a client */
    size_t bl;
    uint8_t *b = gr_batch_build(recs, n, &o, &bl);
    if (codec && bl > 61) {
        uint8_t *z = NULL;
        size_t zl = 0;
        if (gr_compress(codec, b + 61, bl - 61, &z, &zl) == 0) {
            uint8_t *nb = gr_malloc(61 + zl);
            memcpy(nb, b, 61);
            memcpy(nb + 61, z, zl);
            free(b);
            free(z);
            b = nb;
            bl = 61 + zl;
            uint32_t L = (uint32_t)(bl - 12);
            b[8] = (uint8_t)(L >> 24), b[9] = (uint8_t)(L >> 16), b[10] = (uint8_t)(L >> 8), b[11] = (uint8_t)L;
            b[22] = (uint8_t)((b[22] & ~7) | codec);
            gr_batch_update_crc(b, bl);
        } else {
            free(z);
        }
    }
    uint8_t *out = gr_arena_alloc(a, bl);
    memcpy(out, b, bl);
    free(b);
    *len = bl;
    return out;
}

static void put32(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v; }
static void put64(uint8_t *p, uint64_t v) { put32(p, (uint32_t)(v >> 32)), put32(p + 4, (uint32_t)v); }

/* Appends one legacy message (offset, size, crc, magic, attributes, [timestamp], key, value). */
static void legacy_msg(struct gr_wbuf *w, int magic, int attr, int64_t off, int64_t ts, const uint8_t *k, int32_t kl,
                       const uint8_t *v, int32_t vl) {
    size_t body = 4 + 1 + 1 + (magic ? 8 : 0) + 4 + (kl > 0 ? (size_t)kl : 0) + 4 + (vl > 0 ? (size_t)vl : 0);
    uint8_t *m = gr_malloc(12 + body);
    put64(m, (uint64_t)off);
    put32(m + 8, (uint32_t)body);
    size_t p = 16;
    m[p++] = (uint8_t)magic;
    m[p++] = (uint8_t)attr;
    if (magic) put64(m + p, (uint64_t)ts), p += 8;
    put32(m + p, (uint32_t)kl), p += 4;
    if (kl > 0) memcpy(m + p, k, (size_t)kl), p += (size_t)kl;
    put32(m + p, (uint32_t)vl), p += 4;
    if (vl > 0) memcpy(m + p, v, (size_t)vl), p += (size_t)vl;
    put32(m + 12, gr_crc32_ieee(m + 16, body - 4));
    gr_wbuf_append(w, m, 12 + body);
    free(m);
}

/* A legacy message set of magic 0/1, wrapped in one compressed message when codec is 1-3. */
static uint8_t *legacy_set(struct in *in, struct gr_arena *a, int magic, int codec, size_t *len) {
    int n = u8(in) % 5 + 1;
    struct gr_wbuf inner;
    gr_wbuf_init(&inner);
    int64_t ts = gr_wall_ms();
    for (int i = 0; i < n; i++) {
        int32_t kl, vl;
        uint8_t *k = record_values(in, a, &kl);
        uint8_t *v = record_values(in, a, &vl);
        legacy_msg(&inner, magic, 0, codec && magic ? i : (u8(in) == 9 ? (int64_t)u32(in) : i), ts, k, kl, v, vl);
    }
    struct gr_wbuf w;
    gr_wbuf_init(&w);
    if (codec >= 1 && codec <= 3) {
        uint8_t *z = NULL;
        size_t zl = 0;
        if (gr_compress(codec, inner.p, inner.len, &z, &zl) == 0)
            legacy_msg(&w, magic, codec, n - 1, ts, NULL, -1, z, (int32_t)zl);
        free(z);
    } else {
        gr_wbuf_append(&w, inner.p, inner.len);
    }
    gr_wbuf_free(&inner);
    uint8_t *out = gr_arena_alloc(a, w.len + 1);
    memcpy(out, w.p, w.len);
    *len = w.len;
    gr_wbuf_free(&w);
    return out;
}

/* ---- step templates ---- */

static void s_api_versions(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {0, 1, 3, 4};
    int16_t ver = ver_of(in, 18, v, 4);
    struct ApiVersionsRequest *r = new_(a, &gr_desc_ApiVersionsRequest);
    r->ClientSoftwareName = "fuzz";
    r->ClientSoftwareVersion = "1.0";
    call(c, in, 18, ver, r, true, a, NULL);
}

/* A topic id: zero, the first fixture topic's (as the broker answered it), or bytes of the input. */
static uint8_t G_fz0_id[16];
static void topic_id_of(struct in *in, uint8_t out[16]) {
    uint8_t k = u8(in) % 3;
    memset(out, 0, 16);
    if (k == 1) memcpy(out, G_fz0_id, 16);
    else if (k == 2)
        for (int i = 0; i < 16; i++) out[i] = u8(in);
}

static void s_metadata(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {1, 4, 8, 9, 10, 12, 12};
    int16_t ver = ver_of(in, 3, v, 7);
    struct MetadataRequest *r = new_(a, &gr_desc_MetadataRequest);
    uint8_t k = u8(in) % 4;
    if (k == 0) {
        r->TopicsCount = -1; /* all */
    } else {
        r->TopicsCount = k;
        r->Topics = NEWA(a, MetadataRequest_MetadataRequestTopic, k);
        for (int i = 0; i < k; i++) {
            uint8_t how = ver >= 10 ? u8(in) % 4 : 0; /* v10+: by name, by id, both, neither */
            r->Topics[i].Name = how == 1 || how == 3 ? NULL : topic_of(in, a);
            memset(r->Topics[i].TopicId, 0, 16);
            if (how == 1 || how == 2) topic_id_of(in, r->Topics[i].TopicId);
        }
    }
    r->AllowAutoTopicCreation = u8(in) & 1;
    r->IncludeClusterAuthorizedOperations = u8(in) & 1;
    r->IncludeTopicAuthorizedOperations = u8(in) & 1;
    call(c, in, 3, ver, r, true, a, NULL);
}

static const char *const topic_keys[] = {"cleanup.policy", "compression.type", "max.message.bytes",
                                         "message.downconversion.enable", "message.format.version",
                                         "message.timestamp.type", "retention.ms", "segment.bytes",
                                         "min.insync.replicas", "retention.bytes", "unknown.key"};
static const char *const topic_vals[] = {"compact", "delete", "compact,delete", "gzip", "snappy", "lz4", "zstd",
                                         "producer", "uncompressed", "100", "1000000", "true", "false", "0.10.0",
                                         "2.7", "0.8.0", "CreateTime", "LogAppendTime", "1", "-1", "1024",
                                         "1048576", "2", ""};

static char *value_of(struct in *in, struct gr_arena *a) {
    return name_of(in, a, topic_vals, (int)(sizeof topic_vals / sizeof *topic_vals));
}

static void s_create_topics(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {0, 2, 4, 5, 7};
    int16_t ver = ver_of(in, 19, v, 5);
    struct CreateTopicsRequest *r = new_(a, &gr_desc_CreateTopicsRequest);
    r->TopicsCount = 1;
    r->Topics = NEWA(a, CreateTopicsRequest_CreatableTopic, 1);
    struct CreateTopicsRequest_CreatableTopic *t = r->Topics;
    t->Name = topic_of(in, a);
    t->NumPartitions = (int32_t)(u8(in) % 5) - 1;
    t->ReplicationFactor = (int16_t)((int)(u8(in) % 4) - 1);
    uint8_t nc = u8(in) % 3;
    t->ConfigsCount = nc;
    t->Configs = NEWA(a, CreateTopicsRequest_CreatableTopicConfig, nc);
    for (int i = 0; i < nc; i++) {
        t->Configs[i].Name = name_of(in, a, topic_keys, (int)(sizeof topic_keys / sizeof *topic_keys));
        t->Configs[i].Value = value_of(in, a);
    }
    r->TimeoutMs = u8(in) & 1 ? 2000 : 0;
    r->ValidateOnly = u8(in) == 1;
    call(c, in, 19, ver, r, true, a, NULL);
}

static void s_produce(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {2, 3, 8, 11};
    int16_t ver = ver_of(in, 0, v, 4);
    struct ProduceRequest *r = new_(a, &gr_desc_ProduceRequest);
    uint8_t who = u8(in) % 4; /* 0, 1: transactional tx0/tx1; 2: idempotent; 3: plain */
    uint8_t acks = u8(in) % 3;
    r->Acks = acks == 2 ? -1 : acks;
    r->TimeoutMs = 1000;
    r->TransactionalId = who < 2 ? (char *)txn_ids[who] : NULL;
    r->TopicDataCount = 1;
    r->TopicData = NEWA(a, ProduceRequest_TopicProduceData, 1);
    r->TopicData[0].Name = topic_of(in, a);
    r->TopicData[0].PartitionDataCount = 1;
    r->TopicData[0].PartitionData = NEWA(a, ProduceRequest_PartitionProduceData, 1);
    r->TopicData[0].PartitionData[0].Index = (int32_t)(u8(in) % 3);
    uint8_t fmt = u8(in);
    int magic = fmt % 4 == 3 ? 2 : (ver <= 2 ? (int)(fmt % 3) : (fmt % 8 == 0 ? (int)(fmt / 8 % 2) : 2));
    int codec = u8(in) % 5;
    size_t len;
    uint8_t *recs;
    if (magic == 2) {
        int64_t pid = who < 3 ? G.pid[who] : -1;
        int16_t ep = who < 3 ? G.epoch[who] : -1;
        int32_t seq = who < 3 ? G.seq[who] : -1;
        if (u8(in) == 5) seq = (int32_t)u32(in);
        recs = v2_batch(in, a, codec, pid, ep, seq, who < 2, &len);
        if (who < 3 && pid >= 0) G.seq[who] += gr_batch_record_count(recs);
    } else {
        recs = legacy_set(in, a, magic, codec, &len);
    }
    r->TopicData[0].PartitionData[0].Records.p = recs;
    r->TopicData[0].PartitionData[0].Records.len = (int32_t)len;
    call(c, in, 0, ver, r, r->Acks != 0, a, NULL);
}

static void s_fetch(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {2, 4, 11, 12, 13, 17};
    int16_t ver = ver_of(in, 1, v, 6);
    struct FetchRequest *r = new_(a, &gr_desc_FetchRequest);
    uint8_t rid = u8(in);
    r->ReplicaId = rid < 240 ? -1 : (int32_t)(rid % 3) - 1; /* rarely a (spoofed) follower */
    r->ReplicaState.ReplicaId = r->ReplicaId; /* v15+ */
    r->MaxWaitMs = u8(in) % 4;
    r->MinBytes = u8(in) % 3;
    r->MaxBytes = (int32_t)(u16(in) * 64 + 1);
    r->IsolationLevel = (int8_t)(u8(in) & 1);
    uint8_t sess = u8(in);
    r->SessionId = sess < 200 ? 0 : (int32_t)(sess % 4);
    r->SessionEpoch = sess < 200 ? -1 : (int32_t)(u8(in) % 4) - 1;
    int nt = u8(in) % 2 + 1;
    r->TopicsCount = nt;
    r->Topics = NEWA(a, FetchRequest_FetchTopic, nt);
    for (int i = 0; i < nt; i++) {
        r->Topics[i].Topic = topic_of(in, a);
        if (ver >= 13) topic_id_of(in, r->Topics[i].TopicId);
        r->Topics[i].PartitionsCount = 1;
        struct FetchRequest_FetchPartition *p = r->Topics[i].Partitions = NEWA(a, FetchRequest_FetchPartition, 1);
        p->Partition = (int32_t)(u8(in) % 3);
        p->CurrentLeaderEpoch = -1;
        uint8_t le = u8(in); /* v12+: mostly none, else a small epoch (diverging or not) */
        p->LastFetchedEpoch = le < 192 ? -1 : (int32_t)(le % 8);
        p->LogStartOffset = -1;
        uint8_t o = u8(in);
        p->FetchOffset = o < 250 ? (int64_t)(o % 64) : o == 250 ? -1 : (int64_t)u32(in);
        p->PartitionMaxBytes = (int32_t)(u16(in) * 32 + 1);
    }
    if (ver >= 7 && u8(in) >= 224) { /* forget a partition of the first topic */
        r->ForgottenTopicsDataCount = 1;
        r->ForgottenTopicsData = NEWA(a, FetchRequest_ForgottenTopic, 1);
        r->ForgottenTopicsData[0].Topic = r->Topics[0].Topic;
        memcpy(r->ForgottenTopicsData[0].TopicId, r->Topics[0].TopicId, 16);
        r->ForgottenTopicsData[0].PartitionsCount = 1;
        r->ForgottenTopicsData[0].Partitions = gr_arena_alloc(a, sizeof(int32_t));
        r->ForgottenTopicsData[0].Partitions[0] = (int32_t)(u8(in) % 3);
    }
    r->RackId = "";
    call(c, in, 1, ver, r, true, a, NULL);
}

static void s_list_offsets(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {1, 2, 5, 9};
    int16_t ver = ver_of(in, 2, v, 4);
    struct ListOffsetsRequest *r = new_(a, &gr_desc_ListOffsetsRequest);
    r->ReplicaId = -1;
    r->IsolationLevel = (int8_t)(u8(in) & 1);
    r->TopicsCount = 1;
    r->Topics = NEWA(a, ListOffsetsRequest_ListOffsetsTopic, 1);
    r->Topics[0].Name = topic_of(in, a);
    r->Topics[0].PartitionsCount = 1;
    r->Topics[0].Partitions = NEWA(a, ListOffsetsRequest_ListOffsetsPartition, 1);
    r->Topics[0].Partitions[0].PartitionIndex = (int32_t)(u8(in) % 3);
    r->Topics[0].Partitions[0].CurrentLeaderEpoch = -1;
    uint8_t t = u8(in) % 8; /* -1 -2 0, a time, -3 MAX_TIMESTAMP, -4 EARLIEST_LOCAL, -5 LATEST_TIERED, -6 */
    r->Topics[0].Partitions[0].Timestamp = t == 0 ? -1 : t == 1 ? -2 : t == 2 ? 0 : t == 3 ? (int64_t)u32(in) * 1000 : -(int64_t)t + 1;
    r->Topics[0].Partitions[0].MaxNumOffsets = 1;
    call(c, in, 2, ver, r, true, a, NULL);
}

static void s_find_coordinator(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {0, 2, 3, 4, 6};
    int16_t ver = ver_of(in, 10, v, 5);
    struct FindCoordinatorRequest *r = new_(a, &gr_desc_FindCoordinatorRequest);
    r->KeyType = (int8_t)(u8(in) % 4); /* 2: share groups (v6), 3: unknown */
    r->Key = r->KeyType == 1 ? name_of(in, a, txn_ids, 2) : name_of(in, a, groups, 2);
    if (!r->Key) r->Key = "";
    if (ver >= 4) { /* KIP-699: a batch of keys */
        int nk = u8(in) % 3;
        r->CoordinatorKeysCount = nk;
        r->CoordinatorKeys = gr_arena_alloc(a, sizeof(char *) * (size_t)(nk + 1));
        for (int i = 0; i < nk; i++) {
            r->CoordinatorKeys[i] = r->KeyType == 1 ? name_of(in, a, txn_ids, 2) : name_of(in, a, groups, 2);
            if (!r->CoordinatorKeys[i]) r->CoordinatorKeys[i] = "";
        }
        r->Key = "";
    }
    call(c, in, 10, ver, r, true, a, NULL);
}

static void s_join_group(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {1, 4, 5, 7, 9};
    int16_t ver = ver_of(in, 11, v, 5);
    int g = u8(in) & 1;
    struct JoinGroupRequest *r = new_(a, &gr_desc_JoinGroupRequest);
    r->GroupId = (char *)groups[g];
    r->SessionTimeoutMs = 100 + (int32_t)u8(in); /* members of earlier inputs expire soon */
    r->RebalanceTimeoutMs = u8(in) % 8;          /* a join waits for the others this long */
    uint8_t m = u8(in) % 4;
    r->MemberId = m < 2 ? G.member[g] : m == 2 ? "" : "nobody";
    r->GroupInstanceId = u8(in) == 1 ? "static-0" : NULL;
    r->ProtocolType = u8(in) == 1 ? "other" : "consumer";
    if (ver >= 8) r->Reason = u8(in) & 1 ? "fuzz" : NULL;
    int np = u8(in) % 2 + 1;
    r->ProtocolsCount = np;
    r->Protocols = NEWA(a, JoinGroupRequest_JoinGroupRequestProtocol, np);
    for (int i = 0; i < np; i++) {
        r->Protocols[i].Name = i ? "roundrobin" : "range";
        size_t got;
        r->Protocols[i].Metadata.p = take(in, u8(in) % 32, &got);
        r->Protocols[i].Metadata.len = (int32_t)got;
    }
    void *resp;
    if (call(c, in, 11, ver, r, true, a, &resp) && resp) {
        struct JoinGroupResponse *jr = resp;
        if (jr->MemberId && jr->MemberId[0]) snprintf(G.member[g], sizeof G.member[g], "%s", jr->MemberId);
        if (jr->ErrorCode == 0) G.generation[g] = jr->GenerationId;
    }
}

static void s_sync_group(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {0, 3, 5};
    int16_t ver = ver_of(in, 14, v, 3);
    int g = u8(in) & 1;
    struct SyncGroupRequest *r = new_(a, &gr_desc_SyncGroupRequest);
    r->GroupId = (char *)groups[g];
    r->GenerationId = u8(in) == 1 ? -1 : G.generation[g];
    r->MemberId = G.member[g];
    r->ProtocolType = "consumer";
    r->ProtocolName = "range";
    if (u8(in) & 1) {
        r->AssignmentsCount = 1;
        r->Assignments = NEWA(a, SyncGroupRequest_SyncGroupRequestAssignment, 1);
        r->Assignments[0].MemberId = G.member[g];
        size_t got;
        r->Assignments[0].Assignment.p = take(in, u8(in) % 32, &got);
        r->Assignments[0].Assignment.len = (int32_t)got;
    }
    call(c, in, 14, ver, r, true, a, NULL);
}

static void s_heartbeat(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {0, 3, 4};
    int16_t ver = ver_of(in, 12, v, 3);
    int g = u8(in) & 1;
    struct HeartbeatRequest *r = new_(a, &gr_desc_HeartbeatRequest);
    r->GroupId = (char *)groups[g];
    r->GenerationId = G.generation[g] + (int32_t)(u8(in) == 1);
    r->MemberId = G.member[g];
    call(c, in, 12, ver, r, true, a, NULL);
}

static void s_leave_group(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {0, 3, 5};
    int16_t ver = ver_of(in, 13, v, 3);
    int g = u8(in) & 1;
    struct LeaveGroupRequest *r = new_(a, &gr_desc_LeaveGroupRequest);
    r->GroupId = (char *)groups[g];
    r->MemberId = G.member[g];
    r->MembersCount = 1;
    r->Members = NEWA(a, LeaveGroupRequest_MemberIdentity, 1);
    r->Members[0].MemberId = G.member[g];
    r->Members[0].GroupInstanceId = u8(in) == 1 ? "static-0" : NULL;
    if (ver >= 5) r->Members[0].Reason = u8(in) & 1 ? "fuzz" : NULL;
    call(c, in, 13, ver, r, true, a, NULL);
}

static void s_offset_commit(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {2, 5, 8, 9};
    int16_t ver = ver_of(in, 8, v, 4);
    int g = u8(in) & 1;
    struct OffsetCommitRequest *r = new_(a, &gr_desc_OffsetCommitRequest);
    r->GroupId = (char *)groups[g];
    bool simple = u8(in) & 1;
    r->GenerationIdOrMemberEpoch = simple ? -1 : G.generation[g];
    r->MemberId = simple ? "" : G.member[g];
    r->RetentionTimeMs = -1;
    r->TopicsCount = 1;
    r->Topics = NEWA(a, OffsetCommitRequest_OffsetCommitRequestTopic, 1);
    r->Topics[0].Name = topic_of(in, a);
    r->Topics[0].PartitionsCount = 1;
    r->Topics[0].Partitions = NEWA(a, OffsetCommitRequest_OffsetCommitRequestPartition, 1);
    r->Topics[0].Partitions[0].PartitionIndex = (int32_t)(u8(in) % 3);
    r->Topics[0].Partitions[0].CommittedOffset = (int64_t)(int8_t)u8(in);
    r->Topics[0].Partitions[0].CommittedLeaderEpoch = -1;
    r->Topics[0].Partitions[0].CommitTimestamp = -1;
    size_t got;
    const uint8_t *md = take(in, u8(in) % 16, &got);
    char *s = gr_arena_alloc(a, got + 1);
    for (size_t i = 0; i < got; i++) s[i] = md[i] ? (char)md[i] : 'm';
    r->Topics[0].Partitions[0].CommittedMetadata = s;
    call(c, in, 8, ver, r, true, a, NULL);
}

static void s_offset_fetch(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {1, 5, 7, 8, 9};
    int16_t ver = ver_of(in, 9, v, 5);
    struct OffsetFetchRequest *r = new_(a, &gr_desc_OffsetFetchRequest);
    if (ver >= 8) { /* KIP-709: a batch of groups, each named topics or all (null) */
        int ng = u8(in) % 3;
        r->GroupsCount = ng;
        r->Groups = NEWA(a, OffsetFetchRequest_OffsetFetchRequestGroup, ng);
        for (int g = 0; g < ng; g++) {
            struct OffsetFetchRequest_OffsetFetchRequestGroup *rg = &r->Groups[g];
            rg->GroupId = name_of(in, a, groups, 2);
            if (!rg->GroupId) rg->GroupId = "";
            rg->MemberEpoch = -1;
            if (u8(in) & 1) {
                rg->TopicsCount = -1;
            } else {
                rg->TopicsCount = 1;
                rg->Topics = NEWA(a, OffsetFetchRequest_OffsetFetchRequestTopics, 1);
                rg->Topics[0].Name = topic_of(in, a);
                rg->Topics[0].PartitionIndexesCount = 1;
                rg->Topics[0].PartitionIndexes = gr_arena_alloc(a, sizeof(int32_t));
                rg->Topics[0].PartitionIndexes[0] = (int32_t)(u8(in) % 3);
            }
        }
        r->RequireStable = u8(in) & 1;
        call(c, in, 9, ver, r, true, a, NULL);
        return;
    }
    r->GroupId = name_of(in, a, groups, 2);
    if (!r->GroupId) r->GroupId = "";
    if (ver >= 2 && (u8(in) & 1)) {
        r->TopicsCount = -1;
    } else {
        r->TopicsCount = 1;
        r->Topics = NEWA(a, OffsetFetchRequest_OffsetFetchRequestTopic, 1);
        r->Topics[0].Name = topic_of(in, a);
        r->Topics[0].PartitionIndexesCount = 1;
        r->Topics[0].PartitionIndexes = gr_arena_alloc(a, sizeof(int32_t));
        r->Topics[0].PartitionIndexes[0] = (int32_t)(u8(in) % 3);
    }
    r->RequireStable = u8(in) & 1;
    call(c, in, 9, ver, r, true, a, NULL);
}

static void s_init_producer_id(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {0, 1, 2, 3, 4, 5};
    int16_t ver = ver_of(in, 22, v, 6);
    int who = u8(in) % 3;
    struct InitProducerIdRequest *r = new_(a, &gr_desc_InitProducerIdRequest);
    r->TransactionalId = who < 2 ? (char *)txn_ids[who] : NULL;
    r->TransactionTimeoutMs = 100 + (int32_t)u16(in);
    bool bump = u8(in) & 1;
    r->ProducerId = bump ? G.pid[who] : -1;
    r->ProducerEpoch = bump ? G.epoch[who] : -1;
    void *resp;
    if (call(c, in, 22, ver, r, true, a, &resp) && resp) {
        struct InitProducerIdResponse *ir = resp;
        if (ir->ErrorCode == 0) {
            G.pid[who] = ir->ProducerId;
            G.epoch[who] = ir->ProducerEpoch;
            G.seq[who] = 0;
        }
    }
}

static void s_add_partitions_to_txn(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {0, 2, 3, 4, 5};
    int16_t ver = ver_of(in, 24, v, 5);
    int who = u8(in) & 1;
    struct AddPartitionsToTxnRequest *r = new_(a, &gr_desc_AddPartitionsToTxnRequest);
    if (ver >= 4) { /* KIP-890: a broker's batch of transactions, VerifyOnly or not */
        int nx = u8(in) % 3;
        r->TransactionsCount = nx;
        r->Transactions = NEWA(a, AddPartitionsToTxnRequest_AddPartitionsToTxnTransaction, nx);
        for (int x = 0; x < nx; x++) {
            struct AddPartitionsToTxnRequest_AddPartitionsToTxnTransaction *t = &r->Transactions[x];
            int w = u8(in) & 1;
            t->TransactionalId = (char *)txn_ids[w];
            t->ProducerId = G.pid[w];
            t->ProducerEpoch = (int16_t)(G.epoch[w] + (u8(in) == 1));
            t->VerifyOnly = u8(in) & 1;
            t->TopicsCount = 1;
            t->Topics = NEWA(a, AddPartitionsToTxnRequest_AddPartitionsToTxnTopic, 1);
            t->Topics[0].Name = topic_of(in, a);
            t->Topics[0].PartitionsCount = 1;
            t->Topics[0].Partitions = gr_arena_alloc(a, sizeof(int32_t));
            t->Topics[0].Partitions[0] = (int32_t)(u8(in) % 3);
        }
        call(c, in, 24, ver, r, true, a, NULL);
        return;
    }
    r->V3AndBelowTransactionalId = (char *)txn_ids[who];
    r->V3AndBelowProducerId = G.pid[who];
    r->V3AndBelowProducerEpoch = (int16_t)(G.epoch[who] + (u8(in) == 1));
    int nt = u8(in) % 2 + 1;
    r->V3AndBelowTopicsCount = nt;
    r->V3AndBelowTopics = NEWA(a, AddPartitionsToTxnRequest_AddPartitionsToTxnTopic, nt);
    for (int i = 0; i < nt; i++) {
        r->V3AndBelowTopics[i].Name = topic_of(in, a);
        r->V3AndBelowTopics[i].PartitionsCount = 1;
        r->V3AndBelowTopics[i].Partitions = gr_arena_alloc(a, sizeof(int32_t));
        r->V3AndBelowTopics[i].Partitions[0] = (int32_t)(u8(in) % 3);
    }
    call(c, in, 24, ver, r, true, a, NULL);
}

static void s_add_offsets_to_txn(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {0, 2, 4};
    int16_t ver = ver_of(in, 25, v, 3);
    int who = u8(in) & 1;
    struct AddOffsetsToTxnRequest *r = new_(a, &gr_desc_AddOffsetsToTxnRequest);
    r->TransactionalId = (char *)txn_ids[who];
    r->ProducerId = G.pid[who];
    r->ProducerEpoch = G.epoch[who];
    r->GroupId = name_of(in, a, groups, 2);
    if (!r->GroupId) r->GroupId = "";
    call(c, in, 25, ver, r, true, a, NULL);
}

static void s_end_txn(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {0, 2, 4};
    int16_t ver = ver_of(in, 26, v, 3);
    int who = u8(in) & 1;
    struct EndTxnRequest *r = new_(a, &gr_desc_EndTxnRequest);
    r->TransactionalId = (char *)txn_ids[who];
    r->ProducerId = G.pid[who];
    r->ProducerEpoch = G.epoch[who];
    r->Committed = u8(in) & 1;
    call(c, in, 26, ver, r, true, a, NULL);
}

/* KIP-664: DescribeProducers v0, DescribeTransactions v0, ListTransactions v0/v1 */
static void s_describe_producers(struct in *in, struct gr_arena *a, int c) {
    struct DescribeProducersRequest *r = new_(a, &gr_desc_DescribeProducersRequest);
    int nt = u8(in) % 3;
    r->TopicsCount = nt;
    r->Topics = NEWA(a, DescribeProducersRequest_TopicRequest, nt + 1);
    for (int i = 0; i < nt; i++) {
        r->Topics[i].Name = topic_of(in, a);
        int np = u8(in) % 3;
        r->Topics[i].PartitionIndexesCount = np;
        r->Topics[i].PartitionIndexes = gr_arena_alloc(a, (size_t)(np + 1) * sizeof(int32_t));
        for (int k = 0; k < np; k++) r->Topics[i].PartitionIndexes[k] = (int32_t)(u8(in) % 4) - 1;
    }
    call(c, in, 61, 0, r, true, a, NULL);
}

static void s_describe_transactions(struct in *in, struct gr_arena *a, int c) {
    static const char *const ids[] = {"tx0", "tx1", "", "nosuch"};
    struct DescribeTransactionsRequest *r = new_(a, &gr_desc_DescribeTransactionsRequest);
    int n = u8(in) % 3;
    r->TransactionalIdsCount = n;
    r->TransactionalIds = gr_arena_alloc(a, (size_t)(n + 1) * sizeof(char *));
    for (int i = 0; i < n; i++) r->TransactionalIds[i] = (char *)ids[u8(in) % 4];
    call(c, in, 65, 0, r, true, a, NULL);
}

static void s_list_transactions(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {0, 1};
    static const char *const states[] = {"Ongoing", "Empty", "CompleteCommit", "Bogus"};
    int16_t ver = ver_of(in, 66, v, 2);
    struct ListTransactionsRequest *r = new_(a, &gr_desc_ListTransactionsRequest);
    int ns = u8(in) % 3;
    r->StateFiltersCount = ns;
    r->StateFilters = gr_arena_alloc(a, (size_t)(ns + 1) * sizeof(char *));
    for (int i = 0; i < ns; i++) r->StateFilters[i] = (char *)states[u8(in) % 4];
    int np = u8(in) % 2;
    r->ProducerIdFiltersCount = np;
    r->ProducerIdFilters = gr_arena_alloc(a, (size_t)(np + 1) * sizeof(int64_t));
    if (np) r->ProducerIdFilters[0] = G.pid[u8(in) & 1];
    if (ver >= 1) r->DurationFilter = (int64_t)(u8(in) % 3) - 1;
    call(c, in, 66, ver, r, true, a, NULL);
}

static void s_txn_offset_commit(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {0, 2, 3, 4};
    int16_t ver = ver_of(in, 28, v, 4);
    int who = u8(in) & 1, g = u8(in) & 1;
    struct TxnOffsetCommitRequest *r = new_(a, &gr_desc_TxnOffsetCommitRequest);
    r->TransactionalId = (char *)txn_ids[who];
    r->GroupId = (char *)groups[g];
    r->ProducerId = G.pid[who];
    r->ProducerEpoch = G.epoch[who];
    r->GenerationId = u8(in) & 1 ? G.generation[g] : -1;
    r->MemberId = G.member[g];
    r->TopicsCount = 1;
    r->Topics = NEWA(a, TxnOffsetCommitRequest_TxnOffsetCommitRequestTopic, 1);
    r->Topics[0].Name = topic_of(in, a);
    r->Topics[0].PartitionsCount = 1;
    r->Topics[0].Partitions = NEWA(a, TxnOffsetCommitRequest_TxnOffsetCommitRequestPartition, 1);
    r->Topics[0].Partitions[0].PartitionIndex = (int32_t)(u8(in) % 3);
    r->Topics[0].Partitions[0].CommittedOffset = (int64_t)(u8(in) % 64);
    r->Topics[0].Partitions[0].CommittedLeaderEpoch = -1;
    r->Topics[0].Partitions[0].CommittedMetadata = "";
    call(c, in, 28, ver, r, true, a, NULL);
}

/* Mutates a SCRAM message from the input: 0 as is; else a byte xor'ed, or cut. */
static void mutate_msg(struct in *in, uint8_t *p, size_t *n) {
    uint8_t m = u8(in);
    if (!*n) return;
    if ((m & 7) == 1) p[u8(in) % *n] ^= (uint8_t)(u8(in) | 1);
    else if ((m & 7) == 2) *n = u8(in) % *n;
}

/* A raw SASL token (after SaslHandshake v0): size-prefixed bytes both ways. */
static int raw_token(const uint8_t *p, size_t n, uint8_t **out, size_t *out_len) {
    uint8_t h[4];
    put32(h, (uint32_t)n);
    int fd = conn(1);
    if (!send_all(fd, h, 4) || !send_all(fd, p, n)) return -1;
    int r = recv_frame(fd, MUTATED_WAIT_MS * 4, out, out_len);
    return r == 1 ? 0 : -1;
}

/* One SASL exchange step on connection 1, depending on where it is. */
static void s_sasl(struct in *in, struct gr_arena *a, int c) {
    (void)c;
    if (G.sasl == 0 || G.sasl == 3) { /* handshake (again, when authenticated: an illegal state) */
        static const char *const mechs[] = {"SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "GSSAPI"};
        int16_t ver = (int16_t)(u8(in) & 1);
        struct SaslHandshakeRequest *r = new_(a, &gr_desc_SaslHandshakeRequest);
        r->Mechanism = name_of(in, a, mechs, 4);
        if (!r->Mechanism) r->Mechanism = "";
        void *resp;
        bool again = G.sasl == 3;
        if (call(1, in, 17, ver, r, true, a, &resp) && resp && !again &&
            ((struct SaslHandshakeResponse *)resp)->ErrorCode == 0) {
            G.sasl_mech = gr_scram_mech_parse(r->Mechanism);
            G.sasl = ver == 1 ? 1 : 2;
        }
        return;
    }
    /* G.sasl 1 or 2: the SCRAM messages, correct or mutated */
    if (!G.scram) {
        if (G.sasl_mech == GR_SCRAM_NONE) { /* PLAIN / GSSAPI: input bytes as the token */
            size_t got;
            const uint8_t *p = take(in, u8(in) % 64, &got);
            uint8_t *o = NULL;
            size_t ol;
            if (G.sasl == 2) {
                if (raw_token(p, got, &o, &ol) != 0) conn_close(1);
                free(o);
                conn_close(1);
                return;
            }
            struct SaslAuthenticateRequest *r = new_(a, &gr_desc_SaslAuthenticateRequest);
            r->AuthBytes.p = p;
            r->AuthBytes.len = (int32_t)got;
            call(1, in, 36, (int16_t)(u8(in) % 3), r, true, a, NULL);
            conn_close(1); /* whatever happened, start over next time */
            return;
        }
        G.scram = gr_scram_client_new(G.sasl_mech, u8(in) == 1 ? "nobody" : USER, u8(in) == 1 ? "wrong" : PASSWORD);
    }
    /* client-first (first call) or client-final: feed the last server message */
    uint8_t *msg = NULL;
    size_t ml = 0;
    bool first = G.server_first_len == 0;
    if (gr_scram_client_step(G.scram, first ? NULL : G.server_first, G.server_first_len, &msg, &ml) != 0) {
        free(msg);
        G.server_first_len = 0;
        conn_close(1);
        return;
    }
    mutate_msg(in, msg, &ml);
    uint8_t *srv = NULL;
    size_t sl = 0;
    int16_t err = -1;
    if (G.sasl == 2) {
        if (raw_token(msg, ml, &srv, &sl) == 0) err = 0;
    } else {
        struct SaslAuthenticateRequest *r = new_(a, &gr_desc_SaslAuthenticateRequest);
        uint8_t *keep = gr_arena_alloc(a, ml + 1);
        memcpy(keep, msg, ml);
        r->AuthBytes.p = keep;
        r->AuthBytes.len = (int32_t)ml;
        void *resp;
        if (call(1, in, 36, (int16_t)(u8(in) % 3), r, true, a, &resp) && resp) {
            struct SaslAuthenticateResponse *ar = resp;
            err = ar->ErrorCode;
            if (err == 0 && ar->AuthBytes.len > 0) {
                srv = gr_malloc((size_t)ar->AuthBytes.len);
                memcpy(srv, ar->AuthBytes.p, (size_t)ar->AuthBytes.len);
                sl = (size_t)ar->AuthBytes.len;
            }
        }
    }
    free(msg);
    if (err != 0 || !srv || sl > sizeof G.server_first) {
        free(srv);
        G.server_first_len = 0;
        conn_close(1);
        return;
    }
    if (first) {
        memcpy(G.server_first, srv, sl);
        G.server_first_len = sl;
    } else { /* server-final: verify it; authenticated */
        int v = gr_scram_client_step(G.scram, srv, sl, NULL, NULL);
        G.server_first_len = 0;
        gr_scram_client_free(G.scram);
        G.scram = NULL;
        if (v == 0) G.sasl = 3;
        else conn_close(1);
    }
    free(srv);
}

static void s_describe_configs(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {0, 1, 3, 4};
    int16_t ver = ver_of(in, 32, v, 4);
    struct DescribeConfigsRequest *r = new_(a, &gr_desc_DescribeConfigsRequest);
    r->ResourcesCount = 1;
    r->Resources = NEWA(a, DescribeConfigsRequest_DescribeConfigsResource, 1);
    uint8_t t = u8(in) % 4;
    r->Resources[0].ResourceType = t == 0 ? 2 : t == 1 ? 4 : t == 2 ? 8 : (int8_t)u8(in);
    r->Resources[0].ResourceName = t == 0 ? topic_of(in, a) : u8(in) & 1 ? "0" : "";
    if (!r->Resources[0].ResourceName) r->Resources[0].ResourceName = "";
    if (u8(in) & 1) {
        r->Resources[0].ConfigurationKeysCount = -1;
    } else {
        r->Resources[0].ConfigurationKeysCount = 1;
        r->Resources[0].ConfigurationKeys = gr_arena_alloc(a, sizeof(char *));
        char *k = name_of(in, a, topic_keys, (int)(sizeof topic_keys / sizeof *topic_keys));
        r->Resources[0].ConfigurationKeys[0] = k ? k : "";
    }
    r->IncludeSynonyms = u8(in) & 1;
    r->IncludeDocumentation = u8(in) & 1;
    call(c, in, 32, ver, r, true, a, NULL);
}

static void s_alter_configs(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {0, 1};
    int16_t ver = ver_of(in, 44, v, 2);
    struct IncrementalAlterConfigsRequest *r = new_(a, &gr_desc_IncrementalAlterConfigsRequest);
    r->ResourcesCount = 1;
    r->Resources = NEWA(a, IncrementalAlterConfigsRequest_AlterConfigsResource, 1);
    struct IncrementalAlterConfigsRequest_AlterConfigsResource *res = r->Resources;
    uint8_t t = u8(in) % 8;
    res->ResourceType = t < 5 ? 2 : t == 5 ? 4 : t == 6 ? 8 : (int8_t)u8(in);
    res->ResourceName = t < 5 ? topic_of(in, a) : u8(in) & 1 ? "0" : "";
    if (!res->ResourceName) res->ResourceName = "";
    int n = u8(in) % 3 + 1;
    res->ConfigsCount = n;
    res->Configs = NEWA(a, IncrementalAlterConfigsRequest_AlterableConfig, n);
    static const char *const broker_keys[] = {"message.max.bytes", "log.retention.ms", "kafka.server.ReplicaManager",
                                              "log.cleaner.threads", "max.connections"};
    static const char *const broker_vals[] = {"1000", "1048588", "100", "INFO", "DEBUG", "1", "100000"};
    for (int i = 0; i < n; i++) {
        res->Configs[i].Name = t < 5 ? name_of(in, a, topic_keys, (int)(sizeof topic_keys / sizeof *topic_keys))
                                     : name_of(in, a, broker_keys, 5);
        if (!res->Configs[i].Name) res->Configs[i].Name = "";
        res->Configs[i].ConfigOperation = (int8_t)(u8(in) % 5);
        res->Configs[i].Value = t < 5 ? value_of(in, a) : name_of(in, a, broker_vals, 7);
    }
    r->ValidateOnly = u8(in) == 1;
    call(c, in, 44, ver, r, true, a, NULL);
}

/* Raw bytes as a frame body after a valid api key/version header prefix. */
static void s_raw(struct in *in, struct gr_arena *a, int c) {
    (void)a;
    uint8_t hdr[12];
    int16_t api = (int16_t)(u8(in) % 64);
    int16_t ver = (int16_t)(u8(in) % 13);
    size_t got;
    const uint8_t *p = take(in, u8(in), &got);
    put32(hdr, (uint32_t)(8 + got));
    hdr[4] = (uint8_t)(api >> 8), hdr[5] = (uint8_t)api, hdr[6] = (uint8_t)(ver >> 8), hdr[7] = (uint8_t)ver;
    put32(hdr + 8, (uint32_t)++G.corr);
    uint8_t *frame = gr_malloc(12 + got + 1);
    memcpy(frame, hdr, 12);
    if (got) memcpy(frame + 12, p, got);
    uint8_t *f = NULL;
    size_t fl;
    exchange(c, frame, 12 + got, false, -1, &f, &fl);
    free(f);
    free(frame);
}

/* DeleteTopics v6 by name, by id or both (INVALID_REQUEST), of topics the other templates do not
 * use (an id of the input is almost surely unknown: UNKNOWN_TOPIC_ID); the fixture topics stay. */
static void s_delete_topics(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {6, 6, 5};
    int16_t ver = ver_of(in, 20, v, 3);
    struct DeleteTopicsRequest *r = new_(a, &gr_desc_DeleteTopicsRequest);
    uint8_t k = 1 + u8(in) % 3;
    static char *const doomed[] = {"fzdel", "fzdel2"};
    if (ver >= 6) {
        r->TopicsCount = k;
        r->Topics = NEWA(a, DeleteTopicsRequest_DeleteTopicState, k);
        for (int i = 0; i < k; i++) {
            uint8_t how = u8(in) % 4;
            r->Topics[i].Name = how == 0 || how == 2 ? doomed[u8(in) % 2] : NULL;
            memset(r->Topics[i].TopicId, 0, 16);
            if (how >= 1) {
                for (int j = 0; j < 16; j++) r->Topics[i].TopicId[j] = u8(in);
            }
        }
    } else {
        r->TopicNamesCount = 1;
        r->TopicNames = gr_arena_alloc(a, sizeof(char *));
        r->TopicNames[0] = doomed[u8(in) % 2];
    }
    r->TimeoutMs = u8(in) & 1 ? 1000 : 0;
    call(c, in, 20, ver, r, true, a, NULL);
}

/* AlterPartition v3 (v0-v2 sometimes) to the broker, which is the controller, as broker 0 (or
 * another id) with its current broker epoch (or another), for fz0/fz1 by id (the fixture's, zero or
 * input bytes) or name: ISR members of any id with any broker epoch, any leader recovery state,
 * leader and partition epochs near the real ones. Whatever the controller accepts changes fz0/fz1's
 * ISR znode only (the leader is the broker itself; its next LeaderAndIsr puts things right). */
static void s_alter_partition(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {3, 3, 2, 1, 0};
    int16_t ver = ver_of(in, 56, v, 5);
    struct AlterPartitionRequest *r = new_(a, &gr_desc_AlterPartitionRequest);
    int64_t epoch = gr_server_broker_epoch(G.srv);
    r->BrokerId = u8(in) < 240 ? 0 : (int32_t)(int8_t)u8(in);
    r->BrokerEpoch = u8(in) < 240 ? epoch : epoch + (int8_t)u8(in);
    r->TopicsCount = 1 + u8(in) % 2;
    r->Topics = NEWA(a, AlterPartitionRequest_TopicData, r->TopicsCount);
    for (int t = 0; t < r->TopicsCount; t++) {
        struct AlterPartitionRequest_TopicData *td = &r->Topics[t];
        td->TopicName = topic_of(in, a);
        if (!td->TopicName) td->TopicName = "";
        topic_id_of(in, td->TopicId);
        td->PartitionsCount = 1 + u8(in) % 2;
        td->Partitions = NEWA(a, AlterPartitionRequest_PartitionData, td->PartitionsCount);
        for (int i = 0; i < td->PartitionsCount; i++) {
            struct AlterPartitionRequest_PartitionData *pd = &td->Partitions[i];
            pd->PartitionIndex = u8(in) % 3;
            pd->LeaderEpoch = (int32_t)(u8(in) % 4) - 1;
            pd->PartitionEpoch = (int32_t)(u8(in) % 6) - 1;
            pd->LeaderRecoveryState = u8(in) < 224 ? 0 : (int8_t)u8(in);
            int n = u8(in) % 4;
            pd->NewIsrCount = ver < 3 ? n : 0;
            pd->NewIsr = gr_arena_alloc(a, sizeof(int32_t) * (size_t)(n + 1));
            pd->NewIsrWithEpochsCount = ver >= 3 ? n : 0;
            pd->NewIsrWithEpochs = NEWA(a, AlterPartitionRequest_BrokerState, n + 1);
            for (int k = 0; k < n; k++) {
                int32_t id = u8(in) < 192 ? 0 : (int32_t)(int8_t)u8(in);
                pd->NewIsr[k] = id;
                pd->NewIsrWithEpochs[k].BrokerId = id;
                uint8_t e = u8(in);
                pd->NewIsrWithEpochs[k].BrokerEpoch = e < 128 ? epoch : e < 192 ? -1 : epoch - 1 - e;
            }
        }
    }
    call(c, in, 56, ver, r, true, a, NULL);
}

/* DescribeCluster v0/v1: endpoint types 1 (brokers), 2 (controllers: mismatched) or any code. */
static void s_describe_cluster(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {0, 1};
    int16_t ver = ver_of(in, 60, v, 2);
    struct DescribeClusterRequest *r = new_(a, &gr_desc_DescribeClusterRequest);
    r->IncludeClusterAuthorizedOperations = u8(in) & 1;
    uint8_t t = u8(in);
    if (ver >= 1) r->EndpointType = t < 128 ? 1 : t < 192 ? 2 : (int8_t)u8(in);
    call(c, in, 60, ver, r, true, a, NULL);
}

/* CreateDelegationToken v3 with an owner (KIP-373) and renewers of any principal type. */
static void s_create_delegation_token(struct in *in, struct gr_arena *a, int c) {
    static const int16_t v[] = {3, 2};
    int16_t ver = ver_of(in, 38, v, 2);
    static const char *const names[] = {"User", "alice", "bob", "Group", ""};
    struct CreateDelegationTokenRequest *r = new_(a, &gr_desc_CreateDelegationTokenRequest);
    if (ver >= 3) {
        r->OwnerPrincipalType = name_of(in, a, names, 5);
        r->OwnerPrincipalName = name_of(in, a, names, 5);
    }
    uint8_t n = u8(in) % 3;
    r->RenewersCount = n;
    r->Renewers = NEWA(a, CreateDelegationTokenRequest_CreatableRenewers, n);
    for (int i = 0; i < n; i++) {
        char *t = name_of(in, a, names, 5), *nm = name_of(in, a, names, 5);
        r->Renewers[i].PrincipalType = t ? t : "User";
        r->Renewers[i].PrincipalName = nm ? nm : "";
    }
    r->MaxLifetimeMs = -1;
    call(c, in, 38, ver, r, true, a, NULL);
}

typedef void (*step_fn)(struct in *, struct gr_arena *, int);
static const step_fn step_fns[] = {
    s_api_versions,    s_metadata,          s_create_topics,    s_produce,          s_produce,
    s_fetch,           s_fetch,             s_list_offsets,     s_find_coordinator, s_join_group,
    s_sync_group,      s_heartbeat,         s_leave_group,      s_offset_commit,    s_offset_fetch,
    s_init_producer_id, s_add_partitions_to_txn, s_add_offsets_to_txn, s_end_txn, s_txn_offset_commit,
    s_sasl,            s_sasl,              s_describe_configs, s_alter_configs,    s_raw,
    s_describe_producers, s_describe_transactions, s_list_transactions, s_describe_cluster,
    s_create_delegation_token,
    s_delete_topics,
    s_alter_partition,
};
#define N_STEPS ((int)(sizeof step_fns / sizeof *step_fns))

/* ---- broker lifecycle ---- */

/* Sends an unmutated request (zero input) and decodes the answer; for start-up. */
static void *setup_call(struct gr_arena *a, int16_t api, int16_t ver, const void *body) {
    struct in none = {NULL, 0};
    void *resp = NULL;
    call(0, &none, api, ver, body, true, a, &resp);
    return resp;
}

static void wait_ready(void) {
    int64_t end = gr_mono_ms() + 60000;
    struct gr_arena a;
    gr_arena_init(&a);
    /* topics: fz0 (2 partitions), fz1 (1), fzc (1, compacted) */
    struct CreateTopicsRequest *ct = new_(&a, &gr_desc_CreateTopicsRequest);
    ct->TopicsCount = 3;
    ct->Topics = NEWA(&a, CreateTopicsRequest_CreatableTopic, 3);
    for (int i = 0; i < 3; i++) {
        ct->Topics[i].Name = (char *)topics[i];
        ct->Topics[i].NumPartitions = i == 0 ? 2 : 1;
        ct->Topics[i].ReplicationFactor = 1;
    }
    ct->Topics[2].ConfigsCount = 1;
    ct->Topics[2].Configs = NEWA(&a, CreateTopicsRequest_CreatableTopicConfig, 1);
    ct->Topics[2].Configs[0].Name = "cleanup.policy";
    ct->Topics[2].Configs[0].Value = "compact";
    ct->TimeoutMs = 10000;
    for (;;) {
        struct CreateTopicsResponse *r = setup_call(&a, 19, 4, ct);
        bool ok = r != NULL;
        for (int i = 0; r && i < r->TopicsCount; i++)
            ok = ok && (r->Topics[i].ErrorCode == 0 || r->Topics[i].ErrorCode == 36 /* TOPIC_ALREADY_EXISTS */);
        if (ok) break;
        if (gr_mono_ms() > end) goto fail;
        usleep(50000);
    }
    /* leaders for them, and both coordinators loaded */
    for (int k = 0; k < 3;) {
        bool ok = false;
        if (k == 0) {
            struct MetadataRequest *m = new_(&a, &gr_desc_MetadataRequest);
            m->TopicsCount = -1;
            struct MetadataResponse *r = setup_call(&a, 3, 12, m);
            int ready = 0;
            for (int i = 0; r && i < r->TopicsCount; i++)
                if (r->Topics[i].Name && strcmp(r->Topics[i].Name, "fz0") == 0)
                    memcpy(G_fz0_id, r->Topics[i].TopicId, 16); /* s_metadata asks by it */
            for (int i = 0; r && i < r->TopicsCount; i++)
                for (int j = 0; j < r->Topics[i].PartitionsCount; j++)
                    ready += r->Topics[i].ErrorCode == 0 && r->Topics[i].Partitions[j].LeaderId == 0;
            ok = ready >= 4;
        } else {
            struct FindCoordinatorRequest *f = new_(&a, &gr_desc_FindCoordinatorRequest);
            f->Key = k == 1 ? "g0" : "tx0";
            f->KeyType = (int8_t)(k - 1);
            struct FindCoordinatorResponse *r = setup_call(&a, 10, 2, f);
            ok = r && r->ErrorCode == 0;
        }
        if (ok) {
            k++;
            continue;
        }
        if (gr_mono_ms() > end) goto fail;
        usleep(20000);
    }
    gr_arena_free(&a);
    return;
fail:
    fprintf(stderr, "fuzz_broker_session: the in-process broker did not become ready in 60 s\n");
    abort();
}

static void broker_stop(void) {
    if (!G.srv) return;
    conn_close(0);
    conn_close(1);
    gr_server_free(G.srv);
    G.srv = NULL;
    gr_config_release(&G.cfg);
    lzk_free(G.zk);
    G.zk = NULL;
    fuzz_rm_tree(G.dir);
}

static void broker_start(void) {
    memset(G.member, 0, sizeof G.member);
    memset(G.generation, 0, sizeof G.generation);
    for (int i = 0; i < 3; i++) G.pid[i] = -1, G.epoch[i] = -1, G.seq[i] = 0;
    G.fd[0] = G.fd[1] = -1;
    G.sasl = 0;
    snprintf(G.dir, sizeof G.dir, "%s/broker-%d", g_root, G.gen++);
    G.zk = lzk_new();
    /* the SCRAM user, as kafka-configs --alter --add-config writes it */
    char json[1024];
    struct gr_scram_cred c256, c512;
    if (gr_scram_cred_from_password(GR_SCRAM_SHA_256, PASSWORD, 4096, &c256) != 0 ||
        gr_scram_cred_from_password(GR_SCRAM_SHA_512, PASSWORD, 4096, &c512) != 0)
        abort();
    char *f256 = gr_scram_cred_format(&c256), *f512 = gr_scram_cred_format(&c512);
    snprintf(json, sizeof json, "{\"version\":1,\"config\":{\"SCRAM-SHA-256\":\"%s\",\"SCRAM-SHA-512\":\"%s\"}}", f256,
             f512);
    free(f256);
    free(f512);
    lzk_put(G.zk, "/config/users/" USER, json);

    gr_config_defaults(&G.cfg);
    set("broker.id", "0");
    set("zookeeper.connect", "in-process-model:2181");
    set("log.dirs", G.dir);
    set("listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0");
    set("inter.broker.listener.name", "PLAINTEXT");
    set("listener.name.sasl_plaintext.sasl.enabled.mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN");
    set("num.network.threads", "1");
    set("num.io.threads", "2");
    set("num.replica.fetchers", "1");
    set("offsets.topic.replication.factor", "1");
    set("offsets.topic.num.partitions", "2");
    set("transaction.state.log.replication.factor", "1");
    set("transaction.state.log.min.isr", "1");
    set("transaction.state.log.num.partitions", "2");
    set("transaction.abort.timed.out.transaction.cleanup.interval.ms", "500");
    set("group.initial.rebalance.delay.ms", "0");
    set("group.min.session.timeout.ms", "100");
    set("controlled.shutdown.enable", "false");
    set("log.segment.bytes", "1048576");
    set("log.index.size.max.bytes", "65536");
    set("log.retention.check.interval.ms", "500");
    set("log.cleaner.backoff.ms", "500");
    set("message.max.bytes", "1048588");
    set("socket.request.max.bytes", "4194304"); /* REQUEST_MAX_BYTES */
    char err[512];
    if (gr_config_finish(&G.cfg, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_broker_session: %s\n", err);
        abort();
    }
    G.srv = gr_server_new(&G.cfg);
    gr_server_set_zk_open(G.srv, lzk_open, G.zk);
    int rc = gr_server_startup(G.srv);
    if (rc != 0) {
        fprintf(stderr, "fuzz_broker_session: the broker did not start: %s\n", gr_strerror(rc));
        abort();
    }
    G.port[0] = gr_server_listener_port(G.srv, 0);
    G.port[1] = gr_server_listener_port(G.srv, 1);
    wait_ready();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static long reset_every;
    if (!reset_every) {
        fuzz_scratch_init("fuzz-broker-session");
        if (getenv("FUZZ_BROKER_LOG")) gr_log_set_level(GR_LOG_INFO);
        G.trace = getenv("FUZZ_BROKER_TRACE") != NULL;
        const char *e = getenv("FUZZ_BROKER_RESET_EVERY");
        reset_every = e && atol(e) > 0 ? atol(e) : 300;
        /* At exit the broker stops (its threads end, and their OpenSSL thread state is freed by
         * OpenSSL's thread-exit handler), then LeakSanitizer checks. OpenSSL's own exit-time
         * cleanup would run before our handler under libFuzzer, tearing down the thread-state
         * registry while broker threads still run (their state then leaks, or they crash):
         * OpenSSL is initialised without it, first thing; its global state stays reachable. */
        OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
        atexit(broker_stop);
    }
    if (G.srv && (G.inputs % reset_every == 0 || gr_rss_kib() > 700 * 1024)) broker_stop();
    if (!G.srv) broker_start();
    G.inputs++;
    struct in in = {data, size};
    for (int i = 0; i < MAX_STEPS && in.n > 0; i++) {
        uint8_t pick = u8(&in);
        /* the step's connection: SASL_PLAINTEXT once authenticated (or, rarely, before: the
         * broker must refuse), else PLAINTEXT */
        int c = G.sasl == 3 ? (pick & 0x80 ? 1 : 0) : (pick >= 0xf8 ? 1 : 0);
        struct gr_arena a;
        gr_arena_init(&a);
        int64_t t0 = G.trace ? gr_mono_us() : 0;
        step_fns[(pick & 0x7f) % N_STEPS](&in, &a, c);
        if (G.trace) fprintf(stderr, "template %d took %lld us\n", (pick & 0x7f) % N_STEPS, (long long)(gr_mono_us() - t0));
        gr_arena_free(&a);
    }
    return 0;
}
