"""Topic ids (KIP-516) in ZooKeeper mode, as Kafka 2.8-3.9 keep them, against real gregord processes:

  - every topic's /brokers/topics/T is version 3 with a "topic_id" Uuid: generated at creation
    (CreateTopics, auto-creation), given by the controller to a topic written without one (as a
    2.7 broker or a tool writes it), and never changed by a broker restart, a controller
    failover or a reassignment (which rewrites the znode);
  - each partition directory holds partition.metadata ("version: 0", "topic_id: <id>") with the
    znode's id;
  - a topic deleted and re-created with the same name while one of its old replicas' broker is
    away: when that broker returns, its stale log (the old topic's id) is moved aside into a
    "<topic>-<partition>.<hex>-stray" directory (kept, never loaded or served, also after a restart
    and after a crash right after the rename) and its replica of the new topic starts empty and
    fetches from the leader: it serves only the new topic's records (Fetch, ListOffsets);
  - no log is ever deleted for an id mismatch: a topic znode rewritten without its id (a Kafka 2.7
    tool) or with another one gets its id back from the active controller, every record stays
    served; rewritten while no controller runs, the next controller takes the id kept in
    /brokers/topics/T/partitions (the stamp) and nothing moves; only when that copy holds no id
    too does the topic get a new id, and every replica's data is moved aside (recoverable by the
    operator: docs/STORAGE.md), never deleted; a topic znode deleted by hand and written again
    gets a new id; an unreadable partition.metadata keeps the log in place, not served;
  - control requests at the new versions with hostile topic ids are answered, not crashed on.
"""

import base64
import glob
import json
import os
import time
import uuid

import pytest

import gregor_harness as H
import kafka_codec as K

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

CONFIG = {
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "500",
    "auto.leader.rebalance.enable": "false",
}


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running() if not b.paused)


def jget(cluster, path):
    return cluster.get_json(path)[0]


def state(cluster, topic, p):
    return jget(cluster, f"/brokers/topics/{topic}/partitions/{p}/state") or {}


def znode_id(cluster, topic):
    a = jget(cluster, f"/brokers/topics/{topic}") or {}
    if a.get("version") != 3:
        return None
    return a.get("topic_id")


def uuid_of(text):
    """Kafka's Uuid.fromString."""
    raw = base64.urlsafe_b64decode(text + "==")
    assert len(raw) == 16
    return uuid.UUID(bytes=raw)


def create(cluster, topic, assign):
    """CreateTopics v5 with an explicit assignment; waits for leaders and full ISRs."""
    body = {"Topics": [{"Name": topic, "NumPartitions": -1, "ReplicationFactor": -1,
                        "Assignments": [{"PartitionIndex": p, "BrokerIds": reps} for p, reps in enumerate(assign)]}],
            "timeoutMs": 30000}
    r = {}

    def created():  # CreateTopics goes to the controller (NOT_CONTROLLER elsewhere)
        nonlocal r
        r = K.call(cluster[cluster.controller_id()].port, 19, 5, body)
        return r["Topics"][0]["ErrorCode"] != 41
    H.wait_for(created, 30, "CreateTopics at the controller")
    assert r["Topics"][0]["ErrorCode"] == 0, r
    for p, reps in enumerate(assign):
        H.wait_for(lambda: sorted(state(cluster, topic, p).get("isr", [])) == sorted(
            b for b in reps if cluster[b].running()), 40, f"{topic}-{p} ISR")


def produce(cluster, topic, p, values):
    pr = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "message.timeout.ms": 30000})
    for v in values:
        pr.produce(topic, v.encode(), partition=p)
    assert pr.flush(40) == 0


def consume_from(port, topic, p, want, timeout=30):
    c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": f"g-{time.time()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0)])
    got = []
    deadline = time.time() + timeout
    while len(got) < want and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    c.close()
    return got


def partition_dir(broker, topic, p):
    return os.path.join(broker.logdir, f"{topic}-{p}")


def read_partition_metadata(broker, topic, p):
    path = os.path.join(partition_dir(broker, topic, p), "partition.metadata")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f.read()


def dir_bytes(path):
    data = b""
    for f in sorted(glob.glob(os.path.join(path, "*.log"))):
        with open(f, "rb") as fh:
            data += fh.read()
    return data


def wait_id_files(cluster, topic, assign, want_id):
    for p, reps in enumerate(assign):
        for b in reps:
            H.wait_for(lambda: read_partition_metadata(cluster[b], topic, p) == f"version: 0\ntopic_id: {want_id}\n",
                       30, f"partition.metadata of {topic}-{p} on broker {b}")


