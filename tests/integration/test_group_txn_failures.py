"""Failure cases of the group and transaction coordinators (docs/GROUPS.md, docs/TRANSACTIONS.md),
through real clients and the raw wire. Each test failed before its fix:

- Compressed coordinator topics: with compression.type gzip / lz4 on __consumer_offsets and
  __transaction_state the coordinators' own writes are stored compressed; after the broker
  coordinating both a group and a transactional.id is SIGKILLed, the new coordinator still serves
  the group's committed offsets, and the open transaction (with its pending transactional
  offsets) commits. (The loaders skipped compressed batches: offsets gone, EndTxn refused.)
- Produce v3 with two batches for one partition: INVALID_RECORD (87), nothing appended (an
  idempotent duplicate among them made the whole set acknowledged but not written).
- OffsetFetch v7 require_stable=true with pending transactional offsets: UNSTABLE_OFFSET_COMMIT
  (88) for that partition (it was ignored).
- group.max.size and offset.metadata.max.bytes, also for TxnOffsetCommit (not configurable;
  TxnOffsetCommit did not check metadata).
"""

import glob
import os
import socket
import struct
import time

import pytest

import gregor_harness as H
from test_consumer_groups import committed, java_hash  # noqa: E402

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

CONFIG = {
    "offsets.topic.num.partitions": "5",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.num.partitions": "5",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "200",
    "group.initial.rebalance.delay.ms": "0",
}
# One broker: the internal topics' replication factors must fit it (Kafka never lowers them).
ONE_BROKER = dict(CONFIG, **{"offsets.topic.replication.factor": "1",
                             "transaction.state.log.replication.factor": "1",
                             "transaction.state.log.min.isr": "1"})


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running())


# ---- raw wire --------------------------------------------------------------------------------

def _s(v):
    if v is None:
        return struct.pack(">h", -1)
    b = v.encode()
    return struct.pack(">h", len(b)) + b


def _exact(sock, n):
    b = b""
    while len(b) < n:
        chunk = sock.recv(n - len(b))
        if not chunk:
            raise ConnectionError(f"closed after {len(b)} of {n} bytes")
        b += chunk
    return b


def rpc(port, api_key, version, body, flexible=False, timeout=10):
    """One request on a new connection; the response body after the correlation id (and, for a
    flexible response, its header tagged fields)."""
    hdr = struct.pack(">hhi", api_key, version, 42) + _s("gtf-test")
    if flexible:
        hdr += b"\x00"
    msg = hdr + body
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(msg)) + msg)
        n = struct.unpack(">i", _exact(s, 4))[0]
        data = _exact(s, n)
    assert struct.unpack_from(">i", data, 0)[0] == 42
    return data[5:] if flexible else data[4:]


def find_coordinator(port, key, key_type=0):
    """(error, node) from FindCoordinator v1."""
    r = rpc(port, 10, 1, _s(key) + struct.pack(">b", key_type))
    _throttle, err = struct.unpack_from(">ih", r, 0)
    pos = 6
    ml = struct.unpack_from(">h", r, pos)[0]
    pos += 2 + max(ml, 0)
    return err, struct.unpack_from(">i", r, pos)[0]


def coordinator(cluster, key, key_type=0, timeout=30, exclude=()):
    """The node coordinating `key`, retrying while it is loading / not available / excluded."""
    def once():
        for b in cluster.running():
            try:
                err, node = find_coordinator(b.port, key, key_type)
            except OSError:
                continue
            if err == 0 and node not in exclude:
                return node
        return None
    return H.wait_for(once, timeout, f"the coordinator of {key!r}", interval=0.2)


# ---- helpers ---------------------------------------------------------------------------------

def create(cluster, topic, partitions, rf=3):
    a = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    a.create_topics([NewTopic(topic, partitions, rf)], operation_timeout=20,
                    request_timeout=30)[topic].result(timeout=40)
    for p in range(partitions):
        H.wait_for(lambda: (cluster.get_json(f"/brokers/topics/{topic}/partitions/{p}/state")[0] or {})
                   .get("leader", -1) >= 0, 30, "a leader")


