"""A modern client against a 3-broker cluster: @platformatic/kafka 1.35.0 (pure JavaScript, Kafka
3.5+ protocol versions only), pinned in tests/modern_client/package-lock.json and installed by
scripts/setup.sh. Each case runs tests/modern_client/client.mjs once and asserts its JSON answer;
data it writes is checked with confluent-kafka and ZooKeeper, and the other way round.

Which versions the client needs per API: docs/PROTOCOL.md, "What a modern client needs". It
negotiates the top version of each API, Fetch v17 by topic id included (test_consume_*).
"""

import json
import os
import shutil
import subprocess
import uuid

import pytest

import gregor_harness as H

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLIENT_DIR = os.path.join(ROOT, "tests", "modern_client")
SCRIPT = os.path.join(CLIENT_DIR, "client.mjs")
# a complete install: npm writes node_modules/.package-lock.json last (an interrupted one lacks it)
INSTALLED = (os.path.isdir(os.path.join(CLIENT_DIR, "node_modules", "@platformatic", "kafka")) and
             os.path.isfile(os.path.join(CLIENT_DIR, "node_modules", ".package-lock.json")))


def node_new_enough():
    """@platformatic/kafka 1.35.0 needs Node >= 20.19.4 (its "engines"); npm only warns below it."""
    if not shutil.which("node"):
        return False
    try:
        out = subprocess.run(["node", "-p", "process.versions.node"], capture_output=True, text=True,
                             timeout=60).stdout.strip()
        return tuple(int(x) for x in out.split(".")[:3]) >= (20, 19, 4)
    except (OSError, ValueError, subprocess.SubprocessError):
        return False


pytestmark = pytest.mark.skipif(
    not (INSTALLED and node_new_enough()),
    reason="@platformatic/kafka is not installed or Node is older than 20.19.4 "
           "(scripts/setup.sh installs it when npm can reach its registry)")

AUTH = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",
}


@pytest.fixture(scope="module")
def cl(zk_server, tmp_path_factory):
    """One 3-broker cluster (with the ACL authorizer, ANONYMOUS a super user) for the module."""
    root = H.kazoo_client(zk_server.hosts)
    chroot = f"/gregor-modern-client-{uuid.uuid4().hex[:6]}"
    try:
        root.ensure_path(chroot)
    finally:
        H.close_kazoo(root)
    c = H.Cluster(str(tmp_path_factory.mktemp("modern")), zk_server.hosts + chroot, n=3, config=AUTH)
    try:
        c.start()
        c.bootstrap = ",".join(b.address for b in c.brokers.values())
        yield c
    finally:
        c.close()


def run(cl, case, **args):
    """Run one case of client.mjs; its JSON answer. The timeout only guards against a hang."""
    p = subprocess.run(["node", SCRIPT, case, cl.bootstrap, json.dumps(args)], cwd=CLIENT_DIR,
                       capture_output=True, text=True, timeout=120)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    assert p.returncode == 0 and lines, f"client.mjs {case}: rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    return json.loads(lines[-1])


def result(cl, case, **args):
    r = run(cl, case, **args)
    assert r["ok"], r
    return r["result"]


def ck_create(cl, topic, partitions=3, rf=2):
    a = AdminClient({"bootstrap.servers": cl.bootstrap})
    a.create_topics([NewTopic(topic, partitions, rf)])[topic].result()
    H.wait_for(lambda: topic in a.list_topics(timeout=5).topics and
               all(p.leader >= 0 for p in a.list_topics(timeout=5).topics[topic].partitions.values()),
               what=f"{topic} has leaders")


def ck_values(cl, topic, n, isolation="read_uncommitted"):
    c = Consumer({"bootstrap.servers": cl.bootstrap, "group.id": f"ck-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": isolation})
    c.subscribe([topic])
    got = []
    try:
        def more():
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value().decode())
            return len(got) >= n
        H.wait_for(more, what=f"{n} records of {topic}")
    finally:
        c.close()
    return sorted(got)


# ---- admin ----

def test_create_topic(cl):
    r = result(cl, "create_topic", topic="pk-created")
    assert r["partitions"] == 3
    assert json.loads(cl.zk.get("/brokers/topics/pk-created")[0])["partitions"].keys() == {"0", "1", "2"}


def test_delete_topic(cl):
    ck_create(cl, "pk-doomed")
    r = result(cl, "delete_topic", topic="pk-doomed")
    assert r["listed"] is False
    H.wait_for(lambda: not cl.zk.exists("/brokers/topics/pk-doomed"), what="pk-doomed deleted")


