#!/usr/bin/env python3
"""Captures golden wire fixtures from a real ZooKeeper server.

Sends hand-built raw frames (no client library) and records the exact bytes of every frame
sent and received, one hex line per frame:

    # what the file contains            (lines starting with '#' are comments)
    > 0000002d00000000...               frame sent by the client (4-byte length included)
    < 0000002500000000...               frame received from the server
    A> / A< / B> / B<                   the same, for fixtures with two connections

Lines are in the order the script wrote or read them on each connection; with two
connections the interleaving is the script's, not a global timeline.

Usage:
    scripts/capture-fixtures.py HOST:PORT [OUTDIR]     (OUTDIR defaults to protocol/tests/fixtures)

Run it against a fresh server (scripts/zookeeper-oracle.sh start DIR). Against a server that
already has state, the fixture paths are deleted first (unrecorded) so a re-run works too.
Standard library only.
"""

import os
import socket
import struct
import sys

TIMEOUT = 5.0

# Error codes and opcodes used below.
OK = 0
RUNTIMEINCONSISTENCY = -2
UNIMPLEMENTED = -6
NONODE = -101
BADVERSION = -103

OP_CREATE = 1
OP_DELETE = 2
OP_EXISTS = 3
OP_GETDATA = 4
OP_SETDATA = 5
OP_GETCHILDREN = 8
OP_PING = 11
OP_CHECK = 13
OP_MULTI = 14
OP_CREATE2 = 15

PERM_ALL = 31


# ---------------------------------------------------------------------------------------------
# Jute encoding


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def boolean(v):
    return b"\x01" if v else b"\x00"


def buf(b):
    """A Jute buffer; None encodes as length -1."""
    if b is None:
        return i32(-1)
    return i32(len(b)) + b


def ustr(s):
    if s is None:
        return i32(-1)
    return buf(s.encode("utf-8"))


def acl_world_anyone(perms=PERM_ALL):
    # vector<ACL> with one element: int perms, Id{ustring scheme, ustring id}
    return i32(1) + i32(perms) + ustr("world") + ustr("anyone")


def frame(payload):
    return i32(len(payload)) + payload


def request(xid, op, body=b""):
    return frame(i32(xid) + i32(op) + body)


def connect_request(read_only_byte=True, timeout=30000):
    body = i32(0) + i64(0) + i32(timeout) + i64(0) + buf(bytes(16))
    if read_only_byte:
        body += boolean(False)
    return frame(body)


def create_body(path, data, flags=0):
    return ustr(path) + buf(data) + acl_world_anyone() + i32(flags)


def multi_header(op, done=False, err=-1):
    return i32(op) + boolean(done) + i32(err)


def reply_header(frame_bytes):
    """(xid, zxid, err) of a received reply frame (length prefix included)."""
    return struct.unpack(">iqi", frame_bytes[4:20])


# ---------------------------------------------------------------------------------------------
# Recording connections


class Recorder:
    def __init__(self, comment):
        self.lines = ["# " + line for line in comment.strip().splitlines()]

    def add(self, prefix, data):
        self.lines.append(prefix + " " + data.hex())

    def note(self, text):
        self.lines.append("# " + text)

    def write(self, path):
        with open(path, "w") as f:
            f.write("\n".join(self.lines) + "\n")


