"""Consumer groups and committed offsets through real clients against a 3-broker gregord cluster.

  - kcat -G: a balanced consumer reads everything and commits its offsets
  - confluent-kafka: subscribe() + commit(); a restarted consumer resumes at the committed offset
  - kafka-python: two KafkaConsumer(group_id=...) members split the partitions between them
  - kafka-python admin: ListGroups / DescribeGroups / OffsetFetch / DeleteGroups
  - failover: the coordinator broker is killed; the group moves to the new leader of its
    __consumer_offsets partition (offsets.topic.replication.factor=3) and the committed offsets
    are still there
"""

import subprocess
import threading
import time

import pytest

import gregor_harness as H

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

KCAT = "/usr/bin/kcat"
OFFSETS_PARTITIONS = 50


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running())


def java_hash(s):
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def offsets_partition(group, n=OFFSETS_PARTITIONS):
    return (java_hash(group) & 0x7FFFFFFF) % n


def create_topic(cluster, name, partitions=3, rf=3):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    deadline = time.monotonic() + 30
    while True:  # right after start-up a broker's metadata may not list every broker yet
        fs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=rf)],
                                 operation_timeout=20, request_timeout=30)
        try:
            fs[name].result(timeout=40)
            return
        except confluent_kafka.KafkaException as e:
            if e.args[0].code() != confluent_kafka.KafkaError.INVALID_REPLICATION_FACTOR or \
                    time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def produce(cluster, topic, values, partitions):
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "message.timeout.ms": 30000})
    errs = []
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % partitions, on_delivery=lambda e, m: errs.append(e))
    assert p.flush(40) == 0
    assert all(e is None for e in errs), errs


