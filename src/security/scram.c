/* SCRAM: see scram.h. */
#include "security/scram.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static const EVP_MD *md_of(enum gr_scram_mech m) {
    return m == GR_SCRAM_SHA_256 ? EVP_sha256() : m == GR_SCRAM_SHA_512 ? EVP_sha512() : NULL;
}

static int key_len_of(enum gr_scram_mech m) { return m == GR_SCRAM_SHA_256 ? 32 : m == GR_SCRAM_SHA_512 ? 64 : 0; }

enum gr_scram_mech gr_scram_mech_parse(const char *name) {
    if (!name) return GR_SCRAM_NONE;
    if (strcmp(name, "SCRAM-SHA-256") == 0) return GR_SCRAM_SHA_256;
    if (strcmp(name, "SCRAM-SHA-512") == 0) return GR_SCRAM_SHA_512;
    return GR_SCRAM_NONE;
}

const char *gr_scram_mech_name(enum gr_scram_mech m) {
    return m == GR_SCRAM_SHA_256 ? "SCRAM-SHA-256" : m == GR_SCRAM_SHA_512 ? "SCRAM-SHA-512" : "?";
}

/* ---- base64 ---- */

char *gr_b64_encode(const uint8_t *p, size_t n) {
    char *out = gr_malloc(4 * ((n + 2) / 3) + 1);
    EVP_EncodeBlock((unsigned char *)out, p, (int)n);
    return out;
}

int gr_b64_decode(const char *s, size_t n, uint8_t *out, size_t cap) {
    if (n % 4 != 0 || n / 4 * 3 > cap + 2 || n > INT32_MAX) return -1;
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '+' ||
                  ch == '/' || (ch == '=' && (i == n - 1 || (i == n - 2 && s[n - 1] == '=')));
        if (!ok) return -1;
    }
    uint8_t *tmp = gr_malloc(n / 4 * 3 + 1);
    int len = EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)n);
    if (len >= 0) {
        if (s[n - 1] == '=') len--;
        if (s[n - 2] == '=') len--;
    }
    if (len < 0 || (size_t)len > cap) {
        free(tmp);
        return -1;
    }
    memcpy(out, tmp, (size_t)len);
    free(tmp);
    return len;
}

/* ---- the formatter ---- */

static void hmac(enum gr_scram_mech m, const uint8_t *key, int klen, const void *msg, size_t mlen, uint8_t *out) {
    unsigned int olen = 0;
    HMAC(md_of(m), key, klen, msg, mlen, out, &olen);
}

static void hash(enum gr_scram_mech m, const uint8_t *in, int len, uint8_t *out) {
    unsigned int olen = 0;
    EVP_Digest(in, (size_t)len, out, &olen, md_of(m), NULL);
}

int gr_scram_salted_password(enum gr_scram_mech m, const char *password, const uint8_t *salt, int salt_len,
                             int iterations, uint8_t *out) {
    if (!md_of(m)) return -EINVAL;
    return PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, salt_len, iterations, md_of(m), key_len_of(m),
                             out) == 1
               ? 0
               : -EINVAL;
}

int gr_scram_cred_from_salted(enum gr_scram_mech m, const uint8_t *salt, int salt_len, const uint8_t *salted,
                              int salted_len, int iterations, struct gr_scram_cred *out) {
    int kl = key_len_of(m);
    if (!kl || salted_len != kl || salt_len <= 0 || salt_len > (int)sizeof out->salt) return -EINVAL;
    memset(out, 0, sizeof *out);
    memcpy(out->salt, salt, (size_t)salt_len);
    out->salt_len = salt_len;
    out->key_len = kl;
    out->iterations = iterations;
    uint8_t client_key[64];
    hmac(m, salted, kl, "Client Key", 10, client_key);
    hash(m, client_key, kl, out->stored_key);
    hmac(m, salted, kl, "Server Key", 10, out->server_key);
    return 0;
}

