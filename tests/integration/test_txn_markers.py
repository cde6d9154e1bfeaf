"""Transaction markers (issue 24, items 1 and 2) through the wire with confluent-kafka.

1. One stuck partition must not stall the coordinator: a transaction includes an RF-1 partition
   whose only broker is then SIGKILLed (or SIGSTOPped); another transactional producer of the same
   coordinator, writing only to a healthy RF-3 topic, keeps committing and read_committed consumers
   see its commits; when the broker returns, the stuck transaction completes and its records are
   visible exactly once.
2. A failed CompleteCommit write is retried: `__transaction_state` (RF 2, min.isr 2) loses its
   follower while a transaction's marker cannot be written; once the marker is written the
   CompleteCommit write fails (not enough replicas); when the follower is back the id leaves
   PrepareCommit without the coordinator moving (same leader, same leader epoch).

No timing assertions: only generous liveness deadlines."""

import time

import pytest

import gregor_harness as H
from test_consumer_groups import java_hash
from test_transactions import CONFIG, bootstrap, consume, find_txn_coordinator, state, txn_producer

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TXN_PARTITIONS = int(CONFIG["transaction.state.log.num.partitions"])


def txn_partition(tid):
    """Kafka's partitionFor: Utils.abs(hashCode) % partitions (Utils.abs(MIN_VALUE) = 0)."""
    h = java_hash(tid)
    h = h - (1 << 32) if h >= (1 << 31) else h
    return (0 if h == -(1 << 31) else abs(h)) % TXN_PARTITIONS


def same_partition_ids(prefix_a, prefix_b):
    """Two transactional ids of one __transaction_state partition (so one coordinator)."""
    a = f"{prefix_a}-0"
    for i in range(1000):
        b = f"{prefix_b}-{i}"
        if txn_partition(b) == txn_partition(a):
            return a, b
    raise AssertionError("no pair")


def coordinator_of(cluster, tid):
    """The broker coordinating tid: FindCoordinator (which creates __transaction_state), then the
    settled leader of its partition."""
    err, _ = find_txn_coordinator(cluster.running()[0].port, tid)
    assert err == 0
    tp = txn_partition(tid)
    H.wait_for(lambda: (state(cluster, "__transaction_state", tp) or {}).get("leader", -1) >= 0, 30, "coordinator")
    coord = state(cluster, "__transaction_state", tp)["leader"]
    H.wait_for(lambda: find_txn_coordinator(cluster.running()[0].port, tid) == (0, coord), 30, "FindCoordinator")
    return coord


def create_assigned(cluster, topic, assignment):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)],
                        operation_timeout=20, request_timeout=30)[topic].result(timeout=40)
    for p, replicas in enumerate(assignment):
        H.wait_for(lambda: (state(cluster, topic, p) or {}).get("leader", -1) == replicas[0], 30, f"{topic}-{p} leader")


def all_bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.brokers.values())


def commit_one(producer, topic, partition, value, deadline):
    """One transaction of one record; retried (abort + again) on retriable errors until deadline.
    True once committed."""
    while time.time() < deadline:
        try:
            producer.begin_transaction()
            producer.produce(topic, value.encode(), partition=partition)
            producer.commit_transaction(max(1.0, min(30.0, deadline - time.time())))
            return True
        except KafkaException as e:
            err = e.args[0]
            if err.fatal() or not (err.retriable() or err.txn_requires_abort()):
                raise
            if err.txn_requires_abort():
                try:
                    producer.abort_transaction(30)
                except KafkaException:
                    pass
            time.sleep(0.2)
    return False


