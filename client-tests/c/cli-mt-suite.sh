#!/usr/bin/env bash
# End-to-end checks with the ZooKeeper C client's sample shell (`cli_mt`, multi-threaded build)
# against a server.
#
#   usage: cli-mt-suite.sh HOST:PORT
#
# cli_mt reads commands on stdin and runs them asynchronously, printing results (to stderr) when
# the server answers. To know when a command's output is complete, every command is followed by
# `sync /`, whose completion line `[/]: rc = 0` is printed only after the responses to everything
# sent before it (the server answers a session's requests in order). Every wait is bounded.
# Prints `PASS name` / `FAIL name: reason`, then `N passed, M failed`; exits 1 on any failure.
# Environment: CLI_MT (path of the binary), ZK_WAIT_TIMEOUT (seconds per wait, default 10).

set -u

ADDR=${1:?usage: cli-mt-suite.sh HOST:PORT}
if [ -z "${CLI_MT:-}" ]; then
    CLI_MT=$(command -v cli_mt || command -v zookeeper_cli_mt || echo /usr/lib/zookeeper/bin/cli_mt)
fi
WAIT=${ZK_WAIT_TIMEOUT:-10}

P="/c-suite-$$-$RANDOM"
passed=0
failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cli-mt-suite.XXXXXX")
CPID=
cleanup() {
    exec 3>&- 2>/dev/null
    if [ -n "$CPID" ]; then kill "$CPID" 2>/dev/null; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

if [ ! -x "$CLI_MT" ]; then
    echo "FAIL setup: cli_mt not found (tried $CLI_MT)"
    echo "0 passed, 1 failed"
    exit 1
fi

SESSIONS=0
# start_session: starts cli_mt with a fresh session; sets LOG, CPID, SID (hex, no 0x) and SYNCS.
start_session() {
    SESSIONS=$((SESSIONS + 1))
    LOG=$WORK/session$SESSIONS.log
    local fifo=$WORK/in$SESSIONS
    mkfifo "$fifo"
    : >"$LOG"
    timeout -k 2 120 "$CLI_MT" -h "$ADDR" <"$fifo" >>"$LOG" 2>&1 &
    CPID=$!
    exec 3>"$fifo"
    SYNCS=0
    SID=
    DEAD=
    if wait_for 'Got a new session id: 0x' 1; then
        SID=$(sed -n 's/^Got a new session id: 0x//p' "$LOG" | head -n 1)
        return 0
    fi
    return 1
}

# end_session: sends quit and waits (bounded) for the process to exit.
end_session() {
    printf 'quit\n' >&3 2>/dev/null
    exec 3>&-
    local i
    for ((i = 0; i < WAIT * 10; i++)); do
        kill -0 "$CPID" 2>/dev/null || break
        sleep 0.1
    done
    kill "$CPID" 2>/dev/null
    wait "$CPID" 2>/dev/null
    CPID=
}

# wait_for REGEX COUNT: waits until LOG has at least COUNT lines matching REGEX.
wait_for() {
    local i n
    for ((i = 0; i < WAIT * 20; i++)); do
        n=$(grep -cE -- "$1" "$LOG")
        [ "$n" -ge "$2" ] && return 0
        kill -0 "$CPID" 2>/dev/null || break
        sleep 0.05
    done
    n=$(grep -cE -- "$1" "$LOG")
    [ "$n" -ge "$2" ]
}

# send COMMAND: runs one command and waits for its output; sets OUT (the lines it produced,
# barrier lines removed) and TIMED_OUT.
send() {
    local before
    if [ -n "$DEAD" ]; then
        # an earlier command got no answer; do not wait again for every remaining one
        OUT=
        TIMED_OUT=1
        return
    fi
    before=$(wc -c <"$LOG")
    SYNCS=$((SYNCS + 1))
    printf '%s\nsync /\n' "$1" >&3
    TIMED_OUT=
    if ! wait_for '^\[/\]: rc = 0$' "$SYNCS"; then
        TIMED_OUT=1
        DEAD=1
    fi
    # the sync completion prints two lines; give the second one a moment
    sleep 0.02
    OUT=$(tail -c +$((before + 1)) "$LOG" | grep -v -e '^\[/\]: rc = 0$' -e '^	name = /$' -e '^time = [0-9-]* msec$')
}

has() { printf '%s\n' "$OUT" | grep -qFx -- "$1"; }
why() {
    if [ -n "$TIMED_OUT" ]; then
        echo "no answer within ${WAIT}s; output: $(printf '%s' "$OUT" | tr '\n\t' '| ' | cut -c1-400)"
    else
        echo "output: $(printf '%s' "$OUT" | tr '\n\t' '| ' | cut -c1-400)"
    fi
}
expect_lines() {
    local name=$1 l
    shift
    for l in "$@"; do
        if ! has "$l"; then
            fail "$name" "missing line '$(printf '%s' "$l" | tr '\t' ' ')'; $(why)"
            return
        fi
    done
    pass "$name"
}
# children: the tab-indented child names in OUT, sorted, space separated
children() { printf '%s\n' "$OUT" | sed -n 's/^\t\([^ =]*\)$/\1/p' | sort | tr '\n' ' ' | sed 's/ $//'; }

# --- session 1 --------------------------------------------------------------------------------

if start_session; then
    pass connect
else
    fail connect "no session within ${WAIT}s; log: $(tr '\n' '|' <"$LOG" | cut -c1-300)"
    echo "$passed passed, $failed failed"
    exit 1
fi

send "create $P"
# cli_mt always creates with the data "new" and an open ACL
expect_lines create "[$P]: rc = 0" "	name = $P"

send "create $P"
expect_lines create_existing "[$P]: rc = -110"

send "get $P"
expect_lines get "$P: rc = 0" " value_len = 3" "new" "	version=0	aversion=0" "	ephemeralOwner = 0"

send "set $P hello"
# the get above left a data watch (cli_mt passes watch=1)
expect_lines set "$P: rc = 0 Stat:" "	version=1	aversion=0"
expect_lines get_watch_fires_on_set "Watcher CHANGED_EVENT state = CONNECTED_STATE for path $P"

send "get $P"
expect_lines get_after_set " value_len = 5" "hello" "	version=1	aversion=0"

send "set $P/missing x"
expect_lines set_missing "$P/missing: rc = -101 Stat:" "null"

send "get $P/missing"
expect_lines get_missing "$P/missing: rc = -101"

send "create +s $P/s-"
expect_lines create_sequential_first "[$P/s-]: rc = 0" "	name = $P/s-0000000000"
send "create +s $P/s-"
expect_lines create_sequential_second "	name = $P/s-0000000001"

send "create +e $P/e"
expect_lines create_ephemeral "[$P/e]: rc = 0" "	name = $P/e"

send "create2 +e $P/e2"
expect_lines create2_ephemeral_owner "[$P/e2]: rc = 0" "	name = $P/e2" "	ephemeralOwner = $SID" "	version=0	aversion=0"

send "create +es $P/es-"
# the sequence number counts the children ever created under the parent (4 so far)
expect_lines create_ephemeral_sequential "	name = $P/es-0000000004"

send "create $P/e/child"
expect_lines ephemeral_no_children "[$P/e/child]: rc = -108"

send "create $P/missing/child"
expect_lines create_missing_parent "[$P/missing/child]: rc = -101"

send "ls $P"
if has "$P: rc = 0" && [ "$(children)" = "e e2 es-0000000004 s-0000000000 s-0000000001" ]; then
    pass ls
else
    fail ls "children '$(children)'; $(why)"
fi

send "ls2 $P"
if has "$P: rc = 0" && [ "$(children)" = "e e2 es-0000000004 s-0000000000 s-0000000001" ] && has "	version=1	aversion=0"; then
    pass ls2_with_stat
else
    fail ls2_with_stat "children '$(children)'; $(why)"
fi

send "create $P/kid"
# `ls` and `ls2` above left child watches on $P
expect_lines child_watch_fires "Watcher CHILD_EVENT state = CONNECTED_STATE for path $P" "[$P/kid]: rc = 0"

send "exists $P"
if [ -z "$TIMED_OUT" ] && ! printf '%s\n' "$OUT" | grep -q "^Error"; then pass exists_present; else fail exists_present "$(why)"; fi

send "exists $P/later"
expect_lines exists_missing "Error -101 for $P/later"

send "create $P/later"
# exists on a missing node leaves a watch that fires on creation
expect_lines exists_watch_fires_on_create "Watcher CREATED_EVENT state = CONNECTED_STATE for path $P/later"

send "wexists $P/later"
send "delete $P/later"
expect_lines wexists_watch_fires_on_delete "Watcher DELETED_EVENT state = CONNECTED_STATE for path $P/later" "$P/later: rc = 0"

send "delete $P/later"
expect_lines delete_missing "$P/later: rc = -101"

send "delete $P"
expect_lines delete_not_empty "$P: rc = -111"

send "create2 +c $P/cont"
expect_lines create_container "[$P/cont]: rc = 0" "	name = $P/cont" "	ephemeralOwner = 0"

send "create +t=600000 $P/ttl"
expect_lines create_ttl "[$P/ttl]: rc = 0" "	name = $P/ttl"

send "create +st=600000 $P/ttls-"
# 9 children created so far (deletes and failed creates do not advance the counter)
expect_lines create_ttl_sequential "[$P/ttls-]: rc = 0" "	name = $P/ttls-0000000009"

send "sync $P"
expect_lines sync_path "[$P]: rc = 0"

send "config"
expect_lines get_config "/zookeeper/config: rc = 0"

send "addauth digest user:pw"
send "get $P"
expect_lines addauth_digest_keeps_session "$P: rc = 0" "hello"

end_session

# --- session 2: ephemerals of session 1 are gone ------------------------------------------------

if start_session; then
    pass reconnect_new_session
    old_sid=$(sed -n 's/^Got a new session id: 0x//p' "$WORK/session1.log" | head -n 1)
    if [ "$SID" != "$old_sid" ]; then pass new_session_id_differs; else fail new_session_id_differs "both $SID"; fi

    send "ls $P"
    kids=$(children)
    if [ "$kids" = "cont kid s-0000000000 s-0000000001 ttl ttls-0000000009" ]; then
        pass ephemerals_removed_on_close
    else
        fail ephemerals_removed_on_close "children '$(children)'; $(why)"
    fi

    send "get $P/e"
    expect_lines ephemeral_gone "$P/e: rc = -101"

    for c in $kids; do
        send "delete $P/$c"
    done
    send "delete $P"
    expect_lines delete "$P: rc = 0"
    send "get $P"
    expect_lines deleted_node_gone "$P: rc = -101"
    end_session
else
    fail reconnect_new_session "no session within ${WAIT}s"
fi

# --- session 3: an unknown auth scheme fails the session -----------------------------------------

if start_session; then
    printf 'addauth nosuchscheme secret\n' >&3
    if wait_for 'state = AUTH_FAILED_STATE' 1; then
        pass unknown_auth_scheme_fails_session
    else
        fail unknown_auth_scheme_fails_session "no AUTH_FAILED_STATE; log: $(tr '\n' '|' <"$LOG" | cut -c1-300)"
    fi
    # cli_mt has closed its handle; just end the process
    exec 3>&-
    kill "$CPID" 2>/dev/null
    wait "$CPID" 2>/dev/null
    CPID=
else
    fail unknown_auth_scheme_fails_session "no session within ${WAIT}s"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
