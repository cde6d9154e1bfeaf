"""The hostile-client siege (issue 25, "Proof we expect"), shared by tests/integration/
test_hostile_siege.py (which asserts what must hold) and bench/bench_hostile.py (which measures
the good client's latency with and without it).

A 3-broker cluster with the four listener types (PLAINTEXT, inter-broker; SSL; SASL_PLAINTEXT
and SASL_SSL with SCRAM) and a well-behaved confluent-kafka client on broker 1 (GoodClient: an
idempotent acks=all producer and an assigned consumer over SASL_SSL, on a partition broker 1
leads with replicas on all three). Siege runs these attacks on broker 1 at the same time, each
in its own threads, until stopped:

  bombs       item 1: gzip batches of 60 x 1 MiB zeros (~60 KB on the wire) produced and read
              back with Fetch v2/v3, which must down-convert them
  legacy      item 2: Produce v2 requests of gzip wrapper messages inflating to 40 MiB, six
              entries for a partition that does not exist and three identical ones for a led one
  frames      oversized (INT32_MAX, 200 MiB, negative) and truncated frames on every listener,
              over TLS where the listener has it
  flood       connections opened, held and closed as fast as they go, and pre-authentication SCRAM
              client-first messages for unknown and known users on both SASL listeners, while
              the cluster's ZooKeeper is stopped (SIGSTOP) for `zk_pause` seconds
  slowloris   TLS handshakes on SSL and SASL_SSL and SASL exchanges on SASL_PLAINTEXT and
              SASL_SSL sent a byte per second

Attacker threads count what they did in Siege.counts; Siege.errors holds only broker behaviour
that is wrong whatever the load (an oversized frame answered instead of closed, a down-conversion
that returned an error). Timeouts and refused connections are the siege working and are counted.
Connections come from distinct loopback addresses (kafka_wire.connect_from) so that
max.connections.per.ip limits the flood and not the good client (127.0.0.1).
"""

import collections
import os
import random
import signal
import struct
import threading
import time

import security_pki as P
import gregor_harness as H
from kafka_wire import closed_by_peer, connect_from, frame, scram_first, tls_wrap
from test_hostile_input import (MIB, fetch_old, gzip_bomb_batch, gzip_wrapper_set, legacy_messages,
                                produce, produce_v2, vm_kb)

LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
GOOD_USER, GOOD_PASSWORD = "good", "good-secret"
MAX_CONNECTIONS_PER_IP = 100

# Loopback source addresses of the attackers (the good client and the brokers use 127.0.0.1)
SRC_FLOOD, SRC_SLOW, SRC_HOLD = "127.0.0.5", "127.0.0.4", "127.0.0.6"


def siege_config(pki, ports):
    """server.properties keys for one broker of the siege cluster, on ports {listener: port}.
    Every limit the siege relies on is left at Kafka's default except max.connections.per.ip
    (Kafka: unlimited), which is what bounds one address's connections (docs/SECURITY.md)."""
    ls = ",".join(f"{n}://127.0.0.1:{ports[n]}" for n in LISTENERS)
    return {
        "listeners": ls,
        "advertised.listeners": ls,
        "listener.security.protocol.map": ",".join(f"{n}:{n}" for n in LISTENERS),
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki["broker_keystore"],
        "ssl.key.password": pki["key_password"],
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki["ca"],
        "ssl.client.auth": "none",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "max.connections.per.ip": str(MAX_CONNECTIONS_PER_IP),
        "default.replication.factor": "3",
        "offsets.topic.replication.factor": "3",
        "min.insync.replicas": "2",
        # the ZooKeeper pause (seconds) must not expire the brokers' sessions: that is a failover
        # test, not this one (the harness's 3 s sessions are for failover tests)
        "zookeeper.session.timeout.ms": "30000",
    }


