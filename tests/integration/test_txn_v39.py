"""Kafka 3.9's transaction client versions through the wire (kafka_codec), next to the old ones:

  - InitProducerId v5, AddPartitionsToTxn v3 (clients) and v4-v5 (KIP-890's batched broker form,
    VerifyOnly), AddOffsetsToTxn v4, TxnOffsetCommit v4, EndTxn v4, WriteTxnMarkers v1
  - TRANSACTION_ABORTABLE where 3.9 answers it: a verification of a partition outside the
    transaction (AddPartitionsToTxn v4+) and a TxnOffsetCommit v4 whose group's partition was
    never added (v3 still gets INVALID_TXN_STATE)
  - v4+ needs Cluster CLUSTER_ACTION (a client without it gets the top-level error)
  - hostile counts close the connection; the broker keeps serving
"""

import socket
import struct

import gregor_harness as H
import kafka_codec as K
import kafka_wire as W
from test_groups_v39 import (AUTH, OFFSET_FETCH, coordinator_port, create_topic, still_serving,
                             wait_coordinators)
from test_groups_v39 import three  # noqa: F401  (the fixture)

FIND_COORDINATOR, INIT_PID, ADD_PARTS, ADD_OFFSETS, END_TXN, WRITE_MARKERS, TXN_OFFSET_COMMIT = \
    10, 22, 24, 25, 26, 27, 28
NONE, INVALID_TXN_STATE, INVALID_PID_MAPPING, CONCURRENT, PRODUCER_FENCED = 0, 48, 49, 51, 90
UNKNOWN_TOPIC_OR_PARTITION, OPERATION_NOT_ATTEMPTED, CLUSTER_AUTH, TRANSACTION_ABORTABLE = 3, 55, 31, 120


def coord(cluster, txn_id):
    c = wait_coordinators(cluster.brokers[1].port, 1, [txn_id])[0]
    return cluster.brokers[c["NodeId"]].port


def group_coord(cluster, group):
    return coordinator_port(cluster, group)  # waits until the group's partition is loaded


def init_pid(port, txn_id, version=5):
    out = {}

    def ok():
        out.update(K.call(port, INIT_PID, version, {"TransactionalId": txn_id, "TransactionTimeoutMs": 60000}))
        return out["ErrorCode"] == NONE
    H.wait_for(ok, timeout=30, what="InitProducerId for %s (%s)" % (txn_id, out.get("ErrorCode")))
    return out["ProducerId"], out["ProducerEpoch"]


def add_v3(port, txn_id, pid, epoch, topic, parts):
    r = K.call(port, ADD_PARTS, 3, {"V3AndBelowTransactionalId": txn_id, "V3AndBelowProducerId": pid,
                                    "V3AndBelowProducerEpoch": epoch,
                                    "V3AndBelowTopics": [{"Name": topic, "Partitions": parts}]})
    return {(t["Name"], p["PartitionIndex"]): p["PartitionErrorCode"]
            for t in r["ResultsByTopicV3AndBelow"] for p in t["ResultsByPartition"]}


def add_v4(port, txns, version=5, client_id="gregor-test"):
    r = K.call(port, ADD_PARTS, version, {"Transactions": [
        {"TransactionalId": t, "ProducerId": pid, "ProducerEpoch": ep, "VerifyOnly": verify,
         "Topics": [{"Name": topic, "Partitions": parts} for topic, parts in topics]}
        for t, pid, ep, verify, topics in txns]}, client_id=client_id)
    res = {x["TransactionalId"]: {(t["Name"], p["PartitionIndex"]): p["PartitionErrorCode"]
                                  for t in x["TopicResults"] for p in t["ResultsByPartition"]}
           for x in r["ResultsByTransaction"]}
    return r["ErrorCode"], res


def txn_commit(port, txn_id, pid, epoch, group, offsets, version=4):
    r = K.call(port, TXN_OFFSET_COMMIT, version, {
        "TransactionalId": txn_id, "GroupId": group, "ProducerId": pid, "ProducerEpoch": epoch,
        "Topics": [{"Name": "tv", "Partitions": [{"PartitionIndex": p, "CommittedOffset": o} for p, o in offsets]}]})
    return sorted({p["ErrorCode"] for t in r["Topics"] for p in t["Partitions"]})


