"""The data path at Kafka 3.9's versions (issue 29), through the wire with kafka_codec.py:

- Fetch v12 (flexible; KIP-595's LastFetchedEpoch -> DivergingEpoch, kept by fetch sessions);
- Produce v9-v11 (v10 KIP-951: NOT_LEADER_OR_FOLLOWER names the current leader and its endpoint;
  v11 KIP-890 part 2: TRANSACTION_ABORTABLE for a partition outside the transaction);
- ListOffsets v6-v9 (v7 MAX_TIMESTAMP inside compressed batches, v8 EARLIEST_LOCAL, v9
  LATEST_TIERED without tiered storage, timestamps older than their version UNSUPPORTED_VERSION);
- OffsetForLeaderEpoch v4, DescribeLogDirs v3-v4 (top-level error, statvfs sizes),
  AlterReplicaLogDirs v2;
each at the new top version and an old one, with unknown topics, denied principals (the ACL
authorizer; a client id "User:<name>" is that principal, as test_acls.py) and malformed frames.
"""

import os
import socket
import struct
import time

import pytest

import gregor_harness as H
import kafka_codec as K
from test_log_validator import GZIP, batch, compress, record
from test_malformed import crc32c, i8, i16, i32, i64, u32

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFLE = 0, 1, 2, 3, 23
CREATE_TOPICS, DELETE_RECORDS, INIT_PID, ALTER_LOG_DIRS, DESCRIBE_LOG_DIRS = 19, 21, 22, 34, 35
NONE, OOR, UNKNOWN_TOPIC, NOT_LEADER, TOPIC_AUTHZ, CLUSTER_AUTHZ = 0, 1, 3, 6, 29, 31
UNSUPPORTED_VERSION, INVALID_REQUEST, INVALID_TXN_STATE, LOG_DIR_NOT_FOUND = 35, 42, 48, 57
TRANSACTION_ABORTABLE = 120

AUTH = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",
    "gregor.test.principal.by.client.id": "true",
}
MALLORY = "User:mallory"  # no ACLs: denied everything


def rbatch(timestamps, codec=0, pid=-1, epoch=-1, seq=-1, transactional=False):
    """A RecordBatch v2 of one record per timestamp (CreateTime), in codec."""
    base, mx, n = timestamps[0], max(timestamps), len(timestamps)
    recs = b"".join(record(i, b"v%d" % i, ts_delta=t - base) for i, t in enumerate(timestamps))
    attrs = codec | (0x10 if transactional else 0)
    after_crc = (i16(attrs) + i32(n - 1) + i64(base) + i64(mx) + i64(pid) + i16(epoch) + i32(seq) + i32(n)
                 + compress(codec, recs))
    rest = i32(-1) + i8(2) + u32(crc32c(after_crc)) + after_crc
    return i64(0) + i32(len(rest)) + rest


def create(ports, name, assignments=None, partitions=1):
    """Creates the topic through whichever of ports is the controller."""
    t = {"Name": name, "NumPartitions": partitions, "ReplicationFactor": 1}
    if assignments:
        t = {"Name": name, "NumPartitions": -1, "ReplicationFactor": -1,
             "Assignments": [{"PartitionIndex": p, "BrokerIds": b} for p, b in enumerate(assignments)]}

    def once():
        for port in ([ports] if isinstance(ports, int) else ports):
            r = K.call(port, CREATE_TOPICS, 5, {"Topics": [t], "timeoutMs": 30000})
            err = r["Topics"][0]["ErrorCode"]
            if err != 41:   # NOT_CONTROLLER: try another
                assert err == 0, r
                return True
        return False
    H.wait_for(once, what=f"create {name}")


def leaders(port, topic):
    """{partition: (leader, epoch)} once every partition has a leader, else None."""
    md = K.call(port, METADATA, 9, {"Topics": [{"Name": topic}]})
    t = md["Topics"][0]
    if t["ErrorCode"] != 0 or not t["Partitions"] or any(p["LeaderId"] < 0 for p in t["Partitions"]):
        return None
    return {p["PartitionIndex"]: (p["LeaderId"], p["LeaderEpoch"]) for p in t["Partitions"]}


def wait_led(ports, topic, leader=None, partitions=1):
    def ok():
        views = [leaders(p, topic) for p in ports]
        if any(v is None or len(v) != partitions for v in views) or any(v != views[0] for v in views):
            return None
        if leader is not None and any(le != leader for le, _ in views[0].values()):
            return None
        return views[0]
    return H.wait_for(ok, what=f"{topic} led everywhere")


