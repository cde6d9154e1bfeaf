"""Batched admin work against real gregord processes (issue 14):

  - CreateTopics of many topics in one request, one name already taken and one leftover
    /config/topics/T without its topic: TOPIC_ALREADY_EXISTS for the taken name only, every other
    topic created with its config (the leftover's config overwritten), leaders everywhere;
  - one AlterPartitionReassignments moving every partition of three topics: all complete, and
    each /brokers/topics/T is rewritten once for phase U and at most once per completion event
    (the per-partition controller wrote it twice per partition).
"""

import json
import os

import pytest

import gregor_harness as H

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

CONFIG = {
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "auto.leader.rebalance.enable": "false",
}


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running())


def jget(cluster, path):
    return cluster.get_json(path)[0]


def state(cluster, topic, p):
    return jget(cluster, f"/brokers/topics/{topic}/partitions/{p}/state") or {}


def test_create_many_topics_one_taken(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG)
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic("taken", 1, 1)], operation_timeout=20)["taken"].result(timeout=30)
    before = jget(cluster, "/brokers/topics/taken")
    # a config left behind without its topic (AdminZkClient overwrites it)
    cluster.zk.create("/config/topics/leftover", json.dumps(
        {"version": 1, "config": {"retention.ms": "1"}}).encode(), makepath=True)
    names = [f"many-{i:03d}" for i in range(60)] + ["leftover"]
    topics = [NewTopic(n, 2, 2, config={"cleanup.policy": "compact"}) for n in names]
    topics.insert(30, NewTopic("taken", 3, 1))
    futs = admin.create_topics(topics, operation_timeout=60, request_timeout=90)
    with pytest.raises(KafkaException) as e:
        futs["taken"].result(timeout=90)
    assert e.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS
    for n in names:
        futs[n].result(timeout=90)
    assert jget(cluster, "/brokers/topics/taken") == before
    for n in names:
        a = jget(cluster, f"/brokers/topics/{n}")
        assert sorted(a["partitions"]) == ["0", "1"] and all(len(r) == 2 for r in a["partitions"].values())
        assert jget(cluster, f"/config/topics/{n}")["config"] == {"cleanup.policy": "compact"}
    md = admin.list_topics(timeout=30)
    for n in names:
        assert n in md.topics and all(p.leader >= 0 for p in md.topics[n].partitions.values())


def test_reassign_many_partitions_across_topics(cluster_factory, zk_connect, tmp_path):
    cluster = cluster_factory(zk_connect, n=4, config=CONFIG)
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    topics, per = ["ra", "rb", "rc"], 8
    futs = admin.create_topics([NewTopic(t, per, replica_assignment=[[1, 2] if p % 2 == 0 else [2, 1]
                                                                     for p in range(per)]) for t in topics],
                               operation_timeout=30, request_timeout=40)
    for f in futs.values():
        f.result(timeout=40)
    for t in topics:
        for p in range(per):
            H.wait_for(lambda: sorted(state(cluster, t, p).get("isr", [])) == [1, 2], 30, f"{t}-{p} full ISR")
    # gregorctl asks the first running broker: wait until its metadata cache has the topics
    one = AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.running()[0].port}"})
    H.wait_for(lambda: all(t in one.list_topics(timeout=10).topics for t in topics), 30, "topics in metadata")
    versions = {t: cluster.zk.get(f"/brokers/topics/{t}")[1].version for t in topics}
    target = {p: [3, 4] if p % 2 == 0 else [4, 3] for p in range(per)}
    f = os.path.join(str(tmp_path), "reassign.json")
    with open(f, "w") as fh:
        json.dump({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r}
                                                for t in topics for p, r in target.items()]}, fh)
    first = next(f"127.0.0.1:{b.port}" for b in cluster.running())
    r = H.run_gregorctl(cluster.zk_connect, "--bootstrap-server", first, "--timeout-ms", "30000",
                        "reassign", "execute", "--reassignment-json-file", f, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr

    def done():
        for t in topics:
            a = jget(cluster, f"/brokers/topics/{t}")
            if a.get("adding_replicas") or a.get("removing_replicas"):
                return False
            if {int(k): v for k, v in a["partitions"].items()} != target:
                return False
        return True
    H.wait_for(done, 90, "every reassignment complete")
    for t in topics:
        for p in range(per):
            H.wait_for(lambda: sorted(state(cluster, t, p).get("isr", [])) == [3, 4]
                       and state(cluster, t, p).get("leader") in (3, 4), 30, f"{t}-{p} on 3,4")
        # phase U: one write for the topic; phase B: at most one per completion event. The old
        # controller wrote the topic znode once per partition in each phase (2 x per).
        grew = cluster.zk.get(f"/brokers/topics/{t}")[1].version - versions[t]
        assert 2 <= grew <= per + 1, (t, grew)
    assert cluster.zk.exists("/admin/reassign_partitions") is None
    r = H.run_gregorctl(cluster.zk_connect, "--bootstrap-server", first, "--timeout-ms", "30000",
                        "reassign", "list", timeout=60)
    assert r.returncode == 0 and ": replicas:" not in r.stdout, r.stdout
