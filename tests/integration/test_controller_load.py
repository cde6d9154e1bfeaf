"""Controller failover with enough partitions that the new controller reads their states through
the bulk reader (src/zk/bulk_read.c: a second, short-lived ZooKeeper session that syncs first):
the new controller loads every state, serves the same leaders, and its own writes stay fenced.
With zookeeper.set.acl and a digest identity too (the bulk session authenticates)."""

import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

import gregor_harness as H

PARTITIONS = 1500
# the cold load (the warm standby would prove every state by its topic's stamp and read none)
COLD = {"gregor.controller.standby.enable": "false"}
SECURE = {"zookeeper.set.acl": "true", "gregor.zookeeper.auth.digest": "gregor:s3cret"}


def bootstrap(c):
    return ",".join(f"127.0.0.1:{b.port}" for b in c.brokers.values())


def leaders(c, topic):
    md = AdminClient({"bootstrap.servers": bootstrap(c)}).list_topics(topic, timeout=20)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p.id: p.leader for p in t.partitions.values()}


@pytest.mark.parametrize("secure", [False, True], ids=["open", "set_acl"])
def test_failover_loads_states_through_bulk_reader(cluster_factory, zk_connect, secure):
    c = cluster_factory(zk_connect, n=2, config=dict(COLD, **SECURE) if secure else dict(COLD))
    admin = AdminClient({"bootstrap.servers": bootstrap(c)})
    admin.create_topics([NewTopic("many", PARTITIONS, 2)], request_timeout=60)["many"].result(60)
    before = H.wait_for(lambda: (lambda m: m if m and len(m) == PARTITIONS and all(l >= 0 for l in m.values())
                                 else None)(leaders(c, "many")), 60, "all leaders")

    old = c.wait_controller()
    epoch, _ = c.controller_epoch()
    c.zk.delete("/controller")
    new = c.wait_new_controller(old["_stat"].czxid, timeout=30)
    H.wait_for(lambda: c.all_ready_epochs().get(epoch + 1), 60, "ready line for the new epoch")
    log = c[new["brokerid"]].log(whole=True)
    log = log[log.index(f"Epoch incremented to {epoch + 1} "):]  # this failover only
    assert f"Loaded {PARTITIONS} partition states" in log, log[:3000]
    assert f"read {PARTITIONS} znodes through a bulk-read session" in log, log[:3000]
    assert "bulk read of" not in log  # no fallback to the main session

    # same leaders as before (nothing changed), every partition led
    time.sleep(1)
    assert leaders(c, "many") == before
    # the new controller writes as before: a topic created after the failover gets its leaders
    def create_after():
        # a fresh client (kept alive until the answer): the first one may still name the old
        # controller (NOT_CONTROLLER)
        fresh = AdminClient({"bootstrap.servers": bootstrap(c)})
        try:
            fresh.create_topics([NewTopic("after", 3, 2)], request_timeout=20)["after"].result(20)
            return True
        except KafkaException as e:
            if e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return True
            if e.args[0].code() != KafkaError.NOT_CONTROLLER:
                raise
            return False
    H.wait_for(create_after, 60, "CreateTopics answered by the new controller")
    H.wait_for(lambda: (lambda m: m if m and len(m) == 3 and all(l >= 0 for l in m.values()) else None)(
        leaders(c, "after")), 30, "leaders of a topic created after the failover")
