"""Authorization (Kafka 2.7's AclAuthorizer): ACL admin APIs, per-API checks, ACL znodes and
change propagation, gregorctl acls, zookeeper.set.acl.

Principals other than User:ANONYMOUS come from the TEST-ONLY broker key
gregor.test.principal.by.client.id=true: a client whose client.id is "User:<name>" is that
principal (PLAINTEXT listeners have no authentication). Inter-broker traffic is
User:ANONYMOUS, made a super user here (as a PLAINTEXT Kafka cluster with an authorizer needs).
"""

import json
import os
import subprocess
import time

import pytest

import gregor_harness as H

from confluent_kafka import KafkaException, Producer, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import errors as KE
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                         KafkaAdminClient, ResourcePattern, ResourcePatternFilter, ResourceType)

AUTH = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS;User:admin",
    "gregor.test.principal.by.client.id": "true",
}
LIT, PRE = ACLResourcePatternType.LITERAL, ACLResourcePatternType.PREFIXED


def bootstrap(c):
    return ",".join(f"127.0.0.1:{b.port}" for b in c.brokers.values())


def kp_admin(c, principal="User:admin"):
    """kafka-python's admin client (it speaks the ACL APIs; confluent-kafka 1.7 does not)."""
    return KafkaAdminClient(bootstrap_servers=bootstrap(c), client_id=principal, request_timeout_ms=10000)


def ck_admin(c, principal="User:admin"):
    return AdminClient({"bootstrap.servers": bootstrap(c), "client.id": principal})


def acl(rtype, name, principal, op, perm=ACLPermissionType.ALLOW, pattern=LIT, host="*"):
    return ACL(principal=principal, host=host, operation=op, permission_type=perm,
               resource_pattern=ResourcePattern(rtype, name, pattern))


def afilter(rtype=ResourceType.ANY, name=None, pattern=ACLResourcePatternType.ANY, principal=None,
            op=ACLOperation.ANY, perm=ACLPermissionType.ANY):
    return ACLFilter(principal=principal, host=None, operation=op, permission_type=perm,
                     resource_pattern=ResourcePatternFilter(rtype, name, pattern))


def create_acls(a, acls):
    res = a.create_acls(acls)
    assert not res["failed"], res["failed"]


def create_topic(a, name, partitions=1, rf=1):
    a.create_topics([NewTopic(name, partitions, rf)])[name].result()


@pytest.fixture
def one(cluster_factory, zk_connect):
    return cluster_factory(zk_connect, n=1, config=AUTH)


def test_acl_admin_round_trip_and_znodes(one):
    a = kp_admin(one)
    create_acls(a, [
        acl(ResourceType.TOPIC, "t1", "User:alice", ACLOperation.READ),
        acl(ResourceType.TOPIC, "t1", "User:bob", ACLOperation.WRITE, ACLPermissionType.DENY),
        acl(ResourceType.GROUP, "g-", "User:alice", ACLOperation.READ, pattern=PRE),
    ])
    # Kafka's znodes
    data, _ = one.zk.get("/kafka-acl/Topic/t1")
    acls = json.loads(data)
    assert acls["version"] == 1
    assert {(x["principal"], x["permissionType"], x["operation"], x["host"]) for x in acls["acls"]} == {
        ("User:alice", "Allow", "Read", "*"), ("User:bob", "Deny", "Write", "*")}
    data, _ = one.zk.get("/kafka-acl-extended/prefixed/Group/g-")
    assert json.loads(data)["acls"] == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]
    changes = one.zk.get_children("/kafka-acl-changes")
    assert changes and all(c.startswith("acl_changes_") for c in changes)
    assert {one.zk.get("/kafka-acl-changes/" + c)[0] for c in changes} == {b"TOPIC:t1"}
    ext = [json.loads(one.zk.get("/kafka-acl-extended-changes/" + c)[0])
           for c in one.zk.get_children("/kafka-acl-extended-changes")]
    assert ext == [{"version": 1, "resourceType": "GROUP", "name": "g-", "patternType": "PREFIXED"}]

    got, err = a.describe_acls(afilter())
    assert err is KE.NoError and len(got) == 3
    # MATCH filter: the prefixed group ACL applies to group g-1
    got, _ = a.describe_acls(afilter(ResourceType.GROUP, "g-1", ACLResourcePatternType.MATCH))
    assert [(b.resource_pattern.resource_name, b.resource_pattern.pattern_type) for b in got] == [("g-", PRE)]

    res = a.delete_acls([afilter(ResourceType.TOPIC, "t1", LIT, principal="User:bob")])
    (_, matched, ferr), = res
    assert ferr is KE.NoError
    assert [(m.principal, m.operation, e) for m, e in matched] == [("User:bob", ACLOperation.WRITE, KE.NoError)]
    acls = json.loads(one.zk.get("/kafka-acl/Topic/t1")[0])["acls"]
    assert [x["principal"] for x in acls] == ["User:alice"]
    # last ACL of a resource removed -> znode removed
    a.delete_acls([afilter(ResourceType.TOPIC, "t1")])
    assert not one.zk.exists("/kafka-acl/Topic/t1")
    a.close()


