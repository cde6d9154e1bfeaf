"""KIP-664 (issues 24 and 29): DescribeProducers v0, DescribeTransactions v0, ListTransactions
v0-1 through the wire (kafka_codec.py), and `gregorctl transactions` finding and aborting a real
hanging transaction.

The hanging transaction is made as Kafka 2.7 could make one: with KIP-890 verification off, a
transactional produce for a partition the producer never added with AddPartitionsToTxn lands
(the coordinator knows nothing of it, so neither its timeout nor its markers ever end it) and
holds the partition's last stable offset; its batch carries a timestamp 20 minutes old so that
find-hanging's default 15-minute bound applies without waiting. Principals other than
User:ANONYMOUS come from the TEST-ONLY key gregor.test.principal.by.client.id (see
test_acls.py). No timing assertions: only generous liveness deadlines."""

import socket
import struct
import subprocess
import time
import uuid

import pytest

import gregor_harness as H
import kafka_codec as K
import kafka_wire as W
from test_transactions import CONFIG, _crc32c, consume, create, find_txn_coordinator, state

DP, DT, LT = 61, 65, 66
NONE, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR = 0, 3, 6, 16
INVALID_TOPIC, TOPIC_AUTH, TXN_ID_AUTH, INVALID_REQUEST, TXN_ID_NOT_FOUND = 17, 29, 53, 42, 105

AUTH = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS;User:admin",
    "gregor.test.principal.by.client.id": "true",
}


def batch(values, pid, epoch, seq, ts_ms):
    """One transactional record batch (magic 2) of values, timestamps ts_ms."""
    recs = b""
    for i, v in enumerate(values):
        body = b"\x00" + b"\x00" + bytes([i * 2]) + b"\x01" + bytes([len(v) * 2]) + v + b"\x00"
        recs += bytes([len(body) * 2]) + body
    n = len(values)
    after = struct.pack(">hiqqqhii", 0x10, n - 1, ts_ms, ts_ms, pid, epoch, seq, n) + recs
    rest = struct.pack(">ib", -1, 2) + struct.pack(">I", _crc32c(after)) + after
    return struct.pack(">qi", 0, len(rest)) + rest


def retry(fn, ok=lambda r: True, timeout=30, what="answer"):
    box = [None]

    def once():
        box[0] = fn()
        return ok(box[0])
    H.wait_for(once, timeout, what, interval=0.2)
    return box[0]


def coordinator(cl, tid):
    err, node = find_txn_coordinator(cl.running()[0].port, tid)
    assert err == 0, err
    return node


def init_pid(port, tid, timeout_ms=60000):
    r = retry(lambda: K.call(port, 22, 4, {"TransactionalId": tid, "TransactionTimeoutMs": timeout_ms}),
              lambda r: r["ErrorCode"] == 0, what="InitProducerId")
    return r["ProducerId"], r["ProducerEpoch"]


def add_partition(port, tid, pid, epoch, topic, p):
    r = retry(lambda: K.call(port, 24, 2, {"V3AndBelowTransactionalId": tid, "V3AndBelowProducerId": pid,
                                          "V3AndBelowProducerEpoch": epoch,
                                          "V3AndBelowTopics": [{"Name": topic, "Partitions": [p]}]}),
              lambda r: r["ResultsByTopicV3AndBelow"][0]["ResultsByPartition"][0]["PartitionErrorCode"] == 0,
              what="AddPartitionsToTxn")
    return r


def produce(port, tid, topic, p, records):
    r = K.call(port, 0, 8, {"TransactionalId": tid, "Acks": -1, "TimeoutMs": 10000,
                            "TopicData": [{"Name": topic, "PartitionData": [{"Index": p, "Records": records}]}]})
    return r["Responses"][0]["PartitionResponses"][0]


def describe_producers(port, topics, client_id="gregor-test"):
    return K.call(port, DP, 0, {"Topics": [{"Name": t, "PartitionIndexes": ps} for t, ps in topics]},
                  client_id=client_id)["Topics"]


