"""Workload, nemesis and checker for Gregor's chaos tests (tests/chaos, see docs/CHAOS.md).

Runs under Debian's /usr/bin/python3 with confluent-kafka (librdkafka 2.0.2) and kazoo, on top of
tests/integration/gregor_harness.py.

Pieces
  Ledger          what the clients saw: every ACKED record (partition, offset, value) from the
                  producers' delivery reports, send/ack times, failed deliveries, and every record
                  the tailing consumer read during the run
  Workload        producer threads (acks=all, retries, compression none, idempotent by default;
                  idempotent=False for the plain variant) + one tailing consumer thread (manual
                  assignment, reads committed data only)
  Nemesis         the faults: SIGKILL a partition leader / the controller, SIGSTOP a leader past
                  its session timeout, restart ZooKeeper, expire the controller's session from
                  outside, two controller failovers in quick succession; each returns a FaultRun
  read_replica_log(logdir, topic, p)  {offset: value} decoded from the on-disk segments
  check(...)      waits for the ISR to heal and the replicas to converge, then asserts the safety
                  properties (see check() and docs/CHAOS.md); returns a Verdict
  RESULTS         one row per (fault kind) per test for the summary table (conftest prints it)
"""

import glob
import os
import random
import struct
import threading
import time

import gregor_harness as H

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

SOAK = bool(os.environ.get("GREGOR_SOAK"))

# Broker settings for chaos clusters: quick ISR decisions, frequent HW checkpoints, the topic-level
# min.insync.replicas is also set as the broker default so every topic gets it.
CLUSTER_CONFIG = {
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "unclean.leader.election.enable": "false",
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "replica.high.watermark.checkpoint.interval.ms": "500",
}

RESULTS = []  # rows for the summary table: dicts (see FaultStats.row)


# ---------------------------------------------------------------------------------------------
# Cluster helpers


def bootstrap(cluster, all_brokers=False):
    bs = cluster.brokers.values() if all_brokers else [b for b in cluster.running() if not b.paused]
    return ",".join(b.address for b in bs)


def part_state(cluster, topic, p):
    d, _ = cluster.get_json(f"/brokers/topics/{topic}/partitions/{p}/state")
    return d


def assignment(cluster, topic):
    """{partition: [replicas]} from /brokers/topics/<topic>."""
    d, _ = cluster.get_json(f"/brokers/topics/{topic}")
    return {int(k): v for k, v in (d or {}).get("partitions", {}).items()}


def leader_of(cluster, topic, p):
    st = part_state(cluster, topic, p)
    return None if st is None else st.get("leader")


def create_topic(cluster, topic, partitions, rf=3, min_isr=2):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    # Registered in ZooKeeper is not yet known to every broker's metadata cache: wait until the
    # brokers clients talk to list them all (else CreateTopics answers INVALID_REPLICATION_FACTOR).
    want = {b.id for b in cluster.running()}
    for b in cluster.running():
        one = AdminClient({"bootstrap.servers": b.address})
        H.wait_for(lambda: set(one.list_topics(timeout=5).brokers) >= want, 30,
                   f"broker {b.id}'s metadata listing brokers {sorted(want)}", interval=0.2)
    fs = admin.create_topics([NewTopic(topic, partitions, rf, config={"min.insync.replicas": str(min_isr)})],
                             operation_timeout=20, request_timeout=30)
    fs[topic].result(timeout=40)
    wait_healed(cluster, topic, timeout=40)


def healed(cluster, topic):
    """True when every partition has a live leader and its whole replica set in the ISR."""
    asg = assignment(cluster, topic)
    if not asg:
        return False
    live = {b.id for b in cluster.running() if not b.paused}
    for p, replicas in asg.items():
        st = part_state(cluster, topic, p)
        if st is None or st.get("leader") not in live or sorted(st.get("isr", [])) != sorted(replicas):
            return False
    return True


def wait_healed(cluster, topic, timeout=60.0):
    H.wait_for(lambda: healed(cluster, topic), timeout,
               f"{topic}: every partition led by a live broker with a full ISR "
               f"(states: {[part_state(cluster, topic, p) for p in assignment(cluster, topic)]})",
               interval=0.2)


def restart_broker(cluster, b, timeout=40.0):
    """Starts a stopped/killed broker again and waits for its registration."""
    if b.running():
        return
    b.start()
    cluster.wait_registered([b.id], timeout=timeout)


# ---------------------------------------------------------------------------------------------
# Ledger + workload


