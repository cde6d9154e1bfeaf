"""Log compaction (issue 13) through a real broker and real clients.

- A compacted topic with small segments and keys overwritten many times: once the cleaner ran, a
  consumer reading from offset 0 sees the latest value of every key, each cleaned key once, with
  offsets rising and gaps; the partition's on-disk size shrinks; tombstones disappear after
  delete.retention.ms (once a later pass runs).
- The broker SIGKILLs itself in the middle of a swap (test hook GREGOR_TEST_CLEANER_CRASH) and is
  restarted: the log is intact and gets cleaned.
- __consumer_offsets is compacted: under a commit storm its size stays bounded.
- A compacted topic written by a transactional producer with aborted transactions (the last
  write of every key aborted): after cleaning, read_committed and read_uncommitted consumers both
  see exactly the committed latest values (the cleaner drops aborted data by `.txnindex` and keeps
  it out of its offset map).
Fail before issue 13 (no cleaner); the transactional case failed before the cleaner knew
transactions (aborted values visible to read_uncommitted, committed ones cleaned away)."""

import os
import time

import pytest

import gregor_harness as H

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
import kafka_codec as K  # noqa: E402

CONFIG = {
    "log.cleaner.backoff.ms": "200",
    "log.retention.check.interval.ms": "1000",
}
TOPIC_CFG = {"cleanup.policy": "compact", "segment.bytes": "2000", "min.cleanable.dirty.ratio": "0.01",
             "delete.retention.ms": "1500"}


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running())


def create(cluster, topic, config):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)], operation_timeout=20,
                        request_timeout=30)[topic].result(timeout=40)
    H.wait_for(lambda: (cluster.get_json(f"/brokers/topics/{topic}/partitions/0/state")[0] or {})
               .get("leader", -1) >= 0, 30, "a leader")


def produce(cluster, items, topic="c", codec="none"):
    p = Producer({"bootstrap.servers": bootstrap(cluster), "linger.ms": 2, "compression.type": codec,
                  "batch.num.messages": 7})
    for k, v in items:
        p.produce(topic, key=k.encode(), value=None if v is None else v.encode())
    assert p.flush(30) == 0


def serves(cluster, topic):
    """Does a consumer see the topic's partition 0 with its watermarks?"""
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "probe"})
    try:
        c.get_watermark_offsets(TopicPartition(topic, 0), timeout=2)
        return True
    except confluent_kafka.KafkaException:
        return False
    finally:
        c.close()


def read_all(cluster, topic="c", isolation="read_uncommitted"):
    """[(offset, key, value)] from offset 0 to the end."""
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "rd-%f" % time.time(),
                  "enable.auto.commit": False, "enable.partition.eof": True, "isolation.level": isolation})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + 30
    while time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                break
            raise AssertionError(m.error())
        out.append((m.offset(), m.key().decode(), None if m.value() is None else m.value().decode()))
    c.close()
    assert not out or out[-1][0] == hi - 1 or hi == 0, (out[-1:], hi)
    return out


def disk_size(broker, topic="c"):
    """Bytes of the partition's .log files; a segment the cleaner deletes between the listing and
    its stat counts as 0."""
    d = os.path.join(broker.logdir, f"{topic}-0")
    total = 0
    for f in os.listdir(d):
        if f.endswith(".log"):
            try:
                total += os.path.getsize(os.path.join(d, f))
            except FileNotFoundError:
                pass
    return total


def cleaner_checkpoint(broker, topic="c"):
    p = os.path.join(broker.logdir, "cleaner-offset-checkpoint")
    if not os.path.exists(p):
        return 0
    for line in open(p).read().splitlines()[2:]:
        t, part, off = line.split()
        if t == topic and part == "0":
            return int(off)
    return 0


def check_view(records, expected, cleaned_below):
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets must rise"
    latest = {}
    seen_clean = set()
    for o, k, v in records:
        latest[k] = v
        if o < cleaned_below:
            assert k not in seen_clean, f"key {k} twice below the cleaner checkpoint {cleaned_below}"
            seen_clean.add(k)
    live = {k: v for k, v in latest.items() if v is not None}
    assert live == {k: v for k, v in expected.items() if v is not None}


