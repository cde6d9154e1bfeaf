#!/usr/bin/python3
"""Produce/consume throughput and latency against a Gregor cluster, side by side with librdkafka's
in-memory mock cluster (same client, same settings), plus the brokers' idle and loaded RSS.

    bench/bench_produce.py --bootstrap 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094 \
        [--pids run/broker-1.pid,run/broker-2.pid,run/broker-3.pid] [--records 200000]
    bench/bench_produce.py --mock-only

First, produce() -> consumed latency (p50/p99/max) on a fresh 3-partition RF-3 topic with a
consumer long-polling from the end, bench/latency_consumer.c (librdkafka in C, a process of its
own: a Python consumer thread next to the producer made each wait for the other's GIL, up to
Python's 5 ms switch interval, and took 5-40 ms to work through a burst's records before it saw
the probes): records at a steady 200/s, then probe records right after each of 5 acknowledged
bursts of 5,000 (acks=1 and acks=all; --latency-only / --skip-latency); then "HW after burst":
after 5 more bursts, flush() returning -> the librdkafka of a consumer that Python never polls
holding a high watermark past the burst (per partition).
Then, for each (record size 100 B / 1 KiB) x (acks 1 / all / all with enable.idempotence, "all+i") on a
fresh RF-3 topic (1 partition, so the numbers are per partition): records/s and MB/s produced, p50/p99 delivery latency (produce() call
to delivery report, so it includes batching: linger.ms=1), then records/s consumed from the
beginning. Prints a table, then the idempotent / non-idempotent acks=all produce ratio per size;
nothing is asserted. Uses confluent-kafka (Debian's python3-confluent-kafka).
The mock cluster keeps at most ~5 MiB or 100k messages per partition, so use --records <= 100000
for a fair side by side at 1 KiB.
"""

import argparse
import collections
import os
import resource
import sys
import time
import uuid

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import check  # noqa: E402


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def cpu_between(r0, r1):
    """User + system CPU seconds between two getrusage() answers."""
    return r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime


def read_pids(spec):
    out = []
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        out.append(int(open(item).read().strip()) if os.path.exists(item) else int(item))
    return out


_MOCK_HOLDER = []


def _mock_process_main(path, cpus=None):
    """Body of the --mock-process child: a mock cluster in its own process (writes its bootstrap
    list to path, then idles until killed); on `cpus` if given (--pin)."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    h = Producer({"test.mock.num.brokers": 3, "bootstrap.servers": "", "log_level": 3})
    md = h.list_topics(timeout=10)
    with open(path + ".tmp", "w") as f:
        f.write(",".join(f"{b.host}:{b.port}" for b in md.brokers.values()))
    os.rename(path + ".tmp", path)
    while True:
        time.sleep(1)


def start_mock_process(cpus=None):
    """A mock cluster in a separate (spawned) process: the same client then pays for sockets and
    a second process like against Gregor, but the brokers do no work. Returns (process, conf)."""
    import multiprocessing as mp
    import tempfile
    path = os.path.join(tempfile.mkdtemp(prefix="mockproc-"), "bootstrap")
    proc = mp.get_context("spawn").Process(target=_mock_process_main, args=(path, cpus), daemon=True)
    proc.start()
    deadline = time.time() + 30
    while not os.path.exists(path) and time.time() < deadline:
        time.sleep(0.05)
    return proc, {"bootstrap.servers": open(path).read()}


def set_process_cpus(pid, cpus):
    """Every thread of pid onto cpus (threads a broker starts later inherit from their creator)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass  # the thread ended


def base_conf(args, mock):
    if mock == "proc":
        return dict(args.mockproc_conf)
    if mock:
        # Every client given test.mock.num.brokers makes its own cluster: make one, keep its
        # owner alive, and point every other client at its brokers.
        holder = Producer({"test.mock.num.brokers": 3, "bootstrap.servers": "", "log_level": 3})
        md = holder.list_topics(timeout=10)
        _MOCK_HOLDER.append(holder)
        return {"bootstrap.servers": ",".join(f"{b.host}:{b.port}" for b in md.brokers.values())}
    return {"bootstrap.servers": args.bootstrap}


