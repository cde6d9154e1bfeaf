"""Client features of Kafka 2.7's era through real clients (issue 17):

  - static membership (KIP-345): a confluent-kafka consumer with group.instance.id restarted
    within its session timeout takes its place back without a rebalance (same generation, the
    other member's assignment callbacks are not called again), and a duplicate instance is fenced
  - offset retention (KIP-211): offsets committed with an explicit retention (OffsetCommit v2
    through kafka-python's protocol classes) are tombstoned by the next retention check, and the
    offsets-only group disappears
"""

import re
import time

import pytest

import gregor_harness as H

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running())


def create_topic(cluster, name, partitions=2, rf=1):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    fs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=rf)],
                             operation_timeout=20, request_timeout=30)
    fs[name].result(timeout=40)


def produce(cluster, topic, n, partitions):
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all"})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=i % partitions)
    assert p.flush(30) == 0


@pytest.fixture
def one(cluster_factory, zk_connect):
    return cluster_factory(zk_connect, n=1, config={"offsets.topic.num.partitions": "4",
                                                    "offsets.retention.check.interval.ms": "1000"})


class StaticMember:
    def __init__(self, cluster, group, topic, instance, extra=None):
        self.assigns = 0
        self.revokes = 0
        self.errors = []
        self.c = Consumer({"error_cb": self.errors.append,"bootstrap.servers": bootstrap(cluster), "group.id": group,
                           "group.instance.id": instance, "session.timeout.ms": 20000,
                           "auto.offset.reset": "earliest", "enable.auto.commit": False,
                           "heartbeat.interval.ms": 500, "fetch.wait.max.ms": 100, **(extra or {})})
        self.c.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, c, parts):
        self.assigns += 1

    def _on_revoke(self, c, parts):
        self.revokes += 1

    def poll_until(self, cond, timeout=40):
        deadline = time.monotonic() + timeout
        while not cond():
            assert time.monotonic() < deadline, "timed out polling"
            self.c.poll(0.2)


def generations(broker, group):
    return [int(g) for g in re.findall(rf"Stabilized group {re.escape(group)} generation (\d+)", broker.log(whole=True))]


def describe(cluster, group):
    from kafka.admin import KafkaAdminClient
    adm = KafkaAdminClient(bootstrap_servers=bootstrap(cluster))
    try:
        return adm.describe_consumer_groups([group])[0]
    finally:
        adm.close()


def member_ids(cluster, group):
    return sorted(m.member_id for m in describe(cluster, group).members)


def test_static_member_restart_no_rebalance(one):
    topic, group = "static-t", "static-g"
    create_topic(one, topic)
    produce(one, topic, 20, 2)
    a = StaticMember(one, group, topic, "inst-a")
    b = StaticMember(one, group, topic, "inst-b")
    deadline = time.monotonic() + 60
    while not (a.c.assignment() and b.c.assignment()):
        assert time.monotonic() < deadline, "both members never got partitions"
        a.c.poll(0.1)
        b.c.poll(0.1)
    # let the group settle (both members may have joined in different generations)
    for _ in range(20):
        a.c.poll(0.1)
        b.c.poll(0.1)
    broker = one[1]
    gens = generations(broker, group)
    assert gens, "group never stabilized"
    b_assigns, b_revokes = b.assigns, b.revokes
    a_parts = sorted(tp.partition for tp in a.c.assignment())
    ids = member_ids(one, group)
    assert len(ids) == 2 and ids[0].startswith("inst-a-") and ids[1].startswith("inst-b-")

    # "restart" a: a static member leaves no LeaveGroup behind, a new process rejoins at once
    a.c.close()
    a2 = StaticMember(one, group, topic, "inst-a")
    a2.poll_until(lambda: a2.c.assignment())
    for _ in range(20):
        a2.c.poll(0.1)
        b.c.poll(0.1)
    assert sorted(tp.partition for tp in a2.c.assignment()) == a_parts
    assert generations(broker, group) == gens, "the restart caused a rebalance"
    assert (b.assigns, b.revokes) == (b_assigns, b_revokes)
    assert "Static member which joins during Stable stage and doesn't affect selectProtocol will not " \
           "trigger rebalance." in broker.log(whole=True)

    # a has a new member id under the same instance id, b kept its own
    desc = describe(one, group)
    assert desc.state == "Stable"
    new_ids = sorted(m.member_id for m in desc.members)
    assert new_ids[0] != ids[0] and new_ids[0].startswith("inst-a-") and new_ids[1] == ids[1]
    a2.c.close()
    b.c.close()


