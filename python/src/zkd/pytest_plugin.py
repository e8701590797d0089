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
default: 3.9); ``--zkd-history-dir DIR`` where a failed test's history goes.

When a test that used ``zkd_server`` fails, what the server recorded while the test ran (its
history: every connection, request, notification and expiry, see docs/history.md) is saved
as ``<test>.history.jsonl`` and as a self-contained timeline ``<test>.history.html``, next to
the JUnit XML report when there is one (``--junitxml``), else under ``zkd-history/`` in the
rootdir; the failure's output names both files and lists what the recipe checks found.
"""

import os
import re

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
    group.addoption(
        "--zkd-history-dir",
        default=None,
        help="where a failed test's zkd history is saved (default: next to --junitxml, "
        "else <rootdir>/zkd-history)",
    )


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, "_zkd_report_" + report.when, report)


def _history_dir(config):
    chosen = config.getoption("--zkd-history-dir")
    if chosen:
        return chosen
    xml = getattr(config.option, "xmlpath", None)
    if xml:
        return os.path.dirname(os.path.abspath(xml))
    return os.path.join(str(config.rootpath), "zkd-history")


def _history_mark(server):
    """Where the test's window of the history starts: the last event recorded before it."""
    try:
        summary = server.history_summary()
    except Exception:  # a server without a history: nothing to attach
        return None
    if not summary.get("enabled"):
        return None
    return summary.get("last_seq") or 0


def _attach_history(item, server, mark):
    report = getattr(item, "_zkd_report_call", None)
    if mark is None or report is None or not report.failed:
        return
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid).strip("_")[-150:]
    try:
        jsonl, html, findings = server.save_history(_history_dir(item.config), name, mark)
    except Exception as e:  # the test's own failure stays the one reported
        report.sections.append(("zkd history", "could not save the history: %s" % e))
        return
    lines = ["history of this test (JSON Lines): %s" % jsonl, "timeline: %s" % html]
    if findings:
        lines.append("recipe checks found:")
        lines.extend("  %s: %s" % (f["check"], f["summary"]) for f in findings)
    else:
        lines.append("recipe checks found nothing")
    report.sections.append(("zkd history", "\n".join(lines)))


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
def zkd_server(request, _zkd_session_server):
    """The session's zkd server, wiped after the test; its history of the test is saved when
    the test fails."""
    if not _zkd_session_server.running:
        pytest.fail("the session's zkd server is no longer running:\n"
                    + _zkd_session_server.output())
    mark = _history_mark(_zkd_session_server)
    yield _zkd_session_server
    if _zkd_session_server.running:
        _attach_history(request.node, _zkd_session_server, mark)
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