def test_transaction_flow_at_3_9_versions(three):
    create_topic(three, "tv", 2)
    tid, group = "tv-txn", "tv-group"
    tp = coord(three, tid)
    gp = group_coord(three, group)
    pid, epoch = init_pid(tp, tid)
    assert add_v3(tp, tid, pid, epoch, "tv", [0]) == {("tv", 0): NONE}
    r = K.call(tp, ADD_OFFSETS, 4, {"TransactionalId": tid, "ProducerId": pid, "ProducerEpoch": epoch,
                                    "GroupId": group})
    assert r["ErrorCode"] == NONE
    assert txn_commit(gp, tid, pid, epoch, group, [(0, 7), (1, 9)]) == [NONE]
    # v5 verification, batched: two transactions in one request
    other = "tv-other"
    op = coord(three, other)
    if op == tp:
        opid, oepoch = init_pid(tp, other)
    else:
        opid, oepoch = -1, -1
    err, res = add_v4(tp, [(tid, pid, epoch, True, [("tv", [0, 1])]),
                           ("tv-unknown", 4242, 0, True, [("tv", [0])])] +
                      ([(other, opid, oepoch, True, [("tv", [0])])] if op == tp else []))
    assert err == NONE
    assert res[tid] == {("tv", 0): NONE, ("tv", 1): TRANSACTION_ABORTABLE}
    assert res["tv-unknown"] == {("tv", 0): INVALID_PID_MAPPING} or \
        res["tv-unknown"] == {("tv", 0): 16}  # NOT_COORDINATOR when another broker coordinates it
    if op == tp:  # a transaction with nothing added yet (Empty)
        assert res[other] == {("tv", 0): TRANSACTION_ABORTABLE}
    # a stale epoch is fenced; an unknown partition fails the transaction (others not attempted)
    err, res = add_v4(tp, [(tid, pid, epoch - 1 if epoch > 0 else epoch + 1, True, [("tv", [0])])], version=4)
    assert err == NONE and res[tid] == {("tv", 0): PRODUCER_FENCED}
    err, res = add_v4(tp, [(tid, pid, epoch, False, [("tv", [1, 7]), ("nosuch", [0])])])
    assert res[tid] == {("tv", 1): OPERATION_NOT_ATTEMPTED, ("tv", 7): UNKNOWN_TOPIC_OR_PARTITION,
                        ("nosuch", 0): UNKNOWN_TOPIC_OR_PARTITION}
    # a broker's non-verify v4 request adds the partition: now verified
    err, res = add_v4(tp, [(tid, pid, epoch, False, [("tv", [1])])])
    assert (err, res[tid]) == (NONE, {("tv", 1): NONE})
    assert add_v4(tp, [(tid, pid, epoch, True, [("tv", [0, 1])])])[1][tid] == {("tv", 0): NONE, ("tv", 1): NONE}
    # an empty batch answers nothing
    assert add_v4(tp, []) == (NONE, {})
    r = K.call(tp, END_TXN, 4, {"TransactionalId": tid, "ProducerId": pid, "ProducerEpoch": epoch, "Committed": True})
    assert r["ErrorCode"] == NONE

    def visible():
        f = K.call(gp, OFFSET_FETCH, 8, {"Groups": [{"GroupId": group, "Topics": None}], "RequireStable": True})
        return {p["PartitionIndex"]: p["CommittedOffset"] for t in f["Groups"][0]["Topics"] for p in t["Partitions"]}
    H.wait_for(lambda: visible() == {0: 7, 1: 9}, timeout=30, what="committed offsets after EndTxn v4")
    # while the markers go out, verification says CONCURRENT_TRANSACTIONS or (done) ABORTABLE
    res = add_v4(tp, [(tid, pid, epoch, True, [("tv", [0])])])[1][tid][("tv", 0)]
    assert res in (CONCURRENT, TRANSACTION_ABORTABLE)
    # the old versions still work next to the new ones
    pid2, epoch2 = init_pid(tp, tid, version=3)
    assert pid2 == pid and epoch2 == epoch + 1
    assert K.call(tp, END_TXN, 2, {"TransactionalId": tid, "ProducerId": pid, "ProducerEpoch": epoch2,
                                   "Committed": False})["ErrorCode"] in (NONE, INVALID_TXN_STATE)
    still_serving(tp)