def produce(port, version, topic, batch, partition=0, acks=-1, txn_id=None, client_id="gregor-test"):
    r = K.call(port, PRODUCE, version, {
        "TransactionalId": txn_id, "Acks": acks, "TimeoutMs": 10000,
        "TopicData": [{"Name": topic, "PartitionData": [{"Index": partition, "Records": batch}]}]},
        client_id=client_id)
    return r, r["Responses"][0]["PartitionResponses"][0]


def list_offsets(port, version, topic, ts, partition=0, client_id="gregor-test", replica=-1):
    body = {"ReplicaId": replica, "Topics": [{"Name": topic, "Partitions": [
        {"PartitionIndex": partition, "Timestamp": ts}]}]}
    if version == 0:
        body["Topics"][0]["Partitions"][0]["MaxNumOffsets"] = 1
    r = K.call(port, LIST_OFFSETS, version, body, client_id=client_id)
    p = r["Topics"][0]["Partitions"][0]
    return p["ErrorCode"], p["Offset"], p["Timestamp"], p["LeaderEpoch"]


def fetch(sock, version, topic, offset, last_epoch=-1, session=(0, -1), topics=None, client_id="gregor-test",
          tagged=None):
    body = {"ReplicaId": -1, "MaxWaitMs": 0, "MinBytes": 1, "MaxBytes": 1 << 20, "IsolationLevel": 0,
            "SessionId": session[0], "SessionEpoch": session[1],
            "Topics": topics if topics is not None else [{"Topic": topic, "Partitions": [
                {"Partition": 0, "FetchOffset": offset, "LastFetchedEpoch": last_epoch, "PartitionMaxBytes": 1 << 20}]}]}
    if tagged:
        body.update(tagged)
    return K.call(sock, FETCH, version, body, client_id=client_id)


def batch_offsets(records):
    """(baseOffset, lastOffset) of each batch in a record set."""
    out, pos = [], 0
    while pos + 12 <= len(records):
        base, blen = struct.unpack_from(">qi", records, pos)
        if pos + 12 + blen > len(records):
            break
        delta = struct.unpack_from(">i", records, pos + 23)[0]
        out.append((base, base + delta))
        pos += 12 + blen
    return out


def conn(port):
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def truncated_frame_closes(port, api, version, body):
    """A frame cut short inside its body (size prefix fixed up): the broker closes the connection
    (Kafka's answer to a request it cannot parse) and keeps serving others."""
    frame = K.encode_request(api, version, body)
    cut = frame[4:len(frame) - 7]
    with conn(port) as s:
        s.sendall(struct.pack(">i", len(cut)) + cut)
        s.settimeout(10)
        try:
            assert s.recv(1) == b""
        except ConnectionResetError:
            pass
    av = K.call(port, 18, 3, {"ClientSoftwareName": "t", "ClientSoftwareVersion": "1"})
    assert av["ErrorCode"] == 0


@pytest.fixture
def one(cluster_factory, zk_connect):
    return cluster_factory(zk_connect, n=1, config=AUTH)


def test_api_versions_advertise_the_data_path(one):
    av = K.call(one.brokers[1].port, 18, 3, {"ClientSoftwareName": "t", "ClientSoftwareVersion": "1"})
    got = {k["ApiKey"]: (k["MinVersion"], k["MaxVersion"]) for k in av["ApiKeys"]}
    assert got[PRODUCE] == (0, 11) and got[FETCH] == (0, 17) and got[LIST_OFFSETS] == (0, 9)
    assert got[OFLE] == (0, 4) and got[DESCRIBE_LOG_DIRS] == (0, 4) and got[ALTER_LOG_DIRS] == (0, 2)


