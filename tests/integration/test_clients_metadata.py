"""Real clients against a gregord cluster: metadata, topic creation, controller failover.

kcat (librdkafka 2.0.2), confluent-kafka's AdminClient (same librdkafka), kafka-python 2.0.2's
KafkaAdminClient / KafkaClient / KafkaConsumer / KafkaProducer, and `gregorctl topics`.

These need the whole "brokers speak Kafka" path: request dispatch in gregord, the controller's
topic-creation flow (TopicChange -> leaders -> LeaderAndIsr + UpdateMetadata to every broker).
"""

import json
import os
import subprocess
import time

import pytest

import gregor_harness as H

kafka = pytest.importorskip("kafka")
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka.admin import KafkaAdminClient  # noqa: E402
from kafka.admin import NewTopic as KpNewTopic  # noqa: E402

KCAT = "/usr/bin/kcat"


def bootstrap(cluster, ids=None):
    return ",".join(f"127.0.0.1:{cluster[i].port}" for i in (ids or sorted(cluster.brokers)))


def kcat_metadata(broker_hostport, timeout=10):
    """kcat -L -J against one broker: the parsed JSON."""
    out = subprocess.run([KCAT, "-L", "-J", "-b", broker_hostport, "-m", str(timeout)],
                         capture_output=True, text=True, timeout=timeout + 10)
    assert out.returncode == 0, f"kcat failed: {out.stderr}"
    return json.loads(out.stdout)


def topic_leaders(md, topic):
    for t in md.get("topics", []):
        if t["topic"] == topic:
            return {p["partition"]: p for p in t.get("partitions", [])}
    return None


def wait_topic_ready(cluster, topic, nparts, broker_ids=None, timeout=30):
    """Every given broker reports all partitions of topic with a live leader."""
    ids = broker_ids or [b.id for b in cluster.running()]

    def ok():
        for i in ids:
            md = kcat_metadata(f"127.0.0.1:{cluster[i].port}")
            parts = topic_leaders(md, topic)
            if not parts or len(parts) != nparts:
                return False
            live = {b["id"] for b in md["brokers"]}
            if any(p["leader"] not in live for p in parts.values()):
                return False
        return True
    H.wait_for(ok, timeout, f"topic {topic} with {nparts} led partitions on brokers {ids}",
               interval=0.3)


# AdminClients are kept alive for the whole module: a client destroyed before its futures resolve
# fails them with _DESTROY ("Handle is terminating").
_ADMINS = []


def confluent_admin(cluster):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster), "socket.timeout.ms": 10000})
    _ADMINS.append(admin)
    return admin


def create_with_confluent(cluster, name, partitions, rf, **kw):
    fs = confluent_admin(cluster).create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=rf, **kw)],
        operation_timeout=20, request_timeout=30)
    return fs[name]


# ---------------------------------------------------------------- metadata


def test_kcat_lists_brokers_and_topics(cluster):
    create_with_confluent(cluster, "kcat-topic", 3, 2).result(timeout=40)
    wait_topic_ready(cluster, "kcat-topic", 3)
    for b in cluster.running():
        md = kcat_metadata(f"127.0.0.1:{b.port}")
        ids = sorted(x["id"] for x in md["brokers"])
        assert ids == [1, 2, 3], md
        names = {x["name"] for x in md["brokers"]}
        assert names == {f"127.0.0.1:{cluster[i].port}" for i in (1, 2, 3)}
        parts = topic_leaders(md, "kcat-topic")
        assert sorted(parts) == [0, 1, 2]
        for p in parts.values():
            assert p["leader"] in (1, 2, 3)
            assert len(p["replicas"]) == 2
            assert p["leader"] == p["replicas"][0]["id"]  # fresh topic: preferred leader


def test_confluent_admin_creates_and_lists(cluster):
    create_with_confluent(cluster, "cf-topic", 4, 3).result(timeout=40)
    admin = confluent_admin(cluster)
    # CreateTopics is answered once the handling broker's cache has the topic (as Kafka's
    # DelayedCreatePartitions); the broker librdkafka asks next may apply its UpdateMetadata later
    H.wait_for(lambda: "cf-topic" in admin.list_topics(timeout=20).topics, 20, "cf-topic listed")
    md = admin.list_topics(timeout=20)
    assert len(md.brokers) == 3
    assert md.controller_id == cluster.controller_id()
    wait_topic_ready(cluster, "cf-topic", 4)
    md = admin.list_topics(topic="cf-topic", timeout=20)
    t = md.topics["cf-topic"]
    assert t.error is None
    assert sorted(t.partitions) == [0, 1, 2, 3]
    for p in t.partitions.values():
        assert sorted(p.replicas) == [1, 2, 3]
        assert sorted(p.isrs) == [1, 2, 3]


