#!/usr/bin/env bash
# Checks that every crate's modules import one way only, at every depth: each module's child
# modules are declared below in an order, lowest first, and a `crate::…`, `super::…` or
# `self::…` path in a file must name a module of a lower rank than its own among the
# children of the module they share. An import that points up the order, or sideways to a
# module of the same rank, fails the check with the file:line, the two modules and the
# order. Paths through re-exports (`crate::Frame`, `use` lines of lib.rs or a mod.rs) are
# followed to the module that holds the item.
#
# Two kinds of reference are not sibling imports and pass: a module naming its own
# descendants (the file that declares them), and a module naming what a file above it
# defines (such as `crate::Core`, which the core's modules extend with `impl Core`). Test
# code (modules declared under `#[cfg(test)]`, and `#[cfg(test)] mod tests { … }` blocks)
# sits above every order and is not checked. Other crates are reached by their crate name
# and their order is Cargo's: the core cannot name the server at all.
#
# Every module with two or more non-test children needs a line below, and each of those
# children a place in it.
#
# Usage: scripts/check-layers.sh [--graph]   (exit 0 = clean, 1 = violations; --graph also
# prints, per module, which of its children imports which)
set -euo pipefail
cd "$(dirname "$0")/.."

# "<crate directory>[/<module path>]: <its children, lowest first>". `<` separates ranks;
# modules of one rank (`,`) may not import each other.
ORDERS='
protocol:          jute < consts, four_letter, records < opcode < disk, create, frame < multi < request, response
protocol/disk:     txnlog < snapshot
core:              zk_version < data < frame_parts < watch < db < auth < session < durability < request < ensemble < testing < state_report < decode
core/data:         path, keyed, work, counted < node < acl_table, children_cache, cow_slot, tree_slab < tree
core/watch:        herd_detector < watches
core/auth:         sasl_users < digest_md5 < secure_auth < acl
core/session:      connection < handshake, sessions
core/durability:   snapshot_cow, txn_record < snapshot
core/db:           apply
core/request:      reply, txn < read < execute
core/ensemble:     servers < lag, membership, quorum, reconfig
core/testing:      fault < control_ops, fixture_nodes, invariants, recording, session
server:            version_string < files < config, fixture < engine < reports, persist < net < control < admin < server < history_guard
server/engine:     history < clock, gate, input_budget, kept_membership, latency, outbound, records, slow_step, unsynced < durable < ensemble < net_faults < queue < facts, feed, listeners
server/engine/ensemble: failover, follow
server/engine/history: event, frames, slots, text_ring
server/reports:    civil_date, host, monitor_keys, recipe_checks < timeline, metrics, report < format, gate, worker
server/persist:    datadir < load < txnlog
server/net:        input, member, stream, x509_dn < conn < tls
server/control:    member_lag, members, net_faults, partition
server/admin:      error, outgoing < listen < guard, control, herd, metrics, persist, members < member_lag, commands, history, net_faults, web, zk_controller
cli:               alloc, datadir, gen_certs, kept_membership, pow, snapshot, trim, zoocfg, ctl_client < config_file, history, members, net_faults < serve, ctl
cli/zoocfg:        env, props, servers < keys < members < apply
benches:           epoll, floor_reply, proc, progress, report < pool < util < cpus, comparison, floor_disk < servers, plot, throughput, admin_stall, herd < watchers, footprint, snapshot, ensemble_startup, durable, floor_tokio, floor_epoll < fanout, floor < floor_run < compare, changes
testkit:           under < frame, http, oracle, proc_status, raw < target
testkit/oracle:    netns < ensemble < member_control
'

exec python3 - "$ORDERS" "${1:-}" <<'PY'
import os, re, sys

orders_text, graph = sys.argv[1], sys.argv[2] == "--graph"


def blank(s):
    return re.sub(r"[^\n]", " ", s)


