#!/usr/bin/env python3
"""kazoo across a partition of a three-member ensemble: three contenders run kazoo's Election,
each a client that starts on its own member and gives leadership up as soon as its
connection is suspended; the member the leader's client is on is cut off from the other two
(POST CONTROL_URL/zkd/partition?groups=ID), then the ensemble heals (POST
CONTROL_URL/zkd/heal). Whatever the timing, at most one contender leads at any moment, a
contender leads again after the cut and after the heal, and every contender's session
survives. Then a lock holder on a member that is cut off loses its connection (and with it,
as a lock holder must assume, the lock) while a contender on the other side takes the lock
only once the holder's session is gone or it has let go.

    usage: kazoo_partition.py HOST:PORT,HOST:PORT,HOST:PORT CONTROL_URL

CONTROL_URL is zkd's admin listener or the test kit's endpoint over ZooKeeper servers in
network namespaces. Prints `PASS name` / `FAIL name: reason` per check and
`N passed, M failed`; exits 1 if anything failed.
"""

import sys
import threading
import time
import urllib.request

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

import kazoo_ensemble as ens
from kazoo_suite import expect, wait_until

RETRY = {"max_tries": -1, "delay": 0.1, "max_delay": 1.0}
# Long enough that a client moving off a cut-off member keeps its session on ZooKeeper,
# whose cut member notices only after syncLimit x tickTime.
SESSION_TIMEOUT = 8.0


def control(path):
    req = urllib.request.Request("%s%s" % (ens.CONTROL, path), method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        expect(r.status == 200, "POST %s answered %d" % (path, r.status))


def client(first):
    """A started client that tries member `first` first, then the others in id order."""
    order = [first] + [m for m in range(1, len(ens.MEMBERS) + 1) if m != first]
    hosts = ",".join(ens.MEMBERS[m - 1] for m in order)
    c = KazooClient(hosts=hosts, timeout=SESSION_TIMEOUT, connection_retry=RETRY,
                    randomize_hosts=False)
    c.start(timeout=30)
    return c


class Contender:
    """A client running kazoo's Election in a loop; it leads from the moment its function
    runs until it returns, which it does once its connection is suspended (or at the end)."""

    def __init__(self, n, first, log, lock):
        self.n = n
        self.client = client(first)
        self.session = self.client.client_id[0]
        self.connected = threading.Event()
        self.connected.set()
        # Suspensions so far: a leader gives up once this moves, however soon it is back.
        self.suspensions = 0
        self.client.add_listener(self.on_state)
        self.log = log
        self.lock = lock
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def on_state(self, state):
        if state == KazooState.CONNECTED:
            self.connected.set()
        else:
            self.suspensions += 1
            self.connected.clear()

    def lead(self):
        seen = self.suspensions
        with self.lock:
            self.log.append(("start", self.n, time.monotonic()))
        while not self.stop.is_set() and self.connected.is_set() and self.suspensions == seen:
            time.sleep(0.02)
        with self.lock:
            self.log.append(("end", self.n, time.monotonic()))

    def run(self):
        election = self.client.Election("/partition-election", "c%d" % self.n)
        while not self.stop.is_set():
            try:
                self.connected.wait(1.0)
                if self.connected.is_set():
                    election.run(self.lead)
            except Exception:  # noqa: BLE001 - connection trouble: try again
                time.sleep(0.1)


def on_member(c):
    """The member a client is connected to, or None while it is not."""
    try:
        return ens.member_of(c)
    except Exception:  # noqa: BLE001 - no socket while it reconnects
        return None


def leading(log):
    """The contenders leading at the end of `log`."""
    now = set()
    for kind, n, _ in log:
        if kind == "start":
            now.add(n)
        else:
            now.discard(n)
    return now


def overlaps(log):
    """Moments at which two contenders led, from the start and end records."""
    now = set()
    bad = []
    for kind, n, t in sorted(log, key=lambda e: (e[2], e[0] == "start")):
        if kind == "start":
            if now:
                bad.append("c%d started leading at %.3f while %s led" % (n, t, sorted(now)))
            now.add(n)
        else:
            now.discard(n)
    return bad


def at_most_one_leader_across_a_split():
    log, lock = [], threading.Lock()
    contenders = [Contender(n, n, log, lock) for n in (1, 2, 3)]
    try:
        for c in contenders:
            c.thread.start()
        wait_until(lambda: len(leading(log)) == 1, "a leader among the contenders", timeout=30)
        first = next(iter(leading(log)))
        member = ens.member_of(contenders[first - 1].client)
        starts_before = sum(1 for e in log if e[0] == "start")
        control("/zkd/partition?groups=%d" % member)
        # The leader's member is cut off: its client is dropped sooner or later and moves;
        # someone leads on the majority's side.
        wait_until(lambda: sum(1 for e in log if e[0] == "start") > starts_before
                   and len(leading(log)) == 1
                   and all(on_member(contenders[n - 1].client) not in (None, member)
                           for n in leading(log)),
                   "a leader on the majority's side", timeout=60)
        control("/zkd/heal")
        time.sleep(2.0)
        wait_until(lambda: len(leading(log)) == 1, "a leader after the heal", timeout=60)
        bad = overlaps(log)
        expect(not bad, "; ".join(bad))
        for c in contenders:
            wait_until(c.connected.is_set, "contender %d connected" % c.n, timeout=30)
            expect(c.client.client_id[0] == c.session, "contender %d kept its session" % c.n)
    finally:
        for c in contenders:
            c.stop.set()
        for c in contenders:
            c.thread.join(10)
            c.client.stop()
            c.client.close()
        try:
            control("/zkd/heal")
        except Exception:  # noqa: BLE001 - already healed
            pass


def a_lock_holder_cut_off_loses_its_connection_first():
    holder = client(1)
    other = client(2)
    try:
        wait_until(lambda: on_member(holder) == 1, "the holder on member 1")
        suspended = threading.Event()
        holder.add_listener(lambda s: suspended.set() if s != KazooState.CONNECTED else None)
        lock = holder.Lock("/partition-lock", "holder")
        expect(lock.acquire(timeout=10), "the holder takes the lock")
        contender = other.Lock("/partition-lock", "other")
        got = []
        t = threading.Thread(target=lambda: got.append((contender.acquire(timeout=60),
                                                         time.monotonic())), daemon=True)
        t.start()
        control("/zkd/partition?groups=1")
        wait_until(suspended.is_set, "the holder's connection suspended", timeout=30)
        lost_at = time.monotonic()
        # The holder gives the lock up once it is back (or its session is gone).
        wait_until(lambda: holder.state == KazooState.CONNECTED, "the holder back", timeout=30)
        try:
            lock.release()
        except Exception:  # noqa: BLE001 - the session may have ended with its lock
            pass
        t.join(70)
        expect(got and got[0][0], "the other side takes the lock")
        expect(got[0][1] >= lost_at, "the lock changed hands only after the holder lost its connection")
    finally:
        try:
            control("/zkd/heal")
        except Exception:  # noqa: BLE001 - already healed
            pass
        for c in (holder, other):
            c.stop()
            c.close()


def main():
    return ens.suite_main(__doc__, 3, [
        ("kazoo_at_most_one_leader_across_a_split", at_most_one_leader_across_a_split),
        ("kazoo_a_lock_holder_cut_off_loses_its_connection_first",
         a_lock_holder_cut_off_loses_its_connection_first),
    ])


if __name__ == "__main__":
    sys.exit(main())
