#!/usr/bin/python3
"""The good client's produce latency under the hostile-client siege, next to its floor measured
in the same run without the siege (issue 25: "p99 latency under 50 ms").

    /usr/bin/python3 bench/bench_hostile.py [--seconds 20] [--interval 0.01] [--attacks a,b] [--smoke]

Starts a private ZooKeeper (always: the siege stops it with SIGSTOP, so a shared one named by
GREGOR_ZK is never used) and the siege's 3-broker cluster with the listeners PLAINTEXT, SSL,
SASL_PLAINTEXT and SASL_SSL (tests/integration/hostile_siege.py, the same code as
tests/integration/test_hostile_siege.py). Then, on broker 1, the good client (an idempotent
acks=all confluent-kafka producer sending a small record every --interval s, open loop, and a consumer,
both over SASL_SSL + SCRAM-SHA-512) runs --seconds alone on one topic (the floor), then --seconds
on another topic while every attack of the siege runs (ZooKeeper stopped for a quarter of it).
A control client, the same on a partition of brokers 2 and 3 only, runs beside it in both phases:
when its latency grows under the siege too, the cost is the machine's CPUs, not broker 1.
Prints p50/p99/max produce latency of both phases and broker 1's CPU use (cores) in each, the p99
ratio, what the attacks did, the brokers' peak RSS, the load average and the commit. Nothing is asserted (a smoke run checks that
every record was acknowledged and read back).
"""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import benchlib  # noqa: E402
import gregor_harness as H  # noqa: E402
import hostile_siege as S  # noqa: E402
import security_pki as P  # noqa: E402


def phase(pki, cluster, ports, topic, seconds, interval, siege=None, attacks=S.Siege.ATTACKS):
    """Runs the good client on `topic` (led by broker 1, replicas 1-3) and a control client on
    `topic`-control (led by broker 2, replicas 2-3: broker 1 takes no part in it) for `seconds`,
    with `siege` started meanwhile when given. Returns (good, control), finished GoodClients; good
    has cpu_cores: broker 1's CPU use meanwhile (cores)."""
    S.create_led_topic(cluster[1], topic)
    S.create_led_topic(cluster[2], topic + "-control", (2, 3))
    good = S.GoodClient(pki, ports[1]["SASL_SSL"], topic, interval=interval, tag=topic).start()
    control = S.GoodClient(pki, ports[2]["SASL_SSL"], topic + "-control", interval=interval,
                           tag=topic + "-control").start()
    for g in (good, control):
        H.wait_for(lambda: len(g.acked) >= 3 or g.errors, 60, f"the good client started on {g.topic}")
        g.latencies.clear()  # the first records include the client's connection and login
    cpu0, t0 = benchlib.proc_cpu_s(cluster[1].pid), time.monotonic()
    if siege:
        siege.start(seconds, attacks)
    try:
        time.sleep(seconds)
    finally:
        if siege:
            siege.stop_all()
    good.cpu_cores = (benchlib.proc_cpu_s(cluster[1].pid) - cpu0) / (time.monotonic() - t0)
    good.finish()
    control.finish()
    return good, control


def max_ms(good):
    lat = [x for x in good.latencies if x is not None]
    return max(lat) * 1000 if lat else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--interval", type=float, default=0.01)
    ap.add_argument("--attacks", default=",".join(S.Siege.ATTACKS),
                    help="comma-separated subset of the siege's attacks (to find which one costs the latency)")
    benchlib.add_smoke_arg(ap)
    args = ap.parse_args()
    smoke = benchlib.smoke_start(args, "bench_hostile.py", seconds=4.0)
    work = benchlib.workdir("bench-hostile-")
    pki = P.make_pki(os.path.join(work, "pki"))
    zk_srv = H.ZkServer(os.path.join(work, "zk"))
    zk_srv.start()
    cluster = None
    try:
        cluster = H.Cluster(os.path.join(work, "cluster"), zk_srv.hosts, n=3)
        ports = S.make_cluster(cluster, pki)
        cluster.start(timeout=60)
        floor, floor_control = phase(pki, cluster, ports, "floor", args.seconds, args.interval)
        siege = S.Siege(pki, cluster[1], ports[1], zk_pid=S.zk_pid_of(zk_srv), zk_pause=args.seconds / 4,
                        scale=0.3 if smoke else 1.0).prepare()
        under, under_control = phase(pki, cluster, ports, "siege", args.seconds, args.interval, siege,
                                     args.attacks.split(","))
        alive = [b.id for b in cluster.brokers.values() if b.running()]
        rss = S.rss_report(cluster)

        commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        print(f"commit {commit}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
              f"{args.seconds:.0f} s per phase, one record every {args.interval * 1000:.0f} ms")
        print(f"{'phase':6} {'acked':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'broker 1 CPU (cores)':>21}")
        for name, g in (("floor", floor), ("siege", under)):
            p50, p99, n = g.percentiles_ms()
            print(f"{name:6} {n:6d} {p50:8.2f} {p99:8.2f} {max_ms(g):8.2f} {g.cpu_cores:21.2f}")
        print("control client on broker 2 (not attacked; broker 1 not in its partition's replicas):")
        for name, g in (("floor", floor_control), ("siege", under_control)):
            p50, p99, n = g.percentiles_ms()
            print(f"{name:6} {n:6d} {p50:8.2f} {p99:8.2f} {max_ms(g):8.2f}")
        f99, s99 = floor.percentiles_ms()[1], under.percentiles_ms()[1]
        print(f"p99 under siege / floor: {s99 / f99:.1f}x" if f99 > 0 else "p99 ratio: n/a")
        zk0, zk1 = siege.zk_paused or (0.0, 0.0)
        print(f"ZooKeeper stopped {zk1 - zk0:.1f} s; records acknowledged meanwhile: "
              f"{under.acked_between(zk0, zk1)}")
        print("attacks: " + ", ".join(f"{what} {k}" for what, k in sorted(siege.counts.items())))
        print("brokers: " + ", ".join(f"{i}: peak RSS {h:.0f} MiB" for i, (_, h) in sorted(rss.items())))
        for name, g in (("floor", floor), ("siege", under), ("floor control", floor_control),
                        ("siege control", under_control)):
            benchlib.check(not g.errors and not g.failed, f"{name}: good client errors {g.errors[:3]} {g.failed[:3]}")
            benchlib.check(sorted(g.acked) == sorted(g.sent) and sorted(g.read) == sorted(g.sent),
                           f"{name}: {len(g.sent)} sent, {len(g.acked)} acknowledged, {len(g.read)} read")
        benchlib.check(not siege.errors, f"siege: {siege.errors[:3]}")
        benchlib.check(len(alive) == 3, f"brokers alive after the siege: {alive}")
    finally:
        if cluster:
            cluster.close()
        H.kill_leftovers()
        zk_srv.stop()
    benchlib.finish()


if __name__ == "__main__":
    main()