def test_list_offsets_max_timestamp_earliest_local_latest_tiered(one):
    """ListOffsets v7 MAX_TIMESTAMP: the record holding the largest timestamp, which is neither the
    last record nor a batch's first, inside a gzip batch (KIP-734 as 3.9 answers it: the record,
    not the batch); v8 EARLIEST_LOCAL = log start offset (no tiered storage); v9 LATEST_TIERED
    -1/-1/-1; each value refused (UNSUPPORTED_VERSION) below the version that introduced it; the
    answers survive a restart (the segment's max timestamp is recovered)."""
    port = one.brokers[1].port
    create(port, "mt", partitions=2)
    wait_led([port], "mt", partitions=2)
    # p0: offsets 0-2 ts 1000 5000 2000 (plain); 3-5 ts 3000 9000 4000 (gzip); 6 ts 6000
    for b in (rbatch([1000, 5000, 2000]), rbatch([3000, 9000, 4000], GZIP), rbatch([6000])):
        _, p = produce(port, 11, "mt", b)
        assert p["ErrorCode"] == 0, p
    # p1: one plain batch whose max is its middle record
    assert produce(port, 9, "mt", rbatch([1000, 7000, 2000]), partition=1)[1]["ErrorCode"] == 0

    def check():
        for v in (7, 8, 9):
            assert list_offsets(port, v, "mt", -3) == (NONE, 4, 9000, 0)
            assert list_offsets(port, v, "mt", -3, partition=1) == (NONE, 1, 7000, 0)
        for v in (1, 5, 6):
            assert list_offsets(port, v, "mt", -3)[0] == UNSUPPORTED_VERSION
        assert list_offsets(port, 7, "mt", -4)[0] == UNSUPPORTED_VERSION
        assert list_offsets(port, 8, "mt", -5)[0] == UNSUPPORTED_VERSION
        assert list_offsets(port, 9, "mt", -6) == (UNSUPPORTED_VERSION, -1, -1, -1)
        assert list_offsets(port, 8, "mt", -4) == (NONE, 0, -1, 0)
        assert list_offsets(port, 9, "mt", -5) == (NONE, -1, -1, -1)
        assert list_offsets(port, 9, "mt", -2) == (NONE, 0, -1, 0)
        assert list_offsets(port, 9, "mt", -1)[:2] == (NONE, 7)
        assert list_offsets(port, 9, "mt", 4500) == (NONE, 1, 5000, 0)   # first ts >= 4500
        assert list_offsets(port, 9, "mt", 8000) == (NONE, 4, 9000, 0)   # inside the gzip batch
        assert list_offsets(port, 9, "mt", 9001) == (NONE, -1, -1, -1)
        assert list_offsets(port, 3, "mt", 8000) == (NONE, 4, 9000, -1)  # no LeaderEpoch before v4
    check()
    # a partition named twice: INVALID_REQUEST for each of its entries, the others answered
    for v in (1, 9):
        r = K.call(port, LIST_OFFSETS, v, {"ReplicaId": -1, "Topics": [
            {"Name": "mt", "Partitions": [{"PartitionIndex": 0, "Timestamp": -1},
                                          {"PartitionIndex": 1, "Timestamp": -1}]},
            {"Name": "mt", "Partitions": [{"PartitionIndex": 0, "Timestamp": -2}]}]})
        assert [(q["PartitionIndex"], q["ErrorCode"], q["Offset"]) for t in r["Topics"] for q in t["Partitions"]] == \
            [(0, INVALID_REQUEST, -1), (1, NONE, 3), (0, INVALID_REQUEST, -1)]
    # errors: unknown topic, denied principal, old versions too
    assert list_offsets(port, 9, "nope", -3)[0] == UNKNOWN_TOPIC
    assert list_offsets(port, 9, "mt", -3, client_id=MALLORY)[0] == TOPIC_AUTHZ
    assert list_offsets(port, 5, "mt", -1, client_id=MALLORY)[0] == TOPIC_AUTHZ
    # the broker restarts: the same answers from the recovered log
    one.brokers[1].stop()
    one.brokers[1].start()
    wait_led([port], "mt", partitions=2)
    H.wait_for(lambda: list_offsets(port, 9, "mt", -3)[0] == NONE, what="mt readable again")
    assert list_offsets(port, 9, "mt", -3)[:3] == (NONE, 4, 9000)
    # DeleteRecords moves the log start: EARLIEST and EARLIEST_LOCAL follow it, MAX_TIMESTAMP is
    # still the gzip batch's record
    dr = K.call(port, DELETE_RECORDS, 2, {"Topics": [{"Name": "mt", "Partitions": [
        {"PartitionIndex": 0, "Offset": 2}]}], "TimeoutMs": 10000})
    assert dr["Topics"][0]["Partitions"][0]["ErrorCode"] == 0
    assert list_offsets(port, 8, "mt", -4)[:2] == (NONE, 2)
    assert list_offsets(port, 8, "mt", -2)[:2] == (NONE, 2)
    assert list_offsets(port, 8, "mt", -3)[:3] == (NONE, 4, 9000)
    truncated_frame_closes(port, LIST_OFFSETS, 9, {"ReplicaId": -1, "Topics": [
        {"Name": "mt", "Partitions": [{"PartitionIndex": 0, "Timestamp": -3}]}]})


