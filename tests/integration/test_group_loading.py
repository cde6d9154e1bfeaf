"""Group metadata loading in the background (docs/GROUPS.md "Persistence and failover"; issue 24
item 12). Kafka 2.7's GroupMetadataManager loads a newly led __consumer_offsets partition on its
own scheduler and answers COORDINATOR_LOAD_IN_PROGRESS only for the groups of the partitions
still loading.

The load is held deterministically with the test hook GREGOR_TEST_GROUP_LOAD_PAUSE=<file>: while
the file exists, the broker's group loader waits after each chunk it read (and before taking
ownership). The hook existed only as far as the test needs it; on the code before the fix, where
loading ran on the coordinator's only thread, the same hook held that thread, and the new member
of a group on another partition never got its JoinGroup answer (its join completes on a timer).
"""

import os
import struct
import threading
import time

import pytest

import gregor_harness as H
from test_consumer_groups import java_hash
from test_group_txn_failures import _s, bootstrap, coordinator, create, rpc

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, TopicPartition  # noqa: E402

NPARTS = 6  # __consumer_offsets partitions
CONFIG = {
    "offsets.topic.num.partitions": str(NPARTS),
    "offsets.topic.replication.factor": "2",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "100",
    "group.initial.rebalance.delay.ms": "0",
}
BIG_TOPIC_PARTITIONS = 100
BIG_ROUNDS = 60  # offset records of the big group: 100 x 60 = 6000


def offset_fetch(port, group, topic, partitions):
    """OffsetFetch v3: (top-level error, {partition: (offset, error)})."""
    body = _s(group) + struct.pack(">i", 1) + _s(topic) + struct.pack(">i", len(partitions))
    body += b"".join(struct.pack(">i", p) for p in partitions)
    r = rpc(port, 9, 3, body)
    pos = 4  # throttle
    out = {}
    (nt,) = struct.unpack_from(">i", r, pos)
    pos += 4
    for _ in range(max(nt, 0)):
        (ln,) = struct.unpack_from(">h", r, pos)
        pos += 2 + ln
        (np_,) = struct.unpack_from(">i", r, pos)
        pos += 4
        for _ in range(max(np_, 0)):
            p, off = struct.unpack_from(">iq", r, pos)
            pos += 12
            (ml,) = struct.unpack_from(">h", r, pos)
            pos += 2 + max(ml, 0)
            (err,) = struct.unpack_from(">h", r, pos)
            pos += 2
            out[p] = (off, err)
    (top,) = struct.unpack_from(">h", r, pos)
    return top, out


def group_on(partition, prefix):
    for i in range(10000):
        g = f"{prefix}-{i}"
        if (java_hash(g) & 0x7FFFFFFF) % NPARTS == partition:
            return g
    raise AssertionError("no group id")


def offsets_leaders(cl):
    out = {}
    for p in range(NPARTS):
        st = cl.get_json(f"/brokers/topics/__consumer_offsets/partitions/{p}/state")[0] or {}
        out[p] = st.get("leader", -1)
    return out


