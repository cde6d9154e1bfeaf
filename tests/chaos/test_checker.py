"""Self-test of the chaos checker (no processes): segment files written here are parsed by
read_replica_log, and evaluate() must flag lost, divergent, missing and duplicated records."""

import os
import struct

import pytest

pytest.importorskip("confluent_kafka")
import chaos_lib as C  # noqa: E402


def _varint(v):
    v = (v << 1) ^ (v >> 63)
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def batch(base, values, key=b"k"):
    recs = b""
    for i, val in enumerate(values):
        body = (b"\0" + _varint(0) + _varint(i) + _varint(len(key)) + key + _varint(len(val)) + val
                + _varint(0))
        recs += _varint(len(body)) + body
    n = len(values)
    rest = (struct.pack(">ibI", 3, 2, 0) + struct.pack(">hiqqqhii", 0, n - 1, 0, 0, -1, -1, -1, n) + recs)
    return struct.pack(">qi", base, len(rest)) + rest


def write_log(logdir, topic, p, segments):
    """segments: [(segment base, [(batch base, [values])])]"""
    d = os.path.join(logdir, f"{topic}-{p}")
    os.makedirs(d, exist_ok=True)
    for seg_base, batches in segments:
        with open(os.path.join(d, f"{seg_base:020d}.log"), "wb") as f:
            for b, vals in batches:
                f.write(batch(b, vals))


def values(n, tag="v"):
    return [f"{tag}{i}".encode() for i in range(n)]


def ledger(acks, consumed=()):
    led = C.Ledger()
    for val, p, off in acks:
        led.acked[val] = (p, off, 0.0)
    for p, off, val in consumed:
        led.consumed[(p, off)] = val
    return led


def test_read_replica_log_batches_segments_and_torn_tail(tmp_path):
    vs = values(10)
    write_log(str(tmp_path), "t", 0, [(0, [(0, vs[:3]), (3, vs[3:5])]), (5, [(5, vs[5:10])])])
    seg = os.path.join(str(tmp_path), "t-0", f"{5:020d}.log")
    with open(seg, "ab") as f:
        f.write(batch(10, [b"torn"])[:30])  # a torn write at the tail: not a record, not a problem
    recs, probs = C.read_replica_log(str(tmp_path), "t", 0)
    assert probs == []
    assert recs == {i: v for i, v in enumerate(vs)}


def test_non_monotonic_batches_reported(tmp_path):
    write_log(str(tmp_path), "t", 0, [(0, [(0, [b"a", b"b"]), (1, [b"c"])])])
    recs, probs = C.read_replica_log(str(tmp_path), "t", 0)
    assert any("not monotonic" in x for x in probs), probs


def _gather(tmp_path, per_replica, hw):
    logs = {0: {}}
    for r, segs in per_replica.items():
        d = os.path.join(str(tmp_path), f"r{r}")
        write_log(d, "t", 0, segs)
        logs[0][r] = C.read_replica_log(d, "t", 0)
    first = next(iter(logs[0].values()))[0]
    leader = {0: ({o: v for o, v in first.items() if o < hw}, hw, 0)}
    return logs, leader, {0: {}}


def test_clean_run_passes(tmp_path):
    vs = values(6)
    segs = [(0, [(0, vs[:4]), (4, vs[4:])])]
    logs, leader, ck = _gather(tmp_path, {1: segs, 2: segs, 3: segs}, 6)
    led = ledger([(v, 0, i) for i, v in enumerate(vs)], consumed=[(0, i, vs[i]) for i in range(3)])
    v = C.evaluate("t", [0], logs, leader, ck, led)
    C.assert_ok(v)
    assert v.acked == 6 and not v.duplicated


