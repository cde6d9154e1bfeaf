#!/usr/bin/env bash
# A private, standalone ZooKeeper (Debian's `zookeeper` package, 3.8) for development and tests.
#
#   scripts/zk.sh start  DIR PORT   start a server on 127.0.0.1:PORT keeping everything under DIR
#                                   (DIR/conf, DIR/data, DIR/log, DIR/zk.pid); waits for ruok -> imok
#   scripts/zk.sh stop   DIR [PORT] stop the server whose pid is in DIR/zk.pid (data is kept, so a
#                                   later `start` with the same DIR resumes with the same znodes
#                                   and sessions)
#   scripts/zk.sh status DIR PORT   exit 0 and print "running pid N" if it answers ruok, else exit 1
#
# A three-node (N-node) ensemble, quorum on loopback ports, each member in DIR/zkI:
#   scripts/zk.sh start-ensemble  DIR BASEPORT [N]  start members 1..N (default 3); member I serves
#                                   clients on 127.0.0.1:BASEPORT+I-1, talks quorum on
#                                   BASEPORT+10+I and leader election on BASEPORT+20+I; waits
#                                   until every member answers ruok and one reports Mode: leader
#   scripts/zk.sh stop-ensemble   DIR               stop every member (SIGTERM, data kept)
#   scripts/zk.sh start-member    DIR I             (re)start member I of an ensemble made by
#                                   start-ensemble (waits for ruok only: a member alone has no
#                                   quorum and answers "This ZooKeeper instance is not currently
#                                   serving requests" until a majority is back)
#   scripts/zk.sh stop-member     DIR I [kill]      stop member I (SIGTERM; "kill": SIGKILL)
#   scripts/zk.sh mode            DIR I             print member I's mode (leader, follower,
#                                   standalone) or "down"
#   scripts/zk.sh connect         DIR               print the client connect string
#                                   (127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3)
# DIR/ensemble records BASEPORT and N for the member commands.
#
# The JVM is started directly (not through zkServer.sh, which wants /etc/zookeeper and /var/log).
# zookeeper.jar's manifest lists its runtime dependencies (jute, netty, slf4j-api, ...); we add the
# log4j 1.2 slf4j binding so the server's own log lands in DIR/log/zookeeper.log.
#
# Settings: tickTime=500 (minimum session timeout 1 s, so tests can use 3 s sessions),
# maxSessionTimeout=60000, admin server off, all four-letter words allowed. ZK_FORCE_SYNC=yes in
# the environment turns fsync per transaction back on (off by default: the data is throw-away).
# JVM: a small heap, the serial collector and the C1 compiler only (quick to start, small, for
# tests); ZK_JVM_OPTS in the environment replaces those flags (set but empty: the JVM's own
# defaults, as zkServer.sh without JVMFLAGS); the benchmarks give it a larger heap (benchlib.py).
set -euo pipefail

usage() { echo "usage: $0 start|stop|status DIR [PORT] | start-ensemble DIR BASEPORT [N] | stop-ensemble DIR | start-member|stop-member|mode DIR I | connect DIR" >&2; exit 2; }

