"""Version-1 /config/changes notifications (issue 27 item 5): Kafka 2.7's DynamicConfigManager
processes {"version":1,"entity_type":"topics"|"clients","entity_name":N} as the entity path
"<type>/<name>" (tools and brokers older than KIP-55 wrote them); a version-1 notification for
another entity type, or an unknown version, is logged and skipped, and the notifications after it
are still processed."""

import json

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import gregor_harness as H


def notify(cluster, body):
    cluster.zk.create("/config/changes/config_change_", json.dumps(body).encode(), sequence=True)


def test_version_1_topic_notification_applied(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=1)
    boot = f"127.0.0.1:{cluster[1].port}"
    admin = AdminClient({"bootstrap.servers": boot})
    admin.create_topics([NewTopic("v1t", 1, 1)])["v1t"].result(timeout=30)
    H.wait_for(lambda: (cluster.get_json("/brokers/topics/v1t/partitions/0/state")[0] or {}).get("leader", -1) >= 0,
               30, "a leader for v1t")

    def produce_big():
        errs = []
        p = Producer({"bootstrap.servers": boot, "message.timeout.ms": 5000, "retries": 0})
        p.produce("v1t", b"x" * 1000, on_delivery=lambda e, m: errs.append(e))
        p.flush(10)
        return errs[0] if errs else "no delivery report"
    assert produce_big() is None

    # the config changes in ZooKeeper, announced the version-1 way (after one that is skipped)
    cluster.zk.set("/config/topics/v1t", json.dumps({"version": 1, "config": {"max.message.bytes": "200"}}).encode())
    notify(cluster, {"version": 1, "entity_type": "users", "entity_name": "v1t"})
    notify(cluster, {"version": 1, "entity_type": "topics", "entity_name": "v1t"})

    def refused():
        e = produce_big()
        return e is not None and e.code() == KafkaError.MSG_SIZE_TOO_LARGE
    H.wait_for(refused, 20, "max.message.bytes=200 applied from the version-1 notification")
    # an unknown version is skipped too; the next notification is processed
    notify(cluster, {"version": 7, "entity_path": "topics/v1t"})
    cluster.zk.set("/config/topics/v1t", json.dumps({"version": 1, "config": {}}).encode())
    notify(cluster, {"version": 1, "entity_type": "topics", "entity_name": "v1t"})
    H.wait_for(lambda: produce_big() is None, 20, "the override removed")
    assert cluster[1].log(whole=True).count("Ignoring config change notification") == 2