def lso_answer(port, topic, p):
    """ListOffsets v5 (read_committed, latest) of topic-p: the partition's answer."""
    r = K.call(port, 2, 5, {"ReplicaId": -1, "IsolationLevel": 1,
                            "Topics": [{"Name": topic, "Partitions": [{"PartitionIndex": p, "Timestamp": -1}]}]})
    return r["Topics"][0]["Partitions"][0]


def lso_or_none(port, topic, p):
    """The LSO, or None while the broker answers with an error (not the leader yet)."""
    part = lso_answer(port, topic, p)
    return part["Offset"] if part["ErrorCode"] == 0 else None


def lso(port, topic, p):
    part = lso_answer(port, topic, p)
    assert part["ErrorCode"] == 0, part
    return part["Offset"]


def alive(port):
    r = K.call(port, 18, 3, {"ClientSoftwareName": "t", "ClientSoftwareVersion": "1"})
    return r["ErrorCode"] == 0


def truncated(port, api_key, version, body, cut):
    """Sends the request frame less its last `cut` bytes (size prefix fixed): the broker must
    close the connection, and keep serving others."""
    frame = K.encode_request(api_key, version, body)[4:]
    frame = frame[:len(frame) - cut]
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(struct.pack(">i", len(frame)) + frame)
    assert W.closed_by_peer(s, timeout=10)
    s.close()


def hanging_txn(cl, tid, topic, p, values, age_ms=20 * 60 * 1000):
    """A transactional batch on topic-p that the coordinator never heard of (no AddPartitionsToTxn;
    needs transaction.partition.verification.enable=false). Returns (pid, epoch, base offset)."""
    pid, epoch = init_pid(cl[coordinator(cl, tid)].port, tid)
    leader = cl[state(cl, topic, p)["leader"]].port
    pr = produce(leader, tid, topic, p, batch(values, pid, epoch, 0, int(time.time() * 1000) - age_ms))
    assert pr["ErrorCode"] == 0, pr
    return pid, epoch, pr["BaseOffset"]


@pytest.fixture
def two(cluster_factory, zk_connect):
    cfg = dict(CONFIG)
    cfg["transaction.partition.verification.enable"] = "false"
    cfg["transaction.state.log.replication.factor"] = "2"
    cfg["offsets.topic.replication.factor"] = "2"
    return cluster_factory(zk_connect, n=2, config=cfg)


def test_describe_producers(two):
    cl = two
    create(cl, "dp", 1, rf=1)
    leader = state(cl, "dp", 0)["leader"]
    other = next(b for b in cl.brokers if b != leader)
    pid, epoch, base = hanging_txn(cl, "dp-tx", "dp", 0, [b"a", b"b", b"c"], age_ms=0)
    topics = describe_producers(cl[leader].port, [("dp", [0, 7]), ("nosuch", [0]), ("bad/name", [1])])
    assert [t["Name"] for t in topics] == ["dp", "nosuch", "bad/name"]
    p0, p7 = topics[0]["Partitions"]
    assert p0["ErrorCode"] == NONE and p0["ErrorMessage"] is None
    [s] = p0["ActiveProducers"]
    assert (s["ProducerId"], s["ProducerEpoch"], s["LastSequence"]) == (pid, epoch, 2)
    assert s["CurrentTxnStartOffset"] == base and s["CoordinatorEpoch"] == -1
    assert abs(s["LastTimestamp"] - time.time() * 1000) < 3600_000
    assert p7["ErrorCode"] == UNKNOWN_TOPIC_OR_PARTITION and p7["ActiveProducers"] == []
    assert topics[1]["Partitions"] == [{"PartitionIndex": 0, "ErrorCode": UNKNOWN_TOPIC_OR_PARTITION,
                                        "ErrorMessage": "This server does not host this topic-partition.",
                                        "ActiveProducers": []}]
    bad = topics[2]["Partitions"][0]
    assert bad["PartitionIndex"] == 1 and bad["ErrorCode"] == INVALID_TOPIC and bad["ErrorMessage"]
    # a broker that hosts no replica of the partition
    [t] = describe_producers(cl[other].port, [("dp", [0])])
    assert t["Partitions"][0]["ErrorCode"] == NOT_LEADER_OR_FOLLOWER
    # nothing asked, nothing answered
    assert K.call(cl[leader].port, DP, 0, {"Topics": []})["Topics"] == []
    # one partition named 2^20 + 1 times (a 4 MB request asking for an answer of every producer
    # each time): the connection is closed, memory stays bounded, the broker keeps serving
    frame = K.encode_request(DP, 0, {"Topics": [{"Name": "dp", "PartitionIndexes": [0] * ((1 << 20) + 1)}]})
    s = socket.create_connection(("127.0.0.1", cl[leader].port), timeout=10)
    s.sendall(frame)
    assert W.closed_by_peer(s, timeout=20)
    s.close()
    assert alive(cl[leader].port)
    # a body cut short: the connection is closed and the broker keeps serving
    truncated(cl[leader].port, DP, 0, {"Topics": [{"Name": "dp", "PartitionIndexes": [0, 1, 2]}]}, 5)
    assert alive(cl[leader].port)
    # an array count far beyond the frame
    s = socket.create_connection(("127.0.0.1", cl[leader].port), timeout=10)
    hdr = K.encode_request(DP, 0, {"Topics": []})[4:]
    evil = hdr[:-2] + W.uvarint(0x7ffffff0) + b"\x00"
    s.sendall(struct.pack(">i", len(evil)) + evil)
    assert W.closed_by_peer(s, timeout=10)
    s.close()
    assert alive(cl[leader].port)


