#!/usr/bin/python3
"""Topic creation at scale: CreateTopics -> every leader visible in Metadata, next to ZooKeeper's
batched write rate for the same znodes. Prints numbers; asserts nothing.

  /usr/bin/python3 bench/bench_topics.py                       # the issue's sizes (several minutes)
  /usr/bin/python3 bench/bench_topics.py --partitions 1000 --topics 100   # quick run
  /usr/bin/python3 bench/bench_topics.py --skip-many            # only case (a)
  /usr/bin/python3 bench/bench_topics.py --smoke                # both cases, tiny (bench/smoke.sh)

Cases, each on a fresh 3-broker cluster (real gregord processes, empty log dirs, fresh chroot):
  (a) 1 topic x --partitions (10000) partitions, RF 3
  (b) --topics (1000) topics x --per-topic (10) partitions, RF 3
For each: one CreateTopics request (confluent-kafka AdminClient, sent to the controller by
librdkafka, operation timeout 10 min), then Metadata polled round-robin from each broker (one
AdminClient bootstrapped on each broker; the answering broker is checked) until every partition
of the new topics has a leader >= 0. Figures: time to the CreateTopics response (gregord answers
once its own metadata cache has every leader), to the first partition with a leader, to all
leaders on the first broker and on all three. Next to that, a timeline read from the brokers'
logs (request handler's topic writes, the controller's TopicChange handling, partition-state
writes, LeaderAndIsr/UpdateMetadata sends, each broker's log creation and metadata update).

ZooKeeper floor, measured in the same run on the same server (brokers stopped, own chroot): the
same znodes written with kazoo transactions of --batch (500) ops: the admin's writes
(/config/topics/T, /brokers/topics/T), the controller's (/brokers/topics/T/partitions, .../P,
.../P/state with partition-state-sized JSON), once with one transaction in flight (the way
gregord's controller writes: sequential guarded multis) and once with 8 in flight; then setData of
every state (what a leader change writes). ops/s. Kazoo is Python: the figures are a floor for
ZooKeeper, not its ceiling.
"""

import argparse
import json
import os
import re
import signal
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import H, admin_for, fresh_chroot, log_since, log_size, raise_nofile, zookeeper  # noqa: E402

from confluent_kafka.admin import NewTopic  # noqa: E402

CONFIG = {
    "auto.leader.rebalance.enable": "false",
    "auto.create.topics.enable": "false",
}


def state_json(leader, isr, epoch=0):
    return json.dumps({"controller_epoch": 1, "leader": leader, "version": 1, "leader_epoch": epoch,
                       "isr": isr}, separators=(",", ":")).encode()


# --------------------------------------------------------------------------------------------
class Batcher:
    """kazoo transactions of `batch` ops, at most `inflight` committed and unanswered."""

    def __init__(self, zk, batch, inflight):
        self.zk, self.batch, self.inflight = zk, batch, inflight
        self.ops, self.pending, self.count = [], [], 0

    def add(self, kind, *args):
        self.ops.append((kind, args))
        if len(self.ops) >= self.batch:
            self.flush()

    def _reap(self, limit):
        while len(self.pending) > limit:
            res = self.pending.pop(0).get(timeout=120)
            bad = [x for x in res if isinstance(x, Exception)]
            if bad:
                raise RuntimeError(f"multi failed: {bad[0]!r}")

    def flush(self):
        if self.ops:
            t = self.zk.transaction()
            for kind, args in self.ops:
                getattr(t, kind)(*args)
            self.pending.append(t.commit_async())
            self.count += len(self.ops)
            self.ops = []
        self._reap(self.inflight - 1)

    def finish(self):
        self.flush()
        self._reap(0)


