"""Schema-driven Kafka wire codec for tests: any API, any version Kafka 3.9 defines, request and
response, flexible or not. The schema is tests/integration/kafka_messages.json, generated from
Kafka's message JSON by `tools/gen_protocol.py --codec-schema` (docs/PROTOCOL.md, "Tests").

Messages are plain dicts keyed by Kafka's field names exactly as the JSON spells them
("Topics", "Name", "timeoutMs"); arrays are lists, struct fields dicts, null is None.
    encode_request(api_key, version, body=None, correlation_id=1, client_id="gregor-test") -> bytes
    decode_response(api_key, version, frame) -> (correlation_id, body)
    encode_response(api_key, version, body=None, correlation_id=1) -> bytes
    decode_request(frame) -> (header, body)
    call(sock_or_port, api_key, version, body=None, ...) -> body   (send, receive, decode)
encode_* return a size-prefixed frame; decode_* take a frame WITHOUT its size (as
kafka_wire.recv_frame returns it). Rules:
  * encode: a missing key takes the field's JSON default (nested structs too); a key that is not a
    field of the struct raises CodecError (typos fail loudly). A field absent at the version is
    skipped when it holds its default or Kafka marks it "ignorable"; otherwise CodecError, as
    Kafka's own serializer refuses it (UnsupportedVersionException).
  * None (null) is accepted only where nullableVersions covers the version, else CodecError.
  * uuid: uuid.UUID or 16 bytes on encode, uuid.UUID on decode. bytes/records: bytes. int8..int64,
    uint16: int (range-checked). float64: float. bool: bool.
  * Tagged fields are written only when they differ from their default, in tag order; extra raw
    tagged fields can be sent with "_tagged": {tag: bytes} in any struct of a flexible version,
    and unknown tags read are returned the same way ("_tagged" appears only when there are some).
  * decode: every field of the struct is in the dict; those absent at the version hold their
    default. Decoding is strict: truncation, trailing bytes, null where not nullable, a tagged
    field whose size disagrees with its value -> CodecError.
  * Header versions as Kafka's ApiMessageType: request header v2 when the API version is flexible,
    else v1 (ControlledShutdown v0: v0); response header v1 when flexible, else v0, and
    ApiVersions responses always v0.
"""

import json
import os
import socket
import struct
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kafka_wire import Reader, recv_frame, uvarint  # noqa: E402

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafka_messages.json")
with open(SCHEMA_PATH, encoding="utf-8") as _fh:
    SCHEMA = json.load(_fh)
APIS = {int(k): v for k, v in SCHEMA["apis"].items()}

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7
VMAX = 0x7FFF
ZERO_UUID = uuid.UUID(int=0)

_FIXED = {"int8": ">b", "int16": ">h", "uint16": ">H", "int32": ">i", "int64": ">q",
          "float64": ">d"}
_INTS = ("int8", "int16", "uint16", "int32", "int64")


class CodecError(ValueError):
    """Bytes or a dict that do not fit the schema at the given version."""


def parse_versions(s):
    """Kafka's version-range notation ('0+', '3', '1-4', 'none', None) -> (lo, hi)."""
    if s is None or s == "" or s == "none":
        return (VMAX, -1)
    if s.endswith("+"):
        return (int(s[:-1]), VMAX)
    if "-" in s:
        a, b = s.split("-", 1)
        return (int(a), int(b))
    return (int(s), int(s))


def in_versions(v, s):
    lo, hi = parse_versions(s)
    return lo <= v <= hi


def api(api_key):
    """The schema entry {"name", "request", "response"} of an API key (CodecError if unknown)."""
    try:
        return APIS[api_key]
    except KeyError:
        raise CodecError("unknown api key %r" % (api_key,)) from None


def message_schema(api_key, version, kind):
    """The "request" or "response" schema of api_key, checking version against validVersions."""
    m = api(api_key)[kind]
    if not in_versions(version, m["validVersions"]):
        raise CodecError("%s v%d: not a valid version (%s)" % (m["name"], version, m["validVersions"]))
    return m


def is_flexible(api_key, version):
    return in_versions(version, api(api_key)["request"]["flexibleVersions"])


def request_header_version(api_key, version):
    if api_key == CONTROLLED_SHUTDOWN_KEY and version == 0:
        return 0
    return 2 if is_flexible(api_key, version) else 1


def response_header_version(api_key, version):
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if is_flexible(api_key, version) else 0


# ---- defaults ----

def _base(f):
    t = f["type"]
    return t[2:] if t.startswith("[]") else t


