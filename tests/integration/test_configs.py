"""Topic and broker configs through real admin clients: DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs (gregorctl configs, as kafka-configs.sh sends it), stored as Kafka stores
them and applied live on every broker (min.insync.replicas, segment.bytes + retention.ms).

Also: CreateTopics v5 returns the topic's configs (raw request), and unclean.leader.election.enable
as the dynamic broker default reaches the controller.

Clients: confluent-kafka 1.7 AdminClient (describe_configs / alter_configs), kafka-python 2.0.2
KafkaAdminClient.describe_configs and KafkaProducer, `gregorctl configs`.
"""

import glob
import json
import os
import socket
import struct
import subprocess
import time

import pytest

import gregor_harness as H
from kafka_wire import Reader, compact_str, uvarint

kafka = pytest.importorskip("kafka")
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic  # noqa: E402
from kafka.admin import ConfigResource as KpConfigResource  # noqa: E402
from kafka.admin import ConfigResourceType, KafkaAdminClient  # noqa: E402

CONFIG = {"log.retention.check.interval.ms": "300", "log.segment.bytes": "1073741824"}

_ADMINS = []  # keep AdminClients alive while futures may still resolve


def bootstrap(cluster, ids=None):
    return ",".join(f"127.0.0.1:{cluster[i].port}" for i in (ids or sorted(cluster.brokers)))


def admin(cluster, ids=None):
    a = AdminClient({"bootstrap.servers": bootstrap(cluster, ids), "socket.timeout.ms": 10000})
    _ADMINS.append(a)
    return a


def gregorctl(cluster, *args, check=True, broker=1):
    out = subprocess.run([H.GREGORCTL, "--bootstrap-server", bootstrap(cluster, [broker]),
                          "--timeout-ms", "15000", "configs", *args],
                         capture_output=True, text=True, timeout=60)
    if check:
        assert out.returncode == 0, f"gregorctl configs {args}: {out.stdout}{out.stderr}"
    return out


def create_topic(cluster, name, partitions=3, rf=3, config=None):
    fs = admin(cluster).create_topics([NewTopic(name, num_partitions=partitions, replication_factor=rf,
                                                config=config or {})],
                                      operation_timeout=20, request_timeout=30)
    fs[name].result(30)

    def ready():  # every broker's metadata cache knows it (kcat asks the one broker given)
        for b in cluster.brokers.values():
            out = subprocess.run(["/usr/bin/kcat", "-L", "-J", "-b", f"127.0.0.1:{b.port}", "-t", name, "-m", "5"],
                                 capture_output=True, text=True, timeout=20)
            if out.returncode != 0:
                return False
            ts = [t for t in json.loads(out.stdout).get("topics", []) if t["topic"] == name]
            if not ts or ts[0].get("err") or len(ts[0]["partitions"]) != partitions or \
                    any(p["leader"] < 0 for p in ts[0]["partitions"]):
                return False
        return True
    H.wait_for(ready, 30, f"topic {name} ready on every broker", interval=0.3)


def describe(cluster, rtype, name, ids=None):
    res = ConfigResource(rtype, name)
    fs = admin(cluster, ids).describe_configs([res], request_timeout=20)
    return fs[res].result(30)


def alter(cluster, rtype, name, configs):
    res = ConfigResource(rtype, name, set_config=configs)
    fs = admin(cluster).alter_configs([res], request_timeout=20)
    return fs[res].result(30)


def src(entry):
    s = entry.source
    if isinstance(s, int):
        s = ConfigSource(s)
    return s.name


@pytest.fixture
def ccluster(cluster_factory, zk_connect):
    return cluster_factory(zk_connect, n=3, config=CONFIG)


