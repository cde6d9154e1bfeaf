"""Malformed input against a live gregord, over raw sockets.

Every class of broken frame and field: negative, huge (> socket.request.max.bytes) and tiny (< 8)
sizes, truncated headers, header-only requests, unknown API keys, versions -1 and above the
advertised maximum, arrays/strings claiming INT32_MAX elements with a few bytes behind them,
negative string/bytes lengths, flexible-version varint counts, seeded garbage bodies for
Metadata/Produce/Fetch/CreateTopics, Produce with corrupted record batches (bad CRC etc. must come
back as a partition error in a proper Produce response on a connection that stays usable), and
ApiVersions v99 (UNSUPPORTED_VERSION, answered as v0 with the supported list).

After each case: the connection was closed (or the right Kafka error came back), a NEW connection
still gets a correct Metadata answer, the broker process is alive, and its RSS stays within
RSS_BUDGET_MB of what it was before the first case.
"""

import os
import random
import socket
import struct
import time

import pytest

import gregor_harness as H
from kafka_wire import uvarint, varint  # noqa: F401 (used by the record encoders)

INT32_MAX = 0x7FFFFFFF
RSS_BUDGET_MB = 50
MAX_REQUEST = 1048576  # socket.request.max.bytes for this broker (so "huge" is cheap to test)
TOPIC = "malformed"

# API keys
PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 2, 3, 18, 19
# Kafka error codes used here
CORRUPT_MESSAGE, UNSUPPORTED_VERSION, INVALID_RECORD = 2, 35, 87
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH = 45, 47


# ---------------------------------------------------------------------------------------------
# Encoding helpers


def i8(v): return struct.pack(">b", v)
def i16(v): return struct.pack(">h", v)
def i32(v): return struct.pack(">i", v)
def i64(v): return struct.pack(">q", v)
def u32(v): return struct.pack(">I", v)


def string(s):
    if s is None:
        return i16(-1)
    b = s.encode() if isinstance(s, str) else s
    return i16(len(b)) + b


def array(items):
    return i32(len(items)) + b"".join(items)


def header(api_key, version, corr, client_id="malformed-test"):
    return i16(api_key) + i16(version) + i32(corr) + string(client_id)


def frame(payload):
    return i32(len(payload)) + payload


def _crc32c_table():
    t = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_CRC_T = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def record_batch(values, magic=2, crc_fix=True, count=None, last_delta=None, pid=-1, epoch=-1, seq=-1):
    """A RecordBatch v2 (uncompressed) holding `values`; the knobs break it on purpose
    (pid/epoch/seq: the idempotent producer fields)."""
    recs = b""
    for i, v in enumerate(values):
        body = i8(0) + varint(0) + varint(i) + varint(-1) + varint(len(v)) + v + varint(0)
        recs += varint(len(body)) + body
    n = len(values)
    ts = int(time.time() * 1000)
    after_crc = (i16(0) + i32(n - 1 if last_delta is None else last_delta) + i64(ts) + i64(ts)
                 + i64(pid) + i16(epoch) + i32(seq) + i32(n if count is None else count) + recs)
    crc = crc32c(after_crc) if crc_fix else 0
    rest = i32(-1) + i8(magic) + u32(crc) + after_crc
    return i64(0) + i32(len(rest)) + rest


def produce_v3(corr, topic, partition, records, acks=1):
    body = (string(None) + i16(acks) + i32(10000)
            + array([string(topic) + array([i32(partition) + i32(len(records)) + records])]))
    return frame(header(PRODUCE, 3, corr) + body)


def metadata_v1(corr, topics=None):
    body = i32(-1) if topics is None else array([string(t) for t in topics])
    return frame(header(METADATA, 1, corr) + body)


def fetch_v4(corr, topic, partition, offset=0):
    body = (i32(-1) + i32(100) + i32(1) + i32(1 << 20) + i8(0)
            + array([string(topic) + array([i32(partition) + i64(offset) + i32(1 << 20)])]))
    return frame(header(FETCH, 4, corr) + body)


