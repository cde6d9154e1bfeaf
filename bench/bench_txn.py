#!/usr/bin/python3
"""Transactional produce throughput and commit latency vs idempotent, same cluster, same run
(issues 11 and 24).

    /usr/bin/python3 bench/bench_txn.py [--records 50000] [--size 100] [--per-txn 100,1000]
                                        [--commits 500] [--producers 4] [--multi-records 100000]
                                        [--stuck-seconds 10] [--zk HOST:PORT] [--smoke]
                                        [--multi-only] [--rounds 1] [--[no-]client-floor]

Starts a 3-broker cluster (private ZooKeeper unless --zk) and produces with confluent-kafka,
acks=all, linger.ms=5, records of --size bytes. Every producer first sends one warm-up record
(or transaction) per partition, not timed: a transactional librdkafka 2.0.2 producer learns a
topic's metadata only from its 1 s refresh timer, so its first transaction takes ~1 s whatever the
broker does (an idempotent producer asks at once).
  - idempotent: enable.idempotence=true, --records records to a 1-partition RF-3 topic, one flush;
  - txn N: transactional.id set, a transaction every N records (begin, N x produce, commit), for
    N = 100 and 1000 (--per-txn);
  - commit latency (issue 24): one transactional producer, 100 records over the 3 partitions of an
    RF-3 topic per transaction, --commits transactions: commit_transaction() p50 / p99 (from the
    last produce() to its return) and the whole transaction's;
  - --producers idempotent processes vs as many transactional ones (1000 records per
    transaction), each writing --multi-records records round-robin over the 3 partitions of one
    RF-3 topic, started together: aggregate records/s and their ratio (issue 24: >= 0.8x);
    --multi-only runs this case alone, --rounds times (idempotent then transactional each round,
    a new topic per run, one ratio per round). Each round also prints the CPU the brokers and the
    producer processes used per 1000 records, and their ratio: what bounds the records/s ratio
    when the two CPUs are the limit (as on an idle 2-core box);
  - client floor (--client-floor; on by default with --multi-only and --smoke): each round of the
    case above also against librdkafka 2.0.2's own mock cluster (MockCluster: a broker that does
    next to nothing per request), same producer processes and configuration: the producers' own
    CPU per 1000 records, idempotent vs transactional, and the ceiling that CPU puts on the ratio
    on this machine, (P_i + B_i) / (P_t + B_i) with B_i the brokers' idempotent CPU.
Each commit costs an AddPartitionsToTxn, an EndTxn, the Prepare*/Complete* writes to
__transaction_state (acks=all) and a WriteTxnMarkers round trip, so small transactions pay more.
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


def topic(boot, partitions=1):
    name = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": boot})
    admin.create_topics([NewTopic(name, partitions, 3)], operation_timeout=30)[name].result(timeout=60)
    p = Producer({"bootstrap.servers": boot, "acks": "all"})
    for part in range(partitions):
        for _ in range(100):
            errs = []
            p.produce(name, b"warmup", partition=part, on_delivery=lambda e, m: errs.append(e))
            p.flush(10)
            if errs == [None]:
                break
            time.sleep(0.2)
    return name


def producer(boot, transactional, t, partitions):
    """A producer that has written one record (idempotent) or committed one transaction to each
    partition of t (not timed: see the module comment)."""
    conf = {"bootstrap.servers": boot, "acks": "all", "linger.ms": 5, "enable.idempotence": True}
    if transactional:
        conf["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    p = Producer(conf)
    if transactional:
        p.init_transactions(60)
        p.begin_transaction()
    for part in range(partitions):
        p.produce(t, b"warmup", partition=part)
    if transactional:
        p.commit_transaction(60)
    benchlib.check(p.flush(60) == 0, "warm-up records not delivered")
    return p


def run(boot, n, size, per_txn):
    t = topic(boot)
    p = producer(boot, per_txn > 0, t, 1)
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


def commit_latency(boot, rounds, per, partitions, size):
    """commit_transaction() and whole-transaction latencies (ms, sorted) of one producer writing
    per records round-robin over the partitions of a new RF-3 topic per transaction."""
    t = topic(boot, partitions)
    p = producer(boot, True, t, partitions)
    value = b"x" * size
    commit, whole = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        p.begin_transaction()
        for i in range(per):
            p.produce(t, value, partition=i % partitions)
        t1 = time.perf_counter()
        p.commit_transaction(60)
        t2 = time.perf_counter()
        commit.append((t2 - t1) * 1000)
        whole.append((t2 - t0) * 1000)
    return sorted(commit), sorted(whole)


def pct(sorted_ms, q):
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))]


def _multi_child(args):
    boot, t, partitions, n, size, per_txn, start = args
    p = producer(boot, per_txn > 0, t, partitions)
    value = b"x" * size
    while time.time() < start:  # all producers start together (if spawned in time)
        time.sleep(0.001)
    t0 = time.time()
    cpu0 = time.process_time()  # this process: Python and librdkafka's threads
    threads0 = threads_cpu(os.getpid())
    i = 0
    while i < n:
        if per_txn:
            p.begin_transaction()
        for _ in range(min(per_txn, n - i) if per_txn else n):
            while True:
                try:
                    p.produce(t, value, partition=i % partitions)
                    break
                except BufferError:
                    p.poll(0.01)
            i += 1
        if per_txn:
            p.commit_transaction(60)
    left = p.flush(60)
    threads = {k: v - threads0.get(k, 0.0) for k, v in threads_cpu(os.getpid()).items()}
    return n - left, t0, time.time(), time.process_time() - cpu0, threads


def cpu_seconds(pids):
    """User + system CPU seconds of the processes pids (all their threads) so far."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def threads_cpu(pid):
    """User + system CPU seconds so far of pid's threads, summed by thread name
    (/proc/PID/task/TID/comm), librdkafka's with their trailing number dropped (rdk:broker1,
    rdk:broker-1 -> rdk:broker). A thread that ended is not counted: those measured here live as long as their
    handle (librdkafka's) or cluster (the mock's)."""
    by = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            if name.startswith("rdk:"):
                name = name.rstrip("0123456789-")
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        by[name] = by.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return by