def test_kafka_python_admin_creates_and_describes_cluster(cluster):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(cluster), request_timeout_ms=30000)
    try:
        admin.create_topics([KpNewTopic("kp-topic", num_partitions=2, replication_factor=2)],
                            timeout_ms=20000)
        desc = admin.describe_cluster()
        assert desc["controller_id"] == cluster.controller_id()
        assert sorted(b["node_id"] for b in desc["brokers"]) == [1, 2, 3]
        assert desc["cluster_id"]
    finally:
        admin.close()
    wait_topic_ready(cluster, "kp-topic", 2)


def test_kafka_python_bootstrap_detects_modern_broker(cluster):
    client = kafka.KafkaClient(bootstrap_servers=bootstrap(cluster), api_version_auto_timeout_ms=10000)
    try:
        version = client.check_version(timeout=10)
        assert version >= (0, 11), version
    finally:
        client.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap(cluster),
                                   api_version_auto_timeout_ms=10000)
    try:
        assert consumer.config["api_version"] >= (0, 11)
        assert isinstance(consumer.topics(), set)
    finally:
        consumer.close()
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap(cluster),
                                   api_version_auto_timeout_ms=10000)
    try:
        assert producer.config["api_version"] >= (0, 11)
    finally:
        producer.close()


def test_auto_create_through_metadata(cluster):
    """Metadata for an unknown topic creates it (auto.create.topics.enable defaults to true)
    with num.partitions=1 and answers LEADER_NOT_AVAILABLE until a leader exists."""
    client = kafka.KafkaClient(bootstrap_servers=bootstrap(cluster))
    try:
        client.add_topic("auto-topic")

        def created():
            # kafka-python sends the Metadata request only while the client is polled
            client.poll(timeout_ms=100)
            return cluster.zk.exists("/brokers/topics/auto-topic")

        H.wait_for(created, 20, "/brokers/topics/auto-topic", interval=0.1)
    finally:
        client.close()
    wait_topic_ready(cluster, "auto-topic", 1)


# ---------------------------------------------------------------- assignment and errors


def test_leaders_spread_as_kafka_assigns(cluster):
    create_with_confluent(cluster, "spread", 6, 3).result(timeout=40)
    wait_topic_ready(cluster, "spread", 6)
    assignment, _ = cluster.get_json("/brokers/topics/spread")
    assert assignment["version"] == 3 and len(assignment["topic_id"]) == 22  # Kafka 2.8+ (KIP-516)
    parts = {int(k): v for k, v in assignment["partitions"].items()}
    assert sorted(parts) == list(range(6))
    # Rack-unaware assignment with n=3: first replicas rotate through all brokers, each broker
    # is the preferred leader of exactly 2 partitions, and partition p+1's first replica follows
    # partition p's in id order.
    firsts = [parts[p][0] for p in range(6)]
    assert sorted(firsts) == [1, 1, 2, 2, 3, 3]
    for p in range(5):
        assert firsts[p + 1] == firsts[p] % 3 + 1
    for r in parts.values():
        assert sorted(r) == [1, 2, 3]
    md = kcat_metadata(bootstrap(cluster, [1]))
    led = topic_leaders(md, "spread")
    for p, info in led.items():
        assert info["leader"] == parts[p][0]


def test_create_errors(cluster):
    create_with_confluent(cluster, "dup", 1, 1).result(timeout=40)
    with pytest.raises(confluent_kafka.KafkaException) as ei:
        create_with_confluent(cluster, "dup", 1, 1).result(timeout=40)
    assert ei.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(confluent_kafka.KafkaException) as ei:
        create_with_confluent(cluster, "too-wide", 1, 4).result(timeout=40)
    assert ei.value.args[0].code() == confluent_kafka.KafkaError.INVALID_REPLICATION_FACTOR
    with pytest.raises(confluent_kafka.KafkaException) as ei:
        create_with_confluent(cluster, "bad/name", 1, 1).result(timeout=40)
    assert ei.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_EXCEPTION
    # validate_only creates nothing
    fs = confluent_admin(cluster).create_topics([NewTopic("dry", 2, 1)], validate_only=True,
                                                request_timeout=30)
    fs["dry"].result(timeout=40)
    time.sleep(0.5)
    assert not cluster.zk.exists("/brokers/topics/dry")


