#!/usr/bin/python3
"""Controller election and failover figures for Gregor. Prints numbers; asserts nothing.

  /usr/bin/python3 bench/bench_election.py [--rounds 20] [--sizes 10000,100000] [--zk HOST:PORT] [--smoke]

1. Re-election: 3 brokers; /controller is deleted by hand `rounds` times. For each round:
   the time from the delete to the new /controller znode (seen through a kazoo watch) and to the
   new controller's "ready as controller" log line (the line's own timestamp), median and p90.
2. Context load: for each size N, N partitions (topics of --partitions-per-topic partitions,
   with Kafka's /brokers/topics/T assignment JSON, /config/topics/T and a partition state znode per
   partition) are written straight into a fresh ZooKeeper chroot; then a broker starts and becomes
   controller. Reported: the load time from its "ready as controller ... load time" line, the time
   from process start to /controller and to that line, the same after a forced re-election (warm
   ZooKeeper), and next to it the raw ZooKeeper read rate of this script reading the same znodes
   the controller needs (children of /brokers/topics, every assignment, children of every
   .../partitions, every state) with kazoo async gets, many in flight, and with a pipelining wire
   client (the floor). The pipelined read runs twice -- before the cold start and again after the
   re-election, with the broker idle -- because ZooKeeper's read speed drifts by up to ~20 %
   between runs (JIT, GC): each load time is printed against the read before, the read after, and
   their mean ("load / raw pipelined read").

By default (--replicas fake) the replicas are brokers 101-103, registered in ZooKeeper by this
script but not running: to the controller every replica is live and every partition has its
leader, so failover changes nothing in ZooKeeper and no partition logs are created -- the figure is
the controller's own load cost. --replicas offline leaves 101-103 unregistered (failover then
takes every replica offline: ISR-shrink writes for every partition, as Kafka does);
--replicas live puts every replica on the running broker (which then creates N partition logs).
A private ZooKeeper (scripts/zk.sh, free port, temp dir) is used unless --zk/GREGOR_ZK is given;
every run uses fresh chroots.
"""

import argparse
import json
import os
import statistics
import sys
import threading
import time
from datetime import datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import H, fresh_chroot, zookeeper  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def fmt_ms(xs):
    if not xs:
        return "n/a"
    return f"median {statistics.median(xs):7.1f} ms   p90 {pct(xs, 90):7.1f} ms   " \
           f"min {min(xs):7.1f}   max {max(xs):7.1f}   (n={len(xs)})"


LOG_TS = __import__("re").compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[,.](\d{3})\]")


def line_wall_time(line):
    """Wall-clock seconds of a log line's '[YYYY-mm-dd HH:MM:SS,mmm]' stamp, or None."""
    m = LOG_TS.search(line)
    if not m:
        return None
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp() + int(m.group(2)) / 1000.0


def ready_lines(broker, epoch):
    return [(e, lt, line) for e, lt, line in H.parse_ready_lines(broker.log(whole=True)) if e == epoch]


