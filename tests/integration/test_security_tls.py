"""Security over the wire (docs/SECURITY.md): TLS, SASL/PLAIN, SASL/SCRAM, SCRAM credentials in
ZooKeeper, on a 3-broker cluster whose inter-broker traffic is itself SASL_SSL + SCRAM-SHA-512,
with kcat, confluent-kafka and kafka-python; negative cases; hostile input on the secure ports.
Certificates are generated at test time (security_pki.py)."""

import json
import os
import socket
import ssl
import struct
import subprocess
import time

import pytest

import gregor_harness as H
import security_pki as P
from kafka_wire import frame, recv_frame

CK = pytest.importorskip("confluent_kafka")
CKA = pytest.importorskip("confluent_kafka.admin")
KP = pytest.importorskip("kafka")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return P.make_pki(str(tmp_path_factory.mktemp("pki")))


def listener_ports(with_plaintext=False):
    ports = {"INTERNAL": H.free_port(), "SSL": H.free_port(), "SASL_PLAINTEXT": H.free_port()}
    if with_plaintext:
        ports["PLAINTEXT"] = H.free_port()
    return ports


def secure_config(pki, ports, **extra):
    cfg = P.broker_security_config(pki, ports)
    cfg.update(extra)
    return cfg


def kcat(args, input_data=None, timeout=30):
    return subprocess.run(["kcat", *args], input=input_data, capture_output=True, timeout=timeout)


def kcat_ssl(pki, port, cert="client"):
    a = ["-b", f"127.0.0.1:{port}", "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki['ca']}"]
    if cert:
        a += ["-X", f"ssl.certificate.location={pki[cert + '_cert']}", "-X", f"ssl.key.location={pki[cert + '_key']}"]
    return a


def kcat_scram(pki, port, user, password, mech="SCRAM-SHA-512"):
    return ["-b", f"127.0.0.1:{port}", "-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={pki['ca']}",
            "-X", f"sasl.mechanism={mech}", "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]


def ck_scram(pki, port, user, password, **kw):
    c = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL", "ssl.ca.location": pki["ca"],
         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password}
    c.update(kw)
    return c


def command_config(tmp_path, pki, name="admin.properties"):
    path = os.path.join(str(tmp_path), name)
    with open(path, "w") as f:
        f.write("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                f"ssl.truststore.type=PEM\nssl.truststore.location={pki['ca']}\n"
                'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                'username="admin" password="admin-secret";\n')
    return path


def gregorctl(*args, timeout=60):
    return subprocess.run([H.GREGORCTL, *args], capture_output=True, text=True, timeout=timeout)


# ---- raw wire helpers (hostile input) ----

def closed_by_peer(s, timeout=5.0):
    """True if the peer closes (EOF or reset) within timeout, reading and dropping any bytes."""
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


def tls_socket(pki, port):
    ctx = ssl.create_default_context(cafile=pki["ca"])
    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5), server_hostname="127.0.0.1")


def handshake_v1(s, mech=b"SCRAM-SHA-512"):
    s.sendall(frame(17, 1, 1, struct.pack(">h", len(mech)) + mech))
    r = recv_frame(s)
    assert r is not None
    return struct.unpack(">h", r[4:6])[0]


def authenticate_v1(s, token, corr=2):
    s.sendall(frame(36, 1, corr, struct.pack(">i", len(token)) + token))
    return recv_frame(s)


# ---- the secure cluster ----

