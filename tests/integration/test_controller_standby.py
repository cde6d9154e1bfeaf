"""The warm standby controller (docs/ARCHITECTURE.md, "Warm standby controller", on by default)
against a real ZooKeeper: every partition-state write sets its topic's stamp
(/brokers/topics/T/partitions) in its own transaction, /controller carries the stamps marker, and
a failover keeps the states of the topics whose stamp did not move since its standby's refresh
and reads the others."""

import json

from confluent_kafka.admin import AdminClient, NewTopic

import gregor_harness as H


def bootstrap(c):
    return ",".join(f"127.0.0.1:{b.port}" for b in c.brokers.values())


def leaders(c, topic):
    md = AdminClient({"bootstrap.servers": bootstrap(c)}).list_topics(topic, timeout=20)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p.id: p.leader for p in t.partitions.values()}


def create(c, topic, assignment):
    admin = AdminClient({"bootstrap.servers": bootstrap(c)})
    admin.create_topics([NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)], request_timeout=30)[topic].result(30)
    return H.wait_for(lambda: (lambda m: m if m and len(m) == len(assignment) and all(l >= 0 for l in m.values())
                               else None)(leaders(c, topic)), 60, f"leaders of {topic}")


def stamp_and_states(c, topic, n):
    _, stamp = c.zk.get(f"/brokers/topics/{topic}/partitions")
    return stamp, [c.zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[1] for p in range(n)]


def test_state_writes_stamp_their_topic(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=2)
    ctl = c.wait_controller()
    x = ctl["brokerid"]
    other = next(i for i in c.brokers if i != x)
    data = json.loads(c.zk.get("/controller")[0])
    assert data["brokerid"] == x and data.get("gregor_state_stamps") == 1, data
    create(c, "st", [[other, x]] * 3)
    # the creation: the states' multi set the stamp
    stamp, states = stamp_and_states(c, "st", 3)
    assert stamp.mzxid == max(s.mzxid for s in states), (stamp, states)
    # a leader change (controlled shutdown of `other`): the stamp moves with the last state write
    c[other].stop()
    H.wait_for(lambda: json.loads(c.zk.get("/brokers/topics/st/partitions/0/state")[0])["isr"] == [x], 60,
               "st-0's ISR shrunk to the controller's broker")
    stamp2, states2 = stamp_and_states(c, "st", 3)
    assert all(s.version > 0 for s in states2)
    assert stamp2.mzxid > stamp.mzxid and stamp2.mzxid == max(s.mzxid for s in states2), (stamp2, states2)
    # its data: the topic's id, a second copy that a Kafka 2.x tool rewriting the topic znode
    # never touches (docs/STORAGE.md "Stray logs")
    tid = json.loads(c.zk.get("/brokers/topics/st")[0])["topic_id"]
    assert json.loads(c.zk.get("/brokers/topics/st/partitions")[0]) == {"topic_id": tid}


