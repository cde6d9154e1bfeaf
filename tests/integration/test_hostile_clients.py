"""Hostile clients (docs/SECURITY.md "Hostile input"): an unauthenticated SCRAM client must not
reach ZooKeeper (credentials come from the in-memory cache), a spoofed replica id must not touch
a follower's fetch sessions, and requests naming topics that do not exist must not grow /metrics."""

import base64
import hashlib
import hmac
import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time
import urllib.request

import pytest

import gregor_harness as H
import security_pki as P
from kafka_wire import frame, recv_frame, sasl_authenticate, scram_first
from test_malformed import produce_v3, record_batch


# ---- SCRAM (RFC 5802, as Kafka's ScramSaslClient) over SaslHandshake v1 + SaslAuthenticate v1 ----
# (the first steps, sasl_authenticate and scram_first, are in kafka_wire)

ALG = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def scram_login(port, user, password, mech="SCRAM-SHA-256", timeout=5.0):
    """True if the broker authenticates user/password (and proves it knows the credential)."""
    alg = ALG[mech]
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        err, sf, bare = scram_first(s, user, mech)
        if err != 0:
            return False
        attrs = dict(a.split("=", 1) for a in sf.decode().split(","))
        salted = hashlib.pbkdf2_hmac(alg, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
        ck = hmac.new(salted, b"Client Key", alg).digest()
        final_wo = f"c=biws,r={attrs['r']}"
        auth = f"{bare},{sf.decode()},{final_wo}".encode()
        sig = hmac.new(hashlib.new(alg, ck).digest(), auth, alg).digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(ck, sig))).decode()
        err, sfinal = sasl_authenticate(s, f"{final_wo},p={proof}".encode(), 3)
        if err != 0:
            return False
        sk = hmac.new(salted, b"Server Key", alg).digest()
        assert sfinal.decode() == "v=" + base64.b64encode(hmac.new(sk, auth, alg).digest()).decode()
        return True


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout}s: {what}")


