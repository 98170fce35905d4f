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

Front-ends (src/proto/NAME/) see the engine through its API only. A file
there fails the check when it
  - includes a header that lives anywhere under src/engine/ (sub-folders
    too, such as the store) other than the public ones, PUBLIC_ENGINE;
  - includes a header of another front-end (src/proto/OTHER/): what two
    front-ends share belongs in net/ or lib/;
  - reads a field of struct Engine: `X->f` or `X.f` where X is declared
    an Engine in that file, `eng.f` / `eng->f` (the Server's engine), or
    `something_engine(...)->f`, for every field f of struct Engine (read
    from its definition, so a new field is covered at once). Comments and
    string literals are ignored. The engine.h accessors are the way in.
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
# The engine headers a front-end may include: the operations, the worker,
# the statistics snapshot.
PUBLIC_ENGINE = {"engine.h", "worker.h", "snapshot.h"}


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


def header_dirs():
    """{header file name: its folder relative to src/} for the server's
    headers (bench and cli excluded)."""
    where = {}
    for dirpath, _, files in os.walk(ROOT):
        rel_dir = os.path.relpath(dirpath, ROOT)
        if rel_dir.split(os.sep)[0] in ("bench", "cli"):
            continue
        for f in files:
            if f.endswith(".h"):
                where[f] = rel_dir
    return where


def strip_c(text):
    """text without comments and string/char literals (same line count)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def engine_fields():
    """The member names of struct Engine, from its definition."""
    for dirpath, _, files in os.walk(os.path.join(ROOT, "engine")):
        for f in files:
            if not f.endswith(".h"):
                continue
            with open(os.path.join(dirpath, f), encoding="utf-8", errors="replace") as fh:
                text = strip_c(fh.read())
            m = re.search(r"\bstruct\s+Engine\s*\{", text)
            if not m:
                continue
            depth, i = 1, m.end()
            body_start = i
            while depth and i < len(text):
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                i += 1
            body = text[body_start:i - 1]
            # nested struct bodies declare their own members: drop them
            while re.search(r"\{[^{}]*\}", body):
                body = re.sub(r"\{[^{}]*\}", "", body)
            names = set()
            for decl in body.split(";"):
                decl = re.sub(r"\[[^\]]*\]", "", decl)
                fn = re.search(r"\(\s*\*\s*(\w+)\s*\)\s*\(", decl)
                if fn:
                    names.add(fn.group(1))
                    continue
                for part in decl.split(","):
                    m2 = re.search(r"(\w+)\s*$", part.strip())
                    if m2:
                        names.add(m2.group(1))
            return names
    return set()


def front_end_problems():
    """Front-ends through the engine's API only (see the docstring)."""
    problems = []
    where = header_dirs()
    fields = engine_fields()
    if not fields:
        problems.append("struct Engine not found under src/engine: cannot check fields")
    proto_root = os.path.join(ROOT, "proto")
    for dirpath, _, files in os.walk(proto_root):
        rel_dir = os.path.relpath(dirpath, ROOT)
        front = rel_dir.split(os.sep)[1] if len(rel_dir.split(os.sep)) > 1 else ""
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            rel = os.path.join(rel_dir, f)
            with open(os.path.join(dirpath, f), encoding="utf-8", errors="replace") as fh:
                raw = fh.read()
            for inc in INCLUDE.findall(raw):
                name = os.path.basename(inc)
                home = where.get(name)
                if home is None:
                    continue
                parts = home.split(os.sep)
                if parts[0] == "engine" and name not in PUBLIC_ENGINE:
                    problems.append("%s includes %s (%s/): a front-end uses only %s"
                                    % (rel, name, home, ", ".join(sorted(PUBLIC_ENGINE))))
                if parts[0] == "proto" and len(parts) > 1 and parts[1] != front:
                    problems.append("%s includes %s: a header of the %s front-end"
                                    % (rel, name, parts[1]))
            problems += engine_field_reads(rel, strip_c(raw), fields)
    return problems


def engine_field_reads(rel, text, fields):
    names = set(re.findall(r"\bEngine\s*\*\s*(?:const\s+)?(\w+)", text))
    names |= set(re.findall(r"\bEngine\s+(\w+)\s*[;=,)]", text))
    pats = [r"\beng\s*(?:\.|->)\s*(\w+)", r"\w*engine\s*\([^()]*\)\s*->\s*(\w+)"]
    if names:
        pats.append(r"\b(?:%s)\s*(?:\.|->)\s*(\w+)" % "|".join(sorted(names)))
    found = {}
    for pat in pats:
        for m in re.finditer(pat, text):
            if m.group(1) in fields:
                line = text.count("\n", 0, m.start()) + 1
                found[(line, m.group(1))] = None
    return ["%s:%d reads struct Engine's field %s: use engine.h's accessors"
            % (rel, line, f) for line, f in found]


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
    problems += front_end_problems()
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