def test_describe_alter_with_confluent_and_kafka_python(ccluster, zk):
    c = ccluster
    create_topic(c, "cfg", config={"retention.ms": "3600000"})
    d = describe(c, "topic", "cfg")
    assert d["retention.ms"].value == "3600000" and src(d["retention.ms"]) == "DYNAMIC_TOPIC_CONFIG"
    assert d["segment.bytes"].value == "1073741824" and src(d["segment.bytes"]) == "STATIC_BROKER_CONFIG"
    assert d["max.message.bytes"].value == "1048588" and src(d["max.message.bytes"]) == "DEFAULT_CONFIG"
    assert d["cleanup.policy"].value == "delete" and not d["cleanup.policy"].is_read_only
    syn = [(s.name, src(s)) for s in d["retention.ms"].synonyms.values()]
    assert syn == [("retention.ms", "DYNAMIC_TOPIC_CONFIG"), ("log.retention.hours", "DEFAULT_CONFIG")], syn
    # stored as Kafka stores it
    data, _ = c.zk.get("/config/topics/cfg")
    assert json.loads(data) == {"version": 1, "config": {"retention.ms": "3600000"}}

    # AlterConfigs replaces the whole override set; a change notification (v2) is written
    alter(c, "topic", "cfg", {"segment.bytes": "1048576", "cleanup.policy": "compact,delete"})
    d = describe(c, "topic", "cfg")
    assert d["segment.bytes"].value == "1048576" and src(d["segment.bytes"]) == "DYNAMIC_TOPIC_CONFIG"
    assert d["retention.ms"].value == "604800000" and src(d["retention.ms"]) == "DEFAULT_CONFIG"
    assert d["cleanup.policy"].value == "compact,delete"
    changes = sorted(c.zk.get_children("/config/changes"))
    assert changes and changes[-1].startswith("config_change_")
    last = json.loads(c.zk.get("/config/changes/" + changes[-1])[0])
    assert last == {"version": 2, "entity_path": "topics/cfg"}

    # validation: bad value names the key (Kafka 2.7: INVALID_REQUEST), unknown key INVALID_CONFIG
    with pytest.raises(KafkaException) as ei:
        alter(c, "topic", "cfg", {"retention.ms": "soon"})
    err = ei.value.args[0]
    assert err.code() == confluent_kafka.KafkaError.INVALID_REQUEST and "retention.ms" in err.str(), err
    with pytest.raises(KafkaException) as ei:
        alter(c, "topic", "cfg", {"min.insync.replicas": "0"})
    assert "min.insync.replicas" in ei.value.args[0].str()
    with pytest.raises(KafkaException) as ei:
        alter(c, "topic", "cfg", {"no.such.config": "1"})
    err = ei.value.args[0]
    assert err.code() == confluent_kafka.KafkaError.INVALID_CONFIG and "no.such.config" in err.str(), err
    with pytest.raises(KafkaException) as ei:
        describe(c, "topic", "missing")
    assert ei.value.args[0].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART
    # validate_only writes nothing
    res = ConfigResource("topic", "cfg", set_config={"retention.ms": "1000"})
    admin(c).alter_configs([res], validate_only=True)[res].result(30)
    assert describe(c, "topic", "cfg")["retention.ms"].value == "604800000"

    # broker: static, default and dynamic sources; read-only flags
    b1 = describe(c, "broker", "1")
    assert b1["broker.id"].value == "1" and b1["broker.id"].is_read_only
    assert src(b1["log.segment.bytes"]) == "STATIC_BROKER_CONFIG" and not b1["log.segment.bytes"].is_read_only
    assert src(b1["min.insync.replicas"]) == "DEFAULT_CONFIG"
    with pytest.raises(KafkaException) as ei:
        alter(c, "broker", "1", {"num.partitions": "4"})
    assert ei.value.args[0].code() == confluent_kafka.KafkaError.INVALID_REQUEST
    assert "num.partitions" in ei.value.args[0].str()

    # cluster-wide default (gregorctl: both Python clients refuse an empty broker name) reaches
    # topic configs on every broker
    gregorctl(c, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
              "log.retention.ms=7200000")
    assert json.loads(c.zk.get("/config/brokers/<default>")[0])["config"] == {"log.retention.ms": "7200000"}
    for bid in (1, 2, 3):
        def seen(bid=bid):
            e = describe(c, "broker", str(bid))["log.retention.ms"]
            return e.value == "7200000" and src(e) == "DYNAMIC_DEFAULT_BROKER_CONFIG"
        H.wait_for(seen, 15, f"broker {bid} sees the dynamic default", interval=0.3)
    d = describe(c, "topic", "cfg")
    assert d["retention.ms"].value == "7200000" and src(d["retention.ms"]) == "DYNAMIC_DEFAULT_BROKER_CONFIG"

    # kafka-python's describe
    kp = KafkaAdminClient(bootstrap_servers=bootstrap(c), request_timeout_ms=20000)
    try:
        r = kp.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, "cfg")])
        entries = {e[0]: e[1] for e in r[0].resources[0][4]}
        assert entries["segment.bytes"] == "1048576" and entries["retention.ms"] == "7200000"
        r = kp.describe_configs([KpConfigResource(ConfigResourceType.BROKER, "2")])
        res = r[0].resources[0]
        assert res[0] == 0 and {e[0] for e in res[4]} >= {"broker.id", "log.retention.ms", "min.insync.replicas"}
    finally:
        kp.close()


