"""Process-level test harness for Gregor: private ZooKeeper servers, gregord clusters, znode reads.

Runs under Debian's /usr/bin/python3 with its pytest and kazoo. Used by tests/integration (through
conftest.py fixtures), tests/chaos and bench/.

Main pieces
  free_port()                 a TCP port on 127.0.0.1 that was free a moment ago
  wait_for(cond, timeout, what)  polls cond() until truthy; raises AssertionError naming `what`
  ZkServer(dir, port)         a ZooKeeper started/stopped through scripts/zk.sh
  ZkEnsemble(dir, n)          an n-member ZooKeeper ensemble (scripts/zk.sh start-ensemble)
  Cluster(workdir, zk_connect, n)  N gregord processes with generated configs, one log file each
  Broker                      one gregord process: start/stop/kill/pause/resume, log, session, metrics
  kazoo_client(hosts)         a started KazooClient (hosts may carry a /chroot)
  expire_session(zk_hosts, sid, passwd)  closes someone else's ZooKeeper session from outside

Every gregord process the harness starts is remembered in LIVE_PROCS so a session-end hook can
kill leftovers.

Sanitized runs (GREGOR_SANITIZED=1, with GREGOR_BUILD pointing at an ASan+UBSan build; the asan
stage of scripts/test-all.sh sets both): Cluster.close() stops the brokers with SIGTERM instead of
SIGKILL, so LeakSanitizer checks each process at exit, and then fails the test if any broker log
holds a sanitizer report (SANITIZER_RE) or a broker exited with a sanitizer's exit code.
GREGORCTL then names a wrapper that makes gregorctl write its reports to files, which conftest
checks after every test.
"""

import json
import logging
import os
import re
import signal
import socket
import struct
import subprocess
import time
import warnings
import weakref

from kazoo.client import KazooClient

logging.getLogger("kazoo").setLevel(logging.CRITICAL)

ROOT = os.environ.get("GREGOR_ROOT") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("GREGOR_BUILD") or os.path.join(ROOT, "build")
GREGORD = os.path.join(BUILD, "bin", "gregord")
GREGORCTL = os.path.join(BUILD, "bin", "gregorctl")
ZK_SH = os.path.join(ROOT, "scripts", "zk.sh")

SESSION_TIMEOUT_MS = 3000
SANITIZED = bool(os.environ.get("GREGOR_SANITIZED"))
# A report of AddressSanitizer, LeakSanitizer or UndefinedBehaviorSanitizer in a process's output.
SANITIZER_RE = re.compile(r"^(==\d+==ERROR: \w+Sanitizer|SUMMARY: \w+Sanitizer|.*: runtime error: |"
                          r"==\d+==\w+Sanitizer has encountered a fatal error)", re.M)
LIVE_PROCS = weakref.WeakSet()  # Broker objects whose process may be running


def _sanitized_gregorctl(real):
    """In a sanitized run, gregorctl (short-lived, its output captured and parsed by the tests)
    writes its sanitizer reports to files, through a wrapper that adds log_path; conftest fails
    the test that left one (tool_sanitizer_reports). Returns (path to run, report prefix)."""
    import atexit
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix="gregorctl-san-")
    atexit.register(shutil.rmtree, d, True)
    wrapper = os.path.join(d, "gregorctl")
    prefix = os.path.join(d, "report")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\n"
                f'ASAN_OPTIONS="${{ASAN_OPTIONS:+$ASAN_OPTIONS:}}log_path={prefix}" \\\n'
                f'UBSAN_OPTIONS="${{UBSAN_OPTIONS:+$UBSAN_OPTIONS:}}log_path={prefix}" \\\n'
                f'exec {real} "$@"\n')
    os.chmod(wrapper, 0o755)
    return wrapper, prefix


GREGORCTL_REPORTS = None  # in a sanitized run: the prefix of gregorctl's sanitizer report files
if SANITIZED:
    GREGORCTL, GREGORCTL_REPORTS = _sanitized_gregorctl(GREGORCTL)


