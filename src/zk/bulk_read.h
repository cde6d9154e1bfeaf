/* Bulk read: many getData requests (no watches) pipelined on a short-lived second ZooKeeper
 * session, for the controller's context load (100k partition states at a failover).
 *
 * Why: libzookeeper-mt sends each request with two send(2) calls after waking its I/O thread
 * through a pipe, reads each reply with two recv(2) calls and hands it to its completion thread:
 * ~6 system calls and two thread hand-offs per read, which on a 2-core machine cost more CPU than
 * ZooKeeper spends answering. This reader speaks the wire protocol itself on one socket: requests
 * go out in 64 KiB writes, replies come in with 1 MiB reads, up to GR_ZK_BULK_WINDOW in flight.
 *
 * Consistency: it connects to the server the main session is connected to and sends `sync`
 * before its reads (ZooKeeper answers a session's requests in order), so every read sees at least
 * what was committed when the sync reached the leader -- including every write the main session
 * made before the call. Reads only: nothing is written through it, and it sets no watches (reads
 * that arm a watch stay on the main session). It authenticates with the same digest identity.
 *
 * gr_zk_bulk_get: results[i] gets the server's answer for paths[i] (rc 0 with data and stat, or
 * the ZooKeeper error such as GR_ZNONODE), exactly as get_many would. Returns GR_ZOK when every
 * item was answered; otherwise an error (connection, authentication, protocol) with every result
 * released and zeroed -- the caller then reads through the main session. Blocking; thread-safe
 * (no shared state). */
#ifndef GR_ZK_BULK_READ_H
#define GR_ZK_BULK_READ_H

#include "zk/backend.h"

#define GR_ZK_BULK_WINDOW 5000

struct gr_zk_bulk_target {
    const char *hostport;    /* "host:port" (IPv4, IPv6 or name; the last ':' splits) */
    const char *chroot;      /* "" or "/a/b" */
    const char *digest_auth; /* "user:password" or NULL */
    int timeout_ms;          /* session timeout and the longest wait for any reply */
};

int gr_zk_bulk_get(const struct gr_zk_bulk_target *t, const char *const *paths, int n,
                   struct gr_zget_result *results);

/* How many gr_zk_bulk_get calls have succeeded in this process (tests). */
long gr_zk_bulk_reads(void);

#endif
