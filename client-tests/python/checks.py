"""The check runner the kazoo scripts share: one `PASS name` or `FAIL name: reason` line per
check, then `N passed, M failed`; the exit status is 1 on any failure (or when nothing ran).
Also which ensemble member a client is connected to.
"""

import sys
import traceback

passed = 0
failed = 0


def check(name, fn):
    """Runs `fn`; any exception it raises fails the check, with its traceback on stderr."""
    global passed, failed
    try:
        fn()
        passed += 1
        print("PASS " + name, flush=True)
    except Exception as e:  # noqa: BLE001 - every failure is reported
        failed += 1
        print("FAIL %s: %r" % (name, e), flush=True)
        traceback.print_exc(file=sys.stderr)


def member_of(client, members):
    """The 1-based position in `members` (HOST:PORT strings) of the member a kazoo client is
    connected to."""
    host, port = client._connection._socket.getpeername()[:2]
    # Members in network namespaces share a port and differ by address: the address first.
    for i, m in enumerate(members):
        if m == "%s:%d" % (host, port):
            return i + 1
    for i, m in enumerate(members):
        if m.endswith(":%d" % port):
            return i + 1
    raise AssertionError("%s:%d is not a member" % (host, port))


def finish():
    """Prints the totals and exits."""
    print("%d passed, %d failed" % (passed, failed), flush=True)
    sys.exit(0 if failed == 0 and passed > 0 else 1)