int gr_scram_cred_from_password(enum gr_scram_mech m, const char *password, int iterations,
                                struct gr_scram_cred *out) {
    uint8_t salt[32], salted[64];
    if (!md_of(m) || RAND_bytes(salt, sizeof salt) != 1) return -EINVAL;
    int rc = gr_scram_salted_password(m, password, salt, sizeof salt, iterations, salted);
    return rc ? rc : gr_scram_cred_from_salted(m, salt, sizeof salt, salted, key_len_of(m), iterations, out);
}

char *gr_scram_cred_format(const struct gr_scram_cred *c) {
    char *salt = gr_b64_encode(c->salt, (size_t)c->salt_len);
    char *sk = gr_b64_encode(c->stored_key, (size_t)c->key_len);
    char *srk = gr_b64_encode(c->server_key, (size_t)c->key_len);
    char *s = gr_asprintf("salt=%s,stored_key=%s,server_key=%s,iterations=%d", salt, sk, srk, c->iterations);
    free(salt);
    free(sk);
    free(srk);
    return s;
}

/* The value of `key=` in a comma-separated attribute list, or NULL; *len its length. */
static const char *attr(const char *s, size_t n, const char *key, size_t *len) {
    size_t kl = strlen(key);
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && s[e] != ',') e++;
        if (e - i > kl && memcmp(s + i, key, kl) == 0 && s[i + kl] == '=') {
            *len = e - i - kl - 1;
            return s + i + kl + 1;
        }
        i = e + 1;
    }
    return NULL;
}

int gr_scram_cred_parse(enum gr_scram_mech m, const char *s, struct gr_scram_cred *out) {
    int kl = key_len_of(m);
    if (!kl || !s) return -EINVAL;
    memset(out, 0, sizeof *out);
    size_t n = strlen(s), l1, l2, l3, l4;
    const char *salt = attr(s, n, "salt", &l1), *sk = attr(s, n, "stored_key", &l2),
               *srk = attr(s, n, "server_key", &l3), *it = attr(s, n, "iterations", &l4);
    if (!salt || !sk || !srk || !it || l4 == 0 || l4 > 9) return -EINVAL;
    out->salt_len = gr_b64_decode(salt, l1, out->salt, sizeof out->salt);
    if (out->salt_len <= 0 || gr_b64_decode(sk, l2, out->stored_key, sizeof out->stored_key) != kl ||
        gr_b64_decode(srk, l3, out->server_key, sizeof out->server_key) != kl)
        return -EINVAL;
    int v = 0;
    for (size_t i = 0; i < l4; i++) {
        if (it[i] < '0' || it[i] > '9') return -EINVAL;
        v = v * 10 + (it[i] - '0');
    }
    out->iterations = v;
    out->key_len = kl;
    return 0;
}

/* A printable random nonce (no ','), as ScramFormatter.secureRandomString. -1 when the random
 * generator fails (no nonce may then be used). */
static int random_nonce(char *out, size_t n) {
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    uint8_t r[64];
    if (n > sizeof r + 1) n = sizeof r + 1;
    out[0] = 0;
    if (RAND_bytes(r, (int)(n - 1)) != 1) return -1;
    for (size_t i = 0; i + 1 < n; i++) out[i] = alphabet[r[i] % (sizeof alphabet - 1)];
    out[n - 1] = 0;
    return 0;
}

/* ---- server ---- */

enum { S_FIRST, S_FINAL, S_DONE, S_FAILED };

struct gr_scram_server {
    enum gr_scram_mech mech;
    int state;
    char user[256];
    struct gr_scram_cred cred;
    char *client_first_bare;
    char *server_first;
    char *gs2_header; /* e.g. "n,," */
    char *nonce;      /* client nonce + server nonce */
};

struct gr_scram_server *gr_scram_server_new(enum gr_scram_mech m) {
    struct gr_scram_server *s = gr_calloc(1, sizeof *s);
    s->mech = m;
    return s;
}

