"""AlterPartition v0-v3 (key 56) against real gregord processes, as Kafka 3.9's ZooKeeper-mode
controller serves it (KafkaController.tryProcessAlterPartition):

  - requests sent straight to the controller's broker with kafka_codec, as the partition's leader
    would (its BrokerId and current broker epoch = the czxid of /brokers/ids/<id>): v3 (topic id,
    NewIsrWithEpochs) accepted, a member with a stale broker epoch -> INELIGIBLE_REPLICA with the
    ISR znode untouched (KIP-903), an unknown topic id -> UNKNOWN_TOPIC_ID, an older leader epoch
    -> FENCED_LEADER_EPOCH, an older partition epoch -> INVALID_UPDATE_VERSION, a newer one ->
    NOT_CONTROLLER, LeaderRecoveryState RECOVERING -> INVALID_REQUEST, a dead member ->
    INELIGIBLE_REPLICA (v2+) / OPERATION_NOT_ATTEMPTED (v0-1), v0 by name, a stale BrokerEpoch ->
    STALE_BROKER_EPOCH, any other broker -> NOT_CONTROLLER; malformed and oversized frames close
    the connection and the broker keeps serving;
  - end to end (the brokers' own AlterPartition: v3 at inter.broker.protocol.version 3.9-IV0, v0 at
    3.1): a follower killed and restarted with its log directory wiped rejoins the ISR only once
    caught up, and when the other replicas then die it leads with every record acknowledged under
    acks=all and min.insync.replicas=2.
"""

import os
import shutil
import socket
import struct
import time
import uuid

import pytest

import gregor_harness as H
import kafka_codec as K
from kafka_wire import recv_frame

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from test_topic_ids import create, state, uuid_of, znode_id  # noqa: E402

AP = 56
CONFIG = {
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "500",
    "auto.leader.rebalance.enable": "false",
}


def broker_epoch(cluster, b):
    return cluster.get_json(f"/brokers/ids/{b}")[1].czxid


def state_version(cluster, topic, p):
    return cluster.get_json(f"/brokers/topics/{topic}/partitions/{p}/state")[1].version


def v3_body(cluster, leader, tid, leader_epoch, isr_epochs, partition_epoch, **part):
    pd = {"PartitionIndex": 0, "LeaderEpoch": leader_epoch,
          "NewIsrWithEpochs": [{"BrokerId": b, "BrokerEpoch": e} for b, e in isr_epochs],
          "PartitionEpoch": partition_epoch}
    pd.update(part)
    return {"BrokerId": leader, "BrokerEpoch": broker_epoch(cluster, leader),
            "Topics": [{"TopicId": tid, "Partitions": [pd]}]}


def one(resp):
    assert resp["ErrorCode"] == 0, resp
    assert len(resp["Topics"]) == 1 and len(resp["Topics"][0]["Partitions"]) == 1, resp
    return resp["Topics"][0]["Partitions"][0]


