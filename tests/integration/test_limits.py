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
from kafka_wire import closed_by_peer, connect_from

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


# ---- item 2: connection limits and queued.max.requests ------------------------------------------

def api_versions_frame(corr):
    body = struct.pack(">hhih", 18, 0, corr, 4) + b"test"  # ApiVersions v0, client.id "test"
    return struct.pack(">i", len(body)) + body


def answered(s, corr=7, timeout=5.0):
    """Sends ApiVersions on s; True when its response comes, False on EOF, reset or timeout."""
    s.settimeout(timeout)
    try:
        s.sendall(api_versions_frame(corr))
        hdr = b""
        while len(hdr) < 8:
            chunk = s.recv(8 - len(hdr))
            if not chunk:
                return False
            hdr += chunk
        size, got = struct.unpack(">ii", hdr)
        left = size - 4
        while left > 0:
            chunk = s.recv(min(left, 65536))
            if not chunk:
                return False
            left -= len(chunk)
        return got == corr
    except (socket.timeout, ConnectionError, OSError):
        return False


def test_max_connections_per_ip_and_overrides(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=1, config={
        "max.connections.per.ip": "5",
        "max.connections.per.ip.overrides": "127.0.0.4:2",
    })
    port = c.brokers[1].port
    socks = [connect_from("127.0.0.3", port) for _ in range(5)]
    for i, s in enumerate(socks):
        assert answered(s, corr=i), f"connection {i} from 127.0.0.3"
    sixth = connect_from("127.0.0.3", port)
    assert closed_by_peer(sixth), "the 6th connection from 127.0.0.3 stayed open"
    for i, s in enumerate(socks):  # the first five still work
        assert answered(s, corr=10 + i)
    other = connect_from("127.0.0.5", port)  # another address is not limited by them
    assert answered(other)
    # override: 2. One at a time: every network thread accepts, so of connections made at once
    # any one may be the third the broker counts (Kafka's single Acceptor takes them in order)
    over = []
    for i in range(2):
        over.append(connect_from("127.0.0.4", port))
        assert answered(over[-1], corr=20 + i), f"connection {i} from 127.0.0.4 (override 2)"
    over.append(connect_from("127.0.0.4", port))
    assert closed_by_peer(over[2]), "the 3rd connection from 127.0.0.4 stayed open"
    assert "max.connections.per.ip" in c.brokers[1].log()
    socks[0].close()  # a closed one frees its place (the broker notices the close first)
    def fresh_one_served():
        s = connect_from("127.0.0.3", port)
        try:
            return answered(s, timeout=2)
        finally:
            s.close()

    H.wait_for(fresh_one_served, timeout=10, what="a new connection from 127.0.0.3 after one closed")
    for s in socks + [sixth, other] + over:
        s.close()


def test_max_connections_pauses_accepting(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=1, config={"max.connections": "6"})
    port = c.brokers[1].port
    # the broker's own connections (its controller's channel to itself) count too: open until
    # one is not served
    socks, blocked = [], None
    for i in range(8):
        s = connect_from("127.0.0.3", port)
        socks.append(s)
        if not answered(s, corr=i, timeout=1.0):
            blocked = s
            break
    assert blocked is not None, "max.connections=6 let 8 client connections in"
    assert "max.connections=6 reached" in c.brokers[1].log()
    socks[0].close()
    # the waiting connection is accepted once one closes; its request (sent already) is answered
    blocked.settimeout(10)
    hdr = blocked.recv(8)
    assert len(hdr) == 8 and struct.unpack(">ii", hdr)[1] == len(socks) - 1
    for s in socks:
        s.close()


def test_queued_max_requests_flood(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=1, config={"queued.max.requests": "2", "num.io.threads": "1"})
    b = c.brokers[1]
    port = b.port
    frame = b"".join(api_versions_frame(i) for i in range(200))
    flood = []
    for _ in range(100):  # 100 connections pipelining 200 requests each, never reading
        s = connect_from("127.0.0.3", port)
        s.setblocking(False)
        try:
            s.send(frame)
        except BlockingIOError:
            pass
        flood.append(s)
    # a normal client is still answered while the flood is queued
    for i in range(5):
        s = connect_from("127.0.0.6", port)
        assert answered(s, timeout=10)
        s.close()
    with open(f"/proc/{b.pid}/status") as f:
        rss_kb = int(next(line for line in f if line.startswith("VmRSS:")).split()[1])
    assert rss_kb < 512 * 1024, rss_kb
    for s in flood:
        s.close()
    assert b.running()


