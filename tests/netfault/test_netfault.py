"""Self-test of tests/chaos/netfault.py (the fault-injecting proxy) against an echo server and a
child process standing in for a broker: forwarding, naming the source process, cut, blackhole,
delay and heal, one link at a time. No gregord, a few seconds."""

import socket
import subprocess
import sys
import threading
import time

import pytest

import netfault


@pytest.fixture
def echo():
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    stop = threading.Event()

    def serve(c):
        with c:
            while True:
                try:
                    d = c.recv(65536)
                except OSError:
                    return
                if not d:
                    return
                c.sendall(d)

    def loop():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            threading.Thread(target=serve, args=(c,), daemon=True).start()
    t = threading.Thread(target=loop, daemon=True)
    t.start()
    yield srv.getsockname()
    stop.set()
    t.join(2)
    srv.close()


@pytest.fixture
def net():
    n = netfault.Net()
    yield n
    n.close()


def roundtrip(addr, payload=b"ping", timeout=2.0):
    """What comes back for payload (b"" when the connection is closed or reset, which a cut link
    may do while connect() is still returning)."""
    try:
        s = socket.create_connection(addr, timeout=timeout)
    except ConnectionError:
        return b""
    with s:
        try:
            s.sendall(payload)
            got = b""
            while len(got) < len(payload):
                d = s.recv(65536)
                if not d:
                    break
                got += d
        except ConnectionError:
            return b""
        return got


def test_forwarding_and_large_payload(net, echo):
    p = net.proxy("srv", ("127.0.0.2", 0), echo)
    assert p.host == "127.0.0.2"
    assert roundtrip(p.addr) == b"ping"
    big = bytes(range(256)) * 8192  # 2 MiB: back-pressure past HIGH_WATER
    assert roundtrip(p.addr, big, timeout=10) == big


def test_cut_refuses_and_heal_restores(net, echo):
    p = net.proxy("srv", ("127.0.0.1", 0), echo, groups=("zk",))
    live = socket.create_connection(p.addr, timeout=2)
    live.sendall(b"a")
    assert live.recv(1) == b"a"
    net.cut("client", "zk")
    # the open connection is reset, new ones are closed at once
    with pytest.raises((ConnectionError, OSError, AssertionError)):
        live.settimeout(2)
        d = live.recv(1)
        assert d, "EOF"
        raise AssertionError("still open")
    live.close()
    assert roundtrip(p.addr) == b""
    # a rule on another link leaves this one alone
    net.heal("client", "zk")
    net.cut("broker-9", "zk")
    assert roundtrip(p.addr) == b"ping"


def test_blackhole_stalls_then_heals(net, echo):
    p = net.proxy("srv", ("127.0.0.1", 0), echo)
    s = socket.create_connection(p.addr, timeout=2)
    net.blackhole("client", "srv")
    time.sleep(0.1)
    s.sendall(b"held")
    s.settimeout(0.5)
    with pytest.raises(socket.timeout):
        s.recv(4)
    net.heal()
    s.settimeout(2)
    got = b""
    while len(got) < 4:
        got += s.recv(4)
    assert got == b"held"
    s.close()


def test_delay(net, echo):
    p = net.proxy("srv", ("127.0.0.1", 0), echo)
    t0 = time.monotonic()
    roundtrip(p.addr)
    base = time.monotonic() - t0
    net.delay("client", "srv", 150)
    t0 = time.monotonic()
    assert roundtrip(p.addr) == b"ping"
    took = time.monotonic() - t0
    assert took >= 0.29, f"round trip {took:.3f}s with 150 ms each way (base {base:.3f}s)"


CHILD = r"""
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection((host, port), timeout=5)
s.sendall(b"x")
ok = s.recv(1) == b"x"
print("ok" if ok else "no", flush=True)
time.sleep(0.2)
"""


def test_source_process_is_named(net, echo):
    """A connection from a process listed in net.pids gets its node name; rules on that name hit
    it and not the test process's own connections."""
    p = net.proxy("zk1", ("127.0.0.1", 0), echo, groups=("zk",))
    child = None

    def pids():
        return {child.pid: "broker-7"} if child is not None else {}
    net.pids = pids
    net.cut("broker-7", "zk")
    child = subprocess.Popen([sys.executable, "-c", CHILD, p.host, str(p.port)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = child.communicate(timeout=10)
    assert "ok" not in out, f"broker-7 got through a cut: {out} {err}"
    assert roundtrip(p.addr) == b"ping"  # the test process is "client": unaffected
    net.heal()
    child = subprocess.Popen([sys.executable, "-c", CHILD, p.host, str(p.port)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = child.communicate(timeout=10)
    assert out.strip() == "ok", err
