"""Produce and consume through real clients against a 3-broker gregord cluster (RF 3 topics).

kcat, confluent-kafka (librdkafka 2.0.2) and kafka-python 2.0.2 each produce and consume;
everything produced is consumed exactly once, in order per partition, with keys, headers and
timestamps intact; librdkafka's gzip/snappy/lz4/zstd batches round-trip. Consumers use manual
assignment (no consumer group) so these tests need only the replication path.

GREGOR_SOAK=1 uses the full 100k records per client; CI uses fewer (GREGOR_PC_RECORDS overrides).
"""

import os
import subprocess
import time

import pytest

import gregor_harness as H

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

KCAT = "/usr/bin/kcat"
N = int(os.environ.get("GREGOR_PC_RECORDS", "100000" if os.environ.get("GREGOR_SOAK") else "3000"))


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running())


def create_topic(cluster, name, partitions=3, rf=3, config=None):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    fs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=rf,
                                       config=config or {})], operation_timeout=20, request_timeout=30)
    fs[name].result(timeout=40)
    # Wait until every partition has a leader that answers a produce (LeaderAndIsr applied).
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "message.timeout.ms": 20000})
    errs = []
    for part in range(partitions):
        p.produce(name, b"warmup", partition=part, on_delivery=lambda e, m: errs.append(e))
    p.flush(30)
    assert errs == [None] * partitions, errs
    return partitions  # one warm-up record at offset 0 of each partition


def consume_all(cluster, topic, partitions, expect, start=1, timeout=60):
    """Reads `expect` records (from offset `start` of each partition) with manual assignment."""
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": f"pc-{topic}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, p, start) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expect and time.monotonic() < deadline:
        for m in c.consume(1000, 1.0):
            assert m.error() is None, m.error()
            out.append(m)
    # Nothing more than expected turns up.
    for m in c.consume(1000, 1.0):
        if m.error() is None:
            out.append(m)
    c.close()
    return out


def check_in_order(msgs, partitions):
    last = {}
    for m in msgs:
        p = m.partition()
        assert m.offset() > last.get(p, 0), f"partition {p}: offset {m.offset()} after {last.get(p)}"
        assert m.offset() == last.get(p, 0) + 1, f"partition {p}: gap before {m.offset()}"
        last[p] = m.offset()


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_round_trip(cluster, compression):
    topic = f"pc-{compression}"
    parts = create_topic(cluster, topic)
    n = N if compression == "none" else max(N // 5, 500)
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "compression.type": compression,
                  "linger.ms": 5, "message.timeout.ms": 60000})
    failed = []
    for i in range(n):
        p.produce(topic, value=f"value-{i}".encode(), key=f"k{i % 97}".encode(), partition=i % parts,
                  headers=[("h", f"{i}".encode()), ("empty", b"")], timestamp=1700000000000 + i,
                  on_delivery=lambda e, m: e and failed.append(e))
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    assert failed == []
    msgs = consume_all(cluster, topic, parts, n)
    assert len(msgs) == n
    check_in_order(msgs, parts)
    seen = set()
    for m in msgs:
        i = int(m.value().decode().split("-")[1])
        assert i not in seen
        seen.add(i)
        assert m.partition() == i % parts
        assert m.key() == f"k{i % 97}".encode()
        assert m.headers() == [("h", f"{i}".encode()), ("empty", b"")]
        assert m.timestamp() == (confluent_kafka.TIMESTAMP_CREATE_TIME, 1700000000000 + i)
    assert seen == set(range(n))


def test_kcat_round_trip(cluster):
    topic = "pc-kcat"
    create_topic(cluster, topic, partitions=1)
    n = min(N, 20000)
    lines = "".join(f"key{i}:line-{i}\n" for i in range(n))
    out = subprocess.run([KCAT, "-P", "-b", bootstrap(cluster), "-t", topic, "-p", "0", "-K:",
                          "-X", "acks=all"], input=lines, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    out = subprocess.run([KCAT, "-C", "-b", bootstrap(cluster), "-t", topic, "-p", "0", "-o", "1", "-e",
                          "-f", "%k:%s:%o\n"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = out.stdout.splitlines()
    assert len(got) == n
    for i, line in enumerate(got):
        assert line == f"key{i}:line-{i}:{i + 1}"


def test_kafka_python_round_trip(cluster):
    topic = "pc-kafka-python"
    parts = create_topic(cluster, topic)
    n = min(N, 20000)
    prod = kafka.KafkaProducer(bootstrap_servers=bootstrap(cluster), acks="all", linger_ms=5)
    futs = [prod.send(topic, value=f"kp-{i}".encode(), key=f"k{i}".encode(), partition=i % parts,
                      headers=[("n", f"{i}".encode())], timestamp_ms=1700000000000 + i) for i in range(n)]
    prod.flush(120)
    for f in futs:
        f.get(timeout=30)
    prod.close()
    cons = kafka.KafkaConsumer(bootstrap_servers=bootstrap(cluster), enable_auto_commit=False,
                               consumer_timeout_ms=5000, fetch_max_wait_ms=100)
    tps = [kafka.TopicPartition(topic, p) for p in range(parts)]
    cons.assign(tps)
    for tp in tps:
        cons.seek(tp, 1)
    got = {}
    deadline = time.monotonic() + 90
    while sum(len(v) for v in got.values()) < n and time.monotonic() < deadline:
        for tp, recs in cons.poll(timeout_ms=1000).items():
            got.setdefault(tp.partition, []).extend(recs)
    cons.close()
    assert sum(len(v) for v in got.values()) == n
    for p, recs in got.items():
        offs = [r.offset for r in recs]
        assert offs == list(range(1, len(recs) + 1))
        for r in recs:
            i = int(r.value.decode()[3:])
            assert r.key == f"k{i}".encode()
            assert r.headers == [("n", f"{i}".encode())]
            assert r.timestamp == 1700000000000 + i
            assert i % parts == p


def test_list_offsets_and_out_of_range(cluster):
    topic = "pc-offsets"
    create_topic(cluster, topic, partitions=1)
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all"})
    for i in range(10):
        p.produce(topic, f"{i}".encode(), partition=0, timestamp=1800000000000 + i * 1000)
    p.flush(30)
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "pc-offsets"})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    assert (lo, hi) == (0, 11)
    found = c.offsets_for_times([TopicPartition(topic, 0, 1800000000000 + 5000)], timeout=10)
    assert found[0].offset == 6
    c.close()