# ---- KIP-612: connection creation rates (issue 25 item 5) ----------------------------------------
# Rates are Kafka's: quota.window.num windows of quota.window.size.seconds, at least num - 1 windows
# long. With 2 windows of 10 s a rate is "connections in the last >= 10 s / 10", so a limit of
# 1/s lets 10 connections through and throttles the 11th however slowly the test runs.
RATE_WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "10"}


def test_max_connection_creation_rate_delays_accepting(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=1, config=dict(RATE_WINDOWS, **{"max.connection.creation.rate": "1"}))
    b = c.brokers[1]
    socks = [connect_from("127.0.0.3", b.port) for _ in range(13)]
    for i, s in enumerate(socks):  # over the rate: held back (not refused), then served
        assert answered(s, corr=i, timeout=40), f"connection {i} not served"
    assert "over max.connection.creation.rate" in b.log(), "no connection waited"
    for s in socks:
        s.close()
    assert b.running()


def test_listener_max_connection_creation_rate(cluster_factory, zk_connect):
    """listener.name.<l>.max.connection.creation.rate limits that listener only."""
    c = cluster_factory(zk_connect, n=1, config=RATE_WINDOWS, start=False)
    b = c.brokers[1]
    op = H.free_port()
    ls = f"PLAINTEXT://127.0.0.1:{b.port},OTHER://127.0.0.1:{op}"
    b.config.update({"listeners": ls, "advertised.listeners": ls, "inter.broker.listener.name": "PLAINTEXT",
                     "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
                     "listener.name.other.max.connection.creation.rate": "1"})
    c.start()
    plain = []
    for i in range(15):
        s = connect_from("127.0.0.3", b.port)
        assert answered(s, corr=i), f"PLAINTEXT connection {i}"
        plain.append(s)
    assert "over max.connection.creation.rate" not in b.log()
    other = []
    for i in range(12):
        s = connect_from("127.0.0.3", op)
        assert answered(s, corr=i, timeout=40), f"OTHER connection {i} not served"
        other.append(s)
    assert "listener OTHER over max.connection.creation.rate" in b.log()
    assert "listener PLAINTEXT over" not in b.log()
    for s in plain + other:
        s.close()


def test_listener_max_connection_creation_rate_invalid(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=1, config={"listener.name.plaintext.max.connection.creation.rate": "-1"},
                        start=False)
    b = c.brokers[1]
    b.start()
    assert b.wait_exit(timeout=15) != 0
    assert "listener.name.PLAINTEXT.max.connection.creation.rate" in b.log() or \
        "max.connection.creation.rate" in b.log(), b.log_tail()


def _set_ip_quota(c, ip, rate):
    path = f"/config/ips/{ip}"
    data = json.dumps({"version": 1, "config": {"connection_creation_rate": str(rate)}}).encode()
    if c.zk.exists(path):
        c.zk.set(path, data)
    else:
        c.zk.create(path, data, makepath=True)
    c.zk.create("/config/changes/config_change_",
                json.dumps({"version": 2, "entity_path": f"ips/{ip}"}).encode(), sequence=True, makepath=True)


def test_ip_connection_creation_rate(cluster_factory, zk_connect):
    """connection_creation_rate of /config/ips/<ip> (KIP-612): a connection that takes its address
    over the rate is closed without being served; other addresses are not slowed; <default>
    applies to every address without its own quota."""
    c = cluster_factory(zk_connect, n=1, config=RATE_WINDOWS)
    b = c.brokers[1]
    _set_ip_quota(c, "127.0.0.3", 1)
    H.wait_for(lambda: "IP connection rate quotas: 1 address" in b.log(), 10, "the IP quota applied")
    served, refused = [], []
    for i in range(13):
        s = connect_from("127.0.0.3", b.port)
        (served if answered(s, corr=i, timeout=15) else refused).append(i)
        s.close()
    assert refused, f"every connection from 127.0.0.3 was served: {served}"
    assert served[:10] == list(range(10)), served
    for i in range(15):  # another address has no quota
        s = connect_from("127.0.0.5", b.port)
        assert answered(s, corr=i), f"127.0.0.5 connection {i}"
        s.close()
    # <default>: every address, here 127.0.0.6 (127.0.0.3 keeps its own)
    _set_ip_quota(c, "<default>", 2)
    H.wait_for(lambda: "IP connection rate quotas: 1 address, default set" in b.log(), 10, "<default> applied")
    results = []
    for i in range(24):
        s = connect_from("127.0.0.6", b.port)
        results.append(answered(s, corr=i, timeout=15))
        s.close()
    assert results[:20] == [True] * 20 and not all(results), results
    assert b.running()