def test_secure_cluster_clients_replication_failover(cluster_factory, zk_connect, zk, pki, tmp_path):
    P.write_scram_user(zk, "admin", {"SCRAM-SHA-512": "admin-secret"})
    c = cluster_factory(zk_connect, n=3, start=False)
    ports = {}
    for b in c.brokers.values():
        ports[b.id] = listener_ports()
        b.config = secure_config(pki, ports[b.id], **{"default.replication.factor": "3",
                                                      "offsets.topic.replication.factor": "3",
                                                      "min.insync.replicas": "2"})
    c.start(timeout=60)

    # registration as Kafka writes it
    reg, _ = c.registration(1)
    p1 = ports[1]
    assert f"INTERNAL://127.0.0.1:{p1['INTERNAL']}" in reg["endpoints"]
    assert reg["listener_security_protocol_map"] == {"INTERNAL": "SASL_SSL", "SSL": "SSL",
                                                     "SASL_PLAINTEXT": "SASL_PLAINTEXT"}

    # SCRAM credentials through the API (gregorctl over SASL_SSL as admin), in Kafka's format
    cc = command_config(tmp_path, pki)
    boot = f"127.0.0.1:{p1['INTERNAL']}"
    r = gregorctl("--bootstrap-server", boot, "--command-config", cc, "user-scram", "--alter", "--entity-name", "bob",
                  "--add-config", "SCRAM-SHA-512=[iterations=8192,password=bob-secret]")
    assert r.returncode == 0, r.stderr
    data, _ = zk.get("/config/users/bob")
    cred = json.loads(data)["config"]["SCRAM-SHA-512"]
    assert cred.startswith("salt=") and cred.endswith(",iterations=8192")
    r = gregorctl("--bootstrap-server", boot, "--command-config", cc, "user-scram", "--describe", "--entity-name", "bob")
    assert r.returncode == 0 and "SCRAM-SHA-512=iterations=8192" in r.stdout, r.stdout + r.stderr

    # administer over SSL with a client certificate
    admin = CKA.AdminClient({"bootstrap.servers": f"127.0.0.1:{ports[2]['SSL']}", "security.protocol": "SSL",
                                  "ssl.ca.location": pki["ca"], "ssl.certificate.location": pki["client_cert"],
                                  "ssl.key.location": pki["client_key"]})
    for f in admin.create_topics([CKA.NewTopic("secure", 2, 3)], operation_timeout=30).values():
        f.result(timeout=30)

    # produce over SASL_SSL + SCRAM-SHA-512 as bob (credential made through the API)
    prod = CK.Producer(ck_scram(pki, p1["INTERNAL"], "bob", "bob-secret", acks="all"))
    for i in range(50):
        prod.produce("secure", f"m{i}".encode())
    assert prod.flush(30) == 0

    # consume in a group over SASL_PLAINTEXT + PLAIN with kafka-python (SaslHandshake v0 raw tokens)
    cons = KP.KafkaConsumer("secure", bootstrap_servers=f"127.0.0.1:{ports[3]['SASL_PLAINTEXT']}",
                            security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                            sasl_plain_username="carol", sasl_plain_password="carol-secret", group_id="g-sec",
                            auto_offset_reset="earliest", consumer_timeout_ms=10000)
    got = set()
    end = time.time() + 40
    while len(got) < 50 and time.time() < end:
        for batch in cons.poll(timeout_ms=1000).values():
            got.update(m.value for m in batch)
    cons.commit()
    cons.close()
    assert got == {f"m{i}".encode() for i in range(50)}

    # the other clients on the other listeners: kafka-python admin over SASL_SSL + SCRAM-SHA-512,
    # kcat producing over SASL_PLAINTEXT + PLAIN, a confluent-kafka consumer group over SSL
    kadmin = KP.KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{ports[2]['INTERNAL']}", security_protocol="SASL_SSL",
                                 sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob",
                                 sasl_plain_password="bob-secret", ssl_cafile=pki["ca"])
    kadmin.create_topics([KP.admin.NewTopic("secure2", 1, 3)])
    assert "secure2" in kadmin.list_topics()
    kadmin.close()
    r = kcat(["-b", f"127.0.0.1:{ports[1]['SASL_PLAINTEXT']}", "-X", "security.protocol=SASL_PLAINTEXT", "-X",
              "sasl.mechanism=PLAIN", "-X", "sasl.username=carol", "-X", "sasl.password=carol-secret", "-P",
              "-t", "secure2"], input_data=b"k1\nk2\nk3\n")
    assert r.returncode == 0, r.stderr
    ccons = CK.Consumer({"bootstrap.servers": f"127.0.0.1:{ports[3]['SSL']}", "security.protocol": "SSL",
                         "ssl.ca.location": pki["ca"], "ssl.certificate.location": pki["client_cert"],
                         "ssl.key.location": pki["client_key"], "group.id": "g-ssl", "auto.offset.reset": "earliest"})
    ccons.subscribe(["secure2"])
    seen = []
    end = time.time() + 30
    while len(seen) < 3 and time.time() < end:
        m = ccons.poll(0.5)
        if m is not None and m.error() is None:
            seen.append(m.value())
    ccons.close()
    assert sorted(seen) == [b"k1", b"k2", b"k3"]

    # replication over the SASL_SSL inter-broker listener: every replica back in the ISR
    def isr_full():
        for p in range(2):
            d, _ = zk.get(f"/brokers/topics/secure/partitions/{p}/state")
            if len(json.loads(d)["isr"]) != 3:
                return False
        return True
    H.wait_for(isr_full, 30, "full ISR on every partition of 'secure'")

    # controller fail-over; the new controller reaches the others over SASL_SSL too
    old = c.controller()
    old_id = old["brokerid"]
    c[old_id].kill()
    new = c.wait_new_controller(old["_stat"].czxid, timeout=40)
    survivor = new["brokerid"]
    assert survivor != old_id
    prod = CK.Producer(ck_scram(pki, ports[survivor]["INTERNAL"], "bob", "bob-secret", acks="all"))
    for i in range(50, 70):
        prod.produce("secure", f"m{i}".encode())
    assert prod.flush(40) == 0
    r = kcat(kcat_ssl(pki, ports[survivor]["SSL"]) + ["-C", "-t", "secure", "-e", "-o", "beginning", "-q"], timeout=60)
    assert r.returncode == 0, r.stderr
    assert set(r.stdout.decode().split()) == {f"m{i}" for i in range(70)}
    # the killed broker comes back, catches up through its fetchers and rejoins the ISR: the
    # leaders' AlterIsr goes to the controller over SASL_SSL too
    c[old_id].start()
    H.wait_for(isr_full, 40, "the restarted broker back in every ISR of 'secure'")
    for b in c.running():
        log = b.log(whole=True)
        assert "Failed authentication" not in log, f"broker {b.id} rejected an inter-broker login"
        # A peer that spoke something other than TLS fails the handshake with a protocol error
        # ("wrong version number", "packet length too long"). A client that closed its socket
        # in mid-handshake (kcat exiting while its connection to another broker was still being
        # set up) gives "unexpected eof": not a plaintext peer.
        bad = [ln for ln in log.splitlines() if "TLS handshake failed" in ln and "unexpected eof" not in ln]
        assert not bad, f"broker {b.id}: a peer connected without TLS: {bad[:3]}"
    # controlled shutdown of the other survivor goes to the controller over SASL_SSL as well
    other = [b for b in c.running() if b.id != survivor][0]
    other.stop()
    assert "Controlled shutdown succeeded" in other.log(), other.log_tail(30)


