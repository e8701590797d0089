"""zkd.Server on its own: life cycle and every control-plane method, against the real binary."""

import datetime
import os
import threading

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError

import zkd
from conftest import wait_for


def _client(server, **kwargs):
    kwargs.setdefault("timeout", 10.0)
    c = KazooClient(hosts=server.hosts, **kwargs)
    c.start(timeout=15)
    return c


def _close(c):
    c.stop()
    c.close()


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_context_manager_starts_and_reaps():
    with zkd.Server() as server:
        pid = server.pid
        host, port = server.hosts.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        assert server.admin_url.startswith("http://127.0.0.1:")
        c = _client(server)
        c.create("/hello", b"world")
        assert c.get("/hello")[0] == b"world"
        _close(c)
    assert not server.running
    assert _gone(pid)


def test_stopped_and_reaped_when_the_body_fails():
    pid = None
    with pytest.raises(RuntimeError, match="test body failed"):
        with zkd.Server() as server:
            pid = server.pid
            raise RuntimeError("test body failed")
    assert server.process is None
    assert _gone(pid)


def test_bad_flag_is_reported_with_output():
    with pytest.raises(zkd.ServerError, match="exited with code 2"):
        zkd.Server(args=["--no-such-flag"]).start()


def test_missing_binary_is_a_clear_error(tmp_path):
    with pytest.raises(zkd.BinaryNotFound):
        zkd.Server(binary=str(tmp_path / "nothing-here"))


def test_sessions_expire_and_disconnect():
    with zkd.Server() as server:
        c = _client(server)
        states = []
        c.add_listener(states.append)
        sid = c.client_id[0]
        ids = [s["id"] for s in server.sessions()]
        assert zkd.session_hex(sid) in ids

        server.disconnect(sid)
        assert wait_for(lambda: KazooState.SUSPENDED in states)
        assert wait_for(lambda: c.state == KazooState.CONNECTED and states[-1] == KazooState.CONNECTED)
        assert c.client_id[0] == sid  # same session after the reconnect

        server.expire_session(sid)
        assert wait_for(lambda: KazooState.LOST in states)

        with pytest.raises(zkd.AdminError) as err:
            server.expire_session(0x1234)
        assert err.value.status == 404
        _close(c)


def test_pause_and_resume():
    with zkd.Server() as server:
        c = _client(server)
        c.create("/p", b"1")
        server.pause()
        pending = c.get_async("/p")
        # Nothing is answered while paused (a short, one-sided wait: never flaky).
        assert not pending.wait(0.3)
        server.resume()
        assert pending.get(timeout=20)[0] == b"1"
        with pytest.raises(zkd.AdminError) as err:
            server.resume()
        assert err.value.status == 409
        server.pause(ms=datetime.timedelta(milliseconds=200))
        assert c.get("/p")[0] == b"1"  # answered once the timed pause ends
        _close(c)


def test_faults():
    with zkd.Server() as server:
        c = _client(server)
        c.create("/f", b"x")
        rule = server.add_fault("error", code="NONODE", opcode="getData", path="/f", count=1)
        assert rule["id"] >= 1
        assert [f["id"] for f in server.faults()] == [rule["id"]]
        with pytest.raises(NoNodeError):
            c.get("/f")
        assert c.get("/f")[0] == b"x"  # fired once
        assert server.faults()[0]["fired"] == 1
        server.add_fault("error", code=-101, opcode="exists")
        assert server.clear_faults() == 2
        assert server.faults() == []
        with pytest.raises(zkd.AdminError) as err:
            server.add_fault("explode")
        assert err.value.status == 400
        _close(c)


def test_reset_keeps_or_expires_sessions():
    with zkd.Server() as server:
        c = _client(server)
        states = []
        c.add_listener(states.append)
        c.create("/a/b/c", makepath=True)
        assert server.reset() == 3
        assert c.get_children("/") == ["zookeeper"]
        assert c.state == KazooState.CONNECTED
        server.reset(expire_sessions=True)
        assert wait_for(lambda: KazooState.LOST in states)
        _close(c)


def test_manual_clock_drives_expiry():
    with zkd.Server(clock="manual") as server:
        assert server.clock()["mode"] == "manual"
        c = _client(server, timeout=10.0)
        states = []
        c.add_listener(states.append)
        c.create("/mine", ephemeral=True)
        before = server.clock()["elapsed_ms"]
        server.advance_clock(datetime.timedelta(seconds=1))
        assert server.clock()["elapsed_ms"] - before == 1000
        # Time does not pass by itself: the session is still there.
        assert len(server.sessions()) == 1
        assert c.exists("/mine")
        server.advance_clock(60_000)
        assert wait_for(lambda: KazooState.LOST in states)
        assert server.sessions() == []
        observer = _client(server)
        assert observer.exists("/mine") is None
        _close(observer)
        _close(c)


def test_advance_clock_needs_the_manual_clock():
    with zkd.Server() as server:
        with pytest.raises(zkd.AdminError) as err:
            server.advance_clock(10)
        assert err.value.status == 409


def _srvr(server):
    import socket

    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(b"srvr")
        out = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return out.decode()
            out += chunk


def test_zookeeper_version_picks_the_release():
    for version in ("3.8", "3.9"):
        with zkd.Server(zookeeper_version=version, args=["--4lw-whitelist", "*"]) as zk:
            assert _srvr(zk).startswith("Zookeeper version: %s." % version)
            client = KazooClient(hosts=zk.hosts, timeout=10.0)
            client.start()
            try:
                assert client.server_version()[:2] == tuple(int(p) for p in version.split("."))
            finally:
                client.stop()
                client.close()
    with pytest.raises(ValueError):
        zkd.Server(zookeeper_version="3.7")