def test_list_and_describe_transactions(two):
    cl = two
    create(cl, "lt", 2, rf=2)
    tid = "lt-ongoing"
    coord = coordinator(cl, tid)
    cport = cl[coord].port
    other = cl[next(b for b in cl.brokers if b != coord)].port
    pid, epoch = init_pid(cport, tid)
    add_partition(cport, tid, pid, epoch, "lt", 1)
    lport = cl[state(cl, "lt", 1)["leader"]].port
    assert produce(lport, tid, "lt", 1, batch([b"x"], pid, epoch, 0, int(time.time() * 1000)))["ErrorCode"] == 0

    # DescribeTransactions v0 at the coordinator: ongoing, with its partition; errors per id
    r = K.call(cport, DT, 0, {"TransactionalIds": [tid, "lt-none", ""]})["TransactionStates"]
    assert [x["TransactionalId"] for x in r] == [tid, "lt-none", ""]
    st = r[0]
    assert st["ErrorCode"] == NONE and st["TransactionState"] == "Ongoing"
    assert (st["ProducerId"], st["ProducerEpoch"], st["TransactionTimeoutMs"]) == (pid, epoch, 60000)
    assert 0 < st["TransactionStartTimeMs"] <= time.time() * 1000 + 1000
    assert st["Topics"] == [{"Topic": "lt", "Partitions": [1]}]
    none_coord = r[1]["ErrorCode"]
    assert none_coord in (TXN_ID_NOT_FOUND, NOT_COORDINATOR)  # "lt-none" may live on another partition
    assert r[2]["ErrorCode"] == INVALID_REQUEST
    # an id whose __transaction_state partition this broker does not lead (not loaded here)
    [x] = K.call(other, DT, 0, {"TransactionalIds": [tid]})["TransactionStates"]
    assert x["ErrorCode"] == NOT_COORDINATOR and x["Topics"] == []
    # an id of this coordinator that was never used
    free_id = next(f"lt-free-{i}" for i in range(1000) if coordinator(cl, f"lt-free-{i}") == coord)
    [x] = K.call(cport, DT, 0, {"TransactionalIds": [free_id]})["TransactionStates"]
    assert x["ErrorCode"] == TXN_ID_NOT_FOUND

    # ListTransactions v0: every id of this coordinator; filters
    def listing(port, ver=0, **body):
        r = K.call(port, LT, ver, body)
        assert r["ErrorCode"] == NONE, r
        return r
    r = listing(cport)
    assert {"TransactionalId": tid, "ProducerId": pid, "TransactionState": "Ongoing"} in r["TransactionStates"]
    assert r["UnknownStateFilters"] == []
    assert all(x["TransactionalId"] != tid for x in listing(other)["TransactionStates"])
    r = listing(cport, StateFilters=["Ongoing", "Bogus", "Bogus"])
    assert [x["TransactionalId"] for x in r["TransactionStates"]] == [tid] and r["UnknownStateFilters"] == ["Bogus"]
    assert listing(cport, StateFilters=["Bogus"])["TransactionStates"] == []
    assert listing(cport, StateFilters=["Empty"])["TransactionStates"] == []
    assert listing(cport, ProducerIdFilters=[pid + 1000])["TransactionStates"] == []
    assert [x["ProducerId"] for x in listing(cport, ProducerIdFilters=[pid])["TransactionStates"]] == [pid]
    # v1 (KIP-994): DurationFilter; -1 = all
    assert [x["TransactionalId"] for x in listing(cport, 1, DurationFilter=-1)["TransactionStates"]] == [tid]
    assert listing(cport, 1, DurationFilter=3600_000)["TransactionStates"] == []
    time.sleep(0.05)  # not a bound: the transaction must be older than 0 ms
    assert [x["TransactionalId"] for x in listing(cport, 1, DurationFilter=0)["TransactionStates"]] == [tid]
    # a v0 request cannot carry the v1 field (the codec refuses it: not ignorable)
    with pytest.raises(K.CodecError):
        K.encode_request(LT, 0, {"DurationFilter": 5})

    # commit: the id lists as CompleteCommit with no partitions
    r = K.call(cport, 26, 2, {"TransactionalId": tid, "ProducerId": pid, "ProducerEpoch": epoch, "Committed": True})
    assert r["ErrorCode"] == 0
    st = retry(lambda: K.call(cport, DT, 0, {"TransactionalIds": [tid]})["TransactionStates"][0],
               lambda s: s["TransactionState"] == "CompleteCommit", what="CompleteCommit")
    assert st["Topics"] == []
    # malformed: truncated bodies close the connection; the broker keeps serving
    truncated(cport, LT, 1, {"StateFilters": ["Ongoing"], "DurationFilter": 5}, 3)
    truncated(cport, DT, 0, {"TransactionalIds": [tid]}, 2)
    assert alive(cport)