def _v3_requests():
    """Heartbeat v3 / LeaveGroup v3 (group.instance.id), which kafka-python 2.0 does not define."""
    from kafka.protocol.api import Request, Response
    from kafka.protocol.types import Array, Int16, Int32, Schema, String

    class HeartbeatResponse_v3(Response):
        API_KEY, API_VERSION = 12, 3
        SCHEMA = Schema(("throttle_time_ms", Int32), ("error_code", Int16))

    class HeartbeatRequest_v3(Request):
        API_KEY, API_VERSION, RESPONSE_TYPE = 12, 3, HeartbeatResponse_v3
        SCHEMA = Schema(("group", String("utf-8")), ("generation_id", Int32), ("member_id", String("utf-8")),
                        ("group_instance_id", String("utf-8")))

    class LeaveGroupResponse_v3(Response):
        API_KEY, API_VERSION = 13, 3
        SCHEMA = Schema(("throttle_time_ms", Int32), ("error_code", Int16),
                        ("members", Array(("member_id", String("utf-8")), ("group_instance_id", String("utf-8")),
                                          ("error_code", Int16))))

    class LeaveGroupRequest_v3(Request):
        API_KEY, API_VERSION, RESPONSE_TYPE = 13, 3, LeaveGroupResponse_v3
        SCHEMA = Schema(("group", String("utf-8")),
                        ("members", Array(("member_id", String("utf-8")), ("group_instance_id", String("utf-8")))))

    return HeartbeatRequest_v3, LeaveGroupRequest_v3


class Raw:
    """kafka-python's KafkaClient to send single requests to broker node."""

    def __init__(self, cluster, node):
        from kafka import KafkaClient
        self.cli = KafkaClient(bootstrap_servers=bootstrap(cluster), api_version=(2, 0))
        self.node = node

    def send(self, req):
        deadline = time.monotonic() + 20
        while not self.cli.ready(self.node):
            assert time.monotonic() < deadline, "broker not ready"
            self.cli.poll(timeout_ms=100)
        f = self.cli.send(self.node, req)
        self.cli.poll(future=f, timeout_ms=20000)
        assert f.succeeded(), f.exception
        return f.value

    def close(self):
        self.cli.close()


FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID = 82, 25


def test_duplicate_static_instance_fenced_and_batch_leave(one):
    topic, group = "fence-t", "fence-g"
    create_topic(one, topic, partitions=1)
    a = StaticMember(one, group, topic, "dup")
    a.poll_until(lambda: a.c.assignment())
    old = member_ids(one, group)
    b = StaticMember(one, group, topic, "dup")  # a second process with the same instance id
    b.poll_until(lambda: b.c.assignment())
    new = member_ids(one, group)
    assert len(old) == 1 and len(new) == 1 and old != new
    Heartbeat, Leave = _v3_requests()
    raw = Raw(one, one[1].id)
    try:
        gen = max(generations(one[1], group))
        assert raw.send(Heartbeat(group, gen, old[0], "dup")).error_code == FENCED_INSTANCE_ID
        assert raw.send(Heartbeat(group, gen, new[0], "dup")).error_code == 0
        # LeaveGroup v3: a batch by instance id; the unknown one gets its own error
        r = raw.send(Leave(group, [("", "dup"), ("", "nobody")]))
        assert r.error_code == 0
        assert [(m[1], m[2]) for m in r.members] == [("dup", 0), ("nobody", UNKNOWN_MEMBER_ID)]
        assert f"Member {new[0]} has left group {group}" in one[1].log(whole=True)
        assert new[0] not in member_ids(one, group)
    finally:
        raw.close()
        a.c.close()
        b.c.close()


def test_offsets_with_retention_expire(one):
    """OffsetCommit v2 with retention_time: expired by the next check (1 s here), tombstoned, and
    the offsets-only group is removed (OffsetFetch finds nothing)."""
    from kafka.protocol.commit import GroupCoordinatorRequest_v0, OffsetCommitRequest_v2, OffsetFetchRequest_v1
    topic, group = "ret-t", "ret-g"
    create_topic(one, topic, partitions=1)
    raw = Raw(one, one[1].id)
    send = raw.send
    try:
        def fetch():
            r = send(OffsetFetchRequest_v1(group, [(topic, [0])]))
            return r.topics[0][1][0][1]

        # FindCoordinator creates __consumer_offsets; the coordinator then loads it
        H.wait_for(lambda: send(GroupCoordinatorRequest_v0(group)).error_code == 0, 20, "a coordinator")

        def commit(offset, retention):
            r = send(OffsetCommitRequest_v2(group, -1, "", retention, [(topic, [(0, offset, "")])]))
            return r.topics[0][1][0][1] == 0

        H.wait_for(lambda: commit(42, -1), 20, "a commit")
        assert fetch() == 42
        assert commit(43, 1500)
        assert fetch() == 43
        H.wait_for(lambda: fetch() == -1, 20, "the offset to expire")
        H.wait_for(lambda: "Group ret-g transitioned to Dead" in one[1].log(whole=True), 10, "group removed")
    finally:
        raw.close()


