"""Partition reassignment (KIP-455) and leader elections against real gregord processes.

  - reassign an RF 3 topic from brokers 1-3 to 3-5 (and 4,5,1) under produce load with
    gregorctl reassign execute/verify: every acknowledged record is on the new replicas, the
    old replicas' log directories are deleted, /admin state is clean;
  - /admin/reassign_partitions (ZooKeeper path): entries done, znode deleted;
  - cancel mid-way (the added broker is dead, so catch-up cannot finish) restores the original
    replica set; AlterPartitionReassignments validation errors;
  - preferred election after a broker restart (gregorctl elect-leaders and the
    /admin/preferred_replica_election znode), auto leader rebalance with a 5 s check interval;
  - /controller moved by hand (epoch bumped, node deleted) while a reassignment / a preferred
    election is pending: the old controller's guarded writes are refused, the new controller
    finishes the work.
"""

import json
import os
import threading
import time

import pytest

import gregor_harness as H

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

CONFIG = {
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "auto.leader.rebalance.enable": "false",
    "leader.imbalance.check.interval.seconds": "5",
}


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running() if not b.paused)


def jget(cluster, path):
    return cluster.get_json(path)[0]


def state(cluster, topic, p):
    return jget(cluster, f"/brokers/topics/{topic}/partitions/{p}/state") or {}


def assignment(cluster, topic):
    return jget(cluster, f"/brokers/topics/{topic}") or {}


def create(cluster, topic, assign):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic(topic, len(assign), replica_assignment=assign)],
                        operation_timeout=20, request_timeout=30)[topic].result(timeout=40)
    for p in range(len(assign)):
        H.wait_for(lambda: state(cluster, topic, p).get("leader", -1) >= 0, 30, f"{topic}-{p} leader")
        H.wait_for(lambda: sorted(state(cluster, topic, p).get("isr", [])) == sorted(assign[p]), 30,
                   f"{topic}-{p} full ISR")
    # gregorctl asks the first running broker: wait until its metadata cache has the topic
    one = AdminClient({"bootstrap.servers": next(f"127.0.0.1:{b.port}" for b in cluster.running())})

    def known():
        t = one.list_topics(topic, timeout=10).topics.get(topic)
        return t is not None and t.error is None and len(t.partitions) == len(assign)
    H.wait_for(known, 30, f"{topic} in the bootstrap broker's metadata")


def ctl(cluster, *args, timeout=60):
    one = next(f"127.0.0.1:{b.port}" for b in cluster.running() if not b.paused)
    return H.run_gregorctl(cluster.zk_connect, "--bootstrap-server", one, "--timeout-ms", "20000",
                           *args, timeout=timeout)


def write_json(tmp_path, name, obj):
    p = os.path.join(str(tmp_path), name)
    with open(p, "w") as f:
        json.dump(obj, f)
    return p