def disk_codecs(broker, topic_prefix):
    """Codec ids (attributes bits 0-2) of every batch in the segment files of every partition of
    the topic in the broker's log dir (RecordBatch v2 headers)."""
    out = set()
    for f in glob.glob(os.path.join(broker.logdir, f"{topic_prefix}-*", "*.log")):
        data = open(f, "rb").read()
        pos = 0
        while pos + 61 <= len(data):
            _base, blen = struct.unpack_from(">qi", data, pos)
            if blen <= 0:
                break
            out.add(struct.unpack_from(">h", data, pos + 21)[0] & 7)
            pos += 12 + blen
    return out




def read_committed_values(cluster, topic, partition):
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": f"chk-{time.time()}",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, partition, 0)])
    out = []
    deadline = time.time() + 15
    try:
        while time.time() < deadline:
            m = c.poll(0.3)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    break
                continue
            out.append(m.value().decode())
    finally:
        c.close()
    return out


# ---- 1. compressed __consumer_offsets / __transaction_state survive a fail-over ---------------

CODEC_IDS = {"gzip": 1, "lz4": 3}


@pytest.mark.parametrize("codec", ["gzip", "lz4"])
def test_compressed_coordinator_topics_survive_failover(cluster_factory, zk_connect, codec):
    cl = cluster_factory(zk_connect, n=3, config=CONFIG)
    create(cl, "gtf", 2)
    group = "gtf-group"
    g_node = coordinator(cl, group)  # creates __consumer_offsets
    # a transactional.id coordinated by the same broker, so one SIGKILL moves both
    tid = None
    for i in range(100):
        if coordinator(cl, f"gtf-tx-{i}", 1) == g_node:
            tid = f"gtf-tx-{i}"
            break
    assert tid, "no transactional.id on the group's coordinator"

    a = AdminClient({"bootstrap.servers": bootstrap(cl)})
    res = [ConfigResource("topic", t, set_config={"compression.type": codec})
           for t in ("__consumer_offsets", "__transaction_state")]
    for f in a.alter_configs(res, request_timeout=20).values():
        f.result(30)

    gb = cl[g_node]
    c = Consumer({"bootstrap.servers": bootstrap(cl), "group.id": group, "enable.auto.commit": False})

    offset = [2]

    def commit_compressed():  # a new offset each time: only the last one, written compressed, counts
        offset[0] += 1
        c.commit(offsets=[TopicPartition("gtf", 0, offset[0])], asynchronous=False)
        return CODEC_IDS[codec] in disk_codecs(gb, "__consumer_offsets")
    H.wait_for(commit_compressed, 20, f"a {codec} offset commit on disk", interval=0.3)
    last = offset[0]

    def init_compressed():  # a raw InitProducerId writes the id's state
        from test_idempotence import init_producer_id
        return (init_producer_id(gb.port, 1, txn_id=tid)[0] == 0
                and CODEC_IDS[codec] in disk_codecs(gb, "__transaction_state"))
    H.wait_for(init_compressed, 20, f"a {codec} transaction state on disk", interval=0.3)

    p = Producer({"bootstrap.servers": bootstrap(cl), "transactional.id": tid,
                  "transaction.timeout.ms": 60000, "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce("gtf", f"v{i}".encode(), partition=1)
    p.send_offsets_to_transaction([TopicPartition("gtf", 1, 7)], c.consumer_group_metadata(), 30)
    assert p.flush(20) == 0
    c.close()

    gb.kill()
    coordinator(cl, group, exclude=(g_node,), timeout=40)
    coordinator(cl, tid, 1, exclude=(g_node,), timeout=40)
    # the plain commit was loaded; partition 1's transactional offset is still pending (a
    # read_committed consumer's OffsetFetch v7 asks require_stable: it would wait for partition 1)
    assert committed(cl, group, "gtf", 1) == {0: last}
    p.commit_transaction(40)  # the new coordinator knows the Ongoing transaction
    # the markers follow EndTxn's answer
    H.wait_for(lambda: committed(cl, group, "gtf", 2) == {0: last, 1: 7}, 15, "the transaction's offsets")
    assert read_committed_values(cl, "gtf", 1) == ["v0", "v1", "v2"]


# ---- 2. Produce v3+: one record batch per partition ---------------------------------------------

def test_produce_several_batches_for_one_partition_is_invalid_record(cluster_factory, zk_connect):
    """Kafka 2.7's LogValidator refuses a Produce whose records for one partition hold more than
    one v2 batch (INVALID_RECORD, 87). Before, Gregor appended them, and when one of them was an
    idempotent duplicate the whole set was acknowledged with the duplicate's offsets while the
    other batch was never written."""
    from test_idempotence import init_producer_id
    from test_malformed import Conn, parse_produce_v3, produce_v3, record_batch
    cl = cluster_factory(zk_connect, n=1)
    create(cl, "gtf-multi", 1, rf=1)
    port = cl[1].port
    err, pid, _epoch = H.wait_for(lambda: (lambda r: r if r[0] == 0 else None)(init_producer_id(port)), 20,
                                  "a producer id")
    c = Conn(port, timeout=10)

    def produce(corr, records):
        c.send(produce_v3(corr, "gtf-multi", 0, records, acks=-1))
        return parse_produce_v3(c.recv_frame(), corr)[("gtf-multi", 0)]

    b0 = record_batch([b"a"], pid=pid, epoch=0, seq=0)
    b1 = record_batch([b"b"], pid=pid, epoch=0, seq=1)
    assert produce(1, b0) == (0, 0)
    assert produce(2, b0 + b1)[0] == 87  # a retried duplicate and a new batch
    assert produce(3, record_batch([b"x"]) + record_batch([b"y"]))[0] == 87
    assert produce(4, b1) == (0, 1)  # nothing of the refused requests was written
    assert produce(5, b0) == (0, 0)  # alone, b0 is still answered as a duplicate
    assert produce(6, record_batch([b"z"])) == (0, 2)
    c.close()


# ---- 3. OffsetFetch v7 require_stable (KIP-447) --------------------------------------------------

def _cstr(s):
    b = s.encode()
    return bytes([len(b) + 1]) + b


def offset_fetch_v7(port, group, topic, partitions, require_stable):
    """{partition: (offset, error)} from OffsetFetch v7 (flexible) for one topic."""
    body = (_cstr(group) + bytes([2]) + _cstr(topic) + bytes([len(partitions) + 1])
            + b"".join(struct.pack(">i", p) for p in partitions) + b"\x00"
            + struct.pack(">?", require_stable) + b"\x00")
    r = rpc(port, 9, 7, body, flexible=True)
    pos = 4  # throttle
    out = {}
    for _ in range(r[pos] - 1):  # topics (fewer than 127)
        pos += 1
        pos += r[pos] - 1 + 1  # name
        nparts = r[pos] - 1
        pos += 1
        for _ in range(nparts):
            idx, off, _epoch = struct.unpack_from(">iqi", r, pos)
            pos += 16
            pos += max(r[pos] - 1, 0) + 1  # metadata
            err = struct.unpack_from(">h", r, pos)[0]
            pos += 2 + 1  # error, tags
            out[idx] = (off, err)
        pos += 1  # topic tags
    assert struct.unpack_from(">h", r, pos)[0] == 0, "group-level error"
    return out


def test_offset_fetch_require_stable(cluster_factory, zk_connect):
    """Kafka 2.7 answers an OffsetFetch v7 with require_stable=true UNSTABLE_OFFSET_COMMIT (88) for a
    partition that has transactional offsets of the group waiting for their marker; without the
    flag it answers the last committed offset. After the commit the new offset is answered.
    Before, require_stable was ignored (the stale offset was answered)."""
    cl = cluster_factory(zk_connect, n=1, config=ONE_BROKER)
    create(cl, "gtf-rs", 2, rf=1)
    group = "gtf-rs-group"
    port = cl[coordinator(cl, group)].port
    c = Consumer({"bootstrap.servers": bootstrap(cl), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("gtf-rs", 0, 2), TopicPartition("gtf-rs", 1, 4)], asynchronous=False)
    p = Producer({"bootstrap.servers": bootstrap(cl), "transactional.id": "gtf-rs-tx",
                  "transaction.timeout.ms": 60000, "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("gtf-rs", b"x", partition=0)
    p.send_offsets_to_transaction([TopicPartition("gtf-rs", 0, 5)], c.consumer_group_metadata(), 30)
    assert p.flush(20) == 0
    assert offset_fetch_v7(port, group, "gtf-rs", [0, 1], True) == {0: (-1, 88), 1: (4, 0)}
    assert offset_fetch_v7(port, group, "gtf-rs", [0, 1], False) == {0: (2, 0), 1: (4, 0)}
    p.commit_transaction(30)
    H.wait_for(lambda: offset_fetch_v7(port, group, "gtf-rs", [0, 1], True) == {0: (5, 0), 1: (4, 0)}, 15,
               "the committed transactional offset")
    c.close()


# ---- 5. group.max.size, offset.metadata.max.bytes -------------------------------------------------

def join_group_v3(port, group, member_id=""):
    """(error, generation, member_id) from JoinGroup v3 (no MEMBER_ID_REQUIRED round trip)."""
    body = (_s(group) + struct.pack(">ii", 10000, 10000) + _s(member_id) + _s("consumer")
            + struct.pack(">i", 1) + _s("range") + struct.pack(">i", 3) + b"abc")
    r = rpc(port, 11, 3, body)
    _throttle, err, gen = struct.unpack_from(">ihi", r, 0)
    pos = 10
    for _ in range(2):  # protocol name, leader
        pos += 2 + max(struct.unpack_from(">h", r, pos)[0], 0)
    ml = struct.unpack_from(">h", r, pos)[0]
    return err, gen, r[pos + 2:pos + 2 + max(ml, 0)].decode()


def offset_commit_v2(port, group, topic, parts, generation=-1, member=""):
    """{partition: error} from OffsetCommit v2 of [(partition, offset, metadata)] (by default as a
    simple group: generation -1, no member)."""
    body = (_s(group) + struct.pack(">i", generation) + _s(member) + struct.pack(">q", -1) + struct.pack(">i", 1) + _s(topic)
            + struct.pack(">i", len(parts)) + b"".join(struct.pack(">iq", p, o) + _s(m) for p, o, m in parts))
    r = rpc(port, 8, 2, body)
    pos = 4
    pos += 2 + struct.unpack_from(">h", r, pos)[0]
    out = {}
    for _ in range(struct.unpack_from(">i", r, pos)[0]):
        idx, err = struct.unpack_from(">ih", r, pos + 4)
        out[idx] = err
        pos += 6
    return out


def txn_offset_commit_v0(port, tid, group, pid, epoch, topic, parts):
    body = (_s(tid) + _s(group) + struct.pack(">qh", pid, epoch) + struct.pack(">i", 1) + _s(topic)
            + struct.pack(">i", len(parts)) + b"".join(struct.pack(">iq", p, o) + _s(m) for p, o, m in parts))
    r = rpc(port, 28, 0, body)
    pos = 4 + 4  # throttle, topics count (1)
    pos += 2 + struct.unpack_from(">h", r, pos)[0]
    out = {}
    for _ in range(struct.unpack_from(">i", r, pos)[0]):
        idx, err = struct.unpack_from(">ih", r, pos + 4)
        out[idx] = err
        pos += 6
    return out


def test_group_max_size_and_offset_metadata_max_bytes(cluster_factory, zk_connect):
    """group.max.size=1: a second member's JoinGroup gets GROUP_MAX_SIZE_REACHED (81), the first
    keeps its generation. offset.metadata.max.bytes=10: an OffsetCommit or TxnOffsetCommit
    partition whose metadata is longer gets OFFSET_METADATA_TOO_LARGE (12) and is not stored; the
    other partitions of the request are. Before, both keys were unknown (Kafka's defaults, INT_MAX
    and 4096, always applied) and TxnOffsetCommit did not check metadata at all."""
    from test_idempotence import init_producer_id
    cl = cluster_factory(zk_connect, n=1, config=dict(ONE_BROKER, **{"group.max.size": "1",
                                                                     "offset.metadata.max.bytes": "10"}))
    create(cl, "gtf-lim", 2, rf=1)
    port = cl[coordinator(cl, "gtf-lim-group")].port
    err, gen, m1 = H.wait_for(lambda: (lambda r: r if r[0] == 0 else None)(join_group_v3(port, "gtf-lim-group")),
                              20, "the first member's join")
    assert gen == 1 and m1
    assert join_group_v3(port, "gtf-lim-group")[0] == 81
    assert join_group_v3(port, "gtf-lim-group", m1)[:2] == (0, 1)  # a member rejoins: no rebalance

    assert offset_commit_v2(port, "gtf-lim-simple", "gtf-lim", [(0, 3, "0123456789"), (1, 4, "0123456789X")]) \
        == {0: 0, 1: 12}
    assert committed(cl, "gtf-lim-simple", "gtf-lim", 2) == {0: 3, 1: -1001}

    tid = "gtf-lim-tx"
    tport = cl[coordinator(cl, tid, 1)].port
    e, pid, epoch = H.wait_for(lambda: (lambda r: r if r[0] == 0 else None)(init_producer_id(tport, 1, txn_id=tid)),
                               20, "a transactional producer id")
    add = rpc(tport, 25, 0, _s(tid) + struct.pack(">qh", pid, epoch) + _s("gtf-lim-txg"))  # AddOffsetsToTxn
    assert struct.unpack_from(">ih", add, 0)[1] == 0
    assert txn_offset_commit_v0(port, tid, "gtf-lim-txg", pid, epoch, "gtf-lim",
                                [(0, 5, "short"), (1, 6, "much-too-long")]) == {0: 0, 1: 12}
    end = rpc(tport, 26, 0, _s(tid) + struct.pack(">qh", pid, epoch) + struct.pack(">?", True))  # EndTxn commit
    assert struct.unpack_from(">ih", end, 0)[1] == 0
    H.wait_for(lambda: committed(cl, "gtf-lim-txg", "gtf-lim", 2) == {0: 5, 1: -1001}, 15,
               "the transaction's valid offset only")


# ---- internal topics wait for enough live brokers (issue 24 item 5) ---------------------------

def metadata_v1(port, topics):
    """(number of brokers, {topic: error}) from Metadata v1 for the listed (missing) topics."""
    r = rpc(port, 3, 1, struct.pack(">i", len(topics)) + b"".join(_s(t) for t in topics))
    n_brokers = struct.unpack_from(">i", r, 0)[0]
    pos = 4
    for _ in range(n_brokers):
        pos += 4  # node id
        pos += 2 + struct.unpack_from(">h", r, pos)[0] + 4  # host, port
        pos += 2 + max(struct.unpack_from(">h", r, pos)[0], 0)  # rack
    pos += 4  # controller id
    out = {}
    n_topics = struct.unpack_from(">i", r, pos)[0]
    pos += 4
    for _ in range(n_topics):
        err, nl = struct.unpack_from(">hh", r, pos)
        name = r[pos + 4:pos + 4 + nl].decode()
        pos += 4 + nl + 1  # is_internal
        assert struct.unpack_from(">i", r, pos)[0] == 0, "only missing topics are asked for"
        pos += 4
        out[name] = err
    return n_brokers, out


def test_internal_topics_wait_for_enough_live_brokers(cluster_factory, zk_connect):
    """Kafka 2.7's createInternalTopic: with fewer live brokers than offsets.topic.replication.factor
    / transaction.state.log.replication.factor, FindCoordinator answers COORDINATOR_NOT_AVAILABLE
    (15) and Metadata INVALID_REPLICATION_FACTOR (38) for the internal topic, and nothing is created.
    Once enough brokers are up the topics get the configured replication factor, min.insync.replicas
    (transaction.state.log.min.isr) and segment.bytes (offsets.topic.segment.bytes,
    transaction.state.log.segment.bytes). Before, both were created at once with the replication
    factor and min.insync.replicas lowered to the live brokers (for good), and
    transaction.state.log.segment.bytes was ignored; Metadata created __transaction_state with
    __consumer_offsets' settings."""
    cfg = dict(CONFIG, **{"offsets.topic.num.partitions": "3", "offsets.topic.segment.bytes": "1048576",
                          "transaction.state.log.num.partitions": "3", "transaction.state.log.min.isr": "2",
                          "transaction.state.log.segment.bytes": "2097152"})
    cl = cluster_factory(zk_connect, n=3, config=cfg, start=False)
    cl.start(ids=[1, 2])
    for b in cl.running():  # both brokers know both live brokers before the checks below
        H.wait_for(lambda: metadata_v1(b.port, [])[0] == 2, 20, "two live brokers in the metadata")
    for b in cl.running():
        for _ in range(3):
            assert find_coordinator(b.port, "gtf-early-group", 0)[0] == 15
            assert find_coordinator(b.port, "gtf-early-txn", 1)[0] == 15
        assert metadata_v1(b.port, ["__consumer_offsets", "__transaction_state"])[1] == \
            {"__consumer_offsets": 38, "__transaction_state": 38}
    assert not cl.zk.exists("/brokers/topics/__consumer_offsets")
    assert not cl.zk.exists("/brokers/topics/__transaction_state")

    cl.start(ids=[3])
    coordinator(cl, "gtf-early-group", 0)
    coordinator(cl, "gtf-early-txn", 1)
    for topic, configs in (("__consumer_offsets", {"segment.bytes": "1048576", "cleanup.policy": "compact"}),
                           ("__transaction_state", {"segment.bytes": "2097152", "min.insync.replicas": "2",
                                                    "cleanup.policy": "compact"})):
        assignment = cl.get_json(f"/brokers/topics/{topic}")[0]["partitions"]
        assert len(assignment) == 3 and all(len(r) == 3 for r in assignment.values()), (topic, assignment)
        stored = cl.get_json(f"/config/topics/{topic}")[0]["config"]
        assert {k: stored.get(k) for k in configs} == configs, (topic, stored)

    # issue 24 item 9: a non-ASCII transactional id is placed by Java's String.hashCode over UTF-16
    # code units (partition 2 of 3 for "gtf-\u00e9"; its UTF-8 bytes would give partition 0)
    tid = "gtf-\u00e9"
    h = java_hash(tid) - (1 << 32 if java_hash(tid) >= 1 << 31 else 0)  # signed, as Java's int
    assert (0 if h == -(1 << 31) else abs(h)) % 3 == 2  # Kafka's Utils.abs(hashCode) % partitions
    H.wait_for(lambda: (cl.get_json("/brokers/topics/__transaction_state/partitions/2/state")[0] or {})
               .get("leader", -1) >= 0, 30, "a leader of __transaction_state-2")
    leader = cl.get_json("/brokers/topics/__transaction_state/partitions/2/state")[0]["leader"]
    assert coordinator(cl, tid, 1) == leader



def test_offset_commit_of_stale_member_during_completing_rebalance(cluster_factory, zk_connect):
    """Kafka 2.7 doCommitOffsets checks the member and the generation before the group state: while
    the group waits for its leader's SyncGroup (CompletingRebalance) an OffsetCommit from an unknown
    member is UNKNOWN_MEMBER_ID (25), from a member with another generation ILLEGAL_GENERATION (22),
    and only a current member of the current generation gets REBALANCE_IN_PROGRESS (27). Before,
    all three got REBALANCE_IN_PROGRESS, so a fenced consumer retried its commit instead of
    rejoining."""
    cl = cluster_factory(zk_connect, n=1, config=ONE_BROKER)
    create(cl, "gtf-stale", 1, rf=1)
    group = "gtf-stale-group"
    port = cl[coordinator(cl, group)].port
    err, gen, m1 = H.wait_for(lambda: (lambda r: r if r[0] == 0 else None)(join_group_v3(port, group)),
                              20, "the member's join")
    assert gen == 1 and m1  # the only member joined: CompletingRebalance until its SyncGroup
    assert offset_commit_v2(port, group, "gtf-stale", [(0, 1, "")], generation=1, member="stale-member") == {0: 25}
    assert offset_commit_v2(port, group, "gtf-stale", [(0, 1, "")], generation=0, member=m1) == {0: 22}
    assert offset_commit_v2(port, group, "gtf-stale", [(0, 1, "")], generation=1, member=m1) == {0: 27}
    assert committed(cl, group, "gtf-stale", 1) == {0: -1001}


def test_every_expired_transactional_id_is_removed(cluster_factory, zk_connect):
    """Kafka 2.7's removeExpiredTransactionalIds tombstones every id past
    transactional.id.expiration.ms in one pass. Before, a pass wrote at most 64 tombstones (and
    timed out at most 64 transactions), so with the default hourly interval at most 64 ids expired
    per hour and the table of a busy coordinator grew without bound."""
    from test_idempotence import init_producer_id
    n = 100
    cl = cluster_factory(zk_connect, n=1, config=dict(ONE_BROKER, **{
        "transaction.state.log.num.partitions": "1",
        "transactional.id.expiration.ms": "1000",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "20000"}))
    port = cl[coordinator(cl, "gtf-exp-0", 1)].port
    for i in range(n):
        H.wait_for(lambda: init_producer_id(port, 1, txn_id=f"gtf-exp-{i}")[0] == 0, 20, "a transactional id")

    def tombstones():
        c = Consumer({"bootstrap.servers": bootstrap(cl), "group.id": f"chk-{time.time()}",
                      "enable.auto.commit": False, "enable.partition.eof": True})
        c.assign([TopicPartition("__transaction_state", 0, 0)])
        keys = set()
        try:
            while True:
                m = c.poll(5)
                assert m is not None, "no end of __transaction_state"
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        return keys
                    continue
                if m.value() is None:
                    keys.add(m.key())
        finally:
            c.close()

    # the first pass after the ids expired (at most 20 s away) tombstones all of them; the next
    # pass is 20 s after it, so every id must be gone well before that one (the old code's 64
    # first, the other 36 a pass later)
    H.wait_for(lambda: len(tombstones()) > 0, 60, "the first expiry pass")
    H.wait_for(lambda: len(tombstones()) == n, 10, f"{n} tombstones from one pass")


def test_init_producer_id_retry_after_producer_id_rotation(cluster_factory, zk_connect):
    """KIP-360 as Kafka 2.7: when a transactional id's epoch is exhausted (32766) the next
    InitProducerId with its pid/epoch rotates to a new producer id (epoch 0); a retry of that
    request (its answer lost) gets the new pid and epoch again, as isValidProducerId accepts the
    last producer id with an exhausted epoch. Another epoch of the old pid is fenced (PRODUCER_FENCED,
    which v3 spells INVALID_PRODUCER_EPOCH, 47, as KIP-588). Before, the retry was fenced too and
    the producer died."""
    cl = cluster_factory(zk_connect, n=1, config=ONE_BROKER)
    tid = "gtf-rotate"
    port = cl[coordinator(cl, tid, 1)].port
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)

    def init(pid=-1, epoch=-1):  # InitProducerId v3 on one connection (tens of thousands of them)
        body = bytes([len(tid) + 1]) + tid.encode() + struct.pack(">iqh", 60000, pid, epoch) + b"\x00"
        msg = struct.pack(">hhi", 22, 3, 42) + _s("gtf-test") + b"\x00" + body
        sock.sendall(struct.pack(">i", len(msg)) + msg)
        data = _exact(sock, struct.unpack(">i", _exact(sock, 4))[0])
        return struct.unpack_from(">hqh", data, 9)  # correlation id, header tags, throttle

    try:
        err, pid, epoch = H.wait_for(lambda: (lambda r: r if r[0] == 0 else None)(init()), 20, "a producer id")
        while epoch < 32766:
            err, pid2, epoch2 = init(pid, epoch)
            assert err == 0 and pid2 == pid and epoch2 == epoch + 1, (err, pid2, epoch2, epoch)
            epoch = epoch2
        err, new_pid, new_epoch = init(pid, epoch)  # rotation
        assert err == 0 and new_pid != pid and new_epoch == 0, (err, new_pid, new_epoch)
        assert init(pid, epoch) == (0, new_pid, 0)  # the retry of the rotation
        assert init(pid, epoch - 1)[0] == 47
        assert init(new_pid, 0) == (0, new_pid, 1)  # the new producer goes on
    finally:
        sock.close()