def _admin_requests():
    """CreateDelegationToken / DescribeDelegationToken / AlterReplicaLogDirs v0 (not in kafka-python 2.0)."""
    from kafka.protocol.api import Request, Response
    from kafka.protocol.types import Array, Bytes, Int16, Int32, Int64, Schema, String

    s = String("utf-8")

    class CreateTokenResponse(Response):
        API_KEY, API_VERSION = 38, 0
        SCHEMA = Schema(("error_code", Int16), ("principal_type", s), ("principal_name", s), ("issue", Int64),
                        ("expiry", Int64), ("max", Int64), ("token_id", s), ("hmac", Bytes), ("throttle", Int32))

    class CreateToken(Request):
        API_KEY, API_VERSION, RESPONSE_TYPE = 38, 0, CreateTokenResponse
        SCHEMA = Schema(("renewers", Array(("type", s), ("name", s))), ("max_lifetime", Int64))

    class DescribeTokenResponse(Response):
        API_KEY, API_VERSION = 41, 0
        SCHEMA = Schema(("error_code", Int16),
                        ("tokens", Array(("type", s), ("name", s), ("issue", Int64), ("expiry", Int64),
                                         ("max", Int64), ("token_id", s), ("hmac", Bytes),
                                         ("renewers", Array(("type", s), ("name", s))))),
                        ("throttle", Int32))

    class DescribeToken(Request):
        API_KEY, API_VERSION, RESPONSE_TYPE = 41, 0, DescribeTokenResponse
        SCHEMA = Schema(("owners", Array(("type", s), ("name", s))))

    class AlterDirsResponse(Response):
        API_KEY, API_VERSION = 34, 0
        SCHEMA = Schema(("throttle", Int32),
                        ("results", Array(("topic", s), ("partitions", Array(("partition", Int32),
                                                                              ("error_code", Int16))))))

    class AlterDirs(Request):
        API_KEY, API_VERSION, RESPONSE_TYPE = 34, 0, AlterDirsResponse
        SCHEMA = Schema(("dirs", Array(("path", s), ("topics", Array(("name", s), ("partitions", Array(Int32)))))))

    return CreateToken, DescribeToken, AlterDirs


def test_token_and_log_dir_apis_answered(one):
    """APIs Kafka 2.7 advertises and Gregor answers as Kafka does without the feature: delegation
    tokens on PLAINTEXT (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED), AlterReplicaLogDirs' checks. The
    connection stays open."""
    from kafka.protocol.admin import ApiVersionRequest_v0
    CreateToken, DescribeToken, AlterDirs = _admin_requests()
    topic = "dirs-t"
    create_topic(one, topic, partitions=1)
    raw = Raw(one, one[1].id)
    try:
        keys = {k[0]: (k[1], k[2]) for k in raw.send(ApiVersionRequest_v0()).api_versions}
        for k in (34, 38, 39, 40, 41):
            assert k in keys, k
        r = raw.send(CreateToken([], -1))
        assert r.error_code == 64 and (r.principal_type, r.principal_name) == ("User", "ANONYMOUS")
        assert r.issue == -1 and r.token_id == ""
        assert raw.send(DescribeToken(None)).error_code == 64
        logdir = one[1].logdir
        r = raw.send(AlterDirs([(logdir, [(topic, [0, 7])]), ("/no/such/dir", [(topic, [0])])]))
        got = {(t[0], p[0], i): p[1] for i, t in enumerate(r.results) for p in t[1]}
        assert got == {(topic, 0, 0): 0, (topic, 7, 0): 9, (topic, 0, 1): 57}, got
        assert raw.send(ApiVersionRequest_v0()).error_code == 0  # still connected
    finally:
        raw.close()