void gr_scram_server_free(void *p) {
    struct gr_scram_server *s = p;
    if (!s) return;
    free(s->client_first_bare);
    free(s->server_first);
    free(s->gs2_header);
    free(s->nonce);
    OPENSSL_cleanse(&s->cred, sizeof s->cred);
    free(s);
}

bool gr_scram_server_done(const struct gr_scram_server *s) { return s->state == S_DONE; }
const char *gr_scram_server_user(const struct gr_scram_server *s) { return s->user; }

static bool printable(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0x20 || p[i] == 0x7f) return false;
    return true;
}

/* saslname: "=2C" -> ",", "=3D" -> "="; any other '=' is invalid. */
static int decode_saslname(const char *s, size_t n, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '=') {
            if (i + 2 >= n) return -1;
            if (s[i + 1] == '2' && s[i + 2] == 'C') ch = ',';
            else if (s[i + 1] == '3' && s[i + 2] == 'D') ch = '=';
            else return -1;
            i += 2;
        }
        if (o + 1 >= cap) return -1;
        out[o++] = ch;
    }
    out[o] = 0;
    return o ? 0 : -1;
}

static int server_first(struct gr_scram_server *s, const char *m, size_t n, gr_scram_lookup_fn lookup, void *lctx,
                        uint8_t **out, size_t *out_len, const char **why) {
    /* gs2-header: n,[a=authzid], -- Kafka's ClientFirstMessage pattern starts with "n,": "y" (the
     * client could bind the channel) and "p=" are refused like any malformed message */
    if (n < 3 || m[0] != 'n' || m[1] != ',') {
        *why = n > 0 && m[0] == 'p' ? "channel binding is not supported" : "invalid client-first message";
        return -EINVAL;
    }
    const char *c2 = memchr(m + 2, ',', n - 2);
    if (!c2) return *why = "invalid client-first message", -EINVAL;
    size_t hl = (size_t)(c2 - m) + 1;
    const char *authzid = NULL;
    size_t az_len = 0;
    if (hl > 3) {
        if (hl < 5 || m[2] != 'a' || m[3] != '=') return *why = "invalid authorization id", -EINVAL;
        authzid = m + 4;
        az_len = hl - 5;
    }
    const char *bare = m + hl;
    size_t bl = n - hl, ul, nl;
    if (bl < 2 || bare[0] != 'n' || bare[1] != '=') return *why = "invalid client-first message", -EINVAL;
    const char *u = attr(bare, bl, "n", &ul), *cn = attr(bare, bl, "r", &nl);
    if (!u || !cn || nl == 0 || memchr(cn, ',', nl)) return *why = "invalid client-first message", -EINVAL;
    if (decode_saslname(u, ul, s->user, sizeof s->user)) return *why = "invalid user name", -EINVAL;
    if (authzid && (az_len != strlen(s->user) || memcmp(authzid, s->user, az_len) != 0))
        return *why = "authorization id differs from the user name", -EACCES;
    if (lookup(lctx, s->mech, s->user, &s->cred) != 0) return *why = "unknown user", -EACCES;
    if (s->cred.iterations < GR_SCRAM_MIN_ITERATIONS) return *why = "credential below the minimum iterations", -EACCES;
    char snonce[33];
    if (random_nonce(snonce, sizeof snonce) != 0) return *why = "cannot generate a nonce", -EIO;
    s->gs2_header = gr_strndup(m, hl);
    s->client_first_bare = gr_strndup(bare, bl);
    s->nonce = gr_asprintf("%.*s%s", (int)nl, cn, snonce);
    char *salt = gr_b64_encode(s->cred.salt, (size_t)s->cred.salt_len);
    s->server_first = gr_asprintf("r=%s,s=%s,i=%d", s->nonce, salt, s->cred.iterations);
    free(salt);
    *out = (uint8_t *)gr_strdup(s->server_first);
    *out_len = strlen(s->server_first);
    s->state = S_FINAL;
    return 0;
}