class Ledger:
    """Thread-safe record of what the clients observed."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}        # value -> (partition, offset, ack_mono)
        self.sent = {}         # value -> (partition, send_mono)
        self.failed = {}       # value -> error string (outcome unknown: may or may not be written)
        self.consumed = {}     # (partition, offset) -> value, from the tailing consumer
        self.consumed_conflicts = []  # [(partition, offset, first value, second value)]
        self.consumed_order_errors = []

    def on_send(self, value, partition):
        with self.lock:
            self.sent[value] = (partition, time.monotonic())

    def on_delivery(self, err, msg):
        v = msg.value()
        with self.lock:
            if err is None:
                assert v not in self.acked, f"two delivery reports for {v!r}"
                # The offset is None when librdkafka acknowledges a record implicitly: an
                # idempotent request whose answer was lost is known to be written once a later
                # sequence of the same partition is acknowledged, but its offset is never learned.
                self.acked[v] = (msg.partition(), msg.offset(), time.monotonic())
            else:
                self.failed[v] = str(err)

    def on_consume(self, p, off, value):
        with self.lock:
            old = self.consumed.get((p, off))
            if old is not None and old != value:
                self.consumed_conflicts.append((p, off, old, value))
            self.consumed[(p, off)] = value

    def first_ack_after(self, t0, partitions):
        """For each partition: the earliest ack time of a record SENT after t0 (None if none)."""
        with self.lock:
            out = {p: None for p in partitions}
            for v, (p, _, tack) in self.acked.items():
                s = self.sent.get(v)
                if s is None or s[1] < t0 or p not in out:
                    continue
                if out[p] is None or tack < out[p]:
                    out[p] = tack
            return out

    def count_acked(self):
        with self.lock:
            return len(self.acked)


class Workload:
    """Producers (acks=all) writing unique values round-robin over the partitions, and one
    consumer tailing every partition, until stop(). Values: b"<tag>-<producer>-<seq:09d>" padded
    to `value_size` bytes with '.'. With idempotent=True (the default) the producers use
    enable.idempotence; a fatal producer error is a workload error unless tolerate_fatal (see
    docs/CHAOS.md: a frozen leader that wakes up can answer before it learns it was replaced)."""

    def __init__(self, cluster, topic, partitions, producers=2, rate=150, value_size=64, tag="w",
                 idempotent=True, tolerate_fatal=False):
        self.cluster = cluster
        self.idempotent = idempotent  # enable.idempotence: then no duplicate is tolerated
        # A fatal idempotent-producer error fails the run unless tolerated; tolerated ones are
        # counted in fatal_errors and the producer is recreated (a new producer id).
        self.tolerate_fatal = tolerate_fatal
        self.fatal_errors = []
        self.topic = topic
        self.partitions = list(range(partitions))
        self.nproducers = producers
        self.rate = rate  # records per second per producer
        self.value_size = value_size
        self.tag = tag
        self.ledger = Ledger()
        self.stop_ev = threading.Event()       # producers stop
        self.stop_consumer = threading.Event()  # the tailing consumer stops
        self.catch_up_s = None    # seconds the tailing consumer needed to read every ack after stop
        self.catch_up_problem = None
        self.threads = []
        self.errors = []
        self.unflushed = 0
        self.consumer_errors = {}     # "p<N> <error name>" -> count, from the tailing consumer
        self.offset_resets = []       # (time, partition, error): fetches answered OFFSET_OUT_OF_RANGE
        self.produce_errors = {}      # error name -> count: produce() calls librdkafka refused
        self.consumer_positions = {}  # partition -> next offset, when the tailing consumer stopped

    def start(self):
        for i in range(self.nproducers):
            t = threading.Thread(target=self._produce, args=(i,), daemon=True, name=f"producer-{i}")
            t.start()
            self.threads.append(t)
        t = threading.Thread(target=self._consume, daemon=True, name="tail-consumer")
        t.start()
        self.threads.append(t)
        # Wait for the first acks so a fault never hits an idle cluster.
        H.wait_for(lambda: self.ledger.count_acked() >= 20, 30, "first 20 acknowledged records")
        return self

    def _value(self, i, seq):
        v = f"{self.tag}-{i}-{seq:09d}".encode()
        return v + b"." * max(0, self.value_size - len(v))

    def _produce(self, i):
        fatal = threading.Event()

        def on_error(e):
            if e.fatal() and not fatal.is_set():
                fatal.set()
                with self.ledger.lock:
                    self.fatal_errors.append(f"producer {i}: {e}")
                if not self.tolerate_fatal:
                    self.errors.append(f"fatal producer error: {e}")

        def fatal_exc(exc):
            """A KafkaException carrying a fatal error (raised by produce/poll/flush, possibly
            before error_cb ran): recorded like error_cb does. True if it was fatal."""
            err = exc.args[0] if exc.args else None
            if err is not None and hasattr(err, "fatal") and err.fatal():
                on_error(err)
                return True
            return False

        def make():
            return Producer({
                "bootstrap.servers": bootstrap(self.cluster, all_brokers=True),
                "acks": "all",
                "enable.idempotence": self.idempotent,
                "error_cb": on_error,
                "compression.type": "none",
                "retries": 2147483647,
                "retry.backoff.ms": 100,
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "request.timeout.ms": 5000,
                "socket.timeout.ms": 5000,
                "topic.metadata.refresh.interval.ms": 2000,
                "max.in.flight.requests.per.connection": 5,
                **({"debug": os.environ["GREGOR_RDKAFKA_DEBUG"]} if os.environ.get("GREGOR_RDKAFKA_DEBUG") else {}),
            })
        try:
            p = make()
            seq = 0
            interval = 1.0 / self.rate
            next_t = time.monotonic()
            while not self.stop_ev.is_set():
                if fatal.is_set():
                    if not self.tolerate_fatal:
                        break
                    try:  # its unacknowledged messages fail (counted as failed deliveries)
                        p.flush(10)
                    except KafkaException:
                        pass
                    fatal.clear()
                    p = make()
                try:
                    part = self.partitions[seq % len(self.partitions)]
                    v = self._value(i, seq)
                    try:
                        p.produce(self.topic, v, partition=part, on_delivery=self.ledger.on_delivery)
                        self.ledger.on_send(v, part)
                        seq += 1
                    except BufferError:
                        p.poll(0.05)
                        continue
                    except KafkaException as e:
                        if fatal_exc(e):
                            continue
                        # librdkafka refuses a produce while the topic's metadata carries an error,
                        # e.g. INVALID_REPLICATION_FACTOR from a broker whose metadata cache does not
                        # know the topic yet (a just-restarted broker tried to auto-create it).
                        # Counted and reported, then retried: not a safety question.
                        k = e.args[0].name() if e.args else str(e)
                        with self.ledger.lock:
                            self.produce_errors[k] = self.produce_errors.get(k, 0) + 1
                        p.poll(0.1)
                        continue
                    p.poll(0)
                    next_t += interval
                    d = next_t - time.monotonic()
                    if d > 0:
                        time.sleep(d)
                    elif d < -1:
                        next_t = time.monotonic()
                except KafkaException as e:
                    # poll() of a producer that hit a fatal error: recreated at the top
                    if not (fatal_exc(e) and self.tolerate_fatal):
                        raise
            try:
                left = p.flush(70)
            except KafkaException as e:
                if not (fatal_exc(e) and self.tolerate_fatal):
                    raise
                left = 0  # a fatal producer's messages all got failed delivery reports
            with self.ledger.lock:
                self.unflushed += left
        except Exception as e:  # surfaced by stop()
            self.errors.append(f"producer {i}: {type(e).__name__}: {e}")

    def _consume(self):
        try:
            c = Consumer({
                "bootstrap.servers": bootstrap(self.cluster, all_brokers=True),
                "group.id": f"chaos-tail-{self.topic}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 200,
                "topic.metadata.refresh.interval.ms": 2000,
                "socket.timeout.ms": 5000,
                # Never skip silently: an out-of-range fetch comes back as an error, is counted,
                # and the consumer seeks back to where it was.
                "auto.offset.reset": "error",
            })
            c.assign([TopicPartition(self.topic, p, 0) for p in self.partitions])
            last = {}
            while not self.stop_consumer.is_set():
                for m in c.consume(500, 0.5):
                    if m.error() is not None:
                        # Transient (leader moved, broker down): librdkafka retries. Counted for
                        # the report.
                        k = f"p{m.partition()} {m.error().name()}"
                        self.consumer_errors[k] = self.consumer_errors.get(k, 0) + 1
                        if m.error().code() == KafkaError._AUTO_OFFSET_RESET and m.partition() is not None:
                            self.offset_resets.append((time.monotonic(), m.partition(), str(m.error())))
                            try:
                                c.seek(TopicPartition(self.topic, m.partition(), last.get(m.partition(), -1) + 1))
                            except Exception as e:  # not fetchable right now: re-assign
                                self.consumer_errors[f"seek {type(e).__name__}"] = 1
                                c.assign([TopicPartition(self.topic, p, last.get(p, -1) + 1)
                                          for p in self.partitions])
                        continue
                    p, off = m.partition(), m.offset()
                    if off <= last.get(p, -1):
                        # A re-fetch after a leader change may re-deliver: fine if the value agrees
                        # (checked in on_consume); a rewind is recorded only if it moves backwards
                        # without agreement, see Ledger.consumed_conflicts.
                        pass
                    last[p] = max(off, last.get(p, -1))
                    self.ledger.on_consume(p, off, m.value())
            try:
                self.consumer_positions = {tp.partition: tp.offset for tp in c.position(
                    [TopicPartition(self.topic, p) for p in self.partitions])}
            except Exception as e:
                self.consumer_positions = f"<{e}>"
            c.close()
        except Exception as e:
            self.errors.append(f"consumer: {type(e).__name__}: {e}")

    def caught_up(self):
        """True when the tailing consumer has read up to every partition's last acked offset."""
        with self.ledger.lock:
            want = {}
            for p, off, _ in self.ledger.acked.values():
                if off is not None:
                    want[p] = max(want.get(p, -1), off)
            got = {}
            for p, off in self.ledger.consumed:
                got[p] = max(got.get(p, -1), off)
        return all(got.get(p, -1) >= o for p, o in want.items()), want, got

    def stop(self, catch_up_timeout=30.0):
        """Stops the producers (flushing), lets the tailing consumer read every acknowledged
        record (bounded: a consumer that never catches up is recorded in catch_up_problem), then
        stops it."""
        self.stop_ev.set()
        producers = [t for t in self.threads if t.name.startswith("producer")]
        for t in producers:
            t.join(90)
        t0 = time.monotonic()
        while True:
            ok, want, got = self.caught_up()
            if ok:
                self.catch_up_s = time.monotonic() - t0
                break
            if time.monotonic() - t0 > catch_up_timeout:
                self.catch_up_problem = (f"the tailing consumer did not read every acknowledged record "
                                         f"within {catch_up_timeout:.0f}s of the producers stopping: last "
                                         f"acked offsets {want}, last consumed {got}, consumer errors "
                                         f"{self.consumer_errors}")
                break
            time.sleep(0.1)
        self.stop_consumer.set()
        for t in self.threads:
            t.join(90)
        alive = [t.name for t in self.threads if t.is_alive()]
        assert not alive, f"workload threads did not stop: {alive}"
        assert not self.errors, f"workload errors: {self.errors}"


