#!/usr/bin/env bash
# Runs every test stage Gregor has; `.ci/run` execs this. Exit status is non-zero if any stage
# failed or was skipped without being asked to; a summary of stages, test counts and times is
# printed at the end, closing with one line "total: N passed, M failed".
#
#   scripts/test-all.sh                 (also: make test)
#   GREGOR_SOAK=1 scripts/test-all.sh   long forms: more simulation seeds, longer fuzzing,
#                                       soak-marked integration tests
#   GREGOR_SKIP=fuzz,bench ...          skip named stages (the names of the summary); a stage
#                                       skipped for any other reason fails the run
#   GREGOR_WERROR=0 ...                 build without -Werror (it otherwise sticks in build/'s cache)
#
# Stages, in order:
#   setup        packages (scripts/setup.sh)
#   build        the release build (-Werror), then, in the background at low priority, the
#                sanitizer builds the last stages use: build-asan/ (ASan+UBSan, gcc) and
#                build-fuzz/ (libFuzzer targets only, clang)
#   layering     src/controller includes no broker code
#   zookeeper    a private ZooKeeper on a free port (stopped on exit)
#   unit         C unit tests (ctest)
#   sim          the deterministic simulation (fixed, moving and long-outage seeds)
#   integration  pytest: real ZooKeeper, gregord processes and real clients (pytest-xdist, one
#                worker per core)
#   chaos        tests/chaos
#   netfault     tests/netfault: ZooKeeper ensemble and fault proxies
#   fuzz         every libFuzzer target, 8 s each, one per core
#   asan-unit    the unit tests under ASan+UBSan (LeakSanitizer on)
#   asan-sim     100 simulation seeds under ASan+UBSan
#   asan-integ   ASAN_TESTS below against the ASan gregord: brokers stop with SIGTERM so
#                LeakSanitizer checks them at exit, and any sanitizer report fails the test
#   bench        every benchmark's smoke mode (bench/smoke.sh): a broken bench fails the run;
#                its figures are never recorded
# Budget: 20 minutes on this project's 2-core machine; each stage's time is in the summary.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
soak=${GREGOR_SOAK:-}
skip=,${GREGOR_SKIP:-},
jobs=$(nproc 2>/dev/null || echo 2)
export CI=${CI:-}