# --------------------------------------------------------------------------------------------
def bench_reelection(zk_hosts, workdir, rounds):
    print(f"== re-election after deleting /controller: 3 brokers, {rounds} rounds")
    connect = fresh_chroot(zk_hosts, "elect")
    cluster = H.Cluster(os.path.join(workdir, "elect"), connect, n=3)
    to_znode, to_ready = [], []
    try:
        cluster.start(timeout=60)
        zk = cluster.zk
        for r in range(rounds):
            old = cluster.wait_controller()
            epoch, _ = cluster.controller_epoch()
            cluster.wait_active_counts(old["brokerid"], timeout=20)  # settled
            created = threading.Event()
            t0_wall = time.time()
            t0 = time.monotonic()
            zk.delete("/controller")
            # Wait for the new /controller through an exists-watch (re-armed after each event).
            while True:
                created.clear()
                if zk.exists("/controller", watch=lambda ev: created.set()):
                    break
                if not created.wait(30):
                    raise RuntimeError("no new controller within 30 s")
            dt = (time.monotonic() - t0) * 1000
            to_znode.append(dt)
            new = cluster.wait_controller()
            b = cluster[new["brokerid"]]
            try:
                lines = H.wait_for(lambda: ready_lines(b, epoch + 1), 10, "ready line")
                tw = line_wall_time(lines[-1][2])
                if tw is not None:
                    to_ready.append((tw - t0_wall) * 1000)
            except AssertionError:
                pass
            print(f"  round {r + 1:2d}: controller {old['brokerid']} -> {new['brokerid']} "
                  f"(epoch {epoch + 1}): /controller after {dt:6.1f} ms"
                  + (f", ready line after {to_ready[-1]:6.1f} ms" if len(to_ready) == r + 1 else ""))
    finally:
        cluster.close()
    if benchlib.SMOKE:  # a full run reports n/a and goes on
        benchlib.check(len(to_ready) == rounds, f"re-election: {len(to_ready)} of {rounds} ready lines found")
    print(f"  delete -> new /controller znode : {fmt_ms(to_znode)}")
    print(f"  delete -> 'ready as controller' : {fmt_ms(to_ready)}"
          + ("" if to_ready else "  (no timestamped ready line found in the logs)"))


# --------------------------------------------------------------------------------------------
def write_partitions(zk, n_partitions, per_topic, replicas):
    """Writes topics straight into ZooKeeper with batched multis, several in flight.
    Returns (topics, seconds)."""
    n_topics = (n_partitions + per_topic - 1) // per_topic
    topics = [f"bench-{i:05d}" for i in range(n_topics)]
    for p in ("/brokers/topics", "/config/topics", "/brokers/ids", "/admin/delete_topics",
              "/isr_change_notification", "/log_dir_event_notification", "/config/changes"):
        zk.ensure_path(p)
    ops_batch = []
    pending = []
    t0 = time.monotonic()
    state = json.dumps({"controller_epoch": 1, "leader": replicas[0], "version": 1,
                        "leader_epoch": 0, "isr": replicas}, separators=(",", ":")).encode()

    def flush():
        if not ops_batch:
            return
        t = zk.transaction()
        for op in ops_batch:
            t.create(*op)
        pending.append(t.commit_async())
        ops_batch.clear()
        while len(pending) > 8:
            res = pending.pop(0).get(timeout=60)
            bad = [x for x in res if isinstance(x, Exception)]
            if bad:
                raise RuntimeError(f"multi failed: {bad[0]!r}")

    left = n_partitions
    for t in topics:
        np_ = min(per_topic, left)
        left -= np_
        assign = {"version": 2, "partitions": {str(p): replicas for p in range(np_)},
                  "adding_replicas": {}, "removing_replicas": {}}
        ops_batch.append((f"/config/topics/{t}", b'{"version":1,"config":{}}'))
        ops_batch.append((f"/brokers/topics/{t}", json.dumps(assign, separators=(",", ":")).encode()))
        ops_batch.append((f"/brokers/topics/{t}/partitions", b""))
        for p in range(np_):
            ops_batch.append((f"/brokers/topics/{t}/partitions/{p}", b""))
            ops_batch.append((f"/brokers/topics/{t}/partitions/{p}/state", state))
            if len(ops_batch) >= 500:
                flush()
        flush()
    for a in pending:
        res = a.get(timeout=60)
        bad = [x for x in res if isinstance(x, Exception)]
        if bad:
            raise RuntimeError(f"multi failed: {bad[0]!r}")
    return topics, time.monotonic() - t0