def log_segments(c, bid, topic, partition=0):
    return sorted(glob.glob(os.path.join(c[bid].logdir, f"{topic}-{partition}", "*.log")))


def test_changes_apply_live_on_every_broker(ccluster):
    c = ccluster
    create_topic(c, "mis", partitions=3, rf=3)
    from kafka import KafkaProducer
    from kafka.errors import NotEnoughReplicasError

    def produce_all(topic, partitions, n=1, size=10, acks="all", batch_size=16384):
        p = KafkaProducer(bootstrap_servers=bootstrap(c), acks=acks, retries=0, linger_ms=0,
                          max_block_ms=20000, request_timeout_ms=10000, batch_size=batch_size)
        try:
            fs = [p.send(topic, b"x" * size, partition=i % partitions) for i in range(n)]
            p.flush(30)
            return [f.exception for f in fs]
        finally:
            p.close(5)

    assert produce_all("mis", 3, 3) == [None, None, None]
    # min.insync.replicas above the replication factor: every leader (one on each broker)
    # refuses acks=all at once
    out = gregorctl(c, "--alter", "--entity-type", "topics", "--entity-name", "mis",
                    "--add-config", "min.insync.replicas=4")
    assert out.stdout.strip() == "Completed updating config for topic mis."

    def refused():
        errs = produce_all("mis", 3, 3)
        return all(isinstance(e, NotEnoughReplicasError) for e in errs)
    H.wait_for(refused, 15, "acks=all refused on all three leaders", interval=0.3)
    gregorctl(c, "--alter", "--entity-type", "topics", "--entity-name", "mis", "--delete-config",
              "min.insync.replicas")
    H.wait_for(lambda: produce_all("mis", 3, 3) == [None, None, None], 15, "acks=all accepted again",
               interval=0.3)

    # segment.bytes then retention.ms: old segments go on every replica without a restart
    create_topic(c, "ret", partitions=1, rf=3)
    gregorctl(c, "--alter", "--entity-type", "topics", "--entity-name", "ret", "--add-config",
              "segment.bytes=2048")
    time.sleep(1.0)
    assert produce_all("ret", 1, n=60, size=400, acks="all", batch_size=600) == [None] * 60
    for bid in (1, 2, 3):
        H.wait_for(lambda bid=bid: len(log_segments(c, bid, "ret")) >= 5, 15,
                   f"small segments on broker {bid}", interval=0.3)
    gregorctl(c, "--alter", "--entity-type", "topics", "--entity-name", "ret", "--add-config",
              "retention.ms=1")
    for bid in (1, 2, 3):
        H.wait_for(lambda bid=bid: len(log_segments(c, bid, "ret")) == 1, 20,
                   f"retention deleted old segments on broker {bid}", interval=0.3)