def test_describe_transactions_bounded(two):
    """DescribeTransactions repeats a transaction's partitions for every time its id is named: an
    id named 2^19 times (a 4 MB request) for a transaction over 2 partitions would make an answer
    of 2^20 partitions and more; the connection is closed instead, the broker keeps serving."""
    cl = two
    create(cl, "dtb", 2, rf=1)
    tid = "dtb-tx"
    cport = cl[coordinator(cl, tid)].port
    pid, epoch = init_pid(cport, tid)
    add_partition(cport, tid, pid, epoch, "dtb", 0)
    add_partition(cport, tid, pid, epoch, "dtb", 1)
    [x] = K.call(cport, DT, 0, {"TransactionalIds": [tid]})["TransactionStates"]
    assert x["ErrorCode"] == NONE and x["Topics"] == [{"Topic": "dtb", "Partitions": [0, 1]}]
    # a thousand times: answered
    r = K.call(cport, DT, 0, {"TransactionalIds": [tid] * 1000})["TransactionStates"]
    assert len(r) == 1000 and all(len(x["Topics"][0]["Partitions"]) == 2 for x in r)
    frame = K.encode_request(DT, 0, {"TransactionalIds": [tid] * (1 << 19)})
    s = socket.create_connection(("127.0.0.1", cport), timeout=10)
    s.sendall(frame)
    assert W.closed_by_peer(s, timeout=30)
    s.close()
    assert alive(cport)


@pytest.fixture
def secured(cluster_factory, zk_connect):
    cfg = dict(CONFIG)
    cfg.update(AUTH)
    cfg["transaction.partition.verification.enable"] = "false"
    cfg["transaction.state.log.replication.factor"] = "1"
    cfg["transaction.state.log.min.isr"] = "1"
    cfg["transaction.state.log.min.isr"] = "1"
    cfg["offsets.topic.replication.factor"] = "1"
    return cluster_factory(zk_connect, n=1, config=cfg)


def create_acl(port, rtype, name, principal, op):
    r = K.call(port, 30, 2, {"Creations": [{"ResourceType": rtype, "ResourceName": name, "ResourcePatternType": 3,
                                            "Principal": principal, "Host": "*", "Operation": op,
                                            "PermissionType": 3}]}, client_id="User:admin")
    assert r["Results"][0]["ErrorCode"] == 0, r