[ $# -ge 2 ] || usage
cmd=$1
dir=$2
port=${3:-}

ruok() { # ruok PORT -> prints the answer (imok) or nothing
    timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && printf ruok >&3 && cat <&3" 2>/dev/null || true
}

fourlw() { # fourlw PORT WORD -> the server's answer, or nothing
    timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && printf $2 >&3 && cat <&3" 2>/dev/null || true
}

pid_alive() { # pid_alive [DIR]
    local d=${1:-$dir} pid
    [ -f "$d/zk.pid" ] || return 1
    pid=$(cat "$d/zk.pid" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

classpath() { # classpath DIR
    local cp="$1/conf:/usr/share/java/zookeeper.jar" j
    for j in slf4j-log4j12 log4j-1.2; do
        [ -f "/usr/share/java/$j.jar" ] && cp="$cp:/usr/share/java/$j.jar"
    done
    echo "$cp"
}

# launch DIR PORT [MYID QUORUM_LINES]: writes DIR/conf and starts the JVM (pid in DIR/zk.pid);
# returns at once. With MYID the server is member MYID of the ensemble described by
# QUORUM_LINES (server.N=... lines).
launch() {
    local d=$1 p=$2 myid=${3:-} quorum=${4:-}
    [ -f /usr/share/java/zookeeper.jar ] || { echo "zk.sh: /usr/share/java/zookeeper.jar missing (apt-get install zookeeper)" >&2; exit 1; }
    command -v java >/dev/null || { echo "zk.sh: java not found (apt-get install default-jre-headless)" >&2; exit 1; }
    mkdir -p "$d/conf" "$d/data" "$d/log"
    d=$(cd "$d" && pwd)
    cat >"$d/conf/zoo.cfg" <<CFG
# written by scripts/zk.sh
tickTime=500
initLimit=10
syncLimit=5
dataDir=$d/data
clientPort=$p
clientPortAddress=127.0.0.1
maxClientCnxns=0
maxSessionTimeout=60000
admin.enableServer=false
4lw.commands.whitelist=*
forceSync=${ZK_FORCE_SYNC:-no}
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
CFG
    if [ -n "$myid" ]; then
        echo "$myid" >"$d/data/myid"
        printf '%s\n' "$quorum" >>"$d/conf/zoo.cfg"
        # A member may start before the others are up: retry election connections quickly.
        echo "cnxTimeout=2000" >>"$d/conf/zoo.cfg"
    fi
    cat >"$d/conf/log4j.properties" <<CFG
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.RollingFileAppender
log4j.appender.FILE.File=$d/log/zookeeper.log
log4j.appender.FILE.MaxFileSize=10MB
log4j.appender.FILE.MaxBackupIndex=2
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
CFG
    # setsid: the server outlives the shell that started it and is not hit by its terminal's ^C.
    local jvm="-Xms32m -Xmx${heap:-512m} -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    # shellcheck disable=SC2086 # word splitting of the flags is intended
    setsid java ${ZK_JVM_OPTS-$jvm} \
        -Dzookeeper.log.dir="$d/log" -Dlog4j.configuration="file:$d/conf/log4j.properties" \
        -Dzookeeper.jmx.log4j.disable=true \
        -cp "$(classpath "$d")" org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/conf/zoo.cfg" \
        </dev/null >>"$d/log/zookeeper.out" 2>&1 &
    echo $! >"$d/zk.pid"
}

# wait_ruok DIR PORT SECONDS: until the server answers ruok; fails if it exits or time runs out.
wait_ruok() {
    local d=$1 p=$2 n=$(($3 * 10))
    for _ in $(seq 1 "$n"); do
        [ "$(ruok "$p")" = imok ] && return 0
        if ! pid_alive "$d"; then
            echo "zk.sh: zookeeper in $d exited during start-up; last lines of $d/log:" >&2
            tail -n 30 "$d/log/zookeeper.out" "$d/log/zookeeper.log" >&2 2>/dev/null || true
            return 1
        fi
        sleep 0.1
    done
    echo "zk.sh: zookeeper on 127.0.0.1:$p did not answer ruok within $3 s" >&2
    tail -n 30 "$d/log/zookeeper.log" >&2 2>/dev/null || true
    return 1
}

# halt DIR [SIGNAL]: stops the server whose pid is in DIR/zk.pid (TERM, KILL after 10 s).
halt() {
    local d=$1 sig=${2:-TERM} pid
    if ! pid_alive "$d"; then
        rm -f "$d/zk.pid"
        return 0
    fi
    pid=$(cat "$d/zk.pid")
    kill -"$sig" "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$d/zk.pid"; return 0; }
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    rm -f "$d/zk.pid"
}

mode_of() { # mode_of PORT -> leader | follower | standalone | down (or "not serving")
    local out
    out=$(fourlw "$1" srvr)
    if [ -z "$out" ]; then echo down; return; fi
    local m
    m=$(printf '%s\n' "$out" | sed -n 's/^Mode: //p')
    echo "${m:-not serving}"
}

# ---- ensemble bookkeeping: DIR/ensemble holds "BASEPORT N" ----
ens_read() {
    [ -f "$dir/ensemble" ] || { echo "zk.sh: $dir/ensemble missing (not made by start-ensemble)" >&2; exit 1; }
    read -r ens_base ens_n <"$dir/ensemble"
}
member_port() { echo $((ens_base + $1 - 1)); }
quorum_lines() {
    local i
    for i in $(seq 1 "$ens_n"); do
        echo "server.$i=127.0.0.1:$((ens_base + 10 + i)):$((ens_base + 20 + i))"
    done
}
start_member() { # start_member I (no waiting)
    local i=$1 d="$dir/zk$1" p
    p=$(member_port "$i")
    if pid_alive "$d"; then return 0; fi
    heap=256m launch "$d" "$p" "$i" "$(quorum_lines)"
}

case "$cmd" in
start)
    [ -n "$port" ] || usage
    if pid_alive && [ "$(ruok "$port")" = imok ]; then
        echo "zookeeper already running in $dir (pid $(cat "$dir/zk.pid")) on 127.0.0.1:$port"
        exit 0
    fi
    if [ "$(ruok "$port")" = imok ]; then
        echo "zk.sh: something else already answers on 127.0.0.1:$port" >&2
        exit 1
    fi
    launch "$dir" "$port"
    wait_ruok "$dir" "$port" 30   # a cold JVM on a busy 2-core box can be slow
    ;;
stop)
    halt "$dir"
    ;;