@pytest.mark.parametrize("how", ["kill", "pause"])
def test_stuck_partition_does_not_stall_other_transactions(cluster_factory, zk_connect, how):
    cfg = dict(CONFIG)
    cfg["zookeeper.session.timeout.ms"] = "6000"
    cl = cluster_factory(zk_connect, n=3, config=cfg)
    stuck_id, healthy_id = same_partition_ids("mk-stuck", "mk-healthy")
    coord = coordinator_of(cl, stuck_id)
    assert coordinator_of(cl, healthy_id) == coord
    data = next(b for b in (1, 2, 3) if b != coord)
    other = next(b for b in (1, 2, 3) if b not in (coord, data))
    create_assigned(cl, "mk-rf1", [[data]])
    # RF 3, led by the two brokers that stay up (the test is about markers, not produce fail-over)
    create_assigned(cl, "mk-rf3", [[coord, other, data], [other, coord, data]])
    stuck = txn_producer(cl, stuck_id, **{"bootstrap.servers": all_bootstrap(cl)})
    healthy = txn_producer(cl, healthy_id, **{"bootstrap.servers": all_bootstrap(cl)})
    assert commit_one(healthy, "mk-rf3", 0, "before", time.time() + 60)

    stuck.begin_transaction()
    for i in range(5):
        stuck.produce("mk-rf1", f"s{i}".encode(), partition=0)
    stuck.produce("mk-rf3", b"s-rf3", partition=1)
    stuck.flush(30)
    if how == "kill":
        cl[data].kill()
    else:
        cl[data].pause()
    stuck.commit_transaction(60)  # PrepareCommit is written; the mk-rf1 marker cannot be

    n = 20
    deadline = time.time() + 120
    done = 0
    for i in range(n):
        if not commit_one(healthy, "mk-rf3", i % 2, f"h{i}", deadline):
            break
        done += 1
    assert done == n, f"only {done} of {n} commits of the healthy producer while the other transaction is stuck"
    # the stuck broker is still down: the stuck transaction cannot have completed
    assert how == "pause" or not cl[data].running()
    want = ["before", "s-rf3"] + [f"h{i}" for i in range(n)]
    H.wait_for(lambda: sorted(consume(cl, "mk-rf3", 2, "read_committed", min_count=len(want), timeout=10,
                                      quiet=0.5)) == sorted(want),
               60, "read_committed sees the healthy producer's commits")

    if how == "kill":
        cl[data].start()
    else:
        cl[data].resume()
    expect = [f"s{i}" for i in range(5)]
    H.wait_for(lambda: consume(cl, "mk-rf1", 1, "read_committed", min_count=5, timeout=10, quiet=0.5) == expect,
               120, "the stuck transaction's records, exactly once")
    # the stuck id completed (CompleteCommit): its producer can run a new transaction
    assert commit_one(stuck, "mk-rf3", 0, "after", time.time() + 120)
    assert consume(cl, "mk-rf1", 1, "read_committed", min_count=5, timeout=10, quiet=1.0) == expect
    stuck.flush(10)
    healthy.flush(10)