def zk_floor(zk_hosts, layout, rf, batch):
    """Writes the znodes of `layout` ([(topic, partitions)]) into a fresh chroot; returns rows
    (label, ops, seconds)."""
    connect = fresh_chroot(zk_hosts, "zkfloor")
    zk = H.kazoo_client(connect)
    rows = []
    try:
        for p in ("/config/topics", "/brokers/topics"):
            zk.ensure_path(p)
        reps = list(range(1, rf + 1))
        cfg = b'{"version":1,"config":{}}'
        for inflight, sub in ((1, "seq"), (8, "pipe")):
            names = [f"{sub}-{t}" for t, _ in layout]

            def assignment(np_):
                return json.dumps({"version": 2, "partitions": {str(q): reps for q in range(np_)},
                                   "adding_replicas": {}, "removing_replicas": {}},
                                  separators=(",", ":")).encode()
            b = Batcher(zk, batch, inflight)
            t0 = time.monotonic()
            for name, (_, np_) in zip(names, layout):
                b.add("create", f"/config/topics/{name}", cfg)
                b.add("create", f"/brokers/topics/{name}", assignment(np_))
            b.finish()
            rows.append((f"admin creates (/config/topics/T, /brokers/topics/T), {inflight} in flight",
                         b.count, time.monotonic() - t0))
            b = Batcher(zk, batch, inflight)
            t0 = time.monotonic()
            for name, (_, np_) in zip(names, layout):
                b.add("create", f"/brokers/topics/{name}/partitions", b"")
                for q in range(np_):
                    b.add("create", f"/brokers/topics/{name}/partitions/{q}", b"")
                    b.add("create", f"/brokers/topics/{name}/partitions/{q}/state",
                          state_json(reps[q % rf], reps))
            b.finish()
            rows.append((f"controller creates (partitions, P, P/state), {inflight} in flight",
                         b.count, time.monotonic() - t0))
            b = Batcher(zk, batch, inflight)
            t0 = time.monotonic()
            for name, (_, np_) in zip(names, layout):
                for q in range(np_):
                    b.add("set_data", f"/brokers/topics/{name}/partitions/{q}/state",
                          state_json(reps[(q + 1) % rf], reps, 1), 0)
            b.finish()
            rows.append((f"state setData (leader change), {inflight} in flight", b.count,
                         time.monotonic() - t0))
    finally:
        H.close_kazoo(zk)
    return rows, connect


def drop_chroot(zk_hosts, connect, batch=500):
    """Deletes a bench chroot with batched deletes (deepest first)."""
    _, chroot = H.split_chroot(connect)
    zk = H.kazoo_client(zk_hosts)
    try:
        paths = []

        def walk(p, depth):
            for c in zk.get_children(p):
                walk(f"{p}/{c}", depth + 1)
            paths.append(p)
        walk(chroot, 0)
        b = Batcher(zk, batch, 4)
        for p in paths:
            b.add("delete", p)
        b.finish()
    except Exception as e:
        print(f"  (cleanup of {connect} failed: {e})")
    finally:
        H.close_kazoo(zk)


# --------------------------------------------------------------------------------------------
class Poller:
    """Polls Metadata round-robin from every broker; records when each first shows every
    partition of `want` ({topic: n partitions}) with a leader >= 0."""

    def __init__(self, cluster, want):
        self.brokers = [b for b in cluster.brokers.values() if b.running()]
        self.admins = {b.id: admin_for(b) for b in self.brokers}
        self.want = want
        self.total = sum(want.values())
        self.first_any = None  # (t, broker)
        self.complete = {}  # broker id -> t
        self.marks = {}  # fraction -> (t, broker)
        self.polls = 0
        self.poll_secs = 0.0
        self.wrong_broker = 0
        self.errors = 0

    def led(self, md):
        n = 0
        for t, np_ in self.want.items():
            tm = md.topics.get(t)
            if tm is None or tm.error is not None:
                continue
            n += sum(1 for p in tm.partitions.values() if p.leader >= 0 and p.error is None)
        return n

    def poll_once(self):
        for b in self.brokers:
            if b.id in self.complete:
                continue
            t1 = time.time()
            try:
                md = self.admins[b.id].list_topics(timeout=60)
            except Exception:
                self.errors += 1
                continue
            t2 = time.time()
            self.polls += 1
            self.poll_secs += t2 - t1
            if md.orig_broker_id != b.id:
                self.wrong_broker += 1
            n = self.led(md)
            # The answer reflects the broker's cache somewhere between t1 and t2: use the midpoint.
            tm = (t1 + t2) / 2
            if n > 0 and self.first_any is None:
                self.first_any = (tm, b.id)
            for frac in (0.25, 0.5, 0.75):
                if n >= frac * self.total and frac not in self.marks:
                    self.marks[frac] = (tm, b.id)
            if n >= self.total:
                self.complete[b.id] = tm

    def run(self, timeout, stop=lambda: False):
        deadline = time.time() + timeout
        while len(self.complete) < len(self.brokers) and time.time() < deadline and not stop():
            self.poll_once()
            time.sleep(0.01)
        return len(self.complete) == len(self.brokers)


