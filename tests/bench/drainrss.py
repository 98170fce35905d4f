#!/usr/bin/env python3
"""Memory after a drain (part of `make bench`).

    python3 tests/bench/drainrss.py [--tubed build/tubed] [--bench build/tubed-bench]
                                    [--sizes 1024,2048,4000,4096] [--bytes 1G]
                                    [--settle 5] [--quick]

Part of `make bench` (after policies.py); QUICK=1 or --quick: 64 MiB and
1 s of idle, a smoke test.

For each body size, on a freshly started tubed (in memory, no binlog, `-z 16777216`):
pipelined puts of --bytes worth of bodies into one tube (10 connections x
16 in flight), then a drain of every job (reserve + delete over 10
connections), then --settle seconds of idle.  VmRSS from /proc/PID/status
before the puts, at the end of the puts, at the end of the drain and after
the idle seconds; the table's figure is the last one minus the first.

A probe client does `stats-job 0` round trips (answered NOT_FOUND) from
the start of the drain to the end of the idle seconds, so a pause of the
server while it gives memory back shows as its longest round trip, next to
the same probe on the idle server before the puts.

Figures are reported, never asserted: machines are noisy.
"""

import argparse
import os
import socket
import subprocess
import sys
import threading
import time

from benchlib import Tubed, rss_mib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def bench(a, port, *args):
    out = subprocess.run([a.bench, "-p", str(port), "-q", "--csv"] + list(args),
                         capture_output=True, text=True, timeout=900)
    if out.returncode:
        sys.exit("drainrss.py: tubed-bench failed: " + out.stderr)


class Probe(threading.Thread):
    """Round trips until stopped; the longest, in ms, and how many."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.halt = threading.Event()
        self.worst, self.count = 0.0, 0

    def run(self):
        while not self.halt.is_set():
            t0 = time.perf_counter()
            self.sock.sendall(b"stats-job 0\r\n")
            got = b""
            while not got.endswith(b"\r\n"):
                chunk = self.sock.recv(64)
                if not chunk:
                    return
                got += chunk
            self.worst = max(self.worst, time.perf_counter() - t0)
            self.count += 1
            time.sleep(0.0005)

    def stop(self):
        self.halt.set()
        self.join()
        self.sock.close()
        return self.worst * 1000, self.count


def one_size(a, size):
    n = max(1, a.bytes // size)
    # -z: bodies past the default 65,535 bytes may be measured too.
    t = Tubed(a.tubed, args=["-z", str(16 << 20)])
    try:
        idle = Probe(t.port)
        idle.start()
        time.sleep(1.0)
        idle_worst, _ = idle.stop()
        start = rss_mib(t.proc.pid)
        bench(a, t.port, "-w", "put", "--tube", "drain", "-c", "10", "-P", "16",
              "-s", str(size), "-n", str(n))
        full = rss_mib(t.proc.pid)
        p = Probe(t.port)
        p.start()
        bench(a, t.port, "-w", "reserve-delete", "--tube", "drain", "--prefill", "0",
              "-c", "10", "-P", "1", "-s", str(size), "-n", str(n))
        drained = rss_mib(t.proc.pid)
        time.sleep(a.settle)
        after = rss_mib(t.proc.pid)
        worst, probes = p.stop()
    finally:
        t.stop()
    return ("RSS %g s after draining %d jobs of %d B (%.0f MiB of bodies)"
            % (a.settle, n, size, n * size / 2**20),
            "start %.1f MiB, full %.1f, drained %.1f, %g s later %.1f; probe: longest "
            "round trip %.1f ms (%d probes), idle server %.1f ms"
            % (start, full, drained, a.settle, after, worst, probes, idle_worst),
            "%+.1f MiB" % (after - start))


def parse_bytes(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tubed", default=os.path.join(REPO, "build", "tubed"))
    ap.add_argument("--bench", default=os.path.join(REPO, "build", "tubed-bench"))
    ap.add_argument("--sizes", default="1024,2048,4000,4096")
    ap.add_argument("--bytes", default="1G")
    ap.add_argument("--settle", type=float, default=5.0)
    ap.add_argument("--quick", action="store_true", help="64 MiB, 1 s (also QUICK=1)")
    a = ap.parse_args()
    a.quick = a.quick or os.environ.get("QUICK") == "1"  # as `QUICK=1 make bench`
    a.bytes = parse_bytes("64M" if a.quick else a.bytes)
    if a.quick:
        a.settle = 1.0
    rows = [one_size(a, int(s)) for s in a.sizes.split(",")]
    print("| workload | result | after - start |")
    print("| --- | --- | --- |")
    for r in rows:
        print("| %s | %s | %s |" % r)


if __name__ == "__main__":
    main()