def test_ids_at_creation_survive_restart_failover_and_reassignment(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=4, config=CONFIG)
    assign = [[1, 2, 3], [2, 3, 1]]
    create(cluster, "ids", assign)
    tid = znode_id(cluster, "ids")
    assert tid and len(tid) == 22 and not tid.startswith("-"), jget(cluster, "/brokers/topics/ids")
    assert uuid_of(tid).version == 4
    produce(cluster, "ids", 0, [f"a{i}" for i in range(5)])
    produce(cluster, "ids", 1, [f"b{i}" for i in range(5)])
    wait_id_files(cluster, "ids", assign, tid)

    # auto-creation (Metadata) gets an id the same way
    produce(cluster, "auto-ids", 0, ["x"])
    H.wait_for(lambda: znode_id(cluster, "auto-ids") is not None, 20, "auto-created topic's id")
    assert znode_id(cluster, "auto-ids") != tid

    # restart every broker: the ids stay, in ZooKeeper and on disk, and the data is served
    cluster.stop()
    cluster.start()
    for p in range(2):
        H.wait_for(lambda: len(state(cluster, "ids", p).get("isr", [])) == 3, 40, "ISR after restart")
    assert znode_id(cluster, "ids") == tid
    wait_id_files(cluster, "ids", assign, tid)
    assert consume_from(cluster[1].port, "ids", 0, 5) == [f"a{i}" for i in range(5)]

    # controller failover keeps it
    old = cluster.controller_id()
    cluster[old].kill()
    H.wait_for(lambda: cluster.controller_id() not in (None, old), 30, "new controller")
    assert znode_id(cluster, "ids") == tid
    cluster[old].start()
    cluster.wait_registered()

    # a reassignment rewrites the znode: the id stays, and the new replica's directory holds it
    cluster.zk.create("/admin/reassign_partitions", json.dumps(
        {"version": 1, "partitions": [{"topic": "ids", "partition": 0, "replicas": [4, 2, 3]}]}).encode())
    H.wait_for(lambda: cluster.zk.exists("/admin/reassign_partitions") is None, 60, "reassignment done")
    a = jget(cluster, "/brokers/topics/ids")
    assert a["partitions"]["0"] == [4, 2, 3] and a["topic_id"] == tid and a["version"] == 3
    H.wait_for(lambda: read_partition_metadata(cluster[4], "ids", 0) == f"version: 0\ntopic_id: {tid}\n", 30,
               "partition.metadata on the reassignment's new replica")


def test_controller_gives_an_id_to_a_topic_written_without_one(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG)
    # as a Kafka 2.7 broker (or a tool) writes it: version 2, no topic_id
    cluster.zk.ensure_path("/config/topics")
    cluster.zk.create("/config/topics/legacy", json.dumps({"version": 1, "config": {}}).encode())
    cluster.zk.create("/brokers/topics/legacy", json.dumps(
        {"version": 2, "partitions": {"0": [1, 2, 3]}, "adding_replicas": {}, "removing_replicas": {}}).encode())
    H.wait_for(lambda: znode_id(cluster, "legacy") is not None, 30, "id given by the controller")
    tid = znode_id(cluster, "legacy")
    a = jget(cluster, "/brokers/topics/legacy")
    assert a["partitions"] == {"0": [1, 2, 3]}
    H.wait_for(lambda: len(state(cluster, "legacy", 0).get("isr", [])) == 3, 30, "legacy ISR")
    produce(cluster, "legacy", 0, ["l0", "l1"])
    wait_id_files(cluster, "legacy", [[1, 2, 3]], tid)
    # the next controller finds it set and keeps it
    old = cluster.controller_id()
    cluster[old].kill()
    H.wait_for(lambda: cluster.controller_id() not in (None, old), 30, "new controller")
    time.sleep(1)
    assert znode_id(cluster, "legacy") == tid


def stray_dirs(broker, topic, p):
    return sorted(glob.glob(os.path.join(broker.logdir, f"{topic}-{p}.*-stray")))


def with_metrics_listener(broker):
    """Gives the broker a metrics listener (taken at its next start)."""
    broker.config["gregor.metrics.listener"] = f"http://127.0.0.1:{H.free_port()}"


def stray_metric(broker):
    """gregor.log:type=LogManager,name=StrayLogs of the broker's (one) log dir, scraped."""
    import urllib.request
    url = broker.config["gregor.metrics.listener"] + "/metrics"
    for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
        if line.startswith("gregor_log_logmanager_straylogs{"):
            return float(line.split()[-1])
    return None


