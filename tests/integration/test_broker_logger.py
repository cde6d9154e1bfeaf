"""KIP-412 (issue 27 item 5): BROKER_LOGGER configs. DescribeConfigs lists the broker's loggers and
their levels, IncrementalAlterConfigs changes a logger's level at run time, as Kafka 2.7's
AdminManager with Log4jController: SET with Kafka's level names, DELETE back to root's level,
Kafka's errors (and messages) for APPEND/SUBTRACT, unknown loggers, bad levels, deleting root's
level, another broker's id; ValidateOnly changes nothing. The effect is checked in the broker's
log: KafkaApis' per-request DEBUG line appears only while that logger is at DEBUG."""

import struct

import gregor_harness as H
from kafka_wire import Reader, exchange

BROKER_LOGGER, INVALID_REQUEST = 8, 42
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
API_LINE = "ApiVersions v0 correlation id 4242"


def s16(s):
    if s is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(s)) + s.encode()


def rstr(r):
    n = r.i16()
    return None if n < 0 else r.take(n).decode()


def describe(port, name, keys=None):
    """DescribeConfigs v1 of one BROKER_LOGGER resource: (error, message, {logger: (level, source)})."""
    body = struct.pack(">ib", 1, BROKER_LOGGER) + s16(name)
    body += struct.pack(">i", -1) if keys is None else struct.pack(">i", len(keys)) + b"".join(s16(k) for k in keys)
    body += struct.pack(">b", 0)
    r = Reader(exchange(port, struct.pack(">hhih", 32, 1, 9, 4) + b"test" + body))
    assert r.i32() == 9 and r.i32() >= 0 and r.i32() == 1
    err, msg = r.i16(), rstr(r)
    assert r.i8() == BROKER_LOGGER
    rstr(r)
    out = {}
    for _ in range(r.i32()):
        name, value = rstr(r), rstr(r)
        read_only, source, sensitive = r.i8(), r.i8(), r.i8()
        assert (read_only, sensitive, r.i32()) == (0, 0, 0)  # no synonyms
        out[name] = (value, source)
    return err, msg, out


def alter(port, name, ops, validate_only=False):
    """IncrementalAlterConfigs v0 of one BROKER_LOGGER resource: (error, message)."""
    body = struct.pack(">ib", 1, BROKER_LOGGER) + s16(name) + struct.pack(">i", len(ops))
    for logger, op, value in ops:
        body += s16(logger) + struct.pack(">b", op) + s16(value)
    body += struct.pack(">b", int(validate_only))
    r = Reader(exchange(port, struct.pack(">hhih", 44, 0, 8, 4) + b"test" + body))
    assert r.i32() == 8 and r.i32() >= 0 and r.i32() == 1
    err, msg = r.i16(), rstr(r)
    return err, msg


def api_versions(port):
    exchange(port, struct.pack(">hhih", 18, 0, 4242, 4) + b"test")


def test_broker_logger_levels(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=1)
    b = cluster[1]
    port = b.port
    err, msg, loggers = describe(port, "1")
    assert (err, msg) == (0, None)
    assert loggers["root"] == ("INFO", 6)  # DYNAMIC_BROKER_LOGGER_CONFIG
    assert loggers["kafka.server.KafkaApis"] == ("INFO", 6)
    assert describe(port, "1", ["root"])[2] == {"root": ("INFO", 6)}
    assert describe(port, "")[:2] == (INVALID_REQUEST, "Broker id must not be empty")
    assert describe(port, "2")[:2] == (INVALID_REQUEST, "Unexpected broker id, expected 1 but received 2")
    assert describe(port, "x")[:2] == (INVALID_REQUEST, "Broker id must be an integer, but it is: x")

    api_versions(port)
    # refused: nothing of the resource is applied
    res = "Invalid config value for resource ConfigResource(type=BROKER_LOGGER, name='1'): "
    assert alter(port, "1", [("kafka.server.KafkaApis", SET, "DEBUG"), ("no.such.Logger", SET, "DEBUG")]) == \
        (INVALID_REQUEST, res + "Logger no.such.Logger does not exist!")
    assert alter(port, "1", [("kafka.server.KafkaApis", SET, "debug")]) == \
        (INVALID_REQUEST, res + "Cannot set the log level of kafka.server.KafkaApis to debug as it is not a supported "
                                "log level. Valid log levels are TRACE, DEBUG, INFO, WARN, ERROR, FATAL")
    assert alter(port, "1", [("kafka.server.KafkaApis", APPEND, "DEBUG")]) == \
        (INVALID_REQUEST, "APPEND operation is not allowed for the BROKER_LOGGER resource")
    assert alter(port, "1", [("kafka.server.KafkaApis", SUBTRACT, "DEBUG")]) == \
        (INVALID_REQUEST, "SUBTRACT operation is not allowed for the BROKER_LOGGER resource")
    assert alter(port, "1", [("root", DELETE, None)]) == \
        (INVALID_REQUEST, "Removing the log level of the root logger is not allowed")
    assert alter(port, "2", [("root", SET, "DEBUG")]) == \
        (INVALID_REQUEST, "Unexpected broker id, expected 1, but received 2")
    assert alter(port, "1", [("kafka.server.KafkaApis", SET, "DEBUG")], validate_only=True) == (0, None)
    assert describe(port, "1", ["kafka.server.KafkaApis"])[2] == {"kafka.server.KafkaApis": ("INFO", 6)}
    api_versions(port)
    assert API_LINE not in b.log(whole=True)

    # SET: KafkaApis logs at DEBUG, the others stay at INFO
    assert alter(port, "1", [("kafka.server.KafkaApis", SET, "DEBUG")]) == (0, None)
    d = describe(port, "1")[2]
    assert d["kafka.server.KafkaApis"] == ("DEBUG", 6) and d["root"] == ("INFO", 6)
    api_versions(port)
    H.wait_for(lambda: API_LINE in b.log(whole=True), 10, "KafkaApis' DEBUG line")
    assert [l for l in b.log(whole=True).splitlines() if "] DEBUG " in l and "(kafka.server.KafkaApis)" not in l] == []

    # DELETE: back to root's level; root's level applies to every logger without its own
    assert alter(port, "", [("kafka.server.KafkaApis", DELETE, None), ("root", SET, "WARN")]) == (0, None)
    d = describe(port, "1")[2]
    assert d["kafka.server.KafkaApis"] == ("WARN", 6) and d["root"] == ("WARN", 6)
    assert alter(port, "1", [("root", SET, "INFO")]) == (0, None)
    n = b.log(whole=True).count("correlation id 4242")
    api_versions(port)
    api_versions(port)
    assert b.log(whole=True).count("correlation id 4242") == n
