"""The log validator through the wire (storage/log_validator.h, Kafka 2.7's LogValidator):

- compressed client batches are read record by record before they are stored, whatever
  compression.type says: a gzip/snappy/lz4/zstd batch whose payload is garbage gets
  CORRUPT_MESSAGE, one whose inner records are malformed INVALID_RECORD, a bomb past 64 MiB
  MESSAGE_TOO_LARGE; nothing is stored and the broker keeps serving (the old broker stored them:
  poison pills for every consumer);
- a client batch whose inner offsetDeltas are not 0..n-1 is stored rebuilt with fresh ones (Kafka's
  inPlaceAssignment = false), compressed or not, and read back at consecutive offsets;
- per-record checks inside compressed batches: a keyless record in a compacted topic is
  INVALID_RECORD and a CreateTime out of message.timestamp.difference.max.ms INVALID_TIMESTAMP,
  with Produce v8's record errors naming the records;
- Produce v0-v2 message sets compressed with snappy and lz4 (kafka-python with api_version 0.9 /
  0.10: magic 0 with lz4's broken header checksum, magic 1) are acknowledged and read back by
  confluent-kafka (the old broker answered UNSUPPORTED_COMPRESSION_TYPE);
- Fetch v0-v3 of snappy/lz4 data converts; zstd answers UNSUPPORTED_COMPRESSION_TYPE, and so
  does Fetch v4-v9 of a compression.type=zstd topic.
"""

import ctypes
import ctypes.util
import struct
import time
import zlib

import pytest

import gregor_harness as H
from kafka_wire import varint
from test_hostile_input import create_topic, fetch_old, legacy_messages, produce
from test_malformed import (FETCH, PRODUCE, Conn, Reader, array, crc32c, frame, header, i8, i16, i32, i64, string,
                            u32)

CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_TIMESTAMP = 2, 10, 32
UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD = 76, 87
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
MIB = 1 << 20


def _lib(name):
    return ctypes.CDLL(ctypes.util.find_library(name))


def compress(codec, data):
    """data compressed as Kafka's codecs write it (gzip; xerial-framed snappy; LZ4 frame; zstd)."""
    if codec == 0:
        return data
    if codec == GZIP:
        z = zlib.compressobj(6, zlib.DEFLATED, 16 + 15)
        return z.compress(data) + z.flush()
    if codec == SNAPPY:
        lib = _lib("snappy")
        out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
        for p in range(0, max(len(data), 1), 32 * 1024):
            block = data[p:p + 32 * 1024]
            n = ctypes.c_size_t(lib.snappy_max_compressed_length(ctypes.c_size_t(len(block))))
            buf = ctypes.create_string_buffer(n.value)
            assert lib.snappy_compress(block, ctypes.c_size_t(len(block)), buf, ctypes.byref(n)) == 0
            out += struct.pack(">i", n.value) + buf.raw[:n.value]
        return out
    if codec == LZ4:
        lib = _lib("lz4")
        lib.LZ4F_compressFrameBound.restype = ctypes.c_size_t
        lib.LZ4F_compressFrame.restype = ctypes.c_size_t
        cap = lib.LZ4F_compressFrameBound(ctypes.c_size_t(len(data)), None)
        buf = ctypes.create_string_buffer(cap)
        n = lib.LZ4F_compressFrame(buf, ctypes.c_size_t(cap), data, ctypes.c_size_t(len(data)), None)
        return buf.raw[:n]
    lib = _lib("zstd")
    lib.ZSTD_compressBound.restype = ctypes.c_size_t
    lib.ZSTD_compress.restype = ctypes.c_size_t
    cap = lib.ZSTD_compressBound(ctypes.c_size_t(len(data)))
    buf = ctypes.create_string_buffer(cap)
    n = lib.ZSTD_compress(buf, ctypes.c_size_t(cap), data, ctypes.c_size_t(len(data)), 3)
    return buf.raw[:n]


def record(i, value, key=b"k", ts_delta=0, length_fix=0):
    k = varint(-1) if key is None else varint(len(key)) + key
    body = i8(0) + varint(ts_delta) + varint(i) + k + varint(len(value)) + value + varint(0)
    return varint(len(body) + length_fix) + body


def batch(codec, records_bytes, n, ts=None, max_ts=None):
    """A RecordBatch v2 whose records section is records_bytes (already in codec, or raw)."""
    ts = int(time.time() * 1000) if ts is None else ts
    after_crc = (i16(codec) + i32(n - 1) + i64(ts) + i64(ts if max_ts is None else max_ts) + i64(-1) + i16(-1)
                 + i32(-1) + i32(n) + records_bytes)
    rest = i32(-1) + i8(2) + u32(crc32c(after_crc)) + after_crc
    return i64(0) + i32(len(rest)) + rest


