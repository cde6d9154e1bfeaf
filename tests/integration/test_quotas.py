"""Client quotas: AlterClientQuotas / DescribeClientQuotas through `gregorctl configs` (as
kafka-configs.sh), stored under /config/clients and /config/users, and enforced: a confluent-kafka
producer limited by producer_byte_rate is held to it (measured throughput within +-20%), sees
throttle_time in its responses, while a client without a quota is not slowed.

Consumers: consumer_byte_rate holds a confluent-kafka consumer back (and it sees throttle_time);
request_percentage throttles a client that keeps a broker thread busy (throttle_time, muted channel).
The reassignment test: `gregorctl reassign execute --throttle` sets the replication throttles, which
hold the copy back until they are lifted; `verify` then clears them.

The cluster uses quota.window.num=2 (Kafka's key; default 11) so that the initial burst Kafka's
rate windows allow is small and the test is short.
"""

import json
import os
import socket
import struct
import subprocess
import threading
import time

import pytest

import gregor_harness as H

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

RATE = 1024 * 1024  # producer_byte_rate: 1 MB/s
_KEEP = []


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.brokers.values())


def gregorctl(cluster, *args, check=True):
    out = subprocess.run([H.GREGORCTL, "--bootstrap-server", bootstrap(cluster), "--timeout-ms", "15000",
                          "configs", *args], capture_output=True, text=True, timeout=60)
    if check:
        assert out.returncode == 0, f"gregorctl configs {args}: {out.stdout}{out.stderr}"
    return out


def produce_for(cluster, topic, client_id, seconds, size=16384):
    """Produces as fast as the broker lets it for `seconds`; returns (delivery times and sizes,
    max throttle time seen in the client's statistics)."""
    throttles = []

    def stats(js):
        for b in json.loads(js).get("brokers", {}).values():
            t = b.get("throttle", {})
            if t.get("max", 0) > 0:
                throttles.append(t["max"])
    delivered = []
    lock = threading.Lock()

    def cb(err, msg):
        if err is None:
            with lock:
                delivered.append((time.monotonic(), len(msg.value())))
    p = Producer({"bootstrap.servers": bootstrap(cluster), "client.id": client_id, "acks": 1,
                  "linger.ms": 5, "batch.size": 65536, "queue.buffering.max.kbytes": 2048,
                  "statistics.interval.ms": 500, "stats_cb": stats})
    payload = b"q" * size
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            p.produce(topic, payload, on_delivery=cb)
        except BufferError:
            p.poll(0.05)
            continue
        p.poll(0)
    p.flush(30)
    p.poll(1.0)
    return start, delivered, max(throttles) if throttles else 0


def consume_for(cluster, topic, client_id, seconds):
    """Bytes a confluent-kafka consumer reads from the start of topic in `seconds`, and the
    throttle times its statistics reported."""
    from confluent_kafka import Consumer
    throttles = []

    def stats(js):
        for b in json.loads(js).get("brokers", {}).values():
            t = b.get("throttle", {})
            if t.get("max", 0) > 0:
                throttles.append(t["max"])
    cons = Consumer({"bootstrap.servers": bootstrap(cluster), "client.id": client_id, "group.id": client_id,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "fetch.max.bytes": 1048576, "message.max.bytes": 1000000, "max.partition.fetch.bytes": 65536,
                     "statistics.interval.ms": 500, "stats_cb": stats})
    cons.subscribe([topic])
    got = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        m = cons.poll(0.2)
        if m is not None and m.error() is None:
            got += len(m.value())
    cons.poll(0.6)  # one more statistics callback
    cons.close()
    return got, throttles


def busy_client(cluster, client_id, max_requests=3000):
    """Metadata v4 requests on one connection until a response carries a throttle time; returns
    (that throttle time, ms the next request took)."""
    import socket
    import struct
    cid = client_id.encode()
    s = socket.create_connection(("127.0.0.1", next(iter(cluster.brokers.values())).port), timeout=10)

    def call(corr):
        req = struct.pack(">hhih", 3, 4, corr, len(cid)) + cid + struct.pack(">ib", -1, 1)
        s.sendall(struct.pack(">i", len(req)) + req)
        n = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        r = s.recv(n, socket.MSG_WAITALL)
        assert struct.unpack(">i", r[:4])[0] == corr
        return struct.unpack(">i", r[4:8])[0]
    try:
        for corr in range(max_requests):
            t = call(corr)
            if t > 0:
                t0 = time.monotonic()
                call(max_requests + 1)
                return t, (time.monotonic() - t0) * 1000
        return 0, 0
    finally:
        s.close()