def test_compaction_latest_value_tombstones_and_size(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=1, config=CONFIG)
    create(cluster, "c", TOPIC_CFG)
    broker = cluster[1]
    expected = {}
    items = []
    for rnd in range(12):
        for k in range(25):
            items.append((f"key{k}", f"value-{k}-{rnd}"))
            expected[f"key{k}"] = f"value-{k}-{rnd}"
    produce(cluster, items[:150], codec="gzip")
    produce(cluster, items[150:], codec="lz4")
    tomb = [(f"key{k}", None) for k in range(5)]
    produce(cluster, tomb)
    for k, _ in tomb:
        expected[k] = None
    # Roll past the tombstones, however the client batches: random hex does not compress, so 40
    # pads of 100 bytes exceed segment.bytes (2000) in any batching ("x" * 50 compressed into one
    # small snappy batch when sent together, and then nothing rolled past offset 300).
    pads = [(f"pad{i}", os.urandom(50).hex()) for i in range(40)]
    produce(cluster, pads, codec="snappy")
    for k, v in pads:
        expected[k] = v
    total = len(items) + len(tomb) + 40
    H.wait_for(lambda: cleaner_checkpoint(broker) > 300, 30, "a cleaning pass")
    recs = read_all(cluster)
    assert len(recs) < total / 2, len(recs)
    assert recs[-1][0] == total - 1  # the log end does not move
    check_view(recs, expected, cleaner_checkpoint(broker))
    assert any(v is None for _, _, v in recs), "tombstones stay until delete.retention.ms"
    size = disk_size(broker)
    assert size < 30000
    # after delete.retention.ms, later passes (new dirty data, zstd) drop the tombstones
    time.sleep(2.0)

    def tombstones_gone():
        produce(cluster, [(f"late{i}", "y" * 60) for i in range(30)], codec="zstd")
        time.sleep(0.5)
        return not any(v is None for _, _, v in read_all(cluster))

    H.wait_for(tombstones_gone, 40, "tombstones removed", interval=0.5)
    recs = read_all(cluster)
    for k in range(5):
        assert all(key != f"key{k}" for _, key, _ in recs)


def test_cleaner_killed_mid_swap(cluster_factory, zk_connect, monkeypatch):
    cluster = cluster_factory(zk_connect, n=1, config={**CONFIG, "log.cleaner.enable": "false"})
    create(cluster, "c", TOPIC_CFG)
    broker = cluster[1]
    expected = {}
    items = []
    for rnd in range(10):
        for k in range(20):
            items.append((f"key{k}", f"v{k}-{rnd}"))
            expected[f"key{k}"] = f"v{k}-{rnd}"
    produce(cluster, items)  # cleaner off: everything stays dirty
    broker.stop()
    broker.config["log.cleaner.enable"] = "true"
    monkeypatch.setenv("GREGOR_TEST_CLEANER_CRASH", "swap")
    broker.start()
    broker.wait_exit(30)
    assert broker.returncode is not None, "the cleaner hook killed the broker"
    d = os.path.join(broker.logdir, "c-0")
    assert any(f.endswith(".swap") for f in os.listdir(d)), os.listdir(d)
    monkeypatch.delenv("GREGOR_TEST_CLEANER_CRASH")
    broker.start()
    H.wait_for(lambda: cleaner_checkpoint(broker) > 0, 30, "a cleaning pass after the restart")
    H.wait_for(lambda: (cluster.get_json("/brokers/topics/c/partitions/0/state")[0] or {}).get("leader") == 1,
               30, "leader")
    # the partition state above may still be the killed process's: wait until the restarted
    # broker serves the partition (its first cleaning pass can finish before it registers)
    H.wait_for(lambda: cluster.get_json("/brokers/ids/1")[0] is not None and serves(cluster, "c"), 30, "served")
    recs = read_all(cluster)
    assert recs[-1][0] == len(items) - 1
    check_view(recs, expected, cleaner_checkpoint(broker))
    assert not any(f.endswith((".swap", ".cleaned", ".deleted")) for f in os.listdir(d))