def test_alter_partition_versions_at_the_controller(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG)
    ctrl = cluster.controller_id()
    others = [b for b in (1, 2, 3) if b != ctrl]
    # the leader is not the controller: the requests below come "from" it over the wire
    leader, f1, f2 = others[0], others[1], ctrl
    create(cluster, "ap", [[leader, f1, f2]])
    tid = uuid_of(znode_id(cluster, "ap"))
    port = cluster[ctrl].port
    st = state(cluster, "ap", 0)
    le, ver = st["leader_epoch"], state_version(cluster, "ap", 0)
    ep = {b: broker_epoch(cluster, b) for b in (1, 2, 3)}

    # ApiVersions advertises 0-3
    av = K.call(port, 18, 3, {"ClientSoftwareName": "t", "ClientSoftwareVersion": "1"})
    assert [(k["MinVersion"], k["MaxVersion"]) for k in av["ApiKeys"] if k["ApiKey"] == AP] == [(0, 3)]

    # v3: a member proposed under a stale broker epoch (a previous registration): INELIGIBLE_REPLICA
    r = K.call(port, AP, 3, v3_body(cluster, leader, tid, le, [(leader, ep[leader]), (f2, ep[f2] - 1)], ver))
    assert r["Topics"][0]["TopicId"] == tid
    assert one(r)["ErrorCode"] == 107, r  # INELIGIBLE_REPLICA
    assert state_version(cluster, "ap", 0) == ver and sorted(state(cluster, "ap", 0)["isr"]) == sorted([leader, f1, f2])

    # an unknown topic id: UNKNOWN_TOPIC_ID, the response names the id asked for
    rid = uuid.uuid4()
    r = K.call(port, AP, 3, v3_body(cluster, leader, rid, le, [(leader, -1)], ver))
    assert r["Topics"][0]["TopicId"] == rid and one(r)["ErrorCode"] == 100, r

    # an older leader epoch: FENCED_LEADER_EPOCH
    r = K.call(port, AP, 3, v3_body(cluster, leader, tid, le - 1, [(leader, -1), (f1, -1)], ver))
    assert one(r)["ErrorCode"] == 74, r

    # a newer leader epoch or partition epoch than the controller's: NOT_CONTROLLER (per partition)
    r = K.call(port, AP, 3, v3_body(cluster, leader, tid, le + 1, [(leader, -1), (f1, -1)], ver))
    assert one(r)["ErrorCode"] == 41, r
    r = K.call(port, AP, 3, v3_body(cluster, leader, tid, le, [(leader, -1), (f1, -1)], ver + 1))
    assert one(r)["ErrorCode"] == 41, r

    # RECOVERING (KIP-704): Gregor's partitions are always RECOVERED: INVALID_REQUEST
    r = K.call(port, AP, 3, v3_body(cluster, leader, tid, le, [(leader, -1)], ver, LeaderRecoveryState=1))
    assert one(r)["ErrorCode"] == 42, r
    assert state_version(cluster, "ap", 0) == ver

    # accepted: the shrink to [leader, f1] with current epochs (and -1, "not known")
    r = K.call(port, AP, 3, v3_body(cluster, leader, tid, le, [(leader, ep[leader]), (f1, -1)], ver))
    p = one(r)
    assert r["Topics"][0]["TopicId"] == tid
    assert p["ErrorCode"] == 0 and p["Isr"] == [leader, f1] and p["LeaderId"] == leader, r
    assert p["LeaderEpoch"] == le and p["PartitionEpoch"] == ver + 1 and p["LeaderRecoveryState"] == 0, r
    assert state(cluster, "ap", 0)["isr"] == [leader, f1] and state_version(cluster, "ap", 0) == ver + 1
    # the same again (a retry): answered with the current state, nothing written
    r = K.call(port, AP, 3, v3_body(cluster, leader, tid, le, [(leader, ep[leader]), (f1, -1)], ver))
    assert one(r)["ErrorCode"] == 0 and one(r)["PartitionEpoch"] == ver + 1, r

    # the old partition epoch with another ISR: INVALID_UPDATE_VERSION
    r = K.call(port, AP, 3, v3_body(cluster, leader, tid, le, [(leader, -1)], ver))
    assert one(r)["ErrorCode"] == 95, r

    # v0 (Kafka 2.7's AlterIsr) by name: the expansion back
    body = {"BrokerId": leader, "BrokerEpoch": ep[leader],
            "Topics": [{"TopicName": "ap", "Partitions": [
                {"PartitionIndex": 0, "LeaderEpoch": le, "NewIsr": [leader, f1, f2], "PartitionEpoch": ver + 1}]}]}
    r = K.call(port, AP, 0, body)
    assert r["Topics"][0]["TopicName"] == "ap" and one(r)["ErrorCode"] == 0 and one(r)["Isr"] == [leader, f1, f2], r
    # v1 and v2 carry NewIsr; v2 by id
    body["Topics"][0]["Partitions"][0].update(NewIsr=[leader, f1], PartitionEpoch=ver + 2)
    r = K.call(port, AP, 1, body)
    assert one(r)["ErrorCode"] == 0 and one(r)["PartitionEpoch"] == ver + 3, r
    r = K.call(port, AP, 2, {"BrokerId": leader, "BrokerEpoch": ep[leader], "Topics": [{"TopicId": tid, "Partitions": [
        {"PartitionIndex": 0, "LeaderEpoch": le, "NewIsr": [leader, f1, f2], "PartitionEpoch": ver + 3}]}]})
    assert r["Topics"][0]["TopicId"] == tid and one(r)["ErrorCode"] == 0 and one(r)["PartitionEpoch"] == ver + 4, r

    # a stale BrokerEpoch of the sender: STALE_BROKER_EPOCH, no topics
    b = v3_body(cluster, leader, tid, le, [(leader, -1)], ver + 4)
    b["BrokerEpoch"] -= 1
    r = K.call(port, AP, 3, b)
    assert r["ErrorCode"] == 77 and r["Topics"] == [], r
    # any broker but the controller: NOT_CONTROLLER
    r = K.call(cluster[leader].port, AP, 3, v3_body(cluster, leader, tid, le, [(leader, -1)], ver + 4))
    assert r["ErrorCode"] == 41 and r["Topics"] == [], r

    # a member that is not alive (f1 stopped): INELIGIBLE_REPLICA at v2+, OPERATION_NOT_ATTEMPTED below
    cluster[f1].stop()
    H.wait_for(lambda: f1 not in state(cluster, "ap", 0).get("isr", [f1]), 30, "f1 out of the ISR")
    st = state(cluster, "ap", 0)
    le, ver = st["leader_epoch"], state_version(cluster, "ap", 0)
    assert st["leader"] == leader
    r = K.call(port, AP, 3, v3_body(cluster, leader, tid, le, [(leader, -1), (f2, -1), (f1, -1)], ver))
    assert one(r)["ErrorCode"] == 107, r
    r = K.call(port, AP, 1, {"BrokerId": leader, "BrokerEpoch": ep[leader], "Topics": [{"TopicName": "ap", "Partitions": [
        {"PartitionIndex": 0, "LeaderEpoch": le, "NewIsr": [leader, f2, f1], "PartitionEpoch": ver}]}]})
    assert one(r)["ErrorCode"] == 55, r  # OPERATION_NOT_ATTEMPTED
    assert state_version(cluster, "ap", 0) == ver


