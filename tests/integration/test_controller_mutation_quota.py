"""KIP-599 controller mutation quota (issue 27 item 5): controller_mutation_rate limits the
partitions a client creates and deletes, as Kafka 2.7's ControllerMutationQuotaManager does.

The broker runs with controller.quota.window.num=1 and the client "mut" has
controller_mutation_rate=1, so its token bucket holds at most 1 token and refills at 1 per
second. A 21-partition topic takes 21 tokens: the bucket goes to -20 (20 s of throttle), which
leaves every later step of the test inside the exceeded window however slow the machine is.
Requests are sent raw (kafka_wire) at the versions where KIP-599 makes the quota strict
(CreateTopics v6, CreatePartitions v3, DeleteTopics v5) and at the versions before (permissive).
The quota is lifted at the end by raising the rate, not by waiting.
"""

import json
import struct

import gregor_harness as H
from kafka_wire import Reader, compact_str, exchange, uvarint

THROTTLED = 89
MESSAGE = "The throttling quota has been exceeded."


def header(api, ver, client, corr=7):
    return struct.pack(">hhih", api, ver, corr, len(client)) + client.encode() + uvarint(0)


def create_topics(port, client, topic, parts, ver=6, validate_only=False):
    if ver >= 5:
        body = (uvarint(2) + compact_str(topic) + struct.pack(">ih", parts, 1) + uvarint(1) + uvarint(1) + uvarint(0)
                + struct.pack(">ib", 20000, int(validate_only)) + uvarint(0))
        r = Reader(exchange(port, header(19, ver, client) + body))
        assert r.i32() == 7
        r.tags()
        throttle = r.i32()
        assert r.uvarint() == 2
        name, err, msg = r.compact_str(), r.i16(), r.compact_str()
        return name, err, msg, throttle
    raise AssertionError("flexible versions only")


def create_topics_v4(port, client, topic, parts):
    """CreateTopics v4 (not flexible): permissive."""
    body = (struct.pack(">i", 1) + struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">ih", parts, 1)
            + struct.pack(">ii", 0, 0) + struct.pack(">ib", 20000, 0))
    r = Reader(exchange(port, struct.pack(">hhih", 19, 4, 7, len(client)) + client.encode() + body))
    assert r.i32() == 7
    throttle = r.i32()
    assert r.i32() == 1
    name = r.take(r.i16()).decode()
    err = r.i16()
    n = r.i16()
    msg = r.take(n).decode() if n >= 0 else None
    return name, err, msg, throttle


def create_partitions(port, client, topic, count, ver=3):
    body = (uvarint(2) + compact_str(topic) + struct.pack(">i", count) + uvarint(0) + uvarint(0)
            + struct.pack(">ib", 20000, 0) + uvarint(0))
    r = Reader(exchange(port, header(37, ver, client) + body))
    assert r.i32() == 7
    r.tags()
    throttle = r.i32()
    assert r.uvarint() == 2
    return r.compact_str(), r.i16(), r.compact_str(), throttle


def delete_topics(port, client, topic, ver=5):
    body = uvarint(2) + compact_str(topic) + struct.pack(">i", 20000) + uvarint(0)
    r = Reader(exchange(port, header(20, ver, client) + body))
    assert r.i32() == 7
    r.tags()
    throttle = r.i32()
    assert r.uvarint() == 2
    name, err = r.compact_str(), r.i16()
    msg = r.compact_str() if ver >= 5 else None
    return name, err, msg, throttle


def set_rate(cluster, rate):
    path = "/config/clients/mut"
    data = json.dumps({"version": 1, "config": {"controller_mutation_rate": str(rate)}}).encode()
    if cluster.zk.exists(path):
        cluster.zk.set(path, data)
    else:
        cluster.zk.ensure_path("/config/clients")
        cluster.zk.create(path, data)
    cluster.zk.ensure_path("/config/changes")
    cluster.zk.create("/config/changes/config_change_", json.dumps(
        {"version": 2, "entity_path": "clients/mut"}).encode(), sequence=True)