def test_consumer_offsets_bounded_under_commit_storm(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=1, config={**CONFIG, "offsets.topic.num.partitions": "1",
                                                       "offsets.topic.segment.bytes": "4096",
                                                       "log.cleaner.min.cleanable.ratio": "0.1"})
    create(cluster, "t", {})
    produce(cluster, [("k", "v")], topic="t")
    # __consumer_offsets is created compacted (Kafka's topic configs), with offsets.topic.segment.bytes
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "storm", "enable.auto.commit": False})
    c.assign([TopicPartition("t", 0, 0)])
    broker = cluster[1]
    sizes = []
    for i in range(3000):
        c.commit(offsets=[TopicPartition("t", 0, i % 2)], asynchronous=False)
        if i % 500 == 499:
            sizes.append(disk_size(broker, "__consumer_offsets"))
    c.close()
    time.sleep(2)
    final = disk_size(broker, "__consumer_offsets")
    print("__consumer_offsets .log bytes every 500 commits:", sizes, "final:", final)
    # 3000 commits of ~108 B are ~324 KB uncompacted
    assert final < 60000, (sizes, final)


def test_follower_replicates_compacted_log_with_gaps(cluster_factory, zk_connect):
    """A follower that was down while the leader compacted fetches batches with offset gaps,
    rejoins the ISR, and serves the same view after taking over leadership."""
    cluster = cluster_factory(zk_connect, n=2, config={**CONFIG, "replica.lag.time.max.ms": "2000",
                                                       "replica.fetch.wait.max.ms": "200"})
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic("c", num_partitions=1, replica_assignment=[[1, 2]], config=TOPIC_CFG)],
                        operation_timeout=20, request_timeout=30)["c"].result(timeout=40)
    state = lambda: cluster.get_json("/brokers/topics/c/partitions/0/state")[0] or {}
    H.wait_for(lambda: state().get("leader") == 1 and sorted(state().get("isr", [])) == [1, 2], 30, "ISR [1,2]")
    cluster[2].stop()
    H.wait_for(lambda: state().get("isr") == [1], 30, "ISR shrinks to [1]")
    expected = {}
    items = []
    for rnd in range(10):
        for k in range(20):
            items.append((f"key{k}", f"v{k}-{rnd}"))
            expected[f"key{k}"] = f"v{k}-{rnd}"
    produce(cluster, items)
    H.wait_for(lambda: cleaner_checkpoint(cluster[1]) > 0, 30, "the leader cleaned")
    cluster[2].start()
    H.wait_for(lambda: sorted(state().get("isr", [])) == [1, 2], 40, "the follower back in the ISR")
    cluster[1].stop()
    H.wait_for(lambda: state().get("leader") == 2, 30, "broker 2 leads")
    recs = read_all(cluster)
    assert recs[-1][0] == len(items) - 1
    check_view(recs, expected, 0)
    offsets = [o for o, _, _ in recs]
    assert len(offsets) < len(items), "the follower holds the compacted log (gaps)"


def latest_offset(port, topic, isolation):
    """ListOffsets latest of partition 0: the high watermark (isolation 0) or the last stable
    offset (1)."""
    r = K.call(port, 2, 5, {"ReplicaId": -1, "IsolationLevel": isolation, "Topics": [
        {"Name": topic, "Partitions": [{"PartitionIndex": 0, "CurrentLeaderEpoch": -1, "Timestamp": -1}]}]})
    return r["Topics"][0]["Partitions"][0]["Offset"]