def test_failed_complete_commit_is_retried(cluster_factory, zk_connect):
    cfg = dict(CONFIG)
    cfg.update({"transaction.state.log.replication.factor": "2", "transaction.state.log.min.isr": "2"})
    cl = cluster_factory(zk_connect, n=3, config=cfg)
    tid = "mk-retry"
    coord = coordinator_of(cl, tid)
    tp = txn_partition(tid)
    replicas = cl.get_json("/brokers/topics/__transaction_state")[0]["partitions"][str(tp)]
    assert len(replicas) == 2 and coord in replicas, replicas
    follower = next(b for b in replicas if b != coord)
    data = next(b for b in (1, 2, 3) if b not in replicas)
    H.wait_for(lambda: sorted(state(cl, "__transaction_state", tp)["isr"]) == sorted(replicas), 30, "full ISR")
    create_assigned(cl, "mk-data", [[data]])
    create_assigned(cl, "mk-next", [[coord]])
    p = txn_producer(cl, tid, **{"bootstrap.servers": all_bootstrap(cl)})
    p.begin_transaction()
    for i in range(3):
        p.produce("mk-data", f"d{i}".encode(), partition=0)
    p.flush(30)
    cl[data].kill()
    p.commit_transaction(60)  # PrepareCommit written (ISR of 2); the marker cannot be
    # the follower of the coordinator's partition goes: ISR 1 < min.isr 2
    cl[follower].kill()
    H.wait_for(lambda: state(cl, "__transaction_state", tp)["isr"] == [coord], 60, "ISR shrunk to the leader")
    st = state(cl, "__transaction_state", tp)
    assert st["leader"] == coord
    epoch = st["leader_epoch"]
    # the marker is written now; the CompleteCommit write cannot be (not enough replicas)
    cl[data].start()
    H.wait_for(lambda: consume(cl, "mk-data", 1, "read_committed", min_count=3, timeout=10, quiet=0.5)
               == ["d0", "d1", "d2"], 90, "the COMMIT marker")
    # the CompleteCommit write failed (and is being retried)
    H.wait_for(lambda: f"cannot write the completion of {tid}" in cl[coord].log(whole=True), 30,
               "a failed CompleteCommit write")
    # the follower returns: the retried CompleteCommit succeeds; no coordinator move
    cl[follower].start()
    H.wait_for(lambda: sorted(state(cl, "__transaction_state", tp)["isr"]) == sorted(replicas), 60, "ISR back")
    assert commit_one(p, "mk-next", 0, "next", time.time() + 90), "the id stayed in PrepareCommit"
    st = state(cl, "__transaction_state", tp)
    assert (st["leader"], st["leader_epoch"]) == (coord, epoch), st
    assert consume(cl, "mk-next", 1, "read_committed", min_count=1, timeout=10) == ["next"]
    p.flush(10)