# ---- one broker for the negative and hostile cases ----

@pytest.fixture(scope="module")
def single(zk_server, pki, tmp_path_factory):
    chroot = f"/gregor-security-single-{os.getpid()}-{int(time.time())}"
    root = H.kazoo_client(zk_server.hosts)
    root.ensure_path(chroot)
    H.close_kazoo(root)
    c = H.Cluster(str(tmp_path_factory.mktemp("single")), zk_server.hosts + chroot, n=1)
    P.write_scram_user(c.zk, "admin", {"SCRAM-SHA-512": "admin-secret"})
    P.write_scram_user(c.zk, "alice", {"SCRAM-SHA-512": "alice-secret", "SCRAM-SHA-256": "alice-secret"})
    ports = listener_ports(with_plaintext=True)
    cfg = secure_config(pki, ports, **{"listener.name.ssl.ssl.client.auth": "required"})
    cfg["listener.security.protocol.map"] += ",PLAINTEXT:PLAINTEXT"
    c.brokers[1].config = cfg
    c.start(timeout=60)
    yield c, ports
    c.close()
    H.kill_leftovers()


def assert_alive(pki, ports):
    r = kcat(kcat_scram(pki, ports["INTERNAL"], "alice", "alice-secret") + ["-L", "-m", "10"])
    assert r.returncode == 0 and b"1 brokers" in r.stdout, r.stderr


