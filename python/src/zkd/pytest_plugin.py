"""The pytest plugin (entry point ``zkd``): one zkd server per test session, wiped between
tests, and a connected kazoo client per test.

Fixtures:

* ``zkd_server``: the session's :class:`zkd.Server`. After each test that used it, fault
  rules are removed, a pause is ended, an ensemble's members are all started and in step,
  every session is expired and every node but ``/`` and ``/zookeeper`` is deleted, so tests
  do not see each other's data.
* ``zkd_client``: a started ``kazoo.client.KazooClient`` connected to ``zkd_server``,
  stopped and closed after the test (needs kazoo installed).
* ``zkd_server_options``: keyword arguments for :class:`zkd.Server`; override it in a
  ``conftest.py`` (session scope) to pass e.g. ``{"clock": "manual"}``, ``{"ensemble": 3}``
  or extra ``args``.

Options: ``--zkd-binary PATH`` (or ``$ZKD_BINARY``) picks the binary;
``--zkd-zookeeper-version 3.8|3.9`` the ZooKeeper release line the server behaves as (zkd's
default: 3.9).
"""

import pytest

from ._server import AdminError, Server


def pytest_addoption(parser):
    group = parser.getgroup("zkd")
    group.addoption(
        "--zkd-binary",
        default=None,
        help="path of the zkd binary (default: $ZKD_BINARY, the installed one, then PATH)",
    )
    group.addoption(
        "--zkd-zookeeper-version",
        default=None,
        choices=("3.8", "3.9"),
        help="the ZooKeeper release line the zkd server behaves as (default: zkd's, 3.9)",
    )


@pytest.fixture(scope="session")
def zkd_server_options():
    """Keyword arguments for the session's :class:`zkd.Server`. Override to customise."""
    return {}


@pytest.fixture(scope="session")
def _zkd_session_server(request, zkd_server_options):
    options = dict(zkd_server_options)
    binary = request.config.getoption("--zkd-binary")
    if binary and "binary" not in options:
        options["binary"] = binary
    version = request.config.getoption("--zkd-zookeeper-version")
    if version and "zookeeper_version" not in options:
        options["zookeeper_version"] = version
    server = Server(**options)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _wipe(server):
    server.clear_faults()
    server.clear_net_faults()
    try:
        server.resume()
    except AdminError as e:
        if e.status != 409:  # 409: it was not paused
            raise
    if server.ensemble is not None:
        # every member running and in step again
        for member in server.members():
            if member["lag"] != "lockstep":
                server.lag_member(member["id"], ms=0)
            if member["state"] == "stopped":
                server.start_member(member["id"])
    server.reset(expire_sessions=True)


@pytest.fixture
def zkd_server(_zkd_session_server):
    """The session's zkd server, wiped after the test."""
    if not _zkd_session_server.running:
        pytest.fail("the session's zkd server is no longer running:\n"
                    + _zkd_session_server.output())
    yield _zkd_session_server
    if _zkd_session_server.running:
        _wipe(_zkd_session_server)


@pytest.fixture
def zkd_client(zkd_server):
    """A started kazoo client connected to ``zkd_server``; stopped and closed afterwards."""
    try:
        from kazoo.client import KazooClient
    except ImportError:
        pytest.fail("the zkd_client fixture needs kazoo: pip install kazoo")
    client = KazooClient(hosts=zkd_server.hosts, timeout=10.0)
    client.start(timeout=15)
    try:
        yield client
    finally:
        try:
            client.stop()
        finally:
            client.close()