def test_kip664_authorization(secured):
    """Topic READ for DescribeProducers, TransactionalId DESCRIBE for DescribeTransactions (and
    only the topics the principal may DESCRIBE), ListTransactions lists only the ids the
    principal may DESCRIBE (no error)."""
    cl = secured
    port = cl[1].port
    create(cl, "sec-a", 1, rf=1)
    create(cl, "sec-b", 1, rf=1)
    tid = "sec-tx"
    assert coordinator(cl, tid) == 1
    pid, epoch = init_pid(port, tid)
    add_partition(port, tid, pid, epoch, "sec-a", 0)
    add_partition(port, tid, pid, epoch, "sec-b", 0)
    retry(lambda: K.call(port, LT, 0, {}, client_id="User:admin"),
          lambda r: any(x["TransactionalId"] == tid for x in r["TransactionStates"]), what="listed")

    # bob has nothing
    [t] = describe_producers(port, [("sec-a", [0])], client_id="User:bob")
    assert t["Partitions"][0]["ErrorCode"] == TOPIC_AUTH
    assert t["Partitions"][0]["ErrorMessage"] == "Topic authorization failed."
    # an unknown topic also answers TOPIC_AUTHORIZATION_FAILED to bob (existence hidden)
    [t] = describe_producers(port, [("sec-nosuch", [0])], client_id="User:bob")
    assert t["Partitions"][0]["ErrorCode"] == TOPIC_AUTH
    [x] = K.call(port, DT, 0, {"TransactionalIds": [tid]}, client_id="User:bob")["TransactionStates"]
    assert x["ErrorCode"] == TXN_ID_AUTH and x["Topics"] == []
    r = K.call(port, LT, 1, {}, client_id="User:bob")
    assert r["ErrorCode"] == NONE and r["TransactionStates"] == []

    # bob may READ sec-a, DESCRIBE the id and DESCRIBE sec-a only (ResourceType 2 topic, 5 txn id;
    # Operation 3 READ, 8 DESCRIBE)
    create_acl(port, 2, "sec-a", "User:bob", 3)
    create_acl(port, 5, tid, "User:bob", 8)
    [t] = retry(lambda: describe_producers(port, [("sec-a", [0])], client_id="User:bob"),
                lambda ts: ts[0]["Partitions"][0]["ErrorCode"] == NONE, what="READ granted")
    [t] = describe_producers(port, [("sec-b", [0])], client_id="User:bob")
    assert t["Partitions"][0]["ErrorCode"] == TOPIC_AUTH
    [x] = K.call(port, DT, 0, {"TransactionalIds": [tid]}, client_id="User:bob")["TransactionStates"]
    assert x["ErrorCode"] == NONE and x["Topics"] == [{"Topic": "sec-a", "Partitions": [0]}]  # READ implies DESCRIBE
    [x] = K.call(port, DT, 0, {"TransactionalIds": [tid]}, client_id="User:admin")["TransactionStates"]
    assert sorted(t["Topic"] for t in x["Topics"]) == ["sec-a", "sec-b"]
    r = K.call(port, LT, 0, {}, client_id="User:bob")
    assert [x["TransactionalId"] for x in r["TransactionStates"]] == [tid]


def ctl(cl, *args, check=True):
    glob = list(args[:2]) if args[:1] == ("--timeout-ms",) else []
    args = args[len(glob):]
    r = subprocess.run([H.GREGORCTL, "--bootstrap-server", ",".join(f"127.0.0.1:{b.port}" for b in cl.running()),
                        *glob, "transactions", *args], capture_output=True, text=True, timeout=60)
    if check:
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r


def table(out):
    """prettyPrintTable's output: each cell padded and followed by a tab."""
    lines = out.splitlines()
    assert lines and all(line.endswith("\t") for line in lines), out
    return [[c.strip() for c in line.split("\t")[:-1]] for line in lines]