def create_topics_v2(corr, name, partitions=1, rf=1):
    body = (array([string(name) + i32(partitions) + i16(rf) + array([]) + array([])])
            + i32(5000) + i8(0))
    return frame(header(CREATE_TOPICS, 2, corr) + body)


# ---------------------------------------------------------------------------------------------
# Decoding helpers


class Reader:
    def __init__(self, data):
        self.d = data
        self.p = 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def i16(self): return self.take(">h")
    def i32(self): return self.take(">i")
    def i64(self): return self.take(">q")

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        s = self.d[self.p:self.p + n].decode()
        self.p += n
        return s


# ---------------------------------------------------------------------------------------------
# Connections


class Conn:
    def __init__(self, port, timeout=5.0):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self):
        self.s.close()

    def send(self, data):
        self.s.sendall(data)

    def _exact(self, n):
        b = b""
        while len(b) < n:
            chunk = self.s.recv(n - len(b))
            if not chunk:
                raise ConnectionError(f"closed after {len(b)} of {n} bytes")
            b += chunk
        return b

    def recv_frame(self):
        (n,) = struct.unpack(">i", self._exact(4))
        assert 4 <= n < 64 << 20, f"response frame size {n}"
        return self._exact(n)

    def outcome(self, timeout=5.0):
        """'closed' if the broker closes the connection within `timeout` s, else the first
        response frame it sent; raises AssertionError if it does neither."""
        self.s.settimeout(timeout)
        try:
            first = self.s.recv(4)
        except ConnectionResetError:
            return "closed"
        except socket.timeout:
            raise AssertionError(f"neither closed nor answered within {timeout}s")
        if not first:
            return "closed"
        rest = b""
        while len(first) < 4:
            more = self.s.recv(4 - len(first))
            if not more:
                return "closed"
            first += more
        (n,) = struct.unpack(">i", first)
        assert 4 <= n < 64 << 20, f"response frame size {n}"
        rest = self._exact(n)
        return rest


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def parse_metadata_v1(resp, corr):
    r = Reader(resp)
    assert r.i32() == corr, "correlation id"
    brokers = []
    for _ in range(r.i32()):
        node, host, port = r.i32(), r.string(), r.i32()
        r.string()  # rack
        brokers.append((node, host, port))
    controller = r.i32()
    topics = {}
    for _ in range(r.i32()):
        err, name = r.i16(), r.string()
        r.p += 1  # is_internal
        parts = {}
        for _ in range(r.i32()):
            perr, idx, leader = r.i16(), r.i32(), r.i32()
            nrep = r.i32()
            r.p += 4 * nrep
            nisr = r.i32()
            r.p += 4 * nisr
            parts[idx] = (perr, leader)
        topics[name] = (err, parts)
    return brokers, controller, topics


def parse_produce_v3(resp, corr):
    r = Reader(resp)
    assert r.i32() == corr, "correlation id"
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            idx, err, base = r.i32(), r.i16(), r.i64()
            r.i64()  # log_append_time
            out[(name, idx)] = (err, base)
    r.i32()  # throttle
    return out


def parse_api_versions_v0(resp, corr):
    r = Reader(resp)
    assert r.i32() == corr, "correlation id"
    err = r.i16()
    keys = {}
    for _ in range(r.i32()):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        keys[k] = (lo, hi)
    return err, keys