def tool_sanitizer_reports():
    """The text of every sanitizer report gregorctl wrote since the last call (the files are
    removed); empty outside sanitized runs."""
    if not GREGORCTL_REPORTS:
        return ""
    d, base = os.path.split(GREGORCTL_REPORTS)
    out = []
    for name in sorted(os.listdir(d)):
        if name.startswith(base + "."):
            path = os.path.join(d, name)
            with open(path, errors="replace") as f:
                out.append(f"--- {name}\n{f.read()}")
            os.unlink(path)
    return "\n".join(out)

# "ready as controller, epoch N" (the epoch after the phrase; the line's [Controller ... epoch=E]
# prefix, if any, comes before it).
UPDATE_METADATA_APPLIED = "in response to UpdateMetadata request sent by controller"
READY_RE = re.compile(r"ready as controller\b(.*)$", re.I)
EPOCH_RE = re.compile(r"epoch\D{0,3}(\d+)", re.I)
LOAD_TIME_RE = re.compile(r"load(?:ing)?[ _]time\D{0,3}([\d.]+)\s*(ms|s|us)?", re.I)
ACTIVE_COUNT_KEY = "ActiveControllerCount"


_PORT_LOW, _PORT_HIGH = 20000, 32000  # below Linux's ephemeral range (32768-60999)


_handed_out = {}  # ports free_port() returned, oldest first (a dict keeps insertion order)


def _worker_port_range():
    """This process's share of [_PORT_LOW, _PORT_HIGH]: the whole range, or under pytest-xdist
    (PYTEST_XDIST_WORKER=gwN of PYTEST_XDIST_WORKER_COUNT) the N-th slice, so that parallel
    workers never pick the same port (a stopped broker keeps its port for its restart)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or count <= 1:
        return _PORT_LOW, _PORT_HIGH
    n = int(worker[2:]) % count
    width = (_PORT_HIGH - _PORT_LOW) // count
    return _PORT_LOW + n * width, _PORT_LOW + (n + 1) * width - 1


def free_port():
    """Returns a free port on 127.0.0.1 chosen below the kernel's ephemeral range, so that the
    outbound connections of brokers and clients (which get ephemeral ports) cannot take it
    between this check and the broker's bind."""
    import random
    low, high = _worker_port_range()
    for _ in range(200):
        port = random.randint(low, high)
        # A port handed out earlier may be unbound right now (its broker not started yet, or
        # stopped for a restart) and still belong to someone: a test that asks for several
        # ports before starting anything must get distinct ones.
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out[port] = None
        while len(_handed_out) > (high - low) // 2:  # forget the oldest half of the range
            del _handed_out[next(iter(_handed_out))]
        return port
    raise RuntimeError("no free port found")