# ---------------------------------------------------------------------------------------------
# On-disk log reader (RecordBatch v2, docs/STORAGE.md)


def _varint(buf, pos):
    shift = 0
    result = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("bad varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), pos


def decode_records(batch):
    """[(offset, value bytes or None)] of one uncompressed v2 batch (bytes from baseOffset on)."""
    base, length = struct.unpack_from(">qi", batch, 0)
    magic = batch[16]
    if magic != 2:
        raise ValueError(f"batch at {base}: magic {magic}")
    (attrs,) = struct.unpack_from(">h", batch, 21)
    if attrs & 0x7:
        raise ValueError(f"batch at {base}: compressed (codec {attrs & 7}); use compression.type=none")
    if attrs & 0x20:
        return []  # control batch
    (count,) = struct.unpack_from(">i", batch, 57)
    pos = 61
    out = []
    for _ in range(count):
        rlen, pos = _varint(batch, pos)
        end = pos + rlen
        pos += 1  # attributes
        _, pos = _varint(batch, pos)  # timestampDelta
        odelta, pos = _varint(batch, pos)
        klen, pos = _varint(batch, pos)
        if klen > 0:
            pos += klen
        vlen, pos = _varint(batch, pos)
        value = None if vlen < 0 else bytes(batch[pos:pos + vlen])
        out.append((base + odelta, value))
        pos = end
    return out


def read_replica_log(logdir, topic, p):
    """Reads <logdir>/<topic>-<p>/*.log: returns (records {offset: value}, problems [str]).
    problems lists non-monotonic batches and undecodable data (a torn tail past the last whole
    batch is not a problem: the broker truncates it on recovery)."""
    recs = {}
    problems = []
    last_off = -1
    for seg in sorted(glob.glob(os.path.join(logdir, f"{topic}-{p}", "*.log"))):
        with open(seg, "rb") as f:
            data = f.read()
        pos = 0
        while pos + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            if length < 49 or pos + 12 + length > len(data):
                break
            batch = data[pos:pos + 12 + length]
            try:
                rs = decode_records(batch)
            except (ValueError, IndexError, struct.error) as e:
                problems.append(f"{seg}@{pos}: {e}")
                rs = []
            for off, v in rs:
                if off <= last_off:
                    problems.append(f"{seg}@{pos}: offset {off} after {last_off} (not monotonic)")
                if off in recs and recs[off] != v:
                    problems.append(f"{seg}@{pos}: offset {off} appears twice with different values")
                recs[off] = v
                last_off = max(last_off, off)
            pos += 12 + length
    return recs, problems


def read_hw_checkpoint(logdir, topic, p):
    try:
        with open(os.path.join(logdir, "replication-offset-checkpoint")) as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return None
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == topic and parts[1] == str(p):
            return int(parts[2])
    return None


def read_from_leader(cluster, topic, p, timeout=60.0):
    """(records {offset: value}, high watermark, low watermark) read through a normal consumer."""
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": f"chaos-check-{topic}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        lo, hw = c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)
        out = {}
        if hw <= lo:
            return out, hw, lo
        c.assign([TopicPartition(topic, p, lo)])
        deadline = time.monotonic() + timeout
        order_errors = []
        last = -1
        while time.monotonic() < deadline and last < hw - 1:
            for m in c.consume(1000, 1.0):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    continue
                if m.offset() <= last:
                    order_errors.append((last, m.offset()))
                last = max(last, m.offset())
                if m.offset() < hw:
                    out[m.offset()] = m.value()
        if order_errors:
            raise AssertionError(f"{topic}-{p}: consumer offsets not monotonic: {order_errors[:5]}")
        return out, hw, lo
    finally:
        c.close()


