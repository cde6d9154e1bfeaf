"""tests/integration/kafka_codec.py, the schema-driven test codec: every API x version of Kafka 3.9
round-trips, its bytes match the frames tests/unit/test_protocol.c pins for Gregor's C codec, its
refusals, and one broker answering requests it encodes (ApiVersions v3, Metadata v9, CreateTopics
v5 with unknown tagged fields) with answers it decodes strictly."""

import random
import uuid

import pytest

import gregor_harness as H
import kafka_codec as K
from kafka_codec import CodecError, default_value, in_versions

INT_RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}


def rand_value(rng, f, ver, elem=False):
    base = f["type"][2:] if f["type"].startswith("[]") else f["type"]
    if not elem and in_versions(ver, f.get("nullableVersions")) and rng.random() < 0.15:
        return None
    if f["type"].startswith("[]") and not elem:
        return [rand_value(rng, f, ver, True) for _ in range(rng.randint(0, 3))]
    if "fields" in f:
        return rand_struct(rng, f["fields"], ver)
    if base in INT_RANGES:
        b = INT_RANGES[base]
        return rng.choice([-(1 << b), (1 << b) - 1, -1, 0, rng.randint(-(1 << b), (1 << b) - 1)])
    if base == "uint16":
        return rng.randint(0, 65535)
    if base == "float64":
        return rng.choice([0.0, -1.5, rng.random() * 1e6])
    if base == "bool":
        return rng.random() < 0.5
    if base == "string":
        return "".join(rng.choice("abcXYZ-_.é€") for _ in range(rng.randint(0, 6)))
    if base in ("bytes", "records"):
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 9)))
    if base == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    raise AssertionError("type " + f["type"])


def rand_struct(rng, fields, ver):
    """A full dict as decode returns it: fields of version ver random (tagged ones sometimes
    left at their default), the others at their default."""
    out = {}
    for f in fields:
        present = in_versions(ver, f["versions"])
        if not present or ("tag" in f and rng.random() < 0.3):
            out[f["name"]] = default_value(f)
        else:
            out[f["name"]] = rand_value(rng, f, ver)
    return out


def versions_of(m):
    lo, hi = K.parse_versions(m["validVersions"])
    return range(lo, hi + 1)


def test_schema_covers_every_api():
    assert sorted(K.APIS) == list(range(len(K.APIS))) and len(K.APIS) >= 75
    assert K.APIS[3]["name"] == "Metadata" and K.APIS[2]["name"] == "ListOffsets"
    assert K.APIS[10]["request"]["validVersions"] == "0-6"   # FindCoordinator: v4 batched, v6 share
    topic_id = [f for f in K.APIS[3]["request"]["fields"][0]["fields"] if f["name"] == "TopicId"]
    assert topic_id and topic_id[0]["versions"] == "10+" and topic_id[0]["type"] == "uuid"
    for a in K.APIS.values():
        for kind in ("request", "response"):
            assert "about" not in str(a[kind]["fields"])


def test_round_trip_every_api_and_version():
    """Deterministic random bodies: encode -> decode gives the same dict, and re-encoding the
    decoded dict gives the same bytes, for requests and responses of every API x version."""
    rng = random.Random(29)
    n = 0
    for key, a in sorted(K.APIS.items()):
        for ver in versions_of(a["request"]):
            for _ in range(3):
                body = rand_struct(rng, a["request"]["fields"], ver)
                cid = rng.choice([None, "", "client-é"])
                frame = K.encode_request(key, ver, body, correlation_id=ver + 7, client_id=cid)
                hdr, got = K.decode_request(frame[4:])
                assert got == body, (a["name"], ver)
                assert hdr["RequestApiKey"] == key and hdr["RequestApiVersion"] == ver
                assert hdr["CorrelationId"] == ver + 7
                if K.request_header_version(key, ver) > 0:
                    assert hdr["ClientId"] == cid
                assert K.encode_request(key, ver, got, ver + 7, cid) == frame

                body = rand_struct(rng, a["response"]["fields"], ver)
                frame = K.encode_response(key, ver, body, correlation_id=-5)
                corr, got = K.decode_response(key, ver, frame[4:])
                assert (corr, got) == (-5, body), (a["name"], ver)
                assert K.encode_response(key, ver, got, -5) == frame
                n += 2
    assert n == 6 * sum(len(versions_of(a["request"])) for a in K.APIS.values()) > 1800


