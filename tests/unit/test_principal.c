/* The principal of a TLS client: Java's RFC 2253 DN form (net/x500_name.h) and
 * ssl.principal.mapping.rules (security/ssl_principal_mapper.h), with the cases of Kafka's
 * SslPrincipalMapperTest and X500Principal's escaping rules. */
#include <openssl/objects.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "net/x500_name.h"
#include "security/ssl_principal_mapper.h"
#include "support/check.h"

int test_failures;

static void expect_name(const char *rules, const char *dn, const char *want) {
    char err[512] = "";
    struct gr_ssl_principal_mapper *m = gr_ssl_principal_mapper_new(rules, err, sizeof err);
    CHECKF(m != NULL, "rules %s: %s", rules, err);
    if (!m) return;
    char *got = gr_ssl_principal_mapper_name(m, dn, err, sizeof err);
    if (want)
        CHECKF(got && strcmp(got, want) == 0, "%s -> %s (want %s; %s)", dn, got ? got : "NULL", want, err);
    else
        CHECKF(!got, "%s -> %s (want no match)", dn, got);
    free(got);
    gr_ssl_principal_mapper_free(m);
}

static void test_valid_and_invalid_rules(void) {
    const char *valid[] = {"DEFAULT",
                           "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
                           "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                           "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                           "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                           "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
                           "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
                           "  DEFAULT  ,",
                           ""};
    const char *invalid[] = {"default",
                             "DEFAUL",
                             "DEFAULT/L",
                             "DEFAULT/U",
                             "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
                             "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
                             "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
                             "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
                             "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
                             "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
                             "RULE:^CN=((.*$/$1/"};
    char err[512];
    for (size_t i = 0; i < sizeof valid / sizeof *valid; i++) {
        struct gr_ssl_principal_mapper *m = gr_ssl_principal_mapper_new(valid[i], err, sizeof err);
        CHECKF(m != NULL, "valid rule refused: %s (%s)", valid[i], err);
        gr_ssl_principal_mapper_free(m);
    }
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) {
        struct gr_ssl_principal_mapper *m = gr_ssl_principal_mapper_new(invalid[i], err, sizeof err);
        CHECKF(m == NULL, "invalid rule accepted: %s", invalid[i]);
        gr_ssl_principal_mapper_free(m);
    }
}

