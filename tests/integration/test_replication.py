"""Replication against real gregord processes: min.insync.replicas with stopped followers, ISR
shrink/expand through AlterIsr, and a broker SIGKILLed while written to (torn tail truncated on
restart, follower catches up, rejoins the ISR, replicas byte-identical below the high watermark).

The KIP-101 divergent-log scenario is exercised deterministically in
tests/unit/test_replica_manager.c (two in-process brokers)."""

import glob
import json
import os
import struct
import threading
import time

import pytest

import gregor_harness as H

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

CONFIG = {
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "replica.high.watermark.checkpoint.interval.ms": "500",
}


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running() if not b.paused)


def state(cluster, topic, p=0):
    return cluster.get_json(f"/brokers/topics/{topic}/partitions/{p}/state")[0]


def create(cluster, topic, config=None):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic(topic, 1, 3, config=config or {})],
                        operation_timeout=20, request_timeout=30)[topic].result(timeout=40)
    H.wait_for(lambda: (state(cluster, topic) or {}).get("leader", -1) >= 0, 30, "a leader")
    produce(cluster, topic, 1, acks="all")


def produce(cluster, topic, n, acks="all", timeout_ms=30000, retries=2147483647):
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": acks, "message.timeout.ms": timeout_ms,
                  "retries": retries, "linger.ms": 1})
    errs = []
    for i in range(n):
        p.produce(topic, f"r{i}".encode(), partition=0, on_delivery=lambda e, m: errs.append(e))
    p.flush(timeout_ms / 1000 + 10)
    return errs


def test_min_insync_replicas_and_isr_recovery(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG)
    create(cluster, "mi", {"min.insync.replicas": "2"})
    st = state(cluster, "mi")
    leader = st["leader"]
    followers = [b for b in st["isr"] if b != leader]
    H.wait_for(lambda: len(state(cluster, "mi")["isr"]) == 3, 30, "full ISR")

    for f in followers:
        cluster[f].pause()
    try:
        assert produce(cluster, "mi", 5, acks="1") == [None] * 5  # the followers now lag
        H.wait_for(lambda: state(cluster, "mi")["isr"] == [leader], 30, "ISR shrunk to the leader")
        errs = produce(cluster, "mi", 1, acks="all", timeout_ms=5000, retries=0)
        assert len(errs) == 1 and errs[0] is not None
        assert errs[0].code() == KafkaError.NOT_ENOUGH_REPLICAS, errs[0]
    finally:
        for f in followers:
            cluster[f].resume()
    H.wait_for(lambda: sorted(state(cluster, "mi")["isr"]) == [1, 2, 3], 30, "ISR restored")
    assert produce(cluster, "mi", 10, acks="all") == [None] * 10


def read_batches(logdir, topic, p=0):
    """{baseOffset: (lastOffset, bytes)} of every whole batch in the partition's segments."""
    out = {}
    for seg in sorted(glob.glob(os.path.join(logdir, f"{topic}-{p}", "*.log"))):
        data = open(seg, "rb").read()
        pos = 0
        while pos + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            if length < 49 or pos + 12 + length > len(data):
                break
            (lod,) = struct.unpack_from(">i", data, pos + 23)
            out[base] = (base + lod, data[pos:pos + 12 + length])
            pos += 12 + length
    return out


def test_sigkill_leader_while_writing(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG)
    create(cluster, "kill")
    H.wait_for(lambda: len(state(cluster, "kill")["isr"]) == 3, 30, "full ISR")
    victim = state(cluster, "kill")["leader"]

    stop = threading.Event()
    sent = [0]

    def writer():
        p = Producer({"bootstrap.servers": ",".join(f"127.0.0.1:{b.port}" for b in cluster.brokers.values()),
                      "acks": "all", "linger.ms": 2, "message.timeout.ms": 60000})
        while not stop.is_set():
            try:
                p.produce("kill", os.urandom(100), partition=0)
                sent[0] += 1
            except BufferError:
                p.poll(0.05)
            p.poll(0)
        p.flush(60)

    t = threading.Thread(target=writer)
    t.start()
    try:
        time.sleep(2)
        cluster[victim].kill()
        H.wait_for(lambda: state(cluster, "kill")["leader"] not in (victim, -1), 30, "a new leader")
        time.sleep(2)
        cluster[victim].start()
        H.wait_for(lambda: sorted(state(cluster, "kill")["isr"]) == [1, 2, 3], 60, "victim back in the ISR")
        time.sleep(1)
    finally:
        stop.set()
        t.join(90)
    assert sent[0] > 0

    # Let replication settle, then compare what every replica holds below the high watermark.
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "kill-check"})
    _, hw = c.get_watermark_offsets(TopicPartition("kill", 0), timeout=10)
    c.close()
    assert hw > 1

    def replicas_agree():
        logs = {b.id: read_batches(b.logdir, "kill") for b in cluster.brokers.values()}
        views = [{k: v[1] for k, v in l.items() if v[0] < hw} for l in logs.values()]
        return len(views[0]) > 0 and all(v == views[0] for v in views)

    H.wait_for(replicas_agree, 60, "byte-identical replicas below the high watermark", interval=0.5)