def test_fetch_v12_diverging_epoch(cluster_factory, zk_connect):
    """Fetch v12: a fetcher whose LastFetchedEpoch ended earlier here than its FetchOffset gets
    DivergingEpoch (our end of that epoch) and no records; a known epoch that reaches FetchOffset
    reads normally; an epoch newer than ours is OFFSET_OUT_OF_RANGE. In a fetch session the
    epoch is kept with the partition, so an incremental fetch still answers the divergence."""
    c = cluster_factory(zk_connect, n=2, config=AUTH)
    p1, port = c.brokers[1].port, c.brokers[2].port
    create([p1, port], "fe", assignments=[[1, 2]])
    wait_led([p1, port], "fe", leader=1)
    for ts in ([1, 2], [3]):
        assert produce(p1, 11, "fe", rbatch(ts))[1]["ErrorCode"] == 0   # offsets 0-2, epoch 0
    c.brokers[1].stop()   # broker 2 leads in a new epoch
    led = H.wait_for(lambda: (leaders(port, "fe") or {}).get(0, (0, 0))[0] == 2 and leaders(port, "fe"),
                     what="broker 2 leads fe-0")
    epoch = led[0][1]
    assert epoch > 0
    H.wait_for(lambda: produce(port, 11, "fe", rbatch([4, 5]), acks=1)[1]["ErrorCode"] == 0,
               what="produce in the new epoch")   # offsets 3-4
    with conn(port) as s:
        r = fetch(s, 12, "fe", 0)
        p = r["Responses"][0]["Partitions"][0]
        assert p["ErrorCode"] == NONE and p["HighWatermark"] == 5
        assert batch_offsets(p["Records"]) == [(0, 1), (2, 2), (3, 4)]
        assert p["DivergingEpoch"] == {"Epoch": -1, "EndOffset": -1}
        assert p["CurrentLeader"] == {"LeaderId": -1, "LeaderEpoch": -1}
        # a fetcher that wrote offsets 3-4 in epoch 0, which ended here at 3
        p = fetch(s, 12, "fe", 5, last_epoch=0)["Responses"][0]["Partitions"][0]
        assert (p["ErrorCode"], p["DivergingEpoch"], p["Records"] or b"") == \
            (NONE, {"Epoch": 0, "EndOffset": 3}, b"")
        assert p["HighWatermark"] == 5
        # epoch 0 reaches offset 3: a normal read
        p = fetch(s, 12, "fe", 3, last_epoch=0)["Responses"][0]["Partitions"][0]
        assert p["DivergingEpoch"]["Epoch"] == -1 and batch_offsets(p["Records"]) == [(3, 4)]
        # an epoch we never had
        p = fetch(s, 12, "fe", 5, last_epoch=epoch + 5)["Responses"][0]["Partitions"][0]
        assert p["ErrorCode"] == OOR
        # ClusterId (KRaft's tagged field) is accepted and ignored
        p = fetch(s, 12, "fe", 3, tagged={"ClusterId": "whatever"})["Responses"][0]["Partitions"][0]
        assert p["ErrorCode"] == NONE and batch_offsets(p["Records"]) == [(3, 4)]
        # the old version still reads
        p = fetch(s, 11, "fe", 3)["Responses"][0]["Partitions"][0]
        assert p["ErrorCode"] == NONE and batch_offsets(p["Records"]) == [(3, 4)]
        # a session: the full fetch opens it with the divergence, the incremental one (no
        # partitions named) still reports it from the session's cached LastFetchedEpoch
        full = fetch(s, 12, "fe", 5, last_epoch=0, session=(0, 0))
        sid = full["SessionId"]
        assert sid != 0 and full["Responses"][0]["Partitions"][0]["DivergingEpoch"]["EndOffset"] == 3
        inc = fetch(s, 12, "fe", 0, session=(sid, 1), topics=[])
        assert inc["ErrorCode"] == NONE and inc["SessionId"] == sid
        assert [(t["Topic"], [q["DivergingEpoch"] for q in t["Partitions"]]) for t in inc["Responses"]] == \
            [("fe", [{"Epoch": 0, "EndOffset": 3}])]
        # errors: unknown topic, denied principal
        p = fetch(s, 12, "nope", 0)["Responses"][0]["Partitions"][0]
        assert p["ErrorCode"] == UNKNOWN_TOPIC
    p = fetch(port, 12, "fe", 0, client_id=MALLORY)["Responses"][0]["Partitions"][0]
    assert p["ErrorCode"] == TOPIC_AUTHZ and not p["Records"]
    truncated_frame_closes(port, FETCH, 12, {"ReplicaId": -1, "MaxWaitMs": 0, "MinBytes": 1, "Topics": [
        {"Topic": "fe", "Partitions": [{"Partition": 0, "FetchOffset": 0, "LastFetchedEpoch": 0,
                                         "PartitionMaxBytes": 1000}]}]})
    # OffsetForLeaderEpoch v4 (and v3) agree with the divergence
    for v in (3, 4):
        r = K.call(port, OFLE, v, {"ReplicaId": -1, "Topics": [{"Topic": "fe", "Partitions": [
            {"Partition": 0, "CurrentLeaderEpoch": -1, "LeaderEpoch": 0}]}]})
        q = r["Topics"][0]["Partitions"][0]
        assert (q["ErrorCode"], q["LeaderEpoch"], q["EndOffset"]) == (NONE, 0, 3)
        r = K.call(port, OFLE, v, {"ReplicaId": -1, "Topics": [{"Topic": "nope", "Partitions": [
            {"Partition": 0, "CurrentLeaderEpoch": -1, "LeaderEpoch": 0}]}]})
        assert r["Topics"][0]["Partitions"][0]["ErrorCode"] == UNKNOWN_TOPIC
        r = K.call(port, OFLE, v, {"ReplicaId": -1, "Topics": [{"Topic": "fe", "Partitions": [
            {"Partition": 0, "CurrentLeaderEpoch": -1, "LeaderEpoch": 0}]}]}, client_id=MALLORY)
        assert r["Topics"][0]["Partitions"][0]["ErrorCode"] == TOPIC_AUTHZ


