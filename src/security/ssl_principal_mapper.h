/* ssl.principal.mapping.rules (KIP-371, Kafka's SslPrincipalMapper): the principal name of a TLS
 * client is the first rule's result for the certificate's subject DN (Java's RFC 2253 form,
 * net/x500_name.h).
 *
 * Rules: a comma-separated list of
 *   DEFAULT                           the DN itself
 *   RULE:pattern/replacement/[L|U]    if the Java regular expression `pattern` matches the whole
 *                                     DN, every match of it in the DN is replaced by
 *                                     `replacement` ($1.. groups, \ escapes, as Java's
 *                                     String.replaceAll; a $n beyond the pattern's groups is a
 *                                     literal, as Kafka's escapeLiteralBackReferences), then
 *                                     lower-cased (L) or upper-cased (U)
 * split and parsed with Kafka's own two regular expressions, so what Kafka accepts and refuses
 * here is the same (an invalid rule is an error at start-up). When no rule applies, the
 * connection gets no principal and is closed (Kafka's NoMatchingRule fails the authentication).
 * Patterns are PCRE2 (UTF mode), which reads Java's syntax for the constructs rules use (groups,
 * classes, lazy and greedy quantifiers, anchors, \d \w \s, (?i)); L/U change ASCII letters only
 * (Java's Locale.ENGLISH also maps other Latin letters).
 *
 * Ownership: the mapper belongs to its creator (for listeners: attached to the listener's
 * SSL_CTX, freed with it). Immutable after creation; any thread may map names concurrently. */
#ifndef GR_SECURITY_SSL_PRINCIPAL_MAPPER_H
#define GR_SECURITY_SSL_PRINCIPAL_MAPPER_H

#include <stddef.h>

struct gr_ssl_principal_mapper;

/* rules NULL: "DEFAULT". NULL on an invalid rule, with Kafka's message in err. */
struct gr_ssl_principal_mapper *gr_ssl_principal_mapper_new(const char *rules, char *err, size_t errlen);
void gr_ssl_principal_mapper_free(struct gr_ssl_principal_mapper *m);

/* The principal name for dn (malloc'd), or NULL with the reason in err (no rule applies, or a
 * replacement that Java would refuse, e.g. "$" alone, or a rule whose match on dn exceeds the
 * match limits: 1,000,000 steps, where catastrophic backtracking would stall the network thread
 * and Java would never finish; the connection is refused rather than given a later rule's name). */
char *gr_ssl_principal_mapper_name(const struct gr_ssl_principal_mapper *m, const char *dn, char *err,
                                   size_t errlen);

#endif
