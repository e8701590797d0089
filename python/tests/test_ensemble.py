"""zkd.Server(ensemble=N): every member in ``hosts``, members stopped, started and lagging
through the control plane, kazoo failing over with its session."""

import time

import pytest
from kazoo.client import KazooClient, KazooState

import zkd
from conftest import wait_for


def _client(hosts, **kwargs):
    kwargs.setdefault("timeout", 10.0)
    c = KazooClient(hosts=hosts, **kwargs)
    c.start(timeout=15)
    return c


def _close(*clients):
    for c in clients:
        c.stop()
        c.close()


def _state(server, member_id):
    return next(m["state"] for m in server.members() if m["id"] == member_id)


def test_hosts_lists_every_member():
    with zkd.Server(ensemble=3) as server:
        members = server.members()
        assert [m["id"] for m in members] == [1, 2, 3]
        assert server.hosts.split(",") == [m["client_address"] for m in members]
        assert [server.member_hosts(i) for i in (1, 2, 3)] == server.hosts.split(",")
        assert len(set(server.hosts.split(","))) == 3
        assert server.leader() == 3, "equally up to date, the highest id leads"
        assert [m["state"] for m in members] == ["running"] * 3
        # each member serves the one tree
        one, three = _client(server.member_hosts(1)), _client(server.member_hosts(3))
        one.create("/shared", b"x")
        assert three.get("/shared")[0] == b"x"
        _close(one, three)
        with pytest.raises(ValueError):
            server.member_hosts(4)


def test_observers_serve_but_do_not_count_for_the_quorum():
    with zkd.Server(ensemble=4, observers=1) as server:
        modes = [(m["id"], m["mode"]) for m in server.members()]
        assert modes == [(1, "follower"), (2, "follower"), (3, "leader"), (4, "observer")]
        c = _client(server.member_hosts(4))
        try:
            c.create("/through-observer", b"o")
            # two of three voters stopped: no quorum, although half the members run
            server.stop_member(2)
            server.stop_member(3)
            assert server.leader() is None
            server.start_member(2)
            assert server.leader() == 2, "members 1 and 2 are a quorum again"
            server.start_member(3)
            assert wait_for(lambda: c.connected), "the observer's client reconnected"
            assert c.retry(c.get, "/through-observer")[0] == b"o"
        finally:
            _close(c)
    with pytest.raises(ValueError):
        zkd.Server(ensemble=2, observers=2)


def test_failover_across_a_member_stop_keeps_the_session():
    with zkd.Server(ensemble=3) as server:
        # without randomizing, kazoo connects to the first host: member 1
        client = _client(server.hosts, randomize_hosts=False)
        states = []
        client.add_listener(states.append)
        client.create("/workers/me", b"alive", ephemeral=True, makepath=True)
        session = client.client_id
        assert session[0] >> 56 == 1, "the session was not created through member 1"

        server.stop_member(1)
        assert _state(server, 1) == "stopped"
        assert server.leader() == 3, "a follower stopping leaves the leader alone"
        assert wait_for(lambda: KazooState.SUSPENDED in states), states
        assert wait_for(lambda: client.state == KazooState.CONNECTED), client.state
        assert client.client_id == session
        assert KazooState.LOST not in states
        assert client.get("/workers/me")[0] == b"alive"
        # nothing listens on the stopped member, so no client can reach it alone
        lone = KazooClient(hosts=server.member_hosts(1), timeout=10.0)
        with pytest.raises(Exception):
            lone.start(timeout=2)
        lone.stop()
        lone.close()

        server.start_member(1)
        assert _state(server, 1) == "running"
        back = _client(server.member_hosts(1))
        assert back.exists("/workers/me").ephemeralOwner == session[0]
        _close(back, client)


def test_lagging_member_serves_its_replica_until_in_step():
    with zkd.Server(ensemble=3) as server:
        writer, reader = _client(server.member_hosts(1)), _client(server.member_hosts(3))
        report = server.lag_member(3, stall=True)
        assert report["lag"] == "stall"
        writer.create("/news", b"1")
        assert reader.exists("/news") is None  # member 3 applies nothing while stalled
        server.lag_member(3, txns=0)
        assert wait_for(lambda: reader.exists("/news") is not None)
        assert server.lag_member(3, ms=250)["lag"] == "ms=250"
        server.lag_member(3, ms=0)
        _close(writer, reader)