status)
    [ -n "$port" ] || usage
    if [ "$(ruok "$port")" = imok ]; then
        if pid_alive; then echo "running pid $(cat "$dir/zk.pid") on 127.0.0.1:$port"; else echo "something answers on 127.0.0.1:$port (not started from $dir)"; fi
        exit 0
    fi
    echo "not running"
    exit 1
    ;;
start-ensemble)
    [ -n "$port" ] || usage
    n=${4:-3}
    mkdir -p "$dir"
    if [ -f "$dir/ensemble" ]; then
        ens_read
        [ "$ens_base" = "$port" ] && [ "$ens_n" = "$n" ] ||
            { echo "zk.sh: $dir holds an ensemble on base port $ens_base x$ens_n" >&2; exit 1; }
    fi
    echo "$port $n" >"$dir/ensemble"
    ens_read
    for i in $(seq 1 "$n"); do
        p=$(member_port "$i")
        if ! pid_alive "$dir/zk$i" && [ "$(ruok "$p")" = imok ]; then
            echo "zk.sh: something else already answers on 127.0.0.1:$p" >&2
            exit 1
        fi
        start_member "$i"
    done
    for i in $(seq 1 "$n"); do wait_ruok "$dir/zk$i" "$(member_port "$i")" 60; done
    # ruok answers before the quorum exists: wait for a leader and every member serving.
    for _ in $(seq 1 600); do
        leaders=0 serving=0
        for i in $(seq 1 "$n"); do
            case $(mode_of "$(member_port "$i")") in
            leader) leaders=$((leaders + 1)); serving=$((serving + 1)) ;;
            follower) serving=$((serving + 1)) ;;
            esac
        done
        [ $leaders -eq 1 ] && [ $serving -eq "$n" ] && exit 0
        sleep 0.1
    done
    echo "zk.sh: the ensemble in $dir elected no leader within 60 s" >&2
    for i in $(seq 1 "$n"); do tail -n 15 "$dir/zk$i/log/zookeeper.log" >&2 2>/dev/null || true; done
    exit 1
    ;;
stop-ensemble)
    ens_read
    for i in $(seq 1 "$ens_n"); do halt "$dir/zk$i" & done
    wait
    ;;
start-member)
    [ -n "$port" ] || usage
    ens_read
    start_member "$port"
    wait_ruok "$dir/zk$port" "$(member_port "$port")" 60
    ;;
stop-member)
    [ -n "$port" ] || usage
    ens_read
    if [ "${4:-}" = kill ]; then halt "$dir/zk$port" KILL; else halt "$dir/zk$port"; fi
    ;;
mode)
    [ -n "$port" ] || usage
    ens_read
    mode_of "$(member_port "$port")"
    ;;
connect)
    ens_read
    hosts=
    for i in $(seq 1 "$ens_n"); do hosts="$hosts${hosts:+,}127.0.0.1:$(member_port "$i")"; done
    echo "$hosts"
    ;;
*) usage ;;
esac