def test_warm_failover_reads_only_topics_written_since(cluster_factory, zk_connect):
    # no periodic refresh during the test: the only one is the one right after x's resignation
    c = cluster_factory(zk_connect, n=2, config={"gregor.controller.standby.refresh.ms": "600000"})
    x = c.wait_controller()["brokerid"]
    create(c, "wa", [[x]] * 5)
    create(c, "wb", [[x]] * 5)
    # move the controller off x: x resigns and refreshes its standby 5 s later (under the new
    # controller, which writes nothing: every partition's leader is x, alive)
    for _ in range(20):
        old = c.wait_controller()
        offset = len(c[x].log(whole=True))
        c.zk.delete("/controller")
        new = c.wait_new_controller(old["_stat"].czxid)
        if new["brokerid"] != x:
            break
    else:
        raise AssertionError("x won every re-election")
    y = new["brokerid"]
    H.wait_for(lambda: "Standby context refreshed: 2 topics, 10 partitions" in c[x].log(whole=True)[offset:], 30,
               "x's standby refresh after its resignation")
    # a state write as a controller makes it (by hand here, to place it between the refresh and
    # the failover): wa-0's leader epoch bumped, wa's stamp set in the same transaction
    path = "/brokers/topics/wa/partitions/0/state"
    raw, st = c.zk.get(path)
    state = json.loads(raw)
    state["leader_epoch"] += 1
    tx = c.zk.transaction()
    tx.set_data(path, json.dumps(state).encode(), version=st.version)
    tx.set_data("/brokers/topics/wa/partitions", c.zk.get("/brokers/topics/wa/partitions")[0])  # the id it carries
    assert all(r is not None and not isinstance(r, Exception) for r in tx.commit())
    epoch, _ = c.controller_epoch()
    offset = len(c[x].log(whole=True))
    c[y].stop()  # x, alone, takes over from its standby
    H.wait_for(lambda: x in c.all_ready_epochs().get(epoch + 1, []), 60, "x ready as controller")
    log = c[x].log(whole=True)[offset:]
    assert "Loaded 10 partition states" in log and "from the standby context: 5 of its 10 states proven current " \
        "by their topic's stamp, 5 read" in log, log[-3000:]
    assert "(warm start)" in log
    # the written state is the one the new controller holds: its next write of wa-0 (a preferred
    # election does nothing here; the state machines' start-up rewrote nothing) is conditional on
    # the version read, so ZooKeeper still holds the hand-written epoch, and the leaders are served
    assert json.loads(c.zk.get(path)[0])["leader_epoch"] == state["leader_epoch"]
    assert H.wait_for(lambda: (lambda m: m if m == {p: x for p in range(5)} else None)(leaders(c, "wa")), 30,
                      "wa led by x")


def test_cold_broker_lets_a_warm_one_take_over(cluster_factory, zk_connect):
    """/controller deleted by hand, again and again: the controller that just resigned has no
    standby context (its term's context is not one; it refills a refresh period later), so its
    failover would be cold. It defers its candidacy (controller.c defer_candidacy) and a broker
    with a standby wins, starting warm. Kafka's brokers all race: the resigned one won one
    election in three (at 100k partitions: 3-4 s to the first request instead of ~0.2 s)."""
    c = cluster_factory(zk_connect, n=3, config={"gregor.controller.standby.refresh.ms": "1000"})
    create(c, "cw", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    first = c.wait_controller()["brokerid"]
    for b in c.brokers.values():  # every other broker's standby filled once (1 s period)
        if b.id != first:
            H.wait_for(lambda: "Standby context refreshed: 1 topics" in b.log(whole=True), 30, f"broker {b.id}'s standby")
    rounds = []
    for rnd in range(8):
        old = c.wait_controller()
        x = old["brokerid"]
        offsets = {b.id: len(b.log(whole=True)) for b in c.brokers.values()}
        epoch, _ = c.controller_epoch()
        c.zk.delete("/controller", version=old["_stat"].version)
        new = c.wait_new_controller(old["_stat"].czxid)
        y = new["brokerid"]
        H.wait_for(lambda: y in c.all_ready_epochs().get(epoch + 1, []), 30, f"broker {y} ready as controller")
        xlog = c[x].log(whole=True)[offsets[x]:]
        ylog = c[y].log(whole=True)[offsets[y]:]
        rounds.append((x, y, "(warm start)" in ylog))
        assert y != x, f"round {rnd}: the resigned controller {x} won again: {rounds}\n{xlog[-3000:]}"
        assert "letting a broker with one take over first" in xlog, xlog[-3000:]
        assert "(warm start)" in ylog, f"round {rnd}: {rounds}\n{ylog[-3000:]}"
        # x refills its standby a refresh period after its resignation: wait for it, so that the
        # next round has two warm candidates again
        H.wait_for(lambda: "Standby context refreshed" in c[x].log(whole=True)[offsets[x]:], 30,
                   f"broker {x}'s standby refilled")
    print("rounds (resigned, new controller, warm):", rounds)
