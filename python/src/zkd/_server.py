"""`zkd.Server`: runs the zkd binary on free ports and drives its admin HTTP control plane."""

import atexit
import collections
import datetime
import json
import re
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref

from ._binary import find_binary

_LISTENING = re.compile(r"^zkd listening on (\S+):(\d+)\s*$")
_ADMIN = re.compile(r"^zkd admin on (\S+):(\d+)\s*$")

# Servers still running, stopped at interpreter exit if nobody stopped them.
_LIVE = weakref.WeakSet()


@atexit.register
def _stop_leftovers():
    for server in list(_LIVE):
        server.stop()


class ServerError(RuntimeError):
    """The zkd process could not be started, or died."""


class AdminError(RuntimeError):
    """The admin API refused a request. ``status`` is the HTTP status, ``message`` the
    server's sentence."""

    def __init__(self, status, message, method, path):
        super().__init__("%s %s: %s %s" % (method, path, status, message))
        self.status = status
        self.message = message


def session_hex(session_id):
    """A session id as ZooKeeper prints it (``0x`` and lower-case hex). Accepts an int (as
    kazoo's ``client.client_id[0]``, possibly negative) or a string."""
    if isinstance(session_id, str):
        return session_id
    return "0x%x" % (int(session_id) & 0xFFFFFFFFFFFFFFFF)


def _given(convert, value):
    """``convert(value)``, or None when ``value`` is None (a keyword left out)."""
    return None if value is None else convert(value)


def _rule_body(action, **fields):
    """The JSON body of a fault rule: its ``action`` and the ``fields`` that are not None."""
    body = {"action": action}
    body.update((k, v) for k, v in fields.items() if v is not None)
    return body


def _address(host, port):
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host
    return "%s:%d" % (host, port)


def _ms(value):
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    value = int(value)
    if value < 0:
        raise ValueError("a duration cannot be negative: %r" % value)
    return value