# ---------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def broker(zk_server, tmp_path_factory):
    """One gregord (broker 1) with socket.request.max.bytes=1 MiB and a 1-partition topic."""
    root = H.kazoo_client(zk_server.hosts)
    chroot = f"/gregor-malformed-{random.randrange(16**6):06x}"
    try:
        root.ensure_path(chroot)
    finally:
        H.close_kazoo(root)
    c = H.Cluster(str(tmp_path_factory.mktemp("malformed")), zk_server.hosts + chroot, n=1,
                  config={"socket.request.max.bytes": str(MAX_REQUEST)})
    try:
        c.start()
        b = c[1]
        conn = Conn(b.port)
        try:
            conn.send(create_topics_v2(7, TOPIC))
            conn.recv_frame()
        finally:
            conn.close()

        def leader_known():
            _, _, topics = metadata_ok(b.port, [TOPIC])
            return topics.get(TOPIC, (None, {}))[1].get(0, (None, -1))[1] == 1
        H.wait_for(leader_known, 30, f"a leader for {TOPIC}-0")
        # A valid produce so the log and the code paths are warm before the RSS baseline.
        conn = Conn(b.port)
        try:
            conn.send(produce_v3(8, TOPIC, 0, record_batch([b"warm"])))
            assert parse_produce_v3(conn.recv_frame(), 8)[(TOPIC, 0)][0] == 0
        finally:
            conn.close()
        c.rss_baseline_kb = rss_kb(b.pid)
        yield c
    finally:
        c.close()


@pytest.fixture(autouse=True)
def _attach_logs(request):
    # conftest attaches broker log tails of clusters listed here when a test fails.
    if "broker" in request.fixturenames:
        request.node._gregor_clusters = [request.getfixturevalue("broker")]
    yield


_corr = [1000]


def next_corr():
    _corr[0] += 1
    return _corr[0]


def metadata_ok(port, topics=None):
    """A correct Metadata v1 round trip on a fresh connection; returns (brokers, controller, topics)."""
    corr = next_corr()
    conn = Conn(port)
    try:
        conn.send(metadata_v1(corr, topics))
        brokers, controller, tops = parse_metadata_v1(conn.recv_frame(), corr)
    finally:
        conn.close()
    assert [b[0] for b in brokers] == [1], brokers
    assert brokers[0][2] == port
    return brokers, controller, tops


def after_case(broker_cluster, what):
    """The broker survived: alive, answers Metadata on a new connection, RSS bounded."""
    b = broker_cluster[1]
    assert b.running(), f"gregord exited (code {b.returncode}) after {what}:\n{b.log_tail(30)}"
    metadata_ok(b.port, [TOPIC])
    grown = (rss_kb(b.pid) - broker_cluster.rss_baseline_kb) / 1024
    assert grown < RSS_BUDGET_MB, f"RSS grew by {grown:.1f} MB after {what}"


def send_expect_closed(broker_cluster, data, what, half_close=False, timeout=5.0):
    conn = Conn(broker_cluster[1].port)
    try:
        try:
            conn.send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while we were still writing: fine
        if half_close:
            conn.s.shutdown(socket.SHUT_WR)
        got = conn.outcome(timeout)
        assert got == "closed", f"{what}: expected the connection closed, got a response {got[:64]!r}"
    finally:
        conn.close()
    after_case(broker_cluster, what)


def send_expect_closed_or_answer(broker_cluster, data, corr, what):
    """Garbage that may or may not decode: either closed, or a framed answer to `corr`."""
    conn = Conn(broker_cluster[1].port)
    try:
        try:
            conn.send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        got = conn.outcome()
        if got != "closed":
            assert struct.unpack_from(">i", got)[0] == corr, f"{what}: answer with a wrong correlation id"
    finally:
        conn.close()
    after_case(broker_cluster, what)
    return got


# ---------------------------------------------------------------------------------------------
# Frame sizes


@pytest.mark.parametrize("size", [-1, -2, -0x80000000, -1000])
def test_negative_size(broker, size):
    send_expect_closed(broker, i32(size) + b"\0" * 16, f"frame size {size}")


@pytest.mark.parametrize("size", [MAX_REQUEST + 1, 100 << 20, INT32_MAX])
def test_huge_size_closed_without_body(broker, size):
    """Only the 4 size bytes are sent: the broker must close at once, not wait for (or allocate)
    the body."""
    send_expect_closed(broker, i32(size), f"frame size {size}")


@pytest.mark.parametrize("size", range(0, 8))
def test_size_below_header(broker, size):
    send_expect_closed(broker, i32(size) + b"\x00\x03\x00\x01\x00\x00\x00"[:size], f"frame size {size}")


