#!/usr/bin/env bash
# End-to-end checks with ZooKeeper's own shell (zkCli.sh / ZooKeeperMain) against a server.
#
#   usage: zkcli-suite.sh HOST:PORT
#
# Each zkCli invocation is a fresh JVM and a fresh session; several commands that must share a
# session (ephemerals, auth, watches) are fed as one batch on stdin. Prints `PASS name` or
# `FAIL name: reason` per check and a final `N passed, M failed` line; exits 1 on any failure.
# Environment: ZKCLI (path of zkCli.sh), ZK_CMD_TIMEOUT (seconds per invocation, default 30).

set -u

ADDR=${1:?usage: zkcli-suite.sh HOST:PORT}
ZKCLI=${ZKCLI:-/usr/share/zookeeper/bin/zkCli.sh}
CMD_TIMEOUT=${ZK_CMD_TIMEOUT:-30}
# Faster JVM start-up for short-lived invocations.
export CLIENT_JVMFLAGS="${CLIENT_JVMFLAGS:-} -XX:TieredStopAtLevel=1"

P="/zkcli-suite-$$-$RANDOM"
HOST=${ADDR%:*}
passed=0
failed=0

pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }

# zk ARGS...   (stdin is passed through for batches)
# Runs one zkCli invocation. Sets RC (exit status; 124 = timed out) and OUT (stdout+stderr with
# the JVM/logging/connection chatter removed, one line per printed line).
TIMEOUTS=0
zk() {
    local raw
    if [ "$TIMEOUTS" -ge 2 ]; then
        # the server stopped answering; fail the remaining checks quickly
        RC=124
        OUT=
        return
    fi
    raw=$(timeout -k 5 "$CMD_TIMEOUT" "$ZKCLI" -server "$ADDR" "$@" 2>&1; echo "__rc=$?")
    RC=${raw##*__rc=}
    if [ "$RC" = 124 ] || [ "$RC" = 137 ]; then
        RC=124
        TIMEOUTS=$((TIMEOUTS + 1))
    fi
    OUT=$(printf '%s\n' "${raw%__rc=*}" | grep -v \
        -e '^SLF4J:' \
        -e '^Connecting to ' \
        -e '^Welcome to ZooKeeper!' \
        -e '^JLine support is' \
        -e '^WATCHER::' \
        -e '^WatchedEvent state:SyncConnected type:None path:null' \
        -e '^WatchedEvent state:Closed type:None path:null' \
        -e '^[[:space:]]*$')
}

# has LINE: OUT contains LINE exactly as a whole line
has() { printf '%s\n' "$OUT" | grep -qFx -- "$1"; }

# field NAME: value of a "NAME = value" Stat line in OUT (the first one)
field() { printf '%s\n' "$OUT" | sed -n "s/^$1 = //p" | head -n 1; }

# why: short description of the last invocation for failure messages
why() {
    if [ "$RC" = 124 ]; then
        echo "zkCli timed out after ${CMD_TIMEOUT}s"
    else
        echo "rc=$RC, output: $(printf '%s' "$OUT" | tr '\n' '|' | cut -c1-400)"
    fi
}

# expect_success NAME : pass if the last invocation succeeded
expect_success() {
    if [ "$RC" = 0 ]; then pass "$1"; else fail "$1" "$(why)"; fi
}

# expect_refusal NAME LINE : pass if the last invocation failed saying LINE
expect_refusal() {
    if [ "$RC" != 0 ] && has "$2"; then pass "$1"; else fail "$1" "$(why)"; fi
}

# expect_lines NAME LINE... : pass if every LINE is present in OUT
expect_lines() {
    local name=$1 l
    shift
    for l in "$@"; do
        if ! has "$l"; then
            fail "$name" "missing line '$l'; $(why)"
            return
        fi
    done
    pass "$name"
}

# expect_fields NAME FIELD=VALUE... : pass if every Stat field has the given value
expect_fields() {
    local name=$1 kv k v got
    shift
    for kv in "$@"; do
        k=${kv%%=*}
        v=${kv#*=}
        got=$(field "$k")
        if [ -z "$v" ] || [ "$got" != "$v" ]; then
            fail "$name" "expected $k = $v, got '$got'; $(why)"
            return
        fi
    done
    pass "$name"
}

hex() { printf '%d' "$1"; }

if [ ! -x "$ZKCLI" ] && ! command -v "$ZKCLI" >/dev/null 2>&1; then
    echo "FAIL setup: zkCli.sh not found at $ZKCLI"
    echo "0 passed, 1 failed"
    exit 1
fi

# --- create / get / set / stat ---------------------------------------------------------------

zk create "$P" hello
if [ "$RC" = 0 ] && has "Created $P"; then pass create_persistent; else fail create_persistent "$(why)"; fi

zk create "$P" again
expect_refusal create_existing_fails "Node already exists: $P"

zk get "$P"
if [ "$RC" = 0 ] && has "hello"; then pass get_data; else fail get_data "$(why)"; fi

zk get -s "$P"
expect_fields get_stat_fresh_node dataVersion=0 cversion=0 aclVersion=0 ephemeralOwner=0x0 dataLength=5 numChildren=0
czxid=$(field cZxid)
if [ -n "$czxid" ] && [ "$czxid" = "$(field mZxid)" ] && [ "$czxid" = "$(field pZxid)" ] && [ "$(field ctime)" = "$(field mtime)" ]; then
    pass fresh_node_zxids_equal
else
    fail fresh_node_zxids_equal "cZxid/mZxid/pZxid or ctime/mtime differ; $(why)"
fi

zk set "$P" world
expect_success set_data

zk stat "$P"
expect_fields set_increments_dataVersion dataVersion=1 dataLength=5 cversion=0 "cZxid=$czxid" "pZxid=$czxid"
mzxid=$(field mZxid)
if [ -n "$mzxid" ] && [ -n "$czxid" ] && [ "$(hex "$mzxid")" -gt "$(hex "$czxid")" ]; then
    pass set_advances_mzxid
else
    fail set_advances_mzxid "cZxid=$czxid mZxid=$mzxid"
fi

zk set -s "$P" "value three"
expect_fields set_prints_new_stat dataVersion=2 dataLength=11

zk set -v 7 "$P" nope
expect_refusal set_bad_version "version No is not valid : $P"

zk set -v 2 -s "$P" v3
expect_fields set_matching_version dataVersion=3 dataLength=2

zk get "$P"
if has "v3"; then pass get_after_set; else fail get_after_set "$(why)"; fi

zk get "$P/nope"
expect_refusal get_missing "Node does not exist: $P/nope"

zk create "$P/nope/child" x
expect_refusal create_missing_parent "Node does not exist: $P/nope/child"

# --- sequential nodes, listings ---------------------------------------------------------------

zk <<EOF
create -s $P/seq- a
create -s $P/seq- b
create $P/seq-0000000000/deep x
quit
EOF
expect_lines create_sequential "Created $P/seq-0000000000" "Created $P/seq-0000000001" "Created $P/seq-0000000000/deep"

zk ls "$P"
expect_lines ls_children "[seq-0000000000, seq-0000000001]"

zk ls -s "$P"
if has "[seq-0000000000, seq-0000000001]"; then
    expect_fields ls_with_stat numChildren=2 cversion=2 dataVersion=3
else
    fail ls_with_stat "$(why)"
fi

zk stat "$P/seq-0000000001"
last_child_czxid=$(field cZxid)
zk stat "$P"
expect_fields parent_pzxid_is_last_child_czxid "pZxid=$last_child_czxid"

zk getAllChildrenNumber "$P"
expect_lines get_all_children_number "3"

zk ls -R "$P"
expect_lines ls_recursive "$P" "$P/seq-0000000000" "$P/seq-0000000001" "$P/seq-0000000000/deep"

# --- ephemeral nodes (one session) ------------------------------------------------------------

zk <<EOF
create -e $P/eph e
create -e -s $P/eseq- f
getEphemerals $P
stat $P/eph
create $P/eph/child x
quit
EOF
expect_lines ephemeral_create "Created $P/eph" "Created $P/eseq-0000000003"
if has "[$P/eph, $P/eseq-0000000003]" || has "[$P/eseq-0000000003, $P/eph]"; then pass get_ephemerals; else fail get_ephemerals "$(why)"; fi
owner=$(field ephemeralOwner)
if [ -n "$owner" ] && [ "$owner" != "0x0" ]; then pass ephemeral_owner_set; else fail ephemeral_owner_set "ephemeralOwner='$owner'"; fi
expect_lines ephemeral_cannot_have_children "Ephemerals cannot have children: $P/eph/child"

zk stat "$P/eph"
expect_refusal ephemeral_gone_after_session_close "Node does not exist: $P/eph"

zk ls "$P"
expect_lines ephemerals_gone_from_listing "[seq-0000000000, seq-0000000001]"

zk stat "$P"
# 4 creates (seq, seq, eph, eseq) + 2 deletes by the session close = cversion 6.
expect_fields cversion_counts_creates_and_deletes cversion=6 numChildren=2

# --- container and TTL nodes ------------------------------------------------------------------

zk create -c "$P/cont" c
if [ "$RC" = 0 ] && has "Created $P/cont"; then pass create_container; else fail create_container "$(why)"; fi
zk stat "$P/cont"
expect_fields container_stat ephemeralOwner=0x0 dataLength=1 numChildren=0

zk create -t 600000 "$P/ttl" t
if [ "$RC" = 0 ] && has "Created $P/ttl"; then pass create_ttl; else fail create_ttl "$(why)"; fi
zk stat "$P/ttl"
expect_fields ttl_stat ephemeralOwner=0x0 dataLength=1

# --- delete -----------------------------------------------------------------------------------

zk delete "$P"
expect_refusal delete_not_empty "Node not empty: $P"

zk delete -v 9 "$P/cont"
expect_refusal delete_bad_version "version No is not valid : $P/cont"

zk delete -v 0 "$P/cont"
expect_success delete_matching_version

zk stat "$P/cont"
expect_refusal deleted_node_gone "Node does not exist: $P/cont"

zk delete "$P/cont"
expect_refusal delete_missing "Node does not exist: $P/cont"

# --- ACLs and auth ----------------------------------------------------------------------------

zk <<EOF
addauth digest user:pw
create $P/acl secret
setAcl $P/acl auth::cdrwa
getAcl $P/acl
get $P/acl
whoami
quit
EOF
# The digest is base64(sha1("user:pw")), computed by the server from the addauth credentials.
expect_lines digest_acl_via_auth_scheme "Created $P/acl" "'digest,'user:2Om+GBbT2q/tS6pdvACZbbm7/1A=" ": cdrwa"
expect_lines authenticated_read "secret"
expect_lines whoami_lists_identities "Auth scheme: User" "digest: user" "ip: $HOST"

zk get "$P/acl"
expect_refusal unauthenticated_read_denied "Insufficient permission : $P/acl"

zk getAcl "$P/acl"
expect_refusal unauthenticated_getacl_denied "Insufficient permission : $P/acl"

zk <<EOF
addauth digest user:wrong
get $P/acl
quit
EOF
expect_lines wrong_password_denied "Insufficient permission : $P/acl"

zk create "$P/ro" data world:anyone:r
expect_success create_with_acl

zk set "$P/ro" x
expect_refusal read_only_acl_denies_write "Insufficient permission : $P/ro"

zk getAcl -s "$P/ro"
if has "'world,'anyone" && has ": r"; then
    expect_fields getacl_world_read aclVersion=0 dataVersion=0
else
    fail getacl_world_read "$(why)"
fi

zk <<EOF
create $P/ro2 x
setAcl -s $P/ro2 world:anyone:rw
quit
EOF
expect_fields setacl_bumps_aclVersion aclVersion=1 dataVersion=0

# --- watches ----------------------------------------------------------------------------------

zk <<EOF
get -w $P/seq-0000000000
set $P/seq-0000000000 changed
stat -w $P/later
create $P/later x
ls -w $P/seq-0000000001
create $P/seq-0000000001/kid x
sync $P
ls $P
quit
EOF
expect_lines one_shot_watches \
    "WatchedEvent state:SyncConnected type:NodeDataChanged path:$P/seq-0000000000" \
    "WatchedEvent state:SyncConnected type:NodeCreated path:$P/later" \
    "WatchedEvent state:SyncConnected type:NodeChildrenChanged path:$P/seq-0000000001"

zk <<EOF
addWatch -m PERSISTENT_RECURSIVE $P/w
create $P/w x
create $P/w/a x
set $P/w/a y
delete $P/w/a
sync $P
ls $P
quit
EOF
expect_lines persistent_recursive_watch \
    "WatchedEvent state:SyncConnected type:NodeCreated path:$P/w" \
    "WatchedEvent state:SyncConnected type:NodeCreated path:$P/w/a" \
    "WatchedEvent state:SyncConnected type:NodeDataChanged path:$P/w/a" \
    "WatchedEvent state:SyncConnected type:NodeDeleted path:$P/w/a"

zk <<EOF
addWatch -m PERSISTENT $P/w
create $P/w/b x
set $P/w y
removewatches $P/w -a
set $P/w z
sync $P
ls $P
quit
EOF
expect_lines persistent_watch \
    "WatchedEvent state:SyncConnected type:NodeChildrenChanged path:$P/w" \
    "WatchedEvent state:SyncConnected type:NodeDataChanged path:$P/w" \
    "WatchedEvent state:SyncConnected type:PersistentWatchRemoved path:$P/w"
n=$(printf '%s\n' "$OUT" | grep -cFx "WatchedEvent state:SyncConnected type:NodeDataChanged path:$P/w")
if [ "$n" = 1 ]; then pass no_events_after_removewatches; else fail no_events_after_removewatches "saw $n NodeDataChanged events, expected 1"; fi

zk removewatches "$P/w" -a
if [ "$RC" != 0 ] && [ "$RC" != 124 ] && has "KeeperErrorCode = No such watcher for $P/w"; then
    pass removewatches_without_watch_fails
else
    fail removewatches_without_watch_fails "$(why)"
fi

# --- misc -------------------------------------------------------------------------------------

zk sync "$P"
expect_lines sync "Sync is OK"

zk config
expect_success get_config

zk <<EOF
create $P/q
setquota -n 5 $P/q
listquota $P/q
quit
EOF
expect_lines quota_nodes "Output quota for $P/q count=5,bytes=-1=;byteHardLimit=-1;countHardLimit=-1"
zk deleteall "/zookeeper/quota$P"

zk ls /
if printf '%s\n' "$OUT" | grep -q "zookeeper" && printf '%s\n' "$OUT" | grep -qF "${P#/}"; then pass ls_root; else fail ls_root "$(why)"; fi

zk ls /zookeeper
expect_lines ls_zookeeper_system_node "[config, quota]"

# --- cleanup ----------------------------------------------------------------------------------

zk <<EOF
addauth digest user:pw
deleteall $P
quit
EOF
if [ "$RC" = 0 ] && [ -z "$OUT" ]; then pass deleteall; else fail deleteall "$(why)"; fi
zk stat "$P"
expect_refusal deleteall_removed_tree "Node does not exist: $P"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