def good_batch(codec, n=5, tag=b"ok"):
    recs = b"".join(record(i, tag + b"-%d" % i) for i in range(n))
    return batch(codec, compress(codec, recs), n)


def hw(port, topic):
    err, high, _ = fetch_old(port, 2, topic, MIB)
    assert err == 0
    return high


@pytest.fixture
def one(cluster_factory, zk_connect):
    return cluster_factory(zk_connect, n=1)


def consume_values(address, topic, n, timeout=30):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": address, "group.id": "v-" + topic, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got, deadline = [], time.time() + timeout
        while len(got) < n and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        return got
    finally:
        c.close()


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD], ids=["gzip", "snappy", "lz4", "zstd"])
def test_undecodable_compressed_batches_are_refused(one, codec):
    """compression.type=producer (the default) kept every compressed batch unread."""
    b = one[1]
    topic = f"undecodable-{codec}"
    create_topic(b.port, topic)
    garbage = bytes((i * 37 + 11) & 0xFF for i in range(400))
    recs = b"".join(record(i, b"v%d" % i) for i in range(5))
    cases = {
        "garbage payload": (batch(codec, garbage, 5), CORRUPT_MESSAGE),
        "stream cut short": (batch(codec, compress(codec, recs)[:-7], 5), None),  # codec or record error
        "record length too long": (batch(codec, compress(codec, record(0, b"x", length_fix=3)), 1), INVALID_RECORD),
        "fewer records than the count": (batch(codec, compress(codec, recs), 6), INVALID_RECORD),
        "bytes after the records": (batch(codec, compress(codec, recs + b"\x00\x01"), 5), INVALID_RECORD),
    }
    for what, (bad, want) in cases.items():
        err = produce(b.port, topic, bad)[0]
        if want is None:
            assert err in (CORRUPT_MESSAGE, INVALID_RECORD), (what, err)
        else:
            assert err == want, (what, err)
        assert hw(b.port, topic) == 0, f"{what}: stored"
    assert b.running()
    # the broker keeps serving: a good batch of the codec is stored and consumed
    assert produce(b.port, topic, good_batch(codec)) == (0, 0)
    assert consume_values(b.address, topic, 5) == [b"ok-%d" % i for i in range(5)]


def consume_records(address, topic, n, timeout=30):
    """(offset, key, value) of the first n records of partition 0, read by confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": address, "group.id": "o-" + topic, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got, deadline = [], time.time() + timeout
        while len(got) < n and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append((m.offset(), m.key(), m.value()))
        return got
    finally:
        c.close()


# Inner offsetDeltas as some producers write them: all 0 (old clients' v1 inner offsets), out of
# order, repeated, negative, past lastOffsetDelta.
ODD_DELTAS = [0, 0, 9, 3, -2]


@pytest.mark.parametrize("codec,compression_type", [(GZIP, None), (SNAPPY, None), (LZ4, None), (ZSTD, None),
                                                    (0, None), (GZIP, "lz4"), (0, "zstd")],
                         ids=["gzip", "snappy", "lz4", "zstd", "uncompressed", "gzip-to-lz4", "none-to-zstd"])
def test_inner_offsets_not_0_to_n_are_reassigned(one, codec, compression_type):
    """Kafka 2.7's validateMessagesAndAssignOffsetsCompressed accepts a batch whose inner offsets
    are not 0..n-1 and rebuilds it with fresh ones (inPlaceAssignment = false); the old broker
    refused it with INVALID_RECORD. Consumers read every record once, at consecutive offsets."""
    b = one[1]
    topic = f"odd-deltas-{codec}-{compression_type or 'producer'}"
    create_topic(b.port, topic, {"compression.type": compression_type} if compression_type else None)
    assert produce(b.port, topic, good_batch(codec, n=3, tag=b"first")) == (0, 0)
    recs = b"".join(record(d, b"odd-%d" % i, key=b"key-%d" % i) for i, d in enumerate(ODD_DELTAS))
    assert produce(b.port, topic, batch(codec, compress(codec, recs), len(ODD_DELTAS))) == (0, 3)
    assert produce(b.port, topic, good_batch(codec, n=2, tag=b"last")) == (0, 8)
    got = consume_records(b.address, topic, 10)
    want = ([(i, b"k", b"first-%d" % i) for i in range(3)] + [(3 + i, b"key-%d" % i, b"odd-%d" % i) for i in range(5)]
            + [(8 + i, b"k", b"last-%d" % i) for i in range(2)])
    assert got == want


def test_decompression_bomb_refused(one):
    """A gzip batch of ~70 KB inflating to 70 MiB: past the validator's 64 MiB bound,
    MESSAGE_TOO_LARGE (a Java producer splits such a batch); the broker's peak RSS barely moves."""
    b = one[1]
    create_topic(b.port, "bomb")
    z = zlib.compressobj(6, zlib.DEFLATED, 16 + 15)
    parts = []
    for i in range(70):
        body = i8(0) + varint(0) + varint(i) + varint(1) + b"k" + varint(MIB) + bytes(MIB) + varint(0)
        parts.append(z.compress(varint(len(body)) + body))
    parts.append(z.flush())
    bomb = batch(GZIP, b"".join(parts), 70)
    assert len(bomb) < 200 * 1024
    with open(f"/proc/{b.pid}/status") as f:
        hwm0 = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
    assert produce(b.port, "bomb", bomb)[0] == MESSAGE_TOO_LARGE
    with open(f"/proc/{b.pid}/status") as f:
        hwm1 = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
    print(f"\nbroker VmHWM {hwm0 // 1024} -> {hwm1 // 1024} MiB validating a 70 MiB gzip bomb of {len(bomb)} bytes")
    assert hwm1 - hwm0 < 32 * 1024
    assert hw(b.port, "bomb") == 0 and b.running()