def cpu_seconds(pids):
    """user+sys CPU seconds of the processes so far (None without pids)."""
    if not pids:
        return None
    per = [benchlib.proc_cpu_s(pid) for pid in pids]
    return None if None in per else sum(per)


TOPIC_CONFIG = {}  # --topic-config: configs of the Gregor topics (the mock takes none)


def make_topic(conf, mock, partitions=1):
    """A fresh RF-3 topic whose partitions all take writes; returns (name, partition count). The
    mock cluster auto-creates topics with its default partition count (no CreateTopics)."""
    name = f"bench-{uuid.uuid4().hex[:8]}"
    p = Producer(dict(conf, acks="all"))
    if not mock:
        admin = AdminClient(conf)
        admin.create_topics([NewTopic(name, partitions, 3, config=TOPIC_CONFIG)],
                            operation_timeout=30)[name].result(timeout=60)
    part = 0
    while part < partitions:  # wait until every leader takes writes
        deadline = time.time() + 30
        while time.time() < deadline:
            errs = []
            p.produce(name, b"warmup", partition=part, on_delivery=lambda e, m: errs.append(e))
            p.flush(10)
            if errs == [None]:
                break
            time.sleep(0.2)
        if mock and part == 0:
            partitions = min(partitions, len(p.list_topics(name, timeout=10).topics[name].partitions))
        part += 1
    return name, partitions


# What run_produce / run_produce_multi return: records/s and MB/s delivered, p50/p99 delivery latency
# (ms), records delivered, the producing process(es)' user+sys CPU seconds, the producing thread's
# share of a core. Callers outside this file use the field names (the tuple may grow).
ProduceResult = collections.namedtuple("ProduceResult", "rps mbps p50 p99 ok client_cpu share")


def run_produce(conf, topic, n, size, acks, idempotent=False, partitions=(0,)):
    p = Producer(dict(conf, acks=acks, **{"linger.ms": 1, "queue.buffering.max.messages": 1000000,
                                          "queue.buffering.max.kbytes": 1048576,
                                          "enable.idempotence": idempotent}))
    payload = os.urandom(size)
    lat = []
    # Connections, metadata (and the producer id) before the clock starts: one acknowledged record.
    warm = []
    p.produce(topic, b"warmup", partition=partitions[0], on_delivery=lambda e, m: warm.append(e))
    p.flush(30)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    th0 = resource.getrusage(resource.RUSAGE_THREAD)
    t_start = time.perf_counter()

    def cb(err, msg, t0):
        if err is None:
            lat.append(time.perf_counter() - t0)

    for i in range(n):
        t0 = time.perf_counter()
        while True:
            try:
                p.produce(topic, payload, partition=partitions[i % len(partitions)],
                          on_delivery=lambda e, m, t0=t0: cb(e, m, t0))
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    # The producing thread's share of a core while it called produce(): ~1 when nothing else wanted
    # its core, less when it was preempted (runnable, not running).
    th1 = resource.getrusage(resource.RUSAGE_THREAD)
    share = cpu_between(th0, th1) / max(time.perf_counter() - t_start, 1e-9)
    p.flush(300)
    elapsed = time.perf_counter() - t_start
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    client_cpu = cpu_between(r0, r1)
    lat.sort()
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else float("nan")
    return ProduceResult(len(lat) / elapsed, len(lat) * size / elapsed / 1e6, pct(0.5), pct(0.99), len(lat),
                         client_cpu, share)


def _produce_child(args):
    conf, topic, n, size, acks, parts, start = args
    while time.time() < start:  # all producers start together (if spawned in time)
        time.sleep(0.001)
    t0 = time.time()
    r = run_produce(conf, topic, n, size, acks, False, parts)
    return r, t0, time.time()


def run_produce_multi(conf, topic, n, size, acks, partitions, producers):
    """`producers` processes (spawned: librdkafka and fork do not mix), each producing n records
    round-robin over its share of the partitions; returns the totals like run_produce (p50/p99 of
    the first producer), timed from the first producer's start to the last one's end."""
    import multiprocessing as mp
    shares = [tuple(range(partitions))[k::producers] or (k % partitions,) for k in range(producers)]
    start = time.time() + MULTI_START_DELAY_S
    with mp.get_context("spawn").Pool(producers) as pool:
        res = pool.map(_produce_child, [(conf, topic, n, size, acks, shares[k], start) for k in range(producers)])
    ok = sum(r[0][4] for r in res)
    elapsed = max(r[2] for r in res) - min(r[1] for r in res)
    return ProduceResult(ok / elapsed, ok * size / elapsed / 1e6, res[0][0].p50, res[0][0].p99, ok,
                         sum(r[0].client_cpu for r in res), min(r[0].share for r in res))


