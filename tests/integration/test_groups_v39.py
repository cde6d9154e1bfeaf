"""Kafka 3.9's group client versions through the wire (kafka_codec at the new top versions, and an
old version next to them), and a librdkafka 2.0.2 consumer in the same group as a JoinGroup v9
member:

  - FindCoordinator v4-v6 (KIP-699 batched CoordinatorKeys; per-key errors, also with one
    coordinator broker dead; share keys)
  - OffsetCommit v9, OffsetFetch v8-v9 (KIP-709 batched Groups, RequireStable)
  - JoinGroup v8 (KIP-800 Reason), v9 (KIP-814 SkipAssignment for a static leader rejoining),
    LeaveGroup v5 (per-member Reason), ListGroups v5 (TypesFilter, GroupType "classic")
  - ACLs: per-key / per-group authorization errors
  - hostile input: counts past the frame, the broker keeps serving
"""

import socket
import struct
import threading

import pytest

import gregor_harness as H
import kafka_codec as K
import kafka_wire as W

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer  # noqa: E402
from kafka.coordinator.protocol import (ConsumerProtocolMemberAssignment,  # noqa: E402
                                        ConsumerProtocolMemberMetadata)

FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP = 10, 8, 9, 11
HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, LIST_GROUPS, METADATA, CREATE_TOPICS = 12, 13, 14, 16, 3, 19
NONE, UNKNOWN_TOPIC_OR_PARTITION, COORDINATOR_NOT_AVAILABLE = 0, 3, 15
TOPIC_AUTH, GROUP_AUTH, TXN_ID_AUTH, INVALID_REQUEST, MEMBER_ID_REQUIRED = 29, 30, 53, 42, 79
PARTS = 6
CONFIG = {"offsets.topic.num.partitions": str(PARTS), "transaction.state.log.num.partitions": str(PARTS),
          "offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3",
          "transaction.state.log.min.isr": "1"}


def java_hash(s):
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def partition_for(key):
    return (java_hash(key) & 0x7FFFFFFF) % PARTS


def leaders(port, topic):
    md = K.call(port, METADATA, 9, {"Topics": [{"Name": topic}], "AllowAutoTopicCreation": False})
    t = md["Topics"][0]
    assert t["ErrorCode"] == 0, t
    return {p["PartitionIndex"]: p["LeaderId"] for p in t["Partitions"]}


def find(port, key_type, keys, version=6, client_id="gregor-test"):
    return K.call(port, FIND_COORDINATOR, version, {"KeyType": key_type, "CoordinatorKeys": keys},
                  client_id=client_id)["Coordinators"]


def wait_coordinators(port, key_type, keys):
    out = []

    def ready():
        out[:] = find(port, key_type, keys)
        return all(c["ErrorCode"] == NONE for c in out)
    H.wait_for(ready, timeout=60, what="coordinators of %r" % keys)
    return out


def create_topic(cluster, name, partitions=3, rf=1):
    """CreateTopics at the controller (found through Metadata), then wait for leaders."""
    port = cluster.brokers[min(cluster.brokers)].port
    out = {}

    def created():
        ctl = K.call(port, METADATA, 9, {"Topics": []})["ControllerId"]
        if ctl not in cluster.brokers:
            return False
        r = K.call(cluster.brokers[ctl].port, CREATE_TOPICS, 5, {"Topics": [
            {"Name": name, "NumPartitions": partitions, "ReplicationFactor": rf}], "timeoutMs": 20000})
        out["e"] = r["Topics"][0]["ErrorCode"]
        return out["e"] in (0, 36)
    H.wait_for(created, timeout=30, what="topic %s created (last error %s)" % (name, out.get("e")))
    def led():
        for b in cluster.brokers.values():
            md = K.call(b.port, METADATA, 9, {"Topics": [{"Name": name}], "AllowAutoTopicCreation": False})
            t = md["Topics"][0]
            if t["ErrorCode"] != 0 or len(t["Partitions"]) != partitions or \
                    any(p["LeaderId"] < 0 for p in t["Partitions"]):
                return False
        return True
    H.wait_for(led, timeout=30, what="every broker knows the leaders of " + name)


def still_serving(port):
    assert K.call(port, 18, 3, {"ClientSoftwareName": "t", "ClientSoftwareVersion": "1"})["ErrorCode"] == 0


