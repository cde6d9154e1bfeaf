"""Hostile input, part two (docs/SECURITY.md "Hostile input: limits"): the ACL cache fails closed
(an unparsable ACL znode stops the start-up; a failed reload after a change notification is
retried), and the connection and request-queue limits (max.connections, max.connections.per.ip,
max.connections.per.ip.overrides, queued.max.requests).
"""

import json
import socket
import struct
import time

import pytest

import gregor_harness as H

from confluent_kafka.admin import AdminClient, NewTopic

AUTH = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS;User:admin",
    "gregor.test.principal.by.client.id": "true",
}


def acl_json(*entries):
    return json.dumps({"version": 1, "acls": [
        {"principal": p, "permissionType": "Allow", "operation": op, "host": "*"} for p, op in entries
    ]}).encode()


def describe_error(broker, principal, topic):
    """The error code of a named Metadata request for `topic` as `principal` (0: allowed)."""
    a = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}", "client.id": principal})
    err = a.list_topics(topic=topic, timeout=10).topics[topic].error
    return err.code() if err else 0


# ---- item 1: the ACL cache fails closed ---------------------------------------------------------

def test_unparsable_acl_znode_stops_the_start_up(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=1, config=AUTH, start=False)
    c.zk.create("/kafka-acl/Topic/x", b"{not json", makepath=True)
    b = c.brokers[1]
    b.start()
    assert b.wait_exit(timeout=15) == 1
    log = b.log()
    assert "/kafka-acl/Topic/x" in log and "Cannot load the ACLs" in log, b.log_tail()


def test_failed_acl_reload_is_retried(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=1, config=AUTH)
    b = c.brokers[1]
    admin = AdminClient({"bootstrap.servers": b.address})
    admin.create_topics([NewTopic("x", 1, 1)])["x"].result()
    # alice may describe x (written as a foreign writer would: znode, then notification)
    c.zk.create("/kafka-acl/Topic/x", acl_json(("User:alice", "Describe")), makepath=True)
    c.zk.create("/kafka-acl-changes/acl_changes_", b"TOPIC:x", sequence=True)
    H.wait_for(lambda: describe_error(b, "User:alice", "x") == 0, timeout=10, what="alice allowed")
    # the znode becomes unreadable and a notification comes: the reload fails ...
    c.zk.set("/kafka-acl/Topic/x", b"garbage")
    c.zk.create("/kafka-acl-changes/acl_changes_", b"TOPIC:x", sequence=True)
    H.wait_for(lambda: "Cannot reload the ACLs of /kafka-acl/Topic/x" in b.log(), timeout=10,
               what="the failed reload logged")
    # ... and is retried: once the znode is readable (alice's ALLOW gone, no new notification),
    # the cache follows it
    c.zk.set("/kafka-acl/Topic/x", acl_json(("User:bob", "Describe")))
    H.wait_for(lambda: describe_error(b, "User:alice", "x") == 29, timeout=10, what="alice denied")
    assert describe_error(b, "User:bob", "x") == 0