def run_consume(conf, topic, n):
    """Records/s reading from the log start (the mock may have dropped the oldest records: then
    fewer than n are read; the loop ends after 2 s without data)."""
    from confluent_kafka import OFFSET_BEGINNING
    c = Consumer(dict(conf, **{"group.id": "bench", "enable.auto.commit": False, "fetch.wait.max.ms": 10,
                               "auto.offset.reset": "earliest"}))
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    t0 = None  # from the first record received (connection set-up and offset look-up excluded)
    t_last = time.perf_counter()
    while got < n and time.perf_counter() - t_last < (2.0 if t0 else 15.0):
        k = sum(1 for m in c.consume(10000, 0.2) if m.error() is None)
        if k:
            if t0 is None:
                t0 = time.perf_counter()
            got += k
            t_last = time.perf_counter()
    if t0 is None:
        c.close()
        return 0.0
    c.close()
    return got / max(t_last - t0, 1e-6)


def drop_topic(conf, mock, name):
    """Deletes a Gregor topic after its pass: every pass writes a fresh topic, and a run with
    --records 500000 would otherwise leave tens of GB of logs behind (three replicas of each)."""
    if mock:
        return
    admin = AdminClient(conf)  # held until the answer: a client destroyed first fails the future (_DESTROY)
    try:
        admin.delete_topics([name], operation_timeout=30)[name].result(timeout=60)
    except Exception as e:  # the figures stand, the run exits non-zero; the logs stay until the cluster is removed
        benchlib.fail(f"could not delete topic {name}: {e}")


def make_topic_n(conf, mock, partitions):
    name = f"lat-{uuid.uuid4().hex[:8]}"
    if not mock:
        admin = AdminClient(conf)
        admin.create_topics([NewTopic(name, partitions, 3, config=TOPIC_CONFIG)],
                            operation_timeout=30)[name].result(timeout=60)
    return name


HERE = os.path.dirname(os.path.abspath(__file__))
LATENCY_CONSUMER = os.path.join(os.environ.get("GREGOR_BUILD") or os.path.join(HERE, "..", "build"), "bench",
                                "latency_consumer")
MULTI_START_DELAY_S = 3.0  # run_produce_multi: the spawned producers start together this long after the call
LATENCY_KW = {}  # run_latency's sizes (--smoke: tiny ones)


LATENCY_READY_MS = 1500  # latency_consumer: its first fetches' time before it reports ready