def test_gregorctl_configs_output(ccluster):
    c = ccluster
    create_topic(c, "ctl", partitions=1, rf=1)
    out = gregorctl(c, "--alter", "--entity-type", "topics", "--entity-name", "ctl", "--add-config",
                    "retention.ms=86400000,cleanup.policy=[compact,delete]")
    assert out.stdout.strip() == "Completed updating config for topic ctl."
    out = gregorctl(c, "--describe", "--entity-type", "topics", "--entity-name", "ctl")
    lines = out.stdout.splitlines()
    assert lines[0] == "Dynamic configs for topic ctl are:"
    assert "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=" \
        "compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}" in lines
    assert "  retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000, " \
        "DEFAULT_CONFIG:log.retention.hours=168}" in lines
    assert len(lines) == 3
    out = gregorctl(c, "--alter", "--entity-type", "topics", "--entity-name", "ctl", "--add-config",
                    "segment.ms=-5", check=False)
    assert out.returncode == 1 and "segment.ms" in out.stderr
    out = gregorctl(c, "--alter", "--entity-type", "topics", "--entity-name", "ctl", "--delete-config",
                    "flush.ms", check=False)
    assert out.returncode == 1 and "Invalid config(s): flush.ms" in out.stderr

    out = gregorctl(c, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
                    "log.retention.bytes=1000000")
    assert out.stdout.strip() == "Completed updating default config for brokers in the cluster."
    out = gregorctl(c, "--alter", "--entity-type", "brokers", "--entity-name", "2", "--add-config",
                    "min.insync.replicas=2")
    assert out.stdout.strip() == "Completed updating config for broker 2."
    # the broker applies it from its /config/changes listener, asynchronously (as Kafka)
    H.wait_for(lambda: "min.insync.replicas=2" in gregorctl(c, "--describe", "--entity-type", "brokers",
                                                           "--entity-name", "2").stdout, 15, "broker 2 updated")
    out = gregorctl(c, "--describe", "--entity-type", "brokers", "--entity-name", "2")
    assert out.stdout.splitlines() == [
        "Dynamic configs for broker 2 are:",
        "  min.insync.replicas=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:min.insync.replicas=2, "
        "DEFAULT_CONFIG:min.insync.replicas=1}"]
    H.wait_for(lambda: "log.retention.bytes" in gregorctl(c, "--describe", "--entity-type", "brokers",
                                                         "--entity-default").stdout, 15, "broker 1 updated")
    out = gregorctl(c, "--describe", "--entity-type", "brokers", "--entity-default")
    assert out.stdout.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.bytes=1000000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes="
        "1000000}"]
    H.wait_for(lambda: "log.retention.bytes=1000000" in gregorctl(c, "--describe", "--entity-type", "brokers",
                                                                  "--entity-name", "3", "--all").stdout,
               15, "broker 3 updated")
    out = gregorctl(c, "--describe", "--entity-type", "brokers", "--entity-name", "3", "--all")
    assert "All configs for broker 3 are:" in out.stdout
    assert "  log.retention.bytes=1000000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:" \
        "log.retention.bytes=1000000, DEFAULT_CONFIG:log.retention.bytes=-1}" in out.stdout.splitlines()
    out = gregorctl(c, "--alter", "--entity-type", "brokers", "--entity-name", "2", "--add-config",
                    "broker.rack=x", check=False)
    assert out.returncode == 1 and "Cannot update these configs dynamically" in out.stderr


# ---- CreateTopics v5 returns the topic's configs (no Python client speaks v5: raw request)

