"""Storage failures (the storage issue after 27d4346), each through real clients:

- offsetsForTimes on batched records (linger.ms=5, timestamps one second apart) answers the exact
  offset of the first record whose timestamp is >= the target, also after the leader restarts.
- A follower whose log restarts at a log start offset inside a batch (DeleteRecords while it was
  down) appends the leader's whole batch, rejoins the ISR and ends with the leader's log.
- Deleting a compacted topic and re-creating it at once never serves the old records, even while
  the cleaner (throttled) still holds the old log.
- retention.ms on an idle topic empties it on every replica (the active segment rolls), but
  never deletes data above the high watermark.
Each test fails on 27d4346."""

import json
import os
import subprocess
import time

import pytest

import gregor_harness as H

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

FAST = {
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "100",
    "replica.lag.time.max.ms": "3000",
    "log.flush.start.offset.checkpoint.interval.ms": "300",
}


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running())


def part_state(cluster, topic, p=0):
    return cluster.get_json(f"/brokers/topics/{topic}/partitions/{p}/state")[0] or {}


def create(cluster, topic, partitions, rf, config):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic(topic, partitions, rf, config=config)], operation_timeout=20,
                        request_timeout=30)[topic].result(timeout=40)
    for p in range(partitions):
        H.wait_for(lambda p=p: len(part_state(cluster, topic, p).get("isr", [])) == rf, 30,
                   f"{topic}-{p} with a full ISR")


def earliest_latest(cluster, topic, p=0):
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "el-%f" % time.time()})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
    finally:
        c.close()


def produce(cluster, topic, records, partition=None, **conf):
    """Produces (key, value, timestamp) records (acks=all, linger.ms=5); every delivery must succeed."""
    errors = []
    p = Producer({"bootstrap.servers": bootstrap(cluster), "linger.ms": 5, "acks": "all", "batch.size": 16384, **conf})
    for i, (k, v, ts) in enumerate(records):
        kw = {"timestamp": ts} if ts else {}
        if partition is not None:
            kw["partition"] = partition
        p.produce(topic, key=k, value=v, on_delivery=lambda err, m: err and errors.append(err), **kw)
        if i % 300 == 299:
            p.poll(0.02)
    assert p.flush(30) == 0
    assert errors == []


# ---- 1. ListOffsets by timestamp on batched records ----

def offsets_for_times(cluster, topic, targets):
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "oft-%f" % time.time()})
    try:
        return [c.offsets_for_times([TopicPartition(topic, 0, t)], timeout=20)[0].offset for t in targets]
    finally:
        c.close()


def test_offsets_for_times_batched(cluster_factory, zk_connect):
    """Batches of ~100-1000 records, compressed by the producer (lz4) or by the leader (topic
    compression.type=gzip) or not at all: the answer is the exact record, inside its batch, on
    the leader, on a new leader, and on the old leader after its restart (indexes loaded from
    its files). 27d4346 answered compressed batches with their base offset."""
    cluster = cluster_factory(zk_connect, n=3, config=FAST)
    topics = {"oft-lz4": ({}, {"compression.type": "lz4"}),
              "oft-gzip": ({"compression.type": "gzip"}, {}),
              "oft-none": ({}, {})}
    idx = [0, 1, 100, 1234, 2999]
    base = int(time.time() * 1000) - 3_600_000
    stamps = [base + 1000 * i for i in range(3000)]
    targets = [stamps[i] - 500 for i in idx] + [stamps[i] for i in idx] + [stamps[-1] + 1]
    want = idx + idx + [-1]
    for topic, (tconf, pconf) in topics.items():
        create(cluster, topic, 1, 3, {"segment.bytes": "20000", "retention.ms": "-1", **tconf})
        produce(cluster, topic, [(b"k%d" % i, (b"v%06d" % i).ljust(60, b"x"), ts) for i, ts in enumerate(stamps)],
                **pconf)
        leader = cluster[part_state(cluster, topic)["leader"]]
        d = os.path.join(leader.logdir, f"{topic}-0")
        assert len([f for f in os.listdir(d) if f.endswith(".log")]) >= 2, topic
        assert (topic, offsets_for_times(cluster, topic, targets)) == (topic, want)

    topic = "oft-lz4"
    old = part_state(cluster, topic)["leader"]
    cluster[old].stop()
    H.wait_for(lambda: part_state(cluster, topic).get("leader", -1) not in (-1, old), 30, "a new leader")
    assert offsets_for_times(cluster, topic, targets) == want
    cluster[old].start()
    H.wait_for(lambda: len(part_state(cluster, topic).get("isr", [])) == 3, 30, "the old leader in the ISR")
    # the restarted broker (indexes loaded from its files) leads again
    r = subprocess.run([H.GREGORCTL, "--bootstrap-server", bootstrap(cluster), "elect-leaders",
                        "--election-type", "preferred", "--topic", topic, "--partition", "0"],
                       capture_output=True, text=True, timeout=60)
    H.wait_for(lambda: part_state(cluster, topic).get("leader") == old, 30,
               "the restarted broker leading: " + r.stdout + r.stderr)
    H.wait_for(lambda: offsets_for_times(cluster, topic, targets) == want, 20,
               "offsetsForTimes on the restarted leader")