def test_other_partitions_groups_keep_working_while_a_large_group_loads(cluster_factory, zk_connect, tmp_path,
                                                                         monkeypatch):
    pause = str(tmp_path / "hold-group-loads")
    monkeypatch.setenv("GREGOR_TEST_GROUP_LOAD_PAUSE", pause)
    cl = cluster_factory(zk_connect, n=3, config=CONFIG)
    create(cl, "gl-big", BIG_TOPIC_PARTITIONS, rf=2)
    create(cl, "gl-small", 1, rf=2)
    coordinator(cl, "gl-probe")  # creates __consumer_offsets
    leaders = H.wait_for(lambda: (lambda l: l if all(v >= 0 for v in l.values()) else None)(offsets_leaders(cl)),
                         30, "__consumer_offsets leaders")
    replicas = {int(p): r for p, r in cl.get_json("/brokers/topics/__consumer_offsets")[0]["partitions"].items()}
    # the big group on a partition led by the broker killed below, which the survivor takes over;
    # the other groups on a partition the survivor leads already and whose replicas do not include
    # the victim (its leader epoch stays, so nothing there waits on the ISR change)
    pick = None
    for p_big in range(NPARTS):
        victim = leaders[p_big]
        for survivor in replicas[p_big]:
            if survivor == victim:
                continue
            for p_small in range(NPARTS):
                if leaders[p_small] == survivor and victim not in replicas[p_small]:
                    pick = (p_big, victim, survivor, p_small)
    assert pick, f"no suitable placement: leaders {leaders}, replicas {replicas}"
    p_big, victim, survivor, p_small = pick
    big, small, late = group_on(p_big, "gl-big"), group_on(p_small, "gl-small"), group_on(p_small, "gl-late")
    assert coordinator(cl, big) == victim and coordinator(cl, small) == survivor

    # the big group: 6000 offset records (simple commits, as a consumer outside group management)
    bc = Consumer({"bootstrap.servers": bootstrap(cl), "group.id": big, "enable.auto.commit": False})
    for r in range(BIG_ROUNDS):
        bc.commit(offsets=[TopicPartition("gl-big", p, r * 1000 + p) for p in range(BIG_TOPIC_PARTITIONS)],
                  asynchronous=False)
    bc.close()
    want_big = {p: (BIG_ROUNDS - 1) * 1000 + p for p in range(BIG_TOPIC_PARTITIONS)}

    # the small group: a subscribed consumer that commits all the time
    events = {"assign": 0, "revoke": 0, "commits": 0, "errors": []}
    stop = threading.Event()
    sc = Consumer({"bootstrap.servers": bootstrap(cl), "group.id": small, "enable.auto.commit": False,
                   "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})

    def on_assign(c, parts):
        events["assign"] += 1

    def on_revoke(c, parts):
        events["revoke"] += 1

    sc.subscribe(["gl-small"], on_assign=on_assign, on_revoke=on_revoke)

    def small_loop():
        n = 0
        while not stop.is_set():
            sc.poll(0.1)
            if events["assign"]:
                n += 1
                try:
                    sc.commit(offsets=[TopicPartition("gl-small", 0, n)], asynchronous=False)
                    events["commits"] += 1
                except confluent_kafka.KafkaException as e:
                    events["errors"].append(str(e))
    t = threading.Thread(target=small_loop, daemon=True)
    t.start()
    late_c = None
    try:
        H.wait_for(lambda: events["commits"] >= 3, 30, "the small group's consumer committing")

        # hold the survivor's loads, then fail the big group's coordinator over to it
        open(pause, "w").close()
        cl[victim].kill()
        sb = cl[survivor]
        # the survivor loads the partitions it now leads one at a time (Kafka's single-thread
        # loader); the first one is held, the big group's waits in the queue or is held itself
        H.wait_for(lambda: "GREGOR_TEST_GROUP_LOAD_PAUSE: loading of __consumer_offsets-" in sb.log(), 40,
                   "the victim's partitions loading (held)")
        # the big group: COORDINATOR_LOAD_IN_PROGRESS (14) while its partition loads
        top, _ = offset_fetch(sb.port, big, "gl-big", [0, 1])
        assert top == 14
        # the small group, on the same coordinator: no LOAD_IN_PROGRESS, commits go on
        before = events["commits"]
        H.wait_for(lambda: events["commits"] >= before + 10, 30, "commits of the small group during the load")
        top, parts = offset_fetch(sb.port, small, "gl-small", [0])
        assert top == 0 and parts[0][1] == 0 and parts[0][0] >= before
        # a new member of another group on a loaded partition joins (its join completes on a
        # timer of the coordinator) and gets its partition
        late_c = Consumer({"bootstrap.servers": bootstrap(cl), "group.id": late, "session.timeout.ms": 6000})
        late_got = []
        late_c.subscribe(["gl-big"], on_assign=lambda c, p: late_got.extend(p))

        def late_assigned():
            late_c.poll(0.2)
            return len(late_got) == BIG_TOPIC_PARTITIONS
        H.wait_for(late_assigned, 30, "the new group's member assigned during the load")
        # still held
        assert offset_fetch(sb.port, big, "gl-big", [0])[0] == 14
        assert f"Finished loading offsets and group metadata from __consumer_offsets-{p_big}" not in sb.log()

        # released: the big group's offsets, exactly
        os.unlink(pause)

        def big_loaded():
            top, parts = offset_fetch(sb.port, big, "gl-big", list(range(BIG_TOPIC_PARTITIONS)))
            return parts if top == 0 else None
        parts = H.wait_for(big_loaded, 30, "the big group loaded")
        assert {p: off for p, (off, err) in parts.items()} == want_big
        assert all(err == 0 for _, err in parts.values())
    finally:
        stop.set()
        t.join(10)
        if late_c is not None:
            late_c.close()
    # the small group never rebalanced and never saw an error
    assert events["assign"] == 1 and events["revoke"] == 0, events
    assert events["errors"] == [], events["errors"][:5]
    sc.close()


def test_isr_shrink_keeps_the_coordinators_groups(cluster_factory, zk_connect):
    """A follower of a __consumer_offsets partition dies: the controller removes it from the ISR
    with a new leader epoch (Kafka 2.7's removeReplicasFromIsr) and sends the leader a
    LeaderAndIsr that keeps it leader. Kafka 2.7 calls onElection only for a new leader, so the
    groups stay loaded; Gregor used to unload and reload the partition on any new epoch."""
    cl = cluster_factory(zk_connect, n=2, config=CONFIG)
    create(cl, "gl-isr", 1, rf=2)
    coordinator(cl, "gl-probe")  # creates __consumer_offsets
    leaders = H.wait_for(lambda: (lambda l: l if all(v >= 0 for v in l.values()) else None)(offsets_leaders(cl)),
                         30, "__consumer_offsets leaders")
    p = 0
    g = group_on(p, "gl-isr")
    lead = leaders[p]
    follower = next(b for b in (1, 2) if b != lead)
    assert coordinator(cl, g) == lead
    c = Consumer({"bootstrap.servers": bootstrap(cl), "group.id": g, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("gl-isr", 0, 1234)], asynchronous=False)
    c.close()
    st = cl.get_json(f"/brokers/topics/__consumer_offsets/partitions/{p}/state")[0]
    epoch = st["leader_epoch"]
    assert st["leader"] == lead
    cl[follower].kill()

    def shrunk():
        s = cl.get_json(f"/brokers/topics/__consumer_offsets/partitions/{p}/state")[0] or {}
        return s if s.get("leader_epoch", -1) > epoch else None
    st = H.wait_for(shrunk, 40, "the ISR shrunk by the controller")
    assert st["leader"] == lead and st["isr"] == [lead]
    lb = cl[lead]
    kept = f"__consumer_offsets-{p}: leader epoch {epoch} -> {st['leader_epoch']}, still its leader; groups kept"
    reload = (f"Scheduling loading of offsets and group metadata from __consumer_offsets-{p} "
              f"for leader epoch {st['leader_epoch']}")
    H.wait_for(lambda: kept in lb.log() or reload in lb.log(), 40, "the coordinator seeing the new epoch")
    assert reload not in lb.log()
    assert f"Unloaded 1 groups of __consumer_offsets-{p}" not in lb.log()
    top, parts = offset_fetch(lb.port, g, "gl-isr", [0])
    assert top == 0 and parts[0] == (1234, 0)