def test_max_size_frame_of_garbage(broker):
    """A frame of exactly socket.request.max.bytes is read (not rejected by size) and its garbage
    header closes the connection; memory returns."""
    send_expect_closed(broker, i32(MAX_REQUEST) + b"\xff" * MAX_REQUEST, "max-size garbage frame")


# ---------------------------------------------------------------------------------------------
# Headers


@pytest.mark.parametrize("cut", [1, 2, 3, 4, 5, 6, 7, 8, 9])
def test_truncated_header(broker, cut):
    """The frame is complete but the header inside it stops early."""
    hdr = header(METADATA, 1, 1, client_id="abc")
    send_expect_closed(broker, frame(hdr[:cut]), f"header cut at {cut}")


def test_client_id_longer_than_frame(broker):
    payload = i16(METADATA) + i16(1) + i32(1) + i16(32767) + b"abc"
    send_expect_closed(broker, frame(payload), "client id of 32767 bytes in a 13-byte frame")


def test_client_id_negative_length(broker):
    payload = i16(METADATA) + i16(1) + i32(1) + i16(-7) + i32(-1)
    send_expect_closed(broker, frame(payload), "client id length -7")


def test_frame_cut_short_then_eof(broker):
    """The peer promises 100 bytes, sends 10, and half-closes: the broker closes its side."""
    send_expect_closed(broker, i32(100) + header(METADATA, 1, 1, "x")[:10], "frame cut short",
                       half_close=True)


@pytest.mark.parametrize("api", [METADATA, PRODUCE, FETCH, CREATE_TOPICS, LIST_OFFSETS])
def test_header_only(broker, api):
    version = {METADATA: 1, PRODUCE: 3, FETCH: 4, CREATE_TOPICS: 2, LIST_OFFSETS: 1}[api]
    send_expect_closed(broker, frame(header(api, version, 5)), f"api {api} v{version} header only")


def test_api_versions_header_only_is_valid(broker):
    """ApiVersions v0 has an empty body: header only is a complete, valid request."""
    conn = Conn(broker[1].port)
    try:
        conn.send(frame(header(API_VERSIONS, 0, 77)))
        err, keys = parse_api_versions_v0(conn.recv_frame(), 77)
    finally:
        conn.close()
    assert err == 0 and METADATA in keys and PRODUCE in keys
    after_case(broker, "ApiVersions v0")


# ---------------------------------------------------------------------------------------------
# API keys and versions


@pytest.mark.parametrize("key", [-1, -32768, 9999, 32767, 1000])
def test_unknown_api_key(broker, key):
    send_expect_closed(broker, frame(header(key, 0, 9) + b"\0" * 8), f"api key {key}")


def advertised(broker):
    conn = Conn(broker[1].port)
    try:
        conn.send(frame(header(API_VERSIONS, 0, 3)))
        err, keys = parse_api_versions_v0(conn.recv_frame(), 3)
    finally:
        conn.close()
    assert err == 0
    return keys


@pytest.mark.parametrize("api", [METADATA, PRODUCE, FETCH, CREATE_TOPICS, LIST_OFFSETS])
def test_version_out_of_range(broker, api):
    lo, hi = advertised(broker)[api]
    for v in sorted({-1, -32768, hi + 1, 99, 32767} | ({lo - 1} if lo > 0 else set())):
        send_expect_closed(broker, frame(header(api, v, 11) + i32(-1) + b"\0" * 16), f"api {api} v{v}")


@pytest.mark.parametrize("version", [99, 5, 32767])
def test_api_versions_unsupported_version(broker, version):
    """Kafka's rule: ApiVersions at an unknown version gets UNSUPPORTED_VERSION, encoded as v0,
    with the supported list (so the client can retry at a version it finds there)."""
    corr = next_corr()
    conn = Conn(broker[1].port)
    try:
        conn.send(frame(header(API_VERSIONS, version, corr) + b"\x00" * 6))
        err, keys = parse_api_versions_v0(conn.recv_frame(), corr)
        assert err == UNSUPPORTED_VERSION, err
        assert keys.get(API_VERSIONS, (None, -1))[1] >= 0 and METADATA in keys, keys
        # The connection stays usable: a Metadata request on it is answered.
        c2 = next_corr()
        conn.send(metadata_v1(c2))
        parse_metadata_v1(conn.recv_frame(), c2)
    finally:
        conn.close()
    after_case(broker, f"ApiVersions v{version}")


