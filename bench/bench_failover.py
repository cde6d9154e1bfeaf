#!/usr/bin/python3
"""Broker failure, controlled shutdown and preferred election at scale. Prints numbers; asserts
nothing.

  /usr/bin/python3 bench/bench_failover.py                  # 1k and 10k partitions (several minutes)
  /usr/bin/python3 bench/bench_failover.py --sizes 1000     # quick run
  /usr/bin/python3 bench/bench_failover.py --victim controller   # kill/stop the controller instead
  /usr/bin/python3 bench/bench_failover.py --smoke          # every step, tiny (bench/smoke.sh)

--standby on|off sets gregor.controller.standby.enable (refresh 5 s when on) on every broker;
without it the brokers' default applies (on). --kill-only stops after step 1 (and step 0).
GREGOR_BENCH_PERF_FAILOVER=PREFIX records every broker (perf record -g) during step 0 (PREFIX.0)
and step 1 (PREFIX.1); `perf report -i PREFIX.1 --pid <new controller>` gives the failover.
--delete-controller adds step 0 before the others: /controller deleted by hand (no broker lost),
from the delete to the new controller's first UpdateMetadata/LeaderAndIsr sent, and whether it
started from its standby context (the victim is then chosen against the new controller).

For each size N: a fresh 3-broker cluster (zookeeper.session.timeout.ms --session-ms, 6000),
N partitions RF 3 in topics of --per-topic (100) partitions (Kafka's default placement: each
broker is the preferred leader of ~N/3), created through the AdminClient; then, with one broker
(the victim, by default a broker that is not the controller):

1. SIGKILL. Reported: kill -> /brokers/ids/V deleted (session expiry, seen through a kazoo watch),
   and from the kill and from the expiry until every partition V led shows another leader in the
   Metadata of each surviving broker (Metadata polled round-robin, one AdminClient bootstrapped on
   each survivor; the answering broker is checked), and the same by bench/md_probe (step 4; at
   100k a confluent-kafka poll takes ~0.5 s, two survivors round-robin ~1 s, which the figure
   then carries; --probe-only leaves the confluent-kafka polls out). Plus a timeline from the controller's log
   (BrokerChange processed, LeaderAndIsr/UpdateMetadata sent, event finished) and the survivors'
   logs (UpdateMetadata applied).
2. V restarted; time until it is back in every ISR (Metadata).
3. Preferred election (`gregorctl elect-leaders --election-type preferred --all-topic-partitions`,
   one ElectLeaders request): request time, and time until every partition shows its preferred
   leader in Metadata on all brokers; partitions/s over the partitions that moved (~N/3).
4. Controlled shutdown: SIGTERM to V (leading ~1/3 again after step 3): SIGTERM -> process exit,
   and SIGTERM -> no partition led by V in the survivors' Metadata, seen by the confluent-kafka
   polls above and by bench/md_probe (build/bench/md_probe: one process per survivor, raw
   Metadata v1 polls parsed in place, ~20x less client CPU per poll at 100k; a pause of 50 ms and
   at least the last poll's duration between polls keeps a survivor building Metadata answers at
   most half the time of one thread; its figure is within a poll or two of the survivors' own
   cache update); --cs-probe-only leaves the
   confluent-kafka polls out. The exit is noted by a separate process (pidfd), not this script's
   waiter thread, which waits for the GIL behind the polls. CPU of the survivors, ZooKeeper (GREGOR_BENCH_ZK_PID), the
   stopping broker and this script; the controller's log lines. GREGOR_BENCH_PERF=FILE records
   the controller meanwhile (perf record -g; GREGOR_BENCH_PERF_ALL=1: every process).
Then a ZooKeeper reference: setData of the same number of partition-state znodes in kazoo
transactions of 500 (one in flight, as the controller writes them), ops/s.

gregord bounds the segment files it keeps open (gregor.max.open.log.files, automatic by default),
so partition count no longer needs matching descriptors; runs whose logs still show "Too many
open files" are flagged.
"""

import argparse
import json
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import H, admin_for, fresh_chroot, log_since, log_size, raise_nofile, rss_kib, zookeeper  # noqa: E402

from confluent_kafka.admin import NewTopic  # noqa: E402


class Watcher:
    """Polls Metadata round-robin from `brokers` until pred(md) holds on each; records when
    (midpoint of the request that first showed it)."""

    def __init__(self, brokers):
        self.brokers = list(brokers)
        self.admins = {b.id: admin_for(b) for b in self.brokers}
        for a in self.admins.values():
            a.list_topics(timeout=60)

    def metadata(self, broker_id):
        return self.admins[broker_id].list_topics(timeout=120)

    def wait(self, pred, timeout, gate=None, idle=0.05, abort=None):
        """pred(md) -> bool. gate(): while it returns False, poll slowly (every `idle` s).
        abort(): checked every 5 s; a message (truthy) stops the wait with RuntimeError.
        Returns ({broker id: time}, polls, mean poll seconds, answers from another broker).
        self.why: None when every broker got there, else why not (timeout, abort reason)."""
        done, polls, secs, wrong = {}, 0, 0.0, 0
        self.why = None
        deadline = time.time() + timeout
        next_check = time.time() + 5
        while len(done) < len(self.brokers) and time.time() < deadline:
            if abort is not None and time.time() >= next_check:
                next_check = time.time() + 5
                why = abort()
                if why:
                    self.why = why
                    return done, polls, secs / max(polls, 1), wrong
            if gate is not None and not gate():
                time.sleep(idle)
            for b in self.brokers:
                if b.id in done:
                    continue
                t1 = time.time()
                try:
                    md = self.metadata(b.id)
                except Exception:
                    continue
                t2 = time.time()
                polls += 1
                secs += t2 - t1
                if md.orig_broker_id != b.id:
                    wrong += 1
                if pred(md):
                    done[b.id] = (t1 + t2) / 2
            time.sleep(0.005)
        if len(done) < len(self.brokers):
            self.why = (f"timed out after {timeout:.0f} s on brokers "
                        f"{sorted(b.id for b in self.brokers if b.id not in done)}")
        return done, polls, secs / max(polls, 1), wrong


MD_PROBE = os.path.join(H.BUILD, "bench", "md_probe")
PROBE_GAP_MS = 50  # and at least the last poll's duration (md_probe.c)


