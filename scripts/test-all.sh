#!/usr/bin/env bash
# Runs every test stage Gregor has; `.ci/run` execs this. Exit status is non-zero if any stage
# failed; a summary of stages, results and times is printed at the end.
#
#   scripts/test-all.sh                 (also: make test)
#   GREGOR_SOAK=1 scripts/test-all.sh   long forms: more simulation seeds, longer fuzzing,
#                                       soak-marked integration tests
#   GREGOR_SKIP=asan,fuzz ...           skip named stages (setup build unit sim integration chaos
#                                       netfault fuzz asan)
#   GREGOR_WERROR=0 ...                 build without -Werror (it otherwise sticks in build/'s cache)
#   GREGOR_ASAN=1 ...                   run the ASan stage even when past its time budget (it is
#                                       skipped when the run already took GREGOR_ASAN_BUDGET_S=600 s)
#
# Stages: setup (packages), build (-Werror), a private ZooKeeper on a free port (stopped on exit),
# unit tests (ctest), simulation (build/tests/gregor_sim, when built), integration tests (pytest,
# real ZooKeeper + gregord processes), chaos tests (tests/chaos, when present), network-fault
# tests (tests/netfault: ZooKeeper ensemble, fault proxies), fuzzers (clang,
# 12 s each), ASan+UBSan unit tests (when the run is under GREGOR_ASAN_BUDGET_S). Budget: about 20 minutes on 2 cores.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
soak=${GREGOR_SOAK:-}
skip=,${GREGOR_SKIP:-},
jobs=$(nproc 2>/dev/null || echo 2)

names=() results=() times=()
declare -A skips=() # stage name -> number of skipped pytest tests
failed=0
tmp=$(mktemp -d /tmp/gregor-test-all.XXXXXX)
zk_port=