class Server:
    """A zkd server in a child process, on a free client port and a free admin port.

    Use it as a context manager (``with zkd.Server() as zk: ...``) or call :meth:`start`
    and :meth:`stop`. ``hosts`` is the connection string for any ZooKeeper client.

    :param binary: path of the zkd binary (default: ``$ZKD_BINARY``, the one installed with
        this package, then ``zkd`` on ``PATH``)
    :param clock: ``"real"`` or ``"manual"`` (session expiry and TTLs move only with
        :meth:`advance_clock`)
    :param tick_time: tick length in milliseconds (``--tick-time``)
    :param zookeeper_version: the ZooKeeper release line to behave as, ``"3.8"`` or ``"3.9"``
        (``--zookeeper-version``; zkd's default is 3.9)
    :param args: extra command-line flags for zkd
    :param startup_timeout: seconds to wait for the server to listen
    :param ensemble: run a simulated ensemble of this many members (``--ensemble N``), each
        on its own free client port; ``hosts`` then lists every member, and
        :meth:`members`, :meth:`stop_member`, :meth:`start_member` and :meth:`lag_member`
        drive them
    :param observers: with ``ensemble``, how many of its last members are observers
        (``--observers K``): they serve clients but do not vote, lead or count for the quorum
    :param election_timing: with ``ensemble``, ``"instant"`` (the default: partitions and a
        stopped leader take effect at once) or ``"zookeeper"`` (members notice a lost leader
        or quorum after ``syncLimit × tickTime`` and elect as ZooKeeper does;
        ``--election-timing``)
    """

    def __init__(
        self,
        binary=None,
        *,
        clock=None,
        tick_time=None,
        zookeeper_version=None,
        args=(),
        startup_timeout=30.0,
        log="warn",
        ensemble=None,
        observers=None,
        election_timing=None,
    ):
        self.binary = find_binary(binary)
        self._argv = [self.binary, "--port", "0", "--admin-port", "0", "--log", log]
        self.ensemble = None if ensemble is None else int(ensemble)
        if self.ensemble is not None:
            if not 1 <= self.ensemble <= 255:
                raise ValueError("an ensemble has 1 to 255 members, not %r" % ensemble)
            self._argv += ["--ensemble", str(self.ensemble)]
        if observers is not None:
            if self.ensemble is None or not 0 <= int(observers) < self.ensemble:
                raise ValueError(
                    "observers needs an ensemble with at least one voting member; "
                    "got observers=%r for ensemble=%r" % (observers, ensemble)
                )
            self._argv += ["--observers", str(int(observers))]
        if election_timing is not None:
            if self.ensemble is None or election_timing not in ("instant", "zookeeper"):
                raise ValueError(
                    "election_timing is instant or zookeeper, with an ensemble; got %r"
                    % (election_timing,)
                )
            self._argv += ["--election-timing", election_timing]
        if clock is not None:
            self._argv += ["--clock", clock]
        if tick_time is not None:
            self._argv += ["--tick-time", str(int(tick_time))]
        if zookeeper_version is not None:
            if str(zookeeper_version) not in ("3.8", "3.9"):
                raise ValueError(
                    "zookeeper_version is 3.8 or 3.9, not %r" % (zookeeper_version,)
                )
            self._argv += ["--zookeeper-version", str(zookeeper_version)]
        self._argv += [str(a) for a in args]
        self.startup_timeout = startup_timeout
        self.process = None
        self.host = None
        self.port = None
        self.admin_host = None
        self.admin_port = None
        self._listening = []
        self._output = collections.deque(maxlen=200)
        self._ready = threading.Event()
        self._reader = None

    # -- life cycle -------------------------------------------------------------------

    def start(self):
        """Starts the process and waits until both listeners are up. Returns ``self``."""
        if self.process is not None:
            raise ServerError("this zkd server is already started")
        self._ready.clear()
        self._output.clear()
        self._listening = []
        self.process = subprocess.Popen(
            self._argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            # Its own process group: a Ctrl-C in the test runner reaches the runner, which
            # then stops the server in order.
            start_new_session=True,
        )
        _LIVE.add(self)
        self._reader = threading.Thread(
            target=self._read_output, name="zkd-output-%d" % self.process.pid, daemon=True
        )
        self._reader.start()
        deadline = time.monotonic() + self.startup_timeout
        while not self._ready.wait(0.05):
            if self.process.poll() is not None:
                self._reader.join(2)
                code = self.process.returncode
                self._reap()
                raise ServerError(
                    "zkd exited with code %s before listening:\n%s" % (code, self.output())
                )
            if time.monotonic() > deadline:
                self.stop()
                raise ServerError(
                    "zkd did not report listening within %.0fs:\n%s"
                    % (self.startup_timeout, self.output())
                )
        return self

    def _read_output(self):
        # Reads every line the process writes until it exits, so its pipe never fills.
        stream = self.process.stdout
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self._output.append(line)
            m = _LISTENING.match(line)
            if m:
                # an ensemble prints one line per member, in member order
                self._listening.append((m.group(1), int(m.group(2))))
                if self.port is None:
                    self.host, self.port = m.group(1), int(m.group(2))
            m = _ADMIN.match(line)
            if m:
                self.admin_host, self.admin_port = m.group(1), int(m.group(2))
            if len(self._listening) >= (self.ensemble or 1) and self.admin_port is not None:
                self._ready.set()
        stream.close()

    def output(self):
        """The last lines zkd printed (its log at the chosen level), as one string."""
        return "\n".join(self._output)

    def stop(self, timeout=10.0):
        """Stops the process (SIGTERM, then SIGKILL after ``timeout`` seconds) and reaps it.
        Safe to call more than once."""
        proc = self.process
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.terminate()
            except OSError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._reap()

    def _reap(self):
        proc = self.process
        if proc is not None:
            proc.wait()
            if self._reader is not None:
                self._reader.join(5)
            if proc.stdout is not None and not proc.stdout.closed:
                try:
                    proc.stdout.close()
                except OSError:
                    pass
        self.process = None
        self.host = self.port = self.admin_host = self.admin_port = None
        _LIVE.discard(self)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    @property
    def running(self):
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self):
        return self.process.pid if self.process is not None else None

    @property
    def hosts(self):
        """The connection string, ``HOST:PORT`` (kazoo's ``hosts``, Curator's connect string);
        with an ensemble every member's, comma-separated, in member order."""
        self._require_running()
        return ",".join(_address(h, p) for h, p in self._listening)

    def member_hosts(self, member_id):
        """``HOST:PORT`` of one ensemble member (ids run from 1), to connect to it alone."""
        self._require_running()
        member_id = int(member_id)
        if self.ensemble is None or not 1 <= member_id <= len(self._listening):
            raise ValueError("no member %r in %s" % (member_id, self))
        return _address(*self._listening[member_id - 1])

    @property
    def admin_url(self):
        """Base URL of the admin HTTP API."""
        self._require_running()
        return "http://" + _address(self.admin_host, self.admin_port)

    def _require_running(self):
        if self.process is None or self.port is None:
            raise ServerError("this zkd server is not running")

    # -- admin API --------------------------------------------------------------------

    def _call(self, method, path, query=None, body=None, timeout=30.0, raw=False):
        url = self.admin_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None
        headers = {}
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        elif method == "POST":
            data = b""
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                payload = resp.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                message = json.loads(raw.decode("utf-8")).get("error", "")
            except (ValueError, AttributeError):
                message = raw.decode("utf-8", "replace")
            raise AdminError(e.code, message, method, path) from None
        if raw:
            return payload.decode("utf-8")
        if not payload:
            return None
        return json.loads(payload.decode("utf-8"))

    def sessions(self):
        """The open sessions: a list of dicts with ``id`` (hex string), ``timeout_ms``,
        ``peer``, ``ephemerals``, ``watches``, ``last_heard_ms_ago``."""
        return self._call("GET", "/zkd/sessions")["sessions"]

    def expire_session(self, session_id):
        """Expires a session as ZooKeeper does when its timeout passes: its ephemerals are
        deleted and its client sees SESSION_EXPIRED. ``session_id`` is an int (kazoo:
        ``client.client_id[0]``) or a hex string."""
        return self._call("POST", "/zkd/sessions/%s/expire" % session_hex(session_id))

    def disconnect(self, session_id):
        """Closes the session's connection; the session lives on and the client reconnects."""
        return self._call("POST", "/zkd/sessions/%s/disconnect" % session_hex(session_id))

    def pause(self, ms=None, freeze_clock=False):
        """Stops serving requests (connections stay open, nothing is answered) until
        :meth:`resume`, or for ``ms`` milliseconds (an int or a ``timedelta``). With
        ``freeze_clock`` the session clock stops too, so no session expires meanwhile."""
        query = {}
        if ms is not None:
            query["ms"] = _ms(ms)
        if freeze_clock:
            query["clock"] = "freeze"
        return self._call("POST", "/zkd/pause", query)

    def resume(self):
        """Ends a pause."""
        return self._call("POST", "/zkd/resume")

    def reset(self, expire_sessions=False):
        """Deletes every node but ``/`` and ``/zookeeper``; with ``expire_sessions`` every
        session is expired first. Returns the number of nodes deleted."""
        query = {"sessions": "expire"} if expire_sessions else None
        return self._call("POST", "/zkd/reset", query)["deleted_nodes"]

    def clock(self):
        """The session clock: ``mode`` (real/manual), ``now_ms``, ``elapsed_ms``, ``paused``."""
        return self._call("GET", "/zkd/clock")

    def advance_clock(self, ms):
        """Moves the manual clock (``Server(clock="manual")``) forward by ``ms`` milliseconds
        (an int or a ``timedelta``); sessions whose timeout passes expire."""
        return self._call("POST", "/zkd/clock/advance", {"ms": _ms(ms)})

    def add_fault(self, action, *, code=None, ms=None, opcode=None, path=None,
                  session=None, count=None):
        """Adds a fault rule and returns it (with its ``id``).

        ``action`` is ``"error"`` (answer with ZooKeeper error ``code``, a number or a name
        such as ``"NONODE"``), ``"drop-before"``/``"drop-after"`` (close the connection
        before/after executing), ``"delay"`` (hold the reply ``ms`` milliseconds) or
        ``"no-response"``. The rule matches requests by ``opcode`` (number or name such as
        ``"create"``), ``path`` prefix and ``session``, and fires ``count`` times (default:
        until removed)."""
        body = _rule_body(action, code=code, ms=_given(_ms, ms), opcode=opcode, path=path,
                          session=_given(session_hex, session), count=_given(int, count))
        return self._call("POST", "/zkd/faults", body=body)

    def faults(self):
        """The fault rules in force, each with ``fired`` and ``remaining`` counts."""
        return self._call("GET", "/zkd/faults")["faults"]

    def remove_fault(self, fault_id):
        """Removes one fault rule."""
        return self._call("DELETE", "/zkd/faults/%d" % int(fault_id))

    def clear_faults(self):
        """Removes every fault rule; returns how many there were."""
        return self._call("DELETE", "/zkd/faults")["removed"]

    # -- network faults on client connections ------------------------------------------

    def add_net_fault(self, action, *, ms=None, session=None, client=None, member=None):
        """Adds a network fault on client connections and returns it (with its ``id`` and
        the number of open ``connections`` it holds).

        ``action`` is ``"blackhole"`` (nothing read or written, nothing closed: the client
        notices by its own timeout), ``"drop-replies"`` (requests applied, replies and
        notifications lost) or ``"latency"`` (``ms`` milliseconds, an int or a ``timedelta``,
        added each way on the session clock). It holds the connection ``session`` has now
        (an int, e.g. kazoo's ``client.client_id[0]``, or a hex string), connections from
        ``client`` (an IP, or ``"IP:PORT"`` for one connection), connections to ensemble
        member ``member``, or, with none of these, every client connection."""
        body = _rule_body(action, ms=_given(_ms, ms), session=_given(session_hex, session),
                          client=client, member=_given(int, member))
        return self._call("POST", "/zkd/net-faults", body=body)

    def net_faults(self):
        """The network faults in force, each with the open ``connections`` it holds."""
        return self._call("GET", "/zkd/net-faults")["net_faults"]

    def remove_net_fault(self, fault_id):
        """Removes one network fault: a latency ends, and the connections a blackhole or
        dropped replies held are closed (their clients reconnect)."""
        return self._call("DELETE", "/zkd/net-faults/%d" % int(fault_id))

    def clear_net_faults(self):
        """Removes every network fault; returns how many there were."""
        return self._call("DELETE", "/zkd/net-faults")["removed"]

    # -- ensemble members -------------------------------------------------------------

    def members(self):
        """The ensemble's members: a list of dicts with ``id``, ``client_address``,
        ``state`` (running/stopped), ``mode`` (leader, follower, read-only, stopped, ...),
        ``lag``, ``zxid`` (the member's applied zxid) and ``behind``. On a standalone server
        this raises :class:`AdminError` with status 409."""
        return self._call("GET", "/zkd/members")["members"]

    def leader(self):
        """The id of the ensemble's leader, or None when no quorum runs."""
        return self._call("GET", "/zkd/members")["leader"]

    def stop_member(self, member_id):
        """Stops one member: its listener closes and its connections drop; clients fail
        over to the other members and keep their sessions. 409 if it is already stopped."""
        return self._call("POST", "/zkd/members/%d/stop" % int(member_id))

    def start_member(self, member_id):
        """Starts a stopped member again on its port. 409 if it is running."""
        return self._call("POST", "/zkd/members/%d/start" % int(member_id))

    def partition(self, *groups, one_way=()):
        """Splits the members into groups, each a list of member ids (members named in none
        form one more group): ``server.partition([1], [2, 3])``; and/or cuts links one way,
        each a ``(from, to)`` pair whose messages from ``from`` to ``to`` are lost:
        ``server.partition(one_way=[(3, 1)])``. The side holding a majority of the voters
        keeps the quorum (electing a leader of its own if its leader is elsewhere); every
        other member is cut off, serving only read-only clients from what it had, until
        :meth:`heal`. Replaces any partition before. Returns the members listing."""
        query = {}
        if groups:
            query["groups"] = "/".join(",".join(str(int(i)) for i in g) for g in groups)
        if one_way:
            query["one_way"] = ",".join("%d>%d" % (int(a), int(b)) for a, b in one_way)
        if not query:
            raise ValueError("give groups or one_way links to cut")
        return self._call("POST", "/zkd/partition", query)

    def heal(self):
        """Ends a partition: the cut members apply what they missed and serve again."""
        return self._call("POST", "/zkd/heal")

    def lag_member(self, member_id, ms=None, txns=None, stall=None):
        """Makes a member trail the committed history: by ``ms`` milliseconds (an int or a
        ``timedelta``), by ``txns`` transactions, or not at all with ``stall=True``; ``ms=0``,
        ``txns=0`` or ``stall=False`` put it in step again. Its clients read its replica,
        their watches fire as it catches up. Returns the member's lag report."""
        query = {}
        if ms is not None:
            query["ms"] = _ms(ms)
        if txns is not None:
            query["txns"] = int(txns)
        if stall is not None:
            query["stall"] = "true" if stall else "false"
        if len(query) != 1:
            raise ValueError("give exactly one of ms, txns or stall")
        return self._call("POST", "/zkd/members/%d/lag" % int(member_id), query)

    # -- history ----------------------------------------------------------------------

    def history_summary(self):
        """The history's size: ``enabled``, ``events``, ``bytes``, ``dropped``,
        ``first_seq``, ``last_seq``, ``max_events``, ``max_bytes``."""
        return self._call("GET", "/zkd/history", {"format": "json"})

    def history_mark(self):
        """The ``seq`` of the last event recorded so far (0 when none is, or the history is
        off): a test's window of the history starts after it."""
        return self.history_summary().get("last_seq") or 0

    def history_jsonl(self, after_seq=0, **filters):
        """The history as JSON Lines text, oldest first, every page from ``after_seq`` on.
        ``filters``: ``session`` (an int or hex string), ``path`` (a prefix), ``kinds`` (a
        list), ``since_ms``, ``until_ms``, ``from_zxid``, ``to_zxid`` (see docs/history.md)."""
        query = {}
        for key, value in filters.items():
            if value is None:
                continue
            if key == "session":
                value = session_hex(value)
            elif key == "kinds" and not isinstance(value, str):
                value = ",".join(value)
            query[key] = value
        pages = []
        last = int(after_seq)
        while True:
            page = self._call("GET", "/zkd/history", dict(query, after_seq=last, limit=10000),
                              raw=True)
            lines = [line for line in page.split("\n") if line.strip()]
            pages.extend(lines)
            if len(lines) < 10000:
                break
            last = json.loads(lines[-1])["seq"]
        return "".join(line + "\n" for line in pages)

    def history(self, after_seq=0, **filters):
        """The history's events as dicts (see :meth:`history_jsonl` for the filters)."""
        return [json.loads(line) for line in self.history_jsonl(after_seq, **filters).splitlines()]

    def history_checks(self, after_seq=0):
        """The recipe checks' findings over the events after ``after_seq``: a list of dicts
        with ``check``, ``summary`` and ``seqs`` (see docs/history.md)."""
        return self._call("GET", "/zkd/history/checks", {"after_seq": int(after_seq)})

    def history_timeline(self, after_seq=0):
        """A self-contained HTML page drawing the events after ``after_seq`` on a timeline,
        with the recipe checks' findings marked."""
        return self._call("GET", "/zkd/history/timeline", {"after_seq": int(after_seq)},
                          raw=True)

    def save_history(self, directory, name, after_seq=0):
        """Writes the events after ``after_seq`` to ``directory/name.history.jsonl`` and their
        timeline to ``directory/name.history.html``; returns the two paths and the findings."""
        import os

        os.makedirs(directory, exist_ok=True)
        base = os.path.join(directory, name)
        jsonl, html = base + ".history.jsonl", base + ".history.html"
        with open(jsonl, "w", encoding="utf-8") as f:
            f.write(self.history_jsonl(after_seq))
        with open(html, "w", encoding="utf-8") as f:
            f.write(self.history_timeline(after_seq))
        return jsonl, html, self.history_checks(after_seq)

    def __repr__(self):
        if self.running and self.port is not None:
            return "<zkd.Server %s pid=%d>" % (self.hosts, self.process.pid)
        return "<zkd.Server stopped>"