def test_transactional_compacted_topic(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=1, config={
        **CONFIG, "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1"})
    create(cluster, "tx", TOPIC_CFG)
    broker = cluster[1]
    tp = Producer({"bootstrap.servers": bootstrap(cluster), "transactional.id": "cleaner-txn", "linger.ms": 2,
                   "transaction.timeout.ms": 20000})
    tp.init_transactions(60)
    expected = {}
    for rnd in range(8):
        for outcome in ("c", "ab"):
            tp.begin_transaction()
            for k in range(10):
                tp.produce("tx", key=f"key{k}".encode(), value=f"{outcome}-{k}-{rnd}".encode())
            if outcome == "c":
                tp.commit_transaction(30)
                for k in range(10):
                    expected[f"key{k}"] = f"c-{k}-{rnd}"
            else:
                assert tp.flush(30) == 0  # sent, so that the abort writes markers
                tp.abort_transaction(30)
    # committed padding (transactional too) rolls the transactions out of the active segment
    for i in range(10):
        tp.begin_transaction()
        for j in range(10):
            tp.produce("tx", key=f"pad{i}-{j}".encode(), value="x" * 60)
            expected[f"pad{i}-{j}"] = "x" * 60
        tp.commit_transaction(30)
    # commit_transaction() returns once PrepareCommit is written; the markers follow (Kafka's
    # EndTxn): wait for the last one (no open transaction: the last stable offset is the log end)
    H.wait_for(lambda: latest_offset(broker.port, "tx", 1) == latest_offset(broker.port, "tx", 0), 30,
               "the last transaction's marker")
    produce(cluster, [("tail", "t")], topic="tx")  # the log ends with a record, not a marker
    expected["tail"] = "t"
    last_abort = 8 * 22 - 1  # 8 x (10 committed + marker + 10 aborted + marker)
    H.wait_for(lambda: cleaner_checkpoint(broker, "tx") > last_abort, 40, "a cleaning pass over the transactions")
    for iso in ("read_committed", "read_uncommitted"):
        recs = read_all(cluster, "tx", iso)
        aborted = [r for r in recs if r[2].startswith("ab-")]
        assert not aborted, (iso, aborted[:5])
        offsets = [o for o, _, _ in recs]
        assert offsets == sorted(set(offsets)), "offsets must rise"
        latest = {k: v for _, k, v in recs}
        assert latest == expected, (iso, {k: (latest.get(k), v) for k, v in expected.items() if latest.get(k) != v})
        below = [k for o, k, _ in recs if o <= last_abort]
        assert len(below) == len(set(below)) == 10, (iso, below)  # each key once in the cleaned range
    d = os.path.join(broker.logdir, "tx-0")
    for f in os.listdir(d):
        if f.endswith(".txnindex"):
            assert os.path.exists(os.path.join(d, f[:-len(".txnindex")] + ".log")), f


def test_compact_delete_under_retention_still_compacted(cluster_factory, zk_connect):
    """Issue 23 item 13: a compact,delete topic whose retention deletes a segment every check
    (retention.bytes reached while producers keep writing) is still compacted. Before, every
    retention deletion cancelled the running pass ("abandoned: its segments changed meanwhile"),
    and a pass throttled to last longer than the retention check never finished. Kafka's
    retention and cleaner run side by side; replaceSegments skips segments already deleted."""
    import threading
    cluster = cluster_factory(zk_connect, n=1, config={
        "log.cleaner.backoff.ms": "100", "log.retention.check.interval.ms": "100",
        "log.cleaner.io.max.bytes.per.second": "6000"})  # a pass over the ~30 kB log lasts > 5 s
    create(cluster, "cd", {"cleanup.policy": "compact,delete", "segment.bytes": "2000",
                           "retention.bytes": "30000", "min.cleanable.dirty.ratio": "0.01"})
    b = cluster[1]
    d = os.path.join(b.logdir, "cd-0")
    stop = threading.Event()

    def writer():  # ~2 kB/s, keys rarely repeated (compaction barely shrinks the log): a segment's
        # worth is deleted by retention about every second, the whole log in 15 s
        p = Producer({"bootstrap.servers": bootstrap(cluster), "linger.ms": 5})
        i = 0
        while not stop.is_set():
            for _ in range(10):
                p.produce("cd", key=f"k{i % 500}".encode(), value=("v%06d" % i + "x" * 80).encode())
                i += 1
            p.poll(0)
            time.sleep(0.45)
        p.flush(30)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        H.wait_for(lambda: "deleting segment" in b.log(), 40, "retention deleting segments")
        since = b.log().index("deleting segment")  # passes over the small young log do not count
        H.wait_for(lambda: f"cleaned '{d}'" in b.log()[since:], 60, "a pass completed while retention runs")
    finally:
        stop.set()
        t.join(40)


