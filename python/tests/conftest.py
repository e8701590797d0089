"""Shared helpers for the zkd package's own tests (the fixtures come from the installed
plugin, not from here)."""

import threading

import pytest


def wait_for(predicate, timeout=20.0, interval=0.02):
    """Polls ``predicate`` until it is true; False if it never was within ``timeout``."""
    done = threading.Event()
    deadline = timeout
    while deadline > 0:
        if predicate():
            return True
        done.wait(interval)
        deadline -= interval
    return predicate()


@pytest.fixture
def make_client(zkd_server):
    """Factory for extra kazoo clients on the session's server, all closed afterwards."""
    from kazoo.client import KazooClient

    clients = []

    def make(**kwargs):
        kwargs.setdefault("timeout", 10.0)
        c = KazooClient(hosts=zkd_server.hosts, **kwargs)
        c.start(timeout=15)
        clients.append(c)
        return c

    yield make
    for c in clients:
        try:
            c.stop()
        finally:
            c.close()


pytest_plugins = ["pytester"]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "findings: a test built to make the recipe checks report something")


@pytest.fixture(autouse=True)
def _recipe_checks_stay_quiet(request):
    """Every test of this suite but the ones built to trip them (marked ``findings``): the
    recipe checks find nothing in what the test did (its elections, locks and expiries are
    what correct recipes do)."""
    if "zkd_server" not in request.fixturenames or request.node.get_closest_marker("findings"):
        yield
        return
    server = request.getfixturevalue("zkd_server")
    mark = server.history_mark()
    yield
    found = server.history_checks(mark)
    assert found == [], "the recipe checks reported %r" % (found,)