def reassignment_file(tmp_path, topic, targets):
    return write_json(tmp_path, "reassign.json", {"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r} for p, r in targets.items()]})


def consume_all(cluster, topic, partitions, timeout=60):
    """{partition: [values]} read from the beginning up to the high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": f"check-{time.time()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    out = {}
    try:
        for p in partitions:
            _, hw = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            c.assign([TopicPartition(topic, p, 0)])
            vals = []
            deadline = time.time() + timeout
            while len(vals) < hw and time.time() < deadline:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    vals.append(m.value())
            out[p] = vals
    finally:
        c.close()
    return out


class Load:
    """A producer thread writing (acks=all) to every partition until stopped; remembers acks."""

    def __init__(self, cluster, topic, partitions):
        self.acked = {p: [] for p in partitions}
        self.stop_ev = threading.Event()
        self.t = threading.Thread(target=self.run, args=(cluster, topic, partitions))
        self.t.start()

    def run(self, cluster, topic, partitions):
        p = Producer({"bootstrap.servers": ",".join(f"127.0.0.1:{b.port}" for b in cluster.brokers.values()),
                      "acks": "all", "linger.ms": 5, "message.timeout.ms": 120000})
        i = 0

        def cb(err, msg):
            if err is None:
                self.acked[msg.partition()].append(msg.value())
        while not self.stop_ev.is_set():
            part = partitions[i % len(partitions)]
            try:
                p.produce(topic, f"v{i}".encode(), partition=part, on_delivery=cb)
                i += 1
            except BufferError:
                p.poll(0.05)
            p.poll(0)
            if i % 200 == 0:
                time.sleep(0.01)
        p.flush(120)

    def stop(self):
        self.stop_ev.set()
        self.t.join(150)


def test_reassign_under_load(cluster_factory, zk_connect, tmp_path):
    cluster = cluster_factory(zk_connect, n=5, config=CONFIG)
    create(cluster, "mv", [[1, 2, 3], [2, 3, 1]])
    load = Load(cluster, "mv", [0, 1])
    try:
        time.sleep(2)
        f = reassignment_file(tmp_path, "mv", {0: [3, 4, 5], 1: [4, 5, 1]})
        r = ctl(cluster, "reassign", "execute", "--reassignment-json-file", f)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "Successfully started partition reassignments for mv-0,mv-1" in r.stdout
        assert "Current partition replica assignment" in r.stdout

        def done():
            v = ctl(cluster, "reassign", "verify", "--reassignment-json-file", f)
            return v.returncode == 0 and v.stdout.count("is complete.") == 2
        H.wait_for(done, 90, "reassignment complete (verify)", interval=1)
        time.sleep(1)
    finally:
        load.stop()
    a = assignment(cluster, "mv")
    assert a["partitions"] == {"0": [3, 4, 5], "1": [4, 5, 1]}
    assert not a.get("adding_replicas") and not a.get("removing_replicas")
    assert state(cluster, "mv", 0)["leader"] in (3, 4, 5)
    assert state(cluster, "mv", 1)["leader"] in (4, 5, 1)
    assert cluster.zk.exists("/admin/reassign_partitions") is None
    # old replicas removed from disk, new ones present
    H.wait_for(lambda: not any(os.path.exists(os.path.join(cluster[b].logdir, "mv-0")) for b in (1, 2)), 30,
               "mv-0 deleted on brokers 1 and 2")
    H.wait_for(lambda: not any(os.path.exists(os.path.join(cluster[b].logdir, "mv-1")) for b in (2, 3)), 30,
               "mv-1 deleted on brokers 2 and 3")
    for b in (3, 4, 5):
        assert os.path.isdir(os.path.join(cluster[b].logdir, "mv-0"))
    # every acknowledged record is readable (from the new replica set)
    got = consume_all(cluster, "mv", [0, 1])
    for p in (0, 1):
        assert len(load.acked[p]) > 0
        s = set(got[p])
        missing = [v for v in load.acked[p] if v not in s]
        assert not missing, f"partition {p}: {len(missing)} acknowledged records missing"
    # the new replicas' logs have the same size (all caught up)
    def sizes(p, brokers):
        out = []
        for b in brokers:
            d = os.path.join(cluster[b].logdir, f"mv-{p}")
            out.append(sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d) if x.endswith(".log")))
        return out
    H.wait_for(lambda: len(set(sizes(0, (3, 4, 5)))) == 1, 30, "identical log sizes on 3,4,5")
    r = ctl(cluster, "reassign", "list")
    assert "No partition reassignments found." in r.stdout


def test_zk_reassignment_and_generate(cluster_factory, zk_connect, tmp_path):
    cluster = cluster_factory(zk_connect, n=4, config=CONFIG)
    create(cluster, "zk", [[1, 2], [2, 1]])
    gen = write_json(tmp_path, "topics.json", {"version": 1, "topics": [{"topic": "zk"}]})
    r = ctl(cluster, "reassign", "generate", "--topics-to-move-json-file", gen, "--broker-list", "3,4")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    cur = json.loads(lines[1])
    assert cur["partitions"][0] == {"topic": "zk", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}
    assert lines[3] == "Proposed partition reassignment configuration"
    prop = json.loads(lines[4])
    assert all(sorted(p["replicas"]) == [3, 4] for p in prop["partitions"])
    cluster.zk.create("/admin/reassign_partitions", json.dumps(
        {"version": 1, "partitions": [{"topic": "zk", "partition": p["partition"], "replicas": p["replicas"]}
                                      for p in prop["partitions"]]}).encode(), makepath=True)
    H.wait_for(lambda: cluster.zk.exists("/admin/reassign_partitions") is None, 60, "znode deleted")
    a = assignment(cluster, "zk")
    assert {k: sorted(v) for k, v in a["partitions"].items()} == {"0": [3, 4], "1": [3, 4]}
    # a reassignment of an unknown partition is dropped from the znode; the watch was re-armed
    cluster.zk.create("/admin/reassign_partitions", json.dumps(
        {"version": 1, "partitions": [{"topic": "nope", "partition": 0, "replicas": [1]}]}).encode())
    H.wait_for(lambda: cluster.zk.exists("/admin/reassign_partitions") is None, 30, "unknown entry dropped")


def test_cancel_restores_original_and_validation(cluster_factory, zk_connect, tmp_path):
    cluster = cluster_factory(zk_connect, n=5, config=CONFIG)
    dead = 4 if cluster.controller()["brokerid"] != 4 else 5
    create(cluster, "cx", [[1, 2, 3]])
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all"})
    for i in range(500):
        p.produce("cx", f"r{i}".encode(), partition=0)
    p.flush(30)
    # validation errors
    bad = reassignment_file(tmp_path, "cx", {0: [1, 1, 2]})
    r = ctl(cluster, "reassign", "execute", "--reassignment-json-file", bad)
    assert r.returncode != 0
    bad = reassignment_file(tmp_path, "cx", {0: [1, 2, 9]})
    r = ctl(cluster, "reassign", "execute", "--reassignment-json-file", bad)
    assert r.returncode == 1 and "INVALID_REPLICA_ASSIGNMENT" in r.stderr, r.stderr
    f = reassignment_file(tmp_path, "cx", {0: [1, 2, dead]})
    r = ctl(cluster, "reassign", "cancel", "--reassignment-json-file", f)
    assert "None of the specified partition reassignments are active." in r.stdout
    # the added broker dies right away: the reassignment cannot complete
    cluster[dead].kill()
    r = ctl(cluster, "reassign", "execute", "--reassignment-json-file", f)
    assert r.returncode == 0, r.stdout + r.stderr
    a = assignment(cluster, "cx")
    assert a["partitions"]["0"] == [1, 2, dead, 3] and a["adding_replicas"] == {"0": [dead]}
    assert a["removing_replicas"] == {"0": [3]}
    v = ctl(cluster, "reassign", "verify", "--reassignment-json-file", f)
    assert "Reassignment of partition cx-0 is still in progress." in v.stdout and v.returncode == 1
    r = ctl(cluster, "reassign", "list")
    assert f"cx-0: replicas: 1,2,{dead},3. adding: {dead}. removing: 3." in r.stdout, r.stdout
    r = ctl(cluster, "reassign", "cancel", "--reassignment-json-file", f)
    assert r.returncode == 0 and "Successfully cancelled partition reassignment for: cx-0" in r.stdout, r.stdout
    a = assignment(cluster, "cx")
    assert a["partitions"]["0"] == [1, 2, 3]
    assert not a.get("adding_replicas") and not a.get("removing_replicas")
    st = state(cluster, "cx", 0)
    assert st["leader"] in (1, 2, 3) and dead not in st["isr"]
    assert set(consume_all(cluster, "cx", [0])[0]) == {f"r{i}".encode() for i in range(500)}
    # cancelling again: nothing in progress
    r = ctl(cluster, "reassign", "cancel", "--reassignment-json-file", f)
    assert "None of the specified partition reassignments are active." in r.stdout


def leaders(cluster, topic, n):
    return [state(cluster, topic, p).get("leader") for p in range(n)]


ASSIGN6 = [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 3, 2], [2, 1, 3], [3, 2, 1]]
PREFERRED6 = [r[0] for r in ASSIGN6]


def restart_broker_1(cluster):
    cluster[1].stop()
    H.wait_for(lambda: all(l != 1 for l in leaders(cluster, "pe", 6)), 30, "leaders moved off broker 1")
    cluster[1].start()
    H.wait_for(lambda: all(1 in state(cluster, "pe", p).get("isr", []) for p in range(6)), 60,
               "broker 1 back in every ISR")
    assert leaders(cluster, "pe", 6) != PREFERRED6


def test_preferred_election_after_restart(cluster_factory, zk_connect, tmp_path):
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG)
    create(cluster, "pe", ASSIGN6)
    restart_broker_1(cluster)
    r = ctl(cluster, "elect-leaders", "--election-type", "preferred", "--topic", "pe", "--partition", "1")
    assert r.returncode == 0 and "Valid replica already elected for partitions pe-1" in r.stdout, r.stdout
    r = ctl(cluster, "elect-leaders", "--election-type", "preferred", "--all-topic-partitions")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Successfully completed leader election (PREFERRED) for partitions" in r.stdout
    assert "pe-0" in r.stdout and "pe-3" in r.stdout
    assert leaders(cluster, "pe", 6) == PREFERRED6
    r = ctl(cluster, "elect-leaders", "--election-type", "preferred", "--all-topic-partitions")
    assert r.returncode == 0 and "Successfully" not in r.stdout
    # JSON file, unknown partition, unclean election not needed
    f = write_json(tmp_path, "el.json", {"partitions": [{"topic": "pe", "partition": 0}, {"topic": "pe", "partition": 9}]})
    r = ctl(cluster, "elect-leaders", "--election-type", "unclean", "--path-to-json-file", f)
    assert r.returncode == 1
    assert "pe-9: UNKNOWN_TOPIC_OR_PARTITION" in r.stdout and "Valid replica already elected for partitions pe-0" in r.stdout
    # ZooKeeper trigger
    restart_broker_1(cluster)
    cluster.zk.create("/admin/preferred_replica_election", json.dumps(
        {"version": 1, "partitions": [{"topic": "pe", "partition": p} for p in range(6)]}).encode(), makepath=True)
    H.wait_for(lambda: leaders(cluster, "pe", 6) == PREFERRED6, 30, "preferred leaders (znode)")
    H.wait_for(lambda: cluster.zk.exists("/admin/preferred_replica_election") is None, 30, "znode deleted")


def test_auto_leader_rebalance(cluster_factory, zk_connect):
    cfg = dict(CONFIG)
    cfg["auto.leader.rebalance.enable"] = "true"
    cluster = cluster_factory(zk_connect, n=3, config=cfg)
    create(cluster, "pe", ASSIGN6)
    cluster[1].stop()
    H.wait_for(lambda: all(l != 1 for l in leaders(cluster, "pe", 6)), 30, "leaders moved off broker 1")
    cluster[1].start()
    H.wait_for(lambda: leaders(cluster, "pe", 6) == PREFERRED6, 60, "auto rebalance restored preferred leaders",
               interval=0.5)


def move_controller_by_hand(cluster, trigger):
    """Bumps /controller_epoch (fencing the current controller), runs trigger(), which makes
    the old controller attempt a guarded write (refused; it then resigns and elects again by
    itself, seeing its election is no longer the last one), then deletes /controller so the
    brokers elect again whoever holds it. Returns (old controller id, old epoch)."""
    old = cluster.controller()["brokerid"]
    data, _ = cluster.zk.get("/controller_epoch")
    epoch = int(data.decode())
    cluster.zk.set("/controller_epoch", str(epoch + 1).encode())
    trigger()
    H.wait_for(lambda: "Controller moved to another broker when processing" in cluster[old].log(), 20,
               "old controller refused")
    cluster.zk.delete("/controller")
    H.wait_for(lambda: (cluster.controller() or {}).get("brokerid") is not None and (cluster.controller_epoch()[0] or 0) > epoch + 1,
               30, "a new controller")
    return old, epoch


def test_controller_moved_during_reassignment(cluster_factory, zk_connect, tmp_path):
    cluster = cluster_factory(zk_connect, n=5, config=CONFIG)
    dead = 4 if cluster.controller()["brokerid"] != 4 else 5
    create(cluster, "cm", [[1, 2, 3], [1, 2, 3]])
    cluster[dead].kill()
    f = reassignment_file(tmp_path, "cm", {0: [2, 3, dead]})
    r = ctl(cluster, "reassign", "execute", "--reassignment-json-file", f)
    assert r.returncode == 0, r.stdout + r.stderr
    assert assignment(cluster, "cm")["adding_replicas"] == {"0": [dead]}

    def zk_reassign_p1():
        cluster.zk.create("/admin/reassign_partitions", json.dumps(
            {"version": 1, "partitions": [{"topic": "cm", "partition": 1, "replicas": [3, 2, 1]}]}).encode(),
            makepath=True)
    move_controller_by_hand(cluster, zk_reassign_p1)
    cluster[dead].start()
    H.wait_for(lambda: assignment(cluster, "cm").get("partitions") == {"0": [2, 3, dead], "1": [3, 2, 1]}, 60,
               "both reassignments finished by the new controller")
    H.wait_for(lambda: cluster.zk.exists("/admin/reassign_partitions") is None, 30, "znode deleted")
    a = assignment(cluster, "cm")
    assert not a.get("adding_replicas") and not a.get("removing_replicas")


def test_controller_moved_during_preferred_election(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG)
    create(cluster, "pe", ASSIGN6)
    restart_broker_1(cluster)

    def zk_elect():
        cluster.zk.create("/admin/preferred_replica_election", json.dumps(
            {"version": 1, "partitions": [{"topic": "pe", "partition": p} for p in range(6)]}).encode(),
            makepath=True)
    move_controller_by_hand(cluster, zk_elect)
    H.wait_for(lambda: leaders(cluster, "pe", 6) == PREFERRED6, 30, "the new controller elected preferred leaders")
    H.wait_for(lambda: cluster.zk.exists("/admin/preferred_replica_election") is None, 30, "znode deleted")