# ---- 2. A follower restarted at a log start offset inside a batch ----

def ctl_delete_records(cluster, tmp_path, topic, offset):
    f = os.path.join(str(tmp_path), "offsets.json")
    with open(f, "w") as fh:
        json.dump({"partitions": [{"topic": topic, "partition": 0, "offset": offset}], "version": 1}, fh)
    r = subprocess.run([H.GREGORCTL, "--bootstrap-server", bootstrap(cluster), "--timeout-ms", "10000",
                        "delete-records", "--offset-json-file", f], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def produce_batches(cluster, topic, first, n_batches, per_batch):
    """n_batches batches of exactly per_batch records (linger.ms=10000, flushed after each)."""
    p = Producer({"bootstrap.servers": bootstrap(cluster), "linger.ms": 10000, "acks": "all"})
    errors = []
    for b in range(n_batches):
        for i in range(per_batch):
            k = first + b * per_batch + i
            p.produce(topic, key=b"k%d" % k, value=b"v%d" % k, on_delivery=lambda e, m: e and errors.append(e))
        assert p.flush(20) == 0
    assert errors == []


def consume_all(cluster, topic, n_expected, timeout=15):
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "all-%f" % time.time(),
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, -2)])
    out = []
    deadline = time.time() + timeout
    try:
        while len(out) < n_expected and time.time() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out.append((m.offset(), m.value()))
    finally:
        c.close()
    return out


def test_follower_restarts_inside_a_batch(cluster_factory, zk_connect, tmp_path):
    """DeleteRecords to offset 430 (inside the batch [420, 440)) while a follower is down and
    behind it: the restarted follower's log starts at 420, takes the whole batch, rejoins the
    ISR, and as the leader later serves exactly what the old leader held (27d4346: the follower
    refetched the batch forever and never rejoined the ISR)."""
    cluster = cluster_factory(zk_connect, n=2, config=FAST)
    topic = "drf"
    create(cluster, topic, 1, 2, {"retention.ms": "-1", "segment.bytes": "4000"})
    produce_batches(cluster, topic, 0, 5, 20)  # offsets 0..99 on both replicas
    st = part_state(cluster, topic)
    leader, follower = st["leader"], [b for b in st["isr"] if b != st["leader"]][0]
    cluster[follower].stop()
    H.wait_for(lambda: part_state(cluster, topic).get("isr") == [leader], 15, "the follower out of the ISR")
    produce_batches(cluster, topic, 100, 20, 20)  # offsets 100..499 on the leader only
    assert "low_watermark: 430" in ctl_delete_records(cluster, tmp_path, topic, 430)
    cluster[follower].start()
    H.wait_for(lambda: sorted(part_state(cluster, topic).get("isr", [])) == sorted([leader, follower]), 12,
               "the restarted follower back in the ISR")
    assert earliest_latest(cluster, topic) == (430, 500)
    cluster[leader].stop()  # the follower leads and serves what it replicated
    H.wait_for(lambda: part_state(cluster, topic).get("leader") == follower, 15, "the follower leading")
    got = consume_all(cluster, topic, 70)
    assert got == [(k, b"v%d" % k) for k in range(430, 500)]
    assert earliest_latest(cluster, topic) == (430, 500)


# ---- 3. Delete and re-create a topic while the cleaner holds the old log ----