def test_recreated_topic_while_replica_away_serves_only_new_data(cluster_factory, zk_connect, monkeypatch):
    cluster = cluster_factory(zk_connect, n=3, config=dict(CONFIG, **{"delete.topic.enable": "true"}))
    create(cluster, "rc", [[1, 2]])
    old_id = znode_id(cluster, "rc")
    old_values = [f"OLD-RECORD-{i}" for i in range(10)]
    produce(cluster, "rc", 0, old_values)
    H.wait_for(lambda: b"OLD-RECORD-9" in dir_bytes(partition_dir(cluster[2], "rc", 0)), 30, "replicated to 2")
    old_bytes = dir_bytes(partition_dir(cluster[2], "rc", 0))
    # broker 2 goes away with its replica; the partition moves to [1, 3]; the topic is deleted
    # (its replicas are all live, so the deletion completes) and created again on [1, 2]
    cluster[2].stop()
    cluster.zk.create("/admin/reassign_partitions", json.dumps(
        {"version": 1, "partitions": [{"topic": "rc", "partition": 0, "replicas": [1, 3]}]}).encode())
    H.wait_for(lambda: cluster.zk.exists("/admin/reassign_partitions") is None, 60, "reassignment done")
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.delete_topics(["rc"], operation_timeout=30)["rc"].result(timeout=40)
    H.wait_for(lambda: cluster.zk.exists("/brokers/topics/rc") is None and
               not cluster.zk.exists("/admin/delete_topics/rc"), 60, "deletion done")
    create(cluster, "rc", [[1, 2]])
    new_id = znode_id(cluster, "rc")
    assert new_id and new_id != old_id
    produce(cluster, "rc", 0, ["NEW-0", "NEW-1", "NEW-2"])
    # the old log is still on broker 2's disk, under the old id
    assert read_partition_metadata(cluster[2], "rc", 0) == f"version: 0\ntopic_id: {old_id}\n"

    # broker 2 returns and dies right after renaming the stale log aside (crash hook): the next
    # start finds the stray directory (skipped) and no log of rc-0, and creates it under the new id
    monkeypatch.setenv("GREGOR_TEST_STRAY_CRASH", "moved")
    with_metrics_listener(cluster[2])
    cluster[2].start()
    assert cluster[2].wait_exit(60) is not None, "broker 2 did not crash at the hook"
    monkeypatch.delenv("GREGOR_TEST_STRAY_CRASH")
    assert "GREGOR_TEST_STRAY_CRASH=moved" in cluster[2].log()
    strays = stray_dirs(cluster[2], "rc", 0)
    assert len(strays) == 1 and not os.path.exists(partition_dir(cluster[2], "rc", 0)), os.listdir(cluster[2].logdir)
    cluster[2].start()
    cluster.wait_registered()
    H.wait_for(lambda: sorted(state(cluster, "rc", 0).get("isr", [])) == [1, 2], 40, "broker 2 back in the ISR")
    H.wait_for(lambda: read_partition_metadata(cluster[2], "rc", 0) == f"version: 0\ntopic_id: {new_id}\n", 30,
               "broker 2's replica under the new id")
    assert f"Stray log {strays[0]}" in cluster[2].log()
    # the old records are kept, untouched, in the stray directory only (never deleted, never served)
    assert stray_dirs(cluster[2], "rc", 0) == strays
    assert dir_bytes(strays[0]) == old_bytes
    with open(os.path.join(strays[0], "partition.metadata")) as f:
        assert f.read() == f"version: 0\ntopic_id: {old_id}\n"
    assert not glob.glob(os.path.join(cluster[2].logdir, "rc-0.*-delete"))
    H.wait_for(lambda: b"NEW-2" in dir_bytes(partition_dir(cluster[2], "rc", 0)), 30, "new records on broker 2")
    assert b"OLD-RECORD" not in dir_bytes(partition_dir(cluster[2], "rc", 0))
    H.wait_for(lambda: stray_metric(cluster[2]) == 1, 30, "StrayLogs gauge on broker 2")

    def leads_and_serves_only_new():
        H.wait_for(lambda: state(cluster, "rc", 0).get("leader") == 2, 30, "broker 2 leads")

        def end_offset():
            lo = K.call(cluster[2].port, 2, 5, {"ReplicaId": -1, "IsolationLevel": 0, "Topics": [
                {"Name": "rc", "Partitions": [{"PartitionIndex": 0, "CurrentLeaderEpoch": -1, "Timestamp": -1}]}]})
            part = lo["Topics"][0]["Partitions"][0]
            return part["Offset"] if part["ErrorCode"] == 0 else None
        assert H.wait_for(lambda: end_offset() is not None, 30, "broker 2 serves rc-0 as leader") and end_offset() == 3
        assert consume_from(cluster[2].port, "rc", 0, 3, timeout=20) == ["NEW-0", "NEW-1", "NEW-2"]

    # broker 2 leads and serves only the new topic's records
    cluster[1].stop()
    leads_and_serves_only_new()
    # ... also after a restart: the stray directory survives it and is not loaded
    cluster[2].stop()
    cluster[2].start()
    cluster.wait_registered([2, 3])
    assert f"Stray log {strays[0]} (another topic id than its partition's) is kept and not loaded" in cluster[2].log()
    leads_and_serves_only_new()
    assert stray_dirs(cluster[2], "rc", 0) == strays and dir_bytes(strays[0]) == old_bytes
    cluster[1].start()
    cluster.wait_registered()


def rewrite_topic_znode(cluster, topic, topic_id=None, partitions=None):
    """/brokers/topics/T as a Kafka 2.7 tool writes it (kafka-topics --zookeeper --alter): version 2
    without topic_id, or version 3 with the given one."""
    cur = jget(cluster, f"/brokers/topics/{topic}")
    body = {"version": 2, "partitions": partitions or cur["partitions"], "adding_replicas": {},
            "removing_replicas": {}}
    if topic_id:
        body = dict(body, version=3, topic_id=topic_id)
    cluster.zk.set(f"/brokers/topics/{topic}", json.dumps(body).encode())


def no_stray_anywhere(cluster):
    return not any(glob.glob(os.path.join(b.logdir, "*-stray")) for b in cluster.running())


