#!/usr/bin/env python3
"""Allocation failure sweeps: fixed sessions replayed once per failure index
N = 0..COUNT-1, with the harness's injection flag set, so that the N-th
allocation after setup fails (each harness arms alloc_fail_after(N + 1)
once its connections are open).

| session | harness        | what it does                                   | variants        |
|---------|----------------|------------------------------------------------|-----------------|
| conn    | fuzz_conn      | a beanstalk producer and a wide worker: puts,  | mem, binlog     |
|         |                | delays, reserve, release, bury, kick, touch,   |                 |
|         |                | pause, stats, delete, quit, and the operator's |                 |
|         |                | commands (stats-tubes, list-jobs, move-job,    |                 |
|         |                | flush-tube, stats-binlog)                      |                 |
| mc      | fuzz_mc_conn   | two memcache clients and a beanstalk one on    | mem, binlog     |
|         |                | the same engine: set, get, /open, /close,      |                 |
|         |                | /abort, /peek, waits (t=) ended by a set or a  |                 |
|         |                | put and one timing out, delete, flush,         |                 |
|         |                | flush_all, stats, version, monitor/confirm, a  |                 |
|         |                | fanout parent, a discarding tube, a full one,  |                 |
|         |                | max_age moving jobs to a dead-letter tube, a   |                 |
|         |                | TTR running out on a reserve                   |                 |
| reload  | fuzz_mc_conn   | jobs in every state in policy tubes, a fanout  | mem, binlog     |
|         |                | child, an open job, a waiting get; the config  |                 |
|         |                | reloaded three times (A -> B -> A -> B, see    |                 |
|         |                | fuzz_mc_conn.c), with sets and expiry between  |                 |
| access  | fuzz_conn      | an admin, a producer,read listener on "a*,     | mem, binlog     |
|         |                | default" and a worker listener on "b*": every  |                 |
|         |                | refusal (role, tube by name, job by id), body  |                 |
|         |                | of a refused put, a connection that starts     |                 |
|         |                | with nothing used or watched                   |                 |
| listener| fuzz_mc_conn   | a fourth memcache client through a restricted  | mem, binlog     |
|         |                | listener: allowed and refused commands, an open|                 |
|         |                | job and a waiting get a reload takes the tubes |                 |
|         |                | of, refusals under the other text, and back    |                 |
| http    | fuzz_http_conn | GET /metrics, /tubes.json, /, /healthz, a 404, |  plain, odd     |
|         |                | a HEAD, a 405, two requests kept alive, an     |                 |
|         |                | HTTP/1.0 one, with jobs in a few tubes         |                 |

Variants: mem, no binlog; binlog, a binlog with -f 0 (fuzz_conn,
fuzz_mc_conn); plain and odd (odd tube names, draining, the binlog
unhealthy: the 503s) for fuzz_http_conn.

Every run must end with well-formed replies, the server's counters
consistent (recounted after every step: fz_check_server_with(), and for
fuzz_mc_conn every tube's policy against the config in force) and no leak
(LeakSanitizer at the end of the process). A failed allocation may only
show as the protocol's error (OUT_OF_MEMORY, BURIED, SERVER_ERROR, a 500,
a closed connection) or a refused reload.

COUNT per session covers the whole session: `run` first replays each
variant twice with FUZZ_COUNT_ALLOCS=1 (the harness then counts the
allocations the script makes instead of failing one) and fails if COUNT
is not above the larger total.

Usage (from tests/fuzz):
  mk_sweep.py write OUTDIR [SESSION=COUNT ...]    only write the inputs
  mk_sweep.py run BUILDDIR [SESSION=COUNT ...]    write BUILDDIR/sweep/,
      check the counts, run every input once, print one line per session;
      non-zero if any run failed (its log: BUILDDIR/sweep-SESSION.log)
  mk_sweep.py regress regress/fuzz_mc_conn        (re)write the minimised
      inputs of the bugs the sweeps found (README.md, "Found so far")
"""

import os
import re
import shutil
import subprocess
import sys
import time

# ---- script steps of fuzz_conn and fuzz_mc_conn --------------------------------


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
    """n (1..8) extra loop iterations."""
    return bytes([(55 + n) << 2])


def close(c):
    """Client c closes its end."""
    return bytes([(53 << 2) | c])


# ---- the sessions ---------------------------------------------------------------


def conn_session():
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