def test_truncation_and_trailing_bytes_are_refused():
    rng = random.Random(7)
    for key, ver in [(3, 12), (1, 16), (19, 7), (0, 11), (18, 4), (3, 4), (60, 0)]:
        frame = K.encode_response(key, ver, rand_struct(rng, K.APIS[key]["response"]["fields"], ver))[4:]
        for cut in range(len(frame)):
            with pytest.raises(CodecError):
                K.decode_response(key, ver, frame[:cut])
        with pytest.raises(CodecError, match="trailing"):
            K.decode_response(key, ver, frame + b"\x00")


def test_c_codec_frames_byte_for_byte():
    """The byte-exact frames tests/unit/test_protocol.c pins for Gregor's C codec."""
    av3 = bytes([0, 0, 0, 24, 0, 18, 0, 3, 0, 0, 0, 2, 0, 3]) + b"abc" + bytes([0, 5]) + b"kcat" \
        + bytes([4]) + b"1.0" + bytes([0])
    assert K.encode_request(18, 3, {"ClientSoftwareName": "kcat", "ClientSoftwareVersion": "1.0"},
                            2, "abc") == av3
    avr3 = bytes([0, 0, 0, 19, 0, 0, 0, 2, 0, 0, 2, 0, 18, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0])
    assert K.encode_response(18, 3, {"ApiKeys": [{"ApiKey": 18, "MinVersion": 0, "MaxVersion": 3}]},
                             2) == avr3
    md1 = bytes([0, 0, 0, 19, 0, 3, 0, 1, 0, 0, 0, 5, 0, 1]) + b"c" + bytes([0, 0, 0, 1, 0, 2]) + b"t1"
    assert K.encode_request(3, 1, {"Topics": [{"Name": "t1"}]}, 5, "c") == md1
    md1n = bytes([0, 0, 0, 15, 0, 3, 0, 1, 0, 0, 0, 5, 0, 1]) + b"c" + b"\xff" * 4
    assert K.encode_request(3, 1, {"Topics": None}, 5, "c") == md1n
    cs0 = bytes([0, 0, 0, 12, 0, 7, 0, 0, 0, 0, 0, 4, 0, 0, 0, 2])
    assert K.encode_request(7, 0, {"BrokerId": 2}, 4, "ignored") == cs0
    # CreateTopics v5 request with unknown tagged fields at two levels.
    ct5 = bytes([0, 19, 0, 5, 0, 0, 0, 7, 0, 1]) + b"c" + bytes([0, 2, 2]) + b"t" \
        + bytes([0, 0, 0, 3, 0, 1, 1, 2, 2]) + b"k" + bytes([0, 0, 1, 5, 2, 0xAA, 0xBB,
                                                            0, 0, 0x75, 0x30, 1, 1, 10, 0])
    hdr, body = K.decode_request(ct5)
    assert hdr["ClientId"] == "c" and body["validateOnly"] is True and body["timeoutMs"] == 30000
    t = body["Topics"][0]
    assert (t["Name"], t["NumPartitions"], t["ReplicationFactor"]) == ("t", 3, 1)
    assert t["Configs"] == [{"Name": "k", "Value": None}]
    assert t["_tagged"] == {5: b"\xaa\xbb"} and body["_tagged"] == {10: b""}
    assert K.encode_request(19, 5, body, 7, "c") == struct_frame(ct5)
    # CreateTopics v5 response with the tagged TopicConfigErrorCode (tag 0) = 42.
    ctr5 = bytes([0, 0, 0, 28, 0, 0, 0, 9, 0, 0, 0, 0, 0, 2, 2]) + b"t" + bytes(
        [0, 0, 0, 0, 0, 0, 3, 0, 1, 0, 1, 0, 2, 0, 42, 0])
    corr, resp = K.decode_response(19, 5, ctr5[4:])
    assert corr == 9 and resp["Topics"][0]["TopicConfigErrorCode"] == 42
    assert resp["Topics"][0]["ErrorMessage"] is None and resp["Topics"][0]["Configs"] is None
    assert K.encode_response(19, 5, resp, 9) == ctr5


def struct_frame(payload):
    return len(payload).to_bytes(4, "big") + payload


