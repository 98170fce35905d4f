#!/usr/bin/env python3
"""Puts into a full tube that discards, against plain puts (make bench).

    python3 tests/bench/discard.py [--tubed build/tubed] [--jobs N] [--cap M]

Starts tubed on a free 127.0.0.1 port with a config file holding tube `d`
(max_items = M, discard_old_when_full = true) and a plain tube `p`; puts N
jobs of 5 bytes into `p`, then N into `d` (the last N - M of them each
discard the oldest job), 1,000 pipelined per batch, and prints both times
and their ratio. The server is stopped by its pid.
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

from benchlib import free_port, wait_listening


def put_all(s, tube, n):
    s.sendall(b"use %s\r\n" % tube)
    if not s.recv(100).startswith(b"USING"):
        sys.exit("discard: use %s failed" % tube.decode())
    batch = b"put 0 0 60 5\r\nhello\r\n" * 1000
    start = time.monotonic()
    for _ in range(n // 1000):
        s.sendall(batch)
        got = b""
        while got.count(b"\r\n") < 1000:
            d = s.recv(1 << 20)
            if not d:
                sys.exit("discard: connection closed")
            got += d
        if got.count(b"INSERTED") != 1000:
            sys.exit("discard: unexpected replies: %r" % got[:200])
    return time.monotonic() - start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tubed", default="build/tubed")
    ap.add_argument("--jobs", type=int, default=200000)
    ap.add_argument("--cap", type=int, default=100000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        conf = os.path.join(d, "tubed.conf")
        with open(conf, "w") as f:
            f.write("[tube d]\nmax_items = %d\ndiscard_old_when_full = true\n" % a.cap)
        port = free_port()
        proc = subprocess.Popen([a.tubed, "-l", "127.0.0.1", "-p", str(port), "--config", conf],
                                stderr=subprocess.DEVNULL)
        try:
            wait_listening(port, proc, what="discard: tubed")
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            plain = put_all(s, b"p", a.jobs)
            full = put_all(s, b"d", a.jobs)
        finally:
            proc.kill()
            proc.wait()
    print("| puts | plain tube | full tube, discarding (max_items %d) | plain / full |" % a.cap)
    print("|---|---:|---:|---:|")
    print("| %d | %.2f s | %.2f s | %.2f |" % (a.jobs, plain, full, plain / full))


if __name__ == "__main__":
    main()