def produce_v8(port, topic, records):
    """Produce v8 (record errors); returns (error, [(batch index, message)], error message)."""
    body = (string(None) + i16(1) + i32(10000) + array([string(topic) + array([i32(0) + i32(len(records)) + records])]))
    conn = Conn(port, timeout=30)
    try:
        conn.send(frame(header(PRODUCE, 8, 3) + body))
        r = Reader(conn.recv_frame())
    finally:
        conn.close()
    assert r.i32() == 3 and r.i32() == 1 and r.string() == topic and r.i32() == 1
    r.i32()
    err = r.i16()
    r.i64(), r.i64(), r.i64()  # base offset, log append time, log start offset
    errs = [(r.i32(), r.string()) for _ in range(r.i32())]
    return err, errs, r.string()


@pytest.mark.parametrize("codec", [GZIP, LZ4], ids=["gzip", "lz4"])
def test_record_errors_inside_compressed_batches(one, codec):
    """The old broker never looked inside compressed batches: keyless records reached compacted
    topics, and only the header's first/max timestamps were checked."""
    b = one[1]
    create_topic(b.port, f"compacted-{codec}", {"cleanup.policy": "compact"})
    recs = b"".join(record(i, b"v", key=None if i in (1, 3) else b"k%d" % i) for i in range(5))
    err, errs, msg = produce_v8(b.port, f"compacted-{codec}", batch(codec, compress(codec, recs), 5))
    assert err == INVALID_RECORD and [i for i, _ in errs] == [1, 3] and msg, (err, errs, msg)
    assert hw(b.port, f"compacted-{codec}") == 0
    # timestamps: the header's first and max are in range, the middle record is a day early
    create_topic(b.port, f"ts-{codec}", {"message.timestamp.difference.max.ms": "60000"})
    now = int(time.time() * 1000)
    recs = record(0, b"a") + record(1, b"b", ts_delta=-86400000) + record(2, b"c")
    err, errs, msg = produce_v8(b.port, f"ts-{codec}", batch(codec, compress(codec, recs), 3, ts=now, max_ts=now))
    assert err == INVALID_TIMESTAMP and [i for i, _ in errs] == [1], (err, errs)
    assert hw(b.port, f"ts-{codec}") == 0
    # a good batch passes both
    assert produce(b.port, f"compacted-{codec}", good_batch(codec))[0] == 0


def test_record_errors_with_acks_0_are_not_leaked(one):
    """Produce v8 with acks=0 and a batch the validator refuses with record errors: the broker
    closes the connection (Kafka's acks=0 answer to an error) and keeps nothing of the record
    errors it had copied for the response it will not send (the old code leaked them per request:
    LeakSanitizer catches it at the broker's exit under GREGOR_SANITIZED)."""
    b = one[1]
    create_topic(b.port, "compacted-acks0", {"cleanup.policy": "compact"})
    recs = b"".join(record(i, b"v", key=None) for i in range(3))
    records = batch(GZIP, compress(GZIP, recs), 3)
    body = (string(None) + i16(0) + i32(10000)
            + array([string("compacted-acks0") + array([i32(0) + i32(len(records)) + records])]))
    for _ in range(5):
        conn = Conn(b.port, timeout=30)
        try:
            conn.send(frame(header(PRODUCE, 8, 4) + body))
            assert conn.s.recv(1) == b""  # closed without an answer
        finally:
            conn.close()
    assert hw(b.port, "compacted-acks0") == 0 and b.running()
    assert produce(b.port, "compacted-acks0", good_batch(GZIP))[0] == 0


