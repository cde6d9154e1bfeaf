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
