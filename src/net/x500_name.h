/* A certificate's subject or issuer name as Java prints it: javax.security.auth.x500.X500Principal
 * .getName() (RFC 2253 form), the string Kafka's SSL principal builder starts from, so that
 * principals in ACLs, super.users and ssl.principal.mapping.rules match Kafka's:
 *  - RDNs most specific first (the reverse of the encoding), joined with ','; the attributes of a
 *    multi-valued RDN in encoding order, joined with '+';
 *  - the keywords RFC 2253 defines (CN, C, L, ST, O, OU, STREET, DC, UID); any other attribute
 *    type as its dotted OID (emailAddress is 1.2.840.113549.1.9.1, serialNumber 2.5.4.5);
 *  - a value of an OID-named attribute, or of a non-string type, as '#' and the lower-case hex of
 *    its DER encoding; a string value as UTF-8 with each of , = + < > # ; " \ preceded by '\',
 *    leading and trailing spaces escaped, and NUL written as \00 (sun.security.x509.AVA).
 * Stateless; any thread. */
#ifndef GR_NET_X500_NAME_H
#define GR_NET_X500_NAME_H

/* name is an X509_NAME *; returns a malloc'd string, or NULL if the name cannot be decoded. */
char *gr_x500_name_rfc2253(const void *name);

#endif