def wait_for(cond, timeout=30.0, what="condition", interval=0.05):
    """Polls cond() every `interval` s until it returns something truthy, and returns that.
    Raises AssertionError("timed out after Ts waiting for WHAT; last value: V"). Other exceptions
    from cond() count as "not yet"; an AssertionError from cond() ends the wait at once."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = cond()
        except AssertionError:  # a hard failure (e.g. a broker died): no point polling on
            raise
        except Exception as e:  # a read racing a change: keep polling, remember why
            last = f"<{type(e).__name__}: {e}>"
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; "
                                 f"last value: {last!r}")
        time.sleep(interval)


def ruok(port, host="127.0.0.1"):
    try:
        with socket.create_connection((host, port), timeout=1) as s:
            s.sendall(b"ruok")
            return s.recv(16) == b"imok"
    except OSError:
        return False


def kazoo_client(hosts, timeout=15.0, **kw):
    """A started KazooClient on `hosts` ("127.0.0.1:PORT[/chroot]")."""
    zk = KazooClient(hosts=hosts, timeout=10.0, **kw)
    with warnings.catch_warnings():  # a chroot gregord has not created yet is fine
        warnings.filterwarnings("ignore", message="No chroot path exists")
        zk.start(timeout=timeout)
    return zk


def close_kazoo(zk):
    try:
        zk.stop()
    finally:
        zk.close()


def split_chroot(connect):
    """'127.0.0.1:2181/a/b' -> ('127.0.0.1:2181', '/a/b'); no chroot -> (connect, '')."""
    i = connect.find("/")
    return (connect, "") if i < 0 else (connect[:i], connect[i:])


def _recv_frame(sock):
    def exact(n):
        b = b""
        while len(b) < n:
            chunk = sock.recv(n - len(b))
            if not chunk:
                raise ConnectionError("ZooKeeper closed the connection")
            b += chunk
        return b
    n = struct.unpack(">i", exact(4))[0]
    return exact(n)


def close_session_wire(zk_hosts, session_id, password):
    """Attaches to session (id, password) with a raw ZooKeeper ConnectRequest and pipelines a
    closeSession right behind it, in one write. Returns True if the server closed the session,
    False if it was already gone (the server answered the connect with timeout 0).
    Raises ConnectionError if the server dropped us (e.g. the owner reconnected in between)."""
    hosts, _ = split_chroot(zk_hosts)
    host, port = hosts.split(",")[0].rsplit(":", 1)
    connect = struct.pack(">iqiqi", 0, 0, 30000, session_id, len(password)) + password + b"\0"
    close = struct.pack(">ii", 1, -11)
    with socket.create_connection((host, int(port)), timeout=10) as sk:
        sk.sendall(struct.pack(">i", len(connect)) + connect + struct.pack(">i", len(close)) + close)
        resp = _recv_frame(sk)
        _, timeout_ms, sid = struct.unpack_from(">iiq", resp)
        if timeout_ms <= 0:
            return False
        while True:
            xid, _, err = struct.unpack_from(">iqi", _recv_frame(sk))
            if xid == 1:
                if err != 0:
                    raise ConnectionError(f"closeSession failed with ZooKeeper error {err}")
                return True


def expire_session(zk_hosts, session_id, password, timeout=10.0):
    """Ends another client's ZooKeeper session from outside: attach to the same session id and
    password, then close it (the server expires the session and deletes its ephemerals; the
    original owner sees SESSION_EXPIRED on its next contact). Uses a raw pipelined
    connect+closeSession (a kazoo client attaching first and closing later races with the owner
    reconnecting, and the two keep stealing the session from each other)."""
    deadline = time.monotonic() + timeout
    attempts = 0
    while True:
        attempts += 1
        try:
            ok = close_session_wire(zk_hosts, session_id, password)
            # Gone on a retry: the earlier attempt's closeSession worked but its reply was lost
            # when the server dropped the connection.
            assert ok or attempts > 1, f"session {session_id:#x} had already expired"
            return
        except (ConnectionError, OSError, struct.error):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class ZkServer:
    """A private standalone ZooKeeper controlled through scripts/zk.sh (data kept in `dir` across
    stop/start, so sessions and znodes survive a restart)."""

    def __init__(self, dir, port=None, host="127.0.0.1"):
        """dir None: a server someone else runs (GREGOR_ZK); only hosts/alive() are meaningful."""
        self.dir = dir
        self.host = host
        self.port = port or free_port()

    @property
    def hosts(self):
        return f"{self.host}:{self.port}"

    def start(self):
        subprocess.run([ZK_SH, "start", self.dir, str(self.port)], check=True,
                       stdout=subprocess.DEVNULL)

    def stop(self):
        subprocess.run([ZK_SH, "stop", self.dir, str(self.port)], check=True,
                       stdout=subprocess.DEVNULL)

    def restart(self, down_seconds=0.0):
        self.stop()
        if down_seconds:
            time.sleep(down_seconds)  # a deliberate outage of this length
        self.start()

    def alive(self):
        return ruok(self.port, self.host)


class ZkEnsemble:
    """A private N-member ZooKeeper ensemble (quorum on loopback ports) through scripts/zk.sh
    start-ensemble: member i (1..n) serves clients on 127.0.0.1:base+i-1. Members can be stopped,
    killed and restarted one at a time; data is kept in dir/zkI across restarts."""

    def __init__(self, dir, n=3, base=None):
        self.dir = dir
        self.n = n
        self.base = base or self._free_base(n)

    @staticmethod
    def _free_base(n):
        import random
        for _ in range(200):
            base = random.randint(_PORT_LOW, _PORT_HIGH - 30) // 10 * 10
            ok = True
            for p in [base + i for i in range(n)] + [base + 10 + i for i in range(1, n + 1)] \
                    + [base + 20 + i for i in range(1, n + 1)]:
                with socket.socket() as s:
                    try:
                        s.bind(("127.0.0.1", p))
                    except OSError:
                        ok = False
                        break
            if ok:
                return base
        raise RuntimeError("no free port range for a ZooKeeper ensemble")

    def port(self, i):
        return self.base + i - 1

    @property
    def members(self):
        return list(range(1, self.n + 1))

    @property
    def hosts(self):
        return ",".join(f"127.0.0.1:{self.port(i)}" for i in self.members)

    def _zk(self, *args):
        subprocess.run([ZK_SH, *args], check=True, stdout=subprocess.DEVNULL, timeout=120)

    def start(self):
        self._zk("start-ensemble", self.dir, str(self.base), str(self.n))

    def stop(self):
        self._zk("stop-ensemble", self.dir)

    def start_member(self, i):
        self._zk("start-member", self.dir, str(i))

    def stop_member(self, i, kill=False):
        self._zk("stop-member", self.dir, str(i), *(["kill"] if kill else []))

    def mode(self, i):
        """"leader", "follower", "down", or "not serving" (up, no quorum)."""
        r = subprocess.run([ZK_SH, "mode", self.dir, str(i)], capture_output=True, text=True, timeout=30)
        return r.stdout.strip()

    def leader(self):
        """The member id reporting Mode: leader, or None."""
        for i in self.members:
            if self.mode(i) == "leader":
                return i
        return None

    def wait_quorum(self, members=None, timeout=60.0):
        """Waits until one member leads and every member in `members` (default all) serves."""
        members = members or self.members

        def ok():
            modes = {i: self.mode(i) for i in members}
            return modes if (list(modes.values()).count("leader") == 1
                             and all(m in ("leader", "follower") for m in modes.values())) else None
        return wait_for(ok, timeout, f"ZooKeeper quorum over members {members}", interval=0.2)


def find_metric(metrics, name):
    """Value of the first metric whose full name contains `name` (gauges: "value")."""
    if not isinstance(metrics, dict):
        return None
    for k, v in metrics.items():
        if name in k:
            if isinstance(v, dict):
                return v.get("value", v.get("count"))
            return v
    for v in metrics.values():
        if isinstance(v, dict):
            r = find_metric(v, name)
            if r is not None:
                return r
    return None


def parse_ready_lines(text):
    """[(epoch, load_time_ms or None, line)] for each 'ready as controller' line in a log."""
    out = []
    for line in text.splitlines():
        m = READY_RE.search(line)
        if not m:
            continue
        e = EPOCH_RE.search(m.group(1)) or EPOCH_RE.search(line)
        lt = LOAD_TIME_RE.search(line)
        load_ms = None
        if lt:
            v = float(lt.group(1))
            unit = (lt.group(2) or "ms").lower()
            load_ms = v * 1000 if unit == "s" else v / 1000 if unit == "us" else v
        out.append((int(e.group(1)) if e else None, load_ms, line))
    return out


class Broker:
    """One gregord process. Its stdout+stderr are appended to `log_path` (several runs of the
    same broker share the file, each preceded by a '=== harness: ...' marker line)."""

    def __init__(self, cluster, broker_id, port=None, config=None, name=None):
        """name: file-name stem (default broker-<id>); give a second process with the same
        broker.id its own, e.g. name="dup-2"."""
        self.cluster = cluster
        self.id = broker_id
        self.port = port or free_port()
        name = name or f"broker-{broker_id}"
        self.logdir = os.path.join(cluster.workdir, name)
        self.log_path = os.path.join(cluster.workdir, f"{name}.log")
        self.config_path = os.path.join(cluster.workdir, f"{name}.properties")
        self.config = dict(config or {})
        self.proc = None
        self.log_offset = 0  # where the current run's output starts in log_path
        self.paused = False
        self.host = "127.0.0.1"  # the listener's address (tests may move it to 127.0.0.N)
        self.advertised = None   # (host, port) to advertise instead, e.g. a fault proxy in front

    @property
    def address(self):
        """"host:port" clients should use (the advertised listener)."""
        host, port = self.advertised or (self.host, self.port)
        return f"{host}:{port}"

    # ---- configuration ----
    def properties(self):
        """The key=value pairs written to the config file: the harness's, then the cluster's and
        the broker's config; a key whose value is None there is left out of the file (e.g.
        {"broker.id": None} for a generated id)."""
        props = {
            "broker.id": str(self.id),
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "advertised.listeners": f"PLAINTEXT://{self.address}",
            "log.dirs": self.logdir,
            "zookeeper.connect": self.cluster.zk_connect,
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "zookeeper.connection.timeout.ms": "10000",
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        if SANITIZED:
            # Teardown stops every broker with SIGTERM (Cluster.close); the last one's controlled
            # shutdown has nowhere to move its leaders and retries 3 times after this back-off
            # (Kafka's default is 5 s: 10 s per test). A test's own value still wins.
            props["controlled.shutdown.retry.backoff.ms"] = "200"
        props.update(self.cluster.config)
        props.update(self.config)
        return {k: v for k, v in props.items() if v is not None}

    def write_config(self):
        with open(self.config_path, "w") as f:
            f.write("# written by tests/integration/gregor_harness.py\n")
            for k, v in self.properties().items():
                f.write(f"{k}={v}\n")

    # ---- process control ----
    def start(self, args=()):
        assert not self.running(), f"broker {self.id} already running"
        os.makedirs(self.logdir, exist_ok=True)
        self.write_config()
        with open(self.log_path, "ab") as log:
            log.write(f"=== harness: starting broker {self.id} at {time.strftime('%H:%M:%S')} "
                      f"(port {self.port}) ===\n".encode())
            log.flush()
            self.log_offset = log.tell()
            self.proc = subprocess.Popen([GREGORD, self.config_path, *args], stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, cwd=self.cluster.workdir)
        self.paused = False
        LIVE_PROCS.add(self)
        return self

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self):
        return self.proc.pid

    @property
    def returncode(self):
        return None if self.proc is None else self.proc.poll()

    def signal(self, sig):
        if self.running():
            os.kill(self.proc.pid, sig)

    def pause(self):
        """SIGSTOP: the whole process freezes (its ZooKeeper session keeps ticking on the server)."""
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self):
        self.signal(signal.SIGCONT)
        self.paused = False

    def stop(self, timeout=20.0):
        """SIGTERM (clean shutdown) and wait; SIGKILL after `timeout`. Returns the exit code."""
        if not self.running():
            return self.returncode
        if self.paused:
            self.resume()
        self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"broker {self.id} ignored SIGTERM for {timeout:.0f}s; killed")

    def kill(self):
        """SIGKILL and reap."""
        if self.running():
            self.proc.kill()
            self.proc.wait(10)
        self.paused = False
        return self.returncode

    def wait_exit(self, timeout=20.0):
        return self.proc.wait(timeout)

    # ---- observation ----
    def log(self, whole=False):
        """This run's output (or every run's, whole=True)."""
        try:
            with open(self.log_path, "rb") as f:
                if not whole:
                    f.seek(self.log_offset)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, n=60):
        return "\n".join(self.log(whole=True).splitlines()[-n:])

    def sanitizer_report(self, context=80):
        """The first sanitizer report in any run's output (with `context` lines from its start),
        or None."""
        text = self.log(whole=True)
        m = SANITIZER_RE.search(text)
        if not m:
            return None
        start = text.rfind("\n", 0, max(0, m.start() - 1)) + 1
        return "\n".join(text[start:].splitlines()[:context])

    def session(self):
        """(session id, password bytes) from <logdir>/zk-session, or None."""
        try:
            with open(os.path.join(self.logdir, "zk-session")) as f:
                parts = f.read().split()
        except FileNotFoundError:
            return None
        if len(parts) < 2:
            return None
        return int(parts[0], 16), bytes.fromhex(parts[1].removeprefix("0x"))

    def metrics(self):
        """<logdir>/gregor-metrics.json as a dict, or None when absent/unreadable."""
        try:
            with open(os.path.join(self.logdir, "gregor-metrics.json")) as f:
                return json.load(f)
        except (FileNotFoundError, ValueError):
            return None

    def metrics_mtime(self):
        try:
            return os.stat(os.path.join(self.logdir, "gregor-metrics.json")).st_mtime
        except FileNotFoundError:
            return 0.0

    def active_controller_count(self):
        return find_metric(self.metrics(), ACTIVE_COUNT_KEY)

    def ready_epochs(self, whole=True):
        """Epochs this broker announced as 'ready as controller' in its log."""
        return [e for e, _, _ in parse_ready_lines(self.log(whole=whole))]


class Cluster:
    """N gregord processes sharing one ZooKeeper connect string (usually with a per-test chroot).

    `zk` is a kazoo client on the same chroot, used for every znode read the tests make."""

    def __init__(self, workdir, zk_connect, n=3, config=None, zk=None, first_id=1):
        self.workdir = workdir
        self.zk_connect = zk_connect
        self.config = dict(config or {})
        os.makedirs(workdir, exist_ok=True)
        self.brokers = {}
        for i in range(first_id, first_id + n):
            self.brokers[i] = Broker(self, i)
        self._own_zk = zk is None
        self.zk = zk if zk is not None else kazoo_client(zk_connect)

    # ---- lifecycle ----
    def add_broker(self, broker_id, config=None):
        b = Broker(self, broker_id, config=config)
        self.brokers[broker_id] = b
        return b

    def start(self, ids=None, wait=True, timeout=30.0):
        for i in ids or self.brokers:
            self.brokers[i].start()
        if wait:
            self.wait_registered(ids, timeout=timeout)
            self.wait_controller(timeout=timeout)
            self.wait_metadata_controller(ids, timeout=min(timeout, 15.0))
        return self

    def wait_metadata_controller(self, ids=None, timeout=15.0):
        """Waits (softly: returns False instead of failing) until every broker in ids has applied an
        UpdateMetadata, i.e. its Metadata answers name the controller. /controller exists before the
        controller's first UpdateMetadata; an admin client that asks in between gets controller -1,
        and librdkafka 2.0.2 then waits for a broker state change that never comes ("Failed while
        waiting for controller", CI run 11a)."""
        ids = list(ids or self.brokers)

        def ok():
            return all(UPDATE_METADATA_APPLIED in self.brokers[i].log() for i in ids
                       if self.brokers[i].running())
        try:
            wait_for(ok, timeout, "every broker's first UpdateMetadata")
            return True
        except AssertionError:
            logging.getLogger(__name__).warning(
                "not every broker of %s applied an UpdateMetadata within %.0f s", ids, timeout)
            return False

    def stop(self, ordered=True):
        """Stops every broker (SIGTERM, then SIGKILL after 20 s); returns {id: exit code}.

        ordered: one at a time, the controller last, so every controlled shutdown finds a live
        controller. (SIGTERM to all at once makes the others' ControlledShutdown requests fail
        while the controller itself is going, and they retry after
        controlled.shutdown.retry.backoff.ms = 5 s, as in Kafka.)"""
        codes = {}
        for b in self.brokers.values():
            if b.paused:
                b.resume()
        if ordered:
            try:
                cid = self.controller_id() if self.zk.connected else None
            except Exception:
                cid = None
            for b in sorted(self.brokers.values(), key=lambda x: (x.id == cid, x.id)):
                if b.running():
                    b.signal(signal.SIGTERM)
                    try:
                        b.proc.wait(20)
                    except subprocess.TimeoutExpired:
                        pass  # killed below
        for b in self.brokers.values():
            if b.running():
                b.signal(signal.SIGTERM)
        for b in self.brokers.values():
            if b.proc is None:
                continue
            try:
                codes[b.id] = b.proc.wait(20)
            except subprocess.TimeoutExpired:
                b.proc.kill()
                b.proc.wait(10)
                codes[b.id] = "killed after SIGTERM timeout"
        return codes

    def kill_all(self):
        for b in self.brokers.values():
            if b.proc is not None and b.running():
                if b.paused:
                    b.resume()
                b.kill()

    def close(self):
        """Test teardown: SIGKILL every broker (fast; each test has its own chroot, so nothing
        stale is left for the next one). GREGOR_CLEAN_TEARDOWN=1 stops them with SIGTERM instead
        (ordered; slow when the last broker still leads partitions: its controlled shutdown has
        nowhere to move them and retries, as Kafka's does). In a sanitized run (SANITIZED) the
        brokers are stopped with SIGTERM too, and a sanitizer report in any broker's output, or
        a sanitizer's exit code, fails the teardown."""
        codes = {}
        try:
            if SANITIZED or os.environ.get("GREGOR_CLEAN_TEARDOWN"):
                codes = self.stop()
            else:
                self.kill_all()
        finally:
            if self._own_zk:
                close_kazoo(self.zk)
        if SANITIZED:
            self.check_sanitizers(codes)

    def check_sanitizers(self, codes=None):
        """Raises AssertionError with the first sanitizer report of each broker whose output
        holds one, or that exited with a sanitizer's exit code (ASan/UBSan: ASAN_OPTIONS
        exitcode, set to 86 by test-all; LeakSanitizer: 23)."""
        bad = []
        for b in self.brokers.values():
            rep = b.sanitizer_report()
            code = (codes or {}).get(b.id)
            # a broker that had to be SIGKILLed after SIGTERM never reached LeakSanitizer's check:
            # a shutdown that hangs is a failure of its own
            if rep or code in (23, 86) or (code is not None and not isinstance(code, int)):
                bad.append(f"----- broker {b.id} (exit {code}) {b.log_path} -----\n{rep or b.log_tail(40)}")
        if bad:
            raise AssertionError("sanitizer reports:\n" + "\n".join(bad))

    def __getitem__(self, broker_id):
        return self.brokers[broker_id]

    def running(self):
        return [b for b in self.brokers.values() if b.running()]

    # ---- znodes ----
    def get_json(self, path):
        """(parsed JSON, ZnodeStat) or (None, None) when the znode is absent."""
        if not self.zk.exists(path):
            return None, None
        try:
            data, stat = self.zk.get(path)
        except Exception:  # NoNodeError racing the exists()
            return None, None
        return (json.loads(data.decode()) if data else None), stat

    def controller(self):
        """/controller as a dict (with its ZnodeStat under '_stat'), or None."""
        d, stat = self.get_json("/controller")
        if d is None:
            return None
        d["_stat"] = stat
        return d

    def controller_id(self):
        c = self.controller()
        return None if c is None else c.get("brokerid")

    def controller_epoch(self):
        """(epoch int, zkVersion) of /controller_epoch, or (None, None)."""
        if not self.zk.exists("/controller_epoch"):
            return None, None
        data, stat = self.zk.get("/controller_epoch")
        return int(data.decode().strip()), stat.version

    def registered_ids(self):
        if not self.zk.exists("/brokers/ids"):
            return set()
        return {int(c) for c in self.zk.get_children("/brokers/ids") if c.isdigit()}

    def registration(self, broker_id):
        """(JSON dict, ZnodeStat) of /brokers/ids/N or (None, None)."""
        return self.get_json(f"/brokers/ids/{broker_id}")

    def broker_epoch(self, broker_id):
        _, stat = self.registration(broker_id)
        return None if stat is None else stat.czxid

    # ---- waiting ----
    def _check_alive(self, ids):
        for i in ids:
            b = self.brokers[i]
            if b.proc is not None and not b.running():
                raise AssertionError(f"broker {i} exited with code {b.returncode}; log tail:\n"
                                     + b.log_tail(30))

    def wait_registered(self, ids=None, timeout=30.0):
        """Waits until every broker in ids (default: all) has /brokers/ids/N."""
        ids = set(ids or self.brokers)

        def ok():
            self._check_alive(ids)
            return ids <= self.registered_ids()
        wait_for(ok, timeout, f"brokers {sorted(ids)} registered (have {sorted(self.registered_ids())})")

    def wait_controller(self, pred=None, timeout=30.0, what="a controller"):
        """Waits for /controller to exist (and satisfy pred(dict) if given); returns the dict."""
        def ok():
            c = self.controller()
            return c if c is not None and (pred is None or pred(c)) else None
        return wait_for(ok, timeout, what)

    def wait_new_controller(self, old_czxid, timeout=30.0):
        """Waits for a /controller znode created after the one with czxid old_czxid."""
        return self.wait_controller(lambda c: c["_stat"].czxid != old_czxid, timeout,
                                    f"a new /controller (old czxid {old_czxid})")

    def wait_active_counts(self, expect_controller, timeout=20.0, since=None):
        """Waits until every running broker's metrics file (written after `since`, a time.time())
        shows ActiveControllerCount 1 for expect_controller and 0 for the others. Returns the
        {id: value} seen. Raises AssertionError if the metrics never look like that."""
        def ok():
            vals = {}
            for b in self.running():
                if since is not None and b.metrics_mtime() <= since:
                    return None
                vals[b.id] = b.active_controller_count()
            want = {i: (1 if i == expect_controller else 0) for i in vals}
            return vals if vals == want else None
        return wait_for(ok, timeout, f"ActiveControllerCount 1 on broker {expect_controller} only")

    def all_ready_epochs(self):
        """{epoch: [broker ids that logged 'ready as controller' for it]} over all logs."""
        claims = {}
        for b in self.brokers.values():
            for e in b.ready_epochs(whole=True):
                claims.setdefault(e, []).append(b.id)
        return claims

    def log_tails(self, n=60):
        parts = []
        for b in self.brokers.values():
            state = "running" if b.running() else f"exit {b.returncode}"
            parts.append(f"----- broker {b.id} (pid {b.proc.pid if b.proc else '-'}, {state}) "
                         f"{b.log_path} -----\n{b.log_tail(n)}")
        return "\n".join(parts)


def kill_leftovers():
    """SIGKILL every gregord process the harness started that is still running."""
    for b in list(LIVE_PROCS):
        try:
            if b.running():
                if b.paused:
                    os.kill(b.proc.pid, signal.SIGCONT)
                b.proc.kill()
                b.proc.wait(5)
        except Exception:
            pass


def run_gregorctl(zk_connect, *args, timeout=30.0):
    """Runs build/bin/gregorctl --zookeeper ZK ARGS...; returns the CompletedProcess."""
    return subprocess.run([GREGORCTL, "--zookeeper", zk_connect, *args], capture_output=True,
                          text=True, timeout=timeout)