def _is_array(f):
    return f["type"].startswith("[]")


def default_value(f):
    """The value a field holds when a dict leaves it out (Kafka's JSON "default")."""
    d = f.get("default")
    if _is_array(f):
        return None if d == "null" else []
    b = _base(f)
    if "fields" in f:
        return None if d == "null" else default_struct(f["fields"])
    if b in _INTS:
        return int(str(d), 0) if d not in (None, "") else 0
    if b == "bool":
        return str(d).lower() == "true"
    if b == "float64":
        return float(d) if d not in (None, "") else 0.0
    if b == "string":
        return None if d == "null" else ("" if d is None else str(d))
    if b in ("bytes", "records"):
        return None if d == "null" else b""
    if b == "uuid":
        return ZERO_UUID
    raise CodecError("%s: unknown type %s" % (f["name"], f["type"]))


def default_struct(fields):
    return {f["name"]: default_value(f) for f in fields}


def _normal(f, value, elem=False):
    """value with nested dicts completed by defaults and uuids as uuid.UUID (for comparisons)."""
    if value is None:
        return None
    if _is_array(f) and not elem:
        return [_normal(f, x, True) for x in value]
    if "fields" in f:
        out = default_struct(f["fields"])
        for sf in f["fields"]:
            if sf["name"] in value:
                out[sf["name"]] = _normal(sf, value[sf["name"]])
        if "_tagged" in value:
            out["_tagged"] = value["_tagged"]
        return out
    if _base(f) == "uuid" and isinstance(value, (bytes, bytearray)):
        return uuid.UUID(bytes=bytes(value))
    return value


# ---- encoding ----

def _enc_len(n, flex, classic_fmt):
    """Length or count prefix: uvarint(n + 1) when compact, else classic (n = -1 is null)."""
    return uvarint(n + 1) if flex else struct.pack(classic_fmt, n)


def _enc_value(f, value, ver, flex, where, elem=False):
    b = _base(f)
    name = "%s.%s" % (where, f["name"])
    if value is None:
        if not elem and in_versions(ver, f.get("nullableVersions")):
            if _is_array(f) or b in ("bytes", "records"):
                return _enc_len(-1, flex, ">i")
            if b == "string":
                return _enc_len(-1, flex, ">h")
            if "fields" in f:
                return struct.pack(">b", -1)
        raise CodecError("%s: null where v%d does not allow it" % (name, ver))
    if _is_array(f) and not elem:
        if not isinstance(value, (list, tuple)):
            raise CodecError("%s: expected a list, got %r" % (name, type(value).__name__))
        out = [_enc_len(len(value), flex, ">i")]
        out += [_enc_value(f, x, ver, flex, "%s[%d]" % (name, i), True)
                for i, x in enumerate(value)]
        return b"".join(out)
    if "fields" in f:
        if not isinstance(value, dict):
            raise CodecError("%s: expected a dict, got %r" % (name, type(value).__name__))
        body = _enc_struct(f["fields"], value, ver, flex, name)
        if not elem and in_versions(ver, f.get("nullableVersions")):
            return struct.pack(">b", 1) + body
        return body
    try:
        if b in _FIXED:
            if b in _INTS and (isinstance(value, bool) or not isinstance(value, int)):
                raise CodecError("%s: expected an int, got %r" % (name, value))
            return struct.pack(_FIXED[b], value)
        if b == "bool":
            if not isinstance(value, bool):
                raise CodecError("%s: expected a bool, got %r" % (name, value))
            return b"\x01" if value else b"\x00"
        if b == "string":
            data = value.encode("utf-8")
            if not flex and len(data) > 0x7FFF:
                raise CodecError("%s: %d bytes do not fit a classic string" % (name, len(data)))
            return _enc_len(len(data), flex, ">h") + data
        if b in ("bytes", "records"):
            data = bytes(value)
            return _enc_len(len(data), flex, ">i") + data
        if b == "uuid":
            data = value.bytes if isinstance(value, uuid.UUID) else bytes(value)
            if len(data) != 16:
                raise CodecError("%s: a uuid is 16 bytes, got %d" % (name, len(data)))
            return data
    except (struct.error, AttributeError, TypeError) as e:
        raise CodecError("%s: cannot encode %r as %s: %s" % (name, value, f["type"], e)) from None
    raise CodecError("%s: unknown type %s" % (name, f["type"]))


def _field_flex(f, ver, flex):
    """A field's own flexibleVersions (RequestHeader's ClientId: "none") override the message's."""
    return in_versions(ver, f["flexibleVersions"]) if "flexibleVersions" in f else flex


