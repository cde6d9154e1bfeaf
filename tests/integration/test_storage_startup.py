"""Storage start-up: the logs get their topics' configs before retention or cleaning runs.

Kafka's LogManager reads every topic's config from ZooKeeper (zkClient.getLogConfigs) before it
loads the logs, and starts retention and the cleaner after that. Gregor loaded the logs with the
server.properties defaults and gave them their topic configs only with the first LeaderAndIsr, so
a retention pass in between deleted the records of a topic with retention.ms=-1 and of a
compacted topic (cleanup.policy=delete by default) -- __consumer_offsets and
__transaction_state included. The test keeps the controller frozen (SIGSTOP) while the broker
that hosts both topics restarts, with a broker-wide log.retention.ms of one second checked every
200 ms, and old record timestamps: the records must survive. Fails on the code before the fix."""

import os
import time

import pytest

import gregor_harness as H

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

CONFIG = {
    "log.retention.ms": "1000",
    "log.retention.check.interval.ms": "200",
    "log.cleaner.backoff.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "200",
}
BASE_TS = 1_600_000_000_000  # 2020: far older than log.retention.ms
N = 20


def bootstrap(cluster):
    return ",".join(b.address for b in cluster.running())


def create_on(cluster, topic, broker_id, config):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[broker_id]], config=config)],
                        operation_timeout=20, request_timeout=30)[topic].result(timeout=30)
    H.wait_for(lambda: (cluster.get_json(f"/brokers/topics/{topic}/partitions/0/state")[0] or {})
               .get("leader", -1) == broker_id, 20, f"{topic} led by {broker_id}")


def produce_old(cluster, topic):
    p = Producer({"bootstrap.servers": bootstrap(cluster), "linger.ms": 0, "acks": "all"})
    for i in range(N):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, timestamp=BASE_TS + i)
    assert p.flush(20) == 0


def watermarks(cluster, topic):
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "wm-%f" % time.time()})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def test_topic_configs_apply_before_the_first_leader_and_isr(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=2, config=CONFIG)
    topics = {"keep-forever": {"retention.ms": "-1"}, "compacted": {"cleanup.policy": "compact"}}
    for t, cfg in topics.items():
        create_on(cluster, t, 2, cfg)
        produce_old(cluster, t)
    time.sleep(0.6)  # several retention checks with the topic configs in place: nothing goes
    for t in topics:
        assert watermarks(cluster, t) == (0, N), t
    cluster.stop()

    # Broker 1 comes back as the controller and freezes: broker 2 starts, registers and waits
    # for a LeaderAndIsr that does not come.
    cluster.start(ids=[1])
    assert cluster.controller_id() == 1
    cluster[1].pause()
    b2 = cluster[2]
    b2.start()
    H.wait_for(lambda: 2 in cluster.registered_ids(), 15, "broker 2 registered")
    time.sleep(1.5)  # > 6 retention checks of broker 2, every record older than log.retention.ms
    log = b2.log()
    assert "by retention" not in log, log[-3000:]
    for t in topics:
        d = os.path.join(b2.logdir, f"{t}-0")
        assert os.path.exists(os.path.join(d, "%020d.log" % 0)), (t, sorted(os.listdir(d)))
    cluster[1].resume()
    H.wait_for(lambda: (cluster.get_json("/brokers/topics/compacted/partitions/0/state")[0] or {})
               .get("leader", -1) == 2, 20, "compacted led by 2 again")
    for t in topics:
        H.wait_for(lambda: watermarks(cluster, t)[1] == N, 15, f"{t} readable")
        assert watermarks(cluster, t) == (0, N), t
