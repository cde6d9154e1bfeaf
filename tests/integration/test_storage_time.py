"""Storage (issue 13): the time index, time retention and DeleteRecords through real clients.

- offsetsForTimes through confluent-kafka and kafka-python returns the first offset whose
  timestamp is >= the target across many small segments, before and after a restart of every
  broker; each rolled segment has a .timeindex of 12-byte entries.
- Retention by time deletes exactly the segments whose largest timestamp expired (and keeps the
  one where new records start).
- gregorctl delete-records (kafka-delete-records.sh) moves the log start offset on the leader and
  the follower (log-start-offset-checkpoint on both), consumers from the beginning start there,
  offsets above the high watermark fail, and the log start survives a restart.
- message.timestamp.type=LogAppendTime: consumers see LOG_APPEND_TIME stamps from the broker's
  clock; message.timestamp.difference.max.ms refuses an hour-old CreateTime batch.
All but the retention test fail on the code before issue 13 (no .timeindex, DeleteRecords or
timestamp rules; retention by the largest batch timestamp was there already)."""

import json
import os
import subprocess
import time

import pytest

import gregor_harness as H

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

CONFIG = {
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "log.flush.start.offset.checkpoint.interval.ms": "300",
    "log.retention.check.interval.ms": "500",
}
BASE_TS = 1_600_000_000_000


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running())


def leader_of(cluster, topic, p=0):
    return cluster.get_json(f"/brokers/topics/{topic}/partitions/{p}/state")[0]["leader"]


def create(cluster, topic, rf, config):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic(topic, 1, rf, config=config)], operation_timeout=20,
                        request_timeout=30)[topic].result(timeout=40)
    H.wait_for(lambda: (cluster.get_json(f"/brokers/topics/{topic}/partitions/0/state")[0] or {})
               .get("leader", -1) >= 0, 30, "a leader")


def produce(cluster, topic, stamps, value_size=120):
    """One record per batch (flush after each), timestamps from `stamps`."""
    p = Producer({"bootstrap.servers": bootstrap(cluster), "linger.ms": 0, "acks": "all"})
    for i, ts in enumerate(stamps):
        p.produce(topic, key=b"k%d" % i, value=(b"%08d" % i).ljust(value_size, b"x"), timestamp=ts)
        if i % 5 == 4:
            p.flush(10)
    assert p.flush(20) == 0


def segment_bases(broker, topic, p=0):
    d = os.path.join(broker.logdir, f"{topic}-{p}")
    return sorted(int(f[:20]) for f in os.listdir(d) if f.endswith(".log"))


def confluent_offsets_for_times(cluster, topic, targets):
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "oft-%f" % time.time()})
    try:
        # one request per target: a partition may appear once per request
        return [c.offsets_for_times([TopicPartition(topic, 0, t)], timeout=20)[0].offset for t in targets]
    finally:
        c.close()


def kafka_python_offsets_for_times(cluster, topic, targets):
    kc = kafka.KafkaConsumer(bootstrap_servers=bootstrap(cluster).split(","), api_version=(2, 5, 0))
    try:
        tp = kafka.TopicPartition(topic, 0)
        out = []
        for t in targets:
            r = kc.offsets_for_times({tp: t})[tp]
            out.append(None if r is None else (r.offset, r.timestamp))
        return out
    finally:
        kc.close()


def expected_offset(stamps, t):
    for i, ts in enumerate(stamps):
        if ts >= t:
            return i
    return -1


def test_offsets_for_times_across_segments_and_restart(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=2, config=CONFIG)
    topic = "times"
    create(cluster, topic, 2, {"segment.bytes": "2000", "retention.ms": "-1"})
    # rising timestamps with a step, one late (smaller) timestamp in the middle
    stamps = [BASE_TS + 1000 * i for i in range(150)]
    stamps[70] = BASE_TS - 5000
    produce(cluster, topic, stamps)
    leader = cluster[leader_of(cluster, topic)]
    bases = segment_bases(leader, topic)
    assert len(bases) >= 8, bases
    d = os.path.join(leader.logdir, f"{topic}-0")
    for b in bases[:-1]:  # every rolled segment got entries (at least the final one at roll)
        size = os.path.getsize(os.path.join(d, "%020d.timeindex" % b))
        assert size > 0 and size % 12 == 0, (b, size)
    targets = [BASE_TS - 10000, BASE_TS, BASE_TS + 1, BASE_TS + 69_500, BASE_TS + 71_000,
               BASE_TS + 120_000, BASE_TS + 149_000, BASE_TS + 149_001]
    want = [expected_offset(stamps, t) for t in targets]
    assert want[-1] == -1
    assert confluent_offsets_for_times(cluster, topic, targets) == want
    kp = kafka_python_offsets_for_times(cluster, topic, targets)
    assert [None if w < 0 else (w, stamps[w]) for w in want] == kp, kp

    cluster.stop()
    cluster.start()
    H.wait_for(lambda: leader_of(cluster, topic) >= 0, 30, "a leader after restart")
    H.wait_for(lambda: confluent_offsets_for_times(cluster, topic, targets) == want, 30,
               "offsetsForTimes after restart")
    assert kafka_python_offsets_for_times(cluster, topic, targets) == kp