def _tagged_at(f, ver):
    return "tag" in f and in_versions(ver, f.get("taggedVersions", f["versions"]))


def _enc_struct(fields, value, ver, flex, where):
    known = {f["name"] for f in fields}
    for k in value:
        if k not in known and k != "_tagged":
            raise CodecError("%s: %r is not a field (fields: %s)" % (where, k, sorted(known)))
    out, tagged = [], {}
    for f in fields:
        v = value[f["name"]] if f["name"] in value else default_value(f)
        if not in_versions(ver, f["versions"]):
            if not f.get("ignorable") and _normal(f, v) != default_value(f):
                raise CodecError("%s.%s: v%d has no such field and it is not ignorable, but the "
                                 "value %r is not its default" % (where, f["name"], ver, v))
            continue
        if _tagged_at(f, ver):
            if _normal(f, v) != default_value(f):
                tagged[f["tag"]] = _enc_value(f, v, ver, True, where)
            continue
        out.append(_enc_value(f, v, ver, _field_flex(f, ver, flex), where))
    extra = value.get("_tagged") or {}
    if extra and not flex:
        raise CodecError("%s: _tagged given but v%d is not flexible" % (where, ver))
    for tag, raw in extra.items():
        if tag in tagged:
            raise CodecError("%s: _tagged tag %d is a known field" % (where, tag))
        tagged[tag] = bytes(raw)
    if flex:
        out.append(uvarint(len(tagged)))
        for tag in sorted(tagged):
            out.append(uvarint(tag) + uvarint(len(tagged[tag])) + tagged[tag])
    return b"".join(out)


def _frame(payload):
    return struct.pack(">i", len(payload)) + payload


def _header(name, hver, values, where):
    h = SCHEMA["headers"][name]
    flex = in_versions(hver, h["flexibleVersions"])
    return _enc_struct(h["fields"], values, hver, flex, where)


def encode_request(api_key, version, body=None, correlation_id=1, client_id="gregor-test"):
    """A size-prefixed request frame: the request header of the right version, then body."""
    m = message_schema(api_key, version, "request")
    flex = in_versions(version, m["flexibleVersions"])
    hdr = _header("RequestHeader", request_header_version(api_key, version),
                  {"RequestApiKey": api_key, "RequestApiVersion": version,
                   "CorrelationId": correlation_id, "ClientId": client_id}, "RequestHeader")
    return _frame(hdr + _enc_struct(m["fields"], body or {}, version, flex, m["name"]))


def encode_response(api_key, version, body=None, correlation_id=1):
    """A size-prefixed response frame: the response header of the right version, then body."""
    m = message_schema(api_key, version, "response")
    flex = in_versions(version, m["flexibleVersions"])
    hdr = _header("ResponseHeader", response_header_version(api_key, version),
                  {"CorrelationId": correlation_id}, "ResponseHeader")
    return _frame(hdr + _enc_struct(m["fields"], body or {}, version, flex, m["name"]))


# ---- decoding ----

class _Reader(Reader):
    """kafka_wire.Reader that raises CodecError on a short read or a varint over 32 bits."""
    VARINT_MAX_SHIFT = 28

    def fail(self, msg):
        raise CodecError(msg)

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def length(self, flex, classic_fmt):
        """Length or count: -1 is null; other negatives are malformed."""
        n = self.uvarint() - 1 if flex else self.unpack(classic_fmt)
        if n < -1:
            raise CodecError("negative length %d at offset %d" % (n, self.p))
        return n


def _dec_value(f, r, ver, flex, where, elem=False):
    b = _base(f)
    name = "%s.%s" % (where, f["name"])
    nullable = not elem and in_versions(ver, f.get("nullableVersions"))

    def null_check(n):
        if n == -1 and not nullable:
            raise CodecError("%s: null where v%d does not allow it" % (name, ver))
        return n == -1

    if _is_array(f) and not elem:
        n = r.length(flex, ">i")
        if null_check(n):
            return None
        if n > len(r.d) - r.p:
            raise CodecError("%s: count %d past the end" % (name, n))
        return [_dec_value(f, r, ver, flex, "%s[%d]" % (name, i), True) for i in range(n)]
    if "fields" in f:
        if nullable:
            marker = r.unpack(">b")
            if marker < 0:
                return None
        return _dec_struct(f["fields"], r, ver, flex, name)
    if b in _FIXED:
        return r.unpack(_FIXED[b])
    if b == "bool":
        return r.take(1) != b"\x00"
    if b == "string":
        n = r.length(flex, ">h")
        if null_check(n):
            return None
        try:
            return r.take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise CodecError("%s: not UTF-8: %s" % (name, e)) from None
    if b in ("bytes", "records"):
        n = r.length(flex, ">i")
        return None if null_check(n) else r.take(n)
    if b == "uuid":
        return uuid.UUID(bytes=r.take(16))
    raise CodecError("%s: unknown type %s" % (name, f["type"]))