def test_consumer_skip_detected(tmp_path):
    vs = values(6)
    segs = [(0, [(0, vs)])]
    logs, leader, ck = _gather(tmp_path, {1: segs, 2: segs, 3: segs}, 6)
    led = ledger([(v, 0, i) for i, v in enumerate(vs)], consumed=[(0, 0, vs[0]), (0, 4, vs[4])])
    v = C.evaluate("t", [0], logs, leader, ck, led)
    with pytest.raises(AssertionError, match="skipped 3 offsets"):
        C.assert_ok(v)


def test_lost_and_divergent_detected(tmp_path):
    vs = values(6)
    good = [(0, [(0, vs)])]
    other = [(0, [(0, vs[:3] + [b"X", b"Y", b"Z"])])]  # a replica that kept an unacked tail
    logs, leader, ck = _gather(tmp_path, {1: good, 2: good, 3: other}, 6)
    led = ledger([(v, 0, i) for i, v in enumerate(vs)], consumed=[(0, 0, vs[0])])
    v = C.evaluate("t", [0], logs, leader, ck, led)
    assert len(v.divergent) == 3 and not v.lost
    with pytest.raises(AssertionError, match="different values"):
        C.assert_ok(v)
    # The leader lost an acked record: p0@4 now holds something else.
    logs, leader, ck = _gather(tmp_path / "b", {1: other, 2: other, 3: other}, 6)
    v = C.evaluate("t", [0], logs, leader, ck, led)
    assert [x[2] for x in v.lost] == [3, 4, 5]
    with pytest.raises(AssertionError, match="acknowledged records lost"):
        C.assert_ok(v)


def test_implicit_ack_without_offset(tmp_path):
    """librdkafka acknowledges some idempotent records without an offset: they must be somewhere
    in the log, and the catch-up wait ignores them."""
    vs = values(6)
    segs = [(0, [(0, vs[:5])])]
    logs, leader, ck = _gather(tmp_path, {1: segs, 2: segs, 3: segs}, 5)
    acks = [(v, 0, i) for i, v in enumerate(vs[:5])]
    acks[2] = (vs[2], 0, None)
    led = ledger(acks, consumed=[(0, i, vs[i]) for i in range(5)])
    v = C.evaluate("t", [0], logs, leader, ck, led)
    C.assert_ok(v)
    assert v.acked_without_offset == 1
    wl = C.Workload.__new__(C.Workload)
    wl.ledger = led
    assert wl.caught_up()[0]
    led.acked[vs[5]] = (0, None, 0.0)  # acknowledged, offset unknown, in no log: lost
    v = C.evaluate("t", [0], logs, leader, ck, led)
    assert [x[0] for x in v.lost] == [vs[5]]
    with pytest.raises(AssertionError, match="acknowledged records lost"):
        C.assert_ok(v)


def test_gap_missing_replica_data_and_consumed_change(tmp_path):
    vs = values(6)
    full = [(0, [(0, vs)])]
    gap = [(0, [(0, vs[:2]), (3, vs[3:])])]
    logs, leader, ck = _gather(tmp_path, {1: full, 2: gap, 3: [(0, [(0, vs[:2])])]}, 6)
    led = ledger([], consumed=[(0, 1, b"something else")])
    v = C.evaluate("t", [0], logs, leader, ck, led)
    text = " | ".join(v.problems)
    assert "offset gaps" in text and "holds 2 records" in text and "consumed" in text, text


def test_duplicates_counted_not_failed_without_idempotence(tmp_path):
    vs = values(3)
    segs = [(0, [(0, vs + [vs[1]])])]  # a retried batch written twice
    logs, leader, ck = _gather(tmp_path, {1: segs, 2: segs, 3: segs}, 4)
    led = ledger([(v, 0, i) for i, v in enumerate(vs)], consumed=[(0, 0, vs[0])])
    v = C.evaluate("t", [0], logs, leader, ck, led)
    assert v.duplicated == [(vs[1], [1, 3])]
    C.assert_ok(v)
    with pytest.raises(AssertionError, match="more than once"):
        C.assert_ok(v, strict_duplicates=True)