# The integration tests that also run against the ASan+UBSan gregord (asan-integ): produce and
# consume with every client and codec, replication and leader failover, groups, transactions,
# idempotence, compaction, TLS/SASL handshakes and hostile input.
ASAN_TESTS=(
    tests/integration/test_topic_ids.py::test_recreated_topic_while_replica_away_serves_only_new_data
    tests/integration/test_topic_ids.py::test_control_requests_with_hostile_topic_ids
    tests/integration/test_topic_ids.py::test_rewrite_without_id_keeps_the_id_and_the_data
    tests/integration/test_alter_partition.py::test_alter_partition_versions_at_the_controller
    tests/integration/test_alter_partition.py::test_hostile_alter_partition_frames
    tests/integration/test_fetch_topic_ids.py
    tests/integration/test_replica_fetch_diverging.py
    tests/integration/test_topic_ids.py::test_rewrite_without_id_while_no_controller_keeps_the_id
    tests/integration/test_topic_ids.py::test_rewrite_without_id_and_stamp_while_no_controller_moves_data_aside
    tests/integration/test_topic_ids.py::test_topic_znode_deleted_by_hand_and_written_again_gets_a_new_id
    tests/integration/test_admin_versions.py
    tests/integration/test_produce_consume.py
    tests/integration/test_kip664.py
    tests/integration/test_replication.py::test_sigkill_leader_while_writing
    tests/integration/test_controller_standby.py::test_warm_failover_reads_only_topics_written_since
    tests/integration/test_foundation.py::test_stale_controller_epoch_write_refused_by_gregord
    tests/integration/test_consumer_groups.py::test_confluent_commit_and_resume
    tests/integration/test_consumer_groups.py::test_coordinator_failover_keeps_offsets
    tests/integration/test_group_loading.py
    tests/integration/test_transactions.py::test_commit_abort_and_isolation
    tests/integration/test_transactions.py::test_send_offsets_only_on_commit
    tests/integration/test_transactions.py::test_new_coordinator_finishes_prepared_commit
    "tests/integration/test_txn_markers.py::test_stuck_partition_does_not_stall_other_transactions[kill]"
    tests/integration/test_txn_markers.py::test_failed_complete_commit_is_retried
    tests/integration/test_txn_markers.py::test_next_transaction_replaces_complete_commit
    tests/integration/test_txn_markers.py::test_failed_next_transaction_write_falls_back_to_complete_commit
    tests/integration/test_txn_markers.py::test_leader_epoch_bump_keeps_coordinator_loaded
    tests/integration/test_transactions.py::test_kip890_slow_coordinator_stalls_only_its_producers
    tests/integration/test_transactions.py::test_kip890_txn_offset_commit_verified
    tests/integration/test_transactions.py::test_add_partitions_wait_is_bounded
    tests/integration/test_transactions.py::test_kip890_verification_after_idle_close
    tests/integration/test_transactions.py::test_kip890_checks_of_concurrent_producers_share_one_request
    tests/integration/test_transactions.py::test_kip890_batched_check_keeps_a_fenced_epoch_apart
    tests/integration/test_idempotence.py::test_retries_of_cached_batches_survive_restarts
    tests/integration/test_compaction.py::test_compaction_latest_value_tombstones_and_size
    tests/integration/test_compaction.py::test_compact_delete_under_retention_still_compacted
    tests/integration/test_compaction.py::test_tombstones_of_a_low_throughput_log_removed_on_time
    tests/integration/test_storage_faults.py::test_failed_swap_rename_takes_the_dir_offline_and_keeps_the_group
    tests/integration/test_log_validator.py::test_inner_offsets_not_0_to_n_are_reassigned
    tests/chaos/test_disk_chaos.py::test_power_loss_of_the_controller
    tests/chaos/test_disk_chaos.py::test_disk_faults
    tests/integration/test_configs.py::test_dynamic_broker_log_settings_reach_existing_logs
    tests/integration/test_security_tls.py::test_negative_authentication
    tests/integration/test_security_tls.py::test_hostile_input
    tests/integration/test_malformed.py
    tests/integration/test_hostile_input.py
    tests/integration/test_storage_failures.py
    tests/integration/test_group_txn_failures.py
    tests/integration/test_group_topic_deletion.py
    tests/integration/test_limits.py
    tests/integration/test_hostile_siege.py
    tests/integration/test_log_validator.py
    tests/integration/test_security_tls.py::test_certificate_principal_java_dn_and_mapping_rules
    tests/integration/test_security_tls.py::test_mapping_rule_over_match_limit_refuses_not_falls_through
    tests/integration/test_quotas.py::test_quotas_follow_the_sasl_principal
    tests/integration/test_acls.py::test_add_partitions_to_txn_hides_topic_existence
    tests/integration/test_acls.py::test_transactional_produce_with_null_transactional_id
    tests/integration/test_groups_v39.py::test_find_coordinator_hostile_counts
    tests/integration/test_groups_v39.py::test_group_versions_authorization
    tests/integration/test_groups_v39.py::test_find_coordinator_batch_with_a_dead_coordinator
    tests/integration/test_txn_v39.py::test_add_partitions_v4_hostile
    tests/integration/test_txn_v39.py::test_transaction_flow_at_3_9_versions
    tests/integration/test_controller_mutation_quota.py
    tests/integration/test_broker_logger.py
    tests/integration/test_config_changes_v1.py
    tests/integration/test_dashboards.py::test_connection_metrics_of_one_broker
    tests/integration/test_datapath_v39.py
)
# What the sanitizers do in every process of the asan stages: stop at the first report with a
# recognisable exit code (86; LeakSanitizer's is 23), leaks checked at exit.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:exitcode=86:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/lsan.supp:print_suppressions=0}