def start_latency_consumer(conf, topic, partitions):
    """bench/latency_consumer.c in its own process, assigned at the end of every partition; returns
    once its first fetches are done (LATENCY_READY_MS, every position resolved)."""
    import subprocess
    if not os.path.exists(LATENCY_CONSUMER):
        raise SystemExit(f"{LATENCY_CONSUMER} is not built (make)")
    proc = subprocess.Popen([LATENCY_CONSUMER, conf["bootstrap.servers"], topic, str(partitions),
                             str(LATENCY_READY_MS)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if proc.stdout.readline().strip() != "ready":
        raise RuntimeError("the latency consumer did not start")
    return proc


def latency_consumer_results(proc, n):
    """Tells the consumer to expect n keys; returns {key: perf_counter() seconds} of what it read."""
    out, _ = proc.communicate(f"{n}\n", timeout=60)
    got = {}
    for line in out.splitlines():
        k, ns = line.rsplit(" ", 1)
        got[k.encode()] = int(ns) / 1e9
    return got


def run_latency(conf, mock, acks, partitions=3, rate=200, seconds=3.0, bursts=5, burst_n=5000, probes=20, pause=0.5):
    """produce() -> consumed latency (ms) on a fresh topic of `partitions` (RF 3), the consumer
    (bench/latency_consumer.c: fetch.wait.max.ms 500, i.e. long polls) assigned from the start.
    Returns three sorted lists -- steady (records at `rate`/s for `seconds`), after-burst (after
    each acks=`acks` burst of burst_n records over the partitions has been acknowledged, `probes`
    records 1 ms apart per partition; their latency shows whether the high watermark lags behind
    the burst), hw_after_bursts -- and the number of probes never consumed. `pause` seconds
    before each burst."""
    topic = make_topic_n(conf, mock, partitions)
    p = Producer(dict(conf, acks=acks, **{"linger.ms": 0, "queue.buffering.max.messages": 1000000}))
    # Wait until every partition takes writes (leaders elected, metadata known).
    for part in range(partitions):
        errs = []
        deadline = time.time() + 30
        while time.time() < deadline and errs[-1:] != [None]:
            p.produce(topic, b"warmup", partition=part, on_delivery=lambda e, m, errs=errs: errs.append(e))
            p.flush(10)
    # The HW row's consumer: never polled from Python, its librdkafka threads fetch on their own.
    c = Consumer(dict(conf, **{"group.id": "lat", "enable.auto.commit": False, "auto.offset.reset": "latest"}))
    c.assign([TopicPartition(topic, part, OFFSET_END) for part in range(partitions)])
    consumer = start_latency_consumer(conf, topic, partitions)
    sent = {}  # key -> perf_counter at produce()

    def probe(tag, i, part):
        k = f"{tag}-{i}-{part}".encode()
        sent[k] = time.perf_counter()
        p.produce(topic, b"p", key=k, partition=part)
        p.poll(0)
        return k

    steady = []
    n = int(rate * seconds)
    for i in range(n):
        steady.append(probe("s", i, i % partitions))
        time.sleep(1.0 / rate)
    after = []
    payload = b"b" * 100
    for b in range(bursts):
        time.sleep(pause)
        for i in range(burst_n):
            while True:
                try:
                    p.produce(topic, payload, partition=i % partitions)
                    break
                except BufferError:
                    p.poll(0.001)
        p.flush(60)
        for i in range(probes):
            for part in range(partitions):
                after.append(probe(f"b{b}", i, part))
            time.sleep(0.001)
    p.flush(60)
    got = latency_consumer_results(consumer, len(steady) + len(after))
    hw = hw_after_bursts(p, c, topic, partitions, bursts, burst_n, payload, pause)
    c.close()
    ms = lambda keys: sorted((got[k] - sent[k]) * 1000 for k in keys if k in got)
    lost = sum(1 for k in steady + after if k not in got)
    return ms(steady), ms(after), sorted(hw), lost


def hw_after_bursts(p, c, topic, partitions, bursts, burst_n, payload, pause=0.5):
    """The broker side of 'after bursts' without the consuming client: after each
    acknowledged burst, the time (ms) from flush() returning until the consumer's librdkafka (its
    own thread, from its fetch responses) holds a high watermark past the burst's last offset, per
    partition; a partition whose HW did not get there within 2 s counts as 2000."""
    out = []
    for b in range(bursts):
        time.sleep(pause)
        last = {}

        def dr(err, msg):
            if err is None:
                last[msg.partition()] = max(last.get(msg.partition(), -1), msg.offset())
        for i in range(burst_n):
            while True:
                try:
                    p.produce(topic, payload, partition=i % partitions, on_delivery=dr)
                    break
                except BufferError:
                    p.poll(0.001)
        p.flush(60)
        t0 = time.perf_counter()
        seen = {}
        while len(seen) < len(last) and time.perf_counter() - t0 < 2.0:
            for part, off in last.items():
                if part not in seen and c.get_watermark_offsets(TopicPartition(topic, part), cached=True)[1] > off:
                    seen[part] = time.perf_counter()
            time.sleep(0.0002)
        out += [(seen[q] - t0) * 1000 if q in seen else 2000.0 for q in last]
    return out


def pcts(v):
    if not v:
        return float("nan"), float("nan"), float("nan")
    return v[len(v) // 2], v[min(len(v) - 1, int(0.99 * len(v)))], v[-1]


def latency_rows(args, mock):
    conf = base_conf(args, mock)
    label = "mock" if mock else "gregor"
    rows = []
    for acks in ("1", "all"):
        steady, after, hw, lost = run_latency(conf, mock, acks, **LATENCY_KW)
        check(lost == 0, f"{label} acks={acks}: {lost} latency probes never consumed")
        rows.append((label, acks, "steady 200/s", len(steady), *pcts(steady), lost))
        rows.append((label, acks, "after bursts", len(after), *pcts(after), 0))
        rows.append((label, acks, "HW after burst", len(hw), *pcts(hw), 0))
    return rows


def rf3_floor(size, n, directory, chunk=256 * 1024, trials=3):
    """The two copies every replica of an RF-3 log makes of each record, with nothing else around
    them, as CPU microseconds per record and replica: appending n records to each of three new files
    in the page cache (the leader and both followers do; Kafka too, FileChannel.write), all three
    kept until the last is written, and receiving n records over a loopback TCP socket (the
    producer's bytes into the leader, the leader's into each follower). 256 KiB chunks, about the
    brokers' write sizes, from one buffer that stays in cache. `trials` times; returns (least
    append, most append, least receive): on this VM the same append costs up to ~5x more when the
    page cache grows into memory the host has taken back (free page reporting) than when it gets
    pages freed a moment ago."""
    import socket
    import threading
    buf = memoryview(os.urandom(chunk))  # slices of a memoryview are not copies
    total = n * size
    appends, recvs = [], []
    for trial in range(trials):
        path = os.path.join(directory, f"floor-{uuid.uuid4().hex[:8]}")
        for replica in range(3):  # three logs, as the leader and two followers keep them
            fd = os.open(f"{path}-{replica}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            r0 = resource.getrusage(resource.RUSAGE_THREAD)
            left = total
            while left > 0:
                left -= os.write(fd, buf[:min(chunk, left)])
            r1 = resource.getrusage(resource.RUSAGE_THREAD)
            os.close(fd)
            appends.append(cpu_between(r0, r1))
        for replica in range(3):
            os.unlink(f"{path}-{replica}")
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        snd = socket.create_connection(srv.getsockname())
        rcv, _ = srv.accept()

        def send_all():
            left = total
            while left > 0:
                k = min(chunk, left)
                snd.sendall(buf[:k])
                left -= k
            snd.close()
        th = threading.Thread(target=send_all)
        into = bytearray(chunk)
        r0 = resource.getrusage(resource.RUSAGE_THREAD)
        th.start()
        got = 0
        while got < total:
            k = rcv.recv_into(into)
            if not k:
                break
            got += k
        r1 = resource.getrusage(resource.RUSAGE_THREAD)
        th.join()
        rcv.close()
        srv.close()
        recvs.append(cpu_between(r0, r1))
    return 1e6 * min(appends) / n, 1e6 * max(appends) / n, 1e6 * min(recvs) / n


def bench(args, mock, pids, multi=True):
    """Rows (label, size, acks, partitions x producers, records, rec/s, MB/s, p50, p99, consume
    rec/s, broker CPU s) for one partition and one producer, then (--multi and multi) 6
    partitions and 3 producers."""
    label = {"proc": "mockproc", True: "mock", False: "gregor"}[mock]
    conf = base_conf(args, mock)
    rows = []
    idle = [rss_kib(p) for p in pids]
    sizes = [int(x) for x in args.sizes.split(",")]
    acks_list = args.acks.split(",")
    for size in sizes:
        for a in acks_list:
            acks, idem = a.rstrip("+i"), a.endswith("+i")
            topic, _ = make_topic(conf, mock)
            c0 = cpu_seconds(pids)
            rps, mbps, p50, p99, ok, ccpu, share = run_produce(conf, topic, args.records, size, acks, idem)
            c1 = cpu_seconds(pids)
            check(ok == args.records, f"{label} {size} B acks={a}: {ok} of {args.records} records delivered")
            crps = run_consume(conf, topic, ok) if not args.skip_consume and mock != "proc" else float("nan")
            drop_topic(conf, mock, topic)
            rows.append((label, size, a, "1x1", ok, rps, mbps, p50, p99, crps, c1 - c0 if c0 is not None else None,
                         ccpu, share))
    if args.multi and multi and mock != "proc":
        for size in sizes:
            for a in acks_list:
                if a.endswith("+i"):
                    continue
                topic, parts = make_topic(conf, mock, 6)
                c0 = cpu_seconds(pids)
                rps, mbps, p50, p99, ok, ccpu, share = run_produce_multi(conf, topic, args.records // 3, size, a,
                                                                         parts, 3)
                c1 = cpu_seconds(pids)
                check(ok == 3 * (args.records // 3), f"{label} {size} B acks={a} {parts}x3: {ok} of "
                      f"{3 * (args.records // 3)} records delivered")
                drop_topic(conf, mock, topic)
                rows.append((label, size, a, f"{parts}x3", ok, rps, mbps, p50, p99, float("nan"),
                             c1 - c0 if c0 is not None else None, ccpu, share))
    loaded = [rss_kib(p) for p in pids]
    return rows, idle, loaded


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default="127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094")
    ap.add_argument("--pids", default="run/broker-1.pid,run/broker-2.pid,run/broker-3.pid")
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--mock-only", action="store_true")
    ap.add_argument("--no-mock", action="store_true")
    ap.add_argument("--latency-only", action="store_true", help="only the produce->consume latency table")
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--skip-consume", action="store_true", help="no consume column")
    ap.add_argument("--sizes", default="100,1024", help="record sizes, comma-separated")
    ap.add_argument("--acks", default="1,all,all+i", help="acks cases: 1, all, all+i (idempotent)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="run the 1x1 cases this many times, Gregor and the mock alternating; ratios are "
                         "of the medians (one 100 B run lasts ~0.3 s: single runs swing +-30%%)")
    ap.add_argument("--mock-process", action=argparse.BooleanOptionalAction, default=True,
                    help="also the 1x1 cases against a mock cluster in a separate process (rows 'mockproc')")
    ap.add_argument("--multi", action=argparse.BooleanOptionalAction, default=True,
                    help="also 6 partitions x 3 producer processes (records split over the producers)")
    ap.add_argument("--pin", metavar="CLIENT:CLUSTER", default=None,
                    help="CPU lists, e.g. 0:1: this process (the producers, the in-process mock) on "
                         "CLIENT, the brokers (--pids) and the mock process on CLUSTER, so that the "
                         "cluster under test never runs on the producer's core; compare gregor with "
                         "mockproc then (the in-process mock shares the client's CPUs by construction, and so "
                         "do the 6x3 producers). The brokers get all CPUs back at the end")
    ap.add_argument("--floor", action=argparse.BooleanOptionalAction, default=True,
                    help="after the runs, the brokers' CPU budget at the mock's pace and the RF-3 floor "
                         "(page-cache appends and loopback receives)")
    ap.add_argument("--topic-config", action="append", default=[], metavar="KEY=VALUE",
                    help="a config of every Gregor topic the runs create (repeatable), e.g. "
                         "compression.type=lz4; the mock's topics take none")
    ap.add_argument("--floor-dir", default="run", help="where the floor writes its files (the brokers' disk)")
    ap.add_argument("--start-cluster", action="store_true",
                    help="start a private 3-broker cluster (the integration harness's, in a fresh chroot of "
                         "--zk / GREGOR_ZK, else of a private ZooKeeper) instead of using --bootstrap/--pids")
    ap.add_argument("--zk", default=os.environ.get("GREGOR_ZK"), help="with --start-cluster: host:port of a ZooKeeper")
    benchlib.add_smoke_arg(ap)
    args = ap.parse_args()
    if benchlib.smoke_start(args, "bench_produce.py", records=300, repeat=1, sizes="100", start_cluster=True):
        global MULTI_START_DELAY_S, LATENCY_READY_MS
        MULTI_START_DELAY_S = 1.0
        LATENCY_READY_MS = 200
        LATENCY_KW.update(seconds=0.25, bursts=1, burst_n=300, probes=3, pause=0.1)
    if not args.start_cluster:
        main_with(args, ap)
        benchlib.finish()
        return
    H = benchlib.H
    work = benchlib.workdir("bench-produce-")
    zk_srv, zk_hosts = benchlib.zookeeper(args.zk, work)
    cluster = None
    try:
        cluster = H.Cluster(os.path.join(work, "cluster"), benchlib.fresh_chroot(zk_hosts, "produce"), n=3)
        cluster.start(timeout=60)
        args.bootstrap = ",".join(f"127.0.0.1:{b.port}" for b in cluster.brokers.values())
        args.pids = ",".join(str(b.pid) for b in cluster.brokers.values())
        if args.floor_dir == "run":
            args.floor_dir = work
        print(f"private cluster {args.bootstrap} (ZooKeeper {cluster.zk_connect}; work dir {work})", flush=True)
        main_with(args, ap)
    finally:
        if cluster:
            cluster.close()
        H.kill_leftovers()
        if zk_srv:
            zk_srv.stop()
    benchlib.finish()


def main_with(args, ap):
    for kv in args.topic_config:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            ap.error(f"--topic-config {kv!r}: expected KEY=VALUE")
        TOPIC_CONFIG[k] = v
    if TOPIC_CONFIG:
        print(f"Gregor topics created with {TOPIC_CONFIG}")
    args.cluster_cpus = None
    if args.pin:
        client, cluster = ({int(c) for c in part.split(",")} for part in args.pin.split(":"))
        args.cluster_cpus = cluster
        os.sched_setaffinity(0, client)  # threads started from now on (librdkafka's) inherit it
        import atexit
        for pid in read_pids(args.pids):
            set_process_cpus(pid, cluster)
            atexit.register(set_process_cpus, pid, set(range(os.cpu_count())))
    if not args.skip_latency:
        lat = []
        if not args.mock_only:
            lat += latency_rows(args, False)
        if not args.no_mock:
            lat += latency_rows(args, True)
        print(f"produce() -> consumed latency, 3 partitions RF 3, consumer long-polling (ms):")
        print(f"{'target':7} {'acks':>4} {'phase':14} {'records':>7} {'p50':>7} {'p99':>7} {'max':>7} {'lost':>5}")
        for (label, acks, phase, n, p50, p99, mx, lost) in lat:
            print(f"{label:7} {acks:>4} {phase:14} {n:7} {p50:7.2f} {p99:7.2f} {mx:7.2f} {lost:5}")
        if args.latency_only:
            return
    rows = []
    rss = None
    pids = read_pids(args.pids) if args.pids and not args.mock_only else []
    for rep in range(args.repeat):  # Gregor and the mock alternate: both see the same machine
        if not args.mock_only:
            r, idle, loaded = bench(args, False, pids, multi=rep == 0)
            rows += r
            rss = (pids, rss[1] if rss else idle, loaded)
        if not args.no_mock:
            rows += bench(args, True, [], multi=rep == 0)[0]
    if not args.no_mock:
        if args.mock_process:
            proc, args.mockproc_conf = start_mock_process(args.cluster_cpus)
            try:
                rows += bench(args, "proc", [])[0]
            finally:
                proc.kill()
    print(f"load average {os.getloadavg()[0]:.2f}; brk us/rec = user+sys CPU of all brokers during the produce "
          f"phase / records; MB/s/core = bytes / those CPU seconds; cli us/rec = the producing process(es)' "
          f"user+sys CPU / records (with 'mock' the mock brokers' threads are inside it); py core = the "
          f"producing Python thread's CPU / wall time while it called produce() (the least over the "
          f"producers): the share of a core it got")
    print(f"{'target':8} {'size':>5} {'acks':>5} {'PxC':>4} {'records':>8} {'prod rec/s':>11} {'MB/s':>7} "
          f"{'p50 ms':>7} {'p99 ms':>7} {'cons rec/s':>11} {'brk us/rec':>10} {'MB/s/core':>9} {'cli us/rec':>10} "
          f"{'py core':>7}")
    for (label, size, acks, pc, ok, rps, mbps, p50, p99, crps, cpu, ccpu, share) in rows:
        us = f"{1e6 * cpu / ok:10.2f}" if cpu is not None and ok else f"{'':10}"
        core = f"{ok * size / 1e6 / cpu:9.0f}" if cpu and ok else f"{'':9}"
        cli = f"{1e6 * ccpu / ok:10.2f}" if ok else f"{'':10}"
        print(f"{label:8} {size:5} {acks:>5} {pc:>4} {ok:8} {rps:11.0f} {mbps:7.1f} {p50:7.2f} {p99:7.2f} "
              f"{crps:11.0f} {us} {core} {cli} {share:7.2f}")
    runs = {}  # (label, size, acks) -> [rec/s of each repeat], 1x1 rows
    for r in rows:
        if r[3] == "1x1":
            runs.setdefault((r[0], r[1], r[2]), []).append(r[5])
    med = lambda v: sorted(v)[len(v) // 2]
    by = {k: med(v) for k, v in runs.items()}
    for (label, size, acks), v in runs.items():
        if label != "gregor" or not by.get(("mock", size, acks)):
            continue
        m = runs[("mock", size, acks)]
        extra = ""
        if by.get(("mockproc", size, acks)):
            extra = (f"; gregor / mockproc = {by[(label, size, acks)] / by[('mockproc', size, acks)]:.2f}x; "
                     f"mockproc / mock = {by[('mockproc', size, acks)] / by[('mock', size, acks)]:.2f}x")
        pairs = " ".join(f"{g / k:.2f}" for g, k in zip(v, m))
        print(f"{size} B acks={acks}: gregor / mock = {by[(label, size, acks)] / by[('mock', size, acks)]:.2f}x "
              f"(medians of {len(v)} alternating runs; each run's ratio {pairs}){extra}")
    for size in sorted({r[1] for r in rows}):
        shares = {label: med([r[12] for r in rows if r[0] == label and r[1] == size and r[3] == "1x1"] or [0])
                  for label in ("gregor", "mock", "mockproc")}
        print(f"{size} B: share of a core the producing thread got (median of the 1x1 rows): "
              + ", ".join(f"{k} {v:.2f}" for k, v in shares.items() if v))
    for (label, size, acks), rps in by.items():
        if acks == "all+i" and by.get((label, size, "all")):
            print(f"{label} {size} B: idempotent acks=all = {100 * rps / by[(label, size, 'all')]:.1f}% "
                  f"of non-idempotent acks=all")
    if args.floor and not args.mock_only and not args.no_mock:
        # What the mock's pace leaves the brokers, against what the log's mandatory copies cost on
        # this machine. At the mock's median R (records/s, all its rows of that size) the cores give
        # cores / R us of CPU per record; the client's share (its CPU per record against Gregor,
        # median) is spent whatever the brokers do; the rest is the brokers' budget. The floor is an
        # RF-3 log with nothing but its copies: three page-cache appends and three loopback receives
        # per record (no CRC, no requests, no replication protocol, no writeback), each replica's log
        # as long as one pass's.
        cores = os.cpu_count()
        floor_dir = args.floor_dir if os.path.isdir(args.floor_dir) else "."
        for size in sorted({r[1] for r in rows}):
            g = [r for r in rows if r[0] == "gregor" and r[1] == size and r[3] == "1x1" and r[4]]
            mocks = [r[5] for r in rows if r[0] == "mock" and r[1] == size and r[3] == "1x1"]
            if not g or not mocks:
                continue
            cli = med([1e6 * r[11] / r[4] for r in g])
            brk = med([1e6 * r[10] / r[4] for r in g]) if g[0][10] is not None else float("nan")
            per_record = cores * 1e6 / med(mocks)  # us of CPU the cores give each record at the mock's pace
            app, app_hi, rcv = rf3_floor(size, args.records, floor_dir)
            print(f"{size} B: at the mock's median {med(mocks):.0f} records/s, {cores} cores give "
                  f"{per_record:.2f} us per record; the client takes {cli:.2f}, leaving the brokers "
                  f"{per_record - cli:.2f}. RF-3 floor (page-cache append {app:.2f}-{app_hi:.2f} + loopback receive "
                  f"{rcv:.2f}, x3): {3 * (app + rcv):.2f}-{3 * (app_hi + rcv):.2f} us; Gregor's brokers: "
                  f"{brk:.2f} us")
    if rss:
        pids, idle, loaded = rss
        for pid, a, b in zip(pids, idle, loaded):
            print(f"gregord pid {pid}: RSS idle {a} KiB, after the runs {b} KiB")


if __name__ == "__main__":
    main()