def test_alter_and_describe_configs(cl):
    ck_create(cl, "pk-configs")
    r = result(cl, "configs", topic="pk-configs")
    (res,) = r["afterAlter"]
    assert (res["resourceType"], res["resourceName"]) == (2, "pk-configs")
    assert [(c["name"], c["value"]) for c in res["configs"]] == [("retention.ms", "3600000")]
    (res,) = r["afterIncr"]
    # IncrementalAlterConfigs keeps what AlterConfigs set and adds cleanup.policy
    assert sorted((c["name"], c["value"]) for c in res["configs"]) == [
        ("cleanup.policy", "compact"), ("retention.ms", "3600000")]
    assert r["unknown"] == "Describing configs failed."   # UNKNOWN_TOPIC_OR_PARTITION, as the client words it
    assert json.loads(cl.zk.get("/config/topics/pk-configs")[0])["config"] == {
        "retention.ms": "3600000", "cleanup.policy": "compact"}


def test_client_quotas(cl):
    r = result(cl, "quotas", user="pk-user")
    assert [(e["entity"], e["values"]) for e in r["described"]] == [
        ([{"entityType": "user", "entityName": "pk-user"}], [{"key": "consumer_byte_rate", "value": 2048}])]
    # removed again by the client
    H.wait_for(lambda: not cl.zk.exists("/config/users/pk-user") or
               json.loads(cl.zk.get("/config/users/pk-user")[0])["config"] == {}, what="quota removed")


def test_acls(cl):
    r = result(cl, "acls", topic="pk-acl-topic")
    described = sorted((x["resourceType"], x["resourceName"], [a["operation"] for a in x["acls"]])
                       for x in r["described"])
    assert described == [(2, "pk-acl-topic", [3]), (7, "User:bob", [13])]
    assert sorted((d["resourceType"], d["resourceName"], d["operation"]) for d in r["deleted"]) == [
        (2, "pk-acl-topic", 3), (7, "User:bob", 13)]
    assert r["after"] == []
    assert not cl.zk.exists("/kafka-acl/User/User:bob")


def test_describe_cluster_and_api_versions(cl):
    r = result(cl, "describe_cluster")
    c = r["cluster"]
    assert c["errorCode"] == 0 and c["endpointType"] == 1
    assert c["clusterId"] == json.loads(cl.zk.get("/cluster/id")[0])["id"]
    assert c["controllerId"] == cl.controller_id()
    assert sorted((b["brokerId"], b["port"]) for b in c["brokers"]) == sorted(
        (b.id, b.port) for b in cl.brokers.values())
    assert c["clusterAuthorizedOperations"] > 0   # ANONYMOUS is a super user
    keys = {k["apiKey"]: (k["minVersion"], k["maxVersion"]) for k in r["apiKeys"]}
    assert keys[60] == (0, 1) and keys[18] == (0, 4) and keys[33] == (0, 2) and keys[49] == (0, 1)


# ---- data ----

def test_produce(cl):
    ck_create(cl, "pk-produce")
    r = result(cl, "produce", topic="pk-produce", count=6)
    assert sorted((o["partition"], int(o["offset"])) for o in r["offsets"]) == [(0, 0), (1, 0), (2, 0)] or \
        len(r["offsets"]) == 3
    assert ck_values(cl, "pk-produce", 6) == [f"v{i}" for i in range(6)]


def test_consume_through_a_group_with_commits(cl):
    ck_create(cl, "pk-consume")
    result(cl, "produce", topic="pk-consume", count=6)
    r = result(cl, "consume_group", topic="pk-consume", group="pk-group", count=6)
    assert r["values"] == [f"v{i}" for i in range(6)]
    # it fetched at the top version, by topic id (the brokers' metrics files are written periodically)
    v17 = "RequestsPerSec,request=FetchConsumer,version=17"
    H.wait_for(lambda: any((H.find_metric(b.metrics(), v17) or 0) > 0 for b in cl.brokers.values()),
               what="a FetchConsumer v17 counted by a broker")
    # the commits are the group's: confluent-kafka reads them back
    c = Consumer({"bootstrap.servers": cl.bootstrap, "group.id": "pk-group"})
    try:
        got = c.committed([TopicPartition("pk-consume", p) for p in range(3)], timeout=10)
        assert sorted(tp.offset for tp in got) == [2, 2, 2]
    finally:
        c.close()


def test_transaction(cl):
    ck_create(cl, "pk-txn", partitions=1)
    r = result(cl, "transaction", topic="pk-txn", txn="pk-txn-id")
    assert r["done"] is True
    assert ck_values(cl, "pk-txn", 1, isolation="read_committed") == ["committed"]