def closed(sock):
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_hostile_alter_partition_frames(cluster_factory, zk_connect):
    """Truncated and oversized AlterPartition v3 frames at the controller: the connection is
    closed, nothing is written, and the broker keeps serving (a v3 request after them works).
    Then the topic is deleted and re-created: a request by the old id is UNKNOWN_TOPIC_ID."""
    cluster = cluster_factory(zk_connect, n=1, config=CONFIG)
    port = cluster[1].port
    create(cluster, "h", [[1]])
    tid = uuid_of(znode_id(cluster, "h"))
    ver = state_version(cluster, "h", 0)
    good = K.encode_request(AP, 3, v3_body(cluster, 1, tid, 0, [(1, -1)], ver))
    # 1. truncated: the size prefix says less than the body holds -> the body is cut short
    s = socket.create_connection(("127.0.0.1", port))
    body = good[4:-6]
    s.sendall(struct.pack(">i", len(body)) + body)
    assert closed(s)
    s.close()
    # 2. an array count far beyond the frame (NewIsrWithEpochs of 2^31-2 members, compact: varint)
    hdr_and = good[4:]
    tail = hdr_and.find(struct.pack(">iq", 1, -1))  # the only member (1, epoch -1), after its count
    assert tail > 0 and hdr_and[tail - 1] == 2
    hostile = hdr_and[:tail - 1] + bytes([0xff, 0xff, 0xff, 0xff, 0x07]) + hdr_and[tail:]
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(struct.pack(">i", len(hostile)) + hostile)
    assert closed(s)
    s.close()
    # 3. a frame above socket.request.max.bytes' default (100 MiB) announced
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(struct.pack(">i", 200 * 1024 * 1024) + good[4:40])
    assert closed(s)
    s.close()
    # still serving, nothing written
    assert state_version(cluster, "h", 0) == ver
    r = K.call(port, AP, 3, v3_body(cluster, 1, tid, 0, [(1, -1)], ver))
    assert one(r)["ErrorCode"] == 0 and one(r)["Isr"] == [1], r
    # the topic deleted (and re-created under the same name): its old id is unknown
    d = K.call(port, 20, 6, {"Topics": [{"Name": None, "TopicId": tid}], "TimeoutMs": 30000})
    assert d["Responses"][0]["ErrorCode"] == 0, d
    H.wait_for(lambda: cluster.get_json("/brokers/topics/h")[0] is None, 30, "h's znode deleted")
    r = K.call(port, AP, 3, v3_body(cluster, 1, tid, 0, [(1, -1)], ver))
    assert r["Topics"][0]["TopicId"] == tid and one(r)["ErrorCode"] == 100, r
    create(cluster, "h", [[1]])
    assert uuid_of(znode_id(cluster, "h")) != tid
    r = K.call(port, AP, 3, v3_body(cluster, 1, tid, 0, [(1, -1)], ver))
    assert r["Topics"][0]["TopicId"] == tid and one(r)["ErrorCode"] == 100, r


