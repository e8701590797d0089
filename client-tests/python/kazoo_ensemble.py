#!/usr/bin/env python3
"""kazoo against a three-member ensemble: a fresh ensemble's leader is member 3 (the highest id
among equally up-to-date members) and its zxids carry epoch 1; when the leader stops, the
highest remaining id leads and zxids move to the next epoch; a session (4 s timeout) and its
ephemeral survive a 10 s quorum loss; a session and its ephemeral node survive stopping the
member the client is connected to, and quorum loss gives a new read-only client read-only mode
(reads work, writes are refused) until quorum returns, while the other clients keep their
sessions; and reconfig is RECONFIGDISABLED (reconfiguration is off). The leader check runs
first, on the fresh ensemble.

    usage: kazoo_ensemble.py HOST:PORT,HOST:PORT,HOST:PORT CONTROL_URL

CONTROL_URL is zkd's admin listener (http://HOST:PORT); members are stopped and started with
POST CONTROL_URL/zkd/members/ID/stop|start, ID being the member's position in the connection
string (1-based). Prints `PASS name` / `FAIL name: reason` per check and `N passed, M failed`;
exits 1 if anything failed.
"""

import faulthandler
import logging
import os
import socket
import sys
import time
import traceback
import urllib.request

from kazoo.client import KazooClient
from kazoo.exceptions import NotReadOnlyCallError, ReconfigDisabledError
from kazoo.protocol.states import KazooState, KeeperState

import checks
from kazoo_suite import CheckFailed, expect, wait_until

MEMBERS = []
CONTROL = None
results = []