static void test_mapping(void) {
    const char *rules = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, "
                        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, "
                        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, "
                        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, "
                        "DEFAULT";
    expect_name(rules, "CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke");
    expect_name(rules, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme");
    expect_name(rules, "cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME");
    expect_name(rules, "cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE");
    expect_name(rules, "OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US");
    /* an escaped comma inside a CN (Kafka's testCommaWithWhitespace) */
    expect_name("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT", "CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz",
                "Tkac\\, Adam");
    /* no DEFAULT: nothing applies */
    expect_name("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "CN=x,O=y", NULL);
    /* $n beyond the groups is literal (escapeLiteralBackReferences), $12 with one group is $1 then 2 */
    expect_name("RULE:^CN=([a-z]+)$/$1-$3/", "CN=abc", "abc-$3");
    expect_name("RULE:^CN=([a-z]+)$/$12/", "CN=abc", "abc2");
    expect_name("RULE:^CN=([a-z]+)$/\\$1 costs \\\\ $1/", "CN=abc", "$1 costs \\ abc");
    /* replaceAll: every match of the pattern, here also the empty one at the end */
    expect_name("RULE:.*/x/", "CN=abc", "xx");
    expect_name(NULL, "CN=a", "CN=a");
}

static X509_NAME *name_of(const char *const *kv, int n, const int *types) {
    X509_NAME *nm = X509_NAME_new();
    for (int i = 0; i < n; i++)
        X509_NAME_add_entry_by_txt(nm, kv[2 * i], types[i], (const unsigned char *)kv[2 * i + 1], -1, -1,
                                   0);
    return nm;
}

static void expect_dn(X509_NAME *nm, const char *want) {
    char *got = gr_x500_name_rfc2253(nm);
    CHECKF(got && strcmp(got, want) == 0, "DN %s (want %s)", got ? got : "NULL", want);
    free(got);
    X509_NAME_free(nm);
}

static void test_java_dn(void) {
    /* basic attributes, reversed; escaping of , + = # ; < > " \ and of leading/trailing spaces */
    const char *a[] = {"C", "US", "O", "Example, Inc.", "OU", " a+b=c#d;e<f>g\"h\\i ", "CN", "svc"};
    int t[] = {MBSTRING_ASC, MBSTRING_ASC, MBSTRING_ASC, MBSTRING_ASC};
    expect_dn(name_of(a, 4, t), "CN=svc,OU=\\ a\\+b\\=c\\#d\\;e\\<f\\>g\\\"h\\\\i\\ ,O=Example\\, Inc.,C=US");
    /* non-RFC 2253 keywords as OIDs with #hex DER: emailAddress (IA5String), serialNumber
     * (PrintableString), title; the RFC 2253 ones that OpenSSL names differently (ST, STREET,
     * DC, UID) by keyword */
    const char *b[] = {"DC", "com", "ST", "CA", "street", "Main St", "UID", "u1", "title", "Boss",
                       "emailAddress", "svc@example.com", "serialNumber", "S42", "CN", "x"};
    int t2[] = {V_ASN1_IA5STRING,  V_ASN1_UTF8STRING, V_ASN1_UTF8STRING,      V_ASN1_UTF8STRING,
                V_ASN1_UTF8STRING, V_ASN1_IA5STRING,  V_ASN1_PRINTABLESTRING, V_ASN1_UTF8STRING};
    expect_dn(name_of(b, 8, t2),
              "CN=x,2.5.4.5=#1303533432,1.2.840.113549.1.9.1=#160f737663406578616d706c652e636f6d,"
              "2.5.4.12=#0c04426f7373,UID=u1,STREET=Main St,ST=CA,DC=com");
    /* a multi-valued RDN: its attributes in encoding order, joined by + */
    const char *c[] = {"O", "Org", "CN", "a", "UID", "b"};
    int t3[] = {MBSTRING_ASC, MBSTRING_ASC, MBSTRING_ASC};
    X509_NAME *nm = X509_NAME_new();
    X509_NAME_add_entry_by_txt(nm, c[0], t3[0], (const unsigned char *)c[1], -1, -1, 0);
    X509_NAME_add_entry_by_txt(nm, c[2], t3[1], (const unsigned char *)c[3], -1, -1, 0);
    X509_NAME_add_entry_by_txt(nm, c[4], t3[2], (const unsigned char *)c[5], -1, -1, -1); /* same RDN as CN */
    expect_dn(nm, "CN=a+UID=b,O=Org");
    /* UTF-8 stays UTF-8 (Java does not escape non-ASCII characters) */
    const char *d[] = {"CN", "J\xc3\xbcrgen"};
    int t4[] = {MBSTRING_UTF8};
    expect_dn(name_of(d, 1, t4), "CN=J\xc3\xbcrgen");
}

/* A rule whose match exceeds PCRE2's limits on a hostile DN (catastrophic backtracking): the
 * connection is refused (NULL), not given the next rule's name as if the rule did not match, and
 * the match ends after a bounded amount of work on the network thread. */
static void test_match_limit_fails_closed(void) {
    char dn[128] = "CN=";
    memset(dn + 3, 'a', 60);
    strcpy(dn + 63, "!,O=x");
    char err[512] = "";
    struct gr_ssl_principal_mapper *m = gr_ssl_principal_mapper_new("RULE:^CN=(a+)+,O=x$/admin/,DEFAULT", err, sizeof err);
    CHECKF(m != NULL, "rules: %s", err);
    if (!m) return;
    err[0] = 0;
    char *got = gr_ssl_principal_mapper_name(m, dn, err, sizeof err);
    CHECKF(!got, "a rule over the match limit fell through to the next rule: %s", got ? got : "");
    CHECKF(strstr(err, "limit") != NULL, "reason: %s", err);
    free(got);
    gr_ssl_principal_mapper_free(m);
    /* the same rule still maps an ordinary DN, and a DN it does not match reaches DEFAULT */
    expect_name("RULE:^CN=(a+)+,O=x$/admin/,DEFAULT", "CN=aaa,O=x", "admin");
    expect_name("RULE:^CN=(a+)+,O=x$/admin/,DEFAULT", "CN=bob,O=x", "CN=bob,O=x");
}

/* Values that are not strings, as OpenSSL reads them from a certificate: a SEQUENCE keeps its
 * whole DER encoding (tag and length included), which is what Java prints after '#' (a second
 * header would make a DN no Kafka ACL names). */
static void test_java_dn_der_values(void) {
    /* Name ::= SEQUENCE { SET { SEQUENCE { OID 1.2.3.4, SEQUENCE { INTEGER 5 } } },
     *                     SET { SEQUENCE { OID 2.5.4.3 (CN), SEQUENCE { INTEGER 7 } } },
     *                     SET { SEQUENCE { OID 1.2.3.5, BIT STRING (7 unused bits) 0x80 } } } */
    static const unsigned char name_der[] = {0x30, 0x29, 0x31, 0x0c, 0x30, 0x0a, 0x06, 0x03, 0x2a, 0x03, 0x04,
                                             0x30, 0x03, 0x02, 0x01, 0x05, 0x31, 0x0c, 0x30, 0x0a, 0x06, 0x03,
                                             0x55, 0x04, 0x03, 0x30, 0x03, 0x02, 0x01, 0x07, 0x31, 0x0b, 0x30,
                                             0x09, 0x06, 0x03, 0x2a, 0x03, 0x05, 0x03, 0x02, 0x07, 0x80};
    const unsigned char *p = name_der;
    X509_NAME *nm = d2i_X509_NAME(NULL, &p, (long)sizeof name_der);
    CHECKF(nm != NULL, "d2i_X509_NAME");
    if (nm) expect_dn(nm, "1.2.3.5=#03020780,CN=#3003020107,1.2.3.4=#3003020105");
}

int main(void) {
    gr_log_set_level(GR_LOG_ERROR);
    test_valid_and_invalid_rules();
    test_match_limit_fails_closed();
    test_mapping();
    test_java_dn();
    test_java_dn_der_values();
    if (test_failures) fprintf(stderr, "%d failure(s)\n", test_failures);
    return test_failures ? 1 : 0;
}
