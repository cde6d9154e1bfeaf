"""Transactions (issue 11) through the wire with confluent-kafka: commit and abort with
read_committed vs read_uncommitted consumers, send_offsets_to_transaction moving a group's
offsets only on commit, zombie fencing with two producers of one transactional.id, the
coordinator's broker SIGKILLed mid-stream, and the KIP-890 part 1 check: a raw-wire
transactional produce after EndTxn must be refused and never become visible."""

import os
import signal
import socket
import struct
import time
import zlib

import pytest

import gregor_harness as H

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

CONFIG = {
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "200",
    "transaction.state.log.num.partitions": "5",
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
}


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running() if not b.paused)


def state(cluster, topic, p=0):
    return cluster.get_json(f"/brokers/topics/{topic}/partitions/{p}/state")[0]


def create(cluster, topic, partitions, rf=3):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic(topic, partitions, rf)], operation_timeout=20,
                        request_timeout=30)[topic].result(timeout=40)
    for p in range(partitions):
        H.wait_for(lambda: (state(cluster, topic, p) or {}).get("leader", -1) >= 0, 30, "a leader")


def txn_producer(cluster, tid, **extra):
    conf = {"bootstrap.servers": bootstrap(cluster), "transactional.id": tid,
            "transaction.timeout.ms": 20000, "linger.ms": 5}
    conf.update(extra)
    p = Producer(conf)
    p.init_transactions(60)
    return p