def start_probes(brokers, victim_id, timeout):
    """One md_probe (bench/md_probe.c) per broker: raw Metadata polls, PROBE_GAP_MS apart, until
    no partition of the bench's topics is led by victim_id or leaderless. Returns
    {broker id: Popen} once each has answered a first poll (connected and warm); {} when the
    probe is not built."""
    if not os.access(MD_PROBE, os.X_OK):
        print(f"     ({MD_PROBE} not built: no md_probe figure)")
        if benchlib.SMOKE:  # the smoke run is md_probe's check too
            benchlib.fail(f"{MD_PROBE} not built")
        return {}
    probes = {b.id: subprocess.Popen([MD_PROBE, "127.0.0.1", str(b.port), str(victim_id), "fo-",
                                      str(timeout), str(PROBE_GAP_MS)],
                                     stdout=subprocess.PIPE, text=True) for b in brokers}
    for p in probes.values():
        p.first = p.stdout.readline()
    return probes


def wait_probes(probes, timeout):
    """Waits (up to timeout seconds each) for the probes to see what they wait for and exit."""
    for p in probes.values():
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            pass


def finish_probes(probes):
    """({broker id: midpoint of the first poll that showed it}, {broker id: mean poll seconds})."""
    done, mean = {}, {}
    for b, p in probes.items():
        try:
            out, _ = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        lines = [p.first] + out.splitlines()
        polls = [float(w[2]) - float(w[1]) for w in (ln.split() for ln in lines) if w and w[0] == "poll"]
        mean[b] = sum(polls) / max(len(polls), 1)
        for ln in lines:
            if ln.startswith("done "):
                done[b] = float(ln.split()[1])
    return done, mean


EXIT_WATCH = ("import os, select, sys, time\n"
              "fd = os.pidfd_open(int(sys.argv[1]))\n"
              "p = select.poll()\n"
              "p.register(fd, select.POLLIN)\n"
              "print('ready', flush=True)\n"
              "p.poll()\n"
              "print(repr(time.time()), flush=True)\n")


def start_exit_watch(pid):
    """A separate process that notes when pid exits (pidfd_open + poll): this script's own waiter
    thread needs the GIL, which the confluent-kafka polls hold for most of a second at 100k.
    Returns the Popen once it watches, or None."""
    try:
        w = subprocess.Popen([sys.executable, "-c", EXIT_WATCH, str(pid)], stdout=subprocess.PIPE, text=True)
        if w.stdout.readline().strip() == "ready":
            return w
        w.kill()
    except OSError:
        pass
    return None


def finish_exit_watch(w):
    """The time the watched process exited, or None."""
    if w is None:
        return None
    try:
        out, _ = w.communicate(timeout=30)
        return float(out.split()[0])
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        w.kill()
        return None


def partitions(md, topics):
    for t in topics:
        tm = md.topics.get(t)
        if tm is None:
            continue
        for p in tm.partitions.values():
            yield t, p


RE = {
    "broker_change": re.compile(r"Processing event BrokerChange"),
    "deleted": re.compile(r"Newly added brokers: .*deleted brokers: (\S*),"),
    "lai": re.compile(r"Sending LeaderAndIsr request to broker (\d+) with (\d+) become-leader and (\d+) become-follower"),
    "um": re.compile(r"Sending UpdateMetadata request to brokers (\S+) for (\d+) partitions"),
    "epochs": re.compile(r"Updated broker epochs cache"),
    "elected": re.compile(r"successfully elected as the controller"),
    "assignments": re.compile(r"Loaded the replica assignments of (\d+) topics \((\d+) partitions\) in (\d+) ms"),
    "states": re.compile(r"Loaded (\d+) partition states in (\d+) ms"),
    "ready": re.compile(r"ready as controller"),
    "failover_end": re.compile(r"Starting the controller scheduler"),
    "um_applied": re.compile(r"\[Broker id=(\d+)\] Add (\d+) partitions and deleted"),
    "cs_req": re.compile(r"Processing event ControlledShutdown\((\d+)\)"),
    "cs_move": re.compile(r"Controlled shutdown of broker (\d+): moving leadership of (\d+) partitions"),
    "cs_left": re.compile(r"Controlled shutdown of broker (\d+): (\d+) partitions still led"),
    "cs_ok": re.compile(r"Controlled shutdown succeeded"),
    "cs_took": re.compile(r"Event ControlledShutdown took (\d+) ms \(event thread CPU (\d+) ms\)"),
    "zk_elect": re.compile(r"Wrote (\d+) elected leader\(s\) to ZooKeeper in (\d+) ms"),
    "zk_isr": re.compile(r"Wrote (\d+) ISR shrink\(s\) to ZooKeeper in (\d+) ms"),
    "rm_close": re.compile(r"(\[ReplicaManager broker=\d+\] Closing the logs)"),
    "rm_done": re.compile(r"(\[ReplicaManager broker=\d+\] Shut down completely)"),
    "srv_done": re.compile(r"(\[KafkaServer id=\d+\] shut down completed)"),
    "cs_retry": re.compile(r"Retrying controlled shutdown"),
    "elect": re.compile(r"Starting replica leader election \((\w+)\) for (\d+) partitions"),
    "emfile": re.compile(r"Too many open files"),
}


def hits(lines, key, since=0.0):
    return [(t, m) for t, line in lines if t >= since for m in [RE[key].search(line)] if m]


def print_timeline(title, t0, rows):
    print(f"  {title}")
    for t, what in sorted((t, w) for t, w in rows if t is not None):
        print(f"    {(t - t0) * 1000:9.0f} ms  {what}")


def zk_set_rate(zk_hosts, n, batch=500):
    """Creates n state-sized znodes, then setData on all of them in transactions of `batch`, one
    in flight. Returns (ops, seconds) of the setData pass."""
    connect = fresh_chroot(zk_hosts, "setrate")
    zk = H.kazoo_client(connect)
    try:
        st = lambda e: json.dumps({"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": e,  # noqa: E731
                                   "isr": [1, 2, 3]}, separators=(",", ":")).encode()
        zk.ensure_path("/s")
        for kind in ("create", "set"):
            t0 = time.monotonic()
            for i in range(0, n, batch):
                t = zk.transaction()
                for j in range(i, min(n, i + batch)):
                    if kind == "create":
                        t.create(f"/s/{j}", st(0))
                    else:
                        t.set_data(f"/s/{j}", st(1), 0)
                res = t.commit()
                bad = [x for x in res if isinstance(x, Exception)]
                if bad:
                    raise RuntimeError(f"multi failed: {bad[0]!r}")
            secs = time.monotonic() - t0
        return n, secs
    finally:
        H.close_kazoo(zk)