def test_encode_refusals():
    # a field the version lacks, non-default and not ignorable: refused, as Kafka's serializer
    # does (Metadata AllowAutoTopicCreation is v4+, DeleteTopics Topics v6+)
    with pytest.raises(CodecError, match="AllowAutoTopicCreation"):
        K.encode_request(3, 3, {"AllowAutoTopicCreation": False})
    with pytest.raises(CodecError, match="Topics"):
        K.encode_request(20, 5, {"Topics": [{"Name": "t"}]})
    assert K.encode_request(3, 3, {"AllowAutoTopicCreation": True}) == K.encode_request(3, 3, {})
    # ignorable ones are dropped (Metadata TopicId is v10+ and ignorable)
    tid = uuid.uuid4()
    assert K.encode_request(3, 9, {"Topics": [{"Name": "t", "TopicId": tid}]}) == \
        K.encode_request(3, 9, {"Topics": [{"Name": "t"}]})
    _, body = K.decode_request(K.encode_request(3, 10, {"Topics": [{"Name": "t", "TopicId": tid.bytes}]})[4:])
    assert body["Topics"][0]["TopicId"] == tid
    with pytest.raises(CodecError, match="not a field"):
        K.encode_request(3, 9, {"topics": []})
    with pytest.raises(CodecError, match="null"):
        K.encode_request(19, 5, {"Topics": [{"Name": None}]})
    with pytest.raises(CodecError, match="cannot encode"):
        K.encode_request(19, 5, {"Topics": [{"Name": "t", "NumPartitions": 1 << 40}]})
    with pytest.raises(CodecError, match="uuid"):
        K.encode_request(3, 12, {"Topics": [{"Name": "t", "TopicId": b"short"}]})
    with pytest.raises(CodecError, match="not a valid version"):
        K.encode_request(18, 99, {})
    with pytest.raises(CodecError, match="unknown api"):
        K.encode_request(999, 0, {})
    with pytest.raises(CodecError, match="not flexible"):
        K.encode_request(3, 8, {"_tagged": {1: b""}})
    # a known tagged field whose size disagrees with its value
    good = K.encode_response(19, 5, {"Topics": [{"Name": "t", "TopicConfigErrorCode": 42}]})[4:]
    bad = good.replace(bytes([1, 0, 2, 0, 42]), bytes([1, 0, 3, 0, 42, 0]))
    with pytest.raises(CodecError, match="left over"):
        K.decode_response(19, 5, bad)


def test_broker_answers_codec_requests(cluster_factory, zk_connect):
    """One broker: requests encoded here are answered correctly, and its answers (Gregor's C
    encoder) decode strictly (no trailing bytes) with this codec."""
    c = cluster_factory(zk_connect, n=1)
    port = c.brokers[1].port

    av = K.call(port, 18, 3, {"ClientSoftwareName": "kafka-codec", "ClientSoftwareVersion": "1"})
    assert av["ErrorCode"] == 0
    maxv = {k["ApiKey"]: k["MaxVersion"] for k in av["ApiKeys"]}
    assert maxv[3] >= 9 and maxv[19] >= 5 and maxv[18] >= 3

    with _conn(port) as s:
        ct = K.call(s, 19, 5, {
            "Topics": [{"Name": "codec-t", "NumPartitions": 3, "ReplicationFactor": 1,
                        "Configs": [{"Name": "retention.ms", "Value": "3600000"}],
                        "_tagged": {7: b"\x01\x02"}}],
            "timeoutMs": 30000, "_tagged": {11: b""}})
        t = ct["Topics"][0]
        assert (t["Name"], t["ErrorCode"], t["NumPartitions"], t["ReplicationFactor"]) == \
            ("codec-t", 0, 3, 1)
        assert any(cf["Name"] == "retention.ms" and cf["Value"] == "3600000" for cf in t["Configs"])
        again = K.call(s, 19, 5, {"Topics": [{"Name": "codec-t", "NumPartitions": 1,
                                              "ReplicationFactor": 1}]})
        assert again["Topics"][0]["ErrorCode"] == 36  # TOPIC_ALREADY_EXISTS

        def led():
            md = K.call(s, 3, 9, {"Topics": [{"Name": "codec-t"}],
                                  "IncludeTopicAuthorizedOperations": True})
            tm = md["Topics"][0]
            return md if tm["ErrorCode"] == 0 and len(tm["Partitions"]) == 3 and all(
                p["LeaderId"] == 1 for p in tm["Partitions"]) else None
        H.wait_for(led, what="codec-t led by broker 1")
        md = led()
        assert md["Brokers"] == [{"NodeId": 1, "Host": "127.0.0.1", "Port": port, "Rack": None}]
        assert sorted(p["PartitionIndex"] for p in md["Topics"][0]["Partitions"]) == [0, 1, 2]
        assert md["Topics"][0]["IsInternal"] is False
        everything = K.call(s, 3, 9, {"Topics": None})
        assert "codec-t" in [tm["Name"] for tm in everything["Topics"]]


def _conn(port):
    import socket
    return socket.create_connection(("127.0.0.1", port), timeout=10)