def test_acl_apis_need_cluster_alter_and_describe(one):
    a = kp_admin(one, "User:mallory")
    res = a.create_acls([acl(ResourceType.TOPIC, "t", "User:mallory", ACLOperation.ALL)])
    assert [e for _, e in res["failed"]] == [KE.ClusterAuthorizationFailedError]
    with pytest.raises(KE.ClusterAuthorizationFailedError):
        a.describe_acls(afilter())
    (_, _, ferr), = a.delete_acls([afilter()])
    assert ferr is KE.ClusterAuthorizationFailedError
    assert not one.zk.exists("/kafka-acl/Topic/t")
    a.close()


# ---- raw Metadata v1 straight to one broker (to observe each broker's own ACL cache) ----

def _metadata_topics(port, principal):
    """Topic names (with error codes) that broker `port` returns to `principal` for an
    all-topics Metadata v1 request."""
    import socket
    import struct
    cid = principal.encode()
    body = struct.pack(">hhih", 3, 1, 7, len(cid)) + cid + struct.pack(">i", -1)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        def exact(n):
            b = b""
            while len(b) < n:
                chunk = s.recv(n - len(b))
                assert chunk, "connection closed"
                b += chunk
            return b
        (size,) = struct.unpack(">i", exact(4))
        data = exact(size)
    pos = 4  # correlation id

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v if len(v) > 1 else v[0]

    def string():
        nonlocal pos
        n = take(">h")
        if n < 0:
            return None
        v = data[pos:pos + n].decode()
        pos += n
        return v

    for _ in range(take(">i")):  # brokers
        take(">i"), string(), take(">i"), string()
    take(">i")  # controller
    topics = {}
    for _ in range(take(">i")):
        err = take(">h")
        name = string()
        take(">b")
        for _ in range(take(">i")):
            take(">hii")
            for _ in range(take(">i")):
                take(">i")
            for _ in range(take(">i")):
                take(">i")
        topics[name] = err
    return topics


def _metadata_v8(port, principal, topics=None):
    """Metadata v8 with IncludeCluster/TopicAuthorizedOperations (KIP-430) straight to one broker:
    ({topic: (error, authorized operations bit field)}, cluster authorized operations)."""
    import socket
    import struct
    from test_malformed import Reader, array, i8, i16, i32, string
    body = (i32(-1) if topics is None else array([string(t) for t in topics])) + i8(0) + i8(1) + i8(1)
    req = i16(3) + i16(8) + i32(9) + string(principal) + body
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(i32(len(req)) + req)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = s.recv(65536)
            assert chunk
            data += chunk
    r = Reader(data[4:])
    r.i32(), r.i32()  # correlation id, throttle
    for _ in range(r.i32()):
        r.i32(), r.string(), r.i32(), r.string()
    r.string(), r.i32()  # cluster id, controller
    out = {}
    for _ in range(r.i32()):
        err, name = r.i16(), r.string()
        r.take(">b")
        for _ in range(r.i32()):
            r.i16(), r.i32(), r.i32(), r.i32()
            for _ in range(3):
                for _ in range(r.i32()):
                    r.i32()
        out[name] = (err, r.i32())
    return out, r.i32()