def test_api_versions_negative_version(broker):
    """ApiVersions v-1: Kafka answers UNSUPPORTED_VERSION as v0; closing is tolerated."""
    corr = next_corr()
    conn = Conn(broker[1].port)
    try:
        conn.send(frame(header(API_VERSIONS, -1, corr)))
        got = conn.outcome()
    finally:
        conn.close()
    if got != "closed":
        err, keys = parse_api_versions_v0(got, corr)
        assert err == UNSUPPORTED_VERSION and keys
    after_case(broker, "ApiVersions v-1")


# ---------------------------------------------------------------------------------------------
# Oversize counts, negative lengths


OVERSIZE = {
    "metadata topics INT32_MAX": lambda: frame(header(METADATA, 1, 1) + i32(INT32_MAX) + string("a")),
    "metadata topics 10M": lambda: frame(header(METADATA, 1, 1) + i32(10_000_000)),
    "metadata topic name 32767 bytes": lambda: frame(header(METADATA, 1, 1) + i32(1) + i16(32767) + b"ab"),
    "metadata topic name length -5": lambda: frame(header(METADATA, 1, 1) + i32(1) + i16(-5)),
    "metadata topic name null (non-nullable)": lambda: frame(header(METADATA, 1, 1) + i32(1) + i16(-1)),
    "metadata topics count -2": lambda: frame(header(METADATA, 1, 1) + i32(-2)),
    "produce topics INT32_MAX": lambda: frame(header(PRODUCE, 3, 1) + string(None) + i16(1) + i32(1000)
                                              + i32(INT32_MAX) + string(TOPIC)),
    "produce partitions INT32_MAX": lambda: frame(header(PRODUCE, 3, 1) + string(None) + i16(1) + i32(1000)
                                                  + i32(1) + string(TOPIC) + i32(INT32_MAX) + i32(0)),
    "produce records length INT32_MAX": lambda: frame(header(PRODUCE, 3, 1) + string(None) + i16(1) + i32(1000)
                                                      + i32(1) + string(TOPIC) + i32(1) + i32(0)
                                                      + i32(INT32_MAX) + b"\0" * 8),
    "produce records length -5": lambda: frame(header(PRODUCE, 3, 1) + string(None) + i16(1) + i32(1000)
                                               + i32(1) + string(TOPIC) + i32(1) + i32(0) + i32(-5)),
    "produce transactional id length -3": lambda: frame(header(PRODUCE, 3, 1) + i16(-3) + i16(1) + i32(1000)
                                                        + i32(0)),
    "fetch topics INT32_MAX": lambda: frame(header(FETCH, 4, 1) + i32(-1) + i32(100) + i32(1) + i32(1 << 20)
                                            + i8(0) + i32(INT32_MAX)),
    "fetch partitions INT32_MAX": lambda: frame(header(FETCH, 4, 1) + i32(-1) + i32(100) + i32(1) + i32(1 << 20)
                                                + i8(0) + i32(1) + string(TOPIC) + i32(INT32_MAX)),
    "create topics INT32_MAX": lambda: frame(header(CREATE_TOPICS, 2, 1) + i32(INT32_MAX) + string("x")),
    "create topics configs INT32_MAX": lambda: frame(header(CREATE_TOPICS, 2, 1) + i32(1) + string("x") + i32(1)
                                                     + i16(1) + i32(0) + i32(INT32_MAX)),
    "create topics assignments broker ids INT32_MAX":
        lambda: frame(header(CREATE_TOPICS, 2, 1) + i32(1) + string("x") + i32(-1) + i16(-1) + i32(1)
                      + i32(0) + i32(INT32_MAX)),
    # Flexible versions (header v2, compact encodings, tagged fields).
    "metadata v9 compact topics 2^32-1": lambda: frame(header(METADATA, 9, 1) + uvarint(0)
                                                        + uvarint(0xFFFFFFFF) + b"\0"),
    "metadata v9 header tagged fields 2^31": lambda: frame(header(METADATA, 9, 1) + uvarint(1 << 31) + b"\0"),
    "metadata v9 tag size 2^31": lambda: frame(header(METADATA, 9, 1) + uvarint(1) + uvarint(0)
                                               + uvarint(1 << 31) + b"\0\0"),
    "metadata v9 overlong varint": lambda: frame(header(METADATA, 9, 1) + b"\xff" * 12),
    "metadata v9 compact name length 2^31": lambda: frame(header(METADATA, 9, 1) + uvarint(0) + uvarint(2)
                                                           + uvarint(1 << 31) + b"ab"),
}