def async_map(zk, fn_name, paths, window=2000):
    """Runs zk.<fn_name>_async(path) for every path with up to `window` in flight; returns the
    results in order."""
    out = [None] * len(paths)
    sem = threading.Semaphore(window)
    done = threading.Event()
    remaining = [len(paths)]
    lock = threading.Lock()
    if not paths:
        return out
    fn = getattr(zk, fn_name + "_async")

    def make_cb(i):
        def cb(a):
            try:
                out[i] = a.get_nowait()
            except Exception as e:
                out[i] = e
            sem.release()
            with lock:
                remaining[0] -= 1
                if remaining[0] == 0:
                    done.set()
        return cb

    for i, p in enumerate(paths):
        sem.acquire()
        fn(p).rawlink(make_cb(i))
    done.wait(300)
    return out


def raw_read(zk, topics):
    """Reads what a controller reads at failover; returns (znodes read, seconds)."""
    t0 = time.monotonic()
    children = zk.get_children("/brokers/topics")
    assigns = async_map(zk, "get", [f"/brokers/topics/{t}" for t in children])
    parts = async_map(zk, "get_children", [f"/brokers/topics/{t}/partitions" for t in children])
    state_paths = [f"/brokers/topics/{t}/partitions/{p}/state"
                   for t, ps in zip(children, parts) if not isinstance(ps, Exception) for p in ps]
    states = async_map(zk, "get", state_paths)
    dt = time.monotonic() - t0
    errors = sum(isinstance(x, Exception) for x in assigns + parts + states)
    if errors:
        benchlib.fail(f"raw read: {errors} errors")
    return 1 + len(assigns) + len(parts) + len(states), dt


class WireReader:
    """A minimal pipelining ZooKeeper client (wire protocol over one socket, no watches): sends
    up to `window` reads before reading replies. Used to measure ZooKeeper's read rate without
    kazoo's per-request Python overhead (kazoo tops out around a few thousand reads/s here)."""

    def __init__(self, connect, timeout_ms=30000):
        import socket
        import struct
        self.struct = struct
        hostport, self.chroot = H.split_chroot(connect)
        host, port = hostport.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.buf = b""
        self.pos = 0
        req = struct.pack(">iqiqi16sB", 0, 0, timeout_ms, 0, 16, b"\0" * 16, 0)
        self.sock.sendall(struct.pack(">i", len(req)) + req)
        self._frame()  # ConnectResponse
        self.xid = 0

    def _frame(self):
        while True:
            avail = len(self.buf) - self.pos
            if avail >= 4:
                n = self.struct.unpack_from(">i", self.buf, self.pos)[0]
                if avail >= 4 + n:
                    f = bytes(self.buf[self.pos + 4:self.pos + 4 + n])
                    self.pos += 4 + n
                    return f
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("ZooKeeper closed the connection")
            self.buf = self.buf[self.pos:] + chunk
            self.pos = 0

    def _req(self, op, path):
        self.xid += 1
        p = (self.chroot + path).encode()
        body = self.struct.pack(">ii", self.xid, op) + self.struct.pack(">i", len(p)) + p + b"\0"
        return self.struct.pack(">i", len(body)) + body

    def many(self, op, paths, window=5000):
        """op 4 = getData (returns data bytes), 8 = getChildren (returns [names]); None on error."""
        out = []
        sent = 0
        while len(out) < len(paths):
            if sent < len(paths) and sent - len(out) < window:
                k = min(len(paths), sent + window - (sent - len(out)))
                self.sock.sendall(b"".join(self._req(op, p) for p in paths[sent:k]))
                sent = k
                continue
            f = self._frame()
            xid, _, err = self.struct.unpack_from(">iqi", f)
            if xid < 0:  # ping/notification
                continue
            if err != 0:
                out.append(None)
                continue
            if op == 4:
                n = self.struct.unpack_from(">i", f, 16)[0]
                out.append(f[20:20 + max(n, 0)])
            else:
                cnt = self.struct.unpack_from(">i", f, 16)[0]
                pos, names = 20, []
                for _ in range(cnt):
                    n = self.struct.unpack_from(">i", f, pos)[0]
                    names.append(f[pos + 4:pos + 4 + n].decode())
                    pos += 4 + n
                out.append(names)
        return out

    def close(self):
        try:
            self.sock.sendall(self.struct.pack(">iii", 8, self.xid + 1, -11))
        finally:
            self.sock.close()