def test_gregorctl_find_and_abort_hanging_transaction(two):
    cl = two
    create(cl, "hang", 2, rf=2)
    leader = state(cl, "hang", 0)["leader"]
    lport = cl[leader].port
    # committed data before, the hanging transaction, committed data after
    tid_ok = "hang-ok"
    cport = cl[coordinator(cl, tid_ok)].port
    pid_ok, ep_ok = init_pid(cport, tid_ok)

    def commit_one(value, seq):
        add_partition(cport, tid_ok, pid_ok, ep_ok, "hang", 0)
        assert produce(lport, tid_ok, "hang", 0, batch([value], pid_ok, ep_ok, seq, int(time.time() * 1000)))[
            "ErrorCode"] == 0
        r = K.call(cport, 26, 2, {"TransactionalId": tid_ok, "ProducerId": pid_ok, "ProducerEpoch": ep_ok,
                                  "Committed": True})
        assert r["ErrorCode"] == 0, r
    commit_one(b"before", 0)
    H.wait_for(lambda: consume(cl, "hang", 2, "read_committed", timeout=5, quiet=0.5) == ["before"], 30, "before")
    pid, epoch, start = hanging_txn(cl, "hang-tx", "hang", 0, [b"h1", b"h2"])
    # a fresh open transaction on the other partition, properly added: not hanging
    tid_open = "hang-open"
    oport = cl[coordinator(cl, tid_open)].port
    pid_open, ep_open = init_pid(oport, tid_open)
    add_partition(oport, tid_open, pid_open, ep_open, "hang", 1)
    l1 = cl[state(cl, "hang", 1)["leader"]].port
    assert produce(l1, tid_open, "hang", 1, batch([b"o"], pid_open, ep_open, 0, int(time.time() * 1000)))[
        "ErrorCode"] == 0
    retry(lambda: commit_one(b"after", 1) or True, what="after")
    assert lso(lport, "hang", 0) == start  # the hanging transaction holds the LSO
    assert consume(cl, "hang", 1, "read_committed", timeout=5, quiet=0.5) == ["before"]

    # describe-producers prints Kafka's columns
    rows = table(ctl(cl, "describe-producers", "--topic", "hang", "--partition", "0").stdout)
    assert rows[0] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                       "CurrentTransactionStartOffset"]
    by_pid = {int(r[0]): r for r in rows[1:]}
    assert by_pid[pid][1:4] == [str(epoch), "-1", "1"] and by_pid[pid][5] == str(start)
    assert by_pid[pid_ok][5] == "None"
    # list / describe
    rows = table(ctl(cl, "list").stdout)
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    listed = {r[0]: r for r in rows[1:]}
    assert listed["hang-tx"][1:] == [str(coordinator(cl, "hang-tx")), str(pid), "Empty"]
    assert listed[tid_open][3] == "Ongoing"
    # only transactions started over an hour ago: none, except (as Kafka 3.9) ids whose start time
    # is -1 (Empty since InitProducerId: now - (-1) is over any bound)
    rows = table(ctl(cl, "list", "--duration-filter", "3600000").stdout)
    assert [(r[0], r[3]) for r in rows[1:]] == [("hang-tx", "Empty")]
    rows = table(ctl(cl, "describe", "--transactional-id", tid_open).stdout)
    assert rows[0] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                       "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                       "TopicPartitions"]
    assert rows[1][:6] == [str(coordinator(cl, tid_open)), tid_open, str(pid_open), str(ep_open), "Ongoing", "60000"]
    assert rows[1][8] == "hang-1" and int(rows[1][7]) >= 0
    r = ctl(cl, "describe", "--transactional-id", "hang-never", check=False)
    assert r.returncode == 1
    assert r.stderr.strip() == ("Failed to describe transaction state of transactional-id `hang-never`: "
                                "DescribeTransactions request for transactionalId `hang-never` failed because the ID "
                                "could not be found. Enable debug logging for additional detail.")

    # find-hanging: exactly the hanging one (the open one is younger and known to its coordinator)
    header = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
              "LastTimestamp", "Duration(min)"]
    for args in (["--broker-id", str(leader)], ["--topic", "hang"], ["--topic", "hang", "--partition", "0"]):
        rows = table(ctl(cl, "find-hanging", *args).stdout)
        assert rows[0] == header
        assert [r[:6] for r in rows[1:]] == [["hang", "0", str(pid), str(epoch), "-1", str(start)]], args
        assert int(rows[1][7]) >= 19
    # with a bound of 0 minutes the open transaction is a candidate too, but its coordinator
    # lists its partition: still not hanging
    rows = table(ctl(cl, "find-hanging", "--topic", "hang", "--max-transaction-timeout", "0").stdout)
    assert [(r[0], r[1], r[2]) for r in rows[1:]] == [("hang", "0", str(pid))]
    r = ctl(cl, "find-hanging", check=False)
    assert r.returncode == 1 and "requires either --topic or --broker-id" in r.stderr

    # abort: a wrong start offset is refused, the right one writes the ABORT marker
    r = ctl(cl, "abort", "--topic", "hang", "--partition", "0", "--start-offset", str(start + 100), check=False)
    assert r.returncode == 1
    assert r.stderr.strip() == f"Could not find any open transactions starting at offset {start + 100} on partition hang-0"
    ctl(cl, "abort", "--topic", "hang", "--partition", "0", "--start-offset", str(start))
    # the LSO moves past it and read_committed consumers progress; the aborted records stay hidden
    H.wait_for(lambda: lso(lport, "hang", 0) > start, 30, "LSO past the aborted transaction")
    H.wait_for(lambda: consume(cl, "hang", 1, "read_committed", timeout=5, quiet=0.5) == ["before", "after"], 30,
               "read_committed consumer past the hanging transaction")
    rows = table(ctl(cl, "find-hanging", "--broker-id", str(leader)).stdout)
    assert rows[1:] == []
    rows = table(ctl(cl, "describe-producers", "--topic", "hang", "--partition", "0").stdout)
    assert {int(r[0]): r[5] for r in rows[1:]}[pid] == "None"


