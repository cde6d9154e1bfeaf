"""Fetch v13-v17 by topic id (KIP-516; issue 29), through the wire with kafka_codec.py, as Kafka
3.9's KafkaApis.handleFetchRequest and FetchSession serve them:

  - Topics and ForgottenTopicsData name topic ids; the response names topics by TopicId; an id the
    metadata cache does not know is answered UNKNOWN_TOPIC_ID per partition (the rest is served,
    before authorization, as Kafka);
  - sessions (KIP-227) by id: full, incremental, forgotten topics by id; a session opened by name
    (v7-12) cannot be continued by id and vice versa: FETCH_SESSION_TOPIC_ID_ERROR, the session
    itself stays usable;
  - a topic deleted and re-created under the same name while a session holds the old id: the
    session's partition is answered with an error (INCONSISTENT_TOPIC_ID once the new topic is
    hosted), never the new topic's records; a new fetch by the old id is UNKNOWN_TOPIC_ID;
  - v15's ReplicaState carries the ReplicaId; v16 (KIP-951): NOT_LEADER_OR_FOLLOWER and
    FENCED_LEADER_EPOCH carry CurrentLeader and NodeEndpoints (v15 neither);
  - malformed frames at v17 close the connection and the broker keeps serving.
"""

import uuid

import gregor_harness as H
import kafka_codec as K
from test_datapath_v39 import (AUTH, MALLORY, batch_offsets, create, leaders, produce, rbatch,
                               truncated_frame_closes, wait_led)

FETCH, METADATA, DELETE_TOPICS = 1, 3, 20
NONE, UNKNOWN_TOPIC, NOT_LEADER, TOPIC_AUTHZ, FENCED = 0, 3, 6, 29, 74
UNKNOWN_TOPIC_ID, INCONSISTENT_TOPIC_ID, SESSION_TOPIC_ID_ERROR = 100, 103, 106
TOP = 17
ZERO = uuid.UUID(int=0)


def topic_id(port, name):
    """The topic's id once this broker's metadata cache has it and every partition a leader."""
    def known():
        t = K.call(port, METADATA, 12, {"Topics": [{"Name": name}], "AllowAutoTopicCreation": False})["Topics"][0]
        ok = t["ErrorCode"] == 0 and t["TopicId"] != ZERO and t["Partitions"] and \
            all(p["LeaderId"] >= 0 for p in t["Partitions"])
        return t["TopicId"] if ok else None
    return H.wait_for(known, what=f"{name}'s id in the metadata cache")


def part(p, offset, epoch=-1, max_bytes=1 << 20):
    return {"Partition": p, "FetchOffset": offset, "CurrentLeaderEpoch": epoch, "PartitionMaxBytes": max_bytes}


def fetch(port, version, topics, session=(0, -1), forgotten=(), client_id="gregor-test", **extra):
    """topics: [(id or name, [partition dicts])]; forgotten: [(id or name, [partitions])]."""
    key = "TopicId" if version >= 13 else "Topic"
    body = {"MaxWaitMs": 0, "MinBytes": 1, "MaxBytes": 1 << 20, "IsolationLevel": 0,
            "SessionId": session[0], "SessionEpoch": session[1],
            "Topics": [{key: t, "Partitions": ps} for t, ps in topics],
            "ForgottenTopicsData": [{key: t, "Partitions": ps} for t, ps in forgotten]}
    if version < 15:
        body["ReplicaId"] = -1
    body.update(extra)
    return K.call(port, FETCH, version, body, client_id=client_id)


def answers(r, by="TopicId"):
    """{(topic id or name, partition): partition data}."""
    return {(t[by], p["PartitionIndex"]): p for t in r["Responses"] for p in t["Partitions"]}


def values(records):
    """How many records a record set holds."""
    return sum(last - base + 1 for base, last in batch_offsets(records or b""))