RE = {
    "creating": re.compile(r"Creating topic (\S+) with (\d+) partitions"),
    "topic_change": re.compile(r"Processing event TopicChange"),
    "new_topics": re.compile(r"New topics: .*new partition replica assignment \[(\d+) partitions\]"),
    "callback": re.compile(r"New partition creation callback for (\d+) partitions"),
    "lai": re.compile(r"Sending LeaderAndIsr request to broker (\d+) with (\d+) become-leader and (\d+) become-follower"),
    "um": re.compile(r"Sending UpdateMetadata request to brokers (\S+) for (\d+) partitions"),
    "created_log": re.compile(r"Created log for partition"),
    "um_applied": re.compile(r"\[Broker id=(\d+)\] Add (\d+) partitions and deleted"),
}


def timeline(cluster, offsets, t0, controller_id):
    """Prints what the logs say happened after t0; returns the controller's own state-write
    time (sum over creation callbacks of callback -> first LeaderAndIsr send) and partitions."""
    ctl = cluster[controller_id]
    lines = log_since(ctl, offsets[controller_id])

    def rel(t):
        return f"{(t - t0) * 1000:9.0f} ms"

    def first_last(key):
        hits = [(t, m) for t, line in lines for m in [RE[key].search(line)] if m]
        return hits

    cr = first_last("creating")
    tc = first_last("topic_change")
    nt = first_last("new_topics")
    cb = first_last("callback")
    lai = first_last("lai")
    um = first_last("um")
    print(f"  timeline from the logs (controller = broker {controller_id}; + ms after the request was sent):")
    if cr:
        print(f"    {rel(cr[0][0])}  first 'Creating topic' (request handler writes /config/topics/T, /brokers/topics/T)")
        print(f"    {rel(cr[-1][0])}  last  'Creating topic' ({len(cr)} topics)")
    if tc:
        print(f"    {rel(tc[0][0])}  controller: first TopicChange event ({len(tc)} TopicChange events"
              f" by {rel(tc[-1][0]).strip()})")
    if nt:
        print(f"    {rel(nt[0][0])}  controller: first 'New topics' (assignments read; "
              f"{sum(int(m.group(1)) for _, m in nt)} partitions in {len(nt)} batches)")
    if lai:
        print(f"    {rel(lai[0][0])}  controller: first LeaderAndIsr sent")
        print(f"    {rel(lai[-1][0])}  controller: last  LeaderAndIsr sent ({len(lai)} requests)")
    if um:
        print(f"    {rel(um[-1][0])}  controller: last  UpdateMetadata sent ({len(um)} requests, "
              f"{sum(int(m.group(2)) for _, m in um)} partition entries)")
    # Controller state writes: each creation callback -> the next LeaderAndIsr send.
    write_secs, write_parts = 0.0, 0
    for t, m in cb:
        nxt = next((tl for tl, _ in lai if tl >= t), None)
        if nxt is not None:
            write_secs += nxt - t
            write_parts += int(m.group(1))
    if cb:
        print(f"    controller: creation callback -> LeaderAndIsr sent (partition-state writes), summed "
              f"over {len(cb)} callbacks: {write_secs * 1000:.0f} ms for {write_parts} partitions")
    for b in cluster.brokers.values():
        bl = log_since(b, offsets[b.id])
        logs = [t for t, line in bl if RE["created_log"].search(line)]
        ums = [(t, int(m.group(2))) for t, line in bl for m in [RE["um_applied"].search(line)] if m]
        s = f"    broker {b.id}: "
        if logs:
            s += (f"created {len(logs)} partition logs from {rel(logs[0]).strip()} to {rel(logs[-1]).strip()} "
                  f"({len(logs) / max(logs[-1] - logs[0], 1e-3):.0f} logs/s); ")
        if ums:
            s += (f"{len(ums)} UpdateMetadata applied, last at {rel(ums[-1][0]).strip()} "
                  f"({sum(n for _, n in ums)} partition entries)")
        print(s)
    return write_secs, write_parts


