#!/usr/bin/env python3
"""kazoo against a three-member zkd ensemble under network faults set over the admin API.

    usage: netfault_checks.py ADMIN_HOST:PORT MEMBER1 MEMBER2 MEMBER3   (HOST:PORT each)

Checks: a blackholed connection is noticed by kazoo's own ping timeout and the session (with
its ephemeral node) moves to another member; a client blackholed on every member for longer
than its session timeout finds its session expired when the blackhole is removed; with its
replies dropped, a client's write is applied (another client sees it) though its reply never
comes; and latency on a member's connections adds to a request's round trip (the server runs
the real clock here: latency passes in real time). Prints `PASS name` / `FAIL name: reason`
per check and `N passed, M failed`; exit 1 on any failure.
"""

import json
import os
import statistics
import sys
import threading
import time
import urllib.request

from checks import check, finish, member_of
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState
from kazoo_suite import wait_until

# The session timeout the clients ask for, in seconds (zkd's least: two ticks of 2 s).
SESSION = 4.0
WAIT = 30.0
PATH = "/netfault-checks-%d" % os.getpid()


def admin(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else b""
    req = urllib.request.Request("http://%s%s" % (ADMIN, path), method=method, data=data)
    with urllib.request.urlopen(req, timeout=WAIT) as r:
        return json.loads(r.read())


def net_fault(**rule):
    return admin("POST", "/zkd/net-faults", rule)


def clear():
    admin("DELETE", "/zkd/net-faults")


def client(hosts, listener=None, session=SESSION):
    c = KazooClient(hosts=hosts, timeout=session, randomize_hosts=False)
    if listener is not None:
        c.add_listener(listener)
    c.start(timeout=WAIT)
    return c


def session_hex(c):
    return "0x%x" % c.client_id[0]


def sessions():
    return {s["id"] for s in admin("GET", "/zkd/sessions")["sessions"]}


def blackholed_connection_moves_and_keeps_its_session():
    states = []
    # kazoo gives up on a silent connection after about two thirds of its session timeout;
    # the third left (2 s here) is the time it has to reach another member.
    zk = client(",".join(MEMBERS), states.append, session=6.0)
    try:
        node = zk.create(PATH + "-eph", b"", ephemeral=True)
        sid = zk.client_id[0]
        first = member_of(zk, MEMBERS)
        added = net_fault(action="blackhole", session=session_hex(zk))
        assert added["connections"] == 1, added
        started = time.time()
        wait_until(lambda: KazooState.SUSPENDED in states, "SUSPENDED", 12.0)
        noticed = time.time() - started
        wait_until(lambda: states[-1] == KazooState.CONNECTED, "CONNECTED again", WAIT)
        assert zk.client_id[0] == sid, "a new session"
        assert member_of(zk, MEMBERS) != first, "reconnected to the blackholed member"
        assert KazooState.LOST not in states, states
        assert zk.exists(node) is not None, "the ephemeral node is gone"
        # The session moved, so the server closed the blackholed connection.
        listed = admin("GET", "/zkd/net-faults")["net_faults"]
        assert listed[0]["connections"] == 0, listed
        print("  kazoo noticed the blackhole after %.1f s" % noticed, flush=True)
    finally:
        clear()
        zk.stop()


def blackholed_everywhere_past_the_timeout_expires():
    states = []
    zk = client(",".join(MEMBERS), states.append)
    try:
        node = zk.create(PATH + "-eph2", b"", ephemeral=True)
        sid = session_hex(zk)
        for m in (1, 2, 3):
            net_fault(action="blackhole", member=m)
        wait_until(lambda: KazooState.SUSPENDED in states, "SUSPENDED", SESSION * 2)
        wait_until(lambda: sid not in sessions(), "the server to expire the session", SESSION * 3)
        assert KazooState.LOST not in states, "LOST before the blackhole was removed"
        clear()
        wait_until(lambda: KazooState.LOST in states, "LOST", WAIT)
        other = client(MEMBERS[0])
        try:
            assert other.exists(node) is None, "the expired session's ephemeral node remains"
        finally:
            other.stop()
    finally:
        clear()
        zk.stop()


def dropped_reply_write_is_applied():
    zk = client(MEMBERS[1])
    other = client(MEMBERS[0])
    try:
        added = net_fault(action="drop-replies", session=session_hex(zk))
        assert added["connections"] == 1, added
        result = zk.create_async(PATH + "-dropped", b"sent")
        wait_until(lambda: other.exists(PATH + "-dropped") is not None, "the write on another member", WAIT)
        assert other.get(PATH + "-dropped")[0] == b"sent"
        time.sleep(0.5)
        assert not result.ready(), "the reply arrived: %r" % (result.value,)
    finally:
        clear()
        zk.stop()
        other.delete(PATH + "-dropped")
        other.stop()


def round_trip(zk, n=5):
    times = []
    for _ in range(n):
        started = time.monotonic()
        zk.exists("/")
        times.append(time.monotonic() - started)
    return statistics.median(times)


def latency_adds_to_the_round_trip():
    zk = client(MEMBERS[0])
    try:
        before = round_trip(zk)
        added = net_fault(action="latency", ms=300, member=1)
        assert added["connections"] == 1, added
        during = round_trip(zk)
        clear()
        after = round_trip(zk)
        print(
            "  round trip: %.1f ms, with 300 ms each way %.1f ms, after %.1f ms"
            % (before * 1e3, during * 1e3, after * 1e3),
            flush=True,
        )
        assert 0.6 <= during < 0.6 + before + 0.3, during
        assert after < 0.3, after
        assert zk.state == KazooState.CONNECTED
    finally:
        clear()
        zk.stop()


def main():
    global ADMIN, MEMBERS
    ADMIN, MEMBERS = sys.argv[1], sys.argv[2:5]
    check("blackholed connection: kazoo moves, the session lives", blackholed_connection_moves_and_keeps_its_session)
    check("blackholed on every member past the timeout: expired", blackholed_everywhere_past_the_timeout_expires)
    check("replies dropped: the write is applied", dropped_reply_write_is_applied)
    check("latency: the round trip grows by it, both ways", latency_adds_to_the_round_trip)
    finish()


if __name__ == "__main__":
    main()