def run_multi(boot, t, producers, n, size, per_txn, broker_cpu, partitions=3):
    """producers processes (spawned: librdkafka and fork do not mix) each writing n records
    round-robin over the first partitions partitions of topic t, started together: (aggregate
    records/s from the first start to the last end, the brokers' CPU seconds meanwhile (broker_cpu()
    is their CPU so far), the producers' CPU seconds, the producers' CPU seconds by thread name)."""
    import multiprocessing as mp
    start = time.time() + 5.0  # spawning, connecting and the warm-up fit in this
    with mp.get_context("spawn").Pool(producers) as pool:
        pending = pool.map_async(_multi_child, [(boot, t, partitions, n, size, per_txn, start)] * producers)
        while time.time() < start:
            time.sleep(0.001)
        cpu0 = broker_cpu()
        res = pending.get()
        broker_cpu = broker_cpu() - cpu0
    ok = sum(r[0] for r in res)
    benchlib.check(ok == n * producers, f"{producers} producers, {per_txn} rec/txn: {n * producers - ok} records "
                   "not delivered")
    late = max(r[1] for r in res) - start
    benchlib.check(late < 0.1, f"a producer started {late:.2f} s late (spawn + warm-up longer than the delay)")
    threads = {}
    for r in res:
        for k, v in r[4].items():
            threads[k] = threads.get(k, 0.0) + v
    return ok / (max(r[2] for r in res) - min(r[1] for r in res)), broker_cpu, sum(r[3] for r in res), threads


def _mock_host(conn):
    """Hosts librdkafka's own mock cluster (test.mock.num.brokers=3: three brokers served by one
    thread, rdk:mock, on loopback ports) in the handle of an otherwise idle producer, sends its
    bootstrap list, then per topic name received writes one record to partitions 0-2 (the mock
    creates a topic on its first Metadata request: 4 partitions, RF 3, as the mock's defaults)
    and answers True once delivered; None ends it."""
    p = Producer({"test.mock.num.brokers": 3, "acks": "all"})
    md = p.list_topics(timeout=30)
    conn.send(",".join(f"{b.host}:{b.port}" for b in md.brokers.values()))
    while True:
        t = conn.recv()
        if t is None:
            return
        for part in range(3):
            p.produce(t, b"warmup", partition=part)
        conn.send(p.flush(30) == 0)