def _rss_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def test_cleaner_streams_a_large_segment_with_bounded_memory(cluster_factory, zk_connect):
    """Issue 23 item 14: the cleaner streams each group through its I/O buffers
    (log.cleaner.io.buffer.size, Kafka's Cleaner.cleanInto) instead of holding the group's cleaned
    form in memory. A 48 MB segment whose records are all kept (unique keys) is cleaned while the
    broker's peak RSS (VmHWM) grows by far less than the segment; before, it grew by the whole
    segment (or twice that, by doubling reallocations)."""
    cluster = cluster_factory(zk_connect, n=1, config={
        "log.cleaner.backoff.ms": "200", "log.cleaner.dedupe.buffer.size": "8388608",
        "log.cleaner.io.buffer.size": "524288"})
    create(cluster, "big", {"cleanup.policy": "compact", "segment.bytes": "50000000",
                            "min.cleanable.dirty.ratio": "0.01",
                            "min.compaction.lag.ms": "3600000"})  # not before the baseline
    b = cluster[1]
    p = Producer({"bootstrap.servers": bootstrap(cluster), "linger.ms": 20, "batch.size": 200000,
                  "queue.buffering.max.kbytes": 65536})
    value = os.urandom(1000)
    n = 60000  # ~62 MB: one full 48 MB segment, then the active one
    for i in range(n):
        while True:
            try:
                p.produce("big", key=b"key-%08d" % i, value=value)
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(60) == 0
    d = os.path.join(b.logdir, "big-0")
    segs = sorted(f for f in os.listdir(d) if f.endswith(".log"))
    assert len(segs) >= 2 and os.path.getsize(os.path.join(d, segs[0])) > 45_000_000, segs
    time.sleep(1.0)  # requests settled
    base = _rss_kb(b.pid, "VmHWM")
    import subprocess
    out = subprocess.run([H.GREGORCTL, "--bootstrap-server", bootstrap(cluster), "configs", "--alter",
                          "--entity-type", "topics", "--entity-name", "big", "--delete-config",
                          "min.compaction.lag.ms"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    H.wait_for(lambda: f"cleaned '{d}'" in b.log(), 120, "the large segment cleaned", interval=0.5)
    grew_mb = (_rss_kb(b.pid, "VmHWM") - base) / 1024
    assert grew_mb < 24, f"peak RSS grew by {grew_mb:.1f} MB while cleaning a 48 MB segment"


def test_tombstones_of_a_low_throughput_log_removed_on_time(cluster_factory, zk_connect):
    """Issue 23 item 17 (KIP-534, Kafka 3.1): in a log that compacts into one segment (a record
    now and then, segment.ms rolling), tombstones go once delete.retention.ms has passed since the
    first pass that saw them: that pass stamps their batch with the delete horizon (attribute bit
    0x40, base timestamp; records keep their timestamps), a later pass drops them. Before, the
    horizon was the last clean segment's mtime minus delete.retention.ms, which never passed the
    tombstones of the one segment every pass rewrote: they stayed readable forever."""
    cluster = cluster_factory(zk_connect, n=1, config={"log.cleaner.backoff.ms": "100"})
    create(cluster, "lt", {"cleanup.policy": "compact", "segment.ms": "300", "min.cleanable.dirty.ratio": "0.01",
                           "delete.retention.ms": "2000"})
    b = cluster[1]
    ts0 = int(time.time() * 1000) - 60_000
    p = Producer({"bootstrap.servers": bootstrap(cluster), "linger.ms": 0})
    for k in range(6):
        p.produce("lt", key=f"k{k}".encode(), value=b"v", timestamp=ts0 + k)
    for k in range(3):
        p.produce("lt", key=f"k{k}".encode(), value=None, timestamp=ts0 + 100 + k)
    assert p.flush(30) == 0

    def trickle():  # low throughput: one record, then segment.ms rolls the segment on the next
        time.sleep(0.35)
        p.produce("lt", key=b"f", value=b"x")
        assert p.flush(30) == 0

    def read():
        c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "lt-%f" % time.time(),
                      "enable.auto.commit": False, "enable.partition.eof": True})
        c.assign([TopicPartition("lt", 0, 0)])
        out, deadline = {}, time.time() + 20
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                break
            out[m.key().decode()] = (m.value(), m.timestamp()[1])
        c.close()
        return out

    d = os.path.join(b.logdir, "lt-0")

    def first_pass():
        trickle()
        return f"cleaned '{d}'" in b.log()
    H.wait_for(first_pass, 30, "a first pass over the tombstones", interval=0)
    got = read()
    for k in range(3):  # inside the horizon: still there, with their own timestamps
        assert got[f"k{k}"] == (None, ts0 + 100 + k), got
    assert all(got[f"k{k}"][0] == b"v" for k in range(3, 6)), got

    def gone():
        trickle()
        got = read()
        return not any(f"k{k}" in got for k in range(3)) and all(f"k{k}" in got for k in range(3, 6))
    H.wait_for(gone, 40, "tombstones removed after delete.retention.ms", interval=0)