def ctl(cluster, broker, *args, timeout=900):
    return subprocess.run([H.GREGORCTL, "--bootstrap-server", f"127.0.0.1:{broker.port}",
                           "--timeout-ms", str(timeout * 1000), *args],
                          capture_output=True, text=True, timeout=timeout + 30)


def emfile_count(cluster):
    n = 0
    for b in cluster.brokers.values():
        n += len(hits(log_since(b, 0), "emfile"))
    return n


def dead(brokers):
    """An abort() for Watcher.wait: why the wait cannot end (a broker that should run exited)."""
    def check():
        for b in brokers:
            rc = b.returncode
            if rc is not None:
                return f"broker {b.id} exited (code {rc}); log tail: {' | '.join(b.log_tail(3).splitlines()[-3:])}"
        return None
    return check


def proc_cpu(pid):
    """user+sys seconds of process pid so far (0 when it is gone)."""
    return benchlib.proc_cpu_s(pid) or 0.0


def incomplete(what, why):
    print(f"     did not complete: {what}: {why}")
    benchlib.fail(f"did not complete: {what}")


def rss_line(cluster, n, idle):
    """Each running broker's RSS and the growth per replica over its idle RSS (each broker holds
    n replicas with RF 3 on 3 brokers)."""
    parts = []
    for b in cluster.brokers.values():
        if not b.running():
            continue
        kib = rss_kib(b)
        grow = (kib - idle.get(b.id, 0)) * 1024 / max(n, 1)
        parts.append(f"broker {b.id} {kib / 1024:.0f} MiB ({grow:.0f} B per replica over idle)")
    return "; ".join(parts)


