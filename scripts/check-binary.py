"""Checks a built zkd binary as a user would meet it (run by scripts/test-packages.sh).

    python3 scripts/check-binary.py BINARY --commit SHA [--date "YYYY-MM-DD HH:MM"] [--chroot]

Starts BINARY with `env -i` (no environment at all: empty PATH, no HOME, no locale), or, with
--chroot, as the only file of an otherwise empty directory it is chrooted into (needs root),
and checks, through a kazoo client, that it serves: create, read, children, delete. Then that
`zkd --version`, `srvr` and `envi` all name the commit SHA (`unknown` allowed only when SHA is
`unknown`) and one build date: DATE when given, else a date between the commit's and now.
Also that nothing it logs warns of a missing random source (with --chroot there is no /dev).
Exits 1 with a sentence on the first mismatch.
"""

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from kazoo.client import KazooClient


def fail(msg):
    print("check-binary: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def start(argv, root=None):
    # Nothing of the caller's environment: a binary that needed PATH, a loader path or a
    # locale would show it here.
    if root is None:
        cmd = ["env", "-i"] + argv
    else:
        cmd = ["env", "-i", shutil.which("chroot") or "/usr/sbin/chroot", root, "/zkd"] + argv[1:]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode("utf-8", "replace")
        if not line:
            break
        seen.append(line)
        m = re.match(r"zkd listening on (127\.0\.0\.1:\d+)", line)
        if m:
            return proc, m.group(1), seen
    proc.kill()
    fail("zkd did not print its listening line: %r" % "".join(seen))


def version_parts(text, where):
    m = re.search(r"commit ([0-9a-f]{40}|unknown), built on (\d{4}-\d\d-\d\d \d\d:\d\d) UTC", text)
    if not m:
        fail("%s does not name a commit and build date: %r" % (where, text))
    return m.group(1), m.group(2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--date")
    ap.add_argument("--chroot", action="store_true")
    args = ap.parse_args()
    binary = os.path.abspath(args.binary)

    out = subprocess.run(
        ["env", "-i", binary, "--version"], capture_output=True, text=True, check=True
    ).stdout
    commit, date = version_parts(out.replace("(commit ", "commit "), "zkd --version")
    if commit != args.commit:
        fail("zkd --version names commit %s, expected %s" % (commit, args.commit))
    if args.date:
        if date != args.date:
            fail("zkd --version says built on %s, expected %s" % (date, args.date))
    else:
        built = datetime.datetime.strptime(date, "%Y-%m-%d %H:%M").replace(tzinfo=datetime.timezone.utc)
        now = datetime.datetime.now(datetime.timezone.utc)
        if built > now:
            fail("build date %s is in the future" % date)
        if commit != "unknown":
            ct = subprocess.run(
                ["git", "log", "-1", "--format=%ct", commit], capture_output=True, text=True
            ).stdout.strip()
            if ct and built < datetime.datetime.fromtimestamp(int(ct), datetime.timezone.utc).replace(
                second=0
            ):
                fail("build date %s is before the commit's date" % date)

    root = None
    if args.chroot:
        root = tempfile.mkdtemp(prefix="zkd-chroot-")
        shutil.copy2(binary, os.path.join(root, "zkd"))
        if sorted(os.listdir(root)) != ["zkd"]:
            fail("the chroot is not empty")
    proc, addr, seen = start([binary, "--port", "0", "--4lw-whitelist", "*"], root)
    try:
        zk = KazooClient(hosts=addr, timeout=10)
        zk.start(timeout=10)
        try:
            zk.create("/release-check", b"static")
            data, stat = zk.get("/release-check")
            if data != b"static" or stat.version != 0:
                fail("read back %r version %d" % (data, stat.version))
            if "release-check" not in zk.get_children("/"):
                fail("/release-check is not among the root's children")
            zk.delete("/release-check")
            srvr = zk.command(b"srvr")
            envi = zk.command(b"envi")
            # The release line zkd behaves as by default (--zookeeper-version 3.9).
            if zk.server_version()[:2] != (3, 9):
                fail("kazoo reads server version %r" % (zk.server_version(),))
        finally:
            zk.stop()
            zk.close()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)

    # Random seeds come from the getrandom system call, so even without /dev (the empty
    # chroot) nothing warns that SASL nonces are predictable.
    log = "".join(seen) + proc.stdout.read().decode("utf-8", "replace")
    if "predictable" in log or "random source" in log:
        fail("zkd warned about its random source: %r" % log)

    line = srvr.splitlines()[0]
    m = re.match(r"Zookeeper version: 3\.\d+\.\d+-zkd-[^-,]+-([0-9a-f]{40}|unknown), built on (\S+ \S+) UTC$", line)
    if not m or m.group(1) != commit or m.group(2) != date:
        fail("srvr's version line %r does not name commit %s built on %s" % (line, commit, date))
    m = re.search(r"^zookeeper\.version=(.*)$", envi, re.M)
    if not m or m.group(1) != line[len("Zookeeper version: "):]:
        fail("envi's zookeeper.version does not match srvr: %r" % (m.group(1) if m else envi))
    print(
        "check-binary: %s served kazoo%s; --version, srvr and envi name commit %s built on %s UTC"
        % (binary, " in an empty chroot" if args.chroot else " under env -i", commit, date)
    )


if __name__ == "__main__":
    main()