# fuzz_mc_conn's config (conf_text): f fanout; l max_items 2, discarding;
# m max_items 1; e max_age 1s -> dead; t ttr 1s, priority 0.
# Connections 0 and 1 speak memcache, 2 beanstalk.
def mc_session():
    s = b""
    s += write(0, b"version\r\nstatus\r\nset a 0 0 5\r\nhello\r\nset a 0 0 3\r\nabc\r\n"
                  b"set a 0 0 1 noreply\r\nx\r\nset a 0 0 2\r\nyy\r\n")
    s += loops(1)
    s += write(1, b"get a\r\ngets a/open\r\nget a/peek\r\nget a/close\r\nget a/open\r\n"
                  b"get a/abort\r\nget a/close/open\r\nget a/close\r\n")
    s += loops(1)
    # Eight tubes timed by delayed beanstalk jobs fill the tube timers'
    # heap; then an expiry times a ninth tube that holds another job.
    s += write(2, b"".join(b"use d%d\r\nput 0 100 10 1\r\nd\r\n" % i for i in range(1, 9)))
    s += loops(1)
    s += write(0, b"set z 0 0 1\r\na\r\nset z 0 10 1\r\nb\r\n")
    s += loops(1)
    # A get waiting, ended by a set.
    s += write(1, b"get w/t=5000\r\n")
    s += loops(1)
    s += write(0, b"set w 0 0 4\r\nwake\r\n")
    s += loops(2)
    # A get/open waiting, ended by a beanstalk put; then closed.
    s += write(1, b"get q/open/t=5000\r\n")
    s += loops(1)
    s += write(2, b"use q\r\nput 0 0 10 2\r\nqq\r\n")
    s += loops(2)
    s += write(1, b"get q/close\r\n")
    # A wait that times out.
    s += write(1, b"get w/t=200\r\n")
    s += advance(300)
    s += loops(2)
    # A beanstalk reserve waiting, ended by a memcache set.
    s += write(2, b"watch r\r\nignore default\r\nreserve-with-timeout 5\r\n")
    s += loops(1)
    s += write(0, b"set r 0 0 2\r\nrr\r\n")
    s += loops(2)
    # Fanout: the child f+x registers when named, a set to f is copied.
    s += write(1, b"get f+x\r\n")
    s += write(0, b"set f 0 0 3\r\npar\r\nset f 0 0 3\r\npa2\r\n")
    s += write(1, b"get f+x\r\nget f\r\nget f+x/peek\r\n")
    # Limits: l discards its oldest, m refuses.
    s += write(0, b"set l 0 0 1\r\n1\r\nset l 0 0 1\r\n2\r\nset l 0 0 1\r\n3\r\n"
                  b"set m 0 0 1\r\n1\r\nset m 0 0 1\r\n2\r\n")
    # Expiry: e moves to dead after 1 s, x's own exptime ends it.
    s += write(0, b"set e 0 0 2\r\nee\r\nset e 0 60 2\r\ne2\r\nset x 0 1 2\r\nxx\r\n")
    # TTR: the beanstalk worker reserves t's job (ttr 1s) and lets it run out.
    s += write(0, b"set t 0 0 1\r\nt\r\n")
    s += write(2, b"watch t\r\nreserve-with-timeout 0\r\n")
    s += loops(1)
    s += advance(1500)
    s += loops(3)
    s += write(1, b"get dead\r\nget x\r\nget t/open\r\nget e/peek\r\n")
    s += write(0, b"flush_expired x\r\nflush_all_expired\r\n")
    # The operator side: stats documents, delete, flush, monitor/confirm.
    s += write(0, b"stats\r\ndump_stats\r\ndump_stats a l\r\ndump_config\r\n")
    s += loops(1)
    s += write(0, b"set b 0 0 1\r\n1\r\nset b 0 0 1\r\n2\r\ndelete b\r\n"
                  b"set c 0 0 1\r\n1\r\nflush c\r\n"
                  b"set mon 0 0 1\r\n1\r\nset mon 0 0 1\r\n2\r\n")
    s += write(1, b"monitor mon 1 2\r\nconfirm mon 1\r\n")
    s += loops(1)
    s += write(2, b"use a\r\nput 5 0 10 3\r\nbsj\r\nstats-tube a\r\n")
    s += write(1, b"get a\r\nget a/open\r\n")
    s += write(0, b"flush_all\r\nstats\r\n")
    s += loops(2)
    # Hang-ups with jobs open (a memcache /open, the beanstalk reservation).
    s += write(1, b"quit\r\n")
    s += close(2)
    s += loops(2)
    return s