# ---------------------------------------------------------------------------------------------
# Fault bookkeeping


class FaultStats:
    """Per-fault-kind aggregate for the summary table."""

    def __init__(self, name):
        self.name = name
        self.rounds = 0
        self.recover = []  # seconds, one per round

    def add(self, seconds):
        self.rounds += 1
        if seconds is not None:
            self.recover.append(seconds)


class FaultLog:
    """Rounds applied in one test, by fault kind."""

    def __init__(self):
        self.kinds = {}
        self.events = []

    def record(self, kind, recover_s, note=""):
        self.kinds.setdefault(kind, FaultStats(kind)).add(recover_s)
        self.events.append((kind, recover_s, note))


def measure_recovery(wl, t0, timeout=60.0):
    """Seconds from t0 until every partition acknowledged a record sent after t0."""
    def ok():
        firsts = wl.ledger.first_ack_after(t0, wl.partitions)
        return firsts if all(v is not None for v in firsts.values()) else None
    try:
        firsts = H.wait_for(ok, timeout, "acks on every partition after the fault", interval=0.1)
    except AssertionError:
        return None
    return max(firsts.values()) - t0


# ---------------------------------------------------------------------------------------------
# Nemesis


class Nemesis:
    """Applies faults to a cluster while a Workload runs. Every method waits for the cluster to
    heal before returning (brokers restarted, ISR full), so rounds are independent."""

    def __init__(self, cluster, topic, wl, zk_server=None, rng=None, heal_timeout=60.0):
        self.cluster = cluster
        self.topic = topic
        self.wl = wl
        self.zk_server = zk_server
        self.rng = rng or random.Random(1)
        self.log = FaultLog()
        self.heal_timeout = heal_timeout

    def _heal(self):
        for b in self.cluster.brokers.values():
            if b.paused:
                b.resume()
        for b in self.cluster.brokers.values():
            restart_broker(self.cluster, b)
        wait_healed(self.cluster, self.topic, self.heal_timeout)

    def _controller_broker(self):
        c = self.cluster.wait_controller(timeout=30)
        return c, self.cluster[c["brokerid"]]

    def kill_leader(self):
        p = self.rng.choice(self.wl.partitions)
        victim = leader_of(self.cluster, self.topic, p)
        t0 = time.monotonic()
        self.cluster[victim].kill()
        H.wait_for(lambda: leader_of(self.cluster, self.topic, p) not in (victim, -1, None), 30,
                   f"a new leader for {self.topic}-{p} after SIGKILL of broker {victim}", interval=0.1)
        rec = measure_recovery(self.wl, t0)
        self._heal()
        self.log.record("kill-leader", rec, f"p{p} leader {victim}")

    def kill_controller(self):
        c, b = self._controller_broker()
        t0 = time.monotonic()
        b.kill()
        self.cluster.wait_new_controller(c["_stat"].czxid, timeout=30)
        rec = measure_recovery(self.wl, t0)
        self._heal()
        self.log.record("kill-controller", rec, f"controller {b.id}")

    def pause_leader(self):
        p = self.rng.choice(self.wl.partitions)
        victim = self.cluster[leader_of(self.cluster, self.topic, p)]
        t0 = time.monotonic()
        victim.pause()
        try:
            H.wait_for(lambda: victim.id not in self.cluster.registered_ids(), H.SESSION_TIMEOUT_MS / 1000 + 10,
                       f"broker {victim.id}'s registration gone after SIGSTOP", interval=0.1)
            H.wait_for(lambda: leader_of(self.cluster, self.topic, p) not in (victim.id, -1, None), 30,
                       f"a new leader for {self.topic}-{p} while broker {victim.id} is stopped", interval=0.1)
            rec = measure_recovery(self.wl, t0)
            time.sleep(0.5)
        finally:
            victim.resume()
        # It must come back by itself (new session, re-registration, truncation, ISR).
        self.cluster.wait_registered([victim.id], timeout=30)
        self._heal()
        self.log.record("pause-leader", rec, f"p{p} leader {victim.id}")

    def pause_controller(self):
        """SIGSTOP the active controller (usually also a partition leader) past its session
        timeout, then SIGCONT: on waking it finds its session expired, must resign, re-register
        and follow the new controller."""
        c, victim = self._controller_broker()
        t0 = time.monotonic()
        victim.pause()
        try:
            self.cluster.wait_new_controller(c["_stat"].czxid, timeout=H.SESSION_TIMEOUT_MS / 1000 + 20)
            rec = measure_recovery(self.wl, t0)
            time.sleep(0.5)
        finally:
            victim.resume()
        self.cluster.wait_registered([victim.id], timeout=30)
        self._heal()
        self.log.record("pause-controller", rec, f"controller {victim.id}")

    def restart_zookeeper(self, down_s=None):
        assert self.zk_server is not None, "restart_zookeeper needs a dedicated ZooKeeper"
        if down_s is None:
            down_s = self.rng.choice([0.5, 2.0, H.SESSION_TIMEOUT_MS / 1000 + 2])
        t0 = time.monotonic()
        self.zk_server.restart(down_seconds=down_s)
        # The cluster's own kazoo client reconnects by itself.
        H.wait_for(lambda: self.cluster.zk.connected, 30, "the test's kazoo client reconnected")
        self.cluster.wait_controller(timeout=30)
        rec = measure_recovery(self.wl, t0)
        for b in self.cluster.brokers.values():
            assert b.running(), f"broker {b.id} exited (code {b.returncode}) after a ZooKeeper restart"
        self.cluster.wait_registered(timeout=30)
        self._heal()
        self.log.record("zk-restart", rec, f"down {down_s:.1f}s")

    def expire_controller_session(self):
        c, b = self._controller_broker()
        sess = b.session()
        assert sess is not None, f"broker {b.id} has no {b.logdir}/zk-session"
        t0 = time.monotonic()
        H.expire_session(self.cluster.zk_connect, *sess)
        self.cluster.wait_new_controller(c["_stat"].czxid, timeout=30)
        rec = measure_recovery(self.wl, t0)
        assert b.running(), f"broker {b.id} exited after its session expired (code {b.returncode})"
        self.cluster.wait_registered(timeout=30)
        self._heal()
        self.log.record("expire-controller", rec, f"controller {b.id}")

    def double_failover(self):
        c1, b1 = self._controller_broker()
        t0 = time.monotonic()
        b1.kill()
        c2 = self.cluster.wait_new_controller(c1["_stat"].czxid, timeout=30)
        b2 = self.cluster[c2["brokerid"]]
        b2.kill()
        # One broker left: partitions it leads stay writable only if min.insync is met, which it is
        # not (ISR of 1 < 2). Availability returns after the restarts; safety is what counts.
        restart_broker(self.cluster, b1)
        c3 = self.cluster.wait_new_controller(c2["_stat"].czxid, timeout=30)
        restart_broker(self.cluster, b2)
        rec = measure_recovery(self.wl, t0)
        self._heal()
        self.log.record("double-failover", rec, f"controllers {b1.id} -> {b2.id} -> {c3['brokerid']}")

    MIXED = ("kill_leader", "kill_controller", "pause_leader", "pause_controller",
             "expire_controller_session", "double_failover")

    def mixed(self, rounds):
        """`rounds` faults drawn from the menu: distinct kinds first (a shuffled pass over the
        menu), then random picks."""
        menu = list(self.MIXED + (("restart_zookeeper",) if self.zk_server else ()))
        order = []
        while len(order) < rounds:
            batch = menu[:]
            self.rng.shuffle(batch)
            order += batch
        for name in order[:rounds]:
            getattr(self, name)()


