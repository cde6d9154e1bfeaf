"""The leader's high watermark follows the log end promptly after an acks=1 burst (issue 14).

A follower's fetch that arrives with a new FetchOffset must move the leader's high watermark at
once, even when that fetch then waits in the fetch purgatory, and the follower must ask again as
soon as it has appended what it got. Before the fix, the HW of some partitions stayed at its old
value for 0.3-1.0 s (up to replica.fetch.wait.max.ms and more) after every acks=1 produce had
been acknowledged, so consumers saw those records that much later.

Two causes, both on the follower: (1) a new partition's first fetch usually reaches the leader
before the leader has applied its own LeaderAndIsr (UNKNOWN_TOPIC_OR_PARTITION), and the
partition then backed off a whole replica.fetch.backoff.ms (1 s); (2) a partition added to a
fetcher whose Fetch for other partitions was parked in the leader's purgatory waited for that
long poll to end (replica.fetch.wait.max.ms). The bound below (0.5 s against 1 s waits) is an
assertion on a generous bound, not a timing measurement: bench/bench_produce.py measures the
latency."""

import time

import gregor_harness as H

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 3
# Long polls at least as long as Kafka's defaults (a short wait would hide a follower whose next
# fetch is needed to move the HW); network/io threads as config/server.properties.
CONFIG = {"replica.fetch.wait.max.ms": "1000", "replica.lag.time.max.ms": "30000",
          "num.network.threads": "3", "num.io.threads": "8"}


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running())


def full_isr(cluster, topic):
    for p in range(PARTITIONS):
        st = cluster.get_json(f"/brokers/topics/{topic}/partitions/{p}/state")[0]
        if not st or len(st.get("isr", [])) != 3:
            return False
    return True


def burst(conf, topic, n):
    """acks=1 burst of n records over the partitions; returns {partition: last offset + 1}."""
    p = Producer(dict(conf, acks="1", **{"linger.ms": 1}))
    ends = {}
    errs = []

    def cb(err, msg):
        if err is not None:
            errs.append(err)
            return
        ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    for i in range(n):
        p.produce(topic, b"x" * 100, partition=i % PARTITIONS, on_delivery=cb)
        if i % 500 == 0:
            p.poll(0)
    p.flush(30)
    assert not errs, errs
    return ends


def wait_hws(c, topic, ends, timeout=10):
    """Seconds until the leader's HW (ListOffsets latest) reached ends[p], per partition."""
    t0 = time.monotonic()
    lag = {}
    while len(lag) < len(ends) and time.monotonic() - t0 < timeout:
        for part, end in ends.items():
            if part in lag:
                continue
            hw = c.get_watermark_offsets(TopicPartition(topic, part), timeout=5)[1]
            if hw >= end:
                lag[part] = time.monotonic() - t0
        time.sleep(0.005)
    assert len(lag) == len(ends), f"HW never reached the log end: {lag} of {ends}"
    return max(lag.values())


def test_hw_reaches_leo_promptly_after_acks1_burst(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG)
    conf = {"bootstrap.servers": bootstrap(cluster)}
    admin = AdminClient(conf)
    c = Consumer(dict(conf, **{"group.id": "hwlat", "enable.auto.commit": False}))
    worst_new = worst_steady = 0.0
    # The first burst into a new topic (the issue's case: HWs stuck at 0 while the followers'
    # first fetches, which raced with the leaders' LeaderAndIsr, backed off). A race, so a few
    # topics.
    for i in range(4):
        topic = f"hwlat-{i}"
        admin.create_topics([NewTopic(topic, PARTITIONS, 3)], operation_timeout=20)[topic].result(timeout=40)
        worst_new = max(worst_new, wait_hws(c, topic, burst(conf, topic, 5000)))
    # Steady state: every follower's fetch is parked in its leader's purgatory when a burst comes.
    H.wait_for(lambda: full_isr(cluster, topic), 30, "full ISRs")
    for _ in range(2):
        time.sleep(1.0)
        worst_steady = max(worst_steady, wait_hws(c, topic, burst(conf, topic, 5000)))
    c.close()
    print(f"HW lag after the last ack: new topics {worst_new * 1000:.0f} ms, steady {worst_steady * 1000:.0f} ms")
    # Steady state: the fix gives a few ms; the bugs gave up to a whole replica.fetch.backoff.ms
    # (1 s) or replica.fetch.wait.max.ms (1 s here).
    assert worst_steady < 0.5, f"HW reached the LEO only {worst_steady * 1000:.0f} ms after the last ack"
    # New topics: usually a few ms too, but a race between a new partition's first follower fetch
    # and its leader's LeaderAndIsr still costs one long poll now and then (open, issue 14;
    # docs/CLIENT_FEATURES.md "Known gaps"); the bound catches the old multi-second back-off loops.
    assert worst_new < 2.5, f"a new topic's HW reached the LEO only {worst_new * 1000:.0f} ms after the last ack"
