/* SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802 as Kafka implements it: ScramSaslServer,
 * ScramSaslClient, ScramFormatter, ScramCredentialUtils), over OpenSSL's HMAC, PBKDF2, SHA-2 and
 * RAND. Pure functions and small state machines; no I/O, no locks. Every parser takes bytes and a
 * length, never trusts NUL termination, and bounds what it allocates by that length.
 *
 * Credential string (the value under /config/users/<user>, key "SCRAM-SHA-256"/"SCRAM-SHA-512"):
 *     salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>
 *
 * Ownership: states belong to the caller (one connection); *_free releases them. Output messages
 * are malloc'd and owned by the caller. */
#ifndef GR_SECURITY_SCRAM_H
#define GR_SECURITY_SCRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GR_SCRAM_MIN_ITERATIONS 4096
#define GR_SCRAM_MAX_ITERATIONS 16384 /* AlterUserScramCredentials' upper bound */
#define GR_SCRAM_MAX_MESSAGE 4096     /* longer client messages are refused */
#define GR_SCRAM_CLIENT_MAX_ITERATIONS 65536 /* a server asking for more is refused by our client */

enum gr_scram_mech { GR_SCRAM_NONE = 0, GR_SCRAM_SHA_256 = 1, GR_SCRAM_SHA_512 = 2 };

struct gr_scram_cred {
    uint8_t salt[128];
    int salt_len;
    uint8_t stored_key[64];
    uint8_t server_key[64];
    int key_len; /* 32 or 64 */
    int iterations;
};

/* "SCRAM-SHA-256" -> GR_SCRAM_SHA_256 etc. (case-sensitive, as Kafka), else GR_SCRAM_NONE. */
enum gr_scram_mech gr_scram_mech_parse(const char *name);
const char *gr_scram_mech_name(enum gr_scram_mech m);

/* The credential for a salted password (as AlterUserScramCredentials carries it). */
int gr_scram_cred_from_salted(enum gr_scram_mech m, const uint8_t *salt, int salt_len, const uint8_t *salted,
                              int salted_len, int iterations, struct gr_scram_cred *out);
/* The credential for a password: random 32-byte salt (as kafka-configs), Hi(password). */
int gr_scram_cred_from_password(enum gr_scram_mech m, const char *password, int iterations,
                                struct gr_scram_cred *out);
/* Hi(password, salt, iterations) into out (key length bytes). */
int gr_scram_salted_password(enum gr_scram_mech m, const char *password, const uint8_t *salt, int salt_len,
                             int iterations, uint8_t *out);
/* Kafka's credential string; malloc'd. */
char *gr_scram_cred_format(const struct gr_scram_cred *c);
/* Parses it; 0 or -EINVAL. */
int gr_scram_cred_parse(enum gr_scram_mech m, const char *s, struct gr_scram_cred *out);

/* Server side. lookup returns 0 and fills *cred for a known user, -ENOENT otherwise. */
typedef int (*gr_scram_lookup_fn)(void *ctx, enum gr_scram_mech m, const char *user, struct gr_scram_cred *cred);
struct gr_scram_server;
struct gr_scram_server *gr_scram_server_new(enum gr_scram_mech m);
void gr_scram_server_free(void *s);
/* One client message in, one server message out (*out malloc'd, *out_len). Returns 0 (continue /
 * or, after the final message, done: gr_scram_server_done), -EACCES for failed authentication
 * (unknown user, wrong password), -EINVAL for a malformed message; *why says which for logs. */
int gr_scram_server_step(struct gr_scram_server *s, const uint8_t *in, size_t in_len, gr_scram_lookup_fn lookup,
                         void *lookup_ctx, uint8_t **out, size_t *out_len, const char **why);
bool gr_scram_server_done(const struct gr_scram_server *s);
/* The authenticated user name (valid once done). */
const char *gr_scram_server_user(const struct gr_scram_server *s);

/* Client side (inter-broker connections, gregorctl). */
struct gr_scram_client;
struct gr_scram_client *gr_scram_client_new(enum gr_scram_mech m, const char *user, const char *password);
void gr_scram_client_free(struct gr_scram_client *c);
/* First call with in=NULL gives the client-first message; then feed server-first to get
 * client-final; then feed server-final (out NULL) to verify the server. 0 or -EINVAL/-EACCES, or
 * -EIO when no random nonce can be made (RAND_bytes failed). */
int gr_scram_client_step(struct gr_scram_client *c, const uint8_t *in, size_t in_len, uint8_t **out, size_t *out_len);

/* base64 helpers (standard alphabet, padded). decode returns the length or -1. */
char *gr_b64_encode(const uint8_t *p, size_t n);
int gr_b64_decode(const char *s, size_t n, uint8_t *out, size_t cap);

#endif
