#!/usr/bin/python3
"""Transactional produce throughput vs idempotent, same cluster, same run (issue 11).

    /usr/bin/python3 bench/bench_txn.py [--records 50000] [--size 100] [--per-txn 100,1000] [--zk HOST:PORT] [--smoke]

Starts a 3-broker cluster (private ZooKeeper unless --zk), creates one RF-3 topic with 1 partition
per case, and produces --records records of --size bytes with confluent-kafka, acks=all:
  - idempotent: enable.idempotence=true, one flush at the end;
  - txn N: transactional.id set, a transaction every N records (begin, N x produce, commit),
    for N = 100 and 1000 (--per-txn).
Prints records/s for each and the transactional rate as a percentage of the idempotent one.
Each commit costs an AddPartitionsToTxn (first record), an EndTxn, two __transaction_state writes
(acks=all) and a WriteTxnMarkers round trip, so small transactions pay more. Nothing is
asserted.
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--per-txn", default="100,1000", help="records per transaction, comma-separated")
    ap.add_argument("--zk")
    benchlib.add_smoke_arg(ap)
    args = ap.parse_args()
    benchlib.smoke_start(args, "bench_txn.py", records=300, per_txn="10,100")
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
    finally:
        cluster.close()
        H.kill_leftovers()
        if zk_srv:
            zk_srv.stop()
    benchlib.finish()


if __name__ == "__main__":
    main()