static int server_final(struct gr_scram_server *s, const char *m, size_t n, uint8_t **out, size_t *out_len,
                        const char **why) {
    /* c=<b64 gs2 header>,r=<nonce>[,ext...],p=<proof> */
    const char *p = NULL;
    for (size_t i = n; i >= 3 && !p; i--)
        if (m[i - 3] == ',' && m[i - 2] == 'p' && m[i - 1] == '=') p = m + i;
    if (!p) return *why = "invalid client-final message", -EINVAL;
    size_t wl = (size_t)(p - 3 - m), cl, rl; /* without proof */
    const char *c = attr(m, wl, "c", &cl), *r = attr(m, wl, "r", &rl);
    if (!c || !r || m[0] != 'c') return *why = "invalid client-final message", -EINVAL;
    /* Kafka accepts a nonce that ends with the server's (librdkafka sends client nonce + it) */
    size_t sl = strlen(s->nonce);
    if (rl < sl || memcmp(r + rl - sl, s->nonce, sl) != 0) return *why = "nonce mismatch", -EACCES;
    char *cb = gr_b64_encode((const uint8_t *)s->gs2_header, strlen(s->gs2_header));
    bool cb_ok = cl == strlen(cb) && memcmp(c, cb, cl) == 0;
    free(cb);
    if (!cb_ok) return *why = "invalid channel binding", -EINVAL;
    uint8_t proof[64];
    int kl = s->cred.key_len;
    if (gr_b64_decode(p, n - (size_t)(p - m), proof, sizeof proof) != kl) return *why = "invalid proof", -EINVAL;
    char *auth = gr_asprintf("%s,%s,%.*s", s->client_first_bare, s->server_first, (int)wl, m);
    uint8_t sig[64], client_key[64], stored[64];
    hmac(s->mech, s->cred.stored_key, kl, auth, strlen(auth), sig);
    for (int i = 0; i < kl; i++) client_key[i] = proof[i] ^ sig[i];
    hash(s->mech, client_key, kl, stored);
    if (CRYPTO_memcmp(stored, s->cred.stored_key, (size_t)kl) != 0) {
        free(auth);
        return *why = "invalid credentials", -EACCES;
    }
    uint8_t server_sig[64];
    hmac(s->mech, s->cred.server_key, kl, auth, strlen(auth), server_sig);
    free(auth);
    char *v = gr_b64_encode(server_sig, (size_t)kl);
    char *fin = gr_asprintf("v=%s", v);
    free(v);
    *out = (uint8_t *)fin;
    *out_len = strlen(fin);
    s->state = S_DONE;
    return 0;
}

int gr_scram_server_step(struct gr_scram_server *s, const uint8_t *in, size_t in_len, gr_scram_lookup_fn lookup,
                         void *lookup_ctx, uint8_t **out, size_t *out_len, const char **why) {
    *out = NULL;
    *out_len = 0;
    *why = "";
    int rc;
    if (in_len > GR_SCRAM_MAX_MESSAGE) rc = (*why = "message too long", -EINVAL);
    else if (!printable(in, in_len)) rc = (*why = "non-printable bytes in a SCRAM message", -EINVAL);
    else if (s->state == S_FIRST)
        rc = server_first(s, (const char *)in, in_len, lookup, lookup_ctx, out, out_len, why);
    else if (s->state == S_FINAL) rc = server_final(s, (const char *)in, in_len, out, out_len, why);
    else rc = (*why = "unexpected SCRAM message", -EINVAL);
    if (rc) s->state = S_FAILED;
    return rc;
}

/* ---- client ---- */

struct gr_scram_client {
    enum gr_scram_mech mech;
    int state;
    char *user, *password;
    char *client_first_bare;
    char nonce[33];
    uint8_t server_sig[64];
};

struct gr_scram_client *gr_scram_client_new(enum gr_scram_mech m, const char *user, const char *password) {
    struct gr_scram_client *c = gr_calloc(1, sizeof *c);
    c->mech = m;
    c->user = gr_strdup(user);
    c->password = gr_strdup(password);
    return c;
}