def test_txn_offset_commit_v4_transaction_abortable(three):
    create_topic(three, "tv", 2)
    tid, group = "toc-txn", "toc-group"
    tp = coord(three, tid)
    gp = group_coord(three, group)
    pid, epoch = init_pid(tp, tid)
    assert add_v3(tp, tid, pid, epoch, "tv", [0]) == {("tv", 0): NONE}
    # the group's __consumer_offsets partition was never added (no AddOffsetsToTxn): KIP-890
    # verification refuses the commit; 3.9 tells v4 clients TRANSACTION_ABORTABLE, v3 INVALID_TXN_STATE
    assert txn_commit(gp, tid, pid, epoch, group, [(0, 5)], version=4) == [TRANSACTION_ABORTABLE]
    assert txn_commit(gp, tid, pid, epoch, group, [(0, 5)], version=3) == [INVALID_TXN_STATE]
    f = K.call(gp, OFFSET_FETCH, 8, {"Groups": [{"GroupId": group, "Topics": None}]})
    assert f["Groups"][0]["Topics"] == []
    # WriteTxnMarkers v1 (flexible) from a client with nothing to write for: per-partition answer
    r = K.call(tp, WRITE_MARKERS, 1, {"Markers": [{"ProducerId": 999999, "ProducerEpoch": 0, "TransactionResult": False,
                                                    "Topics": [{"Name": "nosuch", "PartitionIndexes": [0]}],
                                                    "CoordinatorEpoch": 0}]})
    assert [(m["ProducerId"], [(t["Name"], [p["ErrorCode"] for p in t["Partitions"]]) for t in m["Topics"]])
            for m in r["Markers"]] == [(999999, [("nosuch", [UNKNOWN_TOPIC_OR_PARTITION])])]
    still_serving(gp)


def test_add_partitions_v4_hostile(three):
    port = three.brokers[1].port
    # a Transactions count far past the frame: connection closed, nothing allocated for it
    frame = K.encode_request(ADD_PARTS, 5, {"Transactions": [
        {"TransactionalId": "t", "ProducerId": 1, "ProducerEpoch": 0, "VerifyOnly": True, "Topics": []}]})
    body = bytearray(frame[4:])
    at = body.index(b"\x02\x02t")  # count 1 -> uvarint 2, then "t"
    body = body[:at] + W.uvarint(0x7FFFFFF0) + body[at + 1:]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        assert W.recv_frame(s, 10) is None
    # a null TransactionalId (not nullable in the schema): closed as well
    body = bytearray(frame[4:])
    at = body.index(b"\x02\x02t")
    body = body[:at + 1] + b"\x00" + body[at + 3:]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        assert W.recv_frame(s, 10) is None
    still_serving(port)


def test_add_partitions_v4_needs_cluster_action(cluster_factory, zk_connect):
    from test_groups_v39 import CONFIG
    cfg = dict(CONFIG, **AUTH)
    cfg.update({"offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1"})
    c = cluster_factory(zk_connect, n=1, config=cfg)
    port = c.brokers[1].port
    create_topic(c, "tv", 1)
    # alice (no ACLs) is refused as a whole; the broker principal (a super user) is answered
    err, res = add_v4(port, [("t", 1, 0, True, [("tv", [0])])], client_id="User:alice")
    assert (err, res) == (CLUSTER_AUTH, {})
    err, res = add_v4(port, [("t", 1, 0, True, [("tv", [0])])])
    assert err == NONE and set(res) == {"t"}
    # v3 from alice: TransactionalId WRITE, per partition
    assert add_v3(port, "t", 1, 0, "tv", [0]) != {}
    r = K.call(port, ADD_PARTS, 3, {"V3AndBelowTransactionalId": "t", "V3AndBelowProducerId": 1,
                                    "V3AndBelowProducerEpoch": 0,
                                    "V3AndBelowTopics": [{"Name": "tv", "Partitions": [0]}]}, client_id="User:alice")
    assert r["ResultsByTopicV3AndBelow"][0]["ResultsByPartition"][0]["PartitionErrorCode"] == 53
    still_serving(port)
