#!/usr/bin/env python3
"""Tube policies under load (part of `make bench`).

    python3 tests/bench/policies.py [--tubed build/tubed] [--bench build/tubed-bench]
                                    [--rounds 3] [--quick]

Three measurements, each against a freshly started tubed on a free
127.0.0.1 port, printed as a markdown table:

1. put with limits: tubed-bench's put workload (50 connections, 16 in
   flight each) with `max_items` and `max_age` in force on every tube,
   against the same without a config file; rounds alternate, medians, ratio.
2. expiry of N jobs at once (1,000,000; 100,000 with --quick): the jobs are
   put with `max_age = 6s` as fast as tubed-bench can, then a probe client
   on another connection does round trips (`stats-job 0`, answered
   NOT_FOUND) through the whole expiry window; the longest round trip is
   the longest stall a client saw while the sweep ran, next to the longest
   one of the same probe on an idle server.
3. fanout: one client pipelines puts into a parent with 10 fanout
   children; copies per second = children x puts per second, next to the
   same client's put rate into a tube without children.

Timing is reported, never asserted: machines are noisy.
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

from benchlib import Tubed

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def bench_put(bench, port, n):
    out = subprocess.run([bench, "-p", str(port), "-c", "50", "-P", "16", "-n", str(n),
                          "--csv", "-q"], capture_output=True, text=True, timeout=600)
    if out.returncode:
        sys.exit("policies.py: tubed-bench failed: " + out.stderr)
    head, row = out.stdout.strip().splitlines()[:2]
    return float(dict(zip(head.split(","), row.split(",")))["ops_per_sec"])


def put_with_limits(a):
    plain, limited = [], []
    n = 200000 if a.quick else 1000000
    conf = "max_items = 100000000\nmax_size = 100G\nmax_age = 1h\n"
    for _ in range(a.rounds):
        for cfg, res in ((None, plain), (conf, limited)):
            t = Tubed(a.tubed, cfg)
            try:
                res.append(bench_put(a.bench, t.port, n))
            finally:
                t.stop()
    p, l = statistics.median(plain), statistics.median(limited)
    return ("put, 50x16, max_items + max_size + max_age on every tube",
            "%.0f/s vs %.0f/s plain" % (l, p), "%.2f" % (l / p))


def probe(port, seconds):
    """Round trips for `seconds`: the longest and the 99.9th percentile, in
    ms (a VM's scheduler alone makes the longest one jumpy: compare both
    with the same probe on the idle server), and how many."""
    s = socket.create_connection(("127.0.0.1", port))
    rtts, end = [], time.time() + seconds
    while time.time() < end:
        t0 = time.perf_counter()
        s.sendall(b"stats-job 0\r\n")
        got = b""
        while not got.endswith(b"\r\n"):
            got += s.recv(64)
        rtts.append(time.perf_counter() - t0)
    s.close()
    rtts.sort()
    return rtts[-1] * 1000, rtts[int(len(rtts) * 0.999)] * 1000, len(rtts)


def expiry_stall(a):
    n = 100000 if a.quick else 1000000
    t = Tubed(a.tubed, "max_age = 6s\n")
    try:
        idle_worst, idle_p999, _ = probe(t.port, 3.0)
        t0 = time.time()
        bench_put(a.bench, t.port, n)
        put_s = time.time() - t0
        # The jobs expire 6 s after their puts: probe from before the first
        # one expires until after the last.
        wait = 6 - (time.time() - t0) - 0.5
        if wait > 0:
            time.sleep(wait)
        worst, p999, probes = probe(t.port, put_s + 3.0)
        left = stat(t.port, "current-jobs-ready")
    finally:
        t.stop()
    return ("expiry of %d jobs put in %.1f s" % (n, put_s),
            "probe round trips: longest %.1f ms, p99.9 %.2f ms (%d probes); idle server: "
            "longest %.1f ms, p99.9 %.2f ms; %s left ready"
            % (worst, p999, probes, idle_worst, idle_p999, left), "")


def stat(port, key):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"stats\r\n")
    data = b""
    while b"\n\r\n" not in data:
        data += s.recv(65536)
    s.close()
    for line in data.decode().splitlines():
        if line.startswith(key + ":"):
            return line.split(": ", 1)[1]
    return "?"


def pipelined_puts(port, tube, n, body=b"x" * 100):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"use " + tube + b"\r\n")
    s.recv(256)
    cmd = b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body)
    batch = 1000
    t0 = time.perf_counter()
    for _ in range(n // batch):
        s.sendall(cmd * batch)
        got = 0
        while got < batch:
            got += s.recv(1 << 20).count(b"\r\n")
    dt = time.perf_counter() - t0
    s.close()
    return n / dt


def fanout(a):
    n = 50000 if a.quick else 200000
    t = Tubed(a.tubed, "fanout = true\n")
    try:
        keep = []
        for i in range(10):
            c = socket.create_connection(("127.0.0.1", t.port))
            c.sendall(b"use p+c%d\r\n" % i)
            c.recv(256)
            keep.append(c)
        plain = pipelined_puts(t.port, b"solo", n)
        parent = pipelined_puts(t.port, b"p", n)
        copies = int(stat(t.port, "total-jobs")) - 2 * n
        for c in keep:
            c.close()
    finally:
        t.stop()
    return ("put into a parent with 10 fanout children (one client, pipelined)",
            "%.0f puts/s = %.0f copies/s (%d copies made); %.0f puts/s without children"
            % (parent, parent * 10, copies, plain), "%.2f" % (parent / plain))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tubed", default=os.path.join(REPO, "build", "tubed"))
    ap.add_argument("--bench", default=os.path.join(REPO, "build", "tubed-bench"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    rows = [put_with_limits(a), expiry_stall(a), fanout(a)]
    print("| workload | result | ratio |")
    print("| --- | --- | --- |")
    for r in rows:
        print("| %s | %s | %s |" % r)


if __name__ == "__main__":
    main()