def test_retention_by_largest_timestamp(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=1, config=CONFIG)
    topic = "ret"
    create(cluster, topic, 1, {"segment.bytes": "2000", "retention.ms": "600000"})
    now = int(time.time() * 1000)
    old = [now - 3_600_000 + i for i in range(60)]
    new = [now + i for i in range(40)]
    produce(cluster, topic, old + new)
    broker = cluster[1]
    bases = segment_bases(broker, topic)
    keep_from = max(b for b in bases if b <= 60)  # the segment holding the first new record
    assert keep_from > 0 and len(bases) > 3
    kc = kafka.KafkaConsumer(bootstrap_servers=bootstrap(cluster).split(","), api_version=(2, 5, 0))
    tp = kafka.TopicPartition(topic, 0)
    try:
        H.wait_for(lambda: kc.beginning_offsets([tp])[tp] == keep_from, 30, "retention by time")
        time.sleep(1.5)  # nothing more goes: the rest holds new timestamps
        assert kc.beginning_offsets([tp])[tp] == keep_from
        assert segment_bases(broker, topic) == [b for b in bases if b >= keep_from]
    finally:
        kc.close()


def ctl_delete_records(cluster, tmp_path, parts):
    f = os.path.join(str(tmp_path), "offsets.json")
    with open(f, "w") as fh:
        json.dump({"partitions": parts, "version": 1}, fh)
    return subprocess.run([H.GREGORCTL, "--bootstrap-server", bootstrap(cluster), "--timeout-ms", "20000",
                           "delete-records", "--offset-json-file", f], capture_output=True, text=True,
                          timeout=60)


def checkpoint_value(broker, topic):
    p = os.path.join(broker.logdir, "log-start-offset-checkpoint")
    if not os.path.exists(p):
        return None
    for line in open(p).read().splitlines()[2:]:
        t, part, off = line.split()
        if t == topic and part == "0":
            return int(off)
    return None


def test_delete_records(cluster_factory, zk_connect, tmp_path):
    cluster = cluster_factory(zk_connect, n=2, config=CONFIG)
    topic = "dr"
    create(cluster, topic, 2, {"segment.bytes": "4000", "retention.ms": "-1"})
    produce(cluster, topic, [BASE_TS + i for i in range(100)])
    r = ctl_delete_records(cluster, tmp_path, [{"topic": topic, "partition": 0, "offset": 37}])
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"partition: {topic}-0\tlow_watermark: 37" in r.stdout
    # both replicas moved (the follower follows the leader's LogStartOffset) and checkpointed it
    for b in cluster.brokers.values():
        H.wait_for(lambda b=b: checkpoint_value(b, topic) == 37, 20, f"checkpoint on broker {b.id}")
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "dr-check",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    first = None
    deadline = time.time() + 30
    while first is None and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            first = m.offset()
    c.close()
    assert first == 37
    # beyond the high watermark: OFFSET_OUT_OF_RANGE; -1 = the high watermark
    r = ctl_delete_records(cluster, tmp_path, [{"topic": topic, "partition": 0, "offset": 1000}])
    assert r.returncode == 1, r.stdout + r.stderr
    assert (f"partition: {topic}-0\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: "
            "The requested offset is not within the range of offsets maintained by the server.") in r.stdout
    cluster.stop()
    cluster.start()
    H.wait_for(lambda: leader_of(cluster, topic) >= 0, 30, "a leader after restart")
    kc = kafka.KafkaConsumer(bootstrap_servers=bootstrap(cluster).split(","), api_version=(2, 5, 0))
    tp = kafka.TopicPartition(topic, 0)
    try:
        H.wait_for(lambda: kc.beginning_offsets([tp])[tp] == 37, 30, "log start after restart")
    finally:
        kc.close()
    r = ctl_delete_records(cluster, tmp_path, [{"topic": topic, "partition": 0, "offset": -1}])
    assert r.returncode == 0 and "low_watermark: 100" in r.stdout, r.stdout + r.stderr


def test_log_append_time_and_timestamp_difference(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=1, config=CONFIG)
    create(cluster, "lat", 1, {"message.timestamp.type": "LogAppendTime"})
    create(cluster, "strict", 1, {"message.timestamp.difference.max.ms": "60000"})
    before = int(time.time() * 1000)
    produce(cluster, "lat", [BASE_TS + i for i in range(5)])
    after = int(time.time() * 1000)
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "lat", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition("lat", 0, 0)])
    got = []
    deadline = time.time() + 20
    while len(got) < 5 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.timestamp())
    c.close()
    assert len(got) == 5
    for ttype, ts in got:  # the broker's clock, not the producer's timestamps
        assert ttype == confluent_kafka.TIMESTAMP_LOG_APPEND_TIME and before - 5 <= ts <= after + 5, (ttype, ts)
    # CreateTime with a bound: a record an hour old is refused, a current one accepted
    errors = []
    p = Producer({"bootstrap.servers": bootstrap(cluster), "retries": 0})
    now = int(time.time() * 1000)
    p.produce("strict", value=b"old", timestamp=now - 3_600_000, on_delivery=lambda e, m: errors.append(e))
    p.flush(20)  # its own batch: a batch fails as a whole, as in Kafka
    p.produce("strict", value=b"new", timestamp=now, on_delivery=lambda e, m: errors.append(e))
    p.flush(20)
    codes = sorted((e.code() if e else 0) for e in errors)
    assert codes == sorted([0, confluent_kafka.KafkaError.INVALID_TIMESTAMP]), errors
