#!/usr/bin/env python3
"""kazoo over the secure transports: TLS with a client certificate, SASL DIGEST-MD5.

    usage: secure_checks.py tls  HOST:PORT PKI_DIR CLIENT_DN
           secure_checks.py sasl HOST:PORT
           secure_checks.py enforce HOST:PORT   (a server enforcing the sasl scheme)

Prints `PASS name` / `FAIL name: reason` per check and `N passed, M failed`; exit 1 on any
failure. Every wait is bounded, generously: a wait ends as soon as what it waits for
happens, and its bound is only there so that a broken server cannot hang the run.
"""

import logging
import os
import sys
import threading

from checks import check, finish
from kazoo.client import KazooClient
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionClosedError,
    NoAuthError,
    SessionClosedRequireSaslError,
)
from kazoo.protocol.states import KeeperState
from kazoo.security import ACL, Id, Permissions

# Upper bound of one wait (a connection, a state change, a lock); never reached when things
# work, also not on a heavily loaded machine.
WAIT = 120.0
# Session timeout asked for: long enough that a stalled client process keeps its session.
SESSION_TIMEOUT = 30.0
BASE = "/kazoo-secure-%d" % os.getpid()


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def read_refused(zk):
    """Starts the client `zk`; reading BASE must fail with NoAuth. Closes it."""
    zk.start(timeout=WAIT)
    try:
        try:
            zk.get(BASE)
            raise AssertionError("read allowed")
        except NoAuthError:
            pass
    finally:
        zk.stop()
        zk.close()


def tls_client(addr, pki, identity):
    return KazooClient(
        hosts=addr,
        use_ssl=True,
        ca=os.path.join(pki, "ca.pem"),
        certfile=os.path.join(pki, identity + ".pem"),
        keyfile=os.path.join(pki, identity + ".key"),
        verify_certs=True,
        timeout=SESSION_TIMEOUT,
        connection_retry={"max_tries": 1},
    )


def tls(addr, pki, dn):
    zk = tls_client(addr, pki, "client1")
    check("tls: kazoo connects with the CA's client certificate", lambda: zk.start(timeout=WAIT))
    if not zk.connected:
        return
    mine = [ACL(Permissions.ALL, Id("x509", dn))]

    def recipes():
        zk.create(BASE, b"v1", acl=mine)
        data, _ = zk.get(BASE)
        expect(data == b"v1", "data %r" % data)
        lock = zk.Lock(BASE + "/lock", "me")
        expect(lock.acquire(timeout=WAIT), "lock not acquired")
        lock.release()
        counter = zk.Counter(BASE + "/counter")
        counter += 5
        expect(counter.value == 5, "counter %r" % counter.value)
        expect(zk.get_acls(BASE)[0] == mine, "acl %r" % (zk.get_acls(BASE)[0],))

    check("tls: recipes under an x509 ACL", recipes)

    check(
        "tls: another certificate is refused by the x509 ACL",
        lambda: read_refused(tls_client(addr, pki, "client2")),
    )

    def rogue():
        r = tls_client(addr, pki, "rogue")
        try:
            r.start(timeout=3)
            raise AssertionError("connected")
        except Exception as e:  # noqa: BLE001 - a timeout or a TLS error
            expect(not isinstance(e, AssertionError), str(e))
        finally:
            r.stop()
            r.close()

    check("tls: a certificate from an unknown CA cannot connect", rogue)
    check("tls: cleanup", lambda: zk.delete(BASE, recursive=True))
    zk.stop()
    zk.close()


def sasl_client(addr, user, password):
    return KazooClient(
        hosts=addr,
        sasl_options={"mechanism": "DIGEST-MD5", "username": user, "password": password},
        timeout=SESSION_TIMEOUT,
    )


def sasl(addr):
    zk = sasl_client(addr, "bob", "bobsecret")
    check("sasl: kazoo authenticates with DIGEST-MD5", lambda: zk.start(timeout=WAIT))
    if not zk.connected:
        return
    bob = [ACL(Permissions.ALL, Id("sasl", "bob"))]

    def admitted():
        zk.create(BASE, b"s", acl=bob)
        expect(zk.get(BASE)[0] == b"s", "data")
        zk.set(BASE, b"t")

    check("sasl: the sasl ACL admits its user", admitted)

    check(
        "sasl: another user is refused by the sasl ACL",
        lambda: read_refused(sasl_client(addr, "alice", "alicesecret")),
    )

    def wrong_password():
        # kazoo reports CONNECTED once the session exists, then runs SASL; the server's
        # AUTHFAILED answer moves the client to AUTH_FAILED and it stops connecting (its
        # state then reads CLOSED); calls fail instead of reaching the server. `start()` is
        # not used: it raises a time-out instead of returning when the failure lands before
        # the starting thread looks at the state again, which a loaded machine makes likely.
        wrong = sasl_client(addr, "bob", "not-the-password")
        final = (KeeperState.AUTH_FAILED, KeeperState.CLOSED)
        done = threading.Event()
        seen = []

        def listener(state):
            seen.append(wrong.client_state)
            if wrong.client_state in final:
                done.set()

        wrong.add_listener(listener)
        try:
            wrong.start_async()
            expect(done.wait(WAIT), "no AUTH_FAILED; states %r" % seen)
            expect(wrong.client_state in final, "state %r" % wrong.client_state)
            expect(not wrong.connected, "still connected")
            try:
                wrong.get("/")
                raise AssertionError("read allowed")
            except (AuthFailedError, ConnectionClosedError):
                pass
        finally:
            wrong.stop()
            wrong.close()

    check("sasl: a wrong password fails with AuthFailedError", wrong_password)
    check("sasl: cleanup", lambda: zk.delete(BASE))
    zk.stop()
    zk.close()


def enforce(addr):
    """Against a server that enforces the sasl scheme."""

    def served():
        bob = sasl_client(addr, "bob", "bobsecret")
        bob.start(timeout=WAIT)
        try:
            bob.create(BASE, b"e")
            expect(bob.get(BASE)[0] == b"e", "data")
            bob.delete(BASE)
        finally:
            bob.stop()
            bob.close()

    check("enforce: a SASL user is served", served)

    def refused():
        anon = KazooClient(hosts=addr, timeout=SESSION_TIMEOUT)
        anon.start(timeout=WAIT)
        try:
            try:
                anon.exists("/")
                raise AssertionError("request served")
            except SessionClosedRequireSaslError:
                pass
        finally:
            anon.stop()
            anon.close()

    check("enforce: a client without SASL gets SessionClosedRequireSaslError", refused)


def main():
    logging.basicConfig(level=logging.CRITICAL)
    mode, addr = sys.argv[1], sys.argv[2]
    if mode == "tls":
        tls(addr, sys.argv[3], sys.argv[4])
    elif mode == "sasl":
        sasl(addr)
    elif mode == "enforce":
        enforce(addr)
    else:
        raise SystemExit("unknown mode " + mode)
    finish()


if __name__ == "__main__":
    main()
