"""Runs the members of kazoo's test cluster as one shared zkd simulated ensemble.

kazoo's harness (kazoo.testing ZookeeperCluster) starts one `java ... QuorumPeerMain zoo.cfg`
per member, each zoo.cfg naming its own clientPort and every member in `server.N` lines, and
stops a member with terminate(). kazoo_harness_java.py hands such a member here:

- the first member started runs one `zkd --config --admin-port 0` for the whole cluster (kept in
  a state directory under the working directory, keyed by the cluster's `server.N` lines, under
  a file lock), then stops through the control plane every member but its own;
- a later member asks that zkd to start it (`POST /zkd/members/{id}/start`);
- on SIGTERM a member is stopped the same way (`/stop`); the last one out ends zkd.

The `server.N` lines carry no client ports; kazoo's harness gives member N the client port
just below its election port, which is what the zkd configuration then names.
"""

import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request


def member_lines(entries):
    """The zkd `server.N` lines: kazoo's, with each member's client port added."""
    lines = []
    for key, value in entries:
        if key.startswith("server."):
            host, _quorum, election = value.split(":")[:3]
            lines.append((key, "%s;127.0.0.1:%d" % (value, int(election) - 1)))
    return lines


def post(admin, path):
    request = urllib.request.Request("http://%s%s" % (admin, path), method="POST")
    try:
        urllib.request.urlopen(request, timeout=30).read()
    except urllib.error.HTTPError as e:
        if e.code != 409:  # already in that state
            raise


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


class Shared:
    """The cluster's zkd and which members the harness holds running, under a file lock."""

    def __init__(self, servers):
        key = hashlib.sha1(repr(sorted(servers)).encode()).hexdigest()[:12]
        self.dir = os.path.join(os.getcwd(), "zkd-ensemble-" + key)
        os.makedirs(self.dir, exist_ok=True)
        self.path = os.path.join(self.dir, "state.json")

    def __enter__(self):
        self.lock = open(os.path.join(self.dir, "lock"), "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        state = None
        if os.path.exists(self.path):
            with open(self.path) as f:
                state = json.load(f)
            if not alive(state["pid"]):
                state = None
        self.state = state
        return self

    def save(self):
        if self.state is None:
            if os.path.exists(self.path):
                os.remove(self.path)
            return
        with open(self.path, "w") as f:
            json.dump(self.state, f)

    def __exit__(self, *exc):
        self.save()
        self.lock.close()


def start_zkd(directory, command, member_count):
    """Starts zkd in its own session; returns its pid and admin address."""
    out_path = os.path.join(directory, "zkd.out")
    with open(out_path, "w") as out, open(os.path.join(directory, "zkd.err"), "w") as err:
        process = subprocess.Popen(
            command + ["--admin-port", "0"],
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(out_path) as f:
            lines = f.read().splitlines()
        admin = [l.split()[-1] for l in lines if l.startswith("zkd admin on ")]
        listening = [l for l in lines if l.startswith("zkd listening on ")]
        if admin and len(listening) == member_count:
            return process.pid, admin[0]
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    with open(os.path.join(directory, "zkd.err")) as f:
        sys.stderr.write(f.read())
    sys.exit("kazoo_harness_ensemble: zkd did not come up")


def run_member(my_id, servers, command):
    """Runs member `my_id` of the shared ensemble until SIGTERM."""
    ids = [int(k.split(".", 1)[1]) for k, _ in servers]
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    with Shared(servers) as shared:
        if shared.state is None:
            pid, admin = start_zkd(shared.dir, command, len(ids))
            shared.state = {"pid": pid, "admin": admin, "held": []}
            for other in ids:
                if other != my_id:
                    post(admin, "/zkd/members/%d/stop" % other)
        else:
            post(shared.state["admin"], "/zkd/members/%d/start" % my_id)
        shared.state["held"].append(my_id)

    while not stopping:
        signal.pause()

    with Shared(servers) as shared:
        state = shared.state
        if state is None:
            return
        state["held"] = [m for m in state["held"] if m != my_id]
        if state["held"]:
            post(state["admin"], "/zkd/members/%d/stop" % my_id)
        else:
            os.kill(state["pid"], signal.SIGTERM)
            while alive(state["pid"]):
                try:
                    os.waitpid(state["pid"], os.WNOHANG)
                except ChildProcessError:
                    pass
                time.sleep(0.05)
            shared.state = None