class MockCluster:
    """librdkafka 2.0.2's mock cluster in a process of its own (_mock_host), reached over
    loopback TCP as the brokers are: the producers are the same processes with the same
    configuration, so their CPU is the client's own cost with a broker that does next to nothing
    per request (no log, no replication: an acks=all Produce is answered at once, EndTxn writes
    no markers)."""

    def __init__(self):
        import multiprocessing as mp
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_mock_host, args=(child,), daemon=True)
        self.proc.start()
        self.boot = self.conn.recv()

    def topic(self):
        name = f"bench-{uuid.uuid4().hex[:8]}"
        self.conn.send(name)
        benchlib.check(self.conn.recv(), "mock cluster: warm-up records not delivered")
        return name

    def cpu(self):
        return threads_cpu(self.proc.pid).get("rdk:mock", 0.0)

    def close(self):
        self.conn.send(None)
        self.proc.join(10)


def by_thread(idem, txn, k):
    """'name a -> b, ...' for the producers' threads (CPU seconds by name, scaled by k), largest
    transactional first; threads under 0.01 ms in both left out."""
    names = sorted(set(idem) | set(txn), key=lambda n: -txn.get(n, 0.0))
    return ", ".join(f"{n} {k * idem.get(n, 0.0):.2f} -> {k * txn.get(n, 0.0):.2f}" for n in names
                     if max(idem.get(n, 0.0), txn.get(n, 0.0)) * k >= 0.01)