def test_controller_mutation_rate_enforced(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=1, config={"controller.quota.window.num": "1"}, start=False)
    set_rate(cluster, 1)  # loaded at start-up
    cluster.start()
    port = cluster[1].port
    exists = lambda t: cluster.zk.exists(f"/brokers/topics/{t}") is not None  # noqa: E731

    # validate-only takes no token
    assert create_topics(port, "mut", "v", 50, validate_only=True)[:3] == ("v", 0, None)
    # the first mutation finds the bucket full and takes all 21 tokens: accepted, throttled
    name, err, msg, throttle = create_topics(port, "mut", "q1", 21)
    assert (name, err, msg) == ("q1", 0, None) and 0 < throttle <= 20000, throttle
    assert exists("q1")
    # strict: refused while the bucket is negative, nothing created, throttle time given
    name, err, msg, throttle = create_topics(port, "mut", "q2", 1)
    assert (name, err, msg) == ("q2", THROTTLED, MESSAGE) and throttle > 0
    assert not exists("q2")
    name, err, msg, throttle = create_partitions(port, "mut", "q1", 22)
    assert (name, err, msg) == ("q1", THROTTLED, MESSAGE) and throttle > 0
    assert len(cluster.get_json("/brokers/topics/q1")[0]["partitions"]) == 21
    name, err, msg, throttle = delete_topics(port, "mut", "q1")
    assert (name, err, msg) == ("q1", THROTTLED, MESSAGE) and throttle > 0
    assert not cluster.zk.exists("/admin/delete_topics/q1")
    # another client id has no quota
    assert create_topics(port, "free", "f1", 3) == ("f1", 0, None, 0)
    # permissive (CreateTopics v4, DeleteTopics v4): goes ahead, throttle time only
    name, err, msg, throttle = create_topics_v4(port, "mut", "q3", 2)
    assert (name, err) == ("q3", 0) and throttle > 0
    H.wait_for(lambda: exists("q3"), 10, "q3 created")

    # a higher rate refills the bucket: the strict requests go through again
    set_rate(cluster, 1000)
    H.wait_for(lambda: create_partitions(port, "mut", "q1", 22)[1] == 0, 20, "CreatePartitions accepted")
    assert len(cluster.get_json("/brokers/topics/q1")[0]["partitions"]) == 22
    name, err, msg, throttle = delete_topics(port, "mut", "q3")
    assert (name, err, msg, throttle) == ("q3", 0, None, 0)


def set_client_config(cluster, client, config):
    path = f"/config/clients/{client}"
    cluster.zk.ensure_path("/config/clients")
    cluster.zk.create(path, json.dumps({"version": 1, "config": config}).encode())


def test_throttle_is_the_larger_of_mutation_and_request_quotas(cluster_factory, zk_connect):
    """Kafka's sendResponseMaybeThrottleWithControllerQuota: CreateTopics / CreatePartitions /
    DeleteTopics answer (and mute the channel for) the larger of the controller mutation throttle
    and the request quota throttle. The client "both" has request_percentage=0.01 and
    controller_mutation_rate=1 (a bucket of 1 token)."""
    cluster = cluster_factory(zk_connect, n=1, config={"controller.quota.window.num": "1"}, start=False)
    set_client_config(cluster, "both", {"controller_mutation_rate": "1", "request_percentage": "0.01"})
    cluster.start()
    port = cluster[1].port
    # far over the request quota: Metadata requests, each on a new connection (not muted), until
    # the throttle reaches its cap (one quota window), then 100 more: each adds about its thread
    # time / the quota of usage to work off, seconds in all, so the quota stays exceeded meanwhile
    md = header(3, 9, "both", corr=7) + uvarint(1) + struct.pack(">bbb", 0, 0, 0) + uvarint(0)
    more = None
    for _ in range(20000):
        r = Reader(exchange(port, md))
        assert r.i32() == 7
        r.tags()
        if r.i32() >= 1000 and more is None:
            more = 100
        if more is not None:
            more -= 1
            if more == 0:
                break
    else:
        raise AssertionError("20000 Metadata requests never reached the request quota's cap")
    # one partition takes the bucket's one token: no mutation throttle, the request quota's
    name, err, msg, throttle = create_topics(port, "both", "b1", 1)
    assert (name, err, msg) == ("b1", 0, None) and throttle > 0, throttle
    # 30 more partitions: the bucket goes to -30 (30 s of mutation throttle); the answer is at
    # least that, whichever is larger
    name, err, msg, throttle = create_partitions(port, "both", "b1", 31)
    assert (name, err, msg) == ("b1", 0, None) and throttle >= 25000, throttle
    name, err, msg, throttle = delete_topics(port, "both", "b1")
    assert (name, err, msg) == ("b1", THROTTLED, MESSAGE) and throttle >= 25000, throttle
