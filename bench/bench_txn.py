#!/usr/bin/python3
"""Transactional produce throughput vs idempotent, same cluster, same run (issue 11).

    /usr/bin/python3 bench/bench_txn.py [--records 50000] [--size 100] [--per-txn 100,1000] [--stuck-seconds 10]
                                        [--zk HOST:PORT] [--smoke]

Starts a 3-broker cluster (private ZooKeeper unless --zk), creates one RF-3 topic with 1 partition
per case, and produces --records records of --size bytes with confluent-kafka, acks=all:
  - idempotent: enable.idempotence=true, one flush at the end;
  - txn N: transactional.id set, a transaction every N records (begin, N x produce, commit),
    for N = 100 and 1000 (--per-txn).
Prints records/s for each and the transactional rate as a percentage of the idempotent one.
Each commit costs an AddPartitionsToTxn (first record), an EndTxn, two __transaction_state writes
(acks=all) and a WriteTxnMarkers round trip, so small transactions pay more.
Then the stuck-partition case (issue 24): a producer commits one-record transactions to an RF-3
topic for --stuck-seconds, then another transactional id of the same coordinator commits a
transaction that includes an RF-1 partition whose only broker was just SIGKILLed, and the first
producer goes on for --stuck-seconds: commits/s before and during, and the longest gap between two
commits during. Nothing is asserted.
"""

import argparse
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import H, fresh_chroot, zookeeper  # noqa: E402

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def topic(boot):
    name = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": boot})
    admin.create_topics([NewTopic(name, 1, 3)], operation_timeout=30)[name].result(timeout=60)
    p = Producer({"bootstrap.servers": boot, "acks": "all"})
    for _ in range(100):
        errs = []
        p.produce(name, b"warmup", partition=0, on_delivery=lambda e, m: errs.append(e))
        p.flush(10)
        if errs == [None]:
            break
        time.sleep(0.2)
    return name


def run(boot, n, size, per_txn):
    t = topic(boot)
    conf = {"bootstrap.servers": boot, "acks": "all", "linger.ms": 5, "enable.idempotence": True}
    if per_txn:
        conf["transactional.id"] = f"bench-{uuid.uuid4().hex[:6]}"
    p = Producer(conf)
    if per_txn:
        p.init_transactions(60)
    value = b"x" * size
    start = time.time()
    i = 0
    while i < n:
        if per_txn:
            p.begin_transaction()
        for _ in range(min(per_txn, n - i) if per_txn else n):
            while True:
                try:
                    p.produce(t, value, partition=0)
                    break
                except BufferError:
                    p.poll(0.01)
            i += 1
        if per_txn:
            p.commit_transaction(60)
    left = p.flush(60)
    benchlib.check(left == 0, f"{'txn ' + str(per_txn) if per_txn else 'idempotent'}: {left} records not delivered")
    return n / (time.time() - start)


def txn_partition(tid, n):
    """Kafka's partitionFor: Utils.abs(String.hashCode) % n (ASCII ids)."""
    h = 0
    for c in tid.encode():
        h = (31 * h + c) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= (1 << 31) else h
    return (0 if h == -(1 << 31) else abs(h)) % n


def commits_for(p, t, seconds):
    """One-record transactions for seconds: (commits/s, longest gap between two commits in s)."""
    start = last = time.time()
    n, gap = 0, 0.0
    while time.time() - start < seconds:
        p.begin_transaction()
        p.produce(t, b"x" * 100, partition=0)
        p.commit_transaction(60)
        now = time.time()
        gap = max(gap, now - last)
        last = now
        n += 1
    return n / (time.time() - start), gap