names=() results=() times=() counts=()
failed=0 total_passed=0 total_failed=0
count= # set by a stage function: what it ran, e.g. "55 tests"
tmp=$(mktemp -d /tmp/gregor-test-all.XXXXXX)
zk_port=
bg_pids=()

cleanup() {
    local p
    # the background sanitizer builds run in their own process group (setsid): all of make goes
    for p in "${bg_pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
    if [ -n "$zk_port" ]; then "$root/scripts/zk.sh" stop "$tmp/zk" "$zk_port" >/dev/null 2>&1; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "test-all: interrupted" >&2; exit 130' INT TERM

# tally PASSED FAILED: adds to the closing line's totals.
tally() {
    total_passed=$((total_passed + $1))
    total_failed=$((total_failed + $2))
}

summary() {
    echo
    echo "==== summary ===="
    local i
    for i in "${!names[@]}"; do
        printf '  %-12s %-5s %5ss  %s\n' "${names[$i]}" "${results[$i]}" "${times[$i]}" "${counts[$i]}"
    done
    # a failed test's name and message, also when its captured output pushed them out of view
    grep -h -E '^(FAILED|ERROR) ' "$tmp"/pytest-*.log 2>/dev/null | cut -c1-1500 | sed 's/^/  /'
    printf '  %-12s %-5s %5ss\n' all "$([ $failed -eq 0 ] && echo ok || echo FAIL)" "$SECONDS"
    echo "total: $total_passed passed, $total_failed failed"
}

record() { # record NAME RESULT SECONDS COUNT
    names+=("$1") results+=("$2") times+=("$3") counts+=("$4")
}

# stage NAME COMMAND...: runs one stage, records its result, duration and count.
stage() {
    local name=$1
    shift
    if [[ $skip == *",$name,"* ]]; then
        record "$name" skip 0 "(GREGOR_SKIP)"
        echo "==== $name: skipped (GREGOR_SKIP) ===="
        return 0
    fi
    echo "==== $name ===="
    local t0=$SECONDS rc=0 failed_before=$total_failed
    count=
    "$@" || rc=$?
    # a stage that failed without counting a failed test (build, set-up, a build it waited for)
    # still counts one, so the closing line never says 0 failed on a failed run
    [ $rc -ne 0 ] && [ "$total_failed" -eq "$failed_before" ] && tally 0 1
    if [ $rc -eq 0 ]; then
        record "$name" ok $((SECONDS - t0)) "$count"
    else
        record "$name" FAIL $((SECONDS - t0)) "$count"
        failed=1
        echo "==== $name FAILED (exit $rc) ===="
    fi
    return $rc
}

# skipped NAME WHY: a stage that cannot run. That fails the run unless GREGOR_SKIP names it.
skipped() {
    if [[ $skip == *",$1,"* ]]; then
        record "$1" skip 0 "(GREGOR_SKIP)"
        return 0
    fi
    record "$1" FAIL 0 "not run: $2"
    failed=1
    tally 0 1
    echo "==== $1: NOT RUN ($2); GREGOR_SKIP=$1 skips it on purpose ===="
}

# A free port for the private ZooKeeper: above the integration harness's range (20000-32000) and
# below the kernel's ephemeral range (32768-), so no outbound connection can take it before
# ZooKeeper binds it.
free_port() {
    /usr/bin/python3 -c '
import random, socket
for _ in range(200):
    p = random.randint(32001, 32760)
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            continue
    print(p)
    break'
}

start_zk() {
    zk_port=$(free_port)
    "$root/scripts/zk.sh" start "$tmp/zk" "$zk_port" && echo "zookeeper on 127.0.0.1:$zk_port"
}

run_build() {
    # -Werror sticks in build/'s CMake cache; GREGOR_WERROR=0 builds without it (local use).
    local flags=-DGR_WERROR=ON
    [ "${GREGOR_WERROR:-1}" = 0 ] && flags=
    make CMAKE_FLAGS="$flags" >"$tmp/build.log" 2>&1 || { grep -E 'error|Error' "$tmp/build.log" | head -n 40; echo ...; tail -n 40 "$tmp/build.log"; return 1; }
    count="gregord, gregorctl, tests"
    # The sanitizer builds, one after the other at the lowest priority, while the next stages run
    # (they mostly wait on sockets and timers); the stages that need them wait for them.
    local want_asan=1 want_fuzz=1
    [[ $skip == *",asan-unit,"* && $skip == *",asan-sim,"* && $skip == *",asan-integ,"* ]] && want_asan=0
    [[ $skip == *",fuzz,"* ]] && want_fuzz=0
    command -v clang >/dev/null || want_fuzz=0
    [ $want_asan = 0 ] && echo 0 >"$tmp/asan-build.rc"
    [ $want_fuzz = 0 ] && echo 0 >"$tmp/fuzz-build.rc"
    # setsid: its own process group, so cleanup() stops every make and compiler of it
    setsid bash -c '
        tmp=$1 want_asan=$2 want_fuzz=$3
        if [ "$want_asan" = 1 ]; then
            nice -n 19 make asan >"$tmp/asan-build.log" 2>&1
            echo $? >"$tmp/asan-build.rc"
        fi
        if [ "$want_fuzz" = 1 ]; then
            nice -n 19 make fuzz >"$tmp/fuzz-build.log" 2>&1
            echo $? >"$tmp/fuzz-build.rc"
        fi' bg-builds "$tmp" $want_asan $want_fuzz &
    bg_pids+=($!)
}

# wait_build NAME: waits for a background sanitizer build (asan, fuzz); fails if it failed.
wait_build() {
    local t0=$SECONDS
    while [ ! -f "$tmp/$1-build.rc" ]; do
        sleep 1
        if ! kill -0 "${bg_pids[0]:-0}" 2>/dev/null && [ ! -f "$tmp/$1-build.rc" ]; then
            echo "$1 build: the background builds ended without a result"
            return 1
        fi
        if [ $((SECONDS - t0)) -gt 1800 ]; then echo "$1 build: not done after 30 minutes"; return 1; fi
    done
    [ $((SECONDS - t0)) -gt 1 ] && echo "waited $((SECONDS - t0)) s for the $1 build"
    if [ "$(cat "$tmp/$1-build.rc")" != 0 ]; then
        echo "$1 build failed:"
        grep -E 'error|Error' "$tmp/$1-build.log" | head -n 40
        tail -n 40 "$tmp/$1-build.log"
        return 1
    fi
}

# ctest_in DIR: the unit tests of one build; count from ctest's closing line.
ctest_in() {
    local log="$tmp/ctest-$(basename "$1").log" rc=0
    (cd "$1" && GREGOR_TEST_ZK=127.0.0.1:$zk_port ctest --output-on-failure -j "$jobs") 2>&1 | tee "$log" || rc=$?
    # "100% tests passed, 0 tests failed out of 55"
    local line n f
    line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1)
    n=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
    f=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$line")
    if [ -z "$line" ]; then
        count="no ctest summary"
        tally 0 1
        return 1
    fi
    count="$n tests, $f failed"
    tally $((n - f)) "$f"
    return $rc
}

