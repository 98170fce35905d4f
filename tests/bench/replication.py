#!/usr/bin/env python3
"""tests/bench/replication.py - `make bench`, replication side
(spec/replication.md §6.6, doc/replication.md).

1. The price of safety: pipelined puts (tubed-bench -w put -c 50 -P 16,
   100-byte bodies) on a primary with sync_replicas = 1 and one replica,
   against the same server alone, both with -f 0 and both with the default
   -f. The servers take turns within each round (alone, replicated, alone,
   ...), every run on freshly started servers with empty binlog
   directories; the table gives the median rate of each, the ratio
   replicated / alone as the median of each round's ratio (the two runs of
   a round share the load of the moment; targets: >= 0.7 with -f 0, >= 0.5
   with the default -f), every round's ratio, and the CPU seconds the
   servers used for the puts (alone; primary + replica): where the
   machine's cores are fewer than the client and both servers need, the
   ratio follows those. The last column says how far: the ratio the
   replicated puts would reach at the CPU they cost (both servers and
   tubed-bench) with every core busy and nothing waiting, against the
   alone rate (the median over rounds). A measured ratio near it is
   bound by this machine's cores, not by a wait.
2. Catch-up: a primary holding N jobs (put by tubed-bench), then a new
   replica from an empty directory; the time until its lag-records is 0
   gives its rate in jobs/s, against the primary's own put rate.
3. Promotion: promote a caught-up replica, time to the first answered put.

Environment / flags: --rounds (3), --puts (200000), --catchup (200000),
--quick (small sizes), --out (build/bench-replication.md), --tubed,
--bench, --f0-only (only the -f 0 comparison: quicker when comparing
builds), --reference (also -f 0 with a replica that never syncs, -F: what
the replica's fsync costs, and with a replica at its default -f, which
acknowledges once written; not targets). Every server is stopped by its pid on exit.
"""

import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

import benchlib
from benchlib import cpu_seconds, free_port

procs = []