def api_versions_ok(port, timeout):
    """A PLAINTEXT ApiVersions v0 is answered within timeout."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(frame(18, 0, 7, b""))
        r = recv_frame(s, timeout)
        return r is not None and struct.unpack(">i", r[:4])[0] == 7


def gregorctl(*args):
    return subprocess.run([H.GREGORCTL, *args], capture_output=True, text=True, timeout=30)


# ---- 1. SCRAM credentials from the cache, not from ZooKeeper ----

def test_scram_credentials_cached_and_zookeeper_not_on_auth_path(cluster_factory, dedicated_zk):
    c = cluster_factory(dedicated_zk.hosts, n=1, start=False)
    b = c.brokers[1]
    sp = H.free_port()
    ls = f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{sp}"
    b.config.update({"listeners": ls, "advertised.listeners": ls, "inter.broker.listener.name": "PLAINTEXT",
                     "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
                     "connection.failed.authentication.delay.ms": "10", "num.io.threads": "4"})
    P.write_scram_user(c.zk, "alice", {"SCRAM-SHA-256": "alice-secret"})
    c.start()
    boot = f"127.0.0.1:{b.port}"

    assert scram_login(sp, "alice", "alice-secret")
    assert not scram_login(sp, "alice", "wrong")
    assert not scram_login(sp, "nobody", "x")

    # added, changed, deleted through AlterUserScramCredentials: in effect within seconds
    def alter(*a):
        r = gregorctl("--bootstrap-server", boot, "user-scram", "--alter", "--entity-name", "bob", *a)
        assert r.returncode == 0, r.stdout + r.stderr
    alter("--add-config", "SCRAM-SHA-512=[iterations=4096,password=bob-1]")
    wait_for(lambda: scram_login(sp, "bob", "bob-1", "SCRAM-SHA-512"), 5, "bob added")
    alter("--add-config", "SCRAM-SHA-512=[iterations=4096,password=bob-2]")
    wait_for(lambda: scram_login(sp, "bob", "bob-2", "SCRAM-SHA-512"), 5, "bob's new password")
    assert not scram_login(sp, "bob", "bob-1", "SCRAM-SHA-512")
    alter("--delete-config", "SCRAM-SHA-512")
    wait_for(lambda: not scram_login(sp, "bob", "bob-2", "SCRAM-SHA-512"), 5, "bob deleted")

    # ZooKeeper frozen: known users still log in, a flood of first messages starves nobody
    with open(os.path.join(dedicated_zk.dir, "zk.pid")) as f:
        zk_pid = int(f.read().strip())
    os.kill(zk_pid, signal.SIGSTOP)
    socks = []
    try:
        t0 = time.time()
        assert scram_login(sp, "alice", "alice-secret", timeout=3)
        assert time.time() - t0 < 2.5
        stop = threading.Event()

        def flood(i):
            while not stop.is_set():
                try:
                    with socket.create_connection(("127.0.0.1", sp), timeout=3) as s:
                        scram_first(s, f"ghost{i}")
                except (OSError, AssertionError):
                    pass
        threads = [threading.Thread(target=flood, args=(i,), daemon=True) for i in range(16)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        for _ in range(5):
            t0 = time.time()
            assert api_versions_ok(b.port, 2.0), "PLAINTEXT client not served during the SCRAM flood"
            assert time.time() - t0 < 1.0
        assert scram_login(sp, "alice", "alice-secret", timeout=3)
        stop.set()
        for t in threads:
            t.join(5)
    finally:
        os.kill(zk_pid, signal.SIGCONT)
        for s in socks:
            s.close()


# ---- 2. a spoofed ReplicaId in a Fetch ----

AUTH = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS",
        "gregor.test.principal.by.client.id": "true"}


def s16(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def fetch_v11(replica_id, topic, partition, offset, session_id=0, epoch=-1, with_partition=True):
    parts = [struct.pack(">iiqqi", partition, -1, offset, -1, 1 << 20)] if with_partition else []
    topics = [s16(topic) + struct.pack(">i", len(parts)) + b"".join(parts)] if parts else []
    return (struct.pack(">iiiibii", replica_id, 0, 1, 1 << 20, 0, session_id, epoch) +
            struct.pack(">i", len(topics)) + b"".join(topics) + struct.pack(">i", 0) + s16(""))


def parse_fetch_v11(r):
    """(ErrorCode, SessionId, {(topic, partition): (error, records bytes)})."""
    p = 4 + 4
    err, sid = struct.unpack(">hi", r[p:p + 6])
    p += 6
    out = {}
    (nt,) = struct.unpack(">i", r[p:p + 4])
    p += 4
    for _ in range(nt):
        (tl,) = struct.unpack(">h", r[p:p + 2])
        topic = r[p + 2:p + 2 + tl].decode()
        p += 2 + tl
        (np_,) = struct.unpack(">i", r[p:p + 4])
        p += 4
        for _ in range(np_):
            part, perr = struct.unpack(">ih", r[p:p + 6])
            p += 6 + 24
            (na,) = struct.unpack(">i", r[p:p + 4])
            p += 4 + max(na, 0) * 16 + 4
            (rl,) = struct.unpack(">i", r[p:p + 4])
            p += 4
            out[(topic, part)] = (perr, r[p:p + max(rl, 0)])
            p += max(rl, 0)
    return err, sid, out


def fetch(conn, corr, client_id, req):
    conn.sendall(frame(1, 11, corr, req, client_id=client_id.encode()))
    r = recv_frame(conn)
    assert r is not None and struct.unpack(">i", r[:4])[0] == corr
    return parse_fetch_v11(r)


def test_spoofed_replica_id_fetch(cluster_factory, zk_connect):
    ck = pytest.importorskip("confluent_kafka")
    cka = pytest.importorskip("confluent_kafka.admin")
    c = cluster_factory(zk_connect, n=1, config=AUTH)
    port = c.brokers[1].port
    boot = f"127.0.0.1:{port}"
    admin = cka.AdminClient({"bootstrap.servers": boot})
    admin.create_topics([cka.NewTopic("t", 1, 1)])["t"].result(15)
    prod = ck.Producer({"bootstrap.servers": boot})
    for i in range(5):
        prod.produce("t", b"v%d" % i)
    assert prod.flush(15) == 0

    with socket.create_connection(("127.0.0.1", port), timeout=5) as real, \
            socket.create_connection(("127.0.0.1", port), timeout=5) as evil:
        # a consumer reads the records
        err, _, parts = fetch(real, 1, "consumer", fetch_v11(-1, "t", 0, 0))
        assert err == 0 and parts[("t", 0)][0] == 0 and len(parts[("t", 0)][1]) > 0
        # an authorized fetcher (super user) with a ReplicaId outside the replica set [1]: opens a
        # session, but gets empty records and no error (Kafka 2.7's updateFollowerFetchState)
        err, sid, outside = fetch(real, 2, "follower", fetch_v11(7, "t", 0, 0, session_id=0, epoch=0))
        assert err == 0 and sid != 0
        # a spoofer claiming ReplicaId 7 without CLUSTER_ACTION: denied, and the real one's session lives
        err, _, parts = fetch(evil, 3, "User:mallory", fetch_v11(7, "t", 0, 0, session_id=0, epoch=0))
        assert parts[("t", 0)][0] == 29, parts
        err, sid2, _ = fetch(real, 4, "follower", fetch_v11(7, "t", 0, 0, session_id=sid, epoch=1,
                                                            with_partition=False))
        assert err == 0 and sid2 == sid, f"session {sid}: error {err}"
        assert outside[("t", 0)] == (0, b""), outside


# ---- 3. per-topic metrics only for topics that exist ----

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def parse_prometheus(text):
    """[(name, {label: value})]; every line must be a comment or a well-formed sample."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        labels = m.group(2) or ""
        assert LABEL.sub("", labels).replace(",", "") == "", f"bad labels: {line!r}"
        float(m.group(3))
        out.append((m.group(1), dict(LABEL.findall(labels))))
    return out