run_unit() { ctest_in build; }

# The simulation: the scenarios and the fixed seeds 1..500 (what every run re-proves), then 300
# seeds from a range that moves with the commit (start derived from `git rev-parse HEAD`), so CI
# keeps exploring new interleavings; a failure there prints its replay command, and the range is
# printed so a run can be repeated (GREGOR_SIM_START=S pins it).
# sim_runs BINARY SEEDS MOVING OUTAGES: the three runs; count = seeds run.
sim_runs() {
    local bin=$1 seeds=$2 moving=$3 outages=$4 rc=0 head start runs=0 bad=0
    "$bin" --seeds "$seeds" || { rc=1; bad=$((bad + 1)); }
    runs=$((runs + 1))
    head=$(git rev-parse HEAD 2>/dev/null || date +%s)
    start=${GREGOR_SIM_START:-$((10001 + 0x$(printf '%s' "$head" | sha1sum | cut -c1-7) % 1000000))}
    echo "sim: moving range: seeds $start..$((start + moving - 1)) (from commit ${head:0:12}); replay one:" \
        "$bin --seed N; the range: $bin --seeds $moving --start $start"
    "$bin" --no-scenarios --seeds "$moving" --start "$start" || { rc=1; bad=$((bad + 1)); }
    runs=$((runs + 1))
    # ZooKeeper unreachable for many session timeouts (kzk must wait, not give up)
    echo "sim: long outages: $bin --no-scenarios --long-outages --seeds $outages --start $start"
    "$bin" --no-scenarios --long-outages --seeds "$outages" --start "$start" || { rc=1; bad=$((bad + 1)); }
    runs=$((runs + 1))
    # the warm standby controller on every broker (W1 checks every failover's context)
    echo "sim: standby: $bin --no-scenarios --standby --seeds $((moving / 2)) --start $start"
    "$bin" --no-scenarios --standby --seeds "$((moving / 2))" --start "$start" || { rc=1; bad=$((bad + 1)); }
    runs=$((runs + 1))
    echo "sim: standby scenarios: $bin --standby --scenarios-only"
    "$bin" --standby --scenarios-only || { rc=1; bad=$((bad + 1)); }
    runs=$((runs + 1))
    count="$((seeds + moving + outages + moving / 2)) seeds in $runs runs, $bad failed"
    tally $((runs - bad)) $bad
    return $rc
}