def raw_read_wire(connect):
    r = WireReader(connect)
    try:
        t0 = time.monotonic()
        children = r.many(8, ["/brokers/topics"])[0]
        assigns = r.many(4, [f"/brokers/topics/{t}" for t in children])
        parts = r.many(8, [f"/brokers/topics/{t}/partitions" for t in children])
        states = r.many(4, [f"/brokers/topics/{t}/partitions/{p}/state"
                            for t, ps in zip(children, parts) if ps for p in ps])
        dt = time.monotonic() - t0
    finally:
        r.close()
    errors = sum(x is None for x in assigns + parts + states)
    if errors:
        benchlib.fail(f"wire read: {errors} errors")
    return 1 + len(assigns) + len(parts) + len(states), dt


def register_fake_brokers(zk, ids):
    """Registers /brokers/ids/N (v5 JSON, ephemeral on the script's session) for brokers that do
    not exist; their endpoint is a loopback port nobody listens on, so the controller's requests
    to them just fail to connect and are retried in the background."""
    port = H.free_port()
    for i in ids:
        zk.create(f"/brokers/ids/{i}", json.dumps({
            "features": {}, "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
            "endpoints": [f"PLAINTEXT://127.0.0.1:{port}"], "jmx_port": -1, "port": port,
            "host": "127.0.0.1", "version": 5, "timestamp": str(int(time.time() * 1000))}).encode(),
            ephemeral=True, makepath=True)


TIMELINE_MARKS = (
    ("elected", "successfully elected as the controller"),
    ("assignments read", "Loaded the replica assignments"),
    ("states read", "partition states in"),
    ("UpdateMetadata (brokers)", "Sending update metadata request"),
    ("replicas online", "Triggering online replica state changes"),
    ("replicas offline", "Triggering offline replica state changes"),
    ("partition SM", "Initializing partition state"),
    ("ready", "ready as controller"),
)
TOOK_RE = __import__("re").compile(r"Event (\w+) took (\d+) ms \(event thread CPU (\d+) ms\)")


