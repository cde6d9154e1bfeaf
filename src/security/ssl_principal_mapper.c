/* Kafka's SslPrincipalMapper: see ssl_principal_mapper.h. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "security/ssl_principal_mapper.h"

#include <ctype.h>
#include <pcre2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* Kafka's RULE_PATTERN and RULE_SPLITTER, unchanged */
#define RULE_PATTERN "(DEFAULT)|RULE:((\\\\.|[^\\\\/])*)/((\\\\.|[^\\\\/])*)/([LU]?).*?|(.*?)"
#define RULE_SPLITTER "\\s*(" RULE_PATTERN ")\\s*(,\\s*|$)"

struct rule {
    bool is_default;
    pcre2_code *re;
    char *replacement; /* Java's replacement string, as written */
    int groups;
    bool lower, upper;
};

/* Bounds of one match of a rule on a DN (PCRE2's defaults are 10,000,000 steps): a rule that
 * backtracks catastrophically on a hostile DN stops the mapping of that connection on the
 * network thread after a few milliseconds (Java's matcher has no bound at all). */
#define MATCH_LIMIT 1000000
#define DEPTH_LIMIT 100000

struct gr_ssl_principal_mapper {
    struct rule *rules;
    int n;
    pcre2_match_context *mctx; /* the limits above; read-only once built */
};

static pcre2_code *compile(const char *pattern, uint32_t opts, char *err, size_t errlen) {
    int ec;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &ec, &off, NULL);
    if (!re && err) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        snprintf(err, errlen, "Invalid regular expression %s: %s at offset %zu", pattern, (char *)msg, (size_t)off);
    }
    return re;
}

static char *group(const char *s, const PCRE2_SIZE *ov, int g) {
    if (ov[2 * g] == PCRE2_UNSET) return NULL;
    return gr_strndup(s + ov[2 * g], ov[2 * g + 1] - ov[2 * g]);
}

void gr_ssl_principal_mapper_free(struct gr_ssl_principal_mapper *m) {
    if (!m) return;
    for (int i = 0; i < m->n; i++) {
        pcre2_code_free(m->rules[i].re);
        free(m->rules[i].replacement);
    }
    free(m->rules);
    pcre2_match_context_free(m->mctx);
    free(m);
}

/* Parses one rule (Kafka's parseRules step); 0, 1 (empty: ignored) or -1. */
static int parse_rule(pcre2_code *parser, const char *rule, struct rule *out, char *err, size_t errlen) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(parser, NULL);
    size_t len = strlen(rule);
    int rc = pcre2_match(parser, (PCRE2_SPTR)rule, len, 0, PCRE2_ANCHORED, md, NULL); /* lookingAt */
    int ret = 1;
    if (rc < 0) {
        snprintf(err, errlen, "Invalid rule: %s", rule);
        ret = -1;
        goto done;
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    if (ov[1] != len) {
        snprintf(err, errlen, "Invalid rule: `%s`, unmatched substring: `%s`", rule, rule + ov[1]);
        ret = -1;
        goto done;
    }
    memset(out, 0, sizeof *out);
    if (rc > 1 && ov[2] != PCRE2_UNSET) {
        out->is_default = true;
        ret = 0;
    } else if (rc > 2 && ov[4] != PCRE2_UNSET) {
        char *pat = group(rule, ov, 2), *lu = rc > 6 ? group(rule, ov, 6) : NULL;
        out->re = compile(pat, PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, err, errlen);
        free(pat);
        if (!out->re) {
            free(lu);
            ret = -1;
            goto done;
        }
        out->replacement = rc > 4 ? group(rule, ov, 4) : NULL;
        if (!out->replacement) out->replacement = gr_strdup("");
        uint32_t caps = 0;
        pcre2_pattern_info(out->re, PCRE2_INFO_CAPTURECOUNT, &caps);
        out->groups = (int)caps;
        out->lower = lu && strcmp(lu, "L") == 0;
        out->upper = lu && strcmp(lu, "U") == 0;
        free(lu);
        ret = 0;
    }
done:
    pcre2_match_data_free(md);
    return ret;
}

struct gr_ssl_principal_mapper *gr_ssl_principal_mapper_new(const char *rules, char *err, size_t errlen) {
    if (!rules) rules = "DEFAULT";
    while (isspace((unsigned char)*rules)) rules++; /* String.trim */
    size_t len = strlen(rules);
    while (len > 0 && isspace((unsigned char)rules[len - 1])) len--;
    char *text = gr_strndup(rules, len);
    pcre2_code *splitter = compile(RULE_SPLITTER, 0, err, errlen), *parser = compile(RULE_PATTERN, 0, err, errlen);
    struct gr_ssl_principal_mapper *m = gr_calloc(1, sizeof *m);
    m->mctx = pcre2_match_context_create(NULL);
    bool ok = splitter && parser;
    if (ok && !m->mctx) {
        snprintf(err, errlen, "cannot allocate a PCRE2 match context");
        ok = false;
    }
    if (m->mctx) {
        pcre2_set_match_limit(m->mctx, MATCH_LIMIT);
        pcre2_set_depth_limit(m->mctx, DEPTH_LIMIT);
    }
    pcre2_match_data *md = ok ? pcre2_match_data_create_from_pattern(splitter, NULL) : NULL;
    for (size_t off = 0; ok && off <= len;) { /* Matcher.find, empty matches advancing by one */
        int rc = pcre2_match(splitter, (PCRE2_SPTR)text, len, off, 0, md, NULL);
        if (rc < 0) break;
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        char *one = group(text, ov, 1);
        struct rule r;
        int pr = parse_rule(parser, one ? one : "", &r, err, errlen);
        free(one);
        if (pr < 0) ok = false;
        if (pr == 0) {
            m->rules = gr_realloc(m->rules, sizeof *m->rules * (size_t)(m->n + 1));
            m->rules[m->n++] = r;
        }
        off = ov[1] > ov[0] ? ov[1] : ov[1] + 1;
    }
    pcre2_match_data_free(md);
    pcre2_code_free(splitter);
    pcre2_code_free(parser);
    free(text);
    if (!ok) {
        gr_ssl_principal_mapper_free(m);
        return NULL;
    }
    return m;
}