run_sim() {
    if [ -n "$soak" ]; then sim_runs build/tests/gregor_sim 20000 300 50; else sim_runs build/tests/gregor_sim 500 300 50; fi
}

# run_pytest NAME TIMEOUT WORKERS ARGS...: one pytest run; count from pytest's closing line.
# With WORKERS > 1, pytest-xdist runs the test files on that many workers (whole files per worker,
# each with its own port range: gregor_harness.free_port); the tests mostly wait on brokers, so
# two workers on two cores halve the stage. 1: one process (stages whose faults are timed).
run_pytest() {
    local name=$1 limit=$2 workers=$3
    shift 3
    local par=()
    [ "$workers" -gt 1 ] && par=(-n "$workers" --dist loadfile)
    # -rsfE: every skipped, failed and erroring test is listed at the end with its reason
    local extra=(-p no:cacheprovider -rsfE)
    # one hung test fails alone (pytest-timeout) instead of eating the stage's whole limit
    [ -n "$soak" ] || extra+=(-m "not soak" --timeout=300)
    [ -n "$soak" ] && limit=3600
    local log="$tmp/pytest-$name.log" rc=0
    # timeout signals its whole process group: brokers the tests started go too.
    GREGOR_ZK=127.0.0.1:$zk_port GREGOR_ROOT=$root \
        COLUMNS=400 timeout -k 10 "$limit" /usr/bin/python3 -m pytest --maxfail=5 -q "${par[@]}" "${extra[@]}" "$@" 2>&1 | tee "$log" || rc=$?
    # pytest's own closing line, whole: "[=== ]N failed, M passed, ... in T s[ (H:MM:SS)][ ===]".
    # Anchored on both ends: a client's log line such as "Connect to 127.0.0.1:25092 failed" must
    # not be read as a count.
    local last p f e s
    last=$(grep -E '^(=+ )?([0-9]+ [a-z]+(, )?)+ in [0-9.]+s( \([0-9:]+\))?( =+)?$' "$log" | tail -n 1)
    p=$(grep -oE '[0-9]+ passed' <<<"$last" | grep -oE '[0-9]+' || echo 0)
    f=$(grep -oE '[0-9]+ failed' <<<"$last" | grep -oE '[0-9]+' || echo 0)
    e=$(grep -oE '[0-9]+ errors?' <<<"$last" | grep -oE '[0-9]+' || echo 0)
    s=$(grep -oE '[0-9]+ skipped' <<<"$last" | grep -oE '[0-9]+' || echo 0)
    count="$p passed, $((f + e)) failed, $s skipped"
    [ "$s" -gt 0 ] && count+=" (see the SKIPPED lines above)"
    [ $rc -ne 0 ] && [ $((f + e)) -eq 0 ] && { f=1; count+="; exit $rc (timeout or collection error)"; }
    tally "$p" $((f + e))
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
    wait_build fuzz || return 1
    local secs=8 f rc=0 name ok=0 bad=0
    local -a targets=() pids=()
    [ -n "$soak" ] && secs=300
    mkdir -p "build-fuzz/artifacts"
    for f in build-fuzz/fuzz/fuzz_*; do [ -x "$f" ] && targets+=("$f"); done
    [ ${#targets[@]} -gt 0 ] || { echo "no fuzz targets built"; count="no targets"; return 1; }
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
                ok=$((ok + 1))
            else
                echo "$name: FAILED; tail of its output:"
                tail -n 40 "$tmp/$name.log"
                rc=1 bad=$((bad + 1))
            fi
        done
        i=$((i + jobs))
    done
    count="${#targets[@]} targets, ${secs} s each, $bad failed"
    tally $ok $bad
    if [ $rc -ne 0 ] && [ -n "$CI" ]; then
        echo "crash inputs (base64):"
        for f in build-fuzz/artifacts/*; do [ -f "$f" ] && { echo "$f"; base64 -w0 "$f" | head -c 4096; echo; }; done
    fi
    return $rc
}

run_asan_unit() { wait_build asan && ctest_in build-asan; }

run_asan_sim() {
    wait_build asan || return 1
    local bin=build-asan/tests/gregor_sim
    [ -x "$bin" ] || { count="$bin not built"; tally 0 1; return 1; }
    if [ -n "$soak" ]; then sim_runs "$bin" 2000 300 50; else sim_runs "$bin" 100 60 10; fi
}

run_asan_integ() {
    wait_build asan || return 1
    GREGOR_BUILD=$root/build-asan GREGOR_SANITIZED=1 run_pytest asan-integ 900 "$jobs" "${ASAN_TESTS[@]}"
}

run_bench() {
    local log="$tmp/bench.log" rc=0 line
    GREGOR_ZK=127.0.0.1:$zk_port GREGOR_BUILD=$root/build bench/smoke.sh 2>&1 | tee "$log" || rc=$?
    line=$(grep -E '^bench: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        count="no summary line"
        tally 0 1
        return 1
    fi
    local p f
    p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+')
    f=$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+')
    count="$p benches (smoke), $f failed"
    tally "$p" "$f"
    return $rc
}

have_tests() { compgen -G "$1" >/dev/null; }

stage setup env SETUP_NO_BUILD=1 scripts/setup.sh
if stage build run_build; then
    stage layering scripts/check-layering.sh
    if stage zookeeper start_zk; then
        stage unit run_unit
        if [ -x build/tests/gregor_sim ]; then stage sim run_sim; else skipped sim "build/tests/gregor_sim not built"; fi
        # integration on one worker per core; chaos and netfault alone (their faults are timed)
        for d in integration:1500:$jobs chaos:600:1 netfault:420:1; do
            IFS=: read -r n limit workers <<<"$d"
            if have_tests "tests/$n/test_*.py"; then
                stage "$n" run_pytest "$n" "$limit" "$workers" "tests/$n"
            else
                skipped "$n" "no tests/$n/test_*.py"
            fi
        done
        if command -v clang >/dev/null && have_tests 'tests/fuzz/fuzz_*.c'; then
            stage fuzz run_fuzz
        else
            skipped fuzz "no clang or no targets"
        fi
        stage asan-unit run_asan_unit
        stage asan-sim run_asan_sim
        stage asan-integ run_asan_integ
        if [ -x bench/smoke.sh ]; then stage bench run_bench; else skipped bench "no bench/smoke.sh"; fi
    fi
fi
summary
exit $failed