cleanup() {
    if [ -n "$zk_port" ]; then "$root/scripts/zk.sh" stop "$tmp/zk" "$zk_port" >/dev/null 2>&1; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "test-all: interrupted" >&2; exit 130' INT TERM

summary() {
    echo
    echo "==== summary ===="
    local i
    local i n total_skips=0
    for i in "${!names[@]}"; do
        n=${skips[${names[$i]}]:-0}
        total_skips=$((total_skips + n))
        printf '  %-12s %-5s %5ss%s\n' "${names[$i]}" "${results[$i]}" "${times[$i]}" \
            "$([ "$n" -gt 0 ] && echo "  ($n tests skipped: see the SKIPPED lines above)")"
    done
    # a failed test's name and message, also when its captured output pushed them out of view
    grep -h -E '^(FAILED|ERROR) ' "$tmp"/pytest-*.log 2>/dev/null | cut -c1-1500 | sed 's/^/  /'
    printf '  %-12s %-5s %5ss  (%d tests skipped)\n' total "$([ $failed -eq 0 ] && echo ok || echo FAIL)" \
        "$SECONDS" "$total_skips"
}

# stage NAME COMMAND...: runs one stage, records its result and duration.
stage() {
    local name=$1
    shift
    if [[ $skip == *",$name,"* ]]; then
        names+=("$name") results+=(skip) times+=(0)
        return 0
    fi
    echo "==== $name ===="
    local t0=$SECONDS rc=0
    "$@" || rc=$?
    names+=("$name") times+=($((SECONDS - t0)))
    if [ $rc -eq 0 ]; then
        results+=(ok)
    else
        results+=(FAIL)
        failed=1
        echo "==== $name FAILED (exit $rc) ===="
    fi
    return $rc
}

skipped() { names+=("$1") results+=(skip) times+=(0); echo "==== $1: skipped ($2) ===="; }

free_port() {
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

start_zk() {
    zk_port=$(free_port)
    "$root/scripts/zk.sh" start "$tmp/zk" "$zk_port" && echo "zookeeper on 127.0.0.1:$zk_port"
}

run_unit() {
    (cd build && GREGOR_TEST_ZK=127.0.0.1:$zk_port ctest --output-on-failure -j "$jobs")
}

# The simulation: the scenarios and the fixed seeds 1..500 (what every run re-proves), then 300
# seeds from a range that moves with the commit (start derived from `git rev-parse HEAD`), so CI
# keeps exploring new interleavings; a failure there prints its replay command, and the range is
# printed so a run can be repeated (GREGOR_SIM_START=S pins it). 500 seeds in all, as before
# (about 15 s on one core).
run_sim() {
    local seeds=500 moving=300 rc=0 head start
    [ -n "$soak" ] && seeds=20000
    build/tests/gregor_sim --seeds "$seeds" || rc=1
    head=$(git rev-parse HEAD 2>/dev/null || date +%s)
    start=${GREGOR_SIM_START:-$((10001 + 0x$(printf '%s' "$head" | sha1sum | cut -c1-7) % 1000000))}
    echo "sim: moving range: seeds $start..$((start + moving - 1)) (from commit ${head:0:12}); replay one:" \
        "build/tests/gregor_sim --seed N; the range: build/tests/gregor_sim --seeds $moving --start $start"
    build/tests/gregor_sim --no-scenarios --seeds "$moving" --start "$start" || rc=1
    # ZooKeeper unreachable for many session timeouts (kzk must wait, not give up): 50 seeds, ~3 s
    echo "sim: long outages: build/tests/gregor_sim --no-scenarios --long-outages --seeds 50 --start $start"
    build/tests/gregor_sim --no-scenarios --long-outages --seeds 50 --start "$start" || rc=1
    return $rc
}

run_pytest() { # run_pytest DIR TIMEOUT; the stage is named after DIR's last component
    # -rsfE: every skipped, failed and erroring test is listed at the end with its reason
    local extra=(-p no:cacheprovider -rsfE)
    [ -n "$soak" ] || extra+=(-m "not soak")
    local limit=${2:-600}
    [ -n "$soak" ] && limit=3600
    local log="$tmp/pytest-$(basename "$1").log" rc=0
    # timeout signals its whole process group: brokers the tests started go too.
    GREGOR_ZK=127.0.0.1:$zk_port GREGOR_ROOT=$root \
        COLUMNS=400 timeout -k 10 "$limit" /usr/bin/python3 -m pytest -x -q "${extra[@]}" "$1" 2>&1 | tee "$log" || rc=$?
    # pytest's last line: "N passed, M skipped, ... in T s"
    skips[$(basename "$1")]=$(tail -n 1 "$log" | grep -oE '[0-9]+ skipped' | grep -oE '[0-9]+' || echo 0)
    return $rc
}

fuzz_one() { # fuzz_one BINARY SECONDS -> runs one target; output in $tmp/NAME.log
    local f=$1 secs=$2 name corpus
    name=$(basename "$f")
    corpus="$tmp/corpus-$name"
    mkdir -p "$corpus"
    [ -d "tests/fuzz/corpus/$name" ] && cp -r "tests/fuzz/corpus/$name/." "$corpus/" 2>/dev/null
    "$f" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 \
        -artifact_prefix="build-fuzz/artifacts/$name-" "$corpus" >"$tmp/$name.log" 2>&1
}

run_fuzz() {
    make fuzz >"$tmp/fuzz-build.log" 2>&1 || { tail -n 60 "$tmp/fuzz-build.log"; return 1; }
    local secs=12 f rc=0 name
    local -a targets=() pids=()
    [ -n "$soak" ] && secs=300
    mkdir -p "build-fuzz/artifacts"
    for f in build-fuzz/fuzz/fuzz_*; do [ -x "$f" ] && targets+=("$f"); done
    [ ${#targets[@]} -gt 0 ] || { echo "no fuzz targets built"; return 0; }
    # One target per core at a time.
    local i=0
    while [ $i -lt ${#targets[@]} ]; do
        pids=()
        local batch=("${targets[@]:$i:$jobs}")
        for f in "${batch[@]}"; do fuzz_one "$f" "$secs" & pids+=($!); done
        local k
        for k in "${!batch[@]}"; do
            name=$(basename "${batch[$k]}")
            if wait "${pids[$k]}"; then
                echo "$name: ok ($(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$tmp/$name.log" | tail -n 1)s)"
            else
                echo "$name: FAILED; tail of its output:"
                tail -n 40 "$tmp/$name.log"
                rc=1
            fi
        done
        i=$((i + jobs))
    done
    if [ $rc -ne 0 ] && [ -n "${CI:-}" ]; then
        echo "crash inputs (base64):"
        for f in build-fuzz/artifacts/*; do [ -f "$f" ] && { echo "$f"; base64 -w0 "$f" | head -c 4096; echo; }; done
    fi
    return $rc
}

run_asan() {
    make asan >"$tmp/asan-build.log" 2>&1 || { tail -n 60 "$tmp/asan-build.log"; return 1; }
    (cd build-asan && GREGOR_TEST_ZK=127.0.0.1:$zk_port ctest --output-on-failure -j "$jobs")
}

export CI=${CI:-}
run_build() {
    # -Werror sticks in build/'s CMake cache; GREGOR_WERROR=0 builds without it (local use).
    local flags=-DGR_WERROR=ON
    [ "${GREGOR_WERROR:-1}" = 0 ] && flags=
    make CMAKE_FLAGS="$flags" >"$tmp/build.log" 2>&1 || { grep -E 'error|Error' "$tmp/build.log" | head -n 40; echo ...; tail -n 40 "$tmp/build.log"; return 1; }
}

stage setup env SETUP_NO_BUILD=1 scripts/setup.sh
if stage build run_build; then
    stage layering scripts/check-layering.sh # src/controller includes no broker code
    if stage zookeeper start_zk; then
        stage unit run_unit
        if [ -x build/tests/gregor_sim ]; then
            stage sim run_sim
        else
            skipped sim "build/tests/gregor_sim not built"
        fi
        if compgen -G 'tests/integration/test_*.py' >/dev/null; then
            stage integration run_pytest tests/integration 1500
        else
            skipped integration "no tests"
        fi
        if compgen -G 'tests/chaos/test_*.py' >/dev/null; then
            stage chaos run_pytest tests/chaos 600
        else
            skipped chaos "no tests"
        fi
        if compgen -G 'tests/netfault/test_*.py' >/dev/null; then
            stage netfault run_pytest tests/netfault 420 # ZooKeeper ensemble + network faults
        fi
        if command -v clang >/dev/null && compgen -G 'tests/fuzz/fuzz_*.c' >/dev/null; then
            stage fuzz run_fuzz
        else
            skipped fuzz "no clang or no targets"
        fi
        # ASan+UBSan unit tests: skipped when the run has already used most of its budget
        # (CI's limit is 15 minutes on 2 cores), always run with GREGOR_SOAK=1 or GREGOR_ASAN=1.
        if [ -n "$soak" ] || [ -n "${GREGOR_ASAN:-}" ] || [ $SECONDS -lt "${GREGOR_ASAN_BUDGET_S:-600}" ]; then
            stage asan run_asan
        else
            skipped asan "time budget: ${SECONDS}s used; GREGOR_ASAN=1 forces it"
        fi
    fi
fi
summary
exit $failed
