"""kazoo recipes through the plugin's fixtures: election with expiry, lock, reset isolation."""

import os
import sys
import threading

from kazoo.client import KazooState
from kazoo.exceptions import KazooException
from kazoo.protocol.states import EventType

import zkd
from conftest import wait_for


def test_binary_comes_from_the_wheel():
    # In CI the package is installed from the wheel into a fresh venv with no ZKD_BINARY:
    # the binary found must be the one the wheel put into this environment.
    if os.environ.get("ZKD_BINARY"):
        return
    found = zkd.find_binary()
    assert os.path.dirname(found) == os.path.dirname(sys.executable), found


def test_client_fixture_is_connected(zkd_client, zkd_server):
    assert zkd_client.connected
    assert zkd_client.state == KazooState.CONNECTED
    sid = zkd.session_hex(zkd_client.client_id[0])
    assert sid in [s["id"] for s in zkd_server.sessions()]


def test_election_leader_expiry_hands_over(zkd_server, zkd_client, make_client):
    other = make_client()
    leader_now = []
    changed = threading.Condition()
    stop = threading.Event()
    states = []
    zkd_client.add_listener(states.append)

    def run(election, name):
        try:
            election.run(lead, name)
        except KazooException:
            pass  # the expired leader cannot release its node: expected

    def lead(name):
        with changed:
            leader_now.append(name)
            changed.notify_all()
        stop.wait(30)

    first = zkd_client.Election("/election", "first")
    t1 = threading.Thread(target=run, args=(first, "first"), daemon=True)
    t1.start()
    assert wait_for(lambda: leader_now == ["first"])
    second = other.Election("/election", "second")
    t2 = threading.Thread(target=run, args=(second, "second"), daemon=True)
    t2.start()
    assert wait_for(lambda: len(other.get_children("/election")) == 2)
    assert leader_now == ["first"]

    zkd_server.expire_session(zkd_client.client_id[0])

    assert wait_for(lambda: leader_now == ["first", "second"]), leader_now
    assert wait_for(lambda: KazooState.LOST in states), states
    assert [c for c in other.get_children("/election")] and len(other.get_children("/election")) == 1
    stop.set()
    t1.join(10)
    t2.join(10)


def test_lock_is_exclusive_and_freed_by_expiry(zkd_server, zkd_client, make_client):
    other = make_client()
    mine = zkd_client.Lock("/locks/resource", "mine")
    theirs = other.Lock("/locks/resource", "theirs")
    assert mine.acquire(timeout=10)
    assert not theirs.acquire(blocking=False)
    assert other.Lock("/locks/resource").contenders() == ["mine"]

    got = threading.Event()

    def wait_lock():
        if theirs.acquire(timeout=30):
            got.set()

    t = threading.Thread(target=wait_lock, daemon=True)
    t.start()
    zkd_server.expire_session(zkd_client.client_id[0])
    assert got.wait(30), "the waiter did not get the lock after the holder's session expired"
    t.join(10)
    theirs.release()


def test_reset_isolation_writes(zkd_client):
    zkd_client.create("/isolation/data", b"from an earlier test", makepath=True)
    zkd_client.create("/isolation/ephemeral", ephemeral=True)
    assert zkd_client.exists("/isolation/data")


def test_reset_isolation_sees_a_clean_tree(zkd_client, zkd_server):
    # Runs after the test above (pytest keeps file order): nothing of it is left.
    assert zkd_client.exists("/isolation") is None
    assert sorted(zkd_client.get_children("/")) == ["zookeeper"]
    assert zkd_server.faults() == []


def test_reset_fires_watches(zkd_server, zkd_client):
    zkd_client.create("/watched", b"x")
    events = []
    zkd_client.exists("/watched", watch=events.append)
    assert zkd_server.reset() == 1
    assert wait_for(lambda: events)
    assert events[0].type == EventType.DELETED
