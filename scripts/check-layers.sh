#!/usr/bin/env bash
# Checks that zkd-server's modules import one way only: every `crate::…` path in server/src
# must name a module of the same layer or of a layer lower in ORDER below. An import that
# points up the order, or sideways to another layer of the same rank, fails the check with
# the file:line and both layers. Paths through the crate root (`crate::Config`) are resolved
# through the `pub use` lines of lib.rs. The core is the zkd-core crate (core/), reached as
# `crate::core` through lib.rs's `pub(crate) use zkd_core as core`: the lowest layer, which
# cannot import the server at all.
#
# Usage: scripts/check-layers.sh [--graph]   (exit 0 = clean, 1 = violations; --graph also
# prints which layer imports which)
set -euo pipefail
cd "$(dirname "$0")/.."

# Lowest first. `<` separates ranks; layers of one rank (`,`) may not import each other.
ORDER='core < files < config, fixture < engine < reports, persist < net < control < admin < server'

# Layer of each top-level module of server/src (a module not listed is its own layer).
# `lib` is the crate root (lib.rs), `tests` the in-process whole-server tests.
MODULES='core: core zkd_core version_string
server: server lib tests'

exec python3 - server/src "$ORDER" "$MODULES" "${1:-}" <<'PY'
import os, re, sys

src, order, modules, graph = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "--graph"
edges = {}
rank = {}
for i, group in enumerate(order.split("<")):
    for layer in group.split(","):
        rank[layer.strip()] = i
layer_of = {m: m for m in rank}
for line in modules.splitlines():
    layer, mods = line.split(":")
    for m in mods.split():
        layer_of[m] = layer.strip()

def top_module(path):
    rel = os.path.relpath(path, src)
    return re.sub(r"\.rs$", "", rel.split(os.sep)[0])

# crate-root names re-exported by lib.rs: `pub use module::…::{A, B}` maps A and B to module.
root = {}
lib = open(os.path.join(src, "lib.rs")).read()
for m in re.finditer(r"pub(?:\(crate\))?\s+use\s+(\w+)::([^;]*);", lib, re.S):
    names = re.findall(r"\b(\w+)\b(?:\s+as\s+(\w+))?", m.group(2).split("{")[-1])
    for name, alias in names:
        root[alias or name] = m.group(1)

path_re = re.compile(r"\bcrate::(\w+)")
group_re = re.compile(r"\bcrate::\{([^}]*)\}")
bad = 0
for dirpath, dirs, files in os.walk(src):
    dirs.sort()
    if os.path.relpath(dirpath, src).split(os.sep)[0] == "core":
        continue
    for f in sorted(files):
        if not f.endswith(".rs"):
            continue
        path = os.path.join(dirpath, f)
        here = layer_of.get(top_module(path), top_module(path))
        text = open(path).read()
        # Doc comments may name anything; only code counts.
        code = re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), text)
        targets = [(m.start(), m.group(1)) for m in path_re.finditer(code)]
        for g in group_re.finditer(code):
            targets += [(g.start(), n) for n in re.findall(r"(?:^|,)\s*(\w+)", g.group(1))]
        for pos, name in targets:
            module = root.get(name, name)
            there = layer_of.get(module, module)
            if there != here:
                edges.setdefault(here, set()).add(there)
            if there == here or there not in rank or here not in rank:
                if there != here and (there not in rank or here not in rank):
                    print(f"{path}:{code.count(chr(10), 0, pos) + 1}: "
                          f"module {module!r} or {top_module(path)!r} has no layer in ORDER")
                    bad += 1
                continue
            if rank[there] >= rank[here]:
                way = "up" if rank[there] > rank[here] else "sideways"
                print(f"{path}:{code.count(chr(10), 0, pos) + 1}: {here} imports {there} "
                      f"({way}; allowed order: {order})")
                bad += 1
if graph:
    for layer in sorted(edges, key=lambda l: (rank.get(l, -1), l)):
        print(f"{layer} -> {', '.join(sorted(edges[layer], key=lambda l: (rank.get(l, -1), l)))}")
sys.exit(1 if bad else 0)
PY
