#!/usr/bin/env bash
# Stops the local cluster started by scripts/cluster-up.sh: SIGTERM to each broker (clean
# shutdown), SIGKILL after 30 s, then the ZooKeeper in ./run/zk (or the ensemble in
# ./run/zk-ensemble) if cluster-up started it.
# Data (run/broker-N, run/zk) is kept; `rm -rf run` wipes it.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
run=$root/run
zk_port=${GREGOR_ZK_PORT:-2181}

pids=()
for i in 1 2 3; do
    pidf=$run/broker-$i.pid
    [ -f "$pidf" ] || continue
    pid=$(cat "$pidf")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null && pids+=("$pid") && echo "broker $i: stopping (pid $pid)"
    fi
done
deadline=$((SECONDS + 30))
for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null; do
        if [ $SECONDS -ge $deadline ]; then
            echo "broker pid $pid: still running after 30 s, sending SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null
            break
        fi
        sleep 0.1
    done
done
rm -f "$run"/broker-*.pid

if [ -f "$run/zk-ensemble/ensemble" ]; then
    "$root/scripts/zk.sh" stop-ensemble "$run/zk-ensemble" && echo "zookeeper: ensemble stopped"
fi
if [ -f "$run/zk/zk.pid" ]; then
    "$root/scripts/zk.sh" stop "$run/zk" "$zk_port" && echo "zookeeper: stopped"
fi
