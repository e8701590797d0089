#!/usr/bin/env python3
"""kazoo against an ensemble of three voting members and one observer (member 4): the observer
says so (`srvr`, `mntr`, `/zookeeper/config`); a client connected to it alone creates, reads and
is notified of another client's change; a session moves from the observer to a voter and back
with its ephemeral node; stopping the observer leaves the quorum, the leader and the voters'
clients untouched; and stopping two voters loses the quorum although the observer runs: it
then serves read-only clients only, is never elected, and observes again once the voters
return.

    usage: kazoo_observer.py HOST:PORT,HOST:PORT,HOST:PORT,HOST:PORT CONTROL_URL

The members are given in id order, the observer last. CONTROL_URL stops and starts members as
for kazoo_ensemble.py. Prints `PASS name` / `FAIL name: reason` per check and
`N passed, M failed`; exits 1 if anything failed.
"""

import os
import sys
import threading

from kazoo.client import KazooClient
from kazoo.protocol.states import EventType, KazooState, KeeperState

import kazoo_ensemble as ens
from kazoo_suite import expect, wait_until

OBSERVER = 4
RETRY = {"max_tries": -1, "delay": 0.1, "max_delay": 1.0}


def client(*members, **kwargs):
    """A started client of `members` (ids), tried in that order."""
    hosts = ",".join(ens.MEMBERS[m - 1] for m in members)
    c = KazooClient(hosts=hosts, timeout=30.0, connection_retry=RETRY, randomize_hosts=False, **kwargs)
    states = []
    c.add_listener(states.append)
    c.start(timeout=30)
    return c, states


def observer_reports_its_mode():
    wait_until(lambda: ens.srvr_mode(OBSERVER) == "observer", "member 4 observing", timeout=30)
    expect(ens.leader() == 3, "voter 3 leads, got member %d" % ens.leader())
    mntr = ens.word(OBSERVER, "mntr")
    expect("zk_server_state\tobserver\n" in mntr, "mntr says observer")
    expect("zk_peer_state\tobserving - broadcast\n" in mntr, "mntr's peer state: %r" %
           [l for l in mntr.splitlines() if "peer_state" in l])
    c, _ = client(OBSERVER)
    try:
        config = c.get("/zookeeper/config")[0].decode()
        lines = [l for l in config.splitlines() if l.startswith("server.")]
        expect(len(lines) == 4, "four members in /zookeeper/config: %r" % config)
        expect(lines[3].startswith("server.4=") and ":observer" in lines[3], "member 4 observes: %r" % config)
        expect(all(":participant" in l for l in lines[:3]), "members 1-3 vote: %r" % config)
    finally:
        c.stop()


def client_on_the_observer_creates_reads_and_watches():
    c, _ = client(OBSERVER)
    other, _ = client(1)
    try:
        expect(c.client_id[0] >> 56 == OBSERVER, "the observer made the session: 0x%x" % c.client_id[0])
        path = "/observer-kazoo-%d" % os.getpid()
        c.create(path, b"from the observer")
        c.create(path + "-eph", b"e", ephemeral=True)
        other.sync(path)
        expect(other.get(path)[0] == b"from the observer", "a voter's client reads the observer's write")
        other.create(path + "-voter", b"from a voter")
        c.sync(path + "-voter")
        expect(c.get(path + "-voter")[0] == b"from a voter", "the observer's client reads a voter's write")
        events = []
        fired = threading.Event()

        def watcher(event):
            events.append(event)
            fired.set()

        c.get(path, watch=watcher)
        other.set(path, b"changed")
        expect(fired.wait(10), "the watch on the observer fired")
        expect(events[0].type == EventType.CHANGED and events[0].path == path, "a data change: %r" % events)
        expect(c.get(path)[0] == b"changed", "the new data")
        for p in (path, path + "-voter"):
            c.delete(p)
    finally:
        c.stop()
        other.stop()


def stopping_the_observer_moves_its_session_and_keeps_the_quorum():
    c, states = client(OBSERVER, 1)
    voter, voter_states = client(2)
    try:
        path = "/observer-kazoo-move-%d" % os.getpid()
        c.create(path, b"e", ephemeral=True)
        session = c.client_id
        expect(ens.member_of(c) == OBSERVER, "connected to the observer first")
        leader = ens.leader()
        del states[:]
        ens.member(OBSERVER, "stop")
        # The voters go on at once: a write on a voter needs no retry and its client stays.
        voter.create(path + "-quorum", b"")
        expect(ens.leader() == leader, "the same leader")
        wait_until(lambda: KazooState.CONNECTED in states, "reconnection to voter 1", timeout=30)
        expect(ens.member_of(c) == 1, "moved to voter 1")
        expect(c.client_id == session, "same session")
        expect(c.retry(c.exists, path) is not None, "its ephemeral kept")
        expect(voter_states == [KazooState.CONNECTED], "the voter's client never disconnected: %r" % voter_states)
        ens.member(OBSERVER, "start")
        wait_until(lambda: ens.srvr_mode(OBSERVER) == "observer", "member 4 observing again", timeout=30)
        # Back to the observer: voter 1 stops (it does not lead), the client's other host.
        del states[:]
        ens.member(1, "stop")
        wait_until(lambda: KazooState.CONNECTED in states, "reconnection to the observer", timeout=30)
        expect(ens.member_of(c) == OBSERVER, "moved back to the observer")
        expect(c.client_id == session, "same session on the observer")
        expect(KazooState.LOST not in states, "session never lost: %r" % states)
        c.retry(c.delete, path + "-quorum")
        ens.member(1, "start")
        wait_until(lambda: ens.srvr_mode(1) == "follower", "member 1 following again", timeout=30)
    finally:
        c.stop()
        voter.stop()


def voters_losing_their_quorum_leave_the_observer_read_only():
    rw, _ = client(1)
    ro = None
    try:
        path = "/observer-kazoo-ro-%d" % os.getpid()
        rw.create(path, b"before")
        rw.stop()
        ens.member(2, "stop")
        ens.member(3, "stop")
        # One voter of three and the observer run: no quorum, whatever the observer counts.
        ro, _ = client(OBSERVER, read_only=True)
        wait_until(lambda: ro.client_state == KeeperState.CONNECTED_RO, "read-only mode on the observer", timeout=30)
        expect(ens.srvr_mode(OBSERVER) == "read-only", "the observer's srvr says read-only")
        ens.expect_reads_but_no_writes(ro, path, b"before")
        ens.member(2, "start")
        ens.member(3, "start")
        wait_until(lambda: ro.client_state == KeeperState.CONNECTED, "read-write again", timeout=40)
        expect(ens.leader() != OBSERVER, "an observer is never elected")
        wait_until(lambda: ens.srvr_mode(OBSERVER) == "observer", "member 4 observing again", timeout=30)
        ro.retry(ro.set, path, b"after")
        ro.retry(ro.delete, path)
    finally:
        if ro is not None:
            ro.stop()


def main():
    return ens.suite_main(__doc__, 4, [
        ("kazoo_observer_reports_its_mode", observer_reports_its_mode),
        ("kazoo_client_on_the_observer_creates_reads_and_watches", client_on_the_observer_creates_reads_and_watches),
        ("kazoo_stopping_the_observer_moves_its_session_and_keeps_the_quorum",
         stopping_the_observer_moves_its_session_and_keeps_the_quorum),
        ("kazoo_voters_losing_their_quorum_leave_the_observer_read_only",
         voters_losing_their_quorum_leave_the_observer_read_only),
    ])


if __name__ == "__main__":
    sys.exit(main())