@pytest.mark.parametrize("case", list(OVERSIZE))
def test_oversize_or_negative_field(broker, case):
    send_expect_closed(broker, OVERSIZE[case](), case)


# ---------------------------------------------------------------------------------------------
# Garbage bodies


GARBAGE_APIS = {"Metadata v1": (METADATA, 1), "Metadata v9": (METADATA, 9), "Produce v3": (PRODUCE, 3),
                "Produce v8": (PRODUCE, 8), "Fetch v4": (FETCH, 4), "Fetch v11": (FETCH, 11),
                "CreateTopics v2": (CREATE_TOPICS, 2), "CreateTopics v5": (CREATE_TOPICS, 5),
                "DescribeConfigs v0": (32, 0), "DescribeConfigs v3": (32, 3), "AlterConfigs v1": (33, 1),
                "IncrementalAlterConfigs v0": (44, 0), "IncrementalAlterConfigs v1": (44, 1),
                "DescribeClientQuotas v0": (48, 0), "AlterClientQuotas v0": (49, 0)}
FLEXIBLE = {(METADATA, 9), (CREATE_TOPICS, 5), (44, 1)}  # request header v2: tagged fields


@pytest.mark.parametrize("name", list(GARBAGE_APIS))
def test_garbage_body(broker, name):
    api, ver = GARBAGE_APIS[name]
    rng = random.Random(f"{name}-gregor")
    outcomes = {"closed": 0, "answered": 0}
    for i in range(12):
        n = rng.choice([1, 2, 3, 7, 16, 64, 200, 1000])
        body = bytes(rng.randrange(256) for _ in range(n))
        corr = next_corr()
        hdr = header(api, ver, corr) + (b"\0" if (api, ver) in FLEXIBLE or ver >= 9 else b"")
        got = send_expect_closed_or_answer(broker, frame(hdr + body), corr, f"{name} garbage #{i} ({n} bytes)")
        outcomes["closed" if got == "closed" else "answered"] += 1
    print(f"{name}: {outcomes}")


