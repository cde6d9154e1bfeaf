"""Feature versioning (KIP-584) as Kafka 2.7: /feature set up by the controller at failover,
finalized features and their epoch in ApiVersions v3, and the UpdateFeatures API.

No Python client speaks UpdateFeatures or reads ApiVersions' tagged feature fields, so the
requests are written and read here byte by byte (flexible versions: compact strings and arrays,
tagged fields), from Kafka 2.7's ApiVersions{Request,Response}.json and UpdateFeatures*.json."""

import json
import struct

import gregor_harness as H
from kafka_wire import Reader, compact_str, exchange, uvarint

NONE, NOT_CONTROLLER, INVALID_REQUEST = 0, 41, 42


def call(port, api_key, version, body, corr=7):
    """A flexible request (header v2, client id "test"); returns a Reader after the correlation id."""
    header = struct.pack(">hhi", api_key, version, corr) + struct.pack(">h", 4) + b"test" + uvarint(0)
    r = Reader(exchange(port, header + body))
    assert r.i32() == corr
    return r


def api_versions_v3(port):
    """(advertised {key: (min, max)}, finalized epoch, {name: (min, max)})"""
    r = call(port, 18, 3, compact_str("gregor-test") + compact_str("1.0") + uvarint(0))
    # ApiVersions responses use response header v0: no header tagged fields.
    assert r.i16() == NONE
    keys = {}
    for _ in range(r.uvarint() - 1):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        r.tags()
        keys[k] = (lo, hi)
    r.i32()  # throttle
    tags = r.tags()
    epoch = struct.unpack(">q", tags[1])[0] if 1 in tags else -1
    finalized = {}
    if 2 in tags:
        f = Reader(tags[2])
        for _ in range(f.uvarint() - 1):
            name = f.compact_str()
            max_level, min_level = f.i16(), f.i16()
            f.tags()
            finalized[name] = (min_level, max_level)
    if 0 in tags:
        assert Reader(tags[0]).uvarint() - 1 == 0, "a Gregor broker supports no feature"
    return keys, epoch, finalized


def update_features(port, updates, timeout_ms=5000):
    """updates: [(name, max_level, allow_downgrade)] -> (error, {name: (error, message)})"""
    body = struct.pack(">i", timeout_ms) + uvarint(len(updates) + 1)
    for name, level, down in updates:
        body += compact_str(name) + struct.pack(">hb", level, 1 if down else 0) + uvarint(0)
    body += uvarint(0)
    r = call(port, 57, 0, body)
    r.tags()  # response header v1
    r.i32()  # throttle
    err = r.i16()
    r.compact_str()
    results = {}
    for _ in range(r.uvarint() - 1):
        name, e, msg = r.compact_str(), r.i16(), r.compact_str()
        r.tags()
        results[name] = (e, msg)
    return err, results


def feature_znode(cluster):
    data, stat = cluster.zk.get("/feature")
    return json.loads(data), stat.version


def test_feature_znode_api_versions_and_update_features(cluster):
    ctl = cluster.wait_controller()["brokerid"]
    H.wait_for(lambda: cluster.zk.exists("/feature"), 20, "/feature created at failover")
    node, version = feature_znode(cluster)
    assert node == {"version": 1, "status": 1, "features": {}}, node

    for b in cluster.brokers.values():
        keys, epoch, finalized = api_versions_v3(b.port)
        assert keys.get(57) == (0, 1), "UpdateFeatures v0-1 advertised"
        H.wait_for(lambda: api_versions_v3(b.port)[1] == version, 10, f"broker {b.id} finalized epoch {version}")
        assert api_versions_v3(b.port)[2] == {}

    # A finalized feature written by someone else reaches every broker through its watch.
    written = {"version": 1, "status": 1,
               "features": {"test.feature": {"min_version_level": 1, "max_version_level": 2}}}
    cluster.zk.set("/feature", json.dumps(written).encode())
    _, version = feature_znode(cluster)
    for b in cluster.brokers.values():
        H.wait_for(lambda: api_versions_v3(b.port)[1:] == (version, {"test.feature": (1, 2)}), 10,
                   f"broker {b.id} sees test.feature at epoch {version}")

    other = next(b for b in cluster.brokers.values() if b.id != ctl)
    assert update_features(other.port, [("x", 1, False)]) == (NOT_CONTROLLER, {})

    err, res = update_features(cluster[ctl].port, [
        ("x", 1, False),                 # not supported by a 2.7 broker
        ("test.feature", 2, False),      # same value
        ("", 1, False),                  # empty name
    ])
    assert err == NONE
    assert res["x"][0] == INVALID_REQUEST and "not supported" in res["x"][1], res
    assert res["test.feature"][0] == INVALID_REQUEST and "same value" in res["test.feature"][1], res
    assert res[""][0] == INVALID_REQUEST, res
    assert feature_znode(cluster)[1] == version, "nothing valid: /feature not written"

    err, res = update_features(cluster[ctl].port, [("test.feature", 0, True)])  # delete
    assert (err, res) == (NONE, {"test.feature": (NONE, None)})
    node, version = feature_znode(cluster)
    assert node == {"version": 1, "status": 1, "features": {}}, node
    for b in cluster.brokers.values():
        H.wait_for(lambda: api_versions_v3(b.port)[1:] == (version, {}), 10, f"broker {b.id} epoch {version}")


def test_failover_enables_a_disabled_feature_znode(cluster):
    old = cluster.wait_controller()
    H.wait_for(lambda: cluster.zk.exists("/feature"), 20, "/feature created at failover")
    disabled = {"version": 1, "status": 0, "features": {}}
    cluster.zk.set("/feature", json.dumps(disabled).encode())
    for b in cluster.brokers.values():
        H.wait_for(lambda: api_versions_v3(b.port)[1] == -1, 10, f"broker {b.id} drops a disabled /feature")
    cluster[old["brokerid"]].stop()
    cluster.wait_new_controller(old["_stat"].czxid, timeout=30)
    H.wait_for(lambda: feature_znode(cluster)[0]["status"] == 1, 20, "the new controller enables /feature")
