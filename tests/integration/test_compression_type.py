"""Topic compression.type on the leader (Kafka 2.7's LogValidator), through real clients.

- Topics with compression.type gzip, lz4, zstd and snappy receive uncompressed batches from
  confluent-kafka: every batch in the segment files (leader and follower, which copies the
  leader's batches) carries the topic's codec in attributes bits 0-2, and a consumer reads back
  every record unchanged (key, value, headers, timestamp, offsets 0..n-1).
- compression.type=uncompressed stores a gzip producer's batches uncompressed; "producer" (the
  default) keeps the producer's codec (gzip stays gzip, none stays none).
- An idempotent producer (acks=all) against a gzip topic: every record exactly once, batches
  gzip, the producer id kept in the stored batch headers.
- AlterConfigs changing compression.type takes effect for later produces; invalid values are
  refused by CreateTopics (INVALID_CONFIG) and AlterConfigs (INVALID_REQUEST, as Kafka 2.7).
Fail before the leader honoured compression.type (the codec bits were the producer's)."""

import glob
import os
import struct
import time

import pytest

import gregor_harness as H

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

CODEC = {"none": 0, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running())


def admin(cluster):
    return AdminClient({"bootstrap.servers": bootstrap(cluster)})


def create(cluster, topic, config, rf=1):
    a = admin(cluster)  # kept alive until the result arrives
    a.create_topics([NewTopic(topic, 1, rf, config=config)], operation_timeout=20,
                    request_timeout=30)[topic].result(timeout=40)
    H.wait_for(lambda: (cluster.get_json(f"/brokers/topics/{topic}/partitions/0/state")[0] or {})
               .get("leader", -1) >= 0, 30, "a leader")


def records(n, tag):
    return [(f"k{tag}{i}".encode(), (f"value-{tag}-{i}-" + "x" * (100 + i % 50)).encode(),
             [("h", f"{i}".encode()), ("e", b"")], 1700000000000 + i) for i in range(n)]


def produce(cluster, topic, recs, codec="none", **extra):
    conf = {"bootstrap.servers": bootstrap(cluster), "linger.ms": 5, "compression.type": codec,
            "batch.num.messages": 10}
    conf.update(extra)
    p = Producer(conf)
    errs = []
    for k, v, h, ts in recs:
        p.produce(topic, key=k, value=v, headers=h, timestamp=ts, partition=0,
                  on_delivery=lambda e, m: e and errs.append(e))
    assert p.flush(30) == 0
    assert not errs, errs


def consume(cluster, topic):
    """[(offset, key, value, headers, timestamp)] from 0 to the end."""
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "ct-%f" % time.time(),
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + 30
    while time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                break
            raise AssertionError(m.error())
        out.append((m.offset(), m.key(), m.value(), m.headers(), m.timestamp()[1]))
    c.close()
    return out


def disk_batches(broker, topic):
    """[(baseOffset, attributes, producerId, recordCount)] of every batch in the partition's
    segment files, read from the RecordBatch v2 headers."""
    out = []
    for f in sorted(glob.glob(os.path.join(broker.logdir, f"{topic}-0", "*.log"))):
        data = open(f, "rb").read()
        pos = 0
        while pos + 61 <= len(data):
            base, blen = struct.unpack_from(">qi", data, pos)
            if blen <= 0:
                break
            assert data[pos + 16] == 2
            attrs, = struct.unpack_from(">h", data, pos + 21)
            pid, = struct.unpack_from(">q", data, pos + 43)
            count, = struct.unpack_from(">i", data, pos + 57)
            out.append((base, attrs, pid, count))
            pos += 12 + blen
    return out


def check_roundtrip(cluster, topic, recs):
    got = consume(cluster, topic)
    assert [g[0] for g in got] == list(range(len(recs)))
    assert [(g[1], g[2], g[3], g[4]) for g in got] == [(k, v, h, ts) for k, v, h, ts in recs]


def codecs_on_disk(broker, topic):
    return {a & 7 for _, a, _, _ in disk_batches(broker, topic)}