def _dec_struct(fields, r, ver, flex, where):
    out, by_tag = {}, {}
    for f in fields:
        if not in_versions(ver, f["versions"]):
            out[f["name"]] = default_value(f)
        elif _tagged_at(f, ver):
            out[f["name"]] = default_value(f)
            by_tag[f["tag"]] = f
        else:
            out[f["name"]] = _dec_value(f, r, ver, _field_flex(f, ver, flex), where)
    if flex:
        unknown = {}
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            raw = r.take(r.uvarint())
            if tag in by_tag:
                sub = _Reader(raw)
                out[by_tag[tag]["name"]] = _dec_value(by_tag[tag], sub, ver, True, where)
                if sub.p != len(raw):
                    raise CodecError("%s: tagged field %d has %d bytes left over"
                                     % (where, tag, len(raw) - sub.p))
            else:
                unknown[tag] = raw
        if unknown:
            out["_tagged"] = unknown
    return out


def _dec_header(name, hver, r):
    h = SCHEMA["headers"][name]
    return _dec_struct(h["fields"], r, hver, in_versions(hver, h["flexibleVersions"]), name)


def _check_end(r, what):
    if r.p != len(r.d):
        raise CodecError("%s: %d trailing bytes" % (what, len(r.d) - r.p))


def decode_response(api_key, version, frame):
    """(correlation_id, body) of a response frame given WITHOUT its 4-byte size."""
    m = message_schema(api_key, version, "response")
    r = _Reader(frame)
    hdr = _dec_header("ResponseHeader", response_header_version(api_key, version), r)
    body = _dec_struct(m["fields"], r, version, in_versions(version, m["flexibleVersions"]), m["name"])
    _check_end(r, m["name"])
    return hdr["CorrelationId"], body


def decode_request(frame):
    """(header, body) of a request frame given WITHOUT its 4-byte size; header is the
    RequestHeader dict (RequestApiKey, RequestApiVersion, CorrelationId, ClientId)."""
    if len(frame) < 4:
        raise CodecError("truncated request header")
    api_key, version = struct.unpack(">hh", bytes(frame[:4]))
    m = message_schema(api_key, version, "request")
    r = _Reader(frame)
    hdr = _dec_header("RequestHeader", request_header_version(api_key, version), r)
    body = _dec_struct(m["fields"], r, version, in_versions(version, m["flexibleVersions"]), m["name"])
    _check_end(r, m["name"])
    return hdr, body


_next_corr = [1000]


def call(sock_or_port, api_key, version, body=None, correlation_id=None, client_id="gregor-test",
         timeout=10.0):
    """Send one request and return the decoded response body. sock_or_port: a connected socket
    (kept open, so a test can send several requests on one connection), a port on 127.0.0.1 or a
    (host, port) pair (a connection is opened and closed). Produce with Acks 0 returns None (Kafka
    sends no answer). Raises ConnectionError if the broker closes the connection instead of
    answering, CodecError if the answer does not decode or its correlation id differs."""
    if isinstance(sock_or_port, socket.socket):
        return _call_on(sock_or_port, api_key, version, body, correlation_id, client_id, timeout)
    addr = sock_or_port if isinstance(sock_or_port, tuple) else ("127.0.0.1", sock_or_port)
    with socket.create_connection(addr, timeout=timeout) as s:
        return _call_on(s, api_key, version, body, correlation_id, client_id, timeout)


def _call_on(s, api_key, version, body, correlation_id, client_id, timeout):
    if correlation_id is None:
        _next_corr[0] += 1
        correlation_id = _next_corr[0]
    s.sendall(encode_request(api_key, version, body, correlation_id, client_id))
    if api_key == 0 and (body or {}).get("Acks") == 0:
        return None
    frame = recv_frame(s, timeout)
    if frame is None:
        raise ConnectionError("broker closed the connection instead of answering %s v%d"
                              % (api(api_key)["name"], version))
    corr, resp = decode_response(api_key, version, frame)
    if corr != correlation_id:
        raise CodecError("correlation id %d, expected %d" % (corr, correlation_id))
    return resp