def test_configs_and_quotas_semantic_errors(broker):
    """Well-formed DescribeConfigs / IncrementalAlterConfigs / AlterClientQuotas with nonsense in
    them: per-resource errors in a proper response, connection usable."""
    conn = Conn(broker[1].port)
    try:
        corr = next_corr()
        res = [i8(99) + string("x") + i32(-1), i8(4) + string("abc") + i32(-1), i8(4) + string("7") + i32(-1),
               i8(2) + string("no-such-topic") + array([string("retention.ms")])]
        conn.send(frame(header(32, 0, corr) + array(res)))
        r = conn.recv_frame()
        assert struct.unpack(">i", r[:4])[0] == corr
        off = 8  # correlation id, throttle
        (n,) = struct.unpack(">i", r[off:off + 4])
        off += 4
        errs = []
        for _ in range(n):
            (err,) = struct.unpack(">h", r[off:off + 2])
            errs.append(err)
            off += 2
            for _field in range(2):  # message, then type (i8) + name
                (ln,) = struct.unpack(">h", r[off:off + 2])
                off += 2 + max(ln, 0)
                if _field == 0:
                    off += 1
            (nc,) = struct.unpack(">i", r[off:off + 4])
            off += 4
            assert nc <= 0
        assert errs == [42, 42, 42, 3], errs  # INVALID_REQUEST x3, UNKNOWN_TOPIC_OR_PARTITION
        # IncrementalAlterConfigs v0: unknown op 9, then a duplicate key
        corr = next_corr()
        cfgs = array([string("retention.ms") + i8(9) + string("1")])
        dup = array([string("retention.ms") + i8(0) + string("1"), string("retention.ms") + i8(1) + string(None)])
        conn.send(frame(header(44, 0, corr) + array([i8(2) + string(TOPIC) + cfgs, i8(2) + string(TOPIC) + dup])
                        + i8(0)))
        r = conn.recv_frame()
        assert struct.unpack(">i", r[:4])[0] == corr
        assert struct.unpack(">i", r[8:12])[0] == 2
        assert struct.unpack(">h", r[12:14])[0] == 42
        # AlterClientQuotas v0: an entity without components, and one with an unknown type
        corr = next_corr()
        op = array([string("producer_byte_rate") + struct.pack(">d", 1000.0) + i8(0)])
        entries = [array([]) + op, array([string("ip") + string("1.2.3.4")]) + op]
        conn.send(frame(header(49, 0, corr) + array(entries) + i8(0)))
        r = conn.recv_frame()
        assert struct.unpack(">i", r[:4])[0] == corr
        assert struct.unpack(">i", r[8:12])[0] == 2 and struct.unpack(">h", r[12:14])[0] == 42
    finally:
        conn.close()
    metadata_ok(broker[1].port)


# ---------------------------------------------------------------------------------------------
# Produce with corrupted record batches: a proper Produce response with the partition error


def _bad_crc():
    b = bytearray(record_batch([b"v1", b"v2"]))
    b[-3] ^= 0x55  # inside the last record's value: covered by the CRC
    return bytes(b)


def _truncated():
    b = record_batch([b"hello", b"world"])
    return b[:-4]  # batchLength now points past the end


def _short_length():
    b = bytearray(record_batch([b"x"]))
    struct.pack_into(">i", b, 8, 20)
    return bytes(b)


CORRUPT_BATCHES = {
    "bad crc": (_bad_crc, {CORRUPT_MESSAGE}),
    "zero crc": (lambda: record_batch([b"v"], crc_fix=False), {CORRUPT_MESSAGE}),
    "truncated batch": (_truncated, {CORRUPT_MESSAGE}),
    "batchLength 20": (_short_length, {CORRUPT_MESSAGE}),
    "magic 7": (lambda: record_batch([b"v"], magic=7), {CORRUPT_MESSAGE}),
    # Kafka 2.7: Produce v3+ may carry only magic 2 (ProduceRequest.validateRecords)
    "magic 1": (lambda: record_batch([b"v"], magic=1), {INVALID_RECORD}),
    "recordCount mismatch": (lambda: record_batch([b"a", b"b"], count=5), {INVALID_RECORD, CORRUPT_MESSAGE}),
    "lastOffsetDelta mismatch": (lambda: record_batch([b"a", b"b"], last_delta=7), {INVALID_RECORD, CORRUPT_MESSAGE}),
    "three garbage bytes": (lambda: b"\x01\x02\x03", {CORRUPT_MESSAGE}),
    "producer id with baseSequence -1": (lambda: record_batch([b"v"], pid=5, epoch=0, seq=-1), {INVALID_RECORD}),
    "producer id with baseSequence INT32_MIN": (lambda: record_batch([b"v"], pid=(1 << 62), epoch=3, seq=-(1 << 31)),
                                                {INVALID_RECORD}),
}