def member(mid, op):
    req = urllib.request.Request("%s/zkd/members/%d/%s" % (CONTROL, mid, op), method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        expect(r.status == 200, "%s member %d answered %d" % (op, mid, r.status))


def member_of(client):
    return checks.member_of(client, MEMBERS)


def word(mid, w):
    """Member `mid`'s answer to the four-letter word `w` (OSError while it listens on nothing)."""
    host, port = MEMBERS[mid - 1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(w.encode())
        text = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            text += chunk
    return text.decode("utf-8", "replace")


def expect_reads_but_no_writes(ro, path, value):
    """A read-only session reads `path` (holding `value`) and gets NOTREADONLY for a write."""
    expect(ro.get(path)[0] == value, "reads work")
    try:
        ro.set(path, b"refused")
        raise CheckFailed("a write succeeded in read-only mode")
    except NotReadOnlyCallError:
        pass


def srvr_mode(mid):
    """The `Mode:` of member `mid`'s `srvr` answer, None while it serves nothing."""
    try:
        text = word(mid, "srvr")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Mode: "):
            return line[len("Mode: "):].strip()
    return None


def leader():
    """The member reporting `Mode: leader`, waiting up to 30 s for one."""
    found = []

    def one():
        found[:] = [m for m in range(1, len(MEMBERS) + 1) if srvr_mode(m) == "leader"]
        return len(found) == 1

    wait_until(one, "a leader", timeout=30)
    return found[0]


def new_client(**kwargs):
    # Reconnect attempts at most a second apart: a real ensemble refuses clients for a while
    # during an election, and kazoo's default back-off would then wait up to a minute.
    retry = {"max_tries": -1, "delay": 0.1, "max_delay": 1.0}
    c = KazooClient(hosts=",".join(MEMBERS), timeout=30.0, connection_retry=retry, **kwargs)
    states = []
    c.add_listener(states.append)
    c.start(timeout=10)
    return c, states


def session_and_ephemeral_survive_stopping_their_member():
    c, states = new_client()
    observer, _ = new_client()
    try:
        path = "/ensemble-kazoo-%d" % os.getpid()
        c.create(path, b"mine", ephemeral=True)
        session = c.client_id
        for _ in range(2):
            m = member_of(c)
            del states[:]
            member(m, "stop")
            wait_until(lambda: KazooState.CONNECTED in states, "reconnection after stopping member %d" % m, timeout=30)
            expect(member_of(c) != m, "moved to another member")
            expect(c.client_id == session, "same session")
            expect(KazooState.LOST not in states, "session never lost: %r" % states)
            # A real ensemble may drop the connection once more while it elects a leader.
            expect(observer.retry(observer.exists, path) is not None, "ephemeral kept")
            c.retry(c.set, path, b"again")
            member(m, "start")
    finally:
        c.stop()
        observer.stop()


def leader_is_the_highest_id_and_each_leader_starts_an_epoch():
    expect(leader() == 3, "a fresh ensemble elects member 3, got member %d" % leader())
    c, _ = new_client()
    try:
        path = "/ensemble-kazoo-epoch-%d" % os.getpid()
        c.create(path + "-1", b"")
        first = c.exists(path + "-1").czxid
        # The counter's first values go to the client's session and this create.
        expect(first >> 32 == 1 and 0 < first & 0xFFFFFFFF < 16,
               "first create's czxid 0x%x carries epoch 1" % first)
        member(3, "stop")
        expect(leader() == 2, "the highest remaining id leads, got member %d" % leader())
        c.retry(c.create, path + "-2", b"")
        second = c.retry(c.exists, path + "-2").czxid
        expect(second >> 32 == 2 and 0 < second & 0xFFFFFFFF < 16,
               "after a leader change czxid 0x%x carries epoch 2" % second)
        member(3, "start")
        wait_until(lambda: srvr_mode(3) == "follower", "member 3 back as a follower", timeout=30)
        expect(leader() == 2, "a member coming back does not take over")
        c.retry(c.delete, path + "-1")
        c.retry(c.delete, path + "-2")
    finally:
        c.stop()


def session_survives_a_quorum_loss_longer_than_its_timeout():
    # Connected to member 1 only, with a 4 s timeout; members 2 and 3 stop for 10 s.
    retry = {"max_tries": -1, "delay": 0.1, "max_delay": 1.0}
    c = KazooClient(hosts=MEMBERS[0], timeout=4.0, connection_retry=retry)
    states = []
    c.add_listener(states.append)
    c.start(timeout=10)
    try:
        path = "/ensemble-kazoo-outage-%d" % os.getpid()
        c.create(path, b"e", ephemeral=True)
        session = c.client_id
        member(2, "stop")
        member(3, "stop")
        wait_until(lambda: KazooState.SUSPENDED in states, "the client suspended", timeout=10)
        time.sleep(10)
        member(2, "start")
        member(3, "start")
        wait_until(lambda: c.connected, "the client reconnected", timeout=40)
        expect(KazooState.LOST not in states, "session never lost: %r" % states)
        expect(c.client_id == session, "same session after the outage")
        expect(c.retry(c.exists, path) is not None, "its ephemeral kept")
        c.retry(c.delete, path)
    finally:
        c.stop()


def quorum_loss_gives_read_only_mode_and_recovery():
    c, states = new_client()
    ro = None
    try:
        path = "/ensemble-kazoo-ro-%d" % os.getpid()
        c.create(path, b"before")
        c.create(path + "-eph", b"e", ephemeral=True)
        session = c.client_id
        home = member_of(c)
        others = [i for i in range(1, len(MEMBERS) + 1) if i != home]
        del states[:]
        for m in others:
            member(m, "stop")
        # A read-only member serves only new sessions of clients that accept read-only mode.
        ro, ro_states = new_client(read_only=True)
        wait_until(lambda: ro.client_state == KeeperState.CONNECTED_RO, "read-only mode", timeout=30)
        expect_reads_but_no_writes(ro, path, b"before")
        member(others[0], "start")
        # The read-only session was the member's own: the client gets a new session.
        wait_until(lambda: ro.client_state == KeeperState.CONNECTED, "read-write again", timeout=30)
        ro.retry(ro.set, path, b"after")
        expect(ro.get(path)[0] == b"after", "writes work again")
        # The read-write client kept its session and its ephemeral node throughout.
        wait_until(lambda: c.connected, "the first client back", timeout=30)
        expect(c.client_id == session, "same session after quorum returned")
        expect(c.retry(c.exists, path + "-eph") is not None, "ephemeral kept")
        expect(KazooState.LOST not in states, "session never lost: %r" % states)
        member(others[1], "start")
        c.retry(c.delete, path)
    finally:
        c.stop()
        if ro is not None:
            ro.stop()


def reconfig_is_refused_when_disabled():
    """Without reconfigEnabled (ZooKeeper's default) reconfig is RECONFIGDISABLED for anyone,
    before any other check."""
    c, _ = new_client()
    try:
        version = int(c.get("/zookeeper/config")[0].decode().rsplit("version=", 1)[1], 16)
        expect(version == 0, "a static configuration has version 0, got %x" % version)
        try:
            c.reconfig(joining=None, leaving="3", new_members=None, from_config=12345)
            raise CheckFailed("a reconfig succeeded with reconfiguration off")
        except ReconfigDisabledError:
            pass
    finally:
        c.stop()


def run(name, fn):
    try:
        fn()
        results.append((name, True, ""))
        print("PASS %s" % name, flush=True)
    except Exception as e:  # noqa: BLE001 - report every failure as a FAIL line
        reason = str(e) if isinstance(e, CheckFailed) else "".join(
            traceback.format_exception_only(type(e), e)).strip()
        results.append((name, False, reason))
        print("FAIL %s: %s" % (name, reason), flush=True)


def suite_main(doc, members, checks):
    """Runs a suite's `checks` ((name, function) pairs) with the members and control URL of
    the command line (`members` of them expected, or any number when None) and prints the
    summary line; returns the exit status. Past KAZOO_SUITE_TIMEOUT seconds every thread's
    stack goes to stderr (where a hang is) and the suite exits."""
    global MEMBERS, CONTROL
    if len(sys.argv) != 3:
        print(doc, file=sys.stderr)
        return 2
    MEMBERS = sys.argv[1].split(",")
    CONTROL = sys.argv[2]
    if members is not None and len(MEMBERS) != members:
        print("expected %d members, got %d" % (members, len(MEMBERS)), file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.CRITICAL)
    faulthandler.dump_traceback_later(float(os.environ.get("KAZOO_SUITE_TIMEOUT", "240")), exit=True)
    for name, fn in checks:
        run(name, fn)
    failed = sum(1 for _, ok, _ in results if not ok)
    print("%d passed, %d failed" % (len(results) - failed, failed), flush=True)
    return 1 if failed else 0


def main():
    return suite_main(__doc__, None, [
        ("kazoo_leader_is_the_highest_id_and_each_leader_starts_an_epoch",
         leader_is_the_highest_id_and_each_leader_starts_an_epoch),
        ("kazoo_session_survives_a_10s_quorum_loss_with_a_4s_timeout",
         session_survives_a_quorum_loss_longer_than_its_timeout),
        ("kazoo_session_and_ephemeral_survive_stopping_its_member", session_and_ephemeral_survive_stopping_their_member),
        ("kazoo_quorum_loss_read_only_mode_and_recovery", quorum_loss_gives_read_only_mode_and_recovery),
        ("kazoo_reconfig_refused_when_disabled", reconfig_is_refused_when_disabled),
    ])


if __name__ == "__main__":
    sys.exit(main())