def test_produce_v10_follower_names_the_leader(cluster_factory, zk_connect):
    """Produce v10 to a follower (and to a broker that does not host the partition): the answer
    names the current leader and epoch and lists its endpoint once in NodeEndpoints (KIP-951);
    v9 carries neither. After a leader change the old leader names the new one."""
    c = cluster_factory(zk_connect, n=2, config=AUTH)
    p1, p2 = c.brokers[1].port, c.brokers[2].port
    create([p1, p2], "pl", assignments=[[1, 2]])
    create([p1, p2], "pm", assignments=[[1]])   # not hosted on broker 2 at all
    e0 = wait_led([p1, p2], "pl", leader=1)[0][1]
    e1 = wait_led([p1, p2], "pm", leader=1)[0][1]
    r = K.call(p2, PRODUCE, 10, {"Acks": -1, "TimeoutMs": 10000, "TopicData": [
        {"Name": "pl", "PartitionData": [{"Index": 0, "Records": rbatch([1])}]},
        {"Name": "pm", "PartitionData": [{"Index": 0, "Records": rbatch([2])}]}]})
    parts = [t["PartitionResponses"][0] for t in r["Responses"]]
    assert [(q["ErrorCode"], q["CurrentLeader"]) for q in parts] == [
        (NOT_LEADER, {"LeaderId": 1, "LeaderEpoch": e0}), (NOT_LEADER, {"LeaderId": 1, "LeaderEpoch": e1})]
    assert r["NodeEndpoints"] == [{"NodeId": 1, "Host": "127.0.0.1", "Port": p1, "Rack": None}]
    r, q = produce(p2, 9, "pl", rbatch([1]))
    assert q["ErrorCode"] == NOT_LEADER and q["CurrentLeader"] == {"LeaderId": -1, "LeaderEpoch": -1}
    assert r["NodeEndpoints"] == []
    # the leader accepts v11 and v9; unknown topic and denied principal
    assert produce(p1, 11, "pl", rbatch([1]))[1]["ErrorCode"] == NONE
    assert produce(p1, 9, "pl", rbatch([2]))[1]["BaseOffset"] == 1
    r, q = produce(p1, 11, "nope", rbatch([1]))
    assert q["ErrorCode"] == UNKNOWN_TOPIC and r["NodeEndpoints"] == []
    assert produce(p1, 11, "pl", rbatch([1]), client_id=MALLORY)[1]["ErrorCode"] == TOPIC_AUTHZ
    assert produce(p1, 8, "pl", rbatch([1]), client_id=MALLORY)[1]["ErrorCode"] == TOPIC_AUTHZ
    # broker 1 goes away and comes back as a follower of pl-0: it names broker 2
    c.brokers[1].stop()
    H.wait_for(lambda: (leaders(p2, "pl") or {}).get(0, (0,))[0] == 2, what="broker 2 leads pl-0")
    c.brokers[1].start()
    led = wait_led([p1, p2], "pl")
    assert led[0][0] == 2

    def named():
        r, q = produce(p1, 10, "pl", rbatch([3]))
        if q["ErrorCode"] != NOT_LEADER:
            return None
        return r, q
    r, q = H.wait_for(named, what="broker 1 answers NOT_LEADER for pl-0")
    assert q["CurrentLeader"] == {"LeaderId": 2, "LeaderEpoch": led[0][1]}
    assert r["NodeEndpoints"] == [{"NodeId": 2, "Host": "127.0.0.1", "Port": p2, "Rack": None}]
    truncated_frame_closes(p1, PRODUCE, 11, {"Acks": 1, "TimeoutMs": 1000, "TopicData": [
        {"Name": "pl", "PartitionData": [{"Index": 0, "Records": rbatch([1])}]}]})