def test_rewrite_without_id_keeps_the_id_and_the_data(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG)
    create(cluster, "rw", [[1, 2, 3]])
    tid = znode_id(cluster, "rw")
    values = [f"rw{i}" for i in range(20)]
    produce(cluster, "rw", 0, values)
    wait_id_files(cluster, "rw", [[1, 2, 3]], tid)
    ctl = cluster[cluster.controller_id()]
    # a 2.7 tool rewrites the znode without the id: the controller writes the known id back
    rewrite_topic_znode(cluster, "rw")
    H.wait_for(lambda: znode_id(cluster, "rw") == tid, 30, "id written back")
    assert "was rewritten without its topic id" in ctl.log()
    # ... also when the rewrite adds a partition (kafka-topics --alter --partitions 2)
    rewrite_topic_znode(cluster, "rw", partitions={"0": [1, 2, 3], "1": [2, 3, 1]})
    H.wait_for(lambda: znode_id(cluster, "rw") == tid, 30, "id written back with the new partition")
    assert jget(cluster, "/brokers/topics/rw")["partitions"] == {"0": [1, 2, 3], "1": [2, 3, 1]}
    H.wait_for(lambda: len(state(cluster, "rw", 1).get("isr", [])) == 3, 30, "new partition's ISR")
    for b in (1, 2, 3):  # the producer must see partition 1 (else librdkafka fails the record at once)
        H.wait_for(lambda: len(md(cluster[b].port, 12, [{"Name": "rw"}])["Topics"][0]["Partitions"]) == 2, 30,
                   f"partition rw-1 in broker {b}'s metadata")
    produce(cluster, "rw", 1, ["p1"])  # a log's directory (and partition.metadata) comes with its first record
    wait_id_files(cluster, "rw", [[1, 2, 3], [2, 3, 1]], tid)
    # a znode rewritten with ANOTHER id: the known one is written back, with an ERROR
    other = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    rewrite_topic_znode(cluster, "rw", topic_id=other)
    H.wait_for(lambda: znode_id(cluster, "rw") == tid, 30, "the known id written back over another")
    assert jget(cluster, "/brokers/topics/rw")["partitions"] == {"0": [1, 2, 3], "1": [2, 3, 1]}
    assert f"was rewritten with topic id {other}, but the topic's id is {tid}" in ctl.log()
    produce(cluster, "rw", 0, ["after"])
    # every acknowledged record still served and on every replica's disk; nothing moved aside
    assert consume_from(cluster[1].port, "rw", 0, 21) == values + ["after"]
    for b in (1, 2, 3):
        assert read_partition_metadata(cluster[b], "rw", 0) == f"version: 0\ntopic_id: {tid}\n"
        assert b"rw19" in dir_bytes(partition_dir(cluster[b], "rw", 0))
    assert no_stray_anywhere(cluster)
    # the next controller finds the id in place
    old = cluster.controller_id()
    cluster[old].kill()
    H.wait_for(lambda: cluster.controller_id() not in (None, old), 30, "new controller")
    cluster[old].start()
    cluster.wait_registered()
    H.wait_for(lambda: len(state(cluster, "rw", 0).get("isr", [])) == 3, 40, "ISR after the failover")
    assert znode_id(cluster, "rw") == tid and no_stray_anywhere(cluster)

    # a torn partition.metadata (power loss) is not "another id": the log stays in place, unserved
    cluster[3].stop()
    pm = os.path.join(partition_dir(cluster[3], "rw", 0), "partition.metadata")
    with open(pm, "w") as f:
        f.write("version: 0\ntopic_")
    cluster[3].start()
    cluster.wait_registered()
    H.wait_for(lambda: "rw-0: its partition.metadata cannot be read" in cluster[3].log(), 30, "storage error")
    assert 3 not in state(cluster, "rw", 0).get("isr", [])
    assert b"rw19" in dir_bytes(partition_dir(cluster[3], "rw", 0)) and no_stray_anywhere(cluster)


def stamp_id(cluster, topic):
    """The id /brokers/topics/T/partitions (the standby stamp) carries, None when empty."""
    data, _ = cluster.zk.get(f"/brokers/topics/{topic}/partitions")
    return json.loads(data)["topic_id"] if data else None


def test_rewrite_without_id_while_no_controller_keeps_the_id(cluster_factory, zk_connect):
    """/brokers/topics/T rewritten without its id (a Kafka 2.7 tool) while no controller runs:
    the next controller finds the id in /brokers/topics/T/partitions (the stamp, which Kafka's
    tools never write) and writes it back instead of a new one; every replica keeps its log in
    place, every record stays served, nothing is moved aside."""
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG)
    create(cluster, "away", [[1, 2, 3]])
    tid = znode_id(cluster, "away")
    assert stamp_id(cluster, "away") == tid
    values = [f"away{i}" for i in range(15)]
    produce(cluster, "away", 0, values)
    wait_id_files(cluster, "away", [[1, 2, 3]], tid)
    cluster.stop()
    rewrite_topic_znode(cluster, "away")
    assert znode_id(cluster, "away") is None and stamp_id(cluster, "away") == tid
    cluster.start()
    H.wait_for(lambda: znode_id(cluster, "away") is not None, 30, "an id from the new controller")
    assert znode_id(cluster, "away") == tid
    ctl = cluster[cluster.controller_id()]
    assert f"restoring its id {tid} from /brokers/topics/away/partitions" in ctl.log()
    H.wait_for(lambda: len(state(cluster, "away", 0).get("isr", [])) == 3, 40, "ISR after the restart")
    assert stamp_id(cluster, "away") == tid
    assert consume_from(cluster[state(cluster, "away", 0)["leader"]].port, "away", 0, 15) == values
    for b in (1, 2, 3):
        assert read_partition_metadata(cluster[b], "away", 0) == f"version: 0\ntopic_id: {tid}\n"
        assert b"away14" in dir_bytes(partition_dir(cluster[b], "away", 0))
    assert no_stray_anywhere(cluster)