class Conn:
    def __init__(self, addr, recorder=None, label=""):
        self.sock = socket.create_connection(addr, timeout=TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rec = recorder
        self.label = label
        self.xid = 0

    def send(self, data):
        self.sock.sendall(data)
        if self.rec is not None:
            self.rec.add(self.label + ">", data)

    def _read_exact(self, n):
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise EOFError("connection closed after %d of %d bytes" % (len(out), n))
            out += chunk
        return out

    def recv(self):
        head = self._read_exact(4)
        (length,) = struct.unpack(">i", head)
        data = head + self._read_exact(length)
        if self.rec is not None:
            self.rec.add(self.label + "<", data)
        return data

    def expect_eof(self):
        data = self.sock.recv(1)
        if data:
            raise AssertionError("expected the server to close the connection, got %r" % data)

    def next_xid(self):
        self.xid += 1
        return self.xid

    def handshake(self):
        self.send(connect_request())
        resp = self.recv()
        assert len(resp) == 4 + 37, "unexpected ConnectResponse size %d" % len(resp)
        return resp

    def call(self, op, body=b"", expect_err=OK):
        xid = self.next_xid()
        self.send(request(xid, op, body))
        resp = self.recv()
        rxid, _zxid, err = reply_header(resp)
        assert rxid == xid, "xid %d answered with %d" % (xid, rxid)
        assert err == expect_err, "op %d: expected err %d, got %d" % (op, expect_err, err)
        return resp

    def close(self):
        self.sock.close()


# ---------------------------------------------------------------------------------------------
# Fixtures


def capture_connect(addr, rec, read_only_byte):
    """A handshake with or without the readOnly byte; the reply carries it only if asked."""
    c = Conn(addr, rec)
    c.send(connect_request(read_only_byte=read_only_byte))
    resp = c.recv()
    assert len(resp) == 4 + 36 + int(read_only_byte), len(resp)
    c.close()


def capture_connect_v2(addr, rec):
    capture_connect(addr, rec, read_only_byte=True)


def capture_connect_old(addr, rec):
    capture_connect(addr, rec, read_only_byte=False)


def capture_create2(addr, rec):
    c = Conn(addr, rec)
    c.handshake()
    resp = c.call(OP_CREATE2, create_body("/fixture-c2", b"v"))
    assert len(resp) == 4 + 16 + 4 + len("/fixture-c2") + 68, len(resp)
    c.close()


def capture_multi_failed(addr, rec):
    c = Conn(addr, rec)
    c.handshake()
    c.call(OP_CREATE, create_body("/fixture-m", b"m"))
    ops = (
        multi_header(OP_CREATE) + create_body("/fixture-m/x", b"x")
        + multi_header(OP_SETDATA) + ustr("/fixture-m") + buf(b"d") + i32(7)
        + multi_header(OP_CHECK) + ustr("/fixture-m") + i32(0)
        + multi_header(OP_DELETE) + ustr("/fixture-m/y") + i32(-1)
        + multi_header(OP_CREATE) + create_body("/fixture-m/z", b"z")
        + multi_header(-1, done=True, err=-1)
    )
    resp = c.call(OP_MULTI, ops)
    # Results: five (type -1, done false, err) + ErrorResponse(err), then the terminator.
    body = resp[20:]
    expected = [OK, BADVERSION, RUNTIMEINCONSISTENCY, RUNTIMEINCONSISTENCY, RUNTIMEINCONSISTENCY]
    for i, want in enumerate(expected):
        typ, done, err, err2 = struct.unpack(">i?ii", body[i * 13:(i + 1) * 13])
        assert (typ, done, err, err2) == (-1, False, want, want), (i, typ, done, err, err2)
    assert body[5 * 13:] == multi_header(-1, done=True, err=-1), body[5 * 13:].hex()
    c.close()


def capture_notification(addr, rec):
    a = Conn(addr, rec, "A")
    a.handshake()
    a.call(OP_CREATE, create_body("/fixture-n", b"n0"))
    a.call(OP_GETDATA, ustr("/fixture-n") + boolean(True))
    b = Conn(addr, rec, "B")
    b.handshake()
    b.call(OP_SETDATA, ustr("/fixture-n") + buf(b"n1") + i32(-1))
    note = a.recv()
    xid, zxid, err = reply_header(note)
    assert (xid, err) == (-1, OK), (xid, zxid, err)
    typ, state = struct.unpack(">ii", note[20:28])
    assert (typ, state) == (3, 3), (typ, state)
    a.close()
    b.close()


def capture_ping(addr, rec):
    c = Conn(addr, rec)
    c.handshake()
    c.send(request(-2, OP_PING))
    resp = c.recv()
    assert reply_header(resp)[0] == -2 and len(resp) == 20, resp.hex()
    # A ping sent with an ordinary xid is still answered with xid -2.
    c.send(request(7, OP_PING))
    resp = c.recv()
    assert reply_header(resp)[0] == -2 and len(resp) == 20, resp.hex()
    c.close()


def capture_unknown_opcode(addr, rec):
    c = Conn(addr, rec)
    c.handshake()
    c.send(request(1, 999))
    resp = c.recv()
    xid, _zxid, err = reply_header(resp)
    assert (xid, err, len(resp)) == (1, UNIMPLEMENTED, 20), resp.hex()
    c.expect_eof()
    rec.note("EOF: the server closed the connection after this reply")
    c.close()


def capture_exists_missing(addr, rec):
    c = Conn(addr, rec)
    c.handshake()
    resp = c.call(OP_EXISTS, ustr("/fixture-missing") + boolean(False), expect_err=NONODE)
    assert len(resp) == 20, resp.hex()
    c.close()


def capture_get_data_null(addr, rec):
    c = Conn(addr, rec)
    c.handshake()
    c.call(OP_CREATE, create_body("/fixture-null", None))
    resp = c.call(OP_GETDATA, ustr("/fixture-null") + boolean(False))
    assert resp[20:24] == i32(-1), resp.hex()
    c.close()


FIXTURES = [
    ("connect_v2.hex", capture_connect_v2,
     "ConnectRequest with the readOnly byte (protocolVersion 0, lastZxidSeen 0, timeOut 30000,\n"
     "sessionId 0, 16 zero password bytes, readOnly false) and its ConnectResponse (37-byte\n"
     "payload, readOnly byte included)."),
    ("connect_old.hex", capture_connect_old,
     "Old-style ConnectRequest without the readOnly byte (otherwise as connect_v2) and its\n"
     "ConnectResponse without the readOnly byte (36-byte payload)."),
    ("create2.hex", capture_create2,
     "Handshake, then create2 (opcode 15, xid 1) of /fixture-c2 with data \"v\", world:anyone ALL,\n"
     "persistent; the reply carries path + Stat."),
    ("multi_failed.hex", capture_multi_failed,
     "Handshake; create /fixture-m (xid 1) and its reply; then multi (opcode 14, xid 2):\n"
     "create /fixture-m/x, setData /fixture-m version 7 (wrong), check /fixture-m version 0,\n"
     "delete /fixture-m/y, create /fixture-m/z. Reply: header err 0, results\n"
     "(-1,0) (-1,BADVERSION -103) then (-1,RUNTIMEINCONSISTENCY -2) x3, then the terminator."),
    ("notification.hex", capture_notification,
     "Two connections. A: handshake, create /fixture-n \"n0\" (xid 1), getData /fixture-n\n"
     "watch=true (xid 2). B: handshake, setData /fixture-n \"n1\" version -1 (xid 1).\n"
     "Last line: the notification A receives (xid -1, NodeDataChanged, SyncConnected)."),
    ("ping.hex", capture_ping,
     "Handshake, ping {xid -2, type 11} and its reply; then a ping sent with xid 7,\n"
     "which is also answered with xid -2."),
    ("unknown_opcode.hex", capture_unknown_opcode,
     "Handshake, then a request with opcode 999 (xid 1, empty body): reply UNIMPLEMENTED (-6)\n"
     "with no body, then the server closes the connection."),
    ("exists_missing.hex", capture_exists_missing,
     "Handshake, then exists /fixture-missing watch=false (xid 1): the reply is a header\n"
     "with err NONODE (-101) and no body."),
    ("get_data_null.hex", capture_get_data_null,
     "Handshake, create /fixture-null with null data (buffer length -1) (xid 1), then\n"
     "getData /fixture-null (xid 2): data length -1 (ffffffff) on the wire, Stat dataLength 0."),
]


def cleanup(addr):
    """Deletes what an earlier run left behind (not recorded)."""
    c = Conn(addr)
    c.handshake()
    for path in ["/fixture-m/x", "/fixture-m/z", "/fixture-m", "/fixture-c2", "/fixture-n",
                 "/fixture-null"]:
        xid = c.next_xid()
        c.send(request(xid, OP_DELETE, ustr(path) + i32(-1)))
        _xid, _zxid, err = reply_header(c.recv())
        assert err in (OK, NONODE), (path, err)
    c.send(request(c.next_xid(), -11))  # closeSession
    c.recv()
    c.close()


def four_letter_word(addr, word):
    with socket.create_connection(addr, timeout=TIMEOUT) as s:
        s.sendall(word.encode())
        out = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return out.decode("utf-8", "replace")
            out += chunk


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    host, _, port = sys.argv[1].rpartition(":")
    addr = (host or "127.0.0.1", int(port))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outdir = sys.argv[2] if len(sys.argv) == 3 else os.path.join(root, "protocol", "tests", "fixtures")
    os.makedirs(outdir, exist_ok=True)

    srvr = four_letter_word(addr, "srvr").splitlines()
    version = srvr[0]
    print("server: %s" % version)
    # A fresh server (zxid 0) needs no clean-up; skipping it keeps session ids and zxids in the
    # fixtures small and deterministic in shape (first session ...0000, first zxid 1).
    if "Zxid: 0x0" not in srvr:
        print("server has state: deleting the fixture paths of an earlier run")
        cleanup(addr)
    for name, capture, comment in FIXTURES:
        rec = Recorder("%s: %s\nCaptured with scripts/capture-fixtures.py from: %s" % (name, comment, version))
        capture(addr, rec)
        path = os.path.join(outdir, name)
        rec.write(path)
        print("wrote %s (%d frames)" % (path, sum(1 for l in rec.lines if not l.startswith("#"))))


if __name__ == "__main__":
    main()
