#!/usr/bin/env bash
# Runs every benchmark's smoke mode, one after another: the same code paths as a full run with
# tiny sizes, so that a bench broken by a change elsewhere (a helper's signature, a log line, a
# binary's arguments) fails CI instead of the next person who needs its figures. The figures a
# smoke run prints mean nothing and are never recorded (bench/README.md, "Smoke mode").
#
#   bench/smoke.sh [NAME...]     every bench, or only the named ones (e.g. bench_tls bench_logs)
#
# Environment: GREGOR_BUILD (default build/), GREGOR_ZK=HOST:PORT a running ZooKeeper (every
# script then works in fresh chroots of it; unset: each Python script starts a private one as its
# full run does, and bench_zkwrite gets one started here), PYTHON (default /usr/bin/python3),
# BENCH_SMOKE_TIMEOUT seconds per bench (default 60).
# Prints `bench NAME: ok (Ns)` or `bench NAME: FAILED (...)` with the tail of its output per
# bench, then `bench: N passed, M failed`; exits 1 when any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${GREGOR_BUILD:-build}
export GREGOR_BUILD=$(cd "$build" 2>/dev/null && pwd || echo "$root/$build")
export GREGOR_ROOT=$root
py=${PYTHON:-/usr/bin/python3}
limit=${BENCH_SMOKE_TIMEOUT:-60}
out=$(mktemp -d /tmp/bench-smoke.XXXXXX)
private_zk=
cleanup() {
    [ -n "$private_zk" ] && scripts/zk.sh stop "$out/zk" >/dev/null 2>&1
    rm -rf "$out"
}
trap cleanup EXIT

# The ZooKeeper of the C programs that are given one (bench_zkwrite -z): GREGOR_ZK, else a private
# one started here on first use (scripts/zk.sh, free port); a fresh chroot of it per run
# (benchlib.fresh_chroot), printed.
zk_for_c() {
    if [ -n "${GREGOR_ZK:-}" ]; then
        echo "$GREGOR_ZK"
        return
    fi
    echo "$private_zk"
}
start_private_zk() {
    [ -n "${GREGOR_ZK:-}" ] || [ -n "$private_zk" ] && return 0
    local port
    port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    scripts/zk.sh start "$out/zk" "$port" >/dev/null && private_zk=127.0.0.1:$port
}
fresh_chroot() { # HOSTS NAME
    (cd bench && "$py" -c 'import sys, benchlib; print(benchlib.fresh_chroot(sys.argv[1], sys.argv[2]))' "$1" "$2")
}

# name -> command (smoke arguments). md_probe and latency_consumer run inside bench_failover.py
# and bench_produce.py.
declare -A cmd=(
    [bench_admin]="$py bench/bench_admin.py --smoke"
    [bench_election]="$py bench/bench_election.py --smoke"
    [bench_failover]="$py bench/bench_failover.py --smoke"
    [bench_hostile]="$py bench/bench_hostile.py --smoke"
    [bench_md_cpu]="$py bench/bench_md_cpu.py --smoke"
    [bench_produce]="$py bench/bench_produce.py --smoke"
    [bench_tls]="$py bench/bench_tls.py --smoke"
    [bench_topics]="$py bench/bench_topics.py --smoke"
    [bench_txn]="$py bench/bench_txn.py --smoke"
    [bench_zkwrite]="$GREGOR_BUILD/bench/bench_zkwrite -n 300 -r 1 kzk:100:4 kzk:50:8 aset:64 -z"
    [bench_metadata]="$GREGOR_BUILD/bench/bench_metadata -n 300 -p 10 -k 2 -v 0,1,9"
    [bench_ctrl_startup]="$GREGOR_BUILD/bench/bench_ctrl_startup -n 300 -p 10 -k 2"
    [bench_logs]="$GREGOR_BUILD/bench/bench_logs -n 200 -D -d $out/logs"
    [bench_group_offsets]="$GREGOR_BUILD/bench/bench_group_offsets -n 300 -r 3"
)
order=(bench_metadata bench_ctrl_startup bench_logs bench_group_offsets bench_zkwrite bench_md_cpu bench_topics bench_election
       bench_admin bench_txn bench_failover bench_tls bench_hostile bench_produce)
[ $# -gt 0 ] && order=("$@")

passed=0
failed=0
t_all=$SECONDS
for name in "${order[@]}"; do
    c=${cmd[$name]:-}
    if [ -z "$c" ]; then
        echo "bench $name: FAILED (no such bench; known: ${!cmd[*]})"
        failed=$((failed + 1))
        continue
    fi
    rm -rf "$out/logs"
    t0=$SECONDS
    rc=0
    if [ "$name" = bench_zkwrite ]; then  # its chroot is made first (the time counts)
        start_private_zk && connect=$(fresh_chroot "$(zk_for_c)" zkwrite 2>"$out/$name.out") || rc=1
        [ $rc -eq 0 ] && c="$c $connect"
    fi
    [ $rc -eq 0 ] && { timeout -k 5 "$limit" $c >>"$out/$name.out" 2>&1; rc=$?; }
    secs=$((SECONDS - t0))
    if [ $rc -eq 0 ]; then
        echo "bench $name: ok (${secs}s)"
        passed=$((passed + 1))
    else
        why="exit $rc"
        [ $rc -eq 124 ] || [ $rc -eq 137 ] && why="timed out after ${limit}s"
        echo "bench $name: FAILED ($why, ${secs}s): $c"
        grep -v '^%[0-9]|' "$out/$name.out" | tail -n 25 | sed 's/^/    /'
        failed=$((failed + 1))
    fi
done
total=$((SECONDS - t_all))
echo "(all benches: ${total}s)"
echo "bench: $passed passed, $failed failed"
[ $failed -eq 0 ]
