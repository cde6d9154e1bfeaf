/* The broker's SASL configuration and mechanisms (Kafka's SaslServerAuthenticator, JaasContext,
 * PlainSaslServer + PlainServerCallbackHandler; SCRAM in scram.h).
 *
 * Configuration lookup for listener L and mechanism M (lower-case m), first hit wins:
 *   listener.name.<l>.<m>.sasl.jaas.config, <m>.sasl.jaas.config,
 *   listener.name.<l>.sasl.jaas.config, sasl.jaas.config
 * Enabled mechanisms: listener.name.<l>.sasl.enabled.mechanisms, sasl.enabled.mechanisms
 * (Kafka's default GSSAPI, which Gregor does not implement). PLAIN, SCRAM-SHA-256 and
 * SCRAM-SHA-512 are implemented.
 *
 * JAAS text: `<LoginModule class> required key="value" key2=value2;` (several modules are
 * allowed; options of all of them are searched).
 *
 * All functions are pure or read the broker's immutable config; any thread. */
#ifndef GR_SECURITY_SASL_SERVER_H
#define GR_SECURITY_SASL_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gr_config;

/* The value of option `key` in a JAAS configuration, malloc'd, or NULL. */
char *gr_jaas_option(const char *jaas, const char *key);

/* The JAAS text for listener and mechanism (order above), or NULL. Borrowed from cfg. */
const char *gr_sasl_jaas_config(const struct gr_config *cfg, const char *listener, const char *mechanism);

/* The enabled mechanisms of listener as written ("SCRAM-SHA-512,PLAIN"); borrowed or a static
 * default "GSSAPI". */
const char *gr_sasl_enabled_mechanisms(const struct gr_config *cfg, const char *listener);
/* Is mechanism enabled on listener and implemented? */
bool gr_sasl_mechanism_enabled(const struct gr_config *cfg, const char *listener, const char *mechanism);

/* PLAIN: token "authzid NUL authcid NUL password" checked against the JAAS `user_<authcid>`
 * options. 0 and the user name in `user`; -EACCES (wrong password, unknown user, authzid
 * differs) or -EINVAL (malformed), *why says which. */
int gr_sasl_plain_check(const char *jaas, const uint8_t *tok, size_t n, char *user, size_t cap, const char **why);

/* Kafka's Sanitizer.sanitize: the znode name of a user (URL encoding, '*' -> %2A, ' ' -> %20). */
char *gr_sanitize_user(const char *user);
char *gr_desanitize_user(const char *name);

#endif