/* Java's replacement syntax (after Kafka's escapeLiteralBackReferences) -> PCRE2's: \c is c, $n
 * takes as many digits as still name a group, ${name}; a literal $ is $$. -1 where Java throws. */
static int java_replacement(const char *in, int groups, char **out, char *err, size_t errlen) {
    size_t n = strlen(in);
    char *o = gr_malloc(n * 4 + 16), *p = o;
    for (size_t i = 0; i < n;) {
        char c = in[i];
        if (c == '\\') {
            if (i + 1 >= n) {
                snprintf(err, errlen, "character to be escaped is missing in the replacement %s", in);
                free(o);
                return -1;
            }
            if (in[i + 1] == '$') *p++ = '$';
            *p++ = in[i + 1];
            i += 2;
        } else if (c == '$' && i + 1 < n && in[i + 1] == '{') {
            const char *close = strchr(in + i, '}');
            if (!close) {
                snprintf(err, errlen, "named capturing group is missing trailing '}' in the replacement %s", in);
                free(o);
                return -1;
            }
            memcpy(p, in + i, (size_t)(close - (in + i)) + 1);
            p += close - (in + i) + 1;
            i = (size_t)(close - in) + 1;
        } else if (c == '$' && i + 1 < n && isdigit((unsigned char)in[i + 1])) {
            /* Kafka's escapeLiteralBackReferences: with groups, a $n naming no group (after
             * dropping trailing digits down to one) is a literal */
            size_t d = i + 1;
            while (d < n && isdigit((unsigned char)in[d])) d++;
            if (groups > 0 && in[i + 1] != '0') {
                long idx = strtol(in + i + 1, NULL, 10);
                if (d - (i + 1) > 9) idx = 1000000000L;
                while (idx > groups && idx >= 10) idx /= 10;
                if (idx > groups) {
                    p += sprintf(p, "$$");
                    i++;
                    continue;
                }
            }
            /* Java's appendReplacement: the first digit, then more while they name a group */
            int ref = in[i + 1] - '0';
            size_t k = i + 2;
            while (k < n && isdigit((unsigned char)in[k]) && ref * 10 + (in[k] - '0') <= groups) {
                ref = ref * 10 + (in[k] - '0');
                k++;
            }
            if (ref > groups) {
                snprintf(err, errlen, "No group %d in the replacement %s", ref, in);
                free(o);
                return -1;
            }
            p += sprintf(p, "${%d}", ref);
            i = k;
        } else if (c == '$') {
            snprintf(err, errlen, "Illegal group reference in the replacement %s", in);
            free(o);
            return -1;
        } else {
            *p++ = c;
            i++;
        }
    }
    *p = 0;
    *out = o;
    return 0;
}

static char *apply(const struct gr_ssl_principal_mapper *m, const struct rule *r, const char *dn, char *err,
                   size_t errlen, bool *failed) {
    *failed = false;
    if (r->is_default) return gr_strdup(dn);
    size_t len = strlen(dn);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(r->re, NULL);
    int rc = pcre2_match(r->re, (PCRE2_SPTR)dn, len, 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, md, m->mctx); /* matches() */
    pcre2_match_data_free(md);
    if (rc == PCRE2_ERROR_NOMATCH) return NULL;
    if (rc < 0) { /* over a limit, out of memory: not "no match" (the next rule would name it) */
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(rc, msg, sizeof msg);
        snprintf(err, errlen, "cannot match a rule against %s: %s", dn, (char *)msg);
        *failed = true;
        return NULL;
    }
    char *repl;
    if (java_replacement(r->replacement, r->groups, &repl, err, errlen) != 0) {
        *failed = true;
        return NULL;
    }
    PCRE2_SIZE outlen = len * 2 + strlen(repl) * 4 + 64;
    char *out = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        out = gr_realloc(out, outlen + 1);
        PCRE2_SIZE got = outlen + 1;
        rc = pcre2_substitute(r->re, (PCRE2_SPTR)dn, len, 0,
                              PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH, NULL, m->mctx,
                              (PCRE2_SPTR)repl, PCRE2_ZERO_TERMINATED, (PCRE2_UCHAR *)out, &got);
        if (rc == PCRE2_ERROR_NOMEMORY) {
            outlen = got;
            continue;
        }
        break;
    }
    free(repl);
    if (rc < 0) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(rc, msg, sizeof msg);
        snprintf(err, errlen, "cannot apply the replacement of a rule: %s", (char *)msg);
        free(out);
        *failed = true;
        return NULL;
    }
    for (char *c = out; *c; c++) {
        if (r->lower) *c = (char)tolower((unsigned char)*c);
        else if (r->upper) *c = (char)toupper((unsigned char)*c);
    }
    return out;
}

char *gr_ssl_principal_mapper_name(const struct gr_ssl_principal_mapper *m, const char *dn, char *err,
                                   size_t errlen) {
    for (int i = 0; m && i < m->n; i++) {
        bool failed;
        char *name = apply(m, &m->rules[i], dn, err, errlen, &failed);
        if (name) return name;
        if (failed) return NULL;
    }
    snprintf(err, errlen, "No rules apply to %s", dn);
    return NULL;
}