def start(tubed, base, name, *flags):
    d = os.path.join(base, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    port = free_port()
    p = subprocess.Popen([tubed, "-l", "127.0.0.1", "-p", str(port), "-b", d] + list(flags),
                         stdout=subprocess.DEVNULL, stderr=open(d + ".log", "w"))
    procs.append(p)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p, port
        except OSError:
            time.sleep(0.02)
    raise SystemExit("%s did not start (see %s.log)" % (name, d))


def stop(p):
    benchlib.stop(p, 20)
    if p in procs:
        procs.remove(p)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.f = self.s.makefile("rwb")

    def cmd(self, line, body=None):
        self.f.write(line.encode() + b"\r\n" + (body + b"\r\n" if body is not None else b""))
        self.f.flush()
        return self.f.readline().strip()

    def repl(self):
        head = self.cmd("stats-replication")
        data = self.f.read(int(head.split()[1]) + 2).decode()
        return dict(l.split(": ", 1) for l in data.splitlines()[1:] if ": " in l)


def children_cpu():
    """CPU seconds of the children reaped so far (tubed-bench runs)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bench_put(bench, port, n):
    out = subprocess.run([bench, "-q", "--csv", "-p", str(port), "-w", "put", "-c", "50",
                          "-P", "16", "-s", "100", "-n", str(n)],
                         capture_output=True, text=True, check=True).stdout
    lines = [l for l in out.splitlines() if l.strip()]
    head, row = lines[0].split(","), lines[-1].split(",")
    return float(row[head.index("ops_per_sec")])


def wait_caught_up(port, primary_port, timeout=600):
    c, pc = Conn(port), Conn(primary_port)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        d, pd = c.repl(), pc.repl()
        if d.get("lag-records") == "0" and d.get("connected") == "true" and \
                d.get("position") == pd.get("position"):
            return
        time.sleep(0.01)
    raise SystemExit("replica did not catch up")


def price(args, base, fsync, replica_fsync=None):
    """Median rates, the median of each round's ratio (the two runs of a
    round share the machine's load of the moment), and the median CPU
    seconds the servers used: alone, and primary + replica. replica_fsync:
    the replica's own -f/-F flags when they differ from fsync."""
    rates = {"alone": [], "replicated": []}
    ratios, cpu_alone, cpu_pair, ceilings = [], [], [], []
    for _ in range(args.rounds):
        p, port = start(args.tubed, base, "alone", *fsync)
        c0 = cpu_seconds(p.pid)
        rates["alone"].append(bench_put(args.bench, port, args.puts))
        cpu_alone.append(cpu_seconds(p.pid) - c0)
        stop(p)
        p, port = start(args.tubed, base, "primary", "--sync-replicas", "1", *fsync)
        r, rport = start(args.tubed, base, "replica", "--replica-of", "127.0.0.1:%d" % port,
                         *(fsync if replica_fsync is None else replica_fsync))
        wait_caught_up(rport, port)
        c0 = cpu_seconds(p.pid) + cpu_seconds(r.pid)
        k0 = children_cpu()
        rates["replicated"].append(bench_put(args.bench, port, args.puts))
        cpu_pair.append(cpu_seconds(p.pid) + cpu_seconds(r.pid) - c0)
        # The ratio this machine allows before anything waits: the
        # replicated puts at the CPU they cost (both servers and the
        # client), every core busy, against the alone rate.
        per_put = (cpu_pair[-1] + children_cpu() - k0) / args.puts
        ceilings.append(os.cpu_count() / per_put / rates["alone"][-1] if per_put > 0
                        else float("inf"))
        stop(r)
        stop(p)
        ratios.append(rates["replicated"][-1] / rates["alone"][-1])
    return (statistics.median(rates["alone"]), statistics.median(rates["replicated"]),
            statistics.median(ratios), ratios, statistics.median(cpu_alone),
            statistics.median(cpu_pair), statistics.median(ceilings))


def catchup(args, base):
    p, port = start(args.tubed, base, "cp")
    put_rate = bench_put(args.bench, port, args.catchup)
    t0 = time.monotonic()
    r, rport = start(args.tubed, base, "cr", "--replica-of", "127.0.0.1:%d" % port)
    wait_caught_up(rport, port)
    dt = time.monotonic() - t0
    # Promotion: to the first answered put.
    c = Conn(rport)
    t1 = time.monotonic()
    line = c.cmd("promote")
    t2 = time.monotonic()
    ins = c.cmd("put 0 0 60 5", b"hello")
    t3 = time.monotonic()
    stop(r)
    stop(p)
    if not line.startswith(b"PROMOTED") or not ins.startswith(b"INSERTED"):
        raise SystemExit("promote/put: %r %r" % (line, ins))
    return put_rate, args.catchup / dt, (t3 - t1) * 1000, (t3 - t2) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tubed", default="build/tubed")
    ap.add_argument("--bench", default="build/tubed-bench")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--puts", type=int, default=200000)
    ap.add_argument("--catchup", type=int, default=200000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default="build/bench-replication.md")
    ap.add_argument("--f0-only", action="store_true",
                    help="only the -f 0 comparison (no default -f, catch-up, promotion)")
    ap.add_argument("--reference", action="store_true",
                    help="also -f 0 with a replica that never syncs (-F): what the "
                         "replica's fsync costs, and with a replica at its default -f; "
                         "not targets")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.puts, args.catchup = 1, 20000, 20000
    base = tempfile.mkdtemp(prefix="tubed-bench-repl-")
    lines = ["# Replication bench (tests/bench/replication.py)", "",
             "| workload | alone ops/s | sync_replicas=1 ops/s | ratio | target | "
             "ratio per round | CPU s alone / primary+replica | CPU ceiling of the ratio |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    try:
        runs = [("-f 0", ["-f", "0"], None, ">= 0.7")]
        if args.reference:
            runs.append(("-f 0, replica -F", ["-f", "0"], ["-F"], "(reference)"))
            # Spec 6.6 says "both -f 0" of the two servers compared; a
            # replica left at its default -f acknowledges once written.
            runs.append(("-f 0, replica default -f", ["-f", "0"], [], "(reference)"))
        if not args.f0_only:
            runs.append(("default -f", [], None, ">= 0.5"))
        for name, fsync, rfsync, target in runs:
            a, b, ratio, ratios, ca, cp, ceiling = price(args, base, fsync, rfsync)
            lines.append("| put 50x16, %s | %.0f | %.0f | %.2f | %s | %s | %.2f / %.2f | %.2f |"
                         % (name, a, b, ratio, target, " ".join("%.2f" % x for x in ratios),
                            ca, cp, ceiling))
            print(lines[-1], flush=True)
        if not args.f0_only:
            put_rate, rate, promote_ms, put_ms = catchup(args, base)
            lines += ["", "| catch-up of %d jobs | jobs/s | vs the primary's put rate |" % args.catchup,
                      "| --- | --- | --- |",
                      "| new replica, empty directory | %.0f | %.2f (put: %.0f ops/s) |"
                      % (rate, rate / put_rate, put_rate),
                      "", "promote to first answered put: %.1f ms (the put itself %.1f ms)"
                      % (promote_ms, put_ms)]
            print("\n".join(lines[-6:]))
    finally:
        for p in list(procs):
            stop(p)
        shutil.rmtree(base, ignore_errors=True)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
