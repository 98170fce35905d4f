#!/usr/bin/env python3
"""Inputs for fuzz_conn that sweep allocation failure over a fixed session.

One realistic session (two connections: a producer and a wide worker; puts,
delays, reserve, release, bury, kick, touch, pause, stats, delete, quit,
and tubed's operator commands: stats-tubes, list-jobs, move-job,
flush-tube, stats-binlog) is written once per failure index N = 0..COUNT-1, with fuzz_conn's injection
flag set, so the N-th allocation after the session starts fails. Variants
run without a binlog and with `-b -f 0`. Every run must end with the
server's counters consistent, well-formed replies and no leak (fuzz_conn
checks all three); a failed allocation may only show as OUT_OF_MEMORY,
BURIED or a closed connection. Usage: mk_sweep.py OUTDIR [COUNT]."""

import os
import sys


def write(c, data):
    """Steps writing data to connection c (at most 255 bytes a step)."""
    out = b""
    for i in range(0, len(data), 255):
        part = data[i:i + 255]
        out += bytes([c, len(part)]) + part
    return out


def advance(ms):
    """Advance the virtual clock by ms (< 256 000) milliseconds."""
    k = 0
    while ms > 255:
        ms //= 10
        k += 1
    return bytes([(48 + k) << 2, ms])


def loops(n):
    return bytes([(55 + n) << 2])


def session():
    watch = b"".join(b"watch t%d\r\n" % i for i in range(20))
    s = b""
    s += write(0, b"use a\r\nput 0 0 2 5\r\nhello\r\nput 1 2 1 3\r\nabc\r\n"
                  b"put 2 0 1 1\r\nx\r\nput 3 0 5 0\r\n\r\n")
    s += write(1, b"watch a\r\n" + watch + b"list-tubes-watched\r\n")
    s += write(1, b"reserve-with-timeout 0\r\nrelease 1 7 1\r\nreserve\r\n"
                  b"bury 3 9\r\nreserve-with-timeout 1\r\ntouch 4\r\n")
    s += loops(2)
    s += write(0, b"kick 10\r\nkick-job 2\r\npeek-ready\r\npeek-delayed\r\n"
                  b"peek-buried\r\nstats-job 1\r\nstats-tube a\r\nstats\r\n"
                  b"list-tubes\r\npause-tube a 1\r\n")
    s += advance(1500)
    s += loops(2)
    s += write(1, b"reserve\r\n")
    s += advance(3000)
    s += loops(3)
    s += write(0, b"delete 1\r\ndelete 2\r\ndelete 3\r\ndelete 4\r\n"
                  b"use t7\r\nput 0 0 1 2\r\nhi\r\n")
    s += write(1, b"ignore a\r\nreserve-with-timeout 0\r\nquit\r\n")
    s += loops(2)
    # The operator's commands on a few fresh jobs.
    s += write(0, b"use ops\r\nput 0 0 60 2\r\nop\r\nput 0 5 60 2\r\nod\r\n"
                  b"put 0 0 60 2\r\nob\r\nstats-tubes\r\nlist-jobs ops all 0 10\r\n"
                  b"list-jobs ops delayed 0 1\r\nmove-job 7 moved\r\nmove-job 8 ops\r\n"
                  b"stats-binlog\r\nflush-tube ops\r\nflush-tube moved\r\nstats-tubes\r\n")
    s += loops(2)
    return s


def main():
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 120
    os.makedirs(out, exist_ok=True)
    body = session()
    # flags: bits 0-1 = connections - 1 (two), bit 3 = inject failure;
    # variant b adds bit 2 (binlog) and bit 6 (-f 0 instead of -F).
    for name, flags in (("mem", 0x01 | 0x08), ("binlog", 0x01 | 0x08 | 0x04 | 0x40)):
        for n in range(count):
            with open(os.path.join(out, "%s-%04d" % (name, n)), "wb") as f:
                f.write(bytes([flags, n >> 8, n & 0xff]) + body)


if __name__ == "__main__":
    main()