@pytest.mark.parametrize("api_version", [(0, 9), (0, 10)], ids=["magic0", "magic1"])
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_legacy_compressed_message_sets_are_up_converted(one, api_version, codec):
    """kafka-python speaking Produce v1 (0.9: magic 0, lz4 with the broken header checksum of
    KAFKA-3160) or v2 (0.10: magic 1); confluent-kafka reads the values back. Old broker: the
    producer got UNSUPPORTED_COMPRESSION_TYPE for snappy and lz4."""
    pytest.importorskip("snappy")
    pytest.importorskip("lz4")
    pytest.importorskip("xxhash")
    from kafka import KafkaProducer
    b = one[1]
    topic = f"legacy-{codec}-{api_version[1]}"
    create_topic(b.port, topic)
    p = KafkaProducer(bootstrap_servers=b.address, api_version=api_version, compression_type=codec, linger_ms=50,
                      retries=0)
    try:
        futs = [p.send(topic, key=b"k%d" % i, value=b"legacy-%s-%d" % (codec.encode(), i), partition=0)
                for i in range(20)]
        p.flush(30)
        offsets = [f.get(timeout=30).offset for f in futs]
    finally:
        p.close()
    assert offsets == list(range(20))
    assert consume_values(b.address, topic, 20) == [b"legacy-%s-%d" % (codec.encode(), i) for i in range(20)]


@pytest.mark.parametrize("codec", ["snappy", "lz4", "zstd"])
def test_old_fetch_versions_read_compressed_data(one, codec):
    """Batches from confluent-kafka in each codec, read with Fetch v0 (magic 0) and v2 (magic 1):
    snappy and lz4 convert (the old broker converted gzip only and answered
    UNSUPPORTED_COMPRESSION_TYPE); zstd cannot be down-converted (Kafka's RecordsUtil).
    librdkafka sends a batch uncompressed when compressing does not shrink it (a batch of one short
    record): the values repeat a 100-byte run so every batch shrinks in every codec."""
    from confluent_kafka import Producer
    b = one[1]
    topic = f"oldfetch-{codec}"
    create_topic(b.port, topic)
    p = Producer({"bootstrap.servers": b.address, "compression.type": codec, "linger.ms": 20})
    for i in range(30):
        p.produce(topic, key=b"k%d" % i, value=b"value-%d-" % i + b"x" * 100, partition=0)
    assert p.flush(30) == 0
    for version in (0, 2):
        err, high, ms = fetch_old(b.port, version, topic, MIB)
        if codec == "zstd":
            assert err == UNSUPPORTED_COMPRESSION_TYPE and ms == b""
            continue
        assert err == 0 and high == 30
        msgs = legacy_messages(ms)
        assert [o for o, _ in msgs] == list(range(30)), msgs
        # from the middle of a batch: records before the fetch offset are left out
        err, high, ms = fetch_old(b.port, version, topic, MIB, offset=17)
        assert err == 0 and [o for o, _ in legacy_messages(ms)] == list(range(17, 30))
    assert b.running()


def fetch_v4_error(port, topic):
    body = (i32(-1) + i32(100) + i32(1) + i32(MIB) + i8(0) + array([string(topic) + array([i32(0) + i64(0) + i32(MIB)])]))
    conn = Conn(port, timeout=30)
    try:
        conn.send(frame(header(FETCH, 4, 5) + body))
        r = Reader(conn.recv_frame())
    finally:
        conn.close()
    assert r.i32() == 5
    r.i32()
    assert r.i32() == 1 and r.string() == topic and r.i32() == 1 and r.i32() == 0
    return r.i16()


def test_fetch_below_v10_of_a_zstd_topic(one):
    """compression.type=zstd: Kafka 2.7 answers Fetch v0-v9 UNSUPPORTED_COMPRESSION_TYPE (zstd
    needs v10, KIP-110); a topic of another codec reads as usual."""
    b = one[1]
    create_topic(b.port, "zstd-topic", {"compression.type": "zstd"})
    create_topic(b.port, "lz4-topic", {"compression.type": "lz4"})
    for t in ("zstd-topic", "lz4-topic"):
        assert produce(b.port, t, good_batch(0))[0] == 0
    assert fetch_v4_error(b.port, "zstd-topic") == UNSUPPORTED_COMPRESSION_TYPE
    assert fetch_old(b.port, 2, "zstd-topic", MIB)[0] == UNSUPPORTED_COMPRESSION_TYPE
    assert fetch_v4_error(b.port, "lz4-topic") == 0
    assert fetch_old(b.port, 2, "lz4-topic", MIB)[0] == 0
    assert consume_values(b.address, "zstd-topic", 5) == [b"ok-%d" % i for i in range(5)]
