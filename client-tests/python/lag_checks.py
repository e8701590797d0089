#!/usr/bin/env python3
"""kazoo against a three-member zkd ensemble with a lagging member.

    usage: lag_checks.py ADMIN_HOST:PORT MEMBER1 MEMBER2 MEMBER3   (HOST:PORT each)

Member 2 is told to lag over the admin API. Prints `PASS name` / `FAIL name: reason` per
check and `N passed, M failed`; exit 1 on any failure. Every wait is bounded, generously: a
wait ends as soon as what it waits for happens.
"""

import json
import os
import sys
import threading
import time
import urllib.request

from checks import check, finish
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

WAIT = 60.0
# How long a check listens for something that must not happen.
QUIET = 0.5
PATH = "/lag-checks-%d" % os.getpid()


def admin(method, path):
    req = urllib.request.Request("http://%s%s" % (ADMIN, path), method=method, data=b"")
    with urllib.request.urlopen(req, timeout=WAIT) as r:
        return json.loads(r.read())


def lag(query):
    return admin("POST", "/zkd/members/2/lag?" + query)


def client(hosts):
    c = KazooClient(hosts=hosts, timeout=30.0, randomize_hosts=False)
    c.start(timeout=WAIT)
    return c


def read_config(zk, with_sync):
    """The code under test: read the configuration, after sync() or not."""
    if with_sync:
        zk.sync(PATH)
    return zk.get(PATH)[0]


def stale_without_sync_new_with_sync():
    for with_sync in (False, True):
        writer, reader = client(M1), client(M2)
        try:
            writer.ensure_path(PATH)
            writer.set(PATH, b"v1")
            lag("ms=3600000")
            writer.set(PATH, b"v2")
            seen = read_config(reader, with_sync)
            want = b"v2" if with_sync else b"v1"
            assert seen == want, "sync=%s read %r, expected %r" % (with_sync, seen, want)
        finally:
            lag("txns=0")
            writer.stop()
            reader.stop()


def watch_fires_when_the_member_catches_up():
    writer, reader = client(M1), client(M2)
    try:
        writer.ensure_path(PATH)
        writer.set(PATH, b"before")
        lag("stall=true")
        fired = threading.Event()
        events = []

        def watcher(event):
            events.append(event)
            fired.set()

        assert reader.get(PATH, watch=watcher)[0] == b"before"
        writer.set(PATH, b"after")
        assert not fired.wait(QUIET), "fired before the member applied the change"
        assert reader.get(PATH)[0] == b"before"
        lag("stall=false")
        assert fired.wait(WAIT), "no event after the member caught up"
        assert events[0].type == "CHANGED" and events[0].path == PATH, events
        assert reader.get(PATH)[0] == b"after"
    finally:
        lag("txns=0")
        writer.stop()
        reader.stop()


def a_member_behind_the_client_is_refused():
    """A client that has seen newer state never reconnects to a member that has not applied
    it: it waits until one has."""
    zk = client(M3 + "," + M2)
    states = []
    zk.add_listener(states.append)
    try:
        zk.ensure_path(PATH)
        lag("stall=true")
        zk.set(PATH, b"seen")
        admin("POST", "/zkd/members/3/stop")
        deadline = time.time() + WAIT
        while zk.state != KazooState.SUSPENDED and time.time() < deadline:
            time.sleep(0.05)
        assert zk.state == KazooState.SUSPENDED, zk.state
        time.sleep(QUIET * 2)
        assert zk.state == KazooState.SUSPENDED, "reconnected to the member that is behind"
        lag("stall=false")
        deadline = time.time() + WAIT
        while zk.state != KazooState.CONNECTED and time.time() < deadline:
            time.sleep(0.05)
        assert zk.state == KazooState.CONNECTED, zk.state
        assert zk.get(PATH)[0] == b"seen"
    finally:
        lag("txns=0")
        admin("POST", "/zkd/members/3/start")
        zk.stop()


if __name__ == "__main__":
    ADMIN, M1, M2, M3 = sys.argv[1:5]
    check("stale value without sync, new value with sync", stale_without_sync_new_with_sync)
    check("a watch fires when the lagging member catches up",
          watch_fires_when_the_member_catches_up)
    check("a member behind the client is refused", a_member_behind_the_client_is_refused)
    finish()