def test_negative_authentication(single, pki):
    c, ports = single
    fails = [
        kcat_scram(pki, ports["INTERNAL"], "alice", "wrong-password"),                 # wrong password
        kcat_scram(pki, ports["INTERNAL"], "mallory", "whatever"),                     # unknown user
        kcat_scram(pki, ports["INTERNAL"], "alice", "wrong", mech="SCRAM-SHA-256"),
        kcat_ssl(pki, ports["SSL"], cert=None),                                       # client cert required
        kcat_ssl(pki, ports["SSL"], cert="rogue"),                                    # untrusted certificate
        kcat_ssl(pki, ports["SSL"], cert="expired"),                                  # expired certificate
    ]
    for args in fails:
        r = kcat(args + ["-L", "-m", "4"])
        assert r.returncode != 0, f"{args} should fail: {r.stdout!r}"
    r = kcat(kcat_ssl(pki, ports["SSL"]) + ["-L", "-m", "10"])
    assert r.returncode == 0, r.stderr
    with pytest.raises(Exception):
        p = KP.KafkaProducer(bootstrap_servers=f"127.0.0.1:{ports['SASL_PLAINTEXT']}",
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_plain_username="carol", sasl_plain_password="nope", request_timeout_ms=3000,
                             api_version_auto_timeout_ms=3000, max_block_ms=3000)
        p.send("neg", b"x").get(5)
    log = c[1].log()
    assert "Failed authentication with" in log and "TLS handshake failed" in log
    # SASL_AUTHENTICATION_FAILED (58), then the close after connection.failed.authentication.delay.ms
    s = socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"]))
    assert handshake_v1(s, b"PLAIN") == 0
    t0 = time.time()
    r = authenticate_v1(s, b"\x00carol\x00bad")
    assert struct.unpack(">h", r[4:6])[0] == 58
    assert closed_by_peer(s) and time.time() - t0 >= 0.09
    s.close()
    assert_alive(pki, ports)


def test_scram_admin_errors(single, pki, tmp_path):
    c, ports = single
    cc = command_config(tmp_path, pki)
    boot = f"127.0.0.1:{ports['INTERNAL']}"
    r = gregorctl("--bootstrap-server", boot, "--command-config", cc, "user-scram", "--alter", "--entity-name", "dave",
                  "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]")
    assert r.returncode == 1 and "UNACCEPTABLE_CREDENTIAL" in r.stderr, r.stderr
    r = gregorctl("--bootstrap-server", boot, "--command-config", cc, "user-scram", "--describe", "--entity-name", "dave")
    assert r.returncode == 1 and "RESOURCE_NOT_FOUND" in r.stderr, r.stderr
    r = gregorctl("--bootstrap-server", boot, "--command-config", cc, "user-scram", "--alter", "--entity-name", "dave",
                  "--add-config", "SCRAM-SHA-256=[password=dave-secret]")
    assert r.returncode == 0, r.stderr
    assert kcat(kcat_scram(pki, ports["INTERNAL"], "dave", "dave-secret", mech="SCRAM-SHA-256") + ["-L"]).returncode == 0
    r = gregorctl("--bootstrap-server", boot, "--command-config", cc, "user-scram", "--alter", "--entity-name", "dave",
                  "--delete-config", "SCRAM-SHA-256")
    assert r.returncode == 0, r.stderr
    r = kcat(kcat_scram(pki, ports["INTERNAL"], "dave", "dave-secret", mech="SCRAM-SHA-256") + ["-L", "-m", "4"])
    assert r.returncode != 0
    # a wrong admin password in --command-config fails cleanly
    bad = os.path.join(str(tmp_path), "bad.properties")
    open(bad, "w").write(open(cc).read().replace("admin-secret", "nope"))
    r = gregorctl("--bootstrap-server", boot, "--command-config", bad, "--timeout-ms", "3000", "user-scram",
                  "--describe")
    assert r.returncode != 0