RSS_SETTLE_S = 0.0
SIGKILL_AT_END = False


def rss_kib(cluster):
    out = []
    for b in cluster.brokers.values():
        try:
            with open(f"/proc/{b.pid}/status") as f:
                out.append(next(int(x.split()[1]) for x in f if x.startswith("VmRSS")))
        except (OSError, StopIteration):
            pass
    return out


def heap_kib(cluster):
    """{broker id: (in use, free in the arenas)} KiB from each broker's Prometheus endpoint
    (gregor_heap_in_use_bytes / gregor_heap_free_bytes: glibc mallinfo2 at scrape time); {} for a
    build without them. Load-independent: what the allocations hold, and what malloc keeps. A
    scrape of a broker with 10k partitions allocates and frees ~2 MB (per-partition gauges), so
    it is read only after the last RSS figure of a case."""
    out = {}
    for b in cluster.brokers.values():
        url = b.config.get("gregor.metrics.listener")
        if not url:
            continue
        try:
            with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
                text = r.read().decode()
        except OSError:
            continue
        vals = {}
        for line in text.splitlines():
            m = re.match(r"(gregor_heap_(?:in_use|free)_bytes) ([0-9.e+]+)$", line)
            if m:
                vals[m.group(1)] = float(m.group(2)) / 1024
        if len(vals) == 2:
            out[b.id] = (vals["gregor_heap_in_use_bytes"], vals["gregor_heap_free_bytes"])
    return out


def print_heap(label, heap, idle_heap, replicas):
    if not heap or set(heap) != set(idle_heap):
        return
    print(f"  heap {label} (mallinfo2, growth over idle / {replicas} replicas per broker): in use "
          + ", ".join(f"{(heap[b][0] - idle_heap[b][0]) * 1024 / replicas / 1024:.2f}" for b in sorted(heap))
          + " KiB; free in the arenas "
          + ", ".join(f"{heap[b][1] / 1024:.1f}" for b in sorted(heap)) + " MiB")


def cpu_secs(cluster):
    """{broker id: user+sys CPU seconds} from /proc/PID/stat (load-independent, unlike wall time)."""
    out = {}
    for b in cluster.brokers.values():
        s = benchlib.proc_cpu_s(b.pid) if b.proc else None
        if s is not None:
            out[b.id] = s
    return out