def stuck_case(cluster, seconds, nparts):
    boot = ",".join(f"127.0.0.1:{b.port}" for b in cluster.brokers.values())
    healthy_id = f"bench-h-{uuid.uuid4().hex[:6]}"
    tp = txn_partition(healthy_id, nparts)
    stuck_id = next(f"bench-s-{i}" for i in range(10000) if txn_partition(f"bench-s-{i}", nparts) == tp)
    conf = {"bootstrap.servers": boot, "acks": "all", "linger.ms": 5}
    healthy = Producer(dict(conf, **{"transactional.id": healthy_id}))
    healthy.init_transactions(60)
    coord = cluster.get_json(f"/brokers/topics/__transaction_state/partitions/{tp}/state")[0]["leader"]
    data = next(b for b in cluster.brokers if b != coord)
    other = next(b for b in cluster.brokers if b not in (coord, data))
    admin = AdminClient({"bootstrap.servers": boot})
    rf1, rf3 = f"bench-rf1-{uuid.uuid4().hex[:6]}", f"bench-rf3-{uuid.uuid4().hex[:6]}"
    for name, assign in ((rf1, [[data]]), (rf3, [[coord, other, data]])):
        admin.create_topics([NewTopic(name, num_partitions=1, replica_assignment=assign)],
                            operation_timeout=30)[name].result(timeout=60)
        H.wait_for(lambda: (cluster.get_json(f"/brokers/topics/{name}/partitions/0/state")[0] or {})
                   .get("leader", -1) == assign[0][0], 60, f"{name} leader")
    stuck = Producer(dict(conf, **{"transactional.id": stuck_id}))
    stuck.init_transactions(60)
    stuck.begin_transaction()
    stuck.produce(rf1, b"stuck", partition=0)
    stuck.flush(30)
    commits_for(healthy, rf3, 1.0)  # warm-up
    before, gap_before = commits_for(healthy, rf3, seconds)
    cluster[data].kill()
    stuck.commit_transaction(60)  # PrepareCommit; its RF-1 marker cannot be written
    during, gap = commits_for(healthy, rf3, seconds)
    cluster[data].start()
    print(f"  stuck partition     {before:10.1f} commits/s before, {during:.1f} during ({during / before:.2f}x); "
          f"longest pause {1000 * gap_before:.0f} ms before, {1000 * gap:.0f} ms during")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--per-txn", default="100,1000", help="records per transaction, comma-separated")
    ap.add_argument("--stuck-seconds", type=float, default=10.0, help="0: skip the stuck-partition case")
    ap.add_argument("--zk")
    benchlib.add_smoke_arg(ap)
    args = ap.parse_args()
    benchlib.smoke_start(args, "bench_txn.py", records=300, per_txn="10,100", stuck_seconds=2.0)
    workdir = benchlib.workdir("gregor-bench-txn-")
    zk_srv, zk_hosts = zookeeper(args.zk or os.environ.get("GREGOR_ZK"), workdir)
    cluster = H.Cluster(os.path.join(workdir, "c"), fresh_chroot(zk_hosts, "benchtxn"), n=3,
                        config={"transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5"})
    try:
        cluster.start(timeout=60)
        boot = ",".join(f"127.0.0.1:{b.port}" for b in cluster.brokers.values())
        print(f"{args.records} records of {args.size} B, acks=all, RF 3, 1 partition; {os.cpu_count()} CPUs; "
              f"{time.strftime('%Y-%m-%d %H:%M')}")
        idem = run(boot, args.records, args.size, 0)
        print(f"  idempotent          {idem:10.0f} records/s")
        for per in [int(x) for x in args.per_txn.split(",") if x]:
            r = run(boot, args.records, args.size, per)
            print(f"  txn {per:5d} rec/txn  {r:10.0f} records/s  ({100 * r / idem:.0f}% of idempotent, "
                  f"{r / per:.1f} commits/s)")
        if args.stuck_seconds > 0:
            stuck_case(cluster, args.stuck_seconds, 5)
    finally:
        cluster.close()
        H.kill_leftovers()
        if zk_srv:
            zk_srv.stop()
    benchlib.finish()


if __name__ == "__main__":
    main()
