#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus from the golden frames captured from ZooKeeper
(protocol/tests/fixtures/*.hex): usage make_seeds.py FIXTURE_DIR OUT_DIR.

* frame: each connection's client byte stream (length-prefixed frames), behind the two
  control bytes the target reads first (frame cap, chunk size), in a few chunkings;
* request: every client frame's payload (ConnectRequest or RequestHeader + body);
* core: per fixture, the steps that open each connection and deliver its client frames as
  raw frames (see the input format in fuzz_targets/core.rs), and the same with every server
  reply turned into a clock advance.
"""
import os
import struct
import sys


def streams(path):
    """Client frames per connection, in file order."""
    out = {}
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        tag, _, hexdata = line.partition(" ")
        if tag.endswith(">"):
            out.setdefault(tag[:-1] or "-", []).append(bytes.fromhex(hexdata))
    return out


def write(dirname, name, data):
    os.makedirs(dirname, exist_ok=True)
    with open(os.path.join(dirname, name), "wb") as f:
        f.write(data)


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    for fname in sorted(os.listdir(fixtures)):
        if not fname.endswith(".hex"):
            continue
        stem = fname[:-4]
        conns = streams(os.path.join(fixtures, fname))
        core = b""
        for idx, (conn, frames) in enumerate(sorted(conns.items())):
            stream = b"".join(frames)
            for cap, chunk in ((5, 0), (5, 1), (5, 7), (4, 3)):
                write(f"{out}/frame", f"{stem}-{conn}-{cap}-{chunk}", bytes([cap, chunk]) + stream)
            for i, frame in enumerate(frames):
                write(f"{out}/request", f"{stem}-{conn}-{i}", frame[4:])
            core += bytes([0, idx])
            for frame in frames:
                payload = frame[4:]
                core += bytes([1, idx]) + struct.pack(">H", len(payload)) + payload
        write(f"{out}/core", stem, core)
        # The same program with time passing after every frame, then a disconnect.
        timed = b""
        pos = 0
        while pos < len(core):
            tag = core[pos]
            if tag == 0:
                timed += core[pos:pos + 2]
                pos += 2
            else:
                (n,) = struct.unpack(">H", core[pos + 2:pos + 4])
                timed += core[pos:pos + 4 + n] + bytes([3, 0, 40])
                pos += 4 + n
        write(f"{out}/core", stem + "-timed", timed + bytes([4, 0, 3, 0xff, 0xff]))


if __name__ == "__main__":
    main()
