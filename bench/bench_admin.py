#!/usr/bin/python3
"""Reassignment and preferred-election throughput for Gregor. Prints numbers; asserts nothing.

  /usr/bin/python3 bench/bench_admin.py [--partitions 1000] [--topics 10] [--zk HOST:PORT] [--smoke]

Setup: 4 brokers (real gregord processes, empty logs), `--topics` topics of partitions/topics
partitions each, RF 2, replicas alternating [1,2] / [2,1].

1. Reassignment: every partition moves to [3,4] with one `gregorctl reassign execute` (one
   AlterPartitionReassignments request). Figures: the time the request took (controller: phase U
   for every partition + phase A), and the time until every /brokers/topics/T shows the final
   replicas with no adding/removing replicas (the new replicas joined the ISR through AlterPartition,
   phase B ran: leader moved, old replicas stopped and deleted). Throughput = partitions / that.
   Load-independent figures from the same window: the controller process's CPU time (user+sys),
   the /brokers/topics/T writes (znode version growth), the LeaderAndIsr / StopReplica requests
   the controller sent and its AlterPartition events (its log), and how fast brokers 3 and 4 created the
   new replicas' logs (completion cannot run ahead of that).
2. Preferred election: leaders are knocked off their preferred replica (broker 3 restarted), then
   `gregorctl elect-leaders --election-type preferred --all-topic-partitions`. Figures: the
   request time (the controller's Preferred elections: state reads, conditional writes, LeaderAndIsr)
   and the time until every state znode shows the preferred leader; partitions/s.
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import gregor_harness as H  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

CONFIG = {
    "auto.leader.rebalance.enable": "false",
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "100",
    "replica.lag.time.max.ms": "10000",
}


def ctl(cluster, *args, timeout=600):
    one = next(f"127.0.0.1:{b.port}" for b in cluster.running())
    return subprocess.run([H.GREGORCTL, "--bootstrap-server", one, "--timeout-ms", "300000", *args],
                          capture_output=True, text=True, timeout=timeout)


def log_times(broker, needle, offset=None):
    """(count, first, last) of the log lines containing needle (times in epoch seconds)."""
    import datetime
    n, first, last = 0, None, None
    with open(broker.log_path, errors="replace") as fh:
        if offset:
            fh.seek(offset)
        for line in fh:
            if needle in line and line.startswith("["):
                t = datetime.datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                n += 1
                first = t if first is None else first
                last = t
    return n, first, last


def topic_names(n):
    return [f"b{i:03d}" for i in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--zk", default=os.environ.get("GREGOR_ZK"))
    benchlib.add_smoke_arg(ap)
    args = ap.parse_args()
    benchlib.smoke_start(args, "bench_admin.py", partitions=20, topics=2)
    per = max(1, args.partitions // args.topics)
    total = per * args.topics
    work = benchlib.workdir("bench-admin-")
    zk, hosts = benchlib.zookeeper(args.zk, work)
    cluster = H.Cluster(os.path.join(work, "cluster"), benchlib.fresh_chroot(hosts, "admin"), n=4, config=CONFIG)
    try:
        cluster.start(timeout=60)
        bs = ",".join(f"127.0.0.1:{b.port}" for b in cluster.brokers.values())
        admin = AdminClient({"bootstrap.servers": bs})
        topics = topic_names(args.topics)
        t0 = time.time()
        futs = admin.create_topics([NewTopic(t, per, replica_assignment=[[1, 2] if p % 2 == 0 else [2, 1]
                                                                             for p in range(per)])
                                    for t in topics], operation_timeout=120, request_timeout=180)
        for f in futs.values():
            f.result(timeout=300)

        def all_states(pred):
            for t in topics:
                for p in range(per):
                    st = cluster.get_json(f"/brokers/topics/{t}/partitions/{p}/state")[0]
                    if not st or not pred(t, p, st):
                        return False
            return True
        H.wait_for(lambda: all_states(lambda t, p, st: len(st["isr"]) == 2), 300, "full ISRs", interval=1)
        md_wait = time.time()

        def metadata_complete():
            return all(one_complete(b) for b in cluster.brokers.values())

        def one_complete(b):
            md = AdminClient({"bootstrap.servers": f"127.0.0.1:{b.port}"}).list_topics(timeout=30)
            bad = [t for t in topics if t not in md.topics or md.topics[t].error is not None]
            if bad:
                print(f"  broker {b.id}: metadata lacks {len(bad)} topics (e.g. {bad[0]})")
            return all(t in md.topics and len(md.topics[t].partitions) == per and
                       all(x.leader >= 0 for x in md.topics[t].partitions.values()) for t in topics)
        H.wait_for(metadata_complete, 120, "every topic in the brokers' metadata", interval=0.5)
        md_wait = time.time() - md_wait
        print(f"setup: {total} partitions ({args.topics} topics x {per}), RF 2 on brokers 1,2, "
              f"created in {time.time() - t0:.1f} s "
              f"(of which {md_wait:.1f} s waiting for metadata to show every leader)")

        # 1. reassignment
        ctl_id = cluster.controller_id()
        ctl_b = cluster[ctl_id]
        log_from = os.path.getsize(ctl_b.log_path)
        cpu0 = benchlib.proc_cpu_s(ctl_b.pid)
        ver0 = {t: cluster.zk.get(f"/brokers/topics/{t}")[1].version for t in topics}
        f = os.path.join(work, "reassign.json")
        with open(f, "w") as fh:
            json.dump({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": [3, 4] if p % 2 == 0 else [4, 3]}
                                                    for t in topics for p in range(per)]}, fh)
        t0 = time.time()
        r = ctl(cluster, "reassign", "execute", "--reassignment-json-file", f)
        t_req = time.time() - t0
        if r.returncode != 0:
            benchlib.fail(f"reassign execute failed: {r.stdout[-500:]} {r.stderr[-2000:]}")
            return

        def moved():
            for t in topics:
                a = cluster.get_json(f"/brokers/topics/{t}")[0]
                if a.get("adding_replicas") or a.get("removing_replicas"):
                    return False
                if any(sorted(v) != [3, 4] for v in a["partitions"].values()):
                    return False
            return True
        H.wait_for(moved, 600, "reassignment done", interval=0.2)
        t_done = time.time() - t0
        print(f"reassignment of {total} partitions [1,2] -> [3,4]:")
        print(f"  AlterPartitionReassignments request (phases U + A): {t_req * 1000:8.0f} ms  "
              f"({total / t_req:8.0f} partitions/s)")
        print(f"  until every assignment is final (phase B done):     {t_done * 1000:8.0f} ms  "
              f"({total / t_done:8.0f} partitions/s)")
        time.sleep(1)  # the last completion event's log lines
        cpu = benchlib.proc_cpu_s(ctl_b.pid) - cpu0
        writes = sum(cluster.zk.get(f"/brokers/topics/{t}")[1].version - ver0[t] for t in topics)
        with open(ctl_b.log_path, errors="replace") as fh:
            fh.seek(log_from)
            text = fh.read()
        lai = text.count("Sending LeaderAndIsr request to broker")
        stop = text.count("Sending StopReplica request for")
        events = text.count("Processing event AlterPartitionReceived")
        created = {b.id: log_times(b, "Created log", log_from if b is ctl_b else None) for b in (cluster[3], cluster[4])}
        print(f"  controller {ctl_id}: {cpu:.2f} s CPU (user+sys, whole process) from the request to the end; "
              f"{writes} topic znode writes for {args.topics} topics; {lai} LeaderAndIsr and {stop} StopReplica "
              f"requests sent; {events} AlterPartition events")
        for bid, (n, first, last) in created.items():
            if n:
                print(f"  broker {bid}: created {n} logs in {last - first:.1f} s ({n / max(last - first, 1e-3):.0f}/s): "
                      f"the new replicas' pace bounds completion")

        # 2. preferred election: restart broker 3 so broker 4 leads everything
        cluster[3].stop(timeout=180)  # closing 10k+ logs under load can take a while
        H.wait_for(lambda: all_states(lambda t, p, st: st["leader"] == 4), 300, "leaders on 4", interval=1)
        cluster[3].start()
        H.wait_for(lambda: all_states(lambda t, p, st: 3 in st["isr"]), 300, "broker 3 back in ISRs", interval=1)
        n_imb = total // 2 + total % 2
        t0 = time.time()
        r = ctl(cluster, "elect-leaders", "--election-type", "preferred", "--all-topic-partitions")
        t_req = time.time() - t0
        if r.returncode != 0:
            benchlib.fail(f"elect-leaders failed: {r.stdout[-500:]} {r.stderr[-500:]}")
        H.wait_for(lambda: all_states(lambda t, p, st: st["leader"] == (3 if p % 2 == 0 else 4)), 300,
                   "preferred leaders", interval=0.2)
        t_done = time.time() - t0
        print(f"preferred election of {n_imb} imbalanced partitions (of {total}):")
        print(f"  ElectLeaders request (all partitions):  {t_req * 1000:8.0f} ms  ({n_imb / t_req:8.0f} partitions/s)")
        print(f"  until every state znode shows it:       {t_done * 1000:8.0f} ms  ({n_imb / t_done:8.0f} partitions/s)")
    finally:
        cluster.close()
        H.kill_leftovers()
        if zk:
            zk.stop()


if __name__ == "__main__":
    main()
    benchlib.finish()