def test_create_topics_v5_returns_configs(ccluster):
    c = ccluster
    # a dynamic default shows up with its source
    gregorctl(c, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.bytes=5000000")
    cid = c.controller_id()
    H.wait_for(lambda: "log.retention.bytes=5000000" in gregorctl(c, "--describe", "--entity-type", "brokers",
                                                                  "--entity-default", broker=cid).stdout,
               15, "the controller sees the default")
    topic = (compact_str("v5topic") + struct.pack(">ih", 2, 3) + uvarint(1)
             + uvarint(2) + compact_str("retention.ms") + compact_str("123456") + uvarint(0) + uvarint(0))
    body = uvarint(2) + topic + struct.pack(">i?", 10000, True) + uvarint(0)
    hdr = struct.pack(">hhih", 19, 5, 4242, 4) + b"test" + uvarint(0)
    s = socket.create_connection(("127.0.0.1", c[cid].port), timeout=10)
    try:
        s.sendall(struct.pack(">i", len(hdr + body)) + hdr + body)
        n = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        r = Reader(s.recv(n, socket.MSG_WAITALL))
    finally:
        s.close()
    assert r.i32() == 4242
    r.tags()
    r.i32()  # throttle
    assert r.uvarint() == 2
    assert r.compact_str() == "v5topic"
    err, msg = r.i16(), r.compact_str()
    assert err == 0, (err, msg)
    assert (r.i32(), r.i16()) == (2, 3)
    configs = {}
    for _ in range(r.uvarint() - 1):
        name, value, read_only, source, sensitive = r.compact_str(), r.compact_str(), r.i8(), r.i8(), r.i8()
        r.tags()
        configs[name] = (value, source, read_only, sensitive)
    assert configs["retention.ms"] == ("123456", 1, 0, 0)           # TOPIC_CONFIG
    assert configs["retention.bytes"] == ("5000000", 3, 0, 0)       # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert configs["segment.bytes"] == ("1073741824", 4, 0, 0)      # STATIC_BROKER_CONFIG
    assert configs["max.message.bytes"] == ("1048588", 5, 0, 0)     # DEFAULT_CONFIG
    print("v5 configs:", len(configs), configs["retention.ms"])
    assert len(configs) == 26


def test_default_unclean_election_reaches_the_controller(cluster_factory, zk_connect):
    """unclean.leader.election.enable=true as the cluster-wide broker default: the controller takes
    it as the topics' default at once and elects an out-of-sync replica (Kafka 2.7's
    DynamicLogConfig -> enableDefaultUncleanLeaderElection)."""
    c = cluster_factory(zk_connect, n=3, config={"replica.lag.time.max.ms": "2000", "replica.fetch.wait.max.ms": "200",
                                                 "controlled.shutdown.retry.backoff.ms": "500",
                                                 "auto.leader.rebalance.enable": "false"})
    from confluent_kafka import Producer
    admin(c).create_topics([NewTopic("ud", num_partitions=1, replica_assignment=[[1, 2, 3]])])["ud"].result(30)

    def state():
        return json.loads(c.zk.get("/brokers/topics/ud/partitions/0/state")[0])
    H.wait_for(lambda: c.zk.exists("/brokers/topics/ud/partitions/0/state") and len(state()["isr"]) == 3, 30,
               "full ISR")
    c[3].kill()
    H.wait_for(lambda: sorted(state()["isr"]) == [1, 2], 30, "3 out of the ISR")
    p = Producer({"bootstrap.servers": bootstrap(c, [1, 2]), "acks": "all"})
    for i in range(5):
        p.produce("ud", f"x{i}".encode(), partition=0)
    assert p.flush(30) == 0
    c[2].kill()
    c[1].kill()
    c[3].start()
    c.wait_registered([3])
    H.wait_for(lambda: c.controller_id() == 3, 30, "broker 3 controller")
    time.sleep(1.5)
    assert state()["leader"] == -1
    gregorctl(c, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
              "unclean.leader.election.enable=true", broker=3)
    H.wait_for(lambda: state()["leader"] == 3, 30, "unclean leader 3")
    assert state()["isr"] == [3]


def first_batch_header(c, bid, topic, partition=0):
    """(attributes, baseTimestamp, maxTimestamp) of the last batch of the newest non-empty segment."""
    for path in reversed(log_segments(c, bid, topic, partition)):
        data = open(path, "rb").read()
        if not data:
            continue
        pos, last = 0, None
        while pos + 61 <= len(data):
            (blen,) = struct.unpack(">i", data[pos + 8:pos + 12])
            last = data[pos:pos + 12 + blen]
            pos += 12 + blen
        (attrs,) = struct.unpack(">h", last[21:23])
        base_ts, max_ts = struct.unpack(">qq", last[27:43])
        return attrs, base_ts, max_ts
    return None


def test_dynamic_broker_log_settings_reach_existing_logs(cluster_factory, zk_connect):
    """Issue 23 item 15: a broker-level log setting changed with IncrementalAlterConfigs (cluster
    default or per broker) is applied to the logs that already exist, as Kafka's
    DynamicLogConfig.reconfigure does; a topic override still wins; removing it restores
    server.properties. Before, DescribeConfigs showed the new value while the logs kept the static
    cleanup.policy, message.timestamp.type and compression.type."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME
    c = cluster_factory(zk_connect, n=2, config={"log.retention.check.interval.ms": "200",
                                                  "log.cleaner.backoff.ms": "200"})
    create_topic(c, "dyn", partitions=1, rf=2, config={"segment.bytes": "2048"})
    create_topic(c, "own", partitions=1, rf=2, config={"message.timestamp.type": "CreateTime"})
    p = Producer({"bootstrap.servers": bootstrap(c), "acks": "all", "linger.ms": 0,
                  "compression.type": "none", "batch.num.messages": 1})
    old_ts = int(time.time() * 1000) - 3_600_000  # an hour ago: within retention, not the broker's clock

    def produce(topic, n=1, key=None, size=10, ts=old_ts):
        for _ in range(n):
            p.produce(topic, b"v" * size, key=key, timestamp=ts)
            p.flush(30)

    def last_timestamp(topic):
        cons = Consumer({"bootstrap.servers": bootstrap(c), "group.id": f"g-{time.time()}",
                         "enable.auto.commit": False})
        try:
            lo, hi = cons.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            cons.assign([TopicPartition(topic, 0, hi - 1)])
            m = cons.poll(15)
            assert m is not None and not m.error(), m and m.error()
            return m.timestamp()
        finally:
            cons.close()

    produce("dyn")
    assert last_timestamp("dyn") == (TIMESTAMP_CREATE_TIME, old_ts)

    # cluster default: LogAppendTime and gzip, on both replicas of the existing logs
    gregorctl(c, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
              "log.message.timestamp.type=LogAppendTime,compression.type=gzip")

    def stamped():
        produce("dyn")
        kind, ts = last_timestamp("dyn")
        return kind == TIMESTAMP_LOG_APPEND_TIME and ts > old_ts
    H.wait_for(stamped, 20, "LogAppendTime applied to the existing log", interval=0.5)
    for bid in (1, 2):  # the leader converted, the follower stored the leader's batch
        H.wait_for(lambda bid=bid: first_batch_header(c, bid, "dyn")[0] & 0x7 == 1, 15,
                   f"gzip batch on broker {bid}", interval=0.3)
        assert first_batch_header(c, bid, "dyn")[0] & 0x8, "LogAppendTime bit set"
    # a topic override still wins over the dynamic default
    produce("own")
    assert last_timestamp("own") == (TIMESTAMP_CREATE_TIME, old_ts)

    # per broker beats the cluster default (broker 1 leads or follows: set it on both)
    for bid in (1, 2):
        gregorctl(c, "--alter", "--entity-type", "brokers", "--entity-name", str(bid), "--add-config",
                  "log.message.timestamp.type=CreateTime")

    def create_time():
        produce("dyn")
        return last_timestamp("dyn") == (TIMESTAMP_CREATE_TIME, old_ts)
    H.wait_for(create_time, 20, "per-broker CreateTime over the default LogAppendTime", interval=0.5)
    for bid in (1, 2):
        gregorctl(c, "--alter", "--entity-type", "brokers", "--entity-name", str(bid), "--delete-config",
                  "log.message.timestamp.type")
    gregorctl(c, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config",
              "log.message.timestamp.type,compression.type")
    H.wait_for(create_time, 20, "server.properties' CreateTime restored", interval=0.5)

    # log.cleanup.policy=compact as the cluster default: the existing log gets compacted
    # (keys rewritten many times, old segments shrink) and nothing is deleted
    produce("dyn", n=40, key=b"k", size=200, ts=0)
    cons = Consumer({"bootstrap.servers": bootstrap(c), "group.id": "lo"})
    lo0 = cons.get_watermark_offsets(TopicPartition("dyn", 0), timeout=10)[0]
    cons.close()
    gregorctl(c, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
              "log.cleanup.policy=compact,log.cleaner.min.cleanable.ratio=0.01")

    def compacted():
        cons = Consumer({"bootstrap.servers": bootstrap(c), "group.id": f"g-{time.time()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        try:
            lo, hi = cons.get_watermark_offsets(TopicPartition("dyn", 0), timeout=10)
            cons.assign([TopicPartition("dyn", 0, 0)])
            seen = 0
            while True:
                m = cons.poll(5)
                if m is None or m.error():
                    break
                seen += 1
                if m.offset() >= hi - 1:
                    break
            return lo == lo0 and seen < (hi - lo) / 2
        finally:
            cons.close()
    H.wait_for(compacted, 30, "the existing log compacted under the dynamic cleanup.policy", interval=1.0)

    # back to delete with a 1 ms dynamic retention: the old segments go on both replicas
    gregorctl(c, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
              "log.cleanup.policy=delete,log.retention.ms=1")
    for bid in (1, 2):
        H.wait_for(lambda bid=bid: len(log_segments(c, bid, "dyn")) == 1, 20,
                   f"dynamic log.retention.ms deleted old segments on broker {bid}", interval=0.3)