def make_cluster(cluster, pki):
    """Configures the (not started) 3-broker harness Cluster for the siege and writes the good
    user's SCRAM credentials; returns {broker id: {listener: port}}."""
    ports = {}
    for b in cluster.brokers.values():
        ports[b.id] = {"PLAINTEXT": b.port, "SSL": H.free_port(), "SASL_PLAINTEXT": H.free_port(),
                       "SASL_SSL": H.free_port()}
        b.config.update(siege_config(pki, ports[b.id]))
    P.write_scram_user(cluster.zk, GOOD_USER, {"SCRAM-SHA-512": GOOD_PASSWORD, "SCRAM-SHA-256": GOOD_PASSWORD})
    return ports


def create_led_topic(broker, name, replicas=(1, 2, 3)):
    """A one-partition topic with the given replica list (its first, the preferred leader, leads);
    waits until the partition's leader is replicas[0]."""
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}"})
    a.create_topics([NewTopic(name, num_partitions=1, replica_assignment=[list(replicas)])])[name].result(30)

    def led():
        md = a.list_topics(name, timeout=10).topics.get(name)
        return md is not None and md.error is None and 0 in md.partitions and md.partitions[0].leader == replicas[0]
    H.wait_for(led, 30, f"broker {replicas[0]} leads {name}")


def peak_rss_mib(pid):
    """A process's peak resident set size (VmHWM) in MiB."""
    return vm_kb(pid, "VmHWM") / 1024


class GoodClient:
    """An idempotent acks=all producer sending one small record every `interval` seconds (open
    loop: on time whatever the acknowledgements, so at a fixed rate) and a
    consumer reading the same partition from the start, both over SASL_SSL + SCRAM-SHA-512 to
    one broker (the leader). sent/acked/read are the values; latencies the produce latencies
    (librdkafka's, send to acknowledgement) in seconds."""

    def __init__(self, pki, port, topic, interval=0.01, tag="good"):
        self.conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL",
                     "ssl.ca.location": pki["ca"], "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.username": GOOD_USER, "sasl.password": GOOD_PASSWORD, "log_level": 3}
        self.topic, self.interval, self.tag = topic, interval, tag
        self.sent, self.acked, self.failed, self.read, self.latencies = [], [], [], [], []
        self.acked_at = []  # time.monotonic() of each acknowledgement
        self.stop_producing = threading.Event()
        self.stop_reading = threading.Event()
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._consume, daemon=True)]
        self.errors = []

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def _produce(self):
        from confluent_kafka import Producer
        p = Producer(dict(self.conf, **{"acks": "all", "enable.idempotence": True, "linger.ms": 0,
                                        "message.timeout.ms": 120000}))

        def delivered(err, msg):
            if err is not None:
                self.failed.append((msg.value(), str(err)))
            else:
                self.acked.append(msg.value())
                self.acked_at.append(time.monotonic())
                self.latencies.append(msg.latency())
        try:
            i = 0
            tick = time.monotonic()
            while not self.stop_producing.is_set():
                v = f"{self.tag}-{i}".encode()
                p.produce(self.topic, v, partition=0, on_delivery=delivered)
                self.sent.append(v)
                i += 1
                # open loop: the next record goes at its time whether or not this one is
                # acknowledged, so a slow broker shows in the latencies, not in fewer records
                tick += self.interval
                while (wait := tick - time.monotonic()) > 0:
                    p.poll(wait)
                p.poll(0)
            left = p.flush(120)
            if left:
                self.errors.append(f"{left} records still unacknowledged 120 s after the last send")
        except Exception as e:  # reported by the caller
            self.errors.append(f"producer: {e!r}")

    def _consume(self):
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer(dict(self.conf, **{"group.id": f"{self.tag}-reader", "enable.auto.commit": False,
                                        "auto.offset.reset": "earliest"}))
        try:
            c.assign([TopicPartition(self.topic, 0, 0)])
            while not (self.stop_reading.is_set() and len(self.read) >= len(self.acked)):
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error():
                    if not m.error().retriable() and m.error().code() != -191:  # _PARTITION_EOF
                        self.errors.append(f"consumer: {m.error()}")
                    continue
                self.read.append(m.value())
        except Exception as e:
            self.errors.append(f"consumer: {e!r}")
        finally:
            c.close()

    def finish(self, read_timeout=120.0):
        """Stops producing, waits for every acknowledgement, then until the consumer has read as
        many records as were acknowledged (or read_timeout)."""
        self.stop_producing.set()
        self.threads[0].join(150)
        self.stop_reading.set()
        self.threads[1].join(read_timeout)
        if self.threads[1].is_alive():
            self.errors.append(f"consumer read {len(self.read)} of {len(self.acked)} within {read_timeout:.0f} s")

    def acked_between(self, t0, t1):
        """How many records were acknowledged between monotonic times t0 and t1."""
        return sum(1 for t in list(self.acked_at) if t0 <= t <= t1)

    def percentiles_ms(self):
        """(p50, p99, n) of the produce latencies in ms."""
        lat = sorted(x for x in self.latencies if x is not None)
        if not lat:
            return float("nan"), float("nan"), 0
        pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000  # noqa: E731
        return pick(0.50), pick(0.99), len(lat)


