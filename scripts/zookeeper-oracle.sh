#!/usr/bin/env bash
# Starts or stops a real Apache ZooKeeper 3.8 standalone server (Debian's package) in the
# background, with the same settings the Rust test harness uses (client-tests/src/oracle.rs):
# loopback only, free port, tickTime=2000, all four-letter words, forceSync=no, no admin
# server, no per-address connection limit, extended types (TTL nodes) enabled.
#
#   scripts/zookeeper-oracle.sh start DIR   # prints HOST:PORT; writes DIR/pid and DIR/addr
#   scripts/zookeeper-oracle.sh stop DIR    # kills the server started in DIR
#   scripts/zookeeper-oracle.sh status DIR  # prints HOST:PORT if running, exit 1 otherwise
#
# DIR is created if needed and holds zoo.cfg, data/, zookeeper.log and stdout.log. A port can
# be forced with PORT=NNNN. Environment: ZKD_ZOOKEEPER_JARS (default /usr/share/java),
# JAVA_HOME.
set -euo pipefail

NOT_INSTALLED="Apache ZooKeeper is not installed: run scripts/install-test-deps.sh"
JAR_DIR="${ZKD_ZOOKEEPER_JARS:-/usr/share/java}"
JARS=(zookeeper.jar zookeeper-jute.jar slf4j-api.jar slf4j-simple.jar)
MAIN_CLASS=org.apache.zookeeper.server.ZooKeeperServerMain
START_TIMEOUT=30

usage() {
    echo "usage: $0 start|stop|status DIR" >&2
    exit 2
}

# Sends a four-letter word and prints the answer (empty when nothing answers).
four_letter_word() { # host port word
    (
        exec 3<>"/dev/tcp/$1/$2" || exit 0
        printf '%s' "$3" >&3
        timeout 2 cat <&3 || true
    ) 2>/dev/null || true
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

is_running() { # dir
    [ -f "$1/pid" ] && kill -0 "$(cat "$1/pid")" 2>/dev/null
}

start() {
    local dir="$1"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    if is_running "$dir"; then
        echo "already running (pid $(cat "$dir/pid")) on $(cat "$dir/addr")" >&2
        exit 1
    fi

    local java
    if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
        java="$JAVA_HOME/bin/java"
    elif command -v java >/dev/null 2>&1; then
        java="$(command -v java)"
    else
        echo "$NOT_INSTALLED (no java on PATH)" >&2
        exit 1
    fi
    local cp="" jar
    for jar in "${JARS[@]}"; do
        if [ ! -f "$JAR_DIR/$jar" ]; then
            echo "$NOT_INSTALLED (missing $JAR_DIR/$jar)" >&2
            exit 1
        fi
        cp="${cp:+$cp:}$JAR_DIR/$jar"
    done

    local attempt port pid host=127.0.0.1
    for attempt in 1 2 3; do
        port="${PORT:-$(free_port)}"
        rm -rf "$dir/data" "$dir/pid" "$dir/addr"
        mkdir -p "$dir/data"
        cat >"$dir/zoo.cfg" <<EOF
dataDir=$dir/data
clientPort=$port
clientPortAddress=$host
tickTime=2000
4lw.commands.whitelist=*
forceSync=no
admin.enableServer=false
maxClientCnxns=0
EOF
        # setsid: the server survives the shell that started it and gets its own process group.
        setsid "$java" -Xshare:auto -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData \
            -Xms32m -Xmx256m -Djava.net.preferIPv4Stack=true \
            -Dzookeeper.extendedTypesEnabled=true \
            -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
            -Dorg.slf4j.simpleLogger.showDateTime=true \
            -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS \
            "-Dorg.slf4j.simpleLogger.logFile=$dir/zookeeper.log" \
            -cp "$cp" "$MAIN_CLASS" "$dir/zoo.cfg" \
            </dev/null >"$dir/stdout.log" 2>&1 &
        pid=$!
        echo "$pid" >"$dir/pid"

        local deadline=$((SECONDS + START_TIMEOUT)) conf
        while :; do
            if ! kill -0 "$pid" 2>/dev/null; then
                if grep -qE 'Address already in use|BindException' "$dir"/*.log && [ -z "${PORT:-}" ]; then
                    continue 2 # port taken meanwhile: try another one
                fi
                echo "ZooKeeper exited during start-up; last log lines:" >&2
                tail -n 30 "$dir/zookeeper.log" "$dir/stdout.log" >&2 || true
                rm -f "$dir/pid"
                exit 1
            fi
            if [ "$(four_letter_word "$host" "$port" ruok)" = imok ]; then
                # conf answers only once the server serves requests; its dataDir proves it is ours.
                conf="$(four_letter_word "$host" "$port" conf)"
                if grep -qF "dataDir=$dir/data" <<<"$conf"; then
                    echo "$host:$port" >"$dir/addr"
                    echo "$host:$port"
                    return 0
                elif grep -q '^dataDir=' <<<"$conf"; then
                    kill -9 "$pid" 2>/dev/null || true
                    [ -z "${PORT:-}" ] && continue 2
                    echo "port $port is answered by another server" >&2
                    exit 1
                fi
            fi
            if [ "$SECONDS" -ge "$deadline" ]; then
                echo "ZooKeeper did not answer ruok within ${START_TIMEOUT}s" >&2
                kill -9 "$pid" 2>/dev/null || true
                rm -f "$dir/pid"
                exit 1
            fi
            sleep 0.05
        done
    done
    echo "could not bind a free port after 3 attempts" >&2
    exit 1
}

stop() {
    local dir="$1" pid i
    if [ ! -f "$dir/pid" ]; then
        echo "no pid file in $dir" >&2
        exit 1
    fi
    pid="$(cat "$dir/pid")"
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for i in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/pid" "$dir/addr"
    echo "stopped (pid $pid)"
}

status() {
    local dir="$1"
    if is_running "$dir"; then
        cat "$dir/addr"
    else
        echo "not running" >&2
        exit 1
    fi
}

[ $# -eq 2 ] || usage
case "$1" in
    start) start "$2" ;;
    stop) stop "$2" ;;
    status) status "$2" ;;
    *) usage ;;
esac
