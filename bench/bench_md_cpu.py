#!/usr/bin/python3
"""The CPU a real gregord spends per all-topics Metadata answer (issue 14, session 5).

Starts one broker (private ZooKeeper unless --zk), creates --partitions partitions RF 1 in topics
of --per-topic, waits until its Metadata shows every partition with a leader, then sends --polls
raw Metadata requests (all topics, --version) over one connection, back to back, and prints the
broker's CPU per answer from /proc/PID/stat (user+sys, minus the same process's idle rate measured
just before over --idle seconds). bench/bench_metadata.c measures the same in-process, with
instruction counts under callgrind; this is the check on a whole broker.

  GREGOR_ROOT=$PWD /usr/bin/python3 bench/bench_md_cpu.py --partitions 30000 [--zk HOST:PORT] [--smoke]
Prints figures; not a test.
"""
import argparse
import os
import socket
import struct
import sys
import time

import benchlib
from benchlib import H


def cpu_s(pid):
    c = benchlib.proc_cpu_s(pid)  # utime + stime
    if c is None:
        raise RuntimeError(f"broker pid {pid} is gone")
    return c


def metadata_request(corr, version):
    body = struct.pack(">i", -1)  # null topics = all (v1+)
    if version >= 4:
        body += b"\x01"  # AllowAutoTopicCreation
    hdr = struct.pack(">hhih", 3, version, corr, 5) + b"bench"
    frame = hdr + body
    return struct.pack(">i", len(frame)) + frame


def recv_all(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(1 << 20, n - len(buf)))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return bytes(buf)


def poll(sock, corr, version):
    sock.sendall(metadata_request(corr, version))
    size = struct.unpack(">i", recv_all(sock, 4))[0]
    return recv_all(sock, size)


def led_partitions(answer):
    """Partitions with a leader >= 0 in a v1 answer (parsed in place)."""
    p = 4 + 4  # correlation id, then brokers
    nb = struct.unpack_from(">i", answer, 4)[0]
    for _ in range(nb):
        p += 4
        hl = struct.unpack_from(">h", answer, p)[0]
        p += 2 + hl + 4
        rl = struct.unpack_from(">h", answer, p)[0]
        p += 2 + max(rl, 0)
    p += 4  # controller id
    nt = struct.unpack_from(">i", answer, p)[0]
    p += 4
    led = 0
    for _ in range(nt):
        p += 2
        nl = struct.unpack_from(">h", answer, p)[0]
        p += 2 + nl + 1
        np_ = struct.unpack_from(">i", answer, p)[0]
        p += 4
        for _ in range(np_):
            _err, _idx, leader = struct.unpack_from(">hii", answer, p)
            p += 10
            led += leader >= 0
            for _ in range(2):
                n = struct.unpack_from(">i", answer, p)[0]
                p += 4 + 4 * n
    return led


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=30000)
    ap.add_argument("--per-topic", type=int, default=100)
    ap.add_argument("--polls", type=int, default=20)
    ap.add_argument("--version", type=int, default=1, choices=range(1, 9))
    ap.add_argument("--idle", type=float, default=3.0)
    ap.add_argument("--zk", default=os.environ.get("GREGOR_ZK"))
    ap.add_argument("--hold", type=float, default=0.0,
                    help="then keep polling this many seconds (attach perf to the printed pid)")
    benchlib.add_smoke_arg(ap)
    args = ap.parse_args()
    benchlib.smoke_start(args, "bench_md_cpu.py", partitions=100, per_topic=10, polls=3, idle=0.5, hold=0.0)
    benchlib.raise_nofile(20000)
    work = benchlib.workdir("bench-md-cpu-")
    zk_srv, zk_hosts = benchlib.zookeeper(args.zk, work)
    cluster = None
    try:
        zk = benchlib.fresh_chroot(zk_hosts, "mdcpu")
        cluster = H.Cluster(work, zk, n=1, config={"num.io.threads": "2"})
        cluster.start()
        b = cluster.brokers[1]
        from confluent_kafka.admin import NewTopic
        admin = benchlib.admin_for(b)
        nt = (args.partitions + args.per_topic - 1) // args.per_topic
        t0, cc0 = time.time(), cpu_s(b.pid)
        for lo in range(0, nt, 100):
            fs = admin.create_topics([NewTopic(f"md-{i:05d}", args.per_topic, 1)
                                      for i in range(lo, min(nt, lo + 100))], request_timeout=600)
            for f in fs.values():
                f.result()
        sock = socket.create_connection(("127.0.0.1", b.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        want = nt * args.per_topic
        corr = 1
        while True:
            led = led_partitions(poll(sock, corr, 1))
            corr += 1
            if led >= want:
                break
            if time.time() - t0 > 900:
                sys.exit(f"only {led} of {want} partitions led after 900 s")
            time.sleep(0.5)
        print(f"{want} partitions led after {time.time() - t0:.1f} s (broker CPU {cpu_s(b.pid) - cc0:.2f} s)")
        time.sleep(1.0)
        c0, w0 = cpu_s(b.pid), time.time()
        time.sleep(args.idle)
        idle_rate = (cpu_s(b.pid) - c0) / (time.time() - w0)
        c1, w1 = cpu_s(b.pid), time.time()
        size = 0
        for _ in range(args.polls):
            size = len(poll(sock, corr, args.version))
            corr += 1
        c2, w2 = cpu_s(b.pid), time.time()
        per = ((c2 - c1) - idle_rate * (w2 - w1)) / args.polls
        print(f"partitions {want} version {args.version} answer {size} B: broker CPU "
              f"{per * 1e3:.2f} ms per answer ({args.polls} polls in {w2 - w1:.2f} s wall, "
              f"idle {idle_rate * 1e3:.1f} ms/s, RSS after {benchlib.rss_kib(b) / 1024:.0f} MiB, "
              f"load {os.getloadavg()[0]:.2f}, "
              f"gregord {H.GREGORD})")
        if args.hold > 0:
            print(f"polling for {args.hold:.0f} s more: broker pid {b.pid}", flush=True)
            end = time.time() + args.hold
            while time.time() < end:
                poll(sock, corr, args.version)
                corr += 1
        sock.close()
    finally:
        if cluster:
            cluster.kill_all()
        if zk_srv:
            zk_srv.stop()
    benchlib.finish()


if __name__ == "__main__":
    main()