def failover_timeline(text, epoch):
    """The failover of `epoch` in a broker log: [(mark, ms since 'elected')], and the controller's
    own 'Event X took N ms (event thread CPU M ms)' line for that event, if any."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines)
                  if "successfully elected as the controller" in l and f"Epoch incremented to {epoch} " in l), None)
    if start is None:
        return [], None
    t0 = line_wall_time(lines[start])
    marks, took = [], None
    for l in lines[start:]:
        for name, needle in TIMELINE_MARKS:
            if needle in l and not any(m == name for m, _ in marks):
                t = line_wall_time(l)
                if t is not None:
                    marks.append((name, (t - t0) * 1000))
        m = TOOK_RE.search(l)
        if m and any(n == "ready" for n, _ in marks):
            took = (m.group(1), int(m.group(2)), int(m.group(3)))
            break
    return marks, took


def print_timeline(b, epoch):
    marks, took = failover_timeline(b.log(whole=True), epoch)
    if marks:
        print("    timeline (ms after 'elected'): " + ", ".join(f"{n} {ms:.0f}" for n, ms in marks))
    if took:
        print(f"    controller: event {took[0]} took {took[1]} ms, event thread CPU {took[2]} ms")


def proc_cpu_ms(pid):
    """user+sys CPU of a process so far (ms), or None."""
    s = benchlib.proc_cpu_s(pid)
    return None if s is None else s * 1000


def proc_syscw(pid):
    """write-type system calls of a process so far (/proc/PID/io syscw), or None."""
    try:
        with open(f"/proc/{pid}/io") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("syscw"))
    except (OSError, StopIteration, ValueError):
        return None


LOADED_RE = __import__("re").compile(r"Loaded (?:the replica assignments of .*?|\d+ partition states) in (\d+) ms")


def print_ratios(cold_ms, reelect_ms, raw_before_ms, raw_after_ms):
    """The reported load times against the pipelined raw read before the cold start, after the
    re-election, and their mean."""
    mean = (raw_before_ms + raw_after_ms) / 2
    print(f"  load / raw pipelined read (before {raw_before_ms:.0f} ms, after {raw_after_ms:.0f} ms, "
          f"mean {mean:.0f} ms):")
    for name, ms in (("cold start", cold_ms), ("re-election", reelect_ms)):
        if ms is None:
            print(f"    {name}: n/a")
            continue
        print(f"    {name} {ms:.0f} ms: {ms / raw_before_ms:.2f}x before, {ms / raw_after_ms:.2f}x after, "
              f"{ms / mean:.2f}x mean")


def bench_load(zk_hosts, workdir, size, per_topic, mode):
    print(f"== controller context load: {size} partitions ({per_topic} per topic), replicas: {mode}")
    connect = fresh_chroot(zk_hosts, f"load{size}")
    cluster = H.Cluster(os.path.join(workdir, f"load{size}"), connect, n=1)
    try:
        replicas = [1] if mode == "live" else [101, 102, 103]
        if mode == "fake":
            register_fake_brokers(cluster.zk, replicas)
        topics, wsecs = write_partitions(cluster.zk, size, per_topic, replicas)
        print(f"  wrote {len(topics)} topics / {size} partition states in {wsecs:.1f} s "
              f"({(size * 2 + len(topics) * 3) / wsecs:,.0f} znodes/s, batched multis)")

        n, secs = raw_read(cluster.zk, topics)
        print(f"  raw ZooKeeper read of the same znodes, kazoo async (<=2000 in flight): "
              f"{n} znodes in {secs * 1000:.0f} ms = {n / secs:,.0f} reads/s")
        n, secs = raw_read_wire(connect)
        raw_before_ms = secs * 1000
        print(f"  raw ZooKeeper read of the same znodes, pipelined wire client (<=5000 in flight): "
              f"{n} znodes in {secs * 1000:.0f} ms = {n / secs:,.0f} reads/s")

        b = cluster[1]
        t0_wall = time.time()
        t0 = time.monotonic()
        b.start()
        c = cluster.wait_controller(timeout=300)
        t_ctl = (time.monotonic() - t0) * 1000
        epoch, _ = cluster.controller_epoch()
        lines = H.wait_for(lambda: ready_lines(b, epoch), 300, "ready as controller line")
        _, load_ms, line = lines[-1]
        tw = line_wall_time(line)
        print(f"  cold start: process start -> /controller {t_ctl:.0f} ms; -> ready line "
              + (f"{(tw - t0_wall) * 1000:.0f} ms" if tw else "n/a")
              + f"; reported load time: " + (f"{load_ms:.0f} ms" if load_ms is not None else "n/a"))
        print(f"    line: {line.strip()[:200]}")
        loaded = [int(m.group(1)) for m in LOADED_RE.finditer(b.log())]
        if loaded:
            print(f"    of which reading ZooKeeper ('Loaded ... in N ms' lines): {sum(loaded)} ms {loaded}")
        time.sleep(1.0)  # let the last buffered log lines reach the file
        print_timeline(b, epoch)
        cpu0, w0 = proc_cpu_ms(b.pid), proc_syscw(b.pid)
        if cpu0 is not None:
            print(f"    process CPU (user+sys) since start: {cpu0:.0f} ms; write-type syscalls: {w0}")

        # Forced re-election: same broker, warm ZooKeeper.
        old = c["_stat"].czxid
        t0_wall = time.time()
        cluster.zk.delete("/controller")
        cluster.wait_new_controller(old, timeout=300)
        lines = H.wait_for(lambda: ready_lines(b, epoch + 1), 300, "ready line after re-election")
        _, load_ms2, line2 = lines[-1]
        tw = line_wall_time(line2)
        print(f"  re-election: delete -> ready line "
              + (f"{(tw - t0_wall) * 1000:.0f} ms" if tw else "n/a")
              + "; reported load time: " + (f"{load_ms2:.0f} ms" if load_ms2 is not None else "n/a"))
        time.sleep(1.0)
        print_timeline(b, epoch + 1)
        cpu1, w1 = proc_cpu_ms(b.pid), proc_syscw(b.pid)
        if cpu0 is not None and cpu1 is not None:
            print(f"    process CPU (user+sys) of the re-election: {cpu1 - cpu0:.0f} ms; write-type syscalls: "
                  f"{w1 - w0 if w0 is not None and w1 is not None else 'n/a'}")
        # The floor again, after both loads: ZooKeeper's read speed drifts between runs and within
        # one (JIT, GC), so each load is compared with the read before, the read after and their mean.
        n, secs = raw_read_wire(connect)
        raw_after_ms = secs * 1000
        print(f"  raw ZooKeeper read of the same znodes, pipelined wire client (<=5000 in flight), again after the "
              f"re-election: {n} znodes in {secs * 1000:.0f} ms = {n / secs:,.0f} reads/s")
        print_ratios(load_ms, load_ms2, raw_before_ms, raw_after_ms)
        lines = b.log(whole=True).count("\n")
        print(f"  broker log: {lines} lines, {os.path.getsize(b.log_path) / 1e6:.1f} MB")
        rss = None
        try:
            with open(f"/proc/{b.pid}/status") as f:
                rss = next(int(x.split()[1]) for x in f if x.startswith("VmRSS"))
        except (OSError, StopIteration):
            pass
        if rss:
            print(f"  broker RSS after load: {rss / 1024:.0f} MiB")
    finally:
        cluster.close()
        # Leave ZooKeeper small for the next run.
        try:
            root = H.kazoo_client(zk_hosts)
            _, chroot = H.split_chroot(connect)
            root.delete(chroot, recursive=True)
            H.close_kazoo(root)
        except Exception as e:
            print(f"  (cleanup of {connect} failed: {e})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zk", default=os.environ.get("GREGOR_ZK"), help="host:port of a ZooKeeper to use")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--partitions-per-topic", type=int, default=100)
    ap.add_argument("--replicas", choices=("fake", "offline", "live"), default="fake",
                    help="fake: brokers 101-103 registered by this script but not running (default); "
                         "offline: brokers 101-103 absent; live: the running broker 1")
    ap.add_argument("--skip-election", action="store_true")
    ap.add_argument("--skip-load", action="store_true")
    benchlib.add_smoke_arg(ap)
    args = ap.parse_args()
    benchlib.smoke_start(args, "bench_election.py", rounds=2, sizes="200")

    if not os.access(H.GREGORD, os.X_OK):
        sys.exit(f"{H.GREGORD} not built (run make)")
    workdir = benchlib.workdir("gregor-bench-")
    zk_srv, zk_hosts = zookeeper(args.zk, workdir)
    print(f"ZooKeeper {zk_hosts}; work dir {workdir}; session timeout {H.SESSION_TIMEOUT_MS} ms; "
          f"{os.cpu_count()} CPUs")
    try:
        if not args.skip_election:
            bench_reelection(zk_hosts, workdir, args.rounds)
        if not args.skip_load:
            for s in [int(x) for x in args.sizes.split(",") if x]:
                bench_load(zk_hosts, workdir, s, args.partitions_per_topic, args.replicas)
    finally:
        H.kill_leftovers()
        if zk_srv:
            zk_srv.stop()


if __name__ == "__main__":
    main()
    benchlib.finish()