# ---------------------------------------------------------------------------------------------
# Checker


class Verdict:
    def __init__(self):
        self.acked = 0
        self.acked_without_offset = 0  # implicit acknowledgements (see Ledger.on_delivery)
        self.lost = []        # (value, partition, offset, what is there)
        self.duplicated = []  # (value, [offsets]) an acked value also stored at other offsets
        self.divergent = []   # (partition, offset, {replica: value})
        self.problems = []    # other violations (strings)
        self.controllers = None
        self.consumed = 0     # records the tailing consumer read during the run

    def summary(self):
        return (f"acked={self.acked} (without offset {self.acked_without_offset}) "
                f"consumed={self.consumed} lost={len(self.lost)} "
                f"duplicated={len(self.duplicated)} "
                f"divergent={len(self.divergent)} problems={len(self.problems)}")


def converged(cluster, topic, partitions):
    """{p: {replica id: (records, problems)}} once every replica's log equals the leader's up
    to the leader's high watermark and has nothing beyond it; None before that."""
    asg = assignment(cluster, topic)
    out = {}
    for p in partitions:
        logs = {r: read_replica_log(cluster[r].logdir, topic, p) for r in asg[p]}
        ends = {r: (max(recs) + 1 if recs else 0) for r, (recs, _) in logs.items()}
        if len(set(ends.values())) != 1:
            return None
        first = next(iter(logs.values()))[0]
        if any(recs != first for recs, _ in logs.values()):
            return None
        out[p] = logs
    return out


