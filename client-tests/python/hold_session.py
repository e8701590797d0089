"""Holds a kazoo session (10 s timeout) with an ephemeral node. Each line read from stdin
asks for a report, printed as one line: `states <LOST count> <SUSPENDED count> ephemeral
<present|missing> connected <True|False>`; at the end of stdin it reports once more, then
stops.

Usage: hold_session.py HOST:PORT
"""

import sys
import threading

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

counts = {KazooState.LOST: 0, KazooState.SUSPENDED: 0}
lock = threading.Lock()


def listener(state):
    with lock:
        if state in counts:
            counts[state] += 1
    print(f"state {state}", file=sys.stderr, flush=True)


def main():
    zk = KazooClient(hosts=sys.argv[1], timeout=10.0)
    zk.add_listener(listener)
    zk.start(timeout=30)
    path = zk.create("/held-", b"", ephemeral=True, sequence=True)
    print("ready", flush=True)

    def report():
        present = zk.exists(path) is not None
        with lock:
            print(
                f"states {counts[KazooState.LOST]} {counts[KazooState.SUSPENDED]} "
                f"ephemeral {'present' if present else 'missing'} "
                f"connected {zk.state == KazooState.CONNECTED}",
                flush=True,
            )

    for _ in sys.stdin:
        report()
    report()
    zk.stop()
    zk.close()


if __name__ == "__main__":
    main()