def test_rewrite_without_id_and_stamp_while_no_controller_moves_data_aside(cluster_factory, zk_connect):
    """The residual case (docs/STORAGE.md): /brokers/topics/T rewritten without its id while no
    controller runs AND its stamp (/brokers/topics/T/partitions) holds no id -- here a malformed
    one (WARN, taken as none). The next controller cannot know the lost id and gives the topic a
    new one (as Kafka does); every replica moves its log of the old id aside (nothing deleted from
    disk) and the partition starts empty. The operator's recovery (STORAGE.md) brings the records
    back."""
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG)
    create(cluster, "away", [[1, 2, 3]])
    tid = znode_id(cluster, "away")
    values = [f"away{i}" for i in range(15)]
    produce(cluster, "away", 0, values)
    wait_id_files(cluster, "away", [[1, 2, 3]], tid)
    for b in (1, 2, 3):
        H.wait_for(lambda: b"away14" in dir_bytes(partition_dir(cluster[b], "away", 0)), 30, f"data on {b}")
    before = {b: dir_bytes(partition_dir(cluster[b], "away", 0)) for b in (1, 2, 3)}
    cluster.stop()
    for b in (1, 2, 3):
        with_metrics_listener(cluster[b])
    rewrite_topic_znode(cluster, "away")
    cluster.zk.set("/brokers/topics/away/partitions", b'{"topic_id":"not-a-uuid"}')
    cluster.start()
    H.wait_for(lambda: znode_id(cluster, "away") not in (None, tid), 30, "a new id from the new controller")
    nid = znode_id(cluster, "away")
    assert "/brokers/topics/away/partitions holds data that is no topic id stamp" in \
        cluster[cluster.controller_id()].log()
    H.wait_for(lambda: stamp_id(cluster, "away") == nid, 30, "the new id in the stamp")
    H.wait_for(lambda: len(state(cluster, "away", 0).get("isr", [])) == 3, 40, "ISR under the new id")
    # the documented outcome: the partition is served empty; every replica keeps its old records
    # in a stray directory, byte for byte, under the old id
    lo = K.call(cluster[state(cluster, "away", 0)["leader"]].port, 2, 5, {"ReplicaId": -1, "IsolationLevel": 0,
                "Topics": [{"Name": "away", "Partitions": [{"PartitionIndex": 0, "CurrentLeaderEpoch": -1,
                                                            "Timestamp": -1}]}]})
    assert lo["Topics"][0]["Partitions"][0]["Offset"] == 0, lo
    for b in (1, 2, 3):
        strays = stray_dirs(cluster[b], "away", 0)
        assert len(strays) == 1, os.listdir(cluster[b].logdir)
        assert dir_bytes(strays[0]) == before[b]
        with open(os.path.join(strays[0], "partition.metadata")) as f:
            assert f.read() == f"version: 0\ntopic_id: {tid}\n"
        log = cluster[b].log()
        assert f"away-0: {tid} does not match" in log and nid in log and strays[0] in log
        H.wait_for(lambda: stray_metric(cluster[b]) == 1, 30, f"StrayLogs gauge on broker {b}")
    # the operator's recovery (docs/STORAGE.md): brokers stopped, each stray directory put back in
    # place of the new (empty) one without its partition.metadata: the log adopts the new id
    cluster.stop()
    for b in (1, 2, 3):
        strays = stray_dirs(cluster[b], "away", 0)
        d = partition_dir(cluster[b], "away", 0)
        if os.path.exists(d):
            for f in os.listdir(d):
                os.remove(os.path.join(d, f))
            os.rmdir(d)
        os.remove(os.path.join(strays[0], "partition.metadata"))
        os.rename(strays[0], d)
    cluster.start()
    H.wait_for(lambda: len(state(cluster, "away", 0).get("isr", [])) == 3, 40, "ISR after the recovery")
    wait_id_files(cluster, "away", [[1, 2, 3]], nid)
    assert znode_id(cluster, "away") == nid
    assert consume_from(cluster[1].port, "away", 0, 15) == values


def test_topic_znode_deleted_by_hand_and_written_again_gets_a_new_id(cluster_factory, zk_connect):
    """/brokers/topics/T deleted by hand (zookeeper-shell deleteall: its /partitions stamp goes
    with it) and written again by a Kafka 2.7 tool while no controller runs: another topic of the
    name. The next controller gives it a NEW id -- the earlier topic's id never comes back from
    anywhere -- and the replicas move the earlier topic's logs aside."""
    cluster = cluster_factory(zk_connect, n=2, config=CONFIG)
    create(cluster, "rm", [[1, 2]])
    tid = znode_id(cluster, "rm")
    produce(cluster, "rm", 0, ["old0", "old1"])
    wait_id_files(cluster, "rm", [[1, 2]], tid)
    cluster.stop()
    cluster.zk.delete("/brokers/topics/rm", recursive=True)
    cluster.zk.create("/brokers/topics/rm", json.dumps({"version": 2, "partitions": {"0": [1, 2]},
                                                        "adding_replicas": {}, "removing_replicas": {}}).encode())
    cluster.start()
    H.wait_for(lambda: znode_id(cluster, "rm") is not None, 30, "an id from the new controller")
    nid = znode_id(cluster, "rm")
    assert nid != tid
    H.wait_for(lambda: len(state(cluster, "rm", 0).get("isr", [])) == 2, 40, "ISR of the new topic")
    assert stamp_id(cluster, "rm") == nid
    for b in (1, 2):
        H.wait_for(lambda: len(stray_dirs(cluster[b], "rm", 0)) == 1, 30, f"old log moved aside on {b}")
    assert consume_from(cluster[1].port, "rm", 0, 1, timeout=3) == []