def test_gregorctl_transactions_errors(two):
    cl = two
    create(cl, "terr", 1, rf=1)
    leader = state(cl, "terr", 0)["leader"]
    other = next(b for b in cl.brokers if b != leader)
    r = ctl(cl, "describe-producers", "--topic", "terr", "--partition", "0", "--broker-id", str(other), check=False)
    assert r.returncode == 1
    assert r.stderr.strip() == (f"Failed to describe producers for partition terr-0 on broker {other}: Failed to "
                                f"describe active producers for partition terr-0 on brokerId {other}. Enable debug "
                                "logging for additional detail.")
    r = ctl(cl, "--timeout-ms", "1000", "describe-producers", "--topic", "nosuch", "--partition", "0", check=False)
    assert r.returncode == 1 and "on leader: This server does not host this topic-partition." in r.stderr
    r = ctl(cl, "abort", "--topic", "terr", "--partition", "0", check=False)
    assert r.returncode == 1 and "--start-offset (for brokers on 3.0 or above)" in r.stderr
    r = ctl(cl, "describe", check=False)
    assert r.returncode == 2
    # an empty partition: the table has only its header
    assert table(ctl(cl, "describe-producers", "--topic", "terr", "--partition", "0").stdout) == [[
        "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
        "CurrentTransactionStartOffset"]]


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_hanging_transaction_survives_restart_and_is_aborted(two, how):
    """The open transaction's start offset is producer state (snapshot + log replay): after the
    leader's restart (clean or SIGKILL) DescribeProducers still shows it, find-hanging still finds
    it, and the abort written then frees the LSO."""
    cl = two
    create(cl, "hr", 1, rf=1)
    leader = state(cl, "hr", 0)["leader"]
    pid, epoch, start = hanging_txn(cl, "hr-tx", "hr", 0, [b"r1"])
    if how == "stop":
        cl[leader].stop()
    else:
        cl[leader].kill()
    cl[leader].start()
    port = cl[leader].port

    def open_txn():
        [t] = describe_producers(port, [("hr", [0])])
        p = t["Partitions"][0]
        return p["ErrorCode"] == 0 and [s["CurrentTxnStartOffset"] for s in p["ActiveProducers"]
                                        if s["ProducerId"] == pid]
    assert H.wait_for(open_txn, 60, "producer state after restart") == [start]
    # DescribeProducers answers on a follower too (as Kafka): the restarted broker first gets the
    # partition as a follower of leader -1 (its replica back online), then its election as leader;
    # ListOffsets needs the leader (CI 14b caught the 3 ms between the two)
    H.wait_for(lambda: lso_or_none(port, "hr", 0) is not None, 60, "the restarted broker leading hr-0 again")
    assert lso(port, "hr", 0) == start
    rows = table(ctl(cl, "find-hanging", "--broker-id", str(leader)).stdout)
    assert [r[:6] for r in rows[1:]] == [["hr", "0", str(pid), str(epoch), "-1", str(start)]]
    ctl(cl, "abort", "--topic", "hr", "--partition", "0", "--start-offset", str(start))
    H.wait_for(lambda: lso(port, "hr", 0) > start, 30, "LSO past the aborted transaction")
    assert open_txn() == [-1]