def check(cluster, topic, wl, converge_timeout=60.0):
    """Safety checks after the workload stopped. Waits (bounded) until the ISR is full and every
    replica holds the same log, reads each partition from the leader (consumer) and from every
    replica's segment files, and returns evaluate()'s Verdict (assert_ok() raises on it)."""
    problems = []
    wait_healed(cluster, topic, converge_timeout)
    try:
        logs = H.wait_for(lambda: converged(cluster, topic, wl.partitions), converge_timeout,
                          "replica logs converged", interval=0.5)
    except AssertionError as e:
        problems.append(str(e)[:300])
        asg = assignment(cluster, topic)
        logs = {p: {r: read_replica_log(cluster[r].logdir, topic, p) for r in asg[p]} for p in wl.partitions}
    leader = {p: read_from_leader(cluster, topic, p) for p in wl.partitions}
    ckpts = {p: {r: read_hw_checkpoint(cluster[r].logdir, topic, p) for r in logs[p]} for p in wl.partitions}
    v = evaluate(topic, wl.partitions, logs, leader, ckpts, wl.ledger)
    if wl.catch_up_problem:
        problems.append(wl.catch_up_problem)
    v.problems[:0] = problems
    return v


def evaluate(topic, partitions, logs, leader, ckpts, led):
    """The checker proper, on data already gathered:
      logs    {p: {replica: ({offset: value}, [problems])}}  (read_replica_log per replica)
      leader  {p: ({offset: value}, high watermark, log start)}  (read_from_leader)
      ckpts   {p: {replica: checkpointed HW or None}}
      led     the Ledger
    Every acknowledged value must sit at its acked offset in the log; every offset must hold one
    value across all replicas and the consumer; offsets contiguous and monotonic; what the tailing
    consumer read during the run must still be there; no HW checkpoint beyond a log's end."""
    v = Verdict()
    v.acked = len(led.acked)
    v.consumed = len(led.consumed)
    for p in partitions:
        if not any(cp == p for cp, _ in led.consumed):
            v.problems.append(f"{topic}-{p}: the tailing consumer read nothing during the run")
    for p in partitions:
        leader_recs, hw, lo = leader[p]
        if len(leader_recs) != hw - lo:
            v.problems.append(f"{topic}-{p}: consumer read {len(leader_recs)} records in [{lo}, {hw})")
        replicas = logs[p]
        for r, (recs, probs) in replicas.items():
            v.problems.extend(f"replica {r}: {x}" for x in probs)
            # Offsets on disk are contiguous from the log start (no compaction, no deletion here).
            if recs:
                lo_r, hi_r = min(recs), max(recs)
                if len(recs) != hi_r - lo_r + 1:
                    missing = [o for o in range(lo_r, hi_r + 1) if o not in recs][:5]
                    v.problems.append(f"replica {r} {topic}-{p}: offset gaps, e.g. {missing}")
            ckpt = ckpts.get(p, {}).get(r)
            if ckpt is not None and ckpt > (max(recs) + 1 if recs else 0):
                v.problems.append(f"replica {r} {topic}-{p}: checkpointed HW {ckpt} beyond its log end")
            if len(recs) < hw - lo:
                v.problems.append(f"replica {r} {topic}-{p}: holds {len(recs)} records, leader HW {hw}")
        # No offset holds two different values: every replica and the consumer's view agree.
        views = {f"replica {r}": recs for r, (recs, _) in replicas.items()}
        views["consumer"] = leader_recs
        every = set()
        for recs in views.values():
            every |= set(recs)
        for off in sorted(every):
            vals = {name: recs[off] for name, recs in views.items() if off in recs}
            if len(set(vals.values())) > 1:
                v.divergent.append((p, off, vals))
        # Data the tailing consumer read during the run (committed, below the HW then) must still
        # be there, unchanged.
        ref = leader_recs if leader_recs else (next(iter(replicas.values()))[0] if replicas else {})
        for (cp, off), val in list(led.consumed.items()):
            if cp == p and ref.get(off) != val:
                v.problems.append(f"{topic}-{p} offset {off}: consumed {val[:24]!r} during the run, "
                                  f"now {ref.get(off, b'<absent>')[:24]!r}")
        # Acknowledged records: at the acked offset, and where else the value lives.
        where = {}
        for off, val in ref.items():
            where.setdefault(val, []).append(off)
        for val, (ap, aoff, _) in led.acked.items():
            if ap != p:
                continue
            offs = where.get(val, [])
            if aoff is None:  # implicitly acknowledged: anywhere in the log
                v.acked_without_offset += 1
                if not offs:
                    v.lost.append((val, p, aoff, None))
            elif ref.get(aoff) != val:
                v.lost.append((val, p, aoff, ref.get(aoff)))
            if len(offs) > 1:
                v.duplicated.append((val, offs))
    for x in led.consumed_conflicts:
        v.problems.append(f"tailing consumer saw offset {x[0]}/{x[1]} with two values")
    # The tailing consumer read every offset from 0 up to the last one it saw: none skipped.
    seen = {}
    for cp, off in led.consumed:
        seen.setdefault(cp, set()).add(off)
    for cp, offs in sorted(seen.items()):
        if len(offs) != max(offs) + 1:
            miss = sorted(set(range(max(offs) + 1)) - offs)
            v.problems.append(f"{topic}-{cp}: the tailing consumer skipped {len(miss)} offsets "
                              f"({miss[0]}..{miss[-1]})")
    return v