def consume(cluster, topic, partitions, isolation, min_count=0, timeout=20, quiet=2.0):
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": f"chk-{time.time()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": isolation, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.time() + timeout
    last = time.time()
    eofs = set()
    while time.time() < deadline:
        m = c.poll(0.2)
        if m is None:
            if len(got) >= min_count and len(eofs) == partitions and time.time() - last > quiet:
                break
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                eofs.add(m.partition())
                continue
            raise AssertionError(m.error())
        eofs.discard(m.partition())
        got.append(m.value().decode())
        last = time.time()
    c.close()
    return got


@pytest.fixture
def tcluster(cluster_factory, zk_connect):
    return cluster_factory(zk_connect, n=3, config=CONFIG)


def test_commit_abort_and_isolation(tcluster):
    create(tcluster, "t1", 2)
    p = txn_producer(tcluster, "tx-a")
    p.begin_transaction()
    for i in range(10):
        p.produce("t1", f"c1-{i}".encode(), partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce("t1", f"ab-{i}".encode(), partition=i % 2)
    p.flush(10)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce("t1", f"c2-{i}".encode(), partition=i % 2)
    p.commit_transaction(30)
    committed = consume(tcluster, "t1", 2, "read_committed", min_count=15)
    assert sorted(committed) == sorted([f"c1-{i}" for i in range(10)] + [f"c2-{i}" for i in range(5)])
    uncommitted = consume(tcluster, "t1", 2, "read_uncommitted", min_count=25)
    assert len(uncommitted) == 25 and any(v.startswith("ab-") for v in uncommitted)


def test_open_transaction_blocks_read_committed(tcluster):
    create(tcluster, "t2", 1)
    p = txn_producer(tcluster, "tx-open")
    p.begin_transaction()
    p.produce("t2", b"pending", partition=0)
    p.flush(10)
    assert consume(tcluster, "t2", 1, "read_committed", timeout=5, quiet=1.5) == []
    assert consume(tcluster, "t2", 1, "read_uncommitted", min_count=1, timeout=10) == ["pending"]
    # ListOffsets LATEST: the LSO for read_committed, the high watermark otherwise
    for iso, want in (("read_committed", 0), ("read_uncommitted", 1)):
        c = Consumer({"bootstrap.servers": bootstrap(tcluster), "group.id": "wm", "isolation.level": iso})
        assert c.get_watermark_offsets(TopicPartition("t2", 0), timeout=10)[1] == want, iso
        c.close()
    p.commit_transaction(30)
    assert consume(tcluster, "t2", 1, "read_committed", min_count=1) == ["pending"]


def committed_offset(cluster, group, topic):
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": group, "enable.auto.commit": False})
    tp = c.committed([TopicPartition(topic, 0)], timeout=20)[0]
    c.close()
    return tp.offset


def test_send_offsets_only_on_commit(tcluster):
    create(tcluster, "in1", 1)
    create(tcluster, "out1", 1)
    pr = Producer({"bootstrap.servers": bootstrap(tcluster)})
    for i in range(10):
        pr.produce("in1", f"v{i}".encode(), partition=0)
    pr.flush(10)
    group = "eos-group"
    c = Consumer({"bootstrap.servers": bootstrap(tcluster), "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.subscribe(["in1"])
    msgs = []
    deadline = time.time() + 30
    while len(msgs) < 10 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            msgs.append(m)
    assert len(msgs) == 10
    p = txn_producer(tcluster, "tx-eos")
    p.begin_transaction()
    for m in msgs[:5]:
        p.produce("out1", m.value().upper(), partition=0)
    p.send_offsets_to_transaction([TopicPartition("in1", 0, msgs[4].offset() + 1)],
                                  c.consumer_group_metadata(), 30)
    p.abort_transaction(30)
    assert committed_offset(tcluster, group + "-probe", "in1") < 0  # unrelated group: nothing
    c2 = Consumer({"bootstrap.servers": bootstrap(tcluster), "group.id": group, "enable.auto.commit": False})
    assert c2.committed([TopicPartition("in1", 0)], timeout=20)[0].offset < 0
    p.begin_transaction()
    for m in msgs:
        p.produce("out1", m.value().upper(), partition=0)
    p.send_offsets_to_transaction([TopicPartition("in1", 0, msgs[-1].offset() + 1)],
                                  c.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    H.wait_for(lambda: c2.committed([TopicPartition("in1", 0)], timeout=20)[0].offset == 10, 20,
               "the committed offset")
    c2.close()
    c.close()
    assert consume(tcluster, "out1", 1, "read_committed", min_count=10) == [f"V{i}" for i in range(10)]


def test_zombie_fencing(tcluster):
    create(tcluster, "t3", 1)
    old = txn_producer(tcluster, "tx-z")
    old.begin_transaction()
    old.produce("t3", b"zombie-1", partition=0)
    old.flush(10)
    new = txn_producer(tcluster, "tx-z")  # fences old, aborts its open transaction
    new.begin_transaction()
    new.produce("t3", b"new-1", partition=0)
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as ei:
        old.produce("t3", b"zombie-2", partition=0)
        old.commit_transaction(20)
    assert ei.value.args[0].fatal() or "fenc" in str(ei.value).lower(), ei.value
    got = consume(tcluster, "t3", 1, "read_committed", min_count=1)
    assert got == ["new-1"]


# ---- raw wire (KIP-890 part 1) ----

def _s(v):
    if v is None:
        return struct.pack(">h", -1)
    b = v.encode()
    return struct.pack(">h", len(b)) + b


def _crc32c(data):
    from test_malformed import crc32c
    return crc32c(data)


def txn_batch(values, pid, epoch, seq):
    recs = b""
    for i, v in enumerate(values):
        body = b"\x00" + b"\x00" + bytes([i * 2]) + b"\x01" + bytes([len(v) * 2]) + v + b"\x00"
        recs += bytes([len(body) * 2]) + body
    n = len(values)
    ts = int(time.time() * 1000)
    after = struct.pack(">hiqqqhii", 0x10, n - 1, ts, ts, pid, epoch, seq, n) + recs
    rest = struct.pack(">ib", -1, 2) + struct.pack(">I", _crc32c(after)) + after
    return struct.pack(">qi", 0, len(rest)) + rest


class Raw:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=15)
        self.corr = 0

    def call(self, api, ver, body):
        self.corr += 1
        msg = struct.pack(">hhi", api, ver, self.corr) + _s("raw-txn") + body
        self.s.sendall(struct.pack(">i", len(msg)) + msg)
        n = struct.unpack(">i", self._recv(4))[0]
        data = self._recv(n)
        assert struct.unpack_from(">i", data, 0)[0] == self.corr
        return data[4:]

    def _recv(self, n):
        b = b""
        while len(b) < n:
            c = self.s.recv(n - len(b))
            assert c, "connection closed"
            b += c
        return b

    def close(self):
        self.s.close()


def _retry(fn, ok=(0,), timeout=30):
    deadline = time.time() + timeout
    while True:
        r = fn()
        if r[0] in ok or time.time() > deadline:
            return r
        time.sleep(0.2)


def find_txn_coordinator(port, tid):
    def once():
        c = Raw(port)
        r = c.call(10, 1, _s(tid) + b"\x01")
        c.close()
        _t, err = struct.unpack_from(">ih", r, 0)
        pos = 6
        ml = struct.unpack_from(">h", r, pos)[0]
        pos += 2 + max(ml, 0)
        node = struct.unpack_from(">i", r, pos)[0]
        return err, node
    return _retry(once)


def produce_txn(port, tid, topic, part, batch, acks=-1):
    c = Raw(port)
    body = _s(tid) + struct.pack(">hi", acks, 10000) + struct.pack(">i", 1) + _s(topic) + struct.pack(">i", 1) \
        + struct.pack(">ii", part, len(batch)) + batch
    r = c.call(0, 3, body)
    c.close()
    # [topic [partition error base_offset log_append_time]] throttle
    pos = 4
    tl = struct.unpack_from(">h", r, pos)[0]
    pos += 2 + tl + 4 + 4
    return struct.unpack_from(">h", r, pos)[0]


@pytest.mark.parametrize("verification", ["true", "false"])
def test_kip890_late_produce_after_end_txn(cluster_factory, zk_connect, verification):
    """A transactional produce that arrives after its transaction ended (a late retry, a slow
    network) must not land: with verification it is refused with INVALID_TXN_STATE and never
    becomes visible; without it (Kafka 2.7) it silently joins the producer's next transaction
    and is committed with it -- the Jepsen anomaly, shown by the "false" case."""
    cfg = dict(CONFIG)
    cfg["transaction.partition.verification.enable"] = verification
    cl = cluster_factory(zk_connect, n=3, config=cfg)
    create(cl, "k890", 3)
    tid = "raw-tx"
    any_port = cl.running()[0].port
    err, node = find_txn_coordinator(any_port, tid)
    assert err == 0, err
    cport = cl[node].port
    coord = Raw(cport)

    def init():
        r = coord.call(22, 0, _s(tid) + struct.pack(">i", 30000))
        return struct.unpack_from(">hqh", r, 4)
    err, pid, epoch = _retry(init)
    assert err == 0, err

    def add():
        body = _s(tid) + struct.pack(">qh", pid, epoch) + struct.pack(">i", 1) + _s("k890") + struct.pack(">ii", 1, part)
        r = coord.call(24, 0, body)
        pos = 4 + 4
        tl = struct.unpack_from(">h", r, pos)[0]
        pos += 2 + tl + 4 + 4
        return (struct.unpack_from(">h", r, pos)[0],)

    def end(commit):
        r = coord.call(26, 0, _s(tid) + struct.pack(">qhb", pid, epoch, 1 if commit else 0))
        return (struct.unpack_from(">h", r, 4)[0],)

    # a partition led by another broker than the coordinator: verification goes over the wire
    part = next(p for p in range(3) if state(cl, "k890", p)["leader"] != node)
    lport = cl[state(cl, "k890", part)["leader"]].port
    assert _retry(add)[0] == 0
    assert produce_txn(lport, tid, "k890", part, txn_batch([b"t1"], pid, epoch, 0)) == 0
    assert end(True)[0] == 0
    H.wait_for(lambda: consume(cl, "k890", 3, "read_committed", timeout=5, quiet=0.5) == ["t1"], 20, "t1 committed")
    late = produce_txn(lport, tid, "k890", part, txn_batch([b"late"], pid, epoch, 1))
    if verification == "true":
        assert late == 48, late  # INVALID_TXN_STATE
    else:
        assert late == 0, late
    # the producer's next transaction
    assert _retry(add, timeout=20)[0] == 0
    seq = 1 if verification == "true" else 2
    assert produce_txn(lport, tid, "k890", part, txn_batch([b"t2"], pid, epoch, seq)) == 0
    assert end(True)[0] == 0
    box = [[]]

    def t2_visible():
        box[0] = consume(cl, "k890", 3, "read_committed", timeout=5, quiet=0.5)
        return "t2" in box[0]
    H.wait_for(t2_visible, 20, "t2 committed")
    got = box[0]
    coord.close()
    if verification == "true":
        assert got == ["t1", "t2"], got
    else:
        assert got == ["t1", "late", "t2"], got  # Kafka 2.7's anomaly


def find_coordinator(port, key, key_type):
    """FindCoordinator v1 (key_type 0 group, 1 transaction): (error, node)."""
    def once():
        c = Raw(port)
        r = c.call(10, 1, _s(key) + bytes([key_type]))
        c.close()
        _t, err = struct.unpack_from(">ih", r, 0)
        pos = 6
        ml = struct.unpack_from(">h", r, pos)[0]
        pos += 2 + max(ml, 0)
        return err, struct.unpack_from(">i", r, pos)[0]
    return _retry(once)


def key_on(port, prefix, key_type, want):
    """A group / transactional id whose coordinator is broker `want`."""
    for i in range(500):
        key = f"{prefix}-{i}"
        err, node = find_coordinator(port, key, key_type)
        if err == 0 and node == want:
            return key
    raise AssertionError(f"no {prefix} id coordinated by broker {want}")


class RawTxn:
    """One transactional id driven over the wire (InitProducerId, AddPartitionsToTxn,
    AddOffsetsToTxn, EndTxn) on its coordinator's broker."""

    def __init__(self, port, tid):
        self.tid = tid
        self.c = Raw(port)
        r = _retry(lambda: struct.unpack_from(">hqh", self.c.call(22, 0, _s(tid) + struct.pack(">i", 30000)), 4))
        assert r[0] == 0, r
        self.pid, self.epoch = r[1], r[2]

    def add(self, topic, part):
        def once():
            body = _s(self.tid) + struct.pack(">qh", self.pid, self.epoch) + struct.pack(">i", 1) + _s(topic) \
                + struct.pack(">ii", 1, part)
            r = self.c.call(24, 0, body)
            pos = 4 + 4
            tl = struct.unpack_from(">h", r, pos)[0]
            pos += 2 + tl + 4 + 4
            return (struct.unpack_from(">h", r, pos)[0],)
        return _retry(once)[0]

    def add_offsets(self, group):
        return _retry(lambda: (struct.unpack_from(">h", self.c.call(
            25, 0, _s(self.tid) + struct.pack(">qh", self.pid, self.epoch) + _s(group)), 4)[0],))[0]

    def end(self, commit):
        return _retry(lambda: (struct.unpack_from(">h", self.c.call(
            26, 0, _s(self.tid) + struct.pack(">qhb", self.pid, self.epoch, 1 if commit else 0)), 4)[0],))[0]

    def close(self):
        self.c.close()


def txn_offset_commit(port, tid, group, pid, epoch, topic, part, offset):
    """TxnOffsetCommit v0 of one partition: its error code."""
    c = Raw(port)
    body = _s(tid) + _s(group) + struct.pack(">qh", pid, epoch) + struct.pack(">i", 1) + _s(topic) \
        + struct.pack(">iiq", 1, part, offset) + _s(None)
    r = c.call(28, 0, body)
    c.close()
    pos = 4 + 4
    tl = struct.unpack_from(">h", r, pos)[0]
    pos += 2 + tl + 4 + 4
    return struct.unpack_from(">h", r, pos)[0]


def plain_produce(port, topic, part, value):
    """Produce v3 acks=1 of one non-idempotent record: its error code."""
    recs = b"\x00" + b"\x00" + b"\x00" + b"\x01" + bytes([len(value) * 2]) + value + b"\x00"
    recs = bytes([len(recs) * 2]) + recs
    ts = int(time.time() * 1000)
    after = struct.pack(">hiqqqhii", 0, 0, ts, ts, -1, -1, -1, 1) + recs
    rest = struct.pack(">ib", -1, 2) + struct.pack(">I", _crc32c(after)) + after
    batch = struct.pack(">qi", 0, len(rest)) + rest
    c = Raw(port)
    body = _s(None) + struct.pack(">hi", 1, 10000) + struct.pack(">i", 1) + _s(topic) + struct.pack(">i", 1) \
        + struct.pack(">ii", part, len(batch)) + batch
    r = c.call(0, 3, body)
    c.close()
    pos = 4
    tl = struct.unpack_from(">h", r, pos)[0]
    pos += 2 + tl + 4 + 4
    return struct.unpack_from(">h", r, pos)[0]


def test_kip890_slow_coordinator_stalls_only_its_producers(tcluster):
    """Issue 24 item 7: the KIP-890 check of a producer whose coordinator is stopped (SIGSTOP)
    must not hold up the check of a producer whose coordinator is another broker, nor plain
    produce, on the partition leader that asks them. Before, one thread of the broker made every
    check in turn, so the second producer's first batch was answered only after the first one's
    check to the stopped broker had timed out. Checked by order of answers, not by time: the
    stopped coordinator cannot answer, so the second producer is answered while the first waits."""
    cl = tcluster
    create(cl, "k890slow", 3)
    any_port = cl.running()[0].port
    part = 0
    leader = state(cl, "k890slow", part)["leader"]
    others = [b.id for b in cl.running() if b.id != leader]
    stopped, healthy = others[0], others[1]
    tid_a = key_on(any_port, "slow-a", 1, stopped)
    tid_b = key_on(any_port, "slow-b", 1, healthy)
    a = RawTxn(cl[stopped].port, tid_a)
    b = RawTxn(cl[healthy].port, tid_b)
    assert a.add("k890slow", part) == 0
    assert b.add("k890slow", part) == 0
    lport = cl[leader].port
    done = {}

    def produce_a():
        done["a"] = produce_txn(lport, tid_a, "k890slow", part, txn_batch([b"a1"], a.pid, a.epoch, 0), acks=1)
    cl[stopped].pause()
    try:
        ta = threading.Thread(target=produce_a, daemon=True)
        ta.start()
        time.sleep(0.5)  # not a bound: lets a's request reach the leader first (the old code then failed)
        assert plain_produce(lport, "k890slow", part, b"plain") == 0
        # acks=1: the stopped broker may be in the partition's ISR; replication is not what is tested
        assert produce_txn(lport, tid_b, "k890slow", part, txn_batch([b"b1"], b.pid, b.epoch, 0), acks=1) == 0
        assert "a" not in done, f"producer a was answered ({done}) before b although its coordinator is stopped"
    finally:
        cl[stopped].resume()
    ta.join(60)
    assert done.get("a") in (0, 19), done  # verified once resumed, or NOT_ENOUGH_REPLICAS (retriable)
    assert b.end(True) == 0
    H.wait_for(lambda: "b1" in consume(cl, "k890slow", 3, "read_committed", timeout=5, quiet=0.5), 30, "b1 committed")
    b.close()
    a.close()


def _requests(broker, api, version):
    """RequestsPerSec count of api/version in broker's metrics file (0 when absent)."""
    return H.find_metric(broker.metrics(), f"name=RequestsPerSec,request={api},version={version}") or 0


def _fresh_metrics(broker):
    """Waits until broker's metrics file was rewritten after now (every 2 s)."""
    since = time.time()
    H.wait_for(lambda: (broker.metrics_mtime() or 0) > since + 0.1, 30, "metrics file rewritten")


def _queued_checks(cl, topic, part, coord, tids_and_txns):
    """Pauses broker coord (the coordinator of every id), sends each (tid, RawTxn) its first
    transactional Produce (acks=1) to the partition's leader in turn, each reaching the leader's
    queue for coord before the next (the first one's request to the stopped coordinator stays
    unanswered), resumes coord; returns the Produce error codes in order."""
    lport = cl[state(cl, topic, part)["leader"]].port
    done = {}

    def produce(i, tid, t):
        done[i] = produce_txn(lport, tid, topic, part, txn_batch([f"{tid}-v".encode()], t.pid, t.epoch, 0), acks=1)
    threads = []
    cl[coord].pause()
    try:
        for i, (tid, t) in enumerate(tids_and_txns):
            th = threading.Thread(target=produce, args=(i, tid, t), daemon=True)
            th.start()
            threads.append(th)
            time.sleep(0.3)  # not a bound: keeps the arrival order at the leader
        assert done == {}, f"answered while the coordinator is stopped: {done}"
    finally:
        cl[coord].resume()
    for th in threads:
        th.join(60)
    return [done.get(i) for i in range(len(tids_and_txns))]


def test_kip890_checks_of_concurrent_producers_share_one_request(tcluster):
    """Issue 24 (4 transactional producers vs 4 idempotent): the KIP-890 checks that one leader
    has queued for one coordinator go out as one AddPartitionsToTxn v4 request with a VerifyOnly
    transaction each (Kafka 3.9's AddPartitionsToTxnManager), not one v1 request per
    transaction in turn. Four producers coordinated by one stopped broker: the first check's
    request waits for it, the other three queue behind it and share the next request."""
    cl = tcluster
    create(cl, "k890batch", 1)
    leader = state(cl, "k890batch", 0)["leader"]
    coord = next(b.id for b in cl.running() if b.id != leader)
    port = cl[coord].port
    tids = [key_on(port, f"batch-{k}", 1, coord) for k in range(4)]
    txns = [RawTxn(port, tid) for tid in tids]
    for t in txns:
        assert t.add("k890batch", 0) == 0
    assert _queued_checks(cl, "k890batch", 0, coord, list(zip(tids, txns))) == [0, 0, 0, 0]
    _fresh_metrics(cl[coord])
    v4, v1 = _requests(cl[coord], "AddPartitionsToTxn", 4), _requests(cl[coord], "AddPartitionsToTxn", 1)
    assert v1 == 0 and 1 <= v4 <= 2, f"checks sent as {v1} v1 and {v4} v4 requests (want 0 v1, 1-2 v4)"
    for t in txns:
        assert t.end(True) == 0
    got = consume(cl, "k890batch", 1, "read_committed", min_count=4, timeout=30, quiet=0.5)
    assert sorted(got) == sorted(f"{tid}-v" for tid in tids), got
    for t in txns:
        t.close()


def test_kip890_batched_check_keeps_a_fenced_epoch_apart(tcluster):
    """Failure path of the batched check: a zombie (epoch e, fenced) and its successor (e + 1) of
    one transactional id queued for the same request. The v4 answer is keyed by the id, so they
    must not share a request: the zombie's batch gets INVALID_PRODUCER_EPOCH, the successor's is
    appended, and only the successor's record is committed."""
    cl = tcluster
    create(cl, "k890fence", 1)
    leader = state(cl, "k890fence", 0)["leader"]
    coord = next(b.id for b in cl.running() if b.id != leader)
    port = cl[coord].port
    first, tid = key_on(port, "fence-x", 1, coord), key_on(port, "fence-z", 1, coord)
    x = RawTxn(port, first)
    zombie = RawTxn(port, tid)
    successor = RawTxn(port, tid)  # InitProducerId again: same producer id, epoch + 1
    assert (successor.pid, successor.epoch) == (zombie.pid, zombie.epoch + 1)
    assert x.add("k890fence", 0) == 0
    assert successor.add("k890fence", 0) == 0
    errs = _queued_checks(cl, "k890fence", 0, coord, [(first, x), (tid, zombie), (tid, successor)])
    assert errs == [0, 47, 0], errs  # 47 INVALID_PRODUCER_EPOCH
    assert x.end(True) == 0 and successor.end(True) == 0
    got = consume(cl, "k890fence", 1, "read_committed", min_count=2, timeout=30, quiet=0.5)
    assert sorted(got) == sorted([f"{first}-v", f"{tid}-v"]), got
    for t in (x, zombie, successor):
        t.close()


def test_kip890_txn_offset_commit_verified(tcluster):
    """Issue 24 item 7: TxnOffsetCommit is verified as Kafka 3.7 does: offsets for a group whose
    __consumer_offsets partition is not part of the transaction (no AddOffsetsToTxn), or sent
    after the transaction was aborted, are refused with INVALID_TXN_STATE and never committed
    (before, they were written and opened a transaction on __consumer_offsets that nothing
    would close). The group's coordinator is another broker than the transaction's, so the check
    crosses the wire."""
    cl = tcluster
    create(cl, "k890off", 1)
    any_port = cl.running()[0].port
    tcoord = 1
    gcoord = 2
    tid = key_on(any_port, "toc-t", 1, tcoord)
    group = key_on(any_port, "toc-g", 0, gcoord)
    gport = cl[gcoord].port
    t = RawTxn(cl[tcoord].port, tid)
    # not added: refused (after the group's coordinator has loaded)
    first = _retry(lambda: (txn_offset_commit(gport, tid, group, t.pid, t.epoch, "k890off", 0, 5),), ok=(0, 48))[0]
    assert first == 48, first
    # added: accepted; committed with the transaction
    assert t.add_offsets(group) == 0
    assert _retry(lambda: (txn_offset_commit(gport, tid, group, t.pid, t.epoch, "k890off", 0, 7),))[0] == 0
    assert t.end(True) == 0
    # the next transaction, aborted: afterwards its offsets are refused
    assert t.add_offsets(group) == 0
    assert _retry(lambda: (txn_offset_commit(gport, tid, group, t.pid, t.epoch, "k890off", 0, 9),))[0] == 0
    assert t.end(False) == 0
    late = _retry(lambda: (txn_offset_commit(gport, tid, group, t.pid, t.epoch, "k890off", 0, 11),), ok=(48,))[0]
    assert late == 48, late
    # a fenced epoch is told so
    assert txn_offset_commit(gport, tid, group, t.pid, t.epoch - 1 if t.epoch > 0 else 32000, "k890off", 0, 12) \
        in (47, 48), "an older epoch is refused"
    t.close()
    c = Consumer({"bootstrap.servers": bootstrap(cl), "group.id": group, "isolation.level": "read_committed"})

    def committed():
        r = c.committed([TopicPartition("k890off", 0)], timeout=10)
        return r[0].offset
    H.wait_for(lambda: committed() == 7, 30, "offset 7 committed")
    c.close()


def test_add_partitions_waits_for_previous_commit(tcluster):
    """Issue 24 (performance): an AddPartitionsToTxn sent right after EndTxn, while the coordinator
    still writes the markers and CompleteCommit, waits for them and is answered NONE, instead of
    CONCURRENT_TRANSACTIONS and a client back-off (librdkafka 20 ms, Java 100 ms) per
    transaction. Rounds of begin/produce/commit over the raw wire; every add must succeed at
    once, and every committed value is read back."""
    cl = tcluster
    create(cl, "k890park", 3)
    any_port = cl.running()[0].port
    err, node = find_txn_coordinator(any_port, "park-tx")
    assert err == 0, err
    t = RawTxn(cl[node].port, "park-tx")
    part = next(p for p in range(3) if state(cl, "k890park", p)["leader"] != node)
    lport = cl[state(cl, "k890park", part)["leader"]].port
    assert t.add("k890park", part) == 0
    answers = []
    for i in range(10):
        assert produce_txn(lport, "park-tx", "k890park", part, txn_batch([b"v%d" % i], t.pid, t.epoch, i)) == 0
        assert t.end(True) == 0
        # no _retry here: the first answer counts
        body = _s("park-tx") + struct.pack(">qh", t.pid, t.epoch) + struct.pack(">i", 1) + _s("k890park") \
            + struct.pack(">ii", 1, part)
        r = t.c.call(24, 0, body)
        pos = 4 + 4
        tl = struct.unpack_from(">h", r, pos)[0]
        pos += 2 + tl + 4 + 4
        answers.append(struct.unpack_from(">h", r, pos)[0])
    assert answers == [0] * 10, answers
    assert t.end(False) == 0
    t.close()
    H.wait_for(lambda: consume(cl, "k890park", 3, "read_committed", timeout=5, quiet=0.5)
               == [f"v{i}" for i in range(10)], 30, "all ten committed")


def test_add_partitions_wait_is_bounded(tcluster):
    """The wait of an AddPartitionsToTxn for the previous transaction is bounded: when that
    transaction cannot complete (its only partition is on a stopped broker, so its marker cannot
    be written), the next AddPartitionsToTxn is answered CONCURRENT_TRANSACTIONS (retriable) after
    the wait, as Kafka would at once, instead of hanging the producer's coordinator connection."""
    cl = tcluster
    any_port = cl.running()[0].port
    err, node = find_txn_coordinator(any_port, "bounded-tx")
    assert err == 0, err
    other = next(b.id for b in cl.running() if b.id != node)
    admin = AdminClient({"bootstrap.servers": bootstrap(cl)})
    admin.create_topics([NewTopic("k890one", num_partitions=1, replica_assignment=[[other]])],
                        operation_timeout=20, request_timeout=30)["k890one"].result(timeout=40)
    H.wait_for(lambda: (state(cl, "k890one") or {}).get("leader", -1) == other, 30, "a leader")
    t = RawTxn(cl[node].port, "bounded-tx")
    assert t.add("k890one", 0) == 0
    assert produce_txn(cl[other].port, "bounded-tx", "k890one", 0, txn_batch([b"x"], t.pid, t.epoch, 0)) == 0
    cl[other].pause()
    try:
        assert t.end(True) == 0  # PrepareCommit written; the marker cannot be
        body = _s("bounded-tx") + struct.pack(">qh", t.pid, t.epoch) + struct.pack(">i", 1) + _s("k890one") \
            + struct.pack(">ii", 1, 0)
        r = t.c.call(24, 0, body)
        pos = 4 + 4
        tl = struct.unpack_from(">h", r, pos)[0]
        pos += 2 + tl + 4 + 4
        assert struct.unpack_from(">h", r, pos)[0] == 51  # CONCURRENT_TRANSACTIONS
    finally:
        cl[other].resume()
    t.close()


def test_kip890_verification_after_idle_close(cluster_factory, zk_connect):
    """The leader keeps its verification connection to the coordinator; when the coordinator
    closed it meanwhile (connections.max.idle.ms), the next check goes out once more on a new
    connection instead of failing the producer's batch with a retriable error."""
    cfg = dict(CONFIG)
    cfg["connections.max.idle.ms"] = "1000"
    cl = cluster_factory(zk_connect, n=3, config=cfg)
    create(cl, "k890idle", 3)
    any_port = cl.running()[0].port
    err, node = find_txn_coordinator(any_port, "idle-tx")
    assert err == 0, err
    t = RawTxn(cl[node].port, "idle-tx")
    part = next(p for p in range(3) if state(cl, "k890idle", p)["leader"] != node)
    lport = cl[state(cl, "k890idle", part)["leader"]].port
    for i in range(2):
        assert t.add("k890idle", part) == 0
        assert produce_txn(lport, "idle-tx", "k890idle", part, txn_batch([b"i%d" % i], t.pid, t.epoch, i)) == 0
        assert t.end(True) == 0
        if i == 0:
            time.sleep(3)  # not a bound: the coordinator closes the idle verification connection
            t.close()
            t.c = Raw(cl[node].port)  # ours was closed too
    t.close()
    H.wait_for(lambda: consume(cl, "k890idle", 3, "read_committed", timeout=5, quiet=0.5) == ["i0", "i1"], 30,
               "both committed")


# ---- exactly-once pipeline under faults ----

import threading  # noqa: E402


def _txn_call(fn, *a):
    """Calls a transactional API, retrying retriable errors; returns None or the KafkaError that
    needs an abort / a new producer."""
    for _ in range(30):
        try:
            fn(*a)
            return None
        except KafkaException as e:
            err = e.args[0]
            if err.retriable() and not err.txn_requires_abort() and not err.fatal():
                time.sleep(0.5)
                continue
            return err
    return KafkaError(KafkaError._TIMED_OUT)


def _rewind(consumer, parts):
    committed = consumer.committed([TopicPartition("eos-in", p) for p in range(parts)], timeout=30)
    for tp in committed:
        consumer.seek(TopicPartition("eos-in", tp.partition, tp.offset if tp.offset >= 0 else 0))


def pipeline(cluster, parts, stop, stats):
    def new_producer():
        while not stop.is_set():
            try:
                return txn_producer(cluster, "eos-pipe", **{"transaction.timeout.ms": 15000,
                                                             "bootstrap.servers": all_brokers(cluster)})
            except KafkaException:
                time.sleep(1)
        return None
    c = Consumer({"bootstrap.servers": all_brokers(cluster), "group.id": "eos-pipe", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.assign([TopicPartition("eos-in", p, 0) for p in range(parts)])
    _rewind(c, parts)
    p = new_producer()
    while not stop.is_set() and p is not None:
        msgs = [m for m in c.consume(stats["batch"], 0.5) if not m.error()]
        if not msgs:
            continue
        err = _txn_call(p.begin_transaction)
        for m in msgs:
            if err:
                break
            p.produce("eos-out", b"o-" + m.value(), partition=m.partition())
        pos = {}
        for m in msgs:
            pos[m.partition()] = m.offset() + 1
        if not err:
            err = _txn_call(p.send_offsets_to_transaction, [TopicPartition("eos-in", q, o) for q, o in pos.items()],
                            c.consumer_group_metadata(), 30)
        if not err:
            err = _txn_call(p.commit_transaction, 30)
        if not err:
            stats["commits"] += 1
            time.sleep(0.02)  # keep the stream going while the faults happen
            continue
        stats["errors"].append(str(err))
        if err.txn_requires_abort() and not err.fatal():
            if _txn_call(p.abort_transaction, 30) is None:
                stats["aborts"] += 1
                _rewind(c, parts)
                continue
        # fatal (or the abort failed): a new producer of the same transactional.id fences the old
        stats["new_producers"] += 1
        p = new_producer()
        _rewind(c, parts)
    c.close()


def all_brokers(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.brokers.values())


def run_eos_under_faults(cluster_factory, zk_connect, n_inputs, rounds):
    cl = cluster_factory(zk_connect, n=3, config=CONFIG)
    parts = 3
    for t in ("eos-in", "eos-out"):
        admin = AdminClient({"bootstrap.servers": bootstrap(cl)})
        admin.create_topics([NewTopic(t, parts, 3, config={"min.insync.replicas": "2"})],
                            operation_timeout=20, request_timeout=30)[t].result(timeout=40)
        for q in range(parts):
            H.wait_for(lambda: len((state(cl, t, q) or {}).get("isr", [])) == 3, 30, "full ISR")
    pr = Producer({"bootstrap.servers": bootstrap(cl), "enable.idempotence": True})
    inputs = [f"i-{k}" for k in range(n_inputs)]
    for k, v in enumerate(inputs):
        pr.produce("eos-in", v.encode(), partition=k % parts)
    assert pr.flush(30) == 0
    stop = threading.Event()
    stats = {"commits": 0, "aborts": 0, "new_producers": 0, "errors": [], "batch": 20, "at_kill": []}
    th = threading.Thread(target=pipeline, args=(cl, parts, stop, stats))
    th.start()
    try:
        H.wait_for(lambda: stats["commits"] >= 5, 60, "the pipeline running")
        for r in range(rounds):
            time.sleep(1.0)
            # the transaction coordinator's broker, then a leader of the output topic
            err, node = find_txn_coordinator(cl.running()[0].port, "eos-pipe")
            victims = [node] if err == 0 else []
            victims.append(state(cl, "eos-out", r % parts)["leader"])
            for v in victims:
                if v < 0 or not cl[v].running():
                    continue
                stats["at_kill"].append(stats["commits"])
                cl[v].kill()
                time.sleep(1.5)
                cl[v].start()
                for t in ("eos-in", "eos-out"):
                    for q in range(parts):
                        H.wait_for(lambda: len(state(cl, t, q)["isr"]) == 3, 60, "victim back in the ISR")
        deadline = time.time() + 120
        while time.time() < deadline:
            got = consume(cl, "eos-out", parts, "read_committed", timeout=10, quiet=1.0)
            if len(got) >= n_inputs:
                break
            time.sleep(1)
    finally:
        stop.set()
        th.join(120)
    assert not th.is_alive()
    got = consume(cl, "eos-out", parts, "read_committed", min_count=n_inputs, timeout=30, quiet=2.0)
    want = sorted("o-" + v for v in inputs)
    dups = len(got) - len(set(got))
    assert sorted(got) == want, (f"{len(got)} records, {dups} duplicates, "
                                 f"{len(set(want) - set(got))} missing; stats {stats['commits']} commits, "
                                 f"{stats['aborts']} aborts, {stats['new_producers']} new producers, "
                                 f"errors {stats['errors'][:5]}")
    return stats


def test_exactly_once_pipeline_under_faults(cluster_factory, zk_connect):
    stats = run_eos_under_faults(cluster_factory, zk_connect, n_inputs=4000, rounds=3)
    print("pipeline stats:", {k: v for k, v in stats.items() if k != "errors"}, stats["errors"][:10])
    # the faults hit the stream: transactions were committed after the last kill
    assert stats["at_kill"] and stats["commits"] > stats["at_kill"][-1], stats["at_kill"]


@pytest.mark.soak
def test_exactly_once_pipeline_under_faults_soak(cluster_factory, zk_connect):
    if not os.environ.get("GREGOR_SOAK"):
        pytest.skip("GREGOR_SOAK=1 runs the long variant")
    run_eos_under_faults(cluster_factory, zk_connect, n_inputs=30000, rounds=10)


def test_timeout_aborts_and_expiry(cluster_factory, zk_connect):
    """transaction.timeout.ms: an abandoned transaction is aborted by the coordinator (LSO moves on,
    its records never become visible, the producer is fenced); transactional.id.expiration.ms: an
    idle id is forgotten and gets a new producer id."""
    cfg = dict(CONFIG)
    cfg.update({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "300",
                "transaction.remove.expired.transaction.cleanup.interval.ms": "300",
                "transactional.id.expiration.ms": "3000"})
    cl = cluster_factory(zk_connect, n=3, config=cfg)
    create(cl, "t5", 1)
    stale = txn_producer(cl, "tx-timeout", **{"transaction.timeout.ms": 1500})
    stale.begin_transaction()
    stale.produce("t5", b"abandoned", partition=0)
    stale.flush(10)
    other = txn_producer(cl, "tx-other")
    other.begin_transaction()
    other.produce("t5", b"after", partition=0)
    other.commit_transaction(30)
    # read_committed sees "after" only once the abandoned transaction was aborted
    H.wait_for(lambda: consume(cl, "t5", 1, "read_committed", timeout=4, quiet=0.5) == ["after"], 30,
               "the timed-out transaction aborted")
    with pytest.raises(KafkaException):
        stale.commit_transaction(10)
    # expiry: raw InitProducerId before and after the id went idle
    err, node = find_txn_coordinator(cl.running()[0].port, "tx-exp")
    assert err == 0

    def init():
        c = Raw(cl[node].port)
        r = c.call(22, 0, _s("tx-exp") + struct.pack(">i", 30000))
        c.close()
        return struct.unpack_from(">hqh", r, 4)
    e1, pid1, ep1 = _retry(init)
    e2, pid2, ep2 = _retry(init)
    assert (e1, e2) == (0, 0) and pid2 == pid1 and ep2 == ep1 + 1
    time.sleep(4.5)
    e3, pid3, ep3 = _retry(init)
    assert e3 == 0 and pid3 != pid1 and ep3 == 0, (pid1, ep1, pid3, ep3)


def test_new_coordinator_finishes_prepared_commit(tcluster):
    """The coordinator answers EndTxn(commit) once PrepareCommit is durable, but cannot write the
    marker (the only replica of the data partition is down) and is then SIGKILLed: the broker that
    takes over its __transaction_state partition loads PrepareCommit and writes the marker when the
    data partition is back, so the committed records become visible."""
    cl = tcluster
    err, coord = find_txn_coordinator(cl.running()[0].port, "tx-failover")
    assert err == 0
    data = next(b for b in (1, 2, 3) if b != coord)
    admin = AdminClient({"bootstrap.servers": bootstrap(cl)})
    admin.create_topics([NewTopic("t6", num_partitions=1, replica_assignment=[[data]])], operation_timeout=20,
                        request_timeout=30)["t6"].result(timeout=40)
    H.wait_for(lambda: (state(cl, "t6") or {}).get("leader", -1) == data, 30, "a leader")
    p = txn_producer(cl, "tx-failover", **{"bootstrap.servers": ",".join(
        f"127.0.0.1:{b.port}" for b in cl.brokers.values())})
    p.begin_transaction()
    for i in range(5):
        p.produce("t6", f"r{i}".encode(), partition=0)
    p.flush(10)
    cl[data].kill()
    p.commit_transaction(60)  # PrepareCommit written; the marker cannot be
    time.sleep(0.5)
    cl[coord].kill()
    cl[data].start()
    H.wait_for(lambda: consume(cl, "t6", 1, "read_committed", timeout=4, quiet=0.5) == [f"r{i}" for i in range(5)],
               60, "the new coordinator's COMMIT marker")
    cl[coord].start()


def test_init_producer_id_epochs(tcluster):
    """InitProducerId with a transactional id over the wire: epoch bumps, a retry of a bump whose
    answer was lost (KIP-360: the previous epoch) gets the current epoch, anything else is fenced."""
    from test_idempotence import init_producer_id
    err, node = find_txn_coordinator(tcluster.running()[0].port, "tx-epochs")
    assert err == 0
    port = tcluster[node].port
    e, pid, ep = _retry(lambda: init_producer_id(port, 3, txn_id="tx-epochs"))
    assert e == 0 and ep == 0
    assert init_producer_id(port, 3, txn_id="tx-epochs", pid=pid, epoch=0) == (0, pid, 1)
    assert init_producer_id(port, 3, txn_id="tx-epochs", pid=pid, epoch=0) == (0, pid, 1)  # a retry
    assert init_producer_id(port, 4, txn_id="tx-epochs", pid=pid, epoch=7)[0] == 90  # PRODUCER_FENCED
    assert init_producer_id(port, 3, txn_id="tx-epochs", pid=pid + 1, epoch=1)[0] == 47  # v<4: 47
    assert init_producer_id(port, 0, txn_id="tx-epochs")[1:] == (pid, 2)
