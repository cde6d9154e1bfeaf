/* Java's X500Principal.getName(): see x500_name.h. */
#include "net/x500_name.h"

#include <openssl/asn1.h>
#include <openssl/objects.h>
#include <openssl/x509.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

struct sbuf {
    char *p;
    size_t n, cap;
};

static void put(struct sbuf *b, const void *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = gr_realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void putc_(struct sbuf *b, char c) { put(b, &c, 1); }

/* AVAKeyword entries with rfc2253Compliant = true */
static const char *keyword(int nid) {
    switch (nid) {
    case NID_commonName: return "CN";
    case NID_countryName: return "C";
    case NID_localityName: return "L";
    case NID_stateOrProvinceName: return "ST";
    case NID_organizationName: return "O";
    case NID_organizationalUnitName: return "OU";
    case NID_streetAddress: return "STREET";
    case NID_domainComponent: return "DC";
    case NID_userId: return "UID";
    default: return NULL;
    }
}

/* DerValue tags AVA.isDerString accepts (non-canonical) */
static bool der_string(int type) {
    switch (type) {
    case V_ASN1_PRINTABLESTRING:
    case V_ASN1_T61STRING:
    case V_ASN1_IA5STRING:
    case V_ASN1_GENERALSTRING:
    case V_ASN1_UTF8STRING:
    case V_ASN1_BMPSTRING:
    case V_ASN1_UNIVERSALSTRING: return true;
    default: return false;
    }
}

static void put_hex(struct sbuf *b, const unsigned char *d, size_t len) {
    char x[3];
    for (size_t i = 0; i < len; i++) snprintf(x, sizeof x, "%02x", d[i]), put(b, x, 2);
}

/* '#' + hex of the value's DER encoding (tag, length, contents). OpenSSL keeps a SEQUENCE, SET or
 * unknown value as its whole encoding already, and a BIT STRING without its unused-bits octet. */
static int put_der_hex(struct sbuf *b, const ASN1_STRING *v) {
    int type = ASN1_STRING_type(v);
    const unsigned char *d = ASN1_STRING_get0_data(v);
    size_t len = (size_t)ASN1_STRING_length(v);
    if (type == V_ASN1_SEQUENCE || type == V_ASN1_SET || type == V_ASN1_OTHER) {
        putc_(b, '#');
        put_hex(b, d, len);
        return 0;
    }
    if (type == V_ASN1_BIT_STRING) {
        unsigned char *enc = NULL;
        int n = i2d_ASN1_BIT_STRING((ASN1_BIT_STRING *)v, &enc);
        if (n < 0) return -1;
        putc_(b, '#');
        put_hex(b, enc, (size_t)n);
        OPENSSL_free(enc);
        return 0;
    }
    unsigned char hdr[8];
    size_t h = 0;
    hdr[h++] = (unsigned char)type;
    if (len < 128) {
        hdr[h++] = (unsigned char)len;
    } else {
        int nb = len > 0xffffff ? 4 : len > 0xffff ? 3 : len > 0xff ? 2 : 1;
        hdr[h++] = (unsigned char)(0x80 | nb);
        for (int i = nb - 1; i >= 0; i--) hdr[h++] = (unsigned char)(len >> (8 * i));
    }
    putc_(b, '#');
    put_hex(b, hdr, h);
    put_hex(b, d, len);
    return 0;
}

static int put_string(struct sbuf *b, const ASN1_STRING *v) {
    unsigned char *u = NULL;
    int n = ASN1_STRING_to_UTF8(&u, v);
    if (n < 0) return -1;
    int lead = 0, trail = n - 1;
    while (lead < n && (u[lead] == ' ' || u[lead] == '\r')) lead++;
    while (trail >= 0 && (u[trail] == ' ' || u[trail] == '\r')) trail--;
    for (int i = 0; i < n; i++) {
        char c = (char)u[i];
        if (c == 0) {
            put(b, "\\00", 3);
            continue;
        }
        if (strchr(",=+<>#;\"\\", c) || i < lead || i > trail) putc_(b, '\\');
        putc_(b, c);
    }
    OPENSSL_free(u);
    return 0;
}

static int put_ava(struct sbuf *b, const X509_NAME_ENTRY *e) {
    const ASN1_OBJECT *obj = X509_NAME_ENTRY_get_object(e);
    const ASN1_STRING *v = X509_NAME_ENTRY_get_data(e);
    const char *kw = keyword(OBJ_obj2nid(obj));
    if (kw) {
        put(b, kw, strlen(kw));
    } else {
        char oid[128];
        if (OBJ_obj2txt(oid, sizeof oid, obj, 1) <= 0) return -1;
        put(b, oid, strlen(oid));
    }
    putc_(b, '=');
    if (!kw || !der_string(ASN1_STRING_type(v))) return put_der_hex(b, v);
    return put_string(b, v);
}

char *gr_x500_name_rfc2253(const void *name) {
    const X509_NAME *nm = name;
    int n = X509_NAME_entry_count(nm);
    struct sbuf b = {0};
    put(&b, "", 0);
    /* RDNs from the last to the first; a multi-valued RDN's entries (same set) in order */
    int end = n;
    while (end > 0) {
        int set = X509_NAME_ENTRY_set(X509_NAME_get_entry(nm, end - 1));
        int start = end - 1;
        while (start > 0 && X509_NAME_ENTRY_set(X509_NAME_get_entry(nm, start - 1)) == set) start--;
        if (end < n) putc_(&b, ',');
        for (int i = start; i < end; i++) {
            if (i > start) putc_(&b, '+');
            if (put_ava(&b, X509_NAME_get_entry(nm, i)) != 0) {
                free(b.p);
                return NULL;
            }
        }
        end = start;
    }
    return b.p;
}