def consume_group(cluster, group, topic, expect, timeout=60, extra=None):
    conf = {"bootstrap.servers": bootstrap(cluster), "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 6000, "fetch.wait.max.ms": 100}
    conf.update(extra or {})
    c = Consumer(conf)
    c.subscribe([topic])
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expect and time.monotonic() < deadline:
        for m in c.consume(100, 0.5):
            if m.error() is None:
                out.append(m)
    return c, out


def committed(cluster, group, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": group})
    try:
        res = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        return {tp.partition: tp.offset for tp in res}
    finally:
        c.close()


def test_kcat_group_consume(cluster):
    topic, group, n = "cg-kcat", "kcat-group", 300
    create_topic(cluster, topic)
    produce(cluster, topic, [f"m{i}".encode() for i in range(n)], 3)
    r = subprocess.run([KCAT, "-b", bootstrap(cluster), "-G", group, "-X", "auto.offset.reset=earliest",
                        "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100",
                        "-e", "-q", "-f", "%s\\n", topic],
                       capture_output=True, timeout=90)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    got = r.stdout.decode().split()
    assert sorted(got) == sorted(f"m{i}" for i in range(n))
    # kcat commits on close: every partition is at its end (100 records each)
    H.wait_for(lambda: committed(cluster, group, topic, 3) == {0: 100, 1: 100, 2: 100}, 30,
               "kcat's offsets committed")


def test_confluent_commit_and_resume(cluster):
    topic, group = "cg-resume", "resume-group"
    create_topic(cluster, topic, partitions=2)
    produce(cluster, topic, [f"a{i}".encode() for i in range(100)], 2)
    c, got = consume_group(cluster, group, topic, 100)
    assert len(got) == 100
    c.commit(asynchronous=False)
    c.close()
    assert committed(cluster, group, topic, 2) == {0: 50, 1: 50}

    produce(cluster, topic, [f"b{i}".encode() for i in range(40)], 2)
    c, got = consume_group(cluster, group, topic, 40)
    # nothing from before the committed offsets comes back
    more = [m for m in c.consume(100, 1.0) if m.error() is None]
    c.close()
    values = sorted(m.value().decode() for m in got + more)
    assert values == sorted(f"b{i}" for i in range(40))
    assert min(m.offset() for m in got) == 50


def test_kafka_python_two_members_split_partitions(cluster):
    """Each member polls in its own thread (kafka-python blocks in poll() while it rejoins)."""
    from kafka import KafkaConsumer, TopicPartition as KTP

    topic, group = "cg-split", "split-group"
    create_topic(cluster, topic, partitions=4)
    produce(cluster, topic, [f"s{i}".encode() for i in range(80)], 4)
    stop = threading.Event()
    state = {}
    lock = threading.Lock()

    def run(name):
        c = KafkaConsumer(topic, bootstrap_servers=bootstrap(cluster).split(","), group_id=group,
                          auto_offset_reset="earliest", enable_auto_commit=False,
                          session_timeout_ms=10000, heartbeat_interval_ms=500, max_poll_interval_ms=30000)
        st = state[name] = {"records": [], "assignment": set(), "committed": None, "error": None}
        try:
            while not stop.is_set():
                for recs in c.poll(timeout_ms=100).values():
                    with lock:
                        st["records"].extend(recs)
                with lock:
                    st["assignment"] = {tp.partition for tp in c.assignment()}
            c.commit()
            st["committed"] = {p: c.committed(KTP(topic, p)) for p in st["assignment"]}
        except Exception as e:  # reported by the main thread
            st["error"] = repr(e)
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in ("a", "b")]
    threads[0].start()
    time.sleep(1.0)  # a owns everything first, then b joins: a real rebalance
    threads[1].start()
    try:
        def split_and_read():
            with lock:
                if len(state) < 2:
                    return False
                pa, pb = state["a"]["assignment"], state["b"]["assignment"]
                got = {(r.partition, r.offset) for st in state.values() for r in st["records"]}
                return len(pa) == 2 and len(pb) == 2 and not (pa & pb) and pa | pb == {0, 1, 2, 3} and \
                    len(got) == 80
        H.wait_for(split_and_read, 60, "two members owning two partitions each, all records read",
                   interval=0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    for name in ("a", "b"):
        assert state[name]["error"] is None, state[name]["error"]
        assert state[name]["committed"] == {p: 20 for p in state[name]["assignment"]}


def test_kafka_python_admin_groups(cluster):
    from kafka import KafkaAdminClient, TopicPartition as KTP

    topic, group = "cg-admin", "admin-group"
    create_topic(cluster, topic, partitions=2)
    produce(cluster, topic, [b"x"] * 10, 2)
    c, got = consume_group(cluster, group, topic, 10)
    c.commit(asynchronous=False)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(cluster).split(","))
    try:
        listed = dict(admin.list_consumer_groups())
        assert listed.get(group) == "consumer"
        desc = admin.describe_consumer_groups([group])[0]
        assert desc.group == group and desc.state == "Stable" and len(desc.members) == 1
        offs = admin.list_consumer_group_offsets(group)
        assert {tp: om.offset for tp, om in offs.items()} == {KTP(topic, 0): 5, KTP(topic, 1): 5}
        c.close()  # leaves the group -> Empty
        H.wait_for(lambda: admin.describe_consumer_groups([group])[0].state == "Empty", 20, "group Empty")
        res = admin.delete_consumer_groups([group])
        assert [(g, getattr(e, "__name__", type(e).__name__)) for g, e in res] == [(group, "NoError")]
        assert committed(cluster, group, topic, 2) == {0: -1001, 1: -1001}
    finally:
        admin.close()


def coordinator_of(cluster, group):
    """(partition, leader) of the group's __consumer_offsets partition, from the metadata."""
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    md = admin.list_topics(topic="__consumer_offsets", timeout=20)
    p = offsets_partition(group, len(md.topics["__consumer_offsets"].partitions))
    return p, md.topics["__consumer_offsets"].partitions[p].leader


def test_coordinator_failover_keeps_offsets(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=3, config={"offsets.topic.replication.factor": "3"})
    topic, group = "cg-failover", "failover-group"
    create_topic(cluster, topic, partitions=3)
    produce(cluster, topic, [f"f{i}".encode() for i in range(90)], 3)
    c, got = consume_group(cluster, group, topic, 90)
    assert len(got) == 90
    # commit 20 of each partition's 30 records explicitly
    c.commit(offsets=[TopicPartition(topic, p, 20) for p in range(3)], asynchronous=False)
    c.close()
    assert committed(cluster, group, topic, 3) == {0: 20, 1: 20, 2: 20}

    p, leader = coordinator_of(cluster, group)
    assert leader in (1, 2, 3)
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    isr = admin.list_topics(topic="__consumer_offsets", timeout=20).topics["__consumer_offsets"].partitions[p].isrs
    assert len(isr) == 3, isr
    cluster[leader].kill()

    def moved():
        try:
            q, new_leader = coordinator_of(cluster, group)
            return new_leader not in (-1, leader) and new_leader
        except Exception:
            return False
    new_leader = H.wait_for(moved, 60, "a new leader for the group's offsets partition")
    assert new_leader != leader

    H.wait_for(lambda: committed(cluster, group, topic, 3) == {0: 20, 1: 20, 2: 20}, 60,
               "committed offsets served by the new coordinator")
    c, got = consume_group(cluster, group, topic, 30)
    c.close()
    assert sorted((m.partition(), m.offset()) for m in got) == sorted(
        (p, o) for p in range(3) for o in range(20, 30))
