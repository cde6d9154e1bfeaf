#!/usr/bin/python3
"""Produce throughput over TLS vs plaintext, in the same run against the same 3-broker cluster.

    /usr/bin/python3 bench/bench_tls.py [--records 50000] [--rounds 2] [--zk HOST:PORT] [--smoke]

Starts a private ZooKeeper (unless --zk / GREGOR_ZK) and 3 brokers with the listeners
PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512; the inter-broker listener, so replication is
TLS + SASL in every case), certificates generated with openssl for the run
(tests/integration/security_pki.py). For each record size (100 B, 1 KiB) and acks (1, all), and
for each client listener in turn (interleaved, --rounds times, best round kept), a fresh RF-3
one-partition topic gets --records records from confluent-kafka (bench_produce.run_produce: linger.ms=1).
Prints records/s, MB/s, p50/p99 delivery latency per listener, the TLS/plaintext ratios, the load
average and the commit. Nothing is asserted.
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import benchlib  # noqa: E402
import bench_produce as BP  # noqa: E402
import gregor_harness as H  # noqa: E402
import security_pki as P  # noqa: E402


def client_conf(kind, ports, pki):
    c = {"bootstrap.servers": ",".join(f"127.0.0.1:{p[kind]}" for p in ports), "log_level": 3}
    if kind == "SSL":
        c.update({"security.protocol": "SSL", "ssl.ca.location": pki["ca"]})
    elif kind == "INTERNAL":
        c.update({"security.protocol": "SASL_SSL", "ssl.ca.location": pki["ca"], "sasl.mechanism": "SCRAM-SHA-512",
                  "sasl.username": "admin", "sasl.password": "admin-secret"})
    return c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--zk", default=os.environ.get("GREGOR_ZK"))
    benchlib.add_smoke_arg(ap)
    args = ap.parse_args()
    benchlib.smoke_start(args, "bench_tls.py", records=300, rounds=1)
    work = benchlib.workdir("bench-tls-")
    zk_srv, zk_hosts = benchlib.zookeeper(args.zk, work)
    pki = P.make_pki(os.path.join(work, "pki"))
    cluster = None
    try:
        connect = benchlib.fresh_chroot(zk_hosts, "tls")
        cluster = H.Cluster(os.path.join(work, "cluster"), connect, n=3)
        P.write_scram_user(cluster.zk, "admin", {"SCRAM-SHA-512": "admin-secret"})
        ports = []
        for b in cluster.brokers.values():
            p = {"INTERNAL": H.free_port(), "SSL": H.free_port(), "PLAINTEXT": H.free_port()}
            cfg = P.broker_security_config(pki, p)
            cfg["listener.security.protocol.map"] = "INTERNAL:SASL_SSL,SSL:SSL,PLAINTEXT:PLAINTEXT"
            cfg["ssl.client.auth"] = "none"
            cfg["offsets.topic.replication.factor"] = "3"
            b.config = cfg
            ports.append(p)
        cluster.start(timeout=60)
        kinds = [("PLAINTEXT", "plaintext"), ("SSL", "SSL"), ("INTERNAL", "SASL_SSL")]
        best = {}
        for _ in range(args.rounds):
            for size in (100, 1024):
                for acks in ("1", "all"):
                    for kind, label in kinds:
                        conf = client_conf(kind, ports, pki)
                        topic, _ = BP.make_topic(conf, False)
                        r = BP.run_produce(conf, topic, args.records, size, acks)
                        benchlib.check(r.ok == args.records, f"{label} {size} B acks={acks}: {r.ok} of "
                                       f"{args.records} records delivered")
                        key = (size, acks, label)
                        if key not in best or r.rps > best[key][0]:
                            best[key] = (r.rps, r.mbps, r.p50, r.p99, r.ok)
        commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        print(f"commit {commit}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
              f"{args.records} records, best of {args.rounds}")
        print(f"{'size':>5} {'acks':>4} {'listener':10} {'rec/s':>9} {'MB/s':>7} {'p50 ms':>7} {'p99 ms':>7} "
              f"{'vs plain':>8}")
        for size in (100, 1024):
            for acks in ("1", "all"):
                base = best[(size, acks, "plaintext")][0]
                for _, label in kinds:
                    rps, mbps, p50, p99, ok = best[(size, acks, label)]
                    print(f"{size:5} {acks:>4} {label:10} {rps:9.0f} {mbps:7.1f} {p50:7.2f} {p99:7.2f} "
                          f"{rps / base:8.2f}")
    finally:
        if cluster:
            cluster.close()
        H.kill_leftovers()
        if zk_srv:
            zk_srv.stop()
    benchlib.finish()


if __name__ == "__main__":
    main()