# Reloads between fuzz_mc_conn's conf_text (A) and conf_text_b (B), with
# jobs in every state around them. A -> B: f loses fanout (f+x is let go),
# g gains it, l and m change limits, e's max_age 1s -> 3s, t and o lose
# their sections, n gets max_age 2s, dead a limit, p* a size limit. B -> A
# the other way round (e's jobs now past their 1 s expire at once). At the
# last reload (A -> B) o, the only tube timed, loses its expiry while n
# gains one.
def reload_session():
    s = b""
    s += write(0, b"set o 0 0 1\r\no\r\n")
    s += write(0, b"set e 0 0 2\r\ne1\r\nset e 0 0 2\r\ne2\r\nset f 0 0 1\r\nf\r\n"
                  b"set l 0 0 1\r\n1\r\nset l 0 0 1\r\n2\r\nset t 0 0 1\r\nt\r\n"
                  b"set n 0 0 1\r\nn\r\nset g 0 0 1\r\ng\r\nset p1 0 0 60\r\n"
                  + b"p" * 60 + b"\r\n")
    s += write(1, b"get f+x\r\nget g+y\r\nget e/open\r\n")
    s += write(2, b"use n\r\nput 0 5 10 2\r\nnd\r\nuse dead\r\nput 0 0 10 1\r\nd\r\n"
                  b"put 0 0 10 1\r\nd\r\nput 0 0 10 1\r\nd\r\nwatch t\r\nwatch n\r\n"
                  b"reserve-with-timeout 0\r\n")
    s += loops(1)
    s += write(1, b"get w/t=20000\r\n")
    s += loops(1)
    s += write(0, b"reload\r\n")  # A -> B
    s += loops(2)
    s += write(0, b"dump_config\r\nset f 0 0 2\r\nff\r\nset g 0 0 2\r\ngg\r\nget g+y\r\n"
                  b"set g 0 0 2\r\ng2\r\nset l 0 0 1\r\n3\r\nset l 0 0 1\r\n4\r\n"
                  b"set n 0 0 1\r\nN\r\nset p2 0 0 60\r\n" + b"q" * 60 + b"\r\n"
                  b"set p3 0 0 5\r\nsmall\r\nget g+y\r\n")
    s += loops(1)
    s += advance(2500)  # n's jobs pass their new 2 s
    s += loops(2)
    s += write(0, b"reload\r\n")  # B -> A
    s += loops(2)
    s += advance(1500)
    s += loops(2)
    s += write(0, b"set w 0 0 1\r\nw\r\nset f 0 0 1\r\nF\r\nget f+x\r\nset n 0 0 1\r\nN\r\n")
    s += loops(1)
    s += write(1, b"get e/close\r\nget dead\r\nget dead/open\r\n")
    s += write(2, b"release 7 0 0\r\nstats-tube t\r\n")
    s += write(0, b"reload\r\nstats\r\ndump_stats\r\n")  # A -> B
    s += loops(2)
    s += write(2, b"quit\r\n")
    s += write(1, b"quit\r\n")
    s += loops(2)
    return s