def test_hostile_input(single, pki):
    c, ports = single
    # a plaintext Kafka client on the TLS port
    s = socket.create_connection(("127.0.0.1", ports["SSL"]))
    s.sendall(frame(18, 0, 1, b""))
    assert closed_by_peer(s)
    s.close()
    # TLS on the plaintext port
    raw = socket.create_connection(("127.0.0.1", ports["PLAINTEXT"]))
    with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
        ssl.create_default_context(cafile=pki["ca"]).wrap_socket(raw, server_hostname="127.0.0.1")
    raw.close()
    # garbage on the TLS ports
    for port in (ports["SSL"], ports["INTERNAL"]):
        s = socket.create_connection(("127.0.0.1", port))
        try:
            s.sendall(os.urandom(64 * 1024))
        except OSError:
            pass
        assert closed_by_peer(s)
        s.close()
    # a TLS handshake cut midway (a stalled one stays open meanwhile and harms no one)
    hello = bytes.fromhex("16030100c4010000c00303") + os.urandom(32)
    stalled = socket.create_connection(("127.0.0.1", ports["INTERNAL"]))
    stalled.sendall(hello[:20])
    cut = socket.create_connection(("127.0.0.1", ports["INTERNAL"]))
    cut.sendall(hello)
    cut.close()
    assert_alive(pki, ports)
    stalled.close()
    # requests before SASL completes are refused by closing the connection
    s = tls_socket(pki, ports["INTERNAL"])
    s.sendall(frame(3, 1, 1, struct.pack(">i", -1)))
    assert closed_by_peer(s)
    s.close()
    # malformed SCRAM messages: SASL_AUTHENTICATION_FAILED and close
    for token in (b"\xff\xfe garbage", b"n,,n=alice", b"p=tls-unique,,n=alice,r=x", b"n,,n=a" + b"x" * 100000):
        s = tls_socket(pki, ports["INTERNAL"])
        assert handshake_v1(s) == 0
        r = authenticate_v1(s, token)
        assert r is not None and struct.unpack(">h", r[4:6])[0] == 58, token[:20]
        assert closed_by_peer(s)
        s.close()
    # a SCRAM message above the pre-authentication frame limit: closed without reading it all
    s = tls_socket(pki, ports["INTERNAL"])
    assert handshake_v1(s) == 0
    try:
        s.sendall(frame(36, 1, 2, struct.pack(">i", 600000) + b"y" * 600000))
    except OSError:
        pass
    assert closed_by_peer(s)
    s.close()
    # SaslHandshake v0 + a malformed raw PLAIN token; an unknown mechanism
    s = socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"]))
    s.sendall(frame(17, 0, 1, struct.pack(">h", 5) + b"PLAIN"))
    assert struct.unpack(">h", recv_frame(s)[4:6])[0] == 0
    s.sendall(struct.pack(">i", 3) + b"abc")
    assert closed_by_peer(s)
    s.close()
    s = socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"]))
    assert handshake_v1(s, b"GSSAPI") == 33
    assert closed_by_peer(s)
    s.close()
    # SASL APIs on a listener without SASL: ILLEGAL_SASL_STATE (34), the connection stays usable
    s = socket.create_connection(("127.0.0.1", ports["PLAINTEXT"]))
    assert handshake_v1(s, b"PLAIN") == 34
    r = authenticate_v1(s, b"\x00a\x00b")
    assert struct.unpack(">h", r[4:6])[0] == 34
    s.sendall(frame(18, 0, 3, b""))
    assert recv_frame(s) is not None
    s.close()
    # each closed only its own connection
    assert c[1].running()
    assert_alive(pki, ports)
    r = kcat(kcat_ssl(pki, ports["SSL"]) + ["-L", "-m", "10"])
    assert r.returncode == 0, r.stderr
    # memory stayed bounded (the 600 KB token was refused before it was read)
    rss = int([ln for ln in open(f"/proc/{c[1].pid}/status") if ln.startswith("VmRSS:")][0].split()[1])
    assert rss < 200 * 1024, f"broker RSS {rss} KiB after hostile input"