def test_produce_v11_transaction_abortable(cluster_factory, zk_connect):
    """A transactional produce to a partition the transaction never added (KIP-890 verification):
    Produce v11 gets TRANSACTION_ABORTABLE (3.9's answer for a v11 producer), v10 and older the
    INVALID_TXN_STATE they know; nothing is appended."""
    one = cluster_factory(zk_connect, n=1, config=dict(AUTH, **{
        "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1"}))
    port = one.brokers[1].port
    create(port, "tx")
    wait_led([port], "tx")

    def init():
        fc = K.call(port, 10, 3, {"Key": "tid-29", "KeyType": 1})
        if fc["ErrorCode"] != 0:
            return None
        r = K.call(port, INIT_PID, 4, {"TransactionalId": "tid-29", "TransactionTimeoutMs": 60000})
        return r if r["ErrorCode"] == 0 else None
    r = H.wait_for(init, timeout=60, what="InitProducerId")
    pid, epoch = r["ProducerId"], r["ProducerEpoch"]
    b = rbatch([1, 2], pid=pid, epoch=epoch, seq=0, transactional=True)
    assert produce(port, 11, "tx", b, txn_id="tid-29")[1]["ErrorCode"] == TRANSACTION_ABORTABLE
    for v in (10, 9, 3):
        assert produce(port, v, "tx", b, txn_id="tid-29")[1]["ErrorCode"] == INVALID_TXN_STATE
    assert list_offsets(port, 9, "tx", -1)[:2] == (NONE, 0)


def test_log_dirs_v4_sizes_and_authorization(one):
    """DescribeLogDirs v4: TotalBytes/UsableBytes of the dir's file system (statvfs); v3 has the
    top-level ErrorCode, CLUSTER_AUTHORIZATION_FAILED for a denied principal (v2: just no
    results). AlterReplicaLogDirs v2 answers as v1."""
    port = one.brokers[1].port
    create(port, "ld")
    wait_led([port], "ld")
    logdir = one.brokers[1].properties()["log.dirs"].split(",")[0]
    r = K.call(port, DESCRIBE_LOG_DIRS, 4, {"Topics": None})
    assert r["ErrorCode"] == NONE and len(r["Results"]) == 1
    d = r["Results"][0]
    st = os.statvfs(logdir)
    assert d["ErrorCode"] == NONE and os.path.samefile(d["LogDir"], logdir)
    assert d["TotalBytes"] == st.f_blocks * st.f_frsize
    assert 0 < d["UsableBytes"] <= d["TotalBytes"]
    assert [(t["Name"], [q["PartitionIndex"] for q in t["Partitions"]]) for t in d["Topics"]] == [("ld", [0])]
    r = K.call(port, DESCRIBE_LOG_DIRS, 3, {"Topics": [{"Topic": "ld", "Partitions": [0]}]})
    assert r["ErrorCode"] == NONE and r["Results"][0]["TotalBytes"] == -1   # not in v3
    for v in (3, 4):
        r = K.call(port, DESCRIBE_LOG_DIRS, v, {"Topics": None}, client_id=MALLORY)
        assert (r["ErrorCode"], r["Results"]) == (CLUSTER_AUTHZ, [])
    r = K.call(port, DESCRIBE_LOG_DIRS, 2, {"Topics": None}, client_id=MALLORY)
    assert r["Results"] == []
    truncated_frame_closes(port, DESCRIBE_LOG_DIRS, 4, {"Topics": [{"Topic": "ld", "Partitions": [0, 1, 2]}]})
    for v in (1, 2):
        r = K.call(port, ALTER_LOG_DIRS, v, {"Dirs": [
            {"Path": os.path.abspath(logdir), "Topics": [{"Name": "ld", "Partitions": [0]}]},
            {"Path": "/nowhere", "Topics": [{"Name": "ld", "Partitions": [0]}]}]})
        got = sorted(q["ErrorCode"] for t in r["Results"] for q in t["Partitions"])
        assert got == [NONE, LOG_DIR_NOT_FOUND], r
        r = K.call(port, ALTER_LOG_DIRS, v, {"Dirs": [
            {"Path": os.path.abspath(logdir), "Topics": [{"Name": "ld", "Partitions": [0]}]}]}, client_id=MALLORY)
        assert [q["ErrorCode"] for t in r["Results"] for q in t["Partitions"]] == [CLUSTER_AUTHZ]