def test_create_partitions(cluster):
    create_with_confluent(cluster, "grow", 2, 2).result(timeout=40)
    wait_topic_ready(cluster, "grow", 2)
    from confluent_kafka.admin import NewPartitions
    fs = confluent_admin(cluster).create_partitions([NewPartitions("grow", 5)],
                                                    operation_timeout=20, request_timeout=30)
    fs["grow"].result(timeout=40)
    wait_topic_ready(cluster, "grow", 5)
    assignment, _ = cluster.get_json("/brokers/topics/grow")
    parts = {int(k): v for k, v in assignment["partitions"].items()}
    assert sorted(parts) == [0, 1, 2, 3, 4]
    assert all(len(r) == 2 for r in parts.values())


# ---------------------------------------------------------------- failover


def test_metadata_converges_after_controller_killed(cluster):
    create_with_confluent(cluster, "failover", 3, 3).result(timeout=40)
    wait_topic_ready(cluster, "failover", 3)
    old = cluster.controller()
    old_id = old["brokerid"]
    old_epoch = cluster.controller_epoch()
    cluster[old_id].kill()
    cluster.wait_new_controller(old["_stat"].czxid, timeout=30)
    new_id = cluster.controller_id()
    assert new_id != old_id
    assert cluster.controller_epoch() > old_epoch
    survivors = [i for i in (1, 2, 3) if i != old_id]

    def converged():
        for i in survivors:
            md = kcat_metadata(f"127.0.0.1:{cluster[i].port}")
            if md.get("controllerid") != new_id:
                return False
            if sorted(b["id"] for b in md["brokers"]) != survivors:
                return False
            parts = topic_leaders(md, "failover")
            if not parts or any(p["leader"] not in survivors for p in parts.values()):
                return False
        return True
    H.wait_for(converged, 40, "every surviving broker's metadata under the new controller",
               interval=0.5)


# ---------------------------------------------------------------- gregorctl


def gregorctl(cluster, *args, check=True):
    out = subprocess.run([H.GREGORCTL, "--bootstrap-server", bootstrap(cluster, [1]),
                          "--timeout-ms", "20000", "topics", *args],
                         capture_output=True, text=True, timeout=60)
    if check:
        assert out.returncode == 0, f"gregorctl topics {args}: {out.stdout}{out.stderr}"
    return out


def test_gregorctl_topics(cluster):
    usage = subprocess.run([H.GREGORCTL, "--help"], capture_output=True, text=True)
    assert "topics" in usage.stdout, f"gregorctl --help does not list 'topics':\n{usage.stdout}{usage.stderr}"
    out = gregorctl(cluster, "create", "--topic", "ctl", "--partitions", "6",
                    "--replication-factor", "3")
    assert "Created topic ctl." in out.stdout
    wait_topic_ready(cluster, "ctl", 6)
    out = gregorctl(cluster, "list")
    assert "ctl" in out.stdout.split()
    out = gregorctl(cluster, "describe", "--topic", "ctl")
    lines = out.stdout.splitlines()
    assert lines[0].startswith("Topic: ctl\tPartitionCount: 6\tReplicationFactor: 3\tConfigs: ")
    assert len(lines) == 7
    assert lines[1].startswith("\tTopic: ctl\tPartition: 0\tLeader: ")
    js = json.loads(gregorctl(cluster, "describe", "--topic", "ctl", "--json").stdout)
    assert js[0]["topic"] == "ctl" and len(js[0]["partitions"]) == 6
    out = gregorctl(cluster, "create", "--topic", "ctl", "--partitions", "1", check=False)
    assert out.returncode == 1 and "TOPIC_ALREADY_EXISTS" in out.stderr
    out = gregorctl(cluster, "create", "--topic", "manual", "--replica-assignment", "1:2,2:3,3:1",
                    "--json")
    assert json.loads(out.stdout)["error_code"] == 0
    assignment, _ = cluster.get_json("/brokers/topics/manual")
    assert assignment["partitions"] == {"0": [1, 2], "1": [2, 3], "2": [3, 1]}
