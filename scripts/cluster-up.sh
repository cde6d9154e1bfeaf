#!/usr/bin/env bash
# Starts a local three-broker Gregor cluster for development.
#
#   scripts/cluster-up.sh        (also: make cluster)
#   scripts/cluster-up.sh --ensemble    (or GREGOR_ZK_ENSEMBLE=1): a 3-member ZooKeeper ensemble
#                                       and brokers on distinct loopback addresses, see below
#
# 1. scripts/setup.sh (installs missing packages, builds);
# 2. ZooKeeper on 127.0.0.1:2181 unless something already answers there (data in ./run/zk);
# 3. brokers 1-3 from config/server.properties, listening on 127.0.0.1:9092-9094, log dirs
#    ./run/broker-N, logs ./run/broker-N.log, pids ./run/broker-N.pid, Prometheus metrics at
#    http://127.0.0.1:9192-9194/metrics (gregor.metrics.listener); __consumer_offsets and
#    __transaction_state replicated 3 times (min.isr 2), the example file being for one broker;
# 4. waits until all three are registered in ZooKeeper and prints the bootstrap list.
#
# --ensemble: step 2 starts a 3-member ensemble instead (scripts/zk.sh start-ensemble run/zk-ensemble
# 2181: clients on 127.0.0.1:2181-2183, quorum 2192-2194, election 2202-2204) and the brokers use
# zookeeper.connect=127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183/gregor; broker N listens on
# 127.0.0.(N+1):9092 (advertised likewise), the shape of a multi-host deployment on one machine.
# scripts/cluster-down.sh stops everything again. Re-running cluster-up leaves running brokers alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
run=$root/run
zk_port=${GREGOR_ZK_PORT:-2181}
zk=127.0.0.1:$zk_port
ports=(9092 9093 9094)
hosts=(127.0.0.1 127.0.0.1 127.0.0.1)
ensemble=${GREGOR_ZK_ENSEMBLE:-}
[ "${1:-}" = --ensemble ] && ensemble=1
if [ -n "$ensemble" ]; then
    zk=127.0.0.1:$zk_port,127.0.0.1:$((zk_port + 1)),127.0.0.1:$((zk_port + 2))/gregor
    ports=(9092 9092 9092)
    hosts=(127.0.0.2 127.0.0.3 127.0.0.4)
fi
metrics_ports=(9192 9193 9194)

"$root/scripts/setup.sh"
mkdir -p "$run"

if [ -n "$ensemble" ]; then
    "$root/scripts/zk.sh" start-ensemble "$run/zk-ensemble" "$zk_port" 3
    echo "zookeeper: ensemble of 3 on ${zk%/*} (data in run/zk-ensemble)"
elif "$root/scripts/zk.sh" status "$run/zk" "$zk_port" >/dev/null; then
    echo "zookeeper: using the one answering on $zk"
else
    "$root/scripts/zk.sh" start "$run/zk" "$zk_port"
    echo "zookeeper: started on $zk (data in run/zk)"
fi

for i in 1 2 3; do
    port=${ports[$((i - 1))]}
    host=${hosts[$((i - 1))]}
    mport=${metrics_ports[$((i - 1))]}
    pidf=$run/broker-$i.pid
    if [ -f "$pidf" ] && kill -0 "$(cat "$pidf")" 2>/dev/null; then
        echo "broker $i: already running (pid $(cat "$pidf"))"
        continue
    fi
    mkdir -p "$run/broker-$i"
    setsid "$root/build/bin/gregord" "$root/config/server.properties" \
        --override broker.id=$i \
        --override listeners=PLAINTEXT://$host:$port \
        --override advertised.listeners=PLAINTEXT://$host:$port \
        --override log.dirs="$run/broker-$i" \
        --override zookeeper.connect=$zk \
        --override gregor.metrics.listener=http://127.0.0.1:$mport \
        --override offsets.topic.replication.factor=3 \
        --override transaction.state.log.replication.factor=3 \
        --override transaction.state.log.min.isr=2 \
        </dev/null >>"$run/broker-$i.log" 2>&1 &
    echo $! >"$pidf"
    echo "broker $i: started (pid $!, $host:$port, metrics http://127.0.0.1:$mport/metrics, log run/broker-$i.log)"
done

# Wait for all three registrations (up to 60 s), watching for brokers that died.
/usr/bin/python3 - "$zk" "$run" <<'PY2'
import os, sys, time
import logging
logging.basicConfig(level=logging.CRITICAL)
from kazoo.client import KazooClient
zk_hosts, run = sys.argv[1], sys.argv[2]
zk = KazooClient(hosts=zk_hosts)
zk.start(timeout=15)
deadline = time.monotonic() + 60
try:
    while True:
        ids = set(zk.get_children("/brokers/ids")) if zk.exists("/brokers/ids") else set()
        if {"1", "2", "3"} <= ids:
            break
        for i in (1, 2, 3):
            pid = int(open(f"{run}/broker-{i}.pid").read())
            try:  # a broker that exited stays a zombie child of this script: look at its state
                dead = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
            except OSError:
                dead = True
            if dead:
                sys.stderr.write(f"cluster-up: broker {i} exited; last lines of run/broker-{i}.log:\n")
                sys.stderr.write("".join(open(f"{run}/broker-{i}.log").readlines()[-20:]))
                sys.exit(1)
        if time.monotonic() > deadline:
            sys.stderr.write(f"cluster-up: registered after 60 s: {sorted(ids)} (want 1, 2, 3)\n")
            sys.exit(1)
        time.sleep(0.2)
finally:
    zk.stop()
    zk.close()
PY2

"$root/build/bin/gregorctl" --zookeeper "$zk" cluster || true
echo "bootstrap: ${hosts[0]}:${ports[0]},${hosts[1]}:${ports[1]},${hosts[2]}:${ports[2]}"