WIPE_CONFIG = dict(CONFIG, **{"min.insync.replicas": "2", "unclean.leader.election.enable": "false"})


def produce_all(cluster, topic, values):
    pr = Producer({"bootstrap.servers": ",".join(f"127.0.0.1:{b.port}" for b in cluster.running()),
                   "acks": "all", "enable.idempotence": True, "message.timeout.ms": 60000})
    acked = []

    def cb(err, msg):
        if err is None:
            acked.append(msg.value().decode())
    for v in values:
        while True:
            try:
                pr.produce(topic, v.encode(), partition=0, on_delivery=cb)
                break
            except BufferError:
                pr.poll(0.1)
    assert pr.flush(90) == 0
    return acked


@pytest.mark.parametrize("ibp,version", [("3.9-IV0", 3), ("3.1", 0)])
def test_wiped_follower_rejoins_isr_only_caught_up(cluster_factory, zk_connect, ibp, version):
    cluster = cluster_factory(zk_connect, n=3, config=dict(WIPE_CONFIG, **{"inter.broker.protocol.version": ibp}))
    assert f"sends AlterPartition v{version} " in cluster[1].log()
    create(cluster, "wipe", [[1, 2, 3]])
    pad = "x" * 900
    acked = produce_all(cluster, "wipe", [f"a{i}-{pad}" for i in range(1500)])
    assert len(acked) == 1500
    old_epoch = broker_epoch(cluster, 3)

    # follower 3 dies and comes back with an empty disk
    cluster[3].kill()
    H.wait_for(lambda: 3 not in state(cluster, "wipe", 0).get("isr", [3]), 40, "3 out of the ISR")
    shutil.rmtree(cluster[3].logdir)
    os.makedirs(cluster[3].logdir)
    acked += produce_all(cluster, "wipe", [f"b{i}-{pad}" for i in range(500)])
    cluster[3].start()
    H.wait_for(lambda: cluster.get_json("/brokers/ids/3")[0] is not None, 30, "3 registered")
    assert broker_epoch(cluster, 3) != old_epoch
    # more records while it catches up
    acked += produce_all(cluster, "wipe", [f"c{i}-{pad}" for i in range(500)])
    H.wait_for(lambda: 3 in state(cluster, "wipe", 0).get("isr", []), 90, "3 back in the ISR")
    # through the leader's own AlterPartition (v3 at 3.9-IV0, Kafka 2.7's AlterIsr v0 at 3.1)
    assert "ISR updated to 1,2,3" in cluster[1].log(), cluster[1].log()[-3000:]
    # when it rejoined it had everything acknowledged: with 1 and 2 gone it leads with all of it
    cluster[1].kill()
    cluster[2].kill()
    H.wait_for(lambda: state(cluster, "wipe", 0).get("leader") == 3, 60, "3 leads")
    c = Consumer({"bootstrap.servers": f"127.0.0.1:{cluster[3].port}", "group.id": f"g-{time.time()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition("wipe", 0, 0)])
    got = set()
    want = set(acked)

    def all_read():
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.add(m.value().decode())
        return want <= got
    H.wait_for(all_read, 90, "every acknowledged record from broker 3", interval=0)
    c.close()


def test_duplicate_topic_ids_in_one_request(cluster_factory, zk_connect):
    """One v3 request naming a topic id twice: for two different partitions both are applied and
    answered under the id; for the same partition twice (two different ISRs from the same
    partition epoch), at most one is written and the ISR znode holds exactly what the answer
    marked as applied (never both, never one answered NONE and the other written)."""
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG)
    create(cluster, "d", [[1, 2, 3], [1, 2, 3]])
    tid = uuid_of(znode_id(cluster, "d"))
    # every broker answers NOT_CONTROLLER but the controller
    ctrl = cluster.get_json("/controller")[0]["brokerid"]
    port = cluster[ctrl].port
    H.wait_for(lambda: all(state(cluster, "d", p)["isr"] == [1, 2, 3] for p in (0, 1)), 30, "full ISRs")
    s0, s1 = state(cluster, "d", 0), state(cluster, "d", 1)
    assert s0["leader"] == s1["leader"]
    leader = s0["leader"]
    others = [b for b in (1, 2, 3) if b != leader]
    v0, v1 = state_version(cluster, "d", 0), state_version(cluster, "d", 1)

    def pd(p, isr, ver):
        return {"PartitionIndex": p, "LeaderEpoch": state(cluster, "d", p)["leader_epoch"],
                "NewIsrWithEpochs": [{"BrokerId": b, "BrokerEpoch": -1} for b in isr], "PartitionEpoch": ver}
    # two partitions of the topic, each under its own entry of the same id
    body = {"BrokerId": leader, "BrokerEpoch": broker_epoch(cluster, leader),
            "Topics": [{"TopicId": tid, "Partitions": [pd(0, [leader, others[0], others[1]], v0)]},
                       {"TopicId": tid, "Partitions": [pd(1, [leader, others[0], others[1]], v1)]}]}
    r = K.call(port, AP, 3, body)
    assert r["ErrorCode"] == 0 and len(r["Topics"]) == 2, r
    assert [t["TopicId"] for t in r["Topics"]] == [tid, tid], r
    assert [t["Partitions"][0]["PartitionIndex"] for t in r["Topics"]] == [0, 1], r
    assert all(t["Partitions"][0]["ErrorCode"] == 0 for t in r["Topics"]), r
    # the same partition twice, two different shrinks from the same partition epoch
    v0 = state_version(cluster, "d", 0)
    a, b = [leader, others[0]], [leader, others[1]]
    body = {"BrokerId": leader, "BrokerEpoch": broker_epoch(cluster, leader),
            "Topics": [{"TopicId": tid, "Partitions": [pd(0, a, v0)]},
                       {"TopicId": tid, "Partitions": [pd(0, b, v0)]}]}
    r = K.call(port, AP, 3, body)
    assert r["ErrorCode"] == 0 and len(r["Topics"]) == 2, r
    answers = [t["Partitions"][0] for t in r["Topics"]]
    ok = [x for x in answers if x["ErrorCode"] == 0]
    assert len(ok) == 1, r
    assert [x["ErrorCode"] for x in answers if x["ErrorCode"] != 0] == [95], r  # INVALID_UPDATE_VERSION
    st = state(cluster, "d", 0)
    assert st["isr"] == ok[0]["Isr"] and state_version(cluster, "d", 0) == ok[0]["PartitionEpoch"] == v0 + 1, (st, r)