class Siege:
    """The attacks on one broker (see the module docstring). `ports`: that broker's {listener:
    port}; `zk_pid`: the pid of the cluster's own ZooKeeper (paused with SIGSTOP in the middle of
    the siege for zk_pause seconds, None: not paused). `scale` multiplies thread and socket counts
    (the bench's smoke mode uses less)."""

    def __init__(self, pki, broker, ports, zk_pid=None, zk_pause=6.0, scale=1.0):
        self.pki, self.broker, self.ports = pki, broker, ports
        self.zk_pid, self.zk_pause, self.scale = zk_pid, zk_pause, scale
        self.stop = threading.Event()
        self.counts = collections.Counter()
        self.errors = []
        self.threads = []
        self.zk_paused = None  # (start, end) in time.monotonic() once the pause is over
        self.lock = threading.Lock()

    def n(self, k):
        return max(1, int(k * self.scale))

    def count(self, what, k=1):
        with self.lock:
            self.counts[what] += k

    def error(self, what):
        with self.lock:
            self.errors.append(what)

    # ---- set-up: the topics and payloads the bombs need ----
    def prepare(self):
        port = self.broker.port
        for t in ("bombs", "legacy"):  # on the attacked broker alone
            create_led_topic(self.broker, t, (self.broker.id,))
        self.bomb = gzip_bomb_batch(60, MIB)
        for _ in range(3):
            err = produce(port, "bombs", self.bomb)[0]
            assert err == 0, f"bomb batch refused: error {err}"
        self.legacy_big = gzip_wrapper_set([bytes(40 * MIB)])
        self.legacy_small = gzip_wrapper_set([bytes(4 * MIB)])
        return self

    ATTACKS = ("bombs", "legacy", "frames", "scram_flood", "connection_flood", "slowloris", "pause_zookeeper")

    def start(self, duration, attacks=ATTACKS):
        """Starts the named attacks (default all); they run until stop_all() (duration: where the
        ZooKeeper pause goes)."""
        self.duration = duration
        plan = [(self.bombs, 2), (self.legacy, 1), (self.frames, 1), (self.scram_flood, self.n(6)),
                (self.connection_flood, 1), (self.slowloris, 1)]
        plan = [(fn, k) for fn, k in plan if fn.__name__ in attacks]
        if "pause_zookeeper" not in attacks:
            self.zk_pid = None
        for fn, k in plan:
            for i in range(k):
                self.threads.append(threading.Thread(target=self._guard, args=(fn, i), daemon=True))
        if self.zk_pid:
            self.threads.append(threading.Thread(target=self._guard, args=(self.pause_zookeeper, 0), daemon=True))
        for t in self.threads:
            t.start()
        return self

    def stop_all(self):
        self.stop.set()
        for t in self.threads:
            t.join(60)
        if self.zk_pid:  # never leave it stopped
            os.kill(self.zk_pid, signal.SIGCONT)
        alive = [t.name for t in self.threads if t.is_alive()]
        if alive:
            self.error(f"attacker threads still running 60 s after the stop: {alive}")

    def _guard(self, fn, i):
        try:
            fn(i)
        except Exception as e:  # an attacker's own bug must not pass for a quiet broker
            self.error(f"{fn.__name__}[{i}] raised {e!r}")

    # ---- item 1: Fetch v2/v3 down-conversion of gzip bombs ----
    def bombs(self, i):
        port = self.broker.port
        rnd = random.Random(i)
        k = 0
        while not self.stop.is_set():
            k += 1
            try:
                if k % 8 == 0:  # more bombs: each is validated record by record on the way in
                    err = produce(port, "bombs", self.bomb)[0]
                    self.count("bomb produced" if err == 0 else f"bomb produce error {err}")
                    continue
                version = rnd.choice((2, 3))
                hw_guess = 180
                err, hw, ms = fetch_old(port, version, "bombs", 2 * MIB, response_max=3 * MIB,
                                        offset=rnd.randrange(hw_guess))
            except (OSError, AssertionError, ConnectionError) as e:
                self.count(f"bomb fetch: {type(e).__name__}")
                continue
            if err != 0 or not legacy_messages(ms):
                self.error(f"Fetch v{version} of the bombs: error {err}, {len(ms)} bytes")
            else:
                self.count("bomb fetch (down-converted)")

    # ---- item 2: Produce v2 gzip up-conversion ----
    def legacy(self, i):
        port = self.broker.port
        while not self.stop.is_set():
            try:
                res = produce_v2(port, [("legacy", 7, self.legacy_big)] * 6 + [("legacy", 0, self.legacy_small)] * 3)
            except (OSError, AssertionError, ConnectionError) as e:
                self.count(f"legacy produce: {type(e).__name__}")
                continue
            errs = sorted({e for _, _, e, _ in res})
            self.count(f"legacy produce errors {errs}")

    # ---- oversized and truncated frames on every listener ----
    def _open(self, listener):
        s = connect_from("127.0.0.1", self.ports[listener], timeout=20)
        if listener in ("SSL", "SASL_SSL"):
            s = tls_wrap(s, self.pki["ca"])
        return s

    def frames(self, i):
        cases = [("INT32_MAX size", struct.pack(">i", 0x7FFFFFFF), True),
                 ("200 MiB size", struct.pack(">i", 200 * MIB) + os.urandom(1000), True),
                 ("negative size", struct.pack(">i", -7) + b"\0" * 8, True),
                 ("truncated", frame(18, 0, 1, b"")[:9], False),
                 ("cut short", struct.pack(">i", 1000) + frame(3, 1, 2, b"")[4:], False)]
        while not self.stop.is_set():
            for listener in LISTENERS:
                for what, data, must_close in cases:
                    if self.stop.is_set():
                        return
                    try:
                        s = self._open(listener)
                    except (OSError, ConnectionError) as e:
                        self.count(f"frame connect: {type(e).__name__}")
                        continue
                    try:
                        s.sendall(data)
                        if must_close:
                            if not closed_by_peer(s, timeout=20):
                                self.error(f"{listener}: a frame with {what} left the connection open 20 s")
                        self.count(f"frame {what}")
                    except (OSError, ConnectionError):
                        self.count(f"frame {what}")  # closed while we wrote: fine
                    finally:
                        s.close()

    # ---- a flood of pre-authentication SCRAM first messages and of connections ----
    def scram_flood(self, i):
        lst = ("SASL_PLAINTEXT", "SASL_SSL")[i % 2]
        k = 0
        while not self.stop.is_set():
            k += 1
            user = GOOD_USER if k % 4 == 0 else f"ghost{i}-{k}"
            try:
                s = connect_from(SRC_FLOOD, self.ports[lst], timeout=10)
                if lst == "SASL_SSL":
                    s = tls_wrap(s, self.pki["ca"])
                with s:
                    err, _, _ = scram_first(s, user, "SCRAM-SHA-512")
                self.count(f"scram first ({'known' if user == GOOD_USER else 'unknown'} user) err {err}")
            except (OSError, AssertionError, ConnectionError) as e:
                self.count(f"scram first: {type(e).__name__}")

    def connection_flood(self, i):
        """Holds up to 3 x max.connections.per.ip connections from one address (the broker closes
        the ones over the limit) and opens and closes more as fast as it can, on all listeners."""
        held = []
        k = 0
        while not self.stop.is_set():
            k += 1
            lst = LISTENERS[k % len(LISTENERS)]
            try:
                s = connect_from(SRC_HOLD, self.ports[lst], timeout=5)
            except OSError as e:
                self.count(f"flood connect: {type(e).__name__}")
                time.sleep(0.01)
                continue
            self.count("flood connection")
            if len(held) < 3 * MAX_CONNECTIONS_PER_IP * self.scale:
                held.append(s)
            else:
                s.close()
                victim = held.pop(random.randrange(len(held)))
                victim.close()
        for s in held:
            s.close()

    def pause_zookeeper(self, i):
        """SIGSTOP the cluster's ZooKeeper a quarter into the siege, SIGCONT zk_pause s later."""
        if self.stop.wait(self.duration / 4):
            return
        os.kill(self.zk_pid, signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            self.stop.wait(self.zk_pause)
        finally:
            os.kill(self.zk_pid, signal.SIGCONT)
            self.zk_paused = (t0, time.monotonic())

    # ---- slow-loris: TLS handshakes and SASL exchanges a byte per second ----
    def slowloris(self, i):
        hello = bytes.fromhex("16030100c4010000c00303") + os.urandom(32) + os.urandom(160)
        mech = b"SCRAM-SHA-512"
        sasl = frame(17, 1, 1, struct.pack(">h", len(mech)) + mech)
        kinds = [("SSL", "tls handshake", hello), ("SASL_SSL", "tls handshake", hello),
                 ("SASL_PLAINTEXT", "sasl exchange", sasl), ("SASL_SSL", "sasl exchange", sasl)]
        per_kind = self.n(15)
        slots = []  # [socket or None, kind index, bytes sent]
        for j in range(per_kind * len(kinds)):
            slots.append([None, j % len(kinds), 0])
        while not self.stop.is_set():
            t0 = time.monotonic()
            for slot in slots:
                if self.stop.is_set():
                    break
                lst, what, data = kinds[slot[1]]
                try:
                    if slot[0] is None:
                        s = connect_from(SRC_SLOW, self.ports[lst], timeout=5)
                        if what == "sasl exchange" and lst == "SASL_SSL":
                            s = tls_wrap(s, self.pki["ca"])  # handshake at full speed, then SASL slowly
                        slot[0], slot[2] = s, 0
                        self.count(f"slow {what} on {lst} opened")
                    if slot[2] >= len(data):  # all sent slowly: start again on a new connection
                        slot[0].close()
                        slot[0] = None
                        continue
                    slot[0].sendall(data[slot[2]:slot[2] + 1])
                    slot[2] += 1
                    self.count("slow byte")
                except (OSError, ConnectionError) as e:
                    self.count(f"slow {what} on {lst}: {type(e).__name__}")
                    if slot[0] is not None:
                        slot[0].close()
                    slot[0] = None
            self.stop.wait(max(0.0, 1.0 - (time.monotonic() - t0)))
        for slot in slots:
            if slot[0] is not None:
                slot[0].close()


def zk_pid_of(zk_server):
    """The pid of a harness ZkServer started in its own directory (scripts/zk.sh writes zk.pid)."""
    with open(os.path.join(zk_server.dir, "zk.pid")) as f:
        return int(f.read().strip())


def rss_report(cluster):
    """{broker id: (VmRSS MiB, VmHWM MiB)} of the running brokers."""
    return {b.id: (vm_kb(b.pid, "VmRSS") / 1024, vm_kb(b.pid, "VmHWM") / 1024) for b in cluster.brokers.values()
            if b.running()}