# fuzz_conn with four connections: 2 and 3 come through restricted
# listeners (fuzz_conn.c: 2 producer,read on "a*, default"; 3 worker on
# "b*", starting with nothing used or watched). Jobs 1 (secret), 2 and 3
# (b-1), 4 (a-1) come from the admin connection 0 first.
def access_session():
    s = b""
    s += write(0, b"use secret\r\nput 0 0 60 6\r\nsecret\r\nuse b-1\r\n"
                  b"put 0 0 60 2\r\nb2\r\nput 0 0 60 2\r\nb3\r\nuse a-1\r\n"
                  b"put 0 0 60 2\r\na4\r\n")
    s += loops(1)
    s += write(2, b"put 0 0 60 1\r\nd\r\nuse secret\r\nput 0 0 60 1\r\nx\r\n"
                  b"use a-2\r\nput 0 0 60 2\r\na2\r\nreserve\r\npeek 1\r\n"
                  b"stats-job 1\r\nstats-job 4\r\npeek 4\r\nlist-tubes\r\n"
                  b"stats-tubes\r\nstats-tube secret\r\nstats-tube a-1\r\n"
                  b"list-jobs a-1 all 0 10\r\nlist-jobs secret all 0 10\r\nkick 1\r\n"
                  b"stats-listeners\r\npause-tube a-1 1\r\nwatch a-1\r\n"
                  b"ignore default\r\nlist-tubes-watched\r\npeek-ready\r\n"
                  b"list-tube-used\r\ndelete 4\r\nmove-job 4 a-3\r\n")
    s += loops(1)
    s += write(3, b"put 0 0 60 3\r\nabc\r\nreserve\r\nreserve-with-timeout 0\r\n"
                  b"list-tubes-watched\r\npeek-ready\r\nlist-tube-used\r\n"
                  b"watch secret\r\nwatch b-1\r\nreserve-with-timeout 0\r\n"
                  b"touch 2\r\nrelease 2 0 0\r\nreserve-job 3\r\nbury 3 0\r\n"
                  b"delete 1\r\nreserve-job 1\r\ntouch 1\r\nrelease 1 0 0\r\n"
                  b"bury 1 0\r\nkick-job 3\r\nignore b-1\r\nlist-tubes\r\n"
                  b"stats-tubes\r\nreserve-with-timeout 0\r\ndelete 2\r\n")
    s += loops(1)
    s += write(1, b"stats-listeners\r\nkick-job 3\r\nmove-job 3 a-1\r\n"
                  b"flush-tube secret\r\nlist-tubes\r\n")
    s += loops(1)
    s += write(3, b"watch b-2\r\nreserve-with-timeout 1\r\n")
    s += write(0, b"use b-2\r\nput 0 0 60 1\r\nw\r\n")
    s += loops(2)
    s += write(3, b"quit\r\n")
    s += write(2, b"quit\r\n")
    s += loops(2)
    return s


# fuzz_http_conn's steps: write, read (and check) the replies, loop.
def hwrite(c, data):
    out = b""
    for i in range(0, len(data), 255):
        part = data[i:i + 255]
        out += bytes([c, len(part)]) + part
    return out


def hread(c, n=1):
    return bytes([(48 << 2) | c]) * n


def get(path, extra=b"", version=b"1.1", method=b"GET"):
    return method + b" " + path + b" HTTP/" + version + b"\r\nHost: tubed\r\n" + extra + b"\r\n"


def http_session():
    s = b""
    s += hwrite(0, get(b"/metrics")) + hread(0, 3)
    s += hwrite(0, get(b"/tubes.json")) + hread(0, 3)
    s += hwrite(0, get(b"/")) + hread(0, 4)
    s += hwrite(0, get(b"/healthz")) + hread(0)
    s += hwrite(0, get(b"/no/such/page")) + hread(0)
    s += hwrite(0, get(b"/metrics", method=b"HEAD")) + hread(0)
    s += hwrite(0, get(b"/metrics", method=b"DELETE")) + hread(0)
    # Keep-alive: two requests in one write, both answered.
    s += hwrite(1, get(b"/metrics") + get(b"/tubes.json")) + hread(1, 4)
    s += hwrite(1, get(b"/", version=b"1.0", extra=b"Connection: keep-alive\r\n")) + hread(1, 4)
    s += hwrite(1, get(b"/healthz", version=b"1.0")) + hread(1, 2)
    return s


def listener_session():
    """Four memcache clients, the fourth through the restricted [listen r]
    (fuzz_mc_conn.c): sets and gets it may and may not make, an open job
    and a waiting get in tubes a reload then takes from it (the wait ends,
    the job goes back), refusals under the other text, and back."""
    s = b""
    s += write(3, b"set e 0 0 1\r\na\r\nset q1 0 0 2\r\nbb\r\nget e/open\r\nget x\r\n"
                  b"set zz 0 0 1\r\nz\r\nget q1/peek\r\n")
    s += write(3, b"get f/t=5000\r\n") + loops(1)
    s += write(0, b"reload\r\n") + loops(1)
    s += write(3, b"set q1 0 0 1\r\nc\r\nget q1/open\r\nget e\r\nstats\r\nget g/t=100\r\n")
    s += write(1, b"set g 0 0 1\r\nd\r\n") + loops(2)
    s += write(3, b"get dead/t=3000\r\n") + loops(1)
    s += write(0, b"reload\r\n") + advance(1000) + loops(1)
    s += write(3, b"get q1/close\r\nget e/open\r\ndelete e\r\nflush_all\r\nshutdown\r\n")
    s += write(2, b"set dead 0 0 1\r\nz\r\n") + loops(1)
    s += write(0, b"reload\r\n") + loops(1)
    s += write(3, b"get e/open\r\n") + close(3) + loops(2)
    return s