def topic_labels(samples):
    return {ls["topic"] for _, ls in samples if "topic" in ls}


def test_metrics_only_for_existing_topics(cluster_factory, zk_connect):
    ck = pytest.importorskip("confluent_kafka")
    cka = pytest.importorskip("confluent_kafka.admin")
    c = cluster_factory(zk_connect, n=1, start=False)
    b = c.brokers[1]
    mport = H.free_port()
    b.config.update({"gregor.metrics.listener": f"http://127.0.0.1:{mport}", "auto.create.topics.enable": "false"})
    c.start()
    boot = f"127.0.0.1:{b.port}"
    admin = cka.AdminClient({"bootstrap.servers": boot})
    admin.create_topics([cka.NewTopic("t", 1, 1)])["t"].result(15)
    prod = ck.Producer({"bootstrap.servers": boot})
    prod.produce("t", b"x")
    assert prod.flush(15) == 0
    before = parse_prometheus(scrape(mport))

    names = ["ghost-%s" % os.urandom(6).hex() for _ in range(200)] + ['evil"\n}x 1\n', "a,topic=b", "t\\"]
    batch = record_batch([b"v"])
    mid = None
    with socket.create_connection(("127.0.0.1", b.port), timeout=5) as s:
        for i, name in enumerate(names):
            s.sendall(produce_v3(2 * i + 10, name, 0, batch))
            assert recv_frame(s) is not None
            s.sendall(frame(1, 11, 2 * i + 11, fetch_v11(-1, name, 0, 0)))
            assert recv_frame(s) is not None
            if i == 2:  # the Produce and Fetch request series exist since the first name
                mid = parse_prometheus(scrape(mport))
        # an existing topic still gets its meters
        s.sendall(frame(1, 11, 9, fetch_v11(-1, "t", 0, 0)))
        assert recv_frame(s) is not None

    after = parse_prometheus(scrape(mport))
    assert topic_labels(after) <= topic_labels(before) | {"t"}, topic_labels(after) - topic_labels(before)
    assert "t" in topic_labels(after)
    # The first Fetch and Produce series of the broker appeared with the first made-up names
    # (request metrics with all their quantiles); the other 200 names add none: only "t"'s
    # fetch meters come after them. One series per made-up name would be over 200.
    assert len(after) - len(mid) < 20, (len(before), len(mid), len(after))
