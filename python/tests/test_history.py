"""The history through the Python helper: a session's life read back, a failed test leaving
its history and timeline next to its report, and the recipe checks finding a double lock
holder and a herd in tests built to have them."""

import json
import os
import re
import textwrap

import pytest
from kazoo.client import KazooClient

import zkd
from conftest import wait_for

# A worker process: a kazoo client whose node must outlive a stall. It prints its session id,
# then waits for a line on stdin and writes to its node.
WORKER = textwrap.dedent("""
    import sys
    from kazoo.client import KazooClient
    c = KazooClient(hosts=sys.argv[1], timeout=4.0)
    c.start(timeout=15)
    c.create("/worker", b"started", ephemeral=True)
    print("%x" % c.client_id[0], flush=True)
    sys.stdin.readline()
    try:
        c.set("/worker", b"finished")
    except Exception as e:
        print("worker failed: %r" % (e,), flush=True)
        sys.exit(1)
""")

FAILING_TEST = textwrap.dedent('''
    import os, signal, subprocess, sys, time

    WORKER = {worker!r}

    def test_worker_outlives_a_pause(zkd_server):
        worker = subprocess.Popen([sys.executable, "-c", WORKER, zkd_server.hosts],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        session = worker.stdout.readline().strip()
        print("worker session 0x" + session)
        # The worker stalls (as on a loaded machine) while the test sleeps longer than its
        # 4 s session timeout: its session expires and its next write fails.
        os.kill(worker.pid, signal.SIGSTOP)
        time.sleep(7)
        os.kill(worker.pid, signal.SIGCONT)
        out, _ = worker.communicate("go\\n", timeout=60)
        assert worker.returncode == 0, out
''')


def test_history_shows_a_session_life(zkd_server, zkd_client):
    zkd_client.create("/h/node", b"12345", makepath=True)
    zkd_client.get("/h/node", watch=lambda e: None)
    sid = zkd.session_hex(zkd_client.client_id[0])
    events = zkd_server.history(session=sid)
    kinds = [e["kind"] for e in events]
    assert "handshake" in kinds and "session_created" in kinds, kinds
    writes = [e for e in events
              if e["kind"] == "request" and e.get("op") == "create" and e["err"] == 0]
    assert [w["path"] for w in writes] == ["/h", "/h/node"], writes
    assert writes[1]["data_bytes"] == 5 and writes[1]["err"] == 0
    assert any(e["kind"] == "watch_set" and e["path"] == "/h/node" for e in events), events
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    assert "12345" not in zkd_server.history_jsonl()


def test_a_failed_test_leaves_its_history_next_to_its_report(pytester, request):
    pytester.makepyfile(test_inner=FAILING_TEST.format(worker=WORKER))
    out_dir = pytester.path / "reports"
    # Installed, the plugin loads by its entry point; from a source tree it was named with -p.
    plugin = [] if request.config.pluginmanager.has_plugin("zkd") else ["-p", "zkd.pytest_plugin"]
    result = pytester.runpytest_subprocess(
        *plugin, "-p", "no:cacheprovider", "--junitxml", str(out_dir / "junit.xml"), timeout=240)
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    jsonl = out_dir / "test_inner.py_test_worker_outlives_a_pause.history.jsonl"
    html = out_dir / "test_inner.py_test_worker_outlives_a_pause.history.html"
    assert "history of this test (JSON Lines): %s" % jsonl in text, text
    assert "timeline: %s" % html in text, text
    assert "recipe checks found" in text, text
    session = re.search(r"worker session (0x[0-9a-f]+)", text).group(1)
    events = [json.loads(line) for line in jsonl.read_text().splitlines()]
    expired = [e for e in events if e["kind"] == "session_expired" and e["session"] == session]
    assert len(expired) == 1 and expired[0]["why"] == "timeout", events
    assert expired[0]["ephemerals"] == ["/worker"]
    # the worker came back to its expired session, was told so, and went on on a new one
    back = [e for e in events if e["kind"] == "handshake" and e.get("session_asked") == session]
    assert back and back[0]["outcome"] == "expired" and back[0]["seq"] > expired[0]["seq"], back
    page = html.read_text()
    assert page.startswith("<!doctype html>") and 'id="zkd-history"' in page
    assert os.path.getsize(html) > os.path.getsize(jsonl)


@pytest.mark.findings
def test_checks_find_two_holders_of_one_lock(zkd_server, make_client):
    holder, waiter, cleaner = make_client(), make_client(), make_client()
    mark = zkd_server.history_mark()
    mine = holder.create("/lock/n-", ephemeral=True, sequence=True, makepath=True)
    assert sorted(holder.get_children("/lock"))[0] == mine.rsplit("/", 1)[1]  # the lock is held
    theirs = waiter.create("/lock/n-", ephemeral=True, sequence=True)
    assert waiter.get_children("/lock")
    gone = []
    waiter.exists(mine, watch=gone.append)
    # Someone else deletes the holder's node (a clean-up job, an operator): the holder is
    # not told, the waiter sees the lock free and takes it.
    cleaner.delete(mine)
    assert wait_for(lambda: gone)
    assert sorted(waiter.get_children("/lock"))[0] == theirs.rsplit("/", 1)[1]
    every = zkd_server.history_checks(mark)
    found = [f for f in every if f["check"] == "double_holder"]
    assert len(found) == 1, every
    assert found[0]["summary"].startswith("sessions %s and %s both held the lock /lock" % (
        zkd.session_hex(holder.client_id[0]), zkd.session_hex(waiter.client_id[0]))), found


@pytest.mark.findings
def test_checks_find_a_herd(zkd_server, make_client):
    writer = make_client()
    writer.create("/herd", b"")
    listings = []
    # Every watcher lists all the children again on each change: kazoo's ChildrenWatch.
    for _ in range(4):
        make_client().ChildrenWatch("/herd", lambda children: listings.append(len(children)))
    assert wait_for(lambda: len(listings) == 4)
    mark = zkd_server.history_mark()
    for i in range(3):
        writer.create("/herd/n-%d" % i)
        assert wait_for(lambda: len(listings) == 4 * (i + 2)), listings
    found = [f for f in zkd_server.history_checks(mark) if f["check"] == "herd"]
    assert len(found) == 1, found
    assert found[0]["summary"].startswith("4 sessions re-read all children of /herd"), found
