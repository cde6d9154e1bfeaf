"""Raw Kafka wire helpers for tests that send requests no Python client can build (flexible
versions: unsigned varints, compact strings and arrays, tagged fields). Kafka's rules are in
docs/PROTOCOL.md; big-endian throughout."""

import socket
import struct


def uvarint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def varint(v):
    """Zig-zag signed varint."""
    return uvarint((v << 1) ^ (v >> 63))


def compact_str(s):
    """COMPACT_NULLABLE_STRING (None is null)."""
    if s is None:
        return uvarint(0)
    data = s.encode()
    return uvarint(len(data) + 1) + data


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf


def frame(key, ver, corr, body, client_id=b"hostile", flexible=False):
    """A size-prefixed request: header v1 (v2 with flexible: an empty tagged-field section), body."""
    m = struct.pack(">hhih", key, ver, corr, len(client_id)) + client_id + (b"\x00" if flexible else b"") + body
    return struct.pack(">i", len(m)) + m


def recv_frame(s, timeout=5.0):
    """One size-prefixed response (without the size), or None when the peer closed first."""
    s.settimeout(timeout)
    buf = b""
    while len(buf) < 4:
        d = s.recv(4 - len(buf))
        if not d:
            return None
        buf += d
    n = struct.unpack(">i", buf)[0]
    body = b""
    while len(body) < n:
        d = s.recv(n - len(body))
        if not d:
            return None
        body += d
    return body


def exchange(port, payload, host="127.0.0.1", timeout=10):
    """Sends one size-prefixed request and returns the response bytes (without the size)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        return recv_exact(s, size)


class Reader:
    """A cursor over response bytes; every read asserts the bytes are there."""

    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, n):
        v = self.d[self.p:self.p + n]
        assert len(v) == n, "short response"
        self.p += n
        return v

    def i8(self): return struct.unpack(">b", self.take(1))[0]
    def i16(self): return struct.unpack(">h", self.take(2))[0]
    def i32(self): return struct.unpack(">i", self.take(4))[0]
    def i64(self): return struct.unpack(">q", self.take(8))[0]

    def uvarint(self):
        shift = v = 0
        while True:
            b = self.take(1)[0]
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7

    def compact_str(self):
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def tags(self):
        """Tagged fields as {tag: raw bytes}."""
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out