@pytest.mark.parametrize("sendfile", ["1", "0"])
def test_fetch_v12_record_region_lengths(cluster_factory, zk_connect, monkeypatch, sendfile):
    """Fetch v12 (flexible: a record set's length is a uvarint of len+1) answers record regions of
    every length class -- 1-byte (125), 2-byte (127), and 4-byte (> 2^21) lengths, several
    partitions in one answer -- byte for byte as stored, over sendfile and over the copy path
    (GREGOR_FETCH_SENDFILE=0); the frame parses and v11 reads the same bytes."""
    monkeypatch.setenv("GREGOR_FETCH_SENDFILE", sendfile)
    c = cluster_factory(zk_connect, n=1, config={"message.max.bytes": str(1 << 20)})
    port = c.brokers[1].port
    create(port, "rl", partitions=4)
    wait_led([port], "rl", partitions=4)
    small = batch(0, record(0, b"x"), 1)
    assert len(small) < 126
    # partition 1: one batch of exactly 127 bytes (len+1 = 128: the first 2-byte length)
    def sized(n, fill):
        return next(b for b in (batch(0, record(0, fill * v, key=b"k" * k), 1) for k in range(4) for v in range(n))
                    if len(b) == n)
    b127 = sized(127, b"y")
    # partition 2: one batch of 125 bytes (len+1 = 126: a 1-byte length)
    b125 = sized(125, b"z")
    # partition 3: 3 batches of ~900 KB: a region above 2^21
    big = [batch(0, record(0, os.urandom(900_000)), 1) for _ in range(3)]
    for part, batches in ((0, [small]), (1, [b127]), (2, [b125]), (3, big)):
        for b in batches:
            assert produce(port, 11, "rl", b, partition=part)[1]["ErrorCode"] == 0
    body = {"ReplicaId": -1, "MaxWaitMs": 0, "MinBytes": 1, "MaxBytes": 8 << 20, "IsolationLevel": 0,
            "SessionId": 0, "SessionEpoch": -1,
            "Topics": [{"Topic": "rl", "Partitions": [
                {"Partition": p, "FetchOffset": 0, "LastFetchedEpoch": -1, "PartitionMaxBytes": 8 << 20}
                for p in range(4)]}]}
    for v in (12, 11):
        r = K.call(port, FETCH, v, body)
        got = {p["PartitionIndex"]: (p["ErrorCode"], p["Records"]) for p in r["Responses"][0]["Partitions"]}
        assert set(got) == {0, 1, 2, 3}
        assert all(e == NONE for e, _ in got.values())
        assert batch_offsets(got[0][1]) == [(0, 0)] and len(got[0][1]) == len(small)
        assert len(got[1][1]) == 127 and got[1][1][16:] == b127[16:]
        assert len(got[2][1]) == 125 and got[2][1][16:] == b125[16:]
        assert len(got[3][1]) > 1 << 21 and batch_offsets(got[3][1]) == [(0, 0), (1, 1), (2, 2)]
        assert got[3][1][61:100_000] == big[0][61:100_000]