def test_fetch_from_follower_in_client_rack(cluster_factory, zk_connect):
    """KIP-392: brokers in racks r1..r3 with RackAwareReplicaSelector; a librdkafka consumer with
    client.rack = the rack of a follower is sent there by the leader (PreferredReadReplica) and
    reads everything from it: the follower's consumer BytesOutPerSec for the topic grows, the
    leader's does not."""
    c = cluster_factory(zk_connect, n=3, start=False,
                        config={"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"})
    ports = {}
    for i in (1, 2, 3):
        c[i].config["broker.rack"] = f"r{i}"
        ports[i] = H.free_port()
        c[i].config["gregor.metrics.listener"] = f"http://127.0.0.1:{ports[i]}"
    c.start()
    topic = "ffr-t"
    create_topic(c, topic, partitions=1, rf=3)
    produce(c, topic, 200, 1)
    admin = AdminClient({"bootstrap.servers": bootstrap(c)})
    md = admin.list_topics(topic, timeout=20).topics[topic].partitions[0]
    leader = md.leader
    follower = next(r for r in md.replicas if r != leader)
    H.wait_for(lambda: len(admin.list_topics(topic, timeout=20).topics[topic].partitions[0].isrs) == 3, 30,
               "a full ISR")
    cons = Consumer({"bootstrap.servers": bootstrap(c), "group.id": "ffr-g", "client.rack": f"r{follower}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    cons.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 60
    while got < 200 and time.monotonic() < deadline:
        for m in cons.consume(100, 0.5):
            if m.error() is None:
                got += 1
    cons.close()
    assert got == 200
    key = f"name=BytesOutPerSec,topic={topic}"
    H.wait_for(lambda: (H.find_metric(c[follower].metrics(), key) or 0) > 0, 10,
               "consumer bytes served by the follower")
    assert not H.find_metric(c[leader].metrics(), key)
    # the followers' replica fetchers use incremental fetch sessions (KIP-227) on the leader
    import urllib.request

    def sessions():
        text = urllib.request.urlopen(f"http://127.0.0.1:{ports[leader]}/metrics", timeout=5).read().decode()
        for line in text.splitlines():
            if line.startswith("kafka_server_fetchsessioncache_numincrementalfetchsessions"):
                return float(line.split()[-1])
        return 0
    H.wait_for(lambda: sessions() >= 2, 10, "the followers' fetch sessions")


def test_incremental_fetch_session(one):
    """KIP-227 through Fetch v7 (kafka-python's protocol classes): a full fetch opens a session,
    an incremental one answers only the partitions that changed, a replayed epoch gets
    INVALID_FETCH_SESSION_EPOCH and an unknown session FETCH_SESSION_ID_NOT_FOUND."""
    from kafka.protocol.fetch import FetchRequest, FetchResponse
    from kafka.protocol.types import Array, Int8, Int32, Int64, Schema, String

    class Fetch(FetchRequest[7]):  # kafka-python 2.0's v7 schema mis-declares forgotten_topics_data
        SCHEMA = Schema(("replica_id", Int32), ("max_wait_time", Int32), ("min_bytes", Int32),
                        ("max_bytes", Int32), ("isolation_level", Int8), ("session_id", Int32),
                        ("session_epoch", Int32),
                        ("topics", Array(("topic", String("utf-8")),
                                         ("partitions", Array(("partition", Int32), ("fetch_offset", Int64),
                                                              ("log_start_offset", Int64), ("max_bytes", Int32))))),
                        ("forgotten_topics_data", Array(("topic", String("utf-8")), ("partitions", Array(Int32)))))
        RESPONSE_TYPE = FetchResponse[7]
    topic = "sess-t"
    create_topic(one, topic, partitions=2)
    produce(one, topic, 10, 2)  # 5 records in each partition
    raw = Raw(one, one[1].id)
    try:
        def fetch(sid, epoch, parts, forget=()):
            r = raw.send(Fetch(-1, 0, 1, 1 << 20, 0, sid, epoch,
                               [(topic, [(p, off, -1, 1 << 20) for p, off in parts])] if parts else [],
                               [(topic, list(forget))] if forget else []))
            got = {p[0]: (p[1], p[2], len(p[6])) for t in r.topics for p in t[1]}
            return r.error_code, r.session_id, got

        err, sid, got = fetch(0, 0, [(0, 5), (1, 5)])
        assert err == 0 and sid > 0 and got == {0: (0, 5, 0), 1: (0, 5, 0)}
        err, sid2, got = fetch(sid, 1, [])
        assert (err, sid2, got) == (0, sid, {})  # nothing changed
        produce_to(one, topic, 1, 3)
        err, _, got = fetch(sid, 2, [])
        assert err == 0 and list(got) == [1] and got[1][1] == 8 and got[1][2] > 0
        assert fetch(sid, 2, [])[0] == 71  # INVALID_FETCH_SESSION_EPOCH
        assert fetch(sid + 1 if sid < 2**31 - 1 else 1, 1, [])[0] == 70  # FETCH_SESSION_ID_NOT_FOUND
        # forgetting both partitions closes the session
        err, sid3, _ = fetch(sid, 3, [], forget=[0, 1])
        assert err == 0 and sid3 == 0
        assert fetch(sid, 4, [])[0] == 70
    finally:
        raw.close()


def produce_to(cluster, topic, partition, n):
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all"})
    for i in range(n):
        p.produce(topic, f"x{i}".encode(), partition=partition)
    assert p.flush(30) == 0


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_old_message_format_librdkafka_09(one, codec):
    """librdkafka without ApiVersions as a 0.9 client (broker.version.fallback=0.9.0: Produce v1,
    Fetch v1, magic 0 message sets, gzip as wrapper messages): its messages are converted to v2
    batches on append and down-converted on fetch; a current client reads the same records at
    the same offsets."""
    topic = f"old-09-{codec}"
    create_topic(one, topic, partitions=1)
    old = {"bootstrap.servers": bootstrap(one), "api.version.request": False, "broker.version.fallback": "0.9.0"}
    p = Producer({**old, "acks": 1, "compression.codec": codec})
    for i in range(30):
        p.produce(topic, f"val-{i}".encode(), key=f"k{i}".encode(), partition=0)
    assert p.flush(30) == 0
    c = Consumer({**old, "group.id": "old-g", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 30 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m)
    c.close()
    assert [(m.offset(), m.key(), m.value()) for m in got] == \
        [(i, f"k{i}".encode(), f"val-{i}".encode()) for i in range(30)]
    for api in ("Produce", "FetchConsumer"):
        key = f"name=RequestsPerSec,request={api},version=1"
        H.wait_for(lambda: H.find_metric(one[1].metrics(), key), 10, f"{api} v1 requests")
    assert read_modern(one, topic, 30) == [(i, f"val-{i}".encode()) for i in range(30)]


def test_gzip_batches_down_converted_for_old_consumer(one):
    """A current producer's gzip RecordBatches are inflated and down-converted for a 0.9 consumer."""
    topic = "gz-new"
    create_topic(one, topic, partitions=1)
    p = Producer({"bootstrap.servers": bootstrap(one), "compression.type": "gzip", "linger.ms": 50})
    for i in range(50):
        p.produce(topic, f"g{i}".encode(), partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap(one), "api.version.request": False,
                  "broker.version.fallback": "0.9.0", "group.id": "gz-old", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 50 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.offset(), m.value()))
    c.close()
    assert got == [(i, f"g{i}".encode()) for i in range(50)]


def read_modern(cluster, topic, n):
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "modern", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    vals = []
    deadline = time.monotonic() + 30
    while len(vals) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            vals.append((m.offset(), m.value()))
    c.close()
    return vals


def test_old_message_format_kafka_python_010(one):
    """kafka-python as a 0.10.0 client (Produce v2 / Fetch v2, magic 1 with timestamps)."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP
    topic = "old-010"
    create_topic(one, topic, partitions=1)
    ts = 1600000000123
    p = KafkaProducer(bootstrap_servers=bootstrap(one), api_version=(0, 10, 0), acks=1)
    for i in range(20):
        p.send(topic, value=f"v{i}".encode(), key=b"k", partition=0, timestamp_ms=ts + i)
    p.flush(30)
    p.close()
    c = KafkaConsumer(bootstrap_servers=bootstrap(one), api_version=(0, 10, 0), auto_offset_reset="earliest",
                      consumer_timeout_ms=5000)
    c.assign([KTP(topic, 0)])
    got = []
    for m in c:
        got.append((m.offset, m.value, m.timestamp))
        if len(got) == 20:
            break
    c.close()
    assert got == [(i, f"v{i}".encode(), ts + i) for i in range(20)]
    for api in ("Produce", "FetchConsumer"):
        key = f"name=RequestsPerSec,request={api},version=2"
        H.wait_for(lambda: H.find_metric(one[1].metrics(), key), 10, f"{api} v2 requests")
    assert read_modern(one, topic, 20) == [(i, f"v{i}".encode()) for i in range(20)]