def test_authorized_operations_kip430(one):
    create_topic(ck_admin(one), "ops")
    create_acls(kp_admin(one), [acl(ResourceType.TOPIC, "ops", "User:hal", ACLOperation.WRITE),
                                acl(ResourceType.CLUSTER, "kafka-cluster", "User:hal", ACLOperation.DESCRIBE)])
    topics, cluster_ops = _metadata_v8(one[1].port, "User:hal", ["ops"])
    assert topics == {"ops": (0, (1 << 4) | (1 << 8))}  # Write, and the Describe it implies
    assert cluster_ops == 1 << 8
    topics, cluster_ops = _metadata_v8(one[1].port, "User:nobody", ["ops"])
    assert topics == {"ops": (29, -2147483648)} and cluster_ops == 0
    _, cluster_ops = _metadata_v8(one[1].port, "User:admin")
    assert cluster_ops == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))  # every cluster operation


def produce_one(c, principal, topic, value=b"v"):
    """Produces one message as `principal`; returns the delivery error code (0 = delivered)."""
    p = Producer({"bootstrap.servers": bootstrap(c), "client.id": principal,
                  "message.timeout.ms": 8000, "enable.idempotence": False})
    out = []
    p.produce(topic, value, callback=lambda err, msg: out.append(err))
    p.flush(10)
    assert out, "no delivery report"
    return 0 if out[0] is None else out[0].code()


def end_offset(c, topic, partition=0):
    cons = Consumer({"bootstrap.servers": bootstrap(c), "client.id": "User:admin", "group.id": "probe"})
    try:
        return cons.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    finally:
        cons.close()


def test_write_denied_appends_nothing(one):
    a, kp = ck_admin(one), kp_admin(one)
    create_topic(a, "t")
    create_acls(kp, [acl(ResourceType.TOPIC, "t", "User:alice", ACLOperation.DESCRIBE)])
    assert produce_one(one, "User:alice", "t") == 29  # TOPIC_AUTHORIZATION_FAILED
    assert end_offset(one, "t") == 0
    # a DENY wins over an ALLOW; User:* grants everyone
    create_acls(kp, [acl(ResourceType.TOPIC, "t", "User:*", ACLOperation.WRITE),
                     acl(ResourceType.TOPIC, "t", "User:mallory", ACLOperation.ALL, ACLPermissionType.DENY)])
    assert produce_one(one, "User:alice", "t") == 0
    assert produce_one(one, "User:mallory", "t") == 29
    assert end_offset(one, "t") == 1
    kp.close()


