/* KIP-511: open connections per client software, Kafka's socket-server-metrics `connections`
 * gauge with the tags clientSoftwareName, clientSoftwareVersion and listener (Kafka's
 * Selector connectionsByClient). A connection counts under unknown/unknown from accept until its
 * ApiVersions (v3+) names the client, then under that name and version, until it closes.
 *
 * Bounded as Kafka's IntGaugeSuite: at most GR_CLIENT_SW_MAX_ENTRIES (name, version) pairs per
 * listener; a connection naming a new pair beyond that is not counted (its old pair is released).
 * An entry goes away when its last connection closes, so clients cannot grow the table past the
 * bound nor keep entries alive once they are gone. Names and versions are Kafka-valid (the
 * ApiVersions handler refuses others: [a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?), so they are
 * safe as metric tag values.
 *
 * Ownership and locking: the table owns its entries and copies of the strings; a connection
 * holds a handle in a slot (struct gr_client_sw *, in its session) that only these functions
 * read or write, under the table's mutex, so the network thread closing a connection and an I/O
 * thread answering its ApiVersions may race. After gr_client_sw_close the slot holds a marker
 * and later calls on it do nothing. Any thread. */
#ifndef GR_NET_CLIENT_SOFTWARE_H
#define GR_NET_CLIENT_SOFTWARE_H

#include <stdint.h>

#define GR_CLIENT_SW_MAX_ENTRIES 100 /* per listener (Kafka: 100 per network processor) */

struct gr_client_sw;
struct gr_client_sw_table;

struct gr_client_sw_table *gr_client_sw_new(void);
/* Frees the table and its entries (every connection closed). NULL ignored. */
void gr_client_sw_free(struct gr_client_sw_table *t);

/* A new connection on listener (copied): counted under unknown/unknown; sets *slot. */
void gr_client_sw_open(struct gr_client_sw_table *t, struct gr_client_sw **slot, const char *listener);
/* The connection's ApiVersions named the client: counts it under (name, version) instead
 * ("" counts as unknown, as Kafka's ClientInformation). No-op after close. */
void gr_client_sw_set(struct gr_client_sw_table *t, struct gr_client_sw **slot, const char *listener,
                      const char *name, const char *version);
/* The connection closed: releases its count (the entry goes with its last connection). */
void gr_client_sw_close(struct gr_client_sw_table *t, struct gr_client_sw **slot);

/* Calls fn for every entry, under the table's mutex (fn must not call back into the table). */
typedef void (*gr_client_sw_fn)(void *ctx, const char *listener, const char *name, const char *version,
                                int64_t connections);
void gr_client_sw_foreach(struct gr_client_sw_table *t, gr_client_sw_fn fn, void *ctx);

#endif
