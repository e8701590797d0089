"""Start-up time and memory of the test helpers: zkd.Server (one server and an ensemble of 3)
against kazoo's own test harness (ZookeeperCluster, the way KazooTestHarness starts
ZooKeeper), and the Java helpers against Curator's (MeasureJavaHelpers.java, one JVM a run). Run by
scripts/measure-helpers.sh in a virtualenv with the zkd wheel, kazoo, pyopenssl and pyjks.

Each run creates the helper, starts it and connects a kazoo client; times are from creating
the helper until its start call returns and until the client is connected, memory the resident set of the server
process(es) once the client is connected. Prints one JSON object per helper."""

import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time

from kazoo.client import KazooClient

import zkd


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for pid %d" % pid)


def connect(hosts):
    c = KazooClient(hosts=hosts, timeout=30.0)
    c.start(timeout=120)
    return c


def zkd_run(ensemble=None):
    t0 = time.perf_counter()
    server = zkd.Server(ensemble=ensemble)
    server.start()
    started = time.perf_counter() - t0
    client = connect(server.hosts)
    elapsed = time.perf_counter() - t0
    client.create("/probe", b"x")
    rss = rss_kib(server.pid)
    client.stop()
    client.close()
    server.stop()
    return started, elapsed, rss


def ports_free(base, count):
    for port in range(base, base + count):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def kazoo_harness_run(size, classpath):
    from kazoo.testing.common import ZookeeperCluster

    # The harness uses fixed ports from an offset; pick one whose ports are all free.
    while True:
        offset = random.randrange(21000, 60000, 100)
        if ports_free(offset, 60):
            break
    t0 = time.perf_counter()
    cluster = ZookeeperCluster(classpath=classpath, size=size, port_offset=offset)
    cluster.start()
    started = time.perf_counter() - t0
    hosts = ",".join(s.address for s in cluster)
    try:
        client = connect(hosts)
        elapsed = time.perf_counter() - t0
        client.create("/probe", b"x")
        rss = sum(rss_kib(s.process.pid) for s in cluster)
        client.stop()
        client.close()
    finally:
        cluster.stop()
        cluster.terminate()
    return started, elapsed, rss


def java_run(mode):
    # A fresh JVM per run, as a test JVM would be: see MeasureJavaHelpers.java.
    cmd = ["java", "-XX:+UseSerialGC", "-cp", os.environ["JAVA_CP"], "MeasureJavaHelpers", mode]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300).stdout
    row = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
    return (
        row["started_us"] / 1e6,
        row["connected_us"] / 1e6,
        row["jvm_growth_kib"] + row["child_rss_kib"],
    )


def measure(name, runs, fn, *args):
    starts, times, mems = [], [], []
    for _ in range(runs):
        s, t, m = fn(*args)
        starts.append(s)
        times.append(t)
        mems.append(m)
    row = {
        "helper": name,
        "runs": runs,
        "started_ms_median": round(statistics.median(starts) * 1000, 1),
        "connected_ms_median": round(statistics.median(times) * 1000, 1),
        "connected_ms_min": round(min(times) * 1000, 1),
        "rss_mib_median": round(statistics.median(mems) / 1024, 1),
    }
    print(json.dumps(row), flush=True)
    return row


HELPERS = {
    # key: (ecosystem, helper, what the memory column counts)
    "zkd": ("Python", "`zkd.Server` / `zkd_server` fixture", "zkd process"),
    "kazoo1": ("Python", "kazoo's harness, `ZOOKEEPER_CLUSTER_SIZE=1`", "1 JVM"),
    "kazoo3": ("Python", "kazoo's harness, default cluster of 3", "3 JVMs"),
    "zkd3": ("Python", "`zkd.Server(ensemble=3)`", "zkd process"),
    "java-zkd": ("Java", "`new ZkdTestingServer()`", "zkd process + test-JVM growth"),
    "java-curator": ("Java", "Curator `new TestingServer()`", "test-JVM growth"),
    "java-zkd-cluster": ("Java", "`new ZkdTestingCluster(3)`, `start()`", "zkd process + test-JVM growth"),
    "java-curator-cluster": ("Java", "Curator `new TestingCluster(3)`, `start()`", "test-JVM growth"),
}


def main():
    runs = int(os.environ.get("RUNS", "5"))
    which = sys.argv[1:] or list(HELPERS)
    rows = []
    for w in which:
        if w in ("zkd", "zkd3"):
            row = measure(w, runs, zkd_run, 3 if w == "zkd3" else None)
        elif w in ("kazoo1", "kazoo3"):
            size = 1 if w == "kazoo1" else 3
            row = measure(w, runs, kazoo_harness_run, size, os.environ["ZK_CLASSPATH"])
        elif w in ("java-zkd", "java-curator", "java-zkd-cluster", "java-curator-cluster"):
            row = measure(w, runs, java_run, w.split("-", 1)[1])
        else:
            raise SystemExit("unknown helper %r; expected one of %s" % (w, ", ".join(HELPERS)))
        rows.append(row)
    print()
    print("| ecosystem | helper | up (start call returns) | first client connected | memory (RSS) | memory counts |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        eco, name, counts = HELPERS[row["helper"]]
        print("| %s | %s | %.0f ms | %.0f ms | %.1f MiB | %s |" % (
            eco, name, row["started_ms_median"], row["connected_ms_median"],
            row["rss_mib_median"], counts))
    print()
    print("Medians of %d runs each, on %s (%d CPUs, load average %.1f)." % (
        runs, os.uname().machine, os.cpu_count(), os.getloadavg()[0]))


if __name__ == "__main__":
    main()
