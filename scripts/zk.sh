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
# The JVM is started directly (not through zkServer.sh, which wants /etc/zookeeper and /var/log).
# zookeeper.jar's manifest lists its runtime dependencies (jute, netty, slf4j-api, ...); we add the
# log4j 1.2 slf4j binding so the server's own log lands in DIR/log/zookeeper.log.
#
# Settings: tickTime=500 (minimum session timeout 1 s, so tests can use 3 s sessions),
# maxSessionTimeout=60000, admin server off, all four-letter words allowed. ZK_FORCE_SYNC=yes in
# the environment turns fsync per transaction back on (off by default: the data is throw-away).
set -euo pipefail

usage() { echo "usage: $0 start|stop|status DIR [PORT]" >&2; exit 2; }

[ $# -ge 2 ] || usage
cmd=$1
dir=$2
port=${3:-}

ruok() { # ruok PORT -> prints the answer (imok) or nothing
    timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && printf ruok >&3 && cat <&3" 2>/dev/null || true
}

pid_alive() {
    [ -f "$dir/zk.pid" ] || return 1
    local pid
    pid=$(cat "$dir/zk.pid" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

classpath() {
    local cp="$dir/conf:/usr/share/java/zookeeper.jar" j
    for j in slf4j-log4j12 log4j-1.2; do
        [ -f "/usr/share/java/$j.jar" ] && cp="$cp:/usr/share/java/$j.jar"
    done
    echo "$cp"
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
    [ -f /usr/share/java/zookeeper.jar ] || { echo "zk.sh: /usr/share/java/zookeeper.jar missing (apt-get install zookeeper)" >&2; exit 1; }
    command -v java >/dev/null || { echo "zk.sh: java not found (apt-get install default-jre-headless)" >&2; exit 1; }
    mkdir -p "$dir/conf" "$dir/data" "$dir/log"
    dir=$(cd "$dir" && pwd)
    cat >"$dir/conf/zoo.cfg" <<EOF
# written by scripts/zk.sh
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
maxClientCnxns=0
maxSessionTimeout=60000
admin.enableServer=false
4lw.commands.whitelist=*
forceSync=${ZK_FORCE_SYNC:-no}
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
EOF
    cat >"$dir/conf/log4j.properties" <<EOF
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.RollingFileAppender
log4j.appender.FILE.File=$dir/log/zookeeper.log
log4j.appender.FILE.MaxFileSize=10MB
log4j.appender.FILE.MaxBackupIndex=2
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
EOF
    # setsid: the server outlives the shell that started it and is not hit by its terminal's ^C.
    setsid java -Xms32m -Xmx512m -XX:+UseSerialGC \
        -Dzookeeper.log.dir="$dir/log" -Dlog4j.configuration="file:$dir/conf/log4j.properties" \
        -Dzookeeper.jmx.log4j.disable=true \
        -cp "$(classpath)" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/conf/zoo.cfg" \
        </dev/null >>"$dir/log/zookeeper.out" 2>&1 &
    echo $! >"$dir/zk.pid"
    for _ in $(seq 1 300); do   # up to 30 s (a cold JVM on a busy 2-core box can be slow)
        if [ "$(ruok "$port")" = imok ]; then
            exit 0
        fi
        if ! pid_alive; then
            echo "zk.sh: zookeeper exited during start-up; last lines of $dir/log:" >&2
            tail -n 30 "$dir/log/zookeeper.out" "$dir/log/zookeeper.log" >&2 2>/dev/null || true
            exit 1
        fi
        sleep 0.1
    done
    echo "zk.sh: zookeeper on 127.0.0.1:$port did not answer ruok within 30 s" >&2
    tail -n 30 "$dir/log/zookeeper.log" >&2 2>/dev/null || true
    exit 1
    ;;
stop)
    if ! pid_alive; then
        rm -f "$dir/zk.pid"
        exit 0
    fi
    pid=$(cat "$dir/zk.pid")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$dir/zk.pid"; exit 0; }
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    rm -f "$dir/zk.pid"
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
*) usage ;;
esac