def test_fetch_by_topic_id_sessions_and_unknown_ids(cluster_factory, zk_connect):
    """Full and incremental fetches by id at v13 and the top version, forgotten topics by id, an
    unknown (and the zero) id next to a known one, a denied principal, session kinds that cannot
    be mixed, v12 by name still served."""
    c = cluster_factory(zk_connect, n=1, config=AUTH)
    port = c.brokers[1].port
    create(port, "fa", partitions=2)
    tid = topic_id(port, "fa")
    for p in (0, 1):
        assert produce(port, 11, "fa", rbatch([1, 2]), partition=p)[1]["ErrorCode"] == NONE

    # sessionless v13 and v17: records, TopicId in the answer
    for ver in (13, TOP):
        r = fetch(port, ver, [(tid, [part(0, 0), part(1, 0)])])
        assert r["ErrorCode"] == NONE and r["SessionId"] == 0
        got = answers(r)
        assert set(got) == {(tid, 0), (tid, 1)}
        assert all(q["ErrorCode"] == NONE and q["HighWatermark"] == 2 and values(q["Records"]) == 2
                   for q in got.values())
        assert r["NodeEndpoints"] == [] if ver >= 16 else True

    # unknown and zero ids: UNKNOWN_TOPIC_ID per partition, the known topic served; even for a
    # principal denied READ (ids are resolved before authorization)
    unknown = uuid.uuid4()
    r = fetch(port, TOP, [(unknown, [part(0, 0), part(3, 0)]), (tid, [part(0, 0)]), (ZERO, [part(0, 0)])])
    got = answers(r)
    assert r["ErrorCode"] == NONE
    assert [got[(unknown, 0)]["ErrorCode"], got[(unknown, 3)]["ErrorCode"], got[(ZERO, 0)]["ErrorCode"]] == \
        [UNKNOWN_TOPIC_ID] * 3
    assert got[(unknown, 0)]["HighWatermark"] == -1 and got[(unknown, 0)]["Records"] in (None, b"")
    assert got[(tid, 0)]["ErrorCode"] == NONE and values(got[(tid, 0)]["Records"]) == 2
    r = fetch(port, TOP, [(unknown, [part(0, 0)]), (tid, [part(0, 0)])], client_id=MALLORY)
    got = answers(r)
    assert got[(unknown, 0)]["ErrorCode"] == UNKNOWN_TOPIC_ID and got[(tid, 0)]["ErrorCode"] == TOPIC_AUTHZ
    assert got[(tid, 0)]["Records"] in (None, b"")

    # a session by id: full, incremental (only what changed), forgotten by id
    r = fetch(port, TOP, [(tid, [part(0, 2), part(1, 2)]), (unknown, [part(0, 0)])], session=(0, 0))
    sid = r["SessionId"]
    assert sid > 0 and answers(r)[(unknown, 0)]["ErrorCode"] == UNKNOWN_TOPIC_ID
    r = fetch(port, TOP, [], session=(sid, 1))
    # the unknown id's partition stays in the session and keeps being answered with its error
    assert r["ErrorCode"] == NONE and r["SessionId"] == sid
    assert {k: q["ErrorCode"] for k, q in answers(r).items()} == {(unknown, 0): UNKNOWN_TOPIC_ID}
    assert produce(port, 11, "fa", rbatch([3]), partition=1)[1]["ErrorCode"] == NONE
    r = fetch(port, TOP, [], session=(sid, 2), forgotten=[(unknown, [0])])
    got = answers(r)
    assert set(got) == {(tid, 1)} and values(got[(tid, 1)]["Records"]) == 1 and got[(tid, 1)]["HighWatermark"] == 3
    # forget partition 0 by id; a produce to it is no longer answered
    r = fetch(port, TOP, [(tid, [part(1, 3)])], session=(sid, 3), forgotten=[(tid, [0])])
    assert r["ErrorCode"] == NONE and answers(r) == {}
    assert produce(port, 11, "fa", rbatch([4]), partition=0)[1]["ErrorCode"] == NONE
    r = fetch(port, TOP, [], session=(sid, 4))
    assert answers(r) == {}

    # the id session cannot be continued by name (v12), nor a name session by id; both stay usable
    r = fetch(port, 12, [], session=(sid, 5))
    assert r["ErrorCode"] == SESSION_TOPIC_ID_ERROR and r["SessionId"] == 0 and r["Responses"] == []
    r = fetch(port, 13, [(tid, [part(0, 2)])], session=(sid, 5))
    got = answers(r)
    assert r["ErrorCode"] == NONE and set(got) == {(tid, 0)} and values(got[(tid, 0)]["Records"]) == 1
    r = fetch(port, 12, [("fa", [part(0, 0)])], session=(0, 0))
    nsid = r["SessionId"]
    assert nsid > 0 and values(answers(r, "Topic")[("fa", 0)]["Records"]) == 3
    r = fetch(port, TOP, [], session=(nsid, 1))
    assert r["ErrorCode"] == SESSION_TOPIC_ID_ERROR and r["Responses"] == []
    r = fetch(port, 12, [("fa", [part(0, 3), part(1, 0)])], session=(nsid, 1))
    got = answers(r, "Topic")
    assert r["ErrorCode"] == NONE and set(got) == {("fa", 1)} and values(got[("fa", 1)]["Records"]) == 3
    # a full fetch by id closes the name session it names
    r = fetch(port, TOP, [(tid, [part(0, 0)])], session=(nsid, 0))
    assert r["ErrorCode"] == NONE and r["SessionId"] not in (0, nsid)
    assert fetch(port, 12, [], session=(nsid, 2))["ErrorCode"] == 70  # FETCH_SESSION_ID_NOT_FOUND