# ---- the principal of a certificate: Java's DN form and ssl.principal.mapping.rules ----
# (issue 25 item 12)

def _metadata_error(s, topic, corr=5):
    """Metadata v1 for `topic` on socket s: the topic's error code, or None if the broker closed."""
    t = topic.encode()
    s.sendall(frame(3, 1, corr, struct.pack(">ih", 1, len(t)) + t))
    r = recv_frame(s, timeout=10)
    if r is None:
        return None
    p = 4
    (nb,) = struct.unpack(">i", r[p:p + 4])
    p += 4
    for _ in range(nb):
        p += 4
        (hl,) = struct.unpack(">h", r[p:p + 2])
        p += 2 + hl + 4
        (rl,) = struct.unpack(">h", r[p:p + 2])
        p += 2 + max(rl, 0)
    p += 4  # controller id
    p += 4  # topic count (1)
    return struct.unpack(">h", r[p:p + 2])[0]


def _tls_client(pki, port, cert):
    ctx = ssl.create_default_context(cafile=pki["ca"])
    ctx.load_cert_chain(pki[cert + "_cert"], pki[cert + "_key"])
    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="127.0.0.1")


def _principal_broker(cluster_factory, zk_connect, pki, **extra):
    c = cluster_factory(zk_connect, n=1, start=False)
    b = c.brokers[1]
    ports = {"PLAINTEXT": b.port, "SSL": H.free_port(), "MAPPED": H.free_port()}
    ls = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items())
    b.config.update({
        "listeners": ls, "advertised.listeners": ls, "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MAPPED:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["broker_keystore"],
        "ssl.key.password": pki["key_password"], "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki["ca"], "ssl.client.auth": "required",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:ANONYMOUS;User:{pki['svc_dn']}",
        "auto.create.topics.enable": "false",
        # service users by their CN, upper-cased; nobody else gets a principal on this listener
        "listener.name.mapped.ssl.principal.mapping.rules": r"RULE:^.*CN=([a-z-]+?),OU=ServiceUsers,.*$/$1/U",
    })
    b.config.update(extra)
    return c, b, ports


def test_certificate_principal_java_dn_and_mapping_rules(cluster_factory, zk_connect, pki):
    c, b, ports = _principal_broker(cluster_factory, zk_connect, pki)
    c.zk.create("/kafka-acl/Topic/t", json.dumps({"version": 1, "acls": [
        {"principal": "User:SVC-ORDERS", "permissionType": "Allow", "operation": "Describe", "host": "*"}]}).encode(),
        makepath=True)
    c.start()
    # DEFAULT rules: the principal is Java's X500Principal.getName() of the subject, so a
    # super.users entry written for Kafka matches (OIDs with #hex DER, escaped comma)
    with _tls_client(pki, ports["SSL"], "svc") as s:
        assert _metadata_error(s, "t") == 3, "the svc certificate's Java DN is not the super user"
    with _tls_client(pki, ports["SSL"], "client") as s:
        assert _metadata_error(s, "t") == 29  # User:O=Test,CN=client1: no ACL
    # the mapping rules of listener MAPPED: the svc certificate is User:SVC-ORDERS (its ACL)
    with _tls_client(pki, ports["MAPPED"], "svc") as s:
        assert _metadata_error(s, "t") == 3, "User:SVC-ORDERS (mapped) not allowed"
    # client1 matches no rule: no principal, the connection is closed (Kafka's NoMatchingRule)
    try:
        s = _tls_client(pki, ports["MAPPED"], "client")
        assert _metadata_error(s, "t") is None, "a certificate no rule applies to was served"
        s.close()
    except (ssl.SSLError, ConnectionError):
        pass
    assert "No rules apply to O=Test,CN=client1" in b.log()  # -subj /CN=client1/O=Test, reversed
    assert b.running()


