"""Helpers shared by the bench/*.py scripts: broker log timestamps, log tails, an AdminClient per
broker, a fresh ZooKeeper chroot per run. Import it from a script in bench/ (`import benchlib`)."""

import os
import re
import sys
import time
from datetime import datetime

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import gregor_harness as H  # noqa: E402

# "[YYYY-mm-dd HH:MM:SS,mmm]" at the start of a broker log line.
LOG_TS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[,.](\d{3})\]")


def line_time(line):
    """Wall-clock seconds of a log line's leading timestamp, or None."""
    m = LOG_TS.match(line)
    if not m:
        return None
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp() + int(m.group(2)) / 1000.0


def log_since(broker, offset):
    """[(wall time, line)] of broker's log from byte `offset` on (lines without a stamp dropped)."""
    try:
        with open(broker.log_path, "rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return []
    return [(t, line) for line in text.splitlines() for t in [line_time(line)] if t is not None]


def log_size(broker):
    """Current size of broker's log in bytes (0 if it does not exist yet)."""
    try:
        return os.path.getsize(broker.log_path)
    except OSError:
        return 0


def admin_for(broker, socket_timeout_ms=120000):
    """A confluent-kafka AdminClient bootstrapped on this one broker (long socket timeout: one
    CreateTopics of 100k partitions is answered after minutes on a loaded box)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}", "log_level": 0,
                        "socket.timeout.ms": socket_timeout_ms})


def fresh_chroot(zk_hosts, name):
    """Creates a new chroot /bench-<name>-<pid>-<ms> on zk_hosts; returns the connect string."""
    chroot = f"/bench-{name}-{os.getpid()}-{int(time.time() * 1000) % 10**8}"
    root = H.kazoo_client(zk_hosts)
    root.ensure_path(chroot)
    H.close_kazoo(root)
    return zk_hosts + chroot


def raise_nofile(need):
    """Raises RLIMIT_NOFILE's soft limit to `need` when it is lower (as far as the hard limit
    allows). Returns (soft, hard) afterwards."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need and hard > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, need), hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft, hard


BENCH_ZK_JVM_OPTS = "-Xms1g -Xmx2g -XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def zookeeper(zk_hosts, workdir):
    """(server, hosts): zk_hosts itself when given (server None), else a private ZooKeeper started
    in workdir/zk (the caller stops it). The private one gets a heap sized for 100k partitions
    (BENCH_ZK_JVM_OPTS: 1-2 GiB; the tests' 512 MiB made its collections at 100k partitions vary
    ZooKeeper's write rate 2-3x between runs) and keeps the tests' quick-starting C1-only JIT (the
    JVM's full defaults cost short runs their C2 warm-up on two cores: 10k creation 1.1 -> 2.4 s);
    ZK_JVM_OPTS in the environment overrides (set but empty: the JVM's defaults)."""
    if zk_hosts:
        return None, zk_hosts
    os.environ.setdefault("ZK_JVM_OPTS", BENCH_ZK_JVM_OPTS)
    srv = H.ZkServer(os.path.join(workdir, "zk"))
    srv.start()
    return srv, srv.hosts


def rss_kib(broker):
    """Resident set size of a running broker in KiB (VmRSS), 0 when it is not running."""
    try:
        with open(f"/proc/{broker.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, AttributeError):
        pass
    return 0


def proc_cpu_s(pid):
    """user+sys CPU seconds of process pid so far (/proc/PID/stat fields 14, 15); None when it is
    gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


# ---- smoke mode ----------------------------------------------------------------------------
# `--smoke`: the same code paths as a full run with tiny sizes (seconds), so that CI
# (bench/smoke.sh) notices a bench that no longer runs. Its figures mean nothing and are never
# recorded. A smoke run exits non-zero on any error, including the ones a full run reports and
# carries on past (a phase that did not complete, records not delivered).
SMOKE = False
FAILURES = []


def add_smoke_arg(ap):
    """Adds --smoke to an ArgumentParser."""
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes, a few seconds: checks that this bench still runs (bench/smoke.sh); "
                         "its figures are not for recording")


def smoke_start(args, name, **sizes):
    """After parse_args(): when args.smoke, overrides the given attributes of args with tiny
    sizes (attribute=value) and prints the smoke banner. Returns args.smoke."""
    global SMOKE
    SMOKE = bool(getattr(args, "smoke", False))
    if SMOKE:
        import signal
        # bench/smoke.sh's timeout sends SIGTERM: leave through the finally blocks (brokers and a
        # private ZooKeeper stopped) rather than at once
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        for k, v in sizes.items():
            setattr(args, k, v)
        print(f"SMOKE RUN of {name} ({', '.join(f'{k}={v}' for k, v in sizes.items())}): "
              f"checks that the bench runs; figures NOT for recording", flush=True)
    return SMOKE


WORKDIRS = []


def workdir(prefix):
    """A new temporary directory for a run (brokers' logs and data, a private ZooKeeper). Kept
    after a full run and after a failed smoke run (to look at); removed by finish() after a smoke
    run without errors (CI runs them over and over)."""
    import tempfile
    d = tempfile.mkdtemp(prefix=prefix)
    WORKDIRS.append(d)
    return d


def fail(what):
    """Records an error the bench carries on past (a phase that did not complete, ...): printed
    now, and the process exits non-zero at the end (finish())."""
    FAILURES.append(what)
    print(f"BENCH ERROR: {what}", flush=True)


def check(cond, what):
    """fail(what) unless cond. Smoke runs use it for sanity checks that full runs do not make
    (every record delivered, ...)."""
    if not cond:
        fail(what)
    return cond


def finish():
    """Exits 1 when fail() was called, else returns (after the smoke trailer in smoke mode)."""
    if FAILURES:
        print(f"{len(FAILURES)} error(s): " + "; ".join(FAILURES), flush=True)
        sys.exit(1)
    if SMOKE:
        import shutil
        for d in WORKDIRS:
            shutil.rmtree(d, ignore_errors=True)
        print("SMOKE RUN finished without errors (figures NOT for recording)", flush=True)