def test_fetch_by_id_of_a_topic_deleted_and_recreated_under_a_live_session(cluster_factory, zk_connect):
    """A consumer's session holds topic id A for "fr"; "fr" is deleted and created again (id B)
    with other records. The session's partition is answered with an error -- never B's records
    under A -- and INCONSISTENT_TOPIC_ID once B is hosted (Kafka 3.9: the session keeps the name it
    resolved, the log under that name holds another id). A new fetch by A is UNKNOWN_TOPIC_ID; B
    serves its own records."""
    c = cluster_factory(zk_connect, n=1, config=AUTH)
    port = c.brokers[1].port
    create(port, "fr")
    old = topic_id(port, "fr")
    assert produce(port, 11, "fr", rbatch([1, 2, 3]))[1]["ErrorCode"] == NONE
    r = fetch(port, TOP, [(old, [part(0, 0)])], session=(0, 0))
    sid = r["SessionId"]
    assert sid > 0 and values(answers(r)[(old, 0)]["Records"]) == 3
    epoch = 1
    d = K.call(port, DELETE_TOPICS, 6, {"Topics": [{"Name": None, "TopicId": old}], "TimeoutMs": 30000})
    assert d["Responses"][0]["ErrorCode"] == NONE, d
    H.wait_for(lambda: K.call(port, METADATA, 12, {"Topics": [{"Name": "fr"}], "AllowAutoTopicCreation": False})["Topics"][0]["ErrorCode"] == 3,
               what="fr deleted")
    seen = set()

    def step():
        """One incremental fetch of the session at offset 0 (as if the consumer had reset)."""
        nonlocal epoch
        r = fetch(port, TOP, [(old, [part(0, 0)])], session=(sid, epoch))
        assert r["ErrorCode"] == NONE, r
        epoch += 1
        q = answers(r).get((old, 0))
        assert q is not None and q["ErrorCode"] != NONE and q["Records"] in (None, b""), q
        seen.add(q["ErrorCode"])
        return q["ErrorCode"]
    step()
    H.wait_for(lambda: not c.zk.exists("/brokers/topics/fr") and not c.zk.exists("/admin/delete_topics/fr"),
               what="fr's deletion finished")
    step()
    create(port, "fr")
    new = topic_id(port, "fr")
    assert new != old
    assert produce(port, 11, "fr", rbatch([7, 8]))[1]["ErrorCode"] == NONE
    H.wait_for(lambda: step() == INCONSISTENT_TOPIC_ID, what="INCONSISTENT_TOPIC_ID for the old id's session")
    assert seen <= {UNKNOWN_TOPIC, NOT_LEADER, INCONSISTENT_TOPIC_ID}, seen
    for _ in range(3):
        assert step() == INCONSISTENT_TOPIC_ID
    # a new fetch by the old id: unknown; by the new id: the new topic's two records only
    r = fetch(port, TOP, [(old, [part(0, 0)]), (new, [part(0, 0)])])
    got = answers(r)
    assert got[(old, 0)]["ErrorCode"] == UNKNOWN_TOPIC_ID and got[(old, 0)]["Records"] in (None, b"")
    assert got[(new, 0)]["ErrorCode"] == NONE and values(got[(new, 0)]["Records"]) == 2
    # v12 by name reads the new topic, as before
    assert values(answers(fetch(port, 12, [("fr", [part(0, 0)])]), "Topic")[("fr", 0)]["Records"]) == 2