def test_metadata_hides_topics_without_describe(one):
    a, kp = ck_admin(one), kp_admin(one)
    for t in ("seen", "hidden"):
        create_topic(a, t)
    # READ implies DESCRIBE
    create_acls(kp, [acl(ResourceType.TOPIC, "seen", "User:bob", ACLOperation.READ)])
    assert _metadata_topics(one[1].port, "User:bob") == {"seen": 0}
    assert set(_metadata_topics(one[1].port, "User:admin")) == {"seen", "hidden"}
    # a named request answers TOPIC_AUTHORIZATION_FAILED (without saying whether it exists)
    md = ck_admin(one, "User:bob").list_topics(topic="hidden", timeout=10)
    assert md.topics["hidden"].error.code() == 29
    md = ck_admin(one, "User:bob").list_topics(topic="nonexistent", timeout=10)
    assert md.topics["nonexistent"].error.code() == 29
    # kcat -L as bob lists only "seen"
    out = subprocess.run(["kcat", "-b", bootstrap(one), "-X", "client.id=User:bob", "-L", "-J"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    assert [t["topic"] for t in json.loads(out)["topics"]] == ["seen"]
    kp.close()


def test_non_super_user_cannot_create_topics(one):
    kp, carol = kp_admin(one), ck_admin(one, "User:carol")
    res = carol.create_topics([NewTopic("carol-1", 1, 1), NewTopic("x", 1, 1)])
    for f in res.values():
        with pytest.raises(KafkaException) as e:
            f.result()
        assert e.value.args[0].code() == 29
    assert not one.zk.exists("/brokers/topics/carol-1")
    # CREATE on the prefix carol- lets her create carol-* only
    create_acls(kp, [acl(ResourceType.TOPIC, "carol-", "User:carol", ACLOperation.CREATE, pattern=PRE)])
    res = carol.create_topics([NewTopic("carol-1", 1, 1), NewTopic("x", 1, 1)])
    res["carol-1"].result()
    with pytest.raises(KafkaException):
        res["x"].result()
    assert one.zk.exists("/brokers/topics/carol-1") and not one.zk.exists("/brokers/topics/x")
    # no auto-creation through Metadata either
    assert produce_one(one, "User:carol", "auto-x") != 0
    assert not one.zk.exists("/brokers/topics/auto-x")
    kp.close()


def test_consumer_group_needs_group_read(one):
    a, kp = ck_admin(one), kp_admin(one)
    create_topic(a, "g-topic")
    assert produce_one(one, "User:admin", "g-topic") == 0
    create_acls(kp, [acl(ResourceType.TOPIC, "g-topic", "User:erin", ACLOperation.READ)])

    def consume(group):
        c = Consumer({"bootstrap.servers": bootstrap(one), "client.id": "User:erin", "group.id": group,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
        c.subscribe(["g-topic"])
        try:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                return m.error().code() if m.error() else 0
            return None
        finally:
            c.close()

    assert consume("erin-group") == 30  # GROUP_AUTHORIZATION_FAILED
    create_acls(kp, [acl(ResourceType.GROUP, "erin-", "User:erin", ACLOperation.READ, pattern=PRE)])
    assert consume("erin-group") == 0
    erin = KafkaAdminClient(bootstrap_servers=bootstrap(one), client_id="User:erin")
    with pytest.raises(KE.GroupAuthorizationFailedError):
        erin.describe_consumer_groups(["other-group"])
    # ListGroups without Cluster Describe shows only the groups erin may describe
    assert [x[0] for x in erin.list_consumer_groups()] == ["erin-group"]
    erin.close()
    kp.close()


def test_acl_change_reaches_every_broker_within_a_second(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=3, config=AUTH)
    create_topic(ck_admin(c), "shared", 3, 3)
    ports = [b.port for b in c.brokers.values()]
    H.wait_for(lambda: all("shared" in _metadata_topics(p, "User:admin") for p in ports), 10,
               "topic on every broker")
    # replication and the controller's requests pass the authorizer (brokers are User:ANONYMOUS,
    # a super user here): acks=all needs the followers' fetches
    assert produce_one(c, "User:admin", "shared") == 0
    assert all(_metadata_topics(p, "User:frank") == {} for p in ports)
    # the ACL goes through broker 1 only
    kp = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{ports[0]}", client_id="User:admin")
    t0 = time.monotonic()
    create_acls(kp, [acl(ResourceType.TOPIC, "shared", "User:frank", ACLOperation.DESCRIBE)])
    H.wait_for(lambda: all(_metadata_topics(p, "User:frank") == {"shared": 0} for p in ports), 5,
               "the new ACL on every broker", interval=0.02)
    assert time.monotonic() - t0 < 1.0 + 0.5  # the create call itself is in the 0.5
    t0 = time.monotonic()
    kp.delete_acls([afilter(ResourceType.TOPIC, "shared")])
    H.wait_for(lambda: all(_metadata_topics(p, "User:frank") == {} for p in ports), 5,
               "the removal on every broker", interval=0.02)
    assert time.monotonic() - t0 < 1.5
    kp.close()


def ctl(c, *args, check=True):
    r = subprocess.run([H.GREGORCTL, "--bootstrap-server", bootstrap(c), *args], capture_output=True, text=True,
                       timeout=30)
    if check:
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r


def test_gregorctl_acls_round_trip(one):
    r = ctl(one, "acls", "add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
            "--operation", "Read", "--operation", "Describe", "--topic", "orders")
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`" in r.stdout
    acls = json.loads(one.zk.get("/kafka-acl/Topic/orders")[0])["acls"]
    assert len(acls) == 4
    ctl(one, "acls", "add", "--deny-principal", "User:bob", "--deny-host", "10.1.2.3", "--operation", "Read",
        "--topic", "orders")
    ctl(one, "acls", "add", "--allow-principal", "User:carol", "--consumer", "--topic", "in-",
        "--group", "app-", "--resource-pattern-type", "prefixed")
    ctl(one, "acls", "add", "--allow-principal", "User:ops", "--operation", "Alter", "--cluster")
    assert one.zk.exists("/kafka-acl-extended/prefixed/Group/app-")
    assert one.zk.exists("/kafka-acl/Cluster/kafka-cluster")

    out = ctl(one, "acls", "list").stdout
    assert "(principal=User:bob, host=10.1.2.3, operation=READ, permissionType=DENY)" in out
    assert "resourceType=GROUP, name=app-, patternType=PREFIXED" in out
    assert "(principal=User:ops, host=*, operation=ALTER, permissionType=ALLOW)" in out
    out = ctl(one, "acls", "list", "--topic", "orders").stdout
    assert out.count("principal=") == 5
    out = ctl(one, "acls", "list", "--principal", "User:carol").stdout
    assert out.count("principal=User:carol") == 3 and "User:bob" not in out
    # the ACLs work: alice may read orders' metadata, carol describes in-x
    create_topic(ck_admin(one), "orders")
    assert _metadata_topics(one[1].port, "User:alice") == {"orders": 0}

    ctl(one, "acls", "remove", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "orders")
    out = ctl(one, "acls", "list", "--topic", "orders").stdout
    assert out.count("principal=") == 4
    ctl(one, "acls", "remove", "--topic", "orders", "--force")
    assert not one.zk.exists("/kafka-acl/Topic/orders")
    assert "orders" not in ctl(one, "acls", "list").stdout

    # usage errors, and an unsupported operation for the resource type
    assert ctl(one, "acls", "add", "--topic", "x", check=False).returncode == 2
    assert ctl(one, "acls", "add", "--allow-principal", "alice", "--topic", "x", check=False).returncode == 2
    assert ctl(one, "acls", "add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g",
               check=False).returncode == 2


def test_gregorctl_acls_without_authorizer(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=1)
    r = ctl(c, "acls", "list", check=False)
    assert r.returncode == 1 and "SECURITY_DISABLED" in r.stderr


def test_zookeeper_set_acl(cluster_factory, zk_connect, zk_server):
    from kazoo.exceptions import NoAuthError
    secure = dict(AUTH, **{"zookeeper.set.acl": "true", "gregor.zookeeper.auth.digest": "gregor:s3cret"})
    c = cluster_factory(zk_connect, n=1, config=secure)
    create_topic(ck_admin(c), "guarded")
    create_acls(kp_admin(c), [acl(ResourceType.TOPIC, "guarded", "User:alice", ACLOperation.READ)])
    assert produce_one(c, "User:admin", "guarded") == 0
    zk = c.zk  # unauthenticated
    for path in ("/brokers/topics/guarded", "/kafka-acl/Topic/guarded", "/controller_epoch", "/cluster/id"):
        acls, _ = zk.get_acls(path)
        schemes = {(a.id.scheme, a.perms) for a in acls}
        assert ("digest", 31) in schemes and ("world", 1) in schemes, (path, acls)
        zk.get(path)  # world READ
        with pytest.raises(NoAuthError):
            zk.set(path, b"tampered")
    with pytest.raises(NoAuthError):
        zk.create("/brokers/topics/guarded/partitions/9")
    with pytest.raises(NoAuthError):
        zk.delete("/kafka-acl/Topic/guarded")
    # the broker's identity may write
    authed = H.kazoo_client(zk_connect, auth_data=[("digest", "gregor:s3cret")])
    try:
        authed.create("/kafka-acl/Topic/guarded-probe", b"")
        authed.delete("/kafka-acl/Topic/guarded-probe")
    finally:
        H.close_kazoo(authed)
    # zookeeper.set.acl without an identity is refused at start-up
    b = c.add_broker(9, config={"gregor.zookeeper.auth.digest": ""})
    b.start()
    assert b.wait_exit(20) != 0
    assert "zookeeper.set.acl" in b.log()


def _produce_raw(port, principal, topic, producer_id):
    """Produce v3 of one record whose batch carries `producer_id` (>= 0: idempotent), sent as
    `principal`. Returns the partition's error code."""
    import socket
    import struct
    from test_malformed import crc32c, i8, i16, i32, i64, u32, string, array, varint, Reader
    body = i8(0) + varint(0) + varint(0) + varint(-1) + varint(1) + b"x" + varint(0)
    recs = varint(len(body)) + body
    ts = int(time.time() * 1000)
    after_crc = (i16(0) + i32(0) + i64(ts) + i64(ts) + i64(producer_id) + i16(0 if producer_id >= 0 else -1)
                 + i32(0 if producer_id >= 0 else -1) + i32(1) + recs)
    rest = i32(-1) + i8(2) + u32(crc32c(after_crc)) + after_crc
    batch = i64(0) + i32(len(rest)) + rest
    req = (i16(0) + i16(3) + i32(1) + string(principal) + string(None) + i16(1) + i32(10000)
           + array([string(topic) + array([i32(0) + i32(len(batch)) + batch])]))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(i32(len(req)) + req)
        hdr = b""
        while len(hdr) < 4:
            hdr += s.recv(4 - len(hdr))
        (n,) = struct.unpack(">i", hdr)
        data = b""
        while len(data) < n:
            data += s.recv(n - len(data))
    r = Reader(data)
    r.i32()  # correlation id
    assert r.i32() == 1 and r.string() == topic and r.i32() == 1
    r.i32()  # partition
    return r.i16()


def test_idempotent_produce_needs_cluster_idempotent_write(one):
    create_topic(ck_admin(one), "idem")
    kp = kp_admin(one)
    create_acls(kp, [acl(ResourceType.TOPIC, "idem", "User:gina", ACLOperation.WRITE)])
    port = one[1].port
    assert _produce_raw(port, "User:gina", "idem", -1) == 0
    assert _produce_raw(port, "User:gina", "idem", 7) == 31  # CLUSTER_AUTHORIZATION_FAILED
    assert end_offset(one, "idem") == 1
    create_acls(kp, [acl(ResourceType.CLUSTER, "kafka-cluster", "User:gina", ACLOperation.IDEMPOTENT_WRITE)])
    assert _produce_raw(port, "User:gina", "idem", 7) != 31
    kp.close()


# ---- issue 25 item 13: authorization orders ----

def _raw(port, payload):
    import socket
    import struct
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        hdr = b""
        while len(hdr) < 4:
            hdr += s.recv(4 - len(hdr))
        (n,) = struct.unpack(">i", hdr)
        data = b""
        while len(data) < n:
            data += s.recv(n - len(data))
    return data


def _add_partitions_to_txn(port, principal, txn_id, topics):
    """AddPartitionsToTxn v0 for partition 0 of each topic: {topic: error code}."""
    from test_malformed import i16, i32, i64, string, array, Reader
    req = (i16(24) + i16(0) + i32(1) + string(principal) + string(txn_id) + i64(5) + i16(0)
           + array([string(t) + array([i32(0)]) for t in topics]))
    r = Reader(_raw(port, req))
    r.i32()  # correlation id
    r.i32()  # throttle
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            r.i32()
            out[name] = r.i16()
    return out


def test_add_partitions_to_txn_hides_topic_existence(one):
    """Kafka's order: TransactionalId WRITE, then Topic WRITE, and only for a writable topic
    whether it exists: a client without WRITE gets 29 for a topic that exists and for one that
    does not alike (never UNKNOWN_TOPIC_OR_PARTITION)."""
    create_topic(ck_admin(one), "secret")
    create_topic(ck_admin(one), "open")
    kp = kp_admin(one)
    create_acls(kp, [acl(ResourceType.TRANSACTIONAL_ID, "tx", "User:ted", ACLOperation.WRITE),
                     acl(ResourceType.TOPIC, "open", "User:ted", ACLOperation.WRITE),
                     acl(ResourceType.TOPIC, "gone", "User:ted", ACLOperation.WRITE)])
    kp.close()
    port = one[1].port
    got = _add_partitions_to_txn(port, "User:ted", "tx", ["secret", "missing"])
    assert got == {"secret": 29, "missing": 29}, got
    # a writable topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION; the writable existing one
    # is not attempted
    got = _add_partitions_to_txn(port, "User:ted", "tx", ["open", "gone"])
    assert got == {"open": 55, "gone": 3}, got
    # internal topics are never writable this way (Kafka filters them out), even for a super user
    got = _add_partitions_to_txn(port, "User:admin", "tx", ["__consumer_offsets"])
    assert got == {"__consumer_offsets": 29}, got


def _create_topics_v5(port, principal, name):
    """CreateTopics v5 (flexible) of one topic with 1 partition, RF 1: (error, TopicConfigErrorCode
    or None when absent, NumPartitions, number of configs or None when null)."""
    from kafka_wire import Reader, compact_str, uvarint
    from test_malformed import i8, i16, i32, string
    body = (uvarint(2) + compact_str(name) + i32(1) + i16(1) + uvarint(1) + uvarint(1) + uvarint(0)
            + i32(10000) + i8(0) + uvarint(0))
    req = i16(19) + i16(5) + i32(1) + string(principal) + uvarint(0) + body
    r = Reader(_raw(port, req))
    r.i32()  # correlation id
    r.tags()
    r.i32()  # throttle
    assert r.uvarint() == 2
    assert r.compact_str() == name
    err = r.i16()
    r.compact_str()
    nparts = r.i32()
    r.i16()
    n = r.uvarint()
    for _ in range(max(n - 1, 0)):
        r.compact_str(), r.compact_str(), r.i8(), r.i8(), r.i8(), r.tags()
    tags = r.tags()
    tcec = int.from_bytes(tags[0], "big", signed=True) if 0 in tags else None
    return err, tcec, nparts, (n - 1 if n else None)


def test_create_topics_v5_configs_need_describe_configs(one):
    kp = kp_admin(one)
    create_acls(kp, [acl(ResourceType.CLUSTER, "kafka-cluster", "User:carl", ACLOperation.CREATE)])
    kp.close()
    port = one[1].port
    err, tcec, nparts, nconfigs = _create_topics_v5(port, "User:carl", "made-by-carl")
    assert err == 0
    assert tcec == 29 and nparts == -1 and not nconfigs, (tcec, nparts, nconfigs)
    err, tcec, nparts, nconfigs = _create_topics_v5(port, "User:admin", "made-by-admin")
    assert err == 0 and tcec is None and nparts == 1 and nconfigs > 0, (err, tcec, nparts, nconfigs)


def _produce_txn_raw(port, principal, topic, txn_id):
    """Produce v3 of a transactional batch (producer id 7, epoch 0) with TransactionalId txn_id
    (None: null). Returns the partition's error code."""
    from test_malformed import crc32c, i8, i16, i32, i64, u32, string, array, Reader
    body = i8(0) + varint_(0) + varint_(0) + varint_(-1) + varint_(1) + b"x" + varint_(0)
    recs = varint_(len(body)) + body
    ts = int(time.time() * 1000)
    after_crc = i16(0x10) + i32(0) + i64(ts) + i64(ts) + i64(7) + i16(0) + i32(0) + i32(1) + recs
    rest = i32(-1) + i8(2) + u32(crc32c(after_crc)) + after_crc
    batch = i64(0) + i32(len(rest)) + rest
    req = (i16(0) + i16(3) + i32(1) + string(principal) + string(txn_id) + i16(1) + i32(10000)
           + array([string(topic) + array([i32(0) + i32(len(batch)) + batch])]))
    r = Reader(_raw(port, req))
    r.i32()
    assert r.i32() == 1 and r.string() == topic and r.i32() == 1
    r.i32()
    return r.i16()


def varint_(v):
    from kafka_wire import varint
    return varint(v)


def test_transactional_produce_with_null_transactional_id(one):
    """Transactional records without a transactional id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    (KafkaApis), not an authorization of the empty name (which a TransactionalId:* ACL allows)."""
    create_topic(ck_admin(one), "txp")
    kp = kp_admin(one)
    create_acls(kp, [acl(ResourceType.TRANSACTIONAL_ID, "*", "User:tina", ACLOperation.WRITE),
                     acl(ResourceType.TOPIC, "txp", "User:tina", ACLOperation.WRITE)])
    kp.close()
    port = one[1].port
    assert _produce_txn_raw(port, "User:tina", "txp", None) == 53
    assert end_offset(one, "txp") == 0