def multi_pair(boot, new_topic, broker_cpu, producers, n, size):
    """One idempotent then one transactional (1000 rec/txn) run of producers processes, each on a
    new topic: run_multi's answer for each."""
    idem = run_multi(boot, new_topic(), producers, n, size, 0, broker_cpu)
    txn = run_multi(boot, new_topic(), producers, n, size, 1000, broker_cpu)
    return idem, txn


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
    ap.add_argument("--commits", type=int, default=500, help="transactions of the commit-latency case (0: skip)")
    ap.add_argument("--producers", type=int, default=4, help="producers of each kind in the multi-producer case "
                    "(0: skip)")
    ap.add_argument("--multi-records", type=int, default=100000, help="records per producer, multi-producer case")
    ap.add_argument("--stuck-seconds", type=float, default=10.0, help="0: skip the stuck-partition case")
    ap.add_argument("--zk")
    ap.add_argument("--multi-only", action="store_true", help="only the multi-producer case")
    ap.add_argument("--rounds", type=int, default=1, help="multi-producer case: idempotent/transactional pairs")
    ap.add_argument("--client-floor", action=argparse.BooleanOptionalAction, default=None,
                    help="multi-producer case: each round also against librdkafka's mock cluster (default: on "
                    "with --multi-only and --smoke)")
    benchlib.add_smoke_arg(ap)
    args = ap.parse_args()
    benchlib.smoke_start(args, "bench_txn.py", records=300, per_txn="10,100", commits=20, producers=2,
                         multi_records=2000, stuck_seconds=2.0)
    workdir = benchlib.workdir("gregor-bench-txn-")
    zk_srv, zk_hosts = zookeeper(args.zk or os.environ.get("GREGOR_ZK"), workdir)
    cluster = H.Cluster(os.path.join(workdir, "c"), fresh_chroot(zk_hosts, "benchtxn"), n=3,
                        config={"transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5"})
    try:
        cluster.start(timeout=60)
        boot = ",".join(f"127.0.0.1:{b.port}" for b in cluster.brokers.values())
        print(f"{args.records} records of {args.size} B, acks=all, RF 3, 1 partition; {os.cpu_count()} CPUs; "
              f"{time.strftime('%Y-%m-%d %H:%M')}; load average {os.getloadavg()[0]:.2f}")
        idem = 0 if args.multi_only else run(boot, args.records, args.size, 0)
        if not args.multi_only:
            print(f"  idempotent          {idem:10.0f} records/s")
        for per in [] if args.multi_only else [int(x) for x in args.per_txn.split(",") if x]:
            r = run(boot, args.records, args.size, per)
            print(f"  txn {per:5d} rec/txn  {r:10.0f} records/s  ({100 * r / idem:.0f}% of idempotent, "
                  f"{r / per:.1f} commits/s)")
        if args.commits > 0 and not args.multi_only:
            commit, whole = commit_latency(boot, args.commits, 100, 3, args.size)
            print(f"  commit latency      100 records over 3 partitions, {args.commits} transactions: "
                  f"commit_transaction() p50 {pct(commit, .5):.2f} / p99 {pct(commit, .99):.2f} ms "
                  f"(whole transaction {pct(whole, .5):.2f} / {pct(whole, .99):.2f} ms)")
        pids = [b.pid for b in cluster.brokers.values()]
        floor = args.client_floor if args.client_floor is not None else (args.multi_only or args.smoke)
        mock = MockCluster() if floor and args.producers > 0 else None
        for _ in range(args.rounds if args.producers > 0 else 0):
            (idem_m, idem_b, idem_p, idem_th), (txn_m, txn_b, txn_p, txn_th) = multi_pair(
                boot, lambda: topic(boot, 3), lambda: cpu_seconds(pids), args.producers, args.multi_records, args.size)
            k = 1e6 / (args.producers * args.multi_records)  # CPU seconds -> ms per 1000 records
            print(f"  {args.producers} producers x {args.multi_records} records over 3 partitions: idempotent "
                  f"{idem_m:.0f} records/s, transactional (1000 rec/txn) {txn_m:.0f} records/s "
                  f"({txn_m / idem_m:.2f}x); load average {os.getloadavg()[0]:.2f}\n"
                  f"    CPU ms per 1000 records, brokers + producers: idempotent {k * idem_b:.2f} + "
                  f"{k * idem_p:.2f}, transactional {k * txn_b:.2f} + {k * txn_p:.2f} "
                  f"(CPU ratio {(idem_b + idem_p) / (txn_b + txn_p):.2f}x)", flush=True)
            if not mock:
                continue
            (m_idem, m_idem_b, m_idem_p, m_idem_th), (m_txn, m_txn_b, m_txn_p, m_txn_th) = multi_pair(
                mock.boot, mock.topic, mock.cpu, args.producers, args.multi_records, args.size)
            print(f"    client floor, same producers against librdkafka's mock cluster: idempotent {m_idem:.0f}, "
                  f"transactional {m_txn:.0f} records/s ({m_txn / m_idem:.2f}x); load average "
                  f"{os.getloadavg()[0]:.2f}\n"
                  f"      CPU ms per 1000 records, mock (rdk:mock) + producers: idempotent {k * m_idem_b:.2f} + "
                  f"{k * m_idem_p:.2f}, transactional {k * m_txn_b:.2f} + {k * m_txn_p:.2f}\n"
                  f"      producers' CPU ms per 1000 records by thread, idempotent -> transactional: against the mock "
                  f"{by_thread(m_idem_th, m_txn_th, k)}; against Gregor {by_thread(idem_th, txn_th, k)}\n"
                  f"      producers' CPU, transactional - idempotent: {k * (m_txn_p - m_idem_p):.2f} ms against "
                  f"the mock, {k * (txn_p - idem_p):.2f} ms against Gregor\n"
                  f"      ceiling of the ratio on this box if the brokers carried transactional records at their "
                  f"idempotent cost, (P_i + B_i) / (P_t + B_i): {(m_idem_p + idem_b) / (m_txn_p + idem_b):.2f}x with "
                  f"the producers' CPU against the mock, {(idem_p + idem_b) / (txn_p + idem_b):.2f}x with it "
                  f"against Gregor", flush=True)
        if mock:
            mock.close()
        if args.stuck_seconds > 0 and not args.multi_only:
            stuck_case(cluster, args.stuck_seconds, 5)
    finally:
        cluster.close()
        H.kill_leftovers()
        if zk_srv:
            zk_srv.stop()
    benchlib.finish()


if __name__ == "__main__":
    main()