def test_control_requests_with_hostile_topic_ids(cluster_factory, zk_connect):
    """LeaderAndIsr v7 / UpdateMetadata v8 / StopReplica v4 from a client that is not the
    controller, with zero and random topic ids: answered with Kafka's errors; the broker keeps
    serving."""
    cluster = cluster_factory(zk_connect, n=1, config=CONFIG)
    port = cluster[1].port
    create(cluster, "h", [[1]])
    rid = uuid.uuid4()
    lai = K.call(port, 4, 7, {"ControllerId": 9, "ControllerEpoch": 0, "BrokerEpoch": 0, "Type": 0,
                              "TopicStates": [{"TopicName": "h", "TopicId": rid, "PartitionStates": [
                                  {"PartitionIndex": 0, "ControllerEpoch": 0, "Leader": 1, "LeaderEpoch": 0,
                                   "Isr": [1], "PartitionEpoch": 0, "Replicas": [1]}]}],
                              "LiveLeaders": []})
    # a stale controller epoch and broker epoch: refused before any id is looked at
    assert lai["ErrorCode"] != 0 and lai["Topics"][0]["TopicId"] == rid, lai
    um = K.call(port, 6, 8, {"ControllerId": 9, "ControllerEpoch": 0, "BrokerEpoch": 0,
                             "TopicStates": [{"TopicName": "h", "TopicId": uuid.UUID(int=0), "PartitionStates": []}],
                             "LiveBrokers": []})
    assert um["ErrorCode"] != 0
    sr = K.call(port, 5, 4, {"ControllerId": 9, "ControllerEpoch": 0, "BrokerEpoch": 0, "TopicStates": []})
    assert sr["ErrorCode"] != 0
    # still serving, with the topic's id untouched on disk
    produce(cluster, "h", 0, ["still"])
    assert read_partition_metadata(cluster[1], "h", 0) == f"version: 0\ntopic_id: {znode_id(cluster, 'h')}\n"


ACL_CONFIG = dict(CONFIG, **{
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS;User:admin",
    "gregor.test.principal.by.client.id": "true",
})
ZERO = uuid.UUID(int=0)


def md(port, ver, topics, client_id="User:admin", **kw):
    body = {"Topics": topics, "AllowAutoTopicCreation": False}
    body.update(kw)
    return K.call(port, 3, ver, body, client_id=client_id)