def run_case(zk_hosts, workdir, label, layout, rf, timeout, batch, keep_zk):
    """layout: [(topic, partitions)]. Returns a result dict."""
    total = sum(n for _, n in layout)
    print(f"== {label}: {len(layout)} topic(s), {total} partitions, RF {rf}, 3 brokers")
    connect = fresh_chroot(zk_hosts, "topics")
    cluster = H.Cluster(os.path.join(workdir, re.sub(r"[^A-Za-z0-9]+", "_", label).strip("_")), connect, n=3, config=CONFIG)
    for b in cluster.brokers.values():  # heap figures (heap_kib)
        b.config["gregor.metrics.listener"] = f"http://127.0.0.1:{H.free_port()}"
    res = {"label": label, "partitions": total, "topics": len(layout)}
    try:
        cluster.start(timeout=60)
        H.wait_for(lambda: len(admin_for(cluster[1]).list_topics(timeout=10).brokers) == 3, 60,
                   "3 brokers in metadata")
        controller_id = cluster.wait_controller()["brokerid"]
        idle_rss = rss_kib(cluster)
        idle_heap = heap_kib(cluster)
        poller = Poller(cluster, dict(layout))
        for a in poller.admins.values():  # connect before the clock starts
            a.list_topics(timeout=30)
        admin = admin_for(cluster[controller_id])
        admin.list_topics(timeout=30)
        offsets = {b.id: log_size(b) for b in cluster.brokers.values()}
        cpu0 = cpu_secs(cluster)
        resp = {}
        lock = threading.Lock()

        def done(fut, name):
            with lock:
                resp[name] = (time.time(), fut.exception())
        t0 = time.time()
        futs = admin.create_topics([NewTopic(t, n, rf) for t, n in layout],
                                   operation_timeout=600, request_timeout=900)
        for name, f in futs.items():
            f.add_done_callback(lambda fut, name=name: done(fut, name))
        ok = poller.run(timeout)
        # Let the response arrive if it has not yet.
        H.wait_for(lambda: len(resp) == len(futs), 600, "CreateTopics response", interval=0.05) \
            if ok else None
        errs = [e for _, e in resp.values() if e is not None]
        res["resp"] = max(t for t, _ in resp.values()) - t0 if len(resp) == len(futs) else None
        res["resp_errors"] = len(errs)
        if errs:
            benchlib.fail(f"{label}: CreateTopics: {len(errs)} topics failed, e.g. {errs[0]}")
        res["first"] = poller.first_any[0] - t0 if poller.first_any else None
        res["marks"] = {f: (t - t0, b) for f, (t, b) in poller.marks.items()}
        res["complete"] = {b: t - t0 for b, t in poller.complete.items()}
        res["ok"] = ok
        res["poll_ms"] = poller.poll_secs / max(poller.polls, 1) * 1000
        print("  CreateTopics response: " + (f"{res['resp'] * 1000:.0f} ms" if res["resp"] else "n/a")
              + "; first leader visible: " + (f"{res['first'] * 1000:.0f} ms" if res["first"] else "n/a"))
        for f in sorted(res["marks"]):
            t, b = res["marks"][f]
            print(f"  {int(f * 100)}% of leaders visible (broker {b}): {t * 1000:.0f} ms")
        for b, t in sorted(res["complete"].items(), key=lambda x: x[1]):
            print(f"  all leaders visible on broker {b}: {t * 1000:.0f} ms")
        if not ok:
            print(f"  NOT COMPLETE after {timeout} s on brokers "
                  f"{sorted(set(cluster.brokers) - set(poller.complete))}")
            benchlib.fail(f"{label}: not every leader visible after {timeout} s")
        print(f"  Metadata polls: {poller.polls}, mean {res['poll_ms']:.0f} ms each"
              + (f", {poller.wrong_broker} answered by another broker" if poller.wrong_broker else "")
              + (f", {poller.errors} errors" if poller.errors else ""))
        cpu1 = cpu_secs(cluster)
        print("  brokers' CPU (user+sys) from the request to all leaders visible: "
              + ", ".join(f"{b}: {cpu1[b] - cpu0[b]:.2f} s" for b in sorted(cpu1) if b in cpu0)
              + f"; load average {os.getloadavg()[0]:.2f}")
        time.sleep(0.5)  # let the last log lines land
        res["ctl_write_secs"], res["ctl_write_parts"] = timeline(cluster, offsets, t0, controller_id)
        rss = rss_kib(cluster)
        if rss:
            print(f"  broker RSS idle before: {[r // 1024 for r in idle_rss]} MiB; after creation: "
                  f"{[r // 1024 for r in rss]} MiB")
            if len(rss) == len(idle_rss):
                per = [(a - b) * 1024 / max(total * rf / 3, 1) for a, b in zip(rss, idle_rss)]
                print(f"  per replica (RSS growth / {total * rf // 3} replicas per broker): "
                      + ", ".join(f"{x / 1024:.1f} KiB" for x in per))
                res["per_replica"] = per
            if RSS_SETTLE_S <= 0:  # a scrape allocates and frees megabytes: after the last RSS read
                print_heap("after creation", heap_kib(cluster), idle_heap, total * rf // 3)
            if RSS_SETTLE_S > 0:  # fetchers and fetch sessions settle after the leaders appear
                time.sleep(RSS_SETTLE_S)
                rss2 = rss_kib(cluster)
                if len(rss2) == len(idle_rss):
                    per2 = [(a - b) * 1024 / max(total * rf / 3, 1) for a, b in zip(rss2, idle_rss)]
                    print(f"  {RSS_SETTLE_S:g} s later: RSS {[r // 1024 for r in rss2]} MiB, per replica "
                          + ", ".join(f"{x / 1024:.1f} KiB" for x in per2))
                print_heap(f"{RSS_SETTLE_S:g} s later", heap_kib(cluster), idle_heap, total * rf // 3)
        res["emfile"] = sum(len(re.findall("Too many open files", b.log(whole=True)))
                            for b in cluster.brokers.values())
        if res["emfile"]:
            print(f"  WARNING: {res['emfile']} 'Too many open files' lines in the broker logs: figures invalid")
            benchlib.fail(f"{label}: brokers ran out of file descriptors")
        if SIGKILL_AT_END:  # heap profilers (heaptrack) then report what was live, not a shutdown's leftovers
            for b in cluster.brokers.values():
                b.signal(signal.SIGKILL)
    finally:
        cluster.close()
    print(f"  ZooKeeper floor (same znodes, kazoo transactions of {batch} ops, brokers stopped):")
    rows, floor_connect = zk_floor(zk_hosts, layout, rf, batch)
    res["floor"] = rows
    for lbl, ops, secs in rows:
        print(f"    {lbl:62s} {ops:7d} ops in {secs * 1000:7.0f} ms = {ops / secs:8,.0f} ops/s")
    if keep_zk:
        drop_chroot(zk_hosts, connect)
        drop_chroot(zk_hosts, floor_connect)
    return res


def table(results):
    print()
    print("== summary (ms after the CreateTopics request was sent)")
    hdr = (f"{'case':28s} {'parts':>6s} {'response':>9s} {'first':>7s} {'all@1st':>8s} {'all@3':>8s} "
           f"{'parts/s':>8s} | {'ctl writes':>10s} {'ZK 1-infl':>9s} {'ZK 8-infl':>9s}")
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        comp = sorted(r["complete"].values())
        all1 = comp[0] if comp else None
        all3 = comp[-1] if r["ok"] else None

        def ms(x):
            return f"{x * 1000:.0f}" if x is not None else "n/a"
        rate = f"{r['partitions'] / all3:.0f}" if all3 else "n/a"
        # Controller's own partition-state writes vs the same znodes written straight to ZooKeeper.
        ctl_ops = r["topics"] + 2 * r["partitions"]
        ctl = ms(r["ctl_write_secs"]) if r["ctl_write_parts"] else "n/a"
        floor = {lbl: secs for lbl, _, secs in r["floor"]}
        z1 = next((s for lbl, s in floor.items() if lbl.startswith("controller") and "1 in" in lbl), None)
        z8 = next((s for lbl, s in floor.items() if lbl.startswith("controller") and "8 in" in lbl), None)
        print(f"{r['label']:28s} {r['partitions']:6d} {ms(r['resp']):>9s} {ms(r['first']):>7s} "
              f"{ms(all1):>8s} {ms(all3):>8s} {rate:>8s} | {ctl:>10s} {ms(z1):>9s} {ms(z8):>9s}"
              + ("  (EMFILE: invalid)" if r.get("emfile") else ""))
        if r["ctl_write_parts"] and z1:
            print(f"{'':28s} controller wrote {ctl_ops} znodes at {ctl_ops / max(r['ctl_write_secs'], 1e-3):,.0f}/s; "
                  f"ZooKeeper took {ctl_ops / z1:,.0f}/s (1 in flight), {ctl_ops / z8:,.0f}/s (8 in flight)")
    print("columns: response = CreateTopics answered; first = first partition with a leader in any "
          "broker's Metadata; all@1st / all@3 = every leader visible on the first broker / on all 3; "
          "parts/s = partitions / all@3; ctl writes = controller's partition-state write time (log: "
          "creation callback -> LeaderAndIsr sent); ZK n-infl = the same znodes written by kazoo "
          "(multis, n in flight)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zk", default=os.environ.get("GREGOR_ZK"), help="host:port of a ZooKeeper to use")
    ap.add_argument("--partitions", type=int, default=10000, help="case (a): partitions of the one topic")
    ap.add_argument("--topics", type=int, default=1000, help="case (b): number of topics")
    ap.add_argument("--per-topic", type=int, default=10, help="case (b): partitions per topic")
    ap.add_argument("--rf", type=int, default=3)
    ap.add_argument("--batch", type=int, default=500, help="ops per kazoo transaction (ZK floor)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds to wait for all leaders")
    ap.add_argument("--skip-one", action="store_true", help="skip case (a)")
    ap.add_argument("--skip-many", action="store_true", help="skip case (b)")
    ap.add_argument("--session-ms", type=int, default=0,
                    help="zookeeper.session.timeout.ms of the brokers (default: the harness's 3000; a "
                         "loaded 2-core box can expire a 3 s session during a 100k creation)")
    ap.add_argument("--rss-settle", type=float, default=0,
                    help="also print the brokers' RSS per replica this many seconds after the "
                         "creation completed (fetchers and fetch sessions settled)")
    ap.add_argument("--sizes", default="",
                    help="N[,M..]: instead of (a)/(b), one case per N: N/100 topics x 100 partitions in one "
                         "CreateTopics (the shape of issue 14's 100k try; --sizes 100000)")
    ap.add_argument("--sigkill", action="store_true",
                    help="SIGKILL the brokers at the end of each case instead of a clean stop (for a heap "
                         "profiler wrapped around gregord through GREGOR_BUILD: the live heap at the kill)")
    benchlib.add_smoke_arg(ap)
    args = ap.parse_args()
    benchlib.smoke_start(args, "bench_topics.py", partitions=100, topics=10, per_topic=10, timeout=60, sizes="")
    global RSS_SETTLE_S, SIGKILL_AT_END
    SIGKILL_AT_END = args.sigkill
    RSS_SETTLE_S = args.rss_settle
    if args.session_ms:
        CONFIG["zookeeper.session.timeout.ms"] = str(args.session_ms)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-up below

    if not os.access(H.GREGORD, os.X_OK):
        sys.exit(f"{H.GREGORD} not built (run make)")
    # gregord bounds the segment files it keeps open (gregor.max.open.log.files), so the
    # partition count needs no matching descriptor limit.
    soft, _ = raise_nofile(4096 + 500)
    workdir = benchlib.workdir("gregor-bench-topics-")
    zk_srv, zk_hosts = zookeeper(args.zk, workdir)
    print(f"ZooKeeper {zk_hosts}; work dir {workdir}; {os.cpu_count()} CPUs; "
          f"{time.strftime('%Y-%m-%d %H:%M')}; RLIMIT_NOFILE {soft}")
    results = []
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    if sizes:
        args.skip_one = args.skip_many = True
    try:
        for n in sizes:
            results.append(run_case(zk_hosts, workdir, f"{n // 100} topics x 100",
                                    [(f"bench-{i:05d}", 100) for i in range(n // 100)],
                                    args.rf, args.timeout, args.batch, zk_srv is None))
        if not args.skip_one:
            results.append(run_case(zk_hosts, workdir, f"(a) 1 topic x {args.partitions}",
                                    [("bench-one", args.partitions)], args.rf, args.timeout, args.batch,
                                    zk_srv is None))
        if not args.skip_many:
            results.append(run_case(zk_hosts, workdir, f"(b) {args.topics} topics x {args.per_topic}",
                                    [(f"bench-{i:05d}", args.per_topic) for i in range(args.topics)],
                                    args.rf, args.timeout, args.batch, zk_srv is None))
        table(results)
    finally:
        H.kill_leftovers()
        if zk_srv:
            zk_srv.stop()


if __name__ == "__main__":
    main()
    benchlib.finish()