@pytest.mark.parametrize("args", [
    ["abort", "--topic", "t", "--partition", "4294967296", "--producer-id", "1", "--producer-epoch", "0",
     "--coordinator-epoch", "0"],
    ["abort", "--topic", "t", "--partition", "0", "--producer-id", "1", "--producer-epoch", "65541",
     "--coordinator-epoch", "0"],
    ["abort", "--topic", "t", "--partition", "0", "--producer-id", "1", "--producer-epoch", "0",
     "--coordinator-epoch", "4294967296"],
    ["abort", "--topic", "t", "--partition", "0", "--producer-id", "99999999999999999999", "--producer-epoch", "0",
     "--coordinator-epoch", "0"],
    ["find-hanging", "--broker-id", "4294967297"],
    ["find-hanging", "--topic", "t", "--max-transaction-timeout", "999999999999999999"],
])
def test_gregorctl_transactions_out_of_range_arguments(args):
    """Kafka's argparse types refuse numbers that do not fit: a value cast to a narrower type would
    name another partition or epoch (abort would write its marker there). Refused before any
    connection (nothing listens on the bootstrap address)."""
    r = subprocess.run([H.GREGORCTL, "--bootstrap-server", "127.0.0.1:1", "transactions", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "bad argument" in r.stderr, (r.returncode, r.stderr)


def test_find_hanging_refuses_when_a_coordinator_is_down(cluster_factory, zk_connect):
    """A live transaction (its partition added, so its coordinator will end it) whose last write is
    older than the bound, whose coordinator's broker is down (__transaction_state replication factor
    1): no broker can list its id, which find-hanging must not take for "no transactional id"
    (hanging), or the operator's abort would lose the data the coordinator commits later."""
    cfg = dict(CONFIG)
    cfg["transaction.partition.verification.enable"] = "false"
    cfg["transaction.state.log.replication.factor"] = "1"
    cfg["transaction.state.log.min.isr"] = "1"
    cl = cluster_factory(zk_connect, n=2, config=cfg)
    create(cl, "fpos", 1, rf=1)
    leader = state(cl, "fpos", 0)["leader"]
    tid = next(f"fpos-{i}" for i in range(1000) if coordinator(cl, f"fpos-{i}") != leader)
    cport = cl[coordinator(cl, tid)].port
    pid, epoch = init_pid(cport, tid, timeout_ms=600000)
    add_partition(cport, tid, pid, epoch, "fpos", 0)
    old = int(time.time() * 1000) - 20 * 60 * 1000
    assert produce(cl[leader].port, tid, "fpos", 0, batch([b"v"], pid, epoch, 0, old))["ErrorCode"] == 0
    # its coordinator lists the partition: not hanging
    assert table(ctl(cl, "find-hanging", "--topic", "fpos").stdout)[1:] == []
    cl[coordinator(cl, tid)].stop()
    lport = cl[leader].port
    H.wait_for(lambda: [b["NodeId"] for b in K.call(lport, 3, 9, {"Topics": None})["Brokers"]] == [leader], 60,
               "the coordinator's broker gone from the metadata")
    r = ctl(cl, "find-hanging", "--topic", "fpos", check=False)
    assert r.returncode == 1 and "has no live leader" in r.stderr, (r.returncode, r.stdout, r.stderr)
    assert str(pid) not in r.stdout