def test_client_apis_with_topic_ids(cluster_factory, zk_connect):
    """CreateTopics v7 (TopicId), Metadata v10-12 (ids in answers, v12 by id, UNKNOWN_TOPIC_ID,
    INVALID_REQUEST below v12), DeleteTopics v6 (by id, UNKNOWN_TOPIC_ID, name and id ->
    INVALID_REQUEST), with an authorizer (a principal without ACLs), next to the old versions."""
    cluster = cluster_factory(zk_connect, n=1, config=ACL_CONFIG)
    port = cluster[1].port
    ct = K.call(port, 19, 7, {"Topics": [{"Name": "m1", "NumPartitions": 2, "ReplicationFactor": 1}],
                              "timeoutMs": 20000}, client_id="User:admin")
    (t,) = ct["Topics"]
    assert t["ErrorCode"] == 0 and t["NumPartitions"] == 2, ct
    tid = t["TopicId"]
    assert tid != ZERO and tid == uuid_of(znode_id(cluster, "m1"))
    again = K.call(port, 19, 7, {"Topics": [{"Name": "m1", "NumPartitions": 2, "ReplicationFactor": 1},
                                            {"Name": "m2", "NumPartitions": 1, "ReplicationFactor": 1}],
                                 "validateOnly": True}, client_id="User:admin")
    assert again["Topics"][0]["ErrorCode"] == 36 and again["Topics"][0]["TopicId"] == ZERO  # TOPIC_ALREADY_EXISTS
    assert again["Topics"][1]["ErrorCode"] == 0 and again["Topics"][1]["TopicId"] == ZERO  # validate only
    assert znode_id(cluster, "m2") is None
    old = K.call(port, 19, 6, {"Topics": [{"Name": "m3", "NumPartitions": 1, "ReplicationFactor": 1}],
                               "timeoutMs": 20000}, client_id="User:admin")
    assert old["Topics"][0]["ErrorCode"] == 0
    denied = K.call(port, 19, 7, {"Topics": [{"Name": "m4", "NumPartitions": 1, "ReplicationFactor": 1}]},
                    client_id="User:alice")
    assert denied["Topics"][0]["ErrorCode"] == 29 and denied["Topics"][0]["TopicId"] == ZERO

    # Metadata: the id once the controller's UpdateMetadata carried it
    H.wait_for(lambda: md(port, 12, [{"Name": "m1"}])["Topics"][0]["TopicId"] == tid, 20, "id in the metadata cache")
    for ver in (10, 11, 12):
        r = md(port, ver, [{"Name": "m1"}, {"Name": "nope"}])
        by = {x["Name"]: x for x in r["Topics"]}
        assert by["m1"]["ErrorCode"] == 0 and by["m1"]["TopicId"] == tid and len(by["m1"]["Partitions"]) == 2
        assert by["nope"]["ErrorCode"] == 3 and by["nope"]["TopicId"] == ZERO
    assert md(port, 10, [{"Name": "m1"}], IncludeClusterAuthorizedOperations=True)["ClusterAuthorizedOperations"] > 0
    r9 = md(port, 9, [{"Name": "m1"}])
    assert r9["Topics"][0]["ErrorCode"] == 0 and r9["Topics"][0]["Name"] == "m1"
    every = md(port, 12, None)
    assert {x["Name"]: x["TopicId"] for x in every["Topics"]}["m1"] == tid
    # v12 by id: known, unknown, duplicate; names next to ids are ignored (as Kafka)
    unknown = uuid.uuid4()
    r = md(port, 12, [{"Name": None, "TopicId": tid}, {"Name": None, "TopicId": unknown},
                      {"Name": None, "TopicId": tid}, {"Name": "m3"}])
    assert len(r["Topics"]) == 2, r
    by = {x["TopicId"]: x for x in r["Topics"]}
    assert by[tid]["Name"] == "m1" and by[tid]["ErrorCode"] == 0 and len(by[tid]["Partitions"]) == 2
    assert by[unknown]["ErrorCode"] == 100 and by[unknown]["Name"] is None  # UNKNOWN_TOPIC_ID
    # below v12: no ids, no null names
    bad = md(port, 11, [{"Name": "m1", "TopicId": tid}])
    assert bad["Topics"][0]["ErrorCode"] == 42 and bad["Brokers"] == []  # INVALID_REQUEST
    bad = md(port, 10, [{"Name": None}])
    assert bad["Topics"][0]["ErrorCode"] == 42
    # a principal that may not describe: by id -> TOPIC_AUTHORIZATION_FAILED, name withheld
    r = md(port, 12, [{"Name": None, "TopicId": tid}], client_id="User:alice")
    assert r["Topics"][0]["ErrorCode"] == 29 and r["Topics"][0]["Name"] is None and r["Topics"][0]["TopicId"] == tid
    r = md(port, 12, [{"Name": "m1"}], client_id="User:alice")
    assert r["Topics"][0]["ErrorCode"] == 29 and r["Topics"][0]["TopicId"] == ZERO

    # DeleteTopics v6
    both = K.call(port, 20, 6, {"Topics": [{"Name": "m1", "TopicId": tid}, {"Name": "m3"}], "TimeoutMs": 5000},
                  client_id="User:admin")
    assert [x["ErrorCode"] for x in both["Responses"]] == [42, 42], both
    assert znode_id(cluster, "m1") is not None
    r = K.call(port, 20, 6, {"Topics": [{"Name": None, "TopicId": tid}], "TimeoutMs": 5000}, client_id="User:alice")
    assert r["Responses"][0]["ErrorCode"] == 29 and r["Responses"][0]["Name"] is None
    r = K.call(port, 20, 6, {"Topics": [{"Name": None, "TopicId": tid}, {"Name": None, "TopicId": unknown}],
                             "TimeoutMs": 20000}, client_id="User:admin")
    assert r["Responses"][0]["ErrorCode"] == 0 and r["Responses"][0]["Name"] == "m1" and r["Responses"][0]["TopicId"] == tid
    assert r["Responses"][1]["ErrorCode"] == 100 and r["Responses"][1]["TopicId"] == unknown
    H.wait_for(lambda: cluster.zk.exists("/brokers/topics/m1") is None, 30, "m1 deleted")
    H.wait_for(lambda: md(port, 12, [{"Name": None, "TopicId": tid}])["Topics"][0]["ErrorCode"] == 100, 20,
               "deleted topic's id unknown")
    r5 = K.call(port, 20, 5, {"TopicNames": ["m3"], "TimeoutMs": 20000}, client_id="User:admin")
    assert r5["Responses"][0]["ErrorCode"] == 0

    # a truncated Metadata v12 frame closes the connection; the broker keeps serving
    frame = K.encode_request(3, 12, {"Topics": [{"Name": None, "TopicId": tid}]})
    import socket
    s = socket.create_connection(("127.0.0.1", port))
    cut = frame[4:-10]
    s.sendall(len(cut).to_bytes(4, "big") + cut)
    s.settimeout(10)
    assert s.recv(100) == b""
    s.close()
    assert md(port, 12, None)["Brokers"][0]["NodeId"] == 1


def test_upgrade_from_2_7_protocol_gives_ids_to_existing_logs(cluster_factory, zk_connect):
    """inter.broker.protocol.version 2.7-IV2 (a cluster mid-way through a rolling upgrade from
    brokers without topic ids): topics are written without ids, the control requests stay at 2.7's
    versions and no partition.metadata is written. Raising it to 3.9-IV0 broker by broker: the
    controller gives the topic an id, and the logs written before (no partition.metadata) adopt it
    and keep their data."""
    cluster = cluster_factory(zk_connect, n=3, config=dict(CONFIG, **{"inter.broker.protocol.version": "2.7-IV2"}))
    create(cluster, "up", [[1, 2, 3]])
    produce(cluster, "up", 0, [f"u{i}" for i in range(4)])
    assert jget(cluster, "/brokers/topics/up")["version"] == 2
    for b in (1, 2, 3):
        H.wait_for(lambda: b"u3" in dir_bytes(partition_dir(cluster[b], "up", 0)), 30, f"data on broker {b}")
        assert read_partition_metadata(cluster[b], "up", 0) is None
    assert "api_key=4 v7" not in cluster[cluster.controller_id()].log(whole=True)
    # the rolling bump
    cluster.config["inter.broker.protocol.version"] = "3.9-IV0"
    for b in (1, 2, 3):
        cluster[b].stop()
        cluster[b].start()
        cluster.wait_registered()
        H.wait_for(lambda: len(state(cluster, "up", 0).get("isr", [])) == 3, 40, f"ISR after restarting {b}")
    # a controller running 3.9-IV0 gives the topic its id (at the latest at its failover)
    old = cluster.controller_id()
    cluster[old].stop()
    cluster[old].start()
    cluster.wait_registered()
    H.wait_for(lambda: znode_id(cluster, "up") is not None, 30, "id given by the controller")
    tid = znode_id(cluster, "up")
    wait_id_files(cluster, "up", [[1, 2, 3]], tid)
    produce(cluster, "up", 0, ["after"])
    assert consume_from(cluster[1].port, "up", 0, 5) == [f"u{i}" for i in range(4)] + ["after"]