void gr_scram_client_free(struct gr_scram_client *c) {
    if (!c) return;
    if (c->password) OPENSSL_cleanse(c->password, strlen(c->password));
    free(c->user);
    free(c->password);
    free(c->client_first_bare);
    free(c);
}

/* "=" -> "=3D", "," -> "=2C" */
static char *encode_saslname(const char *u) {
    char *out = gr_malloc(strlen(u) * 3 + 1), *o = out;
    for (const char *p = u; *p; p++) {
        if (*p == ',') o += sprintf(o, "=2C");
        else if (*p == '=') o += sprintf(o, "=3D");
        else *o++ = *p;
    }
    *o = 0;
    return out;
}

int gr_scram_client_step(struct gr_scram_client *c, const uint8_t *in, size_t in_len, uint8_t **out,
                         size_t *out_len) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (c->state == 0) {
        if (random_nonce(c->nonce, sizeof c->nonce) != 0) return -EIO;
        char *u = encode_saslname(c->user);
        c->client_first_bare = gr_asprintf("n=%s,r=%s", u, c->nonce);
        free(u);
        char *m = gr_asprintf("n,,%s", c->client_first_bare);
        *out = (uint8_t *)m;
        *out_len = strlen(m);
        c->state = 1;
        return 0;
    }
    const char *m = (const char *)in;
    if (c->state == 1) {
        size_t rl, sl, il;
        const char *r = attr(m, in_len, "r", &rl), *s = attr(m, in_len, "s", &sl), *i = attr(m, in_len, "i", &il);
        if (!r || !s || !i || il == 0 || il > 9 || rl <= strlen(c->nonce) || memcmp(r, c->nonce, strlen(c->nonce)))
            return -EINVAL;
        int iters = 0;
        for (size_t k = 0; k < il; k++) {
            if (i[k] < '0' || i[k] > '9') return -EINVAL;
            iters = iters * 10 + (i[k] - '0');
        }
        uint8_t salt[128], salted[64], client_key[64], stored[64], sig[64], proof[64], server_key[64];
        int saltl = gr_b64_decode(s, sl, salt, sizeof salt), kl = key_len_of(c->mech);
        /* Kafka's client refuses fewer than 4096 iterations; the upper bound keeps a hostile
         * broker from making the client spin */
        if (saltl <= 0 || iters < GR_SCRAM_MIN_ITERATIONS || iters > GR_SCRAM_CLIENT_MAX_ITERATIONS ||
            gr_scram_salted_password(c->mech, c->password, salt, saltl, iters, salted))
            return -EINVAL;
        char *without = gr_asprintf("c=biws,r=%.*s", (int)rl, r);
        char *auth = gr_asprintf("%s,%.*s,%s", c->client_first_bare, (int)in_len, m, without);
        hmac(c->mech, salted, kl, "Client Key", 10, client_key);
        hash(c->mech, client_key, kl, stored);
        hmac(c->mech, stored, kl, auth, strlen(auth), sig);
        for (int k = 0; k < kl; k++) proof[k] = client_key[k] ^ sig[k];
        hmac(c->mech, salted, kl, "Server Key", 10, server_key);
        hmac(c->mech, server_key, kl, auth, strlen(auth), c->server_sig);
        char *p = gr_b64_encode(proof, (size_t)kl);
        char *fin = gr_asprintf("%s,p=%s", without, p);
        free(p);
        free(without);
        free(auth);
        *out = (uint8_t *)fin;
        *out_len = strlen(fin);
        c->state = 2;
        return 0;
    }
    if (c->state == 2) {
        size_t vl;
        const char *v = attr(m, in_len, "v", &vl);
        uint8_t sig[64];
        int kl = key_len_of(c->mech);
        if (!v || gr_b64_decode(v, vl, sig, sizeof sig) != kl || CRYPTO_memcmp(sig, c->server_sig, (size_t)kl) != 0)
            return -EACCES;
        c->state = 3;
        return 0;
    }
    return -EINVAL;
}