def test_target_codecs_on_leader_and_follower(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=2)
    for codec in ("gzip", "lz4", "zstd", "snappy"):
        topic = f"t-{codec}"
        create(cluster, topic, {"compression.type": codec}, rf=2)
        recs = records(60, codec)
        produce(cluster, topic, recs, codec="none", acks="all")
        check_roundtrip(cluster, topic, recs)
        for b in cluster.running():
            H.wait_for(lambda: sum(c for _, _, _, c in disk_batches(b, topic)) == len(recs), 30,
                       f"{topic} replicated to broker {b.id}")
            batches = disk_batches(b, topic)
            assert {a & 7 for _, a, _, _ in batches} == {CODEC[codec]}, (b.id, batches)
            assert all(a & ~7 == 0 for _, a, _, _ in batches), batches  # other bits unchanged


def test_uncompressed_and_producer(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=1)
    broker = cluster[1]
    create(cluster, "plain", {"compression.type": "uncompressed"})
    recs = records(40, "p")
    produce(cluster, "plain", recs, codec="gzip")
    assert codecs_on_disk(broker, "plain") == {0}
    check_roundtrip(cluster, "plain", recs)

    create(cluster, "prod", {})  # compression.type defaults to producer
    gz = records(30, "g")
    produce(cluster, "prod", gz, codec="gzip")
    assert codecs_on_disk(broker, "prod") == {1}
    n_gzip = len(disk_batches(broker, "prod"))
    plain = records(30, "n")
    produce(cluster, "prod", plain, codec="none")
    assert {a & 7 for _, a, _, _ in disk_batches(broker, "prod")[n_gzip:]} == {0}
    got = consume(cluster, "prod")
    assert [(g[1], g[2], g[3], g[4]) for g in got] == [(k, v, h, ts) for k, v, h, ts in gz + plain]


def test_idempotent_producer_gzip_topic(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=1)
    broker = cluster[1]
    create(cluster, "idem", {"compression.type": "gzip"})
    recs = records(500, "i")
    produce(cluster, "idem", recs, codec="none", **{"enable.idempotence": True, "acks": "all",
                                                   "max.in.flight.requests.per.connection": 5})
    check_roundtrip(cluster, "idem", recs)
    batches = disk_batches(broker, "idem")
    assert {a & 7 for _, a, _, _ in batches} == {1}
    assert {pid for _, _, pid, _ in batches} != {-1}
    assert all(pid >= 0 for _, _, pid, _ in batches)


def test_alter_configs_takes_effect_and_invalid_values(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=1)
    broker = cluster[1]
    create(cluster, "alt", {})
    produce(cluster, "alt", records(5, "a"), codec="none")
    assert codecs_on_disk(broker, "alt") == {0}
    res = ConfigResource("topic", "alt", set_config={"compression.type": "zstd"})
    a = admin(cluster)
    a.alter_configs([res], request_timeout=20)[res].result(30)

    def latest_is_zstd():
        produce(cluster, "alt", records(1, "z"), codec="none")
        return disk_batches(broker, "alt")[-1][1] & 7 == 4
    H.wait_for(latest_is_zstd, 20, "compression.type=zstd to apply", interval=0.3)
    got = consume(cluster, "alt")
    assert len(got) == len({g[0] for g in got}) and got[-1][2].startswith(b"value-z-0")

    with pytest.raises(KafkaException) as ei:
        a.create_topics([NewTopic("bad", 1, 1, config={"compression.type": "brotli"})],
                        request_timeout=30)["bad"].result(timeout=40)
    assert ei.value.args[0].code() == KafkaError.INVALID_CONFIG
    res = ConfigResource("topic", "alt", set_config={"compression.type": "GZIP"})
    with pytest.raises(KafkaException) as ei:
        a.alter_configs([res], request_timeout=20)[res].result(30)
    assert ei.value.args[0].code() == KafkaError.INVALID_REQUEST  # as Kafka 2.7's AdminManager
