#!/usr/bin/env python3
"""End-to-end checks with kazoo (the Python ZooKeeper client) and its recipes against a server.

    usage: kazoo_suite.py HOST:PORT

Prints `PASS name` or `FAIL name: reason` per check and a final `N passed, M failed` line; exits
1 if anything failed. Every wait is bounded, and a watchdog ends the whole run (exit 2) if it
takes longer than KAZOO_SUITE_TIMEOUT seconds (default 240).
"""

import contextlib
import logging
import os
import random
import struct
import sys
import threading
import time
import traceback

from kazoo.client import KazooClient
from kazoo.exceptions import (
    AuthFailedError,
    BadVersionError,
    LockTimeout,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.states import EventType, KazooState
from kazoo.recipe.cache import TreeCache, TreeEvent
from kazoo.security import ACL, Id, OPEN_ACL_UNSAFE, make_digest_acl, make_digest_acl_credential

WAIT = 10.0  # seconds, the bound for any single wait in a check
ADDR = None
BASE = "/kazoo-suite-%d-%d" % (os.getpid(), random.randint(0, 1 << 30))

results = []  # (name, ok, reason)
clients = []


class CheckFailed(Exception):
    pass


def expect(cond, message):
    if not cond:
        raise CheckFailed(message)


def expect_eq(got, want, what):
    if got != want:
        raise CheckFailed("%s: expected %r, got %r" % (what, want, got))


def expect_raises(exc_type, fn, *args, **kwargs):
    try:
        value = fn(*args, **kwargs)
    except exc_type:
        return
    except Exception as e:  # noqa: BLE001 - report the wrong type
        raise CheckFailed("expected %s, got %s: %s" % (exc_type.__name__, type(e).__name__, e))
    raise CheckFailed("expected %s, call returned %r" % (exc_type.__name__, value))


def wait_until(pred, what, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.02)
    if not pred():
        raise CheckFailed("timed out after %.0fs waiting for %s" % (timeout, what))



def expect_event(event, event_type, path, what):
    expect_eq((event.type, event.path), (event_type, path), what)


def expect_first_event(events, event_type, path, what):
    """Waits until a watch appended to `events`, then checks the first event."""
    wait_until(lambda: events, what)
    expect_event(events[0], event_type, path, what)


def expect_fired_once(events, what, settle=0.1):
    """Checks, `settle` seconds on, that a one-shot watch delivered no second event."""
    time.sleep(settle)
    expect_eq(len(events), 1, what)

@contextlib.contextmanager
def started_clients(n):
    """`n` new started clients, stopped again at the end of the block."""
    cs = [new_client() for _ in range(n)]
    try:
        yield cs
    finally:
        for c in cs:
            stop_client(c)


def new_client(**kwargs):
    kwargs.setdefault("timeout", 10.0)
    c = KazooClient(hosts=ADDR, **kwargs)
    c.start(timeout=WAIT)
    clients.append(c)
    return c


def stop_client(c):
    try:
        c.stop()
        c.close()
    except Exception:  # noqa: BLE001
        pass
    if c in clients:
        clients.remove(c)


def start_thread(fn, *args):
    t = threading.Thread(target=fn, args=args, daemon=True)
    t.start()
    return t


def join_all(threads, what):
    deadline = time.monotonic() + WAIT
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    alive = [t for t in threads if t.is_alive()]
    expect(not alive, "%d %s thread(s) still running after %.0fs" % (len(alive), what, WAIT))


CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


# --- connection, server info -------------------------------------------------------------------


@check
def connect(zk):
    expect(zk.connected, "client not connected")
    expect_eq(zk.state, KazooState.CONNECTED, "state")
    session_id, password = zk.client_id
    expect(session_id != 0, "session id is 0")
    expect_eq(len(password), 16, "session password length")


@check
def server_version_from_envi(zk):
    version = zk.server_version()
    expect(isinstance(version, tuple) and all(isinstance(v, int) for v in version), "version %r" % (version,))
    expect(len(version) == 3, "expected major.minor.patch, got %r" % (version,))
    expect(version >= (3, 5, 0), "version %r is older than 3.5" % (version,))


@check
def four_letter_words(zk):
    expect_eq(zk.command(b"ruok"), "imok", "ruok")
    envi = zk.command(b"envi")
    expect(envi.startswith("Environment:\n"), "envi starts with %r" % envi[:40])
    expect("zookeeper.version=" in envi, "envi has no zookeeper.version line")
    srvr = zk.command(b"srvr")
    expect("Mode: standalone" in srvr.splitlines(), "srvr has no 'Mode: standalone' line: %r" % srvr)
    expect(srvr.startswith("Zookeeper version: "), "srvr starts with %r" % srvr[:40])


# --- raw operations ----------------------------------------------------------------------------


@check
def raw_create_get_set(zk):
    p = BASE + "/raw"
    expect_eq(zk.exists(p), None, "exists on missing node")
    expect_eq(zk.create(p, b"v0"), p, "create result")
    data, stat = zk.get(p)
    expect_eq(data, b"v0", "data")
    expect_eq((stat.version, stat.cversion, stat.aversion, stat.numChildren, stat.dataLength, stat.ephemeralOwner),
              (0, 0, 0, 0, 2, 0), "fresh stat (version, cversion, aversion, numChildren, dataLength, owner)")
    expect_eq(stat.czxid, stat.mzxid, "czxid == mzxid")
    expect_eq(stat.czxid, stat.pzxid, "czxid == pzxid")
    stat2 = zk.set(p, b"value1")
    expect_eq((stat2.version, stat2.dataLength), (1, 6), "stat after set")
    expect(stat2.mzxid > stat.mzxid, "mzxid did not advance")
    expect_eq(zk.exists(p), stat2, "exists stat equals set stat")
    expect_raises(BadVersionError, zk.set, p, b"x", version=5)
    expect_eq(zk.set(p, b"v2", version=1).version, 2, "conditional set")
    expect_raises(NodeExistsError, zk.create, p, b"")
    expect_raises(NoNodeError, zk.get, p + "/missing")
    expect_raises(NoNodeError, zk.create, p + "/missing/child", b"")
    expect_raises(BadVersionError, zk.delete, p, version=7)
    zk.delete(p, version=2)
    expect_eq(zk.exists(p), None, "exists after delete")


@check
def raw_create_makepath_and_null_data(zk):
    p = BASE + "/mk/a/b/c"
    expect_eq(zk.create(p, b"leaf", makepath=True), p, "create makepath")
    expect_eq(zk.get(BASE + "/mk/a")[0], b"", "intermediate node data")
    expect_eq(zk.get_children(BASE + "/mk/a"), ["b"], "children")
    expect_raises(NotEmptyError, zk.delete, BASE + "/mk")
    zk.delete(BASE + "/mk", recursive=True)
    expect_eq(zk.exists(BASE + "/mk"), None, "recursive delete")


@check
def raw_sequence_nodes(zk):
    p = BASE + "/seq"
    zk.create(p)
    first = zk.create(p + "/n-", b"a", sequence=True)
    second = zk.create(p + "/n-", b"b", sequence=True)
    zk.create(p + "/plain")
    third = zk.create(p + "/n-", b"c", sequence=True)
    expect_eq([first, second, third], [p + "/n-0000000000", p + "/n-0000000001", p + "/n-0000000003"],
              "sequential names (a plain create also advances the counter)")
    zk.delete(second)
    fourth = zk.create(p + "/n-", b"d", sequence=True)
    expect_eq(fourth, p + "/n-0000000004", "numbers are never reused")
    stat = zk.exists(p)
    # 5 creates + 1 delete
    expect_eq((stat.cversion, stat.numChildren), (6, 4), "parent (cversion, numChildren)")


@check
def raw_get_children_include_data(zk):
    p = BASE + "/kids"
    zk.create(p, b"parent")
    for name in ("b", "a", "c"):
        zk.create(p + "/" + name, name.encode())
    children, stat = zk.get_children(p, include_data=True)
    expect_eq(sorted(children), ["a", "b", "c"], "children")
    expect_eq((stat.numChildren, stat.cversion, stat.dataLength), (3, 3, 6), "stat (numChildren, cversion, dataLength)")
    last = zk.exists(p + "/c")
    expect_eq(stat.pzxid, last.czxid, "parent pzxid = czxid of the last child")
    expect_raises(NoNodeError, zk.get_children, p + "/missing")


@check
def raw_create_include_data(zk):
    p = BASE + "/c2"
    path, stat = zk.create(p, b"abc", include_data=True)
    expect_eq(path, p, "path")
    expect_eq((stat.version, stat.dataLength, stat.numChildren), (0, 3, 0), "stat of created node")
    expect_eq(stat, zk.exists(p), "create2 stat equals exists stat")
    path, stat = zk.create(p + "/s-", b"", sequence=True, include_data=True)
    expect_eq(path, p + "/s-0000000000", "sequential create2 path")


@check
def raw_ephemeral(zk):
    other = new_client()
    try:
        p = BASE + "/eph"
        other.create(p, b"e", ephemeral=True)
        stat = zk.exists(p)
        expect(stat is not None, "ephemeral not visible to another session")
        expect_eq(stat.ephemeralOwner, other.client_id[0], "ephemeralOwner")
        expect_raises(NoChildrenForEphemeralsError, other.create, p + "/child", b"")
        es = other.create(BASE + "/eseq-", ephemeral=True, sequence=True)
        expect(es.startswith(BASE + "/eseq-") and len(es) == len(BASE) + 16, "ephemeral sequential %r" % es)
    finally:
        stop_client(other)
    expect_eq(zk.exists(BASE + "/eph"), None, "ephemeral after its session closed")
    expect_eq(zk.exists(es), None, "ephemeral sequential after its session closed")


@check
def raw_exists_watch_fires_node_created(zk):
    p = BASE + "/later"
    events = []
    expect_eq(zk.exists(p, watch=events.append), None, "exists")
    zk.create(p, b"")
    expect_first_event(events, EventType.CREATED, p, "NodeCreated")
    time.sleep(0.1)
    zk.set(p, b"again")  # one-shot: must not fire again
    expect_fired_once(events, "number of events from a one-shot watch", settle=0.2)


@check
def raw_child_and_data_watches(zk):
    p = BASE + "/w"
    zk.create(p, b"")
    child_events, data_events = [], []
    zk.get_children(p, watch=child_events.append)
    zk.get(p, watch=data_events.append)
    zk.create(p + "/x", b"")
    expect_first_event(child_events, EventType.CHILD, p, "NodeChildrenChanged")
    expect_eq(data_events, [], "data watch must not fire on child create")
    zk.delete(p + "/x")
    zk.delete(p)
    expect_first_event(data_events, EventType.DELETED, p, "NodeDeleted (data watch)")
    expect_fired_once(child_events, "child watch fired only once")


@check
def raw_sync_and_acls(zk):
    p = BASE + "/acl-open"
    zk.create(p, b"")
    expect_eq(zk.sync(p), p, "sync result")
    acls, stat = zk.get_acls(p)
    expect_eq(list(acls), [ACL(31, Id("world", "anyone"))], "default ACL")
    expect_eq(stat.aversion, 0, "aversion")
    expect_raises(BadVersionError, zk.set_acls, p, OPEN_ACL_UNSAFE, version=3)
    read_only = [ACL(1, Id("world", "anyone"))]
    stat = zk.set_acls(p, read_only, version=0)
    expect_eq((stat.aversion, stat.version), (1, 0), "stat after setACL (aversion, version)")
    expect_eq(list(zk.get_acls(p)[0]), read_only, "ACL after setACL")
    expect_raises(NoAuthError, zk.set, p, b"x")
    # setACL needs ADMIN, which the new ACL no longer grants
    expect_raises(NoAuthError, zk.set_acls, p, OPEN_ACL_UNSAFE)
    # deleting needs DELETE on the parent only
    zk.delete(p)


@check
def raw_root_and_system_nodes(zk):
    expect("zookeeper" in zk.get_children("/"), "/zookeeper missing from /")
    expect_eq(sorted(zk.get_children("/zookeeper")), ["config", "quota"], "/zookeeper children")
    expect_raises(NoNodeError, zk.get, "/no-such-node-%d" % os.getpid())


# --- transactions ------------------------------------------------------------------------------


@check
def transaction_success(zk):
    p = BASE + "/tx"
    zk.create(p, b"start")
    t = zk.transaction()
    t.create(p + "/a", b"a")
    t.create(p + "/s-", b"s", sequence=True)
    t.set_data(p, b"changed", version=0)
    t.check(p + "/a", 0)
    t.delete(p + "/a")
    res = t.commit()
    expect_eq(len(res), 5, "number of results (%r)" % (res,))
    expect_eq(res[0], p + "/a", "create result")
    expect_eq(res[1], p + "/s-0000000001", "sequential create result")
    expect_eq((res[2].version, res[2].dataLength), (1, 7), "setData stat")
    expect_eq(res[3:], [True, True], "check and delete results")
    expect_eq(zk.get(p)[0], b"changed", "data after commit")
    expect_eq(zk.get_children(p), ["s-0000000001"], "children after commit")
    # all ops of a multi share one zxid
    expect_eq(zk.exists(p + "/s-0000000001").czxid, res[2].mzxid, "one zxid for the whole multi")


@check
def transaction_failure(zk):
    p = BASE + "/txf"
    zk.create(p, b"orig")
    t = zk.transaction()
    t.create(p + "/new", b"")
    t.set_data(p, b"nope", version=42)
    t.delete(p)
    t.check(p, 0)
    res = t.commit()
    expect_eq([type(r) for r in res], [RolledBackError, BadVersionError, RuntimeInconsistency, RuntimeInconsistency],
              "result types (%r)" % (res,))
    expect_eq(zk.exists(p + "/new"), None, "rolled back create")
    data, stat = zk.get(p)
    expect_eq((data, stat.version), (b"orig", 0), "data unchanged")

    t = zk.transaction()
    t.check(p + "/missing", 0)
    res = t.commit()
    expect_eq([type(r) for r in res], [NoNodeError], "check on a missing node")


# --- auth and ACLs -----------------------------------------------------------------------------


@check
def digest_acl(zk):
    p = BASE + "/secret"
    owner = new_client(auth_data=[("digest", "alice:s3cret")])
    anon = new_client()
    friend = new_client()
    wrong = new_client()
    try:
        acl = make_digest_acl("alice", "s3cret", all=True)
        owner.create(p, b"classified", acl=[acl])
        expect_raises(NoAuthError, anon.get, p)
        expect_raises(NoAuthError, anon.set, p, b"x")
        expect_raises(NoAuthError, anon.get_acls, p)
        friend.add_auth("digest", "alice:s3cret")
        expect_eq(friend.get(p)[0], b"classified", "authenticated read")
        wrong.add_auth("digest", "alice:wrong")
        expect_raises(NoAuthError, wrong.get, p)
        acls, stat = owner.get_acls(p)
        expect_eq(list(acls), [ACL(31, Id("digest", make_digest_acl_credential("alice", "s3cret")))], "getACL")
        # the `auth` scheme: the server fills in the caller's authenticated digest identity itself
        owner.create(p + "-auth", b"", acl=[ACL(31, Id("auth", ""))])
        acls, _ = owner.get_acls(p + "-auth")
        expect_eq(list(acls), [ACL(31, Id("digest", "alice:uLxpHc/uhT86OXPoSjJTp1M8CJY="))],
                  "ACL from the auth scheme (digest computed by the server)")
        expect_raises(NoAuthError, anon.get, p + "-auth")
        expect_raises(NoAuthError, anon.create, p + "/child", b"")
        owner.create(p + "/child", b"")
        expect_raises(NoAuthError, anon.delete, p + "/child")
        owner.delete(p + "/child")
        # children are still visible in the (open) parent
        expect("secret" in anon.get_children(BASE), "protected node listed in open parent")
    finally:
        for path in (p + "/child", p, p + "-auth"):
            try:
                owner.delete(path)
            except Exception:  # noqa: BLE001
                pass
        for c in (owner, anon, friend, wrong):
            stop_client(c)


@check
def auth_with_unknown_scheme_fails(zk):
    c = new_client()
    try:
        expect_raises(AuthFailedError, c.add_auth, "nosuchscheme", "whatever")
    finally:
        stop_client(c)


# --- recipes -----------------------------------------------------------------------------------


@check
def lock_mutual_exclusion(zk):
    p = BASE + "/lock"
    inside = [0]
    max_inside = [0]
    count = [0]
    errors = []
    guard = threading.Lock()

    def work(c, ident):
        try:
            lock = c.Lock(p, ident)
            for _ in range(3):
                expect(lock.acquire(timeout=WAIT), "%s could not acquire" % ident)
                with guard:
                    inside[0] += 1
                    max_inside[0] = max(max_inside[0], inside[0])
                time.sleep(0.01)
                with guard:
                    inside[0] -= 1
                    count[0] += 1
                lock.release()
        except Exception as e:  # noqa: BLE001
            errors.append("%s: %s: %s" % (ident, type(e).__name__, e))

    with started_clients(4) as workers:
        threads = [start_thread(work, c, "w%d" % i) for i, c in enumerate(workers)]
        join_all(threads, "lock worker")
        expect_eq(errors, [], "worker errors")
        expect_eq(count[0], 12, "critical sections run")
        expect_eq(max_inside[0], 1, "maximum holders at once")
        expect_eq(zk.get_children(p), [], "lock nodes left behind")


@check
def lock_timeout_and_handover(zk):
    p = BASE + "/lock2"
    with started_clients(2) as (a, b):
        la, lb = a.Lock(p, "alice"), b.Lock(p, "bob")
        expect(la.acquire(timeout=WAIT), "alice did not get the free lock")
        expect_raises(LockTimeout, lb.acquire, timeout=0.5)
        expect_eq(lb.acquire(blocking=False), False, "non-blocking acquire of a held lock")
        got = []
        t = start_thread(lambda: got.append(lb.acquire(timeout=WAIT)))
        wait_until(lambda: len(la.contenders()) == 2, "two contenders")
        expect_eq(la.contenders(), ["alice", "bob"], "contenders in order")
        la.release()
        join_all([t], "lock waiter")
        expect_eq(got, [True], "bob acquired after release")
        lb.release()
        # a lock held by a closed session is released
        expect(la.acquire(timeout=WAIT), "alice re-acquire")
        stop_client(a)
        expect(lb.acquire(timeout=WAIT), "bob acquires after alice's session closed")
        lb.release()


@check
def read_write_lock(zk):
    p = BASE + "/rw"
    a, b, c = new_client(), new_client(), new_client()
    try:
        r1, r2, w = a.ReadLock(p), b.ReadLock(p), c.WriteLock(p)
        expect(r1.acquire(timeout=WAIT), "first reader")
        expect(r2.acquire(timeout=WAIT), "second reader while first holds")
        expect_raises(LockTimeout, w.acquire, timeout=0.5)
        r1.release()
        r2.release()
        expect(w.acquire(timeout=WAIT), "writer after readers left")
        expect_raises(LockTimeout, r1.acquire, timeout=0.5)
        w.release()
        expect(r1.acquire(timeout=WAIT), "reader after writer left")
        r1.release()
    finally:
        for x in (a, b, c):
            stop_client(x)


@check
def semaphore(zk):
    p = BASE + "/sem"
    with started_clients(3) as cs:
        sems = [c.Semaphore(p, "s%d" % i, max_leases=2) for i, c in enumerate(cs)]
        expect(sems[0].acquire(timeout=WAIT), "lease 1")
        expect(sems[1].acquire(timeout=WAIT), "lease 2")
        expect_eq(sems[2].acquire(blocking=False), False, "third lease while two are held")
        expect_eq(sorted(sems[2].lease_holders()), ["s0", "s1"], "lease holders")
        sems[0].release()
        expect(sems[2].acquire(timeout=WAIT), "third lease after a release")
        sems[1].release()
        sems[2].release()


@check
def election(zk):
    p = BASE + "/election"
    cs = [new_client() for _ in range(3)]
    leaders = []
    current = [0]
    max_current = [0]
    guard = threading.Lock()
    release = {}
    elections = []

    def lead(ident):
        with guard:
            leaders.append(ident)
            current[0] += 1
            max_current[0] = max(max_current[0], current[0])
        release[ident].wait(WAIT)
        with guard:
            current[0] -= 1

    try:
        threads = []
        for i, c in enumerate(cs):
            ident = "candidate-%d" % i
            release[ident] = threading.Event()
            e = c.Election(p, ident)
            elections.append(e)
            threads.append(start_thread(e.run, lead, ident))
            wait_until(lambda: len(elections[0].contenders()) == i + 1, "contender %d registered" % i)
        expect_eq(elections[0].contenders(), ["candidate-0", "candidate-1", "candidate-2"], "contenders")
        for expected in range(3):
            wait_until(lambda: len(leaders) == expected + 1, "leader #%d" % (expected + 1))
            time.sleep(0.1)
            expect_eq(len(leaders), expected + 1, "only one leader at a time")
            release[leaders[-1]].set()
        join_all(threads, "election")
        expect_eq(leaders, ["candidate-0", "candidate-1", "candidate-2"], "leadership order")
        expect_eq(max_current[0], 1, "concurrent leaders")
    finally:
        for ev in release.values():
            ev.set()
        for e in elections:
            e.cancel()
        for c in cs:
            stop_client(c)


@check
def barrier(zk):
    p = BASE + "/barrier"
    other = new_client()
    try:
        b = zk.Barrier(p)
        b.create()
        expect_eq(other.Barrier(p).wait(timeout=0.3), False, "wait on a set barrier times out")
        passed = []
        t = start_thread(lambda: passed.append(other.Barrier(p).wait(timeout=WAIT)))
        time.sleep(0.3)
        expect_eq(passed, [], "waiter passed a set barrier")
        expect_eq(b.remove(), True, "remove")
        join_all([t], "barrier waiter")
        expect_eq(passed, [True], "waiter released")
        expect_eq(zk.Barrier(p).wait(timeout=0.5), True, "wait on a removed barrier")
    finally:
        stop_client(other)


@check
def double_barrier(zk):
    p = BASE + "/dbarrier"
    entered = []
    left = []
    errors = []
    guard = threading.Lock()

    def member(c, ident):
        try:
            db = c.DoubleBarrier(p, 3, identifier=ident)
            db.enter()
            with guard:
                entered.append((ident, time.monotonic()))
            db.leave()
            with guard:
                left.append(ident)
        except Exception as e:  # noqa: BLE001
            errors.append("%s: %s: %s" % (ident, type(e).__name__, e))

    with started_clients(3) as cs:
        t0 = start_thread(member, cs[0], "m0")
        t1 = start_thread(member, cs[1], "m1")
        time.sleep(0.5)
        expect_eq(entered, [], "members entered before the barrier was full")
        t2 = start_thread(member, cs[2], "m2")
        join_all([t0, t1, t2], "double barrier member")
        expect_eq(errors, [], "member errors")
        expect_eq(sorted(i for i, _ in entered), ["m0", "m1", "m2"], "entered")
        expect_eq(sorted(left), ["m0", "m1", "m2"], "left")
        expect_eq(zk.get_children(p) if zk.exists(p) else [], [], "barrier nodes left behind")


@check
def counter(zk):
    p = BASE + "/counter"
    c = zk.Counter(p)
    expect_eq(c.value, 0, "initial value")
    c += 5
    c -= 2
    expect_eq(c.value, 3, "value")
    expect_eq((c.pre_value, c.post_value), (5, 3), "pre/post value")
    expect_eq(zk.get(p)[0], b"3", "stored representation")
    others = [new_client() for _ in range(3)]
    errors = []

    def bump(client):
        try:
            ctr = client.Counter(p)
            for _ in range(10):
                ctr += 1
        except Exception as e:  # noqa: BLE001
            errors.append("%s: %s" % (type(e).__name__, e))

    try:
        join_all([start_thread(bump, o) for o in others], "counter")
        expect_eq(errors, [], "errors")
        expect_eq(c.value, 33, "value after 30 concurrent increments")
    finally:
        for o in others:
            stop_client(o)
    cc = zk.Counter(BASE + "/curator-counter", support_curator=True)
    cc += 7
    expect_eq(zk.get(BASE + "/curator-counter")[0], struct.pack(">i", 7), "curator-compatible encoding")


@check
def party(zk):
    p = BASE + "/party"
    with started_clients(2) as (a, b):
        pa, pb = a.Party(p, "alice"), b.Party(p, "bob")
        pa.join()
        pb.join()
        expect_eq(len(zk.Party(p)), 2, "party size")
        expect_eq(sorted(zk.Party(p)), ["alice", "bob"], "members")
        pb.leave()
        expect_eq(list(zk.Party(p)), ["alice"], "members after leave")
        sa, sb = a.ShallowParty(p + "-shallow", "carol"), b.ShallowParty(p + "-shallow", "dave")
        sa.join()
        sb.join()
        expect_eq(sorted(zk.ShallowParty(p + "-shallow")), ["carol", "dave"], "shallow party members")
        stop_client(b)
        expect_eq(list(zk.ShallowParty(p + "-shallow")), ["carol"], "member gone with its session")


@check
def queue(zk):
    p = BASE + "/queue"
    q = zk.Queue(p)
    expect_eq(q.get(), None, "get on empty queue")
    q.put(b"one")
    q.put(b"two")
    q.put(b"urgent", priority=10)
    expect_eq(len(q), 3, "length")
    other = new_client()
    try:
        oq = other.Queue(p)
        expect_eq([oq.get(), oq.get(), oq.get(), oq.get()], [b"urgent", b"one", b"two", None], "order")
    finally:
        stop_client(other)


@check
def locking_queue(zk):
    p = BASE + "/lqueue"
    q = zk.LockingQueue(p)
    q.put(b"first")
    q.put_all([b"second", b"third"])
    expect_eq(len(q), 3, "length")
    other = new_client()
    try:
        oq = other.LockingQueue(p)
        expect_eq(oq.get(timeout=WAIT), b"first", "first item")
        expect(oq.holds_lock(), "consumer holds the item lock")
        # a second consumer skips the locked item
        expect_eq(q.get(timeout=WAIT), b"second", "second consumer gets the next item")
        expect_eq(oq.consume(), True, "consume")
        expect_eq(q.consume(), True, "consume second")
        expect_eq(len(q), 1, "length after consuming")
        expect_eq(q.get(timeout=WAIT), b"third", "third item")
        expect_eq(q.release(), True, "release puts it back")
        expect_eq(oq.get(timeout=WAIT), b"third", "released item is available again")
        expect_eq(oq.consume(), True, "consume third")
        expect_eq(oq.get(timeout=0.3), None, "get on empty queue times out")
    finally:
        stop_client(other)


@check
def data_watch(zk):
    p = BASE + "/dw"
    seen = []

    zk.create(p, b"v1")

    @zk.DataWatch(p)
    def changed(data, stat, event=None):
        seen.append((data, stat.version if stat else None, event.type if event else None))

    wait_until(lambda: len(seen) >= 1, "initial call")
    expect_eq(seen[0], (b"v1", 0, None), "initial call")
    zk.set(p, b"v2")
    wait_until(lambda: len(seen) >= 2, "call after set")
    expect_eq(seen[1], (b"v2", 1, EventType.CHANGED), "call after set")
    zk.delete(p)
    wait_until(lambda: len(seen) >= 3, "call after delete")
    expect_eq(seen[2], (None, None, EventType.DELETED), "call after delete")
    zk.create(p, b"v3")
    wait_until(lambda: len(seen) >= 4, "call after re-create")
    expect_eq(seen[3], (b"v3", 0, EventType.CREATED), "call after re-create")


@check
def children_watch(zk):
    p = BASE + "/cw"
    zk.create(p)
    seen = []

    @zk.ChildrenWatch(p)
    def changed(children):
        seen.append(sorted(children))

    wait_until(lambda: len(seen) >= 1, "initial call")
    zk.create(p + "/a")
    wait_until(lambda: seen[-1] == ["a"], "['a']")
    zk.create(p + "/b")
    wait_until(lambda: seen[-1] == ["a", "b"], "['a', 'b']")
    zk.delete(p + "/a")
    wait_until(lambda: seen[-1] == ["b"], "['b']")
    expect_eq(seen[0], [], "initial children")


@check
def tree_cache(zk):
    p = BASE + "/tree"
    zk.create(p + "/pre", b"x", makepath=True)
    events = []
    cache = TreeCache(zk, p)
    cache.listen(lambda ev: events.append((ev.event_type, ev.event_data.path if ev.event_data else None)))
    cache.start()
    try:
        wait_until(lambda: (TreeEvent.INITIALIZED, None) in events, "INITIALIZED")
        expect((TreeEvent.NODE_ADDED, p + "/pre") in events, "initial NODE_ADDED for existing child")
        zk.create(p + "/new/deep", b"d", makepath=True)
        wait_until(lambda: (TreeEvent.NODE_ADDED, p + "/new/deep") in events, "NODE_ADDED deep")
        zk.set(p + "/pre", b"y")
        wait_until(lambda: (TreeEvent.NODE_UPDATED, p + "/pre") in events, "NODE_UPDATED")
        zk.delete(p + "/pre")
        wait_until(lambda: (TreeEvent.NODE_REMOVED, p + "/pre") in events, "NODE_REMOVED")
        expect_eq(cache.get_data(p + "/new/deep").data, b"d", "cached data")
        expect_eq(sorted(cache.get_children(p)), ["new"], "cached children")
    finally:
        cache.close()


# --- runner ------------------------------------------------------------------------------------


def main():
    global ADDR
    if len(sys.argv) != 2:
        print("usage: kazoo_suite.py HOST:PORT", file=sys.stderr)
        return 2
    ADDR = sys.argv[1]
    logging.basicConfig(level=logging.CRITICAL)
    overall = float(os.environ.get("KAZOO_SUITE_TIMEOUT", "240"))

    def watchdog():
        print("FAIL watchdog: suite did not finish within %.0fs" % overall, flush=True)
        passed = sum(1 for _, ok, _ in results if ok)
        print("%d passed, %d failed" % (passed, len(results) - passed + 1), flush=True)
        os._exit(2)

    timer = threading.Timer(overall, watchdog)
    timer.daemon = True
    timer.start()

    try:
        zk = new_client()
    except Exception as e:  # noqa: BLE001
        print("FAIL connect: %s: %s" % (type(e).__name__, e), flush=True)
        print("0 passed, 1 failed", flush=True)
        return 1
    zk.ensure_path(BASE)

    for fn in CHECKS:
        name = fn.__name__
        try:
            fn(zk)
        except CheckFailed as e:
            results.append((name, False, str(e)))
        except Exception as e:  # noqa: BLE001
            ours = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == __file__]
            where = " (at line %d)" % ours[-1].lineno if ours else ""
            results.append((name, False, "%s: %s%s" % (type(e).__name__, e, where)))
        else:
            results.append((name, True, ""))
        n, ok, reason = results[-1]
        print("PASS %s" % n if ok else "FAIL %s: %s" % (n, reason), flush=True)

    try:
        zk.delete(BASE, recursive=True)
    except Exception as e:  # noqa: BLE001
        print("cleanup of %s failed: %s" % (BASE, e), file=sys.stderr)
    for c in list(clients):
        stop_client(c)
    timer.cancel()
    passed = sum(1 for _, ok, _ in results if ok)
    failed = len(results) - passed
    print("%d passed, %d failed" % (passed, failed), flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