def rate_between(start, delivered, t0, t1):
    return sum(n for t, n in delivered if start + t0 <= t < start + t1) / (t1 - t0)


def test_producer_byte_rate_throttles(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=1, config={"quota.window.num": "2", "quota.window.size.seconds": "1"})
    admin = AdminClient({"bootstrap.servers": bootstrap(c)})
    _KEEP.append(admin)
    admin.create_topics([NewTopic("q", num_partitions=1, replication_factor=1)])["q"].result(30)
    H.wait_for(lambda: admin.list_topics("q", timeout=5).topics["q"].partitions[0].leader >= 0, 20, "topic q")

    out = gregorctl(c, "--alter", "--entity-type", "clients", "--entity-name", "limited",
                    "--add-config", f"producer_byte_rate={RATE}")
    assert out.stdout.strip() == "Completed updating config for client limited."
    out = gregorctl(c, "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type",
                    "clients", "--entity-default", "--add-config", "consumer_byte_rate=2048,request_percentage=50")
    assert out.stdout.strip() == "Completed updating config for user alice."
    assert json.loads(c.zk.get("/config/clients/limited")[0]) == \
        {"version": 1, "config": {"producer_byte_rate": str(RATE)}}
    assert json.loads(c.zk.get("/config/users/alice/clients/<default>")[0])["config"] == \
        {"consumer_byte_rate": "2048", "request_percentage": "50.0"}
    out = gregorctl(c, "--describe", "--entity-type", "clients", "--entity-name", "limited")
    assert out.stdout.strip() == "Quota configs for client-id 'limited' are producer_byte_rate=1048576.0"
    out = gregorctl(c, "--describe", "--entity-type", "users")
    assert out.stdout.strip() == ("Quota configs for user-principal 'alice', the default client-id are "
                                  "consumer_byte_rate=2048.0, request_percentage=50.0")
    out = gregorctl(c, "--alter", "--entity-type", "clients", "--entity-name", "x", "--add-config",
                    "producer_byte_rate=1.5", check=False)
    assert out.returncode == 1 and "producer_byte_rate must be a Long value" in out.stderr
    out = gregorctl(c, "--alter", "--entity-type", "clients", "--entity-name", "x", "--add-config",
                    "bogus=1", check=False)
    assert out.returncode == 1 and "Invalid configuration key bogus" in out.stderr
    time.sleep(0.5)  # the broker's config listener reloads the quotas

    start, delivered, throttle = produce_for(c, "q", "limited", 12)
    measured = rate_between(start, delivered, 2, 12)
    print(f"limited producer at {measured / RATE:.3f} MB/s")
    assert 0.8 * RATE <= measured <= 1.2 * RATE, f"limited producer at {measured / RATE:.2f} MB/s"
    assert throttle > 0, "no throttle_time reported to the limited producer"

    start, delivered, throttle = produce_for(c, "q", "free", 3)
    free_rate = rate_between(start, delivered, 0, 3)
    assert free_rate > 3 * RATE, f"unlimited producer only at {free_rate / RATE:.2f} MB/s"
    assert throttle == 0

    # consumer_byte_rate: a consumer fetching the same data is held back and told so
    gregorctl(c, "--alter", "--entity-type", "clients", "--entity-name", "slowc", "--add-config",
              "consumer_byte_rate=200000")
    time.sleep(0.5)
    got, throttles = consume_for(c, "q", "slowc", 3)
    assert got < 1000000, f"consumer got {got} bytes in 3 s at 200 kB/s"
    assert throttles and max(throttles) > 0, "no throttle_time reported to the consumer"
    got_free, _ = consume_for(c, "q", "fastc", 3)
    assert got_free > 3 * got, (got_free, got)

    # request_percentage: a client that keeps a broker thread busy beyond it gets throttle_time and
    # its connection muted for that long
    gregorctl(c, "--alter", "--entity-type", "clients", "--entity-name", "busy", "--add-config",
              "request_percentage=0.01")
    time.sleep(0.5)
    throttle, muted_ms = busy_client(c, "busy")
    assert throttle > 0, "no throttle for a client over request_percentage"
    assert muted_ms >= 0.5 * min(throttle, 1000), (throttle, muted_ms)
    assert busy_client(c, "idle", max_requests=300)[0] == 0

    # removing the quota lifts the limit
    gregorctl(c, "--alter", "--entity-type", "clients", "--entity-name", "limited", "--delete-config",
              "producer_byte_rate")
    time.sleep(0.5)
    start, delivered, _ = produce_for(c, "q", "limited", 3)
    assert rate_between(start, delivered, 0, 3) > 3 * RATE