def check_one_controller(cluster, timeout=30.0):
    """Exactly one active controller: /controller names a running broker whose metrics say
    ActiveControllerCount 1, and every other running broker says 0. Returns the controller id."""
    def ok():
        c = cluster.controller()
        if c is None or not cluster[c["brokerid"]].running():
            return None
        vals = {b.id: b.active_controller_count() for b in cluster.running()}
        want = {i: (1 if i == c["brokerid"] else 0) for i in vals}
        return c["brokerid"] if vals == want else None
    return H.wait_for(ok, timeout, "exactly one active controller (/controller and ActiveControllerCount: "
                      + str({b.id: b.active_controller_count() for b in cluster.running()}) + ")",
                      interval=0.25)


def assert_ok(v, strict_duplicates=False):
    msgs = []
    if v.lost:
        msgs.append(f"{len(v.lost)} acknowledged records lost or moved, e.g. "
                    + "; ".join(f"{val[:24]!r} acked at p{p}@{o}, log has {g[:24] if g else g!r}"
                                for val, p, o, g in v.lost[:5]))
    if v.divergent:
        msgs.append(f"{len(v.divergent)} offsets hold different values on different replicas, e.g. "
                    + "; ".join(f"p{p}@{o}: {ws}" for p, o, ws in v.divergent[:3]))
    if v.problems:
        msgs.append(f"{len(v.problems)} other problems: " + " | ".join(v.problems[:8]))
    if strict_duplicates and v.duplicated:
        msgs.append(f"{len(v.duplicated)} acknowledged values stored more than once, e.g. {v.duplicated[:3]}")
    assert not msgs, f"safety violated ({v.summary()}):\n  " + "\n  ".join(msgs)