@pytest.mark.parametrize("case", list(CORRUPT_BATCHES))
def test_produce_corrupt_batch(broker, case):
    make, want = CORRUPT_BATCHES[case]
    conn = Conn(broker[1].port)
    try:
        corr = next_corr()
        conn.send(produce_v3(corr, TOPIC, 0, make()))
        try:
            resp = conn.recv_frame()
        except (ConnectionError, OSError) as e:
            raise AssertionError(f"{case}: connection closed instead of a Produce response ({e})")
        res = parse_produce_v3(resp, corr)
        assert (TOPIC, 0) in res, res
        err = res[(TOPIC, 0)][0]
        assert err in want, f"{case}: partition error {err}, want one of {sorted(want)}"
        # Same connection, a good batch: accepted.
        corr = next_corr()
        conn.send(produce_v3(corr, TOPIC, 0, record_batch([b"good-after-" + case.encode()])))
        res = parse_produce_v3(conn.recv_frame(), corr)
        assert res[(TOPIC, 0)][0] == 0, f"valid produce after {case}: {res}"
    finally:
        conn.close()
    after_case(broker, f"produce with {case}")


def test_produce_odd_producer_fields(broker):
    """Idempotent batches with extreme producer fields: a new producer id is accepted at any
    sequence (INT32_MAX wrapping inside the batch, epoch INT16_MAX, pid INT64_MAX); a resend is
    answered with the first offset and not stored again; a gap, a stale epoch, a new epoch not at
    sequence 0 are refused; a negative producer id other than -1 means "no producer"."""
    conn = Conn(broker[1].port)

    def send(values, **kw):
        corr = next_corr()
        conn.send(produce_v3(corr, TOPIC, 0, record_batch(values, **kw)))
        return parse_produce_v3(conn.recv_frame(), corr)[(TOPIC, 0)]

    try:
        big = (1 << 63) - 1
        err, first = send([b"w1", b"w2", b"w3"], pid=big, epoch=32767, seq=(1 << 31) - 2)
        assert err == 0, err
        assert send([b"w1", b"w2", b"w3"], pid=big, epoch=32767, seq=(1 << 31) - 2) == (0, first)  # duplicate
        err, nxt = send([b"w4"], pid=big, epoch=32767, seq=1)  # after ...MAX-1, MAX, 0 comes 1
        assert err == 0 and nxt == first + 3, (err, nxt, first)
        assert send([b"w5"], pid=big, epoch=32767, seq=5)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert send([b"w5"], pid=big, epoch=32766, seq=2)[0] == INVALID_PRODUCER_EPOCH
        err, e0 = send([b"e0"], pid=77, epoch=0, seq=0)
        assert err == 0
        assert send([b"e1"], pid=77, epoch=1, seq=4)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER  # new epoch: seq 0
        assert send([b"e1"], pid=77, epoch=1, seq=0)[0] == 0
        a = send([b"np"], pid=-7, epoch=-1, seq=-1)
        b = send([b"np"], pid=-7, epoch=-1, seq=-1)
        assert a[0] == 0 and b[0] == 0 and b[1] == a[1] + 1, (a, b)  # no producer: no dedupe
    finally:
        conn.close()
    after_case(broker, "odd producer fields")


def test_corrupt_batches_not_stored(broker):
    """Nothing from the corrupted batches reached the log: a Fetch from 0 sees only good values."""
    corr = next_corr()
    conn = Conn(broker[1].port)
    try:
        conn.send(fetch_v4(corr, TOPIC, 0))
        resp = conn.recv_frame()
    finally:
        conn.close()
    assert struct.unpack_from(">i", resp)[0] == corr
    for bad in (b"v1", b"v2", b"hello", b"world"):
        # Values are length-prefixed varints in records; search for the exact value bytes framed
        # by their varint length.
        assert varint(len(bad)) + bad + varint(0) not in resp, f"{bad!r} from a corrupt batch is in the log"
    assert b"warm" in resp


def test_rss_bounded_at_end(broker):
    b = broker[1]
    grown = (rss_kb(b.pid) - broker.rss_baseline_kb) / 1024
    print(f"gregord RSS: baseline {broker.rss_baseline_kb / 1024:.1f} MB, now {rss_kb(b.pid) / 1024:.1f} MB")
    assert grown < RSS_BUDGET_MB, f"RSS grew by {grown:.1f} MB over the malformed-input suite"
    after_case(broker, "the whole suite")
