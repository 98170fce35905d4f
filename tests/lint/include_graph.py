#!/usr/bin/env python3
"""The include graph of src/ has no cycle, and the layers point down.

    python3 tests/lint/include_graph.py [--dot]

A module is a .c and its .h (by base name); an edge A -> B is an
`#include "B.h"` in A.c or A.h. Fails (exit 1) on a cycle, naming it, or
when a module includes one from a layer above its own:

    lib < config < engine/store < engine < net < proto/* < main

(a front-end may use the engine and the connection layer; the engine may
use neither). engine/store (the binlog files, codec, replay, fsync thread
and read-behind) sits under the rest of the engine; it may reach up only
along the edges named in STORE_UP, each with its reason; the rest of the
engine reaches the store through store.h (STORE_FACE). src/bench and
src/cli are separate programs and are checked for cycles only. --dot
prints the graph in Graphviz form.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")
LAYERS = {"lib": 0, "config": 1, "engine/store": 2, "engine": 3, "net": 4, "proto": 5,
          "": 6}
# The store's documented edges into the engine above it (the cycle check
# still covers them).
STORE_UP = {
    "core": "the engine's state embeds the store's (Binlog, Spill) and the "
            "store works on it",
    "job": "records are made from and replayed into jobs",
    "tube": "a job record names its tube; replay creates tubes",
    "queue": "replay rebuilds jobs through the queue (queue_restore, "
             "queue_job_new); compaction deletes a job whose record is lost",
}
# The rest of the engine reaches the store through these headers only
# (store.h, and the state types core.h embeds) ...
STORE_FACE = {"store", "storestate"}
# ... but for queue.c, which replay itself uses: through store.h it would
# close the cycle queue -> store -> binlog -> blreplay -> queue.
STORE_DIRECT = {("queue", "spill"): "read-behind keeps a queued job's body"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(rel):
    parts = rel.split(os.sep)
    if len(parts) > 2 and parts[0] == "engine" and parts[1] == "store":
        return "engine/store", LAYERS["engine/store"]
    top = parts[0] if len(parts) > 1 else ""
    return top, LAYERS.get(top)


def scan(program_dir=None):
    """{module: (layer_name, layer_rank, set(included modules))}"""
    mods = {}
    for dirpath, dirs, files in os.walk(ROOT):
        rel_dir = os.path.relpath(dirpath, ROOT)
        top = rel_dir.split(os.sep)[0]
        in_program = top in ("bench", "cli")
        if (program_dir is None) == in_program or (program_dir and top != program_dir):
            continue
        for f in files:
            if not f.endswith((".c", ".h")):
                continue
            mod = f[:-2]
            rel = os.path.relpath(os.path.join(dirpath, f), ROOT)
            name, rank = layer_of(rel)
            with open(os.path.join(dirpath, f), encoding="utf-8", errors="replace") as fh:
                incs = {os.path.basename(i)[:-2] for i in INCLUDE.findall(fh.read())
                        if i.endswith(".h")}
            entry = mods.setdefault(mod, [name, rank, set()])
            entry[2] |= incs - {mod}
    return mods


def find_cycle(mods):
    WHITE, GREY, BLACK = 0, 1, 2
    color = {m: WHITE for m in mods}
    stack = []

    def visit(m):
        color[m] = GREY
        stack.append(m)
        for n in sorted(mods[m][2]):
            if n not in mods:
                continue  # a header of another program or of the system
            if color[n] == GREY:
                return stack[stack.index(n):] + [n]
            if color[n] == WHITE:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        color[m] = BLACK
        return None

    for m in sorted(mods):
        if color[m] == WHITE:
            found = visit(m)
            if found:
                return found
    return None


def main():
    problems = []
    server = scan()
    for prog in ("bench", "cli"):
        cyc = find_cycle(scan(prog))
        if cyc:
            problems.append("cycle in src/%s: %s" % (prog, " -> ".join(cyc)))
    cyc = find_cycle(server)
    if cyc:
        problems.append("cycle: " + " -> ".join(cyc))
    for m, (lname, rank, incs) in sorted(server.items()):
        for n in sorted(incs):
            if n in server and server[n][1] > rank and not (
                    lname == "engine/store" and server[n][0] == "engine" and n in STORE_UP):
                problems.append("%s (%s) includes %s (%s): a layer above it"
                                % (m, lname or "main", n, server[n][0] or "main"))
    for m, (lname, rank, incs) in sorted(server.items()):
        if lname != "engine":
            continue
        for n in sorted(incs):
            if (n in server and server[n][0] == "engine/store" and n not in STORE_FACE
                    and (m, n) not in STORE_DIRECT):
                problems.append("%s (engine) includes %s: the engine reaches the store "
                                "through store.h" % (m, n))
    if "--dot" in sys.argv:
        print("digraph include {")
        for m, (_, _, incs) in sorted(server.items()):
            for n in sorted(incs):
                if n in server:
                    print('  "%s" -> "%s";' % (m, n))
        print("}")
    edges = sum(len([n for n in incs if n in server]) for _, _, incs in server.values())
    for p in problems:
        print("include graph: " + p)
    print("include graph: %d modules, %d edges, %s" %
          (len(server), edges, "no cycle, layers point down" if not problems else "FAILED"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
