"""Raw Kafka wire helpers for tests that send requests no Python client can build (flexible
versions: unsigned varints, compact strings and arrays, tagged fields); whole messages at any
version are encoded and decoded by kafka_codec.py, which builds on these primitives. Kafka's rules are in
docs/PROTOCOL.md; big-endian throughout. Also the socket-level helpers the hostile-client tests
share: a connection from a chosen loopback address, "did the peer close", and the SASL/SCRAM
first steps a client sends before it is authenticated."""

import base64
import os
import socket
import ssl
import struct
import time


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
    """A cursor over response bytes; every read asserts the bytes are there. Subclasses may raise
    their own error (fail) and bound varints (VARINT_MAX_SHIFT: None reads any length)."""
    VARINT_MAX_SHIFT = None

    def __init__(self, data):
        self.d, self.p = data, 0

    def fail(self, msg):
        raise AssertionError(msg)

    def take(self, n):
        if n < 0 or self.p + n > len(self.d):
            self.fail("short response: %d bytes wanted at offset %d of %d" % (n, self.p, len(self.d)))
        v = self.d[self.p:self.p + n]
        self.p += n
        return bytes(v)

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
            if self.VARINT_MAX_SHIFT is not None and shift > self.VARINT_MAX_SHIFT:
                self.fail("overlong varint at offset %d" % self.p)

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


def connect_from(src, port, timeout=5.0):
    """A socket to the broker on 127.0.0.1:port from source address src (any 127.x is loopback:
    tests use distinct ones to stay within or to exceed max.connections.per.ip)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def tls_wrap(s, cafile):
    """s after a TLS handshake with a broker whose certificate cafile signed (no client certificate)."""
    ctx = ssl.create_default_context(cafile=cafile)
    return ctx.wrap_socket(s, server_hostname="127.0.0.1")


def closed_by_peer(s, timeout=5.0):
    """True if the peer closes (EOF, reset, a TLS error) within timeout, reading and dropping any
    bytes it sends first; False if it is still open then."""
    s.settimeout(timeout)
    end = time.time() + timeout
    try:
        while time.time() < end:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, ssl.SSLError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False


def sasl_authenticate(s, token, corr):
    """(ErrorCode, AuthBytes) of a SaslAuthenticate v1, or (None, None) if the broker closed."""
    s.sendall(frame(36, 1, corr, struct.pack(">i", len(token)) + token))
    r = recv_frame(s)
    if r is None:
        return None, None
    err = struct.unpack(">h", r[4:6])[0]
    p = 6
    ml = struct.unpack(">h", r[p:p + 2])[0]
    p += 2 + max(ml, 0)
    bl = struct.unpack(">i", r[p:p + 4])[0]
    return err, r[p + 4:p + 4 + max(bl, 0)]


def scram_first(s, user, mech="SCRAM-SHA-256"):
    """SaslHandshake v1 and the SCRAM client-first message (RFC 5802, as Kafka's ScramSaslClient);
    returns (err, server-first, client-first-bare)."""
    m = mech.encode()
    s.sendall(frame(17, 1, 1, struct.pack(">h", len(m)) + m))
    r = recv_frame(s)
    assert r is not None and struct.unpack(">h", r[4:6])[0] == 0, "SaslHandshake failed"
    bare = f"n={user},r={base64.b64encode(os.urandom(18)).decode()}"
    err, sf = sasl_authenticate(s, ("n,," + bare).encode(), 2)
    return err, sf, bare