def test_fetch_v16_names_the_leader(cluster_factory, zk_connect):
    """v16+: a partition this broker does not host answers NOT_LEADER_OR_FOLLOWER with the
    leader it knows and that leader's endpoint; after a leader change an old CurrentLeaderEpoch
    gets FENCED_LEADER_EPOCH with the new leader. v15 carries neither. v15's ReplicaState is the
    fetcher's ReplicaId (a replica that is not assigned gets empty records, no error)."""
    c = cluster_factory(zk_connect, n=2, config=AUTH)
    p1, p2 = c.brokers[1].port, c.brokers[2].port
    create([p1, p2], "fl", assignments=[[1, 2]])
    create([p1, p2], "fm", assignments=[[1]])   # not hosted on broker 2
    e0 = wait_led([p1, p2], "fl", leader=1)[0][1]
    e1 = wait_led([p1, p2], "fm", leader=1)[0][1]
    fl, fm = topic_id(p2, "fl"), topic_id(p2, "fm")
    assert produce(p1, 11, "fm", rbatch([1]))[1]["ErrorCode"] == NONE
    r = fetch(p2, TOP, [(fm, [part(0, 0)])])
    q = answers(r)[(fm, 0)]
    assert q["ErrorCode"] == NOT_LEADER and q["CurrentLeader"] == {"LeaderId": 1, "LeaderEpoch": e1}
    assert r["NodeEndpoints"] == [{"NodeId": 1, "Host": "127.0.0.1", "Port": p1, "Rack": None}]
    r = fetch(p2, 15, [(fm, [part(0, 0)])])
    q = answers(r)[(fm, 0)]
    assert q["ErrorCode"] == NOT_LEADER and q["CurrentLeader"] == {"LeaderId": -1, "LeaderEpoch": -1}
    assert r["NodeEndpoints"] == []
    # ReplicaState (v15+): replica 7 is no assigned replica: empty records, no error; a consumer
    # (the default ReplicaState) reads the record
    r = fetch(p1, TOP, [(fm, [part(0, 0)])], ReplicaState={"ReplicaId": 7, "ReplicaEpoch": -1})
    q = answers(r)[(fm, 0)]
    assert q["ErrorCode"] == NONE and q["Records"] in (None, b"")
    assert values(answers(fetch(p1, TOP, [(fm, [part(0, 0)])]))[(fm, 0)]["Records"]) == 1
    # a follower's fetch by a principal without CLUSTER_ACTION: denied, unknown ids too (Kafka checks
    # a follower's CLUSTER_ACTION before resolving ids)
    unknown = uuid.uuid4()
    r = fetch(p1, TOP, [(fm, [part(0, 0)]), (unknown, [part(0, 0)])], ReplicaState={"ReplicaId": 2, "ReplicaEpoch": -1},
              client_id=MALLORY)
    assert {k: q["ErrorCode"] for k, q in answers(r).items()} == {(fm, 0): TOPIC_AUTHZ, (unknown, 0): TOPIC_AUTHZ}

    # leader change: broker 1 goes away, broker 2 leads fl at a later epoch
    c.brokers[1].stop()
    H.wait_for(lambda: (leaders(p2, "fl") or {}).get(0, (0,))[0] == 2, what="broker 2 leads fl-0")
    c.brokers[1].start()
    led = wait_led([p1, p2], "fl")
    assert led[0][0] == 2 and led[0][1] > e0
    r = fetch(p2, TOP, [(fl, [part(0, 0, epoch=e0)])])
    q = answers(r)[(fl, 0)]
    assert q["ErrorCode"] == FENCED and q["CurrentLeader"] == {"LeaderId": 2, "LeaderEpoch": led[0][1]}
    assert r["NodeEndpoints"] == [{"NodeId": 2, "Host": "127.0.0.1", "Port": p2, "Rack": None}]
    assert answers(fetch(p2, TOP, [(fl, [part(0, 0, epoch=led[0][1])])]))[(fl, 0)]["ErrorCode"] == NONE


def test_fetch_v17_malformed_frames(cluster_factory, zk_connect):
    """Frames cut short at v13 and v17, and v17 with a junk tagged field of the wrong size: the
    connection closes or the request is answered; the broker keeps serving fetches by id."""
    c = cluster_factory(zk_connect, n=1, config=AUTH)
    port = c.brokers[1].port
    create(port, "fx")
    tid = topic_id(port, "fx")
    body = {"ReplicaId": -1, "MaxWaitMs": 0, "MinBytes": 1, "Topics": [{"TopicId": tid, "Partitions": [part(0, 0)]}],
            "ForgottenTopicsData": [{"TopicId": tid, "Partitions": [0, 1, 2]}]}
    truncated_frame_closes(port, FETCH, 13, body)
    del body["ReplicaId"]
    truncated_frame_closes(port, FETCH, TOP, body)
    # a hundred thousand partitions of unknown ids in one request: answered, memory bounded by it
    many = [{"TopicId": uuid.uuid4(), "Partitions": [part(i, 0) for i in range(50)]} for _ in range(2000)]
    r = K.call(port, FETCH, TOP, {"MaxWaitMs": 0, "MinBytes": 1, "Topics": many})
    assert r["ErrorCode"] == NONE and sum(len(t["Partitions"]) for t in r["Responses"]) == 100000
    assert all(p["ErrorCode"] == UNKNOWN_TOPIC_ID for t in r["Responses"] for p in t["Partitions"])
    assert produce(port, 11, "fx", rbatch([1]))[1]["ErrorCode"] == NONE
    assert values(answers(fetch(port, TOP, [(tid, [part(0, 0)])]))[(tid, 0)]["Records"]) == 1
