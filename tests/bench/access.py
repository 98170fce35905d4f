#!/usr/bin/env python3
"""Pipelined puts on a restricted listener against the main one (make bench).

    python3 tests/bench/access.py [--tubed build/tubed] [--bench build/tubed-bench]
                                  [--rounds 5] [--requests 200000]

Starts tubed (fresh for every round) on free 127.0.0.1 ports with a config
file holding `[listen prod]`: role = producer, tubes = app-* (spec
access.md). Each round runs the same tubed-bench put workload (4
connections, 16 puts in flight each, 100-byte bodies, tube app-bench)
once on the -l/-p listener (admin, every tube: no check) and once on
`prod` (the role bitmask and the cached tube check on every put), in
alternating order so that drift in the machine's speed hits both alike.
Prints the median ops/s of each and their ratio prod / main (goal
>= 0.95), and writes the table to build/bench-access.md. Servers are
stopped by their pid.

On a machine shared with other work, ops/s swing with the load; the
server's own CPU time per put (utime + stime from /proc/PID/stat, read
around each run) moves much less, so the table also gives that and the
ratio of the costs, main / prod (1.0: the checks cost nothing).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from benchlib import cpu_seconds, free_port, wait_listening


def run_bench(bench, port, requests):
    r = subprocess.run([bench, "-p", str(port), "-w", "put", "-c", "4", "-P", "16",
                        "-n", str(requests), "-s", "100", "--tube", "app-bench",
                        "--csv", "-q"], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit("tubed-bench failed: %s %s" % (r.stdout, r.stderr))
    head, row = r.stdout.strip().splitlines()[-2:]
    return float(dict(zip(head.split(","), row.split(",")))["ops_per_sec"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tubed", default="build/tubed")
    ap.add_argument("--bench", default="build/tubed-bench")
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", 5)))
    ap.add_argument("--requests", type=int,
                    default=20000 if os.environ.get("QUICK") == "1" else 200000)
    ap.add_argument("--out", default=os.path.join(os.environ.get("BUILD", "build"),
                                                  "bench-access.md"))
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="tubed-bench-access-")
    conf = os.path.join(tmp, "tubed.conf")
    results = {"main": [], "prod": []}
    cpu = {"main": [], "prod": []}   # server CPU microseconds per put
    try:
        for rnd in range(a.rounds):
            main_port, prod_port = free_port(), free_port()
            with open(conf, "w") as f:
                f.write("[listen prod]\naddress = 127.0.0.1:%d\nrole = producer\n"
                        "tubes = app-*\n" % prod_port)
            proc = subprocess.Popen([a.tubed, "-l", "127.0.0.1", "-p", str(main_port),
                                     "--config", conf], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_listening([main_port, prod_port], proc)
                order = [("main", main_port), ("prod", prod_port)]
                if rnd % 2:
                    order.reverse()
                for name, port in order:
                    before = cpu_seconds(proc.pid)
                    results[name].append(run_bench(a.bench, port, a.requests))
                    cpu[name].append((cpu_seconds(proc.pid) - before) * 1e6 / a.requests)
            finally:
                proc.terminate()
                proc.wait(30)
    finally:
        for n in os.listdir(tmp):
            os.unlink(os.path.join(tmp, n))
        os.rmdir(tmp)

    m, p = statistics.median(results["main"]), statistics.median(results["prod"])
    ratio = p / m
    cm, cp = statistics.median(cpu["main"]), statistics.median(cpu["prod"])
    cratio = cm / cp if cp else float("nan")
    lines = [
        "# Access: pipelined puts on a producer listener (tubes = app-*) vs the main one",
        "",
        "%d rounds of %d puts, 4 connections x 16 in flight, 100-byte bodies; medians."
        % (a.rounds, a.requests),
        "",
        "| listener | puts/s (median) | all rounds |",
        "| --- | ---: | --- |",
        "| main (-l/-p, admin, every tube) | %.0f | %s |"
        % (m, ", ".join("%.0f" % x for x in results["main"])),
        "| prod (producer, tubes = app-*) | %.0f | %s |"
        % (p, ", ".join("%.0f" % x for x in results["prod"])),
        "",
        "ratio prod / main: %.3f (goal >= 0.95: %s)" % (ratio, "met" if ratio >= 0.95
                                                         else "NOT met"),
        "",
        "| listener | server CPU us/put (median) | all rounds |",
        "| --- | ---: | --- |",
        "| main | %.3f | %s |" % (cm, ", ".join("%.3f" % x for x in cpu["main"])),
        "| prod | %.3f | %s |" % (cp, ", ".join("%.3f" % x for x in cpu["prod"])),
        "",
        "CPU cost ratio main / prod: %.3f (1.0: the role and tube checks cost nothing; "
        "goal >= 0.95: %s)" % (cratio, "met" if cratio >= 0.95 else "NOT met"),
        "load average at the end: %s" % " ".join(open("/proc/loadavg").read().split()[:3]),
    ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