def record_results(test, nem, v, elapsed):
    """Adds this test's rows to RESULTS (the conftest prints them as a table at the end)."""
    for kind, st in nem.log.kinds.items():
        rec = st.recover
        RESULTS.append({
            "test": test, "fault": kind, "rounds": st.rounds, "acked": v.acked, "lost": len(v.lost),
            "duplicated": len(v.duplicated), "divergent": len(v.divergent),
            "recover_max_s": max(rec) if rec else None,
            "recover_avg_s": sum(rec) / len(rec) if rec else None,
            "no_recovery": st.rounds - len(rec), "elapsed_s": elapsed,
        })


def format_table(rows):
    head = f"{'test':<28} {'fault':<18} {'rounds':>6} {'acked':>7} {'lost':>5} {'dup':>5} " \
           f"{'diverg':>6} {'recover avg/max s':>18} {'test s':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        rec = "-" if r["recover_max_s"] is None else f"{r['recover_avg_s']:.1f}/{r['recover_max_s']:.1f}"
        if r["no_recovery"]:
            rec += f" ({r['no_recovery']} n/a)"
        lines.append(f"{r['test'][:28]:<28} {r['fault']:<18} {r['rounds']:>6} {r['acked']:>7} {r['lost']:>5} "
                     f"{r['duplicated']:>5} {r['divergent']:>6} {rec:>18} {r['elapsed_s']:>7.0f}")
    return "\n".join(lines)