@pytest.fixture
def three(cluster_factory, zk_connect):
    return cluster_factory(zk_connect, n=3, config=CONFIG)


def test_find_coordinator_batched_v4_to_v6(three):
    port = three.brokers[1].port
    groups = ["g-%d" % i for i in range(12)]
    txns = ["tx-%d" % i for i in range(12)]
    got = wait_coordinators(port, 0, groups)
    lead = leaders(port, "__consumer_offsets")
    # one Coordinator per key, in request order, each the leader of its partition
    assert [c["Key"] for c in got] == groups
    for c in got:
        assert c["NodeId"] == lead[partition_for(c["Key"])], c
        assert c["Port"] == three.brokers[c["NodeId"]].port and c["Host"] == "127.0.0.1"
        assert c["ErrorMessage"] is None
    assert len({c["NodeId"] for c in got}) > 1, "all keys on one coordinator: the test proves nothing"
    tgot = wait_coordinators(port, 1, txns)
    tlead = leaders(port, "__transaction_state")
    assert [c["Key"] for c in tgot] == txns
    for c in tgot:
        assert c["NodeId"] == tlead[partition_for(c["Key"])], c
    # a group and a transactional id on different coordinators, each answered by its own lookup
    g = next(c for c in got if any(t["NodeId"] != c["NodeId"] for t in tgot))
    t = next(t for t in tgot if t["NodeId"] != g["NodeId"])
    assert find(port, 0, [g["Key"]], 4)[0]["NodeId"] != find(port, 1, [t["Key"]], 4)[0]["NodeId"]
    # v4 and v5 answer as v6; the old single-key form still works next to them
    for v in (4, 5):
        assert find(port, 0, groups[:3], v) == got[:3]
    old = K.call(port, FIND_COORDINATOR, 3, {"Key": groups[0], "KeyType": 0})
    assert (old["ErrorCode"], old["NodeId"], old["Port"]) == (0, got[0]["NodeId"], got[0]["Port"])
    # an empty batch answers nothing; a key repeated is answered twice
    assert find(port, 0, []) == []
    assert [c["NodeId"] for c in find(port, 0, [groups[0], groups[0]])] == [got[0]["NodeId"]] * 2
    # share groups (KIP-932): INVALID_REQUEST below v6, COORDINATOR_NOT_AVAILABLE from v6 (3.9 ZK)
    for c in find(port, 2, ["s1", "s2"], 6):
        assert (c["ErrorCode"], c["NodeId"], c["Host"], c["Port"]) == (COORDINATOR_NOT_AVAILABLE, -1, "", -1)
        assert c["ErrorMessage"] == "COORDINATOR_NOT_AVAILABLE"
    assert [c["ErrorCode"] for c in find(port, 2, ["s1", "s2"], 5)] == [INVALID_REQUEST] * 2
    # an unknown key type fails every key
    assert [(c["Key"], c["ErrorCode"]) for c in find(port, 7, ["a", "b"])] == [("a", 42), ("b", 42)]
    assert K.call(port, FIND_COORDINATOR, 3, {"Key": "a", "KeyType": 7})["ErrorCode"] == INVALID_REQUEST
    still_serving(port)


def test_find_coordinator_hostile_counts(three):
    port = three.brokers[1].port
    wait_coordinators(port, 0, ["g"])
    # CoordinatorKeys claiming 2^31-2 entries in a 40-byte frame: the connection is closed, the
    # broker allocates nothing for it and keeps serving
    frame = bytearray(K.encode_request(FIND_COORDINATOR, 6, {"KeyType": 0, "CoordinatorKeys": ["g"]}))
    # the compact array length (uvarint of count+1) sits right after the KeyType byte
    body = frame[4:]
    at = body.rindex(b"\x02\x02g")  # count 1 -> uvarint 2, then string "g" (len 1 -> 2)
    huge = W.uvarint(0x7FFFFFFF)
    body = body[:at] + huge + body[at + 1:]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        assert W.recv_frame(s, 10) is None
    # a key longer than the frame
    frame = bytearray(K.encode_request(FIND_COORDINATOR, 6, {"KeyType": 0, "CoordinatorKeys": ["ab"]}))
    at = frame.rindex(b"\x03ab")
    frame[at] = 0x7F
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(bytes(frame))
        assert W.recv_frame(s, 10) is None
    still_serving(port)
    assert find(port, 0, ["g"])[0]["ErrorCode"] == NONE