# name: (harness, count, {variant: header bytes before the steps}, steps)
# fuzz_conn / fuzz_mc_conn flags: bits 0-1 connections - 1, bit 2 binlog,
# bit 3 injection, bit 5 (fuzz_mc_conn) the last connection speaks
# beanstalk, bit 6 -f 0; then the failure index, 2 bytes.
# fuzz_http_conn flags: bits 0-1 connections - 1, bit 2 draining, bit 3
# odd tube names, bit 4 injection, bit 5 binlog unhealthy, bit 6 jobs,
# bit 7 a 2-byte failure index.
# Counts: the sessions made these many allocations when they were set
# (without / with the binlog; with -f 0 a few more or less from run to
# run): conn 94 / ~102, access 63 / ~67, mc 243 / ~268, reload 138 / ~141,
# http 24 / 26.
# `run` fails if a session outgrows its count.
MC = 0x02 | 0x08 | 0x20
HTTP = 0x01 | 0x10 | 0x40 | 0x80
SESSIONS = {
    "conn": ("fuzz_conn", 200, {"mem": 0x01 | 0x08, "binlog": 0x01 | 0x08 | 0x04 | 0x40},
             conn_session),
    "access": ("fuzz_conn", 300, {"mem": 0x03 | 0x08, "binlog": 0x03 | 0x08 | 0x04 | 0x40},
               access_session),
    "mc": ("fuzz_mc_conn", 400, {"mem": MC, "binlog": MC | 0x04 | 0x40}, mc_session),
    "reload": ("fuzz_mc_conn", 250, {"mem": MC, "binlog": MC | 0x04 | 0x40}, reload_session),
    "listener": ("fuzz_mc_conn", 200, {"mem": 0x03 | 0x08, "binlog": 0x03 | 0x08 | 0x04 | 0x40},
                 listener_session),
    "http": ("fuzz_http_conn", 64, {"plain": HTTP, "odd": HTTP | 0x04 | 0x08 | 0x20},
             http_session),
}


# ---- regression inputs of the bugs the sweeps found ------------------------------

# regress/fuzz_mc_conn/<name>: (flags, failure index, steps). The failure
# indexes are those that hit the allocation in question when the input was
# made; the sweeps are what keeps covering them as the code changes.
def regress_inputs():
    delayed = b"".join(b"use d%d\r\nput 0 100 10 1\r\nd\r\n" % i for i in range(1, 9))
    rekey = (write(0, b"set n 0 0 1\r\nn\r\n") + loops(1) + write(0, b"reload\r\n") + loops(1)
             + advance(2500) + loops(2) + write(0, b"get n\r\n") + loops(1))
    return {
        # A reload that shortens max_age (B's 3 s back to A's 1 s) left the
        # tube's timer at the old, later time: expiry 2 s late.
        "reload-max-age-keeps-old-tube-timer": (0x00, 0, (
            write(0, b"reload\r\n") + loops(1) + write(0, b"set e 0 0 1\r\nx\r\nreload\r\n")
            + loops(1) + advance(1500) + loops(2) + write(0, b"get dead\r\n") + loops(1))),
        # A job past its max_age comes back from a worker that no longer
        # watches its tube (a memcache hang-up with the job open, a
        # beanstalk release after ignore): moving it to the dead-letter
        # tube freed its tube, which was then counted (use after free).
        "uaf-expire-move-frees-tube-memcache-hangup": (0x00, 0, (
            write(0, b"set e 0 0 2\r\nee\r\nget e/open\r\n") + advance(1500) + loops(1)
            + close(0) + loops(2))),
        "uaf-expire-move-frees-tube-beanstalk-release": (0x21, 0, (
            write(0, b"set e 0 0 2\r\nee\r\n")
            + write(1, b"watch e\r\nreserve-with-timeout 0\r\nignore e\r\n")
            + advance(1500) + loops(1) + write(1, b"release 1 0 0\r\n") + loops(2))),
        # A reload giving n a max_age, with the 9th, 10th, 11th, 12th
        # allocation failing: the array of the jobs to rekey, a job's
        # JobExt, the expiry heap, the tube timers' heap. The reload was
        # applied anyway and the job never expired.
        "reload-oom-rekey-array": (0x08, 8, rekey),
        "reload-oom-rekey-jobext": (0x08, 9, rekey),
        "reload-oom-rekey-expiry-heap": (0x08, 10, rekey),
        "reload-oom-rekey-tube-timer": (0x08, 11, rekey),
        # Eight tubes timed by delayed jobs fill the tube timers' heap; a
        # set with an exptime into z (which holds another job) cannot grow
        # it: the failed put's job stayed in z's expiry heap, then freed.
        "oom-expiry-timer-insert-leaves-freed-job-in-heap": (0x29, 41, (
            write(1, delayed) + loops(1) + write(0, b"set z 0 0 1\r\na\r\n") + loops(1)
            + write(0, b"set z 0 10 1\r\nb\r\n") + loops(1) + advance(20000) + loops(2)
            + write(0, b"get z\r\nget z\r\n") + loops(2))),
    }


