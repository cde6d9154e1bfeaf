"""Hostile but well-formed input against a live gregord: requests that are valid Kafka yet make
a naive broker allocate without bound, and configs whose values must not leave the broker.

- Fetch v2/v3 of gzip "bombs" (batches of ~60 KB that inflate to 60 MiB of zeros): the broker
  down-converts only what the fetch may carry (KIP-283), stays up, and its peak RSS (VmHWM) barely
  moves; message.downconversion.enable=false answers UNSUPPORTED_VERSION.
Each test prints the figures it measured (run with -s to see them).
"""

import struct
import zlib

import pytest

import gregor_harness as H
from kafka_wire import varint
from test_malformed import (FETCH, Conn, Reader, array, create_topics_v2, crc32c, frame, header, i8, i16, i32,
                            i64, metadata_ok, parse_produce_v3, produce_v3, string, u32)

UNSUPPORTED_VERSION = 35
MIB = 1 << 20


def vm_kb(pid, field):
    """VmRSS / VmHWM (peak RSS) of a process, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def gzip_bomb_batch(nrec, value_len):
    """A gzip RecordBatch v2 of nrec records, each a value of value_len zero bytes; compressed
    record by record, so the test never holds the inflated form."""
    z = zlib.compressobj(6, zlib.DEFLATED, 16 + 15)
    value = bytes(value_len)
    parts = []
    for i in range(nrec):
        body = i8(0) + varint(0) + varint(i) + varint(-1) + varint(len(value)) + value + varint(0)
        parts.append(z.compress(varint(len(body)) + body))
    parts.append(z.flush())
    recs = b"".join(parts)
    ts = 1700000000000
    after_crc = (i16(1) + i32(nrec - 1) + i64(ts) + i64(ts) + i64(-1) + i16(-1) + i32(-1) + i32(nrec) + recs)
    rest = i32(-1) + i8(2) + u32(crc32c(after_crc)) + after_crc
    return i64(0) + i32(len(rest)) + rest


def create_topic(port, name, configs=None):
    """CreateTopics v2 with topic configs (retried while the new broker is not registered yet);
    waits until the topic has a leader."""
    cfgs = array([string(k) + string(v) for k, v in (configs or {}).items()])
    body = array([string(name) + i32(1) + i16(1) + array([]) + cfgs]) + i32(10000) + i8(0)

    def created():
        conn = Conn(port)
        try:
            conn.send(frame(header(19, 2, 1) + body))
            r = Reader(conn.recv_frame())
        finally:
            conn.close()
        r.i32(), r.i32()  # correlation id, throttle
        assert r.i32() == 1 and r.string() == name
        return r.i16() in (0, 36)  # NONE, TOPIC_ALREADY_EXISTS
    H.wait_for(created, 30, f"topic {name} created")

    def leader_known():
        try:
            return metadata_ok(port, [name])[2].get(name, (None, {}))[1].get(0, (None, -1))[1] >= 0
        except AssertionError:  # the broker is not in its own metadata yet
            return False
    H.wait_for(leader_known, 30, f"a leader for {name}")


def produce(port, topic, batch, timeout=30.0):
    conn = Conn(port, timeout=timeout)
    try:
        conn.send(produce_v3(5, topic, 0, batch))
        return parse_produce_v3(conn.recv_frame(), 5)[(topic, 0)]
    finally:
        conn.close()


def fetch_old(port, version, topic, partition_max, response_max=None, offset=0, timeout=30.0):
    """Fetch v0-v3 for one partition; returns (error, high watermark, message set bytes)."""
    body = i32(-1) + i32(100) + i32(1)
    if version >= 3:
        body += i32(response_max)
    body += array([string(topic) + array([i32(0) + i64(offset) + i32(partition_max)])])
    conn = Conn(port, timeout=timeout)
    try:
        conn.send(frame(header(FETCH, version, 9) + body))
        n = struct.unpack(">i", conn._exact(4))[0]
        resp = conn._exact(n)
    finally:
        conn.close()
    r = Reader(resp)
    assert r.i32() == 9
    if version >= 1:
        r.i32()  # throttle
    assert r.i32() == 1 and r.string() == topic and r.i32() == 1
    assert r.i32() == 0
    err, hw = r.i16(), r.i64()
    n = r.i32()
    return err, hw, resp[r.p:r.p + max(n, 0)]


def legacy_messages(ms):
    """(offset, value length) of each whole message of a magic 0/1 message set."""
    out, p = [], 0
    while p + 12 <= len(ms):
        off, size = struct.unpack_from(">qi", ms, p)
        if p + 12 + size > len(ms):
            break
        m = ms[p + 12:p + 12 + size]
        magic = m[4]
        q = 6 + (8 if magic == 1 else 0)
        klen = struct.unpack_from(">i", m, q)[0]
        q += 4 + max(klen, 0)
        vlen = struct.unpack_from(">i", m, q)[0]
        out.append((off, vlen))
        p += 12 + size
    return out


@pytest.fixture
def one(cluster_factory, zk_connect):
    return cluster_factory(zk_connect, n=1)


def test_fetch_v2_down_conversion_of_gzip_bombs_is_bounded(one):
    """3 gzip batches of 60 x 1 MiB zeros (~60 KB each on the wire, under max.message.bytes).
    A Fetch v2 of 2 MiB used to convert all three (180 MiB, then copied again: +360 MiB of peak
    RSS; 33 such batches made a 2 GiB buffer the arena refused and the broker died on a memcpy to
    NULL). Now it converts what 2 MiB can carry: one message of 1 MiB (two would pass 2 MiB)."""
    b = one[1]
    create_topic(b.port, "bombs")
    batch = gzip_bomb_batch(60, MIB)
    assert len(batch) < 100 * 1024
    for _ in range(3):
        assert produce(b.port, "bombs", batch)[0] == 0
    hwm0, rss0 = vm_kb(b.pid, "VmHWM"), vm_kb(b.pid, "VmRSS")
    err, hw, ms = fetch_old(b.port, 2, "bombs", 2 * MIB)
    assert err == 0 and hw == 180
    msgs = legacy_messages(ms)
    assert msgs == [(0, MIB)], msgs[:5]
    # v3: the response's MaxBytes counts the converted bytes (a message is 34 + 1 MiB); records
    # before the fetch offset are left out, so a small limit still makes progress
    err, hw, ms = fetch_old(b.port, 3, "bombs", 8 * MIB, response_max=3 * (MIB + 34), offset=61)
    assert err == 0 and legacy_messages(ms) == [(61, MIB), (62, MIB), (63, MIB)]
    # the first message of a response is sent even when larger than the limits (as Kafka)
    err, hw, ms = fetch_old(b.port, 1, "bombs", 1000, offset=179)
    assert err == 0 and legacy_messages(ms) == [(179, MIB)]
    assert b.running()
    hwm1, rss1 = vm_kb(b.pid, "VmHWM"), vm_kb(b.pid, "VmRSS")
    print(f"\nbroker VmHWM {hwm0 // 1024} -> {hwm1 // 1024} MiB, VmRSS {rss0 // 1024} -> {rss1 // 1024} MiB "
          f"(3 fetches of gzip bombs, {len(batch)} bytes -> 60 MiB each)")
    assert hwm1 - hwm0 < 40 * 1024, f"peak RSS grew by {(hwm1 - hwm0) // 1024} MiB"
    # a well-behaved client still works
    from confluent_kafka import Consumer, Producer
    p = Producer({"bootstrap.servers": b.address})
    p.produce("plain", b"hello")
    assert p.flush(20) == 0
    c = Consumer({"bootstrap.servers": b.address, "group.id": "g", "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["plain"])
        got = None
        for _ in range(40):
            m = c.poll(0.5)
            if m is not None and not m.error():
                got = m.value()
                break
        assert got == b"hello"
    finally:
        c.close()


def test_fetch_v0_v3_refused_when_down_conversion_disabled(one):
    """message.downconversion.enable=false (topic config): old fetches get UNSUPPORTED_VERSION
    (Kafka 2.7's KafkaApis), new ones read as usual; the default topic still converts."""
    b = one[1]
    create_topic(b.port, "noconv", {"message.downconversion.enable": "false"})
    create_topic(b.port, "conv")
    from test_malformed import record_batch
    for t in ("noconv", "conv"):
        assert produce(b.port, t, record_batch([b"v1", b"v2"]))[0] == 0
    for v in (0, 2, 3):
        err, hw, ms = fetch_old(b.port, v, "noconv", MIB, response_max=MIB)
        assert err == UNSUPPORTED_VERSION and hw == -1 and ms == b""
        err, hw, ms = fetch_old(b.port, v, "conv", MIB, response_max=MIB)
        assert err == 0 and hw == 2 and [o for o, _ in legacy_messages(ms)] == [0, 1]
    # AlterConfigs takes effect (the broker's in-memory log config, no ZooKeeper read per fetch)
    from confluent_kafka.admin import AdminClient, ConfigResource
    a = AdminClient({"bootstrap.servers": b.address})
    for topic, value in (("noconv", "true"), ("conv", "false")):
        res = ConfigResource("topic", topic, set_config={"message.downconversion.enable": value})
        a.alter_configs([res], request_timeout=20)[res].result(30)

    def flipped():
        e1 = fetch_old(b.port, 2, "noconv", MIB)[0]
        e2 = fetch_old(b.port, 2, "conv", MIB)[0]
        return e1 == 0 and e2 == UNSUPPORTED_VERSION
    H.wait_for(flipped, 20, "message.downconversion.enable changed by AlterConfigs")
    err, hw, ms = fetch_old(b.port, 0, "noconv", MIB)
    assert err == 0 and hw == 2 and [o for o, _ in legacy_messages(ms)] == [0, 1]
    # a dynamic broker setting reaches topics without an override
    res = ConfigResource("topic", "conv", set_config={})
    a.alter_configs([res], request_timeout=20)[res].result(30)
    H.wait_for(lambda: fetch_old(b.port, 2, "conv", MIB)[0] == 0, 20, "override removed")
    res = ConfigResource("broker", str(b.id), set_config={"log.message.downconversion.enable": "false"})
    a.alter_configs([res], request_timeout=20)[res].result(30)
    H.wait_for(lambda: fetch_old(b.port, 2, "conv", MIB)[0] == UNSUPPORTED_VERSION, 20, "broker default applied")
    assert fetch_old(b.port, 2, "noconv", MIB)[0] == 0  # the topic's override wins


# ---------------------------------------------------------------------------------------------
# DescribeConfigs: secrets never leave the broker

STATIC_SECRETS = {
    "gregor.zookeeper.auth.digest": "gregor:zk-digest-secret",
    "delegation.token.master.key": "dt-master-secret",
    "password.encoder.secret": "encoder-secret",
    "my.custom.token": "custom-secret",  # a key of no known type: Kafka treats it as sensitive
}
DYNAMIC_SECRETS = {
    "ssl.keystore.key": "-----BEGIN PRIVATE KEY----- keystore-key-secret",
    "listener.name.plaintext.ssl.key.password": "listener-key-secret",
    "listener.name.plaintext.plain.sasl.jaas.config":
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="jaas-secret";',
    "another.custom.key": "dynamic-custom-secret",
}
SECRET_WORDS = ["zk-digest-secret", "dt-master-secret", "encoder-secret", "custom-secret", "keystore-key-secret",
                "listener-key-secret", "jaas-secret"]


def test_describe_configs_hides_passwords_and_unknown_keys(cluster_factory, zk_connect):
    """Kafka's rule (KafkaConfig.maybeSensitive): PASSWORD keys and keys of no known type are
    described with a null value and isSensitive=true, in their synonyms too. The old broker sent
    gregor.zookeeper.auth.digest, delegation.token.master.key, custom keys and dynamic
    ssl.keystore.key in clear."""
    from confluent_kafka.admin import AdminClient, ConfigResource
    cfg = dict(STATIC_SECRETS)
    cfg["log.retention.hours"] = "100"  # a plain key stays visible
    c = cluster_factory(zk_connect, n=1, config=cfg)
    b = c[1]
    admin = AdminClient({"bootstrap.servers": b.address})
    res = ConfigResource(ConfigResource.Type.BROKER, "1", set_config=DYNAMIC_SECRETS)
    admin.alter_configs([res], request_timeout=20)[res].result(30)

    def described():
        r = ConfigResource(ConfigResource.Type.BROKER, "1")
        return admin.describe_configs([r], request_timeout=20)[r].result(30)
    H.wait_for(lambda: "another.custom.key" in described(), 10, "the dynamic configs described")
    entries = described()
    leaked = []
    for name, e in entries.items():
        texts = [e.value] + [s.value for s in e.synonyms.values()]
        leaked += [f"{name}={t}" for t in texts if t and any(w in t for w in SECRET_WORDS)]
    assert not leaked, leaked
    for name in list(STATIC_SECRETS) + list(DYNAMIC_SECRETS):
        assert name in entries, name
        e = entries[name]
        assert e.is_sensitive and e.value is None, (name, e.value, e.is_sensitive)
        assert all(s.value is None for s in e.synonyms.values()), name
    assert entries["log.retention.hours"].value == "100" and not entries["log.retention.hours"].is_sensitive
    assert entries["zookeeper.connect"].value and not entries["zookeeper.connect"].is_sensitive
    # kafka-python (DescribeConfigs v0-v1 with synonyms) sees the same
    from kafka.admin import ConfigResource as KConfigResource, ConfigResourceType, KafkaAdminClient
    ka = KafkaAdminClient(bootstrap_servers=b.address)
    try:
        raw = repr(ka.describe_configs([KConfigResource(ConfigResourceType.BROKER, "1")], include_synonyms=True))
    finally:
        ka.close()
    assert "gregor.zookeeper.auth.digest" in raw and not any(w in raw for w in SECRET_WORDS)
    # nor do the broker's log lines carry them
    log = b.log(whole=True)
    assert not [w for w in SECRET_WORDS if w in log]


# ---------------------------------------------------------------------------------------------
# Produce v0-v2: gzip message sets are up-converted one led partition at a time, kept gzip'd

PRODUCE = 0
UNKNOWN_TOPIC_OR_PARTITION, MESSAGE_TOO_LARGE = 3, 10


def gzip_wrapper_set(values, ts=1700000000000):
    """A magic 1 message set of one gzip wrapper message holding `values` (inner offsets 0..n-1),
    compressed piece by piece so the test never holds the inflated form twice."""
    z = zlib.compressobj(6, zlib.DEFLATED, 16 + 15)
    parts = []
    for i, v in enumerate(values):
        head = i8(1) + i8(0) + i64(ts) + i32(-1) + i32(len(v))
        crc = zlib.crc32(v, zlib.crc32(head)) & 0xFFFFFFFF
        parts.append(z.compress(i64(i) + i32(4 + len(head) + len(v)) + u32(crc) + head))
        parts.append(z.compress(v))
    parts.append(z.flush())
    inner = b"".join(parts)
    body = i8(1) + i8(1) + i64(ts) + i32(-1) + i32(len(inner)) + inner
    msg = u32(zlib.crc32(body) & 0xFFFFFFFF) + body
    return i64(len(values) - 1) + i32(len(msg)) + msg


def produce_v2(port, entries, timeout=30.0):
    """Produce v2 (acks 1) of (topic, partition, message set) entries, in order; returns the
    [(topic, partition, error, base offset)] of the response."""
    by_topic = {}
    for t, p, ms in entries:
        by_topic.setdefault(t, []).append(i32(p) + i32(len(ms)) + ms)
    body = i16(1) + i32(int(timeout * 1000)) + array([string(t) + array(ps) for t, ps in by_topic.items()])
    conn = Conn(port, timeout=timeout)
    try:
        conn.send(frame(header(PRODUCE, 2, 11) + body))
        r = Reader(conn.recv_frame())
    finally:
        conn.close()
    assert r.i32() == 11
    out = []
    for _ in range(r.i32()):
        t = r.string()
        for _ in range(r.i32()):
            p, err, base = r.i32(), r.i16(), r.i64()
            r.i64()  # log append time
            out.append((t, p, err, base))
    return out


def fetch_v4_batches(port, topic, offset=0):
    """The record batches a Fetch v4 returns: [(base offset, attributes, record count)]."""
    body = (i32(-1) + i32(100) + i32(1) + i32(8 * MIB) + i8(0)
            + array([string(topic) + array([i32(0) + i64(offset) + i32(8 * MIB)])]))
    conn = Conn(port)
    try:
        conn.send(frame(header(FETCH, 4, 12) + body))
        r = Reader(conn.recv_frame())
    finally:
        conn.close()
    assert r.i32() == 12
    r.i32()  # throttle
    assert r.i32() == 1 and r.string() == topic and r.i32() == 1
    r.i32()
    assert r.i16() == 0
    r.i64(), r.i64()  # hw, lso
    na = r.i32()
    r.p += 16 * max(na, 0)
    n = r.i32()
    recs, p, out = r.d[r.p:r.p + n], 0, []
    while p + 61 <= len(recs):
        base, blen = struct.unpack_from(">qi", recs, p)
        attrs = struct.unpack_from(">h", recs, p + 21)[0]
        count = struct.unpack_from(">i", recs, p + 57)[0]
        out.append((base, attrs, count))
        p += 12 + blen
    return out


def test_produce_v2_gzip_converted_only_for_led_partitions(one):
    """6 entries of a gzip wrapper of 40 MiB zeros (~40 KB each) for a partition the broker does
    not have: the old broker inflated and held all of them before looking (+~300 MiB of peak RSS
    for a 240 KB request); now none is inflated. 6 identical entries for the led partition are
    converted once and each appended as a gzip batch."""
    b = one[1]
    create_topic(b.port, "legacy")
    big = gzip_wrapper_set([bytes(40 * MIB)])
    assert len(big) < 64 * 1024
    hwm0 = vm_kb(b.pid, "VmHWM")
    res = produce_v2(b.port, [("legacy", 7, big)] * 6)
    assert [e for _, _, e, _ in res] == [UNKNOWN_TOPIC_OR_PARTITION] * 6, res
    hwm1 = vm_kb(b.pid, "VmHWM")
    small = gzip_wrapper_set([bytes(8 * MIB)])
    res = produce_v2(b.port, [("legacy", 0, small)] * 6)
    assert [(e, base) for _, _, e, base in res] == [(0, i) for i in range(6)], res
    hwm2 = vm_kb(b.pid, "VmHWM")
    print(f"\nbroker VmHWM {hwm0 // 1024} -> {hwm1 // 1024} MiB (6 x 40 MiB gzip entries for a missing partition) "
          f"-> {hwm2 // 1024} MiB (6 identical 8 MiB entries for a led one)")
    assert hwm1 - hwm0 < 16 * 1024, f"peak RSS grew by {(hwm1 - hwm0) // 1024} MiB"
    assert hwm2 - hwm0 < 48 * 1024, f"peak RSS grew by {(hwm2 - hwm0) // 1024} MiB"
    batches = fetch_v4_batches(b.port, "legacy")
    assert [(base, attrs & 7, n) for base, attrs, n in batches] == [(i, 1, 1) for i in range(6)], batches
    assert b.running()


def test_produce_v2_gzip_set_inflating_past_max_message_bytes_is_stored_gzipped(one):
    """An old client's gzip message set of 3 x 600 KB text (40 KB on the wire, 1.8 MB inflated):
    Kafka re-compresses the up-converted batch with gzip, so it passes max.message.bytes
    (1048588); the old broker stored it uncompressed and answered MESSAGE_TOO_LARGE."""
    b = one[1]
    create_topic(b.port, "legacygz")
    values = [(b"record %d " % i) * 60000 for i in range(3)]
    ms = gzip_wrapper_set(values)
    assert len(ms) < 64 * 1024 and sum(map(len, values)) > 1048588
    res = produce_v2(b.port, [("legacygz", 0, ms)])
    assert res == [("legacygz", 0, 0, 0)], res
    batches = fetch_v4_batches(b.port, "legacygz")
    assert [(base, attrs & 7, n) for base, attrs, n in batches] == [(0, 1, 3)], batches
    # an old consumer reads the three messages back (Fetch v2, down-converted)
    err, hw, got = fetch_old(b.port, 2, "legacygz", 4 * MIB)
    assert err == 0 and hw == 3 and legacy_messages(got) == [(i, len(v)) for i, v in enumerate(values)]


# ---------------------------------------------------------------------------------------------
# fetch.max.bytes: the broker's cap on a Fetch response


def test_fetch_max_bytes_caps_every_fetch(cluster_factory, zk_connect):
    """fetch.max.bytes=100000: a Fetch v4 asking for 8 MiB gets two 40 KB batches, not five
    (Kafka: min(request max_bytes, fetch.max.bytes)); v2 (no max_bytes) likewise, after
    down-conversion; a first batch larger than the cap still comes whole (minOneMessage)."""
    from test_malformed import record_batch
    c = cluster_factory(zk_connect, n=1, config={"fetch.max.bytes": "100000"})
    b = c[1]
    create_topic(b.port, "capped")
    for i in range(5):
        assert produce(b.port, "capped", record_batch([bytes([65 + i]) * 40000]))[0] == 0
    batches = fetch_v4_batches(b.port, "capped")
    assert [base for base, _, _ in batches] == [0, 1], batches
    err, hw, ms = fetch_old(b.port, 2, "capped", 8 * MIB, offset=2)
    assert err == 0 and hw == 5 and legacy_messages(ms) == [(2, 40000), (3, 40000)]
    assert produce(b.port, "capped", record_batch([b"z" * 150000]))[0] == 0
    assert [base for base, _, _ in fetch_v4_batches(b.port, "capped", offset=5)] == [5]


def plain_message(value, offset=0):
    """A magic 0 message set of one uncompressed message."""
    body = i8(0) + i8(0) + i32(-1) + i32(len(value)) + value
    msg = u32(zlib.crc32(body) & 0xFFFFFFFF) + body
    return i64(offset) + i32(len(msg)) + msg


def test_produce_v2_many_small_entries_answered_in_linear_time(one):
    """A Produce v2 of 100k distinct one-message entries for one partition (~4 MB): the search for
    a repeated entry compared each with every earlier one (5e9 comparisons, minutes of an I/O
    thread); now only with the one before it."""
    import time
    b = one[1]
    create_topic(b.port, "many")
    n = 100000
    entries = [("many", 0, plain_message(struct.pack(">i", i))) for i in range(n)]
    entries[1] = entries[0]  # a repeat still goes in (twice)
    t0 = time.monotonic()
    res = produce_v2(b.port, entries, timeout=60.0)
    took = time.monotonic() - t0
    print(f"\n{n} entries answered in {took:.1f} s")
    assert len(res) == n and all(e == 0 for _, _, e, _ in res), [r for r in res if r[2]][:3]
    assert sorted(base for _, _, _, base in res) == list(range(n))
    assert took < 20, took
    assert b.running()
