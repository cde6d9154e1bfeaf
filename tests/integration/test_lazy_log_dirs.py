"""A partition's log directory is made by the first write into the log (issue 14: creating 100k
partitions made 100k directories, and ext4's inode allocation is what a broker spent its creation
time on after mass deletions). A created-but-never-written partition has no directory, and is
still a replica like any other: it is listed by DescribeLogDirs, survives a restart of every
broker (the LeaderAndIsr that assigns it again creates it), takes writes afterwards, and can be
deleted."""

import json
import os
import time

import pytest

import gregor_harness as H

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

CONFIG = {
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "500",
    "auto.leader.rebalance.enable": "false",
}


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running())


def state(cluster, topic, p):
    return cluster.get_json(f"/brokers/topics/{topic}/partitions/{p}/state")[0] or {}


def wait_full_isr(cluster, topic, partitions, timeout=40):
    for p in range(partitions):
        H.wait_for(lambda: state(cluster, topic, p).get("leader", -1) >= 0 and len(state(cluster, topic, p).get("isr", [])) == 3,
                   timeout, f"leader and full ISR of {topic}-{p}")


def ctl(cluster, *args):
    return H.subprocess.run([H.GREGORCTL, "--bootstrap-server", bootstrap(cluster), "--timeout-ms", "20000", *args],
                            capture_output=True, text=True, timeout=60)


def described(cluster, topic):
    """{broker: {partition name: size}} from `gregorctl log-dirs describe` (DescribeLogDirs)."""
    r = ctl(cluster, "log-dirs", "describe", "--topic-list", topic)
    assert r.returncode == 0, r.stdout + r.stderr
    out = {}
    for b in json.loads(r.stdout.splitlines()[2])["brokers"]:
        (ld,) = b["logDirs"]
        assert ld["error"] is None, ld
        out[b["broker"]] = {p["partition"]: p["size"] for p in ld["partitions"]}
    return out


def produce(cluster, topic, p, n):
    pr = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all"})
    for i in range(n):
        pr.produce(topic, f"{topic}-{p}-{i}".encode(), partition=p)
    assert pr.flush(30) == 0


def consume(cluster, topic, p, want, timeout=30):
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": f"g-{time.time()}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0)])
    got = []
    deadline = time.time() + timeout
    while len(got) < want and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    c.close()
    return got


def test_unwritten_partition_has_no_directory(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG)
    a = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    H.wait_for(lambda: len(a.list_topics(timeout=10).brokers) == 3, 30, "3 brokers in the metadata")
    fs = a.create_topics([NewTopic("lz", 2, 3), NewTopic("lzgone", 2, 3)], operation_timeout=20)
    for f in fs.values():
        f.result(timeout=40)
    wait_full_isr(cluster, "lz", 2)
    wait_full_isr(cluster, "lzgone", 2)
    produce(cluster, "lz", 1, 5)
    H.wait_for(lambda: all(os.path.isdir(os.path.join(b.logdir, "lz-1")) for b in cluster.brokers.values()), 20,
               "lz-1's directory on every replica (the followers' first fetched data makes theirs)")
    for b in cluster.brokers.values():
        for name in ("lz-0", "lzgone-0", "lzgone-1"):
            assert not os.path.exists(os.path.join(b.logdir, name)), f"broker {b.id}: {name} has a directory"
    # DescribeLogDirs lists the replica that has no directory
    d = described(cluster, "lz")
    assert sorted(d) == [1, 2, 3]
    for b, parts in d.items():
        assert parts.get("lz-0") == 0 and parts.get("lz-1", 0) > 0, (b, parts)

    # a topic never written to is deleted (nothing on disk to remove)
    fs = a.delete_topics(["lzgone"], operation_timeout=20)
    fs["lzgone"].result(timeout=40)
    H.wait_for(lambda: not cluster.zk.exists("/brokers/topics/lzgone"), 30, "lzgone deleted")
    H.wait_for(lambda: all(not p for p in described(cluster, "lzgone").values()), 20,
               "lzgone gone from DescribeLogDirs")

    # every broker restarts: lz-0 (no directory anywhere) is still a partition with 3 replicas
    codes = cluster.stop()
    assert all(c == 0 for c in codes.values()), codes
    cluster.start()
    wait_full_isr(cluster, "lz", 2)
    H.wait_for(lambda: all(sorted(p) == ["lz-0", "lz-1"] for p in described(cluster, "lz").values())
               and len(described(cluster, "lz")) == 3, 30, "lz-0 and lz-1 on every broker after the restart")
    for b in cluster.brokers.values():
        for bad in ("cannot create log", "cannot open log", "KAFKA_STORAGE_ERROR"):
            assert bad not in b.log(), f"broker {b.id}: {bad}"
    produce(cluster, "lz", 0, 3)
    assert consume(cluster, "lz", 0, 3) == [f"lz-0-{i}" for i in range(3)]
    assert consume(cluster, "lz", 1, 5) == [f"lz-1-{i}" for i in range(5)]
    H.wait_for(lambda: all(os.path.isdir(os.path.join(b.logdir, "lz-0")) for b in cluster.brokers.values()), 20,
               "lz-0's directory made by its first write on every replica")


def test_recreated_topic_replicates(cluster_factory, zk_connect):
    """Followers' fetches wait at the leader holding references to the partitions they name
    (handle_fetch.c, issue 14); a topic deleted and created again under the same name is new
    partitions, which those fetches must look up again: the new topic replicates (acks=all needs
    every replica of its full ISR) and reads back only its own records."""
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG)
    a = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    H.wait_for(lambda: len(a.list_topics(timeout=10).brokers) == 3, 30, "3 brokers in the metadata")
    for round_ in range(2):
        a.create_topics([NewTopic("again", 2, 3)], operation_timeout=20)["again"].result(timeout=40)
        wait_full_isr(cluster, "again", 2)
        for p in range(2):
            pr = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "message.timeout.ms": 20000})
            for i in range(4):
                pr.produce("again", f"r{round_}-{p}-{i}".encode(), partition=p)
            assert pr.flush(30) == 0
        for p in range(2):
            assert consume(cluster, "again", p, 4) == [f"r{round_}-{p}-{i}" for i in range(4)]
        # every replica has the records (the followers fetched the new partitions)
        H.wait_for(lambda: all(len(parts) == 2 and all(v > 0 for v in parts.values())
                               for parts in described(cluster, "again").values()), 20,
                   "both partitions with data on every broker")
        a.delete_topics(["again"], operation_timeout=20)["again"].result(timeout=40)
        H.wait_for(lambda: not cluster.zk.exists("/brokers/topics/again"), 30, "again deleted")
        H.wait_for(lambda: all(not p for p in described(cluster, "again").values()), 20,
                   "again gone from every broker")