def perf_start(brokers, suffix):
    """perf record -g of the running brokers' processes to $GREGOR_BENCH_PERF_FAILOVER + suffix."""
    prefix = os.environ.get("GREGOR_BENCH_PERF_FAILOVER")
    if not prefix:
        return None
    pids = ",".join(str(b.proc.pid) for b in brokers if b.running())
    p = subprocess.Popen(["perf", "record", "-q", "-g", "-o", prefix + suffix, "-p", pids],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # perf attached before the event
    return p


def perf_stop(p):
    if p:
        p.send_signal(signal.SIGINT)
        p.wait(60)


def controller_moved(cluster, r, timeout):
    """0. /controller deleted by hand (no broker lost), after two standby refresh periods (with
    --standby): from the delete to the new controller's first UpdateMetadata / LeaderAndIsr sent
    (its log line's own timestamp), and how it loaded its context (warm or cold). The old
    controller resigns first, so another broker usually wins."""
    if ARGS.standby != "off":
        time.sleep(12)  # refresh.ms 5000: every standby has refreshed since the creation
    brokers = list(cluster.brokers.values())
    offsets = {b.id: log_size(b) for b in brokers}
    old = cluster.wait_controller()
    perf = perf_start(brokers, ".0")
    t0 = time.time()
    cluster.zk.delete("/controller")
    cluster.wait_new_controller(old["_stat"].czxid, timeout=timeout)
    new = cluster.wait_controller()["brokerid"]
    b = cluster[new]
    ready = load = first = None
    deadline = time.time() + timeout
    while time.time() < deadline and first is None:
        lines = log_since(b, offsets[b.id])
        ready = next((ln for _, ln in lines if "ready as controller" in ln), None)
        load = next((ln for _, ln in lines if "Loaded" in ln and "partition states in" in ln), None)
        if ready:
            first = next((t for t, ln in lines if t >= t0 - 0.001 and
                          ("Sending UpdateMetadata request" in ln or "Sending LeaderAndIsr request" in ln)), None)
        if first is None:
            time.sleep(0.2)
    perf_stop(perf)
    r["moved"] = first - t0 if first else None
    print(f"  0. /controller deleted: broker {old['brokerid']} -> {new}; delete -> its first "
          f"UpdateMetadata/LeaderAndIsr sent: " + (f"{r['moved'] * 1000:.0f} ms" if first else "n/a"))
    for ln in (load, ready):
        if ln:
            print("     " + ln[ln.find("]", ln.find("[Controller")) + 2:].strip())


def bench_size(zk_hosts, workdir, n, per_topic, session_ms, victim_kind, timeout, only_cs=False,
               cs_probe_only=False, probe_only=False):
    n_topics = (n + per_topic - 1) // per_topic
    topics = [f"fo-{i:04d}" for i in range(n_topics)]
    sizes = [min(per_topic, n - i * per_topic) for i in range(n_topics)]
    print(f"== {n} partitions ({n_topics} topics x {per_topic}), RF 3, 3 brokers, "
          f"zookeeper.session.timeout.ms={session_ms}")
    connect = fresh_chroot(zk_hosts, f"failover{n}")
    cluster = H.Cluster(os.path.join(workdir, f"n{n}"), connect, n=3, config={
        "zookeeper.session.timeout.ms": str(session_ms),
        "auto.leader.rebalance.enable": "false",
        "auto.create.topics.enable": "false",
        "controlled.shutdown.max.retries": "3",
        **({"gregor.controller.standby.enable": "true",
            "gregor.controller.standby.refresh.ms": "5000"} if ARGS.standby == "on" else {}),
        **({"gregor.controller.standby.enable": "false"} if ARGS.standby == "off" else {}),
    })
    r = {"n": n}
    try:
        cluster.start(timeout=60)
        H.wait_for(lambda: len(admin_for(cluster[1]).list_topics(timeout=10).brokers) == 3, 60,
                   "3 brokers in metadata")
        controller = cluster.wait_controller()["brokerid"]
        admin = admin_for(cluster[controller], socket_timeout_ms=min(300000, int(timeout * 1000)))  # librdkafka max
        idle = {b.id: rss_kib(b) for b in cluster.brokers.values()}
        all_b = list(cluster.brokers.values())

        def abort_setup():
            if emfile_count(cluster):
                return (f"brokers ran out of file descriptors ({emfile_count(cluster)} 'Too many open files' "
                        f"log lines) while creating {n} partition logs; RLIMIT_NOFILE "
                        f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]}")
            return dead(all_b)()
        offsets = {b.id: log_size(b) for b in all_b}
        t0 = time.time()
        futs = admin.create_topics([NewTopic(t, s, 3) for t, s in zip(topics, sizes)],
                                   operation_timeout=min(timeout, 600), request_timeout=timeout)
        errs, timeouts = [], 0
        for t, f in futs.items():
            try:
                f.result(timeout=timeout)
            except Exception as e:
                if "TIMED_OUT" in str(e) or "Timed out" in str(e):
                    timeouts += 1  # the client gave up waiting; the creation goes on
                else:
                    errs.append(f"{t}: {e}")
        t_resp = time.time() - t0
        if errs:
            incomplete("CreateTopics", f"{len(errs)} topic errors, first: {errs[0]}")
            r["setup"] = None
            return r
        if timeouts:
            print(f"     CreateTopics: the client timed out on {timeouts} topics after {t_resp:.0f} s "
                  "(waiting for the leaders in Metadata instead)")
            t_resp = None
        every = Watcher(all_b)

        def leaders(md):
            ps = list(partitions(md, topics))
            return len(ps) == n and all(p.leader >= 0 for _, p in ps)

        def full(md):
            ps = list(partitions(md, topics))
            return len(ps) == n and all(p.leader >= 0 and len(p.isrs) == 3 for _, p in ps)
        done, _, _, _ = every.wait(leaders, timeout, abort=abort_setup)
        r["create_resp"] = t_resp
        r["create_led"] = max(done.values()) - t0 if every.why is None else None
        print("  creation: CreateTopics answered after " + (f"{t_resp:.2f} s" if t_resp else "n/a")
              + "; every leader in all 3 brokers' "
              "Metadata after " + (f"{r['create_led']:.2f} s ({n / r['create_led']:,.0f} partitions/s)"
                                   if r["create_led"] else "n/a"))
        if every.why:
            incomplete("every leader visible", every.why)
            return r
        done, _, _, _ = every.wait(full, timeout, abort=abort_setup)
        r["create_isr"] = max(done.values()) - t0 if every.why is None else None
        created = {b.id: len([1 for _, ln in log_since(b, offsets[b.id]) if "Created log for partition" in ln])
                   for b in all_b}
        print(f"  setup: every ISR full on all brokers after "
              + (f"{r['create_isr']:.1f} s" if r["create_isr"] else "n/a")
              + f"; logs created per broker: {created}")
        if every.why:
            incomplete("every ISR full", every.why)
            return r
        r["rss"] = rss_line(cluster, n, idle)
        print(f"  RSS after creation: {r['rss']}")
        if ARGS.delete_controller:
            controller_moved(cluster, r, timeout)
            controller = cluster.wait_controller()["brokerid"]

        victim = next(b for b in cluster.brokers.values()
                      if (b.id == controller) == (victim_kind == "controller"))
        survivors = [b for b in cluster.brokers.values() if b is not victim]
        md = every.metadata(survivors[0].id)
        led = {(t, p.id) for t, p in partitions(md, topics) if p.leader == victim.id}
        preferred = {(t, p.id): p.replicas[0] for t, p in partitions(md, topics)}
        print(f"  victim: broker {victim.id} ({'controller' if victim.id == controller else 'not the controller'}, "
              f"controller is {controller}), leads {len(led)} partitions")

        ctl_b = cluster[controller]
        if not only_cs:
            # ---------------- 1. SIGKILL ----------------
            zk = cluster.zk
            gone = threading.Event()
            expiry = {}
            def on_change(ev):
                if ev.type == "DELETED" and not gone.is_set():
                    expiry["t"] = time.time()
                    gone.set()
            assert zk.exists(f"/brokers/ids/{victim.id}", watch=on_change)
            offsets = {b.id: log_size(b) for b in cluster.brokers.values()}
            watch = Watcher(survivors)
            kprobes = start_probes(survivors, victim.id, timeout + session_ms / 1000)
            perf = perf_start(survivors, ".1")
            t_kill = time.time()
            victim.kill()
            def moved(md):
                lead = {(t, p.id): p.leader for t, p in partitions(md, topics)}
                return all(lead.get(tp, -1) not in (-1, victim.id) for tp in led)
            if probe_only and kprobes:  # no confluent-kafka polls: only md_probe watches
                done, polls, mean_poll, wrong = {}, 0, 0.0, 0
                watch.why = None
                wait_probes(kprobes, timeout + session_ms / 1000)
            else:
                done, polls, mean_poll, wrong = watch.wait(moved, timeout + session_ms / 1000, gate=gone.is_set,
                                                           abort=dead(survivors))
            kdone, kmean = finish_probes(kprobes)
            t_exp = expiry.get("t")
            r["kill_expiry"] = t_exp - t_kill if t_exp else None
            r["kill_led"] = {b: t - t_kill for b, t in done.items()}
            r["exp_led"] = {b: t - t_exp for b, t in done.items()} if t_exp else {}
            print(f"  1. SIGKILL of broker {victim.id}: session expiry (/brokers/ids/{victim.id} deleted) after "
                  + (f"{r['kill_expiry'] * 1000:.0f} ms" if t_exp else "n/a"))
            for b, t in sorted(done.items(), key=lambda x: x[1]):
                print(f"     new leaders for all {len(led)} partitions in broker {b}'s Metadata: "
                      f"{(t - t_kill) * 1000:.0f} ms after the kill, "
                      + (f"{(t - t_exp) * 1000:.0f} ms after the expiry" if t_exp else ""))
            if watch.why:
                incomplete("new leaders in the survivors' Metadata", watch.why)
            if polls:
                print(f"     ({polls} Metadata polls, mean {mean_poll * 1000:.0f} ms"
                      + (f", {wrong} answered by another broker" if wrong else "") + ")")
            for b, t in sorted(kdone.items(), key=lambda x: x[1]):
                print(f"     new leaders in broker {b}'s Metadata: {(t - t_kill) * 1000:.0f} ms after the kill, "
                      + (f"{(t - t_exp) * 1000:.0f} ms after the expiry" if t_exp else "")
                      + f" (md_probe, mean poll {kmean.get(b, 0) * 1000:.0f} ms)")
            r["exp_led_probe"] = (max(kdone.values()) - t_exp
                                  if t_exp and kprobes and len(kdone) == len(survivors) else None)
            ctl_b = cluster[cluster.wait_controller()["brokerid"]]
            since = t_kill - 0.01
            try:  # the event goes on after the leaders moved (ISR shrink writes): wait for its end
                # (the controller's own broker killed: its successor's failover does that work, and
                # sees no BrokerChange -- the broker was gone before it read /brokers/ids)
                H.wait_for(lambda: any(hits(log_since(ctl_b, offsets.get(ctl_b.id, 0)), k, since)
                                       for k in ("epochs", "failover_end")), 120,
                           "end of the BrokerChange event or the failover", interval=0.2)
            except AssertionError:
                pass
            time.sleep(0.3)
            perf_stop(perf)
            cl = log_since(ctl_b, offsets[ctl_b.id] if ctl_b.id in offsets else 0)
            bc = hits(cl, "broker_change", since)
            lai = hits(cl, "lai", since)
            um = hits(cl, "um", since)
            ep = hits(cl, "epochs", since)
            rows = [(t_exp, f"/brokers/ids/{victim.id} deleted (kazoo watch)")]
            if bc:
                rows.append((bc[0][0], f"controller {ctl_b.id}: BrokerChange event starts"))
            if lai:
                rows.append((lai[0][0], f"controller: first LeaderAndIsr sent ({lai[0][1].group(2)} become-leader "
                                        f"to broker {lai[0][1].group(1)})"))
                rows.append((lai[-1][0], f"controller: last LeaderAndIsr sent ({len(lai)} in all)"))
            if um:
                rows.append((um[0][0], f"controller: first UpdateMetadata sent ({um[0][1].group(2)} partitions)"))
            if ep:
                rows.append((ep[0][0], "controller: BrokerChange done ('Updated broker epochs cache')"))
            for t, m in hits(cl, "elected", since):
                rows.append((t, f"controller {ctl_b.id}: elected"))
            for t, m in hits(cl, "assignments", since):
                rows.append((t, f"controller: assignments of {m.group(1)} topics read in {m.group(3)} ms"))
            for t, m in hits(cl, "states", since):
                rows.append((t, f"controller: {m.group(1)} partition states loaded in {m.group(2)} ms"))
            for t, m in hits(cl, "ready", since):
                rows.append((t, "controller: 'ready as controller'"))
            for t, m in hits(cl, "zk_isr", since):
                rows.append((t, f"controller: {m.group(1)} ISR shrinks written in {m.group(2)} ms"))
            for t, m in hits(cl, "zk_elect", since):
                rows.append((t, f"controller: {m.group(1)} elected leaders written in {m.group(2)} ms"))
            for t, m in hits(cl, "failover_end", since):
                rows.append((t, "controller: failover done ('Starting the controller scheduler')"))
            for b in survivors:
                ua = hits(log_since(b, offsets[b.id]), "um_applied", since)
                if ua:
                    rows.append((ua[0][0], f"broker {b.id}: first UpdateMetadata applied ({ua[0][1].group(2)} partitions)"))
                    rows.append((ua[-1][0], f"broker {b.id}: last UpdateMetadata applied ({len(ua)} in all)"))
            for b, t in done.items():
                rows.append((t, f"client sees every new leader on broker {b}"))
            for b, t in kdone.items():
                rows.append((t, f"md_probe sees every new leader on broker {b}"))
            r["kill_ctl"] = (ep[0][0] - bc[0][0]) if bc and ep else None
            r["kill_ctl_first_lai"] = (lai[0][0] - bc[0][0]) if bc and lai else None
            print_timeline("timeline (ms after the kill):", t_kill, rows)
            if ARGS.kill_only:
                raise KillOnlyDone()
            # ---------------- 2. restart ----------------
            t0 = time.time()
            victim.start()
            try:
                cluster.wait_registered([victim.id], timeout=120)
            except AssertionError as e:
                incomplete(f"restart of broker {victim.id}", f"not registered in 120 s ({e})")
                return r
            t_reg = time.time() - t0
            def back(md):
                ps = list(partitions(md, topics))
                return len(ps) == n and all(victim.id in p.isrs for _, p in ps)
            rw = Watcher([ctl_b])
            done, _, _, _ = rw.wait(back, timeout, abort=dead(all_b))
            r["rejoin"] = (done[ctl_b.id] - t0) if done else None
            loaded = [ln for _, ln in log_since(victim, offsets[victim.id]) if "Loaded " in ln and " log(s) from " in ln]
            print(f"  2. restart of broker {victim.id}: registered after {t_reg * 1000:.0f} ms, back in every ISR after "
                  + (f"{r['rejoin'] * 1000:.0f} ms" if done else "n/a")
                  + (f" ({loaded[-1].split('] ', 1)[-1]})" if loaded else ""))
            if rw.why:
                incomplete("restarted broker back in every ISR", rw.why)
            # ---------------- 3. preferred election ----------------
            every = Watcher(cluster.brokers.values())
            md = every.metadata(ctl_b.id)
            imbalanced = sum(1 for t, p in partitions(md, topics) if p.leader != p.replicas[0])
            offsets = {b.id: log_size(b) for b in cluster.brokers.values()}
            t0 = time.time()
            box = {}
            def run_elect():
                box["proc"] = ctl(cluster, ctl_b, "elect-leaders", "--election-type", "preferred",
                                  "--all-topic-partitions", timeout=int(timeout))
                box["t"] = time.time()
            th = threading.Thread(target=run_elect)
            th.start()
            def balanced(md):
                ps = list(partitions(md, topics))
                return len(ps) == n and all(p.leader == preferred[(t, p.id)] for t, p in ps)
            done, polls, mean_poll, _ = every.wait(balanced, timeout, abort=dead(all_b))
            if every.why:
                incomplete("every preferred leader in Metadata", every.why)
            th.join(timeout + 60)
            if "proc" not in box:
                incomplete("gregorctl elect-leaders", "did not return")
                return r
            proc = box["proc"]
            r["elect_moved"] = imbalanced
            r["elect_req"] = box["t"] - t0
            r["elect_all"] = max(done.values()) - t0 if len(done) == 3 else None
            print(f"  3. preferred election (gregorctl elect-leaders --all-topic-partitions), "
                  f"{imbalanced} partitions not on their preferred leader:")
            if proc.returncode != 0:
                print(f"     gregorctl exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
            print(f"     ElectLeaders request (gregorctl run): {r['elect_req'] * 1000:.0f} ms"
                  + (f" ({imbalanced / r['elect_req']:.0f} partitions/s)" if imbalanced else ""))
            for b, t in sorted(done.items(), key=lambda x: x[1]):
                print(f"     every preferred leader in broker {b}'s Metadata: {(t - t0) * 1000:.0f} ms")
            if r["elect_all"]:
                print(f"     -> {imbalanced / r['elect_all']:.0f} partitions/s to all brokers' Metadata "
                      f"({polls} polls, mean {mean_poll * 1000:.0f} ms)")
            time.sleep(0.5)
            cl = log_since(ctl_b, offsets[ctl_b.id])
            el = hits(cl, "elect", t0 - 0.01)
            lai = hits(cl, "lai", t0 - 0.01)
            um = hits(cl, "um", t0 - 0.01)
            rows = []
            if el:
                rows.append((el[0][0], f"controller: election starts ({el[0][1].group(2)} partitions)"))
            if lai:
                rows.append((lai[0][0], "controller: first LeaderAndIsr sent"))
                rows.append((lai[-1][0], f"controller: last LeaderAndIsr sent ({len(lai)} in all)"))
            if um:
                rows.append((um[-1][0], f"controller: last UpdateMetadata sent ({len(um)} in all)"))
            for b in cluster.brokers.values():
                ua = hits(log_since(b, offsets[b.id]), "um_applied", t0 - 0.01)
                if ua:
                    rows.append((ua[-1][0], f"broker {b.id}: last UpdateMetadata applied"))
            rows.append((box["t"], "gregorctl returned"))
            print_timeline("timeline (ms after gregorctl started):", t0, rows)
        # ---------------- 4. controlled shutdown ----------------
        md = every.metadata(survivors[0].id)
        led = {(t, p.id) for t, p in partitions(md, topics) if p.leader == victim.id}
        print(f"  4. controlled shutdown (SIGTERM) of broker {victim.id}, leading {len(led)} partitions:")
        offsets = {b.id: log_size(b) for b in cluster.brokers.values()}
        watch = Watcher(survivors)
        cpu0 = {b.id: proc_cpu(b.proc.pid) for b in survivors}
        zk_pid = os.environ.get("GREGOR_BENCH_ZK_PID")
        zk_cpu0 = proc_cpu(int(zk_pid)) if zk_pid else None
        perf = None
        if os.environ.get("GREGOR_BENCH_PERF"):  # profile the controller during the shutdown
            ev = os.environ.get("GREGOR_BENCH_PERF_EVENT")  # e.g. sched:sched_switch (off-CPU)
            perf = subprocess.Popen(["perf", "record", "-q", "-g", "-o", os.environ["GREGOR_BENCH_PERF"]]
                                    + (["-e", ev] if ev else [])
                                    # GREGOR_BENCH_PERF_ALL=1: every process (perf record -a)
                                    + (["-a"] if os.environ.get("GREGOR_BENCH_PERF_ALL") else ["-p", str(ctl_b.proc.pid)]),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
        probes = start_probes(survivors, victim.id, timeout)
        exit_watch = start_exit_watch(victim.proc.pid)
        # the stopping broker's CPU: its total once reaped (RUSAGE_CHILDREN grows by it) minus now
        v_cpu0 = proc_cpu(victim.proc.pid)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        me0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.time()
        victim.signal(15)
        exit_box = {}

        def waiter():
            try:
                exit_box["code"] = victim.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                exit_box["code"] = "timeout"
            exit_box["t"] = time.time()
        wt = threading.Thread(target=waiter)
        wt.start()

        def none_led(md):
            return not any(p.leader == victim.id or (t, p.id) in led and p.leader < 0
                           for t, p in partitions(md, topics))
        if (cs_probe_only or probe_only) and probes:  # no confluent-kafka polls: only md_probe watches
            done, polls, mean_poll = {}, 0, 0.0
            wait_probes(probes, timeout)
        else:
            done, polls, mean_poll, _ = watch.wait(none_led, timeout, abort=dead(survivors))
            if watch.why:
                incomplete("no partition led by the stopped broker in Metadata", watch.why)
        wt.join()
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the stopping broker reaped, perf not yet
        me1 = resource.getrusage(resource.RUSAGE_SELF)
        if perf:
            perf.send_signal(signal.SIGINT)
            perf.wait(60)
        cpu = {b: proc_cpu(b_.proc.pid) - cpu0[b] for b_ in survivors for b in [b_.id]}
        v_cpu = (ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime) - v_cpu0
        print("     CPU (user+sys) from SIGTERM to the end of the wait: "
              + ", ".join(f"broker {b} {s * 1000:.0f} ms" for b, s in cpu.items())
              + (f", ZooKeeper {(proc_cpu(int(zk_pid)) - zk_cpu0) * 1000:.0f} ms" if zk_pid else "")
              + f", stopping broker {victim.id} {v_cpu * 1000:.0f} ms (to its exit)"
              + f", this script (confluent-kafka polls) {(me1.ru_utime + me1.ru_stime - me0.ru_utime - me0.ru_stime) * 1000:.0f} ms"
              + f"; load average {os.getloadavg()[0]:.2f}")
        t_exit = finish_exit_watch(exit_watch)
        if t_exit is not None and exit_box["code"] != "timeout":
            print(f"     (this script's waiter thread saw the exit at {(exit_box['t'] - t0) * 1000:.0f} ms: "
                  f"it waits for the GIL behind the confluent-kafka polls)")
            exit_box["t"] = t_exit
        r["cs_exit"] = exit_box["t"] - t0
        r["cs_md"] = max(done.values()) - t0 if len(done) == len(survivors) else None
        if exit_box["code"] == "timeout":
            incomplete("process exit after SIGTERM", f"still running after {timeout:.0f} s")
            r["cs_exit"] = None
        else:
            print(f"     SIGTERM -> process exit: {r['cs_exit'] * 1000:.0f} ms (exit code {exit_box['code']})")
        for b, t in sorted(done.items(), key=lambda x: x[1]):
            print(f"     SIGTERM -> no partition led by {victim.id} in broker {b}'s Metadata: {(t - t0) * 1000:.0f} ms"
                  f" (confluent-kafka polls, mean {mean_poll * 1000:.0f} ms)")
        pdone, pmean = finish_probes(probes)
        for b, t in sorted(pdone.items(), key=lambda x: x[1]):
            print(f"     SIGTERM -> no partition led by {victim.id} in broker {b}'s Metadata: {(t - t0) * 1000:.0f} ms"
                  f" (md_probe, mean poll {pmean.get(b, 0) * 1000:.0f} ms)")
        r["cs_md_probe"] = max(pdone.values()) - t0 if len(pdone) == len(survivors) else None
        time.sleep(0.5)
        cl = log_since(ctl_b, offsets[ctl_b.id])
        vl = log_since(victim, offsets[victim.id])
        rows = []
        for t, m in hits(cl, "cs_req", t0 - 0.01):
            rows.append((t, f"controller: ControlledShutdown({m.group(1)}) event starts"))
        for t, m in hits(cl, "cs_move", t0 - 0.01):
            rows.append((t, f"controller: moving leadership of {m.group(2)} partitions"))
        for t, m in hits(cl, "cs_left", t0 - 0.01):
            rows.append((t, f"controller: answered, {m.group(2)} partitions still led"))
        um = hits(cl, "um", t0 - 0.01)
        if um:
            rows.append((um[0][0], f"controller: first UpdateMetadata sent ({um[0][1].group(2)} partitions)"))
        for t, m in hits(vl, "cs_retry", t0 - 0.01):
            rows.append((t, f"broker {victim.id}: retrying controlled shutdown"))
        for t, m in hits(cl, "zk_elect", t0 - 0.01):
            rows.append((t, f"controller: {m.group(1)} elected leaders written to ZooKeeper in {m.group(2)} ms"))
        for t, m in hits(cl, "zk_isr", t0 - 0.01):
            rows.append((t, f"controller: {m.group(1)} ISR shrinks written to ZooKeeper in {m.group(2)} ms"))
        lai = hits(cl, "lai", t0 - 0.01)
        if lai:
            rows.append((lai[0][0], f"controller: first LeaderAndIsr sent"))
        for t, m in hits(cl, "cs_took", t0 - 0.01):
            rows.append((t, f"controller: event took {m.group(1)} ms (event thread CPU {m.group(2)} ms)"))
        for t, m in hits(vl, "cs_ok", t0 - 0.01):
            rows.append((t, f"broker {victim.id}: controlled shutdown succeeded"))
        for key in ("rm_close", "rm_done", "srv_done"):
            for t, m in hits(vl, key, t0 - 0.01):
                rows.append((t, f"broker {victim.id}: {m.group(1)}"))
        rows.append((exit_box["t"], f"broker {victim.id}: process exited"))
        cache = {}
        for b in survivors:
            ua = hits(log_since(b, offsets[b.id]), "um_applied", t0 - 0.01)
            if ua:
                rows.append((ua[0][0], f"broker {b.id}: first UpdateMetadata applied ({ua[0][1].group(2)} partitions)"))
            # the UpdateMetadata that carries the moved leaders (the election's: every partition V led)
            moved_um = [t for t, m in ua if int(m.group(2)) >= len(led)]
            if moved_um:
                cache[b.id] = moved_um[0]
        print_timeline("timeline (ms after SIGTERM):", t0, rows)
        r["cs_md_cache"] = max(cache.values()) - t0 if len(cache) == len(survivors) else None
        ze, zi, left = hits(cl, "zk_elect", t0 - 0.01), hits(cl, "zk_isr", t0 - 0.01), hits(cl, "cs_left", t0 - 0.01)
        um = hits(cl, "um", t0 - 0.01)
        if ze and zi and left and um:  # the controller's own work between its ZooKeeper writes
            zk_ms = sum(int(m.group(2)) for _, m in ze + zi)
            r["cs_ctl_zk"] = zk_ms / 1000
            print(f"     controller: election written -> first UpdateMetadata {(um[0][0] - ze[0][0]) * 1000:.0f} ms; "
                  f"ISR shrinks written -> answered {(left[0][0] - zi[-1][0]) * 1000:.0f} ms; "
                  f"ZooKeeper writes {zk_ms} ms of the event")
        r["cs_led"] = len(led)
        r["rss_end"] = rss_line(cluster, n, idle)
        print(f"  RSS at the end (survivors): {r['rss_end']}")
        r["emfile"] = emfile_count(cluster)
        if r["emfile"]:
            print(f"  WARNING: {r['emfile']} 'Too many open files' lines in the broker logs: figures invalid")
    except KillOnlyDone:
        pass
    finally:
        cluster.close()
    ops, secs = zk_set_rate(zk_hosts, max(1, n // 3))
    r["zk_set"] = (ops, secs)
    print(f"  ZooKeeper reference: setData of {ops} partition-state znodes in kazoo transactions of 500, "
          f"one in flight: {secs * 1000:.0f} ms = {ops / secs:,.0f} ops/s")
    zk_write_floor(zk_hosts, max(1, n // 3))
    return r


class KillOnlyDone(Exception):
    """--kill-only: the steps after the SIGKILL are skipped."""


def zk_write_floor(zk_hosts, n):
    """bench_zkwrite (bench/bench_zkwrite.c) on the same ZooKeeper: n state znodes rewritten by the
    controller's own write path (guarded multis of 999, 8 in flight) -- the floor of a failover's
    state writes -- and by pipelined plain setData."""
    exe = os.path.join(H.BUILD, "bench", "bench_zkwrite")
    if not os.access(exe, os.X_OK):
        print(f"  bench_zkwrite: {exe} not built")
        return
    connect = fresh_chroot(zk_hosts, "zkwrite")
    zk_pid = os.environ.get("GREGOR_BENCH_ZK_PID")
    try:
        out = subprocess.run([exe, "-z", connect, "-n", str(n), *(["-p", zk_pid] if zk_pid else []),
                              "-r", "1", "kzk:1000:8", "aset:4096"],
                             capture_output=True, text=True, timeout=600).stdout
    except subprocess.TimeoutExpired:
        print("  bench_zkwrite: timed out")
        return
    for ln in out.splitlines():
        if ln.strip():
            print("  bench_zkwrite: " + ln.strip())


def table(results, session_ms):
    def ms(x):
        return f"{x * 1000:.0f}" if x is not None else "n/a"
    print()
    print(f"== summary (ms; session timeout {session_ms} ms)")
    hdr = (f"{'parts':>6s} | {'create':>7s} {'led@3':>7s} {'ISRs':>7s} | {'kill->exp':>9s} {'exp->led':>9s} {'exp probe':>9s} {'kill->led':>9s} {'ctl event':>9s} | "
           f"{'rejoin':>7s} | {'elect req':>9s} {'elect md':>9s} {'moved':>6s} {'p/s':>6s} | "
           f"{'CS exit':>7s} {'CS md':>7s} {'CS probe':>8s} {'CS cache':>8s} | {'ZK set':>7s}")
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        exp_led = max(r["exp_led"].values()) if r.get("exp_led") else None
        kill_led = max(r["kill_led"].values()) if r.get("kill_led") else None
        ps = f"{r['elect_moved'] / r['elect_all']:.0f}" if r.get("elect_all") else "n/a"
        zo, zs = r.get("zk_set", (0, 0))
        print(f"{r['n']:6d} | {ms(r.get('create_resp')):>7s} {ms(r.get('create_led')):>7s} "
              f"{ms(r.get('create_isr')):>7s} | {ms(r.get('kill_expiry')):>9s} {ms(exp_led):>9s} "
              f"{ms(r.get('exp_led_probe')):>9s} {ms(kill_led):>9s} "
              f"{ms(r.get('kill_ctl')):>9s} | {ms(r.get('rejoin')):>7s} | {ms(r.get('elect_req')):>9s} "
              f"{ms(r.get('elect_all')):>9s} {r.get('elect_moved', 0):6d} {ps:>6s} | "
              f"{ms(r.get('cs_exit')):>7s} {ms(r.get('cs_md')):>7s} {ms(r.get('cs_md_probe')):>8s} "
              f"{ms(r.get('cs_md_cache')):>8s} | "
              f"{ms(zs) if zo else 'n/a':>7s}"
              + ("  (EMFILE: invalid)" if r.get("emfile") else ""))
    for r in results:
        if r.get("rss"):
            print(f"RSS {r['n']}: after creation: {r['rss']}")
    print("columns: create / led@3 / ISRs = CreateTopics answered / every leader in all 3 brokers' "
          "Metadata / every ISR full, from the request; kill->exp = SIGKILL to /brokers/ids/V deleted; exp->led / kill->led = to every "
          "partition V led showing a new leader on both survivors (confluent-kafka polls); exp probe = "
          "expiry to the same by bench/md_probe's raw Metadata polls; ctl event = controller's "
          "BrokerChange handling (log); rejoin = restart to V back in every ISR; elect req = "
          "gregorctl elect-leaders run; elect md = until every preferred leader is in all brokers' "
          "Metadata; moved = partitions it moved; p/s = moved / elect md; CS exit / CS md = SIGTERM "
          "to process exit / to no partition led by V in the survivors' Metadata (confluent-kafka polls); CS probe = the same "
          "by bench/md_probe's raw Metadata polls (one per survivor, paced); CS cache = "
          "SIGTERM to the later survivor's log line for applying the UpdateMetadata with the moved leaders "
          "(what the next Metadata answer shows; the polls add up to one poll period); ZK set = kazoo "
          "setData of N/3 states (500-op multis)")


ARGS = None  # the parsed arguments (main)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zk", default=os.environ.get("GREGOR_ZK"), help="host:port of a ZooKeeper to use")
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--per-topic", type=int, default=100)
    ap.add_argument("--session-ms", type=int, default=None,
                    help="zookeeper.session.timeout.ms: default 6000, 15000 from 50,000 partitions "
                         "(a loaded 2-core box stalls a broker's ZooKeeper thread for seconds at 100k)")
    ap.add_argument("--victim", choices=("follower", "controller"), default="follower",
                    help="follower: a broker that is not the controller (default)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--standby", nargs="?", const="on", choices=("on", "off"), default=None,
                    help="gregor.controller.standby.enable on (refresh every 5 s; the default without a "
                         "value) or off on every broker; without the flag the brokers' default (on)")
    ap.add_argument("--kill-only", action="store_true",
                    help="stop after the SIGKILL (step 1; step 0 with --delete-controller)")
    ap.add_argument("--delete-controller", action="store_true",
                    help="after creation, delete /controller by hand once first (step 0)")
    ap.add_argument("--only-cs", action="store_true",
                    help="after creation, only the controlled shutdown (step 4; skips 1-3)")
    ap.add_argument("--probe-only", action="store_true",
                    help="SIGKILL and controlled shutdown watched by md_probe alone (see --cs-probe-only)")
    ap.add_argument("--cs-probe-only", action="store_true",
                    help="controlled shutdown watched by md_probe alone, without the confluent-kafka "
                         "Metadata polls (each takes 0.4-0.9 s of this script's CPU at 100k, on the same "
                         "2 cores as the cluster)")
    benchlib.add_smoke_arg(ap)
    args = ap.parse_args()
    global ARGS
    ARGS = args
    benchlib.smoke_start(args, "bench_failover.py", sizes="30", per_topic=10, session_ms=2000, timeout=60)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-up below
    if not os.access(H.GREGORD, os.X_OK):
        sys.exit(f"{H.GREGORD} not built (run make)")
    sizes = [int(x) for x in args.sizes.split(",") if x]
    soft, _ = raise_nofile(20000)  # the storage layer bounds open log files (limit / 4); sockets need the rest
    workdir = benchlib.workdir("gregor-bench-failover-")
    zk_srv, zk_hosts = zookeeper(args.zk, workdir)
    if zk_srv and not os.environ.get("GREGOR_BENCH_ZK_PID"):  # its CPU in the shutdown figures
        with open(os.path.join(zk_srv.dir, "zk.pid")) as f:
            os.environ["GREGOR_BENCH_ZK_PID"] = f.read().strip()
    print(f"ZooKeeper {zk_hosts}; work dir {workdir}; {os.cpu_count()} CPUs; "
          f"{time.strftime('%Y-%m-%d %H:%M')}; RLIMIT_NOFILE {soft}")
    results = []
    try:
        for n in sizes:
            try:
                session_ms = args.session_ms or (15000 if n >= 50000 else 6000)
                results.append(bench_size(zk_hosts, workdir, n, args.per_topic, session_ms,
                                           args.victim, args.timeout, args.only_cs, args.cs_probe_only,
                                           args.probe_only))
            except Exception as e:
                print(f"  size {n} failed: {type(e).__name__}: {e}")
                benchlib.fail(f"size {n}: {type(e).__name__}: {e}")
            finally:
                H.kill_leftovers()
        table(results, args.session_ms or "6000 (15000 from 50k)")
    finally:
        H.kill_leftovers()
        if zk_srv:
            zk_srv.stop()


if __name__ == "__main__":
    main()
    benchlib.finish()