def test_recreated_topic_never_serves_old_records(cluster_factory, zk_connect):
    """A throttled cleaner pass (~1 s) holds the old log when the topic is deleted and created
    again at once: the new topic serves only its own records, and the old directories go
    (27d4346 reopened the old directory and served the old records)."""
    cluster = cluster_factory(zk_connect, n=3, config={**FAST, "log.cleaner.io.max.bytes.per.second": "20000",
                                                        "log.cleaner.backoff.ms": "50",
                                                        "log.retention.check.interval.ms": "100"})
    topic = "recreate"
    tconf = {"cleanup.policy": "compact", "segment.bytes": "20000", "min.cleanable.dirty.ratio": "0.01",
             "delete.retention.ms": "0"}
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    deadline = time.time() + 30
    for rnd in range(3):
        create(cluster, topic, 3, 3, tconf)
        produce(cluster, topic, [(b"k%d" % (i % 50), (b"old-%d-%d" % (rnd, i)).ljust(100, b"o"), None)
                                 for i in range(1000)])
        time.sleep(0.3)  # let a cleaner pass start
        admin.delete_topics([topic], operation_timeout=20)[topic].result(timeout=30)
        H.wait_for(lambda: not cluster.zk.exists(f"/brokers/topics/{topic}") and
                   not cluster.zk.exists(f"/admin/delete_topics/{topic}"), 20, "the deletion done")
        create(cluster, topic, 3, 3, tconf)
        new = [(b"n%d" % i, b"new-%d-%d" % (rnd, i), None) for i in range(10)]
        produce(cluster, topic, new)
        got = []
        for p in range(3):
            lo, hi = earliest_latest(cluster, topic, p)
            c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "rc-%f" % time.time(),
                          "enable.auto.commit": False})
            c.assign([TopicPartition(topic, p, lo)])
            while hi > lo and (not got or got[-1][0] != p or got[-1][1] < hi - 1):
                m = c.poll(5)
                assert m is not None, (p, lo, hi, got)
                if not m.error():
                    got.append((p, m.offset(), m.value()))
            c.close()
        assert sorted(v for _, _, v in got) == sorted(v for _, v, _ in new), (rnd, got[:20])
        # every replica holds exactly the new records' log
        for b in cluster.brokers.values():
            for p in range(3):
                d = os.path.join(b.logdir, f"{topic}-{p}")
                if os.path.isdir(d):
                    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".log"))
                    assert size < 2000, (b.id, p, size)
        admin.delete_topics([topic], operation_timeout=20)[topic].result(timeout=30)
        H.wait_for(lambda: not cluster.zk.exists(f"/brokers/topics/{topic}") and
                   not cluster.zk.exists(f"/admin/delete_topics/{topic}"), 20, "the deletion done")
        if time.time() > deadline:
            break
    # old directories are all gone (renamed *-delete ones included) once nothing holds them
    H.wait_for(lambda: all(not [d for d in os.listdir(b.logdir) if d.startswith(topic)]
                           for b in cluster.brokers.values()), 10, "no directory of the deleted topic left")


# ---- 4. Retention deletes the active segment of an idle topic, never above the HW ----

def replica_start_end(broker, topic, p=0):
    """(log start, log end) of a replica from its files: the first segment's base (raised by the
    log-start-offset-checkpoint) and the end found by walking the last segment's batch headers."""
    d = os.path.join(broker.logdir, f"{topic}-{p}")
    bases = sorted(int(f[:20]) for f in os.listdir(d) if f.endswith(".log"))
    end = bases[-1]
    with open(os.path.join(d, "%020d.log" % bases[-1]), "rb") as f:
        data = f.read()
    pos = 0
    while pos + 61 <= len(data):
        base = int.from_bytes(data[pos:pos + 8], "big")
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        end = base + int.from_bytes(data[pos + 23:pos + 27], "big") + 1
        pos += 12 + length
    return bases[0], end


def test_retention_empties_an_idle_topic(cluster_factory, zk_connect):
    """retention.ms=3000 and 100 records, then nothing: within ~10 s every replica's log starts
    at its end (the active segment rolled and deleted, as Kafka); 27d4346 never deleted it."""
    cluster = cluster_factory(zk_connect, n=3, config={**FAST, "log.retention.check.interval.ms": "1000"})
    topic = "idle"
    create(cluster, topic, 1, 3, {"retention.ms": "3000"})
    produce(cluster, topic, [(b"k%d" % i, b"v%d" % i, None) for i in range(100)])
    assert earliest_latest(cluster, topic) == (0, 100)
    H.wait_for(lambda: earliest_latest(cluster, topic) == (100, 100), 10, "the earliest offset at the log end")
    for b in cluster.brokers.values():
        H.wait_for(lambda b=b: replica_start_end(b, topic) == (100, 100), 5,
                   f"broker {b.id}'s log emptied")
    # the log goes on from there
    produce(cluster, topic, [(b"n%d" % i, b"w%d" % i, None) for i in range(5)])
    assert earliest_latest(cluster, topic) == (100, 105)