def counts(args):
    c = {name: v[1] for name, v in SESSIONS.items()}
    for a in args:
        name, _, n = a.partition("=")
        if name not in c or not n.isdigit():
            sys.exit("mk_sweep.py: bad SESSION=COUNT: %s" % a)
        c[name] = int(n)
    return c


def write_inputs(out, count):
    """OUTDIR/<session>/<variant>-NNNN for every N; returns the dirs."""
    dirs = {}
    for name, (harness, _, variants, steps) in SESSIONS.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        body = steps()
        for var, flags in variants.items():
            for n in range(count[name]):
                with open(os.path.join(d, "%s-%04d" % (var, n)), "wb") as f:
                    f.write(bytes([flags, n >> 8, n & 0xff]) + body)
        dirs[name] = d
    return dirs


def run(build, count):
    out = os.path.join(build, "sweep")
    shutil.rmtree(out, ignore_errors=True)
    dirs = write_inputs(out, count)
    fail = 0
    for name, (harness, _, variants, _) in SESSIONS.items():
        exe = os.path.join(build, harness)
        log = os.path.join(build, "sweep-%s.log" % name)
        t0 = time.time()
        # The session's allocations, per variant (the harness counts; with
        # -f 0 the sync thread's timing may change them by a few: the most
        # of two runs).
        totals = []
        env = dict(os.environ, FUZZ_COUNT_ALLOCS="1")
        for v in variants:
            first = os.path.join(dirs[name], "%s-0000" % v)
            p = subprocess.run([exe, "-runs=2", first], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            got = [int(x) for x in re.findall(rb"^allocations: (\d+)$", p.stdout, re.M)]
            if p.returncode != 0 or not got:
                sys.stdout.write(p.stdout.decode(errors="replace")[-3000:])
                break
            totals.append(max(got))
        if len(totals) != len(variants):
            print("== sweep %s (%s): counting the allocations FAILED" % (name, harness))
            fail = 1
            continue
        per = ", ".join("%s %d" % (v, t) for v, t in zip(variants, totals))
        if max(totals) >= count[name]:
            print("== sweep %s (%s): the session makes %s allocations; COUNT %d does not "
                  "cover them: raise it in mk_sweep.py" % (name, harness, per, count[name]))
            fail = 1
            continue
        files = sorted(os.path.join(dirs[name], f) for f in os.listdir(dirs[name]))
        with open(log, "wb") as lf:
            r = subprocess.run([exe, "-runs=1"] + files, stdout=lf, stderr=subprocess.STDOUT)
        secs = time.time() - t0
        if r.returncode == 0:
            print("== sweep %s (%s): %d runs ok (%d variants x %d failure indexes; "
                  "allocations: %s) in %.0f s" % (name, harness, len(files), len(variants),
                                                  count[name], per, secs))
            continue
        with open(log, "rb") as lf:
            text = lf.read().decode(errors="replace")
        which = re.findall(r"^Running: (.*)$", text, re.M)
        sys.stdout.write("\n".join(text.splitlines()[-40:]) + "\n")
        print("== sweep %s (%s): FAILED at %s (log: %s)"
              % (name, harness, which[-1] if which else "?", log))
        fail = 1
    return fail


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("write", "run", "regress"):
        sys.exit(__doc__)
    if sys.argv[1] == "regress":
        os.makedirs(sys.argv[2], exist_ok=True)
        for name, (flags, n, steps) in regress_inputs().items():
            with open(os.path.join(sys.argv[2], name), "wb") as f:
                f.write(bytes([flags, n >> 8, n & 0xff]) + steps)
        return 0
    count = counts(sys.argv[3:])
    if sys.argv[1] == "write":
        write_inputs(sys.argv[2], count)
        return 0
    return run(sys.argv[2], count)


if __name__ == "__main__":
    sys.exit(main())