def strip(text):
    """Comments and string and char literals blanked out, offsets and lines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c == "r" and re.match(r'r#*"', text[i:i + 8]) and not re.match(r"\w", text[i - 1:i]):
            m = re.match(r'r(#*)"', text[i:])
            j = text.find('"' + m.group(1), i + len(m.group(0)))
            j = n if j < 0 else j + 1 + len(m.group(1))
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
        elif c == "'" and re.match(r"'(\\[^']*|[^\\'])'", text[i:]):
            j = i + len(re.match(r"'(\\[^']*|[^\\'])'", text[i:]).group(0))
        else:
            out.append(c)
            i += 1
            continue
        out.append(blank(text[i:j]))
        i = j
    return "".join(out)


def block_end(code, i):
    depth = 0
    for j in range(i, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code)


def use_tree(code, i):
    """The paths of the use tree (or path) starting at offset i: [(segments, alias)]."""
    res = []
    tok = re.compile(r"\s*(\w+|\*|\{)")

    def tree(i, prefix):
        segs = list(prefix)
        while True:
            m = tok.match(code, i)
            if not m:
                return i
            i = m.end()
            if m.group(1) == "{":
                while True:
                    i = tree(i, segs)
                    m = re.compile(r"\s*([,}])").match(code, i)
                    if not m:
                        return i
                    i = m.end()
                    if m.group(1) == "}":
                        return i
                    m = re.compile(r"\s*\}").match(code, i)
                    if m:
                        return m.end()
            segs.append(m.group(1))
            m = re.compile(r"\s*::").match(code, i)
            if m:
                i = m.end()
                continue
            m = re.compile(r"\s+as\s+(\w+)").match(code, i)
            res.append((segs, m.group(1) if m else None))
            return m.end() if m else i

    tree(i, [])
    return res


class Module:
    def __init__(self, path, file, test):
        self.path, self.file, self.test = path, file, test
        self.code = strip(open(file).read())
        self.children, self.uses = {}, {}
        self.inline = []  # (start, end, is_test) of `mod name { … }` blocks

    def depth(self, pos):
        return sum(1 for s, e, _ in self.inline if s < pos < e)

    def in_test(self, pos):
        return self.test or any(t and s < pos < e for s, e, t in self.inline)


TEST_ATTR = r"#\[cfg\(test\)\]"
ATTRS = r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?"


def load(modules, path, file, test):
    mod = Module(path, file, test)
    modules[path] = mod
    code = mod.code
    for m in re.finditer(ATTRS + r"\bmod\s+(\w+)\s*\{", code):
        start = m.end() - 1
        mod.inline.append((start, block_end(code, start), bool(re.search(TEST_ATTR, m.group(1)))))
    raw = open(file).read()
    base = os.path.dirname(file)
    stem = os.path.basename(file)[:-3]
    own_dir = base if stem in ("mod", "lib", "main") or not path else os.path.join(base, stem)
    for m in re.finditer(ATTRS + r"\bmod\s+(\w+)\s*;", raw):
        if mod.depth(m.start()):
            continue
        name = m.group(2)
        given = re.search(r'#\[path\s*=\s*"([^"]*)"\]', m.group(1))
        if given:
            f = os.path.normpath(os.path.join(base, given.group(1)))
        else:
            f = os.path.join(own_dir, name + ".rs")
            if not os.path.exists(f):
                f = os.path.join(own_dir, name, "mod.rs")
        is_test = test or bool(re.search(TEST_ATTR, m.group(1)))
        mod.children[name] = load(modules, path + (name,), f, is_test)
    for m in re.finditer(r"\buse\s+", code):
        if mod.depth(m.start()) or re.match(r"\w", code[m.start() - 1:m.start()]):
            continue
        for segs, alias in use_tree(code, m.end()):
            if segs[-1] == "self":
                segs = segs[:-1]
            name = alias or segs[-1]
            if segs and name not in ("*", "_"):
                mod.uses[name] = segs
    return mod


def absolute(modules, here, segs, hops=0):
    """Segments written in module `here`, from the crate root; None outside the crate."""
    if segs[0] == "crate":
        return list(segs[1:])
    if segs[0] == "self":
        return list(here) + list(segs[1:])
    if segs[0] == "super":
        k = 0
        while k < len(segs) and segs[k] == "super":
            k += 1
        return list(here[:len(here) - k]) + list(segs[k:])
    mod = modules[here]
    if segs[0] in mod.children:
        return list(here) + list(segs)
    if segs[0] in mod.uses and mod.uses[segs[0]][0] != segs[0] and hops < 20:
        a = absolute(modules, here, mod.uses[segs[0]], hops + 1)
        return None if a is None else a + list(segs[1:])
    return None


def holder(modules, segs, hops=0):
    """The module that holds what the absolute path names (through `use` re-exports)."""
    cur = ()
    for i, s in enumerate(segs):
        mod = modules[cur]
        if s in mod.children:
            cur += (s,)
        elif s in mod.uses and hops < 20:
            a = absolute(modules, cur, mod.uses[s], hops + 1)
            return cur if a is None else holder(modules, a + list(segs[i + 1:]), hops + 1)
        else:
            break
    return cur


# The declared orders: "<crate dir>[/<module path>]: a < b, c < d".
orders = {}
for line in orders_text.strip().splitlines():
    key, order = line.split(":", 1)
    crate, _, inner = key.strip().partition("/")
    ranks = {}
    for i, group in enumerate(order.split("<")):
        for name in group.split(","):
            ranks[name.strip()] = i
    orders[(crate, tuple(inner.split("/")) if inner else ())] = (ranks, " ".join(order.split()))

bad = 0
edges = {}
reported = set()


def fail(msg):
    global bad
    print(msg)
    bad += 1


crates = sorted({crate for crate, _ in orders})
for crate in crates:
    roots = [os.path.join(crate, "src", f) for f in ("lib.rs", "main.rs")
             if os.path.exists(os.path.join(crate, "src", f))]
    for root in roots:
        modules = {}
        load(modules, (), root, False)
        # Every module with two or more (non-test) children declares their order.
        for path, mod in sorted(modules.items()):
            kids = sorted(n for n, c in mod.children.items() if not c.test)
            name = "/".join((crate,) + path)
            if len(kids) < 2:
                continue
            if (crate, path) not in orders:
                fail(f"{mod.file}: module {name} has no order in scripts/check-layers.sh")
                continue
            ranks = orders[(crate, path)][0]
            for k in kids:
                if k not in ranks:
                    fail(f"{mod.file}: module {k!r} is not in the order of {name}")
        for path, mod in sorted(modules.items()):
            code = mod.code
            for m in re.finditer(r"(?<![\w:$])(crate|super|self)\s*::", code):
                if mod.in_test(m.start()):
                    continue
                line = code.count("\n", 0, m.start()) + 1
                d = mod.depth(m.start())
                for segs, _ in use_tree(code, m.start()):
                    segs = [s for s in segs if s not in ("*", "self")] if segs[0] != "self" else segs
                    if segs[0] == "self" and d:
                        segs = ["crate"] + list(path) + segs[1:]
                    elif segs[0] == "super" and d:
                        k = 0
                        while k < len(segs) and segs[k] == "super":
                            k += 1
                        segs = ["crate"] + list(path[:len(path) - max(0, k - d)]) + segs[k:]
                    a = absolute(modules, path, segs)
                    if a is None:
                        continue
                    there = holder(modules, a)
                    n = 0
                    while n < min(len(path), len(there)) and path[n] == there[n]:
                        n += 1
                    if n == len(path) or n == len(there):
                        continue  # its own descendants, or what an enclosing file defines
                    parent, h, t = path[:n], path[n], there[n]
                    level = "/".join((crate,) + parent)
                    edges.setdefault(level, {}).setdefault(h, set()).add(t)
                    ranks, order = orders.get((crate, parent), ({}, ""))
                    if h not in ranks or t not in ranks:
                        continue  # reported above as missing from the order
                    if ranks[t] >= ranks[h] and (mod.file, line, t) not in reported:
                        reported.add((mod.file, line, t))
                        way = "up" if ranks[t] > ranks[h] else "sideways"
                        fail(f"{mod.file}:{line}: {level}: {h} imports {t} "
                             f"({way}; allowed order: {order})")
if graph:
    for level in sorted(edges):
        ranks = next((r for (c, p), (r, _) in orders.items() if "/".join((c,) + p) == level), {})
        by = lambda l: (ranks.get(l, -1), l)
        print(f"[{level}]")
        for h in sorted(edges[level], key=by):
            print(f"  {h} -> {', '.join(sorted(edges[level][h], key=by))}")
sys.exit(1 if bad else 0)
PY