def test_delete_by_id_of_a_name_whose_znode_holds_another_id(cluster_factory, zk_connect, tmp_path, monkeypatch):
    """DeleteTopics v6 resolves an id through this broker's metadata cache, which lags the topic
    znode (a topic deleted and re-created under the same name, a client retrying its delete by
    the old id). The znode's id decides: another id there -> UNKNOWN_TOPIC_ID, nothing deleted.
    The cache is made to lag here by giving the znode another id behind the controller's back
    while the controller's write-back of the id it knows is held (test hook
    GREGOR_TEST_TOPIC_ID_RESTORE_PAUSE); once let go, the controller writes the known id back."""
    pause = os.path.join(str(tmp_path), "restore-pause")
    monkeypatch.setenv("GREGOR_TEST_TOPIC_ID_RESTORE_PAUSE", pause)
    cluster = cluster_factory(zk_connect, n=1, config=CONFIG)
    port = cluster[1].port
    ct = K.call(port, 19, 7, {"Topics": [{"Name": "d1", "NumPartitions": 1, "ReplicationFactor": 1}],
                              "timeoutMs": 20000})
    assert ct["Topics"][0]["ErrorCode"] == 0, ct
    old = ct["Topics"][0]["TopicId"]
    H.wait_for(lambda: md(port, 12, [{"Name": "d1"}])["Topics"][0]["TopicId"] == old, 20, "id in the metadata cache")
    a, stat = cluster.get_json("/brokers/topics/d1")
    new = uuid.uuid4()
    a["topic_id"] = base64.urlsafe_b64encode(new.bytes).decode().rstrip("=")
    open(pause, "w").close()
    cluster.zk.set("/brokers/topics/d1", json.dumps(a).encode(), version=stat.version)
    H.wait_for(lambda: "writing back the topic id of d1 paused" in cluster[1].log(), 20, "the write-back held")
    r = K.call(port, 20, 6, {"Topics": [{"Name": None, "TopicId": old}], "TimeoutMs": 5000})
    assert r["Responses"][0]["ErrorCode"] == 100, r  # UNKNOWN_TOPIC_ID
    assert cluster.zk.exists("/admin/delete_topics/d1") is None
    assert znode_id(cluster, "d1") is not None
    os.remove(pause)
    old_text = base64.urlsafe_b64encode(old.bytes).decode().rstrip("=")
    H.wait_for(lambda: znode_id(cluster, "d1") == old_text, 20, "the known id written back")


def test_write_back_never_gives_the_old_id_to_a_topic_created_again(cluster_factory, zk_connect, tmp_path,
                                                                    monkeypatch):
    """The controller writes a known id back into /brokers/topics/T rewritten without it; if,
    before that write lands, T's znode is deleted and created again behind the controller's back
    (an operator clearing a stuck deletion by hand, then creating the topic anew with its own id),
    the write-back must not put the EARLIER topic's id into the new znode: brokers still holding
    the earlier topic's logs under that id would serve them as the new topic's data. The write-back
    is held (GREGOR_TEST_TOPIC_ID_RESTORE_PAUSE) while the znode is replaced."""
    pause = os.path.join(str(tmp_path), "restore-pause")
    monkeypatch.setenv("GREGOR_TEST_TOPIC_ID_RESTORE_PAUSE", pause)
    cluster = cluster_factory(zk_connect, n=1, config=CONFIG)
    port = cluster[1].port
    ct = K.call(port, 19, 7, {"Topics": [{"Name": "rc1", "NumPartitions": 1, "ReplicationFactor": 1}],
                              "timeoutMs": 20000})
    assert ct["Topics"][0]["ErrorCode"] == 0, ct
    old_text = base64.urlsafe_b64encode(ct["Topics"][0]["TopicId"].bytes).decode().rstrip("=")
    H.wait_for(lambda: znode_id(cluster, "rc1") == old_text, 20, "the id in the znode")
    open(pause, "w").close()
    rewrite_topic_znode(cluster, "rc1")  # a 2.7 tool: no id
    H.wait_for(lambda: "writing back the topic id of rc1 paused" in cluster[1].log(), 20, "the write-back held")
    # the znode deleted by hand and created again with another id (the new topic's)
    cluster.zk.delete("/brokers/topics/rc1", recursive=True)
    new_text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    body = {"version": 3, "topic_id": new_text, "partitions": {"0": [1]}, "adding_replicas": {},
            "removing_replicas": {}}
    cluster.zk.create("/brokers/topics/rc1", json.dumps(body).encode())
    os.remove(pause)
    H.wait_for(lambda: "Restored topic id" in cluster[1].log() or "was created again meanwhile" in cluster[1].log(),
               20, "the write-back's decision")
    assert znode_id(cluster, "rc1") == new_text
    assert f"Restored topic id {old_text} of topic rc1" not in cluster[1].log()