def test_member_errors():
    with pytest.raises(ValueError):
        zkd.Server(ensemble=0)
    with zkd.Server() as standalone:
        with pytest.raises(zkd.AdminError) as e:
            standalone.members()
        assert e.value.status == 409
        assert standalone.hosts.count(",") == 0
    with zkd.Server(ensemble=3) as server:
        with pytest.raises(zkd.AdminError) as e:
            server.stop_member(9)
        assert e.value.status == 404
        server.stop_member(2)
        with pytest.raises(zkd.AdminError) as e:
            server.stop_member(2)
        assert e.value.status == 409
        with pytest.raises(ValueError):
            server.lag_member(2)
        with pytest.raises(ValueError):
            server.lag_member(2, ms=1, txns=1)


def test_the_fixture_wipe_restores_every_member():
    from zkd.pytest_plugin import _wipe

    with zkd.Server(ensemble=3) as server:
        client = _client(server.member_hosts(1))
        client.create("/left/over", makepath=True)
        client.stop()
        client.close()
        server.stop_member(2)
        server.lag_member(3, stall=True)
        _wipe(server)
        assert [(m["state"], m["lag"]) for m in server.members()] == [("running", "lockstep")] * 3
        check = _client(server.member_hosts(3))
        assert check.get_children("/") == ["zookeeper"]
        _close(check)


def test_blackholed_connection_moves_to_another_member():
    with zkd.Server(ensemble=3) as server:
        states = []
        c = _client(server.hosts, timeout=4.0, randomize_hosts=False)
        c.add_listener(states.append)
        node = c.create("/held", b"", ephemeral=True)
        sid = c.client_id[0]
        fault = server.add_net_fault("blackhole", session=sid)
        assert fault["connections"] == 1 and fault["action"] == "blackhole"
        assert wait_for(lambda: KazooState.SUSPENDED in states, timeout=10)
        assert wait_for(lambda: states[-1] == KazooState.CONNECTED, timeout=10)
        assert c.client_id[0] == sid and c.exists(node) is not None
        assert server.net_faults()[0]["connections"] == 0
        with pytest.raises(zkd.AdminError) as err:
            server.add_net_fault("latency")
        assert err.value.status == 400
        with pytest.raises(zkd.AdminError) as err:
            server.remove_net_fault(99)
        assert err.value.status == 404
        server.add_net_fault("latency", ms=1, member=2)
        assert server.clear_net_faults() == 2
        assert server.net_faults() == []
        _close(c)


def test_a_partition_cuts_the_leader_off_and_heal_brings_it_back():
    with zkd.Server(ensemble=3) as server:
        client = _client(server.member_hosts(1))
        try:
            client.create("/split", b"before")
            assert server.leader() == 3
            listing = server.partition([3], [1, 2])
            assert listing["leader"] == 2, "the majority elects one of its own"
            assert [m["cut"] for m in listing["members"]] == [False, False, True]
            client.set("/split", b"after")
            # the cut member serves a read-only client what it had
            ro = KazooClient(hosts=server.member_hosts(3), read_only=True, timeout=10.0)
            ro.start(timeout=10)
            try:
                assert ro.get("/split")[0] == b"before"
            finally:
                _close(ro)
            healed = server.heal()
            assert not any(m["cut"] for m in healed["members"])
            back = _client(server.member_hosts(3))
            try:
                assert back.retry(back.get, "/split")[0] == b"after"
            finally:
                _close(back)
        finally:
            _close(client)


def test_one_way_cuts_on_zookeepers_timing_lose_a_follower_after_sync_limit():
    # tickTime 100 ms and the default syncLimit of 5: member 1, which no longer hears
    # leader 3, notices after half a second and looks for a leader, cut off.
    with zkd.Server(ensemble=3, tick_time=100, election_timing="zookeeper") as server:
        listing = server.partition(one_way=[(3, 1)])
        assert listing["cut_links"] == [[3, 1]]
        assert listing["election_timing"] == "zookeeper"
        assert listing["members"][0]["mode"] == "follower", "nobody noticed yet"
        deadline = time.monotonic() + 10
        while server.members()[0]["mode"] == "follower":
            assert time.monotonic() < deadline, "member 1 never noticed"
            time.sleep(0.02)
        assert server.leader() == 3, "3 and 2 keep the quorum"
        assert server.members()[0]["cut"]
        assert server.heal()["cut_links"] == []
    with pytest.raises(ValueError):
        zkd.Server(election_timing="zookeeper")