def reassign(cluster, *args, check=True):
    out = subprocess.run([H.GREGORCTL, "--bootstrap-server", bootstrap(cluster), "--timeout-ms", "15000",
                          "reassign", *args], capture_output=True, text=True, timeout=60)
    if check:
        assert out.returncode == 0, f"gregorctl reassign {args}: {out.stdout}{out.stderr}"
    return out


def log_bytes(cluster, bid, topic, partition=0):
    d = os.path.join(cluster[bid].logdir, f"{topic}-{partition}")
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".log")) \
        if os.path.isdir(d) else 0


def test_reassignment_throttle(cluster_factory, zk_connect, tmp_path):
    c = cluster_factory(zk_connect, n=2)
    admin = AdminClient({"bootstrap.servers": bootstrap(c)})
    _KEEP.append(admin)
    admin.create_topics([NewTopic("big", num_partitions=1, replica_assignment=[[1]])])["big"].result(30)
    H.wait_for(lambda: admin.list_topics("big", timeout=5).topics["big"].partitions[0].leader == 1, 20, "topic big")
    p = Producer({"bootstrap.servers": bootstrap(c), "linger.ms": 20})
    # 4 MiB: the follower's first fetch (up to replica.fetch.max.bytes, 1 MiB, plus the batch that
    # crosses it) goes through before the leader's quota window shows the rate, as in Kafka
    for _ in range(256):
        p.produce("big", b"r" * 16384)
        p.poll(0)
    assert p.flush(30) == 0
    size = log_bytes(c, 1, "big")
    assert size >= 4 * 1024 * 1024

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "big", "partition": 0, "replicas": [2]}]}))
    out = reassign(c, "execute", "--reassignment-json-file", str(plan), "--throttle", "20000")
    assert "Warning: You must run --verify periodically, until the reassignment completes, to ensure the " \
           "throttle is removed." in out.stdout
    assert "The inter-broker throttle limit was set to 20000 B/s" in out.stdout
    assert "Successfully started partition reassignment for big-0" in out.stdout
    cfg = json.loads(c.zk.get("/config/topics/big")[0])["config"]
    assert cfg == {"leader.replication.throttled.replicas": "0:1", "follower.replication.throttled.replicas": "0:2"}
    for bid in (1, 2):
        assert json.loads(c.zk.get(f"/config/brokers/{bid}")[0])["config"] == {
            "leader.replication.throttled.rate": "20000", "follower.replication.throttled.rate": "20000"}

    # Kafka's rate windows let ~10 s x 20 kB through at once; the rest is held back
    time.sleep(3)
    copied = log_bytes(c, 2, "big")
    print(f"copied {copied} of {size} bytes in 3 s")
    assert copied < size / 2, f"{copied} of {size} bytes copied within 3 s despite a 20 kB/s throttle"
    out = reassign(c, "verify", "--reassignment-json-file", str(plan), check=False)
    assert out.returncode == 1 and "Reassignment of partition big-0 is still in progress." in out.stdout

    # lifting the broker throttle lets it finish; verify then clears every throttle
    for bid in (1, 2):
        gregorctl(c, "--alter", "--entity-type", "brokers", "--entity-name", str(bid), "--delete-config",
                  "leader.replication.throttled.rate,follower.replication.throttled.rate")

    def done():
        return reassign(c, "verify", "--reassignment-json-file", str(plan), check=False).returncode == 0
    H.wait_for(done, 30, "reassignment complete once unthrottled", interval=0.5)
    out = reassign(c, "verify", "--reassignment-json-file", str(plan))
    assert "Clearing broker-level throttles on brokers 1,2" in out.stdout
    assert "Clearing topic-level throttles on topic big" in out.stdout
    assert json.loads(c.zk.get("/config/topics/big")[0])["config"] == {}


# ---- quotas keyed on the authenticated principal (issue 25 item 9) ----