def txn_states(cluster, tid):
    """The states (Kafka's TransactionLog value byte) of tid's records in __transaction_state,
    oldest first (tombstones skipped)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": f"states-{time.time()}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition("__transaction_state", txn_partition(tid), 0)])
    out, deadline = [], time.time() + 20
    try:
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    break
                continue
            k, v = m.key(), m.value()
            klen = int.from_bytes(k[2:4], "big")
            if k[4:4 + klen].decode() == tid and v is not None:
                out.append(v[16])  # i16 version | i64 pid | i16 epoch | i32 timeout | i8 state
    finally:
        c.close()
    return out


PREPARE_COMMIT, ONGOING = 2, 1


def test_next_transaction_replaces_complete_commit(cluster_factory, zk_connect):
    """Issue 24 (performance): when the producer's next AddPartitionsToTxn already waits as the
    last marker of its previous transaction is written, the coordinator writes the next
    transaction's Ongoing in place of CompleteCommit (one __transaction_state write less on the
    producer's path). A coordinator SIGKILLed after that loads Prepare* + Ongoing as an ongoing
    transaction, and both transactions are read exactly once by read_committed consumers."""
    cl = cluster_factory(zk_connect, n=3, config=CONFIG)
    tid = "mk-fold"
    coord = coordinator_of(cl, tid)
    data = next(b for b in (1, 2, 3) if b != coord)
    other = next(b for b in (1, 2, 3) if b not in (coord, data))
    create_assigned(cl, "mkf-data", [[data]])
    create_assigned(cl, "mkf-next", [[other, data, coord]])
    p = txn_producer(cl, tid, **{"bootstrap.servers": all_bootstrap(cl)})
    # the fold needs the AddPartitionsToTxn parked when the marker is written: librdkafka re-sends
    # it within ~20 ms of each CONCURRENT_TRANSACTIONS (the coordinator holds it up to 1 s), so a
    # resume rarely falls in a gap; the scenario runs again (at most 3 times) if it did
    folded, sent = False, []
    for attempt in range(3):
        p.begin_transaction()
        p.produce("mkf-data", f"d{attempt}".encode(), partition=0)
        p.flush(30)
        cl[data].pause()
        try:
            p.commit_transaction(60)  # PrepareCommit written; the marker for mkf-data waits
            p.begin_transaction()
            p.produce("mkf-next", f"n{attempt}".encode(), partition=0)
            p.poll(0.3)  # its AddPartitionsToTxn is parked meanwhile
        finally:
            cl[data].resume()
        assert p.flush(60) == 0  # registered with the transaction, then produced
        sent.append(attempt)
        states = txn_states(cl, tid)
        if states[-2:] == [PREPARE_COMMIT, ONGOING]:
            folded = True
            break
        p.commit_transaction(60)
    assert folded, f"CompleteCommit was written although the next transaction waited: {states}"
    # the coordinator dies while the folded transaction is ongoing; the next one commits it
    cl[coord].kill()
    last = sent[-1]
    deadline = time.time() + 90
    while True:
        try:
            p.commit_transaction(30)
            break
        except KafkaException as e:
            if not e.args[0].retriable() or time.time() > deadline:
                raise
            time.sleep(0.2)
    want_data = [f"d{a}" for a in sent]
    want_next = [f"n{a}" for a in sent]
    assert consume(cl, "mkf-data", 1, "read_committed", min_count=len(want_data), timeout=30) == want_data
    assert consume(cl, "mkf-next", 1, "read_committed", min_count=len(want_next), timeout=30) == want_next
    assert commit_one(p, "mkf-next", 0, "after", time.time() + 90)
    assert consume(cl, "mkf-next", 1, "read_committed", min_count=len(want_next) + 1, timeout=30) == \
        want_next + ["after"]


def test_failed_next_transaction_write_falls_back_to_complete_commit(cluster_factory, zk_connect):
    """The write of the next transaction's Ongoing in place of CompleteCommit fails
    (`__transaction_state`, RF 2 and min.isr 2, lost its follower): the id stays in PrepareCommit,
    the CompleteCommit write is retried and the waiting AddPartitionsToTxn runs again; when the
    follower is back both transactions commit, without the coordinator moving."""
    cfg = dict(CONFIG)
    cfg.update({"transaction.state.log.replication.factor": "2", "transaction.state.log.min.isr": "2"})
    cl = cluster_factory(zk_connect, n=3, config=cfg)
    tid = "mk-fold-fail"
    coord = coordinator_of(cl, tid)
    tp = txn_partition(tid)
    replicas = cl.get_json("/brokers/topics/__transaction_state")[0]["partitions"][str(tp)]
    follower = next(b for b in replicas if b != coord)
    data = next(b for b in (1, 2, 3) if b not in replicas)
    H.wait_for(lambda: sorted(state(cl, "__transaction_state", tp)["isr"]) == sorted(replicas), 30, "full ISR")
    create_assigned(cl, "mkff-data", [[data]])
    create_assigned(cl, "mkff-next", [[coord]])
    p = txn_producer(cl, tid, **{"bootstrap.servers": all_bootstrap(cl)})
    line = f"cannot write the next transaction of {tid} in place of its completion"
    sent = []
    for attempt in range(3):  # the resume may fall between two of librdkafka's AddPartitionsToTxn
        p.begin_transaction()
        p.produce("mkff-data", f"d{attempt}".encode(), partition=0)
        p.flush(30)
        cl[data].pause()
        p.commit_transaction(60)  # PrepareCommit written; the marker waits
        cl[follower].kill()  # ISR 1 < min.isr 2: no __transaction_state write can succeed
        H.wait_for(lambda: state(cl, "__transaction_state", tp)["isr"] == [coord], 60, "ISR shrunk to the leader")
        epoch = state(cl, "__transaction_state", tp)["leader_epoch"]
        p.begin_transaction()
        p.produce("mkff-next", f"n{attempt}".encode(), partition=0)
        p.poll(0.3)  # its AddPartitionsToTxn is parked meanwhile
        cl[data].resume()  # the marker is written; the folded write fails
        sent.append(attempt)
        H.wait_for(lambda: consume(cl, "mkff-data", 1, "read_committed", min_count=len(sent), timeout=10,
                                   quiet=0.5) == [f"d{a}" for a in sent], 90, "the COMMIT marker")
        H.wait_for(lambda: f"cannot write the completion of {tid}" in cl[coord].log(whole=True)
                   or line in cl[coord].log(whole=True), 30, "a failed write")
        folded = line in cl[coord].log(whole=True)
        # the follower returns: the CompleteCommit retry, then the waiting AddPartitionsToTxn succeed
        cl[follower].start()
        H.wait_for(lambda: sorted(state(cl, "__transaction_state", tp)["isr"]) == sorted(replicas), 60, "ISR back")
        deadline = time.time() + 90
        while True:
            try:
                p.commit_transaction(30)
                break
            except KafkaException as e:
                if not e.args[0].retriable() or time.time() > deadline:
                    raise
                time.sleep(0.2)
        st = state(cl, "__transaction_state", tp)
        assert (st["leader"], st["leader_epoch"]) == (coord, epoch), st
        if folded:
            break
    assert folded, "the next transaction's write was never tried in place of the completion"
    assert consume(cl, "mkff-next", 1, "read_committed", min_count=len(sent), timeout=30) == \
        [f"n{a}" for a in sent]
    states = txn_states(cl, tid)
    assert states[-1] == 4, states  # CompleteCommit of the last transaction


def test_leader_epoch_bump_keeps_coordinator_loaded(cluster_factory, zk_connect):
    """Issue 24 (stuck-partition row: a pause of ~0.5 s): a follower of the coordinator's
    __transaction_state partition dies and the controller shrinks the ISR, bumping the leader
    epoch while the coordinator stays leader. Kafka 2.7 does not re-elect the coordinator then
    (onElection only for a new leader); Gregor reloaded the partition, answering
    COORDINATOR_LOAD_IN_PROGRESS to every id of it (librdkafka waits 500 ms on that) and dropping
    its queued markers. Now the partition is loaded once, and a transaction open across the bump
    commits."""
    cl = cluster_factory(zk_connect, n=3, config=CONFIG)
    tid = "mk-epoch"
    coord = coordinator_of(cl, tid)
    tp = txn_partition(tid)
    st = state(cl, "__transaction_state", tp)
    follower = next(b for b in st["isr"] if b != coord)
    H.wait_for(lambda: len(state(cl, "__transaction_state", tp)["isr"]) == 3, 30, "full ISR")
    create_assigned(cl, "mke-data", [[coord]])
    p = txn_producer(cl, tid, **{"bootstrap.servers": all_bootstrap(cl)})
    assert commit_one(p, "mke-data", 0, "a", time.time() + 60)
    loaded = f"of __transaction_state-{tp} (coordinator epoch"
    assert cl[coord].log(whole=True).count(loaded) == 1
    p.begin_transaction()
    p.produce("mke-data", b"b", partition=0)
    p.flush(30)
    cl[follower].kill()
    H.wait_for(lambda: follower not in state(cl, "__transaction_state", tp)["isr"], 60, "ISR shrunk")
    st2 = state(cl, "__transaction_state", tp)
    assert st2["leader"] == coord and st2["leader_epoch"] > st["leader_epoch"], st2
    H.wait_for(lambda: f"Leader __transaction_state-{tp} starts at leader epoch {st2['leader_epoch']}"
               in cl[coord].log(whole=True), 30, "the coordinator applied the new leader epoch")
    time.sleep(0.5)  # several of the coordinator's 100 ms leadership polls (the old code reloaded in one)
    p.commit_transaction(60)
    assert commit_one(p, "mke-data", 0, "c", time.time() + 60)
    assert cl[coord].log(whole=True).count(loaded) == 1, "the coordinator reloaded its partition"
    assert consume(cl, "mke-data", 1, "read_committed", min_count=3, timeout=20) == ["a", "b", "c"]