def test_mapping_rule_over_match_limit_refuses_not_falls_through(cluster_factory, zk_connect, pki):
    """A rule that backtracks catastrophically on a DN exceeds PCRE2's match limit: the connection
    is closed, not given the next rule's name (DEFAULT here, the DN) as if the rule had not
    matched, and the network thread is free again at once."""
    c, b, ports = _principal_broker(cluster_factory, zk_connect, pki, **{
        "listener.name.mapped.ssl.principal.mapping.rules": r"RULE:^(.|.)*(.|.)*(.|.)*[!?]$/evil/,DEFAULT"})
    c.start()
    try:
        s = _tls_client(pki, ports["MAPPED"], "client")
        assert _metadata_error(s, "t") is None, "served with the next rule's name after a failed match"
        s.close()
    except (ssl.SSLError, ConnectionError):
        pass
    assert "cannot match a rule against O=Test,CN=client1: match limit exceeded" in b.log(), b.log_tail()
    with _tls_client(pki, ports["SSL"], "svc") as s:  # the broker still serves
        assert _metadata_error(s, "t") == 3
    assert b.running()


@pytest.mark.parametrize("key,value,why", [
    ("ssl.principal.mapping.rules", "RULE:^CN=(.*)$/$1/X", "Invalid rule"),
    ("ssl.principal.mapping.rules", "RULE:^CN=((.*$/$1/", "Invalid regular expression"),
    ("principal.builder.class", "com.example.MyPrincipalBuilder", "principal.builder.class"),
    ("listener.name.mapped.principal.builder.class", "com.example.MyPrincipalBuilder", "principal.builder.class"),
    ("sasl.server.callback.handler.class", "com.example.Handler", "sasl.server.callback.handler.class"),
    ("listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class", "com.example.Handler",
     "sasl.server.callback.handler.class"),
])
def test_principal_settings_refused_at_start_up(cluster_factory, zk_connect, pki, key, value, why):
    c, b, ports = _principal_broker(cluster_factory, zk_connect, pki, **{key: value})
    b.start()
    assert b.wait_exit(timeout=20) != 0, f"{key}={value} accepted"
    assert why in b.log(), b.log_tail()


def test_default_principal_builder_class_accepted(cluster_factory, zk_connect, pki):
    c, b, ports = _principal_broker(cluster_factory, zk_connect, pki, **{
        "principal.builder.class": "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"})
    c.start()
    with _tls_client(pki, ports["SSL"], "svc") as s:
        assert _metadata_error(s, "t") == 3


def test_no_session_tickets(cluster_factory, zk_connect, pki):
    """TLS 1.2 and 1.3: the broker issues no session ticket (docs/SECURITY.md), so no client can
    resume a session past a certificate's revocation or the listener's rules."""
    c, b, ports = _principal_broker(cluster_factory, zk_connect, pki)
    c.start()
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        ctx = ssl.create_default_context(cafile=pki["ca"])
        ctx.load_cert_chain(pki["client_cert"], pki["client_key"])
        ctx.minimum_version = ctx.maximum_version = version
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", ports["SSL"]), timeout=10),
                             server_hostname="127.0.0.1") as s:
            s.sendall(frame(18, 0, 9, b""))  # ApiVersions: TLS 1.3 tickets come after the handshake
            assert recv_frame(s) is not None
            assert s.version() == ("TLSv1.2" if version == ssl.TLSVersion.TLSv1_2 else "TLSv1.3")
            assert not s.session.has_ticket, f"{s.version()}: a session ticket was issued"