def _plain_login(port, user, password):
    """A socket authenticated with SASL/PLAIN (SaslHandshake v1 + SaslAuthenticate v1)."""
    from kafka_wire import frame, recv_frame
    from test_hostile_clients import sasl_authenticate
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(frame(17, 1, 1, struct.pack(">h", 5) + b"PLAIN"))
    r = recv_frame(s)
    assert r is not None and struct.unpack(">h", r[4:6])[0] == 0, "SaslHandshake PLAIN refused"
    err, _ = sasl_authenticate(s, b"\0" + user.encode() + b"\0" + password.encode(), 2)
    assert err == 0, f"PLAIN login of {user}: {err}"
    return s


def _produce_throttle(s, corr, topic, client_id, size=1000):
    """Produce v3 of one record of `size` bytes; returns (error code, ThrottleTimeMs)."""
    from kafka_wire import frame, recv_frame
    from test_malformed import array, i16, i32, record_batch, string
    recs = record_batch([b"p" * size])
    body = string(None) + i16(1) + i32(10000) + array([string(topic) + array([i32(0) + i32(len(recs)) + recs])])
    s.sendall(frame(0, 3, corr, body, client_id=client_id.encode()))
    r = recv_frame(s, timeout=10)
    assert r is not None and struct.unpack(">i", r[:4])[0] == corr
    # [topic [partition error base_offset log_append_time]] throttle
    tl = struct.unpack(">h", r[8:10])[0]
    err = struct.unpack(">h", r[10 + tl + 4 + 4:10 + tl + 4 + 4 + 2])[0]
    return err, struct.unpack(">i", r[-4:])[0]


def test_quotas_follow_the_sasl_principal(cluster_factory, zk_connect):
    """/config/users/<u> quotas apply to the authenticated user, and a <default> user quota is
    measured per user (Kafka's metric tags), not in one bucket shared by every client."""
    c = cluster_factory(zk_connect, n=1, start=False)
    b = c.brokers[1]
    sp = H.free_port()
    ls = f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{sp}"
    b.config.update({
        "listeners": ls, "advertised.listeners": ls, "inter.broker.listener.name": "PLAINTEXT",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_alice="alice-secret" user_bob="bob-secret" user_carol="carol-secret";',
        # windows of 30 s: the first records are averaged over 10 windows (300 s), so rates here
        # do not depend on how fast the test runs
        "quota.window.size.seconds": "30",
    })
    c.start()
    admin = AdminClient({"bootstrap.servers": bootstrap(c)})
    _KEEP.append(admin)
    admin.create_topics([NewTopic("pq", num_partitions=1, replication_factor=1)])["pq"].result(30)
    H.wait_for(lambda: admin.list_topics("pq", timeout=5).topics["pq"].partitions[0].leader >= 0, 20, "topic pq")

    # alice has a user quota of 1 B/s; bob none
    gregorctl(c, "--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config",
              "producer_byte_rate=1")
    alice = _plain_login(sp, "alice", "alice-secret")
    bob = _plain_login(sp, "bob", "bob-secret")
    H.wait_for(lambda: _produce_throttle(alice, 10, "pq", "app")[1] > 0, 10, "alice throttled by her user quota")
    err, t = _produce_throttle(bob, 11, "pq", "app")
    assert err == 0 and t == 0, (err, t)

    # users/<default> 5 B/s: one ~1.1 kB request is ~3.7 B/s over the 300 s span, two are ~7.3:
    # each user gets one request free, whichever users came before
    gregorctl(c, "--alter", "--entity-type", "users", "--entity-default", "--add-config",
              "producer_byte_rate=5")
    carol = _plain_login(sp, "carol", "carol-secret")
    H.wait_for(lambda: "2 client quota entities loaded" in b.log(), 10, "the <default> quota loaded")
    err, t = _produce_throttle(bob, 12, "pq", "app")
    assert err == 0 and t == 0, f"bob's first request throttled ({t} ms)"
    err, t = _produce_throttle(carol, 13, "pq", "other-app")
    assert err == 0 and t == 0, f"carol's first request throttled ({t} ms): a bucket shared with bob"
    err, t = _produce_throttle(bob, 14, "pq", "yet-another-app")
    assert t > 0, "bob's second request not throttled (the <default> quota is per user, any client id)"
    for s in (alice, bob, carol):
        s.close()
