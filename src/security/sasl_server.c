/* SASL configuration, JAAS options and PLAIN: see sasl_server.h. */
#include "security/sasl_server.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/config.h"
#include "common/util.h"

char *gr_jaas_option(const char *jaas, const char *key) {
    if (!jaas || !key) return NULL;
    size_t kl = strlen(key);
    const char *p = jaas;
    while (*p) {
        /* at a token boundary: skip blanks and ';' */
        while (*p && (isspace((unsigned char)*p) || *p == ';')) p++;
        const char *t = p;
        while (*p && !isspace((unsigned char)*p) && *p != '=' && *p != ';') p++;
        size_t tl = (size_t)(p - t);
        if (*p != '=') { /* a class name or flag */
            if (!tl && *p) p++;
            continue;
        }
        p++; /* '=' */
        const char *v = p;
        size_t vl;
        char *val;
        if (*p == '"') {
            v = ++p;
            char *buf = gr_malloc(strlen(v) + 1);
            size_t o = 0;
            while (*p && *p != '"') {
                if (*p == '\\' && p[1]) p++;
                buf[o++] = *p++;
            }
            buf[o] = 0;
            if (*p == '"') p++;
            val = buf;
        } else {
            while (*p && !isspace((unsigned char)*p) && *p != ';') p++;
            vl = (size_t)(p - v);
            val = gr_strndup(v, vl);
        }
        if (tl == kl && memcmp(t, key, kl) == 0) return val;
        free(val);
    }
    return NULL;
}

const char *gr_sasl_jaas_config(const struct gr_config *cfg, const char *listener, const char *mechanism) {
    char key[128];
    snprintf(key, sizeof key, "%s.sasl.jaas.config", mechanism);
    for (char *c = key; *c; c++) *c = (char)tolower((unsigned char)*c);
    const char *v = gr_config_listener_prop(cfg, listener, key);
    return v ? v : gr_config_listener_prop(cfg, listener, "sasl.jaas.config");
}

const char *gr_sasl_enabled_mechanisms(const struct gr_config *cfg, const char *listener) {
    const char *v = cfg ? gr_config_listener_prop(cfg, listener, "sasl.enabled.mechanisms") : NULL;
    return v ? v : "GSSAPI";
}

bool gr_sasl_mechanism_enabled(const struct gr_config *cfg, const char *listener, const char *mechanism) {
    if (!mechanism || (strcmp(mechanism, "PLAIN") != 0 && strcmp(mechanism, "SCRAM-SHA-256") != 0 &&
                       strcmp(mechanism, "SCRAM-SHA-512") != 0))
        return false;
    size_t ml = strlen(mechanism);
    for (const char *p = gr_sasl_enabled_mechanisms(cfg, listener); *p;) {
        while (*p == ',' || *p == ' ') p++;
        size_t n = strcspn(p, ", ");
        if (n == ml && strncmp(p, mechanism, n) == 0) return true;
        p += n;
    }
    return false;
}

int gr_sasl_plain_check(const char *jaas, const uint8_t *tok, size_t n, char *user, size_t cap, const char **why) {
    /* [authzid] NUL authcid NUL passwd */
    const uint8_t *z1 = memchr(tok, 0, n);
    const uint8_t *z2 = z1 ? memchr(z1 + 1, 0, n - (size_t)(z1 + 1 - tok)) : NULL;
    if (!z1 || !z2 || memchr(z2 + 1, 0, n - (size_t)(z2 + 1 - tok))) {
        *why = "invalid SASL/PLAIN response: expected 3 tokens";
        return -EINVAL;
    }
    size_t azl = (size_t)(z1 - tok), ul = (size_t)(z2 - z1 - 1), pl = n - (size_t)(z2 + 1 - tok);
    if (ul == 0 || pl == 0) {
        *why = ul ? "password not specified" : "username not specified";
        return -EINVAL;
    }
    if (ul >= cap || ul > 255) {
        *why = "username too long";
        return -EINVAL;
    }
    if (azl && (azl != ul || memcmp(tok, z1 + 1, ul) != 0)) {
        *why = "authorization id differs from the user name";
        return -EACCES;
    }
    memcpy(user, z1 + 1, ul);
    user[ul] = 0;
    char key[300];
    snprintf(key, sizeof key, "user_%s", user);
    char *expected = gr_jaas_option(jaas, key);
    bool ok = expected && strlen(expected) == pl && CRYPTO_memcmp(expected, z2 + 1, pl) == 0;
    if (expected) OPENSSL_cleanse(expected, strlen(expected));
    free(expected);
    if (!ok) {
        *why = "invalid username or password";
        return -EACCES;
    }
    return 0;
}

char *gr_sanitize_user(const char *user) {
    char *out = gr_malloc(strlen(user) * 3 + 1), *o = out;
    for (const unsigned char *p = (const unsigned char *)user; *p; p++) {
        if (isalnum(*p) || *p == '.' || *p == '-' || *p == '_') *o++ = (char)*p;
        else o += sprintf(o, "%%%02X", *p);
    }
    *o = 0;
    return out;
}

static int hexv(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

char *gr_desanitize_user(const char *name) {
    char *out = gr_malloc(strlen(name) + 1), *o = out;
    for (const char *p = name; *p; p++) {
        if (*p == '%' && hexv(p[1]) >= 0 && hexv(p[2]) >= 0) {
            *o++ = (char)(hexv(p[1]) * 16 + hexv(p[2]));
            p += 2;
        } else if (*p == '+') {
            *o++ = ' ';
        } else {
            *o++ = *p;
        }
    }
    *o = 0;
    return out;
}