def commit(port, group, topic, offsets, version=9, gen=-1, member=""):
    r = K.call(port, OFFSET_COMMIT, version, {
        "GroupId": group, "GenerationIdOrMemberEpoch": gen, "MemberId": member,
        "Topics": [{"Name": topic, "Partitions": [
            {"PartitionIndex": p, "CommittedOffset": o, "CommittedMetadata": "m%d" % p} for p, o in offsets]}]})
    return {(t["Name"], p["PartitionIndex"]): p["ErrorCode"] for t in r["Topics"] for p in t["Partitions"]}


def coordinator_port(cluster, group):
    c = wait_coordinators(cluster.brokers[1].port, 0, [group])[0]
    port = cluster.brokers[c["NodeId"]].port
    H.wait_for(lambda: K.call(port, OFFSET_FETCH, 8, {"Groups": [{"GroupId": group, "Topics": None}]})
               ["Groups"][0]["ErrorCode"] == NONE, timeout=30, what="group %s loaded" % group)
    return port


def test_offset_commit_v9_and_offset_fetch_v8_v9_batched(three):
    port = three.brokers[1].port
    create_topic(three, "of", 3)
    ga, gb = "ofa", "ofb"
    pa, pb = coordinator_port(three, ga), coordinator_port(three, gb)
    assert commit(pa, ga, "of", [(0, 10), (1, 11)]) == {("of", 0): 0, ("of", 1): 0}
    assert commit(pb, gb, "of", [(2, 22)], version=8) == {("of", 2): 0}
    assert commit(pa, ga, "nosuch", [(0, 1)]) == {("nosuch", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert commit(pa, ga, "of", [(9, 1)]) == {("of", 9): UNKNOWN_TOPIC_OR_PARTITION}
    # both groups on one coordinator to fetch them in one batch (as clients batch per coordinator)
    if pa != pb:
        gb = next(g for g in ("ofb%d" % i for i in range(100)) if coordinator_port(three, g) == pa)
        assert commit(pa, gb, "of", [(2, 22)]) == {("of", 2): 0}
    lead = leaders(port, "__consumer_offsets")
    node = next(i for i, b in three.brokers.items() if b.port == pa)
    n1, n2 = [g for g in ("never-%d" % i for i in range(200)) if lead[partition_for(g)] == node][:2]
    for v in (8, 9):
        body = {"Groups": [
            {"GroupId": ga, "Topics": [{"Name": "of", "PartitionIndexes": [0, 1, 2]}]},
            {"GroupId": gb, "Topics": None},
            {"GroupId": n1, "Topics": [{"Name": "of", "PartitionIndexes": [0]}]},
            {"GroupId": n2, "Topics": None}], "RequireStable": True}
        if v == 9:  # KIP-848 fields: the classic coordinator ignores them
            body["Groups"][0].update(MemberId="m-1", MemberEpoch=5)
        r = K.call(pa, OFFSET_FETCH, v, body)
        g = {x["GroupId"]: x for x in r["Groups"]}
        assert [x["GroupId"] for x in r["Groups"]] == [ga, gb, n1, n2]
        assert all(x["ErrorCode"] == 0 for x in r["Groups"])
        parts = {p["PartitionIndex"]: (p["CommittedOffset"], p["Metadata"], p["ErrorCode"])
                 for p in g[ga]["Topics"][0]["Partitions"]}
        assert parts == {0: (10, "m0", 0), 1: (11, "m1", 0), 2: (-1, "", 0)}
        assert [(t["Name"], [(p["PartitionIndex"], p["CommittedOffset"]) for p in t["Partitions"]])
                for t in g[gb]["Topics"]] == [("of", [(2, 22)])]
        assert [p["CommittedOffset"] for p in g[n1]["Topics"][0]["Partitions"]] == [-1]
        assert g[n2]["Topics"] == []
    # a group this broker does not coordinate: NOT_COORDINATOR for that group only
    other = next(b.port for b in three.brokers.values() if b.port != pa)
    r = K.call(other, OFFSET_FETCH, 8, {"Groups": [{"GroupId": ga, "Topics": None}]})
    assert r["Groups"][0]["ErrorCode"] == 16 and r["Groups"][0]["Topics"] == []
    # the old single-group form still answers
    r = K.call(pa, OFFSET_FETCH, 7, {"GroupId": ga, "Topics": [{"Name": "of", "PartitionIndexes": [1]}]})
    assert r["ErrorCode"] == 0 and r["Topics"][0]["Partitions"][0]["CommittedOffset"] == 11
    # interleaved topics: grouped per topic, topics in first-seen order, partitions in request order
    r = K.call(pa, OFFSET_FETCH, 8, {"Groups": [{"GroupId": ga, "Topics": [
        {"Name": "of", "PartitionIndexes": [1]}, {"Name": "zz", "PartitionIndexes": [4]},
        {"Name": "a", "PartitionIndexes": [3]}, {"Name": "of", "PartitionIndexes": [0]},
        {"Name": "zz", "PartitionIndexes": [2]}]}]})
    assert [(t["Name"], [(p["PartitionIndex"], p["CommittedOffset"]) for p in t["Partitions"]])
            for t in r["Groups"][0]["Topics"]] == [("of", [(1, 11), (0, 10)]), ("zz", [(4, -1), (2, -1)]),
                                                   ("a", [(3, -1)])]
    # the same group fetched all-topics again in one request: each repetition would answer all
    # its offsets again (a response k times the group's offsets); only the first is answered
    r = K.call(pa, OFFSET_FETCH, 8, {"Groups": [{"GroupId": ga, "Topics": None}] * 3 + [
        {"GroupId": ga, "Topics": [{"Name": "of", "PartitionIndexes": [0]}]}, {"GroupId": gb, "Topics": None}]})
    assert [x["ErrorCode"] for x in r["Groups"]] == [0, INVALID_REQUEST, INVALID_REQUEST, 0, 0]
    assert [len(x["Topics"]) for x in r["Groups"]] == [1, 0, 0, 1, 1]
    assert sorted(p["PartitionIndex"] for p in r["Groups"][0]["Topics"][0]["Partitions"]) == [0, 1]
    still_serving(pa)


def meta(topics):
    m = ConsumerProtocolMemberMetadata(0, topics, b"")
    return m.encode()


def join(port, group, version, member="", instance=None, topics=("mix",), reason=None, sock=None,
         session_ms=30000):
    body = {"GroupId": group, "SessionTimeoutMs": session_ms, "RebalanceTimeoutMs": 30000,
            "MemberId": member, "GroupInstanceId": instance, "ProtocolType": "consumer",
            "Protocols": [{"Name": "range", "Metadata": meta(list(topics))}]}
    if version >= 8:
        body["Reason"] = reason
    return K.call(sock or port, JOIN_GROUP, version, body, timeout=40)


def sync(port, group, version, gen, member, assignments=(), instance=None):
    return K.call(port, SYNC_GROUP, version, {
        "GroupId": group, "GenerationId": gen, "MemberId": member, "GroupInstanceId": instance,
        "ProtocolType": "consumer", "ProtocolName": "range",
        "Assignments": [{"MemberId": m, "Assignment": a} for m, a in assignments]}, timeout=40)


def encode_assignment(topics):
    a = ConsumerProtocolMemberAssignment(0, topics, b"")  # kafka-python's encode() needs a live object
    return a.encode()


def assignment(blob):
    a = ConsumerProtocolMemberAssignment.decode(blob)
    return {(t, p) for t, ps in a.assignment for p in ps}


def test_join_group_v9_skip_assignment_for_static_leader(three):
    create_topic(three, "mix", 2)
    g = "static-skip"
    cp = coordinator_port(three, g)
    # a static member needs no MEMBER_ID_REQUIRED round; alone, it leads
    j = join(cp, g, 9, instance="i-1")
    assert j["ErrorCode"] == 0 and j["Leader"] == j["MemberId"] and not j["SkipAssignment"]
    old_id = j["MemberId"]
    blob = encode_assignment([("mix", [0, 1])])
    s = sync(cp, g, 5, j["GenerationId"], old_id, [(old_id, blob)], instance="i-1")
    assert s["ErrorCode"] == 0 and assignment(s["Assignment"]) == {("mix", 0), ("mix", 1)}
    gen = j["GenerationId"]
    # the static leader restarts (unknown member id, same instance, same protocols) with v9:
    # it is told it leads, with the members, and to skip the assignor; no rebalance
    j2 = join(cp, g, 9, instance="i-1", reason="restarted")
    assert j2["ErrorCode"] == 0 and j2["SkipAssignment"] is True
    assert j2["MemberId"] != old_id and j2["Leader"] == j2["MemberId"] and j2["GenerationId"] == gen
    assert [(m["MemberId"], m["GroupInstanceId"]) for m in j2["Members"]] == [(j2["MemberId"], "i-1")]
    s = sync(cp, g, 5, gen, j2["MemberId"], instance="i-1")  # no assignment sent: it keeps its own
    assert s["ErrorCode"] == 0 and assignment(s["Assignment"]) == {("mix", 0), ("mix", 1)}
    # the same at v8: the old leader id is answered, no members, no skip (pre-KIP-814)
    j3 = join(cp, g, 8, instance="i-1", reason="restarted again")
    assert j3["ErrorCode"] == 0 and j3["SkipAssignment"] is False
    assert j3["Leader"] == j2["MemberId"] != j3["MemberId"] and j3["Members"] == []
    lg = K.call(cp, LIST_GROUPS, 5, {"StatesFilter": ["stable"], "TypesFilter": ["Classic"]})
    assert {(x["GroupId"], x["GroupState"], x["GroupType"]) for x in lg["Groups"]} >= {(g, "Stable", "classic")}
    # leave with a reason (v5), per member
    r = K.call(cp, LEAVE_GROUP, 5, {"GroupId": g, "Members": [
        {"MemberId": j3["MemberId"], "GroupInstanceId": "i-1", "Reason": "shutting down"},
        {"MemberId": "nobody", "GroupInstanceId": None, "Reason": None}]})
    assert r["ErrorCode"] == 0
    assert [(m["MemberId"], m["ErrorCode"]) for m in r["Members"]] == [(j3["MemberId"], 0), ("nobody", 25)]


def test_list_groups_v5_filters(three):
    g = "listed"
    cp = coordinator_port(three, g)
    j = join(cp, g, 9, instance="x")
    assert j["ErrorCode"] == 0
    assert sync(cp, g, 5, j["GenerationId"], j["MemberId"], [(j["MemberId"], b"")], instance="x")["ErrorCode"] == 0

    def listed(body, v=5):
        r = K.call(cp, LIST_GROUPS, v, body)
        assert r["ErrorCode"] == 0
        return {x["GroupId"]: (x["GroupState"], x["GroupType"]) for x in r["Groups"]}
    assert listed({})[g] == ("Stable", "classic")
    assert listed({"TypesFilter": ["classic"]})[g] == ("Stable", "classic")
    assert listed({"TypesFilter": ["CLASSIC", "consumer"]})[g] == ("Stable", "classic")
    assert g not in listed({"TypesFilter": ["consumer"]})
    assert g not in listed({"TypesFilter": ["share", "nonsense"]})
    assert listed({"StatesFilter": ["STABLE"]})[g] == ("Stable", "classic")  # case-insensitive (3.9)
    assert g not in listed({"StatesFilter": ["Empty"], "TypesFilter": ["classic"]})
    # v4 (no types) as before; GroupType is not part of it
    assert listed({"StatesFilter": ["Stable"]}, 4)[g] == ("Stable", "")


def test_mixed_librdkafka_and_join_group_v9_members_rebalance(three):
    """A librdkafka 2.0.2 consumer (JoinGroup v5 at most) and a kafka_codec member at JoinGroup v9 /
    SyncGroup v5 / Heartbeat v4 / LeaveGroup v5 share a group: the partitions are split between
    them, and all go back to librdkafka when the v9 member leaves with a reason."""
    create_topic(three, "mix", 4)
    g = "mixed"
    cp = coordinator_port(three, g)
    boot = ",".join("127.0.0.1:%d" % b.port for b in three.brokers.values())
    assigned = []
    c = Consumer({"bootstrap.servers": boot, "group.id": g, "session.timeout.ms": 30000,
                  "heartbeat.interval.ms": 300, "partition.assignment.strategy": "range",
                  "on_commit": lambda *a: None})
    c.subscribe(["mix"], on_assign=lambda cons, ps: assigned.append({(p.topic, p.partition) for p in ps}))
    try:
        H.wait_for(lambda: (c.poll(0.2), assigned and assigned[-1] == {("mix", i) for i in range(4)})[1],
                   timeout=60, what="librdkafka owns every partition")
        s = socket.create_connection(("127.0.0.1", cp), timeout=40)
        j = join(cp, g, 9, sock=s, reason="new member")
        assert j["ErrorCode"] == MEMBER_ID_REQUIRED and j["MemberId"]
        mid = j["MemberId"]
        # the join completes when librdkafka has rejoined; keep it polling meanwhile
        res = {}
        t = threading.Thread(target=lambda: res.update(j=join(cp, g, 9, member=mid, sock=s, reason="again")))
        t.start()
        while t.is_alive():
            c.poll(0.1)
        j = res["j"]
        assert j["ErrorCode"] == 0 and j["MemberId"] == mid and not j["SkipAssignment"]
        assert j["Leader"] != mid and j["Members"] == []  # librdkafka stayed the leader
        res.clear()
        t = threading.Thread(target=lambda: res.update(s=sync(s, g, 5, j["GenerationId"], mid)))
        t.start()
        while t.is_alive():
            c.poll(0.1)
        assert res["s"]["ErrorCode"] == 0
        mine = assignment(res["s"]["Assignment"])
        H.wait_for(lambda: (c.poll(0.2), assigned[-1] | mine == {("mix", i) for i in range(4)})[1],
                   timeout=30, what="librdkafka takes the rest")
        assert mine and not (assigned[-1] & mine), (assigned, mine)
        hb = K.call(s, HEARTBEAT, 4, {"GroupId": g, "GenerationId": j["GenerationId"], "MemberId": mid})
        assert hb["ErrorCode"] == 0
        r = K.call(s, LEAVE_GROUP, 5, {"GroupId": g, "Members": [
            {"MemberId": mid, "GroupInstanceId": None, "Reason": "test done"}]})
        assert r["ErrorCode"] == 0 and r["Members"][0]["ErrorCode"] == 0
        s.close()
        H.wait_for(lambda: (c.poll(0.2), assigned[-1] == {("mix", i) for i in range(4)})[1],
                   timeout=60, what="librdkafka owns every partition again")
    finally:
        c.close()


AUTH = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin", "gregor.test.principal.by.client.id": "true"}


def test_group_versions_authorization(cluster_factory, zk_connect):
    from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             KafkaAdminClient, ResourcePattern, ResourceType)
    cfg = dict(CONFIG, **AUTH)
    cfg.update({"offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1"})
    c = cluster_factory(zk_connect, n=1, config=cfg)
    port = c.brokers[1].port
    create_topic(c, "sec", 1)
    wait_coordinators(port, 0, ["ok"])
    wait_coordinators(port, 1, ["tx-ok"])
    a = KafkaAdminClient(bootstrap_servers="127.0.0.1:%d" % port, client_id="User:admin")
    lit = ACLResourcePatternType.LITERAL
    a.create_acls([ACL("User:alice", "*", op, ACLPermissionType.ALLOW, ResourcePattern(rt, name, lit))
                   for rt, name, op in [(ResourceType.GROUP, "ok", ACLOperation.DESCRIBE),
                                        (ResourceType.GROUP, "ok", ACLOperation.READ),
                                        (ResourceType.TRANSACTIONAL_ID, "tx-ok", ACLOperation.DESCRIBE),
                                        (ResourceType.TOPIC, "sec", ACLOperation.READ)]])
    a.close()
    assert commit(port, "ok", "sec", [(0, 5)]) == {("sec", 0): 0}
    alice = "User:alice"

    def fc(kt, keys, v=6):
        return [(x["Key"], x["ErrorCode"]) for x in find(port, kt, keys, v, client_id=alice)]
    H.wait_for(lambda: fc(0, ["ok"]) == [("ok", 0)], what="ACLs propagated")
    assert fc(0, ["ok", "nope"]) == [("ok", 0), ("nope", GROUP_AUTH)]
    assert fc(1, ["tx-ok", "tx-no"], 4) == [("tx-ok", 0), ("tx-no", TXN_ID_AUTH)]
    # share keys need Cluster CLUSTER_ACTION first
    assert fc(2, ["s"]) == [("s", 31)]
    r = K.call(port, OFFSET_FETCH, 8, {"Groups": [
        {"GroupId": "ok", "Topics": [{"Name": "sec", "PartitionIndexes": [0]},
                                     {"Name": "hidden", "PartitionIndexes": [0]}]},
        {"GroupId": "nope", "Topics": None}]}, client_id=alice)
    ok, nope = r["Groups"]
    assert (nope["GroupId"], nope["ErrorCode"], nope["Topics"]) == ("nope", GROUP_AUTH, [])
    assert ok["ErrorCode"] == 0
    assert {t["Name"]: [(p["CommittedOffset"], p["ErrorCode"]) for p in t["Partitions"]] for t in ok["Topics"]} == \
        {"sec": [(5, 0)], "hidden": [(-1, TOPIC_AUTH)]}
    # an all-topics fetch leaves the topics alice may not describe out
    r = K.call(port, OFFSET_FETCH, 9, {"Groups": [{"GroupId": "ok", "Topics": None}]}, client_id=alice)
    assert [t["Name"] for t in r["Groups"][0]["Topics"]] == ["sec"]
    # JoinGroup v9 without Group READ
    j = K.call(port, JOIN_GROUP, 9, {"GroupId": "nope", "SessionTimeoutMs": 10000, "RebalanceTimeoutMs": 10000,
                                     "MemberId": "", "ProtocolType": "consumer", "Reason": "r",
                                     "Protocols": [{"Name": "range", "Metadata": meta(["sec"])}]}, client_id=alice)
    assert j["ErrorCode"] == GROUP_AUTH
    r = K.call(port, LEAVE_GROUP, 5, {"GroupId": "nope", "Members": [
        {"MemberId": "m", "GroupInstanceId": None, "Reason": "x"}]}, client_id=alice)
    assert r["ErrorCode"] == GROUP_AUTH
    # ListGroups v5 without Cluster DESCRIBE: only groups alice may describe
    lg = K.call(port, LIST_GROUPS, 5, {"TypesFilter": ["classic"]}, client_id=alice)
    assert [x["GroupId"] for x in lg["Groups"]] == ["ok"]
    still_serving(port)


def test_find_coordinator_batch_with_a_dead_coordinator(cluster_factory, zk_connect):
    """__consumer_offsets with one replica per partition; one coordinator broker is killed: the
    keys of its partitions answer COORDINATOR_NOT_AVAILABLE (NodeId -1) in the same batch where
    the others still answer their live coordinators."""
    cfg = dict(CONFIG, **{"offsets.topic.replication.factor": "1"})
    c = cluster_factory(zk_connect, n=3, config=cfg)
    groups = ["dead-%d" % i for i in range(12)]
    got = wait_coordinators(c.brokers[1].port, 0, groups)
    victim = next(n for n in (2, 3) if any(x["NodeId"] == n for x in got))
    c.brokers[victim].kill()
    port = c.brokers[1].port

    def settled():
        lead = leaders(port, "__consumer_offsets")
        return all((lead[partition_for(g)] == -1) == (x["NodeId"] == victim) for g, x in zip(groups, got))
    H.wait_for(settled, timeout=60, what="the victim's partitions without a leader")
    after = find(port, 0, groups)
    assert [x["Key"] for x in after] == groups
    for before, now in zip(got, after):
        if before["NodeId"] == victim:
            assert (now["ErrorCode"], now["NodeId"], now["Port"]) == (COORDINATOR_NOT_AVAILABLE, -1, -1), now
        else:
            assert (now["ErrorCode"], now["NodeId"]) == (NONE, before["NodeId"]), now
    still_serving(port)


def test_find_coordinator_batch_tries_internal_topic_creation_once(cluster_factory, zk_connect):
    """__consumer_offsets missing (RF 3 > 1 broker, so it cannot be created): a batch of keys
    answers COORDINATOR_NOT_AVAILABLE for each and tries the creation once per request, not
    once per key (each try is a ZooKeeper round trip)."""
    c = cluster_factory(zk_connect, n=1, config={"offsets.topic.replication.factor": "3"})
    b = next(iter(c.brokers.values()))
    marker = "does not meet the required replication factor '3' for the offsets topic"
    before = b.log(whole=True).count(marker)
    keys = ["g%d" % i for i in range(200)]
    out = find(b.port, 0, keys, version=4)
    assert [x["ErrorCode"] for x in out] == [COORDINATOR_NOT_AVAILABLE] * len(keys)
    assert b.log(whole=True).count(marker) - before == 1
    still_serving(b.port)
